/* cuda_kernels.c: kernels from CUBINs and the per-op execution records of the cuda backend.
 *
 * Libraries: a CUBIN (a plan's translation unit, or one compiled here) is loaded with
 * cudaLibraryLoadData and its kernels fetched with cudaLibraryGetKernel: runtime API only,
 * no libcuda link. Kernels are registered by name with their launch rule (grid, block,
 * dynamic shared bytes) and argument list ("in0", "out0", "seed" of codegen.h).
 * Op records: the first time an op runs (or when a plan is loaded) it gets a cu_op that
 * says how it runs (h3_exec_classify, the rule the plan was written by): its kernel from the
 * loaded plan (found by the op attribute `kernel`), a view, a cuBLASLt GEMM, an int8 GEMM
 * (linear_int8), attention, a host computation, or "unsupported on cuda". The backend emits
 * no code: kernels come from the plan or from kernels/ (include/h3/kernels.h).
 */
#include "cuda_collective.h"
#include "cuda_internal.h"
#include "cuda_skinny_gemm.h"

#include <stdlib.h>
#include <string.h>

static const h3_span no_span = {0};

/* the backend's lossless kernels (the flash kernel's wgmma) target sm_90a; NVRTC prefers it
 * to the sm_90 that h3_nvrtc_compile appends */
static const char *const options_sm90a[] = {"-default-device", "-std=c++17",
                                            "--gpu-architecture=sm_90a"};

/* ---- maps ---------------------------------------------------------------------------------- */
static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static uint64_t hash_ptr(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  return x ^ (x >> 33);
}

cu_kernel *cu_kernel_find(cu_state *s, const char *name) {
  if (!s->kmap_cap || !name) return NULL;
  for (size_t i = hash_str(name) & (s->kmap_cap - 1);; i = (i + 1) & (s->kmap_cap - 1)) {
    if (!s->kmap[i]) return NULL;
    if (!strcmp(s->kmap[i]->name, name)) return s->kmap[i];
  }
}

static int kmap_put(cu_state *s, cu_kernel *k) {
  if ((s->kmap_n + 1) * 2 > s->kmap_cap) {
    size_t cap = s->kmap_cap ? s->kmap_cap * 2 : 256;
    cu_kernel **m = calloc(cap, sizeof *m);
    if (!m) return 0;
    for (size_t j = 0; j < s->kmap_cap; j++) {
      if (!s->kmap[j]) continue;
      size_t i = hash_str(s->kmap[j]->name) & (cap - 1);
      while (m[i]) i = (i + 1) & (cap - 1);
      m[i] = s->kmap[j];
    }
    free(s->kmap);
    s->kmap = m;
    s->kmap_cap = cap;
  }
  size_t i = hash_str(k->name) & (s->kmap_cap - 1);
  while (s->kmap[i]) i = (i + 1) & (s->kmap_cap - 1);
  s->kmap[i] = k;
  s->kmap_n++;
  return 1;
}

static cu_op *omap_find(cu_state *s, const h3_op *op) {
  if (!s->omap_cap) return NULL;
  for (size_t i = hash_ptr(op) & (s->omap_cap - 1);; i = (i + 1) & (s->omap_cap - 1)) {
    if (!s->omap[i]) return NULL;
    if (s->omap[i]->op == op) return s->omap[i];
  }
}

static int omap_put(cu_state *s, cu_op *o) {
  if ((s->omap_n + 1) * 2 > s->omap_cap) {
    size_t cap = s->omap_cap ? s->omap_cap * 2 : 1024;
    cu_op **m = calloc(cap, sizeof *m);
    if (!m) return 0;
    for (size_t j = 0; j < s->omap_cap; j++) {
      if (!s->omap[j]) continue;
      size_t i = hash_ptr(s->omap[j]->op) & (cap - 1);
      while (m[i]) i = (i + 1) & (cap - 1);
      m[i] = s->omap[j];
    }
    free(s->omap);
    s->omap = m;
    s->omap_cap = cap;
  }
  size_t i = hash_ptr(o->op) & (s->omap_cap - 1);
  while (s->omap[i]) i = (i + 1) & (s->omap_cap - 1);
  s->omap[i] = o;
  s->omap_n++;
  return 1;
}

