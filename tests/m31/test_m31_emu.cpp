/* test_m31_emu.cpp: MiniMax-M3.1's hand kernels (kernels/m31_moe.cu, kernels/m31_msa.cu) run
 * on the host under tests/codegen/host_emu.h (a thread per CUDA thread, barriers for
 * __syncthreads and the shuffles), launched as runtime/cuda/cuda_m31.c launches them, and
 * compared with the CPU backend's ops (h3_cpu_run_op) on random inputs:
 *   router_topk   ids equal, weights within 1e-6 NMSE;
 *   markov_draft  the chains in lock step (more sequences than a pass takes, rows of 16-byte
 *                 vectors or elements, r not a multiple of 4, the model's r = 256; ties):
 *                 z bitwise, drafts equal; the tensor-core form (H3_MARKOV_MMA_NAME, 16
 *                 sequences and more, partial m-tiles and last blocks, w2 in several stages)
 *                 on Gaussian inputs: z
 *                 within 1e-5 of each row's largest |z|, drafts equal wherever the CPU's
 *                 winner leads by more than that (a chain is followed up to a closer call);
 *                 with ties (w2 zero, z = base) bitwise;
 *   moe           expert ids with repeats in a row (counted once), more rows per expert
 *                 than one pass takes (H3M_ROWS), rows of 8-element vectors and odd widths;
 *   paged / sparse / block attention: scrambled page tables, GQA groups of 2 and 16, head
 *                 dims 16 and 128, several key splits (the combine); the tensor-core form with
 *                 4 and 8 warps per block, 1 to 32 splits combined in the launch (partials
 *                 poisoned; the counters back at 0 and a second launch bitwise the same), a
 *                 sparse row that selects no block;
 *   index_topk    both score kernels (rows of one table, then the select kernel; rows of any
 *                 table selecting in the same launch, run twice): the scores bitwise (the
 *                 reference's order), the selections equal (ties, partial head groups, odd
 *                 head dims, blocks of several pages and key tiles, more blocks than topk);
 * the paged ops also with a page table per row (a batch of sequences) or per group of rows
 * (a batched verify: [R, NP], row t reads table t / (T / R)); a paged op of no rows runs on
 * the CPU with one table.
 * Float results within a bf16-level NMSE (1e-4; f32 moe 1e-5): the kernels sum in another
 * order than the reference.
 */
#include "emu_harness.h"

#include <algorithm>

namespace router_k {
#define H_T h3_bf16
#define W_T float
#define B_T float
#define I_T int
#define O_T float
#define H3_ROUTER_NAME emu_router
#define H3_ROUTER_SCORE_NAME emu_router_score
#include "m31_moe.cu"
#undef H3_ROUTER_NAME
#undef H3_ROUTER_SCORE_NAME
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
#define H3_MOE_NAME emu_moe
#define H3_MOE_DOWN_NAME emu_moe_down
#define H3_MOE_COMBINE_NAME emu_moe_combine
#define H3_MOE_ROUTE_NAME emu_moe_route
#define H3_MOE_MMA_NAME emu_moe_mma
#define H3_MOE_MMA_DOWN_NAME emu_moe_mma_down
#include "m31_moe.cu"
#undef O_T
} // namespace moe_k

namespace spec_k { /* spec_accept (the types that matter: I_T) */
#undef H3_MOE_NAME
#undef H3_MOE_DOWN_NAME
#undef H3_MOE_COMBINE_NAME
#undef H3_MOE_ROUTE_NAME
#undef H3_MOE_MMA_NAME
#undef H3_MOE_MMA_DOWN_NAME
#define O_T float
#define H3_SPEC_ACCEPT_NAME emu_spec_accept
#define H3_SPEC_TOP2_NAME emu_spec_top2
#include "m31_moe.cu"
#undef H3_SPEC_ACCEPT_NAME
#undef H3_SPEC_TOP2_NAME
#undef O_T
} // namespace spec_k

namespace markov_k { /* markov_draft: bf16 w1 / w2, f32 base and z */
#define O_T float
#define H3_MARKOV_STEP_NAME emu_markov_step
#define H3_MARKOV_MMA_NAME emu_markov_mma
#define H3_MARKOV_PICK_NAME emu_markov_pick
#include "m31_moe.cu"
#undef H3_MARKOV_STEP_NAME
#undef H3_MARKOV_MMA_NAME
#undef H3_MARKOV_PICK_NAME
#undef O_T
} // namespace markov_k

#define Q_T h3_bf16
#define K_T h3_bf16
#define IX_T int
namespace att11 { /* head dims <= 32, groups <= 4; and index_topk */
#define O_T h3_bf16
#define H3M_DC 1
#define H3M_HPW 1
#define H3_KV_ATT_NAME att11_att
#define H3_KV_COMBINE_NAME att11_combine
#define H3_TOPK_SCORE_NAME att11_score
#define H3_TOPK_ROWS_NAME att11_rows
#define H3_TOPK_NAME att11_select
#include "m31_msa.cu"
#undef H3M_DC
#undef H3M_HPW
#undef H3_KV_ATT_NAME
#undef H3_KV_COMBINE_NAME
#undef H3_TOPK_SCORE_NAME
#undef H3_TOPK_ROWS_NAME
#undef H3_TOPK_NAME
} // namespace att11
namespace att44 { /* head dims <= 128, groups <= 16; the tensor-core form */
#define H3M_DC 4
#define H3M_HPW 4
#define H3_KV_ATT_NAME att44_att
#define H3_KV_ATT_MMA_NAME att44_mma
#define H3_KV_COMBINE_NAME att44_combine
#include "m31_msa.cu"
} // namespace att44

