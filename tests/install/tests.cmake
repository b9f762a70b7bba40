# tests.cmake: the install tests (included from CMakeLists.txt). install_stage installs this
# build under <build>/stage (DESTDIR) and checks it in place; install_static and
# install_examples build programs against that staged install (tests/install/*.sh).
set(EMBER_STAGE ${CMAKE_BINARY_DIR}/stage)
set(EMBER_STAGED_PREFIX ${EMBER_STAGE}${CMAKE_INSTALL_PREFIX})
set(EMBER_INSTALL_TEST_ENV "")
if(EMBER_SANITIZE)
  # The programs built against an instrumented libember are instrumented too; luajit is not,
  # so it gets the runtimes preloaded (as the Lua specs do: CMakeLists.txt).
  foreach(rt asan ubsan)
    execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=lib${rt}.so
                    OUTPUT_VARIABLE ${rt}_runtime OUTPUT_STRIP_TRAILING_WHITESPACE)
  endforeach()
  list(APPEND EMBER_INSTALL_TEST_ENV "EMBER_TEST_CFLAGS=-fsanitize=address,undefined"
       "EMBER_TEST_PRELOAD=${asan_runtime}:${ubsan_runtime}"
       "ASAN_OPTIONS=detect_leaks=0:halt_on_error=1")
endif()

add_test(NAME install_stage
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/stage.sh ${CMAKE_BINARY_DIR} ${EMBER_STAGE}
                 ${CMAKE_INSTALL_PREFIX} ${CMAKE_INSTALL_LIBDIR})
add_test(NAME install_static
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/static.sh ${EMBER_STAGED_PREFIX}
                 ${CMAKE_INSTALL_LIBDIR} ${CMAKE_BINARY_DIR}/install-tests/static ${CMAKE_C_COMPILER})
add_test(NAME install_examples
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/run.sh ${EMBER_STAGED_PREFIX}
                 ${CMAKE_INSTALL_LIBDIR} ${CMAKE_BINARY_DIR}/install-tests/examples
                 ${CMAKE_C_COMPILER})
set_tests_properties(install_stage PROPERTIES FIXTURES_SETUP ember_stage)
set_tests_properties(install_static install_examples PROPERTIES FIXTURES_REQUIRED ember_stage)
if(EMBER_INSTALL_TEST_ENV)
  set_tests_properties(install_stage install_static install_examples PROPERTIES
                       ENVIRONMENT "${EMBER_INSTALL_TEST_ENV}")
endif()
