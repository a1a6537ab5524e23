/* cuda_flash.c: h3's own flash-attention forward kernel (bf16, head_dim 128, non-causal),
 * CUDA C compiled with NVRTC for sm_90 on first use.
 *
 * One block of NW warps per (16*NW query rows, head); each warp owns 16 query rows. Two
 * variants: NW = 4 (two blocks per SM; the default) and NW = 8 (one block per SM), chosen
 * by H3_FLASH_WARPS=4|8. The block walks the segment's keys in tiles of 64
 * (FlashAttention-2's online softmax):
 *   S = Q·Kᵀ with mma.sync m16n8k16 (bf16 in, fp32 accumulate); keys past the segment end
 *   are masked to -inf; m' = max(m, rowmax S); O, l scaled by 2^((m - m')·c); P = 2^(S·c -
 *   m'·c) with c = scale·log2(e); l += rowsum P (per thread, quad-reduced at the end);
 *   O += P·V with P rounded to bf16 (the S accumulator fragments are reused as the A
 *   operand); finally O / l rounded once to bf16.
 * Shared memory (dynamic, 80 / 96 KiB): Q [16*NW][128], K and V [2][64][128], each row 256
 * bytes of 16 chunks stored at chunk ^ (row & 7) so that ldmatrix reads are free of bank
 * conflicts. K/V tile j+1 is fetched with cp.async (zero-filled past the end) while tile
 * j is computed. Q fragments stay in registers for the whole loop.
 * Row strides are arguments, so q/k/v can be the [T, H, 128] views of a packed qkv.
 */
#include "cuda_internal.h"

#include <stdlib.h>
#include <string.h>

