/* plan_read.c: h3_plan_read_text / h3_plan_read_file, the verifying plan reader.
 *
 * The YAML is loaded with libyaml's parser into a node tree (marks give every node's
 * line:col). The header is checked first (format, format_version, h3_version) and a
 * mismatch stops the read with one message. Then every section is read into the h3_plan
 * with its required keys and types checked and unknown keys rejected; kernel sources
 * are checked against their sha256 and their names against the source hash; translation
 * units, kernels and library calls must reference each other consistently; the IR text is
 * parsed and verified (its diagnostics are moved to plan line:col), and every op that
 * needs a kernel or library call must name an existing one. What the executor trusts
 * without looking again, the kernels' launch fields and the IR's memory plan, is checked
 * by plan_check.c. Every error names the file and the YAML line:col. Nothing here trusts
 * the input: no crash on any bytes.
 */
#include "plan_internal.h"
#include "h3/op_registry.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

typedef struct {
  const char *file, *text;
  size_t len;
  yaml_document_t doc;
  h3_diag *d;
  h3_plan *p;
  int errors;
} rd;

#define RECOMPILE "recompile the plan with h3c"

static h3_span at_mark(rd *r, yaml_mark_t m) {
  h3_span s;
  memset(&s, 0, sizeof s);
  s.file = r->file;
  s.line = (int)m.line + 1;
  s.col = (int)m.column + 1;
  s.end_line = s.line;
  s.end_col = s.col;
  return s;
}

__attribute__((format(printf, 4, 5))) static void err(rd *r, const yaml_node_t *n, const char *hint,
                                                      const char *fmt, ...) {
  yaml_mark_t m = {0, 0, 0};
  if (n) m = n->start_mark;
  va_list ap;
  va_start(ap, fmt);
  h3_diag_verror(r->d, at_mark(r, m), hint, fmt, ap);
  va_end(ap);
  r->errors++;
}

static yaml_node_t *node_at(rd *r, int id) { return yaml_document_get_node(&r->doc, id); }

