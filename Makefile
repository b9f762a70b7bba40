# A thin wrapper around CMake. Every target installs missing Debian packages first.
BUILD ?= build
JOBS ?= $(shell nproc)

.PHONY: all deps build run gpt test golden bench asan tsan fuzz install embed-example clean

all: build

deps:
	@JOBS=$(JOBS) bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/ember examples/fashion_mnist.lua

gpt: build
	./$(BUILD)/ember examples/gpt.lua

test: build
	cd $(BUILD) && ctest --output-on-failure

# Regenerates the differential test's PyTorch golden files (tests/diff/golden/) from
# tests/diff/cases/*.json; needs Debian's python3-torch. `make test` reads them without PyTorch.
golden:
	/usr/bin/python3 tests/diff/make_golden.py

# The readers' libFuzzer targets, each for FUZZ_SECONDS (tests/fuzz/README.md).
FUZZ_SECONDS ?= 60
fuzz: build
	FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) bash tests/fuzz/run.sh fuzz $(BUILD)/fuzz $(CURDIR)/$(BUILD)/libember.a

bench:
	@JOBS=$(JOBS) bash scripts/install-deps.sh --bench
	@$(MAKE) --no-print-directory build
	BUILD=$(BUILD) bash tests/bench/run.sh

asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DEMBER_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure
	@$(MAKE) --no-print-directory tsan

# The threaded C tests under ThreadSanitizer (tests/c/test_threads*.c, and the memory history
# registry's test, which allocates from a second thread while recording; tests/c/tsan.supp says
# what is suppressed and why). `make asan` runs it too: CI's contract is `make test`, `make asan`.
TSAN_TESTS = test_threads test_memory_debug
tsan: deps
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_TSAN=ON >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/c/tsan.supp" \
	  ctest --output-on-failure -R '^c_test_(threads|memory_debug)'

# Installs the header, libember.so/.a, the `ember` program, the Lua package, the docs, ember.pc
# and the CMake package under PREFIX (staged under DESTDIR if given): cmake/install.cmake.
PREFIX ?= /usr/local
install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

# Builds each examples/embed/* program against a staged install of this build (with CMake and
# with pkg-config, shared and static) and runs it: the ctest install tests (tests/install).
embed-example: build
	cd $(BUILD) && ctest -R '^install_(stage|examples)$$' --output-on-failure

clean:
	rm -rf $(BUILD) build-asan build-tsan

# Quantized GPT inference per format and device (tests/bench/quant_gpt.lua; trains a small
# checkpoint into build/quant_gpt.ckpt first when there is none).
.PHONY: bench-quant
bench-quant: build
	./$(BUILD)/ember tests/bench/quant_gpt.lua
