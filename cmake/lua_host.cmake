# lua_host.cmake: libember_lua, the Lua bridge (runtime/include/ember_lua.h, runtime/lua_host/):
# a C program hosts Lua scripts with Ember loaded and shares its tensors with them. Shared
# (libember_lua.so, linking libember.so and LuaJIT) and static (libember_lua.a). Included
# from CMakeLists.txt before cmake/install.cmake, which installs it and tells it where the
# installed Lua package lies relative to the library.
#
# The bridge always links LuaJIT's shared library (also in the EMBER_STATIC_DEPS build, whose
# `ember` program takes the static one): the host program calls LuaJIT itself, and Debian's
# libluajit-5.1.a is not position-independent code, so it cannot go into a shared library.
# Where there is no shared LuaJIT, there is no bridge (EMBER_LUA_BRIDGE is OFF; the install
# and the tests leave it out).
find_library(EMBER_LUAJIT_SHARED NAMES libluajit-5.1.so luajit-5.1 HINTS ${LUAJIT_LIBRARY_DIRS})
if(EMBER_LUAJIT_SHARED AND NOT EMBER_LUAJIT_SHARED MATCHES "\\.a$")
  set(EMBER_LUA_BRIDGE ON)
else()
  set(EMBER_LUA_BRIDGE OFF)
  message(STATUS "No shared LuaJIT library: the Lua bridge (libember_lua) is not built")
  return()
endif()

file(GLOB EMBER_LUA_HOST_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/runtime/lua_host/*.c)
add_library(ember_lua_objs OBJECT ${EMBER_LUA_HOST_SOURCES})
target_include_directories(ember_lua_objs PUBLIC ${CMAKE_SOURCE_DIR}/runtime/include
                                                 ${LUAJIT_INCLUDE_DIRS})
target_compile_options(ember_lua_objs PRIVATE -fvisibility=hidden)
target_compile_definitions(ember_lua_objs PRIVATE
  EMBER_SOURCE_LUA_DIR="${CMAKE_SOURCE_DIR}/lua"
  EMBER_SOURCE_DOCS_DIR="${CMAKE_SOURCE_DIR}/docs")

add_library(ember_lua SHARED $<TARGET_OBJECTS:ember_lua_objs>)
target_include_directories(ember_lua PUBLIC ${CMAKE_SOURCE_DIR}/runtime/include
                                            ${LUAJIT_INCLUDE_DIRS})
target_link_libraries(ember_lua PUBLIC ember ${EMBER_LUAJIT_SHARED} PRIVATE ${CMAKE_DL_LIBS})
target_link_options(ember_lua PRIVATE -Wl,--no-undefined)
set_target_properties(ember_lua PROPERTIES VERSION ${PROJECT_VERSION}
                                           SOVERSION ${EMBER_SOVERSION})

add_library(ember_lua_static STATIC $<TARGET_OBJECTS:ember_lua_objs>)
set_target_properties(ember_lua_static PROPERTIES OUTPUT_NAME ember_lua)
target_include_directories(ember_lua_static PUBLIC ${CMAKE_SOURCE_DIR}/runtime/include
                                                   ${LUAJIT_INCLUDE_DIRS})
target_link_libraries(ember_lua_static PUBLIC ember ${EMBER_LUAJIT_SHARED} ${CMAKE_DL_LIBS})
