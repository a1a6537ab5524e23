/* exec.c: the graph executor: binds values to backend memory and runs graphs, loops and
 * calls (include/h3/runtime.h).
 *
 * State: one slot per IR value id per graph (tensor = type + device pointer). A value with
 * a planned offset points into its graph's arena; a value with offset -1 gets a buffer of
 * its own on first definition, kept and reused while its size fits (loop bodies redefine
 * the same values every iteration). Graph inputs alias the caller's tensors; parameters
 * point to the weights (uploaded from a host store, or made on the device by
 * ext->init_param when no store is given: runtime/runtime_new.c). Load-time ops
 * (h3_op_is_load_time: the --int8 weight quantization) run once, right after their parameter
 * is uploaded (runtime_new.c), keep their results with the weights and are skipped here.
 * Aliasing follows actual pointers, not just offsets: a view (reshape, contiguous slice,
 * index) the plan put over its source, or left outside the arena, points into its
 * source's buffer (an `index` adds its dynamic row); an in-place op the plan put over its
 * first operand writes where that operand is. An output that overlaps any other operand is
 * computed in a staging buffer and copied afterwards (a safety net against plans that
 * overlap an op's operands and results).
 * Loops: the carried operands are copied into the region args, the body runs `count`
 * times with the index (arg 0) written before each iteration, the yield's operands are
 * copied back into the args (a parallel assignment: staged when a source lies in another
 * arg's buffer), and finally the args are copied into the loop results. Copies between
 * equal pointers are skipped, so a plan that shares one buffer per carried value costs
 * nothing. A call runs the callee graph (recursion is an error) and copies its returned
 * tensors into the call's results; a backend with call hooks (h3_backend_ext) may replay
 * a recorded call instead (CUDA graphs); such a backend gets small arguments (token ids,
 * positions) through buffers the callee owns, so that a view moving with a loop counter
 * keeps its address from call to call. A branch (Cache-DiT) downloads its i32 cond and
 * then runs one of its two callees exactly like a call.
 */
#include "exec_internal.h"

#include <stdlib.h>
#include <string.h>

static const h3_span no_span = {0};

static const char *kind_name(h3_opcode c) {
  const h3_op_info *in = h3_op_info_get(c);
  if (!in) return "op";
  switch (in->kind) {
  case H3_PK_ELEMENTWISE: return "elementwise";
  case H3_PK_BROADCAST: return "broadcast";
  case H3_PK_REDUCTION: return "reduction";
  case H3_PK_MATMUL: return "matmul";
  case H3_PK_VIEW: return "view";
  case H3_PK_OPAQUE: return "opaque";
  default: return "control";
  }
}

/* A trace time stamp: host seconds, or with the device clock the index of a device mark
 * (-1: none could be taken; the event is dropped). */
static double stamp(h3_runtime *rt) {
  if (rt->dev_clock) return (double)rt->b->ext->mark(rt->b);
  return rt->b->ops->now(rt->b);
}

/* Records one trace event from stamps t0, t1; `code` >= 0: an op whose time the opcode
 * statistics get once the device clock is resolved (host stamps: the caller adds it). */
static void record(h3_runtime *rt, const char *name, const char *cat, double t0, double t1,
                   int code) {
  if (!rt->opt.trace) return;
  if (rt->dev_clock && (t0 < 0 || t1 < 0)) return;
  if (rt->n_ev == rt->cap_ev) {
    size_t cap = rt->cap_ev ? rt->cap_ev * 2 : 4096;
    h3_trace_event *e = realloc(rt->ev, cap * sizeof *e);
    int *c = e ? realloc(rt->ev_code, cap * sizeof *c) : NULL;
    if (e) rt->ev = e;
    if (!c) return; /* the trace is best effort: a full trace stops growing */
    rt->ev_code = c;
    rt->cap_ev = cap;
  }
  rt->ev_code[rt->n_ev] = code;
  rt->ev[rt->n_ev++] = rt->dev_clock
                           ? (h3_trace_event){name, cat, t0, t1, rt->depth}
                           : (h3_trace_event){name, cat, t0 - rt->t0, t1 - t0, rt->depth};
}

/* After the run's final sync: turns the mark indices of events [ev_first, n_ev) into
 * seconds (ts from the run's first mark, placed at host time `host0`) and adds the ops'
 * device times to the opcode statistics. */
static void resolve_device_events(h3_runtime *rt, double host0) {
  const h3_backend_ext *x = rt->b->ext;
  int m0 = -1; /* the run's first mark: events are recorded when they end */
  for (size_t i = rt->ev_first; i < rt->n_ev; i++)
    if (m0 < 0 || (int)rt->ev[i].ts < m0) m0 = (int)rt->ev[i].ts;
  for (size_t i = rt->ev_first; i < rt->n_ev; i++) {
    h3_trace_event *e = &rt->ev[i];
    int a = (int)e->ts, z = (int)e->dur;
    double from0 = x->mark_seconds(rt->b, m0, a), dur = x->mark_seconds(rt->b, a, z);
    e->ts = host0 - rt->t0 + (from0 > 0 ? from0 : 0);
    e->dur = dur > 0 ? dur : 0;
    if (rt->ev_code[i] >= 0) rt->stats[rt->ev_code[i]].seconds += e->dur;
  }
  rt->ev_first = rt->n_ev;
  x->marks_reset(rt->b);
}

/* After a top-level run or call that traced on the device clock and ended in a sync (st the
 * status so far): its events resolved, or dropped with their marks when it failed (a failed
 * run's marks are not resolvable). */
static void settle_device_events(h3_runtime *rt, h3_status st, double host0) {
  if (st == H3_OK) {
    resolve_device_events(rt, host0);
    return;
  }
  rt->n_ev = rt->ev_first;
  rt->b->ext->marks_reset(rt->b);
}

static gstate *state_of(h3_runtime *rt, const h3_graph *g) {
  for (int i = 0; i < rt->m->n_graphs; i++)
    if (rt->m->graphs[i] == g) return &rt->graphs[i];
  return NULL;
}

