// sol_select.cu: the pre-passes of `sol_attention` (ops.def) for ONE segment of len rows cut
// into nb = ceil(len / 64) blocks (block b: rows 64 b .. min(len, 64 b + 64) - 1, n_b rows),
// head_dim 128, with the CPU reference's arithmetic (runtime/cpu/ops_sol.c): every sum fp32,
// in its order, one rounding per operation (the _rn intrinsics: no contraction into fma), so
// the centroids, moments and the exact-block selection are bitwise the reference's.
//   h3cu_sol_centroids  grid (nbp, 2 Hk + Hq), 128 threads (thread d: dim d), nbp = nb rounded
//                       up to 16 (H3L_CHUNK). y < Hk: kc of kv head y; y < 2 Hk: vc of kv head
//                       y - Hk; else qbar of q head y - 2 Hk: the block's rows summed in
//                       ascending order, then / n_b. Outputs kc and qbar [H][nb][128] f32, and
//                       the centroids of kc and vc split for sol_attention.cu's tensor cores:
//                       kvs [Hk][nbp / 16][4][16][128] bf16, per kv head and chunk of 16 blocks
//                       the tiles hi(kc), lo(kc), hi(vc), lo(vc) with hi = bf16(c) and lo =
//                       bf16(c - hi) (both rounded to nearest: hi + lo holds c to ~2^-17);
//                       blocks b >= nb write zeros into kvs (and nothing else).
//   h3cu_sol_kstats     grid (Hk), 128 threads: per dim, kmean = (sum_b kc_b, b ascending) / nb
//                       and kvar = (sum_b (kc_b - kmean)^2) / nb ([Hk][128] f32).
//   h3cu_sol_select     grid (ceil(nb / H3L_SELECT_QB), Hq), 128 threads: query blocks i = QB x
//                       .. QB x + QB - 1 (< nb) of q head n = y (kv head n / group): c = scale;
//                       mu = c (qbar . kmean); sigma^2 = c^2 sum_d qbar_d^2 kvar_d (diag) or
//                       c^2 ((sum_b (qbar . (kc_b - kmean))^2, b ascending) / nb)
//                       (exact_cov); theta = mu + tau sqrt(sigma^2 + 1e-6); key block j is
//                       exact iff c (qbar . kc_j) > theta, |i - j| <= 1, or its segment rows
//                       [64 j, 64 j + n_j) meet [sink0, sink1). Dot products d ascending from 0.
//                       Output exact [Hq][nb][nb] bytes 0 / 1 (row (n, i), column j).
// Every block's threads run every loop that holds a barrier as often (host emulation).
#define H3L_BLOCK 64
#define H3L_D 128
#define H3L_CHUNK 16 // blocks per chunk of kvs (sol_attention.cu's H3A_CHUNK)

// The q . x of 128 dims, d ascending, one rounding per product and sum (ops_sol.c's dotf)
H3_DI float h3l_dot(const float *q, const float *x) {
  float s = 0.0f;
  for (int d = 0; d < H3L_D; d++) s = __fadd_rn(s, __fmul_rn(q[d], x[d]));
  return s;
}

// Element (b, d) of tile t (0: hi(kc), 1: lo(kc), 2: hi(vc), 3: lo(vc)) of kv head h in kvs
H3_DI long long h3l_kvs_at(int h, long long nbp, int t, long long b, int d) {
  return (((long long)h * (nbp / H3L_CHUNK) + b / H3L_CHUNK) * 4 + t) * (H3L_CHUNK * H3L_D) +
         (b % H3L_CHUNK) * H3L_D + d;
}

