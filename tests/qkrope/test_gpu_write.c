/* test_gpu_write.c: the rms_norm_rope_write kernels of kernels/emu_write.ir on a GPU (label
 * gpu; exits 77 without a usable CUDA driver), where blocks and lanes store concurrently: the
 * duplicate-slot rule (a later token wins), which the host emulation cannot observe (it runs
 * blocks and threads in order, so the later token stores last anyway), decides the result
 * here. The graph's kernels (rms_norm_rope, kv_write, the fused op; the reshape is a view;
 * in the v form also v's slice and kv_write into the v cache, and the fused op with the v
 * cache as operand 6 and result 1: in0..in6, out0, out1; in the q form also q's own
 * rms_norm_rope (x's q columns with wq), and the fused op with wq as operand 7 and q as
 * result 2: in0..in7, out0, out1, out2) are compiled by NVRTC as a plan compiles them
 * (exact, -fmad=false) and launched with their launch rules; every in-place write gets its
 * cache buffer as operand and result, each chain its own copy of the same random cache (and
 * v cache); q goes to a buffer of each chain's own, set to 0xffff before every round (an
 * element left unwritten shows). 40 rounds per graph, each with fresh slots drawn from half
 * the cache rows (many duplicates, in scrambled order; in @many each slot is taken by about
 * 64 tokens across the grid); every other round one slot past the cache and one negative:
 *   - the fused kernel's cache == the unfused kernels' cache, bitwise; in the v form its v
 *     cache == that of v's slice + kv_write, bitwise; in the q form its q == that of q's
 *     rms_norm_rope kernel, bitwise, whatever the slots;
 *   - in range: within 2 bf16 ulps or 2^-6 of its head row's largest |value| of the CPU
 *     backend's rms_norm_rope_write (the later token's row at a repeated slot, the cache's
 *     other rows untouched); the v cache bitwise the CPU op's result 1; q within the same
 *     tolerance of the CPU op's result 2.
 *   qkrope_gpu_write_test [EMU_WRITE_IR]   (default: the source tree's kernels/emu_write.ir)
 */
#include "qk_test.h"

#include "h3/backend.h"
#include "h3/codegen.h"
#include "h3/kernels.h"
#include "h3/op_registry.h"

#include "../common/cuda_driver.h"

enum { ROUNDS = 40 };

/* The kernels of a graph: rms_norm_rope, kv_write, rms_norm_rope_write, in the v form v's
 * slice and kv_write, and in the q form q's rms_norm_rope (%n, %y, %f, %v, %yv, %q). */
enum { K_NORM, K_WRITE, K_FUSED, K_SLICE, K_WRITE_V, K_NORM_Q, N_KERNELS };

/* A graph's kernels on the device and its host operands (%c, %x, %w, %cs, %sn, %slot, %vc?,
 * %wq?). */
typedef struct {
  const h3_op *op[N_KERNELS];
  h3_kernel k[N_KERNELS];
  CUfunction fn[N_KERNELS];
  int n_k;    /* 3, 5 in the v form, 6 in the q form */
  void *in[8];
  CUdeviceptr din[8]; /* x, w, cos, sin, slot at 1..5, wq at 7 (the caches go to two copies
                         each) */
  int64_t T, nc, nq, D, rows; /* tokens, cache elements, q's elements, head width, cache rows */
} gw_graph;

static bool launch(const gw_graph *g, int i, const CUdeviceptr *args, int n) {
  CUdeviceptr ptr[16];
  void *params[16];
  const h3_kernel *k = &g->k[i];
  if (n != k->n_args || n > 16) return false; /* pointers only: operands, then results */
  for (int j = 0; j < n; j++) ptr[j] = args[j], params[j] = &ptr[j];
  return cu.launch(g->fn[i], (unsigned)k->grid[0], (unsigned)k->grid[1], (unsigned)k->grid[2],
                   (unsigned)k->block[0], (unsigned)k->block[1], (unsigned)k->block[2],
                   (unsigned)k->shared_bytes, NULL, params, NULL) == CUDA_SUCCESS;
}

/* The device buffers of one round: the normed rows, v's columns, two copies of each cache,
 * q of each chain. */
typedef struct {
  CUdeviceptr n, sv, yc, fc, yvc, fvc, yq, fq;
} gw_bufs;

/* One round on the slots in g->in[5]: both caches into y and f (host, nc elements), in the
 * v form both v caches into yv and fv, in the q form both q into yq and fq (nq elements;
 * the device buffers set to the nq 0xffff of `fill` first). */
