// Sessions for programs that live long (issue 15): history editing, context shifting at a constant
// cost, save and restore, the step API, the token-level API, Model::info and loading from memory.
// Every comparison is against another path through the library that must give the same tokens
// (a fresh session, generate(), reply()), or counts evaluated tokens.
#define LLMINFER_IMPLEMENTATION
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>

#include "common.hpp"

using llminfer::GenerateOptions;
using llminfer::GenerateResult;
using llminfer::LoadOptions;
using llminfer::Message;
using llminfer::Model;
using llminfer::Session;
using llminfer::StopReason;

namespace {

Model load_model(const std::string& file, LoadOptions o = {}) {
  if (o.threads == 0) o.threads = 1;
  auto m = Model::load(test::model_path(file), o);
  REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
  return *m;
}

std::vector<int32_t> prompt_ids(const Model& m, const std::vector<Message>& msgs) {
  auto ids = llminfer::detail::chat_prompt_tokens(llminfer::detail::model_impl(m), msgs);
  REQUIRE(ids);
  return *ids;
}

size_t prefix_len(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) i++;
  return i;
}

const char* kQwen = "synth-qwen3-tiny-q8_0.gguf";
const char* kGemma = "synth-gemma3-tiny-q8_0.gguf";  // sliding-window layers, roles must alternate

}  // namespace

TEST_CASE("session api: erase, replace, truncate and set_messages; the next reply reuses the prefix up to the change") {
  Model m = load_model(kQwen);
  GenerateOptions o{.max_tokens = 4};
  auto s = m.session();
  s.add("system", "You are terse.");
  s.add("user", "Name a colour.");
  REQUIRE(s.reply(o));
  s.add("user", "Name a fruit.");
  REQUIRE(s.reply(o));
  s.add("user", "Name a tool.");
  REQUIRE(s.reply(o));
  REQUIRE(s.messages().size() == 7);

  // each edit: the reply evaluates exactly what follows the first token that differs
  auto check_edit = [&](std::string what, bool changes_prompt = true) {
    CAPTURE(what);
    std::vector<int32_t> cached = s.tokens();
    std::vector<int32_t> want = prompt_ids(m, s.messages());
    auto r = s.reply(o);
    REQUIRE(r);
    size_t common = std::min(prefix_len(cached, want), want.size() - 1);
    CHECK(r->prompt_tokens == int(want.size()));
    CHECK(r->prompt_tokens_reused == int(common));
    CHECK(r->prompt_tokens_evaluated == int(want.size() - common));
    CHECK(r->tokens_shifted == 0);
    if (changes_prompt) CHECK(common < want.size() - 1);  // the edit changed something before the end
    // and the reply equals a fresh session's for the same conversation
    auto fresh = m.session();
    fresh.set_messages(std::vector<Message>(s.messages().begin(), s.messages().end() - 1));
    auto f = fresh.reply(o);
    REQUIRE(f);
    CHECK(f->tokens == r->tokens);
  };
  REQUIRE(s.erase(3));  // "Name a fruit." and its reply go
  REQUIRE(s.erase(3));
  CHECK(s.messages().size() == 5);
  check_edit("erase");
  REQUIRE(s.replace(1, Message{"user", "Name a number."}));
  check_edit("replace");
  REQUIRE(s.truncate(2));
  CHECK(s.messages().size() == 2);
  check_edit("truncate", false);  // what stays is a prefix of the cache: nothing but the last token to evaluate
  s.set_messages({{"system", "You are terse."}, {"user", "Name an animal."}});
  check_edit("set_messages");
  // out of range: an error naming the index, nothing changes
  size_t n = s.messages().size();
  auto e = s.erase(n);
  REQUIRE(!e);
  CHECK(e.error().code == llminfer::Errc::invalid_argument);
  CHECK(e.error().message.find(std::to_string(n)) != std::string::npos);
  CHECK(!s.replace(n, Message{"user", "x"}));
  CHECK(!s.truncate(n + 1));
  CHECK(s.messages().size() == n);
}

TEST_CASE("session api: a template error leaves the session usable; the caller removes the cause") {
  Model m = load_model(kGemma);
  auto s = m.session();
  s.add("user", "Hello");
  s.add("user", "Hello again");  // gemma3's template: roles must alternate
  auto r = s.reply({.max_tokens = 3});
  REQUIRE(!r);
  CHECK(r.error().code == llminfer::Errc::template_error);
  CHECK(r.error().message.find("alternate") != std::string::npos);
  CHECK(s.messages().size() == 2);     // nothing was added
  CHECK(!s.reply({.max_tokens = 3}));  // the same again, until the cause goes
  REQUIRE(s.erase(1));
  auto ok = s.reply({.max_tokens = 3});
  REQUIRE(ok);
  CHECK(s.messages().size() == 2);
  CHECK(s.messages()[1].role == "assistant");
  // and it equals a session that never saw the error
  auto fresh = m.session();
  fresh.add("user", "Hello");
  auto f = fresh.reply({.max_tokens = 3});
  REQUIRE(f);
  CHECK(f->tokens == ok->tokens);
}

TEST_CASE("session api: a full context with ContextPolicy::stop adds no empty reply and says what happened") {
  Model m = load_model(kQwen, {.context = 40});
  auto s = m.session();
  s.add("user", "Tell me a story.");
  auto r1 = s.reply({.max_tokens = -1});
  REQUIRE(r1);
  CHECK(r1->stop == StopReason::context_full);
  CHECK(!r1->tokens.empty());
  REQUIRE(s.messages().size() == 2);
  s.add("user", "And another one, please, a long one.");
  auto r2 = s.reply({.max_tokens = -1});
  REQUIRE(r2);
  CHECK(r2->stop == StopReason::context_full);
  CHECK(r2->tokens.empty());
  CHECK(r2->error.code != llminfer::Errc::ok);
  CHECK(r2->error.message.find("context") != std::string::npos);
  CHECK(s.messages().size() == 3);  // the user's message stays, no empty assistant message
  CHECK(s.messages().back().role == "user");
  // the caller can remove it and go on
  REQUIRE(s.erase(2));
  CHECK(s.messages().size() == 2);
}

