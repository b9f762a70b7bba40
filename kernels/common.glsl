// common.glsl: what every Ember compute kernel shares (runtime/src/vulkan/vk_kernels.c fills
// the other side).
//
//  - One descriptor-set layout for every kernel: binding k is operand k, a storage buffer
//    seen as 32-bit words. Tensors of every dtype live in them: 8- and 16-bit elements
//    are packed into words (stores to them use atomics, since neighbours may belong to other
//    invocations), 64-bit elements take two words. So no kernel needs 8/16-bit storage.
//  - One push-constant block of 128 bytes (the guaranteed minimum): the element count, up to 4
//    coalesced dimensions (innermost first) with each operand's strides, the operands' element
//    offsets, the op code, formats and scalar arguments. Operand 0 is the output.
//  - A grid-stride loop: element i of the flattened shape maps to one element of each operand.
//
// Formats are em_dtype values (ember.h).
#define F_F32 0u
#define F_F64 1u
#define F_F16 2u
#define F_BF16 3u
#define F_I8 4u
#define F_U8 5u
#define F_I16 6u
#define F_I32 7u
#define F_I64 8u
#define F_BOOL 9u

#define WG_SIZE 256
layout(local_size_x = WG_SIZE) in;

// Binding k is operand k. Operand 0, the output, is writable; the inputs are declared
// readonly, so the driver and the validation layer's synchronization checks see what a kernel
// only reads. (The set layout has VK_MAX_OPERANDS bindings; these kernels use the first 4.)
layout(std430, set = 0, binding = 0) buffer Words0 { uint w[]; } buf0;
layout(std430, set = 0, binding = 1) readonly buffer Words1 { uint w[]; } buf1;
layout(std430, set = 0, binding = 2) readonly buffer Words2 { uint w[]; } buf2;
layout(std430, set = 0, binding = 3) readonly buffer Words3 { uint w[]; } buf3;
#define BUF(K) buf##K

layout(push_constant) uniform Params {
  uint n;          // elements in this dispatch
  uint ndim;       // coalesced dimensions, 1 to 4
  uint op;         // the kernel's op code
  uint fmt;        // formats: bits 0-3 operand 0, 4-7 operand 1, 8-11 operand 2, 12-15
                   // operand 3; higher bits are op flags
  uint size[4];    // dimension sizes, innermost first
  int stride[16];  // stride[4 * k + d]: operand k's stride along dimension d, in elements
  uint base[4];    // element offset of each operand's first element in its buffer
  uint arg[4];     // scalar arguments (their encoding depends on the kernel)
} pc;

// Specialization constants: a pipeline may fix the op, the formats (with the op's flags) and
// the number of dimensions when it is created (runtime/src/vulkan/vk_pipeline.c), so the
// driver's compiler drops every other path; ~0u (0 for the dimensions) means "read it from the
// push constants", and then one pipeline serves every op of the kernel.
layout(constant_id = 0) const uint SPEC_OP = 0xffffffffu;
layout(constant_id = 1) const uint SPEC_FMT = 0xffffffffu;
layout(constant_id = 2) const uint SPEC_NDIM = 0u;
uint kop() { return SPEC_OP != 0xffffffffu ? SPEC_OP : pc.op; }
uint kfmt() { return SPEC_FMT != 0xffffffffu ? SPEC_FMT : pc.fmt; }
uint kndim() { return SPEC_NDIM != 0u ? SPEC_NDIM : pc.ndim; }

uint fmt_of(uint k) { return (kfmt() >> (4u * k)) & 15u; }

// Element offsets of the four operands for flat index i.
uvec4 element_offsets(uint i) {
  uvec4 off = uvec4(pc.base[0], pc.base[1], pc.base[2], pc.base[3]);
  uint r = i;
  uint ndim = kndim();
  for (uint d = 0u; d < ndim; d++) {
    uint c = r;
    if (d + 1u < ndim) {
      c = r % pc.size[d];
      r = r / pc.size[d];
    }
    // int -> uint keeps the bit pattern: negative strides wrap back correctly.
    off += uvec4(c) * uvec4(ivec4(pc.stride[d], pc.stride[4 + d], pc.stride[8 + d], pc.stride[12 + d]));
  }
  return off;
}

// ---- raw element access by size. K must be a literal (buffer arrays are indexed by
// constants only, so no descriptor-indexing feature is needed). ----
#define LD8(K, e) ((BUF(K).w[(e) >> 2] >> (((e) & 3u) * 8u)) & 0xffu)
#define LD16(K, e) ((BUF(K).w[(e) >> 1] >> (((e) & 1u) * 16u)) & 0xffffu)
#define LD32(K, e) (BUF(K).w[e])
#define LD64(K, e) uvec2(BUF(K).w[2u * (e)], BUF(K).w[2u * (e) + 1u])
// Sub-word stores clear, then set their bits, each atomically: other invocations may be
// writing the other bytes of the same word.
#define ST8(K, e, v)                                                                    \
  do {                                                                                  \
    uint st_w_ = (e) >> 2, st_s_ = ((e) & 3u) * 8u;                                     \
    atomicAnd(BUF(K).w[st_w_], ~(0xffu << st_s_));                                      \
    atomicOr(BUF(K).w[st_w_], ((v) & 0xffu) << st_s_);                                  \
  } while (false)
