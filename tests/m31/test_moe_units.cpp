/* test_moe_units.cpp: the work units of moe's persistent wgmma GEMMs (kernels/m31_moe_wgmma.cu's
 * h3ws_units and h3ws_tile_at, compiled on the host) for many expert row counts: every m-tile
 * of every expert comes exactly once (and nothing else); a unit's two m-tiles are one expert's
 * consecutive pair (shared B rows) or two odd m-tiles, each an expert's last; a unit past the
 * count has no m-tile; and each odd unit of two experts comes right after the pairs of its
 * second, the first's a few units before it (its weight tiles still in L2, read by those
 * pairs), not after every pair of the n-tile (a lone odd m-tile, when their count is odd,
 * comes last).
 */
#include "host_emu.h"
#include "prelude.cuh"
#include "m31_moe_wgmma.cu"

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>
#include <utility>
#include <vector>

static int failures = 0;
#define EXPECT(cond, ...)                                                                       \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      if (failures++ < 10) std::printf("FAIL " __VA_ARGS__), std::printf("\n");                \
    }                                                                                           \
  } while (0)

/* The checks for one vector of counts; returns the units. */
static int check_counts(const std::vector<int> &c, const char *what) {
  const int E = (int)c.size(), U = h3ws_units(c.data(), E);
  std::set<std::pair<int, int>> seen; // (expert, m0)
  std::vector<int> last_pair_unit(E, -1);
  for (int q = 0; q < U; q++)
    for (int r = 0; r < 2; r++) {
      const h3ws_tile t = h3ws_tile_at(c.data(), E, q, r);
      if (t.n == 0) {
        EXPECT(t.m0 == 0 && !t.shared, "%s unit %d rank %d: an empty tile with m0 %d", what, q, r, t.m0);
        continue;
      }
      EXPECT(t.e >= 0 && t.e < E && t.n == c[t.e], "%s unit %d rank %d: expert %d count %d", what, q, r, t.e, t.n);
      EXPECT(t.m0 % H3W_BM == 0 && t.m0 < t.n, "%s unit %d rank %d: m0 %d of %d rows", what, q, r, t.m0, t.n);
      EXPECT(seen.insert({t.e, t.m0}).second, "%s: expert %d m-tile %d twice", what, t.e, t.m0 / H3W_BM);
      const h3ws_tile o = h3ws_tile_at(c.data(), E, q, 1 - r);
      if (t.shared) {
        EXPECT(o.shared && o.e == t.e && o.m0 == t.m0 + (r ? -H3W_BM : H3W_BM),
               "%s unit %d: a shared unit whose m-tiles are not one expert's pair", what, q);
        last_pair_unit[t.e] = q;
      } else {
        EXPECT(t.m0 == H3W_BM * (h3ws_mtiles(t.n) - 1) && h3ws_mtiles(t.n) % 2 == 1,
               "%s unit %d rank %d: an odd unit's m-tile is not its expert's odd last one", what, q, r);
      }
    }
  size_t want = 0;
  for (int e = 0; e < E; e++) want += (size_t)h3ws_mtiles(c[e]);
  EXPECT(seen.size() == want, "%s: %zu of %zu m-tiles covered", what, seen.size(), want);
  for (int r = 0; r < 2; r++) {
    const h3ws_tile t = h3ws_tile_at(c.data(), E, U, r);
    EXPECT(t.n == 0, "%s: the unit past the count has an m-tile", what);
  }
  /* placement: an odd unit of experts a < b follows b's pairs (or b has none) and precedes the
     next expert's pairs; a's pairs come before it too */
  for (int q = 0; q < U; q++) {
    const h3ws_tile a = h3ws_tile_at(c.data(), E, q, 0), b = h3ws_tile_at(c.data(), E, q, 1);
    if (a.shared || a.n == 0) continue;
    const int last = b.n ? b.e : a.e;
    EXPECT(!b.n || a.e < b.e, "%s unit %d: odd m-tiles out of expert order", what, q);
    EXPECT(last_pair_unit[last] < q && last_pair_unit[a.e] < q, "%s unit %d: before its experts' pairs", what, q);
    for (int e = last + 1; b.n && e < E; e++) // (a lone odd m-tile comes last)
      EXPECT(last_pair_unit[e] < 0 || last_pair_unit[e] > q, "%s unit %d: after expert %d's pairs", what, q, e);
  }
  return U;
}

int main() {
  std::mt19937 rng(7);
  long long units = 0;
  int cases = 0;
  /* a 2048-row prefill of 32 experts, top 4 (counts about 256 +- 16: half of them 3 m-tiles) */
  for (int t = 0; t < 200; t++, cases++) {
    std::vector<int> c(32, 0);
    for (int row = 0; row < 2048; row++) {
      std::vector<int> pick(32);
      for (int e = 0; e < 32; e++) pick[e] = e;
      std::shuffle(pick.begin(), pick.end(), rng);
      for (int j = 0; j < 4; j++) c[pick[j]]++;
    }
    units += check_counts(c, "prefill-like");
  }
  /* edge counts: none, one row, exact multiples of 128, one past them, a lone odd m-tile */
  const int edges[] = {0, 1, 127, 128, 129, 255, 256, 257, 383, 384, 385, 640, 700};
  std::uniform_int_distribution<int> pick(0, (int)(sizeof edges / sizeof edges[0]) - 1);
  for (int E : {1, 2, 3, 5, 8, 32, 128})
    for (int t = 0; t < 100; t++, cases++) {
      std::vector<int> c(E);
      for (int &x : c) x = edges[pick(rng)];
      units += check_counts(c, "edge counts");
    }
  std::printf("moe_units: %d count vectors, %lld units, %d failures\n", cases, units, failures);
  return failures ? 1 : 0;
}
