/*
 * test_quant_dtype.c: block (quantized) dtypes through the public C API. The dtype table
 * agrees with the raw block functions (em_quant_block_size), quantize/dequantize as ops give
 * the bytes and values of em_quant_quantize/em_quant_dequantize, generic paths (clone of a
 * transposed view, index_select, cat, em_view_dtype) move blocks as bytes, and every
 * elementwise, reduction and other op refuses a block dtype with an error instead of reading
 * bytes as numbers (or past a table indexed by dtype).
 */
#include <stdlib.h>

#include "check.h"

/* The raw format of each block dtype, written out here rather than taken from the runtime. */
static const struct { em_dtype d; const char *name; int format; int64_t group; int sym; } BLOCKS[] = {
    {EM_Q8_0, "q8_0", EM_QUANT_Q8_0, 0, 0},          {EM_Q4_0, "q4_0", EM_QUANT_Q4_0, 0, 0},
    {EM_Q4_1, "q4_1", EM_QUANT_Q4_1, 0, 0},          {EM_Q4_K, "q4_k", EM_QUANT_Q4_K, 0, 0},
    {EM_Q6_K, "q6_k", EM_QUANT_Q6_K, 0, 0},
    {EM_INT8_G32, "int8_g32", EM_QUANT_AFFINE8, 32, 0},
    {EM_INT8_G32_SYM, "int8_g32_sym", EM_QUANT_AFFINE8, 32, 1},
    {EM_INT8_G64, "int8_g64", EM_QUANT_AFFINE8, 64, 0},
    {EM_INT8_G64_SYM, "int8_g64_sym", EM_QUANT_AFFINE8, 64, 1},
    {EM_INT8_G128, "int8_g128", EM_QUANT_AFFINE8, 128, 0},
    {EM_INT8_G128_SYM, "int8_g128_sym", EM_QUANT_AFFINE8, 128, 1},
    {EM_INT4_G32, "int4_g32", EM_QUANT_AFFINE4, 32, 0},
    {EM_INT4_G32_SYM, "int4_g32_sym", EM_QUANT_AFFINE4, 32, 1},
    {EM_INT4_G64, "int4_g64", EM_QUANT_AFFINE4, 64, 0},
    {EM_INT4_G64_SYM, "int4_g64_sym", EM_QUANT_AFFINE4, 64, 1},
    {EM_INT4_G128, "int4_g128", EM_QUANT_AFFINE4, 128, 0},
    {EM_INT4_G128_SYM, "int4_g128_sym", EM_QUANT_AFFINE4, 128, 1},
};
enum { NBLOCKS = sizeof BLOCKS / sizeof BLOCKS[0] };

static void test_table(void) {
  CHECK(NBLOCKS == EM_NUM_DTYPES - EM_Q8_0);
  for (int d = 0; d < EM_Q8_0; d++) {
    CHECK(!em_dtype_is_block((em_dtype)d));
    CHECK(em_dtype_block_elems((em_dtype)d) == 1);
  }
  for (int i = 0; i < NBLOCKS; i++) {
    int64_t be, bb;
    CHECK(em_quant_block_size(BLOCKS[i].format, BLOCKS[i].group, BLOCKS[i].sym, &be, &bb) == 0);
    CHECK(em_dtype_is_block(BLOCKS[i].d));
    CHECK(em_dtype_block_elems(BLOCKS[i].d) == be);
    CHECK((int64_t)em_dtype_size(BLOCKS[i].d) == bb);
    CHECK(strcmp(em_dtype_name(BLOCKS[i].d), BLOCKS[i].name) == 0);
    CHECK(em_dtype_from_name(BLOCKS[i].name) == (int)BLOCKS[i].d);
    CHECK(!em_dtype_is_floating(BLOCKS[i].d));
  }
  CHECK(em_dtype_block_elems(EM_NUM_DTYPES) == 0);
}

/* x [3, 256] of varied values. */
static em_tensor *sample(void) {
  int64_t sz[2] = {3, 256};
  float v[768];
  for (int i = 0; i < 768; i++) v[i] = (float)sin(i * 0.37) * (1 + i % 7);
  return em_from_buffer(v, EM_FLOAT32, 2, sz, EM_FLOAT32, 0);
}

