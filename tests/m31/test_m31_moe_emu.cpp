/* test_m31_moe_emu.cpp: the router, route and combine kernels of kernels/m31_moe.cu run on
 * the host under tests/codegen/host_emu.h (a thread per CUDA thread, barriers for
 * __syncthreads and the shuffles, the blocks of a launch one at a time), launched as
 * runtime/cuda/cuda_m31_moe.c launches them, against the CPU backend's ops on random inputs:
 *   router_topk  the one-launch form (k <= 16) at T = 1, 3 (one row group), 64 (row groups
 *                of 4; one expert per warp up to here), 200 (12 rows per
 *                block, 4 experts per warp), E = 32 k = 4 and small E / k, E over
 *                several expert blocks, H not a multiple of the 1024-element segment nor of
 *                8, more segments than the last block reads at once (10), two experts of
 *                equal rows and bias (a tie: the lower id); ids equal,
 *                weights within 1e-10 NMSE (sums in another order), the counters 0 after the
 *                launch, a second launch the same bits, each row alone (T = 1) the same bits
 *                as in the batch; NaN scores as the
 *                reference's scan takes them; k > 16 through the scores and the selection.
 *                Rows of h whose k-th and (k+1)-th largest s + bias (double sums) lie within
 *                1e-4 but apart are drawn again (a near-tie that sums in another order may
 *                flip).
 *   route        each expert's rows against a host count (rows with repeated ids).
 *   combine      bitwise against the host's sum in ascending expert order (repeated ids
 *                counted once, k <= 4 and k > 4, widths not a multiple of 8).
 *   cuBLASLt form's kernels  the gather (each expert's rows in expert order, every listed
 *                slot's row), the combine through those rows bitwise equal to the combine of
 *                the unsorted y, the activation against the host's swigluoai (1e-6).
 *   moe          at decode shapes: the router, the route kernel's lists of its ids, the
 *                tensor-core GEMVs, against the CPU's moe of the router's ids and weights (1e-5
 *                NMSE).
 * NaN and Inf are counted as mismatches (compare, emu_harness.h).
 */
#include "emu_harness.h"

#include <algorithm>

namespace router_k {
#define H_T h3_bf16
#define W_T float
#define B_T float
#define I_T int
#define O_T float
#define H3_ROUTER_FUSED_NAME emu_router_fused
#define H3_ROUTER_SCORE_NAME emu_router_score
#define H3_ROUTER_NAME emu_router
#include "m31_moe.cu"
#undef H3_ROUTER_FUSED_NAME
#undef H3_ROUTER_SCORE_NAME
#undef H3_ROUTER_NAME
#undef H_T
#undef W_T
#undef B_T
#undef I_T
#undef O_T
} // namespace router_k

namespace moe_k {
#define H_T h3_bf16
#define W_T h3_bf16
#define B_T float
#define I_T int
#define O_T float
#define H3_MOE_COMBINE_NAME emu_moe_combine
#define H3_MOE_ROUTE_NAME emu_moe_route
#define H3_MOE_MMA_NAME emu_moe_mma
#define H3_MOE_MMA_DOWN_NAME emu_moe_mma_down
#define H3_MOE_GATHER_NAME emu_moe_gather
#define H3_MOE_SWIGLU_NAME emu_moe_swiglu
#define H3_MOE_COMBINE_AT_NAME emu_moe_combine_at
#include "m31_moe.cu"
} // namespace moe_k

#include "cuda_m31_router_shape.h" /* the launcher's shape and ROUTER_* */
static_assert(ROUTER_THREADS == H3M_RF_THREADS && ROUTER_ROWS == H3M_RF_ROWS && ROUTER_EPW == H3M_RF_EPW &&
                  ROUTER_SEG == H3M_RF_SEG && ROUTER_KMAX == H3M_RF_KMAX,
              "cuda_m31_router_shape.h must equal m31_moe.cu's H3M_RF_*");

/* The rows of each expert as moe's route lists them: t * 16 + the first slot of row t naming
   e, ascending rows. */
