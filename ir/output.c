/* output.c: the one writer of every output file (support.h: h3_output_*).
 *
 * An output never destroys anything. A file this process read is refused
 * (h3_output_check). Symbolic links are followed: the bytes replace the file the link
 * names (a dangling link creates it when its folder exists) and the link stays a link. A
 * regular file, or a new one, is written to a temporary ".NAME.tmp.PID.N" next to it,
 * fsync'd, renamed over it and the folder fsync'd, so a reader sees the old or the new
 * content, never a torn file; every failure removes the temporary file. FIFOs and
 * character devices (a pipe, /dev/null, a terminal) are written in place, never renamed
 * over; directories, sockets and block devices are refused. While a temporary file exists,
 * SIGINT and SIGTERM (those whose disposition is the default) remove it, print one line
 * and _exit(130 / 143); the disposition is restored when the last open output is committed
 * or aborted. An output that marked a complete prefix (h3_output_keep: a stream of lines)
 * is instead cut back to that prefix and renamed over the target by the handler. The
 * handler reads only the static `slots` and calls only async-signal-safe functions
 * (ftruncate, rename, unlink, write, _exit).
 */
#include "h3/support.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct h3_output {
  int fd;
  int slot;     /* the interrupt slot naming tmp; -1 when none */
  char *shown;  /* the path as given, for messages */
  char *target; /* where the bytes end up: the path with its links followed */
  char *tmp;    /* the temporary file; NULL when the target is written in place */
  long long written; /* bytes written so far */
};

static h3_span no_span(void) {
  h3_span s = {0};
  return s;
}

/* ---- interrupts ------------------------------------------------------------------ */
enum { SLOT_FREE, SLOT_TAKEN, SLOT_ARMED, N_SLOTS = 8 };

/* One temporary file per armed slot; a handler removes those (or keeps their complete
 * prefix, see h3_output_keep) and prints their notes. */
static struct {
  atomic_int state;
  atomic_int fd;        /* the temporary file's descriptor; -1 until it is open */
  atomic_llong keep;    /* bytes an interrupt keeps; -1: remove the file */
  char tmp[PATH_MAX];
  char target[PATH_MAX];
  char note[PATH_MAX + 128]; /* "PROGRAM: interrupted; PATH is left as it was\n" */
  char kept[PATH_MAX + 128]; /* "PROGRAM: interrupted; PATH holds the output written so far\n" */
  size_t note_len, kept_len;
} slots[N_SLOTS];

static const int interrupt_signals[2] = {SIGINT, SIGTERM};
static pthread_mutex_t interrupt_lock = PTHREAD_MUTEX_INITIALIZER;
static int interrupt_users; /* armed slots */
static struct sigaction interrupt_old[2];
static int interrupt_ours[2]; /* our handler replaced the default of that signal */

static void on_interrupt(int sig) {
  for (int i = 0; i < N_SLOTS; i++)
    if (atomic_load(&slots[i].state) == SLOT_ARMED) {
      long long keep = atomic_load(&slots[i].keep);
      int fd = atomic_load(&slots[i].fd); /* -1: closed by commit, the file is whole */
      ssize_t r;
      if (keep >= 0 && (fd < 0 || ftruncate(fd, (off_t)keep) == 0) &&
          rename(slots[i].tmp, slots[i].target) == 0) {
        r = write(STDERR_FILENO, slots[i].kept, slots[i].kept_len);
      } else {
        unlink(slots[i].tmp);
        r = write(STDERR_FILENO, slots[i].note, slots[i].note_len);
      }
      (void)r;
    }
  _exit(sig == SIGINT ? 130 : 143);
}

static void interrupts_hold(void) {
  pthread_mutex_lock(&interrupt_lock);
  if (interrupt_users++ == 0)
    for (int k = 0; k < 2; k++) {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_handler = on_interrupt;
      sigemptyset(&sa.sa_mask);
      sigaddset(&sa.sa_mask, SIGINT);
      sigaddset(&sa.sa_mask, SIGTERM);
      const struct sigaction *old = &interrupt_old[k];
      interrupt_ours[k] = sigaction(interrupt_signals[k], NULL, &interrupt_old[k]) == 0 &&
                          !(old->sa_flags & SA_SIGINFO) && old->sa_handler == SIG_DFL &&
                          sigaction(interrupt_signals[k], &sa, NULL) == 0;
    }
  pthread_mutex_unlock(&interrupt_lock);
}

static void interrupts_release(void) {
  pthread_mutex_lock(&interrupt_lock);
  if (--interrupt_users == 0)
    for (int k = 0; k < 2; k++)
      if (interrupt_ours[k]) sigaction(interrupt_signals[k], &interrupt_old[k], NULL);
  pthread_mutex_unlock(&interrupt_lock);
}

