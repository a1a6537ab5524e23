// sol_attention.cu: the attention of `sol_attention` (ops.def) for ONE segment of len rows on
// tensor cores, after kernels/sol_select.cu's pre-passes (kvs [Hk][nbp / 16][4][16][128] bf16
// the key / value centroids of the segment's nb = ceil(len / 64) blocks split into bf16 hi + lo
// parts, chunks of 16 blocks, zeros past nb up to nbp = nb rounded up to 16; exact
// [Hq][nb][nb] the blocks that query block i of q head n takes key by key).
//   h3cu_sol_fwd (q, k, v bf16 [len, H, 128] at the segment's first row, row strides
//     hq·128 and hk·128) -> o bf16 (row stride hq·128);
//   h3cu_sol_fwd_ws (H3_SOL_FORM=ws; GPU only, sm_90a): the same math warp-specialised, with
//     TMA loads and the exact blocks' products as warpgroup MMAs: see its comment below;
//   h3cu_sol_fwd_wsp (H3_SOL_FORM=wsp): the ws form with two exact key blocks a turn.
// Grid (nb, Hq), 128 threads, H3A_SMEM bytes of dynamic shared memory; 3 blocks per SM (at
// most 168 registers a thread: nvcc -Xptxas -v reports 56 bytes of spills; without the bound
// 173 registers and 2 blocks). Block x takes query block x (rows 64 x .. + 63, those < len)
// of q head y (kv head y / group); warp w its rows 16 w .. + 15, lane l = 4 g + c rows g and
// g + 8 as the M = 16 of mma.m16n8k16. One online softmax in log2 units (c2 = scale·log2 e;
// m, l, O fp32) over:
//   (a) the exact key blocks, ascending: K and V tiles [64][128] bf16 by cp.async into two
//       stages (the next exact tile loads while this one is used; keys past len zeros), 16-byte
//       chunk c of key r at chunk c ^ (r & 7). S = Q K^T by h3_tile_qk (Q's A fragments in
//       registers); keys past len -inf; m' = max(m, rowmax) (quad shuffles); O, l scaled by
//       2^(m - m'); p = 2^(s - m'); l += p (this lane's keys; the quad's sums added at the
//       end); O += bf16(p) V (V by ldmatrix.x4.trans), as the dense flash kernel;
//   (b) the pseudo-keys of the other blocks, 16 blocks at a time on tensor cores:
//       s_j = c2 (q . kc_j), weight n_j (the block's rows): m' over the 16, p_j = n_j 2^(s_j -
//       m'), O += p_j vc_j; kc split into bf16 hi + lo parts, so the scores keep ~2^-17 of
//       relative precision, p and vc rounded to bf16 as the exact keys' P and V (h3a_pseudo).
//       A chunk's four tiles (hi, lo of kc and vc:
//       16 KiB, one contiguous piece of kvs) go into shared memory by cp.async, two stages
//       (the next chunk loads while this one is used), in the layout of the warp-specialised
//       form's TMA boxes (h3a_pat: two 64-column halves in the 128-byte swizzle); the B
//       fragments come by ldmatrix as the exact keys' do.
// Output O / l rounded once to bf16. Against the CPU reference (runtime/cpu/ops_sol.c: natural
// exp, entries in block order, P unrounded): P of exact keys in bf16 (as dense), 2^x by
// ex2.approx, the pseudo-keys' hi + lo scores and bf16 p and vc, other sum orders; NMSE 5e-6 to
// 9e-6 (the most where pseudo-keys hold most of the mass), the dense flash kernel's error.
// Every loop holding an mma, ldmatrix, shuffle or barrier runs as often in every thread of the
// block (the flags of one (n, i) are the block's; host emulation).
#define H3A_BLOCK 64
#define H3A_D 128
#define H3A_THREADS 128
#define H3A_TILE (H3A_BLOCK * H3A_D * 2)  // one K or V tile, bytes
#define H3A_SMEM (2 * 2 * H3A_TILE)       // two stages of K and V: 64 KiB
#define H3A_CHUNK 16                      // pseudo-keys per softmax update (sol_select.cu's H3L_CHUNK)
#define H3A_PTILE (H3A_CHUNK * H3A_D * 2)  // one [16][128] bf16 tile of a chunk of kvs
#define H3A_PSTAGE (4 * H3A_PTILE)         // a chunk's tiles: hi(kc), lo(kc), hi(vc), lo(vc)
#define H3A_INF __int_as_float(0x7f800000) // NVRTC has no INFINITY

// K and V of key block j (keys 64 j .. + 63, zeros past len) of kv head h into a stage (K,
// then V one tile on): this thread's 16-byte chunks
H3_DI void h3a_load(unsigned char *stage, const h3_bf16 *k, const h3_bf16 *v, long long j, int h, long long len,
                    long long ks) {
  uint4 *kd = reinterpret_cast<uint4 *>(stage), *vd = kd + H3A_TILE / 16;
  for (int i = threadIdx.x; i < H3A_TILE / 16; i += H3A_THREADS) { // key i / 16, chunk i % 16
    const int key = i >> 4, ch = i & 15, at = key * 16 + (ch ^ (key & 7));
    const long long r = j * H3A_BLOCK + key, off = r * ks + h * H3A_D + 8 * ch;
    if (r < len) h3_cp16(kd + at, k + off), h3_cp16(vd + at, v + off);
    else kd[at] = uint4{0u, 0u, 0u, 0u}, vd[at] = uint4{0u, 0u, 0u, 0u};
  }
}

// Where 16-byte chunk ch (0..15: dims 8 ch .. + 7) of row r (0..63: tile r / 16, its row r %
// 16) of a chunk of kvs lies in a stage (bytes): two halves [64][64] bf16 (dims 0-63, then
// 64-127, 8 KiB each) of 128-byte rows, chunk ch & 7 of row r at ((ch ^ r) & 7): TMA's 128B
// swizzle, the boxes the warp-specialised form loads; the mma form's cp.async writes the same
H3_DI int h3a_pat(int r, int ch) { return (ch >> 3) * (H3A_PSTAGE / 2) + r * 128 + (((ch ^ r) & 7) << 4); }

