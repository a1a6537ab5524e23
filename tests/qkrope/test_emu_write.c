/* test_emu_write.c: the emitted CUDA C of rms_norm_rope_write (kv-write-fusion) run on the
 * host under tests/codegen/host_emu.h, next to the kernels h3 emits for the cache write it
 * replaces (rms_norm_rope, then kv_write; the reshape is a view), for the graphs of
 * kernels/emu_write.ir: the M3.1 k (4 x 128, rope dims 64), the M3.1 indexer's ik into a flat
 * cache, a 16-lane head of 64 with 37 tokens, a head of 20 single elements and the M3.1 k
 * with 512 tokens into 16 rows; and the v form (operand 6 the v cache, v_start; the kernel's
 * arguments in0..in6, out0 the cache, out1 the v cache) beside v's own write (slice of x's v
 * columns, the reshape view, kv_write into the v cache): the M3.1 k with its v (at 8704 of
 * qkv [T, 9216]), the head of 64 with v's chunks off 16-byte alignment, and the head of 20;
 * and the q form (operand 7 q's norm weight wq, q_start, q_heads; the kernel's arguments
 * in0..in7, out0, out1, out2 = q, a fresh buffer) beside the v form's unfused writes and q's
 * own rms_norm_rope (x's q columns, wq): the M3.1 q, k and v (q 64 x 128 at 0 of qkv), the
 * head of 64 with 111 q rows (a block, and a warp, holding a q row group and a k row group)
 * and the head of 20 with 3 q heads.
 * The write forms update their caches in place: each kernel chain gets its own copy of the
 * same random cache (and v cache), passed as the operand and as the result (one buffer, as
 * the plan runs them); v's columns of x hold two NaN payloads (v is copied as stored, as
 * kv_write copies bytes); q goes to a buffer of its own per chain, zeroed for the unfused
 * kernel and 0xffff for the fused one (an element it leaves unwritten differs). Slots are
 * random, in scrambled order, with duplicates (the first token's slot again at the last
 * token, more than a group's lanes apart in @lanes, @v_lanes and @q_lanes; tokens outnumber
 * rows in @lanes, @odd, @v_lanes, @v_odd, @q_lanes and @q_odd):
 *   - in range: the fused kernel's cache == the unfused kernels' cache, bitwise; and within
 *     2 bf16 ulps or 2^-6 of its head row's largest |value| of the CPU backend's
 *     rms_norm_rope_write (test_emu.c's tolerance), as are the unfused kernels of the CPU
 *     chain (the baseline); the v form's v cache == the unfused kernels' (slice, kv_write)
 *     v cache, bitwise, and both == the CPU op's result 1 (and the CPU's slice + kv_write),
 *     bitwise (v is a copy); the q form's q == the unfused rms_norm_rope kernel's, bitwise,
 *     and within the same tolerance of the CPU op's result 2 (as the unfused kernel is of
 *     the CPU's rms_norm_rope);
 *   - with one slot past the cache and one negative: both kernel chains skip those tokens
 *     and still agree bitwise, in both caches; q is written whatever the slots: the fused
 *     kernel's q == the unfused kernel's, and == its q of the in-range slots, bitwise (the
 *     CPU op calls these slots an error: test_cpu_write.c).
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

/* The operands of a graph @(%c, %x, %w, %cs, %sn, %slot[, %vc[, %wq]]) and its ops (v form:
 * slice and write_v, v's unfused write, and the v cache as operand 6; q form: norm_q, q's
 * rms_norm_rope, and q's weight as operand 7). */
typedef struct {
  h3_op *norm, *write, *fused, *slice, *write_v, *norm_q;
  void *in[8]; /* cache, x, w, cos, sin, slot, vcache, wq */
  bool v, q;   /* the v form; the q form (with v) */
  int64_t T, nc, nr, nq, D, rows; /* tokens, cache elements, head-row elements, q's elements, D,
                                     cache rows */
} wr_graph;

