/* h3exec: runs an h3 plan. Thin: parses flags, loads the plan, weights and inputs, runs the
 * entry program (or one graph) on a backend, writes outputs, the trace and the report.
 *
 *   h3exec PLAN [--graph NAME] [--backend cpu|cuda|auto] [--weights FILE|random] [--seed N]
 *          [--inputs FILE] [--out FILE] [--steps N] [--prompt FILE | --prompt-len N]
 *          [--max-new-tokens N] [--warmup N] [--iterations N] [--threads N]
 *          [--attention NAME] [--profile FILE.json] [--dump-ops KINDS --dump FILE]
 *          [--device-memory SIZE] [--gpus N] [--help]
 *   (--backend cuda --gpus N: N rank processes, this one their supervisor: cli/gpu_ranks.h)
 *   h3exec PLAN (--requests FILE | --random-prompts N --prompt-len L --output-len M)
 *          [--out RESULTS.jsonl] [--concurrency C] [--request-rate R] [--temperature T]
 *          [--kv-pages N] [--summary FILE.json] [--profile FILE.json]
 *                                                    (M3.1 serving: cli/serve_run.c)
 *
 * Exit status: 0 on success, 1 when the run fails (bad plan, weights, inputs, runtime
 * error), 2 for bad flags. Nothing is written unless the run succeeds (outputs and traces
 * are written atomically at the end).
 */
#include "dump_ops.h"
#include "gpu_ranks.h"
#include "moe_stats.h"
#include "ranks.h"
#include "serve_run.h"
#include "h3/backend.h"
#include "h3/bf16.h"
#include "h3/comm.h"
#include "h3/op_registry.h"
#include "h3/plan.h"
#include "h3/residency.h"
#include "h3/runtime.h"
#include "h3/safetensors.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  const char *plan, *graph, *backend, *weights, *inputs, *out, *prompt, *profile, *attention;
  const char *dump_ops, *dump;
  uint64_t seed;
  int64_t steps, prompt_len, max_new_tokens;
  int64_t device_memory; /* bytes; 0: no budget */
  int warmup, iterations, threads;
  int gpus; /* --gpus N; 0: not given (the plan's rank count must then be 1) */
  bool check_finite, moe_stats;
  serve_flags serve; /* prompt_len is the one above */
} options;

static void usage(FILE *f) {
  fprintf(f,
          "usage: h3exec PLAN [options]\n"
          "\n"
          "Runs the plan's entry program (H3: `sample`, M3.1: `generate`) or one graph.\n"
          "  --graph NAME          run this graph instead of the entry program\n"
          "  --backend B           cpu | cuda | auto (default auto: cuda when usable, else cpu)\n"
          "  --weights FILE|random safetensors weights, or seeded random weights (default)\n"
          "  --seed N              seed of random weights, noise and default inputs (default 0)\n"
          "  --inputs FILE         safetensors file with the graph's inputs (by input name);\n"
          "                        inputs left out get defaults (see docs/running.md)\n"
          "  --out FILE            write the outputs (by output name) as safetensors\n"
          "  --steps N             H3: denoising steps; must equal the plan's compiled steps\n"
          "  --prompt FILE         M3.1: prompt token ids (text: integers; or .safetensors)\n"
          "  --prompt-len N        M3.1: random prompt of N tokens (must equal prompt_len)\n"
          "  --max-new-tokens N    M3.1: tokens to generate (must equal max_new_tokens)\n"
          "  --warmup N            untimed runs before the measured ones (default 0)\n"
          "  --iterations N        measured runs (default 1)\n"
          "  --threads N           cpu worker threads (default 2)\n"
          "  --attention NAME      attention implementation: cuda: " H3_ATTENTION_NAMES "\n"
          "                        (default: the first); cpu: reference\n"
          "  --profile FILE.json   Chrome trace of the measured runs (serving: of the serving), one\n"
          "                        event per op, and the per-op table in the report\n"
          "  --dump-ops KINDS      with --dump FILE: the results of every execution of these op\n"
          "                        kinds (comma-separated, e.g. router_topk,moe, or all) as\n"
          "                        safetensors, to find where two backends part; runs callees\n"
          "                        op by op (no CUDA graphs); names: docs/running.md\n"
          "  --moe-stats           count the distinct experts each moe call's rows name (the\n"
          "                        experts whose weights it reads), by row count, after the\n"
          "                        report; runs callees op by op (no CUDA graphs): a measure of\n"
          "                        routing, not of time (serving too)\n"
          "  --check-finite        fail (exit 1, no --out written) when an output holds NaN or Inf\n"
          "  --device-memory SIZE  device bytes the run may hold (e.g. 24GiB; default\n"
          "                        $H3_DEVICE_MEMORY, else no limit): the blocks that do not\n"
          "                        fit stream from host memory behind the compute\n"
          "                        (docs/streaming.md)\n"
          "  --gpus N              run a parallel plan (h3c compile --gpus N) on N ranks, rank 0\n"
          "                        writing the outputs: --backend cuda: one process per GPU\n"
          "                        (rank r on device r), collectives through NCCL (not yet run\n"
          "                        on several GPUs); cpu or auto: each rank a thread of this\n"
          "                        process, collectives emulated (docs/parallel.md)\n"
          "\n"
          "Serving (M3.1; docs/running.md \"Serving\"):\n"
          "  --requests FILE       serve the requests of a JSON Lines file (- : standard input)\n"
          "  --random-prompts N    serve N random requests of --prompt-len L prompt tokens and\n"
          "  --output-len M        M new tokens each\n"
          "  --temperature T       of the random requests (default 0: greedy)\n"
          "  --out FILE            the results, one JSON line per request as it finishes\n"
          "  --concurrency C       rows decoded at once (default: the plan's seqs)\n"
          "  --request-rate R      Poisson arrivals at R requests/s (default: the file's\n"
          "                        arrival times, else all at once)\n"
          "  --kv-pages N          use only N pages of the plan's KV caches (page 0 included)\n"
          "  --margins             results give each token's decision margin\n"
          "  --mixed-steps         prefill chunks also advance the running requests\n"
          "  --no-prefill-group    prefill prompts one by one even where the plan groups them\n"
          "                        (serve_prefill_group: h3c --set prefill_group=P)\n"
          "  --speculative dspark  DSpark speculative rounds instead of decode steps (the\n"
          "                        plan's gamma; draft weights from --weights)\n"
          "  --spec-force-accept A:FILE  BENCH ONLY, with --speculative: every round's draft\n"
          "                        proposes FILE's tokens (the results of a plain greedy run of\n"
          "                        the same requests) for its first A-1 tokens; marked as such\n"
          "                        in the report, the summary and every result line\n"
          "  --summary FILE.json   the report as one JSON object\n"
          "  --version             h3's version\n"
          "  --help                this text\n");
}

