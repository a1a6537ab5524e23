/* sema.c: the driver of semantic analysis (sema.h): the model name, configs with their
 * key-set check and the --config / --set choice, lets, then parameters, graphs and
 * programs in file order; plus the small shared helpers (local bindings, the op budget,
 * source snippets for messages).
 *
 * Functions, graphs and programs are registered first (so a call to one declared below
 * gets a precise message); a function's body is checked where it is called (inlined), so
 * an unused function gets a warning saying its body is unchecked.
 */
#include "sema.h"

#include <stdlib.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------------------------- */
void sema_oom(sema *S, h3_span sp) {
  if (!S->oom_reported) h3_diag_error(S->d, sp, H3_HINT_OOM, "out of memory while compiling");
  S->oom_reported = true;
}

const char *sema_span_text(sema *S, h3_span sp) {
  const char *p = S->text, *end = S->text + S->len;
  for (int l = 1; l < sp.line && p < end; l++) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    p = nl ? nl + 1 : end;
  }
  const char *eol = memchr(p, '\n', (size_t)(end - p));
  if (!eol) eol = end;
  const char *a = p + (sp.col > 0 ? sp.col - 1 : 0);
  const char *b = sp.end_line == sp.line && sp.end_col > sp.col ? p + sp.end_col - 1 : eol;
  if (a > eol) a = eol;
  if (b > eol) b = eol;
  const char *s = h3_arena_strndup(S->tmp, a, (size_t)(b - a));
  return s ? s : "?";
}

bool sema_bind(sema *S, const char *name, sval v) {
  if (S->n_env == S->cap_env) {
    int nc = S->cap_env ? S->cap_env * 2 : 64;
    binding *nb = realloc(S->env, sizeof(binding) * (size_t)nc);
    if (!nb) {
      sema_oom(S, (h3_span){0});
      return false;
    }
    S->env = nb;
    S->cap_env = nc;
  }
  S->env[S->n_env].name = name;
  S->env[S->n_env].val = v;
  S->n_env++;
  return true;
}

binding *sema_find_local(sema *S, const char *name) {
  for (int i = S->n_env - 1; i >= S->frame; i--)
    if (strcmp(S->env[i].name, name) == 0) return &S->env[i];
  return NULL;
}

bool sema_charge(sema *S, h3_span sp) {
  if (S->ops_left-- > 0) return true;
  if (!S->budget_reported)
    h3_diag_error(S->d, sp, "check for functions that call each other many times",
                  "the program is too large: more than %d ops after inlining", SEMA_MAX_OPS);
  S->budget_reported = true;
  return false;
}

/* ---- configs ------------------------------------------------------------------------------ */
typedef struct {
  ast_item *item;
  int n;
  const char **keys;
  int64_t *vals;
  h3_span *spans;
} preset;

/* Evaluates one preset's entries in order (an entry may use the keys above it). */
static bool eval_preset(sema *S, preset *p) {
  int n = ast_count_args(p->item->entries);
  p->keys = h3_arena_alloc(S->tmp, sizeof(char *) * (size_t)(n + 1));
  p->vals = h3_arena_alloc(S->tmp, sizeof(int64_t) * (size_t)(n + 1));
  p->spans = h3_arena_alloc(S->tmp, sizeof(h3_span) * (size_t)(n + 1));
  gconst *cs = h3_arena_alloc(S->tmp, sizeof(gconst) * (size_t)(n + 1));
  if (!p->keys || !p->vals || !p->spans || !cs) {
    sema_oom(S, p->item->span);
    return false;
  }
  h3_strmap_free(&S->consts);
  h3_strmap_init(&S->consts);
  bool ok = true;
  for (ast_arg *a = p->item->entries; a; a = a->next) {
    if (h3_strmap_get(&S->consts, a->name)) {
      h3_diag_error(S->d, a->name_span, "give each key once", "duplicate key '%s' in config '%s'", a->name, p->item->name);
      ok = false;
      continue;
    }
    sval v = sema_eval(S, a->value, true);
    if (v.kind == SV_FLOAT)
      h3_diag_error(S->d, a->value->span, "write float constants with 'let', e.g. let eps = 1e-5",
                    "config values are integers, got %g", v.f);
    else if (v.kind != SV_INT && v.kind != SV_ERROR)
      h3_diag_error(S->d, a->value->span, "write an integer expression of numbers and the keys above it",
                    "config values are integers, got %s", sv_describe(S, &v));
    if (v.kind != SV_INT) {
      ok = false;
      continue;
    }
    gconst *c = &cs[p->n];
    c->i = v.i;
    c->span = a->name_span;
    if (h3_strmap_put(&S->consts, a->name, c)) {
      sema_oom(S, a->name_span);
      return false;
    }
    p->keys[p->n] = a->name;
    p->vals[p->n] = v.i;
    p->spans[p->n] = a->name_span;
    p->n++;
  }
  return ok;
}

