/*
 * sort.c: definitions of sort, argsort, topk and unique.
 *
 * sort is the one kernel slot (a stable sort along a dimension, NaN as the largest value).
 * argsort and topk are sort plus a view; unique sorts the flattened input and finds where runs
 * of equal values start with ne and nonzero, so it runs wherever those ops do.
 */
#include "../autograd/record.h"
#include "../backend.h"

/* ---- sort, argsort ------------------------------------------------------------------------- */

static int sort_impl(const char *fn, const em_tensor *x, int dim, int descending,
                     em_tensor **values, em_tensor **indices) {
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  if (x == NULL) return em_error("%s: expected a tensor, got NULL", fn);
  if (em_check_not_block(fn, x) != 0) return -1;
  int d;
  if (em_wrap_dim(fn, dim, x->ndim, &d) != 0) return -1;
  em_tensor *v = em_empty(x->ndim, x->sizes, (em_dtype)x->dtype_id, x->device_id);
  em_tensor *i = v ? em_empty(x->ndim, x->sizes, EM_INT64, x->device_id) : NULL;
  if (i == NULL) goto fail;
  if (x->ndim == 0) { /* one element: itself, from position 0 */
    /* the device's copy kernel: an internal step, which autograd must not record */
    if (em_device_backend(x->device_id)->copy(v, x) != 0 || em_zero_(i) != 0) goto fail;
  } else if (em_numel(x) > 0) {
    const em_backend *be = em_device_backend(x->device_id);
    if (be->sort == NULL) {
      em_error_kind_set(EM_ERR_NOT_IMPLEMENTED, "%s: not implemented on %s", fn, be->name);
      goto fail;
    }
    if (be->sort(v, i, x, d, descending != 0) != 0) goto fail;
  }
  if (x->ndim > 0 && em_ag_should_record(1, &x) && em_ag_record_sort(v, i, x, d) != 0) goto fail;
  if (x->ndim == 0 && (v = em_ag_copy(x, v)) == NULL) goto fail; /* the value passes through */
  if (values) *values = v;
  else em_release(v);
  if (indices) *indices = i;
  else em_release(i);
  return 0;
fail:
  em_release(v);
  em_release(i);
  return -1;
}

int em_sort(const em_tensor *x, int dim, int descending, em_tensor **values,
            em_tensor **indices) {
  return sort_impl("sort", x, dim, descending, values, indices);
}

em_tensor *em_argsort(const em_tensor *x, int dim, int descending) {
  em_tensor *indices;
  if (sort_impl("argsort", x, dim, descending, NULL, &indices) != 0) return NULL;
  return indices;
}

/* ---- topk ---------------------------------------------------------------------------------- */

/* The first k of a full sort (always sorted, which `sorted == 0` allows). */
int em_topk(const em_tensor *x, int64_t k, int dim, int largest, int sorted, em_tensor **values,
            em_tensor **indices) {
  const char *fn = "topk";
  EM_UNUSED(sorted);
  if (values) *values = NULL;
  if (indices) *indices = NULL;
  if (x == NULL) return em_error("%s: expected a tensor, got NULL", fn);
  if (em_check_not_block(fn, x) != 0) return -1;
  int d;
  if (em_wrap_dim(fn, dim, x->ndim, &d) != 0) return -1;
  int64_t size = x->ndim > 0 ? x->sizes[d] : 1;
  if (k < 0 || k > size)
    return em_error("%s: k (%lld) is out of range for dimension %d with size %lld", fn,
                    (long long)k, d, (long long)size);
  em_tensor *sv = NULL, *si = NULL, *nv = NULL, *ni = NULL, *v = NULL, *i = NULL;
  int rc = -1;
  if (em_sort(x, d, largest != 0, &sv, &si) != 0) goto done;
  if (x->ndim == 0 && k == 1) { /* a 0-d tensor keeps its shape, as in PyTorch */
    v = em_retain(sv);
    i = em_retain(si);
  } else if (x->ndim == 0) { /* k == 0: nothing, as a 1-D tensor of no elements (views of
                                * the sort, so the empty result stays in the graph) */
    int64_t one = 1;
    nv = em_reshape(sv, 1, &one);
    ni = nv ? em_reshape(si, 1, &one) : NULL;
    v = ni ? em_narrow(nv, 0, 0, 0) : NULL;
    i = v ? em_narrow(ni, 0, 0, 0) : NULL;
  } else {
    nv = em_narrow(sv, d, 0, k);
    ni = nv ? em_narrow(si, d, 0, k) : NULL;
    v = ni ? em_contiguous(nv) : NULL;
    i = v ? em_contiguous(ni) : NULL;
  }
  if (i == NULL) goto done;
  rc = 0;
  if (values) *values = em_retain(v);
  if (indices) *indices = em_retain(i);
done:
  if (rc != 0) em_error_prefix(fn);
  em_release(sv);
  em_release(si);
  em_release(nv);
  em_release(ni);
  em_release(v);
  em_release(i);
  return rc;
}

/* ---- unique -------------------------------------------------------------------------------- */

/* Where runs of equal values start in the sorted s (n >= 1): position 0, and every position
 * whose value differs from the one before. NaNs differ from each other, so each is its own
 * run, as in PyTorch. Returns the positions (1-D int64) or NULL. */
