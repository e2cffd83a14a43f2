// Continuous batching (src/45_batch.hpp): contexts of one model that evaluate at the same time from
// different threads share steps, and each gets what it would get alone: the same logits (bit for
// bit: single tokens through matmul_each, prompt chunks through the ordinary matmul on their own
// rows) and so the same tokens for a seed. Sequences join and leave at any step; a long prompt
// delays the others by one chunk at most; batch = 1 turns batching off.
#define LLMINFER_IMPLEMENTATION
#include <atomic>
#include <cmath>
#include <thread>

#include "common.hpp"

using llminfer::GenerateOptions;
using llminfer::LoadOptions;
using llminfer::Model;
using llminfer::StopReason;
using llminfer::detail::Batcher;
using llminfer::detail::Context;
using llminfer::detail::Engine;
using llminfer::detail::EvalStatus;

namespace {

Model load_model(const std::string& path, LoadOptions o = {}) {
  auto m = Model::load(path, o);
  REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
  return std::move(*m);
}

// One sequence: evaluate the prompt, then `steps` greedy tokens one at a time; every logits vector.
struct Trace {
  std::vector<std::vector<float>> logits;
  std::vector<int32_t> tokens;
  bool ok = true;
};

Trace run_sequence(const std::shared_ptr<const Engine>& e, const std::vector<int32_t>& prompt, int steps) {
  Trace tr;
  auto ctx = Context::create(e, 1024);
  if (!ctx) {
    tr.ok = false;
    return tr;
  }
  std::vector<float> lg;
  auto st = ctx->eval(prompt, lg);
  if (!st || *st != EvalStatus::ok) tr.ok = false;
  tr.logits.push_back(lg);
  const int nv = e->n_vocab();
  for (int k = 0; k < steps && tr.ok; k++) {
    int32_t id = llminfer::detail::argmax_f32(lg.data(), nv);
    tr.tokens.push_back(id);
    auto s = ctx->eval(std::span<const int32_t>(&id, 1), lg);
    if (!s || *s != EvalStatus::ok) tr.ok = false;
    tr.logits.push_back(lg);
  }
  return tr;
}

double worst_diff(const Trace& a, const Trace& b) {
  if (a.logits.size() != b.logits.size()) return 1e30;
  double w = 0;
  for (size_t i = 0; i < a.logits.size(); i++) {
    if (a.logits[i].size() != b.logits[i].size()) return 1e30;
    for (size_t k = 0; k < a.logits[i].size(); k++)
      w = std::max(w, std::fabs(double(a.logits[i][k]) - double(b.logits[i][k])));
  }
  return w;
}

// Four sequences of one model decoding at once share steps, and each gets the tokens and the bits
// of its logits alone. (Two test cases of four models each: under ThreadSanitizer one of them takes
// a minute, and two processes of the suite run them side by side.)
void check_shared_steps(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    CAPTURE(name);
    Model m = load_model(test::model_path(name), {.threads = 2});
    auto e = llminfer::detail::model_impl(m).engine;
    const int nv = e->n_vocab();
    // prompts of 5, 40, 300 (two chunks: 256 + 44) and 3 tokens; they decode different lengths,
    // so sequences join and leave the batch at different steps
    const std::vector<std::vector<int32_t>> prompts = {test::some_ids(5, nv, 1), test::some_ids(40, nv, 2),
                                                       test::some_ids(300, nv, 3), test::some_ids(3, nv, 4)};
    const int steps[] = {30, 12, 20, 40};
    std::vector<Trace> alone, together(4);
    for (int i = 0; i < 4; i++) alone.push_back(run_sequence(e, prompts[size_t(i)], steps[i]));
    auto before = Batcher::of(*e).stats();
    std::vector<std::thread> th;
    for (int i = 0; i < 4; i++)
      th.emplace_back([&, i] { together[size_t(i)] = run_sequence(e, prompts[size_t(i)], steps[i]); });
    for (auto& t : th) t.join();
    auto after = Batcher::of(*e).stats();
    CHECK(after.shared_steps > before.shared_steps);  // they did share steps
    for (int i = 0; i < 4; i++) {
      CAPTURE(i);
      CHECK(alone[size_t(i)].ok);
      CHECK(together[size_t(i)].ok);
      CHECK(together[size_t(i)].tokens == alone[size_t(i)].tokens);
      // the same bits: every row of a shared step is computed as it would be alone
      CHECK(worst_diff(together[size_t(i)], alone[size_t(i)]) == 0.0);
    }
  }
}

}  // namespace

