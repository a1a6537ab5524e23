// phase_remap.cu: can today's kernel files become the phases of one persistent kernel without a
// second copy of their code? (lab; not CI; dev/persistent-decode.md, step 2)
//   nvcc -std=c++17 -arch=sm_90a -O3 -I include -I kernels -I dev dev/phase_remap.cu -o build-gpu/lab/phase_remap
//   build-gpu/lab/phase_remap
// Method: the kernel file is included a second time with its built-ins remapped: blockIdx,
// gridDim and blockDim become a block's shared variables (the virtual block it works on),
// __global__ becomes __device__, __launch_bounds__ vanishes and __syncthreads() becomes a named
// barrier over the phase's threads alone (bar.sync 1, blockDim.x), so that a phase of fewer
// threads than the persistent block (the threads past blockDim.x skip it) cannot deadlock. The
// prelude comes after the remap too (h3_last_block's barriers). The persistent kernel walks
// the virtual blocks of the phase grid-stride and calls the remapped kernel for each.
// Here: the decode attention's tensor-core form (kernels/m31_msa.cu, H3_KV_ATT_MMA_NAME,
// sparse kind, 16 splits, the last split's block combining; clus = 0: no cluster), at M3.1
// small's decode shape (Hq 64, Hk 4, D 128, a 2k context, 16 selected blocks of 128), with 8
// warps (the product's at batch 1) and with 4 (fewer threads than the block: the named barrier
// over a subset), run (1) as its own launch of the remapped code (grid (16, 4), 256 threads)
// and (2) as the phase of a persistent kernel of one 256-thread block an SM, each block taking
// virtual blocks blockIdx.x, + gridDim.x, ...
// (3) as (2), but from a recorded launch: the argument array packed at the runtime's parameter
// offsets (cudaFuncGetParamInfo), and a trampoline that calls the remapped kernel with each
// parameter read at the offset its type has by the launch ABI (dev/persistent-decode.md).
// Checks: (2)'s and (3)'s outputs bitwise equal to (1)'s (the same code, the same sums), (3)'s
// offsets equal to the runtime's; NaN / Inf fail.
// Times: each form's mean over 200 launches after 20 (a launch's duration, the other's ramp).
// Prediction (H100): bitwise equal, the offsets the runtime's; (2) within ~1 µs of (1) (the same
// work, its blocks already resident); (3) ~1-2 µs over (2): ptxas gives it 255 registers and 8
// bytes of stack against (2)'s 238, the arguments read from memory instead of the constant bank.
#include <cstring>
#include <vector>

#include "lab_cuda.cuh"
#include "lab_remap_on.cuh"

#include "prelude.cuh"

#define Q_T h3_bf16
#define K_T h3_bf16
#define IX_T int
#define O_T h3_bf16
#define H3M_DC 4
#define H3M_HPW 4
#define H3_KV_ATT_MMA_NAME att_phase
#include "m31_msa.cu"

#include "lab_remap_off.cuh"

struct att_args {
  const h3_bf16 *q, *kc, *vc;
  const int *pos, *pt, *sel, *ctx;
  float *part;
  h3_bf16 *o;
  unsigned *cnt;
  long long T, NP;
  int Hq, Hk, D, page, topk, S;
  float scale;
};

// the phase over a virtual grid (gx, gy) of bdim threads, run by a block of PT threads
template <int PT>
__device__ void run_att(const att_args &a, unsigned gx, unsigned gy, unsigned bdim) {
  const unsigned n = gx * gy;
  for (unsigned v = blockIdx.x; v < n; v += gridDim.x) {
    if (threadIdx.x == 0) h3v_bid = {v % gx, v / gx, 0}, h3v_grid = {gx, gy, 1}, h3v_bdim = {bdim, 1, 1};
    __syncthreads();
    if (threadIdx.x < bdim)
      att_phase(a.q, a.kc, a.vc, nullptr, nullptr, a.pos, a.pt, a.sel, a.ctx, a.part, 2, a.T, a.Hq, a.Hk, a.D,
                a.page, a.topk, a.scale, 0, a.NP, a.S, a.o, a.cnt, 0, 0, 0);
    __syncthreads();
  }
}

