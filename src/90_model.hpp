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
  // sha256 of the weights' metadata (Session::save / load), computed at first use.
  mutable std::once_flag identity_once;
  mutable std::string identity;  // 64 hex digits
  // The vocabulary's prefix tree for grammar masks, built at the first constrained generation.
  mutable std::once_flag vocab_trie_once;
  mutable std::shared_ptr<const VocabTrie> vocab_trie;
};

// The model's identity for saved sessions: what the KV cache depends on. sha256 over the
// architecture and the compiled definition's hash, the vocabulary size, and every tensor's name,
// type, shape and first 64 bytes (two fine-tunes of one shape differ there; one page per tensor
// is read).
inline const std::string& model_identity(const ModelImpl& m) {
  std::call_once(m.identity_once, [&] {
    Sha256 h;
    auto str = [&](std::string_view v) {
      uint64_t n = v.size();
      h.update(&n, 8);
      h.update(v.data(), v.size());
    };
    str("llminfer model identity 1");
    str(m.desc->arch);
    str(m.engine->arch().sha256);
    int64_t nv = m.engine->n_vocab();
    h.update(&nv, 8);
    for (const auto& t : m.desc->tensors) {
      str(t.name);
      int32_t ty = static_cast<int32_t>(t.type);
      h.update(&ty, 4);
      h.update(t.ne, sizeof t.ne);
      h.update(&t.nbytes, 8);
      if (t.data) h.update(t.data, static_cast<size_t>(std::min<uint64_t>(t.nbytes, 64)));
    }
    m.identity = h.hex();
  });
  return m.identity;
}

class ContextIO;

// A reply (or a generation) in progress: the decode loop's view of the context and its steps.
struct ActiveGeneration {
  std::unique_ptr<ContextIO> io;
  std::unique_ptr<Generation> gen;
  GenerateResult base;  // prompt_tokens, reused, shifted, seed, messages_dropped
  size_t prompt_size = 0;
  bool chat_reply = false;  // Session::reply: the reply joins the conversation
  bool done = false;        // the generation ended (the next step reports it)
};

// A conversation: messages, the KV cache (created at the first reply), sampler and RNG.
struct SessionImpl {
  std::shared_ptr<const ModelImpl> model;
  std::vector<Message> messages;
  std::optional<Context> ctx;
  FloatBuf logits;  // [n_vocab] of the last evaluated token (or [n][n_vocab], eval all_logits)
  Sampler sampler;
  Rng rng;
  std::unique_ptr<ActiveGeneration> active;
  GenerateResult last;  // the last reply that ended
  // The conversation was edited since the last reply: only the exact common prefix is reused
  // (shifting later cells would keep what the removed text left in them).
  bool edited = false;
};

}  // namespace detail

namespace detail {
// A model from its description: tokenizer, compiled definition (shared by load and load_from_memory).
inline Result<Model> finish_load(std::shared_ptr<ModelDesc> desc, const LoadOptions& options, double t0,
                                 std::shared_ptr<const ModelImpl>& out) {
  auto impl = std::make_shared<ModelImpl>();
  impl->desc = std::move(desc);
  impl->options = options;
  // A malformed vocabulary is a broken file (the load fails); a missing or unsupported one is reported
  // by tokenize() (the model still runs from token ids).
  if (auto tok = Tokenizer::build(*impl->desc)) {
    impl->tokenizer = std::move(*tok);
  } else {
    if (tok.error().code == Errc::bad_format) return tok.error();
    impl->tokenizer_error = tok.error();
    if (options.log) options.log("tokenizer unavailable: " + tok.error().message);
  }
  // The architecture definition is compiled now: a broken definition, a missing tensor or a weight
  // type the kernels cannot compute fails the load, not the first forward pass.
  auto engine = Engine::create(impl->desc, options);
  if (!engine) return engine.error();
  // A session of this context must fit LoadOptions::max_session_bytes: refused now, not at the
  // first reply (nothing of it is allocated yet).
  if (auto fits = Context::check_size(**engine, 0); !fits) return fits.error();
  impl->engine = std::move(*engine);
  impl->load_ms = now_ms() - t0;
  out = std::move(impl);
  return Model();
}
}  // namespace detail

