/* graph_dot.c: prints the IR as a Graphviz digraph for `h3c graph --format dot`.
 * Node ids are "o<op id>" for ops, "i<value id>" for graph inputs and region arguments;
 * an edge goes from the definer of each operand to its user, labelled with the value's
 * type. Parameters appear as edge-less labels on their users ("@name"). */
#include "graph_dot.h"
#include "h3/op_registry.h"

#include <stdio.h>
#include <string.h>

static void dot_escape(h3_strbuf *b, const char *s) {
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') h3_strbuf_append(b, "\\");
    h3_strbuf_appendn(b, s, 1);
  }
}

static void value_node(h3_strbuf *b, const h3_value *v) {
  if (v->kind == H3_VALUE_RESULT)
    h3_strbuf_printf(b, "o%d", v->def->id);
  else
    h3_strbuf_printf(b, "i%d", v->id);
}

static void print_region(h3_strbuf *b, const h3_region *r, int depth);

static void print_op(h3_strbuf *b, const h3_op *op, int depth) {
  h3_strbuf_printf(b, "%*s", depth * 2, "");
  if (op->n_regions > 0) {
    const char *label = h3_op_attr_string(op, "label", NULL);
    h3_strbuf_printf(b, "subgraph cluster_o%d {\n%*slabel=\"%s", op->id, depth * 2 + 2, "",
                     h3_opcode_name(op->code));
    if (label) {
      h3_strbuf_append(b, " ");
      dot_escape(b, label);
    }
    if (op->code == H3_OP_LOOP) h3_strbuf_printf(b, " x%lld", (long long)h3_op_attr_int(op, "count", 0));
    h3_strbuf_printf(b, "\";\n%*so%d [shape=box,style=dashed,label=\"%s results\"];\n",
                     depth * 2 + 2, "", op->id, h3_opcode_name(op->code));
    for (int i = 0; i < op->n_regions; i++) print_region(b, &op->regions[i], depth + 1);
    h3_strbuf_printf(b, "%*s}\n", depth * 2, "");
  } else {
    h3_strbuf_printf(b, "o%d [shape=box,label=\"%s", op->id, h3_opcode_name(op->code));
    for (int i = 0; i < op->n_results; i++) {
      h3_strbuf_append(b, "\\n");
      h3_strbuf tb;
      h3_strbuf_init(&tb);
      h3_type_print(&tb, &op->results[i]->type);
      dot_escape(b, tb.data ? tb.data : "");
      h3_strbuf_free(&tb);
    }
    h3_strbuf_append(b, "\"];\n");
  }
  for (int i = 0; i < op->n_operands; i++) {
    const h3_value *v = op->operands[i];
    if (v->kind == H3_VALUE_PARAM) continue;
    h3_strbuf_printf(b, "%*s", depth * 2, "");
    value_node(b, v);
    h3_strbuf_printf(b, " -> o%d;\n", op->id);
  }
}

static void print_region(h3_strbuf *b, const h3_region *r, int depth) {
  for (int i = 0; i < r->n_args; i++) {
    h3_strbuf_printf(b, "%*si%d [shape=ellipse,label=\"", depth * 2, "", r->args[i]->id);
    dot_escape(b, r->args[i]->name ? r->args[i]->name : "arg");
    h3_strbuf_append(b, "\"];\n");
  }
  for (const h3_op *op = r->first; op; op = op->next) print_op(b, op, depth);
}

h3_status h3_graph_print_dot(h3_strbuf *out, const h3_module *m, const char *graph, h3_diag *d) {
  if (graph && !h3_module_graph(m, graph)) {
    h3_strbuf names;
    h3_strbuf_init(&names);
    for (int i = 0; i < m->n_graphs; i++)
      h3_strbuf_printf(&names, "%s%s", i ? ", " : "", m->graphs[i]->name);
    h3_span none = {0};
    char hint[512];
    snprintf(hint, sizeof hint, "the graphs of this model are: %s", names.data ? names.data : "");
    h3_diag_error(d, none, hint, "--graph: no graph named '%s' in model %s", graph, m->model);
    h3_strbuf_free(&names);
    return H3_ERR;
  }
  h3_strbuf_append(out, "digraph \"");
  dot_escape(out, m->model ? m->model : "h3");
  h3_strbuf_append(out, "\" {\n  node [fontname=\"monospace\",fontsize=10];\n");
  for (int g = 0; g < m->n_graphs; g++) {
    const h3_graph *gr = m->graphs[g];
    if (graph && strcmp(gr->name, graph) != 0) continue;
    h3_strbuf_printf(out, "  subgraph cluster_g%d {\n    label=\"%s %s\";\n", g,
                     gr->kind == H3_GRAPH_PROGRAM ? "program" : "graph", gr->name);
    for (int i = 0; i < gr->n_inputs; i++) {
      h3_strbuf_printf(out, "    i%d [shape=ellipse,label=\"", gr->inputs[i]->id);
      dot_escape(out, gr->inputs[i]->name ? gr->inputs[i]->name : "input");
      h3_strbuf_append(out, "\"];\n");
    }
    print_region(out, &gr->body, 2);
    h3_strbuf_append(out, "  }\n");
  }
  h3_strbuf_append(out, "}\n");
  return out->oom ? H3_ERR : H3_OK;
}
