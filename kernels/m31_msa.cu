// m31_msa.cu: MiniMax-M3.1's attention over the paged KV cache and its sparse (MSA) block
// selection, the contracts of ops.def and of the CPU reference (runtime/cpu/ops_attention.c,
// ops_sparse.c). Cached position j of row t lives at flat row pt[j / page] * page + j % page
// of the [P, page, Hk, D] caches, pt = the page table [NP] or its row t / pt_per ([R, NP], R
// dividing T, pt_per = T / R query rows per table: a batch of sequences of one row (pt_per 1)
// or of several; pt_per = 0: one table for every row).
//   H3_KV_ATT_NAME (q[T, Hq, D] Q_T, kc, vc [P, page, Hk, D] K_T, kb, vb [T, Hk, D] K_T,
//     pos[T], pt[NP] or [R, NP], sel[T, Hk, topk], ctx[] or ctx[T] (ctx_rows 0 / 1; all IX_T))
//     -> part f32 [T, Hq, S, D + 2], grid (T, Hk, S), H3M_ATT_THREADS threads. The keys of
//     row t, by kind:
//       0 paged:  positions 0..pos[t];
//       1 block:  positions 0..ctx-1 (ctx = ctx[t] or ctx[0]), then the brows rows of kb / vb
//                 of row t's block, rows (t / brows) * brows .. (non-causal);
//       2 sparse: the positions j <= pos[t] of the selected blocks (ascending, -1 skipped;
//                 topk <= H3M_MAX_TOPK);
//     block (t, kv head, s) takes the s-th of S equal parts of them (flash decoding) and
//     every q head of the kv head's group (GQA: a K / V row is read once for the group):
//     warp w owns heads w * H3M_HPW .. + H3M_HPW - 1 of the group (H3M_HPW <= 4), lane l
//     dims l * H3M_DC .. + H3M_DC - 1, H3M_KEYS (4) keys per step, the step's 16 dot
//     products summed over the warp together. s_j = (q · k_j) * scale (fp32), online
//     softmax with the fast exponential (__expf): part = (running max m, sum l,
//     unnormalised sum of p_j v_j [D]).
//   H3_KV_ATT_MMA_NAME (the same but ctx_rows / brows, then S, o, cnt u32 [T, Hk], ctx_rows,
//     brows) -> o[T, Hq, D] O_T: the same
//     keys on tensor cores for bf16 q / k / v, D = 128 and groups of 16, P rounded to bf16 for
//     the P V product, and the split combine in the same launch (grid (T S, Hk), 4-8 warps per
//     (row, kv head, split), the warps' results merged in shared memory, the last split's
//     block to finish combines; details below). part: blobs [T, Hk, S] of H3M_BLOB floats; cnt
//     is 0 before the launch and after it.
//   H3_KV_COMBINE_NAME (part) -> o[T, Hq, D] O_T, grid (T, Hq): H3_KV_ATT_NAME's splits
//     combined, o = sum_s acc_s e^(m_s - M) / sum_s l_s e^(m_s - M) with M = max m_s, one
//     rounding; 0 for a row with no key.
//   H3_TOPK_SCORE_NAME (iq[T, Hi, D] Q_T, ikc[P, page, D] K_T, pos[T], pt IX_T) -> score f32
//     [T, Hi, NB] {block}, cnt u32 [T], sel[T, Hi, topk] IX_T, Hi <= 8, topk <= H3M_MAX_TOPK:
//     score[t, h, b] = max over the keys j of block b of iq[t, h] . ik_j for every b below the
//     row's current block pos[t] / block (its keys are all <= pos[t]; the current block and
//     those after it are not written), for the rows of more than topk blocks: a row of at most
//     topk blocks (pos[t] / block < topk) selects all of them whatever their scores, and its
//     scores are not computed (they may be left unwritten). Each dot product is the
//     reference's: fp32, d ascending from +0, product then sum (for 16-bit q and k one FMA:
//     their product is exact), so the scores and the selections are the CPU's bitwise. Grid
//     (T, S), H3M_TOPK_DEC_THREADS threads (any table; decode): block (t, s) scores the key
//     blocks b = s, s + S, ..., a thread per key with the row's Hi vectors (f32, shared
//     memory) and its key row staged there too, maxima by shuffles; then it takes a ticket
//     of cnt[t] (0 before the launch and after it) and the row's last block selects as
//     H3_TOPK_NAME does, by ranks counted in shared memory (a row of at most topk blocks:
//     block (t, 0) writes them at once, no block scores or takes a ticket). Dynamic shared
//     memory: the larger of 8 D floats then H3M_TOPK_DEC_THREADS rows of H3M_TOPK_KROW(D) K_T
//     (the vectors, then the staged keys) and Hi NB floats.
//   H3_TOPK_ROWS_NAME (iq, ikc, pos, pt[NP], T, topk) -> score as above for rows of one table, grid
//     (ceil(T / RT), S), H3M_TOPK_ROWS_THREADS threads, a block per tile of RT = H3M_TOPK_QV /
//     Hi consecutive rows (the last tile first; dynamic: (128 + 64) D floats): a key block is
//     read once per RT rows in tiles of H3M_TOPK_KEYS keys, transposed to f32 in shared
//     memory; a thread takes 8 vectors x 8 keys.
//   H3_TOPK_NAME (score, pos, T) -> sel[T, Hi, topk] IX_T, grid ceil(T Hi / 8),
//     H3M_TOPK_THREADS threads, a warp per (row, head): the current block's score taken as
//     +inf, the k = min(topk, nb) best blocks (descending score, ties: lower block) in k rounds,
//     each the warp's first block after the previous round's in that order (a lane's first of
//     its blocks, then shuffles), written ascending, then -1; a row of nb <= topk blocks takes
//     blocks 0 .. nb - 1 without reading its scores (as the reference, whatever they are, NaN
//     included). topk <= H3M_MAX_TOPK.
// The attention's sums differ in order from the reference (lanes, then a shuffle tree; tiles
// of keys), within the tests' tolerance. Every loop that holds a shuffle, an mma or a barrier
// runs the same number of times in every thread of a block (host emulation:
// tests/codegen/host_emu.h).
// Macros the user defines in front: Q_T, K_T, IX_T, O_T, H3M_DC (ceil(D / 32)) and H3M_HPW
// (ceil(group / 4)) for the attention, and the name of each kernel it wants (a kernel whose
// name is not defined is not compiled).

#define H3M_INF __int_as_float(0x7f800000) /* NVRTC has no INFINITY */
#define H3M_ATT_THREADS 128
#define H3M_KEYS 4
#define H3M_MAX_TOPK 64 // selected blocks per row and kv head (sparse attention)
#define H3M_ATT_CLUSTER 8 // the most splits combined in a cluster (cuda_m31_msa.c's ATT_CLUSTER)

// j / page for 0 <= j: a 32-bit division where j fits (positions of i32 tables always do),
// several times cheaper than the 64-bit one
__device__ __forceinline__ long long h3m_page_of(long long j, int page) {
  return j <= 0x7fffffff ? (long long)((unsigned)j / (unsigned)page) : j / page;
}

__device__ __forceinline__ long long h3m_slot(const IX_T *pt, long long j, int page) {
  const long long b = h3m_page_of(j, page);
  return (long long)pt[b] * page + (j - b * page);
}

