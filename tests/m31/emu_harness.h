/* emu_harness.h: what the host-emulated kernel tests of tests/m31 share: the emulation's
 * globals (include this header once per test executable, before the kernel sources), a
 * random source, host tensors, single-op IR modules run on the CPU backend as the
 * reference, and the comparison (NMSE for floats, exact for integers, NaN/Inf counted,
 * all-zero references refused).
 */
#ifndef H3_M31_EMU_HARNESS_H
#define H3_M31_EMU_HARNESS_H

#include "host_emu.h"

extern "C" {
#include "h3/backend.h"
#include "h3/ir.h"
#include "h3/op_registry.h"
#include "h3/weights.h"
#include "check.h"
}

#include <chrono>
#include <string>

thread_local emu_dim3 threadIdx;
emu_dim3 blockIdx, blockDim, gridDim;
pthread_barrier_t emu_barrier;
unsigned long long emu_slots[1024];
unsigned emu_mma_words[1024][6];
alignas(1024) unsigned char emu_dyn_smem[1 << 20]; /* 1024: the 128-byte swizzle's atoms */

#include "prelude.cuh"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* [0, 1) */
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return (double)(rng_state >> 11) * 0x1p-53;
}

/* A host tensor of the op's operand or result i, filled by fill(index) -> value. */
struct buf {
  h3_type type;
  std::vector<unsigned char> bytes;
  void *p() { return bytes.data(); }
};

static buf make(const h3_type &t) {
  buf b{t, std::vector<unsigned char>((size_t)h3_type_bytes(&t) + 16)};
  return b;
}

static void fill_random(buf &b, double lo, double hi) {
  for (int64_t i = 0; i < h3_type_numel(&b.type); i++)
    h3_weights_store(b.p(), b.type.dtype, (size_t)i, lo + (hi - lo) * urand());
}

static double ld(const buf &b, int64_t i) {
  const void *p = b.bytes.data();
  switch (b.type.dtype) {
  case H3_BF16: return h3_bf16_to_f32(((const uint16_t *)p)[i]);
  case H3_F32: return ((const float *)p)[i];
  case H3_I32: return ((const int32_t *)p)[i];
  default: return 0;
  }
}

/* The single op of graph @g of IR text `body` (inputs and result types in the text). */
static h3_module *parse(const std::string &text) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_module_parse("m31_emu.ir", text.c_str(), text.size(), &d);
  if (!m) h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return m;
}

static const h3_op *first_op(h3_module *m) { return h3_module_graph(m, "g")->body.first; }

/* Runs op on the CPU over `in` into fresh results. */
static std::vector<buf> cpu_run(const h3_op *op, std::vector<buf> &in) {
  std::vector<h3_tensor> ti, to;
  std::vector<buf> out;
  for (auto &b : in) ti.push_back(h3_tensor{b.type, b.p()});
  for (int i = 0; i < op->n_results; i++) out.push_back(make(op->results[i]->type));
  for (auto &b : out) to.push_back(h3_tensor{b.type, b.p()});
  h3_diag d;
  h3_diag_init(&d);
  h3_status st = h3_cpu_run_op(op, ti.data(), (int)ti.size(), to.data(), (int)to.size(), 1, 1, &d);
  if (st != H3_OK) h3_diag_print(&d, stderr);
  CHECK(st == H3_OK, "%s on the CPU", h3_opcode_name(op->code));
  h3_diag_free(&d);
  return out;
}

