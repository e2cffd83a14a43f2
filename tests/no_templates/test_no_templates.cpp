// The implementation built with LLMINFER_NO_TEMPLATES (no chat-template interpreter): its own
// binary, build/tests-no-templates, which `make test` builds and runs after the suite (the suite's
// files test the interpreter, so they cannot be built this way). Checks that the interpreter is
// really left out, that everything needing a template returns the documented error
// (Errc::unsupported, naming LLMINFER_NO_TEMPLATES) and never crashes, and that what needs no
// template works as in the full build: tokenizing, and generation from a raw prompt, which must
// give llama2.c's greedy tokens for stories260K.
#define LLMINFER_NO_TEMPLATES
#define LLMINFER_IMPLEMENTATION
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "../../llminfer.hpp"

// ---- the interpreter is not compiled ----
// Its limits are defined by its first part (35_jinja), its value type by the same part: neither
// may exist in this build. (A declaration of JValue is harmless when it is defined; the check
// below then fails, as it must.)
#if defined(LLMINFER_JINJA_MAX_STEPS) || defined(LLMINFER_JINJA_MAX_DEPTH)
#error "LLMINFER_NO_TEMPLATES: the chat-template interpreter (src/35_jinja.hpp) was compiled"
#endif
namespace llminfer::inline v0_1::detail {
struct JValue;
}
template <class T, class = void>
struct is_complete : std::false_type {};
template <class T>
struct is_complete<T, std::void_t<decltype(sizeof(T))>> : std::true_type {};
static_assert(!is_complete<llminfer::detail::JValue>::value,
              "LLMINFER_NO_TEMPLATES: the interpreter's values (src/35_jinja.hpp) were compiled");

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* s = std::getenv(name);
  return s && *s ? s : fallback;
}
std::string stories_path() {
  return env_or("LLMINFER_SOURCE_DIR", ".") + "/third_party/stories260K/stories260K.gguf";
}
std::string stories_reference() {
  return env_or("LLMINFER_SOURCE_DIR", ".") + "/third_party/stories260K/stories260K.llama2c-reference.txt";
}
// A synthetic model with a chat template of its own (make fixtures).
std::string fixture_with_template() {
  return env_or("LLMINFER_FIXTURES", "build/fixtures") + "/synth-qwen3-tiny-f32.gguf";
}

// The 201 ids of llama2.c's greedy run (BOS, the prompt's 4, then 196 generated).
std::vector<int32_t> reference_tokens() {
  std::ifstream f(stories_reference());
  std::string line;
  std::vector<int32_t> ids;
  while (std::getline(f, line)) {
    if (line.rfind("# TOKENS ", 0) != 0) continue;
    std::istringstream in(line.substr(9));
    int32_t id;
    while (in >> id) ids.push_back(id);
  }
  return ids;
}

// The error every template call returns in this build.
void check_no_interpreter(const llminfer::Error& e) {
  CHECK(e.code == llminfer::Errc::unsupported);
  CHECK(e.message.find("no template interpreter") != std::string::npos);
  CHECK(e.message.find("LLMINFER_NO_TEMPLATES") != std::string::npos);
}

}  // namespace

TEST_CASE("no templates: generation from a raw prompt gives llama2.c's greedy tokens") {
  auto ref = reference_tokens();
  REQUIRE(ref.size() == 201);
  auto model = llminfer::Model::load(stories_path(), {.threads = 2});
  REQUIRE(model);
  auto ids = model->tokenize("Once upon a time");
  REQUIRE(ids);
  CHECK(*ids == std::vector<int32_t>(ref.begin(), ref.begin() + 5));
  auto r = model->generate("Once upon a time", {.max_tokens = 196});
  REQUIRE(r);
  CHECK(r->prompt_tokens == 5);
  CHECK(r->tokens == std::vector<int32_t>(ref.begin() + 5, ref.end()));
  CHECK(r->text.rfind(", there was a little girl named Lily.", 0) == 0);
  // a session from token ids, one token at a time, gives the same
  auto s = model->session();
  REQUIRE(s.eval(std::span<const int32_t>(ref.data(), 5)));
  for (size_t k = 5; k < 25; k++) {
    auto t = s.sample();
    REQUIRE(t);
    CHECK(*t == ref[k]);
    REQUIRE(s.eval(std::span<const int32_t>(&ref[k], 1)));
  }
}

TEST_CASE("no templates: every call that needs a chat template returns the error") {
  auto model = llminfer::Model::load(fixture_with_template(), {.threads = 2, .context = 256});
  REQUIRE(model);
  CHECK(model->info().chat_template);  // the file has one: the error is not about a missing template
  std::vector<llminfer::Message> msgs = {{"user", "Hi"}};

  auto applied = model->apply_chat_template(msgs);
  REQUIRE(!applied);
  check_no_interpreter(applied.error());

  auto rendered = model->render_chat_template(R"([{"role": "user", "content": "Hi"}])");
  REQUIRE(!rendered);
  check_no_interpreter(rendered.error());

  auto direct = llminfer::render_chat_template("", R"([{"role": "user", "content": "Hi"}])",
                                               {.template_source = "{{ messages[0].content }}"});
  REQUIRE(!direct);
  check_no_interpreter(direct.error());

  auto chat = model->generate("Hi", {.max_tokens = 4, .chat = true});
  REQUIRE(!chat);
  check_no_interpreter(chat.error());

  // a session: the reply fails, the conversation is unchanged, and token-level use still works
  auto s = model->session();
  s.add("user", "Hi");
  auto reply = s.reply({.max_tokens = 4});
  REQUIRE(!reply);
  check_no_interpreter(reply.error());
  CHECK(s.messages().size() == 1);
  auto begun = s.begin_reply({.max_tokens = 4});
  REQUIRE(!begun);
  check_no_interpreter(begun.error());
  CHECK(!s.replying());
  auto ids = model->tokenize("Hello world", false);
  REQUIRE(ids);
  CHECK(!ids->empty());
  CHECK(model->detokenize(*ids) == "Hello world");
  auto raw = model->generate("Hello world", {.max_tokens = 4});
  REQUIRE(raw);
  CHECK(raw->tokens.size() <= 4);
  CHECK(raw->stop != llminfer::StopReason::error);

  // the C API: the same error as a code and a message
  llminfer_model* cm = nullptr;
  std::string path = fixture_with_template();
  REQUIRE(llminfer_model_load(path.data(), path.size(), nullptr, &cm, nullptr) == LLMINFER_OK);
  llminfer_generate_options go;
  llminfer_generate_options_init(&go);
  go.max_tokens = 4;
  go.chat = 1;
  llminfer_result* cr = nullptr;
  llminfer_error* ce = nullptr;
  CHECK(llminfer_generate(cm, "Hi", 2, &go, &cr, &ce) == LLMINFER_E_UNSUPPORTED);
  CHECK(cr == nullptr);
  REQUIRE(ce != nullptr);
  CHECK(std::string(llminfer_error_message(ce, nullptr)).find("LLMINFER_NO_TEMPLATES") != std::string::npos);
  llminfer_error_free(ce);
  llminfer_result_free(cr);
  llminfer_model_free(cm);

  // a model without a template of its own (the ChatML fallback is a template too)
  auto stories = llminfer::Model::load(stories_path(), {.threads = 1});
  REQUIRE(stories);
  CHECK(!stories->info().chat_template);
  auto fallback = stories->apply_chat_template(msgs);
  REQUIRE(!fallback);
  check_no_interpreter(fallback.error());
}
