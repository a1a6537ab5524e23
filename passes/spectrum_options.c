/* spectrum_options.c: the option texts of the step-skipping passes, with their defaults
 * and ranges (docs/models/accelerations.md §6.4 and §7):
 *   Spectrum: "WARMUP:WINDOW:FLEX" (the first field only) and "key=value" fields, comma
 *   separated: warmup, window, flex, w, m, lam, taylor, tau_steps;
 *   Cache-DiT: "key=value" fields: warmup, threshold, max_consecutive.
 * Every bad field is an error naming the flag, the key and the accepted range.
 */
#include "spectrum.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const h3_span no_span = {0};

h3_spectrum_options h3_spectrum_options_default(void) {
  return (h3_spectrum_options){.warmup = 5, .window = 2.0, .flex = 0.75, .w = 1.0, .m = 4,
                               .lam = 0.1, .taylor = 1, .tau_steps = 50};
}

h3_cache_dit_options h3_cache_dit_options_default(void) {
  return (h3_cache_dit_options){.warmup = 4, .threshold = 0.04, .max_consecutive = 1};
}

/* A number spanning exactly [s, e); returns 0 or -1. */
static int number(const char *s, const char *e, double *out) {
  char buf[64];
  size_t n = (size_t)(e - s);
  if (n == 0 || n >= sizeof buf) return -1;
  memcpy(buf, s, n);
  buf[n] = 0;
  char *end;
  errno = 0;
  double v = strtod(buf, &end);
  if (*end || errno || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

typedef struct {
  const char *key;
  double lo, hi;
  bool integer;
} key_rule;

static h3_status bad(h3_diag *d, const char *where, const char *field, size_t len,
                     const char *hint) {
  h3_diag_error(d, no_span, hint, "%s: bad option '%.*s'", where, (int)len, field);
  return H3_ERR;
}

/* Parses one "key=value" field against rules; stores into vals[rule index]. */
static h3_status field(const char *s, const char *e, const char *where, const key_rule *rules,
                       int n_rules, double *vals, bool *set, h3_diag *d) {
  const char *eq = memchr(s, '=', (size_t)(e - s));
  char hint[200];
  size_t len = (size_t)(e - s);
  if (!eq) {
    size_t n = 0;
    for (int i = 0; i < n_rules && n < sizeof hint; i++)
      n += (size_t)snprintf(hint + n, sizeof hint - n, "%s%s", i ? ", " : "keys: ", rules[i].key);
    return bad(d, where, s, len, hint);
  }
  for (int i = 0; i < n_rules; i++) {
    if (strlen(rules[i].key) != (size_t)(eq - s) || strncmp(rules[i].key, s, (size_t)(eq - s)))
      continue;
    double v;
    if (number(eq + 1, e, &v) || v < rules[i].lo || v > rules[i].hi ||
        (rules[i].integer && v != floor(v))) {
      snprintf(hint, sizeof hint, "%s takes %s in [%g, %g]", rules[i].key,
               rules[i].integer ? "an integer" : "a number", rules[i].lo, rules[i].hi);
      return bad(d, where, s, len, hint);
    }
    vals[i] = v;
    set[i] = true;
    return H3_OK;
  }
  size_t n = 0;
  for (int i = 0; i < n_rules && n < sizeof hint; i++)
    n += (size_t)snprintf(hint + n, sizeof hint - n, "%s%s", i ? ", " : "known keys: ", rules[i].key);
  return bad(d, where, s, len, hint);
}

/* "W:WIN:FLEX" (1 to 3 numbers) into vals[0..2]. */
static h3_status triple(const char *s, const char *e, const char *where, double *vals, bool *set,
                        h3_diag *d) {
  static const char hint[] = "write --spectrum=WARMUP:WINDOW:FLEX (e.g. 11:5:1.0) or "
                             "--spectrum=warmup=11,window=5,flex=1.0";
  const char *p = s;
  for (int i = 0; i < 3 && p <= e; i++) {
    const char *c = memchr(p, ':', (size_t)(e - p));
    const char *end = c ? c : e;
    if (number(p, end, &vals[i])) return bad(d, where, s, (size_t)(e - s), hint);
    set[i] = true;
    if (!c) return H3_OK;
    p = c + 1;
  }
  return bad(d, where, s, (size_t)(e - s), hint);
}

/* Splits text at commas and parses every field. */
static h3_status parse_fields(const char *text, const char *where, const key_rule *rules, int n,
                              double *vals, bool *set, bool allow_triple, h3_diag *d) {
  if (!text || !*text) return H3_OK;
  h3_status st = H3_OK;
  const char *p = text;
  for (int idx = 0;; idx++) {
    const char *c = strchr(p, ',');
    const char *e = c ? c : p + strlen(p);
    if (e == p) {
      st = bad(d, where, text, strlen(text), "separate key=value fields with single commas");
    } else if (allow_triple && idx == 0 && !memchr(p, '=', (size_t)(e - p))) {
      if (triple(p, e, where, vals, set, d) != H3_OK) st = H3_ERR;
    } else if (field(p, e, where, rules, n, vals, set, d) != H3_OK) {
      st = H3_ERR;
    }
    if (!c) break;
    p = c + 1;
  }
  return st;
}

h3_status h3_spectrum_options_parse(const char *text, const char *where, h3_spectrum_options *o,
                                    h3_diag *d) {
  static const key_rule rules[] = {
      {"warmup", 1, 1e6, true}, {"window", 1, 1e6, false},
      {"flex", 0, 1e6, false},  {"w", 0, 1, false},
      {"m", 0, H3_SPECTRUM_MAX_DEGREE, true}, {"lam", 0, 1e12, false},
      {"taylor", 1, H3_SPECTRUM_MAX_TAYLOR, true}, {"tau_steps", 1, 1e6, true},
  };
  enum { N = sizeof rules / sizeof rules[0] };
  double v[N] = {o->warmup, o->window, o->flex, o->w, o->m, o->lam, o->taylor, o->tau_steps};
  bool set[N] = {false};
  if (parse_fields(text, where, rules, N, v, set, true, d) != H3_OK) return H3_ERR;
  /* the triple's fields are range-checked like the keys */
  for (int i = 0; i < 3; i++)
    if (set[i] && (v[i] < rules[i].lo || v[i] > rules[i].hi ||
                   (rules[i].integer && v[i] != floor(v[i])))) {
      char hint[120];
      snprintf(hint, sizeof hint, "%s takes %s in [%g, %g]", rules[i].key,
               rules[i].integer ? "an integer" : "a number", rules[i].lo, rules[i].hi);
      h3_diag_error(d, no_span, hint, "%s: %s = %g is out of range", where, rules[i].key, v[i]);
      return H3_ERR;
    }
  o->warmup = (int)v[0];
  o->window = v[1];
  o->flex = v[2];
  o->w = v[3];
  o->m = (int)v[4];
  o->lam = v[5];
  o->taylor = (int)v[6];
  o->tau_steps = (int)v[7];
  return H3_OK;
}

h3_status h3_cache_dit_options_parse(const char *text, h3_cache_dit_options *o, h3_diag *d) {
  static const key_rule rules[] = {
      {"warmup", 0, 1e6, true}, {"threshold", 0, 1e6, false}, {"max_consecutive", 0, 1e6, true}};
  double v[3] = {o->warmup, o->threshold, o->max_consecutive};
  bool set[3] = {false};
  if (parse_fields(text, "--cache-dit", rules, 3, v, set, false, d) != H3_OK) return H3_ERR;
  o->warmup = (int)v[0];
  o->threshold = v[1];
  o->max_consecutive = (int)v[2];
  return H3_OK;
}
