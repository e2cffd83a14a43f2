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
//  * The single tokens of several sequences (batched decoding, matmul_each): each row is read once
//    for all of them, and on x86 its blocks are unpacked once for a group of tokens (AVX2:
//    gemm_rows with the types' dotp / dotn_*; AVX-512: gemv_each_group for the quantized types), every
//    token keeping the float order of its one-token dot product. The matrices of one input (q, k,
//    v; gate, up: matmul_each_group) share the quantized input, and on AVX2 the packs and one job.
//  * Many tokens (prefill, AVX-512): a blocked matrix-matrix product. A task takes a block of rows
//    and a block of tokens, decodes the rows once into a panel (unsigned 8-bit values with their
//    scales, or f32 for float/MLX types) kept in cache, and runs a register-tiled micro-kernel
//    (kRM rows x kRN tokens) over it: vpmaddubsw + vpdpwssd for K-quants, vpdpbusd for the
//    32-blocks, f32 FMA for float types. Offsets (Q4_K mins, Q6_K's -32, Q4_0's -8, ...) are
//    products of per-block weight factors and per-block activation sums added in the same
//    micro-kernel. Quantized types keep the float order of llama.cpp's x86 dot products for the
//    same (row, token), so that the results are its bits.
//  * Per weight type: the products here are templates on the type's row of the kernel table
//    (WK = WeightKernels<T>, 25_weight_kernels); the entry points (matmul, matmul_each, there)
//    choose the row once per call, so the type's kernels inline into these loops.
//  * Determinism: every output element is computed by one task with arithmetic that depends
//    only on (row, token, K), never on the thread count or which tile it fell in (ragged tiles
//    repeat a valid row/token and drop the result), so 1..N threads give the same bits.
namespace llminfer {
inline namespace v0_1 {
namespace detail {
LLMI_KNS_BEGIN

// ---- matrix-vector products (few tokens) ----

// What a row product (WK::dot) reads besides its row, fixed for a whole matmul.
struct RowOperands {
  const TensorView& w;
  const MatmulInput& in;  // prepared in the type's ActForm
  int64_t n;              // values per row (w.ne[0])
  bool sgemm;             // float types: llama.cpp's sgemm order (dot_float)
  bool bf16_exact;        // the input holds bf16 values
};
// each: every token is a product of its own (matmul_each): float dot products take the order of a
// single token.
inline RowOperands row_operands(const TensorView& w, const MatmulInput& in, bool each) {
  // llama.cpp's float order differs where its sgemm takes the product: several tokens and a row
  // count that is a multiple of 4 (dot_float checks the row length)
  return {w, in, w.ne[0], !each && in.n_tokens() >= 2 && w.rows() % 4 == 0, in.bf16_exact()};
}

// gemv on CPUs that stream rows better with help (cpu_streams_ahead, 11_platform): each row's
// bytes are asked into L2 (prefetcht1) kAheadRows rows before its turn, and the types with dotr
// (WK::multi_row) take kNR rows at a time, each row its own chain of FMAs in dot's order, the
// token's activations loaded once for all. Intel Xeon (Sapphire Rapids), 1 thread, decode of
// qwen3-0.6b: Q8_0 11 -> 19 tokens/s, Q4_K_M 16 -> 26 (bench/RESULTS.md).
// The kNR rows are not neighbours but one from each of kNR equal runs of the task's rows, so that
// each is a stream of its own through memory: the L2 streamer follows one stream per 4 KiB page,
// and neighbouring rows share pages. Each stream is asked into L1 kStreamAhead bytes ahead. Same
// Xeon, llama3.2-1b Q8_0 decode: 10.5-11.2 -> 12.6-13.1 tokens/s at 1 thread, 20.9 -> 24.5 at 2
// (neighbouring rows, the next kNR asked into L2 as these were read). With dotr for the K-quants
// and Q4_0/Q5_0 as well (they ran one row at a time), at 2 threads: llama3.2-1b Q4_K_M 27.4 ->
// 39.1, gemma3-1b Q4_K_M (Q5_0 where rows are not a multiple of 256) 29.1 -> 39.3.
constexpr int64_t kAheadRows = 4;
constexpr int64_t kStreamAhead = 1024;
// Where gemv takes Q8_0 rows two at a time (cpu_pairs_rows: AMD Zen 4), each of the two streams is
// asked into L1 this far ahead. Decode at 1 thread against 4096 (the one-row dots' distance
// there): qwen3-0.6b Q8_0 36.9 -> 38.0 tokens/s, llama3.2-1b Q8_0 19.2 -> 20.2, smollm2-135m Q8_0
// 154.8 -> 160.3, gemma3-1b Q8_0 26.2 -> 25.9; at 2 threads level or faster.
constexpr int64_t kPairAhead = 2048;
// (Every cache line of bytes [p, p + bytes), wherever p starts.)
inline void prefetch_l2(const uint8_t* p, uint64_t bytes) {
#if defined(LLMI_SIMD_AVX2)
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  for (uintptr_t at = reinterpret_cast<uintptr_t>(p) & ~uintptr_t(63); at < end; at += 64)
    _mm_prefetch(reinterpret_cast<const char*>(at), _MM_HINT_T1);
#else
  (void)p;
  (void)bytes;
#endif
}

#if defined(LLMI_SIMD_VNNI)
constexpr int kNR = 8;

// out[i * ldo] = dot_q8_0(row i, a, n), i < NR; row i at w + i * rb, asked into L1 kAhead bytes
// ahead of its reads (each row the head of a stream: gemv). Two rows per zmm (row 2k in the low 8
// lanes, 2k + 1 in the high), the activations in both halves; the integer lanes as (w + 128) * a
// (vpdpbusd) from a start of -128 * (the sum of those 4 activations): dot_s8_256's int32 lanes;
// then one FMA per block with that half's d(w) * d(a), and each half's tree (hsum_ps256).
template <int NR, int64_t kAhead = kStreamAhead>
inline void dotr_q8_0(const uint8_t* w, uint64_t rb, const ActQ8& a, int64_t n, float* out, int64_t ldo) {
  static_assert(NR % 2 == 0, "dotr_q8_0: rows in pairs");
  constexpr int NP = NR / 2;
  constexpr int64_t bs = sizeof(ref::BlockQ8_0);
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512 acc[NP];
  for (int k = 0; k < NP; k++) acc[k] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n / 32; b++) {
    for (int k = 0; k < NR; k++)
      _mm_prefetch(reinterpret_cast<const char*>(w + k * rb + static_cast<uint64_t>(b * bs + kAhead)), _MM_HINT_T0);
    const __m512i av = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b)));
    const __m512i start =
        _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, av));
    const __m512 da = _mm512_set1_ps(a.d[b]);
#pragma GCC unroll 8
    for (int k = 0; k < NP; k++) {
      const uint8_t* p0 = w + static_cast<uint64_t>(2 * k) * rb + static_cast<uint64_t>(b * bs);
      const uint8_t* p1 = p0 + rb;
      const __m512i wv =
          _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0 + 2))),
                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1 + 2)), 1);
      const __m512i dv = _mm512_dpbusd_epi32(start, _mm512_xor_si512(wv, flip), av);
      const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<short>(rd_u16(p0)))),
                                                _mm_set1_epi16(static_cast<short>(rd_u16(p1))), 1);
      acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dv), _mm512_mul_ps(_mm512_cvtph_ps(h), da), acc[k]);
    }
  }
  for (int k = 0; k < NP; k++) {
    out[2 * k * ldo] = hsum_ps256(_mm512_castps512_ps256(acc[k]));
    out[(2 * k + 1) * ldo] = hsum_ps256(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[k]), 1)));
  }
}

// out[i * ldo] = dot_q4_0 / dot_q5_0 (row i, a, n), i < NR; as dotr_q8_0, each row's float steps its
// own (q45_0_pair), the activations and their offset sums taken once for all.
template <int NR, bool kQ5>
inline void dotr_q4_q5_0(const uint8_t* w, uint64_t rb, const ActQ8& a, int64_t n, float* out, int64_t ldo) {
  constexpr int64_t bs = Q45_0<kQ5>::bs;
  const int64_t nb = n / 32;
  __m256 acc[NR];
  for (int k = 0; k < NR; k++) acc[k] = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const __m512i av = _mm512_loadu_si512(a.q + 32 * b);
    const __m512i oa = q45_0_offset_sums<kQ5>(av);
#pragma GCC unroll 16
    for (int k = 0; k < NR; k++) {
      const uint8_t* p = w + k * rb + static_cast<uint64_t>(b * bs);
      _mm_prefetch(reinterpret_cast<const char*>(p + kStreamAhead), _MM_HINT_T0);
      q45_0_pair<kQ5>(p, av, oa, a, b, acc[k]);
    }
  }
  if (b < nb)
    for (int k = 0; k < NR; k++) q45_0_block<kQ5>(w + k * rb + static_cast<uint64_t>(b * bs), a, b, acc[k]);
  for (int k = 0; k < NR; k++) out[k * ldo] = hsum_ps256(acc[k]);
}

// The loop of dotr_q4_k and dotr_q6_k: per super-block b, its activations loaded once (q), then
// step(k, p, q, b) for each row k (p: its super-block b, the row read kStreamAhead bytes ahead).
template <int NR, int64_t BS, class Step>
inline void dotr_superblocks(const uint8_t* w, uint64_t rb, const ActQ8& a, int64_t n, Step&& step) {
  for (int64_t b = 0; b < n / ref::kQK_K; b++) {
    __m512i q[4];
    load_act_256(a, b, q);
#pragma GCC unroll 16
    for (int k = 0; k < NR; k++) {
      const uint8_t* p = w + k * rb + static_cast<uint64_t>(b * BS);
      for (int64_t at = 0; at < BS; at += 64)
        _mm_prefetch(reinterpret_cast<const char*>(p + kStreamAhead + at), _MM_HINT_T0);
      step(k, p, q, b);
    }
  }
}

// out[i * ldo] = dot_q4_k(row i, a, n), i < NR; rows as in dotr_q8_0, each row's float steps its own
// (q4k_superblock), the activations loaded once for all.
template <int NR>
inline void dotr_q4_k(const uint8_t* w, uint64_t rb, const ActQ8& a, int64_t n, float* out, int64_t ldo) {
  __m256 acc[NR];
  __m128 accm[NR];
  for (int k = 0; k < NR; k++) acc[k] = _mm256_setzero_ps(), accm[k] = _mm_setzero_ps();
  dotr_superblocks<NR, sizeof(ref::BlockQ4_K)>(w, rb, a, n, [&](int k, const uint8_t* p, const __m512i* q, int64_t b) {
    q4k_superblock(p, q[0], q[1], q[2], q[3], a, b, acc[k], accm[k]);
  });
  for (int k = 0; k < NR; k++) out[k * ldo] = hsum_ps256(acc[k]) + reduce4_ps(accm[k]);
}

// out[i * ldo] = dot_q6_k(row i, a, n), i < NR; as dotr_q4_k.
template <int NR>
inline void dotr_q6_k(const uint8_t* w, uint64_t rb, const ActQ8& a, int64_t n, float* out, int64_t ldo) {
  __m256 acc[NR];
  for (int k = 0; k < NR; k++) acc[k] = _mm256_setzero_ps();
  dotr_superblocks<NR, sizeof(ref::BlockQ6_K)>(
      w, rb, a, n, [&](int k, const uint8_t* p, const __m512i* q, int64_t b) { q6k_superblock(p, q, a, b, acc[k]); });
  for (int k = 0; k < NR; k++) out[k * ldo] = hsum_ps256(acc[k]);
}

// out[i] = the one-token dot of row i (at w + i * rb) with a, i < nr: gemv's rows one after another
// through the dot's body (q8_0_row, q45_0_row, q4k_nibbles_row, q6k_vnni_row) inlined here, so that
// its constants and the CPU's answers are made once for the run, not once a row (for a row of 1024
// Q4_K values, 4 super-blocks, that was about a quarter of its instructions). One function per type,
// kept out of gemv (the same loop inlined into it came out slower: bench/RESULTS.md).
LLMI_NOINLINE inline void dots_q8_0(const uint8_t* w, uint64_t rb, int64_t nr, const ActQ8& a, int64_t n, float* out) {
  const bool pf = cpu_prefetches_dots();
  for (int64_t i = 0; i < nr; i++) out[i] = q8_0_row(w + static_cast<uint64_t>(i) * rb, a, n / 32, pf);
}
template <bool kQ5>
LLMI_NOINLINE inline void dots_q4_q5_0(const uint8_t* w, uint64_t rb, int64_t nr, const ActQ8& a, int64_t n,
                                       float* out) {
  const bool pf = cpu_prefetches_dots();
  for (int64_t i = 0; i < nr; i++) out[i] = q45_0_row<kQ5>(w + static_cast<uint64_t>(i) * rb, a, n / 32, pf);
}
LLMI_NOINLINE inline void dots_q4_k(const uint8_t* w, uint64_t rb, int64_t nr, const ActQ8& a, int64_t n, float* out) {
  if (!a.qn) {
    for (int64_t i = 0; i < nr; i++) out[i] = dot_q4_k(w + static_cast<uint64_t>(i) * rb, a, n);
    return;
  }
  const bool pf = cpu_prefetches_dots();
  for (int64_t i = 0; i < nr; i++) out[i] = q4k_nibbles_row(w + static_cast<uint64_t>(i) * rb, a, n / ref::kQK_K, pf);
}
LLMI_NOINLINE inline void dots_q6_k(const uint8_t* w, uint64_t rb, int64_t nr, const ActQ8& a, int64_t n, float* out) {
  const bool pf = cpu_prefetches_dots();
  for (int64_t i = 0; i < nr; i++) out[i] = q6k_vnni_row(w + static_cast<uint64_t>(i) * rb, a, n / ref::kQK_K, pf);
}

#endif

#if defined(LLMI_SIMD_AVX2)
// gemv's rows r0 + j + i * L of [r0, r1), i < NR, j < L = (r1 - r0) / NR: NR streams of L rows, one
// row of each per call take(row, bytes between the streams, out, ldo); returns the first row after
// them (the rest go one at a time).
template <int NR, class Take>
inline int64_t take_streams(const uint8_t* w, uint64_t row_bytes, int64_t r0, int64_t r1, float* y, Take&& take) {
  const int64_t L = (r1 - r0) / NR;
  for (int64_t j = 0; j < L; j++) take(w + static_cast<uint64_t>(r0 + j) * row_bytes, L * row_bytes, y + r0 + j, L);
  return r0 + L * NR;
}
#endif
#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
// gemv with the AVX2 kernels takes kAvx2Rows rows at a time, one from each of kAvx2Rows equal runs
// of a task's rows (take_streams), each row its own chain in dot's order (dotr_avx2, 21_simd): one
// row at a time waited on its one chain and its loads, and several streams through memory read
// faster than one. AMD EPYC (Zen 3), decode at 1 thread, one row at a time -> 2 / 3 / 4 / 8
// streams, tokens/s: qwen3-0.6b Q4_K_M 28.6 -> 39.1 / 42.7 / 42.4 / 40.2, llama3.2-1b Q4_K_M 14.9
// -> 20.9 / 22.7 / 23.3 / 20.8, llama3.2-1b Q8_0 12.0 -> 16.4 / 17.9 / 19.6 / 18.0; neighbouring
// rows taken together instead (2 or 4) were slower than one at a time (18.3 / 18.8 on qwen3-0.6b
// Q4_K_M), as on Zen 4 (cpu_pairs_rows).
constexpr int kAvx2Rows = 4;
#endif

// A product's work on one matrix as tasks of chunks of rows (gemv_part; AVX2 gemm_rows_part), each
// run by part.task: so that the products of several matrices with one input (q, k and v; gate and
// up) are one job of the pool (matmul_group, matmul_each_group: 25_weight_kernels), not one each.
struct MatmulPart {
  const TensorView* w;
  float* y;
  int64_t ldy, chunk;
  int n_tasks;
  void (*task)(const MatmulPart& part, const MatmulInput& in, int task);
  int64_t n_tb = 1, tp = 0;        // gemm_rows: blocks of tokens per chunk of rows, tokens in packs
  const uint8_t* packs = nullptr;  // gemm_rows: the packs of tokens 0 .. tp - 1 (gemm_rows_pack)
  bool sums = false;               // gemm_rows: the packs are sums packs (every token; dots_q32)
};
// WK, here and below: the weight type's row of the kernel table (WeightKernels, 25_weight_kernels);
// its kernels inline into these loops.
template <class WK>
inline void gemv_task(const MatmulPart& part, const MatmulInput& in, int task);
template <class WK>
inline MatmulPart gemv_part(const TensorView& w, float* y, int64_t ldy, int threads) {
  const int64_t rows = w.rows();
  const uint64_t rb = std::max<uint64_t>(1, weight_row_bytes(w));
  // Chunks: about 2 per thread (a thread that finishes early takes another), at least 64 KiB of
  // weights each. Long contiguous runs stream from memory much faster than many short ones:
  // decode of qwen3-0.6b q4_k_m, 2 threads, went from about 62 tokens/s with ~16 chunks per
  // thread to 74-80 with 4 and 80-89 with 2 (bench/RESULTS.md).
  int64_t chunk = std::max<int64_t>(rows / (2 * static_cast<int64_t>(threads)), static_cast<int64_t>(65536 / rb));
  chunk = std::clamp<int64_t>(chunk, 1, std::max<int64_t>(1, rows));
  return {&w, y, ldy, chunk, static_cast<int>((rows + chunk - 1) / chunk), &gemv_task<WK>};
}
template <class WK>
inline void gemv(const TensorView& w, const MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool) {
  const MatmulPart part = gemv_part<WK>(w, y, ldy, pool.size());
  pool.parallel_for(part.n_tasks, [&](int task, int) { gemv_task<WK>(part, in, task); });
}
template <class WK>
inline void gemv_task(const MatmulPart& part, const MatmulInput& in, int task) {
  const TensorView& w = *part.w;
  const int64_t rows = w.rows(), T = in.n_tokens(), chunk = part.chunk, ldy = part.ldy;
  float* const y = part.y;
  const RowOperands o = row_operands(w, in, false);
  const uint64_t row_bytes = weight_row_bytes(w);
  const bool ahead = cpu_streams_ahead();
  [[maybe_unused]] const bool pairs = !ahead && cpu_pairs_rows();
  const int64_t r0 = task * chunk, r1 = std::min(rows, r0 + chunk);
  for (int64_t t = 0; t < T; t++) {
    float* yt = y + t * ldy;
    int64_t r = r0;
#if defined(LLMI_SIMD_VNNI)
    if constexpr (WK::multi_row)
      if (ahead)  // kNR streams (the comment above kAheadRows)
        r = take_streams<kNR>(w.data, row_bytes, r0, r1, yt,
                              [&](const uint8_t* p, uint64_t rs, float* out, int64_t ldo) {
                                WK::template dotr<kNR>(p, rs, o.in.row(WK::act, t), o.n, out, ldo);
                              });
    if constexpr (WK::pair_rows)
      if (pairs)  // two streams, each one chain of FMAs (cpu_pairs_rows)
        r = take_streams<2>(w.data, row_bytes, r0, r1, yt, [&](const uint8_t* p, uint64_t rs, float* out, int64_t ldo) {
          WK::dotr2(p, rs, o.in.row(WK::act, t), o.n, out, ldo);
        });
    if constexpr (WK::row_run)
      if (!ahead) {
        WK::dots(w.data + static_cast<uint64_t>(r) * row_bytes, row_bytes, r1 - r, o.in.row(WK::act, t), o.n, yt + r);
        r = r1;
      }
#endif
#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
    if constexpr (WK::multi_row)
      r = take_streams<kAvx2Rows>(w.data, row_bytes, r0, r1, yt,
                                  [&](const uint8_t* p, uint64_t rs, float* out, int64_t ldo) {
                                    WK::template dotr<kAvx2Rows>(p, rs, o.in.row(WK::act, t), o.n, out, ldo);
                                  });
#endif
    for (; r < r1; r++) {
      if (ahead && r + kAheadRows < rows)
        prefetch_l2(w.data + static_cast<uint64_t>(r + kAheadRows) * row_bytes, row_bytes);
      yt[r] = WK::dot(o, w.data + static_cast<uint64_t>(r) * row_bytes, r, t);
    }
  }
}

