// ==== Model and Session ====
namespace llminfer {
inline namespace v0_1 {

inline const char* to_string(StopReason reason) noexcept {
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
};

struct SessionImpl {
  std::shared_ptr<const ModelImpl> model;
  std::vector<Message> messages;
};

}  // namespace detail

inline Result<Model> Model::load(std::string_view path, const LoadOptions& options) {
  double t0 = detail::now_ms();
#if !defined(LLMINFER_NO_CPU_CHECK)
  if (auto cpu = detail::check_cpu(); !cpu) return cpu.error();
#endif
  auto desc = detail::load_description(std::string(path));
  if (!desc) return desc.error();
  auto impl = std::make_shared<detail::ModelImpl>();
  impl->desc = std::move(*desc);
  impl->options = options;
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

// Minimal greedy generation by ids (the sampler and sessions replace it): evaluate, argmax.
namespace detail {
inline Result<GenerateResult> greedy_generate(const Model& model, std::span<const int32_t> ids, const GenerateOptions& options) {
  const ModelImpl& impl = model.impl();
  auto ctx = Context::create(impl.engine, 0);
  if (!ctx) return ctx.error();
  GenerateResult res;
  res.prompt_tokens = res.prompt_tokens_evaluated = static_cast<int>(ids.size());
  const VocabData& vd = impl.desc->vocab;
  std::vector<int32_t> stop;
  for (int32_t id : {vd.eos, vd.eot, vd.eom})
    if (id >= 0) stop.push_back(id);
  double t0 = now_ms();
  std::vector<float> logits;
  auto cancelled = [&] { return options.cancel && options.cancel->load(std::memory_order_relaxed); };
  auto st = ctx->eval(ids, logits, false, cancelled);
  if (!st) return st.error();
  res.timings.prefill_ms = now_ms() - t0;
  double t1 = now_ms();
  res.stop = StopReason::max_tokens;
  if (*st == EvalStatus::cancelled) res.stop = StopReason::cancelled;
  if (*st == EvalStatus::context_full) res.stop = StopReason::context_full;
  for (int k = 0; *st == EvalStatus::ok && k < options.max_tokens; k++) {
    int32_t id = argmax_f32(logits.data(), impl.engine->n_vocab());
    if (std::find(stop.begin(), stop.end(), id) != stop.end()) {
      res.stop = StopReason::eos;
      break;
    }
    res.tokens.push_back(id);
    if (options.on_token) {
      std::string piece = model.detokenize(std::span<const int32_t>(&id, 1));
      if (!options.on_token(piece)) {
        res.stop = StopReason::cancelled;
        break;
      }
    }
    if (cancelled()) {
      res.stop = StopReason::cancelled;
      break;
    }
    if (k + 1 == options.max_tokens) break;
    st = ctx->eval(std::span<const int32_t>(&id, 1), logits);
    if (!st) return st.error();
    if (*st == EvalStatus::context_full) res.stop = StopReason::context_full;
  }
  res.timings.decode_ms = now_ms() - t1;
  res.text = model.detokenize(res.tokens);
  res.timings.load_ms = impl.load_ms;
  res.timings.prefill_tps = res.timings.prefill_ms > 0 ? 1000.0 * res.prompt_tokens / res.timings.prefill_ms : 0;
  res.timings.decode_tps = res.timings.decode_ms > 0 ? 1000.0 * double(res.tokens.size()) / res.timings.decode_ms : 0;
  res.timings.ttft_ms = res.timings.prefill_ms;
  res.peak_rss_mb = peak_rss_mb();
  res.kv_bytes = ctx->kv_bytes();
  return res;
}
}  // namespace detail

inline Result<GenerateResult> Model::generate(std::string_view prompt, const GenerateOptions& options) const {
  auto ids = tokenize(prompt, true, true);
  if (!ids) return ids.error();
  return detail::greedy_generate(*this, *ids, options);
}

inline Result<GenerateResult> Model::generate(std::span<const int32_t> prompt_tokens, const GenerateOptions& options) const {
  return detail::greedy_generate(*this, prompt_tokens, options);
}

inline Session Model::session() const {
  auto s = std::make_unique<detail::SessionImpl>();
  s->model = impl_;
  return Session(std::move(s));
}

inline Result<std::vector<int32_t>> Model::tokenize(std::string_view, bool, bool) const {
  return detail::make_error(Errc::unsupported, impl_->desc->path + ": the tokenizer is not implemented yet");
}

inline std::string Model::detokenize(std::span<const int32_t>) const { return std::string(); }

inline Result<std::string> Model::apply_chat_template(std::span<const Message>, bool) const {
  return detail::make_error(Errc::unsupported, impl_->desc->path + ": chat templates are not implemented yet");
}

inline Session::Session(std::unique_ptr<detail::SessionImpl> impl) : impl_(std::move(impl)) {}
inline Session::Session(Session&&) noexcept = default;
inline Session& Session::operator=(Session&&) noexcept = default;
inline Session::~Session() = default;

inline void Session::add(std::string_view role, std::string_view content) {
  impl_->messages.push_back(Message{std::string(role), std::string(content)});
}

inline Result<GenerateResult> Session::reply(const GenerateOptions&) {
  return detail::make_error(Errc::unsupported, "sessions are not implemented yet");
}

inline void Session::reset() { impl_->messages.clear(); }

inline const std::vector<Message>& Session::messages() const { return impl_->messages; }
inline int Session::cached_tokens() const { return 0; }
inline int Session::context_size() const { return impl_->model->options.context; }

}  // namespace v0_1
}  // namespace llminfer
