/*
 * fuzz_npy.c: libFuzzer target for the NPY reader (runtime/src/io/npy.c); the input is the
 * file (plain or gzip data).
 */
#include "fuzz_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  em_release(em_read_npy(fuzz_file(data, size)));
  return 0;
}
