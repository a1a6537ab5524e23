/* test_requests.c: the request file reader (serve_io.h h3_requests_read), the model checks
 * (h3_request_check) and generated requests (h3_requests_random).
 *
 * Good files: string and integer ids, defaults, optional keys and nulls, blank lines, CRLF,
 * a byte order mark, escapes in ids, a line spanning many read blocks, stdin and a FIFO.
 * Bad lines, one table: each stands between two good lines; the diagnostic's first line
 * must be exactly "FILE:2:COL: error: MESSAGE" (COL marked by a backtick in the case) with
 * a hint, the rejected entry must carry the same place, message and the id when the line
 * has one, and both good lines must still be read. Strict mode stops at the bad line.
 */
#include "h3/rng.h"
#include "h3/serve_io.h"

#include "diag_text.h"
#include "io_test.h"

#include <fcntl.h>
#include <math.h>
#include <sys/wait.h>

static void write_text(const char *path, const char *text) {
  io_write_bytes(path, text, strlen(text));
}

static const char *const G1 = "{\"id\": \"g1\", \"prompt\": [1, 2], \"max_new_tokens\": 4}\n";
static const char *const G3 = "{\"id\": \"g3\", \"prompt\": [3], \"max_new_tokens\": 1}\n";

/* ---- good files ------------------------------------------------------------------------ */
static void test_good(void) {
  const char *path = io_path("good.jsonl");
  write_text(
      path,
      "\xEF\xBB\xBF{\"id\": \"a\", \"prompt\": [1, 2, 3], \"max_new_tokens\": 16}\n"
      "\n"
      "   \t\r\n"
      "{\"id\": 7, \"prompt\": [0], \"max_new_tokens\": 1, \"temperature\": 0.7, "
      "\"seed\": 42, \"eos\": 2, \"arrival\": 1.5}\r\n"
      "{\"id\": \"caf\\u00e9 \\ud83d\\ude00\\n\\\"q\\\\\", \"prompt\": [2147483647], "
      "\"max_new_tokens\": 2147483647, \"seed\": 9223372036854775807, "
      "\"temperature\": null, \"eos\": null, \"arrival\": 0}\n"
      "\t{ \"max_new_tokens\" : 3 , \"prompt\" : [ 5 ,6 ] , \"id\" : \"\xc3\xa9\xe2\x82\xac\" "
      "}  \r\n"
      "{\"id\":-12,\"prompt\":[9],\"max_new_tokens\":2,\"temperature\":-0,\"arrival\":2.5e-1}");
  h3_diag d;
  h3_diag_init(&d);
  h3_requests rs;
  CHECK(h3_requests_read(path, NULL, &rs, &d) == H3_OK);
  CHECK(d.errors == 0 && rs.n == 5 && rs.n_rejected == 0);
  if (rs.n == 5) {
    const h3_request *a = &rs.req[0], *b = &rs.req[1], *c = &rs.req[2], *e = &rs.req[3],
                     *f = &rs.req[4];
    CHECK(strcmp(a->id, "a") == 0 && !a->id_is_int && a->line == 1);
    CHECK(a->prompt_len == 3 && a->prompt[0] == 1 && a->prompt[2] == 3);
    CHECK(a->max_new_tokens == 16 && a->temperature == 0.0f && !a->has_seed && !a->has_eos &&
          a->arrival == 0.0);
    CHECK(strcmp(b->id, "7") == 0 && b->id_is_int && b->line == 4);
    CHECK(b->temperature == 0.7f && b->has_seed && b->seed == 42 && b->has_eos && b->eos == 2 &&
          b->arrival == 1.5);
    CHECK(strcmp(c->id, "caf\xc3\xa9 \xf0\x9f\x98\x80\n\"q\\") == 0 && c->line == 5);
    CHECK(c->prompt[0] == INT32_MAX && c->max_new_tokens == INT32_MAX);
    CHECK(c->has_seed && c->seed == (uint64_t)INT64_MAX && !c->has_eos);
    CHECK(strcmp(e->id, "\xc3\xa9\xe2\x82\xac") == 0 && e->line == 6 && e->prompt_len == 2 &&
          e->prompt[1] == 6 && e->max_new_tokens == 3);
    CHECK(strcmp(f->id, "-12") == 0 && f->id_is_int && f->line == 7 && f->arrival == 0.25);
    CHECK(f->temperature == 0.0f && !signbit(f->temperature));
  }
  h3_requests_free(&rs);
  /* the request file is registered as an input: the results may not replace it */
  h3_results_writer *w;
  CHECK(h3_results_open(path, 0, &w, &d) == H3_ERR);
  char want[600];
  snprintf(want, sizeof want, "output %s is the request file %s", path, path);
  EXPECT_ERROR(&d, want);
  h3_diag_free(&d);
}

