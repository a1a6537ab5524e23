/* profile.c: writes the runtime's trace events as a Chrome / Perfetto trace file.
 *
 * Format: {"traceEvents": [{"name", "cat", "ph": "X", "ts", "dur", "pid": 1, "tid": 1,
 * "args": {"depth"}}...], "displayTimeUnit": "ms"}, times in microseconds. Complete
 * events nest by time, so calls and loops (cat "control") enclose the ops they ran. The
 * file is written atomically: a failed run never leaves half a trace.
 */
#include "h3/runtime.h"

#include <stdlib.h>

static void json_string(h3_strbuf *b, const char *s) {
  h3_strbuf_append(b, "\"");
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      h3_strbuf_printf(b, "\\%c", c);
    else if (c < 0x20)
      h3_strbuf_printf(b, "\\u%04x", c);
    else
      h3_strbuf_appendn(b, (const char *)&c, 1);
  }
  h3_strbuf_append(b, "\"");
}

h3_status h3_trace_write_file(const h3_trace_event *ev, size_t n, const char *path, h3_diag *d) {
  h3_strbuf b;
  h3_strbuf_init(&b);
  h3_strbuf_append(&b, "{\"traceEvents\": [\n");
  for (size_t i = 0; i < n; i++) {
    h3_strbuf_append(&b, "  {\"name\": ");
    json_string(&b, ev[i].name);
    h3_strbuf_append(&b, ", \"cat\": ");
    json_string(&b, ev[i].cat);
    h3_strbuf_printf(&b,
                     ", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": 1, \"tid\": 1, "
                     "\"args\": {\"depth\": %d}}%s\n",
                     ev[i].ts * 1e6, ev[i].dur * 1e6, ev[i].depth, i + 1 < n ? "," : "");
  }
  h3_strbuf_append(&b, "], \"displayTimeUnit\": \"ms\"}\n");
  h3_status st;
  if (b.oom) {
    h3_diag_error(d, (h3_span){0}, "profile fewer iterations",
                  "%s: out of memory building the trace", path);
    st = H3_ERR;
  } else {
    st = h3_write_file_atomic(path, b.data, b.len, d);
  }
  h3_strbuf_free(&b);
  return st;
}
