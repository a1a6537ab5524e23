/* cuda_graph.c: graph calls captured once as CUDA graphs and replayed (the executor's
 * call_begin / call_end hooks of h3_backend_ext).
 *
 * Per callee graph (the key) a record counts its runs. The first run is plain (it loads
 * kernels, builds cuBLASLt / cuDNN plans and lets the executor allocate its buffers); the
 * second is captured with cudaStreamBeginCapture (relaxed mode) and then launched; every
 * later call with the same input buffers and request seed replays the graph
 * (cudaGraphLaunch). Other inputs or another seed drop the graph and start over.
 * During a capture: host uploads (the executor's loop indices) copy from pinned memory
 * owned by the record, which still holds the same bytes at every replay; device blocks
 * released go to the record (cu_alloc re-uses them only inside the same capture) until
 * the graph is destroyed; nested calls are captured into the same graph. A capture that
 * cannot be ended or instantiated is an error (that call's work did not run); the record
 * runs op by op from then on. H3_CUDA_GRAPHS=0 in the environment turns capture off.
 * A graph whose run reads device memory on the host (a `branch` reads its cond: Cache-DiT;
 * an `index` by a row that is neither a loop counter nor a constant is downloaded; moe's
 * cuBLASLt form reads its expert counts), itself or through a graph
 * it calls, can never be captured: h3_cuda_load_plan marks it once (cu_graph_mark_plan)
 * and its calls always run op by op; the graphs it calls are still captured on their own.
 * The executor must keep the buffers of a recorded call (its arena, its unplanned
 * values) until the runtime is freed; it does.
 */
#include "cuda_internal.h"
#include "cuda_m31.h"

#include <stdlib.h>
#include <string.h>

#define STASH_CHUNK ((size_t)64 << 10)

typedef struct {
  const void *key;
  int runs; /* plain runs completed */
  bool uncapturable; /* a capture failed */
  bool host_reads;   /* the graph reads the device on the host (cu_graph_mark_plan) */
  const h3_op *why;  /* the op that reads it, for the report */
  uint64_t seed;
  int n_in;
  void **in_ptrs;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  void **chunks; /* pinned stash chunks */
  int n_chunks;
  size_t used, cap; /* in the last chunk */
} graph_rec;

struct cu_graphs {
  graph_rec **recs;
  int n, cap;
  graph_rec *capturing;
  int depth; /* nested calls inside the capture */
  int64_t captured, replayed;
};

bool cu_graph_capturing(const cu_state *s) { return s->graphs && s->graphs->capturing; }

const void *cu_graph_holder(const cu_state *s) {
  return s->graphs ? (const void *)s->graphs->capturing : NULL;
}

void cu_graph_counts(const cu_state *s, int64_t *captured, int64_t *replayed) {
  *captured = s->graphs ? s->graphs->captured : 0;
  *replayed = s->graphs ? s->graphs->replayed : 0;
}

