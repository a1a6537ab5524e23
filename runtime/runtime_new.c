/* runtime_new.c: creating a runtime (include/h3/runtime.h): the parameters uploaded from a
 * weight store or made on the device, the load-time ops run right after their parameter, the
 * residency plan under a device memory budget; its allocations and their out-of-memory
 * errors; the statistics and traces a run leaves. Running graphs: runtime/exec.c. */
#include "exec_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const h3_span no_span = {0};

void *h3_rt_alloc(h3_runtime *rt, size_t bytes) {
  if (++rt->n_allocs == rt->fault_alloc) return NULL;
  return rt->b->ops->alloc(rt->b, bytes ? bytes : 1);
}

static const char *human_bytes(int64_t v, char *buf, size_t n) {
  if (v >= (int64_t)1 << 30) snprintf(buf, n, "%.2f GiB", (double)v / (double)(1 << 30));
  else if (v >= (int64_t)1 << 20) snprintf(buf, n, "%.2f MiB", (double)v / (double)(1 << 20));
  else snprintf(buf, n, "%lld bytes", (long long)v);
  return buf;
}

void h3_rt_oom_error(h3_runtime *rt, h3_diag *d, h3_span span, const char *what, int64_t bytes) {
  char b1[32], b2[32], b3[32];
  h3_diag_error(d, span,
                "compile a smaller plan (another --config, smaller --set sizes, fewer --set seqs) or "
                "run on a device with more memory",
                "out of %s memory for %s (%s); the plan needs %s of weights and %s of activation "
                "arenas", rt->b->ops->name, what, human_bytes(bytes, b1, sizeof b1),
                human_bytes(rt->plan_weight_bytes, b2, sizeof b2),
                human_bytes(rt->plan_arena_bytes, b3, sizeof b3));
}

/* The load-time ops of parameter p (h3_op_is_load_time: the --int8 weight quantization),
 * run right after p is uploaded. Their results are owned slots of their graph, kept like
 * weights and never recomputed (run_region skips the ops); a second op of equal attributes
 * on p (in another graph) shares the first one's buffers. p's own buffer is released when
 * nothing but load-time ops reads it, so the lowered weights cost their int8 size only. */
static h3_status run_load_ops(h3_runtime *rt, const h3_param *p, h3_diag *d) {
  const h3_op *first = NULL;
  const gstate *first_gs = NULL;
  int n = 0;
  for (int gi = 0; gi < rt->m->n_graphs; gi++) {
    gstate *gs = &rt->graphs[gi];
    for (const h3_op *op = gs->g->body.first; op; op = op->next) {
      if (!h3_op_is_load_time(op) || op->operands[0] != p->value) continue;
      n++;
      if (first && h3_op_attr_int(op, "rotate", 0) == h3_op_attr_int(first, "rotate", 0)) {
        for (int i = 0; i < op->n_results; i++)
          gs->slots[op->results[i]->id].t = first_gs->slots[first->results[i]->id].t;
        continue;
      }
      h3_tensor out[2]; /* quantize_rows: codes and scales */
      h3_status st = H3_OK;
      for (int i = 0; st == H3_OK && i < 2 && i < op->n_results; i++) {
        slot *s = &gs->slots[op->results[i]->id];
        size_t bytes = (size_t)h3_type_bytes(&op->results[i]->type);
        s->t = (h3_tensor){op->results[i]->type, h3_rt_alloc(rt, bytes)};
        if (!s->t.data) {
          char what[200];
          snprintf(what, sizeof what, "the load-time %s of parameter '%s'", h3_opcode_name(op->code), p->name);
          h3_rt_oom_error(rt, d, op->span, what, (int64_t)bytes);
          st = H3_ERR;
          break;
        }
        s->cap = bytes ? bytes : 1;
        rt->weight_bytes += s->cap;
        out[i] = s->t;
      }
      if (st == H3_OK)
        st = rt->b->ops->run_op(rt->b, op, &rt->params[p->value->id], 1, out, op->n_results, d);
      for (int i = 0; st == H3_OK && i < op->n_results; i++) /* streamed: kept on the host */
        if (h3_stream_holds(rt->stream, op->results[i])) {
          slot *s = &gs->slots[op->results[i]->id];
          st = h3_stream_take(rt->stream, op->results[i], s->t.data, d);
          rt->b->ops->release(rt->b, s->t.data);
          rt->weight_bytes -= s->cap;
          s->t.data = NULL;
          s->cap = 0;
        }
      if (st != H3_OK) return st;
      if (!first) first = op, first_gs = gs;
    }
  }
  h3_tensor *pt = &rt->params[p->value->id];
  if (n > 0 && n == p->value->uses && pt->data) {
    h3_status st = rt->b->ops->sync(rt->b, d);
    if (st != H3_OK) return st;
    if (!rt->borrowed[p->value->id]) rt->b->ops->release(rt->b, pt->data);
    rt->weight_bytes -= (size_t)h3_type_bytes(&p->type);
    pt->data = NULL;
  }
  return H3_OK;
}