TEST_CASE("batch: concurrency: sessions decoding at once share steps and get the logits of each alone") {
  // quantized (matmul_each on Q4_K/Q6_K/Q8_0), float weights (whose single-token dot order differs
  // from a several-token one), bf16 (rounded inputs), sliding-window layers (gemma3)
  check_shared_steps({"synth-qwen3-tiny-q4_k_m.gguf", "synth-llama-tiny-f32.gguf", "synth-smollm2-tiny-bf16.gguf",
                      "synth-gemma3-tiny-q8_0.gguf"});
}

TEST_CASE("batch: concurrency: shared steps through slices, layer norms and partial rotary give each its logits") {
  // slice (phi3's fused QKV and gate|up), layer_norm with biases (starcoder2), layer_norm_heads
  // and partial rotary (stablelm), windows that differ by layer (gemma2)
  check_shared_steps({"synth-phi3-tiny-f32.gguf", "synth-starcoder2-tiny-f32.gguf", "synth-stablelm-tiny-f32.gguf",
                      "synth-gemma2-tiny-f32.gguf"});
}

TEST_CASE("batch: concurrency: sampled generations from 8 threads equal the same one after another") {
  Model m = load_model(test::model_path("synth-qwen3-tiny-q4_k_m.gguf"), {.threads = 2});
  const int nv = llminfer::detail::model_impl(m).engine->n_vocab();
  auto options = [](int i) {
    return GenerateOptions{
        .max_tokens = 24 + 3 * i, .temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .seed = uint64_t(7 + i)};
  };
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; i++) prompts.push_back(test::some_ids(4 + 9 * i, nv, 100 + uint32_t(i)));
  std::vector<std::vector<int32_t>> serial(8), parallel(8);
  for (int i = 0; i < 8; i++) {
    auto r = m.generate(std::span<const int32_t>(prompts[size_t(i)]), options(i));
    REQUIRE(r);
    serial[size_t(i)] = r->tokens;
  }
  auto before = Batcher::of(*llminfer::detail::model_impl(m).engine).stats();
  std::atomic<int> failures{0};
  std::vector<std::thread> th;
  for (int i = 0; i < 8; i++)
    th.emplace_back([&, i] {
      auto r = m.generate(std::span<const int32_t>(prompts[size_t(i)]), options(i));
      if (!r)
        failures++;
      else
        parallel[size_t(i)] = r->tokens;
    });
  for (auto& t : th) t.join();
  CHECK(failures.load() == 0);
  CHECK(Batcher::of(*llminfer::detail::model_impl(m).engine).stats().shared_steps > before.shared_steps);
  for (int i = 0; i < 8; i++) {
    CAPTURE(i);
    CHECK(serial[size_t(i)].size() > 0);
    CHECK(parallel[size_t(i)] == serial[size_t(i)]);
  }
  CHECK(serial[0] != serial[1]);
}

TEST_CASE("batch: concurrency: a long prompt delays the other sequences by one chunk at most") {
  Model m = load_model(test::model_path("synth-qwen3-tiny-q4_k_m.gguf"), {.threads = 2});
  auto e = llminfer::detail::model_impl(m).engine;
  const int nv = e->n_vocab();
  std::mutex mu;
  std::vector<std::vector<std::pair<const Context*, int>>> log;
  Batcher::of(*e).set_on_step([&](const std::vector<std::pair<const Context*, int>>& s) {
    std::lock_guard<std::mutex> lk(mu);
    log.push_back(s);
  });
  auto a = Context::create(e, 2048);
  auto b = Context::create(e, 2048);
  REQUIRE(a);
  REQUIRE(b);
  std::atomic<bool> a_started{false}, b_done{false}, a_failed{false};
  // For each of a's tokens, the steps logged from just before it was submitted to its return: what
  // happened while a was waiting (a thread descheduled between its tokens, on a loaded machine,
  // is not the batcher's delay and is not counted).
  std::vector<std::pair<size_t, size_t>> a_windows;
  auto log_size = [&] {
    std::lock_guard<std::mutex> lk(mu);
    return log.size();
  };
  std::thread ta([&] {  // (no doctest assertions on other threads: a failed REQUIRE there would terminate)
    std::vector<float> lg;
    int32_t id = 1;
    for (int k = 0; k < 400 && !b_done; k++) {
      const size_t n0 = log_size();
      auto st = a->eval(std::span<const int32_t>(&id, 1), lg);
      a_windows.emplace_back(n0, log_size());
      if (!st || *st != EvalStatus::ok) {
        a_failed = true;
        a_started = true;
        break;
      }
      a_started = true;
      id = llminfer::detail::argmax_f32(lg.data(), nv);
    }
  });
  while (!a_started) std::this_thread::yield();
  std::vector<float> lg;
  auto prompt = test::some_ids(1200, nv, 9);  // five chunks of at most 256 tokens
  auto st = b->eval(prompt, lg);
  b_done = true;
  ta.join();
  REQUIRE(st);
  CHECK(*st == EvalStatus::ok);
  CHECK_FALSE(a_failed.load());
  Batcher::of(*e).set_on_step({});
  // the chunks of b's prompt (each <= 256 tokens)
  int chunks = 0, chunk_tokens = 0;
  auto has = [&](size_t i, const Context* c) {
    for (const auto& [ctx, n] : log[i])
      if (ctx == c) return true;
    return false;
  };
  for (const auto& step : log)
    for (const auto& [ctx, n] : step)
      if (ctx == &*b) {
        chunks++;
        chunk_tokens += n;
        CHECK(n <= 256);
      }
  CHECK(chunks >= 5);
  CHECK(chunk_tokens == 1200);
  // each token of a's: at most one step of b's alone (the one already running when a submitted)
  // before the step that holds a's token
  int most_waited = 0, a_tokens_during_b = 0;
  for (const auto& [n0, n1] : a_windows) {
    int b_alone = 0;
    bool found = false, saw_b = false;
    for (size_t i = n0; i < n1; i++) {
      saw_b = saw_b || has(i, &*b);
      if (has(i, &*a))
        found = true;
      else if (!found && has(i, &*b))
        b_alone++;
    }
    CHECK(found);
    most_waited = std::max(most_waited, b_alone);
    if (saw_b) a_tokens_during_b++;
  }
  INFO("a's tokens that overlapped b's prompt: " << a_tokens_during_b);
  CHECK(a_tokens_during_b >= 1);  // the two really ran at the same time
  CHECK(most_waited <= 1);
}

