# The two set-up commands of the README's quick start. Both install missing Debian
# packages first (scripts/install-deps is a no-op when everything is present).
BUILD_DIR ?= build
JOBS ?= 2
CMAKE_FLAGS ?=
# The long soak runs (label soak) run only with `make test-soak`.
CTEST_FLAGS ?= -LE ^soak$$

.PHONY: all deps configure build demo test test-soak test-sanitize test-tsan test-asan clean

all: build

deps:
	@scripts/install-deps

configure: deps
	@if [ ! -f $(BUILD_DIR)/build.ninja ]; then \
	  cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS); \
	fi

build: configure
	cmake --build $(BUILD_DIR) -j$(JOBS)

demo: build
	@scripts/demo $(BUILD_DIR)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure --timeout 300 -j$(JOBS) $(CTEST_FLAGS)

# The long soak: 10^6 async requests over two devices, 1000 runtime/model/session cycles.
test-soak: build
	cd $(BUILD_DIR) && ctest --output-on-failure -L ^soak$$

# ThreadSanitizer (build-tsan) and ASan+LSan+UBSan (build-asan) runs, no RTL: see
# scripts/test-sanitize. As root, the TSan run lowers vm.mmap_rnd_bits to 28 if it is higher.
test-sanitize: test-tsan test-asan

test-tsan: deps
	JOBS=$(JOBS) scripts/test-sanitize thread

test-asan: deps
	JOBS=$(JOBS) scripts/test-sanitize address

clean:
	rm -rf $(BUILD_DIR)
