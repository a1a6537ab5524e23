/* cuda_m31_moe.c: launches of router_topk, moe, markov_draft and spec_accept
 * (kernels/m31_moe.cu) on the cuda backend.
 * - router_topk: one launch for k <= 16 (scores and selection) through the device scratch its
 *   record owns (cu_m31_router_scratch_bytes).
 * - moe: several launches through its own scratch (cu_m31_moe_scratch_bytes): a kernel that
 *   lists each expert's rows, expert-major products on tensor cores (for many rows per expert
 *   tiled grouped GEMMs: m31_moe_wgmma.cu on wgmma, or m31_moe_gemm.cu on mma.sync when
 *   H3_MOE_GEMM=mma or H is not a multiple of 256; for thousands of rows per expert cuBLASLt's,
 *   cuda_m31_moe_lt.c) or CUDA cores into bf16 activations and expert outputs, then the
 *   combine. moe {ranks = N} (expert parallelism) runs the same kernels on local ids: the global
 *   ids of this rank's slice less its base, the others -1 (cu_rank_ids).
 * - markov_draft: its chains in lock step, two launches a step through its scratch
 *   (cu_m31_markov_scratch_bytes), the step on tensor cores from 8 chains on (markov_mma;
 *   H3_MARKOV_FORM forces a form).
 * - spec_accept: two launches, the greedy rows' argmax in pieces of 4096 logits over many
 *   blocks into its scratch (cu_m31_accept_scratch_bytes), then a block a sequence.
 */
#include "cuda_m31.h"
#include "cuda_m31_router_shape.h"

#include <cuda.h> /* CUtensorMap (the wgmma GEMMs' weights, cu_tile_map) */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The macro lines of m31_moe.cu: `names` (its "#define H3_*_NAME name" lines) and the types. */
void cu_m31_moe_defines(char *defs, size_t n, const char *names, h3_dtype h, h3_dtype w,
                        h3_dtype b, h3_dtype i, h3_dtype o) {
  int len = snprintf(defs, n, "%s#define H_T %s\n#define W_T %s\n#define B_T %s\n#define I_T %s\n#define O_T %s\n",
                     names, h3_kernel_ctype(h), h3_kernel_ctype(w), h3_kernel_ctype(b),
                     h3_kernel_ctype(i), h3_kernel_ctype(o));
  cu_m31_defines_fit(defs, n, len);
}

h3_status cu_m31_moe_kernels(cu_state *s, const h3_op *op, const h3_tensor *in, const h3_tensor *out,
                             const char *const part[4], const char *const macro[4], cu_kernel *kn[4],
                             h3_diag *d) {
  char name[4][128], lines[520], defs[840];
  int n = 0;
  for (int i = 0; i < 4; i++) {
    snprintf(name[i], sizeof name[i], "h3cu_moe%s_%s_%s_%s_%s_%s", part[i], DN(in[0].type.dtype),
             DN(in[1].type.dtype), DN(in[3].type.dtype), DN(in[4].type.dtype), DN(out[0].type.dtype));
    n += snprintf(lines + n, sizeof lines - (size_t)n, "#define H3_%s_NAME %s\n", macro[i], name[i]);
  }
  cu_m31_moe_defines(defs, sizeof defs, lines, in[0].type.dtype, in[1].type.dtype, in[4].type.dtype,
                     in[3].type.dtype, out[0].type.dtype);
  const char *names[4] = {name[0], name[1], name[2], name[3]};
  return cu_m31_kernels(s, op, "m31_moe.cu", defs, 4, names, kn, d);
}

/* router_topk's scratch, 256-byte aligned parts. One-launch form: the partial logits
 * part [S, T, E] f32 (S = ceil(H / ROUTER_SEG) segments) and the row groups' counters cnt [T]
 * u32. k > ROUTER_KMAX: the scores [T, E] f32. */
typedef struct {
  size_t cnt, total;
} router_scratch;

static router_scratch router_layout(long long T, long long H, long long E, long long k) {
  router_scratch r = {0};
  if (k > ROUTER_KMAX) {
    r.total = (size_t)(T * E) * 4;
    return r;
  }
  long long S = (H + ROUTER_SEG - 1) / ROUTER_SEG;
  r.cnt = cu_align256((size_t)(S * T * E) * 4);
  r.total = r.cnt + (size_t)T * 4;
  return r;
}

