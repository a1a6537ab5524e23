/* nvrtc_cache.c: compiles NVRTC translation units to sm_90 CUBINs through an on-disk
 * cache, on a small pool of threads.
 *
 * Cache key = sha256 of "h3-kernel-cache-v1", the source, the sorted options, the exact
 * arch, the loaded NVRTC version and H3_VERSION (fields separated by NUL bytes). Entry
 * file <dir>/<key>.cubin: one header line "h3-cubin 1 <sha256 of payload> <length>\n"
 * then the CUBIN bytes, written atomically (h3_write_file_atomic). A read verifies the
 * header, the length and the payload hash; a corrupt entry is recompiled and replaced
 * with a warning. Workers keep their own diagnostics, replayed in job order afterwards,
 * so messages are deterministic whatever the scheduling.
 */
#define _GNU_SOURCE
#include "h3/kernel.h"

#include <dlfcn.h>
#include <errno.h>
#include <nvrtc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static h3_span no_span(void) {
  h3_span s;
  memset(&s, 0, sizeof s);
  return s;
}

/* ---- options ------------------------------------------------------------------------- */
static const char *const options_exact[] = {"-default-device", "-std=c++17", "-fmad=false"};
static const char *const options_lossless[] = {"-default-device", "-std=c++17"};

const char *const *h3_nvrtc_tier_options(h3_tier tier, int *n) {
  bool exact = tier == H3_TIER_EXACT;
  *n = exact ? 3 : 2;
  return exact ? options_exact : options_lossless;
}

/* ---- versions and include path ------------------------------------------------------- */
static char nvrtc_ver[32] = "unavailable";
static pthread_once_t ver_once = PTHREAD_ONCE_INIT;
static void ver_init(void) {
  int ma = 0, mi = 0;
  if (nvrtcVersion(&ma, &mi) == NVRTC_SUCCESS) snprintf(nvrtc_ver, sizeof nvrtc_ver, "%d.%d", ma, mi);
}
const char *h3_nvrtc_version(void) {
  pthread_once(&ver_once, ver_init);
  return nvrtc_ver;
}

static char inc_dir[4200];
static pthread_once_t inc_once = PTHREAD_ONCE_INIT;

static bool has_bf16_header(const char *dir) {
  char p[4300];
  snprintf(p, sizeof p, "%s/cuda_bf16.h", dir);
  return access(p, R_OK) == 0;
}