#if defined(H3_KV_ATT_NAME) || defined(H3_KV_ATT_MMA_NAME)
// Key v (of 0..v1-1) of row t's list for kv head kvh, by kind (0 paged, 1 block, 2 sparse:
// vblk = the row's selected blocks): the element offset of its D-vector in the caches (>= 0),
// -2 - offset in kb / vb (a block row) or -1 (no key: v >= v1 or a sparse position past p).
__device__ __forceinline__ long long h3m_key_off(int kind, long long v, long long v1, long long p,
                                                 long long ctx, const IX_T *pt, const long long *vblk,
                                                 int page, int Hk, int kvh, int D) {
  if (v >= v1) return -1;
  if (kind == 1 && v >= ctx) return -2 - ((v - ctx) * Hk + kvh) * D;
  const long long b = kind == 2 ? h3m_page_of(v, page) : 0;
  const long long j = kind == 2 ? vblk[b] * page + (v - b * page) : v;
  return kind == 2 && j > p ? -1 : (h3m_slot(pt, j, page) * Hk + kvh) * D;
}
// The row of cache c or block rows b that a key offset names (nullptr: no key).
__device__ __forceinline__ const K_T *h3m_key_row(const K_T *c, const K_T *b, long long off) {
  return off >= 0 ? c + off : off <= -2 ? b + (-2 - off) : nullptr;
}
#endif

#ifdef H3_KV_ATT_NAME
// The warp sums of 16 values at once: a halving exchange (8 + 4 + 2 + 1 + 1 shuffles) leaves
// the total of value (lane >> 1) & 15 in each lane, then 16 shuffles hand every total to
// every lane (80 shuffles one by one).
__device__ __forceinline__ void h3m_att_sum16(float *v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 16, c = 16; o >= 2; o >>= 1, c >>= 1) {
    const bool up = (lane & o) != 0;
#pragma unroll
    for (int i = 0; i < c / 2; i++) {
      const float send = up ? v[i] : v[i + c / 2], keep = up ? v[i + c / 2] : v[i];
      v[i] = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, o));
    }
  }
  v[0] = __fadd_rn(v[0], __shfl_xor_sync(0xffffffffu, v[0], 1));
  const float mine = v[0];
#pragma unroll
  for (int i = 0; i < 16; i++) v[i] = __shfl_sync(0xffffffffu, mine, 2 * i);
}

// H3M_DC consecutive elements of a key or value row (8-byte loads for bf16 in fours)
__device__ __forceinline__ void h3m_ld_dc(const K_T *p, float *f) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(K_T) == 2 && H3M_DC % 4 == 0) {
#pragma unroll
    for (int c = 0; c < H3M_DC; c += 4) {
      const uint2 w = *reinterpret_cast<const uint2 *>(p + c);
      __align__(8) K_T e[4];
      *reinterpret_cast<uint2 *>(e) = w;
#pragma unroll
      for (int q = 0; q < 4; q++) f[c + q] = (float)h3_w(e[q]);
    }
    return;
  }
#endif
#pragma unroll
  for (int c = 0; c < H3M_DC; c++) f[c] = (float)h3_w(p[c]);
}

extern "C" __global__ void __launch_bounds__(H3M_ATT_THREADS) H3_KV_ATT_NAME(
    const Q_T *__restrict__ q, const K_T *__restrict__ kc, const K_T *__restrict__ vc,
    const K_T *__restrict__ kb, const K_T *__restrict__ vb, const IX_T *__restrict__ pos,
    const IX_T *__restrict__ pt, const IX_T *__restrict__ sel, const IX_T *__restrict__ ctxp,
    float *__restrict__ part, int kind, long long T, int Hq, int Hk, int D, int page, int topk,
    float scale, int pt_per, long long NP, int ctx_rows, long long brows) {
  const long long t = blockIdx.x;
  pt += (pt_per > 0 ? t / pt_per : 0) * NP; // this row's page table
  const int kvh = blockIdx.y, s = blockIdx.z, S = gridDim.z, G = Hq / Hk;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long p = kind == 1 ? 0 : (long long)pos[t];
  const long long ctx = kind == 1 ? (long long)ctxp[ctx_rows ? t : 0] : 0;
  if (kind == 1) { // this row's block of brows rows
    kb += t / brows * brows * Hk * D;
    vb += t / brows * brows * Hk * D;
  }
  // sparse: the selected blocks (-1 entries dropped), so that only their keys are visited
  __shared__ long long vblk[H3M_MAX_TOPK];
  __shared__ int nsel;
  if (kind == 2 && (int)threadIdx.x < topk) vblk[threadIdx.x] = (long long)sel[(t * Hk + kvh) * topk + threadIdx.x];
  __syncthreads();
  if (threadIdx.x == 0) { // compact in place, ascending order kept
    int n = 0;
    for (int i = 0; kind == 2 && i < topk; i++)
      if (vblk[i] >= 0) vblk[n++] = vblk[i];
    nsel = n;
  }
  __syncthreads();
  const long long nv = kind == 0 ? p + 1 : kind == 1 ? ctx + brows : (long long)nsel * page;
  const long long chunk = (nv + S - 1) / S, v0 = s * chunk, v1 = v0 + chunk < nv ? v0 + chunk : nv;
  float qr[H3M_HPW][H3M_DC], acc[H3M_HPW][H3M_DC], m[H3M_HPW], l[H3M_HPW];
#pragma unroll
  for (int hh = 0; hh < H3M_HPW; hh++) {
    const int g = warp * H3M_HPW + hh;
    m[hh] = -H3M_INF, l[hh] = 0.0f;
#pragma unroll
    for (int c = 0; c < H3M_DC; c++) {
      const int d = lane * H3M_DC + c;
      acc[hh][c] = 0.0f;
      qr[hh][c] = g < G && d < D ? (float)h3_ld(q, (t * Hq + kvh * G + g) * D + d) : 0.0f;
    }
  }
  // the offsets (h3m_key_off) of a tile of H3M_ATT_THREADS keys, found by all threads at once
  __shared__ long long koff[H3M_ATT_THREADS];
  for (long long ts = v0; ts < v1; ts += H3M_ATT_THREADS) {
    __syncthreads(); // the previous tile is done
    koff[threadIdx.x] = h3m_key_off(kind, ts + threadIdx.x, v1, p, ctx, pt, vblk, page, Hk, kvh, D);
    __syncthreads();
    const long long te = ts + H3M_ATT_THREADS < v1 ? ts + H3M_ATT_THREADS : v1;
  for (long long vs = ts; vs < te; vs += H3M_KEYS) {
    float kr[H3M_KEYS][H3M_DC], vr[H3M_KEYS][H3M_DC];
    bool live[H3M_KEYS];
#pragma unroll
    for (int u = 0; u < H3M_KEYS; u++) {
      const long long v = vs + u;
      const long long off = v < te ? koff[v - ts] : -1;
      const K_T *kp = h3m_key_row(kc, kb, off), *vp = h3m_key_row(vc, vb, off);
      live[u] = kp != nullptr;
      const int d0 = lane * H3M_DC;
      if (live[u] && d0 < D) {
        h3m_ld_dc(kp + d0, kr[u]);
        h3m_ld_dc(vp + d0, vr[u]);
      } else {
#pragma unroll
        for (int c = 0; c < H3M_DC; c++) kr[u][c] = vr[u][c] = 0.0f;
      }
    }
    float dots[16]; // (head hh, key u) at 4hh + u; the rest 0
#pragma unroll
    for (int i = 0; i < 16; i++) dots[i] = 0.0f;
#pragma unroll
    for (int hh = 0; hh < H3M_HPW; hh++)
#pragma unroll
      for (int u = 0; u < H3M_KEYS; u++)
#pragma unroll
        for (int c = 0; c < H3M_DC; c++)
          dots[4 * hh + u] = __fadd_rn(dots[4 * hh + u], __fmul_rn(qr[hh][c], kr[u][c]));
    h3m_att_sum16(dots);
#pragma unroll
    for (int hh = 0; hh < H3M_HPW; hh++) {
      float sc[H3M_KEYS], tm = -H3M_INF;
#pragma unroll
      for (int u = 0; u < H3M_KEYS; u++) {
        sc[u] = live[u] ? __fmul_rn(dots[4 * hh + u], scale) : -H3M_INF;
        tm = fmaxf(tm, sc[u]);
      }
      if (tm == -H3M_INF) continue;
      const float mn = fmaxf(m[hh], tm);
      const float corr = m[hh] == -H3M_INF ? 0.0f : __expf(__fsub_rn(m[hh], mn));
      l[hh] = __fmul_rn(l[hh], corr);
#pragma unroll
      for (int c = 0; c < H3M_DC; c++) acc[hh][c] = __fmul_rn(acc[hh][c], corr);
#pragma unroll
      for (int u = 0; u < H3M_KEYS; u++) {
        if (!live[u]) continue;
        const float pj = __expf(__fsub_rn(sc[u], mn));
        l[hh] = __fadd_rn(l[hh], pj);
#pragma unroll
        for (int c = 0; c < H3M_DC; c++) acc[hh][c] = __fadd_rn(acc[hh][c], __fmul_rn(pj, vr[u][c]));
      }
      m[hh] = mn;
    }
  }
  }
#pragma unroll
  for (int hh = 0; hh < H3M_HPW; hh++) {
    const int g = warp * H3M_HPW + hh;
    if (g >= G) continue;
    float *pr = part + ((t * Hq + kvh * G + g) * S + s) * (D + 2);
    if (lane == 0) pr[0] = m[hh], pr[1] = l[hh];
#pragma unroll
    for (int c = 0; c < H3M_DC; c++)
      if (lane * H3M_DC + c < D) pr[2 + lane * H3M_DC + c] = acc[hh][c];
  }
}
#endif