// Chunk j0 / 16 of a kv head's kvs (its 4 tiles, contiguous) into a stage (h3a_pat): this
// thread's 16-byte chunks
H3_DI void h3a_load_pseudo(unsigned char *stage, const h3_bf16 *kvh, long long j0) {
  const uint4 *src = reinterpret_cast<const uint4 *>(kvh + j0 * 4 * H3A_D);
  for (int i = threadIdx.x; i < H3A_PSTAGE / 16; i += H3A_THREADS) // row i / 16 of the 64, chunk i % 16
    h3_cp16(reinterpret_cast<uint4 *>(stage + h3a_pat(i >> 4, i & 15)), src + i);
}

// Q's A fragments of this lane (h3_mma_bf16's; also wgmma's for the warp's 16 rows of its
// warpgroup's 64): dims 16 t + 2 c (+ 8) of rows r0 + g, r0 + g + 8 of q head n (row stride
// qs), zeros past len
H3_DI void h3a_load_qa(const h3_bf16 *q, long long qs, int n, long long r0, long long len, unsigned qa[8][4]) {
  const int g = (threadIdx.x & 31) >> 2, c = threadIdx.x & 3;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const bool live = r0 + g + 8 * r < len;
    const unsigned *qr = reinterpret_cast<const unsigned *>(q + (r0 + g + 8 * r) * qs + n * H3A_D);
#pragma unroll
    for (int t = 0; t < 8; t++) {
      qa[t][r] = live ? qr[8 * t + c] : 0u;
      qa[t][2 + r] = live ? qr[8 * t + 4 + c] : 0u;
    }
  }
}

// m' = max(m, the quad's mx) for rows g, g + 8 (mx: this lane's maxima, reduced over the 4
// lanes of its quad here: every lane takes part); alpha = 2^(m - m') returned, l scaled by it
H3_DI void h3a_max(float m[2], float mx[2], float l[2], float alpha[2]) {
#pragma unroll
  for (int r = 0; r < 2; r++) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    const float nm = fmaxf(m[r], mx[r]);
    alpha[r] = h3_exp2_approx(m[r] - nm);
    m[r] = nm, l[r] *= alpha[r];
  }
}

// O's rows scaled: acc[j][e] (row g for e < 2, else g + 8) by alpha[e / 2]
H3_DI void h3a_scale(float acc[16][4], const float alpha[2]) {
#pragma unroll
  for (int j = 0; j < 16; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) acc[j][e] *= alpha[e >> 1];
}

// The end of an online softmax step over NT n-tiles of 8 keys, s[n][e] already c2 times the
// score (-inf: a masked key) of row g (e < 2) or g + 8, mx this lane's row maxima of s: m' =
// max(m, the rows' maxima), p = 2^(s - m') in s, l = l alpha + this lane's p; alpha = 2^(m -
// m') returned for O
template <int NT> H3_DI void h3a_exp(float s[NT][4], float mx[2], float m[2], float l[2], float alpha[2]) {
  h3a_max(m, mx, l, alpha);
#pragma unroll
  for (int n = 0; n < NT; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      s[n][e] = h3_exp2_approx(s[n][e] - m[e >> 1]);
      l[e >> 1] += s[n][e];
    }
}

// The online softmax of one exact tile whose first key is key0, in log2 units: s[n][e] the
// score of row g (e < 2) or g + 8 and key key0 + 8 n + 2 c + (e & 1) (h3_mma_bf16's
// accumulators of 8 n-tiles, also wgmma m64n64's of the warp's rows) becomes c2 s (-inf past
// len), then h3a_exp
H3_DI void h3a_softmax(float s[8][4], long long key0, long long len, float c2, float m[2], float l[2],
                       float alpha[2]) {
  const int c = threadIdx.x & 3;
  float mx[2] = {-H3A_INF, -H3A_INF};
#pragma unroll
  for (int n = 0; n < 8; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      s[n][e] = key0 + 8 * n + 2 * c + (e & 1) < len ? s[n][e] * c2 : -H3A_INF;
      mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
    }
  h3a_exp<8>(s, mx, m, l, alpha);
}

// P = bf16(p) of NT n-tiles (h3a_softmax's s) as the A fragments of NT / 2 k16 steps (keys 16 t
// .. + 15)
template <int NT> H3_DI void h3a_pack_p(const float s[NT][4], unsigned pa[NT / 2][4]) {
#pragma unroll
  for (int t = 0; t < NT / 2; t++) {
    pa[t][0] = h3_bf16x2(s[2 * t][0], s[2 * t][1]), pa[t][1] = h3_bf16x2(s[2 * t][2], s[2 * t][3]);
    pa[t][2] = h3_bf16x2(s[2 * t + 1][0], s[2 * t + 1][1]), pa[t][3] = h3_bf16x2(s[2 * t + 1][2], s[2 * t + 1][3]);
  }
}

// One exact tile (stage ks: K, then V) whose first key is key0 folded into m, l, acc
H3_DI void h3a_exact(const unsigned char *ks, const unsigned qa[8][4], long long key0, long long len, float c2,
                     float m[2], float l[2], float acc[16][4]) {
  const int lane = threadIdx.x & 31;
  float s[8][4], alpha[2];
  h3_tile_qk<4, float, h3_mma_bf16>(ks, qa, s, 0.0f);
  h3a_softmax(s, key0, len, c2, m, l, alpha);
  h3a_scale(acc, alpha);
  unsigned pa[4][4];
  h3a_pack_p<8>(s, pa);
  const h3_bf16 *vs = reinterpret_cast<const h3_bf16 *>(ks + H3A_TILE);
#pragma unroll
  for (int dp = 0; dp < 8; dp++) // dims 16 dp .. + 15: n-tiles 2 dp, 2 dp + 1
#pragma unroll
    for (int t = 0; t < 4; t++) {
      const int row = 16 * t + (lane & 7) + 8 * ((lane >> 3) & 1);
      unsigned f[4];
      h3_ldsm4_trans(f, vs + row * H3A_D + (((2 * dp + (lane >> 4)) ^ (lane & 7)) * 8));
      const unsigned b0[2] = {f[0], f[1]}, b1[2] = {f[2], f[3]};
      h3_mma_bf16(acc[2 * dp], pa[t], b0);
      h3_mma_bf16(acc[2 * dp + 1], pa[t], b1);
    }
}

