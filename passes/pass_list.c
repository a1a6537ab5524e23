/* pass_list.c: turns pipeline options into the ordered list of passes to run.
 *
 * Owns the comma-list syntax of --passes / --disable-pass / --enable-pass /
 * --print-ir-after / --report (names separated by commas, blanks around a name ignored,
 * empty names rejected), the nearest-name hint for unknown names, the tier gate of
 * explicitly listed passes, the `requires` check and the rule that only verify follows
 * memory-plan. Every problem is an error in the diag naming the flag; all of them are
 * reported before anything runs.
 */
#include "pass_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const h3_span no_span = {0};

/* ---- names ------------------------------------------------------------------------------ */
/* Edit distance (insert, delete, substitute) of two short strings; large for long ones. */
static int edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63) return 1000;
  int row[64];
  for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int up = row[j];
      int best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb];
}

const char *h3_pass_nearest_name(const char *s) {
  const char *best = NULL;
  int best_d = 1000;
  size_t ls = strlen(s);
  int limit = ls / 3 > 2 ? (int)(ls / 3) : 2;
  for (int i = 0; i < h3_pass_count(); i++) {
    const char *name = h3_pass_at(i)->name;
    int d = edit_distance(s, name);
    if (d <= limit && d < best_d) {
      best = name;
      best_d = d;
    }
  }
  return best;
}

/* The hint for a name that is a part of longer names ("fusion"): every such name, in table
 * order (at least 3 characters; 0 when none). */
static int containing(const char *s, char *hint, size_t cap) {
  int n = 0;
  size_t at = 0;
  for (int i = 0; strlen(s) >= 3 && i < h3_pass_count(); i++) {
    const char *name = h3_pass_at(i)->name;
    if (!strstr(name, s)) continue;
    int w = snprintf(hint + at, cap - at, "%s'%s'", n ? ", " : "", name);
    if (w > 0 && (size_t)w < cap - at) at += (size_t)w;
    n++;
  }
  return n;
}

static void unknown_pass(h3_diag *d, const char *name, const char *flag) {
  const char *near = h3_pass_nearest_name(name);
  char names[400], hint[480];
  int n = near ? 0 : containing(name, names, sizeof names);
  if (near)
    snprintf(hint, sizeof hint, "did you mean '%s'?", near);
  else if (n == 1)
    snprintf(hint, sizeof hint, "did you mean %s?", names);
  else if (n > 1)
    snprintf(hint, sizeof hint, "did you mean one of %s?", names);
  else
    snprintf(hint, sizeof hint, "`h3c passes` lists the registered passes");
  h3_diag_error(d, no_span, hint, "unknown pass '%s' in %s", name, flag);
}

/* ---- comma lists ------------------------------------------------------------------------ */
typedef struct {
  int n;
  char **names; /* malloc'd, each malloc'd */
} name_list;

static void name_list_free(name_list *l) {
  for (int i = 0; i < l->n; i++) free(l->names[i]);
  free(l->names);
  l->n = 0;
  l->names = NULL;
}

/* Splits "a, b,c" into names; reports empty entries. Returns H3_ERR on a syntax error or
 * when out of memory. */
static h3_status name_list_parse(const char *text, const char *flag, name_list *out, h3_diag *d) {
  out->n = 0;
  out->names = NULL;
  if (!text) return H3_OK;
  size_t cap = 1;
  for (const char *p = text; *p; p++) cap += (*p == ',');
  out->names = calloc(cap, sizeof *out->names);
  if (!out->names) {
    h3_diag_error(d, no_span, H3_HINT_OOM, "out of memory while reading %s", flag);
    return H3_ERR;
  }
  const char *p = text;
  for (;;) {
    const char *end = strchr(p, ',');
    if (!end) end = p + strlen(p);
    const char *a = p, *b = end;
    while (a < b && isspace((unsigned char)*a)) a++;
    while (b > a && isspace((unsigned char)b[-1])) b--;
    if (a == b) {
      h3_diag_error(d, no_span, "separate pass names with single commas, e.g. dce,memory-plan",
                    "empty pass name in %s '%s'", flag, text);
      name_list_free(out);
      return H3_ERR;
    }
    char *name = malloc((size_t)(b - a) + 1);
    if (!name) {
      h3_diag_error(d, no_span, H3_HINT_OOM, "out of memory while reading %s", flag);
      name_list_free(out);
      return H3_ERR;
    }
    memcpy(name, a, (size_t)(b - a));
    name[b - a] = 0;
    out->names[out->n++] = name;
    if (!*end) break;
    p = end + 1;
  }
  return H3_OK;
}

