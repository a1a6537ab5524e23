// m31_msa.cu: MiniMax-M3.1's attention over the paged KV cache and its sparse (MSA) block
// selection, the contracts of ops.def and of the CPU reference (runtime/cpu/ops_attention.c,
// ops_sparse.c). Cached position j of row t lives at flat row pt[j / page] * page + j % page
// of the [P, page, Hk, D] caches, pt = the page table [NP] or its row t ([T, NP]: pt_rows
// = T, a batch of sequences).
//   H3_KV_ATT_NAME (q[T, Hq, D] Q_T, kc, vc [P, page, Hk, D] K_T, kb, vb [T, Hk, D] K_T,
//     pos[T], pt[NP] or [T, NP], sel[T, Hk, topk], ctx[] (all IX_T)) -> part f32 [T, Hq, S, D + 2],
//     grid (T, Hk, S), H3M_ATT_THREADS threads. The keys of row t, by kind:
//       0 paged:  positions 0..pos[t];
//       1 block:  positions 0..ctx-1, then the T rows of kb / vb (non-causal);
//       2 sparse: the positions j <= pos[t] of the selected blocks (ascending, -1 skipped;
//                 topk <= H3M_MAX_TOPK);
//     block (t, kv head, s) takes the s-th of S equal parts of them (flash decoding) and
//     every q head of the kv head's group (GQA: a K / V row is read once for the group):
//     warp w owns heads w * H3M_HPW .. + H3M_HPW - 1 of the group (H3M_HPW <= 4), lane l
//     dims l * H3M_DC .. + H3M_DC - 1, H3M_KEYS (4) keys per step, the step's 16 dot
//     products summed over the warp together. s_j = (q · k_j) * scale (fp32), online
//     softmax with the fast exponential (__expf): part = (running max m, sum l,
//     unnormalised sum of p_j v_j [D]).
//   H3_KV_COMBINE_NAME (part) -> o[T, Hq, D] O_T, grid (T, Hq): o = sum_s acc_s e^(m_s - M)
//     / sum_s l_s e^(m_s - M) with M = max m_s, one rounding; 0 for a row with no key.
//   H3_TOPK_SCORE_NAME (iq[T, Hi, D] Q_T, ikc[P, page, D] K_T, pos[T], pt IX_T)
//     -> score f32 [T, Hi, NB] {block}, grid (T, NB), a thread per key of block b:
//     score[b] = max over j in block b, j <= pos[t] of iq · ik_j (fp32), +inf for the current
//     block; blocks past the row's last are not written. Dynamic shared: Hi * D floats.
//   H3_TOPK_NAME (score) -> sel[T, Hi, topk] IX_T, grid (T, Hi): the min(topk, nb) best
//     blocks (descending score, ties: lower block) written ascending, then -1. Dynamic
//     shared: nb_max floats + nb_max ints.
// The sums differ in order from the reference (lanes, then a shuffle tree; tiles of keys),
// within the tests' tolerance. Every loop that holds a shuffle or a barrier runs the same
// number of times in every thread of a block (host emulation: tests/codegen/host_emu.h).
// Macros the user defines in front: Q_T, K_T, IX_T, O_T, H3M_DC (ceil(D / 32)) and H3M_HPW
// (ceil(group / 4)) for the attention, and the name of each kernel it wants (a kernel whose
// name is not defined is not compiled).

#define H3M_INF __int_as_float(0x7f800000) /* NVRTC has no INFINITY */
#define H3M_ATT_THREADS 128
#define H3M_KEYS 4
#define H3M_MAX_TOPK 64 // selected blocks per row and kv head (sparse attention)