// The pseudo-keys of blocks j0 .. j0 + H3A_CHUNK - 1 (those < nb and not exact; the others
// weigh 0) folded into m, l, acc on tensor cores, the chunk's tiles at ps (h3a_pat: rows 0-15
// hi(kc), 16-31 lo(kc), 32-47 hi(vc), 48-63 lo(vc)): S = Q KC^T as 2 n-tiles of 8 blocks (per
// k-step hi, then lo: 2 mma), s[u][e] the score of row g (e < 2) or g + 8 and block j0 + 8 u +
// 2 c + (e & 1); p = n_j 2^(s - m'); O += bf16(P) hi(VC) as one k16 step per 8 dims: the value
// side at the exact tiles' precision (P and V in bf16), the scores at nearly fp32 (an error
// there moves p exponentially); lo(vc) is not read.
H3_DI void h3a_pseudo(const unsigned char *ps, const unsigned char *ex, long long j0, long long nb, long long len,
                      const unsigned qa[8][4], float c2, float m[2], float l[2], float acc[16][4]) {
  const int lane = threadIdx.x & 31, c = lane & 3;
  float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}}, mx[2] = {-H3A_INF, -H3A_INF};
#pragma unroll
  for (int u = 0; u < 2; u++)
#pragma unroll
    for (int kp = 0; kp < 4; kp++) { // dims 32 kp .. + 31: k-steps 2 kp, 2 kp + 1
      const int row = 8 * u + (lane & 7), ch = 4 * kp + (lane >> 3);
      unsigned fh[4], fl[4];
      h3_ldsm4(fh, ps + h3a_pat(row, ch));
      h3_ldsm4(fl, ps + h3a_pat(16 + row, ch));
      const unsigned h0[2] = {fh[0], fh[1]}, l0[2] = {fl[0], fl[1]}, h1[2] = {fh[2], fh[3]}, l1[2] = {fl[2], fl[3]};
      h3_mma_bf16(s[u], qa[2 * kp], h0);
      h3_mma_bf16(s[u], qa[2 * kp], l0);
      h3_mma_bf16(s[u], qa[2 * kp + 1], h1);
      h3_mma_bf16(s[u], qa[2 * kp + 1], l1);
    }
  float w[2][2], alpha[2];
#pragma unroll
  for (int u = 0; u < 2; u++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const long long j = j0 + 8 * u + 2 * c + (e & 1);
      w[u][e & 1] = j < nb && !ex[j] ? (float)((len < 64 * j + 64 ? len : 64 * j + 64) - 64 * j) : 0.0f;
      s[u][e] = w[u][e & 1] > 0.0f ? s[u][e] * c2 : -H3A_INF;
      mx[e >> 1] = fmaxf(mx[e >> 1], s[u][e]);
    }
  h3a_max(m, mx, l, alpha);
  // after the exact blocks the running maxima rarely move: O's scaling by 1 skipped (a warp
  // vote, so the skip is the same in every lane; the same bits)
  if (__ballot_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f) != 0u) h3a_scale(acc, alpha);
#pragma unroll
  for (int u = 0; u < 2; u++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      s[u][e] = w[u][e & 1] * h3_exp2_approx(s[u][e] - m[e >> 1]);
      l[e >> 1] += s[u][e];
    }
  // P's A fragments (k = block j0 + k) rounded to bf16, as the exact tiles' P
  const unsigned ph[4] = {h3_bf16x2(s[0][0], s[0][1]), h3_bf16x2(s[0][2], s[0][3]), h3_bf16x2(s[1][0], s[1][1]),
                          h3_bf16x2(s[1][2], s[1][3])};
  const int row = (lane & 7) + 8 * ((lane >> 3) & 1); // this lane's ldmatrix row: block j0 + row
#pragma unroll
  for (int dp = 0; dp < 8; dp++) { // dims 16 dp .. + 15: n-tiles 2 dp, 2 dp + 1
    const int ch = 2 * dp + (lane >> 4);
    unsigned fh[4];
    h3_ldsm4_trans(fh, ps + h3a_pat(32 + row, ch));
#pragma unroll
    for (int x = 0; x < 2; x++) {
      const unsigned bh[2] = {fh[2 * x], fh[2 * x + 1]};
      h3_mma_bf16(acc[2 * dp + x], ph, bh);
    }
  }
}

// The output rows of this lane (r0 + g, + 8 of q head n, row stride qs; those < len): O / l
// rounded once to bf16, l summed over the quad first (every lane calls it: shuffles)
H3_DI void h3a_store(h3_bf16 *o, long long qs, int n, long long r0, long long len, const float acc[16][4],
                     float l[2]) {
  const int g = (threadIdx.x & 31) >> 2, c = threadIdx.x & 3;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    if (r0 + g + 8 * r >= len) continue;
    h3_bf16 *ot = o + (r0 + g + 8 * r) * qs + n * H3A_D;
    const float inv = 1.0f / l[r];
#pragma unroll
    for (int jj = 0; jj < 16; jj++) h3_st2(ot + 8 * jj + 2 * c, acc[jj][2 * r] * inv, acc[jj][2 * r + 1] * inv);
  }
}

