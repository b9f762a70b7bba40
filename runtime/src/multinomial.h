/*
 * multinomial.h: the sampling algorithm of em_multinomial, written down once so that the CPU
 * kernel (cpu/multinomial.c) and the Vulkan kernel (kernels/multinomial.comp) compute the same
 * floating-point operations in the same order: one seed then gives the same draws on every
 * device, not merely draws of the same distribution.
 *
 * A row of K weights w (float32, or float64 on the CPU) is cut into chunks of em_mn_chunk(K)
 * consecutive weights (256 up to 2048 chunks; larger rows take longer chunks).
 *  - sum[c]  = the chunk's weights added left to right, rounded after each addition;
 *  - base[0] = 0, base[c] = base[c-1] + sum[c-1] (left to right), total = base[last] + sum[last].
 * A draw takes one 32-bit word x of the Philox stream (random.h): draw j of row r is word
 * r * n + j of the request. u = (x >> 8) 2^-24 in float32 (x 2^-32 in float64), exactly;
 * target = u * total, rounded once. The draw is then:
 *  - c = the largest chunk with base[c] <= target (bases never decrease: weights are >= 0);
 *  - walking chunk c from its start with acc = base[c], acc += w[i] for each nonzero w[i]: the
 *    first i where acc > target;
 *  - when rounding leaves no such i: the last nonzero weight of chunk c, else of the nearest
 *    chunk before it that has one.
 * Zero weights are never drawn (they never move acc). Up to rounding, i comes with probability
 * w[i] / total. Every addition and the one multiplication are single IEEE operations (correctly
 * rounded on the CPU and, in SPIR-V with `precise`, on a Vulkan device), and the comparisons
 * are exact, so both devices agree bit for bit on inputs without subnormal numbers (a device
 * may flush those to zero).
 *
 * Without replacement the kernels draw nothing: they replace each weight by its
 * exponential-race key -log(u) / w (u = ((x >> 8) + 1) 2^-24 in (0, 1] from word r * K + i of
 * the request, in float64 (x + 1) 2^-32; +inf for a zero weight), and the definition keeps the
 * n smallest keys of each row in ascending order (a stable sort: equal keys by position). The
 * smallest of independent exponentials E_i / w_i is i with probability w_i / sum(w), and the
 * rest race on without it, so the order of the keys is a sequence of draws without
 * replacement, exactly. Here the devices agree where no two keys of a row are within the
 * rounding of their logarithms (the log and the division are not correctly rounded on GPUs).
 * Work is O(K) per row plus the sort, on any device, with no long sequential loop.
 *
 * Before drawing, each row is checked; the first failing check, in this order, is the error:
 * a weight that is negative, inf or NaN (the first such position), a zero total, an infinite
 * total (overflow), and, without replacement, fewer nonzero weights than n.
 */
#ifndef EMBER_MULTINOMIAL_H
#define EMBER_MULTINOMIAL_H

#include <stddef.h>
#include <stdint.h>

enum { EM_MN_CHUNK = 256, EM_MN_MAX_CHUNKS = 2048 };

/* Weights per chunk for a row of K. */
static inline int64_t em_mn_chunk(int64_t K) {
  int64_t c = (K + EM_MN_MAX_CHUNKS - 1) / EM_MN_MAX_CHUNKS;
  return c < EM_MN_CHUNK ? EM_MN_CHUNK : c;
}

/* A row's check (the kernels' report codes; kernels/multinomial.comp uses the same numbers). */
typedef enum em_mn_status {
  EM_MN_OK = 0,
  EM_MN_BAD_WEIGHT = 1, /* pos: the first negative, inf or NaN weight; value: it */
  EM_MN_ZERO_ROW = 2,
  EM_MN_OVERFLOW = 3,   /* the weights are finite but their sum is not */
  EM_MN_TOO_FEW = 4     /* without replacement; pos: the count of nonzero weights */
} em_mn_status;

/* The message of a failed check (ops/multinomial.c), written the same for the CPU's immediate
 * error and a device's deferred report. row and pos are 0-based; the message counts from 1, as
 * the Lua caller does. */
void em_multinomial_message(char *buf, size_t cap, em_mn_status st, int64_t row, int64_t pos,
                            double value, int64_t n, const char *dtype);

#endif
