/* cuda_nccl.c: libnccl.so.2 through dlopen, and the communicator of one rank (cuda_nccl.h). */
#include "cuda_nccl.h"

#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(h3_rank_id) == sizeof(ncclUniqueId), "h3_rank_id holds an ncclUniqueId");

#define NCCL_HINT \
  "install NCCL 2.9 or newer (libnccl.so.2 on the library path, as PyTorch's CUDA builds ship " \
  "it), or run the parallel plan with --backend cpu --gpus N"

/* The few symbols h3 calls, looked up once per process. */
static struct {
  ncclResult_t (*get_version)(int *);
  ncclResult_t (*get_unique_id)(ncclUniqueId *);
  ncclResult_t (*comm_init_rank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*comm_destroy)(ncclComm_t);
  ncclResult_t (*comm_abort)(ncclComm_t);
  const char *(*error_string)(ncclResult_t);
  ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
  ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                             cudaStream_t);
  ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  ncclResult_t (*group_start)(void);
  ncclResult_t (*group_end)(void);
  int version;
  char why[320]; /* empty when loaded */
} nccl;
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

static void nccl_load(void) {
  void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(nccl.why, sizeof nccl.why, "cannot open libnccl.so.2: %s", dlerror());
    return;
  }
  struct {
    void **fn;
    const char *name;
  } syms[] = {{(void **)&nccl.get_version, "ncclGetVersion"},
              {(void **)&nccl.get_unique_id, "ncclGetUniqueId"},
              {(void **)&nccl.comm_init_rank, "ncclCommInitRank"},
              {(void **)&nccl.comm_destroy, "ncclCommDestroy"},
              {(void **)&nccl.comm_abort, "ncclCommAbort"},
              {(void **)&nccl.error_string, "ncclGetErrorString"},
              {(void **)&nccl.all_gather, "ncclAllGather"},
              {(void **)&nccl.all_reduce, "ncclAllReduce"},
              {(void **)&nccl.send, "ncclSend"},
              {(void **)&nccl.recv, "ncclRecv"},
              {(void **)&nccl.group_start, "ncclGroupStart"},
              {(void **)&nccl.group_end, "ncclGroupEnd"}};
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
    if (!(*syms[i].fn = dlsym(h, syms[i].name))) {
      snprintf(nccl.why, sizeof nccl.why, "libnccl.so.2 has no %s", syms[i].name);
      return;
    }
  /* 2.9 and later code the version as major * 10000 + minor * 100 + patch */
  if (nccl.get_version(&nccl.version) != ncclSuccess || nccl.version < 20900)
    snprintf(nccl.why, sizeof nccl.why, "libnccl.so.2 is version code %d, older than 2.9 (20900)",
             nccl.version);
}

static h3_status nccl_ready(h3_diag *d) {
  pthread_once(&nccl_once, nccl_load);
  if (!nccl.why[0]) return H3_OK;
  h3_diag_error(d, (h3_span){0}, NCCL_HINT, "cuda: NCCL is not usable: %s", nccl.why);
  return H3_ERR;
}

struct cu_nccl {
  ncclComm_t comm;
  int ranks, rank;
  bool failed; /* a call failed: abort, do not destroy */
};

static h3_status nccl_fail(cu_nccl *c, h3_diag *d, ncclResult_t r, const char *call) {
  if (c) c->failed = true;
  h3_diag_error(d, (h3_span){0},
                r == ncclRemoteError || r == ncclSystemError
                    ? "another rank failed or stopped: its own error says why"
                    : "see NCCL's message; NCCL_DEBUG=WARN in the environment prints more",
                "cuda: NCCL: %s failed: %s", call, nccl.error_string(r));
  return H3_ERR;
}

#define NCCL_CHECK(c, d, call, what)                                 \
  do {                                                               \
    ncclResult_t r_ = (call);                                        \
    if (r_ != ncclSuccess) return nccl_fail((c), (d), r_, (what));   \
  } while (0)