LLMI_API_DEF Result<Model> Model::load(std::string_view path, const LoadOptions& options) {
  double t0 = detail::now_ms();
#if !defined(LLMINFER_NO_CPU_CHECK)
  if (auto cpu = detail::check_cpu(); !cpu) return cpu.error();
#endif
  auto desc = detail::load_description(std::string(path), options.read_into_memory);
  if (!desc) return desc.error();
  std::shared_ptr<const detail::ModelImpl> impl;
  auto m = detail::finish_load(std::move(*desc), options, t0, impl);
  if (!m) return m.error();
  m->impl_ = std::move(impl);
  return m;
}

LLMI_API_DEF Result<Model> Model::load_from_memory(std::span<const uint8_t> data, std::string_view name,
                                                   const LoadOptions& options) {
  double t0 = detail::now_ms();
#if !defined(LLMINFER_NO_CPU_CHECK)
  if (auto cpu = detail::check_cpu(); !cpu) return cpu.error();
#endif
  auto desc =
      detail::load_description_from_memory(data, std::string(name.empty() ? "memory" : name), options.read_into_memory);
  if (!desc) return desc.error();
  std::shared_ptr<const detail::ModelImpl> impl;
  auto m = detail::finish_load(std::move(*desc), options, t0, impl);
  if (!m) return m.error();
  m->impl_ = std::move(impl);
  return m;
}

// ---- generation on a session's context ----
namespace detail {

// The decode loop's view of a Context and the model's vocabulary.
class ContextIO final : public GenerationIO {
 public:
  // strip_leading: a chat reply drops the leading space SentencePiece vocabularies put on its first
  // piece (as decoding the reply alone does); a continuation keeps it (prompt + text = the whole).
  ContextIO(const ModelImpl& m, Context& ctx, FloatBuf& logits, bool strip_leading)
      : ctx_(ctx), logits_(logits), tok_(m.tokenizer.get()) {
    if (tok_) {
      decoder_.emplace(*tok_, false, strip_leading);
    } else {  // no usable vocabulary: the ids the file names end the generation, no text
      const VocabData& vd = m.desc->vocab;
      for (int32_t id : {vd.eos, vd.eot, vd.eom})
        if (id >= 0) eog_.push_back(id);
    }
  }
  // ContextPolicy::slide is carried out by the Context itself (it shifts the cache), so a full
  // context reported here is final.
  Result<EvalStatus> eval(std::span<const int32_t> tokens, const std::function<bool()>& cancel) override {
    return ctx_.eval(tokens, logits_, false, cancel);
  }
  std::span<const float> logits() const override { return logits_.span(); }
  bool is_eog(int32_t id) const override {
    if (tok_) return tok_->is_eog(id);
    return std::find(eog_.begin(), eog_.end(), id) != eog_.end();
  }
  std::string piece(int32_t id) override { return decoder_ ? decoder_->push(id) : std::string(); }
  std::string flush() override { return decoder_ ? decoder_->flush() : std::string(); }

