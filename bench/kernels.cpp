// Kernel micro-benchmark: one matmul shape at a time, single thread, timed in thread CPU time and
// the fastest of a kind's runs counted, so that other load on a shared machine disturbs it little.
// For tuning kernels; end-to-end speed against llama.cpp is bench/compare.py.
//   build/bench-kernels [TYPE...]        (types: q4_0 q5_0 q8_0 q4_K q6_K f16 bf16 f32; default all)
//   build/bench-kernels attn             (the attention kernels, f16 cache)
#define LLMINFER_IMPLEMENTATION
#include <ctime>
#include <random>
#include <string>

#include "../llminfer.hpp"
#include "timing.hpp"

namespace li = llminfer::detail;

// The attention kernels over an f16 cache: nq queries (the heads of a key-value group, of one token
// or of several) against n cells of hd values, scores (q.k) and value sums, MAC/s of each.
static void bench_attention() {
  const li::KernelTable& k = li::kernels();
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> ud(-1, 1);
  std::printf("simd %s; attention, f16 cache, single thread, CPU time; GMAC/s = nq*n*hd / time\n", k.name);
  std::printf("%6s %6s %6s %10s %10s\n", "hd", "cells", "nq", "scores", "values");
  for (int hd : {128, 256})
    for (int n : {512, 2048, 8192}) {
      const size_t stride = size_t(hd) * 2;
      std::vector<uint8_t> kc(size_t(n) * stride), vc(size_t(n) * stride);
      for (size_t i = 0; i < size_t(n) * size_t(hd); i++) {
        const uint16_t a = li::f32_to_fp16(ud(rng)), b = li::f32_to_fp16(ud(rng));
        std::memcpy(&kc[2 * i], &a, 2);
        std::memcpy(&vc[2 * i], &b, 2);
      }
      for (int nq : {1, 2, 4, 8, 16}) {
        // (w: weights as a softmax leaves them, apart from the scores written over s)
        std::vector<float> q(size_t(nq) * size_t(hd)), s(size_t(nq) * size_t(n)), w(s.size()),
            out(size_t(nq) * size_t(hd)), part(size_t(64) * size_t(hd));
        for (float& x : q) x = ud(rng);
        for (float& x : w) x = (ud(rng) + 1) / float(n);
        auto scores = [&] { k.attn_scores(q.data(), nq, size_t(hd), kc.data(), stride, n, hd, true, 0.1f, s.data(), size_t(n)); };
        auto values = [&] {
          k.attn_values(w.data(), nq, size_t(n), vc.data(), stride, n, 0, n - 1, hd, true, true, false, part.data(),
                        out.data(), size_t(hd));
        };
        const double macs = double(nq) * n * hd * 1e-6;
        std::printf("%6d %6d %6d %10.1f %10.1f\n", hd, n, nq, macs / fastest_ms(scores), macs / fastest_ms(values));
      }
    }
}

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == "attn") return bench_attention(), 0;
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
              "gemm-exact", "each");
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
        // gemv, gemm (AVX2: matmul), the same without the block-sum order (MatmulScratch::block_sums:
        // the AMX tiles, AVX2's dots_q32), each token a product of its own (matmul_each: batched
        // decoding; its time includes preparing the activations)
        double res[4] = {0, 0, 0, 0};
        for (int path = 0; path < 4; path++) {
          scratch.block_sums = path != 2;
          auto each = [&] { (void)li::matmul_each(v, x.data(), T, y.data(), s.rows, pool, false, scratch); };
#if !defined(LLMINFER_DISPATCH) && !defined(LLMINFER_SIMD_SCALAR) && !defined(LLMINFER_FORCE_SCALAR) && defined(__AVX512F__) && \
    defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__) && defined(__F16C__)  // li::gemm: the AVX-512 kernels
          auto run = [&] {
            if (path == 3) each();
            else path ? (void)li::gemm(v, in, y.data(), s.rows, pool, scratch) : li::gemv(v, in, y.data(), s.rows, pool);
          };
#else  // AVX2 (and the others): matmul, with and without the block-sum order (its gemm_rows)
          auto run = [&] {
            if (path == 3) each();
            else path ? (void)li::matmul(v, in, y.data(), s.rows, pool, scratch) : li::gemv(v, in, y.data(), s.rows, pool);
          };
#endif
          res[path] = double(s.rows) * s.k * T / fastest_ms(run) * 1e-6;
        }
        std::printf("%-6s %-12s %6lld %6lld %10lld %10.1f %10.1f %10.1f %10.1f\n", li::dtype_name(t), s.what,
                    (long long)s.rows, (long long)s.k, (long long)T, res[0], res[1], res[2], res[3]);
      }
    }
  }
}
