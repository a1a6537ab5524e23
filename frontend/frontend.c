/* frontend.c: the public entry points of the front end (include/h3/frontend.h).
 *
 * h3_frontend_compile registers the source with the diag, parses it into an AST in a
 * temporary arena, runs semantic analysis, re-homes every source span of the module onto
 * a file name owned by the module (the parse arena is freed on return), and verifies the
 * module; errors found by the verifier are front-end bugs but are reported all the same.
 */
#include "h3/frontend.h"

#include "parse.h"
#include "sema.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char *from, *to;
} span_fix;

static void fix(h3_span *s, const span_fix *f) {
  if (s->file == f->from) s->file = f->to;
}

static int fix_op(h3_op *op, void *ctx) {
  fix(&op->span, ctx);
  for (int i = 0; i < op->n_results; i++) fix(&op->results[i]->span, ctx);
  for (int r = 0; r < op->n_regions; r++)
    for (int i = 0; i < op->regions[r].n_args; i++) fix(&op->regions[r].args[i]->span, ctx);
  return 0;
}

/* Points every span of m that names `from` (the parse arena's copy) at m->source. */
static void rehome_spans(h3_module *m, const char *from) {
  span_fix f = {from, m->source};
  for (int i = 0; i < m->n_params; i++) {
    fix(&m->params[i]->span, &f);
    fix(&m->params[i]->value->span, &f);
  }
  for (int g = 0; g < m->n_graphs; g++) {
    h3_graph *gr = m->graphs[g];
    fix(&gr->span, &f);
    for (int i = 0; i < gr->n_inputs; i++) fix(&gr->inputs[i]->span, &f);
  }
  h3_module_walk(m, fix_op, &f);
}

/* Parses, checks and verifies; the source is already registered with d. */
static h3_module *compile(const char *file, const char *text, size_t len,
                          const h3_frontend_options *opt, h3_diag *d) {
  if (len > INT_MAX / 2) {
    h3_diag_error(d, (h3_span){0}, "split the model: h3c reads sources of up to 1 GiB",
                  "%s: the source is too large (%zu bytes)", file, len);
    return NULL;
  }
  h3_arena tmp;
  h3_arena_init(&tmp);
  h3_parse_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.arena = &tmp;
  ctx.d = d;
  ctx.file = h3_arena_strdup(&tmp, file);
  h3_module *m = NULL;
  if (!ctx.file) {
    h3_diag_error(d, (h3_span){0}, "free memory and run h3c again", "out of memory while parsing %s", file);
  } else if (h3_parse_text(&ctx, text, len) == H3_OK) {
    m = sema_run(d, &tmp, ctx.file, text, len, &ctx.out, opt);
    if (m) {
      rehome_spans(m, ctx.file);
      if (h3_verify_module(m, d) != H3_OK) {
        h3_diag_error(d, (h3_span){0}, "this is a bug of h3c's front end; please report it with the source",
                      "internal error: the IR built from %s does not verify", file);
        h3_module_free(m);
        m = NULL;
      }
    }
  }
  h3_arena_free(&tmp);
  return m;
}

h3_module *h3_frontend_compile(const char *file, const char *text, size_t len,
                               const h3_frontend_options *opt, h3_diag *d) {
  if (!file) file = "<input>";
  if (!text) {
    text = "";
    len = 0;
  }
  h3_diag_add_source(d, file, text, len);
  return compile(file, text, len, opt, d);
}

h3_module *h3_frontend_load(const char *path, const h3_frontend_options *opt, h3_diag *d) {
  size_t len = 0;
  char *text = h3_read_file(path, &len, d);
  if (!text) return NULL;
  h3_diag_add_source_owned(d, path, text, len); /* the diag quotes from it until freed */
  return compile(path, text, len, opt, d);
}

h3_status h3_config_override_parse(const char *arg, h3_config_override *out, h3_diag *d) {
  const char *eq = arg ? strchr(arg, '=') : NULL;
  bool ok = eq && eq > arg;
  for (const char *p = arg; ok && p < eq; p++) {
    bool alpha = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_';
    bool digit = *p >= '0' && *p <= '9';
    if (!alpha && !(digit && p > arg)) ok = false;
  }
  long long v = 0;
  if (ok) {
    char *end = NULL;
    errno = 0;
    v = strtoll(eq + 1, &end, 10);
    if (errno == ERANGE || end == eq + 1 || *end != 0 || eq[1] == ' ') ok = false;
  }
  if (!ok) {
    h3_diag_error(d, (h3_span){0}, "for example: --set layers=4", "--set: expected key=INTEGER, got '%s'",
                  arg ? arg : "");
    return H3_ERR;
  }
  out->key = arg; /* the key ends at the '=' */
  out->value = v;
  return H3_OK;
}