static bool run_round(const gw_graph *g, const gw_bufs *b, uint16_t *y, uint16_t *f, uint16_t *yv,
                      uint16_t *fv, uint16_t *yq, uint16_t *fq, const uint16_t *fill) {
  const size_t cb = (size_t)g->nc * 2, qb = (size_t)g->nq * 2;
  const CUdeviceptr *d = g->din;
  const bool v = g->n_k >= K_NORM_Q, q = g->n_k == N_KERNELS;
  bool ok = cu.htod(d[5], g->in[5], (size_t)g->T * 4) == CUDA_SUCCESS &&
            cu.htod(b->yc, g->in[0], cb) == CUDA_SUCCESS && cu.htod(b->fc, g->in[0], cb) == CUDA_SUCCESS &&
            (!v || (cu.htod(b->yvc, g->in[6], cb) == CUDA_SUCCESS &&
                    cu.htod(b->fvc, g->in[6], cb) == CUDA_SUCCESS)) &&
            (!q || (cu.htod(b->yq, fill, qb) == CUDA_SUCCESS && cu.htod(b->fq, fill, qb) == CUDA_SUCCESS)) &&
            launch(g, K_NORM, (CUdeviceptr[]){d[1], d[2], d[3], d[4], b->n}, 5) &&
            launch(g, K_WRITE, (CUdeviceptr[]){b->yc, b->n, d[5], b->yc}, 4);
  if (ok && v)
    ok = launch(g, K_SLICE, (CUdeviceptr[]){d[1], b->sv}, 2) &&
         launch(g, K_WRITE_V, (CUdeviceptr[]){b->yvc, b->sv, d[5], b->yvc}, 4);
  if (ok && q)
    ok = launch(g, K_NORM_Q, (CUdeviceptr[]){d[1], d[7], d[3], d[4], b->yq}, 5) &&
         launch(g, K_FUSED, (CUdeviceptr[]){b->fc, d[1], d[2], d[3], d[4], d[5], b->fvc, d[7], b->fc,
                                            b->fvc, b->fq}, 11);
  else if (ok && v)
    ok = launch(g, K_FUSED, (CUdeviceptr[]){b->fc, d[1], d[2], d[3], d[4], d[5], b->fvc, b->fc, b->fvc}, 9);
  else if (ok)
    ok = launch(g, K_FUSED, (CUdeviceptr[]){b->fc, d[1], d[2], d[3], d[4], d[5], b->fc}, 7);
  return ok && cu.sync() == CUDA_SUCCESS && cu.dtoh(y, b->yc, cb) == CUDA_SUCCESS &&
         cu.dtoh(f, b->fc, cb) == CUDA_SUCCESS &&
         (!v || (cu.dtoh(yv, b->yvc, cb) == CUDA_SUCCESS && cu.dtoh(fv, b->fvc, cb) == CUDA_SUCCESS)) &&
         (!q || (cu.dtoh(yq, b->yq, qb) == CUDA_SUCCESS && cu.dtoh(fq, b->fq, qb) == CUDA_SUCCESS));
}

