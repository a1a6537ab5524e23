/* cuda_util.c: the cuda backend's own small kernels (CUDA C compiled with NVRTC on first
 * use, after codegen's prelude, through the kernel cache):
 *   h3cu_index_copy   index(x[N, ..], i) {offset}: copies row i + offset (clamped into
 *                     [0, N): an out-of-range row cannot be reported from inside a
 *                     captured graph, the CPU backend reports it) in 16/8/4/1-byte units;
 *   h3cu_fill_random  element i of a weight tensor: h3_rng_init_value (include/h3/rng.h,
 *                     the CPU's exact arithmetic), rounded to the parameter's dtype like
 *                     h3_weights_store;
 *   h3cu_linear_*     linear for any dtype combination, generated per combination:
 *                     64x64 output tiles, 256 threads with 4x4 outputs each; every output
 *                     is sum_k fp32(x)*fp32(w) with __fmul_rn / __fadd_rn, k ascending from
 *                     0, then + bias, then one rounding: the CPU reference's exact
 *                     sequence, so the result is bitwise equal to it. Used for the fp32
 *                     island of H3 and every linear cuBLASLt does not take.
 */
#include "cuda_internal.h"

#include <stdio.h>
#include <string.h>

static const char util_source[] =
    "extern \"C\" __global__ void h3cu_index_copy(const unsigned char *x, const void *iptr,\n"
    "    int i64, long long offset, long long n_rows, long long row_bytes, int unit,\n"
    "    unsigned char *out) {\n"
    "  long long r = (i64 ? *(const long long *)iptr : (long long)*(const int *)iptr) + offset;\n"
    "  r = r < 0 ? 0 : (r >= n_rows ? n_rows - 1 : r);\n"
    "  const unsigned char *src = x + r * row_bytes;\n"
    "  long long units = row_bytes / unit;\n"
    "  for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < units;\n"
    "       u += (long long)gridDim.x * blockDim.x) {\n"
    "    if (unit == 16) ((uint4 *)out)[u] = ((const uint4 *)src)[u];\n"
    "    else if (unit == 8) ((uint2 *)out)[u] = ((const uint2 *)src)[u];\n"
    "    else if (unit == 4) ((unsigned int *)out)[u] = ((const unsigned int *)src)[u];\n"
    "    else out[u] = src[u];\n"
    "  }\n"
    "}\n"
    "\n"
    "__device__ long long h3cu_round_sat(double v, double lo, double hi) {\n"
    "  if (v != v) return 0;\n"
    "  double r = rint(v);\n"
    "  return (long long)(r < lo ? lo : (r > hi ? hi : r));\n"
    "}\n"
    "// dtype: the h3_dtype number (bf16 0, f16 1, f32 2, f64 3, i8 4, i32 5, i64 6, u8 7)\n"
    "extern \"C\" __global__ void h3cu_fill_random(void *dst, int dtype, long long n, int kind,\n"
    "    float scale, unsigned long long seed, unsigned int stream) {\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;\n"
    "       i += (long long)gridDim.x * blockDim.x) {\n"
    "    float v = h3_rng_init_value(kind, scale, seed, stream, (unsigned long long)i);\n"
    "    switch (dtype) {\n"
    "    case 0: ((h3_bf16 *)dst)[i] = __float2bfloat16_rn(v); break;\n"
    "    case 1: ((h3_f16 *)dst)[i] = __float2half_rn(v); break;\n"
    "    case 2: ((float *)dst)[i] = v; break;\n"
    "    case 3: ((double *)dst)[i] = (double)v; break;\n"
    "    case 4: ((signed char *)dst)[i] = (signed char)h3cu_round_sat(v, -128.0, 127.0); break;\n"
    "    case 5: ((int *)dst)[i] = (int)h3cu_round_sat(v, -2147483648.0, 2147483647.0); break;\n"
    "    case 6: ((long long *)dst)[i] = h3cu_round_sat(v, -9223372036854775808.0,\n"
    "                                                   9223372036854774784.0); break;\n"
    "    default: ((unsigned char *)dst)[i] = (unsigned char)h3cu_round_sat(v, 0.0, 255.0); break;\n"
    "    }\n"
    "  }\n"
    "}\n";

