/*
 * fuzz_safetensors.c: libFuzzer target for the safetensors reader (runtime/src/io/safetensors.c),
 * which also reads Ember's own checkpoints (ember.save: safetensors whose __metadata__ holds the
 * non-tensor leaves and their types). Opens the input, then reads every tensor and every
 * metadata entry, as ember.load does.
 */
#include <string.h>

#include "fuzz_file.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  em_safetensors *f = em_safetensors_open(fuzz_file(data, size));
  if (f == NULL) return 0;
  for (int64_t i = 0; i < em_safetensors_count(f); i++) {
    const char *name = em_safetensors_name(f, i);
    if (name == NULL || em_safetensors_find(f, name) < 0) __builtin_trap();
    em_release(em_safetensors_tensor(f, i));
  }
  for (int64_t i = 0; i < em_safetensors_metadata_count(f); i++) {
    const char *k = em_safetensors_metadata_key(f, i);
    const char *v = em_safetensors_metadata_value(f, i);
    if (k == NULL || v == NULL) __builtin_trap();
    (void)strlen(k), (void)strlen(v);
  }
  em_safetensors_close(f);
  return 0;
}
