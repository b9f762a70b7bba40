/*
 * io.h: what the file readers and writers (runtime/src/io) share.
 *
 * - a reader over plain or gzip-compressed files (zlib's gzFile reads both, so every reader
 *   takes .gz transparently), which turns short reads into "truncated" errors;
 * - an atomic writer: a temporary file in the target's directory, fsync, rename, so that a
 *   crash or a failure mid-write never destroys the file that was there;
 * - byte order helpers (IDX is big-endian, NPY may be either, safetensors is little-endian);
 * - a small JSON parser and string escaper, enough for safetensors headers.
 *
 * Every function names the public function it works for (`fn`) in its error messages.
 */
#ifndef EMBER_IO_H
#define EMBER_IO_H

#include <stdio.h>

#include "../internal.h"

/* ---- reading (reader.c) -------------------------------------------------------------------- */
typedef struct em_reader {
  const char *fn;      /* "idx", "npy", ...: the prefix of every message */
  const char *path;
  void *gz;            /* gzFile */
  int64_t file_size;   /* bytes on disk (compressed size for .gz) */
  int compressed;      /* 1 when the file is gzip data */
  int64_t consumed;    /* decompressed bytes read so far */
  int64_t limit;       /* the gzip limit for compressed files (em_set_gzip_limit), else max */
} em_reader;

/* Opens path for reading; -1 with "fn: cannot open <path>: <reason>". */
int em_reader_open(em_reader *r, const char *fn, const char *path);
void em_reader_close(em_reader *r);
/* Reads up to n bytes; returns the count (short only at the end), or -1 with an error for a
 * corrupt gzip stream or an I/O error. */
int64_t em_reader_read(em_reader *r, void *dst, int64_t n);
/* Reads exactly n bytes, or fails with "fn: file <path> is truncated: expected <total> bytes,
 * got <got>" where total = consumed + n. `what` names the part being read in other errors. */
int em_reader_read_exact(em_reader *r, void *dst, int64_t n);
/* The most decompressed bytes the file can hold: its size, or its size times deflate's largest
 * ratio for gzip. Readers check header-declared sizes against it before allocating, so that an
 * absurd header never allocates gigabytes. */
int64_t em_reader_max_bytes(const em_reader *r);
/* -1 with "fn: file <path> decompresses to more than the gzip limit ..." when `need` more bytes
 * would pass the gzip limit (compressed files only), else 0. Readers call it on a size their
 * header declares, so that the message names the limit rather than the file's capacity. */
int em_reader_check_need(const em_reader *r, int64_t need);
int em_reader_limit_error(const em_reader *r);
/* 1 when nothing is left to read, 0 when more data follows, -1 on a read error. It takes a
 * byte from the stream when more follows: only for a final check for trailing data. */
int em_reader_at_end(em_reader *r);
/* Reads the whole remaining file into a malloc'd buffer (NUL-terminated); *len gets its size. */
char *em_reader_slurp(em_reader *r, int64_t *len);

/* ---- atomic writes (atomic.c) -------------------------------------------------------------- */
typedef struct em_atomic_file {
  const char *fn;
  const char *path;
  char *target;        /* the file replaced: path, or where its symbolic links lead */
  char *tmp_path;
  FILE *f;
  int failed;          /* a write failed: commit refuses */
} em_atomic_file;

/* Creates a temporary file next to path's target (path, or the file its symbolic links lead
 * to), with the target's mode when it exists, after removing temporaries of dead writers. */
int em_atomic_open(em_atomic_file *a, const char *fn, const char *path);
/* Appends n bytes; -1 with "fn: cannot write <path>: <reason>". */
int em_atomic_write(em_atomic_file *a, const void *data, size_t n);
/* Flushes, fsyncs, renames over path and fsyncs the directory. Always releases `a`. */
int em_atomic_commit(em_atomic_file *a);
/* Drops the temporary file; the previous file at path is untouched. Keeps the current error. */
void em_atomic_abort(em_atomic_file *a);

/* ---- byte order ---------------------------------------------------------------------------- */
static inline int em_host_is_little_endian(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}
/* Reverses the bytes of each of the n elements of `size` bytes at p (threads for large n). */
void em_swap_bytes(void *p, int64_t n, size_t size);
static inline uint32_t em_load_be32(const unsigned char *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t em_load_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
static inline void em_store_le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
/* Multiplies sizes into *out; -1 (no message) when the product passes `limit`. */
int em_checked_numel(int ndim, const int64_t *sizes, int64_t limit, int64_t *out);

/* ---- JSON (json.c) ------------------------------------------------------------------------- */
typedef enum em_json_type {
  EM_JSON_NULL, EM_JSON_BOOL, EM_JSON_NUMBER, EM_JSON_STRING, EM_JSON_ARRAY, EM_JSON_OBJECT
} em_json_type;

typedef struct em_json em_json;
struct em_json {
  em_json_type type;
  int is_integer;        /* a number written without fraction or exponent that fits int64 */
  int64_t integer;
  double number;
  char *string;          /* strings, NUL-terminated UTF-8 (may hold NULs: see length) */
  size_t length;
  int64_t count;         /* array elements / object members */
  em_json *items;        /* array elements or object values */
  char **keys;           /* object keys */
  size_t *key_lengths;
};

/* Parses text[0..len) as one JSON value. On failure returns NULL with
 * "fn: <what> is not valid JSON: <reason> at byte <offset>". The result is freed with
 * em_json_free. Nesting is limited (64 levels) so hostile input cannot exhaust the stack. */
em_json *em_json_parse(const char *fn, const char *what, const char *text, size_t len);
void em_json_free(em_json *v);
/* The value of key in an object, or NULL. */
const em_json *em_json_get(const em_json *obj, const char *key);

/* A growable byte buffer, for writing JSON. */
typedef struct em_buf {
  char *data;
  size_t len, cap;
  int failed;            /* an allocation failed: every later append is dropped */
} em_buf;
void em_buf_append(em_buf *b, const void *data, size_t n);
void em_buf_puts(em_buf *b, const char *s);
void em_buf_printf(em_buf *b, const char *fmt, ...) EM_PRINTF(2, 3);
/* Appends s as a quoted JSON string with escapes. */
void em_buf_json_string(em_buf *b, const char *s);
void em_buf_free(em_buf *b);

#endif