 private:
  Context& ctx_;
  FloatBuf& logits_;
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

inline bool model_is_eog(const ModelImpl& m, int32_t id) {
  if (m.tokenizer) return m.tokenizer->is_eog(id);
  const VocabData& vd = m.desc->vocab;
  return id >= 0 && (id == vd.eos || id == vd.eot || id == vd.eom);
}

// The structured-output constraint of `o` (grammar / json_schema, logit_bias, banned_tokens), or
// null when it asks for none; a malformed or impossible constraint is an error (before anything
// is evaluated). strip_leading: the reply's text drops the leading space of its first piece.
inline Result<std::unique_ptr<TokenConstraint>> make_constraint(const ModelImpl& m, const GenerateOptions& o,
                                                                bool strip_leading) {
  return TokenConstraint::create(
      m.tokenizer.get(),
      [&m] {
        std::call_once(m.vocab_trie_once, [&m] { m.vocab_trie = VocabTrie::build(*m.tokenizer); });
        return m.vocab_trie;
      },
      o, strip_leading && m.tokenizer ? m.tokenizer->strip_leading_spaces() : 0,
      static_cast<size_t>(m.engine->n_vocab()));
}

inline Result<void> ensure_context(SessionImpl& s) {
  if (s.ctx) return {};
  auto c = Context::create(s.model->engine, 0);
  if (!c) return c.error();
  // the logits of one token, so that evaluating allocates nothing (all_logits grows them, checked)
  if (!s.logits.reserve(static_cast<size_t>(s.model->engine->n_vocab())))
    return make_error(Errc::out_of_memory, "cannot allocate the logits of a session");
  s.ctx.emplace(std::move(*c));
  return {};
}

// Makes the cache hold the longest part of `prompt` it can without evaluating: the common prefix,
// then, with `shift`, runs of cached tokens that equal what the prompt continues with, moved
// down into place with their keys re-rotated (the cells skipped over are dropped: a context
// shift). The last prompt token is always left to evaluate (its logits start the reply).
// Returns the number of prompt tokens held and, in `shifted`, how many of them moved.
inline size_t reuse_cache(Context& ctx, std::span<const int32_t> prompt, bool shift, int& shifted) {
  shifted = 0;
  const std::vector<int32_t>& c = ctx.tokens();
  const size_t limit = prompt.size() - 1;
  const size_t p = std::min(common_prefix(c, prompt), limit);
  if (shift && p < c.size() && p < limit) {
    // Greedy, left to right: a run of at least kMinRun equal tokens (or one that reaches the end
    // of what may be reused) is kept; a cached token that starts none is dropped. Only cached
    // tokens equal to the prompt's are ever kept, so the cache holds exactly the prompt's prefix.
    constexpr size_t kMinRun = 8;
    std::vector<KvMove> moves;
    size_t hc = p, hp = p;
    while (hc < c.size() && hp < limit) {
      size_t n = 0;
      while (hc + n < c.size() && hp + n < limit && c[hc + n] == prompt[hp + n]) n++;
      if (n > 0 && n >= std::min(kMinRun, limit - hp)) {
        moves.push_back(KvMove{static_cast<int>(hc), static_cast<int>(hp), static_cast<int>(n)});
        hc += n;
        hp += n;
      } else {
        hc++;
      }
    }
    if (!moves.empty() && ctx.shift(moves, static_cast<int>(hp))) {
      shifted = static_cast<int>(hp - p);
      return hp;
    }
  }
  if (ctx.truncate(static_cast<int>(p))) return p;
  ctx.clear();
  return 0;
}

// Prepares a generation after `prompt` on the session's context (reusing what the cache holds);
// the steps run it. `chat_reply`: a Session::reply (the reply joins the conversation at the end).
inline Result<void> begin_generation(SessionImpl& s, std::span<const int32_t> prompt, const GenerateOptions& o,
                                     double t_start, bool strip_leading, bool chat_reply, bool allow_shift,
                                     int messages_dropped = 0) {
  if (!s.model) return make_error(Errc::invalid_argument, "generate: the model is not loaded");
  const ModelImpl& m = *s.model;
  if (auto v = validate_generate_options(o); !v) return v.error();
  if (prompt.empty()) return make_error(Errc::invalid_argument, "the prompt is empty (no tokens to start from)");
  // Structured output: a malformed or impossible constraint fails here, before the cache changes.
  auto constraint = make_constraint(m, o, strip_leading);
  if (!constraint) return constraint.error();
  if (auto c = ensure_context(s); !c) return c.error();
  Context& ctx = *s.ctx;
  int shifted = 0;
  size_t reuse = reuse_cache(ctx, prompt, allow_shift && ctx.slides(), shifted);
  auto a = std::make_unique<ActiveGeneration>();
  GenerateResult& r = a->base;
  r.prompt_tokens = static_cast<int>(prompt.size());
  r.prompt_tokens_reused = static_cast<int>(reuse);
  r.tokens_shifted = shifted;
  r.messages_dropped = messages_dropped;
  r.seed = o.seed == random_seed ? fresh_seed() : o.seed;
  s.rng.reseed(r.seed);
  if (m.options.log)
    m.options.log(strf("prefill: %zu tokens (%zu reused from the cache, %d of them shifted)", prompt.size() - reuse,
                       reuse, shifted));
  a->io = std::make_unique<ContextIO>(m, ctx, s.logits, strip_leading);
  a->prompt_size = prompt.size();
  a->chat_reply = chat_reply;
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  std::vector<int32_t> prefill(prompt.begin() + static_cast<std::ptrdiff_t>(reuse), prompt.end());
  a->gen = std::make_unique<Generation>(*a->io, std::move(prefill), std::move(history), o, s.sampler, s.rng, t_start,
                                        256, std::move(*constraint));
  s.last = GenerateResult();
  s.active = std::move(a);
  s.edited = false;
  return {};
}

// The result of the generation that ended: its fields over the prepared ones; a reply joins the
// conversation (unless nothing could be generated for a full context).
inline GenerateResult end_generation(SessionImpl& s) {
  ActiveGeneration& a = *s.active;
  const ModelImpl& m = *s.model;
  Context& ctx = *s.ctx;
  GenerateResult r = std::move(a.base);
  GenerateResult& g = a.gen->result();
  r.text = std::move(g.text);
  r.tokens = std::move(g.tokens);
  r.stop = g.stop;
  r.error = std::move(g.error);
  r.prompt_tokens_evaluated = g.prompt_tokens_evaluated;
  Timings t = g.timings;
  t.load_ms = m.load_ms;
  r.timings = t;
  if (r.stop == StopReason::context_full && r.tokens.empty()) {
    if (a.prompt_size > static_cast<size_t>(ctx.n_ctx()))
      r.error =
          make_error(Errc::invalid_argument,
                     strf("%s: the prompt is %zu tokens but the context holds %d (LoadOptions::context, --context): "
                          "nothing was generated",
                          m.desc->path.c_str(), a.prompt_size, ctx.n_ctx()));
    else
      r.error = make_error(Errc::invalid_argument,
                           strf("%s: the context is full (%d of %d tokens hold the prompt): nothing was generated and "
                                "no reply was added; erase or truncate messages, reset(), or use "
                                "ContextPolicy::slide or a larger LoadOptions::context",
                                m.desc->path.c_str(), ctx.n_past(), ctx.n_ctx()));
  } else if (a.chat_reply) {
    // The reply joins the conversation even when it was cut short (what the user saw), so roles
    // keep alternating for templates that insist on it.
    s.messages.push_back(Message{"assistant", r.text});
  }
  r.peak_rss_mb = peak_rss_mb();
  r.kv_bytes = ctx.kv_bytes();
  s.active.reset();
  s.last = r;
  return r;
}

// One step of the active generation; done (with the result in s.last) after the end.
inline Result<ReplyStep> step_generation(SessionImpl& s) {
  ReplyStep out;
  if (!s.active) return make_error(Errc::invalid_argument, "step: no reply in progress (call begin_reply first)");
  ActiveGeneration& a = *s.active;
  if (!a.done) {
    auto t = a.gen->step();
    if (!t) {
      s.active.reset();
      return t.error();
    }
    out.text = std::move(*t);
    if (a.gen->done()) a.done = true;
    if (!out.text.empty() || !a.done) return out;
  }
  GenerateResult r = end_generation(s);
  out.done = true;
  out.stop = r.stop;
  return out;
}

// Ends a reply in progress as cancelled (before the conversation or the cache changes).
inline void cancel_generation(SessionImpl& s) {
  if (!s.active) return;
  ActiveGeneration& a = *s.active;
  if (!a.done) {
    GenerateResult& g = a.gen->result();
    if (g.stop != StopReason::context_full && g.stop != StopReason::error) g.stop = StopReason::cancelled;
  }
  (void)end_generation(s);
}

// Generates after `prompt` on the session's context, reusing the longest cached prefix.
inline Result<GenerateResult> session_generate(SessionImpl& s, std::span<const int32_t> prompt,
                                               const GenerateOptions& o, double t_start, bool strip_leading,
                                               bool chat_reply = false, bool allow_shift = false,
                                               int messages_dropped = 0) {
  cancel_generation(s);
  if (auto b = begin_generation(s, prompt, o, t_start, strip_leading, chat_reply, allow_shift, messages_dropped); !b)
    return b.error();
  for (;;) {
    auto st = step_generation(s);
    if (!st) return st.error();
    if (st->done) return s.last;
  }
}

}  // namespace detail

namespace detail {

inline Result<const ChatTemplate*> chat_template_of(const ModelImpl& m) {
  if (!m.tokenizer) return m.tokenizer_error;
  std::call_once(m.chat_once, [&] {
    auto tpl = ChatTemplate::parse(chat_template_for(*m.desc).source);
    if (tpl)
      m.chat_template.emplace(std::move(*tpl));
    else
      m.chat_error = make_error(tpl.error().code, m.desc->path + ": " + tpl.error().message);
  });
  if (!m.chat_template) return m.chat_error;
  return &*m.chat_template;
}

// The conversation rendered by the model's chat template (ending with the assistant's turn) and
// tokenized so that message content never becomes control tokens. BOS is added when the model
// asks for it and the template did not write it.
inline Result<std::vector<int32_t>> chat_prompt_tokens(const ModelImpl& m, std::span<const Message> messages,
                                                       const std::atomic<bool>* cancel = nullptr,
                                                       bool add_generation_prompt = true) {
  auto tpl = chat_template_of(m);
  if (!tpl) return tpl.error();
  ChatInput in;
  chat_special_tokens(*m.desc, in);
  in.messages = ChatInput::messages_from(messages);
  in.add_generation_prompt = add_generation_prompt;
  in.cancel = cancel;  // GenerateOptions::cancel stops a long render too
  auto r = (*tpl)->render(in);
  if (!r) return make_error(r.error().code, m.desc->path + ": " + r.error().message);
  auto ids = m.tokenizer->encode_prompt(r->text, r->content_spans, false);
  if (!ids) return ids.error();
  const auto& prefix = m.tokenizer->prefix_ids();
  if (!prefix.empty() && !(ids->size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), ids->begin())))
    ids->insert(ids->begin(), prefix.begin(), prefix.end());
  return ids;
}