static void host_route(const int *ids, int64_t T, int k, int64_t E, std::vector<int> &lists,
                       std::vector<int> &counts) {
  lists.assign((size_t)(E * T), -1);
  counts.assign((size_t)E, 0);
  for (int64_t t = 0; t < T; t++)
    for (int s = 0; s < k; s++) {
      int e = ids[t * k + s];
      bool first = true;
      for (int q = 0; q < s; q++) first = first && ids[t * k + q] != e;
      if (first) lists[(size_t)(e * T + counts[(size_t)e]++)] = (int)(t * 16 + s);
    }
}

/* The lists' live entries equal (entries past an expert's count are not compared). */
static bool same_route(const std::vector<int> &la, const std::vector<int> &ca, const int *lb,
                       const int *cb, int64_t T, int64_t E) {
  for (int64_t e = 0; e < E; e++) {
    if (ca[(size_t)e] != cb[e]) return false;
    for (int i = 0; i < ca[(size_t)e]; i++)
      if (la[(size_t)(e * T + i)] != lb[e * T + i]) return false;
  }
  return true;
}

/* ---- router_topk ---------------------------------------------------------------------- */
/* The router op's module: h bf16 [T, H], w f32 [E, H], bias f32 [E] -> ids, weights. */
static h3_module *router_module(int64_t T, int64_t H, int E, int k) {
  std::string text = "module @m config \"test\" {\n  graph @g(%h: " + ty("bf16", {T, H}) + ", %w: " +
                     ty("f32", {E, H}) + ", %b: " + ty("f32", {E}) + ") -> (ids: " + ty("i32", {T, k}) +
                     ") {\n    %ids, %wts = router_topk(%h, %w, %b) {k = " + std::to_string(k) +
                     ", scale = 2.0} : " + ty("i32", {T, k}) + ", " + ty("f32", {T, k}) +
                     "\n    return %ids\n  }\n}\n";
  h3_module *m = parse(text);
  CHECK(m, "router IR");
  return m;
}

/* Random router inputs: h in [-1, 1], w in +-2 / sqrt(H) (logits of about unit size), bias in
 * +-0.1; expert E - 1 a copy of expert 1 (rows and bias: an exact tie, the lower id wins).
 * Then each row whose k-th and (k+1)-th largest s + bias (s from double sums) lie closer than
 * 1e-4 but apart is drawn again. */
static void router_inputs(std::vector<buf> &in, int64_t T, int64_t H, int E, int k) {
  fill_random(in[0], -1, 1);
  fill_random(in[1], -2 / std::sqrt((double)H), 2 / std::sqrt((double)H));
  fill_random(in[2], -0.1, 0.1);
  float *w = (float *)in[1].p(), *b = (float *)in[2].p();
  if (E > 2) {
    memcpy(w + (E - 1) * H, w + H, (size_t)H * 4);
    b[E - 1] = b[1];
  }
  h3_bf16 *h = (h3_bf16 *)in[0].p();
  for (int64_t t = 0; t < T; t++)
    for (int tries = 0;; tries++) {
      std::vector<double> v((size_t)E);
      for (int e = 0; e < E; e++) {
        double dot = 0;
        for (int64_t i = 0; i < H; i++) dot += (double)__bfloat162float(h[t * H + i]) * w[e * H + i];
        v[(size_t)e] = 1 / (1 + std::exp(-dot)) + b[e];
      }
      std::sort(v.begin(), v.end(), std::greater<double>());
      double gap = k < E ? v[(size_t)k - 1] - v[(size_t)k] : 1;
      if (gap == 0 || gap > 1e-4 || tries == 20) break;
      for (int64_t i = 0; i < H; i++) h[t * H + i] = __float2bfloat16_rn((float)(2 * urand() - 1));
    }
}

/* The one-launch router as cu_m31_run_router runs it for rows [t0, t0 + T) of h (ids and
 * weights of those rows). part and cnt: the scratch (cnt must be 0). */
