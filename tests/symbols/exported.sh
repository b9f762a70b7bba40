#!/usr/bin/env bash
# exported.sh: libember.so exports exactly the functions ember.h declares with EM_API.
#
#   exported.sh <libember.so> <ember.h> [cc] [fewest]
#
# (Also libember_lua.so against ember_lua.h, whose list is short: fewest, default 50, is how
# many EM_API functions the header must have for its parse to be believed.)
# The library is compiled with -fvisibility=hidden, so only EM_API functions should leave it.
# Both directions fail the test: an exported symbol the header does not declare is an internal
# that leaked (a global target_clones function, a missing -fvisibility), and an EM_API function
# that is not exported is one that Lua's FFI and C programs cannot call. The header's list is
# read from the file (comments and preprocessor lines dropped by the compiler's preprocessor),
# so functions added to ember.h need no edit here.
set -euo pipefail
lib=${1:?usage: exported.sh <libember.so> <ember.h> [cc]}
header=${2:?ember.h}
cc=${3:-cc}
fewest=${4:-50}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# -fpreprocessed -dD: strip the comments, expand nothing. Then every "EM_API ... name(".
"$cc" -fpreprocessed -dD -E -P "$header" | grep -v '^[[:space:]]*#' | tr '\n' ' ' |
  grep -oE 'EM_API[^;(]*\(' | sed -E 's/[[:space:]]*\($//; s/.*[^A-Za-z0-9_]//' |
  sort -u >"$work/header"
# The linker's own markers, where a toolchain still exports them, are not Ember's.
nm -D --defined-only "$lib" | awk '{print $3}' |
  grep -vxE '_init|_fini|_edata|_end|__bss_start' | sort -u >"$work/exported"

n_header=$(wc -l <"$work/header")
if [ "$n_header" -lt "$fewest" ]; then
  echo "symbols: found only $n_header EM_API functions in $header; the parse is broken" >&2
  exit 1
fi
status=0
if comm -23 "$work/exported" "$work/header" | grep -q .; then
  echo "symbols: exported by $lib but not EM_API functions of ${header##*/} (internals leaking):" >&2
  comm -23 "$work/exported" "$work/header" | sed 's/^/  /' >&2
  status=1
fi
if comm -13 "$work/exported" "$work/header" | grep -q .; then
  echo "symbols: EM_API functions of ${header##*/} that $lib does not export:" >&2
  comm -13 "$work/exported" "$work/header" | sed 's/^/  /' >&2
  status=1
fi
[ $status -eq 0 ] && echo "symbols: $(wc -l <"$work/exported") exported, all EM_API in ${header##*/}, none missing"
exit $status
