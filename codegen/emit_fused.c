/* emit_fused.c: kernels for `fused` regions and for every elementwise-style op standing
 * alone (the elementwise ops, cast, const fill, iota, gather; `slice` inside a region).
 *
 * A kernel iterates over the iteration space (the shape of the largest output); each
 * thread takes chunks of VEC = 8 consecutive elements when the innermost dim is a multiple
 * of 8 (16-byte vector loads of the inputs that are read at the chunk's own positions and
 * vector stores of full-shape outputs), else single elements, in a grid-stride loop.
 * For each element the region's values are computed as straight-line code, each value at
 * a flat index of its own shape: an operand of an elementwise op is read at the numpy
 * broadcast of its consumer's index; a gather reads its index tensor at the row prefix
 * and the table at the clamped row; a slice reads its source at the output coordinate
 * plus `start` on the slice axis (source strides). A slice of a region argument read at
 * the chunk position is a 16-byte vector load of 8 consecutive source elements when the
 * chunk's source offset is a multiple of 8 (axis before the last, or start and the
 * source's last dim multiples of 8), else scalar loads. (value, index) pairs are emitted
 * once (memo).
 * dequant_i8 (int8-dequant-split's epilogue of an int8 GEMM) is a member like the
 * elementwise ops, reading s_x at the element's row and s_w / bias at its column, so a
 * SwiGLU or gated-residual group reads the int32 accumulators directly.
 * Tier "exact" rounds every value to its IR dtype right after the op (bitwise equal to
 * running the ops one by one); "lossless" keeps floats in fp32 (fp64 for f64) through the
 * region and rounds only when storing the outputs, except dequant_i8, which rounds to its
 * dtype in every tier (ops.def). Integer values always wrap to their
 * width; float -> int casts truncate.
 * A group ending in quantize_rows(g) {rotate = 0} (int8-fuse-group-quant; it yields q, s)
 * is a row kernel instead (emit_rows): one block per row of g, the same per-element code,
 * then quantize_rows' reduction and arithmetic on g rounded to its dtype; g is not stored.
 */
#include "emit_internal.h"

#include <string.h>

typedef struct {
  const h3_value *v;
  const char *ix, *var;
} memo_entry;

typedef struct {
  emit_ctx *ec;
  const h3_op *op;        /* the fused op, or the single op */
  const h3_region *region; /* the fused region, NULL for a single op */
  int n_in;
  const h3_value **in;    /* region args / op operands: in<j> */
  h3_type it;             /* iteration space */
  int vec;
  h3_strbuf body;         /* per-element statements */
  bool *use_vec;          /* input j is read at its chunk position */
  const char **vec_ix;    /* input j's index at the iteration's element `i` */
  memo_entry *memo;       /* computed values */
  int n_memo, cap_memo;
  memo_entry *maps;       /* index maps: v = NULL, ix = key, var = variable */
  int n_map, cap_map;
  memo_entry *svec;       /* vector slice reads: v = the slice's result, var = array */
  int n_svec, cap_svec;
} fctx;

static h3_status memo_put(fctx *f, memo_entry **arr, int *n, int *cap, const h3_value *v,
                          const char *ix, const char *var) {
  if (*n == *cap) {
    int nc = *cap ? *cap * 2 : 64;
    memo_entry *m = h3_arena_alloc(f->ec->a, sizeof(memo_entry) * (size_t)nc);
    if (!m) return H3_ERR;
    if (*n) memcpy(m, *arr, sizeof(memo_entry) * (size_t)*n);
    *arr = m;
    *cap = nc;
  }
  (*arr)[*n] = (memo_entry){v, ix, var};
  (*n)++;
  return H3_OK;
}

static void dims_key(h3_strbuf *b, const h3_type *t) {
  h3_strbuf_append(b, "[");
  for (int i = 0; i < t->rank; i++) h3_strbuf_printf(b, "%s%lld", i ? "," : "", (long long)t->dims[i]);
  h3_strbuf_append(b, "]");
}

/* C expression of the flat index in `to` that numpy broadcasting reads for flat index `ix`
 * of `from` (to broadcasts to from, dims right-aligned). */
static void map_expr(h3_strbuf *b, const h3_type *from, const h3_type *to, const char *ix) {
  int64_t fs[H3_MAX_RANK], ts[H3_MAX_RANK];
  emit_strides(from, fs);
  emit_strides(to, ts);
  int off = from->rank - to->rank;
  bool suffix = off >= 0;
  for (int d = 0; suffix && d < to->rank; d++) suffix = to->dims[d] == from->dims[d + off];
  if (suffix) {
    h3_strbuf_printf(b, "(%s %% %lld)", ix, (long long)h3_type_numel(to));
    return;
  }
  int terms = 0;
  h3_strbuf_append(b, "(");
  for (int d = 0; d < to->rank; d++) {
    if (to->dims[d] == 1) continue;
    int fd = d + off;
    if (terms++) h3_strbuf_append(b, " + ");
    h3_strbuf_append(b, "(");
    if (fs[fd] != 1) h3_strbuf_printf(b, "(%s / %lld)", ix, (long long)fs[fd]);
    else h3_strbuf_append(b, ix);
    if (fd > 0) h3_strbuf_printf(b, " %% %lld", (long long)from->dims[fd]);
    h3_strbuf_append(b, ")");
    if (ts[d] != 1) h3_strbuf_printf(b, " * %lld", (long long)ts[d]);
  }
  if (!terms) h3_strbuf_append(b, "0");
  h3_strbuf_append(b, ")");
}

