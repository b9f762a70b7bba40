/*
 * test_embed_api.c: the embedding API's lifetime rules. em_from_blob shares the caller's
 * memory both ways and runs its deleter exactly once, when the last view goes (or at once on
 * failure); the error kind is sticky like errno; em_shutdown refuses while Vulkan tensors
 * live, then releases the devices, and a later need starts them again.
 */
#include <stdlib.h>

#include "check.h"

static int deleted;
static void count_delete(void *data, void *ctx) {
  deleted++;
  CHECK(ctx == (void *)&deleted);
  free(data);
}

static void test_from_blob(void) {
  float *buf = malloc(6 * sizeof *buf);
  for (int i = 0; i < 6; i++) buf[i] = (float)i;
  int64_t sizes[2] = {2, 3};
  deleted = 0;
  em_tensor *t = em_from_blob(buf, EM_FLOAT32, 2, sizes, NULL, count_delete, &deleted);
  CHECK(t != NULL && em_data_ptr(t) == buf);
  CHECK(em_fill_(t, 7.0) == 0 && buf[5] == 7.0f); /* writes through the tensor reach buf */
  buf[4] = 3.0f;                                  /* and the caller's writes show */
  em_tensor *row = em_select(t, 0, 1);
  double v = 0;
  em_tensor *e = em_select(row, 0, 1);
  CHECK(em_item(e, &v) == 0 && v == 3.0);
  em_release(e);
  em_release(t);
  CHECK(deleted == 0); /* the view keeps the buffer alive */
  em_release(row);
  CHECK(deleted == 1);
  /* strided: the columns of a [3, 2] buffer */
  double *b2 = malloc(6 * sizeof *b2);
  for (int i = 0; i < 6; i++) b2[i] = i;
  int64_t cs[1] = {3}, st[1] = {2};
  em_tensor *col = em_from_blob(b2, EM_FLOAT64, 1, cs, st, count_delete, &deleted);
  em_tensor *sum = em_reduce(EM_SUM, col, 0, NULL, 0);
  CHECK(sum && em_item(sum, &v) == 0 && v == 0 + 2 + 4);
  em_release(sum);
  em_release(col);
  CHECK(deleted == 2);
  /* failure runs the deleter before returning */
  int64_t bad[1] = {-1};
  CHECK(em_from_blob(malloc(4), EM_FLOAT32, 1, bad, NULL, count_delete, &deleted) == NULL);
  CHECK(deleted == 3 && strstr(em_last_error(), "from_blob") != NULL);
}

static void test_sticky_error(void) {
  em_clear_error();
  CHECK(em_last_error_kind() == EM_OK);
  CHECK(em_numel(NULL) == -1 && em_last_error_kind() == EM_ERR_VALUE);
  em_tensor *t = em_zeros(0, NULL, EM_FLOAT32, 0); /* a success leaves the error as it was */
  CHECK(t != NULL && em_last_error_kind() == EM_ERR_VALUE &&
        strstr(em_last_error(), "numel") != NULL);
  em_release(t);
  em_clear_error();
  CHECK(em_last_error_kind() == EM_OK && em_last_error()[0] == '\0');
}

static void test_shutdown(void) {
  CHECK(em_shutdown() == 0); /* nothing started yet: harmless */
  int dev = em_device_parse("vulkan");
  if (dev < 0) {
    printf("no Vulkan device: shutdown checked on the cpu only\n");
    em_clear_error();
    return;
  }
  int64_t n = 4;
  em_tensor *g = em_ones(1, &n, EM_FLOAT32, dev);
  CHECK(g != NULL);
  CHECK(em_shutdown() == -1 && strstr(em_last_error(), "still alive") != NULL);
  em_tensor *sum = em_reduce(EM_SUM, g, 0, NULL, 0); /* refused: the device still works */
  double v = 0;
  CHECK(sum && em_item(sum, &v) == 0 && v == 4.0);
  em_release(sum);
  em_release(g);
  CHECK(em_shutdown() == 0);
  CHECK(em_shutdown() == 0);
  em_device_info info;
  CHECK(em_device_info_get(dev, &info) == 0 && info.started == 0); /* rediscovered, not started */
  int again = em_device_parse("vulkan"); /* starts again on need */
  g = again >= 0 ? em_full(1, &n, 2.0, EM_FLOAT32, again) : NULL;
  sum = g ? em_reduce(EM_SUM, g, 0, NULL, 0) : NULL;
  CHECK(sum && em_item(sum, &v) == 0 && v == 8.0);
  em_release(sum);
  em_release(g);
  CHECK(em_shutdown() == 0);
}

int main(void) {
  test_from_blob();
  test_sticky_error();
  test_shutdown();
  return check_report();
}
