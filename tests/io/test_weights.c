/* test_weights.c: the weight store (include/h3/weights.h).
 *
 * - expanded tensor names ("{}" -> group_base + i, "{e}" -> inner index) and counts;
 * - random weights: same seed -> same bytes, different seed -> different; every element
 *   equals the generator's value recomputed here from rng.h with stream = the expanded
 *   name and the index inside that tensor, rounded to the dtype by an independent
 *   rounding (nearest of the two neighbouring bf16 / f16 values); const / rope / int
 *   params; statistics of the normal params (std close to the init scale);
 * - save -> load gives the same bytes; totals for reports;
 * - graph inputs load and outputs save round trips.
 */
#include "h3/weights.h"

#include "h3/bf16.h"
#include "h3/rng.h"
#include "h3/safetensors.h"
#include "io_module.h"
#include "io_test.h"

/* Nearest bf16 of a float, ties to even, by comparing the two candidates in double. */
static float ref_bf16(float x) {
  uint32_t b = h3_f32_bits(x);
  float lo = h3_f32_from_bits(b & 0xffff0000u), hi = h3_f32_from_bits((b & 0xffff0000u) + 0x10000u);
  double dl = fabs((double)x - lo), dh = fabs((double)hi - x);
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return ((h3_f32_bits(lo) >> 16) & 1) ? hi : lo;
}

/* Nearest f16 of a (small, normal-range) float, by scanning the f16 grid around it. */
static float ref_f16(float x) {
  double best = 1e300, val = 0;
  for (uint32_t h = 0; h < 0x7c00; h++) {
    for (int sgn = 0; sgn < 2; sgn++) {
      double v = h3_f16_to_f32((uint16_t)(h | (sgn ? 0x8000u : 0)));
      double dist = fabs(v - x);
      if (dist < best || (dist == best && !(h & 1))) best = dist, val = v;
    }
  }
  return (float)val;
}

static void test_names(void) {
  h3_module *m = io_module_new("tiny");
  h3_diag d;
  h3_diag_init(&d);
  h3_strbuf s;
  h3_strbuf_init(&s);
  CHECK(h3_weights_tensor_count(m->params[P_EMBED]) == 1);
  CHECK(h3_weights_tensor_count(m->params[P_QKV]) == 3);
  CHECK(h3_weights_tensor_count(m->params[P_EXPERT]) == 6);
  CHECK(h3_weights_tensor_count(m->params[P_GATE]) == 4);
  h3_weights_tensor_name(m->params[P_EMBED], 0, &s, &d);
  CHECK(strcmp(s.data, "embed.weight") == 0);
  h3_weights_tensor_name(m->params[P_QKV], 2, &s, &d);
  CHECK(strcmp(s.data, "blocks.2.attn.qkv.weight") == 0);
  h3_weights_tensor_name(m->params[P_EXPERT], 0, &s, &d);
  CHECK(strcmp(s.data, "layers.3.mlp.experts.0.down.weight") == 0);
  h3_weights_tensor_name(m->params[P_EXPERT], 5, &s, &d); /* [group 1, inner 2] */
  CHECK(strcmp(s.data, "layers.4.mlp.experts.2.down.weight") == 0);
  h3_weights_tensor_name(m->params[P_GATE], 3, &s, &d);
  CHECK(strcmp(s.data, "experts.3.gate") == 0);
  h3_type t = h3_weights_tensor_type(m->params[P_EXPERT]);
  CHECK(t.rank == 2 && t.dims[0] == 4 && t.dims[1] == 5 && t.dtype == H3_F32);
  CHECK(d.errors == 0);
  h3_strbuf_free(&s);
  h3_diag_free(&d);
  h3_module_free(m);
}

/* Expected fp32 value of element i of expanded tensor `name` of a random-init param. */
static float expect_value(const h3_param *p, uint64_t seed, const char *name, uint64_t i) {
  h3_philox_out o = h3_rng_block(seed, h3_rng_stream_hash(name), i);
  float scale = (float)p->init_scale;
  if (p->init == H3_INIT_UNIFORM) return scale * h3_rng_sym(o.w[0]);
  /* Box-Muller spelled out again from the pieces */
  float r = sqrtf(-2.0f * h3_rng_log(h3_rng_u01(o.w[0])));
  float n = r * h3_rng_cos2pi(h3_rng_u01(o.w[1]));
  if (p->init == H3_INIT_ONES_PLUS_NORMAL) return fmaf(scale, n, 1.0f);
  return scale * n;
}

