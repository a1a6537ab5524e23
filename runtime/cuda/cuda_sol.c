/* cuda_sol.c: `sol_attention` (ops.def) on the cuda backend: which ops it takes (bf16 q, k, v
 * and result, head_dim 128, Hq % Hk == 0, thresh diag or exact), the device scratch an op needs
 * (allocated when it is prepared), the kernels of kernels/sol_select.cu (centroids, moments,
 * the exact-block selection: bitwise the CPU reference's) and kernels/sol_attention.cu (the
 * attention on tensor cores) compiled on first use, and the launches. The op is cut into its
 * segments as attention is (cuda_attention.c); per segment of len rows (nb = ceil(len / 64)
 * blocks), in the stream's order (one scratch serves every segment in turn):
 *   h3cu_sol_centroids  grid (nbp, 2 Hk + Hq), 128 threads: kc, qbar, the split centroids kvs
 *                       (nbp = nb rounded up to 16);
 *   h3cu_sol_kstats     grid (Hk), 128 threads: kmean, kvar;
 *   h3cu_sol_select     grid (ceil(nb / 8), Hq), 128 threads: exact;
 *   h3cu_sol_fwd        grid (nb, Hq), 128 threads, 64 KiB of dynamic shared memory: the rows
 *                       (mma.sync) where the segment is out of h3cu_sol_fwd_ws's reach
 *                       (ws_reaches) or H3_SOL_FORM=mma, else h3cu_sol_fwd_ws: grid
 *                       (ceil(nb / 2), Hq), 384 threads, 193 KiB (warp-specialised, TMA and
 *                       warpgroup MMAs, sm_90a; its TMA maps of k, v and kvs encoded per
 *                       segment and passed by value; 2.27 x flash at tau 1 on the H200, 1.33 x
 *                       the mma form); under H3_SOL_FORM=wsp h3cu_sol_fwd_wsp in its place (the
 *                       same launch: the ws form with two exact key blocks a turn).
 * Environment: H3_SOL_FORM (unset: ws where it reaches; mma, ws or wsp forces that form, ws
 * and wsp an error for a segment the ws form cannot take; read at every run), H3_SOL_STATS
 * (any value) prints each segment's exact-block density (a debugging aid: it waits for the
 * stream after each segment).
 * Scratch (nbm = ceil(T / 64), nbpm = nbm rounded up to 16, a segment's arrays packed with its
 * own nb): kc [Hk][nbm][128], qbar [Hq][nbm][128], kmean, kvar [Hk][128] (f32), kvs [Hk][nbpm
 * / 16][4][16][128] (bf16), exact [Hq][nbm][nbm] (bytes).
 */
#include "cuda_m31.h" /* cu_m31_kernels, cu_m31_smem */

#include <cuda.h> /* CUtensorMap only (cu_tile_map_rows) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SOL_D = 128, SOL_BLOCK = 64, SOL_CHUNK = 16 /* H3L_CHUNK */, SOL_SELECT_QB = 8 /* H3L_SELECT_QB */,
       SOL_WS_MAXNB = 8192 /* H3A_WS_MAXNB */,
       SOL_SMEM = 4 * SOL_BLOCK * SOL_D * 2 /* H3A_SMEM */,
       SOL_SMEM_WS = 1024 + 6 * 2 * SOL_BLOCK * SOL_D * 2 /* h3a_ws_shape<64>::SMEM */,
       SOL_SMEM_WSP = 1024 + 3 * 2 * 2 * SOL_BLOCK * SOL_D * 2 /* h3a_ws_shape<128>::SMEM */ };

static const char *const select_names[3] = {"h3cu_sol_centroids", "h3cu_sol_kstats", "h3cu_sol_select"};
static const char *const fwd_names[3] = {"h3cu_sol_fwd", "h3cu_sol_fwd_ws", "h3cu_sol_fwd_wsp"};

