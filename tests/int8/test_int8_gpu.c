/* test_int8_gpu.c: the INT8 ops on the CUDA backend against the CPU reference (label gpu;
 * exit 77 when no GPU is usable). Each op runs through the backend's run_op (kernels are
 * JIT-compiled from codegen, library calls prepared by the backend) on random inputs and
 * must equal h3_cpu_run_op bitwise:
 *   - quantize_rows: tests/int8/kernels/quantize_ops.ir and H3's activation shape
 *     [32704, 5376] with rotate 256 (codes and scales);
 *   - linear_int8 with a bias at M = 9000, N = 64, K = 512, unsplit and with chunk_rows
 *     1024, 8192 and M - 1 (a remainder each): equal to the CPU, hence to each other.
 *     Needs the backend's linear_int8 (docs/int8.md section 6, item 2).
 */
#include "h3/backend.h"
#include "h3/bf16.h"
#include "h3/cuda_backend.h"
#include "h3/op_registry.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/check.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static double uniform(double lo, double hi) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return lo + (hi - lo) * (double)(rng >> 11) * 0x1p-53;
}

static void fill(void *p, const h3_type *t) {
  int64_t n = h3_type_numel(t);
  for (int64_t i = 0; i < n; i++) {
    double v = uniform(-2, 2) * (i % 61 == 5 ? 50 : 1); /* outlier channels */
    switch (t->dtype) {
    case H3_BF16: ((uint16_t *)p)[i] = h3_f32_to_bf16((float)v); break;
    case H3_F32: /* rank 1: the GEMM scales, small and positive */
      ((float *)p)[i] = t->rank == 1 ? (float)(1e-3 * (0.1 + fabs(v))) : (float)v;
      break;
    case H3_I8: ((int8_t *)p)[i] = (int8_t)(int)uniform(-128, 128); break;
    default: memset((char *)p + i * (int64_t)h3_dtype_size(t->dtype), 0, h3_dtype_size(t->dtype)); break;
    }
  }
}

/* Runs op on the GPU and on the CPU with the same random operands; compares bitwise. */
static void check_op(h3_backend *b, const h3_op *op, const char *what) {
  h3_tensor hin[8], din[8], cpu[4], gpu[4], dout[4];
  int ni = op->n_operands, no = op->n_results;
  h3_diag d;
  h3_diag_init(&d);
  h3_status st = H3_OK;
  for (int i = 0; i < ni; i++) {
    size_t bytes = (size_t)h3_type_bytes(&op->operands[i]->type);
    hin[i] = (h3_tensor){op->operands[i]->type, malloc(bytes + 16)};
    fill(hin[i].data, &hin[i].type);
    din[i] = (h3_tensor){hin[i].type, b->ops->alloc(b, bytes)};
    if (st == H3_OK) st = b->ops->upload(b, din[i].data, hin[i].data, bytes, &d);
  }
  for (int i = 0; i < no; i++) {
    size_t bytes = (size_t)h3_type_bytes(&op->results[i]->type);
    cpu[i] = (h3_tensor){op->results[i]->type, calloc(1, bytes + 16)};
    gpu[i] = (h3_tensor){op->results[i]->type, calloc(1, bytes + 16)};
    dout[i] = (h3_tensor){op->results[i]->type, b->ops->alloc(b, bytes)};
  }
  if (st == H3_OK) st = b->ops->run_op(b, op, din, ni, dout, no, &d);
  if (st == H3_OK) st = b->ops->sync(b, &d);
  for (int i = 0; st == H3_OK && i < no; i++)
    st = b->ops->download(b, gpu[i].data, dout[i].data, (size_t)h3_type_bytes(&gpu[i].type), &d);
  if (st == H3_OK) st = h3_cpu_run_op(op, hin, ni, cpu, no, 2, 0, &d);
  if (st != H3_OK) h3_diag_print(&d, stderr);
  CHECK(st == H3_OK, "%s failed", what);
  for (int i = 0; st == H3_OK && i < no; i++)
    CHECK(memcmp(cpu[i].data, gpu[i].data, (size_t)h3_type_bytes(&cpu[i].type)) == 0,
          "%s: result %d differs from the cpu backend", what, i);
  for (int i = 0; i < ni; i++) free(hin[i].data), b->ops->release(b, din[i].data);
  for (int i = 0; i < no; i++)
    free(cpu[i].data), free(gpu[i].data), b->ops->release(b, dout[i].data);
  h3_diag_free(&d);
}

static h3_module *parse(const char *file, const char *text) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_module_parse(file, text, strlen(text), &d);
  if (!m) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return m;
}

static const char *gemm_ir =
    "module @t config \"test\" {\n"
    "  graph @g(%q: i8[9000, 512], %sx: f32[9000], %w: i8[64, 512], %sw: f32[64], %b: bf16[64])\n"
    "      -> (y0: bf16[9000, 64], y1: bf16[9000, 64], y2: bf16[9000, 64], y3: bf16[9000, 64]) {\n"
    "    %y0 = linear_int8(%q, %sx, %w, %sw, %b) : bf16[9000, 64]\n"
    "    %y1 = linear_int8(%q, %sx, %w, %sw, %b) {chunk_rows = 1024} : bf16[9000, 64]\n"
    "    %y2 = linear_int8(%q, %sx, %w, %sw, %b) {chunk_rows = 8192} : bf16[9000, 64]\n"
    "    %y3 = linear_int8(%q, %sx, %w, %sw, %b) {chunk_rows = 8999} : bf16[9000, 64]\n"
    "    return %y0, %y1, %y2, %y3\n  }\n}\n";

static const char *h3_shape_ir =
    "module @t config \"test\" {\n"
    "  graph @g(%h: bf16[32704, 5376]) -> (q: i8[32704, 5376], s: f32[32704]) {\n"
    "    %q, %s = quantize_rows(%h) {rotate = 256} : i8[32704, 5376], f32[32704]\n"
    "    return %q, %s\n  }\n}\n";

int main(void) {
  char why[256];
  if (!h3_cuda_available(why, sizeof why)) {
    printf("test_int8_gpu: skipped: %s\n", why);
    return 77;
  }
  h3_diag d;
  h3_diag_init(&d);
  h3_backend_options bo = {2, 0};
  h3_backend *b = h3_backend_cuda_new(&bo, NULL, &d);
  if (!b) {
    h3_diag_print(&d, stderr);
    return 1;
  }
  size_t len = 0;
  char *text = h3_read_file(H3_SOURCE_DIR "/tests/int8/kernels/quantize_ops.ir", &len, &d);
  h3_module *mods[3] = {text ? parse("quantize_ops.ir", text) : NULL,
                        parse("h3_shape", h3_shape_ir), parse("gemm", gemm_ir)};
  for (int i = 0; i < 3; i++) {
    CHECK(mods[i] != NULL, "module %d", i);
    if (!mods[i]) continue;
    int k = 0;
    for (const h3_op *op = mods[i]->graphs[0]->body.first; op; op = op->next, k++) {
      if (op->code == H3_OP_RETURN) break;
      char what[96];
      static const char *const names[] = {"quantize_ops.ir", "H3 shape", "gemm"};
      snprintf(what, sizeof what, "%s #%d (%s)", names[i], k, h3_opcode_name(op->code));
      check_op(b, op, what);
    }
    h3_module_free(mods[i]);
  }
  free(text);
  h3_backend_free(b);
  h3_diag_free(&d);
  if (failures) {
    fprintf(stderr, "test_int8_gpu: %d of %d checks failed\n", failures, checks);
    return 1;
  }
  printf("test_int8_gpu: %d checks passed\n", checks);
  return 0;
}
