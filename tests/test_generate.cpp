// Generation through the public API on real forward passes: a synthetic "script" model whose
// greedy continuation is known by construction (every stop reason, stop strings across tokens,
// streaming, cancel during prefill), stories260K (reproduces llama2.c; seeds; threads) and the
// concurrency test (4 sessions on one Model from 4 threads == the same sessions one by one).
#define LLMINFER_IMPLEMENTATION
#include "common.hpp"

#include <atomic>
#include <charconv>
#include <fstream>
#include <sstream>
#include <thread>

using llminfer::GenerateOptions;
using llminfer::GenerateResult;
using llminfer::LoadOptions;
using llminfer::Model;
using llminfer::StopReason;

namespace {

// ---- the script model ----
// A one-layer llama whose attention and MLP weights are zero, so the residual stream is the
// embedding of the current token; embeddings are one-hot, and output.weight maps each token to
// its successor in kScript. Greedy decoding therefore follows the script whatever the context,
// through the real Engine/Context code (embedding, norms, matmuls, KV cache, logits).
// SentencePiece-style vocabulary, including byte tokens that split a UTF-8 character.
constexpr int kVocab = 16;
const char* const kPieces[kVocab] = {"<unk>",  "<s>",    "</s>",   "\xE2\x96\x81Hel", "lo",     ",",
                                     "\xE2\x96\x81wor", "ld", "!", "<0xE2>", "<0x82>", "<0xAC>",
                                     "\xE2\x96\x81more", "\xE2\x96\x81User", ":", "\xE2\x96\x81x"};
const int kTypes[kVocab] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 6, 6, 6, 1, 1, 1, 1};
// successor of each token: <s> Hel lo , wor ld ! User : E2 82 AC more </s>;  x -> x
const int kNext[kVocab] = {2, 3, 2, 4, 5, 6, 7, 8, 13, 10, 11, 12, 2, 14, 9, 15};
const std::string kScriptText = " Hello, world! User:\xE2\x82\xAC more";  // after <s>, then </s>

std::string script_model_path() {
  static std::string path;
  if (!path.empty()) return path;
  static test::TempDir dir;
  const int n = kVocab;  // n_embd == n_vocab: one-hot embeddings
  test::GgufWriter w;
  w.kv_str("general.architecture", "llama")
      .kv_str("general.name", "script")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.context_length", 64)
      .kv_u32("llama.embedding_length", n)
      .kv_u32("llama.feed_forward_length", n)
      .kv_u32("llama.attention.head_count", 1)
      .kv_u32("llama.attention.head_count_kv", 1)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f)
      .kv_str("tokenizer.ggml.model", "llama")
      .kv_strs("tokenizer.ggml.tokens", std::vector<std::string>(kPieces, kPieces + n))
      .kv_u32("tokenizer.ggml.bos_token_id", 1)
      .kv_u32("tokenizer.ggml.eos_token_id", 2)
      .kv_u32("tokenizer.ggml.unknown_token_id", 0)
      .kv_bool("tokenizer.ggml.add_bos_token", true)
      .kv_bool("tokenizer.ggml.add_eos_token", false);
  std::vector<float> scores(n), types(n);
  for (int i = 0; i < n; i++) scores[size_t(i)] = -float(i);
  w.kv_f32s("tokenizer.ggml.scores", scores);
  w.kv_i32s("tokenizer.ggml.token_type", std::vector<int32_t>(kTypes, kTypes + n));
  auto mat = [&](uint64_t rows, uint64_t cols) { return std::vector<float>(size_t(rows * cols), 0.0f); };
  std::vector<float> ones(size_t(n), 1.0f);
  std::vector<float> emb = mat(n, n), out = mat(n, n);
  for (int t = 0; t < n; t++) {
    emb[size_t(t * n + t)] = 1.0f;             // row t = e_t
    out[size_t(kNext[t] * n + t)] = 5.0f;       // logit of next(t) = 5 * rms_norm(e_t)[t] = 20
  }
  w.tensor_f32("token_embd.weight", {uint64_t(n), uint64_t(n)}, emb)
      .tensor_f32("output_norm.weight", {uint64_t(n)}, ones)
      .tensor_f32("output.weight", {uint64_t(n), uint64_t(n)}, out)
      .tensor_f32("blk.0.attn_norm.weight", {uint64_t(n)}, ones)
      .tensor_f32("blk.0.attn_q.weight", {uint64_t(n), uint64_t(n)}, mat(n, n))
      .tensor_f32("blk.0.attn_k.weight", {uint64_t(n), uint64_t(n)}, mat(n, n))
      .tensor_f32("blk.0.attn_v.weight", {uint64_t(n), uint64_t(n)}, mat(n, n))
      .tensor_f32("blk.0.attn_output.weight", {uint64_t(n), uint64_t(n)}, mat(n, n))
      .tensor_f32("blk.0.ffn_norm.weight", {uint64_t(n)}, ones)
      .tensor_f32("blk.0.ffn_gate.weight", {uint64_t(n), uint64_t(n)}, mat(n, n))
      .tensor_f32("blk.0.ffn_up.weight", {uint64_t(n), uint64_t(n)}, mat(n, n))
      .tensor_f32("blk.0.ffn_down.weight", {uint64_t(n), uint64_t(n)}, mat(n, n));
  std::string p = dir.file("script.gguf");
  if (test::write_file(p, w.build())) path = p;
  return path;
}

