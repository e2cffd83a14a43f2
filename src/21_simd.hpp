// ==== SIMD kernels: activation quantizers and row dot products (ref -> AVX2 -> AVX-512 -> NEON) ====
// Each function has the signature of its reference in detail::ref and a body per instruction set,
// chosen at compile time (LLMI_SIMD_*). What they must agree on with the reference:
//  * quantize_q8_32 / quantize_q8_256: bit-identical (same float operations, round half to even);
//  * integer dot products of a block: exactly (only the order of the float sums of per-block
//    results differs, so float results differ by rounding only).
// Signed x signed int8 products on x86 use |w| (unsigned) times a carrying w's sign (vpdpbusd /
// vpmaddubsw take one unsigned operand); K-quant values are non-negative, so their products
// are unsigned x signed directly, with the format's offset applied through activation sums.
namespace llminfer {
inline namespace v0_1 {
namespace detail {
LLMI_KNS_BEGIN

// fp16 -> f32 for one scale (hardware conversion where there is one).
inline float f16_scale(const uint8_t* p) {
#if defined(LLMI_SIMD_AVX2)
  return _cvtsh_ss(rd_u16(p));
#elif defined(LLMI_SIMD_NEON)
  __fp16 h;
  std::memcpy(&h, p, 2);
  return static_cast<float>(h);
#else
  return fp16_to_f32(rd_u16(p));
#endif
}

// ---- x86 helpers ----
#if defined(LLMI_SIMD_AVX512)
// Where cpu_prefetches_dots() (11_platform: AMD Zen 4), the AVX-512 one-token dot products of Q8_0,
// Q4_0, Q5_0, Q4_K and Q6_K (gemv, one row at a time) ask for the bytes ahead of the block they read
// (a line or more per block). A matrix's rows are contiguous, so this runs ahead through the rest
// of the row and into the next ones, and one thread's misses overlap. AMD EPYC (Zen 4), decode
// (bench/RESULTS.md):
//  * into L1 (prefetcht0) kDotAheadL1 bytes ahead, 1 / 2 threads: llama3.2-1b Q4_K_M 19.9 -> 23.1 /
//    34.7 -> 37.8 tokens/s, Q8_0 14.6 -> 16.0 / 24.7 -> 26.6, gemma3-1b Q4_K_M (its Q5_0 rows) 21.0
//    -> 22.8 / 37.4 -> 41.6 (Q4_K alone: 512 or 1536 bytes ahead gained less, 8192 as much, 16384
//    less);
//  * the K-quants into L2 (prefetcht1), which keeps more misses in flight, kDotAheadL2 bytes
//    ahead, 1 thread: llama3.2-1b Q4_K_M 23.1-23.5 -> 26.1-27.4, qwen3-0.6b Q4_K_M 43.5-44.0 ->
//    48.7-49.3 (8192 and 32768 bytes ahead about the same; 4096 slower than into L1).
// The 32-value types stay with L1: into L2 gave the 1B Q8_0 files 6-9% at 1 thread but slowed
// smollm2-135m, whose matrices are small, so that the bytes past a thread's last rows, read for
// nothing, weigh more (Q8_0 2-4% at 2 threads; its Q5_0 rows, 1 thread, 139-141 -> 124-126
// tokens/s). Fetching whole rows ahead in gemv instead (as many lines at a time as a row has) was
// slower than either.
constexpr int64_t kDotAheadL1 = 4096, kDotAheadL2 = 16384;
// Lines [p + ahead, p + ahead + 64 * lines) where pf: kL2 into L2 (kDotAheadL2 ahead), else into
// L1 (kDotAheadL1 ahead).
template <bool kL2>
LLMI_FORCE_INLINE void dot_prefetch(bool pf, const uint8_t* p, int lines) {
  if (pf)
    for (int i = 0; i < lines; i++) {
      if constexpr (kL2)
        _mm_prefetch(reinterpret_cast<const char*>(p + kDotAheadL2 + 64 * i), _MM_HINT_T1);
      else
        _mm_prefetch(reinterpret_cast<const char*>(p + kDotAheadL1 + 64 * i), _MM_HINT_T0);
    }
}
#endif
#if defined(LLMI_SIMD_AVX2)
// v, hidden from the optimizer: a product passed through it is never fused into a following
// add (llama.cpp's build does not fuse the sums of its dot products' remainders).
inline float unfused(float v) {
#if defined(__GNUC__)
  __asm__("" : "+x"(v));
#endif
  return v;
}

// The rest of ggml_vec_dot_f32 after its vector loop (elements i..n-1), as GCC compiled it in
// llama.cpp's x86 builds (read from the machine code of its libggml-cpu-*.so): the products in
// chunks of `width` (16 in the AVX-512 builds, 8 in the AVX2 one) while that many are left, then
// one chunk of width / 2 if that many are left, each product rounded and added in order (vmulps,
// then vaddss lane by lane); the last few, fewer than width / 2, as fused multiply-adds
// (vfmadd231ss).
inline float dot_f32_rest(const float* w, const float* x, int64_t i, int64_t n, int width, float acc) {
  const int64_t left = n - i;
  int64_t plain = left >= width ? left / width * width : 0;
  if (left - plain >= width / 2) plain += width / 2;
  for (const int64_t e = i + plain; i < e; i++) acc += unfused(w[i] * x[i]);
  for (; i < n; i++) acc = std::fma(w[i], x[i], acc);
  return acc;
}
inline float hsum_ps256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// GGML_F32x8_REDUCE's last step (llama.cpp's AVX2 ggml_vec_dot_f32/_f16): the two halves added,
// then (t0 + t1) + (t2 + t3) by two horizontal adds (hsum_ps256 adds (t0 + t2) + (t1 + t3), the
// order of its sgemm, Q8_0 and softmax sums).
inline float reduce8_hadd(__m256 v) {
  __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  t = _mm_hadd_ps(t, t);
  return _mm_cvtss_f32(_mm_hadd_ps(t, t));
}
inline float hmax_ps256(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline int hsum_epi32_256(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}
// Sum over pairs of signed int8 products, as 8 int32 lanes (4 products each).
inline __m256i dot_s8_256(__m256i w, __m256i a) {
  __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
// 32 bytes of nibbles -> [low nibbles (32 B)] and [high nibbles (32 B)] as bytes 0..15.
inline __m256i nibbles_lo256(__m256i v) {
  return _mm256_and_si256(v, _mm256_set1_epi8(15));
}
inline __m256i nibbles_hi256(__m256i v) {
  return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(15));
}
// 16 bytes of a Q4_0/Q5_0 block -> the 32 values in element order (low nibbles first): the 16
// bytes in both lanes, the high lane's 64-bit halves shifted right by 4 (each byte's high nibble
// to its low bits), then one mask: three instructions where two 128-bit masks, a shift and an
// insert took five. With scale8, Zen 3, bench-kernels' gemv column (the AVX2 one-token dots):
// Q4_0 20.4-21.6 -> 24.8-27.3 GMAC/s, Q5_0 14.5-15.7 -> 16.2-17.9 (bench/RESULTS.md).
inline __m256i q4_block_values(const uint8_t* qs) {
  const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
  return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(15));
}
// Every fp16 value as f32 (256 KiB, made on first use; the same bits as the hardware conversion):
// a block's scale by one load from the few entries a model's scales use, which stay in L1.
inline const float* f16_f32_table() {
  static const float* const table = [] {
    static float t[65536];
    for (uint32_t h = 0; h < 65536; h++) t[h] = fp16_to_f32(static_cast<uint16_t>(h));
    return t;
  }();
  return table;
}
// d(w) * d(a) in 8 lanes, dx: d(a) in 8 lanes; p: the row's fp16 scale, f16: f16_f32_table() (a
// kernel takes it once, before its loop: a call there made GCC keep the loop's sums in memory). The
// bits of _mm256_set1_ps(f16_scale(p) * d(a)) in one broadcast load from the table and a multiply,
// where the scalar way took about a fifth of the AVX2 one-token Q4_0 / Q5_0 dots' vector
// instructions and a vpbroadcastw + vcvtph2ps from the row 4 of a Q5_0 block's 16 vector uops.
// Zen 3, bench-kernels' gemv column, main -> the table: Q5_0 16.5-17.6 -> 18.3-18.8 GMAC/s, Q4_0
// 25.1-25.5 -> 28.3-30.9, Q8_0 (its one-token dot, which had the scalar way) 24.9-26.5 -> 28.4-30.6
// (bench/RESULTS.md). Also the pack kernels' products of a block for kTP tokens (dx: theirs).
LLMI_FORCE_INLINE __m256 scale8(const float* f16, const uint8_t* p, __m256 dx) {
  return _mm256_mul_ps(_mm256_broadcast_ss(f16 + rd_u16(p)), dx);
}
// Bit i of a 32-bit mask -> byte i is 0x10 (Q5_0's fifth bit).
inline __m256i q5_high_bits(uint32_t qh) {
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), shuf);
  const __m256i bits = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}
#endif

#if defined(LLMI_SIMD_AVX512)
// The first min(n, 16) of 16 lanes (n >= 0).
inline __mmask16 first_lanes16(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}
// Sum of 16 lanes as a fixed tree (upper half + lower half, twice, then (0+2) + (1+3)): the
// order GCC's _mm512_reduce_add_ps has, written out so that it does not depend on the compiler.
inline float reduce16_ps(__m512 v) {
  __m256 a = _mm256_add_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)), _mm512_castps512_ps256(v));
  __m128 b = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
  __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

// Signed int8 products summed in groups of 4 into 16 int32 lanes.
inline __m512i dot_s8_512(__m512i w, __m512i a) {
  __mmask64 neg = _mm512_movepi8_mask(w);
  __m512i as = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
  __m512i wa = _mm512_abs_epi8(w);
#if defined(LLMI_SIMD_VNNI)
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), wa, as);
#else
  return _mm512_madd_epi16(_mm512_maddubs_epi16(wa, as), _mm512_set1_epi16(1));
#endif
}
// Unsigned int8 (at most 127) times signed int8 products summed in groups of 4 into 16 int32 lanes.
inline __m512i dot_u8s8_512(__m512i w, __m512i a) {
#if defined(LLMI_SIMD_VNNI)
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, a);
#else
  return _mm512_madd_epi16(_mm512_maddubs_epi16(w, a), _mm512_set1_epi16(1));
