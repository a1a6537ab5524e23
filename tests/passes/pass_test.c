/* pass_test.c: the IR-in / IR-out driver of the pass tests (like MLIR's lit + FileCheck,
 * with an exact comparison).
 *
 * Usage: h3_pass_test FILE.ir [FILE.expected]
 * FILE.ir starts with a line `# RUN: ARGS` (an IR comment; `// RUN: ARGS` works too);
 * ARGS are
 *   PASSES                  a comma list: run exactly these (--passes)
 *   --pipeline              run the default pipeline of the tier instead
 *   --quality TIER          exact | lossless | high (default lossless)
 *   --enable-pass LIST      --disable-pass LIST       --print-ir-after LIST
 *   --report                every pass's report lines
 *   --report=LIST           only these passes' report lines (pipeline tests name the passes
 *                           they are about, so a new pass in the pipeline changes nothing)
 *   --int8 KEY=VALUE,...    the --int8 option text the int8 passes read
 *   --spectrum=TEXT         the spectrum pass's option text (bare --spectrum: defaults)
 *   --cache-dit=TEXT        the cache-dit pass's option text
 *   --attention=TEXT        the attention-backend pass's option text (sage|sol[,KEY=VALUE...])
 *   --gpus N                the rank count of a parallel plan (sequence-parallel)
 * The driver parses the IR (h3_module_parse), runs the passes with verify_each, and
 * prints: the dump stream (reports, --print-ir-after), then the diagnostics if any, then
 * the module text if everything succeeded. The result must equal FILE.expected (default:
 * FILE.ir with .expected for .ir) byte for byte; on a difference both texts are shown.
 * With H3_UPDATE_EXPECTED=1 the expected file is written instead (review it by hand: the
 * expected files are golden files checked by reading, see docs/writing-a-pass.md).
 */