Model load(const std::string& path, LoadOptions o = {}) {
  if (o.threads == 0) o.threads = 1;
  auto m = Model::load(path, o);
  REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
  return *m;
}

const std::vector<int32_t> kBos = {1};

// The 201 ids (prompt forced, then greedy) from the "# TOKENS" line of the llama2.c reference.
std::vector<int32_t> stories_reference() {
  std::ifstream f(test::model_path("stories260K.llama2c-reference.txt"));
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("# TOKENS ", 0) != 0) continue;
    std::istringstream is(line.substr(9));
    std::vector<int32_t> ids;
    int v;
    while (is >> v) ids.push_back(v);
    return ids;
  }
  return {};
}

}  // namespace

TEST_CASE("generate: the script model follows its script and stops at end of generation") {
  Model m = load(script_model_path());
  auto r = m.generate(std::span<const int32_t>(kBos), {.max_tokens = 100});
  REQUIRE(r);
  CHECK(r->stop == StopReason::eos);
  CHECK(r->tokens == std::vector<int32_t>{3, 4, 5, 6, 7, 8, 13, 14, 9, 10, 11, 12});  // no </s>
  CHECK(r->prompt_tokens == 1);
  CHECK(r->prompt_tokens_evaluated == 1);
  CHECK(r->prompt_tokens_reused == 0);
  CHECK(r->timings.load_ms > 0);
  CHECK(r->peak_rss_mb > 0);
  CHECK(r->kv_bytes > 0);
}

TEST_CASE("generate: max_tokens and a full context") {
  Model m = load(script_model_path());
  auto r = m.generate(std::span<const int32_t>(kBos), {.max_tokens = 4});
  REQUIRE(r);
  CHECK(r->stop == StopReason::max_tokens);
  CHECK(r->tokens.size() == 4);
  // context of 5: the prompt and four generated tokens are evaluated, a fifth is sampled
  Model small = load(script_model_path(), {.threads = 1, .context = 5});
  auto f = small.generate(std::span<const int32_t>(kBos), {.max_tokens = 100});
  REQUIRE(f);
  CHECK(f->stop == StopReason::context_full);
  CHECK(f->tokens == std::vector<int32_t>{3, 4, 5, 6, 7});
  // a prompt longer than the context
  std::vector<int32_t> long_prompt(9, 15);
  auto g = small.generate(std::span<const int32_t>(long_prompt), {.max_tokens = 100});
  REQUIRE(g);
  CHECK(g->stop == StopReason::context_full);
  CHECK(g->tokens.empty());
  // ContextPolicy::slide keeps going past the context size
  Model slide = load(script_model_path(), {.threads = 1, .context = 8, .context_policy = llminfer::ContextPolicy::slide, .keep = 1});
  std::vector<int32_t> x = {15};
  auto s = slide.generate(std::span<const int32_t>(x), {.max_tokens = 30});
  REQUIRE(s);
  CHECK(s->stop == StopReason::max_tokens);
  CHECK(s->tokens == std::vector<int32_t>(30, 15));
}

