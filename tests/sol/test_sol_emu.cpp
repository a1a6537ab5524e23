/* test_sol_emu.cpp: sol_attention's CUDA kernels (kernels/sol_select.cu, sol_attention.cu) run
 * on the host under tests/codegen/host_emu.h (a thread per CUDA thread; ldmatrix, the m16n8k16
 * bf16 mma, shuffles and barriers block-wide), launched as runtime/cuda/cuda_sol.c launches
 * them (per segment: centroids, kstats, select, fwd), on random bf16 q, k, v (keys with
 * per-channel offsets and per-block shifts, so that block scores differ and the threshold
 * selects some blocks and not others), head_dim 128:
 *   - the pre-passes bitwise against ops.def's contract computed here in the CPU reference's
 *     order (runtime/cpu/ops_sol.c): kc, qbar, the bf16 hi + lo split of kc and vc (zeros past
 *     the last block up to a multiple of 16) and the exact-block flags of every (q head, query
 *     block);
 *   - the output against the CPU backend's op: the kernel rounds P of exact keys and the
 *     pseudo-keys' p and vc to bf16 (as the dense flash kernel rounds P and holds V), uses 2^x
 *     in log2 units and other fp32 sum orders: NMSE <= 2e-5 (measured 4.7e-6 .. 8.6e-6, the
 *     most where pseudo-keys hold most of the mass).
 * Cases: two segments (130 + 70 rows: partial last blocks, the second segment's blocks from
 * its own start), GQA 4/2, tau 1 diag; 196 + 4 rows (a 4-row segment as the padding rows
 * form one: a single block) at tau 0; 450 rows (8 blocks), thresh exact, 2 q heads on 1 kv
 * head; sinks (rows 100 .. 169) with tau 2; tau = -inf (every block exact: attention's result);
 * 2100 rows (33 blocks: three chunks of 16 pseudo-keys through both shared-memory stages, the
 * last one padded);
 * the pre-passes alone on 19180 rows (300 blocks: the exact covariance's sums run over three
 * chunks of 128 blocks, key blocks beyond a thread's first), exact and diag with one sink row.
 */
#include "emu_harness.h"

#include <algorithm>

namespace sol_k {
#include "sol_select.cu"
#include "sol_attention.cu"
} // namespace sol_k

/* The op's scratch for one segment (cuda_sol.c's parts, packed with the segment's nb) */
struct scratch {
  std::vector<float> kc, qbar, kmean, kvar;
  std::vector<h3_bf16> kvs;
  std::vector<unsigned char> exact;
};

static long long padded_blocks(long long nb) { return (nb + 15) / 16 * 16; }

struct sol_case {
  const char *name;
  int64_t T, cut, hq, hk; /* cut: the second segment's start (0: one segment) */
  double tau;
  bool exact_cov;
  int64_t sink_start, sink_tokens;
  bool prepass_only; /* the pre-passes alone (no attention: too slow to emulate at this size) */
};

/* One segment of rows [0, len) at q, k, v, o as cuda_sol.c's run_segment launches it. */
static void emu_segment(const sol_case &c, const h3_bf16 *q, const h3_bf16 *k, const h3_bf16 *v, h3_bf16 *o,
                        long long len, float scale, scratch &sc) {
  const int hq = (int)c.hq, hk = (int)c.hk;
  const long long nb = (len + 63) / 64, s0 = c.sink_start, s1 = c.sink_start + c.sink_tokens;
  const long long nbp = padded_blocks(nb);
  sc.kc.assign((size_t)(hk * nb * 128), -1.0f), sc.kvs.assign((size_t)(hk * nbp * 4 * 128), h3_bf16{0x7fc0});
  sc.qbar.assign((size_t)(hq * nb * 128), -1.0f);
  sc.kmean.assign((size_t)hk * 128, -1.0f), sc.kvar.assign((size_t)hk * 128, -1.0f);
  sc.exact.assign((size_t)(hq * nb * nb), 7);
  emu_launch3(nbp, 2 * hk + hq, 1, 128, [&] {
    sol_k::h3cu_sol_centroids(q, k, v, len, nb, hq, hk, sc.kc.data(), sc.kvs.data(), sc.qbar.data());
  });
  emu_launch3(hk, 1, 1, 128, [&] { sol_k::h3cu_sol_kstats(sc.kc.data(), nb, sc.kmean.data(), sc.kvar.data()); });
  emu_launch3((nb + H3L_SELECT_QB - 1) / H3L_SELECT_QB, hq, 1, 128, [&] {
    sol_k::h3cu_sol_select(sc.kc.data(), sc.qbar.data(), sc.kmean.data(), sc.kvar.data(), nb, len, hq / hk, scale,
                           (float)c.tau, c.exact_cov, s0, s1, sc.exact.data());
  });
  if (!c.prepass_only)
    emu_launch3(nb, hq, 1, 128, [&] {
      sol_k::h3cu_sol_fwd(q, k, v, sc.kvs.data(), sc.exact.data(), o, len, nb, hq / hk, scale);
    });
}

