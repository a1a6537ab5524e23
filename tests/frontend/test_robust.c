/* test_robust.c: the front end never crashes and never accepts garbage silently.
 *
 * - pathological nesting (brackets, unary minus, long operator chains, deep function
 *   call chains, exponential inlining) ends with an error, not a stack overflow or a hang;
 * - seeded random mutations of valid programs (byte deletions, insertions, swaps, token
 *   splices) either compile and verify or fail with at least one error message;
 * - random byte strings fail with an error.
 * Run under the sanitizer build (H3_SANITIZE=ON) this also checks memory safety.
 * Usage: test_robust [MODELS_DIR] (the models are mutated too when present).
 */
#include "h3/frontend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(c)                                                      \
  do {                                                                \
    if (!(c)) {                                                       \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
      failures++;                                                     \
    }                                                                 \
  } while (0)

/* Compiles; returns 1 when it succeeded. A failure must have reported an error. */
static int try_compile(const char *src, size_t len) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_frontend_compile("r.g", src, len, NULL, &d);
  if (!m && d.errors == 0) {
    fprintf(stderr, "failed without an error message on:\n%.*s\n", (int)(len > 400 ? 400 : len), src);
    failures++;
  }
  FILE *devnull = fopen("/dev/null", "w");
  if (devnull) {
    h3_diag_print(&d, devnull); /* printing must be safe too */
    fclose(devnull);
  }
  int ok = m != NULL;
  h3_module_free(m);
  h3_diag_free(&d);
  return ok;
}

static char *repeat_str(const char *head, const char *unit, int n, const char *mid, const char *tail_unit,
                        const char *tail) {
  size_t len = strlen(head) + (strlen(unit) + strlen(tail_unit)) * (size_t)n + strlen(mid) + strlen(tail) + 1;
  char *s = malloc(len);
  if (!s) return NULL;
  char *w = s;
  w += sprintf(w, "%s", head);
  for (int i = 0; i < n; i++) w += sprintf(w, "%s", unit);
  w += sprintf(w, "%s", mid);
  for (int i = 0; i < n; i++) w += sprintf(w, "%s", tail_unit);
  sprintf(w, "%s", tail);
  return s;
}

static const char *HEAD =
    "model r\nconfig c { d = 4 }\ngraph g(x: f32[d]) -> (y: f32[d]) {\n  y = ";

static void test_deep(void) {
  char *s = repeat_str(HEAD, "(", 100000, "x", ")", "\n  return y\n}\n");
  CHECK(s && !try_compile(s, strlen(s)));
  free(s);
  s = repeat_str(HEAD, "-", 100000, "x", "", "\n  return y\n}\n");
  CHECK(s && !try_compile(s, strlen(s)));
  free(s);
  s = repeat_str(HEAD, "x + ", 100000, "x", "", "\n  return y\n}\n");
  CHECK(s && !try_compile(s, strlen(s)));
  free(s);
  s = repeat_str(HEAD, "exp(", 100000, "x", ")", "\n  return y\n}\n");
  CHECK(s && !try_compile(s, strlen(s)));
  free(s);
  s = repeat_str("model r\nconfig c { d = 4 }\nlet a = ", "[", 50000, "1", "]", "\n");
  CHECK(s && !try_compile(s, strlen(s)));
  free(s);
  /* moderate depth is fine */
  s = repeat_str(HEAD, "(", 60, "x", ")", "\n  return y\n}\n");
  CHECK(s && try_compile(s, strlen(s)));
  free(s);
  s = repeat_str(HEAD, "x + ", 200, "x", "", "\n  return y\n}\n");
  CHECK(s && try_compile(s, strlen(s)));
  free(s);

  /* a chain of 300 functions each calling the one above: the inline depth limit */
  size_t cap = 1 << 16, n = 0;
  char *c = malloc(cap);
  if (!c) return;
  n += (size_t)snprintf(c + n, cap - n, "model r\nconfig c { d = 4 }\nfn f0(x: f32[d]) -> f32[d] { return exp(x) }\n");
  for (int i = 1; i < 300; i++)
    n += (size_t)snprintf(c + n, cap - n, "fn f%d(x: f32[d]) -> f32[d] { return f%d(x) }\n", i, i - 1);
  n += (size_t)snprintf(c + n, cap - n, "graph g(x: f32[d]) -> (y: f32[d]) { return f299(x) }\n");
  CHECK(!try_compile(c, n));
  /* exponential inlining: 40 levels of f(k) = f(k-1) twice: the op budget stops it */
  n = 0;
  n += (size_t)snprintf(c + n, cap - n, "model r\nconfig c { d = 4 }\nfn f0(x: f32[d]) -> f32[d] { return exp(x) }\n");
  for (int i = 1; i < 40; i++)
    n += (size_t)snprintf(c + n, cap - n, "fn f%d(x: f32[d]) -> f32[d] { return f%d(f%d(x)) }\n", i, i - 1, i - 1);
  n += (size_t)snprintf(c + n, cap - n, "graph g(x: f32[d]) -> (y: f32[d]) { return f39(x) }\n");
  CHECK(!try_compile(c, n));
  free(c);
}

