// Kernel micro-benchmark: one matmul shape at a time, single thread, timed in thread CPU time and
// the fastest of a kind's runs counted, so that other load on a shared machine disturbs it little.
// For tuning kernels; end-to-end speed against llama.cpp is bench/compare.py.
//   build/bench-kernels [TYPE...]        (types: q4_0 q5_0 q8_0 q4_K q6_K f16 bf16 f32; default all)
#define LLMINFER_IMPLEMENTATION
#include <ctime>
#include <random>
#include <string>

#include "../llminfer.hpp"

namespace li = llminfer::detail;

static double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

int main(int argc, char** argv) {
  std::vector<li::DType> types = {li::DType::q4_K, li::DType::q6_K, li::DType::q8_0, li::DType::q5_0, li::DType::q4_0, li::DType::f16};
  if (argc > 1) {
    types.clear();
    for (int i = 1; i < argc; i++)
      for (int v = 0; v < 43; v++)
        if (std::string(li::dtype_name(static_cast<li::DType>(v))) == argv[i]) types.push_back(static_cast<li::DType>(v));
  }
  struct Shape { int64_t rows, k; const char* what; };
  // "small": a matrix that stays in a core's L2 (1 MiB or more) between runs (at most 1 MiB, f16; the
  // quantized types 0.3-0.6 MiB), so that its gemv column is the kernel's speed without the misses
  const Shape shapes[] = {{2048, 1024, "q_proj 0.6b"}, {3072, 1024, "gate 0.6b"}, {1024, 3072, "down 0.6b"},
                          {256, 2048, "small"}};
  li::ThreadPool pool(1);
  li::MatmulScratch scratch(pool.size());
  std::mt19937 rng(1);
  std::printf("simd %s; single thread, CPU time; GMAC/s = rows*K*tokens / time\n", li::simd_compiled());
  std::printf("%-6s %-12s %6s %6s %10s %10s %10s %10s %10s\n", "type", "shape", "rows", "K", "tokens", "gemv", "gemm",
              "gemm-noamx", "each");
  for (li::DType t : types) {
    for (const Shape& s : shapes) {
      uint64_t rb = 0;
      if (!li::dtype_row_bytes(t, static_cast<uint64_t>(s.k), &rb)) continue;
      std::vector<uint8_t> w(rb * static_cast<uint64_t>(s.rows));
      for (auto& b : w) b = static_cast<uint8_t>(rng());
      // sane scales (random bytes can be inf/nan fp16)
      const size_t bs = li::dtype_traits(t)->bytes;
      for (size_t at = 0; at < w.size(); at += bs) {
        uint16_t h = li::f32_to_fp16(0.01f);
        if (t == li::DType::q6_K) std::memcpy(&w[at + 208], &h, 2);
        else if (t == li::DType::f16) std::memcpy(&w[at], &h, 2);
        else if (t != li::DType::f32 && t != li::DType::bf16) std::memcpy(&w[at], &h, 2);
        if (t == li::DType::q4_K) std::memcpy(&w[at + 2], &h, 2);
      }
      li::TensorView v;
      v.type = t;
      v.n_dims = 2;
      v.ne[0] = s.k;
      v.ne[1] = s.rows;
      v.data = w.data();
      v.nbytes = w.size();
      for (int64_t T : {1, 2, 4, 8, 16, 32, 128, 512}) {
        std::vector<float> x(static_cast<size_t>(T * s.k)), y(static_cast<size_t>(T * s.rows));
        std::normal_distribution<float> nd;
        for (auto& f : x) f = nd(rng);
        li::MatmulInput in(x.data(), T, s.k);
        in.prepare(li::act_form(t), pool, li::act_form(t) == li::ActForm::q8_256 ? &li::quantize_q8_256 : &li::quantize_q8_32);
        if (t == li::DType::mlx_q4 || t == li::DType::mlx_q8) in.prepare_mlx(v.group_size);
        // gemv, gemm, gemm without the AMX tiles (MatmulScratch::amx), each token a product of its own
        // (matmul_each: batched decoding; its time includes preparing the activations)
        double res[4] = {0, 0, 0, 0};
        for (int path = 0; path < 4; path++) {
          scratch.amx = path != 2;
          auto each = [&] { (void)li::matmul_each(v, x.data(), T, y.data(), s.rows, pool, false, scratch); };
#if !defined(LLMINFER_DISPATCH) && !defined(LLMINFER_SIMD_SCALAR) && !defined(LLMINFER_FORCE_SCALAR) && defined(__AVX512F__) && \
    defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__) && defined(__F16C__)  // li::gemm: the AVX-512 kernels
          auto run = [&] {
            if (path == 3) each();
            else path ? (void)li::gemm(v, in, y.data(), s.rows, pool, scratch) : li::gemv(v, in, y.data(), s.rows, pool);
          };
#else
          auto run = [&] { path == 3 ? each() : li::gemv(v, in, y.data(), s.rows, pool); };
#endif
          run();  // warm-up
          // the fastest of the runs in 150 ms: a neighbour on the host (a busy sibling thread, a
          // stolen time slice) only ever slows a run down
          double t0 = cpu_ms(), t1 = t0, best = 1e30;
          while (t1 - t0 < 150) {
            const double ta = cpu_ms();
            run();
            t1 = cpu_ms();
            best = std::min(best, t1 - ta);
          }
          res[path] = double(s.rows) * s.k * T / best * 1e-6;
        }
        std::printf("%-6s %-12s %6lld %6lld %10lld %10.1f %10.1f %10.1f %10.1f\n", li::dtype_name(t), s.what,
                    (long long)s.rows, (long long)s.k, (long long)T, res[0], res[1], res[2], res[3]);
      }
    }
  }
}
