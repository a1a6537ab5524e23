/* test_emu_write.c: the emitted CUDA C of rms_norm_rope_write (kv-write-fusion) run on the
 * host under tests/codegen/host_emu.h, next to the kernels h3 emits for the cache write it
 * replaces (rms_norm_rope, then kv_write; the reshape is a view), for the graphs of
 * kernels/emu_write.ir: the M3.1 k (4 x 128, rope dims 64), the M3.1 indexer's ik into a flat
 * cache, a 16-lane head of 64 with 37 tokens, a head of 20 single elements and the M3.1 k
 * with 512 tokens into 16 rows; and the v form (operand 6 the v cache, v_start; the kernel's
 * arguments in0..in6, out0 the cache, out1 the v cache) beside v's own write (slice of x's v
 * columns, the reshape view, kv_write into the v cache): the M3.1 k with its v (at 8704 of
 * qkv [T, 9216]), the head of 64 with v's chunks off 16-byte alignment, and the head of 20.
 * Both write forms update their caches in place: each kernel chain gets its own copy of the
 * same random cache (and v cache), passed as the operand and as the result (one buffer, as
 * the plan runs them). Slots are random, in scrambled order, with duplicates (the first
 * token's slot again at the last token, more than a group's lanes apart in @lanes and
 * @v_lanes; tokens outnumber rows in @lanes, @odd, @v_lanes and @v_odd):
 *   - in range: the fused kernel's cache == the unfused kernels' cache, bitwise; and within
 *     2 bf16 ulps or 2^-6 of its head row's largest |value| of the CPU backend's
 *     rms_norm_rope_write (test_emu.c's tolerance), as are the unfused kernels of the CPU
 *     chain (the baseline); the v form's v cache == the unfused kernels' (slice, kv_write)
 *     v cache, bitwise, and both == the CPU op's result 1 (and the CPU's slice + kv_write),
 *     bitwise (v is a copy);
 *   - with one slot past the cache and one negative: both kernel chains skip those tokens
 *     and still agree bitwise, in both caches (the CPU op calls these an error:
 *     test_cpu_write.c).
 * The emulation runs blocks and threads in order, so of two tokens with one slot the later
 * stores last anyway: a duplicate vote that wrongly skips a store fails here, a missing one
 * does not (test_gpu_write.c checks that on a GPU).
 * Inputs are random and never zero, with rows of very different norms.
 */
#include "qk_emu.h"
#include "qk_test.h"

#include "h3/backend.h"
#include "h3/codegen.h"
#include "h3/op_registry.h"

/* The operands of a graph @(%c, %x, %w, %cs, %sn, %slot[, %vc]) and its ops (v form: slice
 * and write_v, v's unfused write, and the v cache as operand 6). */
typedef struct {
  h3_op *norm, *write, *fused, *slice, *write_v;
  void *in[7]; /* cache, x, w, cos, sin, slot, vcache */
  bool v;      /* the v form */
  int64_t T, nc, nr, D, rows; /* tokens, cache elements, head-row elements, D, cache rows */
} wr_graph;

/* Elements in which caches a and b (nc each) differ. */
static int64_t cache_diff(const wr_graph *w, const uint16_t *a, const uint16_t *b) {
  int64_t diff = 0;
  for (int64_t i = 0; i < w->nc; i++) diff += a[i] != b[i];
  return diff;
}

/* Runs the unfused kernels and the fused kernel on a copy of the cache each (and of the v
 * cache in the v form); returns the number of cache elements in which they differ, the
 * caches in *y and *f, the v caches in *yv and *fv (malloc'd; NULL without v) and the v
 * caches' differing elements in *vdiff. */
