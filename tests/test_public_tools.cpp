// The public functions the CLI's template, logits, compare and bench subcommands are built on
// (issue 15: the CLI uses only the public API): Model::logits, Model::batch_stats,
// Model::render_chat_template and llminfer::render_chat_template. Each is checked against another
// path through the library (Session::eval, Model::apply_chat_template) or against text written
// here by hand from the template's rules.
#define LLMINFER_IMPLEMENTATION
#include "common.hpp"

#include <cstring>

using llminfer::ChatTemplateOptions;
using llminfer::Errc;
using llminfer::LoadOptions;
using llminfer::Model;

namespace {

Model load_tools_model(const std::string& file, LoadOptions o = {}) {
  if (o.threads == 0) o.threads = 1;
  auto m = Model::load(test::model_path(file), o);
  REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
  return *m;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("public tools: Model::logits equals Session::eval's logits bit for bit, every position or the last") {
  for (const char* file : {"synth-qwen3-tiny-q8_0.gguf", "synth-gemma3-tiny-q8_0.gguf"}) {
    CAPTURE(file);
    LoadOptions lo;
    lo.kv_type = llminfer::KvType::f32;
    Model m = load_tools_model(file, lo);
    const int nv = m.info().n_vocab;
    REQUIRE(nv > 0);
    const std::vector<int32_t> ids = {1, 5, 9, 2, 7, 3};
    auto all = m.logits(ids, true);
    REQUIRE_MESSAGE(all, (all ? "" : all.error().message));
    REQUIRE(all->size() == ids.size() * size_t(nv));
    auto s = m.session();
    REQUIRE(s.eval(ids, true));
    REQUIRE(s.logits().size() == all->size());
    CHECK(std::memcmp(s.logits().data(), all->data(), all->size() * 4) == 0);
    auto last = m.logits(ids);
    REQUIRE(last);
    REQUIRE(last->size() == size_t(nv));
    CHECK(std::memcmp(last->data(), all->data() + (ids.size() - 1) * size_t(nv), size_t(nv) * 4) == 0);
    // rows differ from one another (a copy of one row everywhere would pass the checks above only
    // if Session::eval had the same bug; this catches it anyway)
    CHECK(std::memcmp(all->data(), all->data() + size_t(nv), size_t(nv) * 4) != 0);

    auto none = m.logits(std::vector<int32_t>{});
    REQUIRE_FALSE(none);
    CHECK(none.error().code == Errc::invalid_argument);
    auto outside = m.logits(std::vector<int32_t>{1, nv});
    REQUIRE_FALSE(outside);
    CHECK(contains(outside.error().message, "outside the vocabulary"));
  }
  Model empty;
  auto r = empty.logits(std::vector<int32_t>{1});
  REQUIRE_FALSE(r);
  CHECK(contains(r.error().message, "not loaded"));
}

TEST_CASE("public tools: Model::batch_stats counts the batcher's steps, and nothing with batching off") {
  CHECK(Model().batch_stats().steps == 0);
  Model m = load_tools_model("synth-qwen3-tiny-q8_0.gguf");
  const auto before = m.batch_stats();
  auto s = m.session();
  REQUIRE(s.eval(std::vector<int32_t>{1, 2, 3}));
  REQUIRE(s.eval(std::vector<int32_t>{4}));
  const auto after = m.batch_stats();
  CHECK(after.steps >= before.steps + 2);  // two evaluations, each at least one step
  CHECK(after.sequences - before.sequences >= after.steps - before.steps);
  CHECK(after.shared_steps <= after.steps);

  LoadOptions off;
  off.batch = 1;
  Model m1 = load_tools_model("synth-qwen3-tiny-q8_0.gguf", off);
  auto s1 = m1.session();
  REQUIRE(s1.eval(std::vector<int32_t>{1, 2, 3}));
  CHECK(m1.batch_stats().steps == 0);
  CHECK(m1.batch_stats().sequences == 0);
}

TEST_CASE("public tools: render_chat_template equals apply_chat_template for role/content messages") {
  const std::string path = test::model_path("synth-qwen3-tiny-q8_0.gguf");
  Model m = load_tools_model("synth-qwen3-tiny-q8_0.gguf");
  std::vector<llminfer::Message> msgs = {{"system", "Be brief."}, {"user", "Hi <|im_end|> there"}};
  const std::string json =
      R"([{"role":"system","content":"Be brief."},{"role":"user","content":"Hi <|im_end|> there"}])";
  for (bool agp : {false, true}) {
    CAPTURE(agp);
    auto want = m.apply_chat_template(msgs, agp);
    REQUIRE(want);
    ChatTemplateOptions o;
    o.add_generation_prompt = agp;
    auto got = m.render_chat_template(json, o);
    REQUIRE_MESSAGE(got, (got ? "" : got.error().message));
    CHECK(got->text == *want);
    CHECK(got->fallback == !m.info().chat_template);
    // the user's text is a content span, byte for byte
    bool found = false;
    for (auto [b, e] : got->content_spans) found |= got->text.substr(b, e - b) == "Hi <|im_end|> there";
    CHECK(found);
    auto from_file = llminfer::render_chat_template(path, json, o);  // description only, same result
    REQUIRE(from_file);
    CHECK(from_file->text == got->text);
    CHECK(from_file->content_spans == got->content_spans);
  }
}

TEST_CASE("public tools: render_chat_template's variables, kwargs, tools and documents reach the template") {
  ChatTemplateOptions o;
  o.template_source =
      "{{ bos_token }}|{{ x }}|{{ flag }}|{% for m in messages %}{{ m.role }}:{{ m.content }};{% endfor %}"
      "{% if tools %}T={{ tools[0].name }}{% endif %}{% if documents %}D={{ documents[0] }}{% endif %}"
      "{% if add_generation_prompt %}GEN{% endif %}";
  const std::string conv =
      R"({"messages":[{"role":"user","content":"Hi"}],"tools":[{"name":"f"}],"documents":["doc"],"kwargs":{"x":1,"flag":"k"}})";
  auto r = llminfer::render_chat_template("", conv, o);
  REQUIRE_MESSAGE(r, (r ? "" : r.error().message));
  CHECK(r->text == "|1|k|user:Hi;T=fD=doc");
  CHECK_FALSE(r->fallback);
  // "Hi", "f" and "doc" are untrusted text: each is one content span
  std::vector<std::string> spans;
  for (auto [b, e] : r->content_spans) spans.push_back(r->text.substr(b, e - b));
  CHECK(std::find(spans.begin(), spans.end(), "Hi") != spans.end());
  CHECK(std::find(spans.begin(), spans.end(), "f") != spans.end());
  CHECK(std::find(spans.begin(), spans.end(), "doc") != spans.end());

  // variables override kwargs; JSON values are JSON, other text a string; tools replace the tools
  o.add_generation_prompt = true;
  o.variables = {{"x", "2"}, {"flag", "not json"}, {"bos_token", "\"<s>\""}, {"tools", R"([{"name":"g"}])"}};
  r = llminfer::render_chat_template("", conv, o);
  REQUIRE(r);
  CHECK(r->text == "<s>|2|not json|user:Hi;T=gD=docGEN");

  // errors name the input
  o.messages_name = "conv.json";
  auto bad = llminfer::render_chat_template("", "[{\"role\":", o);
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message, "conv.json"));
  bad = llminfer::render_chat_template("", R"({"role":"user"})", o);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == Errc::invalid_argument);
  CHECK(contains(bad.error().message, "conv.json: expected a JSON array"));
  bad = llminfer::render_chat_template("", R"([1])", o);
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message, "conv.json: every message must be a JSON object"));
  ChatTemplateOptions empty_name = o;
  empty_name.variables = {{"", "1"}};
  bad = llminfer::render_chat_template("", "[]", empty_name);
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message, "empty name"));
  ChatTemplateOptions no_template;
  bad = llminfer::render_chat_template("", "[]", no_template);
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message, "no model and no template_source"));
  bad = llminfer::render_chat_template(test::model_path("no-such-model.gguf"), "[]", no_template);
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message, "no-such-model.gguf"));
  ChatTemplateOptions broken;
  broken.template_source = "{% if %}";
  bad = llminfer::render_chat_template("", "[]", broken);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == Errc::template_error);
  ChatTemplateOptions raises;
  raises.template_source = "{{ raise_exception('no system messages') }}";
  bad = llminfer::render_chat_template("", "[]", raises);
  REQUIRE_FALSE(bad);
  CHECK(contains(bad.error().message, "no system messages"));
  CHECK_FALSE(Model().render_chat_template("[]"));
}

TEST_CASE("public tools: llminfer template -m MODEL --template FILE renders FILE alone, with the model's tokens") {
  // (before the template subcommand used render_chat_template, the file was appended to the
  // model's own template and both were rendered)
  test::TempDir dir;
  const std::string msgs = dir.file("m.json"), tpl = dir.file("t.jinja");
  REQUIRE(test::write_file(msgs, R"([{"role":"user","content":"a"},{"role":"assistant","content":"b"}])"));
  REQUIRE(test::write_file(tpl, "[{{ eos_token }}]{{ x }}{% for m in messages %}{{ m.content }}{% endfor %}"));
  const std::string model = test::model_path("synth-qwen3-tiny-q8_0.gguf");
  Model m = load_tools_model("synth-qwen3-tiny-q8_0.gguf");
  const int32_t eos = m.info().eos;
  REQUIRE(eos >= 0);
  const std::string eos_text = m.detokenize(std::vector<int32_t>{eos});
  auto r = test::run_cli("template -m " + test::quote(model) + " --template " + test::quote(tpl) + " --messages " +
                         test::quote(msgs) + " --var x");
  CHECK(r.status == 0);
  CHECK(r.out == "[" + eos_text + "]Trueab");
}
