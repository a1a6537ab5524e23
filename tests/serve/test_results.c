/* test_results.c: the results writer (serve_io.h h3_results_*).
 *
 * Exact lines for a string id full of characters to escape, an integer id, an invalid
 * UTF-8 id, a failed request, a rejected line without an id and the "itl_ms" option; every
 * line reads back through the strict scanner (serve_json.h) with the same id. Standard
 * output ("-"); an interrupt keeps the finished lines; abort leaves the old file; lines
 * from four threads never interleave.
 *   serve_test_results            runs the tests
 *   serve_test_results --write F  writes the sample lines to F (check_results.py reads them)
 */
#include "h3/serve_io.h"
#include "serve_json.h"

#include "io_test.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

static const int32_t toks[3] = {1, 2, 3};
static const double at3[3] = {1.010, 1.020, 1.040};
static const double at1[1] = {0.5};

/* The sample results, the lines they give, and their "itl_ms" with H3_RESULTS_ITL (the key
 * then stands before "error", or last). */
static const struct {
  h3_result r;
  const char *line, *itl;
} samples[] = {
    {{.id = "a\"b\\c\n\x01\x7f\xc3\xa9\xf0\x9f\x98\x80/", .tokens = toks, .n_tokens = 3,
      .finish = H3_FINISH_LENGTH, .prompt_len = 5, .arrival = 1.0, .token_at = at3},
     "{\"id\": \"a\\\"b\\\\c\\n\\u0001\\u007f\xc3\xa9\xf0\x9f\x98\x80/\", \"tokens\": [1, 2, 3], "
     "\"finish_reason\": \"length\", \"prompt_len\": 5, \"ttft_ms\": 10.000, \"tpot_ms\": 15.000}",
     "[10.000, 20.000]"},
    {{.id = "7", .id_is_int = true, .tokens = toks + 2, .n_tokens = 1, .finish = H3_FINISH_EOS,
      .prompt_len = 1, .arrival = 0.25, .token_at = at1},
     "{\"id\": 7, \"tokens\": [3], \"finish_reason\": \"eos\", \"prompt_len\": 1, "
     "\"ttft_ms\": 250.000, \"tpot_ms\": null}",
     "[]"},
    {{.id = "x\xff\xc3", .finish = H3_FINISH_ERROR, .prompt_len = 3, .error = "boom \"q\"\t"},
     "{\"id\": \"x\\ufffd\\ufffd\", \"tokens\": [], \"finish_reason\": \"error\", "
     "\"prompt_len\": 3, \"ttft_ms\": null, \"tpot_ms\": null, \"error\": \"boom \\\"q\\\"\\t\"}",
     "null"},
    {{.id = "12x", .id_is_int = true, .tokens = toks, .n_tokens = 2, .finish = H3_FINISH_LENGTH,
      .prompt_len = 2},
     "{\"id\": \"12x\", \"tokens\": [1, 2], \"finish_reason\": \"length\", \"prompt_len\": 2, "
     "\"ttft_ms\": null, \"tpot_ms\": null}",
     "null"},
};
enum { N_SAMPLES = sizeof samples / sizeof samples[0] };
static const char *const REJECTED_LINE =
    "{\"id\": null, \"tokens\": [], \"finish_reason\": \"error\", \"prompt_len\": null, "
    "\"ttft_ms\": null, \"tpot_ms\": null, \"error\": \"r.jsonl:2:5: missing \\\"id\\\"\"}";

/* The line expected with H3_RESULTS_ITL: ", \"itl_ms\": ITL" inserted before ", \"error\""
 * or the closing '}' (a static buffer). */
static const char *with_itl(const char *line, const char *itl) {
  static char buf[1024];
  const char *at = strstr(line, ", \"error\"");
  size_t head = at ? (size_t)(at - line) : strlen(line) - 1;
  snprintf(buf, sizeof buf, "%.*s, \"itl_ms\": %s%s", (int)head, line, itl, line + head);
  return buf;
}

static h3_status write_samples(const char *path, unsigned flags, h3_diag *d) {
  h3_results_writer *w;
  if (h3_results_open(path, flags, &w, d) != H3_OK) return H3_ERR;
  for (int i = 0; i < N_SAMPLES; i++)
    if (h3_results_write(w, &samples[i].r, d) != H3_OK) {
      h3_results_abort(w);
      return H3_ERR;
    }
  h3_request_error e = {
      .line = 2, .col = 5, .message = "missing \"id\"", .error = "r.jsonl:2:5: missing \"id\""};
  if (h3_results_write_rejected(w, &e, d) != H3_OK) {
    h3_results_abort(w);
    return H3_ERR;
  }
  return h3_results_close(w, d);
}

