/* fileio.c: whole-file reading and the registry of the files this process reads
 * (support.h).
 *
 * h3_read_file reads any readable file (also pipes) into one NUL-terminated malloc'd
 * buffer. Every regular file a reader of the project opens (h3_read_file, the safetensors
 * reader) is registered through h3_input_register: remembered by (st_dev, st_ino) with the
 * path as given and a role ("input", "weights file", ...) for the life of the process.
 * h3_output_check turns an output that is one of them (by any name: a symlink, a hard
 * link) into an error naming both, so that the writer (ir/output.c) never replaces a file
 * the run was made from.
 */
#include "h3/support.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static h3_span no_span(void) {
  h3_span s = {0};
  return s;
}

typedef struct {
  dev_t dev;
  ino_t ino;
  char *path;       /* as the reader gave it */
  const char *role; /* static text */
} input_file;

/* The registry: grows, never shrinks; guarded by `inputs_lock` (readers may be threads). */
static pthread_mutex_t inputs_lock = PTHREAD_MUTEX_INITIALIZER;
static input_file *inputs;
static size_t n_inputs, cap_inputs;

static input_file *find_input(const struct stat *st) {
  for (size_t i = 0; i < n_inputs; i++)
    if (inputs[i].dev == st->st_dev && inputs[i].ino == st->st_ino) return &inputs[i];
  return NULL;
}

void h3_input_register(int fd, const char *path, const char *role) {
  struct stat st;
  if ((fd >= 0 ? fstat(fd, &st) : stat(path, &st)) != 0 || !S_ISREG(st.st_mode)) return;
  pthread_mutex_lock(&inputs_lock);
  input_file *f = find_input(&st);
  if (f) {
    f->role = role;
  } else {
    if (n_inputs == cap_inputs) {
      size_t nc = cap_inputs ? 2 * cap_inputs : 16;
      input_file *ni = realloc(inputs, nc * sizeof *ni);
      if (ni) {
        inputs = ni;
        cap_inputs = nc;
      }
    }
    char *copy = n_inputs < cap_inputs ? strdup(path) : NULL;
    if (copy) inputs[n_inputs++] = (input_file){st.st_dev, st.st_ino, copy, role};
    /* out of memory: the file stays unprotected, like before the registry existed */
  }
  pthread_mutex_unlock(&inputs_lock);
}

h3_status h3_output_check(const char *path, h3_diag *d) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return H3_OK;
  pthread_mutex_lock(&inputs_lock);
  const input_file *f = find_input(&st);
  if (f)
    h3_diag_error(d, no_span(), "choose another output file", "output %s is the %s %s", path,
                  f->role, f->path);
  pthread_mutex_unlock(&inputs_lock);
  return f ? H3_ERR : H3_OK;
}

char *h3_read_file(const char *path, size_t *len, h3_diag *d) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    h3_diag_error(d, no_span(), "check the path and its permissions", "cannot read %s: %s",
                  path, strerror(errno));
    return NULL;
  }
  h3_input_register(fileno(f), path, "input");
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    if (cap - n < 2) {
      if (cap > SIZE_MAX / 4) {
        free(buf);
        buf = NULL;
        break;
      }
      char *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n - 1, f);
    n += got;
    if (got == 0) break;
  }
  if (!buf) {
    fclose(f);
    h3_diag_error(d, no_span(), "free memory: the file is read into memory whole",
                  "cannot read %s: out of memory", path);
    return NULL;
  }
  if (ferror(f)) {
    int e = errno;
    fclose(f);
    free(buf);
    h3_diag_error(d, no_span(), "check that the path names a regular file",
                  "cannot read %s: %s", path, strerror(e ? e : EIO));
    return NULL;
  }
  fclose(f);
  buf[n] = '\0';
  if (len) *len = n;
  return buf;
}
