/* test_weights_fill.c: h3_weights_random's parallel fill (runtime/weights.c) against the
 * generator, element by element and bit for bit: parameters of several work items (items
 * that start inside a tensor and items that span tensor boundaries), thousands of tiny
 * tensors sharing items, every random kind and stored dtype, a const parameter between
 * them; the same seed twice gives the same bytes whatever thread filled what.
 */
#include "io_module.h"
#include "io_test.h"

#include "h3/bf16.h"
#include "h3/rng.h"
#include "h3/weights.h"

static h3_module *fill_module(void) {
  h3_module *m = h3_module_new("fill_test", "tiny");
  if (!m) abort();
  io_param(m, "big.{}.w", H3_BF16, 2, (int64_t[]){3, 100003}, 1, 5, H3_INIT_NORMAL, 0.02, 0);
  io_param(m, "norm.w", H3_F32, 1, (int64_t[]){300}, 0, 0, H3_INIT_CONST, 0, 1.0);
  io_param(m, "flat.w", H3_F32, 1, (int64_t[]){200001}, 0, 0, H3_INIT_UNIFORM, 0.5, 0);
  io_param(m, "tiny.{e}.b", H3_BF16, 2, (int64_t[]){20000, 7}, 1, 0, H3_INIT_ONES_PLUS_NORMAL,
           0.1, 0);
  io_param(m, "half.w", H3_F16, 2, (int64_t[]){70000, 2}, 0, 0, H3_INIT_NORMAL, 1.0, 0);
  return m;
}

/* The stored bits of element i of tensor `name` of random parameter p. */
static uint32_t want_bits(const h3_param *p, uint64_t seed, const char *name, uint64_t i) {
  float v = h3_rng_init_value((int)p->init, (float)p->init_scale, seed, h3_rng_stream_id(name), i);
  if (p->type.dtype == H3_BF16) return h3_f32_to_bf16(v);
  if (p->type.dtype == H3_F16) return h3_f32_to_f16(v);
  return h3_f32_bits(v);
}

static uint32_t got_bits(const h3_weight *w, size_t at) {
  if (w->param->type.dtype == H3_F32) return h3_f32_bits(((const float *)w->data)[at]);
  return ((const uint16_t *)w->data)[at];
}

int main(void) {
  h3_module *m = fill_module();
  h3_diag d;
  h3_diag_init(&d);
  h3_weights *a = h3_weights_random(m, 99, &d), *b = h3_weights_random(m, 99, &d);
  CHECK(a && b);
  if (!a || !b) {
    h3_diag_print(&d, stderr);
    return 1;
  }
  h3_strbuf name;
  h3_strbuf_init(&name);
  int64_t bad = 0;
  for (int pi = 0; pi < a->n; pi++) {
    const h3_weight *w = &a->w[pi];
    const h3_param *p = w->param;
    CHECK(memcmp(w->data, b->w[pi].data, w->bytes) == 0);
    if (p->init == H3_INIT_CONST) {
      for (int i = 0; i < 300; i++) bad += ((const float *)w->data)[i] != 1.0f;
      continue;
    }
    h3_type tt = h3_weights_tensor_type(p);
    int64_t numel = h3_type_numel(&tt);
    for (int64_t k = 0; k < h3_weights_tensor_count(p); k++) {
      h3_weights_tensor_name(p, k, &name, &d);
      for (int64_t i = 0; i < numel; i++)
        bad += got_bits(w, (size_t)(k * numel + i)) != want_bits(p, 99, name.data, (uint64_t)i);
    }
  }
  CHECK(bad == 0);
  CHECK(d.errors == 0);
  h3_strbuf_free(&name);
  h3_weights_free(a);
  h3_weights_free(b);
  h3_diag_free(&d);
  h3_module_free(m);
  if (io_failures) fprintf(stderr, "%d failure(s)\n", io_failures);
  return io_failures ? 1 : 0;
}
