/* cuda_m31_msa.c: launches of paged / block / sparse attention and index_topk
 * (kernels/m31_msa.cu) on the cuda backend. The attentions write the partial results of
 * their key splits into the op's scratch (cu_m31_att_scratch_bytes) and combine them: the
 * tensor-core form in the same launch (the last block of each row and kv head, found by a
 * counter in the scratch), the CUDA-core form in a second launch. index_topk scores blocks
 * into its scratch and selects: for decode rows in the same launch (a counter per row), for
 * rows of one table in a second. The counters are zeroed before an op's first run (never
 * captured in a graph) and every launch leaves them at zero.
 */
#include "cuda_m31.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The macro lines of m31_msa.cu: `names` (its "#define H3_*_NAME name" lines), the q / key /
 * index / output types and the attention's register shape (dims per lane, heads per warp). */
void cu_m31_msa_defines(char *defs, size_t n, const char *names, h3_dtype q, h3_dtype k,
                        h3_dtype ix, h3_dtype o, int dc, int hpw) {
  int len = snprintf(defs, n, "%s#define Q_T %s\n#define K_T %s\n#define IX_T %s\n#define O_T %s\n"
                     "#define H3M_DC %d\n#define H3M_HPW %d\n", names, h3_kernel_ctype(q),
                     h3_kernel_ctype(k), h3_kernel_ctype(ix), h3_kernel_ctype(o), dc, hpw);
  cu_m31_defines_fit(defs, n, len);
}

/* Key splits of the CUDA-core attention (flash decoding): enough blocks of (row, kv head,
 * split) to fill the GPU when there are few rows, one split when there are many. */
static int att_splits(long long T, long long Hk) {
  long long s = 1024 / (T * Hk > 0 ? T * Hk : 1);
  return (int)(s < 1 ? 1 : s > 64 ? 64 : s); /* <= H3M_MAX_SPLITS of m31_msa.cu */
}

/* m31_msa.cu's H3M_BLOB (floats of a split's partial), H3M_ATT_RED (shared memory bytes per
 * warp), H3M_ATT_WARPS (the most warps of a tensor-core attention block) and H3M_ATT_CLUSTER
 * (the most splits combined in a cluster: a portable cluster) */
enum { ATT_BLOB = 16 * 128 + 32, ATT_RED = 16 * 128 * 4, ATT_MMA_WARPS = 8, ATT_CLUSTER = 8 };

/* s, or at most the positive value of environment variable `name` (a tuning override of a
 * kernel's split count over keys: decode attention and index_topk; read when the op runs). */
static long long split_cap(const char *name, long long s) {
  const char *env = getenv(name);
  long long cap = env ? atoll(env) : 0;
  return cap > 0 && cap < s ? cap : s;
}

/* The tensor-core attention's launch shape for T rows of at most `keys` keys over Hk kv
 * heads: S key splits per (row, kv head), W warps per block and whether the splits combine in
 * a cluster. Few pairs: about 128 blocks of 8 warps (one wave, a block per SM) and no more
 * splits than give each warp a 16-key tile, combined in clusters of at most ATT_CLUSTER
 * through distributed shared memory; H3_M31_ATT_COMBINE=scratch (read when the op runs)
 * combines them through the scratch instead, the last block reading the partials (8 KiB
 * each, at most 32 splits); many pairs: one split (no partials, no combine) of 4 warps, two
 * blocks per SM. */
static void att_mma_shape(long long T, long long Hk, long long keys, int *S, int *W, bool *clus) {
  long long pairs = T * Hk > 0 ? T * Hk : 1, s = 128 / pairs, most = (keys + 127) / 128;
  s = s < most ? s : most;
  s = split_cap("H3_M31_ATT_SPLITS", s);
  *clus = s > 1 && cu_env_form("H3_M31_ATT_COMBINE", (const char *const[]){"cluster", "scratch", NULL}) != 1;
  int top = *clus ? ATT_CLUSTER : 32;
  *S = (int)(s < 1 ? 1 : s > top ? top : s);
  *W = pairs * *S < 192 ? 8 : 4;
}

