/* test_gpu_write.c: the rms_norm_rope_write kernels of kernels/emu_write.ir on a GPU (label
 * gpu; exits 77 without a usable CUDA driver), where blocks and lanes store concurrently: the
 * duplicate-slot rule (a later token wins), which the host emulation cannot observe (it runs
 * blocks and threads in order, so the later token stores last anyway), decides the result
 * here. The graph's kernels (rms_norm_rope, kv_write, the fused op; the reshape is a view)
 * are compiled by NVRTC as a plan compiles them (exact, -fmad=false) and launched with their
 * launch rules; both in-place writes get the cache buffer as operand 0 and result, each its
 * own copy of the same random cache. 40 rounds per graph, each with fresh slots drawn from
 * half the cache rows (many duplicates, in scrambled order; in @many each slot is taken by
 * about 64 tokens across the grid); every other round one slot past the cache and one
 * negative:
 *   - the fused kernel's cache == the unfused kernels' cache, bitwise;
 *   - in range: within 2 bf16 ulps or 2^-6 of its head row's largest |value| of the CPU
 *     backend's rms_norm_rope_write (the later token's row at a repeated slot, the cache's
 *     other rows untouched).
 *   qkrope_gpu_write_test [EMU_WRITE_IR]   (default: the source tree's kernels/emu_write.ir)
 */
#include "qk_test.h"

#include "h3/backend.h"
#include "h3/codegen.h"
#include "h3/kernels.h"
#include "h3/op_registry.h"

#include "../common/cuda_driver.h"

enum { ROUNDS = 40 };

/* A graph's three kernels on the device and its host operands (%c, %x, %w, %cs, %sn, %slot). */
typedef struct {
  const h3_op *op[3]; /* rms_norm_rope, kv_write, rms_norm_rope_write */
  h3_kernel k[3];
  CUfunction fn[3];
  void *in[6];
  CUdeviceptr din[6]; /* x, w, cos, sin, slot at 1..5 (the cache goes to two copies) */
  int64_t T, nc, D, rows; /* tokens, cache elements, head width, cache rows */
} gw_graph;

static bool launch(const gw_graph *g, int i, const CUdeviceptr *args, int n) {
  CUdeviceptr ptr[8];
  void *params[8];
  for (int j = 0; j < n; j++) ptr[j] = args[j], params[j] = &ptr[j];
  const h3_kernel *k = &g->k[i];
  return cu.launch(g->fn[i], (unsigned)k->grid[0], (unsigned)k->grid[1], (unsigned)k->grid[2],
                   (unsigned)k->block[0], (unsigned)k->block[1], (unsigned)k->block[2],
                   (unsigned)k->shared_bytes, NULL, params, NULL) == CUDA_SUCCESS;
}

/* One round on the slots in g->in[5]: both caches into y and f (host, nc elements). */
static bool run_round(const gw_graph *g, CUdeviceptr n, CUdeviceptr yc, CUdeviceptr fc, uint16_t *y,
                      uint16_t *f) {
  const size_t cb = (size_t)g->nc * 2;
  const CUdeviceptr *d = g->din;
  return cu.htod(d[5], g->in[5], (size_t)g->T * 4) == CUDA_SUCCESS &&
         cu.htod(yc, g->in[0], cb) == CUDA_SUCCESS && cu.htod(fc, g->in[0], cb) == CUDA_SUCCESS &&
         launch(g, 0, (CUdeviceptr[]){d[1], d[2], d[3], d[4], n}, 5) &&
         launch(g, 1, (CUdeviceptr[]){yc, n, d[5], yc}, 4) &&
         launch(g, 2, (CUdeviceptr[]){fc, d[1], d[2], d[3], d[4], d[5], fc}, 7) &&
         cu.sync() == CUDA_SUCCESS && cu.dtoh(y, yc, cb) == CUDA_SUCCESS &&
         cu.dtoh(f, fc, cb) == CUDA_SUCCESS;
}

