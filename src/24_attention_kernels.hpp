// ==== Attention kernels: one query head against a run of cached keys and values ====
// The forward pass (43_forward) walks the KV ring and calls these on contiguous runs of cells
// ([cells][hd], f16 or f32). SIMD bodies follow the scalar ones: dot products summed in lanes,
// exp by a Cephes-style polynomial (within 2 ulp of expf), softmax sums in double as ggml.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

#if defined(LLMI_SIMD_AVX512)
// 16 cache values (f16 or f32) as f32.
inline __m512 load16_kv(const uint8_t* p, bool f16) {
  return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))) : _mm512_loadu_ps(reinterpret_cast<const float*>(p));
}
inline __m512 maskload16_kv(const uint8_t* p, bool f16, __mmask16 m) {
  return f16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)) : _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(p));
}
// e^x for 16 lanes (x <= 88.7; very negative x give 0).
inline __m512 exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}
#endif

#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
inline __m256 load8_kv(const uint8_t* p, bool f16) {
  return f16 ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))) : _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}
// e^x for 8 lanes (as exp16).
inline __m256 exp8(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n through the exponent bits (n >= -126 after the clamp)
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#endif

// out[j] = scale * dot(q, cell j) for j < n; cells are `stride` bytes apart, hd values each.
inline void attn_scores(const float* q, const uint8_t* k, size_t stride, int n, int hd, bool f16, float scale, float* out) {
#if defined(LLMI_SIMD_AVX512)
  const int full = hd / 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (hd % 16)) - 1);
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int e = 0; e < full; e++) {
      __m512 qv = _mm512_loadu_ps(q + 16 * e);
      for (int u = 0; u < 4; u++) acc[u] = _mm512_fmadd_ps(qv, load16_kv(k + (j + u) * stride + (f16 ? 32 : 64) * e, f16), acc[u]);
    }
    if (tail) {
      __m512 qv = _mm512_maskz_loadu_ps(tail, q + 16 * full);
      for (int u = 0; u < 4; u++) acc[u] = _mm512_fmadd_ps(qv, maskload16_kv(k + (j + u) * stride + (f16 ? 32 : 64) * full, f16, tail), acc[u]);
    }
    for (int u = 0; u < 4; u++) out[j + u] = scale * _mm512_reduce_add_ps(acc[u]);
  }
  for (; j < n; j++) {
    __m512 acc = _mm512_setzero_ps();
    for (int e = 0; e < full; e++) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16 * e), load16_kv(k + j * stride + (f16 ? 32 : 64) * e, f16), acc);
    if (tail) acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, q + 16 * full), maskload16_kv(k + j * stride + (f16 ? 32 : 64) * full, f16, tail), acc);
    out[j] = scale * _mm512_reduce_add_ps(acc);
  }
#elif defined(LLMI_SIMD_AVX2)
  const size_t es = f16 ? 2 : 4;
  for (int j = 0; j < n; j++) {
    const uint8_t* c = k + size_t(j) * stride;
    __m256 acc = _mm256_setzero_ps();
    int e = 0;
    for (; e + 8 <= hd; e += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + e), load8_kv(c + es * size_t(e), f16), acc);
    float dot = hsum_ps256(acc);
    for (; e < hd; e++) {
      float x;
      if (f16) x = fp16_to_f32(rd_u16(c + 2 * e));
      else std::memcpy(&x, c + 4 * e, 4);
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

// s[j] = exp(s[j] - max) for j < n; returns the sum (accumulated in double).
inline double attn_exp(float* s, int n, float max) {
  double sum = 0;
  int j = 0;
#if defined(LLMI_SIMD_AVX512)
  __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
  const __m512 m = _mm512_set1_ps(max);
  for (; j + 16 <= n; j += 16) {
    __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + j), m));
    _mm512_storeu_ps(s + j, e);
    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  if (j < n) {
    const __mmask16 mk = static_cast<__mmask16>((1u << (n - j)) - 1);
    __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, s + j), m));
    e = _mm512_maskz_mov_ps(mk, e);
    _mm512_mask_storeu_ps(s + j, mk, e);
    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    j = n;
  }
  sum = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
