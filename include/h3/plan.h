/* plan.h: the h3 execution plan, written by h3c and read by h3exec.
 *
 * A plan is one YAML document (docs/plan-format.md) holding: the header (format, versions,
 * model, config, quality tier, flags, passes, target arch, CUDA/NVRTC/cuBLASLt versions,
 * cache-key scheme), the weight manifest (every tensor name expanded per group member),
 * the memory plan summary per graph, the kernels (name, op, CUDA C source, launch rule,
 * NVRTC options, translation unit, source sha256), the library calls, the program entry
 * and the optimised IR text, which the runtime re-parses (h3_module_parse) and runs.
 * Binary data (CUBINs, weights) never goes inside the YAML: CUBINs come from the kernel
 * cache (h3_plan_compile_kernels).
 *
 * Ops find their kernel or library call through the IR op attribute `kernel` (a kernel
 * name, or a library call's name such as "cublaslt_3").
 *
 * Writing is deterministic: reading a plan and writing it again gives the same bytes.
 * Everything of a plan lives in its arena (the module in its own); h3_plan_free frees all.
 *
 * libh3_plan (plan/) is the contract between the compiler and the executor: codegen writes
 * plans (h3_plan_build, in libh3_codegen), the runtime reads them; both link this library
 * and ir, and nothing else of each other. It owns this header, kernel.h (kernels, exec
 * kinds, NVRTC and the kernel cache), the memory plan's sharing rules (mem_classes.h) and
 * the load-time rules (int8.h: the row-split rule and H3_INT8_MAX_ROWS, applied with
 * h3_plan_apply_load_rules).
 */
#ifndef H3_PLAN_H
#define H3_PLAN_H

#include "h3/ir.h"
#include "h3/kernel.h"

#define H3_PLAN_FORMAT "h3-plan"
#define H3_PLAN_FORMAT_VERSION 1
#define H3_PLAN_KEY_SCHEME \
  "sha256(source, sorted options, arch, nvrtc version, h3 version)"

/* What h3c tells the plan builder. */
typedef struct {
  h3_tier quality;           /* the --quality the passes ran at */
  const char *source_file;   /* the .g file; NULL = the module's source */
  int n_flags;
  const char *const *flags;  /* h3c's command-line options as given, for the header */
  int n_passes;
  const char *const *passes; /* the passes that ran, in order */
  int kernels_per_tu;        /* kernels per NVRTC translation unit; <= 0: 32 */
} h3_plan_options;

/* One tensor of the weight file: a member of a (possibly grouped) IR parameter. */
typedef struct {
  const char *name;  /* "blocks.3.attn.qkv_proj.weight" */
  h3_type type;      /* the member's dtype and shape (the group dims dropped) */
  int64_t bytes;
  const char *param; /* the IR parameter: "blocks.{}.attn.qkv_proj.weight" */
  int64_t index;     /* member index in the parameter's stack (row-major over group dims) */
} h3_plan_weight;

typedef struct {
  const char *graph;
  int64_t arena_bytes; /* -1 when the graph has no memory plan */
  int64_t peak_bytes;
} h3_plan_memory;

typedef struct {
  h3_kernel k;
  int tu;   /* translation unit index */
  int uses; /* IR ops that run it */
} h3_plan_kernel;

/* One NVRTC program: the prelude followed by its kernels' sources, in plan order. */
typedef struct {
  h3_tier tier;      /* H3_TIER_EXACT or H3_TIER_LOSSLESS */
  int n_options;
  const char **options;
  int n_kernels;
  int *kernels;      /* indices into h3_plan.kernels */
  /* filled by h3_plan_compile_kernels (never written to the YAML) */
  unsigned char *cubin; /* malloc'd */
  size_t cubin_len;
  bool cache_hit;
} h3_plan_tu;

typedef struct {
  const char *key;
  const char *value; /* the attribute's text (floats round-trip) */
} h3_plan_kv;

