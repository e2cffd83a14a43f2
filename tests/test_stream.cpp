// Stop strings, UTF-8 completion and the decode loop, on strings and on a scripted fake model
// (no weights needed): every stop reason, stop strings across token boundaries, cancel from the
// callback and from the flag (also during the prompt's evaluation), the context policies.
#define LLMINFER_IMPLEMENTATION
#include <atomic>
#include <map>

#include "common.hpp"

using llminfer::GenerateOptions;
using llminfer::GenerateResult;
using llminfer::StopReason;
using llminfer::detail::EvalStatus;
using llminfer::detail::TextStream;

namespace {

// Feeds pieces one by one; returns the concatenated output and records each emitted piece.
struct Fed {
  std::string out;
  std::vector<std::string> emitted;
  bool stopped = false;
};
Fed feed(const std::vector<std::string>& pieces, const std::vector<std::string>& stops, bool finish = true) {
  TextStream ts(stops);
  Fed f;
  for (const auto& p : pieces) {
    std::string e = ts.push(p);
    f.emitted.push_back(e);
    f.out += e;
  }
  if (finish) {
    std::string e = ts.finish();
    f.emitted.push_back(e);
    f.out += e;
  }
  f.stopped = ts.stopped();
  return f;
}

bool all_valid_utf8(const std::vector<std::string>& v) {
  for (const auto& s : v)
    if (!llminfer::detail::utf8_valid(s)) return false;
  return true;
}

}  // namespace

TEST_CASE("stream: a stop string split across pieces is cut, the text before it is kept") {
  auto f = feed({"Hel", "lo Wo", "rld!"}, {"o W"});
  CHECK(f.out == "Hell");
  CHECK(f.stopped);
  // nothing after the stop is emitted, and "Hell" came out as soon as it was safe
  CHECK(f.emitted[0] == "Hel");
  CHECK(f.emitted[1] == "l");
  CHECK(f.emitted[2].empty());
}

TEST_CASE("stream: only a possible stop-string beginning is held back") {
  TextStream ts({"STOP"});
  CHECK(ts.push("abc S") == "abc ");
  CHECK(ts.held() == "S");
  CHECK(ts.push("T") == "");
  CHECK(ts.held() == "ST");
  CHECK(ts.push("x") == "STx");  // not a stop after all: nothing lost
  CHECK(ts.push("ST") == "");
  CHECK(ts.finish() == "ST");  // the generation ended: the held text is flushed
  CHECK(!ts.stopped());
  CHECK(ts.emitted() == "abc STxST");
}

TEST_CASE("stream: the earliest stop string wins; repeated beginnings") {
  CHECK(feed({"xx", "yyzz"}, {"zz", "yy"}).out == "xx");
  CHECK(feed({"aaab"}, {"aab"}).out == "a");
  CHECK(feed({"a", "a", "a", "b"}, {"aab"}).out == "a");
  auto f = feed({"a", "a", "a", "c"}, {"aab"});
  CHECK(f.out == "aaac");
  CHECK(!f.stopped);
  // a stop string that is the whole first piece: nothing emitted
  CHECK(feed({"</s>more"}, {"</s>"}).out.empty());
  // no stop strings: everything passes at once
  auto g = feed({"a", "b"}, {}, false);
  CHECK(g.emitted[0] == "a");
  CHECK(g.emitted[1] == "b");
}

