/* cuda_gemm_tune.c: the fastest of cuBLASLt's candidate algorithms for a large GEMM, chosen
 * once per machine.
 *
 * cuBLASLt's first heuristic pick is not always its fastest algorithm for a shape (on the
 * H200 the qkv GEMM of H3, [32704, 5376] x [21504, 5376]ᵀ, ran at 736 TFLOP/s where the
 * other block GEMMs ran at 790; the decode steps' projections of MiniMax-M3.1, one to 64 rows
 * against weights of 37 MB to 2.5 GB, read their weights 10-20 % faster with the tuned pick).
 * For a GEMM of at least CU_TUNE_MIN_FLOPS, or whose operands hold CU_TUNE_MIN_BYTES or more
 * (bandwidth-bound: few rows, large weights), cu_lt_tune asks
 * for up to CU_TUNE_CANDIDATES algorithms, adds their variants with other tiles and cluster
 * shapes for a GEMM of at least CU_TUNE_MIN_FLOPS (candidate_pool; a bandwidth-bound GEMM is
 * timed over the heuristic's candidates alone, see below), runs them on scratch operands of
 * random normal values in rounds
 * (one warm-up round, then CU_TUNE_REPS timed rounds, each running every candidate once, CUDA
 * events; a candidate's median counts). The runs rotate through copies of the operands
 * (rotation: CU_TUNE_COLD_L2 times the L2 in all; fewer where memory is short), so that each
 * run reads them from memory as a decode step reads its weights: timed on one copy, a weight
 * that fits the L2 (the decode's 38-113 MB ones nearly do) was read from it by every run but
 * the first, and the picks were made on the L2's rate. The rotation alone did not make the
 * picks repeatable: with the variants in the pool, four fresh tunings gave a batch-1 step of
 * M3.1 small 2.169, 2.256, 2.158 and 2.156 ms on one H100 (2026-12-06); timed over the
 * heuristic's candidates alone the few-row GEMMs gave 2.155, 2.158, 2.138 and 2.155 ms. The
 * picks that differ between two tunings are within ~2 % of each other in the tuner's timing
 * and not in the step; why the variants fare worse there is not established (a guess: their
 * clusters wait to be placed while the side stream's GEMVs hold SMs). Those short runs keep the
 * card at its highest clock, and a kernel that is fastest there need not be under sustained
 * load, where the card's power limit sets the clock by how much power each kernel draws (H3's
 * fc2: the fastest short-run candidate took 7.05 ms alone and 7.3-7.5 ms in a sustained
 * benchmark, against 7.12 ms for PyTorch's cuBLAS kernel). So for a GEMM whose best median is
 * at least CU_TUNE_HOLD_MIN_MS, each candidate within CU_TUNE_HOLD_SLACK of the best is then
 * held: run back to back for CU_TUNE_HOLD_MS (the first half untimed, the second half timed as
 * one stretch), in two passes of opposite order; the mean of its two passes decides. The
 * fastest is kept.
 * Candidates whose split-K reduction is done in place are skipped (their sums depend on the
 * order blocks finish in), and so is every candidate whose output on the scratch operands
 * does not agree with the heuristic's first pick (outputs_agree): a tile or cluster variant
 * that cublasLtMatmulAlgoCheck accepts might compute a partial tile wrongly (the suspect, not
 * established, of one H200 run in which the last row of a 9-row extend came out wrong while
 * other runs of the same plan were right).
 *
 * The bits of a GEMM depend on its algorithm, so the choice must not change from one
 * process to the next: it is stored in the kernel cache folder (h3_kernel_cache, the
 * folder of the NVRTC CUBINs) as a file `lt-<sha256 of the key>.algo`, keyed by device
 * name, cuBLASLt version, shape, dtypes and pointer alignment, and later processes read it
 * instead of timing. Without a cache folder (H3_KERNEL_CACHE=0) nothing is timed: the
 * heuristic's first pick, which is deterministic, stays. H3_GEMM_TUNE=0 turns tuning off;
 * H3_GEMM_TUNE_MIN_FLOPS moves the threshold (the GPU tests tune every GEMM they check);
 * H3_GEMM_TUNE_LOG=1 prints each candidate's (and variant's) configuration and median time.
 */