#if defined(H3_KV_ATT_MMA_NAME) || defined(H3_TOPK_SCORE_NAME)
#endif

#ifdef H3_KV_ATT_MMA_NAME
// Tensor-core form of H3_KV_ATT_NAME for bf16 q / k / v, D = 128 and groups of 16 q heads,
// its split combine in the same launch. Grid (T S, Hk), W = blockDim.x / 32 warps (W <=
// H3M_ATT_WARPS; S <= 64 W, the splits' (M, l) staged in shared memory): block x takes
// item i = gridDim.x - 1 - x (rows of many keys are started first), row t = i / S, split s =
// i % S, for kv head blockIdx.y and all 16 q heads of its group: they are the M = 16 of
// mma.m16n8k16 (lane l = 4 g + c holds heads g and g + 8). Split s holds keys
// s C .. s C + C - 1 of the row's list, C = ceil(nv / S) rounded up to a multiple of
// H3M_MMA_KEYS (a split may get none); warp w takes its tiles w, w + W, w + 2 W, ... of
// H3M_MMA_KEYS (16) keys. Per tile:
//   scores Q K^T: K is the B operand (k = head dim, n = key); the head-dim order is permuted
//     alike in Q and K (m31_moe.cu's mma): lane (g, c) reads dims 32 c .. 32 c + 31 of key
//     8 j + g (n-tile j) in four 16-byte loads, chunk q's words x, y feeding k-step 2 q and
//     z, w k-step 2 q + 1; Q sits in registers as the 8 k-steps' A fragments.
//   online softmax in fp32 on the accumulators (lane (g, c): heads g, g + 8 by keys 2 c,
//     2 c + 1, 2 c + 8, 2 c + 9): row maxima over the quad's lanes, p = __expf(s - m) (0 for
//     a key that is not there), the lane's share of l summed over the quad at the end.
//   O += P V: the accumulators repacked as the A fragment of one k16 step (P rounded to
//     bf16; l sums the unrounded p); V is the B operand (k = key, n = head dim), column g of
//     n-tile j (0..15) being dim 16 g + j, so lane (g, c) reads dims 16 g .. + 15 of its keys
//     2 c, 2 c + 1, 2 c + 8, 2 c + 9 (two 16-byte loads each) and pairs the keys' halves.
//   O's lane (g, c) holds dims 32 c + j (column 2 c) and 32 c + 16 + j (column 2 c + 1).
// Key offsets of a tile: lane k < 16 finds key k's (h3m_key_off), shuffles hand them out.
// The next tile's offsets and K are loaded before this tile's S, V before its softmax.
// The tile loop runs as often in every warp (keys past the split's end are not there: no
// loads, p = 0).
// The warps' (m, l, acc) are merged in shared memory: per head the block's maximum M, each
// warp's l and acc weighed by e^(m_w - M) (0 for a warp without keys) and summed in warp
// order. With S = 1 the block writes o = acc / l (one rounding; 0 for a head without keys).
// Else it writes its split's partial into part, blobs [T, Hk, S] of H3M_BLOB floats (acc
// [16][128], then M [16], l [16]), and takes a ticket of cnt[t Hk + kvh] (u32 [T, Hk], 0
// before the launch): the block that draws the last resets it to 0 and combines the S
// partials in split order as H3_KV_COMBINE_NAME does, so o does not depend on which block
// finishes last. clus = 1 (S <= 8; launched in clusters of S blocks along x, so a cluster holds
// the splits of one (row, kv head), split s at rank S - 1 - s): the partials stay in each block's
// shared memory instead (no part, no cnt, no ticket) and, after a cluster barrier, the cluster's
// S W 32 threads combine the 16 x 128 outputs, one each in turn, reading the S partials of their
// dim through distributed shared memory, in split order with the same arithmetic: o is bitwise
// the last block's. Dynamic shared memory: W * H3M_ATT_RED bytes, + H3M_BLOB floats with clus.
#define H3M_MMA_KEYS 16
#define H3M_ATT_WARPS 8             // the most warps of a block
#define H3M_ATT_RED (16 * 128 * 4)  // a warp's acc in shared memory (bytes)
#define H3M_BLOB (16 * 128 + 32)    // a split's partial: acc [16][128], M [16], l [16] f32

// Element j of the 16 held of key rows a and b (two 16-byte chunks each) as one bf16 pair
__device__ __forceinline__ unsigned h3m_pair(const uint4 *a, const uint4 *b, int j) {
  const unsigned *wa = reinterpret_cast<const unsigned *>(a), *wb = reinterpret_cast<const unsigned *>(b);
  const unsigned x = wa[j / 2], y = wb[j / 2];
  return j % 2 ? (x >> 16) | (y & 0xffff0000u) : (x & 0xffffu) | (y << 16);
}

// n 16-byte chunks of row r from element e (zeros without a row)
template <int n> __device__ __forceinline__ void h3m_ld16(const h3_bf16 *r, int e, uint4 *out) {
#pragma unroll
  for (int i = 0; i < n; i++)
    out[i] = r ? *reinterpret_cast<const uint4 *>(r + e + 8 * i) : uint4{0u, 0u, 0u, 0u};
}

// p[0..7] as h3_ldcg reads them (p 16-byte aligned)
__device__ __forceinline__ void h3_ldcg8(const float *p, float *f) {
#ifdef __CUDA_ARCH__
  const float4 a = __ldcg(reinterpret_cast<const float4 *>(p)), b = __ldcg(reinterpret_cast<const float4 *>(p) + 1);
  f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
#else
  for (int i = 0; i < 8; i++) f[i] = p[i];
#endif
}

// The weight of a part with maximum m in a sum whose maximum is M: e^(m - M), 0 without keys
__device__ __forceinline__ float h3m_weight(float m, float M) {
  return m == -H3M_INF ? 0.0f : __expf(__fsub_rn(m, M));
}