TEST_CASE("stream: UTF-8 split across tokens reaches the caller whole") {
  // "€" = E2 82 AC split in three tokens, "é" = C3 A9 in two
  auto f = feed({"a\xE2", "\x82",
                 "\xAC"
                 "b\xC3",
                 "\xA9"},
                {});
  CHECK(f.out ==
        "a\xE2\x82\xAC"
        "b\xC3\xA9");
  CHECK(all_valid_utf8(f.emitted));
  CHECK(f.emitted[0] == "a");
  CHECK(f.emitted[1] == "");
  CHECK(f.emitted[2] ==
        "\xE2\x82\xAC"
        "b");
  // invalid bytes become U+FFFD; a sequence broken by a non-continuation byte is one U+FFFD
  auto g = feed({"x\xFFy", "\xE2\x82", "z"}, {});
  CHECK(g.out == "x\xEF\xBF\xBDy\xEF\xBF\xBDz");
  CHECK(all_valid_utf8(g.emitted));
  // an incomplete sequence at the very end is flushed as U+FFFD
  auto h = feed({"ok\xF0\x9F"}, {});
  CHECK(h.out == "ok\xEF\xBF\xBD");
  // surrogates and overlong forms are not valid
  CHECK(feed({"\xED\xA0\x80"}, {}).out == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK(feed({"\xC0\xAF"}, {}).out == "\xEF\xBF\xBD\xEF\xBF\xBD");
  // a multi-byte stop string across tokens
  auto s = feed({"caf\xC3", "\xA9 au lait"}, {"\xC3\xA9 "});
  CHECK(s.out == "caf");
  CHECK(all_valid_utf8(s.emitted));
}

TEST_CASE("stream: random texts, splits and stop strings agree with a plain reference") {
  llminfer::detail::Rng rng(12345);
  auto rnd = [&](int n) { return static_cast<int>(rng.next() % static_cast<uint64_t>(n)); };
  const char* alphabet[] = {"a", "b", " ", "\xC3\xA9", "\xE2\x82\xAC"};
  int failures = 0;
  for (int iter = 0; iter < 3000; iter++) {
    std::string text;
    int len = 1 + rnd(30);
    for (int i = 0; i < len; i++) text += alphabet[rnd(5)];
    std::vector<std::string> stops;
    for (int s = rnd(3); s > 0; s--) {
      std::string st;
      for (int i = 1 + rnd(4); i > 0; i--) st += alphabet[rnd(5)];
      stops.push_back(st);
    }
    // random byte splits (may cut characters)
    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size();) {
      size_t n = 1 + static_cast<size_t>(rnd(5));
      pieces.push_back(text.substr(i, n));
      i += n;
    }
    // reference: after each piece, the earliest stop string in the text so far ends everything
    std::string expected = text, so_far;
    for (const auto& p : pieces) {
      so_far += p;
      size_t at = std::string::npos;
      for (const auto& s : stops) at = std::min(at, so_far.find(s));
      if (at != std::string::npos) {
        expected = so_far.substr(0, at);
        break;
      }
    }
    TextStream ts(stops);
    std::string out;
    bool ok = true;
    for (const auto& p : pieces) {
      std::string e = ts.push(p);
      if (!llminfer::detail::utf8_valid(e)) ok = false;
      out += e;
      // what is held back must be a proper beginning of some stop string
      std::string_view held = ts.held();
      if (!held.empty() && !ts.stopped()) {
        bool prefix = false;
        for (const auto& s : stops) prefix |= s.size() > held.size() && s.compare(0, held.size(), held) == 0;
        if (!prefix) ok = false;
      }
    }
    out += ts.finish();
    if (!ok || out != expected) failures++;
  }
  CHECK(failures == 0);
}

// ---- the decode loop on a scripted fake model ----
namespace {

// Vocabulary: id -> bytes. Token 0 is the end-of-generation token. The "model" always puts a
// large logit on script[n_past - prompt_len] (then on 0 after the script), so greedy decoding
// follows the script; eval polls the cancel function once per "layer".
struct FakeModel : llminfer::detail::GenerationIO {
  std::vector<std::string> vocab;
  std::vector<int32_t> script;
  int n_ctx = 1 << 20;
  int n_layer = 4;
  int prompt_len = 0;
  bool slide = false;
  int keep = 2;
  std::vector<int32_t> ctx;  // tokens in the "KV cache"
  std::vector<float> out;
  int evals = 0, polls = 0;
  int fail_at_eval = -1;             // return an error on that eval
  std::function<void(int)> on_poll;  // test hook: called with the poll count
  size_t pos = 0;                    // generated tokens fed back so far (follows the script)
  bool uniform = false;              // flat logits over the first 8 non-eog ids (sampling tests)

