// ==== Matrix products: the kernel seam the forward pass calls ====
// Y[t][r] = sum_k W[r][k] * X[t][k] for t < n_tokens, r < rows(W); X is [n_tokens][ne0(W)] f32,
// Y is [n_tokens][ldy] f32 (ldy >= rows).
//
// How:
//  * The input is quantized once per matmul (or once for several matmuls sharing it, through
//    MatmulInput): q8_32 blocks for Q4_0/Q5_0/Q8_0 weights, q8_256 for Q4_K/Q6_K (21_simd).
//    Float and MLX weights use the f32 input.
//  * Few tokens (decode): a threaded matrix-vector product; tasks are chunks of rows, each row is
//    one dot product straight from the mapped weights (21_simd), for each token.
//  * Many tokens (prefill, AVX-512): a blocked matrix-matrix product. A task takes a block of rows
//    and a block of tokens, decodes the rows once into a panel (unsigned 8-bit values with their
//    scales, or f32 for float/MLX types) kept in cache, and runs a register-tiled micro-kernel
//    (kRM rows x kRN tokens) over it: vpmaddubsw + vpdpwssd for K-quants, vpdpbusd for the
//    32-blocks, f32 FMA for float types. Offsets (Q4_K mins, Q6_K's -32, Q4_0's -8, ...) are a
//    small float product of per-block weight factors and per-block activation sums added in
//    the same micro-kernel.
//  * Determinism: every output element is computed by one task with arithmetic that depends
//    only on (row, token, K), never on the thread count or which tile it fell in (ragged tiles
//    repeat a valid row/token and drop the result), so 1..N threads give the same bits.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// 64-byte aligned growable scratch (malloc based: no exceptions; false when out of memory).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { std::free(raw_); }
  bool reserve(size_t bytes) {
    if (bytes <= cap_) return true;
    std::free(raw_);
    raw_ = std::malloc(bytes + 64);
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

inline size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

// Which form of the input a weight type multiplies with.
enum class ActForm : uint8_t { f32, q8_32, q8_256 };
inline ActForm act_form(DType t) {
  switch (t) {
    case DType::q4_0: case DType::q5_0: case DType::q8_0: return ActForm::q8_32;
    case DType::q4_K: case DType::q6_K: return ActForm::q8_256;
    default: return ActForm::f32;
  }
}

// The input X [n_tokens][n] of one or more matmuls. Each quantized form is made on first use
// and kept until reset(), so matrices that read the same input (attention q/k/v, FFN gate/up)
// share one quantization. Keep one per context and reset() it: its buffers are reused.
class MatmulInput {
 public:
  MatmulInput() = default;
  MatmulInput(const float* x, int64_t n_tokens, int64_t n) { reset(x, n_tokens, n); }
  void reset(const float* x, int64_t n_tokens, int64_t n) {
    x_ = x;
    n_tokens_ = n_tokens;
    n_ = n;
    ready_[0] = ready_[1] = false;
    mlx_gs_ = 0;
  }
  const float* x() const { return x_; }
  int64_t n_tokens() const { return n_tokens_; }
  int64_t n() const { return n_; }

  // Quantizes X into `f` (q8_32 or q8_256) unless done already; false when out of memory.
  bool prepare(ActForm f, ThreadPool& pool) {
    if (f == ActForm::f32) return true;
    Form& F = form(f);
    if (ready_[f == ActForm::q8_256]) return true;
    const int64_t blk = f == ActForm::q8_32 ? 32 : 256, sum_len = f == ActForm::q8_32 ? 32 : 16;
    F.q_stride = round_up(static_cast<size_t>(n_), 64);
    F.nd = static_cast<size_t>(n_ / blk);
    F.ns = static_cast<size_t>(n_ / sum_len);
    F.nc = static_cast<size_t>(n_ / 32);
    const size_t T = static_cast<size_t>(n_tokens_);
    // per token (each part 64-byte aligned): q [q_stride] int8 | d [nd] f32 | sums [ns] int16 |
    // corr16 [ns] f32 | corr32 [nc] f32
    F.off_d = F.q_stride;
    F.off_s = F.off_d + round_up(4 * F.nd, 64);
    F.off_c16 = F.off_s + round_up(2 * F.ns, 64);
    F.off_c32 = F.off_c16 + round_up(4 * F.ns, 64);
    F.row_bytes = F.off_c32 + round_up(4 * F.nc, 64);
    if (!F.buf.reserve(F.row_bytes * T)) return false;
    auto one = [&](int64_t t) {
      const float* xt = x_ + t * n_;
      ActQ8 a = row(f, t);
      int8_t* q = const_cast<int8_t*>(a.q);
      float* d = const_cast<float*>(a.d);
      int16_t* s = const_cast<int16_t*>(a.sums);
      if (f == ActForm::q8_32) quantize_q8_32(xt, n_, q, d, s);
      else quantize_q8_256(xt, n_, q, d, s);
      // activation factors of the offset corrections: d * (sum of q) per 16 (q8_256) and per 32
      float* c16 = corr(f, t, 16);
      float* c32 = corr(f, t, 32);
      if (f == ActForm::q8_256) {
        for (size_t g = 0; g < F.ns; g++) c16[g] = d[g / 16] * static_cast<float>(s[g]);
        for (size_t g = 0; g < F.nc; g++) c32[g] = d[g / 8] * static_cast<float>(s[2 * g] + s[2 * g + 1]);
      } else {
        for (size_t g = 0; g < F.nc; g++) c32[g] = d[g] * static_cast<float>(s[g]);
      }
    };
    if (n_tokens_ * n_ >= 16384 && n_tokens_ > 1) pool.parallel_for(static_cast<int>(n_tokens_), [&](int t, int) { one(t); });
    else for (int64_t t = 0; t < n_tokens_; t++) one(t);
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
    return a;
  }
  // Per-token activation factors d * (sum of q) over groups of 16 or 32 (offset corrections).
  float* corr(ActForm f, int64_t t, int group) const {
    const Form& F = form(f);
    return F.buf.as<float>(F.row_bytes * static_cast<size_t>(t) + (group == 16 ? F.off_c16 : F.off_c32));
  }

  // Sums of X over groups of `gs` (MLX biases), made once per group size.
  bool prepare_mlx(int gs) {
    if (mlx_gs_ == gs) return true;
    size_t groups = static_cast<size_t>(n_ / gs);
    if (!mlx_.reserve(4 * groups * static_cast<size_t>(n_tokens_) + 64)) return false;
    mlx_gs_ = gs;
    for (int64_t t = 0; t < n_tokens_; t++) mlx_group_sums(x_ + t * n_, n_, gs, mlx_sums(t));
    return true;
  }
  float* mlx_sums(int64_t t) const { return mlx_.as<float>(4 * static_cast<size_t>(t) * static_cast<size_t>(n_ / std::max(1, mlx_gs_))); }

 private:
  struct Form {
    AlignedBuffer buf;
    size_t q_stride = 0, nd = 0, ns = 0, nc = 0, row_bytes = 0;
    size_t off_d = 0, off_s = 0, off_c16 = 0, off_c32 = 0;
  };
  Form& form(ActForm f) { return forms_[f == ActForm::q8_256]; }
  const Form& form(ActForm f) const { return forms_[f == ActForm::q8_256]; }

  const float* x_ = nullptr;
  int64_t n_tokens_ = 0, n_ = 0;
  Form forms_[2];
  bool ready_[2] = {false, false};
  AlignedBuffer mlx_;
  int mlx_gs_ = 0;
};

// ---- matrix-vector products (few tokens) ----

// The dot product of row r with token t, for one weight type (the switch is outside the loops).
template <class F>
inline void for_weight_type(const TensorView& w, const MatmulInput& in, F&& body) {
  const uint64_t rb = weight_row_bytes(w);
  const int64_t n = w.ne[0];
  const uint8_t* base = w.data;
  auto q8 = [&](auto dot, ActForm f) {
    body([&, dot, f](int64_t r, int64_t t) { return dot(base + static_cast<uint64_t>(r) * rb, in.row(f, t), n); });
  };
  auto fl = [&](auto dot) {
    body([&, dot](int64_t r, int64_t t) { return dot(base + static_cast<uint64_t>(r) * rb, in.x() + t * n, n); });
  };
  switch (w.type) {
    // (lambdas, not function pointers, so that the dot product inlines into the row loop)
    case DType::q4_0: q8([](const uint8_t* p, const ActQ8& a, int64_t k) { return dot_q4_0(p, a, k); }, ActForm::q8_32); break;
    case DType::q5_0: q8([](const uint8_t* p, const ActQ8& a, int64_t k) { return dot_q5_0(p, a, k); }, ActForm::q8_32); break;
    case DType::q8_0: q8([](const uint8_t* p, const ActQ8& a, int64_t k) { return dot_q8_0(p, a, k); }, ActForm::q8_32); break;
    case DType::q4_K: q8([](const uint8_t* p, const ActQ8& a, int64_t k) { return dot_q4_k(p, a, k); }, ActForm::q8_256); break;
    case DType::q6_K: q8([](const uint8_t* p, const ActQ8& a, int64_t k) { return dot_q6_k(p, a, k); }, ActForm::q8_256); break;
    case DType::f32: fl([](const uint8_t* p, const float* x, int64_t k) { return dot_float<DType::f32>(p, x, k); }); break;
    case DType::f16: fl([](const uint8_t* p, const float* x, int64_t k) { return dot_float<DType::f16>(p, x, k); }); break;
    case DType::bf16: fl([](const uint8_t* p, const float* x, int64_t k) { return dot_float<DType::bf16>(p, x, k); }); break;
    case DType::mlx_q4: case DType::mlx_q8:
      body([&](int64_t r, int64_t t) { return dot_mlx(w, r, in.x() + t * n, in.mlx_sums(t)); });
      break;
    default: LLMI_ASSERT(!"matmul: weight type not computable"); break;
  }
}

inline void gemv(const TensorView& w, const MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool) {
  const int64_t rows = w.rows(), T = in.n_tokens();
  const uint64_t rb = std::max<uint64_t>(1, weight_row_bytes(w));
  // chunks: ~16 per thread for balance, but at least ~16 KiB of weights each
  int64_t chunk = std::max<int64_t>(rows / (16 * static_cast<int64_t>(pool.size())), static_cast<int64_t>(16384 / rb));
  chunk = std::clamp<int64_t>(chunk, 1, std::max<int64_t>(1, rows));
  const int n_tasks = static_cast<int>((rows + chunk - 1) / chunk);
  for_weight_type(w, in, [&](auto dot) {
    pool.parallel_for(n_tasks, [&](int task, int) {
      const int64_t r0 = task * chunk, r1 = std::min(rows, r0 + chunk);
      for (int64_t t = 0; t < T; t++) {
        float* yt = y + t * ldy;
        for (int64_t r = r0; r < r1; r++) yt[r] = dot(r, t);
      }
    });
  });
}

// ---- blocked matrix-matrix product (AVX-512) ----
#if defined(LLMI_SIMD_AVX512)
constexpr int kRM = 2;    // micro-tile rows (weights)
constexpr int kRN = 4;    // micro-tile columns (tokens)
constexpr int kRB = 32;   // rows per task (panel)
constexpr int kTB = 128;  // tokens per task

// A panel: kRB rows of W decoded for the micro-kernels.
//  K-quants: vals [rows][K] u8 (Q4_K 0..15, Q6_K 0..63), sc [rows][K/16] int16 (a scale per 16
//            values; Q4_K's 32-value scales twice), d [rows][K/256] f32, corr [rows][K/cg] f32.
//  32-blocks: vals [rows][K] u8 (Q4_0 0..15, Q5_0 0..31, Q8_0 q+128), d [rows][K/32] f32,
//            corr [rows][K/32] f32 = -offset * d.
//  float:    f [rows][K] f32.
// The corrections: row factor corr * token factor (d * sum of q) over groups of cg values gives
// the offset term (Q4_K: -dmin*m_j with cg 32; Q6_K: -32*d*sc_j with cg 16; 32-blocks: cg 32).
struct Panel {
  int64_t K = 0, rows = 0;
  uint8_t* vals = nullptr;
  int16_t* sc = nullptr;
  float* d = nullptr;
  float* corr = nullptr;
  float* f = nullptr;
  int cg = 32;
};

inline bool gemm_supported(DType t) {
  switch (t) {
    case DType::q4_0: case DType::q5_0: case DType::q8_0: case DType::q4_K: case DType::q6_K:
    case DType::f32: case DType::f16: case DType::bf16: case DType::mlx_q4: case DType::mlx_q8:
      return true;
    default: return false;
  }
}

// Decodes rows [r0, r0 + nr) of w into P (buffer `buf`).
inline bool panel_decode(const TensorView& w, int64_t r0, int64_t nr, AlignedBuffer& buf, Panel& P) {
  const int64_t K = w.ne[0];
  const uint64_t rb = weight_row_bytes(w);
  P.K = K;
  P.rows = nr;
  const size_t n = static_cast<size_t>(nr), k = static_cast<size_t>(K);
  ActForm f = act_form(w.type);
  if (f == ActForm::f32) {
    if (!buf.reserve(n * k * 4)) return false;
    P.f = buf.as<float>();
    for (int64_t i = 0; i < nr; i++) dequant_row(w, r0 + i, P.f + static_cast<size_t>(i) * k);
    return true;
  }
  const bool kq = f == ActForm::q8_256;
  P.cg = w.type == DType::q6_K ? 16 : 32;
  const size_t vals = round_up(n * k, 64), sc = kq ? round_up(n * k / 16 * 2, 64) : 0;
  const size_t dn = round_up(n * k / (kq ? 256 : 32) * 4, 64), cn = round_up(n * k / static_cast<size_t>(P.cg) * 4, 64);
  if (!buf.reserve(vals + sc + dn + cn)) return false;
  P.vals = buf.as<uint8_t>();
  P.sc = buf.as<int16_t>(vals);
  P.d = buf.as<float>(vals + sc);
  P.corr = buf.as<float>(vals + sc + dn);
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int64_t i = 0; i < nr; i++) {
    const uint8_t* src = w.data + static_cast<uint64_t>(r0 + i) * rb;
    uint8_t* v = P.vals + static_cast<size_t>(i) * k;
    switch (w.type) {
      case DType::q4_K: {
        int16_t* sc16 = P.sc + static_cast<size_t>(i) * k / 16;
        float* d = P.d + static_cast<size_t>(i) * k / 256;
        float* c = P.corr + static_cast<size_t>(i) * k / 32;
        for (int64_t b = 0; b < K / 256; b++) {
          const uint8_t* blk = src + 144 * b;
          uint64_t sc8, m8;
          q4k_unpack_scales(blk + 4, &sc8, &m8);
          float dmin = f16_scale(blk + 2);
          d[b] = f16_scale(blk);
          for (int j = 0; j < 8; j++) {
            sc16[16 * b + 2 * j] = sc16[16 * b + 2 * j + 1] = static_cast<int16_t>((sc8 >> (8 * j)) & 0xFF);
            c[8 * b + j] = -dmin * static_cast<float>((m8 >> (8 * j)) & 0xFF);
          }
          for (int ch = 0; ch < 4; ch++) {
            __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * ch));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + 256 * b + 64 * ch), _mm256_and_si256(q, m4));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + 256 * b + 64 * ch + 32), nibbles_hi256(q));
          }
        }
        break;
      }
      case DType::q6_K: {
        int16_t* sc16 = P.sc + static_cast<size_t>(i) * k / 16;
        float* d = P.d + static_cast<size_t>(i) * k / 256;
        float* c = P.corr + static_cast<size_t>(i) * k / 16;
        const __m256i m30 = _mm256_set1_epi8(0x30);
        for (int64_t b = 0; b < K / 256; b++) {
          const uint8_t* blk = src + 210 * b;
          float db = f16_scale(blk + 208);
          d[b] = db;
          for (int j = 0; j < 16; j++) {
            int8_t s = static_cast<int8_t>(blk[192 + j]);
            sc16[16 * b + j] = s;
            c[16 * b + j] = -32.0f * db * static_cast<float>(s);
          }
          for (int h = 0; h < 2; h++) {
            __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h));
            __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
            uint8_t* o = v + 256 * b + 128 * h;
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32), _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64), _mm256_or_si256(nibbles_hi256(ql0), _mm256_and_si256(qh, m30)));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 96), _mm256_or_si256(nibbles_hi256(ql1), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)));
          }
        }
        break;
      }
      default: {  // 32-blocks
        float* d = P.d + static_cast<size_t>(i) * k / 32;
        float* c = P.corr + static_cast<size_t>(i) * k / 32;
        for (int64_t b = 0; b < K / 32; b++) {
          __m256i q;
          float off;
          const uint8_t* blk;
          if (w.type == DType::q8_0) {
            blk = src + 34 * b;
            q = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)), _mm256_set1_epi8(static_cast<char>(0x80)));
            off = 128;
          } else if (w.type == DType::q4_0) {
            blk = src + 18 * b;
            q = q4_block_values(blk + 2);
            off = 8;
          } else {
            blk = src + 22 * b;
            q = _mm256_or_si256(q4_block_values(blk + 6), q5_high_bits(rd_u32(blk + 2)));
            off = 16;
          }
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + 32 * b), q);
          d[b] = f16_scale(blk);
          c[b] = -off * d[b];
        }
        break;
      }
    }
  }
  return true;
}

