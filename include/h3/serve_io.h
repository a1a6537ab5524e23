/* serve_io.h: the serving engine's files: the request file it reads and the results file it
 * writes (docs/running.md, "Request files and results").
 *
 * Requests: JSON Lines, one object a line (runtime/serve_requests.c):
 *   {"id": "a" | 7, "prompt": [token ids], "max_new_tokens": N,
 *    "temperature": T, "seed": S, "eos": E, "arrival": t}
 * id, prompt and max_new_tokens are required; blank lines are skipped. A bad line never
 * costs the good ones: it is reported (FILE:LINE:COL: error: ..., through the h3_diag) and
 * kept as a rejected request, so the engine serves the others and writes a failed result
 * for it; `strict` stops at the first bad line instead. Vocabulary and context checks need
 * the model: the engine runs h3_request_check on each request.
 *
 * Results: JSON Lines, one object per finished request, written and flushed as each
 * finishes (runtime/serve_results.c), through the project's output writer.
 */
#ifndef H3_SERVE_IO_H
#define H3_SERVE_IO_H

#include "h3/support.h"

#include <stdbool.h>
#include <stdint.h>

/* The longest line the reader takes (64 MiB: about 8 million token ids); a longer line is
 * a rejected request. */
#define H3_REQUESTS_MAX_LINE ((size_t)64 << 20)

typedef struct {
  /* the id as text: a JSON string's value (UTF-8, no NUL), or an integer's digits; unique in
   * the file */
  char *id;
  bool id_is_int;         /* the id was a JSON integer (results write it back as one) */
  int32_t *prompt;        /* [prompt_len] token ids, each in [0, 2^31) */
  int64_t prompt_len;     /* >= 1 */
  int64_t max_new_tokens; /* in [1, 2^31) */
  float temperature;      /* >= 0, finite; 0 = greedy; default 0 */
  uint64_t seed;          /* "seed" when has_seed: an integer in [0, 2^63) */
  bool has_seed;
  int32_t eos; /* "eos" when has_eos: an end-of-sequence token id in [0, 2^31) */
  bool has_eos;
  double arrival; /* seconds after the start, >= 0, finite; default 0 */
  int line;       /* 1-based line in the file (0 for generated requests) */
} h3_request;

/* A line that is not a valid request. */
typedef struct {
  int line, col; /* where the error is (1-based; col counts bytes) */
  char *id;      /* the request's id when the line has a valid one, else NULL */
  bool id_is_int;
  char *message; /* what is wrong, without place or id ("\"max_new_tokens\" must be ...") */
  char *error;   /* "FILE:LINE:COL: MESSAGE", for the failed result's "error" */
} h3_request_error;

/* What a request file holds: the valid requests and the rejected lines, in file order. */
typedef struct {
  h3_request *req;
  int64_t n;
  h3_request_error *rejected;
  int64_t n_rejected;
} h3_requests;

typedef struct {
  bool strict;     /* stop at the first bad line and fail (default: keep going) */
  size_t max_line; /* the line limit in bytes; 0 = H3_REQUESTS_MAX_LINE */
} h3_requests_options;

/* Reads the request file `path` ("-": standard input; FIFOs work) into *out, in time
 * linear in its size. Each bad line is one error in `d` at its FILE:LINE:COL, naming the
 * request's id when the line has a valid one, with a hint; it is also kept in
 * out->rejected. Returns H3_OK when the file was read to its end (also when lines were
 * rejected: the engine answers them with failed results); H3_ERR when it cannot be read,
 * holds no request line at all, memory runs out, or (opt->strict) at the first bad line.
 * `opt` may be NULL (defaults). *out is valid (possibly empty) either way: free it with
 * h3_requests_free. A regular file read is registered as an input, so no output replaces
 * it. */
h3_status h3_requests_read(const char *path, const h3_requests_options *opt, h3_requests *out,
                           h3_diag *d);
/* The same over bytes in memory (`name` is the file name in messages; the fuzz target). */
h3_status h3_requests_read_memory(const char *name, const char *text, size_t len,
                                  const h3_requests_options *opt, h3_requests *out, h3_diag *d);
void h3_requests_free(h3_requests *r);

/* n requests with ids "0" .. "n-1" (as integers), prompts of prompt_len ids uniform in
 * [0, vocab) (Philox stream "serve.prompt" under `seed`, element request * prompt_len + i:
 * floor(u * vocab)), max_new_tokens = output_len, temperature 0, arrival 0, no seed, no
 * eos. An error for a count or length < 1, a vocab outside [1, 2^31), or no memory. */
h3_status h3_requests_random(int64_t n, int64_t prompt_len, int64_t output_len, int64_t vocab,
                             uint64_t seed, h3_requests *out, h3_diag *d);

