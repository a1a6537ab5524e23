/* plan_build.c: h3_plan_build (codegen over an optimised module) and
 * h3_plan_compile_kernels (NVRTC through the kernel cache).
 *
 * The builder walks every graph's ops in order (not into fused regions: a fused op is one
 * kernel). A kernel op gets its kernel emitted; identical kernels (same source, hence the
 * same name) are kept once and counted. Standalone ops use the "exact" tier: they round
 * once anyway, and their arithmetic is fixed by the _rn intrinsics. A library, host or
 * deferred op gets a library-call record named "<kind>_<N>". Either way the op's `kernel`
 * attribute is set to the name, so the runtime finds it from the IR. Kernels are then
 * grouped by tier into translation units of at most kernels_per_tu, in plan order.
 */
#include "plan_internal.h"
#include "h3/codegen.h"
#include "h3/kernels.h"
#include "h3/op_registry.h"

#include <cublas_api.h>
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

static h3_span no_span(void) {
  h3_span s;
  memset(&s, 0, sizeof s);
  return s;
}

typedef struct {
  h3_plan *p;
  h3_module *m;
  const h3_graph *g;
  h3_diag *d;
  int cap_kernels, cap_libcalls;
  int n_lib_kind[4];
  h3_status st;
} build_ctx;

static void *grow(h3_arena *a, void *arr, int n, int *cap, size_t elem) {
  if (n < *cap) return arr;
  int nc = *cap ? *cap * 2 : 32;
  void *na = h3_arena_alloc(a, elem * (size_t)nc);
  if (!na) return NULL;
  if (n) memcpy(na, arr, elem * (size_t)n);
  *cap = nc;
  return na;
}

static h3_status oom(build_ctx *c) {
  if (c->st == H3_OK) h3_diag_error(c->d, no_span(), H3_HINT_OOM, "out of memory while building the plan");
  c->st = H3_ERR;
  return H3_ERR;
}

static void attr_text(h3_strbuf *b, const h3_attr *a) {
  switch (a->kind) {
  case H3_ATTR_INT: h3_strbuf_printf(b, "%lld", (long long)a->i); break;
  case H3_ATTR_FLOAT: h3_strbuf_double(b, a->f); break;
  case H3_ATTR_STRING: h3_strbuf_append(b, a->s ? a->s : ""); break;
  case H3_ATTR_DTYPE: h3_strbuf_append(b, h3_dtype_name((h3_dtype)a->i)); break;
  case H3_ATTR_TIER: h3_strbuf_append(b, h3_tier_name((h3_tier)a->i)); break;
  case H3_ATTR_INTS:
  case H3_ATTR_FLOATS:
    h3_strbuf_append(b, "[");
    for (int i = 0; i < a->n; i++) {
      if (i) h3_strbuf_append(b, ", ");
      if (a->kind == H3_ATTR_INTS) h3_strbuf_printf(b, "%lld", (long long)a->ints[i]);
      else h3_strbuf_double(b, a->floats[i]);
    }
    h3_strbuf_append(b, "]");
    break;
  }
}

