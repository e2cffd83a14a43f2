// The sampler's cost per token: one draw from a vocabulary of logits by each kind of sampling
// chain, single thread, in thread CPU time, the fastest of a setting's runs over 150 ms counted
// (a neighbour on the host only ever slows a run down). bench/RESULTS.md, "Sampling".
//   build/bench-sampler [VOCAB...]      (default 49152 151936 262144)
#define LLMINFER_IMPLEMENTATION
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "../llminfer.hpp"
#include "timing.hpp"

namespace li = llminfer::detail;

int main(int argc, char** argv) {
  std::vector<long> vocabs;
  for (int i = 1; i < argc; i++) vocabs.push_back(std::atol(argv[i]));
  if (vocabs.empty()) vocabs = {49152, 151936, 262144};
  struct Setting {
    const char* name;
    li::SamplerParams p;
  };
  const Setting settings[] = {
      {"greedy", {.temperature = 0.0f}},
      {"temperature 0.8 alone", {.temperature = 0.8f}},
      {"top-k 40, top-p 0.95, min-p 0.05 (CLI)", {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f}},
      {"top-p 0.9 alone", {.temperature = 0.8f, .top_p = 0.9f}},
      {"min-p 0.05 alone", {.temperature = 0.8f, .min_p = 0.05f}},
      {"top-k 40, repeat penalty 1.1", {.temperature = 0.8f, .top_k = 40, .repeat_penalty = 1.1f}},
  };
  std::printf("%-8s %-40s %10s\n", "vocab", "sampling", "ms/token");
  for (long n : vocabs) {
    if (n <= 0) {
      std::fprintf(stderr, "bench-sampler: a vocabulary size must be a positive number\n");
      return 2;
    }
    std::vector<float> logits(static_cast<size_t>(n));
    std::mt19937 g(1);
    std::normal_distribution<float> nd(0.0f, 3.0f);  // a spread like a model's logits
    for (auto& l : logits) l = nd(g);
    std::vector<int32_t> history(256);
    for (auto& t : history) t = static_cast<int32_t>(g() % static_cast<uint32_t>(n));
    for (const Setting& s : settings) {
      li::Sampler sampler;
      li::Rng rng(1);
      bool none = false;  // (random logits always leave a token)
      const double best = fastest_ms([&] { none |= sampler.sample(logits, history, s.p, rng) < 0; });
      std::printf("%-8ld %-40s %10.3f%s\n", n, s.name, best, none ? " (no token)" : "");
    }
  }
  return 0;
}