bool cu_sol_supports(const h3_op *op) {
  if (op->code != H3_OP_SOL_ATTENTION || op->n_operands != 3 || op->n_results != 1) return false;
  const h3_type *q = &op->operands[0]->type, *k = &op->operands[1]->type, *v = &op->operands[2]->type;
  const h3_type *o = &op->results[0]->type;
  const char *th = h3_op_attr_string(op, "thresh", "diag");
  if (q->rank != 3 || k->rank != 3 || v->rank != 3 || o->rank != 3) return false;
  bool dtypes = q->dtype == H3_BF16 && k->dtype == H3_BF16 && v->dtype == H3_BF16 && o->dtype == H3_BF16;
  return dtypes && (!strcmp(th, "diag") || !strcmp(th, "exact")) && q->dims[2] == SOL_D && k->dims[2] == SOL_D &&
         v->dims[2] == SOL_D && k->dims[0] == q->dims[0] && v->dims[0] == q->dims[0] && v->dims[1] == k->dims[1] &&
         k->dims[1] >= 1 && q->dims[1] % k->dims[1] == 0 && q->dims[0] < ((int64_t)1 << 30);
}

/* The scratch's parts at base (base NULL: only the total, returned) */
typedef struct {
  float *kc, *qbar, *kmean, *kvar;
  void *kvs; /* bf16 */
  unsigned char *exact;
} sol_scratch;

static size_t scratch_layout(const h3_op *op, char *base, sol_scratch *p) {
  int64_t nbm = (op->operands[0]->type.dims[0] + SOL_BLOCK - 1) / SOL_BLOCK;
  int64_t hq = op->operands[0]->type.dims[1], hk = op->operands[1]->type.dims[1];
  int64_t nbpm = (nbm + SOL_CHUNK - 1) / SOL_CHUNK * SOL_CHUNK;
  const size_t bytes[6] = {(size_t)(hk * nbm * SOL_D) * 4, (size_t)(hq * nbm * SOL_D) * 4,
                           (size_t)(hk * SOL_D) * 4,       (size_t)(hk * SOL_D) * 4,
                           (size_t)(hk * nbpm * 4 * SOL_D) * 2, (size_t)(hq * nbm * nbm)};
  char *parts[6];
  size_t at = 0;
  for (int i = 0; i < 6; i++) {
    parts[i] = base ? base + at : NULL;
    at += (bytes[i] + 255) / 256 * 256;
  }
  if (p)
    *p = (sol_scratch){(float *)parts[0], (float *)parts[1], (float *)parts[2],
                       (float *)parts[3], parts[4], (unsigned char *)parts[5]};
  return at;
}

size_t cu_sol_scratch_bytes(const h3_op *op) { return cu_sol_supports(op) ? scratch_layout(op, NULL, NULL) : 0; }

/* The kernels, compiled on first use (the pre-passes with the exact tier's options: no fma
 * contraction), and the attention kernels' shared memory limits */
static h3_status sol_kernels(cu_state *s, const h3_op *op, cu_kernel *k[6], h3_diag *d) {
  if (cu_m31_kernels(s, op, "sol_select.cu", NULL, 3, select_names, k, d) != H3_OK ||
      cu_m31_kernels_sm90a(s, op, "sol_attention.cu", NULL, 3, fwd_names, k + 3, d) != H3_OK ||
      cu_m31_smem(s, op, k[3], SOL_SMEM, d) != H3_OK || cu_m31_smem(s, op, k[4], SOL_SMEM_WS, d) != H3_OK)
    return H3_ERR;
  return cu_m31_smem(s, op, k[5], SOL_SMEM_WSP, d);
}

/* H3_SOL_STATS: the segment's exact-block density on stderr, "h3 sol: <len> rows: <E> of <P>
 * (query block, key block) pairs exact (<E / P> %)" over every q head (waits for the stream;
 * nothing while the stream is being captured into a CUDA graph). */