// (1): the kernel alone, one launch of grid (gx, gy), bdim threads
__global__ void __launch_bounds__(256) att_launch(att_args a, unsigned gx, unsigned gy, unsigned bdim) {
  if (threadIdx.x == 0) h3v_bid = {blockIdx.x, blockIdx.y, 0}, h3v_grid = {gx, gy, 1}, h3v_bdim = {bdim, 1, 1};
  __syncthreads();
  if (threadIdx.x < bdim)
    att_phase(a.q, a.kc, a.vc, nullptr, nullptr, a.pos, a.pt, a.sel, a.ctx, a.part, 2, a.T, a.Hq, a.Hk, a.D,
              a.page, a.topk, a.scale, 0, a.NP, a.S, a.o, a.cnt, 0, 0, 0);
}

// (2): the same as a phase of a resident grid of 256-thread blocks
__global__ void __launch_bounds__(256) att_persistent(att_args a, unsigned gx, unsigned gy, unsigned bdim) {
  run_att<256>(a, gx, gy, bdim);
}

// (3): the launch recorded, as the product's launch helper would record it: the argument array
// (void *args[], one pointer a parameter, as for cudaLaunchKernel) copied into bytes at the
// offsets the runtime gives for the kernel's parameters (cudaFuncGetParamInfo of att_sig, a
// kernel of att_phase's exact signature), and on the device a trampoline that calls att_phase
// with each parameter read from those bytes at the offset the launch ABI gives its type (each
// at its alignment, in order): the same offsets, or the outputs differ.
extern "C" __global__ void att_sig(const h3_bf16 *__restrict__ q, const h3_bf16 *__restrict__ kc,
                                   const h3_bf16 *__restrict__ vc, const h3_bf16 *__restrict__ kb,
                                   const h3_bf16 *__restrict__ vb, const int *__restrict__ pos,
                                   const int *__restrict__ pt, const int *__restrict__ sel,
                                   const int *__restrict__ ctxp, float *part, int kind, long long T, int Hq,
                                   int Hk, int D, int page, int topk, float scale, int pt_per, long long NP,
                                   int S, h3_bf16 *__restrict__ o, unsigned *cnt, int ctx_rows, long long brows,
                                   int clus) {}

template <int... I> struct h3v_seq {};
template <int N, int... I> struct h3v_make : h3v_make<N - 1, N - 1, I...> {};
template <int... I> struct h3v_make<0, I...> {
  typedef h3v_seq<I...> type;
};
// parameter i's offset among parameters of types A...: each at its alignment, in order
template <typename... A> __host__ __device__ constexpr unsigned long long h3v_off(int i) {
  const unsigned long long sz[] = {sizeof(A)..., 0}, al[] = {alignof(A)..., 1};
  unsigned long long o = 0;
  for (int j = 0; j < i; j++) o = (o + al[j] - 1) / al[j] * al[j] + sz[j];
  return (o + al[i] - 1) / al[i] * al[i];
}
template <typename F> struct h3v_sig;
template <typename... A> struct h3v_sig<void (*)(A...)> {
  template <void (*F)(A...), int... I> static __device__ void call(const char *p, h3v_seq<I...>) {
    F(*reinterpret_cast<const A *>(p + h3v_off<A...>(I))...);
  }
  template <void (*F)(A...)> static __device__ void call(const char *p) {
    call<F>(p, typename h3v_make<(int)sizeof...(A)>::type());
  }
};

struct h3v_record { // a recorded launch: its virtual grid, threads, and argument bytes
  unsigned gx, gy, bdim;
  const char *args;
};

