/* plan_write.c: the plan as YAML text (libyaml's emitter), in the stable key order of
 * docs/plan-format.md.
 *
 * Everything written comes from the h3_plan struct, and the reader fills every field of
 * it, so reading a plan and writing it again gives the same bytes. Kernel sources, the
 * prelude and the IR are literal block scalars; strings that a YAML reader would take
 * for numbers or booleans are double-quoted; integers are decimal. Also the shared
 * helpers of plan_internal.h (type text, quoting rule).
 */
#include "plan_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>


/* ---- shared helpers -------------------------------------------------------------------- */
const char *plan_type_text(h3_arena *a, const h3_type *t) {
  h3_strbuf b;
  h3_strbuf_init(&b);
  h3_type_print(&b, t);
  const char *s = b.oom || !b.data ? NULL : h3_arena_strdup(a, b.data);
  h3_strbuf_free(&b);
  return s;
}

int plan_type_parse(const char *s, h3_type *out) {
  memset(out, 0, sizeof *out);
  const char *br = strchr(s, '[');
  if (!br || br == s || (size_t)(br - s) >= 16) return 0;
  char dt[16];
  memcpy(dt, s, (size_t)(br - s));
  dt[br - s] = 0;
  h3_dtype d;
  if (!h3_dtype_from_name(dt, &d)) return 0;
  out->dtype = d;
  const char *p = br + 1;
  while (*p == ' ') p++;
  if (*p == ']') return p[1] == 0;
  for (;;) {
    if (out->rank >= H3_MAX_RANK || !isdigit((unsigned char)*p)) return 0;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (v < 0 || end == p) return 0;
    out->dims[out->rank++] = v;
    p = end;
    if (*p == ']') return p[1] == 0;
    if (*p != ',') return 0;
    p++;
    while (*p == ' ') p++;
  }
}

bool plan_needs_quotes(const char *s) {
  if (!*s) return true;
  static const char *const words[] = {"true", "false", "yes", "no", "on", "off", "null", "~",
                                      "y", "n"};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++)
    if (strcasecmp(s, words[i]) == 0) return true;
  char *end;
  (void)strtod(s, &end);
  if (*end == 0) return true; /* a number */
  if (isspace((unsigned char)s[0]) || isspace((unsigned char)s[strlen(s) - 1])) return true;
  if (strchr("-?:,[]{}#&*!|>'\"%@`.+", s[0])) return true;
  for (const char *p = s; *p; p++)
    if ((*p == ':' && (p[1] == ' ' || !p[1])) || (*p == ' ' && p[1] == '#') || (unsigned char)*p < 0x20)
      return true;
  return false;
}

/* ---- emitter wrapper ----------------------------------------------------------------------- */
typedef struct {
  yaml_emitter_t e;
  int failed;
} yw;

static int out_handler(void *data, unsigned char *buffer, size_t size) {
  h3_strbuf *b = data;
  h3_strbuf_appendn(b, (const char *)buffer, size);
  return !b->oom;
}

static void emit(yw *w, yaml_event_t *ev, int ok) {
  if (w->failed) {
    if (ok) yaml_event_delete(ev);
    return;
  }
  if (!ok || !yaml_emitter_emit(&w->e, ev)) w->failed = 1;
}

static void w_scalar(yw *w, const char *s, yaml_scalar_style_t style) {
  yaml_event_t ev;
  int ok = yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), 1, 1, style);
  emit(w, &ev, ok);
}

static void w_str(yw *w, const char *s) {
  if (!s) s = "";
  w_scalar(w, s, plan_needs_quotes(s) ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_PLAIN_SCALAR_STYLE);
}

static void w_int(yw *w, int64_t v) {
  char buf[32];
  snprintf(buf, sizeof buf, "%lld", (long long)v);
  w_scalar(w, buf, YAML_PLAIN_SCALAR_STYLE);
}

static void w_block(yw *w, const char *s) { w_scalar(w, s ? s : "", YAML_LITERAL_SCALAR_STYLE); }

static void w_map(yw *w, bool flow) {
  yaml_event_t ev;
  int ok = yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
                                               flow ? YAML_FLOW_MAPPING_STYLE : YAML_BLOCK_MAPPING_STYLE);
  emit(w, &ev, ok);
}

static void w_map_end(yw *w) {
  yaml_event_t ev;
  emit(w, &ev, yaml_mapping_end_event_initialize(&ev));
}

static void w_seq(yw *w, bool flow) {
  yaml_event_t ev;
  int ok = yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                                flow ? YAML_FLOW_SEQUENCE_STYLE : YAML_BLOCK_SEQUENCE_STYLE);
  emit(w, &ev, ok);
}

static void w_seq_end(yw *w) {
  yaml_event_t ev;
  emit(w, &ev, yaml_sequence_end_event_initialize(&ev));
}

static void kv_str(yw *w, const char *k, const char *v) {
  w_scalar(w, k, YAML_PLAIN_SCALAR_STYLE);
  w_str(w, v);
}

static void kv_int(yw *w, const char *k, int64_t v) {
  w_scalar(w, k, YAML_PLAIN_SCALAR_STYLE);
  w_int(w, v);
}

