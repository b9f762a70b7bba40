/*
 * copy.c: copies, casts, fills and reads. copy_ is the one primitive that moves data between
 * dtypes and devices; contiguous, clone, to_dtype and to_device are built on it.
 */
#include <stdlib.h>

#include "../autograd/record.h"
#include "../backend.h"

static int copy_raw(em_tensor *dst, const em_tensor *src);

/* Copies across devices through host memory: the source device reads into a contiguous host
 * buffer of dst's dtype, the destination device writes it. */
static int copy_across_devices(em_tensor *dst, const em_tensor *src) {
  em_tensor *host_src = NULL, *staged = NULL;
  int rc = -1;
  /* 0. A contiguous CPU source of dst's dtype goes straight to the device's write: one copy
   * into its staging memory, or none from pinned memory (em_empty_pinned). */
  if (src->device_id == EM_CPU && src->dtype_id == dst->dtype_id && em_is_contiguous(src) &&
      em_is_contiguous(dst)) {
    size_t n = (size_t)em_numel(dst) * em_dtypes[dst->dtype_id].size;
    return n ? em_device_backend(dst->device_id)->write(
                   dst->storage, (size_t)dst->offset * em_dtypes[dst->dtype_id].size,
                   em_data_ptr(src), n)
             : 0;
  }
  /* 1. Make src contiguous and of dst's dtype, still on its own device. */
  em_tensor *cast = em_empty(dst->ndim, dst->sizes, (em_dtype)dst->dtype_id, src->device_id);
  if (cast == NULL || copy_raw(cast, src) != 0) goto done;
  /* 2. Bring it to the CPU (a no-op view when it is there already). */
  host_src = em_empty(dst->ndim, dst->sizes, (em_dtype)dst->dtype_id, EM_CPU);
  if (host_src == NULL) goto done;
  size_t nbytes = (size_t)em_numel(dst) * em_dtypes[dst->dtype_id].size;
  if (nbytes && em_device_backend(cast->device_id)->read(cast->storage, 0, host_src->storage->data,
                                                      nbytes) != 0)
    goto done;
  /* 3. Write it into dst, through a contiguous staging tensor when dst is strided. */
  if (dst->device_id == EM_CPU) {
    rc = copy_raw(dst, host_src);
    goto done;
  }
  if (em_is_contiguous(dst)) {
    rc = nbytes ? em_device_backend(dst->device_id)->write(
                      dst->storage, (size_t)dst->offset * em_dtypes[dst->dtype_id].size,
                      host_src->storage->data, nbytes)
                : 0;
  } else {
    staged = em_empty(dst->ndim, dst->sizes, (em_dtype)dst->dtype_id, dst->device_id);
    if (staged == NULL) goto done;
    if (nbytes &&
        em_device_backend(dst->device_id)->write(staged->storage, 0, host_src->storage->data, nbytes))
      goto done;
    rc = copy_raw(dst, staged);
  }
done:
  em_release(cast);
  em_release(host_src);
  em_release(staged);
  return rc;
}

/* copy_ as autograd sees it: dst becomes a (cast, broadcast) copy of src. */
static int copy_recorded(em_tensor *dst, const em_tensor *src) {
  if (em_ag_inplace_check("copy_", dst) != 0) return -1;
  em_tensor *b = em_expand(src, dst->ndim, dst->sizes);
  em_tensor *r = b ? em_to_dtype(b, (em_dtype)dst->dtype_id) : NULL;
  int rc = r ? em_ag_adopt(dst, r) : -1;
  em_release(b);
  em_release(r);
  return rc;
}

int em_copy_(em_tensor *dst, const em_tensor *src) {
  if (dst == NULL || src == NULL) return em_error("copy_: expected two tensors, got NULL");
  if (em_check_writable("copy_", dst) != 0) return -1; /* the last write would win */
  const em_tensor *both[2] = {dst, src};
  if (dst->device_id == src->device_id && em_ag_should_record(2, both))
    return copy_recorded(dst, src);
  return copy_raw(dst, src);
}

/* Block dtypes copy as what they are, bytes: a cast to or from one is refused (quantizing and
 * dequantizing are ops of their own), and a same-dtype copy runs the device's uint8 copy over
 * byte views (em_block_bytes_view), so no kernel needs to know the block sizes. */
static int copy_blocks(em_tensor *dst, const em_tensor *src) {
  em_dtype dd = (em_dtype)dst->dtype_id, sd = (em_dtype)src->dtype_id;
  if (dd != sd) {
    const char *q = em_dtype_name(em_dtype_is_block(sd) ? sd : dd);
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "to: casting %s to %s is not implemented "
                             "(%s is a quantized block dtype: quantize with ember.quant.quantize, "
                             "dequantize with x:dequantize())", em_dtype_name(sd),
                             em_dtype_name(dd), q);
  }
  em_tensor d8, s8;
  if (em_block_bytes_view(&d8, dst) != 0 || em_block_bytes_view(&s8, src) != 0) return -1;
  return copy_raw(&d8, &s8);
}