#define FLAGS_HINT "hint: run 'h3exec --help' for the flags\n"

static int flag_error(const char *fmt, const char *arg) {
  fprintf(stderr, "h3exec: error: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n" FLAGS_HINT);
  return 2;
}

static int parse_int(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
  char *end;
  errno = 0;
  long long v = s ? strtoll(s, &end, 10) : 0;
  if (!s || !*s || *end || errno || v < lo || v > hi) {
    fprintf(stderr, "h3exec: error: %s expects an integer in [%lld, %lld], got '%s'\n" FLAGS_HINT, flag,
            (long long)lo, (long long)hi, s ? s : "");
    return 0;
  }
  *out = v;
  return 1;
}

static int parse_real(const char *flag, const char *s, double lo, double hi, double *out) {
  char *end;
  errno = 0;
  double v = s ? strtod(s, &end) : 0;
  if (!s || !*s || *end || errno || !(v >= lo && v <= hi)) {
    fprintf(stderr, "h3exec: error: %s expects a number in [%g, %g], got '%s'\n" FLAGS_HINT, flag, lo, hi,
            s ? s : "");
    return 0;
  }
  *out = v;
  return 1;
}

/* Prints an output named `tokens` (i32, M3.1's generated ids): [N] on one line; [N, B] (a
 * batch: token k of sequence b at [k, b]) one line per sequence. */
static void print_tokens(FILE *f, const h3_host_tensor *out, int n_out) {
  for (int i = 0; i < n_out; i++) {
    const h3_host_tensor *t = &out[i];
    if (!t->name || strcmp(t->name, "tokens") || t->type.dtype != H3_I32 || !t->data ||
        t->type.rank < 1 || t->type.rank > 2)
      continue;
    int64_t n = t->type.dims[0], b = t->type.rank == 2 ? t->type.dims[1] : 1;
    fprintf(f, "=== generated tokens ===\n");
    for (int64_t s = 0; s < b; s++) {
      fprintf(f, b > 1 ? "  sequence %lld:" : " ", (long long)s);
      for (int64_t k = 0; k < n; k++) fprintf(f, " %d", ((const int32_t *)t->data)[k * b + s]);
      fprintf(f, "\n");
    }
  }
}

/* NaN and Inf counts of each float output into nan[i], inf[i] (0 for integer outputs);
 * returns how many outputs hold any. */
static int count_non_finite(const h3_host_tensor *out, int n_out, int64_t *nan, int64_t *inf) {
  int bad = 0;
  for (int i = 0; i < n_out; i++) {
    const h3_host_tensor *t = &out[i];
    nan[i] = inf[i] = 0;
    int64_t n = t->data ? h3_type_numel(&t->type) : 0;
    for (int64_t k = 0; k < n; k++) {
      double v;
      switch (t->type.dtype) {
      case H3_F32: v = ((const float *)t->data)[k]; break;
      case H3_F64: v = ((const double *)t->data)[k]; break;
      case H3_BF16: v = h3_bf16_to_f32(((const uint16_t *)t->data)[k]); break;
      case H3_F16: v = h3_f16_to_f32(((const uint16_t *)t->data)[k]); break;
      default: k = n; continue; /* integers are always finite */
      }
      nan[i] += isnan(v), inf[i] += isinf(v);
    }
    bad += nan[i] + inf[i] > 0;
  }
  return bad;
}

/* The outputs that hold NaN or Inf, one line each with the counts. */
static void print_non_finite(FILE *f, const h3_host_tensor *out, int n_out, const int64_t *nan,
                             const int64_t *inf) {
  fprintf(f, "=== outputs with NaN or Inf ===\n");
  for (int i = 0; i < n_out; i++)
    if (nan[i] + inf[i] > 0)
      fprintf(f, "  %-16s: %lld NaN, %lld Inf of %lld values\n", out[i].name ? out[i].name : "?",
              (long long)nan[i], (long long)inf[i], (long long)h3_type_numel(&out[i].type));
}