static void inc_init(void) {
  const char *envs[] = {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"};
  char cand[4200];
  for (int i = 0; i < 3; i++) {
    const char *e = getenv(envs[i]);
    if (!e || !*e) continue;
    snprintf(cand, sizeof cand, "%s/include", e);
    if (has_bf16_header(cand)) goto found;
  }
  snprintf(cand, sizeof cand, "/usr/local/cuda/include");
  if (has_bf16_header(cand)) goto found;
  Dl_info info;
  if (dladdr((void *)nvrtcVersion, &info) && info.dli_fname) {
    /* <root>/lib64/libnvrtc.so or <root>/targets/<arch>/lib/libnvrtc.so */
    char lib[4000];
    snprintf(lib, sizeof lib, "%s", info.dli_fname);
    char *slash = strrchr(lib, '/');
    if (slash) {
      *slash = 0;
      snprintf(cand, sizeof cand, "%s/../include", lib);
      if (has_bf16_header(cand)) goto found;
      snprintf(cand, sizeof cand, "%s/../../include", lib);
      if (has_bf16_header(cand)) goto found;
    }
  }
  return;
found:
  snprintf(inc_dir, sizeof inc_dir, "%s", cand);
}

const char *h3_cuda_include_dir(void) {
  pthread_once(&inc_once, inc_init);
  return inc_dir[0] ? inc_dir : NULL;
}

/* ---- cache folder -------------------------------------------------------------------------- */
static int mkdir_p(char *path) {
  for (char *p = path + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    int r = mkdir(path, 0755);
    *p = '/';
    if (r != 0 && errno != EEXIST) return -1;
  }
  if (mkdir(path, 0755) != 0 && errno != EEXIST) return -1;
  return 0;
}

void h3_kernel_cache_init(h3_kernel_cache *c, h3_diag *d) {
  memset(c, 0, sizeof *c);
  const char *off = getenv("H3_KERNEL_CACHE");
  if (off && strcmp(off, "0") == 0) return;
  const char *dir = getenv("H3_KERNEL_CACHE_DIR");
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (dir && *dir) snprintf(c->dir, sizeof c->dir, "%s", dir);
  else if (xdg && *xdg) snprintf(c->dir, sizeof c->dir, "%s/h3/kernels", xdg);
  else if (home && *home) snprintf(c->dir, sizeof c->dir, "%s/.cache/h3/kernels", home);
  else {
    h3_diag_warning(d, no_span(), "set H3_KERNEL_CACHE_DIR to a writable folder",
                    "kernel cache disabled: neither H3_KERNEL_CACHE_DIR, XDG_CACHE_HOME nor HOME is set");
    return;
  }
  if (mkdir_p(c->dir) != 0) {
    h3_diag_warning(d, no_span(), "set H3_KERNEL_CACHE_DIR to a writable folder",
                    "kernel cache disabled: cannot create '%s': %s", c->dir, strerror(errno));
    return;
  }
  c->enabled = true;
}

/* ---- one job ------------------------------------------------------------------------------- */
static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static h3_status job_key(h3_nvrtc_job *job) {
  const char **opts = malloc(sizeof(char *) * (size_t)(job->n_options + 1));
  if (!opts) return H3_ERR;
  for (int i = 0; i < job->n_options; i++) opts[i] = job->options[i];
  qsort(opts, (size_t)job->n_options, sizeof(char *), cmp_str);
  h3_strbuf b;
  h3_strbuf_init(&b);
  const char tag[] = "h3-kernel-cache-v1";
  h3_strbuf_appendn(&b, tag, sizeof tag);
  h3_strbuf_appendn(&b, job->source, strlen(job->source) + 1);
  for (int i = 0; i < job->n_options; i++) h3_strbuf_appendn(&b, opts[i], strlen(opts[i]) + 1);
  free(opts);
  h3_strbuf_appendn(&b, H3_TARGET_ARCH, sizeof H3_TARGET_ARCH);
  const char *v = h3_nvrtc_version();
  h3_strbuf_appendn(&b, v, strlen(v) + 1);
  h3_strbuf_appendn(&b, H3_VERSION, sizeof H3_VERSION);
  if (b.oom) {
    h3_strbuf_free(&b);
    return H3_ERR;
  }
  h3_sha256_hex(b.data, b.len, job->key);
  h3_strbuf_free(&b);
  return H3_OK;
}

/* Loads a cache entry; 1 = hit, 0 = miss, -1 = corrupt (reason in why). */
static int cache_load(const char *path, h3_nvrtc_job *job, char *why, size_t why_len) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  char line[200];
  int r = -1;
  unsigned char *buf = NULL;
  char hex[65], got[65];
  unsigned long long len = 0;
  int ver = 0;
  if (!fgets(line, sizeof line, f) ||
      sscanf(line, "h3-cubin %d %64s %llu", &ver, hex, &len) != 3 || ver != 1) {
    snprintf(why, why_len, "bad header");
    goto out;
  }
  if (len == 0 || len > ((unsigned long long)1 << 32)) {
    snprintf(why, why_len, "bad length %llu", len);
    goto out;
  }
  buf = malloc((size_t)len + 1);
  if (!buf) {
    snprintf(why, why_len, "out of memory");
    goto out;
  }
  size_t n = fread(buf, 1, (size_t)len + 1, f);
  if (n != len) {
    snprintf(why, why_len, "payload has %zu bytes, header says %llu", n, len);
    goto out;
  }
  h3_sha256_hex(buf, (size_t)len, got);
  if (strcmp(got, hex) != 0) {
    snprintf(why, why_len, "payload sha256 mismatch");
    goto out;
  }
  job->cubin = buf;
  job->cubin_len = (size_t)len;
  buf = NULL;
  r = 1;
out:
  free(buf);
  fclose(f);
  return r;
}

