/* sema_params.c: parameters and parameter groups (docs/language.md "Parameters"), and the
 * evaluation of declared tensor types.
 *
 * `param a.b : T` becomes one IR parameter named "a.b". A group `params P[COUNT]` (or
 * `P[A .. B]`) turns each field F into ONE stacked parameter named "P.{}.F" whose leading
 * dim is the group count (then the inner count for a field with an inner array, named
 * "...experts.{e}..."), with group / group_dims / group_base set. Code reaches parameters
 * through S->names: full dotted paths, their prefixes, and group names (alias or path).
 */
#include "sema.h"

#include <math.h>
#include <string.h>

bool sema_eval_type(sema *S, const ast_type *t, h3_type *out) {
  h3_dtype dt;
  if (!t->has_dims) {
    gname *g = h3_strmap_get(&S->names, t->name);
    if (strcmp(t->name, "int") == 0)
      h3_diag_error(S->d, t->span, "write a tensor type like bf16[rows, dim]",
                    "'int' is the type of function arguments only; a tensor type is needed");
    else if (g && g->group)
      h3_diag_error(S->d, t->span, "write a tensor type like bf16[rows, dim]",
                    "'%s' is a parameter group; a tensor type is needed here", t->name);
    else if (h3_dtype_from_name(t->name, &dt))
      h3_diag_error(S->d, t->span, h3_arena_printf(S->tmp, "a scalar is written %s[]", t->name),
                    "'%s' needs its dims: %s[d, ...]", t->name, t->name);
    else {
      const char *hint = sema_suggest_name(S, t->name, true);
      h3_diag_error(S->d, t->span,
                    hint ? hint : "a type is DTYPE[dims], int, or the name of a parameter group",
                    "unknown type '%s'", t->name);
    }
    return false;
  }
  if (!h3_dtype_from_name(t->name, &dt)) {
    suggest_t g;
    suggest_init(&g, t->name);
    for (int i = 0; i < H3_DTYPE_COUNT; i++) suggest_try(&g, h3_dtype_name((h3_dtype)i));
    const char *hint = suggest_hint(S->tmp, &g);
    h3_diag_error(S->d, t->span, hint ? hint : "the dtypes are bf16, f16, f32, f64, i8, i32, i64 and u8",
                  "unknown dtype '%s'", t->name);
    return false;
  }
  if (t->n_dims > H3_MAX_RANK) {
    h3_diag_error(S->d, t->span, "merge dims so the type has at most 6", "%d dims; a tensor has at most %d",
                  t->n_dims, H3_MAX_RANK);
    return false;
  }
  int64_t dims[H3_MAX_RANK];
  int k = 0;
  bool ok = true;
  for (ast_arg *a = t->dims; a; a = a->next, k++) {
    if (!sema_int(S, a->value, &dims[k])) {
      ok = false;
      continue;
    }
    if (dims[k] < 0) {
      h3_diag_error(S->d, a->value->span, "check the config keys and --set values the dim is computed from",
                    "dimension %d is negative (%lld)", k, (long long)dims[k]);
      ok = false;
    }
  }
  if (!ok) return false;
  *out = h3_type_make(dt, t->n_dims, dims);
  return sema_type_fits(S, out, t->span);
}

bool sema_type_fits(sema *S, const h3_type *t, h3_span span) {
  if (h3_type_fits(t)) return true;
  char ts[160];
  h3_diag_error(S->d, span, "check the config's sizes (and --set values)",
                "tensor too large: %s holds more than 2^48 bytes (256 TiB), the most h3 keeps in one "
                "tensor", h3_type_str(t, ts, sizeof ts));
  return false;
}

/* ---- init ------------------------------------------------------------------------------------ */
typedef struct {
  const char *name;
  h3_init_kind kind;
  const char *a, *b; /* argument names */
  bool both;         /* both needed (else exactly one of them) */
  const char *usage;
} init_spec;

