/* ops_elementwise.c: CPU reference of the elementwise ops: const, iota, the unary and
 * binary arithmetic ops with numpy broadcasting, clamp and cast.
 *
 * Math domain by result dtype (ops.def): fp32 for bf16/f16/f32 results, fp64 for f64,
 * int64 for integer results (two's-complement wrap-around, floor division and
 * Python-style modulo; a zero divisor is an error naming the op). Every result is rounded
 * once, by the store, to the output tensor's dtype. Operands are read at their own dtype
 * and widened. max/min propagate NaN. The output tensor's dtype is authoritative (inside a
 * lossless fused region the executor widens it to f32).
 */
#include "cpu_internal.h"

typedef struct {
  const void *p;
  h3_dtype t;
  int64_t st[H3_MAX_RANK]; /* element stride per output dim; 0 where broadcast */
} ew_in;

typedef struct {
  double lo, hi;
  int has_lo, has_hi;
} ew_attrs;

static void bcast_strides(const h3_type *in, const h3_type *out, int64_t *st) {
  int off = out->rank - in->rank;
  int64_t s = 1;
  for (int d = out->rank - 1; d >= 0; d--) {
    int di = d - off;
    if (di < 0) {
      st[d] = 0;
      continue;
    }
    st[d] = (in->dims[di] == 1 && out->dims[d] != 1) ? 0 : s;
    s *= in->dims[di];
  }
}

static inline float max_f(float a, float b) { return (a != a || a > b) ? a : b; }
static inline float min_f(float a, float b) { return (a != a || a < b) ? a : b; }
static inline double max_d(double a, double b) { return (a != a || a > b) ? a : b; }
static inline double min_d(double a, double b) { return (a != a || a < b) ? a : b; }

static float ew_f32(h3_opcode c, float a, float b, const ew_attrs *at) {
  switch (c) {
  case H3_OP_ADD: return a + b;
  case H3_OP_SUB: return a - b;
  case H3_OP_MUL: return a * b;
  case H3_OP_DIV: return a / b;
  case H3_OP_MOD: {
    float r = fmodf(a, b);
    if (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) r += b;
    return r;
  }
  case H3_OP_MAX: return max_f(a, b);
  case H3_OP_MIN: return min_f(a, b);
  case H3_OP_NEG: return -a;
  case H3_OP_EXP: return expf(a);
  case H3_OP_LOG: return logf(a);
  case H3_OP_SQRT: return sqrtf(a);
  case H3_OP_RSQRT: return 1.0f / sqrtf(a);
  case H3_OP_ABS: return fabsf(a);
  case H3_OP_SILU: return a / (1.0f + expf(-a));
  case H3_OP_SIGMOID: return 1.0f / (1.0f + expf(-a));
  case H3_OP_TANH: return tanhf(a);
  case H3_OP_COS: return cosf(a);
  case H3_OP_SIN: return sinf(a);
  case H3_OP_CLAMP:
    if (at->has_lo) a = max_f(a, (float)at->lo);
    if (at->has_hi) a = min_f(a, (float)at->hi);
    return a;
  default: return a; /* cast: the store rounds */
  }
}

static double ew_f64(h3_opcode c, double a, double b, const ew_attrs *at) {
  switch (c) {
  case H3_OP_ADD: return a + b;
  case H3_OP_SUB: return a - b;
  case H3_OP_MUL: return a * b;
  case H3_OP_DIV: return a / b;
  case H3_OP_MOD: {
    double r = fmod(a, b);
    if (r != 0.0 && ((r < 0.0) != (b < 0.0))) r += b;
    return r;
  }
  case H3_OP_MAX: return max_d(a, b);
  case H3_OP_MIN: return min_d(a, b);
  case H3_OP_NEG: return -a;
  case H3_OP_EXP: return exp(a);
  case H3_OP_LOG: return log(a);
  case H3_OP_SQRT: return sqrt(a);
  case H3_OP_RSQRT: return 1.0 / sqrt(a);
  case H3_OP_ABS: return fabs(a);
  case H3_OP_SILU: return a / (1.0 + exp(-a));
  case H3_OP_SIGMOID: return 1.0 / (1.0 + exp(-a));
  case H3_OP_TANH: return tanh(a);
  case H3_OP_COS: return cos(a);
  case H3_OP_SIN: return sin(a);
  case H3_OP_CLAMP:
    if (at->has_lo) a = max_d(a, at->lo);
    if (at->has_hi) a = min_d(a, at->hi);
    return a;
  default: return a;
  }
}

/* Integer math; *div0 is set when a division by zero happens. */
static int64_t ew_i64(h3_opcode c, int64_t a, int64_t b, const ew_attrs *at, int *div0) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (c) {
  case H3_OP_ADD: return (int64_t)(ua + ub);
  case H3_OP_SUB: return (int64_t)(ua - ub);
  case H3_OP_MUL: return (int64_t)(ua * ub);
  case H3_OP_DIV:
  case H3_OP_MOD:
    if (b == 0) *div0 = 1;
    return c == H3_OP_DIV ? h3_sc_floordiv(a, b) : h3_sc_floormod(a, b);
  case H3_OP_MAX: return a > b ? a : b;
  case H3_OP_MIN: return a < b ? a : b;
  case H3_OP_NEG: return (int64_t)(0 - ua);
  case H3_OP_ABS: return a < 0 ? (int64_t)(0 - ua) : a;
  case H3_OP_CLAMP:
    if (at->has_lo && (double)a < at->lo) a = h3cpu_trunc_i64(ceil(at->lo));
    if (at->has_hi && (double)a > at->hi) a = h3cpu_trunc_i64(floor(at->hi));
    return a;
  case H3_OP_CAST: return a;
  default: return h3cpu_trunc_i64(ew_f64(c, (double)a, (double)b, at));
  }
}

