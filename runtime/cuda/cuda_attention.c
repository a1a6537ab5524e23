/* cuda_attention.c: the attention op on the GPU behind one interface, and the reference
 * implementation.
 *
 * attention(q[T, Hq, D], k[T, Hk, D], v[T, Hk, D]) {scale, causal, segments} -> [T, Hq, D]:
 * the op is cut into its segments [b_i, b_{i+1}) (0 and T implied; spec: live rows [0,
 * used) and pad rows [used, T) run separately) and each segment is one self-attention
 * (cu_att_seg: pointers at the segment's first row, row strides Hq*D / Hk*D; with the
 * op's v_view = [start, row_stride], v is the 2D qkv-like tensor: v's pointer is its base +
 * start, its row stride row_stride) given to the selected implementation:
 *   flash      (the default) h3's flash kernel (kernels/flash_attention.cu): bf16, head_dim 128,
 *              non-causal; other shapes go to cudnn, then to the reference;
 *   cudnn      cuDNN's fused SDPA (cuda_cudnn.c) where it takes the shape, else flash,
 *              then the reference;
 *   reference  kernels/attention_ref.cu, launched here: one block of 4 warps per (row,
 *              head), fp32 online softmax, one rounding to the output dtype. Any
 *              head_dim <= 256, bf16 / f16 / f32, GQA, causal.
 * A fallback is reported once per backend as a warning.
 */
#include "cuda_internal.h"

#include "h3/sage.h"

#include <string.h>

static const char *const ref_names[3] = {"h3cu_attn_ref_bf16", "h3cu_attn_ref_f16",
                                         "h3cu_attn_ref_f32"};

h3_status cu_attention_reference(cu_state *s, const cu_att_seg *a, h3_diag *d) {
  int which = a->dtype == H3_BF16 ? 0 : a->dtype == H3_F16 ? 1 : 2;
  cu_kernel *k = cu_kernel_find(s, ref_names[which]);
  if (k && !k->fn) {
    h3_diag_error(d, (h3_span){0}, CU_HINT_EARLIER, "cuda: %s failed to load earlier", k->name);
    return H3_ERR;
  }
  if (!k) {
    cu_kernel *ks[3] = {0};
    if (cu_compile_tu(s, NULL, "attention_ref.cu", true, 3, ref_names, ks, d) != H3_OK)
      return H3_ERR;
    k = ks[which];
  }
  long long len = a->len, qs = a->q_stride, ks = a->k_stride, vs = a->v_stride, os = a->o_stride;
  int group = (int)(a->hq / a->hk), dim = (int)a->dim, causal = a->causal;
  float scale = a->scale;
  const void *q = a->q, *kk = a->k, *v = a->v;
  void *o = a->o;
  void *args[] = {&q, &kk, &v, &o, &len, &group, &dim, &qs, &ks, &vs, &os, &scale, &causal};
  int64_t grid[3] = {len, a->hq, 1}, block[3] = {128, 1, 1};
  return cu_launch(s, k, grid, block, 0, args, d);
}

static void warn_once(cu_state *s, const h3_op *op, const char *fmt, const char *what, h3_diag *d) {
  if (s->attention_warned) return;
  s->attention_warned = true;
  h3_diag_warning(d, op->span, "pick another one with --attention", fmt, what);
}

/* Runs segment a with flash (flash = true) or cuDNN; false when that one does not take the
 * shape (nothing ran), else true with *st its status. */
static bool try_fast(cu_state *s, bool flash, const cu_att_seg *a, h3_status *st, h3_diag *d) {
  if (flash) {
    if (!cu_flash_supports(a)) return false;
    *st = cu_flash_run(s, a, d);
    return true;
  }
  if (!cu_cudnn_supports(a)) return false;
  bool fallback = false;
  *st = cu_cudnn_run(s, a, &fallback, d);
  return !fallback;
}

/* The chosen implementation; a shape it does not take goes to the other fast one (flash <->
 * cudnn), then to the reference kernel, with one warning per backend. */
