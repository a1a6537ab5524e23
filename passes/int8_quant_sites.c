/* int8_quant_sites.c: finding the activation quantizers (quantize_rows) that the op
 * producing their input can absorb, for int8-fuse-quant (norm+modulate) and
 * int8-fuse-group-quant (fused elementwise groups): each pass gives the producer rule,
 * this file the walk and the list. */
#include "pass_internal.h"

#include <stdlib.h>

typedef struct {
  h3_quant_producer_fn producer;
  h3_quant_sites *s;
  bool oom;
} scan;

static int visit(h3_op *op, void *arg) {
  scan *c = arg;
  if (op->code != H3_OP_QUANTIZE_ROWS || op->n_operands != 1) return 0;
  const h3_value *y = op->operands[0];
  if (y->uses != 1 || !c->producer(y, op)) return 0;
  h3_quant_sites *s = c->s;
  if (h3_op_attr_int(op, "rotate", 0) != 0) {
    s->rotated++;
    return 0;
  }
  if (h3_ops_push(&s->ops, &s->n, &s->cap, op)) return 0;
  c->oom = true;
  return 1;
}

h3_status h3_quant_sites_find(h3_graph *g, h3_quant_producer_fn producer, const char *pass,
                              h3_quant_sites *s, h3_diag *d) {
  *s = (h3_quant_sites){0};
  scan c = {producer, s, false};
  h3_region_walk(&g->body, visit, &c);
  if (!c.oom) return H3_OK;
  h3_diag_error(d, g->span, H3_HINT_OOM, "%s: out of memory in graph %s", pass, g->name);
  free(s->ops);
  *s = (h3_quant_sites){0};
  return H3_ERR;
}