static int64_t run_kernels(const wr_graph *w, uint16_t **y, uint16_t **f, uint16_t **yv,
                           uint16_t **fv, int64_t *vdiff) {
  const size_t cb = (size_t)w->nc * 2 + 16;
  uint16_t *n = calloc((size_t)w->nr + 8, 2);
  *y = malloc(cb), *f = malloc(cb);
  memcpy(*y, w->in[0], cb);
  memcpy(*f, w->in[0], cb);
  *yv = *fv = NULL;
  *vdiff = 0;
  emu_run_op(w->norm, (void *[]){w->in[1], w->in[2], w->in[3], w->in[4]}, (void *[]){n});
  emu_run_op(w->write, (void *[]){*y, n, w->in[5]}, (void *[]){*y});
  if (w->v) { /* v's columns (slice; the reshape is a view), then kv_write into the v cache */
    uint16_t *sv = calloc((size_t)w->nr + 8, 2);
    *yv = malloc(cb), *fv = malloc(cb);
    memcpy(*yv, w->in[6], cb);
    memcpy(*fv, w->in[6], cb);
    emu_run_op(w->slice, (void *[]){w->in[1]}, (void *[]){sv});
    emu_run_op(w->write_v, (void *[]){*yv, sv, w->in[5]}, (void *[]){*yv});
    emu_run_op(w->fused, (void *[]){*f, w->in[1], w->in[2], w->in[3], w->in[4], w->in[5], *fv},
               (void *[]){*f, *fv});
    *vdiff = cache_diff(w, *yv, *fv);
    free(sv);
  } else {
    emu_run_op(w->fused, (void *[]){*f, w->in[1], w->in[2], w->in[3], w->in[4], w->in[5]}, (void *[]){*f});
  }
  free(n);
  return cache_diff(w, *y, *f);
}

/* In-range slots: the kernels against each other and against the CPU backend. */
static void check_in_range(const char *name, const wr_graph *w) {
  uint16_t *y, *f, *yv, *fv;
  int64_t vdiff;
  const int64_t diff = run_kernels(w, &y, &f, &yv, &fv, &vdiff);
  CHECK(diff == 0, "@%s: fused kernel != unfused kernels in %lld of %lld cache elements", name,
        (long long)diff, (long long)w->nc);
  CHECK(vdiff == 0, "@%s: fused kernel != unfused kernels in %lld of %lld v cache elements", name,
        (long long)vdiff, (long long)w->nc);
  void *co[4] = {NULL}; /* the CPU op's results: cache, v cache */
  uint16_t *cf = case_cpu_results(w->fused, w->in, co, 1) ? co[0] : NULL;
  uint16_t *cn = cpu_result(w->norm, (void *[]){w->in[1], w->in[2], w->in[3], w->in[4]});
  uint16_t *cy = cn ? cpu_result(w->write, (void *[]){w->in[0], cn, w->in[5]}) : NULL;
  CHECK(cf && cy, "@%s: the CPU results", name);
  if (cf && cy) {
    int64_t mu_f, mu_y;
    const int64_t rows = w->nc / w->D;
    const int64_t far_f = count_far(f, cf, rows, w->D, &mu_f), far_y = count_far(y, cy, rows, w->D, &mu_y);
    fprintf(stderr, "  fused vs cpu op: max %lld ulps; unfused kernels vs cpu chain: max %lld ulps\n",
            (long long)mu_f, (long long)mu_y);
    CHECK(far_f == 0, "@%s: %lld cache elements of the fused kernel far from the CPU op", name,
          (long long)far_f);
    CHECK(far_y == 0, "@%s: %lld cache elements of the unfused kernels far from the CPU chain",
          name, (long long)far_y);
  }
  if (w->v) { /* v: a copy, bitwise everywhere */
    uint16_t *cs = cpu_result(w->slice, (void *[]){w->in[1]});
    uint16_t *cyv = cs ? cpu_result(w->write_v, (void *[]){w->in[6], cs, w->in[5]}) : NULL;
    CHECK(cf && co[1] && cyv, "@%s: the CPU results of v", name);
    if (cf && co[1] && cyv) {
      const int64_t d_f = cache_diff(w, fv, co[1]), d_y = cache_diff(w, yv, cyv);
      fprintf(stderr, "  v: fused vs cpu op %lld, unfused kernels vs cpu chain %lld elements differ\n",
              (long long)d_f, (long long)d_y);
      CHECK(d_f == 0, "@%s: %lld v cache elements of the fused kernel differ from the CPU op", name,
            (long long)d_f);
      CHECK(d_y == 0, "@%s: %lld v cache elements of the unfused kernels differ from the CPU chain",
            name, (long long)d_y);
    }
    free(cs), free(cyv);
  }
  free(co[0]), free(co[1]), free(cn), free(cy), free(y), free(f), free(yv), free(fv);
}

