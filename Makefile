# llminfer — build the header, the CLI, the examples, the tests and the benchmarks.
#
#   make                   regenerate llminfer.hpp from src/ and build everything into build/
#   make test              build and run the whole test suite (makes the test fixtures first), as
#                          TEST_JOBS processes sharing the test cases (default: the cores, at most 4),
#                          then the build without chat templates (build/tests-no-templates);
#                          first check-public-api (the examples use no internals) and check-macros
#                          (no internal LLMI_ macro outlives the implementation)
#   make fixtures          build and verify the synthetic test models (tools/fixtures/gen.py)
#   make format            clang-format src/, examples/ and tests/ (CI: make check-format)
#   make deps              install the Debian packages make test needs (as root; else prints the line)
#   make demo              build and run the main job (a short generation with the default model)
#   make model             download a small public model to models/default.gguf (the only network use)
#   make LLMINFER_SIMD=avx2 ...    choose the kernels: native (default), avx512, avx2, neon, scalar, or
#                          dispatch (x86-64 baseline with every x86 level inside, chosen at load)
#   make BUILD=build/asan SANITIZE=address,undefined test    a sanitizer build in its own folder
#   make WERROR=1          warnings are errors (CI)
#   make corpus            regenerate the committed malformed-file corpus and fuzz seeds
#   make fuzz              build every tests/fuzz/fuzz_*.cpp with clang++ -fsanitize=fuzzer,address,undefined
#   make fuzz-run FUZZ_SECONDS=60   run each fuzz target that long, FUZZ_JOBS (2) at once (tools/fuzz)
#   make compile-matrix    the header in 2 TUs, -Wpedantic: -fno-exceptions -fno-rtti, scalar, avx2,
#                          LLMINFER_NO_TEMPLATES; g++ and clang++; C++17 and older stop with the one #error
#   make windows           cross-build the examples for Windows with MinGW-w64 (build/windows/)
#   make windows-test      cross-build the tests' portable part with MinGW-w64 and run it under Wine
#   make cmake-check       the CMake package and pkg-config files, used four ways (tests/cmake/run.sh)
#   make bench             the kernel micro-benchmark (build/bench-kernels), the structured-output
#                          benchmark (build/bench-grammar), the int8 peak of AMX and VNNI
#                          (build/bench-peak-amx), the AVX-512 instructions' throughput
#                          (build/bench-zmm-ops), the sampler's cost per token
#                          (build/bench-sampler), the AVX2 32-block products in two float orders
#                          (build/bench-block-order); bench/compare.py vs llama.cpp

CXX ?= g++
BUILD ?= build
SHARED ?= $(abspath ../shared)
LLMINFER_SIMD ?= native
# -g1: line tables (backtraces, perf) without full debug info, which would double the compile time;
# OPT="-O0 -g" for a debugger.
OPT ?= -O2 -g1
# examples/simple and tests-no-templates, the two small programs `make test` runs on stories260K
# beside the suite and the CLI, each compile the whole implementation: OPT_SMALL=-O0 builds them in
# a third of the time where that matters more than their speed (the sanitizer step of .ci/run).
OPT_SMALL ?=
SANITIZE ?=

SIMD_FLAGS_native := -march=native
SIMD_FLAGS_avx512 := -march=x86-64-v4 -mavx512vnni
SIMD_FLAGS_avx2 := -march=x86-64-v3
SIMD_FLAGS_neon :=
SIMD_FLAGS_scalar := -DLLMINFER_SIMD_SCALAR
# one binary for every x86-64 CPU: the kernels of each level compiled in, the best chosen at load
SIMD_FLAGS_dispatch := -march=x86-64 -DLLMINFER_DISPATCH
ifeq ($(origin SIMD_FLAGS_$(LLMINFER_SIMD)),undefined)
$(error LLMINFER_SIMD must be one of native, avx512, avx2, neon, scalar, dispatch)
endif

WARN := -Wall -Wextra $(if $(WERROR),-Werror)
SAN := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all)
# g++ 12 (Debian 12's 12.2) at -O2 with AVX-512 enabled builds a loop's constant vector of 64-bit
# values that ends in zeros, e.g. std::vector<double>{1, 1, 1, 0}, as a broadcast of its first value
# ({1, 1, 1, 1}): a wrong-code bug of its SLP vectorizer (tests/test_platform.cpp, "toolchain: ...",
# fails where a build has it). Every g++ 12 build turns that pass off (the README says so too).
GCC12 := $(shell printf '\043if defined(__GNUC__) \046\046 !defined(__clang__) \046\046 __GNUC__ == 12\nyes\n\043endif\n' | $(CXX) -E -P -x c++ - 2>/dev/null)
GCC12_FLAGS := $(if $(filter yes,$(GCC12)),-fno-tree-slp-vectorize)
CXXFLAGS_ALL := -std=c++20 $(OPT) $(SIMD_FLAGS_$(LLMINFER_SIMD)) $(GCC12_FLAGS) $(WARN) $(SAN) -pthread -MMD -MP $(CXXFLAGS)
LDFLAGS_ALL := -pthread $(SAN) $(LDFLAGS)