h3_status cu_m31_run_router(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                            const h3_tensor *out, h3_diag *d) {
  long long T = in[0].type.dims[0], H = in[0].type.dims[1];
  int E = (int)in[1].type.dims[0], k = (int)out[0].type.dims[1];
  if (k > E || E > 256)
    return cu_op_error(d, op, CU_HINT_UNSUPPORTED, "k = %d of %d experts (at most 256)", k, E);
  char name[3][128], lines[512], defs[800];
  static const char *const part[3] = {"f", "s", ""}; /* the one-launch form; scores, selection */
  for (int i = 0; i < 3; i++)
    snprintf(name[i], sizeof name[i], "h3cu_router%s_%s_%s_%s_%s_%s", part[i], DN(in[0].type.dtype),
             DN(in[1].type.dtype), DN(in[2].type.dtype), DN(out[0].type.dtype), DN(out[1].type.dtype));
  snprintf(lines, sizeof lines, "#define H3_ROUTER_FUSED_NAME %s\n#define H3_ROUTER_SCORE_NAME %s\n"
           "#define H3_ROUTER_NAME %s\n", name[0], name[1], name[2]);
  cu_m31_moe_defines(defs, sizeof defs, lines, in[0].type.dtype, in[1].type.dtype, in[2].type.dtype,
                     out[0].type.dtype, out[1].type.dtype);
  const char *names[3] = {name[0], name[1], name[2]};
  cu_kernel *kn[3];
  if (cu_m31_kernels(s, op, "m31_moe.cu", defs, 3, names, kn, d) != H3_OK) return H3_ERR;
  if (T == 0) return H3_OK;
  if (!scratch) return cu_op_error(d, op, NULL, "no score scratch (the op was not prepared)");
  float scale = (float)h3_op_attr_float(op, "scale", 1.0);
  const void *h = in[0].data, *w = in[1].data, *b = in[2].data;
  void *ids = out[0].data, *wts = out[1].data, *sc = scratch;
  if (k > ROUTER_KMAX) { /* the scores, then a warp per row selects */
    void *a1[] = {&h, &w, &sc, &T, &H, &E};
    int64_t g1[3] = {(T + M31_ROUTER_ROWS - 1) / M31_ROUTER_ROWS, E, 1}, b1[3] = {M31_ROUTER_THREADS, 1, 1};
    void *a2[] = {&sc, &b, &ids, &wts, &E, &k, &scale};
    int64_t g2[3] = {T, 1, 1}, b2[3] = {32, 1, 1};
    if (cu_launch(s, kn[1], g1, b1, 0, a1, d) != H3_OK) return H3_ERR;
    return cu_launch(s, kn[2], g2, b2, 0, a2, d);
  }
  int rows, epw;
  h3cu_router_shape(T, &rows, &epw);
  router_scratch rs = router_layout(T, H, E, k);
  void *cnt = (char *)scratch + rs.cnt;
  /* the counters are 0 after every launch; made so here before the first (a graph capture
   * never holds an op's first run: cuda_graph.c) */
  const bool capturing = cu_graph_capturing(s);
  if (!capturing) CU_CHECK(d, cudaMemsetAsync(cnt, 0, (size_t)T * 4, s->stream), "router_topk counters");
  int64_t smem = (int64_t)rows * ROUTER_SEG * 4;
  if (cu_m31_smem(s, op, kn[0], (size_t)smem, d) != H3_OK) return H3_ERR;
  void *args[] = {&h, &w, &b, &sc, &cnt, &ids, &wts, &T, &H, &E, &k, &scale, &rows, &epw};
  int64_t grid[3] = {(T + rows - 1) / rows, (H + ROUTER_SEG - 1) / ROUTER_SEG, (E + 8 * epw - 1) / (8 * epw)};
  int64_t block[3] = {ROUTER_THREADS, 1, 1};
  /* in a graph (no memset above, which a programmatic launch need not wait for),
     programmatically after the kernel before it (the layer's add + norm): the blocks load
     their first weights while that kernel runs */
  return capturing ? cu_launch_pdl(s, kn[0], grid, block, smem, args, d)
                   : cu_launch(s, kn[0], grid, block, smem, args, d);
}

size_t cu_m31_router_scratch_bytes(const h3_op *op) {
  const h3_type *h = &op->operands[0]->type;
  return router_layout(h->dims[0], h->dims[1], op->operands[1]->type.dims[0], op->results[0]->type.dims[1])
      .total;
}