// The maximum M of parts m[0], m[st], ..., m[(n - 1) st] and their sum of l[i st] weighed
// (in that order)
__device__ __forceinline__ float h3m_merge(const float *m, const float *l, int st, int n, float *L) {
  float M = -H3M_INF, sum = 0.0f;
#pragma unroll 1 // rolled: it runs a few times a block, with its code cold
  for (int i = 0; i < n; i++) M = fmaxf(M, m[i * st]);
#pragma unroll 1
  for (int i = 0; i < n; i++)
    if (m[i * st] > -H3M_INF) sum = __fadd_rn(sum, __fmul_rn(l[i * st], h3m_weight(m[i * st], M)));
  *L = sum;
  return M;
}

extern "C" __global__ void __launch_bounds__(32 * H3M_ATT_WARPS) H3_KV_ATT_MMA_NAME(
    const h3_bf16 *__restrict__ q, const h3_bf16 *__restrict__ kc, const h3_bf16 *__restrict__ vc,
    const h3_bf16 *__restrict__ kb, const h3_bf16 *__restrict__ vb, const IX_T *__restrict__ pos,
    const IX_T *__restrict__ pt, const IX_T *__restrict__ sel, const IX_T *__restrict__ ctxp,
    float *part, int kind, long long T, int Hq, int Hk, int D, int page, int topk, float scale,
    int pt_per, long long NP, int S, O_T *__restrict__ o, unsigned *cnt, int ctx_rows,
    long long brows, int clus) {
  H3_DYN_SMEM(float, red); // [W][16 j][4 e][32 lanes]: the warps' weighed acc, fragment order;
                           // then with clus this split's blob
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  const int W = (int)(blockDim.x >> 5), kvh = blockIdx.y;
  const long long item = (long long)gridDim.x - 1 - blockIdx.x, t = item / S;
  const int s = (int)(item % S);
  pt += (pt_per > 0 ? t / pt_per : 0) * NP; // this row's page table
  unsigned qa[8][4]; // the A fragments of the 8 k-steps
  {
    uint4 r0[4], r1[4];
    const h3_bf16 *q0 = q + (t * Hq + kvh * 16 + g) * D;
    h3m_ld16<4>(q0, 32 * c, r0);
    h3m_ld16<4>(q0 + 8 * D, 32 * c, r1);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      qa[2 * i][0] = r0[i].x, qa[2 * i][1] = r1[i].x, qa[2 * i][2] = r0[i].y, qa[2 * i][3] = r1[i].y;
      qa[2 * i + 1][0] = r0[i].z, qa[2 * i + 1][1] = r1[i].z, qa[2 * i + 1][2] = r0[i].w,
                    qa[2 * i + 1][3] = r1[i].w;
    }
  }
  const long long p = kind == 1 ? 0 : (long long)pos[t];
  const long long ctx = kind == 1 ? (long long)ctxp[ctx_rows ? t : 0] : 0;
  if (kind == 1) { // this row's block of brows rows
    kb += t / brows * brows * Hk * D;
    vb += t / brows * brows * Hk * D;
  }
  // sparse: the row's selected blocks (-1 dropped, ascending order kept), thread i placing
  // entry i at its rank among them
  __shared__ long long raw[H3M_MAX_TOPK], vblk[H3M_MAX_TOPK];
  const int me = (int)threadIdx.x;
  if (me < H3M_MAX_TOPK) raw[me] = kind == 2 && me < topk ? (long long)sel[(t * Hk + kvh) * topk + me] : -1;
  __syncthreads();
  int nsel = 0;
  for (int i = 0; kind == 2 && i < topk; i++) {
    if (i == me && raw[i] >= 0) vblk[nsel] = raw[i];
    nsel += raw[i] >= 0;
  }
  __syncthreads();
  const long long nv = kind == 0 ? p + 1 : kind == 1 ? ctx + brows : (long long)nsel * page;
  const long long chunk = ((nv + S - 1) / S + H3M_MMA_KEYS - 1) / H3M_MMA_KEYS * H3M_MMA_KEYS;
  const long long v0 = s * chunk, v1 = v0 + chunk < nv ? v0 + chunk : nv;
  const long long ntile = v1 > v0 ? (v1 - v0 + H3M_MMA_KEYS - 1) / H3M_MMA_KEYS : 0;
  const long long nt = (ntile + W - 1) / W, step = (long long)W * H3M_MMA_KEYS; // tiles per warp
  float acc[16][4], m[2] = {-H3M_INF, -H3M_INF}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < 16; j++)
#pragma unroll
    for (int i = 0; i < 4; i++) acc[j][i] = 0.0f;
  // lane k < 16: the offset of key k of the tile; kr: the tile's K (keys g, 8 + g)
  long long ts = v0 + (long long)warp * H3M_MMA_KEYS;
  long long off = lane < 16 ? h3m_key_off(kind, ts + lane, v1, p, ctx, pt, vblk, page, Hk, kvh, D) : -1;
  uint4 kr[2][4];
#pragma unroll
  for (int j = 0; j < 2; j++) h3m_ld16<4>(h3m_key_row(kc, kb, __shfl_sync(0xffffffffu, off, 8 * j + g)), 32 * c, kr[j]);
  for (long long it = 0; it < nt; it++, ts += step) {
    long long vo[4]; // keys 2c, 2c + 1, 2c + 8, 2c + 9: V rows and the score columns
    uint4 vr[4][2];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      vo[k] = __shfl_sync(0xffffffffu, off, 2 * c + (k & 1) + 8 * (k >> 1));
      h3m_ld16<2>(h3m_key_row(vc, vb, vo[k]), 16 * g, vr[k]);
    }
    off = lane < 16 ? h3m_key_off(kind, ts + step + lane, v1, p, ctx, pt, vblk, page, Hk, kvh, D) : -1;
    uint4 kn[2][4];
#pragma unroll
    for (int j = 0; j < 2; j++) h3m_ld16<4>(h3m_key_row(kc, kb, __shfl_sync(0xffffffffu, off, 8 * j + g)), 32 * c, kn[j]);
    float sc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const unsigned b0[2] = {kr[j][i].x, kr[j][i].y}, b1[2] = {kr[j][i].z, kr[j][i].w};
        h3_mma_bf16(sc[j], qa[2 * i], b0);
        h3_mma_bf16(sc[j], qa[2 * i + 1], b1);
      }
    float pr[2][4]; // (head g + 8 r, key 2c, 2c + 1, 2c + 8, 2c + 9)
#pragma unroll
    for (int r = 0; r < 2; r++) {
      float x[4], tm = -H3M_INF;
#pragma unroll
      for (int k = 0; k < 4; k++) {
        x[k] = vo[k] != -1 ? __fmul_rn(sc[k >> 1][2 * r + (k & 1)], scale) : -H3M_INF;
        tm = fmaxf(tm, x[k]);
      }
      tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 1));
      tm = fmaxf(tm, __shfl_xor_sync(0xffffffffu, tm, 2));
      const float mn = fmaxf(m[r], tm);
      const float corr = m[r] == -H3M_INF ? 0.0f : __expf(__fsub_rn(m[r], mn));
      l[r] = __fmul_rn(l[r], corr);
#pragma unroll
      for (int k = 0; k < 4; k++) {
        pr[r][k] = vo[k] != -1 ? __expf(__fsub_rn(x[k], mn)) : 0.0f;
        l[r] = __fadd_rn(l[r], pr[r][k]);
      }
      if (corr != 1.0f) // the maxima settle after a few tiles: most tiles skip this
