/* inputs.c: default values for graph inputs that the user did not give (h3exec without
 * --inputs, or an inputs file that leaves some out).
 *
 * Rules, by input name and the module's config:
 *   - `tag`, `slot` i32[S] and `pos` f32[S, 3]: the H3 packed sequence of
 *     docs/models/minimax_h3.md §2 from config keys text_rows (L), audio_rows (Na), video_rows (Nv):
 *     rows [text | audio | video | padding]; tag 1 / 2 / 0 / -1; slot 1 on audio rows, else
 *     0; pos: text i -> (i, 0, 0), audio j -> (L + j/2, 0, j%2), video row r of the grid
 *     F x H x W -> (L + f, y, x) with r = (f*H + y)*W + x, padding (0, 0, 0). The grid is
 *     config keys video_frames / video_h / video_w when present; otherwise one frame with
 *     W = the largest divisor of Nv not above sqrt(Nv), H = Nv / W.
 *   - token ids (integer inputs named `prompt`, `tokens` or `ids`): uniform in
 *     [0, vocab) (config key `vocab`), element i = floor(u * vocab) with u the Philox
 *     uniform of stream "input.<name>";
 *   - KV caches (inputs named `*_cache`): zeros (empty caches);
 *   - other float inputs: standard normal from stream "input.<name>", rounded to the
 *     input dtype; other integer inputs (positions, lengths): 0.
 */
#include "h3/rng.h"
#include "h3/runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const h3_span none = {0};

static void store(void *p, h3_dtype t, int64_t i, double v) {
  switch (t) {
  case H3_F32: ((float *)p)[i] = (float)v; break;
  case H3_F64: ((double *)p)[i] = v; break;
  case H3_I32: ((int32_t *)p)[i] = (int32_t)v; break;
  case H3_I64: ((int64_t *)p)[i] = (int64_t)v; break;
  default: h3_weights_store(p, t, (size_t)i, v); break;
  }
}

typedef struct {
  int64_t L, Na, Nv, F, H, W;
} rows;

static int h3_rows(const h3_module *m, rows *r) {
  r->L = h3_module_config(m, "text_rows", -1);
  r->Na = h3_module_config(m, "audio_rows", -1);
  r->Nv = h3_module_config(m, "video_rows", -1);
  if (r->L < 0 || r->Na < 0 || r->Nv < 0) return 0;
  r->F = h3_module_config(m, "video_frames", 1);
  r->H = h3_module_config(m, "video_h", -1);
  r->W = h3_module_config(m, "video_w", -1);
  if (r->F <= 0 || r->H <= 0 || r->W <= 0 || r->F * r->H * r->W != r->Nv) {
    r->F = 1;
    r->W = 1;
    for (int64_t w = 1; w * w <= r->Nv; w++)
      if (r->Nv % w == 0) r->W = w;
    r->H = r->W ? r->Nv / r->W : 0;
  }
  return 1;
}

/* tag / slot / pos of packed row s. */
static void row_meta(const rows *r, int64_t s, int *tag, int *slot, double pos[3]) {
  pos[0] = pos[1] = pos[2] = 0.0;
  *slot = 0;
  if (s < r->L) {
    *tag = 1;
    pos[0] = (double)s;
  } else if (s < r->L + r->Na) {
    int64_t j = s - r->L;
    *tag = 2;
    *slot = 1;
    pos[0] = (double)(r->L + j / 2);
    pos[2] = (double)(j % 2);
  } else if (s < r->L + r->Na + r->Nv) {
    int64_t v = s - r->L - r->Na;
    *tag = 0;
    pos[0] = (double)(r->L + v / (r->H * r->W));
    pos[1] = (double)((v / r->W) % r->H);
    pos[2] = (double)(v % r->W);
  } else {
    *tag = -1;
  }
}

static int is_token_name(const char *n) {
  return strcmp(n, "prompt") == 0 || strcmp(n, "tokens") == 0 || strcmp(n, "ids") == 0;
}

