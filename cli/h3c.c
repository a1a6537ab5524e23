/* h3c: the h3 compiler driver. Thin: parses flags, calls libh3, prints diagnostics.
 *
 *   h3c compile FILE.g [options] -o PLAN   .g → IR → passes → kernels (NVRTC) → YAML plan
 *   h3c check FILE.g [options]             diagnostics only
 *   h3c opt IN.ir --passes a,b [-o OUT]    IR text in, IR text out (pass tests)
 *   h3c passes [--markdown] [--pipelines]  the registered passes and the default pipelines
 *   h3c ops [--markdown]                     the ops of the IR (registry)
 *   h3c graph FILE.g --format dot          a picture of the IR (Graphviz)
 *
 * Exit status: 0 on success, 1 on any error (bad program, bad flag, failed write).
 */
#include "h3/frontend.h"
#include "h3/int8.h"
#include "h3/op_registry.h"
#include "h3/passes.h"
#include "h3/plan.h"
#include "graph_dot.h"

#include <stdlib.h>
#include <string.h>

typedef enum { CMD_COMPILE, CMD_CHECK, CMD_OPT, CMD_PASSES, CMD_OPS, CMD_GRAPH, CMD_HELP } command;

typedef struct {
  command cmd;
  const char *input;
  const char *output;
  const char *config;
  const char *format;
  const char *graph;
  int n_sets;
  h3_config_override sets[64];
  h3_pass_options passes;
  bool no_kernels; /* --no-kernels: skip NVRTC (plan still holds the sources) */
  int n_flags;
  const char *const *flags; /* the arguments after the command, for the plan header */
  char pass_list[4096];   /* --passes/--pass lists joined with ',' */
  /* the --enable-pass lists joined with ',', then the passes of --int8 and --spectrum */
  char enable_text[1024];
  bool enable_flag;              /* --enable-pass was given */
  bool draft_quant_given;        /* --draft-quant was given (else nvfp4 where the model has a draft) */
  bool markdown, pipelines_only; /* h3c passes --markdown, --pipelines */
  /* step skipping (passes/spectrum.h): the option texts built from --spectrum[=...],
     --spectrum-*, --cache-dit-*, and the enable list with "spectrum" added */
  bool spectrum, cache_dit_flags;
  const char *spectrum_arg; /* the value of --spectrum=VALUE ("" when bare) */
  char spectrum_extra[256], spectrum_text[512], cache_dit_text[256];
} options;

static const char *const command_names[] = {"compile", "check", "opt", "passes", "ops", "graph", "help"};

/* The listing commands (passes, ops) read no file. */
static bool takes_input(command c) { return c != CMD_PASSES && c != CMD_OPS; }

static void usage_main(FILE *out) {
  fprintf(out,
          "usage: h3c COMMAND [options]\n"
          "\n"
          "commands:\n"
          "  compile FILE.g -o PLAN   compile a model into an execution plan\n"
          "  check FILE.g             parse and check a model; print diagnostics only\n"
          "  opt IN.ir --passes LIST  run passes on IR text, print IR text (for pass tests)\n"
          "  passes                   list the registered passes and the default pipelines\n"
          "  ops                      list the ops of the IR: operands, attributes, kind\n"
          "  graph FILE.g --format dot  print the IR as a Graphviz graph\n"
          "\n"
          "Run 'h3c COMMAND --help' for the options of one command.\n");
}

static void usage_model_options(FILE *out) {
  fprintf(out,
          "  --config NAME            config preset of the model (default: the first one)\n"
          "  --set KEY=VALUE          override one config key (repeatable)\n");
}

