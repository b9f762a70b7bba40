/*
 * fuzz_file.c: inputs as in-memory files for the reader fuzz targets (fuzz_file.h).
 */
#include "fuzz_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

static int fd = -1;
static char path[64];

const char *fuzz_file(const uint8_t *data, size_t size) {
  if (fd < 0) {
    fd = memfd_create("ember-fuzz", MFD_CLOEXEC);
    if (fd < 0) {
      perror("memfd_create");
      abort();
    }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  if (ftruncate(fd, 0) != 0) abort();
  size_t done = 0;
  while (done < size) {
    ssize_t k = pwrite(fd, data + done, size - done, (off_t)done);
    if (k <= 0) abort();
    done += (size_t)k;
  }
  return path;
}

void fuzz_setup(void) { em_set_gzip_limit(1 << 20); }