static h3_status state_ready(h3_runtime *rt, gstate *gs, h3_diag *d) {
  if (gs->ready) return H3_OK;
  const h3_attr *a = h3_graph_attr(gs->g, "arena_bytes");
  gs->arena_bytes = a && a->kind == H3_ATTR_INT ? a->i : 0;
  if (gs->arena_bytes < 0) {
    h3_diag_error(d, gs->g->span, "recompile the plan with h3c",
                  "graph '%s': arena_bytes %lld is negative", gs->g->name,
                  (long long)gs->arena_bytes);
    return H3_ERR;
  }
  if (gs->arena_bytes > 0) {
    gs->arena = h3_rt_alloc(rt, (size_t)gs->arena_bytes);
    if (!gs->arena) {
      char what[160];
      snprintf(what, sizeof what, "graph '%s''s activation arena", gs->g->name);
      h3_rt_oom_error(rt, d, gs->g->span, what, gs->arena_bytes);
      return H3_ERR;
    }
    rt->act_bytes += (size_t)gs->arena_bytes;
  }
  gs->ready = 1;
  return H3_OK;
}

/* The tensor a value reads from. */
static const h3_tensor *lookup(h3_runtime *rt, gstate *gs, const h3_value *v, h3_diag *d) {
  const h3_tensor *t = NULL;
  if (v->id >= 0 && v->id < rt->n_ids)
    t = v->kind == H3_VALUE_PARAM ? &rt->params[v->id] : &gs->slots[v->id].t;
  if (!t || (!t->data && h3_type_bytes(&v->type) > 0)) {
    h3_diag_error(d, v->span, NULL, "graph '%s': value %%%s is used before it has a buffer",
                  gs->g->name, v->name ? v->name : "?");
    return NULL;
  }
  return t;
}

/* Gives a defined value (op result or region arg) its buffer. */
static h3_status bind(h3_runtime *rt, gstate *gs, const h3_value *v, h3_diag *d) {
  slot *s = &gs->slots[v->id];
  int64_t bytes = h3_type_bytes(&v->type);
  if (v->offset >= 0) {
    if (v->offset > gs->arena_bytes || bytes > gs->arena_bytes - v->offset) { /* no wrap */
      h3_diag_error(
          d, v->span, "the plan's memory plan is inconsistent; recompile it with h3c",
          "graph '%s': value %%%s at offset %lld (%lld bytes) lies outside the %lld-byte arena",
          gs->g->name, v->name ? v->name : "?", (long long)v->offset, (long long)bytes,
          (long long)gs->arena_bytes);
      return H3_ERR;
    }
    s->t.type = v->type;
    s->t.data = (char *)gs->arena + v->offset;
    return H3_OK;
  }
  int j = h3_offset_input(v->offset);
  if (j >= 0) { /* in donated input j's buffer (memory-plan) */
    const h3_tensor *in = j < gs->g->n_inputs && h3_graph_donated_output(gs->g, j) >= 0
                              ? &gs->slots[gs->g->inputs[j]->id].t
                              : NULL;
    if (!in || !in->data || h3_type_bytes(&in->type) < bytes) {
      h3_diag_error(d, v->span, "the plan's memory plan is inconsistent; recompile it with h3c",
                    "graph '%s': value %%%s lies in input %d, which is not a donated input of "
                    "at least %lld bytes", gs->g->name, v->name ? v->name : "?", j, (long long)bytes);
      return H3_ERR;
    }
    if (s->cap) {
      rt->b->ops->release(rt->b, s->t.data);
      rt->act_bytes -= s->cap;
      s->cap = 0;
    }
    s->t.type = v->type;
    s->t.data = in->data;
    return H3_OK;
  }
  if (s->cap && s->cap >= (size_t)bytes) {
    s->t.type = v->type;
    return H3_OK;
  }
  void *p = h3_rt_alloc(rt, (size_t)bytes);
  if (!p) {
    char what[160];
    snprintf(what, sizeof what, "value %%%s of graph '%s'", v->name ? v->name : "?", gs->g->name);
    h3_rt_oom_error(rt, d, v->span, what, bytes);
    return H3_ERR;
  }
  if (s->cap) {
    rt->b->ops->release(rt->b, s->t.data);
    rt->act_bytes -= s->cap;
  }
  s->t.type = v->type;
  s->t.data = p;
  s->cap = (size_t)(bytes ? bytes : 1);
  rt->act_bytes += s->cap;
  return H3_OK;
}

static h3_status copy_tensor(h3_runtime *rt, const h3_tensor *dst, const h3_tensor *src,
                             h3_diag *d) {
  if (dst->data == src->data) return H3_OK;
  return rt->b->ops->copy(rt->b, dst->data, src->data, (size_t)h3_type_bytes(&dst->type), d);
}

static h3_status run_region(h3_runtime *rt, gstate *gs, const h3_region *r, int top, h3_diag *d);
static h3_status run_graph(h3_runtime *rt, gstate *gs, h3_diag *d);

/* Byte offset of a view op's result inside its source when the result is a contiguous
 * part of it (reshape; slice when every dim before the axis is 1; index: the dynamic
 * row), or -1. */