#include "cuda_lt.h"
#include "h3/bf16.h"
#include "h3/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CU_TUNE_MIN_FLOPS 1e11
#define CU_TUNE_MIN_BYTES ((size_t)32 << 20)
#define CU_TUNE_CANDIDATES 16
#define CU_TUNE_POOL 48 /* the candidates and their tile / cluster variants */
#define CU_TUNE_REPS 5
#define CU_TUNE_HOLD_MIN_MS 1.0 /* GEMMs at least this long (best median) are held */
#define CU_TUNE_HOLD_MS 120.0   /* each held candidate runs back to back this long per pass */
#define CU_TUNE_HOLD_SLACK 1.10 /* the candidates held: median within this factor of the best */
#define CU_TUNE_CHECK_BYTES ((size_t)8 << 20) /* output bytes compared from each end */
#define CU_TUNE_CHECK_TOL 0.02f /* |got - want| <= tol * (|want| + rms(want)) */
#define CU_TUNE_COLD_L2 3     /* the operand copies the runs rotate through: this times the L2 */
#define CU_TUNE_COPIES 16     /* at most this many copies */

/* The smallest GEMM (FLOPs) worth timing: CU_TUNE_MIN_FLOPS, or H3_GEMM_TUNE_MIN_FLOPS (the
 * GPU tests set it low, so that every GEMM they check runs the algorithm tuning picked). */
static double tune_min_flops(void) {
  const char *e = getenv("H3_GEMM_TUNE_MIN_FLOPS");
  char *end = NULL;
  double v = e && *e ? strtod(e, &end) : -1;
  return e && *e && end && !*end && v >= 0 ? v : CU_TUNE_MIN_FLOPS;
}

static bool tuning_on(const cu_state *s) {
  const char *e = getenv("H3_GEMM_TUNE");
  return s->cache.enabled && !(e && !strcmp(e, "0"));
}

/* H3_GEMM_TUNE_LOG=1: each candidate's median goes to stderr as it is timed. */
static bool log_on(void) {
  const char *e = getenv("H3_GEMM_TUNE_LOG");
  return e && strcmp(e, "0") != 0;
}

/* The algorithm's configuration for the log: cuBLASLt's enum values (cublasLt.h) of
 * CUBLASLT_ALGO_CONFIG_ID, _TILE_ID, _STAGES_ID, _CLUSTER_SHAPE_ID, _SPLITK_NUM,
 * _CTA_SWIZZLING and _CUSTOM_OPTION. */
static void algo_text(const cublasLtMatmulAlgo_t *algo, char *buf, size_t n) {
  int32_t id = -1, splitk = -1;
  uint32_t tile = 0, stages = 0, swizzle = 0, custom = 0;
  uint16_t cluster = 0;
  size_t got = 0;
  cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &got);
  cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &got);
  cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &got);
  cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster,
                                       sizeof cluster, &got);
  cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &got);
  cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle,
                                       sizeof swizzle, &got);
  cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &custom, sizeof custom, &got);
  snprintf(buf, n, "algo %d tile %u stages %u cluster %u splitk %d swizzle %u custom %u", (int)id,
           tile, stages, (unsigned)cluster, (int)splitk, swizzle, custom);
}

/* The cache file of one tuning key. */
static void tune_path(const cu_state *s, const char *key, char *path, size_t n) {
  char hex[65];
  h3_sha256_hex(key, strlen(key), hex);
  snprintf(path, n, "%s/lt-%.32s.algo", s->cache.dir, hex);
}

