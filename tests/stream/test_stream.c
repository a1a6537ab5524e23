/* test_stream.c: weight streaming under a device-memory budget (docs/streaming.md) on the
 * CPU: the byte sizes of --device-memory, the residency plan (include/h3/residency.h: which
 * blocks stay, the ring, the smallest budget and its error), which values stream
 * (runtime/stream.h, on hand-written IR: offsets, a stack read elsewhere, two loops over
 * one stack), and a program whose loop streams its blocks through rings of 1, 2 and 3 slots
 * with 0 .. 3 resident blocks giving bitwise the resident run's outputs, with the copies
 * done at once (the cpu emulation) and deferred to the ring_wait of their slot (the latest a
 * copy stream may finish them); the small H3 with --int8 with its weights made by an
 * emulated device (init_param: streamed stacks made block by block into host memory, int8
 * stacks made and quantized on the host) equal to the resident run; and on the full H3
 * (bf16 and --int8, compiled as h3c does) that the 50-block trunk streams and the plan
 * under 24 GiB with the cuda reserve (printed: what the GPU run should report). */
#include "../../runtime/stream.h"
#include "h3/frontend.h"
#include "h3/passes.h"
#include "h3/runtime.h"

#include <stdlib.h>
#include <string.h>

#include "../common/check.h"
#include "../common/diag_text.h"

static void sizes(void) {
  static const struct {
    const char *s;
    int64_t v;
  } good[] = {{"24GiB", 24LL << 30}, {"24G", 24LL << 30},     {"24gib", 24LL << 30},
              {"1.5GiB", 3LL << 29}, {"25GB", 25000000000LL}, {"512MiB", 512LL << 20},
              {"4096", 4096},        {"4096B", 4096},         {"2 KiB", 2048}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    int64_t v = -1;
    CHECK(h3_size_parse(good[i].s, &v) && v == good[i].v, "'%s' -> %lld", good[i].s, (long long)v);
  }
  static const char *const bad[] = {"", "GiB", "-1GiB", "24XB", "24 GiBs", "1e30", "nan", "0x10"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int64_t v;
    CHECK(!h3_size_parse(bad[i], &v), "'%s' parsed", bad[i]);
  }
}

static h3_residency plan(int64_t layers, int64_t block, int64_t fixed, int64_t budget,
                         h3_status want, const char *msg) {
  h3_diag d;
  h3_diag_init(&d);
  h3_residency_in in = {layers, block, fixed, budget};
  h3_residency r;
  h3_status st = h3_residency_plan(&in, &r, &d);
  CHECK(st == want, "plan(%lld, %lld, %lld, %lld): status %d", (long long)layers, (long long)block,
        (long long)fixed, (long long)budget, (int)st);
  if (msg) {
    char *text = diag_text(&d);
    CHECK(text && strstr(text, msg), "message lacks '%s': %s", msg, text ? text : "(none)");
    free(text);
  }
  h3_diag_free(&d);
  return r;
}

static void residency(void) {
  /* no budget, and a budget that holds everything: all resident, nothing streams */
  h3_residency r = plan(50, 100, 1000, 0, H3_OK, NULL);
  CHECK(r.resident_blocks == 50 && r.ring_slots == 0 && r.device_bytes == 6000 &&
            r.min_budget == 1100,
        "no budget: %lld resident, %lld slots", (long long)r.resident_blocks,
        (long long)r.ring_slots);
  r = plan(50, 100, 1000, 6000, H3_OK, NULL);
  CHECK(r.resident_blocks == 50 && r.ring_slots == 0 && r.streamed_bytes == 0, "exact fit streams");
  /* one byte short: a ring of 3 and 46 resident blocks (46 + 3 + fixed = 5900) */
  r = plan(50, 100, 1000, 5999, H3_OK, NULL);
  CHECK(r.resident_blocks == 46 && r.ring_slots == 3 && r.device_bytes == 5900 &&
            r.streamed_bytes == 400,
        "5999: %lld resident, %lld slots", (long long)r.resident_blocks, (long long)r.ring_slots);
  r = plan(50, 100, 1000, 1300, H3_OK, NULL);
  CHECK(r.resident_blocks == 0 && r.ring_slots == 3 && r.streamed_bytes == 5000,
        "1300: ring 3, none resident");
  r = plan(50, 100, 1000, 1299, H3_OK, NULL);
  CHECK(r.resident_blocks == 0 && r.ring_slots == 2 && r.device_bytes == 1200, "1299: ring 2");
  r = plan(50, 100, 1000, 1100, H3_OK, NULL);
  CHECK(r.resident_blocks == 0 && r.ring_slots == 1 && r.device_bytes == 1100, "1100: ring 1");
  /* too small: the error names the smallest budget */
  plan(50, 100, 1000, 1099, H3_ERR, "give --device-memory 1100 (");
  plan(50, 100, 1000, 1, H3_ERR, "cannot hold what must stay resident");
  /* two blocks: a ring never has more slots than streamed blocks */
  r = plan(2, 100, 1000, 1150, H3_OK, NULL);
  CHECK(r.resident_blocks == 0 && r.ring_slots == 1, "2 layers, 1150: ring 1");
  r = plan(2, 100, 1000, 1199, H3_OK, NULL);
  CHECK(r.resident_blocks == 0 && r.ring_slots == 1, "2 layers, 1199");
  /* nothing streamable: everything is fixed */
  r = plan(0, 0, 1000, 1000, H3_OK, NULL);
  CHECK(r.ring_slots == 0 && r.device_bytes == 1000, "nothing streamable");
  plan(0, 0, 1000, 999, H3_ERR, "nothing streams");
  /* the H3 trunk in bf16 under 24 GiB: 1.29 GB blocks, ~7.5 GB fixed */
  r = plan(50, 1290000000LL, 7500000000LL, 24LL << 30, H3_OK, NULL);
  CHECK(r.resident_blocks == 11 && r.ring_slots == 3 && r.device_bytes <= (24LL << 30),
        "H3 bf16 24 GiB: %lld resident", (long long)r.resident_blocks);
}

