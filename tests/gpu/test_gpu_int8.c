/* test_gpu_int8.c: linear_int8 and its halves matmul_i8 / dequant_i8 on the cuda backend
 * (runtime/cuda/cuda_int8.c, codegen's dequant kernels) against the CPU reference, bitwise
 * (label gpu; exit 77 when no GPU is usable).
 *
 * Each case is a graph x bf16[M, K], W bf16[N, K], bias bf16[N] ->
 *   quantize_rows(x) {rotate}, quantize_rows(W) {rotate} (the load-time weight quantizer),
 *   linear_int8 unsplit, in chunks (chunk_rows), without a bias and with an f32 result;
 *   then int8-dequant-split's ops: matmul_i8 unsplit and in chunks (its int32 result
 *   written chunk by chunk in place), dequant_i8 standalone (bias, bf16 and f32) and a
 *   lossless fused group reading two column slices of the accumulators (the SwiGLU shape,
 *   with an exact product instead of silu so that GPU and CPU agree bitwise).
 * The ops run one by one on the GPU (chained through device buffers, poisoned with 0xFF
 * before each run so an unwritten element shows) and through h3_cpu_run_op on the host;
 * every result must be bitwise equal. For every linear_int8 the int32 accumulators of the
 * GPU GEMM (cu_int8_accumulators, chunk by chunk as the op runs them) must equal an int64
 * sum over the CPU's codes computed here, and the GEMM must go through cuBLASLt whenever
 * N % 4 == 0 and K % 4 == 0 (a shape that misses it checks the own int8 kernel); every
 * matmul_i8 result must equal that sum too.
 * Cases: rotate 0 and 256, M with a remainder chunk, H3's M = 32,704 with K = 5,376 and
 * chunks of 8,192 (3 x 8192 + 8128), chunk_rows 1 and odd values, N = 30 (own kernel).
 * Also every quantize_rows of tests/int8/kernels/quantize_ops.ir (bf16 and f32 inputs, K not
 * a multiple of 256, 3-D, one row; rotate 0 and 256) on its own, codes and scales bitwise.
 */
#include "cuda_internal.h"
#include "gpu_common.h"
#include "h3/backend.h"
#include "h3/bf16.h"
#include "h3/cuda_backend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/check.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uniform(double lo, double hi) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return lo + (hi - lo) * (double)(rng >> 11) * 0x1p-53;
}

/* bf16 values in [-2, 2) with every 61st channel 50x larger (outliers, what rotation spreads) */
static void fill_bf16(uint16_t *p, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++)
      p[r * cols + c] = h3_f32_to_bf16((float)(uniform(-2, 2) * (c % 61 == 5 ? 50 : 1)));
}

typedef struct {
  int64_t m, n, k;
  int rotate;
  int64_t chunks[3]; /* chunk_rows of three more linear_int8 ops (0: none) */
} int8_case;