static void usage_pass_options(FILE *out) {
  fprintf(out,
          "  --quality TIER           exact | lossless (default) | high: which numerics-changing\n"
          "                           rewrites may run (docs/models/accelerations.md §2)\n"
          "  --passes A,B,...         run exactly these passes, in this order\n"
          "  --enable-pass A,B,...    add opt-in passes (default 'no' in 'h3c passes') to the\n"
          "                           default pipeline, each at its place in the table (not\n"
          "                           with --passes, which names every pass that runs)\n"
          "  --disable-pass A,B,...   remove passes from the pipeline\n"
          "  --print-ir-after=NAME|all  print the IR after the named pass(es) to stderr\n"
          "  --time-passes            print each pass's wall time and op counts to stderr\n"
          "  --report[=A,B,...]       print the passes' one-line reports (memory plan, fusions);\n"
          "                           with names, only those passes' reports\n"
          "  --int8[=KEY=VALUE,...]   INT8 linear lowering + row splitting; activations quantized\n"
          "                           by the kernels that produce them and dequantized by the\n"
          "                           consumers (docs/int8.md), any\n"
          "                           tier. rotate=0|256: Hadamard rotation along K (default 0);\n"
          "                           max_rows=R,min_split_n=C: run an int8 GEMM with more than R\n"
          "                           rows as R-row chunks when its N >= C (R <= 0: never; default:\n"
          "                           the measured table, else R = C = 8192); h3exec's\n"
          "                           H3_INT8_MAX_ROWS=R overrides R at load\n"
          "  --attention dense|sage[,KEY=V..]|sol[,KEY=V..]  H3's block-stack attention (default\n"
          "                           dense): sage = int8 QK with K smoothing, P and V in e4m3\n"
          "                           (pv=, smooth=), at every step; sol = the Sage->Sol\n"
          "                           schedule: steps < dense_steps (default 10) and blocks <\n"
          "                           dense_layers (default 2) run dense_backend=dense|sage\n"
          "                           (default dense), the others block-sparse sol (tau=,\n"
          "                           thresh=, sink_tokens=, sink_start=); sol everywhere:\n"
          "                           sol,dense_steps=0,dense_layers=0. h3c prints the schedule;\n"
          "                           docs/models/accelerations.md §5\n"
          "  --draft-quant nvfp4|bf16  weights of the M3.1 DSpark draft (default nvfp4 where the\n"
          "                           model has the draft): nvfp4 quantizes fc, o_proj,\n"
          "                           gate_up_proj and down_proj to NVFP4 (W4A16; docs/nvfp4.md),\n"
          "                           bf16 keeps them as they are\n"
          "  --spectrum[=W:WIN:FLEX|KEY=VALUE,...]  Spectrum step skipping (docs/step-skipping.md):\n"
          "                           run the block stack at the real steps of a static schedule\n"
          "                           (warm-up W, then one per window WIN growing by FLEX; default\n"
          "                           5:2.0:0.75; H3 recipe 11:5:1.0), forecast it at the others;\n"
          "                           keys warmup, window, flex, w, m, lam, taylor, tau_steps\n"
          "  --spectrum-degree M      Chebyshev degree of the forecast (default 4)\n"
          "  --spectrum-lambda L      ridge lambda of the fit (default 0.1)\n"
          "  --spectrum-blend W       weight of the Chebyshev forecast against Taylor (default 1.0)\n"
          "  --cache-dit-warmup N     --quality high: no cached step before step N (default 4)\n"
          "  --cache-dit-threshold T  reuse the cached residual when d < T (default 0.04)\n"
          "  --cache-dit-max-consecutive N  at most N cached steps in a row (default 1)\n"
          "  --gpus N                 a parallel plan for N ranks (GPUs; cpu threads for now):\n"
          "                           H3's block stack split by rows (Ulysses sequence\n"
          "                           parallelism, pass sequence-parallel), M3.1's layers by\n"
          "                           heads, MLP columns and experts (pass tensor-parallel;\n"
          "                           docs/parallel.md); 1 (the default) is the one-rank plan\n");
}

static void usage_command(command c, FILE *out) {
  switch (c) {
  case CMD_COMPILE:
    fprintf(out, "usage: h3c compile FILE.g [options] -o PLAN\n\n"
                 "Compiles a model: front end, passes, CUDA kernels (checked with NVRTC for\n"
                 "sm_90 through the on-disk kernel cache), and writes the YAML plan.\n\n"
                 "options:\n"
                 "  -o, --output PLAN        where to write the plan (required)\n");
    usage_model_options(out);
    usage_pass_options(out);
    fprintf(out, "  --no-kernels             do not run NVRTC (the plan still holds the sources)\n"
                 "\nenvironment: H3_KERNEL_CACHE_DIR (cache folder), H3_KERNEL_CACHE=0 (no cache)\n");
    break;
  case CMD_CHECK:
    fprintf(out, "usage: h3c check FILE.g [options]\n\n"
                 "Parses and checks a model and prints its diagnostics; writes nothing.\n\n"
                 "options:\n");
    usage_model_options(out);
    break;
  case CMD_OPT:
    fprintf(out, "usage: h3c opt IN.ir [options] [-o OUT.ir]\n\n"
                 "Reads IR text, runs passes, prints the resulting IR text (stdout by default).\n"
                 "A file of --print-ir-after dumps: each module after its header on its own.\n\n"
                 "options:\n"
                 "  -o, --output FILE        write the IR there instead of stdout\n"
                 "  --pass NAME              same as --passes NAME (repeatable)\n");
    usage_pass_options(out);
    break;
  case CMD_PASSES:
    fprintf(out, "usage: h3c passes [--markdown] [--pipelines]\n\n"
                 "Lists every registered pass in pipeline order: name, minimum tier, whether the\n"
                 "default pipeline runs it (opt-in passes: --enable-pass NAME or their flag), what\n"
                 "it requires and what it does; then the default pipeline of each --quality.\n\n"
                 "options:\n"
                 "  --markdown               print Markdown tables (the generated tables of\n"
                 "                           docs/passes.md and docs/writing-a-pass.md)\n"
                 "  --pipelines              print only the default pipelines\n");
    break;
  case CMD_OPS:
    fprintf(out, "usage: h3c ops [--markdown]\n\n"
                 "Lists every op of the IR (include/h3/ops.def, the registry): its operand count,\n"
                 "its attributes (name:kind; ? marks an optional one) and its pattern kind.\n\n"
                 "  --markdown               print a Markdown table\n");
    break;
  case CMD_GRAPH:
    fprintf(out, "usage: h3c graph FILE.g --format dot [options] [-o OUT.dot]\n\n"
                 "Prints the IR (after the passes) as a Graphviz digraph, one cluster per graph\n"
                 "and per loop region.\n\n"
                 "options:\n"
                 "  --format dot             output format (only dot)\n"
                 "  --graph NAME             only this graph\n"
                 "  -o, --output FILE        write there instead of stdout\n");
    usage_model_options(out);
    usage_pass_options(out);
    break;
  case CMD_HELP: usage_main(out); break;
  }
}

