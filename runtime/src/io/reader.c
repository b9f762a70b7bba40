/*
 * reader.c: reading plain or gzip-compressed files, with errors that say what went wrong.
 *
 * zlib's gzFile reads gzip data and passes other files through unchanged, so every reader
 * (IDX, NPY, CSV) accepts foo.gz as well as foo without looking at the name. Short reads become
 * "truncated" errors that give the byte counts, and a corrupt gzip stream is reported as such.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "io.h"

/* Deflate cannot compress better than about 1032:1; a .gz file of S bytes therefore holds at
 * most this many times S bytes (plus a small constant for tiny files). */
enum { DEFLATE_MAX_RATIO = 1032 };

/* The most bytes one gzip file may decompress to (em_set_gzip_limit). The deflate bound alone
 * lets a 10 MB file expand to 10 GB; a data file that large is rare enough to ask for. */
static int64_t gzip_limit = (int64_t)4 << 30;

int em_set_gzip_limit(int64_t max_bytes) {
  if (max_bytes < 1)
    return em_error("set_gzip_limit: expected a limit of at least 1 byte, got %lld",
                    (long long)max_bytes);
  __atomic_store_n(&gzip_limit, max_bytes, __ATOMIC_RELAXED);
  return 0;
}

int64_t em_gzip_limit(void) { return __atomic_load_n(&gzip_limit, __ATOMIC_RELAXED); }

int em_reader_open(em_reader *r, const char *fn, const char *path) {
  memset(r, 0, sizeof *r);
  r->fn = fn;
  r->path = path;
  if (path == NULL) return em_error("%s: expected a file path, got NULL", fn);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return em_error("%s: cannot open %s: %s", fn, path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return em_error("%s: cannot open %s: %s", fn, path, strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    return em_error("%s: cannot open %s: it is a directory", fn, path);
  }
  /* Sizes are checked against the file's size, which only regular files have (a device such as
   * /dev/zero would otherwise be read forever). */
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return em_error("%s: cannot open %s: it is not a regular file", fn, path);
  }
  r->file_size = (int64_t)st.st_size;
  gzFile gz = gzdopen(fd, "rb");
  if (gz == NULL) {
    close(fd);
    return em_error_kind_set(EM_ERR_OOM, "%s: cannot open %s: out of memory", fn, path);
  }
  gzbuffer(gz, 1 << 17);
  r->gz = gz;
  r->compressed = gzdirect(gz) == 0;
  r->limit = r->compressed ? em_gzip_limit() : INT64_MAX;
  return 0;
}

int em_reader_limit_error(const em_reader *r) {
  return em_error("%s: file %s decompresses to more than the gzip limit of %lld bytes; raise "
                  "it with em_set_gzip_limit (Lua: the gzip_limit option or "
                  "ember.data.set_gzip_limit)", r->fn, r->path, (long long)r->limit);
}

int em_reader_check_need(const em_reader *r, int64_t need) {
  if (r->compressed && need > r->limit - r->consumed) return em_reader_limit_error(r);
  return 0;
}

void em_reader_close(em_reader *r) {
  if (r->gz) gzclose_r((gzFile)r->gz);
  r->gz = NULL;
}

int64_t em_reader_max_bytes(const em_reader *r) {
  if (!r->compressed) return r->file_size;
  int64_t bound = r->file_size > INT64_MAX / DEFLATE_MAX_RATIO - 1024
                      ? INT64_MAX : r->file_size * DEFLATE_MAX_RATIO + 1024;
  return bound < r->limit ? bound : r->limit;
}