static void test_graph(h3_graph *g) {
  wr_graph w = {.norm = case_op(g, "n"), .write = case_op(g, "y"), .fused = case_op(g, "f"),
                .slice = case_op(g, "v"), .write_v = case_op(g, "yv")};
  w.v = w.write_v != NULL;
  const int n_in = w.v ? 7 : 6;
  const bool ops = w.norm && w.write && w.fused && g->n_inputs == n_in &&
                   w.fused->n_operands == n_in && w.fused->n_results == (w.v ? 2 : 1) &&
                   (!w.v || w.slice);
  CHECK(ops && emu_kernel_index(w.norm) >= 0 && emu_kernel_index(w.write) >= 0 &&
            emu_kernel_index(w.fused) >= 0 &&
            (!w.v || (emu_kernel_index(w.slice) >= 0 && emu_kernel_index(w.write_v) >= 0)),
        "@%s: the graph's ops and kernels", g->name);
  if (!ops || emu_kernel_index(w.fused) < 0) return;
  const h3_type *ct = &g->inputs[0]->type, *nt = &w.norm->results[0]->type;
  w.T = nt->dims[0], w.D = nt->dims[2], w.nr = h3_type_numel(nt), w.nc = h3_type_numel(ct);
  w.rows = ct->dims[0] * ct->dims[1];
  fprintf(stderr, "graph @%s: %lld tokens of %lld x %lld into %lld cache rows%s\n", g->name,
          (long long)w.T, (long long)nt->dims[1], (long long)w.D, (long long)w.rows,
          w.v ? " (and v's into the v cache)" : "");
  for (int i = 0; i < n_in; i++)
    if (i != 5)
      w.in[i] = case_random(qk_rng(), g->inputs[i]->type.dtype, h3_type_numel(&g->inputs[i]->type), i == 1);
  int32_t *slot = malloc((size_t)w.T * 4 + 16);
  for (int64_t t = 0; t < w.T; t++) slot[t] = (int32_t)case_uniform(qk_rng(), 0, (double)w.rows);
  slot[w.T - 1] = slot[0]; /* the last token wins */
  w.in[5] = slot;
  check_in_range(g->name, &w);
  slot[1] = (int32_t)w.rows, slot[2] = -1;
  uint16_t *y, *f, *yv, *fv;
  int64_t vdiff;
  const int64_t diff = run_kernels(&w, &y, &f, &yv, &fv, &vdiff);
  CHECK(diff == 0, "@%s: slots %lld and -1: fused kernel != unfused kernels in %lld elements",
        g->name, (long long)w.rows, (long long)diff);
  CHECK(vdiff == 0, "@%s: slots %lld and -1: fused kernel != unfused kernels in %lld v cache "
        "elements", g->name, (long long)w.rows, (long long)vdiff);
  free(y), free(f), free(yv), free(fv);
  for (int i = 0; i < 7; i++) free(w.in[i]);
}

int main(void) {
  const char *path = H3_SOURCE_DIR "/tests/qkrope/kernels/emu_write.ir";
  h3_module *m = emu_load(path);
  CHECK(m != NULL, "cannot read %s", path);
  if (!m) return check_summary("qkrope_emu_write");
  CHECK(emu_kernels.n == emu_count(), "%d kernel ops, %d emitted", emu_kernels.n, emu_count());
  int n_v = 0;
  for (int i = 0; emu_kernels.n == emu_count() && i < m->n_graphs; i++) {
    test_graph(m->graphs[i]);
    n_v += case_op(m->graphs[i], "yv") != NULL;
  }
  CHECK(m->n_graphs == 8 && n_v == 3, "the eight graphs of emu_write.ir, three in the v form "
        "(%d, %d)", m->n_graphs, n_v);
  emu_unload(m);
  return check_summary("qkrope_emu_write");
}
