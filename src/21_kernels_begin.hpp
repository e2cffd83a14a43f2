// ==== The kernel region (21_kernels_begin .. 26_kernels_end): one table of kernels per level ====
// The kernels (21_simd, 24_attention_kernels, 25_matmul) are what depends on the instruction set.
// Per weight type, what a level runs is the type's row of WeightKernels (25_weight_kernels); the
// facts that do not depend on the level are LLMI_DTYPES (13_dtype).
// The rest of the engine calls them through one table (KernelTable, 26_kernels_end): an evaluation
// context holds a `const KernelTable*` and writes `kern->matmul_group(...)`.
//  * A native build (the default: -march=native, or LLMINFER_SIMD_* / -march=...) compiles the
//    kernels once, in namespace detail, for the level the compiler targets (10_impl_begin). Its
//    KernelTable has static member functions that call them: no indirection at all.
//  * LLMINFER_DISPATCH (x86-64): the code outside the kernels is compiled for the compiler's
//    baseline (e.g. -march=x86-64); the kernel region is compiled once per level, each in a
//    namespace of its own (detail::k_scalar, k_avx2, k_avx512, k_avx512bf16, k_avx512amx) and with
//    the target of that level (#pragma GCC target / #pragma clang attribute): the header includes
//    itself again (`#include __FILE__`) with LLMI_KERNEL_PASS set, and a pass compiles only the kernel
//    parts (tools/amalgamate wraps every other part in `#if !defined(LLMI_KERNEL_PASS)`). Each
//    pass fills a KernelTable of function pointers; the best level the CPU (and OS) can run is
//    chosen when a model is loaded (LoadOptions::kernels / LLMINFER_KERNELS force a lower one).
//    Everything compiled for a higher level is defined inside its pass's namespace, so the linker
//    never picks a higher-level copy for baseline code; templates defined outside the region (std::
//    ones) keep the target of their definition, the baseline, when a pass instantiates them.
//    The kernels test only our own LLMI_SIMD_* macros (clang does not define __AVX2__ etc. under
//    a target pragma).
#if defined(LLMI_KERNEL_PASS)
#undef LLMI_SIMD_SCALAR
#undef LLMI_SIMD_AVX2
#undef LLMI_SIMD_AVX512
#undef LLMI_SIMD_VNNI
#undef LLMI_SIMD_BF16
#undef LLMI_SIMD_AMX
#if LLMI_KERNEL_PASS == 2
#define LLMI_SIMD_AVX2 1
#define LLMI_KNS_BEGIN namespace k_avx2 {
#define LLMI_KERNEL_NAME "avx2"
#elif LLMI_KERNEL_PASS == 3 || LLMI_KERNEL_PASS == 4 || LLMI_KERNEL_PASS == 5
#define LLMI_SIMD_AVX2 1
#define LLMI_SIMD_AVX512 1
#define LLMI_SIMD_VNNI 1
#if LLMI_KERNEL_PASS == 5
#define LLMI_SIMD_BF16 1
#define LLMI_SIMD_AMX 1
#define LLMI_KNS_BEGIN namespace k_avx512amx {
#define LLMI_KERNEL_NAME "avx512+amx"
#elif LLMI_KERNEL_PASS == 4
#define LLMI_SIMD_BF16 1
#define LLMI_KNS_BEGIN namespace k_avx512bf16 {
#define LLMI_KERNEL_NAME "avx512bf16"
#else
#define LLMI_KNS_BEGIN namespace k_avx512 {
#define LLMI_KERNEL_NAME "avx512"
#endif
#endif
#define LLMI_KNS_END }
// The target of the pass (the strings are spelled out: the pragmas do not expand macros).
// clang-format off
#if defined(__clang__)
#if LLMI_KERNEL_PASS == 2
#pragma clang attribute push(__attribute__((target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,sse3,ssse3,sse4.1,sse4.2"))), apply_to = function)
#elif LLMI_KERNEL_PASS == 3
#pragma clang attribute push(__attribute__((target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,sse3,ssse3,sse4.1,sse4.2,avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512vnni"))), apply_to = function)
#elif LLMI_KERNEL_PASS == 4
#pragma clang attribute push(__attribute__((target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,sse3,ssse3,sse4.1,sse4.2,avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512vnni,avx512bf16"))), apply_to = function)
#elif LLMI_KERNEL_PASS == 5
#pragma clang attribute push(__attribute__((target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,sse3,ssse3,sse4.1,sse4.2,avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512vnni,avx512bf16,amx-tile,amx-int8"))), apply_to = function)
#endif
#elif defined(__GNUC__)
#pragma GCC push_options
#if LLMI_KERNEL_PASS == 2
#pragma GCC target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,sse3,ssse3,sse4.1,sse4.2")
#elif LLMI_KERNEL_PASS == 3
#pragma GCC target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,sse3,ssse3,sse4.1,sse4.2,avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512vnni")
#elif LLMI_KERNEL_PASS == 4
#pragma GCC target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,sse3,ssse3,sse4.1,sse4.2,avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512vnni,avx512bf16")
#elif LLMI_KERNEL_PASS == 5
#pragma GCC target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,sse3,ssse3,sse4.1,sse4.2,avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512vnni,avx512bf16,amx-tile,amx-int8")
#endif
// (see 10_impl_begin: GCC's own _mm512_undefined_*() inlined into our kernels)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
// clang-format on
#elif defined(LLMI_DISPATCH)
#define LLMI_KNS_BEGIN namespace k_scalar {
#define LLMI_KERNEL_NAME "scalar"
#define LLMI_KNS_END }
#else
#define LLMI_KNS_BEGIN
#define LLMI_KNS_END
#endif

#if !defined(LLMI_KERNEL_PASS)
namespace llminfer {
inline namespace v0_1 {
namespace detail {
class ThreadPool;
class MatmulInput;
struct MatmulScratch;
}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
#endif