/* One run of an algorithm on the backend's stream (C = A·Bᵀ, alpha 1, beta 0). */
static bool run_algo(cu_state *s, const cu_lt_problem *p, const cublasLtMatmulAlgo_t *algo,
                     const void *a, const void *b, void *c) {
  float alpha = 1.0f, beta = 0.0f;
  return cublasLtMatmul((cublasLtHandle_t)s->lt, p->desc, &alpha, a, p->a, b, p->b, &beta, c, p->c,
                        c, p->c, algo, s->workspace, CU_WORKSPACE_BYTES,
                        s->stream) == CUBLAS_STATUS_SUCCESS;
}

/* Milliseconds from e0 (recorded) to e1, recorded now on the stream; < 0 on an error. */
static double elapsed_ms(cu_state *s, cudaEvent_t e0, cudaEvent_t e1) {
  float ms = 0.0f;
  if (cudaEventRecord(e1, s->stream) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
      cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
    return -1;
  return ms;
}

/* Device milliseconds of one run of one algorithm; < 0 when it fails to run. */
static double time_once(cu_state *s, const cu_lt_problem *p, const cublasLtMatmulAlgo_t *algo,
                        const void *a, const void *b, void *c, cudaEvent_t e0, cudaEvent_t e1) {
  if (cudaEventRecord(e0, s->stream) != cudaSuccess || !run_algo(s, p, algo, a, b, c)) return -1;
  return elapsed_ms(s, e0, e1);
}

/* Mean device milliseconds of one run of an algorithm held under load: `n` runs back to back
 * untimed, then `n` more timed as one stretch between two events; < 0 when it fails. */
static double time_held(cu_state *s, const cu_lt_problem *p, const cublasLtMatmulAlgo_t *algo,
                        const void *a, const void *b, void *c, int n, cudaEvent_t e0, cudaEvent_t e1) {
  for (int i = 0; i < 2 * n; i++) {
    if (i == n && cudaEventRecord(e0, s->stream) != cudaSuccess) return -1;
    if (!run_algo(s, p, algo, a, b, c)) return -1;
  }
  double ms = elapsed_ms(s, e0, e1);
  return ms < 0 ? -1 : ms / n;
}

static bool in_place_split(const cublasLtMatmulAlgo_t *algo) {
  uint32_t scheme = 0;
  size_t got = 0;
  return cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                              sizeof scheme, &got) == CUBLAS_STATUS_SUCCESS &&
         scheme == CUBLASLT_REDUCTION_SCHEME_INPLACE;
}

/* The heuristic's candidates, then each one's configuration with another tile (192x192,
 * 256x128, 128x256) and cluster shape (2x1, 1x2) where cublasLtMatmulAlgoCheck accepts it and
 * its workspace fits, without repeats, at most `max`: cuBLAS's own kernel for a shape can be
 * a configuration the heuristic does not list (PyTorch runs a 192x192 tile with a 2x1 cluster
 * for H3's fc1 and fc2). Returns the pool's size. */