/* A program over a stack of 6 blocks: loop "a" reads rows [0, 6) of @w and @b, loop "b"
 * rows [1, 6) of @w (offset 1); @u is stacked but read whole (stays resident). */
static const char *ir_text =
    "module @s config \"tiny\" {\n"
    "  param @\"blk.{}.w\" : f32[6, 4] group \"blk\" dims 1 init normal(scale = 0.5)\n"
    "  param @\"blk.{}.b\" : f32[6, 4] group \"blk\" dims 1 init normal(scale = 0.5)\n"
    "  param @\"blk.{}.u\" : f32[6, 4] group \"blk\" dims 1 init normal(scale = 0.5)\n"
    "  program @p(%x0: f32[4]) -> (y: f32[4], z: f32[6, 4]) {\n"
    "    %x = loop(%x0) {count = 6, label = \"a\"} : f32[4] {\n"
    "      ^(%i: i32[], %x.1: f32[4]):\n"
    "        %w = index(@\"blk.{}.w\", %i) : f32[4]\n"
    "        %b = index(@\"blk.{}.b\", %i) : f32[4]\n"
    "        %m = mul(%x.1, %w) : f32[4]\n"
    "        %n = add(%m, %b) : f32[4]\n"
    "        yield %n\n"
    "    }\n"
    "    %y = loop(%x) {count = 5, label = \"b\"} : f32[4] {\n"
    "      ^(%j: i32[], %y.1: f32[4]):\n"
    "        %v = index(@\"blk.{}.w\", %j) {offset = 1} : f32[4]\n"
    "        %s = sub(%y.1, %v) : f32[4]\n"
    "        yield %s\n"
    "    }\n"
    "    %z = mul(@\"blk.{}.u\", @\"blk.{}.u\") : f32[6, 4]\n"
    "    return %y, %z\n"
    "  }\n"
    "}\n";

static h3_module *parse(void) {
  h3_diag d;
  h3_diag_init(&d);
  h3_module *m = h3_module_parse("s.ir", ir_text, strlen(ir_text), &d);
  if (!m || h3_verify_module(m, &d) != H3_OK) {
    h3_diag_print(&d, stderr);
    exit(1);
  }
  h3_diag_free(&d);
  return m;
}

static void analysis(h3_module *m) {
  h3_diag d;
  h3_diag_init(&d);
  h3_stream_set s;
  CHECK(h3_stream_find(m, &s, &d) == H3_OK, "find failed");
  CHECK(s.n == 2 && s.layers == 6 && s.block_bytes == 512 && s.n_loops == 2,
        "set: %d values, %lld layers, %lld bytes, %d loops", s.n, (long long)s.layers,
        (long long)s.block_bytes, s.n_loops);
  for (int i = 0; i < s.n; i++)
    CHECK(s.v[i].v->kind == H3_VALUE_PARAM && strstr(s.v[i].v->param->name, ".u") == NULL &&
              s.v[i].row_bytes == 16 && s.v[i].offset == 256 * i,
          "value %d", i);
  for (int i = 0; i < s.n_loops; i++)
    CHECK(s.loops[i].first == i && s.loops[i].count == 6 - i, "loop %d rows", i);
  /* @u (96 bytes) stays; @w and @b stream */
  CHECK(h3_stream_fixed_weight_bytes(m, &s) == 96, "fixed %lld",
        (long long)h3_stream_fixed_weight_bytes(m, &s));
  h3_stream_set_free(&s);
  h3_diag_free(&d);
}

