/*
 * fuzz_gguf.c: libFuzzer target for the GGUF reader (runtime/src/io/gguf.c); the input is the
 * file. Every metadata value and tensor record the reader accepted is read back, so a record
 * pointing outside the map shows up under ASan.
 */
#include "fuzz_file.h"

#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  em_gguf *g = em_gguf_open(fuzz_file(data, size));
  if (!g) return 0;
  volatile uint8_t sink = 0;
  for (int64_t i = 0; i < em_gguf_kv_count(g); i++) {
    int64_t klen, len, vlen;
    int et;
    const char *key = em_gguf_kv_key(g, i, &klen);
    for (int64_t k = 0; k < klen; k++) sink ^= (uint8_t)key[k];
    em_gguf_kv_type(g, i, &et, &len);
    for (int64_t j = 0; j < len; j++) {
      const uint8_t *v = em_gguf_kv_value(g, i, j, &vlen);
      for (int64_t k = 0; k < vlen; k++) sink ^= v[k];
    }
  }
  const uint8_t *base = em_gguf_data(g);
  for (int64_t i = 0; i < em_gguf_tensor_count(g); i++) {
    int type, ndim;
    int64_t dims[4], off, nbytes;
    const char *name = em_gguf_tensor_info(g, i, &type, &ndim, dims, &off, &nbytes);
    sink ^= (uint8_t)strlen(name);
    if (nbytes > 0) sink ^= base[off] ^ base[off + nbytes - 1];
  }
  (void)sink;
  em_gguf_close(g);
  return 0;
}
