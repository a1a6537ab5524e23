// m31_moe.cu: MiniMax-M3.1's routing, mixture-of-experts and DSpark Markov head, the
// contracts of ops.def and the CPU reference (runtime/cpu/ops_moe.c) step by step: every
// dot product is a sequential fp32 sum (__fmul_rn / __fadd_rn, index ascending), every
// bf16 rounding where the reference rounds. First forms (a thread per output); the grouped
// expert GEMMs are the next step.
//   H3_ROUTER_NAME (h[T, H] H_T, w[E, H] W_T, bias[E] B_T) -> ids[T, k] I_T, wts[T, k] O_T
//     {k, scale}: one block per row, a thread per expert; dynamic shared: E floats.
//   H3_MOE_NAME, H3_MOE_DOWN_NAME: moe(h[T, H] H_T, gate_up[E, 2F, H] W_T, down[E, H, F] W_T,
//     ids[T, k] I_T, wts[T, k] B_T) -> out[T, H] O_T {alpha, limit} in two launches through
//     an f32 scratch of the activations [T, k, F]: a thread per (row, slot, output) of the
//     gate_up GEMV, then a thread per (row, output) of the down GEMV walking the experts in
//     ascending id order (each id once); sequential sums, so the reference's bits.
//   H3_MARKOV_NAME (base[G, V] B_T, w1[V, r] W_T, w2[V, r] W_T, prev I_T) -> z[G, V] O_T,
//     draft[G] I_T: one block; dynamic shared: r floats.
// Macros the user defines in front: H_T, W_T, B_T, I_T, O_T and the name of each kernel it
// wants (H3_MOE_NAME with H3_MOE_DOWN_NAME); a kernel whose name is not defined is not compiled.

__device__ __forceinline__ float h3m_sigmoid(float x) {
  return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x)));
}

#ifdef H3_ROUTER_NAME
extern "C" __global__ void __launch_bounds__(256) H3_ROUTER_NAME(
    const H_T *__restrict__ h, const W_T *__restrict__ w, const B_T *__restrict__ bias,
    I_T *__restrict__ ids, O_T *__restrict__ wts, long long H, int E, int k, float scale) {
  extern __shared__ float s[]; // [E] sigmoid scores
  const long long t = blockIdx.x;
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    float acc = 0.0f;
    for (long long i = 0; i < H; i++)
      acc = __fadd_rn(acc, __fmul_rn((float)h3_ld(h, t * H + i), (float)h3_ld(w, e * H + i)));
    s[e] = h3m_sigmoid(acc);
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  // selection as the reference: k rounds of the largest s + bias (ties: lower id), then the
  // chosen ids ascending with weights s / sum(s) * scale (sum in ascending id order)
  unsigned long long taken[4] = {0, 0, 0, 0}; // E <= 256
  for (int r = 0; r < k; r++) {
    int bi = -1;
    float bv = 0.0f;
    for (int e = 0; e < E; e++) {
      if (taken[e >> 6] >> (e & 63) & 1ull) continue;
      float v = __fadd_rn(s[e], (float)h3_ld(bias, e));
      if (bi < 0 || v > bv) bi = e, bv = v;
    }
    if (bi < 0) break;
    taken[bi >> 6] |= 1ull << (bi & 63);
  }
  float sum = 0.0f;
  for (int e = 0; e < E; e++)
    if (taken[e >> 6] >> (e & 63) & 1ull) sum = __fadd_rn(sum, s[e]);
  int n = 0;
  for (int e = 0; e < E; e++) {
    if (!(taken[e >> 6] >> (e & 63) & 1ull)) continue;
    ids[t * k + n] = (I_T)e;
    h3_st(wts, t * k + n, __fmul_rn(__fdiv_rn(s[e], sum), scale));
    n++;
  }
}
#endif

#ifdef H3_MOE_NAME
// The chosen experts of row t in ascending id order, each id once (the reference's selection
// sort): order[r] is the slot of the r-th, -1 after the last. k <= 16.
__device__ __forceinline__ void h3m_expert_order(const I_T *ids, long long t, int k, int *order) {
  long long last = -1;
  for (int r = 0; r < k; r++) {
    int bi = -1;
    long long be = 0;
    for (int s = 0; s < k; s++) {
      const long long e = (long long)ids[t * k + s];
      if (e > last && (bi < 0 || e < be)) bi = s, be = e;
    }
    order[r] = bi;
    if (bi < 0) return;
    last = be;
  }
}