extern "C" __global__ void __launch_bounds__(H3L_D) h3cu_sol_centroids(
    const h3_bf16 *__restrict__ q, const h3_bf16 *__restrict__ k, const h3_bf16 *__restrict__ v, long long len,
    long long nb, int hq, int hk, float *__restrict__ kc, h3_bf16 *__restrict__ kvs, float *__restrict__ qbar) {
  const int d = threadIdx.x, y = blockIdx.y;
  const long long b = blockIdx.x, nbp = gridDim.x, r0 = b * H3L_BLOCK;
  const long long r1 = len < r0 + H3L_BLOCK ? len : r0 + H3L_BLOCK;
  const int which = y < hk ? 0 : y < 2 * hk ? 1 : 2, h = which == 2 ? y - 2 * hk : y - which * hk;
  if (b >= nb) { // the last chunk's padding: zero pseudo-keys
    if (which < 2)
      for (int t = 0; t < 2; t++) kvs[h3l_kvs_at(h, nbp, 2 * which + t, b, d)] = __float2bfloat16_rn(0.0f);
    return;
  }
  const h3_bf16 *x = which == 0 ? k : which == 1 ? v : q;
  const long long stride = (long long)(which == 2 ? hq : hk) * H3L_D;
  float s = 0.0f;
  for (long long r = r0; r < r1; r++) s = __fadd_rn(s, h3_w(x[r * stride + h * H3L_D + d]));
  const float c = __fdiv_rn(s, (float)(r1 - r0));
  if (which == 2) {
    qbar[((long long)h * nb + b) * H3L_D + d] = c;
    return;
  }
  if (which == 0) kc[((long long)h * nb + b) * H3L_D + d] = c;
  const h3_bf16 hi = __float2bfloat16_rn(c);
  kvs[h3l_kvs_at(h, nbp, 2 * which, b, d)] = hi;
  kvs[h3l_kvs_at(h, nbp, 2 * which + 1, b, d)] = __float2bfloat16_rn(__fsub_rn(c, __bfloat162float(hi)));
}

extern "C" __global__ void __launch_bounds__(H3L_D) h3cu_sol_kstats(const float *__restrict__ kc, long long nb,
                                                                   float *__restrict__ kmean,
                                                                   float *__restrict__ kvar) {
  const int d = threadIdx.x, h = blockIdx.x;
  const float *x = kc + (long long)h * nb * H3L_D + d;
  float acc = 0.0f, var = 0.0f;
  for (long long b = 0; b < nb; b++) acc = __fadd_rn(acc, x[b * H3L_D]);
  const float mean = __fdiv_rn(acc, (float)nb);
  for (long long b = 0; b < nb; b++) {
    const float e = __fsub_rn(x[b * H3L_D], mean);
    var = __fadd_rn(var, __fmul_rn(e, e));
  }
  kmean[h * H3L_D + d] = mean;
  kvar[h * H3L_D + d] = __fdiv_rn(var, (float)nb);
}

// h3cu_sol_select's shape: H3L_SELECT_QB query blocks per CTA (grid x = ceil(nb / QB)), which
// share each staged tile of key centroids: key blocks j0 .. j0 + 127 (thread t: j0 + t) by 32
// dims at a time, rows padded to 33 floats (thread t reads row t: distinct banks), loaded
// row-contiguous (coalesced). A thread's dot products still run d ascending in one chain each.
#define H3L_SELECT_QB 8
#define H3L_TD 32 // dims per staged tile

// acc[q] (+)= qb[q] . kc_j over the staged dims d0 .. d0 + 31 of the tile kt (thread row t),
// for the CTA's QB query blocks; cov: the projections qb[q] . (kc_j - mean) instead
H3_DI void h3l_tile_dots(float acc[H3L_SELECT_QB], float (*kt)[H3L_TD + 1], float (*qb)[H3L_D], const float *mean,
                         int d0, bool cov) {
  const int t = threadIdx.x;
  for (int c = 0; c < H3L_TD; c++) {
    const int d = d0 + c;
    const float x = cov ? __fsub_rn(kt[t][c], mean[d]) : kt[t][c];
#pragma unroll
    for (int q = 0; q < H3L_SELECT_QB; q++) acc[q] = __fadd_rn(acc[q], __fmul_rn(qb[q][d], x));
  }
}

// One pass over the key blocks in tiles of 128: per tile every thread's QB dots for its key
// block j (d ascending from 0; 0 past nb), then done(j0, acc) (called by every thread)
template <typename Done>
H3_DI void h3l_key_pass(const float *kh, long long nb, float (*kt)[H3L_TD + 1], float (*qb)[H3L_D],
                        const float *mean, bool cov, Done done) {
  const int t = threadIdx.x;
  for (long long j0 = 0; j0 < nb; j0 += H3L_D) {
    float acc[H3L_SELECT_QB];
#pragma unroll
    for (int q = 0; q < H3L_SELECT_QB; q++) acc[q] = 0.0f;
    for (int d0 = 0; d0 < H3L_D; d0 += H3L_TD) {
      __syncthreads(); // every thread done with the previous tile
      for (int e = t; e < H3L_D * H3L_TD; e += H3L_D) { // row e / 32, dim d0 + e % 32
        const long long j = j0 + e / H3L_TD;
        kt[e / H3L_TD][e % H3L_TD] = j < nb ? kh[j * H3L_D + d0 + e % H3L_TD] : 0.0f;
      }
      __syncthreads();
      h3l_tile_dots(acc, kt, qb, mean, d0, cov);
    }
    done(j0, acc);
  }
}

