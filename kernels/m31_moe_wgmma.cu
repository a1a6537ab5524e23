// m31_moe_wgmma.cu: the two grouped GEMMs of m31_moe_gemm.cu (steps 1 and 2 of MiniMax-M3.1's
// moe for many rows per expert: the same scratch, contract, outputs and roundings; its header
// states them) on Hopper's warpgroup MMA (wgmma), compiled for sm_90a, in two forms:
//   H3_MOE_WGMMA_NAME (tb: map of gate_up; h[T, H], gate_up[E, 2F, H], lists, counts) -> act
//     {k, E, alpha, limit}: act[t * k + s, o] = bf16(swigluoai(bf16(h_t · gate_e[o]),
//     bf16(h_t · up_e[o]))); n-tile j: the 128 gate outputs o0 = 128 j .. and their 128 up
//     outputs (B rows 0..127 gate o0 + r, 128..255 up F + o0 + r - 128), so that a thread
//     holds the gate and the up sum of the same output. F / 128 n-tiles.
//   H3_MOE_WGMMA_DOWN_NAME (tb: map of down; down[E, H, F], lists, counts, act) -> y {k, E}:
//     y[t * k + s, o] = bf16(act[t * k + s] · down_e[o]); n-tile j: outputs o0 = 256 j ..
//     o0 + 255 (B row r is output o0 + r), H a multiple of 256: H / 256 n-tiles.
//   H3_MOE_WGMMA1_NAME, H3_MOE_WGMMA1_DOWN_NAME: the same products, the first form (below).
// Tiles: an m-tile (rows 128 i .. of expert e's list: ceil(counts[e] / 128) of them) × the
// 256 B rows of an n-tile. Rows past the expert's count are zeros and are not written.
// Accumulators, both forms: warpgroup w of the two that compute owns tile rows 64w .. 64w + 63
// and all 256 B rows: per k-step of 64, 4 wgmma m64n256k16 (bf16, fp32 accumulate), A and B
// read from shared memory through descriptors. 128 floats d[] per thread; with lane = 4g + t
// of warp v (0..3) of its warpgroup, d[4j + 2h + q] = D[64w + 16v + g + 8h][8j + 2t + q] (PTX
// ISA, wgmma .m64nNk16 D fragment), j = 0..31, h, q = 0, 1; column c is B row c. Epilogue:
// straight from these registers (act: 2 bf16 per store; y: the same).
// Shared memory (dynamic, H3W_SMEM: 1 KiB of slack to align the base to 1024 bytes, then
// H3W_STAGES stages of H3W_STAGE_BYTES): stage s holds A [128][64] bf16 (16 KiB) then B
// [256][64] (32 KiB); tile row r is 128 bytes whose 16-byte chunk c sits at chunk c ^ (r & 7)
// (the 128-byte swizzle: TMA's CU_TENSOR_MAP_SWIZZLE_128B into a 1024-aligned box, and
// m31_moe_gemm.cu's layout). The wgmma descriptors (h3_wg_desc) read it in swizzle mode 128B:
// K-major, 8-row atoms of 1024 bytes (stride byte offset 1024; the leading byte offset is
// unused in this mode, set to 16 as flash_attention.cu does); the k16 step kk of a stage
// starts 32 kk bytes into the rows (descriptor + 2 kk). Warpgroup w's A starts at row 64w
// (8 KiB in, 1024-aligned); B at row 0 (n = 256 rows, 32 atoms).
//
// The form H3_MOE_WGMMA_NAME / _DOWN_NAME: persistent, warp-specialized, in clusters of 2
// blocks (__cluster_dims__; the launcher: one cluster per 2 SMs, one block per SM).
// Work units: per n-tile j, U units (h3ws_units, from counts), expert-major: each expert's
// pairs of m-tiles (m-tiles 2p and 2p + 1 of one expert), and the odd m-tiles (an expert's
// last when it has an odd count of m-tiles) two by two, each such unit right after the pairs
// of the second of its two experts (the last one beside none when their count is odd): the
// odd m-tiles run beside their experts' pairs, whose weight tiles are then in L2 (with every
// odd unit after all the pairs, about half the experts' weights were read from memory twice
// at a 2048-row prefill: 15 of 32 experts have 3 m-tiles). Cluster c takes units u = c,
// c + clusters, .. < U · N (N: n-tiles): n-tile u / U, unit u % U, whose m-tile r goes to the
// block of cluster rank r. Clusters running together hold the units of the same one or two
// n-tiles, so the m-tiles that share a weight tile read it at about the same time (one read
// from memory) and the rows of h / act stay in L2.
// B rows (the weight tile, 256 rows × 64 k per k-step: 32 KiB) come by TMA from the weight
// matrix seen as 2D [E · 2F, H] (gate_up) or [E · H, F] (down), boxes of 64 columns × 128
// rows at rows b0 (gate_up: e 2F + o0; down: e H + o0) and b1 (gate_up: e 2F + F + o0; down:
// b0 + 128) into B rows 0..127 and 128..255 of the stage. Pair units share them: block r
// loads box r once into both blocks (.multicast::cluster, mask 3: the same offsets in each,
// completing 16 KiB on each block's full barrier), halving the weight traffic from L2, which
// bounds these GEMMs (the first form moved ~5 TB/s); odd-m-tile units load their own two
// boxes; a block beside no m-tile loads nothing and computes nothing.
// Block: 384 threads, 3 warpgroups, FlashAttention-3's layout (flash_attention.cu):
//   producer (warpgroup 0, setmaxnreg 56): fills stage it % H3W_STAGES with k-step it of the
//     block's sequence of (unit, k-step) pairs (k-step kt of a unit: k0 = 64 kt, K / 64 per
//     unit): thread 0 issues the TMA boxes; every producer thread p gathers its 16-byte chunk
//     p % 8 of A rows p / 8 + 16 i (i = 0..7: 8 threads read a row's 128 bytes; row t of h,
//     act row t k + s) by cp.async, with src-size 0 (zeros, nothing read) past the count.
//   consumers (warpgroups 1, 2, setmaxnreg 224): warpgroup 1 + w computes tile rows 64w ..
//     64w + 63, then the tile's epilogue, while the producer already fills the stages with the
//     next unit's first k-steps. A warpgroup whose rows are all past the count (or a block
//     beside no m-tile) issues no wgmma: it only waits and releases, as below.
// mbarriers (shared memory, 2 per stage), the handshake per k-step it, s = it % H3W_STAGES,
// u = it / H3W_STAGES (the stage's u-th use):
//   full[s] (129 arrivals + the B bytes as transactions): producer thread 0's
//     mbarrier.arrive.expect_tx(32 KiB) before its TMA (a plain arrival beside no m-tile),
//     and the 128 producer threads' cp.async.mbarrier.arrive.noinc (each fires once the
//     thread's cp.async so far have landed; .noinc: counted in the 129). The other block's multicast box may
//     land before this block's expect_tx of the phase (the transaction count goes negative
//     for a while; the phase still waits for the 129 arrivals). Consumers wait for the phase
//     of parity u & 1, then fence.proxy.async (the cp.async rows are generic-proxy writes,
//     wgmma reads through the async proxy) before their wgmmas read the stage.
//   empty[s] (16 arrivals: lane 0 of each consumer warp of both blocks): a warp arrives on
//     both blocks' empty[s] (the other's through mapa) for k-step it - 1 after
//     wgmma.wait_group 1 at k-step it (its warpgroup's wgmmas of it - 1 retired, those of it
//     in flight), and for the unit's last k-step after wait_group 0; a warpgroup without
//     wgmmas arrives right after its wait on full (so no arrival can fall into an earlier
//     phase). The producer waits for the phase of parity (u - 1) & 1 before writing use u >= 1
//     of the stage: then neither block reads it, and a multicast into the other is safe.
// Both blocks run the same units and k-steps, so the stages go in lockstep. A cluster barrier
// after the mbarriers' init (before any TMA or remote arrival) and one before exit (the other
// block's last arrivals on this one's barriers are in). So up to 3 k-steps load while one
// computes, no stage is overwritten while a wgmma that reads it may be pending, and producer
// threads end with cp.async.wait_all.
//
// The form H3_MOE_WGMMA1_NAME / _DOWN_NAME (the first wgmma kernels, kept to compare:
// H3_MOE_GEMM=wgmma1): grid (slots, n-tiles), blockIdx.x an m-tile slot (a block past the
// last exits); 256 threads, 2 warpgroups that copy and compute (up to 255 registers);
// every thread copies A and B by cp.async (its 16-byte chunk tid % 8 of rows tid / 8 + 32 i);
// k-steps 0 .. H3W_STAGES - 2 are loaded up front; then k-step kt of nk = K / 64:
//   1. wait for this thread's cp.async of k-step kt (cp.async.wait_group H3W_STAGES - 2),
//      fence.proxy.async, __syncthreads: every thread's copies of kt are in;
//   2. wgmma.fence, the 4 wgmmas on stage kt % H3W_STAGES, commit; wgmma.wait_group 1: this
//      warpgroup's wgmmas of kt - 1 are retired (those of kt keep the tensor cores busy);
//   3. __syncthreads: both warpgroups' are, so the stage of kt - 1 is free: cp.async of k-step
//      kt + H3W_STAGES - 1 into it, commit (an empty batch past the end, so that the counts
//      of step 1 hold).
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
#define H3W_A_BYTES (H3W_BM * H3W_BK * 2)
#define H3W_B_BYTES (H3W_BN * H3W_BK * 2)
#define H3W_STAGE_BYTES (H3W_A_BYTES + H3W_B_BYTES)
#define H3W_SMEM (1024 + H3W_STAGES * H3W_STAGE_BYTES)