/* ---- router_topk ---------------------------------------------------------------------- */
static void test_router(int64_t T, int64_t H, int E, int k) {
  std::string text = "module @m config \"test\" {\n  graph @g(%h: " + ty("bf16", {T, H}) + ", %w: " +
                     ty("f32", {E, H}) + ", %b: " + ty("f32", {E}) + ") -> (ids: " + ty("i32", {T, k}) +
                     ") {\n    %ids, %wts = router_topk(%h, %w, %b) {k = " + std::to_string(k) +
                     ", scale = 2.0} : " + ty("i32", {T, k}) + ", " + ty("f32", {T, k}) +
                     "\n    return %ids\n  }\n}\n";
  h3_module *m = parse(text);
  CHECK(m, "router IR");
  if (!m) return;
  const h3_op *op = first_op(m);
  std::vector<buf> in;
  for (int i = 0; i < 3; i++) in.push_back(make(op->operands[i]->type)), fill_random(in.back(), -1, 1);
  std::vector<buf> want = cpu_run(op, in);
  buf ids = make(op->results[0]->type), wts = make(op->results[1]->type);
  long long TT = T, HH = H;
  std::vector<float> scores((size_t)(T * E));
  emu_launch3((T + H3M_ROUTER_ROWS - 1) / H3M_ROUTER_ROWS, E, 1, H3M_ROUTER_THREADS, [&] {
    router_k::emu_router_score((const h3_bf16 *)in[0].p(), (const float *)in[1].p(), scores.data(), TT,
                               HH, E);
  });
  emu_launch3(T, 1, 1, 32, [&] {
    router_k::emu_router(scores.data(), (const float *)in[2].p(), (int *)ids.p(), (float *)wts.p(), E, k,
                         2.0f);
  });
  char what[96];
  snprintf(what, sizeof what, "router T %lld H %lld E %d k %d ids", (long long)T, (long long)H, E, k);
  compare(what, ids, want[0], 0);
  snprintf(what, sizeof what, "router T %lld H %lld E %d k %d weights", (long long)T, (long long)H, E, k);
  compare(what, wts, want[1], 1e-6);
  h3_module_free(m);
}

/* ---- moe --------------------------------------------------------------------------------- */
/* cu_m31_run_moe's one-row form of the tensor-core GEMVs (no route, a block per slot) against
 * the route's y (want, [k, H]): every row the route computed bitwise equal, as ids are given
 * and with slots that name no expert (-1, E) or repeat one (their rows stay unwritten). */
static void check_moe_by_slot(const h3_bf16 *h, const h3_bf16 *gu, const h3_bf16 *dn, const int *ids,
                              const std::vector<h3_bf16> &want, int64_t H, int64_t F, int64_t E, int k) {
  std::vector<int> odd(ids, ids + k);
  if (k >= 4) odd[1] = -1, odd[2] = (int)E, odd[3] = odd[0];
  for (int pass = 0; pass < 2; pass++) {
    const int *id = pass ? odd.data() : ids;
    const h3_bf16 fill = __float2bfloat16_rn(-3.0f);
    std::vector<h3_bf16> act((size_t)(k * F), fill), y((size_t)(k * H), fill);
    long long T1 = 1, HH = H, FF = F, EE = E;
    emu_launch3(k, F / 16, 1, H3M_MMA_THREADS, [&] {
      moe_k::emu_moe_mma(h, gu, nullptr, nullptr, id, act.data(), T1, HH, FF, EE, k, 1.702f, 7.0f);
    });
    emu_launch3(k, H / 32, 1, H3M_MMA_THREADS, [&] {
      moe_k::emu_moe_mma_down(dn, nullptr, nullptr, id, act.data(), y.data(), T1, HH, FF, EE, k);
    });
    int64_t bad = 0;
    for (int s = 0; s < k; s++) {
      bool first = id[s] >= 0 && id[s] < E;
      for (int r = 0; r < s; r++) first &= id[r] != id[s];
      /* a first slot of an expert: the route's row of that expert's first slot in ids */
      int ws = -1;
      for (int r = 0; first && r < k && ws < 0; r++)
        if (ids[r] == id[s]) ws = r;
      for (int64_t o = 0; o < H; o++) {
        const h3_bf16 got = y[(size_t)(s * H + o)];
        const h3_bf16 exp = first && ws >= 0 ? want[(size_t)(ws * H + o)] : fill;
        bad += (first && ws < 0) ? 0 : memcmp(&got, &exp, 2) != 0;
      }
    }
    CHECK(bad == 0, "moe mma by slot (%s ids) H %lld F %lld E %lld k %d: %lld outputs differ from the route's",
          pass ? "odd" : "the case's", (long long)H, (long long)F, (long long)E, k, (long long)bad);
  }
}

/* cores: 1 the CUDA-core kernels, 2 the tensor-core ones (widths multiples of 128), 3 both. */
static void test_moe(int64_t T, int64_t H, int64_t F, int64_t E, int k, bool repeats, int cores) {
  moe_case c;
  if (!make_moe_case(c, T, H, F, E, k, repeats, -1)) return;
  h3_module *m = c.m;
  const h3_op *op = c.op;
  std::vector<buf> &in = c.in;
  std::vector<buf> want = cpu_run(op, in);
  long long TT = T, HH = H, FF = F, EE = E;
  int vh = H % 8 == 0, vf = F % 8 == 0;
  const h3_bf16 *h = (const h3_bf16 *)in[0].p(), *gu = (const h3_bf16 *)in[1].p();
  const h3_bf16 *dn = (const h3_bf16 *)in[2].p();
  const int *ids = (const int *)in[3].p();
  for (int mma = 0; mma < 2; mma++) { /* CUDA cores; tensor cores where the widths allow */
    if ((mma && (H % 128 || F % 128)) || !(cores & (1 << mma))) continue;
    buf out = make(op->results[0]->type);
    std::vector<h3_bf16> act((size_t)(T * k * F)), y((size_t)(T * k * H));
    std::vector<int> lists((size_t)(E * T)), counts((size_t)E);
    emu_launch3(E, 1, 1, 256, [&] { moe_k::emu_moe_route(ids, lists.data(), counts.data(), TT, k); });
    if (mma) {
      emu_launch3(E, F / 16, 1, H3M_MMA_THREADS, [&] {
        moe_k::emu_moe_mma(h, gu, lists.data(), counts.data(), ids, act.data(), TT, HH, FF, EE, k, 1.702f, 7.0f);
      });
      emu_launch3(E, H / 32, 1, H3M_MMA_THREADS, [&] {
        moe_k::emu_moe_mma_down(dn, lists.data(), counts.data(), ids, act.data(), y.data(), TT, HH, FF, EE, k);
      });
      if (T == 1) check_moe_by_slot(h, gu, dn, ids, y, H, F, E, k);
    } else {
      emu_launch3(E, (F + 15) / 16, 1, 256, [&] {
        moe_k::emu_moe(h, gu, lists.data(), counts.data(), act.data(), TT, HH, FF, k, 1.702f, 7.0f, vh);
      });
      emu_launch3(E, (H + 15) / 16, 1, 256, [&] {
        moe_k::emu_moe_down(dn, lists.data(), counts.data(), act.data(), y.data(), TT, HH, FF, k, vf);
      });
    }
    emu_launch3(T, (H + 255) / 256, 1, 256, [&] {
      moe_k::emu_moe_combine(ids, (const float *)in[4].p(), y.data(), (float *)out.p(), HH, k);
    });
    char what[96];
    snprintf(what, sizeof what, "moe%s T %lld H %lld F %lld E %lld k %d%s", mma ? " mma" : "",
             (long long)T, (long long)H, (long long)F, (long long)E, k, repeats ? " (repeats)" : "");
    compare(what, out, want[0], 1e-5); /* a bf16 rounding of u or y flipped by the sum order
                                          moves its row by one bf16 ulp (the widths are small) */
  }
  h3_module_free(m);
}

