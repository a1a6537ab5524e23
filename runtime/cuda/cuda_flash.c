/* cuda_flash.c: h3's own flash-attention forward kernel (bf16, head_dim 128, non-causal),
 * CUDA C compiled with NVRTC for sm_90a (Hopper: TMA, mbarriers, warpgroup MMA) on first use.
 *
 * One block of 3 warpgroups (384 threads) per (128 query rows, head), FlashAttention-3's
 * warp-specialised layout:
 *   producer (warpgroup 0, 40 registers by setmaxnreg): one thread issues every load as a
 *     TMA tile copy (cp.async.bulk.tensor.2d, a 128-byte-swizzled box of 64 columns x 128
 *     rows, rows past the segment end zero-filled): Q once, then K and V tile j (128 keys)
 *     into stage j % 3 once the consumers released the tile j - 3 that the stage held;
 *   consumers (warpgroups 1, 2, 232 registers): warpgroup 1 + w owns query rows
 *     [64w, 64w + 64) and walks all key tiles with FlashAttention's online softmax
 *     (c = scale·log2(e)): S = Q·Kᵀ as 8 wgmma m64n128k16 from shared memory; keys past the
 *     end masked to -inf; m' = max(m, rowmax S); O, l scaled by 2^((m - m')·c);
 *     P = 2^(S·c - m'·c); l += rowsum P (per thread, quad-reduced at the end); O += P·V as 8
 *     wgmma with P rounded to bf16 in registers (the S fragments repacked as the A operand)
 *     and V an N-major B operand; finally O / l rounded once to bf16.
 * Schedule: turn j of a consumer issues S(j) = Q·K(j)ᵀ and O += P(j-1)·V(j-1), waits for
 * S(j) only and computes the softmax of tile j while P(j-1)·V(j-1) runs (intra-warpgroup
 * overlap); the two consumers take turns to issue (ping-pong through named barriers 1 and
 * 2), so that one's softmax runs under the other's matrix work.
 * Synchronisation: mbarriers in shared memory. Q, K[s], V[s] "full": 1 arrival (the
 * producer's expect_tx) + the TMA bytes; tile j waits for phase parity (j / 3) & 1.
 * "Empty"[s]: 8 arrivals (lane 0 of each consumer warp once its P·V of the tile finished);
 * the producer waits for parity ((j / 3) - 1) & 1 before loading tile j >= 3 into it.
 * Shared memory (dynamic, 225 KiB, one block per SM): Q [128][128] and 3 stages of K, V
 * [128][128], each tile two [128][64] halves (columns 0-63, 64-127) whose row r is 128
 * bytes with 16-byte chunk ch at chunk ch ^ (r & 7): TMA's 128B swizzle, which is also the
 * layout the wgmma descriptors (128B swizzle mode) read.
 * Tensor maps (cuTensorMapEncodeTiled through cudaGetDriverEntryPointByVersion: no libcuda
 * link) describe q, k, v as 2D [len, H·128] with their own row strides, so q/k/v can be the
 * [T, H, 128] views of a packed qkv (attention's v_view); they are encoded on the host for
 * each segment and passed by value (__grid_constant__).
 * Environment: none (one variant).
 */
#include "cuda_internal.h"

#include <cuda.h> /* CUtensorMap and its enums only: the encoder comes from the runtime */
#include <pthread.h>

