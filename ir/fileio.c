/* fileio.c: whole-file reading and atomic writing (support.h).
 *
 * h3_read_file reads any readable file (also pipes) into one NUL-terminated malloc'd
 * buffer. h3_write_file_atomic writes to a temporary file next to the target, fsyncs it,
 * renames it over the target and fsyncs the folder, so a reader sees either the old or
 * the new content, never a torn file. Failures are diagnostics naming the file.
 */
#include "h3/support.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static h3_span no_span(void) {
  h3_span s = {0};
  return s;
}

char *h3_read_file(const char *path, size_t *len, h3_diag *d) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    h3_diag_error(d, no_span(), "check the path and its permissions", "cannot read %s: %s",
                  path, strerror(errno));
    return NULL;
  }
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
    h3_diag_error(d, no_span(), NULL, "cannot read %s: out of memory", path);
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

/* The folder part of `path` ("." when it has none), malloc'd. */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return strdup(".");
  if (slash == path) return strdup("/");
  return strndup(path, (size_t)(slash - path));
}

h3_status h3_write_file_atomic(const char *path, const void *data, size_t len, h3_diag *d) {
  static unsigned counter;
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 64);
  if (!tmp) {
    h3_diag_error(d, no_span(), NULL, "cannot write %s: out of memory", path);
    return H3_ERR;
  }
  snprintf(tmp, plen + 64, "%s.tmp.%ld.%u", path, (long)getpid(),
           __atomic_fetch_add(&counter, 1u, __ATOMIC_RELAXED)); /* unique per process and call */
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  const char *what = "create";
  int err = 0;
  if (fd < 0) {
    err = errno;
  } else {
    const char *p = data;
    size_t left = len;
    while (left > 0 && !err) {
      ssize_t w = write(fd, p, left);
      if (w < 0) {
        if (errno == EINTR) continue;
        err = errno;
        what = "write";
      } else {
        p += w;
        left -= (size_t)w;
      }
    }
    if (!err && fsync(fd) != 0) {
      err = errno;
      what = "sync";
    }
    if (close(fd) != 0 && !err) {
      err = errno;
      what = "close";
    }
    if (!err && rename(tmp, path) != 0) {
      err = errno;
      what = "rename";
    }
    if (err) unlink(tmp);
  }
  free(tmp);
  if (err) {
    h3_diag_error(d, no_span(), "check that the folder exists and is writable",
                  "cannot write %s (%s): %s", path, what, strerror(err));
    return H3_ERR;
  }
  /* make the rename durable; a folder that cannot be opened or synced is not an error */
  char *dir = dir_of(path);
  if (dir) {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      (void)fsync(dfd);
      close(dfd);
    }
    free(dir);
  }
  return H3_OK;
}