/* ---- markov_draft ------------------------------------------------------------------------ */
static double gauss(void) { /* N(0, 1), never 0 */
  return std::sqrt(-2.0 * std::log(1.0 - urand())) * std::cos(6.283185307179586 * urand()) + 1e-30;
}

/* The mma form's z and drafts against the CPU's (want), chain by chain: each step's z within
 * tol of the row's largest |z| (finite), its draft equal unless the CPU's winner leads the
 * GPU's pick by no more than that (then the chains part: the rest of that chain unchecked). */
static void compare_markov_mma(const char *what, const buf &z, const buf &dr, const std::vector<buf> &want,
                               int64_t S, int64_t G, int64_t V) {
  const double tol = 1e-5;
  double worst = 0;
  int64_t parted = 0, bad = 0;
  for (int64_t s = 0; s < S; s++)
    for (int64_t k = 0; k < G; k++) {
      int64_t row = s * G + k;
      double scale = 0;
      for (int64_t v = 0; v < V; v++) scale = std::max(scale, std::fabs(ld(want[0], row * V + v)));
      for (int64_t v = 0; v < V; v++) {
        double a = ld(z, row * V + v), b = ld(want[0], row * V + v);
        bad += !std::isfinite(a) || std::fabs(a - b) > tol * scale;
        worst = std::max(worst, std::fabs(a - b) / scale);
      }
      int64_t dc = (int64_t)ld(want[1], row), dg = (int64_t)ld(dr, row);
      if (dc == dg) continue;
      bool close = dg >= 0 && dg < V && ld(want[0], row * V + dc) - ld(want[0], row * V + dg) <= tol * scale;
      bad += !close, parted += close;
      break;
    }
  fprintf(stderr, "  %-40s worst |dz| / max|z| %.3g, %lld chains parted at a close call (%.1f s)\n", what, worst,
          (long long)parted, elapsed());
  CHECK(bad == 0, "%s: %lld values or drafts outside the tolerance", what, (long long)bad);
}

/* S chains of G steps over V tokens, rank r, launched as cu_m31_run_markov launches them
 * (mma: the tensor-core step, on Gaussian inputs unless ties). ties: w2 zero and base in {0,
 * 1, 2} (z = base: the first argmax among many equal ones). */
static void test_markov(int64_t S, int64_t G, int64_t V, int r, bool ties, bool mma = false) {
  std::string prev = S == 1 ? std::string("i32[]") : ty("i32", {S});
  std::string text = "module @m config \"test\" {\n  graph @g(%b: " + ty("f32", {S * G, V}) + ", %w1: " +
                     ty("bf16", {V, r}) + ", %w2: " + ty("bf16", {V, r}) + ", %p: " + prev +
                     ") -> (d: " + ty("i32", {S * G}) + ") {\n    %z, %d = markov_draft(%b, %w1, %w2, %p) : " +
                     ty("f32", {S * G, V}) + ", " + ty("i32", {S * G}) + "\n    return %d\n  }\n}\n";
  h3_module *m = parse(text);
  CHECK(m, "markov_draft IR");
  if (!m) return;
  const h3_op *op = first_op(m);
  std::vector<buf> in;
  for (int i = 0; i < 4; i++) in.push_back(make(op->operands[i]->type));
  if (mma) {
    const double sd[3] = {1, 1, 0.2};
    for (int t = 0; t < 3; t++)
      for (int64_t i = 0; i < h3_type_numel(&in[t].type); i++)
        h3_weights_store(in[t].p(), in[t].type.dtype, (size_t)i, sd[t] * gauss());
  } else {
    fill_random(in[0], -1, 1);
    fill_random(in[1], -1, 1);
    fill_random(in[2], -0.2, 0.2);
  }
  float *b = (float *)in[0].p();
  if (ties) {
    for (int64_t i = 0; i < S * G * V; i++) b[i] = (float)(int)(urand() * 3);
    memset(in[2].p(), 0, (size_t)(V * r) * 2);
  }
  for (int64_t s = 0; s < S; s++) ((int32_t *)in[3].p())[s] = (int32_t)((s * 37 + 11) % V);
  std::vector<buf> want = cpu_run(op, in);
  buf z = make(op->results[0]->type), dr = make(op->results[1]->type);
  int nblk = (int)((V + 255) / 256), iS = (int)S, iG = (int)G, ws = r + 8; /* cu_m31_run_markov's */
  long long VV = V;
  std::vector<float> e((size_t)(S * r)), pv((size_t)(S * nblk));
  std::vector<int> pi((size_t)(S * nblk));
  const h3_bf16 *w1 = (const h3_bf16 *)in[1].p(), *w2 = (const h3_bf16 *)in[2].p();
  const int *p0 = (const int *)in[3].p();
  auto pick = [&](int kk) {
    emu_launch3(S, 1, 1, 256, [&] {
      markov_k::emu_markov_pick(w1, p0, pv.data(), pi.data(), e.data(), (int *)dr.p(), kk, iG, VV, r, nblk);
    });
  };
  pick(0);
  for (int kk = 0; kk < G; kk++) {
    emu_launch3(nblk, 1, 1, 256, [&] {
      if (mma) markov_k::emu_markov_mma(b, w2, e.data(), (float *)z.p(), pv.data(), pi.data(), kk, iG, VV, r, ws, iS);
      else markov_k::emu_markov_step(b, w2, e.data(), (float *)z.p(), pv.data(), pi.data(), kk, iG, VV, r, iS);
    });
    pick(kk + 1);
  }
  char what[96];
  snprintf(what, sizeof what, "markov_draft%s S %lld G %lld V %lld r %d%s", mma ? " mma" : "", (long long)S,
           (long long)G, (long long)V, r, ties ? " (ties)" : "");
  std::string w(what);
  if (mma && !ties) {
    compare_markov_mma(what, z, dr, want, S, G, V);
  } else {
    compare((w + " z").c_str(), z, want[0], 0);
    compare((w + " drafts").c_str(), dr, want[1], 0);
  }
  h3_module_free(m);
}