static void router_launch(const std::vector<buf> &in, int64_t t0, int64_t T, int64_t H, int E, int k,
                          std::vector<float> &part, std::vector<unsigned> &cnt, int *ids, float *wts) {
  int rows, epw;
  h3cu_router_shape(T, &rows, &epw);
  long long TT = T, HH = H;
  const h3_bf16 *h = (const h3_bf16 *)in[0].bytes.data() + t0 * H;
  const float *w = (const float *)in[1].bytes.data(), *b = (const float *)in[2].bytes.data();
  emu_launch3((T + rows - 1) / rows, (H + ROUTER_SEG - 1) / ROUTER_SEG, (E + 8 * epw - 1) / (8 * epw), ROUTER_THREADS, [&] {
    router_k::emu_router_fused(h, w, b, part.data(), cnt.data(), ids, wts, TT, HH, E, k, 2.0f, rows, epw);
  });
}

static void test_router(int64_t T, int64_t H, int E, int k) {
  h3_module *m = router_module(T, H, E, k);
  if (!m) return;
  const h3_op *op = first_op(m);
  std::vector<buf> in;
  for (int i = 0; i < 3; i++) in.push_back(make(op->operands[i]->type));
  router_inputs(in, T, H, E, k);
  std::vector<buf> want = cpu_run(op, in);
  char what[128];
  snprintf(what, sizeof what, "router T %lld H %lld E %d k %d", (long long)T, (long long)H, E, k);
  std::string w = what;
  if (k > ROUTER_KMAX) { /* the scores, then the selection: grids of cu_m31_run_router */
    buf ids = make(op->results[0]->type), wts = make(op->results[1]->type);
    std::vector<float> scores((size_t)(T * E), NAN);
    long long TT = T, HH = H;
    emu_launch3((T + H3M_ROUTER_ROWS - 1) / H3M_ROUTER_ROWS, E, 1, H3M_ROUTER_THREADS, [&] {
      router_k::emu_router_score((const h3_bf16 *)in[0].p(), (const float *)in[1].p(), scores.data(), TT,
                                 HH, E);
    });
    emu_launch3(T, 1, 1, 32, [&] {
      router_k::emu_router(scores.data(), (const float *)in[2].p(), (int *)ids.p(), (float *)wts.p(), E, k,
                           2.0f);
    });
    compare((w + " ids (scores, selection)").c_str(), ids, want[0], 0);
    compare((w + " weights").c_str(), wts, want[1], 1e-10);
    h3_module_free(m);
    return;
  }
  const int64_t S = (H + ROUTER_SEG - 1) / ROUTER_SEG;
  std::vector<float> part((size_t)(S * T * E), NAN); /* poisoned: every read entry is written */
  std::vector<unsigned> cnt((size_t)T, 0u);
  buf ids[2] = {make(op->results[0]->type), make(op->results[0]->type)};
  buf wts[2] = {make(op->results[1]->type), make(op->results[1]->type)};
  for (int run = 0; run < 2; run++) {
    router_launch(in, 0, T, H, E, k, part, cnt, (int *)ids[run].p(), (float *)wts[run].p());
    CHECK(std::all_of(cnt.begin(), cnt.end(), [](unsigned v) { return v == 0; }), "%s: counters not reset",
          what);
  }
  compare((w + " ids").c_str(), ids[0], want[0], 0);
  compare((w + " weights").c_str(), wts[0], want[1], 1e-10);
  CHECK(ids[0].bytes == ids[1].bytes && wts[0].bytes == wts[1].bytes, "%s: a second launch differs", what);
  /* a row's bits do not depend on the batch: rows alone (T = 1) */
  int bad = 0;
  for (int64_t t = 0; t < T; t += T > 8 ? T / 5 : 1) {
    std::vector<float> p1((size_t)(S * E), NAN);
    std::vector<unsigned> c1(1, 0u);
    int id1[ROUTER_KMAX];
    float w1[ROUTER_KMAX];
    router_launch(in, t, 1, H, E, k, p1, c1, id1, w1);
    bad += memcmp(id1, (const int *)ids[0].p() + t * k, (size_t)k * 4) != 0 ||
           memcmp(w1, (const float *)wts[0].p() + t * k, (size_t)k * 4) != 0;
  }
  CHECK(bad == 0, "%s: %d rows alone differ from the batch's bits", what, bad);
  h3_module_free(m);
}

