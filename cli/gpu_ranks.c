/* gpu_ranks.c: the rank processes of h3exec --backend cuda --gpus N and their supervisor
 * (gpu_ranks.h). */
#define _GNU_SOURCE
#include "gpu_ranks.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { STOP_GRACE_MS = 5000 }; /* SIGTERM to SIGKILL for the ranks stopped after a failure */

struct gpu_ranks {
  int n, rank; /* rank: this process's, -1 in the supervisor */
  pid_t *pid;  /* [n] */
  int *pipe;   /* [2 n]: pipe[2 j] read end, pipe[2 j + 1] write end of rank j's id (j >= 1) */
};

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

void gpu_ranks_free(gpu_ranks *g) {
  if (!g) return;
  for (int i = 0; i < 2 * g->n; i++) close_fd(&g->pipe[i]);
  free(g->pid);
  free(g->pipe);
  free(g);
}

/* Rank r keeps what it uses of the pipes: rank 0 the write ends, rank j its read end. */
static void keep_own_ends(gpu_ranks *g) {
  for (int j = 1; j < g->n; j++) {
    if (g->rank != j) close_fd(&g->pipe[2 * j]);
    if (g->rank != 0) close_fd(&g->pipe[2 * j + 1]);
  }
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void signal_living(const gpu_ranks *g, const int *ended, int sig) {
  for (int r = 0; r < g->n; r++)
    if (g->pid[r] > 0 && !ended[r]) kill(g->pid[r], sig);
}

/* How a rank ended, for the report. */
static void describe(int status, char *buf, size_t len) {
  if (WIFEXITED(status))
    snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else
    snprintf(buf, len, "ended with wait status %d", status);
}

static bool succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

int gpu_ranks_wait(gpu_ranks *g, h3_diag *d) {
  int *status = calloc((size_t)g->n, sizeof *status), *ended = calloc((size_t)g->n, sizeof *ended);
  int first_failed = -1, left = 0;
  double kill_at = 0;
  for (int r = 0; r < g->n; r++) left += g->pid[r] > 0;
  while (status && ended && left > 0) {
    int st;
    pid_t p = waitpid(-1, &st, first_failed >= 0 ? WNOHANG : 0);
    if (p < 0 && errno == EINTR) continue;
    if (p < 0) break; /* no child left */
    if (p == 0) {     /* after a failure: the stopped ranks have not ended yet */
      if (kill_at > 0 && now_ms() >= kill_at) {
        signal_living(g, ended, SIGKILL);
        kill_at = 0;
      }
      nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
      continue;
    }
    for (int r = 0; r < g->n; r++)
      if (g->pid[r] == p && !ended[r]) {
        ended[r] = 1, status[r] = st, left--;
        if (first_failed < 0 && !succeeded(st)) { /* the others may wait for it forever */
          first_failed = r;
          signal_living(g, ended, SIGTERM);
          kill_at = now_ms() + STOP_GRACE_MS;
        }
      }
  }
  int rc = first_failed >= 0 || !status || !ended ? 1 : 0;
  for (int r = 0; status && ended && r < g->n; r++) {
    if (!ended[r] || succeeded(status[r])) continue;
    char how[96];
    describe(status[r], how, sizeof how);
    if (r == first_failed)
      h3_diag_error(d, (h3_span){0}, "its own errors above (h3exec (rank N): ...) say why",
                    "--gpus %d: rank %d %s", g->n, r, how);
    else
      h3_diag_note(d, (h3_span){0}, "--gpus %d: rank %d %s after rank %d failed", g->n, r, how,
                   first_failed);
  }
  if (!status || !ended) h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "out of memory waiting for the ranks");
  free(status);
  free(ended);
  gpu_ranks_free(g);
  return rc;
}