// Index of the first message after the leading system message(s).
inline size_t first_turn(const std::vector<Message>& msgs) {
  size_t f = 0;
  while (f < msgs.size() && msgs[f].role == "system") f++;
  return f;
}

// Session::reply's prompt. With ContextPolicy::slide, when the conversation and room for the
// reply do not fit the context, the oldest turns after the system message(s) leave the
// conversation (a turn: a message and the non-"user" messages after it, so the conversation
// still starts with a user message) until they fit; the last user turn always stays.
inline Result<std::vector<int32_t>> reply_prompt(SessionImpl& s, const GenerateOptions& o, int& dropped) {
  const ModelImpl& m = *s.model;
  dropped = 0;
  auto ids = chat_prompt_tokens(m, s.messages, o.cancel);
  if (!ids) return ids.error();
  if (m.options.context_policy != ContextPolicy::slide) return ids;
  if (auto c = ensure_context(s); !c) return c.error();
  Context& ctx = *s.ctx;
  const int n_ctx = ctx.n_ctx();
  const size_t reserve = static_cast<size_t>(o.max_tokens >= 0 ? std::min(o.max_tokens, n_ctx / 2) : n_ctx / 4) + 1;
  std::vector<Message> kept = s.messages;
  while (ids->size() + reserve > static_cast<size_t>(n_ctx)) {
    size_t f = first_turn(kept), e = f + 1;
    while (e < kept.size() && kept[e].role != "user") e++;
    if (e >= kept.size()) break;  // that would drop the turn being replied to
    kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(f), kept.begin() + static_cast<std::ptrdiff_t>(e));
    auto next = chat_prompt_tokens(m, kept, o.cancel);
    if (!next) return next.error();
    dropped += static_cast<int>(e - f);
    ids = std::move(next);
  }
  if (dropped > 0) s.messages = std::move(kept);
  // A slide during the reply keeps the system message(s): the tokens the conversation's
  // rendering shares with theirs alone (at least LoadOptions::keep).
  size_t f = first_turn(s.messages);
  int keep = std::max(0, m.options.keep);
  if (f > 0) {
    auto sys = chat_prompt_tokens(m, std::span<const Message>(s.messages.data(), f), o.cancel, false);
    if (sys) keep = std::max(keep, static_cast<int>(common_prefix(*sys, *ids)));
  }
  ctx.set_keep(keep);
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