/* ---- libraries and kernels --------------------------------------------------------------- */
static h3_status load_library(cu_state *s, const unsigned char *cubin, size_t len, const char *label,
                              cudaLibrary_t *out, h3_diag *d) {
  if (s->n_libs == s->cap_libs) {
    int cap = s->cap_libs ? s->cap_libs * 2 : 32;
    cudaLibrary_t *l = realloc(s->libs, (size_t)cap * sizeof *l);
    if (l) s->libs = l;
    void **im = l ? realloc(s->lib_images, (size_t)cap * sizeof *im) : NULL;
    if (im) s->lib_images = im;
    if (!l || !im) {
      h3_diag_error(d, no_span, H3_HINT_OOM, "cuda: out of memory loading %s", label);
      return H3_ERR;
    }
    s->cap_libs = cap;
  }
  /* lazy module loading may read the image after this call: keep a copy of our own */
  void *image = malloc(len ? len : 1);
  if (!image) {
    h3_diag_error(d, no_span, H3_HINT_OOM, "cuda: out of memory loading %s", label);
    return H3_ERR;
  }
  memcpy(image, cubin, len);
  cudaError_t e = cudaLibraryLoadData(out, image, NULL, NULL, 0, NULL, NULL, 0);
  if (e != cudaSuccess) {
    free(image);
    return cu_fail(d, e, "cudaLibraryLoadData", label);
  }
  s->libs[s->n_libs] = *out;
  s->lib_images[s->n_libs++] = image;
  return H3_OK;
}

/* Registers kernel `name` of lib with its launch rule and argument names (may be NULL). */
static cu_kernel *add_kernel(cu_state *s, cudaLibrary_t lib, const char *name, const h3_kernel *k,
                             h3_diag *d) {
  cu_kernel *ck = calloc(1, sizeof *ck);
  char *nm = malloc(strlen(name) + 1);
  int *args = k && k->n_args ? calloc((size_t)k->n_args, sizeof *args) : NULL;
  if (ck && nm) {
    strcpy(nm, name);
    ck->name = nm; /* the map hashes the name */
  }
  if (!ck || !nm || (k && k->n_args && !args) || !kmap_put(s, ck)) {
    free(ck), free(nm), free(args);
    h3_diag_error(d, no_span, H3_HINT_OOM, "cuda: out of memory registering kernel %s", name);
    return NULL;
  }
  ck->args = args;
  cudaError_t e = cudaLibraryGetKernel(&ck->fn, lib, name);
  if (e != cudaSuccess) {
    cu_fail(d, e, "cudaLibraryGetKernel", name);
    return NULL; /* stays registered without a function: found again, it fails again */
  }
  if (!k) return ck;
  memcpy(ck->grid, k->grid, sizeof ck->grid);
  memcpy(ck->block, k->block, sizeof ck->block);
  ck->shared = k->shared_bytes;
  ck->inplace = k->inplace;
  ck->n_args = k->n_args;
  for (int i = 0; i < k->n_args; i++) {
    const char *a = k->args[i];
    if (!strcmp(a, "seed")) args[i] = CU_ARG_SEED;
    else if (!strncmp(a, "in", 2)) args[i] = atoi(a + 2);
    else if (!strncmp(a, "out", 3)) args[i] = CU_ARG_OUT + atoi(a + 3);
    else {
      h3_diag_error(d, no_span, "recompile the plan with this h3c",
                    "cuda: kernel %s has an argument '%s' this backend does not know", name, a);
      ck->fn = NULL;
      return NULL;
    }
  }
  if (ck->shared > 48 * 1024) {
    if ((size_t)ck->shared > s->smem_optin) {
      h3_diag_error(d, no_span, CU_HINT_SMEM,
                    "cuda: kernel %s needs %lld bytes of shared memory; the "
                    "device allows %zu",
                    name, (long long)ck->shared, s->smem_optin);
      ck->fn = NULL;
      return NULL;
    }
    e = cudaKernelSetAttributeForDevice(ck->fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)ck->shared, s->device);
    if (e != cudaSuccess) {
      cu_fail(d, e, "cudaKernelSetAttributeForDevice", name);
      ck->fn = NULL;
      return NULL;
    }
  }
  return ck;
}

