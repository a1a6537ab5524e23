/* cuda_cudnn.c: attention through cuDNN's fused SDPA, built with the C backend graph API
 * (cudnnBackend*; only API present in cuDNN 9.14 and 9.19).
 *
 * The operation graph is the SDPA inference pattern cuDNN fuses into one flash-attention
 * engine, on tensors [b = 1, h, s, d] whose strides are those of q/k/v [T, H, D] rows:
 *   S = Q·Kᵀ (K given as its transposed view [1, h, d, s]); S2 = S * scale (a by-value
 *   scalar); M = rowmax S2; E = exp(S2 - M); L = rowsum E; Z = M + log L (the softmax
 *   statistics, virtual: nothing reads them); P = E / L; O = P·V
 * with fp32 virtual intermediates and fp32 compute, except P, which is virtual in the I/O
 * dtype (bf16 / f16). cuDNN's pattern matcher takes the softmax only with its statistics
 * branch and the second matmul only with P in the I/O type (otherwise no engine: "Dropout
 * set of ops not configured correctly"); this is the graph cuDNN's own frontend builds for
 * inference. The engine is picked by heuristic mode
 * A (then the fallback mode): the first engine config whose execution plan finalizes and
 * whose workspace fits the backend's fixed workspace wins. Plans are built once per shape
 * (segment length, heads, head_dim, dtype, the row strides of q, k, v and o: v's is the
 * qkv row when attention reads v in place through v_view) and kept with their descriptors;
 * the variant pack is made per call (pointers change), so calls can be captured in CUDA
 * graphs.
 * A shape cuDNN cannot build is remembered and reported once as a warning; the caller then
 * falls back to another implementation.
 */
#include "cuda_internal.h"

#include <cudnn.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DESC 64

typedef struct {
  int64_t len, hq, hk, dim, qs, ks, vs, os;
  h3_dtype dtype;
  bool failed;
  cudnnBackendDescriptor_t plan;
  cudnnBackendDescriptor_t desc[MAX_DESC]; /* everything the plan was built from */
  int n_desc;
} sdpa_plan;

struct cu_cudnn {
  cudnnHandle_t h;
  bool broken; /* no handle: cuDNN unusable in this process */
  sdpa_plan *plans;
  int n_plans, cap_plans;
};

/* ---- a builder that keeps the first failure --------------------------------------------- */
typedef struct {
  cudnnStatus_t st;
  const char *where;
  sdpa_plan *p;
} bld;

static cudnnBackendDescriptor_t bd_new(bld *b, cudnnBackendDescriptorType_t t, const char *where) {
  cudnnBackendDescriptor_t x = NULL;
  if (b->st != CUDNN_STATUS_SUCCESS) return NULL;
  if (b->p->n_desc == MAX_DESC) {
    b->st = CUDNN_STATUS_INTERNAL_ERROR;
    b->where = "too many descriptors";
    return NULL;
  }
  b->st = cudnnBackendCreateDescriptor(t, &x);
  if (b->st != CUDNN_STATUS_SUCCESS) b->where = where;
  else b->p->desc[b->p->n_desc++] = x;
  return x;
}

static void bd_set(bld *b, cudnnBackendDescriptor_t x, cudnnBackendAttributeName_t name,
                   cudnnBackendAttributeType_t type, int64_t n, const void *v, const char *where) {
  if (b->st != CUDNN_STATUS_SUCCESS) return;
  b->st = cudnnBackendSetAttribute(x, name, type, n, v);
  if (b->st != CUDNN_STATUS_SUCCESS) b->where = where;
}

static void bd_fin(bld *b, cudnnBackendDescriptor_t x, const char *where) {
  if (b->st != CUDNN_STATUS_SUCCESS) return;
  b->st = cudnnBackendFinalize(x);
  if (b->st != CUDNN_STATUS_SUCCESS) b->where = where;
}

