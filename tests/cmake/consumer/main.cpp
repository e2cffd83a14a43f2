// A program that uses llminfer the way a CMake or pkg-config user would (make cmake-check builds
// it four ways). It writes a tiny GGUF model whose greedy continuation is known by construction,
// loads it through the public API and checks what comes out:
//   a one-layer llama whose attention and MLP weights are zero, so the residual stream is the
//   embedding of the current token; embeddings are one-hot and output.weight maps each token to
//   its successor, so greedy decoding after <s> reads "▁Hello" "," "▁world" "!" then </s>.
//   consumer DIR     writes DIR/consumer.gguf; exit status 0 only if every check passed.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "llminfer.hpp"

namespace {

constexpr int kVocab = 8;  // also the embedding width (one-hot)
const char* const kPieces[kVocab] = {"<unk>", "<s>",         "</s>", "\xE2\x96\x81Hello", ",", "\xE2\x96\x81world",
                                     "!",     "\xE2\x96\x81"};
const int32_t kTypes[kVocab] = {2, 3, 3, 1, 1, 1, 1, 1};  // unknown, control, control, normal...
const int kNext[kVocab] = {2, 3, 2, 4, 5, 6, 2, 7};       // <s> -> Hello -> , -> world -> ! -> </s>

struct Gguf {
  std::vector<uint8_t> kv, info, data;
  uint64_t n_kv = 0, n_tensors = 0;
  static void raw(std::vector<uint8_t>& b, const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  }
  static void u32(std::vector<uint8_t>& b, uint32_t v) { raw(b, &v, 4); }  // (little-endian hosts)
  static void u64(std::vector<uint8_t>& b, uint64_t v) { raw(b, &v, 8); }
  static void str(std::vector<uint8_t>& b, const std::string& s) {
    u64(b, s.size());
    raw(b, s.data(), s.size());
  }
  void key(const std::string& k, uint32_t type) {
    str(kv, k);
    u32(kv, type);
    n_kv++;
  }
  void kv_u32(const std::string& k, uint32_t v) { key(k, 4), u32(kv, v); }
  void kv_f32(const std::string& k, float v) { key(k, 6), raw(kv, &v, 4); }
  void kv_bool(const std::string& k, bool v) { key(k, 7), kv.push_back(v ? 1 : 0); }
  void kv_str(const std::string& k, const std::string& v) { key(k, 8), str(kv, v); }
  template <class T>
  void kv_array(const std::string& k, uint32_t elem_type, const std::vector<T>& v) {
    key(k, 9), u32(kv, elem_type), u64(kv, v.size());
    for (const T& x : v) {
      if constexpr (std::is_same_v<T, std::string>)
        str(kv, x);
      else
        raw(kv, &x, sizeof x);
    }
  }
  void tensor(const std::string& name, std::vector<uint64_t> dims, const std::vector<float>& v) {
    str(info, name);
    u32(info, static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(info, d);
    u32(info, 0);  // F32
    u64(info, data.size());
    raw(data, v.data(), v.size() * 4);
    while (data.size() % 32) data.push_back(0);
    n_tensors++;
  }
  std::vector<uint8_t> build() const {
    std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
    u32(b, 3);
    u64(b, n_tensors);
    u64(b, n_kv);
    b.insert(b.end(), kv.begin(), kv.end());
    b.insert(b.end(), info.begin(), info.end());
    while (b.size() % 32) b.push_back(0);  // default alignment
    b.insert(b.end(), data.begin(), data.end());
    return b;
  }
};

bool write_model(const std::string& path) {
  const uint64_t n = kVocab;
  Gguf g;
  g.kv_str("general.architecture", "llama");
  g.kv_str("general.name", "cmake-consumer");
  g.kv_u32("llama.block_count", 1);
  g.kv_u32("llama.context_length", 64);
  g.kv_u32("llama.embedding_length", kVocab);
  g.kv_u32("llama.feed_forward_length", kVocab);
  g.kv_u32("llama.attention.head_count", 1);
  g.kv_u32("llama.attention.head_count_kv", 1);
  g.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
  g.kv_str("tokenizer.ggml.model", "llama");
  g.kv_array("tokenizer.ggml.tokens", 8, std::vector<std::string>(kPieces, kPieces + kVocab));
  std::vector<float> scores;
  for (int i = 0; i < kVocab; i++) scores.push_back(-static_cast<float>(i));
  g.kv_array("tokenizer.ggml.scores", 6, scores);
  g.kv_array("tokenizer.ggml.token_type", 5, std::vector<int32_t>(kTypes, kTypes + kVocab));
  g.kv_u32("tokenizer.ggml.bos_token_id", 1);
  g.kv_u32("tokenizer.ggml.eos_token_id", 2);
  g.kv_u32("tokenizer.ggml.unknown_token_id", 0);
  g.kv_bool("tokenizer.ggml.add_bos_token", true);
  g.kv_bool("tokenizer.ggml.add_eos_token", false);
  std::vector<float> zero(n * n, 0.0f), ones(n, 1.0f), emb(n * n, 0.0f), out(n * n, 0.0f);
  for (int t = 0; t < kVocab; t++) {
    emb[static_cast<size_t>(t * kVocab + t)] = 1.0f;
    out[static_cast<size_t>(kNext[t] * kVocab + t)] = 5.0f;
  }
  g.tensor("token_embd.weight", {n, n}, emb);
  g.tensor("output_norm.weight", {n}, ones);
  g.tensor("output.weight", {n, n}, out);
  g.tensor("blk.0.attn_norm.weight", {n}, ones);
  for (const char* w : {"attn_q", "attn_k", "attn_v", "attn_output"})
    g.tensor(std::string("blk.0.") + w + ".weight", {n, n}, zero);
  g.tensor("blk.0.ffn_norm.weight", {n}, ones);
  for (const char* w : {"ffn_gate", "ffn_up", "ffn_down"})
    g.tensor(std::string("blk.0.") + w + ".weight", {n, n}, zero);
  std::vector<uint8_t> bytes = g.build();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

int failures = 0;
void check(bool ok, const char* what) {
  std::printf("  %s: %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) failures++;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: %s DIR\n", argv[0]), 2;
  std::printf("llminfer %s (header %s)\n", llminfer::version(), LLMINFER_VERSION_STRING);
  check(std::strcmp(llminfer::version(), LLMINFER_VERSION_STRING) == 0, "the library is the header's version");
#ifdef CONSUMER_EXPECT_VERSION
  check(std::strcmp(llminfer::version(), CONSUMER_EXPECT_VERSION) == 0, "and the version CMake found");
#endif
  std::string path = std::string(argv[1]) + "/consumer.gguf";
  if (!write_model(path)) return std::fprintf(stderr, "cannot write %s\n", path.c_str()), 2;

  auto missing = llminfer::Model::load(std::string(argv[1]) + "/no-such-model.gguf");
  check(!missing && missing.error().code == llminfer::Errc::io, "a missing file is an io error value");

  auto model = llminfer::Model::load(path, {.threads = 2, .context = 32});
  if (!model) return std::fprintf(stderr, "load: %s\n", model.error().message.c_str()), 1;
  // SentencePiece: a space is prepended, and only merges that make a piece of the vocabulary are
  // made ("\xE2\x96\x81," and ",!" are not pieces)
  auto ids = model->tokenize(",!");
  if (!ids) return std::fprintf(stderr, "tokenize: %s\n", ids.error().message.c_str()), 1;
  std::printf("  tokenize(\",!\") =");
  for (int32_t id : *ids) std::printf(" %d", id);
  std::printf("\n");
  check(*ids == std::vector<int32_t>{1, 7, 4, 6}, "tokenize(\",!\") = <s> \xE2\x96\x81 , !");
  const std::vector<int32_t> bos = {1};
  auto r = model->generate(std::span<const int32_t>(bos), {.max_tokens = 16, .temperature = 0.0f});
  if (!r) return std::fprintf(stderr, "generate: %s\n", r.error().message.c_str()), 1;
  std::printf("  generated \"%s\" (%zu tokens, stop %s)\n", r->text.c_str(), r->tokens.size(),
              llminfer::to_string(r->stop));
  check(r->tokens == std::vector<int32_t>{3, 4, 5, 6}, "greedy decoding follows the model's successor table");
  check(r->stop == llminfer::StopReason::eos, "and stops at </s>");
  check(r->text == " Hello, world!", "the text is the pieces with \xE2\x96\x81 as a space");
  std::printf("%s\n", failures ? "consumer: FAILED" : "consumer: ok");
  return failures ? 1 : 0;
}
