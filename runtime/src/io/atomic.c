/*
 * atomic.c: writing a file so that readers see the old version or the new one, never a part.
 *
 * The data goes to a temporary file in the target's directory (rename is atomic only within
 * one file system), which is flushed and fsync'ed before it is renamed over the target; the
 * directory is then fsync'ed so that the rename itself survives a power cut. A failure at any
 * step removes the temporary file and leaves the previous file as it was. A process killed
 * mid-write leaves at most a stray "<path>.tmp.<pid>.<n>" file next to an intact target.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io.h"

static int temp_counter;

static char *temp_name(const char *path, unsigned n) {
  size_t cap = strlen(path) + 64;
  char *s = malloc(cap);
  if (s) snprintf(s, cap, "%s.tmp.%ld.%u", path, (long)getpid(), n);
  return s;
}

int em_atomic_open(em_atomic_file *a, const char *fn, const char *path) {
  memset(a, 0, sizeof *a);
  a->fn = fn;
  a->path = path;
  if (path == NULL || path[0] == '\0') return em_error("%s: expected a file path, got none", fn);
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return em_error("%s: cannot write %s: it is a directory", fn, path);
  for (int attempt = 0; attempt < 100; attempt++) {
    unsigned n = (unsigned)__atomic_fetch_add(&temp_counter, 1, __ATOMIC_RELAXED);
    char *tmp = temp_name(path, n);
    if (tmp == NULL) return em_error_kind_set(EM_ERR_OOM, "%s: out of memory", fn);
    /* O_EXCL: never reuse a file someone else is writing. The mode goes through the umask like
     * any new file's (mkstemp would force 0600). */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
      int e = errno;
      free(tmp);
      if (e == EEXIST) continue;
      return em_error("%s: cannot write %s: %s", fn, path, strerror(e));
    }
    a->f = fdopen(fd, "wb");
    if (a->f == NULL) {
      close(fd);
      unlink(tmp);
      free(tmp);
      return em_error_kind_set(EM_ERR_OOM, "%s: out of memory", fn);
    }
    a->tmp_path = tmp;
    return 0;
  }
  return em_error("%s: cannot write %s: no free temporary file name", fn, path);
}

int em_atomic_write(em_atomic_file *a, const void *data, size_t n) {
  if (a->failed) return -1;
  if (n > 0 && fwrite(data, 1, n, a->f) != n) {
    a->failed = 1;
    return em_error("%s: cannot write %s: %s", a->fn, a->path, strerror(errno));
  }
  return 0;
}

void em_atomic_abort(em_atomic_file *a) {
  if (a->f) fclose(a->f);
  a->f = NULL;
  if (a->tmp_path) {
    unlink(a->tmp_path);
    free(a->tmp_path);
  }
  a->tmp_path = NULL;
}

/* fsync on the directory makes the rename durable. Some file systems refuse it (EINVAL);
 * that is not a failure of the write. */
static void sync_directory(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  if (dir == NULL) return;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)fsync(fd);
    close(fd);
  }
  free(dir);
}

int em_atomic_commit(em_atomic_file *a) {
  if (a->failed) {
    em_atomic_abort(a);
    return -1;
  }
  if (fflush(a->f) != 0 || fsync(fileno(a->f)) != 0) {
    int e = errno;
    em_atomic_abort(a);
    return em_error("%s: cannot write %s: %s", a->fn, a->path, strerror(e));
  }
  int rc = fclose(a->f);
  a->f = NULL;
  if (rc != 0) {
    int e = errno;
    em_atomic_abort(a);
    return em_error("%s: cannot write %s: %s", a->fn, a->path, strerror(e));
  }
  if (rename(a->tmp_path, a->path) != 0) {
    int e = errno;
    em_atomic_abort(a);
    return em_error("%s: cannot write %s: %s", a->fn, a->path, strerror(e));
  }
  free(a->tmp_path);
  a->tmp_path = NULL;
  sync_directory(a->path);
  return 0;
}
