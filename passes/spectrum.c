/* spectrum.c: the `spectrum` pass (opt-in, `h3c --spectrum`): Spectrum step skipping
 * (docs/models/accelerations.md §6, docs/step-skipping.md).
 *
 * The sampling loop `loop(carried) {count = n}` whose body calls graph G (the graph with
 * the `trunk` loop) is unrolled by the static schedule into segments: maximal runs of real
 * steps and of forecast steps, each a loop of its own whose body is the original body
 * with the step index shifted by the segment's first step (an `index`/`set_index` of the
 * loop counter gets `offset += start`; any other use reads counter + start). G is cloned
 * twice: G_real returns the trunk's output as an extra output `hidden`; G_forecast takes
 * `hidden` as an extra input instead of running the trunk (the dead embedding ops go).
 *   real segment:     ..., hidden = call G_real(...)
 *                     R = spectrum_update(R, rows(hidden, video), k) {x(tau) rows}
 *                     [hist = [rows(hidden, video), hist[0 .. Q-2]]]   (only when w < 1)
 *                     carried: the original values, R, hold = hidden [, hist]
 *   forecast segment: f = spectrum_forecast(R, k [, hist]) {a(tau*) rows}
 *                     x = concat(rows(hold, 0, video_start), f, rows(hold, video_end, ..))
 *                     ... = call G_forecast(..., x)
 * so the audio (and text, pad) rows of x are the last real step's, bitwise. The feature
 * rows are [text_rows + audio_rows, + video_rows) of the module config. Every coefficient
 * is computed here in fp64 (spectrum_math.c). The real steps are recorded in the program
 * graph's attribute `spectrum_real` and reported.
 */
#include "h3/rewrite.h"

#include "pass_internal.h"
#include "spectrum.h"

#include <stdlib.h>
#include <string.h>

static const char PASS[] = "spectrum";

typedef struct {
  h3_module *m;
  h3_diag *d;
  const h3_skip_site *s;
  h3_graph *g_real, *g_fc;
  int p, q, n;
  int64_t vs, nv, rows, dim;
  const double *upd, *fc;
  h3_value *state_r, *hold, *hist; /* the Spectrum state after the segments so far */
  h3_value **cur;                  /* the sampling loop's carried values so far */
} spec_ctx;

static h3_value *build1(h3_builder *b, h3_opcode code, int n, h3_value **ops, int n_attrs,
                        const h3_attr *attrs, const char *name, h3_diag *d) {
  h3_op *op = h3_build_op(b, code, n, ops, n_attrs, attrs, 0, d);
  if (!op) return NULL;
  op->results[0]->name = name;
  return op->results[0];
}

/* rows [start, start + len) of x along axis 0 */
static h3_value *rows_of(spec_ctx *c, h3_builder *b, h3_value *x, int64_t start, int64_t len) {
  h3_attr a[3] = {h3_attr_int(c->m, "axis", 0), h3_attr_int(c->m, "start", start),
                  h3_attr_int(c->m, "len", len)};
  return build1(b, H3_OP_SLICE, 1, &x, 3, a, NULL, c->d);
}

static h3_value *zeros(spec_ctx *c, h3_builder *b, h3_dtype dt, int rank, const int64_t *dims,
                       const char *name) {
  h3_attr a[3] = {h3_attr_float(c->m, "value", 0.0), h3_attr_dtype(c->m, "dtype", dt),
                  h3_attr_ints(c->m, "shape", rank, dims)};
  return build1(b, H3_OP_CONST, 0, NULL, 3, a, name, c->d);
}

/* The coefficient rows of steps [start, start + len), `width` doubles each. */
static h3_attr table(spec_ctx *c, const double *all, int width, int start, int len) {
  return h3_attr_floats(c->m, "coeffs", width * len, all + (size_t)start * width);
}

