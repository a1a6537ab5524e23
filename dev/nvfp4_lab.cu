// nvfp4_lab.cu: the NVFP4 skinny form (kernels/nvfp4_gemm.cu's _sk, 1-8 rows) against variants
// of its loop built from its own helpers (lab; not CI)
//   nvcc -std=c++17 -arch=sm_90a -O3 -I kernels -I include -I dev dev/nvfp4_lab.cu -lcublas -o nvfp4_lab
//   ./nvfp4_lab
// The product's loop (since 2026-12-06): per lane the weights two turns ahead in a ring of 3,
// x one turn ahead in a ring of 2, unrolled by 6, one accumulator chain (3 blocks an SM). It
// was this lab's skv<1,1>, measured on an H100 3-15 % faster at M = 1 than x loaded in its own
// turn (dev/nvfp4-gemm.md, 2026-12-06; raw log
// dev/results/2026-12-06-h100-s25-sage-128key-ab-nvfp4-lab.txt). Variants, the same loop with
// one thing changed:
//   skv<1, false>: x loaded in the turn that uses it (the product's scheme before 2026-12-06:
//   4 blocks an SM), the same sums;
//   skv<2, true>: two accumulator chains (each word's k-step 1 on its own, added at the end:
//   another fp32 sum order; measured <= 1 % faster at M = 1);
//   skv16<NA>: x loaded in its turn, over two n-tiles of x (9-16 rows; its registers leave no
//   room for x ahead), where the product runs its tiled kernels (timed beside it: `tiled _m1`,
//   the product's launch shape, mirrored; on the H100 the faster of the two but at o_proj).
// Against: the product (its _sk launched as cuda_nvfp4.c launches it), a plain read of the same
// packed bytes (the floor) and cuBLAS's bf16 GEMM over the dequantized weight (the product's
// _dq kernel, exact). Every case rotates over weight copies of >= 400 MB (the L2 holds none of
// what a launch reads, as inside a model); times are means of ~40-80 launches after warm-ups.
// Checks: each result against cuBLAS's (max |diff| / max |y| < 1e-3: fp32 sum orders differ;
// "FAIL" past it), skv<1, false> bitwise against the product (the same sums); y set to NaN
// before each checked launch. The plain read covers the codes, not the scales (1/8 more
// bytes): "x plain" is ~11 % optimistic.
#include <cublas_v2.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "lab_cublas.cuh"
#include "lab_cuda.cuh"
#include "lab_skinny.cuh" // read_words (and the prelude)

#undef O_T
#define H3_NVFP4_NAME lab_nv
#define O_T float
#include "nvfp4_gemm.cu"

typedef __nv_bfloat16 bf16;