TEST_CASE("session api: step() pieces equal reply(), and reply() is built on it") {
  Model m = load_model(kQwen);
  for (float temp : {0.0f, 0.9f}) {
    CAPTURE(temp);
    GenerateOptions o{.max_tokens = 24, .temperature = temp, .top_k = 20, .seed = 42, .stop = {"\n\n"}};
    auto a = m.session();
    a.add("user", "Write a line.");
    auto want = a.reply(o);
    REQUIRE(want);
    auto b = m.session();
    b.add("user", "Write a line.");
    std::string streamed;
    o.on_token = [&](std::string_view p) {
      streamed += p;
      return true;
    };
    REQUIRE(b.begin_reply(o));
    CHECK(b.replying());
    std::string pieces;
    int steps = 0;
    StopReason stop = StopReason::error;
    for (;;) {
      auto st = b.step();
      REQUIRE(st);
      steps++;
      if (st->done) {
        CHECK(st->text.empty());
        stop = st->stop;
        break;
      }
      pieces += st->text;
      REQUIRE(steps < 1000);
    }
    CHECK(!b.replying());
    CHECK(pieces == want->text);
    CHECK(streamed == want->text);
    CHECK(stop == want->stop);
    CHECK(b.result().tokens == want->tokens);
    CHECK(b.result().text == want->text);
    CHECK(steps >= int(want->tokens.size()));  // at least one step per token (plus the prompt's)
    REQUIRE(b.messages().size() == a.messages().size());
    for (size_t k = 0; k < a.messages().size(); k++) {
      CHECK(b.messages()[k].role == a.messages()[k].role);
      CHECK(b.messages()[k].content == a.messages()[k].content);
    }
    auto after = b.step();  // nothing in progress
    CHECK(!after);
  }
  // a long prompt is evaluated in several steps of at most 256 tokens
  Model big = load_model(kQwen, {.context = 2048});
  auto s = big.session();
  std::string longtext;
  for (int i = 0; i < 120; i++) longtext += "word" + std::to_string(i) + " ";
  s.add("user", longtext);
  REQUIRE(s.begin_reply({.max_tokens = 1}));
  int prompt_steps = 0;
  while (s.cached_tokens() < 300) {
    auto st = s.step();
    REQUIRE(st);
    REQUIRE(!st->done);
    prompt_steps++;
    CHECK(st->text.empty());
    CHECK(s.cached_tokens() <= 256 * prompt_steps);
  }
  CHECK(prompt_steps >= 2);
  // an edit during a reply ends it as cancelled (the partial reply joins the conversation)
  s.add("user", "Stop.");
  CHECK(!s.replying());
  CHECK(s.result().stop == StopReason::cancelled);
}

TEST_CASE("session api: eval, logits and sample equal generate() token for token") {
  Model m = load_model(kQwen);
  auto ids = m.tokenize("Once upon a time", true);
  REQUIRE(ids);
  for (float temp : {0.0f, 1.0f}) {
    CAPTURE(temp);
    GenerateOptions o{.max_tokens = 20, .temperature = temp, .top_p = 0.9f, .repeat_penalty = 1.1f, .seed = 7};
    auto g = m.generate(std::span<const int32_t>(*ids), o);
    REQUIRE(g);
    auto s = m.session();
    s.set_seed(7);
    REQUIRE(s.eval(*ids));
    CHECK(int(s.logits().size()) == m.info().n_vocab);
    std::vector<int32_t> out;
    for (int k = 0; k < o.max_tokens; k++) {
      auto id = s.sample(o);
      REQUIRE(id);
      if (s.is_eog(*id)) break;
      out.push_back(*id);
      if (k + 1 < o.max_tokens) REQUIRE(s.eval(std::span<const int32_t>(&*id, 1)));
    }
    CHECK(out == g->tokens);
    if (out.size() == size_t(o.max_tokens)) CHECK(s.tokens().size() == ids->size() + out.size() - 1);
  }
  // all logits: one row per token, the last equal to a plain eval's
  auto s = m.session();
  REQUIRE(s.eval(*ids, true));
  const size_t nv = size_t(m.info().n_vocab);
  REQUIRE(s.logits().size() == ids->size() * nv);
  std::vector<float> last(s.logits().end() - std::ptrdiff_t(nv), s.logits().end());
  auto t = m.session();
  REQUIRE(t.eval(*ids));
  CHECK(std::vector<float>(t.logits().begin(), t.logits().end()) == last);
  // errors: ids outside the vocabulary, sampling before any eval, a context that is full
  auto u = m.session();
  CHECK(!u.sample());
  std::vector<int32_t> bad = {m.info().n_vocab + 5};
  CHECK(!u.eval(bad));
  Model small = load_model(kQwen, {.context = 8});
  auto v = small.session();
  std::vector<int32_t> nine(9, 1);
  auto full = v.eval(nine);
  REQUIRE(!full);
  CHECK(full.error().message.find("context") != std::string::npos);
  REQUIRE(u.eval(*ids));
  REQUIRE(u.truncate_tokens(2));
  CHECK(u.tokens().size() == 2);
  CHECK(!u.truncate_tokens(3));
}

