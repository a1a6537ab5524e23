/* test_output.c: the output writer (support.h h3_output_*, h3_write_file_atomic).
 *
 * A file the process read (h3_read_file, a safetensors file, a weights file, an inputs
 * file) is never replaced, also not through a symlink or a hard link: the error names both
 * and the file stays as it was. Writing through a symlink replaces the file it names and
 * keeps the link; a dangling link creates its target when the folder exists, else an
 * error; a loop is an error. A FIFO gets the bytes (a child reads them) and stays a FIFO; a
 * character device stays one (a node made in the scratch folder as root, and /dev/null);
 * directories and sockets are refused. SIGINT / SIGTERM sent to a child that holds an open
 * output exit 130 / 143 with one line, remove the temporary file and leave the target as it
 * was, or, after h3_output_keep, put the marked prefix in the target's place; the default
 * disposition comes back after the write and an ignored signal stays ignored. No temporary file is ever left. The scratch folder is under $TMPDIR (or /tmp).
 */
#include "h3/safetensors.h"
#include "h3/weights.h"

#include "io_module.h"
#include "io_test.h"

#include <errno.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>

/* The bytes of `path` (NUL-terminated, malloc'd; NULL when unreadable). Not h3_read_file:
 * that registers the file, and the tests write the same files again. At most 2 MiB. */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = (size_t)1 << 21, n = 0, got;
  char *buf = malloc(cap + 1);
  while (buf && n < cap && (got = fread(buf + n, 1, cap - n, f)) > 0) n += got;
  fclose(f);
  if (buf) buf[n] = '\0';
  if (len) *len = n;
  return buf;
}

static int has_text(const char *path, const char *want) {
  char *got = slurp(path, NULL);
  int ok = got && strcmp(got, want) == 0;
  free(got);
  return ok;
}

static void put(const char *path, const char *text) {
  io_write_bytes(path, text, strlen(text));
}

static void test_basic(void) {
  h3_diag d;
  h3_diag_init(&d);
  const char *a = io_path("a.txt");
  int before = io_scratch_count();
  CHECK(h3_write_file_atomic(a, "first", 5, &d) == H3_OK);
  CHECK(h3_write_file_atomic(a, "second", 6, &d) == H3_OK && has_text(a, "second"));
  h3_output *o;
  CHECK(h3_output_open(a, &o, &d) == H3_OK);
  CHECK(h3_output_write(o, "thi", 3, &d) == H3_OK && h3_output_write(o, "rd", 2, &d) == H3_OK);
  CHECK(has_text(a, "second")); /* not before the commit */
  CHECK(h3_output_commit(o, &d) == H3_OK && has_text(a, "third"));
  CHECK(h3_output_open(a, &o, &d) == H3_OK && h3_output_write(o, "x", 1, &d) == H3_OK);
  h3_output_abort(o);
  CHECK(has_text(a, "third"));
  CHECK(io_scratch_count() == before + 1); /* a.txt, no temporary file */
  CHECK(d.errors == 0);
  h3_diag_free(&d);
}

/* Wants exactly one error, "output OUT is the ROLE IN" with the hint; clears d. */
static void expect_refused(h3_diag *d, const char *out, const char *role, const char *in) {
  char want[1200];
  snprintf(want, sizeof want, "output %s is the %s %s", out, role, in);
  EXPECT_ERROR(d, want);
  CHECK(d->errors == 1 && d->head && d->head->hint &&
        strcmp(d->head->hint, "choose another output file") == 0);
  h3_diag_free(d);
  h3_diag_init(d);
}