static bool stash_chunk(graph_rec *r, size_t bytes) {
  void **c = realloc(r->chunks, (size_t)(r->n_chunks + 1) * sizeof *c);
  if (!c) return false;
  r->chunks = c;
  size_t cap = bytes > STASH_CHUNK ? bytes : STASH_CHUNK;
  if (cudaHostAlloc(&c[r->n_chunks], cap, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  r->n_chunks++;
  r->used = 0;
  r->cap = cap;
  return true;
}

void *cu_graph_stash(cu_state *s, const void *src, size_t bytes, h3_diag *d) {
  graph_rec *r = s->graphs->capturing;
  size_t at = (r->used + 15) & ~(size_t)15;
  if (!r->n_chunks || at + bytes > r->cap) {
    if (!stash_chunk(r, bytes)) {
      h3_diag_error(d, (h3_span){0}, "free host memory, or run without CUDA graphs (H3_CUDA_GRAPHS=0)",
                    "cuda: out of pinned host memory while capturing a graph call");
      return NULL;
    }
    at = 0;
  }
  char *p = (char *)r->chunks[r->n_chunks - 1] + at;
  memcpy(p, src, bytes);
  r->used = at + bytes;
  return p;
}

/* Drops the record's graph, its held blocks and its stash. */
static void rec_reset(cu_state *s, graph_rec *r) {
  if (r->exec) cudaGraphExecDestroy(r->exec);
  if (r->graph) cudaGraphDestroy(r->graph);
  r->exec = NULL;
  r->graph = NULL;
  for (int i = 0; i < s->n_blocks; i++)
    if (s->blocks[i].state == CU_BLOCK_HELD && s->blocks[i].holder == r) {
      s->blocks[i].state = CU_BLOCK_FREE;
      s->blocks[i].holder = NULL;
    }
  for (int i = 0; i < r->n_chunks; i++) cudaFreeHost(r->chunks[i]);
  free(r->chunks);
  r->chunks = NULL;
  r->n_chunks = 0;
  r->used = r->cap = 0;
}

static graph_rec *rec_get(cu_graphs *g, const void *key) {
  for (int i = 0; i < g->n; i++)
    if (g->recs[i]->key == key) return g->recs[i];
  if (g->n == g->cap) {
    int cap = g->cap ? g->cap * 2 : 8;
    graph_rec **nr = realloc(g->recs, (size_t)cap * sizeof *nr);
    if (!nr) return NULL;
    g->recs = nr;
    g->cap = cap;
  }
  graph_rec *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->key = key;
  g->recs[g->n++] = r;
  return r;
}

static bool same_inputs(const graph_rec *r, const h3_tensor *in, int n_in, uint64_t seed) {
  if (r->n_in != n_in || r->seed != seed) return false;
  for (int i = 0; i < n_in; i++)
    if (r->in_ptrs[i] != in[i].data) return false;
  return true;
}

h3_status cu_graph_call_begin(h3_backend *b, const void *key, const h3_tensor *in, int n_in,
                              int *replayed, h3_diag *d) {
  cu_state *s = b->ctx;
  *replayed = 0;
  if (s->no_graphs) return H3_OK;
  if (!s->graphs && !(s->graphs = calloc(1, sizeof *s->graphs))) return H3_OK; /* no graphs */
  cu_graphs *g = s->graphs;
  if (g->capturing) {
    g->depth++;
    return H3_OK;
  }
  graph_rec *r = rec_get(g, key);
  if (!r) return H3_OK;
  if (r->exec && same_inputs(r, in, n_in, b->seed)) {
    cu_mark_busy(s);
    CU_CHECK(d, cudaGraphLaunch(r->exec, s->stream), "graph replay");
    g->replayed++;
    *replayed = 1;
    return H3_OK;
  }
  if (r->exec) {
    rec_reset(s, r); /* other buffers or seed: record again */
    r->runs = 0;
  }
  if (r->uncapturable || r->host_reads || r->runs < 1) return H3_OK;
  void **ptrs = realloc(r->in_ptrs, (size_t)(n_in + 1) * sizeof *ptrs);
  if (!ptrs || !stash_chunk(r, STASH_CHUNK)) {
    if (ptrs) r->in_ptrs = ptrs;
    return H3_OK; /* run it plainly */
  }
  r->in_ptrs = ptrs;
  r->n_in = n_in;
  for (int i = 0; i < n_in; i++) ptrs[i] = in[i].data;
  r->seed = b->seed;
  CU_CHECK(d, cudaStreamBeginCapture(s->stream, cudaStreamCaptureModeRelaxed), "graph capture");
  g->capturing = r;
  g->depth = 0;
  return H3_OK;
}

h3_status cu_graph_call_end(h3_backend *b, const void *key, h3_status st, h3_diag *d) {
  cu_state *s = b->ctx;
  cu_graphs *g = s->graphs;
  if (s->no_graphs || !g) return H3_OK;
  if (g->capturing && g->depth > 0) {
    g->depth--;
    return H3_OK;
  }
  graph_rec *r = g->capturing;
  if (!r) {
    graph_rec *p = rec_get(g, key);
    if (p && st == H3_OK) p->runs++;
    return H3_OK;
  }
  g->capturing = NULL;
  cudaGraph_t graph = NULL;
  cudaError_t e = cudaStreamEndCapture(s->stream, &graph);
  r->graph = graph;
  if (e == cudaSuccess && st == H3_OK) e = cudaGraphInstantiate(&r->exec, graph, 0);
  if (st != H3_OK || e != cudaSuccess) {
    cudaGetLastError();
    rec_reset(s, r);
    r->uncapturable = true;
    if (st != H3_OK) return H3_OK; /* the run's own error is reported already */
    h3_diag_error(d, (h3_span){0}, "run again with H3_CUDA_GRAPHS=0 (no CUDA graphs)",
                  "cuda: capturing a graph call as a CUDA graph failed (%s: %s), so its work did "
                  "not run; later calls run op by op", cudaGetErrorName(e), cudaGetErrorString(e));
    return H3_ERR;
  }
  g->captured++;
  cu_mark_busy(s);
  CU_CHECK(d, cudaGraphLaunch(r->exec, s->stream), "graph launch");
  return H3_OK;
}

/* ---- graphs that read the device on the host ---------------------------------------------- */
/* Whether the executor reads device memory on the host to run op (outside fused groups,
 * whose ops a kernel runs): a branch downloads its cond; an index view downloads its row
 * unless the row is a loop counter (region argument 0 of a loop, kept on the host) or a
 * constant. */
static bool op_reads_host(const h3_op *op) {
  if (op->parent && op->parent->parent && op->parent->parent->code == H3_OP_FUSED) return false;
  if (op->code == H3_OP_BRANCH || cu_m31_moe_lt(op)) return true;
  if (op->code != H3_OP_INDEX || op->n_operands != 2) return false;
  const h3_value *i = op->operands[1];
  int64_t row;
  if (h3_value_const_int(i, &row)) return false;
  return !(i->kind == H3_VALUE_REGION_ARG && i->index == 0 && i->region && i->region->parent &&
           i->region->parent->code == H3_OP_LOOP);
}

typedef struct {
  const h3_module *m;
  const bool *flags; /* by graph index: known to read the host */
  const h3_op *hit;  /* the first op that reads */
} reads_ctx;

static bool callee_reads(const reads_ctx *c, const h3_op *op, const char *attr) {
  const char *name = h3_op_attr_string(op, attr, NULL);
  for (int i = 0; name && i < c->m->n_graphs; i++)
    if (!strcmp(c->m->graphs[i]->name, name)) return c->flags[i];
  return false;
}

static int reads_visit(h3_op *op, void *ctx) {
  reads_ctx *c = ctx;
  if (op_reads_host(op) || (op->code == H3_OP_CALL && callee_reads(c, op, "callee"))) c->hit = op;
  return c->hit != NULL; /* stop at the first */
}

void cu_graph_host_reads(const h3_module *m, bool *flags, const h3_op **why) {
  for (int i = 0; i < m->n_graphs; i++) flags[i] = false;
  /* a graph's own ops first, then callers of flagged graphs until nothing changes (each
     round flags at least one more graph, or ends) */
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = 0; i < m->n_graphs; i++) {
      if (flags[i]) continue;
      reads_ctx c = {m, flags, NULL};
      h3_region_walk(&m->graphs[i]->body, reads_visit, &c);
      if (c.hit) flags[i] = changed = true;
    }
  }
  /* each marked graph's first op, in its order, that reads (with every mark known) */
  for (int i = 0; why && i < m->n_graphs; i++) {
    reads_ctx c = {m, flags, NULL};
    if (flags[i]) h3_region_walk(&m->graphs[i]->body, reads_visit, &c);
    why[i] = c.hit;
  }
}

