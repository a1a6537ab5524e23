/* plan_internal.h: what the plan builder, writer and reader share (not public).
 *
 * The text form of tensor types used in
 * the plan ("bf16[8, 64]") and its parser, and the rule that decides whether a string
 * value must be quoted in YAML so that any YAML reader sees a string.
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

#endif
