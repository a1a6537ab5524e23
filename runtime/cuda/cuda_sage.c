/* cuda_sage.c: `sage_attention` (ops.def) on the cuda backend: which ops it takes (bf16 q, k,
 * v and result, head_dim 128, Hq % Hk == 0), the device scratch an op needs (allocated when
 * it is prepared), the kernels of kernels/sage_quant.cu (the quantization pre-passes) and
 * kernels/sage_attention.cu (the attention on tensor cores) compiled on first use, and the
 * launches. The op is cut into its segments as attention is (cuda_attention.c); per segment
 * of len rows, in the stream's order (one scratch serves every segment in turn):
 *   h3cu_sage_colstats  grid (4, Hk): kbar (smooth) and vscale (pv = fp8) per kv head and dim;
 *   h3cu_sage_quant     grid (lp / 64, Hq) for q, (lp / 64, Hk) for k less kbar: int8 codes
 *                       and one delta per 64-row block;
 *   h3cu_sage_quant_v   grid (lp / 64, Hk), pv = fp8: V^T's e4m3 codes;
 *   h3cu_sage_fwd_fp8_wg1c grid (ceil(len / 64) rounded up to even, Hq), 128 threads, pv = fp8
 *                       (the default): one warpgroup a block, 3 blocks an SM, in clusters of 2
 *                       blocks (the kernel's __cluster_dims__) that share each stage by TMA
 *                       multicast, sm_90a; its TMA maps of kc and vt (cu_byte_map) encoded per
 *                       segment and passed by value (docs/performance.md has its timings);
 *   h3cu_sage_fwd_fp8_wg1 the same without clusters (H3_SAGE_FORM=wg1);
 *   h3cu_sage_fwd_fp8 / _bf16  grid (ceil(len / 128), Hq), 256 threads (mma.sync): pv = bf16,
 *                       and pv = fp8 with H3_SAGE_FORM=mma or where the TMA forms' 32-bit row
 *                       coordinates do not reach (more than 2^31 key rows over the kv heads).
 * lp = len rounded up to 128. Scratch (tp = T rounded up to 128, nb = tp / 64): qd [Hq][nb],
 * kd [Hk][nb], kbar and vscale [Hk][128] (f32), then qc [Hq][tp][128], kc [Hk][tp][128] (int8)
 * and, for fp8, vt [Hk][128][tp] (e4m3).
 * With q's codes and deltas as operands 3 and 4 (sage-q-fusion: the rms_norm_rope that made q
 * wrote them, include/h3/sage.h's layout) the quant pre-pass of q is not launched and the
 * scratch has no qd and qc: segment i's attention reads qc + Hq P_i 128 and qd + Hq P_i / 64,
 * P_i the padded rows of the segments before it (counted as the segments run, in order).
 */
#include "cuda_internal.h"

#include "h3/sage.h"

#include <cuda.h> /* CUtensorMap only (cu_byte_map) */
#include <stdlib.h>
#include <string.h>

enum { SAGE_D = 128, SAGE_ROWS = 128, SAGE_KSTAGE = 128 * 128 };
enum { SAGE_SMEM_FP8 = 3 * 2 * SAGE_KSTAGE, SAGE_SMEM_BF16 = 3 * 3 * SAGE_KSTAGE, /* H3S_SMEM_* */
       SAGE_SMEM_WG1 = 1024 + 2 * 2 * SAGE_KSTAGE + 64 * SAGE_D + 1024 }; /* 2 stages of K and V^T, Q, ones */

enum { SAGE_QUANT = 3, SAGE_FWD = 4, SAGE_KERNELS = SAGE_QUANT + SAGE_FWD }; /* pre-passes, attention kernels */
static const char *const quant_names[SAGE_QUANT] = {"h3cu_sage_colstats", "h3cu_sage_quant", "h3cu_sage_quant_v"};
static const char *const fwd_names[SAGE_FWD] = {"h3cu_sage_fwd_fp8", "h3cu_sage_fwd_bf16", "h3cu_sage_fwd_fp8_wg1",
                                                "h3cu_sage_fwd_fp8_wg1c"};
static const int fwd_smem[SAGE_FWD] = {SAGE_SMEM_FP8, SAGE_SMEM_BF16, SAGE_SMEM_WG1, SAGE_SMEM_WG1};
enum { SAGE_FIRST_TMA = 2 }; /* fwd_names' first TMA form */

