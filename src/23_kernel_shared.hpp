// ==== Shared by every kernel level: scratch buffers, the matmul input, scalar activations ====
// Compiled once, for the baseline (outside the kernel region's passes, see 21_kernels_begin):
// types the engine and every kernel level share, and scalar helpers the kernels call.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Sums of x over MLX groups (shared by every row of a matmul): out[g] = sum of x[g*gs .. g*gs+gs-1].
inline void mlx_group_sums(const float* x, int64_t n, int gs, float* out) {
  for (int64_t g = 0; g < n / gs; g++) {
    float s = 0;
    for (int64_t i = g * gs; i < (g + 1) * gs; i++) s += x[i];
    out[g] = s;
  }
}

// ---- scratch allocations: one checked entry point ----
// Every buffer an evaluation context owns (KV cache, activations, matmul scratch; HeapBuf and
// AlignedBuffer) comes from scratch_alloc: null when out of memory, and the caller reports
// out_of_memory. The counters are for tests: `calls` counts the allocations (evaluation makes
// none once its context exists), and the call whose number is `fail_at` fails as if the machine
// had no memory left (tests/test_session.cpp, "scratch: ...").
struct ScratchAllocCounters {
  std::atomic<uint64_t> calls{0};
  std::atomic<int64_t> fail_at{-1};  // -1: none fails
};
inline ScratchAllocCounters& scratch_alloc_counters() {
  static ScratchAllocCounters c;
  return c;
}
inline void* scratch_alloc(size_t bytes, bool zeroed) {
  ScratchAllocCounters& c = scratch_alloc_counters();
  const uint64_t n = c.calls.fetch_add(1, std::memory_order_relaxed);
  if (static_cast<int64_t>(n) == c.fail_at.load(std::memory_order_relaxed)) return nullptr;
  return zeroed ? std::calloc(1, bytes) : std::malloc(bytes);
}

// 64-byte aligned growable scratch (scratch_alloc: no exceptions; false when out of memory).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { std::free(raw_); }
  bool reserve(size_t bytes) {
    if (bytes <= cap_) return true;
    std::free(raw_);
    raw_ = scratch_alloc(bytes + 64, false);
    if (!raw_) {
      ptr_ = nullptr;
      cap_ = 0;
      return false;
    }
    ptr_ = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(raw_) + 63) & ~static_cast<uintptr_t>(63));
    cap_ = bytes;
    return true;
  }
  template <class T>
  T* as(size_t byte_offset = 0) const {
    return reinterpret_cast<T*>(static_cast<uint8_t*>(ptr_) + byte_offset);
  }

 private:
  void* raw_ = nullptr;
  void* ptr_ = nullptr;
  size_t cap_ = 0;
};

inline size_t round_up(size_t v, size_t m) {
  return (v + m - 1) / m * m;
}

// The 256 activations of a q8_256 super-block (q) in the order of Q4_K's nibbles (out): in each 128
// values, 0-31, 64-95, 32-63, 96-127 (ActQ8::qn, KqGroupBlock::q).
inline void q8_nibble_order(const int8_t* q, int8_t* out) {
  constexpr int kFrom[8] = {0, 2, 1, 3, 4, 6, 5, 7};
  for (int i = 0; i < 8; i++) std::memcpy(out + 32 * i, q + 32 * kFrom[i], 32);
}

// The input X [n_tokens][n] of one or more matmuls. Each quantized form is made on first use
// and kept until reset(), so matrices that read the same input (attention q/k/v, FFN gate/up)
// share one quantization. Keep one per context and reset() it: its buffers are reused.
class MatmulInput {
 public:
  MatmulInput() = default;
  MatmulInput(const float* x, int64_t n_tokens, int64_t n) { reset(x, n_tokens, n); }
  // bf16_exact: every value of X is a bf16 value (rounded for bf16 weights, as ggml does for GGUF
  // files): bf16 weights may then use vdpbf16ps.
  void reset(const float* x, int64_t n_tokens, int64_t n, bool bf16_exact = false) {
    x_ = x;
    n_tokens_ = n_tokens;
    n_ = n;
    bf16_exact_ = bf16_exact;
    ready_[0] = ready_[1] = false;
    mlx_gs_ = 0;
  }
  const float* x() const { return x_; }
  bool bf16_exact() const { return bf16_exact_; }
  int64_t n_tokens() const { return n_tokens_; }
  int64_t n() const { return n_; }

  // q8_256 inputs of up to this many tokens also hold q in Q4_K's nibble order (ActQ8::qn): the
  // one-token products (gemv) read it, the matrix-matrix path of more tokens does not.
  static constexpr int64_t kNibbleTokens = 8;

