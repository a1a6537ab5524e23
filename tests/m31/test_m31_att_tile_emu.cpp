/* test_m31_att_tile_emu.cpp: the row-tiled paged / sparse attention (kernels/m31_msa_tile.cu)
 * run on the host under tests/codegen/host_emu.h (a thread per CUDA thread; ldmatrix, mma,
 * shuffles and barriers block-wide), launched as runtime/cuda/cuda_m31_msa_tile.c launches
 * it, and compared with the CPU backend's paged_attention / sparse_attention on random
 * inputs: head_dim 128, 16 q heads per kv head, one scrambled page table (or one per group of
 * rows: a batched verify's sequences, each at its own positions, a group spanning two blocks
 * of rows); rows from position
 * 0 and from inside the cache, blocks of rows that straddle a page, a partial last block of
 * rows; sparse selections of every causal block and random ones that differ between rows
 * (the current block forced, -1 padding after the blocks or before them, a row that selects
 * none); pages of 16 (a key tile spans pages) and 64 (a tile is a page). bf16 output within
 * 1e-4 NMSE (m31_emu's attention limit), NaN / Inf counted as mismatches.
 * Emulation costs ~80 ms per (row, kv head, 64-key tile) on two cores, so the cases are small
 * (a launch needs no row threshold: cuda_m31_msa_tile.c's 64 rows only pick the kernel).
 */
#include "emu_harness.h"

#include <algorithm>

namespace tile_k {
#define IX_T int
#define O_T h3_bf16
#define H3_KV_ATT_TILE_NAME emu_att_tile
#include "m31_msa_tile.cu"
} // namespace tile_k

enum sel_mode { SEL_NONE, SEL_ALL, SEL_RANDOM };

struct tile_case {
  const char *name;
  int kind;          /* 0 paged, 2 sparse */
  int64_t T, Hk, page, pos0;
  int64_t topk;      /* sparse: selected blocks per row and kv head */
  sel_mode sel;
  int64_t R = 1;     /* page tables: group b = rows b T / R .. at positions pos0 + 37 b .. */
};

/* A page table of NP distinct pages of 1..P-1 in random order. */
static void fill_table(int32_t *pt, int64_t NP, int64_t P) {
  std::vector<int32_t> pages;
  for (int64_t i = 1; i < P; i++) pages.push_back((int32_t)i);
  for (size_t i = pages.size() - 1; i > 0; i--) std::swap(pages[i], pages[(size_t)(urand() * (double)(i + 1))]);
  std::copy(pages.begin(), pages.begin() + NP, pt);
}

/* Row t's selection for one kv head: blocks 0..nb-1 (SEL_ALL), or the current block and a
 * random subset of the earlier ones (at most topk, ascending); -1 after them, or before them
 * in every third list; row 5 of a random case selects none. */
static void fill_sel(int32_t *sel, int64_t nb, int64_t topk, sel_mode mode, int64_t t, int64_t h) {
  std::vector<int32_t> s;
  if (mode == SEL_ALL)
    for (int64_t b = 0; b < nb; b++) s.push_back((int32_t)b);
  else if (t != 5) {
    for (int64_t b = 0; b + 1 < nb; b++)
      if (urand() < 0.5) s.push_back((int32_t)b);
    for (size_t i = s.size(); i > 1; i--) std::swap(s[i - 1], s[(size_t)(urand() * (double)i)]);
    s.resize(std::min<size_t>(s.size(), (size_t)topk - 1));
    s.push_back((int32_t)(nb - 1));
    std::sort(s.begin(), s.end());
  }
  CHECK((int64_t)s.size() <= topk, "selection of %zu blocks (topk %lld)", s.size(), (long long)topk);
  std::fill(sel, sel + topk, -1);
  std::copy(s.begin(), s.end(), sel + ((t + h) % 3 == 2 ? topk - (int64_t)s.size() : 0));
}