TEST_CASE("generate: cancel with the flag, also during the prompt's evaluation") {
  std::atomic<bool> flag{true};
  Model m = load(script_model_path());
  auto r = m.generate(std::span<const int32_t>(kBos), {.max_tokens = 100, .cancel = &flag});
  REQUIRE(r);
  CHECK(r->stop == StopReason::cancelled);
  CHECK(r->tokens.empty());
  CHECK(r->prompt_tokens_evaluated == 0);
  // The flag is raised once the prompt's evaluation has begun (the log line announcing it runs
  // on the generating thread just before): the forward pass must notice it at its next layer.
  flag = false;
  LoadOptions lo{.threads = 1};
  lo.log = [&](std::string_view line) {
    if (line.rfind("prefill", 0) == 0) flag = true;
  };
  Model logged = load(test::model_path("stories260K.gguf"), lo);
  std::vector<int32_t> prompt = stories_reference();
  prompt.resize(200);
  auto c = logged.generate(std::span<const int32_t>(prompt), {.max_tokens = 10, .cancel = &flag});
  REQUIRE(c);
  CHECK(c->stop == StopReason::cancelled);
  CHECK(c->tokens.empty());
}

TEST_CASE("generate: the forward pass polls the cancel function at least once per layer") {
  Model m = load(test::model_path("stories260K.gguf"));
  const int n_layer = static_cast<int>(m.impl().desc->hp.n_layer);
  REQUIRE(n_layer > 1);
  auto ctx = llminfer::detail::Context::create(m.impl().engine, 0);
  REQUIRE(ctx);
  std::vector<int32_t> prompt = stories_reference();
  prompt.resize(64);
  std::vector<float> logits;
  int polls = 0;
  auto st = ctx->eval(prompt, logits, false, [&] { return ++polls < 0; });
  REQUIRE(st);
  CHECK(*st == llminfer::detail::EvalStatus::ok);
  CHECK(polls >= n_layer);
  // cancelled in the middle of the layers: nothing of the prompt is kept
  ctx->clear();
  polls = 0;
  auto c = ctx->eval(prompt, logits, false, [&] { return ++polls > n_layer / 2; });
  REQUIRE(c);
  CHECK(*c == llminfer::detail::EvalStatus::cancelled);
  CHECK(polls == n_layer / 2 + 1);
  CHECK(ctx->n_past() == 0);
}

TEST_CASE("generate: stories260K greedy from the reference ids reproduces llama2.c") {
  std::vector<int32_t> ref = stories_reference();
  REQUIRE(ref.size() == 201);
  Model m = load(test::model_path("stories260K.gguf"));
  std::vector<int32_t> prompt(ref.begin(), ref.begin() + 5);
  auto r = m.generate(std::span<const int32_t>(prompt), {.max_tokens = 196});
  REQUIRE(r);
  CHECK(r->stop == StopReason::max_tokens);
  CHECK(r->tokens == std::vector<int32_t>(ref.begin() + 5, ref.end()));
}

TEST_CASE("generate: same seed same tokens (any thread count), different seeds differ") {
  std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  GenerateOptions o{.max_tokens = 24, .temperature = 1.0f, .top_k = 40, .top_p = 0.95f, .seed = 1234};
  Model m1 = load(test::model_path("stories260K.gguf"), {.threads = 1});
  Model m2 = load(test::model_path("stories260K.gguf"), {.threads = 2});
  auto a = m1.generate(std::span<const int32_t>(prompt), o);
  auto b = m1.generate(std::span<const int32_t>(prompt), o);
  auto c = m2.generate(std::span<const int32_t>(prompt), o);
  o.seed = 1235;
  auto d = m1.generate(std::span<const int32_t>(prompt), o);
  REQUIRE((a && b && c && d));
  CHECK(a->seed == 1234);
  CHECK(a->tokens.size() == 24);
  CHECK(a->tokens == b->tokens);
  CHECK(a->tokens == c->tokens);
  CHECK(a->tokens != d->tokens);
  // a random seed is drawn and reported; using it again repeats the text
  o.seed = llminfer::random_seed;
  auto e = m1.generate(std::span<const int32_t>(prompt), o);
  REQUIRE(e);
  o.seed = e->seed;
  auto f = m1.generate(std::span<const int32_t>(prompt), o);
  REQUIRE(f);
  CHECK(e->tokens == f->tokens);
}

TEST_CASE("generate: options are checked") {
  Model m = load(script_model_path());
  auto bad = m.generate(std::span<const int32_t>(kBos), {.temperature = -1.0f});
  CHECK(!bad);
  CHECK(bad.error().code == llminfer::Errc::invalid_argument);
  CHECK(!m.generate(std::span<const int32_t>(kBos), {.stop = {""}}));
  CHECK(!m.generate(std::span<const int32_t>()));
  std::vector<int32_t> out_of_vocab = {1, 99};
  auto oov = m.generate(std::span<const int32_t>(out_of_vocab));
  CHECK(!oov);
  CHECK(oov.error().message.find("99") != std::string::npos);
  Model empty;
  CHECK(!empty.generate(std::span<const int32_t>(kBos)));
}