// The m-tiles of an expert of n rows
H3_DI int h3ws_mtiles(int n) { return (n + H3W_BM - 1) / H3W_BM; }
// The work units of an n-tile (file comment): their count.
H3_DI int h3ws_units(const int *counts, int E) {
  int p = 0, odd = 0;
  for (int e = 0; e < E; e++) {
    const int mt = h3ws_mtiles(counts[e]);
    p += mt / 2, odd += mt & 1;
  }
  return p + (odd + 1) / 2;
}
// unit q's m-tile of cluster rank r: expert e, its first list entry m0 and count n (n = m0
// = 0: none); shared: the two m-tiles of the unit are one expert's (its B rows multicast)
struct h3ws_tile {
  int e, m0, n;
  bool shared;
};
// expert e's last m-tile, alone in its unit's rank
H3_DI h3ws_tile h3ws_last_tile(const int *counts, int e) {
  return {e, H3W_BM * (h3ws_mtiles(counts[e]) - 1), counts[e], false};
}
H3_DI h3ws_tile h3ws_tile_at(const int *counts, int E, int q, int r) {
  int u = 0, pend = -1; // units before expert e's; an odd m-tile waiting for its partner
  for (int e = 0; e < E; e++) {
    const int mt = h3ws_mtiles(counts[e]);
    if (q < u + mt / 2) // pair q - u of expert e
      return {e, H3W_BM * (2 * (q - u) + r), counts[e], true};
    u += mt / 2;
    if (!(mt & 1)) continue;
    if (pend < 0) {
      pend = e;
      continue;
    }
    if (q == u) return h3ws_last_tile(counts, r ? e : pend); // the odd unit of experts pend and e
    u++, pend = -1;
  }
  if (pend >= 0 && q == u && r == 0) return h3ws_last_tile(counts, pend); // the last, beside none
  return {0, 0, 0, false};
}