static const char *sval(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* The value of `key` in mapping `map` (NULL if absent); remembers the key node. */
static yaml_node_t *get(rd *r, yaml_node_t *map, const char *key, yaml_node_t **key_node) {
  if (!map || map->type != YAML_MAPPING_NODE) return NULL;
  for (yaml_node_pair_t *kp = map->data.mapping.pairs.start; kp < map->data.mapping.pairs.top; kp++) {
    yaml_node_t *k = node_at(r, kp->key);
    const char *ks = sval(k);
    if (ks && strcmp(ks, key) == 0) {
      if (key_node) *key_node = k;
      return node_at(r, kp->value);
    }
  }
  return NULL;
}

/* Rejects keys outside `allowed` (NULL-terminated) and non-scalar keys. */
static void only_keys(rd *r, yaml_node_t *map, const char *const *allowed, const char *what) {
  if (!map || map->type != YAML_MAPPING_NODE) return;
  for (yaml_node_pair_t *kp = map->data.mapping.pairs.start; kp < map->data.mapping.pairs.top; kp++) {
    yaml_node_t *k = node_at(r, kp->key);
    const char *ks = sval(k);
    if (!ks) {
      err(r, k, RECOMPILE, "%s: keys must be plain names", what);
      continue;
    }
    bool ok = false;
    for (int i = 0; allowed[i]; i++) ok |= strcmp(allowed[i], ks) == 0;
    if (!ok) err(r, k, RECOMPILE, "unknown key '%s' in %s", ks, what);
  }
}

static yaml_node_t *need(rd *r, yaml_node_t *map, const char *key, yaml_node_type_t type,
                         const char *what) {
  yaml_node_t *v = get(r, map, key, NULL);
  if (!v) {
    err(r, map, RECOMPILE, "missing key '%s' in %s", key, what);
    return NULL;
  }
  if (v->type != type) {
    const char *tn = type == YAML_SCALAR_NODE ? "a scalar" : type == YAML_SEQUENCE_NODE ? "a list" : "a mapping";
    err(r, v, RECOMPILE, "'%s' in %s must be %s", key, what, tn);
    return NULL;
  }
  return v;
}

static const char *need_str(rd *r, yaml_node_t *map, const char *key, const char *what) {
  yaml_node_t *v = need(r, map, key, YAML_SCALAR_NODE, what);
  if (!v) return NULL;
  const char *s = h3_arena_strdup(&r->p->arena, sval(v));
  if (!s) err(r, v, H3_HINT_OOM, "out of memory");
  return s;
}

/* A tier by name; `kernel_tier`: only exact or lossless (kernels and translation units). */
static bool need_tier(rd *r, yaml_node_t *map, const char *key, const char *what, bool kernel_tier,
                      h3_tier *out) {
  const char *s = need_str(r, map, key, what);
  if (!s) return false;
  if (!h3_tier_parse(s, out) || (kernel_tier && *out == H3_TIER_HIGH)) {
    err(r, get(r, map, key, NULL), RECOMPILE, "%s: %s must be %s, got '%s'", what, key,
        kernel_tier ? "exact or lossless" : "exact, lossless or high", s);
    return false;
  }
  return true;
}

static bool parse_i64(const char *s, int64_t *out) {
  if (!s || !*s) return false;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (*end || errno) return false;
  *out = v;
  return true;
}

static bool scalar_int(rd *r, yaml_node_t *v, const char *key, const char *what, int64_t *out) {
  if (!v || !parse_i64(sval(v), out)) {
    err(r, v, RECOMPILE, "'%s' in %s must be an integer, got '%s'", key, what, v && sval(v) ? sval(v) : "?");
    return false;
  }
  return true;
}

static bool need_int(rd *r, yaml_node_t *map, const char *key, const char *what, int64_t *out) {
  yaml_node_t *v = need(r, map, key, YAML_SCALAR_NODE, what);
  return v && scalar_int(r, v, key, what, out);
}

static int seq_len(const yaml_node_t *n) {
  return n && n->type == YAML_SEQUENCE_NODE ? (int)(n->data.sequence.items.top - n->data.sequence.items.start) : 0;
}

static yaml_node_t *seq_at(rd *r, const yaml_node_t *n, int i) {
  return node_at(r, n->data.sequence.items.start[i]);
}

/* A list of scalars as arena strings. */
static bool need_strs(rd *r, yaml_node_t *map, const char *key, const char *what, int *n_out,
                      const char ***out) {
  yaml_node_t *v = need(r, map, key, YAML_SEQUENCE_NODE, what);
  if (!v) return false;
  int n = seq_len(v);
  const char **arr = h3_arena_alloc(&r->p->arena, sizeof(char *) * (size_t)(n + 1));
  if (!arr) return false;
  for (int i = 0; i < n; i++) {
    yaml_node_t *it = seq_at(r, v, i);
    if (!sval(it)) {
      err(r, it, RECOMPILE, "'%s' in %s must be a list of strings", key, what);
      return false;
    }
    if (!(arr[i] = h3_arena_strdup(&r->p->arena, sval(it)))) return false;
  }
  *n_out = n;
  *out = arr;
  return true;
}

static bool need_ints(rd *r, yaml_node_t *map, const char *key, const char *what, int want, int *n_out,
                      int64_t *out, int cap) {
  yaml_node_t *v = need(r, map, key, YAML_SEQUENCE_NODE, what);
  if (!v) return false;
  int n = seq_len(v);
  if ((want >= 0 && n != want) || n > cap) {
    err(r, v, RECOMPILE, "'%s' in %s must be a list of %d integers, got %d entries", key, what,
        want >= 0 ? want : cap, n);
    return false;
  }
  for (int i = 0; i < n; i++)
    if (!scalar_int(r, seq_at(r, v, i), key, what, &out[i])) return false;
  if (n_out) *n_out = n;
  return true;
}


/* ---- sections ------------------------------------------------------------------------------ */
static const char *const top_keys[] = {"format", "format_version", "h3_version", "model", "source",
                                       "config", "quality", "flags", "passes", "target", "weights",
                                       "memory", "prelude", "translation_units", "kernels",
                                       "library_calls", "program", "ir", NULL};

/* format, version and h3 version: any mismatch stops the read. */
static bool read_identity(rd *r, yaml_node_t *root) {
  yaml_node_t *f = need(r, root, "format", YAML_SCALAR_NODE, "the plan");
  if (!f) return false;
  if (strcmp(sval(f), H3_PLAN_FORMAT) != 0) {
    err(r, f, "h3exec runs plans written by `h3c compile`",
        "not an h3 plan: 'format' is '%s', expected '%s'", sval(f), H3_PLAN_FORMAT);
    return false;
  }
  yaml_node_t *v = need(r, root, "format_version", YAML_SCALAR_NODE, "the plan");
  int64_t ver;
  if (!v || !scalar_int(r, v, "format_version", "the plan", &ver)) return false;
  if (ver != H3_PLAN_FORMAT_VERSION) {
    err(r, v, RECOMPILE, "plan format version %lld is not supported by this h3 (%d); recompile with h3c",
        (long long)ver, H3_PLAN_FORMAT_VERSION);
    return false;
  }
  yaml_node_t *hv = need(r, root, "h3_version", YAML_SCALAR_NODE, "the plan");
  if (!hv) return false;
  if (strcmp(sval(hv), H3_VERSION) != 0) {
    err(r, hv, RECOMPILE, "the plan was written by h3 %s, this is h3 %s; recompile with h3c", sval(hv),
        H3_VERSION);
    return false;
  }
  return true;
}

static void read_header(rd *r, yaml_node_t *root) {
  h3_plan *p = r->p;
  p->h3_version = H3_VERSION;
  p->model = need_str(r, root, "model", "the plan");
  p->source = need_str(r, root, "source", "the plan");
  need_tier(r, root, "quality", "the plan", false, &p->quality);
  need_strs(r, root, "flags", "the plan", &p->n_flags, &p->flags);
  need_strs(r, root, "passes", "the plan", &p->n_passes, &p->passes);
  yaml_node_t *cfg = need(r, root, "config", YAML_MAPPING_NODE, "the plan");
  if (cfg) {
    static const char *const keys[] = {"name", "values", NULL};
    only_keys(r, cfg, keys, "config");
    p->config = need_str(r, cfg, "name", "config");
    yaml_node_t *vals = need(r, cfg, "values", YAML_MAPPING_NODE, "config");
    if (vals) {
      int n = (int)(vals->data.mapping.pairs.top - vals->data.mapping.pairs.start);
      p->config_entries = h3_arena_alloc(&p->arena, sizeof(h3_config_entry) * (size_t)(n + 1));
      for (int i = 0; p->config_entries && i < n; i++) {
        yaml_node_pair_t *kp = &vals->data.mapping.pairs.start[i];
        yaml_node_t *k = node_at(r, kp->key), *v = node_at(r, kp->value);
        h3_config_entry *e = &p->config_entries[p->n_config];
        if (!sval(k)) {
          err(r, k, RECOMPILE, "config values: keys must be names");
          continue;
        }
        if (!scalar_int(r, v, sval(k), "config values", &e->value)) continue;
        e->key = h3_arena_strdup(&p->arena, sval(k));
        if (e->key) p->n_config++;
      }
    }
  }
  yaml_node_t *t = need(r, root, "target", YAML_MAPPING_NODE, "the plan");
  if (t) {
    static const char *const keys[] = {"arch", "cuda", "nvrtc", "cublaslt", "kernel_cache_key", NULL};
    only_keys(r, t, keys, "target");
    p->arch = need_str(r, t, "arch", "target");
    p->cuda_version = need_str(r, t, "cuda", "target");
    p->nvrtc_version = need_str(r, t, "nvrtc", "target");
    p->cublaslt_version = need_str(r, t, "cublaslt", "target");
    p->key_scheme = need_str(r, t, "kernel_cache_key", "target");
    if (p->arch && strcmp(p->arch, H3_TARGET_ARCH) != 0)
      err(r, get(r, t, "arch", NULL), RECOMPILE, "target arch '%s' is not supported (h3 targets %s)",
          p->arch, H3_TARGET_ARCH);
  }
}

static void read_weights(rd *r, yaml_node_t *root) {
  h3_plan *p = r->p;
  yaml_node_t *w = need(r, root, "weights", YAML_MAPPING_NODE, "the plan");
  if (!w) return;
  static const char *const keys[] = {"count", "bytes", "tensors", NULL};
  only_keys(r, w, keys, "weights");
  int64_t count = 0, bytes = 0;
  int bad = !need_int(r, w, "count", "weights", &count);
  bad += !need_int(r, w, "bytes", "weights", &bytes);
  bool ok = bad == 0;
  yaml_node_t *ts = need(r, w, "tensors", YAML_SEQUENCE_NODE, "weights");
  if (!ts || !ok) return;
  int n = seq_len(ts);
  p->weights = h3_arena_alloc(&p->arena, sizeof(h3_plan_weight) * (size_t)(n + 1));
  if (!p->weights) return;
  static const char *const tkeys[] = {"name", "dtype", "shape", "bytes", "param", "index", NULL};
  for (int i = 0; i < n; i++) {
    yaml_node_t *e = seq_at(r, ts, i);
    char what[64];
    snprintf(what, sizeof what, "weight tensor %d", i);
    if (!e || e->type != YAML_MAPPING_NODE) {
      err(r, e, RECOMPILE, "%s must be a mapping", what);
      continue;
    }
    only_keys(r, e, tkeys, what);
    h3_plan_weight *t = &p->weights[p->n_weights];
    memset(t, 0, sizeof *t);
    t->name = need_str(r, e, "name", what);
    t->param = need_str(r, e, "param", what);
    const char *dt = need_str(r, e, "dtype", what);
    h3_dtype d;
    if (dt && !h3_dtype_from_name(dt, &d)) {
      err(r, get(r, e, "dtype", NULL), RECOMPILE, "%s: unknown dtype '%s'", what, dt);
      continue;
    }
    int rank = 0;
    if (!dt || !need_ints(r, e, "shape", what, -1, &rank, t->type.dims, H3_MAX_RANK) ||
        !need_int(r, e, "bytes", what, &t->bytes) || !need_int(r, e, "index", what, &t->index) ||
        !t->name || !t->param)
      continue;
    t->type.dtype = d;
    t->type.rank = rank;
    p->n_weights++;
    p->weight_bytes += t->bytes;
  }
  if (p->n_weights == n && count != n)
    err(r, get(r, w, "count", NULL), RECOMPILE, "weights: count is %lld but %d tensors are listed",
        (long long)count, n);
  else if (p->n_weights == n && bytes != p->weight_bytes)
    err(r, get(r, w, "bytes", NULL), RECOMPILE, "weights: bytes is %lld but the tensors add up to %lld",
        (long long)bytes, (long long)p->weight_bytes);
}

static void read_memory(rd *r, yaml_node_t *root) {
  h3_plan *p = r->p;
  yaml_node_t *m = need(r, root, "memory", YAML_SEQUENCE_NODE, "the plan");
  if (!m) return;
  int n = seq_len(m);
  p->memory = h3_arena_alloc(&p->arena, sizeof(h3_plan_memory) * (size_t)(n + 1));
  static const char *const keys[] = {"graph", "arena_bytes", "peak_bytes", NULL};
  for (int i = 0; p->memory && i < n; i++) {
    yaml_node_t *e = seq_at(r, m, i);
    h3_plan_memory *mm = &p->memory[p->n_memory];
    if (!e || e->type != YAML_MAPPING_NODE) {
      err(r, e, RECOMPILE, "memory entry %d must be a mapping", i);
      continue;
    }
    only_keys(r, e, keys, "a memory entry");
    mm->graph = need_str(r, e, "graph", "a memory entry");
    if (mm->graph && need_int(r, e, "arena_bytes", "a memory entry", &mm->arena_bytes) &&
        need_int(r, e, "peak_bytes", "a memory entry", &mm->peak_bytes))
      p->n_memory++;
  }
}

static void read_kernel(rd *r, yaml_node_t *e, int i) {
  h3_plan *p = r->p;
  char what[160];
  snprintf(what, sizeof what, "kernel %d", i);
  if (!e || e->type != YAML_MAPPING_NODE) {
    err(r, e, RECOMPILE, "%s must be a mapping", what);
    return;
  }
  static const char *const keys[] = {"name", "op", "tier", "tu", "uses", "grid", "block", "shared_bytes",
                                     "inplace", "args", "options", "sha256", "source", NULL};
  only_keys(r, e, keys, what);
  h3_plan_kernel *pk = &p->kernels[p->n_kernels];
  memset(pk, 0, sizeof *pk);
  h3_kernel *k = &pk->k;
  k->name = need_str(r, e, "name", what);
  if (k->name) snprintf(what, sizeof what, "kernel '%.100s'", k->name);
  k->op = need_str(r, e, "op", what);
  bool tier_ok = need_tier(r, e, "tier", what, true, &k->tier);
  const char *sha = need_str(r, e, "sha256", what);
  k->source = (char *)need_str(r, e, "source", what);
  int64_t tu = -1, uses = 0;
  int n_opt = 0;
  const char **opts = NULL;
  const char *inplace = need_str(r, e, "inplace", what);
  /* every field is read (and reported) before giving up on the kernel */
  int bad = !(k->name && k->op && tier_ok && sha && k->source && inplace);
  bad += !need_int(r, e, "tu", what, &tu);
  bad += !need_int(r, e, "uses", what, &uses);
  bad += !need_ints(r, e, "grid", what, 3, NULL, k->grid, 3);
  bad += !need_ints(r, e, "block", what, 3, NULL, k->block, 3);
  bad += !need_int(r, e, "shared_bytes", what, &k->shared_bytes);
  bad += !need_strs(r, e, "args", what, &k->n_args, &k->args);
  bad += !need_strs(r, e, "options", what, &n_opt, &opts);
  if (bad) return;
  if (strcmp(inplace, "true") != 0 && strcmp(inplace, "false") != 0) {
    err(r, get(r, e, "inplace", NULL), RECOMPILE, "'inplace' in %s must be true or false", what);
    return;
  }
  k->inplace = strcmp(inplace, "true") == 0;
  if (!h3_op_info_find(k->op)) {
    err(r, get(r, e, "op", NULL), RECOMPILE, "%s: unknown op '%s'", what, k->op);
    return;
  }
  h3_sha256_hex(k->source, strlen(k->source), k->sha256);
  if (strcmp(k->sha256, sha) != 0) {
    err(r, get(r, e, "source", NULL), RECOMPILE,
        "%s: the source does not match its sha256 (the plan was edited or is corrupt)", what);
    return;
  }
  if (!h3_kernel_name_matches(k->name, k->op, k->source)) {
    err(r, get(r, e, "name", NULL), RECOMPILE, "%s: the name does not match the op and the source hash",
        what);
    return;
  }
  if (k->n_args > H3_KERNEL_MAX_ARGS) {
    err(r, get(r, e, "args", NULL), RECOMPILE, "%s: %d arguments; a launch takes at most %d", what,
        k->n_args, H3_KERNEL_MAX_ARGS);
    return;
  }
  for (int j = 0; j < k->n_args; j++) {
    const char *a = k->args[j];
    bool good = strcmp(a, "seed") == 0 || ((a[0] == 'i' && a[1] == 'n') || strncmp(a, "out", 3) == 0);
    if (!good) {
      err(r, get(r, e, "args", NULL), RECOMPILE, "%s: unknown argument '%s'", what, a);
      return;
    }
  }
  if (tu < 0 || tu >= p->n_tus) {
    err(r, get(r, e, "tu", NULL), RECOMPILE, "%s: translation unit %lld does not exist", what, (long long)tu);
    return;
  }
  const h3_plan_tu *u = &p->tus[tu];
  bool same = n_opt == u->n_options;
  for (int j = 0; same && j < n_opt; j++) same = strcmp(opts[j], u->options[j]) == 0;
  if (!same) {
    err(r, get(r, e, "options", NULL), RECOMPILE, "%s: options differ from its translation unit's", what);
    return;
  }
  if (u->tier != k->tier) {
    err(r, get(r, e, "tier", NULL), RECOMPILE, "%s: tier differs from its translation unit's", what);
    return;
  }
  char why[256];
  const char *field = plan_check_launch(k, why, sizeof why);
  if (field) {
    err(r, get(r, e, field, NULL), RECOMPILE, "%s: %s", what, why);
    return;
  }
  pk->tu = (int)tu;
  pk->uses = (int)uses;
  p->n_kernels++;
}

/* Reads the units' headers (before the kernels, which refer to them), then the kernels,
 * then resolves each unit's kernel list. */
static void read_kernels(rd *r, yaml_node_t *root) {
  h3_plan *p = r->p;
  yaml_node_t *pre = need(r, root, "prelude", YAML_MAPPING_NODE, "the plan");
  if (pre) {
    static const char *const keys[] = {"sha256", "source", NULL};
    only_keys(r, pre, keys, "prelude");
    const char *sha = need_str(r, pre, "sha256", "prelude");
    p->prelude = need_str(r, pre, "source", "prelude");
    if (sha && p->prelude) {
      h3_sha256_hex(p->prelude, strlen(p->prelude), p->prelude_sha256);
      if (strcmp(sha, p->prelude_sha256) != 0)
        err(r, get(r, pre, "source", NULL), RECOMPILE,
            "prelude: the source does not match its sha256 (the plan was edited or is corrupt)");
    }
  }
  yaml_node_t *tus = need(r, root, "translation_units", YAML_SEQUENCE_NODE, "the plan");
  yaml_node_t *ks = need(r, root, "kernels", YAML_SEQUENCE_NODE, "the plan");
  if (!tus || !ks) return;
  int nt = seq_len(tus), nk = seq_len(ks);
  p->tus = h3_arena_alloc(&p->arena, sizeof(h3_plan_tu) * (size_t)(nt + 1));
  p->kernels = h3_arena_alloc(&p->arena, sizeof(h3_plan_kernel) * (size_t)(nk + 1));
  if (!p->tus || !p->kernels) return;
  static const char *const keys[] = {"id", "tier", "options", "kernels", NULL};
  for (int i = 0; i < nt; i++) {
    yaml_node_t *e = seq_at(r, tus, i);
    char what[64];
    snprintf(what, sizeof what, "translation unit %d", i);
    if (!e || e->type != YAML_MAPPING_NODE) {
      err(r, e, RECOMPILE, "%s must be a mapping", what);
      return;
    }
    only_keys(r, e, keys, what);
    h3_plan_tu *u = &p->tus[i];
    int64_t id = -1;
    if (!need_int(r, e, "id", what, &id)) return;
    if (id != i) {
      err(r, get(r, e, "id", NULL), RECOMPILE, "%s has id %lld", what, (long long)id);
      return;
    }
    if (!need_tier(r, e, "tier", what, true, &u->tier) || !need_strs(r, e, "options", what, &u->n_options, &u->options)) return;
    if (!need(r, e, "kernels", YAML_SEQUENCE_NODE, what)) return;
    p->n_tus++;
  }
  for (int i = 0; i < nk; i++) read_kernel(r, seq_at(r, ks, i), i);
  if (p->n_kernels != nk) return;
  for (int i = 0; i < nt; i++) {
    yaml_node_t *list = get(r, seq_at(r, tus, i), "kernels", NULL);
    int n = seq_len(list);
    h3_plan_tu *u = &p->tus[i];
    u->kernels = h3_arena_alloc(&p->arena, sizeof(int) * (size_t)(n + 1));
    if (!u->kernels) return;
    for (int j = 0; j < n; j++) {
      yaml_node_t *it = seq_at(r, list, j);
      int ki = sval(it) ? h3_plan_find_kernel(p, sval(it)) : -1;
      if (ki < 0 || p->kernels[ki].tu != i) {
        err(r, it, RECOMPILE, "translation unit %d lists '%s', which is not one of its kernels", i,
            sval(it) ? sval(it) : "?");
        return;
      }
      u->kernels[u->n_kernels++] = ki;
    }
  }
  for (int i = 0; i < nk; i++) {
    int tu = p->kernels[i].tu;
    bool listed = false;
    for (int j = 0; j < p->tus[tu].n_kernels; j++) listed |= p->tus[tu].kernels[j] == i;
    if (!listed)
      err(r, seq_at(r, ks, i), RECOMPILE, "kernel '%s' is not listed by its translation unit %d",
          p->kernels[i].k.name, tu);
  }
}

static void read_libcalls(rd *r, yaml_node_t *root) {
  h3_plan *p = r->p;
  yaml_node_t *ls = need(r, root, "library_calls", YAML_SEQUENCE_NODE, "the plan");
  if (!ls) return;
  int n = seq_len(ls);
  p->libcalls = h3_arena_alloc(&p->arena, sizeof(h3_plan_libcall) * (size_t)(n + 1));
  static const char *const keys[] = {"name", "kind", "op", "graph", "operands", "results", "attrs", NULL};
  for (int i = 0; p->libcalls && i < n; i++) {
    yaml_node_t *e = seq_at(r, ls, i);
    char what[64];
    snprintf(what, sizeof what, "library call %d", i);
    if (!e || e->type != YAML_MAPPING_NODE) {
      err(r, e, RECOMPILE, "%s must be a mapping", what);
      continue;
    }
    only_keys(r, e, keys, what);
    h3_plan_libcall *c = &p->libcalls[p->n_libcalls];
    memset(c, 0, sizeof *c);
    c->name = need_str(r, e, "name", what);
    c->kind = need_str(r, e, "kind", what);
    c->op = need_str(r, e, "op", what);
    c->graph = need_str(r, e, "graph", what);
    const char **ops = NULL, **res = NULL;
    yaml_node_t *attrs = need(r, e, "attrs", YAML_MAPPING_NODE, what);
    if (!c->name || !c->kind || !c->op || !c->graph || !attrs ||
        !need_strs(r, e, "operands", what, &c->n_operands, &ops) ||
        !need_strs(r, e, "results", what, &c->n_results, &res))
      continue;
    static const char *const kinds[] = {"cublaslt", "attention", "host", "deferred", NULL};
    bool kind_ok = false;
    for (int j = 0; kinds[j]; j++) kind_ok |= strcmp(kinds[j], c->kind) == 0;
    if (!kind_ok) {
      err(r, get(r, e, "kind", NULL), RECOMPILE, "%s: unknown kind '%s'", what, c->kind);
      continue;
    }
    c->operands = h3_arena_alloc(&p->arena, sizeof(h3_type) * (size_t)(c->n_operands + 1));
    c->results = h3_arena_alloc(&p->arena, sizeof(h3_type) * (size_t)(c->n_results + 1));
    int na = (int)(attrs->data.mapping.pairs.top - attrs->data.mapping.pairs.start);
    c->attrs = h3_arena_alloc(&p->arena, sizeof(h3_plan_kv) * (size_t)(na + 1));
    if (!c->operands || !c->results || !c->attrs) return;
    bool ok = true;
    for (int j = 0; ok && j < c->n_operands + c->n_results; j++) {
      const char *t = j < c->n_operands ? ops[j] : res[j - c->n_operands];
      h3_type *out = j < c->n_operands ? &c->operands[j] : &c->results[j - c->n_operands];
      if (!plan_type_parse(t, out)) {
        err(r, get(r, e, j < c->n_operands ? "operands" : "results", NULL), RECOMPILE,
            "%s: '%s' is not a tensor type like bf16[8, 64]", what, t);
        ok = false;
      }
    }
    for (int j = 0; ok && j < na; j++) {
      yaml_node_pair_t *kp = &attrs->data.mapping.pairs.start[j];
      const char *k = sval(node_at(r, kp->key)), *v = sval(node_at(r, kp->value));
      if (!k || !v) {
        err(r, attrs, RECOMPILE, "%s: attrs must map names to values", what);
        ok = false;
        break;
      }
      c->attrs[c->n_attrs].key = h3_arena_strdup(&p->arena, k);
      c->attrs[c->n_attrs++].value = h3_arena_strdup(&p->arena, v);
    }
    if (ok) p->n_libcalls++;
  }
}

static void read_program(rd *r, yaml_node_t *root) {
  h3_plan *p = r->p;
  yaml_node_t *pr = need(r, root, "program", YAML_MAPPING_NODE, "the plan");
  if (!pr) return;
  static const char *const keys[] = {"entry", "graphs", NULL};
  only_keys(r, pr, keys, "program");
  const char *entry = need_str(r, pr, "entry", "program");
  p->entry = entry && *entry ? entry : NULL;
  need_strs(r, pr, "graphs", "program", &p->n_graphs, &p->graphs);
}


/* ---- the IR ------------------------------------------------------------------------------- */
typedef struct {
  int line0, indent; /* IR line L is plan line L + line0; columns shift by indent */
  yaml_node_t *node;
} ir_pos;

static h3_span ir_span(rd *r, const ir_pos *ip, h3_span s) {
  if (ip->line0 < 0 || s.line <= 0) return at_mark(r, ip->node->start_mark);
  s.file = r->file;
  s.line += ip->line0;
  s.end_line += ip->line0;
  s.col += ip->indent;
  s.end_col += ip->indent;
  return s;
}

static void move_diags(rd *r, const ir_pos *ip, h3_diag *tmp) {
  for (h3_diag_msg *m = tmp->head; m; m = m->next) {
    h3_span s = ir_span(r, ip, m->span);
    if (m->level == H3_DIAG_ERROR) {
      h3_diag_error(r->d, s, m->hint ? m->hint : RECOMPILE, "in the plan's IR: %s", m->message);
      r->errors++;
    } else if (m->level == H3_DIAG_WARNING) {
      h3_diag_warning(r->d, s, m->hint, "in the plan's IR: %s", m->message);
    } else {
      h3_diag_note(r->d, s, "%s", m->message);
    }
  }
}

typedef struct {
  rd *r;
  const ir_pos *ip;
  const h3_graph *g;
} op_check;

static int check_op(h3_op *op, void *ctx) {
  op_check *c = ctx;
  rd *r = c->r;
  if (op->parent && op->parent->parent && op->parent->parent->code == H3_OP_FUSED) return 0;
  h3_exec_kind ek = h3_exec_classify(op);
  if (ek == H3_EXEC_CONTROL || ek == H3_EXEC_VIEW) return 0;
  const char *opname = h3_opcode_name(op->code);
  const char *kname = h3_op_attr_string(op, "kernel", NULL);
  h3_span s = ir_span(r, c->ip, op->span);
  if (!kname) {
    h3_diag_error(r->d, s, RECOMPILE, "op '%s' in graph '%s' has no kernel or library call", opname,
                  c->g->name);
    r->errors++;
    return r->errors > 20;
  }
  const char *found_op = NULL;
  if (ek == H3_EXEC_KERNEL) {
    int ki = h3_plan_find_kernel(r->p, kname);
    if (ki >= 0) found_op = r->p->kernels[ki].k.op;
  } else {
    const h3_plan_libcall *lc = h3_plan_find_libcall(r->p, kname);
    if (lc) found_op = lc->op;
  }
  if (!found_op || strcmp(found_op, opname) != 0) {
    h3_diag_error(r->d, s, RECOMPILE, "op '%s' in graph '%s' names %s '%s', which the plan %s", opname,
                  c->g->name, ek == H3_EXEC_KERNEL ? "kernel" : "library call", kname,
                  found_op ? "defines for another op" : "does not define");
    r->errors++;
  }
  return r->errors > 20;
}

static void read_ir(rd *r, yaml_node_t *root) {
  h3_plan *p = r->p;
  yaml_node_t *n = need(r, root, "ir", YAML_SCALAR_NODE, "the plan");
  if (!n || r->errors) return;
  ir_pos ip = {-1, 0, n};
  if (n->data.scalar.style == YAML_LITERAL_SCALAR_STYLE) {
    /* content starts on the line after the '|' */
    size_t line = 0, i = 0;
    while (i < r->len && line < n->start_mark.line + 1) line += r->text[i++] == '\n';
    int indent = 0;
    while (i + (size_t)indent < r->len && r->text[i + (size_t)indent] == ' ') indent++;
    ip.line0 = (int)n->start_mark.line + 1;
    ip.indent = indent;
  }
  p->ir_text = need_str(r, root, "ir", "the plan");
  if (!p->ir_text) return;
  h3_diag tmp;
  h3_diag_init(&tmp);
  p->module = h3_module_parse(r->file, p->ir_text, strlen(p->ir_text), &tmp);
  if (p->module) h3_verify_module(p->module, &tmp);
  move_diags(r, &ip, &tmp);
  h3_diag_free(&tmp);
  if (!p->module || r->errors) return;
  h3_module *m = p->module;
  for (int i = 0; i < m->n_graphs && r->errors <= 20; i++) {
    op_check c = {r, &ip, m->graphs[i]};
    h3_region_walk(&m->graphs[i]->body, check_op, &c);
  }
  int64_t members = 0;
  for (int i = 0; i < m->n_params; i++) {
    int64_t k = 1;
    for (int g = 0; g < m->params[i]->group_dims && g < m->params[i]->type.rank; g++)
      k *= m->params[i]->type.dims[g];
    members += k;
  }
  if (members != p->n_weights)
    err(r, get(r, root, "weights", NULL), RECOMPILE,
        "weights: %lld tensors are listed but the IR's parameters have %lld", (long long)p->n_weights,
        (long long)members);
  yaml_node_t *prog = get(r, root, "program", NULL);
  for (int i = 0; i < p->n_graphs; i++)
    if (!h3_module_graph(m, p->graphs[i]))
      err(r, prog, RECOMPILE, "program: graph '%s' is not in the IR", p->graphs[i]);
  const h3_graph *eg = p->entry ? h3_module_graph(m, p->entry) : NULL;
  if (p->entry && (!eg || eg->kind != H3_GRAPH_PROGRAM))
    err(r, prog, RECOMPILE, "program: entry '%s' is not a program of the IR", p->entry);
  for (int i = 0; i < p->n_memory; i++) {
    const h3_graph *g = h3_module_graph(m, p->memory[i].graph);
    const h3_attr *a = g ? h3_graph_attr(g, "arena_bytes") : NULL;
    int64_t arena = a && a->kind == H3_ATTR_INT ? a->i : -1;
    if (!g)
      err(r, get(r, root, "memory", NULL), RECOMPILE, "memory: graph '%s' is not in the IR",
          p->memory[i].graph);
    else if (arena != p->memory[i].arena_bytes) /* read without errors: entry i is item i */
      err(r, get(r, seq_at(r, get(r, root, "memory", NULL), i), "arena_bytes", NULL), RECOMPILE,
          "memory: graph '%s' has arena_bytes %lld, but its IR says %lld", g->name,
          (long long)p->memory[i].arena_bytes, (long long)arena);
  }
  if (r->errors) return;
  h3_diag_init(&tmp); /* the memory plan's check reports at IR spans too */
  h3_plan_check_memory(m, &tmp);
  move_diags(r, &ip, &tmp);
  h3_diag_free(&tmp);
}

/* ---- entry points ------------------------------------------------------------------------------ */
h3_plan *h3_plan_read_text(const char *file, const char *text, size_t len, h3_diag *d) {
  rd r;
  memset(&r, 0, sizeof r);
  r.file = file ? file : "<plan>";
  r.text = text;
  r.len = len;
  r.d = d;
  h3_plan *p = calloc(1, sizeof *p);
  if (!p) {
    h3_span s = {0};
    s.file = r.file;
    h3_diag_error(d, s, H3_HINT_OOM, "out of memory reading the plan");
    return NULL;
  }
  h3_arena_init(&p->arena);
  p->file = r.file;
  r.p = p;
  if (len > H3_PLAN_MAX_BYTES) {
    h3_span s = {0};
    s.file = r.file;
    h3_diag_error(d, s, "h3c refuses to write such a plan; recompile a smaller config",
                  "the plan is %.2f GiB; h3 reads plans of at most %.0f GiB", (double)len / (1 << 30),
                  (double)H3_PLAN_MAX_BYTES / (1 << 30));
    h3_arena_free(&p->arena);
    free(p);
    return NULL;
  }
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) {
    free(p);
    return NULL;
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
  if (!yaml_parser_load(&parser, &r.doc)) {
    h3_span s = at_mark(&r, parser.problem_mark);
    if (parser.error == YAML_MEMORY_ERROR)
      h3_diag_error(d, s, "free memory, or recompile a smaller config",
                    "out of memory parsing the plan (%.1f MiB of YAML)", (double)len / (1 << 20));
    else
      h3_diag_error(d, s, "the plan file is damaged; " RECOMPILE, "YAML syntax error: %s%s%s",
                    parser.problem ? parser.problem : "unknown problem", parser.context ? " " : "",
                    parser.context ? parser.context : "");
    yaml_parser_delete(&parser);
    h3_plan_free(p);
    return NULL;
  }
  yaml_node_t *root = yaml_document_get_root_node(&r.doc);
  yaml_document_t extra;
  bool more = false, bad_tail = false;
  if (root && yaml_parser_load(&parser, &extra)) {
    more = yaml_document_get_root_node(&extra) != NULL;
    yaml_document_delete(&extra);
  } else if (root) {
    bad_tail = true;
    h3_diag_error(d, at_mark(&r, parser.problem_mark), "the plan file is damaged; " RECOMPILE,
                  "YAML syntax error: %s%s%s", parser.problem ? parser.problem : "unknown problem",
                  parser.context ? " " : "", parser.context ? parser.context : "");
    r.errors++;
  }
  yaml_parser_delete(&parser);
  if (bad_tail) {
    /* reported above */
  } else if (!root) {
    h3_span s = {0};
    s.file = r.file;
    h3_diag_error(d, s, "h3exec runs plans written by `h3c compile`", "the file is empty, not an h3 plan");
    r.errors++;
  } else if (root->type != YAML_MAPPING_NODE) {
    err(&r, root, "h3exec runs plans written by `h3c compile`",
        "not an h3 plan: the top level must be a mapping");
  } else if (more) {
    err(&r, root, RECOMPILE, "the file holds more than one YAML document; a plan is one document");
  } else if (read_identity(&r, root)) {
    only_keys(&r, root, top_keys, "the plan");
    read_header(&r, root);
    read_weights(&r, root);
    read_memory(&r, root);
    read_kernels(&r, root);
    read_libcalls(&r, root);
    read_program(&r, root);
    read_ir(&r, root);
  }
  yaml_document_delete(&r.doc);
  if (r.errors) {
    h3_plan_free(p);
    return NULL;
  }
  return p;
}

h3_plan *h3_plan_read_file(const char *path, h3_diag *d) {
  struct stat sb;
  if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > H3_PLAN_MAX_BYTES) {
    h3_span s = {0};
    s.file = path;
    h3_diag_error(d, s, "h3c refuses to write such a plan; recompile a smaller config",
                  "the plan is %.2f GiB; h3 reads plans of at most %.0f GiB",
                  (double)sb.st_size / (1 << 30), (double)H3_PLAN_MAX_BYTES / (1 << 30));
    return NULL;
  }
  size_t len = 0;
  char *text = h3_read_file(path, &len, d);
  if (!text) return NULL;
  h3_plan *p = h3_plan_read_text(path, text, len, d);
  free(text);
  return p;
}