static void test_ops_match_raw(void) {
  em_tensor *x = sample();
  for (int i = 0; i < NBLOCKS; i++) {
    em_tensor *q = em_quantize(x, BLOCKS[i].d);
    CHECK(q != NULL && q->dtype_id == (int)BLOCKS[i].d && q->ndim == 2 && q->sizes[0] == 3 &&
          q->sizes[1] == 256 / em_dtype_block_elems(BLOCKS[i].d));
    size_t nbytes = 3 * (256 / em_dtype_block_elems(BLOCKS[i].d)) * em_dtype_size(BLOCKS[i].d);
    unsigned char *raw = malloc(nbytes);
    float *back = malloc(768 * sizeof(float));
    CHECK(em_quant_quantize(BLOCKS[i].format, BLOCKS[i].group, BLOCKS[i].sym, em_data_ptr(x), 768,
                            raw) == 0);
    CHECK(q && memcmp(em_data_ptr(q), raw, nbytes) == 0);
    CHECK(em_quant_dequantize(BLOCKS[i].format, BLOCKS[i].group, BLOCKS[i].sym, raw, 768, back) == 0);
    em_tensor *y = q ? em_dequantize(q, EM_FLOAT32) : NULL;
    CHECK(y && y->sizes[1] == 256 && memcmp(em_data_ptr(y), back, 768 * sizeof(float)) == 0);
    free(raw);
    free(back);
    em_release(y);
    em_release(q);
  }
  em_release(x);
}

/* Copies of a transposed view, rows picked, cat and byte views: all move whole blocks. */
static void test_generic_paths(void) {
  em_tensor *x = sample();
  em_tensor *q = em_quantize(x, EM_Q4_1); /* [3, 8] blocks of 20 bytes */
  const unsigned char *qb = em_data_ptr(q);
  em_tensor *t = em_t(q), *tc = em_contiguous(t);
  CHECK(tc && tc->sizes[0] == 8 && tc->sizes[1] == 3);
  int ok = 1;
  for (int r = 0; tc && r < 8; r++)
    for (int c = 0; c < 3; c++)
      ok &= memcmp((const unsigned char *)em_data_ptr(tc) + (r * 3 + c) * 20, qb + (c * 8 + r) * 20,
                   20) == 0;
  CHECK(ok);
  int64_t idx[2] = {2, 0}, n2 = 2;
  em_tensor *it = em_from_buffer(idx, EM_INT64, 1, &n2, EM_INT64, 0);
  em_tensor *rows = em_index_select(q, 0, it);
  CHECK(rows && rows->dtype_id == EM_Q4_1 && rows->sizes[0] == 2 &&
        memcmp(em_data_ptr(rows), qb + 2 * 160, 160) == 0 &&
        memcmp((const unsigned char *)em_data_ptr(rows) + 160, qb, 160) == 0);
  em_tensor *parts[2] = {q, rows};
  em_tensor *c = em_cat(2, parts, 0);
  CHECK(c && c->sizes[0] == 5 && memcmp(em_data_ptr(c), qb, 480) == 0);
  em_tensor *bytes = em_view_dtype(q, EM_UINT8);
  CHECK(bytes && bytes->sizes[1] == 160 && em_data_ptr(bytes) == em_data_ptr(q));
  em_tensor *again = bytes ? em_view_dtype(bytes, EM_Q4_1) : NULL;
  CHECK(again && again->sizes[1] == 8 && again->dtype_id == EM_Q4_1);
  int64_t odd[2] = {3, 7};
  em_tensor *u = em_empty(2, odd, EM_UINT8, 0);
  CHECK_ERROR(em_view_dtype(u, EM_Q4_1) == NULL, "multiple of 20");
  em_release(u);
  em_release(again);
  em_release(bytes);
  em_release(c);
  em_release(rows);
  em_release(it);
  em_release(tc);
  em_release(t);
  em_release(q);
  em_release(x);
}

