/* mem_classes.h: the memory plan's rules: when each value of a graph is live and which
 * values may share memory (plan/mem_classes.c, part of libh3_plan). The `memory-plan` pass
 * (passes/memory_plan.c) places the classes built here in one arena per graph; the plan
 * reader (plan/plan_check.c) builds them again from a plan's IR to check the offsets it was
 * given. One rule for both sides, so a plan h3c writes always passes the reader's check.
 *
 * Which values get a place: every op result and loop region argument of the graph's
 * top-level region and of its loop bodies (fused regions are kernel-internal: their values
 * stay at offset -1, as do parameters and graph inputs).
 *
 * Time: ops are numbered in a pre-order walk; a loop takes one number before its body
 * (start s) and one after (end e). An op at number p reads its operands at 2p and writes
 * its results at 2p (so a result never shares memory with an operand it reads), except
 * the in-place ops, which write at 2p+1. A loop's region arguments are written at 2s+1,
 * its results at 2e+1. A use inside a loop body of a value defined outside that loop
 * lasts until the loop's end, 2e (the body runs again). A value lives from its write to
 * its last read. Side-stream windows (pass side-streams): a run of ops marked `side` may
 * run beside the main ops from its first op (number f) to the region's next op marked
 * `join` (number j; none: the region's terminator); every value live at some time of
 * [2f, 2j + 1] is live over all of it.
 *
 * Classes (values sharing one buffer, each member at a fixed byte delta):
 *   - views alias their source: reshape and index always (index: the runtime adds the
 *     dynamic row offset (i + offset) * row_bytes to the value's offset, which is the
 *     indexed tensor's base), slice when the slice is contiguous (all dims before the
 *     axis are 1; delta = start * inner bytes). A view of a parameter or graph input
 *     lives outside the arena: offset -1, like its source.
 *   - loop slot k: region argument k+1 and result k always share one buffer B_k; the
 *     yield operand k and the carried input k join B_k when their lifetimes do not
 *     overlap it. Where they do not join, the runtime copies: the carried input into B_k
 *     before the first iteration ("copy-in"), the yield operand into B_k after each
 *     iteration ("copy-back"); B_k is then reserved from 2s (copy-in) or for the whole
 *     loop (copy-back), so no other value lives there. The copies of one loop entry or one
 *     yield form a parallel assignment: when a source lies in another slot's B_j (a swap),
 *     the runtime must read every source before it writes any B_k.
 *   - in-place ops (kv_write, rms_norm_rope_write, set_index, scatter_rows,
 *     residual_norm_modulate): each in-place result (h3_op_inplace_operand: result 0 over
 *     operand 0; rms_norm_rope_write's result 1 over its v cache, operand 6) joins its
 *     operand's buffer when that operand dies at the op and no other operand shares that
 *     buffer; otherwise the result has its own buffer, disjoint from every operand, and the
 *     runtime copies the operand into it first (residual_norm_modulate writes every element
 *     of result 0, so it needs no copy). Other results are written at 2p.
 *   - donated inputs (an output named like the input: h3_graph_donated_output, the KV
 *     caches) take part like values written before the first op; their class lives in
 *     the input's own buffer, not in the arena: every member gets offset
 *     h3_offset_of_input(j) ("at input J"), and an in-place op over a view of the input
 *     writes the input itself. A row update (y = kv_write(index(X, i), ..) whose only
 *     reader of X after it is set_index(X, i, y)) puts y in X's row although X is live;
 *     set_index may join even when the row it writes already lives in operand 0 (the
 *     runtime skips the copy of a row onto itself).
 *   - calls: a result of a donated callee output is written like an in-place op's result
 *     0 over the argument of that input (joined when the argument dies at the call; else
 *     the runtime copies the argument into the result first and passes that).
 *   - load-time ops (h3_op_is_load_time: the int8 weight quantization) get no place: the
 *     runtime computes them once at load and keeps their results with the weights, so
 *     views of them (index) live outside the arena too.
 * A class lives in the arena (or in its donated input) at one base offset, aligned to
 * H3_MEM_ALIGN; each member sits at base + delta. Two classes may use the same bytes only
 * when no member of one is live at a time when a member of the other is.
 */
#ifndef H3_MEM_CLASSES_H
#define H3_MEM_CLASSES_H

#include "h3/ir.h"

#define H3_MEM_ALIGN 256 /* every class's base offset in its arena */

/* One value with a place: a member of a class. */
typedef struct {
  h3_value *v;
  int cls;            /* the class: the slot index of its first member */
  int next;           /* next member of the class, -1 */
  int64_t delta;      /* byte offset of the value in the class's buffer (the least is 0) */
  int64_t start, end; /* live from start to end, both included (the time above) */
  bool view;          /* a view inside its source: needs no memory of its own */
  int donor;          /* the graph input index of a donated input's own slot, else -1 */
} h3_mem_slot;

typedef struct {
  h3_mem_slot *slots; /* malloc'd; a class is walked from slots[c] (c == slots[c].cls) */
  int n_slots;
  int *slot_of; /* by value id (module's next_value_id entries); -1: no place */
  int n_ids;
} h3_mem_classes;

/* Builds g's slots and classes by the rules above; values' offsets are neither read nor
 * written. H3_ERR only when out of memory (nothing to free then). */
h3_status h3_mem_classes_build(h3_mem_classes *c, h3_module *m, h3_graph *g);
void h3_mem_classes_free(h3_mem_classes *c);
/* v's slot, -1 when v has no place. */
int h3_mem_slot_of(const h3_mem_classes *c, const h3_value *v);
/* Whether a member of class a is live at a time when a member of class b is. */
bool h3_mem_classes_overlap(const h3_mem_classes *c, int a, int b);
/* The donated input whose buffer class cls lives in, or -1. Members of such a class sit at
 * the input's own delta (views of its rows, in-place results over them, loop slots); -2
 * when a non-view member would sit elsewhere: such a class cannot be placed (offsets "at
 * input J" carry no delta). */
int h3_mem_class_donor(const h3_mem_classes *c, int cls);

#endif
