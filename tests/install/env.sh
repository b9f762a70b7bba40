# env.sh: sourced by the install tests (static.sh, run.sh) after they set `root` (the staged
# prefix) and `libdir` (relative to it). Points pkg-config and CMake at the staged install.
#   PKG_CONFIG     pkg-config with the .pc's prefix moved to the stage (ember.pc states the
#                  final prefix, as pkg-config files do; everything in it derives from it)
#   CMAKE_PREFIX_PATH  where find_package(Ember) looks first
#   EMBER_TEST_CFLAGS  extra compile and link flags of this build (the sanitizers), from ctest
root=$(cd "$root" && pwd) # absolute: the programs' rpaths are made from it
export PKG_CONFIG_PATH="$root/$libdir/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
PKG_CONFIG="pkg-config --define-variable=prefix=$root"
export CMAKE_PREFIX_PATH="$root"
EMBER_TEST_CFLAGS=${EMBER_TEST_CFLAGS:-}
# A sanitized libember cannot go into a fully static program (the sanitizer runtimes are
# shared libraries); those builds are skipped there.
case "$EMBER_TEST_CFLAGS" in *sanitize*) can_static=0 ;; *) can_static=1 ;; esac
