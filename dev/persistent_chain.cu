// persistent_chain.cu: what a batch-1 decode step would gain if the glue between its GEMVs ran
// inside one persistent kernel instead of as launches between cuBLAS GEMVs, and whether the next
// GEMV's first weight bytes, copied into shared memory while a block waits, hide the waits (lab;
// not CI).
//   nvcc -std=c++17 -arch=sm_90a -O3 -I dev dev/persistent_chain.cu -lcublas -o build-gpu/lab/persistent_chain
//   build-gpu/lab/persistent_chain [layers] [blocks an SM] [attention steps]
// Question (dev/m31-decode.md, 2026-12-06): the batch-1 step of M3.1 small is ~0.3 ms above its
// bandwidth floor; ~40 dependent launches on the main stream, the small kernels' own latency
// chains and each weight read's ramp and tail make it. The first form of this lab (4 GEMVs a
// layer, no attention) answered the launches: one persistent kernel ran at 0.83 x the graph's
// time, as fast as cuBLAS's GEMVs alone (1.21 against 1.195 x the plain read), and asking L2 for
// the next rows before a barrier made it slower (dev/results/2026-12-06-h100-tuning-variants-
// persistent-chain.txt). What is left is each read's ramp and tail, and the latency-bound ops
// (the attention's chain), during which the memory system idles.
// Method: a stand-in of a sparse layer's main stream, `layers` times (own weights each, 327 MB a
// layer: L2 holds none of it across runs), five phases:
//   0 qkv [9216, 6144] <- v = rmsnorm(x)   (x += down's y first, after layer 0)
//   1 attention: 16 blocks, each one thread walking `attention steps` dependent L2 loads
//     through a 1 MB table from a start taken from qkv's y: a latency chain (~0.2 µs a step)
//   2 o [6144, 8192] <- v = y_qkv / 2 (+ 1 where a walk ended on an impossible value: never,
//     but no compiler can know it)
//   3 gate_up [6144, 6144] <- x += y_o, v = rmsnorm(x)
//   4 down [6144, 3072] <- v = silu(y_gu[0:3072]) * y_gu[3072:]
//   at the end x += y_down is the output. GEMV phases: y = W v, bf16 W [N, K], fp32 y.
// The glue (glue_phase) is the same code in every form, 256 threads, so its bits are the same.
//   A "graph": per phase a 1-block glue kernel and cublasGemmEx (the attention as 16 blocks of
//     one thread), captured once in a CUDA graph. A0: A's GEMVs alone; ATT: the attention alone.
//   B "persistent": one kernel, every block resident; per phase every block runs the glue itself
//     (x and v in its shared memory, the previous y read from L2), its warps take weight rows
//     grid-stride (16-byte loads, 8 in flight a lane, a warp a row); a grid barrier (a counter:
//     fence, add, spin) ends the phase.
//   BS "persistent, staged": B, and before each barrier every warp copies the first bytes of its
//     first row of the next GEMV phase into its part of the block's shared memory (cp.async,
//     waited for after the barrier): the copies run while the block waits at the barrier and
//     through the attention, and that row's first bytes then come from shared memory.
//   floor: one grid-stride read of all the weights.
// Checks: B's output against A's (relative to max |x|; only the GEMVs' fp32 sum orders differ),
// BS bitwise equal to B (the same sums in the same order), NaN / Inf fail, B bitwise run to run.
// Prediction (H100, 4 layers, 2 blocks an SM: ~19 MB staged a barrier, ~6 µs of reading): ATT
// ~13 µs a layer; A ~1.46 x the floor + ATT; B ~1.21 x + ATT; BS 10-20 µs a layer below B (the
// ramps of four GEMVs and part of the attention's wait hidden). If BS beats B by >= 8 %, the
// product's persistent layer kernel stages the next weight across each barrier.
// Measured (H100, 2026-12-06, dev/results/2026-12-06-h100-persistent-chain-staged.txt): ATT 11.1
// µs a layer; A 1.688 x the floor, B 1.372 x (0.813 x A: -33 µs a layer), BS 1.503 x: staging
// made every configuration slower (+5 to +22 µs a layer), refuted. Not profiled; suspects: the
// select between shared and global words in the GEMV's inner loop, and the copies' burst at
// every barrier competing with the other blocks' last rows.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cstring>
#include <vector>

#include "lab_cublas.cuh"
#include "lab_cuda.cuh"