#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
// ---- several tokens per weight row (AVX2) ----
// Without AVX-512 the matrix-matrix product is a row-major sweep: a task takes a chunk of rows and
// a block of tokens; each weight row, decoded once per group of tokens (a pack of kTP, below, or
// kTG), is multiplied with every token of the group while it sits in L1. Every
// (row, token) sum takes exactly the float operations of the row's dot product (dot_q8_0,
// dot_q4_q5_0, dot_q4_k, dot_q6_k: llama.cpp's AVX2 order), so the result is the bits of gemv
// and of llama.cpp's AVX2 build; only the integer work and the loads are shared. The same path
// takes the single tokens of several sequences (gemv_each, batched decoding). (AVX-512:
// gemv_each_group below for those, the blocked gemm for a matmul of several tokens.)
constexpr int kTG = 4;           // tokens per weight-row decode
constexpr int64_t kTBlock = 64;  // tokens per task (their activations stay in L2)

// out[t] = dot_q8_0(w, a[t], n), t < NT.
template <int NT>
inline void dotn_q8_0(const uint8_t* w, const ActQ8* a, int64_t n, float* out) {
  constexpr int64_t bs = sizeof(ref::BlockQ8_0);
  __m256 acc[NT];
  for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 32; b++) {
    const uint8_t* p = w + b * bs;
    const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
    const __m256i aw = _mm256_sign_epi8(wq, wq);
    const float d = f16_scale(p);
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) {
      const __m256i av = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t].q + 32 * b)), wq);
      const __m256i dv = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, av), _mm256_set1_epi16(1));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dv), _mm256_set1_ps(d * a[t].d[b]), acc[t]);
    }
  }
  for (int t = 0; t < NT; t++) out[t] = hsum_ps256(acc[t]);
}

// out[t] = dot_q4_0 / dot_q5_0(w, a[t], n), t < NT.
template <int NT, bool kQ5>
inline void dotn_q4_q5_0(const uint8_t* w, const ActQ8* a, int64_t n, float* out) {
  constexpr int64_t bs = Q45_0<kQ5>::bs;
  constexpr int qs_off = Q45_0<kQ5>::qs_off, offset = Q45_0<kQ5>::offset;
  __m256 acc[NT];
  for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 32; b++) {
    const uint8_t* p = w + b * bs;
    __m256i v = q4_block_values(p + qs_off);
    if constexpr (kQ5) v = _mm256_or_si256(v, q5_high_bits(rd_u32(p + 2)));
    v = _mm256_sub_epi8(v, _mm256_set1_epi8(offset));
    const __m256i av = _mm256_sign_epi8(v, v);
    const float d = f16_scale(p);
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) {
      const __m256i x = _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t].q + 32 * b)), v);
      const __m256i dv = _mm256_madd_epi16(_mm256_maddubs_epi16(av, x), _mm256_set1_epi16(1));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dv), _mm256_set1_ps(d * a[t].d[b]), acc[t]);
    }
  }
  for (int t = 0; t < NT; t++) out[t] = hsum_ps256(acc[t]);
}

// isum + one token's integer lanes of 64 Q4_K values (lo, hi: their low and high nibbles, two
// sub-blocks; s_lo, s_hi: the two scales in every int16 lane; q: the token's 64 activations).
LLMI_FORCE_INLINE __m256i q4k_chunk(__m256i isum, __m256i lo, __m256i hi, __m256i s_lo, __m256i s_hi, const int8_t* q) {
  const __m256i p_lo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
  const __m256i p_hi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32)));
  return _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_madd_epi16(p_lo, s_lo), _mm256_madd_epi16(p_hi, s_hi)));
}

// out[t] = dot_q4_k(w, a[t], n), t < NT.
template <int NT>
inline void dotn_q4_k(const uint8_t* w, const ActQ8* a, int64_t n, float* out) {
  constexpr int64_t bs = sizeof(ref::BlockQ4_K);
  const __m256i m4 = _mm256_set1_epi8(15);
  __m256 acc[NT];
  __m128 accm[NT];
  for (int t = 0; t < NT; t++) {
    acc[t] = _mm256_setzero_ps();
    accm[t] = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < n / ref::kQK_K; b++) {
    const uint8_t* p = w + b * bs;
    uint64_t sc8, m8;
    q4k_unpack_scales(p + 4, &sc8, &m8);
    __m256i isum[NT];
    for (int t = 0; t < NT; t++) isum[t] = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 + 32 * c));
      const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      const __m256i s_lo = _mm256_set1_epi16(static_cast<short>((sc8 >> (16 * c)) & 0xFF));
      const __m256i s_hi = _mm256_set1_epi16(static_cast<short>((sc8 >> (16 * c + 8)) & 0xFF));
#pragma GCC unroll 4
      for (int t = 0; t < NT; t++) {
        isum[t] = q4k_chunk(isum[t], lo, hi, s_lo, s_hi, a[t].q + ref::kQK_K * b + 64 * c);
      }
    }
    const float d = f16_scale(p), dmin = f16_scale(p + 2);
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) {
      const float dx = a[t].d[b];
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * dx), acc[t]);
      accm[t] = _mm_fnmadd_ps(_mm_cvtepi32_ps(q4k_min_lanes(m8, a[t].sums + 16 * b)), _mm_set1_ps(dmin * dx), accm[t]);
    }
  }
  for (int t = 0; t < NT; t++) out[t] = hsum_ps256(acc[t]) + reduce4_ps(accm[t]);
}

// The integer lanes' start of a Q6_K super-block for one token: its -32 offsets, -32 * (sc_j * the
// sum of the activations of sub-block j) (sc: the 16 scales as int16, sums: the 16 sums of 16).
inline __m256i q6k_start(__m256i sc, const int16_t* sums) {
  const __m256i off = _mm256_madd_epi16(sc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums)));
  return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
}

// out[t] = dot_q6_k(w, a[t], n), t < NT.
template <int NT>
inline void dotn_q6_k(const uint8_t* w, const ActQ8* a, int64_t n, float* out) {
  constexpr int64_t bs = sizeof(ref::BlockQ6_K);
  __m256 acc[NT];
  for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / ref::kQK_K; b++) {
    const uint8_t* p = w + b * bs;
    const int8_t* scs = reinterpret_cast<const int8_t*>(p + 192);
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scs)));
    __m256i isum[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) {
      isum[t] = q6k_start(sc, a[t].sums + 16 * b);
    }
    for (int h = 0; h < 2; h++) {
      __m256i v[4];
      q6k_half_values(p, h, v);
      for (int k = 0; k < 4; k++) {
        const int j = 8 * h + 2 * k;  // sub-blocks j, j + 1
        const __m256i s = _mm256_set_m128i(_mm_set1_epi16(scs[j + 1]), _mm_set1_epi16(scs[j]));
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
          const __m256i pr = _mm256_maddubs_epi16(
              v[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t].q + ref::kQK_K * b + 128 * h + 32 * k)));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(pr, s));
        }
      }
    }
    const float d = f16_scale(p + 208);
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++)
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * a[t].d[b]), acc[t]);
  }
  for (int t = 0; t < NT; t++) out[t] = hsum_ps256(acc[t]);
}

// ---- up to 8 tokens at a time from a pack (AVX2; Q8_0, Q4_0, Q5_0, Q4_K, Q6_K) ----
// The activations of kTP tokens as one stream, block by block (a pack, made once per matmul): the
// kernels read them at fixed offsets from one pointer, so that the kTP accumulators stay in
// registers (dotn_*<8> kept the tokens' pointers on the stack and spilled). AMD EPYC (Zen 3), 1
// thread, bench-kernels' "each" column (gemm_rows), 128 tokens: Q8_0 25-30 -> 38-40 GMAC/s, Q5_0
// 22-28 -> 28-31, Q4_0 19-25 -> 34-35, Q4_K 34-43 -> 42-51, Q6_K 33-39 -> 41-51; prefill (pp128)
// of qwen3-0.6b Q8_0 53 -> 78 tokens/s, Q4_K_M 76 -> 88, gemma3-1b Q4_K_M (Q5_0 rows mostly) 34 -> 44
// (bench/RESULTS.md). The kernels take NT = 8, 4 or 2 of a pack's slots, so that 2..7 tokens (a
// batched decoding step of that many sessions; a matmul's last tokens) take them too, where they
// took dotn_*<4> and <2>: 4 tokens, Zen 3, Q4_K 36 -> 47-53 GMAC/s, Q6_K 21-40 -> 39-52.
constexpr int kTP = 8;
static_assert(kTBlock % kTP == 0, "gemm_rows: a task's tokens are whole packs");
// A pack of the tokens' blocks of blk values (32: q8_32, 256: q8_256, in kq_pair_order), nb per token:
// q [nb][kTP][blk] int8 | d [nb][kTP] f32 | for q8_256 s16 [nb][kTP][16] int16: the 16 sums of
// 16 values (ActQ8::sums) for Q6_K, or [nb][kTP][8] the 8 of 32 (ActQ8::sums32) for Q4_K (two
// tokens' in one vector). A pack may hold fewer than kTP tokens (the last of a matmul): the
// kernels then take NT < kTP of its slots.
struct ActPack {
  const int8_t* q;
  const float* d;
  const int16_t* s16;
};
inline uint64_t act_pack_bytes(int64_t blk, int64_t nb) {
  return static_cast<uint64_t>(nb * kTP * (blk + 4 + (blk == ref::kQK_K ? 32 : 0)));
}
// The parts of the pack at `at`.
inline ActPack act_pack_view(const uint8_t* at, int64_t blk, int64_t nb) {
  const float* d = reinterpret_cast<const float*>(at + nb * kTP * blk);
  return {reinterpret_cast<const int8_t*>(at), d,
          blk == ref::kQK_K ? reinterpret_cast<const int16_t*>(d + nb * kTP) : nullptr};
}
// A super-block's 256 activations in the order of the K-quant kernels' pairs (kq_pair_step_tokens):
// each 64, a = its first 32 and b = the next 32, as 32 bytes X then 32 bytes Y, whose 4-byte groups
// m are (a[4m], a[4m + 1], b[4m], b[4m + 1]) and (a[4m + 2], a[4m + 3], b[4m + 2], b[4m + 3]).
inline void kq_pair_order(const int8_t* src, int8_t* dst) {
  for (int c = 0; c < 4; c++) {
    const int8_t *xa = src + 64 * c, *xb = xa + 32;
    int8_t *X = dst + 64 * c, *Y = X + 32;
    for (int m = 0; m < 8; m++) {
      X[4 * m] = xa[4 * m], X[4 * m + 1] = xa[4 * m + 1], X[4 * m + 2] = xb[4 * m], X[4 * m + 3] = xb[4 * m + 1];
      Y[4 * m] = xa[4 * m + 2], Y[4 * m + 1] = xa[4 * m + 3], Y[4 * m + 2] = xb[4 * m + 2],
            Y[4 * m + 3] = xb[4 * m + 3];
    }
  }
}
// Packs a[0..nt) (nt <= kTP) into dst (act_pack_bytes(blk, nb) bytes, 4-byte aligned); s32: the
// sums of 32.
inline void pack_acts(const ActQ8* a, int nt, int64_t blk, int64_t nb, bool s32, uint8_t* dst) {
  const ActPack v = act_pack_view(dst, blk, nb);
  int8_t* q = const_cast<int8_t*>(v.q);
  float* d = const_cast<float*>(v.d);
  int16_t* s16 = const_cast<int16_t*>(v.s16);
  if (nt < kTP) std::memset(dst, 0, act_pack_bytes(blk, nb));  // (the kernel of NT > nt slots reads the rest)
  for (int64_t b = 0; b < nb; b++)
    for (int t = 0; t < nt; t++) {
      if (blk == ref::kQK_K)  // (the K-quant kernels' pairs)
        kq_pair_order(a[t].q + blk * b, q + (kTP * b + t) * blk);
      else
        std::memcpy(q + (kTP * b + t) * blk, a[t].q + blk * b, static_cast<size_t>(blk));
      d[kTP * b + t] = a[t].d[b];
      if (s16 && s32) std::memcpy(s16 + (kTP * b + t) * 8, a[t].sums32 + 8 * b, 16);
      if (s16 && !s32) std::memcpy(s16 + (kTP * b + t) * 16, a[t].sums + 16 * b, 32);
    }
}
// v, hidden from the optimizer: keeps GCC from merging the integer sums of consecutive steps (it
// added two steps' products together before adding them to the token's lanes: twice the live
// registers, and spills; bench-kernels q4_K, 8 tokens, Zen 3: 44-50 -> 51-57 GMAC/s).
LLMI_FORCE_INLINE void keep_lanes(__m256i& v) {
#if defined(__GNUC__)
  __asm__("" : "+x"(v));
#else
  (void)v;
#endif
}
// A compiler barrier: values stored before it are loaded again after it (GCC otherwise takes 4-byte
// broadcasts of a 32-byte store from the register through shuffles, which spill: dots_q32 Q8_0,
// Zen 3, bench-kernels, 8-128 tokens, 23-37 -> 28-42 GMAC/s).
LLMI_FORCE_INLINE void reload_from_memory() {
#if defined(__GNUC__)
  __asm__ volatile("" ::: "memory");
#endif
}
// The kTP products d(w) * d(a) of a block (scale8 of the row's fp16 scale at d16 and the tokens'
// dx; f16: f16_f32_table()), to broadcast from.
LLMI_FORCE_INLINE void pack_scales(const float* f16, const uint8_t* d16, __m256 dx, float* s) {
  _mm256_store_ps(s, scale8(f16, d16, dx));
}
// out[t] = the dot of row w with token t of the pack, t < NT, in the float order of dot_q8_0 /
// dot_q4_q5_0 (one FMA per block with d(w) * d(a) in 8 lanes of 4 products each, then the tree):
// values(p) gives the 32 signed values of the row's block at p. The products d(w) * d(a) of a
// block come from one multiply, each then a broadcast load beside its FMA (a multiply per token
// and block instead came out slower). (Two vpmaddwd of the values widened to int16 once per row,
// in place of a token's vpsignb + vpmaddubsw + vpmaddwd, came out slower on Zen 3: twice the
// activations to load.)
template <int NT, int64_t BS, class Values>
LLMI_FORCE_INLINE void dotp_q32(const uint8_t* w, ActPack pk, int64_t nb, Values&& values, float* out) {
  __m256 acc[NT];
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  const float* f16 = f16_f32_table();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * BS;
    const __m256i v = values(p);
    const __m256i av = _mm256_sign_epi8(v, v);
    alignas(32) float s[kTP];
    pack_scales(f16, p, _mm256_loadu_ps(pk.d + kTP * b), s);
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) {
      const __m256i x =
          _mm256_sign_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pk.q + (kTP * b + t) * 32)), v);
      const __m256i dv = _mm256_madd_epi16(_mm256_maddubs_epi16(av, x), ones);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dv), _mm256_broadcast_ss(s + t), acc[t]);
    }
  }
#pragma GCC unroll 8  // (every loop over acc unrolled: else acc lives in memory)
  for (int t = 0; t < NT; t++) out[t] = hsum_ps256(acc[t]);
}
// int32 element i (< 4) of each 128-bit lane of v in all 4 of that lane's elements (an immediate once
// the loop over i is unrolled).
LLMI_FORCE_INLINE __m256i bcast32_lanes(__m256i v, int i) {
  switch (i) {
    case 0: return _mm256_shuffle_epi32(v, 0x00);
    case 1: return _mm256_shuffle_epi32(v, 0x55);
    case 2: return _mm256_shuffle_epi32(v, 0xAA);
    default: return _mm256_shuffle_epi32(v, 0xFF);
  }
}
// The pairs x, y of 32 values a and 32 values b (kq_pair_order): x's 4-byte group m is (a[4m],
// a[4m + 1], b[4m], b[4m + 1]), y's (a[4m + 2], a[4m + 3], b[4m + 2], b[4m + 3]).
LLMI_FORCE_INLINE __m256i pair_x(__m256i a, __m256i b) {
  return _mm256_blend_epi16(a, _mm256_slli_epi32(b, 16), 0xAA);
}
LLMI_FORCE_INLINE __m256i pair_y(__m256i a, __m256i b) {
  return _mm256_blend_epi16(_mm256_srli_epi32(a, 16), b, 0xAA);
}
// isum[t] += token t's integer lanes of 64 K-quant values, 32 of sub-block a and 32 of sub-block b,
// t < NT: x, y the row's values as pairs (pair_x, pair_y), s the scales as int16 pairs (s_a, s_b)
// in each int32, q token 0's 64 activations in kq_pair_order (token t's 256 bytes on). The one
// vpaddw of a token's two vpmaddubsw gives int16 lanes of 4 products each, of a, of b, of a, ...,
// and the one vpmaddwd with s the int32 lanes of dot_q4_k / dot_q6_k (4 products of a times s_a,
// plus 4 of b times s_b: what a vpmaddwd per sub-block gives in two, in integers, so the same bits).
// 4 products stay within int16: Q4_K 4 * 15 * 128, Q6_K 4 * 63 * 128 = 32256. Per token and 64
// values 2 vpmaddubsw, a vpaddw, a vpmaddwd and a vpaddd, where one sub-block at a time took 6
// instructions, 4 of them on the two pipes of the multiplies; the row pays 4 more (the pairs).
// Zen 3, bench-kernels' "each" column, the fastest run, the models' shapes: Q4_K 52-58 -> 60-67
// GMAC/s with 8 tokens, 49-55 -> 50-57 with 4; Q6_K 60-64 -> 63-67 and 50-55 -> 52-57; a matrix
// that stays in L2 ("small") -2% to +9% (bench/RESULTS.md).
template <int NT>
LLMI_FORCE_INLINE void kq_pair_step_tokens(__m256i* isum, __m256i x, __m256i y, __m256i s, const int8_t* q) {
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) {
    const int8_t* qt = q + 256 * t;
    const __m256i pa = _mm256_maddubs_epi16(x, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qt)));
    const __m256i pb = _mm256_maddubs_epi16(y, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qt + 32)));
    isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_add_epi16(pa, pb), s));
    keep_lanes(isum[t]);
  }
}
// out[t] = dot_q4_k(w, token t of the pack), t < NT: per super-block the integer lanes of each
// token (the row's nibbles and scales made once for all NT, two sub-blocks at a time), then
// dot_q4_k's two FMAs. The 4 lanes of Q4_K's mins of tokens 2i and 2i + 1 share one vector
// (independent lanes: the same bits, half the work).
template <int NT>
LLMI_FORCE_INLINE void dotp_q4_k(const uint8_t* w, ActPack pk, int64_t nb, float* out) {
  static_assert(NT % 2 == 0, "dotp_q4_k: tokens in pairs");
  constexpr int64_t bs = sizeof(ref::BlockQ4_K);
  const __m256i m4 = _mm256_set1_epi8(15);
  __m256 acc[NT], accm[NT / 2];  // accm[i]: tokens 2i (low half), 2i + 1 (high half)
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int i = 0; i < NT / 2; i++) accm[i] = _mm256_setzero_ps();
  const float* f16 = f16_f32_table();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    const __m128i scm = q4k_scales_mins(p + 4);
    const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm));  // the 8 scales as int16
    const int8_t* qb = pk.q + kTP * b * 256;
    __m256i isum[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) isum[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
      // the 64 nibbles of sub-blocks 2c (low) and 2c + 1 (high) as pair_x / pair_y would make them
      // from the two, straight from the bytes (x: v's low int16 of each int32 and v << 12, whose high
      // int16 is that of the high nibbles of the same two bytes; y: v >> 16 and v >> 4), then masked;
      // their scales are int32 element c of sc
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 + 32 * c));
      const __m256i x = _mm256_and_si256(_mm256_blend_epi16(v, _mm256_slli_epi32(v, 12), 0xAA), m4);
      const __m256i y =
          _mm256_and_si256(_mm256_blend_epi16(_mm256_srli_epi32(v, 16), _mm256_srli_epi32(v, 4), 0xAA), m4);
      kq_pair_step_tokens<NT>(isum, x, y, bcast32_lanes(sc, c), qb + 64 * c);
    }
    const __m256 dx = _mm256_loadu_ps(pk.d + kTP * b);
    alignas(32) float s[kTP];
    pack_scales(f16, p, dx, s);
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++)
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_broadcast_ss(s + t), acc[t]);
    const __m256 sm = _mm256_mul_ps(_mm256_set1_ps(f16_scale(p + 2)), dx);
    const __m256i mins = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_unpackhi_epi64(scm, scm)));