/* The serving flags go together with serving, and serving with none of the single-run
 * flags. */
static int check_serve_flags(options *o) {
  serve_flags *f = &o->serve;
  f->out = o->out;
  f->seed = o->seed;
  if (f->oracle && !f->speculative)
    return flag_error("--spec-force-accept needs --speculative dspark%s", "");
  if (f->requests && f->random_prompts)
    return flag_error("--requests and --random-prompts exclude each other%s", "");
  if (f->random_prompts && (o->prompt_len < 1 || f->output_len < 1))
    return flag_error("--random-prompts N needs --prompt-len L and --output-len M%s", "");
  f->prompt_len = o->prompt_len;
  if (!serve_wanted(f)) {
    if (f->output_len || f->concurrency || f->kv_pages || f->summary || f->request_rate ||
        f->temperature || f->margins || f->mixed || f->no_prefill_group || f->speculative ||
        f->oracle)
      return flag_error("%s", "--output-len, --concurrency, --kv-pages, --request-rate, "
                              "--temperature, --margins, --mixed-steps, --no-prefill-group, "
                              "--speculative and --summary "
                              "are for serving (--requests or --random-prompts)");
    return 0;
  }
  if (o->graph || o->inputs || o->prompt || o->dump_ops || o->warmup ||
      o->iterations != 1 || o->check_finite || o->max_new_tokens > 0 || o->steps > 0 ||
      (f->requests && o->prompt_len > 0))
    return flag_error("%s", "serving takes none of --graph, --inputs, --prompt, "
                            "--dump-ops, --warmup, --iterations, --check-finite, --steps, "
                            "--max-new-tokens (and --prompt-len only with --random-prompts)");
  return 0;
}

/* The host's available memory in bytes (MemAvailable of /proc/meminfo), 0 when unknown. */
static int64_t host_available(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  char line[256];
  long long kib = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1) break;
  if (f) fclose(f);
  return (int64_t)kib * 1024;
}

/* Weights held in host memory (the CPU backend, or a store to upload from) must fit: an
 * error before any large allocation, naming both sizes, when they cannot. */
static h3_status host_memory_check(const h3_plan *p, const char *plan, h3_diag *d) {
  int64_t bytes = p->weight_bytes, avail = host_available(); /* the manifest's, checked by the reader */
  if (avail <= 0 || bytes <= avail) return H3_OK;
  h3_diag_error(d, (h3_span){0},
                "compile a smaller config (--config small or tiny), or run on a machine with more "
                "memory (or on the GPU: --backend cuda)",
                "%s: the weights take %.1f GiB of host memory; this machine has %.1f GiB available",
                plan, (double)bytes / (1 << 30), (double)avail / (1 << 30));
  return H3_ERR;
}