/* Whether moe runs on tensor cores: bf16 rows and weights, widths multiples of 128. */
static bool moe_mma(const h3_type *h, const h3_type *gu, const h3_type *dn) {
  long long H = h->dims[1], F = gu->dims[1] / 2;
  return h->dtype == H3_BF16 && gu->dtype == H3_BF16 && dn->dtype == H3_BF16 && H % 128 == 0 &&
         F % 128 == 0;
}

/* Whether the tensor-core form runs as the tiled grouped GEMMs (m31_moe_wgmma.cu, or
 * m31_moe_gemm.cu): from MOE_GEMM_ROWS rows per expert on average (prefill, batched decode).
 * The GEMMs read each weight tile once per 128 rows of an expert, TMA-fed; H3_MOE_MMA_* read
 * an expert's weights again for every 16 of its rows. Both are bound by the weight stream
 * below 16 rows; measured on the H200 at a batch of 64 rows (8 per expert): the wgmma GEMMs
 * 2.59 ms of moe per step, the 16-row form 2.77. Below 8 rows (batch 1) the 16-row form
 * stays. The grid's y (F / 64, H / 128) stays within CUDA's 65535. MOE_GEMM_BM and MOE_GEMM_SMEM: the kernels' H3G_BM
 * and H3G_SMEM (3 stages of 128 + 128 rows of 64 bf16); MOE_WGMMA_SMEM: m31_moe_wgmma.cu's
 * H3W_SMEM (1 KiB of alignment slack, 4 stages of 128 + 256 rows of 64 bf16; its m-tiles are
 * MOE_GEMM_BM rows too), MOE_WGMMA_THREADS its H3WS_THREADS (its first form's blocks are 256
 * threads, as m31_moe_gemm.cu's). */
enum {
  MOE_GEMM_ROWS = 8, MOE_GEMM_BM = 128, MOE_GEMM_SMEM = 3 * 256 * 64 * 2,
  MOE_WGMMA_SMEM = 1024 + 4 * 384 * 64 * 2, MOE_WGMMA_THREADS = 384
};

/* The grouped GEMMs run from MOE_GEMM_ROWS rows per expert on average (H3_MOE_GEMM_ROWS=N
 * sets N instead, to compare the forms at a batch), the GEMVs below that. */
static bool moe_gemm(long long T, long long k, long long H, long long F, long long E) {
  const char *env = getenv("H3_MOE_GEMM_ROWS");
  long long rows = env && atoll(env) > 0 ? atoll(env) : MOE_GEMM_ROWS;
  return T * k >= rows * E && F / 64 <= 65535 && H / 128 <= 65535;
}

/* The kernels of the GEMMs: m31_moe_wgmma.cu's persistent clusters (its down GEMM's tiles are
 * 256 outputs wide; the weights' rows seen by TMA, int coordinates, stay below 2^31), its first
 * form (H3_MOE_GEMM=wgmma1, to compare; also where the rows do not fit), or mma.sync
 * (m31_moe_gemm.cu; H3_MOE_GEMM=mma, to compare). */
typedef enum { MOE_MMA_SYNC, MOE_WGMMA1, MOE_WGMMA } moe_form;

static moe_form moe_gemm_form(long long E, long long H, long long F) {
  const int env = cu_env_form("H3_MOE_GEMM", (const char *const[]){"mma", "wgmma1", "wgmma", NULL});
  if (H % 256 || env == 0) return MOE_MMA_SYNC;
  bool fits = E * 2 * F < (1ll << 31) && E * H < (1ll << 31);
  return !fits || env == 1 ? MOE_WGMMA1 : MOE_WGMMA;
}

/* The persistent GEMMs' clusters of 2 blocks: one per 2 SMs (Hopper enables SMs by pairs, so
 * they all fit at once at one block per SM), at most H3_MOE_WGMMA_CLUSTERS when set (tests:
 * several tiles per block) and at most `units`, a bound on the work units. */
static long long moe_wgmma_clusters(const cu_state *s, long long units) {
  const char *env = getenv("H3_MOE_WGMMA_CLUSTERS");
  long long n = s->sm_count / 2, cap = env ? atoll(env) : 0;
  if (cap > 0 && cap < n) n = cap;
  if (units < n) n = units;
  return n > 0 ? n : 1;
}

/* The GEMMs' m-tile slots: at least the experts' ceil(count / 128) summed (counts <= T, their
 * sum <= T * k). */