#define ST16(K, e, v)                                                                   \
  do {                                                                                  \
    uint st_w_ = (e) >> 1, st_s_ = ((e) & 1u) * 16u;                                    \
    atomicAnd(BUF(K).w[st_w_], ~(0xffffu << st_s_));                                    \
    atomicOr(BUF(K).w[st_w_], ((v) & 0xffffu) << st_s_);                                \
  } while (false)
#define ST32(K, e, v) BUF(K).w[e] = (v)
#define ST64(K, e, v)                                                                   \
  do {                                                                                  \
    uvec2 st_v_ = (v);                                                                  \
    BUF(K).w[2u * (e)] = st_v_.x;                                                       \
    BUF(K).w[2u * (e) + 1u] = st_v_.y;                                                  \
  } while (false)

// ---- 16-bit floats (half_to_float, float_to_half, bf16_to_float, float_to_bf16) ----
#include "half16.glsl"

// ---- the driver: main() of every kernel ----
// A kernel defines `uvec2 element_bits(uint i, uvec4 off)`: the bits of output element i
// (the low 8 or 16 bits for 1- and 2-byte formats, two words for 8-byte ones), given the
// operands' element offsets. KERNEL_MAIN stores them, in a grid-stride loop (a grid smaller
// than the tensor loops). When operand 0 has 1- or 2-byte elements laid out contiguously in
// the order of i (FLAG_PACKED, decided by the host), each invocation computes the 4 or 2
// elements of whole 32-bit words and stores each word once, plainly, instead of two atomics
// per element; only the words at the ends of the range, which may hold bytes of other
// elements, are merged atomically.
#define FLAG_PACKED (1u << 20)

uint fmt_size(uint f) {
  if (f == F_F64 || f == F_I64) return 8u;
  if (f == F_F32 || f == F_I32) return 4u;
  if (f == F_F16 || f == F_BF16 || f == F_I16) return 2u;
  return 1u;
}

void store_bits(uint e, uint size, uvec2 v) {
  if (size == 4u) ST32(0, e, v.x);
  else if (size == 8u) ST64(0, e, v);
  else if (size == 2u) ST16(0, e, v.x);
  else ST8(0, e, v.x);
}

#define KERNEL_MAIN KERNEL_MAIN_AS(main)
// KERNEL_MAIN_AS(name) defines the same driver under another name, for a kernel whose own
// main() picks between it and a faster path (pointwise.comp's vec4 path).
#define KERNEL_MAIN_AS(NAME)                                                            \
  void NAME() {                                                                         \
    uint step_ = gl_NumWorkGroups.x * uint(WG_SIZE);                                    \
    uint size = fmt_size(fmt_of(0u));                                                   \
    if (size < 4u && (kfmt() & FLAG_PACKED) != 0u) {                                    \
      uint per = 4u / size, bits = 8u * size, mask = size == 1u ? 0xffu : 0xffffu;     \
      uint first = pc.base[0];                                                          \
      uint w0 = first / per, nw = (first + pc.n - 1u) / per - w0 + 1u;                  \
      for (uint k = gl_GlobalInvocationID.x; k < nw; k += step_) {                      \
        uint w = w0 + k, word = 0u, valid = 0u;                                         \
        for (uint j = 0u; j < per; j++) {                                               \
          uint e = w * per + j;                                                         \
          if (e >= first && e - first < pc.n) {                                         \
            uint i = e - first;                                                         \
            word |= (element_bits(i, element_offsets(i)).x & mask) << (j * bits);       \
            valid |= mask << (j * bits);                                                \
          }                                                                             \
        }                                                                               \
        if (valid == 0xffffffffu) {                                                     \
          buf0.w[w] = word;                                                           \
        } else {                                                                        \
          atomicAnd(buf0.w[w], ~valid);                                               \
          atomicOr(buf0.w[w], word);                                                  \
        }                                                                               \
        if (nw - k <= step_) break;                                                     \
      }                                                                                 \
      return;                                                                           \
    }                                                                                   \
    for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += step_) {                      \
      uvec4 off = element_offsets(i);                                                   \
      store_bits(off.x, size, element_bits(i, off));                                    \
      if (pc.n - i <= step_) break;                                                     \
    }                                                                                   \
  }
