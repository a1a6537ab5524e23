// sol_attention.cu: the attention of `sol_attention` (ops.def) for ONE segment of len rows on
// tensor cores, after kernels/sol_select.cu's pre-passes (kvs [Hk][nbp / 16][4][16][128] bf16
// the key / value centroids of the segment's nb = ceil(len / 64) blocks split into bf16 hi + lo
// parts, chunks of 16 blocks, zeros past nb up to nbp = nb rounded up to 16; exact
// [Hq][nb][nb] the blocks that query block i of q head n takes key by key).
//   h3cu_sol_fwd (q, k, v bf16 [len, H, 128] at the segment's first row, row strides
//     hq·128 and hk·128) -> o bf16 (row stride hq·128).
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
//       m'), O += p_j vc_j; kc, vc and p split into bf16 hi + lo parts, so the products keep
//       ~2^-17 of relative precision (h3a_pseudo). A chunk's four tiles (hi, lo of kc and vc:
//       16 KiB, one contiguous piece of kvs) go into shared memory by cp.async, two stages
//       (the next chunk loads while this one is used), in the exact tiles' swizzle; the B
//       fragments come by ldmatrix as the exact keys' do.
// Output O / l rounded once to bf16. Against the CPU reference (runtime/cpu/ops_sol.c: natural
// exp, entries in block order, P unrounded): P of exact keys in bf16 (as dense), 2^x by
// ex2.approx, the pseudo-keys' hi + lo products, other sum orders; NMSE ~5e-6, the dense
// flash kernel's error.
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

// Chunk j0 / 16 of a kv head's kvs (its 4 tiles, contiguous) into a stage: this thread's
// 16-byte chunks, chunk c of tile row r at chunk c ^ (r & 7)
H3_DI void h3a_load_pseudo(unsigned char *stage, const h3_bf16 *kvh, long long j0) {
  const uint4 *src = reinterpret_cast<const uint4 *>(kvh + j0 * 4 * H3A_D);
  uint4 *dst = reinterpret_cast<uint4 *>(stage);
  for (int i = threadIdx.x; i < H3A_PSTAGE / 16; i += H3A_THREADS) { // row i / 16 of the 64, chunk i % 16
    const int row = i >> 4, ch = i & 15;
    h3_cp16(dst + row * 16 + (ch ^ (row & 7)), src + i);
  }
}

// m' = max(m, the quad's mx) for rows g, g + 8 (mx: this lane's maxima, reduced over the 4
// lanes of its quad here: every lane takes part); O and l scaled by 2^(m - m')
H3_DI void h3a_rescale(float m[2], float mx[2], float l[2], float acc[16][4]) {
  float alpha[2];
#pragma unroll
  for (int r = 0; r < 2; r++) {
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
    mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    const float nm = fmaxf(m[r], mx[r]);
    alpha[r] = h3_exp2_approx(m[r] - nm);
    m[r] = nm, l[r] *= alpha[r];
  }
#pragma unroll
  for (int j = 0; j < 16; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) acc[j][e] *= alpha[e >> 1];
}

