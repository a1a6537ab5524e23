/* op_check.h: random operands and output comparison shared by the kernel numerics tests
 * (test_emu.c on the host, test_gpu.c on a GPU): operands are random and never all zero,
 * integer operands stay in the ranges their ops need (gather rows partly out of range to
 * test clamping, non-zero divisors), and outputs are compared with the CPU backend
 * bitwise, except that ops with transcendental functions or fp32 reductions may differ in
 * the last place of the output dtype.
 */
#ifndef H3_OP_CHECK_H
#define H3_OP_CHECK_H

#include "cg_test.h"
#include "h3/bf16.h"

#include <math.h>
#include <stdint.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static double uniform(double lo, double hi) { return lo + (hi - lo) * (double)(next_u64() >> 11) * 0x1p-53; }

/* Integer ranges by operand name (indices that must land in range, divisors != 0). */
static void int_range(const char *name, int64_t *lo, int64_t *hi) {
  *lo = -20, *hi = 20;
  if (!name) return;
  if (!strcmp(name, "k")) *lo = -2, *hi = 8;      /* gather rows: some clamped */
  if (!strcmp(name, "q")) *lo = 1, *hi = 6;       /* divisor */
  if (!strcmp(name, "pi")) *lo = 0, *hi = 7;      /* scatter / kv rows, positions */
  if (!strcmp(name, "i0")) *lo = 0, *hi = 6;      /* set_index row (offset 1) */
}

static void fill(void *p, const h3_value *v) {
  int64_t n = h3_type_numel(&v->type);
  const char *name = v->name ? v->name : (v->param ? v->param->name : NULL);
  for (int64_t i = 0; i < n; i++) {
    double x = uniform(-2.0, 2.0);
    if (fabs(x) < 1e-3) x = 0.5;
    int64_t lo, hi;
    int_range(name, &lo, &hi);
    int64_t iv = lo + (int64_t)(next_u64() % (uint64_t)(hi - lo + 1));
    if (!strcmp(name ? name : "", "q") && next_u64() % 2) iv = -iv; /* negative divisors */
    switch (v->type.dtype) {
    case H3_BF16: ((uint16_t *)p)[i] = h3_f32_to_bf16((float)x); break;
    case H3_F16: ((uint16_t *)p)[i] = h3_f32_to_f16((float)x); break;
    case H3_F32: ((float *)p)[i] = (float)x; break;
    case H3_F64: ((double *)p)[i] = x; break;
    case H3_I32: ((int32_t *)p)[i] = (int32_t)iv; break;
    case H3_I64: ((int64_t *)p)[i] = iv; break;
    case H3_I8: ((int8_t *)p)[i] = (int8_t)iv; break;
    default: ((uint8_t *)p)[i] = (uint8_t)(iv & 0xff); break;
    }
  }
}

static double as_double(const void *p, h3_dtype t, int64_t i) {
  switch (t) {
  case H3_BF16: return h3_bf16_to_f32(((const uint16_t *)p)[i]);
  case H3_F16: return h3_f16_to_f32(((const uint16_t *)p)[i]);
  case H3_F32: return ((const float *)p)[i];
  case H3_F64: return ((const double *)p)[i];
  case H3_I32: return ((const int32_t *)p)[i];
  case H3_I64: return (double)((const int64_t *)p)[i];
  case H3_I8: return ((const int8_t *)p)[i];
  default: return ((const uint8_t *)p)[i];
  }
}

static bool approx_op(h3_opcode c) {
  switch (c) {
  case H3_OP_EXP: case H3_OP_LOG: case H3_OP_TANH: case H3_OP_COS: case H3_OP_SIN:
  case H3_OP_SILU: case H3_OP_SIGMOID: case H3_OP_RMS_NORM: case H3_OP_REDUCE_SUM:
  case H3_OP_TIMESTEP_EMBEDDING: case H3_OP_ROPE_TABLE: case H3_OP_ROPE_POS_TABLE:
  case H3_OP_FUSED:
    return true;
  default:
    return false;
  }
}

/* A fused region is compared with a tolerance only when some op inside it is approximate
 * (else its arithmetic is a fixed sequence of IEEE operations: bitwise). */
static bool approx_kernel(const h3_op *op) {
  if (op->code != H3_OP_FUSED) return approx_op(op->code);
  for (const h3_op *o = op->n_regions ? op->regions[0].first : NULL; o; o = o->next)
    if (approx_op(o->code)) return true;
  return false;
}

/* Compares one output; returns the number of elements that differ beyond the rule. */
static int64_t compare(const h3_op *op, int r, const void *got, const void *want) {
  const h3_type *t = &op->results[r]->type;
  int64_t n = h3_type_numel(t), bad = 0, diff_bits = 0;
  size_t es = h3_dtype_size(t->dtype);
  double ulp = t->dtype == H3_BF16 ? 0x1p-7 : t->dtype == H3_F16 ? 0x1p-10 : t->dtype == H3_F32 ? 0x1p-20 : 0x1p-45;
  for (int64_t i = 0; i < n; i++) {
    if (memcmp((const char *)got + i * (int64_t)es, (const char *)want + i * (int64_t)es, es) == 0) continue;
    double g = as_double(got, t->dtype, i), w = as_double(want, t->dtype, i);
    if (isnan(g) && isnan(w)) continue;
    diff_bits++;
    bool ok = approx_kernel(op) && fabs(g - w) <= ulp * fmax(fabs(w), 1e-3) + 1e-6;
    if (!ok && bad++ < 3)
      fprintf(stderr, "  %s result %d element %lld: kernel %.9g, cpu %.9g\n", h3_opcode_name(op->code), r,
              (long long)i, g, w);
  }
  if (diff_bits && !bad)
    fprintf(stderr, "  %s: %lld of %lld elements differ in the last place (allowed)\n",
            h3_opcode_name(op->code), (long long)diff_bits, (long long)n);
  return bad;
}

/* Allocates and fills the op's operands (one value passed twice gets the same data). */
static void make_inputs(const h3_op *op, h3_tensor *in) {
  for (int k = 0; k < op->n_operands; k++) {
    in[k].type = op->operands[k]->type;
    in[k].data = calloc(1, (size_t)h3_type_bytes(&in[k].type) + 16);
    fill(in[k].data, op->operands[k]);
    for (int j = 0; j < k; j++)
      if (op->operands[j] == op->operands[k])
        memcpy(in[k].data, in[j].data, (size_t)h3_type_bytes(&in[k].type));
  }
}

/* True when some byte of the op's result r is not zero. */
static bool nonzero(const h3_op *op, int r, const void *data) {
  int64_t bytes = h3_type_bytes(&op->results[r]->type);
  for (int64_t b = 0; b < bytes; b++)
    if (((const unsigned char *)data)[b]) return true;
  return false;
}

#endif
