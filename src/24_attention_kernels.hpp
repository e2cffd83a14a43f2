// ==== Attention kernels: one query head against a run of cached keys and values ====
// The forward pass (43_forward) walks the KV ring and calls these on contiguous runs of cells
// ([cells][hd], f16 or f32). SIMD bodies follow the scalar ones: dot products summed in lanes,
// exp by a polynomial (within 2 ulp of expf), softmax sums in double as ggml. With an f32 cache
// the AVX-512 and the AVX2 builds follow the float order of llama.cpp's build for the same
// instruction set exactly (its ggml_vec_dot_f32, llamafile sgemm, expf and softmax).
namespace llminfer {
inline namespace v0_1 {
namespace detail {
LLMI_KNS_BEGIN

#if defined(LLMI_SIMD_AVX512)
// 16 cache values (f16 or f32) as f32.
inline __m512 load16_kv(const uint8_t* p, bool f16) {
  return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))
             : _mm512_loadu_ps(reinterpret_cast<const float*>(p));
}
inline __m512 maskload16_kv(const uint8_t* p, bool f16, __mmask16 m) {
  return f16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p))
             : _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(p));
}
// e^x for 16 lanes, the same float operations as ggml's AVX-512 expf (llama.cpp's softmax and
// SiLU), so that our softmax weights and SiLU values are its bits: n = round(x / ln 2) by the
// 1.5 * 2^23 trick, b = x - n ln 2 in two parts, a degree-5 polynomial in b, times 2^n; |n| > 192
// gives 0 or infinity. Within about 1.5 ulp of expf.
inline __m512 exp16(__m512 x) {
  const __m512 shift = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shift);
  const __m512 n = _mm512_sub_ps(z, shift);
  const __m512 b =
      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 hi =
      _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                      _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f)));
  const __m512 j = _mm512_fmadd_ps(hi, u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  const __m512 r = _mm512_scalef_ps(j, n);
  const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
  if (!big) return r;
  const __m512 edge = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ),
                                           _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
  return _mm512_mask_blend_ps(big, r, edge);
}
#endif

#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
inline __m256 load8_kv(const uint8_t* p, bool f16) {
  return f16 ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))
             : _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}
// e^x for 8 lanes, the same float operations as ggml's AVX2 expf (llama.cpp's AVX2 softmax and
// SiLU): n = round(x / ln 2) by the 1.5 * 2^23 trick, b = x - n ln 2 in two parts, j = a
// degree-5 polynomial in b without its constant term, e^x = k + k j with k = 2^n built from the
// exponent bits; |n| > 126 scales in two steps, |n| > 192 gives 0 or infinity. Within about
// 1.5 ulp of expf.
inline __m256 exp8(__m256 x) {
  const __m256 shift = _mm256_set1_ps(0x1.8p23f);
  const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift);
  const __m256 n = _mm256_sub_ps(z, shift);
  const __m256 b =
      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f), _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
  const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
  const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1.0f))));
  const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
  const __m256 big = _mm256_cmp_ps(an, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
  const __m256 u = _mm256_mul_ps(b, b);
  const __m256 j = _mm256_fmadd_ps(
      _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                      _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
      u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
  if (!_mm256_movemask_ps(big)) return _mm256_fmadd_ps(j, k, k);
  // 2^n = s1 * s2 with both factors representable; beyond 192 the square of s1 is 0 or infinity
  const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                     _mm256_set1_epi32(static_cast<int>(0x82000000u)));
  const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
  const __m256 huge = _mm256_cmp_ps(an, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
  const __m256 scaled = _mm256_blendv_ps(_mm256_fmadd_ps(k, j, k), _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1), big);
  return _mm256_blendv_ps(scaled, _mm256_mul_ps(s1, s1), huge);
}
#endif