/* Returns 0 to run, 1 after --help, 2 on a bad flag, 3 after --version. */
static int parse_flags(int argc, char **argv, options *o) {
  *o = (options){.backend = "auto",
                 .weights = "random",
                 .iterations = 1,
                 .threads = 2,
                 .steps = -1,
                 .prompt_len = -1,
                 .max_new_tokens = -1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return 1;
    if (strcmp(a, "--version") == 0) return 3;
    if (strcmp(a, "--check-finite") == 0) {
      o->check_finite = true;
      continue;
    }
    if (strcmp(a, "--moe-stats") == 0) {
      o->moe_stats = true;
      continue;
    }
    if (strcmp(a, "--margins") == 0) {
      o->serve.margins = true;
      continue;
    }
    if (strcmp(a, "--mixed-steps") == 0) {
      o->serve.mixed = true;
      continue;
    }
    if (strcmp(a, "--no-prefill-group") == 0) {
      o->serve.no_prefill_group = true;
      continue;
    }
    if (a[0] != '-') {
      if (o->plan) return flag_error("more than one plan given ('%s')", a);
      o->plan = a;
      continue;
    }
    static const char *const with_value[] = {
        "--graph",  "--backend",    "--weights", "--seed",       "--inputs",
        "--out",    "--steps",      "--prompt",  "--prompt-len", "--max-new-tokens",
        "--warmup", "--iterations", "--threads", "--profile",    "--attention",
        "--dump-ops", "--dump", "--requests", "--random-prompts", "--output-len",
        "--temperature", "--concurrency", "--request-rate", "--kv-pages", "--summary",
        "--speculative", "--spec-force-accept", "--device-memory", "--gpus", NULL};
    int known = 0;
    for (int k = 0; with_value[k]; k++) known |= strcmp(a, with_value[k]) == 0;
    if (!known) return flag_error("unknown flag '%s'", a);
    if (i + 1 >= argc) return flag_error("%s needs a value", a);
    const char *v = argv[++i];
    int64_t n;
    if (strcmp(a, "--graph") == 0)
      o->graph = v;
    else if (strcmp(a, "--backend") == 0) {
      if (strcmp(v, "cpu") && strcmp(v, "cuda") && strcmp(v, "auto"))
        return flag_error("--backend must be cpu, cuda or auto, got '%s'", v);
      o->backend = v;
    } else if (strcmp(a, "--weights") == 0)
      o->weights = v;
    else if (strcmp(a, "--inputs") == 0)
      o->inputs = v;
    else if (strcmp(a, "--out") == 0)
      o->out = v;
    else if (strcmp(a, "--prompt") == 0)
      o->prompt = v;
    else if (strcmp(a, "--profile") == 0)
      o->profile = v;
    else if (strcmp(a, "--attention") == 0)
      o->attention = v;
    else if (strcmp(a, "--dump-ops") == 0)
      o->dump_ops = v;
    else if (strcmp(a, "--dump") == 0)
      o->dump = v;
    else if (strcmp(a, "--requests") == 0)
      o->serve.requests = v;
    else if (strcmp(a, "--summary") == 0)
      o->serve.summary = v;
    else if (strcmp(a, "--device-memory") == 0) {
      if (!h3_size_parse(v, &o->device_memory) || o->device_memory < 1)
        return flag_error("--device-memory expects a size such as 24GiB, 512MiB or a byte count, "
                          "got '%s'", v);
    }
    else if (strcmp(a, "--spec-force-accept") == 0) {
      char *end;
      errno = 0;
      long long n = strtoll(v, &end, 10);
      if (errno || end == v || *end != ':' || !end[1] || n < 1 || n > 1000000)
        return flag_error("--spec-force-accept takes A:FILE (A >= 1 accepted tokens per round, "
                          "FILE a plain run's results), got '%s'", v);
      o->serve.force_accept = n;
      o->serve.oracle = end + 1;
    } else if (strcmp(a, "--speculative") == 0) {
      if (strcmp(v, "dspark")) return flag_error("--speculative takes dspark, got '%s'", v);
      o->serve.speculative = true;
    }
    else if (strcmp(a, "--random-prompts") == 0) {
      if (!parse_int(a, v, 1, INT32_MAX, &o->serve.random_prompts)) return 2;
    } else if (strcmp(a, "--output-len") == 0) {
      if (!parse_int(a, v, 1, INT32_MAX, &o->serve.output_len)) return 2;
    } else if (strcmp(a, "--concurrency") == 0) {
      if (!parse_int(a, v, 1, INT32_MAX, &o->serve.concurrency)) return 2;
    } else if (strcmp(a, "--kv-pages") == 0) {
      if (!parse_int(a, v, 2, INT32_MAX, &o->serve.kv_pages)) return 2;
    } else if (strcmp(a, "--temperature") == 0) {
      if (!parse_real(a, v, 0, 1e6, &o->serve.temperature)) return 2;
    } else if (strcmp(a, "--request-rate") == 0) {
      if (!parse_real(a, v, 1e-9, 1e9, &o->serve.request_rate)) return 2;
    }
    else if (strcmp(a, "--seed") == 0) {
      if (!parse_int(a, v, 0, INT64_MAX, &n)) return 2;
      o->seed = (uint64_t)n;
    } else if (strcmp(a, "--steps") == 0) {
      if (!parse_int(a, v, 1, INT32_MAX, &o->steps)) return 2;
    } else if (strcmp(a, "--prompt-len") == 0) {
      if (!parse_int(a, v, 1, INT32_MAX, &o->prompt_len)) return 2;
    } else if (strcmp(a, "--max-new-tokens") == 0) {
      if (!parse_int(a, v, 1, INT32_MAX, &o->max_new_tokens)) return 2;
    } else if (strcmp(a, "--warmup") == 0) {
      if (!parse_int(a, v, 0, 1000000, &n)) return 2;
      o->warmup = (int)n;
    } else if (strcmp(a, "--iterations") == 0) {
      if (!parse_int(a, v, 1, 1000000, &n)) return 2;
      o->iterations = (int)n;
    } else if (strcmp(a, "--threads") == 0) {
      if (!parse_int(a, v, 1, 256, &n)) return 2;
      o->threads = (int)n;
    } else if (strcmp(a, "--gpus") == 0) {
      if (!parse_int(a, v, 1, H3_COMM_MAX_RANKS, &n)) return 2;
      o->gpus = (int)n;
    }
  }
  const char *env = getenv("H3_DEVICE_MEMORY");
  if (!o->device_memory && env && *env &&
      (!h3_size_parse(env, &o->device_memory) || o->device_memory < 1))
    return flag_error("H3_DEVICE_MEMORY expects a size such as 24GiB, got '%s'", env);
  if (!o->plan) return flag_error("no plan given%s", "");
  if (o->prompt && o->prompt_len > 0)
    return flag_error("--prompt and --prompt-len exclude each other%s", "");
  if (!o->dump_ops != !o->dump)
    return flag_error("--dump-ops KINDS and --dump FILE go together%s", "");
  if (o->dump_ops && o->moe_stats)
    return flag_error("--dump-ops and --moe-stats exclude each other (both observe every op): "
                      "run them in two runs%s", "");
  return check_serve_flags(o);
}

