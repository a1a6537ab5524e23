// m31_msa_tile.cu: MiniMax-M3.1's paged (kind 0) and sparse (kind 2) attention for many rows
// of ONE sequence (prefill / extend) or of each of several (a batched verify: per = T / R rows
// a sequence), on tensor cores, the keys that a block's rows share read once into shared
// memory. The contract of H3_KV_ATT_MMA_NAME (kernels/m31_msa.cu) with one split and one page
// table (pt [NP], per = 0) or one per sequence (pt [R, NP]: rows b per .. b per + per - 1 read
// row b):
//   H3_KV_ATT_TILE_NAME (q[T, Hq, D] bf16, kc, vc [P, page, Hk, D] bf16, pos[T], pt[NP] or
//     [R, NP], sel[T, Hk, topk] (all IX_T; sel unused by kind 0), per, NP) -> o[T, Hq, D] O_T, D = 128,
//     Hq = 16 Hk, topk <= H3T_MAX_TOPK. Row t's keys for the q heads of kv head h: kind 0
//     positions 0..pos[t]; kind 2 the positions j <= pos[t] of the blocks sel[t, h] (in any
//     order, -1 skipped; a block listed twice counts once, which index_topk never writes).
//     Cached position j is row pt[j / page] * page + j % page of the caches. s_j = (q · k_j) *
//     scale, online softmax with __expf, P rounded to bf16 for P V, l the sum of the unrounded
//     p, o = acc / l rounded once, 0 for a row without keys: H3_KV_ATT_MMA_NAME's numerics
//     (sums in another order).
// Grid (ceil(T / H3T_ROWS) Hk), H3T_THREADS threads. Block x takes kv head x % Hk and rows
// t0 = H3T_ROWS (gridDim.x / Hk - 1 - x / Hk) .. + H3T_ROWS - 1: the last rows, with the most
// keys, start first for every kv head. per > 0: grid (R ceil(per / H3T_ROWS) Hk), block x takes
// tile j = u % tg of sequence b = u / tg (u = x / Hk, tg = ceil(per / H3T_ROWS)): rows b per + 8
// j .. up to its sequence's last. Warp w owns row t0 + w and its 16 q heads as the M = 16 of
// mma.m16n8k16 (lane l = 4 g + c: heads g and g + 8).
// The block walks one stream of keys, the union of its rows' keys (h3t_union): kind 0
// positions 0..P, P its rows' largest position; kind 2 the blocks its rows selected (each
// only where it starts at or before that row's position), sorted and deduplicated in shared
// memory with the mask of the rows that chose each: stream key v is position U[v / page] *
// page + v % page, cut after P. Tiles of H3T_KEYS (64) keys of K and V go into shared memory
// once per block by cp.async (H3T_STAGES = 3 stages: two tiles in flight while one is used;
// a thread moves the 16-byte chunk tid % 16 of keys tid / 16 + 16 i of K and V; keys past the
// stream are zeros). Each tile is a [64][128] bf16 array of 256-byte rows whose 16-byte chunk
// c of row r sits at chunk c ^ (r & 7), so the 8 rows of an ldmatrix phase hit distinct banks.
// Every warp consumes every tile:
//   S = Q K^T: Q in registers (the 8 k-steps' A fragments, natural dim order), K the B operand
//     by ldmatrix.x4 (n = key, k = dim; 32 per tile, each two k-steps of an n-tile);
//   online softmax on the accumulators (lane (g, c): heads g, g + 8 by keys 8 n + 2 c, + 1,
//     n = 0..7, as H3_KV_ATT_MMA_NAME): a key that is not the row's (past its position, of a
//     block it did not select, past the stream) gets p = 0; a tile entirely the row's skips
//     the per-key test;
//   O += P V: the accumulators repacked as the A fragments of 4 k16 steps (P rounded to bf16),
//     V the B operand by ldmatrix.x4.trans (k = key, n = dim; 32 per tile).
// Every warp runs every tile (one with none of its row's keys adds zeros), so each loop holding
// an mma, an ldmatrix, a shuffle or a barrier runs as often in every thread of the block (host
// emulation: tests/codegen/host_emu.h). One block per SM: 220 registers a thread (acc 64, Q 32,
// S 32; no spills), 96 KiB of dynamic shared memory (H3T_SMEM).
// Cost at a prefill of 2048 rows from position 0, Hk = 4, page 128 (kind 2 with every causal
// block selected == kind 0): the block of rows 8 b .. 8 b + 7 reads ceil((b + 1) / 8) tiles of
// 32 KiB (K + V), 4224 tiles per kv head: 4224 x 4 x 32 KiB = 554 MB of L2 reads per layer
// (+ 34 MB of q, 34 MB of o), against ~4.3 GB for H3_KV_ATT_MMA_NAME's one row per warp; and
// 4224 x 4 x 8 warps x 128 mma x 4096 flop = 71 GFLOP of mma.sync (69 of them causal work).
// A tile costs a block 512 ldmatrix.x4 = 256 KiB of shared-memory reads (a K / V byte feeds
// the 16 heads of one row), 2048 cycles at 128 B per cycle, for 4.2 MFLOP: a bound of ~480
// TFLOP/s on the H200; at 50-60 % of it (softmax, barriers) ~0.25-0.3 ms per layer, against
// ~0.93 ms.
// Macros the user defines in front: IX_T, O_T and H3_KV_ATT_TILE_NAME.

