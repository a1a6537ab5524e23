/* test_models_load.c: both real models (the two .g files of models/) load through
 * h3_frontend_load in every config preset of theirs, verify, and compile fast (well under the 1 s budget of a
 * whole `h3c compile`). Exits 77 (skipped) when the model files are absent.
 * Usage: test_models_load MODELS_DIR
 */
#include "h3/frontend.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  static const struct {
    const char *file;
    const char *configs[4];
  } models[] = {{"minimax_h3.g", {"full", "tiny", NULL}}, {"minimax_m3_1.g", {"full", "small", "tiny", NULL}}};
  int failures = 0, loaded = 0;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", argv[1], models[i].file);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    fclose(f);
    for (int c = 0; models[i].configs[c]; c++) {
      h3_diag d;
      h3_diag_init(&d);
      h3_frontend_options o = {.config = models[i].configs[c]};
      double t0 = now();
      h3_module *m = h3_frontend_load(path, &o, &d);
      double dt = now() - t0;
      if (!m || d.errors) {
        fprintf(stderr, "%s --config %s failed:\n", path, models[i].configs[c]);
        h3_diag_print(&d, stderr);
        failures++;
      } else if (dt > 0.5) {
        fprintf(stderr, "%s --config %s took %.3f s\n", path, models[i].configs[c], dt);
        failures++;
      } else {
        fprintf(stderr, "%s --config %s: %d params, %d graphs, %.1f ms\n", models[i].file,
                models[i].configs[c], m->n_params, m->n_graphs, dt * 1e3);
        loaded++;
      }
      h3_module_free(m);
      h3_diag_free(&d);
    }
  }
  if (!loaded && !failures) return 77;
  return failures ? 1 : 0;
}