TEST_CASE("generate: concurrency: 4 sessions on one Model from 4 threads == one after another") {
  // Sampled (not greedy) and different per session, so any mix-up of state shows.
  for (int threads : {1, 2}) {
    CAPTURE(threads);
    Model m = load(test::model_path("stories260K.gguf"), {.threads = threads});
    auto options = [](int i) {
      return GenerateOptions{.max_tokens = 32, .temperature = 0.9f, .top_p = 0.95f, .seed = uint64_t(100 + i)};
    };
    std::vector<std::vector<int32_t>> prompts = {{1, 403}, {1, 403, 407}, {1, 261}, {1, 338, 13}};
    std::vector<std::vector<int32_t>> serial(4), parallel(4);
    for (int i = 0; i < 4; i++) {
      auto r = m.generate(std::span<const int32_t>(prompts[size_t(i)]), options(i));
      REQUIRE(r);
      serial[size_t(i)] = r->tokens;
    }
    std::vector<std::thread> ts;
    std::atomic<int> failures{0};
    for (int i = 0; i < 4; i++)
      ts.emplace_back([&, i] {
        Model copy = m;  // copies share the weights
        auto r = copy.generate(std::span<const int32_t>(prompts[size_t(i)]), options(i));
        if (!r) failures++;
        else parallel[size_t(i)] = r->tokens;
      });
    for (auto& t : ts) t.join();
    CHECK(failures.load() == 0);
    for (int i = 0; i < 4; i++) {
      CAPTURE(i);
      CHECK(serial[size_t(i)].size() == 32);
      CHECK(parallel[size_t(i)] == serial[size_t(i)]);
    }
    CHECK(serial[0] != serial[1]);
  }
}

TEST_CASE("cli: run --json --ids on stories260K reproduces llama2.c") {
  std::vector<int32_t> ref = stories_reference();
  REQUIRE(ref.size() == 201);
  auto r = test::run_cli("run -m " + test::quote(test::model_path("stories260K.gguf")) +
                         " --ids 1,403,407,261,378 -n 196 --json -t 1");
  CHECK(r.status == 0);
  auto j = llminfer::detail::json_parse(r.out, "run --json");
  REQUIRE(j);
  const auto* tokens = j->find("tokens");
  REQUIRE(tokens);
  std::vector<int32_t> got;
  for (const auto& t : tokens->items) {
    int32_t v = -1;
    std::from_chars(t.str.data(), t.str.data() + t.str.size(), v);
    got.push_back(v);
  }
  CHECK(got == std::vector<int32_t>(ref.begin() + 5, ref.end()));
  CHECK(j->find("stop")->str == "max_tokens");
  CHECK(j->find("prompt_tokens")->str == "5");
  for (const char* k : {"load_ms", "prefill_ms", "prefill_tps", "decode_tps", "ttft_ms"})
    CHECK_MESSAGE(j->find("timings")->find(k), k);
  CHECK(j->find("peak_rss_mb"));
  CHECK(j->find("text"));
}

TEST_CASE("cli: run reports usage and input errors with the contract's exit codes") {
  std::string model = test::quote(test::model_path("stories260K.gguf"));
  CHECK(test::run_cli("run").status == 1);
  CHECK(test::run_cli("run -m " + model).status == 1);                          // no prompt
  CHECK(test::run_cli("run -m " + model + " -p a --ids 1").status == 1);        // two prompts
  CHECK(test::run_cli("run -m " + model + " --ids 1,x").status == 1);           // bad ids
  CHECK(test::run_cli("run -m " + model + " --ids 1 --temp -2").status == 1);   // bad option value
  CHECK(test::run_cli("run -m " + model + " --ids 1 --bogus").status == 1);     // unknown option
  CHECK(test::run_cli("run -m /nonexistent.gguf --ids 1").status == 2);         // model error
  CHECK(test::run_cli("run -m " + model + " --ids 1,99999").status == 2);       // id outside the vocab
  auto help = test::run_cli("run --help");
  CHECK(help.status == 0);
  CHECK(help.out.find("--temp") != std::string::npos);
}
