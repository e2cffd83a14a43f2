// llama.cpp's tokenizer as a reference and a peer, for tools/ and bench/ (not part of the product).
// Built against the prebuilt llama.cpp of ../shared/tools/llamacpp-oracle by bench/build_lcpp_tokenize.sh.
//
//   lcpp_tokenize batch MODEL.gguf INPUT [--special] [--no-bos]
//       INPUT holds records "<byte count>\n<bytes>"; prints one line of space-separated ids per record.
//   lcpp_tokenize bench MODEL.gguf FILE [--special] [--reps N]
//       tokenizes FILE (add_special, parse_special as given) N times after loading the vocabulary only;
//       prints {"bytes":..., "tokens":..., "best_ms":..., "mb_per_s":..., "load_ms":...} (load excluded).
#include <llama.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

static std::vector<llama_token> tok(const llama_vocab* v, const std::string& s, bool add, bool special) {
  int n = -llama_tokenize(v, s.data(), (int32_t)s.size(), nullptr, 0, add, special);
  std::vector<llama_token> out(n > 0 ? n : 0);
  if (n > 0) llama_tokenize(v, s.data(), (int32_t)s.size(), out.data(), (int32_t)out.size(), add, special);
  return out;
}

static double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static void quiet(ggml_log_level, const char*, void*) {}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: lcpp_tokenize batch|bench MODEL.gguf FILE [--special] [--no-bos] [--reps N]\n");
    return 1;
  }
  std::string mode = argv[1], model = argv[2], file = argv[3];
  bool special = false, add = true;
  int reps = 5;
  for (int i = 4; i < argc; i++) {
    if (!std::strcmp(argv[i], "--special")) special = true;
    else if (!std::strcmp(argv[i], "--no-bos")) add = false;
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
  }
  llama_log_set(quiet, nullptr);
  if (const char* bins = std::getenv("LCPP_BINS")) ggml_backend_load_all_from_path(bins);
  llama_backend_init();
  double t0 = now_ms();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* m = llama_model_load_from_file(model.c_str(), mp);
  if (!m) {
    std::fprintf(stderr, "cannot load %s\n", model.c_str());
    return 2;
  }
  double load_ms = now_ms() - t0;
  const llama_vocab* v = llama_model_get_vocab(m);
  std::ifstream f(file, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string data = ss.str();
  if (mode == "batch") {
    size_t pos = 0;
    while (pos < data.size()) {
      size_t nl = data.find('\n', pos);
      if (nl == std::string::npos) break;
      size_t len = std::strtoull(data.c_str() + pos, nullptr, 10);
      std::string text = data.substr(nl + 1, len);
      pos = nl + 1 + len;
      auto ids = tok(v, text, add, special);
      std::string line;
      for (size_t k = 0; k < ids.size(); k++) line += (k ? " " : "") + std::to_string(ids[k]);
      std::printf("%s\n", line.c_str());
    }
  } else {
    double best = 1e30;
    size_t n = 0;
    for (int r = 0; r < reps; r++) {
      double a = now_ms();
      n = tok(v, data, add, special).size();
      best = std::min(best, now_ms() - a);
    }
    std::printf("{\"bytes\":%zu,\"tokens\":%zu,\"best_ms\":%.2f,\"mb_per_s\":%.2f,\"load_ms\":%.1f}\n", data.size(), n,
                best, data.size() / 1e6 / (best / 1e3), load_ms);
  }
  llama_model_free(m);
  return 0;
}