static double elapsed(void) { /* seconds since the first call */
  static const auto t0 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

static void compare(const char *what, const buf &got, const buf &want, double limit) {
  double num = 0, den = 0;
  int64_t bad_int = 0, bad_special = 0, n = h3_type_numel(&want.type);
  for (int64_t i = 0; i < n; i++) {
    double a = ld(got, i), b = ld(want, i);
    if (want.type.dtype == H3_I32) {
      bad_int += a != b;
      continue;
    }
    if (!std::isfinite(a) || !std::isfinite(b)) {
      bad_special += !(a == b || (std::isnan(a) && std::isnan(b)));
      continue;
    }
    num += (a - b) * (a - b), den += b * b;
  }
  double nmse = den > 0 ? num / den : num;
  int64_t differ = 0, zero = 0;
  for (int64_t i = 0; i < n; i++) differ += ld(got, i) != ld(want, i), zero += ld(want, i) == 0;
  fprintf(stderr, "  %-40s nmse %.3g, %lld of %lld differ, %lld integer / %lld special mismatches (%.1f s)\n",
          what, nmse, (long long)differ, (long long)n, (long long)bad_int, (long long)bad_special, elapsed());
  CHECK(zero < n || want.type.dtype == H3_I32, "%s: the reference is all zeros", what);
  CHECK(bad_int == 0 && bad_special == 0 && nmse <= limit, "%s: nmse %.3g (limit %.3g)", what, nmse, limit);
}

static std::string ty(const char *dt, std::initializer_list<int64_t> dims) {
  std::string s = std::string(dt) + "[";
  bool first = true;
  for (int64_t v : dims) s += (first ? "" : ", ") + std::to_string(v), first = false;
  return s + "]";
}

/* An attention-like case: *m holds graph @g with one opname(q bf16[T, hq, 128], k, v bf16[T,
 * hk, 128]) {attrs} of q's type; in gets its operands, q and v uniform in [-2, 2) (k left to
 * the caller). Returns the op, NULL when the IR did not parse (reported). */
static const h3_op *qkv_case(h3_module **m, const char *name, const char *opname, int64_t T, int64_t hq, int64_t hk,
                             const std::string &attrs, std::vector<buf> &in) {
  const std::string qt = ty("bf16", {T, hq, 128}), kt = ty("bf16", {T, hk, 128});
  *m = parse("module @m config \"test\" {\n  graph @g(%q: " + qt + ", %k: " + kt + ", %v: " + kt + ") -> (o: " + qt +
             ") {\n    %o = " + opname + "(%q, %k, %v) {" + attrs + "} : " + qt + "\n    return %o\n  }\n}\n");
  CHECK(*m, "%s IR", name);
  if (!*m) return nullptr;
  const h3_op *op = first_op(*m);
  in.clear();
  for (int i = 0; i < 3; i++) in.push_back(make(op->operands[i]->type));
  fill_random(in[0], -2, 2);
  fill_random(in[2], -2, 2);
  return op;
}

/* One moe op (graph @g) over random inputs: h [T, H], gate_up [E, 2F, H], down [E, H, F]
 * bf16, ids [T, k] of distinct experts (unsorted; any, repeats allowed, in every third row
 * when `repeats`; expert `none` never chosen when >= 0), weights [T, k] f32; f32 result.
 * m owns op: free it with h3_module_free. Returns false (a failed check) when the IR does
 * not parse. */
struct moe_case {
  h3_module *m;
  const h3_op *op;
  std::vector<buf> in;
};
static bool make_moe_case(moe_case &c, int64_t T, int64_t H, int64_t F, int64_t E, int k, bool repeats,
                          int none) {
  std::string text = "module @m config \"test\" {\n  graph @g(%h: " + ty("bf16", {T, H}) + ", %gu: " +
                     ty("bf16", {E, 2 * F, H}) + ", %dn: " + ty("bf16", {E, H, F}) + ", %ids: " +
                     ty("i32", {T, k}) + ", %w: " + ty("f32", {T, k}) + ") -> (y: " + ty("f32", {T, H}) +
                     ") {\n    %y = moe(%h, %gu, %dn, %ids, %w) {alpha = 1.702, limit = 7.0} : " +
                     ty("f32", {T, H}) + "\n    return %y\n  }\n}\n";
  c.m = parse(text);
  CHECK(c.m, "moe IR");
  if (!c.m) return false;
  c.op = first_op(c.m);
  c.in.clear();
  for (int i = 0; i < 5; i++) c.in.push_back(make(c.op->operands[i]->type));
  fill_random(c.in[0], -2, 2);
  fill_random(c.in[1], -0.3, 0.3);
  fill_random(c.in[2], -0.3, 0.3);
  fill_random(c.in[4], 0, 1);
  int32_t *idv = (int32_t *)c.in[3].p();
  for (int64_t t = 0; t < T; t++)
    for (int s = 0; s < k; s++) {
      int32_t e;
      bool again;
      do {
        e = (int32_t)(urand() * (double)E);
        again = e == none;
        for (int r = 0; r < s; r++) again |= idv[t * k + r] == e && !(repeats && t % 3 == 0);
      } while (again);
      idv[t * k + s] = e;
    }
  return true;
}

#endif