static h3_status add_libcall(build_ctx *c, h3_op *op, const char *kind) {
  h3_plan *p = c->p;
  static const char *const kinds[4] = {"cublaslt", "attention", "host", "deferred"};
  int ki = 0;
  while (ki < 3 && strcmp(kinds[ki], kind) != 0) ki++;
  const char *name = h3_arena_printf(&p->arena, "%s_%d", kind, c->n_lib_kind[ki]++);
  p->libcalls = grow(&p->arena, p->libcalls, p->n_libcalls, &c->cap_libcalls, sizeof(h3_plan_libcall));
  if (!name || !p->libcalls) return oom(c);
  h3_plan_libcall *lc = &p->libcalls[p->n_libcalls++];
  memset(lc, 0, sizeof *lc);
  lc->name = name;
  lc->kind = kind;
  lc->op = h3_opcode_name(op->code);
  lc->graph = c->g->name;
  lc->n_operands = op->n_operands;
  lc->n_results = op->n_results;
  lc->operands = h3_arena_alloc(&p->arena, sizeof(h3_type) * (size_t)(op->n_operands + 1));
  lc->results = h3_arena_alloc(&p->arena, sizeof(h3_type) * (size_t)(op->n_results + 1));
  lc->attrs = h3_arena_alloc(&p->arena, sizeof(h3_plan_kv) * (size_t)(op->n_attrs + 1));
  if (!lc->operands || !lc->results || !lc->attrs) return oom(c);
  for (int i = 0; i < op->n_operands; i++) lc->operands[i] = op->operands[i]->type;
  for (int i = 0; i < op->n_results; i++) lc->results[i] = op->results[i]->type;
  for (int i = 0; i < op->n_attrs; i++) {
    if (strcmp(op->attrs[i].name, "kernel") == 0) continue;
    h3_strbuf b;
    h3_strbuf_init(&b);
    attr_text(&b, &op->attrs[i]);
    const char *v = b.oom ? NULL : h3_arena_strdup(&p->arena, b.data ? b.data : "");
    h3_strbuf_free(&b);
    if (!v) return oom(c);
    lc->attrs[lc->n_attrs].key = op->attrs[i].name;
    lc->attrs[lc->n_attrs++].value = v;
  }
  h3_op_set_attr(c->m, op, h3_attr_string(c->m, "kernel", name));
  return H3_OK;
}

static h3_status add_kernel(build_ctx *c, h3_op *op) {
  h3_plan *p = c->p;
  h3_kernel k;
  if (h3_codegen_emit_op(op, H3_TIER_EXACT, &p->arena, &k, c->d) != H3_OK) {
    c->st = H3_ERR;
    return H3_ERR;
  }
  int found = h3_plan_find_kernel(p, k.name);
  if (found >= 0) {
    p->kernels[found].uses++;
  } else {
    p->kernels = grow(&p->arena, p->kernels, p->n_kernels, &c->cap_kernels, sizeof(h3_plan_kernel));
    if (!p->kernels) return oom(c);
    h3_plan_kernel *pk = &p->kernels[p->n_kernels++];
    pk->k = k;
    pk->tu = -1;
    pk->uses = 1;
  }
  h3_op_set_attr(c->m, op, h3_attr_string(c->m, "kernel", k.name));
  return H3_OK;
}

static int visit(h3_op *op, void *ctx) {
  build_ctx *c = ctx;
  if (op->parent && op->parent->parent && op->parent->parent->code == H3_OP_FUSED) return 0;
  h3_exec_kind ek = h3_exec_classify(op);
  if (ek == H3_EXEC_KERNEL) return add_kernel(c, op) != H3_OK && c->d->errors > 50;
  const char *lib = h3_exec_library_kind(op);
  if (lib) return add_libcall(c, op, lib) != H3_OK;
  return 0;
}