/* ---- spec_accept ----------------------------------------------------------------------- */
/* S sequences of G draft tokens over V logits: sequence s greedy when s % 3 == 0 (drafts
 * agreeing with the argmaxes for s % 4 tokens; its first row's best score again at its last
 * logit), else sampled at T = 0.8 (drafts: argmax or a random token); greedy rows through the
 * argmax pieces (H3_SPEC_TOP2_NAME) first; n, tokens and margins equal to the CPU's. */
static void test_spec_accept(int64_t S, int64_t G, int64_t V) {
  std::string text = "module @m config \"test\" {\n  graph @g(%x: " + ty("f32", {S * (G + 1), V}) +
                     ", %d: " + ty("i32", {S * G}) + ", %t: " + ty("f32", {S}) + ", %k: " + ty("i32", {S}) +
                     ", %p: " + ty("i32", {S}) + ") -> (n: " + ty("i32", {S}) + ") {\n    %n, %o, %m = " +
                     "spec_accept(%x, %d, %t, %k, %p) : " + ty("i32", {S}) + ", " + ty("i32", {S, G + 1}) + ", " +
                     ty("f32", {S, G + 1}) + "\n    return %n\n  }\n}\n";
  h3_module *m = parse(text);
  CHECK(m, "spec_accept IR");
  if (!m) return;
  const h3_op *op = first_op(m);
  std::vector<buf> in;
  for (int i = 0; i < 5; i++) in.push_back(make(op->operands[i]->type));
  fill_random(in[0], -3, 3);
  float *x = (float *)in[0].p(), *t = (float *)in[2].p();
  int32_t *d = (int32_t *)in[1].p(), *k = (int32_t *)in[3].p(), *p = (int32_t *)in[4].p();
  for (int64_t s = 0; s < S; s++) {
    t[s] = s % 3 ? 0.8f : 0.0f, k[s] = (int32_t)(s * 977 + 5), p[s] = (int32_t)(100 + s);
    for (int64_t i = 0; i < G; i++) {
      float *row = x + (s * (G + 1) + i) * V;
      if (s % 3 == 0 && i == 0) { /* the best score again at the row's end: the first wins, margin 0 */
        float mx = row[0];
        for (int64_t v = 1; v < V; v++) mx = row[v] > mx ? row[v] : mx;
        row[V - 1] = mx;
      }
      int64_t best = 0;
      for (int64_t v = 1; v < V; v++) best = row[v] > row[best] ? v : best;
      d[s * G + i] = (int32_t)(s % 3 ? (urand() < 0.5 ? best : (int64_t)(urand() * V) % V)
                                     : i < s % 4 ? best : (best + 1) % V);
    }
  }
  std::vector<buf> want = cpu_run(op, in);
  std::vector<buf> got = {make(op->results[0]->type), make(op->results[1]->type), make(op->results[2]->type)};
  int iG = (int)G;
  long long VV = V;
  /* the greedy rows' pieces first (NaN-filled: a piece the accept kernel reads unwritten shows) */
  const int nc = (int)((V + H3M_ACC_CHUNK - 1) / H3M_ACC_CHUNK);
  std::vector<float> pv((size_t)(S * (G + 1) * nc), NAN), ps(pv.size(), NAN);
  std::vector<int> pi(pv.size(), 7);
  emu_launch3(nc, S * (G + 1), 1, 256, [&] { spec_k::emu_spec_top2(x, t, pv.data(), ps.data(), pi.data(), iG, VV); });
  emu_launch3(S, 1, 1, 256, [&] {
    spec_k::emu_spec_accept(x, d, t, k, p, pv.data(), ps.data(), pi.data(), (int *)got[0].p(), (int *)got[1].p(),
                            (float *)got[2].p(), iG, VV, nc);
  });
  char what[96];
  snprintf(what, sizeof what, "spec_accept S %lld G %lld V %lld n", (long long)S, (long long)G, (long long)V);
  compare(what, got[0], want[0], 0);
  snprintf(what, sizeof what, "spec_accept S %lld G %lld V %lld tokens", (long long)S, (long long)G, (long long)V);
  compare(what, got[1], want[1], 0);
  snprintf(what, sizeof what, "spec_accept S %lld G %lld V %lld margins", (long long)S, (long long)G, (long long)V);
  compare(what, got[2], want[2], 0);
  h3_module_free(m);
}

/* ---- attention over the paged cache ------------------------------------------------------ */
/* The attention kernels: CUDA cores with one dim and one head per lane and warp (D <= 32,
 * groups <= 4), with 4 of each (D <= 128, groups <= 16), or tensor cores (D 128, group 16). */
enum att_form { ATT11, ATT44, ATT_MMA };

struct att_case {
  const char *name;
  att_form form;
  int kind; /* 0 paged, 1 block, 2 sparse */
  int64_t T, Hq, Hk, D, page, NP, S;
  std::vector<int32_t> pos; /* paged / sparse: per row; block: {ctx}, or per row when batch */
  bool batch;               /* a page table per group of `per` rows, [T / per, NP] (block: and
                               ctx_len per row) */
  int64_t topk = 3;         /* sparse: selected blocks per row and kv head */
  int W = 4;                /* tensor cores: warps per block */
  int64_t empty = -1;       /* sparse: a row that selects no block */
  int64_t brows = 0;        /* block: rows per block (block_rows; 0: all T) */
  int64_t per = 1;          /* batch: rows per page table */
};

/* A scrambled page table of `rows` tables of NP entries over pages 1..P-1. */
static void fill_table(buf &b, int64_t rows, int64_t NP, int64_t P) {
  for (int64_t i = 0; i < rows * NP; i++) ((int32_t *)b.p())[i] = (int32_t)(1 + (i * 5 + 2) % (P - 1));
}

