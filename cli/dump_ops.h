/* dump_ops.h: h3exec --dump-ops KINDS --dump FILE: the results of every execution of the chosen op
 * kinds, copied to the host as the run goes (h3_runtime_options.observe) and written as one
 * safetensors file, to find where two backends (or two builds) part.
 *
 * Tensor names: "op<ID>.<KIND>.L<LINE>.r<RESULT>.n<EXECUTION>", e.g.
 * "op412.router_topk.L233.r0.n2": the op's id in the plan's module (equal for every backend
 * running the same plan), its kind, its source line, which result (a<OPERAND> for an operand
 * of a kind named KIND+operands), and the how-manieth
 * execution of that op in the run (0-based; a layer loop's body runs once per layer). Only the
 * last h3exec iteration is kept (dump_ops_reset before each run).
 */
#ifndef H3_CLI_DUMP_OPS_H
#define H3_CLI_DUMP_OPS_H

#include "h3/backend.h"
#include "h3/support.h"

typedef struct dump_ops dump_ops;

/* kinds: comma-separated op kind names (ops.def's, e.g. "router_topk,moe"; "fused" for fused
 * groups) or "all"; a name followed by "+operands" (router_topk+operands) keeps the op's
 * operands too (weights included). At most max_bytes are held (an error past it names the kinds to narrow).
 * NULL after reporting an unknown kind. */
dump_ops *dump_ops_new(const char *kinds, h3_backend *b, size_t max_bytes, h3_diag *d);
void dump_ops_free(dump_ops *x);
/* Drops what was collected (before each iteration). */
void dump_ops_reset(dump_ops *x);
/* The h3_runtime_options.observe hook (ctx: the dump_ops). */
h3_status dump_ops_observe(void *ctx, const h3_op *op, const h3_tensor *in, int n_in,
                           const h3_tensor *out, int n_out, h3_diag *d);
/* Writes what was collected (atomically; metadata "ops": how many tensors). */
h3_status dump_ops_write(dump_ops *x, const char *path, h3_diag *d);

#endif
