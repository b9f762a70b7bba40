/*
 * spirv_bf16.c: a build-time tool that turns a float16 SPIR-V module into a bfloat16 one.
 *
 *   spirv_bf16 in.spv out.spv
 *
 * glslang before 15.3 has no GL_EXT_bfloat16, but SPV_KHR_bfloat16 only adds an encoding
 * operand to OpTypeFloat: `OpTypeFloat 16` is IEEE half, `OpTypeFloat 16 BFloat16KHR` (FP
 * Encoding 0) is bfloat16. A kernel whose 16-bit floats are only ever moved (buffers, loads and
 * stores of cooperative matrices), fed to a cooperative-matrix product with a float32
 * accumulator, or converted to and from float32, means the same thing in either encoding. This
 * tool checks that a module is such a kernel and rewrites it:
 *  - the 16-bit OpTypeFloat gets the BFloat16KHR encoding operand;
 *  - OpCapability BFloat16TypeKHR (5116) and BFloat16CooperativeMatrixKHR (5118) are added
 *    and Float16 (9) is dropped (no IEEE half type is left);
 *  - OpExtension "SPV_KHR_bfloat16" is added.
 * No id is created, so the header's bound stays; instructions are re-emitted with their counts.
 *
 * It refuses (exit 1, naming the instruction) a module where anything else touches a 16-bit
 * float type or value: arithmetic, constants, scalar loads, composites, bitcasts, function
 * parameters, NV cooperative matrices, a 16-bit accumulator. Reinterpreting such code as
 * bfloat16 would silently change its meaning, so a kernel change that introduces one must fail
 * the build rather than produce a wrong or invalid module. The check is deliberately
 * conservative: an instruction outside the list below is refused when any of its words equals
 * a tainted id (a literal that happens to collide is refused too, never let through).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
  OP_NOP = 0, OP_UNDEF = 1, OP_SOURCE_CONTINUED = 2, OP_SOURCE = 3, OP_SOURCE_EXTENSION = 4,
  OP_NAME = 5, OP_MEMBER_NAME = 6, OP_STRING = 7, OP_LINE = 8, OP_EXTENSION = 10,
  OP_TYPE_FLOAT = 22, OP_TYPE_ARRAY = 28, OP_TYPE_RUNTIME_ARRAY = 29, OP_TYPE_STRUCT = 30,
  OP_TYPE_POINTER = 32, OP_VARIABLE = 59, OP_LOAD = 61, OP_STORE = 62, OP_ACCESS_CHAIN = 65,
  OP_IN_BOUNDS_ACCESS_CHAIN = 66, OP_DECORATE = 71, OP_MEMBER_DECORATE = 72,
  OP_COPY_OBJECT = 83, OP_FCONVERT = 115, OP_PHI = 245, OP_NO_LINE = 317,
  OP_MODULE_PROCESSED = 330, OP_DECORATE_ID = 332, OP_DECORATE_STRING = 5632,
  OP_MEMBER_DECORATE_STRING = 5633, OP_CAPABILITY = 17, OP_EXT_INST_IMPORT = 11,
  OP_MEMORY_MODEL = 14, OP_ENTRY_POINT = 15, OP_EXECUTION_MODE = 16, OP_TYPE_INT = 21,
  OP_TYPE_VECTOR = 23, OP_CONSTANT = 43, OP_SPEC_CONSTANT = 50,
  OP_TYPE_COOP_KHR = 4456, OP_COOP_LOAD_KHR = 4457, OP_COOP_STORE_KHR = 4458,
  OP_COOP_MULADD_KHR = 4459, OP_COOP_LOAD_TENSOR_NV = 5367, OP_COOP_STORE_TENSOR_NV = 5368,
};
enum { CAP_FLOAT16 = 9, CAP_BFLOAT16_TYPE = 5116, CAP_BFLOAT16_COOPMAT = 5118 };
enum { FP_ENCODING_BFLOAT16 = 0 };
enum { T_NONE = 0, T_SCALAR = 1, T_TYPE = 2, T_VALUE = 3 }; /* what an id is, when tainted */

static const char *prog = "spirv_bf16";
static const char *in_path = "";

static int fail(size_t at, uint32_t op, const char *why) {
  fprintf(stderr, "%s: %s: cannot be read as bfloat16: instruction at word %zu (opcode %u) %s\n",
          prog, in_path, at, op, why);
  return 1;
}