static int candidate_pool(cu_state *s, const cu_lt_problem *p, const cublasLtMatmulHeuristicResult_t *res,
                          int n, bool variants, cublasLtMatmulAlgo_t *pool, int max) {
  static const uint32_t tiles[] = {CUBLASLT_MATMUL_TILE_192x192, CUBLASLT_MATMUL_TILE_256x128,
                                   CUBLASLT_MATMUL_TILE_128x256};
  static const uint16_t clusters[] = {CUBLASLT_CLUSTER_SHAPE_2x1x1, CUBLASLT_CLUSTER_SHAPE_1x2x1};
  int m = 0;
  for (int i = 0; i < n && m < max; i++) pool[m++] = res[i].algo;
  for (int i = 0; variants && i < n; i++)
    for (size_t t = 0; t < sizeof tiles / sizeof *tiles; t++)
      for (size_t c = 0; c < sizeof clusters / sizeof *clusters && m < max; c++) {
        cublasLtMatmulAlgo_t v = res[i].algo;
        cublasLtMatmulHeuristicResult_t chk;
        if (cublasLtMatmulAlgoConfigSetAttribute(&v, CUBLASLT_ALGO_CONFIG_TILE_ID, &tiles[t],
                                                 sizeof tiles[t]) != CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulAlgoConfigSetAttribute(&v, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &clusters[c],
                                                 sizeof clusters[c]) != CUBLAS_STATUS_SUCCESS ||
            cublasLtMatmulAlgoCheck((cublasLtHandle_t)s->lt, p->desc, p->a, p->b, p->c, p->c, &v,
                                    &chk) != CUBLAS_STATUS_SUCCESS ||
            chk.workspaceSize > CU_WORKSPACE_BYTES)
          continue;
        bool seen = false;
        for (int k = 0; k < m && !seen; k++) seen = !memcmp(&pool[k], &v, sizeof v);
        if (!seen) pool[m++] = v;
      }
  return m;
}

/* H3_GEMM_TUNE_LOG: one candidate's configuration and time. */
static void log_candidate(const cu_lt_problem *p, const cublasLtMatmulAlgo_t *algo, const char *kind,
                          int i, int np, const char *what, double ms) {
  if (!log_on()) return;
  char cfg[160];
  algo_text(algo, cfg, sizeof cfg);
  fprintf(stderr, "h3 gemm tune (cuBLASLt %zu): %s: %s %d of %d (%s): %s %.4f ms\n",
          cublasLtGetVersion(), p->key, kind, i, np, cfg, what, ms);
}

/* The compared part of a GEMM's output c (as floats into out, *n of them): its first and its
 * last CU_TUNE_CHECK_BYTES (all of it when smaller), where the partial tiles of both
 * dimensions lie. False when it cannot be read. */
static bool read_check_part(cu_state *s, const cu_lt_problem *p, const void *c, unsigned char *raw,
                            float *out, size_t *n) {
  int32_t type = 0;
  size_t got = 0;
  if (cublasLtMatrixLayoutGetAttribute(p->c, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, sizeof type, &got) !=
          CUBLAS_STATUS_SUCCESS ||
      (type != CUDA_R_32F && type != CUDA_R_16BF) || cudaStreamSynchronize(s->stream) != cudaSuccess)
    return false;
  const size_t head = p->c_bytes < CU_TUNE_CHECK_BYTES ? p->c_bytes : CU_TUNE_CHECK_BYTES;
  const size_t rest = p->c_bytes - head, tail = rest < CU_TUNE_CHECK_BYTES ? rest : CU_TUNE_CHECK_BYTES;
  if (cudaMemcpy(raw, c, head, cudaMemcpyDeviceToHost) != cudaSuccess ||
      (tail && cudaMemcpy(raw + head, (const char *)c + p->c_bytes - tail, tail,
                          cudaMemcpyDeviceToHost) != cudaSuccess))
    return false;
  const size_t elt = type == CUDA_R_32F ? 4 : 2;
  *n = (head + tail) / elt;
  for (size_t i = 0; i < *n; i++) {
    if (elt == 4) {
      memcpy(&out[i], raw + 4 * i, 4);
    } else {
      uint16_t h;
      memcpy(&h, raw + 2 * i, 2);
      out[i] = h3_bf16_to_f32(h);
    }
  }
  return true;
}

/* Whether got agrees with want element by element: within CU_TUNE_CHECK_TOL of |want| plus
 * the rms of want (other algorithms sum in other orders and may round the last bit the other
 * way; a wrongly computed tile is off by about the rms). NaN never agrees. */
