/* test_gpu_collectives.c: the collective ops on the cuda backend as the one rank of an NCCL
 * communicator (h3_backend_rank_id, h3_backend_join_ranks with ranks = 1): shard, all_gather,
 * all_to_all along several axes and all_reduce in each dtype path (native f32 / f64 / i32,
 * bf16 through the fp32 sum, f32 partial sums rounded to bf16), each against the CPU
 * reference, bitwise (at one rank NCCL's sum is the operand itself; the copies and the one
 * rounding are exact). This runs the NCCL calls and the box copies of cuda_collective.c on
 * one GPU; what only several GPUs show (the exchange between ranks, NCCL's order of
 * addition, moe {ranks > 1}) is the `collectives` section of tests/gpu/run_all.sh on a
 * machine with 2 GPUs. Label gpu; exit 77 when no GPU is usable.
 */
#include "gpu_common.h"
#include "h3/cuda_backend.h"
#include "h3/op_registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const module_text =
    "module @c config \"test\" {\n"
    "  graph @g(%x: bf16[8, 4, 16], %p: f32[6, 10], %i: i32[4, 6], %w: f64[3, 5]) -> (y: f32[6, 10]) {\n"
    "    %s0 = shard(%x) {ranks = 1, axis = 0} : bf16[8, 4, 16]\n"
    "    %s1 = shard(%x) {ranks = 1, axis = 1} : bf16[8, 4, 16]\n"
    "    %g0 = all_gather(%x) {ranks = 1, axis = 0} : bf16[8, 4, 16]\n"
    "    %g2 = all_gather(%x) {ranks = 1, axis = 2} : bf16[8, 4, 16]\n"
    "    %a10 = all_to_all(%x) {ranks = 1, split_axis = 1, concat_axis = 0} : bf16[8, 4, 16]\n"
    "    %a01 = all_to_all(%x) {ranks = 1, split_axis = 0, concat_axis = 1} : bf16[8, 4, 16]\n"
    "    %rf = all_reduce(%p) {ranks = 1} : f32[6, 10]\n"
    "    %rb = all_reduce(%x) {ranks = 1} : bf16[8, 4, 16]\n"
    "    %rfb = all_reduce(%p) {ranks = 1, dtype = bf16} : bf16[6, 10]\n"
    "    %ri = all_reduce(%i) {ranks = 1} : i32[4, 6]\n"
    "    %rd = all_reduce(%w) {ranks = 1} : f64[3, 5]\n"
    "    return %rf\n"
    "  }\n"
    "}\n";

/* Runs op on b (operands: the graph inputs in dev/host) and on the CPU; bitwise equal. */
static void check(h3_backend *b, const h3_op *op, const h3_graph *g, const gpu_buf *dev, void *const *host) {
  h3_tensor din[1], hin[1];
  int k = 0;
  while (g->inputs[k] != op->operands[0]) k++;
  din[0] = (h3_tensor){op->operands[0]->type, dev[k].p};
  hin[0] = (h3_tensor){op->operands[0]->type, host[k]};
  const h3_type *t = &op->results[0]->type;
  size_t bytes = (size_t)h3_type_bytes(t);
  void *got = malloc(bytes), *want = malloc(bytes);
  gpu_buf out = {0};
  bool guards = false;
  h3_diag d;
  h3_diag_init(&d);
  bool ok = got && want && gpu_buf_alloc(b, &out, bytes, &d) && gpu_buf_poison(b, &out, &d);
  h3_tensor dout = {*t, out.p}, hout = {*t, want};
  ok = ok && b->ops->run_op(b, op, din, 1, &dout, 1, &d) == H3_OK && b->ops->sync(b, &d) == H3_OK &&
       gpu_buf_download(b, &out, got, &guards, &d) && h3_cpu_run_op(op, hin, 1, &hout, 1, 1, 0, &d) == H3_OK;
  if (!ok) h3_diag_print(&d, stderr);
  gpu_check(ok && guards && !memcmp(got, want, bytes), "%s -> %s: equal to the cpu backend%s",
            op->results[0]->name ? op->results[0]->name : h3_opcode_name(op->code), h3_dtype_name(t->dtype),
            ok && !guards ? " (a guard byte changed)" : "");
  gpu_buf_free(b, &out);
  free(got);
  free(want);
  h3_diag_free(&d);
}

int main(void) {
  gpu_require();
  h3_diag d;
  h3_diag_init(&d);
  h3_backend_options bo = {.seed = 1};
  h3_backend *b = h3_backend_create("cuda", &bo, &d);
  h3_rank_id id;
  h3_module *m = h3_module_parse("collectives.ir", module_text, strlen(module_text), &d);
  bool ready = b && m && h3_backend_rank_id(b, &id, &d) == H3_OK && h3_backend_join_ranks(b, 1, 0, &id, &d) == H3_OK;
  if (!ready) h3_diag_print(&d, stderr);
  gpu_check(ready, "cuda backend joined an NCCL communicator of one rank");
  const h3_graph *g = ready ? m->graphs[0] : NULL;
  gpu_buf dev[4] = {0};
  void *host[4] = {0};
  gpu_rng r;
  gpu_rng_seed(&r, 7);
  for (int i = 0; g && i < g->n_inputs; i++) {
    const h3_type *t = &g->inputs[i]->type;
    host[i] = gpu_host_random(&r, t, -3, 3, 1000);
    if (!host[i] || !gpu_buf_alloc(b, &dev[i], (size_t)h3_type_bytes(t), &d) ||
        !gpu_buf_upload(b, &dev[i], host[i], &d)) {
      h3_diag_print(&d, stderr);
      gpu_check(false, "uploading input %d", i);
      g = NULL;
    }
  }
  for (const h3_op *op = g ? g->body.first : NULL; op && op->code != H3_OP_RETURN; op = op->next)
    check(b, op, g, dev, host);
  for (int i = 0; i < 4; i++) {
    if (dev[i].base) gpu_buf_free(b, &dev[i]);
    free(host[i]);
  }
  h3_module_free(m);
  h3_backend_free(b);
  h3_diag_free(&d);
  printf("test_gpu_collectives: %d passed, %d failed\n", gpu_passed, gpu_failed);
  return gpu_failed ? 1 : 0;
}
