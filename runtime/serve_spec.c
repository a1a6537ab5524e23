/* serve_spec.c: speculative serving with DSpark (docs/models/minimax_m3_1.md §5.3).
 *
 * A running request holds L committed tokens (prompt and output but the newest) whose target
 * K/V/IK and draft Kd/Vd are cached at positions 0 .. L-1, and its newest token, the bonus b,
 * at position L (not cached). A round: one serve_draft call proposes d1 .. dgamma from b for
 * every running request (row r of the decode rows: draft rows r * gamma ..); one serve_verify
 * call runs the rows [b, d1 .. dgamma] of every request at L .. L+gamma
 * (target K/V written, the acceptance on the device: spec_accept's n accepted draft tokens
 * and the n + 1 tokens emitted, greedy or by rejection sampling at the request's
 * temperature; the draft K/V of every row committed); the request takes the emitted tokens
 * (EOS and max_new_tokens cut the list short). Its L grows by n + 1 and the last emitted
 * token is the next bonus. Verify rows past the accepted ones leave stale K/V at
 * positions >= the new L, which the next verify writes before any row reads them.
 *
 * Verify rows: request row r (its decode row) owns verify rows r * (gamma + 1) ..; padding
 * rows are token 0 at position 0 through an all-zero table (page 0, as serve_decode's); a
 * padding draft row has bonus 0, no context and an all-zero table. */
#include "serve_engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t verify_rows(const engine *e) { return e->rows * (e->gamma + 1); }

static h3_status bad_graph(engine *e, const call_args *c, const char *what) {
  h3_diag_error(e->d, c->g->span, "compile the plan from this h3's models/minimax_m3_1.g",
                "graph '%s': %s", c->g->name, what);
  return H3_ERR;
}

h3_status serve_spec_setup(engine *e, const h3_module *m) {
  static const char *const sp[] = {"tokens", "pos0", "n_valid", "page_table", "temperature",
                                   "seed", "k_cache", "v_cache", "ik_cache", "kd_cache",
                                   "vd_cache"};
  static const char *const sd[] = {"bonus", "ctx_len", "page_table", "kd_cache", "vd_cache"};
  /* the draft's inputs reuse the decode rows' images: bonus h_tokens, ctx_len h_pos, tables
     h_table */
  static const char *const sv[] = {"tokens", "pos", "page_table", "temperature", "seed",
                                   "k_cache", "v_cache", "ik_cache", "kd_cache", "vd_cache"};
  if (serve_setup_call(e, m, "serve_prefill_spec", sp, 11, &e->sp) != H3_OK ||
      serve_setup_call(e, m, "serve_draft", sd, 5, &e->sd) != H3_OK ||
      serve_setup_call(e, m, "serve_verify", sv, 10, &e->sv) != H3_OK)
    return H3_ERR;
  e->gamma = h3_module_config(m, "gamma", 0);
  const h3_value *vt = e->sv.g->inputs[0];
  if (e->gamma < 1 || vt->type.rank != 1 || vt->type.dims[0] != verify_rows(e))
    return bad_graph(e, &e->sv, "its rows must be the decode rows (seqs) times gamma + 1");
  if (e->o->force_accept > e->gamma + 1) {
    char hint[96];
    snprintf(hint, sizeof hint, "give at most %lld (gamma + 1)", (long long)e->gamma + 1);
    h3_diag_error(e->d, (h3_span){0}, hint,
                  "--spec-force-accept %lld: a round accepts at most gamma + 1 tokens",
                  (long long)e->o->force_accept);
    return H3_ERR;
  }
  int64_t V = verify_rows(e);
  e->v_tokens = calloc((size_t)V, sizeof *e->v_tokens);
  e->v_pos = calloc((size_t)V, sizeof *e->v_pos);
  e->v_next = calloc((size_t)V, sizeof *e->v_next); /* the emitted tokens */
  e->v_margin = calloc((size_t)V, sizeof *e->v_margin);
  e->v_n = calloc((size_t)e->rows, sizeof *e->v_n);
  e->v_draft = calloc((size_t)(e->rows * e->gamma), sizeof *e->v_draft);
  e->st->accept_hist = calloc((size_t)e->gamma + 1, sizeof *e->st->accept_hist);
  if (!e->v_tokens || !e->v_pos || !e->v_next || !e->v_margin ||
      !e->v_draft || !e->v_n || !e->st->accept_hist)
    return H3_ERR;
  e->st->speculative = true;
  e->st->gamma = e->gamma;
  e->st->forced_acceptance = e->o->force_accept;
  return H3_OK;
}

