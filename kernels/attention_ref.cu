// attention_ref.cu: the reference attention. attention(q, k, v) of one segment: one block of
// 4 warps per (row, head); each warp walks every 4th key with an online softmax in fp32
// (lanes hold dims lane + 32*i, the dot product reduced by an xor butterfly), the 4 partial
// (max, sum, output) states are merged in shared memory, one rounding to the output dtype.
// Any head_dim <= 256, bf16 / f16 / f32, GQA, causal. Kernels h3cu_attn_ref_{bf16,f16,f32};
// launch: grid (rows, query heads), 128 threads.
template <typename T>
__device__ void h3cu_attn_ref(const T *q, const T *k, const T *v, T *o, long long len,
    int group, int dim, long long qs, long long ks, long long vs, long long os, float scale,
    int causal) {
  const long long t = blockIdx.x;
  const int h = blockIdx.y, kvh = h / group;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __shared__ float sm[4], sl[4], sacc[4][256];
  float qv[8], acc[8];
#pragma unroll
  for (int i = 0; i < 8; i++) {
    const int d = lane + 32 * i;
    qv[i] = d < dim ? (float)h3_w(q[t * qs + (long long)h * dim + d]) : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -__int_as_float(0x7f800000), l = 0.0f;
  const long long hi = causal ? t + 1 : len;
  for (long long j = warp; j < hi; j += 4) {
    const T *kr = k + j * ks + (long long)kvh * dim;
    const T *vr = v + j * vs + (long long)kvh * dim;
    float dot = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const int d = lane + 32 * i;
      if (d < dim) dot = fmaf(qv[i], (float)h3_w(kr[d]), dot);
    }
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, s);
    const float sc = dot * scale, mn = fmaxf(m, sc);
    const float corr = expf(m - mn), p = expf(sc - mn);
    l = l * corr + p;
#pragma unroll
    for (int i = 0; i < 8; i++) {
      const int d = lane + 32 * i;
      acc[i] = acc[i] * corr + (d < dim ? p * (float)h3_w(vr[d]) : 0.0f);
    }
    m = mn;
  }
  if (lane == 0) { sm[warp] = m; sl[warp] = l; }
#pragma unroll
  for (int i = 0; i < 8; i++) if (lane + 32 * i < dim) sacc[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  if (warp != 0) return;
  float M = sm[0];
  for (int w = 1; w < 4; w++) M = fmaxf(M, sm[w]);
  float wgt[4], L = 0.0f;
  for (int w = 0; w < 4; w++) { wgt[w] = sl[w] > 0.0f ? expf(sm[w] - M) : 0.0f; L += sl[w] * wgt[w]; }
#pragma unroll
  for (int i = 0; i < 8; i++) {
    const int d = lane + 32 * i;
    if (d >= dim) continue;
    float r = 0.0f;
    for (int w = 0; w < 4; w++) r += sacc[w][d] * wgt[w];
    h3_st(o, t * os + (long long)h * dim + d, r / L);
  }
}
#define H3CU_REF(NAME, T)                                                              \
  extern "C" __global__ void __launch_bounds__(128) NAME(const T *q, const T *k,       \
      const T *v, T *o, long long len, int group, int dim, long long qs, long long ks, \
      long long vs, long long os, float scale, int causal) {                          \
    h3cu_attn_ref<T>(q, k, v, o, len, group, dim, qs, ks, vs, os, scale, causal);      \
  }
H3CU_REF(h3cu_attn_ref_bf16, h3_bf16)
H3CU_REF(h3cu_attn_ref_f16, h3_f16)
H3CU_REF(h3cu_attn_ref_f32, float)
