/*
 * autocast.c: autocast's runtime state and the casts it makes.
 *
 * Each thread has a stack of regions (em_autocast_push / em_autocast_pop). A region applies
 * to one kind of device, "cpu" or "vulkan", and either enables autocast for that kind with a
 * 16-bit dtype or disables it; the innermost region of a kind decides for that kind, so a
 * disabled region nested in an enabled one turns autocast off inside it, and a region for
 * "cpu" leaves ops on Vulkan devices alone. The op definitions read the result through one
 * thread-local word, em_autocast_on (autocast.h), and apply ops/autocast_policy.c's table.
 *
 * Casts are recorded to_dtype calls: autograd sees them, and the gradient of a float32
 * parameter comes back in float32. Casts of float32 leaf tensors that require grad (the
 * parameters) to the 16-bit dtype are cached, as PyTorch's autocast does, so a weight used by
 * several ops in one forward pass is cast once; the cache holds its tensors until the
 * outermost region closes, and an entry is dropped when its tensor was written since (its
 * storage version changed).
 */
#include <stdlib.h>

#include "autocast.h"
#include "autograd/autograd.h"
#include "backend.h"

enum { KIND_CPU, KIND_VULKAN, NUM_KINDS, MAX_DEPTH = 64 };
static const char *const kind_names[NUM_KINDS] = {"cpu", "vulkan"};

typedef struct frame {
  uint8_t kind, dtype, enabled;
} frame;

typedef struct cached {
  em_tensor *src, *cast;  /* both held */
  int64_t version;        /* src's storage version when cast */
} cached;

_Thread_local __attribute__((tls_model("initial-exec"))) uint32_t em_autocast_on;

static _Thread_local frame stack[MAX_DEPTH];
static _Thread_local int depth, suspended;
static _Thread_local uint32_t enabled_bits;           /* bit k: kind k autocasts */
static _Thread_local uint8_t kind_dtype[NUM_KINDS];
static _Thread_local cached *cache;
static _Thread_local int n_cached, cap_cached;

/* ---- state ---------------------------------------------------------------------------------- */

/* Recomputes the per-kind state from the stack: the innermost region of a kind decides. */
static void refresh(void) {
  uint32_t seen = 0, bits = 0;
  for (int i = depth - 1; i >= 0; i--) {
    uint32_t k = 1u << stack[i].kind;
    if (seen & k) continue;
    seen |= k;
    if (stack[i].enabled) {
      bits |= k;
      kind_dtype[stack[i].kind] = stack[i].dtype;
    }
  }
  enabled_bits = bits;
  em_autocast_on = suspended ? 0 : bits;
}

void em_autocast_suspend(void) {
  suspended++;
  em_autocast_on = 0;
}

void em_autocast_resume(void) {
  if (suspended > 0) suspended--;
  em_autocast_on = suspended ? 0 : enabled_bits;
}

int em_autocast_set_suspended(int count) {
  int previous = suspended;
  suspended = count > 0 ? count : 0;
  em_autocast_on = suspended ? 0 : enabled_bits;
  return previous;
}

static void clear_cache(void) {
  for (int i = 0; i < n_cached; i++) {
    em_release(cache[i].src);
    em_release(cache[i].cast);
  }
  free(cache);
  cache = NULL;
  n_cached = cap_cached = 0;
}

/* "cpu", "vulkan", or a device name of the kind ("vulkan:0"): the kind's index, else -1. */
static int parse_kind(const char *name) {
  if (name == NULL) return -1;
  for (int k = 0; k < NUM_KINDS; k++) {
    size_t n = strlen(kind_names[k]);
    if (strncmp(name, kind_names[k], n) != 0) continue;
    if (name[n] == '\0') return k;
    if (name[n] != ':' || name[n + 1] == '\0') return -1;
    for (const char *p = name + n + 1; *p; p++)
      if (*p < '0' || *p > '9') return -1;
    return k;
  }
  return -1;
}

