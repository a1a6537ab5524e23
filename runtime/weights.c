/* weights.c: the weight store (include/h3/weights.h): expanded tensor names, buffers,
 * random initialisation from h3's Philox generator (the random parameters filled by a few
 * threads, one per online CPU, with the same bits as one), and the dtype rounding of stored
 * values. Loading and saving files are in weights_file.c.
 */
#include "weights_internal.h"

#include "h3/bf16.h"
#include "h3/rng.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int64_t h3_weights_tensor_count(const h3_param *p) {
  int64_t n = 1;
  for (int i = 0; i < p->group_dims; i++) n *= p->type.dims[i];
  return n;
}

h3_type h3_weights_tensor_type(const h3_param *p) {
  return h3_type_make(p->type.dtype, p->type.rank - p->group_dims, p->type.dims + p->group_dims);
}

/* Counts the "{}" and "{e}" placeholders of a name pattern. */
static void count_placeholders(const char *s, int *groups, int *inners) {
  *groups = *inners = 0;
  for (; *s; s++) {
    if (strncmp(s, "{}", 2) == 0) ++*groups;
    if (strncmp(s, "{e}", 3) == 0) ++*inners;
  }
}

h3_status h3_weights_tensor_name(const h3_param *p, int64_t i, h3_strbuf *out, h3_diag *d) {
  int groups, inners;
  count_placeholders(p->name, &groups, &inners);
  if (groups > 1 || inners > 1 || groups + inners != p->group_dims) {
    h3_diag_error(d, p->span, "a group member's name needs one \"{}\" per group and one \"{e}\" "
                              "per inner array",
                  "parameter '%s': its name has %d \"{}\" and %d \"{e}\" but %d group dims",
                  p->name, groups, inners, p->group_dims);
    return H3_ERR;
  }
  /* i is row-major over the group dims: [group, inner] when both are present. */
  int64_t group = 0, inner = 0;
  if (groups && inners) {
    group = i / p->type.dims[1];
    inner = i % p->type.dims[1];
  } else if (groups) {
    group = i;
  } else {
    inner = i;
  }
  out->len = 0;
  if (out->data) out->data[0] = '\0';
  for (const char *s = p->name; *s;) {
    if (strncmp(s, "{}", 2) == 0) {
      h3_strbuf_printf(out, "%lld", (long long)(p->group_base + group));
      s += 2;
    } else if (strncmp(s, "{e}", 3) == 0) {
      h3_strbuf_printf(out, "%lld", (long long)inner);
      s += 3;
    } else {
      const char *brace = strchr(s + 1, '{');
      size_t n = brace ? (size_t)(brace - s) : strlen(s);
      h3_strbuf_appendn(out, s, n);
      s += n;
    }
  }
  if (out->oom) {
    h3_diag_error(d, p->span, H3_HINT_OOM, "parameter '%s': out of memory naming its tensors", p->name);
    return H3_ERR;
  }
  return H3_OK;
}

/* Round half to even, then saturate to [lo, hi]. NaN stores 0. */
static int64_t round_int(double v, double lo, double hi) {
  if (v != v) return 0;
  double r = nearbyint(v); /* the default rounding mode: to nearest, ties to even */
  if (r < lo) return (int64_t)lo;
  if (r > hi) return (int64_t)hi;
  return (int64_t)r;
}

void h3_weights_store(void *dst, h3_dtype dtype, size_t index, double v) {
  switch (dtype) {
  case H3_BF16: ((uint16_t *)dst)[index] = h3_f32_to_bf16((float)v); break;
  case H3_F16: ((uint16_t *)dst)[index] = h3_f32_to_f16((float)v); break;
  case H3_F32: ((float *)dst)[index] = (float)v; break;
  case H3_F64: ((double *)dst)[index] = v; break;
  case H3_I8: ((int8_t *)dst)[index] = (int8_t)round_int(v, -128, 127); break;
  case H3_I32:
    ((int32_t *)dst)[index] = (int32_t)round_int(v, -2147483648.0, 2147483647.0);
    break;
  case H3_I64:
    /* 2^63 is not representable in int64: clamp just below it */
    ((int64_t *)dst)[index] = round_int(v, -9223372036854775808.0, 9223372036854774784.0);
    break;
  case H3_U8: ((uint8_t *)dst)[index] = (uint8_t)round_int(v, 0, 255); break;
  default: break;
  }
}