/* ---- bad lines ------------------------------------------------------------------------- */
typedef struct {
  const char *line;    /* the bad line; a backtick marks the error's column (and is removed) */
  const char *message; /* the diagnostic's message */
  const char *id;      /* the rejected entry's id, or NULL */
} bad_case;

#define REQ "\"prompt\": [1], \"max_new_tokens\": 4"
static const bad_case bad_cases[] = {
    /* keys */
    {"{\"id\": \"a\", " REQ ", `\"promt\": 1}", "request \"a\": unknown key \"promt\"", "a"},
    {"{\"id\": \"a\", \"\\u0070rompt\": [1], `\"prompt\": [2], \"max_new_tokens\": 4}",
     "request \"a\": duplicate key \"prompt\"", "a"},
    {"{\"id\": 1, `\"id\": 2, " REQ "}", "request 1: duplicate key \"id\"", "1"},
    {"`{\"id\": \"a\", \"prompt\": [1]}", "request \"a\": missing \"max_new_tokens\"", "a"},
    {"`{\"prompt\": [1], \"max_new_tokens\": 4}", "missing \"id\"", NULL},
    {"`{\"id\": \"a\", \"max_new_tokens\": 4}", "request \"a\": missing \"prompt\"", "a"},
    {"`{}", "missing \"id\"", NULL},
    {"{\"id\": \"a\", " REQ ", `\"a\\u0000b\": 1}", "request \"a\": unknown key \"a\\u0000b\"",
     "a"},
    /* ids */
    {"{\"id\": `[1], " REQ "}", "\"id\" must be a string or an integer, found an array", NULL},
    {"{\"id\": `{\"x\": 1}, " REQ "}", "\"id\" must be a string or an integer, found an object",
     NULL},
    {"{\"id\": `1.5, " REQ "}", "\"id\" must be a string or an integer, found 1.5", NULL},
    {"{\"id\": `null, " REQ "}", "\"id\" must be a string or an integer, found null", NULL},
    {"{\"id\": `\"\", " REQ "}", "\"id\" is empty", NULL},
    {"{\"id\": `\"a\\u0000b\", " REQ "}", "\"id\" contains U+0000", NULL},
    {"{\"id\": `\"g1\", " REQ "}", "request \"g1\": the id is already used on line 1", "g1"},
    /* the id comes after the error: found by a plain scan */
    {"{\"prompt\": [`-1], \"id\": \"late\", \"max_new_tokens\": 4}",
     "request \"late\": prompt[0] must be a token id in [0, 2147483647], found -1", "late"},
    /* prompt */
    {"{\"id\": \"a\", \"prompt\": `\"hello\", \"max_new_tokens\": 4}",
     "request \"a\": \"prompt\" must be an array of token ids, found a string", "a"},
    {"{\"id\": \"a\", \"prompt\": `[], \"max_new_tokens\": 4}",
     "request \"a\": \"prompt\" is empty", "a"},
    {"{\"id\": \"a\", \"prompt\": [1, `2.5], \"max_new_tokens\": 4}",
     "request \"a\": prompt[1] must be a token id in [0, 2147483647], found 2.5", "a"},
    {"{\"id\": \"a\", \"prompt\": [1, 2, `2147483648], \"max_new_tokens\": 4}",
     "request \"a\": prompt[2] must be a token id in [0, 2147483647], found 2147483648", "a"},
    {"{\"id\": \"a\", \"prompt\": [`99999999999999999999999999999999], \"max_new_tokens\": 4}",
     "request \"a\": prompt[0] must be a token id in [0, 2147483647], found "
     "999999999999999999999999...",
     "a"},
    {"{\"id\": \"a\", \"prompt\": [1, `[2]], \"max_new_tokens\": 4}",
     "request \"a\": prompt[1] must be a token id in [0, 2147483647], found an array", "a"},
    {"{\"id\": \"a\", \"prompt\": [`\"1\"], \"max_new_tokens\": 4}",
     "request \"a\": prompt[0] must be a token id in [0, 2147483647], found a string", "a"},
    {"{\"id\": \"a\", \"prompt\": [`1e999], \"max_new_tokens\": 4}",
     "request \"a\": prompt[0] must be a token id in [0, 2147483647], found 1e999", "a"},
    {"{\"id\": \"a\", \"prompt\": [1, `], \"max_new_tokens\": 4}",
     "request \"a\": expected a value, found ']'", "a"},
    {"{\"id\": \"a\", \"prompt\": [1 `2], \"max_new_tokens\": 4}",
     "request \"a\": expected ',' or ']', found '2'", "a"},
    /* numbers */
    {"{\"id\": \"a\", \"prompt\": [1], \"max_new_tokens\": `0}",
     "request \"a\": \"max_new_tokens\" must be an integer in [1, 2147483647], found 0", "a"},
    {"{\"id\": \"a\", \"prompt\": [1], \"max_new_tokens\": `3000000000}",
     "request \"a\": \"max_new_tokens\" must be an integer in [1, 2147483647], found 3000000000",
     "a"},
    {"{\"id\": \"a\", \"prompt\": [1], \"max_new_tokens\": `\"16\"}",
     "request \"a\": \"max_new_tokens\" must be an integer in [1, 2147483647], found a string",
     "a"},
    {"{\"id\": \"a\", \"prompt\": [1], \"max_new_tokens\": `16.0}",
     "request \"a\": \"max_new_tokens\" must be an integer in [1, 2147483647], found 16.0", "a"},
    {"{\"id\": \"a\", \"prompt\": [1], \"max_new_tokens\": `null}",
     "request \"a\": \"max_new_tokens\" must be an integer in [1, 2147483647], found null", "a"},
    {"{\"id\": \"a\", \"prompt\": [1], \"max_new_tokens\": `016}",
     "request \"a\": invalid number '016'", "a"},
    {"{\"id\": \"a\", \"prompt\": [1], \"max_new_tokens\": `+5}",
     "request \"a\": invalid value '+5'", "a"},
    {"{\"id\": \"a\", \"prompt\": [1], \"max_new_tokens\": `0x10}",
     "request \"a\": invalid number '0x10'", "a"},
    {"{\"id\": \"a\", \"prompt\": [1], \"max_new_tokens\": `1.}",
     "request \"a\": invalid number '1.'", "a"},
    {"{\"id\": \"a\", \"prompt\": [1], \"max_new_tokens\": `-}",
     "request \"a\": invalid number '-'", "a"},
    {"{\"id\": \"a\", " REQ ", \"temperature\": `-0.5}",
     "request \"a\": \"temperature\" must be a number >= 0, found -0.5", "a"},
    {"{\"id\": \"a\", " REQ ", \"temperature\": `1e999}",
     "request \"a\": \"temperature\" must be a finite number, found 1e999", "a"},
    {"{\"id\": \"a\", " REQ ", \"temperature\": `1e39}",
     "request \"a\": \"temperature\" must be a finite number, found 1e39", "a"},
    {"{\"id\": \"a\", " REQ ", \"temperature\": `NaN}", "request \"a\": invalid value 'NaN'", "a"},
    {"{\"id\": \"a\", " REQ ", \"temperature\": `Infinity}",
     "request \"a\": invalid value 'Infinity'", "a"},
    {"{\"id\": \"a\", " REQ ", \"temperature\": `\"0.7\"}",
     "request \"a\": \"temperature\" must be a number >= 0, found a string", "a"},
    {"{\"id\": \"a\", " REQ ", \"temperature\": `True}", "request \"a\": invalid value 'True'",
     "a"},
    {"{\"id\": \"a\", " REQ ", \"seed\": `-1}",
     "request \"a\": \"seed\" must be an integer in [0, 9223372036854775807], found -1", "a"},
    {"{\"id\": \"a\", " REQ ", \"seed\": `9223372036854775808}",
     "request \"a\": \"seed\" must be an integer in [0, 9223372036854775807], found "
     "9223372036854775808",
     "a"},
    {"{\"id\": \"a\", " REQ ", \"eos\": `-1}",
     "request \"a\": \"eos\" must be a token id in [0, 2147483647], found -1", "a"},
    {"{\"id\": \"a\", " REQ ", \"arrival\": `-1}",
     "request \"a\": \"arrival\" must be a number >= 0, found -1", "a"},
    {"{\"id\": \"a\", " REQ ", \"arrival\": `true}",
     "request \"a\": \"arrival\" must be a number >= 0, found true", "a"},
    /* structure */
    {"{\"id\": \"a\", " REQ "} `x", "request \"a\": unexpected text after the request's '}'", "a"},
    {"{\"id\": \"a\", " REQ "}`{\"id\": \"b\", " REQ "}",
     "request \"a\": unexpected text after the request's '}'", "a"},
    {"{\"id\": \"a\", " REQ "`", "request \"a\": the line ends inside an object", "a"},
    {"{`", "the line ends inside the request", NULL},
    {"{\"id\": \"a\", " REQ ", `}", "request \"a\": expected a key after ','", "a"},
    {"{\"id\": \"a\" `\"prompt\": [1]}", "request \"a\": expected ',' or '}', found '\"'", "a"},
    {"{\"id\" `\"a\"}", "expected ':' after the key \"id\"", NULL},
    {"{`'id': 'a'}", "expected a key, found '''", NULL},
    {"{`id: \"a\"}", "expected a key, found 'i'", NULL},
    {"`[1, 2]", "a request is a JSON object, found an array", NULL},
    {"`hello", "invalid value 'hello'", NULL},
    {"`\"just a string\"", "a request is a JSON object, found a string", NULL},
    {"{\"id\": \"a\", " REQ ", `/* c */}", "request \"a\": expected a key, found '/'", "a"},
    /* strings */
    {"{\"id\": \"a`\xff\", " REQ "}", "invalid UTF-8 in a string (byte 0xFF)", NULL},
    {"{\"id\": \"`\xc0\xaf\", " REQ "}", "invalid UTF-8 in a string (byte 0xC0)", NULL},
    {"{\"id\": \"`\xed\xa0\x80\", " REQ "}", "invalid UTF-8 in a string (byte 0xED)", NULL},
    {"{\"id\": \"`\xf4\x90\x80\x80\", " REQ "}", "invalid UTF-8 in a string (byte 0xF4)", NULL},
    {"{\"id\": \"ab`\xe2\x82\", " REQ "}", "invalid UTF-8 in a string (byte 0xE2)", NULL},
    {"{\"id\": \"a`\\x\", " REQ "}", "invalid escape '\\x'", NULL},
    {"{\"id\": \"a`\\u12G4\", " REQ "}", "invalid \\u escape: it takes 4 hex digits", NULL},
    {"{\"id\": \"`\\ud800\", " REQ "}", "invalid \\u escape: a lone surrogate \\uD800", NULL},
    {"{\"id\": \"`\\ud800\\u0041\", " REQ "}", "invalid \\u escape: a lone surrogate \\uD800",
     NULL},
    {"{\"id\": \"`\\udc00\", " REQ "}", "invalid \\u escape: a lone surrogate \\uDC00", NULL},
    {"{\"id\": \"a`\tb\", " REQ "}", "control character U+0009 in a string", NULL},
    {"{\"id\": `\"abc", "the string is not closed on its line", NULL},
    {"{\"id\": \"a\", `\"pro\\", "request \"a\": the string is not closed on its line", "a"},
    {"{\"id\": \"a\", " REQ ", `\xc3\xa9: 1}", "request \"a\": unexpected byte 0xC3", "a"},
    {"{\"id\": \"a\", " REQ "}`\x01", "request \"a\": unexpected text after the request's '}'",
     "a"},
};