/* NaN scores select as the reference's scan does: experts 0..2 first (bias 10), expert 3 of
 * a NaN weight (v NaN in every row: taken in round 4, where it is the lowest untaken id),
 * expert 9 of a NaN weight (never), row 1 all NaN (h NaN: ids 0..3). */
static void test_router_nan(void) {
  const int64_t T = 3, H = 256;
  const int E = 32, k = 4;
  h3_module *m = router_module(T, H, E, k);
  if (!m) return;
  const h3_op *op = first_op(m);
  std::vector<buf> in;
  for (int i = 0; i < 3; i++) in.push_back(make(op->operands[i]->type));
  router_inputs(in, T, H, E, k);
  float *w = (float *)in[1].p(), *b = (float *)in[2].p();
  for (int e = 0; e < 3; e++) b[e] = 10;
  w[3 * H + 17] = NAN, w[9 * H + 200] = NAN;
  ((h3_bf16 *)in[0].p())[1 * H + 40] = __float2bfloat16_rn(NAN);
  std::vector<buf> want = cpu_run(op, in);
  std::vector<float> part((size_t)(T * E), NAN);
  std::vector<unsigned> cnt((size_t)T, 0u);
  buf ids = make(op->results[0]->type), wts = make(op->results[1]->type);
  router_launch(in, 0, T, H, E, k, part, cnt, (int *)ids.p(), (float *)wts.p());
  compare("router NaN scores ids", ids, want[0], 0);
  compare("router NaN scores weights", wts, want[1], 1e-10);
  h3_module_free(m);
}

/* ---- route ----------------------------------------------------------------------------- */
static void test_route(int64_t T, int k, int64_t E) {
  std::vector<int> ids((size_t)(T * k));
  for (int64_t t = 0; t < T; t++)
    for (int s = 0; s < k; s++) /* every fifth row repeats its first id in its last slot */
      ids[(size_t)(t * k + s)] = t % 5 == 0 && s == k - 1 ? ids[(size_t)(t * k)] : (int)(urand() * (double)E);
  std::vector<int> want_l, want_c, lists((size_t)(E * T), -1), counts((size_t)E, -1);
  host_route(ids.data(), T, k, E, want_l, want_c);
  long long TT = T;
  emu_launch3(E, 1, 1, 256, [&] { moe_k::emu_moe_route(ids.data(), lists.data(), counts.data(), TT, k); });
  CHECK(same_route(want_l, want_c, lists.data(), counts.data(), T, E), "route T %lld k %d E %lld differs",
        (long long)T, k, (long long)E);
  fprintf(stderr, "  route T %lld k %d E %lld (%.1f s)\n", (long long)T, k, (long long)E, elapsed());
}

/* ---- combine --------------------------------------------------------------------------- */
/* ids [T, k] (repeats in every third row), weights, y [T k, H] bf16 at random; out against the
 * host's sum in ascending expert order from 0, bitwise. */
