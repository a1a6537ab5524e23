/* spec_weights.c: the spec tables of MiniMax-H3 and MiniMax-M3.1 (config values and weight
 * names/dtypes/shapes) transcribed from the docs/models files, independently of the .g models and
 * of the compiler. See spec_weights.h.
 */
#include "spec_weights.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lists ----------------------------------------------------------------------------------- */
void spec_weights_free(spec_weights *w) {
  for (int i = 0; i < w->n; i++) free(w->v[i].name);
  free(w->v);
  memset(w, 0, sizeof *w);
}

void spec_weights_add(spec_weights *w, h3_dtype dt, int64_t d0, int64_t d1, const char *fmt, ...) {
  if (w->oom) return;
  if (w->n == w->cap) {
    int cap = w->cap ? 2 * w->cap : 64;
    spec_weight *v = realloc(w->v, (size_t)cap * sizeof *v);
    if (!v) {
      w->oom = 1;
      return;
    }
    w->v = v;
    w->cap = cap;
  }
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  spec_weight *s = &w->v[w->n];
  size_t len = strlen(buf) + 1;
  s->name = malloc(len);
  if (!s->name) {
    w->oom = 1;
    return;
  }
  memcpy(s->name, buf, len);
  s->dtype = dt;
  s->rank = d1 < 0 ? 1 : 2;
  s->dims[0] = d0;
  s->dims[1] = d1 < 0 ? 0 : d1;
  w->n++;
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const spec_weight *)a)->name, ((const spec_weight *)b)->name);
}

void spec_weights_sort(spec_weights *w) {
  if (w->n > 1) qsort(w->v, (size_t)w->n, sizeof *w->v, by_name);
}

/* ---- MiniMax-H3 (docs/models/minimax_h3.md §1 table) ------------------------------------------------------ */
static const spec_h3 h3_full = {
    .layers = 50, .refiner_layers = 2, .dim = 5376, .heads = 56, .head_dim = 128,
    .rope_dims = 96, .ffn = 14336, .time_freq = 256, .time_hidden = 5376, .time_embed = 2688,
    .text_dim = 5120, .video_width = 96, .audio_width = 32, .slots = 2, .text_rows = 88,
    .audio_rows = 356, .video_rows = 32256, .packed_rows = 32704};
static const spec_h3 h3_tiny = {
    .layers = 2, .refiner_layers = 1, .dim = 64, .heads = 4, .head_dim = 16, .rope_dims = 12,
    .ffn = 96, .time_freq = 16, .time_hidden = 64, .time_embed = 32, .text_dim = 48,
    .video_width = 12, .audio_width = 8, .slots = 2, .text_rows = 8, .audio_rows = 6,
    .video_rows = 40, .packed_rows = 64};

const spec_h3 *spec_h3_config(const char *preset) {
  if (strcmp(preset, "full") == 0) return &h3_full;
  if (strcmp(preset, "tiny") == 0) return &h3_tiny;
  return NULL;
}

int spec_h3_keys(const spec_h3 *c, spec_key *out, int cap) {
  const spec_key k[] = {
      {"layers", c->layers},         {"refiner_layers", c->refiner_layers},
      {"dim", c->dim},               {"heads", c->heads},
      {"head_dim", c->head_dim},     {"rope_dims", c->rope_dims},
      {"ffn", c->ffn},               {"time_freq", c->time_freq},
      {"time_hidden", c->time_hidden}, {"time_embed", c->time_embed},
      {"text_dim", c->text_dim},     {"video_width", c->video_width},
      {"audio_width", c->audio_width}, {"slots", c->slots},
      {"text_rows", c->text_rows},   {"audio_rows", c->audio_rows},
      {"video_rows", c->video_rows}, {"steps", 49}, /* §6: 50 sigma points, 49 forwards */
  };
  int n = (int)(sizeof k / sizeof k[0]);
  for (int i = 0; i < n && i < cap; i++) out[i] = k[i];
  return n;
}