static void test_random(void) {
  h3_module *m = io_module_new("tiny");
  h3_diag d;
  h3_diag_init(&d);
  h3_weights *a = h3_weights_random(m, 1234, &d), *b = h3_weights_random(m, 1234, &d);
  h3_weights *c = h3_weights_random(m, 1235, &d);
  CHECK(a && b && c);
  if (!a || !b || !c) {
    h3_diag_print(&d, stderr);
    return;
  }
  CHECK(a->n == P_COUNT && a->n_tensors == 1 + 3 + 6 + 3 + 1 + 1 + 1 + 1 + 4);
  CHECK(a->total_bytes == 16 * 8 * 2 + 3 * 12 * 8 * 2 + 2 * 3 * 4 * 5 * 4 + 3 * 8 * 2 + 8 * 4 +
                              4 * 4 + 5 * 4 + 16 * 2 + 4 * 6 * 2);
  for (int i = 0; i < a->n; i++) {
    CHECK(a->w[i].param == m->params[i]);
    CHECK(h3_weights_get(a, m->params[i]) == &a->w[i]);
    CHECK(memcmp(a->w[i].data, b->w[i].data, a->w[i].bytes) == 0);
    int random = m->params[i]->init == H3_INIT_NORMAL || m->params[i]->init == H3_INIT_UNIFORM ||
                 m->params[i]->init == H3_INIT_ONES_PLUS_NORMAL;
    if (random) CHECK(memcmp(a->w[i].data, c->w[i].data, a->w[i].bytes) != 0);
    else CHECK(memcmp(a->w[i].data, c->w[i].data, a->w[i].bytes) == 0);
  }
  /* every element of the random params, recomputed */
  h3_strbuf name;
  h3_strbuf_init(&name);
  int zeros = 0;
  for (int pi = 0; pi < a->n; pi++) {
    const h3_param *p = m->params[pi];
    if (p->init == H3_INIT_CONST || p->init == H3_INIT_ROPE_INV_FREQ) continue;
    h3_type tt = h3_weights_tensor_type(p);
    int64_t numel = h3_type_numel(&tt);
    for (int64_t k = 0; k < h3_weights_tensor_count(p); k++) {
      h3_weights_tensor_name(p, k, &name, &d);
      for (int64_t i = 0; i < numel; i++) {
        float want = expect_value(p, 1234, name.data, (uint64_t)i);
        size_t at = (size_t)(k * numel + i);
        float got;
        if (p->type.dtype == H3_BF16) {
          got = h3_bf16_to_f32(((uint16_t *)a->w[pi].data)[at]);
          want = ref_bf16(want);
        } else if (p->type.dtype == H3_F16) {
          got = h3_f16_to_f32(((uint16_t *)a->w[pi].data)[at]);
          want = ref_f16(want);
        } else {
          got = ((float *)a->w[pi].data)[at];
        }
        CHECK(got == want);
        zeros += got == 0.0f;
      }
    }
  }
  CHECK(zeros == 0);
  /* const, rope, int */
  const float *bias = a->w[P_BIAS].data;
  for (int i = 0; i < 8; i++) CHECK(bias[i] == 0.5f);
  const float *rope = a->w[P_ROPE].data;
  for (int j = 0; j < 4; j++) CHECK(rope[j] == (float)pow(10000.0, -2.0 * j / 8));
  const int32_t *idx = a->w[P_IDX].data;
  for (int i = 0; i < 5; i++) CHECK(idx[i] == 7);
  /* statistics: the qkv std is close to 1/sqrt(8); the norm weights are near 1 */
  double s2 = 0, nmin = 9, nmax = -9;
  const uint16_t *q = a->w[P_QKV].data;
  for (int i = 0; i < 3 * 12 * 8; i++) s2 += pow(h3_bf16_to_f32(q[i]), 2);
  double sd = sqrt(s2 / (3 * 12 * 8));
  const uint16_t *nw = a->w[P_NORM].data;
  for (int i = 0; i < 24; i++) {
    double v = h3_bf16_to_f32(nw[i]);
    nmin = v < nmin ? v : nmin;
    nmax = v > nmax ? v : nmax;
  }
  printf("qkv std %.4f (init 0.3536); norm weights in [%.4f, %.4f]\n", sd, nmin, nmax);
  CHECK(fabs(sd - 1 / sqrt(8.0)) < 0.05);
  CHECK(nmin > 0.9 && nmax < 1.1 && nmin != nmax);
  const float *ex = a->w[P_EXPERT].data;
  for (int i = 0; i < 120; i++) CHECK(ex[i] > -0.2f && ex[i] < 0.2f);
  h3_strbuf_free(&name);
  h3_weights_free(a);
  h3_weights_free(b);
  h3_weights_free(c);
  CHECK(d.errors == 0);
  h3_diag_free(&d);
  h3_module_free(m);
}

static void test_store_rounding(void) {
  int32_t i32[4];
  uint8_t u8[4];
  int8_t i8[4];
  h3_weights_store(i32, H3_I32, 0, 2.5);
  h3_weights_store(i32, H3_I32, 1, 3.5);
  h3_weights_store(i32, H3_I32, 2, -1e12);
  h3_weights_store(i32, H3_I32, 3, 1e12);
  CHECK(i32[0] == 2 && i32[1] == 4 && i32[2] == INT32_MIN && i32[3] == INT32_MAX);
  h3_weights_store(u8, H3_U8, 0, -3);
  h3_weights_store(u8, H3_U8, 1, 300);
  h3_weights_store(i8, H3_I8, 0, -200);
  h3_weights_store(i8, H3_I8, 1, 0.0 / 0.0);
  CHECK(u8[0] == 0 && u8[1] == 255 && i8[0] == -128 && i8[1] == 0);
  uint16_t h[2];
  h3_weights_store(h, H3_BF16, 0, 1.0 + 0x1p-8); /* a tie: to even (1.0) */
  h3_weights_store(h, H3_BF16, 1, 1.0 + 0x1p-8 + 0x1p-20);
  CHECK(h[0] == 0x3f80 && h[1] == 0x3f81);
}