#pragma GCC unroll 4
    for (int i = 0; i < NT / 2; i++) {
      const __m256i ml =
          _mm256_madd_epi16(mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pk.s16 + (kTP * b + 2 * i) * 8)));
      const __m256 smi = _mm256_permutevar8x32_ps(
          sm, _mm256_setr_epi32(2 * i, 2 * i, 2 * i, 2 * i, 2 * i + 1, 2 * i + 1, 2 * i + 1, 2 * i + 1));
      accm[i] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ml), smi, accm[i]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) {
    const __m128 m = t % 2 ? _mm256_extractf128_ps(accm[t / 2], 1) : _mm256_castps256_ps128(accm[t / 2]);
    out[t] = hsum_ps256(acc[t]) + reduce4_ps(m);
  }
}
// out[t] = dot_q6_k(w, token t of the pack), t < NT: as dotp_q4_k, dot_q6_k's one FMA per
// super-block; the row's 32 values of a step made from its bits at that step.
template <int NT>
LLMI_FORCE_INLINE void dotp_q6_k(const uint8_t* w, ActPack pk, int64_t nb, float* out) {
  constexpr int64_t bs = sizeof(ref::BlockQ6_K);
  __m256 acc[NT];
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
  const float* f16 = f16_f32_table();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192));
    const __m256i sc = _mm256_cvtepi8_epi16(s8);
    // the even scales as int16 in the low lane, the odd in the high (dot_q6_k's): step k of half h
    // (sub-blocks 8h + 2k, + 1) takes element 4h + k of each lane
    const __m256i eo =
        _mm256_cvtepi8_epi16(_mm_shuffle_epi8(s8, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
    const int8_t* qb = pk.q + kTP * b * 256;
    __m256i isum[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++) isum[t] = q6k_start(sc, pk.s16 + (kTP * b + t) * 16);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      const uint8_t* ql = p + 64 * h;
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h));
      // steps 2j and 2j + 1 as the pairs of kq_pair_step_tokens, their values made at that step
      // (q6k_half_values' four for the half at once: 0-3% slower, bench-kernels q6_K, Zen 3); their
      // scales are elements 4h + 2j, + 1 of each lane of eo, i.e. its int32 element 2h + j
#pragma GCC unroll 2
      for (int j = 0; j < 2; j++) {
        const __m256i va = q6k_step_values(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql)), qh, 2 * j);
        const __m256i vb =
            q6k_step_values(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32)), qh, 2 * j + 1);
        kq_pair_step_tokens<NT>(isum, pair_x(va, vb), pair_y(va, vb), bcast32_lanes(eo, 2 * h + j),
                                qb + 128 * h + 64 * j);
      }
    }
    alignas(32) float s[kTP];
    pack_scales(f16, p + 208, _mm256_loadu_ps(pk.d + kTP * b), s);
#pragma GCC unroll 8
    for (int t = 0; t < NT; t++)
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_broadcast_ss(s + t), acc[t]);
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; t++) out[t] = hsum_ps256(acc[t]);
}
// The types that take packs, and their kernel (kept out of gemm_rows' loop).
template <DType T>
constexpr bool kPacks =
    T == DType::q8_0 || T == DType::q4_0 || T == DType::q5_0 || T == DType::q4_K || T == DType::q6_K;
template <DType T, int NT>
LLMI_NOINLINE inline void dotp(const uint8_t* w, ActPack pk, int64_t n, float* out) {
  if constexpr (T == DType::q4_K) {
    dotp_q4_k<NT>(w, pk, n / ref::kQK_K, out);
  } else if constexpr (T == DType::q6_K) {
    dotp_q6_k<NT>(w, pk, n / ref::kQK_K, out);
  } else if constexpr (T == DType::q8_0) {
    dotp_q32<NT, sizeof(ref::BlockQ8_0)>(
        w, pk, n / 32, [](const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2)); },
        out);
  } else {
    constexpr bool kQ5 = T == DType::q5_0;
    dotp_q32<NT, Q45_0<kQ5>::bs>(
        w, pk, n / 32,
        [](const uint8_t* p) {
          __m256i v = q4_block_values(p + Q45_0<kQ5>::qs_off);
          if constexpr (kQ5) v = _mm256_or_si256(v, q5_high_bits(rd_u32(p + 2)));
          return _mm256_sub_epi8(v, _mm256_set1_epi8(Q45_0<kQ5>::offset));
        },
        out);
  }
}
// The dots of row w with the first nt (2 <= nt <= kTP) tokens of a pack: the kernel of the
// fewest slots that hold them (out has room for kTP).
template <DType T>
inline void dotp_n(const uint8_t* w, ActPack pk, int nt, int64_t n, float* out) {
  if (nt > 4)
    dotp<T, 8>(w, pk, n, out);
  else if (nt > 2)
    dotp<T, 4>(w, pk, n, out);
  else
    dotp<T, 2>(w, pk, n, out);
}

// ---- the block-sum order: 6 or more tokens of Q8_0, Q4_0, Q5_0 (AVX2, MatmulScratch::block_sums) ----
// The AMX tiles' float order (gemm_amx_q32_task) on AVX2: for each (row, token) the integer sum of
// each 32-block, exact, then one chain over the blocks, acc = fma(float(sum_b), d_row_b * d_token_b,
// acc). The 8 tokens of a pack lie in the 8 lanes of a register, each as 4 activations of one
// 4-value step; a row's 4 values of that step, broadcast to every lane, multiply all 8 at once
// (vpmaddubsw, then vpmaddwd into the lanes' int32 sums), so that each (row, block) ends in one FMA
// for 8 tokens, where llama.cpp's order (dotp_q32) takes one per token, and its lanes' tree. Zen 3,
// one core, bench-kernels' gemm against gemm-exact (the models' shapes, 8-512 tokens): Q5_0 31-43
// against 24-33 GMAC/s (1.26-1.55x), Q4_0 mostly 1.15-1.3x, Q8_0 about 1.1x (bench/RESULTS.md; Q8_0
// with its values widened to int16 and one vpmaddwd per 2 values came out 0.8x). Q8_0 takes
// |w| (broadcast) times a * sign(w), as dot_q8_0 takes |w| times a * sign(w): exact for any int8
// value (-128 too; 2 x 128 x 127 fits int16). Q4_0 and Q5_0 multiply their unsigned values (0..15,
// 0..31) with the activations and take offset * sum(a) off the block's sum, which makes the same
// integer as sum((v - offset) * a); Q5_0 sums 4 steps in int16 (4 x 2 x 31 x 127 < 32768), Q4_0 all
// 8 (8 x 2 x 15 x 127). Matrix products of one input (matmul, 25_weight_kernels) take it when the
// scratch asks; products of independent tokens (matmul_each: batched decoding) keep llama.cpp's order.
constexpr int64_t kSumsMinTokens = 6;  // as the tiles (kGemmMinTokens)
template <DType T>
constexpr bool kSumsType = T == DType::q8_0 || T == DType::q4_0 || T == DType::q5_0;
// A sums pack: per 32-block of the kTP tokens, 256 bytes of their values, [8 steps][kTP tokens][4
// int8], then d [kTP] f32 and the sums of the block's 32 activations [kTP] int32 (0 for tokens past
// the last).
constexpr int64_t kSumsBlockBytes = 256 + 8 * kTP;
inline uint64_t sums_pack_bytes(int64_t nb) {
  return static_cast<uint64_t>(nb * kSumsBlockBytes);
}
// Packs a[0..nt) (nt <= kTP) into dst (sums_pack_bytes(nb) bytes, 4-byte aligned).
inline void pack_sums(const ActQ8* a, int nt, int64_t nb, uint8_t* dst) {
  if (nt < kTP) std::memset(dst, 0, sums_pack_bytes(nb));
  for (int64_t b = 0; b < nb; b++) {
    uint8_t* p = dst + b * kSumsBlockBytes;
    float* d = reinterpret_cast<float*>(p + 256);
    int32_t* s = reinterpret_cast<int32_t*>(p + 256 + 4 * kTP);
    for (int t = 0; t < nt; t++) {
      const int8_t* x = a[t].q + 32 * b;
      int32_t sum = 0;
      for (int j = 0; j < 32; j++) sum += x[j];
      for (int j = 0; j < 8; j++) std::memcpy(p + 32 * j + 4 * t, x + 4 * j, 4);
      d[t] = a[t].d[b];
      s[t] = sum;
    }
  }
}
// out[i][t] for kSumsRows rows (w[i]: the row's start; the same row may come twice) and the kTP
// tokens of a sums pack, nb blocks of 32.
constexpr int kSumsRows = 4;
template <DType T>
LLMI_NOINLINE inline void dots_q32(const uint8_t* const* w, const uint8_t* pk, int64_t nb, float (*out)[kTP]) {
  constexpr bool kQ8 = T == DType::q8_0, kQ5 = T == DType::q5_0;
  constexpr int64_t bs = kQ8 ? sizeof(ref::BlockQ8_0) : Q45_0<kQ5>::bs;
  const __m256i ones = _mm256_set1_epi16(1);
  const float* f16 = f16_f32_table();
  __m256 acc[kSumsRows];
#pragma GCC unroll 4
  for (int i = 0; i < kSumsRows; i++) acc[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* pb = pk + b * kSumsBlockBytes;
    // the rows' values of the block, to broadcast 4 at a time: Q8_0 |w| (w from the file), Q4_0 /
    // Q5_0 unsigned
    alignas(32) uint8_t v[kSumsRows][32];
#pragma GCC unroll 4
    for (int i = 0; i < kSumsRows; i++) {
      const uint8_t* p = w[i] + b * bs;
      __m256i x;
      if constexpr (kQ8) {
        x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
        x = _mm256_sign_epi8(x, x);
      } else {
        x = q4_block_values(p + Q45_0<kQ5>::qs_off);
        if constexpr (kQ5) x = _mm256_or_si256(x, q5_high_bits(rd_u32(p + 2)));
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(v[i]), x);
    }
    reload_from_memory();  // (broadcast loads from v, not shuffles of registers)
    __m256i is[kSumsRows];
    if constexpr (kQ8) {
#pragma GCC unroll 8
      for (int j = 0; j < 8; j++) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 32 * j));
#pragma GCC unroll 4
        for (int i = 0; i < kSumsRows; i++) {
          const __m256i ws = _mm256_set1_epi32(static_cast<int32_t>(rd_u32(w[i] + b * bs + 2 + 4 * j)));
          const __m256i p =
              _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi32(static_cast<int32_t>(rd_u32(v[i] + 4 * j))),
                                                     _mm256_sign_epi8(a, ws)),
                                ones);
          is[i] = j ? _mm256_add_epi32(is[i], p) : p;
        }
      }
    } else {
      constexpr int kSteps16 = kQ5 ? 4 : 8;  // steps summed in int16
#pragma GCC unroll 2
      for (int h = 0; h < 8 / kSteps16; h++) {
        __m256i s16[kSumsRows];
#pragma GCC unroll 8
        for (int q = 0; q < kSteps16; q++) {
          const int j = h * kSteps16 + q;
          const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 32 * j));
#pragma GCC unroll 4
          for (int i = 0; i < kSumsRows; i++) {
            const __m256i m = _mm256_maddubs_epi16(_mm256_set1_epi32(static_cast<int32_t>(rd_u32(v[i] + 4 * j))), a);
            s16[i] = q ? _mm256_add_epi16(s16[i], m) : m;
          }
        }
#pragma GCC unroll 4
        for (int i = 0; i < kSumsRows; i++) {
          const __m256i m = _mm256_madd_epi16(s16[i], ones);
          is[i] = h ? _mm256_add_epi32(is[i], m) : m;
        }
      }
      const __m256i off = _mm256_mullo_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + 256 + 4 * kTP)),
                                             _mm256_set1_epi32(Q45_0<kQ5>::offset));
#pragma GCC unroll 4
      for (int i = 0; i < kSumsRows; i++) is[i] = _mm256_sub_epi32(is[i], off);
    }
    const __m256 da = _mm256_loadu_ps(reinterpret_cast<const float*>(pb + 256));
#pragma GCC unroll 4
    for (int i = 0; i < kSumsRows; i++)
      acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[i]), _mm256_mul_ps(_mm256_set1_ps(f16[rd_u16(w[i] + b * bs)]), da),
                               acc[i]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < kSumsRows; i++) _mm256_storeu_ps(out[i], acc[i]);
}
// Tokens t0..t0+nt-1 (1 <= nt <= kTG) of row r: WK::dotn on all of them (WK::dot for one).
template <class WK, int NT = kTG>
inline void dotn_tokens(const RowOperands& o, const uint8_t* wr, int64_t r, int64_t t0, int64_t nt, float* y,
                        int64_t ldy) {
  if constexpr (NT > 1) {
    if (nt < NT) return dotn_tokens<WK, NT - 1>(o, wr, r, t0, nt, y, ldy);
    ActQ8 a[NT];
    float out[NT];
    for (int u = 0; u < NT; u++) a[u] = o.in.row(WK::act, t0 + u);
    WK::template dotn<NT>(wr, a, o.n, out);
    for (int u = 0; u < NT; u++) y[(t0 + u) * ldy + r] = out[u];
  } else {
    y[t0 * ldy + r] = WK::dot(o, wr, r, t0);
  }
}

// gemm_rows in two parts, so that the products of several matrices with one input can be one job
// of the pool (matmul_each_group, 25_weight_kernels: batched decoding): the packs of the input's
// tokens, made once for every matrix of their pack form (gemm_rows_pack), then the tasks of each
// matrix over them (gemm_rows_part).
// The tokens WK takes from packs: tokens 0 .. tp - 1, every one but a lone last (T % kTP == 1: it
// takes dotn); 0 for the types without packs (and Q4_K without the sums of 32 it packs).
template <class WK>
inline int64_t gemm_rows_tp(const MatmulInput& in) {
  if constexpr (kPacks<WK::type>) {
    const int64_t T = in.n_tokens();
    if (T >= 2 && (WK::type != DType::q4_K || in.row(WK::act, 0).sums32)) return T % kTP == 1 ? T - 1 : T;
  }
  return 0;
}
// Which packs WK reads: the types of one form share them (-1: none).
template <class WK>
constexpr int pack_form() {
  if constexpr (!kPacks<WK::type>) return -1;
  return WK::act != ActForm::q8_256 ? 0 : WK::type == DType::q4_K ? 1 : 2;
}
// Bytes of the packs of tp tokens of WK's input (n values a token).
template <class WK>
inline uint64_t gemm_rows_pack_bytes(int64_t n, int64_t tp) {
  const int64_t blk = WK::act == ActForm::q8_256 ? ref::kQK_K : 32;
  return static_cast<uint64_t>((tp + kTP - 1) / kTP) * act_pack_bytes(blk, n / blk);
}
// Bytes of the sums packs of T tokens (n values a token).
inline uint64_t gemm_rows_sums_bytes(int64_t n, int64_t T) {
  return static_cast<uint64_t>((T + kTP - 1) / kTP) * sums_pack_bytes(n / 32);
}
// Sizes scratch.xk for gemm_rows of up to max_tokens tokens; false when out of memory.
template <class WK>
inline bool gemm_rows_reserve(const TensorView& w, int64_t max_tokens, MatmulScratch& scratch) {
  if constexpr (!kPacks<WK::type>) return true;
  if constexpr (kSumsType<WK::type>)
    if (max_tokens >= kSumsMinTokens && !scratch.xk.reserve(gemm_rows_sums_bytes(w.ne[0], max_tokens))) return false;
  return max_tokens < 2 || scratch.xk.reserve(gemm_rows_pack_bytes<WK>(w.ne[0], max_tokens));
}
// Packs tokens 0 .. tp - 1 of the input into dst (gemm_rows_pack_bytes; sums: gemm_rows_sums_bytes,
// pack_sums): pack k the kTP from k * kTP, the last fewer.
template <class WK>
inline void gemm_rows_pack(const MatmulInput& in, int64_t tp, uint8_t* dst, ThreadPool& pool, bool sums = false) {
  const int64_t blk = WK::act == ActForm::q8_256 ? ref::kQK_K : 32, nb = in.n() / blk;
  const uint64_t pb = sums ? sums_pack_bytes(nb) : act_pack_bytes(blk, nb);
  pool.parallel_for(static_cast<int>((tp + kTP - 1) / kTP), [&](int k, int) {
    const int nt = static_cast<int>(std::min<int64_t>(kTP, tp - k * kTP));
    ActQ8 a[kTP];
    for (int u = 0; u < nt; u++) a[u] = in.row(WK::act, k * kTP + u);
    uint8_t* at = dst + static_cast<uint64_t>(k) * pb;
    if (sums)
      pack_sums(a, nt, nb, at);
    else
      pack_acts(a, nt, blk, nb, WK::type == DType::q4_K, at);
  });
}
template <class WK>
inline void gemm_rows_task(const MatmulPart& part, const MatmulInput& in, int task);
// gemm_rows' tasks on w for T tokens, tokens 0 .. tp - 1 from the packs at `packs`: chunks of rows
// (as gemv: long runs stream faster) times blocks of tokens.
template <class WK>
inline MatmulPart gemm_rows_part(const TensorView& w, int64_t T, float* y, int64_t ldy, int threads, int64_t tp,
                                 const uint8_t* packs) {
  const int64_t rows = w.rows();
  const uint64_t rb = std::max<uint64_t>(1, weight_row_bytes(w));
  int64_t chunk = std::max<int64_t>(rows / (2 * static_cast<int64_t>(threads)), static_cast<int64_t>(65536 / rb));
  chunk = std::clamp<int64_t>(chunk, 1, std::max<int64_t>(1, rows));
  const int64_t n_rt = (rows + chunk - 1) / chunk, n_tb = (T + kTBlock - 1) / kTBlock;
  return {&w, y, ldy, chunk, static_cast<int>(n_rt * n_tb), &gemm_rows_task<WK>, n_tb, tp, packs};
}
template <class WK>
inline void gemm_rows_task(const MatmulPart& part, const MatmulInput& in, int task) {
  const TensorView& w = *part.w;
  float* const y = part.y;
  const int64_t rows = w.rows(), T = in.n_tokens(), chunk = part.chunk, n_tb = part.n_tb, ldy = part.ldy;
  const uint64_t rb = std::max<uint64_t>(1, weight_row_bytes(w));
  const RowOperands o = row_operands(w, in, true);
  const int64_t r0 = (task / n_tb) * chunk, r1 = std::min(rows, r0 + chunk);
  const int64_t t0 = (task % n_tb) * kTBlock, t1 = std::min(T, t0 + kTBlock);
  int64_t t = t0;
  if constexpr (kSumsType<WK::type>) {
    if (part.sums) {  // every token from the sums packs, kSumsRows rows at a time (runs as below)
      const int64_t nb = o.n / 32;
      const uint64_t pb = sums_pack_bytes(nb);
      const int64_t run = std::max<int64_t>(kSumsRows, static_cast<int64_t>(131072 / rb));
      for (int64_t ra = r0; ra < r1; ra += run)
        for (int64_t k = t0 / kTP; k * kTP < t1; k++) {
          const int nt = static_cast<int>(std::min<int64_t>(kTP, T - k * kTP));
          for (int64_t r = ra; r < std::min(r1, ra + run); r += kSumsRows) {
            const int nr = static_cast<int>(std::min<int64_t>(kSumsRows, std::min(r1, ra + run) - r));
            const uint8_t* wr[kSumsRows];
            for (int i = 0; i < kSumsRows; i++) wr[i] = w.data + static_cast<uint64_t>(r + std::min(i, nr - 1)) * rb;
            float out[kSumsRows][kTP];
            dots_q32<WK::type>(wr, part.packs + static_cast<uint64_t>(k) * pb, nb, out);
            for (int u = 0; u < nt; u++)
              for (int i = 0; i < nr; i++) y[(k * kTP + u) * ldy + r + i] = out[i][u];
          }
        }
      return;
    }
  }
  if constexpr (kPacks<WK::type>) {
    // the block's packs (kTBlock is a multiple of kTP), each over runs of the task's rows of
    // about 128 KiB, so that a run stays in L2 while the packs go over it
    const int64_t tp = part.tp, blk = WK::act == ActForm::q8_256 ? ref::kQK_K : 32, nb = o.n / blk;
    const uint64_t pb = act_pack_bytes(blk, nb);
    const int64_t k0 = t0 / kTP, k1 = std::max(k0, (std::min(t1, tp) + kTP - 1) / kTP);
    const int64_t run = std::max<int64_t>(1, static_cast<int64_t>(131072 / rb));
    for (int64_t ra = r0; ra < r1 && k1 > k0; ra += run)
      for (int64_t k = k0; k < k1; k++) {
        const ActPack pk = act_pack_view(part.packs + static_cast<uint64_t>(k) * pb, blk, nb);
        const int nt = static_cast<int>(std::min<int64_t>(kTP, tp - k * kTP));
        for (int64_t r = ra; r < std::min(r1, ra + run); r++) {
          float out[kTP];
          dotp_n<WK::type>(w.data + static_cast<uint64_t>(r) * rb, pk, nt, o.n, out);
          for (int u = 0; u < nt; u++) y[(k * kTP + u) * ldy + r] = out[u];
        }
      }
    t = std::max(t0, std::min(t1, tp));
  }
  for (int64_t r = r0; r < r1; r++) {
    const uint8_t* wr = w.data + static_cast<uint64_t>(r) * rb;
    // groups of kTG tokens, the rest (fewer) in one smaller group
    for (int64_t u = t; u < t1; u += kTG) dotn_tokens<WK>(o, wr, r, u, std::min<int64_t>(kTG, t1 - u), y, ldy);
  }
}
// Y = X W^T for T >= 2 tokens and a quantized W (WK::dotn), row by row over token groups (see
// above); for the types of kPacks the tokens in packs of kTP, the last with the rest if more than
// one (in scratch.xk where it can hold them), through dotp, any other through dotn.
template <class WK>
inline void gemm_rows(const TensorView& w, const MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool,
                      MatmulScratch& scratch, bool block_sums = false) {
  if constexpr (kSumsType<WK::type>) {
    const int64_t T = in.n_tokens();
    if (block_sums && T >= kSumsMinTokens && scratch.xk.reserve(gemm_rows_sums_bytes(in.n(), T))) {
      uint8_t* packs = scratch.xk.as<uint8_t>();
      gemm_rows_pack<WK>(in, T, packs, pool, true);
      MatmulPart part = gemm_rows_part<WK>(w, T, y, ldy, pool.size(), T, packs);
      part.sums = true;
      pool.parallel_for(part.n_tasks, [&](int task, int) { gemm_rows_task<WK>(part, in, task); });
      return;
    }
  }
  int64_t tp = gemm_rows_tp<WK>(in);
  if (tp > 0 && !scratch.xk.reserve(gemm_rows_pack_bytes<WK>(in.n(), tp))) tp = 0;
  if (tp > 0) gemm_rows_pack<WK>(in, tp, scratch.xk.as<uint8_t>(), pool);
  const MatmulPart part = gemm_rows_part<WK>(w, in.n_tokens(), y, ldy, pool.size(), tp, scratch.xk.as<uint8_t>());
  pool.parallel_for(part.n_tasks, [&](int task, int) { gemm_rows_task<WK>(part, in, task); });
}
#endif  // LLMI_SIMD_AVX2 && !LLMI_SIMD_AVX512

