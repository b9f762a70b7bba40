/*
 * png.c: writing 8-bit PNG images (em_write_png), for ember.image and ember.plot.
 *
 * A PNG file is an 8-byte signature, then chunks: a 4-byte big-endian length, a 4-byte type,
 * the data, and a CRC-32 of type and data. Ember writes three kinds:
 *   IHDR  width, height, bit depth 8, color type (0 gray, 4 gray+alpha, 2 RGB, 6 RGBA),
 *         compression 0, filter method 0, no interlacing;
 *   IDAT  the zlib stream (deflate, via the zlib the library links for .gz readers) of the
 *         filtered scanlines, split into chunks of at most IDAT_CHUNK bytes;
 *   IEND  empty.
 * Every scanline is preceded by its filter byte. Each row gets the filter (None, Sub, Up,
 * Average, Paeth) whose output has the smallest sum of absolute values, the heuristic libpng
 * and the PNG specification recommend: it costs five passes over a row and makes plots and
 * photos markedly smaller than no filtering.
 *
 * The input is a uint8 tensor [H, W] or [H, W, C] with C = 1..4, of any layout and device
 * (it is made contiguous on the CPU first). The file is written atomically, like every writer
 * in runtime/src/io. There is no reader: Ember writes pictures, it does not load them.
 */
#include <stdlib.h>
#include <zlib.h>

#include "io.h"

/* Zlib output is cut into IDAT chunks of this size; decoders join them back. */
enum { IDAT_CHUNK = 1 << 20 };
/* The specification's limit on width and height. */
#define PNG_MAX_SIDE 2147483647LL

static void store_be32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

/* One chunk: length, type, data, CRC-32 over type and data. */
static int write_chunk(em_atomic_file *a, const char *type, const unsigned char *data,
                       size_t n) {
  unsigned char head[8], tail[4];
  store_be32(head, (uint32_t)n);
  memcpy(head + 4, type, 4);
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, (const Bytef *)type, 4);
  /* crc32 takes uInt lengths; IDAT chunks are far below that */
  if (n > 0) crc = crc32(crc, data, (uInt)n);
  store_be32(tail, (uint32_t)crc);
  if (em_atomic_write(a, head, 8) != 0) return -1;
  if (n > 0 && em_atomic_write(a, data, n) != 0) return -1;
  return em_atomic_write(a, tail, 4);
}

static int paeth(int a, int b, int c) {
  int p = a + b - c;
  int pa = abs(p - a), pb = abs(p - b), pc = abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

/* Filters row (stride bytes, bpp bytes per pixel; prev is the row above, or NULL for the
 * first) with filter type f into out. Bytes left of the row and the row above the first count
 * as zero, as the specification says. */
static void filter_row(int f, const unsigned char *row, const unsigned char *prev, size_t stride,
                       size_t bpp, unsigned char *out) {
  for (size_t i = 0; i < stride; i++) {
    int x = row[i];
    int a = i >= bpp ? row[i - bpp] : 0;
    int b = prev ? prev[i] : 0;
    int c = prev && i >= bpp ? prev[i - bpp] : 0;
    int pred = 0;
    switch (f) {
    case 1: pred = a; break;
    case 2: pred = b; break;
    case 3: pred = (a + b) / 2; break;
    case 4: pred = paeth(a, b, c); break;
    default: break;
    }
    out[i] = (unsigned char)(x - pred);
  }
}

/* The raw image data: for each row, a filter byte and the filtered row (chosen per row). */
static void filter_image(const unsigned char *pixels, int64_t h, size_t stride, size_t bpp,
                         unsigned char *raw, unsigned char *scratch) {
  for (int64_t y = 0; y < h; y++) {
    const unsigned char *row = pixels + (size_t)y * stride;
    const unsigned char *prev = y > 0 ? row - stride : NULL;
    unsigned char *dst = raw + (size_t)y * (stride + 1);
    uint64_t best_cost = UINT64_MAX;
    for (int f = 0; f < 5; f++) {
      filter_row(f, row, prev, stride, bpp, scratch);
      uint64_t cost = 0; /* bytes read as signed: small residuals in both directions are cheap */
      for (size_t i = 0; i < stride; i++) cost += (uint64_t)abs((int)(signed char)scratch[i]);
      if (cost < best_cost) {
        best_cost = cost;
        dst[0] = (unsigned char)f;
        memcpy(dst + 1, scratch, stride);
      }
    }
  }
}

/* Checks t's shape and type; gives height, width and channels. */
static int png_shape(const em_tensor *t, int64_t *h, int64_t *w, int *channels) {
  if (t->dtype_id != EM_UINT8)
    return em_error("write_png: expected a uint8 tensor, got %s",
                    em_dtype_name((em_dtype)t->dtype_id));
  if (t->ndim != 2 && t->ndim != 3)
    return em_error("write_png: expected a tensor of 2 dimensions [H, W] or 3 [H, W, C], "
                    "got %d dimensions", t->ndim);
  *h = t->sizes[0];
  *w = t->sizes[1];
  if (t->ndim == 3 && (t->sizes[2] < 1 || t->sizes[2] > 4))
    return em_error("write_png: expected 1 (gray), 2 (gray and alpha), 3 (RGB) or 4 (RGBA) "
                    "channels in the last dimension, got %lld", (long long)t->sizes[2]);
  *channels = t->ndim == 3 ? (int)t->sizes[2] : 1;
  if (*h < 1 || *w < 1)
    return em_error("write_png: expected a non-empty image, got %lld x %lld pixels",
                    (long long)*h, (long long)*w);
  if (*h > PNG_MAX_SIDE || *w > PNG_MAX_SIDE)
    return em_error("write_png: PNG images are at most %lld pixels on a side, got %lld x %lld",
                    PNG_MAX_SIDE, (long long)*h, (long long)*w);
  return 0;
}

/* Deflates the filtered rows into a new buffer; *out_len gets its size. */
static unsigned char *compress_image(const unsigned char *raw, size_t raw_len, size_t *out_len) {
  z_stream z;
  memset(&z, 0, sizeof z);
  if (deflateInit(&z, 6) != Z_OK) return NULL;
  uLong bound = deflateBound(&z, (uLong)raw_len);
  unsigned char *out = malloc(bound);
  if (out == NULL) {
    deflateEnd(&z);
    return NULL;
  }
  /* deflate takes uInt counts: feed and drain in pieces that fit */
  const size_t piece = (size_t)1 << 30;
  size_t in_left = raw_len;
  z.next_in = (Bytef *)raw;
  z.next_out = out;
  size_t out_left = bound;
  int rc = Z_OK;
  while (rc == Z_OK) {
    if (z.avail_in == 0 && in_left > 0) {
      z.avail_in = (uInt)(in_left < piece ? in_left : piece);
      in_left -= z.avail_in;
    }
    if (z.avail_out == 0) {
      z.avail_out = (uInt)(out_left < piece ? out_left : piece);
      out_left -= z.avail_out;
    }
    rc = deflate(&z, in_left == 0 ? Z_FINISH : Z_NO_FLUSH);
  }
  *out_len = (size_t)z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) {
    free(out);
    return NULL;
  }
  return out;
}

