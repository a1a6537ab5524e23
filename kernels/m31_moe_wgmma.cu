// m31_moe_wgmma.cu: the two grouped GEMMs of m31_moe_gemm.cu (steps 1 and 2 of MiniMax-M3.1's
// moe for many rows per expert: the same scratch, contract, outputs and roundings; its header
// states them) on Hopper's warpgroup MMA (wgmma), compiled for sm_90a:
//   H3_MOE_WGMMA_NAME (h[T, H], gate_up[E, 2F, H], lists, counts) -> act {k, E, alpha, limit}:
//     act[t * k + s, o] = bf16(swigluoai(bf16(h_t · gate_e[o]), bf16(h_t · up_e[o]))).
//     Grid (slots, F / 128): 128 rows of expert e × the 128 gate outputs o0 = 128 *
//     blockIdx.y .. and their 128 up outputs (B rows 0..127 gate o0 + r, 128..255 up F + o0 +
//     r - 128), so that a thread holds the gate and the up sum of the same output.
//   H3_MOE_WGMMA_DOWN_NAME (down[E, H, F], lists, counts, act) -> y {k, E}:
//     y[t * k + s, o] = bf16(act[t * k + s] · down_e[o]). Grid (slots, H / 256), H a multiple
//     of 256: 128 rows × outputs o0 = 256 * blockIdx.y .. + 255 (B row r is output o0 + r).
// Scheduling as in m31_moe_gemm.cu: blockIdx.x is an m-tile slot (h3_moe_tile, 128 rows,
// expert-major; the launcher's bound on slots), a block past the last exits; rows past the
// expert's count are zeros and are not written.
// Block: 256 threads, 2 warpgroups, one block per SM (__launch_bounds__: up to 255 registers,
// ptxas of CUDA 13 takes 194 / 192 with no spill; H3W_SMEM = 193 KiB of shared memory). Warpgroup w owns tile rows 64w .. 64w + 63 and all 256 B
// rows: per k-step of 64, 4 wgmma m64n256k16 (bf16, fp32 accumulate), A and B read from shared
// memory through descriptors. Accumulators: 128 floats d[] per thread; with lane = 4g + t of
// warp v (0..3) of its warpgroup, d[4j + 2h + q] = D[64w + 16v + g + 8h][8j + 2t + q] (PTX ISA,
// wgmma .m64nNk16 D fragment), j = 0..31, h, q = 0, 1; column c is B row c.
// Shared memory (dynamic, H3W_SMEM: 1 KiB of slack to align the base to 1024 bytes, then
// H3W_STAGES stages of H3W_STAGE_BYTES): stage s holds A [128][64] bf16 (16 KiB) then B
// [256][64] (32 KiB); tile row r is 128 bytes whose 16-byte chunk c sits at chunk c ^ (r & 7)
// (the 128-byte swizzle; m31_moe_gemm.cu's layout). The wgmma descriptors (h3_wg_desc)
// read it in swizzle mode 128B: K-major, 8-row atoms of 1024 bytes (stride byte offset 1024;
// the leading byte offset is unused in this mode, set to 16 as flash_attention.cu does); the
// k16 step kk of a stage starts 32 kk bytes into the rows (descriptor + 2 kk). Warpgroup w's A
// starts at row 64w (8 KiB in, 1024-aligned); B at row 0 (n = 256 rows, 32 atoms).
// Pipeline (every thread copies, both warpgroups compute): k-steps 0 .. H3W_STAGES - 2 are
// loaded up front; then k-step kt of nk = K / 64:
//   1. wait for this thread's cp.async of k-step kt (cp.async.wait_group H3W_STAGES - 2),
//      fence.proxy.async (cp.async and the zero rows are generic-proxy writes, wgmma reads
//      through the async proxy), __syncthreads: every thread's copies of kt are in;
//   2. wgmma.fence, the 4 wgmmas on stage kt % H3W_STAGES, commit; wgmma.wait_group 1: this
//      warpgroup's wgmmas of kt - 1 are retired (those of kt keep the tensor cores busy);
//   3. __syncthreads: both warpgroups' are, so the stage of kt - 1 is free: cp.async of k-step
//      kt + H3W_STAGES - 1 into it, commit (an empty batch past the end, so that the counts
//      of step 1 hold).
// So 3 k-steps (144 KiB) load while the tensor cores work, and no stage is written while a
// wgmma that reads it may be pending.
// Compiled with the lossless options (sm_90a, FMA contraction allowed): the epilogue's
// arithmetic is the prelude's _rn intrinsics and conversions (h3_moe_act2, h3_st2) and the
// expf of h3_sigmoid, whose code has no multiply-add pair to contract (its PTX is the same
// with -fmad=false but for the .rn marks, CUDA 13), so its values are those of the exact-tier
// m31_moe_gemm.cu from the same sums.
// Macros the user defines in front: the name of each kernel it wants.