#if defined(LLMI_SIMD_AVX512)
// acc + sums of 4 products (unsigned w bytes x signed a bytes) per int32 lane.
inline __m512i dpbusd(__m512i acc, __m512i w, __m512i a) {
#if defined(LLMI_SIMD_VNNI)
  return _mm512_dpbusd_epi32(acc, w, a);
#else
  // vpmaddubsw saturates for bytes above 127 (Q8_0 + 128): split them into nibbles
  const __m512i m4 = _mm512_set1_epi8(15);
  __m512i lo = _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_and_si512(w, m4), a), _mm512_set1_epi16(1));
  __m512i hi =
      _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(w, 4), m4), a), _mm512_set1_epi16(16));
  return _mm512_add_epi32(acc, _mm512_add_epi32(lo, hi));
#endif
}

// The 32 values of a 32-block at blk (Q8_0, Q4_0, Q5_0) as unsigned bytes in element order: Q8_0
// q + 128, Q4_0 0..15, Q5_0 0..31 (their offsets: PanelFormat::offset).
template <DType T>
inline __m256i q32_block_values(const uint8_t* blk) {
  if constexpr (T == DType::q8_0) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)),
                            _mm256_set1_epi8(static_cast<char>(0x80)));
  } else if constexpr (T == DType::q4_0) {
    return q4_block_values(blk + 2);
  } else {
    static_assert(T == DType::q5_0, "q32_block_values: Q8_0, Q4_0 or Q5_0");
    return _mm256_or_si256(q4_block_values(blk + 6), q5_high_bits(rd_u32(blk + 2)));
  }
}

// ---- the single tokens of several sequences times K-quant rows (AVX-512, batched decoding) ----
// gemv_each_group: a task takes a chunk of rows; each row's super-block is unpacked once into
// registers (its values and scale vectors, as dot_q4_k / dot_q6_k unpack it) for a group of up to
// kGroup tokens, each of which then takes its vpmaddubsw + vpdpwssd. The integer lanes are exact,
// so any order gives the same int32s; each token's float operations are those of the one-token dot
// in the same order (per super-block one 8-lane FMA with d(w) * d(a), Q4_K's 4-lane mins with
// -dmin(w) * d(a); the same final trees), so every result has the bits of dot_q4_k / dot_q6_k. The
// float lanes of 2 tokens (Q4_K's mins: 4) share one zmm: the lanes are independent, so packing
// them changes no bit and halves (quarters) the float work, the larger part of a token's share.
// Where the CPU streams better with help (cpu_streams_ahead), the row kAheadRows ahead is asked
// into L2 a super-block at a time as this row is read: Intel Xeon (Sapphire Rapids), 2 threads,
// 4 sessions of qwen3-0.6b Q4_K_M 106 -> 150 tokens/s, llama3.2-1b 61 -> 85 (bench/RESULTS.md).
constexpr int kGroup = 8;  // tokens per unpacked super-block

// The tokens of a group per super-block, in the lanes of dotg_q4_k / dotg_q6_k (prepared once per
// matmul; missing tokens of a last group repeat its last token).
struct KqGroupBlock {
  alignas(64) float dxp[kGroup / 2][16];  // token pair p: d(a) of token 2p in lanes 0..7, 2p + 1 in 8..15
  alignas(64) float dxq[kGroup / 4][16];  // token quad q: d(a) of token 4q + j in lanes 4j..4j+3
  // Q4_K: quad q: the activation sums of the 8 sub-blocks (32 values) of token 4q + j in int16
  // lanes 8j..8j+7; Q6_K: pair p: the 16 sums of 16 values of token 2p + j in lanes 16j..16j+15
  alignas(64) int16_t s[kGroup / 2][32];
  // Q4_K: token u's 256 activations with the middle two 32s of each 128 swapped (sub-blocks 0, 2, 1,
  // 3, 4, 6, 5, 7), the order of the low and high nibbles of the values' 64-byte halves
  alignas(64) int8_t q[kGroup][ref::kQK_K];
};

// The tokens of a group a kernel reads: nt (<= kGroup) rounded up to 2, 4 or kGroup (dotg's NT).
inline int group_width(int64_t nt) {
  return nt <= 2 ? 2 : nt <= 4 ? 4 : kGroup;
}

// The group of tokens t0..t0+nt-1 (nt <= kGroup) over nb super-blocks into g[0..nb).
template <bool kQ4K>
inline void kq_group_prepare(const MatmulInput& in, int64_t t0, int64_t nt, int64_t nb, KqGroupBlock* g) {
  for (int u = 0; u < std::max(4, group_width(nt)); u++) {  // (a quad at least: the lanes of dxq and Q4_K's s)
    const ActQ8 a = in.row(ActForm::q8_256, t0 + std::min<int64_t>(u, nt - 1));
    for (int64_t b = 0; b < nb; b++) {
      KqGroupBlock& k = g[b];
      for (int l = 0; l < 8; l++) k.dxp[u / 2][8 * (u % 2) + l] = a.d[b];
      for (int l = 0; l < 4; l++) k.dxq[u / 4][4 * (u % 4) + l] = a.d[b];
      const int16_t* s16 = a.sums + 16 * b;
      if constexpr (kQ4K) {
        for (int i = 0; i < 8; i++) k.s[u / 4][8 * (u % 4) + i] = static_cast<int16_t>(s16[2 * i] + s16[2 * i + 1]);
        q8_nibble_order(a.q + ref::kQK_K * b, k.q[u]);
      } else {
        for (int i = 0; i < 16; i++) k.s[u / 2][16 * (u % 2) + i] = s16[i];
      }
    }
  }
}

// Token pair (x, y)'s 8 int32 lanes of a super-block (the two halves of each added): x's in 0..7.
inline __m512i kq_pair_lanes(__m512i x, __m512i y) {
  return _mm512_add_epi32(_mm512_shuffle_i64x2(x, y, 0x44), _mm512_shuffle_i64x2(x, y, 0xEE));
}

// out[t] = dot_q4_k(w, a[t], 256 * nb), t < NT (2, 4 or 8); g: the group of a (kq_group_prepare),
// whose copy of the activations in nibble order (KqGroupBlock::q) it reads instead of a's, so that
// the values need no shuffles: AMD EPYC (Zen 4), 1 thread, bench-kernels' "each" q4_K 49-58 ->
// 55-67 GMAC/s for 2 tokens, 65-78 -> 71-83 for 4, 73-78 -> 78-85 for 8; 2 threads, 2 sessions of
// qwen3-0.6b Q4_K_M 113-122 -> 124-130 tokens/s, 4 sessions 151-157 -> 157-161.
template <int NT>
inline void dotg_q4_k(const uint8_t* w, [[maybe_unused]] const ActQ8* a, const KqGroupBlock* g, int64_t nb, float* out,
                      const uint8_t* next) {
  constexpr int64_t bs = sizeof(ref::BlockQ4_K);
  constexpr int NQ = (NT + 3) / 4;
  const __m512i m4 = _mm512_set1_epi8(15);
  // the scale vectors of 128 weights, as int16 lanes: low nibbles, lanes 0..15 sub-block 0 (plus 4c),
  // lanes 16..31 sub-block 2; high nibbles, 1 and 3
  const __m512i sel0 =
      _mm512_set_epi64(0x0002000200020002, 0x0002000200020002, 0x0002000200020002, 0x0002000200020002, 0, 0, 0, 0);
  const __m512i sel1 = _mm512_set_epi64(0x0003000300030003, 0x0003000300030003, 0x0003000300030003, 0x0003000300030003,
                                        0x0001000100010001, 0x0001000100010001, 0x0001000100010001, 0x0001000100010001);
  __m512 acc[NT / 2], accm[NQ];
  for (int p = 0; p < NT / 2; p++) acc[p] = _mm512_setzero_ps();
  for (int q = 0; q < NQ; q++) accm[q] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    if (next) prefetch_l2(next + b * bs, bs);
    uint64_t sc8, m8;
    q4k_unpack_scales(p + 4, &sc8, &m8);
    const __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc8))));
    const KqGroupBlock& k = g[b];
    __m512i isum[NT];
    for (int t = 0; t < NT; t++) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int c = 0; c < 2; c++) {  // 128 weights: bytes 64c..64c+63, sub-blocks 4c..4c+3
      // the low nibbles are sub-blocks 4c, 4c + 2, the high ones 4c + 1, 4c + 3: the activations
      // were put in that order (KqGroupBlock::q), so the lanes and their sums are dot_q4_k's
      const __m512i v = _mm512_loadu_si512(p + 16 + 64 * c);
      const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      const __m512i c4 = _mm512_set1_epi16(static_cast<short>(4 * c));
      const __m512i s0 = _mm512_permutexvar_epi16(_mm512_add_epi16(sel0, c4), sc16);
      const __m512i s1 = _mm512_permutexvar_epi16(_mm512_add_epi16(sel1, c4), sc16);
#pragma GCC unroll 8
      for (int t = 0; t < NT; t++) {
        const int8_t* q8 = k.q[t] + 128 * c;
        isum[t] = dot_u8s8_scaled_512(isum[t], lo, _mm512_load_si512(q8), s0);
        isum[t] = dot_u8s8_scaled_512(isum[t], hi, _mm512_load_si512(q8 + 64), s1);
      }
    }
    const __m512 d = _mm512_set1_ps(f16_scale(p)), dmin = _mm512_set1_ps(f16_scale(p + 2));
#pragma GCC unroll 4
    for (int q = 0; q < NT / 2; q++)
      acc[q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(kq_pair_lanes(isum[2 * q], isum[2 * q + 1])),
                               _mm512_mul_ps(d, _mm512_load_ps(k.dxp[q])), acc[q]);
    // the mins: (m_2k, m_2k+1) times the sums of sub-blocks 2k, 2k + 1 in lane k of each token
    const __m512i m16 = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(m8))));
#pragma GCC unroll 2
    for (int q = 0; q < NQ; q++)
      accm[q] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(_mm512_madd_epi16(m16, _mm512_load_si512(k.s[q]))),
                                 _mm512_mul_ps(dmin, _mm512_load_ps(k.dxq[q])), accm[q]);
  }
  alignas(64) float lanes[NT / 2][16], mins[NQ][16];
  for (int q = 0; q < NT / 2; q++) _mm512_store_ps(lanes[q], acc[q]);
  for (int q = 0; q < NQ; q++) _mm512_store_ps(mins[q], accm[q]);
  for (int t = 0; t < NT; t++)
    out[t] =
        hsum_ps256(_mm256_load_ps(lanes[t / 2] + 8 * (t % 2))) + reduce4_ps(_mm_load_ps(mins[t / 4] + 4 * (t % 4)));
}

// out[t] = dot_q6_k(w, a[t], 256 * nb), t < NT (2, 4 or 8); g: the group of a (kq_group_prepare).
template <int NT>
inline void dotg_q6_k(const uint8_t* w, const ActQ8* a, const KqGroupBlock* g, int64_t nb, float* out,
                      const uint8_t* next) {
  constexpr int64_t bs = sizeof(ref::BlockQ6_K);
  const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
  // (as dot_q6_k) the qh shifts of the four 32-weight quarters, the scale selection of 64 weights
  const __m512i shl = _mm512_set_epi64(0x0002000200020002, 0x0002000200020002, 0x0002000200020002, 0x0002000200020002,
                                       0x0004000400040004, 0x0004000400040004, 0x0004000400040004, 0x0004000400040004);
  const __m512i shr =
      _mm512_set_epi64(0x0002000200020002, 0x0002000200020002, 0x0002000200020002, 0x0002000200020002, 0, 0, 0, 0);
  const __m512i sel = _mm512_set_epi64(0x0003000300030003, 0x0003000300030003, 0x0002000200020002, 0x0002000200020002,
                                       0x0001000100010001, 0x0001000100010001, 0, 0);
  __m512 acc[NT / 2];
  for (int q = 0; q < NT / 2; q++) acc[q] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    if (next) prefetch_l2(next + b * bs, bs);
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));
    const __m512i sc512 = _mm512_castsi256_si512(sc);
    __m512i isum[NT];
    for (int t = 0; t < NT; t++) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      const __m512i ql = _mm512_loadu_si512(p + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h)));
      const __m512i v0 = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m30));
      const __m512i v1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                         _mm512_and_si512(_mm512_srlv_epi16(qh, shr), m30));
      const __m512i s0 =
          _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16(static_cast<short>(8 * h))), sc512);
      const __m512i s1 =
          _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16(static_cast<short>(8 * h + 4))), sc512);
#pragma GCC unroll 8
      for (int t = 0; t < NT; t++) {
        const int8_t* q8 = a[t].q + ref::kQK_K * b + 128 * h;
        isum[t] = dot_u8s8_scaled_512(isum[t], v0, _mm512_loadu_si512(q8), s0);
        isum[t] = dot_u8s8_scaled_512(isum[t], v1, _mm512_loadu_si512(q8 + 64), s1);
      }
    }
    const KqGroupBlock& k = g[b];
    const __m512 d = _mm512_set1_ps(f16_scale(p + 208));
    const __m512i scp = _mm512_broadcast_i64x4(sc);
#pragma GCC unroll 4
    for (int q = 0; q < NT / 2; q++) {
      // the -32 offset of each lane (as dot_q6_k), then one FMA
      const __m512i off = _mm512_madd_epi16(scp, _mm512_load_si512(k.s[q]));
      const __m512i lanes = _mm512_sub_epi32(kq_pair_lanes(isum[2 * q], isum[2 * q + 1]), _mm512_slli_epi32(off, 5));
      acc[q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes), _mm512_mul_ps(d, _mm512_load_ps(k.dxp[q])), acc[q]);
    }
  }
  alignas(64) float lanes[NT / 2][16];
  for (int q = 0; q < NT / 2; q++) _mm512_store_ps(lanes[q], acc[q]);
  for (int t = 0; t < NT; t++) out[t] = hsum_ps256(_mm256_load_ps(lanes[t / 2] + 8 * (t % 2)));
}

// ---- the same for 32-blocks (Q8_0, Q4_0, Q5_0) ----
// Per block and row the unsigned values (q32_block_values) sit in both halves of a zmm; a token
// pair's activations (one token in each half) take one vpdpbusd that starts at -offset * (sum of
// each 4 activations), which gives the 4-value sums of dot_q8_0 / dot_q4_0 / dot_q5_0 for both
// tokens exactly, then one conversion, one multiply (d(w) * d(a) of each token in its 8 lanes)
// and one FMA: each token's 8 float lanes take the one-token dot's FMA per block in block order,
// and the final tree is hsum_ps256, so every result has the bits of its dot. Per token and block
// 2 instructions of 512 bits (gemm_rows' dotn_*: 5-6 of 256). A call takes two rows, one from each
// half of a task's rows (two streams, each read in order), and reads each pair's vectors once for
// both; where the one-token dots ask for the bytes ahead (cpu_prefetches_dots: Zen 4), so does
// it, into L2 (kDotAheadL2). AMD EPYC (Zen 4), 1 thread, bench-kernels' "each" at 2 / 4 / 8
// tokens against gemm_rows: q8_0 31-35 -> 41-45 / 30-35 -> 50-53 / 30-35 -> 55-59 GMAC/s, q5_0
// 24-25 -> 29-33 / 29-31 -> 43 / 29-31 -> 50-55; 4 sessions of qwen3-0.6b Q8_0 at 2 threads 97-100
// -> 122-127 tokens/s (bench/RESULTS.md). Rows r and r + 1 as the pair, without the prefetch, were
// slower than gemm_rows (1 thread: 54 -> 37 tokens/s): each pair's second row began cold.