/* Every op family refuses a block operand: an error, not a crash or numbers from bytes. */
static void test_refusals(void) {
  em_tensor *x = sample();
  em_tensor *q = em_quantize(x, EM_Q4_K);
  for (int op = 0; op < EM_NUM_UNARY; op++) {
    em_clear_error();
    CHECK(em_unary((em_unary_op)op, q) == NULL);
    /* "not implemented for q4_k", or the float-only ops' "expected a floating-point tensor,
     * got q4_k" */
    CHECK(strstr(em_last_error(), "q4_k") != NULL);
  }
  for (int op = 0; op < EM_NUM_BINARY; op++) {
    CHECK_ERROR(em_binary((em_binary_op)op, q, q) == NULL, "not implemented for q4_k");
    CHECK_ERROR(em_binary((em_binary_op)op, x, q) == NULL, "not implemented for q4_k");
    CHECK_ERROR(em_binary_scalar((em_binary_op)op, q, 2.0, 0) == NULL, "not implemented for q4_k");
  }
  for (int op = 0; op < EM_NUM_REDUCE; op++)
    CHECK_ERROR(em_reduce((em_reduce_op)op, q, 0, NULL, 0) == NULL, "not implemented for q4_k");
  CHECK_ERROR(em_argmax(q, 0, 0) == NULL, "not implemented for q4_k");
  CHECK_ERROR(em_cumsum(q, 0) == NULL, "not implemented for q4_k");
  CHECK_ERROR(em_softmax(q, 0) == NULL, "not implemented for q4_k");
  CHECK_ERROR(em_matmul(q, q) == NULL, "not implemented for q4_k");
  CHECK_ERROR(em_nonzero(q) == NULL, "not implemented for q4_k");
  em_tensor *v = NULL, *ix = NULL;
  CHECK_ERROR(em_sort(q, 0, 0, &v, &ix), "not implemented for q4_k");
  CHECK_ERROR(em_to_dtype(q, EM_FLOAT32) == NULL, "casting q4_k to float32 is not implemented");
  CHECK_ERROR(em_to_dtype(x, EM_Q4_K) == NULL, "casting float32 to q4_k is not implemented");
  CHECK_ERROR(em_fill_(q, 1.0), "fill_: not implemented for q4_k");
  int64_t one = 1;
  CHECK_ERROR(em_zeros(1, &one, EM_Q8_0, 0) == NULL, "zeros: not implemented for q8_0");
  CHECK_ERROR(em_arange(0, 4, 1, EM_Q8_0, 0) == NULL, "arange: not implemented for q8_0");
  CHECK_ERROR(em_linspace(0, 4, 5, EM_Q8_0, 0) == NULL, "linspace: not implemented for q8_0");
  CHECK_ERROR(em_randint(0, 4, 1, &one, EM_Q8_0, 0) == NULL, "randint: not implemented for q8_0");
  CHECK_ERROR(em_eye(2, 2, EM_Q8_0, 0) == NULL, "not implemented for q8_0");
  double d;
  CHECK_ERROR(em_item(q, &d), "item: not implemented for q4_k");
  CHECK(em_last_error_kind() == EM_ERR_NOT_IMPLEMENTED);
  /* checkpoints: the C writer has no safetensors type for blocks and says so */
  const char *names[1] = {"w"};
  CHECK_ERROR(em_safetensors_save("/tmp/ember_test_quant_dtype.st", 1, names, &q, 0, NULL, NULL),
              "dtype q4_k, which safetensors has no type for");
  /* the quantized ops check their operands */
  CHECK_ERROR(em_quantize(x, EM_FLOAT16) == NULL, "expected a quantized dtype");
  int64_t s2[2] = {2, 100};
  em_tensor *bad = em_zeros(2, s2, EM_FLOAT32, 0);
  CHECK_ERROR(em_quantize(bad, EM_Q8_0) == NULL, "multiple of 32");
  CHECK_ERROR(em_dequantize(x, EM_FLOAT32) == NULL, "expected a quantized dtype");
  CHECK_ERROR(em_dequantize(q, EM_INT32) == NULL, "floating-point dtype");
  /* q4_k has a CPU Linear only where the optimized kernel is built in */
  em_clear_error();
  em_tensor *lin = em_linear_quantized(x, q, NULL);
  CHECK(lin != NULL || strstr(em_last_error(), "not implemented on cpu for q4_k") != NULL);
  em_release(lin);
  em_release(bad);
  em_release(q);
  em_release(x);
}

int main(void) {
  test_table();
  test_ops_match_raw();
  test_generic_paths();
  test_refusals();
  return check_report();
}
