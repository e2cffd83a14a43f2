// stories260K (a real trained TinyStories Llama, converted from llama2.c): the greedy continuation
// of its reference prompt must be token-for-token the one Karpathy's llama2.c run.c printed, and the
// logits of its first 16 positions must match the llama2.c float32 dump beside it.
#define LLMINFER_IMPLEMENTATION
#include <fstream>
#include <sstream>

#include "common.hpp"

using namespace llminfer;
using namespace llminfer::detail;

namespace {

// The 201 ids (prompt forced, then greedy) from the "# TOKENS" line of the reference file.
std::vector<int32_t> reference_tokens() {
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

std::shared_ptr<const Engine> load_engine(const std::string& name, int threads, KvType kv = KvType::f16) {
  LoadOptions o;
  o.threads = threads;
  o.kv_type = kv;
  auto m = Model::load(test::model_path(name), o);
  REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
  return llminfer::detail::model_impl(*m).engine;
}

}  // namespace

TEST_CASE("stories260K: greedy continuation equals llama2.c token for token") {
  std::vector<int32_t> ref = reference_tokens();
  REQUIRE(ref.size() == 201);
  std::vector<int32_t> prompt(ref.begin(), ref.begin() + 5);
  CHECK(prompt == std::vector<int32_t>{1, 403, 407, 261, 378});
  for (KvType kv : {KvType::f16, KvType::f32}) {
    auto e = load_engine("stories260K.gguf", 2, kv);
    CHECK(e->arch().name == "llama");
    CHECK(e->arch().origin == "builtin");
    auto ctx = Context::create(e, 0);
    REQUIRE(ctx);
    auto out = greedy_ids(*ctx, prompt, 196);
    REQUIRE(out);
    std::vector<int32_t> got = prompt;
    got.insert(got.end(), out->begin(), out->end());
    CHECK(got == ref);
    CHECK(ctx->n_past() == 200);  // the last generated token is not evaluated
    CHECK(ctx->tokens().size() == 200);
  }
}

TEST_CASE("stories260K: logits of the first 16 positions equal llama2.c's") {
  std::vector<int32_t> ref = reference_tokens();
  REQUIRE(ref.size() == 201);
  auto f = MappedFile::open(test::model_path("stories260K.llama2c-logits16.f32"));
  REQUIRE(f);
  REQUIRE(f->size() == 16 * 512 * 4);
  std::vector<float> want(16 * 512);
  std::memcpy(want.data(), f->data(), f->size());
  auto e = load_engine("stories260K.gguf", 1, KvType::f32);
  std::vector<int32_t> ids(ref.begin(), ref.begin() + 16);
  auto got = logits_of_ids(e, ids, true);
  REQUIRE(got);
  REQUIRE(got->size() == want.size());
  float worst = 0;
  for (size_t k = 0; k < want.size(); k++) worst = std::max(worst, std::fabs((*got)[k] - want[k]));
  MESSAGE("max |logit - llama2.c| = " << worst);
  CHECK(worst < 1e-4f);
  LogitsReport r = compare_logits(got->data(), want.data(), 16, 512);
  CHECK(r.top1_match_all);
  CHECK(r.pearson_min > 0.999999);
}

TEST_CASE("stories260K Q8_0: the same greedy continuation for the reference prompt's first 64 tokens") {
  // Q8_0 weights change the numbers a little; the trained model's margins keep the text.
  std::vector<int32_t> ref = reference_tokens();
  REQUIRE(ref.size() == 201);
  auto e = load_engine("stories260K-q8_0.gguf", 2);
  auto ctx = Context::create(e, 0);
  REQUIRE(ctx);
  std::vector<int32_t> prompt(ref.begin(), ref.begin() + 5);
  auto out = greedy_ids(*ctx, prompt, 64);
  REQUIRE(out);
  std::vector<int32_t> want(ref.begin() + 5, ref.begin() + 5 + 64);
  CHECK(*out == want);
}