// The rest is GPU only (warpgroup MMAs, TMA, clusters): the host emulation compiles the units
// above (tests/m31/test_moe_units.cpp checks their mapping)
#ifndef H3_HOST_EMU
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

// The 4 wgmmas of one k-step on the stage at byte offset so of the descriptors da, db (first
// k-step of a tile: first = true, d = A·B), committed as one group.
H3_DI void h3w_kstep(float *d, unsigned long long da, unsigned long long db, unsigned so, bool first) {
  const unsigned long long o = so >> 4;
  h3_wg_fence();
#pragma unroll
  for (int kk = 0; kk < H3W_BK / 16; kk++) h3w_mma(d, da + o + 2 * kk, db + o + 2 * kk, !first || kk > 0);
  h3_wg_commit();
}

// put(p, j, h) for each pair of this thread's outputs, j < J, h = 0, 1: accumulator row g + 8h
// of warpgroup w's rows, columns 8j + 2t and + 1, at p = their place in out [T * k, ld] (row
// t * k + s of list entry t * 16 + s, column o0 + 8j + 2t); rows past the expert's count are
// skipped.
template <int J, typename Put>
H3_DI void h3w_store(h3_bf16 *out, long long ld, const int *rows, int m0, int n, int k,
                     long long o0, int w, Put put) {
  const int lane = threadIdx.x & 31;
  const int r0 = m0 + 64 * w + 16 * ((threadIdx.x >> 5) & 3) + (lane >> 2);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    if (r0 + 8 * h >= n) continue;
    h3_bf16 *p = out + h3_moe_row(rows[r0 + 8 * h], k) * ld + o0 + 2 * (lane & 3);
#pragma unroll
    for (int j = 0; j < J; j++) put(p + 8 * j, j, h);
  }
}
// gate_up's epilogue: the gate sums of outputs o0 + 8j + 2t (+ 1) in d[4j + 2hr ..], their up
// sums (B rows 128 on) in d[4(j + 16) + 2hr ..]
H3_DI void h3w_store_act(const float *d, h3_bf16 *act, long long F, const int *rows, int m0, int n,
                         int k, long long o0, int w, float alpha, float limit) {
  h3w_store<16>(act, F, rows, m0, n, k, o0, w, [&](h3_bf16 *p, int j, int hr) {
    const float *g = d + 4 * j + 2 * hr, *u = d + 4 * (j + 16) + 2 * hr;
    h3_moe_act2(p, g[0], g[1], u[0], u[1], alpha, limit);
  });
}
// down's epilogue: outputs o0 + 8j + 2t (+ 1) in d[4j + 2hr ..]
H3_DI void h3w_store_y(const float *d, h3_bf16 *y, long long H, const int *rows, int m0, int n,
                       int k, long long o0, int w) {
  h3w_store<32>(y, H, rows, m0, n, k, o0, w, [&](h3_bf16 *p, int j, int hr) {
    h3_st2(p, d[4 * j + 2 * hr], d[4 * j + 2 * hr + 1]);
  });
}

