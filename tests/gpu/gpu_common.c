/* gpu_common.c: helpers of the GPU tests (see gpu_common.h). */
#include "gpu_common.h"

#include "h3/bf16.h"
#include "h3/cuda_backend.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gpu_require(void) {
  char why[256];
  if (!h3_cuda_available(why, sizeof why)) {
    printf("skipped: no usable GPU (%s)\n", why);
    exit(77);
  }
}

void gpu_rng_seed(gpu_rng *r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ull + 1; }

static uint64_t next(gpu_rng *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return r->s;
}

double gpu_uniform(gpu_rng *r, double lo, double hi) {
  return lo + (hi - lo) * (double)(next(r) >> 11) * (1.0 / 9007199254740992.0);
}

void *gpu_host_random(gpu_rng *r, const h3_type *t, double lo, double hi, int64_t int_hi) {
  int64_t n = h3_type_numel(t);
  size_t bytes = (size_t)h3_type_bytes(t);
  void *p = malloc(bytes ? bytes : 1);
  if (!p) return NULL;
  for (int64_t i = 0; i < n; i++) {
    double v = h3_dtype_is_float(t->dtype) ? gpu_uniform(r, lo, hi)
                                           : (double)(int64_t)(next(r) % (uint64_t)(int_hi > 0 ? int_hi : 1));
    h3_weights_store(p, t->dtype, (size_t)i, v);
  }
  return p;
}

bool gpu_buf_alloc(h3_backend *b, gpu_buf *g, size_t bytes, h3_diag *d) {
  g->bytes = bytes;
  g->base = b->ops->alloc(b, bytes + 2 * GPU_GUARD);
  g->p = g->base ? (char *)g->base + GPU_GUARD : NULL;
  if (!g->base) {
    h3_diag_error(d, (h3_span){0}, NULL, "test: out of device memory (%zu bytes)", bytes);
    return false;
  }
  unsigned char guard[GPU_GUARD];
  memset(guard, GPU_GUARD_BYTE, sizeof guard);
  return b->ops->upload(b, g->base, guard, GPU_GUARD, d) == H3_OK &&
         b->ops->upload(b, (char *)g->p + bytes, guard, GPU_GUARD, d) == H3_OK;
}

bool gpu_buf_upload(h3_backend *b, gpu_buf *g, const void *host, h3_diag *d) {
  return b->ops->upload(b, g->p, host, g->bytes, d) == H3_OK && b->ops->sync(b, d) == H3_OK;
}

bool gpu_buf_poison(h3_backend *b, gpu_buf *g, h3_diag *d) {
  void *tmp = malloc(g->bytes ? g->bytes : 1);
  if (!tmp) return false;
  memset(tmp, 0xFF, g->bytes);
  bool ok = gpu_buf_upload(b, g, tmp, d);
  free(tmp);
  return ok;
}

bool gpu_buf_download(h3_backend *b, gpu_buf *g, void *host, bool *guards_ok, h3_diag *d) {
  unsigned char guard[2][GPU_GUARD];
  if (b->ops->download(b, host, g->p, g->bytes, d) != H3_OK ||
      b->ops->download(b, guard[0], g->base, GPU_GUARD, d) != H3_OK ||
      b->ops->download(b, guard[1], (char *)g->p + g->bytes, GPU_GUARD, d) != H3_OK)
    return false;
  *guards_ok = true;
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < GPU_GUARD; i++)
      if (guard[s][i] != GPU_GUARD_BYTE) *guards_ok = false;
  return true;
}

void gpu_buf_free(h3_backend *b, gpu_buf *g) {
  if (g->base) b->ops->release(b, g->base);
  g->base = g->p = NULL;
}

static double load(const void *p, h3_dtype dt, int64_t i) {
  switch (dt) {
  case H3_BF16: return h3_bf16_to_f32(((const uint16_t *)p)[i]);
  case H3_F16: return h3_f16_to_f32(((const uint16_t *)p)[i]);
  case H3_F32: return ((const float *)p)[i];
  case H3_F64: return ((const double *)p)[i];
  case H3_I8: return ((const int8_t *)p)[i];
  case H3_I32: return ((const int32_t *)p)[i];
  case H3_I64: return (double)((const int64_t *)p)[i];
  default: return ((const uint8_t *)p)[i];
  }
}

