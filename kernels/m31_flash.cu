// m31_flash.cu: MiniMax-M3.1's paged (kind 0) and sparse (kind 2) attention for many rows of ONE
// sequence (prefill / extend) on Hopper's warpgroup MMA: h3's flash-attention forward
// (flash_attention.cu: TMA, mbarriers, a producer and two ping-ponging consumer warpgroups)
// with GQA packed into the MMA rows, key tiles read through the page table and masked per row.
// Compiled with NVRTC for sm_90a; the host side is runtime/cuda/cuda_m31_flash.c.
// Contract: m31_msa_tile.cu's H3_KV_ATT_TILE_NAME for the shapes the host hands it:
//   h3cu_m31_flash (tk, tv: TMA maps of kc, vc [P, 128, Hk, 128] bf16 seen as 2D
//     [P * 128, Hk * 128]; q[T, Hq, 128] bf16, pos[T], pt[NP], sel[T, Hk, topk] i32 (sel unused
//     by kind 0); c = scale * log2(e), scale > 0) -> o[T, Hq, 128] bf16, Hq = 16 Hk, page = sparse
//     block = 128, 1 <= topk <= H3MF_MAX_TOPK. Row t's keys for the q heads of kv head h: kind 0
//     positions 0..pos[t]; kind 2 the positions j <= pos[t] of the blocks sel[t, h] (any order,
//     -1 skipped, a block listed twice counts once). Cached position j is row
//     pt[j / 128] * 128 + j % 128 of the caches. s_j = q · k_j; online softmax in base 2
//     (p = 2^((s - m) c), ex2.approx), P rounded to bf16 for P V, l the sum of the unrounded p,
//     o = acc / l rounded once to bf16; 0 for a row without keys. Rows past T: not written.
// Grid (ceil(T / 8) Hk), 384 threads, one block per SM. Block x takes kv head x % Hk and query
// rows t0 = 8 (G - 1 - x / Hk) .. t0 + 7 (G = gridDim.x / Hk): the last rows, with the most keys
// in a prefill, start first. Its 128 MMA rows are (row, q head) pairs: M row 16 r + i is row
// t0 + r, q head 16 kvh + i. So the 16 q heads of a kv head share each K / V tile, and a
// block's rows are 8 adjacent ones, whose sparse selections nearly agree: the union of blocks
// it visits stays close to one row's 16 (with 128 rows per block it would grow several-fold).
// Key tiles: 128 keys = one page = one sparse block. Tile u of the block holds the keys of
// block b(u): kind 0 b(u) = u, u < maxpos / 128 + 1 (maxpos: the largest position of its rows);
// kind 2 the union of the blocks its rows selected (each only where it starts at or before
// that row's position), ascending, deduplicated, each with the mask of the rows that chose it:
// built in the prologue (h3mf_setup) in static shared memory from the 8 x topk selections. Row
// r (position p) keeps key k of tile u when k <= lim = p - 128 b(u) and it chose b(u) (kind 0:
// always); its other scores are replaced by -inf before the softmax (a select: a NaN score of
// a key that is not the row's is dropped too). Keys past maxpos (only in the block's last
// tile) may be unwritten cache slots: their V rows are zeroed in shared memory before P V
// (p = 0 times a NaN would still be NaN).
// Block: 3 warpgroups, FlashAttention-3's layout as in flash_attention.cu:
//   producer (warpgroup 0, 40 registers): thread 0 issues K and V of tile u by TMA (boxes of
//     64 columns x 128 rows at column 128 kvh (+ 64), row pt[b(u)] * 128) into stage u % 3 once
//     the consumers released tile u - 3; warps 1-3 gather Q (first thing, under the prologue's
//     reads): 16-byte chunk ch of M row m from q[t0 + m / 16, 16 kvh + m % 16, 8 ch ..] by
//     cp.async (zeros past T) into the 128-byte swizzle that TMA would write, then one
//     cp.async.mbarrier.arrive.noinc each on "Q full";
//   consumers (warpgroups 1, 2, 232 registers): warpgroup 1 + w owns M rows [64w, 64w + 64),
//     i.e. rows t0 + 4w .. t0 + 4w + 3: warp v of it has row r = 4w + v, lane 4g + e its q heads
//     g and g + 8. Flash's loop (S = Q K^T as 8 wgmma m64n128k16 from shared memory; m' = max(m,
//     rowmax S); O, l scaled by 2^((m - m') c); P = 2^((S - m') c); O += P V as 8 wgmma with P
//     in registers), a running maximum of -inf (no key yet) subtracted as 0.
// Schedule (flash's): turn j of a consumer issues S(j) and O += P(j-1) V(j-1), waits for S(j)
// only and computes the softmax of tile j while P(j-1) V(j-1) runs; the two consumers take
// turns to issue (named barriers 1 and 2), so one's softmax runs under the other's matrix work.
// A block without tiles (every row without keys) issues nothing and writes zeros.
// Synchronisation: mbarriers in shared memory. "Q full": 96 arrivals (producer warps 1-3, each
// once its cp.async have landed); consumers wait for parity 0, then fence.proxy.async (generic
// writes read by wgmma). K[s], V[s] "full": 1 arrival (the producer's expect_tx) + the TMA bytes;
// tile j waits for parity (j / 3) & 1. "Empty"[s]: 8 arrivals (lane 0 of each consumer warp once
// its P V of the tile finished); the producer waits for parity ((j / 3) - 1) & 1 before loading
// tile j >= 3 into it. The V rows zeroed before the last P V: each consumer warpgroup writes the
// zeros itself, fence.proxy.async, named barrier 3 + w (128 threads), then its wgmma (the other
// warpgroup writes the same zeros: the bytes only ever go to 0).
// Shared memory (dynamic 225 KiB, cuda_m31_flash.c's FLASH_SMEM, with 1 KiB of slack to align
// the base to 1024 bytes; static 1280 bytes: one block per SM): Q [128][128]
// and 3 stages of K, V [128][128], each tile two [128][64] halves (columns 0-63, 64-127) whose
// row r is 128 bytes with 16-byte chunk ch at chunk ch ^ (r & 7) (TMA's 128B swizzle, the layout
// the wgmma descriptors read); the rows' positions and the kind-2 tile lists (h3mf_tiles).
// Cost (H200, Hk = 4, page 128; a tile = 8.4 MFLOP of MMA, ~1.8 us of an SM at flash's measured
// 616 TFLOP/s; ~3-4 us per block of fixed cost: positions, Q, the pipeline's fill and drain):
// prefill 2048 from 0: 1024 blocks, 8704 tiles (68.7 GFLOP of causal work + the masked halves of
// the diagonal tiles): 8704 x 1.8 / 132 + 1024 x 3.5 / 132 ~ 0.15 ms (kind 2, every causal block
// selected: + the union, ~0.16 ms); 16k prompt, kind 2: 8192 blocks of U tiles (U: the union of
// 8 adjacent rows' 16 blocks), ~U x 0.11 + 0.25 ms (U = 16: ~2 ms); 128 rows at 3000: 64 blocks
// of 25 tiles (half the SMs), ~0.05 ms.
// One variant, no macros (the host's H3_M31_ATTENTION=tile picks m31_msa_tile.cu instead); the
// wgmma helpers below repeat flash_attention.cu's.
#define H3MF_ROWS 8        // query rows per block
#define H3MF_BM 128        // MMA rows: H3MF_ROWS x 16 q heads
#define H3MF_BN 128        // keys per tile: one page, one sparse block
#define H3MF_HD 128
#define H3MF_STAGES 3
#define H3MF_MAX_TOPK 16   // H3MF_ROWS x H3MF_MAX_TOPK selections <= 128 threads of the prologue
#define H3MF_SEL (H3MF_ROWS * H3MF_MAX_TOPK)
#define H3MF_TILE_BYTES (H3MF_BN * H3MF_HD * 2)
#define H3MF_HALF_BYTES (H3MF_TILE_BYTES / 2)
#define H3MF_INF __int_as_float(0x7f800000) /* NVRTC has no INFINITY */