// Horizontal sums of the accumulators into out (row-major kRM x kRN).
template <int RM, int RN>
inline void store_tile(const __m512 (&acc)[RM][RN], float (&out)[RM][RN]) {
  for (int i = 0; i < RM; i++)
    for (int j = 0; j < RN; j++) out[i][j] = _mm512_reduce_add_ps(acc[i][j]);
}

// Adds the offset corrections: acc[i][j] += corr_i . act_j over m values.
template <int RM, int RN>
inline void add_corrections(__m512 (&acc)[RM][RN], const float* const (&ci)[RM], const float* const (&aj)[RN], int64_t m) {
  for (int64_t k = 0; k < m; k += 16) {
    __mmask16 mask = m - k >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (m - k)) - 1);
    __m512 a[RN];
#pragma GCC unroll 8
    for (int j = 0; j < RN; j++) a[j] = _mm512_maskz_loadu_ps(mask, aj[j] + k);
#pragma GCC unroll 8
    for (int i = 0; i < RM; i++) {
      __m512 c = _mm512_maskz_loadu_ps(mask, ci[i] + k);
#pragma GCC unroll 8
      for (int j = 0; j < RN; j++) acc[i][j] = _mm512_fmadd_ps(c, a[j], acc[i][j]);
    }
  }
}