static void diag_init(h3_diag *d) {
  h3_diag_init(d);
  d->program = "h3c";
}

static int flag_error(const char *cmd, const char *fmt, const char *arg, const char *hint) {
  fprintf(stderr, "h3c %s: error: ", cmd);
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  if (hint) fprintf(stderr, "hint: %s\n", hint);
  return 1;
}

/* Matches "--name" (value in the next argument) or "--name=value". Returns the value, or
 * NULL when argv[*i] is not this flag; sets *missing when the value is absent. */
static const char *flag_value(int argc, char **argv, int *i, const char *name, bool *missing) {
  size_t n = strlen(name);
  const char *a = argv[*i];
  if (strncmp(a, name, n) != 0) return NULL;
  if (a[n] == '=') return a + n + 1;
  if (a[n] != '\0') return NULL;
  if (*i + 1 >= argc) {
    *missing = true;
    return "";
  }
  return argv[++*i];
}

/* Appends ",KEY=VALUE" (or VALUE alone when key is "") to an option text; 1 if too long. */
static int append_option(char *buf, size_t cap, const char *key, const char *value) {
  size_t len = strlen(buf);
  int n = snprintf(buf + len, cap - len, "%s%s%s%s", len && *value ? "," : "", key,
                   *key ? "=" : "", value);
  return n < 0 || (size_t)n >= cap - len;
}

/* Appends a comma-separated pass list given by --passes/--pass to o->pass_list. */
static int append_passes(options *o, const char *cmd, const char *list) {
  size_t len = strlen(o->pass_list);
  int n = snprintf(o->pass_list + len, sizeof o->pass_list - len, "%s%s", len ? "," : "", list);
  if (n < 0 || (size_t)n >= sizeof o->pass_list - len)
    return flag_error(cmd, "pass list too long (%s)", list, "give at most 4000 characters");
  o->passes.passes = o->pass_list;
  return 0;
}

static int missing_value(const char *cmd, const char *flag) {
  char hint[128];
  snprintf(hint, sizeof hint, "write %s=VALUE or %s VALUE", flag, flag);
  return flag_error(cmd, "option '%s' needs a value", flag, hint);
}

/* Adds a comma list of pass names to the enabled passes (--enable-pass, --int8, --spectrum). */
static int enable_passes(options *o, const char *cmd, const char *list) {
  if (append_option(o->enable_text, sizeof o->enable_text, "", list))
    return flag_error(cmd, "too many enabled passes (%s)", list,
                      "name at most 1000 characters of passes with --enable-pass");
  o->passes.enable = o->enable_text;
  return 0;
}

/* --spectrum-degree/-lambda/-blend and --cache-dit-warmup/-threshold/-max-consecutive: each
 * becomes one KEY=VALUE field of its pass's option text (checked by the pass). Returns
 * false when argv[*i] is none of them. */
static bool step_skip_flag(int argc, char **argv, int *i, options *o, bool *missing) {
  static const struct {
    const char *flag, *key;
    bool spectrum;
  } map[] = {{"--spectrum-degree", "m", true},           {"--spectrum-lambda", "lam", true},
             {"--spectrum-blend", "w", true},            {"--cache-dit-warmup", "warmup", false},
             {"--cache-dit-threshold", "threshold", false},
             {"--cache-dit-max-consecutive", "max_consecutive", false}};
  for (size_t k = 0; k < sizeof map / sizeof map[0]; k++) {
    const char *v = flag_value(argc, argv, i, map[k].flag, missing);
    if (!v) continue;
    if (*missing) return true;
    char *buf = map[k].spectrum ? o->spectrum_extra : o->cache_dit_text;
    size_t cap = map[k].spectrum ? sizeof o->spectrum_extra : sizeof o->cache_dit_text;
    if (!*v || append_option(buf, cap, map[k].key, v)) *missing = true;
    if (!map[k].spectrum) o->cache_dit_flags = true;
    return true;
  }
  return false;
}

static bool takes_model(command c) { return c == CMD_COMPILE || c == CMD_CHECK || c == CMD_GRAPH; }
static bool takes_passes(command c) { return c == CMD_COMPILE || c == CMD_OPT || c == CMD_GRAPH; }

