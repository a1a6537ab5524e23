/* cuda_m31_msa_tile.c: the launch of the row-tiled paged / sparse attention
 * (kernels/m31_msa_tile.cu) on the cuda backend. cu_m31_run_kv_attention hands it the ops its
 * tensor-core form would run (bf16 q / k / v, head_dim 128, 16 q heads per kv head, 16-byte
 * aligned operands) when the rows are many rows of one sequence (one page table, at least
 * M31_ATT_TILE_MIN_ROWS rows: prefill / extend) or, under H3_M31_ATTENTION=tile, groups of rows
 * of many (a table per group, at least M31_ATT_TILE_MIN_GROUPS groups: a batched verify);
 * decode and, by default, batched verifies keep kernels/m31_msa.cu.
 * One launch writes o directly (no splits, no scratch). The shapes the wgmma flash kernel takes
 * (cu_m31_flash_fits: MiniMax-M3.1's own) go to it instead (cuda_m31_flash.c,
 * kernels/m31_flash.cu; one table only); this kernel runs the others, and all of them under
 * H3_M31_ATTENTION=tile.
 */
#include "cuda_m31.h"

#include <stdio.h>

void cu_m31_att_tile_defines(char *defs, size_t n, const char *name, h3_dtype ix, h3_dtype o) {
  int len = snprintf(defs, n, "#define H3_KV_ATT_TILE_NAME %s\n#define IX_T %s\n#define O_T %s\n",
                     name, h3_kernel_ctype(ix), h3_kernel_ctype(o));
  cu_m31_defines_fit(defs, n, len);
}

/* operand indices of the selection, positions and page table by op */
static int sel_at(const h3_op *op) { return op->code == H3_OP_SPARSE_ATTENTION ? 3 : -1; }
static int pos_at(const h3_op *op) { return op->code == H3_OP_SPARSE_ATTENTION ? 4 : 3; }

bool cu_m31_att_tiled(const h3_op *op, const h3_tensor *in) {
  if (op->code != H3_OP_PAGED_ATTENTION && op->code != H3_OP_SPARSE_ATTENTION) return false;
  const long long T = in[0].type.dims[0];
  const int per = cu_m31_pt_per(&in[pos_at(op) + 1].type, T), is = sel_at(op);
  /* one table: M31_ATT_TILE_MIN_ROWS rows; a table per group of rows (a batched verify): only
     under H3_M31_ATTENTION=tile, groups of 2 rows or more, M31_ATT_TILE_MIN_GROUPS of them. By
     default those stay on the tensor-core form, whose rows of a sequence meet its keys in L2:
     a 64-sequence verify round (9 rows each, 2k context, H100, 2026-12-06) took 26.93 ms on
     this kernel against 26.37 on that one */
  const bool tile = cu_env_form("H3_M31_ATTENTION", (const char *const[]){"flash", "tile", NULL}) == 1;
  const bool rows = per == 0 ? T >= M31_ATT_TILE_MIN_ROWS
                             : tile && per >= 2 && T / per >= M31_ATT_TILE_MIN_GROUPS;
  return rows && (is < 0 || in[is].type.dims[in[is].type.rank - 1] <= 64); /* H3T_MAX_TOPK */
}

h3_status cu_m31_run_att_tile(cu_state *s, const h3_op *op, const h3_tensor *in, const h3_tensor *out,
                              h3_diag *d) {
  const h3_type *pty = &in[pos_at(op) + 1].type;
  int per = cu_m31_pt_per(pty, in[0].type.dims[0]);
  if (per == 0 && cu_m31_flash_fits(s, op, in, out)) return cu_m31_run_flash(s, op, in, out, d);
  const h3_type *ct = &in[1].type;
  const h3_tensor *pos = &in[pos_at(op)], *sel = sel_at(op) < 0 ? NULL : &in[sel_at(op)];
  int kind = sel ? 2 : 0, Hk = (int)ct->dims[ct->rank - 2];
  int page = (int)h3_op_attr_int(op, "page", ct->dims[1]);
  int topk = sel ? (int)sel->type.dims[sel->type.rank - 1] : 0;
  long long T = in[0].type.dims[0];
  float scale = (float)h3_op_attr_float(op, "scale", 1.0);
  char name[96], defs[256];
  snprintf(name, sizeof name, "h3cu_kvattt_%s_%s", DN(pos->type.dtype), DN(out[0].type.dtype));
  cu_m31_att_tile_defines(defs, sizeof defs, name, pos->type.dtype, out[0].type.dtype);
  const char *names[1] = {name};
  cu_kernel *k;
  if (cu_m31_kernels(s, op, "m31_msa_tile.cu", defs, 1, names, &k, d) != H3_OK ||
      cu_m31_smem(s, op, k, M31_ATT_TILE_SMEM, d) != H3_OK)
    return H3_ERR;
  const void *q = in[0].data, *kc = in[1].data, *vc = in[2].data, *pp = pos->data;
  const void *pt = in[pos_at(op) + 1].data, *sp = sel ? sel->data : NULL;
  void *o = out[0].data;
  long long NP = pty->dims[pty->rank - 1];
  void *args[] = {&q, &kc, &vc, &pp, &pt, &sp, &o, &kind, &T, &Hk, &page, &topk, &scale, &per, &NP};
  int64_t tiles = per == 0 ? (T + M31_ATT_TILE_ROWS - 1) / M31_ATT_TILE_ROWS
                           : T / per * ((per + M31_ATT_TILE_ROWS - 1) / M31_ATT_TILE_ROWS);
  int64_t grid[3] = {tiles * Hk, 1, 1};
  int64_t block[3] = {M31_ATT_TILE_THREADS, 1, 1};
  return cu_launch(s, k, grid, block, M31_ATT_TILE_SMEM, args, d);
}
