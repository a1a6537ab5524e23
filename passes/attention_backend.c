/* attention_backend.c: the `attention-backend` pass (`h3c compile --attention
 * sage|sol[,KEY=VALUE...]`, docs/models/accelerations.md §5): the attention of the blocks
 * of the denoiser's stack becomes `sage_attention` (int8 QK with K smoothing, P and V in e4m3
 * or bf16) or `sol_attention` (Sol block-sparse: exact blocks above a threshold, the others
 * as centroid pseudo-keys). The stack is the loops labelled `trunk` (the label
 * models/minimax_h3.g gives its block stack, which the step-skipping passes find it by) or
 * `trunk.*` (Cache-DiT's split of it); attention outside it (the text refiner, run once per
 * request) stays dense, as the recipe keeps it.
 *
 * `sage` runs at every (step, block). `sol` is the Sage->Sol schedule of the spec: steps
 * i < dense_steps (default 10) and blocks l < dense_layers (default 2) run the dense backend
 * (`dense_backend=dense`, the plain attention op, by default; or `sage` with its defaults),
 * every other (step, block) runs sol; dense_steps=0,dense_layers=0 is sol everywhere. The
 * choice is static: attention_schedule.c splits the loops and clones the step graph. The
 * pass runs after spectrum and cache-dit, so it sees their step segments and trunk pieces.
 *
 * Options (h3_pass_options.attention: the backend, then its keys): sage `pv=fp8|bf16`
 * (default fp8), `smooth=1|0` (default 1); sol `tau=F` (default 1.0; -inf: every block
 * exact), `thresh=diag|exact`, `sink_tokens=N`, `sink_start=N` (default 0), `dense_steps=N`,
 * `dense_layers=N`, `dense_backend=dense|sage`. The rewrite keeps q, k, v and the attributes
 * attention shares with them (scale, segments); an attention with causal = 1 or a v_view
 * (the pass runs before attention-v-view) is an error: neither contract has them. A module
 * without a trunk loop holding an attention is an error too: the flag is never silently
 * ignored. The schedule is reported and recorded in the program's attribute
 * `attention_schedule`. Numerics change, so the pass runs only when asked for, at every tier.
 */
#include "h3/op_registry.h"

#include "attention_schedule.h"
#include "pass_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char HINT[] =
    "--attention sage[,pv=fp8|bf16][,smooth=1|0] or sol[,tau=F][,thresh=diag|exact]"
    "[,sink_tokens=N][,sink_start=N][,dense_steps=N][,dense_layers=N][,dense_backend=dense|sage]";

static bool count_key(const char *val, int64_t *out) {
  char *e;
  long long x = strtoll(val, &e, 10);
  *out = x;
  return *val && !*e && x >= 0 && x <= (1LL << 40);
}

/* One KEY=VALUE option of the backend o->sol says (value NUL-terminated); false when the key
 * is not the backend's or the value not one it takes. */
static bool option(h3_att_options *o, const char *key, const char *val) {
  char *e;
  if (!o->sol && !strcmp(key, "pv") && (!strcmp(val, "fp8") || !strcmp(val, "bf16")))
    return o->pv = !strcmp(val, "fp8") ? "fp8" : "bf16", true;
  if (!o->sol && !strcmp(key, "smooth") && (!strcmp(val, "0") || !strcmp(val, "1")))
    return o->smooth = val[0] - '0', true;
  if (!o->sol) return false;
  if (!strcmp(key, "thresh") && (!strcmp(val, "diag") || !strcmp(val, "exact")))
    return o->thresh = !strcmp(val, "diag") ? "diag" : "exact", true;
  if (!strcmp(key, "dense_backend") && (!strcmp(val, "dense") || !strcmp(val, "sage")))
    return o->dense = !strcmp(val, "sage") ? H3_ATT_SAGE : H3_ATT_DENSE, true;
  if (!strcmp(key, "tau")) {
    o->tau = strtod(val, &e);
    return *val && !*e && !isnan(o->tau);
  }
  if (!strcmp(key, "sink_tokens")) return count_key(val, &o->sink_tokens);
  if (!strcmp(key, "sink_start")) return count_key(val, &o->sink_start);
  if (!strcmp(key, "dense_steps")) return count_key(val, &o->dense_steps);
  if (!strcmp(key, "dense_layers")) return count_key(val, &o->dense_layers);
  return false;
}