// A token pair's block in the lanes of dotg_q32. A group (prepared once per matmul; missing tokens
// of a last group repeat its last token) is kGroup / 2 runs of nb of them, one run per pair, which
// the kernel streams (the pairs of a block side by side, 768 bytes apart, fell into a quarter of
// L1's sets and missed from K = 2048 on).
struct Q32PairBlock {
  alignas(64) int8_t q[64];       // token 2p's 32 activations, then 2p + 1's
  alignas(64) int32_t start[16];  // -offset * the sum of each 4 activations: 2p's in lanes 0..7
  alignas(64) float d[16];        // d(a) of token 2p in lanes 0..7, of 2p + 1 in 8..15
};

// The group of tokens t0..t0+nt-1 (nt <= kGroup) over nb blocks into g[0..kGroup / 2 * nb), for
// values stored with this offset.
template <int kOffset>
inline void q32_group_prepare(const MatmulInput& in, int64_t t0, int64_t nt, int64_t nb, Q32PairBlock* g) {
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1), neg = _mm256_set1_epi32(-kOffset);
  for (int u = 0; u < group_width(nt); u++) {
    const ActQ8 a = in.row(ActForm::q8_32, t0 + std::min<int64_t>(u, nt - 1));
    const int h = 32 * (u % 2);
    Q32PairBlock* run = g + (u / 2) * nb;
    for (int64_t b = 0; b < nb; b++) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b));
      _mm256_store_si256(reinterpret_cast<__m256i*>(run[b].q + h), q);
      const __m256i s4 = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);
      _mm256_store_si256(reinterpret_cast<__m256i*>(run[b].start + h / 4), _mm256_mullo_epi32(s4, neg));
      _mm256_store_ps(run[b].d + h / 4, _mm256_set1_ps(a.d[b]));
    }
  }
}

// out[i][t] = dot_q8_0 / dot_q4_0 / dot_q5_0(w + i * rb, a[t], 32 * nb), i < NR, t < NT (2, 4 or 8);
// g: the group of a (q32_group_prepare), whose vectors are read once for the NR rows.
template <DType T, int NT, int NR>
inline void dotg_q32_rows(const uint8_t* w, uint64_t rb, const Q32PairBlock* g, int64_t nb, float (*out)[kGroup],
                          const uint8_t* next) {
  constexpr int64_t bs = dtype_traits(T)->bytes;
  constexpr int64_t every = 64 / bs;  // blocks per prefetch of a line (whose blocks start <= 64 apart)
  constexpr int NP = NT / 2;
  const bool pf = cpu_prefetches_dots();
  __m512 acc[NR][NP];
  for (int i = 0; i < NR; i++)
    for (int q = 0; q < NP; q++) acc[i][q] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    __m512i v[NR];
    __m512 d[NR];
#pragma GCC unroll 2
    for (int i = 0; i < NR; i++) {
      const uint8_t* p = w + i * rb + b * bs;
      if (next && b % every == 0) _mm_prefetch(reinterpret_cast<const char*>(next + i * rb + b * bs), _MM_HINT_T1);
      if (b % every == 0) dot_prefetch<true>(pf, p, 1);
      v[i] = _mm512_broadcast_i64x4(q32_block_values<T>(p));
      d[i] = _mm512_set1_ps(f16_scale(p));
    }
#pragma GCC unroll 4
    for (int q = 0; q < NP; q++) {
      const Q32PairBlock& k = g[q * nb + b];
      const __m512i st = _mm512_load_si512(k.start), aq = _mm512_load_si512(k.q);
      const __m512 da = _mm512_load_ps(k.d);
#pragma GCC unroll 2
      for (int i = 0; i < NR; i++)
        acc[i][q] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dpbusd(st, v[i], aq)), _mm512_mul_ps(d[i], da), acc[i][q]);
    }
  }
  for (int i = 0; i < NR; i++) {
    alignas(64) float lanes[NP][16];
    for (int q = 0; q < NP; q++) _mm512_store_ps(lanes[q], acc[i][q]);
    for (int t = 0; t < NT; t++) out[i][t] = hsum_ps256(_mm256_load_ps(lanes[t / 2] + 8 * (t % 2)));
  }
}
// The same for nr (1 or 2) rows, rb bytes apart.
template <DType T, int NT>
inline void dotg_q32(const uint8_t* w, uint64_t rb, int nr, const Q32PairBlock* g, int64_t nb, float (*out)[kGroup],
                     const uint8_t* next) {
  if (nr == 2)
    dotg_q32_rows<T, NT, 2>(w, rb, g, nb, out, next);
  else
    dotg_q32_rows<T, NT, 1>(w, rb, g, nb, out, next);
}

// Bytes of gemv_each_group's scratch (MatmulScratch::xk) for T tokens and rows of K values.
template <class WK>
inline size_t each_group_bytes(int64_t T, int64_t K) {
  const int64_t n_groups = (T + kGroup - 1) / kGroup;
  return static_cast<size_t>(n_groups * WK::group_blocks(K / WK::block)) * sizeof(typename WK::GroupBlock) + 64;
}

// Y[t] = W x_t for T >= 2 single tokens and a K-quant or 32-block W (WK::dotg over groups of
// WK::group_blocks(nb) WK::GroupBlock made by WK::group_prepare), every result with the bits of
// WK::dot (see above).
// False when out of memory (the scratch could not grow).
template <class WK>
inline bool gemv_each_group(const TensorView& w, const MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool,
                            MatmulScratch& scratch) {
  using Block = typename WK::GroupBlock;
  const int64_t rows = w.rows(), T = in.n_tokens(), nb = w.ne[0] / WK::block;
  const int64_t n_groups = (T + kGroup - 1) / kGroup, gb = WK::group_blocks(nb);
  if (!scratch.xk.reserve(each_group_bytes<WK>(T, w.ne[0]))) return false;
  Block* groups = scratch.xk.as<Block>();
  for (int64_t gi = 0; gi < n_groups; gi++)
    WK::group_prepare(in, kGroup * gi, std::min<int64_t>(kGroup, T - kGroup * gi), nb, groups + gi * gb);
  const uint64_t rb = std::max<uint64_t>(1, weight_row_bytes(w));
  // Tasks of decreasing size (each 1 / (2 threads) of the rows left, at least 16 KiB of weights
  // and 1/48 of the rows, so at most 49 tasks): long runs first, short ones last, so that the
  // threads finish a matmul together (with 2 equal tasks per thread one of them idled about half
  // a task at the end of each).
  const int64_t threads = pool.size();
  const int64_t min_rows = std::max({int64_t(1), static_cast<int64_t>(16384 / rb), rows / 48});
  constexpr int kMaxTasks = 64;
  int64_t start[kMaxTasks + 1];
  int n_tasks = 0;
  for (int64_t r = 0; r < rows; n_tasks++) {
    start[n_tasks] = r;
    const int64_t left = rows - r;
    r += n_tasks == kMaxTasks - 1 ? left : std::min(left, std::max(min_rows, (left + 2 * threads - 1) / (2 * threads)));
  }
  start[n_tasks] = rows;
  const RowOperands o = row_operands(w, in, true);
  const bool ahead = cpu_streams_ahead();
  pool.parallel_for(n_tasks, [&](int task, int) {
    const int64_t r0 = start[task], r1 = start[task + 1];
    for (int64_t gi = 0; gi < n_groups; gi++) {
      const int64_t t0 = kGroup * gi, nt = std::min<int64_t>(kGroup, T - t0);
      // rows per dotg: NR streams of L rows each (row j of stream i: r0 + i * L + j), then the rest
      // one at a time
      constexpr int NR = WK::group_rows;
      [[maybe_unused]] ActQ8 a[kGroup];  // (the one-row dotg reads them)
      if constexpr (NR == 1)
        for (int u = 0; u < kGroup; u++) a[u] = in.row(WK::act, t0 + std::min<int64_t>(u, nt - 1));
      const Block* g = groups + gi * gb;
      const int64_t L = (r1 - r0) / NR;
      for (int64_t j = 0; j < r1 - r0 - (NR - 1) * L; j++) {
        const int64_t r = r0 + (j < L ? j : (NR - 1) * L + j);
        const int nr = j < L ? NR : 1;
        const uint64_t stride = static_cast<uint64_t>(L) * rb;  // between the rows of a dotg
        const uint8_t* wr = w.data + static_cast<uint64_t>(r) * rb;
        const uint8_t* next = ahead && j + kAheadRows < L ? wr + kAheadRows * rb : nullptr;
        float out[NR][kGroup];
        if (nt == 1) {
          for (int i = 0; i < nr; i++) out[i][0] = WK::dot(o, wr + i * stride, r + i * L, t0);
        } else if constexpr (NR == 1) {
          if (nt == 2)
            WK::template dotg<2>(wr, a, g, nb, out[0], next);
          else if (nt <= 4)
            WK::template dotg<4>(wr, a, g, nb, out[0], next);
          else
            WK::template dotg<8>(wr, a, g, nb, out[0], next);
        } else {
          if (nt == 2)
            WK::template dotg<2>(wr, stride, nr, g, nb, out, next);
          else if (nt <= 4)
            WK::template dotg<4>(wr, stride, nr, g, nb, out, next);
          else
            WK::template dotg<8>(wr, stride, nr, g, nb, out, next);
        }
        for (int i = 0; i < nr; i++)
          for (int64_t u = 0; u < nt; u++) y[(t0 + u) * ldy + r + i * L] = out[i][u];
      }
    }
  });
  return true;
}
#endif  // LLMI_SIMD_AVX512

// Tokens that are each a product of their own (one token of each of several sequences, batched
// decoding): y[t][r] has the bits a matmul of token t alone gives (the dot product of a single
// token, never the tiled or float-sgemm order), but a task takes each weight row once for all the
// tokens (row outer, tokens inner), so the weights stream from memory once per step instead of
// once per sequence.
// False when out of memory.
template <class WK>
inline bool gemv_each(const TensorView& w, const MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool,
                      [[maybe_unused]] MatmulScratch& scratch) {
  const int64_t rows = w.rows(), T = in.n_tokens();
  const uint64_t rb = std::max<uint64_t>(1, weight_row_bytes(w));
  int64_t chunk = std::max<int64_t>(rows / (2 * static_cast<int64_t>(pool.size())), static_cast<int64_t>(65536 / rb));
  chunk = std::clamp<int64_t>(chunk, 1, std::max<int64_t>(1, rows));
  const int n_tasks = static_cast<int>((rows + chunk - 1) / chunk);
#if defined(LLMI_SIMD_AVX512)
  if constexpr (WK::each_group) {
    if (T > 1) return gemv_each_group<WK>(w, in, y, ldy, pool, scratch);
  }
#elif defined(LLMI_SIMD_AVX2)
  if constexpr (WK::multi_token) {
    if (T > 1) {  // (its (row, token) sums are the one-token dot products)
      gemm_rows<WK>(w, in, y, ldy, pool, scratch);
      return true;
    }
  }
#endif
  const RowOperands o = row_operands(w, in, true);
  const uint64_t row_bytes = weight_row_bytes(w);
  pool.parallel_for(n_tasks, [&](int task, int) {
    const int64_t r0 = task * chunk, r1 = std::min(rows, r0 + chunk);
    for (int64_t r = r0; r < r1; r++)
      for (int64_t t = 0; t < T; t++) y[t * ldy + r] = WK::dot(o, w.data + static_cast<uint64_t>(r) * row_bytes, r, t);
  });
  return true;
}

// ---- blocked matrix-matrix product (AVX-512) ----
// Quantized weights: an outer-product kernel. A panel holds 16 rows interleaved by 4 values:
// [K/4][16 rows][4 bytes], so one zmm is 4 consecutive values of 16 rows, and vpdpbusd with the
// token's 4 activation bytes broadcast adds 4 products to each row's int32 lane (64 MACs per
// instruction, no horizontal sums). A micro-tile is 2 such groups (32 rows) x kRN tokens; a
// block's integer sums are scaled per row lane (block scales) and accumulated in float per token,
// in the lanes and order of llama.cpp's dot products (see micro_kq and micro_q32). Offsets enter
// as integer start values (-offset * sum of the activations), Q4_K's mins as llama.cpp's own sums.
// Float weights (f32/f16/bf16/MLX) use a dot-product tile over an f32 panel instead.
#if defined(LLMI_SIMD_AVX512)
constexpr int kGR = 16;         // rows per group (one zmm of int32 / f32 lanes)
constexpr int kRG = 2;          // row groups per micro-tile
constexpr int kRN = 4;          // tokens per micro-tile
constexpr int kRB = kGR * kRG;  // rows per task
constexpr int kTB = 512;        // tokens per task (a panel is decoded once per task)

// One row's unsigned values (Q4_K 0..15, Q6_K 0..63, Q4_0 0..15, Q5_0 0..31, Q8_0 q + 128) in
// element order, with its per-block numbers: Q4_K/Q6_K: sub-block scales as int16 pairs for
// vpdpwssd, those of the values 4u..4u+3 of two consecutive 32s (Q4_K: (sc_2m, sc_2m+1) per 64
// values; Q6_K: (sc_4m+h, sc_4m+2+h) for u < 4 (h 0) and u >= 4 (h 1)), super-block d, and int16
// pairs for the offsets (Q4_K: its mins (m_2k, m_2k+1), k < 4, with dmin; Q6_K: (-32 sc_2l,
// -32 sc_2l+1), l < 8); 32-blocks: d.
struct RowDecode {
  uint8_t* v;
  int32_t* sc;
  float* d;
  float* dmin;
  int32_t* pairs;
};
// Two int16 values in one int32 (lo in the low half).
inline int32_t pair16(int lo, int hi) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                              static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16);
}
// Q4_K's offsets of the mins for 64 activations from their four sums of 16 (s[0..3]): the sums of
// the two 32s as an int16 pair.
inline int32_t sums32_pair(const int16_t* s) {
  return pair16(s[0] + s[1], s[2] + s[3]);
}
// The row decoders, one per type (WeightKernels<T>::decode).
inline void decode_row_q4_k(const uint8_t* src, int64_t K, const RowDecode& o) {
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int64_t b = 0; b < K / 256; b++) {
    const uint8_t* blk = src + 144 * b;
    uint64_t sc8, m8;
    q4k_unpack_scales(blk + 4, &sc8, &m8);
    o.d[b] = f16_scale(blk);
    o.dmin[b] = f16_scale(blk + 2);
    for (int m = 0; m < 4; m++)
      o.sc[4 * b + m] =
          pair16(static_cast<int>((sc8 >> (16 * m)) & 0xFF), static_cast<int>((sc8 >> (16 * m + 8)) & 0xFF));
    for (int k = 0; k < 4; k++)
      o.pairs[4 * b + k] =
          pair16(static_cast<int>((m8 >> (16 * k)) & 0xFF), static_cast<int>((m8 >> (16 * k + 8)) & 0xFF));
    for (int ch = 0; ch < 4; ch++) {
      __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * ch));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.v + 256 * b + 64 * ch), _mm256_and_si256(q, m4));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.v + 256 * b + 64 * ch + 32), nibbles_hi256(q));
    }
  }
}
inline void decode_row_q6_k(const uint8_t* src, int64_t K, const RowDecode& o) {
  const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
  for (int64_t b = 0; b < K / 256; b++) {
    const uint8_t* blk = src + 210 * b;
    o.d[b] = f16_scale(blk + 208);
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + 192);
    for (int m = 0; m < 4; m++)
      for (int h = 0; h < 2; h++) o.sc[8 * b + 2 * m + h] = pair16(sc[4 * m + h], sc[4 * m + 2 + h]);
    for (int l = 0; l < 8; l++) o.pairs[8 * b + l] = pair16(-32 * sc[2 * l], -32 * sc[2 * l + 1]);
    for (int h = 0; h < 2; h++) {
      __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h));
      __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32));
      __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
      uint8_t* out = o.v + 256 * b + 128 * h;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out),
                          _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32),
                          _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64),
                          _mm256_or_si256(nibbles_hi256(ql0), _mm256_and_si256(qh, m30)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 96),
                          _mm256_or_si256(nibbles_hi256(ql1), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)));
    }
  }
}
// 32-blocks: Q8_0, Q4_0 or Q5_0.
template <DType T>
inline void decode_row_q32(const uint8_t* src, int64_t K, const RowDecode& o) {
  constexpr int64_t bs = dtype_traits(T)->bytes;
  for (int64_t b = 0; b < K / 32; b++) {
    const uint8_t* blk = src + bs * b;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.v + 32 * b), q32_block_values<T>(blk));
    o.d[b] = f16_scale(blk);
  }
}

// How a quantized type's rows sit in a panel and enter its micro-kernel (WeightKernels<T>::panel).
struct PanelFormat {
  int offset;       // 32-blocks: subtracted from the decoded unsigned values (Q8_0's are q + 128;
                    // micro_q32 starts each 4-value sum at -offset * (sum of those activations))
  int scale_group;  // K-quants: values per sub-block scale pair (sc); 0: 32-blocks (d only)
  int pair_group;   // K-quants: values per offset pair (pairs)
  bool mins;        // Q4_K's mins: dmin per super-block, the activations' sums of 32 as int16 pairs
};

// out[j] = column j of the 16 x 16 dword matrix in[0..15] (rows).
inline void transpose16x16_epi32(const __m512i (&in)[16], __m512i (&out)[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(in[i], in[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(in[i], in[i + 1]);
  }
  for (int q = 0; q < 16; q += 4) {
    u[q] = _mm512_unpacklo_epi64(t[q], t[q + 2]);
    u[q + 1] = _mm512_unpackhi_epi64(t[q], t[q + 2]);
    u[q + 2] = _mm512_unpacklo_epi64(t[q + 1], t[q + 3]);
    u[q + 3] = _mm512_unpackhi_epi64(t[q + 1], t[q + 3]);
  }
  for (int m = 0; m < 4; m++) {
    __m512i v0 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x88), v1 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xDD);
    __m512i v2 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x88), v3 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xDD);
    out[m] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    out[m + 8] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    out[m + 4] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    out[m + 12] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
}

// A task's rows decoded for the micro-kernels.
//  quantized: v [groups][K/4][16][4] u8 (K-quants: each 64 in kq_order), sc
//             [groups][K/sg][16] int16 pairs (K-quants; sg 64 for Q4_K, 32 for Q6_K), d
//             [groups][K/db][16] f32 (db 256 K-quants, 32 otherwise),
//             pairs [groups][K/pg][16] int16 pairs (pg 64 Q4_K, 32 Q6_K), dmin [groups][K/256][16]
//             f32 (Q4_K) (RowDecode).
//  float:     f [rows][K] f32.
struct Panel {
  int64_t K = 0, rows = 0;
  uint8_t* v = nullptr;
  int32_t* sc = nullptr;
  float* d = nullptr;
  int32_t* pairs = nullptr;
  float* dmin = nullptr;
  float* f = nullptr;
  int sg = 32, db = 32, pg = 32;
};

// 64 bytes of K-quant values or activations in micro_kq's order: the 16-bit pairs of the first 32
// and the second 32 interleaved (dword j: bytes 2j, 2j+1 of both).
inline __m512i kq_order(__m512i v) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                       5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, v);
}