static int write_file(const char *path, int64_t h, int64_t w, int channels,
                      const unsigned char *zdata, size_t zlen) {
  static const unsigned char signature[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
  static const unsigned char color_type[5] = { 0, 0, 4, 2, 6 }; /* by channel count */
  unsigned char ihdr[13];
  store_be32(ihdr, (uint32_t)w);
  store_be32(ihdr + 4, (uint32_t)h);
  ihdr[8] = 8;
  ihdr[9] = color_type[channels];
  ihdr[10] = ihdr[11] = ihdr[12] = 0;
  em_atomic_file a;
  if (em_atomic_open(&a, "write_png", path) != 0) return -1;
  int rc = em_atomic_write(&a, signature, sizeof signature);
  if (rc == 0) rc = write_chunk(&a, "IHDR", ihdr, sizeof ihdr);
  for (size_t off = 0; rc == 0 && off < zlen; off += IDAT_CHUNK) {
    size_t n = zlen - off < IDAT_CHUNK ? zlen - off : IDAT_CHUNK;
    rc = write_chunk(&a, "IDAT", zdata + off, n);
  }
  if (rc == 0) rc = write_chunk(&a, "IEND", NULL, 0);
  if (rc == 0) return em_atomic_commit(&a);
  em_atomic_abort(&a);
  return -1;
}

int em_write_png(const char *path, const em_tensor *t) {
  if (t == NULL) return em_error("write_png: expected a tensor, got NULL");
  int64_t h = 0, w = 0;
  int channels = 1;
  if (png_shape(t, &h, &w, &channels) != 0) return -1;
  size_t stride = (size_t)w * (size_t)channels;
  if ((uint64_t)h * (stride + 1) > (uint64_t)SIZE_MAX / 2)
    return em_error("write_png: an image of %lld x %lld pixels is too large", (long long)h,
                    (long long)w);
  em_tensor *c = t->device_id == EM_CPU ? em_contiguous(t) : em_to_device(t, EM_CPU);
  if (c == NULL) {
    em_error_prefix("write_png");
    return -1;
  }
  size_t raw_len = (size_t)h * (stride + 1);
  unsigned char *raw = malloc(raw_len);
  unsigned char *scratch = malloc(stride);
  unsigned char *zdata = NULL;
  size_t zlen = 0;
  int rc = -1;
  if (raw == NULL || scratch == NULL) {
    em_error_kind_set(EM_ERR_OOM, "write_png: out of memory");
  } else {
    filter_image(em_data_ptr(c), h, stride, (size_t)channels, raw, scratch);
    zdata = compress_image(raw, raw_len, &zlen);
    if (zdata == NULL) em_error_kind_set(EM_ERR_OOM, "write_png: out of memory (compressing)");
    else rc = write_file(path, h, w, channels, zdata, zlen);
  }
  free(zdata);
  free(scratch);
  free(raw);
  em_release(c);
  return rc;
}
