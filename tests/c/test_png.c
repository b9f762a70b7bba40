/*
 * test_png.c: em_write_png from an embedder's side, and under AddressSanitizer.
 *
 * The file's structure is checked here byte by byte: the signature, IHDR's fields, every
 * chunk's CRC-32 (computed by a bitwise CRC independent of zlib's table), IDAT chunks of at
 * most 1 MiB that start a zlib stream, IEND last. The pixels themselves are decoded by
 * tests/lua/png_decode.py in image_spec.lua.
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static uint32_t crc32_bitwise(const unsigned char *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return c ^ 0xffffffffu;
}

static uint32_t be32(const unsigned char *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)len);
  *n = fread(b, 1, (size_t)len, f);
  fclose(f);
  return b;
}

/* Walks the chunks of the file at path; checks them and returns the number of IDAT chunks
 * (-1 when the structure is wrong). width/height/color type are checked against IHDR. */
static int check_file(const char *path, uint32_t w, uint32_t h, int color_type) {
  size_t n = 0;
  unsigned char *b = slurp(path, &n);
  static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
  int idat = 0, ok = b != NULL && n > 8 && memcmp(b, sig, 8) == 0, seen_end = 0;
  size_t pos = 8;
  for (int k = 0; ok && pos < n; k++) {
    if (pos + 12 > n) { ok = 0; break; }
    uint32_t len = be32(b + pos);
    if (pos + 12 + len > n) { ok = 0; break; }
    const unsigned char *type = b + pos + 4, *data = b + pos + 8;
    if (crc32_bitwise(type, 4 + (size_t)len) != be32(data + len)) ok = 0;
    if (k == 0) {
      ok = ok && memcmp(type, "IHDR", 4) == 0 && len == 13 && be32(data) == w &&
           be32(data + 4) == h && data[8] == 8 && data[9] == color_type && data[10] == 0 &&
           data[11] == 0 && data[12] == 0;
    } else if (memcmp(type, "IDAT", 4) == 0) {
      ok = ok && len <= (1u << 20) && (idat > 0 || (data[0] & 0x0f) == 8); /* deflate */
      idat++;
    } else if (memcmp(type, "IEND", 4) == 0) {
      ok = ok && len == 0 && pos + 12 == n;
      seen_end = 1;
    } else {
      ok = 0;
    }
    pos += 12 + len;
  }
  free(b);
  return ok && seen_end ? idat : -1;
}

int main(void) {
  char dir[] = "/tmp/ember_png_XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char path[64];
  snprintf(path, sizeof path, "%s/a.png", dir);

  /* RGB from a permuted [C, H, W] -> [H, W, C] view (not contiguous) */
  int64_t chw[3] = { 3, 2, 5 };
  em_tensor *t = em_empty(3, chw, EM_UINT8, 0);
  uint8_t *p = em_data_ptr(t);
  for (int i = 0; i < 30; i++) p[i] = (uint8_t)(i * 7);
  int perm[3] = { 1, 2, 0 };
  em_tensor *hwc = em_permute(t, 3, perm);
  CHECK(em_write_png(path, hwc) == 0);
  CHECK(check_file(path, 5, 2, 2) == 1);

  /* gray [H, W], gray+alpha and RGBA [H, W, C] */
  int64_t hw[2] = { 4, 3 };
  em_tensor *g = em_zeros(2, hw, EM_UINT8, 0);
  CHECK(em_write_png(path, g) == 0);
  CHECK(check_file(path, 3, 4, 0) == 1);
  int64_t ga[3] = { 4, 3, 2 }, rgba[3] = { 1, 1, 4 };
  em_tensor *t2 = em_zeros(3, ga, EM_UINT8, 0), *t4 = em_zeros(3, rgba, EM_UINT8, 0);
  CHECK(em_write_png(path, t2) == 0);
  CHECK(check_file(path, 3, 4, 4) == 1);
  CHECK(em_write_png(path, t4) == 0);
  CHECK(check_file(path, 1, 1, 6) == 1);

  /* incompressible data: several IDAT chunks */
  int64_t big[2] = { 1000, 1100 };
  em_tensor *r = em_empty(2, big, EM_UINT8, 0);
  uint8_t *q = em_data_ptr(r);
  uint32_t s = 12345;
  for (int64_t i = 0; i < 1000 * 1100; i++) {
    s = s * 1103515245u + 12345u;
    q[i] = (uint8_t)(s >> 24);
  }
  CHECK(em_write_png(path, r) == 0);
  CHECK(check_file(path, 1100, 1000, 0) >= 2);

  /* errors, and the file stays as it was */
  int64_t f2[2] = { 2, 2 }, five[3] = { 2, 2, 5 }, empty[2] = { 0, 3 };
  em_tensor *f = em_zeros(2, f2, EM_FLOAT32, 0);
  em_tensor *c5 = em_zeros(3, five, EM_UINT8, 0), *e = em_zeros(2, empty, EM_UINT8, 0);
  CHECK_ERROR(em_write_png(path, f), "write_png: expected a uint8 tensor, got float32");
  CHECK_ERROR(em_write_png(path, c5), "channels in the last dimension, got 5");
  CHECK_ERROR(em_write_png(path, e), "write_png: expected a non-empty image, got 0 x 3");
  CHECK_ERROR(em_write_png(path, t), "write_png: expected 1 (gray)"); /* [3, 2, 5]: 5 channels */
  CHECK_ERROR(em_write_png(path, NULL), "write_png: expected a tensor");
  CHECK_ERROR(em_write_png(dir, g), "is a directory");
  CHECK(check_file(path, 1100, 1000, 0) >= 2);

  em_release(f);
  em_release(c5);
  em_release(e);
  em_release(r);
  em_release(t2);
  em_release(t4);
  em_release(g);
  em_release(hwc);
  em_release(t);
  unlink(path);
  rmdir(dir);
  return check_report();
}