// Where the parts of a quantized panel of rows of k values sit in its buffer (panel_decode), and
// the bytes of the whole (of a float panel too: panel_reserve).
struct PanelLayout {
  size_t vals = 0, scn = 0, dn = 0, pn = 0, dmn = 0, tn = 0, total = 0;
};
template <class WK>
inline PanelLayout panel_layout(size_t k) {
  PanelLayout L;
  if constexpr (WK::act == ActForm::f32) {
    L.total = static_cast<size_t>(kRB) * k * 4;
  } else {
    constexpr PanelFormat pf = WK::panel;
    constexpr bool kq = pf.scale_group != 0, q4k = pf.mins;
    const size_t G = kRG, sg = static_cast<size_t>(kq ? pf.scale_group : 32),
                 pg = static_cast<size_t>(kq ? pf.pair_group : 32), db = WK::block;
    L.vals = round_up(G * 16 * k, 64);
    L.scn = kq ? round_up(G * 16 * k / sg * 4, 64) : 0;
    L.dn = round_up(G * 16 * k / db * 4, 64);
    L.pn = kq ? round_up(G * 16 * k / pg * 4, 64) : 0;
    L.dmn = q4k ? round_up(G * 16 * k / 256 * 4, 64) : 0;
    L.tn = round_up(k / 16 * 4, 64);  // one row's numbers (at most K/16 of each)
    L.total = L.vals + L.scn + L.dn + L.pn + L.dmn + round_up(k, 64) * 16 + 4 * L.tn;
  }
  return L;
}

// panel[(g * n + j) * 16 + i] = row i's number j (n of them; 0 for a padding row).
template <class T>
inline void panel_put(T* panel, const T* row, size_t n, size_t g, int i, bool pad) {
  for (size_t j = 0; j < n; j++) panel[(g * n + j) * 16 + static_cast<size_t>(i)] = pad ? 0 : row[j];
}
// Row r of w on its way into the cache (while another one is decoded).
inline void panel_prefetch_row(const TensorView& w, int64_t r) {
  const uint64_t rb = weight_row_bytes(w);
  for (uint64_t at = 0; at < rb; at += 64)
    _mm_prefetch(reinterpret_cast<const char*>(w.data + static_cast<uint64_t>(r) * rb + at), _MM_HINT_T0);
}
// The 16 rows of a group (row i's k bytes at rows + i * rs) interleaved by dwords, as the
// micro-kernels and the tiles read them: dst[k4][i] = dword k4 of row i. Each 64 bytes of a row
// pass through fix first (and so may be permuted within), the bytes of a shorter rest (k not a
// multiple of 64) one by one through fix on a vector.
template <class Fix>
inline void panel_interleave(const uint8_t* rows, size_t rs, size_t k, uint8_t* dst8, Fix fix) {
  uint32_t* dst = reinterpret_cast<uint32_t*>(dst8);
  size_t k4 = 0;
  for (; k4 + 16 <= k / 4; k4 += 16) {
    __m512i in[16], out[16];
    for (int i = 0; i < 16; i++) in[i] = fix(_mm512_loadu_si512(rows + static_cast<size_t>(i) * rs + 4 * k4));
    transpose16x16_epi32(in, out);
    for (int j = 0; j < 16; j++) _mm512_storeu_si512(dst + (k4 + static_cast<size_t>(j)) * 16, out[j]);
  }
  for (; k4 < k / 4; k4++)
    for (int i = 0; i < 16; i++) {
      const __m512i v = fix(_mm512_maskz_loadu_epi8(0xF, rows + static_cast<size_t>(i) * rs + 4 * k4));
      _mm512_mask_storeu_epi8(dst + k4 * 16 + static_cast<size_t>(i), 0xF, v);
    }
}

// Decodes rows [r0, r0 + nr) (nr <= kRB; missing rows are zero) into P.
template <class WK>
inline bool panel_decode(const TensorView& w, int64_t r0, int64_t nr, AlignedBuffer& buf, Panel& P) {
  const int64_t K = w.ne[0];
  const uint64_t rb = weight_row_bytes(w);
  P.K = K;
  P.rows = nr;
  const size_t k = static_cast<size_t>(K);
  const PanelLayout L = panel_layout<WK>(k);
  if (!buf.reserve(L.total)) return false;
  if constexpr (WK::act == ActForm::f32) {
    P.f = buf.as<float>();
    for (int64_t i = 0; i < nr; i++)
      WK::dequant(w, r0 + i, w.data + static_cast<uint64_t>(r0 + i) * rb, P.f + static_cast<size_t>(i) * k);
    return true;
  } else {
    constexpr PanelFormat pf = WK::panel;
    constexpr bool kq = pf.scale_group != 0, q4k = pf.mins;
    if constexpr (kq) {
      P.sg = pf.scale_group;
      P.pg = pf.pair_group;
    }
    P.db = static_cast<int>(WK::block);
    const size_t G = kRG, vals = L.vals, scn = L.scn, dn = L.dn, pn = L.pn, dmn = L.dmn, tn = L.tn;
    P.v = buf.as<uint8_t>();
    P.sc = buf.as<int32_t>(vals);
    P.d = buf.as<float>(vals + scn);
    P.pairs = buf.as<int32_t>(vals + scn + dn);
    P.dmin = buf.as<float>(vals + scn + dn + pn);
    const size_t tmp = vals + scn + dn + pn + dmn, rs = round_up(k, 64);
    uint8_t* rows = buf.as<uint8_t>(tmp);  // [16][K] one group's rows
    const RowDecode t{nullptr, buf.as<int32_t>(tmp + rs * 16), buf.as<float>(tmp + rs * 16 + tn),
                      buf.as<float>(tmp + rs * 16 + 2 * tn), buf.as<int32_t>(tmp + rs * 16 + 3 * tn)};
    const size_t nsc = kq ? k / static_cast<size_t>(P.sg) : 0, nd = k / static_cast<size_t>(P.db);
    const size_t np = kq ? k / static_cast<size_t>(P.pg) : 0, ndm = q4k ? k / 256 : 0;
    for (size_t g = 0; g < G; g++) {
      for (int i = 0; i < 16; i++) {
        const int64_t r = static_cast<int64_t>(g) * 16 + i;
        uint8_t* rv = rows + static_cast<size_t>(i) * rs;
        const bool pad = r >= nr;                           // padding rows compute zeros (never stored)
        if (r + 2 < nr) panel_prefetch_row(w, r0 + r + 2);  // on its way while this row is decoded
        if (pad)
          std::memset(rv, 0, k);
        else
          WK::decode(w.data + static_cast<uint64_t>(r0 + r) * rb, K, RowDecode{rv, t.sc, t.d, t.dmin, t.pairs});
        panel_put(P.sc, t.sc, nsc, g, i, pad);
        panel_put(P.d, t.d, nd, g, i, pad);
        panel_put(P.pairs, t.pairs, np, g, i, pad);
        panel_put(P.dmin, t.dmin, ndm, g, i, pad);
      }
      // K-quants: each 64 values in micro_kq's order (kq_order)
      panel_interleave(rows, rs, k, P.v + g * 16 * k, [](__m512i v) { return kq ? kq_order(v) : v; });
    }
    return true;
  }
}

// The tokens of a micro-tile: first, first + 1, ... up to last (repeated beyond: ragged tiles).
// (Passed as two numbers: an array written just before the call and read as one vector by the
// micro-kernel stalled it until the stores ahead of it, the previous tile's results, had left.)
struct TokenTile {
  int64_t first, last;
  int64_t operator[](int j) const { return std::min(first + j, last); }
};

// acc + (lo16 * sc_lo + hi16 * sc_hi) per int32 lane (signed int16 pairs).
inline __m512i dpwssd(__m512i acc, __m512i p, __m512i sc) {
#if defined(LLMI_SIMD_VNNI)
  return _mm512_dpwssd_epi32(acc, p, sc);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(p, sc));
#endif
}

// K-quant micro-kernel: the 32 panel rows times tokens tj[0..kRN); out[g][t] = 16 row results.
// llama.cpp's order (dot_q4_k / dot_q6_k, ggml_vec_dot_q4_K_q8_K / _q6_K_q8_K), per row lane and
// token: per super-block 8 integer sums, sum u taking the values 4u..4u+3 of every 32, each 4 times
// its sub-block scale; Q6_K's start at its -32 offset for sub-blocks 2u, 2u + 1 (vpdpwssd of
// (-32 sc_2u, -32 sc_2u+1) with the activation sums (s_2u, s_2u+1)). One FMA per sum and
// super-block with d(w) * d(a) into 8 float accumulators. Q4_K's mins: 4 sums per super-block,
// (m_2k, m_2k+1) times the activation sums of 32 (s_2k, s_2k+1) (qpairs: [T][K/64] int16 pairs),
// one FMA each with -dmin(w) * d(a). Then the 8 accumulators' tree (that of hsum_ps256) plus
// (m0 + m2) + (m1 + m3).
// A scale must multiply every 4-value sum before it joins its lane, so the integer work pairs two:
// values 4u..4u+3 (x) and 32 + 4u.. (y) of 64, in kq_order (the weights in the panel, the
// activations in xk), so that two vpmaddubsw give halves of both sums as int16 (x | y) and a
// vpaddw their sums (at most 4 * 63 * 127 in magnitude), which one vpdpwssd adds to the lane times
// (sc_x, sc_y): 3 multiplying instructions per 128 values of 16 rows (4 with a vpdpwssd per 64).
// Each sum u is run over all super-blocks at a time, so that only 2 x 4 integer and float
// accumulators are live (the tile's weights and activations loaded once for 8 products).
constexpr int64_t kMaxKeptSb = 32;  // (16 KiB of factors per kind on the stack)
template <bool kQ4K, bool kKeep>
inline void micro_kq_body(const Panel& P, const MatmulInput& in, const int8_t* xk, const int32_t* qpairs, TokenTile tj,
                          __m512 (&out)[kRG][kRN]) {
  const int64_t K = P.K, nsb = K / 256;
  constexpr int kNP = kQ4K ? 4 : 8;  // offset pairs per super-block
  const int32_t* aq[kRN];            // the activations in kq_order
  const float* ad[kRN];
  const int32_t* ap[kRN];  // the activations' int16 pairs of the offsets
  for (int t = 0; t < kRN; t++) {
    const int64_t tt = tj[t];
    const ActQ8 a = in.row(ActForm::q8_256, tt);
    aq[t] = reinterpret_cast<const int32_t*>(xk + tt * K);
    ad[t] = a.d;
    ap[t] = kQ4K ? qpairs + tt * (K / 64) : reinterpret_cast<const int32_t*>(a.sums);
  }
  const __m512i* wv[kRG];
  const __m512i* wsc[kRG];
  const __m512i* wp[kRG];
  const float* wd[kRG];
  const float* wdm[kRG];
  for (int g = 0; g < kRG; g++) {
    wv[g] = reinterpret_cast<const __m512i*>(P.v + static_cast<size_t>(g) * 16 * static_cast<size_t>(K));
    wsc[g] = reinterpret_cast<const __m512i*>(P.sc + static_cast<size_t>(g) * 16 * static_cast<size_t>(K / P.sg));
    wp[g] = reinterpret_cast<const __m512i*>(P.pairs + static_cast<size_t>(g) * 16 * static_cast<size_t>(nsb * kNP));
    wd[g] = P.d + static_cast<size_t>(g) * 16 * static_cast<size_t>(nsb);
    wdm[g] = P.dmin + static_cast<size_t>(g) * 16 * static_cast<size_t>(nsb);
  }
  // kKeep: d(w) * d(a) per super-block, row group and token (and Q4_K's dmin(w) * d(a)) made once
  // for the 8 sums (4 mins) instead of in each pass (micro_kq: rows of up to kMaxKeptSb super-blocks).
  // AMD EPYC (Zen 4), 1 thread, bench-kernels' gemm at 128 and 512 tokens: q6_K 89-104 -> 95-117
  // GMAC/s, q4_K 94-110 -> 97-115 (bench/RESULTS.md).
  __m512 dd[kKeep ? kMaxKeptSb : 1][kRG][kRN];
  [[maybe_unused]] __m512 ddm[kKeep && kQ4K ? kMaxKeptSb : 1][kRG][kRN];
  if constexpr (kKeep)
    for (int64_t s = 0; s < nsb; s++)
      for (int g = 0; g < kRG; g++) {
        const __m512 d = _mm512_load_ps(wd[g] + 16 * s);
        for (int t = 0; t < kRN; t++) dd[s][g][t] = _mm512_mul_ps(d, _mm512_set1_ps(ad[t][s]));
        if constexpr (kQ4K) {
          const __m512 dmin = _mm512_load_ps(wdm[g] + 16 * s);
          for (int t = 0; t < kRN; t++) ddm[s][g][t] = _mm512_mul_ps(dmin, _mm512_set1_ps(ad[t][s]));
        }
      }
  __m512 lanes[kRG][kRN][8];  // the 8 float sums
  for (int u = 0; u < 8; u++) {
    __m512 acc[kRG][kRN];
    for (int g = 0; g < kRG; g++)
      for (int t = 0; t < kRN; t++) acc[g][t] = _mm512_setzero_ps();
    for (int64_t s = 0; s < nsb; s++) {
      __m512i is[kRG][kRN];
#pragma GCC unroll 2
      for (int g = 0; g < kRG; g++)
#pragma GCC unroll 4
        for (int t = 0; t < kRN; t++)
          is[g][t] = kQ4K ? _mm512_setzero_si512()
                          : dpwssd(_mm512_setzero_si512(), _mm512_load_si512(wp[g] + 8 * s + u),
                                   _mm512_set1_epi32(ap[t][8 * s + u]));
#pragma GCC unroll 4
      for (int m = 0; m < 4; m++) {  // 64 values: dwords 16m..16m+15 of the super-block
        const int64_t k4 = 64 * s + 16 * m + 2 * u;
        __m512i w1[kRG], w2[kRG], sc[kRG];
#pragma GCC unroll 2
        for (int g = 0; g < kRG; g++) {
          w1[g] = _mm512_load_si512(wv[g] + k4);
          w2[g] = _mm512_load_si512(wv[g] + k4 + 1);
          sc[g] = _mm512_load_si512(wsc[g] + (kQ4K ? 4 * s + m : 8 * s + 2 * m + (u >= 4)));
        }
#pragma GCC unroll 4
        for (int t = 0; t < kRN; t++) {
          const __m512i a1 = _mm512_set1_epi32(aq[t][k4]), a2 = _mm512_set1_epi32(aq[t][k4 + 1]);
#pragma GCC unroll 2
          for (int g = 0; g < kRG; g++)
            is[g][t] = dpwssd(
                is[g][t], _mm512_add_epi16(_mm512_maddubs_epi16(w1[g], a1), _mm512_maddubs_epi16(w2[g], a2)), sc[g]);
        }
      }
#pragma GCC unroll 2
      for (int g = 0; g < kRG; g++) {
        const __m512 d = _mm512_load_ps(wd[g] + 16 * s);
#pragma GCC unroll 4
        for (int t = 0; t < kRN; t++)
          acc[g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[g][t]),
                                      kKeep ? dd[s][g][t] : _mm512_mul_ps(d, _mm512_set1_ps(ad[t][s])), acc[g][t]);
      }
    }
    for (int g = 0; g < kRG; g++)
      for (int t = 0; t < kRN; t++) lanes[g][t][u] = acc[g][t];
  }
  for (int g = 0; g < kRG; g++)
    for (int t = 0; t < kRN; t++) {
      const __m512* a = lanes[g][t];
      out[g][t] = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[4], a[0]), _mm512_add_ps(a[6], a[2])),
                                _mm512_add_ps(_mm512_add_ps(a[5], a[1]), _mm512_add_ps(a[7], a[3])));
    }
  if constexpr (kQ4K) {
    __m512 mins[kRG][kRN][4];
    for (int k = 0; k < 4; k++) {
      __m512 acc[kRG][kRN];
      for (int g = 0; g < kRG; g++)
        for (int t = 0; t < kRN; t++) acc[g][t] = _mm512_setzero_ps();
      for (int64_t s = 0; s < nsb; s++)
#pragma GCC unroll 2
        for (int g = 0; g < kRG; g++) {
          const __m512i mp = _mm512_load_si512(wp[g] + 4 * s + k);
          const __m512 dmin = _mm512_load_ps(wdm[g] + 16 * s);
#pragma GCC unroll 4
          for (int t = 0; t < kRN; t++) {
            const __m512i m = dpwssd(_mm512_setzero_si512(), mp, _mm512_set1_epi32(ap[t][4 * s + k]));
            acc[g][t] = _mm512_fnmadd_ps(
                _mm512_cvtepi32_ps(m), kKeep ? ddm[s][g][t] : _mm512_mul_ps(dmin, _mm512_set1_ps(ad[t][s])), acc[g][t]);
          }
        }
      for (int g = 0; g < kRG; g++)
        for (int t = 0; t < kRN; t++) mins[g][t][k] = acc[g][t];
    }
    for (int g = 0; g < kRG; g++)
      for (int t = 0; t < kRN; t++) {
        const __m512* m = mins[g][t];
        out[g][t] = _mm512_add_ps(out[g][t], _mm512_add_ps(_mm512_add_ps(m[0], m[2]), _mm512_add_ps(m[1], m[3])));
      }
  }
}

// micro_kq_body with the factors kept (kKeep) where a row has at most kMaxKeptSb super-blocks.
template <bool kQ4K>
inline void micro_kq(const Panel& P, const MatmulInput& in, const int8_t* xk, const int32_t* qpairs, TokenTile tj,
                     __m512 (&out)[kRG][kRN]) {
  if (P.K / 256 <= kMaxKeptSb)
    micro_kq_body<kQ4K, true>(P, in, xk, qpairs, tj, out);
  else
    micro_kq_body<kQ4K, false>(P, in, xk, qpairs, tj, out);
}