h3_status cu_nccl_unique_id(h3_rank_id *id, h3_diag *d) {
  if (nccl_ready(d) != H3_OK) return H3_ERR;
  ncclUniqueId u;
  NCCL_CHECK(NULL, d, nccl.get_unique_id(&u), "ncclGetUniqueId");
  memcpy(id->bytes, u.internal, sizeof id->bytes);
  return H3_OK;
}

cu_nccl *cu_nccl_join(int ranks, int rank, const h3_rank_id *id, h3_diag *d) {
  if (nccl_ready(d) != H3_OK) return NULL;
  cu_nccl *c = calloc(1, sizeof *c);
  if (!c) {
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "out of memory joining the NCCL communicator");
    return NULL;
  }
  ncclUniqueId u;
  memcpy(u.internal, id->bytes, sizeof u.internal);
  ncclResult_t r = nccl.comm_init_rank(&c->comm, ranks, u, rank);
  if (r != ncclSuccess) {
    char what[96];
    snprintf(what, sizeof what, "ncclCommInitRank (rank %d of %d)", rank, ranks);
    nccl_fail(c, d, r, what);
    free(c);
    return NULL;
  }
  c->ranks = ranks, c->rank = rank;
  return c;
}

void cu_nccl_free(cu_nccl *c, bool failed) {
  if (!c) return;
  if (failed || c->failed)
    nccl.comm_abort(c->comm);
  else
    nccl.comm_destroy(c->comm);
  free(c);
}

h3_status cu_nccl_all_gather(cu_nccl *c, const void *send, void *recv, size_t bytes, cudaStream_t st,
                             h3_diag *d) {
  NCCL_CHECK(c, d, nccl.all_gather(send, recv, bytes, ncclUint8, c->comm, st), "ncclAllGather");
  return H3_OK;
}

h3_status cu_nccl_all_to_all(cu_nccl *c, const void *send, void *recv, size_t bytes, cudaStream_t st,
                             h3_diag *d) {
  NCCL_CHECK(c, d, nccl.group_start(), "ncclGroupStart");
  for (int j = 0; j < c->ranks; j++) {
    ncclResult_t r = nccl.send((const char *)send + (size_t)j * bytes, bytes, ncclUint8, j, c->comm, st);
    if (r == ncclSuccess) r = nccl.recv((char *)recv + (size_t)j * bytes, bytes, ncclUint8, j, c->comm, st);
    if (r != ncclSuccess) {
      nccl.group_end(); /* closes the group; the communicator is aborted at the end */
      return nccl_fail(c, d, r, "ncclSend / ncclRecv");
    }
  }
  NCCL_CHECK(c, d, nccl.group_end(), "ncclGroupEnd (all_to_all)");
  return H3_OK;
}

static bool nccl_type(h3_dtype t, ncclDataType_t *out) {
  switch (t) {
  case H3_F32: *out = ncclFloat32; return true;
  case H3_F64: *out = ncclFloat64; return true;
  case H3_I32: *out = ncclInt32; return true;
  case H3_I64: *out = ncclInt64; return true;
  case H3_I8: *out = ncclInt8; return true;
  case H3_U8: *out = ncclUint8; return true;
  default: return false;
  }
}

bool cu_nccl_reduces(h3_dtype dtype) {
  ncclDataType_t t;
  return nccl_type(dtype, &t);
}

h3_status cu_nccl_all_reduce(cu_nccl *c, const void *send, void *recv, size_t count, h3_dtype dtype,
                             cudaStream_t st, h3_diag *d) {
  ncclDataType_t t;
  if (!nccl_type(dtype, &t)) {
    h3_diag_error(d, (h3_span){0}, NULL, "cuda: NCCL all_reduce of %s is not implemented",
                  h3_dtype_name(dtype));
    return H3_ERR;
  }
  NCCL_CHECK(c, d, nccl.all_reduce(send, recv, count, t, ncclSum, c->comm, st), "ncclAllReduce");
  return H3_OK;
}