__global__ void __launch_bounds__(256) att_replay(h3v_record r) {
  const unsigned n = r.gx * r.gy;
  for (unsigned v = blockIdx.x; v < n; v += gridDim.x) {
    if (threadIdx.x == 0) h3v_bid = {v % r.gx, v / r.gx, 0}, h3v_grid = {r.gx, r.gy, 1}, h3v_bdim = {r.bdim, 1, 1};
    __syncthreads();
    if (threadIdx.x < r.bdim) h3v_sig<decltype(&att_phase)>::call<&att_phase>(r.args);
    __syncthreads();
  }
}

// the argument array's values packed at the kernel's parameter offsets; false when the
// runtime's offsets are not the trampoline's
static bool pack_args(void **args, int n, std::vector<char> &bytes) {
  constexpr unsigned long long (*off)(int) = h3v_off<const h3_bf16 *, const h3_bf16 *, const h3_bf16 *,
      const h3_bf16 *, const h3_bf16 *, const int *, const int *, const int *, const int *, float *, int,
      long long, int, int, int, int, int, float, int, long long, int, h3_bf16 *, unsigned *, int, long long, int>;
  bytes.assign(512, 0);
  bool same = true;
  for (int i = 0; i < n; i++) {
    size_t o = 0, sz = 0;
    CK(cudaFuncGetParamInfo((const void *)att_sig, (size_t)i, &o, &sz));
    same = same && o == off(i);
    memcpy(bytes.data() + o, args[i], sz);
  }
  return same;
}