// 32-block micro-kernel (Q4_0, Q5_0, Q8_0) in llama.cpp's order: per row and token, 8 float lanes
// (one per 4 values of a block) each take one FMA per block with d(row) * d(token), then the
// 8-lane tree, as dot_q8_0 / dot_q4_0 / dot_q5_0 (and llamafile's sgemm). Each 4-value sum is
// exact: the unsigned values (q + 128, q4 0..15, q5 0..31) times a start at -offset * (sum of
// those 4 activations).
// The 8 lanes of NG row groups x NT tokens are live at a time (NG * NT <= 2: 16 accumulators); each
// weight vector is loaded once for NT tokens, each token's two broadcasts (its 4 activations, the
// start) made once for NG groups. Every (row, token) takes the same operations in the same order
// whatever the shape, so both give the same bits. 2 groups x 1 token (one pair of broadcasts per
// 128 products); on CPUs that run 512-bit operations as two halves (cpu_splits_zmm), 1 group x 2
// tokens (one weight load per 128): AMD EPYC (Zen 4), prefill 512 tokens of llama3.2-1b Q8_0 81 ->
// 89 tokens/s at 1 thread, 152 -> 167-173 at 2; gemma3-1b Q8_0 107 -> 116 (bench/RESULTS.md). There
// the 2 x 1 shape read its 32 x K bytes of panel (more than the 32 KiB L1 from K = 1024 on) once
// per token from L2, which gives a core 32 bytes a cycle; 1 x 2 reads each vector once for 2
// tokens, for twice the broadcasts.
template <int NG, int NT>
inline void micro_q32_tiles(const Panel& P, const MatmulInput& in, const int32_t* starts4, TokenTile tj,
                            __m512 (&out)[kRG][kRN]) {
  static_assert(kRG % NG == 0 && kRN % NT == 0 && NG * NT <= 2);
  const int64_t K = P.K, nb = K / 32;
  for (int g0 = 0; g0 < kRG; g0 += NG) {
    const __m512i* wv[NG];
    const float* wd[NG];
    for (int g = 0; g < NG; g++) {
      wv[g] = reinterpret_cast<const __m512i*>(P.v + static_cast<size_t>(g0 + g) * 16 * static_cast<size_t>(K));
      wd[g] = P.d + static_cast<size_t>(g0 + g) * 16 * static_cast<size_t>(nb);
    }
    for (int t0 = 0; t0 < kRN; t0 += NT) {
      const int32_t* aq[NT];
      const int32_t* st[NT];
      const float* ad[NT];
      for (int t = 0; t < NT; t++) {
        const ActQ8 a = in.row(ActForm::q8_32, tj[t0 + t]);
        aq[t] = reinterpret_cast<const int32_t*>(a.q);
        ad[t] = a.d;
        st[t] = starts4 + tj[t0 + t] * (K / 4);
      }
      __m512 acc[NG][NT][8];
      for (int g = 0; g < NG; g++)
        for (int t = 0; t < NT; t++)
          for (int u = 0; u < 8; u++) acc[g][t][u] = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; b++) {
        __m512 sc[NG][NT];
#pragma GCC unroll 2
        for (int g = 0; g < NG; g++)
#pragma GCC unroll 2
          for (int t = 0; t < NT; t++)
            sc[g][t] = _mm512_mul_ps(_mm512_load_ps(wd[g] + 16 * b), _mm512_set1_ps(ad[t][b]));
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) {
          __m512i av[NT], s0[NT];
#pragma GCC unroll 2
          for (int t = 0; t < NT; t++) {
            av[t] = _mm512_set1_epi32(aq[t][8 * b + u]);
            s0[t] = _mm512_set1_epi32(st[t][8 * b + u]);
          }
#pragma GCC unroll 2
          for (int g = 0; g < NG; g++) {
            const __m512i w = _mm512_load_si512(wv[g] + 8 * b + u);
#pragma GCC unroll 2
            for (int t = 0; t < NT; t++)
              acc[g][t][u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dpbusd(s0[t], w, av[t])), sc[g][t], acc[g][t][u]);
          }
        }
      }
      for (int g = 0; g < NG; g++)
        for (int t = 0; t < NT; t++) {
          const __m512* a = acc[g][t];
          const __m512 x0 = _mm512_add_ps(a[4], a[0]), x1 = _mm512_add_ps(a[5], a[1]);
          const __m512 x2 = _mm512_add_ps(a[6], a[2]), x3 = _mm512_add_ps(a[7], a[3]);
          out[g0 + g][t0 + t] = _mm512_add_ps(_mm512_add_ps(x0, x2), _mm512_add_ps(x1, x3));
        }
    }
  }
}
inline void micro_q32(const Panel& P, const MatmulInput& in, const int32_t* starts4, TokenTile tj,
                      __m512 (&out)[kRG][kRN]) {
  if (cpu_splits_zmm())
    micro_q32_tiles<1, 2>(P, in, starts4, tj, out);
  else
    micro_q32_tiles<2, 1>(P, in, starts4, tj, out);
}

// Float micro-kernel (f32 panel of f32/f16/bf16/MLX weights times f32 X): 2 x 4 dot products.
inline void micro_f32(const Panel& P, const int64_t (&pi)[2], const MatmulInput& in, TokenTile tj, float (&out)[2][4]) {
  const int64_t K = P.K;
  const float* wr[2] = {P.f + pi[0] * K, P.f + pi[1] * K};
  const float* xr[4];
  for (int j = 0; j < 4; j++) xr[j] = in.x() + tj[j] * K;
  __m512 acc[2][4];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 16) {
    const __mmask16 mask = first_lanes16(K - k);
    __m512 x[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) x[j] = _mm512_maskz_loadu_ps(mask, xr[j] + k);
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
      __m512 wv = _mm512_maskz_loadu_ps(mask, wr[i] + k);
#pragma GCC unroll 4
      for (int j = 0; j < 4; j++) acc[i][j] = _mm512_fmadd_ps(wv, x[j], acc[i][j]);
    }
  }
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) out[i][j] = reduce16_ps(acc[i][j]);
}

#if defined(LLMI_SIMD_BF16)
// bf16 weights (read in place) times bf16 activations, 2 rows x 4 tokens, in llamafile's order
// (vdpbf16ps over 32 pairs at a time, then the tree; as dot_float<bf16> for several tokens).
inline void micro_bf16(const uint8_t* const (&wr)[2], const uint16_t* const (&xr)[4], int64_t K, float (&out)[2][4]) {
  __m512 acc[2][4];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 32) {
    __m512bh x[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) x[j] = (__m512bh)_mm512_loadu_si512(xr[j] + k);
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
      const __m512bh wv = (__m512bh)_mm512_loadu_si512(wr[i] + 2 * k);
#pragma GCC unroll 4
      for (int j = 0; j < 4; j++) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], wv, x[j]);
    }
  }
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) out[i][j] = reduce16_ps(acc[i][j]);
}
#endif

// Bytes of gemm's per-product scratch for T tokens of K values: the start values of the offsets
// (0: none), the activations in micro_kq's order (0: none), and as bf16.
template <class WK>
inline size_t gemm_starts_bytes(int64_t T, int64_t K) {
  if constexpr (WK::act == ActForm::q8_32) return static_cast<size_t>(T * (K / 4)) * 4 + 64;
  if constexpr (WK::act == ActForm::q8_256) {
    if constexpr (WK::panel.mins) return static_cast<size_t>(T * (K / 64)) * 4 + 64;
  }
  return 0;
}
template <class WK>
inline size_t gemm_xk_bytes(int64_t T, int64_t K) {
  return WK::act == ActForm::q8_256 ? static_cast<size_t>(T * K) + 64 : 0;
}
// On the tiles (amx_q32_acts, gemm_amx_q32_task, gemm_amx_kq_task): the activations in the tiles'
// order (tokens rounded up to 16); their numbers (32-blocks: the scales by block; K-quants: by
// super-block, and Q4_K's mins pairs); a task's rows (32-blocks: their scales, their values, one
// row's scales as decoded; K-quants: below).
inline int64_t amx_q32_tokens(int64_t T) {
  return (T + 15) / 16 * 16;
}
inline size_t amx_q32_xa_bytes(int64_t T, int64_t K) {
  return static_cast<size_t>(amx_q32_tokens(T) * K) + 64;
}
inline size_t amx_q32_da_bytes(int64_t T, int64_t K) {
  return static_cast<size_t>(amx_q32_tokens(T) * (K / 32)) * 4 + 64;
}
inline size_t amx_q32_task_bytes(int64_t K) {
  return static_cast<size_t>(K) * 4 + static_cast<size_t>(K) * 32 + static_cast<size_t>(K / 32) * 4 + 64;
}
inline size_t amx_kq_numbers_bytes(int64_t T, int64_t K) {  // amx_kq_token_numbers' da, then tp
  return static_cast<size_t>(amx_q32_tokens(T) * (K / 256 + K / 64) + 32) * 4 + 64;
}
// A task's rows for gemm_amx_kq_task: h and l [32][K] each, then d, dmin [nsb][32] f32, the mins'
// pairs [4 nsb][32] (Q4_K), then one row's values, numbers and scales as decoded.
inline size_t amx_kq_task_bytes(int64_t K) {
  const size_t k = static_cast<size_t>(K), nsb = k / 256, tn = round_up(k / 16 * 4, 64);
  return 64 * k + 2 * nsb * 128 + nsb * 512 + round_up(k, 64) + 5 * tn + 64;
}
inline size_t gemm_xb_bytes(int64_t T, int64_t K) {
  return static_cast<size_t>(T * K) * 2 + 64;
}

// Sizes `scratch` for gemm of up to T tokens with w (every pool thread's panel). False when out
// of memory.
template <class WK>
inline bool gemm_reserve(const TensorView& w, int64_t T, MatmulScratch& scratch) {
  const int64_t K = w.ne[0];
  if (!scratch.starts.reserve(gemm_starts_bytes<WK>(T, K)) || !scratch.xk.reserve(gemm_xk_bytes<WK>(T, K)))
    return false;
#if defined(LLMI_SIMD_BF16)
  if (WK::bf16_in_place && !scratch.xb.reserve(gemm_xb_bytes(T, K))) return false;
#endif
  size_t panel = panel_layout<WK>(static_cast<size_t>(K)).total;
#if defined(LLMI_SIMD_AMX)
  if constexpr (WK::amx) {
    constexpr bool kq = WK::act == ActForm::q8_256;
    panel = std::max(panel, kq ? amx_kq_task_bytes(K) : amx_q32_task_bytes(K));
    if (!scratch.xk.reserve(amx_q32_xa_bytes(T, K)) ||
        !scratch.starts.reserve(kq ? amx_kq_numbers_bytes(T, K) : amx_q32_da_bytes(T, K)))
      return false;
  }
#endif
  for (int i = 0; i < scratch.n_panels; i++)
    if (!scratch.panels[static_cast<size_t>(i)].reserve(panel)) return false;
  return true;
}

#if defined(LLMI_SIMD_AMX)
// ---- AMX int8 tiles for 32-blocks (Q4_0, Q5_0, Q8_0) ----
// A block's signed values of 16 rows are the first operand (16 x 32 bytes: Q8_0's straight from
// the mapped rows, which hold the int8 the tiles take; Q4_0's and Q5_0's decoded less their offset,
// [rows][K]), the activations the second, laid out once per product in the tiles' order
// (amx_q32_acts), and a product adds, for 16 rows x 16 tokens, the integer dot products of one
// 32-value block (exact). The float order is then one chain per (row, token) over the blocks in
// order, acc = fma(float(sum_b), d_row_b * d_token_b, acc), for any split of the work into tasks;
// it is not llama.cpp's (its dot products keep 8 lanes of 4-value sums), so a token's results
// depend on whether it is computed alone (gemv) or with 6 or more others here.

// The activations of tokens [0, T) as the tiles' second operand, 16 tokens at a time (tokens from
// T on are zero): xa[(g nb + b) 512 + 64 kk + 4 j + c] = byte 4 kk + c of block b of token 16 g + j;
// the 32-blocks' scales by block, da[b Tp + t] (Tp = amx_q32_tokens(T); 0 beyond T). K-quants pass
// da null (their numbers are by super-block: amx_kq_token_numbers).
inline void amx_q32_acts(const MatmulInput& in, ActForm form, int64_t T, int64_t K, int8_t* xa, float* da) {
  const int64_t nb = K / 32, Tp = amx_q32_tokens(T);
  for (int64_t g = 0; g < Tp / 16; g++) {
    const int8_t* q[16];
    for (int j = 0; j < 16; j++) q[j] = 16 * g + j < T ? in.row(form, 16 * g + j).q : nullptr;
    for (int64_t b = 0; b < nb; b += 2) {  // two blocks: 16 dwords of each token
      const bool two = b + 1 < nb;
      const __mmask64 m = two ? ~0ull : 0xFFFFFFFFull;
      __m512i v[16], o[16];
      for (int j = 0; j < 16; j++) v[j] = q[j] ? _mm512_maskz_loadu_epi8(m, q[j] + 32 * b) : _mm512_setzero_si512();
      transpose16x16_epi32(v, o);  // o[kk]: dword kk of every token (kk >= 8: block b + 1's)
      for (int kk = 0; kk < (two ? 16 : 8); kk++) _mm512_store_si512(xa + (g * nb + b) * 512 + 64 * kk, o[kk]);
    }
  }
  if (!da) return;  // K-quants: amx_kq_token_numbers
  for (int64_t b = 0; b < nb; b++)
    for (int64_t t = 0; t < Tp; t++) da[b * Tp + t] = t < T ? in.row(form, t).d[b] : 0.0f;
  _mm512_storeu_ps(da + nb * Tp, _mm512_setzero_ps());  // read by a last token tile of 16
}

// The results of 16 rows (acc[i], i < n) for tokens [0, m) (acc[i][j], m <= 32) into y[j ldy + i]:
// [row][token] turned to [token][row], 16 x 16 at a time.
inline void amx_put(const float (*acc)[32], int64_t n, int m, float* y, int64_t ldy) {
  for (int g = 0; 16 * g < m; g++) {
    __m512i in16[16], out[16];
    for (int i = 0; i < 16; i++) in16[i] = _mm512_castps_si512(_mm512_load_ps(acc[i] + 16 * g));
    transpose16x16_epi32(in16, out);
    const __mmask16 mask = first_lanes16(n);
    for (int j = 0; j < 16 && 16 * g + j < m; j++)
      _mm512_mask_storeu_ps(y + (16 * g + j) * ldy, mask, _mm512_castsi512_ps(out[j]));
  }
}

// The tile shapes of gemm_amx_q32_task for n0 + n1 rows (n0 16 when n1 > 0): tiles 0-3 int32
// sums, C[2i + g] = row tile i (n_i rows) x token tile g (16 tokens); 4 and 5 the row tiles (n_i x
// 32 bytes); 6 and 7 the token tiles (8 x 64 bytes: 32 values of 16 tokens).
struct alignas(64) AmxTilesQ32 {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
  AmxTilesQ32(int n0, int n1) {
    for (int i = 0; i < 2; i++) {
      const auto n = static_cast<uint8_t>(i ? n1 : n0);  // 0: the tiles are unused (then no columns either)
      rows[2 * i] = rows[2 * i + 1] = rows[4 + i] = n;
      colsb[2 * i] = colsb[2 * i + 1] = n ? 64 : 0;
      colsb[4 + i] = n ? 32 : 0;
      rows[6 + i] = 8;
      colsb[6 + i] = 64;
    }
  }
};

// Tokens [t0, t0 + nt) (t0 a multiple of 16) times rows [r0, r0 + nr) of w, with the tiles; xa and
// da from amx_q32_acts (Tp tokens), room at scratch for amx_q32_task_bytes(K). The rows' values
// are kept in scratch, signed and 32-byte aligned [rows][K]: Q4_0 and Q5_0 decoded there first;
// Q8_0's first pass over the tokens reads them in place (asking for the blocks ahead, so that they
// come from memory while the tiles work) and keeps them there for the later passes (a block of the
// file is 34 bytes: half its tile rows would cross cache lines).
template <class WK>
inline void gemm_amx_q32_task(const TensorView& w, const int8_t* xa, const float* da, int64_t Tp, int64_t t0,
                              int64_t nt, int64_t r0, int64_t nr, uint8_t* scratch, float* y, int64_t ldy) {
  constexpr bool in_place = WK::type == DType::q8_0;
  constexpr int64_t kAhead = 8;  // blocks asked for ahead of Q8_0's first pass
  const int64_t K = w.ne[0], nb = K / 32;
  const uint64_t rb = weight_row_bytes(w), k = static_cast<uint64_t>(K);
  const uint8_t* wr = w.data + static_cast<uint64_t>(r0) * rb + 2;  // Q8_0: row r0's values of block 0
  float* dws = reinterpret_cast<float*>(scratch);                   // [nb][32] the rows' scales
  uint8_t* kept = scratch + 4 * k;                                  // [32][K] the rows' values
  const int n0 = static_cast<int>(std::min<int64_t>(16, nr)), n1 = static_cast<int>(nr) - n0;
  // Q8_0: block b's scales of the 32 rows, the first 2 of 4 bytes gathered 16 rows at a time (in
  // the first pass, once the blocks have come)
  [[maybe_unused]] const __m512i at = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(static_cast<int>(rb)));
  [[maybe_unused]] const auto scales = [&](int64_t b) {
    for (int ri = 0; ri < 2; ri++) {
      const __mmask16 live = nr > 16 * ri ? first_lanes16(nr - 16 * ri) : 0;
      const __m512i h = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, at,
                                                    wr - 2 + 16 * ri * rb + 34 * static_cast<uint64_t>(b), 1);
      _mm512_store_ps(dws + 32 * b + 16 * ri, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)));
    }
  };
  if constexpr (in_place) {  // the first blocks asked for at once (the first pass asks kAhead ahead)
    for (int64_t b = 0; b < std::min(kAhead, nb); b++)
      for (int i = 0; i < nr; i++)
        _mm_prefetch(reinterpret_cast<const char*>(wr + static_cast<uint64_t>(i) * rb + 34 * b), _MM_HINT_T0);
  } else {
    float* d = reinterpret_cast<float*>(kept + 32 * k);  // one row's scales
    for (int i = 0; i < 32; i++) {
      uint8_t* v = kept + static_cast<uint64_t>(i) * k;
      if (i < nr) {
        if (i + 2 < nr) panel_prefetch_row(w, r0 + i + 2);  // on its way while this row is decoded
        WK::decode(w.data + static_cast<uint64_t>(r0 + i) * rb, K, RowDecode{v, nullptr, d, nullptr, nullptr});
        for (uint64_t c = 0; c < k; c += 32) {
          const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + c));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + c),
                              _mm256_sub_epi8(u, _mm256_set1_epi8(static_cast<char>(WK::panel.offset))));
        }
      }
      for (int64_t b = 0; b < nb; b++) dws[32 * b + i] = i < nr ? d[b] : 0.0f;
    }
  }
  const AmxTilesQ32 cfg(n0, n1);
  _tile_loadconfig(&cfg);
  alignas(64) int32_t c[4][16][16] = {};  // [2 i + g][row][token]
  alignas(64) float acc[32][32];          // [row][token]
  for (int64_t j0 = 0; j0 < nt; j0 += 32) {
    const int m = static_cast<int>(std::min<int64_t>(32, nt - j0));
    const bool g1 = m > 16;
    const int8_t* x0 = xa + (t0 + j0) / 16 * nb * 512;
    const int8_t* x1 = x0 + nb * 512;
    const float* d0 = da + t0 + j0;
    for (int i = 0; i < 32; i++) {  // all: amx_put reads whole tiles of 16
      _mm512_store_ps(acc[i], _mm512_setzero_ps());
      _mm512_store_ps(acc[i] + 16, _mm512_setzero_ps());
    }
    const bool first = in_place && j0 == 0, keep = first && nt > 32;
    const uint8_t* w0 = first ? wr : kept;  // the values of rows 0-15 and 16-31, `st` bytes apart
    const uint64_t st = first ? rb : k, bs = first ? 34 : 32;
    const uint8_t* w1 = w0 + 16 * st;
    for (int64_t b = 0; b < nb; b++) {
      if (first && b + kAhead < nb)
        for (int i = 0; i < nr; i++)
          _mm_prefetch(reinterpret_cast<const char*>(wr + static_cast<uint64_t>(i) * rb + 34 * (b + kAhead)),
                       _MM_HINT_T0);
      if constexpr (in_place)
        if (j0 == 0) scales(b);
      _tile_zero(0);
      _tile_loadd(4, w0 + bs * b, st);
      if (keep) _tile_stored(4, kept + 32 * b, k);
      _tile_loadd(6, x0 + 512 * b, 64);
      _tile_dpbssd(0, 4, 6);
      if (g1) {
        _tile_zero(1);
        _tile_loadd(7, x1 + 512 * b, 64);
        _tile_dpbssd(1, 4, 7);
      }
      if (n1) {
        _tile_zero(2);
        _tile_loadd(5, w1 + bs * b, st);
        if (keep) _tile_stored(5, kept + 16 * k + 32 * b, k);
        _tile_dpbssd(2, 5, 6);
        if (g1) {
          _tile_zero(3);
          _tile_dpbssd(3, 5, 7);
        }
      }
      _tile_stored(0, c[0], 64);
      if (g1) _tile_stored(1, c[1], 64);
      if (n1) {
        _tile_stored(2, c[2], 64);
        if (g1) _tile_stored(3, c[3], 64);
      }
      const __m512 dv[2] = {_mm512_loadu_ps(d0 + b * Tp), _mm512_loadu_ps(d0 + b * Tp + 16)};
      for (int ri = 0; ri < 1 + (n1 > 0); ri++)
        for (int ii = 0; ii < (ri ? n1 : n0); ii++) {
          float* r = acc[16 * ri + ii];
          const __m512 s = _mm512_set1_ps(dws[32 * b + 16 * ri + ii]);
#pragma GCC unroll 2
          for (int g = 0; g < 2; g++)  // both token tiles (the second one's sums unused when m <= 16)
            _mm512_store_ps(r + 16 * g, _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[2 * ri + g][ii])),
                                                        _mm512_mul_ps(s, dv[g]), _mm512_load_ps(r + 16 * g)));
        }
    }
    for (int i0 = 0; i0 < nr; i0 += 16) amx_put(acc + i0, nr - i0, m, y + (t0 + j0) * ldy + r0 + i0, ldy);
  }
  _tile_release();
}