static bool outputs_agree(const float *want, const float *got, size_t n) {
  double ss = 0;
  for (size_t i = 0; i < n; i++) ss += (double)want[i] * want[i];
  const float rms = n ? (float)sqrt(ss / (double)n) : 0.0f;
  for (size_t i = 0; i < n; i++)
    if (!(fabsf(got[i] - want[i]) <= CU_TUNE_CHECK_TOL * (fabsf(want[i]) + rms))) return false;
  return true;
}

/* Drops (live[i] = false) every candidate whose output on the scratch operands a, b does not
 * agree with pool[0]'s, the heuristic's first pick; false (all but pool[0] dropped) when the
 * outputs cannot be compared. */
static bool drop_disagreeing(cu_state *s, const cu_lt_problem *p, const cublasLtMatmulAlgo_t *pool,
                             int np, bool *live, const void *a, const void *b, void *c) {
  const size_t bytes = 2 * CU_TUNE_CHECK_BYTES;
  unsigned char *raw = malloc(bytes);
  float *want = malloc(bytes / 2 * sizeof *want), *got = malloc(bytes / 2 * sizeof *got);
  size_t n = 0, m = 0;
  bool ok = raw && want && got && run_algo(s, p, &pool[0], a, b, c) &&
            read_check_part(s, p, c, raw, want, &n);
  for (int i = 1; i < np; i++) {
    if (!live[i]) continue;
    live[i] = ok && run_algo(s, p, &pool[i], a, b, c) && read_check_part(s, p, c, raw, got, &m) &&
              m == n && outputs_agree(want, got, n);
    if (!live[i]) {
      cudaGetLastError();
      log_candidate(p, &pool[i], "dropped (its output differs from the heuristic pick's)", i, np, "-", 0);
    }
  }
  free(raw), free(want), free(got);
  return ok;
}

/* The held timing (see the top of the file) of the live candidates whose median is within
 * CU_TUNE_HOLD_SLACK of best_ms: two passes, forward then backward, each candidate run back
 * to back for about CU_TUNE_HOLD_MS; *best becomes the one of the lowest mean. A candidate
 * that fails to run drops out; *best stays when none runs. */
static void hold_best(cu_state *s, const cu_lt_problem *p, const cublasLtMatmulAlgo_t *pool, int np,
                      const bool *live, const double *med, double best_ms, const void *a,
                      const void *b, void *c, cudaEvent_t e0, cudaEvent_t e1,
                      cublasLtMatmulAlgo_t *best) {
  double held[CU_TUNE_POOL] = {0};
  bool on[CU_TUNE_POOL];
  for (int i = 0; i < np; i++) on[i] = live[i] && med[i] <= CU_TUNE_HOLD_SLACK * best_ms;
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < np; k++) {
      const int i = pass ? np - 1 - k : k;
      if (!on[i]) continue;
      const int n = (int)(CU_TUNE_HOLD_MS / 2 / med[i]) + 1;
      double t = time_held(s, p, &pool[i], a, b, c, n, e0, e1);
      if (t < 0) {
        cudaGetLastError();
        on[i] = false;
      } else {
        held[i] += t / 2;
      }
    }
  double low = -1;
  for (int i = 0; i < np; i++) {
    if (!on[i]) continue;
    log_candidate(p, &pool[i], "held", i, np, "mean", held[i]);
    if (low < 0 || held[i] < low) {
      low = held[i];
      *best = pool[i];
    }
  }
}

/* How many copies of operands of `bytes` the timed runs rotate through: CU_TUNE_COLD_L2 times
 * the device's L2 in all (at most CU_TUNE_COPIES; 1 for operands that outgrow it alone). */
static int rotation(const cu_state *s, size_t bytes) {
  int l2 = 0;
  if (cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, s->device) != cudaSuccess) {
    cudaGetLastError();
    return 1;
  }
  const size_t want = (size_t)CU_TUNE_COLD_L2 * (size_t)l2;
  const size_t k = bytes ? (want + bytes - 1) / bytes : 1;
  return k < 1 ? 1 : k > CU_TUNE_COPIES ? CU_TUNE_COPIES : (int)k;
}

