/* test_cache.c: the NVRTC kernel cache. Folder resolution from H3_KERNEL_CACHE_DIR,
 * XDG_CACHE_HOME and HOME, H3_KERNEL_CACHE=0; miss then hit with identical bytes; keys that
 * depend on the source and the option set but not on the option order; corrupt and
 * truncated entries recompiled and replaced with a warning; a compile error reported
 * with the numbered source and NVRTC's log.
 */
#include "cg_test.h"

#include <sys/stat.h>
#include <unistd.h>

static const char *const opts[] = {"-default-device", "-std=c++17", "-fmad=false"};
static const char *const opts_perm[] = {"-fmad=false", "-default-device", "-std=c++17"};
static const char *const opts_other[] = {"-default-device", "-std=c++17"};

static char *src_a, *src_b;

static h3_nvrtc_job job(const char *src, const char *const *o, int n) {
  h3_nvrtc_job j;
  memset(&j, 0, sizeof j);
  j.label = "cache_test.cu";
  j.source = src;
  j.options = o;
  j.n_options = n;
  return j;
}

static bool file_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

/* A cache entry's bytes. Not h3_read_file: what it reads is an input of the process, and
 * no output (here: the cache replacing this entry) may replace an input. */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  long n = f && fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
  char *t = n >= 0 && fseek(f, 0, SEEK_SET) == 0 ? malloc((size_t)n + 1) : NULL;
  if (t && fread(t, 1, (size_t)n, f) == (size_t)n) {
    t[n] = '\0';
    *len = (size_t)n;
  } else {
    free(t);
    t = NULL;
  }
  if (f) fclose(f);
  return t;
}