gpu_ranks *gpu_ranks_fork(int n, int *rank, h3_diag *d) {
  gpu_ranks *g = calloc(1, sizeof *g);
  if (g) {
    g->n = n, g->rank = -1;
    g->pid = calloc((size_t)n, sizeof *g->pid);
    g->pipe = malloc(2 * (size_t)n * sizeof *g->pipe);
  }
  if (!g || !g->pid || !g->pipe) {
    if (g) free(g->pid), free(g->pipe);
    free(g);
    h3_diag_error(d, (h3_span){0}, H3_HINT_OOM, "out of memory starting %d ranks", n);
    return NULL;
  }
  for (int i = 0; i < 2 * n; i++) g->pipe[i] = -1;
  for (int j = 1; j < n; j++)
    if (pipe(&g->pipe[2 * j]) != 0) {
      h3_diag_error(d, (h3_span){0}, "run fewer ranks, or raise the open file limit (ulimit -n)",
                    "--gpus %d: cannot make the pipe of rank %d: %s", n, j, strerror(errno));
      gpu_ranks_free(g);
      return NULL;
    }
  fflush(stdout);
  fflush(stderr);
  pid_t supervisor = getpid();
  for (int r = 0; r < n; r++) {
    pid_t p = fork();
    if (p == 0) {
      g->rank = *rank = r;
      /* die with the supervisor (and if it died before this line) */
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != supervisor) _exit(1);
      keep_own_ends(g);
      static char program[32];
      snprintf(program, sizeof program, "h3exec (rank %d)", r);
      d->program = program;
      return g;
    }
    if (p < 0) {
      h3_diag_error(d, (h3_span){0}, "run fewer ranks (--gpus)", "--gpus %d: cannot start rank %d: %s", n,
                    r, strerror(errno));
      for (int i = 0; i < 2 * n; i++) close_fd(&g->pipe[i]);
      int *ended = calloc((size_t)n, sizeof *ended);
      if (ended) signal_living(g, ended, SIGKILL);
      free(ended);
      for (int q = 0; q < r; q++) waitpid(g->pid[q], NULL, 0);
      gpu_ranks_free(g);
      return NULL;
    }
    g->pid[r] = p;
  }
  for (int i = 0; i < 2 * n; i++) close_fd(&g->pipe[i]); /* the ranks hold theirs */
  *rank = -1;
  return g;
}

/* Rank 0: the id into every other rank's pipe, which it then closes. */
static h3_status send_id(gpu_ranks *g, const h3_rank_id *id, h3_diag *d) {
  signal(SIGPIPE, SIG_IGN); /* a rank gone before reading: EPIPE below, not a signal */
  for (int j = 1; j < g->n; j++) {
    ssize_t w;
    do w = write(g->pipe[2 * j + 1], id, sizeof *id);
    while (w < 0 && errno == EINTR);
    close_fd(&g->pipe[2 * j + 1]);
    if (w != (ssize_t)sizeof *id) { /* at most PIPE_BUF bytes: written whole or not at all */
      h3_diag_error(d, (h3_span){0}, "rank %d's own error says why",
                    "cannot hand the NCCL id to rank %d: %s", j, w < 0 ? strerror(errno) : "short write");
      return H3_ERR;
    }
  }
  return H3_OK;
}

/* Rank j >= 1: the id from its pipe. */
static h3_status receive_id(gpu_ranks *g, h3_rank_id *id, h3_diag *d) {
  size_t got = 0;
  while (got < sizeof *id) {
    ssize_t r = read(g->pipe[2 * g->rank], (char *)id + got, sizeof *id - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      h3_diag_error(d, (h3_span){0}, "rank 0's own error says why",
                    "rank 0 ended before handing out the NCCL id%s%s", r < 0 ? ": " : "",
                    r < 0 ? strerror(errno) : "");
      return H3_ERR;
    }
    got += (size_t)r;
  }
  close_fd(&g->pipe[2 * g->rank]);
  return H3_OK;
}

h3_backend *gpu_ranks_backend(gpu_ranks *g, const h3_backend_options *o, h3_diag *d) {
  h3_backend *b = h3_backend_create_rank("cuda", o, g->rank, d);
  h3_rank_id id;
  h3_status st = b ? H3_OK : H3_ERR;
  if (g->rank == 0)
    st = st == H3_OK && h3_backend_rank_id(b, &id, d) == H3_OK ? send_id(g, &id, d) : H3_ERR;
  else if (st == H3_OK)
    st = receive_id(g, &id, d);
  if (st == H3_OK) st = h3_backend_join_ranks(b, g->n, g->rank, &id, d);
  if (st == H3_OK) return b;
  h3_backend_free(b);
  return NULL;
}
