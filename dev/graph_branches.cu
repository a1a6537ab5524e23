// graph_branches.cu: how much of a batch-1 M3.1 sparse layer would independent ops running
// side by side (two streams captured into one CUDA graph) hide? (lab; not CI)
//   nvcc -std=c++17 -arch=sm_90a -O3 -I kernels -I include dev/graph_branches.cu -o graph_branches
//   ./graph_branches
// A stand-in for one sparse layer of the batch-1 decode step at a 2k context, from ncu's
// per-kernel figures (dev/m31-decode.md): weight streams as plain reads of the same bytes
// (qkv 113 MB, the indexer's q / k 6.3 / 1.6 MB, o_proj 100 MB, the routed experts' gate_up
// 302 MB and down 151 MB, the shared expert's 75 / 38 MB), the latency-bound kernels as
// blocks that wait as long as ncu timed them, with their grids (top-k 21 us on 129 blocks of
// 128, attention 24 us on 64 of 256, router 16 us on 24 of 256), the small ones (norms,
// norm + rope, cache writes, add, combine) as 3 us on one block. Each weight stream rotates
// over copies of >= 700 MB in all, so L2 holds none of it, as in a step.
// Two graphs of the same 4 layers: `serial`, every kernel after the other (today's step),
// and `branched`, with the dependences of the model only:
//   main:  norm, qkv, q norm+rope, k norm+rope, k write, v write | attention, o_proj, add,
//          norm, router, moe gate_up, moe down, combine | end add
//   side:  (after norm) indexer q, k, their norm+rope, ik write, top-k -> joins before the
//          attention; (after the norm before the router) shared gate_up, its act, shared
//          down -> joins before the end add.
// Prediction (dev/m31-decode.md): ~45 us less per layer (router under the shared gate_up,
// the indexer under qkv, part of top-k under the q / k norms and writes).
#include <vector>

#include "lab_cuda.cuh"

__global__ void read_words(const uint4 *w, long long n, unsigned *sink) {
  unsigned acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const uint4 v = __ldcs(w + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc; // never in practice; keeps the loads
}

__global__ void wait_cycles(long long cycles, unsigned *sink) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
  if (threadIdx.x == 4096) *sink = 1; // never
}

struct stream_buf {
  std::vector<uint4 *> copies;
  long long words = 0;
  int next = 0;
};

static stream_buf make_stream(double mb) {
  stream_buf b;
  const long long bytes = (long long)(mb * 1e6) / 16 * 16;
  b.words = bytes / 16;
  const int n = (int)((700ll << 20) / bytes + 2);
  for (int i = 0; i < n; i++) {
    uint4 *p;
    CK(cudaMalloc(&p, bytes));
    CK(cudaMemset(p, i, bytes));
    b.copies.push_back(p);
  }
  return b;
}

int main() {
  int sms = 0, khz = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  unsigned *sink;
  CK(cudaMalloc(&sink, 4));
  stream_buf qkv = make_stream(113.2), iq = make_stream(6.3), ik = make_stream(1.6), o = make_stream(100.7),
             gu = make_stream(302.0), dn = make_stream(151.0), sgu = make_stream(75.5), sdn = make_stream(37.7);
  cudaStream_t s0, s1;
  CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  std::vector<cudaEvent_t> evs(64);
  for (auto &e : evs) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  auto rd = [&](stream_buf &b, cudaStream_t s) {
    read_words<<<sms * 8, 256, 0, s>>>(b.copies[b.next], b.words, sink);
    b.next = (b.next + 1) % (int)b.copies.size();
  };
  auto wt = [&](double us, int blocks, int threads, cudaStream_t s) {
    wait_cycles<<<blocks, threads, 0, s>>>((long long)(us * khz / 1e3), sink);
  };
  auto small = [&](cudaStream_t s) { wt(3.0, 1, 128, s); };
  // one layer; side == s0: every kernel on s0 in the serial order
  auto layer = [&](cudaStream_t side, int &ev) {
    auto fork = [&]() {
      if (side == s0) return;
      CK(cudaEventRecord(evs[ev], s0));
      CK(cudaStreamWaitEvent(s1, evs[ev++], 0));
    };
    auto join = [&]() {
      if (side == s0) return;
      CK(cudaEventRecord(evs[ev], s1));
      CK(cudaStreamWaitEvent(s0, evs[ev++], 0));
    };
    small(s0); // input norm
    fork();
    rd(iq, side), rd(ik, side), small(side), small(side), small(side); // indexer q, k, norm+rope x2, ik write
    wt(21.0, 129, 128, side);                                           // index_topk
    rd(qkv, s0), small(s0), small(s0), small(s0), small(s0);            // qkv, q / k norm+rope, k / v write
    join();
    wt(24.0, 64, 256, s0); // sparse attention
    rd(o, s0), small(s0), small(s0); // o_proj, add, post-attention norm
    fork();
    rd(sgu, side), small(side), rd(sdn, side); // shared expert
    wt(16.0, 24, 256, s0);                     // router
    rd(gu, s0), rd(dn, s0), small(s0);         // moe gate_up, down, combine
    join();
    small(s0); // end add
  };
  for (int pass = 0; pass < 2; pass++) {
    const char *name = pass ? "branched" : "serial";
    cudaGraph_t g;
    cudaGraphExec_t ge;
    int ev = 0;
    CK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeGlobal));
    for (int l = 0; l < 4; l++) layer(pass ? s1 : s0, ev);
    CK(cudaStreamEndCapture(s0, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 5; i++) CK(cudaGraphLaunch(ge, s0));
    const int iters = 40;
    CK(cudaEventRecord(e0, s0));
    for (int i = 0; i < iters; i++) CK(cudaGraphLaunch(ge, s0));
    CK(cudaEventRecord(e1, s0));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    printf("%-9s 4 layers: %8.1f us per graph, %7.1f us per layer\n", name, 1e3 * ms / iters, 1e3 * ms / iters / 4);
    CK(cudaGraphExecDestroy(ge));
    CK(cudaGraphDestroy(g));
  }
  // the parts alone: what the branched graph can at best hide
  auto alone = [&](const char *what, auto f) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int i = 0; i < 3; i++) f();
    CK(cudaEventRecord(e0, s0));
    for (int i = 0; i < 20; i++) f();
    CK(cudaEventRecord(e1, s0));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    printf("  %-34s %7.1f us\n", what, 1e3 * ms / 20);
  };
  alone("qkv read (113 MB)", [&] { rd(qkv, s0); });
  alone("shared gate_up + down (113 MB)", [&] { rd(sgu, s0), rd(sdn, s0); });
  alone("router stand-in (16 us)", [&] { wt(16.0, 24, 256, s0); });
  alone("top-k stand-in (21 us)", [&] { wt(21.0, 129, 128, s0); });
  CK(cudaGetLastError());
  return 0;
}