/* Compiles prelude + defines + kernels/<file> into job (cubin filled; free with
 * h3_nvrtc_job_free also on error). */
static h3_status nvrtc(const h3_kernel_cache *cache, const char *defines, const char *file,
                       bool exact, h3_nvrtc_job *job, h3_diag *d) {
  memset(job, 0, sizeof *job);
  const char *text = h3_kernel_source(file);
  if (!text) {
    h3_diag_error(d, no_span, "rebuild h3: kernels/ is embedded at build time",
                  "cuda: no kernel source kernels/%s", file);
    return H3_ERR;
  }
  h3_strbuf b;
  h3_strbuf_init(&b);
  h3_strbuf_append(&b, h3_kernel_prelude());
  h3_strbuf_append(&b, "\n");
  if (defines) h3_strbuf_append(&b, defines);
  h3_strbuf_append(&b, text);
  if (b.oom || !b.data) {
    h3_strbuf_free(&b);
    h3_diag_error(d, no_span, H3_HINT_OOM, "cuda: out of memory compiling kernels/%s", file);
    return H3_ERR;
  }
  char label[128];
  snprintf(label, sizeof label, "kernels/%s", file);
  job->label = label;
  job->source = b.data;
  if (exact) job->options = h3_nvrtc_tier_options(H3_TIER_EXACT, &job->n_options);
  else job->options = options_sm90a, job->n_options = 3;
  h3_status st = h3_nvrtc_compile(job, 1, cache, 1, d);
  h3_strbuf_free(&b);
  job->source = NULL;
  job->label = NULL;
  return st;
}

h3_status cu_compile_tu(cu_state *s, const char *defines, const char *file, bool exact, int n,
                        const char *const *names, cu_kernel **out, h3_diag *d) {
  h3_nvrtc_job job;
  if (nvrtc(&s->cache, defines, file, exact, &job, d) != H3_OK) {
    h3_nvrtc_job_free(&job);
    return H3_ERR;
  }
  cudaLibrary_t lib;
  h3_status st = load_library(s, job.cubin, job.cubin_len, file, &lib, d);
  h3_nvrtc_job_free(&job);
  for (int i = 0; st == H3_OK && i < n; i++) {
    out[i] = add_kernel(s, lib, names[i], NULL, d);
    if (!out[i]) st = H3_ERR;
  }
  return st;
}

/* cu_launch, cu_launch_cluster and cu_launch_pdl: clusters of `cluster` blocks, `pdl` the
 * programmatic launch (ignored under H3_PDL=0). */
static h3_status launch(cu_state *s, const cu_kernel *k, const int64_t grid[3], const int64_t block[3],
                        int64_t shared, int cluster, bool pdl, void **args, h3_diag *d) {
  if (!k->fn) {
    h3_diag_error(d, no_span, CU_HINT_EARLIER, "cuda: kernel %s could not be loaded (see above)", k->name);
    return H3_ERR;
  }
  for (int i = 0; i < 3; i++)
    if (grid[i] < 1 || grid[i] > 2147483647 || block[i] < 1 || block[i] > 1024) {
      h3_diag_error(d, no_span, "recompile the plan with h3c",
                    "cuda: kernel %s has an invalid launch shape", k->name);
      return H3_ERR;
    }
  if (cluster < 1 || cluster > 8 || grid[0] % cluster) { /* the launcher's own shape: a bug */
    h3_diag_error(d, no_span, NULL, "cuda: kernel %s: clusters of %d blocks over a grid of %lld (1 to 8 "
                  "blocks, dividing the grid)", k->name, cluster, (long long)grid[0]);
    return H3_ERR;
  }
  cu_note_queued(NULL, k->name);
  s->launches++;
  if (s->launches == s->fault_launch) {
    h3_diag_error(d, no_span, "unset H3_FAULT_LAUNCH (a test switch)",
                  "cuda: kernel %s: launch failed: injected by H3_FAULT_LAUNCH=%lld", k->name,
                  s->fault_launch);
    return H3_ERR;
  }
  if (s->launches == s->fault_kernel) return cu_launch_trap(s, d);
  dim3 g = {(unsigned)grid[0], (unsigned)grid[1], (unsigned)grid[2]};
  dim3 bl = {(unsigned)block[0], (unsigned)block[1], (unsigned)block[2]};
  if (cluster == 1 && !pdl) {
    CU_CHECK(d, cudaLaunchKernel((const void *)k->fn, g, bl, args, (size_t)shared, s->stream), k->name);
  } else {
    cudaLaunchAttribute at[2];
    unsigned n = 0;
    if (cluster > 1) {
      at[n].id = cudaLaunchAttributeClusterDimension;
      at[n].val.clusterDim.x = (unsigned)cluster, at[n].val.clusterDim.y = at[n].val.clusterDim.z = 1;
      n++;
    }
    if (pdl) {
      at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at[n].val.programmaticStreamSerializationAllowed = 1;
      n++;
    }
    cudaLaunchConfig_t cfg = {.gridDim = g, .blockDim = bl, .dynamicSmemBytes = (size_t)shared,
                              .stream = s->stream, .attrs = at, .numAttrs = n};
    CU_CHECK(d, cudaLaunchKernelExC(&cfg, (const void *)k->fn, args), k->name);
  }
  CU_CHECK(d, cudaGetLastError(), k->name);
  return H3_OK;
}

