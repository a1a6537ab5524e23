/* ir.h: the typed SSA IR of h3.
 *
 * A module holds a model's resolved config, its parameters (weights) and its graphs.
 * A graph is a function: typed inputs, an ordered list of ops in one region, typed
 * outputs. A program (sampling / decode loop) is a graph of kind H3_GRAPH_PROGRAM whose
 * ops call other graphs. Shapes are concrete: the front end evaluates every shape
 * expression against the chosen config, so the IR carries plain int64 dims.
 *
 * Values are SSA: each is defined once (by an op result, a region argument, a graph
 * input or a parameter) and carries a use count kept up to date by the builder helpers.
 * Ops that hold regions (loop, fused) own their bodies; a region's first arguments are
 * defined by its parent op (loop index, carried values), its last op is `yield`.
 * Every op and value keeps the source span it came from.
 *
 * Ownership: everything of a module lives in the module's arena. Removing an op unlinks
 * it and drops its operands' use counts; the memory stays in the arena until the module
 * is freed.
 */
#ifndef H3_IR_H
#define H3_IR_H

#include "h3/strmap.h"
#include "h3/support.h"
#include <stdbool.h>

/* ---- quality tiers (docs/models/accelerations.md §2): cumulative, exact < lossless < high.
 * The pipeline is chosen by the tier (passes), fused ops carry the tier their kernel keeps
 * (the op attribute `tier`, printed and parsed by name in the IR text), kernels and
 * translation units of a plan record theirs. */
typedef enum { H3_TIER_EXACT, H3_TIER_LOSSLESS, H3_TIER_HIGH } h3_tier;

const char *h3_tier_name(h3_tier t); /* "exact", "lossless", "high" */
/* Parses a tier name; returns 1 on success, 0 for an unknown name. */
int h3_tier_parse(const char *s, h3_tier *out);

/* ---- types -------------------------------------------------------------------------- */
typedef enum {
  H3_BF16,
  H3_F16,
  H3_F32,
  H3_F64,
  H3_I8,
  H3_I32,
  H3_I64,
  H3_U8,
  H3_DTYPE_COUNT
} h3_dtype;

#define H3_MAX_RANK 6
/* The most ranks (GPUs, or cpu threads standing for them) a parallel plan may name: the
 * `ranks` attribute of the collective ops (ops.def, docs/parallel.md). */
#define H3_COMM_MAX_RANKS 64

/* A tensor type; rank 0 is a scalar. dims are row-major, the last one contiguous. */
typedef struct {
  h3_dtype dtype;
  int rank;
  int64_t dims[H3_MAX_RANK];
} h3_type;

const char *h3_dtype_name(h3_dtype t);             /* "bf16", "f32", ... */
int h3_dtype_from_name(const char *s, h3_dtype *out); /* 1 on success */
size_t h3_dtype_size(h3_dtype t);                  /* bytes per element */
/* Element count and bytes of t; INT64_MAX where the product overflows (a type that passed
 * h3_type_fits never does). */
int64_t h3_type_numel(const h3_type *t);
int64_t h3_type_bytes(const h3_type *t);
/* The largest tensor h3 holds: 2^48 bytes (256 TiB). Sizes, offsets and their sums stay far
 * from int64's range, so arithmetic on them cannot overflow. */
#define H3_MAX_TENSOR_BYTES ((int64_t)1 << 48)
/* Whether t's dims are non-negative and its bytes at most H3_MAX_TENSOR_BYTES: the one check
 * every user-given shape passes (front end, IR verifier, hence plans at load). */
bool h3_type_fits(const h3_type *t);
bool h3_type_equal(const h3_type *a, const h3_type *b);
h3_type h3_type_make(h3_dtype dt, int rank, const int64_t *dims);
/* "bf16[64, 64]", "f32[]" */
void h3_type_print(h3_strbuf *b, const h3_type *t);
/* Same text into a fixed buffer (truncated to len), returns buf; for messages. */
const char *h3_type_str(const h3_type *t, char *buf, size_t len);
bool h3_dtype_is_float(h3_dtype t);                /* bf16, f16, f32, f64 */
bool h3_type_same_shape(const h3_type *a, const h3_type *b); /* rank and dims, any dtype */

