/* stream.c: the ring that streams the blocks of h3_stream_find's values behind the compute,
 * and their host copies (runtime/stream.h has the contract).
 */
#include "stream.h"

#include "h3/op_registry.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct h3_stream {
  h3_backend *b;
  h3_stream_set set;
  h3_stream_info info;
  void **host;    /* by set index: the whole stack in host memory */
  bool *own;      /* by set index: host is st's (pinned or malloc'd), else pinned in place */
  bool *pinned;   /* by set index: host was pinned in place (unpin at free) */
  char *resident; /* blocks [0, R), slot layout */
  char *ring;     /* N slots */
};

static const h3_backend_ext *ext_of(const h3_stream *st) { return st->b->ext; }

h3_status h3_stream_new(const h3_module *m, h3_backend *b, int64_t budget, int64_t arena_bytes,
                        h3_stream **out, h3_stream_info *planned, h3_diag *d) {
  *out = NULL;
  h3_stream_set set;
  if (h3_stream_find(m, &set, d) != H3_OK) return H3_ERR;
  int64_t reserve = 0;
  if (!b->ops->host_memory) {
    const char *env = getenv("H3_DEVICE_RESERVE");
    reserve = (int64_t)1 << 30;
    if (env && !h3_size_parse(env, &reserve)) {
      h3_stream_set_free(&set);
      h3_diag_error(d, (h3_span){0}, "give a size such as 1GiB or 512MiB",
                    "H3_DEVICE_RESERVE='%s' is not a size", env);
      return H3_ERR;
    }
  }
  h3_residency_in in = {set.layers, set.block_bytes,
                        h3_stream_fixed_weight_bytes(m, &set) + arena_bytes + reserve, budget};
  h3_residency plan;
  h3_status ps = h3_residency_plan(&in, &plan, d);
  *planned =
      (h3_stream_info){plan, set.layers, set.block_bytes, budget, in.fixed_bytes, 0, -1, 0, 0};
  if (ps != H3_OK || plan.ring_slots == 0) {
    h3_stream_set_free(&set);
    return ps;
  }
  h3_stream *st = calloc(1, sizeof *st);
  if (st) {
    st->host = calloc((size_t)set.n, sizeof *st->host);
    st->own = calloc((size_t)set.n, sizeof *st->own);
    st->pinned = calloc((size_t)set.n, sizeof *st->pinned);
  }
  if (!st || !st->host || !st->own || !st->pinned) {
    if (st) free(st->host), free(st->own), free(st->pinned);
    free(st);
    h3_stream_set_free(&set);
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "out of memory planning the weight streaming");
    return H3_ERR;
  }
  st->b = b;
  st->set = set;
  st->info = *planned;
  *out = st;
  return H3_OK;
}

void h3_stream_free(h3_stream *st) {
  if (!st) return;
  const h3_backend_ext *x = ext_of(st);
  for (int i = 0; i < st->set.n; i++) {
    if (st->own[i] && x && x->host_free)
      x->host_free(st->b, st->host[i]);
    else if (st->own[i])
      free(st->host[i]);
    else if (st->pinned[i])
      x->host_unpin(st->b, st->host[i]);
  }
  if (st->resident) st->b->ops->release(st->b, st->resident);
  if (st->ring) st->b->ops->release(st->b, st->ring);
  free(st->host);
  free(st->own);
  free(st->pinned);
  h3_stream_set_free(&st->set);
  free(st);
}

bool h3_stream_holds(const h3_stream *st, const h3_value *v) {
  return st && h3_stream_set_index(&st->set, v) >= 0;
}

bool h3_stream_feeds(const h3_stream *st, const h3_param *p) {
  if (!st || !p->value) return false;
  for (int i = 0; i < st->set.n; i++) {
    const h3_value *v = st->set.v[i].v;
    if (v == p->value || (v->kind == H3_VALUE_RESULT && v->def->operands[0] == p->value))
      return true;
  }
  return false;
}

/* v's host copy in memory of st's (pinned when the backend can), allocated once. */
static h3_status own_copy(h3_stream *st, int i, const h3_value *v, h3_diag *d) {
  const h3_backend_ext *x = ext_of(st);
  size_t bytes = (size_t)h3_type_bytes(&v->type);
  if (st->host[i]) return H3_OK;
  st->host[i] = x && x->host_alloc ? x->host_alloc(st->b, bytes)
                                   : aligned_alloc(64, (bytes + 63) & ~(size_t)63);
  if (!st->host[i]) {
    char b[32];
    h3_diag_error(d, v->span,
                  "run on a machine with more host memory (every streamed stack is kept whole in "
                  "host memory)",
                  "out of host memory for the streamed weight '%s' (%s)", v->name ? v->name : "?",
                  h3_size_text((int64_t)bytes, b, sizeof b));
    return H3_ERR;
  }
  st->own[i] = true;
  return H3_OK;
}