static void test_graph(gw_graph *g, const char *name) {
  const bool v = g->n_k >= K_NORM_Q, q = g->n_k == N_KERNELS;
  const int64_t nr = h3_type_numel(&g->op[K_NORM]->results[0]->type);
  const size_t cb = (size_t)g->nc * 2 + 16, qb = (size_t)g->nq * 2 + 16;
  gw_bufs b = {0};
  bool ok = cu.alloc(&b.n, (size_t)nr * 2 + 16) == CUDA_SUCCESS &&
            cu.alloc(&b.yc, cb) == CUDA_SUCCESS && cu.alloc(&b.fc, cb) == CUDA_SUCCESS &&
            (!v || (cu.alloc(&b.sv, (size_t)nr * 2 + 16) == CUDA_SUCCESS &&
                    cu.alloc(&b.yvc, cb) == CUDA_SUCCESS && cu.alloc(&b.fvc, cb) == CUDA_SUCCESS)) &&
            (!q || (cu.alloc(&b.yq, qb) == CUDA_SUCCESS && cu.alloc(&b.fq, qb) == CUDA_SUCCESS));
  for (int i = 1; ok && i < (q ? 8 : 6); i++) {
    if (i == 6) continue; /* the v cache: two copies per round */
    const size_t bytes = (size_t)h3_type_bytes(&g->op[K_FUSED]->operands[i]->type);
    ok = cu.alloc(&g->din[i], bytes + 16) == CUDA_SUCCESS &&
         (i == 5 || cu.htod(g->din[i], g->in[i], bytes) == CUDA_SUCCESS);
  }
  CHECK(ok, "@%s: device buffers", name);
  uint16_t *y = malloc(cb), *f = malloc(cb), *yv = v ? malloc(cb) : NULL, *fv = v ? malloc(cb) : NULL;
  uint16_t *yq = q ? malloc(qb) : NULL, *fq = q ? malloc(qb) : NULL, *fill = q ? malloc(qb) : NULL;
  if (fill) memset(fill, 0xff, qb);
  int32_t *slot = g->in[5];
  int64_t differ = 0, vdiffer = 0, qdiffer = 0, far = 0, qfar = 0, vcpu = 0, max_ulps = 0;
  for (int r = 0; ok && r < ROUNDS; r++) {
    for (int64_t t = 0; t < g->T; t++)
      slot[t] = (int32_t)case_uniform(qk_rng(), 0, (double)(g->rows / 2));
    if (r % 2) slot[1] = (int32_t)g->rows, slot[2] = -1;
    ok = run_round(g, &b, y, f, yv, fv, yq, fq, fill);
    CHECK(ok, "@%s: round %d on the device", name, r);
    if (!ok) break;
    for (int64_t i = 0; i < g->nc; i++) differ += y[i] != f[i];
    for (int64_t i = 0; v && i < g->nc; i++) vdiffer += yv[i] != fv[i];
    for (int64_t i = 0; q && i < g->nq; i++) qdiffer += yq[i] != fq[i];
    if (r % 2) continue;
    void *o[4] = {NULL};
    bool cpu = case_cpu_results(g->op[K_FUSED], g->in, o, 1);
    CHECK(cpu, "@%s: round %d: the CPU op", name, r);
    int64_t mu = 0, qmu = 0;
    if (cpu) far += count_far(f, o[0], g->nc / g->D, g->D, &mu);
    for (int64_t i = 0; cpu && v && i < g->nc; i++) vcpu += fv[i] != ((const uint16_t *)o[1])[i];
    if (cpu && q) qfar += count_far(fq, o[2], g->nq / g->D, g->D, &qmu);
    if (mu > max_ulps) max_ulps = mu;
    if (qmu > max_ulps) max_ulps = qmu;
    free(o[0]), free(o[1]), free(o[2]);
  }
  fprintf(stderr, "graph @%s: %d rounds of %lld tokens into %lld rows%s%s; fused vs cpu op max %lld ulps\n",
          name, ROUNDS, (long long)g->T, (long long)g->rows, v ? " (and the v cache)" : "",
          q ? " (and q)" : "", (long long)max_ulps);
  CHECK(differ == 0, "@%s: fused kernel != unfused kernels in %lld cache elements", name,
        (long long)differ);
  CHECK(far == 0, "@%s: %lld cache elements of the fused kernel far from the CPU op", name,
        (long long)far);
  CHECK(vdiffer == 0, "@%s: fused kernel != unfused kernels in %lld v cache elements", name,
        (long long)vdiffer);
  CHECK(vcpu == 0, "@%s: %lld v cache elements of the fused kernel differ from the CPU op", name,
        (long long)vcpu);
  CHECK(qdiffer == 0, "@%s: fused kernel != unfused kernel in %lld q elements", name,
        (long long)qdiffer);
  CHECK(qfar == 0, "@%s: %lld q elements of the fused kernel far from the CPU op", name,
        (long long)qfar);
  free(y), free(f), free(yv), free(fv), free(yq), free(fq), free(fill);
  cu.free_(b.n), cu.free_(b.yc), cu.free_(b.fc);
  if (v) cu.free_(b.sv), cu.free_(b.yvc), cu.free_(b.fvc);
  if (q) cu.free_(b.yq), cu.free_(b.fq), cu.free_(g->din[7]);
  for (int i = 1; i < 6; i++) cu.free_(g->din[i]);
}