static const h3_type *att_q(const h3_op *op) { return &op->operands[0]->type; }

static int att_kind(const h3_op *op) { /* 0 paged, 1 block, 2 sparse */
  return op->code == H3_OP_PAGED_ATTENTION ? 0 : op->code == H3_OP_BLOCK_ATTENTION ? 1 : 2;
}

/* The most keys a row of an attention op can have: the page table's positions (and the block
 * rows), or the selected blocks'. */
static long long att_keys(const h3_op *op, int kind) {
  const h3_type *ct = &op->operands[1]->type, *pt = &op->operands[kind == 2 ? 5 : 4]->type;
  long long page = h3_op_attr_int(op, "page", ct->dims[1]);
  if (kind == 2) return op->operands[3]->type.dims[op->operands[3]->type.rank - 1] * page;
  long long T = att_q(op)->dims[0];
  return pt->dims[pt->rank - 1] * page + (kind == 1 ? h3_op_attr_int(op, "block_rows", T) : 0);
}

/* The scratch of an attention op: the CUDA-core form's partials [T, Hq, S, D + 2] f32, or the
 * tensor-core form's blobs [T, Hk, S] of ATT_BLOB floats, then its counters u32 [T, Hk],
 * whichever is larger (the form is chosen at run time). */
static size_t att_blob_bytes(long long T, long long Hk, int S) { return (size_t)(T * Hk * S) * ATT_BLOB * 4; }
static size_t att_part_bytes(const h3_op *op) {
  const h3_type *qt = att_q(op), *ct = &op->operands[1]->type;
  long long T = qt->dims[0], Hq = qt->dims[1], D = qt->dims[2], Hk = ct->dims[ct->rank - 2];
  int S, W;
  bool clus;
  att_mma_shape(T, Hk, att_keys(op, att_kind(op)), &S, &W, &clus);
  size_t core = (size_t)(T * Hq * att_splits(T, Hk) * (D + 2)) * 4;
  size_t mma = att_blob_bytes(T, Hk, S) + (size_t)(T * Hk) * 4;
  return core > mma ? core : mma;
}