#define H3W_BM 128 // rows per tile
#define H3W_BN 256 // B rows (outputs) per tile
#define H3W_BK 64  // k per stage
#define H3W_STAGES 4
#define H3W_THREADS 256
#define H3W_A_BYTES (H3W_BM * H3W_BK * 2)
#define H3W_STAGE_BYTES ((H3W_BM + H3W_BN) * H3W_BK * 2)
#define H3W_SMEM (1024 + H3W_STAGES * H3W_STAGE_BYTES)
#define H3W_A_LOADS (H3W_BM / 32) // 16-byte chunks of A per thread and stage
#define H3W_B_LOADS (H3W_BN / 32)

// d += A·B, m64n256k16: A (64 rows) and B (256 rows), K-major in shared memory at descriptors
// a and b; acc = 0: d = A·B
H3_DI void h3w_mma(float *d, unsigned long long a, unsigned long long b, int acc) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {" H3_WG_OPS64 ", "
               "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
               "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
               "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, "
               "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, "
               "%123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
               : H3_WG_C64(d, 0), H3_WG_C64(d, 64)
               : "l"(a), "l"(b), "r"(acc));
}

// One stage at k0: this thread's 16-byte chunk (tid % 8) of tile rows tid / 8 + 32 i of A
// (xa[i]; null: a row past the count, left zero) and of B (wb[i]); `at`: its byte offset in
// the first such row (the swizzled chunk).
H3_DI void h3w_load(unsigned char *st, const h3_bf16 *const *xa, const h3_bf16 *const *wb,
                    long long k0, int at) {
#pragma unroll
  for (int i = 0; i < H3W_A_LOADS; i++)
    if (xa[i]) h3_cp16(reinterpret_cast<uint4 *>(st + at + 32 * 128 * i), xa[i] + k0);
#pragma unroll
  for (int i = 0; i < H3W_B_LOADS; i++)
    h3_cp16(reinterpret_cast<uint4 *>(st + H3W_A_BYTES + at + 32 * 128 * i), wb[i] + k0);
}

// d = A · B^T over K (a multiple of 64) for this thread's accumulators (file
// comment); xa[i], wb[i]: this thread's chunks (h3w_load) at k = 0; sm: the 1024-aligned
// stages.
H3_DI void h3w_mainloop(const h3_bf16 *const *xa, const h3_bf16 *const *wb, long long K,
                        unsigned char *sm, float *d) {
  const int tid = threadIdx.x, lr = tid >> 3, wg = tid >> 7;
  const int at = lr * 128 + (((tid & 7) ^ (lr & 7)) * 16);
  const int nk = (int)(K / H3W_BK);
  const uint4 z = {0u, 0u, 0u, 0u};
  for (int s = 0; s < H3W_STAGES; s++)
#pragma unroll
    for (int i = 0; i < H3W_A_LOADS; i++)
      if (!xa[i]) *reinterpret_cast<uint4 *>(sm + s * H3W_STAGE_BYTES + at + 32 * 128 * i) = z;
#pragma unroll
  for (int s = 0; s < H3W_STAGES - 1; s++) {
    if (s < nk) h3w_load(sm + s * H3W_STAGE_BYTES, xa, wb, (long long)s * H3W_BK, at);
    h3_cp_commit();
  }
  const unsigned base = h3_smem_addr(sm);
  const unsigned long long da = h3_wg_desc(base + wg * 64 * 128, 16, 1024);
  const unsigned long long db = h3_wg_desc(base + H3W_A_BYTES, 16, 1024);
  for (int kt = 0; kt < nk; kt++) {
    h3_cp_wait_pending<H3W_STAGES - 2>();
    h3_fence_async_smem();
    __syncthreads(); // every thread's copies of k-step kt are in
    const unsigned long long st = (unsigned long long)(((kt % H3W_STAGES) * H3W_STAGE_BYTES) >> 4);
    h3_wg_fence();
#pragma unroll
    for (int kk = 0; kk < H3W_BK / 16; kk++)
      h3w_mma(d, da + st + 2 * kk, db + st + 2 * kk, kt > 0 || kk > 0);
    h3_wg_commit();
    h3_wg_wait<1>(); // this warpgroup's wgmmas of k-step kt - 1 are retired
    __syncthreads(); // so are the other's: the stage of kt - 1 is free
    const int nx = kt + H3W_STAGES - 1;
    if (nx < nk)
      h3w_load(sm + (nx % H3W_STAGES) * H3W_STAGE_BYTES, xa, wb, (long long)nx * H3W_BK, at);
    h3_cp_commit();
  }
  h3_wg_wait<0>();
  h3_wg_hold<128>(d);
}