static const init_spec inits[] = {
    {"normal", H3_INIT_NORMAL, "std", "fan_in", false, "normal(std = F) or normal(fan_in = N)"},
    {"uniform", H3_INIT_UNIFORM, "bound", "fan_in", false, "uniform(bound = F) or uniform(fan_in = N)"},
    {"const", H3_INIT_CONST, "value", NULL, false, "const(value = F)"},
    {"ones_plus_normal", H3_INIT_ONES_PLUS_NORMAL, "std", NULL, false, "ones_plus_normal(std = F)"},
    {"rope_inv_freq", H3_INIT_ROPE_INV_FREQ, "theta", "dims", true, "rope_inv_freq(theta = F, dims = N)"},
};

/* Sets p's init from `in` (NULL: normal(fan_in = last dim of t)). */
static bool eval_init(sema *S, const ast_init *in, const h3_type *t, h3_param *p) {
  if (!in) {
    double fan_in = t->rank > 0 && t->dims[t->rank - 1] > 0 ? (double)t->dims[t->rank - 1] : 1.0;
    p->init = H3_INIT_NORMAL;
    p->init_scale = 1.0 / sqrt(fan_in);
    return true;
  }
  const init_spec *sp = NULL;
  suggest_t g;
  suggest_init(&g, in->name);
  for (size_t i = 0; i < sizeof inits / sizeof inits[0]; i++) {
    if (strcmp(inits[i].name, in->name) == 0) sp = &inits[i];
    suggest_try(&g, inits[i].name);
  }
  if (!sp) {
    const char *hint = suggest_hint(S->tmp, &g);
    h3_diag_error(S->d, in->span, hint ? hint : "inits: normal, uniform, const, ones_plus_normal, rope_inv_freq",
                  "unknown init '%s'", in->name);
    return false;
  }
  bool have_a = false, have_b = false;
  double va = 0, vb = 0;
  for (ast_arg *a = in->args; a; a = a->next) {
    bool is_a = a->name && !strcmp(a->name, sp->a), is_b = a->name && sp->b && !strcmp(a->name, sp->b);
    if (!is_a && !is_b) {
      h3_diag_error(S->d, a->name ? a->name_span : a->value->span, sp->usage, "%s does not take %s%s%s",
                    sp->name, a->name ? "'" : "a positional argument", a->name ? a->name : "", a->name ? "'" : "");
      return false;
    }
    if ((is_a && have_a) || (is_b && have_b)) {
      h3_diag_error(S->d, a->name_span, sp->usage, "'%s' is given twice", a->name);
      return false;
    }
    sval v = sema_eval(S, a->value, true);
    if (v.kind == SV_ERROR) return false;
    if (!sv_is_num(&v)) {
      h3_diag_error(S->d, a->value->span, "give an integer or float expression",
                    "'%s' must be a number, got %s", a->name, sv_describe(S, &v));
      return false;
    }
    double x = sv_num(&v);
    bool positive = !strcmp(a->name, "fan_in") || !strcmp(a->name, "theta") || !strcmp(a->name, "dims");
    bool signed_ok = !strcmp(a->name, "value");
    if ((positive && x <= 0) || (!positive && !signed_ok && x < 0)) {
      h3_diag_error(S->d, a->value->span, "std and bound are >= 0; fan_in, theta and dims are > 0",
                    "'%s' must be %s, got %g", a->name, positive ? "positive" : "non-negative", x);
      return false;
    }
    if (is_a) {
      have_a = true;
      va = x;
    } else {
      have_b = true;
      vb = x;
    }
  }
  if (sp->both ? !(have_a && have_b) : (have_a == have_b && (sp->b || !have_a))) {
    h3_diag_error(S->d, in->span, sp->usage, "%s needs %s", sp->name,
                  sp->both ? "both arguments" : sp->b ? "exactly one of its two arguments" : "its argument");
    return false;
  }
  p->init = sp->kind;
  switch (sp->kind) {
  case H3_INIT_NORMAL:
  case H3_INIT_UNIFORM: p->init_scale = have_a ? va : 1.0 / sqrt(vb); break;
  case H3_INIT_CONST: p->init_value = va; break;
  case H3_INIT_ONES_PLUS_NORMAL: p->init_scale = va; break;
  case H3_INIT_ROPE_INV_FREQ:
    p->init_value = va;
    p->init_scale = vb;
    break;
  }
  return true;
}