h3_status cu_m31_run_kv_attention(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                                  const h3_tensor *out, h3_diag *d) {
  int kind = att_kind(op);
  const h3_type *qt = &in[0].type, *ct = &in[1].type;
  long long T = qt->dims[0];
  int Hq = (int)qt->dims[1], D = (int)qt->dims[2], Hk = (int)ct->dims[ct->rank - 2];
  int page = (int)h3_op_attr_int(op, "page", ct->dims[1]);
  if (D > 256 || Hk <= 0 || Hq % Hk != 0 || Hq / Hk > 16 || page <= 0)
    return cu_op_error(d, op, CU_HINT_UNSUPPORTED,
                       "head_dim %d (at most 256), %d q heads over %d kv heads (at "
                       "most 16 per kv head), page %d",
                       D, Hq, Hk, page);
  const h3_tensor *ix = kind == 2 ? &in[4] : &in[3]; /* pos, or ctx_len */
  const h3_tensor *ptt = kind == 2 ? &in[5] : &in[4]; /* the page table */
  if ((kind == 1 && (in[5].type.dtype != ct->dtype || in[6].type.dtype != ct->dtype)) ||
      in[2].type.dtype != ct->dtype)
    return cu_op_error(d, op, CU_HINT_UNSUPPORTED, "k and v caches (and block rows) of one dtype");
  if (ptt->type.dtype != ix->type.dtype || (kind == 2 && in[3].type.dtype != ix->type.dtype))
    return cu_op_error(d, op, CU_HINT_UNSUPPORTED,
                       "positions, page table and selections of one integer dtype");
  /* tensor cores for bf16 q / k / v, head_dim 128, groups of 16 q heads and 16-byte aligned
   * q, caches and block rows (it reads them 16 bytes at a time) */
  uintptr_t base = (uintptr_t)in[0].data | (uintptr_t)in[1].data | (uintptr_t)in[2].data;
  if (kind == 1) base |= (uintptr_t)in[5].data | (uintptr_t)in[6].data;
  bool mma = qt->dtype == H3_BF16 && ct->dtype == H3_BF16 && D == 128 && Hq / Hk == 16 &&
             base % 16 == 0;
  if (mma && cu_m31_att_tiled(op, in)) return cu_m31_run_att_tile(s, op, in, out, d); /* prefill */
  int dc = (D + 31) / 32, hpw = (Hq / Hk + 3) / 4, nk = mma ? 1 : 2;
  char name[2][128], lines[320], defs[640];
  for (int i = 0; i < nk; i++)
    snprintf(name[i], sizeof name[i], "h3cu_kvatt%s%s_%s_%s_%s_%s_d%d_h%d", mma ? "m" : "", i ? "c" : "",
             DN(qt->dtype), DN(ct->dtype), DN(ix->type.dtype), DN(out[0].type.dtype), dc, hpw);
  if (mma) snprintf(lines, sizeof lines, "#define H3_KV_ATT_MMA_NAME %s\n", name[0]);
  else snprintf(lines, sizeof lines, "#define H3_KV_ATT_NAME %s\n#define H3_KV_COMBINE_NAME %s\n", name[0], name[1]);
  cu_m31_msa_defines(defs, sizeof defs, lines, qt->dtype, ct->dtype, ix->type.dtype, out[0].type.dtype,
              dc, hpw);
  const char *names[2] = {name[0], name[1]};
  cu_kernel *kn[2];
  if (cu_m31_kernels(s, op, "m31_msa.cu", defs, nk, names, kn, d) != H3_OK ||
      (mma && cu_m31_smem(s, op, kn[0], (size_t)ATT_MMA_WARPS * ATT_RED + ATT_BLOB * 4, d) != H3_OK))
    return H3_ERR;
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
    if (topk > 64)
      return cu_op_error(d, op, CU_HINT_UNSUPPORTED, "%d selected blocks per row (at most 64)", topk);
  }
  float scale = (float)h3_op_attr_float(op, "scale", 1.0);
  int pt_per = cu_m31_pt_per(&ptt->type, T);
  /* block: ctx_len per row or one for all, blocks of brows rows (one sequence each) */
  int ctx_rows = kind == 1 && in[3].type.rank == 1;
  long long brows = h3_op_attr_int(op, "block_rows", T);
  if (kind == 1 && (brows < 1 || T % brows))
    return cu_op_error(d, op, CU_HINT_UNSUPPORTED, "block_rows %lld does not divide %lld rows", brows, T);
  long long NP = ptt->type.dims[ptt->type.rank - 1];
  void *o = out[0].data, *part = scratch;
  if (mma) { /* one launch: splits, their merge and combine; the counters follow the blobs */
    int S, W;
    bool clus;
    att_mma_shape(T, Hk, att_keys(op, kind), &S, &W, &clus);
    void *cnt = (char *)scratch + att_blob_bytes(T, Hk, S);
    /* the counters are 0 after every launch; made so here before the first (a graph capture
     * never holds an op's first run: cuda_graph.c) */
    if (S > 1 && !clus && !cu_graph_capturing(s))
      CU_CHECK(d, cudaMemsetAsync(cnt, 0, (size_t)(T * Hk) * 4, s->stream), "attention counters");
    int cl = clus;
    void *args[] = {&q, &kc, &vc, &kb, &vb, &pos, &pt, &sel, &ctx, &part, &kind, &T,
                    &Hq, &Hk, &D, &page, &topk, &scale, &pt_per, &NP, &S, &o, &cnt,
                    &ctx_rows, &brows, &cl};
    int64_t grid[3] = {T * S, Hk, 1}, block[3] = {32 * W, 1, 1};
    return cu_launch_cluster(s, kn[0], grid, block, (int64_t)W * ATT_RED + (clus ? ATT_BLOB * 4 : 0),
                             clus ? S : 1, args, d);
  }
  int S = att_splits(T, Hk);
  void *args[] = {&q, &kc, &vc, &kb, &vb, &pos, &pt, &sel, &ctx, &part, &kind, &T,
                  &Hq, &Hk, &D, &page, &topk, &scale, &pt_per, &NP, &ctx_rows, &brows};
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

