/*
 * fuzz_json.c: libFuzzer target for the JSON parser (runtime/src/io/json.c) that reads
 * safetensors headers. A parsed tree is walked whole, and a number's text is checked against
 * strtod's reading of it: the parser must agree with the C library on every number it accepts.
 */
#include <locale.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "io.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  return 0;
}

static int64_t walk(const em_json *v, int depth) {
  int64_t n = 1;
  for (int64_t i = 0; i < v->count; i++) {
    if (v->type == EM_JSON_OBJECT) {
      if (v->keys[i] == NULL) abort();
      if (em_json_get(v, v->keys[i]) == NULL && strlen(v->keys[i]) == v->key_lengths[i])
        abort(); /* a key without NULs must be found */
    }
    n += walk(&v->items[i], depth + 1);
  }
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  em_json *v = em_json_parse("fuzz", "input", (const char *)data, size);
  if (v != NULL) {
    walk(v, 0);
    /* A lone number must read as strtod reads the same text. */
    if (v->type == EM_JSON_NUMBER) {
      char *text = malloc(size + 1);
      memcpy(text, data, size);
      text[size] = '\0';
      double want = strtod(text, NULL);
      free(text);
      if (!(want == v->number || (want != want && v->number != v->number))) abort();
    }
  }
  em_json_free(v);
  return 0;
}
