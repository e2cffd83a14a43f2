// ==== Model and Session ====
namespace llminfer {
inline namespace v0_1 {

LLMI_API_DEF const char* to_string(StopReason reason) noexcept {
  switch (reason) {
    case StopReason::eos: return "eos";
    case StopReason::stop: return "stop";
    case StopReason::max_tokens: return "max_tokens";
    case StopReason::cancelled: return "cancelled";
    case StopReason::context_full: return "context_full";
    case StopReason::error: return "error";
  }
  return "error";
}

namespace detail {

struct ModelImpl {
  std::shared_ptr<ModelDesc> desc;
  LoadOptions options;
  double load_ms = 0;
  std::shared_ptr<const Engine> engine;  // the compiled forward pass (shared by every session)
  // The tokenizer, or why there is none: a model whose vocabulary is missing or unsupported still loads
  // (it can run from token ids); tokenize() then returns `tokenizer_error`.
  std::shared_ptr<const Tokenizer> tokenizer;
  Error tokenizer_error;
  // The chat template, parsed at first use (replies, generate with chat).
  mutable std::once_flag chat_once;
  mutable std::optional<ChatTemplate> chat_template;
  mutable Error chat_error;
  // The vocabulary's prefix tree for grammar masks, built at the first constrained generation.
  mutable std::once_flag vocab_trie_once;
  mutable std::shared_ptr<const VocabTrie> vocab_trie;
};

// A conversation: messages, the KV cache (created at the first reply), sampler and RNG.
struct SessionImpl {
  std::shared_ptr<const ModelImpl> model;
  std::vector<Message> messages;
  std::optional<Context> ctx;
  std::vector<float> logits;  // [n_vocab] of the last evaluated token
  Sampler sampler;
  Rng rng;
};

}  // namespace detail

LLMI_API_DEF Result<Model> Model::load(std::string_view path, const LoadOptions& options) {
  double t0 = detail::now_ms();
#if !defined(LLMINFER_NO_CPU_CHECK)
  if (auto cpu = detail::check_cpu(); !cpu) return cpu.error();
#endif
  auto desc = detail::load_description(std::string(path), options.read_into_memory);
  if (!desc) return desc.error();
  auto impl = std::make_shared<detail::ModelImpl>();
  impl->desc = std::move(*desc);
  impl->options = options;
  // A malformed vocabulary is a broken file (the load fails); a missing or unsupported one is reported
  // by tokenize() (the model still runs from token ids).
  if (auto tok = detail::Tokenizer::build(*impl->desc)) {
    impl->tokenizer = std::move(*tok);
  } else {
    if (tok.error().code == Errc::bad_format) return tok.error();
    impl->tokenizer_error = tok.error();
    if (options.log) options.log("tokenizer unavailable: " + tok.error().message);
  }
  // The architecture definition is compiled now: a broken definition, a missing tensor or a weight
  // type the kernels cannot compute fails the load, not the first forward pass.
  auto engine = detail::Engine::create(impl->desc, options);
  if (!engine) return engine.error();
  impl->engine = std::move(*engine);
  impl->load_ms = detail::now_ms() - t0;
  Model m;
  m.impl_ = std::move(impl);
  return m;
}

// ---- generation on a session's context ----
namespace detail {

// The decode loop's view of a Context and the model's vocabulary.
class ContextIO final : public GenerationIO {
 public:
  // strip_leading: a chat reply drops the leading space SentencePiece vocabularies put on its first
  // piece (as decoding the reply alone does); a continuation keeps it (prompt + text = the whole).
  ContextIO(const ModelImpl& m, Context& ctx, std::vector<float>& logits, bool strip_leading)
      : ctx_(ctx), logits_(logits), tok_(m.tokenizer.get()) {
    if (tok_) {
      decoder_.emplace(*tok_, false, strip_leading);
    } else {  // no usable vocabulary: the ids the file names end the generation, no text
      const VocabData& vd = m.desc->vocab;
      for (int32_t id : {vd.eos, vd.eot, vd.eom})
        if (id >= 0) eog_.push_back(id);
    }
  }
  Result<EvalOutcome> eval(std::span<const int32_t> tokens, const std::function<bool()>& cancel) override {
    auto st = ctx_.eval(tokens, logits_, false, cancel);
    if (!st) return st.error();
    return *st == EvalStatus::ok ? EvalOutcome::ok
           : *st == EvalStatus::cancelled ? EvalOutcome::cancelled
                                          : EvalOutcome::context_full;
  }
  std::span<const float> logits() const override { return logits_; }
  // ContextPolicy::slide is carried out by the Context itself (it shifts the cache), so a full
  // context reported here is final.
  Result<EvalOutcome> on_context_full(const std::function<bool()>&) override { return EvalOutcome::context_full; }
  bool is_eog(int32_t id) const override {
    if (tok_) return tok_->is_eog(id);
    return std::find(eog_.begin(), eog_.end(), id) != eog_.end();
  }
  std::string piece(int32_t id) override { return decoder_ ? decoder_->push(id) : std::string(); }
  std::string flush() override { return decoder_ ? decoder_->flush() : std::string(); }

 private:
  Context& ctx_;
  std::vector<float>& logits_;
  const Tokenizer* tok_;
  std::optional<StreamDecoder> decoder_;
  std::vector<int32_t> eog_;
};

inline size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) i++;
  return i;
}

inline uint64_t fresh_seed() {
  std::random_device rd;
  uint64_t s = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(now_ms() * 1000.0);
  return s == random_seed ? 0 : s;
}

// Generates after `prompt` on the session's context, reusing the longest cached prefix.
inline Result<GenerateResult> session_generate(SessionImpl& s, std::span<const int32_t> prompt,
                                               const GenerateOptions& o, double t_start, bool strip_leading) {
  if (!s.model) return make_error(Errc::invalid_argument, "generate: the model is not loaded");
  const ModelImpl& m = *s.model;
  if (auto v = validate_generate_options(o); !v) return v.error();
  if (prompt.empty()) return make_error(Errc::invalid_argument, "the prompt is empty (no tokens to start from)");
  // Structured output: a malformed or impossible constraint fails here, before the prompt runs.
  auto constraint = TokenConstraint::create(
      m.tokenizer.get(),
      [&m] {
        std::call_once(m.vocab_trie_once, [&m] { m.vocab_trie = VocabTrie::build(*m.tokenizer); });
        return m.vocab_trie;
      },
      o, strip_leading && m.tokenizer ? m.tokenizer->strip_leading_spaces() : 0,
      static_cast<size_t>(m.engine->n_vocab()));
  if (!constraint) return constraint.error();
  if (!s.ctx) {
    auto c = Context::create(m.engine, 0);
    if (!c) return c.error();
    s.ctx.emplace(std::move(*c));
  }
  Context& ctx = *s.ctx;
  // Reuse the cached prefix; the last prompt token is always evaluated (its logits start the reply).
  size_t reuse = std::min(common_prefix(ctx.tokens(), prompt), prompt.size() - 1);
  if (!ctx.truncate(static_cast<int>(reuse))) {
    ctx.clear();
    reuse = 0;
  }
  GenerateResult r;
  r.prompt_tokens = static_cast<int>(prompt.size());
  r.prompt_tokens_reused = static_cast<int>(reuse);
  r.seed = o.seed == random_seed ? fresh_seed() : o.seed;
  s.rng.reseed(r.seed);
  if (m.options.log)
    m.options.log(strf("prefill: %zu tokens (%zu reused from the cache)", prompt.size() - reuse, reuse));
  ContextIO io(m, ctx, s.logits, strip_leading);
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  auto run = run_generation(io, prompt.subspan(reuse), std::move(history), o, s.sampler, s.rng, t_start, r,
                            constraint->get());
  if (!run) return run.error();
  if (r.stop == StopReason::context_full && r.tokens.empty() && prompt.size() > static_cast<size_t>(ctx.n_ctx()))
    r.error = make_error(Errc::invalid_argument,
                         strf("%s: the prompt is %zu tokens but the context holds %d (LoadOptions::context, --context): "
                              "nothing was generated",
                              m.desc->path.c_str(), prompt.size(), ctx.n_ctx()));
  r.timings.load_ms = m.load_ms;
  r.peak_rss_mb = peak_rss_mb();
  r.kv_bytes = ctx.kv_bytes();
  return r;
}

}  // namespace detail