TEST_CASE("session api: Session::generate from ids equals Model::generate and reuses what the cache holds") {
  Model m = load_model(kQwen);
  auto ids = m.tokenize("Once upon a time", true);
  REQUIRE(ids);
  const GenerateOptions sampled{.max_tokens = 12, .temperature = 0.8f, .top_p = 0.9f, .seed = 3};
  auto s = m.session();
  auto a = s.generate(*ids, sampled);
  REQUIRE(a);
  auto ref = m.generate(std::span<const int32_t>(*ids), sampled);
  REQUIRE(ref);
  CHECK(a->tokens == ref->tokens);
  CHECK(a->text == ref->text);
  CHECK(a->seed == 3);
  CHECK(a->prompt_tokens == int(ids->size()));
  CHECK(a->prompt_tokens_reused == 0);
  CHECK(a->prompt_tokens_evaluated == int(ids->size()));
  CHECK(s.messages().empty());  // the conversation is not touched
  CHECK(s.result().tokens == a->tokens);
  // the cache holds the prompt and the generated tokens (the last one sampled, not evaluated)
  std::vector<int32_t> cached = s.tokens();
  REQUIRE(cached.size() >= ids->size());
  CHECK(prefix_len(cached, *ids) == ids->size());
  CHECK(cached.size() >= ids->size() + a->tokens.size() - 1);

  // the conversation comes back longer: only what the cache does not hold is evaluated, and the
  // tokens are those of a fresh generation (greedy)
  std::vector<int32_t> next = *ids;
  next.insert(next.end(), a->tokens.begin(), a->tokens.end());
  auto more = m.tokenize(" And then", false);
  REQUIRE(more);
  next.insert(next.end(), more->begin(), more->end());
  const GenerateOptions greedy{.max_tokens = 8};
  auto b = s.generate(next, greedy);
  REQUIRE(b);
  const size_t reuse = std::min(prefix_len(cached, next), next.size() - 1);
  CHECK(reuse >= ids->size() + a->tokens.size() - 1);
  CHECK(b->prompt_tokens == int(next.size()));
  CHECK(b->prompt_tokens_reused == int(reuse));
  CHECK(b->prompt_tokens_evaluated == int(next.size() - reuse));
  auto fresh = m.generate(std::span<const int32_t>(next), greedy);
  REQUIRE(fresh);
  CHECK(b->tokens == fresh->tokens);
  // a prompt that differs after its first token: the cache is cut there
  std::vector<int32_t> other = {(*ids)[0], (*ids)[1] == 7 ? 8 : 7, 9, 10};
  auto c = s.generate(other, greedy);
  REQUIRE(c);
  CHECK(c->prompt_tokens_reused == 1);
  CHECK(c->prompt_tokens_evaluated == 3);
  auto fresh_other = m.generate(std::span<const int32_t>(other), greedy);
  REQUIRE(fresh_other);
  CHECK(c->tokens == fresh_other->tokens);
  // and a reply afterwards reuses only the exact common prefix, as a fresh session's reply
  s.add("user", "Hello");
  auto r = s.reply(greedy);
  REQUIRE(r);
  auto f = m.session();
  f.add("user", "Hello");
  auto fr = f.reply(greedy);
  REQUIRE(fr);
  CHECK(r->tokens == fr->tokens);
  CHECK(r->tokens_shifted == 0);

  // errors: nothing to start from, an id outside the vocabulary, a bad option, a moved-from session
  auto e = m.session();
  CHECK(!e.generate(std::vector<int32_t>{}));
  const int64_t n_ids = m.info().n_input_ids;
  CHECK(n_ids == m.info().n_vocab);  // a GGUF file: one embedding row per token
  auto oov = e.generate(std::vector<int32_t>{1, int32_t(n_ids)}, greedy);
  REQUIRE(!oov);
  CHECK_MESSAGE(oov.error().message.find(std::to_string(n_ids)) != std::string::npos, oov.error().message);
  CHECK(e.generate(std::vector<int32_t>{1, int32_t(n_ids - 1)}, {.max_tokens = 1}));  // the last id is one
  auto bad = e.generate(*ids, {.temperature = -1.0f});
  REQUIRE(!bad);
  CHECK(bad.error().code == llminfer::Errc::invalid_argument);
  Session moved_to = std::move(e);
  auto gone = e.generate(*ids);  // NOLINT(bugprone-use-after-move): what the call does then
  REQUIRE(!gone);
  CHECK(gone.error().message.find("moved from") != std::string::npos);
}

TEST_CASE("session api: tokenize_chat is what reply() evaluates; generate with chat gives reply()'s text") {
  // (stories260K: SentencePiece with a leading space, no template of its own: the ChatML fallback)
  for (std::string file : {kQwen, kGemma, "synth-llama-tiny-q8_0.gguf", "stories260K.gguf"}) {
    CAPTURE(file);
    Model m = load_model(file);
    const std::vector<Message> msgs = {{"user", "Say hello."}, {"assistant", "Hello."}, {"user", "Again, please."}};
    auto ids = m.tokenize_chat(msgs);
    REQUIRE_MESSAGE(ids, (ids ? "" : ids.error().message));
    CHECK(*ids == prompt_ids(m, msgs));
    const auto info = m.info();
    if (info.add_bos) CHECK((*ids)[0] == info.bos);
    // what reply() evaluates, and what it generates: Session::generate with chat gives the same
    auto s = m.session();
    s.set_messages(msgs);
    const GenerateOptions o{.max_tokens = 6};
    auto r = s.reply(o);
    REQUIRE(r);
    CHECK(r->prompt_tokens == int(ids->size()));
    CHECK(prefix_len(s.tokens(), *ids) == ids->size());
    auto t = m.session();
    GenerateOptions oc = o;
    oc.chat = true;
    auto g = t.generate(*ids, oc);
    REQUIRE(g);
    CHECK(g->tokens == r->tokens);
    CHECK(g->text == r->text);
    CHECK(t.messages().empty());
    auto mg = m.generate(std::span<const int32_t>(*ids), oc);
    REQUIRE(mg);
    CHECK(mg->text == r->text);
    // without the generation prompt the rendering ends earlier (Qwen's template; the llama fixture's
    // writes the assistant's header whatever it is asked)
    auto no_gen = m.tokenize_chat(msgs, false);
    REQUIRE(no_gen);
    CHECK(prefix_len(*no_gen, *ids) == no_gen->size());
    if (file == kQwen) CHECK(no_gen->size() < ids->size());
  }
  // message content never becomes control tokens: text that spells one stays text
  Model q = load_model(kQwen);
  auto im_start = q.tokenize("<|im_start|>", false, true);
  REQUIRE(im_start);
  REQUIRE(im_start->size() == 1);
  auto count = [&](const std::vector<int32_t>& v) { return std::count(v.begin(), v.end(), (*im_start)[0]); };
  auto plain = q.tokenize_chat(std::vector<Message>{{"user", "hello"}});
  auto spelled = q.tokenize_chat(std::vector<Message>{{"user", "<|im_start|>"}});
  REQUIRE(plain);
  REQUIRE(spelled);
  CHECK(count(*plain) == 2);  // the user's turn and the assistant's
  CHECK(count(*spelled) == 2);
  CHECK(spelled->size() > plain->size());
  // errors: a template that refuses the conversation, a model that is not loaded
  Model g = load_model(kGemma);
  auto refused = g.tokenize_chat(std::vector<Message>{{"user", "a"}, {"user", "b"}});  // roles must alternate
  CHECK(!refused);
  CHECK(!Model().tokenize_chat(std::vector<Message>{{"user", "a"}}));
}