// What a block's rows share (static shared memory, written by h3mf_setup)
// (kind 2: ent[i] is selection i % topk of row i / topk where that block starts at or before
// the row's position, else -1; first: bit i set when ent[i] is its block's first entry; blk:
// b(u) ascending; rows: bit r set when row t0 + r chose blk[u])
struct h3mf_tiles {
  int pos[H3MF_ROWS]; // the rows' positions, -1 past T
  int ent[H3MF_SEL];
  unsigned first[H3MF_SEL / 32];
  int blk[H3MF_SEL];
  unsigned char rows[H3MF_SEL];
};

// ---- named barriers: ids 1, 2 the consumers' turns (the prelude's h3_turn_wait / _pass, 256
// threads), 3 + w warpgroup w's own; the products and 2^x: the prelude's h3_wgmma128_* and
// h3_exp2_approx ----
__device__ __forceinline__ void h3mf_wg_sync(int id) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(id) : "memory");
}
// 16 bytes from src into shared memory at dst by cp.async; zeros where !live (nothing read)
__device__ __forceinline__ void h3mf_cp16(unsigned dst, const void *src, bool live) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(live ? 16 : 0) : "memory");
}
// an arrival on bar (counted in its arrivals: .noinc) once this thread's cp.async have landed
__device__ __forceinline__ void h3mf_cp_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void h3mf_zero16(unsigned dst) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};\n" ::"r"(dst), "r"(0) : "memory");
}