extern "C" __global__ void __launch_bounds__(H3A_THREADS, 3) h3cu_sol_fwd(
    const h3_bf16 *__restrict__ q, const h3_bf16 *__restrict__ k, const h3_bf16 *__restrict__ v,
    const h3_bf16 *__restrict__ kvs, const unsigned char *__restrict__ exact,
    h3_bf16 *__restrict__ o, long long len, long long nb, int group, float scale) {
  H3_DYN_SMEM(unsigned char, smem); // stage s at s * 2 * H3A_TILE: K, then V
  const int warp = threadIdx.x >> 5;
  const int n = blockIdx.y, h = n / group;
  const long long i = blockIdx.x, r0 = i * H3A_BLOCK + 16 * warp, qs = (long long)gridDim.y * H3A_D;
  const long long ks = (long long)(gridDim.y / group) * H3A_D;
  const unsigned char *ex = exact + ((long long)n * nb + i) * nb;
  const long long nbp = (nb + H3A_CHUNK - 1) / H3A_CHUNK * H3A_CHUNK;
  const h3_bf16 *kvh = kvs + (long long)h * nbp * 4 * H3A_D; // kv head h's chunks
  const float c2 = scale * 1.4426950408889634f;
  unsigned qa[8][4];
  h3a_load_qa(q, qs, n, r0, len, qa);
  float acc[16][4], m[2] = {-H3A_INF, -H3A_INF}, l[2] = {0.0f, 0.0f};
#pragma unroll
  for (int j = 0; j < 16; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) acc[j][e] = 0.0f;
  // (a) the exact blocks; j the one in use, nx the next (nb: none), stage st holds j
  long long j = 0;
  while (j < nb && !ex[j]) j++;
  if (j < nb) h3a_load(smem, k, v, j, h, len, ks);
  h3_cp_commit();
  for (int st = 0; j < nb; st ^= 1) { // as often in every thread
    long long nx = j + 1;
    while (nx < nb && !ex[nx]) nx++;
    h3_cp_wait_pending<0>();
    __syncthreads(); // tile j is in; every warp is done with the other stage
    if (nx < nb) h3a_load(smem + (st ^ 1) * 2 * H3A_TILE, k, v, nx, h, len, ks);
    h3_cp_commit();
    h3a_exact(smem + st * 2 * H3A_TILE, qa, j * H3A_BLOCK, len, c2, m, l, acc);
    j = nx;
  }
  // (b) the pseudo-keys, chunk j0 / 16 in stage (j0 / 16) & 1 (as often in every thread)
  __syncthreads(); // every warp is done with the exact tiles
  h3a_load_pseudo(smem, kvh, 0);
  h3_cp_commit();
  for (long long j0 = 0; j0 < nb; j0 += H3A_CHUNK) {
    const int st = (int)((j0 / H3A_CHUNK) & 1);
    h3_cp_wait_pending<0>();
    __syncthreads(); // chunk j0 is in; every warp is done with the other stage
    if (j0 + H3A_CHUNK < nb) h3a_load_pseudo(smem + (st ^ 1) * H3A_PSTAGE, kvh, j0 + H3A_CHUNK);
    h3_cp_commit();
    h3a_pseudo(smem + st * H3A_PSTAGE, ex, j0, nb, len, qa, c2, m, l, acc);
  }
  h3a_store(o, qs, n, r0, len, acc, l);
}

#ifndef H3_HOST_EMU
// ---- the warp-specialised forms: h3cu_sol_fwd_ws and h3cu_sol_fwd_wsp (runtime/cuda/cuda_sol.c
// runs them under H3_SOL_FORM=ws / wsp; GPU only, sm_90a: the host emulation has no TMA or
// warpgroup MMA, so tests/sol checks the mma form above and tests/gpu/test_gpu_ops all three on
// the GPU). The same math as h3cu_sol_fwd (h3a_softmax, bf16 P, h3a_pseudo, h3a_store) on
// FlashAttention-3's schedule (kernels/flash_attention.cu), one body for both (h3a_ws_main<KPT>, KPT the keys of an exact turn):
//   h3cu_sol_fwd_ws(tk, tv, tc, q, exact, o, len, nb, group, scale) (KPT 64: a key block a
//     turn): tk, tv the TMA maps of k and v as bf16 [len][Hk 128] (rows past len read as
//     zeros), tc of kvs as bf16 [Hk nbp 4][128] (a chunk of 16 blocks: 64 rows), boxes of 64
//     columns x 64 rows, 128-byte swizzle (runtime/cuda/cuda_sol.c); q, exact, o, len, nb,
//     group, scale as h3cu_sol_fwd's;
//   h3cu_sol_fwd_wsp(the same) (KPT 128: two key blocks a turn, below).
// Grid (ceil(nb / 2), Hq), 3 warpgroups (384 threads), one block per SM; block x takes query
// blocks i0 = 2 x and i0 + 1 (if < nb) of q head y (kv head h = y / group):
//   producer (warpgroup 0, 40 registers by setmaxnreg): thread 0 loads, into the ring of
//     SLOTS slots (h3a_ws_shape; use u in slot u % SLOTS once the consumers released use u -
//     SLOTS), first K and V (64 keys each) of every key block that query block i0 or i0 + 1
//     takes exactly (the union of the two flag rows, ascending), KPT / 64 blocks a slot
//     (h3a_turn), then the nbp / 16 chunks of kvh (16 KiB each, h3a_pat's layout);
//   consumers (warpgroups 1, 2: CW = 0, 1, h3a_ws_consume<CW, KPT>; 232 registers): CW owns
//     query block i0 + CW (warp w its rows 16 w .. + 15 as in the mma form, Q's A fragments in
//     registers) and walks the union a slot at a time: a slot with a block it takes exactly is
//     a turn of
//       S = Q K^T: 8 wgmma m64n{KPT}k16 (A = Q in registers, B = the slot's K, K-major);
//       the online softmax (h3a_turn's: keys of a block it does not take masked; S's
//         accumulators are h3_mma_bf16's n-tiles of the warp's rows), P = bf16(p) in registers
//         (h3a_pack_p: wgmma's A fragments);
//       O += P V: KPT / 16 wgmma m64n128k16 (B = the slot's V, N-major), issued in the turn of
//         the next slot it takes from, so that it runs under S of that slot and its softmax
//         (the O rows scaled by that softmax's alpha once it is done: h3a_scale);
//     a slot of blocks the other consumer alone takes costs a turn in which the pending P V (if
//     any) runs alone. Then the pseudo-keys: h3a_pseudo on each chunk as it arrives
//     (mma.sync; the same for both consumers but the weights: each skips its own exact
//     blocks), and h3a_store. A consumer without a query block (i0 + 1 = nb) takes nothing and
//     stores nothing, but waits for and releases every slot as the other.
// One ring of the union rather than a ring per consumer: neighbouring query blocks take
// mostly the same key blocks (the band |i - j| <= 1, the sinks, similar centroids), so a tile
// loaded once serves both consumers, and one producer order with one release count (8 warps
// per use) is the dense kernel's protocol.
// wsp (H3_SOL_FORM=wsp, opt-in until measured): the union's blocks in pairs (a, b) of
// consecutive union blocks, adjacent in the sequence or not (the reference fixes no grouping
// of the online softmax: the CUDA forms match it within a tolerance), a's K and V in rows 0-63
// of a slot's 128 keys, b's in rows 64-127; one S (m64n128), one softmax over the 128 keys and
// one P V per turn, so a turn's fixed costs (the ping-pong barriers, the row reductions, the O
// rescale, the ring's waits and releases) are paid per 128 keys as in the dense flash kernel.
// The two flag rows differ, so a consumer masks per 64-key half (h3a_softmax_pair): a block it
// does not take, and keys past len. An odd union's last turn holds its one block twice (loaded
// twice: every byte of the slot's V finite, as P = 0 times it must be 0), the copy masked.
// Schedule: the consumers take turns to issue (ping-pong through named barriers 1 and 2,
// h3_turn_wait / h3_turn_pass; one turn per slot of the union each, plus one for the last P
// V), so that one's softmax runs under the other's matrix work; both walk the same union in
// the same pairs, so the turns pair up.
// Synchronisation, mbarriers (h3a_ring): slot s full (1 arrival + the TMA bytes; use u waits
// for parity (u / SLOTS) & 1), empty (8 arrivals: lane 0 of each consumer warp once it is done
// with the slot's use: P V finished, the slot skipped, or the chunk used). A consumer waits for
// a slot's use to be full before it releases it, skipped or not, so no release runs ahead into
// the slot's next use; the slot of a pending P V is released before the use after next is
// reached (a skipped slot flushes it), so the producer (SLOTS >= 3 uses ahead: the pending
// one, the one in hand, the next) never waits on a release that waits on it.
// Shared memory (h3a_ws_shape<KPT>::SMEM, 193 KiB both): 1 KiB of alignment slack, then the
// slots: K [KPT][128] as two [KPT][64] halves (dims 0-63, 64-127) of 128-byte rows in TMA's 128B
// swizzle (16-byte chunk c of row r at c ^ (r & 7); the layout the wgmma descriptors read:
// 1024-byte atoms), block x of the turn in rows 64 x .. + 63 of each half (a TMA box each), V
// one K on likewise; a chunk of kvs in the slot's first 16 KiB (h3a_pat).
#define H3A_WS_THREADS 384

