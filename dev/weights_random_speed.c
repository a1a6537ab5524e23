/* weights_random_speed.c: times h3_weights_random (runtime/weights.c) on a model config and
 * prints a checksum of the bytes, so that two builds (say the commit before the parallel fill
 * and after) can be compared for speed and for identical output.
 *
 *   B=build; cc -O2 -std=gnu11 -Iinclude dev/weights_random_speed.c $B/libh3_frontend.a \
 *      $B/libh3_runtime.a $B/libh3_ir.a -lpthread -lm -o $B/weights_random_speed
 *   build/weights_random_speed models/minimax_m3_1.g small [key=value...]
 *
 * Not part of the product or of CI (dev/README.md).
 */
#include "h3/frontend.h"
#include "h3/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s MODEL.g CONFIG [key=value...]\n", argv[0]);
    return 2;
  }
  h3_config_override sets[32];
  int n = 0;
  for (int i = 3; i < argc && n < 32; i++) {
    const char *eq = strchr(argv[i], '=');
    if (eq) sets[n++] = (h3_config_override){argv[i], atoll(eq + 1)};
  }
  h3_diag d;
  h3_diag_init(&d);
  h3_frontend_options fo = {argv[2], n, sets};
  h3_module *m = h3_frontend_load(argv[1], &fo, &d);
  double t0 = now();
  h3_weights *w = m ? h3_weights_random(m, 0, &d) : NULL;
  double t1 = now();
  if (!w) {
    h3_diag_print(&d, stderr);
    return 1;
  }
  uint64_t sum = 1469598103934665603ull; /* FNV-1a 64 over 8-byte words */
  for (int i = 0; i < w->n; i++)
    for (size_t b = 0; b + 8 <= w->w[i].bytes; b += 8) {
      uint64_t v;
      memcpy(&v, (const char *)w->w[i].data + b, 8);
      sum = (sum ^ v) * 1099511628211ull;
    }
  printf("%.2f GiB of weights in %.3f s (%.1f MiB/s), checksum %016llx\n",
         (double)w->total_bytes / 1073741824.0, t1 - t0,
         (double)w->total_bytes / 1048576.0 / (t1 - t0), (unsigned long long)sum);
  h3_weights_free(w);
  h3_module_free(m);
  h3_diag_free(&d);
  return 0;
}