// The block's rows and tiles (every thread calls it: barriers): ts.pos, *maxpos (-1: no row),
// and for kind 2 the tile list; returns the tile count n. Kind 2: thread i < 8 topk takes
// selection i; the first entry of each block goes to its rank among the distinct blocks.
__device__ __forceinline__ int h3mf_setup(h3mf_tiles &ts, const int *pos, const int *sel, int kind,
                                          int T, int t0, int Hk, int kvh, int topk, int *maxpos) {
  const int tid = threadIdx.x;
  if (tid < H3MF_ROWS) ts.pos[tid] = t0 + tid < T ? pos[t0 + tid] : -1;
  __syncthreads();
  int mp = -1;
#pragma unroll
  for (int r = 0; r < H3MF_ROWS; r++) mp = max(mp, ts.pos[r]);
  *maxpos = mp;
  if (kind != 2) return mp >= 0 ? mp / H3MF_BN + 1 : 0;
  const int n = H3MF_ROWS * topk;
  int v = -1;
  if (tid < n) {
    const int r = tid / topk, p = ts.pos[r];
    if (p >= 0) {
      const int b = sel[((long long)(t0 + r) * Hk + kvh) * topk + tid % topk];
      v = b >= 0 && (long long)b * H3MF_BN <= p ? b : -1;
    }
    ts.ent[tid] = v;
  }
  __syncthreads();
  bool dup = false; // no early exit: the loads pipeline
  for (int j = 0, e = v >= 0 ? tid : 0; j < e; j++) dup |= ts.ent[j] == v;
  const bool first = v >= 0 && !dup;
  const unsigned fw = __ballot_sync(0xffffffffu, first);
  if (tid < H3MF_SEL && (tid & 31) == 0) ts.first[tid >> 5] = fw;
  __syncthreads();
  if (first) {
    int rank = 0;
    unsigned rows = 0;
    for (int r = 0, j = 0; r < H3MF_ROWS; r++)
      for (int k = 0; k < topk; k++, j++) {
        const int e = ts.ent[j];
        rank += (ts.first[j >> 5] >> (j & 31) & 1) && e < v;
        rows |= e == v ? 1u << r : 0u;
      }
    ts.blk[rank] = v;
    ts.rows[rank] = (unsigned char)rows;
  }
  __syncthreads();
  int nt = 0;
#pragma unroll
  for (int w = 0; w < H3MF_SEL / 32; w++) nt += __popc(ts.first[w]);
  return nt;
}

// online softmax of one S tile, this thread's M rows 16·warp + lane/4 (+8) of its warpgroup
// (the same query row, q heads lane/4 and lane/4 + 8): s[4n + e] is key 8n + 2·(lane%4) +
// (e & 1) (row +8 for e >= 2); keys past lim are not the row's (-inf). Updates the row maxima m
// and sums l (this thread's part), leaves P = 2^((S - m')·c) in s and the factors
// 2^((m - m')·c) of the old O rows in corr; a maximum of -inf (no key yet) is subtracted as 0.
__device__ __forceinline__ void h3mf_softmax(float *s, float *m, float *l, float *corr, int lim,
                                             int lane, float c) {
  if (lim < H3MF_BN - 1) {
#pragma unroll
    for (int n = 0; n < 16; n++)
#pragma unroll
      for (int e = 0; e < 4; e++)
        if (n * 8 + 2 * (lane & 3) + (e & 1) > lim) s[4 * n + e] = -H3MF_INF;
  }
  float mx[2] = {m[0], m[1]}, ms[2];
#pragma unroll
  for (int n = 0; n < 16; n++) {
    mx[0] = fmaxf(mx[0], fmaxf(s[4 * n], s[4 * n + 1]));
    mx[1] = fmaxf(mx[1], fmaxf(s[4 * n + 2], s[4 * n + 3]));
  }
#pragma unroll
  for (int r = 0; r < 2; r++) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    const float mu = mx[r] == -H3MF_INF ? 0.0f : mx[r];
    corr[r] = h3_exp2_approx((m[r] - mu) * c);
    m[r] = mx[r];
    ms[r] = mu * c;
  }
  float l0 = 0.0f, l1 = 0.0f;
