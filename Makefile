# llminfer — build the header, the CLI, the examples, the tests and the benchmarks.
#
#   make                   regenerate llminfer.hpp from src/ and build everything into build/
#   make test              build and run the whole test suite (makes the test fixtures first)
#   make fixtures          build and verify the synthetic test models (tools/fixtures)
#   make demo              build and run the main job (a short generation with the default model)
#   make model             download a small public model to models/default.gguf (the only network use)
#   make LLMINFER_SIMD=avx2 ...    choose the kernels: native (default), avx512, avx2, neon, scalar
#   make BUILD=build/asan SANITIZE=address,undefined test    a sanitizer build in its own folder
#   make WERROR=1          warnings are errors (CI)

CXX ?= g++
BUILD ?= build
SHARED ?= $(abspath ../shared)
LLMINFER_SIMD ?= native
OPT ?= -O2 -g
SANITIZE ?=

SIMD_FLAGS_native := -march=native
SIMD_FLAGS_avx512 := -march=x86-64-v4 -mavx512vnni
SIMD_FLAGS_avx2 := -march=x86-64-v3
SIMD_FLAGS_neon :=
SIMD_FLAGS_scalar := -DLLMINFER_SIMD_SCALAR
ifeq ($(origin SIMD_FLAGS_$(LLMINFER_SIMD)),undefined)
$(error LLMINFER_SIMD must be one of native, avx512, avx2, neon, scalar)
endif

WARN := -Wall -Wextra $(if $(WERROR),-Werror)
SAN := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all)
CXXFLAGS_ALL := -std=c++20 $(OPT) $(SIMD_FLAGS_$(LLMINFER_SIMD)) $(WARN) $(SAN) -pthread -MMD -MP $(CXXFLAGS)
LDFLAGS_ALL := -pthread $(SAN) $(LDFLAGS)

CLI_SRC := $(sort $(wildcard examples/cli/*.cpp))
TEST_SRC := $(sort $(wildcard tests/*.cpp))
CLI_OBJ := $(CLI_SRC:%.cpp=$(BUILD)/obj/%.o)
TEST_OBJ := $(TEST_SRC:%.cpp=$(BUILD)/obj/%.o)

.PHONY: all test demo model header check-header doctest clean fixtures
.DELETE_ON_ERROR:

all: llminfer.hpp $(BUILD)/llminfer $(BUILD)/tests $(BUILD)/simple

# The header is generated from src/ (committed; CI checks it is fresh).
llminfer.hpp: $(wildcard src/*.hpp) tools/amalgamate
	tools/amalgamate
header: llminfer.hpp
check-header:
	tools/amalgamate --check

$(BUILD)/obj/%.o: %.cpp llminfer.hpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_ALL) -c $< -o $@

$(BUILD)/llminfer: $(CLI_OBJ)
	$(CXX) $(CLI_OBJ) -o $@ $(LDFLAGS_ALL)

# The embedding example, built the way a strict host program would: no exceptions, no RTTI.
$(BUILD)/simple: examples/simple.cpp llminfer.hpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_ALL) -fno-exceptions -fno-rtti $< -o $@ $(LDFLAGS_ALL)

# doctest comes from Debian's doctest-dev; install it when we can, else say how.
doctest:
	@if [ ! -f /usr/include/doctest/doctest.h ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "doctest is missing: installing Debian's doctest-dev"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y doctest-dev >/dev/null || exit 1; \
	  else \
	    echo "doctest is missing: install it with   sudo apt-get install -y doctest-dev"; exit 1; \
	  fi; \
	fi

# A cross compiler does not search /usr/include: give the tests doctest (header-only) alone.
$(BUILD)/doctest-include/doctest: | doctest
	@mkdir -p $(dir $@) && ln -sfn /usr/include/doctest $@
$(TEST_OBJ): | doctest $(BUILD)/doctest-include/doctest
$(TEST_OBJ): CXXFLAGS_ALL += -I$(BUILD)/doctest-include
$(BUILD)/tests: $(TEST_OBJ)
	$(CXX) $(TEST_OBJ) -o $@ $(LDFLAGS_ALL)

# Synthetic test models (byte-identical on every run, checked against tools/fixtures/fixtures.sha256);
# shared by every BUILD folder.
FIXTURES ?= build/fixtures
fixtures:
	tools/fixtures/make_fixtures.sh $(FIXTURES) $(SHARED)

test: llminfer.hpp $(BUILD)/tests $(BUILD)/llminfer $(BUILD)/simple fixtures
	LLMINFER_SHARED=$(SHARED) LLMINFER_FIXTURES=$(abspath $(FIXTURES)) LLMINFER_CLI=$(BUILD)/llminfer LLMINFER_SIMPLE=$(BUILD)/simple $(BUILD)/tests $(TEST_ARGS)

# The main job.
DEMO_MODEL := $(firstword $(wildcard models/default.gguf) $(wildcard $(SHARED)/models/stories260K.gguf))
demo: $(BUILD)/llminfer
	@if [ -z "$(DEMO_MODEL)" ]; then \
	  echo "no model found. Either run 'make model' (downloads SmolLM2-135M-Instruct Q4_K_M, about 105 MB,"; \
	  echo "from Hugging Face to models/default.gguf) or put any GGUF file at models/default.gguf."; exit 1; fi
	$(BUILD)/llminfer info $(DEMO_MODEL)

# The only target that uses the network: a small public model for `make demo` (see README).
model:
	tools/get-model

clean:
	rm -rf $(BUILD)

-include $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/simple.d
