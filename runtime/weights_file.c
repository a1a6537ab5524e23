/* weights_file.c: weight stores and graph boundaries as safetensors files
 * (include/h3/weights.h): loading a weights file against a module's parameters, saving
 * one, loading a graph's inputs and saving its outputs. Validation reports every dtype and
 * shape mismatch (tensor, expected, got) and summarises missing and unexpected names (the
 * first few and the count), with hints that say what the file was probably meant for.
 */
#include "weights_internal.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define LIST_FIRST 5 /* names quoted in a missing / unexpected summary */

/* A summary of names: the first LIST_FIRST quoted, then the count. */
typedef struct {
  h3_strbuf text;
  int64_t count;
} name_list;

static void list_add(name_list *l, const char *name) {
  if (l->count < LIST_FIRST) h3_strbuf_printf(&l->text, "%s'%s'", l->count ? ", " : "", name);
  l->count++;
}

static const char *list_text(name_list *l) {
  if (l->count > LIST_FIRST)
    h3_strbuf_printf(&l->text, " and %lld more", (long long)(l->count - LIST_FIRST));
  return l->text.data ? l->text.data : "";
}

static void type_text(h3_strbuf *b, const h3_type *t) {
  b->len = 0;
  if (b->data) b->data[0] = '\0';
  h3_strbuf_append(b, h3_safetensors_dtype_name(t->dtype));
  h3_strbuf_append(b, " [");
  for (int i = 0; i < t->rank; i++)
    h3_strbuf_printf(b, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
  h3_strbuf_append(b, "]");
}

h3_status h3_weights_check_tensor(const char *path, const char *what, const char *name,
                                  const h3_st_tensor *t, const h3_type *want, bool e4m3_ok,
                                  const char *hint, h3_diag *d) {
  if (t->f8_e4m3 && !e4m3_ok && want->dtype == H3_U8) {
    h3_diag_error(d, (h3_span){0}, hint, "%s: %s '%s': dtype F8_E4M3, expected U8", path, what,
                  name);
    return H3_ERR;
  }
  if (h3_type_equal(&t->type, want)) return H3_OK;
  h3_strbuf got, exp;
  h3_strbuf_init(&got);
  h3_strbuf_init(&exp);
  type_text(&got, &t->type);
  type_text(&exp, want);
  h3_span none = {0};
  int same_shape = t->type.rank == want->rank &&
                   memcmp(t->type.dims, want->dims, sizeof(int64_t) * (size_t)want->rank) == 0;
  if (t->type.dtype != want->dtype && same_shape)
    h3_diag_error(d, none, hint, "%s: %s '%s': dtype %s, expected %s", path, what, name,
                  h3_safetensors_dtype_name(t->type.dtype), h3_safetensors_dtype_name(want->dtype));
  else
    h3_diag_error(d, none, hint, "%s: %s '%s': %s, expected %s", path, what, name,
                  got.data ? got.data : "?", exp.data ? exp.data : "?");
  h3_strbuf_free(&got);
  h3_strbuf_free(&exp);
  return H3_ERR;
}

static void copy_out(void *dst, const h3_st_tensor *t) {
  if (t->nbytes) memcpy(dst, t->data, t->nbytes);
}

h3_weights *h3_weights_load_file(const h3_module *m, const char *path, h3_diag *d) {
  h3_safetensors *st = h3_safetensors_open(path, d);
  if (!st) return NULL;
  h3_input_register(-1, path, "weights file"); /* the role errors name */
  h3_weights *w = h3_weights_alloc(m, d);
  char *used = calloc((size_t)h3_safetensors_count(st) + 1, 1);
  name_list missing = {0}, unexpected = {0};
  h3_strbuf_init(&missing.text);
  h3_strbuf_init(&unexpected.text);
  h3_strbuf name, hint;
  h3_strbuf_init(&name);
  h3_strbuf_init(&hint);
  h3_span none = {0};
  h3_status rc = H3_OK;
  if (!w || !used) {
    if (w) h3_diag_error(d, none, H3_HINT_OOM, "%s: out of memory", path);
    rc = H3_ERR;
    goto done;
  }
  const char *file_cfg = h3_safetensors_metadata(st, "h3_config");
  const char *file_model = h3_safetensors_metadata(st, "h3_model");
  h3_strbuf_printf(&hint, "model '%s' config '%s' declares these weights",
                   m->model ? m->model : "?", m->config ? m->config : "?");
  if (file_model && file_cfg)
    h3_strbuf_printf(&hint, "; the file was written for model '%s' config '%s'", file_model,
                     file_cfg);
  const char *hint_text = hint.data ? hint.data : NULL;
  for (int i = 0; i < w->n; i++) {
    const h3_param *p = w->w[i].param;
    h3_type tt = h3_weights_tensor_type(p);
    size_t tbytes = (size_t)h3_type_bytes(&tt);
    int64_t count = h3_weights_tensor_count(p);
    if (p->quant == H3_QUANT_NVFP4_SCALE || p->quant == H3_QUANT_NVFP4_GLOBAL) continue;
    for (int64_t k = 0; k < count && p->quant == H3_QUANT_NVFP4_PACKED; k++) {
      int r = h3_weights_nvfp4_load(w, i, k, st, path, used, &name, hint_text, d);
      if (r < 0) rc = H3_ERR;
      if (r == 0) list_add(&missing, name.data);
    }
    for (int64_t k = 0; k < count && p->quant == H3_QUANT_NONE; k++) {
      if (h3_weights_tensor_name(p, k, &name, d) != H3_OK) {
        rc = H3_ERR;
        goto done;
      }
      const h3_st_tensor *t = h3_safetensors_find(st, name.data);
      if (!t) {
        list_add(&missing, name.data);
        continue;
      }
      used[h3_safetensors_index(st, t)] = 1;
      if (h3_weights_check_tensor(path, "tensor", name.data, t, &tt, false, hint_text, d) !=
          H3_OK) {
        rc = H3_ERR;
        continue;
      }
      if (tbytes) copy_out((char *)w->w[i].data + (size_t)k * tbytes, t);
    }
  }
  for (int i = 0; i < h3_safetensors_count(st); i++)
    if (!used[i]) list_add(&unexpected, h3_safetensors_at(st, i)->name);
  if (missing.count) {
    h3_diag_error(d, none, hint_text, "%s: %lld weight%s missing: %s", path,
                  (long long)missing.count, missing.count == 1 ? "" : "s", list_text(&missing));
    rc = H3_ERR;
  }
  if (unexpected.count) {
    h3_diag_error(d, none, hint_text, "%s: %lld unexpected tensor%s: %s", path,
                  (long long)unexpected.count, unexpected.count == 1 ? "" : "s",
                  list_text(&unexpected));
    rc = H3_ERR;
  }
done:
  h3_strbuf_free(&missing.text);
  h3_strbuf_free(&unexpected.text);
  h3_strbuf_free(&name);
  h3_strbuf_free(&hint);
  free(used);
  h3_safetensors_close(st);
  if (rc != H3_OK) {
    h3_weights_free(w);
    return NULL;
  }
  return w;
}

h3_status h3_weights_save_file(const h3_weights *w, const char *path, h3_diag *d) {
  h3_safetensors_writer *wr = h3_safetensors_writer_new();
  if (!wr) {
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "%s: out of memory", path);
    return H3_ERR;
  }
  const h3_module *m = w->module;
  h3_strbuf name;
  h3_strbuf_init(&name);
  h3_status rc = H3_OK;
  if (m->model) rc = h3_safetensors_writer_metadata(wr, "h3_model", m->model, d);
  if (rc == H3_OK && m->config) rc = h3_safetensors_writer_metadata(wr, "h3_config", m->config, d);
  if (rc == H3_OK) rc = h3_safetensors_writer_metadata(wr, "format", "pt", d);
  for (int i = 0; rc == H3_OK && i < w->n; i++) {
    const h3_param *p = w->w[i].param;
    h3_type tt = h3_weights_tensor_type(p);
    size_t tbytes = (size_t)h3_type_bytes(&tt);
    int64_t count = h3_weights_tensor_count(p);
    for (int64_t k = 0; rc == H3_OK && k < count; k++) {
      rc = h3_weights_tensor_name(p, k, &name, d);
      if (rc == H3_OK)
        rc = h3_safetensors_writer_add(wr, name.data, tt.dtype, tt.rank, tt.dims,
                                       tbytes ? (char *)w->w[i].data + (size_t)k * tbytes : NULL,
                                       d);
    }
  }
  if (rc == H3_OK) rc = h3_safetensors_writer_commit(wr, path, d);
  h3_strbuf_free(&name);
  h3_safetensors_writer_free(wr);
  return rc;
}