static long long moe_gemm_slots(long long T, long long k, long long E) {
  long long a = (T * k + MOE_GEMM_BM - 1) / MOE_GEMM_BM + E, b = E * ((T + MOE_GEMM_BM - 1) / MOE_GEMM_BM);
  return a < b ? a : b;
}

/* moe's scratch, 256-byte aligned parts: the activations act [T * k, F] and the expert
 * outputs y [T * k, H] (bf16), the experts' row counts [E] and row lists [E, T] (int); with
 * ranks > 1 the local ids [T, k] (int, cu_rank_ids); in the cuBLASLt form the slots' rows
 * at [T * k] (int) and the GEMM's gate | up u [T * k, 2 F] (bf16). */
typedef struct {
  size_t act, y, counts, lists, local, at, u, total;
} moe_scratch;

static moe_scratch moe_layout(long long T, long long k, long long H, long long F, long long E,
                              bool ranked, bool lt) {
  moe_scratch m = {0};
  m.y = cu_align256((size_t)(T * k * F) * 2);
  m.counts = m.y + cu_align256((size_t)(T * k * H) * 2);
  m.lists = m.counts + cu_align256((size_t)E * 4);
  m.local = m.lists + cu_align256((size_t)(E * T) * 4);
  m.at = m.local + (ranked ? cu_align256((size_t)(T * k) * 4) : 0);
  m.u = m.at + cu_align256((size_t)(T * k) * 4);
  m.total = lt ? m.u + (size_t)(T * k * 2 * F) * 2 : ranked ? m.local + (size_t)(T * k) * 4
                                                            : m.lists + (size_t)(E * T) * 4;
  return m;
}