static int64_t view_offset(h3_runtime *rt, gstate *gs, const h3_op *op, const h3_tensor *x,
                           h3_diag *d, h3_status *st) {
  const h3_type *t = &x->type;
  int64_t res_bytes = h3_type_bytes(&op->results[0]->type);
  *st = H3_OK;
  if (op->code == H3_OP_RESHAPE) return 0;
  if (op->code == H3_OP_SLICE) {
    int64_t axis = h3_op_attr_int(op, "axis", 0);
    if (axis < 0) axis += t->rank;
    for (int k = 0; k < axis; k++)
      if (t->dims[k] != 1) return -1;
    int64_t len = h3_op_attr_int(op, "len", 1);
    return len > 0 ? h3_op_attr_int(op, "start", 0) * (res_bytes / len) : -1;
  }
  const h3_tensor *i = lookup(rt, gs, op->operands[1], d);
  if (!i) {
    *st = H3_ERR;
    return -1;
  }
  int64_t i64 = 0;
  int32_t i32 = 0;
  const slot *is = op->operands[1]->id >= 0 && op->operands[1]->id < rt->n_ids
                       ? &gs->slots[op->operands[1]->id]
                       : NULL;
  if (is && is->host_known) {
    i64 = is->host_value;
  } else if (h3_value_const_int(op->operands[1], &i64)) {
    /* a constant row (draft_layer[0]): no download, so the call can be a CUDA graph */
  } else {
    *st = i->type.dtype == H3_I64 ? rt->b->ops->download(rt->b, &i64, i->data, 8, d)
                                  : rt->b->ops->download(rt->b, &i32, i->data, 4, d);
    if (*st != H3_OK) return -1;
    if (i->type.dtype != H3_I64) i64 = i32;
  }
  int64_t row = i64 + h3_op_attr_int(op, "offset", 0);
  if (row < 0 || row >= t->dims[0]) {
    h3_diag_error(d, op->span, "the index comes from a loop counter or an input value",
                  "index: row %lld is outside [0, %lld)", (long long)row, (long long)t->dims[0]);
    *st = H3_ERR;
    return -1;
  }
  return row * res_bytes;
}

/* The result of view op points at data. */
static void set_view(h3_runtime *rt, gstate *gs, const h3_op *op, void *data) {
  const h3_value *v = op->results[0];
  slot *s = &gs->slots[v->id];
  if (s->cap) {
    rt->b->ops->release(rt->b, s->t.data);
    rt->act_bytes -= s->cap;
    s->cap = 0;
  }
  s->t.type = v->type;
  s->t.data = data;
  rt->stats[op->code].count++;
}

/* Views without a copy: the result points into its source's actual buffer when the plan
 * put it over its source (reshape, contiguous slice at the slice's byte delta; index at
 * the source's base offset, the runtime adding the dynamic row), or when the plan left the
 * result outside the arena (views of weights and inputs, or a module without a memory
 * plan). Following the source's actual pointer (not arena + offset) keeps chains of views
 * of a dynamic `index` right. Returns 0 when op is not such a view (the backend copies). */
static int try_view(h3_runtime *rt, gstate *gs, const h3_op *op, h3_status *st, h3_diag *d) {
  int code = op->code;
  if ((code != H3_OP_INDEX && code != H3_OP_RESHAPE && code != H3_OP_SLICE) || op->n_results != 1 ||
      op->n_operands < 1 || (code == H3_OP_INDEX && op->n_operands != 2))
    return 0;
  const h3_value *v = op->results[0], *src = op->operands[0];
  if (code == H3_OP_INDEX && h3_stream_holds(rt->stream, src)) { /* a loop counter's row */
    int64_t row = gs->slots[op->operands[1]->id].host_value + h3_op_attr_int(op, "offset", 0);
    set_view(rt, gs, op, h3_stream_row(rt->stream, src, row));
    *st = H3_OK;
    return 1;
  }
  const h3_tensor *x = lookup(rt, gs, src, d);
  if (!x) {
    *st = H3_ERR;
    return 1;
  }
  double t0 = stamp(rt);
  int64_t off = view_offset(rt, gs, op, x, d, st);
  if (*st != H3_OK) return 1;
  if (off < 0) return 0;
  /* a planned result is a view only where the plan put it over its source */
  if (v->offset >= 0 &&
      (src->offset < 0 || v->offset != src->offset + (code == H3_OP_INDEX ? 0 : off)))
    return 0;
  record(rt, h3_opcode_name(op->code), kind_name(op->code), t0, stamp(rt), -1);
  set_view(rt, gs, op, (char *)x->data + off);
  return 1;
}

static int overlaps(const h3_tensor *a, const h3_tensor *b) {
  const char *pa = a->data, *pb = b->data;
  int64_t na = h3_type_bytes(&a->type), nb = h3_type_bytes(&b->type);
  return pa && pb && na > 0 && nb > 0 && pa < pb + nb && pb < pa + na;
}

/* An in-place set_index(x, i, row) whose row already is row i of x (a row updated in place,
 * then put back: memory-plan joins them): nothing to do. Needs i known on the host. */
static bool set_index_onto_itself(gstate *gs, const h3_op *op, const h3_tensor *in) {
  if (op->code != H3_OP_SET_INDEX || op->n_operands != 3 || in[0].type.rank < 1) return false;
  const h3_value *iv = op->operands[1];
  const slot *is = iv->id >= 0 ? &gs->slots[iv->id] : NULL;
  if (!is || !is->host_known) return false;
  int64_t row_bytes = h3_type_bytes(&in[0].type) / (in[0].type.dims[0] ? in[0].type.dims[0] : 1);
  int64_t row = is->host_value + h3_op_attr_int(op, "offset", 0);
  return row >= 0 && row < in[0].type.dims[0] && (char *)in[0].data + row * row_bytes == in[2].data &&
         h3_type_bytes(&in[2].type) == row_bytes;
}

static h3_status upload_index(h3_runtime *rt, const slot *sl, h3_diag *d) {
  int32_t i32 = (int32_t)sl->host_value;
  int64_t i64 = sl->host_value;
  if (sl->t.type.dtype == H3_I64) return rt->b->ops->upload(rt->b, sl->t.data, &i64, 8, d);
  return rt->b->ops->upload(rt->b, sl->t.data, &i32, 4, d);
}

/* Before a backend index / set_index reads its index operand: a deferred loop counter's
 * value, written on the stream that runs the op (each such op writes it again, so no op
 * relies on another stream's copy). */