#if defined(LLMI_SIMD_AVX512)
// The sums of the lanes of a, b, c, d, each paired as _mm512_reduce_add_ps pairs them (halves, then
// quarters, then lanes 0+2 and 1+3, then those two), so the same bits, with the last steps shared.
inline __m128 reduce_add4_ps(__m512 a, __m512 b, __m512 c, __m512 d) {
  auto half = [](__m512 x) {
    return _mm256_add_ps(_mm512_castps512_ps256(x), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
  };
  const __m256 h[4] = {half(a), half(b), half(c), half(d)};
  // [a.lo + a.hi | b.lo + b.hi] (128-bit halves), the same for c, d
  const __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(h[0], h[1], 0x20), _mm256_permute2f128_ps(h[0], h[1], 0x31));
  const __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(h[2], h[3], 0x20), _mm256_permute2f128_ps(h[2], h[3], 0x31));
  // lanes 0+2 and 1+3: [a0+a2, a1+a3, c0+c2, c1+c3 | b.., d..]
  const __m256 w = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  // [a, c, a, c | b, d, b, d]
  const __m256 r =
      _mm256_add_ps(_mm256_shuffle_ps(w, w, _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(w, w, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m128 lo = _mm256_castps256_ps128(r), hi = _mm256_extractf128_ps(r, 1);
  return _mm_unpacklo_ps(lo, hi);  // [a, b, c, d]
}
#endif

#if defined(LLMI_SIMD_AVX512)
// The sums of the lanes of r[0..15], each paired as _mm512_reduce_add_ps pairs them (lanes i and
// i + 8, then i and i + 4, then 0 + 2 and 1 + 3, then those two), so the same bits, with every step
// taken for 16 registers at once: lane 4 * a + b of the result holds the sum of r[4 * b + a].
inline __m512 reduce_add16_ps(const __m512* r) {
  __m512 h[8], w[4], x[2];
#pragma GCC unroll 8
  for (int p = 0; p < 8; p++)  // [r.lo + r.hi | s.lo + s.hi] (256-bit halves) of r = r[2p], s = r[2p + 1]
    h[p] = _mm512_add_ps(_mm512_shuffle_f32x4(r[2 * p], r[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(r[2 * p], r[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
#pragma GCC unroll 4
  for (int p = 0; p < 4; p++)  // quarter b: the 128-bit halves of r[4p + b]'s 8 lanes added
    w[p] = _mm512_add_ps(_mm512_shuffle_f32x4(h[2 * p], h[2 * p + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(h[2 * p], h[2 * p + 1], _MM_SHUFFLE(3, 1, 3, 1)));
#pragma GCC unroll 2
  for (int p = 0; p < 2; p++)  // quarter b: [0 + 2, 1 + 3] of r[8p + b], then of r[8p + 4 + b]
    x[p] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * p], w[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(w[2 * p], w[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // quarter b: r[b], r[4 + b], r[8 + b], r[12 + b]
  return _mm512_add_ps(_mm512_shuffle_ps(x[0], x[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_ps(x[0], x[1], _MM_SHUFFLE(3, 1, 3, 1)));
}
#endif

// out[j] = scale * dot(q, cell j) for j < n; cells are `stride` bytes apart, hd values each.
inline void attn_scores1(const float* q, const uint8_t* k, size_t stride, int n, int hd, bool f16, float scale,
                         float* out) {
#if defined(LLMI_SIMD_AVX512)
  if (!f16) {  // llama.cpp's order: ggml_vec_dot_f32 (dot_float), then the scale
    for (int j = 0; j < n; j++) out[j] = scale * dot_float<DType::f32>(k + size_t(j) * stride, q, hd);
    return;
  }
  const int full = hd / 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (hd % 16)) - 1);
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int e = 0; e < full; e++) {
      __m512 qv = _mm512_loadu_ps(q + 16 * e);
      for (int u = 0; u < 4; u++)
        acc[u] = _mm512_fmadd_ps(qv, load16_kv(k + (j + u) * stride + (f16 ? 32 : 64) * e, f16), acc[u]);
    }
    if (tail) {
      __m512 qv = _mm512_maskz_loadu_ps(tail, q + 16 * full);
      for (int u = 0; u < 4; u++)
        acc[u] = _mm512_fmadd_ps(qv, maskload16_kv(k + (j + u) * stride + (f16 ? 32 : 64) * full, f16, tail), acc[u]);
    }
    _mm_storeu_ps(out + j, _mm_mul_ps(_mm_set1_ps(scale), reduce_add4_ps(acc[0], acc[1], acc[2], acc[3])));
  }
  for (; j < n; j++) {
    __m512 acc = _mm512_setzero_ps();
    for (int e = 0; e < full; e++)
      acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16 * e), load16_kv(k + j * stride + (f16 ? 32 : 64) * e, f16), acc);
    if (tail)
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, q + 16 * full),
                            maskload16_kv(k + j * stride + (f16 ? 32 : 64) * full, f16, tail), acc);
    out[j] = scale * _mm512_reduce_add_ps(acc);
  }
#elif defined(LLMI_SIMD_AVX2)
  if (!f16) {  // llama.cpp's order: ggml_vec_dot_f32 (dot_float), then the scale
    for (int j = 0; j < n; j++) out[j] = scale * dot_float<DType::f32>(k + size_t(j) * stride, q, hd);
    return;
  }
  const size_t es = 2;
  for (int j = 0; j < n; j++) {
    const uint8_t* c = k + size_t(j) * stride;
    __m256 acc = _mm256_setzero_ps();
    int e = 0;
    for (; e + 8 <= hd; e += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + e), load8_kv(c + es * size_t(e), f16), acc);
    float dot = hsum_ps256(acc);
    for (; e < hd; e++) {
      float x;
      if (f16)
        x = fp16_to_f32(rd_u16(c + 2 * e));
      else
        std::memcpy(&x, c + 4 * e, 4);
      dot += q[e] * x;
    }
    out[j] = scale * dot;
  }
#else
  for (int j = 0; j < n; j++) {
    const uint8_t* c = k + size_t(j) * stride;
    float dot = 0;
    if (f16) {
      for (int e = 0; e < hd; e++) dot += q[e] * fp16_to_f32(rd_u16(c + 2 * e));
    } else {
      for (int e = 0; e < hd; e++) {
        float v;
        std::memcpy(&v, c + 4 * e, 4);
        dot += q[e] * v;
      }
    }
    out[j] = dot * scale;
  }
#endif
}

#if defined(LLMI_SIMD_AVX512)
// attn_scores1 for Q queries (q + i * qs) at once, f16 cache: each cell's values are converted
// once for all of them; each (query, cell) keeps its float order (16 lanes over the values, the
// tree of _mm512_reduce_add_ps, then the scale), so its bits.
template <int Q>
inline void attn_scores_f16(const float* q, size_t qs, const uint8_t* k, size_t stride, int n, int hd, float scale,
                            float* out, size_t os) {
  const int full = hd / 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (hd % 16)) - 1);
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    __m512 acc[Q][4];
#pragma GCC unroll 4
    for (int i = 0; i < Q; i++)
#pragma GCC unroll 4
      for (int u = 0; u < 4; u++) acc[i][u] = _mm512_setzero_ps();
    const uint8_t* kj = k + size_t(j) * stride;
    for (int e = 0; e <= full; e++) {
      if (e == full && !tail) break;
      const __mmask16 m = e < full ? 0xFFFF : tail;
      __m512 kv[4];
#pragma GCC unroll 4
      for (int u = 0; u < 4; u++) kv[u] = maskload16_kv(kj + size_t(u) * stride + 32 * size_t(e), true, m);
#pragma GCC unroll 4
      for (int i = 0; i < Q; i++) {
        const __m512 qv = _mm512_maskz_loadu_ps(m, q + size_t(i) * qs + 16 * size_t(e));
#pragma GCC unroll 4
        for (int u = 0; u < 4; u++) acc[i][u] = _mm512_fmadd_ps(qv, kv[u], acc[i][u]);
      }
    }
    for (int i = 0; i < Q; i++)
      _mm_storeu_ps(out + size_t(i) * os + j,
                    _mm_mul_ps(_mm_set1_ps(scale), reduce_add4_ps(acc[i][0], acc[i][1], acc[i][2], acc[i][3])));
  }
  for (int i = 0; i < Q; i++)
    attn_scores1(q + size_t(i) * qs, k + size_t(j) * stride, stride, n - j, hd, true, scale, out + size_t(i) * os + j);
}
#endif

#if defined(LLMI_SIMD_AVX512)
// attn_scores_f16 for 8 queries, two cells at a time: each cell's values are converted once for
// the 8, and the 16 sums of a step are added up by one tree (reduce_add16_ps), whose pairs are
// those of _mm512_reduce_add_ps, so each (query, cell) keeps its bits.
inline void attn_scores_f16_8(const float* q, size_t qs, const uint8_t* k, size_t stride, int n, int hd, float scale,
                              float* out, size_t os) {
  const int full = hd / 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (hd % 16)) - 1);
  // the tree's lane 4a + b holds register 4b + a; register 2i + c is (query i, cell c): this puts
  // (query i, cell c) in lane 2i + c
  alignas(64) static constexpr int32_t kOrder[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
  const __m512i order = _mm512_load_si512(kOrder);
  const __m512 sv = _mm512_set1_ps(scale);
  int j = 0;
  for (; j + 2 <= n; j += 2) {
    __m512 acc[16];
#pragma GCC unroll 16
    for (int u = 0; u < 16; u++) acc[u] = _mm512_setzero_ps();
    const uint8_t* kj = k + size_t(j) * stride;
    // 16 values of each query times those of the two cells (lanes past the head size: 0)
    const auto step = [&](int e, __mmask16 m) {
      const __m512 k0 = maskload16_kv(kj + 32 * size_t(e), true, m);
      const __m512 k1 = maskload16_kv(kj + stride + 32 * size_t(e), true, m);
#pragma GCC unroll 8
      for (int i = 0; i < 8; i++) {
        const __m512 qv = _mm512_maskz_loadu_ps(m, q + size_t(i) * qs + 16 * size_t(e));
        acc[2 * i] = _mm512_fmadd_ps(qv, k0, acc[2 * i]);
        acc[2 * i + 1] = _mm512_fmadd_ps(qv, k1, acc[2 * i + 1]);
      }
    };
    for (int e = 0; e < full; e++) step(e, 0xFFFF);
    if (tail) step(full, tail);
    const __m512 s = _mm512_mul_ps(sv, _mm512_permutexvar_ps(order, reduce_add16_ps(acc)));
    const auto put = [&](int i, __m128 two) {  // queries i and i + 1, cells j and j + 1
      _mm_storel_pi(reinterpret_cast<__m64*>(out + size_t(i) * os + j), two);
      _mm_storeh_pi(reinterpret_cast<__m64*>(out + size_t(i + 1) * os + j), two);
    };
    put(0, _mm512_castps512_ps128(s));
    put(2, _mm512_extractf32x4_ps(s, 1));
    put(4, _mm512_extractf32x4_ps(s, 2));
    put(6, _mm512_extractf32x4_ps(s, 3));
  }
  if (j < n)
    for (int i = 0; i < 8; i++)
      attn_scores1(q + size_t(i) * qs, k + size_t(j) * stride, stride, n - j, hd, true, scale,
                   out + size_t(i) * os + j);
}
#endif