  // The activation quantizer of one form (a kernel: the level's quantize_q8_32 / _256).
  using Quantizer = void (*)(const float* x, int64_t n, int8_t* q, float* d, int16_t* sums);
  // Quantizes X into `f` (q8_32 or q8_256) with `quantize` unless done already; false when out
  // of memory.
  bool prepare(ActForm f, ThreadPool& pool, Quantizer quantize) {
    if (f == ActForm::f32) return true;
    Form& F = form(f);
    if (ready_[f == ActForm::q8_256]) return true;
    layout(F, f, n_, n_tokens_ <= kNibbleTokens);
    if (!F.buf.reserve(F.row_bytes * static_cast<size_t>(n_tokens_))) return false;
    auto one = [&](int64_t t) {
      const float* xt = x_ + t * n_;
      ActQ8 a = row(f, t);
      int8_t* q = const_cast<int8_t*>(a.q);
      float* d = const_cast<float*>(a.d);
      int16_t* s = const_cast<int16_t*>(a.sums);
      quantize(xt, n_, q, d, s);
      int16_t* s32 = const_cast<int16_t*>(a.sums32);
      for (size_t j = 0; j < F.ns32; j++) s32[j] = static_cast<int16_t>(s[2 * j] + s[2 * j + 1]);
      if (a.qn) {
        int8_t* qn = const_cast<int8_t*>(a.qn);
        for (int64_t i = 0; i < n_; i += 256) q8_nibble_order(q + i, qn + i);
      }
    };
    if (n_tokens_ * n_ >= 16384 && n_tokens_ > 1)
      pool.parallel_for(static_cast<int>(n_tokens_), [&](int t, int) { one(t); });
    else
      for (int64_t t = 0; t < n_tokens_; t++) one(t);
    ready_[f == ActForm::q8_256] = true;
    return true;
  }

  // Row t of a prepared form.
  ActQ8 row(ActForm f, int64_t t) const {
    const Form& F = form(f);
    const uint8_t* base = F.buf.as<uint8_t>(F.row_bytes * static_cast<size_t>(t));
    ActQ8 a;
    a.q = reinterpret_cast<const int8_t*>(base);
    a.d = reinterpret_cast<const float*>(base + F.off_d);
    a.sums = reinterpret_cast<const int16_t*>(base + F.off_s);
    if (F.ns32) a.sums32 = reinterpret_cast<const int16_t*>(base + F.off_s32);
    if (F.nibbles) a.qn = reinterpret_cast<const int8_t*>(base + F.off_qn);
    return a;
  }

  // Sums of X over groups of `gs` (MLX biases), made once per group size.
  bool prepare_mlx(int gs) {
    if (mlx_gs_ == gs) return true;
    if (!mlx_.reserve(mlx_bytes(gs, n_tokens_, n_))) return false;
    mlx_gs_ = gs;
    for (int64_t t = 0; t < n_tokens_; t++) mlx_group_sums(x_ + t * n_, n_, gs, mlx_sums(t));
    return true;
  }
  float* mlx_sums(int64_t t) const {
    return mlx_.as<float>(4 * static_cast<size_t>(t) * static_cast<size_t>(n_ / std::max(1, mlx_gs_)));
  }

  // Sizes the buffers for inputs of up to n_tokens x n in form `f` (and MLX sums of groups of
  // `mlx_gs`, 0: none) now, so that prepare() on such inputs allocates nothing. False when out
  // of memory.
  bool reserve(ActForm f, int64_t n_tokens, int64_t n, int mlx_gs) {
    if (f != ActForm::f32) {
      Form F, Fn;  // without and with the nibble-order copy (prepare: up to kNibbleTokens tokens)
      layout(F, f, n, false);
      layout(Fn, f, n, true);
      const size_t bytes = std::max(F.row_bytes * static_cast<size_t>(n_tokens),
                                    Fn.row_bytes * static_cast<size_t>(std::min(n_tokens, kNibbleTokens)));
      if (!form(f).buf.reserve(bytes)) return false;
    }
    return mlx_gs <= 0 || mlx_.reserve(mlx_bytes(mlx_gs, n_tokens, n));
  }