static const char flash_source[] =
    "#define BM 128\n"
    "#define BN 128\n"
    "#define HD 128\n"
    "#define STAGES 3\n"
    "#define TILE_BYTES (BN * HD * 2)\n"
    "#define HALF_BYTES (TILE_BYTES / 2)\n"
    "#define H3F_ACC \\\n"
    "  \"%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, \" \\\n"
    "  \"%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, \" \\\n"
    "  \"%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, \" \\\n"
    "  \"%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63\"\n"
    "#define H3F_C8(d, i) \"+f\"(d[i]), \"+f\"(d[i + 1]), \"+f\"(d[i + 2]), \"+f\"(d[i + 3]), \\\n"
    "    \"+f\"(d[i + 4]), \"+f\"(d[i + 5]), \"+f\"(d[i + 6]), \"+f\"(d[i + 7])\n"
    "#define H3F_C64(d) H3F_C8(d, 0), H3F_C8(d, 8), H3F_C8(d, 16), H3F_C8(d, 24), \\\n"
    "    H3F_C8(d, 32), H3F_C8(d, 40), H3F_C8(d, 48), H3F_C8(d, 56)\n"
    "// a CUtensorMap (128 opaque bytes, 64-byte aligned), passed by value\n"
    "struct __align__(64) h3f_tmap { unsigned long long opaque[16]; };\n"
    "__device__ __forceinline__ unsigned h3f_smem(const void *p) {\n"
    "  return (unsigned)__cvta_generic_to_shared(p);\n"
    "}\n"
    "// ---- mbarriers (shared::cta addresses) ----\n"
    "__device__ __forceinline__ void h3f_bar_init(unsigned bar, unsigned count) {\n"
    "  asm volatile(\"mbarrier.init.shared::cta.b64 [%0], %1;\\n\" ::\"r\"(bar), \"r\"(count)\n"
    "               : \"memory\");\n"
    "}\n"
    "// the producer's arrival, announcing `bytes` of TMA writes that complete the phase\n"
    "__device__ __forceinline__ void h3f_bar_expect(unsigned bar, unsigned bytes) {\n"
    "  asm volatile(\"{\\n.reg .b64 st;\\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\\n}\\n\"\n"
    "               ::\"r\"(bar), \"r\"(bytes) : \"memory\");\n"
    "}\n"
    "__device__ __forceinline__ void h3f_bar_arrive(unsigned bar) {\n"
    "  asm volatile(\"{\\n.reg .b64 st;\\nmbarrier.arrive.shared::cta.b64 st, [%0];\\n}\\n\" ::\"r\"(bar)\n"
    "               : \"memory\");\n"
    "}\n"
    "// waits until the phase of parity `parity` has completed\n"
    "__device__ __forceinline__ void h3f_bar_wait(unsigned bar, unsigned parity) {\n"
    "  unsigned done;\n"
    "  do {\n"
    "    asm volatile(\"{\\n.reg .pred p;\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\n\"\n"
    "                 \"selp.u32 %0, 1, 0, p;\\n}\\n\"\n"
    "                 : \"=r\"(done) : \"r\"(bar), \"r\"(parity) : \"memory\");\n"
    "  } while (!done);\n"
    "}\n"
    "// ---- TMA: box {64 columns, 128 rows} at (column c0, row c1) into a swizzled [128][64] half ----\n"
    "__device__ __forceinline__ void h3f_tma(unsigned dst, const h3f_tmap *map, int c0, int c1,\n"
    "                                        unsigned bar) {\n"
    "  asm volatile(\"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes\"\n"
    "               \" [%0], [%1, {%2, %3}], [%4];\\n\"\n"
    "               ::\"r\"(dst), \"l\"((unsigned long long)map), \"r\"(c0), \"r\"(c1), \"r\"(bar)\n"
    "               : \"memory\");\n"
    "}\n"
    "__device__ __forceinline__ void h3f_prefetch_map(const h3f_tmap *map) {\n"
    "  asm volatile(\"prefetch.tensormap [%0];\\n\" ::\"l\"((unsigned long long)map) : \"memory\");\n"
    "}\n"
    "// ---- named barriers of the two consumer warpgroups (ids 1, 2; 256 threads) ----\n"
    "__device__ __forceinline__ void h3f_turn_wait(int id) {\n"
    "  asm volatile(\"bar.sync %0, 256;\\n\" ::\"r\"(id) : \"memory\");\n"
    "}\n"
    "__device__ __forceinline__ void h3f_turn_pass(int id) {\n"
    "  asm volatile(\"bar.arrive %0, 256;\\n\" ::\"r\"(id) : \"memory\");\n"
    "}\n"
    "// ---- wgmma ----\n"
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
    "               H3F_ACC\n"
    "               \"}, %64, %65, p, 1, 1, 0, 0;\\n}\\n\"\n"
    "               : H3F_C64(d) : \"l\"(a), \"l\"(b), \"r\"(acc));\n"
    "}\n"
    "// d += A·B, m64n128k16, A in registers (bf16x2), B in shared memory, N-major\n"
    "__device__ __forceinline__ void h3f_mma_rs(float *d, const unsigned *a, unsigned long long b) {\n"
    "  asm volatile(\"wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {\"\n"
    "               H3F_ACC\n"
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
    "\n"
    "extern \"C\" __global__ void __launch_bounds__(384, 1) h3cu_flash_fwd(\n"
    "    const __grid_constant__ h3f_tmap tq, const __grid_constant__ h3f_tmap tk,\n"
    "    const __grid_constant__ h3f_tmap tv, h3_bf16 *__restrict__ o, int len, int group,\n"
    "    long long os, float c) {\n"
    "  extern __shared__ unsigned char h3f_smem_raw[];\n"
    "  // mbarriers: Q; K and V of each stage full (TMA bytes landed); each stage empty (the 8\n"
    "  // consumer warps finished P·V of the tile it held)\n"
    "  __shared__ unsigned long long h3f_bars[1 + 3 * STAGES];\n"
    "  const unsigned sq = (h3f_smem(h3f_smem_raw) + 1023u) & ~1023u; // atoms 1024-aligned\n"
    "  const unsigned skv = sq + BM * HD * 2; // stage s: K at skv + 2s·TILE, V one TILE on\n"
    "  const unsigned bq = h3f_smem(h3f_bars), bk = bq + 8, bv = bk + 8 * STAGES, be = bv + 8 * STAGES;\n"
    "  const int tid = threadIdx.x, wg = tid >> 7;\n"
    "  const int head = blockIdx.y, m0 = blockIdx.x * BM, kvcol = head / group * HD;\n"
    "  const int n_tiles = (len + BN - 1) / BN;\n"
    "  if (tid == 0) {\n"
    "    h3f_bar_init(bq, 1);\n"
    "    for (int i = 0; i < STAGES; i++) {\n"
    "      h3f_bar_init(bk + 8 * i, 1);\n"
    "      h3f_bar_init(bv + 8 * i, 1);\n"
    "      h3f_bar_init(be + 8 * i, 8);\n"
    "    }\n"
    "    asm volatile(\"fence.mbarrier_init.release.cluster;\\n\" ::: \"memory\");\n"
    "    asm volatile(\"fence.proxy.async.shared::cta;\\n\" ::: \"memory\");\n"
    "  }\n"
    "  __syncthreads();\n"
    "  if (wg == 0) {\n"
    "    // producer: one thread issues every TMA load; tile j goes to stage j % 3 once the\n"
    "    // consumers released tile j - 3 (its ((j / 3) - 1)-th release of that stage)\n"
    "    asm volatile(\"setmaxnreg.dec.sync.aligned.u32 40;\\n\" ::: \"memory\");\n"
    "    if (tid == 0) {\n"
    "      h3f_prefetch_map(&tq);\n"
    "      h3f_prefetch_map(&tk);\n"
    "      h3f_prefetch_map(&tv);\n"
    "      h3f_bar_expect(bq, BM * HD * 2);\n"
    "      h3f_tma(sq, &tq, head * HD, m0, bq);\n"
    "      h3f_tma(sq + HALF_BYTES, &tq, head * HD + 64, m0, bq);\n"
    "      for (int j = 0; j < n_tiles; j++) {\n"
    "        const int st = j % STAGES;\n"
    "        if (j >= STAGES) h3f_bar_wait(be + 8 * st, ((j / STAGES) - 1) & 1);\n"
    "        const unsigned dk = skv + 2u * TILE_BYTES * st, dv = dk + TILE_BYTES;\n"
    "        h3f_bar_expect(bk + 8 * st, TILE_BYTES);\n"
    "        h3f_tma(dk, &tk, kvcol, j * BN, bk + 8 * st);\n"
    "        h3f_tma(dk + HALF_BYTES, &tk, kvcol + 64, j * BN, bk + 8 * st);\n"
    "        h3f_bar_expect(bv + 8 * st, TILE_BYTES);\n"
    "        h3f_tma(dv, &tv, kvcol, j * BN, bv + 8 * st);\n"
    "        h3f_tma(dv + HALF_BYTES, &tv, kvcol + 64, j * BN, bv + 8 * st);\n"
    "      }\n"
    "    }\n"
    "  } else {\n"
    "    // consumer warpgroup cw owns query rows [64cw, 64cw + 64). Ping-pong: a warpgroup\n"
    "    // issues its wgmmas only in its turn (named barrier 1 + cw) and then hands the turn\n"
    "    // to the other, so that one warpgroup's softmax runs under the other's matrix work.\n"
    "    asm volatile(\"setmaxnreg.inc.sync.aligned.u32 232;\\n\" ::: \"memory\");\n"
    "    const int cw = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31;\n"
    "    const int mine = 1 + cw, other = 2 - cw;\n"
    "    // descriptors: Q of this warpgroup (K-major; SBO = 8 rows of 128 bytes), K of stage 0\n"
    "    // (K-major), V of stage 0 (N-major: LBO = the next 64 columns, SBO = the next 8 keys);\n"
    "    // stage s adds 2s·TILE bytes (in descriptor units of 16 bytes)\n"
    "    const unsigned long long dq = h3f_desc(sq + cw * 64 * 128, 16, 1024);\n"
    "    const unsigned long long dk = h3f_desc(skv, 16, 1024);\n"
    "    const unsigned long long dv = h3f_desc(skv + TILE_BYTES, BN * 128, 1024);\n"
    "    auto stage = [](int tile) { return (unsigned long long)((2u * TILE_BYTES * (tile % STAGES)) >> 4); };\n"
    "    auto parity = [](int tile) { return (unsigned)((tile / STAGES) & 1); };\n"
    "    float acc[64], s[64], corr[2];\n"
    "    unsigned p[32];\n"
    "    float mrow[2] = {-__int_as_float(0x7f800000), -__int_as_float(0x7f800000)};\n"
    "    float lrow[2] = {0.0f, 0.0f};\n"
    "    // n_tiles + 1 turns per warpgroup (S(0); S(j) with P(j-1)·V(j-1); P(n-1)·V(n-1));\n"
    "    // warpgroup 0 goes first: warpgroup 1 opens its barrier once and skips its last pass\n"
    "    if (cw == 1) h3f_turn_pass(1);\n"
    "    h3f_bar_wait(bq, 0);\n"
    "    h3f_bar_wait(bk, 0);\n"
    "    h3f_turn_wait(mine);\n"
    "    h3f_fence();\n"
    "    h3f_qk(s, dq, dk);\n"
    "    h3f_commit();\n"
    "    h3f_turn_pass(other);\n"
    "    h3f_wait<0>();\n"
    "    h3f_hold(s);\n"
    "    h3f_softmax(s, mrow, lrow, corr, 0, len, lane, c);\n"
    "    h3f_pack_p(p, s);\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 64; i++) acc[i] = 0.0f;\n"
    "    // turn j: S(j) and P(j-1)·V(j-1) in flight together; the softmax of tile j overlaps\n"
    "    // P(j-1)·V(j-1) and the other warpgroup's turn\n"
    "    for (int j = 1; j < n_tiles; j++) {\n"
    "      h3f_bar_wait(bk + 8 * (j % STAGES), parity(j));\n"
    "      h3f_bar_wait(bv + 8 * ((j - 1) % STAGES), parity(j - 1));\n"
    "      h3f_turn_wait(mine);\n"
    "      h3f_fence();\n"
    "      h3f_qk(s, dq, dk + stage(j));\n"
    "      h3f_commit();\n"
    "      h3f_pv(acc, p, dv + stage(j - 1));\n"
    "      h3f_commit();\n"
    "      h3f_turn_pass(other);\n"
    "      h3f_wait<1>();\n"
    "      h3f_hold(s);\n"
    "      h3f_softmax(s, mrow, lrow, corr, j * BN, len, lane, c);\n"
    "      h3f_wait<0>();\n"
    "      h3f_hold(acc);\n"
    "      if (lane == 0) h3f_bar_arrive(be + 8 * ((j - 1) % STAGES)); // this warp is done with tile j-1\n"
    "#pragma unroll\n"
    "      for (int n = 0; n < 16; n++) {\n"
    "        acc[4 * n] *= corr[0];\n"
    "        acc[4 * n + 1] *= corr[0];\n"
    "        acc[4 * n + 2] *= corr[1];\n"
    "        acc[4 * n + 3] *= corr[1];\n"
    "      }\n"
    "      h3f_pack_p(p, s);\n"
    "    }\n"
    "    h3f_bar_wait(bv + 8 * ((n_tiles - 1) % STAGES), parity(n_tiles - 1));\n"
    "    h3f_turn_wait(mine);\n"
    "    h3f_fence();\n"
    "    h3f_pv(acc, p, dv + stage(n_tiles - 1));\n"
    "    h3f_commit();\n"
    "    if (cw == 0) h3f_turn_pass(other);\n"
    "    h3f_wait<0>();\n"
    "    h3f_hold(acc);\n"
    "#pragma unroll\n"
    "    for (int r = 0; r < 2; r++) {\n"
    "      lrow[r] += __shfl_xor_sync(0xffffffffu, lrow[r], 1);\n"
    "      lrow[r] += __shfl_xor_sync(0xffffffffu, lrow[r], 2);\n"
    "    }\n"
    "    const float inv0 = 1.0f / lrow[0], inv1 = 1.0f / lrow[1];\n"
    "    const int r0 = m0 + cw * 64 + warp * 16 + (lane >> 2), r1 = r0 + 8;\n"
    "    h3_bf16 *ob = o + (long long)head * HD + 2 * (lane & 3);\n"
    "#pragma unroll\n"
    "    for (int n = 0; n < 16; n++) {\n"
    "      if (r0 < len)\n"
    "        *reinterpret_cast<unsigned *>(ob + (long long)r0 * os + n * 8) =\n"
    "            h3f_pack(acc[4 * n] * inv0, acc[4 * n + 1] * inv0);\n"
    "      if (r1 < len)\n"
    "        *reinterpret_cast<unsigned *>(ob + (long long)r1 * os + n * 8) =\n"
    "            h3f_pack(acc[4 * n + 2] * inv1, acc[4 * n + 3] * inv1);\n"
    "    }\n"
    "  }\n"
    "}\n";

