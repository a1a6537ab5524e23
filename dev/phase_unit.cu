// phase_unit.cu: can the kernel files of one decode step live in one translation unit as the
// phases of a persistent kernel? (lab; not CI; compile-only; dev/persistent-decode.md, step 1)
//   nvcc -std=c++17 -arch=sm_90a -O3 -I include -I kernels -I dev -c dev/phase_unit.cu -o /tmp/phase_unit.o -Xptxas -v
// Each of the backend's kernel-file instances (a file compiled with its op's defines: the
// decode attention, index_topk, the router, the moe) goes into a namespace of its own, its
// defines #undef'd after it, every one under the built-in remap of dev/phase_remap.cu. Every
// phase is referenced (a table of their addresses) so that each is compiled to SASS.
// Found 2026-12-06 (no GPU): two instances of m31_msa.cu and two of m31_moe.cu compile
// together (nvcc; the remap with one instance also compiles with NVRTC); the kernel files'
// own macros repeat with the same values, which C allows.
#include "lab_remap_on.cuh"
#include "prelude.cuh"
namespace u0 {
#define Q_T h3_bf16
#define K_T h3_bf16
#define IX_T int
#define O_T h3_bf16
#define H3M_DC 4
#define H3M_HPW 4
#define H3_KV_ATT_MMA_NAME att_a0
#include "m31_msa.cu"
#undef Q_T
#undef K_T
#undef IX_T
#undef O_T
#undef H3M_DC
#undef H3M_HPW
#undef H3_KV_ATT_MMA_NAME
}
namespace u1 {
#define Q_T h3_bf16
#define K_T h3_bf16
#define IX_T int
#define O_T h3_bf16
#define H3M_DC 1
#define H3M_HPW 1
#define H3_TOPK_SCORE_NAME topk_s1
#define H3_TOPK_ROWS_NAME topk_r1
#define H3_TOPK_NAME topk_1
#include "m31_msa.cu"
#undef Q_T
#undef K_T
#undef IX_T
#undef O_T
#undef H3M_DC
#undef H3M_HPW
#undef H3_TOPK_SCORE_NAME
#undef H3_TOPK_ROWS_NAME
#undef H3_TOPK_NAME
}
namespace u2 {
#define H_T h3_bf16
#define W_T float
#define B_T float
#define I_T int
#define O_T float
#define H3_ROUTER_FUSED_NAME router_2
#include "m31_moe.cu"
#undef H_T
#undef W_T
#undef B_T
#undef I_T
#undef O_T
#undef H3_ROUTER_FUSED_NAME
}
namespace u3 {
#define H_T h3_bf16
#define W_T h3_bf16
#define B_T float
#define I_T int
#define O_T float
#define H3_MOE_NAME moe_3
#define H3_MOE_DOWN_NAME moed_3
#include "m31_moe.cu"
}
#include "lab_remap_off.cuh"
// every phase referenced, so that each is compiled to SASS (a dispatcher would call them)
__device__ const void *h3v_phases[] = {(const void *)u0::att_a0, (const void *)u1::topk_s1, (const void *)u1::topk_r1,
                                       (const void *)u1::topk_1, (const void *)u2::router_2, (const void *)u3::moe_3,
                                       (const void *)u3::moed_3};
extern "C" __global__ void __launch_bounds__(256) unit_k(const void **out) {
  out[threadIdx.x % 7] = h3v_phases[threadIdx.x % 7];
}