static int parse_args(int argc, char **argv, options *o) {
  const char *cmd = command_names[o->cmd];
  o->flags = (const char *const *)argv + 2;
  o->n_flags = argc - 2;
  h3_diag d;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char *v;
    bool missing = false;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage_command(o->cmd, stdout);
      exit(0);
    } else if ((v = flag_value(argc, argv, &i, "-o", &missing)) ||
               (v = flag_value(argc, argv, &i, "--output", &missing))) {
      if (o->cmd == CMD_CHECK || !takes_input(o->cmd)) {
        char hint[128];
        snprintf(hint, sizeof hint, "'h3c %s' writes no file; see 'h3c %s --help'", cmd, cmd);
        return flag_error(cmd, "option '%s' is not used by this command", a, hint);
      }
      o->output = v;
    } else if (takes_model(o->cmd) && (v = flag_value(argc, argv, &i, "--config", &missing))) {
      o->config = v;
    } else if (takes_model(o->cmd) && (v = flag_value(argc, argv, &i, "--set", &missing))) {
      if (missing) return missing_value(cmd, a);
      if (o->n_sets >= (int)(sizeof o->sets / sizeof o->sets[0]))
        return flag_error(cmd, "too many --set options (at most %s)", "64",
                          "put the values in a config of the model: config NAME { key = value ... }");
      diag_init(&d);
      if (h3_config_override_parse(v, &o->sets[o->n_sets], &d) != H3_OK) {
        h3_diag_print(&d, stderr);
        h3_diag_free(&d);
        return 1;
      }
      h3_diag_free(&d);
      o->n_sets++;
    } else if (takes_passes(o->cmd) && (v = flag_value(argc, argv, &i, "--quality", &missing))) {
      if (missing) return missing_value(cmd, a);
      if (!h3_tier_parse(v, &o->passes.tier))
        return flag_error(cmd, "unknown quality tier '%s'", v,
                          "use --quality exact, --quality lossless or --quality high");
    } else if (takes_passes(o->cmd) && (v = flag_value(argc, argv, &i, "--passes", &missing))) {
      if (missing) return missing_value(cmd, a);
      if (append_passes(o, cmd, v)) return 1;
    } else if (o->cmd == CMD_OPT && (v = flag_value(argc, argv, &i, "--pass", &missing))) {
      if (missing) return missing_value(cmd, a);
      if (append_passes(o, cmd, v)) return 1;
    } else if (takes_passes(o->cmd) &&
               (v = flag_value(argc, argv, &i, "--enable-pass", &missing))) {
      if (missing || !*v) return missing_value(cmd, a);
      if (enable_passes(o, cmd, v)) return 1;
      o->enable_flag = true;
    } else if (takes_passes(o->cmd) &&
               (v = flag_value(argc, argv, &i, "--disable-pass", &missing))) {
      o->passes.disabled = v;
    } else if (takes_passes(o->cmd) &&
               (v = flag_value(argc, argv, &i, "--print-ir-after", &missing))) {
      o->passes.print_ir_after = v;
    } else if (takes_passes(o->cmd) && !strcmp(a, "--time-passes")) {
      o->passes.time_passes = true;
    } else if (takes_passes(o->cmd) && (!strcmp(a, "--int8") || !strncmp(a, "--int8=", 7))) {
      h3_int8_options io; /* checked here, read again by the int8 passes */
      diag_init(&d);
      if (h3_int8_options_parse(a[6] ? a + 7 : "", &io, &d) != H3_OK) {
        h3_diag_print(&d, stderr);
        h3_diag_free(&d);
        return 1;
      }
      h3_diag_free(&d);
      o->passes.int8 = a[6] ? a + 7 : "";
    } else if (takes_passes(o->cmd) &&
               (v = flag_value(argc, argv, &i, "--draft-quant", &missing))) {
      if (missing) return missing_value(cmd, a);
      if (!strcmp(v, "nvfp4") && enable_passes(o, cmd, "draft-quant-nvfp4")) return 1;
      if (strcmp(v, "nvfp4") && strcmp(v, "bf16"))
        return flag_error(cmd, "unknown --draft-quant '%s'", v, "use nvfp4 (the default) or bf16");
      o->draft_quant_given = true;
    } else if (takes_passes(o->cmd) &&
               (v = flag_value(argc, argv, &i, "--attention", &missing))) {
      if (missing) return missing_value(cmd, a);
      if ((!strncmp(v, "sage", 4) && (!v[4] || v[4] == ',')) ||
          (!strncmp(v, "sol", 3) && (!v[3] || v[3] == ','))) {
        if (enable_passes(o, cmd, "attention-backend")) return 1;
        o->passes.attention = v;
      } else if (strcmp(v, "dense")) {
        return flag_error(cmd, "unknown --attention '%s'", v,
                          "use dense (the default), sage[,pv=fp8|bf16][,smooth=1|0] or "
                          "sol[,tau=F][,thresh=diag|exact][,sink_tokens=N][,sink_start=N]"
                          "[,dense_steps=N][,dense_layers=N][,dense_backend=dense|sage]");
      }
    } else if (takes_passes(o->cmd) && (v = flag_value(argc, argv, &i, "--gpus", &missing))) {
      if (missing) return missing_value(cmd, a);
      char *end;
      long n = strtol(v, &end, 10);
      if (end == v || *end || n < 1 || n > H3_COMM_MAX_RANKS) {
        char hint[96];
        snprintf(hint, sizeof hint, "give a rank count from 1 to %d, e.g. --gpus 4",
                 H3_COMM_MAX_RANKS);
        return flag_error(cmd, "bad --gpus '%s'", v, hint);
      }
      o->passes.gpus = (int)n;
    } else if (takes_passes(o->cmd) &&
               (!strcmp(a, "--spectrum") || !strncmp(a, "--spectrum=", 11))) {
      o->spectrum = true;
      o->spectrum_arg = a[10] ? a + 11 : "";
    } else if (takes_passes(o->cmd) && step_skip_flag(argc, argv, &i, o, &missing)) {
      if (missing) return missing_value(cmd, a);
    } else if (takes_passes(o->cmd) && (!strcmp(a, "--report") || !strncmp(a, "--report=", 9))) {
      o->passes.report = true;
      if (a[8]) o->passes.report_passes = a + 9;
    } else if ((o->cmd == CMD_PASSES || o->cmd == CMD_OPS) && !strcmp(a, "--markdown")) {
      o->markdown = true;
    } else if (o->cmd == CMD_PASSES && !strcmp(a, "--pipelines")) {
      o->pipelines_only = true;
    } else if (o->cmd == CMD_COMPILE && !strcmp(a, "--no-kernels")) {
      o->no_kernels = true;
    } else if (o->cmd == CMD_GRAPH && (v = flag_value(argc, argv, &i, "--format", &missing))) {
      o->format = v;
    } else if (o->cmd == CMD_GRAPH && (v = flag_value(argc, argv, &i, "--graph", &missing))) {
      o->graph = v;
    } else if (a[0] == '-' && a[1] != '\0') {
      char hint[128];
      snprintf(hint, sizeof hint, "run 'h3c %s --help' for the options it takes", cmd);
      return flag_error(cmd, "unknown option '%s'", a, hint);
    } else if (!o->input && takes_input(o->cmd)) {
      o->input = a;
    } else {
      char none[64];
      snprintf(none, sizeof none, "'h3c %s' takes no arguments", cmd);
      return flag_error(cmd, "unexpected argument '%s'", a,
                        takes_input(o->cmd) ? "give one input file" : none);
    }
    if (missing) return missing_value(cmd, a);
  }
  /* docs/models/accelerations.md §2 rule 7 */
  if (o->spectrum && o->passes.tier == H3_TIER_HIGH) {
    fprintf(stderr, "h3c: --spectrum cannot be combined with --quality high (Cache-DiT): both "
                    "skip the block stack; use one skip-step accelerator.\n");
    return 1;
  }
  if (!o->spectrum && o->spectrum_extra[0])
    return flag_error(cmd, "%s given without --spectrum", "--spectrum-degree/-lambda/-blend",
                      "add --spectrum (or --spectrum=WARMUP:WINDOW:FLEX)");
  if (o->cache_dit_flags && o->passes.tier != H3_TIER_HIGH)
    return flag_error(cmd, "%s need --quality high (Cache-DiT runs only there)",
                      "--cache-dit-* options", "add --quality high");
  if (o->enable_flag && (o->passes.passes || o->cmd == CMD_OPT))
    return flag_error(cmd,
                      o->cmd == CMD_OPT
                          ? "option '%s' does not apply: 'h3c opt' runs the passes of --passes only"
                          : "option '%s' adds to the default pipeline, which --passes replaces",
                      "--enable-pass", "name the pass in --passes instead");
  if (o->spectrum) { /* the --spectrum value first: a W:WIN:FLEX triple must lead */
    snprintf(o->spectrum_text, sizeof o->spectrum_text, "%s%s%s", o->spectrum_arg,
             o->spectrum_arg[0] && o->spectrum_extra[0] ? "," : "", o->spectrum_extra);
    o->passes.spectrum = o->spectrum_text;
  }
  if (o->passes.int8 && enable_passes(o, cmd, H3_INT8_PASSES)) return 1;
  if (o->spectrum && enable_passes(o, cmd, "spectrum")) return 1;
  if (o->passes.gpus > 1 && !o->passes.passes && enable_passes(o, cmd, "sequence-parallel,tensor-parallel"))
    return 1;
  if (o->cache_dit_flags) o->passes.cache_dit = o->cache_dit_text;
  if (takes_input(o->cmd) && !o->input) {
    char hint[128];
    snprintf(hint, sizeof hint, "usage: h3c %s %s", cmd, o->cmd == CMD_OPT ? "IN.ir" : "FILE.g");
    return flag_error(cmd, "no input file%s", "", hint);
  }
  if (o->cmd == CMD_COMPILE && !o->output)
    return flag_error(cmd, "no output file%s", "", "give the plan's path with -o PLAN");
  if (o->cmd == CMD_GRAPH && (!o->format || strcmp(o->format, "dot") != 0))
    return flag_error(cmd, "unsupported or missing --format '%s'", o->format ? o->format : "",
                      "the only format is --format dot");
  return 0;
}