static void test_inputs(void) {
  h3_diag d;
  h3_diag_init(&d);
  const char *model = io_path("model.g"), *hard = io_path("hard.g"), *sym = io_path("sym.g");
  put(model, "model text");
  CHECK(h3_output_check(model, &d) == H3_OK);
  size_t len;
  free(h3_read_file(model, &len, &d));
  CHECK(h3_write_file_atomic(model, "plan", 4, &d) == H3_ERR);
  expect_refused(&d, model, "input", model);
  CHECK(link(model, hard) == 0 && symlink("model.g", sym) == 0);
  CHECK(h3_write_file_atomic(hard, "plan", 4, &d) == H3_ERR);
  expect_refused(&d, hard, "input", model);
  h3_output *o;
  CHECK(h3_output_open(sym, &o, &d) == H3_ERR && o == NULL);
  expect_refused(&d, sym, "input", model);
  CHECK(has_text(model, "model text"));

  /* a safetensors file, then the same as a weights file and as an inputs file */
  h3_module *m = io_module_new("tiny");
  h3_weights *w = h3_weights_random(m, 7, &d);
  const char *wpath = io_path("w.safetensors");
  CHECK(w && h3_weights_save_file(w, wpath, &d) == H3_OK);
  h3_safetensors *st = h3_safetensors_open(wpath, &d);
  h3_safetensors_close(st);
  CHECK(st && h3_weights_save_file(w, wpath, &d) == H3_ERR);
  expect_refused(&d, wpath, "input", wpath);
  h3_weights *back = h3_weights_load_file(m, wpath, &d);
  CHECK(back && h3_weights_save_file(w, wpath, &d) == H3_ERR);
  expect_refused(&d, wpath, "weights file", wpath);
  h3_weights_free(back);
  h3_weights_free(w);

  h3_graph *g = h3_module_graph(m, "step");
  const char *ipath = io_path("in.safetensors");
  uint16_t x[32] = {0};
  float t[2] = {0.5f, 1.5f};
  int32_t idx[4] = {0, 1, 2, 3};
  h3_safetensors_writer *wr = h3_safetensors_writer_new();
  h3_safetensors_writer_add(wr, "x", H3_BF16, 2, (int64_t[]){4, 8}, x, &d);
  h3_safetensors_writer_add(wr, "t", H3_F32, 1, (int64_t[]){2}, t, &d);
  h3_safetensors_writer_add(wr, "idx", H3_I32, 1, (int64_t[]){4}, idx, &d);
  CHECK(h3_safetensors_writer_commit(wr, ipath, &d) == H3_OK);
  h3_safetensors_writer_free(wr);
  size_t ilen;
  char *before = slurp(ipath, &ilen);
  h3_host_tensor *in = h3_inputs_load_file(g, ipath, 0, &d);
  CHECK(in != NULL);
  const void *outs[2] = {x, t};
  CHECK(h3_outputs_save_file(g, outs, ipath, &d) == H3_ERR);
  expect_refused(&d, ipath, "inputs file", ipath);
  size_t alen;
  char *after = slurp(ipath, &alen);
  CHECK(before && after && alen == ilen && memcmp(before, after, ilen) == 0);
  free(before);
  free(after);
  if (in) h3_host_tensors_free(in, g->n_inputs);
  h3_module_free(m);
  h3_diag_free(&d);
}