const char *cu_flash_source(void) { return flash_source; }

bool cu_flash_supports(const cu_att_seg *a) {
  return a->dtype == H3_BF16 && a->dim == 128 && !a->causal && a->len < 2147483647 &&
         a->q_stride % 8 == 0 && a->k_stride % 8 == 0 && a->v_stride % 8 == 0 &&
         a->q_stride >= a->hq * 128 && a->k_stride >= a->hk * 128 && a->v_stride >= a->hk * 128 &&
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

/* ---- tensor maps ------------------------------------------------------------------------ */
typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                    const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                    const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                    CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* the driver's cuTensorMapEncodeTiled, looked up once per process */
static pthread_once_t encoder_once = PTHREAD_ONCE_INIT;
static encode_tiled_fn encoder;
static cudaError_t encoder_error;
static enum cudaDriverEntryPointQueryResult encoder_query;

static void encoder_lookup(void) {
  void *fn = NULL;
  encoder_error = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                   cudaEnableDefault, &encoder_query);
  if (encoder_error == cudaSuccess && encoder_query == cudaDriverEntryPointSuccess)
    encoder = (encode_tiled_fn)fn;
}

/* A map of rows [0, len) x columns [0, cols) of a bf16 matrix at base with row stride
 * `stride` elements, read in boxes of 64 columns x 128 rows, 128-byte swizzled. */