static void test_save_load(void) {
  h3_module *m = io_module_new("tiny");
  h3_diag d;
  h3_diag_init(&d);
  h3_weights *a = h3_weights_random(m, 77, &d);
  const char *path = io_path("w.safetensors");
  CHECK(a && h3_weights_save_file(a, path, &d) == H3_OK);
  h3_weights *b = h3_weights_load_file(m, path, &d);
  CHECK(b != NULL);
  for (int i = 0; a && b && i < a->n; i++)
    CHECK(memcmp(a->w[i].data, b->w[i].data, a->w[i].bytes) == 0);
  /* the file holds one tensor per expanded name, with the metadata */
  h3_safetensors *st = h3_safetensors_open(path, &d);
  CHECK(st && h3_safetensors_count(st) == a->n_tensors);
  CHECK(st && strcmp(h3_safetensors_metadata(st, "h3_config"), "tiny") == 0);
  const h3_st_tensor *t = st ? h3_safetensors_find(st, "layers.4.mlp.experts.1.down.weight") : NULL;
  CHECK(t && memcmp(t->data, (float *)a->w[P_EXPERT].data + 4 * 20, 80) == 0);
  h3_safetensors_close(st);
  h3_weights_free(a);
  h3_weights_free(b);
  if (d.errors) h3_diag_print(&d, stderr);
  CHECK(d.errors == 0);
  h3_diag_free(&d);
  h3_module_free(m);
}

static void test_graph_io(void) {
  h3_module *m = io_module_new("tiny");
  h3_graph *g = h3_module_graph(m, "step");
  h3_diag d;
  h3_diag_init(&d);
  uint16_t x[32];
  float t[2];
  int32_t idx[4] = {2, 0, 3, 1};
  for (int i = 0; i < 32; i++) x[i] = h3_f32_to_bf16(io_value((uint32_t)i, 1));
  for (int i = 0; i < 2; i++) t[i] = io_value((uint32_t)i, 2);
  h3_safetensors_writer *w = h3_safetensors_writer_new();
  h3_safetensors_writer_add(w, "idx", H3_I32, 1, (int64_t[]){4}, idx, &d);
  h3_safetensors_writer_add(w, "x", H3_BF16, 2, (int64_t[]){4, 8}, x, &d);
  h3_safetensors_writer_add(w, "t", H3_F32, 1, (int64_t[]){2}, t, &d);
  CHECK(h3_safetensors_writer_commit(w, io_path("in.safetensors"), &d) == H3_OK);
  h3_safetensors_writer_free(w);
  h3_host_tensor *in = h3_inputs_load_file(g, io_path("in.safetensors"), 0, &d);
  CHECK(in != NULL);
  if (!in) {
    h3_diag_print(&d, stderr);
    return;
  }
  CHECK(strcmp(in[0].name, "x") == 0 && in[0].bytes == sizeof x && !memcmp(in[0].data, x, sizeof x));
  CHECK(strcmp(in[1].name, "t") == 0 && !memcmp(in[1].data, t, sizeof t));
  CHECK(strcmp(in[2].name, "idx") == 0 && !memcmp(in[2].data, idx, sizeof idx));
  CHECK((uintptr_t)in[0].data % 64 == 0);
  /* outputs: return (x, t) named y, t_out */
  h3_type ot = h3_outputs_type(g, 0);
  CHECK(ot.dtype == H3_BF16 && ot.rank == 2 && ot.dims[1] == 8);
  const void *outs[2] = {in[0].data, in[1].data};
  CHECK(h3_outputs_save_file(g, outs, io_path("out.safetensors"), &d) == H3_OK);
  h3_safetensors *st = h3_safetensors_open(io_path("out.safetensors"), &d);
  CHECK(st && h3_safetensors_count(st) == 2);
  const h3_st_tensor *y = st ? h3_safetensors_find(st, "y") : NULL;
  const h3_st_tensor *to = st ? h3_safetensors_find(st, "t_out") : NULL;
  CHECK(y && y->type.dtype == H3_BF16 && !memcmp(y->data, x, sizeof x));
  CHECK(to && to->type.dtype == H3_F32 && !memcmp(to->data, t, sizeof t));
  h3_safetensors_close(st);
  h3_host_tensors_free(in, g->n_inputs);
  CHECK(d.errors == 0);
  h3_diag_free(&d);
  h3_module_free(m);
}

int main(void) {
  io_scratch_make("w");
  test_names();
  test_random();
  test_store_rounding();
  test_save_load();
  test_graph_io();
  io_scratch_done();
  if (io_failures) fprintf(stderr, "%d failure(s)\n", io_failures);
  return io_failures ? 1 : 0;
}
