// Chat prompts, sessions and the chat CLI on the shared models:
// * the token ids of a conversation rendered by each model's own template equal Hugging Face's
//   apply_chat_template(tokenize=True) (goldens tests/data/chat/expected-chat-*.jsonl, made by the
//   tokenizer oracle; see tools/chat-goldens), and special-token text inside messages stays text;
// * the end-of-generation tokens of each model end a generation (stop "eos", the token not kept);
// * a session's second turn evaluates only the tokens not in its cache, and replies exactly as a
//   fresh session given the whole conversation; 4 threads x sessions == the same one by one;
// * `llminfer chat` (/reset, /exit, Ctrl-C stops the reply only) and `run`'s summary line.
#define LLMINFER_IMPLEMENTATION
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "common.hpp"

using llminfer::GenerateOptions;
using llminfer::GenerateResult;
using llminfer::LoadOptions;
using llminfer::Message;
using llminfer::Model;
using llminfer::StopReason;
using llminfer::detail::Json;

namespace {

Model load(const std::string& path, LoadOptions o = {}) {
  if (o.threads == 0) o.threads = 1;
  auto m = Model::load(path, o);
  REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
  return *m;
}

std::vector<Json> read_jsonl(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<Json> rows;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    auto j = llminfer::detail::json_parse(line, path);
    REQUIRE_MESSAGE(j, path);
    rows.push_back(std::move(*j));
  }
  return rows;
}

std::vector<int32_t> ids_of(const Json& a) {
  std::vector<int32_t> v;
  for (const auto& x : a.items) v.push_back(static_cast<int32_t>(x.as_int(-1)));
  return v;
}

// The conversation as role/content messages; false when it needs more (tools, content parts, names).
bool plain_messages(const Json& conv, std::vector<Message>& out) {
  out.clear();
  if (conv.find("tools")) return false;
  for (const auto& m : conv["messages"].items) {
    if (m.size() != 2 || !m["role"].is_string() || !m["content"].is_string()) return false;
    out.push_back(Message{m["role"].str, m["content"].str});
  }
  return true;
}

struct ChatModel {
  const char* variant;  // the oracle's name for its template and tokenizer
  std::string path;
};

std::vector<ChatModel> chat_models() {
  return {{"qwen3", test::model_path("synth-qwen3-tiny-q8_0.gguf")},
          {"llama3", test::model_path("synth-llama-tiny-q8_0.gguf")},
          {"gemma3", test::model_path("synth-gemma3-tiny-q8_0.gguf")},
          {"smollm2", test::model_path("hf/smollm2-tiny/hf-bf16")}};
}

const std::string kChat = "tests/data/chat/";