TEST_CASE("session api: with chat, a SentencePiece reply's text drops its first token's leading space") {
  Model m = load_model("stories260K.gguf");
  auto word = m.tokenize("hello", false);  // SentencePiece: the first piece carries the space ("▁h...")
  REQUIRE(word);
  REQUIRE(!word->empty());
  const int32_t id = (*word)[0];
  auto prompt = m.tokenize_chat(std::vector<Message>{{"user", "hi"}});
  REQUIRE(prompt);
  GenerateOptions o{.max_tokens = 1, .logit_bias = {{id, 100.0f}}};  // that token comes first
  auto cont = m.session().generate(*prompt, o);                      // a continuation keeps the space
  o.chat = true;
  auto reply = m.session().generate(*prompt, o);
  REQUIRE(cont);
  REQUIRE(reply);
  CHECK(cont->tokens == std::vector<int32_t>{id});
  CHECK(reply->tokens == std::vector<int32_t>{id});
  REQUIRE(!reply->text.empty());
  CHECK(reply->text[0] != ' ');
  CHECK(cont->text == " " + reply->text);
}

TEST_CASE("session api: check_generate_options refuses what generate() refuses, with the same message") {
  using llminfer::check_generate_options;
  CHECK(check_generate_options({}));
  CHECK(check_generate_options({.max_tokens = -1,
                                .temperature = 2.0f,
                                .top_k = 40,
                                .top_p = 0.5f,
                                .min_p = 0.1f,
                                .repeat_penalty = 1.3f,
                                .repeat_last_n = -1,
                                .stop = {"\n\n", "é"}}));
  Model m = load_model(kQwen);
  const std::vector<int32_t> ids = {1, 2, 3};
  struct Case {
    GenerateOptions o;
    const char* needle;
  };
  const Case cases[] = {
      {{.temperature = -1.0f}, "temperature"},
      {{.temperature = std::numeric_limits<float>::infinity()}, "temperature"},
      {{.top_k = -1}, "top_k"},
      {{.top_p = 0.0f}, "top_p"},
      {{.top_p = 1.5f}, "top_p"},
      {{.min_p = -0.1f}, "min_p"},
      {{.repeat_penalty = 0.0f}, "repeat_penalty"},
      {{.repeat_last_n = -2}, "repeat_last_n"},
      {{.stop = {"ok", ""}}, "stop string 2 is empty"},
      {{.stop = {"\xff"}}, "not valid UTF-8"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.needle);
    auto v = check_generate_options(c.o);
    REQUIRE(!v);
    CHECK(v.error().code == llminfer::Errc::invalid_argument);
    CHECK_MESSAGE(v.error().message.find(c.needle) != std::string::npos, v.error().message);
    auto g = m.generate(std::span<const int32_t>(ids), c.o);
    REQUIRE(!g);
    CHECK(g.error().message == v.error().message);
  }
}

TEST_CASE("session api: Model::info reports the model's facts") {
  Model m = load_model(kQwen, {.context = 512});
  auto i = m.info();
  const auto& d = *llminfer::detail::model_impl(m).desc;
  CHECK(i.architecture == "qwen3");
  CHECK(i.format == "gguf");
  CHECK(i.n_vocab == int(d.vocab.tokens.size()));
  CHECK(i.n_layer == int(d.hp.n_layer));
  CHECK(i.n_embd == int(d.hp.n_embd));
  CHECK(i.n_head == int(d.hp.n_head));
  CHECK(i.n_head_kv == int(d.hp.n_head_kv));
  CHECK(i.context == 512);
  CHECK(i.n_params == d.n_params());
  CHECK(i.tokenizer == "gpt2");
  CHECK(i.eos == d.vocab.eos);
  CHECK(!i.eog.empty());
  for (int32_t id : i.eog) CHECK(m.session().is_eog(id));
  CHECK(i.chat_template);
  CHECK(i.identity.size() == 64);
  CHECK(i.kv_bytes > 0);
  CHECK(i.threads == 1);
  auto s = m.session();
  s.add("user", "hi");
  auto r = s.reply({.max_tokens = 1});
  REQUIRE(r);
  CHECK(r->kv_bytes == i.kv_bytes);
  // the identity follows the weights: another file of the same shape differs
  CHECK(load_model("synth-qwen3-tiny-f16.gguf").info().identity != i.identity);
  CHECK(load_model(kQwen).info().identity == i.identity);
  CHECK(Model().info().architecture.empty());
}

namespace {

// Conversation of `turns` turns, a reply after each.
void converse(Session& s, int from, int turns, const GenerateOptions& o, std::vector<std::vector<int32_t>>& replies) {
  for (int t = from; t < from + turns; t++) {
    s.add("user", "Question number " + std::to_string(t) + "?");
    auto r = s.reply(o);
    REQUIRE(r);
    replies.push_back(r->tokens);
  }
}

}  // namespace

TEST_CASE("session api: save and load continue token for token as never having stopped") {
  test::TempDir dir;
  for (const char* file : {kQwen, kGemma}) {
    for (auto kv : {llminfer::KvType::f16, llminfer::KvType::f32}) {
      CAPTURE(std::string(file));
      CAPTURE(int(kv));
      Model m = load_model(file, {.context = 1024, .kv_type = kv});
      GenerateOptions o{.max_tokens = 12, .temperature = 0.8f, .top_k = 30, .seed = 5};
      auto a = m.session();
      a.add("system", "Be brief.");
      std::vector<std::vector<int32_t>> first, rest_a, rest_b;
      converse(a, 0, 2, o, first);
      auto bytes = a.save();
      REQUIRE(bytes);
      std::string path = dir.file("s.llmisess");
      REQUIRE(a.save(std::string_view(path)));
      int cached = a.cached_tokens();
      converse(a, 2, 2, o, rest_a);
      // restored into a fresh session of another Model object (same file), from bytes and from the file
      Model m2 = load_model(file, {.context = 1024, .kv_type = kv});
      for (int from_file = 0; from_file < 2; from_file++) {
        CAPTURE(from_file);
        auto b = m2.session();
        auto l = from_file ? b.load(std::string_view(path)) : b.load(*bytes);
        REQUIRE_MESSAGE(l, (l ? "" : l.error().message));
        CHECK(b.cached_tokens() == cached);
        CHECK(b.messages().size() == 5);
        rest_b.clear();
        b.add("user", "Question number 2?");
        auto r = b.reply(o);
        REQUIRE(r);
        CHECK(r->prompt_tokens_evaluated < r->prompt_tokens / 2);  // the cache came back: no re-evaluation
        rest_b.push_back(r->tokens);
        converse(b, 3, 1, o, rest_b);
        CHECK(rest_b == rest_a);
      }
      // the token-level state too: logits and RNG
      auto c = m.session();
      c.set_seed(99);
      auto ids = m.tokenize("Once upon a time", true);
      REQUIRE(ids);
      REQUIRE(c.eval(*ids));
      (void)c.sample({.temperature = 1.0f});
      auto saved = c.save();
      REQUIRE(saved);
      auto d = m2.session();
      REQUIRE(d.load(*saved));
      CHECK(std::vector<float>(d.logits().begin(), d.logits().end()) ==
            std::vector<float>(c.logits().begin(), c.logits().end()));
      for (int k = 0; k < 5; k++) {
        auto x = c.sample({.temperature = 1.0f}), y = d.sample({.temperature = 1.0f});
        REQUIRE((x && y));
        CHECK(*x == *y);
        REQUIRE(c.eval(std::span<const int32_t>(&*x, 1)));
        REQUIRE(d.eval(std::span<const int32_t>(&*y, 1)));
        CHECK(std::vector<float>(d.logits().begin(), d.logits().end()) ==
              std::vector<float>(c.logits().begin(), c.logits().end()));
      }
    }
  }
}