extern "C" __global__ void __launch_bounds__(H3L_D) h3cu_sol_select(
    const float *__restrict__ kc, const float *__restrict__ qbar, const float *__restrict__ kmean,
    const float *__restrict__ kvar, long long nb, long long len, int group, float scale, float tau, int exact_cov,
    long long sink0, long long sink1, unsigned char *__restrict__ exact) {
  __shared__ float qb[H3L_SELECT_QB][H3L_D], mean[H3L_D], kt[H3L_D][H3L_TD + 1], part[H3L_SELECT_QB][H3L_D];
  __shared__ float theta[H3L_SELECT_QB];
  const int tid = threadIdx.x, n = blockIdx.y, h = n / group;
  const long long i0 = (long long)blockIdx.x * H3L_SELECT_QB;
  const int nq = (int)(nb - i0 < H3L_SELECT_QB ? nb - i0 : H3L_SELECT_QB); // the CTA's query blocks
  const float *kh = kc + (long long)h * nb * H3L_D;
  for (int q = 0; q < H3L_SELECT_QB; q++) // past nb: block nb - 1's again (never written out)
    qb[q][tid] = qbar[((long long)n * nb + i0 + (q < nq ? q : nq - 1)) * H3L_D + tid];
  mean[tid] = kmean[h * H3L_D + tid];
  float sig2 = 0.0f; // thread q's, q < QB
  if (exact_cov) // the projections p_b of every key block; thread q sums p_b^2, b ascending
    h3l_key_pass(kh, nb, kt, qb, mean, true, [&](long long j0, const float (&acc)[H3L_SELECT_QB]) {
#pragma unroll
      for (int q = 0; q < H3L_SELECT_QB; q++) part[q][tid] = acc[q];
      __syncthreads();
      if (tid < H3L_SELECT_QB)
        for (long long x = j0; x < nb && x < j0 + H3L_D; x++)
          sig2 = __fadd_rn(sig2, __fmul_rn(part[tid][x - j0], part[tid][x - j0]));
    });
  else
    __syncthreads(); // qb and mean staged
  if (tid < H3L_SELECT_QB) {
    const float c = scale, mu = __fmul_rn(c, h3l_dot(qb[tid], mean));
    if (exact_cov) {
      sig2 = __fmul_rn(__fmul_rn(c, c), __fdiv_rn(sig2, (float)nb));
    } else {
      const float *var = kvar + h * H3L_D;
      for (int d = 0; d < H3L_D; d++) sig2 = __fadd_rn(sig2, __fmul_rn(__fmul_rn(qb[tid][d], qb[tid][d]), var[d]));
      sig2 = __fmul_rn(__fmul_rn(c, c), sig2);
    }
    theta[tid] = __fadd_rn(mu, __fmul_rn(tau, __fsqrt_rn(__fadd_rn(sig2, 1e-6f))));
  }
  // the selection (theta is read after the pass's first barrier)
  h3l_key_pass(kh, nb, kt, qb, mean, false, [&](long long j0, const float (&acc)[H3L_SELECT_QB]) {
    const long long j = j0 + tid;
    if (j >= nb) return;
    const long long p0 = j * H3L_BLOCK, p1 = len < p0 + H3L_BLOCK ? len : p0 + H3L_BLOCK;
    const bool sink = p0 < sink1 && sink0 < p1;
#pragma unroll // static indices: acc stays in registers
    for (int q = 0; q < H3L_SELECT_QB; q++) {
      const long long i = i0 + q;
      const bool near = j - i <= 1 && i - j <= 1;
      if (q < nq) exact[((long long)n * nb + i) * nb + j] = __fmul_rn(scale, acc[q]) > theta[q] || near || sink;
    }
  });
}