/* index_topk's launch shapes (m31_msa.cu: H3M_TOPK_THREADS, H3M_TOPK_DEC_THREADS,
 * H3M_TOPK_ROWS_THREADS, H3M_TOPK_KEYS, H3M_TOPK_QV) */
enum { TOPK_THREADS = 256, TOPK_DEC_THREADS = 128, TOPK_ROWS_THREADS = 128, TOPK_KEYS = 128, TOPK_QV = 64 };

/* H3_TOPK_ROWS_NAME's dynamic shared memory: a tile of TOPK_KEYS keys and TOPK_QV vectors, f32. */
static size_t topk_rows_smem(int D) { return (size_t)(TOPK_KEYS + TOPK_QV) * (size_t)D * 4; }
/* H3_TOPK_SCORE_NAME's: the row's vectors (8 D floats at most) and TOPK_DEC_THREADS staged keys
 * of H3M_TOPK_KROW(D) elements (D rounded up to 8, then 16 bytes), later its scores (Hi NB
 * floats). */
static size_t topk_dec_smem(int D, int Hi, int NB, size_t key_bytes) {
  size_t row = (size_t)(D + 7) / 8 * 8 * key_bytes + 16;
  size_t qk = (size_t)32 * (size_t)D + TOPK_DEC_THREADS * row, sc = (size_t)Hi * (size_t)NB * 4;
  return qk > sc ? qk : sc;
}

/* Key-block splits of a score kernel: about 1024 blocks over `units` (row tiles or rows), at
 * most `cap` (an empty block still takes a block slot) and NB. */
static int topk_splits(long long units, int NB, int cap) {
  long long s = 1024 / (units > 0 ? units : 1);
  if (s > NB) s = NB;
  s = split_cap("H3_M31_TOPK_SPLITS", s);
  return (int)(s < 1 ? 1 : s > cap ? cap : s);
}

/* Whether index_topk runs on H3_TOPK_ROWS_NAME (then H3_TOPK_NAME): rows of one table, at
 * least four tiles of them (fewer leave most SMs idle: the decode kernel reads a row's keys
 * from L2 in parallel instead). */
static bool topk_rows_form(long long T, int Hi, int pt_per) {
  long long tile = TOPK_QV / Hi;
  return pt_per == 0 && (T + tile - 1) / tile >= 4;
}

