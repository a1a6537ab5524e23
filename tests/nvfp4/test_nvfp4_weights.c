/* test_nvfp4_weights.c: the NVFP4 parameters in the weight store (runtime/weights_nvfp4.c)
 * on the tiny M3.1 compiled with and without the draft-quant-nvfp4 pass:
 *   - random weights: every NVFP4 tensor is the quantization (include/h3/nvfp4.h) of the
 *     bf16 plan's weight of the same seed; every other parameter has the same bytes;
 *   - a file holding only the bf16 weights (saved from the bf16 store): quantized at load,
 *     equal to the random NVFP4 store; a NaN in it is an error naming the element;
 *   - a pre-quantized file (saved from the NVFP4 store; scales U8) and the same with the
 *     scales stored as F8_E4M3: read as they are, equal; F8_E4M3 on a packed tensor, a
 *     partial set and a missing weight are errors that name the tensors.
 */
#include "h3/frontend.h"
#include "h3/nvfp4.h"
#include "h3/passes.h"
#include "h3/safetensors.h"
#include "h3/weights.h"

#include <stdlib.h>
#include <string.h>

#include "../common/check.h"

static h3_module *load(bool nvfp4) {
  h3_diag d;
  h3_diag_init(&d);
  h3_frontend_options fo = {.config = "tiny"};
  h3_module *m = h3_frontend_load(H3_SOURCE_DIR "/models/minimax_m3_1.g", &fo, &d);
  h3_pass_options o = h3_pass_options_default();
  if (m && nvfp4 && h3_pass_run_one(m, h3_pass_find("draft-quant-nvfp4"), &o, &d) != H3_OK) m = NULL;
  if (!m) {
    h3_diag_print(&d, stderr);
    exit(1);
  }
  h3_diag_free(&d);
  return m;
}

static bool same_store(const h3_weights *a, const h3_weights *b) {
  if (!a || !b || a->n != b->n) return false;
  for (int i = 0; i < a->n; i++)
    if (a->w[i].bytes != b->w[i].bytes || memcmp(a->w[i].data, b->w[i].data, a->w[i].bytes))
      return false;
  return true;
}

/* Loads path into m; NULL (with the first message in msg) on an error. */
static h3_weights *load_file(const h3_module *m, const char *path, char *msg, size_t cap) {
  h3_diag d;
  h3_diag_init(&d);
  h3_weights *w = h3_weights_load_file(m, path, &d);
  snprintf(msg, cap, "%s", d.head ? d.head->message : "");
  h3_diag_free(&d);
  return w;
}

/* Rewrites the file's header so tensor `name` says dtype F8_E4M3 (it must say U8). */
static void mark_e4m3(const char *path, const char *name) {
  FILE *f = fopen(path, "rb");
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  rewind(f);
  char *b = malloc((size_t)len + 64);
  if (fread(b, 1, (size_t)len, f) != (size_t)len) exit(1);
  fclose(f);
  uint64_t hl;
  memcpy(&hl, b, 8);
  char key[256];
  snprintf(key, sizeof key, "\"%s\":", name);
  char *h = b + 8, *at = strstr(h, key), *u8 = at ? strstr(at, "\"U8\"") : NULL;
  if (!u8 || u8 > h + hl) exit(1);
  size_t pre = (size_t)(u8 - h);
  char *nh = malloc(hl + 64);
  size_t n = (size_t)snprintf(nh, hl + 64, "%.*s\"F8_E4M3\"%.*s", (int)pre, h, (int)(hl - pre - 4),
                              u8 + 4);
  while (n % 8) nh[n++] = ' ';
  uint64_t nl = n;
  f = fopen(path, "wb");
  fwrite(&nl, 8, 1, f);
  fwrite(nh, 1, n, f);
  fwrite(h + hl, 1, (size_t)len - 8 - hl, f);
  fclose(f);
  free(b), free(nh);
}