static h3_status write_deferred_index(h3_runtime *rt, gstate *gs, const h3_op *op, h3_diag *d) {
  if ((op->code != H3_OP_INDEX && op->code != H3_OP_SET_INDEX) || op->n_operands < 2) return H3_OK;
  const h3_value *i = op->operands[1];
  if (i->id < 0 || i->id >= rt->n_ids || i->kind == H3_VALUE_PARAM) return H3_OK;
  const slot *sl = &gs->slots[i->id];
  return sl->device_deferred ? upload_index(rt, sl, d) : H3_OK;
}

static h3_status run_compute(h3_runtime *rt, gstate *gs, const h3_op *op, h3_diag *d) {
  h3_status vst;
  if (try_view(rt, gs, op, &vst, d)) return vst;
  h3_tensor in_buf[16], out_buf[H3_EXEC_MAX_RESULTS];
  h3_tensor *in = op->n_operands <= 16 ? in_buf : malloc((size_t)op->n_operands * sizeof *in);
  if (!in || op->n_results > H3_EXEC_MAX_RESULTS) {
    if (in && in != in_buf) free(in);
    if (!in)
      h3_diag_error(d, op->span, H3_HINT_OOM, "%s: out of memory for its operands", h3_opcode_name(op->code));
    else
      h3_diag_error(d, op->span, "compile the plan again with this h3c (its fusion keeps within the limit)",
                    "%s: %d results; the executor runs ops of at most %d", h3_opcode_name(op->code),
                    op->n_results, H3_EXEC_MAX_RESULTS);
    return H3_ERR;
  }
  h3_status st = H3_OK;
  for (int i = 0; st == H3_OK && i < op->n_operands; i++) {
    const h3_tensor *t = lookup(rt, gs, op->operands[i], d);
    if (!t)
      st = H3_ERR;
    else
      in[i] = *t;
  }
  for (int i = 0; st == H3_OK && i < op->n_results; i++) {
    st = bind(rt, gs, op->results[i], d);
    if (st == H3_OK) out_buf[i] = gs->slots[op->results[i]->id].t;
  }
  /* an in-place result the plan put over its operand (h3_op_inplace_operand) writes where
     that operand actually is (which differs from arena + offset when the operand is a view
     of a dynamic index) */
  for (int r = 0; st == H3_OK && r < op->n_results; r++) {
    const int j = h3_op_inplace_operand(op, r);
    if (j < 0 || op->results[r]->offset == -1 || op->results[r]->offset != op->operands[j]->offset)
      continue;
    out_buf[r].data = in[j].data;
    gs->slots[op->results[r]->id].t.data = in[j].data;
    if (r == 0 && set_index_onto_itself(gs, op, in)) {
      rt->stats[op->code].count++;
      goto done;
    }
  }
  /* an output placed over an operand (other than an in-place op's own operand 0) is
     computed in a staging buffer and copied afterwards: kernels may write outputs while
     still reading operands, so a plan that overlaps them (e.g. an in-place result with its
     own buffer placed over a dying operand) stays correct */
  h3_tensor staged[H3_EXEC_MAX_RESULTS];
  int n_staged = 0;
  for (int i = 0; st == H3_OK && i < op->n_results; i++) {
    int clash = 0;
    for (int j = 0; j < op->n_operands && !clash; j++)
      clash = overlaps(&out_buf[i], &in[j]) &&
              !(j == h3_op_inplace_operand(op, i) && out_buf[i].data == in[j].data);
    staged[i] = out_buf[i];
    if (!clash) continue;
    size_t bytes = (size_t)h3_type_bytes(&out_buf[i].type);
    out_buf[i].data = h3_rt_alloc(rt, bytes);
    if (!out_buf[i].data) {
      h3_rt_oom_error(rt, d, op->span, "a result's staging buffer", (int64_t)bytes);
      st = H3_ERR;
    }
    n_staged = i + 1;
  }
  if (st == H3_OK) st = write_deferred_index(rt, gs, op, d);
  if (st == H3_OK) {
    double t0 = stamp(rt);
    st = rt->b->ops->run_op(rt->b, op, in, op->n_operands, out_buf, op->n_results, d);
    for (int i = 0; i < n_staged; i++) {
      if (out_buf[i].data == staged[i].data) continue;
      if (st == H3_OK) st = copy_tensor(rt, &staged[i], &out_buf[i], d);
    }
    if (st == H3_OK && rt->opt.trace && !rt->dev_clock) st = rt->b->ops->sync(rt->b, d);
    double t1 = stamp(rt);
    if (st == H3_OK && rt->opt.observe)
      st = rt->opt.observe(rt->opt.observe_ctx, op, in, op->n_operands, staged, op->n_results, d);
    rt->stats[op->code].count++;
    if (!rt->dev_clock) rt->stats[op->code].seconds += t1 - t0;
    record(rt, h3_op_attr_string(op, "kernel", h3_opcode_name(op->code)), kind_name(op->code), t0,
           t1, (int)op->code);
  }
  for (int i = 0; i < n_staged; i++)
    if (out_buf[i].data && out_buf[i].data != staged[i].data)
      rt->b->ops->release(rt->b, out_buf[i].data);
done:
  if (in != in_buf) free(in);
  return st;
}

/* Parallel assignment of the carried slots: args[1 + i] = src[i] for every i, reading
 * every source before writing any arg when a source lies in another arg's buffer (a swap
 * in the memory plan). */
