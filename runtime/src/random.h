/*
 * random.h: the Philox-4x32-10 block function and the layout of Ember's random stream, shared
 * by the op definitions (random.c), the CPU kernel (cpu/random.c) and the known-answer tests.
 *
 * Philox-4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3",
 * SC 2011) maps a 128-bit counter and a 64-bit key to 128 random bits. It is the generator of
 * cuRAND, PyTorch's CUDA backend and JAX, and it is stateless: any element of the stream can be
 * computed on its own, which is what lets threads (and later GPUs) fill a tensor in any order
 * and still produce the same values.
 *
 * Ember's stream (docs/design.md, "Random numbers"):
 *  - key = the 64-bit seed: key[0] its low 32 bits, key[1] its high 32 bits;
 *  - block c (a 64-bit counter) is Philox of ctr = {lo32(c), hi32(c), 0, 0};
 *  - a request that starts at block `offset` sees the words of blocks offset, offset+1, ... in
 *    lane order: word j is lane j % 4 of block offset + j / 4;
 *  - element i of the (contiguous, row-major) result uses words [w*i, w*i + w), where w, the
 *    words per element, is em_random_words(): 1, or 2 where 64 bits are needed (float64 values,
 *    integers). With two words the 64-bit value is word0 | word1 << 32;
 *  - the generator's offset then advances by ceil(w * n / 4) blocks.
 * With w == 1 this is backend.h's "counter offset + i / 4, lane i % 4".
 */
#ifndef EMBER_RANDOM_H
#define EMBER_RANDOM_H

#include "backend.h"

enum {
  EM_PHILOX_M0 = 0xD2511F53u, EM_PHILOX_M1 = 0xCD9E8D57u,  /* round multipliers */
  EM_PHILOX_W0 = 0x9E3779B9u, EM_PHILOX_W1 = 0xBB67AE85u   /* key schedule (Weyl) constants */
};

/* One Philox-4x32-10 block with a full 128-bit counter (the form the published known-answer
 * vectors use). Ten rounds; the key is bumped between rounds. */
static inline void em_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                                    uint32_t out[4]) {
  uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; round++) {
    uint64_t p0 = (uint64_t)EM_PHILOX_M0 * c0;
    uint64_t p1 = (uint64_t)EM_PHILOX_M1 * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
    c1 = (uint32_t)p1;
    c3 = (uint32_t)p0;
    c0 = n0;
    c2 = n2;
    k0 += EM_PHILOX_W0;
    k1 += EM_PHILOX_W1;
  }
  out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* Block `counter` of the stream keyed by `seed` (the layout above). */
static inline void em_philox_stream_block(uint64_t seed, uint64_t counter, uint32_t out[4]) {
  const uint32_t ctr[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), 0, 0};
  const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  em_philox4x32_10(ctr, key, out);
}

/* Words of the stream each element takes: two where 64 random bits are needed (float64
 * uniform and normal values, integers of any dtype), one otherwise. */
static inline int em_random_words(em_random_kind kind, em_dtype dtype) {
  if (kind == EM_RANDOM_INT) return 2;
  if ((kind == EM_RANDOM_UNIFORM || kind == EM_RANDOM_NORMAL) && dtype == EM_FLOAT64) return 2;
  return 1;
}

/* Blocks a request of n elements consumes. */
static inline uint64_t em_random_blocks(em_random_kind kind, em_dtype dtype, int64_t n) {
  return ((uint64_t)n * (uint64_t)em_random_words(kind, dtype) + 3) / 4;
}

/* Uniform values in [a, b) are capped at this: the largest value of the floating dtype below b
 * (a itself when [a, b) holds no other value of the dtype), so rounding never produces b. Shared
 * by the CPU and Vulkan kernels so both cap at the same value. */
double em_random_uniform_cap(em_dtype d, double a, double b);

#endif