static void cache_store(const char *path, const h3_nvrtc_job *job, h3_diag *d) {
  char hex[65];
  h3_sha256_hex(job->cubin, job->cubin_len, hex);
  char head[128];
  int hl = snprintf(head, sizeof head, "h3-cubin 1 %s %zu\n", hex, job->cubin_len);
  unsigned char *data = malloc((size_t)hl + job->cubin_len);
  if (!data) return;
  memcpy(data, head, (size_t)hl);
  memcpy(data + hl, job->cubin, job->cubin_len);
  h3_diag tmp;
  h3_diag_init(&tmp);
  if (h3_write_file_atomic(path, data, (size_t)hl + job->cubin_len, &tmp) != H3_OK)
    h3_diag_warning(d, no_span(), "check the permissions of the cache folder or set H3_KERNEL_CACHE=0",
                    "could not write kernel cache entry '%s'", path);
  h3_diag_free(&tmp);
  free(data);
}

/* The source with line numbers: all of it when short, else the lines around those the
 * log names ("label(LINE): ..."). */
static void numbered_source(h3_strbuf *b, const char *src, const char *label, const char *log) {
  int n_lines = 1;
  for (const char *p = src; *p; p++) n_lines += *p == '\n';
  char *show = calloc((size_t)n_lines + 2, 1);
  if (!show) return;
  bool all = n_lines <= 400, any = false;
  size_t ll = strlen(label);
  for (const char *p = log; !all && (p = strstr(p, label)); p += ll) {
    if (p[ll] != '(') continue;
    int line = atoi(p + ll + 1);
    for (int k = line - 3; k <= line + 3; k++)
      if (k >= 1 && k <= n_lines) show[k] = any = 1;
  }
  if (!any) all = true;
  int line = 1;
  bool gap = false;
  for (const char *p = src; *p && (all || line <= n_lines);) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (all || show[line]) {
      if (gap) h3_strbuf_append(b, "  ...\n");
      h3_strbuf_printf(b, "%5d | %.*s\n", line, (int)len, p);
      gap = false;
    } else {
      gap = true;
    }
    if (!e) break;
    p = e + 1;
    line++;
  }
  free(show);
}

/* NVRTC fails to create a program or to give its CUBIN only when out of memory, or on a bug. */
#define NVRTC_RETRY "free memory and compile again; if it fails again, report it with this output"

static h3_status compile_one(h3_nvrtc_job *job, h3_diag *d) {
  const char *inc = h3_cuda_include_dir();
  int n = job->n_options;
  const char **opts = malloc(sizeof(char *) * (size_t)(n + 2));
  char arch[64], incopt[4300];
  if (!opts) {
    h3_diag_error(d, no_span(), H3_HINT_OOM, "out of memory compiling %s", job->label);
    return H3_ERR;
  }
  for (int i = 0; i < n; i++) opts[i] = job->options[i];
  snprintf(arch, sizeof arch, "--gpu-architecture=%s", H3_TARGET_ARCH);
  opts[n++] = arch;
  if (inc) {
    snprintf(incopt, sizeof incopt, "-I%s", inc);
    opts[n++] = incopt;
  }
  nvrtcProgram prog;
  nvrtcResult r = nvrtcCreateProgram(&prog, job->source, job->label, 0, NULL, NULL);
  if (r != NVRTC_SUCCESS) {
    free(opts);
    h3_diag_error(d, no_span(), NVRTC_RETRY, "NVRTC could not create a program for %s: %s", job->label,
                  nvrtcGetErrorString(r));
    return H3_ERR;
  }
  r = nvrtcCompileProgram(prog, n, opts);
  free(opts);
  h3_status st = H3_OK;
  if (r != NVRTC_SUCCESS) {
    size_t ls = 0;
    nvrtcGetProgramLogSize(prog, &ls);
    char *log = malloc(ls + 1);
    if (log) {
      log[0] = 0;
      nvrtcGetProgramLog(prog, log);
      log[ls] = 0;
    }
    h3_strbuf msg;
    h3_strbuf_init(&msg);
    numbered_source(&msg, job->source, job->label, log ? log : "");
    h3_diag_error(d, no_span(),
                  inc ? "this is a bug in h3's code generator; please report it with this output"
                      : "NVRTC needs <cuda_bf16.h>: set CUDA_HOME to the CUDA toolkit folder",
                  "NVRTC could not compile %s for %s: %s\n%s\nsource:\n%s", job->label,
                  H3_TARGET_ARCH, nvrtcGetErrorString(r), log ? log : "", msg.data ? msg.data : "");
    h3_strbuf_free(&msg);
    free(log);
    st = H3_ERR;
  } else {
    size_t cs = 0;
    if (nvrtcGetCUBINSize(prog, &cs) != NVRTC_SUCCESS || cs == 0 || !(job->cubin = malloc(cs)) ||
        nvrtcGetCUBIN(prog, (char *)job->cubin) != NVRTC_SUCCESS) {
      free(job->cubin);
      job->cubin = NULL;
      h3_diag_error(d, no_span(), NVRTC_RETRY, "NVRTC produced no CUBIN for %s", job->label);
      st = H3_ERR;
    } else {
      job->cubin_len = cs;
    }
  }
  nvrtcDestroyProgram(&prog);
  return st;
}