TEST_CASE("session api: truncated, altered, foreign and mismatched saved sessions are refused; nothing changes") {
  Model m = load_model(kQwen);
  auto a = m.session();
  a.add("user", "Hello");
  REQUIRE(a.reply({.max_tokens = 4}));
  auto bytes = a.save();
  REQUIRE(bytes);
  const std::vector<uint8_t> good = *bytes;
  auto b = m.session();
  b.add("user", "keep me");
  auto refused = [&](const std::vector<uint8_t>& v, const char* needle) {
    CAPTURE(needle);
    auto l = b.load(v);
    REQUIRE(!l);
    CHECK(l.error().code == llminfer::Errc::bad_format);
    CHECK_MESSAGE(l.error().message.find(needle) != std::string::npos, l.error().message);
    CHECK(b.messages().size() == 1);  // unchanged
    CHECK(b.messages()[0].content == "keep me");
  };
  // truncated anywhere
  for (size_t cut : {size_t(0), size_t(4), size_t(12), size_t(40), good.size() / 2, good.size() - 1}) {
    std::vector<uint8_t> v(good.begin(), good.begin() + std::ptrdiff_t(cut));
    auto l = b.load(v);
    CHECK(!l);
    CHECK(b.messages().size() == 1);
  }
  refused(std::vector<uint8_t>(good.begin(), good.end() - 1), "truncated");
  // one byte altered anywhere in the content or the checksum
  for (size_t at : {size_t(30), good.size() / 3, good.size() - 40, good.size() - 1}) {
    auto v = good;
    v[at] ^= 0x10;
    refused(v, "checksum");
  }
  // not a session file; another version; bytes appended
  std::vector<uint8_t> gguf(good.size(), 0);
  std::memcpy(gguf.data(), "GGUF", 4);
  refused(gguf, "not a saved llminfer session");
  auto v2 = good;
  v2[8] = 2;
  refused(v2, "version 2");
  auto longer = good;
  longer.push_back(0);
  refused(longer, "follow the end");
  // a foreign model (another weight file), another KV type
  Model other = load_model("synth-qwen3-tiny-f16.gguf");
  auto o = other.session();
  auto l = o.load(good);
  REQUIRE(!l);
  CHECK(l.error().message.find("another model") != std::string::npos);
  Model f32 = load_model(kQwen, {.kv_type = llminfer::KvType::f32});
  auto q = f32.session();
  l = q.load(good);
  REQUIRE(!l);
  CHECK(l.error().message.find("f16") != std::string::npos);
  // a context too small for the saved tokens
  Model tiny = load_model(kQwen, {.context = 8});
  auto t = tiny.session();
  l = t.load(good);
  REQUIRE(!l);
  CHECK(l.error().message.find("context") != std::string::npos);
  // a well-formed checksum over lying content is still checked: an absurd token count
  {
    auto v = good;
    // the token count follows the header, identity, library, fixed fields and the messages
    size_t at = 24 + 4 + 64 + 4 + std::string(LLMINFER_VERSION_STRING).size() + 4 + 4 + 4 + 32 + 4 + 4;
    for (const auto& msg : a.messages()) at += 4 + msg.role.size() + 8 + msg.content.size();
    uint32_t n = uint32_t(a.tokens().size());
    REQUIRE(std::memcmp(v.data() + at, &n, 4) == 0);
    uint32_t huge = 0x7fffffff;
    std::memcpy(v.data() + at, &huge, 4);
    llminfer::detail::Sha256 h;
    h.update(v.data(), v.size() - 32);
    auto sum = llminfer::detail::sha256_bytes(h.hex());
    std::memcpy(v.data() + v.size() - 32, sum.data(), 32);
    refused(v, "malformed");
  }
  // a file that cannot be read; a save during a reply
  CHECK(!b.load(std::string_view("/nonexistent/x.llmisess")));
  b.add("user", "more");
  REQUIRE(b.begin_reply({.max_tokens = 3}));
  auto during = b.save();
  REQUIRE(!during);
  CHECK(during.error().message.find("reply is in progress") != std::string::npos);
}

TEST_CASE("session api: context shifting keeps the tokens evaluated per turn constant over 200 turns") {
  // A 256-token context, 200 turns: once the context fills, the oldest turns after the system
  // message leave and the cache shifts, so each turn evaluates its own tokens plus a constant
  // (the reply's last token, the template's wrapping, a re-tokenized reply), never the
  // conversation again. Before: 24, 17, 17, 26, 165, 203, 241, 277, ... on a 128-token context.
  for (const char* file : {kQwen, kGemma}) {
    CAPTURE(std::string(file));
    Model m = load_model(file, {.context = 256, .context_policy = llminfer::ContextPolicy::slide});
    auto s = m.session();
    s.add("system", "You are a guard in a castle. Answer in a few words.");
    // (top-k 40, the CLI's default: varied replies without an exp of the whole vocabulary per
    // token, which made this the suite's slowest case under the sanitizers)
    GenerateOptions o{.max_tokens = 12, .temperature = 0.7f, .top_k = 40, .seed = 1};
    int dropped = 0, shifted_turns = 0, worst_extra = 0;
    std::vector<int> evaluated;
    for (int turn = 0; turn < 200; turn++) {
      std::string q = "Traveller question " + std::to_string(turn) + ": where is the gate?";
      // this turn's own tokens: what adding it to the conversation adds to the prompt
      std::vector<Message> before = s.messages();
      std::vector<Message> with = before;
      with.push_back({"user", q});
      size_t own = prompt_ids(m, with).size() - prompt_ids(m, before).size();
      s.add("user", q);
      auto r = s.reply(o);
      REQUIRE(r);
      CHECK(s.cached_tokens() <= 256);
      CHECK(r->stop != StopReason::context_full);
      dropped += r->messages_dropped;
      if (r->tokens_shifted > 0) shifted_turns++;
      int extra = r->prompt_tokens_evaluated - int(own);
      worst_extra = std::max(worst_extra, extra);
      evaluated.push_back(r->prompt_tokens_evaluated);
      // a constant, independent of the conversation's length: the previous reply (re-rendered by
      // the template: at most max_tokens) and the template's wrapping
      CHECK(extra <= o.max_tokens + 16);
    }
    CHECK(dropped > 100);       // the context did fill, many times
    CHECK(shifted_turns > 10);  // and the cache was shifted rather than evaluated again
    CHECK(s.messages()[0].role == "system");
    if (std::getenv("LLMINFER_VERBOSE")) {
      std::string e;
      for (int x : evaluated) e += std::to_string(x) + " ";
      MESSAGE(std::string(file) << ": evaluated per turn " << e << "worst extra " << worst_extra);
    }
  }
}