#define H3W_H_ROW(ts) ((long long)(ts) / 16)
#define H3W_ACT_ROW(ts) h3_moe_row(ts, k)

// ---- the persistent warp-specialized form, in clusters of 2 ----
#define H3WS_THREADS 384
#define H3WS_FULL_ARRIVALS 129 // the 128 producer threads' cp.async arrivals + the expect_tx
#define H3WS_EMPTY_ARRIVALS 16 // lane 0 of each consumer warp of both blocks of the cluster

// 16 bytes from src to shared memory at dst by cp.async (through L2 only); zeros where !live
// (src-size 0: nothing is read from src)
H3_DI void h3ws_cp16(unsigned dst, const void *src, bool live) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(live ? 16 : 0) : "memory");
}
// an arrival on bar (counted in its arrivals: .noinc) once this thread's cp.async so far have
// landed
H3_DI void h3ws_cp_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// the cluster's index, the clusters of the grid (its rank, barriers, remote arrivals and
// multicast loads: the prelude's h3_cluster_*, h3_arrive_other, h3_tma_both)
H3_DI int h3ws_sreg_cluster() {
  int r;
  asm("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  return r;
}
H3_DI int h3ws_sreg_clusters() {
  int r;
  asm("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
  return r;
}

// The producer (file comment): fills the stages with the block's k-steps in order.
template <bool GU>
H3_DI void h3ws_produce(const h3_tmap *tb, const h3_bf16 *xs, const int *lists, const int *counts,
                        long long T, long long H, long long F, int k, int E, unsigned rank,
                        unsigned base, unsigned full, unsigned empty) {
  const int p = threadIdx.x, lr = p >> 3, nt = (int)(GU ? F / 128 : H / 256);
  const long long K = GU ? H : F;
  const int nk = (int)(K / H3W_BK), U = h3ws_units(counts, E);
  const unsigned at = lr * 128 + (((p & 7) ^ (lr & 7)) << 4); // chunk p % 8 of row lr, swizzled
  const h3_bf16 *xc = xs + (p & 7) * 8;
  if (p == 0) h3_prefetch_map(tb);
  int it = 0;
  for (int u = h3ws_sreg_cluster(); u < U * nt; u += h3ws_sreg_clusters()) {
    const h3ws_tile t = h3ws_tile_at(counts, E, u % U, rank);
    const int j = u / U;
    int row[H3W_BM / 16]; // the A row (of xs) of tile row lr + 16 q; -1: past the count
#pragma unroll
    for (int q = 0; q < H3W_BM / 16; q++) {
      const int m = t.m0 + lr + 16 * q;
      row[q] = -1;
      if (m < t.n) {
        const int ts = lists[(long long)t.e * T + m];
        row[q] = (int)(GU ? H3W_H_ROW(ts) : H3W_ACT_ROW(ts));
      }
    }
    // the tile's two boxes of 128 B rows (gate_up: gate o0.., up F + o0..; down: o0.., o0 + 128..)
    const int b0 = (int)(GU ? t.e * 2 * F + 128ll * j : t.e * H + 256ll * j);
    const int b1 = (int)(GU ? b0 + F : b0 + 128);
    for (int kt = 0; kt < nk; kt++, it++) {
      const int s = it % H3W_STAGES;
      const unsigned st = base + s * H3W_STAGE_BYTES, fb = full + 8 * s;
      if (it >= H3W_STAGES) h3_bar_wait(empty + 8 * s, ((it / H3W_STAGES) - 1) & 1);
      if (p == 0 && t.n == 0) h3_bar_arrive(fb); // beside no m-tile: no B
      else if (p == 0) {
        h3_bar_expect(fb, H3W_B_BYTES); // the B bytes that land here
        if (t.shared) // this block's box, into both blocks
          h3_tma_both(st + H3W_A_BYTES + rank * (H3W_B_BYTES / 2), tb, kt * H3W_BK, rank ? b1 : b0, fb);
        else {
          h3_tma(st + H3W_A_BYTES, tb, kt * H3W_BK, b0, fb);
          h3_tma(st + H3W_A_BYTES + H3W_B_BYTES / 2, tb, kt * H3W_BK, b1, fb);
        }
      }
      const h3_bf16 *xk = xc + (long long)kt * H3W_BK;
#pragma unroll
      for (int q = 0; q < H3W_BM / 16; q++)
        h3ws_cp16(st + at + 16 * 128 * q, row[q] < 0 ? xs : xk + (long long)row[q] * K, row[q] >= 0);
      h3ws_cp_arrive(fb);
    }
  }
  h3_cp_wait();
}

// The consumers (file comment): warpgroup w = 0, 1 of them computes tile rows 64w .. 64w + 63.
template <bool GU>
H3_DI void h3ws_consume(const int *lists, const int *counts, h3_bf16 *out, long long T, long long H,
                        long long F, int k, int E, float alpha, float limit, unsigned rank,
                        unsigned base, unsigned full, unsigned empty) {
  const int w = (threadIdx.x >> 7) - 1, lane = threadIdx.x & 31, nt = (int)(GU ? F / 128 : H / 256);
  const long long K = GU ? H : F;
  const int nk = (int)(K / H3W_BK), U = h3ws_units(counts, E);
  const unsigned long long da = h3_wg_desc(base + w * 64 * 128, 16, 1024);
  const unsigned long long db = h3_wg_desc(base + H3W_A_BYTES, 16, 1024);
  // this warp is done with the stage of k-step i: lane 0 arrives on its empty barrier in both
  // blocks
  auto release = [&](int i) {
    if (lane == 0) {
      const unsigned eb = empty + 8 * (i % H3W_STAGES);
      h3_bar_arrive(eb);
      h3_arrive_other(eb, rank);
    }
  };
  float d[128];
  int it = 0;
  for (int u = h3ws_sreg_cluster(); u < U * nt; u += h3ws_sreg_clusters()) {
    const h3ws_tile t = h3ws_tile_at(counts, E, u % U, rank);
    const int j = u / U;
    if (64 * w >= t.n - t.m0) { // this warpgroup's rows are all past the count: no wgmma
      for (int kt = 0; kt < nk; kt++, it++) {
        h3_bar_wait(full + 8 * (it % H3W_STAGES), (it / H3W_STAGES) & 1);
        release(it);
      }
      continue;
    }
    for (int kt = 0; kt < nk; kt++, it++) {
      const int s = it % H3W_STAGES;
      h3_bar_wait(full + 8 * s, (it / H3W_STAGES) & 1);
      h3_fence_async_smem();
      h3w_kstep(d, da, db, s * H3W_STAGE_BYTES, kt == 0);
      h3_wg_wait<1>(); // this warpgroup's wgmmas of k-step it - 1 are retired
      if (kt > 0) release(it - 1);
    }
    h3_wg_wait<0>();
    h3_wg_hold<128>(d);
    release(it - 1);
    const int *rows = lists + (long long)t.e * T;
    if constexpr (GU) h3w_store_act(d, out, F, rows, t.m0, t.n, k, 128ll * j, w, alpha, limit);
    else h3w_store_y(d, out, H, rows, t.m0, t.n, k, 256ll * j, w);
  }
}

// The block (file comment): barriers, then the producer or a consumer warpgroup.
template <bool GU>
H3_DI void h3ws_gemm(const h3_tmap *tb, const h3_bf16 *xs, const int *lists, const int *counts,
                     h3_bf16 *out, long long T, long long H, long long F, int k, int E, float alpha,
                     float limit) {
  H3_DYN_SMEM(unsigned char, h3ws_smem);
  __shared__ unsigned long long bars[2 * H3W_STAGES]; // full[s], then empty[s]
  const unsigned base = (h3_smem_addr(h3ws_smem) + 1023u) & ~1023u; // atoms 1024-aligned
  const unsigned full = h3_smem_addr(bars), empty = full + 8 * H3W_STAGES, rank = h3_cluster_rank();
  if (threadIdx.x == 0) {
    for (int s = 0; s < H3W_STAGES; s++) {
      h3_bar_init(full + 8 * s, H3WS_FULL_ARRIVALS);
      h3_bar_init(empty + 8 * s, H3WS_EMPTY_ARRIVALS);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    h3_fence_async_smem();
  }
  h3_cluster_sync(); // both blocks' barriers are set before either block signals the other's
  if (threadIdx.x < 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 56;\n" ::: "memory");
    h3ws_produce<GU>(tb, xs, lists, counts, T, H, F, k, E, rank, base, full, empty);
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 224;\n" ::: "memory");
    h3ws_consume<GU>(lists, counts, out, T, H, F, k, E, alpha, limit, rank, base, full, empty);
  }
  h3_cluster_sync(); // the other block's last arrivals on this one's barriers are in
}

#ifdef H3_MOE_WGMMA_NAME
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(H3WS_THREADS, 1)
    H3_MOE_WGMMA_NAME(const __grid_constant__ h3_tmap tb, H3_MOE_GEMM_PARAMS) {
  h3ws_gemm<true>(&tb, h, lists, counts, act, T, H, F, k, E, alpha, limit); // gu: through tb
}
#endif

#ifdef H3_MOE_WGMMA_DOWN_NAME
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(H3WS_THREADS, 1)
    H3_MOE_WGMMA_DOWN_NAME(const __grid_constant__ h3_tmap tb, H3_MOE_GEMM_DOWN_PARAMS) {
  h3ws_gemm<false>(&tb, act, lists, counts, y, T, H, F, k, E, 0.0f, 0.0f); // down: through tb
}
#endif

// ---- the first form (H3_MOE_GEMM=wgmma1) ----
#define H3W1_THREADS 256
#define H3W1_A_LOADS (H3W_BM / 32) // 16-byte chunks of A per thread and stage
#define H3W1_B_LOADS (H3W_BN / 32)

// One stage at k0: this thread's 16-byte chunk (tid % 8) of tile rows tid / 8 + 32 i of A
// (xa[i]; null: a row past the count, left zero) and of B (wb[i]); `at`: its byte offset in
// the first such row (the swizzled chunk).
H3_DI void h3w1_load(unsigned char *st, const h3_bf16 *const *xa, const h3_bf16 *const *wb,
                     long long k0, int at) {
#pragma unroll
  for (int i = 0; i < H3W1_A_LOADS; i++)
    if (xa[i]) h3_cp16(reinterpret_cast<uint4 *>(st + at + 32 * 128 * i), xa[i] + k0);
#pragma unroll
  for (int i = 0; i < H3W1_B_LOADS; i++)
    h3_cp16(reinterpret_cast<uint4 *>(st + H3W_A_BYTES + at + 32 * 128 * i), wb[i] + k0);
}

// d = A · B^T over K (a multiple of 64) for this thread's accumulators (file
// comment); xa[i], wb[i]: this thread's chunks (h3w1_load) at k = 0; sm: the 1024-aligned
// stages.
H3_DI void h3w1_mainloop(const h3_bf16 *const *xa, const h3_bf16 *const *wb, long long K,
                         unsigned char *sm, float *d) {
  const int tid = threadIdx.x, lr = tid >> 3, wg = tid >> 7;
  const int at = lr * 128 + (((tid & 7) ^ (lr & 7)) * 16);
  const int nk = (int)(K / H3W_BK);
  const uint4 z = {0u, 0u, 0u, 0u};
  for (int s = 0; s < H3W_STAGES; s++)
#pragma unroll
    for (int i = 0; i < H3W1_A_LOADS; i++)
      if (!xa[i]) *reinterpret_cast<uint4 *>(sm + s * H3W_STAGE_BYTES + at + 32 * 128 * i) = z;
#pragma unroll
  for (int s = 0; s < H3W_STAGES - 1; s++) {
    if (s < nk) h3w1_load(sm + s * H3W_STAGE_BYTES, xa, wb, (long long)s * H3W_BK, at);
    h3_cp_commit();
  }
  const unsigned base = h3_smem_addr(sm);
  const unsigned long long da = h3_wg_desc(base + wg * 64 * 128, 16, 1024);
  const unsigned long long db = h3_wg_desc(base + H3W_A_BYTES, 16, 1024);
  for (int kt = 0; kt < nk; kt++) {
    h3_cp_wait_pending<H3W_STAGES - 2>();
    h3_fence_async_smem();
    __syncthreads(); // every thread's copies of k-step kt are in
    h3w_kstep(d, da, db, (kt % H3W_STAGES) * H3W_STAGE_BYTES, kt == 0);
    h3_wg_wait<1>(); // this warpgroup's wgmmas of k-step kt - 1 are retired
    __syncthreads(); // so are the other's: the stage of kt - 1 is free
    const int nx = kt + H3W_STAGES - 1;
    if (nx < nk)
      h3w1_load(sm + (nx % H3W_STAGES) * H3W_STAGE_BYTES, xa, wb, (long long)nx * H3W_BK, at);
    h3_cp_commit();
  }
  h3_wg_wait<0>();
  h3_wg_hold<128>(d);
}

// This block's tile (returns when its slot has none): rows of its expert e from m0 of the
// list (n in all) and d of this thread, the products of A rows xs + xrow_of(list entry) * K
// and B rows ws + wrow_of(r) * K (r: the tile's B row).
#define H3W1_TILE(xs, K, xrow_of, ws, wrow_of)                                              \
  H3_DYN_SMEM(unsigned char, smem_raw);                                                      \
  int e, m0;                                                                                 \
  if (!h3_moe_tile(counts, E, blockIdx.x, H3W_BM, &e, &m0)) return;                          \
  const int *rows = lists + (long long)e * T, n = counts[e];                                 \
  const h3_bf16 *xa[H3W1_A_LOADS], *wb[H3W1_B_LOADS]; /* tile rows tid / 8 + 32 i */         \
  const int lr = threadIdx.x >> 3, c8 = (threadIdx.x & 7) * 8;                               \
  for (int i = 0; i < H3W1_A_LOADS; i++)                                                     \
    xa[i] = m0 + lr + 32 * i < n ? xs + xrow_of(rows[m0 + lr + 32 * i]) * K + c8 : nullptr;  \
  for (int i = 0; i < H3W1_B_LOADS; i++) wb[i] = ws + (wrow_of(lr + 32 * i)) * K + c8;       \
  unsigned char *sm = smem_raw + ((1024u - (h3_smem_addr(smem_raw) & 1023u)) & 1023u);       \
  float d[128];                                                                              \
  h3w1_mainloop(xa, wb, K, sm, d);

#ifdef H3_MOE_WGMMA1_NAME
#define H3W1_GU_ROW(r) ((long long)e * 2 * F + ((r) < 128 ? o0 + (r) : F + o0 + (r) - 128))
extern "C" __global__ void __launch_bounds__(H3W1_THREADS, 1)
    H3_MOE_WGMMA1_NAME(H3_MOE_GEMM_PARAMS) {
  const long long o0 = (long long)blockIdx.y * 128;
  H3W1_TILE(h, H, H3W_H_ROW, gu, H3W1_GU_ROW)
  h3w_store_act(d, act, F, rows, m0, n, k, o0, threadIdx.x >> 7, alpha, limit);
}
#undef H3W1_GU_ROW
#endif

#ifdef H3_MOE_WGMMA1_DOWN_NAME
#define H3W1_DOWN_ROW(r) ((long long)e * H + o0 + (r))
extern "C" __global__ void __launch_bounds__(H3W1_THREADS, 1)
    H3_MOE_WGMMA1_DOWN_NAME(H3_MOE_GEMM_DOWN_PARAMS) {
  const long long o0 = (long long)blockIdx.y * H3W_BN;
  H3W1_TILE(act, F, H3W_ACT_ROW, down, H3W1_DOWN_ROW)
  h3w_store_y(d, y, H, rows, m0, n, k, o0, threadIdx.x >> 7);
}
#undef H3W1_DOWN_ROW
#endif
#endif // H3_HOST_EMU
