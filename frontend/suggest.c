/* suggest.c: "did you mean ...?" hints for unknown names.
 *
 * The distance is Levenshtein's (insert, delete, substitute; a swap of two neighbours
 * counts 1 as in Damerau's variant), on names of at most 64 bytes. A candidate is close
 * enough when the distance is at most 1 for names of up to 3 bytes, 2 up to 6, else 3,
 * and below the length of the wanted name (so short names never match everything).
 */
#include "sema.h"

#include <string.h>

#define MAXN 64

static int edit_distance(const char *a, const char *b) {
  int la = (int)strlen(a), lb = (int)strlen(b);
  if (la > MAXN || lb > MAXN) return 1000;
  int d[MAXN + 1][MAXN + 1];
  for (int i = 0; i <= la; i++) d[i][0] = i;
  for (int j = 0; j <= lb; j++) d[0][j] = j;
  for (int i = 1; i <= la; i++)
    for (int j = 1; j <= lb; j++) {
      int c = a[i - 1] == b[j - 1] ? 0 : 1;
      int v = d[i - 1][j - 1] + c;
      if (d[i - 1][j] + 1 < v) v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
        v = d[i - 2][j - 2] + 1;
      d[i][j] = v;
    }
  return d[la][lb];
}

void suggest_init(suggest_t *g, const char *want) {
  g->want = want;
  g->best = NULL;
  g->dist = 1000;
}

void suggest_try(suggest_t *g, const char *cand) {
  if (!cand || !g->want || strcmp(cand, g->want) == 0) return;
  int d = edit_distance(g->want, cand);
  if (d < g->dist || (d == g->dist && g->best && strcmp(cand, g->best) < 0)) {
    g->dist = d;
    g->best = cand;
  }
}

const char *suggest_hint(h3_arena *a, const suggest_t *g) {
  if (!g->best) return NULL;
  int len = (int)strlen(g->want);
  int limit = len <= 3 ? 1 : len <= 6 ? 2 : 3;
  if (g->dist > limit || g->dist >= len) return NULL;
  return h3_arena_printf(a, "did you mean '%s'?", g->best);
}

static const char *const builtins[] = {"split", "zeros", "full", "rows", "ceildiv", "min", "max",
                                       "sqrt", NULL};

static void try_table(suggest_t *g, const h3_strmap *t) {
  for (size_t i = 0; i < t->cap; i++)
    if (h3_strmap_key(t, i)) suggest_try(g, h3_strmap_key(t, i));
}

const char *sema_suggest_name(sema *S, const char *name, bool konst) {
  suggest_t g;
  suggest_init(&g, name);
  for (int i = S->frame; i < S->n_env; i++)
    if (!konst || S->env[i].val.kind == SV_INT || S->env[i].val.kind == SV_FLOAT)
      suggest_try(&g, S->env[i].name);
  try_table(&g, &S->consts);
  if (!konst) {
    try_table(&g, &S->names);
    try_table(&g, &S->calls);
    for (int c = 1; c < H3_OPCODE_COUNT; c++) suggest_try(&g, h3_opcode_name((h3_opcode)c));
  }
  for (int i = 0; builtins[i]; i++) suggest_try(&g, builtins[i]);
  for (int t = 0; t < H3_DTYPE_COUNT; t++) suggest_try(&g, h3_dtype_name((h3_dtype)t));
  return suggest_hint(S->tmp, &g);
}
