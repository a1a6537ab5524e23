/* ir_internal.h: helpers shared by the files of ir/ (not part of the public API).
 *
 * Arena allocation that records failure in m->oom, small arena arrays whose capacity is
 * implied by their length (ir_cap: 4, then the next power of two), and value creation.
 */
#ifndef H3_IR_INTERNAL_H
#define H3_IR_INTERNAL_H

#include "h3/ir.h"

/* Zeroed arena memory; NULL (and m->oom set) when out of memory. */
void *ir_alloc(h3_module *m, size_t size);
/* Arena copy of s (NULL stays NULL); sets m->oom on failure. */
const char *ir_strdup(h3_module *m, const char *s);
/* Capacity of an implied-capacity array holding n elements. */
int ir_cap(int n);
/* An array for n elements with room up to ir_cap(n). */
void *ir_array_new(h3_module *m, int n, size_t elem);
/* Returns an array holding the n elements of arr with room for one more (arr itself when
 * it has room); NULL when out of memory. arr must come from ir_array_new/ir_array_grow. */
void *ir_array_grow(h3_module *m, void *arr, int n, size_t elem);
/* A new value with a fresh id and offset -1. */
h3_value *ir_value_new(h3_module *m, h3_value_kind kind, h3_type type, const char *name,
                       h3_span span);
/* Adds or replaces attribute a in the implied-capacity array *attrs of *n. */
void ir_attrs_set(h3_module *m, h3_attr **attrs, int *n, h3_attr a);
const h3_attr *ir_attrs_find(const h3_attr *attrs, int n, const char *name);

#include "h3/strmap.h" /* the name maps of the text parser */

/* Text-form helpers shared by print.c and parse.c. */
/* A name printed bare after '@' or '%' (else quoted): [A-Za-z0-9_.]+ */
bool ir_name_is_bare(const char *s);
/* Appends s as a double-quoted string with \" \\ \n \t \r \xHH escapes. */
void ir_print_quoted(h3_strbuf *b, const char *s);
extern const char *const ir_init_names[]; /* by h3_init_kind */
#define IR_INIT_COUNT 5
extern const char *const ir_quant_names[]; /* by h3_param_quant; [0] unused */

#endif