// K-quant micro-kernel: rows pi[0..RM) of the panel times tokens tj[0..RN).
inline void micro_kq(const Panel& P, const int64_t (&pi)[kRM], const MatmulInput& in, const int64_t (&tj)[kRN], float (&out)[kRM][kRN]) {
  const int64_t K = P.K, nsb = K / 256;
  const uint8_t* wv[kRM];
  const int16_t* ws[kRM];
  const float* wd[kRM];
  const float* wc[kRM];
  for (int i = 0; i < kRM; i++) {
    wv[i] = P.vals + pi[i] * K;
    ws[i] = P.sc + pi[i] * K / 16;
    wd[i] = P.d + pi[i] * K / 256;
    wc[i] = P.corr + pi[i] * K / P.cg;
  }
  const int8_t* aq[kRN];
  const float* ad[kRN];
  const float* ac[kRN];
  for (int j = 0; j < kRN; j++) {
    ActQ8 a = in.row(ActForm::q8_256, tj[j]);
    aq[j] = a.q;
    ad[j] = a.d;
    ac[j] = in.corr(ActForm::q8_256, tj[j], P.cg);
  }
  // int16 lane l of the scale vector for values 64c..64c+63 takes scale 4c + l / 8
  const __m512i sel = _mm512_set_epi64(0x0003000300030003, 0x0003000300030003, 0x0002000200020002, 0x0002000200020002,
                                       0x0001000100010001, 0x0001000100010001, 0, 0);
  __m512 accf[kRM][kRN];
  for (int i = 0; i < kRM; i++)
    for (int j = 0; j < kRN; j++) accf[i][j] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; s++) {
    __m512i acc[kRM][kRN];
    __m512i scv[kRM];
#pragma GCC unroll 8
    for (int i = 0; i < kRM; i++) {
      scv[i] = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ws[i] + 16 * s)));