// put(p, j, h) for each pair of this thread's outputs, j < J, h = 0, 1: accumulator row g + 8h,
// columns 8j + 2t and + 1, at p = their place in out [T * k, ld] (row t * k + s of list entry
// t * 16 + s, column o0 + 8j + 2t); rows past the expert's count are skipped.
template <int J, typename Put>
H3_DI void h3w_store(h3_bf16 *out, long long ld, const int *rows, int m0, int n, int k,
                     long long o0, Put put) {
  const int tid = threadIdx.x, lane = tid & 31;
  const int r0 = m0 + 64 * (tid >> 7) + 16 * ((tid >> 5) & 3) + (lane >> 2);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    if (r0 + 8 * h >= n) continue;
    h3_bf16 *p = out + h3_moe_row(rows[r0 + 8 * h], k) * ld + o0 + 2 * (lane & 3);
#pragma unroll
    for (int j = 0; j < J; j++) put(p + 8 * j, j, h);
  }
}

// This block's tile (returns when its slot has none): rows of its expert e from m0 of the
// list (n in all) and d of this thread, the products of A rows xs + xrow_of(list entry) * K
// and B rows ws + wrow_of(r) * K (r: the tile's B row).
#define H3W_TILE(xs, K, xrow_of, ws, wrow_of)                                               \
  H3_DYN_SMEM(unsigned char, smem_raw);                                                      \
  int e, m0;                                                                                 \
  if (!h3_moe_tile(counts, E, blockIdx.x, H3W_BM, &e, &m0)) return;                          \
  const int *rows = lists + (long long)e * T, n = counts[e];                                 \
  const h3_bf16 *xa[H3W_A_LOADS], *wb[H3W_B_LOADS]; /* tile rows tid / 8 + 32 i */           \
  const int lr = threadIdx.x >> 3, c8 = (threadIdx.x & 7) * 8;                               \
  for (int i = 0; i < H3W_A_LOADS; i++)                                                      \
    xa[i] = m0 + lr + 32 * i < n ? xs + xrow_of(rows[m0 + lr + 32 * i]) * K + c8 : nullptr;  \
  for (int i = 0; i < H3W_B_LOADS; i++) wb[i] = ws + (wrow_of(lr + 32 * i)) * K + c8;        \
  unsigned char *sm = smem_raw + ((1024u - (h3_smem_addr(smem_raw) & 1023u)) & 1023u);       \
  float d[128];                                                                              \
  h3w_mainloop(xa, wb, K, sm, d);

#define H3W_H_ROW(ts) ((long long)(ts) / 16)
#define H3W_ACT_ROW(ts) h3_moe_row(ts, k)

#ifdef H3_MOE_WGMMA_NAME
#define H3W_GU_ROW(r) ((long long)e * 2 * F + ((r) < 128 ? o0 + (r) : F + o0 + (r) - 128))
extern "C" __global__ void __launch_bounds__(H3W_THREADS, 1)
    H3_MOE_WGMMA_NAME(H3_MOE_GEMM_PARAMS) {
  const long long o0 = (long long)blockIdx.y * 128;
  H3W_TILE(h, H, H3W_H_ROW, gu, H3W_GU_ROW)
  // gate sums of outputs o0 + 8j + 2t (+ 1) in d[4j + 2hr ..], their up sums (B rows 128 on)
  // in d[4(j + 16) + 2hr ..]
  h3w_store<16>(act, F, rows, m0, n, k, o0, [&](h3_bf16 *p, int j, int hr) {
    const float *g = d + 4 * j + 2 * hr, *u = d + 4 * (j + 16) + 2 * hr;
    h3_moe_act2(p, g[0], g[1], u[0], u[1], alpha, limit);
  });
}
#undef H3W_GU_ROW
#endif

#ifdef H3_MOE_WGMMA_DOWN_NAME
#define H3W_DOWN_ROW(r) ((long long)e * H + o0 + (r))
extern "C" __global__ void __launch_bounds__(H3W_THREADS, 1)
    H3_MOE_WGMMA_DOWN_NAME(H3_MOE_GEMM_DOWN_PARAMS) {
  const long long o0 = (long long)blockIdx.y * H3W_BN;
  H3W_TILE(act, F, H3W_ACT_ROW, down, H3W_DOWN_ROW)
  h3w_store<32>(y, H, rows, m0, n, k, o0, [&](h3_bf16 *p, int j, int hr) {
    h3_st2(p, d[4 * j + 2 * hr], d[4 * j + 2 * hr + 1]);
  });
}
#undef H3W_DOWN_ROW
#endif