/* The whole file as words (little-endian SPIR-V on a little-endian host, checked by magic). */
static uint32_t *read_words(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 1 << 16, len = 0;
  uint32_t *w = malloc(cap * 4);
  size_t got;
  while (w != NULL && (got = fread(w + len, 4, cap - len, f)) > 0) {
    len += got;
    if (len == cap) {
      uint32_t *g = realloc(w, (cap *= 2) * 4);
      if (g == NULL) free(w);
      w = g;
    }
  }
  fclose(f);
  /* zeros past the end: an instruction whose word count is too short for its operands then
   * reads zeros, not past the buffer */
  uint32_t *g = w ? realloc(w, (len + 8) * 4) : NULL;
  if (g == NULL) {
    free(w);
    return NULL;
  }
  memset(g + len, 0, 8 * 4);
  *n = len;
  return g;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s in.spv out.spv\n", prog);
    return 2;
  }
  in_path = argv[1];
  size_t n = 0;
  uint32_t *w = read_words(argv[1], &n);
  if (w == NULL || n < 5 || w[0] != 0x07230203u) {
    fprintf(stderr, "%s: %s: expected a SPIR-V module (little-endian, magic 0x07230203)\n", prog,
            argv[1]);
    return 1;
  }
  uint32_t bound = w[3];
  uint8_t *t = calloc(bound ? bound : 1, 1); /* T_* per id */
  if (t == NULL) return 1;

  /* Pass 1: find the half type and everything built from it, and check every use. */
  size_t half_at = 0, last_cap = 0, last_ext = 0;
  for (size_t i = 5; i < n;) {
    uint32_t wc = w[i] >> 16, op = w[i] & 0xffffu;
    if (wc == 0 || i + wc > n) return fail(i, op, "has a bad word count");
    const uint32_t *o = w + i + 1; /* operands */
    size_t no = wc - 1;
#define ID_OK(x) ((x) < bound)
#define TAINTED(x) (ID_OK(x) && t[(x)] != T_NONE)
    bool any = false;
    for (size_t k = 0; k < no; k++) any = any || TAINTED(o[k]);
    switch (op) {
    case OP_CAPABILITY: last_cap = i; break;
    case OP_EXTENSION: last_ext = i; break;
    case OP_TYPE_FLOAT:
      if (o[1] == 16) {
        if (no != 2) return fail(i, op, "is a 16-bit float that already has an encoding");
        if (half_at) return fail(i, op, "declares a second 16-bit float type");
        half_at = i;
        t[o[0]] = T_SCALAR;
      }
      break;
    /* debug info, decorations and the entry point say nothing about values (and hold literals
     * and strings, which could equal a tainted id) */
    case OP_EXT_INST_IMPORT: case OP_MEMORY_MODEL: case OP_ENTRY_POINT: case OP_EXECUTION_MODE:
    case OP_TYPE_INT: case OP_NOP: case OP_SOURCE_CONTINUED: case OP_SOURCE:
    case OP_SOURCE_EXTENSION:
    case OP_NAME: case OP_MEMBER_NAME: case OP_STRING: case OP_LINE: case OP_NO_LINE:
    case OP_MODULE_PROCESSED: case OP_DECORATE: case OP_MEMBER_DECORATE: case OP_DECORATE_ID:
    case OP_DECORATE_STRING: case OP_MEMBER_DECORATE_STRING:
      break;
    /* a literal (any 16-bit one would be read with the other encoding) */
    case OP_CONSTANT: case OP_SPEC_CONSTANT:
      if (TAINTED(o[0])) return fail(i, op, "is a 16-bit float constant");
      break;
    case OP_TYPE_VECTOR: /* (its count is a literal) */
      if (TAINTED(o[1])) return fail(i, op, "is a vector of 16-bit floats");
      break;
    /* storage of 16-bit floats: arrays, blocks, pointers */
    case OP_TYPE_ARRAY: case OP_TYPE_RUNTIME_ARRAY:
      if (TAINTED(o[1])) t[o[0]] = T_TYPE;
      break;
    case OP_TYPE_STRUCT:
      if (any) t[o[0]] = T_TYPE;
      break;
    case OP_TYPE_POINTER:
      if (TAINTED(o[2])) t[o[0]] = T_TYPE;
      break;
    case OP_TYPE_COOP_KHR:
      if (TAINTED(o[1])) t[o[0]] = T_TYPE;
      break;
    /* moving values around: the result is tainted when its type is; a scalar 16-bit value is
     * not allowed to exist (it could only feed scalar code) */
    case OP_VARIABLE:
      if (no >= 4 && TAINTED(o[3])) return fail(i, op, "initializes a 16-bit float variable");
      /* fallthrough */
    case OP_LOAD: case OP_COPY_OBJECT: case OP_ACCESS_CHAIN: case OP_IN_BOUNDS_ACCESS_CHAIN:
    case OP_PHI: case OP_UNDEF: case OP_COOP_LOAD_KHR: case OP_COOP_LOAD_TENSOR_NV:
      if (ID_OK(o[0]) && t[o[0]] == T_SCALAR)
        return fail(i, op, "makes a scalar 16-bit float value");
      if (TAINTED(o[0])) t[o[1]] = T_VALUE;
      break;
    case OP_STORE: case OP_COOP_STORE_KHR: case OP_COOP_STORE_TENSOR_NV:
      break;
    case OP_COOP_MULADD_KHR: /* result type, result, A, B, C: the accumulator stays float32 */
      if (TAINTED(o[0]) || TAINTED(o[4]))
        return fail(i, op, "accumulates in 16-bit floats (only A and B may be 16-bit)");
      break;
    case OP_FCONVERT: /* to or from float32 only: one side tainted, the other not */
      if (ID_OK(o[0]) && t[o[0]] == T_SCALAR)
        return fail(i, op, "converts to a scalar 16-bit float");
      if (TAINTED(o[0])) {
        if (TAINTED(o[2])) return fail(i, op, "converts between 16-bit float types");
        t[o[1]] = T_VALUE;
      }
      break;
    default:
      if (any)
        return fail(i, op, "uses a 16-bit float type or value in a way the rewrite does not "
                           "allow (only storage, cooperative-matrix loads/stores/products and "
                           "conversions to/from float32)");
    }
    i += wc;
  }
  if (!half_at) {
    fprintf(stderr, "%s: %s: has no 16-bit float type to rewrite\n", prog, argv[1]);
    return 1;
  }
  if (!last_cap) {
    fprintf(stderr, "%s: %s: has no OpCapability\n", prog, argv[1]);
    return 1;
  }

  /* Pass 2: copy, with the encoding, the capabilities and the extension. */
  static const char ext[] = "SPV_KHR_bfloat16"; /* 16 chars + NUL: 5 words */
  uint32_t *out = calloc(n + 16, 4);
  if (out == NULL) return 1;
  size_t m = 0;
  memcpy(out, w, 5 * 4);
  m = 5;
  for (size_t i = 5; i < n;) {
    uint32_t wc = w[i] >> 16, op = w[i] & 0xffffu;
    if (op == OP_CAPABILITY && w[i + 1] == CAP_FLOAT16) {
      /* dropped: no IEEE half is left */
    } else if (i == half_at) {
      out[m++] = 4u << 16 | OP_TYPE_FLOAT;
      out[m++] = w[i + 1];
      out[m++] = 16;
      out[m++] = FP_ENCODING_BFLOAT16;
    } else {
      memcpy(out + m, w + i, wc * 4);
      m += wc;
    }
    if (i == last_cap) {
      out[m++] = 2u << 16 | OP_CAPABILITY;
      out[m++] = CAP_BFLOAT16_TYPE;
      out[m++] = 2u << 16 | OP_CAPABILITY;
      out[m++] = CAP_BFLOAT16_COOPMAT;
      if (!last_ext) last_ext = i; /* no extension yet: put it right after the capabilities */
    }
    if (i == last_ext) {
      out[m++] = 6u << 16 | OP_EXTENSION;
      memset(out + m, 0, 5 * 4);
      memcpy(out + m, ext, sizeof ext);
      m += 5;
    }
    i += wc;
  }
  FILE *f = fopen(argv[2], "wb");
  if (f == NULL || fwrite(out, 4, m, f) != m || fclose(f) != 0) {
    fprintf(stderr, "%s: cannot write %s\n", prog, argv[2]);
    remove(argv[2]);
    return 1;
  }
  free(out);
  free(t);
  free(w);
  return 0;
}