/* Why item KEY=VALUE (split at *eq, NULL when there is no '=') is refused, as a hint. */
static const char *why(const h3_att_options *o, const char *key, const char *eq) {
  static const char *const sage_keys[] = {"pv", "smooth"};
  static const char *const sol_keys[] = {"tau", "thresh", "sink_tokens", "sink_start",
                                         "dense_steps", "dense_layers", "dense_backend"};
  if (!eq) return "give KEY=VALUE";
  if (o->sol && (!strncmp(key, "dense_", 6) || !strncmp(key, "sink_", 5)) && strcmp(key, "dense_backend"))
    return "a count: an integer, 0 or more (dense_steps at most the steps, dense_layers the blocks)";
  if (o->sol && !strcmp(key, "dense_backend"))
    return "dense_backend is dense (the plain attention) or sage (sage with its defaults)";
  for (size_t i = 0; o->sol && i < sizeof sage_keys / sizeof *sage_keys; i++)
    if (!strcmp(key, sage_keys[i]))
      return "a key of sage, not sol: --attention sol,dense_backend=sage runs sage with its defaults";
  for (size_t i = 0; !o->sol && i < sizeof sol_keys / sizeof *sol_keys; i++)
    if (!strcmp(key, sol_keys[i])) return "a key of sol, not sage: --attention sol,KEY=VALUE";
  return HINT;
}

/* Parses "sage,pv=bf16" or "sol,tau=0.5,dense_backend=sage". */
static h3_status parse(const char *text, h3_att_options *o, h3_diag *d) {
  *o = (h3_att_options){false, H3_ATT_SAGE, "fp8", "diag", 1, 0, 0, 10, 2, 1.0};
  const char *p = text && *text ? text : "sage"; /* the pass enabled alone: sage's defaults */
  if (!strncmp(p, "sol", 3) && (!p[3] || p[3] == ',')) o->sol = true, o->dense = H3_ATT_DENSE, p += 3;
  else if (!strncmp(p, "sage", 4) && (!p[4] || p[4] == ',')) p += 4;
  else {
    h3_diag_error(d, (h3_span){0}, HINT, "--attention: unknown backend '%s'", p);
    return H3_ERR;
  }
  if (*p == ',') p++;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    char item[96] = "", *eq = NULL; /* KEY=VALUE split at the '=' */
    if (n < sizeof item) memcpy(item, p, n), eq = strchr(item, '=');
    if (eq) *eq = 0;
    if (!eq || !option(o, item, eq + 1)) {
      h3_diag_error(d, (h3_span){0}, why(o, item, eq), "--attention %s: bad option '%.*s'",
                    o->sol ? "sol" : "sage", (int)n, p);
      return H3_ERR;
    }
    p = end ? end + 1 : p + n;
  }
  return H3_OK;
}

h3_status h3_att_set_kind(h3_module *m, h3_op *op, h3_att_kind kind, const h3_att_options *o,
                          h3_diag *d) {
  if (kind == H3_ATT_DENSE) return H3_OK;
  if (h3_op_attr_int(op, "causal", 0) || h3_op_attr(op, "v_view")) {
    h3_diag_error(d, op->span, "run attention-backend before attention-v-view; sage and sol are non-causal",
                  "attention-backend: this attention is causal or reads v in place");
    return H3_ERR;
  }
  if (kind == H3_ATT_SOL) {
    op->code = H3_OP_SOL_ATTENTION;
    h3_op_set_attr(m, op, h3_attr_float(m, "tau", o->tau));
    h3_op_set_attr(m, op, h3_attr_string(m, "thresh", o->thresh));
    h3_op_set_attr(m, op, h3_attr_int(m, "sink_tokens", o->sink_tokens));
    h3_op_set_attr(m, op, h3_attr_int(m, "sink_start", o->sink_start));
  } else {
    op->code = H3_OP_SAGE_ATTENTION;
    h3_op_set_attr(m, op, h3_attr_string(m, "pv", o->pv));
    h3_op_set_attr(m, op, h3_attr_int(m, "smooth", o->smooth));
  }
  return H3_OK;
}