h3_status cu_launch(cu_state *s, const cu_kernel *k, const int64_t grid[3], const int64_t block[3],
                    int64_t shared, void **args, h3_diag *d) {
  return launch(s, k, grid, block, shared, 1, false, args, d);
}

h3_status cu_launch_cluster(cu_state *s, const cu_kernel *k, const int64_t grid[3],
                            const int64_t block[3], int64_t shared, int cluster, void **args,
                            h3_diag *d) {
  return launch(s, k, grid, block, shared, cluster, false, args, d);
}

h3_status cu_launch_pdl(cu_state *s, const cu_kernel *k, const int64_t grid[3], const int64_t block[3],
                        int64_t shared, void **args, h3_diag *d) {
  return launch(s, k, grid, block, shared, 1, !s->no_pdl, args, d);
}

/* ---- compiling without a GPU ------------------------------------------------------------- */
h3_status h3_cuda_compile_check(h3_diag *d) {
  h3_kernel_cache cache;
  h3_kernel_cache_init(&cache, d);
  static const h3_dtype combos[][4] = {
      {H3_F32, H3_F32, H3_F32, H3_F32}, {H3_F32, H3_F32, H3_F32, H3_BF16},
      {H3_BF16, H3_BF16, H3_DTYPE_COUNT, H3_BF16}, {H3_F16, H3_BF16, H3_F32, H3_F64}};
  enum { N_JOBS = 22 };
  char defs[N_JOBS][512];
  const char *file[N_JOBS] = {"util.cu", "attention_ref.cu", "flash_attention.cu"};
  const char *def[N_JOBS] = {NULL, NULL, NULL};
  bool exact[N_JOBS] = {true, true, false};
  for (int i = 0; i < 4; i++) {
    cu_linear_defines(defs[3 + i], sizeof defs[3 + i], "h3cu_linear_check", combos[i][0],
                      combos[i][1], combos[i][2], combos[i][3]);
    file[3 + i] = "linear_generic.cu", def[3 + i] = defs[3 + i], exact[3 + i] = true;
  }
  cu_int8_defines(defs[7], sizeof defs[7], "h3cu_i8gemm_check", "h3cu_i8dq_check", H3_BF16, H3_BF16);
  cu_int8_defines(defs[8], sizeof defs[8], "h3cu_i8gemm_check", "h3cu_i8dq_check", H3_DTYPE_COUNT,
                  H3_F32);
  for (int i = 7; i < 9; i++) file[i] = "int8_gemm.cu", def[i] = defs[i], exact[i] = true;
  file[9] = "m31_moe.cu", file[10] = "m31_msa.cu", file[11] = "m31_moe_gemm.cu";
  file[12] = "m31_moe_wgmma.cu", file[13] = "m31_msa_tile.cu"; /* 12 wgmma: sm_90a */
  for (int i = 9; i < 14; i++) def[i] = cu_m31_check_defines(file[i]), exact[i] = i != 12;
  file[14] = "m31_flash.cu", def[14] = NULL, exact[14] = false; /* wgmma: sm_90a, no macros */
  file[15] = "sage_quant.cu", file[16] = "sage_attention.cu"; /* no macros; 16 wgmma: sm_90a */
  for (int i = 15; i < 17; i++) def[i] = NULL, exact[i] = i != 16;
  file[17] = "nvfp4_gemm.cu", def[17] = cu_m31_check_defines(file[17]), exact[17] = true;
  file[18] = "sol_select.cu", file[19] = "sol_attention.cu"; /* no macros; as cuda_sol.c */
  for (int i = 18; i < 20; i++) def[i] = NULL, exact[i] = i == 18;
  file[20] = "skinny_gemm.cu", def[20] = CU_SKINNY_CHECK_DEFINES, exact[20] = true;
  file[21] = "nvfp4_gemm.cu", def[21] = def[17], exact[21] = false; /* its warpgroup form: sm_90a */
  h3_status st = H3_OK;
  for (int i = 0; i < N_JOBS; i++) {
    h3_nvrtc_job job;
    if (nvrtc(&cache, def[i], file[i], exact[i], &job, d) != H3_OK) st = H3_ERR;
    h3_nvrtc_job_free(&job);
  }
  /* every file of kernels/ is compiled above: a new one must be added here */
  for (const h3_kernel_text *t = h3_kernel_texts; t->name; t++) {
    bool seen = !strcmp(t->name, "prelude.cuh");
    for (int i = 0; i < N_JOBS; i++) seen = seen || !strcmp(t->name, file[i]);
    if (!seen) {
      h3_diag_error(d, no_span, "add it to h3_cuda_compile_check (runtime/cuda/cuda_kernels.c)",
                    "cuda: kernels/%s is not compiled by the check", t->name);
      st = H3_ERR;
    }
  }
  return st;
}

