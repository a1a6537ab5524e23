// sage_quant.cu: the quantization pre-passes of `sage_attention` on the GPU (ops.def; the CPU
// reference is runtime/cpu/ops_sage.c, whose roundings these reproduce bit for bit), for ONE
// segment of len rows at a time (runtime/cuda/cuda_sage.c launches them per segment). q, k, v
// are bf16 [len, H, 128] at their segment's first row with row stride H * 128 elements (v's
// may be longer: its rows read in place from the qkv projection through a v_view); the
// outputs live in the op's scratch in a padded layout: lp = len rounded up to 128 rows (the
// attention's query tile), rows past len hold zero codes. With sage-q-fusion the q codes come from the q norm + RoPE
// kernel instead (codegen/emit_norm_rope_sage.c, the same layout: include/h3/sage.h) and h3cu_sage_quant runs for k
// only: k's smoothing needs the mean of the whole segment's keys before any code.
//   h3cu_sage_colstats  grid (128 / 32, Hk), 256 threads: per kv head h and dim d, kbar[h][d] =
//     (sum of fp32(k[r][h][d]) over r ascending, one fp32 add after the other) / len when
//     smooth, else 0; vscale[h][d] = amax_r |v[r][h][d]| / 448 (1 when 0) when fp8. Chunks of
//     256 rows: every thread loads 16-byte pieces of the next chunk while lane d of warp 0 adds
//     the current chunk's rows in order from shared memory (the CPU's sum exactly); the amax
//     is order-free.
//   h3cu_sage_quant     grid (lp / 64, H), 256 threads: the 64-row block b of head h of x (q,
//     or k less kbar[h] when kbar is given): delta = amax / 127 (1 when 0) into deltas[h * lp
//     / 64 + b], codes = round-half-even(x / delta) clamped to [-127, 127] into codes[h][lp][128]
//     (int8). Thread i: row i / 4, dims 32 (i % 4) .. + 31.
//   h3cu_sage_quant_v   grid (lp / 64, Hk), 256 threads (pv = fp8): e4m3(v / vscale[h][d]) into
//     vt[h][128][lp], dim-major: the B operand of the P V product (k = key). Within each group of
//     32 keys, byte p holds key 8 (2 (p / 16) + (p % 4) / 2) + 2 ((p % 16) / 4) + p % 2: the
//     order in which a thread's P accumulators (keys 8 n + 2 c, + 1 of n-tiles n) fill the A
//     fragment of mma.m16n8k32, so that the fragments of P are packed in registers and those
//     of V are 4-byte words (ldmatrix).

// the byte of a group of 32 keys of vt that holds key k (0..31)
H3_DI int h3s_pos(int k) { return 16 * (k >> 4) + 4 * ((k & 7) >> 1) + 2 * ((k >> 3) & 1) + (k & 1); }

// Chunk c of 256 rows of the block's 32 dims (dims 32 blockIdx.x .. + 31 of kv head h) of x
// (rows `stride` elements apart) into this thread's 4 pieces: piece i is row 64 i + tid / 4,
// dims 8 (tid % 4) .. + 7 (16 bytes; zero past len)
H3_DI void h3s_colstats_load(const h3_bf16 *x, long long stride, long long len, int h, long long c,
                             uint4 piece[4]) {
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const long long r = 256 * c + 64 * i + (threadIdx.x >> 2);
    piece[i] = r < len ? *reinterpret_cast<const uint4 *>(x + r * stride + h * 128 + 32 * blockIdx.x +
                                                          8 * (threadIdx.x & 3))
                       : uint4{0u, 0u, 0u, 0u};
  }
}