TEST_CASE("session api: a shifted cache against a fresh evaluation (validation report, f32 and f16)") {
  // Layer 0's keys and values depend only on each token and its position, so after a shift they
  // must equal a fresh evaluation's (values exactly, keys up to the re-rotation's rounding): this
  // proves the re-rotation on every kind of layer (gemma3's first layer has a sliding window).
  // Deeper layers carry what the dropped tokens contributed (as in llama.cpp's context shift):
  // the report measures that difference on the next tokens' logits.
  for (const char* file : {"synth-qwen3-tiny-f32.gguf", "synth-gemma3-tiny-f32.gguf"}) {
    for (auto kv : {llminfer::KvType::f32, llminfer::KvType::f16}) {
      const bool f32 = kv == llminfer::KvType::f32;
      CAPTURE(std::string(file));
      CAPTURE(f32);
      Model m = load_model(file, {.context = 512, .kv_type = kv});
      auto text = m.tokenize(
          "Once upon a time there was a little dog who lived in a small house near the river. "
          "Every morning the dog ran to the water and barked at the fish. One day a bird came.",
          true);
      REQUIRE(text);
      const std::vector<int32_t>& t = *text;
      REQUIRE(t.size() > 30);
      const size_t keep = 4, drop = 12;
      std::vector<int32_t> held(t.begin(), t.begin() + std::ptrdiff_t(keep));
      held.insert(held.end(), t.begin() + std::ptrdiff_t(keep + drop), t.end());
      auto fresh = m.session();
      REQUIRE(fresh.eval(held));
      auto& fi = llminfer::detail::session_impl(fresh);
      // shifted with the keys re-rotated (Context::erase), and moved without re-rotation
      double key_diff[2] = {0, 0}, value_diff[2] = {0, 0};
      for (int rotate = 1; rotate >= 0; rotate--) {
        auto s = m.session();
        REQUIRE(s.eval(t));
        auto& impl = llminfer::detail::session_impl(s);
        auto& ctx = *impl.ctx;
        if (rotate) {
          REQUIRE(ctx.erase(int(keep), int(drop)));
        } else {
          llminfer::detail::KvMove mv{int(keep + drop), int(keep), int(t.size() - keep - drop)};
          REQUIRE(ctx.kv().shift(std::span<const llminfer::detail::KvMove>(&mv, 1), int(t.size()), int(held.size()),
                                 false));
          ctx.set_tokens(held);
        }
        CHECK(s.tokens() == held);
        const auto& sp = ctx.kv().layer(0).spec;
        const size_t kbytes = size_t(sp.n_kv) * sp.hd_k * ctx.kv().elem();
        // a sliding-window ring keeps (and moves) only the window before the next position
        int from = int(keep);
        if (ctx.kv().layer(0).wraps(ctx.n_ctx())) from = std::max(from, int(held.size()) - sp.window + 1);
        CHECK(from < int(held.size()));
        for (int pos = from; pos < int(held.size()); pos++) {
          std::string a, b;
          ctx.kv().read_cell(0, pos, a);
          fi.ctx->kv().read_cell(0, pos, b);
          REQUIRE(a.size() == b.size());
          std::vector<float> fa(a.size() / ctx.kv().elem()), fb(fa.size());
          ctx.kv().load(reinterpret_cast<const uint8_t*>(a.data()), fa.data(), int(fa.size()));
          ctx.kv().load(reinterpret_cast<const uint8_t*>(b.data()), fb.data(), int(fb.size()));
          const size_t nk = kbytes / ctx.kv().elem();
          for (size_t k = 0; k < fa.size(); k++) {
            double d = std::fabs(double(fa[k]) - double(fb[k]));
            if (k < nk)
              key_diff[rotate] = std::max(key_diff[rotate], d);
            else
              value_diff[rotate] = std::max(value_diff[rotate], d);
          }
        }
        if (!rotate) continue;
        // the report: the next 8 tokens on the shifted cache vs on the fresh one
        std::vector<int32_t> next = {t[5], t[6], t[7], t[8], t[9], t[10], t[11], t[12]};
        auto f = m.session();
        REQUIRE(f.eval(held));
        REQUIRE(f.eval(next, true));
        REQUIRE(s.eval(next, true));
        const int nv = m.info().n_vocab;
        auto rep = llminfer::detail::compare_logits(s.logits().data(), f.logits().data(), int(next.size()), nv);
        double maxd = 0;
        for (size_t k = 0; k < s.logits().size(); k++)
          maxd = std::max(maxd, double(std::fabs(s.logits()[k] - f.logits()[k])));
        MESSAGE(std::string(file) << (f32 ? " f32" : " f16") << ": shifted vs fresh: top1 " << rep.top1_matches << "/"
                                  << rep.positions << ", pearson mean " << rep.pearson_mean << " min "
                                  << rep.pearson_min << ", top10 overlap " << rep.top10_overlap_mean << ", max |diff| "
                                  << maxd);
        CHECK(rep.pearson_min > 0.5);
      }
      MESSAGE(std::string(file) << (f32 ? " f32" : " f16") << ": layer 0 after the shift vs fresh: keys re-rotated "
                                << key_diff[1] << ", keys moved without re-rotation " << key_diff[0] << ", values "
                                << value_diff[1]);
      // (two batches of different lengths may round the last bit differently)
      CHECK(value_diff[1] < (f32 ? 1e-5 : 1e-3));
      CHECK(value_diff[0] < (f32 ? 1e-5 : 1e-3));
      CHECK(key_diff[1] < (f32 ? 1e-4 : 1e-2));                // the re-rotation's rounding (f16: one more rounding)
      CHECK(key_diff[0] > std::max(100 * key_diff[1], 1e-3));  // and without it the keys are wrong
    }
  }
}

