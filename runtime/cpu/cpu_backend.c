/* cpu_backend.c: the `cpu` backend: its function table, the op dispatch and `fused` ops.
 *
 * Memory is host memory (64-byte aligned malloc); upload/download/copy are memmove. run_op
 * dispatches on the opcode to the kernel of one ops_*.c file. A `fused` op runs its region
 * op by op on temporaries: at tier "exact" every op rounds to its own result dtype (so
 * the group is bitwise equal to the unfused ops); at tier "lossless" every intermediate
 * of a 16-bit float dtype is kept in f32 instead, and only the yielded values are rounded
 * (once) to the fused op's result dtypes.
 */
#include "cpu_internal.h"

#include "h3/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static h3_cpu_kernel kernel_of(h3_opcode code) {
  switch (code) {
  case H3_OP_CONST:
  case H3_OP_IOTA:
  case H3_OP_ADD:
  case H3_OP_SUB:
  case H3_OP_MUL:
  case H3_OP_DIV:
  case H3_OP_MOD:
  case H3_OP_MAX:
  case H3_OP_MIN:
  case H3_OP_NEG:
  case H3_OP_EXP:
  case H3_OP_LOG:
  case H3_OP_SQRT:
  case H3_OP_RSQRT:
  case H3_OP_ABS:
  case H3_OP_SILU:
  case H3_OP_SIGMOID:
  case H3_OP_TANH:
  case H3_OP_COS:
  case H3_OP_SIN:
  case H3_OP_CLAMP:
  case H3_OP_CAST: return h3cpu_elementwise;
  case H3_OP_RANDN: return h3cpu_randn;
  case H3_OP_SIGMA_SCHEDULE: return h3cpu_sigma_schedule;
  case H3_OP_RESHAPE: return h3cpu_reshape;
  case H3_OP_SLICE: return h3cpu_slice;
  case H3_OP_CONCAT: return h3cpu_concat;
  case H3_OP_PAD: return h3cpu_pad;
  case H3_OP_GATHER: return h3cpu_gather;
  case H3_OP_INDEX: return h3cpu_index;
  case H3_OP_SET_INDEX: return h3cpu_set_index;
  case H3_OP_SCATTER_ROWS: return h3cpu_scatter_rows;
  case H3_OP_RMS_NORM: return h3cpu_rms_norm;
  case H3_OP_ARGMAX: return h3cpu_argmax;
  case H3_OP_SAMPLE_TOKENS: return h3cpu_sample_tokens;
  case H3_OP_SPEC_ACCEPT: return h3cpu_spec_accept;
  case H3_OP_REDUCE_SUM: return h3cpu_reduce_sum;
  case H3_OP_NORM_MODULATE: return h3cpu_norm_modulate;
  case H3_OP_RESIDUAL_NORM_MODULATE: return h3cpu_residual_norm_modulate;
  case H3_OP_ADD_RMS_NORM: return h3cpu_add_rms_norm;
  case H3_OP_RMS_NORM_ROPE: return h3cpu_rms_norm_rope;
  case H3_OP_RMS_NORM_ROPE_WRITE: return h3cpu_rms_norm_rope_write;
  case H3_OP_LINEAR: return h3cpu_linear;
  case H3_OP_QUANTIZE_ROWS: return h3cpu_quantize_rows;
  case H3_OP_LINEAR_INT8: return h3cpu_linear_int8;
  case H3_OP_MATMUL_I8: return h3cpu_matmul_i8;
  case H3_OP_DEQUANT_I8: return h3cpu_dequant_i8;
  case H3_OP_LINEAR_NVFP4: return h3cpu_linear_nvfp4;
  case H3_OP_TIMESTEP_EMBEDDING: return h3cpu_timestep_embedding;
  case H3_OP_ROPE_TABLE: return h3cpu_rope_table;
  case H3_OP_ROPE_POS_TABLE: return h3cpu_rope_pos_table;
  case H3_OP_ROPE: return h3cpu_rope;
  case H3_OP_ATTENTION: return h3cpu_attention;
  case H3_OP_SAGE_ATTENTION: return h3cpu_sage_attention;
  case H3_OP_SOL_ATTENTION: return h3cpu_sol_attention;
  case H3_OP_KV_WRITE: return h3cpu_kv_write;
  case H3_OP_PAGED_ATTENTION: return h3cpu_paged_attention;
  case H3_OP_BLOCK_ATTENTION: return h3cpu_block_attention;
  case H3_OP_INDEX_TOPK: return h3cpu_index_topk;
  case H3_OP_SPARSE_ATTENTION: return h3cpu_sparse_attention;
  case H3_OP_ROUTER_TOPK: return h3cpu_router_topk;
  case H3_OP_MOE: return h3cpu_moe;
  case H3_OP_MARKOV_DRAFT: return h3cpu_markov_draft;
  case H3_OP_SPECTRUM_UPDATE: return h3cpu_spectrum_update;
  case H3_OP_SPECTRUM_FORECAST: return h3cpu_spectrum_forecast;
  case H3_OP_CACHE_DIT_DECIDE: return h3cpu_cache_dit_decide;
  case H3_OP_SHARD: return h3cpu_shard;
  case H3_OP_ALL_GATHER: return h3cpu_all_gather;
  case H3_OP_ALL_TO_ALL: return h3cpu_all_to_all;
  case H3_OP_ALL_REDUCE: return h3cpu_all_reduce;
  default: return NULL; /* control ops: the executor's */
  }
}