/* One run of both kernel chains: the caches (y unfused, f fused), the v caches (yv, fv;
 * NULL without v), q (yq, fq; NULL without q), all malloc'd, and the elements in which each
 * pair differs. */
typedef struct {
  uint16_t *y, *f, *yv, *fv, *yq, *fq;
  int64_t diff, vdiff, qdiff;
} wr_run;

static void run_free(wr_run *r) {
  free(r->y), free(r->f), free(r->yv), free(r->fv), free(r->yq), free(r->fq);
}

/* Elements in which a and b (n each) differ. */
static int64_t count_diff(const uint16_t *a, const uint16_t *b, int64_t n) {
  int64_t diff = 0;
  for (int64_t i = 0; i < n; i++) diff += a[i] != b[i];
  return diff;
}

/* Runs the unfused kernels and the fused kernel on a copy of the cache each (and of the v
 * cache in the v form; q into a zeroed buffer for the unfused kernel, one of 0xffff for the
 * fused kernel). */
static void run_kernels(const wr_graph *w, wr_run *r) {
  const size_t cb = (size_t)w->nc * 2 + 16, qb = (size_t)w->nq * 2 + 16;
  uint16_t *n = calloc((size_t)w->nr + 8, 2);
  *r = (wr_run){.y = malloc(cb), .f = malloc(cb)};
  memcpy(r->y, w->in[0], cb);
  memcpy(r->f, w->in[0], cb);
  emu_run_op(w->norm, (void *[]){w->in[1], w->in[2], w->in[3], w->in[4]}, (void *[]){n});
  emu_run_op(w->write, (void *[]){r->y, n, w->in[5]}, (void *[]){r->y});
  if (w->q) { /* q's rows on their own: rms_norm_rope of q's columns with wq */
    r->yq = calloc(1, qb), r->fq = malloc(qb);
    memset(r->fq, 0xff, qb);
    emu_run_op(w->norm_q, (void *[]){w->in[1], w->in[7], w->in[3], w->in[4]}, (void *[]){r->yq});
  }
  if (w->v) { /* v's columns (slice; the reshape is a view), then kv_write into the v cache */
    uint16_t *sv = calloc((size_t)w->nr + 8, 2);
    r->yv = malloc(cb), r->fv = malloc(cb);
    memcpy(r->yv, w->in[6], cb);
    memcpy(r->fv, w->in[6], cb);
    emu_run_op(w->slice, (void *[]){w->in[1]}, (void *[]){sv});
    emu_run_op(w->write_v, (void *[]){r->yv, sv, w->in[5]}, (void *[]){r->yv});
    emu_run_op(w->fused,
               (void *[]){r->f, w->in[1], w->in[2], w->in[3], w->in[4], w->in[5], r->fv, w->in[7]},
               (void *[]){r->f, r->fv, r->fq});
    r->vdiff = count_diff(r->yv, r->fv, w->nc);
    free(sv);
  } else {
    emu_run_op(w->fused, (void *[]){r->f, w->in[1], w->in[2], w->in[3], w->in[4], w->in[5]},
               (void *[]){r->f});
  }
  if (w->q) r->qdiff = count_diff(r->yq, r->fq, w->nq);
  free(n);
  r->diff = count_diff(r->y, r->f, w->nc);
}

/* In-range slots: the kernels against each other and against the CPU backend; returns the
 * fused kernel's q (malloc'd; NULL without q). */