h3_status cu_graph_mark_plan(cu_state *s, const h3_module *m, h3_diag *d) {
  if (s->no_graphs || m->n_graphs == 0) return H3_OK;
  bool *flags = calloc((size_t)m->n_graphs, sizeof *flags);
  const h3_op **why = calloc((size_t)m->n_graphs, sizeof *why);
  if (!flags || !why || (!s->graphs && !(s->graphs = calloc(1, sizeof *s->graphs)))) {
    free(flags), free(why);
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "cuda: out of memory marking the plan's graph calls");
    return H3_ERR;
  }
  cu_graph_host_reads(m, flags, why);
  h3_status st = H3_OK;
  for (int i = 0; i < m->n_graphs; i++) {
    graph_rec *r = rec_get(s->graphs, m->graphs[i]);
    if (!r) {
      h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "cuda: out of memory marking the plan's graph calls");
      st = H3_ERR;
      break;
    }
    /* a record left by a freed module whose graph had this address starts over */
    rec_reset(s, r);
    r->runs = 0;
    r->n_in = 0;
    r->uncapturable = false;
    r->host_reads = flags[i];
    r->why = why[i];
  }
  free(flags), free(why);
  return st;
}

int cu_graph_uncaptured(const cu_state *s, const h3_graph **graphs, const h3_op **why, int max) {
  int n = 0;
  for (int i = 0; s->graphs && !s->no_graphs && i < s->graphs->n; i++) {
    const graph_rec *r = s->graphs->recs[i];
    if (!r->host_reads || r->runs < 1) continue;
    if (n < max) graphs[n] = (const h3_graph *)r->key, why[n] = r->why;
    n++;
  }
  return n;
}

void cu_graphs_free(cu_state *s) {
  cu_graphs *g = s->graphs;
  if (!g) return;
  if (g->capturing) {
    cudaGraph_t graph = NULL;
    if (cudaStreamEndCapture(s->stream, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    g->capturing = NULL;
  }
  for (int i = 0; i < g->n; i++) {
    rec_reset(s, g->recs[i]);
    free(g->recs[i]->in_ptrs);
    free(g->recs[i]);
  }
  free(g->recs);
  free(g);
  s->graphs = NULL;
}