  llminfer::Result<EvalStatus> eval(std::span<const int32_t> toks, const std::function<bool()>& cancel) override {
    if (evals++ == fail_at_eval) return llminfer::detail::make_error(llminfer::Errc::internal, "fake failure");
    if (static_cast<int>(ctx.size() + toks.size()) > n_ctx) {
      // ContextPolicy::slide as the real Context does it, inside eval: drop half of what follows
      // the first `keep` tokens (a real model re-evaluates them), once
      size_t drop = slide && ctx.size() > static_cast<size_t>(keep) ? (ctx.size() - static_cast<size_t>(keep)) / 2 : 0;
      if (drop == 0) return EvalStatus::context_full;
      ctx.erase(ctx.begin() + keep, ctx.begin() + keep + static_cast<std::ptrdiff_t>(drop));
      if (static_cast<int>(ctx.size() + toks.size()) > n_ctx) return EvalStatus::context_full;
    }
    for (int l = 0; l < n_layer; l++) {
      polls++;
      if (on_poll) on_poll(polls);
      if (cancel()) return EvalStatus::cancelled;
    }
    ctx.insert(ctx.end(), toks.begin(), toks.end());
    if (prompt_len == 0)
      prompt_len = static_cast<int>(toks.size());
    else
      pos++;
    out.assign(vocab.size(), 0.0f);
    if (uniform) {
      for (size_t i = 1; i < std::min<size_t>(9, vocab.size()); i++) out[i] = 1.0f;
    } else {
      int32_t next = pos < script.size() ? script[pos] : 0;
      out[static_cast<size_t>(next)] = 10.0f;
    }
    return EvalStatus::ok;
  }
  std::span<const float> logits() const override { return out; }
  bool is_eog(int32_t id) const override { return id == 0; }
  std::string piece(int32_t id) override { return vocab[static_cast<size_t>(id)]; }
  std::string flush() override { return std::string(); }
};

struct Run {
  GenerateResult r;
  std::vector<std::string> streamed;
  std::string joined;
  bool ok = false;
  std::string error;
};

Run generate(FakeModel& m, GenerateOptions o, std::vector<int32_t> prompt = {1, 2, 3}, uint64_t seed = 0) {
  Run run;
  auto user_cb = o.on_token;
  o.on_token = [&run, user_cb](std::string_view p) {
    run.streamed.emplace_back(p);
    run.joined += p;
    return user_cb ? user_cb(p) : true;
  };
  llminfer::detail::Sampler sampler;
  llminfer::detail::Rng rng(seed);
  auto res = llminfer::detail::run_generation(m, prompt, prompt, o, sampler, rng, llminfer::detail::now_ms(), run.r);
  run.ok = res.ok();
  if (!res) run.error = res.error().message;
  return run;
}

FakeModel words() {
  FakeModel m;
  // 0 eog, 1..3 prompt, then pieces
  m.vocab = {"<eog>", "<p1>", "<p2>",  "<p3>", "Hello", ",",        " wor",
             "ld",    "!",    " User", ":",    " more", "\xE2\x82", "\xAC"};
  m.script = {4, 5, 6, 7, 8, 9, 10, 11, 0};  // "Hello, world! User: more" then eog
  return m;
}

}  // namespace

TEST_CASE("generate loop: end of generation") {
  auto m = words();
  auto run = generate(m, {.max_tokens = 100});
  REQUIRE(run.ok);
  CHECK(run.r.stop == StopReason::eos);
  CHECK(run.r.text == "Hello, world! User: more");
  CHECK(run.r.tokens == std::vector<int32_t>{4, 5, 6, 7, 8, 9, 10, 11});  // no eog token
  CHECK(run.joined == run.r.text);
  CHECK(run.r.prompt_tokens_evaluated == 3);
  CHECK(m.evals == 1 + 8);  // prompt + each generated token (the eog is never evaluated)
}

TEST_CASE("generate loop: max_tokens, and the last token is not evaluated") {
  auto m = words();
  auto run = generate(m, {.max_tokens = 3});
  CHECK(run.r.stop == StopReason::max_tokens);
  CHECK(run.r.text == "Hello, wor");
  CHECK(run.r.tokens.size() == 3);
  CHECK(m.evals == 1 + 2);
  auto m0 = words();
  auto zero = generate(m0, {.max_tokens = 0});
  CHECK(zero.r.stop == StopReason::max_tokens);
  CHECK(zero.r.tokens.empty());
  CHECK(m0.evals == 1);  // the prompt is still evaluated (a session keeps it)
  auto mu = words();
  CHECK(generate(mu, {.max_tokens = -1}).r.stop == StopReason::eos);
}

TEST_CASE("generate loop: stop strings spanning tokens, streamed and final text agree") {
  for (auto stop : {std::string("ld! U"), std::string("! User:"), std::string(", w")}) {
    CAPTURE(stop);
    auto m = words();
    auto run = generate(m, {.max_tokens = 100, .stop = {"never", stop}});
    CHECK(run.r.stop == StopReason::stop);
    std::string full = "Hello, world! User: more";
    CHECK(run.r.text == full.substr(0, full.find(stop)));
    CHECK(run.joined == run.r.text);
    // generation ended at the token that completed the stop string
    CHECK(m.evals < 9);
  }
  // a stop-string beginning that does not complete is emitted at the end
  auto m = words();
  auto run = generate(m, {.max_tokens = 100, .stop = {" more and"}});
  CHECK(run.r.stop == StopReason::eos);
  CHECK(run.r.text == "Hello, world! User: more");
  CHECK(run.joined == run.r.text);
  CHECK(run.streamed.back() == " more");  // held until the end, then flushed
}

