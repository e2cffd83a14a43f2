// libFuzzer target for the tokenizer: encode / encode_prompt / decode / streaming decode of arbitrary bytes
// with real vocabularies (the small GGUF models of ../shared/models when present, LLMINFER_SHARED to point
// elsewhere) and built-in synthetic ones, and tokenizer.json files made of the fuzz input.
//
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined tests/fuzz/fuzz_tokenizer.cpp -o fuzz_tokenizer
//   ./fuzz_tokenizer tests/fuzz/corpus/tokenizer
//
// Input: byte 0 selects the tokenizer and the operation, the rest is the text (or the tokenizer.json).
// Invariants (abort when broken): ids are inside the vocabulary; decode(encode(text)) == text for the
// byte-level vocabularies without NFC, whatever the bytes; streamed text is valid UTF-8 and equals the
// lossy decoding; encode_prompt without ranges equals encode with special parsing.
#define LLMINFER_IMPLEMENTATION
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "../../llminfer.hpp"

namespace {
using namespace llminfer::detail;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_tokenizer: invariant broken: %s\n", what);
  std::abort();
}

Json jnum(int64_t v) {
  Json j;
  j.type = Json::Type::number;
  j.is_int = true;
  j.i = v;
  j.num = double(v);
  j.str = std::to_string(v);
  return j;
}

// A small byte-level BPE (llama-3 pre-tokenizer) and a small SentencePiece BPE, built without any file.
std::shared_ptr<const Tokenizer> synthetic(bool spm) {
  std::string src =
      spm ? R"({"model":{"type":"BPE","byte_fallback":true,"unk_token":"<unk>","fuse_unk":true,"vocab":{},"merges":[]},
    "normalizer":{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"\u2581"},{"type":"Replace","pattern":{"String":" "},"content":"\u2581"}]},
    "decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"\u2581"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]},
    "added_tokens":[{"id":0,"content":"<unk>","special":true},{"id":1,"content":"<s>","special":true},{"id":2,"content":"</s>","special":true}],
    "post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{"<s>":{"id":"<s>","ids":[1],"tokens":["<s>"]}}}})"
          : R"({"model":{"type":"BPE","ignore_merges":true,"vocab":{},"merges":[]},
    "pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]},
    "decoder":{"type":"ByteLevel"},"normalizer":{"type":"NFC"},
    "added_tokens":[{"id":300,"content":"<|end|>","special":true},{"id":301,"content":"<think>","special":false}]})";
  auto tj = json_parse(src, "synthetic");
  if (!tj) fail("synthetic tokenizer.json does not parse");
  Json& model = tj->members[0].second;
  Json* vocab = nullptr;
  Json* merges = nullptr;
  for (auto& [k, v] : model.members) {
    if (k == "vocab") vocab = &v;
    if (k == "merges") merges = &v;
  }
  std::vector<std::string> words = {"th", "the", "he", "in", "ing", "an", "and", "er", "on", "ll", "llo", "hello"};
  int id = spm ? 3 : 0;
  if (spm) {
    for (int b = 0; b < 256; b++) vocab->members.emplace_back(strf("<0x%02X>", b), jnum(id++));
    for (const char* c : {"\xE2\x96\x81", "t", "h", "e", "i", "n", "g", "a", "d", "r", "o", "l"})
      vocab->members.emplace_back(c, jnum(id++));
  } else {
    const auto& map = gpt2_byte_to_cp();
    for (int b = 0; b < 256; b++) {
      std::string s;
      utf8_append(s, map[size_t(b)]);
      vocab->members.emplace_back(s, jnum(id++));
    }
  }
  for (const auto& w : words) {
    std::string cur(1, w[0]);
    for (size_t k = 1; k < w.size(); k++) {
      Json m;
      m.type = Json::Type::string;
      m.str = cur + " " + w[k];
      bool seen = false;
      for (const Json& x : merges->items) seen = seen || x.str == m.str;
      cur += w[k];
      if (seen) continue;
      merges->items.push_back(m);
      bool have = false;
      for (const auto& kv : vocab->members) have = have || kv.first == cur;
      if (!have) vocab->members.emplace_back(cur, jnum(id++));
    }
  }
  if (!spm) {
    Json m;
    m.type = Json::Type::string;
    for (int k = id; k < 300; k++) vocab->members.emplace_back("[PAD" + std::to_string(k) + "]", jnum(k));
  }
  ModelDesc d;
  d.path = spm ? "synthetic-spm" : "synthetic-bpe";
  d.format = FileFormat::safetensors;
  d.tokenizer_json = std::move(*tj);
  auto t = Tokenizer::build(d);
  if (!t) {
    std::fprintf(stderr, "%s\n", t.error().message.c_str());
    fail("synthetic tokenizer does not build");
  }
  return *t;
}