CLI_SRC := $(sort $(wildcard examples/cli/*.cpp))
TEST_SRC := $(sort $(wildcard tests/*.cpp))

# Unity builds (the default): every test file compiles the whole implementation, so the tests are
# built as TEST_UNITS units (tools/unity writes them into $(BUILD)/unity/; each test file sits in a
# namespace of its own there); the CLI, whose main.cpp alone compiles the implementation, as one
# unit too (the header and the standard headers parsed once). UNITY=0 compiles each file on its own
# (faster to rebuild after editing one file: a CLI file other than main.cpp takes about 2 s).
# TEST_UNITS: one per core, up to 4 (each unit compiles the implementation once more: on 2 cores of
# a Zen 3, `make -j2` of the tests, CLI, simple and tests-no-templates took 5.0 minutes with 2 units,
# 5.7 with 3).
UNITY ?= 1
TEST_UNITS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)
ifeq ($(UNITY),1)
TEST_FILES := $(filter-out tests/main.cpp,$(TEST_SRC))
TEST_GROUPS := $(wordlist 1,$(TEST_UNITS),$(shell seq $(words $(TEST_FILES))))
CLI_OBJ := $(BUILD)/obj/unity/cli.o
TEST_MAIN := $(filter tests/main.cpp,$(TEST_SRC))
TEST_OBJ := $(TEST_MAIN:%.cpp=$(BUILD)/obj/%.o) $(TEST_GROUPS:%=$(BUILD)/obj/unity/tests_%.o)
else
CLI_OBJ := $(CLI_SRC:%.cpp=$(BUILD)/obj/%.o)
TEST_OBJ := $(TEST_SRC:%.cpp=$(BUILD)/obj/%.o)
endif

.PHONY: FORCE all test demo model header check-header doctest deps fixtures corpus fuzz fuzz-run compile-matrix windows windows-test cmake-check clean bench
.DELETE_ON_ERROR:

all: llminfer.hpp $(BUILD)/llminfer $(BUILD)/tests $(BUILD)/simple

# The header is generated from src/ (committed; CI checks it is fresh).
llminfer.hpp: $(wildcard src/*.hpp) tools/amalgamate
	tools/amalgamate
header: llminfer.hpp
check-header:
	tools/amalgamate --check

# The examples (the CLI, the server, the C library, simple.cpp) are users of the public API alone:
# what src/01_api.hpp and the C API declare. No llminfer::detail names (nor a namespace alias or
# using-directive for it), no implementation hooks (detail::model_impl / session_impl, an impl()),
# no LLMINFER_INLINE_API, no internal LLMI_ macros. What an example needs and cannot reach goes
# into the public API instead. `make test` runs this first (CI too, through the README's commands).
PUBLIC_API_USERS := examples
PRIVATE_API_PATTERN := (^|[^A-Za-z0-9_])detail[[:space:]]*(::|;)|_impl[[:space:]]*\(|(^|[^A-Za-z0-9_])impl[[:space:]]*\([[:space:]]*\)|LLMINFER_INLINE_API|LLMI_[A-Z]
.PHONY: check-public-api
check-public-api:
	@if grep -rnE '$(PRIVATE_API_PATTERN)' $(PUBLIC_API_USERS); then \
	  echo "check-public-api: the lines above use the library's internals; examples use the public API alone"; \
	  echo "  (add what they need to src/01_api.hpp, documented in the manual, with a test)"; exit 1; \
	fi; echo "check-public-api: $(PUBLIC_API_USERS)/ uses the public API alone"

# House style (.clang-format, clang-format 14): every C and C++ source of src/, examples/ and tests/
# but the two generated Unicode tables. `make format` rewrites them (and the header); CI runs
# `make check-format`.
FORMAT_FILES = $(filter-out src/30_unicode_data.hpp src/35_jinja_unicode.hpp,$(shell git ls-files 'src/*.hpp' \
  'examples/*.cpp' 'examples/*.hpp' 'examples/*.c' 'examples/*.h' 'tests/*.cpp' 'tests/*.hpp' 'tests/*.c' 'tests/*.h'))
.PHONY: format check-format
format:
	clang-format -i $(FORMAT_FILES)
	tools/amalgamate
check-format: format-tool
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "check-format: $(words $(FORMAT_FILES)) files in the house style"
format: format-tool
.PHONY: format-tool
format-tool:
	@command -v clang-format >/dev/null 2>&1 && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing clang-format (apt-get install -y clang-format)"; export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq clang-format >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1; \
	    apt-get install -y -qq clang-format >/dev/null; } || { echo "could not install it: run   apt-get install -y clang-format"; exit 1; }; \
	else echo "needs clang-format: run   apt-get install -y clang-format"; exit 1; fi

# The implementation's internal LLMI_ macros end with it (src/99_impl_end.hpp): a program that
# includes it sees none of them, with the native kernels, the dispatch build and the scalar ones.
.PHONY: check-macros
check-macros: llminfer.hpp
	@for f in "$(SIMD_FLAGS_$(LLMINFER_SIMD))" "$(SIMD_FLAGS_dispatch)" "$(SIMD_FLAGS_scalar)"; do \
	  left=$$($(CXX) -std=c++20 $$f -dM -E tests/compile/impl.cpp | grep -E '^#define LLMI_' | cut -d' ' -f2 | cut -d'(' -f1 | tr '\n' ' '); \
	  if [ -n "$$left" ]; then echo "check-macros ($$f): still defined after the implementation: $$left"; exit 1; fi; \
	done; echo "check-macros: no LLMI_ macro outlives the implementation"

$(BUILD)/obj/%.o: %.cpp llminfer.hpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_ALL) -c $< -o $@

# The unity sources are rewritten only when their content changes (a new file, another grouping).
$(BUILD)/unity/cli.cpp: FORCE
	@tools/unity $@ $(CLI_SRC)
$(TEST_GROUPS:%=$(BUILD)/unity/tests_%.cpp): $(BUILD)/unity/tests_%.cpp: FORCE
	@tools/unity $@ --wrap --group $*/$(words $(TEST_GROUPS)) $(TEST_FILES)
$(filter $(BUILD)/obj/unity/%,$(CLI_OBJ) $(TEST_OBJ)): $(BUILD)/obj/unity/%.o: $(BUILD)/unity/%.cpp llminfer.hpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_ALL) -iquote . -c $< -o $@
FORCE:

# The tests define LLMINFER_IMPLEMENTATION in several files (they test internals): public functions
# inline. The CLI is an ordinary user of the public API: the implementation in main.cpp alone.
$(TEST_OBJ): CXXFLAGS_ALL += -DLLMINFER_INLINE_API
# The CLI is an example too: built as a strict host program would be (no exceptions, no RTTI).
$(CLI_OBJ): CXXFLAGS_ALL += -fno-exceptions -fno-rtti
$(BUILD)/llminfer: $(CLI_OBJ)
	$(CXX) $(CLI_OBJ) -o $@ $(LDFLAGS_ALL)

# The embedding example, built the way a strict host program would: no exceptions, no RTTI.
$(BUILD)/simple: examples/simple.cpp llminfer.hpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_ALL) $(OPT_SMALL) -fno-exceptions -fno-rtti $< -o $@ $(LDFLAGS_ALL)