#define H3T_INF __int_as_float(0x7f800000) /* NVRTC has no INFINITY */
#define H3T_ROWS 8                           // rows per block, a warp each
#define H3T_THREADS (32 * H3T_ROWS)
#define H3T_KEYS 64                          // keys per tile
#define H3T_STAGES 3
#define H3T_MAX_TOPK 64
#define H3T_MAX_UNION (H3T_ROWS * H3T_MAX_TOPK)
#define H3T_TILE (H3T_KEYS * 128)                 // elements of a K or a V tile
#define H3T_SMEM (H3T_STAGES * 2 * H3T_TILE * 2) // bytes: the stages' K and V tiles

// v / d for 0 <= v: in 32 bits where v fits (several times cheaper than 64)
H3_DI long long h3t_div(long long v, int d) {
  return v <= 0x7fffffff ? (long long)((unsigned)v / (unsigned)d) : v / d;
}

// What the block's rows share, in shared memory: their positions (-1 past T) and, for kind 2,
// the union of their selected blocks (blk ascending, rows: bit w set when row t0 + w chose it)
struct h3t_rows {
  long long pos[H3T_ROWS];
  int ent[H3T_MAX_UNION];             // the rows' selections (h3t_union's scratch)
  unsigned char first[H3T_MAX_UNION]; // ent[i] >= 0 and no earlier entry equal to it
  int blk[H3T_MAX_UNION];
  unsigned char rows[H3T_MAX_UNION];
  int nu;
};

// The block's key stream: nv keys; key v is position v (kind 0) or blk[v / page] * page + v %
// page (kind 2)
struct h3t_stream {
  int kind, page;
  long long nv;
  const int *blk;
  const unsigned char *rows;
};

H3_DI long long h3t_pos(const h3t_stream &s, long long v) {
  if (s.kind == 0) return v;
  const long long u = h3t_div(v, s.page);
  return (long long)s.blk[u] * s.page + (v - u * s.page);
}

// The union of the rows' selections (every thread calls it: barriers): entry i of row i / topk
// is kept when it starts at or before that row's position; each first occurrence of a block
// goes to its rank among the distinct blocks, with the mask of the rows listing it.
H3_DI void h3t_union(h3t_rows &rs, const IX_T *sel, long long t0, int Hk, int kvh, int page, int topk) {
  const int n = H3T_ROWS * topk;
  for (int i = threadIdx.x; i < n; i += H3T_THREADS) {
    const int r = i / topk;
    const long long b = rs.pos[r] >= 0 ? (long long)sel[((t0 + r) * Hk + kvh) * topk + i % topk] : -1;
    rs.ent[i] = b >= 0 && b * page <= rs.pos[r] ? (int)b : -1;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += H3T_THREADS) {
    bool first = rs.ent[i] >= 0;
    for (int j = 0; j < i && first; j++) first = rs.ent[j] != rs.ent[i];
    rs.first[i] = first;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += H3T_THREADS) {
    if (!rs.first[i]) continue;
    int rank = 0;
    unsigned rows = 0;
    for (int j = 0; j < n; j++) {
      rank += rs.first[j] && rs.ent[j] < rs.ent[i];
      rows |= rs.ent[j] == rs.ent[i] ? 1u << (j / topk) : 0u;
    }
    rs.blk[rank] = rs.ent[i], rs.rows[rank] = (unsigned char)rows;
  }
  if (threadIdx.x == 0) {
    int nu = 0;
    for (int j = 0; j < n; j++) nu += rs.first[j];
    rs.nu = nu;
  }
  __syncthreads();
}