static bool is_fp8(const h3_op *op) { return strcmp(h3_op_attr_string(op, "pv", "fp8"), "bf16") != 0; }

/* Whether q's codes and deltas are the op's operands 3 and 4 (sage-q-fusion). */
static bool q_given(const h3_op *op) { return op->n_operands == 5; }

bool cu_sage_supports(const h3_op *op) {
  if (op->code != H3_OP_SAGE_ATTENTION || (op->n_operands != 3 && op->n_operands != 5) || op->n_results != 1)
    return false;
  if (q_given(op) && (op->operands[3]->type.dtype != H3_I8 || op->operands[4]->type.dtype != H3_F32)) return false;
  const h3_type *q = &op->operands[0]->type, *k = &op->operands[1]->type, *v = &op->operands[2]->type;
  const h3_type *o = &op->results[0]->type;
  /* with a v_view, v is the 2D tensor holding v's columns (type inference checked the view) */
  const bool viewed = h3_op_attr(op, "v_view") != NULL;
  if (q->rank != 3 || k->rank != 3 || v->rank != (viewed ? 2 : 3) || o->rank != 3) return false;
  bool dtypes = q->dtype == H3_BF16 && k->dtype == H3_BF16 && v->dtype == H3_BF16 && o->dtype == H3_BF16;
  bool v_shape = viewed || (v->dims[2] == SAGE_D && v->dims[1] == k->dims[1]);
  return dtypes && v_shape && q->dims[2] == SAGE_D && k->dims[2] == SAGE_D && k->dims[0] == q->dims[0] &&
         v->dims[0] == q->dims[0] && k->dims[1] >= 1 && q->dims[1] % k->dims[1] == 0 &&
         q->dims[0] < ((int64_t)1 << 30);
}

/* The scratch's parts at base (base NULL: only the total, returned) */
typedef struct {
  float *qd, *kd, *kbar, *vscale;
  signed char *qc, *kc;
  unsigned char *vt;
} sage_scratch;

static size_t scratch_layout(const h3_op *op, char *base, sage_scratch *p) {
  int64_t tp = h3_sage_padded(op->operands[0]->type.dims[0]), nb = tp / 64;
  int64_t hq = op->operands[0]->type.dims[1], hk = op->operands[1]->type.dims[1];
  size_t at = 0;
  char *parts[7];
  const bool own_q = !q_given(op); /* else q's codes come with the op */
  const size_t bytes[7] = {own_q ? (size_t)(hq * nb) * 4 : 0, (size_t)(hk * nb) * 4, (size_t)(hk * SAGE_D) * 4,
                           (size_t)(hk * SAGE_D) * 4, own_q ? (size_t)(hq * tp * SAGE_D) : 0,
                           (size_t)(hk * tp * SAGE_D), is_fp8(op) ? (size_t)(hk * SAGE_D * tp) : 0};
  for (int i = 0; i < 7; i++) {
    parts[i] = base ? base + at : NULL;
    at += (bytes[i] + 255) / 256 * 256;
  }
  if (p)
    *p = (sage_scratch){(float *)parts[0], (float *)parts[1], (float *)parts[2], (float *)parts[3],
                        (signed char *)parts[4], (signed char *)parts[5], (unsigned char *)parts[6]};
  return at;
}

size_t cu_sage_scratch_bytes(const h3_op *op) { return cu_sage_supports(op) ? scratch_layout(op, NULL, NULL) : 0; }

/* The kernels, compiled and configured on first use: the three pre-passes, then the four
 * attention kernels (sm_90a: the warpgroup MMAs of the last two, whose 3 blocks an SM ask for
 * the largest shared-memory carveout) */