static void test_attention(const att_case &c) {
  const int64_t T = c.T, Hq = c.Hq, Hk = c.Hk, D = c.D, page = c.page, NP = c.NP;
  const int64_t rows = c.batch ? T / c.per : 1, P = NP * rows + 2;
  std::string ptt = c.batch ? ty("i32", {rows, NP}) : ty("i32", {NP});
  const int64_t topk = c.topk;
  std::string qt = ty("bf16", {T, Hq, D}), ct = ty("bf16", {P, page, Hk, D});
  std::string args = "%q: " + qt + ", %kc: " + ct + ", %vc: " + ct, call;
  const int64_t brows = c.brows ? c.brows : T;
  std::string scale = "{scale = 0.3, page = " + std::to_string(page) +
                      (c.brows ? ", block_rows = " + std::to_string(c.brows) : std::string()) + "}";
  if (c.kind == 0) {
    args += ", %pos: " + ty("i32", {T}) + ", %pt: " + ptt;
    call = "paged_attention(%q, %kc, %vc, %pos, %pt) " + scale;
  } else if (c.kind == 1) {
    args += ", %ctx: " + (c.batch ? ty("i32", {T}) : std::string("i32[]")) + ", %pt: " + ptt +
            ", %kb: " + ty("bf16", {T, Hk, D}) +
            ", %vb: " + ty("bf16", {T, Hk, D});
    call = "block_attention(%q, %kc, %vc, %ctx, %pt, %kb, %vb) " + scale;
  } else {
    args += ", %sel: " + ty("i32", {T, Hk, topk}) + ", %pos: " + ty("i32", {T}) + ", %pt: " + ptt;
    call = "sparse_attention(%q, %kc, %vc, %sel, %pos, %pt) " + scale;
  }
  std::string text = "module @m config \"test\" {\n  graph @g(" + args + ") -> (o: " + qt + ") {\n    %o = " +
                     call + " : " + qt + "\n    return %o\n  }\n}\n";
  h3_module *m = parse(text);
  CHECK(m, "%s IR", c.name);
  if (!m) return;
  const h3_op *op = first_op(m);
  std::vector<buf> in;
  for (int i = 0; i < op->n_operands; i++) in.push_back(make(op->operands[i]->type));
  for (int i = 0; i < 3; i++) fill_random(in[i], -2, 2);
  const int ipos = c.kind == 2 ? 4 : 3, ipt = c.kind == 2 ? 5 : 4;
  for (size_t i = 0; i < c.pos.size(); i++) ((int32_t *)in[ipos].p())[i] = c.pos[i];
  fill_table(in[ipt], rows, NP, P);
  if (c.kind == 1) fill_random(in[5], -2, 2), fill_random(in[6], -2, 2);
  if (c.kind == 2) { /* per row and kv head: up to topk blocks of the row's, ascending, -1 padded
                       (after them, or in every other list before them) */
    for (int64_t t = 0; t < T; t++)
      for (int64_t h = 0; h < Hk; h++) {
        int32_t *sel = (int32_t *)in[3].p() + (t * Hk + h) * topk;
        int64_t nb = c.pos[t] / page + 1, n = 0;
        for (int64_t b = 0; b < nb && n < topk; b++)
          if (b == nb - 1 || urand() < 0.5) sel[n++] = (int32_t)b;
        if (t == c.empty) n = 0;
        std::fill(sel + n, sel + topk, -1);
        if ((t + h) % 2) std::rotate(sel, sel + n, sel + topk);
      }
  }
  std::vector<buf> want = cpu_run(op, in);
  buf out = make(op->results[0]->type);
  const void *kb = c.kind == 1 ? in[5].p() : nullptr, *vb = c.kind == 1 ? in[6].p() : nullptr;
  const void *pos = c.kind == 1 ? nullptr : in[ipos].p(), *ctx = c.kind == 1 ? in[3].p() : nullptr;
  const void *sel = c.kind == 2 ? in[3].p() : nullptr;
  int pt_per = c.batch ? (int)c.per : 0; /* as cu_m31_pt_per */
  long long NPP = NP;
  int kind = c.kind, iHq = (int)Hq, iHk = (int)Hk, iD = (int)D, ipage = (int)page, itopk = (int)topk;
  long long TT = T, bro = brows;
  int ctx_rows = c.kind == 1 && c.batch;
  int S = (int)c.S;
  const h3_bf16 *q = (const h3_bf16 *)in[0].p(), *kc = (const h3_bf16 *)in[1].p();
  const h3_bf16 *vc = (const h3_bf16 *)in[2].p();
  const int *pt = (const int *)in[ipt].p();
  if (c.form == ATT_MMA) {
    /* as cu_m31_run_kv_attention under H3_M31_ATT_COMBINE=scratch: a block per (row, split) and kv
       head, the combine in the launch; the partials poisoned, the counters 0 after it: a second
       launch gives the same bits (the cluster combine, clus 1, needs a GPU: test_gpu_ops) */
    std::vector<float> blobs((size_t)(T * Hk * S * H3M_BLOB), NAN);
    std::vector<unsigned> cnt((size_t)(T * Hk), 0u);
    for (int run = 0; run < (S > 1 ? 2 : 1); run++) {
      buf o = make(op->results[0]->type);
      emu_launch3(T * S, Hk, 1, 32 * c.W, [&] {
        att44::att44_mma(q, kc, vc, (const h3_bf16 *)kb, (const h3_bf16 *)vb, (const int *)pos, pt,
                         (const int *)sel, (const int *)ctx, blobs.data(), kind, TT, iHq, iHk, iD, ipage,
                         itopk, 0.3f, pt_per, NPP, S, (h3_bf16 *)o.p(), cnt.data(), ctx_rows, bro, 0);
      });
      CHECK(std::all_of(cnt.begin(), cnt.end(), [](unsigned v) { return v == 0; }),
            "%s: counters not reset", c.name);
      CHECK(run == 0 || o.bytes == out.bytes, "%s: a second launch differs", c.name);
      if (run == 0) out = o;
    }
  } else {
    std::vector<float> part((size_t)(T * Hq * c.S * (D + 2)));
    emu_launch3(T, Hk, S, 128, [&] {
      (c.form == ATT11 ? att11::att11_att : att44::att44_att)(
          q, kc, vc, (const h3_bf16 *)kb, (const h3_bf16 *)vb, (const int *)pos, pt, (const int *)sel,
          (const int *)ctx, part.data(), kind, TT, iHq, iHk, iD, ipage, itopk, 0.3f, pt_per, NPP,
          ctx_rows, bro);
    });
    emu_launch3(T, Hq, 1, 128, [&] {
      (c.form == ATT11 ? att11::att11_combine : att44::att44_combine)(part.data(), (h3_bf16 *)out.p(),
                                                                     iHq, iD, S);
    });
  }
  compare(c.name, out, want[0], 1e-4);
  h3_module_free(m);
}

/* A paged_attention of no rows over one table ([NP] and [1, NP]): the CPU reference runs it (a
 * count of tables divides T = 0). */