static bool name_list_has(const name_list *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->names[i], name) == 0) return true;
  return false;
}

/* The tier gate of a pass that flag names explicitly: an error unless o's tier admits it. */
static bool tier_admits(const h3_pass *p, const h3_pass_options *o, const char *flag, h3_diag *d) {
  if (p->min_tier <= o->tier) return true;
  char hint[160];
  snprintf(hint, sizeof hint, "add --quality %s, or drop '%s' from %s", h3_tier_name(p->min_tier),
           p->name, flag);
  h3_diag_error(d, no_span, hint, "pass '%s' needs --quality %s or higher (now %s)", p->name,
                h3_tier_name(p->min_tier), h3_tier_name(o->tier));
  return false;
}

/* ---- the list --------------------------------------------------------------------------- */
/* The `requires` check; `listed`: the list came from --passes (else from the table, where
 * a missing pass was disabled or not enabled). */
static h3_status check_requires(const h3_pass *const *list, int n, bool listed, h3_diag *d) {
  h3_status st = H3_OK;
  for (int i = 0; i < n; i++) {
    for (int r = 0; r < H3_PASS_MAX_REQUIRES && list[i]->requires[r]; r++) {
      const char *need = list[i]->requires[r];
      bool found = false;
      for (int j = 0; j < i && !found; j++) found = strcmp(list[j]->name, need) == 0;
      if (found) continue;
      bool later = false;
      for (int j = i + 1; j < n && !later; j++) later = strcmp(list[j]->name, need) == 0;
      char hint[200];
      if (later)
        snprintf(hint, sizeof hint, "move '%s' before '%s' in --passes", need, list[i]->name);
      else if (listed)
        snprintf(hint, sizeof hint, "add '%s' before '%s' in --passes (or stop disabling it)", need,
                 list[i]->name);
      else
        snprintf(hint, sizeof hint, "add --enable-pass %s (or stop disabling it)", need);
      h3_diag_error(d, no_span, hint, "pass '%s' requires pass '%s' to run before it",
                    list[i]->name, need);
      st = H3_ERR;
    }
  }
  return st;
}

/* memory-plan assigns offsets for the IR it sees: a later pass that changes the IR would
 * leave them stale (values overlapping, which the plan reader refuses), so only verify may
 * follow it. */
static h3_status check_memory_plan_last(const h3_pass *const *list, int n, h3_diag *d) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n && list[i] == &h3_pass_memory_plan; j++)
      if (list[j] != &h3_pass_verify) {
        h3_diag_error(d, no_span, "put memory-plan last in --passes (only verify may follow it)",
                      "pass '%s' runs after memory-plan, whose offsets hold only for the IR it "
                      "planned", list[j]->name);
        return H3_ERR;
      }
  return H3_OK;
}

/* The `requires` check and memory-plan's place; `listed` as for check_requires. */
static h3_status check_list(const h3_pass *const *list, int n, bool listed, h3_diag *d) {
  h3_status st = check_requires(list, n, listed, d);
  return check_memory_plan_last(list, n, d) == H3_OK ? st : H3_ERR;
}

h3_status h3_pass_list_check(const h3_pass *const *list, int n, h3_diag *d) {
  return check_list(list, n, true, d);
}

static h3_status push(const h3_pass **out, int cap, int *n, const h3_pass *p, h3_diag *d) {
  if (*n >= cap) {
    h3_diag_error(d, no_span, "split the pipeline into several h3c opt runs",
                  "too many passes in one pipeline (at most %d)", cap);
    return H3_ERR;
  }
  out[(*n)++] = p;
  return H3_OK;
}