static void test_tile(const tile_case &c) {
  const int64_t T = c.T, Hk = c.Hk, Hq = 16 * Hk, D = 128, page = c.page, topk = c.topk, R = c.R;
  const int64_t per = T / R, last = c.pos0 + 37 * (R - 1) + per - 1; /* the largest position */
  const int64_t NP = last / page + 2, P = R * NP + 3; /* a spare page in each table */
  const std::string qt = ty("bf16", {T, Hq, D}), ct = ty("bf16", {P, page, Hk, D});
  const std::string sel_in = c.kind == 2 ? ", %sel: " + ty("i32", {T, Hk, topk}) : "";
  const std::string call = c.kind == 2 ? "sparse_attention(%q, %kc, %vc, %sel, %pos, %pt)"
                                       : "paged_attention(%q, %kc, %vc, %pos, %pt)";
  h3_module *m = parse("module @m config \"test\" {\n  graph @g(%q: " + qt + ", %kc: " + ct + ", %vc: " + ct +
                       sel_in + ", %pos: " + ty("i32", {T}) + ", %pt: " + (R > 1 ? ty("i32", {R, NP}) : ty("i32", {NP})) + ") -> (o: " + qt +
                       ") {\n    %o = " + call + " {scale = 0.088, page = " + std::to_string(page) + "} : " + qt +
                       "\n    return %o\n  }\n}\n");
  CHECK(m, "%s IR", c.name);
  if (!m) return;
  const h3_op *op = first_op(m);
  std::vector<buf> in;
  for (int i = 0; i < op->n_operands; i++) {
    in.push_back(make(op->operands[i]->type));
    if (i < 3) fill_random(in.back(), -2, 2); /* q and the caches */
  }
  const int ipos = c.kind == 2 ? 4 : 3, ipt = c.kind == 2 ? 5 : 4;
  int32_t *pos = (int32_t *)in[ipos].p();
  for (int64_t t = 0; t < T; t++) pos[t] = (int32_t)(c.pos0 + 37 * (t / per) + t % per);
  for (int64_t b = 0; b < R; b++) fill_table((int32_t *)in[ipt].p() + b * NP, NP, P);
  if (c.kind == 2)
    for (int64_t t = 0; t < T; t++)
      for (int64_t h = 0; h < Hk; h++)
        fill_sel((int32_t *)in[3].p() + (t * Hk + h) * topk, pos[t] / page + 1, topk, c.sel, t, h);
  std::vector<buf> want = cpu_run(op, in);
  buf out = make(op->results[0]->type);
  const h3_bf16 *q = (const h3_bf16 *)in[0].p(), *kc = (const h3_bf16 *)in[1].p(), *vc = (const h3_bf16 *)in[2].p();
  const int *sel = c.kind == 2 ? (const int *)in[3].p() : nullptr, *pt = (const int *)in[ipt].p();
  int kind = c.kind, iHk = (int)Hk, ipage = (int)page, itopk = (int)topk, iper = R > 1 ? (int)per : 0;
  long long TT = T, NPP = NP;
  const int64_t tiles = R > 1 ? R * ((per + H3T_ROWS - 1) / H3T_ROWS) : (T + H3T_ROWS - 1) / H3T_ROWS;
  emu_launch3(tiles * Hk, 1, 1, H3T_THREADS, [&] { /* as cuda_m31_msa_tile.c launches it */
    tile_k::emu_att_tile(q, kc, vc, pos, pt, sel, (h3_bf16 *)out.p(), kind, TT, iHk, ipage, itopk, 0.088f, iper,
                         NPP);
  });
  compare(c.name, out, want[0], 1e-4);
  h3_module_free(m);
}

int main(void) {
  elapsed();
  /* paged: 64 rows from 0 (the launcher's least; a block's keys are one tile), then rows from
     inside the cache, 300.. in pages of 16 (every block of rows straddles a page; the last
     block has 3 rows) */
  test_tile({"paged T 64 from 0", 0, 64, 2, 16, 0, 0, SEL_NONE});
  test_tile({"paged T 67 from 300 (partial block)", 0, 67, 1, 16, 300, 0, SEL_NONE});
  /* sparse == dense: every causal block selected (positions 60..95: at most 6 blocks, topk 8) */
  test_tile({"sparse all blocks T 36 from 60", 2, 36, 1, 16, 60, 8, SEL_ALL});
  /* sparse, selections that differ between rows (the union is walked; rows mask the rest) */
  test_tile({"sparse random T 24 from 150 page 16", 2, 24, 2, 16, 150, 4, SEL_RANDOM});
  test_tile({"sparse random T 16 from 120 page 64", 2, 16, 1, 64, 120, 2, SEL_RANDOM});
  /* a batched verify: 3 sequences of 9 rows (a block of 8 rows and one of 1 each), each its own
     scrambled table and positions (90.., 127.., 164..) */
  test_tile({"paged 3 sequences x 9 rows from 90", 0, 27, 1, 16, 90, 0, SEL_NONE, 3});
  test_tile({"sparse random 3 sequences x 9 rows from 90", 2, 27, 2, 16, 90, 4, SEL_RANDOM, 3});
  return check_summary("m31_att_tile_emu");
}
