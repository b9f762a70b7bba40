/*
 * profiler.h: what the runtime's own files share with the profiler (ember.profiler).
 *
 * Decision 15 (docs/design.md): observation has one hook point per layer. Every op ends in a
 * kernel slot, and every op definition reaches its slots through em_device_backend, so that
 * one function hands out a recording copy of the kernel table while the profiler runs
 * (kernel_table.c). The autograd engine marks each backward node as a range, the allocator
 * reports its bytes, and the Vulkan command recorder asks for the current op when it records
 * a dispatch (vk_profile.c). When the profiler is off each hook costs one load and one
 * predictable branch on em_prof_on.
 */
#ifndef EMBER_PROFILER_H
#define EMBER_PROFILER_H

#include <stdint.h>

#include "../internal.h"

/* Nonzero while the profiler records; read on every hook, written by start and stop. Hidden,
 * so that the test is one instruction on the flag itself, not a load of its address first. */
extern int em_prof_on __attribute__((visibility("hidden")));
/* Nonzero while the profiler records GPU timestamps (start's gpu option). */
extern int em_prof_gpu_on __attribute__((visibility("hidden")));

static inline int em_prof_active(void) { return __builtin_expect(em_prof_on != 0, 0); }

/* Kinds of events, as em_profiler_event.kind (ember.h). */
enum { EM_PROF_OP = 0, EM_PROF_RANGE = 1, EM_PROF_KERNEL = 2 };

/* Opens an event on this thread (an op's kernel call, a range, a backward node); returns its
 * handle for em_prof_end, 0 when nothing was recorded (the profiler stopped, a full buffer).
 * name must outlive the profile (a literal) unless copy is set; ins (n of them, NULL entries
 * skipped) give the shapes when record_shapes is on. */
uint64_t em_prof_begin(int kind, const char *name, int copy, int device, int n,
                       const em_tensor *const *ins);
void em_prof_end(uint64_t handle);
/* Drops the innermost event, just begun (a slot that declined the work), as if never begun. */
void em_prof_cancel(uint64_t handle);
/* The innermost open event of this thread (0 when none): what a GPU dispatch is charged to. */
uint64_t em_prof_current(void);

/* A GPU interval for the profile: key from em_prof_current at recording, times on the host's
 * CLOCK_MONOTONIC in nanoseconds, name a literal or a string that outlives the process (the
 * kernel modules' names). Thread-safe. */
void em_prof_gpu_event(uint64_t key, const char *name, int device, int64_t start_ns,
                       int64_t end_ns);
/* A device registers (once, vk_profile.c) a flush the profiler calls at start (wait 0: submit
 * what is recorded, so that timing starts with a fresh batch) and at stop (wait 1: its timed
 * work completes and is read back). */
typedef int (*em_prof_flush_fn)(void *ctx, int wait);
void em_prof_register_gpu(em_prof_flush_fn flush, void *ctx);
/* Forgets ctx's flush (a device being shut down, em_shutdown). */
void em_prof_unregister_gpu(void *ctx);

/* The allocator's hook (alloc.c): +bytes allocated, -bytes freed, charged to this thread's
 * innermost open event. */
void em_prof_memory(int device, int64_t nbytes);

/* The recording kernel table of a device (kernel_table.c), for em_device_backend. */
const em_backend *em_prof_backend(int device, const em_backend *real);

/* Copies the devices' tables again (at start: a test may have cleared a slot since). */
void em_prof_backends_refresh(void);

/* CLOCK_MONOTONIC in nanoseconds. */
int64_t em_prof_now(void);

#endif
