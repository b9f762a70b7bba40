#!/bin/sh
# tools/spirv_bf16_test.sh: checks tools/spirv_bf16.c (ctest c_spirv_bf16; CMakeLists.txt passes
# the arguments). The cm2 kernel's module is accepted and grows by exactly what the rewrite adds;
# kernels that use their 16-bit floats in any other way than moving them, multiplying them into
# a float32 accumulator and converting them to float32 are refused with a clear message.
#   spirv_bf16_test.sh <spirv_bf16> <glslangValidator> <build>/kernels/matmul_cm2.spv
set -eu
tool=$1 glslang=$2 cm2=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# accepted: encoding operand (1 word), two capabilities (4), the extension (6), Float16 dropped (-2)
"$tool" "$cm2" "$dir/ok.spv"
grow=$(( $(wc -c < "$dir/ok.spv") - $(wc -c < "$cm2") ))
[ "$grow" -eq 36 ] ||
  { echo "FAIL: the rewritten cm2 module grew by $grow bytes, expected 36"; exit 1; }
grep -q SPV_KHR_bfloat16 "$dir/ok.spv" || { echo "FAIL: no SPV_KHR_bfloat16 extension"; exit 1; }
# a module rewritten once has no IEEE half left
if "$tool" "$dir/ok.spv" "$dir/twice.spv" 2>/dev/null; then echo "FAIL: rewrote twice"; exit 1; fi

head='#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer X { float16_t x[]; };
layout(std430, binding = 1) buffer Y { float y[]; };
#define M(use) coopmat<float16_t, gl_ScopeSubgroup, 16, 16, use>
#define ROW gl_CooperativeMatrixLayoutRowMajor'
n=0
refuse() { # name, main's body: must compile, and be refused
  n=$((n + 1))
  printf '%s\nvoid main() { uint i = gl_LocalInvocationID.x; %s }\n' "$head" "$2" > "$dir/$n.comp"
  "$glslang" --quiet -V --target-env vulkan1.3 -o "$dir/$n.spv" "$dir/$n.comp" > "$dir/$n.log" ||
    { echo "FAIL: $1 does not compile:"; cat "$dir/$n.log"; exit 1; }
  if "$tool" "$dir/$n.spv" "$dir/$n.out.spv" 2> "$dir/$n.err"; then
    echo "FAIL: $1 was rewritten, expected a refusal"; exit 1
  fi
  grep -q "cannot be read as bfloat16" "$dir/$n.err" ||
    { echo "FAIL: $1: unexpected message:"; cat "$dir/$n.err"; exit 1; }
  echo "ok: refuses $1: $(cat "$dir/$n.err")"
}
refuse "float16 arithmetic and constants" 'x[i] = x[i] * float16_t(2.0);'
refuse "a scalar float16 copy" 'x[i] = x[i + 32u];'
refuse "a scalar conversion to float32" 'y[i] = float(x[i]);'
refuse "a float16 accumulator" 'M(gl_MatrixUseA) a; M(gl_MatrixUseB) b;
  M(gl_MatrixUseAccumulator) c;
  coopMatLoad(a, x, 0, 16, ROW); coopMatLoad(b, x, 256, 16, ROW);
  coopMatLoad(c, x, 512, 16, ROW);
  c = coopMatMulAdd(a, b, c); coopMatStore(c, x, 0, 16, ROW);'
refuse "cooperative-matrix arithmetic" 'M(gl_MatrixUseAccumulator) c;
  coopMatLoad(c, x, 0, 16, ROW);
  c = c + c; coopMatStore(c, x, 0, 16, ROW);'
echo "spirv_bf16: all checks passed"
