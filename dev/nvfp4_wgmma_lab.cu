// nvfp4_wgmma_lab.cu: NVFP4's warpgroup form (kernels/nvfp4_gemm.cu's _wg / _wg16: the weights
// dequantized into wgmma's A registers, x staged once a block in shared memory as its B) against
// wgc, the same form in clusters that share x's staging, with cuBLAS bf16 and the product's skinny
// / row-pair forms in the same run (lab; not CI)
//   nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -O3 -I kernels -I include -I dev
//     dev/nvfp4_wgmma_lab.cu -lcublas -o build-gpu/lab/nvfp4_wgmma_lab   (dev/lab_stages.sh)
//   build-gpu/lab/nvfp4_wgmma_lab            (~1 minute; no arguments)
// History (dev/nvfp4-gemm.md, session 40): the warpgroup form was written here first (as wgx, with
// GW code words a commit group, NB weight chunks in the register ring and R tiles of 64 rows a
// block; call 127 on an H100 timed GW 2 / 4, NB 3 / 4, R 1 / 2 and kept GW 2, NB 3, R 1, now the
// product's kernels). Its cost above one row is x's reads from L2: each block of 64 weight rows
// reads a chunk's x rows (at 16 rows about as many bytes as the weights).
// Rows: the product's _sk (1 row), _sx / _sx16 (8 / 16 rows), _wg / _wg16 and wgc<NX, C> (C = 2,
// 4), each checked against cuBLAS (rel < 1e-3) on a NaN-poisoned y; weights rotated over copies
// of >= 400 MB so the L2 holds none of what a launch reads.
// Predicted (H100; x's L2 reads at ~0.2 us per MB, divided by C; a cluster barrier a chunk ~free):
// 16 rows fc 47 -> ~41.5 (C 2) / ~38.5 (C 4) us, gate_up 55 -> ~47 / ~44; 8 rows fc 39 -> ~36.5
// / ~35, gate_up 44 -> ~42 / ~41. Refuted if wgc<16,4> is not >= 10 % faster than _wg16 at fc
// and gate_up (then the cluster barrier or the remote stores cost what the L2 reads saved).
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

#include "lab_nvfp4.cuh" // weight copies (lab_nv_dq)

static constexpr size_t wgx_smem(int NX) { return 1024 + 3 * (size_t)NX * 512; }

// wgc<NX, C>: the product's h3n_wg<NX, 3, 2> in clusters of C blocks on adjacent column groups (the same
// split, so the same chunks), sharing x: thread tid of block rank r takes tasks q = tid / C
// + j 128 / C (j < NX / 8) of the block's share (global task T = r 16 NX / C + q: row T / 16,
// quad xt = T / 4 % 4, 32-byte piece wq = T % 4, its groups i = 2 wq, 2 wq + 1), loads the
// piece (the C lanes of a task load the same 32 bytes in one request) and stores its 8 pairs
// into the buffer of cluster block tid % C (st.shared::cluster at mapa's address), so each x
// byte is read from L2 once a cluster instead of once a block. One cluster barrier a chunk in
// place of the block barrier (buffer i % 3 of every block was last read by chunk i - 3's
// wgmmas, retired before that block arrived at chunk i - 1's barrier), one before the first
// remote store. Columns past N (the grid's padding to a multiple of C) read row N - 1.
__device__ __forceinline__ void wgc_st_remote(unsigned local, unsigned rank, unsigned v) {
  asm volatile("{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, %0, %1;\nst.shared::cluster.u32 [ra], %2;\n}\n"
               ::"r"(local), "r"(rank), "r"(v) : "memory");
}

