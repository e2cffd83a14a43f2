// ==== The type table, part 2: the kernels of each computable type at this level ====
// WeightKernels<T> is T's row: what this kernel level (21_kernels_begin) runs for weights of type
// T. Part 1, the facts of every type (block, bytes, computable, ActForm), is LLMI_DTYPES
// (13_dtype). The kernel sites (25_matmul) are templates on a row (WK); a call reaches them
// through one visit_weight_kernels, which switches once (visit_weight_type) and passes the row, so
// the kernels inline into the row loops (no call through a pointer per row).
//
// A row's members (static; WeightKernelsBase gives the facts and the defaults):
//   type, act, block                    T's facts (13_dtype)
//   dot(o, row, r, t)                   row r (its bytes at `row`) times token t of o.in, which
//                                       is prepared in `act` (RowOperands, 25_matmul): the
//                                       one-token product (gemv), llama.cpp's order for one token
//   dequant(w, r, row, out)             row r as w.ne[0] floats
//   prepare_extra(in, w)                input besides `act` (MLX: sums per group); false: out of memory
//   AVX2:
//     multi_token                       has dotn: gemm_rows for several tokens, also for the
//                                       single tokens of several sequences (gemv_each)
//     dotn<NT>(row, a, n, out)          the row times NT tokens, each with the bits of dot
//     multi_row                         (32-blocks, K-quants) has dotr: gemv takes kAvx2Rows rows
//     dotr<NR>(row, rb, a, n, out, ldo) at a time (dotr_avx2), row i at row + i * rb, out[i * ldo]
//   AVX-512:
//     each_group                        (K-quants, 32-blocks) has dotg: gemv_each_group for the
//     GroupBlock, group_blocks(nb),     single tokens of several sequences, NT of a prepared
//       group_prepare(in, t0, nt, nb, g) group g (group_blocks(nb) GroupBlock) at a time, each
//     group_rows                        with the bits of dot; next: a row to ask into L2
//     dotg<NT>(row, a, g, nb, out, next) meanwhile, or nullptr; group_rows 2: dotg takes nr
//       (group_rows 2: dotg<NT>(row,    (1 or 2) rows rb apart, out[i][t]
//       rb, nr, g, nb, out, next))
//     gemm                              has the panel path (gemm): act f32 types through an f32
//                                       panel of dequant rows and micro_f32; quantized types with
//     panel, decode, micro              their PanelFormat, row decoder and micro-kernel (q8_32:
//                                       micro(P, in, starts, tj, out), micro_q32; q8_256:
//                                       micro(P, in, xk, qpairs, tj, out), micro_kq)
//     gemm_fits(w, in)                  false where llama.cpp's order is not the panel's (then gemv)
//     bf16_in_place                     (BF16) rows used in place by micro_bf16 for bf16 input
//   AVX-512 with VNNI (Q8_0, Q4_0, Q5_0, Q4_K, Q6_K):
//     multi_row                         has dotr: gemv takes NR rows at a time where the CPU
//     dotr<NR>(row, rb, a, n, out, ldo) streams them better (cpu_streams_ahead): row i at
//                                       row + i * rb, out[i * ldo], each with the bits of dot
//     pair_rows                         (Q8_0) has dotr2: dotr<2> asking kPairAhead bytes
//     dotr2(row, rb, a, n, out, ldo)    ahead, for gemv's two rows at a time (cpu_pairs_rows)
//     row_run                           has dots: gemv's other rows one after another, nr rows
//     dots(row, rb, nr, a, n, out)      rb apart, out[i], the dot's constants made once
//   AMX (LLMI_SIMD_AMX; where MatmulScratch::amx):
//     amx                               has the tiles for 6 or more tokens: 32-blocks by rows
//                                       (gemm_amx_q32_task; Q8_0 in place), K-quants through
//     amx_scales(row, K, s16), amx_offset  their scaled rows (gemm_amx_kq_task)
//
// To add a type: its facts row (13_dtype), then a row here with dot and dequant (the scalar
// reference is a valid body at every level); the faster members come when its kernels do.
// To add an instruction set (a level, 21_kernels_begin): its kernels, and here, under its
// LLMI_SIMD_ macro, the members of the types it runs faster, with a flag (as multi_token, gemm)
// that the entry points below test at compile time to take its path (a driver in 25_matmul).
namespace llminfer {
inline namespace v0_1 {
namespace detail {
LLMI_KNS_BEGIN

template <DType T>
struct WeightKernelsBase {
  static_assert(dtype_computable(T), "WeightKernels: a computable type (13_dtype)");
  static constexpr DType type = T;
  static constexpr ActForm act = act_form(T);
  static constexpr uint32_t block = dtype_traits(T)->block;
  static constexpr bool multi_token = false;
  static constexpr bool multi_row = false;
  static constexpr bool pair_rows = false;
  static constexpr bool row_run = false;
  static constexpr bool each_group = false;
  static constexpr bool gemm = false;
  static constexpr bool bf16_in_place = false;
  static constexpr bool amx = false;
  static bool gemm_fits(const TensorView&, const MatmulInput&) { return true; }
  static bool prepare_extra(MatmulInput&, const TensorView&) { return true; }
  static int mlx_group(const TensorView&) { return 0; }  // group of the input sums prepare_extra makes
#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
  // the AVX2 rows (21_simd's Avx2Dot<T>) of the types that set multi_row
  template <int NR>
  static void dotr(const uint8_t* row, uint64_t rb, const ActQ8& a, int64_t n, float* out, int64_t ldo) {
    dotr_avx2<T, NR>(row, rb, a, n, out, ldo);
  }
#endif
};
template <DType T>
struct WeightKernels;

// ---- float types ----

template <>
struct WeightKernels<DType::f32> : WeightKernelsBase<DType::f32> {
  static float dot(const RowOperands& o, const uint8_t* row, int64_t, int64_t t) {
    return dot_float<type>(row, o.in.x() + t * o.n, o.n, o.sgemm, o.bf16_exact);
  }
  static void dequant(const TensorView& w, int64_t, const uint8_t* row, float* out) {
    std::memcpy(out, row, static_cast<size_t>(w.ne[0]) * 4);
  }
#if defined(LLMI_SIMD_AVX512)
  static constexpr bool gemm = true;
  // rows that are not a multiple of 16 long: llama.cpp's order is its vector dot product
  // (dot_float), not the tiled one of its sgemm (which also refuses row counts not a multiple of 4)
  static bool gemm_fits(const TensorView& w, const MatmulInput&) {
    return w.ne[0] % 16 == 0 && w.rows() % 4 == 0;
  }
#endif
};

template <>
struct WeightKernels<DType::f16> : WeightKernelsBase<DType::f16> {
  static float dot(const RowOperands& o, const uint8_t* row, int64_t, int64_t t) {
    return dot_float<type>(row, o.in.x() + t * o.n, o.n, o.sgemm, o.bf16_exact);
  }
  static void dequant(const TensorView& w, int64_t, const uint8_t* row, float* out) {
    f16_to_f32_row(row, out, w.ne[0], false);
  }
#if defined(LLMI_SIMD_AVX512)
  static constexpr bool gemm = true;
  static bool gemm_fits(const TensorView& w, const MatmulInput&) {
    return w.ne[0] % 16 == 0 && w.rows() % 4 == 0;
  }  // (as f32)
#endif
};

template <>
struct WeightKernels<DType::bf16> : WeightKernelsBase<DType::bf16> {
  static float dot(const RowOperands& o, const uint8_t* row, int64_t, int64_t t) {
    return dot_float<type>(row, o.in.x() + t * o.n, o.n, o.sgemm, o.bf16_exact);
  }
  static void dequant(const TensorView& w, int64_t, const uint8_t* row, float* out) {
    f16_to_f32_row(row, out, w.ne[0], true);
  }
#if defined(LLMI_SIMD_AVX512)
  static constexpr bool gemm = true;
#endif
#if defined(LLMI_SIMD_BF16)
  // bf16 input: vdpbf16ps on the rows in place, llamafile's order for rows a multiple of 32 long
  // (and a row count a multiple of 4), else dot_float's
  static constexpr bool bf16_in_place = true;
  static bool gemm_fits(const TensorView& w, const MatmulInput& in) {
    return !in.bf16_exact() || (w.ne[0] % 32 == 0 && w.rows() % 4 == 0);
  }
#endif
};

// ---- 32-blocks (q8_32 input) ----

// Their common members: the values' offset (their unsigned form: Q8_0 q + 128, Q4_0 0..15, Q5_0
// 0..31) and, with AVX-512, batched decoding (gemv_each_group with dotg_q32, two rows a call).
template <DType T, int kOffset>
struct WeightKernelsQ32 : WeightKernelsBase<T> {
  static constexpr int offset = kOffset;
#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
  static constexpr bool multi_row = true;  // dotr: WeightKernelsBase's
#endif
#if defined(LLMI_SIMD_AVX512)
  static constexpr bool each_group = true;
  using GroupBlock = Q32PairBlock;
  static int64_t group_blocks(int64_t nb) {
    return kGroup / 2 * nb;
  }
  static void group_prepare(const MatmulInput& in, int64_t t0, int64_t nt, int64_t nb, Q32PairBlock* g) {
    q32_group_prepare<kOffset>(in, t0, nt, nb, g);
  }
  static constexpr int group_rows = 2;
  template <int NT>
  static void dotg(const uint8_t* row, uint64_t rb, int nr, const Q32PairBlock* g, int64_t nb, float (*out)[kGroup],
                   const uint8_t* next) {
    dotg_q32<T, NT>(row, rb, nr, g, nb, out, next);
  }
#endif
};

template <>
struct WeightKernels<DType::q4_0> : WeightKernelsQ32<DType::q4_0, 8> {
  static float dot(const RowOperands& o, const uint8_t* row, int64_t, int64_t t) {
    return dot_q4_0(row, o.in.row(act, t), o.n);
  }
  static void dequant(const TensorView& w, int64_t, const uint8_t* row, float* out) {
    ref::dequant_row_q4_0(row, out, w.ne[0]);
  }
#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
  static constexpr bool multi_token = true;
  template <int NT>
  static void dotn(const uint8_t* row, const ActQ8* a, int64_t n, float* out) {
    dotn_q4_q5_0<NT, false>(row, a, n, out);
  }
#endif
#if defined(LLMI_SIMD_VNNI)
  static constexpr bool multi_row = true;
  template <int NR>
  static void dotr(const uint8_t* row, uint64_t rb, const ActQ8& a, int64_t n, float* out, int64_t ldo) {
    dotr_q4_q5_0<NR, false>(row, rb, a, n, out, ldo);
  }
  static constexpr bool row_run = true;
  static void dots(const uint8_t* row, uint64_t rb, int64_t nr, const ActQ8& a, int64_t n, float* out) {
    dots_q4_q5_0<false>(row, rb, nr, a, n, out);
  }
#endif
#if defined(LLMI_SIMD_AVX512)
  static constexpr bool gemm = true;
  static constexpr PanelFormat panel = {offset, 0, 0, false};
  static constexpr auto decode = decode_row_q32<type>;
  static constexpr auto micro = micro_q32;
#endif
#if defined(LLMI_SIMD_AMX)
  static constexpr bool amx = true;  // the tiles (gemm_amx_q32_task) where the OS permits them
#endif
};

template <>
struct WeightKernels<DType::q5_0> : WeightKernelsQ32<DType::q5_0, 16> {
  static float dot(const RowOperands& o, const uint8_t* row, int64_t, int64_t t) {
    return dot_q5_0(row, o.in.row(act, t), o.n);
  }
  static void dequant(const TensorView& w, int64_t, const uint8_t* row, float* out) {
    ref::dequant_row_q5_0(row, out, w.ne[0]);
  }
#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
  static constexpr bool multi_token = true;
  template <int NT>
  static void dotn(const uint8_t* row, const ActQ8* a, int64_t n, float* out) {
    dotn_q4_q5_0<NT, true>(row, a, n, out);
  }
#endif
#if defined(LLMI_SIMD_VNNI)
  static constexpr bool multi_row = true;
  template <int NR>
  static void dotr(const uint8_t* row, uint64_t rb, const ActQ8& a, int64_t n, float* out, int64_t ldo) {
    dotr_q4_q5_0<NR, true>(row, rb, a, n, out, ldo);
  }
  static constexpr bool row_run = true;
  static void dots(const uint8_t* row, uint64_t rb, int64_t nr, const ActQ8& a, int64_t n, float* out) {
    dots_q4_q5_0<true>(row, rb, nr, a, n, out);
  }
#endif
#if defined(LLMI_SIMD_AVX512)
  static constexpr bool gemm = true;
  static constexpr PanelFormat panel = {offset, 0, 0, false};
  static constexpr auto decode = decode_row_q32<type>;
  static constexpr auto micro = micro_q32;
#endif
#if defined(LLMI_SIMD_AMX)
  static constexpr bool amx = true;  // the tiles (gemm_amx_q32_task) where the OS permits them
#endif
};

template <>
struct WeightKernels<DType::q8_0> : WeightKernelsQ32<DType::q8_0, 128> {
  static float dot(const RowOperands& o, const uint8_t* row, int64_t, int64_t t) {
    return dot_q8_0(row, o.in.row(act, t), o.n);
  }
  static void dequant(const TensorView& w, int64_t, const uint8_t* row, float* out) {
    ref::dequant_row_q8_0(row, out, w.ne[0]);
  }
#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
  static constexpr bool multi_token = true;
  template <int NT>
  static void dotn(const uint8_t* row, const ActQ8* a, int64_t n, float* out) {
    dotn_q8_0<NT>(row, a, n, out);
  }
#endif
#if defined(LLMI_SIMD_VNNI)
  static constexpr bool multi_row = true;
  template <int NR>
  static void dotr(const uint8_t* row, uint64_t rb, const ActQ8& a, int64_t n, float* out, int64_t ldo) {
    dotr_q8_0<NR>(row, rb, a, n, out, ldo);
  }
  static constexpr bool row_run = true;
  static void dots(const uint8_t* row, uint64_t rb, int64_t nr, const ActQ8& a, int64_t n, float* out) {
    dots_q8_0(row, rb, nr, a, n, out);
  }
  static constexpr bool pair_rows = true;
  static void dotr2(const uint8_t* row, uint64_t rb, const ActQ8& a, int64_t n, float* out, int64_t ldo) {
    dotr_q8_0<2, kPairAhead>(row, rb, a, n, out, ldo);
  }
#endif
#if defined(LLMI_SIMD_AVX512)
  static constexpr bool gemm = true;
  static constexpr PanelFormat panel = {offset, 0, 0, false};  // the values as q + 128
  static constexpr auto decode = decode_row_q32<type>;
  static constexpr auto micro = micro_q32;
#endif
#if defined(LLMI_SIMD_AMX)
  static constexpr bool amx = true;  // the tiles (gemm_amx_q32_task) where the OS permits them
#endif
};

// ---- K-quants (q8_256 input) ----

// Their common members: with AVX-512, batched decoding (gemv_each_group with dotg_q4_k / dotg_q6_k,
// one row a call).
template <DType T>
struct WeightKernelsKq : WeightKernelsBase<T> {
#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
  static constexpr bool multi_row = true;  // dotr: WeightKernelsBase's
#endif
#if defined(LLMI_SIMD_AVX512)
  static constexpr bool each_group = true;
  using GroupBlock = KqGroupBlock;
  static int64_t group_blocks(int64_t nb) {
    return nb;
  }
  static constexpr int group_rows = 1;
  static void group_prepare(const MatmulInput& in, int64_t t0, int64_t nt, int64_t nb, KqGroupBlock* g) {
    kq_group_prepare<T == DType::q4_K>(in, t0, nt, nb, g);
  }
  template <int NT>
  static void dotg(const uint8_t* row, const ActQ8* a, const KqGroupBlock* g, int64_t nb, float* out,
                   const uint8_t* next) {
    if constexpr (T == DType::q4_K)
      dotg_q4_k<NT>(row, a, g, nb, out, next);
    else
      dotg_q6_k<NT>(row, a, g, nb, out, next);
  }
#endif
};

template <>
struct WeightKernels<DType::q4_K> : WeightKernelsKq<DType::q4_K> {
  static float dot(const RowOperands& o, const uint8_t* row, int64_t, int64_t t) {
    return dot_q4_k(row, o.in.row(act, t), o.n);
  }
  static void dequant(const TensorView& w, int64_t, const uint8_t* row, float* out) {
    ref::dequant_row_q4_k(row, out, w.ne[0]);
  }
#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
  static constexpr bool multi_token = true;
  template <int NT>
  static void dotn(const uint8_t* row, const ActQ8* a, int64_t n, float* out) {
    dotn_q4_k<NT>(row, a, n, out);
  }
#endif
#if defined(LLMI_SIMD_VNNI)
  static constexpr bool multi_row = true;
  template <int NR>
  static void dotr(const uint8_t* row, uint64_t rb, const ActQ8& a, int64_t n, float* out, int64_t ldo) {
    dotr_q4_k<NR>(row, rb, a, n, out, ldo);
  }
  static constexpr bool row_run = true;
  static void dots(const uint8_t* row, uint64_t rb, int64_t nr, const ActQ8& a, int64_t n, float* out) {
    dots_q4_k(row, rb, nr, a, n, out);
  }
#endif
#if defined(LLMI_SIMD_AVX512)
  static constexpr bool gemm = true;
  static constexpr PanelFormat panel = {0, 64, 64, true};
  static constexpr auto decode = decode_row_q4_k;
  static constexpr auto micro = micro_kq<true>;
#endif
#if defined(LLMI_SIMD_AMX)
  static constexpr bool amx = true;  // the tiles (gemm_amx_kq_task) where the OS permits them
  static constexpr int amx_offset = 0;
  // one scale per 16 values (gemm_amx_kq_task): sc_j twice per sub-block j of 32
  static void amx_scales(const uint8_t* row, int64_t K, int16_t* s16) {
    for (int64_t b = 0; b < K / 256; b++) {
      uint64_t sc8, m8;
      q4k_unpack_scales(row + 144 * b + 4, &sc8, &m8);
      for (int j = 0; j < 8; j++)
        s16[16 * b + 2 * j] = s16[16 * b + 2 * j + 1] = static_cast<int16_t>((sc8 >> (8 * j)) & 0xFF);
    }
  }
#endif
};

template <>
struct WeightKernels<DType::q6_K> : WeightKernelsKq<DType::q6_K> {
  static float dot(const RowOperands& o, const uint8_t* row, int64_t, int64_t t) {
    return dot_q6_k(row, o.in.row(act, t), o.n);
  }
  static void dequant(const TensorView& w, int64_t, const uint8_t* row, float* out) {
    ref::dequant_row_q6_k(row, out, w.ne[0]);
  }
#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
  static constexpr bool multi_token = true;
  template <int NT>
  static void dotn(const uint8_t* row, const ActQ8* a, int64_t n, float* out) {
    dotn_q6_k<NT>(row, a, n, out);
  }
#endif
#if defined(LLMI_SIMD_VNNI)
  static constexpr bool multi_row = true;
  template <int NR>
  static void dotr(const uint8_t* row, uint64_t rb, const ActQ8& a, int64_t n, float* out, int64_t ldo) {
    dotr_q6_k<NR>(row, rb, a, n, out, ldo);
  }
  static constexpr bool row_run = true;
  static void dots(const uint8_t* row, uint64_t rb, int64_t nr, const ActQ8& a, int64_t n, float* out) {
    dots_q6_k(row, rb, nr, a, n, out);
  }
#endif
#if defined(LLMI_SIMD_AVX512)
  static constexpr bool gemm = true;
  static constexpr PanelFormat panel = {0, 32, 32, false};
  static constexpr auto decode = decode_row_q6_k;
  static constexpr auto micro = micro_kq<false>;
#endif
#if defined(LLMI_SIMD_AMX)
  static constexpr bool amx = true;  // the tiles (gemm_amx_kq_task) where the OS permits them
  static constexpr int amx_offset = 32;
  // one scale per 16 values (gemm_amx_kq_task): the 16 signed scales of each super-block
  static void amx_scales(const uint8_t* row, int64_t K, int16_t* s16) {
    for (int64_t b = 0; b < K / 256; b++)
      for (int j = 0; j < 16; j++) s16[16 * b + j] = static_cast<int8_t>(row[210 * b + 192 + j]);
  }
#endif
};

// ---- MLX affine (f32 input and its sums per group) ----

template <DType T>
struct WeightKernelsMlx : WeightKernelsBase<T> {
  static float dot(const RowOperands& o, const uint8_t*, int64_t r, int64_t t) {
    return dot_mlx(o.w, r, o.in.x() + t * o.n, o.in.mlx_sums(t));
  }
  static void dequant(const TensorView& w, int64_t r, const uint8_t*, float* out) { ref::dequant_row_mlx(w, r, out); }
  static bool prepare_extra(MatmulInput& in, const TensorView& w) { return in.prepare_mlx(w.group_size); }
  static int mlx_group(const TensorView& w) { return w.group_size; }
#if defined(LLMI_SIMD_AVX512)
  static constexpr bool gemm = true;
#endif
};
template <>
struct WeightKernels<DType::mlx_q4> : WeightKernelsMlx<DType::mlx_q4> {};
template <>
struct WeightKernels<DType::mlx_q8> : WeightKernelsMlx<DType::mlx_q8> {};

// Calls f(WeightKernels<t>{}) (an empty object: f reads its type) and returns what f returns.
template <class F>
inline decltype(auto) visit_weight_kernels(DType t, F&& f) {
  return visit_weight_type(t, [&](auto type) -> decltype(auto) { return f(WeightKernels<decltype(type)::value>{}); });
}

// ---- the entry points: one visit each ----

// Row `row` of a 2-D (or flattened) tensor as f32 (`out` holds ne[0] floats). The type must be
// computable (checked at load).
inline void dequant_row(const TensorView& w, int64_t row, float* out) {
  visit_weight_kernels(w.type, [&](auto k) {
    decltype(k)::dequant(w, row, w.data + static_cast<uint64_t>(row) * weight_row_bytes(w), out);
  });
}

// The input in the form WK multiplies with. False when out of memory.
template <class WK>
inline bool prepare_input(const TensorView& w, MatmulInput& in, ThreadPool& pool) {
  constexpr ActForm f = WK::act;
  return in.prepare(f, pool, f == ActForm::q8_256 ? &quantize_q8_256 : &quantize_q8_32) && WK::prepare_extra(in, w);
}

// Y = X W^T for an input shared by several matmuls. False when out of memory.
inline bool matmul(const TensorView& w, MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool,
                   [[maybe_unused]] MatmulScratch& scratch) {
  LLMI_ASSERT(in.n() == w.ne[0]);
  if (in.n_tokens() <= 0 || w.rows() <= 0) return true;
  return visit_weight_kernels(w.type, [&](auto k) {
    using WK = decltype(k);
    if (!prepare_input<WK>(w, in, pool)) return false;
#if defined(LLMI_SIMD_AVX512)
    if constexpr (WK::gemm) {
      if (in.n_tokens() >= kGemmMinTokens && WK::gemm_fits(w, in)) return gemm<WK>(w, in, y, ldy, pool, scratch);
    }
#elif defined(LLMI_SIMD_AVX2)
    if constexpr (WK::multi_token) {
      if (in.n_tokens() >= 2) {
        gemm_rows<WK>(w, in, y, ldy, pool, scratch, scratch.block_sums);
        return true;
      }
    }
#endif
    gemv<WK>(w, in, y, ldy, pool);
    return true;
  });
}

// Y[t][r] = sum_k W[r][k] * X[t][k]; X is [n_tokens][ne0(W)] f32, Y is [n_tokens][ldy] f32.
// False when out of memory.
inline bool matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t ldy, ThreadPool& pool,
                   bool bf16_exact, MatmulScratch& scratch) {
  scratch.in.reset(x, n_tokens, w.ne[0], bf16_exact);
  return matmul(w, scratch.in, y, ldy, pool, scratch);
}

// The tasks of parts[0 .. n) as one job of the pool.
inline void run_parts(const MatmulPart* parts, int n, const MatmulInput& in, ThreadPool& pool) {
  int total = 0;
  for (int i = 0; i < n; i++) total += parts[i].n_tasks;
  pool.parallel_for(total, [&](int task, int) {
    int i = 0;
    while (task >= parts[i].n_tasks) task -= parts[i++].n_tasks;
    parts[i].task(parts[i], in, task);
  });
}

// Y_i = X W_i^T for the nw (<= kMatmulGroup) matrices ws[i], all of one input X (the products a
// definition takes one after another from one register: q, k and v; gate and up), each as matmul
// computes it, so the same bits: the input quantized once per form they take, and for one token
// their rows one job of the pool (gemv_part), so that the threads wait for each other once for
// the lot, not once a matrix (decode at 2 threads: bench/RESULTS.md). False when out of memory.
inline bool matmul_group(const TensorView* const* ws, int nw, const float* x, int64_t n_tokens, float* const* ys,
                         const int64_t* ldys, ThreadPool& pool, bool bf16_exact, MatmulScratch& scratch) {
  LLMI_ASSERT(nw >= 1 && nw <= kMatmulGroup);
  MatmulInput& in = scratch.in;
  in.reset(x, n_tokens, ws[0]->ne[0], bf16_exact);
  bool one_job = n_tokens == 1 && pool.size() > 1;
  int mlx = 0;  // one job: the input holds the sums of one MLX group size (prepare_extra)
  for (int i = 0; i < nw; i++) {
    LLMI_ASSERT(ws[i]->ne[0] == in.n());
    const int g = visit_weight_kernels(ws[i]->type, [&](auto k) { return decltype(k)::mlx_group(*ws[i]); });
    if (g && mlx && g != mlx) one_job = false;
    if (g) mlx = g;
  }
  if (!one_job) {
    for (int i = 0; i < nw; i++)
      if (!matmul(*ws[i], in, ys[i], ldys[i], pool, scratch)) return false;
    return true;
  }
  MatmulPart parts[kMatmulGroup];
  for (int i = 0; i < nw; i++) {
    if (!visit_weight_kernels(ws[i]->type, [&](auto k) {
          using WK = decltype(k);
          if (!prepare_input<WK>(*ws[i], in, pool)) return false;
          parts[i] = gemv_part<WK>(*ws[i], ys[i], ldys[i], pool.size());
          return true;
        }))
      return false;
  }
  run_parts(parts, nw, in, pool);
  return true;
}

// Y[t][r] = sum_k W[r][k] * X[t][k] with every token t computed as matmul(w, X[t], 1 token) would
// (gemv_each). False when out of memory.
inline bool matmul_each(const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t ldy, ThreadPool& pool,
                        bool bf16_exact, MatmulScratch& scratch) {
  MatmulInput& in = scratch.in;
  in.reset(x, n_tokens, w.ne[0], bf16_exact);
  LLMI_ASSERT(in.n() == w.ne[0]);
  if (n_tokens <= 0 || w.rows() <= 0) return true;
  return visit_weight_kernels(w.type, [&](auto k) {
    using WK = decltype(k);
    return prepare_input<WK>(w, in, pool) && gemv_each<WK>(w, in, y, ldy, pool, scratch);
  });
}

// matmul_each for the nw (<= kMatmulGroup) matrices ws[i] of one input X (as matmul_group: the
// products a definition takes one after another from one register), every token of each as
// matmul_each computes it, so the same bits: the input quantized once per form the matrices take;
// one token is matmul_group's product; on AVX2, for several tokens and the types of gemm_rows, the
// packs of the tokens are made once per pack form and the matrices' rows are one job of the pool
// (batched decoding: bench/RESULTS.md). False when out of memory.
inline bool matmul_each_group(const TensorView* const* ws, int nw, const float* x, int64_t n_tokens, float* const* ys,
                              const int64_t* ldys, ThreadPool& pool, bool bf16_exact, MatmulScratch& scratch) {
  LLMI_ASSERT(nw >= 1 && nw <= kMatmulGroup);
  if (n_tokens == 1) return matmul_group(ws, nw, x, n_tokens, ys, ldys, pool, bf16_exact, scratch);
  MatmulInput& in = scratch.in;
  in.reset(x, n_tokens, ws[0]->ne[0], bf16_exact);
  if (n_tokens <= 0) return true;
#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
  // each matrix's packs (tp[i] tokens) are those of the first matrix of its pack form, at off[i] in
  // scratch.xk (one form has one tp: the tokens and the input decide it; a type without gemm_rows
  // keeps tp 0 and makes the group one product at a time)
  int64_t tp[kMatmulGroup] = {};
  int form[kMatmulGroup] = {}, first[kMatmulGroup] = {};
  uint64_t off[kMatmulGroup] = {}, bytes = 0;
  bool one_job = true;
  for (int i = 0; i < nw; i++) {
    LLMI_ASSERT(ws[i]->ne[0] == in.n());
    const bool ok = visit_weight_kernels(ws[i]->type, [&](auto k) {
      using WK = decltype(k);
      if constexpr (WK::multi_token) {
        if (!prepare_input<WK>(*ws[i], in, pool)) return false;
        tp[i] = gemm_rows_tp<WK>(in), form[i] = pack_form<WK>(), first[i] = i;
        for (int j = 0; j < i && first[i] == i; j++)
          if (tp[j] > 0 && form[j] == form[i]) first[i] = j;
        off[i] = first[i] == i ? bytes : off[first[i]];
        if (first[i] == i && tp[i] > 0) bytes += gemm_rows_pack_bytes<WK>(in.n(), tp[i]);
      } else {
        one_job = false;
      }
      return true;
    });
    if (!ok) return false;
  }
  if (one_job && (bytes == 0 || scratch.xk.reserve(bytes))) {
    MatmulPart parts[kMatmulGroup];
    uint8_t* xk = scratch.xk.as<uint8_t>();
    for (int i = 0; i < nw; i++) {
      visit_weight_kernels(ws[i]->type, [&](auto k) {
        using WK = decltype(k);
        if constexpr (WK::multi_token) {
          if (first[i] == i && tp[i] > 0) gemm_rows_pack<WK>(in, tp[i], xk + off[i], pool);
          parts[i] = gemm_rows_part<WK>(*ws[i], n_tokens, ys[i], ldys[i], pool.size(), tp[i], xk + off[i]);
        }
      });
    }
    run_parts(parts, nw, in, pool);
    return true;
  }
#endif
  // one matrix after another on the shared input (each prepared before its product: two MLX group
  // sizes take the input's sums of each in turn)
  for (int i = 0; i < nw; i++) {
    LLMI_ASSERT(ws[i]->ne[0] == in.n());
    if (!visit_weight_kernels(ws[i]->type, [&](auto k) {
          using WK = decltype(k);
          return prepare_input<WK>(*ws[i], in, pool) && gemv_each<WK>(*ws[i], in, ys[i], ldys[i], pool, scratch);
        }))
      return false;
  }
  return true;
}

// Sizes `scratch` for matmul and matmul_each with w of up to max_tokens tokens, so that they
// allocate nothing (the evaluation context calls it for each matrix when it is created). False
// when out of memory.
inline bool matmul_reserve(const TensorView& w, int64_t max_tokens, MatmulScratch& scratch) {
  if (max_tokens <= 0 || w.rows() <= 0) return true;
  return visit_weight_kernels(w.type, [&](auto k) {
    using WK = decltype(k);
    if (!scratch.in.reserve(WK::act, max_tokens, w.ne[0], WK::mlx_group(w))) return false;
#if defined(LLMI_SIMD_AVX512)
    if constexpr (WK::each_group) {  // (matmul_each: max_tokens single tokens)
      if (max_tokens >= 2 && !scratch.xk.reserve(each_group_bytes<WK>(max_tokens, w.ne[0]))) return false;
    }
    if constexpr (WK::gemm) {
      if (max_tokens >= kGemmMinTokens) return gemm_reserve<WK>(w, max_tokens, scratch);
    }
#elif defined(LLMI_SIMD_AVX2)
    if constexpr (WK::multi_token) return gemm_rows_reserve<WK>(w, max_tokens, scratch);
#endif
    return true;
  });
}

// One path of a prepared matmul, for the kernel benchmark (bench/kernels.cpp).
inline void gemv(const TensorView& w, const MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool) {
  visit_weight_kernels(w.type, [&](auto k) { gemv<decltype(k)>(w, in, y, ldy, pool); });
}
#if defined(LLMI_SIMD_AVX512)
inline bool gemm(const TensorView& w, const MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool,
                 MatmulScratch& scratch) {
  return visit_weight_kernels(w.type, [&](auto k) {
    if constexpr (decltype(k)::gemm)
      return gemm<decltype(k)>(w, in, y, ldy, pool, scratch);
    else
      return (gemv<decltype(k)>(w, in, y, ldy, pool), true);
  });
}
#endif

// The matmuls as table entries (26_kernels_end).
inline bool matmul_in(const TensorView& w, MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool,
                      MatmulScratch& scratch) {
  return matmul(w, in, y, ldy, pool, scratch);
}
inline bool matmul_x(const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t ldy, ThreadPool& pool,
                     bool bf16_exact, MatmulScratch& scratch) {
  return matmul(w, x, n_tokens, y, ldy, pool, bf16_exact, scratch);
}

LLMI_KNS_END
}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
