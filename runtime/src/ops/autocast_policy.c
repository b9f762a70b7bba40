/*
 * autocast_policy.c: autocast's op table, the one place that says which ops run in 16 bits,
 * which in float32 and which in the widest dtype of their operands (autocast.h, autocast.c).
 *
 * It follows PyTorch's autocast lists for CUDA (aten/src/ATen/autocast_mode.h:
 * AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32, AT_FORALL_FP32_SET_OPT_DTYPE, the norm
 * overloads of fp32_append_dtype, AT_FORALL_PROMOTE and the banned binary_cross_entropy),
 * restricted to the ops Ember has, on every kind of device: the same script behaves the same
 * on the CPU and on a GPU. PyTorch's CPU list is narrower (softmax, sum, exp, layer_norm and
 * the like stay in bfloat16 there); the differences are listed in docs/amp.md and in
 * tests/lua/autocast_spec.lua. Added from the CPU list: cat, stack and index_copy promote.
 *
 * Names are the op names Ember's errors use, which are PyTorch's (cross_entropy stands for
 * cross_entropy_loss). Ops composed in Lua (linear, the losses written with other ops) apply
 * their entry through em_autocast_inputs. Ops not listed run in their operands' dtypes,
 * notably mean, var, std, sqrt, the activations, batch_norm, the pools and embedding.
 *
 * The table is sorted by name (strcmp order) for the binary search; em_autocast_push checks
 * the order.
 */
#include <stdlib.h>

#include "../autocast.h"

typedef struct entry {
  const char *name;
  em_ac_policy policy;
} entry;

#define LOWER EM_AC_LOWER
#define FP32 EM_AC_FP32
#define PROMOTE EM_AC_PROMOTE
#define BANNED EM_AC_BANNED

static const entry table[] = {
  {"acos", FP32},
  {"addcdiv", PROMOTE},
  {"addcmul", PROMOTE},
  {"addmm", LOWER},
  {"asin", FP32},
  {"atan2", PROMOTE},
  {"baddbmm", LOWER},
  {"bilinear", PROMOTE},
  {"binary_cross_entropy", BANNED},
  {"binary_cross_entropy_with_logits", FP32},
  {"bmm", LOWER},
  {"cat", PROMOTE},                 /* PyTorch's CPU list; CUDA's cat promotes by itself */
  {"conv1d", LOWER},
  {"conv2d", LOWER},
  {"conv_transpose1d", LOWER},
  {"conv_transpose2d", LOWER},
  {"cosh", FP32},
  {"cross_entropy", FP32},
  {"cumprod", FP32},
  {"cumsum", FP32},
  {"dot", PROMOTE},
  {"erfinv", FP32},
  {"exp", FP32},
  {"expm1", FP32},
  {"group_norm", FP32},
  {"index_copy", PROMOTE},          /* PyTorch's CPU list */
  {"kl_div", FP32},
  {"l1_loss", FP32},
  {"layer_norm", FP32},
  {"linear", LOWER},
  {"log", FP32},
  {"log10", FP32},
  {"log1p", FP32},
  {"log2", FP32},
  {"log_softmax", FP32},
  {"logsumexp", FP32},
  {"matmul", LOWER},
  {"mm", LOWER},
  {"mse_loss", FP32},
  {"mv", LOWER},
  {"nll_loss", FP32},
  {"norm", FP32},
  {"pow", FP32},
  {"prod", FP32},
  {"reciprocal", FP32},
  {"rsqrt", FP32},
  {"scaled_dot_product_attention", LOWER},
  {"scatter_add", PROMOTE},
  {"sinh", FP32},
  {"smooth_l1_loss", FP32},
  {"softmax", FP32},
  {"softplus", FP32},
  {"stack", PROMOTE},               /* PyTorch's CPU list; CUDA's stack promotes by itself */
  {"sum", FP32},
  {"tan", FP32},
};

enum { TABLE_SIZE = sizeof table / sizeof table[0] };

static int by_name(const void *key, const void *e) {
  return strcmp((const char *)key, ((const entry *)e)->name);
}

em_ac_policy em_autocast_policy_of(const char *name, bool *found) {
  const entry *e = bsearch(name, table, TABLE_SIZE, sizeof table[0], by_name);
  if (found) *found = e != NULL;
  return e ? e->policy : EM_AC_NONE;
}

const char *em_autocast_ban_reason(const char *name) {
  if (strcmp(name, "binary_cross_entropy") == 0)
    return "a sigmoid's 16-bit output rounds to 0 or 1 where the loss needs its distance from "
           "them; use binary_cross_entropy_with_logits (nn.BCEWithLogitsLoss), which is safe, "
           "or compute this loss outside the autocast region";
  return NULL;
}

/* Checked by em_autocast_push: the binary search needs the order. */
bool em_autocast_table_sorted(void) {
  for (int i = 1; i < TABLE_SIZE; i++)
    if (strcmp(table[i - 1].name, table[i].name) >= 0) return false;
  return true;
}