/* A variable (or "0" / ix itself) holding the broadcast index of `ix` in `to`. */
static const char *map_ix(fctx *f, const h3_type *from, const h3_type *to, const char *ix) {
  int64_t nt = h3_type_numel(to);
  if (nt <= 1) return "0";
  if (nt == h3_type_numel(from)) return ix;
  h3_strbuf key;
  h3_strbuf_init(&key);
  h3_strbuf_append(&key, ix);
  dims_key(&key, from);
  dims_key(&key, to);
  const char *found = NULL;
  for (int i = 0; key.data && i < f->n_map; i++)
    if (strcmp(f->maps[i].ix, key.data) == 0) found = f->maps[i].var;
  if (found || key.oom) {
    h3_strbuf_free(&key);
    return found;
  }
  char *var = h3_arena_printf(f->ec->a, "x%d", f->ec->tmp++);
  char *k = h3_arena_strdup(f->ec->a, key.data);
  h3_strbuf_free(&key);
  if (!var || !k || memo_put(f, &f->maps, &f->n_map, &f->cap_map, NULL, k, var) != H3_OK) return NULL;
  h3_strbuf_printf(&f->body, "      const ix_t %s = ", var);
  map_expr(&f->body, from, to, ix);
  h3_strbuf_append(&f->body, ";\n");
  return var;
}

static int input_index(const fctx *f, const h3_value *v) {
  for (int j = 0; j < f->n_in; j++)
    if (f->in[j] == v) return j;
  return -1;
}

static const char *value_at(fctx *f, const h3_value *v, const char *ix);
static bool broadcasts_to(const h3_type *y, const h3_type *it);

/* C expression of the source index that slice `op` reads for its flat output index `ix`:
 * (ix / (len*inner)) * (n*inner) + ix % (len*inner) + start*inner, with n the source's
 * size on the axis and inner the product of the dims after it. */
static void slice_src_expr(h3_strbuf *b, const h3_op *op, const char *ix) {
  const h3_type *t = &op->operands[0]->type;
  int axis = (int)h3_op_attr_int(op, "axis", 0);
  int64_t start = h3_op_attr_int(op, "start", 0), len = h3_op_attr_int(op, "len", 0);
  int64_t inner = 1, outer = 1;
  for (int d = axis + 1; d < t->rank; d++) inner *= t->dims[d];
  for (int d = 0; d < axis; d++) outer *= t->dims[d];
  if (outer == 1) /* one block: a constant shift */
    h3_strbuf_printf(b, "((%s) + %lld)", ix, (long long)(start * inner));
  else
    h3_strbuf_printf(b, "(((%s) / %lld) * %lld + (%s) %% %lld + %lld)", ix, (long long)(len * inner),
                     (long long)(t->dims[axis] * inner), ix, (long long)(len * inner),
                     (long long)(start * inner));
}

/* True when slice result v, read at the chunk position, is 8 consecutive source elements
 * starting at a multiple of 8: v spans the iteration space's last dim (so a chunk stays in
 * one row of v) and the source offset of every chunk is a multiple of 8. */
static bool slice_vec_ok(const fctx *f, const h3_value *v) {
  const h3_op *op = v->def;
  const h3_type *t = &op->operands[0]->type;
  if (f->vec <= 1 || input_index(f, op->operands[0]) < 0 || v->type.rank == 0 ||
      !broadcasts_to(&v->type, &f->it) || v->type.dims[v->type.rank - 1] != f->it.dims[f->it.rank - 1])
    return false;
  int axis = (int)h3_op_attr_int(op, "axis", 0);
  if (axis < t->rank - 1) return true; /* offsets are multiples of the last dim */
  return h3_op_attr_int(op, "start", 0) % 8 == 0 && t->dims[t->rank - 1] % 8 == 0;
}

/* Slice result v at flat index ix: a lane of the chunk's vector load, or the source read
 * at the computed index. */