static h3_status assign_carried(h3_runtime *rt, gstate *gs, const h3_region *r,
                                h3_value *const *srcv, const h3_span *span, h3_diag *d) {
  int n = r->n_args - 1, clash = 0;
  const h3_tensor **src = malloc((size_t)(n + 1) * sizeof *src);
  if (!src) {
    h3_diag_error(d, *span, H3_HINT_OOM, "out of memory");
    return H3_ERR;
  }
  h3_status st = H3_OK;
  for (int i = 0; st == H3_OK && i < n; i++) {
    src[i] = lookup(rt, gs, srcv[i], d);
    if (!src[i]) st = H3_ERR;
  }
  for (int i = 0; st == H3_OK && i < n; i++)
    for (int j = 0; j < n; j++)
      if (j != i && src[i]->data == gs->slots[r->args[j + 1]->id].t.data) clash = 1;
  if (st == H3_OK && clash) {
    void **tmp = calloc((size_t)n + 1, sizeof *tmp);
    st = tmp ? H3_OK : H3_ERR;
    for (int i = 0; st == H3_OK && i < n; i++) {
      size_t bytes = (size_t)h3_type_bytes(&src[i]->type);
      tmp[i] = h3_rt_alloc(rt, bytes);
      if (!tmp[i]) {
        h3_rt_oom_error(rt, d, r->parent ? r->parent->span : no_span, "a loop's carried-value copy",
                  (int64_t)bytes);
        st = H3_ERR;
      } else
        st = rt->b->ops->copy(rt->b, tmp[i], src[i]->data, bytes, d);
    }
    for (int i = 0; st == H3_OK && i < n; i++) {
      const h3_tensor *a = &gs->slots[r->args[i + 1]->id].t;
      st = rt->b->ops->copy(rt->b, a->data, tmp[i], (size_t)h3_type_bytes(&a->type), d);
    }
    if (st != H3_OK && !d->errors) h3_diag_error(d, *span, H3_HINT_OOM, "out of memory");
    for (int i = 0; tmp && i < n; i++)
      if (tmp[i]) rt->b->ops->release(rt->b, tmp[i]);
    free(tmp);
  } else {
    for (int i = 0; st == H3_OK && i < n; i++)
      st = copy_tensor(rt, &gs->slots[r->args[i + 1]->id].t, src[i], d);
  }
  free(src);
  return st;
}

/* A loop counter's value k: always on the host; on the device too unless deferred. */
static h3_status write_index(h3_runtime *rt, slot *sl, int64_t k, bool defer, h3_diag *d) {
  sl->host_value = k;
  sl->host_known = true;
  sl->device_deferred = defer;
  return defer ? H3_OK : upload_index(rt, sl, d);
}

/* Whether some op in region r (nested regions included) may read value c's device buffer:
 * any use but as the index operand of index / set_index, which take a loop counter's host
 * value (a view, a row put back in place) or have it written just before them
 * (write_deferred_index). A counter no op reads on the device needs no host-to-device copy
 * per turn: in a CUDA graph each is a copy node on the step's critical path. */
static bool reads_on_device(const h3_region *r, const h3_value *c) {
  for (const h3_op *op = r->first; op; op = op->next) {
    for (int k = 0; k < op->n_operands; k++)
      if (op->operands[k] == c && !(k == 1 && (op->code == H3_OP_INDEX || op->code == H3_OP_SET_INDEX)))
        return true;
    for (int i = 0; i < op->n_regions; i++)
      if (reads_on_device(&op->regions[i], c)) return true;
  }
  return false;
}

static h3_status run_loop(h3_runtime *rt, gstate *gs, const h3_op *op, int top, h3_diag *d) {
  const h3_region *r = &op->regions[0];
  int64_t count = h3_op_attr_int(op, "count", 0);
  const char *label = h3_op_attr_string(op, "label", "loop");
  if (r->n_args != op->n_operands + 1 || op->n_results != op->n_operands || !r->last ||
      r->last->code != H3_OP_YIELD || r->last->n_operands != op->n_operands) {
    h3_diag_error(d, op->span, "the plan's IR is malformed; recompile it with h3c",
                  "loop '%s': region arguments, yield and results do not match", label);
    return H3_ERR;
  }
  double t0 = stamp(rt);
  h3_status st = H3_OK;
  for (int i = 0; st == H3_OK && i < r->n_args; i++) st = bind(rt, gs, r->args[i], d);
  if (st == H3_OK) st = assign_carried(rt, gs, r, op->operands, &op->span, d);
  /* an observer (--dump-ops) may read every operand's buffer: the counter stays uploaded */
  const bool defer = !rt->opt.observe && !reads_on_device(r, r->args[0]);
  for (int64_t k = 0; st == H3_OK && k < count; k++) {
    st = write_index(rt, &gs->slots[r->args[0]->id], k, defer, d);
    if (top) rt->top_iter = k;
    if (st == H3_OK) st = h3_stream_iter_begin(rt->stream, op, k, d);
    if (st == H3_OK) st = run_region(rt, gs, r, 0, d);
    if (st == H3_OK) st = h3_stream_iter_end(rt->stream, op, k, d);
    if (st == H3_OK) st = assign_carried(rt, gs, r, r->last->operands, &r->last->span, d);
    if (st == H3_OK && top && rt->opt.progress)
      rt->opt.progress(rt->opt.progress_ctx, label, k + 1, count);
  }
  for (int i = 0; st == H3_OK && i < op->n_results; i++) {
    st = bind(rt, gs, op->results[i], d);
    if (st == H3_OK)
      st = copy_tensor(rt, &gs->slots[op->results[i]->id].t, &gs->slots[r->args[i + 1]->id].t, d);
  }
  record(rt, label, "control", t0, stamp(rt), -1);
  return st;
}

/* Arguments of at most this many bytes (token ids, positions) reach a callee through a
 * buffer the callee owns, one per input, when the backend records calls: an argument that
 * is a view moving with a loop counter (positions[k]) then has the same address at every
 * call, so the recorded call can be replayed. */
enum { STAGE_BYTES = 256 };

