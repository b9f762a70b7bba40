/*
 * atomic.c: writing a file so that readers see the old version or the new one, never a part.
 *
 * The data goes to a temporary file in the target's directory (rename is atomic only within
 * one file system), which is flushed and fsync'ed before it is renamed over the target; the
 * directory is then fsync'ed so that the rename itself survives a power cut. A failure at any
 * step removes the temporary file and leaves the previous file as it was. A process killed
 * mid-write leaves at most a stray "<path>.tmp.<pid>.<n>" file next to an intact target; the
 * next save to that path removes such files whose writer (the pid in the name) is gone.
 *
 * The new file keeps the mode of the one it replaces (a checkpoint made read-only for the group
 * stays so). A path that is a symbolic link is written through: the link's final target is
 * replaced and the link stays, as editors do, so a "latest.ckpt -> run3/ckpt" link keeps
 * pointing where it did and run3/ckpt gets the new contents.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
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

/* The file a write to path lands in: path itself, or the final target of the symbolic links
 * it names (a relative link counts from the link's own directory). NULL when out of memory;
 * a link chain longer than the kernel's own limit (40) gives ELOOP. */
static char *resolve_links(const char *path, int *err) {
  char *cur = strdup(path);
  for (int hops = 0; cur != NULL; hops++) {
    struct stat st;
    if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) return cur;
    if (hops == 40) {
      free(cur);
      *err = ELOOP;
      return NULL;
    }
    char target[PATH_MAX];
    ssize_t n = readlink(cur, target, sizeof target - 1);
    if (n < 0) {
      *err = errno;
      free(cur);
      return NULL;
    }
    target[n] = '\0';
    const char *slash = strrchr(cur, '/');
    char *next;
    if (target[0] == '/' || slash == NULL) {
      next = strdup(target);
    } else {
      size_t dlen = (size_t)(slash - cur) + 1;
      next = malloc(dlen + (size_t)n + 1);
      if (next) {
        memcpy(next, cur, dlen);
        memcpy(next + dlen, target, (size_t)n + 1);
      }
    }
    free(cur);
    cur = next;
  }
  *err = ENOMEM;
  return NULL;
}

/* Removes "<target>.tmp.<pid>.<n>" files left by writers that died mid-save: the pid in the
 * name no longer runs. A live writer's file (this process's included) is never touched. */
static void remove_stale_temps(const char *target) {
  const char *slash = strrchr(target, '/');
  const char *base = slash ? slash + 1 : target;
  char *dir = slash ? strndup(target, slash == target ? 1 : (size_t)(slash - target))
                    : strdup(".");
  if (dir == NULL) return;
  DIR *d = opendir(dir);
  size_t blen = strlen(base);
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
    const char *name = e->d_name;
    if (strncmp(name, base, blen) != 0 || strncmp(name + blen, ".tmp.", 5) != 0) continue;
    char *end;
    errno = 0;
    long pid = strtol(name + blen + 5, &end, 10);
    if (errno != 0 || end == name + blen + 5 || *end != '.' || pid <= 0 || pid > INT_MAX)
      continue;
    const char *n = end + 1;
    if (*n == '\0' || strspn(n, "0123456789") != strlen(n)) continue;
    if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to ask */
    size_t cap = strlen(dir) + strlen(name) + 2;
    char *full = malloc(cap);
    if (full == NULL) break;
    snprintf(full, cap, "%s/%s", dir, name);
    (void)unlink(full);
    free(full);
  }
  if (d) closedir(d);
  free(dir);
}

int em_atomic_open(em_atomic_file *a, const char *fn, const char *path) {
  memset(a, 0, sizeof *a);
  a->fn = fn;
  a->path = path;
  if (path == NULL || path[0] == '\0') return em_error("%s: expected a file path, got none", fn);
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return em_error("%s: cannot write %s: it is a directory", fn, path);
  int err = 0;
  a->target = resolve_links(path, &err);
  if (a->target == NULL) {
    if (err == ENOMEM) return em_error_kind_set(EM_ERR_OOM, "%s: out of memory", fn);
    return em_error("%s: cannot write %s: %s", fn, path, strerror(err));
  }
  remove_stale_temps(a->target);
  /* The replacement keeps the mode of the file it replaces; a new file gets 0666 less the
   * umask, like any other. */
  int have_mode = stat(a->target, &st) == 0 && S_ISREG(st.st_mode);
  for (int attempt = 0; attempt < 100; attempt++) {
    unsigned n = (unsigned)__atomic_fetch_add(&temp_counter, 1, __ATOMIC_RELAXED);
    char *tmp = temp_name(a->target, n);
    if (tmp == NULL) {
      em_atomic_abort(a);
      return em_error_kind_set(EM_ERR_OOM, "%s: out of memory", fn);
    }
    /* O_EXCL: never reuse a file someone else is writing. The mode goes through the umask like
     * any new file's (mkstemp would force 0600). */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) {
      int e = errno;
      free(tmp);
      if (e == EEXIST) continue;
      em_atomic_abort(a);
      return em_error("%s: cannot write %s: %s", fn, path, strerror(e));
    }
    if (have_mode && fchmod(fd, st.st_mode & 07777) != 0) {
      int e = errno;
      close(fd);
      unlink(tmp);
      free(tmp);
      em_atomic_abort(a);
      return em_error("%s: cannot write %s: cannot keep its mode %o: %s", fn, path,
                      (unsigned)(st.st_mode & 07777), strerror(e));
    }
    a->f = fdopen(fd, "wb");
    if (a->f == NULL) {
      close(fd);
      unlink(tmp);
      free(tmp);
      em_atomic_abort(a);
      return em_error_kind_set(EM_ERR_OOM, "%s: out of memory", fn);
    }
    a->tmp_path = tmp;
    return 0;
  }
  em_atomic_abort(a);
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
  free(a->target);
  a->target = NULL;
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
  if (rename(a->tmp_path, a->target) != 0) {
    int e = errno;
    em_atomic_abort(a);
    return em_error("%s: cannot write %s: %s", a->fn, a->path, strerror(e));
  }
  free(a->tmp_path);
  a->tmp_path = NULL;
  sync_directory(a->target);
  free(a->target);
  a->target = NULL;
  return 0;
}