#endif
}
// acc += sum over pairs of (u8 w * s8 a) * s16 scale (K-quant sub-block scales).
inline __m512i dot_u8s8_scaled_512(__m512i acc, __m512i w, __m512i a, __m512i scale16) {
  __m512i p = _mm512_maddubs_epi16(w, a);
#if defined(LLMI_SIMD_VNNI)
  return _mm512_dpwssd_epi32(acc, p, scale16);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(p, scale16));
#endif
}
// [s0, s1] (two per-block float scales) -> 8 lanes of s0 then 8 lanes of s1.
inline __m512 scale_pair_512(float s0, float s1) {
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(s0)), _mm256_castps_pd(_mm256_set1_ps(s1)), 1));
}
#endif

#if defined(LLMI_SIMD_NEON)
// acc += 4 groups of 4 signed int8 products.
inline int32x4_t neon_dot_s8(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, a, b);
#else
  int16x8_t p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b));
  int16x8_t p1 = vmull_high_s8(a, b);
  return vpadalq_s16(vpadalq_s16(acc, p0), p1);
#endif
}
// Bits 0..15 of `bits` -> bytes of 0x10 where set.
inline uint8x16_t neon_bits16(uint32_t bits) {
  const uint8x16_t mask = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  uint8x16_t v = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(bits)), vdup_n_u8(static_cast<uint8_t>(bits >> 8)));
  return vandq_u8(vtstq_u8(v, mask), vdupq_n_u8(0x10));
}
#endif

// ---- activation quantizers (bit-identical to ref::quantize_q8_32 / ref::quantize_q8_256) ----

// f32 -> fp16 -> f32 (round to nearest even).
inline float fp16_round(float v) {
#if defined(LLMI_SIMD_AVX2)
  // (the vector intrinsics: clang's scalar _cvtss_sh is a macro with a C99 compound literal,
  // which -Wpedantic rejects in C++)
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(v), _MM_FROUND_TO_NEAREST_INT)));
#elif defined(LLMI_SIMD_NEON)
  return static_cast<float>(static_cast<__fp16>(v));
#else
  return fp16_to_f32(f32_to_fp16(v));
#endif
}

// 32 values -> int8 round(x * scale) (half to even; |x * scale| <= 127 by construction).
inline void convert_block32(const float* x, float scale, int8_t* q) {
#if defined(LLMI_SIMD_AVX512)
  __m512 vs = _mm512_set1_ps(scale);
  const __m512i lim = _mm512_set1_epi32(127), nlim = _mm512_set1_epi32(-127);
  for (int k = 0; k < 2; k++) {
    __m512i iv = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * k), vs));
    iv = _mm512_max_epi32(_mm512_min_epi32(iv, lim), nlim);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * k), _mm512_cvtepi32_epi8(iv));
  }
#elif defined(LLMI_SIMD_AVX2)
  __m256 vs = _mm256_set1_ps(scale);
  const __m256i lim = _mm256_set1_epi32(127), nlim = _mm256_set1_epi32(-127);
  __m256i iv[4];
  for (int k = 0; k < 4; k++)
    iv[k] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), vs)), lim),
                             nlim);
  // int32 -> int8 keeping element order (packs interleave 128-bit lanes; undo with a permute)
  __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
  p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), p);
#elif defined(LLMI_SIMD_NEON)
  for (int k = 0; k < 32; k += 8) {
    int32x4_t i0 = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + k), scale));
    int32x4_t i1 = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + k + 4), scale));
    i0 = vmaxq_s32(vminq_s32(i0, vdupq_n_s32(127)), vdupq_n_s32(-127));
    i1 = vmaxq_s32(vminq_s32(i1, vdupq_n_s32(127)), vdupq_n_s32(-127));
    vst1_s8(q + k, vmovn_s16(vcombine_s16(vmovn_s32(i0), vmovn_s32(i1))));
  }
#else
  for (int i = 0; i < 32; i++) q[i] = static_cast<int8_t>(std::clamp(ref::round_even(x[i] * scale), -127, 127));
#endif
}

// max |x| over n (a multiple of 32) values.
inline float abs_max(const float* x, int n) {
#if defined(LLMI_SIMD_AVX512)
  __m512 m = _mm512_setzero_ps();
  for (int k = 0; k < n; k += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
  return _mm512_reduce_max_ps(m);
#elif defined(LLMI_SIMD_AVX2)
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 m = _mm256_setzero_ps();
  for (int k = 0; k < n; k += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + k), absmask));
  return hmax_ps256(m);
#elif defined(LLMI_SIMD_NEON)
  float32x4_t m = vdupq_n_f32(0);
  for (int k = 0; k < n; k += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + k)));
  return vmaxvq_f32(m);
#else
  float m = 0;
  for (int k = 0; k < n; k++) m = std::max(m, std::fabs(x[k]));
  return m;
#endif
}

// Sums of q over groups of 16 values.
inline void sums16(const int8_t* q, int64_t n, int16_t* sums) {
#if defined(LLMI_SIMD_AVX2)
  for (int64_t g = 0; g < n / 16; g++) {
    __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * g)));
    __m256i s = _mm256_madd_epi16(w, _mm256_set1_epi16(1));
    sums[g] = static_cast<int16_t>(hsum_epi32_256(s));
  }
#else
  ref::group_sums(q, n, 16, sums);
#endif
}

inline void quantize_q8_32(const float* x, int64_t n, int8_t* q, float* d, int16_t* sums) {
  for (int64_t b = 0; b < n / 32; b++) {
    const float amax = abs_max(x + 32 * b, 32);
    d[b] = fp16_round(amax / 127.0f);
    convert_block32(x + 32 * b, amax != 0 ? 127.0f / amax : 0.0f, q + 32 * b);
  }
#if defined(LLMI_SIMD_AVX2)
  for (int64_t b = 0; b < n / 32; b++) {
    __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * b));
    __m256i s = _mm256_sad_epu8(_mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80))), _mm256_setzero_si256());
    // sum of (q + 128) over 32 bytes, in four 64-bit lanes
    __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    t = _mm_add_epi64(t, _mm_unpackhi_epi64(t, t));
    sums[b] = static_cast<int16_t>(_mm_cvtsi128_si32(t) - 32 * 128);
  }
#else
  ref::group_sums(q, n, 32, sums);
#endif
}

inline void quantize_q8_256(const float* x, int64_t n, int8_t* q, float* d, int16_t* sums) {
  for (int64_t b = 0; b < n / 256; b++) {
    const float* xb = x + 256 * b;
    const float amax = abs_max(xb, 256);
    if (amax == 0) {
      d[b] = 0;
      std::memset(q + 256 * b, 0, 256);
      continue;
    }
    float m = 0;  // the first value of largest magnitude
#if defined(LLMI_SIMD_AVX512)
    for (int k = 0; k < 256; k += 16) {
      __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + k)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (hit) {
        m = xb[k + std::countr_zero(static_cast<unsigned>(hit))];
        break;
      }
    }
#else
    for (int i = 0; i < 256; i++)
      if (std::fabs(xb[i]) == amax) {
        m = xb[i];
        break;
      }
#endif
    const float iscale = -127.0f / m;
    d[b] = 1 / iscale;
    for (int k = 0; k < 256; k += 32) convert_block32(xb + k, iscale, q + 256 * b + k);
  }
  sums16(q, n, sums);
}

// ---- dequantization of one row (embedding lookups, float panels) ----

// n fp16 / bf16 values -> f32.
inline void f16_to_f32_row(const uint8_t* src, float* dst, int64_t n, bool bf16) {
  int64_t k = 0;
#if defined(LLMI_SIMD_AVX512)
  for (; k + 16 <= n; k += 16) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * k));
    _mm512_storeu_ps(dst + k,
                     bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h));
  }
#elif defined(LLMI_SIMD_AVX2)
  for (; k + 8 <= n; k += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * k));
    _mm256_storeu_ps(dst + k,
                     bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h));
  }
#elif defined(LLMI_SIMD_NEON)
  for (; k + 4 <= n; k += 4) {
    uint16x4_t h = vld1_u16(reinterpret_cast<const uint16_t*>(src + 2 * k));
    vst1q_f32(dst + k, bf16 ? vreinterpretq_f32_u32(vshll_n_u16(h, 16)) : vcvt_f32_f16(vreinterpret_f16_u16(h)));
  }
#endif
  for (; k < n; k++) dst[k] = bf16 ? bf16_to_f32(rd_u16(src + 2 * k)) : fp16_to_f32(rd_u16(src + 2 * k));
}

// f16 <-> f32 rows (the cache's element type). F16C on AVX2 and up, else the portable code
// (the same bits).
inline void f16_row_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t k = 0;
#if defined(LLMI_SIMD_AVX2)
  for (; k + 8 <= n; k += 8)
    _mm256_storeu_ps(dst + k, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k))));
#endif
  for (; k < n; k++) dst[k] = fp16_to_f32(src[k]);
}
inline void f32_row_to_f16(const float* src, uint16_t* dst, int64_t n) {
  int64_t k = 0;
#if defined(LLMI_SIMD_AVX2)
  for (; k + 8 <= n; k += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + k), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; k < n; k++) dst[k] = f32_to_fp16(src[k]);
}

// ---- dot products of one weight row with one quantized activation row ----