/* xorshift64*: a deterministic generator for the mutations */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}

static const char *const SPLICE[] = {"(", ")", "[", "]", "{", "}", ",", ":", ".", "=", "->", "..", "+", "*",
                                     "-", "/", "%", "repeat i in 3 {", "return", "fn", "params", "x", "\"s",
                                     "1e-5", "0", "-1", "99999999999999999999", "blocks[i]", "\n", "#", "\t",
                                     "@", "\xff", "bf16[", "int", "for k in 2 {", "model", "let q = 1 / 0\n"};

static void mutate_and_compile(const char *src, size_t len, int rounds, int edits) {
  size_t cap = len + 64 * (size_t)edits + 16;
  char *buf = malloc(cap);
  if (!buf) return;
  int compiled = 0;
  for (int r = 0; r < rounds; r++) {
    memcpy(buf, src, len);
    size_t n = len;
    for (int e = 0; e < edits; e++) {
      size_t at = n ? (size_t)(rnd() % n) : 0;
      switch (rnd() % 4) {
      case 0: /* delete a run */ {
        size_t k = 1 + rnd() % 8;
        if (at + k > n) k = n - at;
        memmove(buf + at, buf + at + k, n - at - k);
        n -= k;
        break;
      }
      case 1: /* random byte */
        if (n) buf[at] = (char)(rnd() & 0xff);
        break;
      case 2: /* splice a token */ {
        const char *t = SPLICE[rnd() % (sizeof SPLICE / sizeof SPLICE[0])];
        size_t k = strlen(t);
        memmove(buf + at + k, buf + at, n - at);
        memcpy(buf + at, t, k);
        n += k;
        break;
      }
      default: /* swap two bytes */
        if (n) {
          size_t b = (size_t)(rnd() % n);
          char tmp = buf[at];
          buf[at] = buf[b];
          buf[b] = tmp;
        }
      }
    }
    compiled += try_compile(buf, n);
  }
  free(buf);
  fprintf(stderr, "  %d of %d mutants compiled\n", compiled, rounds);
}

static const char *SAMPLE =
    "model sample\n"
    "config full { layers = 3, dim = 8, ffn = 12 }\n"
    "config tiny { layers = 1, dim = 4, ffn = 6 }\n"
    "let half = dim / 2\n"
    "params blocks[layers] {\n"
    "  norm.weight : bf16[dim] init ones_plus_normal(std = 0.02)\n"
    "  fc.weight : bf16[2 * ffn, dim]\n"
    "  out.weight : bf16[dim, ffn]\n"
    "}\n"
    "param head.weight : f32[half, dim]\n"
    "fn block(x: bf16[S, dim], p: blocks) -> bf16[S, dim] {\n"
    "  h = rms_norm(x, p.norm.weight, eps = 1e-5)\n"
    "  gate, up = split(linear(h, p.fc.weight), 2)\n"
    "  return x + linear(bf16(silu(f32(gate)) * f32(up)), p.out.weight)\n"
    "}\n"
    "graph step(x: bf16[5, dim], t: f32[2]) -> (y: f32[5, half]) {\n"
    "  trunk: repeat i in layers { x = block(x, blocks[i]) }\n"
    "  return linear(f32(x), head.weight) * 2.0\n"
    "}\n"
    "program run(x: bf16[5, dim]) -> (y: f32[5, half]) {\n"
    "  y = step(x, zeros(f32, [2]))\n"
    "  for k in 3 { y = y + step(x, full(f32, [2], value = 1.0)) }\n"
    "  return y\n"
    "}\n";

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *s = malloc(cap);
  while (s) {
    size_t got = fread(s + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
    if (n == cap) {
      char *t = realloc(s, cap *= 2);
      if (!t) {
        free(s);
        s = NULL;
      }
      s = t;
    }
  }
  fclose(f);
  *len = n;
  return s;
}

int main(int argc, char **argv) {
  test_deep();
  CHECK(try_compile(SAMPLE, strlen(SAMPLE)));
  fprintf(stderr, "mutating the sample program\n");
  mutate_and_compile(SAMPLE, strlen(SAMPLE), 3000, 1);
  mutate_and_compile(SAMPLE, strlen(SAMPLE), 1500, 6);
  for (int i = 1; i < argc; i++) {
    size_t len;
    char *m = read_all(argv[i], &len);
    if (!m) continue;
    fprintf(stderr, "mutating %s\n", argv[i]);
    mutate_and_compile(m, len, 300, 2);
    free(m);
  }
  /* random bytes */
  char junk[512];
  for (int r = 0; r < 500; r++) {
    size_t n = (size_t)(rnd() % sizeof junk);
    for (size_t i = 0; i < n; i++) junk[i] = (char)(rnd() & 0xff);
    CHECK(!try_compile(junk, n));
  }
  CHECK(!try_compile("", 0));
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