static void test_graph(gw_graph *g, const char *name) {
  const int64_t nr = h3_type_numel(&g->op[0]->results[0]->type);
  CUdeviceptr n = 0, yc = 0, fc = 0;
  bool ok = cu.alloc(&n, (size_t)nr * 2 + 16) == CUDA_SUCCESS &&
            cu.alloc(&yc, (size_t)g->nc * 2 + 16) == CUDA_SUCCESS &&
            cu.alloc(&fc, (size_t)g->nc * 2 + 16) == CUDA_SUCCESS;
  for (int i = 1; ok && i < 6; i++) {
    const size_t bytes = (size_t)h3_type_bytes(&g->op[2]->operands[i]->type);
    ok = cu.alloc(&g->din[i], bytes + 16) == CUDA_SUCCESS &&
         (i == 5 || cu.htod(g->din[i], g->in[i], bytes) == CUDA_SUCCESS);
  }
  CHECK(ok, "@%s: device buffers", name);
  uint16_t *y = malloc((size_t)g->nc * 2), *f = malloc((size_t)g->nc * 2);
  int32_t *slot = g->in[5];
  int64_t differ = 0, far = 0, max_ulps = 0;
  for (int r = 0; ok && r < ROUNDS; r++) {
    for (int64_t t = 0; t < g->T; t++)
      slot[t] = (int32_t)case_uniform(qk_rng(), 0, (double)(g->rows / 2));
    if (r % 2) slot[1] = (int32_t)g->rows, slot[2] = -1;
    ok = run_round(g, n, yc, fc, y, f);
    CHECK(ok, "@%s: round %d on the device", name, r);
    if (!ok) break;
    for (int64_t i = 0; i < g->nc; i++) differ += y[i] != f[i];
    if (r % 2) continue;
    void *o[4] = {NULL};
    bool cpu = case_cpu_results(g->op[2], g->in, o, 1);
    CHECK(cpu, "@%s: round %d: the CPU op", name, r);
    int64_t mu = 0;
    if (cpu) far += count_far(f, o[0], g->nc / g->D, g->D, &mu);
    if (mu > max_ulps) max_ulps = mu;
    free(o[0]);
  }
  fprintf(stderr, "graph @%s: %d rounds of %lld tokens into %lld rows; fused vs cpu op max %lld ulps\n",
          name, ROUNDS, (long long)g->T, (long long)g->rows, (long long)max_ulps);
  CHECK(differ == 0, "@%s: fused kernel != unfused kernels in %lld cache elements", name,
        (long long)differ);
  CHECK(far == 0, "@%s: %lld cache elements of the fused kernel far from the CPU op", name,
        (long long)far);
  free(y), free(f);
  cu.free_(n), cu.free_(yc), cu.free_(fc);
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
  h3_diag d;
  h3_diag_init(&d);
  size_t len = 0;
  char *text = h3_read_file(path, &len, &d);
  h3_module *m = text ? h3_module_parse(path, text, len, &d) : NULL;
  free(text);
  CHECK(m != NULL, "cannot read %s", path);
  gw_graph *gs = calloc(m ? (size_t)m->n_graphs : 1, sizeof *gs);
  h3_arena a;
  h3_arena_init(&a);
  h3_strbuf tu;
  h3_strbuf_init(&tu);
  h3_strbuf_append(&tu, h3_kernel_prelude());
  static const char *const names[3] = {"n", "y", "f"};
  bool emitted = m != NULL;
  for (int gi = 0; emitted && gi < m->n_graphs; gi++)
    for (int i = 0; emitted && i < 3; i++) {
      gw_graph *g = &gs[gi];
      g->op[i] = case_op(m->graphs[gi], names[i]);
      emitted = g->op[i] && h3_codegen_emit_op(g->op[i], H3_TIER_EXACT, &a, &g->k[i], &d) == H3_OK;
      CHECK(emitted, "@%s: emitting %%%s", m->graphs[gi]->name, names[i]);
      if (emitted) h3_strbuf_append(&tu, g->k[i].source);
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
    for (int i = 0; i < 3; i++) found &= cu.mod_fn(&g->fn[i], mod, g->k[i].name) == CUDA_SUCCESS;
    CHECK(found, "@%s: the kernels in the module", gr->name);
    if (!found) continue;
    const h3_type *ct = &gr->inputs[0]->type;
    g->T = gr->inputs[1]->type.dims[0], g->D = gr->inputs[2]->type.dims[0];
    g->nc = h3_type_numel(ct), g->rows = ct->dims[0] * ct->dims[1];
    for (int i = 0; i < 5; i++)
      g->in[i] = case_random(qk_rng(), gr->inputs[i]->type.dtype,
                             h3_type_numel(&gr->inputs[i]->type), i == 1);
    g->in[5] = malloc((size_t)g->T * 4 + 16);
    test_graph(g, gr->name);
    for (int i = 0; i < 6; i++) free(g->in[i]);
  }
  CHECK(!m || m->n_graphs == 5, "the five graphs of emu_write.ir (%d)", m ? m->n_graphs : 0);
  if (d.errors) h3_diag_print(&d, stderr);
  h3_nvrtc_job_free(&job);
  h3_strbuf_free(&tu);
  h3_arena_free(&a);
  h3_diag_free(&d);
  free(gs);
  h3_module_free(m);
  return check_summary("qkrope_gpu_write");
}
