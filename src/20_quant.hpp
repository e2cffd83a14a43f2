// ==== Quantized block formats: layouts and the scalar reference (the definition of truth) ====
// Every weight format the kernels read, bit-exact to GGUF (ggml-common.h) and to MLX affine
// quantization, with a readable scalar dequantizer and dot product. The SIMD kernels (21_simd,
// 25_matmul) must agree with these: integer parts exactly, float sums within the rounding of a
// different summation order. The structs document the byte layout; the code reads bytes through
// rd_u16 (blocks are only 2-byte aligned in a file, and safetensors data may be unaligned).
//
// Activations are quantized once per matmul into one of two 8-bit forms (ActQ8 below):
//   q8_32   blocks of 32: scale d, 32 int8, their sum      (for Q4_0, Q5_0, Q8_0 weights)
//   q8_256  blocks of 256: scale d, 256 int8, sums of 16   (for Q4_K, Q6_K weights)
// so that a weight block times an activation block is an integer dot product and one float
// multiply, as in ggml (Q8_0 / Q8_K).
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// An activation row quantized to 8 bits. Blocks of 32 (q8_32) or 256 (q8_256) share a scale;
// value i is d[i / block] * q[i]. `sums` are sums of q over 32 (q8_32) or 16 (q8_256) values:
// they apply weight offsets (Q4_0's -8, Q4_K's mins, ...) without touching every value.
struct ActQ8 {
  const int8_t* q = nullptr;      // [n]
  const float* d = nullptr;       // [n / block]
  const int16_t* sums = nullptr;  // [n / 32] (q8_32) or [n / 16] (q8_256)
  // q8_256 from a MatmulInput: [n / 32], sums[2j] + sums[2j + 1] (the 32-value sub-block sums Q4_K's
  // mins take), made once per input instead of once per weight row; null: the kernels add the pairs.
  const int16_t* sums32 = nullptr;
  // q8_256 from a MatmulInput of a few tokens (MatmulInput::kNibbleTokens): [n], q in the order of
  // Q4_K's nibbles (in each 128 values, 0-31, 64-95, 32-63, 96-127: the low then the high nibbles
  // of its two 32-byte chunks), made once per input so that the one-token Q4_K dot (AVX-512) needs
  // no shuffle per row; sums32 is then set too. Null: the kernels read q.
  const int8_t* qn = nullptr;
};

namespace ref {

// ---- GGUF block layouts ----

// Q4_0: 32 weights: fp16 d, then 16 bytes; byte j holds weight j (low nibble) and weight j+16
// (high nibble). w = d * (q - 8), q in 0..15.
constexpr int kQK4_0 = 32;
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "q4_0 block is 18 bytes");

// Q5_0: 32 weights: fp16 d, 4 bytes qh (a little-endian uint32: bit j = 5th bit of weight j),
// 16 bytes qs as in Q4_0 (low nibble weight j, high nibble weight j+16).
// w = d * (q - 16), q = nibble | (bit << 4) in 0..31.
constexpr int kQK5_0 = 32;
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22, "q5_0 block is 22 bytes");

// Q8_0: 32 weights: fp16 d, then 32 int8 q. w = d * q.
constexpr int kQK8_0 = 32;
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "q8_0 block is 34 bytes");

// K-quants: super-blocks of 256 weights.
constexpr int kQK_K = 256;

// Q4_K: 256 weights in 8 sub-blocks of 32. fp16 d, fp16 dmin, 12 bytes of 6-bit sub-block
// scales sc[8] and mins m[8], 128 bytes of nibbles. Scales (j < 4): sc[j] = s[j] & 63,
// m[j] = s[j+4] & 63; (j >= 4): sc[j] = (s[j+4] & 15) | (s[j-4] >> 6) << 4,
// m[j] = (s[j+4] >> 4) | (s[j] >> 6) << 4. Nibbles: the 256 weights are 4 chunks of 64; chunk c
// uses bytes qs[32c .. 32c+31]: low nibbles are weights 64c+0..31 (sub-block 2c), high nibbles
// weights 64c+32..63 (sub-block 2c+1). w = d * sc[j] * q - dmin * m[j], q in 0..15.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "q4_K block is 144 bytes");

