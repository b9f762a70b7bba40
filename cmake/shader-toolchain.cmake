# The shader toolchain (included by CMakeLists.txt): which glslangValidator compiles kernels/,
# which Vulkan headers the runtime compiles against, and which kernel flavors that compiler
# accepts (each found by compiling a tiny probe shader, so no version number is trusted).
#
# EMBER_GLSLANG picks the compiler:
#   auto    (default) the newer glslang that scripts/fetch-glslang.sh built into its cache,
#           with the Vulkan 1.4 headers cached beside it; else the system's glslang-tools.
#           EMBER_SYSTEM_GLSLANG=1 in the environment of a configure run means `system`.
#   system  Debian's glslangValidator from PATH and the system Vulkan headers.
#   <path>  that glslangValidator (headers: <path>/../../libvulkan-dev/usr/include if present).
#
# Sets: GLSLANG_VALIDATOR, EMBER_GLSLANG_VERSION, EMBER_VULKAN_INCLUDE (empty: the system's),
#       EMBER_COOPMAT_FLAVORS (KHR NV: kernels/coopmat/*.comp per flavor),
#       EMBER_COOPMAT2 (kernels/coopmat2/*.comp), EMBER_SHADER_DEFINES (for the runtime),
#       EMBER_GLSLANG_ID (a file whose contents change when the compiler does; every SPIR-V
#       module depends on it, so switching compilers rebuilds them all).

set(EMBER_GLSLANG auto CACHE STRING
    "glslangValidator for the kernels: auto (cached newer one, else system), system, or a path")

set(GLSLANG_VALIDATOR "")
set(EMBER_VULKAN_INCLUDE "")
set(glslang_choice ${EMBER_GLSLANG})
set(glslang_origin "EMBER_GLSLANG=${EMBER_GLSLANG}")
if(glslang_choice STREQUAL "auto" AND "$ENV{EMBER_SYSTEM_GLSLANG}" STREQUAL "1")
  set(glslang_choice system)
  set(glslang_origin "EMBER_SYSTEM_GLSLANG=1")
endif()
if(glslang_choice STREQUAL "auto")
  execute_process(COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/fetch-glslang.sh --print-prefix
                  OUTPUT_VARIABLE toolchain_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND EXISTS ${toolchain_prefix}/bin/glslangValidator)
    set(GLSLANG_VALIDATOR ${toolchain_prefix}/bin/glslangValidator)
    set(glslang_origin "cached by scripts/fetch-glslang.sh")
  else()
    set(glslang_choice system)
    set(glslang_origin "no cached newer glslang")
  endif()
elseif(NOT glslang_choice STREQUAL "system")
  if(NOT EXISTS ${glslang_choice})
    message(FATAL_ERROR "EMBER_GLSLANG: expected auto, system or the path of a glslangValidator, "
                        "got '${glslang_choice}' (no such file)")
  endif()
  set(GLSLANG_VALIDATOR ${glslang_choice})
endif()
if(glslang_choice STREQUAL "system")
  find_program(GLSLANG_SYSTEM glslangValidator)
  if(NOT GLSLANG_SYSTEM)
    message(FATAL_ERROR "glslangValidator not found: install Debian's glslang-tools (make deps)")
  endif()
  set(GLSLANG_VALIDATOR ${GLSLANG_SYSTEM})
  set(glslang_origin "system glslang-tools, ${glslang_origin}")
else()
  get_filename_component(dir ${GLSLANG_VALIDATOR} DIRECTORY)
  if(EXISTS ${dir}/../libvulkan-dev/usr/include/vulkan/vulkan_core.h)
    get_filename_component(EMBER_VULKAN_INCLUDE ${dir}/../libvulkan-dev/usr/include ABSOLUTE)
  endif()
endif()

