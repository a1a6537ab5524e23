/* codegen.h: CUDA C emission for the ops the CUDA backend runs as NVRTC kernels
 * (the writer's side of the plan; include/h3/kernel.h says what a kernel is).
 *
 * h3_codegen_emit_op() writes the CUDA C of one kernel specialised to the op's static
 * shapes, with a deterministic name `h3_<op>_<first 10 hex of sha256>` and a launch rule
 * computed from the shapes. Every kernel is compiled together with the shared prelude
 * (kernels/prelude.cuh: bf16/f16 load/store/rounding helpers, the exact-tier arithmetic,
 * and include/h3/rng.h for `randn`). h3_plan_build (plan.h) runs it over a whole module.
 */
#ifndef H3_CODEGEN_H
#define H3_CODEGEN_H

#include "h3/kernel.h"

/* Emits the kernel of one op whose exec kind is H3_EXEC_KERNEL (for `fused`: the whole
 * region). `tier` is exact or lossless; an op's own `tier` attribute (fused groups, the
 * norm_modulate ops) wins. Strings live in arena `a`. Errors (a shape the emitter does not
 * support) name the op's span. */
h3_status h3_codegen_emit_op(const h3_op *op, h3_tier tier, h3_arena *a, h3_kernel *k,
                             h3_diag *d);

#endif