static int bad_kind(const char *fn, const char *name) {
  return em_error("%s: expected device 'cpu' or 'vulkan' (a kind of device, or a device name "
                  "such as 'vulkan:0'), got %s%s%s", fn, name ? "'" : "",
                  name ? name : "NULL", name ? "'" : "");
}

int em_autocast_push(const char *device_kind, em_dtype dtype, int enabled) {
  const char *fn = "autocast";
  int kind = parse_kind(device_kind);
  if (kind < 0) return bad_kind(fn, device_kind);
  if (dtype != EM_FLOAT16 && dtype != EM_BFLOAT16)
    return em_error("%s: expected dtype float16 or bfloat16 for device '%s', got %s", fn,
                    kind_names[kind], em_dtype_name(dtype));
  if (!em_autocast_table_sorted()) /* 50 comparisons; pushes are rare */
    return em_error("%s: internal error: the op table is not sorted by name", fn);
  if (depth == MAX_DEPTH)
    return em_error("%s: regions nested deeper than %d (is a region left open in a loop?)", fn,
                    MAX_DEPTH);
  stack[depth++] = (frame){(uint8_t)kind, (uint8_t)dtype, (uint8_t)(enabled != 0)};
  refresh();
  return 0;
}

int em_autocast_pop(void) {
  if (depth == 0) return em_error("autocast_exit: no autocast region is open");
  depth--;
  refresh();
  if (depth == 0) clear_cache();
  return 0;
}

int em_autocast_enabled(const char *device_kind, em_dtype *dtype) {
  int kind = parse_kind(device_kind);
  if (kind < 0) return bad_kind("autocast_enabled", device_kind);
  int on = (enabled_bits >> kind) & 1u;
  if (on && dtype) *dtype = (em_dtype)kind_dtype[kind];
  return on;
}

int em_autocast_depth(void) { return depth; }

/* ---- casts ---------------------------------------------------------------------------------- */

static int kind_of_device(int device) {
  if (device == EM_CPU) return KIND_CPU;
  const em_backend *be = em_device_backend(device);
  return be && strncmp(be->name, "vulkan", 6) == 0 ? KIND_VULKAN : -1;
}

/* Whether autocast may cast t for an op on a device of `kind`: a floating tensor other than
 * float64 on that kind of device (PyTorch's rule); host numbers (wrapped) are left alone. */
static bool eligible(const em_tensor *t, int kind) {
  return t != NULL && !em_is_wrapped(t) && em_dtypes[t->dtype_id].is_float &&
         t->dtype_id != EM_FLOAT64 && kind_of_device(t->device_id) == kind;
}

/* The kind of device an op runs on: its first tensor operand's. */
static int op_kind(int n, const em_tensor *const *in) {
  for (int i = 0; i < n; i++)
    if (in[i] != NULL && !em_is_wrapped(in[i])) return kind_of_device(in[i]->device_id);
  return -1;
}

static bool cacheable(const em_tensor *t, em_dtype to) {
  const em_grad_meta *m = t->grad_meta;
  return to != EM_FLOAT32 && t->dtype_id == EM_FLOAT32 && m != NULL && m->requires_grad &&
         m->grad_fn == NULL && em_grad_enabled();
}

static em_tensor *cached_cast(const em_tensor *t, em_dtype to) {
  int64_t version = em_storage_version(t);
  for (int i = 0; i < n_cached; i++) {
    if (cache[i].src != t || cache[i].cast->dtype_id != (int32_t)to) continue;
    if (cache[i].version == version) return em_retain(cache[i].cast);
    em_release(cache[i].cast); /* written since: cast again */
    cache[i].cast = NULL;
    if ((cache[i].cast = em_to_dtype(t, to)) == NULL) {
      em_release(cache[i].src);
      cache[i] = cache[--n_cached];
      return NULL;
    }
    cache[i].version = version;
    return em_retain(cache[i].cast);
  }
  em_tensor *c = em_to_dtype(t, to);
  if (c == NULL) return NULL;
  if (n_cached == cap_cached) { /* a failed growth only skips the caching */
    int cap = cap_cached ? 2 * cap_cached : 16;
    cached *grown = realloc(cache, sizeof *cache * (size_t)cap);
    if (grown == NULL) return c;
    cache = grown;
    cap_cached = cap;
  }
  cache[n_cached++] = (cached){em_retain((em_tensor *)t), em_retain(c), version};
  return c;
}