void serve_spec_free(engine *e) {
  if (e->sp.g) serve_free_call(e, &e->sp);
  if (e->sd.g) serve_free_call(e, &e->sd);
  if (e->sv.g) serve_free_call(e, &e->sv);
  free(e->v_tokens);
  free(e->v_pos);
  free(e->v_next);
  free(e->v_margin);
  free(e->v_draft);
  free(e->v_n);
}

void serve_spec_stats_clear(h3_serve_stats *st) {
  st->spec_rounds = st->spec_seq_rounds = 0;
  if (st->accept_hist) memset(st->accept_hist, 0, (size_t)(st->gamma + 1) * sizeof *st->accept_hist);
  st->draft_seconds = st->verify_seconds = st->accept_seconds = 0;
}

/* The drafts of every live row into v_draft (rows * gamma), from the decode rows' images
 * (serve_fill_decode_rows): the bonus is the row's newest token, ctx_len = L its position,
 * the page table its own; padding rows draft from token 0 without context. */
static h3_status draft(engine *e) {
  h3_status st = serve_upload(e, &e->sd, "bonus", e->h_tokens);
  if (st == H3_OK) st = serve_upload(e, &e->sd, "ctx_len", e->h_pos);
  if (st == H3_OK) st = serve_upload(e, &e->sd, "page_table", e->h_table);
  if (st == H3_OK) st = h3_runtime_call(e->rt, e->sd.g, e->sd.args, e->sd.results, e->d);
  if (st == H3_OK) st = serve_download(e, &e->sd, "draft", e->v_draft);
  const h3_oracle *o = e->o->oracle;
  for (int64_t row = 0; st == H3_OK && o && e->o->force_accept > 1 && row < e->rows; row++) {
    int64_t i = e->live[row]; /* bench only: the oracle's next tokens in place of the draft's */
    if (i < 0 || !o->tokens[i]) continue;
    const seq *q = &e->s[i];
    for (int64_t k = 0; k < e->o->force_accept - 1 && k < e->gamma; k++)
      if (q->n_out + k < o->n_tokens[i]) e->v_draft[row * e->gamma + k] = o->tokens[i][q->n_out + k];
  }
  return st;
}

/* The verify rows' images: [bonus, draft] of each live row at L .., padding elsewhere. Their
 * tables are the decode rows' (h_table: serve_verify takes one a sequence, all-zero for a
 * padding row). */
static void fill_verify_rows(engine *e) {
  int64_t G = e->gamma + 1, V = verify_rows(e);
  memset(e->v_tokens, 0, (size_t)V * sizeof *e->v_tokens);
  memset(e->v_pos, 0, (size_t)V * sizeof *e->v_pos);
  for (int64_t row = 0; row < e->rows; row++) {
    if (e->live[row] < 0) continue;
    for (int64_t k = 0; k < G; k++) {
      int64_t v = row * G + k;
      e->v_tokens[v] = k ? e->v_draft[row * e->gamma + k - 1] : e->h_tokens[row];
      e->v_pos[v] = e->h_pos[row] + (int32_t)k;
    }
  }
}