namespace detail {

// The conversation rendered by the model's chat template (ending with the assistant's turn) and
// tokenized so that message content never becomes control tokens. BOS is added when the model
// asks for it and the template did not write it.
inline Result<std::vector<int32_t>> chat_prompt_tokens(const ModelImpl& m, std::span<const Message> messages,
                                                       const std::atomic<bool>* cancel = nullptr) {
  if (!m.tokenizer) return m.tokenizer_error;
  std::call_once(m.chat_once, [&] {
    auto tpl = ChatTemplate::parse(chat_template_for(*m.desc).source);
    if (tpl) m.chat_template.emplace(std::move(*tpl));
    else m.chat_error = make_error(tpl.error().code, m.desc->path + ": " + tpl.error().message);
  });
  if (!m.chat_template) return m.chat_error;
  ChatInput in;
  chat_special_tokens(*m.desc, in);
  in.messages = ChatInput::messages_from(messages);
  in.add_generation_prompt = true;
  in.cancel = cancel;  // GenerateOptions::cancel stops a long render too
  auto r = m.chat_template->render(in);
  if (!r) return make_error(r.error().code, m.desc->path + ": " + r.error().message);
  auto ids = m.tokenizer->encode_prompt(r->text, r->content_spans, false);
  if (!ids) return ids.error();
  const auto& prefix = m.tokenizer->prefix_ids();
  if (!prefix.empty() && !(ids->size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), ids->begin())))
    ids->insert(ids->begin(), prefix.begin(), prefix.end());
  return ids;
}

}  // namespace detail