/* ---- names ------------------------------------------------------------------------------------ */
static gname *name_entry(sema *S, const char *key, h3_span sp) {
  gname *e = h3_strmap_get(&S->names, key);
  if (e) return e;
  e = h3_arena_alloc(S->tmp, sizeof *e);
  if (!e || h3_strmap_put(&S->names, key, e)) {
    sema_oom(S, sp);
    return NULL;
  }
  e->span = sp;
  return e;
}

static const char *what_is(const gname *e) {
  return e->param ? "a parameter" : e->group ? "a parameter group" : "the start of parameter names";
}

/* Registers a parameter or group under `path` and the prefixes of the path. */
static bool register_name(sema *S, const char *path, h3_span sp, h3_param *param, sgroup *group) {
  for (const char *dot = strchr(path, '.'); dot; dot = strchr(dot + 1, '.')) {
    const char *pre = h3_arena_strndup(S->tmp, path, (size_t)(dot - path));
    gname *e = pre ? name_entry(S, pre, sp) : NULL;
    if (!e) return false;
    if (e->param || e->group) {
      h3_diag_error(S->d, sp, "rename the parameter, or its prefix",
                    "'%s' is %s (line %d), so '%s' cannot be declared", pre, what_is(e), e->span.line, path);
      return false;
    }
    e->prefix = true;
  }
  gname *e = h3_strmap_get(&S->names, path);
  if (e) {
    if (e->param && param)
      h3_diag_error(S->d, sp, "rename one of the two", "duplicate parameter '%s' (first declared at line %d)", path, e->span.line);
    else
      h3_diag_error(S->d, sp, "rename the parameter", "'%s' is already %s (line %d)", path, what_is(e),
                    e->span.line);
    return false;
  }
  if (!(e = name_entry(S, path, sp))) return false;
  e->param = param;
  e->group = group;
  return true;
}

/* ---- declarations -------------------------------------------------------------------------------- */
void sema_param(sema *S, ast_item *it) {
  ast_field *f = it->fields;
  for (ast_part *p = f->path; p; p = p->next)
    if (p->count) {
      h3_diag_error(S->d, p->span, "declare a group with 'params NAME[COUNT] { ... }'",
                    "an inner array is allowed only in a field of a 'params' group");
      return;
    }
  const char *path = ast_path_text(S->tmp, f->path);
  if (path && !strcmp(path, "__metadata__")) {
    h3_diag_error(S->d, f->span, "rename the parameter",
                  "'__metadata__' is reserved: it is the metadata entry of a safetensors file");
    return;
  }
  h3_type t;
  if (!path || !sema_eval_type(S, &f->type, &t)) return;
  h3_param *p = h3_module_add_param(S->m, path, t, f->span);
  if (!p) {
    sema_oom(S, f->span);
    return;
  }
  eval_init(S, f->init, &t, p);
  register_name(S, path, f->span, p, NULL);
}

sfield *sema_group_field(sgroup *g, const char *path) {
  for (int i = 0; i < g->n_fields; i++)
    if (strcmp(g->fields[i].path, path) == 0) return &g->fields[i];
  return NULL;
}

bool sema_group_has_prefix(sgroup *g, const char *path) {
  size_t n = strlen(path);
  for (int i = 0; i < g->n_fields; i++) {
    const char *f = g->fields[i].path;
    if (strncmp(f, path, n) == 0 && f[n] == '.') return true;
  }
  return false;
}

