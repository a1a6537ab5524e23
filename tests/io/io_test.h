/* io_test.h: small helpers shared by the tests of tests/io (checks, a scratch folder,
 * writing hand-made files, reading diagnostics back). Header-only: each test is one
 * executable.
 */
#ifndef H3_IO_TEST_H
#define H3_IO_TEST_H

#include "h3/support.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int io_failures;

#define CHECK(cond)                                                                          \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
      io_failures++;                                                                         \
    }                                                                                        \
  } while (0)

/* A scratch folder "NAME.XXXXXX" in the working directory, removed by io_scratch_done. */
static char io_scratch[256];

static inline const char *io_scratch_make(const char *name) {
  snprintf(io_scratch, sizeof io_scratch, "%s.XXXXXX", name);
  if (!mkdtemp(io_scratch)) {
    perror("mkdtemp");
    exit(1);
  }
  return io_scratch;
}

/* Path of a file in the scratch folder (a rotating set of static buffers). */
static inline const char *io_path(const char *file) {
  static char bufs[8][512];
  static int k;
  char *b = bufs[k++ % 8];
  snprintf(b, 512, "%s/%s", io_scratch, file);
  return b;
}

/* Number of entries (besides . and ..) in the scratch folder. */
static inline int io_scratch_count(void) {
  DIR *dir = opendir(io_scratch);
  int n = 0;
  for (struct dirent *e; dir && (e = readdir(dir));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  if (dir) closedir(dir);
  return n;
}

static inline void io_scratch_done(void) {
  DIR *dir = opendir(io_scratch);
  for (struct dirent *e; dir && (e = readdir(dir));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char p[600];
    snprintf(p, sizeof p, "%s/%s", io_scratch, e->d_name);
    if (unlink(p) != 0) rmdir(p);
  }
  if (dir) closedir(dir);
  rmdir(io_scratch);
}

static inline void io_write_bytes(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

/* Writes a safetensors-like file: 8-byte little-endian `header_len` (the real length
 * of `json` when header_len is (uint64_t)-1), the JSON text, then `data_len` bytes of a
 * non-zero pattern. */
static inline void io_write_st(const char *path, uint64_t header_len, const char *json,
                        size_t data_len) {
  size_t jl = strlen(json);
  if (header_len == (uint64_t)-1) header_len = jl;
  unsigned char *buf = malloc(8 + jl + data_len + 1);
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)(header_len >> (8 * i));
  memcpy(buf + 8, json, jl);
  for (size_t i = 0; i < data_len; i++) buf[8 + jl + i] = (unsigned char)(i * 37 + 11);
  io_write_bytes(path, buf, 8 + jl + data_len);
  free(buf);
}

/* Checks that `d` holds an error whose message is exactly `want` (prints all on failure). */
#define EXPECT_ERROR(d, want) io_expect_error((d), (want), __FILE__, __LINE__)
static inline void io_expect_error(h3_diag *d, const char *want, const char *file, int line) {
  for (const h3_diag_msg *m = d->head; m; m = m->next)
    if (m->level == H3_DIAG_ERROR && strcmp(m->message, want) == 0) return;
  fprintf(stderr, "%s:%d: expected error:\n  %s\ngot:\n", file, line, want);
  for (const h3_diag_msg *m = d->head; m; m = m->next) fprintf(stderr, "  %s\n", m->message);
  if (!d->head) fprintf(stderr, "  (no messages)\n");
  io_failures++;
}

/* Checks that every error of `d` has a hint. */
static inline void io_expect_hints(h3_diag *d, const char *file, int line) {
  for (const h3_diag_msg *m = d->head; m; m = m->next)
    if (m->level == H3_DIAG_ERROR && !m->hint) {
      fprintf(stderr, "%s:%d: error without a hint: %s\n", file, line, m->message);
      io_failures++;
    }
}

/* A deterministic non-zero pseudo-random 32-bit value (the tests' own mixer, also written
 * in interop.py). */
static inline uint32_t io_hash(uint32_t i, uint32_t salt) {
  uint32_t h = i * 0x9E3779B1u + salt * 0x85EBCA77u + 1u;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  return h;
}

/* A value in [-8, 8) on a 2^-20 grid, exact in fp32. */
static inline float io_value(uint32_t i, uint32_t salt) {
  return (float)((int32_t)(io_hash(i, salt) >> 8) - 0x800000) * 0x1p-20f;
}

#endif
