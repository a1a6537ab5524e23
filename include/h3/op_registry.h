/* op_registry.h: the single description of every op: name, operand counts, attribute
 * schema, result type inference and pattern kind. ops.def lists the ops; ir/op_registry.c
 * holds one entry per op. The verifier, the IR text parser, the front end, the passes,
 * codegen and the backends all ask the registry instead of knowing ops themselves.
 */
#ifndef H3_OP_REGISTRY_H
#define H3_OP_REGISTRY_H

#include "h3/ir.h"

typedef enum {
  H3_PK_ELEMENTWISE, /* out[i] = f(in[i]) with broadcasting; fusible */
  H3_PK_BROADCAST,   /* reads its inputs at computed indices (gather); fusible as a producer */
  H3_PK_REDUCTION,   /* reduces the last axis (rms_norm, argmax) */
  H3_PK_MATMUL,      /* GEMM-like: a library call */
  H3_PK_VIEW,        /* no arithmetic: reshape, slice, index */
  H3_PK_OPAQUE,      /* a kernel of its own */
  H3_PK_CONTROL,     /* loop, call, fused, yield, return */
} h3_pattern_kind;

typedef struct {
  const char *name;
  h3_attr_kind kind;
  bool required;
} h3_attr_schema;

#define H3_MAX_ATTR_SCHEMA 8

/* Infers result types from operand types and attributes. Returns the number of results
 * written to `out` (≤ 4), or -1 after writing a one-line reason into `why` (what is wrong
 * and what was expected, e.g. "linear: x has K = 64 but w has K = 48 (w is [N, K])"). */
typedef int (*h3_infer_fn)(const h3_op *op, h3_type *out, char *why, size_t why_len);

typedef struct {
  h3_opcode code;
  const char *name;
  h3_pattern_kind kind;
  int min_operands, max_operands; /* max -1 = variadic */
  int n_regions;
  h3_attr_schema attrs[H3_MAX_ATTR_SCHEMA];
  h3_infer_fn infer; /* NULL for control ops whose types come from regions or callees */
} h3_op_info;

const h3_op_info *h3_op_info_get(h3_opcode code);
/* Looks an op up by its name; NULL when unknown. */
const h3_op_info *h3_op_info_find(const char *name);
const char *h3_opcode_name(h3_opcode code);
bool h3_op_is_elementwise(h3_opcode code);

/* Checks `op`'s attributes against the schema (unknown names, kinds, required ones).
 * Returns 0 or -1 with a reason in `why`. */
int h3_op_check_attrs(const h3_op *op, char *why, size_t why_len);

/* Checks operand count and attributes, then runs the op's inference. Control ops without
 * an infer fn: yield and return give 0 results; loop, call and fused report that their
 * types come from their region or callee. Returns the result count or -1 with `why`. */
int h3_op_infer(const h3_op *op, h3_type *out, char *why, size_t why_len);

/* True for a load-time op (ops.def, ir/op_infer_int8.c): a quantize_rows of a parameter
 * at the top level of a graph body. It depends on the weights alone: the memory planner
 * leaves its results out of the arena, and the runtime computes it once when it loads the
 * weights (releasing the parameter when nothing else reads it) and skips it when running. */
bool h3_op_is_load_time(const h3_op *op);
/* kv_write, rms_norm_rope_write, set_index, scatter_rows, residual_norm_modulate,
 * spectrum_update: result 0 updates operand 0's buffer in place (and some other results
 * other operands': h3_op_inplace_operand). */
bool h3_op_is_inplace(h3_opcode code);
/* The operand whose buffer result r of op updates in place, or -1 (a result written like any
 * op's): operand 0 for result 0 of an in-place op; operand 6, the v cache, for result 1 of
 * rms_norm_rope_write with v (its result 2, q, is written like any op's). */
int h3_op_inplace_operand(const h3_op *op, int r);
/* shard, all_gather, all_to_all, all_reduce: the ops of a parallel plan (attribute `ranks`). */
bool h3_op_is_collective(h3_opcode code);
/* Whether op names the rank count of a parallel plan: a collective, or a moe over its rank's
 * slice of the experts (`ranks`, tensor-parallel). */
bool h3_op_is_ranked(const h3_op *op);
/* The rank count module m was compiled for: the `ranks` of its ranked ops (the verifier
 * checks they agree), 1 when it has none. */
int h3_module_ranks(const h3_module *m);
/* reshape, slice, index: the result may be a view of operand 0. */
bool h3_op_is_view(h3_opcode code);
/* loop, call, branch, yield, return: the executor runs their regions or ends one (fused,
 * a control op too, runs as one kernel). */
bool h3_op_is_control_flow(h3_opcode code);

/* Promotion rule of elementwise ops (see ops.def). */
h3_dtype h3_dtype_promote(h3_dtype a, h3_dtype b);
/* numpy broadcast of two shapes; returns 0 or -1 when incompatible. */
int h3_broadcast_shapes(const h3_type *a, const h3_type *b, h3_type *out);

#endif