/* ---- attributes ----------------------------------------------------------------------- */
typedef enum {
  H3_ATTR_INT,
  H3_ATTR_FLOAT,
  H3_ATTR_STRING,
  H3_ATTR_INTS,
  H3_ATTR_FLOATS,
  H3_ATTR_DTYPE,
  H3_ATTR_TIER, /* a quality tier, printed and parsed by name: tier=lossless */
} h3_attr_kind;

typedef struct {
  const char *name;
  h3_attr_kind kind;
  int64_t i;        /* INT; also the dtype for DTYPE, the h3_tier for TIER */
  double f;         /* FLOAT */
  const char *s;    /* STRING */
  int n;            /* INTS / FLOATS length */
  int64_t *ints;    /* INTS */
  double *floats;   /* FLOATS */
} h3_attr;

/* ---- values, ops, regions ---------------------------------------------------------------- */
typedef enum {
  H3_VALUE_RESULT,     /* result `index` of op `def` */
  H3_VALUE_REGION_ARG, /* argument `index` of region `region` */
  H3_VALUE_INPUT,      /* input `index` of graph `graph` */
  H3_VALUE_PARAM,      /* module parameter `param` */
} h3_value_kind;

struct h3_op;
struct h3_region;
struct h3_graph;
struct h3_param;

typedef struct h3_value {
  int id; /* unique within the module; printing renumbers */
  h3_value_kind kind;
  h3_type type;
  const char *name; /* source name or NULL; printed as %name when unique */
  int uses;
  int index;
  struct h3_op *def;
  struct h3_region *region;
  struct h3_graph *graph;
  struct h3_param *param;
  int64_t offset; /* set by memory planning: >= 0 a byte offset in the graph's activation
                     arena; -1 = not planned (params, inputs, values the planner leaves
                     out); <= -2 = in the buffer of the graph's donated input
                     h3_offset_input(offset) (printed "at input J") */
  h3_span span;
} h3_value;

typedef enum { H3_OPCODE_INVALID = 0,
#define H3_OP(ID, NAME, KIND) H3_OP_##ID,
#include "h3/ops.def"
#undef H3_OP
  H3_OPCODE_COUNT
} h3_opcode;

typedef struct h3_region {
  struct h3_op *parent;
  int n_args;
  h3_value **args;
  struct h3_op *first, *last; /* doubly linked op list; last is `yield` */
} h3_region;

typedef struct h3_op {
  int id;
  h3_opcode code;
  int n_operands;
  h3_value **operands;
  int n_results;
  h3_value **results;
  int n_attrs;
  h3_attr *attrs;
  int n_regions;
  h3_region *regions; /* array of n_regions */
  struct h3_op *prev, *next;
  h3_region *parent;
  h3_span span;
} h3_op;

/* ---- parameters ----------------------------------------------------------------------- */
/* How the random initialiser fills a parameter (spec-specific scaling lives in attrs of
 * the declaration; see docs/language.md `init`). */
typedef enum {
  H3_INIT_NORMAL,  /* N(0, scale^2) */
  H3_INIT_UNIFORM, /* U(-scale, scale) */
  H3_INIT_CONST,   /* every element = value */
  H3_INIT_ONES_PLUS_NORMAL, /* 1 + N(0, scale^2): norm weights near 1 */
  H3_INIT_ROPE_INV_FREQ,    /* inv_freq[j] = theta^(-2j/rot); value = theta, scale = rot */
} h3_init_kind;

/* Which tensor of a quantized form a parameter is (--draft-quant nvfp4, docs/nvfp4.md): the
 * NVFP4 form of a bf16 weight [.., N, K] is three parameters, packed u8[.., N, K/2], scale
 * u8[.., N, K/16] and global f32[.., 1] (include/h3/nvfp4.h), each naming the bf16 parameter
 * it stands for (`quant_source`) and keeping its init, so that the weight store can make
 * them from the bf16 weight (random, or a file holding only it). IR text: `quant KIND
 * "SOURCE"` after the init. */
typedef enum {
  H3_QUANT_NONE,
  H3_QUANT_NVFP4_PACKED,
  H3_QUANT_NVFP4_SCALE,
  H3_QUANT_NVFP4_GLOBAL,
  H3_QUANT_COUNT
} h3_param_quant;