#pragma unroll
        for (int j = 0; j < 16; j++)
          acc[j][2 * r] = __fmul_rn(acc[j][2 * r], corr), acc[j][2 * r + 1] = __fmul_rn(acc[j][2 * r + 1], corr);
      m[r] = mn;
    }
    const unsigned pa[4] = {h3_bf16x2(pr[0][0], pr[0][1]), h3_bf16x2(pr[1][0], pr[1][1]),
                            h3_bf16x2(pr[0][2], pr[0][3]), h3_bf16x2(pr[1][2], pr[1][3])};
#pragma unroll
    for (int j = 0; j < 16; j++) {
      const unsigned b[2] = {h3m_pair(vr[0], vr[1], j), h3m_pair(vr[2], vr[3], j)};
      h3_mma_bf16(acc[j], pa, b);
    }
#pragma unroll
    for (int j = 0; j < 2; j++)
#pragma unroll
      for (int i = 0; i < 4; i++) kr[j][i] = kn[j][i];
  }
  // the warps merged: (m, l) per head, then each warp's acc weighed into shared memory
  __shared__ float ms[H3M_ATT_WARPS][16], ls[H3M_ATT_WARPS][16];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    l[r] = __fadd_rn(l[r], __shfl_xor_sync(0xffffffffu, l[r], 1));
    l[r] = __fadd_rn(l[r], __shfl_xor_sync(0xffffffffu, l[r], 2));
    if (c == 0) ms[warp][g + 8 * r] = m[r], ls[warp][g + 8 * r] = l[r];
  }
  __syncthreads();
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float L;
    const float f = h3m_weight(m[r], h3m_merge(&ms[0][g + 8 * r], &ls[0][g + 8 * r], 16, W, &L));
#pragma unroll
    for (int j = 0; j < 16; j++)
#pragma unroll
      for (int e = 2 * r; e < 2 * r + 2; e++) red[((warp * 16 + j) * 4 + e) * 32 + lane] = __fmul_rn(acc[j][e], f);
  }
  __syncthreads();
  // thread (w, lane) sums part n = w, w + W, ... < 8 of lane's fragments over the warps: e =
  // n / 2 (head g + 8 (e / 2), dims 32 c + 16 (e % 2) + j), j = 8 (n % 2) .. + 7
  float *blob = clus ? red + W * (H3M_ATT_RED / 4) : part + ((t * Hk + kvh) * S + s) * H3M_BLOB;
  for (int n = warp; n < 8; n += W) {
    const int e = n >> 1, j0 = 8 * (n & 1), h = g + 8 * (e >> 1), d0 = 32 * c + 16 * (e & 1) + j0;
    float v[8], L;
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = 0.0f;
#pragma unroll 1 // each v[i] over the warps in order; rolled: this runs once a block, its code cold
    for (int w = 0; w < W; w++)
#pragma unroll
      for (int i = 0; i < 8; i++) v[i] = __fadd_rn(v[i], red[((w * 16 + j0 + i) * 4 + e) * 32 + lane]);
    h3m_merge(&ms[0][h], &ls[0][h], 16, W, &L);
    if (S == 1) {
#pragma unroll
      for (int i = 0; i < 8; i++) v[i] = L > 0.0f ? __fdiv_rn(v[i], L) : 0.0f;
      h3_st8(o, (t * Hq + kvh * 16 + h) * D + d0, v);
    } else {
#pragma unroll
      for (int i = 0; i < 8; i++) blob[h * 128 + d0 + i] = v[i];
    }
  }
  if (S == 1) return;
  if (me < 16) blob[2048 + me] = h3m_merge(&ms[0][me], &ls[0][me], 16, W, &blob[2064 + me]);
#ifndef H3_HOST_EMU
  if (clus) { // the cluster's splits: (M, l) of each into red, then o a dim a thread
    h3_cluster_sync();
    const unsigned rank = h3_cluster_rank();
    for (int i = me; i < S * 32; i += (int)blockDim.x)
      red[i] = h3_ld_rank(blob + 2048 + (i & 31), S - 1 - (i >> 5));
    __syncthreads();
    for (int u = (int)(rank * blockDim.x) + me; u < 16 * 128; u += S * (int)blockDim.x) {
      const int h = u >> 7;
      float v = 0.0f, L, x[H3M_ATT_CLUSTER]; // the splits' values, read all at once
#pragma unroll
      for (int sp = 0; sp < H3M_ATT_CLUSTER; sp++)
        if (sp < S) x[sp] = h3_ld_rank(blob + u, S - 1 - sp);
      const float M = h3m_merge(red + h, red + 16 + h, 32, S, &L);
#pragma unroll
      for (int sp = 0; sp < H3M_ATT_CLUSTER; sp++) {
        const float mp = sp < S ? red[sp * 32 + h] : -H3M_INF;
        if (mp > -H3M_INF) v = __fadd_rn(v, __fmul_rn(x[sp], h3m_weight(mp, M)));
      }
      h3_st(o, (t * Hq + kvh * 16 + h) * D + (u & 127), L > 0.0f ? __fdiv_rn(v, L) : 0.0f);
    }
    h3_cluster_sync(); // no block leaves while another reads its blob
    return;
  }
#endif
  if (!h3_last_block(cnt + t * Hk + kvh, (unsigned)S)) return;
  // the last block: the splits' (M, l) into shared memory, then o as the combine makes it
  const float *pb = part + (t * Hk + kvh) * S * H3M_BLOB;
  for (int i = me; i < S * 32; i += (int)blockDim.x) red[i] = h3_ldcg(pb + (i >> 5) * H3M_BLOB + 2048 + (i & 31));
  __syncthreads();
  for (int n = warp; n < 8; n += W) {
    const int e = n >> 1, h = g + 8 * (e >> 1), d0 = 32 * c + 16 * (e & 1) + 8 * (n & 1);
    float v[8], L;
    const float M = h3m_merge(red + h, red + 16 + h, 32, S, &L);
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = 0.0f;
#pragma unroll 8 // the loads of 8 splits in flight
    for (int sp = 0; sp < S; sp++) {
      const float mp = red[sp * 32 + h];
      float x[8];
      h3_ldcg8(pb + sp * H3M_BLOB + h * 128 + d0, x);
      if (mp > -H3M_INF) {
        const float f = h3m_weight(mp, M);
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = __fadd_rn(v[i], __fmul_rn(x[i], f));
      }
    }
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = L > 0.0f ? __fdiv_rn(v[i], L) : 0.0f;
    h3_st8(o, (t * Hq + kvh * 16 + h) * D + d0, v);
  }
}
#endif

#ifdef H3_KV_COMBINE_NAME
// S <= H3M_MAX_SPLITS. The splits' maxima and sums are read once into shared memory (one
// thread each); every thread then weighs the splits of its dims.
#define H3M_MAX_SPLITS 128
extern "C" __global__ void __launch_bounds__(H3M_ATT_THREADS) H3_KV_COMBINE_NAME(
    const float *__restrict__ part, O_T *__restrict__ o, int Hq, int D, int S) {
  __shared__ float ms[H3M_MAX_SPLITS], ls[H3M_MAX_SPLITS];
  const long long row = (long long)blockIdx.x * Hq + blockIdx.y; // (t, hq)
  const float *pr = part + row * S * (D + 2);
  for (int s = threadIdx.x; s < S; s += blockDim.x) ms[s] = pr[s * (D + 2)], ls[s] = pr[s * (D + 2) + 1];
  __syncthreads();
  float M = -H3M_INF;
  for (int s = 0; s < S; s++) M = fmaxf(M, ms[s]);
  float L = 0.0f;
  for (int s = 0; s < S; s++)
    if (ms[s] > -H3M_INF) L = __fadd_rn(L, __fmul_rn(ls[s], __expf(__fsub_rn(ms[s], M))));
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float acc = 0.0f;
#pragma unroll 16 // loads of 16 splits in flight
    for (int s = 0; s < S; s++)
      if (ms[s] > -H3M_INF) acc = __fadd_rn(acc, __fmul_rn(pr[s * (D + 2) + 2 + d], __expf(__fsub_rn(ms[s], M))));
    h3_st(o, row * D + d, L > 0.0f ? __fdiv_rn(acc, L) : 0.0f);
  }
}
#endif