/* ---- G_real and G_forecast -------------------------------------------------------------- */
static h3_status make_graphs(spec_ctx *c) {
  h3_module *m = c->m;
  const h3_graph *g = c->s->step;
  h3_value_map vm;
  char name[200];
  if (h3_value_map_init(&vm, m) != H3_OK) return h3_skip_oom(c->d, PASS);
  snprintf(name, sizeof name, "%s_real", g->name);
  c->g_real = h3_graph_clone(m, &vm, g, h3_graph_fresh_name(m, name));
  h3_value *hidden = c->g_real ? h3_value_map_get(&vm, c->s->trunk->results[0]) : NULL;
  if (hidden) { /* return ..., hidden */
    h3_op *ret = c->g_real->body.last;
    h3_value **ops = malloc((size_t)(ret->n_operands + 1) * sizeof *ops);
    if (ops) {
      memcpy(ops, ret->operands, (size_t)ret->n_operands * sizeof *ops);
      ops[ret->n_operands] = hidden;
      h3_builder b = {.m = m, .region = &c->g_real->body, .before = NULL, .span = ret->span};
      int n = ret->n_operands + 1;
      h3_op_erase(ret);
      h3_build_op_typed(&b, H3_OP_RETURN, n, ops, 0, NULL, 0, NULL, 0);
      h3_graph_add_output(m, c->g_real, "hidden");
      free(ops);
    }
  }
  h3_value_map_free(&vm);
  if (!hidden || m->oom || h3_value_map_init(&vm, m) != H3_OK) return h3_skip_oom(c->d, PASS);
  snprintf(name, sizeof name, "%s_forecast", g->name);
  c->g_fc = h3_graph_clone(m, &vm, g, h3_graph_fresh_name(m, name));
  h3_op *trunk = c->g_fc ? h3_value_map_get(&vm, c->s->trunk->results[0])->def : NULL;
  h3_value_map_free(&vm);
  if (!trunk) return h3_skip_oom(c->d, PASS);
  h3_value *in = h3_graph_add_input(m, c->g_fc, "hidden", trunk->results[0]->type, trunk->span);
  if (!in) return h3_skip_oom(c->d, PASS);
  h3_value_replace_all_uses(m, trunk->results[0], in);
  h3_op_erase(trunk);
  h3_graph_sweep_dead(m, c->g_fc);
  return m->oom ? h3_skip_oom(c->d, PASS) : H3_OK;
}

