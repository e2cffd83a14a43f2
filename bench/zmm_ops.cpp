// Throughput of the 512-bit instructions the x86 kernels are made of, alone and two kinds
// interleaved, in instructions per cycle of one core: which of them share an execution port on
// this CPU, so that a kernel's cost can be counted before it is written (bench/RESULTS.md). The
// clock is measured first (a chain of dependent scalar adds, one per cycle). Register-only loops,
// 8 independent destinations: no memory traffic, no dependency longer than 8 instructions.
//   make build/bench-zmm-ops && build/bench-zmm-ops
// Needs a build with AVX-512 VNNI (-march=native on such a CPU); elsewhere it says so.
#include <chrono>
#include <cstdio>

#if defined(__x86_64__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double clock_ghz() {
  const long n = 300000000;
  long x = 0;
  const double t0 = seconds_now();
  for (long i = 0; i < n; i++) asm volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
  return 4.0 * static_cast<double>(n) / (seconds_now() - t0) * 1e-9;
}

// 16 instructions per iteration into zmm0..zmm7 (twice each), sources zmm8 and zmm9; a and b
// alternate (a = b: one kind).
#define LLMI_OPS_PAIR(a, b)                                                                                         \
  a " %%zmm0\n\t" b " %%zmm1\n\t" a " %%zmm2\n\t" b " %%zmm3\n\t" a " %%zmm4\n\t" b " %%zmm5\n\t" a " %%zmm6\n\t" b \
    " %%zmm7\n\t"