/* The bytes of a file (malloc'd, NUL-terminated) without registering it as an input. */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  h3_strbuf b;
  h3_strbuf_init(&b);
  char chunk[4096];
  for (size_t n; (n = fread(chunk, 1, sizeof chunk, f)) > 0;) h3_strbuf_appendn(&b, chunk, n);
  fclose(f);
  if (!b.data) h3_strbuf_append(&b, "");
  return b.data;
}

/* Line i (0-based) of text into buf; false when there is none. */
static bool line_at(const char *text, int i, char *buf, size_t n) {
  for (; i > 0 && text; i--) text = (text = strchr(text, '\n')) ? text + 1 : NULL;
  if (!text || !*text) return false;
  const char *nl = strchr(text, '\n');
  size_t len = nl ? (size_t)(nl - text) : strlen(text);
  if (len >= n) len = n - 1;
  memcpy(buf, text, len);
  buf[len] = '\0';
  return true;
}

/* A line is one valid JSON object whose "id" member decodes to `id` (NULL: null). */
static bool reads_back(const char *line, const char *id) {
  h3_json j;
  h3_json_init(&j, line, strlen(line));
  if (h3_json_peek(&j) != H3_JSON_OBJECT || h3_json_skip(&j) != H3_OK || !h3_json_end(&j))
    return false;
  h3_json_init(&j, line, strlen(line));
  h3_strbuf key, val;
  h3_strbuf_init(&key);
  h3_strbuf_init(&val);
  bool ok = h3_json_eat(&j, '{') && h3_json_string(&j, &key) == H3_OK &&
            strcmp(key.data, "id") == 0 && h3_json_eat(&j, ':');
  if (ok && id && h3_json_peek(&j) == H3_JSON_STRING)
    ok = h3_json_string(&j, &val) == H3_OK && strcmp(val.data, id) == 0;
  else if (ok && id)
    ok = strncmp(j.s + j.pos, id, strlen(id)) == 0;
  else if (ok)
    ok = h3_json_peek(&j) == H3_JSON_NULL;
  h3_strbuf_free(&key);
  h3_strbuf_free(&val);
  return ok;
}

static void test_lines(unsigned flags) {
  const char *path = io_path("results.jsonl");
  h3_diag d;
  h3_diag_init(&d);
  CHECK(write_samples(path, flags, &d) == H3_OK && d.errors == 0);
  char *text = slurp(path);
  char line[1024];
  for (int i = 0; i < N_SAMPLES; i++) {
    const char *want =
        flags & H3_RESULTS_ITL ? with_itl(samples[i].line, samples[i].itl) : samples[i].line;
    bool ok = text && line_at(text, i, line, sizeof line) && strcmp(line, want) == 0;
    if (!ok) fprintf(stderr, "line %d\n  want: %s\n  got:  %s\n", i + 1, want, line);
    CHECK(ok);
    const char *id = i == 2 ? "x\xef\xbf\xbd\xef\xbf\xbd" : samples[i].r.id; /* U+FFFD twice */
    CHECK(reads_back(line, id));
  }
  const char *rejected = flags & H3_RESULTS_ITL ? with_itl(REJECTED_LINE, "null") : REJECTED_LINE;
  CHECK(line_at(text, N_SAMPLES, line, sizeof line) && strcmp(line, rejected) == 0);
  CHECK(reads_back(line, NULL));
  CHECK(!line_at(text, N_SAMPLES + 1, line, sizeof line));
  CHECK(text && text[strlen(text) - 1] == '\n');
  free(text);
  unlink(path);
  h3_diag_free(&d);
}

