/*
 * trace_json.c: the last profile as Chrome trace JSON (em_profiler_export_chrome_trace;
 * ember.profiler's prof:export_chrome_trace), which Perfetto (ui.perfetto.dev) and
 * chrome://tracing open. One writer for C programs and Lua alike.
 *
 * Layout ("JSON Object Format" of the Trace Event Format):
 *   - process 1 is the host, one track (tid) per thread that recorded: an 'X' (complete)
 *     event per op, range and backward node, with input shapes, call site and bytes in args;
 *   - process 100 + d is device d (vulkan:0 ...), one track, its queue: an 'X' event per
 *     dispatch (its interval, docs/design.md "GPU time attribution");
 *   - a flow arrow from each op to each kernel it recorded: 's' on the op's track at the op's
 *     start, 'f' (binding point 'e': the enclosing slice) on the kernel's track at its start;
 *   - 'M' metadata events name the processes and threads and order them.
 * Times are microseconds from the profile's first event. The file is written atomically.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "../io/io.h"
#include "profiler.h"

enum { HOST_PID = 1, DEVICE_PID = 100 };

typedef struct out {
  em_atomic_file file;
  char buf[2048];
  int first;
  int failed;
} out;

/* Writes a JSON string's body: quotes, backslashes and control characters escaped. */
static int put_escaped(out *o, const char *s) {
  char chunk[256];
  size_t n = 0;
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (n + 8 > sizeof chunk) {
      if (em_atomic_write(&o->file, chunk, n) != 0) return -1;
      n = 0;
    }
    if (c == '"' || c == '\\') {
      chunk[n++] = '\\';
      chunk[n++] = (char)c;
    } else if (c < 0x20) {
      n += (size_t)snprintf(chunk + n, sizeof chunk - n, "\\u%04x", c);
    } else {
      chunk[n++] = (char)c;
    }
  }
  return em_atomic_write(&o->file, chunk, n);
}

static int put(out *o, const char *s) { return em_atomic_write(&o->file, s, strlen(s)); }

/* Starts an event: the separator, then the text in buf. */
static int begin(out *o, const char *text) {
  if (put(o, o->first ? "\n" : ",\n") != 0) return -1;
  o->first = 0;
  return put(o, text);
}

static double us(int64_t ns, int64_t t0) { return (double)(ns - t0) / 1e3; }

static int write_event(out *o, const em_profiler_event *e, int64_t i, int64_t t0) {
  if (e->kind == EM_PROFILER_KERNEL) {
    snprintf(o->buf, sizeof o->buf,
             "{\"ph\":\"X\",\"cat\":\"kernel\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f,"
             "\"args\":{\"correlation\":%" PRId64 ",\"device\":\"",
             DEVICE_PID + e->device, us(e->start_ns, t0), us(e->end_ns, e->start_ns), e->op + 1);
    if (begin(o, o->buf) != 0 || put_escaped(o, em_device_name(e->device)) != 0 ||
        put(o, "\"},\"name\":\"") != 0 || put_escaped(o, e->name) != 0 || put(o, "\"}") != 0)
      return -1;
    if (e->op < 0) return 0;
    em_profiler_event op;
    if (em_profiler_event_get(e->op, &op) != 0) return -1;
    snprintf(o->buf, sizeof o->buf,
             "{\"ph\":\"s\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":%" PRId64 ",\"pid\":%d,"
             "\"tid\":%d,\"ts\":%.3f}", i + 1, HOST_PID, op.thread + 1, us(op.start_ns, t0));
    if (begin(o, o->buf) != 0) return -1;
    snprintf(o->buf, sizeof o->buf,
             "{\"ph\":\"f\",\"bp\":\"e\",\"cat\":\"ac2g\",\"name\":\"ac2g\",\"id\":%" PRId64
             ",\"pid\":%d,\"tid\":0,\"ts\":%.3f}", i + 1, DEVICE_PID + e->device,
             us(e->start_ns, t0));
    return begin(o, o->buf);
  }
  snprintf(o->buf, sizeof o->buf,
           "{\"ph\":\"X\",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{",
           e->kind == EM_PROFILER_OP ? "cpu_op" : "user_annotation", HOST_PID, e->thread + 1,
           us(e->start_ns, t0), us(e->end_ns, e->start_ns));
  if (begin(o, o->buf) != 0) return -1;
  const char *sep = "";
  if (e->shapes) {
    if (put(o, "\"Input Dims\":\"") != 0 || put_escaped(o, e->shapes) != 0 || put(o, "\"") != 0)
      return -1;
    sep = ",";
  }
  if (e->site) {
    if (put(o, sep) != 0 || put(o, "\"Call site\":\"") != 0 || put_escaped(o, e->site) != 0 ||
        put(o, "\"") != 0)
      return -1;
    sep = ",";
  }
  if (e->device >= 0) {
    if (put(o, sep) != 0 || put(o, "\"Device\":\"") != 0 ||
        put_escaped(o, em_device_name(e->device)) != 0 || put(o, "\"") != 0)
      return -1;
    sep = ",";
  }
  if (e->alloc_bytes || e->free_bytes) {
    snprintf(o->buf, sizeof o->buf, "%s\"Bytes allocated\":%" PRId64 ",\"Bytes freed\":%" PRId64,
             sep, e->alloc_bytes, e->free_bytes);
    if (put(o, o->buf) != 0) return -1;
    sep = ",";
  }
  if (e->device_alloc_bytes || e->device_free_bytes) {
    snprintf(o->buf, sizeof o->buf,
             "%s\"Device bytes allocated\":%" PRId64 ",\"Device bytes freed\":%" PRId64, sep,
             e->device_alloc_bytes, e->device_free_bytes);
    if (put(o, o->buf) != 0) return -1;
    sep = ",";
  }
  if (e->gpu_ns) {
    snprintf(o->buf, sizeof o->buf, "%s\"Vulkan time us\":%.3f", sep, (double)e->gpu_ns / 1e3);
    if (put(o, o->buf) != 0) return -1;
  }
  return put(o, "},\"name\":\"") != 0 || put_escaped(o, e->name) != 0 || put(o, "\"}") != 0 ? -1 : 0;
}