// Q6_K: 256 weights in 16 sub-blocks of 16. 128 bytes ql (low 4 bits), 64 bytes qh (high 2
// bits), 16 int8 scales, fp16 d (last). Two halves of 128 weights; half h uses ql[64h..64h+63],
// qh[32h..32h+31], scales[8h..8h+7]. Within a half, for l in 0..31:
//   weight l      : ql[l]    low nibble,  qh[l] bits 0-1
//   weight l + 32 : ql[l+32] low nibble,  qh[l] bits 2-3
//   weight l + 64 : ql[l]    high nibble, qh[l] bits 4-5
//   weight l + 96 : ql[l+32] high nibble, qh[l] bits 6-7
// w = d * scales[sub-block] * (q - 32), q = low | high << 4 in 0..63, sub-block = index / 16.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210, "q6_K block is 210 bytes");

// MLX affine (mlx_q4 / mlx_q8): a row is uint32 words holding 8 (4-bit) or 4 (8-bit) values,
// lowest bits first: value i of a word is (word >> (bits * i)) & mask. In memory (little-endian)
// a 4-bit row is therefore bytes whose low nibble is the even and high nibble the odd value, an
// 8-bit row is plain uint8. Groups of `group_size` values share a scale and a bias (f16, bf16 or
// f32, [rows][n / group_size]): w = q * scale + bias.

// ---- small helpers ----

// Q4_K's 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
inline void q4k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Unsigned quantized value of element i (0..31) of a Q4_0 / Q5_0 block (before the offset).
inline int q4_0_value(const uint8_t* blk, int i) {
  const uint8_t* qs = blk + offsetof(BlockQ4_0, qs);
  return i < 16 ? (qs[i] & 15) : (qs[i - 16] >> 4);
}
inline int q5_0_value(const uint8_t* blk, int i) {
  const uint8_t* qs = blk + offsetof(BlockQ5_0, qs);
  uint32_t qh = rd_u32(blk + offsetof(BlockQ5_0, qh));
  int lo = i < 16 ? (qs[i] & 15) : (qs[i - 16] >> 4);
  return lo | static_cast<int>(((qh >> i) & 1) << 4);
}
// Unsigned value (0..15) of element i (0..255) of a Q4_K super-block and its sub-block.
inline int q4_k_value(const uint8_t* blk, int i) {
  const uint8_t* qs = blk + offsetof(BlockQ4_K, qs);
  int chunk = i / 64, l = i % 64;
  return l < 32 ? (qs[32 * chunk + l] & 15) : (qs[32 * chunk + l - 32] >> 4);
}
// Unsigned value (0..63) of element i (0..255) of a Q6_K super-block.
inline int q6_k_value(const uint8_t* blk, int i) {
  const uint8_t* ql = blk + offsetof(BlockQ6_K, ql) + 64 * (i / 128);
  const uint8_t* qh = blk + offsetof(BlockQ6_K, qh) + 32 * (i / 128);
  int l = i % 128, quarter = l / 32, k = l % 32;
  int low = quarter == 0   ? (ql[k] & 15)
            : quarter == 1 ? (ql[k + 32] & 15)
            : quarter == 2 ? (ql[k] >> 4)
                           : (ql[k + 32] >> 4);
  int high = (qh[k] >> (2 * quarter)) & 3;
  return low | high << 4;
}

// ---- dequantization: one row of n elements (n a multiple of the block size) ----

inline void dequant_row_q4_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK4_0; b++) {
    const uint8_t* blk = src + b * static_cast<int64_t>(sizeof(BlockQ4_0));
    float d = fp16_to_f32(rd_u16(blk));
    for (int i = 0; i < kQK4_0; i++) dst[b * kQK4_0 + i] = d * static_cast<float>(q4_0_value(blk, i) - 8);
  }
}

inline void dequant_row_q5_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK5_0; b++) {
    const uint8_t* blk = src + b * static_cast<int64_t>(sizeof(BlockQ5_0));
    float d = fp16_to_f32(rd_u16(blk));
    for (int i = 0; i < kQK5_0; i++) dst[b * kQK5_0 + i] = d * static_cast<float>(q5_0_value(blk, i) - 16);
  }
}

inline void dequant_row_q8_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; b++) {
    const uint8_t* blk = src + b * static_cast<int64_t>(sizeof(BlockQ8_0));
    float d = fp16_to_f32(rd_u16(blk));
    for (int i = 0; i < kQK8_0; i++) dst[b * kQK8_0 + i] = d * static_cast<float>(static_cast<int8_t>(blk[2 + i]));
  }
}

