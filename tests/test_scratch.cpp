// An evaluation context owns its scratch, sized when it is created (src/43_forward.hpp
// Context::init_scratch, the KV cache's shift scratch, the Batcher's step when a second context
// exists): evaluating tokens, shifting, erasing and sliding the cache allocate nothing afterwards
// (neither scratch_alloc nor operator new, both counted), and an allocation that fails while a
// context or a session's logits are made is reported as out_of_memory, never an abort, with the
// model and the other contexts still usable.
#define LLMINFER_IMPLEMENTATION
#include <atomic>
#include <thread>

#include "common.hpp"

// tests/main.cpp: every operator new of the process
extern "C" unsigned long long llminfer_test_new_count();

using llminfer::ContextPolicy;
using llminfer::Errc;
using llminfer::LoadOptions;
using llminfer::Model;
using llminfer::detail::Batcher;
using llminfer::detail::Context;
using llminfer::detail::EvalStatus;
using llminfer::detail::FloatBuf;
using llminfer::detail::KvMove;

namespace {

Model load_model(const std::string& name, LoadOptions o) {
  auto m = Model::load(test::model_path(name), o);
  REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
  return std::move(*m);
}

struct Counts {
  uint64_t scratch = 0;
  unsigned long long news = 0;
};
Counts counts() {
  return Counts{llminfer::detail::scratch_alloc_counters().calls.load(), llminfer_test_new_count()};
}

// The scratch allocation n calls from now fails (-1: none does).
void fail_in(int64_t n) {
  auto& c = llminfer::detail::scratch_alloc_counters();
  c.fail_at.store(n < 0 ? -1 : static_cast<int64_t>(c.calls.load()) + n);
}

// Prompt, decode, erase, shift, then more than the context holds (it slides): true when every
// call did what it should. No CHECK inside: doctest may allocate.
// (prompt: 40 tokens, more: 150)
bool exercise(Context& ctx, FloatBuf& lg, int nv, const std::vector<int32_t>& prompt,
              const std::vector<int32_t>& more) {
  bool ok = true;
  auto is_ok = [](const auto& st) { return st && *st == EvalStatus::ok; };
  ok = ok && is_ok(ctx.eval(prompt, lg));
  for (int k = 0; k < 4 && ok; k++) {
    int32_t id = llminfer::detail::argmax_f32(lg.data(), nv);
    ok = is_ok(ctx.eval(std::span<const int32_t>(&id, 1), lg));
  }
  ok = ok && ctx.erase(3, 4) && ctx.n_past() == 40;
  const KvMove mv{30, 20, 10};
  (void)ctx.shift(std::span<const KvMove>(&mv, 1), 30);  // a ring may refuse it: then nothing changed
  ok = ok && is_ok(ctx.eval(more, lg));                  // slides (the context holds 96)
  return ok && ctx.n_past() <= ctx.n_ctx();
}

const char* const kModels[] = {"synth-gemma3-tiny-q4_k_m.gguf", "synth-llama-tiny-q8_0.gguf",
                               "synth-qwen3-tiny-bf16.gguf", "synth-gemma3-tiny-f32.gguf"};

LoadOptions small_context() {
  LoadOptions o;
  o.threads = 2;
  o.context = 96;
  o.context_policy = ContextPolicy::slide;
  return o;
}

}  // namespace

TEST_CASE("scratch: evaluating, shifting and sliding allocate nothing once the context exists") {
  for (const char* model : kModels) {
    const std::string name = model;
    CAPTURE(name);
    Model m = load_model(name, small_context());
    auto e = llminfer::detail::model_impl(m).engine;
    const int nv = e->n_vocab();
    const std::vector<int32_t> prompt = test::some_ids(40, nv, 7), more = test::some_ids(150, nv, 8);
    auto ctx = Context::create(e, 0);
    REQUIRE(ctx);
    FloatBuf lg;
    REQUIRE(lg.reserve(size_t(nv)));
    const Counts before = counts();
    const bool ok = exercise(*ctx, lg, nv, prompt, more);
    const Counts after = counts();
    CHECK(ok);
    CHECK(after.scratch == before.scratch);
    CHECK(after.news == before.news);
  }
}