// Phase 1, grid (T, k, ceil(F / 64)), 64 threads: thread o of slot s of row t computes
// u_g = bf16(h . gate_up[e, o]), u_v = bf16(h . gate_up[e, F + o]) and the activation
// a[t, s, o] = bf16((g * sigmoid(alpha * g)) * (v + 1)) into the scratch (f32 [T, k, F]).
extern "C" __global__ void __launch_bounds__(64) H3_MOE_NAME(
    const H_T *__restrict__ h, const W_T *__restrict__ gu, const I_T *__restrict__ ids,
    float *__restrict__ act, long long H, long long F, int k, float alpha, float limit) {
  const long long t = blockIdx.x, o = (long long)blockIdx.z * blockDim.x + threadIdx.x;
  const int slot = blockIdx.y;
  if (o >= F) return;
  const long long e = (long long)ids[t * k + slot];
  const W_T *g0 = gu + e * 2 * F * H;
  float sg = 0.0f, sv = 0.0f;
  for (long long i = 0; i < H; i++) {
    const float x = (float)h3_ld(h, t * H + i);
    sg = __fadd_rn(sg, __fmul_rn(x, (float)h3_ld(g0, o * H + i)));
    sv = __fadd_rn(sv, __fmul_rn(x, (float)h3_ld(g0, (F + o) * H + i)));
  }
  float g = h3_rbf16(sg), v = h3_rbf16(sv);
  g = g < limit ? g : limit;
  v = v < -limit ? -limit : (v > limit ? limit : v);
  act[(t * k + slot) * F + o] =
      h3_rbf16(__fmul_rn(__fmul_rn(g, h3m_sigmoid(__fmul_rn(alpha, g))), __fadd_rn(v, 1.0f)));
}

// Phase 2, grid (T, ceil(H / 64)), 64 threads: thread o of row t walks the chosen experts in
// ascending id order: y = bf16(a[t, s] . down[e, o]); acc += w_s * y; out[t, o] = acc.
extern "C" __global__ void __launch_bounds__(64) H3_MOE_DOWN_NAME(
    const W_T *__restrict__ down, const I_T *__restrict__ ids, const B_T *__restrict__ wts,
    const float *__restrict__ act, O_T *__restrict__ out, long long H, long long F, int k) {
  const long long t = blockIdx.x, o = (long long)blockIdx.y * blockDim.x + threadIdx.x;
  if (o >= H) return;
  int order[16];
  h3m_expert_order(ids, t, k, order);
  float acc = 0.0f;
  for (int r = 0; r < k && order[r] >= 0; r++) {
    const int slot = order[r];
    const long long e = (long long)ids[t * k + slot];
    const W_T *d0 = down + e * H * F + o * F;
    const float *a = act + (t * k + slot) * F;
    float y = 0.0f;
    for (long long i = 0; i < F; i++) y = __fadd_rn(y, __fmul_rn(a[i], (float)h3_ld(d0, i)));
    acc = __fadd_rn(acc, __fmul_rn((float)h3_ld(wts, t * k + slot), h3_rbf16(y)));
  }
  h3_st(out, t * H + o, acc);
}
#endif

#ifdef H3_MARKOV_NAME
extern "C" __global__ void __launch_bounds__(256) H3_MARKOV_NAME(
    const B_T *__restrict__ base, const W_T *__restrict__ w1, const W_T *__restrict__ w2,
    const I_T *__restrict__ prev0, O_T *__restrict__ z, I_T *__restrict__ draft, int G,
    long long V, int r) {
  extern __shared__ float e[]; // [r] the previous token's w1 row
  __shared__ float best_v[256];
  __shared__ long long best_i[256];
  __shared__ long long prev;
  if (threadIdx.x == 0) {
    long long p = (long long)*prev0;
    prev = p < 0 ? 0 : (p >= V ? V - 1 : p); // the CPU reports an id outside [0, V)
  }
  __syncthreads();
  for (int kk = 0; kk < G; kk++) {
    for (int i = threadIdx.x; i < r; i += blockDim.x) e[i] = (float)h3_ld(w1, prev * r + i);
    __syncthreads();
    float bv = 0.0f;
    long long bi = -1;
    for (long long v = threadIdx.x; v < V; v += blockDim.x) {
      float s = 0.0f;
      for (int i = 0; i < r; i++) s = __fadd_rn(s, __fmul_rn((float)h3_ld(w2, v * r + i), e[i]));
      const float zv = __fadd_rn((float)h3_ld(base, kk * V + v), s);
      h3_st(z, kk * V + v, zv);
      if (bi < 0 || zv > bv) bv = zv, bi = v; // v ascending per thread: first max kept
    }
    best_v[threadIdx.x] = bv;
    best_i[threadIdx.x] = bi;
    __syncthreads();
    if (threadIdx.x == 0) { // the first index of the largest value over all threads
      long long b = -1;
      float m = 0.0f;
      for (int i = 0; i < (int)blockDim.x; i++) {
        const long long j = best_i[i];
        if (j < 0) continue;
        if (b < 0 || best_v[i] > m || (best_v[i] == m && j < b)) b = j, m = best_v[i];
      }
      draft[kk] = (I_T)b;
      prev = b;
    }
    __syncthreads();
  }
}
#endif
