/* registry.c: the one table of h3's passes. The default pipeline of a tier is this table
 * filtered by in_default_pipeline and min_tier, in this order (`verify` first), followed
 * by a second run of `verify` on the result (see passes.h).
 *
 * One line per pass: X(foo_bar) is the record `h3_pass_foo_bar` of pass `foo-bar`, defined
 * in passes/foo_bar.c (the test passes_registry_files checks the three names agree).
 * Adding a pass = its file and one line here, at the place in the pipeline where it must
 * run; `h3c passes` and the generated tables of docs/passes.md follow this table.
 */
#include "pass_internal.h"

#include <string.h>

#define H3_PASS_TABLE(X)                                                                   \
  X(verify)                                                                                \
  X(spectrum) /* step skipping rewrites the program first */                               \
  X(cache_dit)                                                                             \
  X(attention_backend) /* --attention: after step skipping, on its segments and pieces */  \
  X(sequence_parallel) /* --gpus N: splits every trunk loop, pieces and clones included */   \
  X(tensor_parallel)   /* --gpus N: the layer stacks of an LLM; refuses a model with neither */ \
  X(dce)                                                                                   \
  X(draft_quant_nvfp4) /* --draft-quant nvfp4: the draft's W4A16 linears */           \
  X(int8_lowering) /* --int8; before the fusions, so they see the int8 ops */              \
  X(row_split)                                                                             \
  X(norm_modulate_fusion)  /* before elementwise-fusion takes the modulate ops */          \
  X(int8_fuse_quant)       /* needs the norm_modulate ops and the quantizers */            \
  X(qk_norm_rope_fusion)   /* q/k slice + rms_norm + rope; before the slices fuse */       \
  X(attention_v_view)      /* v's slice read in place by attention */                      \
  X(int8_dequant_split)    /* --int8: after the fusions above match linear_int8 */         \
  X(int8_qk_norm_rope)     /* --int8: q/k norm+rope read qkv's int32 accumulators */       \
  X(int8_resid_dequant)    /* --int8: Plan B takes out_proj's dequant_i8 */                \
  X(kv_write_fusion)       /* k's cache write into its norm+rope (bf16 form only) */    \
  X(sage_q_fusion)         /* sage_attention's q codes from its norm+rope, once it is final */ \
  X(add_norm_fusion)       /* before elementwise-fusion takes the residual adds */     \
  X(index_topk_early)      /* after kv-write-fusion; before the slots' arithmetic fuses */ \
  X(elementwise_fusion)                                                                    \
  X(int8_fuse_group_quant) /* --int8: the quantizer joins its producer group */            \
  X(side_streams) /* after every rewrite: it reorders and marks the final ops */          \
  X(memory_plan)

#define DECLARE_PASS(id) extern const h3_pass h3_pass_##id;
H3_PASS_TABLE(DECLARE_PASS)

#define PASS_ENTRY(id) &h3_pass_##id,
static const h3_pass *const pass_table[] = {H3_PASS_TABLE(PASS_ENTRY)};

int h3_pass_count(void) { return (int)(sizeof pass_table / sizeof pass_table[0]); }

const h3_pass *h3_pass_at(int i) {
  if (i < 0 || i >= h3_pass_count()) return NULL;
  return pass_table[i];
}

const h3_pass *h3_pass_find(const char *name) {
  if (!name) return NULL;
  for (int i = 0; i < h3_pass_count(); i++)
    if (strcmp(pass_table[i]->name, name) == 0) return pass_table[i];
  return NULL;
}
