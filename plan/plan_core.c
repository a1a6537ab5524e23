/* plan_core.c: what every holder of a plan does with it: find its kernels and library
 * calls by name, compile its translation units (NVRTC through the kernel cache), apply the
 * load-time rules, free it.
 */
#include "h3/int8.h"
#include "h3/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const h3_span no_span = {0};

int h3_plan_find_kernel(const h3_plan *p, const char *name) {
  for (int i = 0; i < p->n_kernels; i++)
    if (strcmp(p->kernels[i].k.name, name) == 0) return i;
  return -1;
}

const h3_plan_libcall *h3_plan_find_libcall(const h3_plan *p, const char *name) {
  for (int i = 0; i < p->n_libcalls; i++)
    if (strcmp(p->libcalls[i].name, name) == 0) return &p->libcalls[i];
  return NULL;
}

h3_status h3_plan_compile_kernels(h3_plan *p, h3_diag *d) {
  if (p->n_tus == 0) return H3_OK;
  h3_nvrtc_job *jobs = calloc((size_t)p->n_tus, sizeof *jobs);
  char **srcs = calloc((size_t)p->n_tus, sizeof *srcs);
  char **labels = calloc((size_t)p->n_tus, sizeof *labels);
  h3_status st = H3_OK;
  if (!jobs || !srcs || !labels) st = H3_ERR;
  for (int i = 0; st == H3_OK && i < p->n_tus; i++) {
    const h3_plan_tu *u = &p->tus[i];
    h3_strbuf b;
    h3_strbuf_init(&b);
    h3_strbuf_append(&b, p->prelude);
    for (int j = 0; j < u->n_kernels; j++) h3_strbuf_append(&b, p->kernels[u->kernels[j]].k.source);
    srcs[i] = b.oom ? NULL : b.data;
    if (!srcs[i]) {
      h3_strbuf_free(&b);
      st = H3_ERR;
      break;
    }
    labels[i] = malloc(48);
    if (!labels[i]) {
      st = H3_ERR;
      break;
    }
    snprintf(labels[i], 48, "h3_tu%d_%s.cu", i, h3_tier_name(u->tier));
    jobs[i].label = labels[i];
    jobs[i].source = srcs[i];
    jobs[i].n_options = u->n_options;
    jobs[i].options = u->options;
  }
  if (st != H3_OK) {
    h3_diag_error(d, no_span, H3_HINT_OOM, "out of memory preparing the kernels of %s", p->file);
  } else {
    h3_kernel_cache cache;
    h3_kernel_cache_init(&cache, d);
    st = h3_nvrtc_compile(jobs, p->n_tus, &cache, 2, d);
    for (int i = 0; i < p->n_tus; i++) {
      free(p->tus[i].cubin);
      p->tus[i].cubin = jobs[i].cubin;
      p->tus[i].cubin_len = jobs[i].cubin_len;
      p->tus[i].cache_hit = jobs[i].cache_hit;
      jobs[i].cubin = NULL;
    }
  }
  for (int i = 0; srcs && labels && i < p->n_tus; i++) {
    free(srcs[i]);
    free(labels[i]);
  }
  free(srcs);
  free(labels);
  free(jobs);
  return st;
}

void h3_plan_free(h3_plan *p) {
  if (!p) return;
  for (int i = 0; i < p->n_tus; i++) free(p->tus[i].cubin);
  h3_module_free(p->module);
  h3_arena_free(&p->arena);
  free(p);
}

h3_status h3_plan_apply_load_rules(h3_plan *p, bool *int8_override, h3_diag *d) {
  return h3_int8_apply_env(p->module, int8_override, d);
}