TEST_CASE("session api: a model from the caller's memory runs as the file does, with the same checks") {
  std::vector<uint8_t> file;
  REQUIRE(test::read_file(test::model_path("stories260K.gguf"), file));
  // an aligned copy, as a mapping of an asset would be
  void* mem = std::aligned_alloc(64, (file.size() + 63) / 64 * 64);
  REQUIRE(mem);
  std::memcpy(mem, file.data(), file.size());
  std::span<const uint8_t> img(static_cast<const uint8_t*>(mem), file.size());
  auto fm = Model::load(test::model_path("stories260K.gguf"), {.threads = 1});
  auto mm = Model::load_from_memory(img, "stories.gguf", {.threads = 1});
  REQUIRE(fm);
  REQUIRE_MESSAGE(mm, (mm ? "" : mm.error().message));
  CHECK(mm->info().identity == fm->info().identity);
  CHECK(mm->info().path == "stories.gguf");
  auto a = fm->generate("Once upon a time", {.max_tokens = 24});
  auto b = mm->generate("Once upon a time", {.max_tokens = 24});
  REQUIRE((a && b));
  CHECK(a->tokens == b->tokens);
  CHECK(!llminfer::detail::model_impl(*mm).desc->files[0]->owned());
  // read_into_memory copies it: the buffer may go afterwards
  auto cm = Model::load_from_memory(img, "copy.gguf", {.threads = 1, .read_into_memory = true});
  REQUIRE(cm);
  CHECK(llminfer::detail::model_impl(*cm).desc->files[0]->owned());
  // a truncated image gets the message a truncated file gets (naming it)
  test::TempDir dir;
  std::vector<uint8_t> half(file.begin(), file.begin() + std::ptrdiff_t(file.size() / 2));
  REQUIRE(test::write_file(dir.file("half.gguf"), half));
  auto ff = Model::load(dir.file("half.gguf"));
  auto hm = Model::load_from_memory(std::span<const uint8_t>(img.data(), half.size()), "half.gguf");
  REQUIRE(!ff);
  REQUIRE(!hm);
  CHECK(hm.error().code == ff.error().code);
  CHECK(hm.error().message.find("half.gguf") != std::string::npos);
  std::string fmsg = ff.error().message, mmsg = hm.error().message;
  CHECK(fmsg.substr(fmsg.find("half.gguf")) == mmsg.substr(mmsg.find("half.gguf")));
  // not GGUF, misaligned, empty
  std::vector<uint8_t> junk(64, 'x');
  auto j = Model::load_from_memory(junk, "junk.bin");
  REQUIRE(!j);
  CHECK(j.error().message.find("junk.bin") != std::string::npos);
  auto mis = Model::load_from_memory(std::span<const uint8_t>(img.data() + 1, 100), "mis.gguf");
  CHECK(!mis);
  CHECK(!Model::load_from_memory({}, "empty"));
  mm = llminfer::Error{};  // the models go before the buffer
  cm = llminfer::Error{};
  std::free(mem);
}

// ---- the CLI ----

TEST_CASE("cli: run --json has seed_str and kv_bytes; run and chat take --kv-type") {
  std::string model = test::quote(test::model_path("stories260K.gguf"));
  auto r = test::run_cli("run -m " + model + " -p 'Once upon a time' -n 4 --json -t 1 --seed 18446744073709551614");
  REQUIRE(r.status == 0);
  auto j = llminfer::detail::json_parse(r.out, "run --json");
  REQUIRE(j);
  CHECK((*j)["seed_str"].as_string() == "18446744073709551614");
  CHECK((*j)["kv_bytes"].as_int() > 0);
  auto r32 = test::run_cli("run -m " + model + " -p 'Once upon a time' -n 4 --json -t 1 --kv-type f32");
  REQUIRE(r32.status == 0);
  auto j32 = llminfer::detail::json_parse(r32.out, "run --json");
  REQUIRE(j32);
  CHECK((*j32)["kv_bytes"].as_int() == 2 * (*j)["kv_bytes"].as_int());
  CHECK(test::run_cli("run -m " + model + " -p x --kv-type f8").status == 1);
  CHECK(test::run_cli("chat -m " + model + " --kv-type q4 < /dev/null").status == 1);
}

TEST_CASE("cli: chat --save and --load continue the conversation as if it had never stopped") {
  test::TempDir dir;
  std::string model = test::quote(test::model_path(kQwen));
  std::string save = test::quote(dir.file("game.sess"));
  std::string in1 = dir.file("in1.txt"), in2 = dir.file("in2.txt"), in3 = dir.file("in3.txt");
  REQUIRE(test::write_file(in1, std::string("Hello\n")));
  REQUIRE(test::write_file(in2, std::string("Hello again\n")));
  REQUIRE(test::write_file(in3, std::string("Hello\nHello again\n")));
  const std::string flags = " -t 1 --temp 0.8 --seed 3 -n 8 ";
  auto whole = test::run_cli("chat -m " + model + flags + "< " + test::quote(in3));
  REQUIRE(whole.status == 0);
  auto first = test::run_cli("chat -m " + model + flags + "--save " + save + " < " + test::quote(in1));
  REQUIRE(first.status == 0);
  // the second run continues with the next seed, as the whole chat did for its second reply
  const std::string cont = "chat -m " + model + " -t 1 --temp 0.8 --seed 4 -n 8 --load " + save;
  auto second = test::run_cli(cont + " < " + test::quote(in2));
  REQUIRE(second.status == 0);
  CHECK(first.out + second.out == whole.out);
  auto stats = test::run_cli(cont + " --stats < " + test::quote(in2), true);
  CHECK(stats.out.find(" cached)") != std::string::npos);  // the cache came back
  // a damaged file is refused with exit 2
  std::string bad = dir.file("bad.sess");
  REQUIRE(test::write_file(bad, std::string("LLMISESS garbage")));
  auto b = test::run_cli("chat -m " + model + " --load " + test::quote(bad) + " < /dev/null", true);
  CHECK(b.status == 2);
  CHECK(b.out.find("bad.sess") != std::string::npos);
}

