/* int8_rules.c: the policy side of INT8 linear lowering (include/h3/int8.h): the
 * `--int8=...` option text, the row-split decision with its measured table, the load-time
 * override H3_INT8_MAX_ROWS, and the summary of a lowered module (layers, bytes) that the
 * pass report, h3exec's report and the tests print.
 */
#include "h3/int8.h"
#include "h3/op_registry.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const h3_span no_span = {0};

/* Split decisions measured for this project with h3's own linear_int8 (cuBLASLt int8 GEMM +
 * dequantization, CUDA backend) on one H200, 2026-11-29, M = 32,704 rows, per GEMM shape
 * family (N, K): the fastest of unsplit and chunks of 4096, 8192, 16384 rows, "never
 * split" (max_rows 0) unless a split gains at least 2 % (dev/results/
 * 2026-11-29-h200-tests-bench-block-int8.txt). Shapes not listed follow the rule with
 * the default max_rows / min_split_n. docs/int8.md has the table and how to extend it. */
static const struct {
  int64_t n, k, max_rows;
} measured[] = {
    {21504, 5376, 4096}, /* qkv_proj: 7.21 ms unsplit, 6.80 in chunks of 4096 (8192: 7.17) */
    {5376, 7168, 0},     /* out_proj: 2.11 ms unsplit (4096: 2.34, 8192: 2.20, 16384: 2.13) */
    {28672, 5376, 4096}, /* fc1: 9.80 ms unsplit, 9.03 in chunks of 4096 (8192: 9.59) */
    {5376, 14336, 0},    /* fc2: 3.67 ms unsplit (4096: 3.99, 8192: 3.79, 16384: 3.68) */
};

h3_int8_options h3_int8_options_default(void) {
  h3_int8_options o = {0, H3_INT8_DEFAULT_MAX_ROWS, H3_INT8_DEFAULT_MIN_SPLIT_N, false};
  return o;
}

static const char *const keys_hint =
    "the keys are rotate (0 or 256), max_rows and min_split_n, e.g. "
    "--int8=rotate=256,max_rows=8192,min_split_n=8192";

/* One "key=value" item of length len at s. */
static h3_status parse_item(const char *s, size_t len, h3_int8_options *o, h3_diag *d) {
  const char *eq = memchr(s, '=', len);
  if (!eq || eq == s) {
    h3_diag_error(d, no_span, keys_hint, "--int8: expected KEY=VALUE, got '%.*s'", (int)len, s);
    return H3_ERR;
  }
  size_t kl = (size_t)(eq - s), vl = len - kl - 1;
  char val[32];
  if (vl == 0 || vl >= sizeof val) {
    h3_diag_error(d, no_span, "give an integer", "--int8: %.*s has %s value", (int)kl, s,
                  vl ? "a too long" : "no");
    return H3_ERR;
  }
  memcpy(val, eq + 1, vl);
  val[vl] = 0;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(val, &end, 10);
  if (errno || !end || *end) {
    h3_diag_error(d, no_span, "give an integer", "--int8: %.*s = '%s' is not an integer", (int)kl, s,
                  val);
    return H3_ERR;
  }
  if (kl == 6 && strncmp(s, "rotate", kl) == 0) {
    if (v != 0 && v != H3_INT8_GROUP) {
      h3_diag_error(d, no_span, "rotate=256 turns the Hadamard rotation on, rotate=0 off",
                    "--int8: rotate = %lld, expected 0 or 256", v);
      return H3_ERR;
    }
    o->rotate = (int)v;
  } else if (kl == 8 && strncmp(s, "max_rows", kl) == 0) {
    o->max_rows = v;
    o->rule_given = true;
  } else if (kl == 11 && strncmp(s, "min_split_n", kl) == 0) {
    if (v < 0) {
      h3_diag_error(d, no_span, "give 0 or a positive integer",
                    "--int8: min_split_n = %lld is negative", v);
      return H3_ERR;
    }
    o->min_split_n = v;
    o->rule_given = true;
  } else {
    h3_diag_error(d, no_span, keys_hint, "--int8: unknown key '%.*s'", (int)kl, s);
    return H3_ERR;
  }
  return H3_OK;
}

h3_status h3_int8_options_parse(const char *text, h3_int8_options *o, h3_diag *d) {
  *o = h3_int8_options_default();
  if (!text || !*text) return H3_OK;
  const char *p = text;
  for (;;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (parse_item(p, len, o, d) != H3_OK) return H3_ERR;
    if (!end) return H3_OK;
    p = end + 1;
  }
}