/* A field whose weight pattern an earlier group with the same path declared: the one
 * stacked parameter grows to cover this group's range, which must follow the earlier
 * one directly, with the same type and init. Returns the parameter (NULL after an error)
 * and the row of this group's first member in *shift. */
static h3_param *merge_field(sema *S, h3_param *p, ast_field *f, const h3_type *t, int64_t first, int64_t count,
                             int64_t *shift) {
  char b1[96], b2[96];
  int lead = p->group_dims;
  if (lead < 1 || lead - 1 + t->rank > H3_MAX_RANK) {
    h3_diag_error(S->d, f->span, "give the field another name",
                  "'%s' is already declared with another group shape", p->name);
    return NULL;
  }
  h3_type prev = h3_type_make(p->type.dtype, p->type.rank - 1, p->type.dims + 1);
  h3_type mine = h3_type_make(t->dtype, t->rank + lead - 1, prev.dims);
  for (int i = 0; i < t->rank; i++) mine.dims[lead - 1 + i] = t->dims[i];
  if (!h3_type_equal(&prev, &mine)) {
    h3_diag_error(S->d, f->span, "fields of groups that share a path are one tensor family",
                  "'%s' is declared again with another type (%s per member, before %s)", p->name,
                  h3_type_str(&mine, b1, sizeof b1), h3_type_str(&prev, b2, sizeof b2));
    return NULL;
  }
  int64_t end = p->group_base + p->type.dims[0];
  if (first != end) {
    h3_diag_error(S->d, f->span, "declare groups that share a path over adjacent ranges, in ascending order",
                  "'%s' covers members %lld .. %lld already; this group starts at %lld", p->name,
                  (long long)p->group_base, (long long)end, (long long)first);
    return NULL;
  }
  h3_param tmp = *p;
  if (!eval_init(S, f->init, t, &tmp)) return NULL;
  if (tmp.init != p->init || tmp.init_scale != p->init_scale || tmp.init_value != p->init_value) {
    h3_diag_error(S->d, f->init ? f->init->span : f->span, "fields of groups that share a path are one tensor family",
                  "'%s' is declared again with another init", p->name);
    return NULL;
  }
  p->type.dims[0] += count;
  p->value->type = p->type;
  *shift = first - p->group_base;
  return p;
}

