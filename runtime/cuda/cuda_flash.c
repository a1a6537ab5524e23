/* cuda_flash.c: h3's own flash-attention forward kernel (bf16, head_dim 128, non-causal),
 * CUDA C compiled with NVRTC for sm_90a (Hopper warpgroup MMA) on first use.
 *
 * One block of 2 warpgroups (256 threads) per (128 query rows, head); warpgroup w owns
 * query rows [64w, 64w + 64) of the block. The block walks the segment's keys in tiles of
 * 128 (FlashAttention's online softmax, c = scale·log2(e)):
 *   S = Q·Kᵀ: 8 wgmma m64n128k16 (bf16 in, fp32 accumulate), Q and K read from shared
 *   memory through matrix descriptors; keys past the segment end are masked to -inf;
 *   m' = max(m, rowmax S); O, l scaled by 2^((m - m')·c); P = 2^(S·c - m'·c); l += rowsum P
 *   (per thread, quad-reduced at the end); O += P·V: 8 wgmma m64n128k16 with P rounded to
 *   bf16 in registers (the S accumulator fragments repacked as the A operand) and V read
 *   from shared memory as an N-major B operand; finally O / l rounded once to bf16.
 * Schedule (FlashAttention-3's intra-warpgroup overlap): the warpgroup issues S(j) = Q·K(j)ᵀ
 * and then O += P(j-1)·V(j-1), waits for S(j) only, and computes the softmax of tile j
 * while the tensor cores still run P(j-1)·V(j-1); the two warpgroups interleave as well.
 * Shared memory (dynamic, 225 KiB, one block per SM): Q [128][128] and 3 stages of K, V
 * [128][128], each a 128-byte-swizzled wgmma layout: a [R][128] tile is two [R][64]
 * halves (columns 0-63, 64-127), row r of a half is 128 bytes whose 16-byte chunk ch sits
 * at chunk ch ^ (r & 7) (the hardware's 128B swizzle of 8-row, 1024-byte atoms). K/V tile
 * j+1 is fetched with cp.async (zero-filled past the end) into stage (j+1) % 3 while tile j
 * is computed: stage (j+1) % 3 last held tile j-2, whose P·V finished in iteration j-1.
 * Row strides are arguments (q, k, v and o each its own), so q/k/v can be the [T, H, 128]
 * views of a packed qkv (attention's v_view reads v inside qkv's rows).
 * Environment: none (one variant).
 */
#include "cuda_internal.h"

/* "%0, ..., %63": the 64 fp32 accumulator operands of one m64n128 wgmma */
#define FLASH_ACC                                                                              \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                      \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "            \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "            \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