int count_control(const Model& m, const std::vector<int32_t>& ids) {
  int n = 0;
  for (int32_t id : ids) n += llminfer::detail::model_impl(m).tokenizer->is_control(id) ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("chat prompt: ids equal Hugging Face apply_chat_template(tokenize=True) for each model") {
  std::map<std::string, Json> chats;
  for (auto& c : read_jsonl(kChat + "chats.jsonl")) chats[std::string(c["id"].as_string())] = c;
  for (const auto& cm : chat_models()) {
    CAPTURE(cm.variant);
    Model m = load(cm.path);
    int compared = 0, bad = 0;
    for (const auto& row : read_jsonl(kChat + "expected-chat-" + cm.variant + ".jsonl")) {
      std::string id(row["id"].as_string());
      // the oracle tokenizes message content with special parsing (HF does): compared separately below
      if (!row["add_generation_prompt"].as_bool() || !row.find("ids") || id == "special-text") continue;
      std::vector<Message> msgs;
      if (!plain_messages(chats[id], msgs)) continue;
      auto ids = llminfer::detail::chat_prompt_tokens(llminfer::detail::model_impl(m), msgs);
      REQUIRE_MESSAGE(ids, id);
      compared++;
      if (*ids != ids_of(row["ids"])) {
        bad++;
        MESSAGE(cm.variant << " " << id << ": got " << ids->size() << " ids, wanted " << row["ids"].size());
      }
      // Model::generate with options.chat uses the same prompt
      if (msgs.size() == 1 && msgs[0].role == "user") {
        auto r = m.generate(msgs[0].content, {.max_tokens = 1, .chat = true});
        REQUIRE(r);
        CHECK(r->prompt_tokens == static_cast<int>(ids->size()));
      }
    }
    CHECK(compared >= 12);
    CHECK(bad == 0);
  }
}

TEST_CASE("chat prompt: special-token text inside messages stays text") {
  std::map<std::string, Json> chats;
  for (auto& c : read_jsonl(kChat + "chats.jsonl")) chats[std::string(c["id"].as_string())] = c;
  std::vector<Message> msgs;
  REQUIRE(plain_messages(chats["special-text"], msgs));
  for (const auto& cm : chat_models()) {
    CAPTURE(cm.variant);
    Model m = load(cm.path);
    auto ids = llminfer::detail::chat_prompt_tokens(llminfer::detail::model_impl(m), msgs);
    REQUIRE(ids);
    // the same conversation with harmless content: the template's own control tokens
    std::vector<Message> plain = msgs;
    for (auto& p : plain) p.content = "x";
    auto plain_ids = llminfer::detail::chat_prompt_tokens(llminfer::detail::model_impl(m), plain);
    REQUIRE(plain_ids);
    CHECK(count_control(m, *ids) == count_control(m, *plain_ids));
    // Hugging Face's tokenize=True turns that text into control tokens (so this test can fail)
    for (const auto& row : read_jsonl(kChat + "expected-chat-" + cm.variant + ".jsonl"))
      if (row["id"].as_string() == "special-text" && row["add_generation_prompt"].as_bool())
        CHECK(count_control(m, ids_of(row["ids"])) > count_control(m, *ids));
    // nothing is lost: the ids decode to the rendered prompt
    auto text = m.apply_chat_template(msgs, true);
    REQUIRE(text);
    CHECK(llminfer::detail::model_impl(m).tokenizer->decode(*ids) == *text);
    // the same through the public API: a user message that tries to end its turn
    std::string attack = msgs[0].content;
    auto r = m.generate(attack, {.max_tokens = 1, .chat = true});
    auto rp = m.generate("x", {.max_tokens = 1, .chat = true});
    REQUIRE((r && rp));
    std::vector<Message> one = {{"user", attack}};
    CHECK(r->prompt_tokens ==
          static_cast<int>(llminfer::detail::chat_prompt_tokens(llminfer::detail::model_impl(m), one)->size()));
  }
}

namespace {

// Forces the sampler's choice: from the `after`-th generated token on, only `forced` has a
// finite logit. Everything else is the real model's context, vocabulary and detokenizer.
class ForcingIO final : public llminfer::detail::GenerationIO {
 public:
  ForcingIO(llminfer::detail::GenerationIO& inner, int32_t forced, int after, size_t n_vocab)
      : inner_(inner), after_(after), forced_logits_(n_vocab, -INFINITY) {
    forced_logits_[size_t(forced)] = 0.0f;
  }
  llminfer::Result<llminfer::detail::EvalStatus> eval(std::span<const int32_t> t,
                                                      const std::function<bool()>& c) override {
    return inner_.eval(t, c);
  }
  std::span<const float> logits() const override {
    if (pieces_ >= after_) return forced_logits_;
    return inner_.logits();
  }
  bool is_eog(int32_t id) const override { return inner_.is_eog(id); }
  std::string piece(int32_t id) override {
    pieces_++;
    return inner_.piece(id);
  }
  std::string flush() override { return inner_.flush(); }

 private:
  llminfer::detail::GenerationIO& inner_;
  int after_, pieces_ = 0;
  std::vector<float> forced_logits_;
};

}  // namespace

TEST_CASE("generate: each model's end-of-generation tokens stop the generation") {
  struct Case {
    std::string path;
    std::vector<std::string> eog;      // what the model's own generation_config / template ends a turn with
    std::vector<std::string> not_eog;  // special tokens that must not end it
  };
  std::vector<Case> cases = {
      {test::model_path("synth-qwen3-tiny-q8_0.gguf"), {"<|im_end|>", "<|endoftext|>"}, {"<|im_start|>", "<think>"}},
      {test::model_path("synth-qwen2-tiny-q8_0.gguf"), {"<|im_end|>", "<|endoftext|>"}, {"<|im_start|>"}},
      {test::model_path("synth-llama-tiny-q8_0.gguf"),
       {"<|eot_id|>", "<|end_of_text|>"},  // Llama 3.0's vocabulary (3.1 adds <|eom_id|>)
       {"<|begin_of_text|>", "<|start_header_id|>"}},
      {test::model_path("synth-gemma3-tiny-q8_0.gguf"), {"<end_of_turn>", "<eos>"}, {"<start_of_turn>", "<bos>"}},
      {test::model_path("synth-smollm2-tiny-q8_0.gguf"), {"<|im_end|>", "<|endoftext|>"}, {"<|im_start|>"}},
      {test::model_path("stories260K.gguf"), {"</s>"}, {"<s>"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.path);
    Model m = load(c.path);
    const auto& tok = *llminfer::detail::model_impl(m).tokenizer;
    std::map<std::string, int32_t> by_text;
    for (int32_t id = 0; id < tok.n_vocab(); id++) by_text.emplace(tok.token_text(id), id);
    for (const auto& t : c.not_eog) {
      CAPTURE(t);
      REQUIRE(by_text.count(t));
      CHECK_FALSE(tok.is_eog(by_text[t]));
    }
    auto prompt = m.tokenize("Hello", true);
    REQUIRE(prompt);
    for (const auto& t : c.eog) {
      CAPTURE(t);
      REQUIRE(by_text.count(t));
      int32_t id = by_text[t];
      CHECK(tok.is_eog(id));
      // the loop on the real model: two free tokens, then the end-of-generation token
      auto ctx = llminfer::detail::Context::create(llminfer::detail::model_impl(m).engine, 0);
      REQUIRE(ctx);
      llminfer::detail::FloatBuf logits;
      llminfer::detail::ContextIO inner(llminfer::detail::model_impl(m), *ctx, logits, false);
      ForcingIO io(inner, id, 2, size_t(tok.n_vocab()));
      llminfer::detail::Sampler sampler;
      llminfer::detail::Rng rng(1);
      GenerateResult r;
      GenerateOptions o{.max_tokens = 10};
      auto run = llminfer::detail::run_generation(io, *prompt, *prompt, o, sampler, rng, 0, r);
      REQUIRE(run);
      CHECK(r.stop == StopReason::eos);
      CHECK(r.tokens.size() == 2);
      CHECK(std::find(r.tokens.begin(), r.tokens.end(), id) == r.tokens.end());
      CHECK(r.text.find(t) == std::string::npos);
      // and a special token that is not one of them does not stop it
      ctx->clear();
      llminfer::detail::ContextIO inner2(llminfer::detail::model_impl(m), *ctx, logits, false);
      ForcingIO other(inner2, by_text[c.not_eog[0]], 0, size_t(tok.n_vocab()));
      auto run2 = llminfer::detail::run_generation(other, *prompt, *prompt, {.max_tokens = 3}, sampler, rng, 0, r);
      REQUIRE(run2);
      CHECK(r.stop == StopReason::max_tokens);
      CHECK(r.tokens.size() == 3);
    }
  }
}

namespace {

// Tokens of a conversation as the session would render them (the conversation so far + the
// assistant's turn).
std::vector<int32_t> conversation_ids(const Model& m, const std::vector<Message>& msgs) {
  auto ids = llminfer::detail::chat_prompt_tokens(llminfer::detail::model_impl(m), msgs);
  REQUIRE(ids);
  return *ids;
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) i++;
  return i;
}

}  // namespace

TEST_CASE("session: turn two evaluates only its new tokens and equals a fresh session") {
  for (std::string file : {"synth-qwen3-tiny-q8_0.gguf", "synth-llama-tiny-q8_0.gguf"}) {
    CAPTURE(file);
    Model m = load(test::model_path(file));
    GenerateOptions o{.max_tokens = 6};
    auto s = m.session();
    CHECK(!s.reply(o));  // nothing to reply to
    s.add("system", "You are terse.");
    s.add("user", "Name a colour.");
    auto t1 = s.reply(o);
    REQUIRE(t1);
    CHECK(t1->prompt_tokens_reused == 0);
    CHECK(t1->prompt_tokens_evaluated == t1->prompt_tokens);
    REQUIRE(s.messages().size() == 3);
    CHECK(s.messages()[2].role == "assistant");
    CHECK(s.messages()[2].content == t1->text);
    // the cache: the prompt and the generated tokens (the last one is evaluated with the next turn)
    std::vector<int32_t> cached = conversation_ids(m, {{"system", "You are terse."}, {"user", "Name a colour."}});
    REQUIRE(cached.size() == size_t(t1->prompt_tokens));
    cached.insert(cached.end(), t1->tokens.begin(), t1->tokens.end());
    if (t1->stop == StopReason::max_tokens) cached.pop_back();
    CHECK(s.cached_tokens() == static_cast<int>(cached.size()));

    s.add("user", "Another one?");
    auto t2 = s.reply(o);
    REQUIRE(t2);
    // the second prompt: the conversation without the reply just added
    std::vector<int32_t> whole = conversation_ids(m, {s.messages().begin(), s.messages().end() - 1});
    CHECK(t2->prompt_tokens == static_cast<int>(whole.size()));
    // every token already in the cache is reused; only the rest is evaluated
    size_t reusable = common_prefix(cached, whole);
    CHECK(reusable >= size_t(t1->prompt_tokens));
    CHECK(t2->prompt_tokens_reused == static_cast<int>(reusable));
    CHECK(t2->prompt_tokens_evaluated == t2->prompt_tokens - t2->prompt_tokens_reused);
    if (std::getenv("LLMINFER_VERBOSE"))
      MESSAGE(file << ": turn two " << t2->prompt_tokens << " tokens, " << t2->prompt_tokens_evaluated
                   << " evaluated, reply tokens reused " << reusable - size_t(t1->prompt_tokens) << " of "
                   << t1->tokens.size());

    // a fresh session given the whole conversation says the same
    auto fresh = m.session();
    for (size_t i = 0; i + 1 < s.messages().size(); i++) fresh.add(s.messages()[i].role, s.messages()[i].content);
    auto f = fresh.reply(o);
    REQUIRE(f);
    CHECK(f->prompt_tokens_reused == 0);
    CHECK(f->prompt_tokens == t2->prompt_tokens);
    CHECK(f->tokens == t2->tokens);
    CHECK(f->text == t2->text);

    // reset forgets the conversation and the cache
    s.reset();
    CHECK(s.messages().empty());
    CHECK(s.cached_tokens() == 0);
  }
}

TEST_CASE("session: concurrency: 4 threads with two-turn sessions == the same sessions one after another") {
  Model m = load(test::model_path("synth-qwen3-tiny-q8_0.gguf"), {.threads = 1});
  auto conversation = [&](int i, std::vector<int32_t>& out) -> bool {
    auto s = m.session();
    GenerateOptions o{.max_tokens = 5, .temperature = 0.9f, .top_p = 0.95f, .seed = uint64_t(7 + i)};
    s.add("user", "Question " + std::to_string(i));
    auto a = s.reply(o);
    if (!a) return false;
    s.add("user", "And then?");
    auto b = s.reply(o);
    if (!b) return false;
    out = a->tokens;
    out.push_back(-1);
    out.insert(out.end(), b->tokens.begin(), b->tokens.end());
    return b->prompt_tokens_reused >= a->prompt_tokens;
  };
  std::vector<std::vector<int32_t>> serial(4), parallel(4);
  for (int i = 0; i < 4; i++) REQUIRE(conversation(i, serial[size_t(i)]));
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; i++)
    ts.emplace_back([&, i] {
      if (!conversation(i, parallel[size_t(i)])) failures++;
    });
  for (auto& t : ts) t.join();
  CHECK(failures.load() == 0);
  for (int i = 0; i < 4; i++) {
    CAPTURE(i);
    CHECK(serial[size_t(i)].size() == 11);
    CHECK(parallel[size_t(i)] == serial[size_t(i)]);
  }
  CHECK(serial[0] != serial[1]);
}

