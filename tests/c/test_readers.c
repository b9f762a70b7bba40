/*
 * test_readers.c: reader details an embedder sees but Lua cannot reach.
 *
 * - the JSON parser of safetensors headers reads long numbers whole (a literal of more than 63
 *   characters kept its digits but lost its exponent);
 * - a short pread (a file cut while it is read) is reported as truncation with the counts,
 *   not with whatever errno an earlier call left: this program defines pread itself, which
 *   the library's calls reach, and makes it stop early on request;
 * - the gzip limit: set, read back, refused below 1, and enforced with a message naming it;
 * - write_npy and safetensors saves with their header buffer's allocation failing: an
 *   out-of-memory error, where the header trim once wrote through the NULL buffer and the
 *   padding loops waited forever for a failed buffer to grow (realloc is this program's too,
 *   failing on request and otherwise passing on to the next definition: libc's, or the
 *   sanitizer's; an alarm turns a hang into a failure).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"
#include "../../runtime/src/io/io.h"

/* While fail_realloc is set, the reallocs after the first `realloc_grace` ones fail. */
static int fail_realloc, realloc_grace;

void *realloc(void *p, size_t n) {
  static void *(*next)(void *, size_t);
  if (fail_realloc && realloc_grace-- <= 0) return NULL;
  if (next == NULL) next = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  return next(p, n);
}

/* Reads past this offset look like the end of the file (-1: off). */
static long long fake_eof = -1;

ssize_t pread(int fd, void *buf, size_t n, off_t off) {
  if (fake_eof >= 0) {
    if (off >= fake_eof) {
      errno = EACCES; /* a stale errno the reader must not report */
      return 0;
    }
    if ((long long)(off + (off_t)n) > fake_eof) n = (size_t)(fake_eof - off);
  }
  return syscall(SYS_pread64, fd, buf, n, off);
}

static char dir[64];

static const char *path_in(const char *name) {
  static char buf[4][128];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
  return buf[k];
}

static void test_json_long_numbers(void) {
  char text[200];
  snprintf(text, sizeof text, "[1.%0*de5, -0.%0*d1E+90, 12.5]", 70, 0, 80, 0);
  em_json *v = em_json_parse("test", "text", text, strlen(text));
  CHECK(v != NULL && v->count == 3);
  if (v == NULL) return;
  CHECK(v->items[0].number == 1e5);
  CHECK(v->items[1].number == -1e9);
  CHECK(v->items[2].number == 12.5 && !v->items[2].is_integer);
  em_json_free(v);
}

static void test_short_pread(void) {
  const char *path = path_in("short.safetensors");
  int64_t sizes[1] = { 4 };
  em_tensor *t = em_empty(1, sizes, EM_FLOAT32, EM_CPU);
  em_fill_(t, 2.0);
  const char *names[1] = { "w" };
  CHECK(em_safetensors_save(path, 1, names, &t, 0, NULL, NULL) == 0);
  em_release(t);

  /* The header cut short: the file ends 3 bytes into its JSON. */
  fake_eof = 11;
  em_clear_error();
  CHECK(em_safetensors_open(path) == NULL);
  CHECK(strstr(em_last_error(), "is truncated: expected") != NULL);
  CHECK(strstr(em_last_error(), "got 3") != NULL);
  CHECK(strstr(em_last_error(), "Permission denied") == NULL);

  /* The tensor's bytes cut short after a whole header. */
  fake_eof = -1;
  em_safetensors *f = em_safetensors_open(path);
  CHECK(f != NULL);
  if (f != NULL) {
    fake_eof = 1 << 20; /* everything readable: the tensor loads */
    em_tensor *w = em_safetensors_tensor(f, 0);
    CHECK(w != NULL);
    em_release(w);
    fake_eof = 9; /* inside the header, before any tensor byte */
    em_clear_error();
    CHECK(em_safetensors_tensor(f, 0) == NULL);
    CHECK(strstr(em_last_error(), "is truncated: tensor 'w'") != NULL);
    fake_eof = -1;
    em_safetensors_close(f);
  }
}

static void test_gzip_limit(void) {
  int64_t was = em_gzip_limit();
  CHECK(was == (int64_t)4 << 30);
  CHECK_ERROR(em_set_gzip_limit(0), "set_gzip_limit: expected a limit of at least 1 byte, got 0");
  CHECK(em_gzip_limit() == was);

  FILE *f = fopen(path_in("rows.csv"), "w");
  for (int i = 0; i < 100; i++) fputs("1,2,3\n", f);
  fclose(f);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "gzip -f %s", path_in("rows.csv"));
  CHECK(system(cmd) == 0);
  const char *path = path_in("rows.csv.gz");
  CHECK(em_set_gzip_limit(600) == 0 && em_gzip_limit() == 600);
  em_tensor *t = em_read_csv(path, ',', 0, EM_FLOAT32);
  CHECK(t != NULL && em_numel(t) == 300);
  em_release(t);
  CHECK(em_set_gzip_limit(599) == 0);
  em_clear_error();
  CHECK(em_read_csv(path, ',', 0, EM_FLOAT32) == NULL);
  CHECK(strstr(em_last_error(), "decompresses to more than the gzip limit of 599 bytes") != NULL);
  CHECK(em_set_gzip_limit(was) == 0);
}

static void test_npy_header_oom(void) {
  int64_t sizes[2] = { 2, 3 };
  em_tensor *t = em_empty(2, sizes, EM_FLOAT32, EM_CPU);
  em_fill_(t, 1.0);
  const char *path = path_in("oom.npy");
  fail_realloc = 1;
  realloc_grace = 0;
  int rc = em_write_npy(path, t);
  fail_realloc = 0;
  CHECK(rc != 0);
  CHECK(strstr(em_last_error(), "write_npy: out of memory") != NULL);
  CHECK(access(path, F_OK) != 0); /* nothing written */
  CHECK(em_write_npy(path, t) == 0);
  em_tensor *back = em_read_npy(path);
  CHECK(back != NULL && em_numel(back) == 6);
  em_release(back);
  em_release(t);
}

static void test_safetensors_header_oom(void) {
  int64_t sizes[1] = { 2 };
  em_tensor *t = em_empty(1, sizes, EM_FLOAT32, EM_CPU);
  em_fill_(t, 1.0);
  char name[301];
  memset(name, 'x', 300);
  name[300] = '\0';
  const char *names[1] = { name };
  const char *path = path_in("oom.safetensors");
  /* The first allocation (256 bytes) succeeds, the growth inside the long name fails: the
   * buffer stops at a length that is not a multiple of 8. */
  fail_realloc = 1;
  realloc_grace = 1;
  int rc = em_safetensors_save(path, 1, names, &t, 0, NULL, NULL);
  fail_realloc = 0;
  CHECK(rc != 0);
  CHECK(strstr(em_last_error(), "out of memory") != NULL);
  CHECK(access(path, F_OK) != 0);
  CHECK(em_safetensors_save(path, 1, names, &t, 0, NULL, NULL) == 0);
  em_release(t);
}

int main(void) {
  alarm(60);
  snprintf(dir, sizeof dir, "/tmp/ember_test_readers_XXXXXX");
  if (mkdtemp(dir) == NULL) return 1;
  test_json_long_numbers();
  test_short_pread();
  test_gzip_limit();
  test_npy_header_oom();
  test_safetensors_header_oom();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) return 1;
  return check_report();
}