static const char flash_source[] =
    "#define BN 64\n"
    "#define HD 128\n"
    "__device__ __forceinline__ unsigned h3f_smem(const void *p) {\n"
    "  return (unsigned)__cvta_generic_to_shared(p);\n"
    "}\n"
    "__device__ __forceinline__ int h3f_swz(int row, int chunk) {\n"
    "  return row * HD + ((chunk ^ (row & 7)) << 3);\n"
    "}\n"
    "__device__ __forceinline__ void h3f_cp16(unsigned dst, const void *src, bool ok) {\n"
    "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" ::\"r\"(dst), \"l\"(src),\n"
    "               \"r\"(ok ? 16 : 0));\n"
    "}\n"
    "__device__ __forceinline__ void h3f_ldsm(unsigned a, unsigned &r0, unsigned &r1, unsigned &r2,\n"
    "                                         unsigned &r3) {\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\\n\"\n"
    "               : \"=r\"(r0), \"=r\"(r1), \"=r\"(r2), \"=r\"(r3) : \"r\"(a));\n"
    "}\n"
    "__device__ __forceinline__ void h3f_ldsm_t(unsigned a, unsigned &r0, unsigned &r1,\n"
    "                                           unsigned &r2, unsigned &r3) {\n"
    "  asm volatile(\"ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\\n\"\n"
    "               : \"=r\"(r0), \"=r\"(r1), \"=r\"(r2), \"=r\"(r3) : \"r\"(a));\n"
    "}\n"
    "__device__ __forceinline__ void h3f_mma(float *c, const unsigned *a, unsigned b0, unsigned b1) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, \"\n"
    "               \"{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n"
    "               : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n"
    "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b0), \"r\"(b1));\n"
    "}\n"
    "__device__ __forceinline__ unsigned h3f_pack(float lo, float hi) {\n"
    "  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);\n"
    "  return *reinterpret_cast<unsigned *>(&v);\n"
    "}\n"
    "__device__ __forceinline__ float h3f_exp2(float x) {\n"
    "  float y;\n"
    "  asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x));\n"
    "  return y;\n"
    "}\n"
    "\n"
    "// NW warps, BM = 16 * NW query rows per block\n"
    "template <int NW>\n"
    "__device__ __forceinline__ void h3f_fwd(const h3_bf16 *__restrict__ q,\n"
    "    const h3_bf16 *__restrict__ k, const h3_bf16 *__restrict__ v, h3_bf16 *__restrict__ o,\n"
    "    int len, int group, long long qs, long long kvs, long long os, float c) {\n"
    "  constexpr int BM = 16 * NW, NT = 32 * NW;\n"
    "  extern __shared__ __align__(128) unsigned char h3f_smem_raw[];\n"
    "  h3_bf16 *sq = reinterpret_cast<h3_bf16 *>(h3f_smem_raw);\n"
    "  h3_bf16 *sk = sq + BM * HD, *sv = sk + 2 * BN * HD;\n"
    "  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;\n"
    "  const int head = blockIdx.y, m0 = blockIdx.x * BM;\n"
    "  const h3_bf16 *qb = q + (long long)head * HD;\n"
    "  const h3_bf16 *kb = k + (long long)(head / group) * HD;\n"
    "  const h3_bf16 *vb = v + (long long)(head / group) * HD;\n"
    "  for (int e = tid; e < BM * 16; e += NT) {\n"
    "    const int r = e >> 4, ch = e & 15, gr = m0 + r;\n"
    "    const bool ok = gr < len;\n"
    "    h3f_cp16(h3f_smem(sq + h3f_swz(r, ch)), qb + (long long)(ok ? gr : 0) * qs + ch * 8, ok);\n"
    "  }\n"
    "  auto load_kv = [&](int tile, int buf) {\n"
    "    h3_bf16 *ks = sk + buf * BN * HD, *vs = sv + buf * BN * HD;\n"
    "    for (int e = tid; e < BN * 16; e += NT) {\n"
    "      const int r = e >> 4, ch = e & 15, gr = tile * BN + r;\n"
    "      const bool ok = gr < len;\n"
    "      const long long off = (long long)(ok ? gr : 0) * kvs + ch * 8;\n"
    "      h3f_cp16(h3f_smem(ks + h3f_swz(r, ch)), kb + off, ok);\n"
    "      h3f_cp16(h3f_smem(vs + h3f_swz(r, ch)), vb + off, ok);\n"
    "    }\n"
    "  };\n"
    "  load_kv(0, 0);\n"
    "  asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
    "  const int n_tiles = (len + BN - 1) / BN;\n"
    "  unsigned qf[8][4];\n"
    "  float acc[16][4];\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 16; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;\n"
    "  float mrow[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)};\n"
    "  float lrow[2] = {0.0f, 0.0f};\n"
    "  for (int j = 0; j < n_tiles; j++) {\n"
    "    asm volatile(\"cp.async.wait_group 0;\\n\" ::);\n"
    "    __syncthreads();\n"
    "    if (j == 0) {\n"
    "#pragma unroll\n"
    "      for (int kk = 0; kk < 8; kk++) {\n"
    "        const int row = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;\n"
    "        h3f_ldsm(h3f_smem(sq + h3f_swz(row, 2 * kk + (lane >> 4))), qf[kk][0], qf[kk][1],\n"
    "                 qf[kk][2], qf[kk][3]);\n"
    "      }\n"
    "    }\n"
    "    if (j + 1 < n_tiles) {\n"
    "      load_kv(j + 1, (j + 1) & 1);\n"
    "      asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
    "    }\n"
    "    const h3_bf16 *ks = sk + (j & 1) * BN * HD, *vs = sv + (j & 1) * BN * HD;\n"
    "    float sc[8][4];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 8; i++) sc[i][0] = sc[i][1] = sc[i][2] = sc[i][3] = 0.0f;\n"
    "#pragma unroll\n"
    "    for (int kk = 0; kk < 8; kk++) {\n"
    "#pragma unroll\n"
    "      for (int nt = 0; nt < 8; nt += 2) {\n"
    "        const int key = nt * 8 + (lane & 7) + ((lane >> 4) << 3);\n"
    "        unsigned b0, b1, b2, b3;\n"
    "        h3f_ldsm(h3f_smem(ks + h3f_swz(key, 2 * kk + ((lane >> 3) & 1))), b0, b1, b2, b3);\n"
    "        h3f_mma(sc[nt], qf[kk], b0, b1);\n"
    "        h3f_mma(sc[nt + 1], qf[kk], b2, b3);\n"
    "      }\n"
    "    }\n"
    "    if ((j + 1) * BN > len) {\n"
    "#pragma unroll\n"
    "      for (int nt = 0; nt < 8; nt++)\n"
    "#pragma unroll\n"
    "        for (int e = 0; e < 4; e++)\n"
    "          if (j * BN + nt * 8 + 2 * (lane & 3) + (e & 1) >= len)\n"
    "            sc[nt][e] = -__int_as_float(0x7f800000);\n"
    "    }\n"
    "    float mx[2] = {mrow[0], mrow[1]};\n"
    "#pragma unroll\n"
    "    for (int nt = 0; nt < 8; nt++) {\n"
    "      mx[0] = fmaxf(mx[0], fmaxf(sc[nt][0], sc[nt][1]));\n"
    "      mx[1] = fmaxf(mx[1], fmaxf(sc[nt][2], sc[nt][3]));\n"
    "    }\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < 2; r++) {\n"
    "      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));\n"
    "      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));\n"
    "    }\n"
    "    const float corr0 = h3f_exp2((mrow[0] - mx[0]) * c), corr1 = h3f_exp2((mrow[1] - mx[1]) * c);\n"
    "    mrow[0] = mx[0];\n"
    "    mrow[1] = mx[1];\n"
    "    lrow[0] *= corr0;\n"
    "    lrow[1] *= corr1;\n"
    "#pragma unroll\n"
    "    for (int dt = 0; dt < 16; dt++) {\n"
    "      acc[dt][0] *= corr0;\n"
    "      acc[dt][1] *= corr0;\n"
    "      acc[dt][2] *= corr1;\n"
    "      acc[dt][3] *= corr1;\n"
    "    }\n"
    "    const float ms0 = mx[0] * c, ms1 = mx[1] * c;\n"
    "#pragma unroll\n"
    "    for (int nt = 0; nt < 8; nt++) {\n"
    "      sc[nt][0] = h3f_exp2(fmaf(sc[nt][0], c, -ms0));\n"
    "      sc[nt][1] = h3f_exp2(fmaf(sc[nt][1], c, -ms0));\n"
    "      sc[nt][2] = h3f_exp2(fmaf(sc[nt][2], c, -ms1));\n"
    "      sc[nt][3] = h3f_exp2(fmaf(sc[nt][3], c, -ms1));\n"
    "      lrow[0] += sc[nt][0] + sc[nt][1];\n"
    "      lrow[1] += sc[nt][2] + sc[nt][3];\n"
    "    }\n"
    "#pragma unroll\n"
    "    for (int kk = 0; kk < 4; kk++) {\n"
    "      unsigned a[4] = {h3f_pack(sc[2 * kk][0], sc[2 * kk][1]), h3f_pack(sc[2 * kk][2], sc[2 * kk][3]),\n"
    "                       h3f_pack(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),\n"
    "                       h3f_pack(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};\n"
    "      const int key = 16 * kk + (lane & 7) + ((lane >> 3) & 1) * 8;\n"
    "#pragma unroll\n"
    "      for (int dt = 0; dt < 16; dt += 2) {\n"
    "        unsigned b0, b1, b2, b3;\n"
    "        h3f_ldsm_t(h3f_smem(vs + h3f_swz(key, dt + (lane >> 4))), b0, b1, b2, b3);\n"
    "        h3f_mma(acc[dt], a, b0, b1);\n"
    "        h3f_mma(acc[dt + 1], a, b2, b3);\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "#pragma unroll\n"
    "  for (int r = 0; r < 2; r++) {\n"
    "    lrow[r] += __shfl_xor_sync(0xffffffffu, lrow[r], 1);\n"
    "    lrow[r] += __shfl_xor_sync(0xffffffffu, lrow[r], 2);\n"
    "  }\n"
    "  const float inv0 = 1.0f / lrow[0], inv1 = 1.0f / lrow[1];\n"
    "  const int r0 = m0 + warp * 16 + (lane >> 2), r1 = r0 + 8;\n"
    "  h3_bf16 *ob = o + (long long)head * HD + 2 * (lane & 3);\n"
    "#pragma unroll\n"
    "  for (int dt = 0; dt < 16; dt++) {\n"
    "    if (r0 < len)\n"
    "      *reinterpret_cast<unsigned *>(ob + (long long)r0 * os + dt * 8) =\n"
    "          h3f_pack(acc[dt][0] * inv0, acc[dt][1] * inv0);\n"
    "    if (r1 < len)\n"
    "      *reinterpret_cast<unsigned *>(ob + (long long)r1 * os + dt * 8) =\n"
    "          h3f_pack(acc[dt][2] * inv1, acc[dt][3] * inv1);\n"
    "  }\n"
    "}\n"
    "#define H3F_KERNEL(NAME, NW, MINB)                                                        \\\n"
    "  extern \"C\" __global__ void __launch_bounds__(32 * NW, MINB) NAME(                    \\\n"
    "      const h3_bf16 *__restrict__ q, const h3_bf16 *__restrict__ k,                        \\\n"
    "      const h3_bf16 *__restrict__ v, h3_bf16 *__restrict__ o, int len, int group,          \\\n"
    "      long long qs, long long kvs, long long os, float c) {                                \\\n"
    "    h3f_fwd<NW>(q, k, v, o, len, group, qs, kvs, os, c);                                   \\\n"
    "  }\n"
    "H3F_KERNEL(h3cu_flash_fwd_w4, 4, 2)\n"
    "H3F_KERNEL(h3cu_flash_fwd_w8, 8, 1)\n";

