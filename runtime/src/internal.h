/*
 * internal.h: what the runtime's own files share and the public header does not show.
 *
 * - error reporting helpers (errors are values: set a message, return NULL or -1);
 * - the storage struct (a refcounted buffer on one device);
 * - tensor helpers used by every op definition;
 * - the device registry, whose entries point at kernel tables (backend.h).
 */
#ifndef EMBER_INTERNAL_H
#define EMBER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ember.h"

#define EM_UNUSED(x) ((void)(x))

/* ---- errors (error.c) ---------------------------------------------------------------------- */
#if defined(__GNUC__)
#define EM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define EM_PRINTF(a, b)
#endif
/* Sets the thread's message; returns -1 so that `return em_error(...)` reads naturally. */
int em_error(const char *fmt, ...) EM_PRINTF(1, 2);
int em_error_kind_set(em_error_kind kind, const char *fmt, ...) EM_PRINTF(2, 3);
/* The same, for functions that return a pointer. */
void *em_error_null(const char *fmt, ...) EM_PRINTF(1, 2);
/* Prefixes the current message with "fn: " unless it already starts with it. Used when an op
 * composed from others fails inside, so the user sees the op they called. */
void em_error_prefix(const char *fn);
/* EM_NOT_NULL(fail, p), first thing in a public function: when the caller's pointer p is NULL,
 * the function returns fail (NULL, -1, ...) with "fn: expected p, got NULL", fn being the
 * function's name without "em_" (tests/c/test_null_args.c calls every public function so).
 * Checks that need a condition (sizes may be NULL when ndim is 0) are written out. */