/* Runs op (operands random: bf16 / f32 inputs) on the GPU and on the CPU; results bitwise. */
static void check_op(h3_backend *b, const h3_op *op, const char *what) {
  h3_tensor hin[8], din[8], cpu[4], gpu[4], dout[4];
  int ni = op->n_operands, no = op->n_results;
  h3_diag d;
  h3_diag_init(&d);
  h3_status st = ni <= 8 && no <= 4 ? H3_OK : H3_ERR;
  for (int i = 0; st == H3_OK && i < ni; i++) {
    const h3_type *t = &op->operands[i]->type;
    size_t bytes = (size_t)h3_type_bytes(t);
    int64_t n = h3_type_numel(t), cols = t->dims[t->rank - 1];
    hin[i] = (h3_tensor){*t, malloc(bytes + 16)};
    if (t->dtype == H3_BF16) fill_bf16(hin[i].data, n / cols, cols);
    else
      for (int64_t e = 0; e < n; e++) ((float *)hin[i].data)[e] = (float)uniform(-3, 3);
    din[i] = (h3_tensor){*t, b->ops->alloc(b, bytes)};
    st = b->ops->upload(b, din[i].data, hin[i].data, bytes, &d);
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

/* Every op of tests/int8/kernels/quantize_ops.ir through check_op: the file of the source
 * tree the test was built from, else the one under the current directory (a staged binary
 * runs from a checkout elsewhere: tests/gpu/run_all.sh). */
static void check_quantize_ops(h3_backend *b) {
  h3_diag d;
  h3_diag_init(&d);
  size_t len = 0;
  const char *built = H3_SOURCE_DIR "/tests/int8/kernels/quantize_ops.ir";
  char *text = h3_read_file(access(built, R_OK) == 0 ? built : "tests/int8/kernels/quantize_ops.ir",
                            &len, &d);
  h3_module *m = text ? h3_module_parse("quantize_ops.ir", text, len, &d) : NULL;
  if (!m) h3_diag_print(&d, stderr);
  h3_plan *p = m ? gpu_plan_load(b, m, H3_TIER_EXACT) : NULL; /* the kernels, as in h3exec */
  CHECK(p != NULL, "reading and loading tests/int8/kernels/quantize_ops.ir");
  int k = 0;
  for (const h3_op *op = p ? p->module->graphs[0]->body.first : NULL;
       op && op->code != H3_OP_RETURN; op = op->next, k++) {
    char what[64];
    snprintf(what, sizeof what, "quantize_ops.ir #%d", k);
    check_op(b, op, what);
  }
  h3_plan_free(p);
  free(text);
  h3_diag_free(&d);
}

enum { MAXV = 24 };

/* The module text of one case. */
static char *case_ir(const int8_case *c) {
  size_t len = 8192;
  char *t = malloc(len);
  if (!t) return NULL;
  long long M = c->m, N = c->n, K = c->k;
  int o = snprintf(t, len,
                   "module @t config \"test\" {\n"
                   "  graph @g(%%x: bf16[%lld, %lld], %%w: bf16[%lld, %lld], %%b: bf16[%lld])\n"
                   "      -> (y: bf16[%lld, %lld]) {\n"
                   "    %%q, %%s = quantize_rows(%%x) {rotate = %d} : i8[%lld, %lld], f32[%lld]\n"
                   "    %%wq, %%ws = quantize_rows(%%w) {rotate = %d} : i8[%lld, %lld], f32[%lld]\n"
                   "    %%y = linear_int8(%%q, %%s, %%wq, %%ws, %%b) : bf16[%lld, %lld]\n"
                   "    %%yn = linear_int8(%%q, %%s, %%wq, %%ws) : bf16[%lld, %lld]\n"
                   "    %%yf = linear_int8(%%q, %%s, %%wq, %%ws, %%b) {dtype = f32} : f32[%lld, %lld]\n",
                   M, K, N, K, N, M, N, c->rotate, M, K, M, c->rotate, N, K, N, M, N, M, N, M, N);
  for (int i = 0; i < 3; i++)
    if (c->chunks[i])
      o += snprintf(t + o, len - (size_t)o,
                    "    %%y%d = linear_int8(%%q, %%s, %%wq, %%ws, %%b) {chunk_rows = %lld} : "
                    "bf16[%lld, %lld]\n", i, (long long)c->chunks[i], M, N);
  long long H = N / 2;
  o += snprintf(t + o, len - (size_t)o,
                "    %%acc = matmul_i8(%%q, %%wq) : i32[%lld, %lld]\n"
                "    %%acc1 = matmul_i8(%%q, %%wq) {chunk_rows = %lld} : i32[%lld, %lld]\n"
                "    %%ya = dequant_i8(%%acc, %%s, %%ws, %%b) : bf16[%lld, %lld]\n"
                "    %%yfa = dequant_i8(%%acc1, %%s, %%ws, %%b) {dtype = f32} : f32[%lld, %lld]\n"
                "    %%ys = fused(%%s, %%acc, %%ws) {name = \"dq_glu\", tier = lossless} : "
                "bf16[%lld, %lld] {\n"
                "    ^(%%s1: f32[%lld], %%a: i32[%lld, %lld], %%w1: f32[%lld]):\n"
                "      %%a0 = slice(%%a) {axis = 1, start = 0, len = %lld} : i32[%lld, %lld]\n"
                "      %%w0 = slice(%%w1) {axis = 0, start = 0, len = %lld} : f32[%lld]\n"
                "      %%a1 = slice(%%a) {axis = 1, start = %lld, len = %lld} : i32[%lld, %lld]\n"
                "      %%w2 = slice(%%w1) {axis = 0, start = %lld, len = %lld} : f32[%lld]\n"
                "      %%g = dequant_i8(%%a0, %%s1, %%w0) : bf16[%lld, %lld]\n"
                "      %%u = dequant_i8(%%a1, %%s1, %%w2) : bf16[%lld, %lld]\n"
                "      %%p = mul(%%g, %%u) : bf16[%lld, %lld]\n"
                "      yield %%p\n    }\n",
                M, N, (long long)(c->chunks[0] ? c->chunks[0] : M), M, N, M, N, M, N, M, H, M, M,
                N, N, H, M, H, H, H, H, H, M, H, H, H, H, M, H, M, H, M, H);
  snprintf(t + o, len - (size_t)o, "    return %%y\n  }\n}\n");
  return t;
}

/* ref[m, n] = sum_k q[m, k] * wq[n, k], summed in int64 here (|sum| < 2^31 for K <= 131071). */
static void exact_acc(int32_t *ref, const int8_t *q, const int8_t *w, int64_t M, int64_t N,
                      int64_t K) {
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      int64_t s = 0;
      for (int64_t k = 0; k < K; k++) s += (int64_t)q[m * K + k] * w[n * K + k];
      ref[m * N + n] = (int32_t)s;
    }
}

typedef struct {
  const h3_value *v;
  void *host, *dev;
} slot;

static slot *slot_of(slot *sl, int n, const h3_value *v) {
  for (int i = 0; i < n; i++)
    if (sl[i].v == v) return &sl[i];
  return NULL;
}

static void run_case(h3_backend *b, const int8_case *c) {
  char what[160];
  snprintf(what, sizeof what, "M %lld, N %lld, K %lld, rotate %d", (long long)c->m,
           (long long)c->n, (long long)c->k, c->rotate);
  h3_diag d;
  h3_diag_init(&d);
  char *text = case_ir(c);
  h3_module *m = text ? h3_module_parse("int8_case", text, strlen(text), &d) : NULL;
  free(text);
  CHECK(m != NULL, "%s: the test module does not parse", what);
  if (!m) h3_diag_print(&d, stderr);
  h3_plan *p = m ? gpu_plan_load(b, m, H3_TIER_EXACT) : NULL; /* owns m */
  CHECK(!m || p, "%s: the test module's plan does not load", what);
  if (!p) {
    h3_diag_free(&d);
    return;
  }
  cu_state *s = b->ctx;
  const h3_graph *g = m->graphs[0];
  slot sl[MAXV];
  int ns = 0;
  h3_status st = H3_OK;
  uint16_t *hx = NULL;
  int32_t *ref = NULL; /* the exact accumulators, computed at the first linear_int8 */
  for (int i = 0; i < g->n_inputs && st == H3_OK; i++) { /* x, w, b: random bf16 */
    const h3_value *v = g->inputs[i];
    size_t bytes = (size_t)h3_type_bytes(&v->type);
    hx = malloc(bytes);
    void *dev = b->ops->alloc(b, bytes);
    if (!hx || !dev) st = H3_ERR;
    if (st == H3_OK) {
      int64_t cols = v->type.dims[v->type.rank - 1];
      fill_bf16(hx, h3_type_numel(&v->type) / cols, cols);
      st = b->ops->upload(b, dev, hx, bytes, &d);
    }
    sl[ns++] = (slot){v, hx, dev};
  }
  for (const h3_op *op = g->body.first; op && st == H3_OK; op = op->next) {
    if (op->code == H3_OP_RETURN) break;
    h3_tensor hin[5], din[5], hout[2], dout[2];
    for (int i = 0; i < op->n_operands; i++) {
      slot *x = slot_of(sl, ns, op->operands[i]);
      hin[i] = (h3_tensor){op->operands[i]->type, x->host};
      din[i] = (h3_tensor){op->operands[i]->type, x->dev};
    }
    void *gpu_copy[2] = {0};
    for (int i = 0; i < op->n_results && st == H3_OK; i++) {
      const h3_value *v = op->results[i];
      size_t bytes = (size_t)h3_type_bytes(&v->type);
      void *h = malloc(bytes), *dv = b->ops->alloc(b, bytes);
      gpu_copy[i] = malloc(bytes);
      if (!h || !dv || !gpu_copy[i] || ns == MAXV) {
        free(h), b->ops->release(b, dv);
        st = H3_ERR;
        break;
      }
      memset(gpu_copy[i], 0xFF, bytes); /* poison */
      st = b->ops->upload(b, dv, gpu_copy[i], bytes, &d);
      sl[ns++] = (slot){v, h, dv};
      hout[i] = (h3_tensor){v->type, h};
      dout[i] = (h3_tensor){v->type, dv};
    }
    char opw[200];
    snprintf(opw, sizeof opw, "%s: %s -> %%%s (chunk_rows %lld)", what, h3_opcode_name(op->code),
             op->results[0]->name ? op->results[0]->name : "?",
             (long long)h3_op_attr_int(op, "chunk_rows", 0));
    if (st == H3_OK) st = b->ops->run_op(b, op, din, op->n_operands, dout, op->n_results, &d);
    if (st == H3_OK) st = b->ops->sync(b, &d);
    for (int i = 0; st == H3_OK && i < op->n_results; i++)
      st = b->ops->download(b, gpu_copy[i], dout[i].data, (size_t)h3_type_bytes(&dout[i].type), &d);
    if (st == H3_OK) st = h3_cpu_run_op(op, hin, op->n_operands, hout, op->n_results, 16, 0, &d);
    CHECK(st == H3_OK, "%s failed", opw);
    for (int i = 0; st == H3_OK && i < op->n_results; i++)
      CHECK(memcmp(gpu_copy[i], hout[i].data, (size_t)h3_type_bytes(&hout[i].type)) == 0,
            "%s: result %d differs from the cpu reference", opw, i);
    if (st == H3_OK && op->code == H3_OP_MATMUL_I8) {
      cu_op *o = cu_op_get(s, op, &d);
      CHECK(o && cu_int8_uses_cublaslt(o->int8) == (c->n % 4 == 0 && c->k % 4 == 0),
            "%s: cuBLASLt use", opw);
      CHECK(ref && memcmp(ref, gpu_copy[0], (size_t)(c->m * c->n) * 4) == 0,
            "%s: the int32 result differs from the exact sum", opw);
    }
    if (st == H3_OK && op->code == H3_OP_LINEAR_INT8) {
      cu_op *o = cu_op_get(s, op, &d);
      int64_t M = c->m, N = c->n, K = c->k;
      size_t bytes = (size_t)(M * N) * 4;
      int32_t *acc = malloc(bytes), *dacc = b->ops->alloc(b, bytes);
      st = o && acc && dacc ? H3_OK : H3_ERR;
      if (st == H3_OK) {
        CHECK(cu_int8_uses_cublaslt(o->int8) == (N % 4 == 0 && K % 4 == 0),
              "%s: cuBLASLt %s", opw, cu_int8_uses_cublaslt(o->int8) ? "used" : "not used");
        memset(acc, 0xFF, bytes);
        st = b->ops->upload(b, dacc, acc, bytes, &d);
      }
      if (st == H3_OK) st = cu_int8_accumulators(s, o->int8, din, dacc, &d);
      if (st == H3_OK) st = b->ops->sync(b, &d);
      if (st == H3_OK) st = b->ops->download(b, acc, dacc, bytes, &d);
      CHECK(st == H3_OK, "%s: accumulators failed", opw);
      if (st == H3_OK) {
        if (!ref && (ref = malloc(bytes))) exact_acc(ref, hin[0].data, hin[2].data, M, N, K);
        CHECK(ref && memcmp(ref, acc, bytes) == 0, "%s: the int32 accumulators differ from the "
              "exact sum", opw);
      }
      free(acc);
      b->ops->release(b, dacc);
    }
    for (int i = 0; i < op->n_results; i++) free(gpu_copy[i]);
  }
  if (st != H3_OK) h3_diag_print(&d, stderr);
  CHECK(st == H3_OK, "%s: setup failed", what);
  for (int i = 0; i < ns; i++) free(sl[i].host), b->ops->release(b, sl[i].dev);
  free(ref);
  h3_plan_free(p); /* the next plan's load forgets the records of m's ops */
  h3_diag_free(&d);
  printf("test_gpu_int8: %s done\n", what);
}

int main(void) {
  char why[256];
  if (!h3_cuda_available(why, sizeof why)) {
    printf("test_gpu_int8: skipped: %s\n", why);
    return 77;
  }
  h3_diag d;
  h3_diag_init(&d);
  h3_backend_options bo = {.threads = 2, .seed = 0};
  h3_backend *b = h3_backend_cuda_new(&bo, NULL, &d);
  if (!b) {
    h3_diag_print(&d, stderr);
    return 1;
  }
  static const int8_case cases[] = {
      {4100, 256, 512, 0, {1024, 4099, 1}},
      {4100, 256, 512, 256, {1024, 333, 8}},
      {32704, 64, 5376, 256, {8192, 0, 0}}, /* H3's rows and K: 3 x 8192 + 8128 */
      {777, 30, 256, 0, {100, 0, 0}},       /* N % 4 != 0: the own int8 kernel */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(b, &cases[i]);
  check_quantize_ops(b);
  h3_backend_free(b);
  h3_diag_free(&d);
  if (failures) {
    fprintf(stderr, "test_gpu_int8: %d of %d checks failed\n", failures, checks);
    return 1;
  }
  printf("test_gpu_int8: %d checks passed\n", checks);
  return 0;
}