static int preset_find(const preset *p, const char *key) {
  for (int i = 0; i < p->n; i++)
    if (strcmp(p->keys[i], key) == 0) return i;
  return -1;
}

/* An override key ends at '=' or at the end of the string. */
static int preset_find_key(const preset *p, const char *key) {
  size_t n = strcspn(key, "=");
  for (int i = 0; i < p->n; i++)
    if (strlen(p->keys[i]) == n && strncmp(p->keys[i], key, n) == 0) return i;
  return -1;
}

/* Checks the presets, picks one, applies the overrides and publishes the keys. */
static bool resolve_config(sema *S, ast_item **items, int n, const h3_frontend_options *opt,
                           const char **chosen_name) {
  preset *ps = h3_arena_alloc(S->tmp, sizeof(preset) * (size_t)(n + 1));
  if (!ps) {
    sema_oom(S, (h3_span){0});
    return false;
  }
  bool ok = true;
  for (int i = 0; i < n; i++) {
    ps[i].item = items[i];
    for (int j = 0; j < i; j++)
      if (strcmp(items[j]->name, items[i]->name) == 0) {
        h3_diag_error(S->d, items[i]->span, "rename one of the two configs",
                      "duplicate config '%s' (first at line %d)", items[i]->name, items[j]->span.line);
        ok = false;
      }
    if (!eval_preset(S, &ps[i])) ok = false;
  }
  for (int i = 1; i < n && ok; i++) {
    for (int k = 0; k < ps[0].n; k++)
      if (preset_find(&ps[i], ps[0].keys[k]) < 0) {
        h3_diag_error(S->d, items[i]->span, "every config defines the same keys",
                      "config '%s' lacks key '%s' (config '%s' has it)", items[i]->name, ps[0].keys[k],
                      items[0]->name);
        ok = false;
      }
    for (int k = 0; k < ps[i].n; k++)
      if (preset_find(&ps[0], ps[i].keys[k]) < 0) {
        h3_diag_error(S->d, ps[i].spans[k], "every config defines the same keys",
                      "config '%s' has key '%s' that config '%s' lacks", items[i]->name, ps[i].keys[k],
                      items[0]->name);
        ok = false;
      }
  }
  if (!ok) return false;
  preset *c = &ps[0];
  if (opt && opt->config) {
    c = NULL;
    suggest_t g;
    suggest_init(&g, opt->config);
    h3_strbuf names;
    h3_strbuf_init(&names);
    for (int i = 0; i < n; i++) {
      if (strcmp(items[i]->name, opt->config) == 0) c = &ps[i];
      suggest_try(&g, items[i]->name);
      h3_strbuf_printf(&names, "%s%s", i ? ", " : "", items[i]->name);
    }
    if (!c) {
      const char *hint = suggest_hint(S->tmp, &g);
      if (!hint) hint = h3_arena_printf(S->tmp, "the configs are: %s", names.data ? names.data : "");
      h3_diag_error(S->d, (h3_span){0}, hint, "--config: unknown config '%s'", opt->config);
    }
    h3_strbuf_free(&names);
    if (!c) return false;
  }
  *chosen_name = c->item->name;
  for (int i = 0; opt && i < opt->n_overrides; i++) {
    const h3_config_override *o = &opt->overrides[i];
    const char *key = o->key ? h3_arena_strndup(S->tmp, o->key, strcspn(o->key, "=")) : "";
    int k = key ? preset_find_key(c, key) : -1;
    if (k < 0) {
      suggest_t g;
      suggest_init(&g, key ? key : "");
      for (int j = 0; j < c->n; j++) suggest_try(&g, c->keys[j]);
      h3_diag_error(S->d, (h3_span){0}, suggest_hint(S->tmp, &g), "--set: unknown config key '%s'",
                    key ? key : "");
      ok = false;
      continue;
    }
    c->vals[k] = o->value;
  }
  if (!ok) return false;
  h3_strmap_free(&S->consts);
  h3_strmap_init(&S->consts);
  gconst *cs = h3_arena_alloc(S->tmp, sizeof(gconst) * (size_t)(c->n + 1));
  if (!cs) {
    sema_oom(S, (h3_span){0});
    return false;
  }
  for (int k = 0; k < c->n; k++) {
    cs[k].i = c->vals[k];
    cs[k].span = c->spans[k];
    if (h3_strmap_put(&S->consts, c->keys[k], &cs[k])) {
      sema_oom(S, c->spans[k]);
      return false;
    }
  }
  S->n_config = c->n;
  S->config_keys = c->keys;
  S->config_vals = c->vals;
  return true;
}

