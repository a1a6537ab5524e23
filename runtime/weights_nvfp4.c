/* weights_nvfp4.c: the NVFP4 parameters of the weight store (runtime/weights_internal.h).
 *
 * `--draft-quant nvfp4` (passes/draft_quant_nvfp4.c) replaces a bf16 weight W by three
 * parameters, W_packed, W_scale and W_global_scale, each with quant_source = W's name. The
 * store fills them per tensor (group member) k:
 *   - random weights: tensor k of W as the bf16 parameter would get it (W's tensor name as
 *     the stream, W's init), quantized (include/h3/nvfp4.h), so an nvfp4 plan and a bf16
 *     plan of one seed hold the same draft up to the quantization;
 *   - a weights file with W_packed, W_scale (U8 or F8_E4M3) and W_global_scale: read as they
 *     are (pre-quantized);
 *   - a weights file with only W (bf16): quantized at load; a non-finite element is an error.
 * Saving writes the three tensors (scale as U8), so a saved store loads pre-quantized.
 */
#include "weights_internal.h"

#include "h3/bf16.h"
#include "h3/nvfp4.h"
#include "h3/rng.h"

#include <stdlib.h>
#include <string.h>

/* The three NVFP4 parameters of one bf16 weight, and the bf16 weight they stand for. */
typedef struct {
  h3_weight *w[3]; /* packed, scale, global */
  h3_param src;    /* W: name, bf16 [.., N, K], group and init of the packed parameter */
  int64_t n, k;
} nv_set;

/* The set of packed parameter w->w[i]; false after reporting a sibling that is missing. */
static bool set_of(h3_weights *w, int i, nv_set *s, h3_diag *d) {
  const h3_param *p = w->w[i].param;
  memset(s, 0, sizeof *s);
  s->w[0] = &w->w[i];
  for (int j = 0; j < w->n; j++) {
    const h3_param *q = w->w[j].param;
    if ((q->quant == H3_QUANT_NVFP4_SCALE || q->quant == H3_QUANT_NVFP4_GLOBAL) &&
        !strcmp(q->quant_source, p->quant_source))
      s->w[q->quant - H3_QUANT_NVFP4_PACKED] = &w->w[j];
  }
  if (!s->w[1] || !s->w[2]) {
    h3_diag_error(d, p->span, "recompile the plan with h3c",
                  "NVFP4 weight '%s': the plan lacks its %s parameter", p->quant_source,
                  s->w[1] ? "global scale" : "scale");
    return false;
  }
  s->src = *p;
  s->src.name = p->quant_source;
  s->src.quant = H3_QUANT_NONE;
  s->src.quant_source = NULL;
  s->src.type.dtype = H3_BF16;
  s->n = p->type.dims[p->type.rank - 2];
  s->k = p->type.dims[p->type.rank - 1] * 2;
  s->src.type.dims[p->type.rank - 1] = s->k;
  return true;
}

/* Quantizes tensor k of the set from the bf16 values wb [N, K]. */
static h3_status quantize_into(const nv_set *s, int64_t k, const uint16_t *wb, const char *where,
                               const char *name, h3_diag *d) {
  size_t nk = (size_t)(s->n * s->k);
  int64_t bad;
  if (h3_nvfp4_quantize(wb, true, s->n, s->k, (uint8_t *)s->w[0]->data + (size_t)k * nk / 2,
                        (uint8_t *)s->w[1]->data + (size_t)k * nk / H3_NVFP4_BLOCK,
                        (float *)s->w[2]->data + k, &bad))
    return H3_OK;
  h3_diag_error(d, (h3_span){0}, "NVFP4 quantizes finite weights only: fix the weights",
                "%s: tensor '%s': element [%lld, %lld] is %s; it cannot be quantized to NVFP4",
                where, name, (long long)(bad / s->k), (long long)(bad % s->k),
                h3_bf16_to_f32(wb[bad]) != h3_bf16_to_f32(wb[bad]) ? "NaN" : "infinite");
  return H3_ERR;
}