// The block's rows and stream (every thread calls it: barriers)
H3_DI h3t_stream h3t_setup(h3t_rows &rs, const IX_T *pos, const IX_T *sel, int kind, long long T,
                           long long t0, int Hk, int kvh, int page, int topk) {
  if (threadIdx.x < H3T_ROWS) rs.pos[threadIdx.x] = t0 + threadIdx.x < T ? (long long)pos[t0 + threadIdx.x] : -1;
  __syncthreads();
  long long last = -1; // the rows' largest position
  for (int r = 0; r < H3T_ROWS; r++) last = rs.pos[r] > last ? rs.pos[r] : last;
  h3t_stream s = {kind, page, last + 1, rs.blk, rs.rows};
  if (kind != 2) return s;
  h3t_union(rs, sel, t0, Hk, kvh, page, topk);
  if (rs.nu == 0) s.nv = 0;
  else {
    const long long tail = last - (long long)rs.blk[rs.nu - 1] * page + 1; // keys of the last block
    s.nv = (long long)(rs.nu - 1) * page + (tail < page ? tail : page);
  }
  return s;
}

// Stream keys ts .. ts + H3T_KEYS - 1 into a stage (its K tile, then its V tile): this
// thread's 16-byte chunk tid % 16 of keys tid / 16 + 16 i (cp.async), zeros past the stream.
H3_DI void h3t_load(h3_bf16 *stage, const h3_bf16 *kc, const h3_bf16 *vc, const IX_T *pt,
                    const h3t_stream &s, long long ts, int Hk, int kvh) {
  const int ch = threadIdx.x & 15;
  uint4 *ks = reinterpret_cast<uint4 *>(stage), *vs = reinterpret_cast<uint4 *>(stage + H3T_TILE);
#pragma unroll
  for (int key = threadIdx.x >> 4; key < H3T_KEYS; key += H3T_THREADS / 16) {
    uint4 *dk = ks + key * 16 + (ch ^ (key & 7)), *dv = vs + key * 16 + (ch ^ (key & 7));
    const long long v = ts + key;
    if (v < s.nv) {
      const long long j = h3t_pos(s, v), b = h3t_div(j, s.page);
      const long long off = (((long long)pt[b] * s.page + (j - b * s.page)) * Hk + kvh) * 128 + 8 * ch;
      h3_cp16(dk, kc + off);
      h3_cp16(dv, vc + off);
    } else {
      *dk = *dv = uint4{0u, 0u, 0u, 0u};
    }
  }
}

// Stream key v is row w's (position p)
H3_DI bool h3t_has(const h3t_stream &s, long long v, long long p, int w) {
  if (v >= s.nv) return false;
  if (s.kind == 0) return v <= p;
  const long long u = h3t_div(v, s.page);
  return (s.rows[u] >> w & 1) && (long long)s.blk[u] * s.page + (v - u * s.page) <= p;
}

// Every key of the tile at ts is row w's (position p)
H3_DI bool h3t_full(const h3t_stream &s, long long ts, long long p, int w) {
  const long long te = ts + H3T_KEYS - 1;
  if (te >= s.nv || h3t_pos(s, te) > p) return false;
  if (s.kind == 0) return true;
  for (long long u = h3t_div(ts, s.page); u <= h3t_div(te, s.page); u++)
    if (!(s.rows[u] >> w & 1)) return false;
  return true;
}

// This lane's keys of the tile at ts that are row w's: bit 2 n + e for key 8 n + 2 c + e
H3_DI unsigned h3t_live(const h3t_stream &s, long long ts, long long p, int w) {
  if (h3t_full(s, ts, p, w)) return 0xffffu;
  const int c = threadIdx.x & 3;
  unsigned lm = 0;
#pragma unroll
  for (int k = 0; k < 16; k++) lm |= (unsigned)h3t_has(s, ts + 8 * (k >> 1) + 2 * c + (k & 1), p, w) << k;
  return lm;
}

