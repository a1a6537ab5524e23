/* verify.c: the `verify` pass: runs the IR verifier (h3_verify_module) as a pipeline step.
 * The default pipeline runs it first (to reject a broken input early) and last (to check
 * what the passes produced).
 */
#include "pass_internal.h"

static h3_status verify_run(h3_module *m, h3_pass_context *ctx, h3_diag *d) {
  (void)ctx;
  return h3_verify_module(m, d);
}

const h3_pass h3_pass_verify = {
    .name = "verify",
    .description = "check the IR: SSA dominance, types, use counts, attributes, terminators",
    .min_tier = H3_TIER_EXACT,
    .in_default_pipeline = true, /* first in the table; the pipeline also ends with it */
    .requires = {NULL},
    .run = verify_run,
};