static const char *slice_value_at(fctx *f, const h3_value *v, const char *ix) {
  const h3_op *op = v->def;
  if (slice_vec_ok(f, v)) {
    const char *cix = map_ix(f, &f->it, &v->type, "i");
    if (!cix) return NULL;
    if (strcmp(ix, cix) == 0) {
      char *arr = h3_arena_printf(f->ec->a, "s%dv", f->n_svec);
      char *var = arr ? h3_arena_printf(f->ec->a, "%s[l]", arr) : NULL;
      if (!var || memo_put(f, &f->svec, &f->n_svec, &f->cap_svec, v, ix, arr) != H3_OK ||
          memo_put(f, &f->memo, &f->n_memo, &f->cap_memo, v, ix, var) != H3_OK)
        return NULL;
      return var;
    }
  }
  h3_strbuf e;
  h3_strbuf_init(&e);
  slice_src_expr(&e, op, ix);
  char *sx = h3_arena_printf(f->ec->a, "x%d", f->ec->tmp++);
  if (e.oom || !sx) {
    h3_strbuf_free(&e);
    return NULL;
  }
  h3_strbuf_printf(&f->body, "      const ix_t %s = %s;\n", sx, e.data);
  h3_strbuf_free(&e);
  const char *var = value_at(f, op->operands[0], sx);
  if (!var || memo_put(f, &f->memo, &f->n_memo, &f->cap_memo, v, ix, var) != H3_OK) return NULL;
  return var;
}

/* Declares `const CT tN = expr;` for value v at ix and memoises it. */
static const char *bind(fctx *f, const h3_value *v, const char *ix, const char *expr) {
  char *var = h3_arena_printf(f->ec->a, "t%d", f->ec->tmp++);
  if (!var || !expr) return NULL;
  h3_strbuf_printf(&f->body, "      const %s %s = %s;\n", emit_comptype(v->type.dtype), var, expr);
  if (memo_put(f, &f->memo, &f->n_memo, &f->cap_memo, v, ix, var) != H3_OK) return NULL;
  return var;
}

/* Operand u of op `def` (result type rt) at the broadcast of ix, converted to ct. */
static const char *operand_at(fctx *f, const h3_op *def, int i, const char *ix, h3_strbuf *tmp) {
  const h3_value *u = def->operands[i];
  const h3_value *r = def->results[0];
  const char *uix = map_ix(f, &r->type, &u->type, ix);
  if (!uix) return NULL;
  const char *var = value_at(f, u, uix);
  if (!var) return NULL;
  const char *ct = emit_comptype(r->type.dtype);
  h3_strbuf_free(tmp);
  h3_strbuf_init(tmp);
  if (strcmp(ct, emit_comptype(u->type.dtype)) != 0) h3_strbuf_printf(tmp, "(%s)(%s)", ct, var);
  else h3_strbuf_append(tmp, var);
  return tmp->oom ? NULL : h3_arena_strdup(f->ec->a, tmp->data);
}

static const char *unary_fn(h3_opcode c) {
  switch (c) {
  case H3_OP_NEG: return "h3_neg";
  case H3_OP_EXP: return "h3_exp";
  case H3_OP_LOG: return "h3_log";
  case H3_OP_SQRT: return "h3_sqrt";
  case H3_OP_RSQRT: return "h3_rsqrt";
  case H3_OP_ABS: return "h3_abs";
  case H3_OP_SILU: return "h3_silu";
  case H3_OP_SIGMOID: return "h3_sigmoid";
  case H3_OP_TANH: return "h3_tanh";
  case H3_OP_COS: return "h3_cos";
  case H3_OP_SIN: return "h3_sin";
  default: return NULL;
  }
}

static const char *binary_fn(h3_opcode c) {
  switch (c) {
  case H3_OP_ADD: return "h3_add";
  case H3_OP_SUB: return "h3_sub";
  case H3_OP_MUL: return "h3_mul";
  case H3_OP_DIV: return "h3_div";
  case H3_OP_MOD: return "h3_mod";
  case H3_OP_MAX: return "h3_max";
  case H3_OP_MIN: return "h3_min";
  default: return NULL;
  }
}

/* The cast expression of `a` (compute type of `from`) to dtype `to`. */
static void cast_expr(h3_strbuf *e, h3_dtype from, h3_dtype to, const char *a, bool exact) {
  bool ff = emit_is_float(from), tf = emit_is_float(to);
  if (!tf) {
    h3_strbuf_printf(e, "(long long)(%s)", a);
    return;
  }
  if (to == H3_F64) {
    h3_strbuf_printf(e, "(double)(%s)", a);
    return;
  }
  bool wide = from == H3_F64 || !ff; /* one rounding straight from double */
  if (exact && to == H3_BF16) h3_strbuf_printf(e, wide ? "h3_rbf16d((double)(%s))" : "h3_rbf16(%s)", a);
  else if (exact && to == H3_F16) h3_strbuf_printf(e, wide ? "h3_rf16d((double)(%s))" : "h3_rf16(%s)", a);
  else h3_strbuf_printf(e, "(float)(%s)", a);
}

/* dequant_i8 (ops.def) at flat index ix of its result [.., N] into e: acc at ix, s_x at
 * the row ix / N, s_w and bias at the column (their numpy broadcast, so a sliced s_w read at
 * the chunk position is a vector load); h3_mul, h3_mul, h3_add are the IEEE _rn operations
 * of the CPU reference and of linear_int8's epilogue, in its order. */