#pragma GCC unroll 8
      for (int j = 0; j < kRN; j++) acc[i][j] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
      __m512i w[kRM], sv[kRM];
      const __m512i idx = _mm512_add_epi16(sel, _mm512_set1_epi16(static_cast<short>(4 * c)));
#pragma GCC unroll 8
      for (int i = 0; i < kRM; i++) {
        w[i] = _mm512_loadu_si512(wv[i] + 256 * s + 64 * c);
        sv[i] = _mm512_permutexvar_epi16(idx, scv[i]);
      }
#pragma GCC unroll 8
      for (int j = 0; j < kRN; j++) {
        __m512i a = _mm512_loadu_si512(aq[j] + 256 * s + 64 * c);
#pragma GCC unroll 8
        for (int i = 0; i < kRM; i++) acc[i][j] = dot_u8s8_scaled_512(acc[i][j], w[i], a, sv[i]);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < kRM; i++)
#pragma GCC unroll 8
      for (int j = 0; j < kRN; j++)
        accf[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i][j]), _mm512_set1_ps(wd[i][s] * ad[j][s]), accf[i][j]);
  }
  add_corrections(accf, wc, ac, K / P.cg);
  store_tile(accf, out);
}

// 32-block micro-kernel (Q4_0, Q5_0, Q8_0).
inline void micro_q32(const Panel& P, const int64_t (&pi)[kRM], const MatmulInput& in, const int64_t (&tj)[kRN], float (&out)[kRM][kRN]) {
  const int64_t K = P.K, nb = K / 32;
  const uint8_t* wv[kRM];
  const float* wd[kRM];
  const float* wc[kRM];
  for (int i = 0; i < kRM; i++) {
    wv[i] = P.vals + pi[i] * K;
    wd[i] = P.d + pi[i] * nb;
    wc[i] = P.corr + pi[i] * nb;
  }
  const int8_t* aq[kRN];
  const float* ad[kRN];
  const float* ac[kRN];
  for (int j = 0; j < kRN; j++) {
    ActQ8 a = in.row(ActForm::q8_32, tj[j]);
    aq[j] = a.q;
    ad[j] = a.d;
    ac[j] = in.corr(ActForm::q8_32, tj[j], 32);
  }
  // lanes 0..7 take the scale of the first block, 8..15 the second
  const __m512i two = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  __m512 accf[kRM][kRN];
  for (int i = 0; i < kRM; i++)
    for (int j = 0; j < kRN; j++) accf[i][j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b += 2) {
    const bool pair = b + 1 < nb;
    const __mmask64 m = pair ? ~static_cast<__mmask64>(0) : static_cast<__mmask64>(0xFFFFFFFFull);
    const __mmask8 m2 = pair ? 3 : 1;
    __m512i w[kRM];
    __m512 dw[kRM];
#pragma GCC unroll 8
    for (int i = 0; i < kRM; i++) {
      w[i] = _mm512_maskz_loadu_epi8(m, wv[i] + 32 * b);
      dw[i] = _mm512_permutexvar_ps(two, _mm512_castps128_ps512(_mm_maskz_loadu_ps(m2, wd[i] + b)));
    }
#pragma GCC unroll 8
    for (int j = 0; j < kRN; j++) {
      __m512i a = _mm512_maskz_loadu_epi8(m, aq[j] + 32 * b);
      __m512 dx = _mm512_permutexvar_ps(two, _mm512_castps128_ps512(_mm_maskz_loadu_ps(m2, ad[j] + b)));
#pragma GCC unroll 8
      for (int i = 0; i < kRM; i++) {
#if defined(LLMI_SIMD_VNNI)
        __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[i], a);
#else
        // unsigned values up to 255 (Q8_0 + 128) would saturate vpmaddubsw: split into nibbles
        __m512i lo = _mm512_and_si512(w[i], _mm512_set1_epi8(15)), hi = _mm512_and_si512(_mm512_srli_epi16(w[i], 4), _mm512_set1_epi8(15));
        __m512i p = _mm512_add_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(lo, a), _mm512_set1_epi16(1)),
                                     _mm512_madd_epi16(_mm512_maddubs_epi16(hi, a), _mm512_set1_epi16(16)));
#endif
        accf[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw[i], dx), accf[i][j]);
      }
    }
  }
  add_corrections(accf, wc, ac, nb);
  store_tile(accf, out);
}