LLMI_API_DEF Result<GenerateResult> Model::generate(std::string_view prompt, const GenerateOptions& options) const {
  double t0 = detail::now_ms();
  if (!impl_) return detail::make_error(Errc::invalid_argument, "generate: the model is not loaded");
  if (!impl_->tokenizer) return impl_->tokenizer_error;
  if (options.chat) {
    std::vector<Message> msgs;
    if (!options.system.empty()) msgs.push_back(Message{"system", options.system});
    msgs.push_back(Message{"user", std::string(prompt)});
    auto ids = detail::chat_prompt_tokens(*impl_, msgs, options.cancel);
    if (!ids) return ids.error();
    detail::SessionImpl s;
    s.model = impl_;
    return detail::session_generate(s, *ids, options, t0, true);
  }
  auto ids = impl_->tokenizer->encode(prompt, true, options.parse_special);
  if (!ids) return ids.error();
  // add_special's EOS (a few vocabularies ask for one) would end the text before it starts
  const auto& suffix = impl_->tokenizer->suffix_ids();
  if (!suffix.empty() && ids->size() > suffix.size() &&
      std::equal(suffix.begin(), suffix.end(), ids->end() - static_cast<std::ptrdiff_t>(suffix.size())))
    ids->resize(ids->size() - suffix.size());
  detail::SessionImpl s;
  s.model = impl_;
  return detail::session_generate(s, *ids, options, t0, false);
}

LLMI_API_DEF Result<GenerateResult> Model::generate(std::span<const int32_t> prompt_tokens, const GenerateOptions& options) const {
  double t0 = detail::now_ms();
  if (!impl_) return detail::make_error(Errc::invalid_argument, "generate: the model is not loaded");
  detail::SessionImpl s;
  s.model = impl_;
  return detail::session_generate(s, prompt_tokens, options, t0, false);
}

LLMI_API_DEF Session Model::session() const {
  auto s = std::make_unique<detail::SessionImpl>();
  s->model = impl_;
  return Session(std::move(s));
}

LLMI_API_DEF const detail::ModelImpl& Model::impl() const {
  if (!impl_) {
    std::fputs("llminfer: Model::impl() on a Model that holds no model (default-constructed or moved from)\n", stderr);
    std::abort();
  }
  return *impl_;
}

