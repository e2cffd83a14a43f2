// ==== Implementation ====
// Compiled only where LLMINFER_IMPLEMENTATION is defined. Internal functions (namespace detail) are
// `inline`, so tools and tests may define LLMINFER_IMPLEMENTATION in several translation units built
// with the same flags. The public functions declared above are defined with LLMI_API_DEF: ordinary
// (non-inline) definitions, emitted once, in the one translation unit that defines
// LLMINFER_IMPLEMENTATION, so that every other unit links against them with the declarations alone.
// A program that defines LLMINFER_IMPLEMENTATION in several units (our tests and CLI) also defines
// LLMINFER_INLINE_API everywhere: then the public functions are `inline` too.
// LLMINFER_DISPATCH: the header includes itself again once per x86 kernel level (LLMI_KERNEL_PASS
// set, see 21_kernels_begin): such a pass compiles the kernel parts only.
#if defined(LLMINFER_IMPLEMENTATION) && (!defined(LLMINFER_IMPLEMENTATION_INCLUDED) || defined(LLMI_KERNEL_PASS))
#if !defined(LLMI_KERNEL_PASS)
#define LLMINFER_IMPLEMENTATION_INCLUDED

#if defined(LLMINFER_INLINE_API)
#define LLMI_API_DEF inline
#else
#define LLMI_API_DEF
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <type_traits>
#include <unordered_map>

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
// clang-format off
#include <windows.h>
#include <psapi.h>  // after windows.h, which it needs
// clang-format on
#if defined(_MSC_VER)
#include <intrin.h>
#endif
#else
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__linux__)
#include <sched.h>        // sched_getcpu (the thread pool)
#include <sys/syscall.h>  // SYS_arch_prctl (the AMX permission, 25_matmul)
#endif
#endif

// ---- SIMD selection (compile time) ----
// Exactly one of LLMI_SIMD_AVX512 / LLMI_SIMD_AVX2 / LLMI_SIMD_NEON / LLMI_SIMD_SCALAR is set.
// The scalar reference kernels (detail::ref) are always compiled: they are the test oracle.
// MSVC never defines __FMA__ / __F16C__: its /arch:AVX2 (which defines __AVX2__) implies them,
// and /arch:AVX512 defines __AVX512F__, __AVX512BW__, __AVX512VL__, __AVX512DQ__, __AVX512CD__.
// LLMINFER_DISPATCH (x86-64, g++ / clang++): the code outside the kernels is compiled for the
// baseline the compiler targets; the kernels are compiled for several levels (21_kernels_begin)
// and the best one the CPU has is chosen at load. Here (the baseline) LLMI_SIMD_SCALAR is set.
#if defined(_MSC_VER) && !defined(__clang__) && defined(__AVX2__)
#define LLMI_HAS_FMA_F16C 1
#elif defined(__FMA__) && defined(__F16C__)
#define LLMI_HAS_FMA_F16C 1
#endif
#if defined(LLMINFER_DISPATCH) && !(defined(__x86_64__) || defined(_M_X64))
#error "LLMINFER_DISPATCH is for x86-64 (elsewhere build for the target CPU: LLMINFER_SIMD_* / -march)"
#endif
#if defined(LLMINFER_DISPATCH)
#define LLMI_DISPATCH 1
#define LLMI_SIMD_SCALAR 1
#elif defined(LLMINFER_FORCE_SCALAR) || defined(LLMINFER_SIMD_SCALAR)
#define LLMI_SIMD_SCALAR 1
#elif defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(LLMI_HAS_FMA_F16C)
#define LLMI_SIMD_AVX512 1
#define LLMI_SIMD_AVX2 1  // AVX-512 machines also run the 256-bit kernels where they fit better
#elif defined(__AVX2__) && defined(LLMI_HAS_FMA_F16C)
#define LLMI_SIMD_AVX2 1
#elif defined(__ARM_NEON) || defined(_M_ARM64)
#define LLMI_SIMD_NEON 1
#else
#define LLMI_SIMD_SCALAR 1
#endif
#if defined(LLMI_SIMD_AVX512) && defined(__AVX512VNNI__)
#define LLMI_SIMD_VNNI 1
#endif
#if defined(LLMI_SIMD_AVX512) && defined(__AVX512BF16__)
#define LLMI_SIMD_BF16 1  // vdpbf16ps (bf16 weights times bf16-exact activations)
#endif
#if defined(LLMI_SIMD_VNNI) && defined(__AMX_TILE__) && defined(__AMX_INT8__)
#define LLMI_SIMD_AMX 1  // AMX int8 tiles for the matrix-matrix product, where the OS permits them (25_matmul)
#endif
#if defined(LLMI_SIMD_AVX2) || defined(LLMI_SIMD_AVX512) || defined(LLMI_DISPATCH)
// GCC 12 reports its own _mm512_undefined_*() (self-initialised on purpose) as uninitialised
// when inlined; the warnings point into the header, so silencing them for its lines is enough.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif
#if defined(LLMI_SIMD_NEON)
#include <arm_neon.h>
#endif

#ifndef LLMINFER_MAX_TENSORS
#define LLMINFER_MAX_TENSORS (1u << 20)
#endif
#ifndef LLMINFER_MAX_METADATA
#define LLMINFER_MAX_METADATA (1u << 20)
#endif
#ifndef LLMINFER_MAX_JSON_DEPTH
#define LLMINFER_MAX_JSON_DEPTH 512
#endif

// A function whose float products and sums round one by one, whatever the target: g++ fuses a
// product and a sum of separate statements into one FMA (-ffp-contract=fast, its default in C++ too),
// and where it does depends on its tuning (with -march=native on a Xeon of the Sapphire Rapids
// class, g++ 12 tunes for 256-bit vectors and fused other parts of layer_norm_row: starcoder2-tiny
// F32 then missed llama.cpp's logits by 7.5e-5). clang fuses only within one expression.
#if defined(__GNUC__) && !defined(__clang__)
#define LLMI_NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define LLMI_NO_FP_CONTRACT
#endif

// A kernel helper that must inline into its loop (gcc otherwise keeps a large one out of line
// where several loops call it, and its accumulators, passed by reference, then go through memory
// at every step: a store and a load in each iteration's dependency chain).
#if defined(__GNUC__) || defined(__clang__)
#define LLMI_FORCE_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define LLMI_FORCE_INLINE __forceinline
#else
#define LLMI_FORCE_INLINE inline
#endif

// A function kept out of its callers, where inlining it was measured slower (dots_q4_k etc.,
// 25_matmul).
#if defined(__GNUC__) || defined(__clang__)
#define LLMI_NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define LLMI_NOINLINE __declspec(noinline)
#else
#define LLMI_NOINLINE
#endif

// Internal invariant check (never used for anything a file or a caller controls).
#ifndef LLMI_ASSERT
#define LLMI_ASSERT(x)                                                                      \
  do {                                                                                      \
    if (!(x)) {                                                                             \
      std::fprintf(stderr, "llminfer: internal error %s:%d: %s\n", __FILE__, __LINE__, #x); \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)
#endif
#endif  // !LLMI_KERNEL_PASS