# The C API as a shared library: `make libllminfer.so` builds $(BUILD)/libllminfer.so from the header
# (examples/c/libllminfer.cpp), exporting the llminfer_* functions of its C section alone
# (-fvisibility=hidden and a version script: not even the standard library's instantiations). `make capi-test` (CI) compiles
# tests/capi/test_capi.c and examples/c/example.c as strict C99 against it, runs the C test, then
# tests/capi/test_capi.py (ctypes, the standard library alone) on the same library.
C99_CC ?= gcc
C99_FLAGS := -std=c99 -Wall -Wextra -Werror -pedantic $(SAN)
.PHONY: libllminfer.so capi-test
libllminfer.so: $(BUILD)/libllminfer.so
$(BUILD)/libllminfer.so: examples/c/libllminfer.cpp examples/c/libllminfer.map llminfer.hpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_ALL) -fPIC -shared -fvisibility=hidden -fvisibility-inlines-hidden $< -o $@ \
	  -Wl,--version-script=examples/c/libllminfer.map $(LDFLAGS_ALL)
capi-test: $(BUILD)/libllminfer.so
	$(C99_CC) $(C99_FLAGS) tests/capi/test_capi.c -o $(BUILD)/test_capi -L$(BUILD) -lllminfer -Wl,-rpath,$(abspath $(BUILD))
	$(C99_CC) $(C99_FLAGS) examples/c/example.c -o $(BUILD)/example-c -L$(BUILD) -lllminfer -Wl,-rpath,$(abspath $(BUILD))
	@exported=$$(nm -D --defined-only $(BUILD)/libllminfer.so | awk 'NF == 3 {print $$3}' | grep -v '^llminfer_' || true); \
	if [ -n "$$exported" ]; then echo "libllminfer.so exports more than the C API:"; echo "$$exported" | head; exit 1; fi
	$(BUILD)/test_capi $(STORIES) $(STORIES_REF)
	python3 tests/capi/test_capi.py $(BUILD)/libllminfer.so $(STORIES) $(STORIES_REF)
	$(BUILD)/example-c $(STORIES) "Once upon a time" | tail -1