execute_process(COMMAND ${GLSLANG_VALIDATOR} --version OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${GLSLANG_VALIDATOR} --version failed (${rc})")
endif()
string(REGEX MATCH "Glslang Version: [0-9]+:([0-9.]+)" _ "${out}")
set(EMBER_GLSLANG_VERSION "${CMAKE_MATCH_1}")
set(EMBER_GLSLANG_ID ${CMAKE_BINARY_DIR}/glslang.id)
file(CONFIGURE OUTPUT ${EMBER_GLSLANG_ID}
     CONTENT "${GLSLANG_VALIDATOR} ${EMBER_GLSLANG_VERSION}\n" @ONLY)

# ---- probes: one tiny shader per capability, compiled at the target env its kernels use ----
# Cooperative matrices (tensor cores): Debian 12's glslang 12 knows GL_NV_cooperative_matrix
# only (it lowers to pre-Hopper instructions); 15.1 adds GL_KHR_cooperative_matrix and
# GL_NV_cooperative_matrix2 (workgroup-scope matrices, tensor layouts: Hopper-class loads).
set(env_NV vulkan1.1)
set(probe_NV "#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
void main() {
  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> m = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
  coopMatStoreNV(m, x, 0, 16, false);
}")
set(env_KHR vulkan1.2)
set(probe_KHR "#extension GL_KHR_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define MAT coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>
void main() { MAT m = MAT(0.0); coopMatStore(m, x, 0, 16, gl_CooperativeMatrixLayoutRowMajor); }")
set(env_NV2 vulkan1.3)
set(probe_NV2 "#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#define MAT coopmat<float, gl_ScopeWorkgroup, 64, 64, gl_MatrixUseAccumulator>
void main() {
  MAT m = MAT(0.0);
  tensorLayoutNV<2> t = createTensorLayoutNV(2);
  t = setTensorLayoutDimensionNV(t, 64, 64);
  coopMatStoreTensorNV(m, x, 0, t);
}")
# bfloat16 as a shader type (glslang 15.1 does not know it yet: bf16 data then travels as
# uint16 and is widened by hand).
set(env_BF16 vulkan1.1)
set(probe_BF16 "#extension GL_EXT_bfloat16 : require
void main() { bfloat16_t b = bfloat16_t(x[0]); x[1] = float(b); }")
# Packed 8-bit dot products (int8 inference kernels).
set(env_INT_DOT vulkan1.1)
set(probe_INT_DOT "#extension GL_EXT_integer_dot_product : require
void main() { x[0] = float(dotPacked4x8EXT(floatBitsToUint(x[1]), floatBitsToUint(x[2]))); }")

set(EMBER_SHADER_CAPS "")
set(missing_caps "")
foreach(cap NV KHR NV2 BF16 INT_DOT)
  set(probe ${CMAKE_BINARY_DIR}/probes/${cap}.comp)
  file(WRITE ${probe} "#version 450
#extension GL_KHR_memory_scope_semantics : require
layout(local_size_x = 128) in;
layout(std430, binding = 0) buffer Out { float x[]; };
${probe_${cap}}
")
  execute_process(COMMAND ${GLSLANG_VALIDATOR} --quiet -V --target-env ${env_${cap}} -o ${probe}.spv ${probe}
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc EQUAL 0)
    list(APPEND EMBER_SHADER_CAPS ${cap})
  else()
    list(APPEND missing_caps ${cap})
  endif()
endforeach()

set(EMBER_COOPMAT_FLAVORS "")
set(EMBER_SHADER_DEFINES "")
foreach(flavor KHR NV)
  if(flavor IN_LIST EMBER_SHADER_CAPS)
    list(APPEND EMBER_COOPMAT_FLAVORS ${flavor})
    list(APPEND EMBER_SHADER_DEFINES EMBER_VK_COOPMAT_${flavor}=1)
  endif()
endforeach()
set(EMBER_COOPMAT2 OFF)
if(NV2 IN_LIST EMBER_SHADER_CAPS)
  set(EMBER_COOPMAT2 ON)
  list(APPEND EMBER_SHADER_DEFINES EMBER_VK_COOPMAT2=1)
endif()
if(BF16 IN_LIST EMBER_SHADER_CAPS)
  list(APPEND EMBER_SHADER_DEFINES EMBER_VK_GLSL_BF16=1)
endif()
if(INT_DOT IN_LIST EMBER_SHADER_CAPS)
  list(APPEND EMBER_SHADER_DEFINES EMBER_VK_GLSL_INT_DOT=1)
endif()
# The compiler's version, for `ember doctor` (runtime/src/diagnostics.c stringizes it).
if(EMBER_GLSLANG_VERSION)
  list(APPEND EMBER_SHADER_DEFINES EMBER_GLSLANG_VERSION=${EMBER_GLSLANG_VERSION})
endif()

# The report: printed (to stderr, past the Makefile's quiet configure) when it differs from
# the last configure of this build directory, and in CMake's status output every time.
if(EMBER_VULKAN_INCLUDE)
  set(headers "Vulkan headers ${EMBER_VULKAN_INCLUDE}")
else()
  set(headers "system Vulkan headers")
endif()
string(REPLACE ";" " " caps "${EMBER_SHADER_CAPS}")
string(REPLACE ";" " " missing_caps "${missing_caps}")
set(report "shaders: glslang ${EMBER_GLSLANG_VERSION} ${GLSLANG_VALIDATOR} (${glslang_origin}), ${headers}")
set(report2 "shader capabilities built: ${caps}; not available: ${missing_caps}")
if(NOT "${report} ${report2}" STREQUAL "${EMBER_TOOLCHAIN_REPORT}")
  message(NOTICE "-- Ember ${report}\n-- Ember ${report2}")
else()
  message(STATUS "Ember ${report}")
  message(STATUS "Ember ${report2}")
endif()
set(EMBER_TOOLCHAIN_REPORT "${report} ${report2}" CACHE INTERNAL "the last configure's shader toolchain")