static bool dequant_expr(fctx *f, const h3_op *def, const char *ix, h3_strbuf *e) {
  const h3_type *yt = &def->results[0]->type;
  int64_t n = yt->dims[yt->rank - 1];
  h3_strbuf t;
  h3_strbuf_init(&t);
  const char *acc = operand_at(f, def, 0, ix, &t);
  /* the row index, once per (ix, N) (memo in f->maps under "ix/N") */
  char *key = acc ? h3_arena_printf(f->ec->a, "%s/%lld", ix, (long long)n) : NULL;
  const char *row = NULL;
  for (int i = 0; key && i < f->n_map; i++)
    if (strcmp(f->maps[i].ix, key) == 0) row = f->maps[i].var;
  if (key && !row) {
    char *var = h3_arena_printf(f->ec->a, "x%d", f->ec->tmp++);
    if (var && memo_put(f, &f->maps, &f->n_map, &f->cap_map, NULL, key, var) == H3_OK) {
      h3_strbuf_printf(&f->body, "      const ix_t %s = (%s) / %lld;\n", var, ix, (long long)n);
      row = var;
    }
  }
  const char *sx = row ? value_at(f, def->operands[1], row) : NULL;
  const char *sw = sx ? operand_at(f, def, 2, ix, &t) : NULL;
  const char *bias = sw && def->n_operands > 3 ? operand_at(f, def, 3, ix, &t) : NULL;
  h3_strbuf_free(&t);
  if (!sw || (def->n_operands > 3 && !bias)) return false;
  if (bias) h3_strbuf_printf(e, "h3_add(h3_mul(h3_mul(%s, %s), %s), %s)", acc, sx, sw, bias);
  else h3_strbuf_printf(e, "h3_mul(h3_mul(%s, %s), %s)", acc, sx, sw);
  return true;
}

static const char *op_value_at(fctx *f, const h3_value *v, const char *ix) {
  const h3_op *def = v->def;
  h3_dtype rt = v->type.dtype;
  const char *ct = emit_comptype(rt);
  bool ctint = strcmp(ct, "long long") == 0;
  h3_strbuf e, t1, t2;
  h3_strbuf_init(&e);
  h3_strbuf_init(&t1);
  h3_strbuf_init(&t2);
  const char *res = NULL;
  const char *fn;
  bool round = f->ec->exact || !emit_is_float(rt);
  if (def->code == H3_OP_CONST) {
    emit_literal(&e, rt, h3_op_attr_float(def, "value", 0.0), f->ec->exact);
    round = false;
  } else if (def->code == H3_OP_IOTA) {
    h3_strbuf_printf(&e, "(%s)(%s)", ct, ix);
  } else if (def->code == H3_OP_CAST) {
    const char *a = operand_at(f, def, 0, ix, &t1);
    if (!a) goto done;
    cast_expr(&e, def->operands[0]->type.dtype, rt, a, f->ec->exact);
    round = !emit_is_float(rt);
  } else if (def->code == H3_OP_GATHER) {
    /* table [N, R...], idx [I...] -> [I..., R...] */
    const h3_value *table = def->operands[0], *idx = def->operands[1];
    int64_t rn = 1;
    for (int d = 1; d < table->type.rank; d++) rn *= table->type.dims[d];
    int id = f->ec->tmp++;
    h3_strbuf_printf(&f->body, "      const ix_t gq%d = %s / %lld, gr%d = %s %% %lld;\n", id, ix,
                     (long long)rn, id, ix, (long long)rn);
    char *q = h3_arena_printf(f->ec->a, "gq%d", id);
    const char *iv = q ? value_at(f, idx, q) : NULL;
    if (!iv) goto done;
    h3_strbuf_printf(&f->body,
                     "      const ix_t gt%d = (ix_t)h3_clampi((long long)(%s), %lldll) * %lld + gr%d;\n",
                     id, iv, (long long)table->type.dims[0], (long long)rn, id);
    char *tix = h3_arena_printf(f->ec->a, "gt%d", id);
    const char *tv = tix ? value_at(f, table, tix) : NULL;
    if (!tv) goto done;
    h3_strbuf_append(&e, tv);
    round = false;
  } else if (def->code == H3_OP_DEQUANT_I8) {
    if (!dequant_expr(f, def, ix, &e)) goto done;
    round = true; /* rounded to its dtype in every tier (ops.def) */
  } else if (def->code == H3_OP_CLAMP) {
    const char *a = operand_at(f, def, 0, ix, &t1);
    if (!a) goto done;
    h3_dtype lt = rt == H3_F64 ? H3_F64 : (ctint ? H3_I64 : H3_F32);
    h3_strbuf lo;
    h3_strbuf_init(&lo);
    h3_strbuf_append(&lo, a);
    const char *names[2] = {"lo", "hi"}, *fns[2] = {"h3_max", "h3_min"};
    for (int s = 0; s < 2; s++) {
      const h3_attr *at = h3_op_attr(def, names[s]);
      if (!at) continue;
      h3_strbuf_free(&t2);
      h3_strbuf_init(&t2);
      emit_literal(&t2, lt, at->kind == H3_ATTR_INT ? (double)at->i : at->f, false);
      h3_strbuf w;
      h3_strbuf_init(&w);
      h3_strbuf_printf(&w, "%s(%s, (%s)%s)", fns[s], lo.data ? lo.data : "", ct, t2.data ? t2.data : "");
      h3_strbuf_free(&lo);
      lo = w;
    }
    h3_strbuf_append(&e, lo.data ? lo.data : "");
    h3_strbuf_free(&lo);
  } else if ((fn = unary_fn(def->code))) {
    const char *a = operand_at(f, def, 0, ix, &t1);
    if (!a) goto done;
    bool mathfn = def->code != H3_OP_NEG && def->code != H3_OP_ABS;
    if (ctint && mathfn) h3_strbuf_printf(&e, "(long long)%s((double)(%s))", fn, a);
    else h3_strbuf_printf(&e, "%s(%s)", fn, a);
  } else if ((fn = binary_fn(def->code))) {
    if (def->code == H3_OP_MOD && !ctint) {
      emit_unsupported(f->ec, "mod is defined on integer tensors only");
      goto done;
    }
    const char *a = operand_at(f, def, 0, ix, &t1);
    const char *b = a ? operand_at(f, def, 1, ix, &t2) : NULL;
    if (!b) goto done;
    h3_strbuf_printf(&e, "%s(%s, %s)", fn, a, b);
  } else {
    h3_strbuf msg;
    h3_strbuf_init(&msg);
    h3_strbuf_printf(&msg, "op '%s' inside a fused region is not an elementwise op, gather, slice or const",
                     h3_opcode_name(def->code));
    emit_unsupported(f->ec, msg.data ? msg.data : "unsupported op in a fused region");
    h3_strbuf_free(&msg);
    goto done;
  }
  if (e.oom || !e.data) goto done;
  if (round) {
    h3_strbuf r;
    h3_strbuf_init(&r);
    emit_round(&r, rt, e.data);
    res = r.oom ? NULL : bind(f, v, ix, r.data);
    h3_strbuf_free(&r);
  } else {
    res = bind(f, v, ix, e.data);
  }
done:
  h3_strbuf_free(&e);
  h3_strbuf_free(&t1);
  h3_strbuf_free(&t2);
  return res;
}