gpu_cmp gpu_compare(const h3_type *t, const void *got, const void *want) {
  gpu_cmp c = {0, 0, 0, h3_type_numel(t)};
  double num = 0, den = 0;
  bool is_float = h3_dtype_is_float(t->dtype);
  for (int64_t i = 0; i < c.n; i++) {
    double g = load(got, t->dtype, i), w = load(want, t->dtype, i);
    if (!is_float) {
      if (t->dtype == H3_I64 ? ((const int64_t *)got)[i] != ((const int64_t *)want)[i] : g != w)
        c.int_diff++;
      continue;
    }
    bool gs = !isfinite(g), ws = !isfinite(w);
    if (gs || ws) {
      if (!(gs && ws && (isnan(g) == isnan(w)) && (isnan(g) || g == w))) c.mismatched_special++;
      continue;
    }
    num += (g - w) * (g - w);
    den += w * w;
  }
  c.nmse = den > 0 ? num / den : num;
  return c;
}

double gpu_nmse_limit(h3_dtype dt) {
  switch (dt) {
  case H3_BF16: return 1e-4;
  case H3_F16: return 1e-5;
  case H3_F32: return 1e-6;
  case H3_F64: return 1e-12;
  default: return 0;
  }
}

bool gpu_cmp_ok(const gpu_cmp *c, double limit) {
  return c->mismatched_special == 0 && c->int_diff == 0 && c->nmse <= limit;
}

h3_plan *gpu_plan_load(h3_backend *b, h3_module *m, h3_tier tier) {
  h3_diag d;
  h3_diag_init(&d);
  h3_plan_options po = {.quality = tier};
  h3_plan *p = NULL;
  if (h3_plan_build(&p, m, &po, &d) == H3_OK && h3_backend_load_plan(b, p, &d) != H3_OK) {
    for (h3_diag_msg *msg = d.head; p && msg; msg = msg->next)
      if (msg->level == H3_DIAG_ERROR && (!msg->message || !strstr(msg->message, "not supported"))) {
        h3_plan_free(p);
        p = NULL;
      }
  }
  if (!p) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return p;
}

int gpu_passed, gpu_failed;

void gpu_check(bool ok, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("%s ", ok ? "ok  " : "FAIL");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  if (ok) gpu_passed++;
  else gpu_failed++;
}

/* Device milliseconds of one run of op (after one of evict, untimed, when evict); -1 on error. */
static double op_ms(h3_backend *b, const h3_op *op, const h3_tensor *in, int n_in, const h3_tensor *out,
                    const gpu_op_run *evict, h3_diag *d) {
  if (evict && b->ops->run_op(b, evict->op, evict->in, evict->n_in, evict->out, 1, d) != H3_OK) return -1;
  if (b->ops->sync(b, d) != H3_OK) return -1;
  h3_backend_reset_busy(b);
  if (b->ops->run_op(b, op, in, n_in, out, 1, d) != H3_OK || b->ops->sync(b, d) != H3_OK) return -1;
  return h3_backend_busy_seconds(b) * 1e3;
}

double gpu_time_op(h3_backend *b, const h3_op *op, const h3_tensor *in, int n_in, const h3_tensor *out,
                   int iters, int warm_n, double warm_s, h3_diag *d) {
  return gpu_time_op_cold(b, op, in, n_in, out, iters, warm_n, warm_s, NULL, d);
}

double gpu_time_op_cold(h3_backend *b, const h3_op *op, const h3_tensor *in, int n_in, const h3_tensor *out,
                        int iters, int warm_n, double warm_s, const gpu_op_run *evict, h3_diag *d) {
  /* the eviction's own device time, counted in the warm-up's seconds */
  const double evict_ms = evict ? op_ms(b, evict->op, evict->in, evict->n_in, evict->out, NULL, d) : 0;
  if (evict_ms < 0) return -1;
  double warm_ms = 0;
  for (int w = 0; w < warm_n || (warm_ms < warm_s * 1e3 && w < 100000); w++) {
    double t = op_ms(b, op, in, n_in, out, evict, d);
    if (t < 0) return -1;
    warm_ms += t + evict_ms;
  }
  double *ms = calloc((size_t)iters + 1, sizeof *ms);
  for (int it = 0; ms && it < iters; it++) {
    ms[it] = op_ms(b, op, in, n_in, out, evict, d);
    if (ms[it] < 0) {
      free(ms);
      return -1;
    }
  }
  if (!ms) return -1;
  for (int i = 1; i < iters; i++) /* insertion sort for the median */
    for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
      double t = ms[j];
      ms[j] = ms[j - 1];
      ms[j - 1] = t;
    }
  double med = ms[iters / 2];
  free(ms);
  return med;
}
