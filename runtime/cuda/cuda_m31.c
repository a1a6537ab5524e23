/* cuda_m31.c: launches of MiniMax-M3.1's hand kernels on the cuda backend: router_topk,
 * moe and markov_draft (kernels/m31_moe.cu), paged / block / sparse attention and
 * index_topk (kernels/m31_msa.cu). Each file is instantiated per dtype combination of the
 * op (macro lines in front of it), compiled through the kernel cache on first use and
 * registered by name. Three ops run in several launches through a device scratch that the
 * op's record owns (allocated when the op is prepared, at plan load; cu_m31_scratch_bytes):
 * moe (a kernel that lists each expert's rows, expert-major products on tensor cores or
 * CUDA cores into bf16 activations and expert outputs, then the combine), the
 * attentions (partial results of the key splits, then their combine) and index_topk (block
 * scores, then the selection). The kernels read positions, page tables, selections and
 * expert ids on the device and clamp nothing the CPU reference would report: an
 * out-of-range id there is an error on the CPU backend and undefined here (the plan's own
 * ops produce valid ones). Nothing is allocated per run, so the ops can be captured in
 * CUDA graphs.
 */
#include "cuda_internal.h"

#include <stdio.h>
#include <string.h>

enum { M31_THREADS = 256, M31_ROUTER_THREADS = 1024, M31_ATT_THREADS = 128 };

/* The n kernels `names` of `file` (instantiated by `defines`), compiled together on first use. */
static h3_status m31_kernels(cu_state *s, const h3_op *op, const char *file, const char *defines,
                             int n, const char *const *names, cu_kernel **out, h3_diag *d) {
  bool all = true;
  for (int i = 0; i < n; i++) {
    out[i] = cu_kernel_find(s, names[i]);
    if (out[i] && !out[i]->fn)
      return cu_op_error(d, op, NULL, "kernel %s failed to load earlier", names[i]);
    all = all && out[i];
  }
  return all ? H3_OK : cu_compile_tu(s, defines, file, true, n, names, out, d);
}

/* The macro lines of m31_moe.cu: `names` (its "#define H3_*_NAME name" lines) and the types. */
static void moe_defines(char *defs, size_t n, const char *names, h3_dtype h, h3_dtype w,
                        h3_dtype b, h3_dtype i, h3_dtype o) {
  snprintf(defs, n, "%s#define H_T %s\n#define W_T %s\n#define B_T %s\n#define I_T %s\n#define O_T %s\n",
           names, h3_kernel_ctype(h), h3_kernel_ctype(w), h3_kernel_ctype(b), h3_kernel_ctype(i),
           h3_kernel_ctype(o));
}

/* Sets a kernel's dynamic shared memory limit when it needs more than the default 48 KiB. */
static h3_status m31_smem(cu_state *s, const h3_op *op, cu_kernel *k, size_t bytes, h3_diag *d) {
  if (bytes <= 48 * 1024) return H3_OK;
  if (bytes > s->smem_optin)
    return cu_op_error(d, op, NULL, "needs %zu bytes of shared memory; the device has %zu", bytes,
                       s->smem_optin);
  CU_CHECK(d, cudaKernelSetAttributeForDevice(k->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              (int)bytes, s->device), k->name);
  return H3_OK;
}

#define DN(x) h3_dtype_name(x)