static const char flash_source[] =
    "#define BM 128\n"
    "#define BN 128\n"
    "#define HD 128\n"
    "#define STAGES 3\n"
    "#define TILE_BYTES (BN * HD * 2)\n"
    "#define H3F_C8(d, i) \"+f\"(d[i]), \"+f\"(d[i + 1]), \"+f\"(d[i + 2]), \"+f\"(d[i + 3]), \\\n"
    "    \"+f\"(d[i + 4]), \"+f\"(d[i + 5]), \"+f\"(d[i + 6]), \"+f\"(d[i + 7])\n"
    "#define H3F_C64(d) H3F_C8(d, 0), H3F_C8(d, 8), H3F_C8(d, 16), H3F_C8(d, 24), \\\n"
    "    H3F_C8(d, 32), H3F_C8(d, 40), H3F_C8(d, 48), H3F_C8(d, 56)\n"
    "__device__ __forceinline__ unsigned h3f_smem(const void *p) {\n"
    "  return (unsigned)__cvta_generic_to_shared(p);\n"
    "}\n"
    "// byte offset of 16-byte chunk ch (0..15) of row r in a swizzled [128][128] bf16 tile\n"
    "__device__ __forceinline__ unsigned h3f_off(int r, int ch) {\n"
    "  return ((unsigned)(ch >> 3) << 14) + ((unsigned)r << 7) + ((unsigned)((ch & 7) ^ (r & 7)) << 4);\n"
    "}\n"
    "__device__ __forceinline__ void h3f_cp16(unsigned dst, const void *src, bool ok) {\n"
    "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" ::\"r\"(dst), \"l\"(src),\n"
    "               \"r\"(ok ? 16 : 0));\n"
    "}\n"
    "// rows [row0, row0 + 128) of a [len, *] matrix (row stride rs) into a tile at dst; rows\n"
    "// at or past len are zero-filled\n"
    "__device__ __forceinline__ void h3f_load_tile(unsigned dst, const h3_bf16 *src, long long rs,\n"
    "                                              int row0, int len, int tid) {\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 8; i++) {\n"
    "    const int e = tid + 256 * i, r = e >> 4, ch = e & 15, gr = row0 + r;\n"
    "    const bool ok = gr < len;\n"
    "    h3f_cp16(dst + h3f_off(r, ch), src + (long long)(ok ? gr : 0) * rs + ch * 8, ok);\n"
    "  }\n"
    "}\n"
    "// wgmma matrix descriptor: 128-byte swizzle, leading / stride byte offsets lbo / sbo\n"
    "__device__ __forceinline__ unsigned long long h3f_desc(unsigned addr, unsigned lbo,\n"
    "                                                       unsigned sbo) {\n"
    "  return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |\n"
    "         ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);\n"
    "}\n"
    "// d (+)= A·B, m64n128k16, A and B (K-major) in shared memory; acc = 0 overwrites d\n"
    "__device__ __forceinline__ void h3f_mma_ss(float *d, unsigned long long a, unsigned long long b,\n"
    "                                           int acc) {\n"
    "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, %66, 0;\\n\"\n"
    "               \"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {\"\n"
    "               \"" FLASH_ACC "\"\n"
    "               \"}, %64, %65, p, 1, 1, 0, 0;\\n}\\n\"\n"
    "               : H3F_C64(d) : \"l\"(a), \"l\"(b), \"r\"(acc));\n"
    "}\n"
    "// d += A·B, m64n128k16, A in registers (bf16x2), B in shared memory, N-major\n"
    "__device__ __forceinline__ void h3f_mma_rs(float *d, const unsigned *a, unsigned long long b) {\n"
    "  asm volatile(\"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {\"\n"
    "               \"" FLASH_ACC "\"\n"
    "               \"}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\\n\"\n"
    "               : H3F_C64(d) : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(b));\n"
    "}\n"
    "__device__ __forceinline__ void h3f_fence() { asm volatile(\"wgmma.fence.sync.aligned;\\n\" ::: \"memory\"); }\n"
    "__device__ __forceinline__ void h3f_commit() {\n"
    "  asm volatile(\"wgmma.commit_group.sync.aligned;\\n\" ::: \"memory\");\n"
    "}\n"
    "template <int N> __device__ __forceinline__ void h3f_wait() {\n"
    "  asm volatile(\"wgmma.wait_group.sync.aligned %0;\\n\" ::\"n\"(N) : \"memory\");\n"
    "}\n"
    "// keeps reads of wgmma results after the wait that precedes it\n"
    "__device__ __forceinline__ void h3f_hold(float *d) {\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 64; i++) asm volatile(\"\" : \"+f\"(d[i])::\"memory\");\n"
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
    "// online softmax of one S tile whose first key is key0: keys at or past len masked;\n"
    "// s[4n + e]: row 16·warp + lane/4 (+8 for e >= 2), key key0 + 8n + 2·(lane%4) + (e & 1).\n"
    "// Updates the row maxima m and sums l (this thread's part), leaves P = 2^(S·c - m'·c) in\n"
    "// s and the factors 2^((m - m')·c) of the old O rows in corr.\n"
    "__device__ __forceinline__ void h3f_softmax(float *s, float *m, float *l, float *corr, int key0,\n"
    "                                            int len, int lane, float c) {\n"
    "  if (key0 + BN > len) {\n"
    "#pragma unroll\n"
    "    for (int n = 0; n < 16; n++)\n"
    "#pragma unroll\n"
    "      for (int e = 0; e < 4; e++)\n"
    "        if (key0 + n * 8 + 2 * (lane & 3) + (e & 1) >= len) s[4 * n + e] = -__int_as_float(0x7f800000);\n"
    "  }\n"
    "  float mx[2] = {m[0], m[1]};\n"
    "#pragma unroll\n"
    "  for (int n = 0; n < 16; n++) {\n"
    "    mx[0] = fmaxf(mx[0], fmaxf(s[4 * n], s[4 * n + 1]));\n"
    "    mx[1] = fmaxf(mx[1], fmaxf(s[4 * n + 2], s[4 * n + 3]));\n"
    "  }\n"
    "#pragma unroll\n"
    "  for (int r = 0; r < 2; r++) {\n"
    "    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));\n"
    "    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));\n"
    "    corr[r] = h3f_exp2((m[r] - mx[r]) * c);\n"
    "    m[r] = mx[r];\n"
    "  }\n"
    "  const float ms0 = mx[0] * c, ms1 = mx[1] * c;\n"
    "  float l0 = 0.0f, l1 = 0.0f;\n"
    "#pragma unroll\n"
    "  for (int n = 0; n < 16; n++) {\n"
    "    s[4 * n] = h3f_exp2(fmaf(s[4 * n], c, -ms0));\n"
    "    s[4 * n + 1] = h3f_exp2(fmaf(s[4 * n + 1], c, -ms0));\n"
    "    s[4 * n + 2] = h3f_exp2(fmaf(s[4 * n + 2], c, -ms1));\n"
    "    s[4 * n + 3] = h3f_exp2(fmaf(s[4 * n + 3], c, -ms1));\n"
    "    l0 += s[4 * n] + s[4 * n + 1];\n"
    "    l1 += s[4 * n + 2] + s[4 * n + 3];\n"
    "  }\n"
    "  l[0] = l[0] * corr[0] + l0;\n"
    "  l[1] = l[1] * corr[1] + l1;\n"
    "}\n"
    "// P as the A operand of P·V: keys 16kk.. of rows lane/4 and lane/4 + 8 in p[4kk .. 4kk + 3]\n"
    "// (the mma.m16n8k16 A layout of each warp's 16 rows)\n"
    "__device__ __forceinline__ void h3f_pack_p(unsigned *p, const float *s) {\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 32; i++) p[i] = h3f_pack(s[2 * i], s[2 * i + 1]);\n"
    "}\n"
    "// S = Q·K(stage)ᵀ: 8 k-steps of 16 dims (two 32-byte steps per 64-column half)\n"
    "__device__ __forceinline__ void h3f_qk(float *s, unsigned long long dq, unsigned long long dk) {\n"
    "#pragma unroll\n"
    "  for (int kk = 0; kk < 8; kk++) {\n"
    "    const unsigned long long off = (unsigned long long)((((kk >> 2) << 14) + (kk & 3) * 32) >> 4);\n"
    "    h3f_mma_ss(s, dq + off, dk + off, kk > 0);\n"
    "  }\n"
    "}\n"
    "// O += P·V(stage): 8 k-steps of 16 keys (2048 bytes each)\n"
    "__device__ __forceinline__ void h3f_pv(float *acc, const unsigned *p, unsigned long long dv) {\n"
    "#pragma unroll\n"
    "  for (int kk = 0; kk < 8; kk++) h3f_mma_rs(acc, p + 4 * kk, dv + (unsigned long long)(kk * (2048 >> 4)));\n"
    "}\n"
    "// waits for this thread's cp.async groups, makes them visible to the tensor cores (async\n"
    "// proxy) and to the block\n"
    "__device__ __forceinline__ void h3f_landed() {\n"
    "  asm volatile(\"cp.async.wait_group 0;\\n\" ::);\n"
    "  asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\");\n"
    "  __syncthreads();\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void __launch_bounds__(256, 1) h3cu_flash_fwd(\n"
    "    const h3_bf16 *__restrict__ q, const h3_bf16 *__restrict__ k,\n"
    "    const h3_bf16 *__restrict__ v, h3_bf16 *__restrict__ o, int len, int group,\n"
    "    long long qs, long long ks, long long vs, long long os, float c) {\n"
    "  extern __shared__ unsigned char h3f_smem_raw[];\n"
    "  const unsigned sq = (h3f_smem(h3f_smem_raw) + 1023u) & ~1023u; // atoms 1024-aligned\n"
    "  const unsigned skv = sq + BM * HD * 2; // stage s: K at skv + 2s·TILE, V one TILE on\n"
    "  const int tid = threadIdx.x, wg = tid >> 7, warp = (tid >> 5) & 3, lane = tid & 31;\n"
    "  const int head = blockIdx.y, m0 = blockIdx.x * BM;\n"
    "  const h3_bf16 *qb = q + (long long)head * HD;\n"
    "  const h3_bf16 *kb = k + (long long)(head / group) * HD;\n"
    "  const h3_bf16 *vb = v + (long long)(head / group) * HD;\n"
    "  const int n_tiles = (len + BN - 1) / BN;\n"
    "  auto load_kv = [&](int tile) {\n"
    "    const unsigned st = skv + 2u * TILE_BYTES * (tile % STAGES);\n"
    "    h3f_load_tile(st, kb, ks, tile * BN, len, tid);\n"
    "    h3f_load_tile(st + TILE_BYTES, vb, vs, tile * BN, len, tid);\n"
    "    asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
    "  };\n"
    "  // descriptors: Q of this warpgroup (K-major; SBO = 8 rows of 128 bytes), K of stage 0\n"
    "  // (K-major), V of stage 0 (N-major: LBO = the next 64 columns, SBO = the next 8 keys);\n"
    "  // stage s adds 2s·TILE bytes (in descriptor units of 16 bytes)\n"
    "  const unsigned long long dq = h3f_desc(sq + wg * 64 * 128, 16, 1024);\n"
    "  const unsigned long long dk = h3f_desc(skv, 16, 1024);\n"
    "  const unsigned long long dv = h3f_desc(skv + TILE_BYTES, BN * 128, 1024);\n"
    "  auto stage = [](int tile) { return (unsigned long long)((2u * TILE_BYTES * (tile % STAGES)) >> 4); };\n"
    "  float acc[64], s[64], corr[2];\n"
    "  unsigned p[32];\n"
    "  float mrow[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)};\n"
    "  float lrow[2] = {0.0f, 0.0f};\n"
    "  h3f_load_tile(sq, qb, qs, m0, len, tid);\n"
    "  load_kv(0);\n"
    "  h3f_landed();\n"
    "  if (n_tiles > 1) load_kv(1);\n"
    "  h3f_fence();\n"
    "  h3f_qk(s, dq, dk);\n"
    "  h3f_commit();\n"
    "  h3f_wait<0>();\n"
    "  h3f_hold(s);\n"
    "  h3f_softmax(s, mrow, lrow, corr, 0, len, lane, c);\n"
    "  h3f_pack_p(p, s);\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 64; i++) acc[i] = 0.0f;\n"
    "  // iteration j: S(j) and P(j-1)·V(j-1) in flight together; the softmax of tile j\n"
    "  // overlaps P(j-1)·V(j-1). Tile j+1 lands in stage (j+1) % 3 meanwhile.\n"
    "  for (int j = 1; j < n_tiles; j++) {\n"
    "    h3f_landed();\n"
    "    if (j + 1 < n_tiles) load_kv(j + 1);\n"
    "    const unsigned long long dkj = dk + stage(j), dvj = dv + stage(j - 1);\n"
    "    h3f_fence();\n"
    "    h3f_qk(s, dq, dkj);\n"
    "    h3f_commit();\n"
    "    h3f_pv(acc, p, dvj);\n"
    "    h3f_commit();\n"
    "    h3f_wait<1>();\n"
    "    h3f_hold(s);\n"
    "    h3f_softmax(s, mrow, lrow, corr, j * BN, len, lane, c);\n"
    "    h3f_wait<0>();\n"
    "    h3f_hold(acc);\n"
    "#pragma unroll\n"
    "    for (int n = 0; n < 16; n++) {\n"
    "      acc[4 * n] *= corr[0];\n"
    "      acc[4 * n + 1] *= corr[0];\n"
    "      acc[4 * n + 2] *= corr[1];\n"
    "      acc[4 * n + 3] *= corr[1];\n"
    "    }\n"
    "    h3f_pack_p(p, s);\n"
    "  }\n"
    "  h3f_fence();\n"
    "  h3f_pv(acc, p, dv + stage(n_tiles - 1));\n"
    "  h3f_commit();\n"
    "  h3f_wait<0>();\n"
    "  h3f_hold(acc);\n"
    "#pragma unroll\n"
    "  for (int r = 0; r < 2; r++) {\n"
    "    lrow[r] += __shfl_xor_sync(0xffffffffu, lrow[r], 1);\n"
    "    lrow[r] += __shfl_xor_sync(0xffffffffu, lrow[r], 2);\n"
    "  }\n"
    "  const float inv0 = 1.0f / lrow[0], inv1 = 1.0f / lrow[1];\n"
    "  const int r0 = m0 + wg * 64 + warp * 16 + (lane >> 2), r1 = r0 + 8;\n"
    "  h3_bf16 *ob = o + (long long)head * HD + 2 * (lane & 3);\n"
    "#pragma unroll\n"
    "  for (int n = 0; n < 16; n++) {\n"
    "    if (r0 < len)\n"
    "      *reinterpret_cast<unsigned *>(ob + (long long)r0 * os + n * 8) =\n"
    "          h3f_pack(acc[4 * n] * inv0, acc[4 * n + 1] * inv0);\n"
    "    if (r1 < len)\n"
    "      *reinterpret_cast<unsigned *>(ob + (long long)r1 * os + n * 8) =\n"
    "          h3f_pack(acc[4 * n + 2] * inv1, acc[4 * n + 3] * inv1);\n"
    "  }\n"
    "}\n";