// The forms' shapes by the keys of an exact turn, KPT (64: ws, 128: wsp): the ring of SLOTS
// slots of SLOT bytes (K, then V; or a chunk of kvs), a K or V TILE [KPT][128] as two [KPT][64]
// HALFs; SMEM the dynamic shared memory (1 KiB of alignment slack, then the ring)
template <int KPT> struct h3a_ws_shape {
  static constexpr int SLOTS = KPT == 64 ? 6 : 3, HALF = KPT * 128, TILE = 2 * HALF, SLOT = 2 * TILE;
  static constexpr int SMEM = 1024 + SLOTS * SLOT;
};

// d[32] (+)= A B^T, m64n64k16 bf16 -> fp32: A the A fragment a[4] in registers, B K-major from
// shared memory (descriptor b); acc = 0 overwrites d
H3_DI void h3a_wg_qk(float *d, const unsigned *a, unsigned long long b, int acc) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %36, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
               "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
               "}, {%32, %33, %34, %35}, %37, p, 1, 1, 0;\n}\n"
               : H3_WG_C8(d, 0), H3_WG_C8(d, 8), H3_WG_C8(d, 16), H3_WG_C8(d, 24)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(acc), "l"(b));
}

// The same, m64n128k16: d[64] (+)= A B^T
H3_DI void h3a_wg_qk128(float *d, const unsigned *a, unsigned long long b, int acc) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %68, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" H3_WG_OPS64
               "}, {%64, %65, %66, %67}, %69, p, 1, 1, 0;\n}\n"
               : H3_WG_C64(d, 0)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(acc), "l"(b));
}

// S = Q K^T of the slot whose K has descriptor dk (KPT keys): 8 k-steps of 16 dims (32 bytes
// into a 64-column half)
template <int KPT> H3_DI void h3a_ws_qk(float s[KPT / 8][4], const unsigned qa[8][4], unsigned long long dk) {
#pragma unroll
  for (int kk = 0; kk < 8; kk++) {
    const unsigned long long d =
        dk + (unsigned long long)(((kk >> 2) * h3a_ws_shape<KPT>::HALF + (kk & 3) * 32) >> 4);
    if constexpr (KPT == 64) h3a_wg_qk(&s[0][0], qa[kk], d, kk > 0);
    else h3a_wg_qk128(&s[0][0], qa[kk], d, kk > 0);
  }
}

// O += P V of the slot whose V has descriptor dv (N-major, KPT keys): KPT / 16 k-steps of 16
// keys (2 KiB each)
template <int KPT> H3_DI void h3a_ws_pv(float acc[16][4], const unsigned pa[KPT / 16][4], unsigned long long dv) {
#pragma unroll
  for (int kk = 0; kk < KPT / 16; kk++)
    h3_wgmma128_rs(&acc[0][0], pa[kk], dv + (unsigned long long)(kk * (2048 >> 4)));
}

// The mbarriers: slot s full at bars + 8 s, empty at bars + 8 (SLOTS + s)
template <int KPT> using h3a_ring = h3_ring<h3a_ws_shape<KPT>::SLOTS>;

