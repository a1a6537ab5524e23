/* cuda_m31.h: what the launch files of MiniMax-M3.1's hand kernels share (cuda_m31.c,
 * cuda_m31_moe.c, cuda_m31_msa.c, cuda_m31_msa_tile.c, cuda_m31_flash.c, cuda_nvfp4.c); internal to the cuda
 * backend. */
#ifndef H3_CUDA_M31_H
#define H3_CUDA_M31_H

#include "cuda_internal.h"

#include <stdio.h>

/* block shapes; each equals its kernel file's constant (M31_ROUTER_*: H3M_ROUTER_*,
 * M31_MOE_MMA_THREADS: H3M_MMA_THREADS, M31_ATT_TILE_*: m31_msa_tile.cu's H3T_ROWS,
 * H3T_THREADS, H3T_SMEM); M31_ATT_TILE_MIN_ROWS / _MIN_GROUPS: the fewest rows of one table /
 * groups of rows the row-tiled attention takes */
enum {
  M31_THREADS = 256, M31_ATT_THREADS = 128, M31_ROUTER_THREADS = 128, M31_ROUTER_ROWS = 8,
  M31_MOE_MMA_THREADS = 128, M31_ATT_TILE_ROWS = 8, M31_ATT_TILE_THREADS = 256,
  M31_ATT_TILE_SMEM = 98304, M31_ATT_TILE_MIN_ROWS = 64, M31_ATT_TILE_MIN_GROUPS = 16
};

#define DN(x) h3_dtype_name(x)

/* After snprintf(defs, n, ...) returned len: a truncated set of macro lines becomes an #error
 * line, so that NVRTC names the problem instead of compiling a kernel with missing macros. */
static inline void cu_m31_defines_fit(char *defs, size_t n, int len) {
  if (n && (len < 0 || (size_t)len >= n))
    snprintf(defs, n, "#error h3: the kernel's macro lines need more than %zu bytes\n", n);
}

/* The n kernels `names` of kernels/`file` (instantiated by `defines`), compiled together on
 * first use: with the exact tier's options; _sm90a: with the lossless ones for sm_90a (wgmma). */
h3_status cu_m31_kernels(cu_state *s, const h3_op *op, const char *file, const char *defines, int n,
                         const char *const *names, cu_kernel **out, h3_diag *d);
h3_status cu_m31_kernels_sm90a(cu_state *s, const h3_op *op, const char *file, const char *defines,
                               int n, const char *const *names, cu_kernel **out, h3_diag *d);
/* Sets kernel k's dynamic shared memory limit when it needs more than the default 48 KiB. */
h3_status cu_m31_smem(cu_state *s, const h3_op *op, cu_kernel *k, size_t bytes, h3_diag *d);

/* The macro lines in front of m31_moe.cu: `names` (its "#define H3_*_NAME name" lines) and
 * the types H_T, W_T, B_T, I_T, O_T. */
void cu_m31_moe_defines(char *defs, size_t n, const char *names, h3_dtype h, h3_dtype w,
                        h3_dtype b, h3_dtype i, h3_dtype o);
/* The macro lines in front of m31_msa.cu: `names`, the q / key / index / output types and
 * the attention's register shape (dims per lane, heads per warp). */
void cu_m31_msa_defines(char *defs, size_t n, const char *names, h3_dtype q, h3_dtype k,
                        h3_dtype ix, h3_dtype o, int dc, int hpw);
/* The macro lines in front of m31_msa_tile.cu: its kernel's name, the index and output types. */
void cu_m31_att_tile_defines(char *defs, size_t n, const char *name, h3_dtype ix, h3_dtype o);

/* The macro lines of m31_moe_gemm.cu (its two kernels, bf16 only: no type macros). */
#define M31_MOE_GEMM_DEFINES \
  "#define H3_MOE_GEMM_NAME h3cu_moe_gemm\n#define H3_MOE_GEMM_DOWN_NAME h3cu_moe_gemm_down\n"
/* The macro lines of m31_moe_wgmma.cu (the same two steps on wgmma, bf16 only; both forms). */
#define M31_MOE_WGMMA_DEFINES \
  "#define H3_MOE_WGMMA_NAME h3cu_moe_wgmma\n#define H3_MOE_WGMMA_DOWN_NAME h3cu_moe_wgmma_down\n" \
  "#define H3_MOE_WGMMA1_NAME h3cu_moe_wgmma1\n#define H3_MOE_WGMMA1_DOWN_NAME h3cu_moe_wgmma1_down\n"