// x86 (AVX2 and AVX-512 builds): 8 lanes of 4 products, one FMA per block with d(w) * d(a), then
// the 8-lane tree: the order of llama.cpp's x86 Q8_0 kernels (ggml_vec_dot_q8_0_q8_0 and
// llamafile's sgemm), so that the result is its bits. pf (AVX-512): cpu_prefetches_dots().
#if defined(LLMI_SIMD_AVX2)
// The AVX2 one-token dots a block at a time (32 values; a super-block for the K-quants), written
// as Avx2Dot<T>: act(a, b, f16), what block b of the activations gives every row (made once per
// block; f16: f16_f32_table(), for scale8), step(p, x, acc), one row's block (p) on that row's
// accumulators, in llama.cpp's AVX2 float order, and finish(acc), the row's final tree. dotr_avx2
// runs NR rows in one loop, each its own chain: one row alone waits on its chain of FMAs (4 cycles
// each) and on its loads, which kept the one-token dots of an AVX2 CPU (Zen 3) below its memory
// bandwidth.
struct Avx2Acc {
  __m256 v;
  __m128 m;  // Q4_K's mins
};
template <DType T>
struct Avx2Dot;
// out[k * ldo] = the one-token dot of row k (at w + k * rb) with a, k < NR.
template <DType T, int NR>
LLMI_FORCE_INLINE void dotr_avx2(const uint8_t* w, uint64_t rb, const ActQ8& a, int64_t n, float* out, int64_t ldo) {
  using D = Avx2Dot<T>;
  Avx2Acc acc[NR];
#pragma GCC unroll 8
  for (int k = 0; k < NR; k++) acc[k] = {_mm256_setzero_ps(), _mm_setzero_ps()};
  const float* f16 = f16_f32_table();
  for (int64_t b = 0; b < n / D::values; b++) {
    const typename D::Act x = D::act(a, b, f16);
#pragma GCC unroll 8
    for (int k = 0; k < NR; k++) D::step(w + k * rb + static_cast<uint64_t>(b * D::bytes), x, acc[k]);
  }
#pragma GCC unroll 8
  for (int k = 0; k < NR; k++) out[k * ldo] = D::finish(acc[k]);
}
template <DType T>
LLMI_FORCE_INLINE float dot_avx2(const uint8_t* w, const ActQ8& a, int64_t n) {
  float r;
  dotr_avx2<T, 1>(w, 0, a, n, &r, 1);
  return r;
}

// Q8_0 (x86: 8 lanes of 4 products, one FMA per block with d(w) * d(a), the 8-lane tree).
template <>
struct Avx2Dot<DType::q8_0> {
  static constexpr int64_t values = 32, bytes = sizeof(ref::BlockQ8_0);
  struct Act {
    __m256i q;
    float d;    // (AVX-512: the scalar product, not measured with scale8 on those CPUs)
    __m256 d8;  // d in 8 lanes (AVX2: scale8)
    const float* f16;
  };
  LLMI_FORCE_INLINE static Act act(const ActQ8& a, int64_t b, const float* f16) {
    return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b)), a.d[b], _mm256_set1_ps(a.d[b]), f16};
  }
  LLMI_FORCE_INLINE static void step(const uint8_t* p, const Act& x, Avx2Acc& acc) {
    const __m256i dv = dot_s8_256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2)), x.q);
#if defined(LLMI_SIMD_AVX512)
    acc.v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dv), _mm256_set1_ps(f16_scale(p) * x.d), acc.v);
#else
    acc.v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dv), scale8(x.f16, p, x.d8), acc.v);
#endif
  }
  LLMI_FORCE_INLINE static float finish(const Avx2Acc& acc) {
    return hsum_ps256(acc.v);
  }
};
#endif
#if defined(LLMI_SIMD_AVX512)
LLMI_FORCE_INLINE float q8_0_row(const uint8_t* w, const ActQ8& a, int64_t nb, bool pf) {
  using D = Avx2Dot<DType::q8_0>;
  Avx2Acc acc = {_mm256_setzero_ps(), _mm_setzero_ps()};
  for (int64_t b = 0; b < nb; b++) {
    dot_prefetch<false>(pf, w + b * D::bytes, 1);
    D::step(w + b * D::bytes, D::act(a, b, nullptr), acc);
  }
  return D::finish(acc);
}
#endif
inline float dot_q8_0(const uint8_t* w, const ActQ8& a, int64_t n) {
  [[maybe_unused]] const int64_t nb = n / 32;
  [[maybe_unused]] constexpr int64_t bs = sizeof(ref::BlockQ8_0);
#if defined(LLMI_SIMD_AVX512)
  return q8_0_row(w, a, nb, cpu_prefetches_dots());
#elif defined(LLMI_SIMD_AVX2)
  return dot_avx2<DType::q8_0>(w, a, n);
#elif defined(LLMI_SIMD_NEON)
  float acc = 0;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    int32x4_t s = neon_dot_s8(vdupq_n_s32(0), vld1q_s8(reinterpret_cast<const int8_t*>(p + 2)), vld1q_s8(a.q + 32 * b));
    s = neon_dot_s8(s, vld1q_s8(reinterpret_cast<const int8_t*>(p + 18)), vld1q_s8(a.q + 32 * b + 16));
    acc += f16_scale(p) * a.d[b] * static_cast<float>(vaddvq_s32(s));
  }
  return acc;
#else
  return ref::vec_dot_q8_0(w, a, n);
#endif
}

// Q4_0 and Q5_0 share the nibble layout; Q5_0 adds a fifth bit and a different offset. Per block:
// its bytes, where its nibbles start, and what is subtracted from each value.
template <bool kQ5>
struct Q45_0 {
  static constexpr int64_t bs = kQ5 ? sizeof(ref::BlockQ5_0) : sizeof(ref::BlockQ4_0);
  static constexpr int qs_off = kQ5 ? 6 : 2;
  static constexpr int offset = kQ5 ? 16 : 8;
};
#if defined(LLMI_SIMD_AVX512)
// Two blocks per step, as unsigned values (0..15, or 0..31 with the fifth bit added through a byte
// mask) against the activations: sum (v - offset) * a = sum v * a - offset * sum a. av: the 64
// activations of blocks b, b + 1; the second term (q45_0_offset_sums) depends on them alone, so
// that several rows share it (dotr_q4_q5_0).
template <bool kQ5>
inline __m512i q45_0_offset_sums(__m512i av) {
  return dot_u8s8_512(_mm512_set1_epi8(static_cast<char>(Q45_0<kQ5>::offset)), av);
}
// acc += blocks b, b + 1 of the row at p (p: block b) times av, oa = q45_0_offset_sums(av).
template <bool kQ5>
inline void q45_0_pair(const uint8_t* p, __m512i av, __m512i oa, const ActQ8& a, int64_t b, __m256& acc) {
  constexpr int64_t bs = Q45_0<kQ5>::bs;
  constexpr int qs_off = Q45_0<kQ5>::qs_off;
  const __m512i m4 = _mm512_set1_epi8(15);
  // a block's 16 bytes go to two 128-bit lanes: low nibbles (weights 0..15) from the first, high
  // nibbles (weights 16..31) from the second
  const __m512i shifts =
      _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0);
  __m512i z = _mm512_inserti64x4(
      _mm512_castsi256_si512(
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + qs_off)))),
      _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + bs + qs_off))), 1);
  __m512i v = _mm512_and_si512(_mm512_srlv_epi16(z, shifts), m4);
  if constexpr (kQ5) {
    const __mmask64 hb = static_cast<__mmask64>(rd_u32(p + 2)) | static_cast<__mmask64>(rd_u32(p + bs + 2)) << 32;
    v = _mm512_mask_add_epi8(v, hb, v, _mm512_set1_epi8(16));
  }
  const __m512 q = _mm512_cvtepi32_ps(_mm512_sub_epi32(dot_u8s8_512(v, av), oa));
  // one 8-lane FMA per block, in block order: llama.cpp's chain (its AVX-512 build runs the AVX2
  // ggml_vec_dot_q4_0_q8_0 / _q5_0_q8_0), so that the result is its bits
  acc = _mm256_fmadd_ps(_mm512_castps512_ps256(q), _mm256_set1_ps(f16_scale(p) * a.d[b]), acc);
  acc = _mm256_fmadd_ps(_mm512_extractf32x8_ps(q, 1), _mm256_set1_ps(f16_scale(p + bs) * a.d[b + 1]), acc);
}
// acc += block b of the row (p: that block) times its activations: an odd last block.
template <bool kQ5>
inline void q45_0_block(const uint8_t* p, const ActQ8& a, int64_t b, __m256& acc) {
  __m256i v = q4_block_values(p + Q45_0<kQ5>::qs_off);
  if constexpr (kQ5) v = _mm256_or_si256(v, q5_high_bits(rd_u32(p + 2)));
  v = _mm256_sub_epi8(v, _mm256_set1_epi8(Q45_0<kQ5>::offset));
  __m256i dv = dot_s8_256(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b)));
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dv), _mm256_set1_ps(f16_scale(p) * a.d[b]), acc);
}
// dot_q4_0 / dot_q5_0 of nb blocks (AVX-512); pf: cpu_prefetches_dots().
template <bool kQ5>
LLMI_FORCE_INLINE float q45_0_row(const uint8_t* w, const ActQ8& a, int64_t nb, bool pf) {
  constexpr int64_t bs = Q45_0<kQ5>::bs;
  __m256 acc = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    dot_prefetch<false>(pf, w + b * bs, 1);  // its 36 or 44 bytes
    const __m512i av = _mm512_loadu_si512(a.q + 32 * b);
    q45_0_pair<kQ5>(w + b * bs, av, q45_0_offset_sums<kQ5>(av), a, b, acc);
  }
  if (b < nb) q45_0_block<kQ5>(w + b * bs, a, b, acc);
  return hsum_ps256(acc);
}
#endif
#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
// Q4_0 / Q5_0: the values unsigned (0..15, 0..31) times the activations, less offset * the sum of
// each lane's 4 activations (made once per block for all rows): the int32 lanes of dot_s8_256 of
// the signed values, so llama.cpp's bits.
template <bool kQ5>
struct Avx2DotQ45 {
  static constexpr int64_t values = 32, bytes = Q45_0<kQ5>::bs;
  struct Act {
    __m256i q, off;
    __m256 d;
    const float* f16;
  };
  LLMI_FORCE_INLINE static Act act(const ActQ8& a, int64_t b, const float* f16) {
    const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b));
    const __m256i off = _mm256_madd_epi16(
        _mm256_maddubs_epi16(_mm256_set1_epi8(static_cast<char>(Q45_0<kQ5>::offset)), q), _mm256_set1_epi16(1));
    return {q, off, _mm256_set1_ps(a.d[b]), f16};
  }
  LLMI_FORCE_INLINE static void step(const uint8_t* p, const Act& x, Avx2Acc& acc) {
    __m256i v = q4_block_values(p + Q45_0<kQ5>::qs_off);
    if constexpr (kQ5) v = _mm256_or_si256(v, q5_high_bits(rd_u32(p + 2)));
    const __m256i dv = _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(v, x.q), _mm256_set1_epi16(1)), x.off);
    acc.v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dv), scale8(x.f16, p, x.d), acc.v);
  }
  LLMI_FORCE_INLINE static float finish(const Avx2Acc& acc) { return hsum_ps256(acc.v); }
};
template <>
struct Avx2Dot<DType::q4_0> : Avx2DotQ45<false> {};
template <>
struct Avx2Dot<DType::q5_0> : Avx2DotQ45<true> {};
#endif
template <bool kQ5>
inline float dot_q4_q5_0(const uint8_t* w, const ActQ8& a, int64_t n) {
  [[maybe_unused]] const int64_t nb = n / 32;
  [[maybe_unused]] constexpr int64_t bs = Q45_0<kQ5>::bs;
  [[maybe_unused]] constexpr int qs_off = Q45_0<kQ5>::qs_off;
  [[maybe_unused]] constexpr int offset = Q45_0<kQ5>::offset;
#if defined(LLMI_SIMD_AVX512)
  return q45_0_row<kQ5>(w, a, nb, cpu_prefetches_dots());
#elif defined(LLMI_SIMD_AVX2)
  constexpr DType kType = kQ5 ? DType::q5_0 : DType::q4_0;
  return dot_avx2<kType>(w, a, n);
#elif defined(LLMI_SIMD_NEON)
  float acc = 0;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    uint8x16_t v = vld1q_u8(p + qs_off);
    uint8x16_t lo = vandq_u8(v, vdupq_n_u8(15)), hi = vshrq_n_u8(v, 4);
    if constexpr (kQ5) {
      uint32_t qh = rd_u32(p + 2);
      lo = vorrq_u8(lo, neon_bits16(qh));
      hi = vorrq_u8(hi, neon_bits16(qh >> 16));
    }
    int8x16_t l = vsubq_s8(vreinterpretq_s8_u8(lo), vdupq_n_s8(offset));
    int8x16_t h = vsubq_s8(vreinterpretq_s8_u8(hi), vdupq_n_s8(offset));
    int32x4_t s = neon_dot_s8(neon_dot_s8(vdupq_n_s32(0), l, vld1q_s8(a.q + 32 * b)), h, vld1q_s8(a.q + 32 * b + 16));
    acc += f16_scale(p) * a.d[b] * static_cast<float>(vaddvq_s32(s));
  }
  return acc;