/* --steps / --max-new-tokens against the compiled config key. */
static h3_status check_compiled(const h3_module *m, const char *flag, const char *key, int64_t want,
                                h3_diag *d) {
  if (want < 0) return H3_OK;
  int64_t have = h3_module_config(m, key, -1);
  h3_span none = {0};
  if (have < 0) {
    h3_diag_error(d, none, "drop the flag: this plan's model does not take it",
                  "%s: the plan's model (%s) has no config key '%s'", flag, m->model ? m->model : "?", key);
    return H3_ERR;
  }
  if (have != want) {
    char hint[160];
    snprintf(hint, sizeof hint, "recompile the plan: h3c compile MODEL.g --set %s=%lld -o PLAN",
             key, (long long)want);
    h3_diag_error(d, none, hint, "%s %lld: the plan was compiled with %s = %lld", flag,
                  (long long)want, key, (long long)have);
    return H3_ERR;
  }
  return H3_OK;
}

/* Loads --prompt into the graph's token input (`prompt` or `tokens`). */
static h3_status load_prompt(const options *o, const h3_module *m, const h3_graph *g,
                             h3_host_tensor *in, h3_diag *d) {
  h3_span none = {0};
  int idx = -1;
  for (int i = 0; i < g->n_inputs; i++)
    if (g->inputs[i]->name &&
        (!strcmp(g->inputs[i]->name, "prompt") || !strcmp(g->inputs[i]->name, "tokens")))
      idx = i;
  if (idx < 0 || h3_dtype_is_float(g->inputs[idx]->type.dtype)) {
    h3_diag_error(d, none, "--prompt is for M3.1 plans",
                  "--prompt: graph '%s' has no integer input 'prompt' or 'tokens'", g->name);
    return H3_ERR;
  }
  const h3_type *want = &g->inputs[idx]->type;
  int64_t need = h3_type_numel(want), vocab = h3_module_config(m, "vocab", INT32_MAX);
  int64_t *ids = malloc((size_t)(need + 1) * sizeof *ids), n = 0;
  if (!ids) return H3_ERR;
  size_t len = strlen(o->prompt);
  h3_status st = H3_OK;
  if (len > 12 && strcmp(o->prompt + len - 12, ".safetensors") == 0) {
    h3_safetensors *sf = h3_safetensors_open(o->prompt, d);
    if (!sf)
      st = H3_ERR;
    else if (h3_safetensors_count(sf) != 1 ||
             h3_dtype_is_float(h3_safetensors_at(sf, 0)->type.dtype)) {
      h3_diag_error(d, none, "write the token ids as one i32 or i64 tensor",
                    "%s: expected exactly one integer tensor", o->prompt);
      st = H3_ERR;
    } else {
      const h3_st_tensor *t = h3_safetensors_at(sf, 0);
      n = h3_type_numel(&t->type);
      for (int64_t i = 0; i < n && i < need; i++) {
        if (t->type.dtype == H3_I64)
          memcpy(&ids[i], (const char *)t->data + 8 * i, 8);
        else if (t->type.dtype == H3_I32) {
          int32_t v;
          memcpy(&v, (const char *)t->data + 4 * i, 4);
          ids[i] = v;
        } else {
          h3_diag_error(d, none, "use I32 or I64", "%s: tensor '%s' has dtype %s", o->prompt,
                        t->name, h3_dtype_name(t->type.dtype));
          st = H3_ERR;
          break;
        }
      }
    }
    h3_safetensors_close(sf);
  } else {
    size_t tl;
    char *text = h3_read_file(o->prompt, &tl, d);
    if (!text) st = H3_ERR;
    for (char *p = text; st == H3_OK && p && *p;) {
      while (*p == ' ' || *p == '\n' || *p == '\t' || *p == ',' || *p == '\r') p++;
      if (!*p) break;
      char *end;
      errno = 0;
      long long v = strtoll(p, &end, 10);
      if (end == p || errno) {
        int len = (int)strcspn(p, " \t\r\n,");
        h3_diag_error(d, none, "the file holds token ids separated by spaces, commas or newlines",
                      "%s: '%.*s' is not a token id", o->prompt, len > 20 ? 20 : len, p);
        st = H3_ERR;
        break;
      }
      if (n < need) ids[n] = v;
      n++;
      p = end;
    }
    free(text);
  }
  if (st == H3_OK && n != need) {
    char hint[128];
    snprintf(hint, sizeof hint, "recompile the plan with --set prompt_len=%lld", (long long)n);
    h3_diag_error(d, none, hint, "%s: %lld tokens, but the plan was compiled for prompt_len = %lld",
                  o->prompt, (long long)n, (long long)need);
    st = H3_ERR;
  }
  for (int64_t i = 0; st == H3_OK && i < n; i++)
    if (ids[i] < 0 || ids[i] >= vocab) {
      h3_diag_error(d, none, "give token ids of the model's tokenizer, from 0 to vocab - 1",
                    "%s: token %lld (id %lld) is outside the vocabulary [0, %lld)", o->prompt, (long long)i,
                    (long long)ids[i], (long long)vocab);
      st = H3_ERR;
    }
  if (st == H3_OK) {
    h3_host_tensor *t = &in[idx];
    free(t->data);
    t->name = g->inputs[idx]->name;
    t->type = *want;
    t->bytes = (size_t)h3_type_bytes(want);
    t->data = malloc(t->bytes + 1);
    if (!t->data) st = H3_ERR;
    for (int64_t i = 0; st == H3_OK && i < n; i++) {
      if (want->dtype == H3_I64)
        ((int64_t *)t->data)[i] = ids[i];
      else
        ((int32_t *)t->data)[i] = (int32_t)ids[i];
    }
  }
  free(ids);
  return st;
}

