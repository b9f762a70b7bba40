/*
 * red_dims.c: the kept / reduced dim split of the reduction plans (red_dims.h).
 */
#include "red_dims.h"

/* Outermost (largest |x stride|) first; stable, so equal strides keep their order. */
static void sort_dims(em_red_dim *d, int n) {
  for (int i = 1; i < n; i++) {
    em_red_dim cur = d[i];
    int j = i - 1;
    while (j >= 0 && em_abs64(d[j].xs) < em_abs64(cur.xs)) {
      d[j + 1] = d[j];
      j--;
    }
    d[j + 1] = cur;
  }
}

/* Merges an outer dim into the next inner one when both x and out step evenly across them. */
static int coalesce(em_red_dim *d, int n) {
  if (n == 0) return 0;
  int m = 1;
  for (int i = 1; i < n; i++) {
    em_red_dim *prev = &d[m - 1];
    if (prev->xs == d[i].xs * d[i].size && prev->os == d[i].os * d[i].size) {
      prev->size *= d[i].size;
      prev->xs = d[i].xs;
      prev->os = d[i].os;
    } else {
      d[m++] = d[i];
    }
  }
  return m;
}

void em_red_dims_split(const em_tensor *out, const em_tensor *x, uint32_t mask, int64_t xunit,
                       int64_t ounit, em_red_dim *kept, int *nk, em_red_dim *red, int *nr) {
  int k = 0, r = 0;
  for (int d = 0; d < x->ndim; d++) {
    int64_t n = x->sizes[d];
    if (n == 1) continue;
    bool walks_out = out->ndim == x->ndim && out->sizes[d] == n;
    em_red_dim rec = {n, x->strides[d] * xunit, walks_out ? out->strides[d] * ounit : 0};
    if (mask & (1u << d)) red[r++] = rec;
    else kept[k++] = rec;
  }
  sort_dims(kept, k);
  sort_dims(red, r);
  *nk = coalesce(kept, k);
  *nr = coalesce(red, r);
}