static h3_status build_weights(build_ctx *c) {
  h3_plan *p = c->p;
  int64_t n = 0;
  for (int i = 0; i < c->m->n_params; i++) {
    const h3_param *pa = c->m->params[i];
    int64_t members = 1;
    for (int g = 0; g < pa->group_dims && g < pa->type.rank; g++) members *= pa->type.dims[g];
    n += members;
  }
  p->weights = h3_arena_alloc(&p->arena, sizeof(h3_plan_weight) * (size_t)(n + 1));
  if (!p->weights) return oom(c);
  for (int i = 0; i < c->m->n_params; i++) {
    const h3_param *pa = c->m->params[i];
    int gd = pa->group_dims < pa->type.rank ? pa->group_dims : pa->type.rank;
    int64_t members = 1, inner = gd >= 2 ? pa->type.dims[1] : 1;
    for (int g = 0; g < gd; g++) members *= pa->type.dims[g];
    h3_type mt = pa->type;
    mt.rank = pa->type.rank - gd;
    for (int k = 0; k < mt.rank; k++) mt.dims[k] = pa->type.dims[k + gd];
    for (int64_t j = 0; j < members; j++) {
      h3_strbuf b;
      h3_strbuf_init(&b);
      int64_t outer = gd >= 1 ? j / inner + pa->group_base : 0, in = gd >= 2 ? j % inner : 0;
      for (const char *s = pa->name; *s; s++) {
        if (gd >= 1 && strncmp(s, "{}", 2) == 0) {
          h3_strbuf_printf(&b, "%lld", (long long)outer);
          s++;
        } else if (gd >= 2 && strncmp(s, "{e}", 3) == 0) {
          h3_strbuf_printf(&b, "%lld", (long long)in);
          s += 2;
        } else {
          h3_strbuf_appendn(&b, s, 1);
        }
      }
      h3_plan_weight *w = &p->weights[p->n_weights++];
      w->name = b.oom ? NULL : h3_arena_strdup(&p->arena, b.data ? b.data : "");
      h3_strbuf_free(&b);
      if (!w->name) return oom(c);
      w->type = mt;
      w->bytes = h3_type_bytes(&mt);
      w->param = pa->name;
      w->index = j;
      p->weight_bytes += w->bytes;
    }
  }
  return H3_OK;
}

static h3_status build_tus(build_ctx *c, int per_tu) {
  h3_plan *p = c->p;
  int cap = 0;
  for (int t = 0; t < 2; t++) {
    h3_tier tier = t == 0 ? H3_TIER_EXACT : H3_TIER_LOSSLESS;
    h3_plan_tu *cur = NULL;
    for (int i = 0; i < p->n_kernels; i++) {
      if (p->kernels[i].k.tier != tier) continue;
      if (!cur || cur->n_kernels == per_tu) {
        p->tus = grow(&p->arena, p->tus, p->n_tus, &cap, sizeof(h3_plan_tu));
        if (!p->tus) return oom(c);
        cur = &p->tus[p->n_tus++];
        memset(cur, 0, sizeof *cur);
        cur->tier = tier;
        cur->options = (const char **)h3_nvrtc_tier_options(tier, &cur->n_options);
        cur->kernels = h3_arena_alloc(&p->arena, sizeof(int) * (size_t)per_tu);
        if (!cur->kernels) return oom(c);
      }
      p->kernels[i].tu = p->n_tus - 1;
      cur->kernels[cur->n_kernels++] = i;
    }
  }
  return H3_OK;
}