/* Times the candidates (with their tile / cluster variants when `variants`) on scratch
 * operands; *best keeps the heuristic's pick when no candidate runs. */
static h3_status time_candidates(cu_state *s, const h3_op *op, const cu_lt_problem *p, bool variants,
                                 cublasLtMatmulAlgo_t *best, h3_diag *d) {
  cublasLtMatmulHeuristicResult_t res[CU_TUNE_CANDIDATES];
  int n = 0;
  if (cu_lt_candidates(s, op, p, 16, res, CU_TUNE_CANDIDATES, &n, d) != H3_OK) return H3_ERR;
  if (n < 2) return H3_OK;
  void *a[CU_TUNE_COPIES] = {NULL}, *b[CU_TUNE_COPIES] = {NULL}, *c = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  h3_status st = H3_OK;
  int nrot = 0; /* the copies made: rotation's, or as many as fit (at least one) */
  bool room = cudaMalloc(&c, p->c_bytes) == cudaSuccess && cudaEventCreate(&e0) == cudaSuccess &&
              cudaEventCreate(&e1) == cudaSuccess;
  for (const int want = rotation(s, p->a_bytes + p->b_bytes); room && nrot < want; nrot++)
    if (cudaMalloc(&a[nrot], p->a_bytes) != cudaSuccess || cudaMalloc(&b[nrot], p->b_bytes) != cudaSuccess) {
      cudaGetLastError();
      cudaFree(a[nrot]), cudaFree(b[nrot]);
      a[nrot] = b[nrot] = NULL;
      break;
    }
  if (!room || nrot == 0) {
    cudaGetLastError(); /* no room to time: the heuristic's pick stays */
    goto done;
  }
  for (int k = 0; st == H3_OK && k < nrot; k++) {
    st = cu_fill_random(s, a[k], H3_BF16, (int64_t)(p->a_bytes / 2), H3_RNG_INIT_NORMAL, 1.0f, 1,
                        0x4a11u + 2u * (uint32_t)k, d);
    if (st == H3_OK)
      st = cu_fill_random(s, b[k], H3_BF16, (int64_t)(p->b_bytes / 2), H3_RNG_INIT_NORMAL, 1.0f, 1,
                          0x4b22u + 2u * (uint32_t)k, d);
  }
  /* rounds: one warm-up, then CU_TUNE_REPS timed; each round runs every live candidate once,
     so a drift of the clock (the card heating up) weighs on all of them alike */
  cublasLtMatmulAlgo_t pool[CU_TUNE_POOL];
  const int np = candidate_pool(s, p, res, n, variants, pool, CU_TUNE_POOL);
  double ms[CU_TUNE_POOL][CU_TUNE_REPS];
  bool live[CU_TUNE_POOL];
  for (int i = 0; i < np; i++) live[i] = !in_place_split(&pool[i]);
  if (st == H3_OK && !drop_disagreeing(s, p, pool, np, live, a[0], b[0], c)) cudaGetLastError();
  int turn = 0; /* the copy the next run reads */
  for (int r = -1; st == H3_OK && r < CU_TUNE_REPS; r++)
    for (int i = 0; i < np; i++) {
      if (!live[i]) continue;
      double t = time_once(s, p, &pool[i], a[turn], b[turn], c, e0, e1);
      turn = (turn + 1) % nrot;
      if (t < 0) {
        cudaGetLastError();
        live[i] = false;
      } else if (r >= 0) {
        ms[i][r] = t;
      }
    }
  double med[CU_TUNE_POOL], best_ms = -1;
  for (int i = 0; st == H3_OK && i < np; i++) {
    if (!live[i]) continue;
    double *v = ms[i];
    for (int k = 1; k < CU_TUNE_REPS; k++) /* insertion sort of a handful */
      for (int j = k; j > 0 && v[j] < v[j - 1]; j--) {
        double t = v[j];
        v[j] = v[j - 1];
        v[j - 1] = t;
      }
    med[i] = v[CU_TUNE_REPS / 2];
    log_candidate(p, &pool[i], i < n ? "candidate" : "variant", i, np, "median", med[i]);
    if (best_ms < 0 || med[i] < best_ms) {
      best_ms = med[i];
      *best = pool[i];
    }
  }
  if (st == H3_OK && best_ms >= CU_TUNE_HOLD_MIN_MS)
    hold_best(s, p, pool, np, live, med, best_ms, a[0], b[0], c, e0, e1, best);
done:
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  for (int k = 0; k < CU_TUNE_COPIES; k++) cudaFree(a[k]), cudaFree(b[k]);
  cudaFree(c);
  return st;
}

