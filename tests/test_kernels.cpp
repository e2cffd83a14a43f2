// Kernels: the SIMD paths compiled into this build against the scalar reference (detail::ref),
// on random blocks of every weight type, odd sizes, several token counts and thread counts.
//
// Two kinds of checks:
//  * exact: scales are powers of two and values small, so every float operation of both the
//    reference and the SIMD path is exact (checked: the reference equals a double-precision sum).
//    Then any difference is an integer error in the SIMD path, and results must be equal.
//  * random: realistic scales. The SIMD path computes the same per-block integer sums and only
//    adds the per-block float terms in another order (lanes, then a horizontal sum; offsets as a
//    separate sum). Classical summation error analysis bounds each result's error by
//    (length of the longest chain of roundings) * 2^-24 * sum_k |term_k|, for both the reference
//    and the SIMD path; we allow (n/8 + 128) * 2^-24 * M where M = sum_k (|w_k| + |c_k|) * |x_k|
//    (w dequantized weight, c the offset part that the integer path carries separately, x the
//    dequantized activation). A wrong nibble or scale moves a result by ~|term|, far above that.
#define LLMINFER_IMPLEMENTATION
#include <charconv>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "common.hpp"

namespace {

namespace li = llminfer::detail;
using li::DType;

struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t seed) : g(seed) {}
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); }
  float real(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(g); }
  float normal() { return std::normal_distribution<float>(0.0f, 1.0f)(g); }
  uint8_t byte() { return static_cast<uint8_t>(uniform(0, 255)); }
};

void put16(std::vector<uint8_t>& v, size_t at, uint16_t h) {
  std::memcpy(v.data() + at, &h, 2);
}

// A scale: 2^-exp2 (exact mode; one exponent per matrix keeps every sum within 24 bits) or a
// realistic random fp16 value; random sign if allowed.
int exp2_of_matrix = 4;
uint16_t rand_scale(Rng& r, bool exact, bool allow_negative, float lo = 1e-4f, float hi = 4e-2f) {
  float v = exact ? std::ldexp(1.0f, -exp2_of_matrix) : r.real(lo, hi);
  if (allow_negative && r.uniform(0, 1)) v = -v;
  return li::f32_to_fp16(v);
}

// A weight matrix of `type` with its own storage.
struct Matrix {
  std::vector<uint8_t> data, scales, biases;
  li::TensorView view;
};

Matrix make_matrix(DType type, int64_t rows, int64_t n, Rng& r, bool exact, DType aux = DType::f16, int gs = 64) {
  Matrix m;
  exp2_of_matrix = r.uniform(2, 7);
  m.view.type = type;
  m.view.n_dims = 2;
  m.view.ne[0] = n;
  m.view.ne[1] = rows;
  if (type == DType::mlx_q4 || type == DType::mlx_q8) {
    const int bits = type == DType::mlx_q4 ? 4 : 8;
    m.data.resize(static_cast<size_t>(rows * n * bits / 8));
    for (auto& b : m.data) b = r.byte();
    const size_t groups = static_cast<size_t>(rows * (n / gs)), es = aux == DType::f32 ? 4 : 2;
    m.scales.resize(groups * es);
    m.biases.resize(groups * es);
    for (size_t g = 0; g < groups; g++) {
      float s = exact ? std::ldexp(1.0f, -r.uniform(3, 6)) : r.real(1e-3f, 2e-2f);
      float b = exact ? static_cast<float>(r.uniform(-64, 64)) / 64.0f : r.real(-0.1f, 0.1f);
      for (int k = 0; k < 2; k++) {
        float v = k == 0 ? s : b;
        uint8_t* dst = (k == 0 ? m.scales : m.biases).data() + g * es;
        if (aux == DType::f32)
          std::memcpy(dst, &v, 4);
        else {
          uint16_t h = aux == DType::f16 ? li::f32_to_fp16(v) : li::f32_to_bf16(v);
          std::memcpy(dst, &h, 2);
        }
      }
    }
    m.view.scales = m.scales.data();
    m.view.biases = m.biases.data();
    m.view.aux_type = aux;
    m.view.group_size = gs;
  } else {
    uint64_t rb = 0;
    REQUIRE(li::dtype_row_bytes(type, static_cast<uint64_t>(n), &rb));
    m.data.resize(static_cast<size_t>(rb * static_cast<uint64_t>(rows)));
    for (auto& b : m.data) b = r.byte();
    const size_t total = m.data.size();
    switch (type) {
      case DType::q4_0:
      case DType::q5_0:
      case DType::q8_0: {
        size_t bs = type == DType::q4_0 ? 18 : type == DType::q5_0 ? 22 : 34;
        for (size_t at = 0; at < total; at += bs) put16(m.data, at, rand_scale(r, exact, true));
        break;
      }
      case DType::q4_K:
        for (size_t at = 0; at < total; at += 144) {
          put16(m.data, at, rand_scale(r, exact, true, 1e-4f, 2e-3f));
          put16(m.data, at + 2, rand_scale(r, exact, true, 1e-4f, 2e-3f));
        }
        break;
      case DType::q6_K:
        for (size_t at = 0; at < total; at += 210) {
          put16(m.data, at + 208, rand_scale(r, exact, true, 1e-5f, 5e-4f));
          if (exact)  // smaller sub-block scales keep the exact sums within 24 bits
            for (int j = 0; j < 16; j++)
              m.data[at + 192 + static_cast<size_t>(j)] = static_cast<uint8_t>(r.uniform(-31, 31));
        }
        break;
      case DType::f32:
        for (size_t at = 0; at < total; at += 4) {
          float v = exact ? static_cast<float>(r.uniform(-127, 127)) / 128.0f : r.normal() * 0.05f;
          std::memcpy(m.data.data() + at, &v, 4);
        }
        break;
      case DType::f16:
      case DType::bf16:
        for (size_t at = 0; at < total; at += 2) {
          float v = exact ? static_cast<float>(r.uniform(-127, 127)) / 128.0f : r.normal() * 0.05f;
          put16(m.data, at, type == DType::f16 ? li::f32_to_fp16(v) : li::f32_to_bf16(v));
        }
        break;
      default: FAIL("unexpected type"); break;
    }
  }
  m.view.data = m.data.data();
  m.view.nbytes = m.data.size();
  return m;
}

// Activations [T][n]. Exact mode: per 32 values, integers times 2^-k with one at +-127 * 2^-k,
// so both quantizers reproduce them exactly (scale 2^-k); the others are small (|q| <= 31) so
// that the exact sums stay within 24 bits.
std::vector<float> make_input(int64_t T, int64_t n, Rng& r, bool exact) {
  std::vector<float> x(static_cast<size_t>(T * n));
  for (int64_t t = 0; t < T; t++) {
    const int k = r.uniform(2, 6);
    for (int64_t i = 0; i < n; i++) {
      float& v = x[static_cast<size_t>(t * n + i)];
      if (exact)
        v = std::ldexp(static_cast<float>((i % 32 == 5) ? (r.uniform(0, 1) ? 127 : -127) : r.uniform(-31, 31)), -k);
      else
        v = r.normal() * (i % 97 == 3 ? 8.0f : 1.0f);  // a few outliers, as real activations have
    }
  }
  return x;
}

// The quantized form of one activation row, by the reference quantizer.
struct RefAct {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<int16_t> sums;
  li::ActQ8 view() const { return li::ActQ8{q.data(), d.data(), sums.data()}; }
  float value(int64_t i, int blk) const {
    return d[static_cast<size_t>(i / blk)] * static_cast<float>(q[static_cast<size_t>(i)]);
  }
};
RefAct ref_quantize(const float* x, int64_t n, li::ActForm f) {
  RefAct a;
  a.q.resize(static_cast<size_t>(n));
  if (f == li::ActForm::q8_32) {
    a.d.resize(static_cast<size_t>(n / 32));
    a.sums.resize(static_cast<size_t>(n / 32));
    li::ref::quantize_q8_32(x, n, a.q.data(), a.d.data(), a.sums.data());
  } else {
    a.d.resize(static_cast<size_t>(n / 256));
    a.sums.resize(static_cast<size_t>(n / 16));
    li::ref::quantize_q8_256(x, n, a.q.data(), a.d.data(), a.sums.data());
  }
  return a;
}

