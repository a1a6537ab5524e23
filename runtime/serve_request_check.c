/* serve_request_check.c: the request set's helpers besides reading (serve_io.h): the
 * model's checks of one request, generated requests for benchmarks, and freeing.
 *
 * Generated prompts: token i of request r is (w0 * vocab) >> 32, w0 the first Philox word
 * of element r * prompt_len + i of stream "serve.prompt" under the seed: every id in
 * [0, vocab) with a bias below vocab / 2^32, the same on every machine.
 */
#include "h3/rng.h"
#include "h3/serve_io.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

__attribute__((format(printf, 5, 6))) static h3_status problem(char *msg, size_t n, const char **hint,
                                                               const char *what, const char *fmt, ...) {
  if (hint) *hint = what;
  if (msg && n) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, n, fmt, ap);
    va_end(ap);
  }
  return H3_ERR;
}

h3_status h3_request_check(const h3_request *r, int64_t vocab, int64_t max_ctx, char *msg, size_t n,
                           const char **hint) {
  const char *vocab_hint = "give token ids of the model's tokenizer, from 0 to vocab - 1";
  if (r->prompt_len < 1) return problem(msg, n, hint, "give at least one token id", "the prompt is empty");
  for (int64_t i = 0; vocab > 0 && i < r->prompt_len; i++)
    if (r->prompt[i] < 0 || r->prompt[i] >= vocab)
      return problem(msg, n, hint, vocab_hint,
                     "token id %d at prompt[%lld] is outside the vocabulary [0, %lld)", (int)r->prompt[i],
                     (long long)i, (long long)vocab);
  if (vocab > 0 && r->has_eos && (r->eos < 0 || r->eos >= vocab))
    return problem(msg, n, hint, vocab_hint, "eos %d is outside the vocabulary [0, %lld)", (int)r->eos,
                   (long long)vocab);
  if (max_ctx > 0 && (r->max_new_tokens > max_ctx || r->prompt_len > max_ctx - r->max_new_tokens))
    return problem(
        msg, n, hint,
        "shorten the prompt or lower max_new_tokens, or compile the plan with a larger --set max_ctx",
        "prompt_len %lld + max_new_tokens %lld is more than the context length %lld",
        (long long)r->prompt_len, (long long)r->max_new_tokens, (long long)max_ctx);
  return H3_OK;
}

h3_status h3_requests_random(int64_t n, int64_t prompt_len, int64_t output_len, int64_t vocab,
                             uint64_t seed, h3_requests *out, h3_diag *d) {
  memset(out, 0, sizeof *out);
  h3_span none = {0};
  if (n < 1 || prompt_len < 1 || output_len < 1 || output_len > INT32_MAX || vocab < 1 ||
      vocab > (int64_t)1 << 31 || n > INT64_MAX / prompt_len) {
    h3_diag_error(d, none, "give counts and lengths >= 1 and a vocab in [1, 2^31]",
                  "cannot make %lld random requests of %lld + %lld tokens over a vocab of %lld",
                  (long long)n, (long long)prompt_len, (long long)output_len, (long long)vocab);
    return H3_ERR;
  }
  uint32_t stream = h3_rng_stream_id("serve.prompt");
  out->req = calloc((size_t)n, sizeof *out->req);
  bool ok = out->req != NULL;
  for (int64_t r = 0; ok && r < n; r++) {
    h3_request *q = &out->req[r];
    char id[24];
    snprintf(id, sizeof id, "%lld", (long long)r);
    q->id = strdup(id);
    q->prompt = malloc((size_t)prompt_len * sizeof *q->prompt);
    out->n = r + 1;
    ok = q->id && q->prompt;
    if (!ok) break;
    q->id_is_int = true;
    q->prompt_len = prompt_len;
    q->max_new_tokens = output_len;
    for (int64_t i = 0; i < prompt_len; i++) {
      uint64_t w = h3_rng_block(seed, stream, (uint64_t)(r * prompt_len + i)).w[0];
      q->prompt[i] = (int32_t)((w * (uint64_t)vocab) >> 32);
    }
  }
  if (ok) return H3_OK;
  h3_requests_free(out);
  h3_diag_error(d, none, "use fewer or shorter requests",
                "out of memory making %lld random requests", (long long)n);
  return H3_ERR;
}

void h3_requests_free(h3_requests *r) {
  for (int64_t i = 0; i < r->n; i++) {
    free(r->req[i].id);
    free(r->req[i].prompt);
  }
  for (int64_t i = 0; i < r->n_rejected; i++) {
    free(r->rejected[i].id);
    free(r->rejected[i].message);
    free(r->rejected[i].error);
  }
  free(r->req);
  free(r->rejected);
  memset(r, 0, sizeof *r);
}