static h3_status run_router(cu_state *s, const h3_op *op, const h3_tensor *in, const h3_tensor *out,
                            h3_diag *d) {
  long long T = in[0].type.dims[0], H = in[0].type.dims[1];
  int E = (int)in[1].type.dims[0], k = (int)out[0].type.dims[1];
  if (k > E || E > 256) return cu_op_error(d, op, NULL, "k = %d of %d experts (at most 256)", k, E);
  char name[128], lines[192], defs[512];
  snprintf(name, sizeof name, "h3cu_router_%s_%s_%s_%s_%s", DN(in[0].type.dtype), DN(in[1].type.dtype),
           DN(in[2].type.dtype), DN(out[0].type.dtype), DN(out[1].type.dtype));
  snprintf(lines, sizeof lines, "#define H3_ROUTER_NAME %s\n", name);
  moe_defines(defs, sizeof defs, lines, in[0].type.dtype, in[1].type.dtype, in[2].type.dtype,
              out[0].type.dtype, out[1].type.dtype);
  const char *names[1] = {name};
  cu_kernel *kn;
  size_t smem = (size_t)(H + E) * 4; /* the row and the scores */
  if (m31_kernels(s, op, "m31_moe.cu", defs, 1, names, &kn, d) != H3_OK ||
      m31_smem(s, op, kn, smem, d) != H3_OK)
    return H3_ERR;
  if (T == 0) return H3_OK;
  float scale = (float)h3_op_attr_float(op, "scale", 1.0);
  const void *h = in[0].data, *w = in[1].data, *b = in[2].data;
  void *ids = out[0].data, *wts = out[1].data;
  void *args[] = {&h, &w, &b, &ids, &wts, &H, &E, &k, &scale};
  int64_t grid[3] = {T, 1, 1}, block[3] = {M31_ROUTER_THREADS, 1, 1};
  return cu_launch(s, kn, grid, block, (int64_t)smem, args, d);
}

/* Whether moe runs on tensor cores: bf16 rows and weights, widths multiples of 128. */
static bool moe_mma(const h3_type *h, const h3_type *gu, const h3_type *dn) {
  long long H = h->dims[1], F = gu->dims[1] / 2;
  return h->dtype == H3_BF16 && gu->dtype == H3_BF16 && dn->dtype == H3_BF16 && H % 128 == 0 &&
         F % 128 == 0;
}

/* moe's scratch, 256-byte aligned parts: the activations act [T * k, F] and the expert
 * outputs y [T * k, H] (bf16), the experts' row counts [E] and row lists [E, T] (int). */
typedef struct {
  size_t act, y, counts, lists, total;
} moe_scratch;

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

static moe_scratch moe_layout(long long T, long long k, long long H, long long F, long long E) {
  moe_scratch m = {0};
  m.y = align256((size_t)(T * k * F) * 2);
  m.counts = m.y + align256((size_t)(T * k * H) * 2);
  m.lists = m.counts + align256((size_t)E * 4);
  m.total = m.lists + (size_t)(E * T) * 4;
  return m;
}