static h3_module *load_model(const options *o, h3_diag *d) {
  h3_frontend_options fo = {.config = o->config, .n_overrides = o->n_sets, .overrides = o->sets};
  return h3_frontend_load(o->input, &fo, d);
}

static int finish(h3_diag *d, int rc) {
  h3_diag_print(d, stderr);
  if (d->errors) rc = 1;
  h3_diag_free(d);
  return rc;
}

static int write_text(const char *path, const h3_strbuf *b, h3_diag *d) {
  if (!path) {
    fwrite(b->data, 1, b->len, stdout);
    return 0;
  }
  return h3_write_file_atomic(path, b->data, b->len, d) == H3_OK ? 0 : 1;
}

/* ---- h3c passes ------------------------------------------------------------------------ */
/* Prints s for a Markdown table cell ('|' escaped) or as it is. */
static void put_cell(const char *s, bool markdown) {
  for (; *s; s++) {
    if (markdown && *s == '|') putchar('\\');
    putchar(*s);
  }
}

static void print_pass_table(bool markdown) {
  if (markdown)
    printf("| pass | tier | default | requires | what it does |\n|---|---|---|---|---|\n");
  else
    printf("%-24s %-9s %-8s %-28s %s\n", "pass", "min tier", "default", "requires", "description");
  for (int i = 0; i < h3_pass_count(); i++) {
    const h3_pass *p = h3_pass_at(i);
    char req[128] = "";
    size_t len = 0;
    for (int r = 0; r < H3_PASS_MAX_REQUIRES && p->requires[r] && len < sizeof req; r++)
      len += (size_t)snprintf(req + len, sizeof req - len, markdown ? "%s`%s`" : "%s%s",
                              r ? (markdown ? ", " : ",") : "", p->requires[r]);
    const char *def = p->in_default_pipeline ? "yes" : "no";
    if (markdown)
      printf("| `%s` | %s | %s | %s | ", p->name, h3_tier_name(p->min_tier), def, req);
    else
      printf("%-24s %-9s %-8s %-28s ", p->name, h3_tier_name(p->min_tier), def, len ? req : "-");
    put_cell(p->description, markdown);
    printf(markdown ? " |\n" : "\n");
  }
}