static h3_status verify(engine *e) {
  call_args *c = &e->sv;
  h3_status st = serve_upload(e, c, "tokens", e->v_tokens);
  if (st == H3_OK) st = serve_upload(e, c, "pos", e->v_pos);
  if (st == H3_OK) st = serve_upload(e, c, "page_table", e->h_table);
  /* per sequence: the decode rows' temperatures and sampling keys */
  if (st == H3_OK) st = serve_upload(e, c, "temperature", e->h_temp);
  if (st == H3_OK) st = serve_upload(e, c, "seed", e->h_key);
  if (st == H3_OK) st = h3_runtime_call(e->rt, c->g, c->args, c->results, e->d);
  if (st == H3_OK) st = serve_download(e, c, "n", e->v_n);
  if (st == H3_OK) st = serve_download(e, c, "emitted", e->v_next);
  if (st == H3_OK) st = serve_download(e, c, "margin", e->v_margin);
  return st;
}

/* BENCH ONLY (--spec-force-accept A): request i's round takes the oracle's next A tokens
 * (the draft proposed its first A - 1), whatever the verify decided, so that every round
 * advances by A even where the GPU's verify rows part from the plain run's decode at a
 * near-tie; the rounds whose own acceptance agreed (n >= A - 1, the same A-th token) are
 * counted. Returns false when the oracle has no tokens left for the request (then the
 * verify's own acceptance applies). */
static bool take_forced(engine *e, int64_t row, double at) {
  const h3_oracle *o = e->o->oracle;
  int64_t i = e->live[row], G = e->gamma + 1, f = e->o->force_accept - 1;
  const seq *q = &e->s[i];
  if (!o || f < 1 || !o->tokens[i] || q->n_out >= o->n_tokens[i]) return false;
  if (f > e->gamma) f = e->gamma;
  if (q->n_out + f >= o->n_tokens[i]) f = o->n_tokens[i] - q->n_out - 1;
  const int32_t *want = o->tokens[i] + q->n_out, *t = e->v_next + row * G;
  const float *mg = e->v_margin + row * G;
  e->st->accept_hist[f]++;
  e->st->forced_agreed += e->v_n[row] >= f && t[f] == want[f];
  bool ended = false;
  for (int64_t k = 0; k <= f && !ended; k++) ended = serve_take_token(e, i, want[k], mg[k], at);
  return true;
}

/* Live row `row`'s request takes the tokens its acceptance emitted (§5.3 step 6). */
static void accept(engine *e, int64_t row, double at) {
  int64_t G = e->gamma + 1, i = e->live[row], n = e->v_n[row];
  if (take_forced(e, row, at)) return;
  const int32_t *t = e->v_next + row * G;
  const float *mg = e->v_margin + row * G;
  if (n < 0 || n > e->gamma) n = e->gamma; /* cannot happen: spec_accept's contract */
  e->st->accept_hist[n]++;
  bool ended = false;
  for (int64_t k = 0; k <= n && !ended; k++) ended = serve_take_token(e, i, t[k], mg[k], at);
}

h3_status serve_spec_round(engine *e) {
  int64_t live = serve_fill_decode_rows(e);
  double t0 = serve_now(e);
  h3_status st = draft(e);
  double t1 = serve_now(e);
  if (st == H3_OK) {
    fill_verify_rows(e);
    st = verify(e);
  }
  double t2 = serve_now(e);
  for (int64_t row = 0; st == H3_OK && row < e->rows; row++)
    if (e->live[row] >= 0) accept(e, row, t2);
  double t3 = serve_now(e);
  if (st != H3_OK) return st;
  h3_serve_stats *s = e->st;
  s->draft_seconds += t1 - t0;
  s->verify_seconds += t2 - t1;
  s->accept_seconds += t3 - t2;
  s->decode_seconds += t3 - t0;
  s->spec_rounds++;
  s->spec_seq_rounds += live;
  s->decode_steps++;
  s->decode_rows += live;
  return H3_OK;
}