// Reference result for row r, the activation row x, and the tolerance mass M.
struct RefResult {
  float y = 0;
  double exact = 0;  // the same sum in double from the dequantized values
  double mass = 0;   // M = sum (|w| + |c|) |x|
};
RefResult reference(const li::TensorView& w, int64_t r, const float* x) {
  const int64_t n = w.ne[0];
  const li::ActForm f = li::act_form(w.type);
  const uint8_t* row = w.data + static_cast<uint64_t>(r) * li::weight_row_bytes(w);
  std::vector<float> wd(static_cast<size_t>(n)), xv(static_cast<size_t>(n)), off(static_cast<size_t>(n), 0.0f);
  li::dequant_row(w, r, wd.data());
  RefResult res;
  if (f == li::ActForm::f32) {
    for (int64_t i = 0; i < n; i++) xv[static_cast<size_t>(i)] = x[i];
    switch (w.type) {
      case DType::f32: res.y = li::ref::vec_dot_f32(row, x, n); break;
      case DType::f16: res.y = li::ref::vec_dot_f16(row, x, n); break;
      case DType::bf16: res.y = li::ref::vec_dot_bf16(row, x, n); break;
      default: {
        res.y = li::ref::vec_dot_mlx(w, r, x);
        const int64_t groups = n / w.group_size;
        for (int64_t i = 0; i < n; i++)
          off[static_cast<size_t>(i)] = li::ref::mlx_aux(w.biases, w.aux_type, r * groups + i / w.group_size);
      }
    }
  } else {
    const int blk = f == li::ActForm::q8_32 ? 32 : 256;
    RefAct a = ref_quantize(x, n, f);
    for (int64_t i = 0; i < n; i++) xv[static_cast<size_t>(i)] = a.value(i, blk);
    switch (w.type) {
      case DType::q4_0: res.y = li::ref::vec_dot_q4_0(row, a.view(), n); break;
      case DType::q5_0: res.y = li::ref::vec_dot_q5_0(row, a.view(), n); break;
      case DType::q8_0: res.y = li::ref::vec_dot_q8_0(row, a.view(), n); break;
      case DType::q4_K: res.y = li::ref::vec_dot_q4_k(row, a.view(), n); break;
      case DType::q6_K: res.y = li::ref::vec_dot_q6_k(row, a.view(), n); break;
      default: break;
    }
    for (int64_t i = 0; i < n; i++) {
      float c = 0;
      if (w.type == DType::q4_0) c = 8 * li::fp16_to_f32(li::rd_u16(row + 18 * (i / 32)));
      if (w.type == DType::q5_0) c = 16 * li::fp16_to_f32(li::rd_u16(row + 22 * (i / 32)));
      if (w.type == DType::q8_0) c = 128 * li::fp16_to_f32(li::rd_u16(row + 34 * (i / 32)));
      if (w.type == DType::q4_K) {
        const uint8_t* b = row + 144 * (i / 256);
        int sc, m;
        li::ref::q4k_scale_min(b + 4, static_cast<int>(i % 256) / 32, &sc, &m);
        c = li::fp16_to_f32(li::rd_u16(b + 2)) * static_cast<float>(m);
      }
      if (w.type == DType::q6_K) {
        const uint8_t* b = row + 210 * (i / 256);
        c = 32 * li::fp16_to_f32(li::rd_u16(b + 208)) *
            static_cast<float>(static_cast<int8_t>(b[192 + (i % 256) / 16]));
      }
      off[static_cast<size_t>(i)] = c;
    }
  }
  for (int64_t i = 0; i < n; i++) {
    size_t k = static_cast<size_t>(i);
    res.exact += static_cast<double>(wd[k]) * static_cast<double>(xv[k]);
    res.mass += (std::fabs(static_cast<double>(wd[k])) + std::fabs(static_cast<double>(off[k]))) *
                std::fabs(static_cast<double>(xv[k]));
  }
  return res;
}

double tolerance(int64_t n, double mass) {
  return (static_cast<double>(n) / 8 + 128) * std::ldexp(1.0, -24) * mass;
}

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, 4) == 0;
}

const DType kQuantTypes[] = {DType::q4_0, DType::q5_0, DType::q8_0, DType::q4_K, DType::q6_K};

}  // namespace

TEST_CASE("kernels: the compiled SIMD path is reported") {
  std::string s = li::simd_compiled();
  CHECK((s == "avx512" || s == "avx512+amx" || s == "avx2" || s == "neon" || s == "scalar" || s == "dispatch"));
  MESSAGE("SIMD path under test: " << s << ", kernels " << std::string(li::kernels().name));
}

TEST_CASE("kernels: a level is chosen by name, never above what the CPU has") {
  auto best = li::select_kernels("");
  REQUIRE(best);
  CHECK(std::string((*best)->name) != "");
  auto bad = li::select_kernels("avx9000");
  REQUIRE(!bad);
  CHECK(bad.error().code == llminfer::Errc::invalid_argument);
  CHECK(bad.error().message.find("avx9000") != std::string::npos);
#if defined(LLMINFER_DISPATCH)  // (the header's own LLMI_ macros end with it)
  // every level the CPU has can be chosen; with a CPU that reports nothing, only scalar
  const char* names[] = {"scalar", "avx2", "avx2+sums", "avx512", "avx512bf16", "avx512+amx"};
  for (int i = 0; i < 6; i++) {
    CAPTURE(names[i]);
    auto k = li::select_kernels(names[i]);
    CHECK(static_cast<bool>(k) == li::cpu_has_kernel_level(i));
    if (k)
      CHECK(std::string((*k)->name) == names[i]);
    else
      CHECK(k.error().code == llminfer::Errc::cpu_unsupported);
  }
  CHECK(li::kernel_levels_compiled() == "scalar,avx2,avx2+sums,avx512,avx512bf16,avx512+amx");
  if (auto amx = li::select_kernels("avx512+amx")) CHECK(li::kernels_use_amx(**amx));
  for (const char* n : names) {  // the block-sum order: the tiles, and the AVX2 kernels' named so
    auto k = li::select_kernels(n);
    if (k) CHECK(li::kernels_use_block_sums(**k) == (std::string(n) == "avx2+sums" || std::string(n) == "avx512+amx"));
  }
  auto saved = li::cpu_query;
  li::cpu_query = [] { return li::CpuInfo{}; };
  auto none = li::select_kernels("");
  auto avx2 = li::select_kernels("avx2");
  llminfer::LoadOptions lo;
  lo.kernels = "avx2";
  auto model = llminfer::Model::load(test::model_path("stories260K.gguf"), lo);
  li::cpu_query = saved;
  // (LLMINFER_KERNELS, when set, is what "" asks for: only "scalar" runs on that CPU)
  const char* env = std::getenv("LLMINFER_KERNELS");
  if (!env || !*env) {
    REQUIRE(none);
    CHECK(std::string((*none)->name) == "scalar");
  } else {
    CHECK(static_cast<bool>(none) == (std::string(env) == "scalar"));
  }
  REQUIRE(!avx2);
  CHECK(avx2.error().code == llminfer::Errc::cpu_unsupported);
  MESSAGE(avx2.error().message);
  REQUIRE(!model);
  CHECK(model.error().code == llminfer::Errc::cpu_unsupported);
#else
  if (std::string(li::simd_compiled()) == "avx512+amx") {
    // the same kernels with and without the tiles; with them only where the OS grants them
    CHECK(li::kernel_levels_compiled() == "avx512,avx512+amx");
    auto vnni = li::select_kernels("avx512");
    REQUIRE(vnni);
    CHECK(!li::kernels_use_amx(**vnni));
    auto amx = li::select_kernels("avx512+amx");
    if (amx)
      CHECK(li::kernels_use_amx(**amx));
    else
      CHECK(amx.error().code == llminfer::Errc::cpu_unsupported);
    MESSAGE("the AMX tiles: " << (amx ? "granted" : amx.error().message));
  } else if (std::string(li::simd_compiled()) == "avx2") {
    // the same kernels with and without the block-sum order for prompts; with it by default
    CHECK(li::kernel_levels_compiled() == "avx2,avx2+sums");
    auto exact = li::select_kernels("avx2"), sums = li::select_kernels("avx2+sums");
    REQUIRE(exact);
    REQUIRE(sums);
    CHECK(!li::kernels_use_block_sums(**exact));
    CHECK(li::kernels_use_block_sums(**sums));
    CHECK(std::string(li::kernels().name) == "avx2+sums");
  } else {
    CHECK(li::kernel_levels_compiled() == li::simd_compiled());
    CHECK(li::select_kernels(li::simd_compiled()));
  }
  llminfer::LoadOptions lo;
  lo.kernels = "avx9000";
  auto model = llminfer::Model::load(test::model_path("stories260K.gguf"), lo);
  REQUIRE(!model);
  CHECK(model.error().code == llminfer::Errc::invalid_argument);
#endif
}