// A ring position of SLOTS slots: the slot of use u and the parity of that use's full phase
template <int SLOTS> struct h3a_pos {
  int slot = 0;
  unsigned phase = 0;
  H3_DI void next() {
    slot = slot == SLOTS - 1 ? 0 : slot + 1;
    phase ^= slot == 0;
  }
};

// The flags of the block's two query blocks as bitmasks in shared memory (bit j of word j / 32:
// key block j taken exactly), staged once when the block starts: the union walk is on the
// consumers' issuing path, where a flag read from memory costed a load latency per step.
// H3A_WS_MAXNB key blocks at most (runtime/cuda/cuda_sol.c runs the mma form beyond).
#define H3A_WS_MAXNB 8192
H3_DI bool h3a_bit(const unsigned *b, long long j) { return b[j >> 5] >> (j & 31) & 1u; }

// Every thread of the block: the flag rows e0, e1 (null: none, all zero) into bits b[2][nb / 32]
// (a warp a word: a ballot of 32 flags); a barrier must follow before they are read
H3_DI void h3a_stage_bits(unsigned (*b)[H3A_WS_MAXNB / 32], const unsigned char *e0, const unsigned char *e1,
                          long long nb) {
  const int lane = threadIdx.x & 31, words = (int)((nb + 31) / 32);
  for (int w = threadIdx.x >> 5; w < 2 * words; w += H3A_WS_THREADS / 32) { // as often in every lane
    const int r = w / words, x = w % words;
    const unsigned char *row = r ? e1 : e0;
    const long long j = 32LL * x + lane;
    const unsigned word = __ballot_sync(0xffffffffu, row && j < nb && row[j]);
    if (lane == 0) b[r][x] = word;
  }
}

// The first key block >= j that query block i0 (bits b0) or i0 + 1 (b1; null: none) takes
// exactly; nb if none
H3_DI long long h3a_next(const unsigned *b0, const unsigned *b1, long long j, long long nb) {
  for (; j < nb; j = (j | 31) + 1) {
    const unsigned w = (b0[j >> 5] | (b1 ? b1[j >> 5] : 0u)) & (~0u << (j & 31));
    if (w) return (j & ~31LL) + __ffs(w) - 1; // bits past nb are zero
  }
  return nb;
}

// The online softmax of a wsp turn (h3a_turn<128>): s[n][e] wgmma m64n128's accumulators, the
// score of row g (e < 2) or g + 8 and key 8 (n & 7) + 2 c + (e & 1) of the turn's block n >> 3
// (its half of the slot), becomes c2 s where that key is below lim[n >> 3] (-inf from there:
// keys past len, a block this consumer does not take), then h3a_exp
H3_DI void h3a_softmax_pair(float s[16][4], const int lim[2], float c2, float m[2], float l[2], float alpha[2]) {
  // the compares against immediates (8 (n & 7) + (e & 1) < lim - 2 c): sixteen key offsets of
  // this lane hoisted out of the turns cost ptxas spills
  const int c = threadIdx.x & 3, lc[2] = {lim[0] - 2 * c, lim[1] - 2 * c};
  float mx[2] = {-H3A_INF, -H3A_INF};
#pragma unroll
  for (int n = 0; n < 16; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      s[n][e] = 8 * (n & 7) + (e & 1) < lc[n >> 3] ? s[n][e] * c2 : -H3A_INF;
      mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
    }
  h3a_exp<16>(s, mx, m, l, alpha);
}

// A turn of the exact phase: the union's blocks of one use of the ring (bits b0, b1 as
// h3a_next's), first the first union block, then next() the turn after. block(x): the key
// block whose K and V go into rows 64 x .. + 63 of the slot's halves; take(bx): whether the
// consumer of flags bx (not null) takes a block of the turn exactly (wsp: and which keys);
// softmax: the online softmax of that consumer's S of the turn, after a take that was true.
template <int KPT> struct h3a_turn;
// ws: one union block a
template <> struct h3a_turn<64> {
  long long a;
  H3_DI h3a_turn(const unsigned *b0, const unsigned *b1, long long nb) : a(h3a_next(b0, b1, 0, nb)) {}
  H3_DI void next(const unsigned *b0, const unsigned *b1, long long nb) { a = h3a_next(b0, b1, a + 1, nb); }
  H3_DI long long block(int, long long) const { return a; }
  H3_DI bool take(const unsigned *bx, long long, long long) const { return h3a_bit(bx, a); }
  H3_DI void softmax(float s[8][4], long long len, float c2, float m[2], float l[2], float alpha[2]) const {
    h3a_softmax(s, a * H3A_BLOCK, len, c2, m, l, alpha);
  }
};
// wsp: two consecutive union blocks a, b (b = nb: none, a the union's last; the slot then
// holds a twice, the copy masked)
template <> struct h3a_turn<128> {
  long long a, b;
  int lim[2]; // take's: the live keys of block a, b (64; fewer in a segment's last; 0: masked)
  H3_DI h3a_turn(const unsigned *b0, const unsigned *b1, long long nb)
      : a(h3a_next(b0, b1, 0, nb)), b(h3a_next(b0, b1, a + 1, nb)) {}
  H3_DI void next(const unsigned *b0, const unsigned *b1, long long nb) {
    a = h3a_next(b0, b1, b + 1, nb);
    b = h3a_next(b0, b1, a + 1, nb);
  }
  H3_DI long long block(int x, long long nb) const { return x && b < nb ? b : a; }
  H3_DI bool take(const unsigned *bx, long long nb, long long len) {
#pragma unroll
    for (int x = 0; x < 2; x++) {
      const long long j = x ? b : a, live = len - j * H3A_BLOCK;
      lim[x] = j < nb && h3a_bit(bx, j) ? (int)(live < H3A_BLOCK ? live : H3A_BLOCK) : 0;
    }
    return lim[0] + lim[1] > 0;
  }
  H3_DI void softmax(float s[16][4], long long, float c2, float m[2], float l[2], float alpha[2]) const {
    h3a_softmax_pair(s, lim, c2, m, l, alpha);
  }
};

