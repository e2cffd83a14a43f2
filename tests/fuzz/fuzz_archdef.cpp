// libFuzzer target: the architecture-definition parser and validator, from memory (tests/fuzz/corpus/archdef
// holds the built-in definitions, a text using every form of the language, and a few broken ones as
// seeds).
// Every refusal must name the text (and be an archdef error); every accepted text must parse again to
// the same definition (same sha256, sections and parameters): parsing is a pure function of the bytes.
// An accepted text is then compiled against a small model built here (every tensor name the built-ins
// use, a per-layer metadata array): values, per-layer rules, shapes and conventions are evaluated, and
// must either compile or fail with an error naming the definition, never crash.
#define LLMINFER_IMPLEMENTATION
#include "../../llminfer.hpp"

namespace {

using namespace llminfer;
using namespace llminfer::detail;

struct Gguf {
  std::vector<uint8_t> kv, info, data;
  uint64_t n_kv = 0, n_t = 0;
  static void put(std::vector<uint8_t>& b, const void* p, size_t n) {
    b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  }
  static void str(std::vector<uint8_t>& b, const std::string& s) {
    uint64_t n = s.size();
    put(b, &n, 8);
    put(b, s.data(), s.size());
  }
  void key(const std::string& k, uint32_t type) {
    str(kv, k);
    put(kv, &type, 4);
    n_kv++;
  }
  void u32(const std::string& k, uint32_t v) { key(k, 4), put(kv, &v, 4); }
  void f32(const std::string& k, float v) { key(k, 6), put(kv, &v, 4); }
  void s(const std::string& k, const std::string& v) { key(k, 8), str(kv, v); }
  void i32s(const std::string& k, const std::vector<int32_t>& v) {
    key(k, 9);
    uint32_t t = 5;
    uint64_t n = v.size();
    put(kv, &t, 4);
    put(kv, &n, 8);
    put(kv, v.data(), v.size() * 4);
  }
  void tensor(const std::string& name, std::vector<uint64_t> ne, float center) {
    str(info, name);
    uint32_t nd = static_cast<uint32_t>(ne.size()), type = 0;
    put(info, &nd, 4);
    uint64_t count = 1;
    for (uint64_t d : ne) put(info, &d, 8), count *= d;
    put(info, &type, 4);
    uint64_t off = data.size();
    put(info, &off, 8);
    for (uint64_t k = 0; k < count; k++) {
      float x = center + 0.01f * static_cast<float>((k * 7919 + n_t * 104729) % 61) - 0.3f;
      put(data, &x, 4);
    }
    while (data.size() % 32) data.push_back(0);
    n_t++;
  }
  std::vector<uint8_t> build() const {
    std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
    uint32_t v = 3;
    put(b, &v, 4);
    put(b, &n_t, 8);
    put(b, &n_kv, 8);
    put(b, kv.data(), kv.size());
    put(b, info.data(), info.size());
    while (b.size() % 32) b.push_back(0);
    put(b, data.data(), data.size());
    return b;
  }
};

// A 3-layer model "fz" (n_embd 16, 2 heads and 1 KV head of 8, n_ff 12, 8 tokens) with every tensor
// the built-in definitions name.
const ModelDesc* model() {
  static std::vector<uint8_t> image;
  static std::shared_ptr<ModelDesc> desc;
  if (desc) return desc.get();
  Gguf g;
  const uint64_t E = 16, H = 2, KV = 1, D = 8, F = 12, V = 8, L = 3;
  g.s("general.architecture", "fz");
  g.u32("fz.block_count", L);
  g.u32("fz.embedding_length", E);
  g.u32("fz.feed_forward_length", F);
  g.u32("fz.attention.head_count", H);
  g.u32("fz.attention.head_count_kv", KV);
  g.u32("fz.context_length", 64);
  g.u32("fz.rope.dimension_count", 4);
  g.f32("fz.attention.layer_norm_epsilon", 1e-5f);
  g.u32("fz.attention.sliding_window", 2);
  g.u32("fz.general_zero", 0);
  g.i32s("fz.pattern", {1, 0, 1});
  g.tensor("token_embd.weight", {E, V}, 0);
  g.tensor("output.weight", {E, V}, 0);
  g.tensor("output_norm.weight", {E}, 1);
  g.tensor("output_norm.bias", {E}, 0);
  for (uint64_t i = 0; i < L; i++) {
    std::string b = "blk." + std::to_string(i) + ".";
    for (const char* n : {"attn_norm", "ffn_norm", "post_attention_norm", "post_ffw_norm"}) {
      g.tensor(b + n + ".weight", {E}, 1);
      g.tensor(b + n + ".bias", {E}, 0);
    }
    g.tensor(b + "attn_q.weight", {E, H * D}, 0);
    g.tensor(b + "attn_q.bias", {H * D}, 0);
    g.tensor(b + "attn_k.weight", {E, KV * D}, 0);
    g.tensor(b + "attn_k.bias", {KV * D}, 0);
    g.tensor(b + "attn_v.weight", {E, KV * D}, 0);
    g.tensor(b + "attn_v.bias", {KV * D}, 0);
    g.tensor(b + "attn_qkv.weight", {E, (H + 2 * KV) * D}, 0);
    g.tensor(b + "attn_output.weight", {H * D, E}, 0);
    g.tensor(b + "attn_output.bias", {E}, 0);
    g.tensor(b + "attn_q_norm.weight", {D, H}, 1);
    g.tensor(b + "attn_k_norm.weight", {D}, 1);
    g.tensor(b + "ffn_gate.weight", {E, F}, 0);
    g.tensor(b + "ffn_up.weight", {E, F}, 0);
    g.tensor(b + "ffn_up.bias", {F}, 0);
    g.tensor(b + "ffn_down.weight", {F, E}, 0);
    g.tensor(b + "ffn_down.bias", {E}, 0);
  }
  image = g.build();
  auto d = gguf_description(image.data(), image.size(), "fz.gguf");
  if (!d) __builtin_trap();  // the model above is valid
  desc = *d;
  return desc.get();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto d = archdef_parse(text, "fuzz.archdef", "", "fuzz.archdef");
  if (!d) {
    if (d.error().code != Errc::archdef) __builtin_trap();
    if (d.error().message.rfind("fuzz.archdef", 0) != 0) __builtin_trap();
    return 0;
  }
  if (d->name.empty() || d->block.empty() || d->epilogue.empty()) __builtin_trap();
  if (d->text != text || d->sha256 != sha256_hex(text)) __builtin_trap();
  // the file-name rule: the same text under its own name is accepted, under another name refused
  auto again = archdef_parse(text, "fuzz.archdef", d->name, "fuzz.archdef");
  if (!again || again->sha256 != d->sha256 || again->steps_per_layer() != d->steps_per_layer() ||
      again->prologue.size() != d->prologue.size() || again->epilogue.size() != d->epilogue.size() ||
      again->params.size() != d->params.size() || again->conventions.size() != d->conventions.size())
    __builtin_trap();
  if (archdef_parse(text, "fuzz.archdef", d->name + "x", "fuzz.archdef")) __builtin_trap();
  // compile it against the small model: an error names the model and the definition
  Program p;
  ArchCompiler comp(*d, *model(), p, 20000);
  auto r = comp.run();
#ifdef FUZZ_ARCHDEF_PRINT  // (-DFUZZ_ARCHDEF_PRINT: say what each input compiled to)
  std::fprintf(stderr, "%s\n", r ? strf("compiled: %zu steps", p.steps.size()).c_str() : r.error().message.c_str());
#endif
  if (!r && r.error().message.find("fz.gguf: fuzz.archdef") != 0) __builtin_trap();
  return 0;
}
