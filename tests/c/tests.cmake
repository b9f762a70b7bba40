# tests.cmake (tests/c): what some C tests need beyond the loop in CMakeLists.txt that builds
# and registers every tests/c/test_*.c.

# The Lua bridge's test links the bridge (libember_lua, which brings LuaJIT's headers and
# library with it).
target_link_libraries(test_lua_bridge PRIVATE ember_lua)