static void test_combine(int64_t T, int64_t H, int k, int64_t E) {
  std::vector<int> ids((size_t)(T * k));
  std::vector<float> wts((size_t)(T * k)), out((size_t)(T * H), NAN), want((size_t)(T * H));
  std::vector<h3_bf16> y((size_t)(T * k * H));
  for (auto &v : wts) v = (float)urand();
  for (auto &v : y) v = __float2bfloat16_rn((float)(4 * urand() - 2));
  for (int64_t t = 0; t < T; t++)
    for (int s = 0; s < k; s++)
      ids[(size_t)(t * k + s)] =
          t % 3 == 0 && s > 0 ? ids[(size_t)(t * k + s - 1)] : (int)(urand() * (double)E);
  for (int64_t t = 0; t < T; t++) {
    const int *row = ids.data() + t * k;
    int last = -1;
    std::vector<float> acc((size_t)H, 0.0f);
    for (;;) { /* the smallest id above last, its first slot */
      int bi = -1;
      for (int s = 0; s < k; s++)
        if (row[s] > last && (bi < 0 || row[s] < row[bi])) bi = s;
      if (bi < 0) break;
      last = row[bi];
      for (int64_t o = 0; o < H; o++)
        acc[(size_t)o] += wts[(size_t)(t * k + bi)] * __bfloat162float(y[(size_t)((t * k + bi) * H + o)]);
    }
    std::copy(acc.begin(), acc.end(), want.begin() + t * H);
  }
  long long HH = H;
  emu_launch3(T, (H + 2047) / 2048, 1, 256, [&] { /* cu_m31_run_moe's grid */
    moe_k::emu_moe_combine(ids.data(), wts.data(), y.data(), out.data(), HH, k);
  });
  int64_t bad = 0;
  for (size_t i = 0; i < out.size(); i++) bad += memcmp(&out[i], &want[i], 4) != 0;
  CHECK(bad == 0, "combine T %lld H %lld k %d: %lld of %lld outputs differ", (long long)T, (long long)H, k,
        (long long)bad, (long long)out.size());
  fprintf(stderr, "  combine T %lld H %lld k %d: %lld differ (%.1f s)\n", (long long)T, (long long)H, k,
          (long long)bad, elapsed());
}

/* ---- moe at decode shapes ---------------------------------------------------------------- */
/* router_topk (one launch) -> moe as cu_m31_run_moe runs it on the tensor-core GEMVs (one row:
 * a block per slot; more: the route kernel's lists) -> combine, against the CPU's moe of the
 * router's ids and weights. */
static void test_decode_moe(int64_t T, int64_t H, int64_t F, int E, int k) {
  h3_module *rm = router_module(T, H, E, k);
  moe_case c;
  if (!rm || !make_moe_case(c, T, H, F, E, k, false, -1)) return;
  const h3_op *rop = first_op(rm);
  std::vector<buf> rin;
  for (int i = 0; i < 3; i++) rin.push_back(make(rop->operands[i]->type));
  router_inputs(rin, T, H, E, k);
  c.in[0].bytes = rin[0].bytes; /* the same rows */
  std::vector<buf> rwant = cpu_run(rop, rin);
  const int64_t S = (H + ROUTER_SEG - 1) / ROUTER_SEG;
  std::vector<float> part((size_t)(S * T * E), NAN);
  std::vector<unsigned> cnt((size_t)T, 0u);
  router_launch(rin, 0, T, H, E, k, part, cnt, (int *)c.in[3].p(), (float *)c.in[4].p());
  char what[128];
  snprintf(what, sizeof what, "router -> moe T %lld H %lld F %lld E %d k %d", (long long)T, (long long)H,
           (long long)F, E, k);
  compare((std::string(what) + " ids").c_str(), c.in[3], rwant[0], 0);
  std::vector<buf> want = cpu_run(c.op, c.in);
  long long TT = T, HH = H, FF = F;
  buf out = make(c.op->results[0]->type);
  std::vector<h3_bf16> act((size_t)(T * k * F)), y((size_t)(T * k * H));
  const h3_bf16 *h = (const h3_bf16 *)c.in[0].p(), *gu = (const h3_bf16 *)c.in[1].p();
  const h3_bf16 *dn = (const h3_bf16 *)c.in[2].p();
  long long EE = E;
  const int *ids = (const int *)c.in[3].p();
  std::vector<int> lists((size_t)(E * T), -7), counts((size_t)E, -7);
  const bool by_slot = T == 1;
  if (!by_slot) emu_launch3(E, 1, 1, 256, [&] { moe_k::emu_moe_route(ids, lists.data(), counts.data(), TT, k); });
  const int *rl = by_slot ? nullptr : lists.data();
  emu_launch3(by_slot ? k : E, F / 16, 1, H3M_MMA_THREADS, [&] {
    moe_k::emu_moe_mma(h, gu, rl, counts.data(), ids, act.data(), TT, HH, FF, EE, k, 1.702f, 7.0f);
  });
  emu_launch3(by_slot ? k : E, H / 32, 1, H3M_MMA_THREADS, [&] {
    moe_k::emu_moe_mma_down(dn, rl, counts.data(), ids, act.data(), y.data(), TT, HH, FF, EE, k);
  });
  emu_launch3(T, (H + 2047) / 2048, 1, 256, [&] {
    moe_k::emu_moe_combine((const int *)c.in[3].p(), (const float *)c.in[4].p(), y.data(), (float *)out.p(), HH,
                           k);
  });
  compare(what, out, want[0], 1e-5);
  h3_module_free(c.m);
  h3_module_free(rm);
}