/* The bytes of every graph's activation arena (the graphs' arena_bytes). */
static int64_t arena_total(const h3_module *m) {
  int64_t bytes = 0;
  for (int i = 0; i < m->n_graphs; i++) {
    const h3_attr *a = h3_graph_attr(m->graphs[i], "arena_bytes");
    if (a && a->kind == H3_ATTR_INT && a->i > 0) bytes += a->i;
  }
  return bytes;
}

/* p's random weights made by the backend into host memory at `host` (p's layout), one block
 * (row of the stack) at a time: the device holds one block. */
static h3_status make_on_host(h3_runtime *rt, const h3_param *p, void *host, h3_diag *d) {
  h3_backend *b = rt->b;
  int64_t rows = p->type.rank > 0 && p->type.dims[0] > 0 ? p->type.dims[0] : 1;
  int64_t per = h3_weights_tensor_count(p) / rows;
  size_t row = (size_t)h3_type_bytes(&p->type) / (size_t)rows;
  void *dev = h3_rt_alloc(rt, row);
  if (!dev) {
    char what[200];
    snprintf(what, sizeof what, "a block of parameter '%s'", p->name);
    h3_rt_oom_error(rt, d, p->span, what, (int64_t)row);
    return H3_ERR;
  }
  h3_status st = H3_OK;
  for (int64_t r = 0; st == H3_OK && r < rows; r++) {
    st = b->ext->init_param(b, dev, p, rt->opt.weight_seed, r * per, per, d);
    if (st == H3_OK) st = b->ops->download(b, (char *)host + (size_t)r * row, dev, row, d);
    if (st == H3_OK) st = b->ops->sync(b, d);
  }
  b->ops->release(b, dev);
  return st;
}

/* A parameter whose --int8 quantizer's results all stream: quantized on the host from the
 * store, or from the stack the backend makes block by block (make_on_host). */
static h3_status load_quantized(h3_runtime *rt, const h3_weight *wt, const h3_param *p,
                                const h3_op *q, h3_diag *d) {
  size_t bytes = (size_t)h3_type_bytes(&p->type);
  void *host = wt ? wt->data : aligned_alloc(64, (bytes + 63) & ~(size_t)63);
  if (!host) {
    h3_diag_error(d, p->span, "run on a machine with more memory",
                  "out of host memory for parameter '%s' (%zu bytes), to quantize it", p->name,
                  bytes);
    return H3_ERR;
  }
  h3_status st = wt ? H3_OK : make_on_host(rt, p, host, d);
  if (st == H3_OK) st = h3_stream_quantize(rt->stream, q, host, d);
  if (!wt) free(host);
  return st;
}

/* Gives parameter p its weights: the store's buffer (host memory backends), an upload of it,
 * or the backend's own random fill; then its load-time ops. A streamed parameter stays in
 * host memory (the store's buffer, or what the backend made), and so do the int8 codes and
 * scales of one whose quantizer's results stream. */