/* ---- plans -------------------------------------------------------------------------------- */
/* What to do about an op the backend does not run. */
static const char *unsupported_hint(const h3_op *op) {
  if (op->code == H3_OP_SAGE_ATTENTION)
    return "sage_attention runs on cuda with bf16 q, k, v of head_dim 128 (Hq a multiple of Hk): "
           "run other shapes with --backend cpu";
  if (op->code == H3_OP_SOL_ATTENTION)
    return "sol_attention runs on cuda with bf16 q, k, v of head_dim 128 (Hq a multiple of Hk) and "
           "thresh diag or exact: run other shapes with --backend cpu";
  if (op->code == H3_OP_ALL_REDUCE)
    return "all_reduce runs on cuda for f32, f64, i32, i64, i8, u8, and between bf16, f16 and f32: "
           "run other dtypes with --backend cpu --gpus N";
  return "run this model with --backend cpu for now";
}

static int prepare_walk(h3_op *op, void *ctx) {
  void **c = ctx;
  cu_state *s = c[0];
  h3_diag *d = c[1];
  switch (op->code) {
  case H3_OP_LOOP: case H3_OP_CALL: case H3_OP_BRANCH: case H3_OP_YIELD: case H3_OP_RETURN:
    return 0; /* the executor's control flow */
  default: break;
  }
  if (op->parent && op->parent->parent && op->parent->parent->code == H3_OP_FUSED) return 0;
  cu_op *o = cu_op_get(s, op, d);
  if (!o) return 1;
  if (o->kind == CU_OP_UNSUPPORTED) {
    cu_op_error(d, op, unsupported_hint(op), "not supported by the cuda backend");
    return 1;
  }
  return 0;
}

static void forget_ops(cu_state *s);

h3_status h3_cuda_load_plan(h3_backend *b, const h3_plan *p, h3_diag *d) {
  if (!h3_backend_is_cuda(b)) {
    h3_diag_error(d, no_span, NULL, "h3_cuda_load_plan needs a cuda backend");
    return H3_ERR;
  }
  cu_state *s = b->ctx;
  forget_ops(s); /* records of an earlier plan's ops */
  for (int t = 0; t < p->n_tus; t++) {
    const h3_plan_tu *tu = &p->tus[t];
    char label[96];
    snprintf(label, sizeof label, "%s: translation unit %d (%d kernels)", p->file, t, tu->n_kernels);
    if (!tu->cubin) {
      h3_diag_error(d, no_span, "compile the plan's kernels first (h3_plan_compile_kernels)",
                    "cuda: %s has no CUBIN", label);
      return H3_ERR;
    }
    cudaLibrary_t lib;
    if (load_library(s, tu->cubin, tu->cubin_len, label, &lib, d) != H3_OK) return H3_ERR;
    for (int i = 0; i < tu->n_kernels; i++) {
      const h3_kernel *k = &p->kernels[tu->kernels[i]].k;
      if (cu_kernel_find(s, k->name)) continue;
      if (!add_kernel(s, lib, k->name, k, d)) return H3_ERR;
    }
  }
  void *ctx[2] = {s, d};
  if (h3_module_walk(p->module, prepare_walk, ctx)) return H3_ERR;
  return cu_graph_mark_plan(s, p->module, d);
}