/* ---- graph inputs and outputs --------------------------------------------------------------- */

h3_type h3_outputs_type(const h3_graph *g, int i) {
  const h3_op *ret = g->body.last;
  assert(ret && ret->code == H3_OP_RETURN && i >= 0 && i < ret->n_operands);
  return ret->operands[i]->type;
}

void h3_host_tensors_free(h3_host_tensor *t, int n) {
  if (!t) return;
  for (int i = 0; i < n; i++) free(t[i].data);
  free(t);
}

/* "text bf16[8, 64], t f32[2]" for hints. */
static void describe_inputs(h3_strbuf *b, const h3_graph *g) {
  h3_strbuf_printf(b, "graph '%s' takes ", g->name);
  for (int i = 0; i < g->n_inputs; i++) {
    h3_strbuf_printf(b, "%s%s ", i ? ", " : "", g->inputs[i]->name ? g->inputs[i]->name : "?");
    h3_type_print(b, &g->inputs[i]->type);
  }
  if (g->n_inputs == 0) h3_strbuf_append(b, "no inputs");
}

h3_host_tensor *h3_inputs_load_file(const h3_graph *g, const char *path, unsigned flags,
                                    h3_diag *d) {
  h3_safetensors *st = h3_safetensors_open(path, d);
  if (!st) return NULL;
  h3_input_register(-1, path, "inputs file"); /* the role errors name */
  h3_span none = {0};
  h3_host_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in);
  char *used = calloc((size_t)h3_safetensors_count(st) + 1, 1);
  name_list missing = {0}, unexpected = {0};
  h3_strbuf_init(&missing.text);
  h3_strbuf_init(&unexpected.text);
  h3_strbuf hint, what;
  h3_strbuf_init(&hint);
  h3_strbuf_init(&what);
  describe_inputs(&hint, g);
  h3_strbuf_printf(&what, "input of graph '%s'", g->name);
  h3_status rc = H3_OK;
  if (!in || !used) {
    h3_diag_error(d, none, H3_HINT_OOM, "%s: out of memory", path);
    rc = H3_ERR;
    goto done;
  }
  for (int i = 0; i < g->n_inputs; i++) {
    const h3_value *v = g->inputs[i];
    in[i].name = v->name;
    in[i].type = v->type;
    in[i].bytes = (size_t)h3_type_bytes(&v->type);
    const h3_st_tensor *t = v->name ? h3_safetensors_find(st, v->name) : NULL;
    if (!t) {
      if (!(flags & H3_INPUTS_ALLOW_MISSING)) list_add(&missing, v->name ? v->name : "?");
      continue;
    }
    used[h3_safetensors_index(st, t)] = 1;
    if (h3_weights_check_tensor(path, what.data, v->name, t, &v->type, false, hint.data, d) !=
        H3_OK) {
      rc = H3_ERR;
      continue;
    }
    in[i].data = aligned_alloc(64, in[i].bytes ? (in[i].bytes + 63) & ~(size_t)63 : 64);
    if (!in[i].data) {
      h3_diag_error(d, none, H3_HINT_OOM, "%s: out of memory for input '%s' (%zu bytes)", path, v->name,
                    in[i].bytes);
      rc = H3_ERR;
      goto done;
    }
    copy_out(in[i].data, t);
  }
  for (int i = 0; i < h3_safetensors_count(st); i++)
    if (!used[i]) list_add(&unexpected, h3_safetensors_at(st, i)->name);
  if (missing.count) {
    h3_diag_error(d, none, hint.data, "%s: %lld input%s of graph '%s' missing: %s", path,
                  (long long)missing.count, missing.count == 1 ? "" : "s", g->name,
                  list_text(&missing));
    rc = H3_ERR;
  }
  if (unexpected.count) {
    h3_diag_error(d, none, hint.data, "%s: %lld unexpected tensor%s for graph '%s': %s", path,
                  (long long)unexpected.count, unexpected.count == 1 ? "" : "s", g->name,
                  list_text(&unexpected));
    rc = H3_ERR;
  }
done:
  h3_strbuf_free(&missing.text);
  h3_strbuf_free(&unexpected.text);
  h3_strbuf_free(&hint);
  h3_strbuf_free(&what);
  free(used);
  h3_safetensors_close(st);
  if (rc != H3_OK) {
    h3_host_tensors_free(in, g->n_inputs);
    return NULL;
  }
  return in;
}

h3_status h3_outputs_save_file(const h3_graph *g, const void *const *data, const char *path,
                               h3_diag *d) {
  h3_safetensors_writer *wr = h3_safetensors_writer_new();
  if (!wr) {
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "%s: out of memory", path);
    return H3_ERR;
  }
  h3_status rc = H3_OK;
  for (int i = 0; rc == H3_OK && i < g->n_outputs; i++) {
    h3_type t = h3_outputs_type(g, i);
    rc = h3_safetensors_writer_add(wr, g->output_names[i], t.dtype, t.rank, t.dims, data[i], d);
  }
  if (rc == H3_OK) rc = h3_safetensors_writer_commit(wr, path, d);
  h3_safetensors_writer_free(wr);
  return rc;
}