#else
  return kQ5 ? ref::vec_dot_q5_0(w, a, n) : ref::vec_dot_q4_0(w, a, n);
#endif
}
inline float dot_q4_0(const uint8_t* w, const ActQ8& a, int64_t n) {
  return dot_q4_q5_0<false>(w, a, n);
}
inline float dot_q5_0(const uint8_t* w, const ActQ8& a, int64_t n) {
  return dot_q4_q5_0<true>(w, a, n);
}

// Q4_K: the 8 six-bit scales and mins of a super-block as two 8-byte groups.
inline void q4k_unpack_scales(const uint8_t* s12, uint64_t* sc8, uint64_t* m8) {
  uint32_t s0 = rd_u32(s12), s1 = rd_u32(s12 + 4), s2 = rd_u32(s12 + 8);
  uint32_t sc_lo = s0 & 0x3F3F3F3Fu, m_lo = s1 & 0x3F3F3F3Fu;
  uint32_t sc_hi = (s2 & 0x0F0F0F0Fu) | (((s0 >> 6) & 0x03030303u) << 4);
  uint32_t m_hi = ((s2 >> 4) & 0x0F0F0F0Fu) | (((s1 >> 6) & 0x03030303u) << 4);
  *sc8 = sc_lo | static_cast<uint64_t>(sc_hi) << 32;
  *m8 = m_lo | static_cast<uint64_t>(m_hi) << 32;
}

// llama.cpp's x86 float order of the K-quant dot products (ggml_vec_dot_q4_K_q8_K and _q6_K_q8_K,
// the AVX2 code, which its AVX-512 builds run too), which the x86 kernels below, their multi-token
// forms (dotn_*) and the AVX-512 matrix micro-kernel (micro_kq) take, so that their results are its
// bits. Per super-block, 8 int32 lanes: lane l holds the products of the values 4l..4l+3 of every
// 32 consecutive ones (each times its sub-block scale), and for Q6_K also its -32 offset for
// sub-blocks 2l and 2l + 1 (-32 * (sc * sum of the activations) of each); one 8-lane FMA per
// super-block with d(w) * d(a). Q4_K's mins: 4 int32 lanes, lane k = m_2k * s_2k + m_2k+1 * s_2k+1
// (s_j the sum of the activations of sub-block j), one 4-lane FMA with -dmin(w) * d(a). The result:
// hsum of the 8 lanes (the tree of hsum_ps256), plus (Q4_K) (m0 + m2) + (m1 + m3) of the 4.
#if defined(LLMI_SIMD_AVX2)
// A super-block's 8 activation sums of 32 values (int16): ActQ8::sums32's when the input has them
// (at sums32), else the pairs of its 16 sums of 16 values (at sums) added.
LLMI_FORCE_INLINE __m128i q4k_sums32(const int16_t* sums32, const int16_t* sums) {
  if (sums32) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(sums32));
  const __m256i s16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums));
  return _mm_hadd_epi16(_mm256_castsi256_si128(s16), _mm256_extracti128_si256(s16, 1));
}
// Q4_K's mins of one super-block as llama.cpp's 4 int32 lanes (m8: the 8 mins as bytes 0..7; the
// activation sums as q4k_sums32 takes them).
inline __m128i q4k_min_lanes(__m128i m8, const int16_t* sums32, const int16_t* sums) {
  return _mm_madd_epi16(_mm_cvtepu8_epi16(m8), q4k_sums32(sums32, sums));
}
inline __m128i q4k_min_lanes(__m128i m8, const int16_t* sums) {
  return q4k_min_lanes(m8, nullptr, sums);
}
inline __m128i q4k_min_lanes(uint64_t m8, const int16_t* sums) {
  return q4k_min_lanes(_mm_cvtsi64_si128(static_cast<int64_t>(m8)), sums);
}
// Q4_K's 8 six-bit scales (bytes 0..7) and 8 mins (bytes 8..15) of a super-block, from its 12 scale
// bytes, in each 128-bit lane of x (the 16 bytes from the 12): q4k_unpack_scales in 10 vector
// operations instead of about 20 scalar ones, for two super-blocks at once.
inline __m256i q4k_scales_mins_x2(__m256i x) {
  auto c = [](__m128i v) { return _mm256_broadcastsi128_si256(v); };
  // a: the bytes giving the low bits of each output (scales 0-3, 4-7, mins 0-3, 4-7); b: the bytes
  // whose top two bits are the high bits of scales and mins 4-7
  const __m256i a = _mm256_shuffle_epi8(x, c(_mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11)));
  const __m256i b = _mm256_shuffle_epi8(x, c(_mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7)));
  const __m256i lo = _mm256_and_si256(a, c(_mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0)));
  const __m256i hi_min =
      _mm256_and_si256(_mm256_srli_epi16(a, 4), c(_mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)));
  return _mm256_or_si256(_mm256_or_si256(lo, hi_min),
                         _mm256_and_si256(_mm256_srli_epi16(b, 2), _mm256_set1_epi8(0x30)));
}
// The same for one super-block's 12 scale bytes at s12 (the 16 bytes from s12 are read, inside the
// block).
inline __m128i q4k_scales_mins(const uint8_t* s12) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s12));
  return _mm256_castsi256_si128(q4k_scales_mins_x2(_mm256_castsi128_si256(x)));
}
// (m0 + m2) + (m1 + m3) of the mins' accumulator.
inline float reduce4_ps(__m128 v) {
  v = _mm_add_ps(v, _mm_movehl_ps(v, v));
  return _mm_cvtss_f32(_mm_add_ss(v, _mm_movehdup_ps(v)));
}
// int16 element i of each 128-bit lane of v in all 8 of that lane's elements (one vpshufb with a
// constant from a table, where _mm256_set1_epi16 of a scalar scale took about four operations).
inline __m256i bcast16_lanes(__m256i v, int i) {
  alignas(32) static constexpr uint8_t kIdx[8][32] = {
#define LLMI_B16(i)                                                                        \
  {2 * (i), 2 * (i) + 1, 2 * (i), 2 * (i) + 1, 2 * (i), 2 * (i) + 1, 2 * (i), 2 * (i) + 1, \
   2 * (i), 2 * (i) + 1, 2 * (i), 2 * (i) + 1, 2 * (i), 2 * (i) + 1, 2 * (i), 2 * (i) + 1, \
   2 * (i), 2 * (i) + 1, 2 * (i), 2 * (i) + 1, 2 * (i), 2 * (i) + 1, 2 * (i), 2 * (i) + 1, \
   2 * (i), 2 * (i) + 1, 2 * (i), 2 * (i) + 1, 2 * (i), 2 * (i) + 1, 2 * (i), 2 * (i) + 1}
      LLMI_B16(0), LLMI_B16(1), LLMI_B16(2), LLMI_B16(3), LLMI_B16(4), LLMI_B16(5), LLMI_B16(6), LLMI_B16(7)};
#undef LLMI_B16
  return _mm256_shuffle_epi8(v, _mm256_load_si256(reinterpret_cast<const __m256i*>(kIdx[i])));
}
#endif

