/* op_infer.h: the type inference functions of the op registry (private to ir/).
 * op_infer.c holds the generic ops (constants, elementwise, data movement, reductions,
 * linear), op_infer_model.c the model ops (rope, attention family, routing, moe, DSpark).
 * Each assumes h3_op_check_attrs passed (required attributes present, right kinds) and
 * the operand count is within the registry's bounds; it checks everything else and
 * writes a one-line reason starting with the op name on failure.
 */
#ifndef H3_OP_INFER_H
#define H3_OP_INFER_H

#include "h3/op_registry.h"

#include <stdio.h>

#define FAIL(...)                            \
  do {                                       \
    snprintf(why, why_len, __VA_ARGS__);     \
    return -1;                               \
  } while (0)
#define OPN (h3_opcode_name(op->code))
#define TY(i) (&op->operands[i]->type)
/* Type text for messages: TS(t) uses a buffer of the caller's scope, one per call site. */
#define TS(t) h3_type_str((t), (char[96]){0}, 96)
#define LL(x) ((long long)(x))

#define H3_INFER_DECL(fn) int fn(const h3_op *op, h3_type *out, char *why, size_t why_len)
H3_INFER_DECL(h3_infer_const);
H3_INFER_DECL(h3_infer_iota);
H3_INFER_DECL(h3_infer_randn);
H3_INFER_DECL(h3_infer_sigma_schedule);
H3_INFER_DECL(h3_infer_binary);
H3_INFER_DECL(h3_infer_unary);
H3_INFER_DECL(h3_infer_unary_float);
H3_INFER_DECL(h3_infer_clamp);
H3_INFER_DECL(h3_infer_cast);
H3_INFER_DECL(h3_infer_reshape);
H3_INFER_DECL(h3_infer_slice);
H3_INFER_DECL(h3_infer_concat);
H3_INFER_DECL(h3_infer_pad);
H3_INFER_DECL(h3_infer_gather);
H3_INFER_DECL(h3_infer_index);
H3_INFER_DECL(h3_infer_set_index);
H3_INFER_DECL(h3_infer_scatter_rows);
H3_INFER_DECL(h3_infer_rms_norm);
H3_INFER_DECL(h3_infer_add_rms_norm);
H3_INFER_DECL(h3_infer_argmax);
H3_INFER_DECL(h3_infer_sample_tokens);
H3_INFER_DECL(h3_infer_reduce_sum);
/* op_infer_normmod.c: fused RMSNorm + indexed AdaLN */
H3_INFER_DECL(h3_infer_norm_modulate);
H3_INFER_DECL(h3_infer_residual_norm_modulate);
/* op_infer_norm_rope.c: per-head RMSNorm + RoPE (qk-norm-rope-fusion) */
H3_INFER_DECL(h3_infer_rms_norm_rope);
H3_INFER_DECL(h3_infer_rms_norm_rope_write);
/* op_infer_sage_q.c: sage_attention's q codes (sage-q-fusion). The results rms_norm_rope
   adds for y [T, H, D] (into out: 0 without sage_quant, or 2), or -1 after writing why. */
int h3_infer_sage_q_results(const h3_op *op, const h3_type *y, h3_type *out, char *why, size_t why_len);
/* sage_attention's operands 3 and 4 (q's codes and deltas), when it has them: 0 or -1. */
int h3_infer_sage_q_operands(const h3_op *op, char *why, size_t why_len);
H3_INFER_DECL(h3_infer_linear);
H3_INFER_DECL(h3_infer_timestep_embedding);
H3_INFER_DECL(h3_infer_rope_table);
H3_INFER_DECL(h3_infer_rope_pos_table);
H3_INFER_DECL(h3_infer_rope);
H3_INFER_DECL(h3_infer_attention);
/* op_infer_attention_view.c: attention's v_view (v read in place from its parent x[T, C]);
   0, or -1 after writing why. */
int h3_infer_attention_v_view(const h3_op *op, char *why, size_t why_len);
H3_INFER_DECL(h3_infer_kv_write);
H3_INFER_DECL(h3_infer_paged_attention);
H3_INFER_DECL(h3_infer_block_attention);
H3_INFER_DECL(h3_infer_index_topk);
H3_INFER_DECL(h3_infer_sparse_attention);
H3_INFER_DECL(h3_infer_router_topk);
H3_INFER_DECL(h3_infer_moe);
H3_INFER_DECL(h3_infer_markov_draft);
H3_INFER_DECL(h3_infer_sage_attention);
H3_INFER_DECL(h3_infer_sol_attention);
H3_INFER_DECL(h3_infer_spec_accept);
/* op_infer_int8.c: the INT8 linear lowering ops */
H3_INFER_DECL(h3_infer_quantize_rows);
H3_INFER_DECL(h3_infer_linear_int8);
/* op_infer_int8_dequant.c: linear_int8 split into its GEMM and its epilogue */
H3_INFER_DECL(h3_infer_matmul_i8);
H3_INFER_DECL(h3_infer_dequant_i8);
/* op_infer_nvfp4.c: the NVFP4 weight-only linear */
H3_INFER_DECL(h3_infer_linear_nvfp4);
/* op_infer_spectrum.c: the step-skipping ops */
H3_INFER_DECL(h3_infer_spectrum_update);
H3_INFER_DECL(h3_infer_spectrum_forecast);
H3_INFER_DECL(h3_infer_cache_dit_decide);
/* op_infer_collective.c: shard and the collectives of a parallel plan */
H3_INFER_DECL(h3_infer_shard);
H3_INFER_DECL(h3_infer_all_gather);
H3_INFER_DECL(h3_infer_all_to_all);
H3_INFER_DECL(h3_infer_all_reduce);

/* Operand count, region count and attributes against the registry (no inference). */
int h3_op_check(const h3_op *op, char *why, size_t why_len);

/* Shared checks; each returns 0 or -1 after writing why. */
/* `name` of op is a tensor of exactly `rank` dims; `shape` names the dims ("[T, H, D]"). */
int h3_infer_want_rank(const h3_op *op, int i, const char *name, int rank, const char *shape,
                       char *why, size_t why_len);
/* `name` is an i32 tensor of `rank` dims. */
int h3_infer_want_i32(const h3_op *op, int i, const char *name, int rank, const char *shape,
                      char *why, size_t why_len);
/* A dim of operand `a` equals a dim of operand `b`, else "op: A has L = x but B has L = y". */
int h3_infer_want_dim(const h3_op *op, int a, const char *an, int ad, int b, const char *bn,
                      int bd, const char *label, const char *bshape, char *why, size_t why_len);
/* The result of a quantized linear over x[.., K] with N outputs: x's shape with N last, of
   the op's `dtype` (default bf16; a float, else "op: dtype = .., expected a float ..");
   returns 1. */
int h3_infer_quant_linear_result(const h3_op *op, const h3_type *x, int64_t n, h3_type *out,
                                 char *why, size_t why_len);

#endif