#elif defined(LLMI_SIMD_AVX2)
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  const __m256 m = _mm256_set1_ps(max);
  for (; j + 8 <= n; j += 8) {
    __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), m));
    _mm256_storeu_ps(s + j, e);
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  __m256d t = _mm256_add_pd(a0, a1);
  __m128d t2 = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
  sum = _mm_cvtsd_f64(_mm_add_sd(t2, _mm_unpackhi_pd(t2, t2)));
#endif
  for (; j < n; j++) {
    float e = std::exp(s[j] - max);
    s[j] = e;
    sum += e;
  }
  return sum;
}

// out[e] = sum_j w[j] * cell j [e] for e < hd (cells `stride` bytes apart).
inline void attn_weighted_sum(const float* w, const uint8_t* v, size_t stride, int n, int hd, bool f16, float* out) {
#if defined(LLMI_SIMD_AVX512)
  const size_t es = f16 ? 2 : 4;
  for (int e0 = 0; e0 < hd; e0 += 128) {
    const int len = std::min(128, hd - e0), chunks = (len + 15) / 16;
    __m512 acc[8];
    for (int c = 0; c < 8; c++) acc[c] = _mm512_setzero_ps();
    if (len == 128) {
      for (int j = 0; j < n; j++) {
        const __m512 wj = _mm512_set1_ps(w[j]);
        const uint8_t* row = v + size_t(j) * stride + es * size_t(e0);
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) acc[c] = _mm512_fmadd_ps(wj, load16_kv(row + es * 16 * size_t(c), f16), acc[c]);
      }
    } else {
      for (int j = 0; j < n; j++) {
        const __m512 wj = _mm512_set1_ps(w[j]);
        const uint8_t* row = v + size_t(j) * stride + es * size_t(e0);
        for (int c = 0; c < chunks; c++) {
          const int left = len - 16 * c;
          const __mmask16 mk = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
          acc[c] = _mm512_fmadd_ps(wj, maskload16_kv(row + es * 16 * size_t(c), f16, mk), acc[c]);
        }
      }
    }
    for (int c = 0; c < chunks; c++) {
      const int left = len - 16 * c;
      const __mmask16 mk = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
      _mm512_mask_storeu_ps(out + e0 + 16 * c, mk, acc[c]);
    }
  }
#elif defined(LLMI_SIMD_AVX2)
  const size_t es = f16 ? 2 : 4;
  int e0 = 0;
  for (; e0 + 64 <= hd; e0 += 64) {
    __m256 acc[8];
    for (int c = 0; c < 8; c++) acc[c] = _mm256_setzero_ps();
    for (int j = 0; j < n; j++) {
      const __m256 wj = _mm256_set1_ps(w[j]);
      const uint8_t* row = v + size_t(j) * stride + es * size_t(e0);
      for (int c = 0; c < 8; c++) acc[c] = _mm256_fmadd_ps(wj, load8_kv(row + es * 8 * size_t(c), f16), acc[c]);
    }
    for (int c = 0; c < 8; c++) _mm256_storeu_ps(out + e0 + 8 * c, acc[c]);
  }
  for (int e = e0; e < hd; e++) out[e] = 0;
  for (int j = 0; j < n && e0 < hd; j++) {
    const uint8_t* c = v + size_t(j) * stride;
    for (int e = e0; e < hd; e++) {
      float x;
      if (f16) x = fp16_to_f32(rd_u16(c + 2 * e));
      else std::memcpy(&x, c + 4 * e, 4);
      out[e] += w[j] * x;
    }
  }
#else
  for (int e = 0; e < hd; e++) out[e] = 0;
  for (int j = 0; j < n; j++) {
    const uint8_t* c = v + size_t(j) * stride;
    for (int e = 0; e < hd; e++) {
      float x;
      if (f16) x = fp16_to_f32(rd_u16(c + 2 * e));
      else std::memcpy(&x, c + 4 * e, 4);
      out[e] += w[j] * x;
    }
  }
#endif
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
