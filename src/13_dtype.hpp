// ==== Element types: every ggml type id by name, plus safetensors and MLX types ====
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// ---- The type table, part 1: the facts of every element type ----
// One row per type: enum name, id (0..42: ggml's type id, the GGUF tensor table's; 200 and up:
// ours), name (as ggml or safetensors spells it), values per block, bytes per block, K (1: the
// type is computable: the kernels dequantize and multiply it at every level), act (the form of
// the input its row product takes, ActForm; K = 0 rows say f32, unused). The rows generate the
// enum, the facts (dtype_traits) and the one switch over weight types (visit_weight_type).
// Part 2, the kernels each level runs for a computable type, is WeightKernels<T> (25_weight_kernels).
//  * To add a type: a row here (K = 0 until it has kernels); then its layout and reference
//    kernels (20_quant), its kernels (21_simd, 25_matmul) and its row in WeightKernels, and K = 1.
//  * To add an instruction set: a kernel level (21_kernels_begin, 26_kernels_end), then in
//    WeightKernels the members of the types it accelerates; the facts here do not change.
// clang-format off
#define LLMI_DTYPES(X)                                                                                \
  /* enum     id   name      block bytes K  act */                                                    \
  X(f32,       0, "f32",         1,    4, 1, f32)     X(f16,       1, "f16",         1,    2, 1, f32) \
  X(q4_0,      2, "q4_0",       32,   18, 1, q8_32)   X(q4_1,      3, "q4_1",       32,   20, 0, f32) \
  X(q5_0,      6, "q5_0",       32,   22, 1, q8_32)   X(q5_1,      7, "q5_1",       32,   24, 0, f32) \
  X(q8_0,      8, "q8_0",       32,   34, 1, q8_32)   X(q8_1,      9, "q8_1",       32,   36, 0, f32) \
  X(q2_K,     10, "q2_K",      256,   84, 0, f32)     X(q3_K,     11, "q3_K",      256,  110, 0, f32) \
  X(q4_K,     12, "q4_K",      256,  144, 1, q8_256)  X(q5_K,     13, "q5_K",      256,  176, 0, f32) \
  X(q6_K,     14, "q6_K",      256,  210, 1, q8_256)  X(q8_K,     15, "q8_K",      256,  292, 0, f32) \
  X(iq2_xxs,  16, "iq2_xxs",   256,   66, 0, f32)     X(iq2_xs,   17, "iq2_xs",    256,   74, 0, f32) \
  X(iq3_xxs,  18, "iq3_xxs",   256,   98, 0, f32)     X(iq1_s,    19, "iq1_s",     256,   50, 0, f32) \
  X(iq4_nl,   20, "iq4_nl",     32,   18, 0, f32)     X(iq3_s,    21, "iq3_s",     256,  110, 0, f32) \
  X(iq2_s,    22, "iq2_s",     256,   82, 0, f32)     X(iq4_xs,   23, "iq4_xs",    256,  136, 0, f32) \
  X(i8,       24, "i8",          1,    1, 0, f32)     X(i16,      25, "i16",         1,    2, 0, f32) \
  X(i32,      26, "i32",         1,    4, 0, f32)     X(i64,      27, "i64",         1,    8, 0, f32) \
  X(f64,      28, "f64",         1,    8, 0, f32)     X(iq1_m,    29, "iq1_m",     256,   56, 0, f32) \
  X(bf16,     30, "bf16",        1,    2, 1, f32)     X(tq1_0,    34, "tq1_0",     256,   54, 0, f32) \
  X(tq2_0,    35, "tq2_0",     256,   66, 0, f32)     X(mxfp4,    39, "mxfp4",      32,   17, 0, f32) \
  X(nvfp4,    40, "nvfp4",      64,   36, 0, f32)     X(q1_0,     41, "q1_0",      128,   18, 0, f32) \
  X(q2_0,     42, "q2_0",       64,   18, 0, f32)                                                     \
  /* safetensors-only element types */                                                                \
  X(u8,      200, "u8",          1,    1, 0, f32)     X(u16,     201, "u16",         1,    2, 0, f32) \
  X(u32,     202, "u32",         1,    4, 0, f32)     X(u64,     203, "u64",         1,    8, 0, f32) \
  X(boolean, 204, "bool",        1,    1, 0, f32)     X(f8_e4m3, 205, "f8_e4m3",     1,    1, 0, f32) \
  X(f8_e5m2, 206, "f8_e5m2",     1,    1, 0, f32)                                                     \
  /* MLX affine quantization: uint32 words of 8 (4-bit) or 4 (8-bit) values, plus per-group */        \
  /* scales and biases (TensorView); a "block" is one word */                                         \
  X(mlx_q4,  210, "mlx_q4",      8,    4, 1, f32)     X(mlx_q8,  211, "mlx_q8",      4,    4, 1, f32)
// clang-format on