// Float micro-kernel (f32 panel of f32/f16/bf16/MLX weights times f32 X).
inline void micro_f32(const Panel& P, const int64_t (&pi)[kRM], const MatmulInput& in, const int64_t (&tj)[kRN], float (&out)[kRM][kRN]) {
  const int64_t K = P.K;
  const float* wr[kRM];
  const float* xr[kRN];
  for (int i = 0; i < kRM; i++) wr[i] = P.f + pi[i] * K;
  for (int j = 0; j < kRN; j++) xr[j] = in.x() + tj[j] * K;
  __m512 acc[kRM][kRN];
  for (int i = 0; i < kRM; i++)
    for (int j = 0; j < kRN; j++) acc[i][j] = _mm512_setzero_ps();
  add_corrections(acc, wr, xr, K);  // the same dot-product loop
  store_tile(acc, out);
}

inline void gemm(const TensorView& w, const MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool) {
  const int64_t rows = w.rows(), T = in.n_tokens();
  const int64_t n_rb = (rows + kRB - 1) / kRB, n_tb = (T + kTB - 1) / kTB;
  const ActForm f = act_form(w.type);
  auto micro = f == ActForm::q8_256 ? micro_kq : f == ActForm::q8_32 ? micro_q32 : micro_f32;
  pool.parallel_for(static_cast<int>(n_rb * n_tb), [&](int task, int) {
    static thread_local AlignedBuffer buf;
    const int64_t rblk = task % n_rb, tblk = task / n_rb;
    const int64_t r0 = rblk * kRB, nr = std::min<int64_t>(kRB, rows - r0);
    const int64_t t0 = tblk * kTB, nt = std::min<int64_t>(kTB, T - t0);
    Panel P;
    LLMI_ASSERT(panel_decode(w, r0, nr, buf, P));
    for (int64_t j0 = 0; j0 < nt; j0 += kRN) {
      int64_t tj[kRN];
      for (int j = 0; j < kRN; j++) tj[j] = t0 + std::min<int64_t>(j0 + j, nt - 1);
      for (int64_t i0 = 0; i0 < nr; i0 += kRM) {
        int64_t pi[kRM];
        for (int i = 0; i < kRM; i++) pi[i] = std::min<int64_t>(i0 + i, nr - 1);
        float out[kRM][kRN];
        micro(P, pi, in, tj, out);
        for (int j = 0; j < kRN && j0 + j < nt; j++)
          for (int i = 0; i < kRM && i0 + i < nr; i++) y[(t0 + j0 + j) * ldy + r0 + i0 + i] = out[i][j];
      }
    }
  });
}
#endif  // LLMI_SIMD_AVX512

// Smallest token count that takes the matrix-matrix path (fixed: it must not depend on threads).
constexpr int64_t kGemmMinTokens = 4;

// Y = X W^T for an input shared by several matmuls.
inline void matmul(const TensorView& w, MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool) {
  LLMI_ASSERT(in.n() == w.ne[0]);
  if (in.n_tokens() <= 0 || w.rows() <= 0) return;
  ActForm f = act_form(w.type);
  LLMI_ASSERT(in.prepare(f, pool));
  if (w.type == DType::mlx_q4 || w.type == DType::mlx_q8) LLMI_ASSERT(in.prepare_mlx(w.group_size));
#if defined(LLMI_SIMD_AVX512)
  if (in.n_tokens() >= kGemmMinTokens && gemm_supported(w.type)) {
    gemm(w, in, y, ldy, pool);
    return;
  }
#endif
  gemv(w, in, y, ldy, pool);
}

// Y[t][r] = sum_k W[r][k] * X[t][k]; X is [n_tokens][ne0(W)] f32, Y is [n_tokens][ldy] f32.
inline void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t ldy, ThreadPool& pool) {
  static thread_local MatmulInput in;
  in.reset(x, n_tokens, w.ne[0]);
  matmul(w, in, y, ldy, pool);
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
