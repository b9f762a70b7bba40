/*
 * fuzz_csv.c: libFuzzer target for the CSV reader (runtime/src/io/csv.c).
 *
 * The first input byte picks the delimiter and whether a header line is skipped, the second
 * the dtype; the rest is the file (plain text or gzip data).
 */
#include "fuzz_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char delims[] = { ',', ';', '\t', ' ', '|', ':', 'x', '"' };
  static const em_dtype dtypes[] = { EM_FLOAT32, EM_FLOAT64, EM_FLOAT16, EM_BFLOAT16,
                                     EM_INT64,   EM_INT32,   EM_INT16,   EM_INT8,
                                     EM_UINT8,   EM_BOOL };
  if (size < 2) return 0;
  char delim = delims[data[0] & 7];
  int header = (data[0] >> 3) & 1;
  em_dtype dtype = dtypes[data[1] % (sizeof dtypes / sizeof *dtypes)];
  em_tensor *t = em_read_csv(fuzz_file(data + 2, size - 2), delim, header, dtype);
  em_release(t);
  return 0;
}