static void test_attention_no_rows(const char *pt) {
  const std::string q = ty("bf16", {0, 4, 16}), c = ty("bf16", {3, 8, 2, 16});
  h3_module *m = parse("module @m config \"test\" {\n  graph @g(%q: " + q + ", %kc: " + c + ", %vc: " + c +
                       ", %pos: " + ty("i32", {0}) + ", %pt: " + pt + ") -> (o: " + q +
                       ") {\n    %o = paged_attention(%q, %kc, %vc, %pos, %pt) {scale = 0.3, page = 8} : " + q +
                       "\n    return %o\n  }\n}\n");
  CHECK(m, "paged_attention of no rows IR (%s)", pt);
  if (!m) return;
  const h3_op *op = first_op(m);
  std::vector<buf> in;
  for (int i = 0; i < op->n_operands; i++) in.push_back(make(op->operands[i]->type));
  cpu_run(op, in);
  h3_module_free(m);
}

/* ---- index_topk ---------------------------------------------------------------------------- */
/* One index_topk case: iq [T, Hi, D], keys over `page`-key pages in `block`-key blocks, a
 * scrambled table ([NP], or [T, NP] when batch); ties: every physical page from the fourth
 * on a copy of one of the first three, so that blocks score alike (the lower block wins). */
struct topk_case {
  int64_t T, Hi, D, page, block, NP, topk;
  std::vector<int32_t> pos;
  bool batch, rows; /* a table per row; H3_TOPK_ROWS_NAME (else H3_TOPK_SCORE_NAME) */
  int S;            /* key-block splits (gridDim.y) */
  bool ties;
};

/* The scores the kernel must write, bitwise: for b below row t's current block, the max over
 * the block's keys of the d-ascending fp32 dot product (product, then sum), in the rows of more
 * than topk blocks; the rest untouched (NaN as poisoned), except that a row of at most topk
 * blocks (it selects them all) may hold those maxima or NaN. Returns the entries that differ. */
static int64_t topk_score_diff(const topk_case &c, const buf &iq, const buf &ik, const buf &pt,
                               const std::vector<float> &score, int64_t NB) {
  int64_t bad = 0;
  const int32_t *tab = (const int32_t *)pt.bytes.data();
  for (int64_t t = 0; t < c.T; t++)
    for (int64_t h = 0; h < c.Hi; h++)
      for (int64_t b = 0; b < NB; b++) {
        float want = NAN, got = score[(size_t)((t * c.Hi + h) * NB + b)];
        if (b < c.pos[(size_t)t] / c.block) {
          want = -INFINITY;
          for (int64_t j = b * c.block; j < (b + 1) * c.block; j++) {
            int64_t slot = tab[(c.batch ? t * c.NP : 0) + j / c.page] * c.page + j % c.page;
            float dot = 0.0f;
            for (int64_t d = 0; d < c.D; d++)
              dot += (float)ld(iq, (t * c.Hi + h) * c.D + d) * (float)ld(ik, slot * c.D + d);
            want = dot > want ? dot : want;
          }
        }
        const bool takes_all = c.pos[(size_t)t] / c.block < c.topk;
        bad += memcmp(&want, &got, sizeof want) != 0 && !(std::isnan(want) && std::isnan(got)) &&
               !(takes_all && std::isnan(got));
      }
  return bad;
}

static void test_index_topk(const topk_case &c) {
  const int64_t T = c.T, Hi = c.Hi, D = c.D, page = c.page, NP = c.NP, topk = c.topk;
  const int64_t rows = c.batch ? T : 1, P = NP * rows + 1;
  std::string st = ty("i32", {T, Hi, topk});
  std::string text = "module @m config \"test\" {\n  graph @g(%iq: " + ty("bf16", {T, Hi, D}) + ", %ik: " +
                     ty("bf16", {P, page, D}) + ", %pos: " + ty("i32", {T}) + ", %pt: " +
                     (c.batch ? ty("i32", {T, NP}) : ty("i32", {NP})) + ") -> (s: " + st +
                     ") {\n    %s = index_topk(%iq, %ik, %pos, %pt) {block = " + std::to_string(c.block) +
                     ", topk = " + std::to_string(topk) + "} : " + st + "\n    return %s\n  }\n}\n";
  h3_module *m = parse(text);
  CHECK(m, "index_topk IR");
  if (!m) return;
  const h3_op *op = first_op(m);
  std::vector<buf> in;
  for (int i = 0; i < 4; i++) in.push_back(make(op->operands[i]->type));
  fill_random(in[0], -2, 2);
  fill_random(in[1], -2, 2);
  const size_t page_bytes = (size_t)(page * D) * 2;
  for (int64_t p = 4; c.ties && p < P; p++)
    memcpy(in[1].bytes.data() + p * page_bytes, in[1].bytes.data() + (1 + p % 3) * page_bytes, page_bytes);
  for (int64_t t = 0; t < T; t++) ((int32_t *)in[2].p())[t] = c.pos[(size_t)t];
  fill_table(in[3], rows, NP, P);
  std::vector<buf> want = cpu_run(op, in);
  buf out = make(op->results[0]->type);
  /* as cu_m31_run_index_topk launches them: row tiles x S splits, then a warp per (row,
     head); or rows x S splits that select in the same launch (run twice: the counters are 0
     after a launch) */
  const int NB = (int)((NP * page + c.block - 1) / c.block), iHi = (int)Hi, iD = (int)D;
  const int ipage = (int)page, iblock = (int)c.block, itopk = (int)topk, pt_per = c.batch ? 1 : 0;
  const int tile = H3M_TOPK_QV / iHi;
  std::vector<float> score((size_t)(T * Hi * NB), NAN);
  std::vector<unsigned> cnt((size_t)T, 0u);
  long long TT = T, NPP = NP;
  const h3_bf16 *iq = (const h3_bf16 *)in[0].p(), *ik = (const h3_bf16 *)in[1].p();
  const int *pos = (const int *)in[2].p(), *pt = (const int *)in[3].p();
  if (c.rows) {
    emu_launch3((T + tile - 1) / tile, c.S, 1, H3M_TOPK_ROWS_THREADS, [&] {
      att11::att11_rows(iq, ik, pos, pt, score.data(), TT, iHi, iD, ipage, iblock, NB, itopk);
    });
    emu_launch3((T * Hi + 7) / 8, 1, 1, H3M_TOPK_THREADS, [&] {
      att11::att11_select(score.data(), pos, (int *)out.p(), TT, iHi, iblock, NB, itopk);
    });
  } else {
    for (int run = 0; run < 2; run++) {
      buf o = make(op->results[0]->type);
      emu_launch3(T, c.S, 1, H3M_TOPK_DEC_THREADS, [&] {
        att11::att11_score(iq, ik, pos, pt, score.data(), cnt.data(), (int *)o.p(), iHi, iD, ipage, iblock,
                           NB, itopk, pt_per, NPP);
      });
      CHECK(std::all_of(cnt.begin(), cnt.end(), [](unsigned v) { return v == 0; }), "index_topk: counters not reset");
      CHECK(run == 0 || o.bytes == out.bytes, "index_topk: a second launch differs");
      if (run == 0) out = o;
    }
  }
  char what[128];
  snprintf(what, sizeof what, "index_topk %s T %lld Hi %lld D %lld page %lld block %lld topk %lld S %d%s%s",
           c.rows ? "rows" : "row", (long long)T, (long long)Hi, (long long)D, (long long)page,
           (long long)c.block, (long long)topk, c.S, c.batch ? " batch" : "", c.ties ? " ties" : "");
  int64_t bad = topk_score_diff(c, in[0], in[1], in[3], score, NB);
  CHECK(bad == 0, "%s: %lld scores not the reference's bits", what, (long long)bad);
  compare(what, out, want[0], 0);
  h3_module_free(m);
}