static const char *value_at(fctx *f, const h3_value *v, const char *ix) {
  for (int i = 0; i < f->n_memo; i++)
    if (f->memo[i].v == v && strcmp(f->memo[i].ix, ix) == 0) return f->memo[i].var;
  int j = input_index(f, v);
  if (j >= 0) {
    const h3_type *t = &f->in[j]->type;
    if (f->vec > 1 && strcmp(ix, f->vec_ix[j]) == 0 && t->rank > 0 &&
        t->dims[t->rank - 1] == f->it.dims[f->it.rank - 1]) {
      f->use_vec[j] = true;
      char *var = h3_arena_printf(f->ec->a, "in%dv[l]", j);
      if (!var || memo_put(f, &f->memo, &f->n_memo, &f->cap_memo, v, ix, var) != H3_OK) return NULL;
      return var;
    }
    char *expr = h3_arena_printf(f->ec->a, "h3_ld(in%d, %s)", j, ix);
    return bind(f, v, ix, expr);
  }
  bool inside = v->kind == H3_VALUE_RESULT && v->def &&
                (f->region ? v->def->parent == f->region : v->def == f->op);
  if (!inside) {
    emit_unsupported(f->ec, "a value of the fused region is defined outside it and is not a "
                            "region argument");
    return NULL;
  }
  if (v->def->code == H3_OP_SLICE) return slice_value_at(f, v, ix);
  return op_value_at(f, v, ix);
}

/* The condition under which element i of the iteration space writes output y (smaller
 * than the iteration space): every coordinate y broadcasts over is 0. */
static void write_cond(h3_strbuf *b, const h3_type *it, const h3_type *y) {
  int64_t is[H3_MAX_RANK];
  emit_strides(it, is);
  int off = it->rank - y->rank, n = 0;
  for (int d = 0; d < it->rank; d++) {
    bool bc = d < off || y->dims[d - off] == 1;
    if (!bc || it->dims[d] == 1) continue;
    h3_strbuf_printf(b, "%s((i / %lld) %% %lld) == 0", n++ ? " && " : "", (long long)is[d],
                     (long long)it->dims[d]);
  }
  if (!n) h3_strbuf_append(b, "true");
}

static bool broadcasts_to(const h3_type *y, const h3_type *it) {
  if (y->rank > it->rank) return false;
  int off = it->rank - y->rank;
  for (int d = 0; d < y->rank; d++)
    if (y->dims[d] != 1 && y->dims[d] != it->dims[d + off]) return false;
  return true;
}

/* The chunk's 16-byte loads at `base` (the first element of the chunk in the iteration
 * space): the inputs read at their chunk position and the vector slice reads. */
