/* cpu_gemm_tile.h: the instruction-set-dependent part of cpu_gemm.c; a template by
 * inclusion, not a header of its own: cpu_gemm.c includes it once per instruction set, with
 * the target set by pragma and GEMM_ISA(name) suffixing the names it defines.
 *
 * GEMM_ISA(pack)(panel, g, n0, nn, k0, kc) widens w to the panel: panel[k][j] = fp32
 * w[n0 + j, k0 + k] for k < kc, j < nn, and 0 for j in [nn, NR). With AVX2, bf16 and f32
 * rows are read 8 columns by 8 k's at a time, widened and transposed in registers; the
 * rest goes through pack_cols, one element at a time.
 *
 * GEMM_ISA(block)(x, ldx, rows, panel, kc, sums) runs, for each of `rows` rows r of x (fp32,
 * row stride ldx, at the panel's first k) and each output j of the panel (fp32 [kc][NR]):
 *   sums[r][j] = sums[r][j] + x[r][k] * panel[k][j]   for k = 0, 1, .., kc - 1
 * each product and each sum one fp32 operation (GEMM_NOFUSE keeps the product rounded).
 * Register tiles of up to MR rows by the NR outputs, SIMD lanes across the outputs, which
 * are independent sums; sums is fp32 [rows][NR], 32-byte aligned, as is panel.
 */

/* With AVX enabled a v8f fits one ymm register and FMA instructions may exist: the empty asm
   makes the product an opaque value that the addition cannot be fused with. Without AVX no
   x86 FMA instruction exists, so there is nothing to keep apart. */
#if defined(__AVX__)
#define GEMM_NOFUSE(v) __asm__("" : "+x"(v))
#elif defined(__x86_64__)
#define GEMM_NOFUSE(v) ((void)0)
#else
#define GEMM_NOFUSE(v) __asm__("" : "+m"(v))
#endif

#if defined(__AVX2__)
/* 8 consecutive k's of w from element `at` (bf16 or f32), widened to fp32. */
static inline __m256 GEMM_ISA(load8)(const h3cpu_gemm_args *g, int64_t at) {
  if (g->wd == H3_F32) return _mm256_loadu_ps((const float *)g->w + at);
  __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)g->w + at));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* r[i][c] <- r[c][i] for an 8 x 8 block of fp32. */
static inline void GEMM_ISA(transpose8)(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; i++) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

/* Panel columns [j, j + 8) (dst = panel + j) of w rows n .. n + 7, k in [0, kv), kv % 8 == 0. */
static void GEMM_ISA(pack8)(float *dst, const h3cpu_gemm_args *g, int64_t n, int64_t k0,
                            int64_t kv) {
  for (int64_t k = 0; k < kv; k += 8) {
    __m256 r[8];
    for (int i = 0; i < 8; i++) r[i] = GEMM_ISA(load8)(g, (n + i) * g->K + k0 + k);
    GEMM_ISA(transpose8)(r);
    for (int i = 0; i < 8; i++) _mm256_store_ps(dst + (k + i) * GEMM_NR, r[i]);
  }
}
#endif

static void GEMM_ISA(pack)(float *panel, const h3cpu_gemm_args *g, int64_t n0, int64_t nn,
                           int64_t k0, int64_t kc) {
  if (nn < GEMM_NR) memset(panel, 0, (size_t)(kc * GEMM_NR) * sizeof(float));
  int64_t j = 0;
#if defined(__AVX2__)
  if (g->wd == H3_BF16 || g->wd == H3_F32) {
    int64_t kv = kc & ~(int64_t)7;
    for (; j + 8 <= nn; j += 8) GEMM_ISA(pack8)(panel + j, g, n0 + j, k0, kv);
    pack_cols(panel, g, n0, 0, j, k0, kv, kc);
  }
#endif
  pack_cols(panel, g, n0, j, nn, k0, 0, kc);
}

/* One register tile: mr (a constant after inlining) rows by NR outputs. */
static inline __attribute__((always_inline)) void GEMM_ISA(tile)(int mr, const float *x,
                                                                  int64_t ldx, const float *panel,
                                                                  int64_t kc, float *sums) {
  v8f a[GEMM_MR][2];
  for (int r = 0; r < mr; r++) {
    a[r][0] = *(const v8f *)(sums + r * GEMM_NR);
    a[r][1] = *(const v8f *)(sums + r * GEMM_NR + 8);
  }
  for (int64_t k = 0; k < kc; k++) {
    v8f w0 = *(const v8f *)(panel + k * GEMM_NR), w1 = *(const v8f *)(panel + k * GEMM_NR + 8);
    for (int r = 0; r < mr; r++) {
      float xs = x[r * ldx + k];
      v8f p0 = xs * w0, p1 = xs * w1;
      GEMM_NOFUSE(p0);
      GEMM_NOFUSE(p1);
      a[r][0] = a[r][0] + p0;
      a[r][1] = a[r][1] + p1;
    }
  }
  for (int r = 0; r < mr; r++) {
    *(v8f *)(sums + r * GEMM_NR) = a[r][0];
    *(v8f *)(sums + r * GEMM_NR + 8) = a[r][1];
  }
}

static void GEMM_ISA(block)(const float *x, int64_t ldx, int64_t rows, const float *panel,
                            int64_t kc, float *sums) {
  int64_t r = 0;
  for (; r + GEMM_MR <= rows; r += GEMM_MR)
    GEMM_ISA(tile)(GEMM_MR, x + r * ldx, ldx, panel, kc, sums + r * GEMM_NR);
  switch (rows - r) {
  case 3: GEMM_ISA(tile)(3, x + r * ldx, ldx, panel, kc, sums + r * GEMM_NR); break;
  case 2: GEMM_ISA(tile)(2, x + r * ldx, ldx, panel, kc, sums + r * GEMM_NR); break;
  case 1: GEMM_ISA(tile)(1, x + r * ldx, ldx, panel, kc, sums + r * GEMM_NR); break;
  default: break;
  }
}

#undef GEMM_NOFUSE