/* The attention + MLP fields shared by refiner blocks and DiT blocks (§5 table). */
static void h3_block_fields(const spec_h3 *c, spec_weights *w, const char *prefix, int i) {
  int64_t d = c->dim, aw = c->heads * c->head_dim;
  spec_weights_add(w, H3_BF16, d, -1, "%s.%d.norm1.weight", prefix, i);
  spec_weights_add(w, H3_BF16, d, -1, "%s.%d.norm2.weight", prefix, i);
  spec_weights_add(w, H3_BF16, 3 * aw, d, "%s.%d.attn.qkv_proj.weight", prefix, i);
  spec_weights_add(w, H3_BF16, c->head_dim, -1, "%s.%d.attn.q_norm.weight", prefix, i);
  spec_weights_add(w, H3_BF16, c->head_dim, -1, "%s.%d.attn.k_norm.weight", prefix, i);
  spec_weights_add(w, H3_BF16, d, aw, "%s.%d.attn.out_proj.weight", prefix, i);
  spec_weights_add(w, H3_BF16, 2 * c->ffn, d, "%s.%d.mlp.fc1.weight", prefix, i);
  spec_weights_add(w, H3_BF16, d, c->ffn, "%s.%d.mlp.fc2.weight", prefix, i);
}

void spec_h3_weights(const spec_h3 *c, spec_weights *w) {
  int64_t d = c->dim, te = c->time_embed;
  spec_weights_add(w, H3_BF16, d, c->text_dim, "condition_proj.weight");
  spec_weights_add(w, H3_BF16, d, -1, "condition_proj.bias");
  for (int j = 0; j < c->refiner_layers; j++) h3_block_fields(c, w, "token_refiner.blocks", j);
  spec_weights_add(w, H3_BF16, d, -1, "final_norm.weight");
  spec_weights_add(w, H3_F32, d, c->video_width, "video_patch_proj.weight");
  spec_weights_add(w, H3_F32, d, -1, "video_patch_proj.bias");
  spec_weights_add(w, H3_F32, d, c->audio_width, "audio_patch_proj.weight");
  spec_weights_add(w, H3_F32, d, -1, "audio_patch_proj.bias");
  spec_weights_add(w, H3_F32, c->time_hidden, c->time_freq, "time_embedder.linear_1.weight");
  spec_weights_add(w, H3_F32, c->time_hidden, -1, "time_embedder.linear_1.bias");
  spec_weights_add(w, H3_F32, te, c->time_hidden, "time_embedder.linear_2.weight");
  spec_weights_add(w, H3_F32, te, -1, "time_embedder.linear_2.bias");
  spec_weights_add(w, H3_F32, c->rope_dims / 6, -1, "rope.inv_freq");
  for (int i = 0; i < c->layers; i++) {
    spec_weights_add(w, H3_BF16, 18 * d, te, "blocks.%d.adaln_proj.weight", i);
    spec_weights_add(w, H3_BF16, 18 * d, -1, "blocks.%d.adaln_proj.bias", i);
    h3_block_fields(c, w, "blocks", i);
  }
  spec_weights_add(w, H3_BF16, 2 * d, te, "final_layer.adaln_proj.weight");
  spec_weights_add(w, H3_BF16, 2 * d, -1, "final_layer.adaln_proj.bias");
  spec_weights_add(w, H3_BF16, d, -1, "final_layer.norm.weight");
  spec_weights_add(w, H3_F32, c->video_width, d, "final_layer.video_out.weight");
  spec_weights_add(w, H3_F32, c->video_width, -1, "final_layer.video_out.bias");
  spec_weights_add(w, H3_F32, c->audio_width, d, "final_layer.audio_out.weight");
  spec_weights_add(w, H3_F32, c->audio_width, -1, "final_layer.audio_out.bias");
}