int main() {
  const int Hq = 64, Hk = 4, D = 128, page = 128, ctx = 2048, topk = 16, NP = ctx / page + 1, S = 16;
  const long long T = 1, P = NP;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const size_t qn = (size_t)T * Hq * D, cn = (size_t)P * page * Hk * D;
  h3_bf16 *q, *kc, *vc, *o1, *o2;
  int *pos, *pt, *sel, *ctxd;
  float *part;
  unsigned *cnt;
  CK(cudaMalloc(&q, qn * 2));
  CK(cudaMalloc(&kc, cn * 2));
  CK(cudaMalloc(&vc, cn * 2));
  CK(cudaMalloc(&o1, qn * 2));
  CK(cudaMalloc(&o2, qn * 2));
  fill_bf16<<<256, 256>>>(q, (long long)qn, 11u);
  fill_bf16<<<1024, 256>>>(kc, (long long)cn, 12u);
  fill_bf16<<<1024, 256>>>(vc, (long long)cn, 13u);
  std::vector<int> hpos{ctx - 1}, hpt(NP), hsel(Hk * topk);
  for (int i = 0; i < NP; i++) hpt[i] = (i * 7 + 3) % NP; // scrambled pages
  for (int h = 0; h < Hk; h++)
    for (int i = 0; i < topk; i++) hsel[h * topk + i] = i; // every block of the 2k context
  CK(cudaMalloc(&pos, 4));
  CK(cudaMalloc(&pt, NP * 4));
  CK(cudaMalloc(&sel, Hk * topk * 4));
  CK(cudaMalloc(&ctxd, 4));
  CK(cudaMemcpy(pos, hpos.data(), 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(pt, hpt.data(), NP * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(sel, hsel.data(), Hk * topk * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(ctxd, 0, 4));
  CK(cudaMalloc(&part, (size_t)T * Hk * S * (16 * 128 + 32) * 4)); // blobs [T, Hk, S] of H3M_BLOB floats
  CK(cudaMalloc(&cnt, T * Hk * 4));
  CK(cudaMemset(cnt, 0, T * Hk * 4));
  const size_t smem_max = 8 * (16 * 128 * 4); // W * H3M_ATT_RED
  CK(cudaFuncSetAttribute(att_launch, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_max));
  CK(cudaFuncSetAttribute(att_persistent, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_max));
  printf("%s: decode attention (Hq %d, Hk %d, D %d, %d selected blocks of %d, S %d, the last split's block "
         "combining)\n", prop.name, Hq, Hk, D, topk, page, S);
  int fails = 0;
  for (int W : {8, 4}) { // the product's warps at batch 1 (8), and fewer than the block's threads
    const unsigned bdim = 32u * W, gx = (unsigned)(T * S), gy = Hk;
    const size_t smem = (size_t)W * (16 * 128 * 4);
    att_args a{q, kc, vc, pos, pt, sel, ctxd, part, o1, cnt, T, NP, Hq, Hk, D, page, topk, S, 0.08838834764831843f};
    att_launch<<<dim3(gx, gy), 256, smem>>>(a, gx, gy, bdim);
    CK(cudaDeviceSynchronize());
    att_args b = a;
    b.o = o2;
    CK(cudaMemset(o2, 0xff, qn * 2)); // NaN until written
    att_persistent<<<prop.multiProcessorCount, 256, smem>>>(b, gx, gy, bdim);
    CK(cudaDeviceSynchronize());
    std::vector<uint16_t> h1(qn), h2(qn);
    CK(cudaMemcpy(h1.data(), o1, qn * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h2.data(), o2, qn * 2, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (size_t i = 0; i < qn; i++) {
      const uint32_t u = (uint32_t)h1[i] << 16;
      float f;
      memcpy(&f, &u, 4);
      bad += !std::isfinite(f);
    }
    const bool same = !memcmp(h1.data(), h2.data(), qn * 2);
    const double t1 = 1e3 * mean_ms([&](int) { att_launch<<<dim3(gx, gy), 256, smem>>>(a, gx, gy, bdim); }, 20, 200);
    const double t2 = 1e3 * mean_ms([&](int) { att_persistent<<<prop.multiProcessorCount, 256, smem>>>(b, gx, gy, bdim); }, 20, 200);
    printf("  %d warps: own launch %7.2f us, as a phase of %d resident blocks %7.2f us; outputs %s, %d non-finite\n",
           W, t1, prop.multiProcessorCount, t2, same ? "bitwise equal" : "DIFFER", bad);
    fails += !same || bad;
    // (3) the recorded launch through the trampoline
    const h3_bf16 *nb = nullptr;
    int kind = 2, pt_per = 0, ctx_rows = 0, clus = 0;
    long long brows = 0;
    h3_bf16 *o3 = o2;
    void *args[] = {&a.q, &a.kc, &a.vc, &nb, &nb, &a.pos, &a.pt, &a.sel, &a.ctx, &a.part, &kind, &a.T, &a.Hq,
                    &a.Hk, &a.D, &a.page, &a.topk, &a.scale, &pt_per, &a.NP, &a.S, &o3, &a.cnt, &ctx_rows,
                    &brows, &clus};
    std::vector<char> bytes;
    const bool offsets = pack_args(args, 26, bytes);
    char *dbytes;
    CK(cudaMalloc(&dbytes, bytes.size()));
    CK(cudaMemcpy(dbytes, bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
    CK(cudaFuncSetAttribute(att_replay, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_max));
    CK(cudaMemset(o2, 0xff, qn * 2));
    const h3v_record rec{gx, gy, bdim, dbytes};
    att_replay<<<prop.multiProcessorCount, 256, smem>>>(rec);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h2.data(), o2, qn * 2, cudaMemcpyDeviceToHost));
    const bool same3 = !memcmp(h1.data(), h2.data(), qn * 2);
    const double t3 = 1e3 * mean_ms([&](int) { att_replay<<<prop.multiProcessorCount, 256, smem>>>(rec); }, 20, 200);
    printf("  %d warps: the recorded launch through the trampoline %7.2f us; parameter offsets %s; outputs %s\n", W,
           t3, offsets ? "as the runtime's" : "DIFFER from the runtime's", same3 ? "bitwise equal" : "DIFFER");
    fails += !same3 || !offsets;
    CK(cudaFree(dbytes));
  }
  return fails ? 1 : 0;
}
