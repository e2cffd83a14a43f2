// ==== The kernel table: what the engine calls, filled per level (end of the kernel region) ====
// One row per entry point: return type, name, parameters, arguments. A native build's KernelTable
// calls the kernels directly (static members); a dispatch build's holds one pointer per entry,
// one table per level (k_scalar::kernel_table, ...), chosen at load (select_kernels).
#if !defined(LLMI_KERNEL_ENTRIES)
// clang-format off
#define LLMI_KERNEL_ENTRIES(X)                                                                                      \
  X(void, quantize_q8_32, (const float* x, int64_t n, int8_t* q, float* d, int16_t* sums), (x, n, q, d, sums))       \
  X(void, quantize_q8_256, (const float* x, int64_t n, int8_t* q, float* d, int16_t* sums), (x, n, q, d, sums))      \
  X(float, dot_q4_0, (const uint8_t* w, const ActQ8& a, int64_t n), (w, a, n))                                       \
  X(float, dot_q5_0, (const uint8_t* w, const ActQ8& a, int64_t n), (w, a, n))                                       \
  X(float, dot_q8_0, (const uint8_t* w, const ActQ8& a, int64_t n), (w, a, n))                                       \
  X(float, dot_q4_k, (const uint8_t* w, const ActQ8& a, int64_t n), (w, a, n))                                       \
  X(float, dot_q6_k, (const uint8_t* w, const ActQ8& a, int64_t n), (w, a, n))                                       \
  X(float, dot_f32, (const uint8_t* w, const float* x, int64_t n, bool sgemm, bool bf16_exact), (w, x, n, sgemm, bf16_exact))   \
  X(float, dot_f16, (const uint8_t* w, const float* x, int64_t n, bool sgemm, bool bf16_exact), (w, x, n, sgemm, bf16_exact))   \
  X(float, dot_bf16, (const uint8_t* w, const float* x, int64_t n, bool sgemm, bool bf16_exact), (w, x, n, sgemm, bf16_exact))  \
  X(float, dot_mlx, (const TensorView& w, int64_t row, const float* x, const float* xs), (w, row, x, xs))            \
  X(void, dequant_row, (const TensorView& w, int64_t row, float* out), (w, row, out))                                \
  X(void, f16_row_to_f32, (const uint16_t* src, float* dst, int64_t n), (src, dst, n))                              \
  X(void, f32_row_to_f16, (const float* src, uint16_t* dst, int64_t n), (src, dst, n))                              \
  X(bool, matmul_in, (const TensorView& w, MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool, MatmulScratch& s), \
    (w, in, y, ldy, pool, s))                                                                                        \
  X(bool, matmul_x, (const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t ldy, ThreadPool& pool, \
    bool bf16_exact, MatmulScratch& s), (w, x, n_tokens, y, ldy, pool, bf16_exact, s))                               \
  X(bool, matmul_group, (const TensorView* const* w, int nw, const float* x, int64_t n_tokens, float* const* y,       \
    const int64_t* ldy, ThreadPool& pool, bool bf16_exact, MatmulScratch& s),                                        \
    (w, nw, x, n_tokens, y, ldy, pool, bf16_exact, s))                                                               \
  X(bool, matmul_each, (const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t ldy, ThreadPool& pool, \
    bool bf16_exact, MatmulScratch& s), (w, x, n_tokens, y, ldy, pool, bf16_exact, s))                               \
  X(bool, matmul_each_group, (const TensorView* const* w, int nw, const float* x, int64_t n_tokens,                \
    float* const* y, const int64_t* ldy, ThreadPool& pool, bool bf16_exact, MatmulScratch& s),                       \
    (w, nw, x, n_tokens, y, ldy, pool, bf16_exact, s))                                                               \
  X(bool, matmul_reserve, (const TensorView& w, int64_t max_tokens, MatmulScratch& s), (w, max_tokens, s))          \
  X(void, attn_scores, (const float* q, int nq, size_t qs, const uint8_t* k, size_t stride, int n, int hd, bool f16,   \
    float scale, float* out, size_t os), (q, nq, qs, k, stride, n, hd, f16, scale, out, os))                        \
  X(double, attn_exp, (float* s, int n, float max, int phase), (s, n, max, phase))                                   \
  X(void, attn_values, (const float* w, int nq, size_t ws, const uint8_t* v0, size_t stride, int slots, int lo,       \
    int pos, int hd, bool f16, bool several, bool add, float* part, float* out, size_t os),                           \
    (w, nq, ws, v0, stride, slots, lo, pos, hd, f16, several, add, part, out, os))                                   \
  X(void, silu_row, (const float* x, float* y, int n), (x, y, n))                                                    \
  X(void, gelu_tanh_row, (const float* x, float* y, int n), (x, y, n))
// clang-format on
#endif