static h3_status run_job(h3_nvrtc_job *job, const h3_kernel_cache *cache, h3_diag *d) {
  job->cache_hit = false;
  if (job_key(job) != H3_OK) {
    h3_diag_error(d, no_span(), H3_HINT_OOM, "out of memory hashing %s", job->label);
    return H3_ERR;
  }
  char path[4300];
  if (cache && cache->enabled) {
    snprintf(path, sizeof path, "%s/%s.cubin", cache->dir, job->key);
    char why[160];
    int r = cache_load(path, job, why, sizeof why);
    if (r == 1) {
      job->cache_hit = true;
      return H3_OK;
    }
    if (r < 0)
      h3_diag_warning(d, no_span(),
                      "the new compile replaces the entry; if this comes back, check the cache folder's disk",
                      "kernel cache entry '%s' is corrupt (%s); recompiling it", path, why);
  }
  if (compile_one(job, d) != H3_OK) return H3_ERR;
  if (cache && cache->enabled) cache_store(path, job, d);
  return H3_OK;
}

/* ---- the pool ------------------------------------------------------------------------------ */
typedef struct {
  h3_nvrtc_job *jobs;
  h3_diag *diags;
  h3_status *status;
  int n, next;
  const h3_kernel_cache *cache;
  pthread_mutex_t mu;
} pool;

static void *worker(void *arg) {
  pool *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->mu);
    int i = p->next++;
    pthread_mutex_unlock(&p->mu);
    if (i >= p->n) return NULL;
    p->status[i] = run_job(&p->jobs[i], p->cache, &p->diags[i]);
  }
}

h3_status h3_nvrtc_compile(h3_nvrtc_job *jobs, int n, const h3_kernel_cache *cache, int threads,
                           h3_diag *d) {
  if (n <= 0) return H3_OK;
  if (threads <= 0) threads = 2;
  if (threads > n) threads = n;
  pool p = {jobs, calloc((size_t)n, sizeof(h3_diag)), calloc((size_t)n, sizeof(h3_status)), n, 0,
            cache, PTHREAD_MUTEX_INITIALIZER};
  if (!p.diags || !p.status) {
    free(p.diags);
    free(p.status);
    h3_diag_error(d, no_span(), H3_HINT_OOM, "out of memory starting the NVRTC compile");
    return H3_ERR;
  }
  for (int i = 0; i < n; i++) h3_diag_init(&p.diags[i]);
  pthread_t tid[16];
  int started = 0;
  if (threads > 16) threads = 16;
  for (int t = 1; t < threads; t++)
    if (pthread_create(&tid[started], NULL, worker, &p) == 0) started++;
  worker(&p); /* the calling thread works too */
  for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
  h3_status st = H3_OK;
  for (int i = 0; i < n; i++) {
    for (h3_diag_msg *m = p.diags[i].head; m; m = m->next) {
      if (m->level == H3_DIAG_ERROR) h3_diag_error(d, m->span, m->hint, "%s", m->message);
      else if (m->level == H3_DIAG_WARNING) h3_diag_warning(d, m->span, m->hint, "%s", m->message);
      else h3_diag_note(d, m->span, "%s", m->message);
    }
    h3_diag_free(&p.diags[i]);
    if (p.status[i] != H3_OK) st = H3_ERR;
  }
  free(p.diags);
  free(p.status);
  return st;
}

void h3_nvrtc_job_free(h3_nvrtc_job *job) {
  free(job->cubin);
  job->cubin = NULL;
  job->cubin_len = 0;
}
