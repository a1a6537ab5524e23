/* cuda_weights.c: random weights made on the GPU (h3_backend_ext.init_param).
 *
 * The values are those of h3_weights_random (runtime/weights.c), bit for bit: for each
 * expanded tensor of the parameter (group member k, named by h3_weights_tensor_name), the
 * Philox stream is the FNV-1a hash of that name and element i of the tensor gets
 * h3_rng_init_value(kind, (float)init_scale, seed, stream, i) from include/h3/rng.h (the
 * same text runs on the device), rounded to the parameter's dtype (h3cu_fill_random).
 * The deterministic initialisers (CONST, ROPE_INV_FREQ: fp64 math on the host) are small;
 * they are computed on the host with h3_weights_store and uploaded.
 */
#include "cuda_internal.h"
#include "h3/rng.h"
#include "h3/weights.h"

#include <math.h>
#include <stdlib.h>

static h3_status host_init(h3_backend *b, void *dst, const h3_param *p, int64_t count,
                           int64_t numel, size_t member_bytes, h3_diag *d) {
  void *buf = malloc(member_bytes ? member_bytes : 1);
  if (!buf) {
    h3_diag_error(d, p->span, H3_HINT_OOM, "out of memory initialising parameter '%s'", p->name);
    return H3_ERR;
  }
  for (int64_t i = 0; i < numel; i++) {
    double v = p->init == H3_INIT_CONST ? p->init_value
                                        : pow(p->init_value, -2.0 * (double)i / p->init_scale);
    h3_weights_store(buf, p->type.dtype, (size_t)i, v);
  }
  h3_status st = H3_OK;
  for (int64_t k = 0; st == H3_OK && k < count; k++)
    st = b->ops->upload(b, (char *)dst + (size_t)k * member_bytes, buf, member_bytes, d);
  if (st == H3_OK) st = b->ops->sync(b, d); /* buf is freed next */
  free(buf);
  return st;
}

h3_status cu_init_param(h3_backend *b, void *dst, const h3_param *p, uint64_t seed, int64_t first,
                        int64_t count, h3_diag *d) {
  cu_state *s = b->ctx;
  h3_type tt = h3_weights_tensor_type(p);
  int64_t numel = h3_type_numel(&tt);
  size_t member_bytes = (size_t)h3_type_bytes(&tt);
  if (!numel || count <= 0) return H3_OK;
  if (p->quant != H3_QUANT_NONE) { /* the executor quantizes them on the host */
    h3_diag_error(d, p->span, "this is a bug in h3's executor; please report it",
                  "parameter '%s' (NVFP4 form of '%s'): the cuda backend makes random weights "
                  "only for plain parameters", p->name, p->quant_source ? p->quant_source : "?");
    return H3_ERR;
  }
  if (p->init == H3_INIT_CONST || p->init == H3_INIT_ROPE_INV_FREQ)
    return host_init(b, dst, p, count, numel, member_bytes, d);
  int kind = p->init == H3_INIT_UNIFORM            ? H3_RNG_INIT_UNIFORM
             : p->init == H3_INIT_ONES_PLUS_NORMAL ? H3_RNG_INIT_ONES_PLUS_NORMAL
                                                   : H3_RNG_INIT_NORMAL;
  float scale = (float)p->init_scale;
  h3_strbuf name;
  h3_strbuf_init(&name);
  h3_status st = H3_OK;
  cu_mark_busy(s);
  for (int64_t k = 0; st == H3_OK && k < count; k++) {
    st = h3_weights_tensor_name(p, first + k, &name, d);
    if (st == H3_OK)
      st = cu_fill_random(s, (char *)dst + (size_t)k * member_bytes, p->type.dtype, numel, kind,
                          scale, seed, h3_rng_stream_id(name.data), d);
  }
  h3_strbuf_free(&name);
  return st;
}