#define LLMI_OPS_RUN(name, a, b)                                                                            \
  do {                                                                                                      \
    const long n = 50000000;                                                                                \
    const double t0 = seconds_now();                                                                        \
    for (long i = 0; i < n; i++)                                                                            \
      asm volatile(LLMI_OPS_PAIR(a, b) LLMI_OPS_PAIR(a, b)::                                                \
                       : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7");                   \
    std::printf("%-24s %5.2f\n", name, 16.0 * static_cast<double>(n) / (seconds_now() - t0) / (ghz * 1e9)); \
  } while (0)

}  // namespace

int main() {
  const double ghz = clock_ghz();
  std::printf("clock %.2f GHz; 512-bit instructions per cycle, 8 independent destinations\n", ghz);
#define DPBUSD "vpdpbusd %%zmm8, %%zmm9,"
#define DPWSSD "vpdpwssd %%zmm8, %%zmm9,"
#define MADDUBSW "vpmaddubsw %%zmm8, %%zmm9,"
#define MADDWD "vpmaddwd %%zmm8, %%zmm9,"
#define FMA "vfmadd231ps %%zmm8, %%zmm9,"
#define CVT "vcvtdq2ps %%zmm9,"
#define SLLVD "vpsllvd %%zmm8, %%zmm9,"
#define SLLD "vpslld $3, %%zmm9,"
#define TERNLOG "vpternlogd $0xEC, %%zmm8, %%zmm9,"
#define PERMW "vpermw %%zmm8, %%zmm9,"
#define PSHUFB "vpshufb %%zmm8, %%zmm9,"
#define SHUFI64 "vshufi64x2 $0x44, %%zmm8, %%zmm9,"
#define PADDD "vpaddd %%zmm8, %%zmm9,"
#define PADDW "vpaddw %%zmm8, %%zmm9,"
#define MSHIFT "vpmultishiftqb %%zmm8, %%zmm9,"
#define BLENDW "vpblendmw %%zmm8, %%zmm9,"
#define PERMT2W "vpermt2w %%zmm8, %%zmm9,"
#define SRLD "vpsrld $3, %%zmm9,"
  LLMI_OPS_RUN("vpdpbusd", DPBUSD, DPBUSD);
  LLMI_OPS_RUN("vpdpwssd", DPWSSD, DPWSSD);
  LLMI_OPS_RUN("vpmaddubsw", MADDUBSW, MADDUBSW);
  LLMI_OPS_RUN("vpmaddwd", MADDWD, MADDWD);
  LLMI_OPS_RUN("vfmadd231ps", FMA, FMA);
  LLMI_OPS_RUN("vcvtdq2ps", CVT, CVT);
  LLMI_OPS_RUN("vpsllvd", SLLVD, SLLVD);
  LLMI_OPS_RUN("vpslld imm", SLLD, SLLD);
  LLMI_OPS_RUN("vpternlogd", TERNLOG, TERNLOG);
  LLMI_OPS_RUN("vpermw", PERMW, PERMW);
#if defined(__AVX512VBMI__)
  LLMI_OPS_RUN("vpmultishiftqb", MSHIFT, MSHIFT);
#endif
  LLMI_OPS_RUN("vpshufb", PSHUFB, PSHUFB);
  LLMI_OPS_RUN("vshufi64x2", SHUFI64, SHUFI64);
  LLMI_OPS_RUN("vpaddd", PADDD, PADDD);
  LLMI_OPS_RUN("vpermt2w", PERMT2W, PERMT2W);
  LLMI_OPS_RUN("vpblendmw", BLENDW, BLENDW);
  LLMI_OPS_RUN("vpdpbusd + vfmadd231ps", DPBUSD, FMA);
  LLMI_OPS_RUN("vpdpbusd + vpmaddubsw", DPBUSD, MADDUBSW);
  LLMI_OPS_RUN("vpmaddubsw + vpdpwssd", MADDUBSW, DPWSSD);
  LLMI_OPS_RUN("vpdpbusd + vcvtdq2ps", DPBUSD, CVT);
  LLMI_OPS_RUN("vpdpbusd + vpsllvd", DPBUSD, SLLVD);
  LLMI_OPS_RUN("vpdpbusd + vpslld", DPBUSD, SLLD);
  LLMI_OPS_RUN("vpdpbusd + vpternlogd", DPBUSD, TERNLOG);
  LLMI_OPS_RUN("vpdpbusd + vpermw", DPBUSD, PERMW);
  LLMI_OPS_RUN("vpdpbusd + vshufi64x2", DPBUSD, SHUFI64);
  LLMI_OPS_RUN("vpdpbusd + vpaddd", DPBUSD, PADDD);
  LLMI_OPS_RUN("vfmadd231ps + vcvtdq2ps", FMA, CVT);
  LLMI_OPS_RUN("vfmadd231ps + vpermw", FMA, PERMW);
  LLMI_OPS_RUN("vpsllvd + vpermw", SLLVD, PERMW);
  LLMI_OPS_RUN("vpternlogd + vpermw", TERNLOG, PERMW);
  LLMI_OPS_RUN("vpmaddubsw + vpaddw", MADDUBSW, PADDW);
  LLMI_OPS_RUN("vpmaddubsw + vpblendmw", MADDUBSW, BLENDW);
  LLMI_OPS_RUN("vpmaddubsw + vpsrld", MADDUBSW, SRLD);
  LLMI_OPS_RUN("vpmaddubsw + vpermt2w", MADDUBSW, PERMT2W);
  LLMI_OPS_RUN("vpmaddubsw + vpslld", MADDUBSW, SLLD);
  LLMI_OPS_RUN("vpmaddubsw + vpternlogd", MADDUBSW, TERNLOG);
  LLMI_OPS_RUN("vpmaddubsw + vcvtdq2ps", MADDUBSW, CVT);
  LLMI_OPS_RUN("vpmaddubsw + vpermw", MADDUBSW, PERMW);
  LLMI_OPS_RUN("vpmaddubsw + vshufi64x2", MADDUBSW, SHUFI64);
  LLMI_OPS_RUN("vpdpwssd + vpaddw", DPWSSD, PADDW);
  LLMI_OPS_RUN("vpdpwssd + vpslld", DPWSSD, SLLD);
  LLMI_OPS_RUN("vpdpwssd + vcvtdq2ps", DPWSSD, CVT);
  LLMI_OPS_RUN("vfmadd231ps + vpaddd", FMA, PADDD);
#if defined(__AVX512VBMI__)
  LLMI_OPS_RUN("vpmaddubsw + vpmultishiftqb", MADDUBSW, MSHIFT);
  LLMI_OPS_RUN("vpdpwssd + vpmultishiftqb", DPWSSD, MSHIFT);
#endif
  return 0;
}
#else
int main() {
  std::printf("bench-zmm-ops needs an x86-64 build with AVX-512 BW and VNNI (-march=native on such a CPU)\n");
  return 0;
}
#endif