static h3_status load_param(h3_runtime *rt, const h3_weights *w, const h3_param *p, h3_diag *d) {
  h3_backend *b = rt->b;
  const h3_weight *wt = w ? h3_weights_get(w, p) : NULL;
  size_t bytes = (size_t)h3_type_bytes(&p->type);
  if ((w && !wt) || !p->value || p->value->id < 0 || p->value->id >= rt->n_ids) {
    h3_diag_error(d, p->span, NULL, "parameter '%s' has no weights", p->name);
    return H3_ERR;
  }
  bool streamed = h3_stream_holds(rt->stream, p->value);
  if (wt && streamed) return h3_stream_hold(rt->stream, p->value, wt->data, d);
  if (streamed) {
    void *host = h3_stream_host(rt->stream, p->value, d);
    return host ? make_on_host(rt, p, host, d) : H3_ERR;
  }
  const h3_op *q = h3_stream_quantizer(rt->stream, p);
  if (q) return load_quantized(rt, wt, p, q, d);
  if (wt && b->ops->host_memory) { /* the store's buffer is the backend's memory: no copy */
    rt->params[p->value->id] = (h3_tensor){p->type, wt->data};
    rt->borrowed[p->value->id] = true;
    rt->weight_bytes += bytes;
    return run_load_ops(rt, p, d);
  }
  void *dev = h3_rt_alloc(rt, bytes);
  h3_status st = !dev ? H3_ERR
                 : wt ? b->ops->upload(b, dev, wt->data, bytes, d)
                      : b->ext->init_param(b, dev, p, rt->opt.weight_seed, 0,
                                           h3_weights_tensor_count(p), d);
  if (st != H3_OK) {
    if (dev) b->ops->release(b, dev);
    if (!dev) {
      char what[200];
      snprintf(what, sizeof what, "parameter '%s'", p->name);
      h3_rt_oom_error(rt, d, p->span, what, (int64_t)bytes);
    }
    return st;
  }
  rt->params[p->value->id] = (h3_tensor){p->type, dev};
  rt->weight_bytes += bytes;
  return run_load_ops(rt, p, d);
}

h3_runtime *h3_runtime_new(const h3_module *m, h3_backend *b, const h3_weights *w,
                           const h3_runtime_options *o, h3_diag *d) {
  h3_runtime *rt = calloc(1, sizeof *rt);
  if (!rt) {
    h3_diag_error(d, no_span, H3_HINT_OOM, "out of memory creating the runtime");
    return NULL;
  }
  rt->m = m;
  rt->b = b;
  if (o) rt->opt = *o;
  rt->dev_clock = rt->opt.trace && rt->opt.trace_device && b->ext && b->ext->mark &&
                  b->ext->mark_seconds && b->ext->marks_reset;
  rt->n_ids = m->next_value_id;
  rt->params = calloc((size_t)rt->n_ids + 1, sizeof *rt->params);
  rt->borrowed = calloc((size_t)rt->n_ids + 1, sizeof *rt->borrowed);
  rt->graphs = calloc((size_t)m->n_graphs + 1, sizeof *rt->graphs);
  int ok = rt->params && rt->borrowed && rt->graphs;
  for (int i = 0; ok && i < m->n_graphs; i++) {
    rt->graphs[i].g = m->graphs[i];
    rt->graphs[i].slots = calloc((size_t)rt->n_ids + 1, sizeof(slot));
    ok = rt->graphs[i].slots != NULL;
  }
  if (!ok) {
    h3_diag_error(d, no_span, H3_HINT_OOM, "out of memory creating the runtime");
    h3_runtime_free(rt);
    return NULL;
  }
  const char *fault = getenv("H3_FAULT_ALLOC");
  rt->fault_alloc = fault ? atoll(fault) : 0;
  for (int i = 0; i < m->n_params; i++) rt->plan_weight_bytes += h3_type_bytes(&m->params[i]->type);
  rt->plan_arena_bytes = arena_total(m);
  if (!w && !(b->ext && b->ext->init_param)) {
    h3_diag_error(d, no_span, "pass a weight store",
                  "the %s backend cannot make random weights itself", b->ops->name);
    h3_runtime_free(rt);
    return NULL;
  }
  /* the backend makes plain random weights itself; NVFP4 ones come quantized from the host */
  h3_weights *nv = NULL;
  for (int i = 0; !w && !nv && i < m->n_params; i++)
    if (m->params[i]->quant != H3_QUANT_NONE && !(nv = h3_weights_random_nvfp4(m, rt->opt.weight_seed, d))) {
      h3_runtime_free(rt);
      return NULL;
    }
  if (rt->opt.device_memory > 0 &&
      h3_stream_new(m, b, rt->opt.device_memory, rt->plan_arena_bytes, &rt->stream, &rt->planned,
                    d) != H3_OK) {
    h3_weights_free(nv);
    h3_runtime_free(rt);
    return NULL;
  }
  /* what streams (and feeds a streamed result) first, each stack's device memory given back
     before the next (trim): the device holds one stack (and its int8 form) at a time, before
     anything else is resident */
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < m->n_params; i++) {
      const h3_param *p = m->params[i];
      if (h3_stream_feeds(rt->stream, p) != (pass == 0)) continue;
      if (load_param(rt, w ? w : p->quant != H3_QUANT_NONE ? nv : NULL, p, d) != H3_OK) {
        h3_weights_free(nv);
        h3_runtime_free(rt);
        return NULL;
      }
      if (pass == 0 && b->ext && b->ext->trim) b->ext->trim(b);
    }
  if (rt->stream && h3_stream_start(rt->stream, &rt->weight_bytes, d) != H3_OK) {
    h3_weights_free(nv);
    h3_runtime_free(rt);
    return NULL;
  }
  if (nv && b->ops->sync(b, d) != H3_OK) { /* the uploads read nv */
    h3_weights_free(nv);
    h3_runtime_free(rt);
    return NULL;
  }
  h3_weights_free(nv);
  rt->t0 = b->ops->now(b);
  return rt;
}

