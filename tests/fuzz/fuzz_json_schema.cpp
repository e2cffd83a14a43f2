// libFuzzer target: the JSON Schema to GBNF converter (tests/fuzz/corpus/json_schema holds the test
// schemas and a few refused ones as seeds). Every refusal must be an invalid_argument naming
// "json_schema"; every grammar it makes must be valid GBNF: compiling it may only fail on a limit or
// a reference cycle that consumes nothing (left recursion), never on syntax or an undefined rule.
#define LLMINFER_IMPLEMENTATION
#include "../../llminfer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llminfer;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = json_schema_to_grammar(text);
  if (!g) {
    if (g.error().code != Errc::invalid_argument) __builtin_trap();
    if (g.error().message.rfind("json_schema", 0) != 0) __builtin_trap();
    return 0;
  }
  auto c = check_grammar(*g);
  if (!c) {
    const std::string& m = c.error().message;
    bool allowed = m.find("left recursion") != std::string::npos || m.find("LLMINFER_GRAMMAR_") != std::string::npos ||
                   m.find("no string matches") != std::string::npos;
    if (!allowed) __builtin_trap();
  }
  return 0;
}