static h3_status stage_input(h3_runtime *rt, gstate *cs, int i, h3_tensor *t, h3_diag *d) {
  int64_t bytes = h3_type_bytes(&t->type);
  if (!rt->b->ext || !rt->b->ext->call_begin || bytes <= 0 || bytes > STAGE_BYTES ||
      h3_graph_donated_output(cs->g, i) >= 0)
    return H3_OK;
  if (!cs->staged) cs->staged = calloc((size_t)cs->g->n_inputs + 1, sizeof *cs->staged);
  if (cs->staged && !cs->staged[i]) cs->staged[i] = h3_rt_alloc(rt, STAGE_BYTES);
  if (!cs->staged || !cs->staged[i]) {
    char what[160];
    snprintf(what, sizeof what, "a call argument of graph '%s'", cs->g->name);
    h3_rt_oom_error(rt, d, cs->g->span, what, STAGE_BYTES);
    return H3_ERR;
  }
  h3_tensor staged = {t->type, cs->staged[i]};
  h3_status st = copy_tensor(rt, &staged, t, d);
  if (st == H3_OK) *t = staged;
  return st;
}

/* A donated input i (the callee returns it updated as output r, and may write it in place)
 * gets the call's result r buffer: the argument itself when the plan put result r over it,
 * else a copy of the argument in result r's buffer, so the caller's argument is never
 * changed behind its back. */
static h3_status donate_input(h3_runtime *rt, gstate *gs, gstate *cs, const h3_op *op, int i,
                              h3_tensor *arg, h3_diag *d) {
  int r = h3_graph_donated_output(cs->g, i);
  if (r < 0 || r >= op->n_results) return H3_OK;
  h3_status st = bind(rt, gs, op->results[r], d);
  if (st != H3_OK) return st;
  h3_tensor *res = &gs->slots[op->results[r]->id].t;
  if (res->data != arg->data) st = copy_tensor(rt, res, arg, d);
  if (st == H3_OK) arg->data = res->data;
  return st;
}

/* Runs graph cs->g whose inputs are bound: replays the work the backend recorded for it
 * (CUDA graphs) or runs it op by op, recording it when the backend wants to. */
static h3_status run_bound(h3_runtime *rt, gstate *cs, h3_diag *d) {
  const h3_graph *g = cs->g;
  /* the observer sees every op: no recorded work replaces the callee's ops */
  const h3_backend_ext *ext = rt->opt.observe ? NULL : rt->b->ext;
  int replayed = 0;
  h3_status st = H3_OK;
  if (ext && ext->call_begin) {
    h3_tensor *args = malloc((size_t)(g->n_inputs + 1) * sizeof *args);
    if (!args) st = H3_ERR;
    for (int i = 0; st == H3_OK && i < g->n_inputs; i++) args[i] = cs->slots[g->inputs[i]->id].t;
    if (st == H3_OK) st = ext->call_begin(rt->b, g, args, g->n_inputs, &replayed, d);
    free(args);
  }
  if (st == H3_OK && !replayed) {
    rt->depth++;
    st = run_graph(rt, cs, d);
    rt->depth--;
    if (ext && ext->call_begin && ext->call_end) {
      h3_status end = ext->call_end(rt->b, g, st, d);
      if (st == H3_OK) st = end;
    }
  }
  return st;
}

/* Runs graph `name` on operands [first, n) of op (a call: 0; a branch: 1, after cond). */
static h3_status run_callee(h3_runtime *rt, gstate *gs, const h3_op *op, const char *name,
                            int first, h3_diag *d) {
  const h3_graph *g = h3_module_graph(rt->m, name);
  gstate *cs = g ? state_of(rt, g) : NULL;
  if (!cs || g->n_inputs != op->n_operands - first) {
    h3_diag_error(d, op->span, "the plan's IR is malformed; recompile it with h3c",
                  "call of '%s': %s", name,
                  cs ? "argument count differs from the graph's inputs" : "no such graph");
    return H3_ERR;
  }
  if (cs->active) {
    h3_diag_error(d, op->span, "graphs may not call themselves", "call of '%s' is recursive", name);
    return H3_ERR;
  }
  double t0 = stamp(rt);
  h3_status st = state_ready(rt, cs, d);
  for (int i = 0; st == H3_OK && i < g->n_inputs; i++) {
    const h3_tensor *t = lookup(rt, gs, op->operands[first + i], d);
    h3_tensor arg = t ? *t : (h3_tensor){0};
    st = t ? stage_input(rt, cs, i, &arg, d) : H3_ERR;
    if (st == H3_OK) st = donate_input(rt, gs, cs, op, i, &arg, d);
    if (st == H3_OK) cs->slots[g->inputs[i]->id].t = arg; /* alias; inputs never own buffers */
  }
  if (st == H3_OK) st = run_bound(rt, cs, d);
  const h3_op *ret = g->body.last;
  for (int i = 0; st == H3_OK && i < op->n_results; i++) {
    const h3_tensor *src = lookup(rt, cs, ret->operands[i], d);
    st = src ? bind(rt, gs, op->results[i], d) : H3_ERR;
    if (st == H3_OK) st = copy_tensor(rt, &gs->slots[op->results[i]->id].t, src, d);
  }
  record(rt, name, "control", t0, stamp(rt), -1);
  return st;
}

static h3_status run_call(h3_runtime *rt, gstate *gs, const h3_op *op, h3_diag *d) {
  return run_callee(rt, gs, op, h3_op_attr_string(op, "callee", ""), 0, d);
}

/* branch(cond, args...): reads cond on the host (a download: a sync point) and runs one
 * of the two callees (Cache-DiT's reuse decision). */
static h3_status run_branch(h3_runtime *rt, gstate *gs, const h3_op *op, h3_diag *d) {
  const h3_tensor *c = op->n_operands > 0 ? lookup(rt, gs, op->operands[0], d) : NULL;
  int32_t cond = 0;
  if (!c || c->type.dtype != H3_I32 ||
      rt->b->ops->download(rt->b, &cond, c->data, sizeof cond, d) != H3_OK) {
    if (!d->errors)
      h3_diag_error(d, op->span, "the plan's IR is malformed; recompile it with h3c",
                    "branch: cond must be an i32 scalar");
    return H3_ERR;
  }
  if (rt->n_br == rt->cap_br) { /* the log is best effort: a full one stops growing */
    size_t cap = rt->cap_br ? 2 * rt->cap_br : 64;
    h3_branch_event *e = realloc(rt->br, cap * sizeof *e);
    if (e) rt->br = e, rt->cap_br = cap;
  }
  if (rt->n_br < rt->cap_br) rt->br[rt->n_br++] = (h3_branch_event){op, rt->top_iter, cond != 0};
  const char *name = h3_op_attr_string(op, cond ? "then_callee" : "else_callee", "");
  return run_callee(rt, gs, op, name, 1, d);
}