const char *cu_flash_source(void) { return flash_source; }

bool cu_flash_supports(const cu_att_seg *a) {
  return a->dtype == H3_BF16 && a->dim == 128 && !a->causal && a->len < 2147483647 &&
         a->q_stride % 8 == 0 && a->k_stride % 8 == 0 && a->v_stride % 8 == 0 &&
         a->o_stride % 2 == 0 &&
         ((uintptr_t)a->q | (uintptr_t)a->k | (uintptr_t)a->v) % 16 == 0 &&
         (uintptr_t)a->o % 4 == 0;
}

/* Shared memory: 1024 bytes of alignment slack, Q [128][128], 3 stages of K and V [128][128]. */
enum { FLASH_SMEM = 1024 + 128 * 128 * 2 + 3 * 2 * 128 * 128 * 2 };

static const char *const flash_name = "h3cu_flash_fwd";

/* The kernel, compiled and configured on first use. */
static cu_kernel *flash_kernel(cu_state *s, h3_diag *d) {
  cu_kernel *k = cu_kernel_find(s, flash_name);
  if (k) {
    if (!k->fn) h3_diag_error(d, (h3_span){0}, NULL, "cuda: %s failed to load earlier", k->name);
    return k->fn ? k : NULL;
  }
  if (cu_compile_tu(s, "the flash attention kernel", flash_source, false, 1, &flash_name, &k, d) != H3_OK)
    return NULL;
  cudaError_t e = (size_t)FLASH_SMEM > s->smem_optin
                      ? cudaErrorInvalidValue
                      : cudaKernelSetAttributeForDevice(
                            k->fn, cudaFuncAttributeMaxDynamicSharedMemorySize, FLASH_SMEM, s->device);
  if (e != cudaSuccess) {
    cu_fail(d, e, "cudaKernelSetAttributeForDevice (dynamic shared memory)", k->name);
    k->fn = NULL;
    return NULL;
  }
  return k;
}

h3_status cu_flash_run(cu_state *s, const cu_att_seg *a, h3_diag *d) {
  cu_kernel *k = flash_kernel(s, d);
  if (!k) return H3_ERR;
  const void *q = a->q, *kk = a->k, *v = a->v;
  void *o = a->o;
  int len = (int)a->len, group = (int)(a->hq / a->hk);
  long long qs = a->q_stride, ks = a->k_stride, vs = a->v_stride, os = a->o_stride;
  float c = a->scale * 1.4426950408889634f;
  void *args[] = {&q, &kk, &v, &o, &len, &group, &qs, &ks, &vs, &os, &c};
  int64_t grid[3] = {(a->len + 127) / 128, a->hq, 1}, block[3] = {256, 1, 1};
  return cu_launch(s, k, grid, block, FLASH_SMEM, args, d);
}