# The OpenAI-compatible server (examples/server/): `make serve` builds $(BUILD)/llminfer-serve, which
# `llminfer serve` runs. It uses Debian's cpp-httplib and nlohmann-json (installed here
# when we can, as root with apt-get, else the one apt-get line is printed); the header and the CLI
# need neither. `make serve-test` (CI): tests/server/run.sh (curl, the openai npm package, a load
# test, two servers behind nginx).
SERVE_PKGS := libcpp-httplib-dev nlohmann-json3-dev pkg-config
.PHONY: serve serve-deps serve-test
serve: $(BUILD)/llminfer-serve $(BUILD)/llminfer
serve-deps:
	@if [ ! -f /usr/include/httplib.h ] || [ ! -f /usr/include/nlohmann/json.hpp ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "make serve needs $(SERVE_PKGS): installing them"; export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -y -qq $(SERVE_PKGS) >/dev/null 2>&1 || \
	      { apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq $(SERVE_PKGS) >/dev/null; } || \
	      { echo "could not install them: run   apt-get install -y $(SERVE_PKGS)"; exit 1; }; \
	  else echo "make serve needs Debian packages: sudo apt-get install -y $(SERVE_PKGS)"; exit 1; fi; \
	fi
# (Debian builds cpp-httplib as a shared library, libcpp-httplib0.11, with OpenSSL, zlib and brotli
# support: its pkg-config file gives the matching flags.)
HTTPLIB_FLAGS = $(shell pkg-config --cflags --libs cpp-httplib 2>/dev/null || echo -lcpp-httplib)
$(BUILD)/llminfer-serve: examples/server/server.cpp examples/cli/cli.hpp llminfer.hpp | serve-deps
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_ALL) $< -o $@ $(HTTPLIB_FLAGS) $(LDFLAGS_ALL)
serve-test: serve
	tests/server/run.sh $(BUILD)

# The Debian packages the tests need: doctest (header-only), numpy for the fixture generator, node
# + npm for the tokenizer packages of the fixtures. Installed when we can (root with apt-get), else
# the one apt-get line is printed. Each is probed where it is used: doctest where Debian puts it or
# anywhere the compiler looks (an include path given in CXXFLAGS counts too).
DOCTEST_PROBE = [ -f /usr/include/doctest/doctest.h ] || \
  printf '\043include <doctest/doctest.h>\n' | $(CXX) $(CXXFLAGS) -x c++ -fsyntax-only - >/dev/null 2>&1
doctest:
	@if ! { $(DOCTEST_PROBE); }; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "doctest is missing: installing Debian's doctest-dev (apt-get install -y doctest-dev)"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get install -y -qq doctest-dev >/dev/null 2>&1 || \
	      { apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq doctest-dev >/dev/null; } || \
	      { echo "could not install doctest: run   apt-get install -y doctest-dev"; exit 1; }; \
	  else \
	    echo "doctest is missing: install it with   sudo apt-get install -y doctest-dev"; exit 1; \
	  fi; \
	fi
# Everything `make test` needs, installed in one apt-get (or printed as the one line to run).
deps:
	@missing=""; { $(DOCTEST_PROBE); } || missing="$$missing doctest-dev"; \
	/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || missing="$$missing python3-numpy"; \
	command -v node >/dev/null 2>&1 || missing="$$missing nodejs"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	[ -z "$$missing" ] && exit 0; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "make test needs$$missing: installing them (apt-get install -y$$missing)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y -qq $$missing >/dev/null 2>&1 || \
	    { apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq $$missing >/dev/null; } || \
	    { echo "could not install them: run   apt-get install -y$$missing"; exit 1; }; \
	else \
	  echo "make test needs Debian packages that are missing; install them with"; \
	  echo "  sudo apt-get install -y$$missing"; exit 1; \
	fi