// y[M, N] f32 = the skinny form's contract (x [M, K] bf16, M <= 8 NT; codes and scales of W
// [N, K]; K a multiple of 256): grid ceil(N / 16), 128 threads. NA accumulator chains; XPF: x
// one turn ahead (a ring of 2; else loaded in its turn); NT n-tiles of x's rows (lane row 8 j +
// g of tile j). skv<1, true> is the product's loop.
template <int NA, bool XPF, int NT = 1>
__global__ void __launch_bounds__(32 * H3NS_WARPS, XPF || NT > 1 ? 3 : 4)
    skv(const h3_bf16 *__restrict__ x, const unsigned char *__restrict__ packed, const unsigned char *__restrict__ scale,
        const float *__restrict__ gp, float *__restrict__ y, long long M, long long N, long long K) {
  static_assert(NT == 1 || !XPF, "x one turn ahead for one n-tile only");
  __shared__ float red[H3NS_WARPS][16][8 * NT];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const long long n0 = (long long)blockIdx.x * 16, nch = K / H3N_KC;
  const unsigned char *p[2], *q[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const long long n = n0 + g + 8 * h < N ? n0 + g + 8 * h : N - 1;
    p[h] = packed + n * (K / 2) + 32 * t;
    q[h] = scale + n * (K / 16) + 4 * t;
  }
  const h3_bf16 *xr[NT]; // the lane's x rows (NULL: past M)
#pragma unroll
  for (int j = 0; j < NT; j++) xr[j] = 8 * j + g < M ? x + (long long)(8 * j + g) * K + 64 * t : nullptr;
  float acc[NA][NT][4];
#pragma unroll
  for (int a = 0; a < NA; a++)
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
      for (int e = 0; e < 4; e++) acc[a][j][e] = 0.0f;
  auto loadx = [&](uint4(&xv)[NT][8], long long c) {
#pragma unroll
    for (int j = 0; j < NT; j++) h3n_x_words(xv[j], xr[j], c, nch);
  };
  constexpr int XB = XPF ? 2 : 1;
  h3n_w w[3][2];
  uint4 xb[XB][NT][8];
  h3n_skinny_w(w[0], p, q, warp, nch, K);
  h3n_skinny_w(w[1], p, q, warp + H3NS_WARPS, nch, K);
  if (XPF) loadx(xb[0], warp);
  const long long turns = (nch + H3NS_WARPS - 1) / H3NS_WARPS;
  auto turn = [&](long long it, const h3n_w(&cur)[2], h3n_w(&far)[2], uint4(&xc)[NT][8], uint4(&xn)[NT][8]) {
    const long long c = warp + it * H3NS_WARPS;
    h3n_skinny_w(far, p, q, c + 2 * H3NS_WARPS, nch, K);
    if (XPF) loadx(xn, c + H3NS_WARPS);
    else loadx(xc, c);
    h3n_skinny_turn<NT>(acc[0], acc[NA - 1], cur, xc);
  };
  for (long long it = 0; it < turns; it += 6)
#pragma unroll
    for (int u = 0; u < 6; u++)
      if (it + u < turns) turn(it + u, w[u % 3], w[(u + 2) % 3], xb[u % XB], xb[(u + 1) % XB]);
#pragma unroll
  for (int j = 0; j < NT; j++)
#pragma unroll
    for (int e = 0; e < 4; e++)
      red[warp][g + 8 * (e >> 1)][8 * j + 2 * t + (e & 1)] =
          NA == 2 ? __fadd_rn(acc[0][j][e], acc[NA - 1][j][e]) : acc[0][j][e];
  __syncthreads();
  const float gs = __fmul_rn(*gp, 128.0f);
  for (int i = threadIdx.x; i < 16 * 8 * NT; i += 32 * H3NS_WARPS) {
    const int r = i / (8 * NT), m = i % (8 * NT);
    if (m >= M || n0 + r >= N) continue;
    float sum = red[0][r][m];
#pragma unroll
    for (int v = 1; v < H3NS_WARPS; v++) sum = __fadd_rn(sum, red[v][r][m]);
    y[(long long)m * N + n0 + r] = __fmul_rn(sum, gs);
  }
}

// The tiled kernels' launch for M <= 16 (the _m1 kernel): runtime/cuda/cuda_nvfp4.c's
// cu_nvfp4_shape_of, mirrored here (the lab links no runtime): one block per 128 columns, the K
// splits that minimise waves of 264 blocks times chunks per split plus the partials' traffic.
struct tiled_shape {
  long long cols, splits;
  int cps;
};
static tiled_shape tiled_of(long long M, long long N, long long K) {
  const long long nch = K / H3N_KC;
  tiled_shape sh{(N + H3N_COLS - 1) / H3N_COLS, 1, (int)nch};
  double best = -1;
  for (long long S = 1; S <= 16 && S <= nch; S++) {
    const long long c = (nch + S - 1) / S, used = (nch + c - 1) / c, waves = (sh.cols * used + 263) / 264;
    const double t = (double)(waves * c) * (H3N_COLS * H3N_KC * 0.5625) + (used > 1 ? 8.0 * used * M * N / 264 : 0);
    if (best < 0 || t < best) best = t, sh.splits = used, sh.cps = (int)c;
  }
  return sh;
}

