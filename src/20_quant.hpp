// ==== Quantized block formats: layouts and the scalar reference (the definition of truth) ====
namespace llminfer {
inline namespace v0_1 {
namespace detail {
namespace ref {

// Q8_0: 32 weights per block: fp16 scale d, then 32 int8 q. w = d * q.
constexpr int kQK8_0 = 32;
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "q8_0 block is 34 bytes");

inline void dequant_row_q8_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; b++) {
    const uint8_t* blk = src + b * sizeof(BlockQ8_0);
    float d = fp16_to_f32(rd_u16(blk));
    for (int k = 0; k < kQK8_0; k++) dst[b * kQK8_0 + k] = d * static_cast<float>(static_cast<int8_t>(blk[2 + k]));
  }
}

}  // namespace ref

// Whether tensors of this type can be computed with (dequantized / multiplied).
inline bool dtype_computable(DType t) {
  switch (t) {
    case DType::f32: case DType::f16: case DType::bf16: case DType::q8_0: return true;
    default: return false;
  }
}

// Row `row` of a 2-D (or flattened) tensor as f32 (`out` holds ne[0] floats). The type must be
// computable (checked at load).
inline void dequant_row(const TensorView& w, int64_t row, float* out) {
  const int64_t n = w.ne[0];
  uint64_t rb = 0;
  dtype_row_bytes(w.type, static_cast<uint64_t>(n), &rb);
  const uint8_t* src = w.data + static_cast<uint64_t>(row) * rb;
  switch (w.type) {
    case DType::f32: std::memcpy(out, src, static_cast<size_t>(n) * 4); break;
    case DType::f16: for (int64_t k = 0; k < n; k++) out[k] = fp16_to_f32(rd_u16(src + 2 * k)); break;
    case DType::bf16: for (int64_t k = 0; k < n; k++) out[k] = bf16_to_f32(rd_u16(src + 2 * k)); break;
    case DType::q8_0: ref::dequant_row_q8_0(src, out, n); break;
    default: LLMI_ASSERT(!"dequant_row: type not computable"); break;
  }
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