inline void dequant_row_q4_k(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; b++) {
    const uint8_t* blk = src + b * static_cast<int64_t>(sizeof(BlockQ4_K));
    float d = fp16_to_f32(rd_u16(blk + offsetof(BlockQ4_K, d)));
    float dmin = fp16_to_f32(rd_u16(blk + offsetof(BlockQ4_K, dmin)));
    for (int i = 0; i < kQK_K; i++) {
      int sc, m;
      q4k_scale_min(blk + offsetof(BlockQ4_K, scales), i / 32, &sc, &m);
      dst[b * kQK_K + i] =
          d * static_cast<float>(sc) * static_cast<float>(q4_k_value(blk, i)) - dmin * static_cast<float>(m);
    }
  }
}

inline void dequant_row_q6_k(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; b++) {
    const uint8_t* blk = src + b * static_cast<int64_t>(sizeof(BlockQ6_K));
    float d = fp16_to_f32(rd_u16(blk + offsetof(BlockQ6_K, d)));
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ6_K, scales));
    for (int i = 0; i < kQK_K; i++)
      dst[b * kQK_K + i] = d * static_cast<float>(sc[i / 16]) * static_cast<float>(q6_k_value(blk, i) - 32);
  }
}

// Value i of an array of T values, T f32, f16 or bf16 (MLX group scales and biases).
template <DType T>
struct FloatReader {
  float operator()(const uint8_t* p, int64_t i) const {
    if constexpr (T == DType::f16)
      return fp16_to_f32(rd_u16(p + 2 * i));
    else if constexpr (T == DType::bf16)
      return bf16_to_f32(rd_u16(p + 2 * i));
    else {
      static_assert(T == DType::f32, "FloatReader: f32, f16 or bf16");
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
  }
};
// f(FloatReader<t>{}) for t f32, f16 or bf16 (MLX scales and biases, checked at load): the type is
// chosen once, outside f's loops.
template <class F>
inline decltype(auto) with_float_reader(DType t, F&& f) {
  return visit_weight_type(t, [&](auto type) -> decltype(auto) {
    constexpr DType T = decltype(type)::value;
    if constexpr (T == DType::f16 || T == DType::bf16) {
      return f(FloatReader<T>{});
    } else {
      LLMI_ASSERT(T == DType::f32 && "MLX scales are f32, f16 or bf16");
      return f(FloatReader<DType::f32>{});
    }
  });
}
// An MLX group scale or bias.
inline float mlx_aux(const uint8_t* p, DType t, int64_t i) {
  return with_float_reader(t, [&](auto aux) { return aux(p, i); });
}
// Bits per value of an MLX type (a "block" is one uint32 word, 13_dtype).
constexpr int mlx_bits(DType t) {
  return 32 / static_cast<int>(dtype_traits(t)->block);
}
// Unsigned value i of an MLX row (4 or 8 bits, lowest bits first in little-endian words).
inline int mlx_value(const uint8_t* row, int bits, int64_t i) {
  uint32_t word = rd_u32(row + 4 * (i * bits / 32));
  int per_word = 32 / bits;
  return static_cast<int>((word >> (bits * (i % per_word))) & ((1u << bits) - 1));
}
inline void dequant_row_mlx(const TensorView& w, int64_t row, float* dst) {
  const int bits = mlx_bits(w.type);
  const int64_t n = w.ne[0], groups = n / w.group_size;
  const uint8_t* q = w.data + static_cast<uint64_t>(row) * static_cast<uint64_t>(n * bits / 8);
  with_float_reader(w.aux_type, [&](auto aux) {
    for (int64_t g = 0; g < groups; g++) {
      float s = aux(w.scales, row * groups + g), b = aux(w.biases, row * groups + g);
      for (int64_t i = g * w.group_size; i < (g + 1) * w.group_size; i++)
        dst[i] = static_cast<float>(mlx_value(q, bits, i)) * s + b;
    }
  });
}

// ---- activation quantization ----

// The product of two 8-bit quantized values. GCC 12 with VNNI (-mavx512vnni / -mavxvnni)
// vectorises the integer dot-product loops below into vpdpbusd, which treats one operand as
// unsigned, and gets signed bytes read through uint8_t (and offset nibbles) wrong; an empty asm
// on one operand keeps these reference loops scalar there.
inline int mul_q(int a, int b) {
#if defined(__GNUC__) && !defined(__clang__) && (defined(__AVX512VNNI__) || defined(__AVXVNNI__))
  __asm__("" : "+r"(a));
#endif
  return a * b;
}

// Rounds like the SIMD conversions (round half to even, the default rounding mode).
inline int round_even(float v) {
  return static_cast<int>(std::nearbyint(v));
}

// Sums of q over groups of `len` values.
inline void group_sums(const int8_t* q, int64_t n, int len, int16_t* sums) {
  for (int64_t g = 0; g < n / len; g++) {
    int s = 0;
    for (int i = 0; i < len; i++) s += q[g * len + i];
    sums[g] = static_cast<int16_t>(s);
  }
}

// The activation quantizers follow ggml's exactly (same scale, same rounding), so that a model
// computes what llama.cpp computes on it: with 8-bit activations the rounding of each value is
// visible in the logits, and agreement with llama.cpp is how we check a model runs right.

// x[n] (n a multiple of 32) -> q8_32 (ggml's quantize_row_q8_0): per block of 32, amax = max |x|,
// d = amax / 127 rounded to fp16 (ggml stores it as fp16), q = round(x * (127 / amax)).
inline void quantize_q8_32(const float* x, int64_t n, int8_t* q, float* d, int16_t* sums) {
  for (int64_t b = 0; b < n / 32; b++) {
    const float* xb = x + 32 * b;
    float amax = 0;
    for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(xb[i]));
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    d[b] = fp16_to_f32(f32_to_fp16(amax / 127.0f));
    for (int i = 0; i < 32; i++) q[32 * b + i] = static_cast<int8_t>(std::clamp(round_even(xb[i] * id), -127, 127));
  }
  group_sums(q, n, 32, sums);
}