void h3_runtime_free(h3_runtime *rt) {
  if (!rt) return;
  for (int i = 0; rt->graphs && i < rt->m->n_graphs; i++) {
    gstate *gs = &rt->graphs[i];
    for (int v = 0; gs->slots && v < rt->n_ids; v++)
      if (gs->slots[v].cap) rt->b->ops->release(rt->b, gs->slots[v].t.data);
    free(gs->slots);
    for (int i = 0; gs->staged && i < gs->g->n_inputs; i++)
      if (gs->staged[i]) rt->b->ops->release(rt->b, gs->staged[i]);
    free(gs->staged);
    if (gs->arena) rt->b->ops->release(rt->b, gs->arena);
  }
  for (int v = 0; rt->params && v < rt->n_ids; v++)
    if (rt->params[v].data && !(rt->borrowed && rt->borrowed[v]))
      rt->b->ops->release(rt->b, rt->params[v].data);
  h3_stream_free(rt->stream);
  free(rt->params);
  free(rt->borrowed);
  free(rt->graphs);
  free(rt->ev);
  free(rt->ev_code);
  free(rt->br);
  free(rt);
}

const h3_op_stat *h3_runtime_op_stats(const h3_runtime *rt) { return rt->stats; }

void h3_runtime_reset_stats(h3_runtime *rt) {
  memset(rt->stats, 0, sizeof rt->stats);
  rt->n_ev = rt->ev_first = 0;
  if (rt->opt.observe_reset) rt->opt.observe_reset(rt->opt.observe_ctx);
}

size_t h3_runtime_trace(const h3_runtime *rt, const h3_trace_event **events) {
  *events = rt->ev;
  return rt->n_ev;
}

size_t h3_runtime_branches(const h3_runtime *rt, const h3_branch_event **events) {
  *events = rt->br;
  return rt->n_br;
}

size_t h3_runtime_weight_bytes(const h3_runtime *rt) { return rt->weight_bytes; }
size_t h3_runtime_activation_bytes(const h3_runtime *rt) { return rt->act_bytes; }

h3_status h3_runtime_check_budget(const h3_module *m, h3_backend *b, int64_t budget, h3_diag *d) {
  h3_stream *st = NULL;
  h3_stream_info planned;
  h3_status s = h3_stream_new(m, b, budget, arena_total(m), &st, &planned, d);
  h3_stream_free(st);
  return s;
}

bool h3_runtime_streaming(h3_runtime *rt, h3_streaming *out) {
  h3_stream_info in = rt->planned;
  if (rt->stream) h3_stream_get_info(rt->stream, &in);
  *out = (h3_streaming){in.budget, in.fixed_bytes, in.layers, in.block_bytes,
                        in.plan.resident_blocks, in.plan.ring_slots, in.plan.device_bytes,
                        in.plan.streamed_bytes, in.plan.min_budget, in.block_copy_seconds,
                        in.peak_device_bytes, in.stall_seconds, in.stall_waits};
  return rt->stream != NULL;
}