typedef struct h3_param {
  const char *name; /* weight-file name pattern, e.g. "blocks.{}.attn.qkv_proj.weight";
                       "{}" stands for the group index, "{e}" for an inner index */
  const char *group; /* declared group name ("blocks") or NULL */
  /* type: for a grouped parameter the leading dim(s) are the group counts, e.g.
     bf16[layers, 3*heads*head_dim, dim]; `group_dims` says how many leading dims those are */
  h3_type type;
  int group_dims;
  int64_t group_base; /* index of the first group member in weight names (e.g. 3 for M3.1
                         sparse layers numbered from 3) */
  h3_init_kind init;
  double init_scale, init_value;
  h3_param_quant quant;     /* H3_QUANT_NONE for a plain weight */
  const char *quant_source; /* the quantized bf16 parameter's name pattern, else NULL */
  h3_value *value; /* the H3_VALUE_PARAM value */
  h3_span span;
} h3_param;

/* ---- graphs and the module --------------------------------------------------------------- */
typedef enum { H3_GRAPH_FUNCTION, H3_GRAPH_PROGRAM } h3_graph_kind;

typedef struct h3_graph {
  const char *name;
  h3_graph_kind kind;
  int n_inputs;
  h3_value **inputs;
  int n_outputs;
  const char **output_names; /* names at the graph boundary (safetensors names) */
  h3_region body;            /* last op is `return` */
  int n_attrs;               /* e.g. memory plan: arena_bytes, peak_bytes */
  h3_attr *attrs;
  h3_span span;
} h3_graph;

typedef struct {
  const char *key;
  int64_t value;
} h3_config_entry;

typedef struct h3_module {
  h3_arena arena;
  const char *model;  /* "minimax_h3" */
  const char *config; /* preset name used, "full" */
  const char *source; /* the .g file it came from (for plan headers), may be NULL */
  int n_config;
  h3_config_entry *config_entries; /* resolved values, after --set, sorted as declared */
  h3_strmap config_index;          /* key -> entry index + 1 (h3_module_set_config keeps it) */
  int n_params, cap_params;
  h3_param **params;
  int n_graphs, cap_graphs;
  h3_graph **graphs;
  int next_value_id, next_op_id;
  bool oom; /* an arena allocation failed: the module is incomplete (verify reports it) */
} h3_module;

/* ---- module and builder API ------------------------------------------------------------ */
h3_module *h3_module_new(const char *model, const char *config);
void h3_module_free(h3_module *m);
int64_t h3_module_config(const h3_module *m, const char *key, int64_t fallback);
h3_graph *h3_module_graph(const h3_module *m, const char *name);
/* Donated inputs: an output named like an input is that input updated (the KV caches); the
 * caller gives the input up, so the graph may update it in place. The output index of
 * input i, or -1 when input i is not donated. */
int h3_graph_donated_output(const h3_graph *g, int input);
/* The value offset meaning "in the buffer of donated input j", and back (-1: not one). */
static inline int64_t h3_offset_of_input(int j) { return -2 - (int64_t)j; }
static inline int h3_offset_input(int64_t offset) { return offset <= -2 ? (int)(-2 - offset) : -1; }
h3_param *h3_module_param(const h3_module *m, const char *name);
h3_param *h3_module_add_param(h3_module *m, const char *name, h3_type type, h3_span span);
h3_graph *h3_module_add_graph(h3_module *m, const char *name, h3_graph_kind kind, h3_span span);
h3_value *h3_graph_add_input(h3_module *m, h3_graph *g, const char *name, h3_type type,
                             h3_span span);
/* Adds or replaces a resolved config entry (kept in insertion order). */
void h3_module_set_config(h3_module *m, const char *key, int64_t value);
/* Appends one named output (its value is the matching operand of the body's `return`). */
void h3_graph_add_output(h3_module *m, h3_graph *g, const char *name);
/* Graph attributes (memory plan ...): adds or replaces one; lookup by name or NULL. */
void h3_graph_set_attr(h3_module *m, h3_graph *g, h3_attr a);
const h3_attr *h3_graph_attr(const h3_graph *g, const char *name);