/* ---- op records -------------------------------------------------------------------------- */
static int64_t view_offset(const h3_op *op) {
  if (op->code != H3_OP_SLICE) return 0;
  const h3_type *t = &op->operands[0]->type;
  int64_t axis = h3_op_attr_int(op, "axis", 0);
  if (axis < 0) axis += t->rank;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; i++) outer *= t->dims[i];
  for (int i = (int)axis + 1; i < t->rank; i++) inner *= t->dims[i];
  if (outer != 1) return 0; /* whole rows: the slice is the entire source */
  return h3_op_attr_int(op, "start", 0) * inner * (int64_t)h3_dtype_size(t->dtype);
}

/* The device scratch an M3.1 hand kernel, sage_attention, sol_attention or the skinny
 * linear needs while it runs, allocated and zeroed now (outside any graph capture; counters
 * in it start at 0) and owned by the record. */
static h3_status prepare_scratch(cu_state *s, cu_op *o, h3_diag *d) {
  size_t bytes = o->kind == CU_OP_SAGE         ? cu_sage_scratch_bytes(o->op)
                 : o->kind == CU_OP_SOL        ? cu_sol_scratch_bytes(o->op)
                 : o->kind == CU_OP_COLLECTIVE ? cu_collective_scratch_bytes(o->op)
                 : o->kind == CU_OP_LINEAR     ? cu_skinny_op_scratch_bytes(o->op, o->skinny)
                                               : cu_m31_scratch_bytes(o->op);
  if (!bytes) return H3_OK;
  o->scratch = cu_alloc(s, bytes);
  if (!o->scratch)
    return cu_op_error(d, o->op, "use a smaller batch or config",
                       "out of device memory for %zu bytes of scratch", bytes);
  CU_CHECK(d, cudaMemsetAsync(o->scratch, 0, bytes, s->stream), "an op's scratch");
  return H3_OK;
}

cu_op_kind cu_op_kind_of(const h3_op *op) {
  switch (h3_exec_classify(op)) {
  case H3_EXEC_CONTROL: return CU_OP_UNSUPPORTED;
  case H3_EXEC_VIEW: return op->code == H3_OP_INDEX ? CU_OP_INDEX : CU_OP_VIEW;
  case H3_EXEC_HOST: return CU_OP_HOST;
  case H3_EXEC_KERNEL: return CU_OP_KERNEL;
  case H3_EXEC_LIBRARY:
  case H3_EXEC_DEFERRED: break;
  }
  if (op->code == H3_OP_LINEAR) return CU_OP_LINEAR;
  if (op->code == H3_OP_LINEAR_INT8 || op->code == H3_OP_MATMUL_I8) return CU_OP_LINEAR_INT8;
  if (op->code == H3_OP_ATTENTION) return CU_OP_ATTENTION;
  if (op->code == H3_OP_SAGE_ATTENTION) return cu_sage_supports(op) ? CU_OP_SAGE : CU_OP_UNSUPPORTED;
  if (op->code == H3_OP_SOL_ATTENTION) return cu_sol_supports(op) ? CU_OP_SOL : CU_OP_UNSUPPORTED;
  if (h3_op_is_collective(op->code))
    return cu_collective_supports(op) ? CU_OP_COLLECTIVE : CU_OP_UNSUPPORTED;
  return cu_m31_runs(op) ? CU_OP_M31 : CU_OP_UNSUPPORTED;
}