constexpr int H = 6144, THREADS = 256, WARPS = THREADS / 32, UNROLL = 8, PHASES = 5, ATT = 1;
constexpr int ATT_BLOCKS = 16, TABLE = 1 << 18; // the attention's walkers; its table's entries (1 MB)
constexpr unsigned NEVER = 0xffffffffu;          // no walk ends here: the table holds 0 .. TABLE - 1
// GEMV phase q's weight: [pn(q), pk(q)]; its y: buffer ys(q)
__host__ __device__ constexpr int pn(int q) { return q == 0 ? 9216 : 6144; }
__host__ __device__ constexpr int pk(int q) { return q == 2 ? 8192 : q == 4 ? 3072 : 6144; }
__host__ __device__ constexpr int ys(int q) { return q == 0 ? 0 : q - 1; } // 0 qkv, 1 o, 2 gate_up, 3 down

struct chain {
  const __nv_bfloat16 *w[16 * PHASES]; // [layers * PHASES] weights (null at the attention)
  int n_phase;
  float *y[4];           // each GEMV kind's output, 9216 floats each
  const unsigned *table; // the attention's walk: a permutation of 0 .. TABLE - 1
  unsigned *att;         // [ATT_BLOCKS] where each walk ended
  int att_steps;
};

// The block's sum of a (every thread's part), 256 threads: warp shuffles, then warp 0.
__device__ float block_sum(float a, float *red) {
  for (int o = 16; o; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
  const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
  __syncthreads();
  if (l == 0) red[w] = a;
  __syncthreads();
  float s = 0;
  for (int i = 0; i < WARPS; i++) s += red[i];
  return s;
}

// The glue before phase p: x (H floats) and v (pk(p % PHASES) bf16) from the previous GEMVs' y.
__device__ void glue_phase(int p, float *x, __nv_bfloat16 *v, const chain &c, float *red) {
  const int q = p % PHASES, t = threadIdx.x;
  if (q == ATT) return;
  if (q == 2) {
    const bool odd = __syncthreads_or(t < ATT_BLOCKS && __ldcg(c.att + t) == NEVER);
    for (int k = t; k < pk(2); k += THREADS) v[k] = __float2bfloat16_rn(0.5f * __ldcg(c.y[0] + k) + (odd ? 1.0f : 0.0f));
    __syncthreads();
    return;
  }
  if (q == 4) {
    for (int k = t; k < pk(4); k += THREADS) {
      const float g = __ldcg(c.y[2] + k), u = __ldcg(c.y[2] + pk(4) + k);
      v[k] = __float2bfloat16_rn(g / (1.0f + __expf(-g)) * u);
    }
    __syncthreads();
    return;
  }
  const float *add = q == 3 ? c.y[1] : p > 0 ? c.y[3] : nullptr; // o's y, or the last layer's down's
  float ss = 0;
  for (int k = t; k < H; k += THREADS) {
    const float xn = add ? x[k] + __ldcg(add + k) : x[k];
    x[k] = xn;
    ss += xn * xn;
  }
  const float r = rsqrtf(block_sum(ss, red) / H + 1e-6f);
  for (int k = t; k < H; k += THREADS) v[k] = __float2bfloat16_rn(x[k] * r);
  __syncthreads();
}

// The attention stand-in of block b: one thread walks the table from a start taken from qkv's y.
__device__ void attention_walk(const chain &c, int b) {
  unsigned i = (__float_as_uint(__ldcg(c.y[0] + b)) ^ (unsigned)b) % TABLE;
  for (int s = 0; s < c.att_steps; s++) i = __ldcg(c.table + i);
  __stcg(c.att + b, i);
}

// A's glue and attention: one block each; x in global memory.
__global__ void __launch_bounds__(THREADS) glue_kernel(int p, float *x, __nv_bfloat16 *v, chain c) {
  __shared__ float red[WARPS];
  glue_phase(p, x, v, c, red);
}
__global__ void attention_kernel(chain c) { attention_walk(c, blockIdx.x); }
__global__ void __launch_bounds__(THREADS) final_add(float *x, const float *y) {
  for (int k = threadIdx.x; k < H; k += THREADS) x[k] += __ldcg(y + k);
}

__device__ float dot8(uint4 w, const __nv_bfloat16 *v) {
  const __nv_bfloat162 *a = reinterpret_cast<const __nv_bfloat162 *>(&w);
  const __nv_bfloat162 *b = reinterpret_cast<const __nv_bfloat162 *>(v);
  float s = 0;
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 fa = __bfloat1622float2(a[i]), fb = __bfloat1622float2(b[i]);
    s = fmaf(fa.x, fb.x, s);
    s = fmaf(fa.y, fb.y, s);
  }
  return s;
}