// random codes (every byte) and scales (e4m3 magnitudes 0x30-0x4f: 0.5-7.5, both signs)
__global__ void fill_nvfp4(unsigned char *pk, long long np, unsigned char *sc, long long ns, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < np; i += (long long)gridDim.x * blockDim.x) {
    unsigned h = (unsigned)i * 2654435761u ^ seed;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    pk[i] = (unsigned char)h;
    if (i < ns) sc[i] = (unsigned char)(0x30 + (h >> 8) % 0x20) | (unsigned char)(h >> 16 & 0x80);
  }
}

struct shape {
  const char *name;
  long long N, K;
};

struct bufs { // one weight copy: codes, scales, and the dequantized bf16 weight
  unsigned char *pk, *sc;
  bf16 *wb;
};

static int iters_of(double bytes) { return (int)std::fmin(80.0, std::fmax(40.0, 4e9 / bytes)); }

int main() {
  const shape shapes[] = {{"fc", 6144, 18432}, {"o_proj", 6144, 8192}, {"gate_up", 24576, 6144}, {"down", 6144, 12288}};
  const long long rows[] = {1, 8, 16};
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int occ[4];
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ[0], lab_nv_sk, 128, 0));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ[1], skv<1, false>, 128, 0));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ[2], skv<2, true>, 128, 0));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ[3], skv<1, false, 2>, 128, 0));
  printf("device: %d SMs; blocks an SM: product %d, skv<1,0> %d, <2,1> %d, skv16 %d\n", sms, occ[0], occ[1], occ[2],
         occ[3]);
  cublasHandle_t h;
  CB(cublasCreate(&h));
  unsigned *sink;
  float *gp;
  const float one = 1.0f, zero = 0.0f;
  CK(cudaMalloc(&sink, 4));
  CK(cudaMalloc(&gp, 4));
  CK(cudaMemcpy(gp, &one, 4, cudaMemcpyHostToDevice));
  for (const shape &sh : shapes) {
    const long long N = sh.N, K = sh.K, np = N * K / 2, ns = N * K / 16;
    const double qbytes = (double)(np + ns), bbytes = (double)(N * K) * 2;
    const int copies = (int)((400ll << 20) / (long long)qbytes + 2), bcopies = (int)((400ll << 20) / (long long)bbytes + 2);
    std::vector<bufs> w(copies);
    for (int c = 0; c < copies; c++) {
      CK(cudaMalloc(&w[c].pk, np));
      CK(cudaMalloc(&w[c].sc, ns));
      fill_nvfp4<<<1024, 256>>>(w[c].pk, np, w[c].sc, ns, 31u * c + 7u);
      w[c].wb = nullptr;
      if (c < bcopies) {
        CK(cudaMalloc(&w[c].wb, N * K * 2));
        lab_nv_dq<<<(unsigned)((N * (K / 8) + 255) / 256), 256>>>(w[c].pk, w[c].sc, w[c].wb, N, K);
      }
    }
    CK(cudaDeviceSynchronize());
    const int it = iters_of(qbytes), bit = iters_of(bbytes);
    const double floor_us = 1e3 * mean_ms([&](int i) {
      read_words<<<sms * 8, 256>>>(reinterpret_cast<const uint4 *>(w[i % copies].pk), np / 16, sink);
    }, it / 8 + 1, it);
    printf("\n%s: N %lld K %lld, %.1f MB packed (%.1f MB bf16); plain read of the codes %.2f us (%.2f TB/s)\n", sh.name,
           N, K, qbytes / 1e6, bbytes / 1e6, floor_us, (double)np / floor_us / 1e6);
    for (long long M : rows) {
      bf16 *x;
      float *y, *yref;
      CK(cudaMalloc(&x, M * K * 2));
      fill_bf16<<<256, 256>>>(x, M * K, 99u);
      CK(cudaMalloc(&y, M * N * 4));
      CK(cudaMalloc(&yref, M * N * 4));
      auto gemm = [&](int i, float *out) { // y^T [N, M] = W x^T: y [M, N] row-major
        CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, w[i % bcopies].wb, CUDA_R_16BF,
                        (int)K, x, CUDA_R_16BF, (int)K, &zero, out, CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
      };
      const double cublas_us = 1e3 * mean_ms([&](int i) { gemm(i, yref); }, bit / 8 + 1, bit);
      gemm(0, yref);
      std::vector<float> ref((size_t)(M * N)), got((size_t)(M * N)), prod((size_t)(M * N));
      CK(cudaMemcpy(ref.data(), yref, M * N * 4, cudaMemcpyDeviceToHost));
      printf("  M %lld: cublas bf16 %8.2f us\n", M, cublas_us);
      const unsigned grid = (unsigned)((N + 15) / 16);
      auto report = [&](const char *tag, double us, bool check_prod) {
        CK(cudaMemcpy(got.data(), y, M * N * 4, cudaMemcpyDeviceToHost));
        const bool same = !check_prod || !memcmp(got.data(), prod.data(), got.size() * 4);
        const double rel = rel_diff(got, ref);
        printf("    %-12s %8.2f us  %5.2f x cublas  %5.3f x plain  rel %.1e%s%s\n", tag, us, cublas_us / us, floor_us / us,
               rel, rel < 1e-3 ? "" : "  FAIL", same ? "" : "  NOT BITWISE THE PRODUCT'S");
      };
      // a kernel's launch over the rotated copies, timed; then once on copy 0 into a poisoned y, checked
      auto measure = [&](const char *tag, auto launch, bool bitwise) {
        const double us = 1e3 * mean_ms([&](int i) { launch(w[i % copies]); }, it / 8 + 1, it);
        CK(cudaMemset(y, 0xff, M * N * 4));
        launch(w[0]);
        report(tag, us, bitwise);
      };
      auto variant = [&](const char *tag, auto kern, bool bitwise) {
        measure(tag, [&](const bufs &b) { kern<<<grid, 128>>>(x, b.pk, b.sc, gp, y, M, N, K); }, bitwise);
      };
      { // the product's tiled kernel (its form at 9-16 rows; H3_NVFP4_FORM=tiled below)
        const tiled_shape ts = tiled_of(M, N, K);
        float *part = nullptr;
        unsigned *cnt = nullptr;
        if (ts.splits > 1) {
          CK(cudaMalloc(&part, ts.splits * M * N * 4));
          CK(cudaMalloc(&cnt, ts.cols * 4));
          CK(cudaMemset(cnt, 0, ts.cols * 4));
        }
        const dim3 tg((unsigned)ts.cols, (unsigned)ts.splits, 1);
        const size_t smem = (size_t)3 * M * H3N_RS * 16;
        measure("tiled _m1", [&](const bufs &b) {
          lab_nv_m1<<<tg, H3N_THREADS, smem>>>(x, b.pk, b.sc, gp, y, part, cnt, M, N, K, ts.cps, 1);
        }, false);
        if (part) CK(cudaFree(part));
        if (cnt) CK(cudaFree(cnt));
      }
      if (M <= 8) { // the product's skinny form and its variants
        variant("product _sk", lab_nv_sk, false);
        prod = got; // the product's result, for the variants' bitwise checks
        variant("skv<1,0>", skv<1, false>, true);
        variant("skv<2,1>", skv<2, true>, false);
      } else { // 9-16 rows: the skinny form of two n-tiles (the product runs its tiled kernels there)
        variant("skv16<1>", skv<1, false, 2>, false);
        variant("skv16<2>", skv<2, false, 2>, false);
      }
      CK(cudaFree(x));
      CK(cudaFree(y));
      CK(cudaFree(yref));
    }
    for (bufs &b : w) {
      CK(cudaFree(b.pk));
      CK(cudaFree(b.sc));
      if (b.wb) CK(cudaFree(b.wb));
    }
  }
  CB(cublasDestroy(h));
  return 0;
}