// One exact tile (stage ks: K, then V) whose first key is key0 folded into m, l, acc
H3_DI void h3a_exact(const unsigned char *ks, const unsigned qa[8][4], long long key0, long long len, float c2,
                     float m[2], float l[2], float acc[16][4]) {
  const int lane = threadIdx.x & 31, c = lane & 3;
  float s[8][4];
  h3_tile_qk<4, float, h3_mma_bf16>(ks, qa, s, 0.0f);
  float mx[2] = {-H3A_INF, -H3A_INF};
#pragma unroll
  for (int n = 0; n < 8; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      s[n][e] = key0 + 8 * n + 2 * c + (e & 1) < len ? s[n][e] * c2 : -H3A_INF;
      mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
    }
  h3a_rescale(m, mx, l, acc);
  unsigned pa[4][4]; // P = bf16(p) as the A fragments of 4 k16 steps (keys 16 t .. + 15)
#pragma unroll
  for (int n = 0; n < 8; n++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      s[n][e] = h3_exp2_approx(s[n][e] - m[e >> 1]);
      l[e >> 1] += s[n][e];
    }
#pragma unroll
  for (int t = 0; t < 4; t++) {
    pa[t][0] = h3_bf16x2(s[2 * t][0], s[2 * t][1]), pa[t][1] = h3_bf16x2(s[2 * t][2], s[2 * t][3]);
    pa[t][2] = h3_bf16x2(s[2 * t + 1][0], s[2 * t + 1][1]), pa[t][3] = h3_bf16x2(s[2 * t + 1][2], s[2 * t + 1][3]);
  }
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

// hi = bf16 pair of (a, b), lo = bf16 pair of the remainders: hi + lo holds a and b to ~2^-17
// relative (two bf16 products on tensor cores give a nearly fp32 one)
H3_DI void h3a_split(float a, float b, unsigned &hi, unsigned &lo) {
  hi = h3_bf16x2(a, b);
  lo = h3_bf16x2(a - __int_as_float((int)(hi << 16)), b - __int_as_float((int)(hi & 0xffff0000u)));
}

// The pseudo-keys of blocks j0 .. j0 + H3A_CHUNK - 1 (those < nb and not exact; the others
// weigh 0) folded into m, l, acc on tensor cores, the chunk's tiles at ps (h3a_load_pseudo):
// S = Q KC^T as 2 n-tiles of 8 blocks (per k-step hi, then lo: 2 mma), s[u][e] the score of
// row g (e < 2) or g + 8 and block j0 + 8 u + 2 c + (e & 1); p = n_j 2^(s - m'); O += P VC as
// one k16 step per 8 dims (P split too: hi·hi + hi·lo + lo·hi).
H3_DI void h3a_pseudo(const unsigned char *ps, const unsigned char *ex, long long j0, long long nb, long long len,
                      const unsigned qa[8][4], float c2, float m[2], float l[2], float acc[16][4]) {
  const int lane = threadIdx.x & 31, c = lane & 3;
  float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}}, mx[2] = {-H3A_INF, -H3A_INF};
#pragma unroll
  for (int u = 0; u < 2; u++)
#pragma unroll
    for (int kp = 0; kp < 4; kp++) { // dims 32 kp .. + 31: k-steps 2 kp, 2 kp + 1
      const int at = (8 * u + (lane & 7)) * 256 + (((4 * kp + (lane >> 3)) ^ (lane & 7)) * 16);
      unsigned fh[4], fl[4];
      h3_ldsm4(fh, ps + at);
      h3_ldsm4(fl, ps + H3A_PTILE + at);
      const unsigned h0[2] = {fh[0], fh[1]}, l0[2] = {fl[0], fl[1]}, h1[2] = {fh[2], fh[3]}, l1[2] = {fl[2], fl[3]};
      h3_mma_bf16(s[u], qa[2 * kp], h0);
      h3_mma_bf16(s[u], qa[2 * kp], l0);
      h3_mma_bf16(s[u], qa[2 * kp + 1], h1);
      h3_mma_bf16(s[u], qa[2 * kp + 1], l1);
    }
  float w[2][2];
#pragma unroll
  for (int u = 0; u < 2; u++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const long long j = j0 + 8 * u + 2 * c + (e & 1);
      w[u][e & 1] = j < nb && !ex[j] ? (float)((len < 64 * j + 64 ? len : 64 * j + 64) - 64 * j) : 0.0f;
      s[u][e] = w[u][e & 1] > 0.0f ? s[u][e] * c2 : -H3A_INF;
      mx[e >> 1] = fmaxf(mx[e >> 1], s[u][e]);
    }
  h3a_rescale(m, mx, l, acc);
