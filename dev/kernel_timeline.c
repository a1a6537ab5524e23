/* kernel_timeline.c: every kernel, copy and memset a process runs on the GPU, with its device
 * start / end times, stream and CUDA graph node, written at exit (lab; CUPTI activity records,
 * CONCURRENT_KERNEL so that streams still overlap). Loaded into any program with LD_PRELOAD:
 *   cc -O2 -shared -fPIC -o build-gpu/lab/kernel_timeline.so dev/kernel_timeline.c \
 *      -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcupti -Wl,-rpath,'$ORIGIN'
 *   cp /usr/local/cuda/lib64/libcupti.so.13 build-gpu/lab/
 *   H3_TIMELINE=out.tsv LD_PRELOAD=build-gpu/lab/kernel_timeline.so h3exec ...
 * out.tsv: one line a record, tab-separated:
 *   kind(K|C|S) start_ns end_ns stream graph_id graph_node correlation grid_blocks name
 * dev/kernel_timeline.py reads it (one graph's launches: each node's median offset and time).
 */
#include <cupti.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BUF_BYTES = 8 << 20 };
static FILE *out;

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records) {
  *buf = aligned_alloc(8, BUF_BYTES);
  *size = *buf ? BUF_BYTES : 0;
  *max_records = 0;
}

static void write_record(const CUpti_Activity *r) {
  if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
    const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
    fprintf(out, "K\t%llu\t%llu\t%u\t%u\t%llu\t%u\t%lld\t%s\n", (unsigned long long)k->start,
            (unsigned long long)k->end, k->streamId, k->graphId, (unsigned long long)k->graphNodeId,
            k->correlationId, (long long)k->gridX * k->gridY * k->gridZ, k->name ? k->name : "?");
  } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
    const CUpti_ActivityMemcpy6 *c = (const CUpti_ActivityMemcpy6 *)r;
    fprintf(out, "C\t%llu\t%llu\t%u\t%u\t%llu\t%u\t%llu\tcopy kind %u\n", (unsigned long long)c->start,
            (unsigned long long)c->end, c->streamId, c->graphId, (unsigned long long)c->graphNodeId,
            c->correlationId, (unsigned long long)c->bytes, c->copyKind);
  } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
    const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
    fprintf(out, "S\t%llu\t%llu\t%u\t%u\t%llu\t%u\t%llu\tmemset\n", (unsigned long long)m->start,
            (unsigned long long)m->end, m->streamId, m->graphId, (unsigned long long)m->graphNodeId,
            m->correlationId, (unsigned long long)m->bytes);
  }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                      size_t valid) {
  (void)ctx, (void)stream, (void)size;
  CUpti_Activity *r = NULL;
  while (out && cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) write_record(r);
  free(buf);
}

__attribute__((constructor)) static void timeline_start(void) {
  const char *path = getenv("H3_TIMELINE");
  if (!path || !(out = fopen(path, "w"))) {
    fprintf(stderr, "kernel_timeline: set H3_TIMELINE to a writable file\n");
    return;
  }
  const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                      CUPTI_ACTIVITY_KIND_MEMSET};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (cuptiActivityEnable(kinds[i]) != CUPTI_SUCCESS)
      fprintf(stderr, "kernel_timeline: activity kind %d not enabled\n", (int)kinds[i]);
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS)
    fprintf(stderr, "kernel_timeline: CUPTI callbacks not registered\n");
}

__attribute__((destructor)) static void timeline_end(void) {
  if (!out) return;
  cuptiActivityFlushAll(1);
  fclose(out);
  out = NULL;
}