/* The stream op runs on (pass side-streams): a run of ops marked `side` goes to the
 * backend's side stream, which first waits for the work queued before the run (fork); the
 * main stream waits for it (join) before an op marked `join`, before a loop, call or branch
 * (their regions run their own branches) and at the region's end. Without the
 * backend hook every op runs in order on the one stream. */
typedef struct {
  bool on_side, open;
} side_state;

static h3_status side_cmd(h3_runtime *rt, h3_side_cmd cmd, h3_diag *d) {
  const h3_backend_ext *ext = rt->b->ext;
  return ext && ext->side_stream ? ext->side_stream(rt->b, cmd, d) : H3_OK;
}

static h3_status side_before(h3_runtime *rt, side_state *ss, const h3_op *op, h3_diag *d) {
  bool side = h3_op_attr_int(op, "side", 0) != 0;
  h3_status st = H3_OK;
  if (side && !ss->on_side) {
    st = side_cmd(rt, H3_SIDE_FORK, d);
    ss->on_side = ss->open = true;
  } else if (!side && ss->open && (h3_op_attr_int(op, "join", 0) || h3_op_is_control_flow(op->code))) {
    st = side_cmd(rt, H3_SIDE_JOIN, d);
    ss->on_side = ss->open = false;
  } else if (!side && ss->on_side) {
    st = side_cmd(rt, H3_SIDE_MAIN, d);
    ss->on_side = false;
  }
  return st;
}

static h3_status run_region(h3_runtime *rt, gstate *gs, const h3_region *r, int top, h3_diag *d) {
  side_state ss = {false, false};
  for (const h3_op *op = r->first; op; op = op->next) {
    h3_status st = side_before(rt, &ss, op, d);
    if (st != H3_OK) return st;
    switch (op->code) {
    case H3_OP_YIELD:
    case H3_OP_RETURN: return H3_OK;
    case H3_OP_LOOP: st = run_loop(rt, gs, op, top, d); break;
    case H3_OP_CALL: st = run_call(rt, gs, op, d); break;
    case H3_OP_BRANCH: st = run_branch(rt, gs, op, d); break;
    default: /* load-time ops ran when the weights were loaded */
      st = h3_op_is_load_time(op) ? H3_OK : run_compute(rt, gs, op, d);
      break;
    }
    if (st != H3_OK) {
      if (ss.open) side_cmd(rt, H3_SIDE_JOIN, d); /* the main stream holds every queued op again */
      return st;
    }
  }
  return ss.open ? side_cmd(rt, H3_SIDE_JOIN, d) : H3_OK;
}

static h3_status run_graph(h3_runtime *rt, gstate *gs, h3_diag *d) {
  const h3_op *ret = gs->g->body.last;
  if (!ret || ret->code != H3_OP_RETURN || ret->n_operands != gs->g->n_outputs) {
    h3_diag_error(d, gs->g->span, "the plan's IR is malformed; recompile it with h3c",
                  "graph '%s' does not end with a return of its %d outputs", gs->g->name,
                  gs->g->n_outputs);
    return H3_ERR;
  }
  gs->active = 1;
  h3_status st = run_region(rt, gs, &gs->g->body, gs->g == rt->top, d);
  gs->active = 0;
  if (st != H3_OK) h3_diag_note(d, gs->g->span, "while running graph '%s'", gs->g->name);
  return st;
}

h3_status h3_runtime_run(h3_runtime *rt, const h3_graph *g, const h3_host_tensor *in,
                         h3_host_tensor *out, h3_diag *d) {
  gstate *gs = state_of(rt, g);
  if (!gs) {
    h3_diag_error(d, no_span, NULL, "graph '%s' is not part of the runtime's module", g->name);
    return H3_ERR;
  }
  h3_status st = state_ready(rt, gs, d);
  void **bufs = calloc((size_t)g->n_inputs + 1, sizeof *bufs);
  if (!bufs) st = H3_ERR;
  for (int i = 0; st == H3_OK && i < g->n_inputs; i++) {
    const h3_value *v = g->inputs[i];
    size_t bytes = (size_t)h3_type_bytes(&v->type);
    if (!in[i].data || !h3_type_equal(&in[i].type, &v->type)) {
      char want[96];
      h3_diag_error(d, v->span, "give it in the --inputs file", "graph '%s': input '%s' (%s) is %s",
                    g->name, v->name ? v->name : "?", h3_type_str(&v->type, want, sizeof want),
                    in[i].data ? "of another type" : "missing");
      st = H3_ERR;
      break;
    }
    bufs[i] = h3_rt_alloc(rt, bytes);
    if (!bufs[i]) {
      char what[160];
      snprintf(what, sizeof what, "input '%s'", v->name ? v->name : "?");
      h3_rt_oom_error(rt, d, v->span, what, (int64_t)bytes);
      st = H3_ERR;
      break;
    }
    st = rt->b->ops->upload(rt->b, bufs[i], in[i].data, bytes, d);
    gs->slots[v->id].t = (h3_tensor){v->type, bufs[i]};
  }
  const h3_graph *prev_top = rt->top;
  rt->top = g;
  double host0 = rt->b->ops->now(rt->b);
  if (!prev_top) rt->n_br = 0, rt->top_iter = -1;
  if (st == H3_OK) st = run_graph(rt, gs, d);
  if (st == H3_OK) st = rt->b->ops->sync(rt->b, d);
  if (rt->dev_clock && !prev_top) settle_device_events(rt, st, host0);
  rt->top = prev_top;
  const h3_op *ret = g->body.last;
  memset(out, 0, (size_t)g->n_outputs * sizeof *out);
  for (int i = 0; st == H3_OK && i < g->n_outputs; i++) {
    const h3_tensor *t = lookup(rt, gs, ret->operands[i], d);
    if (!t) {
      st = H3_ERR;
      break;
    }
    size_t bytes = (size_t)h3_type_bytes(&t->type);
    out[i].name = g->output_names ? g->output_names[i] : NULL;
    out[i].type = t->type;
    out[i].bytes = bytes;
    out[i].data = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!out[i].data && bytes) {
      h3_diag_error(d, no_span, H3_HINT_OOM, "out of memory for output '%s'",
                    out[i].name ? out[i].name : "?");
      st = H3_ERR;
      break;
    }
    st = rt->b->ops->download(rt->b, out[i].data, t->data, bytes, d);
  }
  if (st != H3_OK) {
    for (int i = 0; i < g->n_outputs; i++) free(out[i].data);
    memset(out, 0, (size_t)g->n_outputs * sizeof *out);
  }
  for (int i = 0; bufs && i < g->n_inputs; i++) {
    if (bufs[i]) rt->b->ops->release(rt->b, bufs[i]);
    gs->slots[g->inputs[i]->id].t.data = NULL;
  }
  free(bufs);
  return st;
}