#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
// The lane sums of a, b, c, d, each with the pairs of hsum_ps256 (the halves, then lanes 0 + 2 and
// 1 + 3, then those two), so the same bits, with every step shared: [a, b, c, d].
inline __m128 reduce_add4_ps256(__m256 a, __m256 b, __m256 c, __m256 d) {
  // [a.lo + a.hi | b.lo + b.hi], the same for c, d
  const __m256 ab = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
  const __m256 cd = _mm256_add_ps(_mm256_permute2f128_ps(c, d, 0x20), _mm256_permute2f128_ps(c, d, 0x31));
  // lanes 0+2 and 1+3: [a02, a13, c02, c13 | b02, b13, d02, d13]
  const __m256 w = _mm256_add_ps(_mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm256_shuffle_ps(ab, cd, _MM_SHUFFLE(3, 2, 3, 2)));
  // [a, c, a, c | b, d, b, d]
  const __m256 r =
      _mm256_add_ps(_mm256_shuffle_ps(w, w, _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(w, w, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm_unpacklo_ps(_mm256_castps256_ps128(r), _mm256_extractf128_ps(r, 1));
}

// The cells of a block of the AVX2 scores and value sums: about 16 KiB of keys or values (rows
// `stride` bytes apart), so that a block's passes after its first read it from L1.
inline int attn_block_cells(size_t stride) {
  return std::max<int>(16, static_cast<int>(16384 / std::max<size_t>(1, stride)));
}

// v, loaded once into a register: the compiler does not fold its load into each FMA that uses it
// (a load per FMA: the loads, not the FMAs, would bound the kernels below).
inline __m256 in_register(__m256 v) {
#if defined(__GNUC__)
  __asm__("" : "+x"(v));
#endif
  return v;
}

// attn_scores1 for Q queries (q + i * qs) and C cells at a time, f16 cache, hd a multiple of 8:
// each cell's values are converted once for all the queries, each query's once for all the cells,
// and Q * C chains of sums; each (query, cell) keeps its float order (8 lanes over the values,
// hsum_ps256's tree, then the scale), so its bits.
template <int Q, int C>
inline void attn_scores_f16x(const float* q, size_t qs, const uint8_t* k, size_t stride, int n, int hd, float scale,
                             float* out, size_t os) {
  constexpr int N = Q * C;
  const __m128 sv = _mm_set1_ps(scale);
  int j = 0;
  for (; j + C <= n; j += C) {
    __m256 acc[N];
#pragma GCC unroll 16
    for (int t = 0; t < N; t++) acc[t] = _mm256_setzero_ps();
    const uint8_t* k0 = k + size_t(j) * stride;
    for (int e = 0; e < hd; e += 8) {
      __m256 x[C];
#pragma GCC unroll 4
      for (int c = 0; c < C; c++) x[c] = load8_kv(k0 + size_t(c) * stride + 2 * size_t(e), true);
#pragma GCC unroll 8
      for (int i = 0; i < Q; i++) {
        const __m256 qv = in_register(_mm256_loadu_ps(q + size_t(i) * qs + size_t(e)));
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) acc[i * C + c] = _mm256_fmadd_ps(qv, x[c], acc[i * C + c]);
      }
    }
    alignas(16) float r[(N + 3) / 4 * 4];
#pragma GCC unroll 4
    for (int t = 0; t < N; t += 4)  // sums t..t + 3 (the last repeated where N is not a multiple of 4)
      _mm_store_ps(r + t, _mm_mul_ps(sv, reduce_add4_ps256(acc[t], acc[std::min(t + 1, N - 1)],
                                                           acc[std::min(t + 2, N - 1)], acc[std::min(t + 3, N - 1)])));
#pragma GCC unroll 8
    for (int i = 0; i < Q; i++)
#pragma GCC unroll 4
      for (int c = 0; c < C; c++) out[size_t(i) * os + size_t(j + c)] = r[i * C + c];
  }
  if (j < n)
    for (int i = 0; i < Q; i++)
      attn_scores1(q + size_t(i) * qs, k + size_t(j) * stride, stride, n - j, hd, true, scale,
                   out + size_t(i) * os + j);
}
#endif

// out[i * os + j] = scale * dot(query i, cell j) for i < nq, j < n; query i at q + i * qs (the
// heads of one key-value group, or of several tokens); each as attn_scores1 (its bits), the cells
// read once for up to 8 queries (AVX-512, f16 cache; AVX2, a head size that is a multiple of 8: 4 a
// pass, more over blocks of cells that stay in L1 for the passes after the first).
inline void attn_scores(const float* q, int nq, size_t qs, const uint8_t* k, size_t stride, int n, int hd, bool f16,
                        float scale, float* out, size_t os) {
#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
  if (f16 && hd % 8 == 0) {
    // more than 4 queries: blocks of about 16 KiB of cells, each scored for all the queries before
    // the next, so that the passes after a block's first find its cells in L1
    const int blk = nq > 4 ? std::max(12, attn_block_cells(stride) / 12 * 12) : std::max(1, n);
    for (int j0 = 0; j0 < n; j0 += blk)
      for (int i0 = 0; i0 < nq; i0 += 4) {
        const float* qi = q + size_t(i0) * qs;
        const uint8_t* kj = k + size_t(j0) * stride;
        const int m = std::min(blk, n - j0);
        float* oi = out + size_t(i0) * os + j0;
        switch (std::min(4, nq - i0)) {
          case 1: attn_scores_f16x<1, 4>(qi, qs, kj, stride, m, hd, scale, oi, os); break;
          case 2: attn_scores_f16x<2, 4>(qi, qs, kj, stride, m, hd, scale, oi, os); break;
          case 3: attn_scores_f16x<3, 3>(qi, qs, kj, stride, m, hd, scale, oi, os); break;
          default: attn_scores_f16x<4, 3>(qi, qs, kj, stride, m, hd, scale, oi, os); break;
        }
      }
    return;
  }
#endif
  for (int i0 = 0; i0 < nq;) {
    [[maybe_unused]] const int c = std::min(4, nq - i0);
    const float* qi = q + size_t(i0) * qs;
    float* oi = out + size_t(i0) * os;
#if defined(LLMI_SIMD_AVX512)
    if (f16 && nq - i0 >= 8) {
      attn_scores_f16_8(qi, qs, k, stride, n, hd, scale, oi, os);
      i0 += 8;
      continue;
    }
    if (f16 && c > 1) {
      switch (c) {
        case 2: attn_scores_f16<2>(qi, qs, k, stride, n, hd, scale, oi, os); break;
        case 3: attn_scores_f16<3>(qi, qs, k, stride, n, hd, scale, oi, os); break;
        default: attn_scores_f16<4>(qi, qs, k, stride, n, hd, scale, oi, os); break;
      }
      i0 += c;
      continue;
    }
#endif
    attn_scores1(qi, k, stride, n, hd, f16, scale, oi);
    i0++;
  }
}

// s[j] = exp(s[j] - max) for j < n; returns the sum (accumulated in double). `phase` is the
// position of s[0] modulo 16: the AVX-512 (AVX2) body works in chunks of 16 (8) aligned to
// positions, as llama.cpp's softmax over cache cells, summing each chunk in float before adding it
// in double.
inline double attn_exp(float* s, int n, float max, [[maybe_unused]] int phase = 0) {
  double sum = 0;
  int j = 0;
#if defined(LLMI_SIMD_AVX512)
  const __m512 m = _mm512_set1_ps(max);
  for (int c = -phase; c < n; c += 16) {
    if (c >= 0 && c + 16 <= n) {
      __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + c), m));
      _mm512_storeu_ps(s + c, e);
      sum += static_cast<double>(reduce16_ps(e));
      continue;
    }
    // a partial chunk: the lanes outside 0..n-1 count as 0 (masked cells)
    const int from = std::max(c, 0), to = std::min(c + 16, n);
    alignas(64) float t[16];
    for (int i = 0; i < 16; i++) t[i] = max;
    for (int i = from; i < to; i++) t[i - c] = s[i];
    const __mmask16 mk = static_cast<__mmask16>(((1u << (to - from)) - 1) << (from - c));
    __m512 e = _mm512_maskz_mov_ps(mk, exp16(_mm512_sub_ps(_mm512_load_ps(t), m)));
    _mm512_store_ps(t, e);
    for (int i = from; i < to; i++) s[i] = t[i - c];
    sum += static_cast<double>(reduce16_ps(e));
  }
  j = n;