static h3_status build_header(build_ctx *c, const h3_plan_options *o) {
  h3_plan *p = c->p;
  h3_module *m = c->m;
  h3_arena *a = &p->arena;
  p->h3_version = H3_VERSION;
  p->model = h3_arena_strdup(a, m->model ? m->model : "");
  p->source = h3_arena_strdup(a, o && o->source_file ? o->source_file : (m->source ? m->source : ""));
  p->config = h3_arena_strdup(a, m->config ? m->config : "");
  p->quality = o ? o->quality : H3_TIER_LOSSLESS;
  p->arch = H3_TARGET_ARCH;
  p->cuda_version = h3_arena_printf(a, "%d.%d", CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);
  p->nvrtc_version = h3_arena_strdup(a, h3_nvrtc_version());
  p->cublaslt_version = h3_arena_printf(a, "%d.%d.%d", CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
  p->key_scheme = H3_PLAN_KEY_SCHEME;
  if (!p->model || !p->source || !p->config || !p->cuda_version || !p->nvrtc_version ||
      !p->cublaslt_version)
    return oom(c);
  p->n_config = m->n_config;
  p->config_entries = h3_arena_alloc(a, sizeof(h3_config_entry) * (size_t)(m->n_config + 1));
  if (!p->config_entries) return oom(c);
  for (int i = 0; i < m->n_config; i++) {
    p->config_entries[i].key = h3_arena_strdup(a, m->config_entries[i].key);
    p->config_entries[i].value = m->config_entries[i].value;
    if (!p->config_entries[i].key) return oom(c);
  }
  int nf = o ? o->n_flags : 0, np = o ? o->n_passes : 0;
  p->flags = h3_arena_alloc(a, sizeof(char *) * (size_t)(nf + 1));
  p->passes = h3_arena_alloc(a, sizeof(char *) * (size_t)(np + 1));
  if (!p->flags || !p->passes) return oom(c);
  for (int i = 0; i < nf; i++)
    if (!(p->flags[p->n_flags++] = h3_arena_strdup(a, o->flags[i]))) return oom(c);
  for (int i = 0; i < np; i++)
    if (!(p->passes[p->n_passes++] = h3_arena_strdup(a, o->passes[i]))) return oom(c);
  return H3_OK;
}

static h3_status build_program(build_ctx *c) {
  h3_plan *p = c->p;
  h3_module *m = c->m;
  p->memory = h3_arena_alloc(&p->arena, sizeof(h3_plan_memory) * (size_t)(m->n_graphs + 1));
  p->graphs = h3_arena_alloc(&p->arena, sizeof(char *) * (size_t)(m->n_graphs + 1));
  if (!p->memory || !p->graphs) return oom(c);
  for (int i = 0; i < m->n_graphs; i++) {
    h3_graph *g = m->graphs[i];
    int64_t arena = -1, peak = -1;
    for (int j = 0; j < g->n_attrs; j++) {
      if (g->attrs[j].kind != H3_ATTR_INT) continue;
      if (strcmp(g->attrs[j].name, "arena_bytes") == 0) arena = g->attrs[j].i;
      if (strcmp(g->attrs[j].name, "peak_bytes") == 0) peak = g->attrs[j].i;
    }
    h3_plan_memory *mem = &p->memory[p->n_memory++];
    mem->graph = g->name;
    mem->arena_bytes = arena;
    mem->peak_bytes = peak;
    p->graphs[p->n_graphs++] = g->name;
    if (!p->entry && g->kind == H3_GRAPH_PROGRAM) p->entry = g->name;
  }
  return H3_OK;
}

h3_status h3_plan_build(h3_plan **out, h3_module *m, const h3_plan_options *o, h3_diag *d) {
  *out = NULL;
  h3_plan *p = calloc(1, sizeof *p);
  if (!p) {
    h3_module_free(m);
    h3_diag_error(d, no_span(), H3_HINT_OOM, "out of memory while building the plan");
    return H3_ERR;
  }
  h3_arena_init(&p->arena);
  p->module = m;
  p->file = "<plan>";
  build_ctx c;
  memset(&c, 0, sizeof c);
  c.p = p;
  c.m = m;
  c.d = d;
  c.st = H3_OK;
  int per_tu = o && o->kernels_per_tu > 0 ? o->kernels_per_tu : 32;
  if (build_header(&c, o) != H3_OK || build_weights(&c) != H3_OK || build_program(&c) != H3_OK)
    goto fail;
  for (int i = 0; i < m->n_graphs; i++) {
    c.g = m->graphs[i];
    h3_region_walk(&m->graphs[i]->body, visit, &c);
  }
  if (c.st != H3_OK || build_tus(&c, per_tu) != H3_OK) goto fail;
  const char *prelude = h3_kernel_prelude();
  if (!prelude) {
    oom(&c);
    goto fail;
  }
  p->prelude = prelude;
  h3_sha256_hex(prelude, strlen(prelude), p->prelude_sha256);
  h3_strbuf ir;
  h3_strbuf_init(&ir);
  h3_module_print(&ir, m);
  p->ir_text = ir.oom ? NULL : h3_arena_strdup(&p->arena, ir.data ? ir.data : "");
  h3_strbuf_free(&ir);
  if (!p->ir_text) {
    oom(&c);
    goto fail;
  }
  *out = p;
  return H3_OK;
fail:
  h3_plan_free(p);
  return H3_ERR;
}