/* ---- one segment ------------------------------------------------------------------------ */
/* The call's replacement in a real segment body: returns the extra yields (R', hold'[, hist']). */
static h3_status real_call(spec_ctx *c, h3_builder *b, h3_value_map *vm, const h3_op *call,
                           h3_value *k, h3_value **st, h3_value **extra, int start, int len) {
  h3_value **ops = malloc((size_t)(call->n_operands + 1) * sizeof *ops);
  h3_type types[8];
  if (!ops || call->n_results + 1 > 8) {
    free(ops);
    return call->n_results + 1 > 8
               ? (h3_diag_error(c->d, call->span, "give the stepping graph at most 7 outputs",
                                "%s: the step graph has more than 7 outputs", PASS),
                  H3_ERR)
               : h3_skip_oom(c->d, PASS);
  }
  for (int i = 0; i < call->n_operands; i++) ops[i] = h3_value_map_get(vm, call->operands[i]);
  for (int i = 0; i < call->n_results; i++) types[i] = call->results[i]->type;
  types[call->n_results] = c->s->trunk->results[0]->type;
  h3_attr callee = h3_attr_string(c->m, "callee", c->g_real->name);
  h3_op *nc = h3_build_op_typed(b, H3_OP_CALL, call->n_operands, ops, 1, &callee,
                                call->n_results + 1, types, 0);
  free(ops);
  if (!nc) return h3_skip_oom(c->d, PASS);
  for (int i = 0; i < call->n_results; i++) {
    nc->results[i]->name = call->results[i]->name;
    h3_value_map_set(vm, call->results[i], nc->results[i]);
  }
  h3_value *hidden = nc->results[call->n_results];
  hidden->name = "hidden";
  h3_value *feat = rows_of(c, b, hidden, c->vs, c->nv);
  if (!feat) return H3_ERR;
  feat->name = "feature";
  h3_value *uops[3] = {st[0], feat, k};
  h3_attr ua = table(c, c->upd, c->p, start, len);
  extra[0] = build1(b, H3_OP_SPECTRUM_UPDATE, 3, uops, 1, &ua, "spectrum_r", c->d);
  extra[1] = hidden;
  if (!extra[0]) return H3_ERR;
  if (c->q > 0) { /* hist' = [feature, hist[0 .. Q-2]] */
    int64_t one[3] = {1, c->nv, c->dim};
    h3_attr ra = h3_attr_ints(c->m, "shape", 3, one);
    h3_value *f3 = build1(b, H3_OP_RESHAPE, 1, &feat, 1, &ra, NULL, c->d);
    if (!f3) return H3_ERR;
    if (c->q == 1) {
      extra[2] = f3;
    } else {
      h3_value *older = rows_of(c, b, st[2], 0, c->q - 1);
      h3_value *cat[2] = {f3, older};
      h3_attr ax = h3_attr_int(c->m, "axis", 0);
      extra[2] = older ? build1(b, H3_OP_CONCAT, 2, cat, 1, &ax, NULL, c->d) : NULL;
      if (!extra[2]) return H3_ERR;
    }
    extra[2]->name = "spectrum_hist";
  }
  return H3_OK;
}

/* The call's replacement in a forecast segment body. */
static h3_status forecast_call(spec_ctx *c, h3_builder *b, h3_value_map *vm, const h3_op *call,
                               h3_value *k, int start, int len) {
  h3_value *fops[3] = {c->state_r, k, c->hist};
  h3_dtype dt = c->s->trunk->results[0]->type.dtype; /* the forecast has the feature's dtype */
  h3_attr fa[2] = {table(c, c->fc, c->p + c->q, start, len), h3_attr_dtype(c->m, "dtype", dt)};
  h3_value *f = build1(b, H3_OP_SPECTRUM_FORECAST, c->q > 0 ? 3 : 2, fops, dt == H3_BF16 ? 1 : 2,
                       fa, "forecast", c->d);
  if (!f) return H3_ERR;
  h3_value *parts[3];
  int np = 0;
  int64_t ve = c->vs + c->nv;
  if (c->vs > 0 && !(parts[np++] = rows_of(c, b, c->hold, 0, c->vs))) return H3_ERR;
  parts[np++] = f;
  if (ve < c->rows && !(parts[np++] = rows_of(c, b, c->hold, ve, c->rows - ve))) return H3_ERR;
  h3_attr ax = h3_attr_int(c->m, "axis", 0);
  h3_value *x = np == 1 ? f : build1(b, H3_OP_CONCAT, np, parts, 1, &ax, "hidden", c->d);
  if (!x) return H3_ERR;
  h3_value **ops = malloc((size_t)(call->n_operands + 1) * sizeof *ops);
  h3_type types[8];
  if (!ops) return h3_skip_oom(c->d, PASS);
  for (int i = 0; i < call->n_operands; i++) ops[i] = h3_value_map_get(vm, call->operands[i]);
  ops[call->n_operands] = x;
  for (int i = 0; i < call->n_results && i < 8; i++) types[i] = call->results[i]->type;
  h3_attr callee = h3_attr_string(c->m, "callee", c->g_fc->name);
  h3_op *nc = h3_build_op_typed(b, H3_OP_CALL, call->n_operands + 1, ops, 1, &callee,
                                call->n_results, types, 0);
  free(ops);
  if (!nc) return h3_skip_oom(c->d, PASS);
  for (int i = 0; i < call->n_results; i++) {
    nc->results[i]->name = call->results[i]->name;
    h3_value_map_set(vm, call->results[i], nc->results[i]);
  }
  return H3_OK;
}