# (make test: one apt-get for everything, before doctest's own probe runs.)
ifneq ($(filter test fixtures,$(MAKECMDGOALS)),)
doctest: | deps
endif

# A cross compiler does not search /usr/include: give the tests doctest (header-only) alone.
$(BUILD)/doctest-include/doctest: | doctest
	@mkdir -p $(dir $@) && ln -sfn /usr/include/doctest $@
$(TEST_OBJ): | doctest $(BUILD)/doctest-include/doctest
$(TEST_OBJ): CXXFLAGS_ALL += -I$(BUILD)/doctest-include
$(BUILD)/tests: $(TEST_OBJ)
	$(CXX) $(TEST_OBJ) -o $@ $(LDFLAGS_ALL)

# Synthetic test models, made by tools/fixtures/gen.py (byte-identical on every run, checked against
# tools/fixtures/fixtures.sha256); shared by every BUILD folder. Needs python3-numpy and npm (the
# tokenizer packages): `make deps` first.
FIXTURES ?= build/fixtures
fixtures: | deps
	tools/fixtures/make_fixtures.sh $(FIXTURES)

TEST_ENV = LLMINFER_SHARED=$(SHARED) LLMINFER_CLI=$(BUILD)/llminfer LLMINFER_SIMPLE=$(BUILD)/simple \
  LLMINFER_SOURCE_DIR=$(CURDIR) LLMINFER_FIXTURES=$(abspath $(FIXTURES))
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)
test: check-public-api check-macros deps llminfer.hpp $(BUILD)/tests $(BUILD)/tests-no-templates $(BUILD)/llminfer $(BUILD)/simple fixtures
	$(TEST_ENV) tools/run-tests $(TEST_JOBS) $(BUILD)/tests $(TEST_ARGS)
	$(TEST_ENV) $(BUILD)/tests-no-templates $(TEST_ARGS)

# The implementation built with LLMINFER_NO_TEMPLATES (no chat-template interpreter), one unit of
# its own (the suite's files test the interpreter): tests/no_templates/test_no_templates.cpp
# defines it, checks that the interpreter is left out, that every template call returns the
# documented error, and that raw-prompt generation gives llama2.c's tokens. make test runs it.
$(BUILD)/tests-no-templates: tests/no_templates/test_no_templates.cpp llminfer.hpp | doctest $(BUILD)/doctest-include/doctest
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_ALL) $(OPT_SMALL) -I$(BUILD)/doctest-include $< -o $@ $(LDFLAGS_ALL)

# Rewrites the committed malformed-file corpus (tests/corpus/malformed/) and the file readers' fuzz
# seeds from their generator, tests/corpus.hpp (commit the result).
corpus: $(BUILD)/tests $(BUILD)/llminfer
	LLMINFER_REGEN_CORPUS=1 $(TEST_ENV) $(BUILD)/tests -tc='corpus: the committed*'


# libFuzzer targets: every tests/fuzz/fuzz_<name>.cpp becomes $(BUILD)/fuzz/fuzz_<name> (clang, with
# ASan and UBSan); `make fuzz-run` runs each for FUZZ_SECONDS from tests/fuzz/corpus/<name>/.
FUZZ_CXX ?= clang++
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 2
FUZZ_SRC := $(sort $(wildcard tests/fuzz/fuzz_*.cpp))
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.cpp=$(BUILD)/fuzz/%)
# Every target but fuzz_cli (flags of its own, below) is compiled into one program,
# $(BUILD)/fuzz/fuzz-targets (tools/unity --fuzz), and $(BUILD)/fuzz/fuzz_<name> is a link to it that
# runs <name>'s target: the implementation compiled once for them all, not once each (on 2 cores the
# build takes about half the time: the CI's fuzz step went from 471 s to 370 s).
FUZZ_UNITY_SRC := $(filter-out tests/fuzz/fuzz_cli.cpp,$(FUZZ_SRC))
FUZZ_UNITY_BIN := $(FUZZ_UNITY_SRC:tests/fuzz/%.cpp=$(BUILD)/fuzz/%)
# (-DLLMINFER_INLINE_API: a program compiles only the parts of the implementation its targets call.)
FUZZ_FLAGS := -std=c++20 -O1 -g $(SIMD_FLAGS_$(LLMINFER_SIMD)) $(WARN) -fsanitize=fuzzer,address,undefined \
  -fno-sanitize-recover=all -fno-omit-frame-pointer -pthread -MMD -MP -DLLMINFER_INLINE_API