// x[n] (n a multiple of 256) -> q8_256 (ggml's quantize_row_q8_K_ref): per block of 256, m = the
// first value of largest magnitude (with its sign), iscale = -127 / m, q = min(127, round(x *
// iscale)), d = 1 / iscale (0 and all q = 0 for a block of zeros).
inline void quantize_q8_256(const float* x, int64_t n, int8_t* q, float* d, int16_t* sums) {
  for (int64_t b = 0; b < n / 256; b++) {
    const float* xb = x + 256 * b;
    float amax = 0, m = 0;
    for (int i = 0; i < 256; i++)
      if (std::fabs(xb[i]) > amax) {
        amax = std::fabs(xb[i]);
        m = xb[i];
      }
    if (amax == 0) {
      d[b] = 0;
      for (int i = 0; i < 256; i++) q[256 * b + i] = 0;
      continue;
    }
    const float iscale = -127.0f / m;
    d[b] = 1 / iscale;
    for (int i = 0; i < 256; i++)
      q[256 * b + i] = static_cast<int8_t>(std::clamp(round_even(iscale * xb[i]), -127, 127));
  }
  group_sums(q, n, 16, sums);
}

// ---- dot products: one weight row (n elements) times one activation row ----
// Integer sums per block, then one float multiply-add per block in block order.

inline float vec_dot_q4_0(const uint8_t* w, const ActQ8& a, int64_t n) {
  float acc = 0;
  for (int64_t b = 0; b < n / 32; b++) {
    const uint8_t* blk = w + b * static_cast<int64_t>(sizeof(BlockQ4_0));
    int s = 0;
    for (int i = 0; i < 32; i++) s += mul_q(q4_0_value(blk, i) - 8, a.q[32 * b + i]);
    acc += fp16_to_f32(rd_u16(blk)) * a.d[b] * static_cast<float>(s);
  }
  return acc;
}

inline float vec_dot_q5_0(const uint8_t* w, const ActQ8& a, int64_t n) {
  float acc = 0;
  for (int64_t b = 0; b < n / 32; b++) {
    const uint8_t* blk = w + b * static_cast<int64_t>(sizeof(BlockQ5_0));
    int s = 0;
    for (int i = 0; i < 32; i++) s += mul_q(q5_0_value(blk, i) - 16, a.q[32 * b + i]);
    acc += fp16_to_f32(rd_u16(blk)) * a.d[b] * static_cast<float>(s);
  }
  return acc;
}

inline float vec_dot_q8_0(const uint8_t* w, const ActQ8& a, int64_t n) {
  float acc = 0;
  for (int64_t b = 0; b < n / 32; b++) {
    const uint8_t* blk = w + b * static_cast<int64_t>(sizeof(BlockQ8_0));
    int s = 0;
    for (int i = 0; i < 32; i++) s += mul_q(static_cast<int8_t>(blk[2 + i]), a.q[32 * b + i]);
    acc += fp16_to_f32(rd_u16(blk)) * a.d[b] * static_cast<float>(s);
  }
  return acc;
}

