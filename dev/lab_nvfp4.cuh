// lab_nvfp4.cuh: what the NVFP4 GEMM labs (dev/nvfp4_lab.cu, dev/nvfp4_wgmma_lab.cu) share (lab;
// not CI): the draft's weight shapes, random NVFP4 weights in rotated copies of >= 400 MB (so the
// L2 holds none of what a launch reads) with the bf16 dequantization of the first ones for cuBLAS
// (the product's lab_nv_dq: include after kernels/nvfp4_gemm.cu with H3_NVFP4_NAME lab_nv), and
// the timed launches' count. Needs lab_cuda.cuh (CK).
#pragma once
#include <cmath>
#include <vector>

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

struct bufs { // one weight copy: codes, scales, and the dequantized bf16 weight (the first bcopies)
  unsigned char *pk, *sc;
  __nv_bfloat16 *wb;
};

// copies of a random weight [N, K]: enough of the packed form (and bcopies of its bf16 form) to
// pass 400 MB each; synchronised
static std::vector<bufs> weight_copies(long long N, long long K, int *bcopies) {
  const long long np = N * K / 2, ns = N * K / 16;
  const int copies = (int)((400ll << 20) / (np + ns) + 2);
  *bcopies = (int)((400ll << 20) / (N * K * 2) + 2);
  std::vector<bufs> w(copies);
  for (int c = 0; c < copies; c++) {
    CK(cudaMalloc(&w[c].pk, np));
    CK(cudaMalloc(&w[c].sc, ns));
    fill_nvfp4<<<1024, 256>>>(w[c].pk, np, w[c].sc, ns, 31u * c + 7u);
    w[c].wb = nullptr;
    if (c < *bcopies) {
      CK(cudaMalloc(&w[c].wb, N * K * 2));
      lab_nv_dq<<<(unsigned)((N * (K / 8) + 255) / 256), 256>>>(w[c].pk, w[c].sc, w[c].wb, N, K);
    }
  }
  CK(cudaDeviceSynchronize());
  return w;
}

static void free_copies(std::vector<bufs> &w) {
  for (bufs &b : w) {
    CK(cudaFree(b.pk));
    CK(cudaFree(b.sc));
    if (b.wb) CK(cudaFree(b.wb));
  }
  w.clear();
}

// timed launches of a case reading `bytes`: 40-80
static int iters_of(double bytes) { return (int)std::fmin(80.0, std::fmax(40.0, 4e9 / bytes)); }