// The next GEMV phase after p (the attention has none), or n_phase
__device__ int next_gemv(const chain &c, int p) {
  int t = p + 1;
  if (t < c.n_phase && t % PHASES == ATT) t++;
  return t < c.n_phase ? t : c.n_phase;
}

// B and BS: the whole chain. bar: the grid barrier's counter (monotonic; base: its value at
// launch). STAGE: sw 16-byte words a warp of shared memory (dynamic) hold the first words of the
// warp's first row of the next GEMV phase.
template <bool STAGE>
__global__ void __launch_bounds__(THREADS, 2) persistent(chain c, float *out, unsigned *bar, unsigned base, int sw) {
  __shared__ float x[H], red[WARPS];
  __shared__ __align__(16) __nv_bfloat16 v[8192];
  extern __shared__ uint4 stage[]; // [WARPS][sw]
  const int lane = threadIdx.x & 31, gw = blockIdx.x * WARPS + (threadIdx.x >> 5), GW = gridDim.x * WARPS;
  uint4 *mine = stage + (threadIdx.x >> 5) * sw;
  int staged = -1; // the phase whose rows `mine` holds (or is receiving)
  for (int k = threadIdx.x; k < H; k += THREADS) x[k] = 1.0f + 0.001f * (k % 97); // the input
  for (int p = 0; p < c.n_phase; p++) {
    const int q = p % PHASES;
    glue_phase(p, x, v, c, red);
    if (q == ATT) {
      if (blockIdx.x < ATT_BLOCKS && threadIdx.x == 0) attention_walk(c, blockIdx.x);
    } else {
      const int N = pn(q), K = pk(q);
      const __nv_bfloat16 *W = c.w[p];
      float *y = c.y[ys(q)];
      const int ssw = STAGE && staged == p ? min(sw, K / 8) : 0; // staged words of the first row
      if (ssw) asm volatile("cp.async.wait_all;" ::: "memory");
      __syncwarp();
      for (int r = gw; r < N; r += GW) {
        const uint4 *row = reinterpret_cast<const uint4 *>(W + (size_t)r * K);
        const int from_smem = r == gw ? ssw : 0;
        float s = 0;
        for (int c0 = 0; c0 < K / 8; c0 += 32 * UNROLL) { // K / 8 words a row, UNROLL a lane in flight
          uint4 wv[UNROLL];
#pragma unroll
          for (int u = 0; u < UNROLL; u++) {
            const int j = c0 + u * 32 + lane;
            wv[u] = j < from_smem ? mine[j] : j < K / 8 ? __ldcs(row + j) : make_uint4(0, 0, 0, 0);
          }
#pragma unroll
          for (int u = 0; u < UNROLL; u++) {
            const int j = c0 + u * 32 + lane;
            if (j < K / 8) s += dot8(wv[u], v + 8 * j);
          }
        }
        for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) __stcg(y + r, s);
      }
    }
    const int t = next_gemv(c, p);
    if (STAGE && t < c.n_phase && staged != t) { // this warp's first row of phase t, its first words
      const int K1 = pk(t % PHASES), n = min(sw, K1 / 8);
      __syncwarp(); // the warp's reads of `mine` are done
      if (gw < pn(t % PHASES)) {
        const uint4 *row = reinterpret_cast<const uint4 *>(c.w[t] + (size_t)gw * K1);
        for (int j = lane; j < n; j += 32) {
          const unsigned sa = (unsigned)__cvta_generic_to_shared(mine + j);
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sa), "l"(row + j) : "memory");
        }
        asm volatile("cp.async.commit_group;" ::: "memory");
        staged = t;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) { // the grid barrier
      __threadfence();
      atomicAdd(bar, 1u);
      const unsigned want = base + (unsigned)(p + 1) * gridDim.x;
      unsigned got;
      do asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(got) : "l"(bar));
      while ((int)(got - want) < 0);
    }
    __syncthreads();
  }
  if (blockIdx.x == 0)
    for (int k = threadIdx.x; k < H; k += THREADS) out[k] = x[k] + __ldcg(c.y[3] + k);
}

__global__ void plain_read(const uint4 *p, long long n, unsigned *sink) {
  unsigned a = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const uint4 q = __ldcs(p + i);
    a ^= q.x ^ q.y ^ q.z ^ q.w;
  }
  if (a == 0x9e3779b9u) *sink = a;
}