#elif defined(LLMI_SIMD_AVX2)
  // llama.cpp's AVX2 softmax: chunks of 8 aligned to positions, each summed in float (hsum_ps256)
  // before it is added in double
  const __m256 m = _mm256_set1_ps(max);
  for (int c = -(phase & 7); c < n; c += 8) {
    if (c >= 0 && c + 8 <= n) {
      __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + c), m));
      _mm256_storeu_ps(s + c, e);
      sum += static_cast<double>(hsum_ps256(e));
      continue;
    }
    // a partial chunk: the lanes outside 0..n-1 count as 0 (masked cells)
    const int from = std::max(c, 0), to = std::min(c + 8, n);
    alignas(32) float t[8];
    for (int i = 0; i < 8; i++) t[i] = max;
    for (int i = from; i < to; i++) t[i - c] = s[i];
    __m256 e = exp8(_mm256_sub_ps(_mm256_load_ps(t), m));
    _mm256_store_ps(t, e);
    for (int i = 0; i < 8; i++)
      if (i + c < from || i + c >= to) t[i] = 0.0f;
    for (int i = from; i < to; i++) s[i] = t[i - c];
    sum += static_cast<double>(hsum_ps256(_mm256_load_ps(t)));
  }
  j = n;
#endif
  for (; j < n; j++) {
    float e = std::exp(s[j] - max);
    s[j] = e;
    sum += e;
  }
  return sum;
}