static const char *const KIND[] = {"dense", "sage", "sol"};

/* "a-b" or "a" for [a, b], a <= b, into t. */
static void range(h3_strbuf *t, const char *what, int64_t a, int64_t b) {
  if (a == b) h3_strbuf_printf(t, "%s %lld", what, (long long)a);
  else h3_strbuf_printf(t, "%s %lld-%lld", what, (long long)a, (long long)b);
}

/* The schedule as text: "steps 0-9: blocks 0-49 dense; steps 10-48: blocks 0-1 dense,
 * blocks 2-49 sol" ("every step" when r has no program). */
static void schedule_text(h3_strbuf *t, const h3_att_options *o, const h3_att_result *r) {
  int64_t ns = r->steps, nl = r->layers, ds = o->sol ? o->dense_steps : ns, dl = o->dense_layers;
  if (dl >= nl) ds = ns; /* no sol block: the same at every step */
  if (ns < 0) ds = o->sol ? 0 : 1, ns = 1; /* no program: one phase for every step */
  bool every = r->steps < 0 || (ds == 0 || ds == ns);
  if (ds > 0) {
    if (every) h3_strbuf_append(t, "every step");
    else range(t, "steps", 0, ds - 1);
    range(t, ": blocks", 0, nl - 1);
    h3_strbuf_printf(t, " %s", KIND[o->dense]);
  }
  if (ds < ns) {
    if (ds > 0) h3_strbuf_append(t, "; ");
    if (every) h3_strbuf_append(t, "every step");
    else range(t, "steps", ds, ns - 1);
    if (dl > 0) range(t, ": blocks", 0, dl - 1), h3_strbuf_printf(t, " %s", KIND[o->dense]);
    h3_strbuf_append(t, dl == 0 ? ":" : dl < nl ? "," : "");
    if (dl < nl) range(t, " blocks", dl, nl - 1), h3_strbuf_append(t, " sol");
  }
}

static h3_status attention_backend_run(h3_module *m, h3_pass_context *pc, h3_diag *d) {
  h3_att_options o;
  h3_att_result r;
  if (parse(h3_pass_options_of(pc)->attention, &o, d) != H3_OK) return H3_ERR;
  if (h3_att_schedule(m, &o, &r, d) != H3_OK) return H3_ERR;
  if (r.count[0] + r.count[1] + r.count[2] == 0) {
    h3_diag_error(d, (h3_span){0}, "--attention applies to MiniMax-H3 (models/minimax_h3.g)",
                  "--attention %s: model '%s' has no attention in a loop labelled 'trunk'",
                  o.sol ? "sol" : "sage", m->model ? m->model : "?");
    return H3_ERR;
  }
  h3_strbuf t;
  h3_strbuf_init(&t);
  schedule_text(&t, &o, &r);
  const char *text = t.data ? t.data : "";
  for (int i = 0; i < m->n_graphs; i++)
    if (m->graphs[i]->kind == H3_GRAPH_PROGRAM)
      h3_graph_set_attr(m, m->graphs[i], h3_attr_string(m, "attention_schedule", text));
  if (o.sol)
    h3_pass_report(pc, "%s (sol: tau %g, thresh %s, sinks %lld at %lld); %d sol_attention, %d %s "
                       "ops", text, o.tau, o.thresh, (long long)o.sink_tokens,
                   (long long)o.sink_start, r.count[2], r.count[o.dense], KIND[o.dense]);
  else
    h3_pass_report(pc, "%d attention ops of the block stack are sage_attention (pv %s, smoothing %s)",
                   r.count[1], o.pv, o.smooth ? "on" : "off");
  h3_diag_note(d, (h3_span){0}, "attention: %s", text);
  h3_strbuf_free(&t);
  return H3_OK;
}

const h3_pass h3_pass_attention_backend = {
    .name = "attention-backend",
    .description = "--attention sage|sol: the block stack's attention becomes sage_attention (int8 "
                   "QK, P and V in e4m3) or, by the static Sage->Sol schedule, sol_attention "
                   "(block-sparse) from step dense_steps in blocks from dense_layers; the text "
                   "refiner stays dense",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = false,
    .requires = {NULL},
    .run = attention_backend_run,
};