/* What the body hook of one segment needs. */
typedef struct {
  spec_ctx *c;
  h3_value *k;     /* the segment's counter: the row of its coefficient tables */
  h3_value **args; /* the body's extra args (R, hold[, hist]) of a real segment */
  h3_value *extra[3];
  int nc, n, start, len;
  bool real;
} seg_hook;

/* Replaces the step call (see real_call / forecast_call) and extends the yield. */
static h3_status segment_hook(void *ctx, h3_builder *b, h3_value_map *vm, const h3_op *op,
                              bool *handled) {
  seg_hook *h = ctx;
  spec_ctx *c = h->c;
  if (op == c->s->call) {
    *handled = true;
    return h->real ? real_call(c, b, vm, op, h->k, h->args, h->extra, h->start, h->len)
                   : forecast_call(c, b, vm, op, h->k, h->start, h->len);
  }
  if (op->code != H3_OP_YIELD) return H3_OK;
  *handled = true;
  h3_value *ys[16];
  for (int i = 0; i < h->nc; i++) ys[i] = h3_value_map_get(vm, op->operands[i]);
  for (int i = h->nc; i < h->n; i++) ys[i] = h->extra[i - h->nc];
  return h3_build_op_typed(b, H3_OP_YIELD, h->n, ys, 0, NULL, 0, NULL, 0) ? H3_OK
                                                                           : h3_skip_oom(c->d, PASS);
}

/* Clones the body of the sampling loop into a new loop for steps [start, start + len). */
static h3_status segment(spec_ctx *c, h3_builder *outer, int start, int len, bool real) {
  h3_module *m = c->m;
  const h3_op *loop = c->s->loop;
  const h3_region *body = &loop->regions[0];
  int nc = loop->n_operands, n_extra = real ? 2 + (c->q > 0) : 0, n = nc + n_extra;
  h3_value *init[16];
  h3_type types[16];
  h3_value_map vm = {0};
  if (n > 16) {
    h3_diag_error(c->d, loop->span, "carry at most 13 values in the sampling loop",
                  "%s: the sampling loop carries %d values", PASS, nc);
    return H3_ERR;
  }
  if (h3_value_map_init(&vm, m) != H3_OK) return h3_skip_oom(c->d, PASS);
  for (int i = 0; i < nc; i++) init[i] = c->cur[i];
  if (real) {
    init[nc] = c->state_r;
    init[nc + 1] = c->hold;
    if (c->q > 0) init[nc + 2] = c->hist;
  }
  for (int i = 0; i < n; i++) types[i] = init[i]->type;
  const char *label = h3_op_attr_string(loop, "label", "loop");
  const char *nl_label = h3_arena_printf(&m->arena, "%s.%s", label, real ? "real" : "forecast");
  h3_attr la[2] = {h3_attr_int(m, "count", len), h3_attr_string(m, "label", nl_label ? nl_label : label)};
  outer->span = loop->span;
  h3_op *nl = h3_build_op_typed(outer, H3_OP_LOOP, n, init, 2, la, n, types, 1);
  h3_region *r = nl ? &nl->regions[0] : NULL;
  h3_value *k = r ? h3_region_add_arg(m, r, body->args[0]->type, body->args[0]->name, loop->span) : NULL;
  bool ok = k != NULL;
  for (int i = 0; ok && i < n; i++) {
    h3_value *a = h3_region_add_arg(m, r, types[i], i < nc ? body->args[i + 1]->name : init[i]->name,
                                    loop->span);
    ok = a != NULL;
    if (ok && i < nc) h3_value_map_set(&vm, body->args[i + 1], a);
  }
  if (!ok) {
    h3_value_map_free(&vm);
    return h3_skip_oom(c->d, PASS);
  }
  seg_hook h = {.c = c, .k = k, .args = r->args + 1 + nc, .nc = nc, .n = n, .start = start,
                .len = len, .real = real};
  h3_status st = h3_loop_body_clone(m, &vm, body, r, start, segment_hook, &h, c->d);
  h3_value_map_free(&vm);
  if (st != H3_OK) return st;
  for (int i = 0; i < nc; i++) {
    c->cur[i] = nl->results[i];
    nl->results[i]->name = loop->results[i]->name;
  }
  if (real) {
    c->state_r = nl->results[nc];
    c->hold = nl->results[nc + 1];
    if (c->q > 0) c->hist = nl->results[nc + 2];
    for (int i = nc; i < n; i++) nl->results[i]->name = init[i]->name;
  }
  return H3_OK;
}