/* ---- items --------------------------------------------------------------------------------- */
static void sema_let(sema *S, ast_item *it) {
  gconst *prev = h3_strmap_get(&S->consts, it->name);
  if (prev) {
    h3_diag_error(S->d, it->span, "give the let another name", "'%s' is already %s (line %d)", it->name,
                  prev->is_let ? "a let" : "a config key", prev->span.line);
    return;
  }
  sval v = sema_eval(S, it->value, true);
  if (v.kind == SV_ERROR) return;
  if (!sv_is_num(&v)) {
    h3_diag_error(S->d, it->value->span,
                  "a let is an integer or float expression of config keys and earlier lets",
                  "a let is a number, got %s", sv_describe(S, &v));
    return;
  }
  gconst *c = h3_arena_alloc(S->tmp, sizeof *c);
  if (!c || h3_strmap_put(&S->consts, it->name, c)) {
    sema_oom(S, it->span);
    return;
  }
  c->is_let = true;
  c->is_float = v.kind == SV_FLOAT;
  c->i = v.i;
  c->f = v.f;
  c->span = it->span;
}

/* `check LEFT CMP RIGHT, "hint"`: both sides integer constants of the config keys and the
 * lets above; false stops the compile there (the items below may rely on it). */
static void sema_check(sema *S, ast_item *it) {
  sval l = sema_eval(S, it->value, true), r = l.kind == SV_ERROR ? l : sema_eval(S, it->rhs, true);
  if (l.kind == SV_ERROR || r.kind == SV_ERROR) {
    S->check_failed = true;
    return;
  }
  if (l.kind != SV_INT || r.kind != SV_INT) {
    h3_diag_error(S->d, (l.kind != SV_INT ? it->value : it->rhs)->span,
                  "a check compares integer expressions of config keys and lets",
                  "a check's sides are integers, got %s", sv_describe(S, l.kind != SV_INT ? &l : &r));
    S->check_failed = true;
    return;
  }
  bool holds;
  const char *op;
  switch (it->compare) {
  case '<': op = "<", holds = l.i < r.i; break;
  case '>': op = ">", holds = l.i > r.i; break;
  case 'l': op = "<=", holds = l.i <= r.i; break;
  case 'g': op = ">=", holds = l.i >= r.i; break;
  case '=': op = "==", holds = l.i == r.i; break;
  default: op = "!=", holds = l.i != r.i; break;
  }
  if (holds) return;
  h3_diag_error(S->d, it->span, it->message, "check failed with config '%s': %lld %s %lld is false", S->m->config,
                (long long)l.i, op, (long long)r.i);
  S->check_failed = true;
}

static bool reserved_name(const char *n) {
  static const char *const builtins[] = {"split", "zeros", "full", "rows", "ceildiv", "int", NULL};
  h3_dtype dt;
  if (h3_op_info_find(n) || h3_dtype_from_name(n, &dt)) return true;
  for (int i = 0; builtins[i]; i++)
    if (!strcmp(builtins[i], n)) return true;
  return false;
}

/* Registers functions, graphs and programs; collects configs; reads the model name.
 * Returns false only when the rest cannot be checked (no model or config, no memory). */