/* Arms a slot so that an interrupt removes `tmp` (the temporary file of `target`); -1 when
 * all are taken or a name does not fit (the file is then only removed by the usual failure
 * paths). */
static int slot_take(const char *tmp, const char *target, const char *shown,
                     const char *program) {
  if (strlen(tmp) >= PATH_MAX || strlen(target) >= PATH_MAX) return -1;
  for (int i = 0; i < N_SLOTS; i++) {
    int expect = SLOT_FREE;
    if (!atomic_compare_exchange_strong(&slots[i].state, &expect, SLOT_TAKEN)) continue;
    strcpy(slots[i].tmp, tmp);
    strcpy(slots[i].target, target);
    atomic_store(&slots[i].fd, -1);
    atomic_store(&slots[i].keep, -1LL);
    snprintf(slots[i].note, sizeof slots[i].note, "%s: interrupted; %s is left as it was\n",
             program, shown);
    slots[i].note_len = strlen(slots[i].note);
    snprintf(slots[i].kept, sizeof slots[i].kept,
             "%s: interrupted; %s holds the output written so far\n", program, shown);
    slots[i].kept_len = strlen(slots[i].kept);
    interrupts_hold();
    atomic_store(&slots[i].state, SLOT_ARMED);
    return i;
  }
  return -1;
}

/* Before the temporary file's descriptor is closed: an interrupt from now on keeps the whole
 * file (commit: it is complete) or, when `whole` is 0 or nothing was marked, removes it. */
static void slot_close_fd(const h3_output *o, int whole) {
  if (o->slot < 0) return;
  if (!whole || atomic_load(&slots[o->slot].keep) < 0)
    atomic_store(&slots[o->slot].keep, -1LL);
  else
    atomic_store(&slots[o->slot].keep, o->written);
  atomic_store(&slots[o->slot].fd, -1);
}

static void slot_free(int i) {
  if (i < 0) return;
  atomic_store(&slots[i].state, SLOT_FREE);
  interrupts_release();
}

/* ---- where the bytes go ------------------------------------------------------------ */
/* The folder part of `path` ("." when it has none), malloc'd. */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return strdup(".");
  if (slash == path) return strdup("/");
  return strndup(path, (size_t)(slash - path));
}

static int is_folder(const char *path) {
  char *dir = dir_of(path);
  struct stat st;
  int ok = dir && stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
  free(dir);
  return ok;
}

/* `path` with its symbolic links followed (malloc'd); NULL after an error for a loop, an
 * unreadable link, a dangling link whose folder is missing, or no memory. */
static char *follow_links(const char *path, h3_diag *d) {
  char *cur = strdup(path);
  for (int hops = 0; cur; hops++) {
    struct stat ls;
    int missing = lstat(cur, &ls) != 0;
    if (missing || !S_ISLNK(ls.st_mode)) {
      if (!hops || !missing || is_folder(cur)) return cur;
      h3_diag_error(d, no_span(), "create the folder or choose another output file",
                    "cannot write %s: it is a link to %s, whose folder does not exist", path,
                    cur);
      free(cur);
      return NULL;
    }
    char link[PATH_MAX];
    ssize_t n = -1;
    if (hops == 40)
      errno = ELOOP;
    else
      n = readlink(cur, link, sizeof link - 1);
    if (n < 0) {
      h3_diag_error(d, no_span(), "check where the link points", "cannot write %s: %s", path,
                    strerror(errno));
      free(cur);
      return NULL;
    }
    link[n] = '\0';
    const char *slash = strrchr(cur, '/');
    char *next = malloc(strlen(cur) + (size_t)n + 1);
    if (next && (link[0] == '/' || !slash))
      strcpy(next, link);
    else if (next)
      sprintf(next, "%.*s%s", (int)(slash - cur + 1), cur, link);
    free(cur);
    cur = next;
  }
  h3_diag_error(d, no_span(), H3_HINT_OOM, "cannot write %s: out of memory", path);
  return NULL;
}

/* Creates "DIR/.NAME.tmp.PID.N" next to o->target exclusively (mode 0666 minus the umask),
 * armed against interrupts; sets o->fd and o->tmp, or returns -1 with errno set. */
static int create_temp(h3_output *o, const char *program) {
  static atomic_uint counter;
  const char *slash = strrchr(o->target, '/');
  size_t dlen = slash ? (size_t)(slash - o->target) + 1 : 0, len = strlen(o->target) + 48;
  char *t = malloc(len);
  if (!t) {
    errno = ENOMEM;
    return -1;
  }
  for (int tries = 0; tries < 100; tries++) {
    snprintf(t, len, "%.*s.%s.tmp.%ld.%u", (int)dlen, o->target, o->target + dlen,
             (long)getpid(), atomic_fetch_add(&counter, 1u));
    o->slot = slot_take(t, o->target, o->shown, program);
    o->fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (o->fd >= 0) {
      if (o->slot >= 0) atomic_store(&slots[o->slot].fd, o->fd);
      o->tmp = t;
      return o->fd;
    }
    int err = errno;
    slot_free(o->slot);
    o->slot = -1;
    errno = err;
    if (err != EEXIST) break;
  }
  free(t);
  return -1;
}