const char *cu_util_source(void) { return util_source; }

enum { UTIL_INDEX, UTIL_FILL, UTIL_N };
static const char *const util_names[UTIL_N] = {"h3cu_index_copy", "h3cu_fill_random"};

static cu_kernel *util_kernel(cu_state *s, int which, h3_diag *d) {
  cu_kernel *k = cu_kernel_find(s, util_names[which]);
  if (k) {
    if (!k->fn) h3_diag_error(d, (h3_span){0}, NULL, "cuda: %s failed to load earlier", k->name);
    return k->fn ? k : NULL;
  }
  cu_kernel *ks[UTIL_N] = {0};
  if (cu_compile_tu(s, "the cuda backend's utility kernels", util_source, true, UTIL_N,
                    util_names, ks, d) != H3_OK)
    return NULL;
  return ks[which];
}

static void grid_1d(int64_t work, int64_t grid[3], int64_t block[3]) {
  int64_t g = (work + 255) / 256;
  grid[0] = g < 1 ? 1 : (g > 65535 ? 65535 : g);
  grid[1] = grid[2] = 1;
  block[0] = 256;
  block[1] = block[2] = 1;
}

h3_status cu_index_copy(cu_state *s, const h3_op *op, const h3_tensor *x, const h3_tensor *i,
                        const h3_tensor *out, h3_diag *d) {
  cu_kernel *k = util_kernel(s, UTIL_INDEX, d);
  if (!k) return H3_ERR;
  if (x->type.rank < 1 || (i->type.dtype != H3_I32 && i->type.dtype != H3_I64))
    return cu_op_error(d, op, NULL, "expects x[N, ..] and an i32 / i64 index");
  long long n_rows = x->type.dims[0], offset = h3_op_attr_int(op, "offset", 0);
  long long row_bytes = (long long)h3_type_bytes(&out->type);
  if (n_rows < 1 || row_bytes == 0) return H3_OK;
  int unit = 16;
  uintptr_t mix = (uintptr_t)x->data | (uintptr_t)out->data | (uintptr_t)row_bytes;
  while (unit > 1 && (mix % (uintptr_t)unit) != 0) unit /= 2;
  int i64 = i->type.dtype == H3_I64;
  const void *xp = x->data, *ip = i->data;
  void *op_ = out->data;
  void *args[] = {&xp, &ip, &i64, &offset, &n_rows, &row_bytes, &unit, &op_};
  int64_t grid[3], block[3];
  grid_1d(row_bytes / unit, grid, block);
  return cu_launch(s, k, grid, block, 0, args, d);
}

h3_status cu_fill_random(cu_state *s, void *dst, h3_dtype dtype, int64_t n, int kind, float scale,
                         uint64_t seed, uint32_t stream, h3_diag *d) {
  if (n <= 0) return H3_OK;
  cu_kernel *k = util_kernel(s, UTIL_FILL, d);
  if (!k) return H3_ERR;
  int dt = (int)dtype;
  long long nn = n;
  unsigned long long sd = seed;
  unsigned int st = stream;
  void *args[] = {&dst, &dt, &nn, &kind, &scale, &sd, &st};
  int64_t grid[3], block[3];
  grid_1d(n, grid, block);
  grid[0] = grid[0] > (int64_t)s->sm_count * 16 ? (int64_t)s->sm_count * 16 : grid[0];
  return cu_launch(s, k, grid, block, 0, args, d);
}