TEST_CASE("kernels: activation quantizers are bit-identical to their references") {
  Rng r(1);
  const int64_t n = 256 * 6;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i++) x[static_cast<size_t>(i)] = r.normal() * std::ldexp(1.0f, r.uniform(-8, 4));
  for (int64_t i = 256; i < 512; i++) x[static_cast<size_t>(i)] = 0.0f;                 // an all-zero block
  for (int64_t i = 512; i < 768; i++) x[static_cast<size_t>(i)] = 1e-30f * r.normal();  // tiny values
  x[800] = 1e6f;                                                                        // an outlier
  for (int64_t i = 1024; i < 1056; i++) x[static_cast<size_t>(i)] = (i % 2 ? 0.5f : -0.5f) * (1 + (i % 5));  // ties
  for (li::ActForm f : {li::ActForm::q8_32, li::ActForm::q8_256}) {
    const int blk = f == li::ActForm::q8_32 ? 32 : 256, sl = f == li::ActForm::q8_32 ? 32 : 16;
    std::vector<int8_t> q(static_cast<size_t>(n)), qr(static_cast<size_t>(n));
    std::vector<float> d(static_cast<size_t>(n / blk)), dr(static_cast<size_t>(n / blk));
    std::vector<int16_t> s(static_cast<size_t>(n / sl)), sr(static_cast<size_t>(n / sl));
    if (f == li::ActForm::q8_32) {
      li::quantize_q8_32(x.data(), n, q.data(), d.data(), s.data());
      li::ref::quantize_q8_32(x.data(), n, qr.data(), dr.data(), sr.data());
    } else {
      li::quantize_q8_256(x.data(), n, q.data(), d.data(), s.data());
      li::ref::quantize_q8_256(x.data(), n, qr.data(), dr.data(), sr.data());
    }
    CHECK(q == qr);
    CHECK(s == sr);
    CHECK(std::memcmp(d.data(), dr.data(), d.size() * 4) == 0);
    // the reference itself (ggml's rules): |q| <= 127; the block's largest |x| maps to 127;
    // q8_32: d = amax / 127 rounded to fp16; q8_256: d = 1 / (-127 / m), m the first largest value
    int bad = 0;
    for (int64_t b = 0; b < n / blk; b++) {
      float amax = 0, m = 0;
      int qmax = 0;
      for (int64_t i = b * blk; i < (b + 1) * blk; i++) {
        if (std::fabs(x[static_cast<size_t>(i)]) > amax) m = x[static_cast<size_t>(i)];
        amax = std::max(amax, std::fabs(x[static_cast<size_t>(i)]));
        qmax = std::max(qmax, std::abs(static_cast<int>(qr[static_cast<size_t>(i)])));
      }
      float want = f == li::ActForm::q8_32 ? li::fp16_to_f32(li::f32_to_fp16(amax / 127.0f))
                   : amax > 0              ? 1 / (-127.0f / m)
                                           : 0.0f;
      bad += dr[static_cast<size_t>(b)] != want || (amax > 0 && qmax != 127) || qmax > 127;
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("kernels: quantized dot products equal the reference") {
  Rng r(2);
  for (DType t : kQuantTypes) {
    const bool k_quant = t == DType::q4_K || t == DType::q6_K;
    for (int64_t n : k_quant ? std::vector<int64_t>{256, 768, 2048} : std::vector<int64_t>{32, 96, 544, 1024}) {
      for (bool exact : {true, false}) {
        CAPTURE(std::string(li::dtype_name(t)));
        CAPTURE(n);
        CAPTURE(exact);
        const int64_t rows = 5;
        Matrix m = make_matrix(t, rows, n, r, exact);
        std::vector<float> x = make_input(1, n, r, exact);
        RefAct a = ref_quantize(x.data(), n, li::act_form(t));
        int mismatches = 0, inexact_cases = 0;
        for (int64_t row = 0; row < rows; row++) {
          const uint8_t* p = m.data.data() + static_cast<size_t>(row) * li::weight_row_bytes(m.view);
          float y = 0;
          switch (t) {
            case DType::q4_0: y = li::dot_q4_0(p, a.view(), n); break;
            case DType::q5_0: y = li::dot_q5_0(p, a.view(), n); break;
            case DType::q8_0: y = li::dot_q8_0(p, a.view(), n); break;
            case DType::q4_K: y = li::dot_q4_k(p, a.view(), n); break;
            default: y = li::dot_q6_k(p, a.view(), n); break;
          }
          RefResult ref = reference(m.view, row, x.data());
          if (exact) {
            inexact_cases += static_cast<double>(ref.y) != ref.exact;
            mismatches += !same_bits(y, ref.y);
          } else {
            mismatches += std::fabs(static_cast<double>(y) - ref.y) > tolerance(n, ref.mass);
          }
        }
        CHECK(inexact_cases == 0);
        CHECK(mismatches == 0);
      }
    }
  }
}

TEST_CASE("kernels: the one-token Q4_K dot has the same bits from a MatmulInput's nibble-order copy (ActQ8::qn)") {
  // A q8_256 MatmulInput also holds q in the order of Q4_K's nibbles (each 128 values: 0-31, 64-95,
  // 32-63, 96-127), which the AVX-512 dot reads two super-blocks at a time. Block counts 1, 3, 5
  // and 8 (pairs and a last single block); the same row without the copy, and without sums32 too,
  // takes the other path.
  Rng r(23);
  li::ThreadPool pool(1);
  for (int64_t n : {256, 768, 1280, 2048}) {
    CAPTURE(n);
    const int64_t rows = 7;
    Matrix m = make_matrix(DType::q4_K, rows, n, r, false);
    std::vector<float> x = make_input(1, n, r, false);
    li::MatmulInput in(x.data(), 1, n);
    REQUIRE(in.prepare(li::ActForm::q8_256, pool, &li::quantize_q8_256));
    const li::ActQ8 a = in.row(li::ActForm::q8_256, 0);
    REQUIRE(a.qn != nullptr);
    REQUIRE(a.sums32 != nullptr);
    int misplaced = 0;
    for (int64_t i = 0; i < n; i++) {
      const int64_t k = i % 128, at = i - k + (k < 32 ? k : k < 64 ? k + 32 : k < 96 ? k - 32 : k);
      misplaced += a.qn[at] != a.q[i];
    }
    CHECK(misplaced == 0);
    li::ActQ8 plain = a, bare = a;
    plain.qn = nullptr;
    bare.qn = nullptr;
    bare.sums32 = nullptr;
    int diffs = 0;
    for (int64_t row = 0; row < rows; row++) {
      const uint8_t* p = m.data.data() + static_cast<size_t>(row) * li::weight_row_bytes(m.view);
      const float y = li::dot_q4_k(p, a, n);
      diffs += !same_bits(y, li::dot_q4_k(p, plain, n)) + !same_bits(y, li::dot_q4_k(p, bare, n));
      const RefResult ref = reference(m.view, row, x.data());
      diffs += std::fabs(static_cast<double>(y) - ref.y) > tolerance(n, ref.mass);
    }
    CHECK(diffs == 0);
  }
  // more tokens: no copy (the matrix-matrix path does not read it)
  const int64_t T = li::MatmulInput::kNibbleTokens + 1;
  std::vector<float> x = make_input(T, 256, r, false);
  li::MatmulInput in(x.data(), T, 256);
  REQUIRE(in.prepare(li::ActForm::q8_256, pool, &li::quantize_q8_256));
  CHECK(in.row(li::ActForm::q8_256, T - 1).qn == nullptr);
}

TEST_CASE("kernels: float and MLX dot products equal the reference") {
  Rng r(3);
  struct Case {
    DType t;
    DType aux;
    int gs;
    int64_t n;
  };
  const Case cases[] = {
      {DType::f32, DType::f32, 0, 1},        {DType::f32, DType::f32, 0, 77},
      {DType::f32, DType::f32, 0, 1024},     {DType::f16, DType::f32, 0, 37},
      {DType::f16, DType::f32, 0, 1000},     {DType::f16, DType::f32, 0, 256},
      {DType::bf16, DType::f32, 0, 65},      {DType::bf16, DType::f32, 0, 512},
      {DType::mlx_q4, DType::f16, 64, 512},  {DType::mlx_q4, DType::bf16, 32, 96},
      {DType::mlx_q4, DType::f32, 128, 256}, {DType::mlx_q8, DType::bf16, 64, 192},
      {DType::mlx_q8, DType::f16, 32, 64},   {DType::mlx_q4, DType::bf16, 8, 24},
  };
  // modes of the float dot products: alone (one token), in a matmul of several tokens (another
  // summation order on AVX-512), and that with bf16-exact activations (vdpbf16ps where present)
  for (const Case& c : cases) {
    for (int mode = 0; mode < 3; mode++)
      for (bool exact : {true, false}) {
        if (mode > 0 && (c.t == DType::mlx_q4 || c.t == DType::mlx_q8)) continue;
        CAPTURE(std::string(li::dtype_name(c.t)));
        CAPTURE(c.n);
        CAPTURE(c.gs);
        CAPTURE(mode);
        CAPTURE(exact);
        Matrix m = make_matrix(c.t, 3, c.n, r, exact, c.aux, c.gs);
        std::vector<float> x = make_input(1, c.n, r, exact);
        const bool sgemm = mode >= 1, bf16x = mode == 2;
        if (bf16x)
          for (float& v : x) v = li::bf16_to_f32(li::f32_to_bf16(v));
        std::vector<float> xs(static_cast<size_t>(c.gs ? c.n / c.gs : 1));
        if (c.gs) li::mlx_group_sums(x.data(), c.n, c.gs, xs.data());
        int mismatches = 0, inexact_cases = 0;
        for (int64_t row = 0; row < 3; row++) {
          const uint8_t* p = m.data.data() + static_cast<size_t>(row) * li::weight_row_bytes(m.view);
          float y = c.t == DType::f32    ? li::dot_float<DType::f32>(p, x.data(), c.n, sgemm, bf16x)
                    : c.t == DType::f16  ? li::dot_float<DType::f16>(p, x.data(), c.n, sgemm, bf16x)
                    : c.t == DType::bf16 ? li::dot_float<DType::bf16>(p, x.data(), c.n, sgemm, bf16x)
                                         : li::dot_mlx(m.view, row, x.data(), xs.data());
          RefResult ref = reference(m.view, row, x.data());
          if (exact) {
            inexact_cases += static_cast<double>(ref.y) != ref.exact;
            mismatches += !same_bits(y, ref.y);
          } else {
            mismatches += std::fabs(static_cast<double>(y) - ref.y) > tolerance(c.n, ref.mass);
          }
        }
        CHECK(inexact_cases == 0);
        CHECK(mismatches == 0);
      }
  }
}

TEST_CASE(
    "matmul: one token with the rows taken as streams (cpu_streams_ahead), in pairs (cpu_pairs_rows) or as runs has "
    "the bits of each row alone") {
  // gemv where the CPU streams better with help (Intel) takes 8 rows at a time, one from each of 8
  // runs of a task's rows (dotr, the types with WK::multi_row); on AMD Zen 4 Q8_0 takes 2 at a
  // time, one from each half (dotr2, WK::pair_rows); elsewhere the rows one after another (dots,
  // WK::row_run, or dot). With the AVX2 kernels every mode takes 4 rows at a time, one from each
  // of 4 runs (dotr_avx2), the quantized types' one-row dots dot_avx2. Each forced, on any CPU, against each row as a
  // matrix of its own: the same bits in every row, at 1 and 3 threads. The shapes give several tasks, rows left over
  // after the 8 runs or the 2 halves, and odd block counts (Q4_0, Q5_0).
  Rng r(11);
  struct Case {
    DType t;
    int64_t rows, n;
  };
  const Case cases[] = {{DType::q8_0, 301, 1056}, {DType::q4_0, 263, 96},  {DType::q5_0, 517, 160},
                        {DType::q4_K, 389, 512},  {DType::q6_K, 307, 768}, {DType::f16, 45, 160}};
  li::ThreadPool one(1), three(3);
  for (const Case& c : cases) {
    CAPTURE(std::string(li::dtype_name(c.t)));
    Matrix m = make_matrix(c.t, c.rows, c.n, r, false, DType::f16, 64);
    std::vector<float> x = make_input(1, c.n, r, false);
    std::vector<float> alone(static_cast<size_t>(c.rows));
    const uint64_t rb = li::weight_row_bytes(m.view);
    for (int64_t row = 0; row < c.rows; row++) {
      li::TensorView v = m.view;
      v.ne[1] = 1;
      v.data = m.view.data + static_cast<uint64_t>(row) * rb;
      v.nbytes = rb;
      li::matmul(v, x.data(), 1, &alone[static_cast<size_t>(row)], 1, one, false);
    }
    for (li::ThreadPool* pool : {&one, &three}) {
      CAPTURE(pool->size());
      std::vector<float> y[3];  // runs, streams, pairs
      for (int mode = 0; mode < 3; mode++) {
        li::cpu_streams_ahead_forced = mode == 1;
        li::cpu_pairs_rows_forced = mode == 2;
        y[mode].assign(static_cast<size_t>(c.rows), -7.0f);
        li::matmul(m.view, x.data(), 1, y[mode].data(), c.rows, *pool, false);
      }
      li::cpu_streams_ahead_forced = -1;
      li::cpu_pairs_rows_forced = -1;
      for (int mode = 0; mode < 3; mode++) {
        CAPTURE(mode);
        int diffs = 0, unset = 0;
        for (int64_t row = 0; row < c.rows; row++) {
          diffs += !same_bits(alone[static_cast<size_t>(row)], y[mode][static_cast<size_t>(row)]);
          unset += y[mode][static_cast<size_t>(row)] == -7.0f;
        }
        CHECK(diffs == 0);
        CHECK(unset == 0);
      }
    }
  }
}

TEST_CASE(
    "matmul: every type, odd shapes, 1..33 tokens, 1-4 threads: equal to the reference and thread-count independent") {
  Rng r(4);
  struct Case {
    DType t;
    int64_t rows, n;
    DType aux = DType::f16;
    int gs = 0;
    bool bf16x = false;  // activations rounded to bf16 and declared so (vdpbf16ps where present)
  };
  const Case cases[] = {
      {DType::q4_0, 37, 96},
      {DType::q5_0, 70, 576},
      {DType::q8_0, 33, 1056},
      {DType::q8_0, 1, 64},
      {DType::q4_K, 35, 512},
      {DType::q4_K, 66, 768},
      {DType::q6_K, 41, 256},
      {DType::q6_K, 3, 1280},
      {DType::f32, 19, 100},
      {DType::f16, 23, 160},
      {DType::bf16, 9, 64},
      {DType::bf16, 9, 64, DType::f16, 0, true},
      {DType::bf16, 17, 80, DType::f16, 0, true},
      {DType::mlx_q4, 21, 256, DType::bf16, 64},
      {DType::mlx_q8, 5, 128, DType::f16, 32},
  };
  std::vector<li::ThreadPool*> pools;
  for (int th = 1; th <= 4; th++) pools.push_back(new li::ThreadPool(th));
  for (const Case& c : cases) {
    for (bool exact : {true, false}) {
      Matrix m = make_matrix(c.t, c.rows, c.n, r, exact, c.aux, c.gs ? c.gs : 64);
      for (int64_t T : {1, 2, 3, 4, 5, 9, 33}) {
        CAPTURE(std::string(li::dtype_name(c.t)));
        CAPTURE(c.rows);
        CAPTURE(c.n);
        CAPTURE(T);
        CAPTURE(exact);
        CAPTURE(c.bf16x);
        std::vector<float> x = make_input(T, c.n, r, exact);
        if (c.bf16x)
          for (float& v : x) v = li::bf16_to_f32(li::f32_to_bf16(v));
        const int64_t ldy = c.rows + 3;
        std::vector<float> y1;
        int thread_diffs = 0;
        for (int th = 1; th <= 4; th++) {
          std::vector<float> y(static_cast<size_t>(T * ldy), -7.0f);
          li::matmul(m.view, x.data(), T, y.data(), ldy, *pools[static_cast<size_t>(th - 1)], c.bf16x);
          if (th == 1)
            y1 = y;
          else
            thread_diffs += std::memcmp(y.data(), y1.data(), y.size() * 4) != 0;
        }
        CHECK(thread_diffs == 0);
        int mismatches = 0, inexact_cases = 0, padding_touched = 0;
        for (int64_t t = 0; t < T; t++) {
          for (int64_t row = 0; row < c.rows; row++) {
            RefResult ref = reference(m.view, row, x.data() + t * c.n);
            float y = y1[static_cast<size_t>(t * ldy + row)];
            if (exact) {
              inexact_cases += static_cast<double>(ref.y) != ref.exact;
              mismatches += !same_bits(y, ref.y);
            } else {
              mismatches += std::fabs(static_cast<double>(y) - ref.y) > tolerance(c.n, ref.mass);
            }
          }
          for (int64_t row = c.rows; row < ldy; row++)
            padding_touched += y1[static_cast<size_t>(t * ldy + row)] != -7.0f;
        }
        CHECK(inexact_cases == 0);
        CHECK(mismatches == 0);
        CHECK(padding_touched == 0);
      }
    }
  }
  for (auto* p : pools) delete p;
}

// The x86 kernels for several tokens (AVX2: gemm_rows, AVX-512: the matrix micro-kernels from 6
// tokens on) keep each (row, token) sum of a quantized row in the float order of the row's dot
// product, llama.cpp's for both (its ggml_vec_dot_* per (row, token) for K-quants, its sgemm, the
// same order, for 32-blocks): a token's results must not depend on the tokens evaluated with it.
// (Float weights follow llama.cpp's sgemm for several tokens, another order: not checked here.)
// With the AMX tiles (kernels "avx512+amx") the 32-block types and K-quants of 6 or more tokens take
// another order (next test): their products run here without them (MatmulScratch::amx), as with
// LoadOptions::kernels "avx512".
TEST_CASE("matmul: with the x86 kernels a quantized row gives a token the same bits alone or with others") {
  auto kern = li::select_kernels("");
  REQUIRE(kern);
  const std::string name = (*kern)->name;
  if (name.rfind("avx2", 0) != 0 && name.rfind("avx512", 0) != 0) {
    MESSAGE("skipped: the kernels here are " << name);
    return;
  }
  Rng r(11);
  li::ThreadPool pool(2);
  li::MatmulScratch no_amx(pool.size());
  no_amx.block_sums = false;
  struct Case {
    DType t;
    int64_t rows, n;
  };
  // (and K-quant rows of 9 and 10 super-blocks, and of 33: more than micro_kq keeps the factors
  // d(w) * d(a) of, kMaxKeptSb)
  const Case cases[] = {{DType::q4_0, 37, 96},   {DType::q5_0, 70, 576},  {DType::q8_0, 33, 1056},
                        {DType::q4_K, 35, 512},  {DType::q6_K, 41, 256},  {DType::q6_K, 3, 1280},
                        {DType::q4_K, 19, 2560}, {DType::q6_K, 17, 2304}, {DType::q4_K, 5, 8448},
                        {DType::q6_K, 5, 8448}};
  // both shapes of the 32-block micro-kernel's tiles (micro_q32, cpu_splits_zmm), on any CPU
  for (const Case& c : cases) {
    Matrix m = make_matrix(c.t, c.rows, c.n, r, false);
    for (int64_t T : {2, 3, 4, 7, 9, 70})  // (AVX2: packs of 2, 4 and 8 slots; 9: a last token alone)
      for (int split : {0, 1}) {
        CAPTURE(std::string(li::dtype_name(c.t)));
        CAPTURE(T);
        CAPTURE(split);
        std::vector<float> x = make_input(T, c.n, r, false);
        std::vector<float> y(static_cast<size_t>(T * c.rows)), y1(static_cast<size_t>(c.rows));
        li::cpu_splits_zmm_forced = split;
        const bool ok = (*kern)->matmul_x(m.view, x.data(), T, y.data(), c.rows, pool, false, no_amx);
        li::cpu_splits_zmm_forced = -1;  // (the one-token products below do not use it)
        REQUIRE(ok);
        int diffs = 0;
        for (int64_t t = 0; t < T; t++) {
          li::matmul(m.view, x.data() + t * c.n, 1, y1.data(), c.rows, pool, false);
          for (int64_t row = 0; row < c.rows; row++)
            diffs += !same_bits(y[static_cast<size_t>(t * c.rows + row)], y1[static_cast<size_t>(row)]);
        }
        CHECK(diffs == 0);
      }
  }
}

// The block-sum order for rows times 6 or more tokens (25_matmul): the AMX tiles (kernels
// "avx512+amx", where the OS permits them), else the AVX2 kernels' (kernels "avx2+sums": 32-blocks
// only, K-quants keep llama.cpp's order there). The integer sums are exact, and each (row, token)
// result is one float chain over the blocks in order. 32-blocks (Q4_0, Q5_0, Q8_0, gemm_amx_q32_task): acc =
// fma(float(sum_b), d_row_b * d_token_b, acc). K-quants (Q4_K, Q6_K, gemm_amx_kq_task), per super-block: acc =
// fma(float(sum_s sc_s (q - offset) . a), d_row * d_token, acc), then for Q4_K acc =
// fma(-float(sum_s m_s * (sum of a over s)), dmin_row * d_token, acc). Checked bit for bit
// against those chains computed here from the blocks' bytes and the input quantized as the matmul
// does, for ragged row and token counts (a 16 x 16 tile's edges; AVX2: 4 rows and 8 tokens at a
// time), 1 and 3 threads, Q8_0 rows with the value -128 (no quantizer writes it; a file may); and
// close to the one-token products.
TEST_CASE("matmul: the block-sum order gives each (row, token) the bits of their block-by-block float chain") {
  auto kern = li::select_kernels("avx512+amx");  // the suite runs at "avx512" / "avx2" otherwise
  if (!kern) kern = li::select_kernels("avx2+sums");
  if (!kern) {
    MESSAGE("skipped: " << kern.error().message);
    return;
  }
  REQUIRE(li::kernels_use_block_sums(**kern));
  const bool amx = li::kernels_use_amx(**kern);
  MESSAGE("kernels " << std::string((*kern)->name));
  Rng r(23);
  struct Case {
    DType t;
    int64_t rows, n, T;
  };
  const Case cases[] = {{DType::q8_0, 33, 1056, 7}, {DType::q8_0, 64, 96, 70},   {DType::q4_0, 37, 96, 33},
                        {DType::q5_0, 70, 576, 16}, {DType::q8_0, 17, 64, 600},  {DType::q4_0, 16, 2048, 6},
                        {DType::q4_K, 35, 512, 7},  {DType::q4_K, 64, 1280, 70}, {DType::q4_K, 17, 256, 600},
                        {DType::q6_K, 41, 256, 33}, {DType::q6_K, 3, 1280, 16},  {DType::q6_K, 70, 768, 6}};
  // the signed integers of a 32-block
  auto block_ints = [](DType t, const uint8_t* blk, int(&q)[32]) {
    for (int j = 0; j < 32; j++) {
      if (t == DType::q8_0) {
        q[j] = static_cast<int8_t>(blk[2 + j]);
      } else {
        const uint8_t* qs = blk + (t == DType::q5_0 ? 6 : 2);
        int v = j < 16 ? (qs[j] & 15) : (qs[j - 16] >> 4);
        if (t == DType::q5_0) {
          uint32_t qh;
          std::memcpy(&qh, blk + 2, 4);
          v |= static_cast<int>((qh >> j) & 1) << 4;
        }
        q[j] = v - (t == DType::q5_0 ? 16 : 8);
      }
    }
  };
  auto f16 = [](const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return li::fp16_to_f32(h);
  };
  // a K-quant super-block (GGUF's layouts): the values less the offset, the scale and (Q4_K) the
  // min of each value's sub-block
  auto super_block = [](DType t, const uint8_t* blk, int(&q)[256], int(&sc)[256], int(&mn)[256]) {
    if (t == DType::q4_K) {
      const uint8_t* s = blk + 4;
      for (int j = 0; j < 8; j++) {
        const int scj = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        const int mj = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        for (int i = 0; i < 32; i++) {
          const uint8_t byte = blk[16 + 32 * (j / 2) + i];
          q[32 * j + i] = j % 2 ? byte >> 4 : byte & 15;
          sc[32 * j + i] = scj;
          mn[32 * j + i] = mj;
        }
      }
    } else {
      for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
          const uint8_t *ql = blk + 64 * h, qh = blk[128 + 32 * h + l];
          q[128 * h + l] = ((ql[l] & 15) | ((qh & 3) << 4)) - 32;
          q[128 * h + l + 32] = ((ql[l + 32] & 15) | (((qh >> 2) & 3) << 4)) - 32;
          q[128 * h + l + 64] = ((ql[l] >> 4) | (((qh >> 4) & 3) << 4)) - 32;
          q[128 * h + l + 96] = ((ql[l + 32] >> 4) | (((qh >> 6) & 3) << 4)) - 32;
        }
      for (int i = 0; i < 256; i++) {
        sc[i] = static_cast<int8_t>(blk[192 + i / 16]);
        mn[i] = 0;
      }
    }
  };
  for (int threads : {1, 3}) {
    li::ThreadPool pool(threads);
    for (const Case& c : cases) {
      CAPTURE(std::string(li::dtype_name(c.t)));
      CAPTURE(c.rows);
      CAPTURE(c.n);
      CAPTURE(c.T);
      CAPTURE(threads);
      const bool kq = c.t == DType::q4_K || c.t == DType::q6_K;
      if (kq && !amx) continue;
      Matrix m = make_matrix(c.t, c.rows, c.n, r, false);
      if (c.t == DType::q8_0)  // -128 here and there, against negative activations too
        for (int64_t i = 0; i < c.rows * (c.n / 32); i += 3)
          m.data[static_cast<size_t>(i) * 34 + 2 + static_cast<size_t>(i % 32)] = 0x80;
      std::vector<float> x = make_input(c.T, c.n, r, false);
      std::vector<float> y(static_cast<size_t>(c.T * c.rows)), y1(static_cast<size_t>(c.rows));
      li::MatmulScratch scratch(pool.size());
      REQUIRE((*kern)->matmul_x(m.view, x.data(), c.T, y.data(), c.rows, pool, false, scratch));
      li::MatmulInput in(x.data(), c.T, c.n);
      const li::ActForm form = kq ? li::ActForm::q8_256 : li::ActForm::q8_32;
      REQUIRE(in.prepare(form, pool, kq ? &li::quantize_q8_256 : &li::quantize_q8_32));
      const int64_t bn = kq ? 256 : 32;  // values per block
      const uint64_t rb = li::weight_row_bytes(m.view), bs = rb / static_cast<uint64_t>(c.n / bn);
      int diffs = 0;
      double worst = 0, largest = 0;  // |AMX - one-token| and |one-token|, at most
      for (int64_t t = 0; t < c.T; t++) {
        const li::ActQ8 a = in.row(form, t);
        li::matmul(m.view, x.data() + t * c.n, 1, y1.data(), c.rows, pool, false);
        for (int64_t row = 0; row < c.rows; row++) {
          float acc = 0;
          for (int64_t b = 0; b < c.n / bn; b++) {
            const uint8_t* blk = m.view.data + static_cast<uint64_t>(row) * rb + static_cast<uint64_t>(b) * bs;
            const int8_t* aq = a.q + bn * b;
            if (kq) {
              int q[256], sc[256], mn[256], isum = 0, mins = 0;
              super_block(c.t, blk, q, sc, mn);
              for (int i = 0; i < 256; i++) {
                isum += sc[i] * q[i] * aq[i];
                mins += mn[i] * aq[i];
              }
              acc = std::fma(static_cast<float>(isum), f16(blk + (c.t == DType::q4_K ? 0 : 208)) * a.d[b], acc);
              if (c.t == DType::q4_K) acc = std::fma(-static_cast<float>(mins), f16(blk + 2) * a.d[b], acc);
            } else {
              int q[32], isum = 0;
              block_ints(c.t, blk, q);
              for (int j = 0; j < 32; j++) isum += q[j] * aq[j];
              acc = std::fma(static_cast<float>(isum), f16(blk) * a.d[b], acc);
            }
          }
          const float got = y[static_cast<size_t>(t * c.rows + row)];
          diffs += !same_bits(got, acc);
          worst = std::max(worst, std::abs(double(got) - y1[static_cast<size_t>(row)]));
          largest = std::max(largest, std::abs(double(y1[static_cast<size_t>(row)])));
        }
      }
      CHECK(diffs == 0);
      CHECK(worst <= 1e-5 * largest);  // the one-token product (llama.cpp's order) differs in rounding only
    }
  }
}

TEST_CASE("matmul: matmul_each gives every token the bits of a one-token matmul (batched decoding)") {
  // gemv_each (x86: gemm_rows, whose dotn_* take groups of 4 tokens; AVX-512 K-quants:
  // gemv_each_group, groups of 8 in pairs and quads of float lanes, a short group padded) must
  // compute token t of a step exactly as a matmul of token t alone does: every type, 1..19 tokens
  // (whole groups and the rest), 1 and 3 threads, the level this build runs.
  Rng r(6);
  const li::KernelTable& k = li::kernels();
  struct Case {
    DType t;
    int64_t rows, n;
    DType aux = DType::f16;
    int gs = 0;
    bool bf16x = false;
  };
  const Case cases[] = {
      {DType::q4_K, 37, 512},
      {DType::q6_K, 29, 768},
      {DType::q4_K, 5, 256},
      {DType::q6_K, 3, 256},
      {DType::q8_0, 33, 1056},
      {DType::q4_0, 19, 96},
      {DType::q5_0, 21, 576},
      {DType::f32, 19, 100},
      {DType::f16, 23, 160},
      {DType::bf16, 9, 64},
      {DType::bf16, 17, 96, DType::f16, 0, true},
      {DType::mlx_q4, 21, 256, DType::bf16, 64},
  };
  for (int th : {1, 3}) {
    li::ThreadPool pool(th);
    li::MatmulScratch scratch(th);
    for (const Case& c : cases) {
      Matrix m = make_matrix(c.t, c.rows, c.n, r, false, c.aux, c.gs ? c.gs : 64);
      for (int64_t T : {1, 2, 3, 4, 5, 7, 8, 9, 19}) {
        CAPTURE(std::string(li::dtype_name(c.t)));
        CAPTURE(T);
        CAPTURE(th);
        std::vector<float> x = make_input(T, c.n, r, false);
        if (c.bf16x)
          for (float& v : x) v = li::bf16_to_f32(li::f32_to_bf16(v));
        const int64_t ldy = c.rows + 2;
        std::vector<float> each(static_cast<size_t>(T * ldy), -7.0f), one(static_cast<size_t>(T * ldy), -7.0f);
        CHECK(k.matmul_each(m.view, x.data(), T, each.data(), ldy, pool, c.bf16x, scratch));
        for (int64_t t = 0; t < T; t++)
          CHECK(k.matmul_x(m.view, x.data() + t * c.n, 1, one.data() + t * ldy, ldy, pool, c.bf16x, scratch));
        CHECK(std::memcmp(each.data(), one.data(), each.size() * 4) == 0);
      }
    }
  }
}

// Matrices of every type the products take (512 values a row; MLX of two group sizes), and for
// each group of them, thread count and token count: each matrix's output of `group` (the whole
// group at once) against that of `one` (the matrix alone), bit for bit, with a stride of its own
// and padding between rows that must stay untouched (float inputs, not rounded to bf16).
template <class Group, class One>
void check_matmul_groups(uint64_t seed, const std::vector<std::vector<int>>& groups, std::vector<int64_t> tokens,
                         Group&& group, One&& one) {
  Rng r(seed);
  const int64_t n = 512;
  struct Mat {
    DType t;
    int64_t rows;
    DType aux = DType::f16;
    int gs = 64;
  };
  const Mat mats[] = {{DType::q4_K, 37},
                      {DType::q6_K, 300},
                      {DType::q8_0, 33},
                      {DType::q5_0, 1025},
                      {DType::q4_0, 5},
                      {DType::f16, 23},
                      {DType::bf16, 9},
                      {DType::f32, 19},
                      {DType::mlx_q4, 21, DType::bf16, 64},
                      {DType::mlx_q4, 17, DType::bf16, 128}};
  std::vector<Matrix> ms;
  for (const Mat& m : mats) ms.push_back(make_matrix(m.t, m.rows, n, r, false, m.aux, m.gs));
  for (int th : {1, 2, 3}) {
    li::ThreadPool pool(th);
    li::MatmulScratch scratch(th);
    for (const auto& g : groups) {
      for (int64_t T : tokens) {
        CAPTURE(th);
        CAPTURE(T);
        CAPTURE(g.size());
        std::vector<float> x = make_input(T, n, r, false);
        const li::TensorView* ws[li::kMatmulGroup];
        float* ys[li::kMatmulGroup];
        int64_t ld[li::kMatmulGroup];
        std::vector<std::vector<float>> got(g.size()), want(g.size());
        for (size_t j = 0; j < g.size(); j++) {
          ws[j] = &ms[static_cast<size_t>(g[j])].view;
          ld[j] = ws[j]->rows() + static_cast<int64_t>(j);
          got[j].assign(static_cast<size_t>(T * ld[j]), -7.0f);
          want[j].assign(static_cast<size_t>(T * ld[j]), -7.0f);
          ys[j] = got[j].data();
        }
        CHECK(group(ws, static_cast<int>(g.size()), x.data(), T, ys, ld, pool, false, scratch));
        for (size_t j = 0; j < g.size(); j++) {
          CAPTURE(std::string(li::dtype_name(ws[j]->type)));
          CHECK(one(*ws[j], x.data(), T, want[j].data(), ld[j], pool, false, scratch));
          CHECK(std::memcmp(got[j].data(), want[j].data(), got[j].size() * 4) == 0);
        }
      }
    }
  }
}

// The products of one input with several matrices (q, k and v; gate and up) run as one job of
// the pool for a token (matmul_group): each matrix must get the bits of its own matmul, whatever
// the mix of types (two forms of quantized input, float rows, MLX groups of one size or of two,
// where the job falls back to one product at a time), rows per matrix, output strides, tokens and
// threads; and no value outside its rows may be written.
TEST_CASE("matmul: matmul_group gives each matrix the bits of its own matmul") {
  const li::KernelTable& k = li::kernels();
  check_matmul_groups(
      8, {{0}, {0, 1}, {1, 3, 5}, {0, 1, 2, 3}, {4, 5, 6, 7}, {8, 3}, {8, 9}, {9, 8, 0, 6}, {2, 2}, {7, 0, 4}},
      {1, 2, 5}, [&](auto&&... a) { return k.matmul_group(a...); }, [&](auto&&... a) { return k.matmul_x(a...); });
}

// matmul_each_group (batched decoding: the single tokens of several sequences times the products
// of one input) gives every matrix the bits of its own matmul_each: the input quantized once for
// all, on AVX2 the packs of the tokens made once per pack form (Q8_0 / Q4_0 / Q5_0 one form, Q4_K
// one, Q6_K one; a group of several forms puts them side by side) and the matrices' rows one job;
// token counts with and without a lone last token (dotn), one pack and several.
TEST_CASE("matmul: matmul_each_group gives each matrix the bits of its own matmul_each") {
  const li::KernelTable& k = li::kernels();
  const std::vector<std::vector<int>> groups = {{0},          {0, 1}, {1, 0}, {3, 4, 2}, {0, 1, 2, 3}, {1, 3, 5},
                                                {4, 5, 6, 7}, {8, 3}, {8, 9}, {2, 2},    {0, 0, 1},    {6, 1, 1, 0}};
  check_matmul_groups(
      9, groups, {1, 2, 3, 5, 8, 9, 17}, [&](auto&&... a) { return k.matmul_each_group(a...); },
      [&](auto&&... a) { return k.matmul_each(a...); });
}

// The heads of one key-value group, or of a block of tokens, are scored and summed at once (the
// kernels read the cells once for up to 8 queries): every head must keep the bits it has alone,
// for each cache type, 1..19 queries (chunks of 8, of 4 and the rest), head sizes with and without
// a rest of 16 values, and runs of cells that wrap around the ring (two runs); a cell scores the
// same bits in any run (alone too); a value sum that goes on from an earlier one (add) has the
// bits of one sum over both runs of cells.
TEST_CASE("kernels: several heads of a group attend with the bits of each head alone") {
  const li::KernelTable& k = li::kernels();
  Rng r(31);
  for (bool f16 : {true, false})
    for (int hd : {64, 128, 80, 40, 256})
      for (int nq : {1, 2, 3, 4, 5, 8, 9, 16, 19}) {
        CAPTURE(f16);
        CAPTURE(hd);
        CAPTURE(nq);
        const int slots = 37, lo = 21, pos = 21 + 30;  // positions 21..51: slots 21..36, then 0..14
        const size_t es = f16 ? 2 : 4, stride = size_t(hd) * es;
        std::vector<uint8_t> kc(size_t(slots) * stride), vc(size_t(slots) * stride);
        for (size_t i = 0; i < size_t(slots) * size_t(hd); i++) {
          const float a = r.real(-1, 1), b = r.real(-1, 1);
          if (f16) {
            const uint16_t ha = li::f32_to_fp16(a), hb = li::f32_to_fp16(b);
            std::memcpy(kc.data() + 2 * i, &ha, 2);
            std::memcpy(vc.data() + 2 * i, &hb, 2);
          } else {
            std::memcpy(kc.data() + 4 * i, &a, 4);
            std::memcpy(vc.data() + 4 * i, &b, 4);
          }
        }
        std::vector<float> q(size_t(nq) * size_t(hd));
        for (float& x : q) x = r.real(-1, 1);
        const int nk = pos - lo + 1;
        // scores: one call for the whole run of slots lo..36 (then 0..14), all heads, and each head alone
        std::vector<float> all(size_t(nq) * size_t(nk)), one(static_cast<size_t>(nk));
        int diffs = 0;
        for (int j = lo; j <= pos;) {
          const int slot = j % slots, run = std::min(pos - j + 1, slots - slot);
          k.attn_scores(q.data(), nq, size_t(hd), kc.data() + size_t(slot) * stride, stride, run, hd, f16, 0.125f,
                        all.data() + (j - lo), size_t(nk));
          j += run;
        }
        for (int i = 0; i < nq; i++) {
          for (int j = lo; j <= pos;) {
            const int slot = j % slots, run = std::min(pos - j + 1, slots - slot);
            k.attn_scores(q.data() + size_t(i) * size_t(hd), 1, size_t(hd), kc.data() + size_t(slot) * stride, stride,
                          run, hd, f16, 0.125f, one.data() + (j - lo), size_t(nk));
            j += run;
          }
          for (int j = 0; j < nk; j++) diffs += !same_bits(all[size_t(i) * size_t(nk) + size_t(j)], one[size_t(j)]);
        }
        CHECK(diffs == 0);
        // a cell's score does not depend on the run it is in (where the ring wraps, how many cells
        // a kernel takes at once): every cell alone, all heads
        diffs = 0;
        for (int j = lo; j <= pos; j++) {
          std::vector<float> cell(static_cast<size_t>(nq));
          k.attn_scores(q.data(), nq, size_t(hd), kc.data() + size_t(j % slots) * stride, stride, 1, hd, f16, 0.125f,
                        cell.data(), 1);
          for (int i = 0; i < nq; i++)
            diffs += !same_bits(all[size_t(i) * size_t(nk) + size_t(j - lo)], cell[size_t(i)]);
        }
        CHECK(diffs == 0);
        // values: weights per head, every head at once and each alone (ring of two runs; several)
        std::vector<float> w(size_t(nq) * size_t(nk));
        for (float& x : w) x = r.real(0, 0.1f);
        std::vector<float> part(size_t(64) * size_t((hd + 15) & ~15)), out(size_t(nq) * size_t(hd)),
            out1(static_cast<size_t>(hd));
        for (bool several : {false, true}) {
          k.attn_values(w.data(), nq, size_t(nk), vc.data(), stride, slots, lo, pos, hd, f16, several, false,
                        part.data(), out.data(), size_t(hd));
          diffs = 0;
          for (int i = 0; i < nq; i++) {
            k.attn_values(w.data() + size_t(i) * size_t(nk), 1, size_t(nk), vc.data(), stride, slots, lo, pos, hd, f16,
                          several, false, part.data(), out1.data(), size_t(hd));
            for (int e = 0; e < hd; e++) diffs += !same_bits(out[size_t(i) * size_t(hd) + size_t(e)], out1[size_t(e)]);
          }
          CHECK(diffs == 0);
        }
        // f16: cells 0..14 (one run), then 15..29 going on from those sums (add), as 0..29 at once
        if (f16) {
          std::vector<float> whole(out.size());
          k.attn_values(w.data(), nq, size_t(nk), vc.data(), stride, slots, 0, 29, hd, f16, true, false, part.data(),
                        whole.data(), size_t(hd));
          k.attn_values(w.data(), nq, size_t(nk), vc.data(), stride, slots, 0, 14, hd, f16, true, false, part.data(),
                        out.data(), size_t(hd));
          k.attn_values(w.data() + 15, nq, size_t(nk), vc.data(), stride, slots, 15, 29, hd, f16, true, true,
                        part.data(), out.data(), size_t(hd));
          diffs = 0;
          for (size_t x = 0; x < out.size(); x++) diffs += !same_bits(out[x], whole[x]);
          CHECK(diffs == 0);
        }
      }
}

// A long context's value sums (f16 cache) with the bits of one multiply-add per cell in cell order
// (the x86 kernels' order; the kernels take the cells in blocks of about 16 KiB and go on from one
// block's sums to the next): runs of 1..300 cells (several blocks for every head size here), 1..5
// rows at once, from 0 and going on from earlier sums (add). Other levels (scalar, NEON: `+=`, the
// compiler's contraction) within a tolerance of the sum in double. And the scores of the 1..5
// queries at once over those cells (AVX2: more than 4 queries go over blocks of cells) with the
// bits of each query alone.
TEST_CASE("kernels: value sums over a long context keep one multiply-add per cell in cell order") {
  const li::KernelTable& k = li::kernels();
  const std::string simd = k.name;
  const bool fma_order = simd.rfind("avx", 0) == 0;
  Rng r(77);
  for (int hd : {64, 128, 256, 80, 40})
    for (int n : {1, 63, 64, 65, 129, 300})
      for (int nq : {1, 2, 3, 4, 5})
        for (bool add : {false, true}) {
          CAPTURE(hd);
          CAPTURE(n);
          CAPTURE(nq);
          CAPTURE(add);
          const size_t stride = size_t(hd) * 2;
          std::vector<uint8_t> vc(size_t(n) * stride);
          std::vector<float> vf(size_t(n) * size_t(hd));
          for (size_t i = 0; i < vf.size(); i++) {
            const uint16_t h = li::f32_to_fp16(r.real(-1, 1));
            std::memcpy(vc.data() + 2 * i, &h, 2);
            vf[i] = li::fp16_to_f32(h);
          }
          std::vector<float> w(size_t(nq) * size_t(n)), out(size_t(nq) * size_t(hd)), part(size_t(64) * 256);
          for (float& x : w) x = r.real(0, 0.1f);
          for (float& x : out) x = add ? r.real(-1, 1) : 1e30f;  // (without add, whatever was there goes)
          const std::vector<float> start = out;
          k.attn_values(w.data(), nq, size_t(n), vc.data(), stride, n, 0, n - 1, hd, true, false, add, part.data(),
                        out.data(), size_t(hd));
          int diffs = 0, outside = 0;
          for (int i = 0; i < nq; i++)
            for (int e = 0; e < hd; e++) {
              float chain = add ? start[size_t(i) * size_t(hd) + size_t(e)] : 0.0f;
              double exact = chain;
              for (int j = 0; j < n; j++) {
                const float wj = w[size_t(i) * size_t(n) + size_t(j)], x = vf[size_t(j) * size_t(hd) + size_t(e)];
                chain = std::fma(wj, x, chain);
                exact += double(wj) * double(x);
              }
              const float got = out[size_t(i) * size_t(hd) + size_t(e)];
              diffs += !same_bits(got, chain);
              outside += !(std::fabs(double(got) - exact) <= 1e-4 * (1 + std::fabs(exact)));
            }
          if (fma_order) CHECK(diffs == 0);
          CHECK(outside == 0);
          // the scores of all the queries at once (the x86 kernels: over blocks of cells) have the
          // bits of each query alone (n cells of keys: the values' cells)
          std::vector<float> q(size_t(nq) * size_t(hd)), all(size_t(nq) * size_t(n)), one(static_cast<size_t>(n));
          for (float& x : q) x = r.real(-1, 1);
          k.attn_scores(q.data(), nq, size_t(hd), vc.data(), stride, n, hd, true, 0.125f, all.data(), size_t(n));
          diffs = 0;
          for (int i = 0; i < nq; i++) {
            k.attn_scores(q.data() + size_t(i) * size_t(hd), 1, size_t(hd), vc.data(), stride, n, hd, true, 0.125f,
                          one.data(), size_t(n));
            for (int j = 0; j < n; j++) diffs += !same_bits(all[size_t(i) * size_t(n) + size_t(j)], one[size_t(j)]);
          }
          CHECK(diffs == 0);
        }
}

TEST_CASE("matmul: one MatmulInput shared by matrices of different types gives the same results") {
  Rng r(5);
  li::ThreadPool pool(2);
  const int64_t n = 512;
  for (int64_t T : {1, 6}) {
    std::vector<float> x = make_input(T, n, r, false);
    li::MatmulInput in(x.data(), T, n);
    for (DType t : {DType::q4_K, DType::q8_0, DType::q6_K, DType::f16, DType::q4_0}) {
      CAPTURE(std::string(li::dtype_name(t)));
      Matrix m = make_matrix(t, 24, n, r, false);
      std::vector<float> a(static_cast<size_t>(T * 24)), b(static_cast<size_t>(T * 24));
      li::matmul(m.view, in, a.data(), 24, pool);
      li::matmul(m.view, x.data(), T, b.data(), 24, pool);
      CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
    }
  }
}

TEST_CASE("cpu check: a CPU without the compiled-in instructions is refused with a message") {
  auto saved = li::cpu_query;
  li::cpu_query = [] { return li::CpuInfo{}; };  // a CPU that reports nothing at all
  std::string missing = li::cpu_missing_features();
  auto res = li::check_cpu();
  auto model = llminfer::Model::load(test::model_path("stories260K.gguf"));
  li::cpu_query = saved;
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__AVX2__) || defined(__SSE3__))
  CHECK(!missing.empty());
  CHECK(!res);
  CHECK(res.error().code == llminfer::Errc::cpu_unsupported);
  CHECK(res.error().message.find(li::simd_compiled()) != std::string::npos);
  CHECK(!model);
  if (!model) {
    CHECK(model.error().code == llminfer::Errc::cpu_unsupported);
    MESSAGE(model.error().message);
  }