template <int NX, int C>
__global__ void __launch_bounds__(128, 3)
    wgc(const h3_bf16 *__restrict__ x, const unsigned char *__restrict__ packed, const unsigned char *__restrict__ scale,
        const float *__restrict__ gp, float *__restrict__ y, float *__restrict__ part, unsigned *__restrict__ cnt,
        long long M, long long N, long long K) {
  constexpr int NB = 3, GW = 2, TX = NX / 8, SH = 128 / C; // threads a destination
  extern __shared__ unsigned char wgx_dyn[];
  unsigned char *xs = reinterpret_cast<unsigned char *>(((unsigned long long)wgx_dyn + 1023) & ~1023ull);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const unsigned rank = h3_cluster_rank();
  const long long n0 = (long long)blockIdx.x * 64;
  const int nch = (int)(K / H3N_KC), cps = (nch + (int)gridDim.y - 1) / (int)gridDim.y;
  const int c0 = (int)blockIdx.y * cps, nc = c0 + cps < nch ? cps : nch - c0;
  const unsigned char *p[2], *q[2];
  h3n_lane_rows(packed, scale, n0 + 16 * warp, N, K, g, t, p, q);
  const unsigned dest = threadIdx.x % C, xs0 = h3_smem_addr(xs);
  uint4 xr[TX][2];
  auto task = [&](int j, int &n, int &xt, int &wq) {
    const int T = (int)rank * (16 * NX / C) + (int)threadIdx.x / C + j * SH;
    n = T / 16, xt = T / 4 % 4, wq = T % 4;
  };
  auto load_x = [&](long long c) {
#pragma unroll
    for (int j = 0; j < TX; j++) {
      int n, xt, wq;
      task(j, n, xt, wq);
      const uint4 *src = reinterpret_cast<const uint4 *>(x + (long long)n * K + c * H3N_KC + 64 * xt + 16 * wq);
      xr[j][0] = n < M ? __ldg(src) : uint4{0u, 0u, 0u, 0u};
      xr[j][1] = n < M ? __ldg(src + 1) : uint4{0u, 0u, 0u, 0u};
    }
  };
  auto store_x = [&](int b) {
    const unsigned base = xs0 + (unsigned)b * NX * 512;
#pragma unroll
    for (int j = 0; j < TX; j++) {
      int n, xt, wq;
      task(j, n, xt, wq);
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const int i = 2 * wq + e, ch = 4 * (i & 1);
        const unsigned row = base + (unsigned)((i >> 1) * NX * 128 + n * 128 + 4 * xt);
        const uint4 v = xr[j][e];
        wgc_st_remote(row + (unsigned)(((ch + 0) ^ (n & 7)) << 4), dest, h3n_prmt(v.x, v.z, 0x5410u));
        wgc_st_remote(row + (unsigned)(((ch + 1) ^ (n & 7)) << 4), dest, h3n_prmt(v.x, v.z, 0x7632u));
        wgc_st_remote(row + (unsigned)(((ch + 2) ^ (n & 7)) << 4), dest, h3n_prmt(v.y, v.w, 0x5410u));
        wgc_st_remote(row + (unsigned)(((ch + 3) ^ (n & 7)) << 4), dest, h3n_prmt(v.y, v.w, 0x7632u));
      }
    }
    asm volatile("fence.proxy.async.shared::cluster;\n" ::: "memory");
  };
  float acc[NX / 2];
#pragma unroll
  for (int e = 0; e < NX / 2; e++) acc[e] = 0.0f;
  h3n_w w[NB][2];
#pragma unroll
  for (int d = 0; d < NB - 1; d++) h3n_skinny_w(w[d], p, q, d < nc ? c0 + d : nch, nch, K);
  load_x(c0);
  h3_cluster_sync(); // every block of the cluster running before the first remote store
  store_x(0);
  if (nc > 1) load_x(c0 + 1);
  h3_cluster_sync();
  for (int i0 = 0; i0 < nc; i0 += NB)
#pragma unroll
    for (int k = 0; k < NB; k++) {
      const int i = i0 + k;
      if (i >= nc) break;
      h3n_skinny_w(w[(k + NB - 1) % NB], p, q, i + NB - 1 < nc ? c0 + i + NB - 1 : nch, nch, K);
      h3n_wg_chunk<NX, GW>(acc, w[k % NB], h3_wg_desc(xs0 + (unsigned)(i % 3) * NX * 512, 16, 1024));
      if (i + 1 < nc) store_x((i + 1) % 3);
      if (i + 2 < nc) load_x(c0 + i + 2);
      h3_cluster_sync();
    }
  h3n_wg_store<NX>(acc, gp, y, part, cnt, M, N, n0);
}

typedef __nv_bfloat16 bf16;
typedef void (*wgx_fn)(const h3_bf16 *, const unsigned char *, const unsigned char *, const float *, float *, float *,
                       unsigned *, long long, long long, long long);