#include "h3/passes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS 16

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  for (size_t r; buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
    n += r;
    if (n + 1 == cap) {
      char *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (buf) buf[n] = 0;
  *len = n;
  return buf;
}

/* Splits the RUN line into words (in place). Returns the word count or -1. */
static int run_args(char *text, char **argv) {
  char *p;
  if (strncmp(text, "# RUN:", 6) == 0)
    p = text + 6;
  else if (strncmp(text, "// RUN:", 7) == 0)
    p = text + 7;
  else
    return -1;
  char *eol = strchr(p, '\n');
  if (eol) *eol = 0;
  int n = 0;
  for (char *w = strtok(p, " \t\r"); w && n < MAX_ARGS; w = strtok(NULL, " \t\r")) argv[n++] = w;
  return n;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: h3_pass_test FILE.ir [FILE.expected]\n");
    return 2;
  }
  const char *path = argv[1];
  char expected_path[4096];
  if (argc == 3) {
    snprintf(expected_path, sizeof expected_path, "%s", argv[2]);
  } else {
    size_t l = strlen(path);
    if (l < 3 || strcmp(path + l - 3, ".ir") != 0 || l + 6 >= sizeof expected_path) {
      fprintf(stderr, "h3_pass_test: %s: expected a FILE.ir\n", path);
      return 2;
    }
    snprintf(expected_path, sizeof expected_path, "%.*sexpected", (int)(l - 2), path);
  }
  size_t len = 0;
  char *text = read_all(path, &len);
  if (!text) {
    fprintf(stderr, "h3_pass_test: cannot read %s\n", path);
    return 2;
  }
  char *line = malloc(len + 1);
  if (!line) return 2;
  memcpy(line, text, len + 1);
  char *args[MAX_ARGS];
  int n_args = run_args(line, args);
  if (n_args < 0) {
    fprintf(stderr, "h3_pass_test: %s: the first line must be `# RUN: ...`\n", path);
    return 2;
  }
  if (text[0] == '/') /* `// RUN:` is not IR syntax: blank it, keeping the line count */
    for (char *c = text; *c && *c != '\n'; c++) *c = ' ';
  h3_pass_options o = h3_pass_options_default();
  o.verify_each = true;
  bool pipeline = false;
  for (int i = 0; i < n_args; i++) {
    const char *a = args[i];
    bool has_value = i + 1 < n_args;
    if (strcmp(a, "--pipeline") == 0) {
      pipeline = true;
    } else if (strcmp(a, "--report") == 0 || strncmp(a, "--report=", 9) == 0) {
      o.report = true;
      if (a[8]) o.report_passes = a + 9;
    } else if (strcmp(a, "--quality") == 0 && has_value) {
      if (!h3_tier_parse(args[++i], &o.tier)) {
        fprintf(stderr, "h3_pass_test: %s: unknown tier '%s'\n", path, args[i]);
        return 2;
      }
    } else if (strcmp(a, "--enable-pass") == 0 && has_value) {
      o.enable = args[++i];
    } else if (strcmp(a, "--disable-pass") == 0 && has_value) {
      o.disabled = args[++i];
    } else if (strcmp(a, "--print-ir-after") == 0 && has_value) {
      o.print_ir_after = args[++i];
    } else if (strcmp(a, "--int8") == 0 && has_value) {
      o.int8 = args[++i];
    } else if (strncmp(a, "--spectrum", 10) == 0 && (a[10] == '=' || !a[10])) {
      o.spectrum = a[10] ? a + 11 : "";
    } else if (strncmp(a, "--cache-dit=", 12) == 0) {
      o.cache_dit = a + 12;
    } else if (strncmp(a, "--attention=", 12) == 0) {
      o.attention = a + 12;
    } else if (strcmp(a, "--gpus") == 0 && has_value) {
      o.gpus = atoi(args[++i]);
    } else if (a[0] != '-' && !o.passes) {
      o.passes = a;
    } else {
      fprintf(stderr, "h3_pass_test: %s: bad RUN argument '%s'\n", path, a);
      return 2;
    }
  }
  if (!pipeline && !o.passes) {
    fprintf(stderr, "h3_pass_test: %s: RUN names no passes (or --pipeline)\n", path);
    return 2;
  }

  char *out_text = NULL;
  size_t out_len = 0;
  FILE *out = open_memstream(&out_text, &out_len);
  if (!out) return 2;
  o.dump = out;
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  h3_diag d;
  h3_diag_init(&d);
  h3_diag_add_source(&d, base, text, len);
  h3_module *m = h3_module_parse(base, text, len, &d);
  h3_status st = m ? h3_pass_pipeline_run(m, &o, &d) : H3_ERR;
  h3_diag_print(&d, out);
  if (st == H3_OK) {
    h3_strbuf b;
    h3_strbuf_init(&b);
    h3_module_print(&b, m);
    fputs(b.data ? b.data : "", out);
    if (b.len > 0 && b.data[b.len - 1] != '\n') fputc('\n', out);
    h3_strbuf_free(&b);
  }
  fclose(out);

  int rc = 0;
  if (getenv("H3_UPDATE_EXPECTED") && strcmp(getenv("H3_UPDATE_EXPECTED"), "1") == 0) {
    FILE *f = fopen(expected_path, "wb");
    if (!f || fwrite(out_text, 1, out_len, f) != out_len) rc = 2;
    if (f) fclose(f);
    fprintf(stderr, "h3_pass_test: wrote %s\n", expected_path);
  } else {
    size_t elen = 0;
    char *expected = read_all(expected_path, &elen);
    if (!expected) {
      fprintf(stderr, "h3_pass_test: cannot read %s\n", expected_path);
      rc = 1;
    } else if (elen != out_len || memcmp(expected, out_text, elen) != 0) {
      fprintf(stderr, "h3_pass_test: %s: output differs from %s\n---- expected\n%s---- got\n%s",
              path, expected_path, expected, out_text);
      rc = 1;
    }
    free(expected);
  }
  if (m) h3_module_free(m);
  h3_diag_free(&d);
  free(out_text);
  free(line);
  free(text);
  return rc;
}