TEST_CASE("scratch: batched steps allocate nothing once the second context exists") {
  Model m = load_model("synth-llama-tiny-q8_0.gguf", small_context());
  auto e = llminfer::detail::model_impl(m).engine;
  const int nv = e->n_vocab();
  const std::vector<int32_t> prompt = test::some_ids(40, nv, 7), more = test::some_ids(150, nv, 8);
  auto a = Context::create(e, 0), b = Context::create(e, 0);
  REQUIRE(a);
  REQUIRE(b);
  FloatBuf la, lb;
  REQUIRE(la.reserve(size_t(nv)));
  REQUIRE(lb.reserve(size_t(nv)));
  // The steps are shared only when the two threads overlap; on a loaded machine (or under a
  // sanitizer) one may finish before the other starts: then again, a bounded number of times.
  bool shared = false;
  for (int attempt = 0; attempt < 20 && !shared; attempt++) {
    a->clear();
    b->clear();
    std::atomic<int> ready{0}, done{0};
    std::atomic<bool> go{false};
    bool ok_a = false, ok_b = false;
    auto run = [&](Context& c, FloatBuf& lg, bool& ok) {
      ready++;
      while (!go.load()) std::this_thread::yield();
      ok = exercise(c, lg, nv, prompt, more);
      done++;
    };
    std::thread ta(run, std::ref(*a), std::ref(la), std::ref(ok_a));
    std::thread tb(run, std::ref(*b), std::ref(lb), std::ref(ok_b));
    while (ready.load() < 2) std::this_thread::yield();
    const auto shared_before = Batcher::of(*e).stats().shared_steps;
    const Counts before = counts();
    go = true;
    while (done.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const Counts after = counts();  // before joining (a join frees the thread's state)
    ta.join();
    tb.join();
    CHECK(ok_a);
    CHECK(ok_b);
    CHECK(after.scratch == before.scratch);
    CHECK(after.news == before.news);
    shared = Batcher::of(*e).stats().shared_steps > shared_before;
  }
  CHECK(shared);  // the batched path ran (and allocated nothing)
}

TEST_CASE("scratch: an allocation that fails while a context is created is out_of_memory, never an abort") {
  LoadOptions o = small_context();
  o.context_policy = ContextPolicy::stop;
  Model m = load_model("synth-gemma3-tiny-q4_k_m.gguf", o);
  auto e = llminfer::detail::model_impl(m).engine;
  const std::vector<int32_t> prompt = test::some_ids(30, e->n_vocab(), 3);
  std::vector<float> ref;
  auto first = Context::create(e, 0);
  REQUIRE(first);
  REQUIRE(first->eval(prompt, ref));
  // The second context: its own scratch, then the batcher's step. Every allocation in turn fails.
  int refused = 0;
  std::optional<Context> second;
  for (int n = 0; n < 10000 && !second; n++) {
    fail_in(n);
    auto c = Context::create(e, 0);
    fail_in(-1);
    if (c) {
      second.emplace(std::move(*c));
    } else {
      CHECK(c.error().code == Errc::out_of_memory);
      refused++;
    }
  }
  REQUIRE(second);
  CHECK(refused >= 10);  // KV cache, registers, matmul scratch, rope tables, the batcher's step, ...
  // Both contexts still evaluate, with the same bits as before.
  std::vector<float> again, other;
  first->clear();
  REQUIRE(first->eval(prompt, again));
  REQUIRE(second->eval(prompt, other));
  CHECK(again == ref);
  CHECK(other == ref);
}

TEST_CASE("scratch: a session refuses with out_of_memory and stays usable") {
  Model m = load_model("synth-llama-tiny-q8_0.gguf", small_context());
  const int nv = llminfer::detail::model_impl(m).engine->n_vocab();
  const std::vector<int32_t> prompt = test::some_ids(20, nv, 5), more = test::some_ids(8, nv, 6);
  auto s = m.session();
  fail_in(0);  // its context's first allocation (the KV cache)
  auto r = s.eval(prompt);
  fail_in(-1);
  REQUIRE(!r);
  CHECK(r.error().code == Errc::out_of_memory);
  CHECK(s.cached_tokens() == 0);
  REQUIRE(s.eval(prompt));
  const std::vector<float> last(s.logits().begin(), s.logits().end());
  CHECK(last.size() == size_t(nv));
  // every position's logits need more than one token's: that allocation fails, nothing changes
  fail_in(0);
  auto r2 = s.eval(more, true);
  fail_in(-1);
  REQUIRE(!r2);
  CHECK(r2.error().code == Errc::out_of_memory);
  CHECK(s.cached_tokens() == int(prompt.size()));
  CHECK(std::vector<float>(s.logits().begin(), s.logits().end()) == last);
  REQUIRE(s.eval(more, true));
  CHECK(s.logits().size() == more.size() * size_t(nv));
  CHECK(s.cached_tokens() == int(prompt.size() + more.size()));
}