LLMI_API_DEF Result<GenerateResult> Model::generate(std::span<const int32_t> prompt_tokens,
                                                    const GenerateOptions& options) const {
  double t0 = detail::now_ms();
  if (!impl_) return detail::make_error(Errc::invalid_argument, "generate: the model is not loaded");
  detail::SessionImpl s;
  s.model = impl_;
  return detail::session_generate(s, prompt_tokens, options, t0, options.chat);
}

LLMI_API_DEF Result<std::vector<int32_t>> Model::tokenize_chat(std::span<const Message> messages,
                                                               bool add_generation_prompt) const {
  if (!impl_) return detail::make_error(Errc::invalid_argument, "tokenize_chat: the model is not loaded");
  return detail::chat_prompt_tokens(*impl_, messages, nullptr, add_generation_prompt);
}

LLMI_API_DEF Result<void> check_generate_options(const GenerateOptions& options) {
  return detail::validate_generate_options(options);
}

LLMI_API_DEF Session Model::session() const {
  auto s = std::make_unique<detail::SessionImpl>();
  s->model = impl_;
  return Session(std::move(s));
}

namespace detail {
LLMI_API_DEF const ModelImpl& model_impl(const Model& m) {
  if (!m.impl_) {
    std::fputs("llminfer: detail::model_impl() on a Model that holds no model (default-constructed or moved from)\n",
               stderr);
    std::abort();
  }
  return *m.impl_;
}
LLMI_API_DEF SessionImpl& session_impl(Session& s) {
  if (!s.impl_) {
    std::fputs("llminfer: detail::session_impl() on a moved-from Session\n", stderr);
    std::abort();
  }
  return *s.impl_;
}
}  // namespace detail