TEST_CASE("cli: chat prints the prompt-too-long message and goes on") {
  test::TempDir dir;
  std::string model = test::quote(test::model_path(kQwen));
  std::string in = dir.file("in.txt");
  std::string longmsg;
  for (int i = 0; i < 60; i++) longmsg += "word ";
  REQUIRE(test::write_file(in, longmsg + "\nHi\n"));
  auto r = test::run_cli("chat -m " + model + " -t 1 --temp 0 -n 2 -c 48 < " + test::quote(in), true);
  CHECK(r.status == 0);
  CHECK(r.out.find("the prompt is") != std::string::npos);
  CHECK(r.out.find("context holds 48") != std::string::npos);
}

namespace {

// A one-layer llama whose weights make greedy decoding repeat its input token (the embedding is
// one-hot and the output maps token t to t), with a SentencePiece vocabulary and a chat template
// that refuses a message "bad" and renders a message "slow" for hours (only cancel stops it).
std::string template_model_path() {
  static std::string path;
  if (!path.empty()) return path;
  static test::TempDir dir;
  const char* pieces[] = {"<unk>", "<s>", "</s>", "\xE2\x96\x81hello", "\xE2\x96\x81user", ":", "\xE2\x96\x81x", "a"};
  const int n = 8;
  const std::string tpl =
      "{% for m in messages %}{% if m.content == 'slow' %}{% for i in range(100000) %}{% for j in range(100000) %}"
      "{% endfor %}{% endfor %}{% endif %}{% if m.content == 'bad' %}{{ raise_exception('no bad words') }}{% endif %}"
      "{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}x{% endif %}";
  test::GgufWriter w;
  w.kv_str("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.context_length", 256)
      .kv_u32("llama.embedding_length", n)
      .kv_u32("llama.feed_forward_length", n)
      .kv_u32("llama.attention.head_count", 1)
      .kv_u32("llama.attention.head_count_kv", 1)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f)
      .kv_str("tokenizer.ggml.model", "llama")
      .kv_strs("tokenizer.ggml.tokens", std::vector<std::string>(pieces, pieces + n))
      .kv_u32("tokenizer.ggml.bos_token_id", 1)
      .kv_u32("tokenizer.ggml.eos_token_id", 2)
      .kv_u32("tokenizer.ggml.unknown_token_id", 0)
      .kv_bool("tokenizer.ggml.add_bos_token", true)
      .kv_str("tokenizer.chat_template", tpl);
  std::vector<float> scores(n);
  for (int i = 0; i < n; i++) scores[size_t(i)] = -float(i);
  w.kv_f32s("tokenizer.ggml.scores", scores);
  w.kv_i32s("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1, 1});
  auto zeros = [&] { return std::vector<float>(size_t(n * n), 0.0f); };
  std::vector<float> ones(size_t(n), 1.0f), emb = zeros(), out = zeros();
  for (int t = 0; t < n; t++) {
    emb[size_t(t * n + t)] = 1.0f;
    out[size_t(t * n + t)] = 5.0f;
  }
  const uint64_t N = uint64_t(n);
  w.tensor_f32("token_embd.weight", {N, N}, emb)
      .tensor_f32("output_norm.weight", {N}, ones)
      .tensor_f32("output.weight", {N, N}, out)
      .tensor_f32("blk.0.attn_norm.weight", {N}, ones)
      .tensor_f32("blk.0.attn_q.weight", {N, N}, zeros())
      .tensor_f32("blk.0.attn_k.weight", {N, N}, zeros())
      .tensor_f32("blk.0.attn_v.weight", {N, N}, zeros())
      .tensor_f32("blk.0.attn_output.weight", {N, N}, zeros())
      .tensor_f32("blk.0.ffn_norm.weight", {N}, ones)
      .tensor_f32("blk.0.ffn_gate.weight", {N, N}, zeros())
      .tensor_f32("blk.0.ffn_up.weight", {N, N}, zeros())
      .tensor_f32("blk.0.ffn_down.weight", {N, N}, zeros());
  std::string p = dir.file("template.gguf");
  if (test::write_file(p, w.build())) path = p;
  return path;
}

}  // namespace

TEST_CASE("session api: a refused or cancelled render changes nothing; chat reports it and goes on") {
  auto m = Model::load(template_model_path(), {.threads = 1});
  REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
  auto s = m->session();
  s.add("user", "hello");
  auto r1 = s.reply({.max_tokens = 3});
  REQUIRE(r1);
  int cached = s.cached_tokens();
  s.add("user", "bad");
  auto bad = s.reply({.max_tokens = 3});
  REQUIRE(!bad);
  CHECK(bad.error().message.find("no bad words") != std::string::npos);
  CHECK(s.messages().size() == 3);
  CHECK(s.cached_tokens() == cached);  // the cache is as it was
  REQUIRE(s.replace(2, Message{"user", "slow"}));
  std::atomic<bool> cancel{true};
  auto slow = s.reply({.max_tokens = 3, .cancel = &cancel});
  REQUIRE(!slow);
  CHECK(slow.error().message.find("rendering cancelled") != std::string::npos);
  CHECK(s.messages().size() == 3);
  REQUIRE(s.replace(2, Message{"user", "hello"}));
  auto r2 = s.reply({.max_tokens = 3});
  REQUIRE(r2);
  CHECK(r2->prompt_tokens_reused > 0);
  // the chat: the refused message is reported and leaves the conversation; the next reply is the
  // one a conversation without it gets
  auto fresh = m->session();
  fresh.add("user", "hello");
  auto f1 = fresh.reply({.max_tokens = 3});
  fresh.add("user", "hello");
  auto f2 = fresh.reply({.max_tokens = 3});
  REQUIRE((f1 && f2));
  test::TempDir dir;
  std::string in = dir.file("in.txt");
  REQUIRE(test::write_file(in, std::string("hello\nbad\nhello\n")));
  auto c = test::run_cli("chat -m " + test::quote(template_model_path()) + " -t 1 --temp 0 -n 3 < " + test::quote(in));
  CHECK(c.status == 2);  // an input error happened (reported), though the chat went on
  CHECK(c.out == f1->text + "\n" + f2->text + "\n");
  auto e =
      test::run_cli("chat -m " + test::quote(template_model_path()) + " -t 1 --temp 0 -n 3 < " + test::quote(in), true);
  CHECK(e.out.find("no bad words") != std::string::npos);
  CHECK(e.out.find("the message was not sent") != std::string::npos);
}