TEST_CASE("batch: concurrency: one sequence cancelling does not disturb the others") {
  Model m = load_model(test::model_path("synth-qwen3-tiny-q4_k_m.gguf"), {.threads = 2});
  const int nv = llminfer::detail::model_impl(m).engine->n_vocab();
  auto prompt = [&](int i) { return test::some_ids(6 + i, nv, 50 + uint32_t(i)); };
  auto opts = [](int i) { return GenerateOptions{.max_tokens = 40, .temperature = 0.7f, .seed = uint64_t(i)}; };
  std::vector<std::vector<int32_t>> serial(3), parallel(3);
  for (int i = 0; i < 3; i++) {
    auto p = prompt(i);
    auto r = m.generate(std::span<const int32_t>(p), opts(i));
    REQUIRE(r);
    serial[size_t(i)] = r->tokens;
  }
  std::atomic<bool> cancel{false};
  std::atomic<int> failures{0};
  StopReason cancelled_stop = StopReason::max_tokens;
  size_t cancelled_tokens = 0;
  std::vector<std::thread> th;
  for (int i = 0; i < 3; i++)
    th.emplace_back([&, i] {
      auto p = prompt(i);
      GenerateOptions o = opts(i);
      int seen = 0;
      if (i == 1) {
        o.cancel = &cancel;
        o.on_token = [&](std::string_view) {
          if (++seen == 5) cancel = true;
          return true;
        };
      }
      auto r = m.generate(std::span<const int32_t>(p), o);
      if (!r) {
        failures++;
        return;
      }
      parallel[size_t(i)] = r->tokens;
      if (i == 1) {
        cancelled_stop = r->stop;
        cancelled_tokens = r->tokens.size();
      }
    });
  for (auto& t : th) t.join();
  CHECK(failures.load() == 0);
  CHECK(cancelled_stop == StopReason::cancelled);
  CHECK(cancelled_tokens >= 5);
  CHECK(cancelled_tokens < 40);
  CHECK(parallel[0] == serial[0]);
  CHECK(parallel[2] == serial[2]);
}

TEST_CASE("batch: concurrency: LoadOptions::batch = 1 runs every evaluation on its own") {
  Model m = load_model(test::model_path("synth-qwen3-tiny-q4_k_m.gguf"), {.threads = 2, .batch = 1});
  auto e = llminfer::detail::model_impl(m).engine;
  const int nv = e->n_vocab();
  std::vector<Trace> got(3);
  std::vector<std::thread> th;
  for (int i = 0; i < 3; i++)
    th.emplace_back([&, i] { got[size_t(i)] = run_sequence(e, test::some_ids(8, nv, uint32_t(i)), 10); });
  for (auto& t : th) t.join();
  for (const auto& g : got) CHECK(g.ok);
  CHECK(Batcher::of(*e).stats().shared_steps == 0);
}