/* ---- fused regions ------------------------------------------------------------------- */
typedef struct {
  const h3_value *v;
  h3_tensor t;
  int owned;
} fused_slot;

static const h3_tensor *fused_find(const fused_slot *s, int n, const h3_value *v) {
  for (int i = n - 1; i >= 0; i--)
    if (s[i].v == v) return &s[i].t;
  return NULL;
}

/* Copies (converting with one rounding) src into dst of the same shape. */
static void convert_into(const h3_tensor *dst, const h3_tensor *src) {
  int64_t n = h3cpu_numel(dst);
  if (dst->type.dtype == src->type.dtype) {
    if (dst->data != src->data) memmove(dst->data, src->data, (size_t)h3_type_bytes(&dst->type));
    return;
  }
  for (int64_t i = 0; i < n; i++) {
    if (h3cpu_is_float(dst->type.dtype))
      h3cpu_st64(dst->data, dst->type.dtype, i, h3cpu_ld64(src->data, src->type.dtype, i));
    else
      h3cpu_sti(dst->data, dst->type.dtype, i, h3cpu_ldi(src->data, src->type.dtype, i));
  }
}

static h3_status run_fused(const h3_cpu_ctx *c, const h3_op *op, const h3_tensor *in, int n_in,
                           const h3_tensor *out, int n_out) {
  const h3_region *r = &op->regions[0];
  int lossless = h3_op_attr_tier(op, "tier", H3_TIER_EXACT) == H3_TIER_LOSSLESS;
  int cap = r->n_args + 8, n = 0;
  for (const h3_op *o = r->first; o; o = o->next) cap += o->n_results;
  fused_slot *slots = calloc((size_t)cap, sizeof *slots);
  if (!slots) {
    h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
    return H3_ERR;
  }
  h3_status st = H3_OK;
  if (r->n_args != n_in) {
    h3cpu_error(c, op, NULL, "region has %d arguments for %d operands", r->n_args, n_in);
    st = H3_ERR;
  }
  for (int i = 0; st == H3_OK && i < n_in; i++) slots[n++] = (fused_slot){r->args[i], in[i], 0};
  for (const h3_op *o = r->first; st == H3_OK && o; o = o->next) {
    if (o->code == H3_OP_YIELD) {
      for (int i = 0; i < o->n_operands && i < n_out; i++) {
        const h3_tensor *src = fused_find(slots, n, o->operands[i]);
        if (!src) {
          h3cpu_error(c, op, NULL, "yield operand %d is not defined in the region", i);
          st = H3_ERR;
          break;
        }
        convert_into(&out[i], src);
      }
      break;
    }
    h3_tensor ins[16], outs[4];
    if (o->n_operands > 16 || o->n_results > 4 || !kernel_of(o->code)) {
      h3cpu_error(c, op, NULL, "op '%s' cannot run inside a fused region", h3_opcode_name(o->code));
      st = H3_ERR;
      break;
    }
    for (int i = 0; st == H3_OK && i < o->n_operands; i++) {
      const h3_tensor *t = fused_find(slots, n, o->operands[i]);
      if (!t) {
        h3cpu_error(c, op, NULL, "operand %d of '%s' comes from outside the region", i,
                    h3_opcode_name(o->code));
        st = H3_ERR;
      } else {
        ins[i] = *t;
      }
    }
    for (int i = 0; st == H3_OK && i < o->n_results; i++) {
      h3_type t = o->results[i]->type;
      if (lossless && (t.dtype == H3_BF16 || t.dtype == H3_F16)) t.dtype = H3_F32;
      void *p = malloc((size_t)h3_type_bytes(&t) + 1);
      if (!p) {
        h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
        st = H3_ERR;
        break;
      }
      outs[i] = (h3_tensor){t, p};
      slots[n++] = (fused_slot){o->results[i], outs[i], 1};
    }
    /* a quantize_rows member (int8-fuse-group-quant) reads g rounded to its IR dtype, as
       the standalone op read the stored g: exact arithmetic in every tier (ops.def) */
    void *rounded = NULL;
    if (st == H3_OK && o->code == H3_OP_QUANTIZE_ROWS &&
        ins[0].type.dtype != o->operands[0]->type.dtype) {
      h3_tensor g = {o->operands[0]->type, malloc((size_t)h3_type_bytes(&o->operands[0]->type) + 1)};
      if (!g.data) {
        h3cpu_error(c, op, H3_HINT_OOM, "out of memory");
        st = H3_ERR;
      } else {
        convert_into(&g, &ins[0]);
        ins[0] = g;
        rounded = g.data;
      }
    }
    if (st == H3_OK) st = kernel_of(o->code)(c, o, ins, o->n_operands, outs, o->n_results);
    free(rounded);
  }
  for (int i = 0; i < n; i++)
    if (slots[i].owned) free(slots[i].t.data);
  free(slots);
  return st;
}