static void test_links(void) {
  h3_diag d;
  h3_diag_init(&d);
  CHECK(mkdir(io_path("sub"), 0755) == 0);
  const char *real = io_path("sub/real"), *link = io_path("link"), *chain = io_path("chain");
  put(real, "old");
  CHECK(symlink("sub/real", link) == 0);
  int before = io_scratch_count();
  CHECK(h3_write_file_atomic(link, "new", 3, &d) == H3_OK);
  struct stat ls;
  char to[600] = {0};
  CHECK(lstat(link, &ls) == 0 && S_ISLNK(ls.st_mode));
  CHECK(readlink(link, to, sizeof to - 1) == 8 && strcmp(to, "sub/real") == 0);
  CHECK(has_text(real, "new"));
  /* an absolute link (the scratch folder's path is absolute) to the link */
  CHECK(symlink(link, chain) == 0);
  CHECK(h3_write_file_atomic(chain, "newer", 5, &d) == H3_OK && has_text(real, "newer"));
  CHECK(lstat(chain, &ls) == 0 && S_ISLNK(ls.st_mode));
  CHECK(io_scratch_count() == before + 1); /* chain; no temporary file next to a link */

  /* dangling: the target is created when its folder exists */
  const char *dang = io_path("dang"), *bad = io_path("bad");
  CHECK(symlink("sub/made", dang) == 0);
  CHECK(h3_write_file_atomic(dang, "made", 4, &d) == H3_OK);
  CHECK(has_text(io_path("sub/made"), "made"));
  CHECK(lstat(dang, &ls) == 0 && S_ISLNK(ls.st_mode));
  CHECK(d.errors == 0);
  CHECK(symlink("nofolder/x", bad) == 0);
  CHECK(h3_write_file_atomic(bad, "x", 1, &d) == H3_ERR);
  char want[1400];
  snprintf(want, sizeof want, "cannot write %s: it is a link to %s, whose folder does not exist",
           bad, io_path("nofolder/x"));
  EXPECT_ERROR(&d, want);
  const char *l1 = io_path("loop1"), *l2 = io_path("loop2");
  CHECK(symlink("loop2", l1) == 0 && symlink("loop1", l2) == 0);
  CHECK(h3_write_file_atomic(l1, "x", 1, &d) == H3_ERR);
  snprintf(want, sizeof want, "cannot write %s: %s", l1, strerror(ELOOP));
  EXPECT_ERROR(&d, want);
  CHECK(d.errors == 2);
  CHECK(io_scratch_count() == before + 5); /* chain, dang, bad, loop1, loop2 */
  unlink(io_path("sub/real")); /* not `real`: io_path's buffers have rotated since */
  unlink(io_path("sub/made"));
  h3_diag_free(&d);
}

static void test_special(void) {
  h3_diag d;
  h3_diag_init(&d);
  int before = io_scratch_count();
  /* a FIFO: a child reads what the writer sends */
  enum { N = 1 << 20 };
  char *data = malloc(N);
  for (int i = 0; i < N; i++) data[i] = (char)io_hash((uint32_t)i, 5);
  const char *fifo = io_path("fifo");
  CHECK(mkfifo(fifo, 0600) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    size_t n;
    char *got = slurp(fifo, &n);
    _exit(got && n == N && memcmp(got, data, N) == 0 ? 0 : 1);
  }
  CHECK(h3_write_file_atomic(fifo, data, N, &d) == H3_OK);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  struct stat st;
  CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
  free(data);

  /* character devices: a /dev/null node of our own (root only), then /dev/null */
  const char *node = io_path("null");
  if (geteuid() == 0 && mknod(node, S_IFCHR | 0666, makedev(1, 3)) == 0) {
    CHECK(h3_write_file_atomic(node, "plan", 4, &d) == H3_OK);
    CHECK(lstat(node, &st) == 0 && S_ISCHR(st.st_mode));
    before++;
  }
  CHECK(h3_write_file_atomic("/dev/null", "plan", 4, &d) == H3_OK);
  CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode));
  CHECK(d.errors == 0);

  /* refused: a directory and a socket */
  const char *dir = io_path("dir"), *sock = io_path("sock");
  CHECK(mkdir(dir, 0755) == 0);
  CHECK(h3_write_file_atomic(dir, "x", 1, &d) == H3_ERR);
  char want[700];
  snprintf(want, sizeof want, "cannot write %s: it is a directory", dir);
  EXPECT_ERROR(&d, want);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
  CHECK(s >= 0 && bind(s, (struct sockaddr *)&sa, sizeof sa) == 0);
  CHECK(h3_write_file_atomic(sock, "x", 1, &d) == H3_ERR);
  snprintf(want, sizeof want, "cannot write %s: it is a socket", sock);
  EXPECT_ERROR(&d, want);
  io_expect_hints(&d, __FILE__, __LINE__);
  close(s);
  CHECK(io_scratch_count() == before + 3); /* fifo, dir, sock */
  h3_diag_free(&d);
}

/* A child opens an output over `victim`, writes 8 MiB, says so and waits; the parent sends
 * `sig`. Wants exit `code`, the one line, the victim as it was and no temporary file. With
 * `keep`, the child first writes "kept\n" and marks it (h3_output_keep): the victim then
 * holds just that line. */