fuzz: $(FUZZ_BIN)
# fuzz_cli runs the CLI's commands on the committed stories260K model, found from the source directory.
# It compiles almost the whole library: -O0 -g1 builds it in a third of the CPU time of -O1 -g (45 s,
# not 160 s), and the forward pass's kernels give no coverage feedback (tests/fuzz/cli.ignorelist),
# which makes it run as fast as -O1 with them.
$(BUILD)/fuzz/fuzz_cli: FUZZ_FLAGS += -O0 -g1 -fsanitize-coverage-ignorelist=tests/fuzz/cli.ignorelist \
  -DLLMINFER_SOURCE_DIR='"$(CURDIR)"'
$(BUILD)/fuzz/fuzz_cli: tests/fuzz/cli.ignorelist
$(BUILD)/fuzz/fuzz_cli: tests/fuzz/fuzz_cli.cpp llminfer.hpp
	@mkdir -p $(dir $@)
	$(FUZZ_CXX) $(FUZZ_FLAGS) $(CXXFLAGS) $< -o $@ $(LDFLAGS)
$(BUILD)/fuzz/unity.cpp: FORCE
	@tools/unity $@ --fuzz $(FUZZ_UNITY_SRC)
$(BUILD)/fuzz/fuzz-targets: $(BUILD)/fuzz/unity.cpp llminfer.hpp
	$(FUZZ_CXX) $(FUZZ_FLAGS) $(CXXFLAGS) -iquote . $< -o $@ $(LDFLAGS)
$(FUZZ_UNITY_BIN): $(BUILD)/fuzz/fuzz-targets
	ln -sf fuzz-targets $@
fuzz-run: fuzz
	tools/fuzz --build $(BUILD)/fuzz -j $(FUZZ_JOBS) $(FUZZ_SECONDS)

# Compile matrix (CI): the header in two translation units, the implementation in one, linked and
# run, with -Wpedantic; with each compiler of MATRIX_CXX, plain (the host's SIMD path), with
# -fno-exceptions -fno-rtti, with the scalar kernels forced, with the AVX2 kernels
# (-march=x86-64-v3), and without the chat-template interpreter (-DLLMINFER_NO_TEMPLATES; make test
# runs that build's own test). Each combination is its own target (matrix-<variant>-<compiler>; the
# compiler's name may contain dashes), so `make -j2` builds two at a time. matrix-std-<compiler>:
# the header compiled as C++17, C++14 and C++11 must fail with exactly one error, the #error that
# says C++20 is required, and no warning. The clang++ builds are -O0: clang's warnings come from
# its front end, whatever the level, and -O0 compiles the implementation in a third of -O1's time;
# g++'s flow warnings (-Wmaybe-uninitialized and the like) need its optimizers: g++ builds at -O1.
MATRIX_CXX ?= g++ clang++
MATRIX_VARIANTS := plain noexc scalar avx2 notpl
MATRIX_FLAGS_plain :=
MATRIX_FLAGS_noexc := -fno-exceptions -fno-rtti
MATRIX_FLAGS_scalar := -DLLMINFER_FORCE_SCALAR
MATRIX_FLAGS_avx2 := -march=x86-64-v3
MATRIX_FLAGS_notpl := -DLLMINFER_NO_TEMPLATES
MATRIX_RUNS := $(foreach c,$(MATRIX_CXX),$(foreach v,$(MATRIX_VARIANTS),matrix-$(v)-$(c)))
MATRIX_STD_RUNS := $(foreach c,$(MATRIX_CXX),matrix-std-$(c))
.PHONY: $(MATRIX_RUNS) $(MATRIX_STD_RUNS)
compile-matrix: $(MATRIX_RUNS) $(MATRIX_STD_RUNS)
$(MATRIX_RUNS): matrix-%: llminfer.hpp
	@set -e; cxx=$(patsubst $(firstword $(subst -, ,$*))-%,%,$*); flags="$(MATRIX_FLAGS_$(firstword $(subst -, ,$*)))"; \
	out=$(BUILD)/matrix/$*; mkdir -p $$out; case $$cxx in *clang*) opt=-O0;; *) opt=-O1;; esac; \
	echo "compile matrix: $$cxx $$opt -Wpedantic $$flags"; \
	for tu in impl user; do \
	  $$cxx -std=c++20 $$opt $(SIMD_FLAGS_$(LLMINFER_SIMD)) $(WARN) -Wpedantic -pthread $$flags $(CXXFLAGS) \
	    -c tests/compile/$$tu.cpp -o $$out/$$tu.o; \
	done; \
	$$cxx -pthread $$out/impl.o $$out/user.o -o $$out/matrix $(LDFLAGS); $$out/matrix