h3_status h3cpu_run(const h3_cpu_ctx *c, const h3_op *op, const h3_tensor *in, int n_in,
                    const h3_tensor *out, int n_out) {
  if (op->code == H3_OP_FUSED) return run_fused(c, op, in, n_in, out, n_out);
  h3_cpu_kernel k = kernel_of(op->code);
  if (!k) {
    h3cpu_error(c, op, NULL, "not a compute op (the executor runs control ops)");
    return H3_ERR;
  }
  return k(c, op, in, n_in, out, n_out);
}

h3_status h3_cpu_run_op(const h3_op *op, const h3_tensor *in, int n_in, const h3_tensor *out,
                        int n_out, int threads, uint64_t seed, h3_diag *d) {
  h3_cpu_ctx c = {h3cpu_pool_new(threads), seed, d, NULL, 0};
  h3_status st = h3cpu_run(&c, op, in, n_in, out, n_out);
  h3cpu_pool_free(c.pool);
  return st;
}

/* ---- the backend table ------------------------------------------------------------------ */
typedef struct {
  h3_cpu_pool *pool;
  char name[64];
  h3_comm *comm; /* h3_backend_options.comm and .rank */
  int rank;
} cpu_state;

static void cpu_destroy(h3_backend *b) {
  cpu_state *s = b->ctx;
  if (s) h3cpu_pool_free(s->pool);
  free(s);
  free(b);
}

static void *cpu_alloc(h3_backend *b, size_t bytes) {
  (void)b;
  size_t n = (bytes + 63) & ~(size_t)63;
  return aligned_alloc(64, n ? n : 64);
}

