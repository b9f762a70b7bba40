/*
 * idx.c: the IDX format of MNIST and its family (Fashion-MNIST, EMNIST, KMNIST, ...).
 *
 * A file is: two zero bytes, a type byte (0x08 ubyte, 0x09 byte, 0x0B short, 0x0C int,
 * 0x0D float, 0x0E double), a dimension count, one big-endian uint32 per dimension, then the
 * elements, big-endian, row-major. The files are usually distributed gzip-compressed; the
 * reader (reader.c) takes either.
 *
 * Every header field is checked before anything is allocated: the declared data must fit in
 * what the file can hold (for .gz, the deflate bound), so a corrupt header is a clear error,
 * never a huge allocation.
 */
#include "io.h"

static int idx_dtype(unsigned type, em_dtype *out) {
  switch (type) {
    case 0x08: *out = EM_UINT8; return 0;
    case 0x09: *out = EM_INT8; return 0;
    case 0x0B: *out = EM_INT16; return 0;
    case 0x0C: *out = EM_INT32; return 0;
    case 0x0D: *out = EM_FLOAT32; return 0;
    case 0x0E: *out = EM_FLOAT64; return 0;
    default: return -1;
  }
}

/* Reads and checks the 4-byte magic and the dimensions. */
static int read_header(em_reader *r, em_dtype *dtype, int *ndim, int64_t *sizes) {
  unsigned char magic[4];
  int64_t got = em_reader_read(r, magic, 4);
  if (got < 0) return -1;
  if (got < 4)
    return em_error("idx: file %s is too short (%lld bytes) for an IDX header", r->path,
                    (long long)got);
  if (magic[0] != 0 || magic[1] != 0 || idx_dtype(magic[2], dtype) != 0)
    return em_error("idx: file %s is not an IDX file: magic 0x%02x%02x%02x%02x (expected "
                    "0x000008nn to 0x00000Enn, e.g. 0x00000803 for ubyte images)", r->path,
                    magic[0], magic[1], magic[2], magic[3]);
  if (magic[3] < 1 || magic[3] > EM_MAX_DIMS)
    return em_error("idx: file %s declares %d dimensions; expected 1 to %d", r->path, magic[3],
                    EM_MAX_DIMS);
  *ndim = magic[3];
  unsigned char dims[4 * EM_MAX_DIMS];
  if (em_reader_read_exact(r, dims, 4 * *ndim) != 0) return -1;
  for (int i = 0; i < *ndim; i++) sizes[i] = em_load_be32(dims + 4 * i);
  return 0;
}

em_tensor *em_read_idx(const char *path) {
  em_reader r;
  if (em_reader_open(&r, "idx", path) != 0) return NULL;
  em_dtype dtype = EM_UINT8;
  int ndim = 0;
  int64_t sizes[EM_MAX_DIMS] = { 0 };
  em_tensor *t = NULL;
  if (read_header(&r, &dtype, &ndim, sizes) != 0) goto done;
  size_t esize = em_dtypes[dtype].size;
  int64_t header = 4 + 4 * (int64_t)ndim, numel;
  int64_t limit = em_reader_max_bytes(&r);
  char sb[EM_SHAPE_BUF];
  int absurd = em_checked_numel(ndim, sizes, INT64_MAX / 8 - header, &numel) != 0;
  if (!absurd && em_reader_check_need(&r, numel * (int64_t)esize) != 0) goto done;
  if (absurd || numel * (int64_t)esize > limit - header) {
    if (!absurd && !r.compressed)
      em_error("idx: file %s is truncated: expected %lld bytes of data, got %lld", path,
               (long long)(header + numel * (int64_t)esize), (long long)r.file_size);
    else
      em_error("idx: file %s declares dimensions %s of %s, more data than a file of %lld "
               "bytes can hold", path, em_shape_str(sb, sizeof sb, ndim, sizes),
               em_dtype_name(dtype), (long long)r.file_size);
    goto done;
  }
  /* a zero-size shape passes the byte count, but its strides may still overflow */
  if (em_check_file_shape("idx", path, ndim, sizes) != 0) goto done;
  t = em_empty(ndim, sizes, dtype, EM_CPU);
  if (t == NULL) goto done;
  void *data = em_data_ptr(t);
  if (em_reader_read_exact(&r, data, numel * (int64_t)esize) != 0) goto fail;
  int end = em_reader_at_end(&r);
  if (end < 0) goto fail;
  if (end == 0) {
    em_error("idx: file %s has more data than its dimensions %s declare (%lld bytes expected)",
             path, em_shape_str(sb, sizeof sb, ndim, sizes),
             (long long)(header + numel * (int64_t)esize));
    goto fail;
  }
  if (em_host_is_little_endian()) em_swap_bytes(data, numel, esize);
  goto done;
fail:
  em_release(t);
  t = NULL;
done:
  em_reader_close(&r);
  return t;
}
