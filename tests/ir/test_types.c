/* test_types.c: dtypes, tensor types, promotion and broadcasting. Promotion is checked
 * against the ops.def rule written out as a table here; broadcasting against a direct
 * per-element reimplementation (pad both shapes to one rank, stretch 1s) on random shapes.
 */
#include "check.h"
#include "h3/op_registry.h"

static void test_dtypes(void) {
  static const char *names[] = {"bf16", "f16", "f32", "f64", "i8", "i32", "i64", "u8"};
  static const size_t sizes[] = {2, 2, 4, 8, 1, 4, 8, 1};
  for (int i = 0; i < H3_DTYPE_COUNT; i++) {
    CHECK_STR(h3_dtype_name((h3_dtype)i), names[i]);
    CHECK(h3_dtype_size((h3_dtype)i) == sizes[i]);
    h3_dtype back;
    CHECK(h3_dtype_from_name(names[i], &back) && back == (h3_dtype)i);
    CHECK(h3_dtype_is_float((h3_dtype)i) == (i <= H3_F64));
  }
  h3_dtype x;
  CHECK(!h3_dtype_from_name("f8", &x));
  CHECK(!h3_dtype_from_name("", &x));
}

static void test_type_basics(void) {
  int64_t d[3] = {2, 3, 5};
  h3_type t = h3_type_make(H3_BF16, 3, d);
  CHECK(h3_type_numel(&t) == 30 && h3_type_bytes(&t) == 60);
  h3_type s = h3_type_make(H3_F32, 0, NULL);
  CHECK(h3_type_numel(&s) == 1 && h3_type_bytes(&s) == 4);
  h3_type u = t;
  CHECK(h3_type_equal(&t, &u));
  u.dims[2] = 6;
  CHECK(!h3_type_equal(&t, &u));
  u = t;
  u.dtype = H3_F16;
  CHECK(!h3_type_equal(&t, &u) && h3_type_same_shape(&t, &u));
  u.dims[5] = 99; /* dims past the rank do not count */
  t.dtype = H3_F16;
  CHECK(h3_type_equal(&t, &u));
  h3_strbuf b;
  h3_strbuf_init(&b);
  h3_type_print(&b, &t);
  h3_strbuf_append(&b, " ");
  h3_type_print(&b, &s);
  CHECK_STR(b.data, "f16[2, 3, 5] f32[]");
  h3_strbuf_free(&b);
  char buf[8];
  CHECK_STR(h3_type_str(&t, buf, sizeof buf), "f16[2, ");
}

/* ops.def: bf16 < f16 < f32 < f64; any float beats any int; u8/i8 < i32 < i64; u8+i8 = i32 */
static h3_dtype want_promote(h3_dtype a, h3_dtype b) {
  static const int frank[] = {[H3_BF16] = 1, [H3_F16] = 2, [H3_F32] = 3, [H3_F64] = 4};
  static const int irank[] = {[H3_U8] = 1, [H3_I8] = 1, [H3_I32] = 2, [H3_I64] = 3};
  bool fa = a <= H3_F64, fb = b <= H3_F64;
  if (a == b) return a;
  if (fa && fb) return frank[a] > frank[b] ? a : b;
  if (fa != fb) return fa ? a : b;
  if (irank[a] == irank[b]) return H3_I32;
  return irank[a] > irank[b] ? a : b;
}

static void test_promote(void) {
  for (int a = 0; a < H3_DTYPE_COUNT; a++)
    for (int b = 0; b < H3_DTYPE_COUNT; b++) {
      CHECK(h3_dtype_promote((h3_dtype)a, (h3_dtype)b) == want_promote((h3_dtype)a, (h3_dtype)b));
      CHECK(h3_dtype_promote((h3_dtype)a, (h3_dtype)b) == h3_dtype_promote((h3_dtype)b, (h3_dtype)a));
    }
  CHECK(h3_dtype_promote(H3_BF16, H3_F32) == H3_F32);
  CHECK(h3_dtype_promote(H3_I64, H3_BF16) == H3_BF16);
}

static void test_broadcast(void) {
  for (int it = 0; it < 5000; it++) {
    h3_type a = {0}, b = {0};
    a.rank = (int)check_range(0, 4);
    b.rank = (int)check_range(0, 4);
    for (int i = 0; i < a.rank; i++) a.dims[i] = check_range(1, 3);
    for (int i = 0; i < b.rank; i++) b.dims[i] = check_range(1, 3);
    a.dtype = (h3_dtype)check_range(0, H3_DTYPE_COUNT - 1);
    b.dtype = (h3_dtype)check_range(0, H3_DTYPE_COUNT - 1);
    /* reference: pad to the larger rank with leading 1s */
    int r = a.rank > b.rank ? a.rank : b.rank;
    int64_t pa[6], pb[6], want[6];
    bool ok = true;
    for (int i = 0; i < r; i++) {
      pa[i] = i < r - a.rank ? 1 : a.dims[i - (r - a.rank)];
      pb[i] = i < r - b.rank ? 1 : b.dims[i - (r - b.rank)];
      if (pa[i] != pb[i] && pa[i] != 1 && pb[i] != 1) ok = false;
      want[i] = pa[i] > pb[i] ? pa[i] : pb[i];
    }
    h3_type out;
    int rc = h3_broadcast_shapes(&a, &b, &out);
    CHECK((rc == 0) == ok);
    if (rc == 0 && ok) {
      CHECK(out.rank == r);
      for (int i = 0; i < r; i++) CHECK(out.dims[i] == want[i]);
      CHECK(out.dtype == want_promote(a.dtype, b.dtype));
    }
  }
}

int main(void) {
  test_dtypes();
  test_type_basics();
  test_promote();
  test_broadcast();
  return check_report("test_types");
}
