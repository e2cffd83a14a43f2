// libFuzzer target: saved sessions (Session::load) into a session of stories260K (a 64-token
// context), from memory. Every input is checked twice: as given (the sha256 must match) and with
// the checksum skipped, so that the content's own checks are fuzzed too. A refusal names the
// input; an accepted session saves again and that loads again, and it can evaluate a token.
// Runs from the repository root (tools/fuzz does), where the model is committed.
#define LLMINFER_IMPLEMENTATION
#include <cstdio>

#include "../../llminfer.hpp"

namespace {
llminfer::Session& fuzz_session() {
  static llminfer::Model model = [] {
    auto m = llminfer::Model::load("third_party/stories260K/stories260K.gguf", {.threads = 1, .context = 64});
    if (!m) {
      std::fprintf(stderr, "fuzz_session: %s (run from the repository root)\n", m.error().message.c_str());
      __builtin_trap();
    }
    return *m;
  }();
  static llminfer::Session s = model.session();
  return s;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llminfer::detail;
  llminfer::Session& s = fuzz_session();
  for (bool verify : {true, false}) {
    auto r = load_session_bytes(session_impl(s), std::span<const uint8_t>(data, size), "fuzz.sess", verify);
    if (!r) {
      if (r.error().message.rfind("fuzz.sess: ", 0) != 0) __builtin_trap();
      continue;
    }
    if (s.cached_tokens() > s.context_size()) __builtin_trap();
    auto again = s.save();
    if (!again) __builtin_trap();
    if (!s.load(*again)) __builtin_trap();
    if (s.cached_tokens() < s.context_size()) {
      int32_t one = 1;
      (void)s.eval(std::span<const int32_t>(&one, 1));
    }
  }
  return 0;
}