#if defined(LLMI_SIMD_AVX512)
// attn_weighted_sum's loop over the cells for C full chunks of 16 values, the cache type fixed.
template <int C, bool F16>
inline void attn_wsum_chunks(const float* w, const uint8_t* v, size_t stride, int n, bool add, float* out) {
  constexpr size_t es = F16 ? 2 : 4;
  __m512 acc[C];
  for (int c = 0; c < C; c++) acc[c] = add ? _mm512_loadu_ps(out + 16 * c) : _mm512_setzero_ps();
  for (int j = 0; j < n; j++) {
    const __m512 wj = _mm512_set1_ps(w[j]);
    const uint8_t* row = v + size_t(j) * stride;
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) acc[c] = _mm512_fmadd_ps(wj, load16_kv(row + es * 16 * size_t(c), F16), acc[c]);
  }
  for (int c = 0; c < C; c++) _mm512_storeu_ps(out + 16 * c, acc[c]);
}
template <bool F16>
inline bool attn_wsum_full(const float* w, const uint8_t* v, size_t stride, int n, int chunks, bool add, float* out) {
  switch (chunks) {
    case 2: return attn_wsum_chunks<2, F16>(w, v, stride, n, add, out), true;
    case 4: return attn_wsum_chunks<4, F16>(w, v, stride, n, add, out), true;
    case 6: return attn_wsum_chunks<6, F16>(w, v, stride, n, add, out), true;
    case 8: return attn_wsum_chunks<8, F16>(w, v, stride, n, add, out), true;
    default: return false;
  }
}
#endif

// out[e] = sum_j w[j] * cell j [e] for e < hd (cells `stride` bytes apart), one multiply-add per
// cell in cell order; add: the sums go on from out's values (the bits of one run over both).
inline void attn_weighted_sum(const float* w, const uint8_t* v, size_t stride, int n, int hd, bool f16, bool add,
                              float* out) {
#if defined(LLMI_SIMD_AVX512)
  const size_t es = f16 ? 2 : 4;
  for (int e0 = 0; e0 < hd; e0 += 128) {
    const int len = std::min(128, hd - e0), chunks = (len + 15) / 16;
    const uint8_t* v0 = v + es * size_t(e0);
    // the usual head sizes (32, 64, 96, 128 values per chunk of 128): unrolled, no masks
    if (len % 16 == 0 && (f16 ? attn_wsum_full<true>(w, v0, stride, n, chunks, add, out + e0)
                              : attn_wsum_full<false>(w, v0, stride, n, chunks, add, out + e0)))
      continue;
    __m512 acc[8];
    for (int c = 0; c < chunks; c++)
      acc[c] = add ? _mm512_maskz_loadu_ps(first_lanes16(len - 16 * c), out + e0 + 16 * c) : _mm512_setzero_ps();
    for (int j = 0; j < n; j++) {
      const __m512 wj = _mm512_set1_ps(w[j]);
      const uint8_t* row = v0 + size_t(j) * stride;
      for (int c = 0; c < chunks; c++) {
        const int left = len - 16 * c;
        const __mmask16 mk = first_lanes16(left);
        acc[c] = _mm512_fmadd_ps(wj, maskload16_kv(row + es * 16 * size_t(c), f16, mk), acc[c]);
      }
    }
    for (int c = 0; c < chunks; c++) {
      const int left = len - 16 * c;
      const __mmask16 mk = first_lanes16(left);
      _mm512_mask_storeu_ps(out + e0 + 16 * c, mk, acc[c]);
    }
  }
#elif defined(LLMI_SIMD_AVX2)
  // passes of 64 values, over blocks of cells of about 16 KiB (as attn_wsum_f16x_rows: the passes
  // after a block's first find its rows in L1; the sums go on from block to block, the same bits)
  const size_t es = f16 ? 2 : 4;
  const int full = hd / 64 * 64, blk = attn_block_cells(stride);
  if (n <= 0 && !add)
    for (int e = 0; e < full; e++) out[e] = 0;  // (no cells: the sums are 0)
  for (int j0 = 0; j0 < n && full > 0; j0 += blk) {
    const int j1 = std::min(n, j0 + blk);
    const bool a = add || j0 > 0;
    for (int e0 = 0; e0 < full; e0 += 64) {
      __m256 acc[8];
      for (int c = 0; c < 8; c++) acc[c] = a ? _mm256_loadu_ps(out + e0 + 8 * c) : _mm256_setzero_ps();
      for (int j = j0; j < j1; j++) {
        const __m256 wj = _mm256_set1_ps(w[j]);
        const uint8_t* row = v + size_t(j) * stride + es * size_t(e0);
        for (int c = 0; c < 8; c++) acc[c] = _mm256_fmadd_ps(wj, load8_kv(row + es * 8 * size_t(c), f16), acc[c]);
      }
      for (int c = 0; c < 8; c++) _mm256_storeu_ps(out + e0 + 8 * c, acc[c]);
    }
  }
  const int e0 = full;
  if (!add)
    for (int e = e0; e < hd; e++) out[e] = 0;
  for (int j = 0; j < n && e0 < hd; j++) {
    const uint8_t* c = v + size_t(j) * stride;
    for (int e = e0; e < hd; e++) {
      float x;
      if (f16)
        x = fp16_to_f32(rd_u16(c + 2 * e));
      else
        std::memcpy(&x, c + 4 * e, 4);
      out[e] = std::fma(w[j], x, out[e]);  // one rounding, as the FMAs above and attn_wsum_f16x's (at any -O)
    }
  }
#else
  if (!add)
    for (int e = 0; e < hd; e++) out[e] = 0;
  for (int j = 0; j < n; j++) {
    const uint8_t* c = v + size_t(j) * stride;
    for (int e = 0; e < hd; e++) {
      float x;
      if (f16)
        x = fp16_to_f32(rd_u16(c + 2 * e));
      else
        std::memcpy(&x, c + 4 * e, 4);
      out[e] += w[j] * x;
    }
  }
#endif
}