static h3_status run_segment(cu_state *s, const h3_op *op, const cu_att_seg *a, h3_diag *d) {
  h3_status st = H3_OK;
  if (s->attention == CU_ATT_REFERENCE) return cu_attention_reference(s, a, d);
  bool flash = s->attention == CU_ATT_FLASH;
  if (try_fast(s, flash, a, &st, d)) return st;
  warn_once(s, op, "cuda: attention: %s does not take this shape (flash: bf16, head_dim 128, "
            "non-causal; cudnn: bf16 / f16, head_dim <= 128 and a multiple of 8, Hq == Hk): the "
            "other one runs it, or the reference kernel", flash ? "flash" : "cudnn", d);
  if (try_fast(s, !flash, a, &st, d)) return st;
  return cu_attention_reference(s, a, d);
}

h3_status cu_attention_run(cu_state *s, const h3_op *op, const h3_tensor *in, const h3_tensor *out,
                           h3_diag *d) {
  const h3_type *qt = &in[0].type, *kt = &in[1].type, *vt = &in[2].type;
  int64_t v_start = 0, v_stride = kt->dims[1] * qt->dims[2];
  const bool viewed = h3_op_v_view(op, &v_start, &v_stride);
  if (qt->rank != 3 || kt->rank != 3 || vt->rank != (viewed ? 2 : 3) || kt->dims[1] < 1 ||
      qt->dims[1] % kt->dims[1] != 0 || qt->dims[2] > 256)
    return cu_op_error(d, op, CU_HINT_UNSUPPORTED,
                       "expects q[T, Hq, D], k[T, Hk, D], v[T, Hk, D] (or v[T, C] "
                       "with v_view) with Hq %% Hk == 0, D <= 256");
  if (qt->dtype != kt->dtype || qt->dtype != vt->dtype || out[0].type.dtype != qt->dtype ||
      (qt->dtype != H3_BF16 && qt->dtype != H3_F16 && qt->dtype != H3_F32))
    return cu_op_error(d, op, CU_HINT_UNSUPPORTED, "q, k, v and the output must share one of bf16, f16, f32");
  int64_t T = qt->dims[0];
  cu_att_seg a;
  memset(&a, 0, sizeof a);
  a.hq = qt->dims[1];
  a.hk = kt->dims[1];
  a.dim = qt->dims[2];
  a.q_stride = a.o_stride = a.hq * a.dim;
  a.k_stride = a.hk * a.dim;
  a.v_stride = v_stride;
  a.scale = (float)h3_op_attr_float(op, "scale", 1.0);
  a.causal = h3_op_attr_int(op, "causal", 0) != 0;
  a.dtype = qt->dtype;
  size_t es = h3_dtype_size(a.dtype);
  int64_t lo = 0, hi = 0;
  for (int i = 0; cu_next_segment(op, T, &i, &lo, &hi);) {
    a.len = hi - lo;
    a.q = (const char *)in[0].data + lo * a.q_stride * es;
    a.k = (const char *)in[1].data + lo * a.k_stride * es;
    a.v = (const char *)in[2].data + (lo * a.v_stride + v_start) * es;
    a.o = (char *)out[0].data + lo * a.o_stride * es;
    if (run_segment(s, op, &a, d) != H3_OK) return H3_ERR;
  }
  return H3_OK;
}

bool cu_next_segment(const h3_op *op, int64_t T, int *i, int64_t *lo, int64_t *hi) {
  return h3_sage_next_segment(h3_op_attr(op, "segments"), T, i, lo, hi);
}

h3_status cu_qkv_segments(cu_state *s, const h3_op *op, const h3_tensor *in, const h3_tensor *out,
                          h3_status (*fn)(cu_state *, const h3_op *, void *, const cu_qkv_seg *, h3_diag *),
                          void *ctx, h3_diag *d) {
  int64_t T = in[0].type.dims[0], D = in[0].type.dims[2], qs = in[0].type.dims[1] * D, ks = in[1].type.dims[1] * D;
  int64_t vs = ks, v0 = 0, lo = 0, hi = 0;
  h3_op_v_view(op, &v0, &vs);
  for (int i = 0; cu_next_segment(op, T, &i, &lo, &hi);) {
    cu_qkv_seg g = {(const uint16_t *)in[0].data + lo * qs, (const uint16_t *)in[1].data + lo * ks,
                    (const uint16_t *)in[2].data + lo * vs + v0, (uint16_t *)out[0].data + lo * qs, hi - lo, vs};
    if (fn(s, op, ctx, &g, d) != H3_OK) return H3_ERR;
  }
  return H3_OK;
}
