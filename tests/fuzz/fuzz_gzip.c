/*
 * fuzz_gzip.c: libFuzzer target for the plain-or-gzip reader every data reader stands on
 * (runtime/src/io/reader.c). The first input byte picks how the rest is read: slurped whole
 * (as CSV does), or in exact-size pieces followed by the end check (as IDX and NPY do); the
 * second byte sets a small gzip limit, so that the limit's edges are exercised.
 */
#include <stdlib.h>

#include "fuzz_file.h"
#include "io.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  int mode = data[0] & 1, piece = 1 + (data[0] >> 1);
  em_set_gzip_limit(data[1] == 0 ? (1 << 20) : 16 * (int64_t)data[1]);
  em_reader r;
  if (em_reader_open(&r, "fuzz", fuzz_file(data + 2, size - 2)) == 0) {
    if (mode == 0) {
      int64_t len;
      char *text = em_reader_slurp(&r, &len);
      if (text != NULL && (len > em_reader_max_bytes(&r) || text[len] != '\0')) abort();
      free(text);
    } else {
      char buf[128];
      while (em_reader_read_exact(&r, buf, piece) == 0)
        if (r.consumed > em_reader_max_bytes(&r)) abort();
      (void)em_reader_at_end(&r);
    }
    em_reader_close(&r);
  }
  fuzz_setup();
  return 0;
}