/* ---- the cuBLASLt form's gather, activation and combine --------------------------------- */
/* Random ids (repeats in every fourth row), h [T, H] and y [T k, H] bf16: the route and the
 * gather as cuda_m31_moe_lt.c launches them; xs row at[t k + s] == h row t for every listed
 * slot; y moved to those rows, the combine through `at` == the combine of y, bitwise; the
 * activation of u [T k, 2F] against the host's. */
static void test_lt_kernels(int64_t T, int64_t H, int64_t F, int k, int64_t E) {
  std::vector<int> ids((size_t)(T * k)), lists((size_t)(E * T), -1), counts((size_t)E, -1);
  std::vector<int> at((size_t)(T * k), 0);
  for (int64_t t = 0; t < T; t++)
    for (int s = 0; s < k; s++)
      ids[(size_t)(t * k + s)] = t % 4 == 0 && s > 0 ? ids[(size_t)(t * k)] : (int)(urand() * (double)E);
  std::vector<h3_bf16> h((size_t)(T * H)), xs((size_t)(T * k * H)), y((size_t)(T * k * H)),
      ys((size_t)(T * k * H));
  std::vector<float> wts((size_t)(T * k)), out((size_t)(T * H), NAN), want((size_t)(T * H), NAN);
  for (auto &v : h) v = __float2bfloat16_rn((float)(4 * urand() - 2));
  for (auto &v : y) v = __float2bfloat16_rn((float)(4 * urand() - 2));
  for (auto &v : wts) v = (float)urand();
  long long TT = T, HH = H, FF = F;
  emu_launch3(E, 1, 1, 256, [&] { moe_k::emu_moe_route(ids.data(), lists.data(), counts.data(), TT, k); });
  emu_launch3(E, 3, 1, 256, [&] {
    moe_k::emu_moe_gather(h.data(), lists.data(), counts.data(), xs.data(), at.data(), TT, HH, k);
  });
  int64_t bad = 0, rows = 0;
  for (int64_t e = 0; e < E; e++)
    for (int i = 0; i < counts[(size_t)e]; i++, rows++) {
      int entry = lists[(size_t)(e * T + i)], slot = entry / 16 * k + entry % 16;
      bad += at[(size_t)slot] != rows ||
             memcmp(&xs[(size_t)(rows * H)], &h[(size_t)(entry / 16 * H)], (size_t)H * 2) != 0;
      std::copy(y.begin() + slot * H, y.begin() + (slot + 1) * H, ys.begin() + rows * H);
    }
  CHECK(bad == 0, "gather T %lld H %lld k %d E %lld: %lld rows wrong", (long long)T, (long long)H, k,
        (long long)E, (long long)bad);
  emu_launch3(T, (H + 2047) / 2048, 1, 256, [&] {
    moe_k::emu_moe_combine(ids.data(), wts.data(), y.data(), want.data(), HH, k);
  });
  emu_launch3(T, (H + 2047) / 2048, 1, 256, [&] {
    moe_k::emu_moe_combine_at(ids.data(), wts.data(), ys.data(), at.data(), out.data(), HH, k);
  });
  int64_t differ = 0;
  for (size_t i = 0; i < out.size(); i++) differ += memcmp(&out[i], &want[i], 4) != 0;
  CHECK(differ == 0, "combine through the gathered rows: %lld of %lld outputs differ", (long long)differ,
        (long long)out.size());
  std::vector<h3_bf16> u((size_t)(rows * 2 * F)), act((size_t)(rows * F));
  for (auto &v : u) v = __float2bfloat16_rn((float)(20 * urand() - 10)); /* past the clamps too */
  const float alpha = 1.702f, limit = 7.0f;
  long long n = rows;
  emu_launch3(5, 1, 1, 256, [&] { moe_k::emu_moe_swiglu(u.data(), act.data(), n, FF, alpha, limit); });
  int64_t off = 0;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t f = 0; f < F; f++) {
      double g = std::min((double)__bfloat162float(u[(size_t)(r * 2 * F + f)]), (double)limit);
      double v = std::max(std::min((double)__bfloat162float(u[(size_t)(r * 2 * F + F + f)]), 7.0), -7.0);
      double x = g / (1 + exp(-alpha * g)) * (v + 1), a = __bfloat162float(act[(size_t)(r * F + f)]);
      off += !(fabs(a - x) <= 1e-2 * fabs(x) + 1e-6); /* act is bf16: 2^-8 relative */
    }
  CHECK(off == 0, "activation: %lld of %lld outputs off", (long long)off, (long long)(rows * F));
  fprintf(stderr, "  cuBLASLt form's kernels T %lld H %lld F %lld k %d E %lld: %lld rows (%.1f s)\n",
          (long long)T, (long long)H, (long long)F, k, (long long)E, (long long)rows, elapsed());
}