h3_status cu_m31_run_index_topk(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in,
                                const h3_tensor *out, h3_diag *d) {
  const h3_type *qt = &in[0].type, *kt = &in[1].type;
  long long T = qt->dims[0];
  int Hi = (int)qt->dims[1], D = (int)qt->dims[2], page = (int)kt->dims[1];
  int block = (int)h3_op_attr_int(op, "block", page);
  int topk = (int)out[0].type.dims[out[0].type.rank - 1];
  if (block <= 0 || Hi < 1 || Hi > 8 || D > 256 || topk > 64)
    return cu_op_error(d, op, CU_HINT_UNSUPPORTED,
                       "block %d (positive), %d index heads (1 to 8), index dim %d "
                       "(at most 256), %d blocks to select (at most 64)",
                       block, Hi, D, topk);
  if (in[2].type.dtype != out[0].type.dtype || in[3].type.dtype != out[0].type.dtype)
    return cu_op_error(d, op, CU_HINT_UNSUPPORTED,
                       "positions, page table and the selection of one integer dtype");
  int NB = (int)topk_blocks(op);
  size_t dec_smem = topk_dec_smem(D, Hi, NB, h3_dtype_size(kt->dtype));
  char name[3][128], lines[480], defs[800];
  for (int i = 0; i < 3; i++)
    snprintf(name[i], sizeof name[i], "h3cu_topk%s_%s_%s_%s", i == 0 ? "s" : i == 1 ? "r" : "",
             DN(qt->dtype), DN(kt->dtype), DN(out[0].type.dtype));
  snprintf(lines, sizeof lines, "#define H3_TOPK_SCORE_NAME %s\n#define H3_TOPK_ROWS_NAME %s\n"
           "#define H3_TOPK_NAME %s\n", name[0], name[1], name[2]);
  cu_m31_msa_defines(defs, sizeof defs, lines, qt->dtype, kt->dtype, out[0].type.dtype, qt->dtype, 1, 1);
  const char *names[3] = {name[0], name[1], name[2]};
  cu_kernel *kn[3];
  const h3_type *ptt = &in[3].type;
  int pt_per = cu_m31_pt_per(ptt, T);
  long long NP = ptt->dims[ptt->rank - 1];
  bool rows = topk_rows_form(T, Hi, pt_per);
  if (cu_m31_kernels(s, op, "m31_msa.cu", defs, 3, names, kn, d) != H3_OK ||
      cu_m31_smem(s, op, kn[rows ? 1 : 0], rows ? topk_rows_smem(D) : dec_smem, d) != H3_OK)
    return H3_ERR;
  if (T == 0) return H3_OK;
  if (!scratch) return cu_op_error(d, op, NULL, "no score scratch (the op was not prepared)");
  const void *iq = in[0].data, *ik = in[1].data, *pos = in[2].data, *pt = in[3].data;
  void *o = out[0].data, *score = scratch;
  if (!rows) { /* scores and selection in one launch */
    void *cnt = (char *)scratch + (size_t)(T * Hi * NB) * 4;
    /* the counters are 0 after every launch; made so here before the first (a graph capture
     * never holds an op's first run: cuda_graph.c) */
    if (!cu_graph_capturing(s))
      CU_CHECK(d, cudaMemsetAsync(cnt, 0, (size_t)T * 4, s->stream), "index_topk counters");
    void *args[] = {&iq, &ik, &pos, &pt, &score, &cnt, &o, &Hi, &D, &page, &block, &NB, &topk,
                    &pt_per, &NP};
    int64_t grid[3] = {T, topk_splits(T, NB, 1024), 1}, blk[3] = {TOPK_DEC_THREADS, 1, 1};
    return cu_launch(s, kn[0], grid, blk, (int64_t)dec_smem, args, d);
  }
  long long tile = TOPK_QV / Hi, tiles = (T + tile - 1) / tile;
  void *args[] = {&iq, &ik, &pos, &pt, &score, &T, &Hi, &D, &page, &block, &NB, &topk};
  int64_t grid[3] = {tiles, topk_splits(tiles, NB, 32), 1}, blk[3] = {TOPK_ROWS_THREADS, 1, 1};
  if (cu_launch(s, kn[1], grid, blk, (int64_t)topk_rows_smem(D), args, d) != H3_OK) return H3_ERR;
  void *args2[] = {&score, &pos, &o, &T, &Hi, &block, &NB, &topk};
  int64_t grid2[3] = {(T * Hi + TOPK_THREADS / 32 - 1) / (TOPK_THREADS / 32), 1, 1};
  int64_t blk2[3] = {TOPK_THREADS, 1, 1};
  return cu_launch(s, kn[2], grid2, blk2, 0, args2, d);
}

size_t cu_m31_att_scratch_bytes(const h3_op *op) { return att_part_bytes(op); }

/* index_topk's scores [T, Hi, NB] f32, then the decode kernel's counters u32 [T]. */
size_t cu_m31_topk_scratch_bytes(const h3_op *op) {
  const h3_type *q = &op->operands[0]->type;
  return (size_t)(q->dims[0] * q->dims[1] * topk_blocks(op) + q->dims[0]) * 4;
}