/* The copy stream at its slowest: ring_copy only notes the copy, the slot's ring_wait does
 * it. A read of a slot before its wait, or a copy queued before the slot's last reader,
 * shows as outputs that differ from the resident run's. */
typedef struct {
  int slot;
  void *dst;
  const void *src;
  size_t bytes;
} pending_copy;
static pending_copy pending[64];
static int n_pending;

static h3_status late_copy(h3_backend *b, int slot, void *dst, const void *src, size_t bytes,
                           h3_diag *d) {
  (void)b, (void)d;
  CHECK(n_pending < 64, "too many copies in flight");
  if (n_pending < 64) pending[n_pending++] = (pending_copy){slot, dst, src, bytes};
  return H3_OK;
}

static h3_status late_wait(h3_backend *b, int slot, h3_diag *d) {
  (void)b, (void)d;
  int j = 0;
  for (int i = 0; i < n_pending; i++)
    if (pending[i].slot == slot)
      memcpy(pending[i].dst, pending[i].src, pending[i].bytes);
    else
      pending[j++] = pending[i];
  n_pending = j;
  return H3_OK;
}

static const h3_backend_ext late_ext = {.ring_copy = late_copy, .ring_wait = late_wait};

/* Runs p with the budget (0: none); out gets y (4 floats) and z (24). late: copies deferred
 * to their slot's wait (late_ext). */
static void run(h3_module *m, int64_t budget, bool late, float *out, h3_streaming *info) {
  h3_diag d;
  h3_diag_init(&d);
  h3_backend_options bo = {.threads = 1, .seed = 0};
  h3_backend *b = h3_backend_create("cpu", &bo, &d);
  if (b && late) b->ext = &late_ext;
  h3_weights *w = h3_weights_random(m, 7, &d);
  h3_runtime_options ro = {.device_memory = budget};
  h3_runtime *rt = b && w ? h3_runtime_new(m, b, w, &ro, &d) : NULL;
  const h3_graph *g = h3_module_graph(m, "p");
  float x0[4] = {0.5f, -1.25f, 3.0f, 0.125f};
  h3_host_tensor in[1] = {{"x0", g->inputs[0]->type, x0, 16}}, res[2];
  /* twice: a second pass of every loop reuses the ring */
  for (int it = 0; it < 2 && rt; it++) {
    CHECK(h3_runtime_run(rt, g, in, res, &d) == H3_OK, "run (budget %lld)", (long long)budget);
    if (d.errors) break;
    memcpy(out, res[0].data, 16);
    memcpy(out + 4, res[1].data, 96);
    free(res[0].data), free(res[1].data);
  }
  h3_diag_print(&d, stderr);
  CHECK(rt && !d.errors, "budget %lld failed", (long long)budget);
  if (rt) h3_runtime_streaming(rt, info);
  CHECK(n_pending == 0, "%d copies never waited for", n_pending);
  h3_runtime_free(rt);
  h3_weights_free(w);
  h3_backend_free(b);
  h3_diag_free(&d);
}

static void ring(h3_module *m) {
  float ref[28], got[28];
  h3_streaming info;
  run(m, 0, false, ref, &info);
  CHECK(info.ring_slots == 0, "no budget streams");
  /* fixed = @u (96) + the arena; blocks of 512 bytes: budgets for 1, 2, 3 slots and
     1 .. 3 resident blocks */
  run(m, 1 << 20, false, got, &info);
  CHECK(info.ring_slots == 0 && !memcmp(ref, got, sizeof ref), "a large budget changes nothing");
  run(m, 2000, false, got, &info); /* learn the fixed bytes from one streamed run */
  int64_t fixed = info.fixed_bytes;
  for (int extra = 1; extra <= 6; extra++) {
    for (int late = 0; late < 2; late++) {
      memset(got, 0, sizeof got);
      run(m, fixed + extra * 512, late, got, &info);
      int64_t want_slots = extra < 3 ? extra : 3, want_res = extra < 3 ? 0 : extra - 3;
      if (extra == 6) want_slots = 0, want_res = 6; /* all fit: nothing streams */
      CHECK(info.ring_slots == want_slots && info.resident_blocks == want_res,
            "%d blocks of budget: %lld slots, %lld resident", extra, (long long)info.ring_slots,
            (long long)info.resident_blocks);
      CHECK(!memcmp(ref, got, sizeof ref),
            "%d blocks of budget%s: outputs differ from the resident run", extra,
            late ? ", late copies" : "");
    }
  }
}