/* ---- the pass ------------------------------------------------------------------------------ */
static h3_status feature_rows(spec_ctx *c) {
  int64_t t = h3_module_config(c->m, "text_rows", -1), a = h3_module_config(c->m, "audio_rows", -1);
  c->nv = h3_module_config(c->m, "video_rows", -1);
  const h3_type *x = &c->s->trunk->results[0]->type;
  c->rows = x->dims[0];
  c->dim = x->dims[1];
  c->vs = t + a;
  if (t < 0 || a < 0 || c->nv < 1) {
    h3_diag_error(c->d, c->s->trunk->span,
                  "the forecast feature is rows [text_rows + audio_rows, + video_rows) of the "
                  "trunk's output: declare the three keys in the model's config",
                  "%s: the config lacks text_rows, audio_rows or video_rows", PASS);
    return H3_ERR;
  }
  if (c->vs + c->nv > c->rows) {
    h3_diag_error(c->d, c->s->trunk->span, "check the row counts of the config",
                  "%s: the video rows [%lld, %lld) lie outside the trunk's %lld rows", PASS,
                  (long long)c->vs, (long long)(c->vs + c->nv), (long long)c->rows);
    return H3_ERR;
  }
  return H3_OK;
}

static h3_status rewrite(spec_ctx *c, const bool *real) {
  h3_module *m = c->m;
  const h3_op *loop = c->s->loop;
  h3_builder b = {.m = m, .region = loop->parent, .before = (h3_op *)loop, .span = loop->span};
  int64_t rd[3] = {c->p, c->nv, c->dim}, hd[2] = {c->rows, c->dim}, qd[3] = {c->q, c->nv, c->dim};
  h3_dtype hdt = c->s->trunk->results[0]->type.dtype;
  c->state_r = zeros(c, &b, H3_F32, 3, rd, "spectrum_r");
  c->hold = zeros(c, &b, hdt, 2, hd, "hidden");
  c->hist = c->q > 0 ? zeros(c, &b, hdt, 3, qd, "spectrum_hist") : NULL;
  if (!c->state_r || !c->hold || (c->q > 0 && !c->hist)) return H3_ERR;
  for (int i = 0; i < loop->n_operands; i++) c->cur[i] = loop->operands[i];
  for (int i = 0; i < c->n;) {
    int j = i;
    while (j < c->n && real[j] == real[i]) j++;
    if (segment(c, &b, i, j - i, real[i]) != H3_OK) return H3_ERR;
    i = j;
  }
  for (int i = 0; i < loop->n_results; i++)
    h3_value_replace_all_uses(m, loop->results[i], c->cur[i]);
  h3_op_erase((h3_op *)loop);
  return m->oom ? h3_skip_oom(c->d, PASS) : H3_OK;
}