static h3_status report_density(cu_state *s, const sol_scratch *sc, long long hq, long long nb, long long len,
                                h3_diag *d) {
  enum cudaStreamCaptureStatus cap;
  CU_CHECK(d, cudaStreamIsCapturing(s->stream, &cap), "sol_attention's selection");
  if (cap != cudaStreamCaptureStatusNone) return H3_OK;
  size_t n = (size_t)(hq * nb * nb);
  unsigned char *h = malloc(n);
  if (!h) return H3_ERR;
  cudaError_t e = cudaMemcpyAsync(h, sc->exact, n, cudaMemcpyDeviceToHost, s->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s->stream);
  long long ex = 0;
  for (size_t i = 0; e == cudaSuccess && i < n; i++) ex += h[i];
  free(h);
  if (e != cudaSuccess) return cu_fail(d, e, "cudaMemcpyAsync", "sol_attention's selection");
  fprintf(stderr, "h3 sol: %lld rows: %lld of %zu (query block, key block) pairs exact (%.2f %%)\n", len, ex, n,
          100.0 * (double)ex / (double)n);
  return H3_OK;
}

/* The kernels and scratch of one op, for its segments */
typedef struct {
  cu_kernel *k[6];
  sol_scratch sc;
} sol_ctx;

/* Whether h3cu_sol_fwd_ws takes a segment of nb blocks (nbp rounded up to 16): k and v 16-byte
 * aligned (TMA), the centroid rows (hk nbp 4) within its 32-bit TMA coordinates, and at most
 * SOL_WS_MAXNB blocks (its flags staged in shared memory) */
static bool ws_reaches(const cu_qkv_seg *g, int hk, long long nb, long long nbp) {
  return (int64_t)hk * nbp * 4 <= 2147483647 - 64 && ((uintptr_t)g->k | (uintptr_t)g->v) % 16 == 0 &&
         nb <= SOL_WS_MAXNB;
}

/* h3cu_sol_fwd_ws or h3cu_sol_fwd_wsp (kernel k, smem bytes of dynamic shared memory; the same
 * arguments and reach) on a segment of len rows (nb blocks, nbp = nb rounded up to 16): the TMA
 * maps of k, v ([len][hk 128], row stride hk 128) and kvs ([hk nbp 4][128]), boxes of 64 columns
 * x 64 rows, then the launch */
static h3_status run_ws(cu_state *s, cu_kernel *k, size_t smem, const sol_scratch *sc, const cu_qkv_seg *g, int hq,
                        int hk, long long nb, long long nbp, float scale, h3_diag *d) {
  static const char *const who = "sol_attention", *const fix = "run it with H3_SOL_FORM=mma";
  if (!ws_reaches(g, hk, nb, nbp)) {
    h3_diag_error(d, (h3_span){0}, fix, "cuda: %s: the warp-specialised kernel takes k and v 16-byte aligned, "
                  "at most 2^31 rows of centroids and %d blocks of a segment (%d kv heads of %lld blocks)", who,
                  SOL_WS_MAXNB, hk, nb);
    return H3_ERR;
  }
  CUtensorMap tk, tv, tc;
  long long len = g->len, ks = (long long)hk * SOL_D;
  if (cu_tile_map_rows(&tk, g->k, ks, ks, len, SOL_BLOCK, who, "k", fix, d) != H3_OK ||
      cu_tile_map_rows(&tv, g->v, ks, ks, len, SOL_BLOCK, who, "v", fix, d) != H3_OK ||
      cu_tile_map_rows(&tc, sc->kvs, SOL_D, SOL_D, (int64_t)hk * nbp * 4, SOL_BLOCK, who, "centroids", fix, d) != H3_OK)
    return H3_ERR;
  const void *q = g->q;
  void *o = g->o;
  int group = hq / hk;
  void *args[] = {&tk, &tv, &tc, &q, (void *)&sc->exact, &o, &len, &nb, &group, &scale};
  return cu_launch(s, k, (int64_t[]){(nb + 1) / 2, hq, 1}, (int64_t[]){384, 1, 1}, smem, args, d);
}