#if defined(LLMI_SIMD_AVX512)
// The 256 activations of super-block b as 4 vectors of 64.
inline void load_act_256(const ActQ8& a, int64_t b, __m512i q[4]) {
  for (int i = 0; i < 4; i++) q[i] = _mm512_loadu_si512(a.q + ref::kQK_K * b + 64 * i);
}
// acc, accm += super-block p (at w + 144 b) in llama.cpp's order, from its integer lanes (isum) and
// its 4 min lanes (ml), the two FMAs of dot_q4_k.
// The two halves of isum hold two sub-blocks' values at the same positions: added, llama.cpp's 8
// lanes.
// q4k_tail: the same with the factors made, d = d(w) * d(a) and dmin = dmin(w) * d(a) in every lane.
LLMI_FORCE_INLINE void q4k_tail(__m512i isum, __m128 ml, __m256 d, __m128 dmin, __m256& acc, __m128& accm) {
  const __m256i isum8 = _mm256_add_epi32(_mm512_castsi512_si256(isum), _mm512_extracti64x4_epi64(isum, 1));
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum8), d, acc);
  accm = _mm_fnmadd_ps(ml, dmin, accm);
}
LLMI_FORCE_INLINE void q4k_superblock_tail(const uint8_t* p, const ActQ8& a, int64_t b, __m512i isum, __m128 ml,
                                           __m256& acc, __m128& accm) {
  const float dx = a.d[b];
  q4k_tail(isum, ml, _mm256_set1_ps(f16_scale(p) * dx), _mm_set1_ps(f16_scale(p + 2) * dx), acc, accm);
}
// acc, accm += Q4_K super-block p times the activations' super-block b (q0..q3: its 4 vectors of 64
// values): its two FMAs in llama.cpp's order (dot_q4_k; dotr_q4_k, several rows sharing q0..q3).
// The integer part as two chains of two (one per 128 weights), and each scale vector one vpshufb of
// the 8 scales in every 128-bit lane: AMD EPYC (Zen 4), 1 thread, dot_q4_k 29-34 -> 30-37 GMAC/s
// (bench-kernels' gemv, in cache) against four vpermw and one chain of four, which also kept the
// activations in memory.
LLMI_FORCE_INLINE void q4k_superblock(const uint8_t* p, __m512i q0, __m512i q1, __m512i q2, __m512i q3, const ActQ8& a,
                                      int64_t b, __m256& acc, __m128& accm) {
  const __m512i m4 = _mm512_set1_epi8(15);
  // the vpshufb control whose int16 lanes 0..15 take scale i and 16..31 scale j
  auto pick = [](int i, int j) {
    const int64_t si = static_cast<int64_t>((2 * i + 1) << 8 | 2 * i) * 0x0001000100010001LL;
    const int64_t sj = static_cast<int64_t>((2 * j + 1) << 8 | 2 * j) * 0x0001000100010001LL;
    return _mm512_set_epi64(sj, sj, sj, sj, si, si, si, si);
  };
  const __m128i scm = q4k_scales_mins(p + 4);
  const __m512i sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(scm));  // the 8 scales as int16, in each lane
  const __m512i v0 = _mm512_loadu_si512(p + 16), v1 = _mm512_loadu_si512(p + 80);
  const __m512i lo0 = _mm512_and_si512(v0, m4), hi0 = _mm512_and_si512(_mm512_srli_epi16(v0, 4), m4);
  const __m512i lo1 = _mm512_and_si512(v1, m4), hi1 = _mm512_and_si512(_mm512_srli_epi16(v1, 4), m4);
  // 128 weights per chain (bytes 64c..64c+63 of the values: sub-blocks 4c..4c+3); 0x44 takes
  // sub-blocks 4c, 4c+1, 0xEE 4c+2, 4c+3
  __m512i i0 = dot_u8s8_scaled_512(_mm512_setzero_si512(), _mm512_shuffle_i64x2(lo0, hi0, 0x44), q0,
                                   _mm512_shuffle_epi8(sc, pick(0, 1)));
  __m512i i1 = dot_u8s8_scaled_512(_mm512_setzero_si512(), _mm512_shuffle_i64x2(lo1, hi1, 0x44), q2,
                                   _mm512_shuffle_epi8(sc, pick(4, 5)));
  i0 = dot_u8s8_scaled_512(i0, _mm512_shuffle_i64x2(lo0, hi0, 0xEE), q1, _mm512_shuffle_epi8(sc, pick(2, 3)));
  i1 = dot_u8s8_scaled_512(i1, _mm512_shuffle_i64x2(lo1, hi1, 0xEE), q3, _mm512_shuffle_epi8(sc, pick(6, 7)));
  const __m128i ml =
      q4k_min_lanes(_mm_unpackhi_epi64(scm, scm), a.sums32 ? a.sums32 + 8 * b : nullptr, a.sums + 16 * b);
  q4k_superblock_tail(p, a, b, _mm512_add_epi32(i0, i1), _mm_cvtepi32_ps(ml), acc, accm);
}
#endif

#if defined(LLMI_SIMD_AVX512) && defined(LLMI_SIMD_VNNI)
// The integer lanes of Q4_K super-block p times its 256 activations in nibble order (qn,
// ActQ8::qn); s16: the block's 8 scales as int16 in the low 128 bits (dwords 0..3: the scale pairs
// (0, 1), (2, 3), (4, 5), (6, 7)). Lanes i and i + 8 added are llama.cpp's lane i, the integers
// of q4k_superblock, by fewer operations:
//  * a vpdpbusd per 64 values gives two sub-blocks' sums of 4 products, D_j[i] in 8 int32 lanes
//    each (|D| <= 4 * 15 * 128 < 2^15): the low nibbles of a 64-byte load hold sub-blocks 4c, 4c+2
//    (c: its half of the block), the high ones 4c+1, 4c+3, and qn has the activations in that order;
//  * the high nibbles enter as 16 * hi (one vpand, no shift), so their sums are 16 * D;
//  * D_j and D_j+1 are packed as the int16 pair (D_j, D_j+1) of each lane (a shift by 12 and a
//    vpternlogd), and one vpmaddwd with the scale pairs gives sc_j * D_j + sc_j+1 * D_j+1.
// AMD EPYC (Zen 4), 1 thread: bench-kernels' gemv q4_K 33-37 -> 40-49 GMAC/s (bench/RESULTS.md).
LLMI_FORCE_INLINE __m512i q4k_isum_nibbles(const uint8_t* p, const int8_t* qn, __m512i s16) {
  const __m512i m4 = _mm512_set1_epi8(15), m4h = _mm512_set1_epi8(-16), z = _mm512_setzero_si512();
  const __m512i v0 = _mm512_loadu_si512(p + 16), v1 = _mm512_loadu_si512(p + 80);
  const __m512i r0 = _mm512_dpbusd_epi32(z, _mm512_and_si512(v0, m4), _mm512_loadu_si512(qn));
  const __m512i r1 = _mm512_dpbusd_epi32(z, _mm512_and_si512(v0, m4h), _mm512_loadu_si512(qn + 64));
  const __m512i r2 = _mm512_dpbusd_epi32(z, _mm512_and_si512(v1, m4), _mm512_loadu_si512(qn + 128));
  const __m512i r3 = _mm512_dpbusd_epi32(z, _mm512_and_si512(v1, m4h), _mm512_loadu_si512(qn + 192));
  // (low 16 bits of the first) | (the second << 12): 0xEC = (A & C) | B
  const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
  const __m512i x0 = _mm512_ternarylogic_epi32(r0, _mm512_slli_epi32(r1, 12), lo16, 0xEC);
  const __m512i x1 = _mm512_ternarylogic_epi32(r2, _mm512_slli_epi32(r3, 12), lo16, 0xEC);
  const __m512i s01 = _mm512_permutexvar_epi32(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), s16);
  const __m512i s23 = _mm512_permutexvar_epi32(_mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2), s16);
  return _mm512_dpwssd_epi32(_mm512_madd_epi16(x0, s01), x1, s23);
}
// dot_q4_k for an input with ActQ8::qn (and sums32), two super-blocks per step (their scales
// unpacked together); pf: cpu_prefetches_dots().
LLMI_FORCE_INLINE float q4k_nibbles_row(const uint8_t* w, const ActQ8& a, int64_t nb, bool pf) {
  constexpr int64_t bs = sizeof(ref::BlockQ4_K);
  __m256 acc = _mm256_setzero_ps();
  __m128 accm = _mm_setzero_ps();
  int64_t b = 0;
  for (; b + 1 < nb; b += 2) {
    const uint8_t* p = w + b * bs;
    dot_prefetch<true>(pf, p, 5);  // the 288 bytes of the two blocks
    const __m256i x =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 4))),
                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + bs + 4)), 1);
    // as int16: the scales and mins of block b, then those of b + 1
    const __m512i sm = _mm512_cvtepu8_epi16(q4k_scales_mins_x2(x));
    const __m512i i0 = q4k_isum_nibbles(p, a.qn + ref::kQK_K * b, sm);
    const __m512i i1 = q4k_isum_nibbles(p + bs, a.qn + ref::kQK_K * (b + 1), _mm512_shuffle_i64x2(sm, sm, 0xEE));
    // the 8 mins of each block times its 8 sums of 32
    const __m256i mins = _mm512_castsi512_si256(_mm512_shuffle_i64x2(sm, sm, 0xDD));
    const __m256 ml = _mm256_cvtepi32_ps(
        _mm256_madd_epi16(mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sums32 + 8 * b))));
    // d(w) * d(a) and dmin(w) * d(a) of both blocks at once, [d, dmin of b, d, dmin of b + 1]: the
    // products of q4k_superblock_tail, in 11 operations instead of 20
    const __m128i h =
        _mm_insert_epi32(_mm_cvtsi32_si128(static_cast<int>(rd_u32(p))), static_cast<int>(rd_u32(p + bs)), 1);
    const __m128 da = _mm_castsi128_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(a.d + b)));
    const __m128 f = _mm_mul_ps(_mm_cvtph_ps(h), _mm_unpacklo_ps(da, da));
    q4k_tail(i0, _mm256_castps256_ps128(ml), _mm256_broadcastss_ps(f), _mm_permute_ps(f, 0x55), acc, accm);
    q4k_tail(i1, _mm256_extractf128_ps(ml, 1), _mm256_permutexvar_ps(_mm256_set1_epi32(2), _mm256_castps128_ps256(f)),
             _mm_permute_ps(f, 0xFF), acc, accm);
  }
  if (b < nb) {
    const uint8_t* p = w + b * bs;
    const __m128i scm = q4k_scales_mins(p + 4);
    const __m512i isum = q4k_isum_nibbles(p, a.qn + ref::kQK_K * b, _mm512_castsi128_si512(_mm_cvtepu8_epi16(scm)));
    const __m128i ml = q4k_min_lanes(_mm_unpackhi_epi64(scm, scm), a.sums32 + 8 * b, nullptr);
    q4k_superblock_tail(p, a, b, isum, _mm_cvtepi32_ps(ml), acc, accm);
  }
  return hsum_ps256(acc) + reduce4_ps(accm);
}
inline float dot_q4_k_nibbles(const uint8_t* w, const ActQ8& a, int64_t nb) {
  return q4k_nibbles_row(w, a, nb, cpu_prefetches_dots());
}
#endif