/* ---- generic linear ------------------------------------------------------------------------ */
static const char linear_template[] =
    "extern \"C\" __global__ void __launch_bounds__(256) %s(const %s *__restrict__ x,\n"
    "    const %s *__restrict__ w, const %s *__restrict__ bias, %s *__restrict__ y,\n"
    "    long long M, long long N, long long K) {\n"
    "  __shared__ float xs[16][65], ws[16][65]; // [k][row of the tile]\n"
    "  const int tx = threadIdx.x %% 16, ty = threadIdx.x / 16;\n"
    "  const long long m0 = (long long)blockIdx.y * 64, n0 = (long long)blockIdx.x * 64;\n"
    "  float acc[4][4];\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 4; i++)\n"
    "#pragma unroll\n"
    "    for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;\n"
    "  for (long long k0 = 0; k0 < K; k0 += 16) {\n"
    "    for (int e = threadIdx.x; e < 1024; e += 256) {\n"
    "      const int r = e / 16, c = e %% 16;\n"
    "      const long long kk = k0 + c, mm = m0 + r, nn = n0 + r;\n"
    "      xs[c][r] = (mm < M && kk < K) ? (float)h3_ld(x, mm * K + kk) : 0.0f;\n"
    "      ws[c][r] = (nn < N && kk < K) ? (float)h3_ld(w, nn * K + kk) : 0.0f;\n"
    "    }\n"
    "    __syncthreads();\n"
    "    const int kmax = K - k0 < 16 ? (int)(K - k0) : 16;\n"
    "    for (int c = 0; c < kmax; c++) {\n"
    "      float a[4], b[4];\n"
    "#pragma unroll\n"
    "      for (int i = 0; i < 4; i++) { a[i] = xs[c][ty + 16 * i]; b[i] = ws[c][tx + 16 * i]; }\n"
    "#pragma unroll\n"
    "      for (int i = 0; i < 4; i++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < 4; j++) acc[i][j] = __fadd_rn(acc[i][j], __fmul_rn(a[i], b[j]));\n"
    "    }\n"
    "    __syncthreads();\n"
    "  }\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 4; i++)\n"
    "#pragma unroll\n"
    "    for (int j = 0; j < 4; j++) {\n"
    "      const long long m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;\n"
    "      if (m >= M || n >= N) continue;\n"
    "      float v = acc[i][j];\n"
    "      if (bias) v = __fadd_rn(v, (float)h3_ld(bias, n));\n"
    "      h3_st(y, m * N + n, v);\n"
    "    }\n"
    "}\n";

void cu_linear_source(char *buf, size_t len, const char *name, h3_dtype x, h3_dtype w, h3_dtype bias,
                      h3_dtype y) {
  snprintf(buf, len, linear_template, name, h3_codegen_ctype(x), h3_codegen_ctype(w),
           h3_codegen_ctype(bias == H3_DTYPE_COUNT ? H3_F32 : bias), h3_codegen_ctype(y));
}

h3_status cu_linear_generic(cu_state *s, const h3_op *op, const h3_tensor *in, int n_in,
                            const h3_tensor *out, h3_diag *d) {
  h3_dtype tx = in[0].type.dtype, tw = in[1].type.dtype, ty = out[0].type.dtype;
  h3_dtype tb = n_in > 2 ? in[2].type.dtype : H3_DTYPE_COUNT;
  char name[96];
  snprintf(name, sizeof name, "h3cu_linear_%s_%s_%s_%s", h3_dtype_name(tx), h3_dtype_name(tw),
           n_in > 2 ? h3_dtype_name(tb) : "nobias", h3_dtype_name(ty));
  cu_kernel *k = cu_kernel_find(s, name);
  if (k && !k->fn) return cu_op_error(d, op, NULL, "kernel %s failed to load earlier", name);
  if (!k) {
    char src[sizeof linear_template + 256];
    cu_linear_source(src, sizeof src, name, tx, tw, tb, ty);
    const char *names[1] = {name};
    if (cu_compile_tu(s, name, src, true, 1, names, &k, d) != H3_OK) return H3_ERR;
  }
  const h3_type *xt = &in[0].type;
  long long K = xt->rank ? xt->dims[xt->rank - 1] : 1, N = in[1].type.dims[0];
  if (N == 0) return H3_OK;
  long long M = h3_type_numel(&out[0].type) / N;
  if (M == 0) return H3_OK;
  const void *x = in[0].data, *w = in[1].data, *bias = n_in > 2 ? in[2].data : NULL;
  void *y = out[0].data;
  void *args[] = {&x, &w, &bias, &y, &M, &N, &K};
  int64_t grid[3] = {(N + 63) / 64, (M + 63) / 64, 1}, block[3] = {256, 1, 1};
  if (grid[1] > 65535) return cu_op_error(d, op, NULL, "more than %d rows", 65535 * 64);
  return cu_launch(s, k, grid, block, 0, args, d);
}
