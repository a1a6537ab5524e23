/* attention_sage.c: the `attention-sage` pass (`h3c compile --attention sage[,KEY=VALUE...]`,
 * docs/models/accelerations.md §5): the attention of every block of the denoiser's stack
 * becomes `sage_attention` (ops.def: int8 QK with K smoothing, P and V in e4m3 or bf16), at
 * every step. The stack is the loop labelled `trunk` (the label models/minimax_h3.g gives
 * its block stack, which the step-skipping passes find by too); attention outside it (the
 * text refiner, run once per request) stays dense, as the recipe keeps it.
 *
 * Options (h3_pass_options.attention, the text after `sage`): `pv=fp8|bf16` (default fp8),
 * `smooth=1|0` (default 1). The rewrite keeps q, k, v and the attributes attention shares
 * with sage_attention (scale, segments); an attention with causal = 1 or a v_view (the pass
 * runs before attention-v-view) is an error: sage's contract has neither. A module without
 * a `trunk` loop holding an attention is an error too: the flag is never silently ignored.
 * Numerics change (quantization), so it runs at every tier only when asked for.
 */
#include "h3/op_registry.h"

#include "pass_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *pv;
  int64_t smooth;
} sage_options;

/* Parses "pv=fp8,smooth=0" (NULL or "": the defaults). */
static h3_status parse(const char *text, sage_options *o, h3_diag *d) {
  *o = (sage_options){"fp8", 1};
  const char *hint = "--attention sage[,pv=fp8|bf16][,smooth=1|0]";
  for (const char *p = text ? text : ""; *p;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == 6 && !strncmp(p, "pv=fp8", 6)) o->pv = "fp8";
    else if (n == 7 && !strncmp(p, "pv=bf16", 7)) o->pv = "bf16";
    else if (n == 8 && (!strncmp(p, "smooth=0", 8) || !strncmp(p, "smooth=1", 8))) o->smooth = p[7] - '0';
    else {
      h3_diag_error(d, (h3_span){0}, hint, "--attention sage: unknown option '%.*s'", (int)n, p);
      return H3_ERR;
    }
    p = end ? end + 1 : p + n;
  }
  return H3_OK;
}

/* Rewrites the attention ops of region r (and its nested regions); *n counts them. */
static h3_status rewrite(h3_module *m, h3_region *r, const sage_options *o, int *n, h3_diag *d) {
  for (h3_op *op = r->first; op; op = op->next) {
    for (int i = 0; i < op->n_regions; i++)
      if (rewrite(m, &op->regions[i], o, n, d) != H3_OK) return H3_ERR;
    if (op->code != H3_OP_ATTENTION) continue;
    if (h3_op_attr_int(op, "causal", 0) || h3_op_attr(op, "v_view")) {
      h3_diag_error(d, op->span, "run attention-sage before attention-v-view; sage is non-causal",
                    "attention-sage: this attention is causal or reads v in place");
      return H3_ERR;
    }
    op->code = H3_OP_SAGE_ATTENTION;
    h3_op_set_attr(m, op, h3_attr_string(m, "pv", o->pv));
    h3_op_set_attr(m, op, h3_attr_int(m, "smooth", o->smooth));
    (*n)++;
  }
  return H3_OK;
}

static h3_status attention_sage_run(h3_module *m, h3_pass_context *pc, h3_diag *d) {
  sage_options o;
  if (parse(h3_pass_options_of(pc)->attention, &o, d) != H3_OK) return H3_ERR;
  int n = 0;
  for (int gi = 0; gi < m->n_graphs; gi++)
    for (h3_op *op = m->graphs[gi]->body.first; op; op = op->next)
      if (op->code == H3_OP_LOOP && !strcmp(h3_op_attr_string(op, "label", ""), "trunk"))
        for (int i = 0; i < op->n_regions; i++)
          if (rewrite(m, &op->regions[i], &o, &n, d) != H3_OK) return H3_ERR;
  if (n == 0) {
    h3_diag_error(d, (h3_span){0}, "--attention sage applies to MiniMax-H3 (models/minimax_h3.g)",
                  "--attention sage: model '%s' has no attention in a loop labelled 'trunk'",
                  m->model ? m->model : "?");
    return H3_ERR;
  }
  h3_pass_report(pc, "%d attention ops of the block stack are sage_attention (pv %s, smoothing %s)",
                 n, o.pv, o.smooth ? "on" : "off");
  return H3_OK;
}

const h3_pass h3_pass_attention_sage = {
    .name = "attention-sage",
    .description = "--attention sage: the block stack's attention becomes sage_attention (int8 QK "
                   "with K smoothing, P and V in e4m3 or bf16); the text refiner stays dense",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = false,
    .requires = {NULL},
    .run = attention_sage_run,
};
