// ==== Chat templates, part 5: the chat API (ChatInput -> RenderedPrompt) ====
// What a model's template sees, as transformers' apply_chat_template passes it: `messages` (any
// keys pass through), `add_generation_prompt`, the special-token strings, `tools` only when given,
// and extra variables (enable_thinking, documents, ...). Strings from messages, tools and documents
// are untrusted: their bytes in the output are reported in RenderedPrompt::content_spans, so the
// tokenizer never turns text a user typed (say "<|im_end|>") into a control token.
// LLMINFER_NO_TEMPLATES: the interpreter (parts 1-4) is not compiled; ChatTemplate is then a stub
// whose parse() and render() return no_template_interpreter(), so every call that needs a
// template fails with that error (Errc::unsupported) and everything else works as before.
#include <ctime>  // std::tm (ChatInput::clock)

namespace llminfer {
inline namespace v0_1 {
namespace detail {

struct RenderedPrompt {
  std::string text;
  // Byte ranges of `text` copied from message content (sorted, disjoint): tokenize them without
  // special-token parsing.
  std::vector<std::pair<size_t, size_t>> content_spans;
  bool fallback = false;  // rendered with the built-in ChatML template (the model has none)
};

struct ChatInput {
  Json messages;  // an array of message objects ({"role", "content", ...}; content may be a list of parts)
  bool add_generation_prompt = false;
  // Template variables such as {"bos_token", "<s>"}, {"eos_token", "</s>"} (see chat_special_tokens).
  std::vector<std::pair<std::string, std::string>> special_tokens;
  std::optional<std::vector<std::string>> additional_special_tokens;  // tokenizer_config's list, if any
  Json tools;                                                         // null: no `tools` variable at all
  Json extra;  // object: more variables (enable_thinking, documents, ...); untrusted if named "documents"
  std::function<std::tm()> clock;             // strftime_now(); local time when empty (tests fix it)
  uint64_t max_steps = 0;                     // evaluation budget; 0: LLMINFER_JINJA_MAX_STEPS scaled by the input size
  const std::atomic<bool>* cancel = nullptr;  // polled while rendering: set, the render fails ("rendering cancelled")

  // messages from role/content pairs
  static Json messages_from(std::span<const Message> msgs) {
    Json arr;
    arr.type = Json::Type::array;
    for (const auto& m : msgs) {
      Json o;
      o.type = Json::Type::object;
      Json role, content;
      role.type = content.type = Json::Type::string;
      role.str = m.role;
      content.str = m.content;
      o.members.emplace_back("role", std::move(role));
      o.members.emplace_back("content", std::move(content));
      arr.items.push_back(std::move(o));
    }
    return arr;
  }
};

#if !defined(LLMINFER_NO_TEMPLATES)
// Converts JSON to template values; `content` marks every string (keys too) as untrusted text.
inline JValue jinja_from_json(const Json& j, bool content, int depth = 0) {
  switch (j.type) {
    case Json::Type::null: return JValue::none();
    case Json::Type::boolean: return JValue::boolean(j.boolean);
    case Json::Type::number:
      if (j.is_int) return JValue::integer(j.i);
      return JValue::real(j.num);
    case Json::Type::string: return JValue::str(j.str, content);
    case Json::Type::array: {
      std::vector<JValue> items;
      items.reserve(j.items.size());
      for (const auto& x : j.items) items.push_back(jinja_from_json(x, content, depth + 1));
      return JValue::list(std::move(items));
    }
    case Json::Type::object: {
      JValue d;
      d.t = JValue::T::dict;
      d.m = std::make_shared<JDict>();
      // a repeated key: the last one wins, in the first one's place (as Python's json module);
      // found with an index (an object of 100,000 keys would otherwise take quadratic time)
      std::unordered_map<std::string_view, size_t> at;
      for (const auto& kv : j.members) {
        JValue val = jinja_from_json(kv.second, content, depth + 1);
        d.m->depth = std::max(d.m->depth, jv_depth(val) + 1);
        auto [it, fresh] = at.emplace(kv.first, d.m->items.size());
        if (!fresh) {
          d.m->items[it->second].second = std::move(val);
          continue;
        }
        d.m->items.emplace_back(JValue::str(kv.first, content), std::move(val));
      }
      return d;
    }
  }
  return JValue::none();
}
#endif  // !LLMINFER_NO_TEMPLATES

// The built-in template for files without one: ChatML, the same text as transformers' former
// default (`<|im_start|>{role}\n{content}<|im_end|>\n` per message, then `<|im_start|>assistant\n`
// when a generation prompt is asked for). Content given as a list of parts uses its text parts.
inline const char* chat_fallback_template() {
  return "{%- for message in messages -%}"
         "{%- if message['content'] is string -%}{%- set content = message['content'] -%}"
         "{%- else -%}{%- set content = message['content'] | selectattr('type', 'equalto', 'text') | "
         "map(attribute='text')"
         " | join('') -%}{%- endif -%}"
         "{{ '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>' + '\\n' }}"
         "{%- endfor -%}"
         "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}";
}

// What every call that needs a template returns in a build without the interpreter.
inline Error no_template_interpreter() {
  return make_error(Errc::unsupported,
                    "chat templates: this build has no template interpreter (compiled with LLMINFER_NO_TEMPLATES)");
}

#if defined(LLMINFER_NO_TEMPLATES)
// The interpreter is not compiled: the same interface, and nothing renders.
class ChatTemplate {
 public:
  static Result<ChatTemplate> parse(std::string_view) { return no_template_interpreter(); }
  Result<RenderedPrompt> render(const ChatInput&) const { return no_template_interpreter(); }
  Result<RenderedPrompt> render_vars(const Json&, std::function<std::tm()> = {}, uint64_t = 0) const {
    return no_template_interpreter();
  }
  const std::string& source() const {
    static const std::string empty;
    return empty;
  }
  bool uses_strftime() const { return false; }
};
#else
class ChatTemplate {
 public:
  ChatTemplate() = default;

  // Parses a Jinja chat template; errors name the construct and the line:column.
  static Result<ChatTemplate> parse(std::string_view source) {
    auto p = jinja_parse(source);
    if (!p) return p.error();
    ChatTemplate t;
    t.prog_ = std::move(*p);
    return t;
  }

  static uint64_t json_text_bytes(const Json& j) {
    uint64_t n = j.str.size();
    for (const Json& x : j.items) n += json_text_bytes(x);
    for (const auto& kv : j.members) n += kv.first.size() + json_text_bytes(kv.second);
    return n;
  }

  Result<RenderedPrompt> render(const ChatInput& in) const {
    if (!prog_) return make_error(Errc::template_error, "chat template: not parsed");
    if (!in.messages.is_array())
      return make_error(Errc::invalid_argument, "chat template: messages must be a JSON array of message objects");
    auto globals = std::make_shared<JScope>();
    for (const auto& kv : in.special_tokens) globals->set(kv.first, JValue::str(kv.second));
    if (in.additional_special_tokens) {
      std::vector<JValue> items;
      for (const auto& s : *in.additional_special_tokens) items.push_back(JValue::str(s));
      globals->set("additional_special_tokens", JValue::list(std::move(items)));
    }
    globals->set("messages", jinja_from_json(in.messages, true));
    globals->set("add_generation_prompt", JValue::boolean(in.add_generation_prompt));
    if (!in.tools.is_null()) globals->set("tools", jinja_from_json(in.tools, true));
    if (in.extra.is_object())
      for (const auto& kv : in.extra.members)
        globals->set(kv.first, jinja_from_json(kv.second, kv.first == "documents"));
    // the budget grows with the conversation: 10 steps per (message + tool)^2 (templates scan it
    // once per message) and 1 per byte of its text (tests and methods on it cost 1 per 8 bytes)
    uint64_t n = in.messages.size() + in.tools.size();
    uint64_t text = json_text_bytes(in.messages) + json_text_bytes(in.tools) + json_text_bytes(in.extra);
    uint64_t budget = in.max_steps ? in.max_steps
                                   : LLMINFER_JINJA_MAX_STEPS + std::min<uint64_t>(10 * n * n, 100000000ull) +
                                         std::min<uint64_t>(text, 100000000ull);
    return run(globals, in.clock, budget, in.cancel);
  }

  // Renders with arbitrary variables (a JSON object); strings under "messages", "tools" and
  // "documents" are untrusted content. For tests and tools.
  Result<RenderedPrompt> render_vars(const Json& vars, std::function<std::tm()> clock = {},
                                     uint64_t max_steps = LLMINFER_JINJA_MAX_STEPS) const {
    if (!prog_) return make_error(Errc::template_error, "chat template: not parsed");
    auto globals = std::make_shared<JScope>();
    for (const auto& kv : vars.members)
      globals->set(kv.first, jinja_from_json(kv.second,
                                             kv.first == "messages" || kv.first == "tools" || kv.first == "documents"));
    return run(globals, std::move(clock), max_steps);
  }

  const std::string& source() const {
    static const std::string empty;
    return prog_ ? prog_->source : empty;
  }
  bool uses_strftime() const { return prog_ && prog_->uses_strftime; }

 private:
  Result<RenderedPrompt> run(const std::shared_ptr<JScope>& globals, std::function<std::tm()> clock, uint64_t max_steps,
                             const std::atomic<bool>* cancel = nullptr) const {
    JRenderOptions opt;
    opt.clock = std::move(clock);
    opt.max_steps = max_steps;
    opt.cancel = cancel;
    JRender r(*prog_, opt);
    PText out;
    if (!r.run(globals, out)) return make_error(Errc::template_error, r.error);
    RenderedPrompt rp;
    rp.text = std::move(out.s);
    rp.content_spans = std::move(out.spans);
    return rp;
  }

  std::shared_ptr<const JProgram> prog_;
};
#endif  // LLMINFER_NO_TEMPLATES

struct ChatTemplateSource {
  std::string source;
  bool fallback = false;  // the model has no template: this is chat_fallback_template()
};

// The model's chat template (the "tool_use" variant when tools are given and the file has one),
// or the built-in ChatML fallback.
inline ChatTemplateSource chat_template_for(const ModelDesc& m, bool with_tools = false) {
  ChatTemplateSource out;
  if (with_tools) {
    if (auto t = m.meta_string("tokenizer.chat_template.tool_use")) {
      out.source = std::string(*t);
      return out;
    }
    const Json& ct = m.tokenizer_config["chat_template"];
    if (ct.is_array())
      for (const auto& e : ct.items)
        if (e["name"].as_string() == "tool_use" && e["template"].is_string()) {
          out.source = e["template"].str;
          return out;
        }
  }
  if (m.has_chat_template) {
    out.source = m.chat_template;
    return out;
  }
  out.source = chat_fallback_template();
  out.fallback = true;
  return out;
}

// Special-token variables: GGUF files give the vocabulary text of their bos/eos/unk/pad ids;
// Hugging Face directories give tokenizer_config.json's strings (or {"content": ...} objects).
inline void chat_special_tokens(const ModelDesc& m, ChatInput& in) {
  in.special_tokens.clear();
  in.additional_special_tokens.reset();
  if (m.format == FileFormat::gguf) {
    auto add = [&](const char* name, int32_t id) {
      if (id >= 0 && static_cast<size_t>(id) < m.vocab.tokens.size())
        in.special_tokens.emplace_back(name, m.vocab.tokens[static_cast<size_t>(id)]);
    };
    add("bos_token", m.vocab.bos);
    add("eos_token", m.vocab.eos);
    add("unk_token", m.vocab.unk);
    add("sep_token", m.vocab.sep);
    add("pad_token", m.vocab.pad);
    return;
  }
  auto text = [](const Json& v) -> const std::string* {
    if (v.is_string()) return &v.str;
    if (v.is_object() && v["content"].is_string()) return &v["content"].str;
    return nullptr;
  };
  for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"})
    if (const std::string* s = text(m.tokenizer_config[name])) in.special_tokens.emplace_back(name, *s);
  const Json& extra = m.tokenizer_config["additional_special_tokens"];
  if (extra.is_array()) {
    in.additional_special_tokens.emplace();
    for (const auto& e : extra.items)
      if (const std::string* s = text(e)) in.additional_special_tokens->push_back(*s);
  }
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