#if defined(LLMI_SIMD_AVX512)
// attn_weighted_sum of Q weight rows (w + i * ws) into Q outputs (out + i * os) over C chunks of
// 16 values, f16 cache: each cell's values converted once for all; each output value keeps its
// order (one FMA per cell, in cell order), so its bits.
template <int Q, int C>
inline void attn_wsum_f16(const float* w, size_t ws, const uint8_t* v, size_t stride, int n, bool add, float* out,
                          size_t os) {
  __m512 acc[Q][C];
#pragma GCC unroll 8
  for (int i = 0; i < Q; i++)
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) acc[i][c] = add ? _mm512_loadu_ps(out + size_t(i) * os + 16 * c) : _mm512_setzero_ps();
  for (int j = 0; j < n; j++) {
    __m512 wj[Q];
#pragma GCC unroll 8
    for (int i = 0; i < Q; i++) wj[i] = _mm512_set1_ps(w[size_t(i) * ws + size_t(j)]);
    const uint8_t* row = v + size_t(j) * stride;
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) {
      const __m512 x = load16_kv(row + 32 * size_t(c), true);
#pragma GCC unroll 8
      for (int i = 0; i < Q; i++) acc[i][c] = _mm512_fmadd_ps(wj[i], x, acc[i][c]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < Q; i++)
#pragma GCC unroll 8
    for (int c = 0; c < C; c++) _mm512_storeu_ps(out + size_t(i) * os + 16 * c, acc[i][c]);
}
// Q (2..4, or 8) rows at once where the head size allows (a multiple of 16 values, in passes of
// 128 values for 2 or 3 rows, 64 for 4, 32 for 8, so that the sums stay in registers); false: it
// does not.
template <int Q>
inline bool attn_wsum_f16_rows(const float* w, size_t ws, const uint8_t* v, size_t stride, int n, int hd, bool add,
                               float* out, size_t os) {
  constexpr int kChunks = Q <= 3 ? 8 : 16 / Q, kPass = 16 * kChunks;
  if (hd % 16) return false;
  for (int e0 = 0; e0 < hd; e0 += kPass) {
    const int chunks = std::min(kPass, hd - e0) / 16;
    const uint8_t* v0 = v + 2 * size_t(e0);
    float* o = out + e0;
    switch (chunks) {
      case 1: attn_wsum_f16<Q, 1>(w, ws, v0, stride, n, add, o, os); break;
      case 2: attn_wsum_f16<Q, std::min(2, kChunks)>(w, ws, v0, stride, n, add, o, os); break;
      case 3: attn_wsum_f16<Q, std::min(3, kChunks)>(w, ws, v0, stride, n, add, o, os); break;
      case 4: attn_wsum_f16<Q, std::min(4, kChunks)>(w, ws, v0, stride, n, add, o, os); break;
      case 5: attn_wsum_f16<Q, std::min(5, kChunks)>(w, ws, v0, stride, n, add, o, os); break;
      case 6: attn_wsum_f16<Q, std::min(6, kChunks)>(w, ws, v0, stride, n, add, o, os); break;
      case 7: attn_wsum_f16<Q, std::min(7, kChunks)>(w, ws, v0, stride, n, add, o, os); break;
      default: attn_wsum_f16<Q, kChunks>(w, ws, v0, stride, n, add, o, os); break;
    }
  }
  return true;
}
#endif