static h3_status sage_kernels(cu_state *s, cu_kernel *k[SAGE_KERNELS], h3_diag *d) {
  for (int i = 0; i < SAGE_KERNELS; i++) {
    k[i] = cu_kernel_find(s, i < SAGE_QUANT ? quant_names[i] : fwd_names[i - SAGE_QUANT]);
    if (k[i] && !k[i]->fn) {
      h3_diag_error(d, (h3_span){0}, CU_HINT_EARLIER, "cuda: %s failed to load earlier", k[i]->name);
      return H3_ERR;
    }
  }
  if (!k[0] && cu_compile_tu(s, NULL, "sage_quant.cu", true, SAGE_QUANT, quant_names, k, d) != H3_OK) return H3_ERR;
  if (k[SAGE_QUANT]) return H3_OK;
  if (cu_compile_tu(s, NULL, "sage_attention.cu", false, SAGE_FWD, fwd_names, k + SAGE_QUANT, d) != H3_OK)
    return H3_ERR;
  for (int i = 0; i < SAGE_FWD; i++) {
    cu_kernel *ki = k[SAGE_QUANT + i];
    cudaError_t e = (size_t)fwd_smem[i] > s->smem_optin
                        ? cudaErrorInvalidValue
                        : cudaKernelSetAttributeForDevice(ki->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                          fwd_smem[i], s->device);
    if (e == cudaSuccess && i >= SAGE_FIRST_TMA)
      e = cudaKernelSetAttributeForDevice(ki->fn, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          cudaSharedmemCarveoutMaxShared, s->device);
    if (e != cudaSuccess) {
      ki->fn = NULL;
      return cu_fail(d, e, "cudaKernelSetAttributeForDevice (shared memory)", ki->name);
    }
  }
  return H3_OK;
}

/* The kernels and scratch of one op, for its segments; with q's codes given (q_codes not
 * NULL), where they are and the padded rows of the segments run so far */
typedef struct {
  cu_kernel *k[SAGE_KERNELS];
  sage_scratch sc;
  const signed char *q_codes;
  const float *q_deltas;
  long long q_rows;
} sage_ctx;

/* Whether the TMA forms' 32-bit row coordinates reach every key row of a segment: hk kv heads
 * of lp rows each */
static bool tma_reaches(int hk, long long lp) { return (int64_t)hk * lp <= 2147483647 - 128; }

/* The forms that read kc and vt through TMA (the same arguments): which kernel of sage_kernels
 * (its dynamic shared memory: fwd_smem), query rows and threads a block, whether the blocks go
 * in clusters of 2 (the kernel's __cluster_dims__: an even grid x), and the name errors give it */
typedef struct {
  int kernel, rows, threads;
  bool pairs;
  const char *what;
} tma_form;
static const tma_form wg1_form = {SAGE_QUANT + SAGE_FIRST_TMA, 64, 128, false, "one-warpgroup"};
static const tma_form wg1c_form = {SAGE_QUANT + SAGE_FIRST_TMA + 1, 64, 128, true, "one-warpgroup cluster"};

/* TMA form f (kernel k) on a segment of len rows, lp = len rounded up to 128: the TMA maps of
 * kc [hk lp][128] and vt [hk 128][lp] (bytes), then the launch */
static h3_status run_tma(cu_state *s, cu_kernel *k, const tma_form *f, const sage_scratch *sc, int hq, int hk,
                         long long len, long long lp, void *o, long long os, float scale, h3_diag *d) {
  static const char *const who = "sage_attention", *const fix = "run it with H3_SAGE_FORM=mma";
  if (!tma_reaches(hk, lp)) {
    h3_diag_error(d, (h3_span){0}, fix, "cuda: %s: %d kv heads of %lld rows take more rows than the "
                  "%s kernel's 32-bit TMA coordinates", who, hk, len, f->what);
    return H3_ERR;
  }
  CUtensorMap tk, tv;
  if (cu_byte_map(&tk, sc->kc, SAGE_D, hk * lp, who, "k codes", fix, d) != H3_OK ||
      cu_byte_map(&tv, sc->vt, lp, (int64_t)hk * SAGE_D, who, "v codes", fix, d) != H3_OK)
    return H3_ERR;
  int group = hq / hk;
  void *args[] = {&tk, &tv, (void *)&sc->qc, (void *)&sc->qd, (void *)&sc->kd, (void *)&sc->vscale, &o, &len,
                  &lp, &os, &group, &scale};
  int64_t blocks = (len + f->rows - 1) / f->rows;
  if (f->pairs) blocks += blocks & 1;
  return cu_launch(s, k, (int64_t[]){blocks, hq, 1}, (int64_t[]){f->threads, 1, 1},
                   fwd_smem[f->kernel - SAGE_QUANT], args, d);
}