static uint16_t *check_in_range(const char *name, const wr_graph *w) {
  wr_run k;
  run_kernels(w, &k);
  CHECK(k.diff == 0, "@%s: fused kernel != unfused kernels in %lld of %lld cache elements", name,
        (long long)k.diff, (long long)w->nc);
  CHECK(k.vdiff == 0, "@%s: fused kernel != unfused kernels in %lld of %lld v cache elements", name,
        (long long)k.vdiff, (long long)w->nc);
  CHECK(k.qdiff == 0, "@%s: fused kernel != unfused kernel in %lld of %lld q elements", name,
        (long long)k.qdiff, (long long)w->nq);
  void *co[4] = {NULL}; /* the CPU op's results: cache, v cache, q */
  uint16_t *cf = case_cpu_results(w->fused, w->in, co, 1) ? co[0] : NULL;
  uint16_t *cn = cpu_result(w->norm, (void *[]){w->in[1], w->in[2], w->in[3], w->in[4]});
  uint16_t *cy = cn ? cpu_result(w->write, (void *[]){w->in[0], cn, w->in[5]}) : NULL;
  CHECK(cf && cy, "@%s: the CPU results", name);
  if (cf && cy) {
    int64_t mu_f, mu_y;
    const int64_t rows = w->nc / w->D;
    const int64_t far_f = count_far(k.f, cf, rows, w->D, &mu_f), far_y = count_far(k.y, cy, rows, w->D, &mu_y);
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
      const int64_t d_f = count_diff(k.fv, co[1], w->nc), d_y = count_diff(k.yv, cyv, w->nc);
      fprintf(stderr, "  v: fused vs cpu op %lld, unfused kernels vs cpu chain %lld elements differ\n",
              (long long)d_f, (long long)d_y);
      CHECK(d_f == 0, "@%s: %lld v cache elements of the fused kernel differ from the CPU op", name,
            (long long)d_f);
      CHECK(d_y == 0, "@%s: %lld v cache elements of the unfused kernels differ from the CPU chain",
            name, (long long)d_y);
    }
    free(cs), free(cyv);
  }
  if (w->q) { /* q: rows of the same arithmetic as k's, the CPU's tolerance */
    uint16_t *cq = cpu_result(w->norm_q, (void *[]){w->in[1], w->in[7], w->in[3], w->in[4]});
    CHECK(cf && co[2] && cq, "@%s: the CPU results of q", name);
    if (cf && co[2] && cq) {
      int64_t mu_f, mu_y;
      const int64_t rows = w->nq / w->D;
      const int64_t far_f = count_far(k.fq, co[2], rows, w->D, &mu_f);
      const int64_t far_y = count_far(k.yq, cq, rows, w->D, &mu_y);
      fprintf(stderr, "  q: fused vs cpu op: max %lld ulps; unfused kernel vs cpu rms_norm_rope: "
              "max %lld ulps\n", (long long)mu_f, (long long)mu_y);
      CHECK(far_f == 0, "@%s: %lld q elements of the fused kernel far from the CPU op", name,
            (long long)far_f);
      CHECK(far_y == 0, "@%s: %lld q elements of the unfused kernel far from the CPU's rms_norm_rope",
            name, (long long)far_y);
    }
    free(cq);
  }
  uint16_t *fq = k.fq;
  k.fq = NULL;
  free(co[0]), free(co[1]), free(co[2]), free(cn), free(cy);
  run_free(&k);
  return fq;
}