static void emit_chunk_loads(fctx *f, h3_strbuf *s, const char *ind) {
  int64_t numel = h3_type_numel(&f->it);
  for (int j = 0; j < f->n_in; j++) {
    if (!f->use_vec[j]) continue;
    const h3_type *t = &f->in[j]->type;
    h3_strbuf_printf(s, "%s%s in%dv[8];\n%sh3_ld8(in%d, ", ind, emit_comptype(t->dtype), j, ind, j);
    if (h3_type_numel(t) == numel) h3_strbuf_append(s, "base");
    else map_expr(s, &f->it, t, "base");
    h3_strbuf_printf(s, ", in%dv);\n", j);
  }
  for (int k = 0; k < f->n_svec; k++) { /* vector slice reads */
    const h3_value *v = f->svec[k].v;
    const h3_op *sl = v->def;
    int j = input_index(f, sl->operands[0]);
    h3_strbuf cb;
    h3_strbuf_init(&cb);
    if (h3_type_numel(&v->type) == numel) h3_strbuf_append(&cb, "base");
    else map_expr(&cb, &f->it, &v->type, "base");
    h3_strbuf_printf(s, "%s%s %s[8];\n%sh3_ld8(in%d, ", ind, emit_comptype(f->in[j]->type.dtype),
                     f->svec[k].var, ind, j);
    slice_src_expr(s, sl, cb.data ? cb.data : "base");
    h3_strbuf_printf(s, ", %s);\n", f->svec[k].var);
    if (cb.oom) s->oom = 1;
    h3_strbuf_free(&cb);
  }
}

/* The quantize_rows {rotate = 0} ending region r whose two results are the whole yield
 * (int8-fuse-group-quant), or NULL. */
static const h3_op *row_quantizer(const h3_region *r) {
  const h3_op *y = r ? r->last : NULL;
  if (!y || y->n_operands != 2) return NULL;
  const h3_value *q = y->operands[0], *s = y->operands[1];
  if (q->kind != H3_VALUE_RESULT || !q->def || q->def->code != H3_OP_QUANTIZE_ROWS) return NULL;
  if (q->def->parent != r || q->index != 0 || s->def != q->def || s->index != 1) return NULL;
  return q->def;
}

/* The row kernel of a group ending in quantize_rows(g): one block of ROWQ_BLOCK threads
 * per row of g [.., K]; thread t computes the chunks c = j*ROWQ_BLOCK + t of the row (8
 * elements when K % 8 == 0, else 1) with the group's per-element code, keeps g rounded
 * to its IR dtype (h3_put: the stored g of the unfused plan, in every tier) in registers
 * and its running max of |g|; a block reduction (warp xor butterfly, then the 8 warp
 * partials) gives amax, then quantize_rows' arithmetic (emit_int8.c): s = max(amax / 127,
 * 1e-30), q = clamp(rint(g / s), -128, 127), NaN -> 0; codes as 8-byte stores when
 * aligned, thread 0 writes s. g itself is not stored. */