h3_status h3_weights_nvfp4_random(h3_weights *w, uint64_t seed, h3_diag *d) {
  h3_strbuf name;
  h3_strbuf_init(&name);
  h3_status st = H3_OK;
  float tmp[4096];
  for (int i = 0; i < w->n && st == H3_OK; i++) {
    if (w->w[i].param->quant != H3_QUANT_NVFP4_PACKED) continue;
    nv_set s;
    if (!set_of(w, i, &s, d)) {
      st = H3_ERR;
      break;
    }
    size_t nk = (size_t)(s.n * s.k);
    uint16_t *wb = malloc(nk * sizeof *wb + 1);
    if (!wb) {
      h3_diag_error(d, s.src.span, H3_HINT_OOM, "out of memory quantizing '%s'", s.src.name);
      st = H3_ERR;
    }
    int64_t count = h3_weights_tensor_count(&s.src);
    for (int64_t k = 0; k < count && st == H3_OK; k++) {
      st = h3_weights_tensor_name(&s.src, k, &name, d);
      if (st != H3_OK) break;
      h3_weights_fill_random(&s.src, seed, h3_rng_stream_id(name.data), wb, 0, 0, nk, tmp);
      st = quantize_into(&s, k, wb, "random weights", name.data, d);
    }
    free(wb);
  }
  h3_strbuf_free(&name);
  return st;
}

int h3_weights_nvfp4_load(h3_weights *w, int i, int64_t k, const h3_safetensors *st,
                          const char *path, char *used, h3_strbuf *missing, const char *hint,
                          h3_diag *d) {
  nv_set s;
  if (!set_of(w, i, &s, d)) return -1;
  h3_strbuf names[4]; /* the three parameters' tensors, then W's */
  const h3_st_tensor *t[4];
  int found = 0, rc = 1;
  for (int j = 0; j < 4; j++) {
    h3_strbuf_init(&names[j]);
    const h3_param *p = j < 3 ? s.w[j]->param : &s.src;
    if (h3_weights_tensor_name(p, k, &names[j], d) != H3_OK) rc = -1;
    t[j] = rc > 0 ? h3_safetensors_find(st, names[j].data) : NULL;
    found += j < 3 && t[j];
  }
  if (rc > 0 && found == 3) { /* pre-quantized */
    for (int j = 0; j < 3; j++) {
      h3_type tt = h3_weights_tensor_type(s.w[j]->param);
      size_t tb = (size_t)h3_type_bytes(&tt);
      used[h3_safetensors_index(st, t[j])] = 1;
      if (h3_weights_check_tensor(path, "NVFP4 tensor", names[j].data, t[j], &tt, j == 1, hint,
                                  d) != H3_OK)
        rc = -1;
      else if (tb)
        memcpy((char *)s.w[j]->data + (size_t)k * tb, t[j]->data, tb);
    }
  } else if (rc > 0 && found) {
    h3_strbuf has, lacks;
    h3_strbuf_init(&has);
    h3_strbuf_init(&lacks);
    for (int j = 0; j < 3; j++) {
      h3_strbuf *b = t[j] ? &has : &lacks;
      h3_strbuf_printf(b, "%s'%s'", b->len ? ", " : "", names[j].data);
    }
    h3_diag_error(d, (h3_span){0},
                  "a pre-quantized NVFP4 weight has all three tensors (_packed, _scale, "
                  "_global_scale; docs/nvfp4.md); or give only the bf16 weight",
                  "%s: NVFP4 weight '%s': the file has %s but not %s", path, names[3].data,
                  has.data ? has.data : "", lacks.data ? lacks.data : "");
    h3_strbuf_free(&has);
    h3_strbuf_free(&lacks);
    rc = -1;
  } else if (rc > 0 && t[3]) { /* only the bf16 weight: quantized here */
    h3_type tt = h3_weights_tensor_type(&s.src);
    used[h3_safetensors_index(st, t[3])] = 1;
    uint16_t *wb = malloc((size_t)h3_type_bytes(&tt) + 2);
    if (!wb) {
      h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "%s: out of memory quantizing '%s'", path, names[3].data);
      rc = -1;
    } else if (h3_weights_check_tensor(path, "tensor", names[3].data, t[3], &tt, false, hint, d) !=
                   H3_OK ||
               (memcpy(wb, t[3]->data, t[3]->nbytes),
                quantize_into(&s, k, wb, path, names[3].data, d) != H3_OK)) {
      rc = -1;
    }
    free(wb);
  } else if (rc > 0) {
    missing->len = 0;
    if (missing->data) missing->data[0] = '\0';
    h3_strbuf_printf(missing, "%s', or its bf16 '%s", names[0].data, names[3].data);
    rc = 0;
  }
  for (int j = 0; j < 4; j++) h3_strbuf_free(&names[j]);
  return rc;
}
