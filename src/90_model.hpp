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
  // The tokenizer, or why there is none: a model whose vocabulary is missing or unsupported still loads
  // (it can run from token ids); tokenize() then returns `tokenizer_error`.
  std::shared_ptr<const Tokenizer> tokenizer;
  Error tokenizer_error;
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
  if (auto tok = detail::Tokenizer::build(*impl->desc)) {
    impl->tokenizer = std::move(*tok);
  } else {
    if (tok.error().code == Errc::bad_format) return tok.error();  // a malformed vocabulary is a broken file
    impl->tokenizer_error = tok.error();
    if (options.log) options.log("tokenizer unavailable: " + tok.error().message);
  }
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

inline Result<std::vector<int32_t>> Model::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  if (!impl_->tokenizer) return impl_->tokenizer_error;
  return impl_->tokenizer->encode(text, add_special, parse_special);
}

// Valid UTF-8 always: bytes that do not form valid UTF-8 become U+FFFD (as Hugging Face decodes).
inline std::string Model::detokenize(std::span<const int32_t> ids) const {
  if (!impl_->tokenizer) return std::string();
  return detail::utf8_lossy(impl_->tokenizer->decode(ids));
}

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

}  // namespace v0_1
}  // namespace llminfer
