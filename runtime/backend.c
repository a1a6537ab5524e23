/* backend.c: choosing a backend by name (h3exec --backend cpu|cuda|auto).
 *
 * `cuda` needs a usable GPU (h3_cuda_available); without one it is an error that says
 * why and suggests --backend cpu. `auto` takes cuda when a GPU is usable, else cpu.
 */
#include "h3/backend.h"
#include "h3/cuda_backend.h"

#include <stdlib.h>
#include <string.h>

h3_backend *h3_backend_create(const char *name, const h3_backend_options *o, h3_diag *d) {
  h3_span none = {0};
  char why[256] = "";
  if (name && strcmp(name, "cpu") == 0) return h3_backend_cpu_new(o, d);
  if (!name || strcmp(name, "auto") == 0)
    return h3_cuda_available(why, sizeof why) ? h3_backend_cuda_new(o, NULL, d)
                                              : h3_backend_cpu_new(o, d);
  if (strcmp(name, "cuda") == 0) {
    if (h3_cuda_available(why, sizeof why)) return h3_backend_cuda_new(o, NULL, d);
    h3_diag_error(d, none, "use --backend cpu (or auto)",
                  "CUDA backend not available in this build/no GPU found (%s)", why);
    return NULL;
  }
  h3_diag_error(d, none, "valid backends: cpu, cuda, auto", "unknown backend '%s'", name);
  return NULL;
}

void h3_backend_free(h3_backend *b) {
  if (b) b->ops->destroy(b);
}