static em_tensor *cast_to(const em_tensor *t, em_dtype to) {
  if (t->dtype_id == (int32_t)to) return em_retain((em_tensor *)t);
  return cacheable(t, to) ? cached_cast(t, to) : em_to_dtype(t, to);
}

/* The dtype policy `pol` gives the eligible operands of an op on a device of `kind`. */
static em_dtype target_dtype(em_ac_policy pol, int kind, int n, const em_tensor *const *in) {
  em_dtype low = (em_dtype)kind_dtype[kind];
  if (pol == EM_AC_FP32) return EM_FLOAT32;
  if (pol == EM_AC_LOWER) return low;
  em_dtype widest = low; /* promote: float32 wins over 16 bits, two 16-bit kinds give float32 */
  for (int i = 0; i < n; i++)
    if (eligible(in[i], kind)) widest = em_promote_types(widest, (em_dtype)in[i]->dtype_id);
  return widest;
}

/* Fills out[0..n) for op fn under policy pol (not NONE) on a kind that autocasts. */
static int cast_operands(const char *fn, em_ac_policy pol, int kind, int n,
                         const em_tensor *const *in, em_tensor **out) {
  if (pol == EM_AC_BANNED) {
    const char *why = em_autocast_ban_reason(fn);
    return em_error("%s: unsafe to autocast%s%s", fn, why ? "; " : "", why ? why : "");
  }
  em_dtype to = target_dtype(pol, kind, n, in);
  for (int i = 0; i < n; i++) {
    int same = -1; /* an operand given twice (x * x) is cast once */
    for (int j = 0; j < i && same < 0; j++)
      if (in[j] == in[i]) same = j;
    if (same >= 0)
      out[i] = out[same] ? em_retain(out[same]) : NULL;
    else if (in[i] == NULL || !eligible(in[i], kind))
      out[i] = in[i] ? em_retain((em_tensor *)in[i]) : NULL;
    else if ((out[i] = cast_to(in[i], to)) == NULL) {
      for (int j = 0; j < i; j++) em_release(out[j]);
      em_error_prefix(fn);
      return -1;
    }
  }
  return 0;
}

int em_autocast_begin(const char *fn, int n, const em_tensor *const *in, em_tensor **ac) {
  em_ac_policy pol = em_autocast_policy_of(fn, NULL);
  if (pol == EM_AC_NONE) return 0;
  int kind = op_kind(n, in);
  if (kind < 0 || !((em_autocast_on >> kind) & 1u)) return 0;
  if (cast_operands(fn, pol, kind, n, in, ac) != 0) return -1;
  em_autocast_suspend();
  return 1;
}

void em_autocast_end(int n, em_tensor **ac) {
  for (int i = 0; i < n; i++) em_release(ac[i]);
  em_autocast_resume();
}

int em_autocast_inputs(const char *op, int n, em_tensor *const *in, em_tensor **out) {
  const char *fn = "autocast_inputs";
  if (op == NULL || n < 0 || (n > 0 && (in == NULL || out == NULL)))
    return em_error("%s: expected an op name and %d tensors, got NULL", fn, n);
  bool found;
  em_ac_policy pol = em_autocast_policy_of(op, &found);
  if (!found) return em_error("%s: '%s' is not in autocast's op table", fn, op);
  int kind = op_kind(n, (const em_tensor *const *)in);
  if (kind >= 0 && ((em_autocast_on >> kind) & 1u))
    return cast_operands(op, pol, kind, n, (const em_tensor *const *)in, out);
  for (int i = 0; i < n; i++) out[i] = in[i] ? em_retain(in[i]) : NULL;
  return 0;
}