int main(int argc, char **argv) {
  const int layers = argc > 1 ? atoi(argv[1]) : 4, want_per_sm = argc > 2 ? atoi(argv[2]) : 2;
  const int att_steps = argc > 3 ? atoi(argv[3]) : 64;
  if (layers < 1 || layers > 16 || want_per_sm < 1 || att_steps < 0) {
    fprintf(stderr, "usage: persistent_chain [layers 1 .. 16] [blocks an SM, default 2] [attention steps, default 64]\n");
    return 1;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  chain c{};
  c.n_phase = layers * PHASES;
  c.att_steps = att_steps;
  size_t bytes = 0;
  for (int p = 0; p < c.n_phase; p++)
    if (p % PHASES != ATT) bytes += (size_t)pn(p % PHASES) * pk(p % PHASES) * 2;
  __nv_bfloat16 *wall;
  CK(cudaMalloc(&wall, bytes));
  size_t off = 0;
  for (int p = 0; p < c.n_phase; p++) {
    if (p % PHASES == ATT) continue;
    const long long n = (long long)pn(p % PHASES) * pk(p % PHASES);
    c.w[p] = wall + off;
    fill_bf16<<<1024, 256>>>(wall + off, n, 0x1234u + 77u * p);
    off += (size_t)n;
  }
  std::vector<unsigned> perm(TABLE), table(TABLE); // one cycle through the table, in a hashed order
  for (int i = 0; i < TABLE; i++) perm[i] = (unsigned)i;
  unsigned hs = 0x2545f491u;
  for (int i = TABLE - 1; i > 0; i--) {
    hs ^= hs << 13, hs ^= hs >> 17, hs ^= hs << 5;
    std::swap(perm[i], perm[hs % (unsigned)(i + 1)]);
  }
  for (int i = 0; i < TABLE; i++) table[perm[i]] = perm[(i + 1) % TABLE];
  unsigned *tabled;
  CK(cudaMalloc(&tabled, TABLE * sizeof(unsigned)));
  CK(cudaMemcpy(tabled, table.data(), TABLE * sizeof(unsigned), cudaMemcpyHostToDevice));
  c.table = tabled;
  CK(cudaMalloc(&c.att, ATT_BLOCKS * sizeof(unsigned)));
  CK(cudaDeviceSynchronize()); // the fills ran on the legacy stream; the runs below on a non-blocking one
  for (float *&y : c.y) CK(cudaMalloc(&y, 9216 * sizeof(float)));
  float *x, *outa, *outb;
  __nv_bfloat16 *v;
  unsigned *bar, *sink;
  CK(cudaMalloc(&x, H * sizeof(float)));
  CK(cudaMalloc(&outa, H * sizeof(float)));
  CK(cudaMalloc(&outb, H * sizeof(float)));
  CK(cudaMalloc(&v, 8192 * sizeof(__nv_bfloat16)));
  CK(cudaMalloc(&bar, 4));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMemset(bar, 0, 4));
  std::vector<float> x0(H);
  for (int k = 0; k < H; k++) x0[k] = 1.0f + 0.001f * (k % 97); // as the persistent kernel's
  float *x0d;
  CK(cudaMalloc(&x0d, H * sizeof(float)));
  CK(cudaMemcpy(x0d, x0.data(), H * sizeof(float), cudaMemcpyHostToDevice));

  // A: glue kernels, the attention kernel and cuBLAS GEMVs in one CUDA graph
  cublasHandle_t h;
  CB(cublasCreate(&h));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  CB(cublasSetStream(h, st));
  const float one = 1.0f, zero = 0.0f;
  auto gemv = [&](int p) {
    const int q = p % PHASES, N = pn(q), K = pk(q);
    CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, 1, K, &one, c.w[p], CUDA_R_16BF, K, v, CUDA_R_16BF, K, &zero,
                    c.y[ys(q)], CUDA_R_32F, N, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  };
  auto chain_a = [&] {
    CK(cudaMemcpyAsync(x, x0d, H * sizeof(float), cudaMemcpyDeviceToDevice, st));
    for (int p = 0; p < c.n_phase; p++) {
      if (p % PHASES == ATT) {
        attention_kernel<<<ATT_BLOCKS, 1, 0, st>>>(c);
        continue;
      }
      glue_kernel<<<1, THREADS, 0, st>>>(p, x, v, c);
      gemv(p);
    }
    final_add<<<1, THREADS, 0, st>>>(x, c.y[3]);
  };
  auto capture = [&](auto f) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    f();
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    return ge;
  };
  chain_a(); // cuBLAS's first call outside the capture
  CK(cudaStreamSynchronize(st));
  const cudaGraphExec_t ga = capture(chain_a);
  const cudaGraphExec_t ga0 = capture([&] { // A0: the GEMVs alone (v as the last glue left it)
    for (int p = 0; p < c.n_phase; p++)
      if (p % PHASES != ATT) gemv(p);
  });
  const cudaGraphExec_t gatt = capture([&] { // ATT: the attention kernels alone
    for (int l = 0; l < layers; l++) attention_kernel<<<ATT_BLOCKS, 1, 0, st>>>(c);
  });
  CK(cudaGraphLaunch(ga, st));
  CK(cudaMemcpyAsync(outa, x, H * sizeof(float), cudaMemcpyDeviceToDevice, st));
  CK(cudaStreamSynchronize(st));
  std::vector<float> ref(H), plain(H), got(H), again(H);
  CK(cudaMemcpy(ref.data(), outa, H * sizeof(float), cudaMemcpyDeviceToHost));

  // B, BS: the grid of resident blocks; BS's staging fills what shared memory the SM has left
  const size_t fixed = (H + WARPS) * sizeof(float) + 8192 * 2 + 1024; // + the 1 KB a block reserves
  const size_t per_block = prop.sharedMemPerMultiprocessor / want_per_sm;
  const int sw = per_block > fixed ? (int)((per_block - fixed) / 16 / WARPS) / 32 * 32 : 0;
  const size_t dyn = (size_t)sw * WARPS * 16;
  CK(cudaFuncSetAttribute(persistent<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn));
  int occ0 = 0, occ1 = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ0, persistent<false>, THREADS, 0));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ1, persistent<true>, THREADS, dyn));
  const int per_sm = std::min(want_per_sm, std::min(occ0, occ1)), grid = per_sm * prop.multiProcessorCount;
  if (per_sm < 1 || sw < 32) {
    fprintf(stderr, "the persistent kernel does not fit an SM with staging\n");
    return 1;
  }
  unsigned base = 0;
  auto run_b = [&](bool staged) {
    if (staged) persistent<true><<<grid, THREADS, dyn, st>>>(c, outb, bar, base, sw);
    else persistent<false><<<grid, THREADS, 0, st>>>(c, outb, bar, base, 0);
    base += (unsigned)c.n_phase * (unsigned)grid;
  };
  auto time_it = [&](auto f) { return 1e3 * mean_ms([&](int) { f(); }, 3, 20, st) / layers; }; // µs a layer
  printf("%s, %d SMs; %d layers of 4 GEMVs and an attention of %d steps, %.1f MB of weights a layer;\n"
         "  persistent grid %d x %d threads, staging %d KB a block (%.1f MB in all)\n",
         prop.name, prop.multiProcessorCount, layers, att_steps, bytes / 1e6 / layers, grid, THREADS,
         (int)(dyn >> 10), dyn * (double)grid / 1e6);
  const long long words = (long long)(bytes / 16);
  const double floor_us = time_it([&] { plain_read<<<8 * prop.multiProcessorCount, 256, 0, st>>>((const uint4 *)wall, words, sink); });
  const double att_us = time_it([&] { CK(cudaGraphLaunch(gatt, st)); });
  const double a0_us = time_it([&] { CK(cudaGraphLaunch(ga0, st)); });
  const double a_us = time_it([&] { CK(cudaGraphLaunch(ga, st)); });
  auto row = [&](const char *name, double us) {
    printf("  %-40s %8.1f us a layer  %.3f x floor", name, us, us / floor_us);
  };
  row("floor (a plain read)", floor_us), printf("\n");
  row("ATT: the attention kernels alone", att_us), printf("\n");
  row("A0: cuBLAS alone, a graph", a0_us), printf("\n");
  row("A: glue + attention + cuBLAS, a graph", a_us), printf("\n");
  for (int staged = 0; staged <= 1; staged++) {
    run_b(staged);
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(got.data(), outb, H * sizeof(float), cudaMemcpyDeviceToHost));
    run_b(staged);
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(again.data(), outb, H * sizeof(float), cudaMemcpyDeviceToHost));
    const double b_us = time_it([&] { run_b(staged); });
    const double rd = rel_diff(got, ref);
    if (!staged) plain = got;
    const bool same = !memcmp(got.data(), again.data(), H * sizeof(float));
    const bool as_b = !memcmp(got.data(), plain.data(), H * sizeof(float));
    row(staged ? "BS: persistent, next rows staged" : "B: persistent", b_us);
    printf("  %.3f x A  rel diff %.2e %s%s%s\n", b_us / a_us, rd, rd < 1e-2 ? "ok" : "MISMATCH",
           same ? "" : " (not bitwise run to run)", as_b ? "" : " (NOT bitwise equal to B)");
  }
  return 0;
}