static int copy_raw(em_tensor *dst, const em_tensor *src) {
  if (em_dtype_is_block((em_dtype)dst->dtype_id) || em_dtype_is_block((em_dtype)src->dtype_id))
    return copy_blocks(dst, src);
  em_tensor *b = em_broadcast_to("copy_", src, dst->ndim, dst->sizes);
  if (b == NULL) return -1;
  int rc;
  if (src->device_id != dst->device_id) {
    rc = copy_across_devices(dst, b);
  } else {
    const em_backend *be = em_device_backend(dst->device_id);
    if (be->copy == NULL)
      rc = em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "copy_: not implemented on %s", be->name);
    else
      rc = em_numel(dst) ? be->copy(dst, b) : 0;
  }
  em_release(b);
  if (rc == 0) em_bump_version(dst);
  return rc;
}

static int fill_named(const char *fn, em_tensor *t, double value) {
  if (t == NULL) return em_error("%s: expected a tensor, got NULL", fn);
  if (em_check_fill_value(fn, (em_dtype)t->dtype_id, value) != 0) return -1;
  if (em_numel(t) == 0) return 0;
  if (em_check_writable(fn, t) != 0) return -1; /* refused as every in-place op is */
  const em_backend *be = em_device_backend(t->device_id);
  if (be->fill == NULL)
    return em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name);
  int rc = be->fill(t, value);
  if (rc == 0) em_bump_version(t);
  return rc;
}

int em_fill_(em_tensor *t, double value) { return fill_named("fill_", t, value); }
int em_zero_(em_tensor *t) { return fill_named("zero_", t, 0.0); }

static em_tensor *copy_to(const char *fn, const em_tensor *t, em_dtype dtype, int device) {
  if (t == NULL) return em_error_null("%s: expected a tensor, got NULL", fn);
  if (em_check_dtype(fn, dtype) != 0 || em_check_device(fn, device) != 0) return NULL;
  em_tensor *out = em_empty(t->ndim, t->sizes, dtype, device);
  if (out && copy_raw(out, t) != 0) {
    em_error_prefix(fn);
    em_release(out);
    return NULL;
  }
  return device == t->device_id ? em_ag_copy(t, out) : out;
}

em_tensor *em_to_dtype(const em_tensor *t, em_dtype dtype) {
  return copy_to("to", t, dtype, t ? t->device_id : 0);
}

em_tensor *em_to_device(const em_tensor *t, int device) {
  if (t && t->device_id == device) return em_retain((em_tensor *)t);
  return copy_to("to", t, t ? (em_dtype)t->dtype_id : EM_FLOAT32, device);
}

em_tensor *em_clone(const em_tensor *t) {
  return copy_to("clone", t, t ? (em_dtype)t->dtype_id : EM_FLOAT32, t ? t->device_id : 0);
}

em_tensor *em_contiguous(const em_tensor *t) {
  EM_NOT_NULL(NULL, t);
  if (em_is_contiguous(t)) return em_retain((em_tensor *)t);
  return em_clone(t);
}

int em_item(const em_tensor *t, double *out) {
  if (t == NULL) return em_error("item: expected a tensor, got NULL");
  if (em_check_not_block("item", t) != 0) return -1;
  if (em_numel(t) != 1)
    return em_error("item: expected a tensor with one element, got %lld elements",
                    (long long)em_numel(t));
  unsigned char buf[8];
  size_t esize = em_dtypes[t->dtype_id].size;
  if (em_device_backend(t->device_id)->read(t->storage, (size_t)t->offset * esize, buf, esize) != 0)
    return -1;
  *out = em_load_as_double(buf, (em_dtype)t->dtype_id);
  return 0;
}

int em_item_int64(const em_tensor *t, int64_t *out) {
  if (t == NULL) return em_error("item: expected a tensor, got NULL");
  if (em_check_not_block("item", t) != 0) return -1;
  if (em_numel(t) != 1)
    return em_error("item: expected a tensor with one element, got %lld elements",
                    (long long)em_numel(t));
  unsigned char buf[8];
  size_t esize = em_dtypes[t->dtype_id].size;
  if (em_device_backend(t->device_id)->read(t->storage, (size_t)t->offset * esize, buf, esize) != 0)
    return -1;
  *out = em_load_as_int64(buf, (em_dtype)t->dtype_id);
  return 0;
}