static void kv_strs(yw *w, const char *k, int n, const char *const *v) {
  w_scalar(w, k, YAML_PLAIN_SCALAR_STYLE);
  w_seq(w, true);
  for (int i = 0; i < n; i++) w_str(w, v[i]);
  w_seq_end(w);
}

static void kv_ints(yw *w, const char *k, int n, const int64_t *v) {
  w_scalar(w, k, YAML_PLAIN_SCALAR_STYLE);
  w_seq(w, true);
  for (int i = 0; i < n; i++) w_int(w, v[i]);
  w_seq_end(w);
}

/* ---- sections -------------------------------------------------------------------------------- */
static void write_header(yw *w, const h3_plan *p) {
  kv_str(w, "format", H3_PLAN_FORMAT);
  kv_int(w, "format_version", H3_PLAN_FORMAT_VERSION);
  kv_str(w, "h3_version", p->h3_version);
  kv_str(w, "model", p->model);
  kv_str(w, "source", p->source);
  w_scalar(w, "config", YAML_PLAIN_SCALAR_STYLE);
  w_map(w, false);
  kv_str(w, "name", p->config);
  w_scalar(w, "values", YAML_PLAIN_SCALAR_STYLE);
  w_map(w, false);
  for (int i = 0; i < p->n_config; i++) kv_int(w, p->config_entries[i].key, p->config_entries[i].value);
  w_map_end(w);
  w_map_end(w);
  kv_str(w, "quality", h3_tier_name(p->quality));
  kv_strs(w, "flags", p->n_flags, p->flags);
  kv_strs(w, "passes", p->n_passes, p->passes);
  w_scalar(w, "target", YAML_PLAIN_SCALAR_STYLE);
  w_map(w, false);
  kv_str(w, "arch", p->arch);
  kv_str(w, "cuda", p->cuda_version);
  kv_str(w, "nvrtc", p->nvrtc_version);
  kv_str(w, "cublaslt", p->cublaslt_version);
  kv_str(w, "kernel_cache_key", p->key_scheme);
  w_map_end(w);
}

static void write_weights(yw *w, const h3_plan *p) {
  w_scalar(w, "weights", YAML_PLAIN_SCALAR_STYLE);
  w_map(w, false);
  kv_int(w, "count", p->n_weights);
  kv_int(w, "bytes", p->weight_bytes);
  w_scalar(w, "tensors", YAML_PLAIN_SCALAR_STYLE);
  w_seq(w, false);
  for (int64_t i = 0; i < p->n_weights; i++) {
    const h3_plan_weight *t = &p->weights[i];
    w_map(w, true);
    kv_str(w, "name", t->name);
    kv_str(w, "dtype", h3_dtype_name(t->type.dtype));
    kv_ints(w, "shape", t->type.rank, t->type.dims);
    kv_int(w, "bytes", t->bytes);
    kv_str(w, "param", t->param);
    kv_int(w, "index", t->index);
    w_map_end(w);
  }
  w_seq_end(w);
  w_map_end(w);
}

static void write_memory(yw *w, const h3_plan *p) {
  w_scalar(w, "memory", YAML_PLAIN_SCALAR_STYLE);
  w_seq(w, false);
  for (int i = 0; i < p->n_memory; i++) {
    w_map(w, true);
    kv_str(w, "graph", p->memory[i].graph);
    kv_int(w, "arena_bytes", p->memory[i].arena_bytes);
    kv_int(w, "peak_bytes", p->memory[i].peak_bytes);
    w_map_end(w);
  }
  w_seq_end(w);
}

static void write_kernels(yw *w, const h3_plan *p) {
  w_scalar(w, "prelude", YAML_PLAIN_SCALAR_STYLE);
  w_map(w, false);
  kv_str(w, "sha256", p->prelude_sha256);
  w_scalar(w, "source", YAML_PLAIN_SCALAR_STYLE);
  w_block(w, p->prelude);
  w_map_end(w);
  w_scalar(w, "translation_units", YAML_PLAIN_SCALAR_STYLE);
  w_seq(w, false);
  for (int i = 0; i < p->n_tus; i++) {
    const h3_plan_tu *u = &p->tus[i];
    w_map(w, false);
    kv_int(w, "id", i);
    kv_str(w, "tier", h3_tier_name(u->tier));
    kv_strs(w, "options", u->n_options, u->options);
    w_scalar(w, "kernels", YAML_PLAIN_SCALAR_STYLE);
    w_seq(w, false);
    for (int j = 0; j < u->n_kernels; j++) w_str(w, p->kernels[u->kernels[j]].k.name);
    w_seq_end(w);
    w_map_end(w);
  }
  w_seq_end(w);
  w_scalar(w, "kernels", YAML_PLAIN_SCALAR_STYLE);
  w_seq(w, false);
  for (int i = 0; i < p->n_kernels; i++) {
    const h3_plan_kernel *pk = &p->kernels[i];
    const h3_kernel *k = &pk->k;
    w_map(w, false);
    kv_str(w, "name", k->name);
    kv_str(w, "op", k->op);
    kv_str(w, "tier", h3_tier_name(k->tier));
    kv_int(w, "tu", pk->tu);
    kv_int(w, "uses", pk->uses);
    kv_ints(w, "grid", 3, k->grid);
    kv_ints(w, "block", 3, k->block);
    kv_int(w, "shared_bytes", k->shared_bytes);
    w_scalar(w, "inplace", YAML_PLAIN_SCALAR_STYLE);
    w_scalar(w, k->inplace ? "true" : "false", YAML_PLAIN_SCALAR_STYLE);
    kv_strs(w, "args", k->n_args, k->args);
    const h3_plan_tu *u = pk->tu >= 0 && pk->tu < p->n_tus ? &p->tus[pk->tu] : NULL;
    kv_strs(w, "options", u ? u->n_options : 0, u ? u->options : NULL);
    kv_str(w, "sha256", k->sha256);
    w_scalar(w, "source", YAML_PLAIN_SCALAR_STYLE);
    w_block(w, k->source);
    w_map_end(w);
  }
  w_seq_end(w);
}