static bool prepass(sema *S, ast_file *f, ast_item ***configs, int *n_configs, const char **model) {
  int n = 0, order = 0;
  for (ast_item *it = f->items; it; it = it->next) n++;
  *configs = h3_arena_alloc(S->tmp, sizeof(ast_item *) * (size_t)(n + 1));
  if (!*configs) {
    sema_oom(S, (h3_span){0});
    return false;
  }
  ast_item *model_item = NULL;
  bool ok = true;
  for (ast_item *it = f->items; it; it = it->next, order++) {
    switch (it->kind) {
    case ITEM_MODEL:
      if (model_item) {
        h3_diag_error(S->d, it->span, "a file describes one model: remove this line",
                      "second 'model' (the first is at line %d)", model_item->span.line);
        break;
      }
      model_item = it;
      break;
    case ITEM_CONFIG: (*configs)[(*n_configs)++] = it; break;
    case ITEM_FN:
    case ITEM_GRAPH:
    case ITEM_PROGRAM: {
      gcall *prev = h3_strmap_get(&S->calls, it->name);
      if (prev) {
        h3_diag_error(S->d, it->span, "rename one of the two", "'%s' is already defined at line %d", it->name,
                      prev->item->span.line);
        break;
      }
      if (reserved_name(it->name)) {
        h3_diag_error(S->d, it->span, "choose another name", "'%s' is the name of an op, a built-in or a dtype",
                      it->name);
        break;
      }
      gcall *g = h3_arena_alloc(S->tmp, sizeof *g);
      if (!g || h3_strmap_put(&S->calls, it->name, g)) {
        sema_oom(S, it->span);
        return false;
      }
      g->item = it;
      g->order = order;
      break;
    }
    default: break;
    }
  }
  if (!model_item) {
    h3_diag_error(S->d, (h3_span){S->file, 1, 1, 1, 1}, "start the file with: model NAME",
                  "missing 'model' declaration");
    ok = false;
  } else {
    *model = model_item->name;
  }
  if (*n_configs == 0) {
    h3_diag_error(S->d, (h3_span){S->file, 1, 1, 1, 1}, "add one: config NAME { key = value ... }",
                  "no config preset");
    ok = false;
  }
  return ok;
}

h3_module *sema_run(h3_diag *d, h3_arena *tmp, const char *file, const char *text, size_t len,
                    ast_file *f, const h3_frontend_options *opt) {
  sema S0 = {0}, *S = &S0;
  S->d = d;
  S->tmp = tmp;
  S->file = file;
  S->text = text;
  S->len = len;
  S->ops_left = SEMA_MAX_OPS;
  h3_strmap_init(&S->names);
  h3_strmap_init(&S->consts);
  h3_strmap_init(&S->calls);
  h3_strmap_init(&S->weights);
  int before = d->errors;
  ast_item **configs = NULL;
  int n_configs = 0;
  const char *model = NULL, *config = NULL;
  h3_module *m = NULL;
  if (!prepass(S, f, &configs, &n_configs, &model) || !resolve_config(S, configs, n_configs, opt, &config))
    goto out;
  m = h3_module_new(model, config);
  if (!m) {
    sema_oom(S, (h3_span){0});
    goto out;
  }
  S->m = m;
  m->source = h3_arena_strdup(&m->arena, file);
  for (int k = 0; k < S->n_config; k++) h3_module_set_config(m, S->config_keys[k], S->config_vals[k]);
  int order = 0;
  for (ast_item *it = f->items; it && !S->oom_reported && !S->check_failed; it = it->next, order++) {
    S->cur_order = order;
    switch (it->kind) {
    case ITEM_LET: sema_let(S, it); break;
    case ITEM_CHECK: sema_check(S, it); break;
    case ITEM_PARAM: sema_param(S, it); break;
    case ITEM_PARAMS: sema_params(S, it); break;
    case ITEM_GRAPH:
    case ITEM_PROGRAM: {
      gcall *g = h3_strmap_get(&S->calls, it->name);
      if (g && g->item == it) sema_graph(S, g); /* a duplicate was reported already */
      break;
    }
    default: break;
    }
  }
  for (ast_item *it = f->items; it && !S->check_failed; it = it->next) {
    gcall *g = it->kind == ITEM_FN ? h3_strmap_get(&S->calls, it->name) : NULL;
    if (g && g->item == it && !g->used)
      h3_diag_warning(d, it->span, "remove it, or call it from a function, graph or program",
                      "function '%s' is never called (its body is not checked)", it->name);
  }
  if (m->oom) sema_oom(S, (h3_span){0});
out:
  h3_strmap_free(&S->names);
  h3_strmap_free(&S->consts);
  h3_strmap_free(&S->calls);
  h3_strmap_free(&S->weights);
  free(S->env);
  if (m && d->errors != before) {
    h3_module_free(m);
    m = NULL;
  }
  return m;
}