int64_t h3_int8_split_rows(int64_t m, int64_t n, int64_t k, const h3_int8_options *o) {
  int64_t max_rows = o->max_rows;
  bool split_n = n >= o->min_split_n;
  if (!o->rule_given)
    for (size_t i = 0; i < sizeof measured / sizeof measured[0]; i++)
      if (measured[i].n == n && measured[i].k == k) {
        max_rows = measured[i].max_rows;
        split_n = true;
      }
  return max_rows > 0 && m > max_rows && split_n ? max_rows : 0;
}

/* ---- the load-time override ------------------------------------------------------------ */
typedef struct {
  h3_module *m;
  h3_int8_options o;
} env_ctx;

const h3_value *h3_int8_gemm_weight(const h3_op *op) {
  if (op->code == H3_OP_LINEAR_INT8 && op->n_operands >= 4) return op->operands[2];
  if (op->code == H3_OP_MATMUL_I8 && op->n_operands == 2) return op->operands[1];
  return NULL;
}

static int set_chunks(h3_op *op, void *arg) {
  env_ctx *c = arg;
  const h3_value *wv = h3_int8_gemm_weight(op);
  if (!wv) return 0;
  const h3_type *q = &op->operands[0]->type, *w = &wv->type;
  int64_t k = q->dims[q->rank - 1], rows = k ? h3_type_numel(q) / k : 0;
  int64_t chunk = h3_int8_split_rows(rows, w->dims[0], k, &c->o);
  if (chunk > 0 || h3_op_attr(op, "chunk_rows"))
    h3_op_set_attr(c->m, (h3_op *)op, h3_attr_int(c->m, "chunk_rows", chunk));
  return 0;
}

void h3_int8_set_max_rows(h3_module *m, int64_t max_rows) {
  for (int g = 0; g < m->n_graphs; g++) {
    const h3_attr *a = h3_graph_attr(m->graphs[g], "int8_min_split_n");
    env_ctx c = {m, h3_int8_options_default()};
    c.o.max_rows = max_rows;
    c.o.rule_given = true;
    if (a && a->kind == H3_ATTR_INT) c.o.min_split_n = a->i;
    h3_region_walk(&m->graphs[g]->body, set_chunks, &c);
  }
}

h3_status h3_int8_apply_env(h3_module *m, bool *applied, h3_diag *d) {
  const char *s = getenv("H3_INT8_MAX_ROWS");
  *applied = false;
  if (!s || !*s) return H3_OK;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno || !end || *end) {
    h3_diag_error(d, no_span, "set it to an integer row count, or to 0 to disable row splitting",
                  "H3_INT8_MAX_ROWS = '%s' is not an integer", s);
    return H3_ERR;
  }
  h3_int8_set_max_rows(m, v);
  *applied = true;
  return H3_OK;
}

/* ---- summary ------------------------------------------------------------------------------ */
static int count_gemms(h3_op *op, void *arg) {
  h3_int8_summary *s = arg;
  if (h3_int8_gemm_weight(op)) {
    s->n_gemms++;
    if (h3_op_attr_int(op, "chunk_rows", 0) > 0) s->n_split++;
  }
  return 0;
}

void h3_int8_summarize(const h3_module *m, h3_int8_summary *s) {
  memset(s, 0, sizeof *s);
  int n_seen = 0;
  for (int g = 0; g < m->n_graphs; g++) {
    for (h3_op *op = m->graphs[g]->body.first; op; op = op->next) {
      if (!h3_op_is_load_time(op)) continue;
      const h3_value *pv = op->operands[0];
      bool seen = false;
      for (int g2 = 0; g2 <= g && !seen; g2++)
        for (h3_op *o2 = m->graphs[g2]->body.first; o2 && !seen && o2 != op; o2 = o2->next)
          seen = h3_op_is_load_time(o2) && o2->operands[0] == pv;
      if (seen) continue;
      const h3_param *p = pv->param;
      int64_t layers = 1;
      for (int i = 0; p && i < p->group_dims; i++) layers *= p->type.dims[i];
      int rot = (int)h3_op_attr_int(op, "rotate", 0);
      s->rotate = n_seen == 0 || s->rotate == rot ? rot : -1;
      n_seen++;
      s->n_layers += layers;
      s->bf16_bytes += h3_type_bytes(&pv->type);
      s->int8_bytes += h3_type_bytes(&op->results[0]->type);
      s->scale_bytes += h3_type_bytes(&op->results[1]->type);
    }
  }
  h3_module_walk((h3_module *)m, count_gemms, s);
}