/* The metadata: names of the host, its threads, and each device with its queue. */
static int write_names(out *o, int64_t n) {
  uint64_t threads = 0; /* threads 0..63 seen (later ones are named "thread N" by viewers) */
  uint32_t devices = 0;
  em_profiler_event e;
  for (int64_t i = 0; i < n; i++) {
    if (em_profiler_event_get(i, &e) != 0) return -1;
    if (e.kind == EM_PROFILER_KERNEL) {
      if (e.device >= 0 && e.device < 32) devices |= 1u << e.device;
    } else if (e.thread >= 0 && e.thread < 64) {
      threads |= (uint64_t)1 << e.thread;
    }
  }
  snprintf(o->buf, sizeof o->buf, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,"
           "\"args\":{\"name\":\"ember (host)\"}}", HOST_PID);
  if (begin(o, o->buf) != 0) return -1;
  snprintf(o->buf, sizeof o->buf, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,"
           "\"args\":{\"sort_index\":0}}", HOST_PID);
  if (begin(o, o->buf) != 0) return -1;
  for (int t = 0; t < 64; t++) {
    if (!(threads >> t & 1)) continue;
    snprintf(o->buf, sizeof o->buf, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,"
             "\"tid\":%d,\"args\":{\"name\":\"thread %d%s\"}}", HOST_PID, t + 1, t + 1,
             t == 0 ? " (first to record)" : "");
    if (begin(o, o->buf) != 0) return -1;
  }
  for (int d = 0; d < 32; d++) {
    if (!(devices >> d & 1)) continue;
    const char *name = em_device_name(d);
    snprintf(o->buf, sizeof o->buf, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,"
             "\"args\":{\"sort_index\":%d}}", DEVICE_PID + d, DEVICE_PID + d);
    if (begin(o, o->buf) != 0) return -1;
    snprintf(o->buf, sizeof o->buf, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,"
             "\"args\":{\"name\":\"", DEVICE_PID + d);
    if (begin(o, o->buf) != 0 || put_escaped(o, name) != 0 || put(o, "\"}}") != 0) return -1;
    snprintf(o->buf, sizeof o->buf, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,"
             "\"tid\":0,\"args\":{\"name\":\"", DEVICE_PID + d);
    if (begin(o, o->buf) != 0 || put_escaped(o, name) != 0 || put(o, " queue\"}}") != 0)
      return -1;
  }
  return 0;
}

int em_profiler_export_chrome_trace(const char *path) {
  const char *fn = "profiler_export_chrome_trace";
  if (path == NULL) return em_error("%s: expected a file path, got NULL", fn);
  int64_t n = em_profiler_event_count();
  if (n < 0) return -1;
  int64_t t0 = INT64_MAX;
  em_profiler_event e;
  for (int64_t i = 0; i < n; i++) {
    if (em_profiler_event_get(i, &e) != 0) return -1;
    if (e.start_ns < t0) t0 = e.start_ns;
  }
  out *o = calloc(1, sizeof *o);
  if (o == NULL) return em_error("%s: out of host memory", fn);
  o->first = 1;
  if (em_atomic_open(&o->file, fn, path) != 0) {
    free(o);
    return -1;
  }
  int rc = put(o, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
  for (int64_t i = 0; i < n && rc == 0; i++) {
    rc = em_profiler_event_get(i, &e);
    if (rc == 0) rc = write_event(o, &e, i, t0);
  }
  if (rc == 0) rc = write_names(o, n);
  if (rc == 0) rc = put(o, "\n]}\n");
  if (rc == 0) rc = em_atomic_commit(&o->file);
  else em_atomic_abort(&o->file);
  free(o);
  return rc;
}
