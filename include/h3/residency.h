/* residency.h: which weights stay in device memory under a budget (h3exec --device-memory),
 * and which blocks of a loop stream from host memory through a ring of slots.
 *
 * The executor streams one loop of blocks (the H3 `trunk`): every stacked weight that the
 * loop body reads only as row i of the stack (`index(@W, %i)`, i the loop counter) is a
 * streamed weight; one block's rows of all of them is a block (`block_bytes`, laid out in
 * a slot). Blocks [0, resident_blocks) live on the device; blocks [resident_blocks, layers)
 * are copied from pinned host memory into a ring of `ring_slots` slots, block t into slot
 * (t - resident_blocks) % ring_slots, `ring_slots - 1` blocks ahead of the one computing.
 * Everything else (other weights, activation arenas, the backend's reserve) is `fixed`.
 * The plan is a pure function of these numbers (h3_residency_plan), tested on the CPU.
 */
#ifndef H3_RESIDENCY_H
#define H3_RESIDENCY_H

#include "h3/support.h"

#include <stdbool.h>
#include <stdint.h>

/* Slots the ring aims for: block i computes while blocks i+1 and i+2 copy. A tight
 * budget gets fewer (2: one block ahead; 1: no overlap, but it runs). */
#define H3_RING_SLOTS 3

typedef struct {
  int64_t layers;      /* blocks of the streamed loop (its count); 0: nothing streamable */
  int64_t block_bytes; /* one block's streamed weights (the slot size) */
  int64_t fixed_bytes; /* everything resident besides the blocks */
  int64_t budget;      /* device bytes allowed; <= 0: no budget (all resident) */
} h3_residency_in;

typedef struct {
  int64_t resident_blocks; /* blocks [0, resident_blocks) stay on the device */
  int64_t ring_slots;      /* 0 when no block streams */
  int64_t device_bytes;    /* fixed + (resident_blocks + ring_slots) * block_bytes */
  int64_t streamed_bytes;  /* copied per pass of the loop: streamed blocks * block_bytes */
  int64_t min_budget;      /* the smallest budget that runs: fixed + one block */
} h3_residency;

/* The plan for `in`: every block resident when there is no budget or when all of them fit
 * (a budget larger than the model changes nothing); else the most resident blocks that
 * leave room for a ring of H3_RING_SLOTS slots (fewer when even 0 resident blocks leave no
 * room for it). A budget below fixed + one block is an error naming min_budget. */
h3_status h3_residency_plan(const h3_residency_in *in, h3_residency *out, h3_diag *d);

/* Parses a byte size: an integer or decimal number with an optional unit B, KiB, MiB, GiB,
 * TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000); K, M, G, T alone are the binary
 * ones ("24GiB", "24G", "1.5GiB", "25769803776"). Returns false on anything else. */
bool h3_size_parse(const char *s, int64_t *out);

/* "24.00 GiB", "512.0 MiB", "1234 bytes" into buf. */
const char *h3_size_text(int64_t bytes, char *buf, size_t n);

#endif