// The producer thread: the union's K and V tiles (columns kvcol .. + 127 of tk, tv), a turn a
// slot, then the nbp / 16 chunks of kvs (rows crow + 64 c of tc) into the ring at ss
template <int KPT>
H3_DI void h3a_ws_produce(const h3_tmap *tk, const h3_tmap *tv, const h3_tmap *tc, unsigned ss, h3a_ring<KPT> ring,
                          const unsigned *b0, const unsigned *b1, long long nb, int kvcol, int crow) {
  using sh = h3a_ws_shape<KPT>;
  h3_prefetch_map(tk);
  h3_prefetch_map(tv);
  h3_prefetch_map(tc);
  int u = 0; // uses of the ring so far
  // the next use's slot once the consumers released its previous use, full expecting bytes
  auto claim = [&](unsigned bytes) {
    const int s = u % sh::SLOTS;
    if (u >= sh::SLOTS) h3_bar_wait(ring.empty(s), (unsigned)((u / sh::SLOTS - 1) & 1));
    h3_bar_expect(ring.full(s), bytes);
    u++;
    return s;
  };
  for (h3a_turn<KPT> t(b0, b1, nb); t.a < nb; t.next(b0, b1, nb)) {
    const int s = claim(sh::SLOT), row[2] = {(int)(t.block(0, nb) * H3A_BLOCK), (int)(t.block(1, nb) * H3A_BLOCK)};
    const unsigned dk = ss + (unsigned)(s * sh::SLOT), dv = dk + sh::TILE;
#pragma unroll
    for (int x = 0; x < KPT / H3A_BLOCK; x++) { // block x: a box of 64 rows x 64 columns each
      const unsigned at = (unsigned)(x * H3A_BLOCK * 128);
      h3_tma(dk + at, tk, kvcol, row[x], ring.full(s));
      h3_tma(dk + sh::HALF + at, tk, kvcol + 64, row[x], ring.full(s));
      h3_tma(dv + at, tv, kvcol, row[x], ring.full(s));
      h3_tma(dv + sh::HALF + at, tv, kvcol + 64, row[x], ring.full(s));
    }
  }
  for (long long j0 = 0; j0 < nb; j0 += H3A_CHUNK) {
    const int s = claim(H3A_PSTAGE), row = crow + (int)(j0 / H3A_CHUNK) * 64;
    const unsigned dc = ss + (unsigned)(s * sh::SLOT);
    h3_tma(dc, tc, 0, row, ring.full(s));
    h3_tma(dc + H3A_PSTAGE / 2, tc, 64, row, ring.full(s));
  }
}

// Consumer warpgroup CW (1 + CW of the block): query block i0 + CW of q head n (flags e0 / e1
// of blocks i0, i0 + 1, staged as bits b0 / b1; e1, b1 null: no block i0 + 1) over the
// union's tiles, KPT keys a turn, then the chunks of kvs, in the ring at ss (sg: the same as a
// generic pointer), then its output rows (a template: the barrier ids are uniform)
template <int CW, int KPT>
H3_DI void h3a_ws_consume(unsigned ss, const unsigned char *sg, h3a_ring<KPT> ring, const h3_bf16 *q,
                          const unsigned char *e0, const unsigned char *e1, const unsigned *b0, const unsigned *b1,
                          h3_bf16 *o, long long len, long long nb, long long qs, int n, long long i0, float c2) {
  using sh = h3a_ws_shape<KPT>;
  constexpr int mine = 1 + CW, other = 2 - CW;
  constexpr unsigned long long SLOT = sh::SLOT >> 4; // a slot in descriptor units
  const int lane = threadIdx.x & 31;
  const unsigned char *ex = CW ? e1 : e0; // this consumer's flags (null: no query block)
  const unsigned *bx = CW ? b1 : b0;      // and as bits
  const long long r0 = (i0 + CW) * H3A_BLOCK + 16 * ((threadIdx.x >> 5) & 3); // the warp's first row
  unsigned qa[8][4], pa[KPT / 16][4]; // Q's A fragments; P of the pending turn
  h3a_load_qa(q, qs, n, r0, len, qa);
  // descriptors of slot 0's K (K-major: SBO 8 rows of 128 bytes) and V (N-major: LBO the next
  // 64 columns, SBO the next 8 keys)
  const unsigned long long dk = h3_wg_desc(ss, 16, 1024), dv = h3_wg_desc(ss + sh::TILE, sh::HALF, 1024);
  float acc[16][4], s[KPT / 8][4], m[2] = {-H3A_INF, -H3A_INF}, l[2] = {0.0f, 0.0f}, alpha[2];
#pragma unroll
  for (int j = 0; j < 16; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) acc[j][e] = 0.0f;
  h3a_pos<sh::SLOTS> at; // the ring position of the turn in hand
  int pend = -1;         // the slot of the turn whose P V is pending (-1: none)
  // warpgroup 0 goes first: warpgroup 1 opens its barrier once and skips its last pass
  if (CW == 1) h3_turn_pass(1);
  for (h3a_turn<KPT> t(b0, b1, nb); t.a < nb; t.next(b0, b1, nb), at.next()) {
    h3_bar_wait(ring.full(at.slot), at.phase);
    h3_turn_wait(mine);
    const bool take = bx && t.take(bx, nb, len);
    if (take && pend >= 0) { // S of this turn and the pending P V in flight together
      h3_wg_fence();
      h3a_ws_qk<KPT>(s, qa, dk + at.slot * SLOT);
      h3_wg_commit();
      h3a_ws_pv<KPT>(acc, pa, dv + pend * SLOT);
      h3_wg_commit();
      h3_turn_pass(other);
      h3_wg_wait<1>();
      h3_wg_hold<KPT / 2>(&s[0][0]);
      t.softmax(s, len, c2, m, l, alpha);
      h3_wg_wait<0>();
      h3_wg_hold<64>(&acc[0][0]);
      if (lane == 0) h3_bar_arrive(ring.empty(pend));
      h3a_scale(acc, alpha);
      h3a_pack_p<KPT / 8>(s, pa);
    } else if (take) { // S alone (ptxas serialises every wgmma of a turn whose P V is optional)
      h3_wg_fence();
      h3a_ws_qk<KPT>(s, qa, dk + at.slot * SLOT);
      h3_wg_commit();
      h3_turn_pass(other);
      h3_wg_wait<0>();
      h3_wg_hold<KPT / 2>(&s[0][0]);
      t.softmax(s, len, c2, m, l, alpha);
      h3a_scale(acc, alpha);
      h3a_pack_p<KPT / 8>(s, pa);
    } else { // the other's blocks: the pending P V alone, this slot released at once
      if (pend >= 0) {
        h3_wg_fence();
        h3a_ws_pv<KPT>(acc, pa, dv + pend * SLOT);
        h3_wg_commit();
      }
      h3_turn_pass(other);
      h3_wg_wait<0>();
      h3_wg_hold<64>(&acc[0][0]);
      if (lane == 0) {
        if (pend >= 0) h3_bar_arrive(ring.empty(pend));
        h3_bar_arrive(ring.empty(at.slot));
      }
    }
    pend = take ? at.slot : -1;
  }
  // the last turn: the pending P V
  h3_turn_wait(mine);
  if (pend >= 0) {
    h3_wg_fence();
    h3a_ws_pv<KPT>(acc, pa, dv + pend * SLOT);
    h3_wg_commit();
  }
  if (CW == 0) h3_turn_pass(other);
  h3_wg_wait<0>();
  h3_wg_hold<64>(&acc[0][0]);
  if (pend >= 0 && lane == 0) h3_bar_arrive(ring.empty(pend));
  // the pseudo-keys, a chunk of kvs per use of the ring
  for (long long j0 = 0; j0 < nb; j0 += H3A_CHUNK, at.next()) {
    h3_bar_wait(ring.full(at.slot), at.phase);
    if (ex) h3a_pseudo(sg + at.slot * sh::SLOT, ex, j0, nb, len, qa, c2, m, l, acc);
    __syncwarp();
    if (lane == 0) h3_bar_arrive(ring.empty(at.slot));
  }
  if (ex) h3a_store(o, qs, n, r0, len, acc, l);
}

