/* stream.h: weights streamed from host memory through a ring of device slots, for the
 * executor (runtime/exec.c) under a device-memory budget (h3_runtime_options.device_memory,
 * h3exec --device-memory). Internal to the runtime.
 *
 * What streams (h3_stream_find, runtime/stream_find.c, a pure function of the IR): a value V
 * streams when it is a stacked parameter, or a load-time result (the --int8 codes and
 * scales of one), whose every use is `index(V, %i) {offset = o}` with %i the counter of the
 * loop directly around the index, rows [o, o + count) inside the stack; of the stack heights
 * found, the one with the most bytes is kept (the H3 `trunk` of 50 blocks, not the 2-block
 * refiner; Cache-DiT's trunk.front and trunk.rest loops read rows [0, 1) and [1, 50) of the
 * same stacks). One block is row r of every streamed value, laid out in a slot at 256-byte
 * aligned offsets.
 *
 * At run time (h3_stream_*, runtime/stream.c): every streamed value lives whole in host
 * memory (the weight store's buffer pinned in place, or a pinned copy of what the device
 * made or the host quantized); blocks [0, R) are copied once into a resident buffer, blocks
 * [R, L) through a ring of N slots (the residency plan, include/h3/residency.h), block r in
 * slot (r - R) % N: on the first iteration of a streamed loop its first N streamed blocks are
 * queued (behind the resident blocks' compute); the iteration of block r >= R waits for its
 * slot's fill, runs, and then queues block r + N of the loop into the slot it frees. Every
 * copy is waited for inside the pass, so a pass starts and ends with no copy in flight: a
 * CUDA graph of the step holds the copies as nodes and replays them. The `index` view of a
 * streamed value points into the resident buffer or the slot (h3_stream_row).
 */
#ifndef H3_STREAM_H
#define H3_STREAM_H

#include "h3/backend.h"
#include "h3/residency.h"

typedef struct {
  const h3_value *v; /* a stacked parameter, or a load-time result */
  int64_t row_bytes; /* one block's rows of it */
  int64_t offset;    /* its place in a slot */
} h3_stream_value;

/* A loop whose counter indexes the streamed values: iteration k reads block first + k. */
typedef struct {
  const h3_op *op;
  int64_t first, count;
} h3_stream_loop;

typedef struct {
  int n_loops;
  h3_stream_loop *loops;
  int64_t layers;      /* the streamed stacks' height (blocks) */
  int64_t block_bytes; /* a slot */
  int n;
  h3_stream_value *v;
} h3_stream_set;

/* The streamed values of m (empty set when none). H3_ERR only when out of memory. */
h3_status h3_stream_find(const h3_module *m, h3_stream_set *out, h3_diag *d);
void h3_stream_set_free(h3_stream_set *s);
/* Index of v in s, or -1. */
int h3_stream_set_index(const h3_stream_set *s, const h3_value *v);
/* The device bytes of m's weights that stay resident besides the streamed ones: parameters
 * read by anything but load-time ops, and load-time results (once per parameter and
 * rotate) that do not stream. */
int64_t h3_stream_fixed_weight_bytes(const h3_module *m, const h3_stream_set *s);

/* The executor's side. */
typedef struct h3_stream h3_stream;

/* What the report prints. */
typedef struct {
  h3_residency plan;
  int64_t layers, block_bytes, budget, fixed_bytes;
  double block_copy_seconds; /* one block's host -> device copy, timed at start */
  int64_t peak_device_bytes; /* the backend's (memory_peak), -1 when it does not say */
  /* the compute's waits for the ring since start, as the backend timed them
     (h3_backend_ext.ring_stalls: device seconds, waits timed; -1 waits: it times none) */
  double stall_seconds;
  int64_t stall_waits;
} h3_stream_info;

/* The streaming of module m on backend b under `budget` bytes, besides `arena_bytes` of
 * activation arenas and the backend's reserve (cuda: H3_DEVICE_RESERVE, default 1 GiB, for
 * its context, workspaces and unplanned values; cpu: 0). *out is NULL without an error
 * when every block fits (nothing streams); *planned gets the plan either way. A budget too
 * small is an error naming the smallest that runs. */
h3_status h3_stream_new(const h3_module *m, h3_backend *b, int64_t budget, int64_t arena_bytes,
                        h3_stream **out, h3_stream_info *planned, h3_diag *d);
void h3_stream_free(h3_stream *st);
/* Whether v streams (its uses are index views that h3_stream_row serves). */
bool h3_stream_holds(const h3_stream *st, const h3_value *v);
/* Whether parameter p streams or feeds a load-time result that does (loaded first). */
bool h3_stream_feeds(const h3_stream *st, const h3_param *p);
/* v's whole stack is at `host` in host memory, which outlives st (the weight store): pinned
 * in place when the backend can and the buffer has pages of its own (32 MiB and more), else
 * copied into pinned memory of st's. */
h3_status h3_stream_hold(h3_stream *st, const h3_value *v, void *host, h3_diag *d);
/* v's host copy in pinned memory of st's, for the caller to fill (NULL after reporting). */
void *h3_stream_host(h3_stream *st, const h3_value *v, h3_diag *d);
/* v's whole stack is at `dev` in backend memory: copied into its host copy. */
h3_status h3_stream_take(h3_stream *st, const h3_value *v, const void *dev, h3_diag *d);
/* The load-time op on p (the --int8 weight quantizer) when all its results stream, else NULL:
 * such a parameter is quantized on the host (h3_stream_quantize) and never occupies the
 * device whole. */
const h3_op *h3_stream_quantizer(const h3_stream *st, const h3_param *p);
/* Runs quantizer op on p's whole stack at `host` (p's layout, host memory) with the CPU
 * reference (bitwise the device's kernel, docs/int8.md), into its results' host copies. */
h3_status h3_stream_quantize(h3_stream *st, const h3_op *op, const void *host, h3_diag *d);
/* After every streamed value is held or taken: allocates the resident blocks and the ring,
 * copies the resident blocks (timing them). *device_bytes += what it allocated. */
h3_status h3_stream_start(h3_stream *st, size_t *device_bytes, h3_diag *d);
/* Where row `row` (a block) of streamed value v is on the device now. */
void *h3_stream_row(const h3_stream *st, const h3_value *v, int64_t row);
/* Around iteration k of loop op (nothing unless op is a streamed loop). */
h3_status h3_stream_iter_begin(h3_stream *st, const h3_op *op, int64_t k, h3_diag *d);
h3_status h3_stream_iter_end(h3_stream *st, const h3_op *op, int64_t k, h3_diag *d);
/* After a sync (the end of a run): the info, with the ring's waits timed so far. */
void h3_stream_get_info(h3_stream *st, h3_stream_info *out);

#endif