LLMI_API_DEF ModelInfo Model::info() const {
  ModelInfo i;
  if (!impl_) return i;
  const detail::ModelDesc& d = *impl_->desc;
  const detail::Engine& e = *impl_->engine;
  const LoadOptions& o = impl_->options;
  i.path = d.path;
  i.format = detail::file_format_name(d.format);
  i.architecture = d.arch;
  i.name = d.name;
  i.file_bytes = d.file_bytes;
  i.n_params = d.n_params();
  i.n_vocab = e.n_vocab();
  // (no embedding that limits the ids, e.g. only `embed(..., beyond = R)`: every int32 id)
  i.n_input_ids = std::min<int64_t>(e.program().embed_rows, int64_t{INT32_MAX} + 1);
  i.n_ctx_train = static_cast<int>(d.hp.n_ctx_train);
  i.context = e.n_ctx_default();
  i.n_layer = static_cast<int>(d.hp.n_layer);
  i.n_embd = static_cast<int>(d.hp.n_embd);
  i.n_head = static_cast<int>(d.hp.n_head);
  i.n_head_kv = static_cast<int>(d.hp.n_head_kv);
  i.head_dim = static_cast<int>(d.hp.head_dim);
  i.n_ff = static_cast<int>(d.hp.n_ff);
  i.kv_type = o.kv_type;
  i.context_policy = o.context_policy;
  i.kv_bytes = detail::KvCache::planned_bytes(e.program().kv, i.context, std::min(256, i.context), o.kv_type);
  i.kernels = e.kernels().name;
  i.threads = e.pool().size();
  const detail::VocabData& v = d.vocab;
  if (impl_->tokenizer) {
    i.tokenizer = v.model.empty() ? "unknown" : v.model;
    i.add_bos = !impl_->tokenizer->prefix_ids().empty();
    i.eog = impl_->tokenizer->eog_ids();
  } else {
    i.tokenizer_error = impl_->tokenizer_error.message;
    for (int32_t id : {v.eos, v.eot, v.eom})
      if (id >= 0) i.eog.push_back(id);
  }
  i.bos = v.bos;
  i.eos = v.eos;
  i.eot = v.eot;
  i.pad = v.pad;
  i.unk = v.unk;
  i.chat_template = d.has_chat_template;
  i.identity = detail::model_identity(*impl_);
  return i;
}

LLMI_API_DEF double peak_memory_mb() noexcept {
  return detail::peak_rss_mb();
}