h3_status cu_m31_run_moe(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                         const h3_tensor *out, h3_diag *d) {
  long long T = in[0].type.dims[0], H = in[0].type.dims[1], F = in[1].type.dims[1] / 2;
  long long E = in[1].type.dims[0];
  int k = (int)in[3].type.dims[1];
  if (k > 16) return cu_op_error(d, op, CU_HINT_UNSUPPORTED, "k = %d experts per row (at most 16)", k);
  if (T > (1ll << 26)) return cu_op_error(d, op, CU_HINT_UNSUPPORTED, "%lld rows (at most 2^26)", T);
  bool mma = moe_mma(&in[0].type, &in[1].type, &in[2].type);
  /* moe's cuBLASLt form (thousands of rows per expert) runs kernels of its own; the forms
     below load theirs only where they can run: under a capture (the cuBLASLt form's graph is
     never captured, cu_graph_host_reads) or for an op of the other forms */
  bool lt = cu_m31_moe_lt(op), lt_now = lt && !cu_graph_capturing(s);
  /* the kernels of each form: the row lists, steps 1 and 2, the combine */
  static const char *const part[2][4] = {{"r", "", "d", "c"}, {"r", "m", "md", "c"}};
  static const char *const macro[2][4] = {{"MOE_ROUTE", "MOE", "MOE_DOWN", "MOE_COMBINE"},
                                          {"MOE_ROUTE", "MOE_MMA", "MOE_MMA_DOWN", "MOE_COMBINE"}};
  cu_kernel *kn[4];
  if (!lt_now && cu_m31_moe_kernels(s, op, in, out, part[mma], macro[mma], kn, d) != H3_OK) return H3_ERR;
  /* many rows per expert: the tensor-core steps 1 and 2 as GEMMs (the route and combine
     kernels above) */
  bool gemm = !lt_now && mma && moe_gemm(T, k, H, F, E);
  moe_form form = gemm ? moe_gemm_form(E, H, F) : MOE_MMA_SYNC;
  bool wg = gemm && form != MOE_MMA_SYNC;
  cu_kernel *kg[2];
  if (wg) {
    static const char *const wnames[2][2] = {{"h3cu_moe_wgmma1", "h3cu_moe_wgmma1_down"},
                                             {"h3cu_moe_wgmma", "h3cu_moe_wgmma_down"}};
    if (cu_m31_kernels_sm90a(s, op, "m31_moe_wgmma.cu", M31_MOE_WGMMA_DEFINES, 2,
                             wnames[form == MOE_WGMMA], kg, d) != H3_OK)
      return H3_ERR;
  } else if (gemm) {
    static const char *const gnames[2] = {"h3cu_moe_gemm", "h3cu_moe_gemm_down"};
    if (cu_m31_kernels(s, op, "m31_moe_gemm.cu", M31_MOE_GEMM_DEFINES, 2, gnames, kg, d) != H3_OK)
      return H3_ERR;
  }
  const int64_t gsmem = wg ? MOE_WGMMA_SMEM : MOE_GEMM_SMEM;
  for (int i = 0; gemm && i < 2; i++)
    if (cu_m31_smem(s, op, kg[i], (size_t)gsmem, d) != H3_OK) return H3_ERR;
  if (T == 0) return H3_OK;
  if (!scratch) return cu_op_error(d, op, NULL, "no activation scratch (the op was not prepared)");
  float alpha = (float)h3_op_attr_float(op, "alpha", 1.702), limit = (float)h3_op_attr_float(op, "limit", 7.0);
  const void *h = in[0].data, *gu = in[1].data, *dn = in[2].data, *ids = in[3].data, *w = in[4].data;
  /* ranks = N > 1: the weights hold this rank's E experts of N * E; the ids of the others'
     become -1, which no kernel below reads a weight for (the lists skip them, the combine
     adds nothing for them) */
  int64_t ranks = h3_op_attr_int(op, "ranks", 1);
  moe_scratch ms = moe_layout(T, k, H, F, E, ranks > 1, lt);
  if (ranks > 1) {
    if (ranks != s->ranks)
      return cu_op_error(d, op, "run the plan with h3exec --backend cuda --gpus N, N its rank count",
                         "the plan was compiled for %lld ranks but runs on %d", (long long)ranks, s->ranks);
    if (in[3].type.dtype != H3_I32)
      return cu_op_error(d, op, CU_HINT_UNSUPPORTED, "moe {ranks} takes i32 ids");
    void *local = (char *)scratch + ms.local;
    if (cu_rank_ids(s, ids, local, T * k, (int64_t)s->rank * E, E, d) != H3_OK) return H3_ERR;
    ids = local;
  }
  void *o = out[0].data, *act = scratch, *y = (char *)scratch + ms.y;
  void *counts = (char *)scratch + ms.counts, *lists = (char *)scratch + ms.lists;
  if (lt_now) {
    cu_m31_moe_parts p = {in, out, ids, lists, counts, act, y, (char *)scratch + ms.at,
                          (char *)scratch + ms.u};
    return cu_m31_run_moe_lt(s, op, &p, d);
  }
  int64_t b256[3] = {256, 1, 1}, mma_block[3] = {M31_MOE_MMA_THREADS, 1, 1};
  /* one row on the tensor-core GEMVs: a block per slot, no route (kernels/m31_moe.cu's
     h3m_mma_rows_of); else the route lists each expert's rows first */
  const bool by_slot = mma && !gemm && T == 1;
  void *ar[] = {&ids, &lists, &counts, &T, &k};
  int64_t gr[3] = {E, 1, 1};
  if (!by_slot && cu_launch(s, kn[0], gr, b256, 0, ar, d) != H3_OK) return H3_ERR;
  if (gemm && form == MOE_WGMMA) {
    /* the weights as 2D [E * 2F, H] and [E * H, F] for TMA; per launch: the weights differ by
       layer. Grid: the clusters (2 blocks each) that take the work units in turn */
    static const char *const who = "moe", *const fix = "set H3_MOE_GEMM=wgmma1 or mma";
    CUtensorMap mg, md;
    if (cu_tile_map(&mg, gu, H, H, E * 2 * F, who, "gate_up", fix, d) != H3_OK ||
        cu_tile_map(&md, dn, F, F, E * H, who, "down", fix, d) != H3_OK)
      return H3_ERR;
    int Ei = (int)E;
    long long units = moe_gemm_slots(T, k, E); /* units <= m-tile slots */
    long long c1 = moe_wgmma_clusters(s, units * (F / 128)), c2 = moe_wgmma_clusters(s, units * (H / 256));
    void *a1[] = {&mg, &h, &gu, &lists, &counts, &act, &T, &H, &F, &k, &Ei, &alpha, &limit};
    void *a2[] = {&md, &dn, &lists, &counts, &act, &y, &T, &H, &F, &k, &Ei};
    int64_t g1[3] = {2 * c1, 1, 1}, g2[3] = {2 * c2, 1, 1}, bw[3] = {MOE_WGMMA_THREADS, 1, 1};
    if (cu_launch(s, kg[0], g1, bw, gsmem, a1, d) != H3_OK || cu_launch(s, kg[1], g2, bw, gsmem, a2, d) != H3_OK)
      return H3_ERR;
  } else if (gemm) {
    int Ei = (int)E;
    long long slots = moe_gemm_slots(T, k, E);
    void *a1[] = {&h, &gu, &lists, &counts, &act, &T, &H, &F, &k, &Ei, &alpha, &limit};
    int64_t g1[3] = {slots, wg ? F / 128 : F / 64, 1}; /* 128 or 64 gate outputs (and their up) */
    void *a2[] = {&dn, &lists, &counts, &act, &y, &T, &H, &F, &k, &Ei};
    int64_t g2[3] = {slots, wg ? H / 256 : H / 128, 1};
    if (cu_launch(s, kg[0], g1, b256, gsmem, a1, d) != H3_OK ||
        cu_launch(s, kg[1], g2, b256, gsmem, a2, d) != H3_OK)
      return H3_ERR;
  } else if (mma) {
    void *rl = by_slot ? NULL : lists;
    void *a1[] = {&h, &gu, &rl, &counts, &ids, &act, &T, &H, &F, &E, &k, &alpha, &limit};
    int64_t g1[3] = {by_slot ? k : E, F / 16, 1};
    void *a2[] = {&dn, &rl, &counts, &ids, &act, &y, &T, &H, &F, &E, &k};
    int64_t g2[3] = {by_slot ? k : E, H / 32, 1};
    /* the down step programmatically after the gate-up step: its blocks prefetch their first
       weights while the gate-up's last blocks run (kernels/m31_moe.cu) */
    if (cu_launch(s, kn[1], g1, mma_block, 0, a1, d) != H3_OK ||
        cu_launch_pdl(s, kn[2], g2, mma_block, 0, a2, d) != H3_OK)
      return H3_ERR;
  } else {
    int vec_h = H % 8 == 0, vec_f = F % 8 == 0;
    void *a1[] = {&h, &gu, &lists, &counts, &act, &T, &H, &F, &k, &alpha, &limit, &vec_h};
    int64_t g1[3] = {E, (F + 15) / 16, 1};
    void *a2[] = {&dn, &lists, &counts, &act, &y, &T, &H, &F, &k, &vec_f};
    int64_t g2[3] = {E, (H + 15) / 16, 1};
    if (cu_launch(s, kn[1], g1, b256, 0, a1, d) != H3_OK || cu_launch(s, kn[2], g2, b256, 0, a2, d) != H3_OK)
      return H3_ERR;
  }
  void *a3[] = {&ids, &w, &y, &o, &H, &k};
  int64_t g3[3] = {T, (H + 2047) / 2048, 1}; /* 8 outputs per thread */
  return cu_launch(s, kn[3], g3, b256, 0, a3, d);
}