#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
// Q4_K (llama.cpp's order above): a super-block's scales and mins unpacked in vectors, each
// scale to its lanes by one shuffle.
template <>
struct Avx2Dot<DType::q4_K> {
  static constexpr int64_t values = ref::kQK_K, bytes = sizeof(ref::BlockQ4_K);
  struct Act {
    const int8_t* q;
    __m128i s32;  // the 8 activation sums of 32 values
    float d;
  };
  LLMI_FORCE_INLINE static Act act(const ActQ8& a, int64_t b, const float*) {
    return {a.q + ref::kQK_K * b, q4k_sums32(a.sums32 ? a.sums32 + 8 * b : nullptr, a.sums + 16 * b), a.d[b]};
  }
  LLMI_FORCE_INLINE static void step(const uint8_t* p, const Act& x, Avx2Acc& acc) {
    const __m256i m4 = _mm256_set1_epi8(15);
    const __m128i sm = q4k_scales_mins(p + 4);  // scales in bytes 0..7, mins in 8..15
    const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
    __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 + 32 * c));
      const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      const __m256i p_lo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + 64 * c)));
      const __m256i p_hi =
          _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + 64 * c + 32)));
      isum = _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_madd_epi16(p_lo, bcast16_lanes(sc, 2 * c)),
                                                     _mm256_madd_epi16(p_hi, bcast16_lanes(sc, 2 * c + 1))));
    }
    acc.v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(f16_scale(p) * x.d), acc.v);
    const __m128i ml = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm, 8)), x.s32);
    acc.m = _mm_fnmadd_ps(_mm_cvtepi32_ps(ml), _mm_set1_ps(f16_scale(p + 2) * x.d), acc.m);
  }
  LLMI_FORCE_INLINE static float finish(const Avx2Acc& acc) {
    return hsum_ps256(acc.v) + reduce4_ps(acc.m);
  }
};
#endif

inline float dot_q4_k(const uint8_t* w, const ActQ8& a, int64_t n) {
  [[maybe_unused]] const int64_t nb = n / ref::kQK_K;
  [[maybe_unused]] constexpr int64_t bs = sizeof(ref::BlockQ4_K);
  // x86: llama.cpp's order (see above)
#if defined(LLMI_SIMD_AVX512)
#if defined(LLMI_SIMD_VNNI)
  if (a.qn) return dot_q4_k_nibbles(w, a, nb);
#endif
  __m256 acc = _mm256_setzero_ps();
  __m128 accm = _mm_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const int8_t* q8 = a.q + ref::kQK_K * b;
    q4k_superblock(w + b * bs, _mm512_loadu_si512(q8), _mm512_loadu_si512(q8 + 64), _mm512_loadu_si512(q8 + 128),
                   _mm512_loadu_si512(q8 + 192), a, b, acc, accm);
  }
  return hsum_ps256(acc) + reduce4_ps(accm);
#elif defined(LLMI_SIMD_AVX2)
  return dot_avx2<DType::q4_K>(w, a, n);
#elif defined(LLMI_SIMD_NEON)
  float acc = 0;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    const int8_t* q8 = a.q + ref::kQK_K * b;
    int sum_q = 0, sum_m = 0;
    for (int c = 0; c < 4; c++) {
      int sc_lo, m_lo, sc_hi, m_hi;
      ref::q4k_scale_min(p + 4, 2 * c, &sc_lo, &m_lo);
      ref::q4k_scale_min(p + 4, 2 * c + 1, &sc_hi, &m_hi);
      uint8x16_t v0 = vld1q_u8(p + 16 + 32 * c), v1 = vld1q_u8(p + 32 + 32 * c);
      int8x16_t l0 = vreinterpretq_s8_u8(vandq_u8(v0, vdupq_n_u8(15))),
                l1 = vreinterpretq_s8_u8(vandq_u8(v1, vdupq_n_u8(15)));
      int8x16_t h0 = vreinterpretq_s8_u8(vshrq_n_u8(v0, 4)), h1 = vreinterpretq_s8_u8(vshrq_n_u8(v1, 4));
      int32x4_t slo =
          neon_dot_s8(neon_dot_s8(vdupq_n_s32(0), l0, vld1q_s8(q8 + 64 * c)), l1, vld1q_s8(q8 + 64 * c + 16));
      int32x4_t shi =
          neon_dot_s8(neon_dot_s8(vdupq_n_s32(0), h0, vld1q_s8(q8 + 64 * c + 32)), h1, vld1q_s8(q8 + 64 * c + 48));
      sum_q += sc_lo * vaddvq_s32(slo) + sc_hi * vaddvq_s32(shi);
      sum_m += m_lo * (a.sums[16 * b + 4 * c] + a.sums[16 * b + 4 * c + 1]) +
               m_hi * (a.sums[16 * b + 4 * c + 2] + a.sums[16 * b + 4 * c + 3]);
    }
    float d = f16_scale(p) * a.d[b], dmin = f16_scale(p + 2) * a.d[b];
    acc += d * static_cast<float>(sum_q) - dmin * static_cast<float>(sum_m);
  }
  return acc;
#else
  return ref::vec_dot_q4_k(w, a, n);
#endif
}

#if defined(LLMI_SIMD_AVX512)
// acc += Q6_K super-block p from its integer lanes (isum) and its 16 scales as int16 (sc): the
// two halves of isum hold values at the same positions of two 32-value chunks: added, and the
// offset, llama.cpp's 8 lanes, then its FMA.
LLMI_FORCE_INLINE void q6k_superblock_tail(const uint8_t* p, const ActQ8& a, int64_t b, __m256i sc, __m512i isum,
                                           __m256& acc) {
  // the -32 offset: -32 * (sc_2l * s_2l + sc_2l+1 * s_2l+1) in lane l (s_j: the sum of a over
  // sub-block j), llama.cpp's lanes
  const __m256i off = _mm256_madd_epi16(sc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sums + 16 * b)));
  __m256i isum8 = _mm256_add_epi32(_mm512_castsi512_si256(isum), _mm512_extracti64x4_epi64(isum, 1));
  isum8 = _mm256_sub_epi32(isum8, _mm256_slli_epi32(off, 5));
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum8), _mm256_set1_ps(f16_scale(p + 208) * a.d[b]), acc);
}
// acc += Q6_K super-block p times the activations' super-block b (q: load_act_256): its FMA in
// llama.cpp's order (dot_q6_k; dotr_q6_k, several rows sharing q).
inline void q6k_superblock(const uint8_t* p, const __m512i q[4], const ActQ8& a, int64_t b, __m256& acc) {
  const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
  // qh bits for weights 0..31 / 32..63 of a half: shift left by 4 / 2; for 64..95 / 96..127: by 0 / right 2
  const __m512i shl = _mm512_set_epi64(0x0002000200020002, 0x0002000200020002, 0x0002000200020002, 0x0002000200020002,
                                       0x0004000400040004, 0x0004000400040004, 0x0004000400040004, 0x0004000400040004);
  const __m512i shr =
      _mm512_set_epi64(0x0002000200020002, 0x0002000200020002, 0x0002000200020002, 0x0002000200020002, 0, 0, 0, 0);
  // int16 lane i of a 64-weight scale vector takes scale 4k + i / 8
  const __m512i sel = _mm512_set_epi64(0x0003000300030003, 0x0003000300030003, 0x0002000200020002, 0x0002000200020002,
                                       0x0001000100010001, 0x0001000100010001, 0, 0);
  __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));
  __m512i sc512 = _mm512_castsi256_si512(sc);
  __m512i isum = _mm512_setzero_si512();
  for (int h = 0; h < 2; h++) {
    __m512i ql = _mm512_loadu_si512(p + 64 * h);
    __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h)));
    __m512i v0 = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m30));
    __m512i v1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                 _mm512_and_si512(_mm512_srlv_epi16(qh, shr), m30));
    __m512i s0 = _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16(static_cast<short>(8 * h))), sc512);
    __m512i s1 =
        _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16(static_cast<short>(8 * h + 4))), sc512);
    isum = dot_u8s8_scaled_512(isum, v0, q[2 * h], s0);
    isum = dot_u8s8_scaled_512(isum, v1, q[2 * h + 1], s1);
  }
  q6k_superblock_tail(p, a, b, sc, isum, acc);
}
#endif

