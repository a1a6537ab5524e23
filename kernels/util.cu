// util.cu: the cuda backend's small utility kernels (compiled behind the prelude, exact tier).
//   h3cu_index_copy   index(x[N, ..], i) {offset}: copies row i + offset (clamped into [0, N):
//                     an out-of-range row cannot be reported from inside a captured graph, the
//                     CPU backend reports it) in 16/8/4/1-byte units;
//   h3cu_fill_random  element i of a weight tensor: h3_rng_init_value (include/h3/rng.h, the
//                     CPU's exact arithmetic), rounded to the parameter's dtype like
//                     h3_weights_store;
//   h3cu_trap         a kernel fault on purpose (the H3_FAULT_KERNEL test switch);
//   h3cu_convert      y[i] = x[i] between bf16, f16 and f32 (one RNE rounding): all_reduce's
//                     widening before its fp32 sum and its rounding after;
//   h3cu_rank_ids     moe {ranks}: a global expert id in this rank's slice [base, base + E)
//                     becomes its local id, any other -1 (a slot the moe kernels skip).
extern "C" __global__ void h3cu_index_copy(const unsigned char *x, const void *iptr,
    int i64, long long offset, long long n_rows, long long row_bytes, int unit,
    unsigned char *out) {
  long long r = (i64 ? *(const long long *)iptr : (long long)*(const int *)iptr) + offset;
  r = r < 0 ? 0 : (r >= n_rows ? n_rows - 1 : r);
  const unsigned char *src = x + r * row_bytes;
  long long units = row_bytes / unit;
  for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < units;
       u += (long long)gridDim.x * blockDim.x) {
    if (unit == 16) ((uint4 *)out)[u] = ((const uint4 *)src)[u];
    else if (unit == 8) ((uint2 *)out)[u] = ((const uint2 *)src)[u];
    else if (unit == 4) ((unsigned int *)out)[u] = ((const unsigned int *)src)[u];
    else out[u] = src[u];
  }
}

extern "C" __global__ void h3cu_trap() { asm volatile("trap;"); }

__device__ long long h3cu_round_sat(double v, double lo, double hi) {
  if (v != v) return 0;
  double r = rint(v);
  return (long long)(r < lo ? lo : (r > hi ? hi : r));
}
// dtype: the h3_dtype number (bf16 0, f16 1, f32 2, f64 3, i8 4, i32 5, i64 6, u8 7)
extern "C" __global__ void h3cu_fill_random(void *dst, int dtype, long long n, int kind,
    float scale, unsigned long long seed, unsigned int stream) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float v = h3_rng_init_value(kind, scale, seed, stream, (unsigned long long)i);
    switch (dtype) {
    case 0: ((h3_bf16 *)dst)[i] = __float2bfloat16_rn(v); break;
    case 1: ((h3_f16 *)dst)[i] = __float2half_rn(v); break;
    case 2: ((float *)dst)[i] = v; break;
    case 3: ((double *)dst)[i] = (double)v; break;
    case 4: ((signed char *)dst)[i] = (signed char)h3cu_round_sat(v, -128.0, 127.0); break;
    case 5: ((int *)dst)[i] = (int)h3cu_round_sat(v, -2147483648.0, 2147483647.0); break;
    case 6: ((long long *)dst)[i] = h3cu_round_sat(v, -9223372036854775808.0,
                                                   9223372036854774784.0); break;
    default: ((unsigned char *)dst)[i] = (unsigned char)h3cu_round_sat(v, 0.0, 255.0); break;
    }
  }
}

__device__ float h3cu_load_float(const void *p, int dtype, long long i) {
  if (dtype == 0) return __bfloat162float(((const h3_bf16 *)p)[i]);
  if (dtype == 1) return __half2float(((const h3_f16 *)p)[i]);
  return ((const float *)p)[i];
}
// xt, yt: h3_dtype numbers of bf16 (0), f16 (1) or f32 (2)
extern "C" __global__ void h3cu_convert(const void *x, int xt, void *y, int yt, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    float v = h3cu_load_float(x, xt, i);
    if (yt == 0) ((h3_bf16 *)y)[i] = __float2bfloat16_rn(v);
    else if (yt == 1) ((h3_f16 *)y)[i] = __float2half_rn(v);
    else ((float *)y)[i] = v;
  }
}

extern "C" __global__ void h3cu_rank_ids(const int *ids, int *local, long long n, long long base,
                                         long long E) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    long long e = (long long)ids[i] - base;
    local[i] = e >= 0 && e < E ? (int)e : -1;
  }
}
