// Tokenizer throughput of llminfer on one file (bench/tokenizer.sh runs it next to llama.cpp's).
//   tokenizer_bench MODEL FILE [--reps N] [--special] [--no-bos]
// Prints {"bytes":..., "tokens":..., "best_ms":..., "mb_per_s":..., "load_ms":...}: the best of N encodes
// of the whole file; load_ms (description + tokenizer build) is reported apart and not in the rate.
#define LLMINFER_IMPLEMENTATION
#include "../llminfer.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

int main(int argc, char** argv) {
  using namespace llminfer::detail;
  if (argc < 3) {
    std::fprintf(stderr, "usage: tokenizer_bench MODEL FILE [--reps N] [--special] [--no-bos]\n");
    return 1;
  }
  int reps = 5;
  bool special = false, add = true;
  for (int i = 3; i < argc; i++) {
    if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--special")) special = true;
    else if (!std::strcmp(argv[i], "--no-bos")) add = false;
  }
  std::ifstream f(argv[2], std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  double t0 = now_ms();
  auto desc = load_description(argv[1]);
  if (!desc && is_directory(argv[1])) desc = tokenizer_description(argv[1]);
  if (!desc) {
    std::fprintf(stderr, "%s\n", desc.error().message.c_str());
    return 2;
  }
  auto tok = Tokenizer::build(**desc);
  if (!tok) {
    std::fprintf(stderr, "%s\n", tok.error().message.c_str());
    return 2;
  }
  double load_ms = now_ms() - t0;
  double best = 1e30;
  size_t n = 0;
  for (int r = 0; r < reps; r++) {
    double a = now_ms();
    auto ids = (*tok)->encode(text, add, special);
    best = std::min(best, now_ms() - a);
    n = ids ? ids->size() : 0;
  }
  std::printf("{\"bytes\":%zu,\"tokens\":%zu,\"best_ms\":%.2f,\"mb_per_s\":%.2f,\"load_ms\":%.1f}\n", text.size(), n,
              best, static_cast<double>(text.size()) / 1e6 / (best / 1e3), load_ms);
  return 0;
}