$(MATRIX_STD_RUNS): matrix-std-%: llminfer.hpp
	@set -e; mkdir -p $(BUILD)/matrix; for std in c++17 c++14 c++11; do \
	  log=$(BUILD)/matrix/std-$*-$$std.log; \
	  if $* -std=$$std -Wall -Wextra -Wpedantic -fsyntax-only tests/compile/old_std.cpp >$$log 2>&1; then \
	    echo "$* -std=$$std: the header compiled (it must stop with an #error)"; exit 1; fi; \
	  n_err=$$(grep -cE ': (fatal )?error:' $$log || true); n_warn=$$(grep -c ': warning:' $$log || true); \
	  if [ "$$n_err" != 1 ] || [ "$$n_warn" != 0 ] || ! grep -qE ': error: .*requires C\+\+20' $$log; then \
	    echo "$* -std=$$std: expected exactly one error, the C++20 #error; got $$n_err error(s), $$n_warn warning(s):"; \
	    cat $$log; exit 1; fi; \
	  echo "compile matrix: $* -std=$$std stops with one error: $$(grep -E ': error:' $$log | sed 's/.*error: //')"; \
	done

# Windows (CI): the header and the example programs cross-built with MinGW-w64 (Debian's
# g++-mingw-w64-x86-64; the posix flavour has std::thread), static, into build/windows/*.exe.
WIN_CXX ?= x86_64-w64-mingw32-g++-posix
WIN_SIMD ?= avx2
WIN_MAKE = $(MAKE) BUILD=build/windows CXX=$(WIN_CXX) LLMINFER_SIMD=$(WIN_SIMD) OPT="-O1 -g0" LDFLAGS=-static
windows: llminfer.hpp
	+$(WIN_MAKE) build/windows/llminfer build/windows/simple

# ... and the test suite's portable part, cross-built the same way and run under Wine (Debian's
# wine and wine64): the CreateFileMapping path, UTF-8 file names through the wide-character APIs,
# a file over 4 GiB, Windows threads (the thread pool, 4 sessions generating at once), the kernels
# of WIN_SIMD, forward passes and conformance on the fixtures. Not run there: tests/test_session.cpp
# (fork, poll) and the test cases that start the CLI (cli:*, *CLI*: popen with POSIX shell quoting),
# and the files not listed in WIN_TEST_SRC (tokenizers, templates, corpus: no platform code).
WINE ?= wine
WINESERVER ?= wineserver
WIN_TEST_SRC := tests/main.cpp tests/test_platform.cpp tests/test_gguf.cpp tests/test_safetensors.cpp \
  tests/test_forward.cpp tests/test_conformance.cpp tests/test_stories.cpp tests/test_generate.cpp \
  tests/test_threadpool.cpp tests/test_kernels.cpp
# (Conformance runs there against the goldens of llama.cpp's AVX2 build, tests/goldens/forward/avx2,
# whatever the host's CPU: the Windows build runs the AVX2 kernels.)
WIN_TEST_SKIP := cli:*,*CLI*
WINE_ENV := WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
STORIES ?= third_party/stories260K/stories260K.gguf
STORIES_REF ?= third_party/stories260K/stories260K.llama2c-reference.txt
windows-test: llminfer.hpp
	+$(WIN_MAKE) build/windows/llminfer build/windows/simple
	+$(WIN_MAKE) TEST_UNITS=2 TEST_SRC="$(WIN_TEST_SRC)" build/windows/tests
	@echo "windows-test: $(WINE) build/windows/tests.exe: $(words $(WIN_TEST_SRC)) of the test files; not run:" \
	  "tests/test_session.cpp (fork, poll) and the cases that start the CLI ($(WIN_TEST_SKIP))"
	$(WINE_ENV) LLMINFER_SHARED=$(SHARED) LLMINFER_SOURCE_DIR=$(CURDIR) LLMINFER_FIXTURES=$(abspath $(FIXTURES)) \
	  $(WINE) build/windows/tests.exe -tce='$(WIN_TEST_SKIP)' $(TEST_ARGS)
	@# (each wine command waits for the previous one's wineserver to exit: a client that reaches a
	@# server while it shuts down fails with "recvmsg: Connection reset by peer")
	$(WINESERVER) -w
	@# The CLI itself: greedy stories260K from llama2.c's prompt ids gives llama2.c's tokens (the
	@# reference file's TOKENS line); examples/simple generates and exits 0.
	@set -e; ref=$$(sed -n 's/^# TOKENS //p' $(STORIES_REF) | cut -d' ' -f6-); [ -n "$$ref" ]; \
	got=$$($(WINE_ENV) $(WINE) build/windows/llminfer.exe run -m $(STORIES) --ids 1,403,407,261,378 -n 196 --json -t 2 \
	  | python3 -c 'import json, sys; print(" ".join(str(t) for t in json.load(sys.stdin)["tokens"]))'); \
	if [ "$$got" != "$$ref" ]; then echo "windows-test: llminfer.exe run differs from llama2.c:"; \
	  echo "  got      $$got"; echo "  expected $$ref"; exit 1; fi; \
	echo "windows-test: llminfer.exe run --ids (stories260K, 2 threads): the 196 tokens of llama2.c"; \
	$(WINESERVER) -w; out=$$($(WINE_ENV) $(WINE) build/windows/simple.exe $(STORIES) 2>&1); echo "$$out" | tail -2; \
	echo "$$out" | grep -q 'tokens, stop: ' || { echo "windows-test: simple.exe failed"; exit 1; }