const char *cu_flash_source(void) { return flash_source; }

bool cu_flash_supports(const cu_att_seg *a) {
  return a->dtype == H3_BF16 && a->dim == 128 && !a->causal && a->len < 2147483647 &&
         a->q_stride % 8 == 0 && a->kv_stride % 8 == 0 && a->o_stride % 2 == 0 &&
         ((uintptr_t)a->q | (uintptr_t)a->k | (uintptr_t)a->v) % 16 == 0 &&
         (uintptr_t)a->o % 4 == 0;
}

/* Shared memory of the variant with nw warps: Q [16*nw][128], K and V [2][64][128]. */
static int flash_smem(int nw) { return 16 * nw * 128 * 2 + 4 * 64 * 128 * 2; }

static const char *const flash_names[2] = {"h3cu_flash_fwd_w4", "h3cu_flash_fwd_w8"};

/* The variant with nw warps (4 or 8), compiled and configured on first use. */
static cu_kernel *flash_kernel(cu_state *s, int nw, h3_diag *d) {
  int which = nw == 8;
  cu_kernel *k = cu_kernel_find(s, flash_names[which]);
  if (k) {
    if (!k->fn) h3_diag_error(d, (h3_span){0}, NULL, "cuda: %s failed to load earlier", k->name);
    return k->fn ? k : NULL;
  }
  cu_kernel *ks[2] = {0};
  if (cu_compile_tu(s, "the flash attention kernels", flash_source, false, 2, flash_names, ks, d) != H3_OK)
    return NULL;
  for (int i = 0; i < 2; i++) {
    int smem = flash_smem(i ? 8 : 4);
    cudaError_t e = (size_t)smem > s->smem_optin
                        ? cudaErrorInvalidValue
                        : cudaKernelSetAttributeForDevice(
                              ks[i]->fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem, s->device);
    if (e != cudaSuccess) {
      cu_fail(d, e, "cudaKernelSetAttributeForDevice (dynamic shared memory)", ks[i]->name);
      ks[0]->fn = ks[1]->fn = NULL;
      return NULL;
    }
  }
  return ks[which];
}

int cu_flash_warps(void) {
  const char *e = getenv("H3_FLASH_WARPS");
  return e && !strcmp(e, "8") ? 8 : 4;
}

h3_status cu_flash_run(cu_state *s, const cu_att_seg *a, h3_diag *d) {
  int nw = cu_flash_warps();
  cu_kernel *k = flash_kernel(s, nw, d);
  if (!k) return H3_ERR;
  const void *q = a->q, *kk = a->k, *v = a->v;
  void *o = a->o;
  int len = (int)a->len, group = (int)(a->hq / a->hk);
  long long qs = a->q_stride, kvs = a->kv_stride, os = a->o_stride;
  float c = a->scale * 1.4426950408889634f;
  void *args[] = {&q, &kk, &v, &o, &len, &group, &qs, &kvs, &os, &c};
  int64_t bm = 16 * nw;
  int64_t grid[3] = {(a->len + bm - 1) / bm, a->hq, 1}, block[3] = {32 * nw, 1, 1};
  return cu_launch(s, k, grid, block, flash_smem(nw), args, d);
}