h3_status h3_pass_pipeline_resolve(const h3_pass_options *o, const h3_pass **out, int cap, int *n,
                                   h3_diag *d) {
  *n = 0;
  name_list chosen = {0}, disabled = {0}, printed = {0}, enabled = {0}, reported = {0};
  h3_status st = H3_OK;
  if (name_list_parse(o->passes, "--passes", &chosen, d) != H3_OK ||
      name_list_parse(o->disabled, "--disable-pass", &disabled, d) != H3_OK ||
      name_list_parse(o->print_ir_after, "--print-ir-after", &printed, d) != H3_OK ||
      name_list_parse(o->enable, "--enable-pass", &enabled, d) != H3_OK ||
      name_list_parse(o->report_passes, "--report", &reported, d) != H3_OK) {
    st = H3_ERR;
    goto done;
  }
  for (int i = 0; i < disabled.n; i++)
    if (!h3_pass_find(disabled.names[i])) {
      unknown_pass(d, disabled.names[i], "--disable-pass");
      st = H3_ERR;
    }
  for (int i = 0; i < reported.n; i++)
    if (!h3_pass_find(reported.names[i])) {
      unknown_pass(d, reported.names[i], "--report");
      st = H3_ERR;
    }
  for (int i = 0; i < enabled.n && !o->passes; i++) {
    const h3_pass *p = h3_pass_find(enabled.names[i]);
    if (!p) {
      unknown_pass(d, enabled.names[i], "--enable-pass");
      st = H3_ERR;
    } else if (!tier_admits(p, o, "--enable-pass", d)) {
      st = H3_ERR;
    } else if (p->in_default_pipeline) {
      h3_diag_warning(d, no_span, "`h3c passes` shows the default pipeline of each --quality",
                      "--enable-pass names '%s', which the default pipeline runs already", p->name);
    }
  }
  bool print_all = printed.n == 1 && strcmp(printed.names[0], "all") == 0;
  for (int i = 0; i < printed.n && !print_all; i++)
    if (!h3_pass_find(printed.names[i])) {
      unknown_pass(d, printed.names[i], "--print-ir-after");
      st = H3_ERR;
    }

  if (o->passes) {
    for (int i = 0; i < chosen.n; i++) {
      const h3_pass *p = h3_pass_find(chosen.names[i]);
      if (!p) {
        unknown_pass(d, chosen.names[i], "--passes");
        st = H3_ERR;
        continue;
      }
      if (!tier_admits(p, o, "--passes", d)) {
        st = H3_ERR;
        continue;
      }
      if (name_list_has(&disabled, p->name)) continue;
      if (st == H3_OK && push(out, cap, n, p, d) != H3_OK) st = H3_ERR;
    }
  } else { /* the table (verify comes first), then verify again on the result */
    for (int i = 0; i < h3_pass_count() && st == H3_OK; i++) {
      const h3_pass *p = h3_pass_at(i);
      bool on = p->in_default_pipeline || name_list_has(&enabled, p->name);
      if (!on || p->min_tier > o->tier) continue;
      if (name_list_has(&disabled, p->name)) continue;
      if (push(out, cap, n, p, d) != H3_OK) st = H3_ERR;
    }
    if (st == H3_OK && !name_list_has(&disabled, h3_pass_verify.name) &&
        push(out, cap, n, &h3_pass_verify, d) != H3_OK)
      st = H3_ERR;
  }
  if (st != H3_OK) goto done;
  for (int i = 0; i < printed.n && !print_all; i++) {
    bool runs = false;
    for (int j = 0; j < *n && !runs; j++) runs = strcmp(out[j]->name, printed.names[i]) == 0;
    if (!runs)
      h3_diag_warning(d, no_span, "`h3c passes` shows the pipeline of each --quality",
                      "--print-ir-after names '%s', which does not run in this pipeline",
                      printed.names[i]);
  }
  st = check_list(out, *n, o->passes != NULL, d);
done:
  name_list_free(&chosen);
  name_list_free(&disabled);
  name_list_free(&printed);
  name_list_free(&enabled);
  name_list_free(&reported);
  if (st != H3_OK) *n = 0;
  return st;
}
