/* registry.c: the one table of h3's passes. The default pipeline of a tier is this table
 * filtered by in_default_pipeline and min_tier, in this order (`verify` first), followed
 * by a second run of `verify` on the result (see passes.h). Adding a pass = one file
 * with its h3_pass record, one `extern` line in pass_internal.h and one line here, at
 * the place in the pipeline where it must run.
 */
#include "pass_internal.h"

#include <string.h>

static const h3_pass *const pass_table[] = {
    &h3_pass_verify,
    &h3_pass_spectrum,  /* step skipping rewrites the program first */
    &h3_pass_cache_dit,
    &h3_pass_dce,
    &h3_pass_int8_lowering, /* --int8; before the fusions, so they see the int8 ops */
    &h3_pass_row_split,
    &h3_pass_norm_modulate_fusion, /* before elementwise-fusion takes the modulate ops */
    &h3_pass_int8_fuse_quant,      /* needs the norm_modulate ops and the quantizers */
    &h3_pass_norm_rope_fusion,     /* q/k slice + rms_norm + rope; before the slices fuse */
    &h3_pass_attention_v_view,     /* v's slice read in place by attention */
    &h3_pass_int8_dequant_split,   /* --int8: after the fusions above match linear_int8 */
    &h3_pass_int8_qk_rope,         /* --int8: q/k norm+rope read qkv's int32 accumulators */
    &h3_pass_int8_resid_dequant,   /* --int8: Plan B takes out_proj's dequant_i8 */
    &h3_pass_elementwise_fusion,
    &h3_pass_int8_group_quant,     /* --int8: the quantizer joins its producer group */
    &h3_pass_memory_plan,
};

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