enum class DType : uint16_t {
#define LLMI_X(e, id, name, block, bytes, k, act) e = id,
  LLMI_DTYPES(LLMI_X)
#undef LLMI_X
      invalid = 0xFFFF,
};

// The form of the input a weight type's row product takes: f32 as it is, or quantized once per
// matmul to 8 bits in blocks of 32 or 256 (ActQ8, 20_quant).
enum class ActForm : uint8_t { f32, q8_32, q8_256 };

struct DTypeTraits {
  DType type;
  const char* name;  // as ggml spells it (GGUF types) or as safetensors spells it
  uint32_t block;    // elements per block
  uint32_t bytes;    // bytes per block
  bool computable;   // kernels at every level (WeightKernels<type>)
  ActForm act;       // (computable types) the input form of the row product
};

inline constexpr DTypeTraits kDTypeTraits[] = {
#define LLMI_X(e, id, name, block, bytes, k, act) {DType::e, name, block, bytes, k != 0, ActForm::act},
    LLMI_DTYPES(LLMI_X)
#undef LLMI_X
};
// id -> 1 + its row in kDTypeTraits (0: not a type).
inline constexpr auto kDTypeRow = [] {
  std::array<uint8_t, 212> row{};
  for (size_t i = 0; i < std::size(kDTypeTraits); i++)
    row[static_cast<size_t>(kDTypeTraits[i].type)] = static_cast<uint8_t>(i + 1);
  return row;
}();

// Traits of a type, or nullptr for an id that is not a type (removed or unknown ggml ids).
constexpr const DTypeTraits* dtype_traits(DType t) {
  const auto v = static_cast<size_t>(t);
  return v < kDTypeRow.size() && kDTypeRow[v] ? &kDTypeTraits[kDTypeRow[v] - 1] : nullptr;
}

inline const char* dtype_name(DType t) {
  const DTypeTraits* tr = dtype_traits(t);
  return tr ? tr->name : "invalid";
}

// Whether tensors of this type can be computed with (dequantized / multiplied).
constexpr bool dtype_computable(DType t) {
  const DTypeTraits* tr = dtype_traits(t);
  return tr && tr->computable;
}

// The input form a weight type multiplies with (f32 for a type that is not computable).
constexpr ActForm act_form(DType t) {
  const DTypeTraits* tr = dtype_traits(t);
  return tr && tr->computable ? tr->act : ActForm::f32;
}

// A computable type as a compile-time value (the argument visit_weight_type passes).
template <DType T>
using TypeTag = std::integral_constant<DType, T>;

// The one switch over weight types: calls f(TypeTag<t>{}) for a computable t and returns what it
// returns. Everything type-specific that follows is then chosen at compile time, once per call,
// so a visit belongs outside the loops (25_weight_kernels: a visit per matmul or row
// dequantization). A type that is not computable is an internal error (checked at load).
template <class F>
inline decltype(auto) visit_weight_type(DType t, F&& f) {
#define LLMI_VISIT_1(e) \
  case DType::e:        \
    return f(TypeTag<DType::e>{});
#define LLMI_VISIT_0(e)
#define LLMI_X(e, id, name, block, bytes, k, act) LLMI_VISIT_##k(e)
  switch (t) {
    LLMI_DTYPES(LLMI_X)
    default: break;
  }
#undef LLMI_X
#undef LLMI_VISIT_0
#undef LLMI_VISIT_1
  LLMI_ASSERT(!"visit_weight_type: type not computable");
  return f(TypeTag<DType::f32>{});  // (not reached)
}

// Bytes of one row of `n` elements, or false when n is not a whole number of blocks.
inline bool dtype_row_bytes(DType t, uint64_t n, uint64_t* bytes) {
  const DTypeTraits* tr = dtype_traits(t);
  if (!tr || n % tr->block != 0) return false;
  return !mul_overflows(n / tr->block, tr->bytes, bytes);
}

// fp16 / bf16 <-> f32, bit-exact (round to nearest even), portable.
inline float fp16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        man <<= 1;
        e++;
      } while (!(man & 0x400));
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((man & 0x3FF) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t ax = x & 0x7FFFFFFF;
  if (ax >= 0x7F800000) return static_cast<uint16_t>(sign | 0x7C00 | (ax > 0x7F800000 ? 0x200 : 0));
  if (ax >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // rounds to infinity
  if (ax < 0x38800000) {                                              // subnormal or zero in fp16
    if (ax < 0x33000000) return static_cast<uint16_t>(sign);          // rounds to zero
    // value = M * 2^(e-150) with M the 24-bit significand; in units of 2^-24: M >> (126 - e)
    uint32_t e = ax >> 23, m = (ax & 0x7FFFFF) | 0x800000;
    uint32_t shift = 126 - e;  // 14..24
    uint32_t h = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((ax >> 13) - ((127 - 15) << 10));
  uint32_t rem = ax & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return static_cast<uint16_t>(sign | h);
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7FFF + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

// Little-endian loads from possibly unaligned bytes.
inline uint16_t rd_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t rd_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t rd_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