/* The launches of each op (in, out: the op's operands and results on the device). */
h3_status cu_m31_run_router(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                            const h3_tensor *out, h3_diag *d);
h3_status cu_m31_run_moe(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                         const h3_tensor *out, h3_diag *d);
/* moe's 4 kernels of m31_moe.cu for the op's dtypes (in, out: its operands and result):
 * kernel i named h3cu_moe<part[i]>_<dtypes>, compiled under H3_<macro[i]>_NAME. */
h3_status cu_m31_moe_kernels(cu_state *s, const h3_op *op, const h3_tensor *in, const h3_tensor *out,
                             const char *const part[4], const char *const macro[4], cu_kernel *kn[4],
                             h3_diag *d);
/* moe's cuBLASLt form (cuda_m31_moe_lt.c): whether it takes op (bf16, widths multiples of
 * 128, from H3_MOE_LT_ROWS rows per expert on average; its graph then reads the device on the
 * host: never captured), and its run over the parts of the scratch cu_m31_run_moe laid out. */
bool cu_m31_moe_lt(const h3_op *op);
typedef struct {
  const h3_tensor *in, *out; /* the op's operands and result */
  const void *ids;           /* this rank's expert ids [T, k] */
  void *lists, *counts;      /* the route kernel's [E, T] and [E] (int) */
  void *act, *y, *at, *u;    /* bf16 [T k, F], [T k, H]; int [T k]; bf16 [T k, 2 F] */
} cu_m31_moe_parts;
h3_status cu_m31_run_moe_lt(cu_state *s, const h3_op *op, const cu_m31_moe_parts *p, h3_diag *d);
h3_status cu_m31_run_markov(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                            const h3_tensor *out, h3_diag *d);
h3_status cu_m31_run_spec_accept(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                                 const h3_tensor *out, h3_diag *d);
/* linear_nvfp4 (cuda_nvfp4.c: kernels/nvfp4_gemm.cu; its shape and scratch: cuda_nvfp4.h) */
h3_status cu_nvfp4_run(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                       const h3_tensor *out, h3_diag *d);
h3_status cu_m31_run_kv_attention(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                                  const h3_tensor *out, h3_diag *d);
h3_status cu_m31_run_index_topk(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                                const h3_tensor *out, h3_diag *d);
/* The query rows per page table of a paged op of T rows (pt [NP] or [R, NP], R dividing T):
 * T / R, or 0 when every row reads the one table (R = 1). */
static inline int cu_m31_pt_per(const h3_type *pt, long long T) {
  return pt->rank == 2 && pt->dims[0] > 1 ? (int)(T / pt->dims[0]) : 0;
}
/* Whether the row-tiled attention takes a paged / sparse attention op that the tensor-core form
 * of cu_m31_run_kv_attention could run: one page table and at least M31_ATT_TILE_MIN_ROWS rows,
 * or (under H3_M31_ATTENTION=tile) a table per group of at least 2 rows and
 * M31_ATT_TILE_MIN_GROUPS groups (a batched verify); topk <= 64; then cu_m31_run_att_tile runs
 * it (cuda_m31_msa_tile.c). */
bool cu_m31_att_tiled(const h3_op *op, const h3_tensor *in);
h3_status cu_m31_run_att_tile(cu_state *s, const h3_op *op, const h3_tensor *in, const h3_tensor *out,
                              h3_diag *d);
/* Whether the op that cu_m31_run_att_tile was handed fits the wgmma flash kernel
 * (kernels/m31_flash.cu: bf16, 16 q heads per kv head of 128 dims, page == sparse block == 128,
 * i32 indices, topk <= 16, scale > 0, enough opt-in shared memory; never under
 * H3_M31_ATTENTION=tile); then cu_m31_run_flash runs it (cuda_m31_flash.c). */
bool cu_m31_flash_fits(const cu_state *s, const h3_op *op, const h3_tensor *in, const h3_tensor *out);
h3_status cu_m31_run_flash(cu_state *s, const h3_op *op, const h3_tensor *in, const h3_tensor *out,
                           h3_diag *d);

/* The device scratch each multi-launch op needs (bytes). */
/* n rounded up to 256 bytes: the alignment of each part of an op's device scratch */
static inline size_t cu_align256(size_t n) { return (n + 255) & ~(size_t)255; }
size_t cu_m31_router_scratch_bytes(const h3_op *op);
size_t cu_m31_moe_scratch_bytes(const h3_op *op);
size_t cu_m31_att_scratch_bytes(const h3_op *op);
size_t cu_m31_topk_scratch_bytes(const h3_op *op);
size_t cu_m31_markov_scratch_bytes(const h3_op *op);
size_t cu_m31_accept_scratch_bytes(const h3_op *op);

#endif