/* The case's line without its marker (static buffer) and the marker's column. */
static const char *unmark(const char *line, size_t *len, int *col) {
  static char buf[512];
  const char *m = strchr(line, '`');
  *col = (int)(m - line) + 1;
  *len = strlen(line) - 1;
  memcpy(buf, line, (size_t)(m - line));
  memcpy(buf + (m - line), m + 1, strlen(m + 1) + 1);
  return buf;
}

static void test_bad_line(const bad_case *c) {
  const char *path = io_path("bad.jsonl");
  size_t len;
  int col;
  const char *line = unmark(c->line, &len, &col);
  h3_strbuf text;
  h3_strbuf_init(&text);
  h3_strbuf_append(&text, G1);
  h3_strbuf_appendn(&text, line, len);
  h3_strbuf_append(&text, "\n");
  h3_strbuf_append(&text, G3);
  io_write_bytes(path, text.data, text.len);
  h3_strbuf_free(&text);

  h3_diag d;
  h3_diag_init(&d);
  h3_requests rs;
  char want[600];
  snprintf(want, sizeof want, "%s:2:%d: error: %s\nhint: ", path, col, c->message);
  CHECK(h3_requests_read(path, NULL, &rs, &d) == H3_OK);
  char *got = diag_text(&d);
  bool ok = d.errors == 1 && got && strncmp(got, want, strlen(want)) == 0;
  ok = ok && rs.n == 2 && strcmp(rs.req[0].id, "g1") == 0 && strcmp(rs.req[1].id, "g3") == 0 &&
       rs.req[1].line == 3;
  if (ok && rs.n_rejected == 1) {
    const h3_request_error *e = &rs.rejected[0];
    char where[600];
    snprintf(where, sizeof where, "%s:2:%d: %s", path, col, e->message);
    ok = e->line == 2 && e->col == col && strcmp(e->error, where) == 0 &&
         strstr(c->message, e->message) != NULL &&
         (c->id ? e->id && strcmp(e->id, c->id) == 0 : e->id == NULL);
  } else {
    ok = false;
  }
  if (!ok) {
    fprintf(stderr, "case %s\n  want: %s\n  got:  %s  (%lld good, %lld rejected)\n", c->line, want,
            got ? got : "", (long long)rs.n, (long long)rs.n_rejected);
    io_failures++;
  }
  free(got);
  h3_requests_free(&rs);
  h3_diag_free(&d);

  /* strict: stops at the bad line */
  h3_diag_init(&d);
  h3_requests_options strict = {.strict = true};
  CHECK(h3_requests_read(path, &strict, &rs, &d) == H3_ERR);
  CHECK(d.errors == 1 && rs.n == 1 && rs.n_rejected == 1);
  h3_requests_free(&rs);
  h3_diag_free(&d);
}