/* The default pipeline of tier t as "verify, dce, ..." in buf (cap bytes). */
static int pipeline_text(h3_tier t, char *buf, size_t cap) {
  h3_pass_options po = h3_pass_options_default();
  po.tier = t;
  const h3_pass *list[64];
  int n = 0;
  h3_diag d;
  diag_init(&d);
  h3_status st = h3_pass_pipeline_resolve(&po, list, 64, &n, &d);
  size_t len = 0;
  buf[0] = 0;
  for (int i = 0; i < n && len < cap; i++)
    len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", list[i]->name);
  return finish(&d, st == H3_OK ? 0 : 1);
}

/* One row per run of tiers with the same default pipeline. */
static int print_pipelines(bool markdown) {
  char text[H3_TIER_HIGH + 1][2048];
  for (int t = 0; t <= H3_TIER_HIGH; t++)
    if (pipeline_text((h3_tier)t, text[t], sizeof text[t])) return 1;
  if (markdown)
    printf("| --quality | default pipeline |\n|---|---|\n");
  else
    printf("default pipeline of each --quality (--enable-pass adds opt-in passes):\n");
  for (int t = 0, next; t <= H3_TIER_HIGH; t = next) {
    char tiers[64] = "";
    size_t len = 0;
    for (next = t; next <= H3_TIER_HIGH && !strcmp(text[next], text[t]); next++)
      len += (size_t)snprintf(tiers + len, sizeof tiers - len, "%s%s", next > t ? ", " : "",
                              h3_tier_name((h3_tier)next));
    if (markdown)
      printf("| %s | %s |\n", tiers, text[t]);
    else
      printf("  %-18s %s\n", tiers, text[t]);
  }
  return 0;
}

static int cmd_passes(const options *o) {
  if (!o->pipelines_only) {
    print_pass_table(o->markdown);
    putchar('\n');
  }
  return print_pipelines(o->markdown);
}

static const char *attr_kind_word(h3_attr_kind k) {
  switch (k) {
  case H3_ATTR_INT: return "int";
  case H3_ATTR_FLOAT: return "float";
  case H3_ATTR_STRING: return "string";
  case H3_ATTR_INTS: return "ints";
  case H3_ATTR_FLOATS: return "floats";
  case H3_ATTR_DTYPE: return "dtype";
  case H3_ATTR_TIER: return "tier";
  }
  return "?";
}

static const char *pattern_word(h3_pattern_kind k) {
  static const char *const w[] = {"elementwise", "broadcast", "reduction", "matmul",
                                  "view",        "opaque",    "control"};
  return (unsigned)k < sizeof w / sizeof w[0] ? w[k] : "?";
}