static h3_status tile_map(CUtensorMap *m, const void *base, int64_t cols, int64_t stride,
                          int64_t len, const char *what, h3_diag *d) {
  cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)len}, strides[1] = {(cuuint64_t)stride * 2};
  cuuint32_t box[2] = {64, 128}, steps[2] = {1, 1};
  CUresult r = encoder(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)base, dims, strides, box,
                       steps, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r == CUDA_SUCCESS) return H3_OK;
  h3_diag_error(d, (h3_span){0}, "run this attention with --attention cudnn or reference",
                "cuda: flash attention: cuTensorMapEncodeTiled failed (error %d) for %s: %lld rows "
                "of %lld columns, row stride %lld", (int)r, what, (long long)len, (long long)cols,
                (long long)stride);
  return H3_ERR;
}

h3_status cu_flash_run(cu_state *s, const cu_att_seg *a, h3_diag *d) {
  cu_kernel *k = flash_kernel(s, d);
  if (!k) return H3_ERR;
  pthread_once(&encoder_once, encoder_lookup);
  if (!encoder) {
    h3_diag_error(d, (h3_span){0}, "update the NVIDIA driver, or use --attention cudnn or reference",
                  "cuda: flash attention: the driver has no cuTensorMapEncodeTiled (%s, query "
                  "result %d)", cudaGetErrorName(encoder_error), (int)encoder_query);
    return H3_ERR;
  }
  CUtensorMap tq, tk, tv;
  if (tile_map(&tq, a->q, a->hq * 128, a->q_stride, a->len, "q", d) != H3_OK ||
      tile_map(&tk, a->k, a->hk * 128, a->k_stride, a->len, "k", d) != H3_OK ||
      tile_map(&tv, a->v, a->hk * 128, a->v_stride, a->len, "v", d) != H3_OK)
    return H3_ERR;
  void *o = a->o;
  int len = (int)a->len, group = (int)(a->hq / a->hk);
  long long os = a->o_stride;
  float c = a->scale * 1.4426950408889634f;
  void *args[] = {&tq, &tk, &tv, &o, &len, &group, &os, &c};
  int64_t grid[3] = {(a->len + 127) / 128, a->hq, 1}, block[3] = {384, 1, 1};
  return cu_launch(s, k, grid, block, FLASH_SMEM, args, d);
}
