// m31_msa.cu: MiniMax-M3.1's attention over the paged KV cache and its sparse (MSA) block
// selection, the contracts of ops.def and the CPU reference (runtime/cpu/ops_attention.c,
// ops_sparse.c). Cached position j of a sequence lives at flat row
// pt[j / page] * page + j % page of the [P, page, Hk, D] caches. Correctness-first forms
// (one block per row and head); the split-over-keys decode kernel is the next step.
//   H3_KV_ATT_NAME (q[T, Hq, D] Q_T, kc, vc [P, page, Hk, D] K_T, kb, vb [T, Hk, D] K_T,
//     pos[T], pt[NP], sel[T, Hk, topk], ctx[] (all IX_T)) -> o[T, Hq, D] O_T, kind:
//       0 paged:  keys = positions 0..pos[t];
//       1 block:  keys = positions 0..ctx-1, then the T rows of kb / vb (non-causal);
//       2 sparse: keys = the positions j <= pos[t] of the selected blocks (ascending, -1
//                 skipped);
//     s_j = (q · k_j) * scale (fp32, d ascending), softmax over the keys, o = sum p_j v_j / l,
//     one rounding; online softmax over tiles of 32 keys. 128 threads, D <= 256.
//   H3_TOPK_NAME (iq[T, Hi, D] Q_T, ikc[P, page, D] K_T, pos[T], pt[NP] IX_T)
//     -> sel[T, Hi, topk] IX_T {block, topk}: score[b] = max over j in block b, j <= pos[t]
//     of iq · ik_j (fp32, d ascending); the current block +inf; the min(topk, nb) best
//     (ties: lower block) written ascending, then -1. Dynamic shared: nb_max floats.
// Macros the user defines in front: Q_T, K_T, IX_T, O_T and the name of each kernel it wants
// (a kernel whose name is not defined is not compiled).

#define H3M_INF __int_as_float(0x7f800000) /* NVRTC has no INFINITY */

__device__ __forceinline__ long long h3m_slot(const IX_T *pt, long long j, int page) {
  return (long long)pt[j / page] * page + j % page;
}