/* markov_draft's scratch: e [S, r] f32, part_v [S, nblk] f32, part_i [S, nblk] int (each
 * part 256-byte aligned), nblk = ceil(V / 256): the step's grid (kernels/m31_moe.cu's
 * H3M_MK_ROWS). */
enum { MARKOV_ROWS = 256, MARKOV_STAGES_BYTES = 2 * MARKOV_ROWS * 144 /* H3M_MK_RS */ };

typedef struct {
  size_t e, part_v, part_i, total;
  int nblk;
} markov_layout;

static markov_layout markov_layout_of(int64_t S, int64_t V, int64_t r) {
  markov_layout l = {0};
  l.nblk = (int)((V + MARKOV_ROWS - 1) / MARKOV_ROWS);
  l.part_v = cu_align256((size_t)S * (size_t)r * 4);
  l.part_i = l.part_v + cu_align256((size_t)S * (size_t)l.nblk * 4);
  l.total = l.part_i + cu_align256((size_t)S * (size_t)l.nblk * 4);
  return l;
}

static int64_t markov_seqs(const h3_op *op) {
  const h3_type *p = &op->operands[3]->type;
  return p->rank ? p->dims[0] : 1;
}

size_t cu_m31_markov_scratch_bytes(const h3_op *op) {
  return markov_layout_of(markov_seqs(op), op->operands[0]->type.dims[1], op->operands[1]->type.dims[1]).total;
}

/* Whether markov_draft's steps run on tensor cores (H3_MARKOV_MMA_NAME): bf16 w2, r % 16 == 0
 * and, by default, from MARKOV_MMA_SEQS chains on. Timed on the H200 (2026-12-03, γ = 8, forced
 * acceptance 4): a round at 8 sequences 8.60 -> 7.77 ms, at 64 19.76 -> 16.19 ms. Below 8 the
 * fp32 form stays (the mma's 16-chain m-tile mostly empty; not timed there), bitwise the CPU's.
 * H3_MARKOV_FORM=mma or fp32 forces a form (tests compare both). */