namespace llminfer {
inline namespace v0_1 {
namespace detail {
#if defined(LLMI_DISPATCH)
#if !defined(LLMI_KERNEL_PASS)
struct KernelTable {
  const char* name;  // "scalar", "avx2", "avx512", "avx512bf16", "avx512+amx"
#define LLMI_X(r, n, p, a) r(*n) p;
  LLMI_KERNEL_ENTRIES(LLMI_X)
#undef LLMI_X
};
#endif
LLMI_KNS_BEGIN
#define LLMI_X(r, n, p, a) &n,
inline constexpr KernelTable kernel_table = {LLMI_KERNEL_NAME, LLMI_KERNEL_ENTRIES(LLMI_X)};
#if defined(LLMI_KERNEL_PASS) && LLMI_KERNEL_PASS == 2
// the same kernels, products of 6 or more tokens in the block-sum order (kernels_use_block_sums)
inline constexpr KernelTable kernel_table_sums = {"avx2+sums", LLMI_KERNEL_ENTRIES(LLMI_X)};
#endif
#undef LLMI_X
LLMI_KNS_END
#else
struct KernelTable {
  const char* name;
#define LLMI_X(r, n, p, a) \
  static r n p {           \
    return detail::n a;    \
  }
  LLMI_KERNEL_ENTRIES(LLMI_X)
#undef LLMI_X
};
#if defined(LLMI_SIMD_AMX)
inline constexpr KernelTable native_kernels{simd_compiled()};
// The same kernels with the matrix products on AVX-512 VNNI alone (llama.cpp's order for any batch):
// LoadOptions::kernels "avx512", or where the OS refuses the tiles.
inline constexpr KernelTable native_kernels_exact{"avx512"};
#elif defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
// An AVX2 build's kernels take prompts in the block-sum order ("avx2+sums"), or llama.cpp's order
// for every batch ("avx2": LoadOptions::kernels, LLMINFER_KERNELS).
inline constexpr KernelTable native_kernels{"avx2+sums"};
inline constexpr KernelTable native_kernels_exact{"avx2"};
#else
inline constexpr KernelTable native_kernels{simd_compiled()};
#endif
#endif
}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

#if defined(LLMI_KERNEL_PASS)
#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
#endif
#undef LLMI_KNS_BEGIN
#undef LLMI_KNS_END
#undef LLMI_KERNEL_NAME

// The dispatch build: the kernel region again for each x86 level (the header includes itself).
#if defined(LLMI_DISPATCH) && !defined(LLMI_KERNEL_PASS)
#define LLMI_KERNEL_PASS 2
#include __FILE__
#undef LLMI_KERNEL_PASS
#define LLMI_KERNEL_PASS 3
#include __FILE__
#undef LLMI_KERNEL_PASS
#define LLMI_KERNEL_PASS 4
#include __FILE__
#undef LLMI_KERNEL_PASS
#define LLMI_KERNEL_PASS 5
#include __FILE__
#undef LLMI_KERNEL_PASS
// back to the baseline for the rest of the implementation
#undef LLMI_SIMD_AVX2
#undef LLMI_SIMD_AVX512
#undef LLMI_SIMD_VNNI
#undef LLMI_SIMD_BF16
#undef LLMI_SIMD_AMX
#define LLMI_SIMD_SCALAR 1
#endif

#if !defined(LLMI_KERNEL_PASS)
namespace llminfer {
inline namespace v0_1 {
namespace detail {

#if defined(LLMI_DISPATCH)
// Every level compiled in, lowest first (indices as cpu_has_kernel_level's).
inline constexpr const KernelTable* kernel_levels[] = {&k_scalar::kernel_table,     &k_avx2::kernel_table,
                                                       &k_avx2::kernel_table_sums,  &k_avx512::kernel_table,
                                                       &k_avx512bf16::kernel_table, &k_avx512amx::kernel_table};
inline constexpr int kNumKernelLevels = 6;
#endif

// The names of the levels compiled in, lowest first, comma-separated ("avx512" in a native build;
// "avx512,avx512+amx" in one with AMX: with and without the tiles; "avx2,avx2+sums" in an AVX2 one).
inline std::string kernel_levels_compiled() {
#if defined(LLMI_DISPATCH)
  std::string s;
  for (const KernelTable* k : kernel_levels) s += (s.empty() ? "" : ",") + std::string(k->name);
  return s;
#elif defined(LLMI_SIMD_AMX) || (defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512))
  return std::string(native_kernels_exact.name) + "," + native_kernels.name;
#else
  return simd_compiled();
#endif
}

// The kernels for a request: "" the best this CPU can run (a dispatch build reads the environment
// variable LLMINFER_KERNELS then), else a level by name, which the CPU must have.
inline Result<const KernelTable*> select_kernels(std::string_view request) {
#if defined(LLMI_DISPATCH)
  std::string req(request);
  const char* from = "LoadOptions::kernels";
  if (req.empty()) {
    if (const char* env = std::getenv("LLMINFER_KERNELS"); env && *env) {
      req = env;
      from = "LLMINFER_KERNELS";
    }
  }
  int best = 0;
  for (int i = 1; i < kNumKernelLevels; i++)
    if (cpu_has_kernel_level(i)) best = i;
  if (req.empty()) return kernel_levels[best];
  for (int i = 0; i < kNumKernelLevels; i++) {
    if (req != kernel_levels[i]->name) continue;
    if (i > best)
      return make_error(Errc::cpu_unsupported,
                        strf("%s=%s: this CPU (or OS) cannot run the %s kernels (the best it has here: %s)", from,
                             req.c_str(), req.c_str(), kernel_levels[best]->name));
    return kernel_levels[i];
  }
  return make_error(Errc::invalid_argument, strf("%s=%s: no such kernel level (this build has %s)", from,
                                                 printable(req).c_str(), kernel_levels_compiled().c_str()));
#else
#if defined(LLMI_SIMD_AMX) || (defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512))
  // with or without the block-sum order (AMX: the tiles): the request, else LLMINFER_KERNELS, else
  // with it where permitted
  std::string req(request);
  const char* from = "LoadOptions::kernels";
  if (const char* env = std::getenv("LLMINFER_KERNELS"); req.empty() && env && *env) {
    req = env;
    from = "LLMINFER_KERNELS";
  }
#if defined(LLMI_SIMD_AMX)
  const bool granted = os_grants_amx();
  const char* without = "without the AMX tiles";
#else
  const bool granted = true;
  const char* without = "in llama.cpp's float order for every batch";
#endif
  if (req.empty() || req == native_kernels.name) {
    if (granted) return &native_kernels;
    if (req.empty()) return &native_kernels_exact;
    return make_error(Errc::cpu_unsupported,
                      strf("%s=%s: this CPU (or OS) does not let the process use the AMX tiles (the best it has "
                           "here: %s)",
                           from, native_kernels.name, native_kernels_exact.name));
  }
  if (req == native_kernels_exact.name) return &native_kernels_exact;
  return make_error(Errc::invalid_argument,
                    strf("%s=%s: this build runs only the %s kernels, or %s %s (build with LLMINFER_DISPATCH for "
                         "another level)",
                         from, printable(req).c_str(), native_kernels.name, native_kernels_exact.name, without));
#else
  if (request.empty() || request == native_kernels.name) return &native_kernels;
  return make_error(Errc::invalid_argument,
                    strf("LoadOptions::kernels=%s: this build runs only the %s kernels (build with "
                         "LLMINFER_DISPATCH for a choice)",
                         printable(request).c_str(), native_kernels.name));
#endif
#endif
}

// Whether matrix products with these kernels take the AMX tiles.
inline bool kernels_use_amx(const KernelTable& k) {
  return std::string_view(k.name).find("+amx") != std::string_view::npos;
}
// Whether matrix products of 6 or more tokens with these kernels take the block-sum order, on the
// AMX tiles or with the AVX2 kernels ("avx2+sums") (a context's MatmulScratch::block_sums).
inline bool kernels_use_block_sums(const KernelTable& k) {
  const std::string_view n(k.name);
  return kernels_use_amx(k) || n.find("+sums") != std::string_view::npos;
}

#if defined(LLMI_DISPATCH)
// The process's default kernels (select_kernels("")), for code outside an engine (tests, tools,
// the loader's dequantization); an invalid LLMINFER_KERNELS falls back to the best level here
// (loading a model reports it).
inline const KernelTable& kernels() {
  static const KernelTable* k = [] {
    auto r = select_kernels("");
    return r ? *r : kernel_levels[0];
  }();
  return *k;
}
// The kernels by their names, through the default table.
#define LLMI_X(r, n, p, a) \
  inline r n p {           \
    return kernels().n a;  \
  }
LLMI_KERNEL_ENTRIES(LLMI_X)
#undef LLMI_X
template <DType T>
inline float dot_float(const uint8_t* w, const float* x, int64_t n, bool sgemm = false, bool bf16_exact = false) {
  if constexpr (T == DType::f32)
    return kernels().dot_f32(w, x, n, sgemm, bf16_exact);
  else if constexpr (T == DType::f16)
    return kernels().dot_f16(w, x, n, sgemm, bf16_exact);
  else
    return kernels().dot_bf16(w, x, n, sgemm, bf16_exact);
}
#else
inline const KernelTable& kernels() {
  return native_kernels;
}
#endif

// For tests and tools: a matmul with scratch of its own, through the default kernels, in their
// order (aborts when out of memory; the engine passes its context's scratch and reports
// out_of_memory instead).
inline void matmul(const TensorView& w, MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool) {
  MatmulScratch scratch(pool.size());
  scratch.block_sums = kernels_use_block_sums(kernels());
  LLMI_ASSERT(kernels().matmul_in(w, in, y, ldy, pool, scratch));
}
inline void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t ldy, ThreadPool& pool,
                   bool bf16_exact = false) {
  MatmulScratch scratch(pool.size());
  scratch.block_sums = kernels_use_block_sums(kernels());
  LLMI_ASSERT(kernels().matmul_x(w, x, n_tokens, y, ldy, pool, bf16_exact, scratch));
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
#endif  // !LLMI_KERNEL_PASS