/* The model's checks of one request: an empty prompt, a token id outside [0, vocab), eos
 * outside [0, vocab), prompt_len + max_new_tokens > max_ctx. Returns H3_OK, or H3_ERR with
 * the first problem in msg[0 .. n) (NUL-terminated, cut to fit) and what to change in *hint
 * (static text; hint may be NULL). A limit <= 0 is not checked. */
h3_status h3_request_check(const h3_request *r, int64_t vocab, int64_t max_ctx, char *msg, size_t n,
                           const char **hint);

/* ---- the oracle of forced acceptance (bench only) --------------------------------------- */
/* The tokens of a results file (an earlier plain greedy run of the same requests), matched
 * to reqs[0 .. n) by id: tokens[i] (n_tokens[i] ids) or NULL when the file has no line for
 * request i; matched counts the requests found. Lines are JSON objects with "id" and
 * "tokens" (other keys skipped); the first malformed line is an error at FILE:LINE:COL. */
typedef struct {
  int32_t **tokens;
  int64_t *n_tokens;
  int64_t matched;
} h3_oracle;

h3_status h3_oracle_read(const char *path, const h3_request *reqs, int64_t n, h3_oracle *out,
                         h3_diag *d);
void h3_oracle_free(h3_oracle *o, int64_t n);

/* ---- results ------------------------------------------------------------------------ */
typedef enum { H3_FINISH_LENGTH, H3_FINISH_EOS, H3_FINISH_ERROR } h3_finish_reason;

/* One finished request, as the engine hands it to the writer. Times are seconds on one
 * clock (the engine's: seconds after its start). */
typedef struct {
  const char *id; /* NULL: written as null (a rejected line without a valid id) */
  bool id_is_int; /* write the id as a JSON integer (its text must be one) */
  const int32_t *tokens;
  int64_t n_tokens;
  h3_finish_reason finish;
  int64_t prompt_len;     /* < 0: unknown (null) */
  double arrival;         /* when the request arrived */
  const double *token_at; /* [n_tokens] when each token was produced; NULL: no timings */
  const char *error;      /* H3_FINISH_ERROR: what went wrong */
  const float *margins;   /* [n_tokens] decision margins (H3_RESULTS_MARGINS), or NULL */
  int64_t forced_acceptance; /* > 0: written as "forced_acceptance" (the bench-only switch
                                of speculative serving that made these tokens) */
} h3_result;

/* h3_results_open flags: also write "itl_ms"; also write "margins" (r->margins, each
 * token's decision margin, null where not finite) */
enum { H3_RESULTS_ITL = 1, H3_RESULTS_MARGINS = 2 };

/* Writes one JSON object per line, each written (and flushed) by h3_results_write:
 *   {"id": ID, "tokens": [...], "finish_reason": "length"|"eos"|"error",
 *    "prompt_len": N, "ttft_ms": X, "tpot_ms": Y[, "itl_ms": [...]][, "error": "..."]}
 * ttft_ms = first token - arrival; tpot_ms = (last - first) / (n_tokens - 1), null with
 * fewer than two tokens; itl_ms: the n_tokens - 1 gaps between tokens; times in ms with
 * three decimals, null when unknown. "error" only for H3_FINISH_ERROR. Strings are escaped
 * to valid JSON in UTF-8 (invalid bytes become U+FFFD).
 * `path` "-" is standard output (flushed after each line); any other path goes through
 * h3_output_open (never an input, links written through, FIFOs and devices in place, a
 * regular file through a temporary file renamed over it by h3_results_close). Every line
 * written is marked complete (h3_output_keep): on SIGINT / SIGTERM the finished lines are
 * renamed into place, without a torn last line. Writes from several threads are
 * serialised. */
typedef struct h3_results_writer h3_results_writer;
h3_status h3_results_open(const char *path, unsigned flags, h3_results_writer **out, h3_diag *d);
h3_status h3_results_write(h3_results_writer *w, const h3_result *r, h3_diag *d);
/* The failed result of a rejected line: {"id": its id or null, "tokens": [], "finish_reason":
 * "error", "prompt_len": null, ..., "error": e->error}. */
h3_status h3_results_write_rejected(h3_results_writer *w, const h3_request_error *e, h3_diag *d);
/* Finishes the file (renames a regular file into place) and frees the writer. After a
 * failed write, or to give up, h3_results_abort: a regular file's target is left as it was.
 * Both free the writer; NULL is a no-op for abort. */
h3_status h3_results_close(h3_results_writer *w, h3_diag *d);
void h3_results_abort(h3_results_writer *w);

#endif