#if defined(H3_TOPK_SCORE_NAME) || defined(H3_TOPK_ROWS_NAME) || defined(H3_TOPK_NAME)
#define H3M_TOPK_THREADS 256      // H3_TOPK_NAME
#define H3M_TOPK_DEC_THREADS 128  // H3_TOPK_SCORE_NAME
#define H3M_TOPK_ROWS_THREADS 128 // H3_TOPK_ROWS_NAME
#define H3M_TOPK_KEYS 128         // keys per shared tile
#define H3M_TOPK_QV 64            // q vectors of a H3_TOPK_ROWS_NAME block: 64 / Hi rows

// Whether block (x, c) comes before (v, b) in the selection order: higher score first, the
// lower block first among equal scores.
__device__ __forceinline__ bool h3m_topk_before(float x, long long c, float v, long long b) {
  return x > v || (x == v && c < b);
}
#endif

#if defined(H3_TOPK_SCORE_NAME) || defined(H3_TOPK_ROWS_NAME)
struct __align__(16) h3m_f4 {
  float x, y, z, w;
};

// f[0..3] = p[0..3], one 16-byte load (p 16-byte aligned)
__device__ __forceinline__ void h3m_ld4(float *f, const float *p) {
  const h3m_f4 v = *reinterpret_cast<const h3m_f4 *>(p);
  f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
}

// acc + q k as the reference rounds it (product, then sum): one FMA when the product of a Q_T
// and a K_T is exact in fp32 (16-bit types: at most 11 + 11 significand bits, so whenever
// |q k| >= 2^-126), else the product rounded, then the sum
__device__ __forceinline__ float h3m_madd(float acc, float q, float k) {
  if constexpr (sizeof(Q_T) == 2 && sizeof(K_T) == 2) return __fmaf_rn(q, k, acc);
  else return __fadd_rn(acc, __fmul_rn(q, k));
}

// The maxima of v[0..A) over each group of L lanes, lanes g, g + 32 / L, ... of the warp (A <=
// L, powers of two): halving exchanges (A / 2 + A / 4 + ... shuffles), then log2(L / A) more;
// lane l ends with its group's maximum of value l / (32 / A).
template <int A, int L> __device__ __forceinline__ float h3m_group_max(float *v) {
  static_assert(A <= L, "a value per lane at least");
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 16, c = A; c > 1; o >>= 1, c >>= 1) {
    const bool up = (lane & o) != 0;
#pragma unroll
    for (int i = 0; i < c / 2; i++) {
      const float send = up ? v[i] : v[i + c / 2], keep = up ? v[i + c / 2] : v[i];
      const float got = __shfl_xor_sync(0xffffffffu, send, o);
      v[i] = got > keep ? got : keep;
    }
  }
  float m = v[0];
#pragma unroll
  for (int o = 16 / A; o >= 32 / L; o >>= 1) {
    const float got = __shfl_xor_sync(0xffffffffu, m, o);
    m = got > m ? got : m;
  }
  return m;
}
#endif

#ifdef H3_TOPK_ROWS_NAME
// dst[d stride + i] = row(i)[d] widened to f32 for i < n, d < D (a transposed copy: lanes
// take consecutive i), by the NT threads of the block; NL 8-element loads per thread in flight
// when D % 8 == 0.
template <int NT, int NL, typename Row>
__device__ __forceinline__ void h3m_topk_fill(float *dst, int stride, int n, int D, Row row) {
  const int tid = threadIdx.x;
  if (D % 8 == 0) {
    const int units = n * (D / 8);
    for (int u0 = 0; u0 < units; u0 += NL * NT) {
      float f[NL][8];
#pragma unroll
      for (int c = 0; c < NL; c++) {
        const int u = u0 + c * NT + tid;
        if (u < units) h3_ld8(row(u % n), u / n * 8, f[c]);
      }
#pragma unroll
      for (int c = 0; c < NL; c++) {
        const int u = u0 + c * NT + tid;
        if (u >= units) continue;
        float *o = dst + u / n * 8 * stride + u % n;
#pragma unroll
        for (int e = 0; e < 8; e++) o[e * stride] = f[c][e];
      }
    }
    return;
  }
  for (int u = tid; u < n * D; u += NT)
    dst[u / n * stride + u % n] = (float)h3_ld(row(u % n), u / n);
}

// acc[a][i] = q_a . k_i, each its own chain from +0 over d ascending, as the reference sums;
// q: the A vectors' column (vectors contiguous, row stride QS), k: the B keys' (in fours at
// k + 4 L h, h < B / 4), row stride KS. Per d, A / 4 + B / 4 16-byte loads for A B
// multiply-adds; U d's unrolled (their loads ahead of the chains).
template <int A, int B, int L, int U>
__device__ __forceinline__ void h3m_topk_dots(float (&acc)[A][B], const float *q, int QS,
                                              const float *k, int KS, int D) {
  static_assert(A % 4 == 0 && B % 4 == 0, "vectors and keys in fours");
#pragma unroll
  for (int a = 0; a < A; a++)
#pragma unroll
    for (int i = 0; i < B; i++) acc[a][i] = 0.0f;
#pragma unroll(U)
  for (int d = 0; d < D; d++) {
    float qv[A], kv[B];
#pragma unroll
    for (int a = 0; a < A; a += 4) h3m_ld4(qv + a, q + d * QS + a);
#pragma unroll
    for (int i = 0; i < B; i += 4) h3m_ld4(kv + i, k + d * KS + L * i);
#pragma unroll
    for (int a = 0; a < A; a++)
#pragma unroll
      for (int i = 0; i < B; i++) acc[a][i] = h3m_madd(acc[a][i], qv[a], kv[i]);
  }
}