static h3_status spectrum_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  const h3_pass_options *po = h3_pass_options_of(ctx);
  h3_span none = {0};
  if (po->tier == H3_TIER_HIGH) {
    h3_diag_error(d, none, "drop --spectrum or --quality high",
                  "--spectrum cannot be combined with --quality high (Cache-DiT): both skip the "
                  "block stack; use one skip-step accelerator.");
    return H3_ERR;
  }
  h3_spectrum_options o = h3_spectrum_options_default();
  if (h3_spectrum_options_parse(po->spectrum, "--spectrum", &o, d) != H3_OK) return H3_ERR;
  h3_skip_site site;
  int found = h3_skip_site_find(m, PASS, &site, d);
  if (found < 0) return H3_ERR;
  if (found == 0) {
    h3_diag_error(d, none,
                  "Spectrum forecasts a block stack: label it `trunk: repeat ...` in a graph "
                  "that the program's sampling loop calls",
                  "%s: no program loop calls a graph with a `trunk` loop", PASS);
    return H3_ERR;
  }
  spec_ctx c = {.m = m, .d = d, .s = &site, .p = o.m + 1, .q = h3_spectrum_hist_len(&o)};
  c.n = (int)h3_op_attr_int(site.loop, "count", 0);
  if (feature_rows(&c) != H3_OK) return H3_ERR;
  bool *real = calloc((size_t)c.n + 1, sizeof *real);
  double *upd = calloc((size_t)c.n * (size_t)c.p + 1, sizeof *upd);
  double *fc = calloc((size_t)c.n * (size_t)(c.p + c.q) + 1, sizeof *fc);
  c.cur = calloc((size_t)site.loop->n_operands + 1, sizeof *c.cur);
  h3_status st = real && upd && fc && c.cur ? H3_OK : h3_skip_oom(d, PASS);
  int n_real = st == H3_OK ? h3_spectrum_schedule(&o, c.n, real) : 0, bad = 0;
  if (st == H3_OK && h3_spectrum_coefficients(&o, c.n, real, upd, fc, &bad) != 0) {
    h3_diag_error(d, site.loop->span,
                  "raise warmup (at least m + 1 real steps before the first forecast when "
                  "lam = 0) or give lam > 0",
                  "%s: step %d cannot be forecast: the ridge system (G + %g I) is singular", PASS,
                  bad, o.lam);
    st = H3_ERR;
  }
  c.upd = upd;
  c.fc = fc;
  const h3_graph *step = site.step;
  if (st == H3_OK) st = make_graphs(&c);
  if (st == H3_OK) st = rewrite(&c, real);
  if (st == H3_OK) {
    h3_graph_drop_if_unused(m, step);
    int64_t *steps = malloc(((size_t)n_real + 1) * sizeof *steps);
    if (!steps) {
      st = h3_skip_oom(d, PASS);
    } else {
      for (int i = 0, j = 0; i < c.n; i++)
        if (real[i]) steps[j++] = i;
      h3_graph_set_attr(m, site.prog, h3_attr_ints(m, "spectrum_real", n_real, steps));
      h3_graph_set_attr(m, site.prog, h3_attr_int(m, "spectrum_steps", c.n));
      free(steps);
      h3_strbuf t;
      h3_strbuf_init(&t);
      h3_spectrum_steps_text(&t, real, c.n, true);
      h3_pass_report(ctx,
                     "%d of %d steps real: %s (warmup %d, window %g, flex %g, m %d, lam %g, w %g)",
                     n_real, c.n, t.data ? t.data : "", o.warmup, o.window, o.flex, o.m, o.lam,
                     o.w);
      h3_diag_note(d, none, "spectrum: %d of %d steps real: %s", n_real, c.n, t.data ? t.data : "");
      h3_strbuf_free(&t);
    }
  }
  free(real);
  free(upd);
  free(fc);
  free(c.cur);
  return st;
}

const h3_pass h3_pass_spectrum = {
    .name = "spectrum",
    .description = "Spectrum step skipping (--spectrum): run the block stack at the real steps "
                   "of a static schedule, forecast its output (Chebyshev ridge fit) at the others "
                   "(docs/step-skipping.md)",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = false,
    .requires = {NULL},
    .run = spectrum_run,
};