#if defined(LLMI_SIMD_AVX512) && defined(LLMI_SIMD_VNNI)
// q6k_superblock's integer lanes by fewer operations (dot_q6_k): per 128 weights (half h of the
// block),
//  * x: weights 0-63 of the half, their 6-bit values (the low nibbles of ql and qh's bits 0-1 /
//    2-3 shifted up by 4 / 2); y: weights 64-127, their values times 1 / 4 (the high nibbles of ql
//    shifted down by 4 / 2 under qh's bits 4-5 / 6-7, which stay in place);
//  * one vpdpbusd each gives sums of 4 products, R_x and R_y, in 16 int32 lanes
//    (|R| <= 4 * 63 * 128 < 2^15; R_y is 4 times its sum in the high 256 bits);
//  * R_x and R_y are packed as the int16 pair of each lane (R_y shifted by 16 / 14 and a
//    vpternlogd), and one vpmaddwd with the pairs of their sub-blocks' scales (one vpermw) gives
//    sc_x * R_x + sc_y * R_y.
// Lane l of the result holds weights 4l..4l+3 of 32-weight chunks: lanes i and i + 8 added are
// llama.cpp's lane i before the offset. sc: the block's 16 scales as int16.
// Per 128 weights 7 shifts, permutes and multiplies against 9 (with 2 vpermw, 2 vpmaddubsw, 2
// vpdpwssd): AMD EPYC (Zen 4), 1 thread, bench-kernels' gemv q6_K, "small" (in L2) 34.4-34.6 ->
// 37.6-37.9 GMAC/s, the larger shapes 32-36 -> 33-39 (bench/RESULTS.md).
LLMI_FORCE_INLINE __m512i q6k_isum_vnni(const uint8_t* p, const int8_t* q8, __m512i sc) {
  const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30), lo16 = _mm512_set1_epi32(0xFFFF);
  auto halves64 = [](int64_t lo, int64_t hi) { return _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo); };
  const __m512i shl = halves64(0x0004000400040004, 0x0002000200020002);  // qh's bits 0-1 / 2-3 to 4-5
  const __m512i shr = shl;                                               // ql's high nibbles to 0-3 / 2-5
  const __m512i ylo = halves64(0x0F0F0F0F0F0F0F0F, 0x3C3C3C3C3C3C3C3C);
  const __m512i yhi = halves64(0x3030303030303030, static_cast<int64_t>(0xC0C0C0C0C0C0C0C0ULL));
  const __m512i pack = halves64(0x0000001000000010, 0x0000000E0000000E);  // R_y's shift: 16 / 14
  __m512i isum = _mm512_setzero_si512();
  for (int h = 0; h < 2; h++) {
    const __m512i ql = _mm512_loadu_si512(p + 64 * h);
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h)));
    // 0xEC: (A & C) | B
    const __m512i x = _mm512_ternarylogic_epi32(ql, _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m30), m4, 0xEC);
    const __m512i y = _mm512_ternarylogic_epi32(_mm512_srlv_epi16(ql, shr), _mm512_and_si512(qh, yhi), ylo, 0xEC);
    const __m512i z = _mm512_setzero_si512();
    const __m512i rx = _mm512_dpbusd_epi32(z, x, _mm512_loadu_si512(q8 + 128 * h));
    const __m512i ry = _mm512_dpbusd_epi32(z, y, _mm512_loadu_si512(q8 + 128 * h + 64));
    const __m512i xy = _mm512_ternarylogic_epi32(rx, _mm512_sllv_epi32(ry, pack), lo16, 0xEC);
    // int16 lane 2l takes the scale of sub-block 8h + l / 4, lane 2l + 1 that of 8h + 4 + l / 4
    alignas(64) static constexpr int16_t kSel[2][32] = {
        {0, 4, 0, 4, 0, 4, 0, 4, 1, 5, 1, 5, 1, 5, 1, 5, 2, 6, 2, 6, 2, 6, 2, 6, 3, 7, 3, 7, 3, 7, 3, 7},
        {8,  12, 8,  12, 8,  12, 8,  12, 9,  13, 9,  13, 9,  13, 9,  13,
         10, 14, 10, 14, 10, 14, 10, 14, 11, 15, 11, 15, 11, 15, 11, 15}};
    const __m512i s = _mm512_permutexvar_epi16(_mm512_load_si512(kSel[h]), sc);
    isum = _mm512_dpwssd_epi32(isum, xy, s);
  }
  return isum;
}
#endif

#if defined(LLMI_SIMD_AVX512) && defined(LLMI_SIMD_VNNI)
// dot_q6_k (AVX-512 VNNI); pf: cpu_prefetches_dots().
LLMI_FORCE_INLINE float q6k_vnni_row(const uint8_t* w, const ActQ8& a, int64_t nb, bool pf) {
  constexpr int64_t bs = sizeof(ref::BlockQ6_K);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    dot_prefetch<true>(pf, w + b * bs, 4);  // its 210 bytes
    const uint8_t* p = w + b * bs;
    const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));
    const __m512i isum = q6k_isum_vnni(p, a.q + ref::kQK_K * b, _mm512_castsi256_si512(sc));
    q6k_superblock_tail(p, a, b, sc, isum, acc);
  }
  return hsum_ps256(acc);
}
#endif

#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
// The 32 six-bit values (0..63) of step k < 4 of half h of a Q6_K super-block: values 128 h + 32 k
// .. + 31, from ql = the half's low nibbles at 64 h + 32 (k & 1) and qh = its high bit pairs at
// 128 + 32 h.
LLMI_FORCE_INLINE __m256i q6k_step_values(__m256i ql, __m256i qh, int k) {
  const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
  const __m256i lo4 = k < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
  const __m256i hi2 = k == 0   ? _mm256_slli_epi16(qh, 4)
                      : k == 1 ? _mm256_slli_epi16(qh, 2)
                      : k == 2 ? qh
                               : _mm256_srli_epi16(qh, 2);
  return _mm256_or_si256(lo4, _mm256_and_si256(hi2, m30));
}
// The 128 six-bit values of half h of the Q6_K super-block at p as 4 vectors of 32 bytes (0..63):
// v[k] holds values 128 h + 32 k .. 128 h + 32 k + 31.
LLMI_FORCE_INLINE void q6k_half_values(const uint8_t* p, int h, __m256i v[4]) {
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h));
#pragma GCC unroll 4
  for (int k = 0; k < 4; k++)
    v[k] = q6k_step_values(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * h + 32 * (k & 1))), qh, k);
}
// Q6_K (llama.cpp's order above): the values unsigned (0..63), their -32 from the activation sums
// of 16 values; the scales of sub-blocks j, j + 1 to the two lanes by one shuffle.
template <>
struct Avx2Dot<DType::q6_K> {
  static constexpr int64_t values = ref::kQK_K, bytes = sizeof(ref::BlockQ6_K);
  struct Act {
    const int8_t* q;
    __m256i s16;  // the 16 activation sums of 16 values
    float d;
  };
  LLMI_FORCE_INLINE static Act act(const ActQ8& a, int64_t b, const float*) {
    return {a.q + ref::kQK_K * b, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sums + 16 * b)), a.d[b]};
  }
  LLMI_FORCE_INLINE static void step(const uint8_t* p, const Act& x, Avx2Acc& acc) {
    const __m128i s8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192));
    const __m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(s8), x.s16);
    __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
    // the even scales as int16 in the low lane, the odd in the high: sub-blocks j, j + 1 (j even)
    // take element j / 2 of each lane
    const __m256i eo =
        _mm256_cvtepi8_epi16(_mm_shuffle_epi8(s8, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15)));
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      __m256i v[4];
      q6k_half_values(p, h, v);
#pragma GCC unroll 4
      for (int k = 0; k < 4; k++) {
        const __m256i pr =
            _mm256_maddubs_epi16(v[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + 128 * h + 32 * k)));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pr, bcast16_lanes(eo, 4 * h + k)));  // 8h + 2k, + 1
      }
    }
    acc.v = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(f16_scale(p + 208) * x.d), acc.v);
  }
  LLMI_FORCE_INLINE static float finish(const Avx2Acc& acc) {
    return hsum_ps256(acc.v);
  }
};
#endif

inline float dot_q6_k(const uint8_t* w, const ActQ8& a, int64_t n) {
  [[maybe_unused]] const int64_t nb = n / ref::kQK_K;
  [[maybe_unused]] constexpr int64_t bs = sizeof(ref::BlockQ6_K);
#if defined(LLMI_SIMD_AVX512) && defined(LLMI_SIMD_VNNI)
  return q6k_vnni_row(w, a, nb, cpu_prefetches_dots());
#elif defined(LLMI_SIMD_AVX512)
  __m256 acc = _mm256_setzero_ps();
  const bool pf = cpu_prefetches_dots();
  for (int64_t b = 0; b < nb; b++) {
    dot_prefetch<true>(pf, w + b * bs, 4);  // its 210 bytes
    __m512i q[4];
    load_act_256(a, b, q);
    q6k_superblock(w + b * bs, q, a, b, acc);
  }
  return hsum_ps256(acc);
#elif defined(LLMI_SIMD_AVX2)
  return dot_avx2<DType::q6_K>(w, a, n);
#elif defined(LLMI_SIMD_NEON)
  float acc = 0;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    const int8_t* scs = reinterpret_cast<const int8_t*>(p + 192);
    const int8_t* q8 = a.q + ref::kQK_K * b;
    int sum = 0;
    for (int h = 0; h < 2; h++) {
      const uint8_t* ql = p + 64 * h;
      const uint8_t* qh = p + 128 + 32 * h;
      for (int l = 0; l < 32; l += 16) {
        uint8x16_t a0 = vld1q_u8(ql + l), a1 = vld1q_u8(ql + 32 + l), hb = vld1q_u8(qh + l);
        const uint8x16_t m4 = vdupq_n_u8(15), m30 = vdupq_n_u8(0x30);
        uint8x16_t v[4] = {
            vorrq_u8(vandq_u8(a0, m4), vandq_u8(vshlq_n_u8(hb, 4), m30)),
            vorrq_u8(vandq_u8(a1, m4), vandq_u8(vshlq_n_u8(hb, 2), m30)),
            vorrq_u8(vshrq_n_u8(a0, 4), vandq_u8(hb, m30)),
            vorrq_u8(vshrq_n_u8(a1, 4), vandq_u8(vshrq_n_u8(hb, 2), m30)),
        };
        for (int k = 0; k < 4; k++) {
          int e = 128 * h + 32 * k + l;  // first weight of these 16 (one sub-block)
          int8x16_t sv = vsubq_s8(vreinterpretq_s8_u8(v[k]), vdupq_n_s8(32));
          sum += scs[e / 16] * vaddvq_s32(neon_dot_s8(vdupq_n_s32(0), sv, vld1q_s8(q8 + e)));
        }
      }
    }
    acc += f16_scale(p + 208) * a.d[b] * static_cast<float>(sum);
  }
  return acc;
#else
  return ref::vec_dot_q6_k(w, a, n);
#endif
}

// ---- float weights times f32 activations ----

// sgemm: the product is part of a matmul of several tokens (llama.cpp's order differs then).
// bf16_exact: every x is a bf16 value (bf16 weights may use vdpbf16ps).
template <DType T>
inline float dot_float(const uint8_t* w, const float* x, int64_t n, [[maybe_unused]] bool sgemm = false,
                       [[maybe_unused]] bool bf16_exact = false) {
#if defined(LLMI_SIMD_AVX512)
  auto load = [&](int64_t i) {
    if constexpr (T == DType::f32)
      return _mm512_loadu_ps(reinterpret_cast<const float*>(w) + i);
    else if constexpr (T == DType::f16)
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * i)));
    else
      return _mm512_castsi512_ps(_mm512_slli_epi32(
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * i))), 16));
  };