static h3_status run_moe(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                         const h3_tensor *out, h3_diag *d) {
  long long T = in[0].type.dims[0], H = in[0].type.dims[1], F = in[1].type.dims[1] / 2;
  long long E = in[1].type.dims[0];
  int k = (int)in[3].type.dims[1];
  if (k > 16) return cu_op_error(d, op, NULL, "k = %d experts per row (at most 16)", k);
  if (T > (1ll << 26)) return cu_op_error(d, op, NULL, "%lld rows (at most 2^26)", T);
  bool mma = moe_mma(&in[0].type, &in[1].type, &in[2].type);
  /* the kernels of each form: the row lists, steps 1 and 2, the combine */
  static const char *const part[2][4] = {{"r", "", "d", "c"}, {"r", "m", "md", "c"}};
  static const char *const macro[2][4] = {{"MOE_ROUTE", "MOE", "MOE_DOWN", "MOE_COMBINE"},
                                          {"MOE_ROUTE", "MOE_MMA", "MOE_MMA_DOWN", "MOE_COMBINE"}};
  char name[4][128], lines[520], defs[840];
  int n = 0;
  for (int i = 0; i < 4; i++) {
    snprintf(name[i], sizeof name[i], "h3cu_moe%s_%s_%s_%s_%s_%s", part[mma][i], DN(in[0].type.dtype),
             DN(in[1].type.dtype), DN(in[3].type.dtype), DN(in[4].type.dtype), DN(out[0].type.dtype));
    n += snprintf(lines + n, sizeof lines - (size_t)n, "#define H3_%s_NAME %s\n", macro[mma][i], name[i]);
  }
  moe_defines(defs, sizeof defs, lines, in[0].type.dtype, in[1].type.dtype, in[4].type.dtype,
              in[3].type.dtype, out[0].type.dtype);
  const char *names[4] = {name[0], name[1], name[2], name[3]};
  cu_kernel *kn[4];
  if (m31_kernels(s, op, "m31_moe.cu", defs, 4, names, kn, d) != H3_OK) return H3_ERR;
  if (T == 0) return H3_OK;
  if (!scratch) return cu_op_error(d, op, NULL, "no activation scratch (the op was not prepared)");
  float alpha = (float)h3_op_attr_float(op, "alpha", 1.702), limit = (float)h3_op_attr_float(op, "limit", 7.0);
  const void *h = in[0].data, *gu = in[1].data, *dn = in[2].data, *ids = in[3].data, *w = in[4].data;
  moe_scratch ms = moe_layout(T, k, H, F, E);
  void *o = out[0].data, *act = scratch, *y = (char *)scratch + ms.y;
  void *counts = (char *)scratch + ms.counts, *lists = (char *)scratch + ms.lists;
  int64_t b256[3] = {256, 1, 1}, warp[3] = {32, 1, 1};
  void *ar[] = {&ids, &lists, &counts, &T, &k};
  int64_t gr[3] = {E, 1, 1};
  if (cu_launch(s, kn[0], gr, b256, 0, ar, d) != H3_OK) return H3_ERR;
  if (mma) {
    void *a1[] = {&h, &gu, &lists, &counts, &act, &T, &H, &F, &k, &alpha, &limit};
    int64_t g1[3] = {E, F / 16, 1};
    void *a2[] = {&dn, &lists, &counts, &act, &y, &T, &H, &F, &k};
    int64_t g2[3] = {E, H / 32, 1};
    if (cu_launch(s, kn[1], g1, warp, 0, a1, d) != H3_OK || cu_launch(s, kn[2], g2, warp, 0, a2, d) != H3_OK)
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
  int64_t g3[3] = {T, (H + 255) / 256, 1};
  return cu_launch(s, kn[3], g3, b256, 0, a3, d);
}

static h3_status run_markov(cu_state *s, const h3_op *op, const h3_tensor *in, const h3_tensor *out,
                            h3_diag *d) {
  int G = (int)in[0].type.dims[0], r = (int)in[1].type.dims[1];
  long long V = in[0].type.dims[1];
  char name[128], lines[192], defs[512];
  snprintf(name, sizeof name, "h3cu_markov_%s_%s_%s_%s", DN(in[0].type.dtype), DN(in[1].type.dtype),
           DN(in[3].type.dtype), DN(out[0].type.dtype));
  snprintf(lines, sizeof lines, "#define H3_MARKOV_NAME %s\n", name);
  moe_defines(defs, sizeof defs, lines, H3_F32, in[1].type.dtype, in[0].type.dtype,
              in[3].type.dtype, out[0].type.dtype);
  const char *names[1] = {name};
  cu_kernel *kn;
  if (m31_kernels(s, op, "m31_moe.cu", defs, 1, names, &kn, d) != H3_OK ||
      m31_smem(s, op, kn, (size_t)r * 4, d) != H3_OK)
    return H3_ERR;
  const void *b = in[0].data, *w1 = in[1].data, *w2 = in[2].data, *prev = in[3].data;
  void *z = out[0].data, *dr = out[1].data;
  void *args[] = {&b, &w1, &w2, &prev, &z, &dr, &G, &V, &r};
  int64_t grid[3] = {1, 1, 1}, block[3] = {M31_THREADS, 1, 1};
  return cu_launch(s, kn, grid, block, (int64_t)r * 4, args, d);
}

/* The macro lines of m31_msa.cu: `names` (its "#define H3_*_NAME name" lines), the q / key /
 * index / output types and the attention's register shape (dims per lane, heads per warp). */
static void msa_defines(char *defs, size_t n, const char *names, h3_dtype q, h3_dtype k,
                        h3_dtype ix, h3_dtype o, int dc, int hpw) {
  snprintf(defs, n, "%s#define Q_T %s\n#define K_T %s\n#define IX_T %s\n#define O_T %s\n"
           "#define H3M_DC %d\n#define H3M_HPW %d\n", names, h3_kernel_ctype(q), h3_kernel_ctype(k),
           h3_kernel_ctype(ix), h3_kernel_ctype(o), dc, hpw);
}

/* Key splits of the paged / block / sparse attention (flash decoding): enough blocks of
 * (row, kv head, split) to fill the GPU when there are few rows, one split when there are
 * many. */
static int att_splits(long long T, long long Hk) {
  long long s = 1024 / (T * Hk > 0 ? T * Hk : 1);
  return (int)(s < 1 ? 1 : s > 64 ? 64 : s); /* <= H3M_MAX_SPLITS of m31_msa.cu */
}

static const h3_type *att_q(const h3_op *op) { return &op->operands[0]->type; }

/* The partial results [T, Hq, S, D + 2] f32 of an attention op. */
static size_t att_part_bytes(const h3_op *op) {
  const h3_type *qt = att_q(op), *ct = &op->operands[1]->type;
  long long T = qt->dims[0], Hq = qt->dims[1], D = qt->dims[2], Hk = ct->dims[ct->rank - 2];
  return (size_t)(T * Hq * att_splits(T, Hk) * (D + 2)) * 4;
}

static h3_status run_kv_attention(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                                  const h3_tensor *out, h3_diag *d) {
  int kind = op->code == H3_OP_PAGED_ATTENTION ? 0 : op->code == H3_OP_BLOCK_ATTENTION ? 1 : 2;
  const h3_type *qt = &in[0].type, *ct = &in[1].type;
  long long T = qt->dims[0];
  int Hq = (int)qt->dims[1], D = (int)qt->dims[2], Hk = (int)ct->dims[ct->rank - 2];
  int page = (int)h3_op_attr_int(op, "page", ct->dims[1]);
  if (D > 256 || Hk <= 0 || Hq % Hk != 0 || Hq / Hk > 16 || page <= 0)
    return cu_op_error(d, op, NULL, "head_dim %d (at most 256), %d q heads over %d kv heads (at "
                       "most 16 per kv head), page %d", D, Hq, Hk, page);
  const h3_tensor *ix = kind == 2 ? &in[4] : &in[3]; /* pos, or ctx_len */
  const h3_tensor *ptt = kind == 2 ? &in[5] : &in[4]; /* the page table */
  if ((kind == 1 && (in[5].type.dtype != ct->dtype || in[6].type.dtype != ct->dtype)) ||
      in[2].type.dtype != ct->dtype)
    return cu_op_error(d, op, NULL, "k and v caches (and block rows) of one dtype");
  if (ptt->type.dtype != ix->type.dtype || (kind == 2 && in[3].type.dtype != ix->type.dtype))
    return cu_op_error(d, op, NULL, "positions, page table and selections of one integer dtype");
  int dc = (D + 31) / 32, hpw = (Hq / Hk + 3) / 4;
  char name[2][128], lines[320], defs[640];
  for (int i = 0; i < 2; i++)
    snprintf(name[i], sizeof name[i], "h3cu_kvatt%s_%s_%s_%s_%s_d%d_h%d", i ? "c" : "",
             DN(qt->dtype), DN(ct->dtype), DN(ix->type.dtype), DN(out[0].type.dtype), dc, hpw);
  snprintf(lines, sizeof lines, "#define H3_KV_ATT_NAME %s\n#define H3_KV_COMBINE_NAME %s\n",
           name[0], name[1]);
  msa_defines(defs, sizeof defs, lines, qt->dtype, ct->dtype, ix->type.dtype, out[0].type.dtype,
              dc, hpw);
  const char *names[2] = {name[0], name[1]};
  cu_kernel *kn[2];
  if (m31_kernels(s, op, "m31_msa.cu", defs, 2, names, kn, d) != H3_OK) return H3_ERR;
  if (T == 0) return H3_OK;
  if (!scratch) return cu_op_error(d, op, NULL, "no partial-result scratch (the op was not prepared)");
  const void *q = in[0].data, *kc = in[1].data, *vc = in[2].data, *kb = NULL, *vb = NULL;
  const void *pos = NULL, *pt = NULL, *sel = NULL, *ctx = NULL;
  int topk = 0;
  if (kind == 0) pos = in[3].data, pt = in[4].data;
  if (kind == 1) ctx = in[3].data, pt = in[4].data, kb = in[5].data, vb = in[6].data;
  if (kind == 2) {
    sel = in[3].data, pos = in[4].data, pt = in[5].data;
    topk = (int)in[3].type.dims[in[3].type.rank - 1];
    if (topk > 64) return cu_op_error(d, op, NULL, "%d selected blocks per row (at most 64)", topk);
  }
  float scale = (float)h3_op_attr_float(op, "scale", 1.0);
  int S = att_splits(T, Hk), pt_rows = ptt->type.rank == 2 ? (int)ptt->type.dims[0] : 1;
  long long NP = ptt->type.dims[ptt->type.rank - 1];
  void *o = out[0].data, *part = scratch;
  void *args[] = {&q, &kc, &vc, &kb, &vb, &pos, &pt, &sel, &ctx, &part, &kind, &T,
                  &Hq, &Hk, &D, &page, &topk, &scale, &pt_rows, &NP};
  int64_t grid[3] = {T, Hk, S}, block[3] = {M31_ATT_THREADS, 1, 1};
  if (cu_launch(s, kn[0], grid, block, 0, args, d) != H3_OK) return H3_ERR;
  void *args2[] = {&part, &o, &Hq, &D, &S};
  int64_t grid2[3] = {T, Hq, 1};
  return cu_launch(s, kn[1], grid2, block, 0, args2, d);
}

/* index_topk's block count per row: blocks of `block` keys over the page table's positions. */
static long long topk_blocks(const h3_op *op) {
  const h3_type *pt = &op->operands[3]->type;
  long long page = op->operands[1]->type.dims[1], NP = pt->dims[pt->rank - 1];
  long long block = h3_op_attr_int(op, "block", page);
  return block > 0 ? (NP * page + block - 1) / block : 0;
}

static h3_status run_index_topk(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                                const h3_tensor *out, h3_diag *d) {
  const h3_type *qt = &in[0].type, *kt = &in[1].type;
  long long T = qt->dims[0];
  int Hi = (int)qt->dims[1], D = (int)qt->dims[2], page = (int)kt->dims[1];
  int block = (int)h3_op_attr_int(op, "block", page);
  int topk = (int)out[0].type.dims[out[0].type.rank - 1];
  if (block <= 0 || Hi > 8) return cu_op_error(d, op, NULL, "block %d (positive), %d index heads (at most 8)", block, Hi);
  if (in[2].type.dtype != out[0].type.dtype || in[3].type.dtype != out[0].type.dtype)
    return cu_op_error(d, op, NULL, "positions, page table and the selection of one integer dtype");
  int NB = (int)topk_blocks(op);
  size_t q_smem = (size_t)Hi * D * 4, sel_smem = (size_t)NB * 8;
  char name[2][128], lines[320], defs[640];
  for (int i = 0; i < 2; i++)
    snprintf(name[i], sizeof name[i], "h3cu_topk%s_%s_%s_%s", i ? "" : "s", DN(qt->dtype),
             DN(kt->dtype), DN(out[0].type.dtype));
  snprintf(lines, sizeof lines, "#define H3_TOPK_SCORE_NAME %s\n#define H3_TOPK_NAME %s\n", name[0],
           name[1]);
  msa_defines(defs, sizeof defs, lines, qt->dtype, kt->dtype, out[0].type.dtype, qt->dtype, 1, 1);
  const char *names[2] = {name[0], name[1]};
  cu_kernel *kn[2];
  if (m31_kernels(s, op, "m31_msa.cu", defs, 2, names, kn, d) != H3_OK ||
      m31_smem(s, op, kn[0], q_smem, d) != H3_OK || m31_smem(s, op, kn[1], sel_smem, d) != H3_OK)
    return H3_ERR;
  if (T == 0) return H3_OK;
  if (!scratch) return cu_op_error(d, op, NULL, "no score scratch (the op was not prepared)");
  const void *iq = in[0].data, *ik = in[1].data, *pos = in[2].data, *pt = in[3].data;
  void *o = out[0].data, *score = scratch;
  const h3_type *ptt = &in[3].type;
  int pt_rows = ptt->rank == 2 ? (int)ptt->dims[0] : 1;
  long long NP = ptt->dims[ptt->rank - 1];
  void *args1[] = {&iq, &ik, &pos, &pt, &score, &Hi, &D, &page, &block, &NB, &pt_rows, &NP};
  int64_t grid1[3] = {T, NB, 1}, blk[3] = {128, 1, 1};
  if (cu_launch(s, kn[0], grid1, blk, (int64_t)q_smem, args1, d) != H3_OK) return H3_ERR;
  void *args2[] = {&score, &pos, &o, &Hi, &block, &NB, &topk};
  int64_t grid2[3] = {T, Hi, 1};
  return cu_launch(s, kn[1], grid2, blk, (int64_t)sel_smem, args2, d);
}

const char *cu_m31_check_defines(const char *file) {
  static char moe[640], msa[640]; /* every kernel of the file, the models' dtypes */
  if (!strcmp(file, "m31_moe.cu")) {
    moe_defines(moe, sizeof moe,
                "#define H3_ROUTER_NAME h3cu_router_check\n#define H3_MOE_NAME h3cu_moe_check\n"
                "#define H3_MOE_DOWN_NAME h3cu_moed_check\n#define H3_MOE_COMBINE_NAME h3cu_moec_check\n"
                "#define H3_MOE_MMA_NAME h3cu_moem_check\n#define H3_MOE_MMA_DOWN_NAME h3cu_moemd_check\n"
                "#define H3_MOE_ROUTE_NAME h3cu_moer_check\n"
                "#define H3_MARKOV_NAME h3cu_markov_check\n",
                H3_BF16, H3_BF16, H3_F32, H3_I32, H3_F32);
    return moe;
  }
  if (!strcmp(file, "m31_msa.cu")) {
    msa_defines(msa, sizeof msa,
                "#define H3_KV_ATT_NAME h3cu_kvatt_check\n#define H3_KV_COMBINE_NAME h3cu_kvattc_check\n"
                "#define H3_TOPK_SCORE_NAME h3cu_topks_check\n#define H3_TOPK_NAME h3cu_topk_check\n",
                H3_BF16, H3_BF16, H3_I32, H3_BF16, 4, 4);
    return msa;
  }
  return NULL;
}

bool cu_m31_runs(const h3_op *op) {
  switch (op->code) {
  case H3_OP_ROUTER_TOPK: case H3_OP_MOE: case H3_OP_MARKOV_DRAFT: case H3_OP_INDEX_TOPK:
  case H3_OP_PAGED_ATTENTION: case H3_OP_BLOCK_ATTENTION: case H3_OP_SPARSE_ATTENTION:
    return true;
  default:
    return false;
  }
}

size_t cu_m31_scratch_bytes(const h3_op *op) {
  const h3_type *t0 = &op->operands[0]->type;
  switch (op->code) {
  case H3_OP_MOE: {
    const h3_type *gu = &op->operands[1]->type;
    return moe_layout(t0->dims[0], op->operands[3]->type.dims[1], t0->dims[1], gu->dims[1] / 2,
                      gu->dims[0]).total;
  }
  case H3_OP_PAGED_ATTENTION: case H3_OP_BLOCK_ATTENTION: case H3_OP_SPARSE_ATTENTION:
    return att_part_bytes(op);
  case H3_OP_INDEX_TOPK: /* scores [T, Hi, NB] f32 */
    return (size_t)(t0->dims[0] * t0->dims[1] * topk_blocks(op)) * 4;
  default:
    return 0;
  }
}

h3_status cu_m31_run(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                     const h3_tensor *out, h3_diag *d) {
  switch (op->code) {
  case H3_OP_ROUTER_TOPK: return run_router(s, op, in, out, d);
  case H3_OP_MOE: return run_moe(s, op, scratch, in, out, d);
  case H3_OP_MARKOV_DRAFT: return run_markov(s, op, in, out, d);
  case H3_OP_INDEX_TOPK: return run_index_topk(s, op, scratch, in, out, d);
  case H3_OP_PAGED_ATTENTION:
  case H3_OP_BLOCK_ATTENTION:
  case H3_OP_SPARSE_ATTENTION: return run_kv_attention(s, op, scratch, in, out, d);
  default: return cu_op_error(d, op, NULL, "not an M3.1 hand-kernel op");
  }
}