/* ---- weights made by the backend (cuda's init_param), emulated on the cpu ---------------- */
/* The "device" makes members [first, first + count) of p by copying them from this store
 * (h3_weights_random's bits, as cuda's init_param makes them): the loading paths of a
 * backend without a weight store (a streamed stack made block by block into host memory, an
 * --int8 stack made on the host and quantized there) run on the cpu. */
static const h3_weights *maker_store;

static h3_status maker_init(h3_backend *b, void *dst, const h3_param *p, uint64_t seed,
                            int64_t first, int64_t count, h3_diag *d) {
  (void)b, (void)seed, (void)d;
  const h3_weight *w = h3_weights_get(maker_store, p);
  size_t member = w->bytes / (size_t)h3_weights_tensor_count(p);
  memcpy(dst, (const char *)w->data + (size_t)first * member, (size_t)count * member);
  return H3_OK;
}

static const h3_backend_ext maker_ext = {
    .init_param = maker_init, .ring_copy = late_copy, .ring_wait = late_wait};

/* The small H3 with --int8 (dims 256, 5 blocks, 2 steps) as h3c compiles it. */
static h3_module *small_int8(void) {
  static const h3_config_override sets[] = {{"dim", 256}, {"heads", 2},      {"head_dim", 128},
                                            {"ffn", 256}, {"text_dim", 256}, {"layers", 5},
                                            {"steps", 2}};
  h3_diag d;
  h3_diag_init(&d);
  h3_frontend_options fo = {"tiny", (int)(sizeof sets / sizeof sets[0]), sets};
  h3_module *m = h3_frontend_load(H3_SOURCE_DIR "/models/minimax_h3.g", &fo, &d);
  h3_pass_options o = h3_pass_options_default();
  o.enable = H3_INT8_PASSES;
  o.int8 = "rotate=256";
  if (!m || h3_pass_pipeline_run(m, &o, &d) != H3_OK) {
    h3_diag_print(&d, stderr);
    exit(1);
  }
  h3_diag_free(&d);
  return m;
}

/* The sample program of m with the budget, weights from the store (maker: NULL, made by
 * maker_ext instead); out gets the outputs' bytes (cap bytes at most). */
static void run_sample(h3_module *m, const h3_weights *w, bool maker, int64_t budget, char *out,
                       size_t cap, h3_streaming *info) {
  h3_diag d;
  h3_diag_init(&d);
  h3_backend_options bo = {.threads = 2, .seed = 0};
  h3_backend *b = h3_backend_create("cpu", &bo, &d);
  if (b && maker) b->ext = &maker_ext;
  h3_runtime_options ro = {.device_memory = budget};
  h3_runtime *rt = b ? h3_runtime_new(m, b, maker ? NULL : w, &ro, &d) : NULL;
  const h3_graph *g = h3_module_graph(m, "sample");
  h3_host_tensor *in = calloc((size_t)g->n_inputs + 1, sizeof *in), res[2];
  h3_input_defaults defs = {3, -1};
  CHECK(rt && in && h3_inputs_fill_defaults(m, g, in, &defs, &d) == H3_OK &&
            h3_runtime_run(rt, g, in, res, &d) == H3_OK,
        "small int8 sample (budget %lld, maker %d)", (long long)budget, (int)maker);
  h3_diag_print(&d, stderr);
  size_t at = 0;
  for (int i = 0; !d.errors && i < g->n_outputs; i++) {
    if (at + res[i].bytes <= cap) memcpy(out + at, res[i].data, res[i].bytes);
    at += res[i].bytes;
    free(res[i].data);
  }
  if (rt) h3_runtime_streaming(rt, info);
  CHECK(n_pending == 0, "%d copies never waited for", n_pending);
  if (in) h3_host_tensors_free(in, g->n_inputs);
  h3_runtime_free(rt);
  h3_backend_free(b);
  h3_diag_free(&d);
}

/* Resident with the store == resident made by the backend == streamed made by the backend
 * (--int8 stacks quantized on the host), at a ring of 1 and of 3 with a resident block. */
