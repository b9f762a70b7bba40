# install.cmake: what `cmake --install` (and `make install PREFIX=... DESTDIR=...`) puts where.
#
#   <prefix>/include/ember.h                      the whole public API
#   <prefix>/lib/libember.so.X.Y.Z (+ SONAME and dev links), <prefix>/lib/libember.a
#   <prefix>/bin/ember                            the program (REPL, scripts)
#   <prefix>/share/lua/5.1/ember/                 the Lua package, where LuaJIT looks by default
#                                                 (for /usr and /usr/local), + installed.lua
#   <prefix>/share/doc/ember/                     the docs, which the REPL's ?name reads
#   <prefix>/lib/pkgconfig/ember.pc               pkg-config (Libs.private: static linking)
#   <prefix>/lib/cmake/Ember/                     find_package(Ember): Ember::ember(_static)
#
# Everything that points at something else in the install does so by a relative path (the
# program's RUNPATH $ORIGIN/../lib and its Lua folder, the Lua package's installed.lua, the
# CMake package), so an install works from any prefix, and a staged one under DESTDIR works
# in place (the tests run it there: tests/install). ember.pc alone states its prefix, as
# pkg-config files do; it is written at install time, so `--prefix` given then is the one.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(EMBER_INSTALL_LUADIR ${CMAKE_INSTALL_DATADIR}/lua/5.1)
set(EMBER_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Ember)
set(EMBER_INSTALL_PCDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
# CMAKE_INSTALL_DOCDIR is share/doc/<project name>, i.e. share/doc/ember.

# Relative paths between install folders, from a fixed stand-in prefix (the real one may be
# given only at install time; relative folders do not depend on it).
function(ember_relative var from to)
  file(RELATIVE_PATH rel /prefix/${from} /prefix/${to})
  string(REGEX REPLACE "/$" "" rel "${rel}")
  if(rel STREQUAL "")
    set(rel .)
  endif()
  set(${var} ${rel} PARENT_SCOPE)
endfunction()
ember_relative(EMBER_BIN_TO_LIB ${CMAKE_INSTALL_BINDIR} ${CMAKE_INSTALL_LIBDIR})
ember_relative(EMBER_BIN_TO_LUA ${CMAKE_INSTALL_BINDIR} ${EMBER_INSTALL_LUADIR})
ember_relative(EMBER_BIN_TO_DOCS ${CMAKE_INSTALL_BINDIR} ${CMAKE_INSTALL_DOCDIR})
ember_relative(EMBER_LUA_TO_LIB ${EMBER_INSTALL_LUADIR}/ember ${CMAKE_INSTALL_LIBDIR})
ember_relative(EMBER_LUA_TO_DOCS ${EMBER_INSTALL_LUADIR}/ember ${CMAKE_INSTALL_DOCDIR})
ember_relative(EMBER_CMAKE_TO_PREFIX ${EMBER_INSTALL_CMAKEDIR} "")

# The program finds the installed Lua package and docs next to itself (runtime/cli/main.c).
target_compile_definitions(ember_cli PRIVATE EMBER_INSTALL_LUA_REL="${EMBER_BIN_TO_LUA}"
                                             EMBER_INSTALL_DOCS_REL="${EMBER_BIN_TO_DOCS}")
set_property(TARGET ember_cli PROPERTY INSTALL_RPATH "$ORIGIN/${EMBER_BIN_TO_LIB}"
                                                     ${CMAKE_INSTALL_RPATH})

# The static library's dependencies, for ember.pc's Libs.private and Ember::ember_static: the
# OpenBLAS the build used (its OpenMP build; found on the loader's path through an rpath, as the
# build's own programs do), GCC's OpenMP runtime (libember.a calls GOMP_*, whichever compiler
# links it), zlib (Requires.private), libdl (the Vulkan loader is opened at run time), libm,
# pthreads, and OpenBLAS's Fortran runtime, which its static archive (LAPACK) needs.
get_filename_component(EMBER_OPENBLAS_DIR ${OPENBLAS_LIB} DIRECTORY)
set(EMBER_PC_LIBS_PRIVATE "-L${EMBER_OPENBLAS_DIR} -Wl,-rpath,${EMBER_OPENBLAS_DIR} -lopenblas")
string(APPEND EMBER_PC_LIBS_PRIVATE " -lgfortran -lquadmath -lgomp -lpthread -ldl -lm")
set(EMBER_CMAKE_STATIC_DEPS ${OPENBLAS_LIB})
if(OPENBLAS_LIB MATCHES "\\.a$")
  list(APPEND EMBER_CMAKE_STATIC_DEPS gfortran quadmath)
endif()
list(APPEND EMBER_CMAKE_STATIC_DEPS gomp z pthread dl m)

install(TARGETS ember ember_static ember_cli
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_SOURCE_DIR}/runtime/include/ember.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(DIRECTORY ${CMAKE_SOURCE_DIR}/lua/ember DESTINATION ${EMBER_INSTALL_LUADIR})
configure_file(${CMAKE_SOURCE_DIR}/cmake/install/installed.lua.in
               ${CMAKE_BINARY_DIR}/install/installed.lua @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/install/installed.lua
        DESTINATION ${EMBER_INSTALL_LUADIR}/ember)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
        FILES_MATCHING PATTERN "*.md")