/* Attribute helpers (arena copies of the strings and arrays). */
h3_attr h3_attr_int(h3_module *m, const char *name, int64_t v);
h3_attr h3_attr_float(h3_module *m, const char *name, double v);
h3_attr h3_attr_string(h3_module *m, const char *name, const char *v);
h3_attr h3_attr_ints(h3_module *m, const char *name, int n, const int64_t *v);
h3_attr h3_attr_floats(h3_module *m, const char *name, int n, const double *v);
h3_attr h3_attr_dtype(h3_module *m, const char *name, h3_dtype v);
h3_attr h3_attr_tier(h3_module *m, const char *name, h3_tier v);
const h3_attr *h3_op_attr(const h3_op *op, const char *name);
int64_t h3_op_attr_int(const h3_op *op, const char *name, int64_t fallback);
/* The op's tier attribute `name`, or fallback when it has none. */
h3_tier h3_op_attr_tier(const h3_op *op, const char *name, h3_tier fallback);
double h3_op_attr_float(const h3_op *op, const char *name, double fallback);
const char *h3_op_attr_string(const h3_op *op, const char *name, const char *fallback);
/* attention's and sage_attention's v_view = [start, row_stride] (ops.def): true with both set
   when the op has one, else false with both left as they are. */
bool h3_op_v_view(const h3_op *op, int64_t *start, int64_t *row_stride);
/* Whether v is a scalar integer `const` op's result; its value into *out. */
bool h3_value_const_int(const h3_value *v, int64_t *out);
/* Adds or replaces one attribute. */
void h3_op_set_attr(h3_module *m, h3_op *op, h3_attr a);

/* Insertion point: new ops go before `before` in `region` (before == NULL: at the end). */
typedef struct {
  h3_module *m;
  h3_region *region;
  h3_op *before;
  h3_span span; /* span given to new ops and values */
} h3_builder;

/* Creates an op with results typed by the registry's inference (op_infer) and inserts it.
 * On an inference error, reports to `d` (at b->span) and returns NULL; nothing inserted.
 * n_regions regions are created empty; the caller fills them (h3_region_add_arg ...). */
h3_op *h3_build_op(h3_builder *b, h3_opcode code, int n_operands, h3_value **operands,
                   int n_attrs, const h3_attr *attrs, int n_regions, h3_diag *d);
/* Same, with result types given (used by the IR text parser and for region ops whose
 * result types come from the yield). No inference. */
h3_op *h3_build_op_typed(h3_builder *b, h3_opcode code, int n_operands, h3_value **operands,
                         int n_attrs, const h3_attr *attrs, int n_results,
                         const h3_type *result_types, int n_regions);
h3_value *h3_region_add_arg(h3_module *m, h3_region *r, h3_type type, const char *name,
                            h3_span span);

void h3_op_set_operand(h3_op *op, int i, h3_value *v); /* keeps use counts */
/* Replaces every use of `from` in the module with `to` (types must be equal). */
void h3_value_replace_all_uses(h3_module *m, h3_value *from, h3_value *to);
/* Unlinks an op (and its regions); drops operand use counts. Its results must be unused. */
void h3_op_erase(h3_op *op);
void h3_op_move_before(h3_op *op, h3_region *region, h3_op *before);
/* Walk helpers: pre-order over every op of a region, descending into nested regions. */
typedef int (*h3_op_visitor)(h3_op *op, void *ctx); /* return nonzero to stop */
int h3_region_walk(h3_region *r, h3_op_visitor fn, void *ctx);
int h3_module_walk(h3_module *m, h3_op_visitor fn, void *ctx);
/* The region where v is defined: the def's region, the region of a region argument, the
 * graph body of a graph input; NULL for parameters (visible everywhere). */
h3_region *h3_value_def_region(const h3_value *v);
/* The ancestor of op (op itself included) whose parent region is r; NULL when op is not
 * inside r. */
h3_op *h3_op_ancestor_in(h3_op *op, const h3_region *r);
/* Recounts every value's uses from scratch (the verifier checks they agree). */
void h3_module_recount_uses(h3_module *m);

/* ---- verification and text form -------------------------------------------------------- */
/* Checks SSA dominance within regions, use counts, operand/result types against the
 * registry's inference, attribute schemas, region terminators, loop-carried types.
 * Reports each problem at the op's span; returns H3_ERR if any. */
h3_status h3_verify_module(h3_module *m, h3_diag *d);

/* The text form, see docs/ir-text.md. Printing then parsing gives the same text.
 * h3_module_parse reports syntax errors at file:line:col, then runs h3_verify_module
 * (whose errors point at the ops' lines); NULL on any error. Register the text with
 * h3_diag_add_source first to get the quoted line and caret in the messages. */
void h3_module_print(h3_strbuf *out, const h3_module *m);
h3_module *h3_module_parse(const char *file, const char *text, size_t len, h3_diag *d);

#endif
