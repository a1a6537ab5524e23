/* support.h: the small utilities every h3 module shares.
 *
 * - h3_arena: a bump allocator; everything of one phase (parse, IR, plan) lives in one
 *   arena and is freed at once. Allocation failure is reported, never ignored: the
 *   arena functions return NULL and the callers turn that into a diagnostic.
 * - h3_strbuf: a growable string for printers and code emitters.
 * - h3_span / h3_diag: source locations and the diagnostic sink. Every error a user can
 *   cause goes through h3_diag_error() with a span (file:line:col) and an optional hint.
 * - h3_status: what every fallible public function returns.
 * - files: whole-file reading, the registry of the files a process reads, and the one
 *   writer of outputs, which never replaces an input, a link or a device.
 */
#ifndef H3_SUPPORT_H
#define H3_SUPPORT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define H3_VERSION "0.1.0"

typedef enum { H3_OK = 0, H3_ERR = 1 } h3_status;

/* ---- arena ---------------------------------------------------------------------- */
typedef struct h3_arena_chunk h3_arena_chunk;
typedef struct {
  h3_arena_chunk *head;
  size_t bytes; /* total bytes handed out, for reports */
} h3_arena;

void h3_arena_init(h3_arena *a);
void h3_arena_free(h3_arena *a);
/* Zeroed, 16-byte aligned; NULL when the system is out of memory. */
void *h3_arena_alloc(h3_arena *a, size_t size);
char *h3_arena_strdup(h3_arena *a, const char *s);
char *h3_arena_strndup(h3_arena *a, const char *s, size_t n);
char *h3_arena_printf(h3_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- growable string ------------------------------------------------------------- */
typedef struct {
  char *data; /* NUL-terminated, owned (malloc) */
  size_t len, cap;
  int oom; /* set when an append failed; the content is then truncated */
} h3_strbuf;

void h3_strbuf_init(h3_strbuf *b);
void h3_strbuf_free(h3_strbuf *b);
void h3_strbuf_append(h3_strbuf *b, const char *s);
void h3_strbuf_appendn(h3_strbuf *b, const char *s, size_t n);
void h3_strbuf_printf(h3_strbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void h3_strbuf_vprintf(h3_strbuf *b, const char *fmt, va_list ap);
/* Shortest decimal text of a double that parses back to the same bits ("%.17g" fallback). */
void h3_strbuf_double(h3_strbuf *b, double v);
/* Copies s replacing every occurrence of `from` (non-empty) with `to` (malloc'd; NULL when
 * out of memory). */
char *h3_str_replace_all(const char *s, const char *from, const char *to);

/* ---- source spans and diagnostics ------------------------------------------------- */
/* A half-open range in one source; line and col are 1-based; col counts bytes. */
typedef struct {
  const char *file; /* interned in the source's arena; NULL for "no location" */
  int line, col;
  int end_line, end_col; /* end_col is exclusive; equal to col for a point */
} h3_span;

typedef enum { H3_DIAG_ERROR, H3_DIAG_WARNING, H3_DIAG_NOTE } h3_diag_level;

typedef struct h3_diag_msg {
  h3_diag_level level;
  h3_span span;
  char *message; /* owned */
  char *hint;    /* owned, may be NULL */
  struct h3_diag_msg *next;
} h3_diag_msg;

/* A registered source text, so diagnostics can quote the line and draw a caret. */
typedef struct h3_diag_source {
  const char *file;
  const char *text;
  size_t len;
  int owned; /* text is malloc'd and freed by h3_diag_free (h3_diag_add_source_owned) */
  struct h3_diag_source *next;
} h3_diag_source;

typedef struct {
  h3_diag_msg *head, *tail;
  h3_diag_source *sources;
  int errors, warnings;
  int max_errors; /* stop recording after this many errors (0 = 50) */
  const char *program; /* prefix of messages without a location; NULL = "h3" */
} h3_diag;

void h3_diag_init(h3_diag *d);
void h3_diag_free(h3_diag *d);
/* The text must outlive the diag; the file name is copied. */
void h3_diag_add_source(h3_diag *d, const char *file, const char *text, size_t len);
/* Same, and the diag takes ownership of the malloc'd text (freed by h3_diag_free, or at
 * once when it cannot be registered). */
void h3_diag_add_source_owned(h3_diag *d, const char *file, char *text, size_t len);
void h3_diag_error(h3_diag *d, h3_span span, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The hint of a host out-of-memory error: the config sets what h3c and h3exec hold. */
#define H3_HINT_OOM "free memory, or compile a smaller config (h3c --config, smaller --set values)"
/* The same with the arguments as a va_list (for reporting helpers of their own). */
void h3_diag_verror(h3_diag *d, h3_span span, const char *hint, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));
void h3_diag_warning(h3_diag *d, h3_span span, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void h3_diag_note(h3_diag *d, h3_span span, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prints every message in order:
 *   file:line:col: error: message
 *      12 | source line
 *         |     ^~~~~
 *   hint: ...
 * Messages without a file print as "PROGRAM: error: message" (d->program, default "h3"). */
void h3_diag_print(const h3_diag *d, FILE *out);

/* ---- files: inputs and outputs ------------------------------------------------------ */
/* Reads a whole file into malloc'd memory (NUL-terminated) and registers it as an input
 * (role "input"). On failure records an error naming the file and returns NULL. */
char *h3_read_file(const char *path, size_t *len, h3_diag *d);
/* Remembers for the life of the process that it reads the regular file `path` (open as
 * `fd`, or -1 to look the path up) as `role` (static text: "input", "weights file", ...);
 * a later call for the same file replaces the role. No output may then replace the file.
 * Every reader of the project calls it (h3_read_file, h3_safetensors_open). Thread-safe. */
void h3_input_register(int fd, const char *path, const char *role);
/* An error ("output OUT is the ROLE IN", hint) when `path` names, through any link, a
 * registered input; h3_output_open checks it, a program may call it early. */
h3_status h3_output_check(const char *path, h3_diag *d);

/* The writer of every output (ir/output.c). h3_output_open refuses a registered input,
 * follows symbolic links (the link stays a link; a dangling one creates its target when
 * the target's folder exists) and then
 *   - for a regular or a new file: writes a temporary file next to it, which commit
 *     fsyncs and renames over it (atomic: readers see the old or the new content);
 *   - for a FIFO or a character device (/dev/null, a pipe, a terminal): writes in place
 *     (opening a FIFO waits for a reader);
 *   - refuses directories, sockets and block devices.
 * While a temporary file exists, SIGINT and SIGTERM whose disposition is the default are
 * caught: the handler removes the temporary file(s), prints "PROGRAM: interrupted; PATH is
 * left as it was" and calls _exit(130 / 143). The default disposition comes back when the
 * last open output is committed or aborted; ignored or handled signals are left alone.
 * After a failed h3_output_write call h3_output_abort. Commit and abort free the output;
 * abort removes the temporary file and leaves the target as it was.
 * h3_output_keep (for outputs written as a stream of records, such as result lines) marks
 * the bytes written so far as a complete prefix: an interrupt then cuts the temporary file
 * back to the last marked prefix and renames it over the target (printing "PROGRAM:
 * interrupted; PATH holds the output written so far") instead of removing it. A no-op for
 * outputs written in place. One thread writes an output at a time. */
typedef struct h3_output h3_output;
h3_status h3_output_open(const char *path, h3_output **out, h3_diag *d);
h3_status h3_output_write(h3_output *o, const void *data, size_t len, h3_diag *d);
h3_status h3_output_commit(h3_output *o, h3_diag *d);
void h3_output_abort(h3_output *o); /* NULL is a no-op */
void h3_output_keep(h3_output *o);
/* open + write + commit of one buffer (atomic for regular files, see above). */
h3_status h3_write_file_atomic(const char *path, const void *data, size_t len, h3_diag *d);

/* SHA-256 of a byte string as 64 lowercase hex chars + NUL. */
void h3_sha256_hex(const void *data, size_t len, char out[65]);

#endif