#ifdef H3_KV_ATT_NAME
extern "C" __global__ void __launch_bounds__(128) H3_KV_ATT_NAME(
    const Q_T *__restrict__ q, const K_T *__restrict__ kc, const K_T *__restrict__ vc,
    const K_T *__restrict__ kb, const K_T *__restrict__ vb, const IX_T *__restrict__ pos,
    const IX_T *__restrict__ pt, const IX_T *__restrict__ sel, const IX_T *__restrict__ ctxp,
    O_T *__restrict__ o, int kind, long long T, int Hq, int Hk, int D, int page, int topk,
    float scale) {
  __shared__ float qs[256];
  __shared__ float ss[32];
  __shared__ long long koff[32]; // element offset of key i's D-vector; -1: no key
  __shared__ int kfrom_block[32];
  const long long t = blockIdx.x;
  const int hq = blockIdx.y, kvh = hq / (Hq / Hk);
  for (int d = threadIdx.x; d < D; d += blockDim.x) qs[d] = (float)h3_ld(q, (t * Hq + hq) * D + d);
  long long nv; // virtual keys: paged p + 1; block ctx + T; sparse topk * page
  const long long p = kind == 1 ? 0 : (long long)pos[t];
  const long long ctx = kind == 1 ? (long long)*ctxp : 0;
  if (kind == 0) nv = p + 1;
  else if (kind == 1) nv = ctx + T;
  else nv = (long long)topk * page;
  float m = -H3M_INF, l = 0.0f, acc[2] = {0.0f, 0.0f};
  __syncthreads();
  for (long long v0 = 0; v0 < nv; v0 += 32) {
    if (threadIdx.x < 32) {
      const long long v = v0 + threadIdx.x;
      long long off = -1;
      int from_block = 0;
      if (v < nv) {
        if (kind == 0) {
          off = (h3m_slot(pt, v, page) * Hk + kvh) * D;
        } else if (kind == 1) {
          if (v < ctx) off = (h3m_slot(pt, v, page) * Hk + kvh) * D;
          else off = ((v - ctx) * Hk + kvh) * D, from_block = 1;
        } else {
          const long long b = (long long)sel[(t * Hk + kvh) * topk + v / page];
          const long long j = b * page + v % page;
          if (b >= 0 && j <= p) off = (h3m_slot(pt, j, page) * Hk + kvh) * D;
        }
      }
      float s = -H3M_INF;
      if (off >= 0) {
        const K_T *kr = (from_block ? kb : kc) + off;
        float dot = 0.0f;
        for (int d = 0; d < D; d++) dot = __fadd_rn(dot, __fmul_rn(qs[d], (float)h3_ld(kr, d)));
        s = __fmul_rn(dot, scale);
      }
      ss[threadIdx.x] = s;
      koff[threadIdx.x] = off;
      kfrom_block[threadIdx.x] = from_block;
    }
    __syncthreads();
    float tm = -H3M_INF;
    for (int i = 0; i < 32; i++) tm = fmaxf(tm, ss[i]);
    if (tm > -H3M_INF) {
      const float mn = fmaxf(m, tm);
      const float corr = m == -H3M_INF ? 0.0f : expf(__fsub_rn(m, mn));
      l = __fmul_rn(l, corr);
      acc[0] = __fmul_rn(acc[0], corr);
      acc[1] = __fmul_rn(acc[1], corr);
      for (int i = 0; i < 32; i++) {
        if (koff[i] < 0) continue;
        const float pj = expf(__fsub_rn(ss[i], mn));
        l = __fadd_rn(l, pj);
        const K_T *vr = (kfrom_block[i] ? vb : vc) + koff[i];
        for (int c = 0; c < 2; c++) {
          const int d = threadIdx.x + c * 128;
          if (d < D) acc[c] = __fadd_rn(acc[c], __fmul_rn(pj, (float)h3_ld(vr, d)));
        }
      }
      m = mn;
    }
    __syncthreads();
  }
  for (int c = 0; c < 2; c++) {
    const int d = threadIdx.x + c * 128;
    if (d < D) h3_st(o, (t * Hq + hq) * D + d, l > 0.0f ? __fdiv_rn(acc[c], l) : 0.0f);
  }
}
#endif

#ifdef H3_TOPK_NAME
extern "C" __global__ void __launch_bounds__(128) H3_TOPK_NAME(
    const Q_T *__restrict__ iq, const K_T *__restrict__ ik, const IX_T *__restrict__ pos,
    const IX_T *__restrict__ pt, IX_T *__restrict__ out, int Hi, int D, int page, int block,
    int topk) {
  extern __shared__ float score[]; // [nb]
  const long long t = blockIdx.x;
  const int h = blockIdx.y;
  const long long p = (long long)pos[t], nb = p / block + 1;
  const Q_T *qr = iq + (t * Hi + h) * D;
  for (long long b = threadIdx.x; b < nb; b += blockDim.x) {
    float best = -H3M_INF;
    for (long long j = b * block; j < (b + 1) * block && j <= p; j++) {
      const K_T *kr = ik + h3m_slot(pt, j, page) * D;
      float dot = 0.0f;
      for (int d = 0; d < D; d++)
        dot = __fadd_rn(dot, __fmul_rn((float)h3_ld(qr, d), (float)h3_ld(kr, d)));
      best = dot > best ? dot : best;
    }
    score[b] = b == nb - 1 ? H3M_INF : best;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  // the reference's selection: min(topk, nb) rounds of the best untaken block (ties: lower),
  // marked by setting its score to NaN; then the marked blocks ascending, then -1
  const long long k = nb < topk ? nb : topk;
  const long long o0 = (t * Hi + h) * topk;
  for (long long s = 0; s < k; s++) {
    long long bi = -1;
    for (long long b = 0; b < nb; b++) {
      const float sc = score[b];
      if (sc != sc) continue;
      if (bi < 0 || sc > score[bi]) bi = b;
    }
    if (bi < 0) break;
    score[bi] = __int_as_float(0x7fc00000);
  }
  long long n = 0;
  for (long long b = 0; b < nb; b++)
    if (score[b] != score[b]) out[o0 + n++] = (IX_T)b;
  for (; n < topk; n++) out[o0 + n] = (IX_T)-1;
}
#endif
