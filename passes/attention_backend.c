/* attention_backend.c: the `attention-backend` pass (`h3c compile --attention
 * sage|sol[,KEY=VALUE...]`, docs/models/accelerations.md §5): the attention of every block of
 * the denoiser's stack becomes `sage_attention` (int8 QK with K smoothing, P and V in e4m3 or
 * bf16) or `sol_attention` (Sol block-sparse: exact blocks above a threshold, the others as
 * centroid pseudo-keys), at every step. The stack is the loop labelled `trunk` (the label
 * models/minimax_h3.g gives its block stack, which the step-skipping passes find by too);
 * attention outside it (the text refiner, run once per request) stays dense, as the recipe
 * keeps it.
 *
 * Options (h3_pass_options.attention: the backend, then its keys): sage `pv=fp8|bf16`
 * (default fp8), `smooth=1|0` (default 1); sol `tau=F` (default 1.0; -inf: every block
 * exact), `thresh=diag|exact`, `sink_tokens=N`, `sink_start=N` (default 0). The rewrite
 * keeps q, k, v and the attributes attention shares with them (scale, segments); an
 * attention with causal = 1 or a v_view (the pass runs before attention-v-view) is an
 * error: neither contract has them. A module without a `trunk` loop holding an attention is
 * an error too: the flag is never silently ignored. Numerics change, so the pass runs only
 * when asked for, at every tier.
 */
#include "h3/op_registry.h"

#include "pass_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  bool sol;
  const char *pv, *thresh;
  int64_t smooth, sink_tokens, sink_start;
  double tau;
} backend_options;

/* One KEY=VALUE option of the backend o->sol says (value NUL-terminated); false when the key
 * is not the backend's or the value not one it takes. */
static bool option(backend_options *o, const char *key, const char *val) {
  char *e;
  if (!o->sol && !strcmp(key, "pv") && (!strcmp(val, "fp8") || !strcmp(val, "bf16")))
    return o->pv = !strcmp(val, "fp8") ? "fp8" : "bf16", true;
  if (!o->sol && !strcmp(key, "smooth") && (!strcmp(val, "0") || !strcmp(val, "1")))
    return o->smooth = val[0] - '0', true;
  if (o->sol && !strcmp(key, "thresh") && (!strcmp(val, "diag") || !strcmp(val, "exact")))
    return o->thresh = !strcmp(val, "diag") ? "diag" : "exact", true;
  if (o->sol && !strcmp(key, "tau")) {
    o->tau = strtod(val, &e);
    return *val && !*e && !isnan(o->tau);
  }
  if (o->sol && (!strcmp(key, "sink_tokens") || !strcmp(key, "sink_start"))) {
    long long x = strtoll(val, &e, 10);
    *(key[5] == 't' ? &o->sink_tokens : &o->sink_start) = x;
    return *val && !*e && x >= 0 && x <= (1LL << 40);
  }
  return false;
}

/* Parses "sage,pv=bf16" or "sol,tau=0.5,thresh=exact". */
static h3_status parse(const char *text, backend_options *o, h3_diag *d) {
  *o = (backend_options){false, "fp8", "diag", 1, 0, 0, 1.0};
  const char *hint = "--attention sage[,pv=fp8|bf16][,smooth=1|0] or sol[,tau=F][,thresh=diag|exact]"
                     "[,sink_tokens=N][,sink_start=N]";
  const char *p = text && *text ? text : "sage"; /* the pass enabled alone: sage's defaults */
  if (!strncmp(p, "sol", 3) && (!p[3] || p[3] == ',')) o->sol = true, p += 3;
  else if (!strncmp(p, "sage", 4) && (!p[4] || p[4] == ',')) p += 4;
  else {
    h3_diag_error(d, (h3_span){0}, hint, "--attention: unknown backend '%s'", p);
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
      h3_diag_error(d, (h3_span){0}, hint, "--attention %s: bad option '%.*s'", o->sol ? "sol" : "sage",
                    (int)n, p);
      return H3_ERR;
    }
    p = end ? end + 1 : p + n;
  }
  return H3_OK;
}

/* Rewrites the attention ops of region r (and its nested regions); *n counts them. */
static h3_status rewrite(h3_module *m, h3_region *r, const backend_options *o, int *n, h3_diag *d) {
  for (h3_op *op = r->first; op; op = op->next) {
    for (int i = 0; i < op->n_regions; i++)
      if (rewrite(m, &op->regions[i], o, n, d) != H3_OK) return H3_ERR;
    if (op->code != H3_OP_ATTENTION) continue;
    if (h3_op_attr_int(op, "causal", 0) || h3_op_attr(op, "v_view")) {
      h3_diag_error(d, op->span, "run attention-backend before attention-v-view; sage and sol are non-causal",
                    "attention-backend: this attention is causal or reads v in place");
      return H3_ERR;
    }
    if (o->sol) {
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
    (*n)++;
  }
  return H3_OK;
}

static h3_status attention_backend_run(h3_module *m, h3_pass_context *pc, h3_diag *d) {
  backend_options o;
  if (parse(h3_pass_options_of(pc)->attention, &o, d) != H3_OK) return H3_ERR;
  int n = 0;
  for (int gi = 0; gi < m->n_graphs; gi++)
    for (h3_op *op = m->graphs[gi]->body.first; op; op = op->next)
      if (op->code == H3_OP_LOOP && !strcmp(h3_op_attr_string(op, "label", ""), "trunk"))
        for (int i = 0; i < op->n_regions; i++)
          if (rewrite(m, &op->regions[i], &o, &n, d) != H3_OK) return H3_ERR;
  if (n == 0) {
    h3_diag_error(d, (h3_span){0}, "--attention applies to MiniMax-H3 (models/minimax_h3.g)",
                  "--attention %s: model '%s' has no attention in a loop labelled 'trunk'",
                  o.sol ? "sol" : "sage", m->model ? m->model : "?");
    return H3_ERR;
  }
  if (o.sol)
    h3_pass_report(pc, "%d attention ops of the block stack are sol_attention (tau %g, thresh %s, "
                       "sinks %lld at %lld)", n, o.tau, o.thresh, (long long)o.sink_tokens,
                   (long long)o.sink_start);
  else
    h3_pass_report(pc, "%d attention ops of the block stack are sage_attention (pv %s, smoothing %s)",
                   n, o.pv, o.smooth ? "on" : "off");
  return H3_OK;
}

const h3_pass h3_pass_attention_backend = {
    .name = "attention-backend",
    .description = "--attention sage|sol: the block stack's attention becomes sage_attention (int8 "
                   "QK, P and V in e4m3) or sol_attention (block-sparse); the text refiner stays dense",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = false,
    .requires = {NULL},
    .run = attention_backend_run,
};