static void test_interrupt(int sig, int code, int keep) {
  const char *victim = io_path("victim");
  put(victim, "as it was");
  int before = io_scratch_count();
  int ready[2], err[2];
  CHECK(pipe(ready) == 0 && pipe(err) == 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(ready[0]);
    close(err[0]);
    dup2(err[1], STDERR_FILENO);
    h3_diag d;
    h3_diag_init(&d);
    d.program = "test_output";
    size_t n = (size_t)8 << 20;
    char *big = calloc(n, 1);
    h3_output *o;
    if (!big || h3_output_open(victim, &o, &d) != H3_OK) _exit(3);
    if (keep && h3_output_write(o, "kept\n", 5, &d) != H3_OK) _exit(3);
    if (keep) h3_output_keep(o);
    if (h3_output_write(o, big, n, &d) != H3_OK) _exit(3);
    if (write(ready[1], "x", 1) != 1) _exit(4);
    for (;;) pause();
  }
  close(ready[1]);
  close(err[1]);
  char c;
  CHECK(read(ready[0], &c, 1) == 1);
  CHECK(kill(pid, sig) == 0);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == code);
  char msg[1000] = {0}, want[1000];
  size_t n = 0;
  for (ssize_t k; n < sizeof msg - 1 && (k = read(err[0], msg + n, sizeof msg - 1 - n)) > 0;)
    n += (size_t)k;
  snprintf(want, sizeof want, "test_output: interrupted; %s %s\n", victim,
           keep ? "holds the output written so far" : "is left as it was");
  CHECK(strcmp(msg, want) == 0);
  close(ready[0]);
  close(err[0]);
  CHECK(has_text(victim, keep ? "kept\n" : "as it was"));
  CHECK(io_scratch_count() == before); /* no temporary file */
}

static void (*handler_of(int sig))(int) {
  struct sigaction sa;
  sigaction(sig, NULL, &sa);
  return sa.sa_handler;
}

static void test_disposition(void) {
  h3_diag d;
  h3_diag_init(&d);
  CHECK(handler_of(SIGINT) == SIG_DFL && handler_of(SIGTERM) == SIG_DFL);
  h3_output *a, *b;
  CHECK(h3_output_open(io_path("a.out"), &a, &d) == H3_OK);
  CHECK(handler_of(SIGINT) != SIG_DFL && handler_of(SIGTERM) != SIG_DFL);
  CHECK(h3_output_open(io_path("b.out"), &b, &d) == H3_OK);
  h3_output_abort(a);
  CHECK(handler_of(SIGINT) != SIG_DFL); /* b still has a temporary file */
  CHECK(h3_output_commit(b, &d) == H3_OK);
  CHECK(handler_of(SIGINT) == SIG_DFL && handler_of(SIGTERM) == SIG_DFL);
  /* an ignored signal stays ignored */
  signal(SIGTERM, SIG_IGN);
  CHECK(h3_output_open(io_path("a.out"), &a, &d) == H3_OK);
  CHECK(handler_of(SIGTERM) == SIG_IGN && handler_of(SIGINT) != SIG_DFL);
  h3_output_abort(a);
  CHECK(handler_of(SIGTERM) == SIG_IGN && handler_of(SIGINT) == SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  /* in place (no temporary file): nothing is caught */
  CHECK(h3_output_open("/dev/null", &a, &d) == H3_OK && handler_of(SIGINT) == SIG_DFL);
  CHECK(h3_output_commit(a, &d) == H3_OK);
  CHECK(d.errors == 0);
  unlink(io_path("b.out"));
  h3_diag_free(&d);
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  char prefix[200];
  snprintf(prefix, sizeof prefix, "%s/h3_output", tmp && *tmp ? tmp : "/tmp");
  io_scratch_make(prefix);
  test_basic();
  test_inputs();
  test_links();
  test_special();
  test_interrupt(SIGINT, 130, 0);
  test_interrupt(SIGTERM, 143, 0);
  test_interrupt(SIGINT, 130, 1);
  test_disposition();
  rmdir(io_path("sub"));
  io_scratch_done();
  if (io_failures) fprintf(stderr, "%d failure(s)\n", io_failures);
  return io_failures != 0;
}
