// matmul_push.glsl: the push constants every matmul kernel shares (kernels/matmul.comp,
// kernels/coopmat/*.comp; the C side is mm_push in runtime/src/vulkan/vk_matmul.h), and the
// batch decomposition of the gemm slot (runtime/src/backend.h).
//
// A product covers B1 x B2 matrices (a 3-D slot call is B1 = 1, B2 = B). The grid's z, plus
// batch0 where a grid is split over the device's limits, is the flat batch index z in
// [0, B1 * B2), which is (z / nb2, z % nb2); each operand has its own stride for both batch dims
// (0: the matrix is shared along that dim), so strided, transposed and broadcast batches all
// run in one dispatch. out is contiguous: its matrix z starts at o_base + z * o_sb.
//
// A kernel defines MM_SCALAR (the type of alpha and beta: float, double or uint64_t) before
// including this file. 128 bytes (the C struct is checked to match); kernels without c get the
// first 104 (float alpha, beta) or 112.
#ifndef MM_SCALAR
#define MM_SCALAR float
#endif

layout(push_constant) uniform Params {
  uint M, N, K;
  uint a_base, b_base, o_base;  // element offsets of the operands' first elements
  int a_sm, a_sk, b_sk, b_sn;   // matrix strides in elements (any sign; index math wraps in uint)
  int a_sb1, a_sb2;             // a's batch strides, outer (B1) and inner (B2) dim
  int b_sb1, b_sb2;             // b's
  uint nb2;                     // B2: the inner batch dim's size (>= 1)
  uint o_sb;                    // out's stride per flat batch (M * N)
  uint m0;                      // first row tile of this launch (large grids are split)
  uint batch0;                  // first flat batch of this launch
  uint n0;                      // first column tile of this launch
  uint a_mode, b_mode, flags;   // matmul.comp's generic pipeline reads these
  uint ksplit;                  // matmul.comp: K per split (0: none); the split is z then
  uint pad_;
  MM_SCALAR alpha, beta;
  // c of addmm/baddbmm (matmul.comp with FLAGS bit 3; the gemm_add slot): beta * c is read
  // from binding 3 at c_base + z c_sb + row c_rs + col c_cs instead of from out.
  layout(offset = 112) uint c_base;
  int c_sb, c_rs, c_cs;
} p;

// The element offset of flat batch z's matrix in an operand with batch strides sb1, sb2.
uint mm_batch_offset(uint z, int sb1, int sb2) {
  return (z / p.nb2) * uint(sb1) + (z % p.nb2) * uint(sb2);
}
uint mm_a_base(uint z) { return p.a_base + mm_batch_offset(z, p.a_sb1, p.a_sb2); }
uint mm_b_base(uint z) { return p.b_base + mm_batch_offset(z, p.b_sb1, p.b_sb2); }
uint mm_o_base(uint z) { return p.o_base + z * p.o_sb; }