typedef struct {
  const char *name;  /* "cublaslt_0": the op's `kernel` attribute */
  const char *kind;  /* "cublaslt" | "attention" | "host" | "deferred" */
  const char *op;    /* "linear", "attention", "moe", ... */
  const char *graph;
  int n_operands, n_results;
  h3_type *operands, *results;
  int n_attrs;
  h3_plan_kv *attrs; /* the op's attributes (without `kernel`) */
} h3_plan_libcall;

typedef struct h3_plan {
  h3_arena arena;
  const char *file; /* where it was read from or "<plan>" */
  /* header */
  const char *h3_version, *model, *source, *config, *arch;
  h3_tier quality;
  const char *cuda_version, *nvrtc_version, *cublaslt_version, *key_scheme;
  int n_config;
  h3_config_entry *config_entries;
  int n_flags, n_passes;
  const char **flags, **passes;
  /* weights */
  int64_t n_weights, weight_bytes;
  h3_plan_weight *weights;
  /* memory plan per graph */
  int n_memory;
  h3_plan_memory *memory;
  /* kernels */
  const char *prelude;
  char prelude_sha256[65];
  int n_kernels;
  h3_plan_kernel *kernels;
  int n_tus;
  h3_plan_tu *tus;
  int n_libcalls;
  h3_plan_libcall *libcalls;
  /* program */
  const char *entry; /* default program, or NULL when the module has none */
  int n_graphs;
  const char **graphs;
  /* IR */
  const char *ir_text;
  h3_module *module; /* owned */
} h3_plan;

/* Runs codegen over the optimised module (libh3_codegen, codegen/plan_build.c): classifies
 * every op, emits and deduplicates kernels, sets the op attribute `kernel`, groups kernels
 * into translation units, fills the header, weight manifest, memory summary, library calls
 * and program, and prints the IR text. The plan takes ownership of m (also on failure). */
h3_status h3_plan_build(h3_plan **out, h3_module *m, const h3_plan_options *o, h3_diag *d);
/* Compiles (or loads from the kernel cache) every translation unit's CUBIN. */
h3_status h3_plan_compile_kernels(h3_plan *p, h3_diag *d);
/* Index of a kernel by name, -1 if none. */
int h3_plan_find_kernel(const h3_plan *p, const char *name);
const h3_plan_libcall *h3_plan_find_libcall(const h3_plan *p, const char *name);

h3_status h3_plan_to_yaml(const h3_plan *p, h3_strbuf *out);
/* The largest plan h3 writes and reads: the YAML reader holds the whole document as nodes
 * (several times the text), so a larger plan is refused when written, naming the limit, and
 * when read, before parsing. */
#define H3_PLAN_MAX_BYTES ((size_t)1 << 30)
/* Writes atomically (temp file + rename); a plan over H3_PLAN_MAX_BYTES is an error. */
h3_status h3_plan_write_file(const h3_plan *p, const char *path, h3_diag *d);

/* Reads and verifies a plan: format and version, h3 version, required keys and types,
 * kernel sources against their sha256 and names, launch fields against CUDA's limits and
 * the kernels' sources, the IR (parsed and verified), the memory plan's offsets. Every
 * error names the file and the YAML line:col. NULL on error. */
h3_plan *h3_plan_read_file(const char *path, h3_diag *d);
h3_plan *h3_plan_read_text(const char *file, const char *text, size_t len, h3_diag *d);
void h3_plan_free(h3_plan *p);
/* What the reader checks of the memory plan (plan/plan_check.c): every value's offset against
 * the rules of mem_classes.h, each class at one aligned base inside its graph's arena
 * (checked 64-bit sums), no two classes live at the same time in the same bytes. Stops at
 * the first problem: an error at the value's IR span (hint: recompile the plan with h3c). */
h3_status h3_plan_check_memory(h3_module *m, h3_diag *d);

/* What a reader applies after reading a plan, before running it: the environment's
 * load-time overrides (today H3_INT8_MAX_ROWS, int8.h). *int8_override tells whether that
 * one was set (the report says so). */
h3_status h3_plan_apply_load_rules(h3_plan *p, bool *int8_override, h3_diag *d);

#endif