/* Host buffers at least this large are page-locked in place: glibc maps them on pages of
 * their own, so no other buffer shares their pages. Smaller ones are copied. */
#define PIN_IN_PLACE_BYTES ((size_t)32 << 20)

h3_status h3_stream_hold(h3_stream *st, const h3_value *v, void *host, h3_diag *d) {
  int i = h3_stream_set_index(&st->set, v);
  const h3_backend_ext *x = ext_of(st);
  size_t bytes = (size_t)h3_type_bytes(&v->type);
  if (!x || !x->host_pin || (bytes >= PIN_IN_PLACE_BYTES && x->host_pin(st->b, host, bytes))) {
    st->host[i] = host;
    st->pinned[i] = x && x->host_pin;
    return H3_OK;
  }
  if (own_copy(st, i, v, d) != H3_OK) return H3_ERR;
  memcpy(st->host[i], host, bytes);
  return H3_OK;
}

void *h3_stream_host(h3_stream *st, const h3_value *v, h3_diag *d) {
  int i = h3_stream_set_index(&st->set, v);
  return own_copy(st, i, v, d) == H3_OK ? st->host[i] : NULL;
}

h3_status h3_stream_take(h3_stream *st, const h3_value *v, const void *dev, h3_diag *d) {
  void *host = h3_stream_host(st, v, d);
  if (!host || st->b->ops->download(st->b, host, dev, (size_t)h3_type_bytes(&v->type), d) != H3_OK)
    return H3_ERR;
  return st->b->ops->sync(st->b, d);
}

const h3_op *h3_stream_quantizer(const h3_stream *st, const h3_param *p) {
  for (int i = 0; st && p->value && i < st->set.n; i++) {
    const h3_value *v = st->set.v[i].v;
    if (v->kind != H3_VALUE_RESULT || v->def->operands[0] != p->value) continue;
    for (int r = 0; r < v->def->n_results; r++)
      if (h3_stream_set_index(&st->set, v->def->results[r]) < 0) return NULL;
    return v->def;
  }
  return NULL;
}