TEST_CASE("generate loop: the callback receives complete UTF-8 only") {
  auto m = words();
  m.script = {4, 12, 13, 12, 13, 0};
  auto run = generate(m, {.max_tokens = 100});
  CHECK(run.r.text == "Hello\xE2\x82\xAC\xE2\x82\xAC");
  CHECK(all_valid_utf8(run.streamed));
  CHECK(run.joined == run.r.text);
  // cut in the middle of a character by max_tokens: the rest is replaced, never split
  auto m2 = words();
  m2.script = {4, 12, 13, 12, 13, 0};
  auto cut = generate(m2, {.max_tokens = 4});
  CHECK(cut.r.text == "Hello\xE2\x82\xAC\xEF\xBF\xBD");
  CHECK(all_valid_utf8(cut.streamed));
}

TEST_CASE("generate loop: cancel from the callback") {
  auto m = words();
  int calls = 0;
  auto run = generate(m, {.max_tokens = 100, .on_token = [&](std::string_view) { return ++calls < 3; }});
  CHECK(run.r.stop == StopReason::cancelled);
  CHECK(calls == 3);  // never called again after returning false
  CHECK(run.r.tokens.size() == 3);
  CHECK(run.r.text == "Hello, wor");
  CHECK(m.evals == 1 + 2);
}

TEST_CASE("generate loop: cancel from the flag, between tokens and during the prompt") {
  std::atomic<bool> flag{false};
  auto m = words();
  int calls = 0;
  // another thread would set it; here the callback does, and keeps returning true
  auto run = generate(m, {.max_tokens = 100,
                          .on_token =
                              [&](std::string_view) {
                                if (++calls == 2) flag = true;
                                return true;
                              },
                          .cancel = &flag});
  CHECK(run.r.stop == StopReason::cancelled);
  CHECK(run.r.tokens.size() == 2);
  CHECK(run.r.text == "Hello,");

  // set before the call: nothing is evaluated
  auto m2 = words();
  auto pre = generate(m2, {.max_tokens = 100, .cancel = &flag});
  CHECK(pre.r.stop == StopReason::cancelled);
  CHECK(m2.polls == 0);
  CHECK(pre.r.tokens.empty());

  // set while the prompt is being evaluated (after its second layer): honoured at the next poll
  flag = false;
  auto m3 = words();
  m3.on_poll = [&](int polls) {
    if (polls == 2) flag = true;
  };
  auto mid = generate(m3, {.max_tokens = 100, .cancel = &flag});
  CHECK(mid.r.stop == StopReason::cancelled);
  CHECK(m3.polls == 2);
  CHECK(mid.r.tokens.empty());
  CHECK(mid.r.prompt_tokens_evaluated == 0);
  CHECK(m3.ctx.empty());
}

TEST_CASE("generate loop: a full context stops, or slides with ContextPolicy::slide") {
  auto m = words();
  m.n_ctx = 3 + 3;  // the prompt and three generated tokens
  auto run = generate(m, {.max_tokens = 100});
  CHECK(run.r.stop == StopReason::context_full);
  // three tokens were evaluated, the fourth was sampled from the last logits but cannot be
  CHECK(run.r.tokens.size() == 4);
  CHECK(run.r.text == "Hello, world");
  CHECK(run.joined == run.r.text);

  auto m2 = words();
  m2.n_ctx = 2;  // the prompt itself does not fit
  auto none = generate(m2, {.max_tokens = 100});
  CHECK(none.ok);
  CHECK(none.r.stop == StopReason::context_full);
  CHECK(none.r.tokens.empty());

  auto m3 = words();
  m3.n_ctx = 3 + 3;
  m3.slide = true;
  auto slid = generate(m3, {.max_tokens = 100});
  CHECK(slid.r.stop == StopReason::eos);
  CHECK(slid.r.text == "Hello, world! User: more");
}

TEST_CASE("generate loop: an error after some text keeps the text") {
  auto m = words();
  m.fail_at_eval = 3;
  auto run = generate(m, {.max_tokens = 100});
  CHECK(run.ok);
  CHECK(run.r.stop == StopReason::error);
  CHECK(run.r.error.message == "fake failure");
  CHECK(run.r.text == "Hello, wor");  // the third token failed to evaluate; it was already sampled
  CHECK(run.r.tokens.size() == 3);
  auto m2 = words();
  m2.fail_at_eval = 0;  // the prompt fails: an error value
  auto bad = generate(m2, {.max_tokens = 100});
  CHECK(!bad.ok);
  CHECK(bad.error == "fake failure");
}

TEST_CASE("generate loop: same seed same tokens, different seeds differ") {
  auto sample = [](uint64_t seed) {
    auto m = words();
    m.uniform = true;
    return generate(m, {.max_tokens = 40, .temperature = 1.0f}, {1, 2, 3}, seed).r.tokens;
  };
  auto a = sample(7), b = sample(7), c = sample(8);
  CHECK(a.size() == 40);
  CHECK(a == b);
  CHECK(a != c);
}