// Every thread loads chunk c + 1 (16-byte pieces of k and v) while warp 0 adds chunk c's k rows
// in order from shared memory, so the loads stay in flight under the ordered sum; the amax of
// v is taken from the pieces (order-free), per dim, then across the threads of a dim
extern "C" __global__ void __launch_bounds__(256) h3cu_sage_colstats(
    const h3_bf16 *__restrict__ k, const h3_bf16 *__restrict__ v, long long v_stride, long long len, int hk,
    int smooth, int fp8, float *__restrict__ kbar, float *__restrict__ vscale) {
  __shared__ float chunk[256][33];
  __shared__ float part[8][32];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, h = blockIdx.y, d = blockIdx.x * 32 + lane;
  const long long nc = (len + 255) / 256;
  uint4 kp[4], vp[4];
  float sum = 0.0f, amax[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  const long long k_stride = (long long)hk * 128;
  if (smooth) h3s_colstats_load(k, k_stride, len, h, 0, kp);
  if (fp8) h3s_colstats_load(v, v_stride, len, h, 0, vp);
  for (long long c = 0; c < nc; c++) { // as often in every thread
    __syncthreads(); // warp 0 is done with chunk c - 1
#pragma unroll
    for (int i = 0; i < 4; i++) {
      float f[8];
      if (smooth) {
        h3_bf16x8_f32(kp[i], f);
#pragma unroll
        for (int e = 0; e < 8; e++) chunk[64 * i + (threadIdx.x >> 2)][8 * (threadIdx.x & 3) + e] = f[e];
      }
      if (fp8) {
        h3_bf16x8_f32(vp[i], f);
#pragma unroll
        for (int e = 0; e < 8; e++) amax[e] = fmaxf(amax[e], fabsf(f[e]));
      }
    }
    __syncthreads();
    if (c + 1 < nc) {
      if (smooth) h3s_colstats_load(k, k_stride, len, h, c + 1, kp);
      if (fp8) h3s_colstats_load(v, v_stride, len, h, c + 1, vp);
    }
    const int n = len - 256 * c < 256 ? (int)(len - 256 * c) : 256;
    if (w == 0 && smooth)
      for (int i = 0; i < n; i++) sum = __fadd_rn(sum, chunk[i][lane]);
  }
  // dim 8 (lane % 4) + e of this thread's pieces: the amax over the lanes of the same lane % 4,
  // then over the warps
#pragma unroll
  for (int e = 0; e < 8; e++)
#pragma unroll
    for (int o = 4; o < 32; o <<= 1) amax[e] = fmaxf(amax[e], __shfl_xor_sync(0xffffffffu, amax[e], o));
  if (lane < 4)
#pragma unroll
    for (int e = 0; e < 8; e++) part[w][8 * lane + e] = amax[e];
  __syncthreads();
  if (w != 0) return;
  float am = part[0][lane];
  for (int i = 1; i < 8; i++) am = fmaxf(am, part[i][lane]);
  kbar[h * 128 + d] = smooth && len > 0 ? __fdiv_rn(sum, (float)len) : 0.0f;
  vscale[h * 128 + d] = am > 0.0f ? __fdiv_rn(am, 448.0f) : 1.0f;
}

// the largest of every thread's a in the block of 256 (every thread calls it: barriers)
H3_DI float h3s_block_max(float a) {
  __shared__ float part[8];
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
  __syncthreads(); // an earlier call's readers are done
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = a;
  __syncthreads();
  for (int i = 0; i < 8; i++) a = fmaxf(a, part[i]);
  return a;
}

extern "C" __global__ void __launch_bounds__(256) h3cu_sage_quant(
    const h3_bf16 *__restrict__ x, long long stride, const float *__restrict__ kbar, long long len,
    long long lp, signed char *__restrict__ codes, float *__restrict__ deltas) {
  const int h = blockIdx.y, row = threadIdx.x >> 2, c0 = 32 * (threadIdx.x & 3);
  const long long r = (long long)blockIdx.x * 64 + row;
  const bool live = r < len;
  float f[32] = {0.0f}, amax = 0.0f;
#pragma unroll
  for (int q = 0; q < 4; q++) {
    if (live) h3_wbf8(x + r * stride + h * 128 + c0 + 8 * q, f + 8 * q);
#pragma unroll
    for (int e = 0; e < 8; e++) {
      float &y = f[8 * q + e];
      if (live && kbar) y = __fsub_rn(y, kbar[h * 128 + c0 + 8 * q + e]);
      amax = fmaxf(amax, fabsf(y));
    }
  }
  amax = h3s_block_max(amax);
  const float delta = h3_sage_delta(amax);
  if (threadIdx.x == 0) deltas[h * (lp / 64) + blockIdx.x] = delta;
  __align__(16) signed char out[32];
#pragma unroll
  for (int i = 0; i < 32; i++) out[i] = h3_sage_code(f[i], delta);
  uint4 *dst = reinterpret_cast<uint4 *>(codes + ((long long)h * lp + r) * 128 + c0);
  dst[0] = reinterpret_cast<const uint4 *>(out)[0];
  dst[1] = reinterpret_cast<const uint4 *>(out)[1];
}

extern "C" __global__ void __launch_bounds__(256) h3cu_sage_quant_v(
    const h3_bf16 *__restrict__ v, long long stride, const float *__restrict__ vscale,
    long long len, long long lp, unsigned char *__restrict__ vt) {
  __shared__ uint4 tile[128][4]; // [dim][64 bytes: the block's keys]
  const int h = blockIdx.y, key = threadIdx.x >> 2, c0 = 32 * (threadIdx.x & 3);
  const long long r = (long long)blockIdx.x * 64 + key;
  const int at = (key & ~31) + h3s_pos(key & 31);
  float f[32] = {0.0f};
#pragma unroll
  for (int q = 0; q < 4; q++) {
    if (r < len) h3_wbf8(v + r * stride + h * 128 + c0 + 8 * q, f + 8 * q);
#pragma unroll
    for (int e = 0; e < 8; e++) f[8 * q + e] = r < len ? __fdiv_rn(f[8 * q + e], vscale[h * 128 + c0 + 8 * q + e]) : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < 32; i += 2) {
    const unsigned two = h3_e4m3x2(f[i], f[i + 1]);
    reinterpret_cast<unsigned char *>(tile[c0 + i])[at] = (unsigned char)(two & 0xffu);
    reinterpret_cast<unsigned char *>(tile[c0 + i + 1])[at] = (unsigned char)(two >> 8);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 128 * 4; i += 256) { // 16 bytes: dim i / 4, keys 16 (i % 4) ..
    const int dim = i >> 2, part = i & 3;
    *reinterpret_cast<uint4 *>(vt + ((long long)h * 128 + dim) * lp + (long long)blockIdx.x * 64 + 16 * part) =
        tile[dim][part];
  }
}