/* Positions n0, n0 + 1, ... (a prefill chunk) of n rows. */
static std::vector<int32_t> run_of(int32_t n0, int64_t n) {
  std::vector<int32_t> v((size_t)n);
  for (int64_t i = 0; i < n; i++) v[(size_t)i] = n0 + (int32_t)i;
  return v;
}

int main(void) {
  elapsed();
  test_markov(3, 4, 300, 8, false);    /* 16-byte rows, a partial second block */
  test_markov(70, 2, 130, 12, false);  /* nine passes of sequences, element rows */
  test_markov(2, 3, 70, 6, false);     /* r not a multiple of 4 */
  test_markov(1, 3, 600, 256, false);  /* one chain (prev a scalar), the model's rank: 4 stages */
  test_markov(5, 2, 513, 72, false);   /* a stage of 8 pieces, then one of a single piece */
  test_markov(9, 2, 260, 40, false);   /* 16-byte rows of 5 pieces; a second pass of 1 sequence */
  test_markov(4, 3, 200, 8, true);
  test_markov(16, 4, 300, 32, false, true); /* tensor cores: one m-tile, a partial last block */
  test_markov(17, 3, 300, 32, false, true); /* a partial second m-tile */
  test_markov(40, 3, 256, 48, false, true); /* 3 m-tiles, V a multiple of 64, 3 k-steps */
  test_markov(70, 2, 130, 16, false, true); /* two passes of sequences */
  test_markov(18, 2, 700, 80, false, true); /* two stages (64 + 16 of k), 3 blocks, the last partial */
  test_markov(64, 2, 300, 256, false, true); /* the model's rank: 4 stages, 4 m-tiles */
  test_markov(20, 3, 200, 16, true, true);  /* ties: z = base bitwise, the first argmax */
  test_spec_accept(12, 3, 300);
  test_spec_accept(5, 8, 1000);
  test_spec_accept(6, 2, 9000); /* 3 pieces a row, the last partial */
  test_router(5, 64, 8, 2);
  test_router(3, 256, 32, 4);
  test_router(19, 2048, 16, 4); /* several row groups, a partial last one; 2 steps per thread */
  test_router(2, 60, 8, 3); /* element loads: H not a multiple of 8 */
  test_moe(6, 64, 32, 8, 2, false, 3);
  test_moe(7, 64, 32, 8, 2, true, 3);
  test_moe(20, 64, 32, 4, 3, false, 3); /* > H3M_ROWS rows per expert */
  test_moe(6, 128, 128, 8, 2, true, 3);   /* tensor cores (widths multiples of 128) */
  test_moe(1, 256, 128, 8, 4, true, 2);   /* one row: the route and the block-per-slot form */
  test_moe(1, 640, 384, 32, 4, false, 2);
  test_moe(40, 256, 128, 2, 2, false, 2); /* > 16 rows per expert: tensor-core passes */
  test_moe(20, 640, 384, 4, 2, true, 2);  /* K chunks over the block's 4 warps: 5 and 3 */
  test_moe(5, 60, 20, 6, 2, false, 3);  /* element loads: H, F not multiples of 8 */
  test_attention({"paged D16 G2 S3", ATT11, 0, 3, 4, 2, 16, 8, 5, 3, {5, 17, 38}, false});
  test_attention({"paged D16 G2 S1", ATT11, 0, 2, 4, 2, 16, 8, 5, 1, {0, 39}, false});
  test_attention({"paged D16 G2 S2 (key tiles)", ATT11, 0, 2, 4, 2, 16, 8, 40, 2, {300, 129}, false});
  test_attention({"paged D128 G16 S2", ATT44, 0, 2, 32, 2, 128, 8, 4, 2, {9, 30}, false});
  test_attention({"sparse D16 G2 S2", ATT11, 2, 3, 4, 2, 16, 8, 5, 2, {5, 17, 38}, false});
  test_attention({"sparse D128 G16 S3", ATT44, 2, 2, 32, 2, 128, 8, 4, 3, {20, 31}, false});
  test_attention({"block D16 G2 S2", ATT11, 1, 4, 4, 2, 16, 8, 5, 2, {13}, false});
  test_attention({"paged batch D16 G2 S2", ATT11, 0, 4, 4, 2, 16, 8, 5, 2, {3, 38, 20, 9}, true});
  test_attention({"sparse batch D128 G16 S2", ATT44, 2, 3, 32, 2, 128, 8, 4, 2, {31, 6, 19}, true});
  /* tensor cores: a row of 1 key, partial key tiles, splits without keys */
  test_attention({"paged mma S3", ATT_MMA, 0, 5, 32, 2, 128, 16, 8, 3, {0, 37, 100, 127, 64}, false});
  /* prefill rows: consecutive positions, pages of 128, S 1; tile counts differ between warps */
  test_attention({"paged mma S1 (prefill)", ATT_MMA, 0, 6, 32, 2, 128, 128, 3, 1, {251, 252, 253, 254, 255, 256}, false});
  test_attention({"sparse mma S2", ATT_MMA, 2, 3, 32, 2, 128, 16, 8, 2, {20, 77, 127}, false});
  test_attention({"block mma S2", ATT_MMA, 1, 4, 32, 2, 128, 16, 4, 2, {21}, false});
  /* batched drafts: blocks of brows rows, one sequence each (ctx_len and a table per row) */
  test_attention({"block batched D16 G2 S2", ATT11, 1, 6, 4, 2, 16, 8, 5, 2, {13, 13, 0, 0, 39, 39},
                  true, 3, 4, -1, 2});
  test_attention({"block batched D64 G4 S1", ATT44, 1, 6, 8, 2, 64, 8, 5, 1, {7, 7, 7, 26, 26, 26},
                  true, 3, 4, -1, 3});
  test_attention({"block batched mma S2", ATT_MMA, 1, 4, 32, 2, 128, 16, 4, 2, {21, 21, 63, 63},
                  true, 3, 4, -1, 2});
  /* pages of 8 keys: a tile spans pages */
  test_attention({"paged batch mma S2 (page 8)", ATT_MMA, 0, 4, 32, 2, 128, 8, 5, 2, {3, 38, 20, 9}, true});
  test_attention({"sparse batch mma S1", ATT_MMA, 2, 3, 32, 2, 128, 32, 3, 1, {95, 6, 61}, true});
  /* more than 32 selection entries (a lane places two) */
  test_attention({"sparse mma S2 topk 40", ATT_MMA, 2, 2, 16, 1, 128, 8, 48, 2, {380, 203}, false, 40});
  /* decode, one row (cuda_m31_msa.c's shapes): 2048 keys in 16 splits of 8 warps (a tile each)
     and in 32 (half a tile each); 2501 keys in 4 splits (5 tiles a warp); the selected blocks
     of a 2048-key row in 16 splits */
  test_attention({"paged mma decode S16 W8", ATT_MMA, 0, 1, 16, 1, 128, 128, 16, 16, {2047}, false, 3, 8});
  test_attention({"paged mma decode S32 W8", ATT_MMA, 0, 1, 16, 1, 128, 128, 16, 32, {2047}, false, 3, 8});
  test_attention({"paged mma decode S4 W8 (5 tiles a warp)", ATT_MMA, 0, 1, 16, 1, 128, 128, 20, 4, {2500}, false, 3, 8});
  test_attention({"sparse mma decode S16 W8", ATT_MMA, 2, 1, 16, 1, 128, 128, 16, 16, {2047}, false, 16, 8});
  /* batches: one split of 4 warps (no combine), splits of 8 warps; a sparse row with no block */
  test_attention({"paged batch mma S1 W4", ATT_MMA, 0, 5, 32, 2, 128, 16, 8, 1, {3, 100, 127, 64, 0}, true});
  test_attention({"sparse batch mma S1 W4 (empty row)", ATT_MMA, 2, 4, 32, 2, 128, 16, 8, 1, {60, 127, 30, 90}, true, 5, 4, 1});
  test_attention_no_rows("i32[2]");
  test_attention_no_rows("i32[1, 2]");
  /* a batched verify: 3 sequences of 2 rows, a page table each */
  test_attention({"paged 3 x 2 rows mma S2", ATT_MMA, 0, 6, 32, 2, 128, 16, 8, 2, {40, 41, 99, 100, 7, 8}, true,
                  3, 4, -1, 0, 2});
  test_attention({"sparse 2 x 3 rows D16 G2 S2", ATT11, 2, 6, 4, 2, 16, 8, 5, 2, {20, 21, 22, 35, 36, 37}, true,
                  3, 4, -1, 0, 3});
  test_attention({"sparse batch mma S3 W8 (empty row)", ATT_MMA, 2, 4, 32, 2, 128, 16, 8, 3, {60, 127, 30, 90}, true, 5, 8, 2});
  test_attention({"block mma S3 W8", ATT_MMA, 1, 3, 32, 2, 128, 16, 4, 3, {40}, false, 3, 8});
  /* rows form: prefill chunks at pos0 > 0, topk below the blocks (real selection), several
     splits, ties; head dim 10 (element loads, zero pad) with up to 47 blocks (two select
     chunks); blocks of 5 pages and 160 keys (two key tiles); the model's 4 x 128 */
  test_index_topk({100, 2, 16, 8, 8, 48, 5, run_of(37, 100), false, true, 3, true});
  test_index_topk({40, 2, 10, 8, 8, 48, 4, run_of(330, 40), false, true, 2, false});
  test_index_topk({40, 1, 16, 32, 160, 12, 2, run_of(300, 40), false, true, 1, true});
  test_index_topk({40, 4, 128, 16, 16, 8, 3, run_of(70, 40), false, true, 2, false});
  /* every row of at most topk blocks (a prompt's first topk blocks): no score computed, all
     selected; then a chunk across that edge (rows on both sides in one tile) */
  test_index_topk({40, 2, 16, 8, 8, 48, 5, run_of(0, 40), false, true, 3, true});
  test_index_topk({24, 4, 128, 16, 16, 8, 3, run_of(40, 24), false, true, 2, false});
  /* a row per block: one table (Hi 3: a partial head group) and a table per row, some rows
     with fewer blocks than topk */
  test_index_topk({5, 3, 16, 8, 8, 6, 3, {3, 17, 40, 47, 29}, false, false, 2, true});
  test_index_topk({6, 4, 128, 16, 16, 6, 3, {95, 6, 61, 40, 33, 80}, true, false, 1, false});
  test_index_topk({4, 2, 16, 8, 8, 5, 2, {3, 38, 20, 9}, true, false, 4, true});
  /* decode at the model's shapes: 2048 keys (every block selected), 5001 (40 blocks, topk 16,
     ties; a block per split and 7 splits); 6 heads (8 vectors a key), index dim 200 (25
     chunks of 8), a row in its first block; index dim 10 (keys staged element by element);
     blocks of 192 keys over pages of 64 (two staging passes: 128 keys, then 64) */
  test_index_topk({1, 4, 128, 128, 128, 17, 16, {2047}, false, false, 17, false});
  test_index_topk({1, 4, 128, 128, 128, 40, 16, {5000}, false, false, 40, true});
  test_index_topk({1, 4, 128, 128, 128, 40, 16, {5000}, false, false, 7, true});
  test_index_topk({3, 6, 200, 16, 32, 6, 4, {95, 20, 61}, true, false, 2, false});
  test_index_topk({3, 2, 10, 8, 8, 6, 3, {47, 7, 30}, true, false, 3, false});
  test_index_topk({1, 4, 64, 64, 192, 40, 3, {2500}, false, false, 5, true});
  /* one row: 6 heads (8 vectors a key), index dim 200, a table per row ([1, NP]); index dim 10
     (element loads), ties */
  test_index_topk({1, 6, 200, 16, 32, 6, 4, {95}, true, false, 2, false});
  test_index_topk({1, 2, 10, 8, 8, 6, 3, {47}, false, false, 3, true});
  return check_summary("m31_emu");
}
