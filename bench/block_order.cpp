// A probe for the AVX2 matrix kernels' float order (bench/RESULTS.md, nineteenth stop): the
// integer work of 8 tokens times a row of 32-value blocks, in two orders, on one core, the rows in
// L2. Not the engine's kernels: loops of the same instructions, to show what the order costs.
//  A  llama.cpp's order (the engine's AVX2 kernels, bit-exact with llama.cpp): per (row, token,
//     block) vpsignb, vpmaddubsw, vpmaddwd into 8 lanes of 4 products, vcvtdq2ps and one FMA by
//     d(w) * d(a) per lane; a tree of the 8 lanes at the end.
//  B  block sums (the AMX tiles' order): 8 tokens in the 8 lanes of a register, a row's 4 values
//     broadcast to all of them, the block's products summed in integers, then per (row, block) one
//     FMA of the 8 tokens' float(sum) by d(w) * d(a).
// Q8_0 (signed values: B takes a vpsignb per 4 values as A does) and Q5_0 (unsigned 5-bit values
// less 16: B adds 4 vpmaddubsw in int16 before one vpmaddwd, and takes the 16 * sum(a) off per
// block). Prints GMAC/s, the fastest run of each in thread CPU time (timing.hpp), and the largest
// relative difference of B's results from A's (float order only).
//   build/bench-block-order
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

#include "timing.hpp"

namespace {

constexpr int K = 2048, NB = K / 32, R = 64, T = 8;
alignas(64) uint8_t W[R][K];  // Q8_0: int8 values as bytes; Q5_0: 0..31
alignas(64) float DW[R][NB];
alignas(64) int8_t A[T][K];
alignas(64) float DA[NB][T];
alignas(64) int8_t AL[K / 4][T * 4];    // B's activations: per 4 values, 8 tokens x 4 bytes
alignas(64) int8_t AABS[K / 4][T * 4];  // their absolute values (Q8_0)
alignas(64) int32_t CORR[NB][T];        // 16 * the block's sum of activations (Q5_0)
float out_a[R][T], out_b[R][T];

float hsum(__m256 v) {
  __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  a = _mm_add_ps(a, _mm_movehl_ps(a, a));
  return _mm_cvtss_f32(_mm_add_ss(a, _mm_movehdup_ps(a)));
}
__m256i load(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
__m256i bcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

template <bool Q5>
__attribute__((noinline)) void order_a() {
  const __m256i ones = _mm256_set1_epi16(1), off = _mm256_set1_epi8(16);
  for (int r = 0; r < R; r++) {
    __m256 acc[T];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (int b = 0; b < NB; b++) {
      __m256i v = load(&W[r][b * 32]);
      if (Q5) v = _mm256_sub_epi8(v, off);
      const __m256i av = _mm256_sign_epi8(v, v);
      alignas(32) float s[8];
      _mm256_store_ps(s, _mm256_mul_ps(_mm256_set1_ps(DW[r][b]), _mm256_loadu_ps(DA[b])));
#pragma GCC unroll 8
      for (int t = 0; t < T; t++) {
        const __m256i x = _mm256_sign_epi8(load(&A[t][b * 32]), v);
        const __m256i dv = _mm256_madd_epi16(_mm256_maddubs_epi16(av, x), ones);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dv), _mm256_broadcast_ss(s + t), acc[t]);
      }
    }
    for (int t = 0; t < T; t++) out_a[r][t] = hsum(acc[t]);
  }
}