LLMI_API_DEF Result<std::vector<int32_t>> Model::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  if (!impl_) return detail::make_error(Errc::invalid_argument, "tokenize: the model is not loaded");
  if (!impl_->tokenizer) return impl_->tokenizer_error;
  return impl_->tokenizer->encode(text, add_special, parse_special);
}

// Valid UTF-8 always: bytes that do not form valid UTF-8 become U+FFFD (as Hugging Face decodes).
LLMI_API_DEF std::string Model::detokenize(std::span<const int32_t> ids) const {
  if (!impl_ || !impl_->tokenizer) return std::string();
  return detail::utf8_lossy(impl_->tokenizer->decode(ids));
}

// The model's own chat template (or the documented ChatML fallback, see chat_template_for).
LLMI_API_DEF Result<std::string> Model::apply_chat_template(std::span<const Message> messages,
                                                            bool add_generation_prompt) const {
  if (!impl_) return detail::make_error(Errc::invalid_argument, "apply_chat_template: the model is not loaded");
  auto src = detail::chat_template_for(*impl_->desc);
  auto tpl = detail::ChatTemplate::parse(src.source);
  if (!tpl) return detail::make_error(tpl.error().code, impl_->desc->path + ": " + tpl.error().message);
  detail::ChatInput in;
  detail::chat_special_tokens(*impl_->desc, in);
  in.messages = detail::ChatInput::messages_from(messages);
  in.add_generation_prompt = add_generation_prompt;
  auto r = tpl->render(in);
  if (!r) return detail::make_error(r.error().code, impl_->desc->path + ": " + r.error().message);
  return std::move(r->text);
}

LLMI_API_DEF Session::Session(std::unique_ptr<detail::SessionImpl> impl) : impl_(std::move(impl)) {}
LLMI_API_DEF Session::Session(Session&&) noexcept = default;
LLMI_API_DEF Session& Session::operator=(Session&&) noexcept = default;
LLMI_API_DEF Session::~Session() = default;

LLMI_API_DEF detail::SessionImpl& Session::impl() {
  if (!impl_) {
    std::fputs("llminfer: Session::impl() on a moved-from Session\n", stderr);
    std::abort();
  }
  return *impl_;
}

LLMI_API_DEF void Session::add(std::string_view role, std::string_view content) {
  if (!impl_) return;  // moved from: reply() reports it
  impl_->messages.push_back(Message{std::string(role), std::string(content)});
}

LLMI_API_DEF Result<GenerateResult> Session::reply(const GenerateOptions& options) {
  double t0 = detail::now_ms();
  if (!impl_) return detail::make_error(Errc::invalid_argument, "reply: the session was moved from (use the Session it was moved to)");
  detail::SessionImpl& s = *impl_;
  if (!s.model) return detail::make_error(Errc::invalid_argument, "reply: the model is not loaded");
  if (s.messages.empty()) return detail::make_error(Errc::invalid_argument, "reply: the conversation is empty (add a message first)");
  auto ids = detail::chat_prompt_tokens(*s.model, s.messages, options.cancel);
  if (!ids) return ids.error();
  auto r = detail::session_generate(s, *ids, options, t0, true);
  if (!r) return r.error();
  // The reply joins the conversation even when it was cut short (what the user saw), so roles
  // keep alternating for templates that insist on it.
  s.messages.push_back(Message{"assistant", r->text});
  return r;
}

LLMI_API_DEF void Session::reset() {
  if (!impl_) return;
  impl_->messages.clear();
  if (impl_->ctx) impl_->ctx->clear();
}

LLMI_API_DEF const std::vector<Message>& Session::messages() const {
  static const std::vector<Message> none;
  return impl_ ? impl_->messages : none;
}
LLMI_API_DEF int Session::cached_tokens() const { return impl_ && impl_->ctx ? impl_->ctx->n_past() : 0; }
LLMI_API_DEF int Session::context_size() const {
  if (!impl_ || !impl_->model) return 0;
  return impl_->ctx ? impl_->ctx->n_ctx() : impl_->model->engine->n_ctx_default();
}

}  // namespace v0_1
}  // namespace llminfer