// Q4_K x q8_256: sum = d*dx * sum_j sc_j * (q . a)_j  -  dmin*dx * sum_j m_j * (sum of a)_j.
inline float vec_dot_q4_k(const uint8_t* w, const ActQ8& a, int64_t n) {
  float acc = 0;
  for (int64_t b = 0; b < n / kQK_K; b++) {
    const uint8_t* blk = w + b * static_cast<int64_t>(sizeof(BlockQ4_K));
    const int8_t* q = a.q + kQK_K * b;
    int sum_q = 0, sum_m = 0;
    for (int j = 0; j < 8; j++) {
      int sc, m, s = 0;
      q4k_scale_min(blk + offsetof(BlockQ4_K, scales), j, &sc, &m);
      for (int i = 32 * j; i < 32 * j + 32; i++) s += mul_q(q4_k_value(blk, i), q[i]);
      sum_q += sc * s;
      sum_m += m * (a.sums[16 * b + 2 * j] + a.sums[16 * b + 2 * j + 1]);
    }
    float d = fp16_to_f32(rd_u16(blk + offsetof(BlockQ4_K, d))) * a.d[b];
    float dmin = fp16_to_f32(rd_u16(blk + offsetof(BlockQ4_K, dmin))) * a.d[b];
    acc += d * static_cast<float>(sum_q) - dmin * static_cast<float>(sum_m);
  }
  return acc;
}

// Q6_K x q8_256: d*dx * sum_j sc_j * ((q - 32) . a)_j.
inline float vec_dot_q6_k(const uint8_t* w, const ActQ8& a, int64_t n) {
  float acc = 0;
  for (int64_t b = 0; b < n / kQK_K; b++) {
    const uint8_t* blk = w + b * static_cast<int64_t>(sizeof(BlockQ6_K));
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ6_K, scales));
    const int8_t* q = a.q + kQK_K * b;
    int sum = 0;
    for (int j = 0; j < 16; j++) {
      int s = 0;
      for (int i = 16 * j; i < 16 * j + 16; i++) s += mul_q(q6_k_value(blk, i) - 32, q[i]);
      sum += sc[j] * s;
    }
    acc += fp16_to_f32(rd_u16(blk + offsetof(BlockQ6_K, d))) * a.d[b] * static_cast<float>(sum);
  }
  return acc;
}

// Float weights times f32 activations, in element order.
inline float vec_dot_f32(const uint8_t* w, const float* x, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n; i++) {
    float v;
    std::memcpy(&v, w + 4 * i, 4);
    acc += v * x[i];
  }
  return acc;
}
inline float vec_dot_f16(const uint8_t* w, const float* x, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n; i++) acc += fp16_to_f32(rd_u16(w + 2 * i)) * x[i];
  return acc;
}
inline float vec_dot_bf16(const uint8_t* w, const float* x, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n; i++) acc += bf16_to_f32(rd_u16(w + 2 * i)) * x[i];
  return acc;
}

// MLX affine row `row` times f32 activations: per group, scale * sum(q * x) + bias * sum(x).
inline float vec_dot_mlx(const TensorView& w, int64_t row, const float* x) {
  const int bits = mlx_bits(w.type);
  const int64_t n = w.ne[0], groups = n / w.group_size;
  const uint8_t* q = w.data + static_cast<uint64_t>(row) * static_cast<uint64_t>(n * bits / 8);
  return with_float_reader(w.aux_type, [&](auto aux) {
    float acc = 0;
    for (int64_t g = 0; g < groups; g++) {
      float sqx = 0, sx = 0;
      for (int64_t i = g * w.group_size; i < (g + 1) * w.group_size; i++) {
        sqx += static_cast<float>(mlx_value(q, bits, i)) * x[i];
        sx += x[i];
      }
      acc += aux(w.scales, row * groups + g) * sqx + aux(w.biases, row * groups + g) * sx;
    }
    return acc;
  });
}

}  // namespace ref

// Bytes of one row of a 2-D weight (MLX: the packed words only).
inline uint64_t weight_row_bytes(const TensorView& w) {
  uint64_t rb = 0;
  dtype_row_bytes(w.type, static_cast<uint64_t>(w.ne[0]), &rb);
  return rb;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