#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
// attn_weighted_sum of Q weight rows (w + i * ws) into Q outputs (out + i * os) over C chunks of 8
// values, f16 cache: each cell's values are converted once for all the rows; each output value
// keeps its order (one FMA per cell, in cell order), so its bits.
template <int Q, int C>
inline void attn_wsum_f16x(const float* w, size_t ws, const uint8_t* v, size_t stride, int n, bool add, float* out,
                           size_t os) {
  __m256 acc[Q][C];
#pragma GCC unroll 4
  for (int i = 0; i < Q; i++)
#pragma GCC unroll 4
    for (int c = 0; c < C; c++) acc[i][c] = add ? _mm256_loadu_ps(out + size_t(i) * os + 8 * c) : _mm256_setzero_ps();
  for (int j = 0; j < n; j++) {
    __m256 wj[Q];
#pragma GCC unroll 4
    for (int i = 0; i < Q; i++) wj[i] = _mm256_broadcast_ss(w + size_t(i) * ws + size_t(j));
    const uint8_t* row = v + size_t(j) * stride;
#pragma GCC unroll 4
    for (int c = 0; c < C; c++) {
      const __m256 x = load8_kv(row + 16 * size_t(c), true);
#pragma GCC unroll 4
      for (int i = 0; i < Q; i++) acc[i][c] = _mm256_fmadd_ps(wj[i], x, acc[i][c]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < Q; i++)
#pragma GCC unroll 4
    for (int c = 0; c < C; c++) _mm256_storeu_ps(out + size_t(i) * os + 8 * c, acc[i][c]);
}
// Q (2..4) rows at once where the head size is a multiple of 8 values, in passes of 8 * C values
// (C = 4 for 2 rows, 2 for 3 or 4: eight sums in registers); false: it is not. The cells go in
// blocks of about 16 KiB of values, all the passes over a block before the next block's, so that
// the passes after the first find its rows in L1 (passes over all the cells read a long context's
// values from memory once per pass); each output value's sums go on from block to block (add), one
// FMA per cell in cell order as before, so the same bits.
template <int Q>
inline bool attn_wsum_f16x_rows(const float* w, size_t ws, const uint8_t* v, size_t stride, int n, int hd, bool add,
                                float* out, size_t os) {
  constexpr int kChunks = Q == 2 ? 4 : 2;
  if (hd % 8) return false;
  const int blk = attn_block_cells(stride);
  if (n <= 0 && !add)
    for (int i = 0; i < Q; i++) std::fill(out + size_t(i) * os, out + size_t(i) * os + hd, 0.0f);  // (no cells)
  for (int j0 = 0; j0 < n; j0 += blk) {
    const int m = std::min(blk, n - j0);
    const bool a = add || j0 > 0;
    const float* wb = w + j0;
    for (int e0 = 0; e0 < hd; e0 += 8 * kChunks) {
      const int chunks = std::min(8 * kChunks, hd - e0) / 8;
      const uint8_t* v0 = v + size_t(j0) * stride + 2 * size_t(e0);
      float* o = out + e0;
      switch (chunks) {
        case 1: attn_wsum_f16x<Q, 1>(wb, ws, v0, stride, m, a, o, os); break;
        case 2: attn_wsum_f16x<Q, std::min(2, kChunks)>(wb, ws, v0, stride, m, a, o, os); break;
        case 3: attn_wsum_f16x<Q, std::min(3, kChunks)>(wb, ws, v0, stride, m, a, o, os); break;
        default: attn_wsum_f16x<Q, kChunks>(wb, ws, v0, stride, m, a, o, os); break;
      }
    }
  }
  return true;
}
#endif

#if defined(LLMI_SIMD_AVX512)
// ---- llama.cpp's order (f32 cache, AVX-512) ----
// With an f32 cache and no flash attention, llama.cpp computes q.k with ggml_vec_dot_f32 (as
// dot_float<f32>) and V x softmax with llamafile's sgemm (several tokens) or ggml_vec_dot_f32
// (one token). Doing the same float operations in the same order gives its bits, which matters
// where an activation is next rounded to 8 bits: one value on the other side of a rounding step
// moves a small model's logits by ~0.1.

// out[e] = sum over positions j = lo..pos of w[j - lo] * vrow(j)[e], in `lanes` partial sums by
// position: 16 (several tokens: sgemm's 16 lanes, then the 16-lane tree) or 64 (one token:
// ggml_vec_dot_f32's 4 x 16, folded (0+32) + (16+48) first). acc holds lanes x round_up(hd, 16).
// vrow(j) = the value row of position j: v0 + (j % slots) * stride (the KV ring).
inline void attn_weighted_sum_ggml(const float* w, const uint8_t* v0, size_t stride, int slots, int lo, int pos, int hd,
                                   int lanes, float* acc, float* out) {
  auto vrow = [&](int j) { return reinterpret_cast<const float*>(v0 + size_t(j % slots) * stride); };
  const int hs = (hd + 15) & ~15;
  std::fill(acc, acc + size_t(lanes) * size_t(hs), 0.0f);
  const __mmask16 tail = static_cast<__mmask16>(hd % 16 ? (1u << (hd % 16)) - 1 : 0xFFFF);
  for (int j = lo; j <= pos; j++) {
    float* a = acc + size_t(j % lanes) * size_t(hs);
    const float* v = vrow(j);
    const __m512 wj = _mm512_set1_ps(w[j - lo]);
    for (int e = 0; e < hd; e += 16) {
      const __mmask16 mk = e + 16 <= hd ? static_cast<__mmask16>(0xFFFF) : tail;
      _mm512_storeu_ps(a + e, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, v + e), wj, _mm512_loadu_ps(a + e)));
    }
  }
  for (int e = 0; e < hs; e += 16) {
    auto at = [&](int l) { return _mm512_loadu_ps(acc + size_t(l) * size_t(hs) + e); };
    __m512 x[16];
    for (int l = 0; l < 16; l++)
      x[l] =
          lanes == 64 ? _mm512_add_ps(_mm512_add_ps(at(l), at(32 + l)), _mm512_add_ps(at(16 + l), at(48 + l))) : at(l);
    for (int l = 0; l < 8; l++) x[l] = _mm512_add_ps(x[l + 8], x[l]);
    for (int l = 0; l < 4; l++) x[l] = _mm512_add_ps(x[l + 4], x[l]);
    __m512 r = _mm512_add_ps(_mm512_add_ps(x[0], x[2]), _mm512_add_ps(x[1], x[3]));
    const __mmask16 mk = e + 16 <= hd ? static_cast<__mmask16>(0xFFFF) : tail;
    _mm512_mask_storeu_ps(out + e, mk, r);
  }
}
#endif

#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
// ---- llama.cpp's order (f32 cache, AVX2) ----
// As attn_weighted_sum_ggml with llama.cpp's AVX2 build: `lanes` partial sums by position, 8
// (several tokens: sgemm's 8 lanes, then hsum_ps256's tree) or 32 (one token: ggml_vec_dot_f32's
// 4 x 8, folded (0+16) + (8+24), then reduce8_hadd's tree). acc holds lanes x round_up(hd, 8).
inline void attn_weighted_sum_ggml8(const float* w, const uint8_t* v0, size_t stride, int slots, int lo, int pos,
                                    int hd, int lanes, float* acc, float* out) {
  auto vrow = [&](int j) { return reinterpret_cast<const float*>(v0 + size_t(j % slots) * stride); };
  const int hs = (hd + 7) & ~7;
  std::fill(acc, acc + size_t(lanes) * size_t(hs), 0.0f);
  auto mask_for = [&](int e) {  // the lanes e..e+7 that are < hd
    alignas(32) int32_t m[8];
    for (int i = 0; i < 8; i++) m[i] = e + i < hd ? -1 : 0;
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
  };
  const __m256i tail = mask_for(hd & ~7);
  for (int j = lo; j <= pos; j++) {
    float* a = acc + size_t(j % lanes) * size_t(hs);
    const float* v = vrow(j);
    const __m256 wj = _mm256_set1_ps(w[j - lo]);
    int e = 0;
    for (; e + 8 <= hd; e += 8)
      _mm256_storeu_ps(a + e, _mm256_fmadd_ps(_mm256_loadu_ps(v + e), wj, _mm256_loadu_ps(a + e)));
    if (e < hd) _mm256_storeu_ps(a + e, _mm256_fmadd_ps(_mm256_maskload_ps(v + e, tail), wj, _mm256_loadu_ps(a + e)));
  }
  for (int e = 0; e < hs; e += 8) {
    auto at = [&](int l) { return _mm256_loadu_ps(acc + size_t(l) * size_t(hs) + e); };
    __m256 x[8];
    for (int l = 0; l < 8; l++)
      x[l] =
          lanes == 32 ? _mm256_add_ps(_mm256_add_ps(at(l), at(16 + l)), _mm256_add_ps(at(8 + l), at(24 + l))) : at(l);
    for (int l = 0; l < 4; l++) x[l] = _mm256_add_ps(x[l], x[l + 4]);
    const __m256 r = lanes == 32 ? _mm256_add_ps(_mm256_add_ps(x[0], x[1]), _mm256_add_ps(x[2], x[3]))
                                 : _mm256_add_ps(_mm256_add_ps(x[0], x[2]), _mm256_add_ps(x[1], x[3]));
    if (e + 8 <= hd)
      _mm256_storeu_ps(out + e, r);
    else
      _mm256_maskstore_ps(out + e, tail, r);
  }
}
#endif

