/* exec_internal.h: the executor's state shared by runtime/exec.c (running graphs, loops,
 * calls) and runtime/runtime_new.c (creating a runtime: weights, load-time ops, statistics).
 * Not a public interface: include/h3/runtime.h is. */
#ifndef H3_EXEC_INTERNAL_H
#define H3_EXEC_INTERNAL_H

#include "stream.h"

#include "h3/kernel.h"
#include "h3/op_registry.h"
#include "h3/runtime.h"

typedef struct {
  h3_tensor t;
  size_t cap; /* bytes of an owned buffer; 0 when not owned */
  /* a loop counter's current value, also kept on the host so that `index` views need no
     download (downloads cannot be captured in a CUDA graph, and cost a sync) */
  int64_t host_value;
  bool host_known;
  /* a loop counter whose readers all take host_value (run_loop): its buffer is written only
     right before an index / set_index that reads it on the device after all */
  bool device_deferred;
} slot;

typedef struct {
  const h3_graph *g;
  int ready, active;
  void *arena;
  int64_t arena_bytes;
  slot *slots; /* by value id */
  void **staged; /* by input index: the callee-owned copy of a small argument (run_callee) */
} gstate;

struct h3_runtime {
  const h3_module *m;
  h3_backend *b;
  h3_runtime_options opt;
  int n_ids;
  h3_tensor *params; /* by value id (only param values set) */
  bool *borrowed;    /* by value id: params[id].data is the weight store's (host memory) */
  gstate *graphs;    /* by graph index */
  const h3_graph *top;
  int depth;
  double t0;
  size_t weight_bytes, act_bytes;
  h3_op_stat stats[H3_OPCODE_COUNT];
  h3_trace_event *ev;
  size_t n_ev, cap_ev;
  /* device trace (opt.trace_device with backend marks): events hold mark indices in ts/dur
   * until the run's final sync resolves them from ev_first on; ev_code[i] is the opcode
   * whose statistics event i adds to (-1: none) */
  bool dev_clock;
  int *ev_code;
  size_t ev_first;
  /* branches of the current / last run, and the top-level loop iteration running now */
  h3_branch_event *br;
  size_t n_br, cap_br;
  int64_t top_iter;
  /* allocations so far, and the one to fail (H3_FAULT_ALLOC, tests only; 0: none) */
  int64_t n_allocs, fault_alloc;
  /* the plan's memory figure: all parameters' bytes, all graphs' arena bytes */
  int64_t plan_weight_bytes, plan_arena_bytes;
  h3_stream *stream; /* weights streamed under opt.device_memory (runtime/stream.h), or NULL */
  h3_stream_info planned; /* the residency plan under opt.device_memory (streaming or not) */
};

/* Every buffer a run holds comes from here: the backend's allocation, or NULL as the Nth
 * call when H3_FAULT_ALLOC=N (fault injection for the tests). */
void *h3_rt_alloc(h3_runtime *rt, size_t bytes);

/* The error of a failed h3_rt_alloc: what got no memory, its size, and the plan's memory
 * figure with what to change. */
void h3_rt_oom_error(h3_runtime *rt, h3_diag *d, h3_span span, const char *what, int64_t bytes);

#endif
