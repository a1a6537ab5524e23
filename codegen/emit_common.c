/* emit_common.c: the entry point of kernel emission and what every emitter shares.
 *
 * h3_exec_classify() decides how the CUDA backend runs each op; h3_codegen_emit_op()
 * dispatches to the emitter of the op's family and finishes the kernel: the source is
 * hashed with the placeholder name `@K@` written as "h3_<op>", the kernel is named
 * `h3_<op>_<first 10 hex of that hash>` and the name is substituted, so identical
 * kernels get identical names and the name can be re-checked from the source alone.
 */
#include "emit_internal.h"
#include "h3/bf16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- types and literals ---------------------------------------------------------------- */
bool emit_is_float(h3_dtype t) {
  return t == H3_BF16 || t == H3_F16 || t == H3_F32 || t == H3_F64;
}

const char *emit_comptype(h3_dtype t) {
  if (t == H3_F64) return "double";
  return emit_is_float(t) ? "float" : "long long";
}

void emit_literal(h3_strbuf *b, h3_dtype t, double v, bool round_to_dtype) {
  if (!emit_is_float(t)) {
    double r = trunc(v);
    if (!(r >= -9.2e18 && r <= 9.2e18)) r = 0; /* NaN/out of range: 0, like the device cvt */
    h3_strbuf_printf(b, "%lldll", (long long)r);
    return;
  }
  double x = v;
  if (t != H3_F64) {
    float f = (float)v;
    if (round_to_dtype && t == H3_BF16) f = h3_bf16_round(f);
    if (round_to_dtype && t == H3_F16) f = h3_f16_to_f32(h3_f32_to_f16(f));
    x = f;
  }
  const char *suffix = t == H3_F64 ? "" : "f";
  if (isnan(x))
    h3_strbuf_printf(b, t == H3_F64 ? "__longlong_as_double(0x7ff8000000000000ll)"
                                    : "__int_as_float(0x7fc00000)");
  else if (isinf(x))
    h3_strbuf_printf(b, "%s__int_as_float(0x7f800000)", x < 0 ? "-" : "");
  else
    h3_strbuf_printf(b, "%a%s", x, suffix);
}

void emit_round(h3_strbuf *b, h3_dtype t, const char *e) {
  switch (t) {
  case H3_BF16: h3_strbuf_printf(b, "h3_rbf16(%s)", e); break;
  case H3_F16: h3_strbuf_printf(b, "h3_rf16(%s)", e); break;
  case H3_I8: h3_strbuf_printf(b, "(long long)(signed char)(%s)", e); break;
  case H3_U8: h3_strbuf_printf(b, "(long long)(unsigned char)(%s)", e); break;
  case H3_I32: h3_strbuf_printf(b, "(long long)(int)(%s)", e); break;
  default: h3_strbuf_append(b, e); break;
  }
}

void emit_strides(const h3_type *t, int64_t *strides) {
  int64_t s = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= t->dims[i];
  }
}

/* ---- signature and launch ------------------------------------------------------------- */
void emit_signature(emit_ctx *ec, int n_in, const h3_type *in, int n_out, const h3_type *out,
                    const char *extra, int block, bool restrict_io) {
  const char *r = restrict_io ? " __restrict__" : "";
  h3_strbuf_printf(&ec->src, "extern \"C\" __global__ void __launch_bounds__(%d) @K@(", block);
  int n = 0;
  for (int i = 0; i < n_in; i++, n++)
    h3_strbuf_printf(&ec->src, "%sconst %s *%s in%d", n ? ", " : "", h3_kernel_ctype(in[i].dtype), r,
                     i);
  for (int i = 0; i < n_out; i++, n++)
    h3_strbuf_printf(&ec->src, "%s%s *%s out%d", n ? ", " : "", h3_kernel_ctype(out[i].dtype), r, i);
  if (extra) h3_strbuf_printf(&ec->src, "%s%s", n ? ", " : "", extra);
  h3_strbuf_append(&ec->src, ") {\n");
}

h3_status emit_args(emit_ctx *ec, int n_in, int n_out, bool with_seed) {
  int n = n_in + n_out + (with_seed ? 1 : 0);
  const char **args = h3_arena_alloc(ec->a, sizeof(char *) * (size_t)(n ? n : 1));
  if (!args) return H3_ERR;
  int j = 0;
  for (int i = 0; i < n_in; i++) args[j++] = h3_arena_printf(ec->a, "in%d", i);
  for (int i = 0; i < n_out; i++) args[j++] = h3_arena_printf(ec->a, "out%d", i);
  if (with_seed) args[j++] = "seed";
  for (int i = 0; i < j; i++)
    if (!args[i]) return H3_ERR;
  ec->k->n_args = n;
  ec->k->args = args;
  return H3_OK;
}

void emit_launch_1d(emit_ctx *ec, int64_t work, int block) {
  int64_t g = (work + block - 1) / block;
  if (g < 1) g = 1;
  if (g > EMIT_MAX_GRID) g = EMIT_MAX_GRID;
  ec->k->grid[0] = g;
  ec->k->grid[1] = ec->k->grid[2] = 1;
  ec->k->block[0] = block;
  ec->k->block[1] = ec->k->block[2] = 1;
  ec->k->shared_bytes = 0;
}