__device__ __forceinline__ long long h3m_slot(const IX_T *pt, long long j, int page) {
  return (long long)pt[j / page] * page + j % page;
}

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
    float scale, int pt_rows, long long NP) {
  const long long t = blockIdx.x;
  pt += (pt_rows > 1 ? t : 0) * NP; // this row's page table
  const int kvh = blockIdx.y, s = blockIdx.z, S = gridDim.z, G = Hq / Hk;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const long long p = kind == 1 ? 0 : (long long)pos[t];
  const long long ctx = kind == 1 ? (long long)*ctxp : 0;
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
  const long long nv = kind == 0 ? p + 1 : kind == 1 ? ctx + T : (long long)nsel * page;
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
  // key offsets of a tile of H3M_ATT_THREADS keys, found by all threads at once: element
  // offset of the key's D-vector (-1: no key), and whether it is a block row (kb / vb)
  __shared__ long long koff[H3M_ATT_THREADS];
  __shared__ int kblk[H3M_ATT_THREADS];
  for (long long ts = v0; ts < v1; ts += H3M_ATT_THREADS) {
    __syncthreads(); // the previous tile is done
    {
      const long long v = ts + threadIdx.x;
      long long off = -1;
      int blk = 0;
      if (v < v1) {
        if (kind == 0) {
          off = (h3m_slot(pt, v, page) * Hk + kvh) * D;
        } else if (kind == 1) {
          if (v < ctx) off = (h3m_slot(pt, v, page) * Hk + kvh) * D;
          else off = ((v - ctx) * Hk + kvh) * D, blk = 1;
        } else {
          const long long j = vblk[v / page] * page + v % page;
          if (j <= p) off = (h3m_slot(pt, j, page) * Hk + kvh) * D;
        }
      }
      koff[threadIdx.x] = off;
      kblk[threadIdx.x] = blk;
    }
    __syncthreads();
    const long long te = ts + H3M_ATT_THREADS < v1 ? ts + H3M_ATT_THREADS : v1;
  for (long long vs = ts; vs < te; vs += H3M_KEYS) {
    float kr[H3M_KEYS][H3M_DC], vr[H3M_KEYS][H3M_DC];
    bool live[H3M_KEYS];
#pragma unroll
    for (int u = 0; u < H3M_KEYS; u++) {
      const long long v = vs + u;
      const long long off = v < te ? koff[v - ts] : -1;
      const K_T *kp = v < te && kblk[v - ts] ? kb : kc, *vp = v < te && kblk[v - ts] ? vb : vc;
      live[u] = off >= 0;
      const int d0 = lane * H3M_DC;
      if (live[u] && d0 < D) {
        h3m_ld_dc(kp + off + d0, kr[u]);
        h3m_ld_dc(vp + off + d0, vr[u]);
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
#pragma unroll 8
    for (int s = 0; s < S; s++)
      if (ms[s] > -H3M_INF) acc = __fadd_rn(acc, __fmul_rn(pr[s * (D + 2) + 2 + d], __expf(__fsub_rn(ms[s], M))));
    h3_st(o, row * D + d, L > 0.0f ? __fdiv_rn(acc, L) : 0.0f);
  }
}
#endif

#ifdef H3_TOPK_SCORE_NAME
#define H3M_MAX_INDEX_HEADS 8
extern "C" __global__ void __launch_bounds__(128) H3_TOPK_SCORE_NAME(
    const Q_T *__restrict__ iq, const K_T *__restrict__ ik, const IX_T *__restrict__ pos,
    const IX_T *__restrict__ pt, float *__restrict__ score, int Hi, int D, int page, int block,
    int NB, int pt_rows, long long NP) {
  H3_DYN_SMEM(float, qs); // [Hi, D]
  __shared__ float red[H3M_MAX_INDEX_HEADS][128];
  const long long t = blockIdx.x, b = blockIdx.y;
  const long long p = (long long)pos[t], nb = p / block + 1;
  pt += (pt_rows > 1 ? t : 0) * NP; // this row's page table
  if (b >= nb) return; // the whole block
  for (int i = threadIdx.x; i < Hi * D; i += blockDim.x) qs[i] = (float)h3_ld(iq, t * Hi * D + i);
  __syncthreads();
  float best[H3M_MAX_INDEX_HEADS];
#pragma unroll
  for (int h = 0; h < H3M_MAX_INDEX_HEADS; h++) best[h] = -H3M_INF;
  for (long long jj = threadIdx.x; jj < block; jj += blockDim.x) {
    const long long j = b * block + jj;
    if (j > p) break;
    const K_T *kr = ik + h3m_slot(pt, j, page) * D;
    float dot[H3M_MAX_INDEX_HEADS];
#pragma unroll
    for (int h = 0; h < H3M_MAX_INDEX_HEADS; h++) dot[h] = 0.0f;
    for (int d0 = 0; d0 < D; d0 += 8) {
      float kv[8];
      if (d0 + 8 <= D) {
        h3_ld8(kr, d0, kv);
      } else {
        for (int q = 0; q < 8; q++) kv[q] = d0 + q < D ? (float)h3_ld(kr, d0 + q) : 0.0f;
      }
#pragma unroll
      for (int h = 0; h < H3M_MAX_INDEX_HEADS; h++) {
        if (h >= Hi) break;
        for (int q = 0; q < 8 && d0 + q < D; q++)
          dot[h] = __fadd_rn(dot[h], __fmul_rn(qs[h * D + d0 + q], kv[q]));
      }
    }
#pragma unroll
    for (int h = 0; h < H3M_MAX_INDEX_HEADS; h++) best[h] = dot[h] > best[h] ? dot[h] : best[h];
  }
#pragma unroll
  for (int h = 0; h < H3M_MAX_INDEX_HEADS; h++) red[h][threadIdx.x] = best[h];
  __syncthreads();
  const int h = (int)threadIdx.x;
  if (h >= Hi) return;
  float mx = -H3M_INF;
  for (int i = 0; i < (int)blockDim.x; i++) mx = red[h][i] > mx ? red[h][i] : mx;
  score[(t * Hi + h) * NB + b] = b == nb - 1 ? H3M_INF : mx;
}
#endif

#ifdef H3_TOPK_NAME
extern "C" __global__ void __launch_bounds__(128) H3_TOPK_NAME(
    const float *__restrict__ score, const IX_T *__restrict__ pos, IX_T *__restrict__ out,
    int Hi, int block, int NB, int topk) {
  H3_DYN_SMEM(float, sc); // [NB] scores, then [NB] chosen flags
  int *chosen = reinterpret_cast<int *>(sc + NB);
  const long long t = blockIdx.x;
  const int h = blockIdx.y;
  const long long p = (long long)pos[t], nb = p / block + 1;
  const long long k = nb < topk ? nb : topk;
  const float *sr = score + (t * Hi + h) * NB;
  for (long long b = threadIdx.x; b < nb; b += blockDim.x) sc[b] = sr[b];
  __syncthreads();
  for (long long b = threadIdx.x; b < nb; b += blockDim.x) { // rank: blocks ahead of b
    long long rank = 0;
    const float v = sc[b];
    for (long long c = 0; c < nb && rank < k; c++) rank += sc[c] > v || (sc[c] == v && c < b);
    chosen[b] = rank < k;
  }
  __syncthreads();
  if (threadIdx.x != 0) return;
  const long long o0 = (t * Hi + h) * topk;
  long long n = 0;
  for (long long b = 0; b < nb; b++)
    if (chosen[b]) out[o0 + n++] = (IX_T)b;
  for (; n < topk; n++) out[o0 + n] = (IX_T)-1;
}
#endif