enum { MARKOV_MMA_SEQS = 8 };

static bool markov_mma(h3_dtype w, int r, int seqs) {
  const int form = cu_env_form("H3_MARKOV_FORM", (const char *const[]){"mma", "fp32", NULL});
  if (w != H3_BF16 || r % 16) return false;
  if (form >= 0) return form == 0;
  return seqs >= MARKOV_MMA_SEQS;
}

/* The step's dynamic shared memory: the two stages of w2 rows, then e of a pass: the fp32
 * form min(S, 8) sequences f32 (H3M_MKF_SQ), the mma form 64 sequences bf16 at a stride of ws
 * = r + 8 (H3M_MK_SEQS). */
static size_t markov_smem(bool mma, int S, int r) {
  if (mma) return MARKOV_STAGES_BYTES + (size_t)64 * (size_t)(r + 8) * 2;
  return MARKOV_STAGES_BYTES + (size_t)(S < 8 ? S : 8) * (size_t)r * 4;
}

h3_status cu_m31_run_markov(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                            const h3_tensor *out, h3_diag *d) {
  int S = (int)markov_seqs(op); /* the chains, in lock step: a step launch covers all of them */
  int G = S ? (int)(in[0].type.dims[0] / S) : 0, r = (int)in[1].type.dims[1];
  long long V = in[0].type.dims[1];
  bool mma = markov_mma(in[2].type.dtype, r, S);
  markov_layout l = markov_layout_of(S, V, r);
  int ws = r + 8; /* the mma form's e rows (4 x an odd number of words: conflict-free ldmatrix) */
  size_t smem = markov_smem(mma, S, r);
  char step[128], pick[128], lines[320], defs[640];
  snprintf(step, sizeof step, "h3cu_markov%s_%s_%s_%s", mma ? "m" : "s", DN(in[0].type.dtype),
           DN(in[2].type.dtype), DN(out[0].type.dtype));
  snprintf(pick, sizeof pick, "h3cu_markovp_%s_%s", DN(in[1].type.dtype), DN(in[3].type.dtype));
  snprintf(lines, sizeof lines, "#define %s %s\n#define H3_MARKOV_PICK_NAME %s\n",
           mma ? "H3_MARKOV_MMA_NAME" : "H3_MARKOV_STEP_NAME", step, pick);
  if (in[1].type.dtype != in[2].type.dtype)
    return cu_op_error(d, op, CU_HINT_UNSUPPORTED, "w1 and w2 of one dtype");
  cu_m31_moe_defines(defs, sizeof defs, lines, H3_F32, in[1].type.dtype, in[0].type.dtype,
                     in[3].type.dtype, out[0].type.dtype);
  const char *names[2] = {step, pick};
  cu_kernel *kn[2];
  if (cu_m31_kernels(s, op, "m31_moe.cu", defs, 2, names, kn, d) != H3_OK ||
      cu_m31_smem(s, op, kn[0], smem, d) != H3_OK)
    return H3_ERR;
  if (S == 0 || G == 0) return H3_OK;
  const void *b = in[0].data, *w1 = in[1].data, *w2 = in[2].data, *prev = in[3].data;
  void *z = out[0].data, *dr = out[1].data;
  char *sc = scratch;
  void *e = sc + l.e, *pv = sc + l.part_v, *pi = sc + l.part_i;
  int kk = 0, nblk = l.nblk;
  void *ap[] = {&w1, &prev, &pv, &pi, &e, &dr, &kk, &G, &V, &r, &nblk};
  void *am[] = {&b, &w2, &e, &z, &pv, &pi, &kk, &G, &V, &r, &ws, &S};
  void *af[] = {&b, &w2, &e, &z, &pv, &pi, &kk, &G, &V, &r, &S};
  int64_t gp[3] = {S, 1, 1}, gs[3] = {nblk, 1, 1}, block[3] = {M31_THREADS, 1, 1};
  if (cu_launch(s, kn[1], gp, block, 0, ap, d) != H3_OK) return H3_ERR; /* e from prev */
  for (int k = 0; k < G; k++) {
    kk = k; /* cu_launch reads the arguments when it is called */
    if (cu_launch(s, kn[0], gs, block, (int64_t)smem, mma ? am : af, d) != H3_OK) return H3_ERR;
    kk = k + 1;
    if (cu_launch(s, kn[1], gp, block, 0, ap, d) != H3_OK) return H3_ERR;
  }
  return H3_OK;
}


