# tests.cmake (tests/c): what some C tests need beyond the loop in CMakeLists.txt that builds
# and registers every tests/c/test_*.c.

# The Lua bridge's test links the bridge (libember_lua, which brings LuaJIT's headers and
# library with it).
if(EMBER_LUA_BRIDGE)
  target_link_libraries(test_lua_bridge PRIVATE ember_lua)
  # libember_lua.so exports exactly ember_lua.h's functions, as libember.so does ember.h's.
  add_test(NAME symbols_exported_lua
           COMMAND bash ${CMAKE_SOURCE_DIR}/tests/symbols/exported.sh $<TARGET_FILE:ember_lua>
                   ${CMAKE_SOURCE_DIR}/runtime/include/ember_lua.h ${CMAKE_C_COMPILER} 8)
else() # not built (cmake/lua_host.cmake says why): nor is its test
  set_target_properties(test_lua_bridge PROPERTIES EXCLUDE_FROM_ALL ON)
  set_tests_properties(c_test_lua_bridge PROPERTIES DISABLED ON)
endif()

# LeakSanitizer after em_init, Vulkan work and em_shutdown (the ASan build): the driver's own
# leaks are suppressed by name in lsan_vulkan.supp, each with its reason.
if(EMBER_SANITIZE)
  set_tests_properties(c_test_vulkan_leaks PROPERTIES ENVIRONMENT
    "ASAN_OPTIONS=detect_leaks=1:halt_on_error=1;LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_LIST_DIR}/lsan_vulkan.supp:print_suppressions=1")
endif()