static void test_graph(h3_graph *g) {
  wr_graph w = {.norm = case_op(g, "n"), .write = case_op(g, "y"), .fused = case_op(g, "f"),
                .slice = case_op(g, "v"), .write_v = case_op(g, "yv"), .norm_q = case_op(g, "q")};
  w.v = w.write_v != NULL;
  w.q = w.norm_q != NULL;
  const int n_in = w.q ? 8 : w.v ? 7 : 6;
  const bool ops = w.norm && w.write && w.fused && g->n_inputs == n_in &&
                   w.fused->n_operands == n_in && w.fused->n_results == n_in - 5 &&
                   (!w.v || w.slice) && (!w.q || w.v);
  CHECK(ops && emu_kernel_index(w.norm) >= 0 && emu_kernel_index(w.write) >= 0 &&
            emu_kernel_index(w.fused) >= 0 &&
            (!w.v || (emu_kernel_index(w.slice) >= 0 && emu_kernel_index(w.write_v) >= 0)) &&
            (!w.q || emu_kernel_index(w.norm_q) >= 0),
        "@%s: the graph's ops and kernels", g->name);
  if (!ops || emu_kernel_index(w.fused) < 0) return;
  const h3_type *ct = &g->inputs[0]->type, *nt = &w.norm->results[0]->type;
  w.T = nt->dims[0], w.D = nt->dims[2], w.nr = h3_type_numel(nt), w.nc = h3_type_numel(ct);
  w.nq = w.q ? h3_type_numel(&w.norm_q->results[0]->type) : 0;
  w.rows = ct->dims[0] * ct->dims[1];
  fprintf(stderr, "graph @%s: %lld tokens of %lld x %lld into %lld cache rows%s%s\n", g->name,
          (long long)w.T, (long long)nt->dims[1], (long long)w.D, (long long)w.rows,
          w.v ? " (and v's into the v cache)" : "",
          w.q ? "; q's rows first" : "");
  for (int i = 0; i < n_in; i++)
    if (i != 5)
      w.in[i] = case_random(qk_rng(), g->inputs[i]->type.dtype, h3_type_numel(&g->inputs[i]->type), i == 1);
  if (w.v) { /* NaN payloads in v's columns: v is copied as stored (kv_write copies bytes) */
    const int64_t C = g->inputs[1]->type.dims[1], vs = h3_op_attr_int(w.fused, "v_start", 0);
    uint16_t *x = w.in[1];
    x[vs + 1] = 0xffc1;
    if (w.T > 1) x[C + vs + 2] = 0x7f81;
  }
  int32_t *slot = malloc((size_t)w.T * 4 + 16);
  for (int64_t t = 0; t < w.T; t++) slot[t] = (int32_t)case_uniform(qk_rng(), 0, (double)w.rows);
  slot[w.T - 1] = slot[0]; /* the last token wins */
  w.in[5] = slot;
  uint16_t *q_in_range = check_in_range(g->name, &w);
  slot[1] = (int32_t)w.rows, slot[2] = -1;
  wr_run k;
  run_kernels(&w, &k);
  CHECK(k.diff == 0, "@%s: slots %lld and -1: fused kernel != unfused kernels in %lld elements",
        g->name, (long long)w.rows, (long long)k.diff);
  CHECK(k.vdiff == 0, "@%s: slots %lld and -1: fused kernel != unfused kernels in %lld v cache "
        "elements", g->name, (long long)w.rows, (long long)k.vdiff);
  CHECK(k.qdiff == 0, "@%s: slots %lld and -1: fused kernel != unfused kernel in %lld q elements",
        g->name, (long long)w.rows, (long long)k.qdiff);
  if (w.q) {
    const int64_t moved = q_in_range ? count_diff(k.fq, q_in_range, w.nq) : w.nq;
    CHECK(moved == 0, "@%s: slots %lld and -1: %lld q elements differ from q of the in-range "
          "slots (q is written whatever the slots)", g->name, (long long)w.rows, (long long)moved);
  }
  run_free(&k);
  free(q_in_range);
  for (int i = 0; i < 8; i++) free(w.in[i]);
}

int main(void) {
  const char *path = H3_SOURCE_DIR "/tests/qkrope/kernels/emu_write.ir";
  h3_module *m = emu_load(path);
  CHECK(m != NULL, "cannot read %s", path);
  if (!m) return check_summary("qkrope_emu_write");
  CHECK(emu_kernels.n == emu_count(), "%d kernel ops, %d emitted", emu_kernels.n, emu_count());
  int n_v = 0, n_q = 0;
  for (int i = 0; emu_kernels.n == emu_count() && i < m->n_graphs; i++) {
    test_graph(m->graphs[i]);
    n_v += case_op(m->graphs[i], "yv") != NULL;
    n_q += case_op(m->graphs[i], "q") != NULL;
  }
  CHECK(m->n_graphs == 11 && n_v == 6 && n_q == 3, "the eleven graphs of emu_write.ir, six with "
        "a v cache, three of them in the q form (%d, %d, %d)", m->n_graphs, n_v, n_q);
  emu_unload(m);
  return check_summary("qkrope_emu_write");
}
