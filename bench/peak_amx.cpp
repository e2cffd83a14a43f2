// The int8 peak of this CPU's matrix units, for bench/RESULTS.md's "fraction of the peak": AMX
// (tdpbssd on 16 x 64-byte tiles: 16 x 16 x 64 = 16384 multiply-adds each) and, beside it, AVX-512
// VNNI (vpdpbusd, 64 each), with 1 and with every thread, each thread on its own independent
// accumulators (4 C tiles; 10 zmm). Register-only loops: no memory traffic.
//   make build/bench-peak-amx && build/bench-peak-amx [SECONDS per test, default 0.5]
// Needs a build with AMX-INT8 and AVX512-VNNI (-march=native on such a CPU) and, on Linux, the OS's
// permission for the tiles (arch_prctl ARCH_REQ_XCOMP_PERM), which it asks for.
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512VNNI__)
namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Multiply-adds per second of one thread for `secs`.
double amx_thread(double secs) {
  TileConfig c;
  for (int i = 0; i < 8; i++) {
    c.rows[i] = 16;
    c.colsb[i] = 64;
  }
  _tile_loadconfig(&c);
  alignas(64) int8_t a[16][64], b[16][64];
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 64; j++) {
      a[i][j] = static_cast<int8_t>(i + j);
      b[i][j] = static_cast<int8_t>(i - j);
    }
  _tile_loadd(4, a, 64);
  _tile_loadd(5, a, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(7, b, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const double t0 = seconds_now();
  double t1 = t0;
  int64_t n = 0;
  while (t1 - t0 < secs) {
    for (int k = 0; k < 1024; k++) {  // 4 independent products of 16 x 16 x 64 each
      _tile_dpbssd(0, 4, 6);
      _tile_dpbssd(1, 4, 7);
      _tile_dpbssd(2, 5, 6);
      _tile_dpbssd(3, 5, 7);
    }
    n += 4 * 1024;
    t1 = seconds_now();
  }
  alignas(64) int32_t out[16][16];
  _tile_stored(0, out, 64);
  _tile_release();
  if (out[0][0] == 12345) std::printf(" ");  // keep the result alive
  return static_cast<double>(n) * 16 * 16 * 64 / (t1 - t0);
}

double vnni_thread(double secs) {
  __m512i acc[10];
  for (int i = 0; i < 10; i++) acc[i] = _mm512_set1_epi32(i);
  __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-2);
  __asm__ volatile("" : "+v"(x), "+v"(y));  // not known to the compiler
  const double t0 = seconds_now();
  double t1 = t0;
  int64_t n = 0;
  while (t1 - t0 < secs) {
    for (int k = 0; k < 4096; k++)
#pragma GCC unroll 10
      for (int i = 0; i < 10; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], x, y);  // 10 chains in flight
    n += 10 * 4096;
    t1 = seconds_now();
  }
  int32_t s = 0;
  alignas(64) int32_t lanes[16];
  for (int i = 0; i < 10; i++) {
    _mm512_store_si512(lanes, acc[i]);
    for (int32_t v : lanes) s += v;
  }
  if (s == 12345) std::printf(" ");
  return static_cast<double>(n) * 64 / (t1 - t0);
}

// Sum over `threads` threads running f at once.
template <class F>
double run(int threads, double secs, F f) {
  std::vector<double> r(static_cast<size_t>(threads));
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; i++) ts.emplace_back([&, i] { r[static_cast<size_t>(i)] = f(secs); });
  double sum = 0;
  for (int i = 0; i < threads; i++) {
    ts[static_cast<size_t>(i)].join();
    sum += r[static_cast<size_t>(i)];
  }
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  const double secs = argc > 1 ? std::atof(argv[1]) : 0.5;
#if defined(__linux__)
  if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) != 0) {
    std::printf("the OS refuses the AMX tiles to this process\n");
    return 1;
  }
#endif
  const int n = static_cast<int>(std::thread::hardware_concurrency());
  std::printf("int8 multiply-adds, GMAC/s (register-only loops)\n");
  for (int t : {1, n}) {
    std::printf("amx  tdpbssd  %dT %10.1f\n", t, run(t, secs, amx_thread) / 1e9);
    std::printf("vnni vpdpbusd %dT %10.1f\n", t, run(t, secs, vnni_thread) / 1e9);
    if (n == 1) break;
  }
  return 0;
}
#else
int main() {
  std::printf("this build has no AMX-INT8 / AVX512-VNNI (build with -march=native on a CPU that has them)\n");
  return 0;
}
#endif