int main(int argc, char **argv) {
  char dev[256];
  if (!cuda_driver_open(dev, sizeof dev)) {
    fprintf(stderr, "qkrope_gpu_write: no usable CUDA driver/GPU; skipped\n");
    return 77;
  }
  fprintf(stderr, "device: %s\n", dev);
  /* argv[1]: the IR file where the source tree is elsewhere (a staged binary on a GPU host) */
  const char *path = argc > 1 ? argv[1] : H3_SOURCE_DIR "/tests/qkrope/kernels/emu_write.ir";
  h3_module *m = case_load_ir(path);
  CHECK(m != NULL, "cannot read %s", path);
  h3_diag d;
  h3_diag_init(&d);
  gw_graph *gs = calloc(m ? (size_t)m->n_graphs : 1, sizeof *gs);
  h3_arena a;
  h3_arena_init(&a);
  h3_strbuf tu;
  h3_strbuf_init(&tu);
  h3_strbuf_append(&tu, h3_kernel_prelude());
  static const char *const names[N_KERNELS] = {"n", "y", "f", "v", "yv", "q"};
  bool emitted = m != NULL;
  int n_v = 0, n_q = 0;
  for (int gi = 0; emitted && gi < m->n_graphs; gi++) {
    gw_graph *g = &gs[gi];
    /* the v form: v's write beside; the q form: and q's rms_norm_rope */
    g->n_k = case_op(m->graphs[gi], "q") ? N_KERNELS : case_op(m->graphs[gi], "yv") ? K_NORM_Q : 3;
    n_v += g->n_k >= K_NORM_Q;
    n_q += g->n_k == N_KERNELS;
    for (int i = 0; emitted && i < g->n_k; i++) {
      g->op[i] = case_op(m->graphs[gi], names[i]);
      emitted = g->op[i] && h3_codegen_emit_op(g->op[i], H3_TIER_EXACT, &a, &g->k[i], &d) == H3_OK;
      CHECK(emitted, "@%s: emitting %%%s", m->graphs[gi]->name, names[i]);
      /* a kernel of the same source has the same name (v's kv_write and k's): once */
      if (emitted && !strstr(tu.data, g->k[i].name)) h3_strbuf_append(&tu, g->k[i].source);
    }
  }
  const char *opts[] = {"-default-device", "-std=c++17", "-fmad=false"};
  h3_nvrtc_job job;
  memset(&job, 0, sizeof job);
  job.label = "qkrope_gpu_write.cu";
  job.source = tu.data;
  job.options = opts;
  job.n_options = 3;
  h3_kernel_cache off;
  memset(&off, 0, sizeof off);
  CUmodule mod;
  bool loaded = emitted && !tu.oom && h3_nvrtc_compile(&job, 1, &off, 1, &d) == H3_OK && job.cubin &&
                cu.mod_load(&mod, job.cubin) == CUDA_SUCCESS;
  CHECK(loaded, "compiling and loading the kernels");
  for (int gi = 0; loaded && gi < m->n_graphs; gi++) {
    gw_graph *g = &gs[gi];
    const h3_graph *gr = m->graphs[gi];
    bool found = true;
    for (int i = 0; i < g->n_k; i++) found &= cu.mod_fn(&g->fn[i], mod, g->k[i].name) == CUDA_SUCCESS;
    CHECK(found, "@%s: the kernels in the module", gr->name);
    if (!found) continue;
    const h3_type *ct = &gr->inputs[0]->type;
    g->T = gr->inputs[1]->type.dims[0], g->D = gr->inputs[2]->type.dims[0];
    g->nc = h3_type_numel(ct), g->rows = ct->dims[0] * ct->dims[1];
    g->nq = g->n_k == N_KERNELS ? h3_type_numel(&g->op[K_NORM_Q]->results[0]->type) : 0;
    for (int i = 0; i < gr->n_inputs && i < 8; i++)
      if (i != 5)
        g->in[i] = case_random(qk_rng(), gr->inputs[i]->type.dtype,
                               h3_type_numel(&gr->inputs[i]->type), i == 1);
    g->in[5] = malloc((size_t)g->T * 4 + 16);
    test_graph(g, gr->name);
    for (int i = 0; i < 8; i++) free(g->in[i]);
  }
  CHECK(!m || (m->n_graphs == 11 && n_v == 6 && n_q == 3),
        "the eleven graphs of emu_write.ir, six with a v cache, three of them in the q form (%d, "
        "%d, %d)", m ? m->n_graphs : 0, n_v, n_q);
  if (d.errors) h3_diag_print(&d, stderr);
  h3_nvrtc_job_free(&job);
  h3_strbuf_free(&tu);
  h3_arena_free(&a);
  h3_diag_free(&d);
  free(gs);
  h3_module_free(m);
  return check_summary("qkrope_gpu_write");
}