/* f64 -> bf16/f16 with one rounding: round to f32 with round-to-odd, then RNE. */
static float f64_to_f32_odd(double v) {
  float f = (float)v;
  if ((double)f != v && f == f && !isinf(f)) {
    uint32_t u = h3_f32_bits(f);
    if ((u & 1u) == 0) {
      float g = (double)f < v ? nextafterf(f, INFINITY) : nextafterf(f, -INFINITY);
      f = g;
    }
  }
  return f;
}

static h3_status ew_fill(const h3_op *op, const h3_tensor *o) {
  int64_t n = h3cpu_numel(o);
  if (op->code == H3_OP_IOTA) {
    for (int64_t i = 0; i < n; i++) h3cpu_st64(o->data, o->type.dtype, i, (double)i);
    return H3_OK;
  }
  double v = h3_op_attr_float(op, "value", 0.0);
  h3_dtype t = o->type.dtype;
  if (t == H3_BF16 || t == H3_F16) {
    float f = f64_to_f32_odd(v);
    for (int64_t i = 0; i < n; i++) h3cpu_st(o->data, t, i, f);
  } else {
    for (int64_t i = 0; i < n; i++) h3cpu_st64(o->data, t, i, v);
  }
  return H3_OK;
}

H3_CPU_KERNEL(h3cpu_elementwise) {
  (void)n_out;
  const h3_tensor *o = &out[0];
  if (op->code == H3_OP_CONST || op->code == H3_OP_IOTA) return ew_fill(op, o);
  ew_attrs at = {0};
  const h3_attr *lo = h3_op_attr(op, "lo"), *hi = h3_op_attr(op, "hi");
  if (lo) {
    at.has_lo = 1;
    at.lo = lo->kind == H3_ATTR_INT ? (double)lo->i : lo->f;
  }
  if (hi) {
    at.has_hi = 1;
    at.hi = hi->kind == H3_ATTR_INT ? (double)hi->i : hi->f;
  }
  ew_in a = {0}, b = {0};
  a.p = in[0].data;
  a.t = in[0].type.dtype;
  bcast_strides(&in[0].type, &o->type, a.st);
  int binary = n_in >= 2;
  if (binary) {
    b.p = in[1].data;
    b.t = in[1].type.dtype;
    bcast_strides(&in[1].type, &o->type, b.st);
  }
  h3_dtype ot = o->type.dtype;
  int dom; /* 0 fp32, 1 fp64, 2 int64, 3 f64 -> half cast */
  if (ot == H3_F64)
    dom = 1;
  else if (h3cpu_is_float(ot))
    dom = (op->code == H3_OP_CAST && a.t == H3_F64) ? 3 : 0;
  else if (op->code == H3_OP_CAST && h3cpu_is_float(a.t))
    dom = 1; /* truncation by store */
  else
    dom = 2;
  if (dom == 2 && (h3cpu_is_float(a.t) || (binary && h3cpu_is_float(b.t)))) dom = 1;

  int R = o->type.rank;
  int64_t n = h3cpu_numel(o);
  int64_t inner = R ? o->type.dims[R - 1] : 1;
  int64_t outer = inner ? n / inner : 0;
  int64_t ctr[H3_MAX_RANK] = {0};
  int div0 = 0;
  int64_t oi = 0;
  for (int64_t r = 0; r < outer; r++) {
    int64_t ba = 0, bb = 0;
    for (int d = 0; d < R - 1; d++) {
      ba += ctr[d] * a.st[d];
      bb += ctr[d] * b.st[d];
    }
    int64_t sa = R ? a.st[R - 1] : 0, sb = R ? b.st[R - 1] : 0;
    for (int64_t j = 0; j < inner; j++, oi++) {
      int64_t ia = ba + j * sa, ib = bb + j * sb;
      switch (dom) {
      case 0: {
        float x = h3cpu_ld(a.p, a.t, ia), y = binary ? h3cpu_ld(b.p, b.t, ib) : 0.0f;
        h3cpu_st(o->data, ot, oi, ew_f32(op->code, x, y, &at));
        break;
      }
      case 1: {
        double x = h3cpu_ld64(a.p, a.t, ia), y = binary ? h3cpu_ld64(b.p, b.t, ib) : 0.0;
        h3cpu_st64(o->data, ot, oi, ew_f64(op->code, x, y, &at));
        break;
      }
      case 2: {
        int64_t x = h3cpu_ldi(a.p, a.t, ia), y = binary ? h3cpu_ldi(b.p, b.t, ib) : 0;
        h3cpu_sti(o->data, ot, oi, ew_i64(op->code, x, y, &at, &div0));
        break;
      }
      default: h3cpu_st(o->data, ot, oi, f64_to_f32_odd(((const double *)a.p)[ia])); break;
      }
    }
    for (int d = R - 2; d >= 0; d--) {
      if (++ctr[d] < o->type.dims[d]) break;
      ctr[d] = 0;
    }
  }
  if (div0) {
    h3cpu_error(c, op, "check the divisor values feeding this op", "integer division by zero");
    return H3_ERR;
  }
  return H3_OK;
}