#pragma unroll
  for (int n = 0; n < 16; n++) {
    s[4 * n] = h3_exp2_approx(fmaf(s[4 * n], c, -ms[0]));
    s[4 * n + 1] = h3_exp2_approx(fmaf(s[4 * n + 1], c, -ms[0]));
    s[4 * n + 2] = h3_exp2_approx(fmaf(s[4 * n + 2], c, -ms[1]));
    s[4 * n + 3] = h3_exp2_approx(fmaf(s[4 * n + 3], c, -ms[1]));
    l0 += s[4 * n] + s[4 * n + 1];
    l1 += s[4 * n + 2] + s[4 * n + 3];
  }
  l[0] = l[0] * corr[0] + l0;
  l[1] = l[1] * corr[1] + l1;
}
// P as the A operand of P·V: keys 16kk.. of rows lane/4 and lane/4 + 8 in p[4kk .. 4kk + 3]
__device__ __forceinline__ void h3mf_pack_p(unsigned *p, const float *s) {
#pragma unroll
  for (int i = 0; i < 32; i++) p[i] = h3_bf16x2(s[2 * i], s[2 * i + 1]);
}
// S = Q·K(stage)ᵀ: 8 k-steps of 16 dims (two 32-byte steps per 64-column half)
__device__ __forceinline__ void h3mf_qk(float *s, unsigned long long dq, unsigned long long dk) {
#pragma unroll
  for (int kk = 0; kk < 8; kk++) {
    const unsigned long long off = (unsigned long long)((((kk >> 2) << 14) + (kk & 3) * 32) >> 4);
    h3_wgmma128_ss(s, dq + off, dk + off, kk > 0);
  }
}
// O += P·V(stage): 8 k-steps of 16 keys (2048 bytes each)
__device__ __forceinline__ void h3mf_pv(float *acc, const unsigned *p, unsigned long long dv) {
#pragma unroll
  for (int kk = 0; kk < 8; kk++)
    h3_wgmma128_rs(acc, p + 4 * kk, dv + (unsigned long long)(kk * (2048 >> 4)));
}

