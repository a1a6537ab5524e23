/* plan_internal.h: what the plan builder, writer and reader share (not public).
 *
 * The text form of tensor types used in
 * the plan ("bf16[8, 64]") and its parser, the rule that decides whether a string
 * value must be quoted in YAML so that any YAML reader sees a string, and the reader's
 * check of the kernels' launch fields (plan_check.c).
 */
#ifndef H3_PLAN_INTERNAL_H
#define H3_PLAN_INTERNAL_H

#include "h3/plan.h"


/* "bf16[8, 64]" (arena copy). */
const char *plan_type_text(h3_arena *a, const h3_type *t);
/* Parses "dtype[d, ...]"; 1 on success. */
int plan_type_parse(const char *s, h3_type *out);
/* True when a plain YAML scalar with this text would not read as a string (numbers,
 * booleans, null, empty, leading/trailing spaces, indicators). */
bool plan_needs_quotes(const char *s);

/* Checks k's grid, block and shared_bytes against CUDA's limits and the kernel's source
 * (its __launch_bounds__ and dynamic shared memory). NULL when they are fine, else the key
 * of the first bad field ("grid", "block", "shared_bytes") with the reason in msg. */
const char *plan_check_launch(const h3_kernel *k, char *msg, size_t len);

#endif
