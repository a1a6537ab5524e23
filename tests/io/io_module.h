/* io_module.h: a small hand-built module for the weights and inputs tests: parameters of
 * every init kind, ungrouped, grouped (with a group base), grouped with an inner array,
 * inner array only, several dtypes; and a graph `step` with three inputs and two named
 * outputs.
 */
#ifndef H3_IO_MODULE_H
#define H3_IO_MODULE_H

#include "h3/ir.h"

#include <math.h>
#include <stdlib.h>

static inline h3_param *io_param(h3_module *m, const char *name, h3_dtype dt, int rank,
                                 const int64_t *dims, int group_dims, int64_t base,
                                 h3_init_kind init, double scale, double value) {
  h3_span none = {0};
  h3_param *p = h3_module_add_param(m, name, h3_type_make(dt, rank, dims), none);
  if (!p) abort();
  p->group_dims = group_dims;
  p->group_base = base;
  p->group = group_dims ? "g" : NULL;
  p->init = init;
  p->init_scale = scale;
  p->init_value = value;
  return p;
}

/* Parameter indices of io_module_new. */
enum { P_EMBED, P_QKV, P_EXPERT, P_NORM, P_BIAS, P_ROPE, P_IDX, P_F16, P_GATE, P_COUNT };

static inline h3_module *io_module_new(const char *config) {
  h3_module *m = h3_module_new("io_test", config);
  if (!m) abort();
  io_param(m, "embed.weight", H3_BF16, 2, (int64_t[]){16, 8}, 0, 0, H3_INIT_NORMAL, 0.25, 0);
  io_param(m, "blocks.{}.attn.qkv.weight", H3_BF16, 3, (int64_t[]){3, 12, 8}, 1, 0,
           H3_INIT_NORMAL, 1 / sqrt(8.0), 0);
  io_param(m, "layers.{}.mlp.experts.{e}.down.weight", H3_F32, 4, (int64_t[]){2, 3, 4, 5}, 2,
           3, H3_INIT_UNIFORM, 0.2, 0);
  io_param(m, "blocks.{}.norm.weight", H3_BF16, 2, (int64_t[]){3, 8}, 1, 0,
           H3_INIT_ONES_PLUS_NORMAL, 0.02, 0);
  io_param(m, "final.bias", H3_F32, 1, (int64_t[]){8}, 0, 0, H3_INIT_CONST, 0, 0.5);
  io_param(m, "rope.inv_freq", H3_F32, 1, (int64_t[]){4}, 0, 0, H3_INIT_ROPE_INV_FREQ, 8, 10000);
  io_param(m, "table.idx", H3_I32, 1, (int64_t[]){5}, 0, 0, H3_INIT_CONST, 0, 7);
  io_param(m, "proj.f16", H3_F16, 2, (int64_t[]){4, 4}, 0, 0, H3_INIT_NORMAL, 1.0, 0);
  io_param(m, "experts.{e}.gate", H3_BF16, 2, (int64_t[]){4, 6}, 1, 0, H3_INIT_NORMAL, 0.5, 0);

  h3_span none = {0};
  h3_graph *g = h3_module_add_graph(m, "step", H3_GRAPH_FUNCTION, none);
  h3_value *x = h3_graph_add_input(m, g, "x", h3_type_make(H3_BF16, 2, (int64_t[]){4, 8}), none);
  h3_value *t = h3_graph_add_input(m, g, "t", h3_type_make(H3_F32, 1, (int64_t[]){2}), none);
  h3_value *idx = h3_graph_add_input(m, g, "idx", h3_type_make(H3_I32, 1, (int64_t[]){4}), none);
  if (!g || !x || !t || !idx) abort();
  h3_graph_add_output(m, g, "y");
  h3_graph_add_output(m, g, "t_out");
  h3_builder b = {m, &g->body, NULL, none};
  h3_value *outs[2] = {x, t};
  if (!h3_build_op_typed(&b, H3_OP_RETURN, 2, outs, 0, NULL, 0, NULL, 0)) abort();
  return m;
}

#endif