static void release(h3_output *o) {
  slot_free(o->slot);
  free(o->tmp);
  free(o->target);
  free(o->shown);
  free(o);
}

static void report(const h3_output *o, h3_diag *d, const char *what, int err) {
  const char *hint = strcmp(what, "create") == 0
                         ? "check that the folder exists and is writable"
                         : "check the free disk space and the folder's permissions";
  h3_diag_error(d, no_span(), hint, "cannot write %s (%s): %s", o->shown, what, strerror(err));
}

/* ---- the writer -------------------------------------------------------------------- */
h3_status h3_output_open(const char *path, h3_output **out, h3_diag *d) {
  *out = NULL;
  if (h3_output_check(path, d) != H3_OK) return H3_ERR;
  char *target = follow_links(path, d);
  if (!target) return H3_ERR;
  h3_output *o = calloc(1, sizeof *o);
  if (!o || !(o->shown = strdup(path))) {
    h3_diag_error(d, no_span(), H3_HINT_OOM, "cannot write %s: out of memory", path);
    free(target);
    free(o);
    return H3_ERR;
  }
  o->target = target;
  o->fd = o->slot = -1;
  struct stat st;
  const char *kind = NULL;
  if (stat(target, &st) == 0 && !S_ISREG(st.st_mode)) {
    kind = S_ISDIR(st.st_mode) ? "a directory" : S_ISSOCK(st.st_mode) ? "a socket"
           : S_ISBLK(st.st_mode) ? "a block device" : NULL;
    if (kind)
      h3_diag_error(d, no_span(), "give the path of a regular file, a FIFO or a character device",
                    "cannot write %s: it is %s", path, kind);
    else if ((o->fd = open(target, O_WRONLY | O_NOCTTY | O_CLOEXEC)) < 0)
      report(o, d, "open", errno);
  } else if (create_temp(o, d->program ? d->program : "h3") < 0) {
    report(o, d, "create", errno);
  }
  if (kind || o->fd < 0) {
    release(o);
    return H3_ERR;
  }
  *out = o;
  return H3_OK;
}

h3_status h3_output_write(h3_output *o, const void *data, size_t len, h3_diag *d) {
  const char *p = data;
  while (len > 0) {
    size_t chunk = len < ((size_t)1 << 30) ? len : ((size_t)1 << 30);
    ssize_t w = write(o->fd, p, chunk);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      report(o, d, "write", w < 0 ? errno : EIO);
      return H3_ERR;
    }
    p += w;
    len -= (size_t)w;
    o->written += w;
  }
  return H3_OK;
}

void h3_output_keep(h3_output *o) {
  if (o->slot >= 0) atomic_store(&slots[o->slot].keep, o->written);
}

void h3_output_abort(h3_output *o) {
  if (!o) return;
  slot_close_fd(o, 0);
  if (o->fd >= 0) close(o->fd);
  if (o->tmp) unlink(o->tmp);
  release(o);
}

h3_status h3_output_commit(h3_output *o, h3_diag *d) {
  const char *what = NULL;
  int err = 0;
  if (o->tmp && fsync(o->fd) != 0) {
    what = "sync";
    err = errno;
  }
  slot_close_fd(o, !what);
  if (close(o->fd) != 0 && !what) {
    what = "close";
    err = errno;
  }
  o->fd = -1;
  if (!what && o->tmp && rename(o->tmp, o->target) != 0) {
    what = "rename";
    err = errno;
  }
  if (what) {
    report(o, d, what, err);
    h3_output_abort(o);
    return H3_ERR;
  }
  if (o->tmp) {
    /* make the rename durable; a folder that cannot be opened or synced is not an error */
    char *dir = dir_of(o->target);
    int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dfd >= 0) {
      (void)fsync(dfd);
      close(dfd);
    }
    free(dir);
    free(o->tmp);
    o->tmp = NULL;
  }
  release(o);
  return H3_OK;
}

h3_status h3_write_file_atomic(const char *path, const void *data, size_t len, h3_diag *d) {
  h3_output *o;
  if (h3_output_open(path, &o, d) != H3_OK) return H3_ERR;
  if (h3_output_write(o, data, len, d) != H3_OK) {
    h3_output_abort(o);
    return H3_ERR;
  }
  return h3_output_commit(o, d);
}