template <bool Q5>
__attribute__((noinline)) void order_b() {
  constexpr int RR = 4;  // rows at once
  const __m256i ones = _mm256_set1_epi16(1);
  for (int r0 = 0; r0 < R; r0 += RR) {
    __m256 acc[RR];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (int b = 0; b < NB; b++) {
      __m256i is[RR];
      if (Q5) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
          __m256i s16[RR];
#pragma GCC unroll 4
          for (int q = 0; q < 4; q++) {
            const int kq = b * 8 + h * 4 + q;
            const __m256i a = load(AL[kq]);
#pragma GCC unroll 4
            for (int i = 0; i < RR; i++) {
              const __m256i m = _mm256_maddubs_epi16(bcast4(&W[r0 + i][kq * 4]), a);
              s16[i] = q ? _mm256_add_epi16(s16[i], m) : m;  // 4 x 2 x 31 x 127 < 32768
            }
          }
#pragma GCC unroll 4
          for (int i = 0; i < RR; i++) {
            const __m256i m = _mm256_madd_epi16(s16[i], ones);
            is[i] = h ? _mm256_add_epi32(is[i], m) : m;
          }
        }
        const __m256i c = load(CORR[b]);
        for (auto& x : is) x = _mm256_sub_epi32(x, c);
      } else {
#pragma GCC unroll 8
        for (int q = 0; q < 8; q++) {
          const int kq = b * 8 + q;
          const __m256i a = load(AL[kq]), aa = load(AABS[kq]);
#pragma GCC unroll 4
          for (int i = 0; i < RR; i++) {
            const __m256i p =
                _mm256_madd_epi16(_mm256_maddubs_epi16(aa, _mm256_sign_epi8(bcast4(&W[r0 + i][kq * 4]), a)), ones);
            is[i] = q ? _mm256_add_epi32(is[i], p) : p;
          }
        }
      }
      const __m256 da = _mm256_loadu_ps(DA[b]);
#pragma GCC unroll 4
      for (int i = 0; i < RR; i++)
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[i]), _mm256_mul_ps(_mm256_set1_ps(DW[r0 + i][b]), da), acc[i]);
    }
    for (int i = 0; i < RR; i++) _mm256_storeu_ps(out_b[r0 + i], acc[i]);
  }
}

double gmacs(void (*f)()) {
  return double(R) * K * T / fastest_ms(f) * 1e-6;
}

template <bool Q5>
void run(const char* name) {
  uint32_t x = 12345;
  auto rnd = [&] { return x = x * 1664525u + 1013904223u, x >> 8; };
  for (int r = 0; r < R; r++) {
    for (int k = 0; k < K; k++)
      W[r][k] = Q5 ? static_cast<uint8_t>(rnd() % 32) : static_cast<uint8_t>(static_cast<int8_t>(rnd() % 255 - 127));
    for (int b = 0; b < NB; b++) DW[r][b] = 1e-3f * static_cast<float>(rnd() % 1000 + 1);
  }
  for (int t = 0; t < T; t++)
    for (int k = 0; k < K; k++) A[t][k] = static_cast<int8_t>(static_cast<int>(rnd() % 255) - 127);
  for (int b = 0; b < NB; b++)
    for (int t = 0; t < T; t++) {
      DA[b][t] = 1e-3f * static_cast<float>(rnd() % 1000 + 1);
      int s = 0;
      for (int j = 0; j < 32; j++) s += A[t][b * 32 + j];
      CORR[b][t] = 16 * s;
    }
  for (int q = 0; q < K / 4; q++)
    for (int t = 0; t < T; t++)
      for (int j = 0; j < 4; j++) {
        AL[q][t * 4 + j] = A[t][q * 4 + j];
        AABS[q][t * 4 + j] = static_cast<int8_t>(std::abs(A[t][q * 4 + j]));
      }
  order_a<Q5>();
  order_b<Q5>();
  double diff = 0;
  for (int r = 0; r < R; r++)
    for (int t = 0; t < T; t++)
      diff = std::max(diff, std::fabs(double(out_a[r][t]) - out_b[r][t]) / (std::fabs(double(out_a[r][t])) + 1e-3));
  const double a = gmacs(order_a<Q5>), b = gmacs(order_b<Q5>);
  std::printf("%-5s A (llama.cpp's order) %6.1f GMAC/s   B (block sums) %6.1f GMAC/s   B/A %.2f   rel diff %.1e\n",
              name, a, b, b / a, diff);
}

}  // namespace

int main() {
  for (int i = 0; i < 3; i++) {
    run<false>("q8_0");
    run<true>("q5_0");
  }
  return 0;
}
#else
int main() {
  std::printf("bench-block-order: an AVX2 + FMA build only (e.g. -march=x86-64-v3)\n");
  return 0;
}
#endif
