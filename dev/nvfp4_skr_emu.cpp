// nvfp4_skr_emu.cpp: dev/nvfp4_lab.cu's skr and skx kernels (R weight tiles a warp; skr: x one
// turn ahead through shared memory; skx: x in registers, the product's path; K split over S
// blocks) run on the host under tests/codegen/host_emu.h, no GPU (lab; not CI):
//   g++ -std=c++17 -O1 -ffp-contract=off -I tests/codegen -I kernels -I include -I dev
//     dev/nvfp4_skr_emu.cpp -lpthread -o /tmp/nvfp4_skr_emu && /tmp/nvfp4_skr_emu
// Per case (the lab's instances: skr<4,4>; skx<R,NT,NB,XB> at R 2 (and R 1, the product's
// work), weight rings of 2-4 units, x rings of 1 and 2 turns, one and two n-tiles of x; N of
// whole and partial column groups and N < 16 R, 1 to 29 chunks, so that warps idle, turns end
// a round of the unrolled loop anywhere and the x ring's slots alternate; S 1 to 5 splits; M 1
// to 16; a NaN scale byte):
// - y against a float64 reference (max |diff| / max |y| < 1e-5: fp32 sum order; NaN exactly in
//   the NaN scale's column), y set to NaN before the launch;
// - every store counted: S = 1, y[m, n] once for m < M, n < N and nothing else; S > 1,
//   part[s, m, n] once each and no direct y store (the last block's h3n_add_partials writes y:
//   checked by value), the counters back at 0;
// - S = 1: y bitwise the same sums' kernel on the same inputs: the product's _sk
//   (kernels/nvfp4_gemm.cu) at one n-tile, the lab's skv16 (skv<1, false, 2>) at two.
#include "host_emu.h"

thread_local emu_dim3 threadIdx;
emu_dim3 blockIdx, blockDim, gridDim;
pthread_barrier_t emu_barrier;
unsigned long long emu_slots[1024];
unsigned emu_mma_words[1024][6];
alignas(16) unsigned char emu_dyn_smem[1 << 20];

#include "prelude.cuh"

#include <cstdio>
#include <map>
#include <vector>

static std::vector<int> note_y, note_part; // store counts (SKR_NOTE)
static long long note_bad = 0;             // stores outside the arrays
static void skr_note(int what, long long i) {
  std::vector<int> &v = what ? note_part : note_y;
  if (i < 0 || i >= (long long)v.size()) note_bad++;
  else v[(size_t)i]++;
}
#define SKR_NOTE(what, i) skr_note(what, i)
#define NVFP4_LAB_EMU 1
#include "nvfp4_lab.cu"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static unsigned rnd() {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (unsigned)(rng >> 32);
}

static double e2m1(unsigned c) {
  static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return (c & 8 ? -1 : 1) * mag[c & 7];
}
static double e4m3(unsigned b) { // OCP E4M3FN; 0x7f, 0xff NaN
  if ((b & 0x7f) == 0x7f) return NAN;
  const int e = (b >> 3) & 15, m = b & 7;
  const double v = e ? std::ldexp(1.0 + m / 8.0, e - 7) : std::ldexp(m / 8.0, -6);
  return b & 0x80 ? -v : v;
}

typedef void (*skr_fn)(const h3_bf16 *, const unsigned char *, const unsigned char *, const float *, float *, float *,
                       unsigned *, long long, long long, long long);
// the same sums at S = 1 (grid ceil(N / 16), no scratch): lab_nv_sk (NT 1), skv<1, false, 2> (NT 2)
typedef void (*ref_fn)(const h3_bf16 *, const unsigned char *, const unsigned char *, const float *, float *, long long,
                       long long, long long);

static int fails = 0, cases = 0;

