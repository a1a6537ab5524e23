/* tier.c: the quality tiers' names (include/h3/ir.h): the one place a tier is spelled. */
#include "h3/ir.h"

#include <string.h>

static const char *const tier_names[] = {"exact", "lossless", "high"};

const char *h3_tier_name(h3_tier t) {
  if ((int)t < 0 || t > H3_TIER_HIGH) return "?";
  return tier_names[t];
}

int h3_tier_parse(const char *s, h3_tier *out) {
  for (int i = 0; i <= (int)H3_TIER_HIGH; i++)
    if (s && strcmp(s, tier_names[i]) == 0) {
      *out = (h3_tier)i;
      return 1;
    }
  return 0;
}