static void maker(void) {
  h3_module *m = small_int8();
  h3_diag d;
  h3_diag_init(&d);
  h3_weights *w = h3_weights_random(m, 5, &d);
  maker_store = w;
  static char ref[1 << 16], got[1 << 16];
  h3_streaming info;
  run_sample(m, w, false, 0, ref, sizeof ref, &info);
  run_sample(m, w, true, 0, got, sizeof got, &info);
  CHECK(!memcmp(ref, got, sizeof ref), "weights made by the backend differ from the store's");
  run_sample(m, w, true, (int64_t)1 << 30, got, sizeof got, &info); /* all fit: the plan */
  int64_t smallest = info.min_budget, block = info.block_bytes;
  for (int extra = 0; extra <= 3; extra += 3) {
    memset(got, 0, sizeof got);
    run_sample(m, w, true, smallest + extra * block, got, sizeof got, &info);
    CHECK(info.ring_slots == (extra ? 3 : 1) && info.resident_blocks == (extra ? 1 : 0),
          "maker, %d blocks more: %lld slots, %lld resident", extra, (long long)info.ring_slots,
          (long long)info.resident_blocks);
    CHECK(!memcmp(ref, got, sizeof ref),
          "maker, %d blocks more: outputs differ from the resident run", extra);
  }
  h3_weights_free(w);
  h3_module_free(m);
  h3_diag_free(&d);
}

/* The full H3 compiled as `h3c compile models/minimax_h3.g --config full [--int8]`: the
 * trunk's 50 blocks stream (block bytes: the per-layer weights of `blocks.*`, or their
 * int8 codes and scales), the refiner stays; the plan under 24 GiB with 1 GiB of reserve. */
static void full_h3(bool int8) {
  h3_diag d;
  h3_diag_init(&d);
  h3_frontend_options fo = {.config = "full"};
  h3_module *m = h3_frontend_load(H3_SOURCE_DIR "/models/minimax_h3.g", &fo, &d);
  h3_pass_options o = h3_pass_options_default();
  if (int8) o.enable = H3_INT8_PASSES;
  CHECK(m && h3_pass_pipeline_run(m, &o, &d) == H3_OK, "the full H3 does not compile");
  if (!m || d.errors) {
    h3_diag_print(&d, stderr);
    h3_module_free(m);
    h3_diag_free(&d);
    return;
  }
  h3_stream_set s;
  CHECK(h3_stream_find(m, &s, &d) == H3_OK, "find");
  int64_t per_layer = 0, arenas = 0;
  for (int i = 0; i < m->n_params; i++)
    if (!strncmp(m->params[i]->name, "blocks.", 7))
      per_layer += h3_type_bytes(&m->params[i]->type) / 50;
  for (int i = 0; i < s.n; i++)
    CHECK(!s.v[i].v->param || !strncmp(s.v[i].v->param->name, "blocks.", 7),
          "a non-trunk value streams");
  /* bf16: the block is the layer's weights (each row 256-aligned, all are multiples of 256) */
  CHECK(s.layers == 50 && (int8 ? s.block_bytes < per_layer * 3 / 4 : s.block_bytes == per_layer),
        "%s: %lld layers, block %lld bytes, layer weights %lld", int8 ? "int8" : "bf16",
        (long long)s.layers, (long long)s.block_bytes, (long long)per_layer);
  for (int i = 0; i < m->n_graphs; i++) {
    const h3_attr *a = h3_graph_attr(m->graphs[i], "arena_bytes");
    if (a && a->kind == H3_ATTR_INT && a->i > 0) arenas += a->i;
  }
  h3_residency_in in = {s.layers, s.block_bytes,
                        h3_stream_fixed_weight_bytes(m, &s) + arenas + ((int64_t)1 << 30),
                        24LL << 30};
  h3_residency r;
  CHECK(h3_residency_plan(&in, &r, &d) == H3_OK && r.ring_slots == 3, "24 GiB plan");
  printf(
      "  full H3 %s under 24 GiB: block %.3f GB, fixed %.3f GB (arenas %.3f GB + 1 GiB reserve), "
      "%lld resident + ring %lld, %.2f GB streamed per step, smallest budget %lld bytes "
      "(%.2f GiB)\n",
      int8 ? "int8" : "bf16", s.block_bytes * 1e-9, in.fixed_bytes * 1e-9, arenas * 1e-9,
      (long long)r.resident_blocks, (long long)r.ring_slots, r.streamed_bytes * 1e-9,
      (long long)r.min_budget, (double)r.min_budget / (1 << 30));
  h3_stream_set_free(&s);
  h3_module_free(m);
  h3_diag_free(&d);
}

int main(void) {
  sizes();
  residency();
  h3_module *m = parse();
  analysis(m);
  ring(m);
  h3_module_free(m);
  maker();
  full_h3(false);
  full_h3(true);
  return check_summary("stream");
}