/* ---- MiniMax-M3.1 (docs/models/minimax_m3_1.md §2 table) -------------------------------------------------- */
static const spec_m31 m31_full = {
    .n_layers = 60, .n_dense = 3, .dim = 6144, .heads = 64, .kv_heads = 4, .head_dim = 128,
    .rope_dims = 64, .mlp_ffn = 12288, .experts = 128, .top_k = 4, .expert_ffn = 3072,
    .shared_ffn = 3072, .vocab = 200064, .index_heads = 4, .index_dim = 128,
    .sparse_block = 128, .topk_blocks = 16, .page = 128, .max_ctx = 1048576, .gamma = 8,
    .draft_ffn = 12288, .capture = {1, 30, 58}, .markov_rank = 256, .mask_id = 200063,
    .target_params = 426174572928LL, .target_bytes = 852438813696LL,
    .draft_params = 549150976LL, .draft_bytes = 1098301952LL};
static const spec_m31 m31_small = {
    .n_layers = 4, .n_dense = 1, .dim = 6144, .heads = 64, .kv_heads = 4, .head_dim = 128,
    .rope_dims = 64, .mlp_ffn = 12288, .experts = 32, .top_k = 4, .expert_ffn = 3072,
    .shared_ffn = 3072, .vocab = 200064, .index_heads = 4, .index_dim = 128,
    .sparse_block = 128, .topk_blocks = 16, .page = 128, .max_ctx = 16384, .gamma = 8,
    .draft_ffn = 12288, .capture = {0, 1, 2}, .markov_rank = 256, .mask_id = 200063,
    .target_params = 8730828640LL, .target_bytes = 17462837120LL,
    .draft_params = 549150976LL, .draft_bytes = 1098301952LL};
static const spec_m31 m31_tiny = {
    .n_layers = 3, .n_dense = 1, .dim = 64, .heads = 4, .kv_heads = 2, .head_dim = 16,
    .rope_dims = 8, .mlp_ffn = 128, .experts = 8, .top_k = 2, .expert_ffn = 32,
    .shared_ffn = 32, .vocab = 256, .index_heads = 2, .index_dim = 16, .sparse_block = 8,
    .topk_blocks = 2, .page = 8, .max_ctx = 256, .gamma = 4, .draft_ffn = 128,
    .capture = {0, 1, 2}, .markov_rank = 8, .mask_id = 255, .target_params = 212592,
    .target_bytes = 427264, .draft_params = 53536, .draft_bytes = 107072};

const spec_m31 *spec_m31_config(const char *preset) {
  if (strcmp(preset, "full") == 0) return &m31_full;
  if (strcmp(preset, "small") == 0) return &m31_small;
  if (strcmp(preset, "tiny") == 0) return &m31_tiny;
  return NULL;
}

int spec_m31_keys(const spec_m31 *c, spec_key *out, int cap) {
  const spec_key k[] = {
      {"n_layers", c->n_layers},     {"n_dense", c->n_dense},
      {"dim", c->dim},               {"heads", c->heads},
      {"kv_heads", c->kv_heads},     {"head_dim", c->head_dim},
      {"rope_dims", c->rope_dims},   {"rope_theta", 5000000},
      {"mlp_ffn", c->mlp_ffn},       {"experts", c->experts},
      {"top_k", c->top_k},           {"expert_ffn", c->expert_ffn},
      {"shared_ffn", c->shared_ffn}, {"vocab", c->vocab},
      {"index_heads", c->index_heads}, {"index_dim", c->index_dim},
      {"sparse_block", c->sparse_block}, {"topk_blocks", c->topk_blocks},
      {"page", c->page},             {"max_ctx", c->max_ctx},
      {"gamma", c->gamma},           {"draft_ffn", c->draft_ffn},
      {"capture0", c->capture[0]},   {"capture1", c->capture[1]},
      {"capture2", c->capture[2]},   {"markov_rank", c->markov_rank},
      {"mask_id", c->mask_id},
  };
  int n = (int)(sizeof k / sizeof k[0]);
  for (int i = 0; i < n && i < cap; i++) out[i] = k[i];
  return n;
}