/* h3c ops: one line (or Markdown row) per op of the registry. */
static int cmd_ops(const options *o) {
  if (o->markdown) printf("| op | operands | attributes | kind |\n|---|---|---|---|\n");
  for (int c = 1; c < H3_OPCODE_COUNT; c++) {
    const h3_op_info *i = h3_op_info_get((h3_opcode)c);
    if (!i) continue;
    char n[32], at[256] = "";
    if (i->max_operands < 0) snprintf(n, sizeof n, "%d+", i->min_operands);
    else if (i->max_operands == i->min_operands) snprintf(n, sizeof n, "%d", i->min_operands);
    else snprintf(n, sizeof n, "%d-%d", i->min_operands, i->max_operands);
    size_t len = 0;
    for (int a = 0; a < H3_MAX_ATTR_SCHEMA && i->attrs[a].name && len < sizeof at; a++)
      len += (size_t)snprintf(at + len, sizeof at - len, "%s%s%s:%s", a ? ", " : "", i->attrs[a].name,
                              i->attrs[a].required ? "" : "?", attr_kind_word(i->attrs[a].kind));
    if (o->markdown)
      printf("| `%s` | %s | %s | %s |\n", i->name, n, at, pattern_word(i->kind));
    else if (*at)
      printf("%-24s %-6s %-11s %s\n", i->name, n, pattern_word(i->kind), at);
    else
      printf("%-24s %-6s %s\n", i->name, n, pattern_word(i->kind));
  }
  return 0;
}

/* o's passes for module m in *po: as given, plus draft-quant-nvfp4 where m has the DSpark
 * draft (MiniMax-M3.1), no --draft-quant was given and no --passes list replaces the
 * pipeline (buf: room for the enable list). */
static void passes_for(const options *o, const h3_module *m, h3_pass_options *po, char *buf, size_t cap) {
  *po = o->passes;
  if (o->draft_quant_given || o->passes.passes || !h3_module_param(m, "dspark.fc.weight")) return;
  snprintf(buf, cap, "%s%sdraft-quant-nvfp4", o->enable_text, *o->enable_text ? "," : "");
  po->enable = buf;
}

static int cmd_check(const options *o) {
  h3_diag d;
  diag_init(&d);
  h3_module *m = load_model(o, &d);
  h3_module_free(m);
  return finish(&d, m ? 0 : 1);
}

/* The dump headers of --print-ir-after ("# ---- IR after NAME ----" at a line start): their
 * offsets in text (at most cap), and how many there are. */
static int dump_headers(const char *text, size_t len, size_t *at, int cap) {
  static const char head[] = "# ---- IR after ";
  int n = 0;
  for (size_t i = 0; i + sizeof head - 1 <= len; i++)
    if ((i == 0 || text[i - 1] == '\n') && !memcmp(text + i, head, sizeof head - 1)) {
      if (n < cap) at[n] = i;
      n++;
    }
  return n;
}

/* Runs opt's passes on the module in text[from, to) (the rest blanked, newlines kept, so
 * that errors keep their file:line:col) and appends its printed IR to out. */
static int opt_one(const options *o, const char *text, size_t len, size_t from, size_t to,
                   h3_strbuf *out, h3_diag *d) {
  char *part = malloc(len + 1);
  if (!part) return 1;
  for (size_t i = 0; i < len; i++)
    part[i] = (i >= from && i < to) || text[i] == '\n' ? text[i] : ' ';
  part[len] = 0;
  h3_module *m = h3_module_parse(o->input, part, len, d);
  int rc = 1;
  if (m && h3_verify_module(m, d) == H3_OK) {
    h3_pass_options po = o->passes;
    if (!po.passes) po.passes = ""; /* opt runs only what it is told */
    if (h3_pass_pipeline_run(m, &po, d) == H3_OK) {
      h3_module_print(out, m);
      rc = 0;
    }
  }
  h3_module_free(m);
  free(part);
  return rc;
}

/* h3c opt: one module, or a file of --print-ir-after dumps (each module after its header,
 * optimised on its own and printed after the same header, as mlir-opt's split input). */
static int cmd_opt(const options *o) {
  h3_diag d;
  diag_init(&d);
  size_t len = 0;
  char *text = h3_read_file(o->input, &len, &d);
  if (!text) return finish(&d, 1);
  h3_diag_add_source(&d, o->input, text, len);
  enum { MAX_DUMPS = 4096 };
  size_t *at = malloc(MAX_DUMPS * sizeof *at);
  int n = at ? dump_headers(text, len, at, MAX_DUMPS) : 0, rc = at ? 0 : 1;
  if (n > MAX_DUMPS) {
    h3_diag_error(&d, (h3_span){.file = o->input}, "split the file", "%d IR dumps (at most %d)", n,
                  MAX_DUMPS);
    rc = 1;
  }
  h3_strbuf b;
  h3_strbuf_init(&b);
  if (!rc && n <= 1) rc = opt_one(o, text, len, 0, len, &b, &d);
  for (int k = 0; !rc && n > 1 && k < n; k++) {
    size_t to = k + 1 < n ? at[k + 1] : len, eol = at[k];
    while (eol < to && text[eol] != '\n') eol++;
    h3_strbuf_appendn(&b, text + at[k], eol - at[k]);
    h3_strbuf_append(&b, "\n");
    rc = opt_one(o, text, len, at[k], to, &b, &d);
  }
  if (!rc) rc = write_text(o->output, &b, &d);
  h3_strbuf_free(&b);
  free(at);
  rc = finish(&d, rc);
  free(text);
  return rc;
}