int64_t em_reader_read(em_reader *r, void *dst, int64_t n) {
  gzFile gz = (gzFile)r->gz;
  int64_t got = 0;
  /* Past the gzip limit by even one byte is an error; reading one byte more than the limit
   * allows is how that is seen, and all that is ever read beyond it. */
  int64_t allowed = r->limit - r->consumed;
  if (allowed < INT64_MAX && n > allowed + 1) n = allowed + 1;
  while (got < n) {
    int64_t want = n - got;
    if (want > (1 << 30)) want = 1 << 30;
    int k = gzread(gz, (char *)dst + got, (unsigned)want);
    if (k < 0) {
      int errnum = 0;
      const char *msg = gzerror(gz, &errnum);
      if (errnum == Z_ERRNO)
        return em_error("%s: cannot read %s: %s", r->fn, r->path, strerror(errno));
      if (errnum == Z_MEM_ERROR)
        return em_error_kind_set(EM_ERR_OOM, "%s: cannot read %s: out of memory", r->fn,
                                 r->path);
      return em_error("%s: file %s is not valid gzip data: %s", r->fn, r->path, msg);
    }
    if (k == 0) break;
    got += k;
  }
  /* A gzip stream cut short ends with Z_BUF_ERROR ("unexpected end of file"): that is a short
   * read, reported by the caller as truncation with the counts. */
  if (got > allowed) return em_reader_limit_error(r);
  r->consumed += got;
  return got;
}

int em_reader_read_exact(em_reader *r, void *dst, int64_t n) {
  int64_t before = r->consumed;
  int64_t got = em_reader_read(r, dst, n);
  if (got < 0) return -1;
  if (got < n)
    return em_error("%s: file %s is truncated: expected %lld bytes of data, got %lld", r->fn,
                    r->path, (long long)(before + n), (long long)(before + got));
  return 0;
}

int em_reader_at_end(em_reader *r) {
  char c;
  int64_t got = em_reader_read(r, &c, 1);
  if (got < 0) return -1;
  if (got == 1) r->consumed--; /* peeked, not consumed: callers report counts without it */
  return got == 0;
}

char *em_reader_slurp(em_reader *r, int64_t *len) {
  int64_t limit = em_reader_max_bytes(r);
  size_t cap = r->compressed ? (size_t)r->file_size * 4 + 4096 : (size_t)r->file_size + 1;
  if (cap > (size_t)limit + 1) cap = (size_t)limit + 1;
  size_t used = 0;
  char *buf = malloc(cap);
  if (buf == NULL)
    return em_error_kind_set(EM_ERR_OOM, "%s: out of memory reading %s (%zu bytes)", r->fn,
                             r->path, cap), NULL;
  for (;;) {
    if (used + 1 >= cap) {
      size_t bigger = cap * 2;
      char *nb = realloc(buf, bigger);
      if (nb == NULL) {
        free(buf);
        em_error_kind_set(EM_ERR_OOM, "%s: out of memory reading %s (%zu bytes)", r->fn,
                          r->path, bigger);
        return NULL;
      }
      buf = nb;
      cap = bigger;
    }
    int64_t got = em_reader_read(r, buf + used, (int64_t)(cap - used - 1));
    if (got < 0) {
      free(buf);
      return NULL;
    }
    used += (size_t)got;
    if (got == 0) break;
  }
  buf[used] = '\0';
  *len = (int64_t)used;
  return buf;
}

/* ---- byte order and sizes ------------------------------------------------------------------ */

static void swap_range(unsigned char *p, int64_t lo, int64_t hi, size_t size) {
  for (int64_t i = lo; i < hi; i++) {
    unsigned char *e = p + i * (int64_t)size;
    for (size_t a = 0, b = size - 1; a < b; a++, b--) {
      unsigned char t = e[a];
      e[a] = e[b];
      e[b] = t;
    }
  }
}

void em_swap_bytes(void *p, int64_t n, size_t size) {
  if (size < 2 || n <= 0) return;
  int nt = em_threads_for(n);
  if (nt <= 1) {
    swap_range(p, 0, n, size);
    return;
  }
#pragma omp parallel for num_threads(nt)
  for (int t = 0; t < nt; t++) swap_range(p, n * t / nt, n * (t + 1) / nt, size);
}

int em_checked_numel(int ndim, const int64_t *sizes, int64_t limit, int64_t *out) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) {
    if (sizes[i] < 0) return -1;
    if (sizes[i] == 0) {
      n = 0;
      continue;
    }
    if (n != 0 && sizes[i] > limit / n) {
      /* The product passes the limit unless a later size is 0. */
      for (int j = i + 1; j < ndim; j++)
        if (sizes[j] == 0) {
          *out = 0;
          return 0;
        }
      return -1;
    }
    if (n != 0) n *= sizes[i];
  }
  *out = n;
  return 0;
}
