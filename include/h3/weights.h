/* weights.h: the weight store of a module, and graph inputs / outputs as safetensors files.
 *
 * A weight store holds one host buffer per IR parameter (h3_param), in the parameter's
 * dtype and layout. A grouped parameter is stacked: its leading `group_dims` dims are the
 * group count (and the inner count), e.g. blocks.{}.attn.qkv_proj.weight is
 * bf16[layers, 3*heads*head_dim, dim]. In files each group member is its own tensor,
 * named by the parameter's pattern with "{}" -> group_base + group index and "{e}" ->
 * inner index ("blocks.3.attn.qkv_proj.weight"); member i of the stack (row-major over
 * the leading dims) is tensor i of h3_weights_tensor_name.
 *
 * Random weights (`--weights random --seed N`): every expanded tensor is filled from
 * h3's Philox generator (include/h3/rng.h) with stream = the tensor's name and element
 * index = the position inside that tensor, per the parameter's init:
 *   NORMAL            scale * normal             (h3_rng_init_value)
 *   UNIFORM           scale * sym                (in (-scale, scale))
 *   ONES_PLUS_NORMAL  fma(scale, normal, 1)
 *   CONST             value
 *   ROPE_INV_FREQ     element j: theta^(-2j / rot), theta = init_value, rot = init_scale
 *                     (j the element's flat index in its tensor)
 * The random kinds are computed in fp32 and rounded once to the parameter's dtype; CONST and
 * ROPE_INV_FREQ are computed in double and stored through fp32 (f64 params keep the
 * double). bf16 / f16 round to nearest even; integer dtypes round to nearest (ties to
 * even) and saturate (h3_weights_store). The result does not depend on grouping or on the
 * order tensors are generated in, and the GPU can generate the same bits from rng.h. An
 * init the generator cannot use (unknown kind, rope_inv_freq with theta or dims <= 0, a
 * negative or non-finite scale, a NaN value) is an error naming the parameter.
 */
#ifndef H3_WEIGHTS_H
#define H3_WEIGHTS_H

#include "h3/ir.h"
#include "h3/support.h"

typedef struct {
  const h3_param *param;
  void *data;   /* param->type layout; 64-byte aligned; NULL when bytes == 0 */
  size_t bytes; /* h3_type_bytes(&param->type) */
} h3_weight;

typedef struct {
  const h3_module *module;
  int n;       /* = module->n_params */
  h3_weight *w; /* in module param order: w[i].param == module->params[i] */
  size_t total_bytes;
  int64_t n_tensors; /* expanded tensors (= names in a weights file) */
} h3_weights;

/* Number of expanded tensors of a parameter (product of its group dims; 1 when ungrouped). */
int64_t h3_weights_tensor_count(const h3_param *p);
/* Shape of one expanded tensor (the dims after the group dims). */
h3_type h3_weights_tensor_type(const h3_param *p);
/* Name of expanded tensor i (0 <= i < count) into `out` (cleared first). Returns H3_ERR
 * and reports (naming the parameter) when the pattern does not fit group_dims, e.g. a
 * grouped parameter without "{}". */
h3_status h3_weights_tensor_name(const h3_param *p, int64_t i, h3_strbuf *out, h3_diag *d);

/* Allocates zero-filled buffers for every parameter; NULL after reporting. */
h3_weights *h3_weights_alloc(const h3_module *m, h3_diag *d);
/* Random weights from `seed` (see the header comment). */
h3_weights *h3_weights_random(const h3_module *m, uint64_t seed, h3_diag *d);
/* The NVFP4 parameters of h3_weights_random(m, seed) alone (the others' data NULL): for a
 * backend that makes the plain random weights itself. */
h3_weights *h3_weights_random_nvfp4(const h3_module *m, uint64_t seed, h3_diag *d);
/* Loads and validates a safetensors file against the module's parameters: every expanded
 * name must be present with the right dtype and shape, and the file must hold nothing
 * else. Reports missing names (the first few and the count), unexpected names, dtype and
 * shape mismatches (tensor, expected, got). NULL after reporting. */
h3_weights *h3_weights_load_file(const h3_module *m, const char *path, h3_diag *d);
/* Writes every expanded tensor under its name, atomically. */
h3_status h3_weights_save_file(const h3_weights *w, const char *path, h3_diag *d);
void h3_weights_free(h3_weights *w);
/* The buffer of a parameter of w's module; NULL when `p` is not one of its params. */
const h3_weight *h3_weights_get(const h3_weights *w, const h3_param *p);
/* Rounds v to `dtype` and stores it at element `index` of `dst` (the rounding rule above). */
void h3_weights_store(void *dst, h3_dtype dtype, size_t index, double v);

/* ---- graph inputs and outputs -------------------------------------------------------------- */
/* One host tensor of a graph boundary. */
typedef struct {
  const char *name; /* the graph input / output name (borrowed from the module) */
  h3_type type;
  void *data;   /* malloc'd (64-byte aligned) by h3_inputs_load_file; NULL when missing */
  size_t bytes; /* h3_type_bytes(&type) */
} h3_host_tensor;

#define H3_INPUTS_ALLOW_MISSING 1u /* missing inputs get data = NULL instead of an error */

/* Loads the inputs of graph `g` from a safetensors file: names = input value names, dtype
 * and shape must equal the input types; unexpected names are errors. Returns an array of
 * g->n_inputs tensors (free with h3_host_tensors_free), NULL after reporting. */
h3_host_tensor *h3_inputs_load_file(const h3_graph *g, const char *path, unsigned flags,
                                    h3_diag *d);
void h3_host_tensors_free(h3_host_tensor *t, int n);
/* Writes the outputs of graph `g` (data[i] holds output i in the type the graph's return
 * gives it) under the graph's output names, atomically. */
h3_status h3_outputs_save_file(const h3_graph *g, const void *const *data, const char *path,
                               h3_diag *d);
/* The type of output i of graph `g` (from its `return` op). */
h3_type h3_outputs_type(const h3_graph *g, int i);

#endif