LLMI_API_DEF Result<std::vector<int32_t>> Model::tokenize(std::string_view text, bool add_special,
                                                          bool parse_special) const {
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

namespace detail {
inline Error moved_from(const char* what) {
  return make_error(Errc::invalid_argument,
                    strf("%s: the session was moved from (use the Session it was moved to)", what));
}
}  // namespace detail

LLMI_API_DEF void Session::add(std::string_view role, std::string_view content) {
  if (!impl_) return;  // moved from: reply() reports it
  detail::cancel_generation(*impl_);
  impl_->messages.push_back(Message{std::string(role), std::string(content)});
}

LLMI_API_DEF Result<void> Session::begin_reply(const GenerateOptions& options) {
  double t0 = detail::now_ms();
  if (!impl_) return detail::moved_from("reply");
  detail::SessionImpl& s = *impl_;
  detail::cancel_generation(s);
  if (!s.model) return detail::make_error(Errc::invalid_argument, "reply: the model is not loaded");
  if (s.messages.empty())
    return detail::make_error(Errc::invalid_argument, "reply: the conversation is empty (add a message first)");
  if (auto v = detail::validate_generate_options(options); !v) return v.error();
  // Nothing changes before the prompt is known (a template error leaves the session as it was).
  std::vector<Message> before = s.messages;
  int dropped = 0;
  auto ids = detail::reply_prompt(s, options, dropped);
  if (!ids) {
    s.messages = std::move(before);
    return ids.error();
  }
  auto b = detail::begin_generation(s, *ids, options, t0, true, true, !s.edited, dropped);
  if (!b) {
    s.messages = std::move(before);
    return b.error();
  }
  return {};
}

LLMI_API_DEF Result<ReplyStep> Session::step() {
  if (!impl_) return detail::moved_from("step");
  return detail::step_generation(*impl_);
}

LLMI_API_DEF bool Session::replying() const {
  return impl_ && impl_->active;
}

LLMI_API_DEF const GenerateResult& Session::result() const {
  static const GenerateResult none;
  return impl_ ? impl_->last : none;
}

LLMI_API_DEF Result<GenerateResult> Session::reply(const GenerateOptions& options) {
  if (auto b = begin_reply(options); !b) return b.error();
  for (;;) {
    auto st = step();
    if (!st) return st.error();
    if (st->done) return impl_->last;
  }
}

LLMI_API_DEF void Session::reset() {
  if (!impl_) return;
  detail::cancel_generation(*impl_);
  impl_->messages.clear();
  impl_->edited = false;
  if (impl_->ctx) impl_->ctx->clear();
  impl_->logits.clear();
}

LLMI_API_DEF const std::vector<Message>& Session::messages() const {
  static const std::vector<Message> none;
  return impl_ ? impl_->messages : none;
}

LLMI_API_DEF Result<void> Session::erase(size_t index) {
  if (!impl_) return detail::moved_from("erase");
  detail::cancel_generation(*impl_);
  if (index >= impl_->messages.size())
    return detail::make_error(Errc::invalid_argument, detail::strf("erase: no message %zu (the conversation has %zu)",
                                                                   index, impl_->messages.size()));
  impl_->messages.erase(impl_->messages.begin() + static_cast<std::ptrdiff_t>(index));
  impl_->edited = true;
  return {};
}

LLMI_API_DEF Result<void> Session::replace(size_t index, Message message) {
  if (!impl_) return detail::moved_from("replace");
  detail::cancel_generation(*impl_);
  if (index >= impl_->messages.size())
    return detail::make_error(Errc::invalid_argument, detail::strf("replace: no message %zu (the conversation has %zu)",
                                                                   index, impl_->messages.size()));
  impl_->messages[index] = std::move(message);
  impl_->edited = true;
  return {};
}

LLMI_API_DEF Result<void> Session::truncate(size_t count) {
  if (!impl_) return detail::moved_from("truncate");
  detail::cancel_generation(*impl_);
  if (count > impl_->messages.size())
    return detail::make_error(
        Errc::invalid_argument,
        detail::strf("truncate: %zu messages asked, the conversation has %zu", count, impl_->messages.size()));
  impl_->messages.resize(count);
  impl_->edited = true;
  return {};
}

LLMI_API_DEF void Session::set_messages(std::vector<Message> messages) {
  if (!impl_) return;
  detail::cancel_generation(*impl_);
  impl_->messages = std::move(messages);
  impl_->edited = true;
}

LLMI_API_DEF Result<GenerateResult> Session::generate(std::span<const int32_t> prompt, const GenerateOptions& options) {
  double t0 = detail::now_ms();
  if (!impl_) return detail::moved_from("generate");
  // The cache is reused exactly up to the first token that differs (no shifting, which would keep
  // what the removed tokens left in later cells). Afterwards it holds tokens that are not the
  // conversation's rendering: the next reply() reuses only the exact common prefix too, as after
  // a history edit.
  auto r = detail::session_generate(*impl_, prompt, options, t0, options.chat);
  impl_->edited = true;
  return r;
}

LLMI_API_DEF Result<void> Session::eval(std::span<const int32_t> tokens, bool all_logits,
                                        const std::atomic<bool>* cancel) {
  if (!impl_) return detail::moved_from("eval");
  detail::SessionImpl& s = *impl_;
  detail::cancel_generation(s);
  if (!s.model) return detail::make_error(Errc::invalid_argument, "eval: the model is not loaded");
  if (tokens.empty()) return detail::make_error(Errc::invalid_argument, "eval: no tokens");
  if (auto c = detail::ensure_context(s); !c) return c.error();
  std::function<bool()> poll;
  if (cancel) poll = [cancel] { return cancel->load(std::memory_order_relaxed); };
  auto st = s.ctx->eval(tokens, s.logits, all_logits, poll);
  if (!st) return st.error();
  if (*st == detail::EvalStatus::context_full)
    return detail::make_error(Errc::invalid_argument,
                              detail::strf("eval: %zu tokens do not fit: the context holds %d and %d are cached "
                                           "(truncate_tokens, or ContextPolicy::slide)",
                                           tokens.size(), s.ctx->n_ctx(), s.ctx->n_past()));
  if (*st == detail::EvalStatus::cancelled) {
    s.logits.clear();
    return detail::make_error(Errc::invalid_argument, "eval: cancelled (the tokens evaluated before stay cached)");
  }
  return {};
}

LLMI_API_DEF std::span<const float> Session::logits() const {
  if (!impl_) return {};
  return impl_->logits.span();
}

LLMI_API_DEF Result<int32_t> Session::sample(const GenerateOptions& o) {
  if (!impl_) return detail::moved_from("sample");
  detail::SessionImpl& s = *impl_;
  if (!s.model) return detail::make_error(Errc::invalid_argument, "sample: the model is not loaded");
  if (auto v = detail::validate_generate_options(o); !v) return v.error();
  const size_t nv = static_cast<size_t>(s.model->engine->n_vocab());
  if (s.logits.size() < nv)
    return detail::make_error(Errc::invalid_argument, "sample: no logits (evaluate tokens first)");
  // A grammar constrains a whole output, and one token drawn from logits has no "output so far":
  // refused rather than ignored. logit_bias and banned_tokens apply (they need no state).
  if (!o.grammar.empty() || !o.json_schema.empty())
    return detail::make_error(Errc::invalid_argument,
                              "sample: grammar and json_schema constrain a whole reply: use begin_reply/step, reply() "
                              "or Model::generate (sample() applies logit_bias and banned_tokens)");
  std::span<const float> last(s.logits.data() + (s.logits.size() - nv), nv);
  auto constraint = detail::make_constraint(*s.model, o, false);
  if (!constraint) return constraint.error();
  if (*constraint) {
    auto masked = (*constraint)->apply(last);
    if (!masked) return masked.error();
    last = *masked;
  }
  const detail::SamplerParams sp{o.temperature, o.top_k, o.top_p, o.min_p, o.repeat_penalty, o.repeat_last_n};
  static const std::vector<int32_t> none;
  int32_t id = s.sampler.sample(last, s.ctx ? s.ctx->tokens() : none, sp, s.rng);
  if (id < 0)
    return detail::make_error(Errc::internal, "sample: the logits hold no usable value (NaN or -inf everywhere)");
  return id;
}

LLMI_API_DEF void Session::set_seed(uint64_t seed) {
  if (impl_) impl_->rng.reseed(seed == random_seed ? detail::fresh_seed() : seed);
}

LLMI_API_DEF const std::vector<int32_t>& Session::tokens() const {
  static const std::vector<int32_t> none;
  return impl_ && impl_->ctx ? impl_->ctx->tokens() : none;
}

LLMI_API_DEF Result<void> Session::truncate_tokens(int count) {
  if (!impl_) return detail::moved_from("truncate_tokens");
  detail::SessionImpl& s = *impl_;
  detail::cancel_generation(s);
  const int n = s.ctx ? s.ctx->n_past() : 0;
  if (count < 0 || count > n)
    return detail::make_error(Errc::invalid_argument,
                              detail::strf("truncate_tokens: %d asked, %d are cached", count, n));
  if (count == n) return {};
  if (!s.ctx->truncate(count)) {  // a sliding-window ring no longer holds what is kept: evaluate again
    std::vector<int32_t> keep(s.ctx->tokens().begin(), s.ctx->tokens().begin() + count);
    s.ctx->clear();
    if (!keep.empty()) {
      auto st = s.ctx->eval(keep, s.logits);
      if (!st) return st.error();
    }
  }
  s.logits.clear();  // the logits of the new last token are not known without evaluating it
  return {};
}

LLMI_API_DEF bool Session::is_eog(int32_t id) const {
  return impl_ && impl_->model && detail::model_is_eog(*impl_->model, id);
}

LLMI_API_DEF int Session::cached_tokens() const {
  return impl_ && impl_->ctx ? impl_->ctx->n_past() : 0;
}
LLMI_API_DEF int Session::context_size() const {
  if (!impl_ || !impl_->model) return 0;
  return impl_->ctx ? impl_->ctx->n_ctx() : impl_->model->engine->n_ctx_default();
}

}  // namespace v0_1
}  // namespace llminfer
