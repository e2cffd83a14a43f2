// libFuzzer target: the chat-template interpreter on arbitrary template text. A template is
// untrusted input (it comes from the model file): parsing and rendering must end with a value or
// an error, never a crash, a hang or unbounded memory, and the reported content spans must be
// well formed.
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined tests/fuzz/fuzz_jinja.cpp -o fuzz_jinja
//   ./fuzz_jinja tests/fuzz/corpus/jinja
#define LLMINFER_IMPLEMENTATION
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <string_view>

#include "../../llminfer.hpp"

namespace {
using namespace llminfer::detail;

const Json& messages() {
  static const Json m =
      json_parse(
          R"([{"role":"system","content":"Be brief. <|im_end|>"},{"role":"user","content":[{"type":"text","text":"Hi ✓"}]},)"
          R"({"role":"assistant","content":"<think>x</think>ok","reasoning_content":"r","tool_calls":[{"type":"function",)"
          R"("function":{"name":"f","arguments":{"a":1,"b":[true,null,1.5]}}}]},{"role":"tool","content":"42"},)"
          R"({"role":"user","content":"  Σ é 日本 {{ x }}  "}])",
          "fuzz")
          .value();
  return m;
}
const Json& tools() {
  static const Json t =
      json_parse(
          R"([{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}])",
          "fuzz")
          .value();
  return t;
}

void check(bool ok) {
  if (!ok) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view src(reinterpret_cast<const char*>(data), size);
  auto tpl = ChatTemplate::parse(src);
  if (!tpl) {
    check(!tpl.error().message.empty());
    return 0;
  }
  ChatInput in;
  in.messages = messages();
  if (size % 2) in.tools = tools();
  in.add_generation_prompt = size % 3 == 0;
  in.special_tokens = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  in.clock = [] {
    std::tm t{};
    t.tm_year = 124;
    t.tm_mday = 1;
    return t;
  };
  in.max_steps = 200000;  // a smaller budget than the default keeps every run short
  auto r = tpl->render(in);
  if (!r) {
    check(!r.error().message.empty());
    return 0;
  }
  size_t prev = 0;
  for (const auto& sp : r->content_spans) {
    check(sp.first < sp.second && sp.second <= r->text.size());
    check(sp.first >= prev);
    prev = sp.second + 1;  // spans never touch (adjacent ones are merged)
  }
  return 0;
}
