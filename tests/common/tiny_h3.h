/* tiny_h3.h: the tiny MiniMax-H3 (models/minimax_h3.g, config "tiny") run through the pass
 * pipeline, for the end-to-end tests of one pass: compile it at a tier with some passes
 * disabled (e.g. the pass under test: the unfused plan) and compare the runs.
 * Header-only (one static function); needs H3_SOURCE_DIR. */
#ifndef H3_TESTS_TINY_H3_H
#define H3_TESTS_TINY_H3_H

#include "h3/frontend.h"
#include "h3/passes.h"

#include <stdio.h>

/* The tiny H3 after the default pipeline of `tier` without the passes in `disabled` (a
 * comma list, NULL: none), verified after each pass. NULL after printing the diagnostics. */
static h3_module *tiny_h3_compile(h3_tier tier, const char *disabled) {
  h3_frontend_options fo = {"tiny", 0, NULL};
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_frontend_load(H3_SOURCE_DIR "/models/minimax_h3.g", &fo, &d);
  h3_pass_options po = h3_pass_options_default();
  po.tier = tier;
  po.disabled = disabled;
  po.verify_each = true;
  if (m && h3_pass_pipeline_run(m, &po, &d) != H3_OK) {
    h3_module_free(m);
    m = NULL;
  }
  if (!m) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return m;
}

#endif