/* Progress over the top-level loop iterations, only on a terminal. */
typedef struct {
  double t0;
  h3_backend *b;
} progress_state;

static void progress(void *ctx, const char *label, int64_t done, int64_t total) {
  progress_state *p = ctx;
  int width = 30, fill = total > 0 ? (int)(width * done / total) : width;
  fprintf(stderr, "\r%-10s [", label);
  for (int i = 0; i < width; i++) fputc(i < fill ? '#' : '.', stderr);
  fprintf(stderr, "] %lld/%lld  %.2f s", (long long)done, (long long)total,
          p->b->ops->now(p->b) - p->t0);
  if (done == total) fputc('\n', stderr);
  fflush(stderr);
}

/* The rank count: --gpus against the plan's (h3_module_ranks); N > 1 runs without serving,
 * --dump-ops or --device-memory. 0 after reporting. */
static int rank_count(const options *o, const h3_module *m, h3_diag *d) {
  int plan = h3_module_ranks(m), want = o->gpus ? o->gpus : 1;
  h3_span none = {0};
  char hint[200];
  if (want != plan) {
    if (o->gpus)
      snprintf(hint, sizeof hint, "run it with --gpus %d, or recompile it: h3c compile ... --gpus %d",
               plan, want);
    else
      snprintf(hint, sizeof hint, "run it with h3exec --backend cpu --gpus %d", plan);
    h3_diag_error(d, none, hint, "%s: the plan was compiled for %d rank%s (h3c compile --gpus %d), "
                  "not %d", o->plan, plan, plan == 1 ? "" : "s", plan, want);
    return 0;
  }
  const char *refused = serve_wanted(&o->serve) ? "serving"
                        : o->dump_ops           ? "--dump-ops"
                        : o->device_memory > 0  ? "--device-memory"
                                                : NULL;
  if (want > 1 && refused) {
    h3_diag_error(d, none, "run a parallel plan without serving, --dump-ops or --device-memory "
                  "(docs/parallel.md)",
                  "--gpus %d: %s is not supported with several ranks yet", want, refused);
    return 0;
  }
  return want;
}