/* "-": standard output, in a child whose stdout is a file. */
static void test_stdout(void) {
  const char *path = io_path("stdout.jsonl");
  pid_t pid = fork();
  if (pid == 0) {
    if (!freopen(path, "w", stdout)) _exit(2);
    h3_diag d;
    h3_diag_init(&d);
    h3_results_writer *w;
    if (h3_results_open("-", 0, &w, &d) != H3_OK || h3_results_write(w, &samples[1].r, &d) ||
        h3_results_close(w, &d))
      _exit(1);
    _exit(0);
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char *text = slurp(path), line[512];
  CHECK(text && line_at(text, 0, line, sizeof line) && strcmp(line, samples[1].line) == 0);
  free(text);
  unlink(path);
}

/* SIGTERM after two lines: they are the file, the old content is gone, no temporary file. */
static void test_interrupt(void) {
  const char *path = io_path("interrupted.jsonl");
  io_write_bytes(path, "old\n", 4);
  int before = io_scratch_count();
  int ready[2], err[2];
  CHECK(pipe(ready) == 0 && pipe(err) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(err[1], STDERR_FILENO);
    h3_diag d;
    h3_diag_init(&d);
    d.program = "test_results";
    h3_results_writer *w;
    if (h3_results_open(path, 0, &w, &d) != H3_OK || h3_results_write(w, &samples[0].r, &d) ||
        h3_results_write(w, &samples[1].r, &d) || write(ready[1], "x", 1) != 1)
      _exit(3);
    for (;;) pause();
  }
  close(ready[1]);
  close(err[1]);
  char c, msg[600] = {0}, want[600];
  CHECK(read(ready[0], &c, 1) == 1);
  CHECK(kill(pid, SIGTERM) == 0);
  int status;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 143);
  CHECK(read(err[0], msg, sizeof msg - 1) > 0);
  snprintf(want, sizeof want, "test_results: interrupted; %s holds the output written so far\n",
           path);
  CHECK(strcmp(msg, want) == 0);
  close(ready[0]);
  close(err[0]);
  char *text = slurp(path), line[1024];
  CHECK(text && line_at(text, 0, line, sizeof line) && strcmp(line, samples[0].line) == 0);
  CHECK(text && line_at(text, 1, line, sizeof line) && strcmp(line, samples[1].line) == 0);
  CHECK(text && !line_at(text, 2, line, sizeof line));
  free(text);
  CHECK(io_scratch_count() == before);
  /* abort: the old content stays */
  io_write_bytes(path, "old\n", 4);
  h3_diag d;
  h3_diag_init(&d);
  h3_results_writer *w;
  CHECK(h3_results_open(path, 0, &w, &d) == H3_OK && h3_results_write(w, &samples[0].r, &d) == 0);
  h3_results_abort(w);
  text = slurp(path);
  CHECK(text && strcmp(text, "old\n") == 0);
  free(text);
  CHECK(io_scratch_count() == before);
  unlink(path);
  h3_diag_free(&d);
}

/* Four threads, 200 results each: 800 whole lines. */
static h3_results_writer *shared;
static void *writer_thread(void *arg) {
  h3_diag d;
  h3_diag_init(&d);
  for (int i = 0; i < 200; i++) h3_results_write(shared, &samples[(intptr_t)arg].r, &d);
  h3_diag_free(&d);
  return NULL;
}

static void test_threads(void) {
  const char *path = io_path("threads.jsonl");
  h3_diag d;
  h3_diag_init(&d);
  CHECK(h3_results_open(path, 0, &shared, &d) == H3_OK);
  pthread_t t[4];
  for (intptr_t i = 0; i < 4; i++) pthread_create(&t[i], NULL, writer_thread, (void *)i);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  CHECK(h3_results_close(shared, &d) == H3_OK);
  char *text = slurp(path), line[1024];
  int count[4] = {0};
  for (int i = 0; text && line_at(text, i, line, sizeof line); i++)
    for (int k = 0; k < 4; k++) count[k] += strcmp(line, samples[k].line) == 0;
  CHECK(count[0] == 200 && count[1] == 200 && count[2] == 200 && count[3] == 200);
  free(text);
  unlink(path);
  h3_diag_free(&d);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--write") == 0) {
    h3_diag d;
    h3_diag_init(&d);
    h3_status st = write_samples(argv[2], H3_RESULTS_ITL, &d);
    h3_diag_print(&d, stderr);
    h3_diag_free(&d);
    return st == H3_OK ? 0 : 1;
  }
  io_scratch_make("serve_results");
  test_lines(0);
  test_lines(H3_RESULTS_ITL);
  test_stdout();
  test_interrupt();
  test_threads();
  io_scratch_done();
  if (io_failures) fprintf(stderr, "%d failure(s)\n", io_failures);
  return io_failures != 0;
}