static em_tensor *run_starts(const em_tensor *s, int64_t n, em_tensor **mask_out) {
  *mask_out = NULL;
  em_tensor *mask = em_empty(1, &n, EM_BOOL, s->device_id);
  em_tensor *head = mask ? em_narrow(mask, 0, 0, 1) : NULL;
  em_tensor *tail = head ? em_narrow(mask, 0, 1, n - 1) : NULL;
  em_tensor *prev = tail ? em_narrow(s, 0, 0, n - 1) : NULL;
  em_tensor *next = prev ? em_narrow(s, 0, 1, n - 1) : NULL;
  em_tensor *ne = NULL, *nz = NULL, *starts = NULL;
  bool ok = next && em_fill_(head, 1) == 0;
  if (ok && n > 1) ok = (ne = em_binary(EM_NE, next, prev)) != NULL && em_copy_(tail, ne) == 0;
  if (ok && (nz = em_nonzero(mask)) != NULL) {
    int64_t count = nz->sizes[0];
    starts = em_view(nz, 1, &count);
  }
  em_release(head);
  em_release(tail);
  em_release(prev);
  em_release(next);
  em_release(ne);
  em_release(nz);
  if (starts) *mask_out = mask;
  else em_release(mask);
  return starts;
}

/* counts[u] = starts[u + 1] - starts[u], with starts[U] = n. */
static em_tensor *run_counts(const em_tensor *starts, int64_t n) {
  int64_t u = starts->sizes[0];
  em_tensor *ends = em_empty(1, &u, EM_INT64, starts->device_id);
  em_tensor *ends_head = ends ? em_narrow(ends, 0, 0, u - 1) : NULL;
  em_tensor *ends_last = ends_head ? em_narrow(ends, 0, u - 1, 1) : NULL;
  em_tensor *starts_tail = ends_last ? em_narrow(starts, 0, 1, u - 1) : NULL;
  em_tensor *counts = NULL;
  if (starts_tail && em_copy_(ends_head, starts_tail) == 0 && em_fill_(ends_last, (double)n) == 0)
    counts = em_binary(EM_SUB, ends, starts);
  em_release(ends);
  em_release(ends_head);
  em_release(ends_last);
  em_release(starts_tail);
  return counts;
}

/* inverse[perm[i]] = (run of sorted position i) = cumsum(mask)[i] - 1, in x's shape. */
static em_tensor *run_inverse(const em_tensor *x, const em_tensor *mask, const em_tensor *perm) {
  int64_t n = perm->sizes[0];
  em_tensor *m64 = em_to_dtype(mask, EM_INT64);
  em_tensor *sum = m64 ? em_cumsum(m64, 0) : NULL;
  em_tensor *ids = sum ? em_binary_scalar(EM_SUB, sum, 1, 0) : NULL;
  em_tensor *flat = ids ? em_empty(1, &n, EM_INT64, x->device_id) : NULL;
  em_tensor *inverse = NULL;
  if (flat && em_scatter_(flat, 0, perm, ids) == 0) inverse = em_view(flat, x->ndim, x->sizes);
  em_release(m64);
  em_release(sum);
  em_release(ids);
  em_release(flat);
  return inverse;
}

int em_unique(const em_tensor *x, em_tensor **values, em_tensor **inverse, em_tensor **counts) {
  const char *fn = "unique";
  if (values) *values = NULL;
  if (inverse) *inverse = NULL;
  if (counts) *counts = NULL;
  if (x == NULL) return em_error("%s: expected a tensor, got NULL", fn);
  if (em_check_not_block(fn, x) != 0) return -1;
  if (values == NULL) return em_error("%s: expected somewhere to put the values, got NULL", fn);
  int64_t n = em_numel(x), zero = 0;
  em_tensor *flat = em_reshape(x, 1, &n);
  em_tensor *s = NULL, *perm = NULL, *mask = NULL, *starts = NULL;
  em_tensor *v = NULL, *inv = NULL, *cnt = NULL;
  int rc = -1;
  if (flat == NULL || em_sort(flat, 0, 0, &s, &perm) != 0) goto done;
  if (n == 0) {
    v = em_retain(s);
    inv = inverse ? em_empty(x->ndim, x->sizes, EM_INT64, x->device_id) : NULL;
    cnt = counts ? em_empty(1, &zero, EM_INT64, x->device_id) : NULL;
  } else {
    starts = run_starts(s, n, &mask);
    v = starts ? em_index_select(s, 0, starts) : NULL;
    inv = v && inverse ? run_inverse(x, mask, perm) : NULL;
    cnt = v && counts ? run_counts(starts, n) : NULL;
  }
  if (v == NULL || (inverse && inv == NULL) || (counts && cnt == NULL)) goto done;
  rc = 0;
  *values = v;
  if (inverse) *inverse = inv;
  if (counts) *counts = cnt;
  v = inv = cnt = NULL;
done:
  if (rc != 0) em_error_prefix(fn);
  em_release(flat);
  em_release(s);
  em_release(perm);
  em_release(mask);
  em_release(starts);
  em_release(v);
  em_release(inv);
  em_release(cnt);
  return rc;
}
