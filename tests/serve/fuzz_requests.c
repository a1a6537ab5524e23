/* fuzz_requests.c: libFuzzer target for the request file reader (h3_requests_read_memory).
 *
 * Each input is read as a request file, keeping going and then strict (lines over 1 KiB
 * are rejected, so long lines are met often). Any input: no crash, no leak, no UB (built
 * with -fsanitize=fuzzer,address,undefined). What is read must keep the reader's contract:
 * every request in range, ids non-empty, unique and escaped back to themselves, one
 * error per rejected line, lines in order; the strict read stops exactly at the first
 * rejected line. Built only with -DH3_FUZZ=ON (clang); tests/io/fuzz_corpus_driver.c runs
 * the same function over the seed corpus in every build.
 */
#include "h3/serve_io.h"
#include "h3/strmap.h"
#include "serve_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* assert() that also holds in release builds (the corpus runs as a unit test there). */
#define REQUIRE(cond)                                                                              \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: contract broken: %s\n", __FILE__, __LINE__, #cond);                  \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* The id written as a JSON string reads back as the same bytes. */
static void check_id(const char *id) {
  h3_strbuf q, back;
  h3_strbuf_init(&q);
  h3_strbuf_init(&back);
  h3_json_quote(&q, id, strlen(id), 0);
  h3_json j;
  h3_json_init(&j, q.data, q.len);
  REQUIRE(h3_json_string(&j, &back) == H3_OK && h3_json_end(&j));
  REQUIRE(back.len == strlen(id) && memcmp(back.data, id, back.len) == 0);
  h3_strbuf_free(&q);
  h3_strbuf_free(&back);
}

static void check_request(const h3_request *r, int last_line) {
  REQUIRE(r->id && r->id[0] && r->line > last_line);
  REQUIRE(r->prompt_len >= 1 && r->max_new_tokens >= 1 && r->max_new_tokens <= INT32_MAX);
  for (int64_t i = 0; i < r->prompt_len; i++) REQUIRE(r->prompt[i] >= 0);
  REQUIRE(isfinite(r->temperature) && r->temperature >= 0);
  REQUIRE(isfinite(r->arrival) && r->arrival >= 0);
  REQUIRE(!r->has_eos || r->eos >= 0);
  REQUIRE(!r->has_seed || r->seed <= (uint64_t)INT64_MAX);
  char msg[64];
  const char *hint = NULL;
  REQUIRE(h3_request_check(r, 1000, 4096, msg, sizeof msg, &hint) == H3_OK || hint);
  check_id(r->id);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  const char *text = (const char *)data;
  h3_requests_options opt = {.max_line = 1024};
  h3_diag d;
  h3_diag_init(&d);
  h3_requests rs;
  h3_status st = h3_requests_read_memory("fuzz", text, size, &opt, &rs, &d);
  REQUIRE(st == H3_OK || rs.n + rs.n_rejected == 0);
  REQUIRE(d.errors == (st == H3_OK ? rs.n_rejected : 1));
  h3_strmap ids;
  h3_strmap_init(&ids);
  int last = 0;
  for (int64_t i = 0; i < rs.n; i++) {
    check_request(&rs.req[i], last);
    last = rs.req[i].line;
    REQUIRE(!h3_strmap_get(&ids, rs.req[i].id));
    REQUIRE(h3_strmap_put(&ids, rs.req[i].id, &rs.req[i]) == 0);
  }
  h3_strmap_free(&ids);
  last = 0;
  int64_t good_before = 0; /* requests before the first rejected line */
  for (int64_t i = 0; i < rs.n_rejected; i++) {
    const h3_request_error *e = &rs.rejected[i];
    REQUIRE(e->line > last && e->col >= 1 && e->message && e->error);
    REQUIRE(strstr(e->error, e->message));
    if (e->id) check_id(e->id);
    last = e->line;
  }
  while (rs.n_rejected && good_before < rs.n && rs.req[good_before].line < rs.rejected[0].line)
    good_before++;

  h3_diag sd;
  h3_diag_init(&sd);
  h3_requests strict;
  opt.strict = true;
  h3_status sst = h3_requests_read_memory("fuzz", text, size, &opt, &strict, &sd);
  REQUIRE((sst == H3_OK) == (st == H3_OK && rs.n_rejected == 0));
  REQUIRE(strict.n == (rs.n_rejected ? good_before : rs.n));
  REQUIRE(strict.n_rejected == (rs.n_rejected ? 1 : 0));
  h3_requests_free(&strict);
  h3_diag_free(&sd);
  h3_requests_free(&rs);
  h3_diag_free(&d);
  return 0;
}
