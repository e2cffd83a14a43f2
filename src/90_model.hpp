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

inline Result<GenerateResult> Model::generate(std::span<const int32_t>, const GenerateOptions&) const {
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