# ember.pc: configured now with everything but the prefix, which install time fills in.
set(EMBER_PC_PREFIX "@EMBER_PC_PREFIX@")
configure_file(${CMAKE_SOURCE_DIR}/cmake/install/ember.pc.in
               ${CMAKE_BINARY_DIR}/install/ember.pc.in @ONLY)
install(CODE "
  set(EMBER_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${CMAKE_BINARY_DIR}/install/ember.pc.in\"
                 \"${CMAKE_BINARY_DIR}/install/ember.pc\" @ONLY)")
install(FILES ${CMAKE_BINARY_DIR}/install/ember.pc DESTINATION ${EMBER_INSTALL_PCDIR})

configure_file(${CMAKE_SOURCE_DIR}/cmake/install/EmberConfig.cmake.in
               ${CMAKE_BINARY_DIR}/install/EmberConfig.cmake @ONLY)
# 0.x: a new minor version may change the API (as the SONAME says), so only X.Y matches.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(EMBER_COMPAT SameMinorVersion)
else()
  set(EMBER_COMPAT SameMajorVersion)
endif()
write_basic_package_version_file(${CMAKE_BINARY_DIR}/install/EmberConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY ${EMBER_COMPAT})
install(FILES ${CMAKE_BINARY_DIR}/install/EmberConfig.cmake
              ${CMAKE_BINARY_DIR}/install/EmberConfigVersion.cmake
        DESTINATION ${EMBER_INSTALL_CMAKEDIR})

# ---- the Lua bridge (cmake/lua_host.cmake) ------------------------------------------------
#   <prefix>/include/ember_lua.h, <prefix>/lib/libember_lua.so.X.Y.Z (+ links), libember_lua.a
#   <prefix>/lib/pkgconfig/ember-lua.pc           Requires: ember luajit
#   Ember::ember_lua in the CMake package above
# The installed library finds the installed Lua package relative to itself, as the program
# does; the full install paths are its fallback (a static bridge linked into a program
# elsewhere).
if(EMBER_LUA_BRIDGE)
  ember_relative(EMBER_LIB_TO_LUA ${CMAKE_INSTALL_LIBDIR} ${EMBER_INSTALL_LUADIR})
  ember_relative(EMBER_LIB_TO_DOCS ${CMAKE_INSTALL_LIBDIR} ${CMAKE_INSTALL_DOCDIR})
  target_compile_definitions(ember_lua_objs PRIVATE
    EMBER_LIB_TO_LUA="${EMBER_LIB_TO_LUA}" EMBER_LIB_TO_DOCS="${EMBER_LIB_TO_DOCS}"
    EMBER_INSTALL_FULL_LUADIR="${CMAKE_INSTALL_PREFIX}/${EMBER_INSTALL_LUADIR}"
    EMBER_INSTALL_FULL_DOCDIR="${CMAKE_INSTALL_FULL_DOCDIR}")
  set_property(TARGET ember_lua PROPERTY INSTALL_RPATH "$ORIGIN" ${CMAKE_INSTALL_RPATH})
  install(TARGETS ember_lua ember_lua_static
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${CMAKE_SOURCE_DIR}/runtime/include/ember_lua.h
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  configure_file(${CMAKE_SOURCE_DIR}/cmake/install/ember-lua.pc.in
                 ${CMAKE_BINARY_DIR}/install/ember-lua.pc.in @ONLY)
  install(CODE "
    set(EMBER_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
    configure_file(\"${CMAKE_BINARY_DIR}/install/ember-lua.pc.in\"
                   \"${CMAKE_BINARY_DIR}/install/ember-lua.pc\" @ONLY)")
  install(FILES ${CMAKE_BINARY_DIR}/install/ember-lua.pc DESTINATION ${EMBER_INSTALL_PCDIR})
endif()
