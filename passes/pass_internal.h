/* pass_internal.h: what the files of passes/ share and the public headers do not show:
 * the layout of h3_pass_context, the record of `verify` and the helpers of several passes.
 */
#ifndef H3_PASS_INTERNAL_H
#define H3_PASS_INTERNAL_H

#include "h3/op_registry.h"
#include "h3/passes.h"

#include <string.h>

struct h3_pass_context {
  const h3_pass_options *options;
  const h3_pass *pass; /* the pass now running */
  h3_strbuf reports;   /* "name: line\n" per h3_pass_report call */
};

/* The record of `verify`, which the pipeline also runs last, and of `memory-plan`, which
 * only verify may follow (registry.c declares the records of the table). */
extern const h3_pass h3_pass_verify;
extern const h3_pass h3_pass_memory_plan;

/* ---- the block stack ------------------------------------------------------------------- */
/* Whether op is a loop of the block stack: labelled `trunk` or `trunk.*` (Cache-DiT's
 * trunk.front and trunk.rest, the attention schedule's pieces). */
static inline bool h3_loop_is_trunk(const h3_op *op) {
  const char *l = op->code == H3_OP_LOOP ? h3_op_attr_string(op, "label", "") : "";
  return !strcmp(l, "trunk") || !strncmp(l, "trunk.", 6);
}

/* ---- operands ---------------------------------------------------------------------------- */
/* Whether op, or an op nested in its regions, reads v (the moving fusions' check that no op
 * between two places sees a value: add-norm-fusion, kv-write-fusion). */
static inline bool h3_op_reads(const h3_op *op, const h3_value *v) {
  for (int i = 0; i < op->n_operands; i++)
    if (op->operands[i] == v) return true;
  for (int r = 0; r < op->n_regions; r++)
    for (const h3_op *o = op->regions[r].first; o; o = o->next)
      if (h3_op_reads(o, v)) return true;
  return false;
}

/* The value whose buffer v lies in: through views to their source (kv-write-fusion's
 * same-cache check, side-streams' in-place conflicts). */
static inline const h3_value *h3_value_root(const h3_value *v) {
  while (v->kind == H3_VALUE_RESULT && v->def && h3_op_is_view(v->def->code) && v->def->n_operands > 0)
    v = v->def->operands[0];
  return v;
}

/* ---- several ranks ----------------------------------------------------------------------- */
/* The rank count of `h3c compile --gpus N` for the passes it enables (sequence-parallel,
 * tensor-parallel): N, or 0 after an error naming `pass` when N < 2. */
static inline int h3_pass_rank_count(const h3_pass_context *pc, const char *pass, h3_diag *d) {
  int gpus = h3_pass_options_of(pc)->gpus;
  if (gpus >= 2) return gpus;
  h3_diag_error(d, (h3_span){0}, "h3c compile --gpus N (N >= 2) enables it with its rank count",
                "%s needs a rank count of 2 or more (now %d)", pass, gpus);
  return 0;
}

/* ---- op arrays (op_array.c) ------------------------------------------------------------- */
/* Appends op to the array *ops of *n ops in *cap slots, growing it (doubling, 16 at first;
 * free with free()). false when memory runs out: the array is then as it was. */
bool h3_ops_push(h3_op ***ops, int *n, int *cap, h3_op *op);

/* ---- activation quantizers a producer can absorb (int8_quant_sites.c) ------------------ */
/* Whether v (the operand of quantizer q) comes from an op that can take q in: that op, or
 * NULL. */
typedef h3_op *(*h3_quant_producer_fn)(const h3_value *v, const h3_op *q);
typedef struct {
  h3_op **ops; /* the quantize_rows ops to absorb, walk order (free with free()) */
  int n, cap;
  int rotated; /* such quantizers with rotate != 0: they stay standalone */
} h3_quant_sites;
/* The quantize_rows ops of graph g (nested regions too) whose only operand has no other
 * user and passes `producer`; rotate != 0 ones are only counted. H3_ERR after reporting
 * running out of memory (`pass` names the pass). */
h3_status h3_quant_sites_find(h3_graph *g, h3_quant_producer_fn producer, const char *pass,
                              h3_quant_sites *s, h3_diag *d);

#endif