void h3_weights_free(h3_weights *w) {
  if (!w) return;
  for (int i = 0; i < w->n; i++) free(w->w[i].data);
  free(w->w);
  free(w);
}

/* Allocates every parameter's buffer, zero-filled when `zero` (else the caller writes every
   byte). */
/* zero: buffers zero-filled; quant_only: buffers for the NVFP4 parameters alone (the others
 * keep data NULL) */
static h3_weights *alloc_store(const h3_module *m, bool zero, bool quant_only, h3_diag *d) {
  h3_span none = {0};
  h3_weights *w = calloc(1, sizeof *w);
  if (w) w->w = calloc((size_t)m->n_params + 1, sizeof *w->w);
  if (!w || !w->w) {
    free(w);
    h3_diag_error(d, none, H3_HINT_OOM, "out of memory allocating the weight store");
    return NULL;
  }
  w->module = m;
  w->n = m->n_params;
  for (int i = 0; i < m->n_params; i++) {
    const h3_param *p = m->params[i];
    size_t bytes = (size_t)h3_type_bytes(&p->type);
    w->w[i].param = p;
    w->w[i].bytes = bytes;
    w->total_bytes += bytes;
    w->n_tensors += h3_weights_tensor_count(p);
    if (bytes == 0 || (quant_only && p->quant == H3_QUANT_NONE)) continue;
    w->w[i].data = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!w->w[i].data) {
      h3_diag_error(d, p->span, "use a smaller config (--config small / tiny) or a bigger machine",
                    "out of memory allocating %zu bytes for parameter '%s'", bytes, p->name);
      h3_weights_free(w);
      return NULL;
    }
    if (zero) memset(w->w[i].data, 0, bytes);
  }
  return w;
}

h3_weights *h3_weights_alloc(const h3_module *m, h3_diag *d) { return alloc_store(m, true, false, d); }

const h3_weight *h3_weights_get(const h3_weights *w, const h3_param *p) {
  for (int i = 0; i < w->n; i++)
    if (w->w[i].param == p) return &w->w[i];
  return NULL;
}

#define FILL_CHUNK 4096     /* elements per h3_rng_fill_init call (a thread's tmp buffer) */
#define FILL_ITEM (1 << 16) /* elements per work item of the parallel fill */
#define FILL_THREADS_MAX 64

void h3_weights_fill_random(const h3_param *p, uint64_t seed, uint32_t stream, void *dst,
                            size_t first, size_t at, size_t n, float *tmp) {
  h3_dtype dt = p->type.dtype;
  int kind = p->init == H3_INIT_UNIFORM            ? H3_RNG_INIT_UNIFORM
             : p->init == H3_INIT_ONES_PLUS_NORMAL ? H3_RNG_INIT_ONES_PLUS_NORMAL
                                                   : H3_RNG_INIT_NORMAL;
  float scale = (float)p->init_scale;
  for (size_t i = 0; i < n; i += FILL_CHUNK) {
    size_t c = n - i < FILL_CHUNK ? n - i : FILL_CHUNK;
    h3_rng_fill_init(kind, scale, seed, stream, at + i, c, tmp);
    if (dt == H3_F32) {
      memcpy((float *)dst + first + i, tmp, c * sizeof(float));
    } else if (dt == H3_BF16) {
      uint16_t *o = (uint16_t *)dst + first + i;
      for (size_t e = 0; e < c; e++) o[e] = h3_f32_to_bf16(tmp[e]);
    } else {
      for (size_t e = 0; e < c; e++) h3_weights_store(dst, dt, first + i + e, tmp[e]);
    }
  }
}