#if defined(LLMI_SIMD_BF16)
  if (T == DType::bf16 && bf16_exact) {
    // llama.cpp's order with vdpbf16ps (the activations already rounded to bf16): several tokens,
    // n a multiple of 32: llamafile's sgemm, one 32-pair accumulator then the tree; otherwise
    // ggml_vec_dot_bf16: two accumulators over chunks of 64, each tree added in double, then the
    // rest one product at a time in double.
    auto wv = [&](int64_t i) { return (__m512bh)_mm512_loadu_si512(w + 2 * i); };
    auto xv = [&](int64_t i) { return _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i)); };
    if (sgemm && n % 32 == 0) {
      __m512 acc = _mm512_setzero_ps();
      for (int64_t i = 0; i < n; i += 32) acc = _mm512_dpbf16_ps(acc, wv(i), xv(i));
      return reduce16_ps(acc);
    }
    __m512 c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
      c1 = _mm512_dpbf16_ps(c1, wv(i), xv(i));
      c2 = _mm512_dpbf16_ps(c2, wv(i + 32), xv(i + 32));
    }
    double r = static_cast<double>(reduce16_ps(c1));
    r += static_cast<double>(reduce16_ps(c2));
    for (; i < n; i++) r += static_cast<double>(bf16_to_f32(rd_u16(w + 2 * i)) * x[i]);
    return static_cast<float>(r);
  }
#endif
  if constexpr (T != DType::bf16) {
    // llama.cpp's order for f32 / f16 weights (the activations already rounded to f16 for f16),
    // so that the result is its bits. Several tokens, n a multiple of 16: llamafile's sgemm, 16
    // lanes in order then the 16-lane tree. Otherwise ggml_vec_dot_f32 / _f16: 4 x 16 lanes
    // over chunks of 64, folded (0+2) + (1+3), the tree, then the rest one product at a time
    // (f16: summed in double).
    if (sgemm && n % 16 == 0) {
      __m512 acc = _mm512_setzero_ps();
      for (int64_t i = 0; i < n; i += 16) acc = _mm512_fmadd_ps(load(i), _mm512_loadu_ps(x + i), acc);
      return reduce16_ps(acc);
    }
    const int64_t np = n & ~int64_t(63);
    float red = 0;
    if (np > 0) {
      __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
      for (int64_t i = 0; i < np; i += 64)
        for (int k = 0; k < 4; k++) acc[k] = _mm512_fmadd_ps(load(i + 16 * k), _mm512_loadu_ps(x + i + 16 * k), acc[k]);
      red = reduce16_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3])));
    }
    if constexpr (T == DType::f32) {
      return dot_f32_rest(reinterpret_cast<const float*>(w), x, np, n, 16, red);
    } else {
      double r = red;
      for (int64_t i = np; i < n; i++) r += static_cast<double>(fp16_to_f32(rd_u16(w + 2 * i)) * x[i]);
      return static_cast<float>(r);
    }
  }
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int k = 0; k < 4; k++) acc[k] = _mm512_fmadd_ps(load(i + 16 * k), _mm512_loadu_ps(x + i + 16 * k), acc[k]);
  for (; i + 16 <= n; i += 16) acc[0] = _mm512_fmadd_ps(load(i), _mm512_loadu_ps(x + i), acc[0]);
  float r = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
#elif defined(LLMI_SIMD_AVX2)
  // llama.cpp's order in its AVX2 build (the activations already rounded to f16 / bf16 for those
  // weights), so that the result is its bits. Several tokens, n a multiple of 8: llamafile's sgemm,
  // one chain of 8 lanes then hsum_ps256. Otherwise ggml_vec_dot_f32 / _f16 / _bf16: 4 x 8 lanes
  // over chunks of 32, folded (0+2) + (1+3) (bf16: the same fold, then hsum_ps256 instead of
  // reduce8_hadd), then the rest one product at a time (f16 and bf16: summed in double). A bf16
  // product of bf16 activations is exact, so ggml's multiply-then-add is our FMA.
  auto load = [&](int64_t i) {
    if constexpr (T == DType::f32)
      return _mm256_loadu_ps(reinterpret_cast<const float*>(w) + i);
    else if constexpr (T == DType::f16)
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
    else
      return _mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i))), 16));
  };
  if (sgemm && n % 8 == 0) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8) acc = _mm256_fmadd_ps(load(i), _mm256_loadu_ps(x + i), acc);
    return hsum_ps256(acc);
  }
  const int64_t np = n & ~int64_t(31);
  float red = 0;
  if (np > 0) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t i = 0; i < np; i += 32)
      for (int k = 0; k < 4; k++) acc[k] = _mm256_fmadd_ps(load(i + 8 * k), _mm256_loadu_ps(x + i + 8 * k), acc[k]);
    const __m256 folded = _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]));
    red = T == DType::bf16 ? hsum_ps256(folded) : reduce8_hadd(folded);
  }
  if constexpr (T == DType::f32) {
    return dot_f32_rest(reinterpret_cast<const float*>(w), x, np, n, 8, red);
  } else {
    double r = red;
    for (int64_t i = np; i < n; i++) {
      const float wv = T == DType::f16 ? fp16_to_f32(rd_u16(w + 2 * i)) : bf16_to_f32(rd_u16(w + 2 * i));
      r += static_cast<double>(wv * x[i]);
    }
    return static_cast<float>(r);
  }
#elif defined(LLMI_SIMD_NEON)
  auto load = [&](int64_t i) {
    if constexpr (T == DType::f32)
      return vld1q_f32(reinterpret_cast<const float*>(w) + i);
    else if constexpr (T == DType::f16)
      return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(w + 2 * i))));
    else
      return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(w + 2 * i)), 16));
  };
  float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 4; k++) acc[k] = vfmaq_f32(acc[k], load(i + 4 * k), vld1q_f32(x + i + 4 * k));
  for (; i + 4 <= n; i += 4) acc[0] = vfmaq_f32(acc[0], load(i), vld1q_f32(x + i));
  float r = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
#else
  float r = 0;
  int64_t i = 0;
#endif
#if !defined(LLMI_SIMD_AVX2) || defined(LLMI_SIMD_AVX512)  // (the AVX2 body has returned)
  // remaining elements (and the whole row on the scalar path), as the reference does
  if (i < n) {
    if constexpr (T == DType::f32)
      r += ref::vec_dot_f32(w + 4 * i, x + i, n - i);
    else if constexpr (T == DType::f16)
      r += ref::vec_dot_f16(w + 2 * i, x + i, n - i);
    else
      r += ref::vec_dot_bf16(w + 2 * i, x + i, n - i);
  }
  return r;
#endif
}

// MLX affine row `row` times f32 x: per group, scale * sum(q * x) + bias * sum(x) (xs: group sums).
inline float dot_mlx(const TensorView& w, int64_t row, const float* x, const float* xs) {
  const int bits = ref::mlx_bits(w.type);
  const int64_t n = w.ne[0], gs = w.group_size, groups = n / gs;
  const uint8_t* q = w.data + static_cast<uint64_t>(row) * static_cast<uint64_t>(n * bits / 8);
  // (the scales' type chosen once per row)
  return ref::with_float_reader(w.aux_type, [&](auto aux) -> float {
    float acc = 0;
#if defined(LLMI_SIMD_AVX512)
    if (gs % 16 == 0) {
      __m512 vacc = _mm512_setzero_ps();
      for (int64_t g = 0; g < groups; g++) {
        __m512 gacc = _mm512_setzero_ps();
        for (int64_t i = g * gs; i < (g + 1) * gs; i += 16) {
          __m128i v;
          if (bits == 4) {
            __m128i b8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i / 2));
            __m128i lo = _mm_and_si128(b8, _mm_set1_epi8(15)),
                    hi = _mm_and_si128(_mm_srli_epi16(b8, 4), _mm_set1_epi8(15));
            v = _mm_unpacklo_epi8(lo, hi);
          } else {
            v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i));
          }
          gacc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v)), _mm512_loadu_ps(x + i), gacc);
        }
        vacc = _mm512_fmadd_ps(gacc, _mm512_set1_ps(aux(w.scales, row * groups + g)), vacc);
        acc += aux(w.biases, row * groups + g) * xs[g];
      }
      return acc + _mm512_reduce_add_ps(vacc);
    }
#elif defined(LLMI_SIMD_AVX2)
    if (gs % 16 == 0) {
      __m256 vacc = _mm256_setzero_ps();
      for (int64_t g = 0; g < groups; g++) {
        __m256 gacc = _mm256_setzero_ps();
        for (int64_t i = g * gs; i < (g + 1) * gs; i += 16) {
          __m128i v;
          if (bits == 4) {
            __m128i b8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i / 2));
            __m128i lo = _mm_and_si128(b8, _mm_set1_epi8(15)), hi = _mm_and_si128(_mm_srli_epi16(b8, 4), _mm_set1_epi8(15));
            v = _mm_unpacklo_epi8(lo, hi);
          } else {
            v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i));
          }
          gacc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)), _mm256_loadu_ps(x + i), gacc);
          gacc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8))), _mm256_loadu_ps(x + i + 8), gacc);
        }
        vacc = _mm256_fmadd_ps(gacc, _mm256_set1_ps(aux(w.scales, row * groups + g)), vacc);
        acc += aux(w.biases, row * groups + g) * xs[g];
      }
      return acc + hsum_ps256(vacc);
    }
#endif
    for (int64_t g = 0; g < groups; g++) {
      float sqx = 0;
      for (int64_t i = g * gs; i < (g + 1) * gs; i++) sqx += static_cast<float>(ref::mlx_value(q, bits, i)) * x[i];
      acc += aux(w.scales, row * groups + g) * sqx + aux(w.biases, row * groups + g) * xs[g];
    }
    return acc;
  });
}

// The float dot products as table entries (26_kernels_end).
inline float dot_f32(const uint8_t* w, const float* x, int64_t n, bool sgemm, bool bf16_exact) {
  return dot_float<DType::f32>(w, x, n, sgemm, bf16_exact);
}
inline float dot_f16(const uint8_t* w, const float* x, int64_t n, bool sgemm, bool bf16_exact) {
  return dot_float<DType::f16>(w, x, n, sgemm, bf16_exact);
}
inline float dot_bf16(const uint8_t* w, const float* x, int64_t n, bool sgemm, bool bf16_exact) {
  return dot_float<DType::bf16>(w, x, n, sgemm, bf16_exact);
}

LLMI_KNS_END
}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