// The kernels' parameters and their body (KPT keys a turn), each kernel's shared memory passed
// in: raw the dynamic part (h3a_ws_shape<KPT>::SMEM bytes), bars the ring's 2 SLOTS mbarriers,
// fbits the flag rows' bits
#define H3A_WS_PARAMS                                                                                        \
  const __grid_constant__ h3_tmap tk, const __grid_constant__ h3_tmap tv, const __grid_constant__ h3_tmap tc, \
      const h3_bf16 *__restrict__ q, const unsigned char *__restrict__ exact, h3_bf16 *__restrict__ o,        \
      long long len, long long nb, int group, float scale
template <int KPT>
H3_DI void h3a_ws_main(const h3_tmap *tk, const h3_tmap *tv, const h3_tmap *tc, const h3_bf16 *q,
                       const unsigned char *exact, h3_bf16 *o, long long len, long long nb, int group, float scale,
                       unsigned char *raw, unsigned long long *bars, unsigned (*fbits)[H3A_WS_MAXNB / 32]) {
  const unsigned ss = (h3_smem_addr(raw) + 1023u) & ~1023u; // the slots
  const unsigned char *sg = raw + (ss - h3_smem_addr(raw));
  const h3a_ring<KPT> ring{h3_smem_addr(bars)};
  const int tid = threadIdx.x, wg = tid >> 7, n = blockIdx.y, h = n / group;
  const long long i0 = 2LL * blockIdx.x, qs = (long long)gridDim.y * H3A_D;
  const unsigned char *e0 = exact + ((long long)n * nb + i0) * nb, *e1 = i0 + 1 < nb ? e0 + nb : nullptr;
  const unsigned *b0 = fbits[0], *b1 = e1 ? fbits[1] : nullptr;
  h3a_stage_bits(fbits, e0, e1, nb);
  if (tid == 0) ring.init(8);
  __syncthreads();
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    const long long nbp = (nb + H3A_CHUNK - 1) / H3A_CHUNK * H3A_CHUNK;
    if (tid == 0) h3a_ws_produce<KPT>(tk, tv, tc, ss, ring, b0, b1, nb, h * H3A_D, (int)(h * nbp * 4));
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const float c2 = scale * 1.4426950408889634f;
  if (wg == 1) h3a_ws_consume<0, KPT>(ss, sg, ring, q, e0, e1, b0, b1, o, len, nb, qs, n, i0, c2);
  else h3a_ws_consume<1, KPT>(ss, sg, ring, q, e0, e1, b0, b1, o, len, nb, qs, n, i0, c2);
}

extern "C" __global__ void __launch_bounds__(H3A_WS_THREADS, 1) h3cu_sol_fwd_ws(H3A_WS_PARAMS) {
  extern __shared__ unsigned char h3a_raw[];
  __shared__ unsigned long long h3a_bar_words[2 * h3a_ws_shape<64>::SLOTS];
  __shared__ unsigned h3a_fbits[2][H3A_WS_MAXNB / 32];
  h3a_ws_main<64>(&tk, &tv, &tc, q, exact, o, len, nb, group, scale, h3a_raw, h3a_bar_words, h3a_fbits);
}

extern "C" __global__ void __launch_bounds__(H3A_WS_THREADS, 1) h3cu_sol_fwd_wsp(H3A_WS_PARAMS) {
  extern __shared__ unsigned char h3a_raw[];
  __shared__ unsigned long long h3a_bar_words[2 * h3a_ws_shape<128>::SLOTS];
  __shared__ unsigned h3a_fbits[2][H3A_WS_MAXNB / 32];
  h3a_ws_main<128>(&tk, &tv, &tc, q, exact, o, len, nb, group, scale, h3a_raw, h3a_bar_words, h3a_fbits);
}
#endif
