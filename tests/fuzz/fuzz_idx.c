/*
 * fuzz_idx.c: libFuzzer target for the IDX reader (runtime/src/io/idx.c); the input is the
 * file (plain or gzip data).
 */
#include "fuzz_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  em_release(em_read_idx(fuzz_file(data, size)));
  return 0;
}