int main(void) {
  char root[] = "/tmp/h3_cache_test_XXXXXX";
  CHECK(mkdtemp(root) != NULL);
  char dir[256], path[512];
  snprintf(dir, sizeof dir, "%s/explicit/nested", root);
  size_t pl = strlen(h3_kernel_prelude()) + 200;
  src_a = malloc(pl);
  src_b = malloc(pl);
  snprintf(src_a, pl, "%s\nextern \"C\" __global__ void k_a(float *p) { p[threadIdx.x] = h3_rbf16(1.5f); }\n",
           h3_kernel_prelude());
  snprintf(src_b, pl, "%s\nextern \"C\" __global__ void k_b(float *p) { p[threadIdx.x] = 2.0f; }\n",
           h3_kernel_prelude());

  /* folder resolution */
  h3_diag d;
  h3_diag_init(&d);
  h3_kernel_cache c;
  setenv("H3_KERNEL_CACHE_DIR", dir, 1);
  unsetenv("H3_KERNEL_CACHE");
  h3_kernel_cache_init(&c, &d);
  CHECK(c.enabled && strcmp(c.dir, dir) == 0 && file_exists(dir)); /* created, nested */
  unsetenv("H3_KERNEL_CACHE_DIR");
  char xdg[256], home[256], want[512];
  snprintf(xdg, sizeof xdg, "%s/xdg", root);
  snprintf(home, sizeof home, "%s/home", root);
  setenv("XDG_CACHE_HOME", xdg, 1);
  h3_kernel_cache c2;
  h3_kernel_cache_init(&c2, &d);
  snprintf(want, sizeof want, "%s/h3/kernels", xdg);
  CHECK(c2.enabled && strcmp(c2.dir, want) == 0);
  unsetenv("XDG_CACHE_HOME");
  char *old_home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
  setenv("HOME", home, 1);
  h3_kernel_cache_init(&c2, &d);
  snprintf(want, sizeof want, "%s/.cache/h3/kernels", home);
  CHECK(c2.enabled && strcmp(c2.dir, want) == 0);
  if (old_home) setenv("HOME", old_home, 1);
  free(old_home);
  setenv("H3_KERNEL_CACHE", "0", 1);
  h3_kernel_cache_init(&c2, &d);
  CHECK(!c2.enabled);
  unsetenv("H3_KERNEL_CACHE");
  setenv("H3_KERNEL_CACHE_DIR", "/proc/h3-cannot-create", 1);
  int warnings = d.warnings;
  h3_kernel_cache_init(&c2, &d);
  CHECK(!c2.enabled && d.warnings == warnings + 1);
  CHECK(d.errors == 0);
  h3_diag_free(&d);

  /* miss, then hit with the same bytes */
  h3_diag_init(&d);
  h3_nvrtc_job j1 = job(src_a, opts, 3);
  CHECK(h3_nvrtc_compile(&j1, 1, &c, 1, &d) == H3_OK);
  CHECK(!j1.cache_hit && j1.cubin && j1.cubin_len > 0);
  snprintf(path, sizeof path, "%s/%s.cubin", dir, j1.key);
  CHECK(file_exists(path));
  size_t flen = 0;
  char *entry = slurp(path, &flen);
  CHECK(entry && strncmp(entry, "h3-cubin 1 ", 11) == 0);
  if (entry) {
    char hex[65];
    const char *nl = strchr(entry, '\n');
    CHECK(nl && (size_t)(flen - (size_t)(nl + 1 - entry)) == j1.cubin_len);
    if (nl) {
      h3_sha256_hex(nl + 1, j1.cubin_len, hex);
      CHECK(strncmp(entry + 11, hex, 64) == 0);
      CHECK(memcmp(nl + 1, j1.cubin, j1.cubin_len) == 0);
    }
  }
  h3_nvrtc_job j2 = job(src_a, opts_perm, 3); /* same options, other order: same key */
  CHECK(h3_nvrtc_compile(&j2, 1, &c, 1, &d) == H3_OK);
  CHECK(j2.cache_hit && strcmp(j1.key, j2.key) == 0);
  CHECK(j2.cubin_len == j1.cubin_len && memcmp(j1.cubin, j2.cubin, j1.cubin_len) == 0);
  h3_nvrtc_job j3 = job(src_a, opts_other, 2), j4 = job(src_b, opts, 3);
  h3_nvrtc_job both[2] = {j3, j4};
  CHECK(h3_nvrtc_compile(both, 2, &c, 2, &d) == H3_OK); /* two threads */
  CHECK(!both[0].cache_hit && !both[1].cache_hit);
  CHECK(strcmp(both[0].key, j1.key) != 0 && strcmp(both[1].key, j1.key) != 0 &&
        strcmp(both[0].key, both[1].key) != 0);
  CHECK(d.errors == 0 && d.warnings == 0);
  h3_diag_free(&d);

  /* a corrupt entry (one payload byte flipped) is recompiled and replaced */
  if (entry) {
    entry[flen - 10] ^= 0x5a;
    FILE *f = fopen(path, "wb");
    fwrite(entry, 1, flen, f);
    fclose(f);
    h3_diag_init(&d);
    h3_nvrtc_job j5 = job(src_a, opts, 3);
    CHECK(h3_nvrtc_compile(&j5, 1, &c, 1, &d) == H3_OK);
    CHECK(!j5.cache_hit && d.warnings == 1 && d.errors == 0);
    char msg[700];
    snprintf(msg, sizeof msg, "kernel cache entry '%s' is corrupt (payload sha256 mismatch); recompiling it", path);
    CHECK(d.head && strcmp(d.head->message, msg) == 0);
    CHECK(j5.cubin_len == j1.cubin_len && memcmp(j5.cubin, j1.cubin, j1.cubin_len) == 0);
    h3_diag_free(&d);
    h3_diag_init(&d);
    h3_nvrtc_job j6 = job(src_a, opts, 3);
    CHECK(h3_nvrtc_compile(&j6, 1, &c, 1, &d) == H3_OK);
    CHECK(j6.cache_hit && d.warnings == 0); /* replaced */
    h3_nvrtc_job_free(&j6);
    /* truncated entry */
    f = fopen(path, "wb");
    fwrite(entry, 1, flen / 2, f);
    fclose(f);
    h3_nvrtc_job j7 = job(src_a, opts, 3);
    CHECK(h3_nvrtc_compile(&j7, 1, &c, 1, &d) == H3_OK);
    CHECK(!j7.cache_hit && d.warnings == 1);
    CHECK(d.head && strstr(d.head->message, "header says") != NULL);
    h3_diag_free(&d);
    h3_nvrtc_job_free(&j5);
    h3_nvrtc_job_free(&j7);
  }
  free(entry);

  /* disabled: nothing written */
  h3_kernel_cache off = {0};
  h3_diag_init(&d);
  h3_nvrtc_job j8 = job(src_b, opts_other, 2);
  CHECK(h3_nvrtc_compile(&j8, 1, &off, 1, &d) == H3_OK && !j8.cache_hit && j8.cubin);
  snprintf(path, sizeof path, "%s/%s.cubin", dir, j8.key);
  CHECK(!file_exists(path));
  h3_nvrtc_job_free(&j8);

  /* compile error: numbered source and the log */
  h3_nvrtc_job bad = job("extern \"C\" __global__ void k(float *p) {\n  p[0] = undefined_name;\n}\n", opts, 3);
  CHECK(h3_nvrtc_compile(&bad, 1, &c, 1, &d) == H3_ERR);
  CHECK(d.errors == 1 && d.head);
  if (d.head) {
    CHECK(strstr(d.head->message, "NVRTC could not compile cache_test.cu for sm_90") != NULL);
    CHECK(strstr(d.head->message, "    2 |   p[0] = undefined_name;") != NULL);
    CHECK(strstr(d.head->message, "undefined_name") != NULL && strstr(d.head->message, "error") != NULL);
  }
  h3_diag_free(&d);
  CHECK(strcmp(h3_nvrtc_version(), "unavailable") != 0);
  CHECK(h3_cuda_include_dir() != NULL);

  h3_nvrtc_job_free(&j1);
  h3_nvrtc_job_free(&j2);
  h3_nvrtc_job_free(&both[0]);
  h3_nvrtc_job_free(&both[1]);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  CHECK(system(cmd) == 0);
  free(src_a);
  free(src_b);
  return cg_report("test_cache");
}