/* ---- limits and sources ---------------------------------------------------------------- */
static void test_limits(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_requests rs;
  /* a line over a small limit: rejected, with its id when that comes first */
  h3_strbuf t;
  h3_strbuf_init(&t);
  h3_strbuf_append(&t, "{\"id\": \"long\", \"prompt\": [1");
  for (int i = 0; i < 300; i++) h3_strbuf_append(&t, ", 12345");
  h3_strbuf_append(&t, "], \"max_new_tokens\": 4}\n");
  h3_strbuf_append(&t, G3);
  h3_requests_options small = {.max_line = 100};
  CHECK(h3_requests_read_memory("mem", t.data, t.len, &small, &rs, &d) == H3_OK);
  CHECK(rs.n == 1 && rs.n_rejected == 1 && rs.rejected[0].col == 101 && rs.rejected[0].id &&
        strcmp(rs.rejected[0].id, "long") == 0);
  EXPECT_ERROR(&d, "request \"long\": the line is longer than 100 bytes");
  h3_requests_free(&rs);
  h3_diag_free(&d);
  /* the same line is fine under the default limit */
  h3_diag_init(&d);
  CHECK(h3_requests_read_memory("mem", t.data, t.len, NULL, &rs, &d) == H3_OK);
  CHECK(rs.n == 2 && rs.req[0].prompt_len == 301 && d.errors == 0);
  h3_requests_free(&rs);
  h3_diag_free(&d);
  h3_strbuf_free(&t);

  /* a line just over the default limit (64 MiB) through a file: many read blocks */
  const char *path = io_path("big.jsonl");
  size_t n = H3_REQUESTS_MAX_LINE + 1;
  char *big = malloc(n + 200);
  size_t k = (size_t)sprintf(big, "%s{\"id\": \"big\", \"prompt\": [", G1);
  size_t start = k;
  for (; k - start + 30 < n; k += 3) memcpy(big + k, "7, ", 3);
  k += (size_t)sprintf(big + k, "7], \"max_new_tokens\": 1}");
  while (k - start < n) big[k++] = ' '; /* padded to the limit + 1 byte */
  big[k++] = '\n';
  memcpy(big + k, G3, strlen(G3));
  io_write_bytes(path, big, k + strlen(G3));
  free(big);
  h3_diag_init(&d);
  CHECK(h3_requests_read(path, NULL, &rs, &d) == H3_OK);
  CHECK(rs.n == 2 && rs.n_rejected == 1 && rs.rejected[0].line == 2 &&
        rs.rejected[0].col == (int)H3_REQUESTS_MAX_LINE + 1);
  EXPECT_ERROR(&d, "request \"big\": the line is longer than 67108864 bytes");
  h3_requests_free(&rs);
  h3_diag_free(&d);
  unlink(path);

  /* no requests, no file */
  h3_diag_init(&d);
  CHECK(h3_requests_read_memory("empty", "\n  \n", 4, NULL, &rs, &d) == H3_ERR && rs.n == 0);
  EXPECT_ERROR(&d, "no requests: the file is empty or has only blank lines");
  CHECK(h3_requests_read(io_path("missing.jsonl"), NULL, &rs, &d) == H3_ERR);
  h3_diag_free(&d);
}