void em_null_arg(const char *func, const char *arg);
#define EM_NOT_NULL(fail, p)                                                                  \
  do {                                                                                        \
    if (__builtin_expect((p) == NULL, 0)) {                                                   \
      em_null_arg(__func__, #p);                                                              \
      return fail;                                                                            \
    }                                                                                         \
  } while (0)
/* Formats sizes as "[3,4]" into buf. */
const char *em_shape_str(char *buf, size_t cap, int ndim, const int64_t *sizes);
#define EM_SHAPE_BUF 128

/* ---- storage (storage.c, alloc.c) ---------------------------------------------------------- */
struct em_storage {
  int32_t refcount;
  int32_t device_id;
  void *data;          /* host pointer on the CPU; the backend's handle elsewhere */
  size_t nbytes;
  int64_t version;     /* bumped by every in-place write; autograd checks it */
  void *backend_ctx;   /* the backend's per-buffer record */
};

em_storage *em_storage_new(int device, size_t nbytes);
/* Pinned storages (backend.h's pin_alloc): CPU storages whose backend_ctx starts with this. */
typedef struct em_pinned_head {
  void (*release)(em_storage *s); /* gives the memory back (s itself is freed by the caller) */
  int device;                     /* the device whose pinned memory it is */
} em_pinned_head;
/* A CPU storage of nbytes in `device`'s pinned memory. */
em_storage *em_pinned_storage_new(int device, size_t nbytes);
/* A CPU storage over the caller's memory (em_from_blob, blob.c) has backend_ctx ==
 * &em_blob_tag; em_blob_release runs its deleter and frees it (storage.c calls it). */
extern char em_blob_tag;
void em_blob_release(em_storage *s);
/* Whether a CPU storage is pinned (not inline, not in a tensor block, not a blob, not plain). */
bool em_storage_is_pinned(const em_storage *s);
/* A CPU tensor header with its storage and nbytes of data in one block (small tensors only),
 * or NULL without an error when the caller should allocate the usual way. Only the header's
 * storage pointer is set; the header carries EM_HEADER_IN_BLOCK once initialized. */
em_tensor *em_small_tensor_block(size_t nbytes);
enum { EM_HEADER_IN_BLOCK = 1u };
/* Frees the blocks of small tensors kept for reuse (memory.empty_cache; main thread only). */
void em_small_block_pool_release(void); /* em_tensor.reserved: the header is not separately freed */
void em_storage_retain(em_storage *s);
void em_storage_release(em_storage *s);

/* CPU allocator: statistics, limit, and the free-the-cache / host-GC / retry sequence. */
void *em_cpu_alloc(size_t nbytes);
void em_cpu_free(void *p, size_t nbytes);
void em_memory_note_alloc(int device, size_t nbytes);
void em_memory_note_free(int device, size_t nbytes);
/* Whether this is the first thread that allocated (the host's main thread): state that only it
 * touches needs no atomics. */
bool em_on_main_thread(void);
/* Runs the host GC hook, if any (the second of the three steps on allocation failure). */
void em_memory_run_gc_hook(void);
/* Applies the device limit: 0 when nbytes more fits, else -1 with nothing set. */
int em_memory_check_limit(int device, size_t nbytes);
int em_memory_oom_error(int device, size_t nbytes);
/* The device's cache grew (delta > 0) or shrank; reserved = allocated + cached. */
void em_memory_note_cached(int device, int64_t delta);
int64_t em_memory_limit(int device);
/* Frees every block the CPU allocator keeps cached. */
void em_cpu_cache_release(void);

/* ---- tensors (tensor.c) -------------------------------------------------------------------- */
/* A tensor header with no storage yet; sizes copied, contiguous strides. */
em_tensor *em_tensor_header(int ndim, const int64_t *sizes, em_dtype dtype, int device);
/* A new view of t's storage with the given geometry (retains the storage). */
em_tensor *em_tensor_view_of(const em_tensor *t, int ndim, const int64_t *sizes,
                             const int64_t *strides, int64_t offset);
/* em_empty for a shape, dtype and device that an existing tensor already has (so valid): the
 * checks are skipped. */
em_tensor *em_empty_unchecked(int ndim, const int64_t *sizes, em_dtype dtype, int device);
void em_contiguous_strides(int ndim, const int64_t *sizes, int64_t *strides);
int64_t em_shape_numel(int ndim, const int64_t *sizes);
/* Checks a shape given by a caller: ndim in range, sizes >= 0. */
int em_check_shape(const char *fn, int ndim, const int64_t *sizes);
/* Wraps a possibly negative dim; sets "fn: dimension d out of range for a N-d tensor". */
int em_wrap_dim(const char *fn, int dim, int ndim, int *out);
int em_check_dtype(const char *fn, int dtype);
int em_check_device(const char *fn, int device);
/* Devices of all non-NULL tensors must agree: "add: expected all tensors on cpu, got ...". */
int em_check_same_device(const char *fn, int n, const em_tensor *const *ts);
static inline bool em_is_wrapped(const em_tensor *t) {
  return (t->flags & EM_FLAG_WRAPPED_NUMBER) != 0;
}
/* *v = *t for a header on the caller's stack (a borrowed view), without reading t's refcount:
 * another thread may be changing it (a shared weight), and a plain copy of the whole struct
 * would read it non-atomically. v gets a count of 1 (it is never released). */
static inline void em_header_copy(em_tensor *v, const em_tensor *t) {
  memcpy(v, t, offsetof(em_tensor, refcount)); /* sizes, strides, offset, ndim, dtype, device */
  v->refcount = 1;
  v->flags = t->flags;
  v->reserved = t->reserved;
  v->storage = t->storage;
  v->grad_meta = t->grad_meta;
}
/* Marks a write to t's storage (version counter for autograd). Relaxed atomic load and store,
 * not a locked add: plain moves on x86 for every in-place op. Two threads writing one storage
 * at once race on its data anyway; even then the counter moves, which is what autograd checks. */
static inline void em_bump_version(em_tensor *t) {
  int64_t *v = &t->storage->version;
  __atomic_store_n(v, __atomic_load_n(v, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* Broadcasts shapes a and b into out (NumPy rules). */
int em_broadcast_shapes(const char *fn, int na, const int64_t *a, int nb, const int64_t *b,
                        int *nout, int64_t *out);
/* A stride-0 view of t with the target shape (t must broadcast to it). */
em_tensor *em_broadcast_to(const char *fn, const em_tensor *t, int ndim, const int64_t *sizes);

/* ---- dtypes (dtype.c) ---------------------------------------------------------------------- */
typedef struct em_dtype_info {
  const char *name;
  size_t size;
  bool is_float;
  bool is_signed;
  int64_t block_elems;   /* weights per element of a block (quantized) dtype; 0 when dense */
} em_dtype_info;
extern const em_dtype_info em_dtypes[EM_NUM_DTYPES];
/* "fn: not implemented for q4_k ..." (EM_ERR_NOT_IMPLEMENTED) when t has a block dtype, else 0:
 * the guard of op definitions whose kernels compute on dense elements. */
int em_check_not_block(const char *fn, const em_tensor *t);
/* The same for a dtype a creation function is asked to fill (arange, linspace, randint). */
int em_check_dense_dtype(const char *fn, em_dtype dtype);
/* Block tensors as bytes (ops/block_dtype.c): v (a stack header borrowing t's storage) views
 * t's blocks as uint8 with one more dimension, the block's bytes; -1 when t has EM_MAX_DIMS
 * dimensions. em_block_from_bytes is the way back (a new view). */
int em_block_bytes_view(em_tensor *v, const em_tensor *t);
em_tensor *em_block_from_bytes(const em_tensor *bytes, em_dtype dtype);

/* float16 / bfloat16 <-> float32 (round to nearest even). */
float em_half_to_float(uint16_t h);
uint16_t em_float_to_half(float f);
static inline float em_bf16_to_float(uint16_t b) {
  union { uint32_t u; float f; } v;
  v.u = (uint32_t)b << 16;
  return v.f;
}
/* Inline: elementwise loops call it per element (a bfloat16 step spent 15% in the calls). */
static inline uint16_t em_float_to_bf16(float f) {
  union { uint32_t u; float f; } v = {.f = f};
  if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40); /* quiet nan */
  uint32_t rounding = 0x7fff + ((v.u >> 16) & 1);
  return (uint16_t)((v.u + rounding) >> 16);
}
/* Reads / writes one element as double, for slow generic paths and item(). */
double em_load_as_double(const void *p, em_dtype dtype);
void em_store_from_double(void *p, em_dtype dtype, double v);
int64_t em_load_as_int64(const void *p, em_dtype dtype);

/* ---- devices (device.c) -------------------------------------------------------------------- */
typedef struct em_backend em_backend;
enum { EM_CPU = 0, EM_MAX_DEVICES = 16 };
const em_backend *em_device_backend(int device);

/* ---- random (random.c) --------------------------------------------------------------------- */
/* Reserves `count` Philox counter values; returns the first. */
uint64_t em_rng_reserve(uint64_t count, uint64_t *seed);
void em_philox4x32(uint64_t seed, uint64_t counter, uint32_t out[4]);

/* ---- threads (threads.c) ------------------------------------------------------------------- */
/* Work below this many elements stays on one thread. */
enum { EM_PARALLEL_GRAIN = 32768 };
int em_threads_for(int64_t work);

/* 0 when a fill value fits dtype by PyTorch's rule, else an error naming fn (scalar_fits.c). */
int em_check_fill_value(const char *fn, em_dtype dtype, double v);

/* ---- layout checks (layout_check.c) ---------------------------------------------------------
 * One decision for every shape-making function and reader: the element count and the
 * contiguous strides fit int64 (with headroom for the byte count), zero-size shapes included. */
bool em_shape_fits(int ndim, const int64_t *sizes);
/* Sets "fn: shape is too large ([..]: ...)" and returns -1. */
int em_shape_error(const char *fn, int ndim, const int64_t *sizes);
/* The same for views (expand, broadcasting): count and strides within int64, no headroom. */
bool em_view_shape_fits(int ndim, const int64_t *sizes);
int em_view_shape_error(const char *fn, int ndim, const int64_t *sizes);
/* For a reader: "loader: file PATH declares shape [..], too large ..." unless the shape fits. */
int em_check_file_shape(const char *loader, const char *path, int ndim, const int64_t *sizes);
/* Whether two positions of t share one memory element (stride 0, overlapping windows). */
bool em_has_internal_overlap(const em_tensor *t);
/* Refuses an in-place write into t when its positions overlap in memory. */
int em_check_writable(const char *fn, const em_tensor *t);

#endif
