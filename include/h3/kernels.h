/* kernels.h: the home of hand-written kernel source (libh3_kernels, folder kernels/).
 *
 * Every hand-written CUDA kernel of h3 is a .cu / .cuh file under kernels/, embedded into
 * this library at build time (kernels/embed.cmake). They are compiled with NVRTC through
 * the kernel cache like the kernels codegen emits, always behind the prelude:
 *   prelude.cuh        the shared arithmetic (codegen's kernels and the hand-written ones),
 *                      with include/h3/rng.h and include/h3/scalar.h in place of their
 *                      #include: the scalar math the CPU backend compiles too, written once
 *   util.cu            index copy (an index op's row gather), device random weights
 *   attention_ref.cu   the reference attention (one thread per query row and head)
 *   flash_attention.cu the flash attention forward (wgmma, sm_90a)
 *   linear_generic.cu  the generic linear for dtypes cuBLASLt does not take
 *   int8_gemm.cu       the int8 GEMM + dequantization fallback of linear_int8
 *   m31_moe.cu         M3.1's router top-k, mixture of experts and DSpark Markov head
 *   m31_moe_gemm.cu    M3.1's moe as tiled grouped GEMMs (prefill; mma.sync)
 *   m31_moe_wgmma.cu   the same grouped GEMMs on warpgroup MMA (wgmma, sm_90a)
 *   m31_msa.cu         M3.1's paged / block / sparse attention and the block selection
 *   m31_msa_tile.cu    M3.1's paged / sparse attention for many rows of one sequence (prefill;
 *                      the keys a block of rows shares read once into shared memory)
 *   m31_flash.cu       the same on warpgroup MMA (wgmma, TMA, sm_90a) for M3.1's own shapes
 * A file meant for several dtypes reads its types from macros (H3_X_T, ...) that the user
 * defines in front of it (h3_kernel_source_with); the macros each file takes are listed in
 * its header comment.
 */
#ifndef H3_KERNELS_H
#define H3_KERNELS_H

#include <stddef.h>

typedef struct {
  const char *name; /* file name under kernels/: "flash_attention.cu" */
  const char *text;
} h3_kernel_text;

/* Every embedded file, ending with {NULL, NULL}. */
extern const h3_kernel_text h3_kernel_texts[];

/* The text of kernels/<name>, NULL when there is no such file. */
const char *h3_kernel_source(const char *name);
/* kernels/prelude.cuh with include/h3/rng.h and scalar.h in place of their #include. */
const char *h3_kernel_prelude(void);

#endif