extern "C" __global__ void __launch_bounds__(384, 1) h3cu_m31_flash(
    const __grid_constant__ h3_tmap tk, const __grid_constant__ h3_tmap tv,
    const h3_bf16 *__restrict__ q, const int *__restrict__ pos, const int *__restrict__ pt,
    const int *__restrict__ sel, h3_bf16 *__restrict__ o, int kind, int T, int Hk, int topk,
    float c) {
  extern __shared__ unsigned char h3mf_smem_raw[];
  // mbarriers: Q; K and V of each stage full; each stage empty
  __shared__ unsigned long long h3mf_bars[1 + 3 * H3MF_STAGES];
  __shared__ h3mf_tiles ts;
  const unsigned sq = (h3_smem_addr(h3mf_smem_raw) + 1023u) & ~1023u; // atoms 1024-aligned
  const unsigned skv = sq + H3MF_BM * H3MF_HD * 2; // stage s: K at skv + 2s·TILE, V one TILE on
  const unsigned bq = h3_smem_addr(h3mf_bars), bk = bq + 8, bv = bk + 8 * H3MF_STAGES,
                 be = bv + 8 * H3MF_STAGES;
  const int tid = threadIdx.x, wg = tid >> 7;
  const int G = (int)(gridDim.x / Hk), kvh = (int)(blockIdx.x % Hk);
  const int t0 = (G - 1 - (int)(blockIdx.x / Hk)) * H3MF_ROWS, kvcol = kvh * H3MF_HD;
  if (tid == 0) {
    h3_bar_init(bq, 96);
    for (int i = 0; i < H3MF_STAGES; i++) {
      h3_bar_init(bk + 8 * i, 1);
      h3_bar_init(bv + 8 * i, 1);
      h3_bar_init(be + 8 * i, 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  if (tid >= 32 && tid < 128) {
    // producer warps 1-3: Q, chunk ch of M row m (row t0 + m / 16, q head 16 kvh + m % 16) at
    // its swizzled place, issued before the prologue reads positions and selections
    const long long Hq = 16ll * Hk;
    for (int i = tid - 32; i < H3MF_BM * 16; i += 96) {
      const int m = i >> 4, ch = i & 15, t = t0 + (m >> 4);
      const unsigned dst = sq + (ch >> 3) * H3MF_HALF_BYTES + m * 128 + (((ch & 7) ^ (m & 7)) << 4);
      const bool live = t < T;
      const h3_bf16 *src = q + ((long long)t * Hq + 16 * kvh + (m & 15)) * H3MF_HD + 8 * ch;
      h3mf_cp16(dst, live ? src : q, live);
    }
  }
  int maxpos;
  const int n_tiles = h3mf_setup(ts, pos, sel, kind, T, t0, Hk, kvh, topk, &maxpos);
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (tid == 0) {
      // tile j into stage j % 3 once the consumers released tile j - 3 (their ((j / 3) - 1)-th
      // release of that stage)
      h3_prefetch_map(&tk);
      h3_prefetch_map(&tv);
      for (int j = 0; j < n_tiles; j++) {
        const int st = j % H3MF_STAGES;
        if (j >= H3MF_STAGES) h3_bar_wait(be + 8 * st, ((j / H3MF_STAGES) - 1) & 1);
        const int row = pt[kind == 2 ? ts.blk[j] : j] * H3MF_BN;
        const unsigned dk = skv + 2u * H3MF_TILE_BYTES * st, dv = dk + H3MF_TILE_BYTES;
        h3_bar_expect(bk + 8 * st, H3MF_TILE_BYTES);
        h3_tma(dk, &tk, kvcol, row, bk + 8 * st);
        h3_tma(dk + H3MF_HALF_BYTES, &tk, kvcol + 64, row, bk + 8 * st);
        h3_bar_expect(bv + 8 * st, H3MF_TILE_BYTES);
        h3_tma(dv, &tv, kvcol, row, bv + 8 * st);
        h3_tma(dv + H3MF_HALF_BYTES, &tv, kvcol + 64, row, bv + 8 * st);
      }
    } else if (tid >= 32) {
      h3mf_cp_arrive(bq); // once this thread's Q chunks have landed
      h3_cp_wait();
    }
  } else {
    // consumer warpgroup cw owns M rows [64cw, 64cw + 64): warp v the query row t0 + 4cw + v.
    // Ping-pong: a warpgroup issues its wgmmas only in its turn (named barrier 1 + cw) and then
    // hands the turn to the other.
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int cw = wg - 1, warp = (tid >> 5) & 3, lane = tid & 31;
    const int mine = 1 + cw, other = 2 - cw, r = 4 * cw + warp, p = ts.pos[r];
    // descriptors: Q of this warpgroup (K-major; SBO = 8 rows of 128 bytes), K of stage 0
    // (K-major), V of stage 0 (N-major: LBO = the next 64 columns, SBO = the next 8 keys);
    // stage s adds 2s·TILE bytes (in descriptor units of 16 bytes)
    const unsigned long long dq = h3_wg_desc(sq + cw * 64 * 128, 16, 1024);
    const unsigned long long dk = h3_wg_desc(skv, 16, 1024);
    const unsigned long long dv = h3_wg_desc(skv + H3MF_TILE_BYTES, H3MF_BN * 128, 1024);
    auto stage = [](int tile) {
      return (unsigned long long)((2u * H3MF_TILE_BYTES * (tile % H3MF_STAGES)) >> 4);
    };
    auto parity = [](int tile) { return (unsigned)((tile / H3MF_STAGES) & 1); };
    // the block id of tile u, and the last of its keys that are this row's (below 0: none)
    auto block_of = [&](int u) { return kind == 2 ? ts.blk[u] : u; };
    auto lim = [&](int u) {
      return kind == 2 && !(ts.rows[u] >> r & 1) ? -1 : p - H3MF_BN * block_of(u);
    };
    float acc[64], s[64], corr[2];
    unsigned pk[32];
    float mrow[2] = {-H3MF_INF, -H3MF_INF}, lrow[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = 0.0f;
    if (n_tiles > 0) {
      // n_tiles + 1 turns per warpgroup (S(0); S(j) with P(j-1)·V(j-1); P(n-1)·V(n-1));
      // warpgroup 0 goes first: warpgroup 1 opens its barrier once and skips its last pass
      if (cw == 1) h3_turn_pass(1);
      h3_bar_wait(bq, 0);
      h3_fence_async_smem(); // Q came by cp.async (generic proxy); wgmma reads it (async)
      h3_bar_wait(bk, 0);
      h3_turn_wait(mine);
      h3_wg_fence();
      h3mf_qk(s, dq, dk);
      h3_wg_commit();
      h3_turn_pass(other);
      h3_wg_wait<0>();
      h3_wg_hold<64>(s);
      h3mf_softmax(s, mrow, lrow, corr, lim(0), lane, c);
      h3mf_pack_p(pk, s);
      // turn j: S(j) and P(j-1)·V(j-1) in flight together; the softmax of tile j overlaps
      // P(j-1)·V(j-1) and the other warpgroup's turn
      for (int j = 1; j < n_tiles; j++) {
        const int lj = lim(j);
        h3_bar_wait(bk + 8 * (j % H3MF_STAGES), parity(j));
        h3_bar_wait(bv + 8 * ((j - 1) % H3MF_STAGES), parity(j - 1));
        h3_turn_wait(mine);
        h3_wg_fence();
        h3mf_qk(s, dq, dk + stage(j));
        h3_wg_commit();
        h3mf_pv(acc, pk, dv + stage(j - 1));
        h3_wg_commit();
        h3_turn_pass(other);
        h3_wg_wait<1>();
        h3_wg_hold<64>(s);
        h3mf_softmax(s, mrow, lrow, corr, lj, lane, c);
        h3_wg_wait<0>();
        h3_wg_hold<64>(acc);
        if (lane == 0) h3_bar_arrive(be + 8 * ((j - 1) % H3MF_STAGES)); // done with tile j-1
#pragma unroll
        for (int n = 0; n < 16; n++) {
          acc[4 * n] *= corr[0];
          acc[4 * n + 1] *= corr[0];
          acc[4 * n + 2] *= corr[1];
          acc[4 * n + 3] *= corr[1];
        }
        h3mf_pack_p(pk, s);
      }
      const int last = n_tiles - 1, vlim = maxpos - H3MF_BN * block_of(last);
      h3_bar_wait(bv + 8 * (last % H3MF_STAGES), parity(last));
      if (vlim < H3MF_BN - 1) {
        // V rows vlim + 1 .. 127 of the last tile (past every row's position: maybe unwritten
        // cache slots) to zeros, both halves, by this warpgroup's 128 threads
        const unsigned vs = skv + 2u * H3MF_TILE_BYTES * (last % H3MF_STAGES) + H3MF_TILE_BYTES;
        for (int i = tid & 127; i < (H3MF_BN - 1 - vlim) * 16; i += 128) {
          const int key = vlim + 1 + (i >> 4), ch = i & 15;
          h3mf_zero16(vs + (ch >> 3) * H3MF_HALF_BYTES + key * 128 + (ch & 7) * 16);
        }
        h3_fence_async_smem();
        h3mf_wg_sync(3 + cw);
      }
      h3_turn_wait(mine);
      h3_wg_fence();
      h3mf_pv(acc, pk, dv + stage(last));
      h3_wg_commit();
      if (cw == 0) h3_turn_pass(other);
      h3_wg_wait<0>();
      h3_wg_hold<64>(acc);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
      lrow[i] += __shfl_xor_sync(0xffffffffu, lrow[i], 1);
      lrow[i] += __shfl_xor_sync(0xffffffffu, lrow[i], 2);
    }
    const int t = t0 + r;
    if (t < T) {
      const float inv0 = lrow[0] > 0.0f ? 1.0f / lrow[0] : 0.0f;
      const float inv1 = lrow[1] > 0.0f ? 1.0f / lrow[1] : 0.0f;
      h3_bf16 *og = o + ((long long)t * 16 * Hk + 16 * kvh + (lane >> 2)) * H3MF_HD;
      og += 2 * (lane & 3);
#pragma unroll
      for (int n = 0; n < 16; n++) {
        *reinterpret_cast<unsigned *>(og + n * 8) =
            h3_bf16x2(acc[4 * n] * inv0, acc[4 * n + 1] * inv0);
        *reinterpret_cast<unsigned *>(og + 8 * H3MF_HD + n * 8) =
            h3_bf16x2(acc[4 * n + 2] * inv1, acc[4 * n + 3] * inv1);
      }
    }
  }
}
