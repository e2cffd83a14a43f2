// ==== Public tools over a model: chat templates from JSON, logits of ids, batching counters ====
// What the CLI's `template`, `logits`, `compare` and `bench` subcommands need, as public functions
// (the CLI uses nothing else). Each calls the same code the library uses inside, so that their
// results are the library's own (the conformance tests compare `llminfer logits` with llama.cpp).
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// The messages JSON (see Model::render_chat_template) as the template's input.
inline Result<ChatInput> chat_input_from_json(std::string_view messages_json, const ChatTemplateOptions& o) {
  const std::string& name = o.messages_name;
  ChatInput in;
  in.add_generation_prompt = o.add_generation_prompt;
  in.extra.type = Json::Type::object;
  in.cancel = o.cancel;
  auto j = json_parse(messages_json, name);
  if (!j) return j.error();
  if (j->is_array()) {
    in.messages = std::move(*j);
  } else if (j->is_object() && (*j)["messages"].is_array()) {
    in.messages = (*j)["messages"];
    if (const Json* t = j->find("tools"); t && !t->is_null()) in.tools = *t;
    if (const Json* d = j->find("documents"); d && !d->is_null()) in.extra.members.emplace_back("documents", *d);
    if (const Json* kw = j->find("kwargs"); kw && kw->is_object())
      for (const auto& kv : kw->members) in.extra.members.emplace_back(kv.first, kv.second);
  } else {
    return make_error(Errc::invalid_argument,
                      name + ": expected a JSON array of messages or {\"messages\": [...], \"tools\": [...]}");
  }
  for (const auto& m : in.messages.items)
    if (!m.is_object()) return make_error(Errc::invalid_argument, name + ": every message must be a JSON object");
  return in;
}

// Renders `in` with the template of `desc` (nullptr: options.template_source alone).
inline Result<RenderedChat> render_chat_input(const ModelDesc* desc, ChatInput in, const ChatTemplateOptions& o) {
  // the template and the special tokens
  ChatTemplateSource src;
  if (desc) {
    src = chat_template_for(*desc, !in.tools.is_null());
    chat_special_tokens(*desc, in);
  }
  if (!o.template_source.empty()) {
    src.source = o.template_source;
    src.fallback = false;
  } else if (!desc) {
    return make_error(Errc::invalid_argument, "render_chat_template: no model and no template_source");
  }

  // the variables (after the model's values and the kwargs, so they override them)
  for (const auto& [key, raw] : o.variables) {
    if (key.empty())
      return make_error(Errc::invalid_argument, "render_chat_template: a variable has an empty name (value '" +
                                                    printable(raw) + "')");
    Json value;
    if (auto parsed = json_parse(raw, "variable")) {
      value = std::move(*parsed);
    } else {
      value.type = Json::Type::string;
      value.str = raw;
    }
    bool special = false;
    for (auto& st : in.special_tokens)
      if (st.first == key && value.is_string()) {
        st.second = value.str;
        special = true;
      }
    if (special) continue;
    if (key == "tools") {
      in.tools = std::move(value);
      continue;
    }
    bool replaced = false;
    for (auto& m : in.extra.members)
      if (m.first == key) {
        m.second = value;
        replaced = true;
      }
    if (!replaced) in.extra.members.emplace_back(key, std::move(value));
  }

  auto tpl = ChatTemplate::parse(src.source);
  if (!tpl) return tpl.error();
  auto r = tpl->render(in);
  if (!r) return r.error();
  RenderedChat out;
  out.text = std::move(r->text);
  out.content_spans = std::move(r->content_spans);
  out.fallback = src.fallback;
  return out;
}

}  // namespace detail

LLMI_API_DEF Result<RenderedChat> Model::render_chat_template(std::string_view messages_json,
                                                             const ChatTemplateOptions& options) const {
  if (!impl_) return detail::make_error(Errc::invalid_argument, "render_chat_template: the model is not loaded");
  auto in = detail::chat_input_from_json(messages_json, options);
  if (!in) return in.error();
  return detail::render_chat_input(impl_->desc.get(), std::move(*in), options);
}

LLMI_API_DEF Result<std::vector<int32_t>> parse_token_ids(std::string_view text, bool allow_empty) {
  return detail::parse_id_list(text, allow_empty);
}

LLMI_API_DEF Result<RenderedChat> render_chat_template(std::string_view model_path, std::string_view messages_json,
                                                       const ChatTemplateOptions& options) {
  // The messages are checked first: malformed ones are reported before a big model is read.
  auto in = detail::chat_input_from_json(messages_json, options);
  if (!in) return in.error();
  if (model_path.empty()) return detail::render_chat_input(nullptr, std::move(*in), options);
  auto desc = detail::load_description(std::string(model_path));
  if (!desc) return desc.error();
  return detail::render_chat_input(desc->get(), std::move(*in), options);
}

LLMI_API_DEF Result<std::vector<float>> Model::logits(std::span<const int32_t> ids, bool all_positions) const {
  if (!impl_) return detail::make_error(Errc::invalid_argument, "logits: the model is not loaded");
  if (ids.empty()) return detail::make_error(Errc::invalid_argument, "logits: no token ids");
  return detail::logits_of_ids(impl_->engine, ids, all_positions);
}

LLMI_API_DEF BatchStats Model::batch_stats() const {
  BatchStats b;
  if (!impl_) return b;
  const auto s = detail::Batcher::of(*impl_->engine).stats();
  b.steps = s.steps;
  b.shared_steps = s.shared_steps;
  b.sequences = s.chunks;
  return b;
}

}  // namespace v0_1
}  // namespace llminfer