#if defined(__AVX512VNNI__)
  CHECK(missing.find("AVX512VNNI") != std::string::npos);
#endif
#if defined(__AVX2__)
  CHECK(missing.find("AVX2") != std::string::npos);
#endif
#endif
  // and the real CPU passes (the test binary is running on it)
  CHECK(li::cpu_missing_features().empty());
  CHECK(li::check_cpu());
}

namespace {

uint64_t fnv64(const void* data, size_t n) {
  uint64_t h = 0xCBF29CE484222325ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}
std::string hex64(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}
DType type_named(const std::string& name) {
  for (int v = 0; v < 43; v++) {
    auto t = static_cast<DType>(v);
    std::string n = li::dtype_name(t), a = name;
    for (auto& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (auto& c : a) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (n == a) return t;
  }
  return DType::invalid;
}
// Hash of every row of w dequantized to f32.
std::string dequant_hash(const li::TensorView& w) {
  std::vector<float> all(static_cast<size_t>(w.nelements()));
  for (int64_t r = 0; r < w.rows(); r++) li::dequant_row(w, r, all.data() + r * w.ne[0]);
  return hex64(fnv64(all.data(), all.size() * 4));
}

}  // namespace

TEST_CASE("dequant: every block format decodes exactly as gguf.py (checked against ggml) does") {
  std::ifstream f("tests/goldens/kernels/dequant.txt");
  REQUIRE(f.good());
  std::string line;
  int blocks = 0, tensors = 0;
  std::vector<DType> covered;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string kind;
    in >> kind;
    if (kind == "blocks") {
      std::string type, hex, hash;
      int64_t n = 0, rows = 0;
      in >> type >> n >> rows >> hex >> hash;
      CAPTURE(type);
      std::vector<uint8_t> raw(hex.size() / 2);
      for (size_t i = 0; i < raw.size(); i++) std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, raw[i], 16);
      li::TensorView w;
      w.type = type_named(type);
      w.n_dims = 2;
      w.ne[0] = n;
      w.ne[1] = rows;
      w.data = raw.data();
      w.nbytes = raw.size();
      REQUIRE(li::dtype_computable(w.type));
      CHECK(dequant_hash(w) == hash);
      covered.push_back(w.type);
      blocks++;
    } else if (kind == "tensor") {
      std::string file, name, type, hash;
      in >> file >> name >> type >> hash;
      CAPTURE(file);
      CAPTURE(name);
      auto desc = li::load_description(test::model_path(file));
      REQUIRE(desc);
      const li::TensorView* w = (*desc)->find(name);
      REQUIRE(w);
      CHECK(w->type == type_named(type));
      CHECK(dequant_hash(*w) == hash);
      tensors++;
    }
  }
  CHECK(blocks == 7);
  CHECK(tensors >= 6);
  for (DType t : kQuantTypes) CHECK(std::find(covered.begin(), covered.end(), t) != covered.end());
}