struct wgx_kind {
  const char *tag;
  wgx_fn kern;
  int NX, R, occ;
  size_t smem;
  int C; // blocks a cluster (wgc), 1 for wgx
};

// the K split of the wgx grid: the fewest waves of `slots` blocks times chunks a split (ties: fewer
// splits); every split non-empty
static long long wgx_splits(long long cols, long long nch, long long slots) {
  long long best = 1, cost = -1;
  for (long long S = 1; S <= 16 && S <= nch; S++) {
    const long long cps = (nch + S - 1) / S;
    if ((S - 1) * cps >= nch) continue;
    const long long c = (cols * S + slots - 1) / slots * cps;
    if (cost < 0 || c < cost) cost = c, best = S;
  }
  return best;
}
// the product's row-pair split (runtime/cuda/cuda_nvfp4.c's cu_nvfp4_rows_splits, mirrored)
static long long rows_splits(long long N, long long K) {
  const long long nch = K / H3N_KC, cols = (N + 31) / 32;
  long long best = 1, cost = -1;
  for (long long S = 1; S <= 16 && S <= (nch + 3) / 4; S++) {
    const long long c = (cols * S + 395) / 396 * ((nch + 4 * S - 1) / (4 * S));
    if (cost < 0 || c < cost) cost = c, best = S;
  }
  return best;
}


