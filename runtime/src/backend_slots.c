/*
 * backend_slots.c: every kernel slot of struct em_backend by name and offset, so that checks
 * (tests/c/test_backend_slots.c: every slot filled on the CPU and Vulkan) and test hooks
 * (EMBER_VK_TEST=empty-slot:NAME) can walk the table without naming each slot again.
 */
#include <stddef.h>
#include <stdio.h>

#include "backend.h"

typedef void (*any_fn)(void);

#define SLOT(n) {#n, offsetof(struct em_backend, n), false}
#define OPTIONAL_SLOT(n) {#n, offsetof(struct em_backend, n), true}

const em_backend_slot em_backend_slots[] = {
    SLOT(storage_alloc), SLOT(storage_free), SLOT(read), SLOT(write), SLOT(synchronize),
    OPTIONAL_SLOT(pin_alloc), OPTIONAL_SLOT(read_start), OPTIONAL_SLOT(read_finish),
    OPTIONAL_SLOT(read_free), OPTIONAL_SLOT(pinned_read_start), OPTIONAL_SLOT(pinned_read_poll),
    SLOT(copy), SLOT(fill), SLOT(arange), SLOT(linspace), SLOT(random), SLOT(multinomial),
    SLOT(unary), SLOT(binary), OPTIONAL_SLOT(binary_contiguous), SLOT(where), SLOT(clamp),
    SLOT(lerp), SLOT(addc),
    SLOT(reduce), SLOT(moments), SLOT(norm), SLOT(arg_reduce), SLOT(scan), SLOT(softmax),
    SLOT(gemm), OPTIONAL_SLOT(gemm_add),
    OPTIONAL_SLOT(check_index), SLOT(index_select), SLOT(gather), SLOT(scatter), SLOT(index_put), SLOT(nonzero), SLOT(sort),
    SLOT(conv2d), SLOT(conv2d_input_grad), SLOT(conv2d_weight_grad), OPTIONAL_SLOT(conv_half),
    SLOT(max_pool2d),
    SLOT(max_unpool2d), SLOT(avg_pool2d), SLOT(avg_pool2d_backward),
    SLOT(batch_norm_stats), SLOT(channel_affine), SLOT(batch_norm_backward), SLOT(group_norm),
    SLOT(group_norm_backward), SLOT(class_loss), SLOT(class_loss_backward),
    OPTIONAL_SLOT(attention), OPTIONAL_SLOT(attention_backward),
    SLOT(sgd_step), SLOT(adam_step),
    SLOT(amp_unscale),
    OPTIONAL_SLOT(ctc_loss),
    OPTIONAL_SLOT(quantize), OPTIONAL_SLOT(dequantize), OPTIONAL_SLOT(quant_linear),
};

#define NSLOTS ((int)(sizeof em_backend_slots / sizeof em_backend_slots[0]))
const int em_backend_slot_count = NSLOTS;

/* The table is name, the bool flags, then nothing but slots: a slot added to struct em_backend
 * and not listed above (or any other member added) fails the build here. The test checks that
 * the listed offsets are distinct, so together they cover every slot once. */
_Static_assert(offsetof(struct em_backend, storage_alloc) == 2 * sizeof(any_fn),
               "struct em_backend: members other than slots besides name and host_scalars");
_Static_assert(sizeof(struct em_backend) ==
                   offsetof(struct em_backend, storage_alloc) + NSLOTS * sizeof(any_fn),
               "struct em_backend has a slot missing from em_backend_slots");

bool em_backend_slot_filled(const em_backend *be, int i) {
  any_fn f;
  memcpy(&f, (const char *)be + em_backend_slots[i].offset, sizeof f);
  return f != NULL;
}

int em_backend_slot_clear(em_backend *be, const char *name) {
  for (int i = 0; i < NSLOTS; i++)
    if (strcmp(em_backend_slots[i].name, name) == 0) {
      any_fn none = NULL;
      memcpy((char *)be + em_backend_slots[i].offset, &none, sizeof none);
      return 0;
    }
  return em_error("backend: expected a kernel slot name of struct em_backend, got '%s'", name);
}
