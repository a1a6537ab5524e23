/* spec_weights.h: the weight tables of the two model specs, written out independently of the
 * compiler (docs/models/minimax_h3.md §1/§5, docs/models/minimax_m3_1.md §2/§3/§5.4).
 *
 * For each config preset of a spec this gives the config values as the spec tables state
 * them and the full list of weight-file names with dtype and shape, built from the spec's
 * formulas. The test compares these lists against what h3's front end produces from
 * the two .g models, and sums them to check the spec's parameter totals.
 */
#ifndef H3_TEST_SPEC_WEIGHTS_H
#define H3_TEST_SPEC_WEIGHTS_H

#include "h3/ir.h"

/* One weight of a checkpoint: name, dtype, shape (rank 1 or 2). */
typedef struct {
  char *name; /* malloc'd */
  h3_dtype dtype;
  int rank;
  int64_t dims[2];
} spec_weight;

typedef struct {
  spec_weight *v;
  int n, cap;
  int oom; /* set when an allocation failed */
} spec_weights;

/* A config key and the value the spec's table gives it. */
typedef struct {
  const char *key;
  int64_t value;
} spec_key;

/* ---- MiniMax-H3 ---------------------------------------------------------------------------- */
typedef struct {
  int64_t layers, refiner_layers, dim, heads, head_dim, rope_dims, ffn, time_freq, time_hidden,
      time_embed, text_dim, video_width, audio_width, slots, text_rows, audio_rows, video_rows;
  int64_t packed_rows; /* S as the spec's table states it */
} spec_h3;

/* The spec's config by preset name ("full", "tiny"); NULL when unknown. */
const spec_h3 *spec_h3_config(const char *preset);
/* The config table as key/value pairs (keys of models/minimax_h3.g); returns the count. */
int spec_h3_keys(const spec_h3 *c, spec_key *out, int cap);
/* §5 weight table expanded for config c, appended to w. */
void spec_h3_weights(const spec_h3 *c, spec_weights *w);

/* ---- MiniMax-M3.1 ---------------------------------------------------------------------------- */
typedef struct {
  int64_t n_layers, n_dense, dim, heads, kv_heads, head_dim, rope_dims, mlp_ffn, experts, top_k,
      expert_ffn, shared_ffn, vocab, index_heads, index_dim, sparse_block, topk_blocks, page,
      max_ctx, gamma, draft_ffn, capture[3], markov_rank, mask_id;
  /* the §2 totals */
  int64_t target_params, target_bytes, draft_params, draft_bytes;
} spec_m31;

const spec_m31 *spec_m31_config(const char *preset);
int spec_m31_keys(const spec_m31 *c, spec_key *out, int cap);
/* §3 target weights and §5.4 draft weights (names starting "dspark.") for config c. */
void spec_m31_weights(const spec_m31 *c, spec_weights *w);

/* ---- lists ---------------------------------------------------------------------------------- */
void spec_weights_free(spec_weights *w);
/* Appends one weight; d1 < 0 means rank 1. The name is printf-formatted. */
void spec_weights_add(spec_weights *w, h3_dtype dt, int64_t d0, int64_t d1, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Sorts by name (for comparing two lists). */
void spec_weights_sort(spec_weights *w);

#endif