#define ROWQ_BLOCK 256
static h3_status emit_rows(fctx *f, const h3_op *qop) {
  emit_ctx *ec = f->ec;
  const h3_op *op = f->op;
  const h3_value *g = qop->operands[0];
  int64_t k = f->it.dims[f->it.rank - 1], rows = h3_type_numel(&f->it) / k;
  int64_t chunks = k / f->vec, per = (chunks + ROWQ_BLOCK - 1) / ROWQ_BLOCK;
  if (g->type.dtype != H3_BF16 && g->type.dtype != H3_F16 && g->type.dtype != H3_F32)
    return emit_unsupported(ec, "the quantized value of a group must be bf16, f16 or f32");
  if (h3_op_attr_int(qop, "rotate", 0) != 0)
    return emit_unsupported(ec, "a group's quantize_rows must have rotate = 0");
  if (rows >= ((int64_t)1 << 31) || per * f->vec > 256)
    return emit_unsupported(ec, "a group's quantized rows must be at most 65536 elements, "
                                "fewer than 2^31 rows");
  const char *var = value_at(f, g, "i");
  if (!var) return H3_ERR;
  h3_strbuf_printf(&f->body, "        h3_put(qv[j][l], %s);\n"
                             "        qm = fmaxf(qm, fabsf(h3_w(qv[j][l])));\n", var);
  h3_type *in_t = h3_arena_alloc(ec->a, sizeof(h3_type) * (size_t)(f->n_in + 1));
  if (!in_t) return H3_ERR;
  for (int j = 0; j < f->n_in; j++) in_t[j] = f->in[j]->type;
  h3_type out_t[2] = {op->results[0]->type, op->results[1]->type};
  emit_signature(ec, f->n_in, in_t, 2, out_t, NULL, ROWQ_BLOCK, true);
  h3_strbuf *s = &ec->src;
  h3_strbuf_printf(s, "  typedef %s ix_t;\n", emit_needs_wide(op) ? "long long" : "int");
  h3_strbuf_printf(s, "  __shared__ float part[%d];\n", ROWQ_BLOCK / 32);
  h3_strbuf_printf(s, "  const ix_t row = (ix_t)blockIdx.x;\n  if (row >= %lld) return;\n"
                      "  const int t = threadIdx.x;\n", (long long)rows);
  h3_strbuf_printf(s, "  %s qv[%lld][%d];\n  float qm = 0.0f;\n", h3_kernel_ctype(g->type.dtype),
                   (long long)per, f->vec);
  const char *open = h3_arena_printf(
      ec->a, "#pragma unroll\n  for (int j = 0; j < %lld; j++) {\n"
             "    const ix_t c = (ix_t)j * %d + t;\n    if (c < %lld) {\n"
             "      const ix_t base = row * %lld + c * %d;\n",
      (long long)per, ROWQ_BLOCK, (long long)chunks, (long long)k, f->vec);
  if (!open) return H3_ERR;
  h3_strbuf_append(s, open);
  if (f->vec > 1) emit_chunk_loads(f, s, "      ");
  h3_strbuf_printf(s, "#pragma unroll\n      for (int l = 0; l < %d; l++) {\n"
                      "        const ix_t i = base + l;\n", f->vec);
  h3_strbuf_append(s, f->body.data ? f->body.data : "");
  h3_strbuf_append(s, "      }\n    }\n  }\n");
  h3_strbuf_printf(s, "#pragma unroll\n  for (int o = 16; o > 0; o >>= 1) "
                      "qm = fmaxf(qm, __shfl_xor_sync(0xffffffffu, qm, o));\n"
                      "  if ((t & 31) == 0) part[t >> 5] = qm;\n  __syncthreads();\n"
                      "  float amax = 0.0f;\n"
                      "#pragma unroll\n  for (int w = 0; w < %d; w++) amax = fmaxf(amax, part[w]);\n"
                      "  float sc = __fdiv_rn(amax, 127.0f);\n  if (sc < 1e-30f) sc = 1e-30f;\n",
                   ROWQ_BLOCK / 32);
  h3_strbuf_append(s, open);
  h3_strbuf_printf(s, "      __align__(8) signed char qr[%d];\n#pragma unroll\n"
                      "      for (int l = 0; l < %d; l++) {\n"
                      "        const float cq = rintf(__fdiv_rn(h3_w(qv[j][l]), sc));\n"
                      "        qr[l] = cq != cq ? (signed char)0 : cq <= -128.0f ? (signed char)-128\n"
                      "              : cq >= 127.0f ? (signed char)127 : (signed char)cq;\n"
                      "      }\n", f->vec, f->vec);
  if (f->vec > 1)
    h3_strbuf_append(s, "      if (h3_al8(out0 + base)) h3_str8<true>(out0, base, qr);\n"
                        "      else h3_str8<false>(out0, base, qr);\n");
  else
    h3_strbuf_append(s, "      out0[base] = qr[0];\n");
  h3_strbuf_append(s, "    }\n  }\n  if (t == 0) out1[row] = sc;\n}\n");
  ec->k->grid[0] = rows > 0 ? rows : 1;
  ec->k->grid[1] = ec->k->grid[2] = 1;
  ec->k->block[0] = ROWQ_BLOCK;
  ec->k->block[1] = ec->k->block[2] = 1;
  ec->k->shared_bytes = 0;
  return (f->body.oom || s->oom) ? H3_ERR : emit_args(ec, f->n_in, 2, false);
}