int main(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *mb = load(false), *mq = load(true);
  h3_weights *wb = h3_weights_random(mb, 11, &d), *wq = h3_weights_random(mq, 11, &d);
  CHECK(wb && wq, "random weights");

  /* random: the NVFP4 tensors quantize the bf16 plan's weights; the rest is equal */
  int quantized = 0, equal = 1;
  for (int i = 0; i < wq->n; i++) {
    const h3_param *p = wq->w[i].param;
    if (p->quant == H3_QUANT_NONE) {
      const h3_weight *b = h3_weights_get(wb, h3_module_param(mb, p->name));
      equal &= b && b->bytes == wq->w[i].bytes && !memcmp(b->data, wq->w[i].data, b->bytes);
      continue;
    }
    if (p->quant != H3_QUANT_NVFP4_PACKED) continue;
    const h3_weight *src = h3_weights_get(wb, h3_module_param(mb, p->quant_source));
    int64_t n = p->type.dims[p->type.rank - 2], k = 2 * p->type.dims[p->type.rank - 1];
    uint8_t *pk = malloc((size_t)(n * k / 2)), *s = malloc((size_t)(n * k / 16));
    float g;
    int64_t bad;
    CHECK(src && h3_nvfp4_quantize(src->data, true, n, k, pk, s, &g, &bad), "%s", p->name);
    CHECK(src && !memcmp(pk, wq->w[i].data, (size_t)(n * k / 2)), "%s: codes differ", p->name);
    quantized++;
    free(pk), free(s);
  }
  CHECK(equal, "the parameters the pass leaves alone have the bf16 plan's bytes");
  CHECK(quantized == 4, "%d NVFP4 weights", quantized);

  char msg[1024];
  const char *fb = "nvfp4_bf16.safetensors", *fq = "nvfp4_q.safetensors";
  CHECK(h3_weights_save_file(wb, fb, &d) == H3_OK && h3_weights_save_file(wq, fq, &d) == H3_OK,
        "save");
  h3_weights *l = load_file(mq, fb, msg, sizeof msg);
  CHECK(same_store(l, wq), "bf16 file quantized at load == random NVFP4 store (%s)", msg);
  h3_weights_free(l);
  l = load_file(mq, fq, msg, sizeof msg);
  CHECK(same_store(l, wq), "pre-quantized file (U8 scales) (%s)", msg);
  h3_weights_free(l);
  mark_e4m3(fq, "dspark.fc.weight_scale");
  mark_e4m3(fq, "dspark.layers.0.mlp.down_proj.weight_scale");
  l = load_file(mq, fq, msg, sizeof msg);
  CHECK(same_store(l, wq), "pre-quantized file (F8_E4M3 scales) (%s)", msg);
  h3_weights_free(l);
  mark_e4m3(fq, "dspark.fc.weight_packed");
  l = load_file(mq, fq, msg, sizeof msg);
  CHECK(!l && strstr(msg, "'dspark.fc.weight_packed': dtype F8_E4M3, expected U8"), "%s", msg);
  h3_weights_free(l);

  /* a partial set, and neither form: errors naming the tensors */
  h3_safetensors_writer *wr = h3_safetensors_writer_new();
  h3_strbuf name;
  h3_strbuf_init(&name);
  for (int pass = 0; pass < 2; pass++) {
    h3_safetensors_writer_free(wr);
    wr = h3_safetensors_writer_new();
    for (int i = 0; i < wq->n; i++) {
      const h3_param *p = wq->w[i].param;
      h3_type tt = h3_weights_tensor_type(p);
      for (int64_t k = 0; k < h3_weights_tensor_count(p); k++) {
        h3_weights_tensor_name(p, k, &name, &d);
        bool fc = !strncmp(name.data, "dspark.fc.weight_", 17);
        if (fc && (pass == 1 || !strcmp(name.data, "dspark.fc.weight_scale"))) continue;
        size_t tb = (size_t)h3_type_bytes(&tt);
        h3_safetensors_writer_add(wr, name.data, tt.dtype, tt.rank, tt.dims,
                                  (char *)wq->w[i].data + (size_t)k * tb, &d);
      }
    }
    const char *bad = pass ? "nvfp4_bad1.safetensors" : "nvfp4_bad0.safetensors";
    CHECK(h3_safetensors_writer_commit(wr, bad, &d) == H3_OK, "write");
    l = load_file(mq, bad, msg, sizeof msg);
    remove(bad);
    if (pass == 0)
      CHECK(!l && strstr(msg, "NVFP4 weight 'dspark.fc.weight': the file has "
                              "'dspark.fc.weight_packed', 'dspark.fc.weight_global_scale' but "
                              "not 'dspark.fc.weight_scale'"),
            "%s", msg);
    else
      CHECK(!l && strstr(msg, "'dspark.fc.weight_packed', or its bf16 'dspark.fc.weight'"), "%s",
            msg);
    h3_weights_free(l);
  }
  h3_safetensors_writer_free(wr);
  h3_strbuf_free(&name);

  /* a NaN in the bf16 weight */
  h3_weight *fcw = (h3_weight *)h3_weights_get(wb, h3_module_param(mb, "dspark.fc.weight"));
  ((uint16_t *)fcw->data)[192 + 5] = 0x7fc0;
  const char *fnan = "nvfp4_nan.safetensors"; /* a new name: h3 never writes over an input */
  CHECK(h3_weights_save_file(wb, fnan, &d) == H3_OK, "save");
  l = load_file(mq, fnan, msg, sizeof msg);
  CHECK(!l && strstr(msg, "tensor 'dspark.fc.weight': element [1, 5] is NaN"), "%s", msg);
  h3_weights_free(l);

  h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  h3_weights_free(wb), h3_weights_free(wq);
  h3_module_free(mb), h3_module_free(mq);
  remove(fb), remove(fq), remove(fnan);
  return check_summary("nvfp4_weights");
}
