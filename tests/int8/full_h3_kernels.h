/* full_h3_kernels.h: what the int8 kernel tests share to compile the real kernels of the
 * full-config H3 with NVRTC: run the pipeline of given pass options, emit the kernel of
 * every kernel op a test picks, and append each distinct kernel source once to one
 * translation unit. Test-only, header-only; include after cg_test.h (cg_kernel_ops). */
#ifndef H3_TESTS_FULL_H3_KERNELS_H
#define H3_TESTS_FULL_H3_KERNELS_H

#include "h3/codegen.h"
#include "h3/frontend.h"
#include "h3/passes.h"

#include <stdio.h>
#include <string.h>

/* Whether the test wants op's kernel; `seen` then gets each emitted kernel (checks). */
typedef bool (*fk_pick_fn)(const h3_op *op);
typedef void (*fk_seen_fn)(const h3_op *op, const h3_kernel *k, void *ctx);

/* Emits, at `tier`, the kernels of the picked ops of the full H3 after the pipeline of o,
 * appending each distinct kernel source (by name) to src and counting those in *distinct;
 * returns how many picked ops were emitted (0 when the model does not compile, printed). */
static inline int full_h3_kernels(const h3_pass_options *o, h3_tier tier, fk_pick_fn pick,
                                  fk_seen_fn seen, void *ctx, h3_arena *a, h3_strbuf *src,
                                  int *distinct) {
  h3_diag d;
  h3_diag_init(&d);
  h3_frontend_options fo = {.config = "full"};
  h3_module *m = h3_frontend_load(H3_SOURCE_DIR "/models/minimax_h3.g", &fo, &d);
  int emitted = 0;
  if (m && h3_pass_pipeline_run(m, o, &d) == H3_OK) {
    cg_oplist ops = cg_kernel_ops(m);
    for (int i = 0; i < ops.n; i++) {
      const h3_op *op = ops.ops[i];
      if (!pick(op)) continue;
      h3_kernel k;
      if (h3_codegen_emit_op(op, tier, a, &k, &d) != H3_OK) break;
      emitted++;
      if (seen) seen(op, &k, ctx);
      if (src->data && strstr(src->data, k.name)) continue;
      h3_strbuf_append(src, k.source);
      (*distinct)++;
    }
    free(ops.ops);
  }
  if (d.errors) h3_diag_print(&d, stderr);
  h3_module_free(m);
  h3_diag_free(&d);
  return emitted;
}

#endif