// ---- AMX int8 tiles for K-quants (Q4_K, Q6_K), by rows as the 32-blocks ----
// A super-block's integer sum, sum_s sc_s (q - offset) . a over its sub-blocks s, is exact and
// whole in tiles once each value is taken times its sub-block scale, p = sc (q - offset) (Q4_K:
// sc q, 0..945; Q6_K: sc (q - 32), -4064..4096), and p split as 64 h + l with l in [-32, 31] (h:
// Q4_K 0..15, Q6_K -63..64): both are int8, and p . a = 64 (h . a) + (l . a), two tile products
// 64 values deep, stored once per super-block (not once per sub-block). This is the integer
// llama.cpp's dot products make (with Q6_K's offset and Q4_K's mins apart). The float order per
// (row, token) is then one chain over the super-blocks in order:
//   acc = fma(float(sum), d_row * d_token, acc)
//   Q4_K: acc = fma(-float(mins), dmin_row * d_token, acc), mins = sum_s m_s * (sum of a over s)
// (not llama.cpp's, which keeps 8 lanes of partial sums: as for the 32-blocks, a token's results
// depend on whether it is computed alone or with 6 or more others here).
// As for the 32-blocks, the rows' h and l are the first operands (16 rows x 64 values, [rows][K])
// and the activations the second (amx_q32_acts' layout: two 32-blocks are one 64-deep tile).

// One row's values (v, unsigned, element order) times their scales (s16: one per 16 values) less
// the offset, split into h and l (above).
inline void amx_split_row(const uint8_t* v, const int16_t* s16, int offset, size_t k, uint8_t* h, uint8_t* l) {
  for (size_t c = 0; c < k; c += 32) {
    const __m512i sc =
        _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(s16[c / 16]), _mm512_set1_epi16(s16[c / 16 + 1]));
    const __m512i q = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + c)));
    const __m512i p = _mm512_mullo_epi16(_mm512_sub_epi16(q, _mm512_set1_epi16(static_cast<int16_t>(offset))), sc);
    const __m512i hi = _mm512_srai_epi16(_mm512_add_epi16(p, _mm512_set1_epi16(32)), 6);
    const __m512i lo = _mm512_sub_epi16(p, _mm512_slli_epi16(hi, 6));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(h + c), _mm512_cvtepi16_epi8(hi));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(l + c), _mm512_cvtepi16_epi8(lo));
  }
}

// The tokens' numbers by super-block for gemm_amx_kq_task (Tp = amx_q32_tokens(T); 0 beyond T):
// da[s Tp + t] the scale; Q4_K: tp[j Tp + t] the sums of 32 values 64 j.. and 64 j + 32.. as int16
// pairs (the offsets of the mins, micro_kq's pairs).
inline void amx_kq_token_numbers(const MatmulInput& in, int64_t T, int64_t K, bool mins, float* da, int32_t* tp) {
  const int64_t nsb = K / 256, Tp = amx_q32_tokens(T);
  for (int64_t t = 0; t < Tp; t++) {
    const ActQ8 a = t < T ? in.row(ActForm::q8_256, t) : ActQ8{};
    for (int64_t s = 0; s < nsb; s++) da[s * Tp + t] = t < T ? a.d[s] : 0.0f;
    if (mins)
      for (int64_t j = 0; j < K / 64; j++) {
        const int16_t* u = t < T ? a.sums + 4 * j : nullptr;
        tp[j * Tp + t] = u ? sums32_pair(u) : 0;
      }
  }
  _mm512_storeu_ps(da + nsb * Tp, _mm512_setzero_ps());  // read by a last token tile of 16
  if (mins) _mm512_storeu_si512(tp + K / 64 * Tp, _mm512_setzero_si512());
}

// The tile shapes of gemm_amx_kq_task for n rows: tiles 0-3 int32 sums, C = h x tokens 0-15, h x
// tokens 16-31, l x 0-15, l x 16-31 (n rows each); 4 and 5 the rows' h and l (n x 64 bytes); 6 and
// 7 the token tiles (16 x 64 bytes: 64 values of 16 tokens).
struct alignas(64) AmxTilesKq {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
  explicit AmxTilesKq(int n) {
    for (int i = 0; i < 6; i++) {
      rows[i] = static_cast<uint8_t>(n);
      colsb[i] = 64;
    }
    rows[6] = rows[7] = 16;
    colsb[6] = colsb[7] = 64;
  }
};

// Tokens [t0, t0 + nt) (t0 a multiple of 16) times rows [r0, r0 + nr) of a K-quant w, with the
// tiles; xa from amx_q32_acts, da and tp from amx_kq_token_numbers (Tp tokens), room at scratch
// for amx_kq_task_bytes(K).
template <class WK>
inline void gemm_amx_kq_task(const TensorView& w, const int8_t* xa, const float* da, const int32_t* tp, int64_t Tp,
                             int64_t t0, int64_t nt, int64_t r0, int64_t nr, uint8_t* scratch, float* y, int64_t ldy) {
  constexpr bool kQ4K = WK::panel.mins;
  const int64_t K = w.ne[0], nsb = K / 256, nb = K / 32;
  const uint64_t rb = weight_row_bytes(w), k = static_cast<uint64_t>(K);
  const size_t tn = round_up(k / 16 * 4, 64);
  uint8_t* hr = scratch;  // [32][K]
  uint8_t* lr = hr + 32 * k;
  float* dws = reinterpret_cast<float*>(lr + 32 * k);        // [nsb][32]
  float* dms = dws + 32 * nsb;                               // [nsb][32]
  int32_t* mp = reinterpret_cast<int32_t*>(dms + 32 * nsb);  // [4 nsb][32]
  uint8_t* vals = reinterpret_cast<uint8_t*>(mp + 128 * nsb);
  uint8_t* nums = vals + round_up(k, 64);
  const RowDecode t{vals, reinterpret_cast<int32_t*>(nums), reinterpret_cast<float*>(nums + tn),
                    reinterpret_cast<float*>(nums + 2 * tn), reinterpret_cast<int32_t*>(nums + 3 * tn)};
  int16_t* s16 = reinterpret_cast<int16_t*>(nums + 4 * tn);
  for (int i = 0; i < nr; i++) {
    const uint8_t* src = w.data + static_cast<uint64_t>(r0 + i) * rb;
    if (i + 2 < nr) panel_prefetch_row(w, r0 + i + 2);  // on its way while this row is decoded
    WK::decode(src, K, t);
    WK::amx_scales(src, K, s16);
    amx_split_row(vals, s16, WK::amx_offset, k, hr + static_cast<uint64_t>(i) * k, lr + static_cast<uint64_t>(i) * k);
    for (int64_t s = 0; s < nsb; s++) {
      dws[32 * s + i] = t.d[s];
      if constexpr (kQ4K) {
        dms[32 * s + i] = t.dmin[s];
        for (int j = 0; j < 4; j++) mp[32 * (4 * s + j) + i] = t.pairs[4 * s + j];
      }
    }
  }
  alignas(64) int32_t c[4][16][16] = {};  // h x tokens 0-15, h x 16-31, l x 0-15, l x 16-31: [row][token]
  alignas(64) float acc[16][32];          // [row][token]
  int configured = 0;
  for (int64_t j0 = 0; j0 < nt; j0 += 32) {
    const int m = static_cast<int>(std::min<int64_t>(32, nt - j0));
    const bool g1 = m > 16;
    const int8_t* x0 = xa + (t0 + j0) / 16 * nb * 512;
    const int8_t* x1 = x0 + nb * 512;
    for (int ri = 0; 16 * ri < nr; ri++) {
      const int n = static_cast<int>(std::min<int64_t>(16, nr - 16 * ri));
      if (n != configured) {
        const AmxTilesKq cfg(n);
        _tile_loadconfig(&cfg);
        configured = n;
      }
      const uint8_t* h = hr + 16 * static_cast<uint64_t>(ri) * k;
      const uint8_t* l = lr + 16 * static_cast<uint64_t>(ri) * k;
      for (int i = 0; i < 16; i++) {  // all: amx_put reads whole tiles of 16
        _mm512_store_ps(acc[i], _mm512_setzero_ps());
        _mm512_store_ps(acc[i] + 16, _mm512_setzero_ps());
      }
      for (int64_t s = 0; s < nsb; s++) {
        _tile_zero(0);
        _tile_zero(2);
        if (g1) {
          _tile_zero(1);
          _tile_zero(3);
        }
#pragma GCC unroll 4
        for (int kk = 0; kk < 4; kk++) {
          const uint64_t at = static_cast<uint64_t>(256 * s + 64 * kk);
          _tile_loadd(4, h + at, k);
          _tile_loadd(5, l + at, k);
          _tile_loadd(6, x0 + 16 * at, 64);  // blocks at / 32 and the next: 1 KiB
          _tile_dpbssd(0, 4, 6);
          _tile_dpbssd(2, 5, 6);
          if (g1) {
            _tile_loadd(7, x1 + 16 * at, 64);
            _tile_dpbssd(1, 4, 7);
            _tile_dpbssd(3, 5, 7);
          }
        }
        _tile_stored(0, c[0], 64);
        _tile_stored(2, c[2], 64);
        if (g1) {
          _tile_stored(1, c[1], 64);
          _tile_stored(3, c[3], 64);
        }
        const float* dt = da + s * Tp + t0 + j0;
        const __m512 dv[2] = {_mm512_loadu_ps(dt), _mm512_loadu_ps(dt + 16)};
        [[maybe_unused]] __m512i tv[2][4];  // the tokens' pairs of the mins
        if constexpr (kQ4K)
          for (int g = 0; g < 2; g++)
            for (int j = 0; j < 4; j++) tv[g][j] = _mm512_loadu_si512(tp + (4 * s + j) * Tp + t0 + j0 + 16 * g);
        for (int ii = 0; ii < n; ii++) {
          const int i = 16 * ri + ii;
          float* r = acc[ii];
          const __m512 d = _mm512_set1_ps(dws[32 * s + i]);
#pragma GCC unroll 2
          for (int g = 0; g < 2; g++) {  // both token tiles (the second one's sums unused when m <= 16)
            const __m512i sum =
                _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(c[g][ii]), 6), _mm512_load_si512(c[2 + g][ii]));
            __m512 a = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, dv[g]), _mm512_load_ps(r + 16 * g));
            if constexpr (kQ4K) {
              const int32_t* pr = mp + 32 * 4 * s + i;  // the row's pairs j at pr[32 j] (integers: any order)
              const __m512i m01 =
                  dpwssd(_mm512_madd_epi16(_mm512_set1_epi32(pr[0]), tv[g][0]), _mm512_set1_epi32(pr[32]), tv[g][1]);
              const __m512i m23 =
                  dpwssd(_mm512_madd_epi16(_mm512_set1_epi32(pr[64]), tv[g][2]), _mm512_set1_epi32(pr[96]), tv[g][3]);
              a = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(m01, m23)),
                                   _mm512_mul_ps(_mm512_set1_ps(dms[32 * s + i]), dv[g]), a);
            }
            _mm512_store_ps(r + 16 * g, a);
          }
        }
      }
      amx_put(acc, n, m, y + (t0 + j0) * ldy + r0 + 16 * ri, ldy);
    }
  }
  _tile_release();
}
#endif

// False when out of memory (the scratch could not grow).
template <class WK>
inline bool gemm(const TensorView& w, const MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool,
                 MatmulScratch& scratch) {
  const int64_t rows = w.rows(), T = in.n_tokens(), K = w.ne[0];
  const int64_t n_rb = (rows + kRB - 1) / kRB, n_tb = (T + kTB - 1) / kTB;
  constexpr ActForm f = WK::act;
  // per-token integers of the offsets, shared by every task: the start values of 32-blocks, the
  // int16 pairs of Q4_K's mins (Q6_K's are its activation sums as they are)
  AlignedBuffer& starts_buf = scratch.starts;
  int32_t* starts = nullptr;
#if defined(LLMI_SIMD_AMX)
  const bool amx = WK::amx && scratch.block_sums && os_grants_amx();
#else
  constexpr bool amx = false;
#endif
  if constexpr (f == ActForm::q8_32) {  // per 4 values (micro_q32; the tiles take signed values)
    if (!amx) {
      constexpr int off = WK::panel.offset;
      if (!starts_buf.reserve(gemm_starts_bytes<WK>(T, K))) return false;
      starts = starts_buf.as<int32_t>();
      for (int64_t t = 0; t < T; t++) {
        const int8_t* q = in.row(f, t).q;
        for (int64_t j = 0; j < K / 4; j++)
          starts[t * (K / 4) + j] = -off * (q[4 * j] + q[4 * j + 1] + q[4 * j + 2] + q[4 * j + 3]);
      }
    }
  } else if constexpr (f == ActForm::q8_256) {
    if (WK::panel.mins && !amx) {  // the activation sums of 32 as int16 pairs (micro_kq)
      if (!starts_buf.reserve(gemm_starts_bytes<WK>(T, K))) return false;
      starts = starts_buf.as<int32_t>();
      for (int64_t t = 0; t < T; t++) {
        const int16_t* s = in.row(f, t).sums;
        for (int64_t k = 0; k < K / 64; k++) starts[t * (K / 64) + k] = sums32_pair(s + 4 * k);
      }
    }
  }
  // K-quants: the activations in micro_kq's order (the tiles take them as they are)
  int8_t* xk = nullptr;
  if (f == ActForm::q8_256 && !amx) {
    if (!scratch.xk.reserve(gemm_xk_bytes<WK>(T, K))) return false;
    xk = scratch.xk.as<int8_t>();
    for (int64_t t = 0; t < T; t++) {
      const int8_t* q = in.row(f, t).q;
      for (int64_t k = 0; k < K; k += 64) _mm512_storeu_si512(xk + t * K + k, kq_order(_mm512_loadu_si512(q + k)));
    }
  }
#if defined(LLMI_SIMD_BF16)
  // bf16: the activations (already rounded to bf16) as bf16 once; rows are used in place
  AlignedBuffer& xb_buf = scratch.xb;
  uint16_t* xb = nullptr;
  if (WK::bf16_in_place && in.bf16_exact()) {
    if (!xb_buf.reserve(gemm_xb_bytes(T, K))) return false;
    xb = xb_buf.as<uint16_t>();
    for (int64_t i = 0; i < T * K; i += 32)
      _mm512_storeu_si512(xb + i,
                          (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(in.x() + i + 16), _mm512_loadu_ps(in.x() + i)));
  }
#endif
#if defined(LLMI_SIMD_AMX)
  // on the tiles: the activations in their order, their numbers
  int8_t* xa = nullptr;
  float* da = nullptr;
  int32_t* tp = nullptr;
  if constexpr (WK::amx) {
    if (amx) {
      constexpr bool kq = f == ActForm::q8_256;
      if (!scratch.xk.reserve(amx_q32_xa_bytes(T, K)) ||
          !scratch.starts.reserve(kq ? amx_kq_numbers_bytes(T, K) : amx_q32_da_bytes(T, K)))
        return false;
      xa = scratch.xk.as<int8_t>();
      da = scratch.starts.as<float>();
      amx_q32_acts(in, f, T, K, xa, kq ? nullptr : da);
      if constexpr (kq) {
        tp = reinterpret_cast<int32_t*>(da + amx_q32_tokens(T) * (K / 256) + 16);
        amx_kq_token_numbers(in, T, K, WK::panel.mins, da, tp);
      }
    }
  }
#endif
  LLMI_ASSERT(scratch.n_panels >= pool.size());
  std::atomic<bool> failed{false};
  pool.parallel_for(static_cast<int>(n_rb * n_tb), [&](int task, int thread) {
    AlignedBuffer& buf = scratch.panels[static_cast<size_t>(thread)];
    const int64_t rblk = task % n_rb, tblk = task / n_rb;
    const int64_t r0 = rblk * kRB, nr = std::min<int64_t>(kRB, rows - r0);
    const int64_t t0 = tblk * kTB, nt = std::min<int64_t>(kTB, T - t0);
#if defined(LLMI_SIMD_BF16)
    if (WK::bf16_in_place && xb) {
      const uint64_t rb = weight_row_bytes(w);
      for (int64_t j0 = 0; j0 < nt; j0 += 4) {
        const uint16_t* xr[4];
        for (int j = 0; j < 4; j++) xr[j] = xb + (t0 + std::min<int64_t>(j0 + j, nt - 1)) * K;
        for (int64_t i0 = 0; i0 < nr; i0 += 2) {
          const uint8_t* wr[2] = {w.data + static_cast<uint64_t>(r0 + i0) * rb,
                                  w.data + static_cast<uint64_t>(r0 + std::min<int64_t>(i0 + 1, nr - 1)) * rb};
          float out[2][4];
          micro_bf16(wr, xr, K, out);
          for (int j = 0; j < 4 && j0 + j < nt; j++)
            for (int i = 0; i < 2 && i0 + i < nr; i++) y[(t0 + j0 + j) * ldy + r0 + i0 + i] = out[i][j];
        }
      }
      return;
    }
#endif
    Panel P;
#if defined(LLMI_SIMD_AMX)
    if constexpr (WK::amx) {
      if (amx) {
        if constexpr (f == ActForm::q8_256) {
          if (!buf.reserve(amx_kq_task_bytes(K))) {
            failed.store(true, std::memory_order_relaxed);
            return;
          }
          gemm_amx_kq_task<WK>(w, xa, da, tp, amx_q32_tokens(T), t0, nt, r0, nr, buf.as<uint8_t>(), y, ldy);
        } else {
          if (!buf.reserve(amx_q32_task_bytes(K))) {
            failed.store(true, std::memory_order_relaxed);
            return;
          }
          gemm_amx_q32_task<WK>(w, xa, da, amx_q32_tokens(T), t0, nt, r0, nr, buf.as<uint8_t>(), y, ldy);
        }
        return;
      }
    }
#endif
    if (!panel_decode<WK>(w, r0, nr, buf, P)) {
      failed.store(true, std::memory_order_relaxed);
      return;
    }
    for (int64_t j0 = 0; j0 < nt; j0 += kRN) {
      const TokenTile tj{t0 + j0, t0 + nt - 1};
      if constexpr (f == ActForm::f32) {
        for (int64_t i0 = 0; i0 < nr; i0 += 2) {
          int64_t pi[2] = {i0, std::min<int64_t>(i0 + 1, nr - 1)};
          float out[2][4];
          micro_f32(P, pi, in, tj, out);
          for (int j = 0; j < kRN && j0 + j < nt; j++)
            for (int i = 0; i < 2 && i0 + i < nr; i++) y[(t0 + j0 + j) * ldy + r0 + i0 + i] = out[i][j];
        }
      } else {
        __m512 out[kRG][kRN];
        if constexpr (f == ActForm::q8_256)
          WK::micro(P, in, xk, starts, tj, out);
        else
          WK::micro(P, in, starts, tj, out);
        for (int j = 0; j < kRN && j0 + j < nt; j++) {
          float* yt = y + (t0 + j0 + j) * ldy + r0;
          for (int g = 0; g < kRG && 16 * g < nr; g++) {
            const int64_t left = nr - 16 * g;
            const __mmask16 m = first_lanes16(left);
            _mm512_mask_storeu_ps(yt + 16 * g, m, out[g][j]);
          }
        }
      }
    }
  });
  return !failed.load();
}
#endif  // LLMI_SIMD_AVX512

// Smallest token count that takes the matrix-matrix path (fixed: it must not depend on threads).
constexpr int64_t kGemmMinTokens = 6;

LLMI_KNS_END
}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
