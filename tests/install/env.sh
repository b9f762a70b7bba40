# env.sh: sourced by the install tests (static.sh, run.sh) after they set `root` (the staged
# prefix) and `libdir` (relative to it). Points pkg-config and CMake at the staged install.
#   PKG_CONFIG     pkg-config, finding copies of the staged .pc files whose prefix is moved to
#                  the stage (ember.pc and ember-lua.pc state the final prefix, as pkg-config
#                  files do; everything in them derives from it). Copies, not
#                  --define-variable=prefix: that would move the prefix of every package,
#                  the system's luajit.pc (Requires of ember-lua.pc) included.
#   CMAKE_PREFIX_PATH  where find_package(Ember) looks first
#   EMBER_TEST_CFLAGS  extra compile and link flags of this build (the sanitizers), from ctest
root=$(cd "$root" && pwd) # absolute: the programs' rpaths are made from it
staged_pc=$(mktemp -d "${TMPDIR:-/tmp}/ember-staged-pc.XXXXXX")
trap 'rm -rf "$staged_pc"' EXIT
for pc in "$root/$libdir/pkgconfig/"*.pc; do
  sed "s|^prefix=.*|prefix=$root|" "$pc" >"$staged_pc/${pc##*/}"
done
export PKG_CONFIG_PATH="$staged_pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
PKG_CONFIG=pkg-config
export CMAKE_PREFIX_PATH="$root"
EMBER_TEST_CFLAGS=${EMBER_TEST_CFLAGS:-}
# A sanitized libember cannot go into a fully static program (the sanitizer runtimes are
# shared libraries); those builds are skipped there.
case "$EMBER_TEST_CFLAGS" in *sanitize*) can_static=0 ;; *) can_static=1 ;; esac