/* A child writes `text` into fd and exits. */
static pid_t feed(int fd, const char *text) {
  pid_t pid = fork();
  if (pid == 0) {
    size_t n = strlen(text);
    _exit(write(fd, text, n) == (ssize_t)n ? 0 : 1);
  }
  return pid;
}

static void test_streams(void) {
  char text[256];
  snprintf(text, sizeof text, "%s\n%s", G1, G3);
  h3_diag d;
  h3_diag_init(&d);
  h3_requests rs;
  /* a FIFO */
  const char *fifo = io_path("requests.fifo");
  CHECK(mkfifo(fifo, 0600) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(fifo, O_WRONLY);
    size_t n = strlen(text);
    _exit(fd >= 0 && write(fd, text, n) == (ssize_t)n ? 0 : 1);
  }
  CHECK(h3_requests_read(fifo, NULL, &rs, &d) == H3_OK && rs.n == 2 && rs.req[1].line == 3);
  int status;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  h3_requests_free(&rs);
  unlink(fifo);
  /* standard input ("-"), named <stdin> in messages */
  int p[2];
  CHECK(pipe(p) == 0);
  pid = feed(p[1], "{\"id\": \"s\", \"prompt\": [1], \"max_new_tokens\": 1}\n{\"id\": \"s\"}\n");
  close(p[1]);
  int saved = dup(STDIN_FILENO);
  dup2(p[0], STDIN_FILENO);
  close(p[0]);
  CHECK(h3_requests_read("-", NULL, &rs, &d) == H3_OK && rs.n == 1 && rs.n_rejected == 1);
  dup2(saved, STDIN_FILENO);
  close(saved);
  clearerr(stdin);
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(rs.n_rejected == 1 && strcmp(rs.rejected[0].error, "<stdin>:2:1: missing \"prompt\"") == 0);
  h3_requests_free(&rs);
  h3_diag_free(&d);
}

