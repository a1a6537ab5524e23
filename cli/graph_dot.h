/* graph_dot.h: `h3c graph --format dot`: the IR as a Graphviz digraph. */
#ifndef H3_CLI_GRAPH_DOT_H
#define H3_CLI_GRAPH_DOT_H

#include "h3/ir.h"

/* One cluster per graph (only `graph` when non-NULL; an unknown name is an error listing
 * the graphs) and one nested cluster per region (loop bodies, fused groups). Nodes are
 * ops labelled "name\ntype"; graph inputs are ellipses; parameters are left out of the
 * picture (their uses show the parameter's name on the edge). */
h3_status h3_graph_print_dot(h3_strbuf *out, const h3_module *m, const char *graph, h3_diag *d);

#endif