h3_status emit_fused(emit_ctx *ec) {
  const h3_op *op = ec->op;
  fctx f;
  memset(&f, 0, sizeof f);
  f.ec = ec;
  f.op = op;
  h3_strbuf_init(&f.body);
  const h3_value *const *outs;
  int n_out;
  if (op->code == H3_OP_FUSED) {
    if (op->n_regions != 1 || !op->regions[0].last || op->regions[0].last->code != H3_OP_YIELD)
      return emit_unsupported(ec, "a fused op needs one region ending in yield");
    f.region = &op->regions[0];
    f.n_in = f.region->n_args;
    f.in = (const h3_value **)f.region->args;
    outs = (const h3_value *const *)f.region->last->operands;
    n_out = f.region->last->n_operands;
  } else {
    f.n_in = op->n_operands;
    f.in = (const h3_value **)op->operands;
    outs = (const h3_value *const *)op->results;
    n_out = op->n_results;
  }
  if (n_out < 1) return emit_unsupported(ec, "the op has no results");
  const h3_op *qop = row_quantizer(f.region); /* the group's quantize_rows: g is the space */
  f.it = qop ? qop->operands[0]->type : outs[0]->type;
  for (int k = 1; k < n_out && !qop; k++)
    if (h3_type_numel(&outs[k]->type) > h3_type_numel(&f.it)) f.it = outs[k]->type;
  for (int k = 0; k < n_out && !qop; k++)
    if (!broadcasts_to(&outs[k]->type, &f.it))
      return emit_unsupported(ec, "the outputs do not broadcast to one iteration shape");
  if (qop && (f.it.rank < 1 || f.it.dims[f.it.rank - 1] < 1))
    return emit_unsupported(ec, "a group's quantize_rows needs non-empty rows");
  int64_t numel = h3_type_numel(&f.it);
  int64_t last = f.it.rank ? f.it.dims[f.it.rank - 1] : 1;
  f.vec = (last % 8 == 0 && numel >= 8) ? 8 : 1;
  f.use_vec = h3_arena_alloc(ec->a, sizeof(bool) * (size_t)(f.n_in + 1));
  f.vec_ix = h3_arena_alloc(ec->a, sizeof(char *) * (size_t)(f.n_in + 1));
  if (!f.use_vec || !f.vec_ix) return H3_ERR;
  h3_status st = H3_ERR;
  /* an input that broadcasts to the iteration space may be read at its chunk position */
  for (int j = 0; j < f.n_in; j++) {
    f.vec_ix[j] = "";
    if (f.vec > 1 && broadcasts_to(&f.in[j]->type, &f.it) &&
        !(f.vec_ix[j] = map_ix(&f, &f.it, &f.in[j]->type, "i")))
      goto out;
  }
  if (qop) {
    st = emit_rows(&f, qop);
    goto out;
  }

  /* body: every output at element i */
  h3_strbuf stores;
  h3_strbuf_init(&stores);
  for (int k = 0; k < n_out; k++) {
    const h3_type *yt = &outs[k]->type;
    const char *yix = map_ix(&f, &f.it, yt, "i");
    const char *var = yix ? value_at(&f, outs[k], yix) : NULL;
    if (!var) {
      h3_strbuf_free(&stores);
      goto out;
    }
    bool full = h3_type_numel(yt) == numel;
    if (full && f.vec > 1) {
      h3_strbuf_printf(&f.body, "      o%dv[l] = %s;\n", k, var);
      h3_strbuf_printf(&stores, "    h3_st8(out%d, base, o%dv);\n", k, k);
    } else if (full) {
      h3_strbuf_printf(&f.body, "      h3_st(out%d, i, %s);\n", k, var);
    } else {
      h3_strbuf_append(&f.body, "      if (");
      write_cond(&f.body, &f.it, yt);
      h3_strbuf_printf(&f.body, ") h3_st(out%d, %s, %s);\n", k, yix, var);
    }
  }

  /* assemble */
  h3_type *in_t = h3_arena_alloc(ec->a, sizeof(h3_type) * (size_t)(f.n_in + 1));
  h3_type *out_t = h3_arena_alloc(ec->a, sizeof(h3_type) * (size_t)n_out);
  if (!in_t || !out_t) {
    h3_strbuf_free(&stores);
    goto out;
  }
  for (int j = 0; j < f.n_in; j++) in_t[j] = f.in[j]->type;
  for (int k = 0; k < n_out; k++) out_t[k] = op->results[k]->type;
  emit_signature(ec, f.n_in, in_t, n_out, out_t, NULL, EMIT_BLOCK, true);
  h3_strbuf *s = &ec->src;
  h3_strbuf_printf(s, "  typedef %s ix_t;\n", emit_needs_wide(op) ? "long long" : "int");
  int64_t chunks = numel / f.vec;
  h3_strbuf_printf(s, "  const ix_t n = %lld;\n", (long long)chunks);
  h3_strbuf_append(s, "  for (ix_t c = (ix_t)blockIdx.x * blockDim.x + threadIdx.x; c < n;"
                      " c += (ix_t)gridDim.x * blockDim.x) {\n");
  if (f.vec > 1) {
    h3_strbuf_printf(s, "    const ix_t base = c * %d;\n", f.vec);
    emit_chunk_loads(&f, s, "    ");
    for (int k = 0; k < n_out; k++)
      if (h3_type_numel(&outs[k]->type) == numel)
        h3_strbuf_printf(s, "    %s o%dv[8];\n", emit_comptype(outs[k]->type.dtype), k);
    h3_strbuf_append(s, "#pragma unroll\n    for (int l = 0; l < 8; l++) {\n"
                        "      const ix_t i = base + l;\n");
    h3_strbuf_append(s, f.body.data ? f.body.data : "");
    h3_strbuf_append(s, "    }\n");
    h3_strbuf_append(s, stores.data ? stores.data : "");
  } else {
    h3_strbuf_append(s, "    {\n      const ix_t i = c;\n");
    h3_strbuf_append(s, f.body.data ? f.body.data : "");
    h3_strbuf_append(s, "    }\n");
  }
  h3_strbuf_append(s, "  }\n}\n");
  h3_strbuf_free(&stores);
  emit_launch_1d(ec, chunks, EMIT_BLOCK);
  st = (f.body.oom || s->oom) ? H3_ERR : emit_args(ec, f.n_in, n_out, false);
out:
  h3_strbuf_free(&f.body);
  return st;
}