/* Attention fields of a target or draft layer (§3, §5.4). */
static void m31_attn(const spec_m31 *c, spec_weights *w, const char *prefix, int i) {
  int64_t h = c->dim, qw = c->heads * c->head_dim, kvw = c->kv_heads * c->head_dim;
  spec_weights_add(w, H3_BF16, h, -1, "%s.%d.input_layernorm.weight", prefix, i);
  spec_weights_add(w, H3_BF16, h, -1, "%s.%d.post_attention_layernorm.weight", prefix, i);
  spec_weights_add(w, H3_BF16, qw + 2 * kvw, h, "%s.%d.self_attn.qkv_proj.weight", prefix, i);
  spec_weights_add(w, H3_BF16, h, qw, "%s.%d.self_attn.o_proj.weight", prefix, i);
  spec_weights_add(w, H3_BF16, c->head_dim, -1, "%s.%d.self_attn.q_norm.weight", prefix, i);
  spec_weights_add(w, H3_BF16, c->head_dim, -1, "%s.%d.self_attn.k_norm.weight", prefix, i);
}

void spec_m31_weights(const spec_m31 *c, spec_weights *w) {
  int64_t h = c->dim, v = c->vocab;
  spec_weights_add(w, H3_BF16, v, h, "embed_tokens.weight");
  spec_weights_add(w, H3_BF16, v, h, "lm_head.weight");
  spec_weights_add(w, H3_BF16, h, -1, "norm.weight");
  for (int i = 0; i < c->n_layers; i++) {
    m31_attn(c, w, "layers", i);
    if (i < c->n_dense) {
      spec_weights_add(w, H3_BF16, 2 * c->mlp_ffn, h, "layers.%d.mlp.gate_up_proj.weight", i);
      spec_weights_add(w, H3_BF16, h, c->mlp_ffn, "layers.%d.mlp.down_proj.weight", i);
      continue;
    }
    int64_t di = c->index_dim;
    spec_weights_add(w, H3_BF16, c->index_heads * di, h, "layers.%d.self_attn.indexer.q_proj.weight", i);
    spec_weights_add(w, H3_BF16, di, h, "layers.%d.self_attn.indexer.k_proj.weight", i);
    spec_weights_add(w, H3_BF16, di, -1, "layers.%d.self_attn.indexer.q_norm.weight", i);
    spec_weights_add(w, H3_BF16, di, -1, "layers.%d.self_attn.indexer.k_norm.weight", i);
    spec_weights_add(w, H3_F32, c->experts, h, "layers.%d.mlp.router.weight", i);
    spec_weights_add(w, H3_F32, c->experts, -1, "layers.%d.mlp.router.correction_bias", i);
    for (int e = 0; e < c->experts; e++) {
      spec_weights_add(w, H3_BF16, 2 * c->expert_ffn, h, "layers.%d.mlp.experts.%d.gate_up_proj.weight", i, e);
      spec_weights_add(w, H3_BF16, h, c->expert_ffn, "layers.%d.mlp.experts.%d.down_proj.weight", i, e);
    }
    spec_weights_add(w, H3_BF16, 2 * c->shared_ffn, h, "layers.%d.mlp.shared_expert.gate_up_proj.weight", i);
    spec_weights_add(w, H3_BF16, h, c->shared_ffn, "layers.%d.mlp.shared_expert.down_proj.weight", i);
  }
  /* §5.4 draft, 3 captured layers: fc [H, 3H] */
  spec_weights_add(w, H3_BF16, h, 3 * h, "dspark.fc.weight");
  spec_weights_add(w, H3_BF16, h, -1, "dspark.hidden_norm.weight");
  m31_attn(c, w, "dspark.layers", 0);
  spec_weights_add(w, H3_BF16, 2 * c->draft_ffn, h, "dspark.layers.0.mlp.gate_up_proj.weight");
  spec_weights_add(w, H3_BF16, h, c->draft_ffn, "dspark.layers.0.mlp.down_proj.weight");
  spec_weights_add(w, H3_BF16, h, -1, "dspark.norm.weight");
  spec_weights_add(w, H3_BF16, v, c->markov_rank, "dspark.markov.w1.weight");
  spec_weights_add(w, H3_BF16, v, c->markov_rank, "dspark.markov.w2.weight");
}