/* ---- device-resident calls (the serving engine) -------------------------------------------- */
h3_status h3_runtime_buffer(h3_runtime *rt, const h3_type *t, h3_tensor *out, h3_diag *d) {
  int64_t bytes = h3_type_bytes(t);
  *out = (h3_tensor){*t, NULL};
  if (bytes < 0) {
    h3_diag_error(d, no_span, NULL, "a buffer of %s has no valid size", h3_dtype_name(t->dtype));
    return H3_ERR;
  }
  out->data = h3_rt_alloc(rt, (size_t)(bytes ? bytes : 1));
  if (!out->data) {
    h3_rt_oom_error(rt, d, no_span, "a buffer the caller keeps across runs", bytes);
    return H3_ERR;
  }
  rt->act_bytes += (size_t)bytes;
  /* zeroed by uploads of one zero chunk (no backend fill hook; a one-time cost) */
  size_t chunk = (size_t)bytes < ((size_t)64 << 20) ? (size_t)bytes : ((size_t)64 << 20);
  void *zero = calloc(1, chunk ? chunk : 1);
  if (!zero) return H3_ERR;
  h3_status st = H3_OK;
  for (size_t at = 0; st == H3_OK && at < (size_t)bytes; at += chunk) {
    size_t n = (size_t)bytes - at < chunk ? (size_t)bytes - at : chunk;
    st = rt->b->ops->upload(rt->b, (char *)out->data + at, zero, n, d);
  }
  free(zero);
  return st;
}

void h3_runtime_buffer_free(h3_runtime *rt, h3_tensor *t) {
  if (!t->data) return;
  rt->act_bytes -= (size_t)h3_type_bytes(&t->type);
  rt->b->ops->release(rt->b, t->data);
  t->data = NULL;
}

h3_status h3_runtime_upload(h3_runtime *rt, const h3_tensor *dst, const void *src, h3_diag *d) {
  return rt->b->ops->upload(rt->b, dst->data, src, (size_t)h3_type_bytes(&dst->type), d);
}

h3_status h3_runtime_download(h3_runtime *rt, void *dst, const h3_tensor *src, h3_diag *d) {
  return rt->b->ops->download(rt->b, dst, src->data, (size_t)h3_type_bytes(&src->type), d);
}

h3_status h3_runtime_call(h3_runtime *rt, const h3_graph *g, const h3_tensor *args,
                          h3_tensor *results, h3_diag *d) {
  gstate *cs = state_of(rt, g);
  if (!cs || cs->active) {
    h3_diag_error(d, no_span, NULL, "graph '%s' %s", g->name,
                  cs ? "is running already" : "is not part of the runtime's module");
    return H3_ERR;
  }
  h3_status st = state_ready(rt, cs, d);
  for (int i = 0; st == H3_OK && i < g->n_inputs; i++) {
    const h3_value *v = g->inputs[i];
    if (!args[i].data || !h3_type_equal(&args[i].type, &v->type)) {
      char want[96], got[96];
      h3_diag_error(d, v->span, NULL, "graph '%s': input '%s' must be %s, got %s", g->name,
                    v->name ? v->name : "?", h3_type_str(&v->type, want, sizeof want),
                    args[i].data ? h3_type_str(&args[i].type, got, sizeof got) : "no buffer");
      st = H3_ERR;
      break;
    }
    h3_tensor arg = args[i]; /* a donated input is the caller's buffer, updated in place */
    st = stage_input(rt, cs, i, &arg, d);
    cs->slots[v->id].t = arg;
  }
  const h3_graph *prev_top = rt->top;
  if (!prev_top) rt->top = g, rt->n_br = 0, rt->top_iter = -1;
  double host0 = rt->b->ops->now(rt->b);
  if (st == H3_OK) st = run_bound(rt, cs, d);
  if (rt->dev_clock && !prev_top) { /* a profiled call waits for its ops to time them */
    if (st == H3_OK) st = rt->b->ops->sync(rt->b, d);
    settle_device_events(rt, st, host0);
  }
  rt->top = prev_top;
  const h3_op *ret = g->body.last;
  for (int r = 0; st == H3_OK && r < g->n_outputs; r++) {
    const h3_tensor *t = lookup(rt, cs, ret->operands[r], d);
    if (!t) return H3_ERR;
    results[r] = *t;
    for (int i = 0; i < g->n_inputs; i++)
      if (h3_graph_donated_output(g, i) == r) {
        st = copy_tensor(rt, &args[i], t, d); /* nothing to do when the plan wrote in place */
        results[r] = args[i];
      }
  }
  for (int i = 0; i < g->n_inputs; i++) cs->slots[g->inputs[i]->id].t.data = NULL;
  return st;
}