#pragma unroll
  for (int u = 0; u < 2; u++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      s[u][e] = w[u][e & 1] * h3_exp2_approx(s[u][e] - m[e >> 1]);
      l[e >> 1] += s[u][e];
    }
  unsigned ph[4], pl[4]; // P's A fragments (k = block j0 + k), hi and lo
  h3a_split(s[0][0], s[0][1], ph[0], pl[0]);
  h3a_split(s[0][2], s[0][3], ph[1], pl[1]);
  h3a_split(s[1][0], s[1][1], ph[2], pl[2]);
  h3a_split(s[1][2], s[1][3], ph[3], pl[3]);
  const int row = (lane & 7) + 8 * ((lane >> 3) & 1); // this lane's ldmatrix row: block j0 + row
#pragma unroll
  for (int dp = 0; dp < 8; dp++) { // dims 16 dp .. + 15: n-tiles 2 dp, 2 dp + 1
    const int at = row * 256 + (((2 * dp + (lane >> 4)) ^ (lane & 7)) * 16);
    unsigned fh[4], fl[4];
    h3_ldsm4_trans(fh, ps + 2 * H3A_PTILE + at);
    h3_ldsm4_trans(fl, ps + 3 * H3A_PTILE + at);
#pragma unroll
    for (int x = 0; x < 2; x++) {
      const unsigned bh[2] = {fh[2 * x], fh[2 * x + 1]}, bl[2] = {fl[2 * x], fl[2 * x + 1]};
      h3_mma_bf16(acc[2 * dp + x], ph, bh);
      h3_mma_bf16(acc[2 * dp + x], ph, bl);
      h3_mma_bf16(acc[2 * dp + x], pl, bh);
    }
  }
}

extern "C" __global__ void __launch_bounds__(H3A_THREADS, 3) h3cu_sol_fwd(
    const h3_bf16 *__restrict__ q, const h3_bf16 *__restrict__ k, const h3_bf16 *__restrict__ v,
    const h3_bf16 *__restrict__ kvs, const unsigned char *__restrict__ exact,
    h3_bf16 *__restrict__ o, long long len, long long nb, int group, float scale) {
  H3_DYN_SMEM(unsigned char, smem); // stage s at s * 2 * H3A_TILE: K, then V
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  const int n = blockIdx.y, h = n / group;
  const long long i = blockIdx.x, r0 = i * H3A_BLOCK + 16 * warp, qs = (long long)gridDim.y * H3A_D;
  const long long ks = (long long)(gridDim.y / group) * H3A_D;
  const unsigned char *ex = exact + ((long long)n * nb + i) * nb;
  const long long nbp = (nb + H3A_CHUNK - 1) / H3A_CHUNK * H3A_CHUNK;
  const h3_bf16 *kvh = kvs + (long long)h * nbp * 4 * H3A_D; // kv head h's chunks
  const float c2 = scale * 1.4426950408889634f;
  unsigned qa[8][4]; // Q's A fragments: dims 16 t + 2 c (+ 8) of rows g, g + 8 (zeros past len)
  const unsigned *qr[2] = {reinterpret_cast<const unsigned *>(q + (r0 + g) * qs + n * H3A_D),
                           reinterpret_cast<const unsigned *>(q + (r0 + g + 8) * qs + n * H3A_D)};
  const bool live[2] = {r0 + g < len, r0 + g + 8 < len};
#pragma unroll
  for (int t = 0; t < 8; t++)
#pragma unroll
    for (int r = 0; r < 2; r++) {
      qa[t][r] = live[r] ? qr[r][8 * t + c] : 0u;
      qa[t][2 + r] = live[r] ? qr[r][8 * t + 4 + c] : 0u;
    }
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
#pragma unroll
  for (int r = 0; r < 2; r++) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    if (!live[r]) continue;
    h3_bf16 *ot = o + (r0 + g + 8 * r) * qs + n * H3A_D;
    const float inv = 1.0f / l[r];
#pragma unroll
    for (int jj = 0; jj < 16; jj++) h3_st2(ot + 8 * jj + 2 * c, acc[jj][2 * r] * inv, acc[jj][2 * r + 1] * inv);
  }
}
