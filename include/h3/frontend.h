/* frontend.h: the h3 graph-language front end (docs/language.md).
 *
 * Parses a .g source, evaluates its config, shapes and constants, checks every name,
 * type and shape, and builds the typed IR module (include/h3/ir.h), verified. Every
 * problem is a diagnostic in `d` (file:line:col, the source line, a caret, a hint); the
 * functions never crash or abort on any input. The source is registered with the diag
 * here, so h3_diag_print quotes its lines: with h3_frontend_compile the text must
 * outlive `d`.
 */
#ifndef H3_FRONTEND_H
#define H3_FRONTEND_H

#include "h3/ir.h"

/* One `--set key=value`. The key ends at '=' or at the end of the string (so it may
 * point into the "key=value" argument itself). */
typedef struct {
  const char *key;
  int64_t value;
} h3_config_override;

typedef struct {
  const char *config; /* preset name; NULL = the first preset in the file */
  int n_overrides;    /* --set key=value, applied after the preset, before lets */
  const h3_config_override *overrides;
} h3_frontend_options;

/* Parses and checks a .g source and returns the module (NULL on any error; every error
 * is in d). `file` names the source in messages; opt may be NULL (defaults). */
h3_module *h3_frontend_compile(const char *file, const char *text, size_t len,
                               const h3_frontend_options *opt, h3_diag *d);

/* Reads the file (error "cannot read FILE: reason") and calls h3_frontend_compile. The
 * diag keeps the text (for quoting lines) until h3_diag_free. */
h3_module *h3_frontend_load(const char *path, const h3_frontend_options *opt, h3_diag *d);

/* Parses a "key=value" --set argument; on error reports
 * "--set: expected key=INTEGER, got '...'". `out->key` points at the start of `arg`
 * (the key ends at its '='), so arg must outlive the options. */
h3_status h3_config_override_parse(const char *arg, h3_config_override *out, h3_diag *d);

#endif