static cudnnBackendDescriptor_t tensor(bld *b, int64_t uid, cudnnDataType_t dt, const int64_t dims[4],
                                       const int64_t strides[4], bool virt, bool by_value) {
  cudnnBackendDescriptor_t t = bd_new(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor");
  int64_t align = 16;
  bd_set(b, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, "tensor dtype");
  bd_set(b, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, "tensor dims");
  bd_set(b, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, "tensor strides");
  bd_set(b, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid");
  bd_set(b, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, "tensor alignment");
  if (virt) bd_set(b, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, "virtual");
  if (by_value) bd_set(b, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value, "by value");
  bd_fin(b, t, "tensor finalize");
  return t;
}

static cudnnBackendDescriptor_t pointwise(bld *b, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                          cudnnBackendDescriptor_t bb, cudnnBackendDescriptor_t y) {
  cudnnDataType_t f = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t pw = bd_new(b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise");
  bd_set(b, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
  bd_set(b, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f, "pointwise precision");
  bd_fin(b, pw, "pointwise finalize");
  cudnnBackendDescriptor_t op = bd_new(b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise op");
  bd_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw, "pw desc");
  bd_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, "pw x");
  if (bb) bd_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &bb, "pw b");
  bd_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "pw y");
  bd_fin(b, op, "pointwise op finalize");
  return op;
}

static cudnnBackendDescriptor_t reduction(bld *b, cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                                          cudnnBackendDescriptor_t y) {
  cudnnDataType_t f = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t rd = bd_new(b, CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction");
  bd_set(b, rd, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode, "reduce op");
  bd_set(b, rd, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f, "reduce precision");
  bd_fin(b, rd, "reduction finalize");
  cudnnBackendDescriptor_t op = bd_new(b, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction op");
  bd_set(b, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &rd, "reduce desc");
  bd_set(b, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, "reduce x");
  bd_set(b, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, "reduce y");
  bd_fin(b, op, "reduction op finalize");
  return op;
}

static cudnnBackendDescriptor_t matmul(bld *b, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t bm,
                                       cudnnBackendDescriptor_t c) {
  cudnnDataType_t f = CUDNN_DATA_FLOAT;
  cudnnBackendDescriptor_t mm = bd_new(b, CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul");
  bd_set(b, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f, "matmul precision");
  bd_fin(b, mm, "matmul finalize");
  cudnnBackendDescriptor_t op = bd_new(b, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul op");
  bd_set(b, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a, "matmul a");
  bd_set(b, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &bm, "matmul b");
  bd_set(b, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c, "matmul c");
  bd_set(b, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm, "matmul desc");
  bd_fin(b, op, "matmul op finalize");
  return op;
}

enum { UID_Q = 1, UID_K, UID_V, UID_O, UID_SCALE };

/* The operation graph of the pattern above; NULL (b->st set) on failure. */
static cudnnBackendDescriptor_t op_graph(bld *b, cudnnHandle_t h, const sdpa_plan *p) {
  cudnnDataType_t io = p->dtype == H3_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF, f = CUDNN_DATA_FLOAT;
  int64_t L = p->len, H = p->hq, D = p->dim;
  int64_t qd[4] = {1, H, L, D}, qst[4] = {L * p->qs, D, p->qs, 1};
  int64_t kd[4] = {1, p->hk, D, L}, kst[4] = {L * p->ks, D, 1, p->ks};
  int64_t vd[4] = {1, p->hk, L, D}, vst[4] = {L * p->vs, D, p->vs, 1};
  int64_t ost[4] = {L * p->os, D, p->os, 1};
  int64_t sd[4] = {1, H, L, L}, sst[4] = {H * L * L, L * L, L, 1};
  int64_t rd[4] = {1, H, L, 1}, rst[4] = {H * L, L, 1, 1};
  int64_t one[4] = {1, 1, 1, 1};
  cudnnBackendDescriptor_t Q = tensor(b, UID_Q, io, qd, qst, false, false);
  cudnnBackendDescriptor_t KT = tensor(b, UID_K, io, kd, kst, false, false);
  cudnnBackendDescriptor_t V = tensor(b, UID_V, io, vd, vst, false, false);
  cudnnBackendDescriptor_t O = tensor(b, UID_O, io, qd, ost, false, false);
  cudnnBackendDescriptor_t SC = tensor(b, UID_SCALE, f, one, one, false, true);
  cudnnBackendDescriptor_t S = tensor(b, 101, f, sd, sst, true, false);
  cudnnBackendDescriptor_t S2 = tensor(b, 102, f, sd, sst, true, false);
  cudnnBackendDescriptor_t M = tensor(b, 103, f, rd, rst, true, false);
  cudnnBackendDescriptor_t Z = tensor(b, 104, f, sd, sst, true, false);
  cudnnBackendDescriptor_t E = tensor(b, 105, f, sd, sst, true, false);
  cudnnBackendDescriptor_t Ls = tensor(b, 106, f, rd, rst, true, false);
  cudnnBackendDescriptor_t LogL = tensor(b, 108, f, rd, rst, true, false);
  cudnnBackendDescriptor_t St = tensor(b, 109, f, rd, rst, true, false);
  cudnnBackendDescriptor_t P = tensor(b, 107, io, sd, sst, true, false);
  cudnnBackendDescriptor_t ops[10];
  ops[0] = matmul(b, Q, KT, S);
  ops[1] = pointwise(b, CUDNN_POINTWISE_MUL, S, SC, S2);
  ops[2] = reduction(b, CUDNN_REDUCE_TENSOR_MAX, S2, M);
  ops[3] = pointwise(b, CUDNN_POINTWISE_SUB, S2, M, Z);
  ops[4] = pointwise(b, CUDNN_POINTWISE_EXP, Z, NULL, E);
  ops[5] = reduction(b, CUDNN_REDUCE_TENSOR_ADD, E, Ls);
  ops[6] = pointwise(b, CUDNN_POINTWISE_LOG, Ls, NULL, LogL);
  ops[7] = pointwise(b, CUDNN_POINTWISE_ADD, M, LogL, St);
  ops[8] = pointwise(b, CUDNN_POINTWISE_DIV, E, Ls, P);
  ops[9] = matmul(b, P, V, O);
  cudnnBackendDescriptor_t g = bd_new(b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
  bd_set(b, g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 10, ops, "graph ops");
  bd_set(b, g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h, "graph handle");
  bd_fin(b, g, "operation graph finalize (the pattern is not supported for this shape)");
  return b->st == CUDNN_STATUS_SUCCESS ? g : NULL;
}

/* Tries the engine configs of one heuristic mode; sets p->plan on success. */
static void try_engines(bld *b, cudnnHandle_t h, cudnnBackendDescriptor_t g, cudnnBackendHeurMode_t mode) {
  cudnnBackendDescriptor_t heur = bd_new(b, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "heuristics");
  bd_set(b, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g, "heur graph");
  bd_set(b, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heur mode");
  bd_fin(b, heur, "heuristics finalize");
  int64_t count = 0;
  if (b->st == CUDNN_STATUS_SUCCESS) {
    b->st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                     0, &count, NULL);
    if (b->st != CUDNN_STATUS_SUCCESS) b->where = "heuristic results";
  }
  if (count > 8) count = 8;
  cudnnBackendDescriptor_t cfg[8];
  for (int64_t i = 0; i < count; i++) cfg[i] = bd_new(b, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
  int64_t got = 0;
  if (b->st == CUDNN_STATUS_SUCCESS && count > 0) {
    b->st = cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                     count, &got, cfg);
    if (b->st != CUDNN_STATUS_SUCCESS) b->where = "heuristic results";
  }
  for (int64_t i = 0; b->st == CUDNN_STATUS_SUCCESS && i < got && !b->p->plan; i++) {
    cudnnBackendDescriptor_t plan = NULL;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS)
      continue;
    int64_t ws = -1;
    if (cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) ==
            CUDNN_STATUS_SUCCESS &&
        cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS &&
        cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                 NULL, &ws) == CUDNN_STATUS_SUCCESS &&
        ws >= 0 && (size_t)ws <= CU_WORKSPACE_BYTES)
      b->p->plan = plan;
    else
      cudnnBackendDestroyDescriptor(plan);
  }
}

static void plan_release(sdpa_plan *p) {
  if (p->plan) cudnnBackendDestroyDescriptor(p->plan);
  for (int i = p->n_desc - 1; i >= 0; i--) cudnnBackendDestroyDescriptor(p->desc[i]);
  p->plan = NULL;
  p->n_desc = 0;
}

static void build(cu_cudnn *c, sdpa_plan *p, char *why, size_t why_len) {
  bld b = {CUDNN_STATUS_SUCCESS, NULL, p};
  cudnnBackendDescriptor_t g = op_graph(&b, c->h, p);
  if (g) try_engines(&b, c->h, g, CUDNN_HEUR_MODE_A);
  if (g && !p->plan) {
    b.st = CUDNN_STATUS_SUCCESS;
    try_engines(&b, c->h, g, CUDNN_HEUR_MODE_FALLBACK);
  }
  if (p->plan) return;
  char last[256] = "";
  cudnnGetLastErrorString(last, sizeof last);
  snprintf(why, why_len, "%s: %s%s%s", b.st != CUDNN_STATUS_SUCCESS && b.where ? b.where : "no engine",
           cudnnGetErrorString(b.st), last[0] ? "; " : "", last);
  plan_release(p);
  p->failed = true;
}

bool cu_cudnn_supports(const cu_att_seg *a) {
  return (a->dtype == H3_BF16 || a->dtype == H3_F16) && a->dim <= 128 && a->dim % 8 == 0 &&
         a->hq == a->hk && !a->causal && a->q_stride % 8 == 0 && a->k_stride % 8 == 0 &&
         a->v_stride % 8 == 0 && a->o_stride % 8 == 0 &&
         ((uintptr_t)a->q | (uintptr_t)a->k | (uintptr_t)a->v | (uintptr_t)a->o) % 16 == 0;
}

static sdpa_plan *find_plan(cu_state *s, const cu_att_seg *a, char *why, size_t why_len, h3_diag *d) {
  cu_cudnn *c = s->cudnn;
  for (int i = 0; i < c->n_plans; i++) {
    sdpa_plan *p = &c->plans[i];
    if (p->len == a->len && p->hq == a->hq && p->hk == a->hk && p->dim == a->dim &&
        p->qs == a->q_stride && p->ks == a->k_stride && p->vs == a->v_stride &&
        p->os == a->o_stride && p->dtype == a->dtype)
      return p;
  }
  if (c->n_plans == c->cap_plans) {
    int cap = c->cap_plans ? c->cap_plans * 2 : 8;
    sdpa_plan *np = realloc(c->plans, (size_t)cap * sizeof *np);
    if (!np) {
      h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "cuda: out of memory for a cuDNN plan");
      return NULL;
    }
    c->plans = np;
    c->cap_plans = cap;
  }
  sdpa_plan *p = &c->plans[c->n_plans++];
  memset(p, 0, sizeof *p);
  p->len = a->len;
  p->hq = a->hq;
  p->hk = a->hk;
  p->dim = a->dim;
  p->qs = a->q_stride;
  p->ks = a->k_stride;
  p->vs = a->v_stride;
  p->os = a->o_stride;
  p->dtype = a->dtype;
  build(c, p, why, why_len);
  return p;
}

h3_status cu_cudnn_run(cu_state *s, const cu_att_seg *a, bool *fallback, h3_diag *d) {
  *fallback = false;
  char why[512] = "";
  if (!s->cudnn) {
    s->cudnn = calloc(1, sizeof *s->cudnn);
    if (!s->cudnn) {
      h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "cuda: out of memory for cuDNN state");
      return H3_ERR;
    }
    cudnnStatus_t st = cudnnCreate(&s->cudnn->h);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnSetStream(s->cudnn->h, s->stream);
    if (st != CUDNN_STATUS_SUCCESS) {
      s->cudnn->broken = true;
      snprintf(why, sizeof why, "cudnnCreate: %s", cudnnGetErrorString(st));
    }
  }
  sdpa_plan *p = s->cudnn->broken ? NULL : find_plan(s, a, why, sizeof why, d);
  if (!s->cudnn->broken && !p) return H3_ERR;
  if (!p || p->failed) {
    *fallback = true;
    if (why[0] && !s->attention_warned) {
      s->attention_warned = true;
      h3_diag_warning(d, (h3_span){0}, "pick another implementation with --attention",
                      "cuda: cuDNN SDPA is not available for [%lld rows, %lld heads, %lld] (%s); "
                      "using flash attention", (long long)a->len, (long long)a->hq,
                      (long long)a->dim, why);
    }
    return H3_OK;
  }
  float scale = a->scale;
  int64_t uids[5] = {UID_Q, UID_K, UID_V, UID_O, UID_SCALE};
  void *ptrs[5] = {(void *)a->q, (void *)a->k, (void *)a->v, a->o, &scale};
  void *ws = s->workspace;
  cudnnBackendDescriptor_t vp = NULL;
  cudnnStatus_t st = cudnnSetStream(s->cudnn->h, s->stream); /* main or side (cuda_side.c) */
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
  if (st == CUDNN_STATUS_SUCCESS)
    st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 5, uids);
  if (st == CUDNN_STATUS_SUCCESS)
    st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 5, ptrs);
  if (st == CUDNN_STATUS_SUCCESS)
    st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(vp);
  if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(s->cudnn->h, p->plan, vp);
  if (vp) cudnnBackendDestroyDescriptor(vp);
  if (st != CUDNN_STATUS_SUCCESS) {
    char last[256] = "";
    cudnnGetLastErrorString(last, sizeof last);
    h3_diag_error(d, (h3_span){0}, "try --attention flash", "cuda: cuDNN SDPA failed: %s%s%s",
                  cudnnGetErrorString(st), last[0] ? ": " : "", last);
    return H3_ERR;
  }
  return H3_OK;
}

void cu_cudnn_free(cu_state *s) {
  cu_cudnn *c = s->cudnn;
  if (!c) return;
  for (int i = 0; i < c->n_plans; i++) plan_release(&c->plans[i]);
  free(c->plans);
  if (c->h) cudnnDestroy(c->h);
  free(c);
  s->cudnn = NULL;
}