// The values step of nq heads (the heads of one key-value group, of one token or several):
// out[i * os + e] = sum over positions j = lo..pos of w[i * ws + j - lo] * V(j)[e], where V(j) is
// the row at v0 + (j % slots) * stride (the KV ring: at most two runs of contiguous slots). part:
// scratch of 8 * hd floats (AVX-512 with an f32 cache: 64 * round_up(hd, 16)). several: the token
// is one of several evaluated together (llama.cpp's order differs then). add (f16 cache only):
// the sums of the first run go on from out's values, so that lo..m then m + 1..pos (one run) has
// the bits of lo..pos. Each head's bits are those of it alone; the cells are read once for up to
// 8 heads (AVX-512, f16 cache; AVX2: 4, a head size that is a multiple of 8).
inline void attn_values(const float* w, int nq, size_t ws, const uint8_t* v0, size_t stride, int slots, int lo, int pos,
                        int hd, bool f16, [[maybe_unused]] bool several, bool add, float* part, float* out, size_t os) {
  LLMI_ASSERT(f16 || !add);
// (llama.cpp's sgemm takes the several tokens only when hd, its row count, is a multiple of 4.)
#if defined(LLMI_SIMD_AVX512)
  if (!f16) {  // llama.cpp's order (several tokens: 16 lanes; one token: 64)
    for (int i = 0; i < nq; i++)
      attn_weighted_sum_ggml(w + size_t(i) * ws, v0, stride, slots, lo, pos, hd, several && hd % 4 == 0 ? 16 : 64, part,
                             out + size_t(i) * os);
    return;
  }
#elif defined(LLMI_SIMD_AVX2)
  if (!f16) {  // llama.cpp's order (several tokens: 8 lanes; one token: 32)
    for (int i = 0; i < nq; i++)
      attn_weighted_sum_ggml8(w + size_t(i) * ws, v0, stride, slots, lo, pos, hd, several && hd % 4 == 0 ? 8 : 32, part,
                              out + size_t(i) * os);
    return;
  }
#endif
  for (int i0 = 0; i0 < nq;) {
#if defined(LLMI_SIMD_AVX512)
    const int c = nq - i0 >= 8 ? 8 : std::min(4, nq - i0);
#else
    const int c = std::min(4, nq - i0);
#endif
    const float* wi = w + size_t(i0) * ws;
    float* oi = out + size_t(i0) * os;
    int done = 1;  // rows this pass takes
    bool first = true;
    for (int j = lo; j <= pos;) {
      const int slot = j % slots, run = std::min(pos - j + 1, slots - slot);
      const uint8_t* vr = v0 + size_t(slot) * stride;
      float* to = first ? oi : part;
      [[maybe_unused]] const size_t ts = first ? os : size_t(hd);
      bool multi = false;
#if defined(LLMI_SIMD_AVX512)
      if (f16 && c > 1) {
        const float* wr = wi + (j - lo);
        const bool a = first && add;
        multi = c == 2   ? attn_wsum_f16_rows<2>(wr, ws, vr, stride, run, hd, a, to, ts)
                : c == 3 ? attn_wsum_f16_rows<3>(wr, ws, vr, stride, run, hd, a, to, ts)
                : c == 4 ? attn_wsum_f16_rows<4>(wr, ws, vr, stride, run, hd, a, to, ts)
                         : attn_wsum_f16_rows<8>(wr, ws, vr, stride, run, hd, a, to, ts);
      }
#elif defined(LLMI_SIMD_AVX2)
      if (f16 && c > 1) {
        const float* wr = wi + (j - lo);
        const bool a = first && add;
        multi = c == 2   ? attn_wsum_f16x_rows<2>(wr, ws, vr, stride, run, hd, a, to, ts)
                : c == 3 ? attn_wsum_f16x_rows<3>(wr, ws, vr, stride, run, hd, a, to, ts)
                         : attn_wsum_f16x_rows<4>(wr, ws, vr, stride, run, hd, a, to, ts);
      }
#endif
      done = multi ? c : 1;
      if (!multi) attn_weighted_sum(wi + (j - lo), vr, stride, run, hd, f16, first && add, to);
      if (!first)
        for (int i = 0; i < done; i++)
          for (int e = 0; e < hd; e++) oi[size_t(i) * os + size_t(e)] += part[size_t(i) * hd + size_t(e)];
      first = false;
      j += run;
    }
    i0 += done;
  }
}

// ==== Activation kernels (rows of f32) ====
// y = silu(x) over a row; AVX-512 (AVX2): chunks of 16 (8) with exp16 (exp8), the rest with expf,
// as llama.cpp's build for that instruction set (its bits).
inline void silu_row(const float* x, float* y, int n) {
  int k = 0;
#if defined(LLMI_SIMD_AVX512)
  for (; k + 16 <= n; k += 16) {
    const __m512 v = _mm512_loadu_ps(x + k);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), v));
    _mm512_storeu_ps(y + k, _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), e)));
  }
#elif defined(LLMI_SIMD_AVX2)
  for (; k + 8 <= n; k += 8) {
    const __m256 v = _mm256_loadu_ps(x + k);
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), v));
    _mm256_storeu_ps(y + k, _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e)));
  }
#endif
  for (; k < n; k++) y[k] = silu_f32(x[k]);
}
// y = gelu_tanh(x) over a row, by table (the values of gelu_tanh_f32).
inline void gelu_tanh_row(const float* x, float* y, int n) {
  const float* tab = gelu_tanh_table();
  int k = 0;
#if defined(LLMI_SIMD_AVX512)
  for (; k + 16 <= n; k += 16) {
    const __m512 v = _mm512_loadu_ps(x + k);
    const __m512i idx = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m512 r = _mm512_i32gather_ps(idx, tab, 4);
    r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_set1_ps(10.0f), _CMP_GE_OQ), r, v);
    r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_set1_ps(-10.0f), _CMP_NLE_UQ), r);
    _mm512_storeu_ps(y + k, r);
  }
#endif
  for (; k < n; k++) y[k] = x[k] <= -10.0f ? 0.0f : x[k] >= 10.0f ? x[k] : tab[f32_to_fp16(x[k])];
}

LLMI_KNS_END
}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