/* ---- random requests and the model's checks ------------------------------------------------ */
static void test_random(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_requests a, b, c;
  CHECK(h3_requests_random(5, 7, 3, 100, 42, &a, &d) == H3_OK);
  CHECK(h3_requests_random(5, 7, 3, 100, 42, &b, &d) == H3_OK);
  CHECK(h3_requests_random(5, 7, 3, 100, 43, &c, &d) == H3_OK);
  int same_seed = 1, other_seed = 1;
  uint32_t stream = h3_rng_stream_id("serve.prompt");
  for (int64_t r = 0; r < a.n; r++) {
    char id[8];
    snprintf(id, sizeof id, "%d", (int)r);
    CHECK(strcmp(a.req[r].id, id) == 0 && a.req[r].id_is_int && a.req[r].prompt_len == 7 &&
          a.req[r].max_new_tokens == 3 && a.req[r].temperature == 0.0f && a.req[r].arrival == 0.0 &&
          !a.req[r].has_seed && !a.req[r].has_eos);
    for (int i = 0; i < 7; i++) {
      int32_t t = a.req[r].prompt[i];
      uint64_t w = h3_rng_block(42, stream, (uint64_t)(r * 7 + i)).w[0];
      CHECK(t >= 0 && t < 100 && t == (int32_t)((w * 100) >> 32));
      same_seed &= t == b.req[r].prompt[i];
      other_seed &= t == c.req[r].prompt[i];
    }
    CHECK(h3_request_check(&a.req[r], 100, 10, NULL, 0, NULL) == H3_OK);
  }
  CHECK(a.n == 5 && same_seed && !other_seed);
  h3_requests_free(&a);
  h3_requests_free(&b);
  h3_requests_free(&c);
  CHECK(h3_requests_random(2, 1, 1, 1, 0, &a, &d) == H3_OK && a.req[1].prompt[0] == 0);
  h3_requests_free(&a);
  CHECK(d.errors == 0);
  CHECK(h3_requests_random(0, 1, 1, 10, 0, &a, &d) == H3_ERR && a.n == 0);
  CHECK(h3_requests_random(1, 1, 1, (int64_t)1 << 32, 0, &a, &d) == H3_ERR);
  h3_diag_free(&d);

  int32_t prompt[3] = {1, 99, 5};
  h3_request q = {.id = "q", .prompt = prompt, .prompt_len = 3, .max_new_tokens = 8};
  char msg[128];
  const char *hint = NULL;
  CHECK(h3_request_check(&q, 100, 11, msg, sizeof msg, &hint) == H3_OK && !hint);
  CHECK(h3_request_check(&q, 99, 0, msg, sizeof msg, &hint) == H3_ERR &&
        strcmp(msg, "token id 99 at prompt[1] is outside the vocabulary [0, 99)") == 0 &&
        strstr(hint, "vocab"));
  CHECK(h3_request_check(&q, 100, 10, msg, sizeof msg, &hint) == H3_ERR &&
        strcmp(msg, "prompt_len 3 + max_new_tokens 8 is more than the context length 10") == 0 &&
        strstr(hint, "max_ctx"));
  q.has_eos = true;
  q.eos = 100;
  CHECK(h3_request_check(&q, 100, 0, msg, sizeof msg, NULL) == H3_ERR &&
        strcmp(msg, "eos 100 is outside the vocabulary [0, 100)") == 0);
  CHECK(h3_request_check(&q, 0, 0, msg, sizeof msg, NULL) == H3_OK); /* limits <= 0: unchecked */
  q.prompt_len = 0;
  CHECK(h3_request_check(&q, 0, 0, msg, 8, &hint) == H3_ERR && strcmp(msg, "the pro") == 0 && hint);
}

int main(void) {
  io_scratch_make("serve_requests");
  test_good();
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) test_bad_line(&bad_cases[i]);
  test_limits();
  test_streams();
  test_random();
  io_scratch_done();
  printf("test_requests: %zu bad-line cases\n", sizeof bad_cases / sizeof bad_cases[0]);
  if (io_failures) fprintf(stderr, "%d failure(s)\n", io_failures);
  return io_failures != 0;
}