/* One field of group g: key, inner array, weight name, stacked type, init. */
static void group_field(sema *S, sgroup *g, const char *gpath, int64_t first, ast_field *f) {
  h3_strbuf key, weight;
  h3_strbuf_init(&key);
  h3_strbuf_init(&weight);
  h3_strbuf_printf(&weight, "%s.{}", gpath);
  const char *inner_at = NULL;
  int64_t inner = 0;
  bool ok = true;
  for (ast_part *p = f->path; p && ok; p = p->next) {
    if (!p->count) {
      h3_strbuf_printf(&key, "%s%s", key.len ? "." : "", p->name);
      h3_strbuf_printf(&weight, ".%s", p->name);
      continue;
    }
    if (inner_at) {
      h3_diag_error(S->d, p->span, "write it like mlp.experts[experts].down_proj.weight",
                    "a field may hold only one inner array");
      ok = false;
    } else if (key.len == 0 || !p->next) {
      h3_diag_error(S->d, p->span, "write it like mlp.experts[experts].down_proj.weight",
                    "an inner array must sit between two names of the field path");
      ok = false;
    } else if (sema_int(S, p->count, &inner)) {
      if (inner < 1) {
        h3_diag_error(S->d, p->count->span, "give a count of 1 or more",
                      "inner array count must be positive, got %lld", (long long)inner);
        ok = false;
      }
      inner_at = h3_arena_strdup(S->tmp, key.data ? key.data : "");
      h3_strbuf_append(&weight, ".{e}");
    } else {
      ok = false;
    }
  }
  h3_type t;
  if (ok && (key.oom || weight.oom || !key.data)) {
    sema_oom(S, f->span);
    ok = false;
  }
  if (ok && sema_group_field(g, key.data)) {
    h3_diag_error(S->d, f->span, "give each field once", "duplicate field '%s' in group '%s'", key.data,
                  g->name);
    ok = false;
  }
  if (ok && sema_eval_type(S, &f->type, &t)) {
    int lead = inner_at ? 2 : 1;
    if (t.rank + lead > H3_MAX_RANK) {
      h3_diag_error(S->d, f->type.span, "a tensor has at most 6 dims, group and inner-array dims included",
                    "with the group dims this field has %d dims; at most %d are allowed", t.rank + lead,
                    H3_MAX_RANK);
    } else {
      int64_t dims[H3_MAX_RANK] = {g->count, inner};
      for (int i = 0; i < t.rank; i++) dims[lead + i] = t.dims[i];
      const h3_type stacked = h3_type_make(t.dtype, t.rank + lead, dims);
      h3_param *p = NULL;
      int64_t shift = 0;
      if (!sema_type_fits(S, &stacked, f->span))
        ; /* reported */
      else if ((p = h3_strmap_get(&S->weights, weight.data)))
        p = merge_field(S, p, f, &t, first, g->count, &shift);
      else if ((p = h3_module_add_param(S->m, weight.data, stacked, f->span)))
        if (h3_strmap_put(&S->weights, p->name, p)) {
          sema_oom(S, f->span);
          p = NULL;
        } else {
          p->group_dims = lead; /* set before init errors, for later groups sharing the path */
          p->group_base = first;
          ok = eval_init(S, f->init, &t, p);
        }
      else
        sema_oom(S, f->span);
      if (p && ok) {
        p->group = h3_arena_strdup(&S->m->arena, shift ? g->path : g->name);
        p->group_dims = lead;
        if (!shift) p->group_base = first;
        sfield *fl = &g->fields[g->n_fields++];
        fl->path = h3_arena_strdup(S->tmp, key.data);
        fl->inner_at = inner_at;
        fl->param = p;
        fl->shift = shift;
      }
    }
  }
  h3_strbuf_free(&key);
  h3_strbuf_free(&weight);
}

void sema_params(sema *S, ast_item *it) {
  for (ast_part *p = it->path; p; p = p->next)
    if (p->count) {
      h3_diag_error(S->d, p->span, "write the count after the path: params blocks[layers] { ... }",
                    "a group path is a dotted name");
      return;
    }
  const char *path = ast_path_text(S->tmp, it->path);
  int64_t first = 0, end = 0;
  if (!path || (it->first && !sema_int(S, it->first, &first)) || !sema_int(S, it->count, &end)) return;
  int64_t count = it->first ? end - first : end;
  if (first < 0 || count < 1) {
    if (it->first)
      h3_diag_error(S->d, ast_span_join(it->first->span, it->count->span),
                    "write params PATH[FIRST .. END] with 0 <= FIRST < END",
                    "group range %lld .. %lld is empty or negative", (long long)first, (long long)end);
    else
      h3_diag_error(S->d, it->count->span, "give a count of 1 or more",
                    "group count must be positive, got %lld", (long long)count);
    return;
  }
  int nf = 0;
  for (ast_field *f = it->fields; f; f = f->next) nf++;
  sgroup *g = h3_arena_alloc(S->tmp, sizeof *g);
  if (!g || !(g->fields = h3_arena_alloc(S->tmp, sizeof(sfield) * (size_t)(nf + 1)))) {
    sema_oom(S, it->span);
    return;
  }
  g->name = it->alias ? it->alias : path;
  g->path = path;
  g->first = first;
  g->count = count;
  g->span = it->alias ? it->alias_span : it->span;
  for (ast_field *f = it->fields; f; f = f->next) group_field(S, g, path, first, f);
  register_name(S, g->name, g->span, NULL, g);
}