/* Fills the numel elements of a CONST or ROPE_INV_FREQ tensor starting at index `first`. */
static void fill_fixed(const h3_param *p, void *dst, size_t first, size_t numel) {
  h3_dtype dt = p->type.dtype;
  if (p->init == H3_INIT_CONST) {
    for (size_t i = 0; i < numel; i++) h3_weights_store(dst, dt, first + i, p->init_value);
    return;
  }
  for (size_t i = 0; i < numel; i++)
    h3_weights_store(dst, dt, first + i, pow(p->init_value, -2.0 * (double)i / p->init_scale));
}

/* Random and filled here; the NVFP4 parameters are made from their bf16 weight instead. */
static bool is_random(const h3_param *p) {
  return p->init != H3_INIT_CONST && p->init != H3_INIT_ROPE_INV_FREQ && p->quant == H3_QUANT_NONE;
}

/* ---- the parallel fill of the random parameters ---------------------------------------------
 * Each random parameter's elements (all of its tensors, in storage order) are cut into items
 * of FILL_ITEM elements (an item may span tensors); threads take items in turn. Philox is
 * counter-based: an element's value depends only on (seed, its tensor's stream, its index in
 * the tensor), so the bits do not depend on the thread count or on who fills what. */
typedef struct {
  const h3_param *p;
  void *data;
  size_t numel, total;    /* elements per tensor, in all */
  const uint32_t *stream; /* [tensors]: each tensor's stream id */
  size_t first_item;      /* number of the parameter's first item */
} fill_param;

typedef struct {
  const fill_param *params;
  int n;
  uint64_t seed;
  size_t items;
  atomic_size_t next;
} fill_work;

static void fill_item(const fill_param *f, uint64_t seed, size_t item, float *tmp) {
  size_t pos = item * FILL_ITEM, end = pos + FILL_ITEM < f->total ? pos + FILL_ITEM : f->total;
  while (pos < end) {
    size_t t = pos / f->numel, at = pos % f->numel;
    size_t n = end - pos < f->numel - at ? end - pos : f->numel - at;
    h3_weights_fill_random(f->p, seed, f->stream[t], f->data, pos, at, n, tmp);
    pos += n;
  }
}

static void *fill_main(void *arg) {
  fill_work *w = arg;
  float tmp[FILL_CHUNK];
  int at = 0;
  for (size_t item; (item = atomic_fetch_add(&w->next, 1)) < w->items;) {
    while (at + 1 < w->n && w->params[at + 1].first_item <= item) at++; /* items ascend */
    fill_item(&w->params[at], w->seed, item - w->params[at].first_item, tmp);
  }
  return NULL;
}

/* Runs fill_main on up to one thread per online CPU (FILL_THREADS_MAX at most), the caller's
   included; threads that cannot be started leave their share to the others. */
static void fill_parallel(fill_work *w) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  size_t want = cpus < 1 ? 1 : cpus > FILL_THREADS_MAX ? FILL_THREADS_MAX : (size_t)cpus;
  if (want > w->items) want = w->items;
  pthread_t threads[FILL_THREADS_MAX];
  size_t started = 0;
  while (started + 1 < want && pthread_create(&threads[started], NULL, fill_main, w) == 0)
    started++;
  fill_main(w);
  for (size_t i = 0; i < started; i++) pthread_join(threads[i], NULL);
}

_Static_assert(H3_INIT_NORMAL == H3_RNG_INIT_NORMAL && H3_INIT_UNIFORM == H3_RNG_INIT_UNIFORM &&
                   H3_INIT_ONES_PLUS_NORMAL == H3_RNG_INIT_ONES_PLUS_NORMAL,
               "rng.h repeats the numbers of h3_init_kind");

