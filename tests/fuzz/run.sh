#!/usr/bin/env bash
# The readers' libFuzzer targets (tests/fuzz/README.md).
#
#   run.sh regress <fuzz build dir> <libember.a>    each target over its committed corpus
#                                                   (tests/fuzz/corpus/<target>): ctest's fuzz_corpus
#   run.sh fuzz <fuzz build dir> <libember.a>       each target for FUZZ_SECONDS (default 60),
#                                                   starting from the committed corpus (make fuzz)
#
# Both build the targets first with clang (a separate CMake project, tests/fuzz/CMakeLists.txt).
# Without clang this fails and says so: a regression test that cannot run must not pass.
set -euo pipefail
mode=${1:?usage: run.sh regress|fuzz <build dir> <libember.a>}
build=${2:?build dir}
lib=${3:?libember.a}
here=$(cd "$(dirname "$0")" && pwd)

if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz: clang is not installed; the fuzz targets need it (Debian: clang libclang-rt-14-dev," \
       "installed by scripts/install-deps.sh)" >&2
  exit 1
fi
cmake -S "$here" -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
      -DEMBER_LIB="$lib" >/dev/null
cmake --build "$build" -j "${JOBS:-2}" >/dev/null

targets=()
for src in "$here"/fuzz_*.c; do
  name=$(basename "$src" .c)
  [ "$name" = fuzz_file ] || targets+=("$name")
done

# Leaks are findings too, and so is any allocation of 16 MiB or more: the inputs are small and
# the gzip limit is 1 MiB (fuzz_file.c), so only a size taken from a header unchecked gets there.
opts=(-rss_limit_mb=2048 -malloc_limit_mb=16 -timeout=10)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for t in "${targets[@]}"; do
  corpus="$here/corpus/${t#fuzz_}"
  if [ ! -d "$corpus" ] || [ -z "$(ls -A "$corpus")" ]; then
    echo "fuzz: $t has no corpus at $corpus" >&2
    status=1
    continue
  fi
  if [ "$mode" = regress ]; then
    if "$build/$t" "${opts[@]}" "$corpus"/* >"$build/$t.log" 2>&1; then
      echo "fuzz: $t: $(ls "$corpus" | wc -l) corpus inputs ok"
    else
      echo "fuzz: $t FAILED on its corpus; the end of $build/$t.log:" >&2
      tail -40 "$build/$t.log" >&2
      status=1
    fi
  else
    work="$build/corpus/${t#fuzz_}"
    crashes="$build/crashes/${t#fuzz_}"
    mkdir -p "$work" "$crashes"
    echo "fuzz: $t for ${FUZZ_SECONDS:-60} s (new inputs in $work, findings in $crashes)"
    if ! "$build/$t" "${opts[@]}" -max_total_time="${FUZZ_SECONDS:-60}" -print_final_stats=1 \
         -artifact_prefix="$crashes/" "$work" "$corpus" >"$build/$t.log" 2>&1; then
      echo "fuzz: $t found a failure; the end of $build/$t.log:" >&2
      tail -40 "$build/$t.log" >&2
      status=1
    else
      grep -aE '^stat::number_of_executed_units' "$build/$t.log" || true
    fi
  fi
done
exit $status