/* One segment (rows [0, len) of q, k, v, o at its first row). */
static h3_status run_segment(cu_state *s, const h3_op *op, void *ctx, const cu_qkv_seg *g, h3_diag *d) {
  cu_kernel *const *k = ((sol_ctx *)ctx)->k;
  const sol_scratch *sc = &((sol_ctx *)ctx)->sc;
  int hq = (int)op->operands[0]->type.dims[1], hk = (int)op->operands[1]->type.dims[1], group = hq / hk;
  long long len = g->len, nb = (len + SOL_BLOCK - 1) / SOL_BLOCK, nbp = (nb + SOL_CHUNK - 1) / SOL_CHUNK * SOL_CHUNK;
  long long sink0 = h3_op_attr_int(op, "sink_start", 0), sink1 = sink0 + h3_op_attr_int(op, "sink_tokens", 0);
  float scale = (float)h3_op_attr_float(op, "scale", 1.0), tau = (float)h3_op_attr_float(op, "tau", 1.0);
  int exact_cov = !strcmp(h3_op_attr_string(op, "thresh", "diag"), "exact");
  const void *q = g->q, *kk = g->k, *v = g->v;
  void *o = g->o;
  const int64_t block[3] = {SOL_D, 1, 1};
  void *cargs[] = {&q, &kk, &v, &len, &nb, &hq, &hk, (void *)&sc->kc, (void *)&sc->kvs, (void *)&sc->qbar};
  void *margs[] = {(void *)&sc->kc, &nb, (void *)&sc->kmean, (void *)&sc->kvar};
  void *sargs[] = {(void *)&sc->kc, (void *)&sc->qbar, (void *)&sc->kmean, (void *)&sc->kvar, &nb, &len, &group,
                   &scale, &tau, &exact_cov, &sink0, &sink1, (void *)&sc->exact};
  void *fargs[] = {&q, &kk, &v, (void *)&sc->kvs, (void *)&sc->exact, &o, &len, &nb, &group, &scale};
  if (cu_launch(s, k[0], (int64_t[]){nbp, 2 * hk + hq, 1}, block, 0, cargs, d) != H3_OK ||
      cu_launch(s, k[1], (int64_t[]){hk, 1, 1}, block, 0, margs, d) != H3_OK ||
      cu_launch(s, k[2], (int64_t[]){(nb + SOL_SELECT_QB - 1) / SOL_SELECT_QB, hq, 1}, block, 0, sargs, d) != H3_OK)
    return H3_ERR;
  /* H3_SOL_FORM=ws or wsp forces that form (the error of either names a segment it cannot take),
     =mma the mma form */
  const int form = cu_env_form("H3_SOL_FORM", (const char *const[]){"mma", "ws", "wsp", NULL});
  const bool off = form == 0, forced = form >= 1, pair = form == 2;
  h3_status st = forced || (!off && ws_reaches(g, hk, nb, nbp))
                     ? run_ws(s, k[pair ? 5 : 4], pair ? SOL_SMEM_WSP : SOL_SMEM_WS, sc, g, hq, hk, nb, nbp, scale, d)
                     : cu_launch(s, k[3], (int64_t[]){nb, hq, 1}, block, SOL_SMEM, fargs, d);
  if (st != H3_OK) return H3_ERR;
  return getenv("H3_SOL_STATS") ? report_density(s, sc, hq, nb, len, d) : H3_OK;
}

h3_status cu_sol_run(cu_state *s, const h3_op *op, void *scratch, const h3_tensor *in, const h3_tensor *out,
                     h3_diag *d) {
  if (!cu_sol_supports(op) || !scratch)
    return cu_op_error(d, op, "run it with --backend cpu", "takes bf16 q[T, Hq, 128], k and v [T, Hk, 128] "
                       "with Hq %% Hk == 0 and thresh diag or exact on cuda");
  sol_ctx c;
  if (sol_kernels(s, op, c.k, d) != H3_OK) return H3_ERR;
  scratch_layout(op, scratch, &c.sc);
  return cu_qkv_segments(s, op, in, out, run_segment, &c, d);
}
