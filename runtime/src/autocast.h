/*
 * autocast.h: how op definitions consult autocast (mixed precision), the runtime state that
 * em_autocast_push / em_autocast_pop (ember.h) set up per thread, per kind of device.
 *
 * An op that autocast may affect says so with one line at its entry, where its tensor
 * operands are known and before any shape or dtype logic:
 *
 *     em_tensor *em_matmul(const em_tensor *a, const em_tensor *b) {
 *       EM_AUTOCAST("matmul", em_matmul(ac_[0], ac_[1]), a, b);
 *       ...
 *
 * When autocast is off on this thread the line costs one predictable branch. When it is on,
 * the op's policy (ops/autocast_policy.c: run in 16 bits, in float32, in the widest dtype, or
 * refuse) decides the dtype each floating operand should have; the casts are ordinary
 * recorded to_dtype calls, so gradients flow back to the operands in their own dtypes. The
 * op is then called again with the cast operands (ac_[i] stands for the i-th listed tensor)
 * while autocast is suspended, so the ops it is composed of run in the dtypes it chose, as
 * PyTorch's autocast wrappers exclude autocast below themselves. The result is returned from
 * the caller.
 */
#ifndef EMBER_AUTOCAST_H
#define EMBER_AUTOCAST_H

#include <stdlib.h>

#include "internal.h"

/* What the policy table says of an op. */
typedef enum em_ac_policy {
  EM_AC_NONE,      /* not listed: runs in its operands' dtypes */
  EM_AC_LOWER,     /* floating operands cast to the region's 16-bit dtype */
  EM_AC_FP32,      /* floating 16-bit operands cast to float32 */
  EM_AC_PROMOTE,   /* floating operands cast to the widest among them (and the 16-bit dtype) */
  EM_AC_BANNED     /* refused inside a region (an op that is unsafe in 16 bits) */
} em_ac_policy;

/* The policy of the op called `name` (the name errors use: "matmul", "exp", ...); EM_AC_NONE
 * for ops the table does not list. found, when not NULL, says whether it is listed. */
em_ac_policy em_autocast_policy_of(const char *name, bool *found);
/* The reason a banned op gives (its advice), or NULL. */
const char *em_autocast_ban_reason(const char *name);
/* Whether the table is in the order its binary search needs (checked by em_autocast_push). */
bool em_autocast_table_sorted(void);

/* Nonzero while some kind of device has autocast enabled on this thread and autocast is not
 * suspended: the whole cost of the hook when autocast is off. */
extern _Thread_local __attribute__((tls_model("initial-exec"))) uint32_t em_autocast_on;

/* Suspends autocast on this thread (nesting); resume undoes one suspension. The engine
 * suspends it for backward, and in-place ops for their out-of-place evaluation. */
void em_autocast_suspend(void);
void em_autocast_resume(void);

/* Applies fn's policy to n operands (NULL entries allowed). Returns 0 when nothing applies
 * (the op is not listed, or autocast is off for its device kind): the caller goes on. Returns
 * 1 after filling ac[i] with new references (a cast, or in[i] itself; NULL stays NULL) and
 * suspending autocast: the caller calls the op with them, then em_autocast_end. -1 on error. */
int em_autocast_begin(const char *fn, int n, const em_tensor *const *in, em_tensor **ac);
/* Releases ac[0..n) and resumes autocast. */
void em_autocast_end(int n, em_tensor **ac);

/* The entry line of an op returning a tensor; see the head of this file. */
#define EM_AUTOCAST(fn, CALL, ...)                                                           \
  do {                                                                                       \
    if (em_autocast_on) {                                                                    \
      const em_tensor *ac_in_[] = {__VA_ARGS__};                                             \
      em_tensor *ac_[sizeof ac_in_ / sizeof ac_in_[0]];                                      \
      int ac_n_ = (int)(sizeof ac_in_ / sizeof ac_in_[0]);                                   \
      int ac_rc_ = em_autocast_begin((fn), ac_n_, ac_in_, ac_);                              \
      if (ac_rc_ < 0) return NULL;                                                           \
      if (ac_rc_ > 0) {                                                                      \
        em_tensor *ac_out_ = (CALL);                                                         \
        em_autocast_end(ac_n_, ac_);                                                         \
        return ac_out_;                                                                      \
      }                                                                                      \
    }                                                                                        \
  } while (0)

/* The same for ops over a list of n tensors (cat, stack): ac_ is a heap array of n. */
#define EM_AUTOCAST_LIST(fn, CALL, n, tensors)                                               \
  do {                                                                                       \
    if (em_autocast_on && (n) > 0 && (tensors) != NULL) {                                    \
      em_tensor **ac_ = malloc(sizeof(em_tensor *) * (size_t)(n));                           \
      if (ac_ == NULL) {                                                                     \
        em_error_kind_set(EM_ERR_OOM, "out of memory on cpu: %s", (fn));                     \
        return NULL;                                                                         \
      }                                                                                      \
      int ac_rc_ = em_autocast_begin((fn), (n), (const em_tensor *const *)(tensors), ac_);   \
      em_tensor *ac_out_ = NULL;                                                             \
      if (ac_rc_ > 0) {                                                                      \
        ac_out_ = (CALL);                                                                    \
        em_autocast_end((n), ac_);                                                           \
      }                                                                                      \
      free(ac_);                                                                             \
      if (ac_rc_ != 0) return ac_out_;                                                       \
    }                                                                                        \
  } while (0)

#endif