bool cu_lt_tunes(const cu_state *s, const cu_lt_problem *p, double flops) {
  bool large = flops >= tune_min_flops() || p->a_bytes + p->b_bytes >= CU_TUNE_MIN_BYTES;
  return large && tuning_on(s);
}

h3_status cu_lt_tune(cu_state *s, const h3_op *op, const cu_lt_problem *p, double flops,
                     cublasLtMatmulAlgo_t *algo, h3_diag *d) {
  if (!cu_lt_tunes(s, p, flops)) return H3_OK;
  char key[512], path[4200];
  /* "rotated": timed on operands rotated past the L2 (choices timed otherwise do not match);
     "heuristic": a bandwidth-bound GEMM, timed without tile / cluster variants */
  const bool variants = flops >= tune_min_flops();
  snprintf(key, sizeof key, "%s|cublasLt %zu|%s|rotated%s", s->device_name, cublasLtGetVersion(), p->key,
           variants ? "" : "|heuristic");
  tune_path(s, key, path, sizeof path);
  /* file: the key (NUL-terminated) then the algorithm's bytes. Read with stdio, not
     h3_read_file: a cache entry is no input of the run, and a stale one is rewritten below */
  size_t kl = strlen(key) + 1, len = 0;
  char *file = malloc(kl + sizeof *algo + 1);
  FILE *f = file ? fopen(path, "rb") : NULL;
  if (f) {
    len = fread(file, 1, kl + sizeof *algo + 1, f);
    fclose(f);
  }
  if (f && len == kl + sizeof *algo && !memcmp(file, key, kl)) {
    cublasLtMatmulAlgo_t got;
    memcpy(&got, file + kl, sizeof got);
    cublasLtMatmulHeuristicResult_t chk;
    if (cublasLtMatmulAlgoCheck((cublasLtHandle_t)s->lt, p->desc, p->a, p->b, p->c, p->c, &got,
                                &chk) == CUBLAS_STATUS_SUCCESS) {
      *algo = got;
      free(file);
      s->tune_read++;
      return H3_OK;
    }
  }
  free(file);
  const double t0 = cu_host_seconds();
  if (time_candidates(s, op, p, variants, algo, d) != H3_OK) return H3_ERR;
  s->tune_timed++;
  s->tune_seconds += cu_host_seconds() - t0;
  char *out = malloc(kl + sizeof *algo);
  if (!out) return H3_OK; /* the choice is still used; it is just not kept */
  memcpy(out, key, kl);
  memcpy(out + kl, algo, sizeof *algo);
  h3_diag wd;
  h3_diag_init(&wd);
  if (h3_write_file_atomic(path, out, kl + sizeof *algo, &wd) != H3_OK) {
    /* without the file the next process would time again and could pick another
       algorithm: keep the heuristic's deterministic pick instead */
    free(out);
    h3_diag_free(&wd);
    int found = 0;
    return cu_lt_pick_algo(s, op, p->desc, p->a, p->b, p->c, 16, algo, &found, d);
  }
  h3_diag_free(&wd);
  free(out);
  return H3_OK;
}