static float f32(const h3_bf16 *x, long long i) { return h3_bf16_to_f32(x[i].bits); }

static float dot128(const float *a, const float *b) {
  float s = 0.0f;
  for (int d = 0; d < 128; d++) s += a[d] * b[d];
  return s;
}

/* The pre-passes' results of one segment against the contract (ops_sol.c's order): the number
 * of mismatches; *n_exact, *n_pairs count the exact (query block, key block) pairs. */
static int64_t check_select(const sol_case &c, const h3_bf16 *q, const h3_bf16 *k, const h3_bf16 *v, long long len,
                            float scale, const scratch &sc, int64_t *n_exact, int64_t *n_pairs) {
  const long long nb = (len + 63) / 64, s0 = c.sink_start, s1 = c.sink_start + c.sink_tokens;
  const int hq = (int)c.hq, hk = (int)c.hk;
  std::vector<float> kc((size_t)(hk * nb * 128)), qb((size_t)(hq * nb * 128));
  int64_t bad = 0;
  const long long nbp = padded_blocks(nb);
  for (int w = 0; w < 3; w++) { /* kc, vc, qbar */
    const int H = w == 2 ? hq : hk;
    const h3_bf16 *x = w == 0 ? k : w == 1 ? v : q;
    for (int h = 0; h < H; h++)
      for (long long b = 0; b < nbp; b++)
        for (int d = 0; d < 128; d++) {
          const long long r1 = std::min(len, 64 * b + 64);
          float s = 0.0f;
          for (long long r = 64 * b; r < r1; r++) s += f32(x, (r * H + h) * 128 + d);
          const float want = b < nb ? s / (float)(r1 - 64 * b) : 0.0f; /* zeros past nb (kvs only) */
          const size_t at = (size_t)((h * nb + b) * 128 + d);
          if (w == 2) {
            if (b < nb) bad += sc.qbar[at] != want, qb[at] = want;
            continue;
          }
          if (w == 0 && b < nb) bad += sc.kc[at] != want, kc[at] = want;
          /* the split: tile 2 w (hi) and 2 w + 1 (lo) of chunk b / 16 */
          const uint16_t hi = h3_f32_to_bf16(want), lo = h3_f32_to_bf16(want - h3_bf16_to_f32(hi));
          const size_t t0 = (size_t)((((h * (nbp / 16) + b / 16) * 4 + 2 * w) * 16 + b % 16) * 128 + d);
          bad += sc.kvs[t0].bits != hi || sc.kvs[t0 + 16 * 128].bits != lo;
        }
  }
  for (int n = 0; n < hq; n++) {
    const float *kh = kc.data() + (size_t)(n / (hq / hk) * nb * 128);
    float mean[128], var[128];
    for (int d = 0; d < 128; d++) {
      float acc = 0.0f, vv = 0.0f;
      for (long long b = 0; b < nb; b++) acc += kh[b * 128 + d];
      mean[d] = acc / (float)nb;
      for (long long b = 0; b < nb; b++) vv += (kh[b * 128 + d] - mean[d]) * (kh[b * 128 + d] - mean[d]);
      var[d] = vv / (float)nb;
    }
    for (long long i = 0; i < nb; i++) {
      const float *qi = qb.data() + (size_t)((n * nb + i) * 128);
      float sig2 = 0.0f;
      if (c.exact_cov) {
        for (long long b = 0; b < nb; b++) {
          float p = 0.0f;
          for (int d = 0; d < 128; d++) p += qi[d] * (kh[b * 128 + d] - mean[d]);
          sig2 += p * p;
        }
        sig2 = scale * scale * (sig2 / (float)nb);
      } else {
        for (int d = 0; d < 128; d++) sig2 += qi[d] * qi[d] * var[d];
        sig2 = scale * scale * sig2;
      }
      const float theta = scale * dot128(qi, mean) + (float)c.tau * std::sqrt(sig2 + 1e-6f);
      for (long long j = 0; j < nb; j++) {
        const long long p0 = 64 * j, p1 = std::min(len, p0 + 64);
        const bool want = scale * dot128(qi, kh + j * 128) > theta || std::llabs(i - j) <= 1 || (p0 < s1 && s0 < p1);
        const unsigned char got = sc.exact[(size_t)((n * nb + i) * nb + j)];
        bad += got != (unsigned char)want;
        *n_exact += want, ++*n_pairs;
      }
    }
  }
  return bad;
}

