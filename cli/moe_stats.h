/* moe_stats.h: h3exec --moe-stats: how many distinct experts each execution of a `moe` op
 * touches (experts that at least one of its rows names: their weights are read), grouped by
 * the op's row count (M3.1: a decode step of C sequences has C rows, a DSpark verify C (gamma + 1),
 * a prefill chunk prompt_len). The ids (operand 3) are copied to the host after each moe op
 * (h3_runtime_options.observe), so no call runs as a CUDA graph while it is on: a measurement
 * of routing, not of time. Ids outside [0, E) (-1: no expert) count for nothing. */
#ifndef H3_CLI_MOE_STATS_H
#define H3_CLI_MOE_STATS_H

#include "h3/backend.h"
#include "h3/support.h"

#include <stdio.h>

typedef struct moe_stats moe_stats;

/* NULL after reporting (out of memory). */
moe_stats *moe_stats_new(h3_backend *b, h3_diag *d);
void moe_stats_free(moe_stats *x);
/* Drops what was counted (h3_runtime_options.observe_reset: the runtime's statistics were
 * reset after a warm-up; ctx: the moe_stats). */
void moe_stats_reset(void *ctx);
/* The h3_runtime_options.observe hook (ctx: the moe_stats). */
h3_status moe_stats_observe(void *ctx, const h3_op *op, const h3_tensor *in, int n_in,
                            const h3_tensor *out, int n_out, h3_diag *d);
/* "=== moe experts touched ===", then a line per row count: calls, mean / min / max distinct
 * experts of E per call; "(no moe op ran)" when none did. */
void moe_stats_print(FILE *out, const moe_stats *x);

#endif