// The running maximum m of a head after a tile whose maximum in this lane is tm (taken over
// the quad's lanes); returns the factor that rescales the sums so far (0 when there are none)
H3_DI float h3t_new_max(float tm, float &m) {
  tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 1));
  tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 2));
  const float mn = fmaxf(m, tm), corr = m == -H3T_INF ? 0.0f : __expf(__fsub_rn(m, mn));
  m = mn;
  return corr;
}

// The online softmax over one tile: sc (scores in, p out; 0 where lm's bit is clear), the
// running maxima m, this lane's sums l and the accumulators acc rescaled to the new maxima.
H3_DI void h3t_softmax(float sc[8][4], unsigned lm, float scale, float m[2], float l[2], float acc[16][4]) {
#pragma unroll
  for (int r = 0; r < 2; r++) { // heads g + 8 r
    float tm = -H3T_INF;
#pragma unroll
    for (int k = 0; k < 16; k++) {
      float &x = sc[k >> 1][2 * r + (k & 1)];
      x = lm >> k & 1 ? __fmul_rn(x, scale) : -H3T_INF;
      tm = fmaxf(tm, x);
    }
    const float corr = h3t_new_max(tm, m[r]);
    l[r] = __fmul_rn(l[r], corr);
#pragma unroll
    for (int k = 0; k < 16; k++) {
      float &x = sc[k >> 1][2 * r + (k & 1)];
      x = lm >> k & 1 ? __expf(__fsub_rn(x, m[r])) : 0.0f;
      l[r] = __fadd_rn(l[r], x);
    }
    if (corr != 1.0f) // the maxima settle after a few tiles: most tiles skip this
#pragma unroll
      for (int j = 0; j < 16; j++)
        acc[j][2 * r] = __fmul_rn(acc[j][2 * r], corr), acc[j][2 * r + 1] = __fmul_rn(acc[j][2 * r + 1], corr);
  }
}

// acc += P V for the V tile vs: P (sc) as the A fragments of 4 k16 steps, acc[j] dims 8 j ..
H3_DI void h3t_pv(const h3_bf16 *vs, const float sc[8][4], float acc[16][4]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int ks = 0; ks < 4; ks++) { // keys 16 ks .. + 15
    const unsigned pa[4] = {h3_bf16x2(sc[2 * ks][0], sc[2 * ks][1]), h3_bf16x2(sc[2 * ks][2], sc[2 * ks][3]),
                            h3_bf16x2(sc[2 * ks + 1][0], sc[2 * ks + 1][1]),
                            h3_bf16x2(sc[2 * ks + 1][2], sc[2 * ks + 1][3])};
    const int row = 16 * ks + (lane & 7) + 8 * ((lane >> 3) & 1);
#pragma unroll
    for (int dp = 0; dp < 8; dp++) { // dims 16 dp .. + 15: n-tiles 2 dp, 2 dp + 1
      unsigned f[4];
      h3_ldsm4_trans(f, vs + row * 128 + (((2 * dp + (lane >> 4)) ^ (lane & 7)) * 8));
      const unsigned b0[2] = {f[0], f[1]}, b1[2] = {f[2], f[3]};
      h3_mma_bf16(acc[2 * dp], pa, b0);
      h3_mma_bf16(acc[2 * dp + 1], pa, b1);
    }
  }
}

// The A fragments of the 8 k-steps of q heads g, g + 8 from head g's row qg (zeros without it)
H3_DI void h3t_q(const h3_bf16 *qg, unsigned qa[8][4]) {
  const int c = threadIdx.x & 3;
  const unsigned *a = reinterpret_cast<const unsigned *>(qg), *b = a + 8 * 64; // head g + 8
#pragma unroll
  for (int ks = 0; ks < 8; ks++) {
    qa[ks][0] = qg ? a[8 * ks + c] : 0u, qa[ks][1] = qg ? b[8 * ks + c] : 0u;
    qa[ks][2] = qg ? a[8 * ks + 4 + c] : 0u, qa[ks][3] = qg ? b[8 * ks + 4 + c] : 0u;
  }
}

