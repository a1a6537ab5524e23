/* dump_ops.c: h3exec --dump-ops (contract in dump_ops.h). */
#include "dump_ops.h"

#include "h3/op_registry.h"
#include "h3/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char name[96];
  h3_type type;
  void *data;
} dumped;

struct dump_ops {
  h3_backend *b;
  bool all, kind[H3_OPCODE_COUNT], operands[H3_OPCODE_COUNT];
  size_t max_bytes, bytes;
  dumped *t;
  size_t n, cap;
  int *runs; /* executions so far, by op id */
  int n_runs;
};

dump_ops *dump_ops_new(const char *kinds, h3_backend *b, size_t max_bytes, h3_diag *d) {
  dump_ops *x = calloc(1, sizeof *x);
  char *list = strdup(kinds);
  if (!x || !list) {
    free(x);
    free(list);
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "--dump-ops: out of memory");
    return NULL;
  }
  x->b = b;
  x->max_bytes = max_bytes;
  for (char *save = NULL, *k = strtok_r(list, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
    int found = !strcmp(k, "all");
    x->all |= found;
    char *plus = strstr(k, "+operands");
    if (plus && plus[9] == 0) *plus = 0;
    for (int c = 1; c < H3_OPCODE_COUNT && !found; c++)
      if (!strcmp(k, h3_opcode_name((h3_opcode)c))) {
        x->kind[c] = true;
        x->operands[c] = plus != NULL;
        found = 1;
      }
    if (!found) {
      h3_diag_error(d, (h3_span){0}, "op kinds are ops.def's names (h3c ops lists them), e.g. "
                    "router_topk,moe; or all", "--dump-ops: unknown op kind '%s'%s", k,
                    plus ? " (before +operands)" : "");
      free(list);
      dump_ops_free(x);
      return NULL;
    }
  }
  free(list);
  return x;
}

void dump_ops_reset(dump_ops *x) {
  for (size_t i = 0; i < x->n; i++) free(x->t[i].data);
  x->n = 0;
  x->bytes = 0;
  if (x->runs) memset(x->runs, 0, (size_t)x->n_runs * sizeof *x->runs);
}

void dump_ops_free(dump_ops *x) {
  if (!x) return;
  dump_ops_reset(x);
  free(x->t);
  free(x->runs);
  free(x);
}

/* The execution number of op `id` (0 for its first), counting this one. */
static int next_run(dump_ops *x, int id) {
  if (id >= x->n_runs) {
    int n = id + 1 > 2 * x->n_runs ? id + 1 : 2 * x->n_runs;
    int *r = realloc(x->runs, (size_t)n * sizeof *r);
    if (!r) return -1;
    memset(r + x->n_runs, 0, (size_t)(n - x->n_runs) * sizeof *r);
    x->runs = r;
    x->n_runs = n;
  }
  return x->runs[id]++;
}

/* Keeps a host copy of t as "op<ID>.<KIND>.L<LINE>.<WHAT><I>.n<RUN>". */
static h3_status keep(dump_ops *x, const h3_op *op, const h3_tensor *t, char what, int i, int run,
                      h3_diag *d) {
  size_t bytes = (size_t)h3_type_bytes(&t->type);
  if (x->bytes + bytes > x->max_bytes) {
    h3_diag_error(d, op->span, "name fewer op kinds, or dump a shorter run (--graph)",
                  "--dump-ops: the dumped tensors pass %zu MiB", x->max_bytes >> 20);
    return H3_ERR;
  }
  dumped *k = &x->t[x->n];
  snprintf(k->name, sizeof k->name, "op%d.%s.L%d.%c%d.n%d", op->id, h3_opcode_name(op->code),
           op->span.line, what, i, run);
  k->type = t->type;
  k->data = malloc(bytes ? bytes : 1);
  if (!k->data) {
    h3_diag_error(d, op->span, "name fewer op kinds, or dump a shorter run (--graph)",
                  "--dump-ops: out of memory");
    return H3_ERR;
  }
  if (bytes && x->b->ops->download(x->b, k->data, t->data, bytes, d) != H3_OK) {
    free(k->data);
    return H3_ERR;
  }
  x->bytes += bytes;
  x->n++;
  return H3_OK;
}

h3_status dump_ops_observe(void *ctx, const h3_op *op, const h3_tensor *in, int n_in,
                           const h3_tensor *out, int n_out, h3_diag *d) {
  dump_ops *x = ctx;
  if (!x->all && !x->kind[op->code]) return H3_OK;
  if (!x->operands[op->code]) n_in = 0;
  int run = next_run(x, op->id);
  size_t kept = (size_t)(n_in + n_out);
  if (run >= 0 && x->n + kept > x->cap) {
    size_t cap = 2 * x->cap + kept + 16;
    dumped *t = realloc(x->t, cap * sizeof *t);
    if (t) x->t = t, x->cap = cap;
  }
  if (run < 0 || x->n + kept > x->cap) {
    h3_diag_error(d, op->span, "name fewer op kinds, or dump a shorter run (--graph)",
                  "--dump-ops: out of memory");
    return H3_ERR;
  }
  h3_status st = H3_OK;
  for (int i = 0; st == H3_OK && i < n_in; i++) st = keep(x, op, &in[i], 'a', i, run, d);
  for (int i = 0; st == H3_OK && i < n_out; i++) st = keep(x, op, &out[i], 'r', i, run, d);
  return st;
}

h3_status dump_ops_write(dump_ops *x, const char *path, h3_diag *d) {
  h3_safetensors_writer *w = h3_safetensors_writer_new();
  h3_status st = w ? H3_OK : H3_ERR;
  if (!w) h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "--dump-ops: out of memory");
  for (size_t i = 0; st == H3_OK && i < x->n; i++)
    st = h3_safetensors_writer_add(w, x->t[i].name, x->t[i].type.dtype, x->t[i].type.rank,
                                   x->t[i].type.dims, x->t[i].data, d);
  char count[32];
  snprintf(count, sizeof count, "%zu", x->n);
  if (st == H3_OK) st = h3_safetensors_writer_metadata(w, "ops", count, d);
  if (st == H3_OK) st = h3_safetensors_writer_commit(w, path, d);
  h3_safetensors_writer_free(w);
  return st;
}