 private:
  struct Form {
    AlignedBuffer buf;
    size_t q_stride = 0, nd = 0, ns = 0, ns32 = 0, row_bytes = 0;
    size_t off_d = 0, off_s = 0, off_s32 = 0, off_qn = 0;
    bool nibbles = false;  // q8_256 rows with qn
  };
  // The row layout of form f (q8_32 or q8_256) for rows of n values; nibbles: q8_256 rows hold qn.
  static void layout(Form& F, ActForm f, int64_t n, bool nibbles) {
    const int64_t blk = f == ActForm::q8_32 ? 32 : 256, sum_len = f == ActForm::q8_32 ? 32 : 16;
    F.q_stride = round_up(static_cast<size_t>(n), 64);
    F.nd = static_cast<size_t>(n / blk);
    F.ns = static_cast<size_t>(n / sum_len);
    F.ns32 = f == ActForm::q8_256 ? static_cast<size_t>(n / 32) : 0;
    // per token (each part 64-byte aligned): q [q_stride] int8 | d [nd] f32 | sums [ns] int16, then
    // for q8_256 sums32 [ns32] int16 | qn [q_stride] int8 (ActQ8)
    F.off_d = F.q_stride;
    F.off_s = F.off_d + round_up(4 * F.nd, 64);
    F.off_s32 = F.off_s + round_up(2 * F.ns, 64);
    F.nibbles = nibbles && f == ActForm::q8_256;
    F.off_qn = F.off_s32 + round_up(2 * F.ns32, 64);
    F.row_bytes = F.off_qn + (F.nibbles ? F.q_stride : 0);
  }
  static size_t mlx_bytes(int gs, int64_t n_tokens, int64_t n) {
    return 4 * static_cast<size_t>(n / gs) * static_cast<size_t>(n_tokens) + 64;
  }
  Form& form(ActForm f) { return forms_[f == ActForm::q8_256]; }
  const Form& form(ActForm f) const { return forms_[f == ActForm::q8_256]; }

  const float* x_ = nullptr;
  int64_t n_tokens_ = 0, n_ = 0;
  bool bf16_exact_ = false;
  Form forms_[2];
  bool ready_[2] = {false, false};
  AlignedBuffer mlx_;
  int mlx_gs_ = 0;
};

// The most matrices KernelTable::matmul_group takes at once (q, k and v; gate and up).
constexpr int kMatmulGroup = 4;

// Scratch of the matrix products, owned by an evaluation context (created with it: one panel
// buffer per pool thread) and sized then for its largest product (KernelTable::matmul_reserve
// of each matrix at the context's most tokens); a product larger than planned grows it, and a
// kernel that cannot returns false and the context reports out_of_memory.
struct MatmulScratch {
  explicit MatmulScratch(int threads)
      : panels(std::make_unique<AlignedBuffer[]>(static_cast<size_t>(std::max(1, threads)))),
        n_panels(std::max(1, threads)) {}
  MatmulInput in;                           // the quantized input (matmul_x)
  AlignedBuffer starts;                     // gemm: integer start values of the blocks (offsets)
  AlignedBuffer xb;                         // gemm: the activations as bf16 (vdpbf16ps)
  AlignedBuffer xk;                         // gemm: q8_256 activations in micro_kq's order;
                                            // gemv_each_group: its groups of tokens
  std::unique_ptr<AlignedBuffer[]> panels;  // gemm: the decoded panel of each pool thread
  int n_panels;
  bool block_sums = true;  // a product of 6 or more tokens may take the block-sum order: the AMX tiles
                           // where compiled in and permitted, the AVX2 kernels' dots_q32 (false:
                           // llama.cpp's order for every batch)
};

// ---- elementwise activations (scalar; the row kernels are in 24_attention_kernels) ----
inline float silu_f32(float x) {
  return x / (1.0f + std::exp(-x));
}
// GELU, tanh approximation, at the fp16 precision ggml evaluates it with (ggml looks it up in a
// table indexed by fp16(x) holding fp16 results; beyond |x| >= 10 it is 0 or x): GGUF models then
// agree with llama.cpp, and the difference to the exact formula stays below fp16 resolution.
inline float gelu_tanh_f32(float x) {
  const float k = 0.79788456080286535587989211986876f;  // sqrt(2/pi)
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  const float f = fp16_to_f32(f32_to_fp16(x));
  // 1 + 0.044715 f^2 with one rounding, as g++ compiles ggml's expression (its table's bits)
  return fp16_to_f32(f32_to_fp16(0.5f * f * (1.0f + std::tanh(k * f * std::fma(0.044715f * f, f, 1.0f)))));
}
inline float gelu_erf_f32(float x) {
  return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752440f));
}
// gelu_tanh_f32 of every fp16 value, indexed by its bits: 256 KiB of static storage, not the heap
// (evaluating allocates nothing), filled on the first call; Context::init_scratch makes that call
// for a model that uses it, so the first token does not wait.
inline const float* gelu_tanh_table() {
  static const float* const table = [] {
    static float t[65536];
    for (uint32_t h = 0; h < 65536; h++) t[h] = gelu_tanh_f32(fp16_to_f32(static_cast<uint16_t>(h)));
    return t;
  }();
  return table;
}
}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
