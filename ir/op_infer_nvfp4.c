/* op_infer_nvfp4.c: result type inference of linear_nvfp4, the W4A16 linear over an NVFP4
 * weight (ops.def, include/h3/nvfp4.h).
 *
 * Contract: linear_nvfp4(x bf16[.., K], packed u8[N, K/2], scale u8[N, K/16], global f32[1])
 * {dtype = bf16, a float} -> dtype[.., N], K a positive multiple of 16 (one e4m3 scale per
 * 16 elements along K).
 */
#include "op_infer.h"

#include "h3/nvfp4.h"

H3_INFER_DECL(h3_infer_linear_nvfp4) {
  const h3_type *x = TY(0), *p = TY(1), *s = TY(2), *g = TY(3);
  if (x->rank < 1 || x->dtype != H3_BF16) FAIL("linear_nvfp4: x must be bf16[.., K], got %s", TS(x));
  int64_t k = x->dims[x->rank - 1];
  if (k <= 0 || k % H3_NVFP4_BLOCK != 0)
    FAIL("linear_nvfp4: K = %lld must be a positive multiple of %d (one e4m3 scale per %d "
         "elements)", LL(k), H3_NVFP4_BLOCK, H3_NVFP4_BLOCK);
  if (p->rank != 2 || p->dtype != H3_U8 || p->dims[1] != k / 2)
    FAIL("linear_nvfp4: packed must be u8[N, %lld] (two e2m1 codes a byte, K = %lld), got %s",
         LL(k / 2), LL(k), TS(p));
  int64_t n = p->dims[0];
  if (s->rank != 2 || s->dtype != H3_U8 || s->dims[0] != n || s->dims[1] != k / H3_NVFP4_BLOCK)
    FAIL("linear_nvfp4: scale must be u8[%lld, %lld] (e4m3 bits, one per %d elements of a row), "
         "got %s", LL(n), LL(k / H3_NVFP4_BLOCK), H3_NVFP4_BLOCK, TS(s));
  if (g->rank != 1 || g->dtype != H3_F32 || g->dims[0] != 1)
    FAIL("linear_nvfp4: global must be f32[1] (the tensor's dequant multiplier), got %s", TS(g));
  return h3_infer_quant_linear_result(op, x, n, out, why, why_len);
}