bool emit_needs_wide(const h3_op *op) {
  const int64_t lim = (int64_t)1 << 31;
  for (int i = 0; i < op->n_operands; i++)
    if (h3_type_numel(&op->operands[i]->type) >= lim) return true;
  for (int i = 0; i < op->n_results; i++)
    if (h3_type_numel(&op->results[i]->type) >= lim) return true;
  return false;
}

h3_status emit_unsupported(emit_ctx *ec, const char *what) {
  h3_diag_error(ec->d, ec->op->span,
                "this is a limitation of h3's CUDA code generator; please report it",
                "codegen: cannot emit a kernel for '%s': %s", ec->opname, what);
  return H3_ERR;
}

/* ---- naming ----------------------------------------------------------------------------- */
h3_status emit_finish(emit_ctx *ec) {
  if (ec->src.oom || !ec->src.data) return H3_ERR;
  char base[96];
  snprintf(base, sizeof base, "h3_%s", ec->opname);
  char *hashed = h3_str_replace_all(ec->src.data, "@K@", base);
  if (!hashed) return H3_ERR;
  char hex[65];
  h3_sha256_hex(hashed, strlen(hashed), hex);
  free(hashed);
  hex[10] = 0;
  char *name = h3_arena_printf(ec->a, "h3_%s_%s", ec->opname, hex);
  if (!name) return H3_ERR;
  char *final = h3_str_replace_all(ec->src.data, "@K@", name);
  if (!final) return H3_ERR;
  char *src = h3_arena_strdup(ec->a, final);
  free(final);
  if (!src) return H3_ERR;
  ec->k->name = name;
  ec->k->op = ec->opname;
  ec->k->tier = ec->exact ? H3_TIER_EXACT : H3_TIER_LOSSLESS;
  ec->k->source = src;
  h3_sha256_hex(src, strlen(src), ec->k->sha256);
  return H3_OK;
}

/* ---- dispatch ---------------------------------------------------------------------------- */
h3_status h3_codegen_emit_op(const h3_op *op, h3_tier tier, h3_arena *a, h3_kernel *k,
                             h3_diag *d) {
  memset(k, 0, sizeof *k);
  emit_ctx ec;
  memset(&ec, 0, sizeof ec);
  ec.op = op;
  ec.opname = h3_opcode_name(op->code);
  ec.a = a;
  ec.k = k;
  ec.d = d;
  /* an op's own `tier` (fused groups, the norm_modulate ops) wins over the caller's */
  ec.exact = h3_op_attr_tier(op, "tier", tier) != H3_TIER_LOSSLESS;
  h3_strbuf_init(&ec.src);
  h3_strbuf_printf(&ec.src, "// %s: %s", ec.opname,
                   h3_tier_name(ec.exact ? H3_TIER_EXACT : H3_TIER_LOSSLESS));
  for (int i = 0; i < op->n_results; i++) {
    h3_strbuf_append(&ec.src, i ? ", " : " -> ");
    h3_type_print(&ec.src, &op->results[i]->type);
  }
  h3_strbuf_append(&ec.src, "\n");
  int errors_before = d->errors;
  h3_status st;
  if (h3_exec_classify(op) != H3_EXEC_KERNEL) {
    st = emit_unsupported(&ec, "the CUDA backend does not run it as a kernel");
  } else {
    switch (op->code) {
    case H3_OP_RMS_NORM:
    case H3_OP_ADD_RMS_NORM:
    case H3_OP_ARGMAX:
    case H3_OP_SAMPLE_TOKENS:
    case H3_OP_REDUCE_SUM:
      st = emit_reduce(&ec);
      break;
    case H3_OP_NORM_MODULATE:
    case H3_OP_RESIDUAL_NORM_MODULATE:
      st = emit_normmod(&ec);
      break;
    case H3_OP_RMS_NORM_ROPE:
    case H3_OP_RMS_NORM_ROPE_WRITE:
      st = emit_norm_rope(&ec);
      break;
    case H3_OP_CONCAT:
    case H3_OP_PAD:
    case H3_OP_SLICE:
    case H3_OP_SET_INDEX:
    case H3_OP_SCATTER_ROWS:
    case H3_OP_KV_WRITE:
      st = emit_move(&ec);
      break;
    case H3_OP_TIMESTEP_EMBEDDING:
    case H3_OP_ROPE_TABLE:
    case H3_OP_ROPE_POS_TABLE:
    case H3_OP_ROPE:
    case H3_OP_RANDN:
      st = emit_model(&ec);
      break;
    case H3_OP_QUANTIZE_ROWS:
      st = emit_int8(&ec);
      break;
    case H3_OP_SPECTRUM_UPDATE:
    case H3_OP_SPECTRUM_FORECAST:
    case H3_OP_CACHE_DIT_DECIDE:
      st = emit_spectrum(&ec);
      break;
    default:
      st = emit_fused(&ec);
      break;
    }
  }
  if (st == H3_OK && ec.src.oom) st = H3_ERR;
  if (st == H3_OK) st = emit_finish(&ec);
  if (st != H3_OK && d->errors == errors_before)
    h3_diag_error(d, op->span, H3_HINT_OOM, "codegen: out of memory while emitting '%s'", ec.opname);
  h3_strbuf_free(&ec.src);
  return st;
}