static void cpu_release(h3_backend *b, void *p) {
  (void)b;
  free(p);
}

static h3_status cpu_copy(h3_backend *b, void *dst, const void *src, size_t bytes, h3_diag *d) {
  (void)b, (void)d;
  if (dst != src && bytes) memmove(dst, src, bytes);
  return H3_OK;
}

static h3_status cpu_run_op(h3_backend *b, const h3_op *op, const h3_tensor *in, int n_in,
                            const h3_tensor *out, int n_out, h3_diag *d) {
  cpu_state *s = b->ctx;
  h3_cpu_ctx c = {s->pool, b->seed, d, s->comm, s->rank};
  return h3cpu_run(&c, op, in, n_in, out, n_out);
}

static h3_status cpu_sync(h3_backend *b, h3_diag *d) {
  (void)b, (void)d;
  return H3_OK;
}

static double cpu_now(h3_backend *b) {
  (void)b;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *cpu_device_name(h3_backend *b) { return ((cpu_state *)b->ctx)->name; }

/* the reference runs every compute and fused op */
static bool cpu_supports_op(h3_backend *b, const h3_op *op) {
  (void)b;
  return h3_exec_classify(op) != H3_EXEC_CONTROL;
}

static h3_status cpu_load_plan(h3_backend *b, h3_plan *p, h3_diag *d) {
  (void)b, (void)p, (void)d;
  return H3_OK; /* the reference needs no kernels */
}

static h3_status cpu_set_option(h3_backend *b, const char *key, const char *value, h3_diag *d) {
  (void)b;
  if (key && !strcmp(key, "attention") && value && !strcmp(value, "reference")) return H3_OK;
  if (key && !strcmp(key, "attention"))
    h3_diag_error(d, (h3_span){0}, "use --backend cuda for " H3_ATTENTION_NAMES,
                  "--attention %s: the cpu backend has only the reference attention", value);
  else
    h3_diag_error(d, (h3_span){0}, "the cpu backend's options: attention", "cpu: no option '%s'",
                  key ? key : "");
  return H3_ERR;
}

static const char *cpu_option(h3_backend *b, const char *key) {
  (void)b;
  return key && !strcmp(key, "attention") ? "reference" : NULL;
}

static double cpu_busy_seconds(h3_backend *b) {
  (void)b;
  return -1.0; /* not measured: the wall time is the report's latency */
}

static void cpu_reset_busy(h3_backend *b) { (void)b; }

static const h3_backend_ops cpu_ops = {
    .name = "cpu",
    .host_memory = true,
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .run_op = cpu_run_op,
    .sync = cpu_sync,
    .now = cpu_now,
    .device_name = cpu_device_name,
    .supports_op = cpu_supports_op,
    .load_plan = cpu_load_plan,
    .set_option = cpu_set_option,
    .option = cpu_option,
    .busy_seconds = cpu_busy_seconds,
    .reset_busy = cpu_reset_busy,
};

h3_backend *h3_backend_cpu_new(const h3_backend_options *o, h3_diag *d) {
  h3_backend *b = calloc(1, sizeof *b);
  cpu_state *s = calloc(1, sizeof *s);
  if (!b || !s) {
    free(b), free(s);
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "out of memory creating the cpu backend");
    return NULL;
  }
  int threads = o && o->threads > 0 ? o->threads : 2;
  s->pool = h3cpu_pool_new(threads);
  s->comm = o ? o->comm : NULL;
  s->rank = o && o->comm ? o->rank : 0;
  if (s->comm)
    snprintf(s->name, sizeof s->name, "%d thread%s, rank %d of %d", threads,
             threads == 1 ? "" : "s", s->rank, h3_comm_ranks(s->comm));
  else
    snprintf(s->name, sizeof s->name, "%d thread%s", threads, threads == 1 ? "" : "s");
  b->ops = &cpu_ops;
  b->ctx = s;
  b->seed = o ? o->seed : 0;
  return b;
}
