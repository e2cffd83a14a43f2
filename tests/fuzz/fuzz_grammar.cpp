// libFuzzer target: the GBNF parser, compiler and matcher (tests/fuzz/corpus/grammar holds
// llama.cpp's example grammars, ours and a few broken ones as seeds).
// Input: a grammar, optionally followed by a NUL byte and a text to match. Every refusal must be an
// invalid_argument naming "grammar"; an accepted grammar must compile again the same way, and the
// matcher must be consistent: every prefix of a text it does not reject is not rejected either,
// matching is a pure function of the bytes (a second matcher agrees), and a complete match leaves a
// state that accepts.
#define LLMINFER_IMPLEMENTATION
#include "../../llminfer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llminfer;
  using namespace llminfer::detail;
  std::string_view all(reinterpret_cast<const char*>(data), size);
  size_t nul = all.find('\0');
  std::string_view gbnf = all.substr(0, nul);
  std::string_view text = nul == std::string_view::npos ? std::string_view() : all.substr(nul + 1);
  auto core = compile_grammar(gbnf);
  if (!core) {
    if (core.error().code != Errc::invalid_argument) __builtin_trap();
    if (core.error().message.rfind("grammar", 0) != 0) __builtin_trap();
    return 0;
  }
  if (!check_grammar(gbnf)) __builtin_trap();
  GrammarMatcher a(*core), b(*core);
  auto sa = a.start();
  auto sb = b.start();
  if (!sa || !sb) return 0;  // too ambiguous: an error, that is fine
  int32_t state = *sa;
  bool dead = false;
  for (size_t i = 0; i < text.size() && !dead; i++) {
    auto n = a.next(state, static_cast<uint8_t>(text[i]));
    if (!n) return 0;
    dead = *n == GrammarMatcher::kDead;
    if (!dead) state = *n;
    // the second matcher, fed the same prefix from the start, agrees
    if (i % 7 == 0 || dead) {
      auto v = grammar_match(b, text.substr(0, i + 1));
      if (!v) return 0;
      if ((*v == GrammarVerdict::reject) != dead) __builtin_trap();
      if (!dead && (*v == GrammarVerdict::complete) != a.accepting(state)) __builtin_trap();
    }
    if (a.cache_bytes() > (64u << 20)) {
      auto c = a.compact(state);
      if (!c) __builtin_trap();
      state = *c;
    }
  }
  if (!dead && !a.accepting(state) && !a.can_continue(state)) __builtin_trap();  // a live state goes on
  return 0;
}
