/* test_support.c: arena, strbuf (incl. shortest round-tripping doubles), diagnostics
 * printing (exact text, compared with hand-written expectations in the format of
 * docs/language.md), file reading/atomic writing and SHA-256 (FIPS 180-4 vectors and
 * block-boundary lengths whose digests were computed with Python's hashlib).
 */
#include "check.h"
#include "diag_text.h"
#include "h3/support.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

static void test_arena(void) {
  h3_arena a;
  h3_arena_init(&a);
  enum { N = 3000 };
  unsigned char *blocks[N];
  size_t sizes[N];
  for (int i = 0; i < N; i++) {
    sizes[i] = (size_t)check_range(1, i % 100 == 0 ? 200000 : 300);
    blocks[i] = h3_arena_alloc(&a, sizes[i]);
    CHECK(blocks[i] != NULL);
    CHECK(((uintptr_t)blocks[i] & 15) == 0);
    int zero = 1;
    for (size_t k = 0; k < sizes[i]; k++) zero &= blocks[i][k] == 0;
    CHECK(zero);
    memset(blocks[i], i & 0xff, sizes[i]);
  }
  int intact = 1; /* no block overlaps another */
  for (int i = 0; i < N; i++)
    for (size_t k = 0; k < sizes[i]; k++) intact &= blocks[i][k] == (unsigned char)(i & 0xff);
  CHECK(intact);
  CHECK(a.bytes >= sizes[0]);
  CHECK_STR(h3_arena_strdup(&a, "hello"), "hello");
  CHECK_STR(h3_arena_strndup(&a, "hello", 3), "hel");
  CHECK_STR(h3_arena_printf(&a, "%s-%d", "x", 42), "x-42");
  h3_arena_free(&a);
  CHECK(a.head == NULL && a.bytes == 0);
}

static void test_strbuf(void) {
  h3_strbuf b;
  h3_strbuf_init(&b);
  static char want[200000];
  size_t n = 0;
  for (int i = 0; i < 5000; i++) {
    int v = (int)check_range(-100000, 100000);
    h3_strbuf_printf(&b, "%d,", v);
    n += (size_t)snprintf(want + n, sizeof want - n, "%d,", v);
    if (i % 7 == 0) {
      h3_strbuf_append(&b, "ab");
      h3_strbuf_appendn(&b, "cdef", 2);
      n += (size_t)snprintf(want + n, sizeof want - n, "abcd");
    }
  }
  CHECK(b.len == n);
  CHECK_STR(b.data, want);
  CHECK(!b.oom);
  h3_strbuf_free(&b);
  CHECK(b.data == NULL && b.len == 0);
}

static const char *dbl(double v, h3_strbuf *b) {
  b->len = 0;
  if (b->data) b->data[0] = '\0';
  h3_strbuf_double(b, v);
  return b->data;
}

static void test_double(void) {
  h3_strbuf b;
  h3_strbuf_init(&b);
  CHECK_STR(dbl(1.0, &b), "1.0");
  CHECK_STR(dbl(3, &b), "3.0");
  CHECK_STR(dbl(0.1, &b), "0.1");
  CHECK_STR(dbl(1e-5, &b), "1e-05");
  CHECK_STR(dbl(-2.5, &b), "-2.5");
  CHECK_STR(dbl(-0.0, &b), "-0.0");
  CHECK_STR(dbl(1.0 / 3, &b), "0.3333333333333333");
  CHECK_STR(dbl(1e100, &b), "1e+100");
  CHECK_STR(dbl(INFINITY, &b), "inf");
  CHECK_STR(dbl(-INFINITY, &b), "-inf");
  CHECK_STR(dbl(NAN, &b), "nan");
  for (int i = 0; i < 20000; i++) {
    uint64_t bits = check_rand();
    double v;
    if (i % 2) {
      memcpy(&v, &bits, sizeof v);
      if (!isfinite(v)) continue;
    } else {
      v = (double)(int64_t)(bits >> 40) / (double)(1 + (bits & 0xffff)); /* "ordinary" values */
    }
    const char *s = dbl(v, &b);
    double back = strtod(s, NULL);
    CHECK(memcmp(&back, &v, sizeof v) == 0);
    CHECK(strpbrk(s, ".e") != NULL);
    /* shortest: one digit less does not round trip (independent of the printer's loop) */
    int digits = 0; /* significant digits: from the first nonzero one */
    for (const char *p = s; *p && *p != 'e'; p++) digits += (digits > 0 || (*p >= '1' && *p <= '9')) && *p >= '0' && *p <= '9';
    if (digits > 1 && !strstr(s, ".0")) {
      char shorter[400];
      snprintf(shorter, sizeof shorter, "%.*g", digits - 1, v);
      CHECK(strtod(shorter, NULL) != v);
    }
  }
  h3_strbuf_free(&b);
}