// one case: kern (R tiles a warp, NT n-tiles of x) at M x N x K (nch chunks), S splits; nan_row
// >= 0: a NaN scale; ref: the kernel of the same sums at S = 1
static void run(const char *tag, skr_fn kern, ref_fn ref_k, int R, long long M, long long N, int nch, int S,
                long long nan_row) {
  const long long K = (long long)nch * H3N_KC;
  std::vector<h3_bf16> x((size_t)(M * K));
  std::vector<unsigned char> pk((size_t)(N * K / 2)), sc((size_t)(N * K / 16));
  for (auto &v : x) v = __float2bfloat16_rn(((int)(rnd() % 2001) - 1000) / 500.0f);
  for (auto &v : pk) v = (unsigned char)rnd();
  for (auto &v : sc) { // magnitudes 0 .. 0x7e (subnormals to 448), 1 in 16 zero, both signs
    const unsigned r = rnd();
    v = r % 16 == 0 ? 0 : (unsigned char)(r % 0x7f | (r >> 8 & 1) << 7);
  }
  if (nan_row >= 0) sc[(size_t)(nan_row * (K / 16) + K / 32)] = 0x7f;
  const float g = 0.37f;
  // float64 reference
  std::vector<double> ref((size_t)(M * N));
  double ymax = 0;
  for (long long m = 0; m < M; m++)
    for (long long n = 0; n < N; n++) {
      double s = 0;
      for (long long k = 0; k < K; k++) {
        const unsigned b = pk[(size_t)(n * (K / 2) + k / 2)], c = k & 1 ? b >> 4 : b & 15;
        s += (double)__bfloat162float(x[(size_t)(m * K + k)]) * e2m1(c) * e4m3(sc[(size_t)(n * (K / 16) + k / 16)]);
      }
      ref[(size_t)(m * N + n)] = s * g;
      if (std::isfinite(s)) ymax = std::fmax(ymax, std::fabs(s * g));
    }
  const long long cols = (N + 16 * R - 1) / (16 * R);
  std::vector<float> y((size_t)(M * N), NAN), part((size_t)(S * M * N), NAN);
  std::vector<unsigned> cnt((size_t)cols, 0u);
  note_y.assign((size_t)(M * N), 0), note_part.assign((size_t)(S * M * N), 0), note_bad = 0;
  emu_launch3(cols, S, 1, 32 * H3NS_WARPS, [&] {
    kern(x.data(), pk.data(), sc.data(), &g, y.data(), S > 1 ? part.data() : nullptr, S > 1 ? cnt.data() : nullptr, M,
         N, K);
  });
  cases++;
  double d = 0;
  long long wrong_nan = 0, counts = note_bad, left = 0;
  for (size_t i = 0; i < y.size(); i++) {
    const bool rn = std::isnan(ref[i]), yn = std::isnan(y[i]);
    if (rn != yn) wrong_nan++;
    else if (!rn) d = std::fmax(d, std::fabs(y[i] - ref[i]));
    counts += note_y[i] != (S == 1 ? 1 : 0);
  }
  for (size_t i = 0; i < note_part.size(); i++) counts += note_part[i] != (S > 1 ? 1 : 0);
  for (unsigned c : cnt) left += c != 0;
  bool bitwise = true, checked_bitwise = false;
  if (S == 1) { // the product's skinny form (or skv16), the same sums
    std::vector<float> prod((size_t)(M * N), NAN);
    emu_launch3((N + 15) / 16, 1, 1, 32 * H3NS_WARPS,
                [&] { ref_k(x.data(), pk.data(), sc.data(), &g, prod.data(), M, N, K); });
    bitwise = memcmp(prod.data(), y.data(), y.size() * 4) == 0, checked_bitwise = true;
  }
  const double rel = ymax > 0 ? d / ymax : d;
  const bool ok = rel < 1e-5 && wrong_nan == 0 && counts == 0 && left == 0 && bitwise;
  fails += !ok;
  printf("%-15s M %2lld N %3lld chunks %2d S %d%s: rel %.1e%s%s%s%s%s\n", tag, M, N, nch, S,
         nan_row >= 0 ? " NaN" : "    ", rel, wrong_nan ? "  NaN MISMATCH" : "", counts ? "  STORE COUNTS WRONG" : "",
         left ? "  COUNTERS LEFT" : "", checked_bitwise ? (bitwise ? "  bitwise" : "  NOT BITWISE") : "",
         ok ? "" : "  FAIL");
}

int main() {
  struct kind {
    const char *tag;
    skr_fn kern;
    int R, NT;
  } kinds[] = {{"skr<4,4>", skr<4, 1, 4>, 4, 1},          {"skx<1,3,2>", skx<1, 1, 3, 2>, 1, 1},
               {"skx<2,3,1>", skx<2, 1, 3, 1>, 2, 1},     {"skx<2,4,1>", skx<2, 1, 4, 1>, 2, 1},
               {"skx<2,2,2>", skx<2, 1, 2, 2>, 2, 1},     {"skx<2,3,2>", skx<2, 1, 3, 2>, 2, 1},
               {"skx16<2,2,1>", skx<2, 2, 2, 1>, 2, 2},   {"skx16<2,3,1>", skx<2, 2, 3, 1>, 2, 2}};
  // (chunks, S): idle warps (chunks < 4 S), 1-8 turns a warp, every remainder of the rounds
  // (4, 6, 12 units)
  const int shapes[][2] = {{1, 1}, {3, 2}, {5, 1}, {7, 2}, {12, 3}, {13, 1}, {17, 4}, {24, 1}, {29, 2}, {9, 5}, {26, 1},
                           {11, 1}, {21, 1}, {2, 1}};
  for (const kind &k : kinds) {
    const long long Ms1[] = {1, 5, 8, 3}, Ms2[] = {9, 13, 16, 4};
    const long long *Ms = k.NT == 1 ? Ms1 : Ms2;
    const long long Ns[] = {16LL * k.R, 16LL * k.R * 2 + 8, 23}; // whole groups, a partial tile, N < 16 R (R > 1)
    const ref_fn ref_k = k.NT == 1 ? lab_nv_sk : skv<1, false, 2>;
    int i = 0;
    for (const auto &sh : shapes) {
      const long long M = Ms[i % 4], N = Ns[(i / 3 + i) % 3];
      run(k.tag, k.kern, ref_k, k.R, M, N, sh[0], sh[1], i % 5 == 1 ? (long long)(N - 1 - i % (int)N) : -1);
      i++;
    }
  }
  // the lab's K splits (skr_splits) at its shapes on 132 SMs of 3 blocks each (skr<1,3>: S = 1)
  const long long lab[4][2] = {{6144, 18432}, {6144, 8192}, {24576, 6144}, {6144, 12288}};
  for (const auto &sh : lab) {
    printf("N %5lld K %5lld (%2lld chunks): S", sh[0], sh[1], sh[1] / H3N_KC);
    for (int R : {2, 4}) {
      const long long S = skr_splits(R, sh[0], sh[1], 3 * 132LL), cols = (sh[0] + 16 * R - 1) / (16 * R);
      printf("  R %d: %lld (%lld blocks, %lld turns a warp)", R, S, cols * S, (sh[1] / H3N_KC + 4 * S - 1) / (4 * S));
    }
    printf("\n");
  }
  printf("skr / skx emulation: %d cases, %d failed\n", cases, fails);
  return fails != 0;
}