static int cmd_graph(const options *o) {
  h3_diag d;
  diag_init(&d);
  h3_module *m = load_model(o, &d);
  int rc = 1;
  h3_pass_options pass_opts;
  char enable[sizeof o->enable_text + 32];
  if (m) passes_for(o, m, &pass_opts, enable, sizeof enable);
  if (m && h3_pass_pipeline_run(m, &pass_opts, &d) == H3_OK) {
    h3_strbuf b;
    h3_strbuf_init(&b);
    if (h3_graph_print_dot(&b, m, o->graph, &d) == H3_OK) rc = write_text(o->output, &b, &d);
    h3_strbuf_free(&b);
  }
  h3_module_free(m);
  return finish(&d, rc);
}

/* bytes as "12.3 MiB" or "1.23 GiB" */
static const char *size_str(int64_t bytes, char *buf, size_t n) {
  double mib = (double)bytes / (1024.0 * 1024.0);
  if (mib >= 1024.0) snprintf(buf, n, "%.2f GiB", mib / 1024.0);
  else snprintf(buf, n, "%.1f MiB", mib);
  return buf;
}

/* The one-line summary of a written plan, on stdout (stderr keeps diagnostics and the
 * --print-ir-after dumps, so that a dump redirected alone is valid IR text). */
static void plan_summary(const h3_plan *p, const char *file) {
  const h3_plan_memory *big = NULL;
  for (int i = 0; i < p->n_memory; i++)
    if (!big || p->memory[i].arena_bytes > big->arena_bytes) big = &p->memory[i];
  char w[32], a[32];
  fprintf(stdout, "h3c: wrote %s: %s, config %s, %s; %d kernels in %d units, %d library calls; "
          "weights %s", file, p->model ? p->model : "?", p->config ? p->config : "?",
          h3_tier_name(p->quality), p->n_kernels, p->n_tus, p->n_libcalls,
          size_str(p->weight_bytes, w, sizeof w));
  if (big && big->arena_bytes >= 0)
    fprintf(stdout, "; largest arena %s (%s)", size_str(big->arena_bytes, a, sizeof a), big->graph);
  fprintf(stdout, "\n");
}

static int cmd_compile(const options *o) {
  h3_diag d;
  diag_init(&d);
  h3_module *m = load_model(o, &d);
  if (!m) return finish(&d, 1);
  h3_pass_options pass_opts;
  char enable[sizeof o->enable_text + 32];
  passes_for(o, m, &pass_opts, enable, sizeof enable);
  if (h3_pass_pipeline_run(m, &pass_opts, &d) != H3_OK) {
    h3_module_free(m);
    return finish(&d, 1);
  }
  const h3_pass *list[64]; /* the passes that ran, for the plan header */
  int n = 0;
  h3_diag again; /* the run reported the warnings already */
  diag_init(&again);
  h3_pass_pipeline_resolve(&pass_opts, list, 64, &n, &again);
  h3_diag_free(&again);
  const char *names[64];
  for (int i = 0; i < n; i++) names[i] = list[i]->name;
  h3_plan_options po = {.quality = o->passes.tier,
                        .source_file = o->input,
                        .n_flags = o->n_flags,
                        .flags = o->flags,
                        .n_passes = n,
                        .passes = names};
  h3_plan *plan = NULL;
  int rc = 1;
  if (h3_plan_build(&plan, m, &po, &d) == H3_OK &&
      (o->no_kernels || h3_plan_compile_kernels(plan, &d) == H3_OK) &&
      h3_plan_write_file(plan, o->output, &d) == H3_OK)
    rc = 0;
  rc = finish(&d, rc); /* the diagnostics first, then the summary */
  if (rc == 0) plan_summary(plan, o->output);
  h3_plan_free(plan);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage_main(stderr);
    return 1;
  }
  options o;
  memset(&o, 0, sizeof o);
  o.passes = h3_pass_options_default();
  const char *c = argv[1];
  if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
    usage_main(stdout);
    return 0;
  }
  if (!strcmp(c, "--version")) {
    printf("h3c %s\n", H3_VERSION);
    return 0;
  }
  int found = 0;
  for (int i = 0; i < CMD_HELP; i++)
    if (!strcmp(c, command_names[i])) {
      o.cmd = (command)i;
      found = 1;
    }
  if (!found) {
    fprintf(stderr, "h3c: error: unknown command '%s'\n", c);
    fprintf(stderr, "hint: the commands are compile, check, opt, passes, ops, graph; see 'h3c --help'\n");
    return 1;
  }
  if (parse_args(argc, argv, &o)) return 1;
  switch (o.cmd) {
  case CMD_COMPILE: return cmd_compile(&o);
  case CMD_CHECK: return cmd_check(&o);
  case CMD_OPT: return cmd_opt(&o);
  case CMD_PASSES: return cmd_passes(&o);
  case CMD_OPS: return cmd_ops(&o);
  case CMD_GRAPH: return cmd_graph(&o);
  case CMD_HELP: break;
  }
  return 0;
}
