-- The C declarations LuaJIT binds: a copy of runtime/include/ember.h between
-- EMBER_FFI_BEGIN and EMBER_FFI_END (scripts/sync-cdef.sh; tests/lua/cdef_spec.lua checks it).
return [==[

enum { EM_MAX_DIMS = 8 };
/* Passed as a dimension to mean "over all elements" (argmax, argmin, ...). */
enum { EM_ALL_DIMS = -1000 };

typedef enum em_dtype {
  EM_FLOAT32, EM_FLOAT64, EM_FLOAT16, EM_BFLOAT16,
  EM_INT8, EM_UINT8, EM_INT16, EM_INT32, EM_INT64, EM_BOOL,
  /* Block dtypes (quantized weights, docs/api/quant.md): one element is one block of
   * em_dtype_block_elems weights in em_dtype_size bytes, laid out as GGUF's types (q8_0 ...
   * q6_k) or Ember's affine per-group formats (int8/int4, group 32/64/128, with a minimum or
   * symmetric: _sym). A tensor's last dimension counts blocks. Copies, views along whole
   * blocks, index_select, device moves and checkpoints take them; arithmetic does not. */
  EM_Q8_0, EM_Q4_0, EM_Q4_1, EM_Q4_K, EM_Q6_K,
  EM_INT8_G32, EM_INT8_G32_SYM, EM_INT8_G64, EM_INT8_G64_SYM, EM_INT8_G128, EM_INT8_G128_SYM,
  EM_INT4_G32, EM_INT4_G32_SYM, EM_INT4_G64, EM_INT4_G64_SYM, EM_INT4_G128, EM_INT4_G128_SYM,
  EM_NUM_DTYPES
} em_dtype;

/* Error kinds, so that callers can react to out-of-memory without parsing text. */
typedef enum em_error_kind { EM_OK, EM_ERR_VALUE, EM_ERR_OOM, EM_ERR_NOT_IMPLEMENTED } em_error_kind;

/* Tensor flags. */
enum {
  EM_FLAG_WRAPPED_NUMBER = 1   /* a 0-dim tensor made from a host number: it never upcasts */
};

typedef struct em_storage em_storage;
typedef struct em_grad_meta em_grad_meta;

/* A tensor is a view over a storage. Lua reads these fields directly; only the runtime writes
 * them. sizes/strides are in elements, offset is in elements from the storage start. */
typedef struct em_tensor {
  int64_t sizes[EM_MAX_DIMS];
  int64_t strides[EM_MAX_DIMS];
  int64_t offset;
  int32_t ndim;
  int32_t dtype_id;
  int32_t device_id;
  int32_t refcount;
  uint32_t flags;
  uint32_t reserved;
  em_storage *storage;
  em_grad_meta *grad_meta;   /* autograd metadata, NULL for plain tensors */
} em_tensor;

/* ---- errors --------------------------------------------------------------------------------
 * The message and the kind are per thread and sticky, like errno: a failing call sets both, a
 * successful call leaves them as they were. Read them right after a call returned its failure
 * value (NULL, -1); after a success they may describe an older failure. em_clear_error resets
 * them to "" and EM_OK. */
/* The thread's last message, "" if none: borrowed from a thread-local buffer that the thread's
 * next failure (or em_clear_error) overwrites; copy it to keep it. Never NULL. */
const char *em_last_error(void);
/* The kind of the thread's last failure (EM_OK when none since em_clear_error). */
em_error_kind em_last_error_kind(void);
void em_clear_error(void);
/* Sets the thread's message (copied; NULL stands for "unknown error") and the kind
 * EM_ERR_VALUE: how hooks and other callbacks report failure. */
void em_set_error(const char *message);

/* ---- dtypes -------------------------------------------------------------------------------- */
/* "float32", ... ("?" for an unknown dtype): static string. */
const char *em_dtype_name(em_dtype dtype);
int em_dtype_from_name(const char *name);        /* -1 with an error for unknown names */
size_t em_dtype_size(em_dtype dtype);
int em_dtype_is_floating(em_dtype dtype);
/* Weights per element: 1 for the dense dtypes, the block's weights for a block dtype (32 for
 * q8_0, 256 for q4_k ...), 0 for an unknown dtype. */
int64_t em_dtype_block_elems(em_dtype dtype);
/* 1 for a block (quantized) dtype, else 0. */
int em_dtype_is_block(em_dtype dtype);
em_dtype em_promote_types(em_dtype a, em_dtype b);
/* The dtype an op on a and b computes in; EM_NUM_DTYPES with an error when one is NULL. */
em_dtype em_result_type(const em_tensor *a, const em_tensor *b);

/* ---- devices ------------------------------------------------------------------------------- */
int em_device_count(void);                       /* devices known to this process, cpu included */
/* "cpu", "vulkan:0", "?" for an unknown id: borrowed from the registry, valid until
 * em_shutdown (copy it to keep it). */
const char *em_device_name(int device);
int em_device_parse(const char *spec);           /* "cpu", "auto", ... -> id, or -1 */
int em_default_device(void);
int em_set_default_device(int device);

/* ---- threads ------------------------------------------------------------------------------- */
void em_set_num_threads(int n);
int em_get_num_threads(void);

/* ---- memory -------------------------------------------------------------------------------- */
typedef struct em_memory_stats {
  int64_t allocated;        /* bytes held by live storages */
  int64_t reserved;         /* bytes held from the system, cache included */
  int64_t peak;             /* highest `allocated` since the last reset */
  int64_t num_allocs;       /* allocations served */
  int64_t limit;            /* 0 = none */
} em_memory_stats;
int em_memory_stats_get(int device, em_memory_stats *out);
int em_memory_set_limit(int device, int64_t bytes);
int em_memory_reset_peak(int device);
int em_memory_empty_cache(int device);
/* Called once when an allocation fails, before the retry (an embedder frees what it can).
 * em_set_gc_hook(NULL, NULL) removes the hook. */
typedef void (*em_gc_hook)(void *userdata);
void em_set_gc_hook(em_gc_hook hook, void *userdata);
/* Bytes allocated since the host last collected garbage; a host with a tracing GC (Lua) reads
 * this to pace its collector, since it cannot see the memory behind its handles. */
int64_t em_alloc_pressure(void);
void em_alloc_pressure_reset(void);
/* Bytes of live storages on every device together (what the collector's pace follows). */
int64_t em_alloc_live(void);

/* ---- memory debugging (ember.memory.summary, snapshot, leak_check) --------------------------
 * The census: a device's live storages and its cache's free blocks, by size class. Class k
 * holds sizes in [2^k, 2^(k+1)) bytes; class 0 also holds empty storages. Live storages are counted on
 * every allocation (the sum of live_bytes is em_memory_stats.allocated); the cache is walked
 * when asked. On the CPU the cache holds freed blocks of 64 KiB and more (the sum of its
 * cached_bytes is reserved - allocated); on Vulkan it is the free ranges of the slabs, and
 * reserved - allocated also counts the rounding of live blocks to the device's alignment. */
enum { EM_MEMORY_CLASSES = 64 };
typedef struct em_memory_class {
  int64_t live_blocks, live_bytes;       /* storages alive now */
  int64_t cached_blocks, cached_bytes;   /* free blocks (ranges) the cache holds for reuse */
} em_memory_class;
typedef struct em_memory_census {
  em_memory_class classes[EM_MEMORY_CLASSES];
  int64_t largest_free;     /* bytes of the largest block the cache can hand out whole */
  int64_t segments;         /* Vulkan: slabs (VkDeviceMemory objects); CPU: 0 (malloc's) */
  int64_t segment_bytes;    /* their bytes */
} em_memory_census;
/* Fills out for the device: 0, or -1 with an error for a bad device. */
int em_memory_census_get(int device, em_memory_census *out);

/* History: while recording is on, each new storage enters a registry with the dtype and shape
 * of the tensor made with it and a site: an id the host's site function returns for "where
 * the program is now" (Lua's is an index into its table of tracebacks; 0 = unknown). The site
 * function is called on the thread that turned recording on, never on others (their entries
 * get site 0), and with no lock of the runtime held. An entry goes when its storage is freed,
 * also after recording stops. Off, recording costs one branch per allocation. */
typedef int32_t (*em_memory_site_fn)(void *userdata);
void em_memory_set_site_fn(em_memory_site_fn fn, void *userdata);
/* Turns recording on (1) or off (0) and returns the previous state. */
int em_memory_record_history(int on);
int em_memory_history_enabled(void);
typedef struct em_memory_block {
  int64_t id;               /* 1, 2, ... in the order the storages were made */
  int64_t bytes;
  int32_t device, dtype, ndim, site;
  int64_t sizes[EM_MAX_DIMS];
} em_memory_block;
/* Entries in the registry for a device (-1: every device). */
int64_t em_memory_history_count(int device);
/* Copies up to cap entries of the device (-1: every device) into out, in no particular order;
 * returns how many it copied. The caller owns out. */
int64_t em_memory_history_get(int device, em_memory_block *out, int64_t cap);
/* The id the next recorded storage will get: entries with a larger or equal id are newer. */
int64_t em_memory_history_next_id(void);

/* ---- lifetime ------------------------------------------------------------------------------ */
/* Adds a reference to t and returns t itself (the caller now owns one more). NULL gives NULL
 * (not an error). */
em_tensor *em_retain(em_tensor *t);
/* Drops one reference; the last one frees the header, and the storage once no view uses it.
 * NULL does nothing. */
void em_release(em_tensor *t);
int64_t em_numel(const em_tensor *t);
int em_is_contiguous(const em_tensor *t);
/* Pointer to element 0 of a CPU tensor (offset applied); NULL with an error on other devices.
 * Borrowed from t's storage: valid while t (or another view of its storage) lives. */
void *em_data_ptr(const em_tensor *t);
int64_t em_storage_version(const em_tensor *t);
int em_same_storage(const em_tensor *a, const em_tensor *b);

/* ---- creation ------------------------------------------------------------------------------ */
em_tensor *em_empty(int ndim, const int64_t *sizes, em_dtype dtype, int device);
/* A CPU tensor in pinned memory of `device`: host memory that device's copies read directly,
 * so a copy to it (x:to(device)) neither stages the data nor waits. The copy runs in order
 * with the device's queue: writing to the tensor before that is the caller's race, as with
 * PyTorch's non_blocking copies from pinned memory. An error for a device without pinned
 * memory (the CPU). */
em_tensor *em_empty_pinned(int ndim, const int64_t *sizes, em_dtype dtype, int device);
/* The device whose pinned memory holds t's data, or -1 for ordinary memory. */
int em_pinned_device(const em_tensor *t);
em_tensor *em_zeros(int ndim, const int64_t *sizes, em_dtype dtype, int device);
em_tensor *em_ones(int ndim, const int64_t *sizes, em_dtype dtype, int device);
em_tensor *em_full(int ndim, const int64_t *sizes, double value, em_dtype dtype, int device);
/* Copies ndim/sizes worth of contiguous elements of type `src_dtype` from host memory (data
 * stays the caller's; em_from_blob wraps it without a copy). */
em_tensor *em_from_buffer(const void *data, em_dtype src_dtype, int ndim, const int64_t *sizes,
                          em_dtype dtype, int device);
/* A CPU tensor over the caller's memory, without a copy (PyTorch's from_blob): element i of
 * dimension d lies at data + sum(i_d * strides[d]) elements. strides NULL means contiguous;
 * strides must be >= 0. Writes through the tensor (and its views) change the caller's
 * buffer, and the caller's writes show in the tensor. data must stay valid, aligned for the
 * dtype, until deleter(data, ctx) runs: exactly once, on the thread that drops the last
 * reference to the storage (the last view of it, Lua's included). deleter may be NULL when
 * the caller outlives every view by other means. Ownership passes at the call: when
 * em_from_blob fails (NULL with an error), it has already run deleter(data, ctx). The memory
 * counts in no em_memory_stats. Ops that need contiguous input copy a strided blob first. */
em_tensor *em_from_blob(void *data, em_dtype dtype, int ndim, const int64_t *sizes,
                        const int64_t *strides, void (*deleter)(void *data, void *ctx),
                        void *ctx);
/* A 0-dim tensor holding v. With wrapped != 0 it is a "wrapped number" (see the flags). */
em_tensor *em_scalar_tensor(double v, em_dtype dtype, int device, int wrapped);
em_tensor *em_arange(double start, double end, double step, em_dtype dtype, int device);
em_tensor *em_linspace(double start, double end, int64_t steps, em_dtype dtype, int device);
em_tensor *em_eye(int64_t n, int64_t m, em_dtype dtype, int device);

/* ---- random numbers (Philox-4x32-10; see docs/design.md) ----------------------------------- */
void em_manual_seed(uint64_t seed);
uint64_t em_initial_seed(void);
/* Either pointer may be NULL (that part is not read). */
void em_rng_get_state(uint64_t *seed, uint64_t *offset);
void em_rng_set_state(uint64_t seed, uint64_t offset);
em_tensor *em_rand(int ndim, const int64_t *sizes, em_dtype dtype, int device);
em_tensor *em_randn(int ndim, const int64_t *sizes, em_dtype dtype, int device);
em_tensor *em_randint(int64_t low, int64_t high, int ndim, const int64_t *sizes, em_dtype dtype,
                      int device);
em_tensor *em_randperm(int64_t n, em_dtype dtype, int device);
em_tensor *em_bernoulli(const em_tensor *p);                 /* each element 1 with prob p */
int em_uniform_(em_tensor *t, double low, double high);
int em_normal_(em_tensor *t, double mean, double std);
int em_bernoulli_(em_tensor *t, double p);
/* n draws per row of probs ([K] or [R, K] non-negative weights of any floating dtype, which
 * need not sum to 1): int64 0-based categories, [n] or [R, n], category i with probability
 * w[i] / sum(w). Without replacement (replacement == 0) a row's draws are distinct and n may
 * not exceed its count of nonzero weights. Negative, inf or NaN weights and all-zero rows are
 * errors; a GPU reports those found in the weights at its next synchronization. */
em_tensor *em_multinomial(const em_tensor *probs, int64_t n, int replacement);

/* ---- views (share storage, never copy) ----------------------------------------------------- */
em_tensor *em_as_strided(const em_tensor *t, int ndim, const int64_t *sizes,
                         const int64_t *strides, int64_t offset);
em_tensor *em_view(const em_tensor *t, int ndim, const int64_t *sizes);    /* one size may be -1 */
em_tensor *em_reshape(const em_tensor *t, int ndim, const int64_t *sizes); /* copies if it must */
em_tensor *em_narrow(const em_tensor *t, int dim, int64_t start, int64_t length);
em_tensor *em_select(const em_tensor *t, int dim, int64_t index);
em_tensor *em_slice(const em_tensor *t, int dim, int64_t start, int64_t end, int64_t step);
em_tensor *em_transpose(const em_tensor *t, int dim0, int dim1);
em_tensor *em_t(const em_tensor *t);
em_tensor *em_permute(const em_tensor *t, int ndim, const int *dims);
em_tensor *em_expand(const em_tensor *t, int ndim, const int64_t *sizes);  /* -1 keeps a size */
em_tensor *em_squeeze(const em_tensor *t, int dim);
em_tensor *em_squeeze_all(const em_tensor *t);
em_tensor *em_unsqueeze(const em_tensor *t, int dim);
em_tensor *em_unfold(const em_tensor *t, int dim, int64_t size, int64_t step);
em_tensor *em_flatten(const em_tensor *t, int start_dim, int end_dim);
em_tensor *em_contiguous(const em_tensor *t);   /* a new reference to t itself when contiguous */
em_tensor *em_clone(const em_tensor *t);

/* ---- copies and casts ---------------------------------------------------------------------- */
em_tensor *em_to_dtype(const em_tensor *t, em_dtype dtype);   /* always a new tensor */
em_tensor *em_to_device(const em_tensor *t, int device);
int em_copy_(em_tensor *dst, const em_tensor *src);           /* src broadcasts to dst, casts */
int em_fill_(em_tensor *t, double value);
int em_zero_(em_tensor *t);
/* Reads a one-element tensor (any dtype, any device). */
int em_item(const em_tensor *t, double *out);
int em_item_int64(const em_tensor *t, int64_t *out);
/* Asynchronous reads of a few bytes (GradScaler's inf/NaN flag): em_read_start records a copy
 * of t's data (contiguous, at most 256 bytes) to the host after the work already recorded, and
 * starts that work, without waiting; NULL on error. em_read_finish(r, dst, wait) copies the
 * data into dst and frees r (returns 1) once the device has finished it; before that it
 * returns 0 with wait = 0 (nothing waits: the caller asks again later), or with wait = 1 waits
 * (counted in em_device_info.host_waits) and returns 1. -1 on error (r freed). em_read_free
 * drops an unfinished read. On the CPU the data is copied at start. */
typedef struct em_read em_read;
/* The caller owns the em_read: em_read_finish (once it returns 1 or -1) or em_read_free frees
 * it. em_read_free(NULL) does nothing. */
em_read *em_read_start(const em_tensor *t);
int em_read_finish(em_read *r, void *dst, int wait);
void em_read_free(em_read *r);

/* ---- pointwise ----------------------------------------------------------------------------- */
typedef enum em_unary_op {
  EM_NEG, EM_ABS, EM_SIGN, EM_EXP, EM_LOG, EM_LOG1P, EM_EXPM1, EM_SQRT, EM_RSQRT,
  EM_SIN, EM_COS, EM_TAN, EM_TANH, EM_SIGMOID, EM_RELU, EM_GELU, EM_GELU_TANH, EM_SILU,
  EM_SOFTPLUS, EM_FLOOR, EM_CEIL, EM_ROUND, EM_TRUNC, EM_RECIPROCAL, EM_SQUARE, EM_ERF,
  EM_ISNAN, EM_ISINF, EM_ISFINITE, EM_LOGICAL_NOT, EM_BITWISE_NOT,
  /* inverse trigonometric and hyperbolic, logarithms and powers of 2 and 10, special functions */
  EM_ASIN, EM_ACOS, EM_ATAN, EM_SINH, EM_COSH, EM_ASINH, EM_ACOSH, EM_ATANH,
  EM_LOG2, EM_LOG10, EM_EXP2, EM_ERFC, EM_ERFINV, EM_LGAMMA, EM_DIGAMMA,
  EM_NUM_UNARY
} em_unary_op;

typedef enum em_binary_op {
  EM_ADD, EM_SUB, EM_MUL, EM_DIV, EM_FLOOR_DIVIDE, EM_POW, EM_FMOD, EM_REMAINDER,
  EM_MAXIMUM, EM_MINIMUM, EM_ATAN2,
  EM_EQ, EM_NE, EM_LT, EM_LE, EM_GT, EM_GE,
  EM_LOGICAL_AND, EM_LOGICAL_OR, EM_LOGICAL_XOR,
  EM_BITWISE_AND, EM_BITWISE_OR, EM_BITWISE_XOR, EM_LSHIFT, EM_RSHIFT,
  EM_NUM_BINARY
} em_binary_op;

/* "neg", "add", ...: static strings ("?" for an unknown op). */
const char *em_unary_name(em_unary_op op);
const char *em_binary_name(em_binary_op op);

em_tensor *em_unary(em_unary_op op, const em_tensor *x);
int em_unary_(em_unary_op op, em_tensor *x);
em_tensor *em_binary(em_binary_op op, const em_tensor *a, const em_tensor *b);
int em_binary_(em_binary_op op, em_tensor *a, const em_tensor *b);
/* Scalar operand: reversed == 0 computes `a op s`, reversed != 0 computes `s op a`. */
em_tensor *em_binary_scalar(em_binary_op op, const em_tensor *a, double s, int reversed);
int em_binary_scalar_(em_binary_op op, em_tensor *a, double s);
/* a + alpha * b (PyTorch's add with alpha; sub is alpha = -1). */
em_tensor *em_add_scaled(const em_tensor *a, const em_tensor *b, double alpha);
int em_add_scaled_(em_tensor *a, const em_tensor *b, double alpha);

/* Ternary ops. A scalar operand is passed as a wrapped-number tensor (em_scalar_tensor). */
em_tensor *em_where(const em_tensor *cond, const em_tensor *a, const em_tensor *b);
/* lo or hi may be NULL for "no bound". */
em_tensor *em_clamp(const em_tensor *x, const em_tensor *lo, const em_tensor *hi);
int em_clamp_(em_tensor *x, const em_tensor *lo, const em_tensor *hi);
em_tensor *em_lerp(const em_tensor *start, const em_tensor *end, const em_tensor *weight);
int em_lerp_(em_tensor *start, const em_tensor *end, const em_tensor *weight);
em_tensor *em_addcmul(const em_tensor *x, const em_tensor *t1, const em_tensor *t2, double value);
int em_addcmul_(em_tensor *x, const em_tensor *t1, const em_tensor *t2, double value);
em_tensor *em_addcdiv(const em_tensor *x, const em_tensor *t1, const em_tensor *t2, double value);
int em_addcdiv_(em_tensor *x, const em_tensor *t1, const em_tensor *t2, double value);

/* ---- reductions ---------------------------------------------------------------------------- */
typedef enum em_reduce_op {
  EM_SUM, EM_MEAN, EM_PROD, EM_AMAX, EM_AMIN, EM_ALL, EM_ANY, EM_LOGSUMEXP,
  EM_NUM_REDUCE
} em_reduce_op;

/* ndims == 0 reduces over every dimension. */
em_tensor *em_reduce(em_reduce_op op, const em_tensor *x, int ndims, const int *dims, int keepdim);
em_tensor *em_var(const em_tensor *x, int ndims, const int *dims, double correction, int keepdim);
em_tensor *em_std(const em_tensor *x, int ndims, const int *dims, double correction, int keepdim);
em_tensor *em_norm(const em_tensor *x, double p, int ndims, const int *dims, int keepdim);
/* Values and 0-based int64 indices along dim (new references in *values and *indices). */
int em_max_dim(const em_tensor *x, int dim, int keepdim, em_tensor **values, em_tensor **indices);
int em_min_dim(const em_tensor *x, int dim, int keepdim, em_tensor **values, em_tensor **indices);
/* dim may be EM_ALL_DIMS: the index into the flattened tensor. */
em_tensor *em_argmax(const em_tensor *x, int dim, int keepdim);
em_tensor *em_argmin(const em_tensor *x, int dim, int keepdim);
em_tensor *em_cumsum(const em_tensor *x, int dim);
em_tensor *em_cumprod(const em_tensor *x, int dim);
em_tensor *em_softmax(const em_tensor *x, int dim);
em_tensor *em_log_softmax(const em_tensor *x, int dim);

/* ---- linear algebra (OpenBLAS on the CPU) -------------------------------------------------- */
em_tensor *em_matmul(const em_tensor *a, const em_tensor *b);   /* NumPy batching rules */
em_tensor *em_mm(const em_tensor *a, const em_tensor *b);
em_tensor *em_mv(const em_tensor *a, const em_tensor *v);
em_tensor *em_bmm(const em_tensor *a, const em_tensor *b);
em_tensor *em_dot(const em_tensor *a, const em_tensor *b);
em_tensor *em_outer(const em_tensor *a, const em_tensor *b);
/* beta * c + alpha * (a @ b) */
em_tensor *em_addmm(const em_tensor *c, const em_tensor *a, const em_tensor *b, double beta,
                    double alpha);
em_tensor *em_baddbmm(const em_tensor *c, const em_tensor *a, const em_tensor *b, double beta,
                      double alpha);

/* ---- indexing ------------------------------------------------------------------------------ */
em_tensor *em_index_select(const em_tensor *x, int dim, const em_tensor *index);
em_tensor *em_gather(const em_tensor *x, int dim, const em_tensor *index);
em_tensor *em_scatter(const em_tensor *x, int dim, const em_tensor *index, const em_tensor *src);
int em_scatter_(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src);
em_tensor *em_scatter_add(const em_tensor *x, int dim, const em_tensor *index,
                          const em_tensor *src);
int em_scatter_add_(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src);
em_tensor *em_index_add(const em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                        double alpha);
int em_index_add_(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src,
                  double alpha);
em_tensor *em_index_copy(const em_tensor *x, int dim, const em_tensor *index,
                         const em_tensor *src);
int em_index_copy_(em_tensor *x, int dim, const em_tensor *index, const em_tensor *src);
em_tensor *em_index_fill(const em_tensor *x, int dim, const em_tensor *index, double value);
int em_index_fill_(em_tensor *x, int dim, const em_tensor *index, double value);
em_tensor *em_masked_fill(const em_tensor *x, const em_tensor *mask, double value);
int em_masked_fill_(em_tensor *x, const em_tensor *mask, double value);
em_tensor *em_masked_select(const em_tensor *x, const em_tensor *mask);
em_tensor *em_nonzero(const em_tensor *x);       /* [count, ndim] int64 */

/* ---- joining, reordering, sorting ---------------------------------------------------------- */
em_tensor *em_cat(int n, em_tensor *const *tensors, int dim);
em_tensor *em_stack(int n, em_tensor *const *tensors, int dim);
em_tensor *em_flip(const em_tensor *x, int ndims, const int *dims);
/* dims NULL: one shift of the flattened tensor, the shape kept (torch.roll without dims). */
em_tensor *em_roll(const em_tensor *x, int ndims, const int64_t *shifts, const int *dims);
em_tensor *em_repeat(const em_tensor *x, int ndim, const int64_t *repeats);
em_tensor *em_tril(const em_tensor *x, int64_t diagonal);
em_tensor *em_triu(const em_tensor *x, int64_t diagonal);
/* em_sort, em_topk: values and indices are new references; either out-slot may be NULL when
 * that result is not wanted. */
int em_sort(const em_tensor *x, int dim, int descending, em_tensor **values,
            em_tensor **indices);
em_tensor *em_argsort(const em_tensor *x, int dim, int descending);
int em_topk(const em_tensor *x, int64_t k, int dim, int largest, int sorted, em_tensor **values,
            em_tensor **indices);
/* Sorted unique values of the flattened input; inverse and counts may be NULL. */
int em_unique(const em_tensor *x, em_tensor **values, em_tensor **inverse, em_tensor **counts);

/* ---- autograd ----------------------------------------------------------------------------
 * A dynamic tape: while grad mode is on, every differentiable op whose inputs require grad
 * records a node holding its backward, written in terms of other ops. */
int em_requires_grad(const em_tensor *t);
/* Only leaves (tensors no recorded op produced) can change requires_grad. */
int em_set_requires_grad(em_tensor *t, int requires_grad);
int em_is_leaf(const em_tensor *t);
/* The accumulated gradient (a new reference), or NULL when there is none (not an error). */
em_tensor *em_grad(const em_tensor *t);
/* Replaces the gradient; NULL clears it. */
int em_set_grad(em_tensor *t, const em_tensor *grad);
/* Asks a non-leaf tensor to keep its gradient in .grad during backward. */
int em_retain_grad(em_tensor *t);
/* The name of the node that produced t ("MulBackward", ...), or NULL for leaves (no error
 * set; NULL t sets one). Borrowed from t's node: valid while t lives. */
const char *em_grad_fn_name(const em_tensor *t);
/* A tensor sharing t's storage, cut from the graph. */
em_tensor *em_detach(const em_tensor *t);
int em_detach_(em_tensor *t);
/* Grad mode (thread-local). Both return the previous mode. */
int em_grad_enabled(void);
int em_set_grad_enabled(int enabled);
/* Backpropagates from t. grad may be NULL when t has one element (it is then 1). Without
 * retain_graph the graph's saved tensors are freed, and a second backward through it fails. */
int em_backward(em_tensor *t, const em_tensor *grad, int retain_graph, int create_graph);
/* One backward from several tensors at once (PyTorch's autograd.backward): gradients meeting in
 * the graph are summed before they flow on. grads (or an entry) may be NULL as for em_backward. */
int em_backward_many(int n, em_tensor *const *tensors, em_tensor *const *grads,
                     int retain_graph, int create_graph);
/* Gradients of outputs with respect to inputs, returned in results (new references; NULL for
 * an input the outputs do not depend on when allow_unused, else an error). .grad is untouched.
 * grad_outputs (or an entry) may be NULL, as grads for em_backward_many. */
int em_autograd_grad(int n_outputs, em_tensor *const *outputs, em_tensor *const *grad_outputs,
                     int n_inputs, em_tensor *const *inputs, em_tensor **results,
                     int retain_graph, int create_graph, int allow_unused);
/* A hook sees each gradient computed for t (borrowed); it returns NULL to keep it, or a new
 * reference to use instead, which the engine then owns. Returns a hook id for em_remove_hook. */
typedef em_tensor *(*em_grad_hook)(em_tensor *grad, void *userdata);
int em_register_hook(em_tensor *t, em_grad_hook hook, void *userdata);
int em_remove_hook(em_tensor *t, int hook_id);

/* Custom functions: the caller computes outputs from inputs itself (with any ops, on any
 * device), then em_function_apply makes the outputs' gradients flow back to the inputs through
 * `backward` instead of through the ops that computed them.
 *
 * backward(ctx, n_outputs, grad_outputs, n_inputs, grad_inputs): grad_outputs[i] is the
 * gradient reaching output i (borrowed), or NULL when none did; the callback stores in
 * grad_inputs[j] (all NULL on entry) a new reference to input j's gradient, with the input's
 * shape, dtype and device, or leaves it NULL (no gradient, or the input needs none). It returns
 * 0, or -1 after em_set_error: the message then comes out of em_backward. It runs under
 * no_grad unless backward was asked to create_graph; it may call any op.
 *
 * inputs[j] and outputs[i] may be NULL (an argument that is not a tensor, an output that gets
 * no gradient); integer outputs get none either. Outputs become non-leaf tensors whose grad_fn
 * is "<name>Backward"; they must be distinct tensors, none of them an input or a leaf that
 * requires grad (pass a detach()ed view of an input to return it). Nothing is recorded when
 * grad mode is off or no input requires grad.
 *
 * em_function_apply owns ctx from the call on: release(ctx) (may be NULL) runs once, when the
 * node goes with its graph, after a backward through it without retain_graph (a second
 * backward is then an error), or at once when nothing was recorded or the call fails. */
typedef int (*em_function_backward)(void *ctx, int n_outputs, em_tensor *const *grad_outputs,
                                    int n_inputs, em_tensor **grad_inputs);
int em_function_apply(const char *name, int n_inputs, em_tensor *const *inputs, int n_outputs,
                      em_tensor *const *outputs, em_function_backward backward,
                      void (*release)(void *ctx), void *ctx);
/* A release for hosts that must not be called back at any moment (a garbage collector may free
 * a graph while the host cannot run code: LuaJIT): it queues ctx, and the host takes the queued
 * contexts when it can (thread-safe). Returns how many it stored in ctxs (at most cap). */
void em_function_release_later(void *ctx);  /* NULL does nothing */
int em_function_take_released(void **ctxs, int cap);

/* ---- autocast: mixed precision (runtime/src/autocast.c; docs/amp.md) ----------------------
 * Runtime state, like grad mode: a per-thread stack of regions. A region applies to one kind
 * of device, "cpu" or "vulkan" (a device name such as "vulkan:0" stands for its kind), and
 * the innermost region of a kind decides for the ops on that kind of device: with enabled != 0
 * they follow autocast's op table (matrix products and convolutions in dtype, float16 or
 * bfloat16; softmax, norms, sums, losses, exp/log/pow in float32; ops mixing dtypes in the
 * widest; others as they are), with enabled == 0 autocast is off inside (dtype must still be
 * float16 or bfloat16). Casts are recorded for autograd, so gradients reach float32 parameters
 * in float32. Backward runs with autocast off. Casts of float32 leaf tensors that require
 * grad are cached until the outermost region closes. */
int em_autocast_push(const char *device_kind, em_dtype dtype, int enabled);
/* Closes the innermost region; an error when none is open. */
int em_autocast_pop(void);
/* 1 when ops on this kind of device autocast now (*dtype, when not NULL, gets the dtype), 0
 * when they do not, -1 for an unknown kind. */
int em_autocast_enabled(const char *device_kind, em_dtype *dtype);
/* The number of regions open on this thread. */
int em_autocast_depth(void);
/* Backward suspends autocast (its formulas replay the forward's dtypes). A forward recomputed
 * inside backward (utils.checkpoint) sets the suspension count to 0 for its ops, and back to
 * the previous count, which this returns, afterwards. */
int em_autocast_set_suspended(int count);
/* Applies the table's entry for the op called op (PyTorch's name: "mse_loss", "linear", ...)
 * to n tensors, as the runtime's ops do at their entry: out[i] receives a new reference to
 * the tensor the op should use (a cast, or in[i] itself; NULL stays NULL). For ops composed
 * outside the runtime from other ops. An error for an op the table does not list, and inside
 * a region for an op autocast refuses (binary_cross_entropy). */
int em_autocast_inputs(const char *op, int n, em_tensor *const *in, em_tensor **out);

/* ---- neural-network ops --------------------------------------------------------------------
 * PyTorch's layouts: inputs are [N, C, H, W] (or [N, C, L] for 1-D; unbatched inputs without
 * N are accepted), convolution weights [out, in / groups, kh, kw], transposed-convolution
 * weights [in, out / groups, kh, kw]. Pair arguments (stride, padding, ...) are arrays of two
 * (height, width). Optional tensors (bias, weight, running statistics) may be NULL. Every op
 * records autograd; float16 / bfloat16 compute in float32. */
em_tensor *em_conv2d(const em_tensor *input, const em_tensor *weight, const em_tensor *bias,
                     const int64_t *stride, const int64_t *padding, const int64_t *dilation,
                     int64_t groups);
em_tensor *em_conv1d(const em_tensor *input, const em_tensor *weight, const em_tensor *bias,
                     int64_t stride, int64_t padding, int64_t dilation, int64_t groups);
em_tensor *em_conv_transpose2d(const em_tensor *input, const em_tensor *weight,
                               const em_tensor *bias, const int64_t *stride,
                               const int64_t *padding, const int64_t *output_padding,
                               const int64_t *dilation, int64_t groups);
em_tensor *em_conv_transpose1d(const em_tensor *input, const em_tensor *weight,
                               const em_tensor *bias, int64_t stride, int64_t padding,
                               int64_t output_padding, int64_t dilation, int64_t groups);
/* The gradient of conv2d with respect to a weight of weight_sizes (4 values). */
em_tensor *em_conv2d_weight(const em_tensor *input, const int64_t *weight_sizes,
                            const em_tensor *grad_output, const int64_t *stride,
                            const int64_t *padding, const int64_t *dilation, int64_t groups);

/* Pooling over [N, C, H, W] or [C, H, W]. stride NULL means the kernel size. indices, when not
 * NULL, receives int64 positions of the maxima within each input plane (h * W + w, 0-based). */
em_tensor *em_max_pool2d(const em_tensor *input, const int64_t *kernel, const int64_t *stride,
                         const int64_t *padding, const int64_t *dilation, int ceil_mode,
                         em_tensor **indices);
/* divisor_override <= 0: divide by the window size. */
em_tensor *em_avg_pool2d(const em_tensor *input, const int64_t *kernel, const int64_t *stride,
                         const int64_t *padding, int ceil_mode, int count_include_pad,
                         int64_t divisor_override);
em_tensor *em_adaptive_avg_pool2d(const em_tensor *input, const int64_t *output_size);
em_tensor *em_adaptive_max_pool2d(const em_tensor *input, const int64_t *output_size,
                                  em_tensor **indices);
/* The inverse of max_pool2d: input's values placed at indices in zeros of output_size (2). */
em_tensor *em_max_unpool2d(const em_tensor *input, const em_tensor *indices,
                           const int64_t *output_size);

/* Normalization. batch_norm in training mode normalizes with the batch's statistics and, when
 * given, updates running_mean / running_var in place (momentum; the unbiased variance, as
 * PyTorch); in evaluation mode it uses them. input is [N, C, ...]. */
em_tensor *em_batch_norm(const em_tensor *input, em_tensor *running_mean, em_tensor *running_var,
                         const em_tensor *weight, const em_tensor *bias, int training,
                         double momentum, double eps);
/* Over the trailing n_normalized dims, which must equal normalized_shape. */
em_tensor *em_layer_norm(const em_tensor *input, int n_normalized,
                         const int64_t *normalized_shape, const em_tensor *weight,
                         const em_tensor *bias, double eps);
em_tensor *em_group_norm(const em_tensor *input, int64_t num_groups, const em_tensor *weight,
                         const em_tensor *bias, double eps);

/* Zeroes each element with probability p (Philox stream, seedable) and scales the others by
 * 1 / (1 - p); returns a new reference to input itself when not training. */
em_tensor *em_dropout(const em_tensor *input, double p, int training);
/* Rows of weight [V, D] picked by int64 indices (any shape; 0-based): [..., D]. The row
 * padding_idx (when >= 0) gets no gradient. */
em_tensor *em_embedding(const em_tensor *weight, const em_tensor *indices, int64_t padding_idx);

/* Connectionist temporal classification loss (PyTorch's F.ctc_loss, reduction 'none'): per
 * batch element, -log p(target | log_probs), summed over the alignments with the alpha-beta
 * recursion in log space. log_probs [T, N, C] (float32 / float64), targets int64 0-based,
 * [N, S] padded or 1-D (every target concatenated), input_lengths / target_lengths int64 [N]
 * on the CPU. Returns [N]. zero_infinity: an impossible alignment gives a loss of 0 and a zero
 * gradient instead of inf. Differentiable in log_probs (the gradient is the derivative with
 * respect to log_probs; no double backward). CPU (in double) and Vulkan (float32 log_probs). */
em_tensor *em_ctc_loss(const em_tensor *log_probs, const em_tensor *targets,
                       const em_tensor *input_lengths, const em_tensor *target_lengths,
                       int64_t blank, int zero_infinity);

/* Scaled dot-product attention, PyTorch's F.scaled_dot_product_attention: softmax(q k^T * scale
 * + mask) v, fused (no [L, S] score matrix in memory). query [..., Hq, L, E], key
 * [..., Hkv, S, E], value [..., Hkv, S, Ev] (rank 3 or more: the dims before the heads are
 * batch dims and must agree; rank 3 is [N, L, E], every batch its own head) give
 * [..., Hq, L, Ev]. attn_mask (NULL, boolean: true takes part, or additive floating) broadcasts
 * to [..., Hq, L, S]; is_causal masks key j > query i (top-left aligned, as PyTorch; not with a
 * mask). dropout_p drops attention weights from the seeded generator. scale NaN means
 * 1 / sqrt(E). Hq != Hkv needs enable_gqa (grouped-query attention; Hq a multiple of Hkv).
 * Differentiable in q, k and v (not in a floating mask; no double backward). float16 /
 * bfloat16 compute in float32 where the device has no 16-bit kernel. */
em_tensor *em_scaled_dot_product_attention(const em_tensor *query, const em_tensor *key,
                                           const em_tensor *value, const em_tensor *attn_mask,
                                           double dropout_p, int is_causal, double scale,
                                           int enable_gqa);

/* Losses. */
typedef enum em_reduction { EM_REDUCTION_NONE, EM_REDUCTION_MEAN, EM_REDUCTION_SUM } em_reduction;
/* input: scores [N, C] or [N, C, d...] (or [C]); target: int64 classes [N] or [N, d...]
 * (0-based); weight: per-class weights [C] or NULL. Targets equal to ignore_index count for
 * nothing; the mean divides by the summed weights of the counted targets. */
em_tensor *em_cross_entropy(const em_tensor *input, const em_tensor *target,
                            const em_tensor *weight, int64_t ignore_index,
                            em_reduction reduction, double label_smoothing);
/* The same with log-probabilities as input (no softmax, no smoothing). */
em_tensor *em_nll_loss(const em_tensor *input, const em_tensor *target, const em_tensor *weight,
                       int64_t ignore_index, em_reduction reduction);

/* ---- data files and checkpoints (runtime/src/io) -------------------------------------------
 * Readers make CPU tensors and take plain or gzip-compressed files alike. Bad files are errors
 * that say what is wrong (wrong magic, truncation with the byte counts, absurd dimensions);
 * nothing is allocated from a header before it is checked against the file's size. Writers are
 * atomic: a temporary file in the same directory, fsync, rename; a failed or interrupted write
 * leaves the previous file intact. */
/* IDX (MNIST family): ubyte, byte, short, int, float, double -> uint8, int8, int16, int32,
 * float32, float64. */
em_tensor *em_read_idx(const char *path);
/* NPY versions 1.0-3.0; dtypes f2 f4 f8 i1 i2 i4 i8 u1 b1 in either byte order; Fortran-ordered
 * arrays come back row-major. */
em_tensor *em_read_npy(const char *path);
/* NPY 1.0 (2.0 for huge headers), little-endian; every dtype but bfloat16. */
int em_write_npy(const char *path, const em_tensor *t);
/* PNG (runtime/src/io/png.c): a uint8 image [H, W] (gray) or [H, W, C] with C = 1 (gray), 2 (gray
 * and alpha), 3 (RGB) or 4 (RGBA), any layout and device, as an 8-bit PNG file. The caller keeps
 * t. Converting other dtypes and [C, H, W] layouts is ember.image.save_png's work. */
int em_write_png(const char *path, const em_tensor *t);
/* A numeric CSV into a [rows, columns] tensor of dtype (floating or integer). delimiter ' '
 * splits on runs of blanks. skip_header != 0 drops the first non-blank line. */
em_tensor *em_read_csv(const char *path, char delimiter, int skip_header, em_dtype dtype);
/* The most bytes one gzip-compressed file may decompress to, for every reader (IDX, NPY, CSV):
 * a larger one is an error that names the limit, so a small hostile .gz cannot make a reader
 * allocate gigabytes. Process-wide; the default is 4 GiB. A limit below 1 is an error. */
int em_set_gzip_limit(int64_t max_bytes);
int64_t em_gzip_limit(void);

/* safetensors checkpoints. em_safetensors_open validates the whole header (shapes, dtypes,
 * byte ranges against the file size); tensors are then read one at a time, on demand. */
typedef struct em_safetensors em_safetensors;
/* The caller owns the handle and frees it with em_safetensors_close (NULL does nothing). */
em_safetensors *em_safetensors_open(const char *path);
void em_safetensors_close(em_safetensors *f);
int64_t em_safetensors_count(const em_safetensors *f);
/* Tensor i's name: borrowed from f, valid until em_safetensors_close(f). */
const char *em_safetensors_name(const em_safetensors *f, int64_t i);
/* The index of the tensor called name, or -1 (no error set). */
int64_t em_safetensors_find(const em_safetensors *f, const char *name);
/* Reads tensor i into a new CPU tensor. */
em_tensor *em_safetensors_tensor(const em_safetensors *f, int64_t i);
/* The __metadata__ entries (string keys and values): borrowed from f, valid until
 * em_safetensors_close(f). */
int64_t em_safetensors_metadata_count(const em_safetensors *f);
const char *em_safetensors_metadata_key(const em_safetensors *f, int64_t i);
const char *em_safetensors_metadata_value(const em_safetensors *f, int64_t i);
/* Writes n named tensors (any layout and device; stored contiguous and little-endian) and
 * n_meta metadata strings, atomically. Every array is borrowed (read during the call only). */
int em_safetensors_save(const char *path, int64_t n, const char *const *names,
                        em_tensor *const *tensors, int64_t n_meta, const char *const *keys,
                        const char *const *values);

/* Batch prefetching for data loaders: worker threads gather rows of the sources (CPU tensors
 * with the same first size; sample i is row i) into new batch tensors ahead of the consumer.
 * Batch b holds samples indices[b * batch_size ...] (0-based; the last batch may be short)
 * of every source. depth bounds how many batches are built ahead (<= 0: 2 * num_workers).
 * num_workers == 0 gathers on the caller's thread in em_prefetcher_next. pin_device >= 0
 * builds the batches in that device's pinned memory (em_empty_pinned); -1: ordinary memory. */
typedef struct em_prefetcher em_prefetcher;
/* The sources are retained (the caller may release its own references); the caller owns the
 * prefetcher and frees it with em_prefetcher_free (NULL does nothing). */
em_prefetcher *em_prefetcher_new(int n_sources, em_tensor *const *sources, int64_t n_indices,
                                 const int64_t *indices, int64_t batch_size, int num_workers,
                                 int depth, int pin_device);
int64_t em_prefetcher_num_batches(const em_prefetcher *p);
/* Puts the next batch's n_sources tensors (new references) in out: returns 1, 0 when every
 * batch was taken, -1 with an error (a worker's error is raised here, in order). */
int em_prefetcher_next(em_prefetcher *p, em_tensor **out);
/* Stops and joins the workers and releases batches not taken. */
void em_prefetcher_free(em_prefetcher *p);

/* ---- optimizer steps (ember.optim) ----------------------------------------------------------
 * One fused, in-place update of one parameter with PyTorch's formulas (torch.optim's
 * single-tensor SGD and Adam / AdamW; docs/api/optim.md). grad is read only and may have any
 * strides; the state tensors must have param's shape, dtype and device, and no tensor written
 * may share memory with another operand. These are not differentiable: call them with grad
 * mode off (ember.no_grad) when param requires grad. Version counters of the written tensors
 * are bumped. */
typedef struct em_sgd_options {
  double lr, momentum, dampening, weight_decay;
  int nesterov, maximize;
  int first_step;  /* momentum_buffer is new: it receives the gradient instead of a blend */
  /* NULL, or a float32 tensor of one element on param's device (GradScaler's inf/NaN flag,
   * em_amp_unscale_): when its value is nonzero at the time the step runs on the device, the
   * step changes nothing (param and momentum_buffer keep their values). Read on the device,
   * so recording a conditional step costs no host wait. */
  const em_tensor *found_inf;
} em_sgd_options;
typedef struct em_adam_options {
  double lr, beta1, beta2, eps, weight_decay;
  int64_t step;    /* this step's number, from 1 (the bias corrections use it) */
  int decoupled;   /* AdamW: decay the parameter, not the gradient */
  int maximize;
  const em_tensor *found_inf; /* as in em_sgd_options: nonzero leaves param and the state as
                               * they were */
} em_adam_options;
/* momentum_buffer may be NULL when momentum is 0. */
int em_sgd_step_(em_tensor *param, const em_tensor *grad, em_tensor *momentum_buffer,
                 const em_sgd_options *o);
/* max_exp_avg_sq is NULL, or the AMSGrad running maximum. */
int em_adam_step_(em_tensor *param, const em_tensor *grad, em_tensor *exp_avg,
                  em_tensor *exp_avg_sq, em_tensor *max_exp_avg_sq, const em_adam_options *o);

/* ---- mixed precision: loss-scaling support (ember.amp.GradScaler) ---------------------------
 * Multiplies each of the n gradients by inv_scale in place (inv_scale rounded to float32, as
 * PyTorch's scale tensor is) and sets found_inf, a float32 tensor of one element on their
 * device, to 1 if any element read was inf or NaN; it is left unchanged otherwise, so one flag
 * gathers several calls. One pass per gradient on the device, no host wait: the caller reads
 * found_inf once. Gradients may have different floating dtypes and any strides (no expanded,
 * stride-0 dimensions); zero-size ones are skipped. An inv_scale of exactly 1 only checks.
 * PyTorch's torch._amp_foreach_non_finite_check_and_unscale_. */
int em_amp_unscale_(em_tensor *const *grads, int n, em_tensor *found_inf, double inv_scale);

/* ---- devices: discovery, choice, start-up and synchronization (device.c, vulkan/) ---------
 * Device 0 is the CPU. Vulkan devices are discovered on first need (em_device_count,
 * em_device_info_get, or a name other than "cpu"), so CPU-only runs never load Vulkan, and a
 * machine without the Vulkan loader simply has no Vulkan devices. Names for em_device_parse:
 *   "cpu"; "vulkan:N" (the N-th Vulkan device, from 0); "vulkan" (the best Vulkan device:
 *   discrete, integrated, virtual, other, then CPU-type drivers such as lavapipe); "auto" (the
 *   best GPU, never a CPU-type driver, else the CPU).
 * A named device that cannot start is an error. When the GPU "auto" picks cannot start, auto
 * gives the CPU with one warning line on stderr, or an error in strict mode. docs/devices.md. */
typedef enum em_device_type {
  EM_DEVICE_CPU,               /* the host */
  EM_DEVICE_DISCRETE_GPU,
  EM_DEVICE_INTEGRATED_GPU,
  EM_DEVICE_VIRTUAL_GPU,
  EM_DEVICE_SOFTWARE_GPU,      /* a CPU-type Vulkan driver: lavapipe (llvmpipe), SwiftShader */
  EM_DEVICE_OTHER_GPU
} em_device_type;

/* Feature bits of em_device_info.features: what Ember's kernels can use on the device. */
enum {
  EM_FEATURE_FLOAT64 = 1,              /* 64-bit float arithmetic (Vulkan shaderFloat64) */
  EM_FEATURE_INT64 = 2,                /* 64-bit integer arithmetic (shaderInt64) */
  EM_FEATURE_FLOAT16 = 4,              /* 16-bit float arithmetic (shaderFloat16) */
  EM_FEATURE_STORAGE16 = 8,            /* 16-bit loads and stores (storageBuffer16BitAccess) */
  EM_FEATURE_INT8 = 16,                /* 8-bit arithmetic and storage */
  EM_FEATURE_COOPERATIVE_MATRIX = 32,  /* tensor cores (VK_KHR/NV_cooperative_matrix) */
  EM_FEATURE_BFLOAT16 = 64,            /* bfloat16 arithmetic (VK_KHR_shader_bfloat16) */
  EM_FEATURE_MEMORY_BUDGET = 128,      /* memory_budget is the driver's (VK_EXT_memory_budget) */
  EM_FEATURE_PUSH_DESCRIPTORS = 256    /* VK_KHR_push_descriptor */
};

typedef struct em_device_info {
  char name[32];            /* "cpu", "vulkan:0" */
  char description[256];    /* the driver's device name or the CPU model */
  char driver[128];         /* e.g. "Mesa 22.3.6 (llvmpipe)"; "" for the CPU */
  int32_t type;             /* em_device_type */
  int32_t started;          /* 1 once started, -1 when starting failed (see error), else 0 */
  uint32_t features;        /* EM_FEATURE_* bits */
  uint32_t subgroup_size;   /* 0 for the CPU */
  int64_t memory_total;     /* bytes: the largest device-local heap, or the CPU's RAM */
  int64_t memory_budget;    /* bytes this process may still use (VK_EXT_memory_budget, else
                               the heap size; available RAM on the CPU) */
  int64_t memory_usage;     /* bytes in use on the heap per the driver, or -1 when unknown */
  int64_t max_tensor_bytes; /* the largest storage one tensor may have (maxStorageBufferRange),
                               -1 for no device limit */
  int64_t validation_messages; /* messages of the Vulkan validation layer so far, or -1 when no
                                  layer reports to Ember (EMBER_VK_VALIDATION=1 enables one) */
  int64_t host_waits;       /* times the host has waited for the device's queued work (reads
                               such as item and copies to the CPU, synchronize, reuse of an
                               upload buffer); 0 for the CPU. Tests use it to show that an op
                               queues its work without waiting. */
  int64_t dispatches;       /* kernels the device has been given to run so far (compute
                               dispatches recorded; copies and fills not counted); 0 for the
                               CPU. Tests use it to show that a batched product is one kernel. */
  char error[256];          /* why the device could not start, or "" */
  char tensor_cores[1024];  /* Vulkan: the tensor-core kernels Ember uses once started, then the
                               cooperative-matrix shapes, types and scopes the device lists and
                               its coopmat2 features (docs/devices.md); "" without cooperative
                               matrices and for the CPU */
} em_device_info;

int em_device_info_get(int device, em_device_info *out);

/* ---- start-up and shutdown (runtime/src/lifecycle.c) ----------------------------------------
 * Nothing needs initializing: the CPU is ready at load, and devices start on first need
 * (above). em_init does that start-up now instead, so that its errors and its time come at a
 * known point: it applies EMBER_DEVICE / EMBER_STRICT_DEVICE (em_device_startup) and starts
 * the default device. 0, or -1 with the reason.
 *
 * em_shutdown waits for every started device's work, then releases the devices: Vulkan
 * devices and the instance are destroyed (their memory, pipelines and the cached pipeline
 * file are saved or freed), the CPU allocator's caches are freed, and the default device is
 * the CPU again. It refuses (-1, nothing released) while tensors on a Vulkan device, or CPU
 * tensors in a device's pinned memory, are alive: release them first. CPU tensors may stay
 * alive and keep working. After em_shutdown every function still works: the next call that
 * needs a device discovers and starts it again, as at the first start (em_shutdown then
 * em_init is a full restart). Call both while no other thread is using Ember. Calling
 * em_shutdown twice, or without any device started, is harmless. */
int em_init(void);
int em_shutdown(void);
/* Strict mode: when auto's GPU fails to start, raise instead of falling back to the CPU.
 * EMBER_STRICT_DEVICE=1 sets it at start-up. Both return the previous mode. */
int em_set_strict_device(int strict);
int em_strict_device(void);
/* Applies EMBER_STRICT_DEVICE and EMBER_DEVICE (cpu, auto, vulkan, vulkan:N) once: 0, or -1
 * when EMBER_DEVICE names no usable device (later calls return the same result and error).
 * em_default_device() runs it on first use and prints such an error as a warning. */
int em_device_startup(void);
/* Starts a device now (0, or -1 with the reason); creation functions start devices anyway. */
int em_device_start(int device);
/* Waits until the device has finished the work queued so far (device -1: every device).
 * Work is otherwise submitted in batches and waited for only when the host reads data. */
int em_synchronize(int device);
/* Starts the work recorded for the device (-1: every device) without waiting for it: a host
 * about to spend a while elsewhere (a garbage collection) lets the device run meanwhile. */
int em_flush(int device);

/* ---- matrix decompositions and solvers (ember.linalg) ---------------------------------------
 * LAPACK (Debian's OpenBLAS) on the CPU: float32 or float64 matrices [..., m, n], batched over
 * the leading dims, computed in float64 and rounded once. Other devices: "<name>: not
 * implemented on vulkan". They record no gradient: ember.linalg (Lua) defines the gradients
 * and calls them with grad mode off; on inputs that require grad with grad mode on they fail.
 * B of solve and lstsq is [..., rows, k] with A's batch dims (the Lua layer broadcasts). */
em_tensor *em_linalg_solve(const em_tensor *a, const em_tensor *b);   /* A X = B */
em_tensor *em_linalg_inv(const em_tensor *a);
em_tensor *em_linalg_det(const em_tensor *a);
int em_linalg_slogdet(const em_tensor *a, em_tensor **sign, em_tensor **logabsdet);
em_tensor *em_linalg_cholesky(const em_tensor *a, int upper);        /* A = L L^T (or U^T U) */
/* complete: Q [m, m] and R [m, n]; else Q [m, k], R [k, n], k = min(m, n). */
int em_linalg_qr(const em_tensor *a, int complete, em_tensor **q, em_tensor **r);
/* A = U diag(S) Vh, S descending; without compute_uv only S (u and vh may be NULL). */
int em_linalg_svd(const em_tensor *a, int full_matrices, int compute_uv, em_tensor **u,
                  em_tensor **s, em_tensor **vh);
/* Symmetric A (its lower triangle, or upper): eigenvalues W ascending, eigenvectors V as columns. */
int em_linalg_eigh(const em_tensor *a, int upper, int compute_v, em_tensor **w, em_tensor **v);
/* The least-squares solution X of A X = B; rcond < 0 takes eps(dtype) * max(m, n). */
em_tensor *em_linalg_lstsq(const em_tensor *a, const em_tensor *b, double rcond);

/* ---- profiler (ember.profiler; runtime/src/profiler) ----------------------------------------
 * Records every op's kernel call (named by the op: "add", "relu", "gemm", "sum" ...), every
 * backward node ("MulBackward"), and user ranges, per thread, with CLOCK_MONOTONIC times in
 * nanoseconds; optionally the input shapes, the bytes allocated and freed while each ran, and
 * the GPU time of each Vulkan dispatch from timestamp queries, charged to the op that recorded
 * it (docs/design.md, "GPU time attribution"). While stopped it costs one branch per op.
 * Start and stop between steps, while no other thread runs ops. The begin/end form for C:
 *
 *   em_profiler_options o = {.record_shapes = 1, .profile_memory = 1, .gpu = 1};
 *   em_profiler_start(&o);
 *   em_profiler_range_push("step"); ... ops ...; em_profiler_range_pop();
 *   em_profiler_stop();
 *   for (int64_t i = 0; i < em_profiler_event_count(); i++) { em_profiler_event e;
 *     em_profiler_event_get(i, &e); ... } */
typedef struct em_profiler_options {
  int record_shapes;   /* input shapes and dtypes of each op */
  int profile_memory;  /* bytes allocated and freed while each event ran */
  int gpu;             /* Vulkan timestamps after each dispatch (no added barrier) */
} em_profiler_options;

typedef enum em_profiler_kind {
  EM_PROFILER_OP = 0,      /* a kernel call of an op, on the CPU thread that made it */
  EM_PROFILER_RANGE = 1,   /* a user range, a module call, a backward node */
  EM_PROFILER_KERNEL = 2   /* a GPU dispatch's interval on its device */
} em_profiler_kind;

/* One recorded event. The strings belong to the profiler and stay valid until the process
 * ends. Indices refer to em_profiler_event_get's numbering; events of one thread come in the
 * order they began, threads one after another, then the GPU kernels. */
typedef struct em_profiler_event {
  const char *name;
  const char *shapes;     /* "[3,4] float32, [4] float32"; NULL unless record_shapes */
  const char *site;       /* the caller's "file:line" (em_profiler_set_site), or NULL */
  int32_t kind;           /* em_profiler_kind */
  int32_t device;         /* the op's or kernel's device; -1 for ranges */
  int32_t thread;         /* 0, 1, ... in the order threads first recorded; -1 for kernels */
  int32_t depth;          /* nesting on its thread, 0 at the top */
  int64_t parent;         /* index of the enclosing event, -1 at the top */
  int64_t op;             /* kernels: index of the event that recorded the dispatch, or -1 */
  int64_t start_ns, end_ns;
  int64_t self_ns;        /* end - start less the children's time */
  int64_t alloc_bytes, free_bytes;            /* host (cpu) memory while it ran, children
                                               * included */
  int64_t self_alloc_bytes, self_free_bytes;  /* its own */
  int64_t device_alloc_bytes, device_free_bytes;            /* the same for other devices' */
  int64_t self_device_alloc_bytes, self_device_free_bytes;  /* memory (vulkan:0 ...) */
  int64_t gpu_ns;         /* GPU time of the kernels it and its children recorded */
  int64_t self_gpu_ns;    /* of the kernels it recorded itself; kernels: end - start */
} em_profiler_event;

/* options may be NULL (CPU times only). Fails when already running. Clears the last profile. */
int em_profiler_start(const em_profiler_options *options);
/* Waits for the timed GPU work of the profile, then stops. Fails when not running. */
int em_profiler_stop(void);
int em_profiler_enabled(void);
/* A named range on this thread (copied); ranges nest with the ops inside them. No-ops while
 * stopped. pop fails when no range is open. */
int em_profiler_range_push(const char *name);
int em_profiler_range_pop(void);
/* The call site later events of this thread carry (copied; NULL or "" clears it). The Lua
 * layer sets it with with_stack. No-op while stopped. */
int em_profiler_set_site(const char *site);
/* The last profile's events (after stop; -1 with an error while running). */
int64_t em_profiler_event_count(void);
/* Fills *out with event i (0-based); -1 with an error when out of range or running. */
int em_profiler_event_get(int64_t i, em_profiler_event *out);
/* Events lost to full buffers in the last profile. */
int64_t em_profiler_dropped(void);
/* Writes the last profile as Chrome trace JSON (Perfetto, chrome://tracing): a host track per
 * thread, a track per GPU, flow arrows from ops to their kernels (docs/api/profiler.md).
 * Written atomically; -1 with an error naming path when it cannot be. */
int em_profiler_export_chrome_trace(const char *path);

/* ---- quantized blocks (runtime/src/quant) --------------------------------------------------
 * Raw block formats: the ggml/GGUF layouts Q8_0, Q4_0, Q4_1 (32 weights), Q4_K, Q6_K (256),
 * and Ember's affine per-group formats (group 32/64/128, symmetric or with a minimum; layout in
 * docs/design.md). `group` and `symmetric` matter to the affine formats only. The caller owns
 * both buffers: dst must hold n / block_elems * block_bytes bytes (quantize) or n floats
 * (dequantize); n is a multiple of block_elems. Return 0, or -1 with the error set (unknown
 * format, bad group, n not whole blocks, a NaN or inf weight). */
typedef enum {
  EM_QUANT_Q8_0 = 0, EM_QUANT_Q4_0 = 1, EM_QUANT_Q4_1 = 2, EM_QUANT_Q4_K = 3, EM_QUANT_Q6_K = 4,
  EM_QUANT_AFFINE8 = 5, EM_QUANT_AFFINE4 = 6
} em_quant_format;
int em_quant_block_size(int format, int64_t group, int symmetric, int64_t *block_elems,
                        int64_t *block_bytes);
int em_quant_quantize(int format, int64_t group, int symmetric, const float *src, int64_t n,
                      void *dst);
int em_quant_dequantize(int format, int64_t group, int symmetric, const void *src, int64_t n,
                        float *dst);
/* The same on a device: blocks (contiguous uint8, whole blocks) into out (contiguous float32,
 * its numel the weights, on the blocks' device; the caller owns both). CPU: every format;
 * Vulkan: every format too. 0, or -1 with the error set. */
int em_quant_dequantize_tensor(const em_tensor *blocks, int format, int64_t group,
                               int symmetric, em_tensor *out);
/* out[m, n] = sum_k x[m, k] W[n, k] for a Q8_0, Q4_0, Q4_1, Q4_K or Q6_K weight W [N, K] held as
 * blocks (N rows of K / block weights), activations quantized to int8 per 32 (float scale),
 * int32 dot products (AVX-512 VNNI where the CPU has it; EMBER_QUANT_CPU=vnni|avx2|portable
 * forces a path). x [M, K], out [M, N]: contiguous float32, caller-owned. The affine formats
 * need em_quant_linear_grouped (EM_ERR_NOT_IMPLEMENTED here); on a Vulkan device see
 * em_quant_linear_grouped. 0, or -1 with the error set. */
int em_quant_linear(const em_tensor *x, const em_tensor *blocks, int format, em_tensor *out);
/* em_quant_linear with the affine formats' group and symmetric (as em_quant_dequantize; ignored
 * by the other formats). On a Vulkan device (x, blocks and out on one): every format; x and out
 * float32, float16 or bfloat16 (16-bit ones go through float32 copies); m <= 8 rows take a
 * matrix-vector kernel (Q8_0, Q4_0, Q4_K and Q6_K through packed int8 dot products where the
 * device has them: x then quantized to int8 per 32 as on the CPU), larger m a tiled kernel
 * dequantizing into shared memory (float16 tensor cores where present), float32 accumulation
 * (docs/devices.md). On the CPU: em_quant_linear's kernels, the affine formats included. 0, or
 * -1 with the error set. */
int em_quant_linear_grouped(const em_tensor *x, const em_tensor *blocks, int format,
                                   int64_t group, int symmetric, em_tensor *out);

/* ---- quantized tensors: block dtypes as ops (runtime/src/ops/quant.c) ----------------------
 * The results are new tensors the caller owns (NULL with the error set). None records
 * autograd. A device without the kernel, or a format its kernel lacks, fails with
 * EM_ERR_NOT_IMPLEMENTED ("<op>: not implemented on <device>"); nothing moves to the CPU.
 * em_quantize: x (floating, [..., K], K a multiple of the block's weights, finite) into the
 * block dtype dtype, [..., K / block_elems], on x's device (CPU only today).
 * em_dequantize: q (a block dtype) into dtype (floating) [..., blocks * block_elems].
 * em_linear_quantized: x [..., K] (floating) times w^T, w [N, K / block_elems] of a block dtype,
 * plus bias [N] (or NULL): [..., N] in x's dtype (float32 arithmetic), without a dense weight.
 * em_view_dtype: t's bytes as another dtype (no copy; PyTorch's Tensor.view(dtype)): the last
 * dimension (stride 1) is reinterpreted, its bytes, offset and other strides must be whole
 * elements of dtype; a new view, not differentiable. */
em_tensor *em_quantize(const em_tensor *x, em_dtype dtype);
em_tensor *em_dequantize(const em_tensor *q, em_dtype dtype);
em_tensor *em_linear_quantized(const em_tensor *x, const em_tensor *w, const em_tensor *bias);
em_tensor *em_view_dtype(const em_tensor *t, em_dtype dtype);

/* ---- GGUF files (runtime/src/io/gguf.c) ----------------------------------------------------
 * em_gguf_open maps and checks a GGUF v2/v3 file (magic, version, types, every length and
 * offset against the file size); NULL with the error set on any fault. The handle owns the map:
 * every pointer below lives until em_gguf_close. Indices i, j are 0-based and must lie below
 * the counts. Metadata types are GGUF's (0 uint8 ... 8 string, 9 array, 10 uint64, 11 int64,
 * 12 float64); em_gguf_kv_value points at element j's little-endian bytes (a string: its
 * characters, *len bytes, not NUL-terminated). Tensor dims are GGUF's order (dims[0] fastest);
 * offset is from the file's start, nbytes the tensor's bytes, type the ggml type. */
typedef struct em_gguf em_gguf;
em_gguf *em_gguf_open(const char *path);
void em_gguf_close(em_gguf *g);
int64_t em_gguf_version(const em_gguf *g);
int64_t em_gguf_kv_count(const em_gguf *g);
int64_t em_gguf_tensor_count(const em_gguf *g);
const void *em_gguf_data(const em_gguf *g);
const char *em_gguf_kv_key(const em_gguf *g, int64_t i, int64_t *len);
int em_gguf_kv_type(const em_gguf *g, int64_t i, int *elem_type, int64_t *len);
const void *em_gguf_kv_value(const em_gguf *g, int64_t i, int64_t j, int64_t *len);
const char *em_gguf_tensor_info(const em_gguf *g, int64_t i, int *type, int *ndim,
                                int64_t *dims, int64_t *offset, int64_t *nbytes);

/* ---- diagnostics: what `ember doctor` reports (diagnostics.c, cpu/plan.c, vulkan/vk_plan.c) -----
 * Both fill a struct the caller owns; strings are NUL-terminated, cut with "..." when too long.
 * docs/devices.md, "Diagnostics", lists the values. */
typedef struct em_runtime_info {
  char version[32];         /* EMBER_VERSION */
  char shader_builds[256];  /* the optional kernel builds compiled into this library, space-
                               separated: coopmat-nv, coopmat-khr (tensor-core kernels),
                               coopmat2, coopmat2-bf16, glsl-bf16, int-dot; "" for the plain
                               kernels only */
  char glslang[64];         /* the glslangValidator version that compiled the kernels */
  char blas_config[256];    /* openblas_get_config(): OpenBLAS's version and build options */
  char blas_core[64];       /* openblas_get_corename(): the CPU kernels OpenBLAS chose */
  int32_t blas_threads;     /* openblas_get_num_threads() */
  int32_t threads;          /* em_get_num_threads(): Ember's OpenMP loops */
  int32_t cpu_cores;        /* processors online */
  char vulkan_note[256];    /* why Vulkan discovery found no device ("the Vulkan loader
                               libvulkan.so.1 could not be loaded", ...), or "" */
} em_runtime_info;
/* Runs device discovery first (as em_device_count does). */
int em_runtime_info_get(em_runtime_info *out);

typedef struct em_device_plan {
  char kernels[768];        /* the kernels Ember picks on the device now, "key=value" pairs
                               separated by "; ", e.g. "matmul.float32=tiled;
                               matmul.float16=coopmat-cm2; ...; pipelines=specialized". The
                               tensor-core choices are made when a Vulkan device starts: before,
                               they read as the plain kernels and "started=no" is listed */
  char pipeline_cache[512]; /* Vulkan: the pipeline cache file the device reads and writes; ""
                               for the CPU or when no cache folder is known */
} em_device_plan;
int em_device_plan_get(int device, em_device_plan *out);

/* ---- distributed: collectives over MPI (runtime/src/distributed/, docs/distributed.md) ----
 * Open MPI is loaded at run time (dlopen of $EMBER_MPI_LIB, else libmpi.so.40, libmpi.so, then
 * <prefix>/lib/libmpi.so.40 beside the mpirun on PATH); a build without mpi.h has the
 * functions, and em_dist_init says what to install.
 * Ranks are 0-based, as in MPI. Every collective is asynchronous: it checks its arguments,
 * stages the data and returns a work handle at once; a communication thread runs the MPI calls
 * in the order they were issued; em_dist_wait finishes the work (writes the result into the
 * tensor). Every rank must issue the same collectives in the same order with tensors of the
 * same shape and dtype. Until em_dist_wait returns, the tensors given must not be written
 * (nor, for in-place collectives, read). CPU tensors are used in place when contiguous (else
 * through a contiguous copy); device tensors are staged through the device's pinned memory,
 * in chunks, so that the copy of one chunk overlaps the transfer of the one before. */
typedef enum em_dist_op { EM_DIST_SUM, EM_DIST_AVG, EM_DIST_MAX, EM_DIST_MIN } em_dist_op;
typedef struct em_dist_work em_dist_work;
/* 1 when this library was built with MPI's headers (em_dist_init can work), else 0. */
int em_dist_available(void);
/* Loads MPI, starts the communication thread and initializes MPI on it; timeout_s (> 0) is
 * how long one MPI call may take before waits fail instead of hanging (a peer died). 0, or -1
 * with the reason (MPI not built in or not loadable, already initialized, MPI's error). */
int em_dist_init(double timeout_s);
int em_dist_is_initialized(void);
/* This process's rank in the world, the world's size, the rank among the processes on this
 * host (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK): -1 with an error before em_dist_init. */
int em_dist_rank(void);
int em_dist_world_size(void);
int em_dist_local_rank(void);
/* Waits for the queued work, finalizes MPI and stops the thread: 0, or -1 (not initialized, or
 * a collective timed out: MPI cannot be finalized then; em_dist_abort ends the job). After it,
 * em_dist_init cannot be called again (MPI allows one initialization per process). */
int em_dist_finalize(void);
/* Ends every process of the job with the status code (MPI_Abort); returns only when
 * distributed is not initialized. */
void em_dist_abort(int code);
/* t is reduced across ranks in place, elementwise. op: sum and avg for numeric dtypes
 * (avg: floating dtypes only), max and min for every dtype, bool included; float16 and bfloat16
 * add in float32 and round each partial sum. Returns a new work handle (the caller frees it
 * with em_dist_work_free), or NULL with an error; t is retained until the handle is freed. */
em_dist_work *em_dist_all_reduce(em_tensor *t, em_dist_op op);
/* root's t is copied into t on every rank (root in 0 .. world_size-1). */
em_dist_work *em_dist_broadcast(em_tensor *t, int root);
/* out[r] = rank r's t: out has t's dtype and device and sizes [world_size, t's sizes...]. */
em_dist_work *em_dist_all_gather(const em_tensor *t, em_tensor *out);
/* The reduction of every rank's t, split along its first dimension into world_size equal
 * parts: out gets part `rank` (out: t's dtype and device, sizes [t:size(1)/world_size, ...]).
 * t's first dimension must divide evenly. */
em_dist_work *em_dist_reduce_scatter(const em_tensor *t, em_tensor *out, em_dist_op op);
/* Returns once every rank has reached it (when its handle is waited for). */
em_dist_work *em_dist_barrier(void);
/* Waits for the work and writes its result into the tensors: 0, or -1 with the error (the
 * collective's MPI error, or a timeout). Waiting again returns the same result at once. */
int em_dist_wait(em_dist_work *w);
/* 1 when the transfer is done (em_dist_wait will not block on the network), else 0 (also
 * for NULL); never blocks. */
int em_dist_is_completed(const em_dist_work *w);
/* Frees the handle, first waiting for its transfer when still running (its buffers are in
 * use). NULL does nothing. */
void em_dist_work_free(em_dist_work *w);

]==]