int main(void) {
  elapsed();
  /* one expert per warp (T <= 64): */
  test_router(1, 2048, 32, 4);   /* decode: one row, 2 segments x 4 expert blocks */
  test_router(3, 6144, 32, 4);   /* the model's width: 6 segments */
  test_router(64, 1024, 32, 4);  /* 16 row groups of 4, the route */
  test_router(5, 64, 8, 2);      /* a partial segment and chunk, small E / k */
  test_router(3, 60, 8, 3);      /* element loads: H not a multiple of 8 */
  test_router(2, 520, 12, 3);    /* 2 expert blocks, one partial */
  test_router(7, 256, 32, 16);   /* the most experts per row of the one-launch form */
  test_router(1, 6144, 128, 4);  /* the full model's 128 experts: 16 expert blocks x 6 segments */
  test_router(2, 9300, 16, 4);   /* 10 segments: the last block reads the partials 8, then 2 */
  /* 4 experts per warp (T > 64): */
  test_router(200, 2048, 32, 4); /* 12 rows per block, a partial last group, no route */
  test_router(70, 520, 40, 4);   /* 2 expert blocks, one partial; partial segments */
  test_router(3, 256, 32, 20);   /* k > 16: scores, then the selection */
  test_router_nan();
  test_route(1, 4, 32);
  test_route(3, 4, 32);
  test_route(64, 4, 32);
  test_route(200, 4, 32);
  test_route(2048, 4, 32); /* 8 rows per thread */
  test_route(700, 3, 8);   /* a partial last range */
  test_combine(1, 6144, 4, 32);
  test_combine(3, 6144, 4, 32);
  test_combine(64, 512, 4, 32);
  test_combine(200, 100, 4, 32); /* 8 outputs per thread past H */
  test_combine(5, 300, 6, 8);    /* k > 4: each term's y after its id is found */
  test_combine(4, 64, 2, 8);
  test_lt_kernels(300, 256, 128, 4, 8);
  test_lt_kernels(97, 64, 64, 2, 4);
  test_decode_moe(1, 128, 128, 32, 4);
  test_decode_moe(3, 256, 128, 32, 4);
  test_decode_moe(64, 128, 128, 32, 4);
  return check_summary("m31_moe_emu");
}