TEST_CASE("generate: timings and memory are reported") {
  Model m = load(test::model_path("stories260K.gguf"));
  auto r = m.generate("Once upon a time", {.max_tokens = 40});
  REQUIRE(r);
  REQUIRE(r->tokens.size() == 40);
  const auto& t = r->timings;
  CHECK(t.load_ms > 0);
  CHECK(t.prefill_ms > 0);
  CHECK(t.prefill_tps == doctest::Approx(r->prompt_tokens_evaluated * 1000.0 / t.prefill_ms).epsilon(1e-9));
  CHECK(t.decode_ms > 0);
  CHECK(t.decode_tps == doctest::Approx((r->tokens.size() - 1) * 1000.0 / t.decode_ms).epsilon(1e-9));
  CHECK(t.ttft_ms >= t.prefill_ms);
  CHECK(r->peak_rss_mb >= 1.0);
  CHECK(r->kv_bytes > 0);
}

// ---- the CLI ----
namespace {

// `llminfer ARGS` with pipes on stdin, stdout and stderr, so a test can talk to it and signal it.
struct Child {
  pid_t pid = -1;
  int in = -1, out = -1, err = -1;
  std::string out_text, err_text;

  explicit Child(const std::vector<std::string>& args) {
    // everything the child needs is prepared before fork (the parent has threads: no malloc after it)
    std::string cli = test::cli_path();
    std::vector<std::string> copy = args;
    std::vector<char*> argv;
    argv.push_back(cli.data());
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    int pin[2], pout[2], perr[2];
    if (pipe(pin) || pipe(pout) || pipe(perr)) return;
    pid = fork();
    if (pid == 0) {
      dup2(pin[0], 0);
      dup2(pout[1], 1);
      dup2(perr[1], 2);
      for (int fd : {pin[0], pin[1], pout[0], pout[1], perr[0], perr[1]}) close(fd);
      execv(cli.c_str(), argv.data());
      _exit(127);
    }
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    in = pin[1];
    out = pout[0];
    err = perr[0];
    fcntl(out, F_SETFL, O_NONBLOCK);
    fcntl(err, F_SETFL, O_NONBLOCK);
  }
  void send(const std::string& s) {
    if (write(in, s.data(), s.size()) != ssize_t(s.size())) FAIL_CHECK("cannot write to the child");
  }
  // Reads what is available within `ms`; true when stdout grew. A pipe at its end is closed.
  bool pump(int ms) {
    size_t before = out_text.size();
    pollfd fds[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
    if (out < 0 && err < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      return false;
    }
    if (poll(fds, 2, ms) <= 0) return false;
    for (int* fd : {&out, &err}) {
      if (*fd < 0) continue;
      std::string& dst = fd == &out ? out_text : err_text;
      char buf[4096];
      ssize_t n;
      while ((n = read(*fd, buf, sizeof buf)) > 0) dst.append(buf, size_t(n));
      if (n == 0) {  // end of file
        close(*fd);
        *fd = -1;
      }
    }
    return out_text.size() > before;
  }
  // Closes stdin, reads everything, returns the exit status (-2 after 120 s: killed).
  int finish() {
    if (in >= 0) close(in);
    in = -1;
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    int st = 0;
    while (std::chrono::steady_clock::now() < end) {
      pump(50);
      if (out < 0 && err < 0 && waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -2;
  }
  ~Child() {
    for (int fd : {in, out, err})
      if (fd >= 0) close(fd);
  }
};

std::string strf_cached(int n) {
  return "(" + std::to_string(n) + " cached)";
}

// stderr of `llminfer ARGS` (stdout discarded) and the exit status.
test::CliResult run_cli_stderr(const std::string& args) {
  test::CliResult r;
  FILE* p = popen((test::cli_path() + " " + args + " 2>&1 >/dev/null").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace

TEST_CASE("cli: chat keeps the conversation, /reset forgets it, /exit leaves") {
  // greedy: the replies the library gives for the same conversation, turn by turn
  const std::string path = test::model_path("synth-qwen3-tiny-q8_0.gguf");
  Model m = load(path);
  auto s = m.session();
  s.add("user", "Hello");
  auto r1 = s.reply({.max_tokens = 5});
  s.add("user", "Hello again");
  auto r2 = s.reply({.max_tokens = 5});
  REQUIRE((r1 && r2));
  Child c({"chat", "-m", path, "-t", "1", "--temp", "0", "-n", "5", "--stats"});
  REQUIRE(c.pid > 0);
  c.send("Hello\nHello again\n/reset\nHello\n/bogus\n/exit\nnot read\n");
  CHECK(c.finish() == 0);
  // stdout is not a terminal: no prompts, only the replies, each ended by a newline
  CHECK(c.out_text == r1->text + "\n" + r2->text + "\n" + r1->text + "\n");
  CHECK(c.err_text.find("(conversation reset)") != std::string::npos);
  CHECK(c.err_text.find("unknown command /bogus") != std::string::npos);
  // --stats: one summary per reply; the second reused the first turn from the cache
  CHECK(c.err_text.find(strf_cached(r2->prompt_tokens_reused)) != std::string::npos);
}

TEST_CASE("cli: Ctrl-C stops the chat's reply, not the program") {
  Child c({"chat", "-m", test::model_path("synth-qwen3-tiny-q8_0.gguf"), "-t", "1", "--temp", "0", "-n", "-1", "-c",
           "4096"});
  REQUIRE(c.pid > 0);
  // twice: a stopped reply leaves the program waiting for the next message
  for (int turn = 1; turn <= 2; turn++) {
    CAPTURE(turn);
    size_t before = c.out_text.size();
    c.send(turn == 1 ? "Talk for a long time\n" : "Again\n");
    // wait until the reply streams, then interrupt it
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (c.out_text.size() == before && std::chrono::steady_clock::now() < end) c.pump(20);
    REQUIRE(c.out_text.size() > before);
    kill(c.pid, SIGINT);
    auto wait = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    auto stopped = [&] {
      size_t n = 0;
      for (size_t p = c.err_text.find("(stopped)"); p != std::string::npos; p = c.err_text.find("(stopped)", p + 1))
        n++;
      return n;
    };
    while (stopped() < size_t(turn) && std::chrono::steady_clock::now() < wait) c.pump(20);
    CHECK(stopped() == size_t(turn));
  }
  c.send("/exit\n");
  CHECK(c.finish() == 0);
}

TEST_CASE("cli: run ends with a one-line summary; --chat and --system use the template") {
  std::string model = test::quote(test::model_path("stories260K.gguf"));
  auto r = run_cli_stderr("run -m " + model + " -p 'Once upon a time' -n 12 --temp 0 -t 1");
  CHECK(r.status == 0);
  // "[12 tokens, stop: max_tokens | prompt 5 tokens at X tok/s | decode X tok/s | first token X ms | load X ms |
  //   peak RSS X MiB | seed N]"
  CHECK(r.out.rfind("[12 tokens, stop: max_tokens | prompt 5 tokens at ", 0) == 0);
  for (const char* k : {"| decode ", " tok/s", "| first token ", "| load ", "| peak RSS ", " MiB", "| seed "})
    CHECK_MESSAGE(r.out.find(k) != std::string::npos, k);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
  // --chat --system: the prompt is the template's rendering of the two messages
  std::string qwen = test::quote(test::model_path("synth-qwen3-tiny-q8_0.gguf"));
  auto j = test::run_cli("run -m " + qwen + " --chat --system 'Be brief.' -p 'Hi there' -n 2 --json -t 1");
  REQUIRE(j.status == 0);
  auto parsed = llminfer::detail::json_parse(j.out, "run --json");
  REQUIRE(parsed);
  Model m = load(test::model_path("synth-qwen3-tiny-q8_0.gguf"));
  auto want = llminfer::detail::chat_prompt_tokens(llminfer::detail::model_impl(m),
                                                   std::vector<Message>{{"system", "Be brief."}, {"user", "Hi there"}});
  REQUIRE(want);
  CHECK((*parsed)["prompt_tokens"].as_int() == static_cast<int64_t>(want->size()));
  CHECK(test::run_cli("run -m " + qwen + " --system x -p hi").status == 1);  // --system needs --chat
}
