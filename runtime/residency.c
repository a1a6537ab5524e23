/* residency.c: the residency plan under a device-memory budget (include/h3/residency.h) and
 * the byte sizes of --device-memory. Pure functions: no backend, no IR.
 */
#include "h3/residency.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *h3_size_text(int64_t bytes, char *buf, size_t n) {
  double v = (double)bytes;
  if (v >= 1024.0 * 1024 * 1024)
    snprintf(buf, n, "%.2f GiB", v / (1024.0 * 1024 * 1024));
  else if (v >= 1024.0 * 1024)
    snprintf(buf, n, "%.2f MiB", v / (1024.0 * 1024));
  else if (v >= 1024.0)
    snprintf(buf, n, "%.1f KiB", v / 1024.0);
  else
    snprintf(buf, n, "%.0f B", v);
  return buf;
}

bool h3_size_parse(const char *s, int64_t *out) {
  static const struct {
    const char *unit;
    double scale;
  } units[] = {{"", 1},       {"B", 1},        {"K", 0x1p10},   {"KiB", 0x1p10}, {"KB", 1e3},
               {"M", 0x1p20}, {"MiB", 0x1p20}, {"MB", 1e6},     {"G", 0x1p30},   {"GiB", 0x1p30},
               {"GB", 1e9},   {"T", 0x1p40},   {"TiB", 0x1p40}, {"TB", 1e12}};
  size_t digits = s ? strspn(s, "0123456789.") : 0;
  if (!digits || !(*s >= '0' && *s <= '9')) return false;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || !isfinite(v) || end != s + digits) return false;
  while (*end == ' ') end++;
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcasecmp(end, units[i].unit) != 0) continue;
    double bytes = v * units[i].scale;
    if (bytes >= 0x1p62) return false;
    *out = (int64_t)bytes;
    return true;
  }
  return false;
}

/* fixed + blocks * block, saturating (a budget never exceeds 2^62) */
static int64_t need(const h3_residency_in *in, int64_t blocks) {
  if (blocks > 0 && in->block_bytes > (INT64_MAX / 2 - in->fixed_bytes) / blocks)
    return INT64_MAX / 2;
  return in->fixed_bytes + blocks * in->block_bytes;
}

h3_status h3_residency_plan(const h3_residency_in *in, h3_residency *out, h3_diag *d) {
  int64_t L = in->layers > 0 && in->block_bytes > 0 ? in->layers : 0;
  *out = (h3_residency){
      .resident_blocks = L, .device_bytes = need(in, L), .min_budget = need(in, L ? 1 : 0)};
  if (in->budget <= 0 || out->device_bytes <= in->budget) return H3_OK;
  if (in->budget < out->min_budget) {
    char b[32], f[32], blk[64], m[32];
    char hint[160];
    snprintf(hint, sizeof hint, "give --device-memory %lld (%s) or more",
             (long long)out->min_budget, h3_size_text(out->min_budget, m, sizeof m));
    if (L)
      snprintf(blk, sizeof blk, "one streamed block (%s)",
               h3_size_text(in->block_bytes, m, sizeof m));
    else
      snprintf(blk, sizeof blk, "nothing streams");
    h3_diag_error(d, (h3_span){0}, hint,
                  "--device-memory %s cannot hold what must stay resident (%s: weights outside "
                  "the streamed blocks, activation arenas, the backend's reserve) and %s",
                  h3_size_text(in->budget, b, sizeof b), h3_size_text(in->fixed_bytes, f, sizeof f),
                  blk);
    return H3_ERR;
  }
  /* the most resident blocks with a full ring; else a smaller ring with none resident */
  int64_t r = L, slots = 0;
  for (r = L - 1; r >= 0; r--) {
    slots = L - r < H3_RING_SLOTS ? L - r : H3_RING_SLOTS;
    if (need(in, r + slots) <= in->budget) break;
  }
  if (r < 0) {
    r = 0;
    for (slots = L < H3_RING_SLOTS ? L : H3_RING_SLOTS; slots > 1 && need(in, slots) > in->budget;
         slots--) {
    }
  }
  out->resident_blocks = r;
  out->ring_slots = slots;
  out->device_bytes = need(in, r + slots);
  out->streamed_bytes = (L - r) * in->block_bytes;
  return H3_OK;
}