// One block's scores: the q vectors of rows t0 .. t0 + R - 1 (iq's vectors t0 Hi .. (t0 + R)
// Hi - 1, all through table pt) against key blocks b = s, s + S, ... below the rows' highest
// current block, a tile of H3M_TOPK_KEYS keys at a time in shared memory, transposed to f32
// (ks [D][128], then the vectors qs [D][V]; NL loads per thread in flight; U d's unrolled).
// WQ warps; lane l = G lk + g of warp wq (G = 32 / L groups of L lanes, interleaved so that
// the lanes of a pair or a quad read one address) takes vectors v0 = (wq G + g) A .. + A - 1
// and keys 4 lk + 4 L h + e (e < 4, h < B / 4). score[vector, b] is written where b is below
// the vector's row's current block (its keys are all <= pos).
template <int A, int B, int L, int WQ, int NL, int U>
__device__ __forceinline__ void h3m_topk_tile(const Q_T *iq, const K_T *ik, const IX_T *pos,
                                              const IX_T *pt, float *score, float *ks, long long t0,
                                              int R, int Hi, int D, int page, int block, int NB,
                                              int topk) {
  constexpr int G = 32 / L, NT = 32 * WQ, V = A * G * WQ, LV = L / A; // LV lanes per maximum
  static_assert(L * B == H3M_TOPK_KEYS, "a key tile");
  float *qs = ks + H3M_TOPK_KEYS * D;
  const int lane = threadIdx.x & 31, wq = threadIdx.x >> 5;
  const int lk = lane / G, v0 = (wq * G + lane % G) * A, kb = 4 * lk;
  const int QV = R * Hi, s = blockIdx.y, S = gridDim.y;
  long long bend = 0; // the highest current block of the rows that select: the key blocks
  for (int r = 0; r < R; r++) { // below it are scored (a row of at most topk blocks takes all)
    const long long c = h3m_page_of((long long)pos[t0 + r], block);
    bend = c >= topk && c > bend ? c : bend;
  }
  if (s >= bend) return; // the whole block: nothing to score
  h3m_topk_fill<NT, NL>(qs, V, QV, D, [&](int i) { return iq + (t0 * Hi + i) * D; });
  const int vo = v0 + lk / LV; // the vector whose maximum this thread writes
  const bool writer = vo < QV && lk % LV == 0;
  const long long cur = writer ? h3m_page_of((long long)pos[t0 + vo / Hi], block) : 0;
  for (long long b = s; b < bend; b += S) {
    float best[A];
#pragma unroll
    for (int a = 0; a < A; a++) best[a] = -H3M_INF;
    for (int c = 0; c < block; c += H3M_TOPK_KEYS) {
      const long long j0 = b * block + c;
      const int nk = block - c < H3M_TOPK_KEYS ? block - c : H3M_TOPK_KEYS;
      __syncthreads(); // the previous tile is used
      h3m_topk_fill<NT, NL>(ks, H3M_TOPK_KEYS, nk, D,
                            [&](int i) { return ik + h3m_slot(pt, j0 + i, page) * D; });
      __syncthreads();
      if (v0 >= QV) continue; // no vectors (the same in every lane of the group)
      float acc[A][B];
      h3m_topk_dots<A, B, L, U>(acc, qs + v0, V, ks + kb, H3M_TOPK_KEYS, D);
#pragma unroll
      for (int a = 0; a < A; a++)
#pragma unroll
        for (int i = 0; i < B; i++)
          if (kb + 4 * L * (i / 4) + i % 4 < nk && acc[a][i] > best[a]) best[a] = acc[a][i];
    }
    const float m = h3m_group_max<A, L>(best);
    if (writer && b < cur) score[(t0 * Hi + vo) * NB + b] = m;
  }
}

extern "C" __global__ void __launch_bounds__(H3M_TOPK_ROWS_THREADS) H3_TOPK_ROWS_NAME(
    const Q_T *__restrict__ iq, const K_T *__restrict__ ik, const IX_T *__restrict__ pos,
    const IX_T *__restrict__ pt, float *__restrict__ score, long long T, int Hi, int D, int page,
    int block, int NB, int topk) {
  H3_DYN_SMEM(float, ks);
  const int RT = H3M_TOPK_QV / Hi; // rows per tile; the last tile (most key blocks) first
  const long long t0 = (long long)(gridDim.x - 1 - blockIdx.x) * RT;
  const int R = T - t0 < RT ? (int)(T - t0) : RT;
  h3m_topk_tile<8, 8, 16, 4, 4, 2>(iq, ik, pos, pt, score, ks, t0, R, Hi, D, page, block, NB, topk);
}
#endif

#ifdef H3_TOPK_SCORE_NAME
// The row stride, in K_T elements, of the keys H3_TOPK_SCORE_NAME stages in shared memory: D
// rounded up to 8, then 16 bytes more (16-byte chunks of consecutive rows start in different
// banks). The host sizes the dynamic shared memory by the same rule (cuda_m31_msa.c).
#define H3M_TOPK_KROW(D) (((D) + 7) / 8 * 8 + 16 / (int)sizeof(K_T))

// dot[h] = q_h . k for the HP vectors of qs ([D][HP] f32, one 16-byte load per 4) and the key
// row kr staged in shared memory (16-byte aligned, D rounded up to 8 elements), each the
// reference's chain (d ascending from +0). A rolled loop of 8-element chunks: the code that
// runs is a few hundred bytes, which matters in a kernel that runs once per layer, cold.
template <int HP>
__device__ __forceinline__ void h3m_topk_key(float (&dot)[HP], const float *qs, const K_T *kr, int D) {
#pragma unroll
  for (int h = 0; h < HP; h++) dot[h] = 0.0f;
  auto step = [&](int d, K_T k) {
    float qv[HP];
#pragma unroll
    for (int h = 0; h < HP; h += 4) h3m_ld4(qv + h, qs + d * HP + h);
    const float kv = h3_w(k);
#pragma unroll
    for (int h = 0; h < HP; h++) dot[h] = h3m_madd(dot[h], qv[h], kv);
  };
  const int D8 = D / 8 * 8;
#pragma unroll 2
  for (int d0 = 0; d0 < D8; d0 += 8) {
    __align__(16) K_T k[8];
    h3_ldr8<true>(kr, d0, k);
#pragma unroll
    for (int i = 0; i < 8; i++) step(d0 + i, k[i]);
  }
  for (int d = D8; d < D; d++) step(d, kr[d]);
}

// Key row kr copied into kt (shared memory, a row of H3M_TOPK_KROW(D) elements) by one thread:
// 16-byte chunks, 16 in flight (vec: D % 8 == 0 and every row 16-byte aligned), else element by
// element.
__device__ __forceinline__ void h3m_topk_stage(const K_T *kr, K_T *kt, int D, bool vec) {
  if (!vec) {
    for (int d = 0; d < D; d++) kt[d] = kr[d];
    return;
  }
  constexpr int U = 16;
  for (int c0 = 0; c0 < D / 8; c0 += U) {
    __align__(16) K_T r[U][8];
#pragma unroll
    for (int u = 0; u < U; u++)
      if (c0 + u < D / 8) h3_ldr8<true>(kr, (c0 + u) * 8, r[u]);
#pragma unroll
    for (int u = 0; u < U; u++)
      if (c0 + u < D / 8) h3_str8<true>(kt, (c0 + u) * 8, r[u]);
  }
}

// A row's selection from its scores sm [Hi][nb] (the current block's +inf) in shared memory, by
// every thread of the block: each (head, block)'s rank in the selection order counted there
// (stopping at k = min(nb, topk)); the k first placed at their ranks (pick), then written
// ascending into out [Hi][topk], then -1. Its loops stay rolled: the row's last block runs
// them once, with their code cold (unrolled, they were ~800 instructions).
__device__ __forceinline__ void h3m_topk_pick(const float *sm, int Hi, int nb, int topk, IX_T *out) {
  __shared__ int pick[8][H3M_MAX_TOPK];
  const int tid = threadIdx.x, k = nb < topk ? nb : topk;
#pragma unroll 1
  for (int i = tid; i < Hi * nb; i += H3M_TOPK_DEC_THREADS) {
    const float *sr = sm + i / nb * nb;
    const float x = sm[i];
    const int b = i % nb;
    int rank = 0;
#pragma unroll 1
    for (int c = 0; c < nb && rank < k; c++) rank += h3m_topk_before(sr[c], c, x, b);
    if (rank < k) pick[i / nb][rank] = b;
  }
  __syncthreads();
#pragma unroll 1
  for (int i = tid; i < Hi * topk; i += H3M_TOPK_DEC_THREADS) {
    IX_T *o = out + i / topk * topk;
    const int r = i % topk, *pk = pick[i / topk];
    if (r >= k) {
      o[r] = (IX_T)-1;
      continue;
    }
    int at = 0;
#pragma unroll 1
    for (int c = 0; c < k; c++) at += pk[c] < pk[r];
    o[at] = (IX_T)pk[r];
  }
}