int main() {
  const shape shapes[] = {{"fc", 6144, 18432}, {"o_proj", 6144, 8192}, {"gate_up", 24576, 6144}, {"down", 6144, 12288}};
  const long long rows[] = {1, 8, 16};
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  wgx_kind kinds[] = {{"product _wg", lab_nv_wg, 8, 1, 0, wgx_smem(8), 1},
                      {"product _wg16", lab_nv_wg16, 16, 1, 0, wgx_smem(16), 1},
                      {"wgc<8,2>", wgc<8, 2>, 8, 1, 0, wgx_smem(8), 2},
                      {"wgc<8,4>", wgc<8, 4>, 8, 1, 0, wgx_smem(8), 4},
                      {"wgc<16,2>", wgc<16, 2>, 16, 1, 0, wgx_smem(16), 2},
                      {"wgc<16,4>", wgc<16, 4>, 16, 1, 0, wgx_smem(16), 4}};
  printf("device: %d SMs; blocks an SM:", sms);
  for (wgx_kind &k : kinds) {
    CK(cudaFuncSetAttribute(k.kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)k.smem));
    if (k.C > 1) CK(cudaFuncSetAttribute(k.kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&k.occ, k.kern, 128, k.smem));
    printf(" %s %d", k.tag, k.occ);
  }
  printf("\n");
  cublasHandle_t h;
  CB(cublasCreate(&h));
  float *gp;
  unsigned *sink;
  const float one = 1.0f, zero = 0.0f;
  CK(cudaMalloc(&gp, 4));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemcpy(gp, &one, 4, cudaMemcpyHostToDevice));
  int failed = 0;
  for (const shape &sh : shapes) {
    const long long N = sh.N, K = sh.K, np = N * K / 2, ns = N * K / 16, nch = K / H3N_KC;
    const double qbytes = (double)(np + ns), bbytes = (double)(N * K) * 2;
    int bcopies;
    std::vector<bufs> w = weight_copies(N, K, &bcopies);
    const int copies = (int)w.size();
    const int it = iters_of(qbytes), bit = iters_of(bbytes);
    const double floor_us = 1e3 * mean_ms([&](int i) {
      read_words<<<sms * 8, 256>>>(reinterpret_cast<const uint4 *>(w[i % copies].pk), np / 16, sink);
    }, it / 8 + 1, it);
    printf("\n%s: N %lld K %lld, %.1f MB packed; plain read of the codes %.2f us\n", sh.name, N, K, qbytes / 1e6, floor_us);
    for (long long M : rows) {
      bf16 *x;
      float *y, *yref, *part;
      unsigned *cnt;
      CK(cudaMalloc(&x, M * K * 2));
      fill_bf16<<<256, 256>>>(x, M * K, 99u);
      CK(cudaMalloc(&y, M * N * 4));
      CK(cudaMalloc(&yref, M * N * 4));
      CK(cudaMalloc(&part, 16 * M * N * 4));
      CK(cudaMalloc(&cnt, (N / 32 + 1) * 4));
      CK(cudaMemset(cnt, 0, (N / 32 + 1) * 4));
      auto gemm = [&](int i, float *out) { // y^T [N, M] = W x^T: y [M, N] row-major
        CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, w[i % bcopies].wb, CUDA_R_16BF,
                        (int)K, x, CUDA_R_16BF, (int)K, &zero, out, CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
      };
      const double cublas_us = 1e3 * mean_ms([&](int i) { gemm(i, yref); }, bit / 8 + 1, bit);
      gemm(0, yref);
      std::vector<float> ref((size_t)(M * N)), got((size_t)(M * N));
      CK(cudaMemcpy(ref.data(), yref, M * N * 4, cudaMemcpyDeviceToHost));
      printf("  M %lld: cublas bf16 %8.2f us\n", M, cublas_us);
      auto measure = [&](const char *tag, auto launch) {
        const double us = 1e3 * mean_ms([&](int i) { launch(w[i % copies]); }, it / 8 + 1, it);
        CK(cudaMemset(y, 0xff, M * N * 4));
        launch(w[0]);
        CK(cudaMemcpy(got.data(), y, M * N * 4, cudaMemcpyDeviceToHost));
        const double rel = rel_diff(got, ref);
        failed += rel >= 1e-3;
        printf("    %-22s %8.2f us  %5.2f x cublas  %5.3f x plain  rel %.1e%s\n", tag, us, cublas_us / us, floor_us / us,
               rel, rel < 1e-3 ? "" : "  FAIL");
        if (rel >= 1e-3) { // where: the first mismatches (m, n) and their values, to tell a layout slip
          int shown = 0;
          for (long long e = 0; e < M * N && shown < 6; e++)
            if (!(std::fabs(got[e] - ref[e]) <= 1e-3 * std::fabs(ref[e]) + 1e-4))
              printf("      y[%lld, %lld] %.6g, cuBLAS %.6g\n", e / N, e % N, got[e], ref[e]), shown++;
        }
      };
      if (M <= 4) {
        measure("product _sk", [&](const bufs &b) {
          lab_nv_sk<<<(unsigned)((N + 15) / 16), 128>>>(x, b.pk, b.sc, gp, y, M, N, K);
        });
      } else {
        const long long S = rows_splits(N, K);
        char tag[32];
        snprintf(tag, sizeof tag, "product %s S%lld", M <= 8 ? "_sx" : "_sx16", S);
        measure(tag, [&](const bufs &b) {
          const dim3 grid((unsigned)((N + 31) / 32), (unsigned)S);
          if (M <= 8) lab_nv_sx<<<grid, 128>>>(x, b.pk, b.sc, gp, y, part, cnt, M, N, K);
          else lab_nv_sx16<<<grid, 128>>>(x, b.pk, b.sc, gp, y, part, cnt, M, N, K);
        });
      }
      for (const wgx_kind &k : kinds) {
        if (M > k.NX || (M <= 8 && k.NX == 16)) continue;
        const long long cols = ((N + 64 * k.R - 1) / (64 * k.R) + k.C - 1) / k.C * k.C; // whole clusters
        const long long S = wgx_splits(cols, nch, (long long)k.occ * sms);
        char tag[40];
        snprintf(tag, sizeof tag, "%s S%lld", k.tag, S);
        measure(tag, [&](const bufs &b) {
          cudaLaunchConfig_t cfg = {};
          cfg.gridDim = dim3((unsigned)cols, (unsigned)S);
          cfg.blockDim = dim3(128);
          cfg.dynamicSmemBytes = k.smem;
          cudaLaunchAttribute at[1];
          at[0].id = cudaLaunchAttributeClusterDimension;
          at[0].val.clusterDim.x = (unsigned)k.C, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
          cfg.attrs = at, cfg.numAttrs = 1;
          CK(cudaLaunchKernelEx(&cfg, k.kern, x, b.pk, b.sc, (const float *)gp, y, part, cnt, M, N, K));
        });
      }
      CK(cudaFree(x));
      CK(cudaFree(y));
      CK(cudaFree(yref));
      CK(cudaFree(part));
      CK(cudaFree(cnt));
    }
    free_copies(w);
  }
  CB(cublasDestroy(h));
  printf("\n%s\n", failed ? "SOME ROWS FAILED" : "every row within 1e-3 of cuBLAS");
  return failed != 0;
}