# CMake and pkg-config (CI): llminfer installed and used by a small project four ways
# (add_subdirectory, FetchContent, find_package, pkg-config); see tests/cmake/run.sh.
cmake-check: llminfer.hpp
	tests/cmake/run.sh $(BUILD)/cmake-check

# The main job.
# (models/default.gguf, else the committed stories260K.)
DEMO_MODEL := $(firstword $(wildcard models/default.gguf) third_party/stories260K/stories260K.gguf)
demo: $(BUILD)/llminfer
	@if [ -z "$(DEMO_MODEL)" ]; then \
	  echo "no model found. Either run 'make model' (downloads SmolLM2-135M-Instruct Q4_K_M, about 105 MB,"; \
	  echo "from Hugging Face to models/default.gguf) or put any GGUF file at models/default.gguf."; exit 1; fi
	@echo "== $(DEMO_MODEL)"
	@if $(BUILD)/llminfer info $(DEMO_MODEL) --json | grep -q '"chat_template":true'; then \
	  set -x; $(BUILD)/llminfer run -m $(DEMO_MODEL) --chat -p "Write a short poem about the sea." -n 96 --seed 42; \
	else \
	  set -x; $(BUILD)/llminfer run -m $(DEMO_MODEL) -p "Once upon a time" -n 96 --seed 42 --echo; \
	fi

# Benchmarks (not part of `all`): the kernel micro-benchmark; bench/compare.py runs llminfer bench
# against the llama.cpp oracle (see bench/RESULTS.md).
$(BUILD)/bench-kernels: bench/kernels.cpp bench/timing.hpp llminfer.hpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_ALL) $< -o $@ $(LDFLAGS_ALL)
# The cost of structured output next to unconstrained decoding (bench/RESULTS.md, "Structured output").
$(BUILD)/bench-grammar: bench/grammar.cpp llminfer.hpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_ALL) $< -o $@ $(LDFLAGS_ALL)
# The int8 peak of the matrix units (AMX tiles, AVX-512 VNNI) where the build has them.
$(BUILD)/bench-peak-amx: bench/peak_amx.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_ALL) $< -o $@ $(LDFLAGS_ALL)
# The throughput of the AVX-512 instructions the kernels use, alone and in pairs (which share a port).
$(BUILD)/bench-zmm-ops: bench/zmm_ops.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_ALL) $< -o $@ $(LDFLAGS_ALL)
# The sampler's cost per token by kind of sampling chain (bench/RESULTS.md, "Sampling").
$(BUILD)/bench-sampler: bench/sampler.cpp bench/timing.hpp llminfer.hpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_ALL) $< -o $@ $(LDFLAGS_ALL)
# The AVX2 32-block kernels' integer work in llama.cpp's float order and in block sums (a probe).
$(BUILD)/bench-block-order: bench/block_order.cpp bench/timing.hpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_ALL) $< -o $@ $(LDFLAGS_ALL)
bench: $(BUILD)/llminfer $(BUILD)/bench-kernels $(BUILD)/bench-grammar $(BUILD)/bench-peak-amx $(BUILD)/bench-zmm-ops \
  $(BUILD)/bench-sampler $(BUILD)/bench-block-order

# The only target that uses the network: a small public model for `make demo` (see README).
model:
	tools/get-model

clean:
	rm -rf $(BUILD)

-include $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/simple.d $(BUILD)/tests-no-templates.d $(BUILD)/libllminfer.d $(BUILD)/llminfer-serve.d $(BUILD)/fuzz/fuzz_cli.d $(BUILD)/fuzz/fuzz-targets.d