h3_status h3_stream_quantize(h3_stream *st, const h3_op *op, const void *host, h3_diag *d) {
  h3_tensor in = {op->operands[0]->type, (void *)host}, out[4];
  if (op->n_results > 4) {
    h3_diag_error(d, op->span, NULL, "%s: too many results", h3_opcode_name(op->code));
    return H3_ERR;
  }
  for (int r = 0; r < op->n_results; r++) {
    out[r] = (h3_tensor){op->results[r]->type, h3_stream_host(st, op->results[r], d)};
    if (!out[r].data) return H3_ERR;
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cores < 1 ? 1 : cores > 64 ? 64 : (int)cores;
  return h3_cpu_run_op(op, &in, 1, out, op->n_results, threads, 0, d);
}

/* The ring slot of streamed block (row) r >= R. */
static int slot_of(const h3_stream *st, int64_t r) {
  const h3_residency *p = &st->info.plan;
  return (int)((r - p->resident_blocks) % p->ring_slots);
}

/* Queues block (row) r >= R into its ring slot. */
static h3_status fill_slot(h3_stream *st, int64_t r, h3_diag *d) {
  int slot = slot_of(st, r);
  const h3_backend_ext *x = ext_of(st);
  char *base = st->ring + (size_t)slot * (size_t)st->set.block_bytes;
  h3_status s = H3_OK;
  for (int i = 0; s == H3_OK && i < st->set.n; i++) {
    const h3_stream_value *sv = &st->set.v[i];
    const char *src = (const char *)st->host[i] + (size_t)(r * sv->row_bytes);
    s = x && x->ring_copy
            ? x->ring_copy(st->b, slot, base + sv->offset, src, (size_t)sv->row_bytes, d)
            : st->b->ops->upload(st->b, base + sv->offset, src, (size_t)sv->row_bytes, d);
  }
  return s;
}

static char *alloc_blocks(h3_stream *st, int64_t blocks, const char *what, h3_diag *d) {
  int64_t bytes = blocks * st->set.block_bytes;
  char *p = bytes ? st->b->ops->alloc(st->b, (size_t)bytes) : NULL;
  if (bytes && !p) {
    char b[32];
    h3_diag_error(d, (h3_span){0}, "give a smaller --device-memory, or free device memory",
                  "out of %s memory for the %s of the weight streaming (%s)", st->b->ops->name,
                  what, h3_size_text(bytes, b, sizeof b));
  }
  return p;
}

h3_status h3_stream_start(h3_stream *st, size_t *device_bytes, h3_diag *d) {
  const h3_residency *p = &st->info.plan;
  const h3_backend_ext *x = ext_of(st);
  if (x && x->trim) x->trim(st->b);
  st->resident = alloc_blocks(st, p->resident_blocks, "resident blocks", d);
  if (p->resident_blocks && !st->resident) return H3_ERR;
  st->ring = alloc_blocks(st, p->ring_slots, "ring", d);
  if (!st->ring) return H3_ERR;
  *device_bytes += (size_t)((p->resident_blocks + p->ring_slots) * st->set.block_bytes);
  /* the resident blocks, then one ring slot, timed: the copy time of a block */
  h3_status s = st->b->ops->sync(st->b, d);
  double t0 = st->b->ops->now(st->b);
  for (int64_t k = 0; s == H3_OK && k < p->resident_blocks; k++)
    for (int i = 0; s == H3_OK && i < st->set.n; i++) {
      const h3_stream_value *sv = &st->set.v[i];
      s = st->b->ops->upload(st->b, st->resident + k * st->set.block_bytes + sv->offset,
                             (const char *)st->host[i] + k * sv->row_bytes, (size_t)sv->row_bytes,
                             d);
    }
  if (s == H3_OK) s = fill_slot(st, p->resident_blocks, d);
  if (s == H3_OK && x && x->ring_wait) s = x->ring_wait(st->b, 0, d);
  if (s == H3_OK) s = st->b->ops->sync(st->b, d);
  st->info.block_copy_seconds = (st->b->ops->now(st->b) - t0) / (double)(p->resident_blocks + 1);
  double stalled;
  int64_t waits;
  if (x && x->ring_stalls) x->ring_stalls(st->b, &stalled, &waits); /* not the compute's */
  return s;
}

void *h3_stream_row(const h3_stream *st, const h3_value *v, int64_t row) {
  const h3_stream_value *sv = &st->set.v[h3_stream_set_index(&st->set, v)];
  const h3_residency *p = &st->info.plan;
  if (row < p->resident_blocks) return st->resident + row * st->set.block_bytes + sv->offset;
  return st->ring + slot_of(st, row) * st->set.block_bytes + sv->offset;
}

static const h3_stream_loop *streamed_loop(const h3_stream *st, const h3_op *op) {
  for (int i = 0; st && i < st->set.n_loops; i++)
    if (st->set.loops[i].op == op) return &st->set.loops[i];
  return NULL;
}

/* A pass over rows [first, end) streams rows [start, end), start = max(first, R): its first
 * iteration queues rows start .. start + N - 1 (behind the resident rows' compute), the
 * iteration of row r >= start waits for it and then queues row r + N into the slot r frees. */
h3_status h3_stream_iter_begin(h3_stream *st, const h3_op *op, int64_t k, h3_diag *d) {
  const h3_stream_loop *l = streamed_loop(st, op);
  if (!l) return H3_OK;
  const h3_residency *p = &st->info.plan;
  int64_t start = l->first > p->resident_blocks ? l->first : p->resident_blocks, r = l->first + k;
  h3_status s = H3_OK;
  for (int64_t q = start;
       k == 0 && s == H3_OK && q < start + p->ring_slots && q < l->first + l->count; q++)
    s = fill_slot(st, q, d);
  const h3_backend_ext *x = ext_of(st);
  if (s == H3_OK && r >= start && x && x->ring_wait) s = x->ring_wait(st->b, slot_of(st, r), d);
  return s;
}

h3_status h3_stream_iter_end(h3_stream *st, const h3_op *op, int64_t k, h3_diag *d) {
  const h3_stream_loop *l = streamed_loop(st, op);
  if (!l) return H3_OK;
  int64_t r = l->first + k, next = r + st->info.plan.ring_slots;
  if (r < st->info.plan.resident_blocks || next >= l->first + l->count) return H3_OK;
  return fill_slot(st, next, d);
}

void h3_stream_get_info(h3_stream *st, h3_stream_info *out) {
  const h3_backend_ext *x = ext_of(st);
  double stalled = 0;
  int64_t waits = 0;
  if (x && x->ring_stalls) x->ring_stalls(st->b, &stalled, &waits);
  st->info.stall_seconds += stalled;
  st->info.stall_waits += waits;
  *out = st->info;
  if (!x || !x->ring_stalls) out->stall_waits = -1;
  out->peak_device_bytes = h3_backend_memory_peak(st->b);
}