static void test_diag(void) {
  const char *src = "model bad\n  h = rms_norm(x, dmi)\n\tq = 1\nlast line";
  h3_diag d;
  h3_diag_init(&d);
  h3_diag_add_source(&d, "models/bad.g", src, strlen(src));
  h3_span s1 = {"models/bad.g", 2, 19, 2, 22};
  h3_diag_error(&d, s1, "did you mean 'dim'?", "unknown name '%s'", "dmi");
  h3_span s2 = {"models/bad.g", 2, 3, 2, 3};
  h3_diag_warning(&d, s2, NULL, "point span");
  h3_span s3 = {"models/bad.g", 3, 2, 3, 3}; /* after a tab */
  h3_diag_note(&d, s3, "tab %s", "kept");
  h3_span s4 = {"models/bad.g", 2, 7, 4, 2}; /* runs past its line */
  h3_diag_error(&d, s4, NULL, "multi-line");
  h3_span none = {0};
  h3_diag_error(&d, none, "pass --help", "no location");
  h3_span other = {"other.g", 5, 1, 5, 4}; /* no registered source */
  h3_diag_error(&d, other, NULL, "unquoted");
  CHECK(d.errors == 4 && d.warnings == 1);
  char *t = diag_text(&d);
  CHECK_STR(t, "models/bad.g:2:19: error: unknown name 'dmi'\n"
               "    2 |   h = rms_norm(x, dmi)\n"
               "      |                   ^~~\n"
               "hint: did you mean 'dim'?\n"
               "models/bad.g:2:3: warning: point span\n"
               "    2 |   h = rms_norm(x, dmi)\n"
               "      |   ^\n"
               "models/bad.g:3:2: note: tab kept\n"
               "    3 | \tq = 1\n"
               "      | \t^\n"
               "models/bad.g:2:7: error: multi-line\n"
               "    2 |   h = rms_norm(x, dmi)\n"
               "      |       ^~~~~~~~~~~~~~~~\n"
               "h3: error: no location\n"
               "hint: pass --help\n"
               "other.g:5:1: error: unquoted\n");
  free(t);
  h3_diag_free(&d);

  h3_diag_init(&d);
  d.max_errors = 3;
  for (int i = 0; i < 7; i++) h3_diag_error(&d, none, NULL, "e%d", i);
  CHECK(d.errors == 7);
  t = diag_text(&d);
  CHECK_STR(t, "h3: error: e0\nh3: error: e1\nh3: error: e2\nh3: note: 4 more errors not shown\n");
  free(t);
  h3_diag_free(&d);
}

static void test_files(void) {
  h3_diag d;
  h3_diag_init(&d);
  char path[] = "/tmp/h3_ir_test_XXXXXX";
  CHECK(mkdtemp(path) != NULL);
  char file[128];
  snprintf(file, sizeof file, "%s/out.bin", path);
  size_t n = 100000;
  unsigned char *data = malloc(n);
  for (size_t i = 0; i < n; i++) data[i] = (unsigned char)check_rand();
  CHECK(h3_write_file_atomic(file, data, n, &d) == H3_OK);
  data[0] ^= 1; /* overwrite: the new content replaces the old */
  CHECK(h3_write_file_atomic(file, data, n, &d) == H3_OK);
  size_t got = 0;
  char *back = h3_read_file(file, &got, &d);
  CHECK(back && got == n && memcmp(back, data, n) == 0 && back[n] == '\0');
  CHECK(d.errors == 0);
  free(back);
  char bad[160];
  snprintf(bad, sizeof bad, "%s/missing/dir/x", path);
  CHECK(h3_write_file_atomic(bad, data, 10, &d) == H3_ERR);
  CHECK(h3_read_file(bad, &got, &d) == NULL);
  CHECK(h3_read_file(path, &got, &d) == NULL); /* a folder */
  CHECK(d.errors == 3);
  char *t = diag_text(&d);
  CHECK_HAS(t, "h3: error: cannot write ");
  CHECK_HAS(t, "h3: error: cannot read ");
  CHECK_HAS(t, "No such file or directory");
  CHECK_HAS(t, "Is a directory");
  free(t);
  unlink(file);
  rmdir(path);
  free(data);
  h3_diag_free(&d);
}

static void test_sha256(void) {
  char out[65];
  h3_sha256_hex("", 0, out);
  CHECK_STR(out, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  h3_sha256_hex("abc", 3, out);
  CHECK_STR(out, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  h3_sha256_hex(m448, strlen(m448), out);
  CHECK_STR(out, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const char *m896 = "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
                     "klmnopqrlmnopqrsmnopqrstnopqrstu";
  h3_sha256_hex(m896, strlen(m896), out);
  CHECK_STR(out, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  char *million = malloc(1000000);
  memset(million, 'a', 1000000);
  h3_sha256_hex(million, 1000000, out);
  CHECK_STR(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  free(million);
  static const struct {
    size_t n;
    const char *hex;
  } lens[] = {
      {55, "463eb28e72f82e0a96c0a4cc53690c571281131f672aa229e0d45ae59b598b59"},
      {56, "da2ae4d6b36748f2a318f23e7ab1dfdf45acdc9d049bd80e59de82a60895f562"},
      {63, "29af2686fd53374a36b0846694cc342177e428d1647515f078784d69cdb9e488"},
      {64, "fdeab9acf3710362bd2658cdc9a29e8f9c757fcf9811603a8c447cd1d9151108"},
      {65, "4bfd2c8b6f1eec7a2afeb48b934ee4b2694182027e6d0fc075074f2fabb31781"},
      {119, "da18797ed7c3a777f0847f429724a2d8cd5138e6ed2895c3fa1a6d39d18f7ec6"},
      {120, "f52b23db1fbb6ded89ef42a23ce0c8922c45f25c50b568a93bf1c075420bbb7c"},
      {1000, "4e4c294b331f7a2099a379bec34b9f9fc03dc46ab465d998f4d683da53487e6d"},
  };
  unsigned char buf[1000];
  for (int i = 0; i < 1000; i++) buf[i] = (unsigned char)(i % 251);
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    h3_sha256_hex(buf, lens[i].n, out);
    CHECK_STR(out, lens[i].hex);
  }
}

int main(void) {
  test_arena();
  test_strbuf();
  test_double();
  test_diag();
  test_files();
  test_sha256();
  return check_report("test_support");
}