static h3_status prepare(cu_state *s, cu_op *o, h3_diag *d) {
  const h3_op *op = o->op;
  if (h3_exec_classify(op) == H3_EXEC_CONTROL)
    return cu_op_error(d, op, NULL, "control flow is the executor's, not the backend's");
  o->kind = cu_op_kind_of(op);
  switch (o->kind) {
  case CU_OP_VIEW:
  case CU_OP_INDEX: o->view_offset = view_offset(op); return H3_OK;
  case CU_OP_LINEAR:
    if ((o->skinny = (unsigned char)cu_skinny_takes(op))) return prepare_scratch(s, o, d);
    return cu_gemm_prepare(s, op, &o->gemm, d);
  case CU_OP_LINEAR_INT8: return cu_int8_prepare(s, op, &o->int8, d);
  case CU_OP_M31:
  case CU_OP_SAGE:
  case CU_OP_SOL:
  case CU_OP_COLLECTIVE: return prepare_scratch(s, o, d);
  case CU_OP_KERNEL: break;
  case CU_OP_ATTENTION:
  case CU_OP_HOST:
  case CU_OP_UNSUPPORTED: return H3_OK;
  }
  const char *name = h3_op_attr_string(op, "kernel", NULL);
  o->k = cu_kernel_find(s, name);
  if (o->k && o->k->fn) return H3_OK;
  if (o->k) return cu_op_error(d, op, CU_HINT_EARLIER, "kernel %s failed to load earlier", name);
  return cu_op_error(d, op, "compile the module into a plan (h3c compile, or h3_plan_build) and "
                     "load it into the backend (h3_backend_load_plan) before running its ops",
                     name ? "kernel %s is not in the loaded plan" : "%sthe op has no kernel: no "
                     "plan was loaded for its module", name ? name : "");
}

cu_op *cu_op_get(cu_state *s, const h3_op *op, h3_diag *d) {
  cu_op *o = omap_find(s, op);
  if (o && o->failed) {
    cu_op_error(d, op, CU_HINT_EARLIER, "preparing it failed earlier (see the first error)");
    return NULL;
  }
  if (o) return o;
  o = calloc(1, sizeof *o);
  if (o) o->op = op; /* the map hashes the op */
  if (!o || !omap_put(s, o)) {
    free(o);
    cu_op_error(d, op, H3_HINT_OOM, "out of memory");
    return NULL;
  }
  if (prepare(s, o, d) != H3_OK) {
    o->failed = true;
    return NULL;
  }
  return o;
}

/* ---- running ------------------------------------------------------------------------------- */
static h3_status run_kernel(cu_state *s, const cu_op *o, const h3_tensor *in, int n_in,
                            const h3_tensor *out, int n_out, h3_diag *d) {
  const cu_kernel *k = o->k;
  /* an in-place result not joined with its operand's buffer starts as a copy of it */
  for (int r = 0; k->inplace && r < n_out; r++) {
    const int j = h3_op_inplace_operand(o->op, r);
    if (j >= 0 && j < n_in && out[r].data != in[j].data)
      CU_CHECK(d, cudaMemcpyAsync(out[r].data, in[j].data, (size_t)h3_type_bytes(&out[r].type),
                                  cudaMemcpyDeviceToDevice, s->stream), k->name);
  }
  void *ptrs[H3_KERNEL_MAX_ARGS];
  void *args[H3_KERNEL_MAX_ARGS];
  unsigned long long seed = s->b->seed;
  if (k->n_args > H3_KERNEL_MAX_ARGS)
    return cu_op_error(d, o->op, NULL, "kernel %s has too many arguments", k->name);
  for (int i = 0; i < k->n_args; i++) {
    int a = k->args[i];
    if (a == CU_ARG_SEED) {
      args[i] = &seed;
      continue;
    }
    bool is_out = a >= CU_ARG_OUT;
    int j = is_out ? a - CU_ARG_OUT : a;
    if (j < 0 || j >= (is_out ? n_out : n_in))
      return cu_op_error(d, o->op, "recompile the plan with h3c",
                         "kernel %s takes %s%d but the op has %d", k->name, is_out ? "out" : "in",
                         j, is_out ? n_out : n_in);
    ptrs[i] = is_out ? out[j].data : in[j].data;
    args[i] = &ptrs[i];
  }
  return cu_launch(s, k, k->grid, k->block, k->shared, args, d);
}