static void write_libcalls(yw *w, const h3_plan *p) {
  w_scalar(w, "library_calls", YAML_PLAIN_SCALAR_STYLE);
  w_seq(w, false);
  h3_arena tmp;
  h3_arena_init(&tmp);
  for (int i = 0; i < p->n_libcalls; i++) {
    const h3_plan_libcall *c = &p->libcalls[i];
    w_map(w, false);
    kv_str(w, "name", c->name);
    kv_str(w, "kind", c->kind);
    kv_str(w, "op", c->op);
    kv_str(w, "graph", c->graph);
    const char *types[H3_KERNEL_MAX_ARGS];
    int n = c->n_operands < H3_KERNEL_MAX_ARGS ? c->n_operands : H3_KERNEL_MAX_ARGS;
    for (int j = 0; j < n; j++) types[j] = plan_type_text(&tmp, &c->operands[j]);
    kv_strs(w, "operands", n, types);
    n = c->n_results < H3_KERNEL_MAX_ARGS ? c->n_results : H3_KERNEL_MAX_ARGS;
    for (int j = 0; j < n; j++) types[j] = plan_type_text(&tmp, &c->results[j]);
    kv_strs(w, "results", n, types);
    w_scalar(w, "attrs", YAML_PLAIN_SCALAR_STYLE);
    w_map(w, true);
    for (int j = 0; j < c->n_attrs; j++) kv_str(w, c->attrs[j].key, c->attrs[j].value);
    w_map_end(w);
    w_map_end(w);
  }
  h3_arena_free(&tmp);
  w_seq_end(w);
}

h3_status h3_plan_to_yaml(const h3_plan *p, h3_strbuf *out) {
  yw w;
  memset(&w, 0, sizeof w);
  if (!yaml_emitter_initialize(&w.e)) return H3_ERR;
  yaml_emitter_set_output(&w.e, out_handler, out);
  yaml_emitter_set_width(&w.e, -1);
  yaml_emitter_set_unicode(&w.e, 1);
  yaml_event_t ev;
  emit(&w, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
  emit(&w, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
  w_map(&w, false);
  write_header(&w, p);
  write_weights(&w, p);
  write_memory(&w, p);
  write_kernels(&w, p);
  write_libcalls(&w, p);
  w_scalar(&w, "program", YAML_PLAIN_SCALAR_STYLE);
  w_map(&w, false);
  kv_str(&w, "entry", p->entry ? p->entry : "");
  kv_strs(&w, "graphs", p->n_graphs, p->graphs);
  w_map_end(&w);
  w_scalar(&w, "ir", YAML_PLAIN_SCALAR_STYLE);
  w_block(&w, p->ir_text);
  w_map_end(&w);
  emit(&w, &ev, yaml_document_end_event_initialize(&ev, 1));
  emit(&w, &ev, yaml_stream_end_event_initialize(&ev));
  if (!w.failed && !yaml_emitter_flush(&w.e)) w.failed = 1;
  yaml_emitter_delete(&w.e);
  return w.failed || out->oom ? H3_ERR : H3_OK;
}

h3_status h3_plan_write_file(const h3_plan *p, const char *path, h3_diag *d) {
  h3_strbuf b;
  h3_strbuf_init(&b);
  h3_status st = h3_plan_to_yaml(p, &b);
  if (st != H3_OK) {
    h3_span s = {0};
    s.file = path;
    h3_diag_error(d, s, H3_HINT_OOM, "cannot write the plan: out of memory while formatting it");
  } else if (b.len > H3_PLAN_MAX_BYTES) {
    h3_span s = {0};
    s.file = path;
    h3_diag_error(d, s, "compile a smaller config (fewer layers, smaller --set values)",
                  "the plan would be %.2f GiB of YAML; h3 reads plans of at most %.0f GiB",
                  (double)b.len / (1 << 30), (double)H3_PLAN_MAX_BYTES / (1 << 30));
    st = H3_ERR;
  } else {
    st = h3_write_file_atomic(path, b.data ? b.data : "", b.len, d);
  }
  h3_strbuf_free(&b);
  return st;
}