// Row t's Hi vectors staged in sm [D][HP] (f32, zeros past Hi), then the key blocks b = b0, b0 +
// step, ... below the row's current block cur scored into dst[h NB + b] (h < Hi): a thread per
// key, its row staged in shared memory after the vectors (row tid of sm + 8 D; the first one
// loaded before the vectors), its dot products h3m_topk_key's, maxima by shuffles, then over
// the warps. Every thread of the block calls it (HP >= Hi vectors per key: 4 or 8).
template <int HP>
__device__ __forceinline__ void h3m_topk_score(const Q_T *iq, const K_T *ik, const IX_T *pt, long long t,
                                               long long cur, long long b0, long long step, float *sm,
                                               float *dst, int Hi, int D, int page, int block, int NB) {
  constexpr int W = H3M_TOPK_DEC_THREADS / 32;
  __shared__ float red[W][HP];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const bool vec = D % 8 == 0 && h3_al8(ik);
  K_T *kt = reinterpret_cast<K_T *>(sm + 8 * D) + tid * H3M_TOPK_KROW(D); // this thread's key
  // the first key row before the vectors: both loads in flight at once (neither needs the other)
  if (b0 < cur && tid < block) h3m_topk_stage(ik + h3m_slot(pt, b0 * block + tid, page) * D, kt, D, vec);
  for (int i = tid; i < D * HP; i += H3M_TOPK_DEC_THREADS)
    sm[i] = i % HP < Hi ? (float)h3_ld(iq, (t * Hi + i % HP) * D + i / HP) : 0.0f;
  __syncthreads();
  for (long long b = b0; b < cur; b += step) { // the same count in every thread
    float best[HP];
#pragma unroll
    for (int h = 0; h < HP; h++) best[h] = -H3M_INF;
    for (int jj = tid; jj < block; jj += H3M_TOPK_DEC_THREADS) {
      float dot[HP];
      if (b != b0 || jj != tid) h3m_topk_stage(ik + h3m_slot(pt, b * block + jj, page) * D, kt, D, vec);
      h3m_topk_key<HP>(dot, sm, kt, D);
#pragma unroll
      for (int h = 0; h < HP; h++) best[h] = dot[h] > best[h] ? dot[h] : best[h];
    }
    const float m = h3m_group_max<HP, 32>(best);
    if (lane % (32 / HP) == 0) red[warp][lane / (32 / HP)] = m;
    __syncthreads();
    if (tid < Hi) {
      float x = red[0][tid];
#pragma unroll
      for (int w = 1; w < W; w++) x = red[w][tid] > x ? red[w][tid] : x;
      dst[tid * NB + b] = x;
    }
    __syncthreads(); // red is read
  }
}

// Row t's scores and selection (H3_TOPK_SCORE_NAME) for HP >= Hi vectors per key (4 or 8).
template <int HP>
__device__ __forceinline__ void h3m_topk_decode(const Q_T *iq, const K_T *ik, const IX_T *pos,
                                                const IX_T *pt, float *score, unsigned *cnt, IX_T *out,
                                                float *sm, int Hi, int D, int page, int block,
                                                int NB, int topk) {
  const int tid = threadIdx.x, s = blockIdx.y, S = gridDim.y;
  const long long t = blockIdx.x;
  const long long cur = h3m_page_of((long long)pos[t], block); // the row's current block
  if (cur < topk) { // at most topk blocks: all of them, whatever their scores (no ticket taken)
    for (int i = tid; s == 0 && i < Hi * topk; i += H3M_TOPK_DEC_THREADS)
      out[t * Hi * topk + i] = (IX_T)(i % topk <= cur ? i % topk : -1);
    return;
  }
  h3m_topk_score<HP>(iq, ik, pt, t, cur, s, S, sm, score + t * Hi * NB, Hi, D, page, block, NB);
  if (!h3_last_block(cnt + t, (unsigned)S)) return;
  // the last block of the row: its scores (the current block's +inf) into sm [Hi][nb]
  const int nb = (int)cur + 1;
  for (int i = tid; i < Hi * nb; i += H3M_TOPK_DEC_THREADS)
    sm[i] = i % nb == nb - 1 ? H3M_INF : h3_ldcg(score + (t * Hi + i / nb) * NB + i % nb);
  __syncthreads();
  h3m_topk_pick(sm, Hi, nb, topk, out + t * Hi * topk);
}

extern "C" __global__ void __launch_bounds__(H3M_TOPK_DEC_THREADS) H3_TOPK_SCORE_NAME(
    const Q_T *__restrict__ iq, const K_T *__restrict__ ik, const IX_T *__restrict__ pos,
    const IX_T *__restrict__ pt, float *score, unsigned *cnt, IX_T *__restrict__ out, int Hi, int D,
    int page, int block, int NB, int topk, int pt_per, long long NP) {
  H3_DYN_SMEM(float, sm);
  pt += (pt_per > 0 ? (long long)blockIdx.x / pt_per : 0) * NP; // this row's page table
  if (Hi <= 4) h3m_topk_decode<4>(iq, ik, pos, pt, score, cnt, out, sm, Hi, D, page, block, NB, topk);
  else h3m_topk_decode<8>(iq, ik, pos, pt, score, cnt, out, sm, Hi, D, page, block, NB, topk);
}
#endif

#ifdef H3_TOPK_NAME
extern "C" __global__ void __launch_bounds__(H3M_TOPK_THREADS) H3_TOPK_NAME(
    const float *__restrict__ score, const IX_T *__restrict__ pos, IX_T *__restrict__ out,
    long long T, int Hi, int block, int NB, int topk) {
  constexpr int W = H3M_TOPK_THREADS / 32;
  __shared__ long long nbs[W], pick[W][H3M_MAX_TOPK];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long g = (long long)blockIdx.x * W + warp; // the warp's (row, head): t Hi + h
  const long long nb = g < T * Hi ? h3m_page_of((long long)pos[g / Hi], block) + 1 : 0;
  if (lane == 0) nbs[warp] = nb;
  __syncthreads();
  int most = 0; // the block's most rounds: every warp's round count (a warp whose row has at
  for (int w = 0; w < W; w++) // most topk blocks takes them all: no round, no score read)
    most = nbs[w] > topk && topk > most ? topk : most;
  const int k = nb < topk ? (int)nb : topk;
  const float *sr = score + g * NB;
  // round r: the first block in the selection order after round r - 1's (pv, pb): each lane's
  // first among its blocks b = lane + 32 j, then the warp's by shuffles (exact comparisons:
  // the chosen set is the one ranking by scores gives)
  float pv = H3M_INF;
  long long pb = -1;
  for (int r = 0; r < most; r++) {
    float bv = -H3M_INF;
    long long bb = -1;
    for (long long b = lane; r < k && nb > topk && b < nb; b += 32) {
      const float x = b == nb - 1 ? H3M_INF : sr[b];
      if (h3m_topk_before(pv, pb, x, b) && (bb < 0 || h3m_topk_before(x, b, bv, bb))) bv = x, bb = b;
    }
#pragma unroll
    for (int d = 16; d >= 1; d >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, d);
      const long long ob = __shfl_xor_sync(0xffffffffu, bb, d);
      if (ob >= 0 && (bb < 0 || h3m_topk_before(ov, ob, bv, bb))) bv = ov, bb = ob;
    }
    if (lane == 0 && r < k) pick[warp][r] = bb;
    pv = bv, pb = bb;
  }
  __syncthreads(); // the picks of lane 0 seen by the whole warp
  if (g >= T * Hi) return;
  IX_T *o = out + g * topk;
  // the picks ascending: each lane places picks i = lane, lane + 32 by their rank among them
  for (int i = lane; i < topk; i += 32) {
    if (i >= k || nb <= topk) {
      o[i] = (IX_T)(i < k ? i : -1);
      continue;
    }
    const long long b = pick[warp][i];
    int at = 0;
    for (int c = 0; c < k; c++) at += pick[warp][c] < b;
    o[at] = (IX_T)b;
  }
}
#endif