static h3_status run_host(cu_state *s, const cu_op *o, const h3_tensor *out, h3_diag *d) {
  const h3_op *op = o->op;
  int64_t n = h3_type_numel(&out[0].type);
  if (op->code != H3_OP_SIGMA_SCHEDULE || out[0].type.dtype != H3_F32)
    return cu_op_error(d, op, NULL, "no host implementation for this op and dtype");
  float *v = malloc((size_t)(n + 1) * sizeof *v);
  if (!v) return cu_op_error(d, op, H3_HINT_OOM, "out of memory");
  double sh = h3_op_attr_float(op, "shift", 1.0);
  for (int64_t i = 0; i < n; i++) {
    double b = n > 1 ? 1.0 - (double)i / (double)(n - 1) : 1.0;
    v[i] = (float)(sh * b / (1.0 + (sh - 1.0) * b));
  }
  h3_status st = s->b->ops->upload(s->b, out[0].data, v, (size_t)n * sizeof *v, d);
  free(v);
  return st;
}

h3_status cu_op_run(cu_state *s, cu_op *o, const h3_tensor *in, int n_in, const h3_tensor *out,
                    int n_out, h3_diag *d) {
  switch (o->kind) {
  case CU_OP_KERNEL: return run_kernel(s, o, in, n_in, out, n_out, d);
  case CU_OP_VIEW: {
    const char *src = (const char *)in[0].data + o->view_offset;
    if (out[0].data != src)
      CU_CHECK(d, cudaMemcpyAsync(out[0].data, src, (size_t)h3_type_bytes(&out[0].type),
                                  cudaMemcpyDeviceToDevice, s->stream), "view copy");
    return H3_OK;
  }
  case CU_OP_INDEX: return cu_index_copy(s, o->op, &in[0], &in[1], &out[0], d);
  case CU_OP_LINEAR:
    if (o->skinny) return cu_skinny_run(s, o->op, o->skinny, o->scratch, in, n_in, out, d);
    return o->gemm ? cu_gemm_run(s, o->gemm, in, n_in, out, d)
                   : cu_linear_generic(s, o->op, in, n_in, out, d);
  case CU_OP_LINEAR_INT8: return cu_int8_run(s, o->int8, in, n_in, out, d);
  case CU_OP_ATTENTION: return cu_attention_run(s, o->op, in, out, d);
  case CU_OP_HOST: return run_host(s, o, out, d);
  case CU_OP_M31: return cu_m31_run(s, o->op, o->scratch, in, out, d);
  case CU_OP_SAGE: return cu_sage_run(s, o->op, o->scratch, in, out, d);
  case CU_OP_SOL: return cu_sol_run(s, o->op, o->scratch, in, out, d);
  case CU_OP_COLLECTIVE: return cu_collective_run(s, o->op, o->scratch, in, out, d);
  case CU_OP_UNSUPPORTED: break;
  }
  return cu_op_error(d, o->op, unsupported_hint(o->op), "not supported by the cuda backend");
}

/* Drops every op record (they are keyed by op address, which a freed module's ops give
 * up: a later module may reuse it). Kernels and libraries stay loaded. */
static void forget_ops(cu_state *s) {
  for (size_t i = 0; i < s->omap_cap; i++)
    if (s->omap[i]) {
      cu_gemm_free(s->omap[i]->gemm);
      cu_int8_free(s->omap[i]->int8);
      if (s->omap[i]->scratch) cu_release(s, s->omap[i]->scratch);
      free(s->omap[i]);
    }
  free(s->omap);
  s->omap = NULL;
  s->omap_cap = s->omap_n = 0;
}

void h3_cuda_forget_ops(h3_backend *b) {
  if (h3_backend_is_cuda(b)) forget_ops(b->ctx);
}

void cu_kernels_free(cu_state *s) {
  forget_ops(s);
  for (size_t i = 0; i < s->kmap_cap; i++)
    if (s->kmap[i]) {
      free(s->kmap[i]->name);
      free(s->kmap[i]->args);
      free(s->kmap[i]);
    }
  free(s->kmap);
  for (int i = 0; i < s->n_libs; i++) {
    cudaLibraryUnload(s->libs[i]);
    free(s->lib_images[i]);
  }
  free(s->libs);
  free(s->lib_images);
}