/* One segment (rows [0, len) of q, k, v, o at its first row). */
static h3_status run_segment(cu_state *s, const h3_op *op, void *ctx, const cu_qkv_seg *g, h3_diag *d) {
  sage_ctx *c = ctx;
  cu_kernel *const *k = c->k;
  const h3_type *qt = &op->operands[0]->type, *kt = &op->operands[1]->type;
  int hq = (int)qt->dims[1], hk = (int)kt->dims[1], group = hq / hk;
  int smooth = h3_op_attr_int(op, "smooth", 1) != 0, fp8 = is_fp8(op);
  long long len = g->len, lp = h3_sage_padded(len), qs = (long long)hq * SAGE_D, ks = (long long)hk * SAGE_D;
  long long vs = g->v_stride;
  sage_scratch seg_sc = c->sc, *sc = &seg_sc; /* q's parts: this segment's given codes, if any */
  if (c->q_codes) {
    seg_sc.qc = (signed char *)c->q_codes + hq * c->q_rows * SAGE_D;
    seg_sc.qd = (float *)c->q_deltas + hq * c->q_rows / H3_SAGE_QBLOCK;
    c->q_rows += lp;
  }
  float scale = (float)h3_op_attr_float(op, "scale", 1.0);
  const float *no_kbar = NULL, *kbar = smooth ? sc->kbar : NULL;
  const void *q = g->q, *kk = g->k, *v = g->v;
  void *o = g->o;
  const int64_t block[3] = {256, 1, 1};
  if (smooth || fp8) {
    void *args[] = {&kk, &v, &vs, &len, &hk, &smooth, &fp8, (void *)&sc->kbar, (void *)&sc->vscale};
    if (cu_launch(s, k[0], (int64_t[]){SAGE_D / 32, hk, 1}, block, 0, args, d) != H3_OK) return H3_ERR;
  }
  void *qargs[] = {&q, &qs, &no_kbar, &len, &lp, (void *)&sc->qc, (void *)&sc->qd};
  void *kargs[] = {&kk, &ks, &kbar, &len, &lp, (void *)&sc->kc, (void *)&sc->kd};
  if ((!c->q_codes && cu_launch(s, k[1], (int64_t[]){lp / 64, hq, 1}, block, 0, qargs, d) != H3_OK) ||
      cu_launch(s, k[1], (int64_t[]){lp / 64, hk, 1}, block, 0, kargs, d) != H3_OK)
    return H3_ERR;
  if (fp8) {
    void *args[] = {&v, &vs, (void *)&sc->vscale, &len, &lp, (void *)&sc->vt};
    if (cu_launch(s, k[2], (int64_t[]){lp / 64, hk, 1}, block, 0, args, d) != H3_OK) return H3_ERR;
  }
  long long os = qs;
  /* H3_SAGE_FORM=wg1 forces the one-warpgroup form, =wg1c its clusters (the default; a forced
     TMA form's error names a too long segment), =mma the mma.sync form */
  static const tma_form *const forced_form[3] = {NULL, &wg1_form, &wg1c_form};
  const int form = cu_env_form("H3_SAGE_FORM", (const char *const[]){"mma", "wg1", "wg1c", NULL});
  const bool off = form == 0, forced = form > 0;
  const tma_form *tf = forced ? forced_form[form] : &wg1c_form;
  if (fp8 && (forced || (!off && tma_reaches(hk, lp))))
    return run_tma(s, k[tf->kernel], tf, sc, hq, hk, len, lp, o, os, scale, d);
  void *args[] = {(void *)&sc->qc, (void *)&sc->kc, (void *)&sc->vt, &v, (void *)&sc->qd, (void *)&sc->kd,
                  (void *)&sc->vscale, &o, &len, &lp, &vs, &os, &group, &scale};
  int which = SAGE_QUANT + (fp8 ? 0 : 1); /* fwd_names: the mma.sync forms first */
  return cu_launch(s, k[which], (int64_t[]){(len + SAGE_ROWS - 1) / SAGE_ROWS, hq, 1}, block,
                   fwd_smem[which - SAGE_QUANT], args, d);
}

h3_status cu_sage_run(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in, const h3_tensor *out,
                      h3_diag *d) {
  if (!cu_sage_supports(op) || !scratch)
    return cu_op_error(d, op, "run it with --backend cpu", "takes bf16 q[T, Hq, 128], k and v [T, Hk, 128] "
                       "with Hq %% Hk == 0 on cuda");
  sage_ctx c = {.q_codes = q_given(op) ? in[3].data : NULL, .q_deltas = q_given(op) ? in[4].data : NULL};
  if (sage_kernels(s, c.k, d) != H3_OK) return H3_ERR;
  scratch_layout(op, scratch, &c.sc);
  return cu_qkv_segments(s, op, in, out, run_segment, &c, d);
}