/* The init of a parameter must be one of h3_init_kind with usable numbers. */
static h3_status check_init(const h3_param *p, h3_diag *d) {
  const char *why = NULL;
  if ((unsigned)p->init > H3_INIT_ROPE_INV_FREQ)
    why = "its init kind is unknown";
  else if (p->init == H3_INIT_ROPE_INV_FREQ && !(p->init_value > 0 && p->init_scale > 0))
    why = "rope_inv_freq needs theta > 0 and dims > 0";
  else if (p->init != H3_INIT_CONST && p->init != H3_INIT_ROPE_INV_FREQ &&
           !(p->init_scale >= 0 && p->init_scale < 1e30))
    why = "its init scale must be a finite number >= 0";
  else if (p->init == H3_INIT_CONST && p->init_value != p->init_value)
    why = "its init value is NaN";
  if (!why) return H3_OK;
  h3_diag_error(d, p->span, "fix the parameter's `init` in the model",
                "parameter '%s': cannot generate random weights: %s", p->name, why);
  return H3_ERR;
}

/* Checks each parameter's init, fills the CONST / ROPE_INV_FREQ ones and lists the random
   ones in fp (their tensors' stream ids in streams, w->n_tensors at most); returns the number
   of random parameters, -1 after reporting a bad init or name. */
static int fill_plan(const h3_weights *w, fill_param *fp, uint32_t *streams, size_t *items,
                     h3_diag *d) {
  h3_strbuf name;
  h3_strbuf_init(&name);
  int n = 0;
  for (int i = 0; i < w->n && n >= 0; i++) {
    const h3_param *p = w->w[i].param;
    h3_type tt = h3_weights_tensor_type(p);
    size_t numel = (size_t)h3_type_numel(&tt);
    int64_t count = h3_weights_tensor_count(p);
    if (check_init(p, d) != H3_OK) n = -1;
    for (int64_t k = 0; k < count && n >= 0; k++) {
      if (h3_weights_tensor_name(p, k, &name, d) != H3_OK)
        n = -1;
      else if (is_random(p))
        streams[k] = h3_rng_stream_id(name.data);
      else if (p->quant == H3_QUANT_NONE)
        fill_fixed(p, w->w[i].data, (size_t)k * numel, numel);
    }
    if (n < 0 || !is_random(p) || numel * (size_t)count == 0) continue;
    fp[n] = (fill_param){p, w->w[i].data, numel, numel * (size_t)count, streams, *items};
    *items += (fp[n].total + FILL_ITEM - 1) / FILL_ITEM;
    streams += count;
    n++;
  }
  h3_strbuf_free(&name);
  return n;
}

h3_weights *h3_weights_random(const h3_module *m, uint64_t seed, h3_diag *d) {
  h3_weights *w = alloc_store(m, false, false, d); /* every element is generated (fill_plan) */
  if (!w) return NULL;
  fill_param *fp = malloc((size_t)(w->n + 1) * sizeof *fp);
  uint32_t *streams = malloc((size_t)(w->n_tensors + 1) * sizeof *streams);
  fill_work work = {.params = fp, .n = -1, .seed = seed};
  atomic_init(&work.next, 0);
  if (!fp || !streams)
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "out of memory generating weights");
  else
    work.n = fill_plan(w, fp, streams, &work.items, d);
  if (work.n > 0) fill_parallel(&work);
  free(fp), free(streams);
  if (work.n >= 0 && h3_weights_nvfp4_random(w, seed, d) == H3_OK) return w;
  h3_weights_free(w);
  return NULL;
}

h3_weights *h3_weights_random_nvfp4(const h3_module *m, uint64_t seed, h3_diag *d) {
  h3_weights *w = alloc_store(m, false, true, d);
  if (w && h3_weights_nvfp4_random(w, seed, d) == H3_OK) return w;
  h3_weights_free(w);
  return NULL;
}