static h3_status fill_one(const h3_module *m, const h3_graph *g, h3_host_tensor *t,
                          const h3_input_defaults *o, h3_diag *d) {
  const char *name = t->name ? t->name : "";
  int64_t n = h3_type_numel(&t->type);
  char stream[256];
  snprintf(stream, sizeof stream, "input.%s", name);
  uint32_t sid = h3_rng_stream_id(stream);
  rows r;
  int meta = strcmp(name, "tag") == 0 || strcmp(name, "slot") == 0 || strcmp(name, "pos") == 0;
  if (meta && h3_rows(m, &r)) {
    int64_t S = t->type.dims[0];
    if (r.L + r.Na + r.Nv > S) {
      h3_diag_error(
          d, g->span, "give the input in an --inputs file",
          "graph '%s': input '%s' has %lld rows, fewer than the %lld live rows of the config",
          g->name, name, (long long)S, (long long)(r.L + r.Na + r.Nv));
      return H3_ERR;
    }
    for (int64_t s = 0; s < S; s++) {
      int tag, slot;
      double pos[3];
      row_meta(&r, s, &tag, &slot, pos);
      if (name[0] == 't')
        store(t->data, t->type.dtype, s, tag);
      else if (name[0] == 's')
        store(t->data, t->type.dtype, s, slot);
      else
        for (int64_t k = 0; k < n / S && k < 3; k++)
          store(t->data, t->type.dtype, s * (n / S) + k, pos[k]);
    }
    return H3_OK;
  }
  if (!h3_dtype_is_float(t->type.dtype) && is_token_name(name)) {
    int64_t vocab = h3_module_config(m, "vocab", -1);
    if (vocab <= 0) {
      h3_diag_error(d, g->span, "give the tokens in an --inputs file or with --prompt",
                    "graph '%s': cannot make default tokens for '%s': the config has no 'vocab'",
                    g->name, name);
      return H3_ERR;
    }
    if (o->prompt_len > 0 && o->prompt_len != n) {
      h3_diag_error(d, none, "recompile the plan with: h3c compile ... --set prompt_len=N",
                    "--prompt-len %lld: the plan was compiled for a prompt of %lld tokens "
                    "(input '%s' of graph '%s')",
                    (long long)o->prompt_len, (long long)n, name, g->name);
      return H3_ERR;
    }
    for (int64_t i = 0; i < n; i++) {
      int64_t v = (int64_t)floor((double)h3_rng_uniform(o->seed, sid, (unsigned long long)i) *
                                 (double)vocab);
      store(t->data, t->type.dtype, i, (double)(v < vocab ? v : vocab - 1));
    }
    return H3_OK;
  }
  size_t nl = strlen(name);
  int cache = nl >= 6 && strcmp(name + nl - 6, "_cache") == 0;
  if (h3_dtype_is_float(t->type.dtype) && !cache) {
    for (int64_t i = 0; i < n; i++)
      store(t->data, t->type.dtype, i, (double)h3_rng_normal(o->seed, sid, (unsigned long long)i));
    return H3_OK;
  }
  memset(t->data, 0, t->bytes);
  return H3_OK;
}

h3_status h3_inputs_fill_defaults(const h3_module *m, const h3_graph *g, h3_host_tensor *in,
                                  const h3_input_defaults *o, h3_diag *d) {
  for (int i = 0; i < g->n_inputs; i++) {
    h3_host_tensor *t = &in[i];
    if (t->data) continue;
    t->name = g->inputs[i]->name;
    t->type = g->inputs[i]->type;
    t->bytes = (size_t)h3_type_bytes(&t->type);
    t->data = aligned_alloc(64, (t->bytes + 64) & ~(size_t)63);
    if (!t->data) {
      h3_diag_error(d, none, H3_HINT_OOM, "out of memory for input '%s'", t->name ? t->name : "?");
      return H3_ERR;
    }
    if (fill_one(m, g, t, o, d) != H3_OK) return H3_ERR;
  }
  return H3_OK;
}