/* spec_accept's scratch: the greedy rows' argmax pieces (kernels/m31_moe.cu's
 * H3_SPEC_TOP2_NAME), [rows = S (G + 1)][nc] each of best f32, second f32, index int, 256-byte
 * aligned, nc = ceil(V / 4096) (H3M_ACC_CHUNK). */
typedef struct {
  size_t v, s, i, total;
  long long nc;
} accept_layout;

static accept_layout accept_layout_of(long long rows, long long V) {
  accept_layout l = {.nc = (V + 4095) / 4096};
  const size_t part = cu_align256((size_t)(rows * l.nc) * 4);
  l.v = 0, l.s = part, l.i = 2 * part, l.total = 3 * part;
  return l;
}

size_t cu_m31_accept_scratch_bytes(const h3_op *op) {
  const h3_type *x = &op->operands[0]->type;
  return accept_layout_of(x->dims[0], x->dims[1]).total;
}

h3_status cu_m31_run_spec_accept(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                                 const h3_tensor *out, h3_diag *d) {
  int S = (int)in[2].type.dims[0], G = S ? (int)(in[1].type.dims[0] / S) : 0;
  long long V = in[0].type.dims[1];
  h3_dtype it = in[1].type.dtype;
  if (in[3].type.dtype != it || in[4].type.dtype != it)
    return cu_op_error(d, op, CU_HINT_UNSUPPORTED, "draft, seed and pos of one integer dtype");
  if (V > INT32_MAX)
    return cu_op_error(d, op, CU_HINT_UNSUPPORTED, "%lld logits a row (at most 2^31 - 1)", V);
  char name[128], top2[128], lines[320], defs[640];
  snprintf(name, sizeof name, "h3cu_spec_accept_%s", DN(it));
  snprintf(top2, sizeof top2, "h3cu_spec_top2_%s", DN(it));
  snprintf(lines, sizeof lines, "#define H3_SPEC_ACCEPT_NAME %s\n#define H3_SPEC_TOP2_NAME %s\n", name, top2);
  cu_m31_moe_defines(defs, sizeof defs, lines, H3_F32, H3_F32, H3_F32, it, H3_F32);
  const char *names[2] = {top2, name};
  cu_kernel *kn[2];
  if (cu_m31_kernels(s, op, "m31_moe.cu", defs, 2, names, kn, d) != H3_OK) return H3_ERR;
  if (S == 0) return H3_OK;
  if (!scratch) return cu_op_error(d, op, NULL, "no scratch (the op was not prepared)");
  const long long rows = in[0].type.dims[0];
  if (rows > 65535) return cu_op_error(d, op, CU_HINT_UNSUPPORTED, "%lld logit rows (at most 65535)", rows);
  const accept_layout l = accept_layout_of(rows, V);
  const void *x = in[0].data, *dr = in[1].data, *t = in[2].data, *sd = in[3].data, *ps = in[4].data;
  void *pv = (char *)scratch + l.v, *pp = (char *)scratch + l.s, *pi = (char *)scratch + l.i;
  void *n = out[0].data, *tk = out[1].data, *mg = out[2].data;
  int nc = (int)l.nc;
  void *a1[] = {&x, &t, &pv, &pp, &pi, &G, &V};
  void *a2[] = {&x, &dr, &t, &sd, &ps, &pv, &pp, &pi, &n, &tk, &mg, &G, &V, &nc};
  int64_t g1[3] = {nc, rows, 1}, g2[3] = {S, 1, 1}, block[3] = {256, 1, 1};
  if (cu_launch(s, kn[0], g1, block, 0, a1, d) != H3_OK) return H3_ERR;
  return cu_launch(s, kn[1], g2, block, 0, a2, d);
}

size_t cu_m31_moe_scratch_bytes(const h3_op *op) {
  const h3_type *h = &op->operands[0]->type, *gu = &op->operands[1]->type;
  return moe_layout(h->dims[0], op->operands[3]->type.dims[1], h->dims[1], gu->dims[1] / 2,
                    gu->dims[0], h3_op_attr_int(op, "ranks", 1) > 1, cu_m31_moe_lt(op)).total;
}
