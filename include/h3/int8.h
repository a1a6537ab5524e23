/* int8.h: INT8 linear lowering (`--int8`): the option text, the row-split rule, the
 * load-time override H3_INT8_MAX_ROWS and the summary the reports print
 * (plan/int8_rules.c; the passes are passes/int8_lowering.c and passes/row_split.c,
 * the scheme is docs/int8.md and docs/models/accelerations.md §4).
 *
 * `--int8[=rotate=0|256,max_rows=N,min_split_n=N]`:
 *   rotate       0 (default): plain per-row quantization; 256: ConvRot, a block-diagonal
 *                Hadamard rotation of x and W along K in groups of 256 before quantizing;
 *   max_rows     row splitting of int8 GEMMs: split when rows > max_rows (<= 0 disables);
 *   min_split_n  ... and N >= min_split_n.
 * Without max_rows / min_split_n, row-split decides per GEMM shape from the table measured
 * for this project (docs/int8.md), and by the rule with the defaults 8192 / 8192 for
 * shapes the table lacks; giving either key applies the rule to every GEMM.
 */
#ifndef H3_INT8_H
#define H3_INT8_H

#include "h3/ir.h"

#define H3_INT8_GROUP 256 /* K must be a multiple of this for a linear to be lowered */
#define H3_INT8_DEFAULT_MAX_ROWS 8192
#define H3_INT8_DEFAULT_MIN_SPLIT_N 8192

typedef struct {
  int rotate;          /* 0 or 256 */
  int64_t max_rows;    /* <= 0: no splitting */
  int64_t min_split_n;
  bool rule_given;     /* max_rows or min_split_n was given: no measured table */
} h3_int8_options;

h3_int8_options h3_int8_options_default(void);
/* Parses the text after `--int8=` ("" or NULL: the defaults). Errors name the key and
 * the accepted values. */
h3_status h3_int8_options_parse(const char *text, h3_int8_options *o, h3_diag *d);

/* The int8 weight wq[N, K] of an int8 GEMM op (linear_int8, or matmul_i8 made from one by
 * int8-dequant-split), whose chunk_rows the row splitting decides; NULL for other ops. */
const h3_value *h3_int8_gemm_weight(const h3_op *op);

/* Rows per chunk for an int8 GEMM of M rows, N outputs, K inputs under o; 0 = unsplit. */
int64_t h3_int8_split_rows(int64_t m, int64_t n, int64_t k, const h3_int8_options *o);

/* Applies H3_INT8_MAX_ROWS, when set, to every linear_int8 of m (h3exec calls it after
 * reading a plan): the rule with that max_rows and the plan's min_split_n (graph attribute
 * `int8_min_split_n`, else the default) replaces the compiled decision; <= 0 disables
 * splitting. A value that is not an integer is an error. *applied tells whether it was set. */
h3_status h3_int8_apply_env(h3_module *m, bool *applied, h3_diag *d);
/* The same with an explicit max_rows (tests, tools). */
void h3_int8_set_max_rows(h3_module *m, int64_t max_rows);

typedef struct {
  int n_gemms;         /* linear_int8 ops */
  int n_split;         /* ... of which run in row chunks */
  int64_t n_layers;    /* weight matrices quantized at load (group members counted) */
  int64_t bf16_bytes;  /* bytes of those parameters */
  int64_t int8_bytes;  /* their int8 codes */
  int64_t scale_bytes; /* their fp32 scales */
  int rotate;          /* of the weight quantizers: 0, 256, or -1 when mixed */
} h3_int8_summary;

/* What the module's INT8 lowering amounts to (the load-time quantize_rows ops, each
 * parameter counted once). All zero for a module without one. */
void h3_int8_summarize(const h3_module *m, h3_int8_summary *s);

#endif