TEST_CASE("dequant: MLX affine 4-bit equals its dequantized F32 GGUF twin exactly") {
  auto mlx = li::load_description(test::model_path("hf/smollm2-tiny/mlx-4bit"));
  auto twin = li::load_description(test::model_path("hf/smollm2-tiny/mlx-4bit-oracle-f32.gguf"));
  REQUIRE(mlx);
  REQUIRE(twin);
  const li::ModelDesc& m = **mlx;
  CHECK(m.format == li::FileFormat::safetensors);  // an MLX directory is safetensors to the public API too
  CHECK(std::string(li::file_format_name(m.format)) == "safetensors");
  int quantized = 0, mismatched_tensors = 0;
  for (const li::TensorView& w : m.tensors) {
    if (w.type != DType::mlx_q4) continue;
    quantized++;
    CAPTURE(w.name);
    const li::TensorView* o = (*twin)->find(w.name);
    REQUIRE(o);
    REQUIRE(o->type == DType::f32);
    REQUIRE(o->ne[0] == w.ne[0]);
    REQUIRE(o->rows() == w.rows());
    // Hugging Face q/k rows are in rotate-half order; the GGUF twin permutes them (llama).
    int64_t heads = 0;
    if (m.hf_qk_order && w.name.find("attn_q.") != std::string::npos) heads = m.hp.n_head;
    if (m.hf_qk_order && w.name.find("attn_k.") != std::string::npos) heads = m.hp.n_head_kv;
    std::vector<float> a(static_cast<size_t>(w.ne[0])), b(static_cast<size_t>(w.ne[0]));
    int bad_rows = 0;
    for (int64_t r = 0; r < w.rows(); r++) {
      int64_t gr = r;
      if (heads > 0) {  // hf row (h, j, i) -> gguf row (h, i, j), j in {0,1}, i < hd/2
        int64_t hd = w.rows() / heads, h = r / hd, j = (r % hd) / (hd / 2), i = r % (hd / 2);
        gr = h * hd + 2 * i + j;
      }
      li::dequant_row(w, r, a.data());
      li::dequant_row(*o, gr, b.data());
      bad_rows += std::memcmp(a.data(), b.data(), a.size() * 4) != 0;
    }
    mismatched_tensors += bad_rows != 0;
    CHECK(bad_rows == 0);
  }
  CHECK(quantized >= 10);
  CHECK(mismatched_tensors == 0);
}