static void test_case(const sol_case &c) {
  const std::string seg = c.cut ? ", segments = [" + std::to_string(c.cut) + "]" : "";
  char attrs[256];
  snprintf(attrs, sizeof attrs, ", tau = %s, thresh = \"%s\", sink_start = %lld, sink_tokens = %lld",
           std::isinf(c.tau) ? "-inf" : std::to_string(c.tau).c_str(), c.exact_cov ? "exact" : "diag",
           (long long)c.sink_start, (long long)c.sink_tokens);
  h3_module *m;
  std::vector<buf> in;
  const h3_op *op = qkv_case(&m, c.name, "sol_attention", c.T, c.hq, c.hk, "scale = 0.08838834764" + seg + attrs, in);
  if (!op) return;
  std::vector<double> bias(128), shift((size_t)((c.T + 63) / 64 * 128));
  for (double &b : bias) b = 4 * urand() - 2;
  for (double &b : shift) b = 2 * urand() - 1;
  for (int64_t i = 0; i < h3_type_numel(&in[1].type); i++) {
    const int64_t d = i % 128, row = i / 128 / c.hk;
    h3_weights_store(in[1].p(), H3_BF16, (size_t)i, 2 * urand() - 1 + bias[(size_t)d] + shift[(size_t)(row / 64 * 128 + d)]);
  }
  std::vector<buf> want = c.prepass_only ? std::vector<buf>() : cpu_run(op, in);
  buf out = make(op->results[0]->type);
  const h3_bf16 *q = (const h3_bf16 *)in[0].p(), *k = (const h3_bf16 *)in[1].p(), *v = (const h3_bf16 *)in[2].p();
  int64_t bad = 0, lo = 0, n_exact = 0, n_pairs = 0;
  scratch sc;
  for (int64_t hi : {c.cut ? c.cut : c.T, c.T}) {
    if (hi <= lo) continue;
    const long long qo = lo * c.hq * 128, ko = lo * c.hk * 128;
    emu_segment(c, q + qo, k + ko, v + ko, (h3_bf16 *)out.p() + qo, hi - lo, 0.08838834764f, sc);
    bad += check_select(c, q + qo, k + ko, v + ko, hi - lo, 0.08838834764f, sc, &n_exact, &n_pairs);
    lo = hi;
  }
  fprintf(stderr, "  %-44s %lld pre-pass mismatches, %lld of %lld block pairs exact\n", c.name, (long long)bad,
          (long long)n_exact, (long long)n_pairs);
  CHECK(bad == 0, "%s: %lld centroids or flags differ from the contract", c.name, (long long)bad);
  CHECK(std::isinf(c.tau) ? n_exact == n_pairs : n_exact < n_pairs, "%s: %lld of %lld pairs exact", c.name,
        (long long)n_exact, (long long)n_pairs);
  if (!c.prepass_only) compare(c.name, out, want[0], 2e-5);
  h3_module_free(m);
}

int main(void) {
  elapsed();
  const double inf = INFINITY;
  test_case({"segments 130 + 70, GQA 4/2, tau 1 diag", 200, 130, 4, 2, 1.0, false, 0, 0, false});
  test_case({"segments 196 + 4 (a padding-like one), tau 0", 200, 196, 2, 2, 0.0, false, 0, 0, false});
  test_case({"450 rows, GQA 2/1, tau 0.5 exact", 450, 0, 2, 1, 0.5, true, 0, 0, false});
  test_case({"450 rows, sinks 100 .. 169, tau 2 diag", 450, 0, 2, 2, 2.0, false, 100, 70, false});
  test_case({"segments 300 + 150, tau -inf (dense)", 450, 300, 2, 1, -inf, false, 0, 0, false});
  test_case({"2100 rows: 33 blocks, 3 chunks of pseudo-keys", 2100, 0, 1, 1, 1.5, false, 0, 0, false});
  test_case({"pre-passes: 300 blocks, thresh exact, GQA 2/1", 19180, 0, 2, 1, 1.0, true, 0, 0, true});
  test_case({"pre-passes: 300 blocks, diag, sinks", 19180, 0, 1, 1, 1.0, false, 640, 1, true});
  return check_summary("sol_emu");
}
