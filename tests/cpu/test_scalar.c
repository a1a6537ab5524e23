/* test_scalar.c: include/h3/scalar.h, the integer semantics the CPU backend and the kernels
 * share, against their definitions computed independently here: floor division and the
 * modulo with the divisor's sign (Python's // and %) from exact rational floors over a grid
 * of signs and magnitudes, the edge cases (b = 0, b = -1, INT64_MIN / -1), and row clamps.
 * The same text is compiled by NVRTC inside the prelude (tests/codegen compiles every
 * kernel), so one definition serves both sides. */
#include "h3/scalar.h"

#include "../common/check.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

int main(void) {
  for (long long a = -50; a <= 50; a++)
    for (long long b = -9; b <= 9; b++) {
      if (b == 0) {
        CHECK(h3_sc_floordiv(a, 0) == 0 && h3_sc_floormod(a, 0) == 0, "%lld / 0", a);
        continue;
      }
      long long q = (long long)floor((double)a / (double)b); /* exact for these magnitudes */
      long long r = a - b * q;
      CHECK(h3_sc_floordiv(a, b) == q, "%lld // %lld = %lld, want %lld", a, b, h3_sc_floordiv(a, b), q);
      CHECK(h3_sc_floormod(a, b) == r, "%lld %% %lld = %lld, want %lld", a, b, h3_sc_floormod(a, b), r);
      CHECK(r == 0 || (r < 0) == (b < 0), "%lld %% %lld takes the divisor's sign", a, b);
    }
  CHECK(h3_sc_floordiv(INT64_MIN, -1) == INT64_MIN, "INT64_MIN // -1 wraps");
  CHECK(h3_sc_floormod(INT64_MIN, -1) == 0, "INT64_MIN %% -1");
  CHECK(h3_sc_floordiv(INT64_MAX, 1) == INT64_MAX && h3_sc_floordiv(-7, 2) == -4, "large and odd");
  CHECK(h3_sc_clamp_row(-3, 10) == 0 && h3_sc_clamp_row(10, 10) == 9 && h3_sc_clamp_row(4, 10) == 4,
        "row clamps");
  return check_summary("test_scalar");
}