// End to end, for comparisons across builds: the logits of a fixed prompt and of 8 greedy tokens
// after it, on a few models (Q8_0, F16, BF16 with and without an f32 cache, the ring and softcap),
// hashed (FNV-1a of their bits). With LLMINFER_E2E_OUT set, one line per run is appended there:
// tools/dispatch-check compares the lines of a dispatch build at each forced level
// (LLMINFER_KERNELS) with those of the native build of that level, which must be equal.
TEST_CASE("kernels: end to end, logits of a prompt and greedy tokens (compared across builds)") {
  const char* fx = std::getenv("LLMINFER_FIXTURES");
  const std::string fixtures = fx && *fx ? fx : "build/fixtures";
  struct Case {
    std::string path;
    llminfer::KvType kv;
  };
  const Case cases[] = {
      {test::model_path("stories260K.gguf"), llminfer::KvType::f16},
      {test::model_path("stories260K-q8_0.gguf"), llminfer::KvType::f32},
      {fixtures + "/synth-qwen3-tiny-bf16.gguf", llminfer::KvType::f32},
      {fixtures + "/synth-llama-tiny-f16.gguf", llminfer::KvType::f16},
      {fixtures + "/synth-gemma3-tiny-softcap-f32.gguf", llminfer::KvType::f32},
  };
  std::string lines;
  for (const Case& c : cases) {
    CAPTURE(c.path);
    if (!li::file_exists(c.path)) {
      MESSAGE("missing (skipped): " << c.path);
      continue;
    }
    llminfer::LoadOptions o;
    o.threads = 2;
    o.kv_type = c.kv;
    auto model = llminfer::Model::load(c.path, o);
    REQUIRE_MESSAGE(model, (model ? "" : model.error().message));
    const auto& e = llminfer::detail::model_impl(*model).engine;
    const int nv = e->n_vocab();
    auto ctx = li::Context::create(e, 64);
    REQUIRE(ctx);
    std::vector<int32_t> ids;
    for (int i = 0; i < 12; i++) ids.push_back(static_cast<int32_t>((1 + 37 * i) % nv));
    std::vector<float> logits;
    auto st = ctx->eval(ids, logits, true);
    REQUIRE(st);
    uint64_t h = fnv64(logits.data(), logits.size() * 4);
    std::string toks;
    for (int k = 0; k < 8; k++) {
      const float* last = logits.data() + logits.size() - static_cast<size_t>(nv);
      const int32_t next = static_cast<int32_t>(std::max_element(last, last + nv) - last);
      toks += (toks.empty() ? "" : ",") + std::to_string(next);
      std::vector<int32_t> one{next};
      st = ctx->eval(one, logits, false);
      REQUIRE(st);
      h ^= fnv64(logits.data(), logits.size() * 4) + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    }
    for (float v : logits) REQUIRE(std::isfinite(v));
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    std::string name = c.path.substr(c.path.find_last_of('/') + 1);
    lines +=
        name + " kv=" + (c.kv == llminfer::KvType::f16 ? "f16" : "f32") + " logits=" + hex + " tokens=" + toks + "\n";
  }
  MESSAGE("kernels " << std::string(li::kernels().name) << "\n" << lines);
  if (const char* out = std::getenv("LLMINFER_E2E_OUT"); out && *out) {
    std::ofstream f(out, std::ios::app);
    f << lines;
    CHECK(f.good());
  }
}