static int run(const options *o, h3_diag *d) {
  int rc = 1;
  h3_backend *b = NULL;
  h3_weights *w = NULL;
  h3_runtime *rt = NULL;
  h3_comm *comm = NULL; /* --gpus N > 1: the ranks' communicator */
  ranks *helpers = NULL; /* ranks 1 .. N-1 while they run */
  gpu_ranks *procs = NULL; /* --backend cuda --gpus N: this rank process's share of the launch */
  int rank = 0;            /* this process's rank */
  dump_ops *dump = NULL;
  moe_stats *moe = NULL;
  h3_host_tensor *in = NULL, *out = NULL;
  double *lat = NULL;
  int64_t *nan = NULL, *inf = NULL; /* per output: NaN and Inf counts */
  h3_plan *plan = h3_plan_read_file(o->plan, d);
  if (!plan) return 1;
  const h3_module *m = plan->module;
  h3_span none = {0};
  const char *gname = o->graph ? o->graph : plan->entry;
  const h3_graph *g = gname ? h3_module_graph(m, gname) : NULL;
  if (!g) {
    h3_strbuf names;
    h3_strbuf_init(&names);
    for (int i = 0; i < m->n_graphs; i++)
      h3_strbuf_printf(&names, "%s%s", i ? ", " : "", m->graphs[i]->name);
    char hint[512];
    snprintf(hint, sizeof hint, "the plan's graphs: %s", names.data ? names.data : "(none)");
    if (gname)
      h3_diag_error(d, none, hint, "%s: no graph named '%s'", o->plan, gname);
    else
      h3_diag_error(d, none, hint, "%s: the plan has no entry program; pick one with --graph",
                    o->plan);
    h3_strbuf_free(&names);
    goto done;
  }
  bool int8_env = false; /* H3_INT8_MAX_ROWS re-decides the int8 row splits */
  if (h3_plan_apply_load_rules(plan, &int8_env, d) != H3_OK) goto done;
  if (check_compiled(m, "--steps", "steps", o->steps, d) != H3_OK ||
      check_compiled(m, "--max-new-tokens", "max_new_tokens", o->max_new_tokens, d) != H3_OK)
    goto done;
  int n_ranks = rank_count(o, m, d);
  if (!n_ranks) goto done;
  if (o->gpus && !strcmp(o->backend, "cuda")) { /* one process per GPU, this one supervises */
    if (!(procs = gpu_ranks_fork(n_ranks, &rank, d))) goto done;
    if (rank < 0) {
      rc = gpu_ranks_wait(procs, d);
      procs = NULL;
      goto done;
    }
  } else if (n_ranks > 1 && !(comm = h3_comm_new(n_ranks, d)))
    goto done;
  h3_backend_options bo = {.threads = o->threads, .seed = o->seed, .comm = comm, .rank = 0};
  b = procs ? gpu_ranks_backend(procs, &bo, d) : h3_backend_create(comm ? "cpu" : o->backend, &bo, d);
  if (!b) goto done;
  int random = strcmp(o->weights, "random") == 0;
  if (h3_backend_load_plan(b, plan, d) != H3_OK ||
      (o->attention && h3_backend_set_option(b, "attention", o->attention, d) != H3_OK))
    goto done;
  /* a budget too small fails here, before any weight is read */
  if (o->device_memory > 0 && h3_runtime_check_budget(m, b, o->device_memory, d) != H3_OK) goto done;
  /* random weights: made on the device when the backend can (bitwise the host's), else here */
  bool on_device = random && b->ext && b->ext->init_param;
  if (!on_device && host_memory_check(plan, o->plan, d) != H3_OK) goto done;
  w = random ? (on_device ? NULL : h3_weights_random(m, o->seed, d))
             : h3_weights_load_file(m, o->weights, d);
  if (!w && !on_device) goto done;
  if (serve_wanted(&o->serve)) {
    /* --profile: every op of the serving timed (device timestamps; a call replayed as a CUDA
       graph has none: H3_CUDA_GRAPHS=0 times them all), the table after the report */
    if (o->moe_stats && !(moe = moe_stats_new(b, d))) goto done;
    h3_runtime_options sro = {.weight_seed = o->seed, .device_memory = o->device_memory,
                              .trace = o->profile != NULL, .trace_device = o->profile != NULL,
                              .observe = moe ? moe_stats_observe : NULL, .observe_ctx = moe,
                              .observe_reset = moe ? moe_stats_reset : NULL};
    if (o->profile && h3_output_check(o->profile, d) != H3_OK) goto done;
    rt = h3_runtime_new(m, b, w, &sro, d);
    rc = rt ? serve_run(&o->serve, rt, m, b, d) : 1;
    if (rc == 0 && moe) moe_stats_print(stdout, moe);
    if (rc == 0 && o->profile) {
      const h3_trace_event *ev;
      size_t n = h3_runtime_trace(rt, &ev);
      if (h3_trace_write_file(ev, n, o->profile, d) != H3_OK) rc = 1;
      h3_report_print_ops(stdout, h3_runtime_op_stats(rt), "the serving, warm-up excluded",
                          b->ext && b->ext->mark ? "device timestamps; calls replayed as CUDA "
                                                   "graphs have no per-op times"
                                                 : "host time, synced after each op");
    }
    goto done;
  }
  in = o->inputs ? h3_inputs_load_file(g, o->inputs, H3_INPUTS_ALLOW_MISSING, d)
                 : calloc((size_t)g->n_inputs + 1, sizeof *in);
  if (!in) goto done;
  if (o->prompt && load_prompt(o, m, g, in, d) != H3_OK) goto done;
  h3_input_defaults defs = {o->seed, o->prompt_len};
  if (h3_inputs_fill_defaults(m, g, in, &defs, d) != H3_OK) goto done;
  /* an output that would replace an input is refused before the run (every input is read
     by now), not after it */
  if ((o->out && h3_output_check(o->out, d) != H3_OK) ||
      (o->profile && h3_output_check(o->profile, d) != H3_OK) ||
      (o->dump && h3_output_check(o->dump, d) != H3_OK))
    goto done;
  /* --dump-ops: results kept in host memory up to 16 GiB */
  if (o->dump_ops && !(dump = dump_ops_new(o->dump_ops, b, (size_t)16 << 30, d))) goto done;
  if (o->moe_stats && !(moe = moe_stats_new(b, d))) goto done;
  progress_state ps = {0, b};
  /* --profile: ops timed by device timestamps where the backend has them (they run back to
     back, as without the profile), else synced after each op */
  bool marks = b->ext && b->ext->mark;
  h3_runtime_options ro = {.trace = o->profile != NULL,
                           .progress = isatty(2) && rank == 0 ? progress : NULL,
                           .progress_ctx = &ps,
                           .weight_seed = o->seed,
                           .device_memory = o->device_memory,
                           .trace_device = o->profile != NULL,
                           .observe = dump ? dump_ops_observe : moe ? moe_stats_observe : NULL,
                           .observe_ctx = dump ? (void *)dump : (void *)moe,
                           .observe_reset = moe ? moe_stats_reset : NULL};
  rt = h3_runtime_new(m, b, w, &ro, d);
  out = calloc((size_t)g->n_outputs + 1, sizeof *out);
  lat = calloc((size_t)o->iterations + 1, sizeof *lat);
  if (!rt || !out || !lat) goto done;
  ranks_options rko = {m, g, w, in, comm, o->threads, o->seed, o->warmup + o->iterations};
  if (comm && !(helpers = ranks_start(&rko, d))) goto done;
  for (int it = 0; it < o->warmup + o->iterations; it++) {
    if (it == o->warmup) {
      h3_runtime_reset_stats(rt);
      h3_backend_reset_busy(b);
    }
    for (int i = 0; i < g->n_outputs; i++) {
      free(out[i].data);
      out[i].data = NULL;
    }
    ps.t0 = b->ops->now(b);
    if (dump) dump_ops_reset(dump);
    if (h3_runtime_run(rt, g, in, out, d) != H3_OK) goto done;
    if (it >= o->warmup) lat[it - o->warmup] = b->ops->now(b) - ps.t0;
  }
  h3_status ranks_st = helpers ? ranks_finish(helpers, d) : H3_OK;
  helpers = NULL;
  if (ranks_st != H3_OK) goto done;
  if (rank > 0) { /* rank 0 writes the outputs and the report */
    rc = 0;
    goto done;
  }
  nan = calloc((size_t)g->n_outputs + 1, sizeof *nan);
  inf = calloc((size_t)g->n_outputs + 1, sizeof *inf);
  if (!nan || !inf) goto done;
  int non_finite = count_non_finite(out, g->n_outputs, nan, inf);
  if (non_finite && o->check_finite) {
    print_non_finite(stderr, out, g->n_outputs, nan, inf);
    h3_diag_error(d, none, "run without --check-finite to write them anyway",
                  "--check-finite: %d output%s of %s '%s' hold%s NaN or Inf values (counts above)",
                  non_finite, non_finite > 1 ? "s" : "", g->kind == H3_GRAPH_PROGRAM ? "program" : "graph",
                  g->name, non_finite > 1 ? "" : "s");
    goto done;
  }
  if (o->out) {
    const void **data = calloc((size_t)g->n_outputs + 1, sizeof *data);
    if (!data) goto done;
    for (int i = 0; i < g->n_outputs; i++) data[i] = out[i].data;
    h3_status st = h3_outputs_save_file(g, data, o->out, d);
    free(data);
    if (st != H3_OK) goto done;
  }
  if (dump && dump_ops_write(dump, o->dump, d) != H3_OK) goto done;
  if (o->profile) {
    const h3_trace_event *ev;
    size_t n = h3_runtime_trace(rt, &ev);
    if (h3_trace_write_file(ev, n, o->profile, d) != H3_OK) goto done;
  }
  char ran[256];
  snprintf(ran, sizeof ran, "%s '%s'", g->kind == H3_GRAPH_PROGRAM ? "program" : "graph", g->name);
  h3_strbuf passes;
  h3_strbuf_init(&passes);
  for (int i = 0; i < plan->n_passes; i++)
    h3_strbuf_printf(&passes, "%s%s", i ? ", " : "", plan->passes[i]);
  h3_report r = {.plan_file = o->plan,
                 .graph = ran,
                 .backend = b->ops->name,
                 .weights = o->weights,
                 .quality = h3_tier_name(plan->quality),
                 .passes = passes.data,
                 .seed = o->seed,
                 .warmup = o->warmup,
                 .iterations = o->iterations,
                 .latency = lat,
                 .stats = h3_runtime_op_stats(rt),
                 .module = m,
                 .weight_bytes = h3_runtime_weight_bytes(rt),
                 .activation_bytes = h3_runtime_activation_bytes(rt),
                 .device = h3_backend_device_name(b),
                 .ranks = n_ranks,
                 .attention = h3_backend_option(b, "attention"),
                 .gpu_seconds = h3_backend_busy_seconds(b)};
  r.op_clock = !b->ext     ? "host time"
               : !o->profile ? "host time to launch; --profile times the device"
               : marks       ? "device timestamps; calls replayed as CUDA graphs have no per-op times"
                             : "host time, synced after each op";
  if (!h3_backend_graph_counts(b, &r.graphs_captured, &r.graphs_replayed))
    r.graphs_captured = r.graphs_replayed = -1;
  else
    r.device_backend = b;
  if (!h3_backend_gemm_tuning(b, &r.gemm_timed, &r.gemm_read, &r.gemm_tune_seconds)) r.gemm_timed = -1;
  r.n_branches = h3_runtime_branches(rt, &r.branches);
  h3_streaming streaming;
  r.memory_peak = h3_backend_memory_peak(b);
  r.device_memory = o->device_memory;
  h3_runtime_streaming(rt, &streaming);
  r.streaming = &streaming;
  h3_report_print(stdout, &r);
  if (moe) moe_stats_print(stdout, moe);
  if (non_finite) print_non_finite(stdout, out, g->n_outputs, nan, inf);
  print_tokens(stdout, out, g->n_outputs);
  h3_strbuf_free(&passes);
  rc = 0;
done:
  if (helpers) { /* rank 0 failed: the others stop at their next collective */
    h3_comm_abort(comm);
    ranks_finish(helpers, d);
  }
  if (out) h3_host_tensors_free(out, g ? g->n_outputs : 0);
  if (in) h3_host_tensors_free(in, g ? g->n_inputs : 0);
  free(lat);
  free(nan);
  free(inf);
  h3_runtime_free(rt);
  dump_ops_free(dump);
  moe_stats_free(moe);
  h3_weights_free(w);
  h3_backend_free(b);
  h3_comm_free(comm);
  gpu_ranks_free(procs);
  h3_plan_free(plan);
  return rc;
}

int main(int argc, char **argv) {
  options o;
  int pr = parse_flags(argc, argv, &o);
  if (pr == 1) {
    usage(stdout);
    return 0;
  }
  if (pr == 3) {
    printf("h3exec %s\n", H3_VERSION);
    return 0;
  }
  if (pr) return 2;
  h3_diag d;
  h3_diag_init(&d);
  d.program = "h3exec";
  int rc = run(&o, &d);
  h3_diag_print(&d, stderr);
  h3_diag_free(&d);
  return rc;
}