struct Entry {
  std::shared_ptr<const Tokenizer> tok;
  bool lossless;  // decode(encode(x)) == x for any bytes
};

std::vector<Entry>& tokenizers() {
  static std::vector<Entry> all = [] {
    std::vector<Entry> v;
    v.push_back({synthetic(false), false});  // NFC normalizes
    v.push_back({synthetic(true), false});   // dummy prefix
    const char* env = std::getenv("LLMINFER_SHARED");
    std::string shared = env && *env ? env : "../shared";
    for (auto [name, lossless] : {std::pair<const char*, bool>{"synth-llama-tiny-q8_0.gguf", true},
                                  {"synth-qwen3-tiny-q8_0.gguf", false},
                                  {"synth-gemma3-tiny-q8_0.gguf", false},
                                  {"synth-smollm2-tiny-q8_0.gguf", true},
                                  {"stories260K.gguf", false}}) {
      auto d = load_description(shared + "/models/" + name);
      if (!d) continue;
      auto t = Tokenizer::build(**d);
      if (t) v.push_back({*t, lossless});
    }
    // byte-level BPEs with the o200k and tekken scanners (committed test files; run from the repository root)
    for (const char* dir : {"tests/tokenizer/tiny-o200k", "tests/tokenizer/tiny-tekken"}) {
      auto d = tokenizer_description(dir);
      if (!d) continue;
      auto t = Tokenizer::build(**d);
      if (t) v.push_back({*t, true});
    }
    return v;
  }();
  return all;
}

void check_ids(const Tokenizer& t, const std::vector<int32_t>& ids) {
  for (int32_t id : ids)
    if (id < 0 || id >= t.n_vocab()) fail("id outside the vocabulary");
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  auto& toks = tokenizers();
  uint8_t sel = data[0];
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (sel == 0xFF) {  // the input is a tokenizer.json: building must fail cleanly or give a usable tokenizer
    auto j = json_parse(text, "fuzz");
    if (!j) return 0;
    ModelDesc d;
    d.path = "fuzz";
    d.format = FileFormat::safetensors;
    d.tokenizer_json = std::move(*j);
    auto t = Tokenizer::build(d);
    if (!t) return 0;
    auto ids = (*t)->encode("Hello world <|x|> 123 \xE2\x96\x81 \xFF", true, true);
    if (ids) {
      check_ids(**t, *ids);
      (*t)->decode(*ids);
    }
    return 0;
  }
  const Entry& e = toks[sel % toks.size()];
  const Tokenizer& t = *e.tok;
  bool parse_special = sel & 0x10, add = sel & 0x20;
  auto ids = t.encode(text, add, parse_special);
  if (!ids) fail("encode failed on a small input");
  check_ids(t, *ids);
  if (e.lossless && t.decode(*t.encode(text, false, false)) != text) fail("byte-level round trip");
  // encode_prompt: no ranges = encode with special parsing; ranges from the input must not crash
  auto p0 = t.encode_prompt(text, {}, add);
  if (!p0 || *p0 != *t.encode(text, add, true)) fail("encode_prompt without ranges != encode");
  if (text.size() >= 4) {
    size_t a = data[1] % text.size(), b = data[2] % text.size();
    std::vector<std::pair<size_t, size_t>> ranges{{std::min(a, b), std::max(a, b)}, {text.size() / 2, text.size()}};
    auto p = t.encode_prompt(text, ranges, add);
    if (!p) fail("encode_prompt failed on valid ranges");
    check_ids(t, *p);
  }
  // decode arbitrary ids (also out of range) and stream them
  std::vector<int32_t> any;
  for (size_t k = 0; k + 2 < text.size(); k += 3)
    any.push_back(
        int32_t((uint32_t(uint8_t(text[k])) << 16 | uint32_t(uint8_t(text[k + 1])) << 8 | uint8_t(text[k + 2])) %
                uint32_t(t.n_vocab() + 5)) -
        2);
  any.insert(any.end(), ids->begin(), ids->end());
  for (bool skip : {false, true}) {
    std::string whole = t.decode(any, skip);
    StreamDecoder sd(t, skip);
    std::string streamed;
    for (int32_t id : any) {
      std::string piece = sd.push(id);
      if (!utf8_valid(piece)) fail("stream emitted invalid UTF-8");
      streamed += piece;
    }
    streamed += sd.flush();
    if (!utf8_valid(streamed)) fail("stream flush emitted invalid UTF-8");
    if (streamed != utf8_lossy(whole)) fail("streamed text != lossy decode");
  }
  return 0;
}