// o of heads g, g + 8 at og (row t's first q head of the group; nullptr: a row past T) =
// acc / l, l summed over the quad first (every thread calls it: shuffles)
H3_DI void h3t_store(O_T *og, const float acc[16][4], float l[2]) {
  const int g = (threadIdx.x & 31) >> 2, c = threadIdx.x & 3;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    l[r] = __fadd_rn(l[r], __shfl_xor_sync(0xffffffffu, l[r], 1));
    l[r] = __fadd_rn(l[r], __shfl_xor_sync(0xffffffffu, l[r], 2));
    if (!og) continue;
#pragma unroll
    for (int j = 0; j < 16; j++)
#pragma unroll
      for (int e = 0; e < 2; e++)
        h3_st(og, (g + 8 * r) * 128 + 8 * j + 2 * c + e, l[r] > 0.0f ? __fdiv_rn(acc[j][2 * r + e], l[r]) : 0.0f);
  }
}

#ifdef H3_KV_ATT_TILE_NAME
extern "C" __global__ void __launch_bounds__(H3T_THREADS, 1) H3_KV_ATT_TILE_NAME(
    const h3_bf16 *__restrict__ q, const h3_bf16 *__restrict__ kc, const h3_bf16 *__restrict__ vc,
    const IX_T *__restrict__ pos, const IX_T *__restrict__ pt, const IX_T *__restrict__ sel,
    O_T *__restrict__ o, int kind, long long T, int Hk, int page, int topk, float scale, int per,
    long long NP) {
  H3_DYN_SMEM(h3_bf16, smem); // stage s: K tile at 2 s H3T_TILE, V tile after it
  __shared__ h3t_rows rs;
  const int warp = threadIdx.x >> 5, g = (threadIdx.x & 31) >> 2, kvh = (int)(blockIdx.x % Hk);
  long long t0 = ((long long)(gridDim.x / Hk) - 1 - blockIdx.x / Hk) * H3T_ROWS, tn = T; // rows t0 .. tn - 1
  if (per > 0) { // tile j of sequence b: rows b per + 8 j .., table b
    const long long tg = (per + H3T_ROWS - 1) / H3T_ROWS, u = blockIdx.x / Hk, b = u / tg;
    t0 = b * per + (u % tg) * H3T_ROWS, tn = b * per + per;
    pt += b * NP;
  }
  const long long t = t0 + warp;
  const h3t_stream s = h3t_setup(rs, pos, sel, kind, tn, t0, Hk, kvh, page, topk);
  const long long p = rs.pos[warp];
  const long long head0 = (t * Hk + kvh) * 16; // (row, first q head of the group)
  unsigned qa[8][4];
  h3t_q(t < tn ? q + (head0 + g) * 128 : nullptr, qa);
  float acc[16][4], m[2] = {-H3T_INF, -H3T_INF}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < 16; j++)
#pragma unroll
    for (int i = 0; i < 4; i++) acc[j][i] = 0.0f;
  const int nt = (int)((s.nv + H3T_KEYS - 1) / H3T_KEYS);
#pragma unroll
  for (int i = 0; i < H3T_STAGES - 1; i++) {
    if (i < nt) h3t_load(smem + 2 * i * H3T_TILE, kc, vc, pt, s, (long long)i * H3T_KEYS, Hk, kvh);
    h3_cp_commit();
  }
  for (int it = 0; it < nt; it++) {
    h3_cp_wait_pending<H3T_STAGES - 2>();
    __syncthreads(); // tile it is in; every warp is done with the stage loaded next
    const int nx = it + H3T_STAGES - 1, cur = it % H3T_STAGES;
    if (nx < nt) h3t_load(smem + 2 * (nx % H3T_STAGES) * H3T_TILE, kc, vc, pt, s, (long long)nx * H3T_KEYS, Hk, kvh);
    h3_cp_commit();
    const h3_bf16 *ks = smem + 2 * cur * H3T_TILE, *vs = ks + H3T_TILE;
    float sc[8][4];
    h3_tile_qk<4, float, h3_mma_bf16>(reinterpret_cast<const unsigned char *>(ks), qa, sc, 0.0f);
    h3t_softmax(sc, h3t_live(s, (long long)it * H3T_KEYS, p, warp), scale, m, l, acc);
    h3t_pv(vs, sc, acc);
  }
  h3t_store(t < tn ? o + head0 * 128 : nullptr, acc, l);
}
#endif
