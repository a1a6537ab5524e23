/* attention_schedule.h: what the `attention-backend` pass's two files share (private to
 * passes/): the parsed `--attention` options and the static (step, block) schedule that
 * attention_schedule.c applies to the IR (docs/models/accelerations.md §5).
 */
#ifndef H3_PASSES_ATTENTION_SCHEDULE_H
#define H3_PASSES_ATTENTION_SCHEDULE_H

#include "h3/ir.h"

#include <stdbool.h>

typedef enum { H3_ATT_DENSE, H3_ATT_SAGE, H3_ATT_SOL } h3_att_kind;

/* `--attention sage[,...]`: sage at every (step, block); dense_steps and dense_layers
 * unused. `--attention sol[,...]`: steps i < dense_steps and blocks l < dense_layers run
 * `dense` (the backend `dense`: the plain attention op, or sage with its defaults); the
 * other (step, block) pairs run sol. */
typedef struct {
  bool sol;
  h3_att_kind dense;
  const char *pv, *thresh;
  int64_t smooth, sink_tokens, sink_start, dense_steps, dense_layers;
  double tau;
} h3_att_options;

/* What the schedule did: the sampling steps and blocks it saw (-1: no program loop, the
 * schedule is the same at every step) and the attention ops it left with each kind. */
typedef struct {
  int64_t steps, layers;
  int count[3];
} h3_att_result;

/* Makes attention op `op` the backend `kind` with o's keys; H3_ERR (with a hint) for a
 * causal attention or one that reads v in place, which sage and sol do not take. */
h3_status h3_att_set_kind(h3_module *m, h3_op *op, h3_att_kind kind, const h3_att_options *o,
                          h3_diag *d);

/* Applies o to m. The block stack is every loop labelled `trunk` or `trunk.*` (Cache-DiT's
 * trunk.front and trunk.rest); a trunk loop's first block is the offset its body indexes
 * the stack's weights with. The sampling steps are the loops of a program's body that call
 * a graph (Spectrum's segments in order), numbered by their counts. With a schedule that
 * differs between steps, the loop of the step where dense_steps falls is split there and
 * the step loops from dense_steps on call clones `G.sol` of the graphs G that reach the
 * stack; a trunk loop that holds block dense_layers is split there. A schedule that is the
 * same at every step (sage, dense_steps=0, dense_layers = the blocks) rewrites in place.
 * Errors (with hints): dense_layers above the blocks, dense_steps above the steps, or
 * dense_steps > 0 without a program loop that calls the stack. */
h3_status h3_att_schedule(h3_module *m, const h3_att_options *o, h3_att_result *r, h3_diag *d);

#endif
