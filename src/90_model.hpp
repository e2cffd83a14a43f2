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
  impl->load_ms = detail::now_ms() - t0;
  Model m;
  m.impl_ = std::move(impl);
  return m;
}

inline Result<GenerateResult> Model::generate(std::string_view, const GenerateOptions&) const {
  return detail::make_error(Errc::unsupported, impl_->desc->path + ": text generation is not implemented yet");
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

// The model's own chat template (or the documented ChatML fallback, see chat_template_for).
inline Result<std::string> Model::apply_chat_template(std::span<const Message> messages,
                                                      bool add_generation_prompt) const {
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

}  // namespace v0_1
}  // namespace llminfer
