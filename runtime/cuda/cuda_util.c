/* cuda_util.c: launches of the cuda backend's own small kernels (kernels/util.cu, compiled
 * on first use behind the prelude, through the kernel cache): h3cu_index_copy (an index op's
 * row copy), h3cu_fill_random (random weights made on the device) and h3cu_trap (the kernel
 * fault of the H3_FAULT_KERNEL test switch), h3cu_convert (all_reduce's fp32 widening and
 * rounding) and h3cu_rank_ids (moe's expert ids of one rank's slice); and the generic
 * linear (kernels/linear_generic.cu), instantiated per dtype combination, bitwise equal to
 * the CPU reference: the fp32 island of H3 and every linear cuBLASLt does not take.
 */
#include "cuda_internal.h"

#include <stdio.h>
#include <string.h>

enum { UTIL_INDEX, UTIL_FILL, UTIL_TRAP, UTIL_CONVERT, UTIL_RANK_IDS, UTIL_N };
static const char *const util_names[UTIL_N] = {"h3cu_index_copy", "h3cu_fill_random", "h3cu_trap",
                                               "h3cu_convert", "h3cu_rank_ids"};

static cu_kernel *util_kernel(cu_state *s, int which, h3_diag *d) {
  cu_kernel *k = cu_kernel_find(s, util_names[which]);
  if (k) {
    if (!k->fn) h3_diag_error(d, (h3_span){0}, CU_HINT_EARLIER, "cuda: %s failed to load earlier", k->name);
    return k->fn ? k : NULL;
  }
  cu_kernel *ks[UTIL_N] = {0};
  if (cu_compile_tu(s, NULL, "util.cu", true, UTIL_N, util_names, ks, d) != H3_OK)
    return NULL;
  return ks[which];
}

h3_status cu_launch_trap(cu_state *s, h3_diag *d) {
  cu_kernel *k = util_kernel(s, UTIL_TRAP, d);
  if (!k) return H3_ERR;
  cu_note_queued(NULL, k->name);
  CU_CHECK(d, cudaLaunchKernel((const void *)k->fn, (dim3){1, 1, 1}, (dim3){32, 1, 1}, NULL, 0, s->stream),
           k->name);
  return H3_OK;
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
    return cu_op_error(d, op, CU_HINT_UNSUPPORTED, "expects x[N, ..] and an i32 / i64 index");
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
void cu_linear_defines(char *buf, size_t len, const char *name, h3_dtype x, h3_dtype w, h3_dtype bias,
                       h3_dtype y) {
  snprintf(buf, len,
           "#define H3_LINEAR_NAME %s\n#define H3_X_T %s\n#define H3_W_T %s\n#define H3_B_T %s\n"
           "#define H3_Y_T %s\n",
           name, h3_kernel_ctype(x), h3_kernel_ctype(w),
           h3_kernel_ctype(bias == H3_DTYPE_COUNT ? H3_F32 : bias), h3_kernel_ctype(y));
}

/* Launches util kernel `which` over n elements (grid_1d); nothing when n is 0. */
static h3_status launch_1d(cu_state *s, int which, int64_t n, void **args, h3_diag *d) {
  cu_kernel *k = util_kernel(s, which, d);
  if (!k) return H3_ERR;
  if (n == 0) return H3_OK;
  int64_t grid[3], block[3];
  grid_1d(n, grid, block);
  return cu_launch(s, k, grid, block, 0, args, d);
}

h3_status cu_convert(cu_state *s, const void *x, h3_dtype xt, void *y, h3_dtype yt, int64_t n,
                     h3_diag *d) {
  int xi = (int)xt, yi = (int)yt;
  long long nn = n;
  void *args[] = {&x, &xi, &y, &yi, &nn};
  return launch_1d(s, UTIL_CONVERT, n, args, d);
}

h3_status cu_rank_ids(cu_state *s, const void *ids, void *local, int64_t n, int64_t base, int64_t E,
                      h3_diag *d) {
  long long nn = n, b = base, e = E;
  void *args[] = {&ids, &local, &nn, &b, &e};
  return launch_1d(s, UTIL_RANK_IDS, n, args, d);
}

h3_status cu_linear_generic(cu_state *s, const h3_op *op, const h3_tensor *in, int n_in,
                            const h3_tensor *out, h3_diag *d) {
  h3_dtype tx = in[0].type.dtype, tw = in[1].type.dtype, ty = out[0].type.dtype;
  h3_dtype tb = n_in > 2 ? in[2].type.dtype : H3_DTYPE_COUNT;
  char name[96];
  snprintf(name, sizeof name, "h3cu_linear_%s_%s_%s_%s", h3_dtype_name(tx), h3_dtype_name(tw),
           n_in > 2 ? h3_dtype_name(tb) : "nobias", h3_dtype_name(ty));
  cu_kernel *k = cu_kernel_find(s, name);
  if (k && !k->fn) return cu_op_error(d, op, CU_HINT_EARLIER, "kernel %s failed to load earlier", name);
  if (!k) {
    char defs[512];
    cu_linear_defines(defs, sizeof defs, name, tx, tw, tb, ty);
    const char *names[1] = {name};
    if (cu_compile_tu(s, defs, "linear_generic.cu", true, 1, names, &k, d) != H3_OK) return H3_ERR;
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
  if (grid[1] > 65535) return cu_op_error(d, op, CU_HINT_UNSUPPORTED, "more than %d rows", 65535 * 64);
  return cu_launch(s, k, grid, block, 0, args, d);
}
