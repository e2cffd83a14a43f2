// ==== Public tools: chat templates from JSON, logits, batching counters, model files, tokenizers ====
// What the CLI's subcommands need beyond Model and Session, as public functions (the CLI uses
// nothing else): chat templates rendered from JSON, the logits of ids and their comparison, the
// batcher's counters, a model file inspected without loading it, a tokenizer without weights, the
// architecture definitions and kernels in effect. Each calls the same code the library uses
// inside, so that their results are the library's own (the conformance tests compare `llminfer
// logits` with llama.cpp).
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
      return make_error(Errc::invalid_argument,
                        "render_chat_template: a variable has an empty name (value '" + printable(raw) + "')");
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

// ---- inspect_model_file: metadata values as JSON ----

// A GGUF metadata value as JSON; an array of more than `max` elements (0: no limit) becomes
// {"type": element type, "length": N, "first": [its first `max` elements]}.
inline std::string gguf_value_as_json(const GgufValue& v, uint64_t max) {
  switch (v.type) {
    case GgufType::string: return json_quote(v.as_string());
    case GgufType::boolean: return v.as_bool() ? "true" : "false";
    case GgufType::f32:
    case GgufType::f64: return json_number(v.as_number());
    case GgufType::array: {
      uint64_t n = max ? std::min<uint64_t>(v.len, max) : v.len;
      std::string s = "[";
      for (uint64_t k = 0; k < n; k++) {
        if (k) s += ",";
        if (v.elem == GgufType::string)
          s += json_quote(v.strings[k]);
        else if (v.elem == GgufType::array)
          s += gguf_value_as_json(v.arrays[k], max);
        else if (v.elem == GgufType::f32 || v.elem == GgufType::f64)
          s += json_number(v.number(k));
        else if (v.elem == GgufType::boolean)
          s += v.integer(k) ? "true" : "false";
        else if (v.elem == GgufType::u64)
          s += std::to_string(rd_u64(v.p + 8 * k));  // beyond int64 too
        else
          s += std::to_string(v.integer(k));
      }
      s += "]";
      if (n == v.len) return s;
      return strf("{\"type\":\"%s\",\"length\":%llu,\"first\":", gguf_type_name(v.elem),
                  static_cast<unsigned long long>(v.len)) +
             s + "}";
    }
    case GgufType::u64: return std::to_string(rd_u64(v.p));
    default: return std::to_string(v.as_int());
  }
}

// A JSON value as compact JSON (numbers keep their literal text); an array of more than `max`
// elements (0: no limit) becomes {"length": N, "first": [its first `max` elements]}.
inline std::string json_as_abbreviated_text(const Json& j, uint64_t max) {
  switch (j.type) {
    case Json::Type::null: return "null";
    case Json::Type::boolean: return j.boolean ? "true" : "false";
    case Json::Type::number: return j.str;
    case Json::Type::string: return json_quote(j.str);
    case Json::Type::array: {
      size_t n = max ? static_cast<size_t>(std::min<uint64_t>(j.items.size(), max)) : j.items.size();
      std::string s = "[";
      for (size_t k = 0; k < n; k++) s += (k ? "," : "") + json_as_abbreviated_text(j.items[k], max);
      s += "]";
      if (n == j.items.size()) return s;
      return strf("{\"length\":%zu,\"first\":", j.items.size()) + s + "}";
    }
    case Json::Type::object: {
      std::string s = "{";
      for (size_t k = 0; k < j.members.size(); k++)
        s += (k ? "," : "") + json_quote(j.members[k].first) + ":" + json_as_abbreviated_text(j.members[k].second, max);
      return s + "}";
    }
  }
  return "null";
}

inline ModelFileInfo model_file_info(const ModelDesc& m, const InspectOptions& o) {
  ModelFileInfo f;
  f.path = m.path;
  f.format = file_format_name(m.format);
  f.architecture = m.arch;
  f.name = m.name;
  f.file_bytes = m.file_bytes;
  f.n_params = m.n_params();
  f.n_tensors = m.tensors.size();
  std::map<std::string, uint64_t> types;
  for (const auto& t : m.tensors) {
    f.tensor_bytes += t.nbytes + t.aux_bytes();
    types[dtype_name(t.type)]++;
  }
  f.tensor_types.assign(types.begin(), types.end());
  const HParams& hp = m.hp;
  f.n_layer = hp.n_layer;
  f.n_embd = hp.n_embd;
  f.n_head = hp.n_head;
  f.n_head_kv = hp.n_head_kv;
  f.n_ff = hp.n_ff;
  f.n_ctx_train = hp.n_ctx_train;
  f.head_dim = hp.head_dim;
  f.rope_freq_base = hp.rope_freq_base;
  const VocabData& vd = m.vocab;
  f.tokenizer = vd.model;
  f.tokenizer_pre = vd.pre;
  f.n_vocab = static_cast<int64_t>(vd.tokens.size());
  f.bos = vd.bos;
  f.eos = vd.eos;
  f.eos_ids = vd.eos_ids;
  f.chat_template = m.has_chat_template;
  if (o.metadata) {
    if (m.gguf) {
      for (const auto& e : m.gguf->kv) {
        MetadataEntry me;
        me.key = e.key;
        me.type = gguf_type_name(e.value.type);
        if (e.value.type == GgufType::string) {
          me.value = e.value.as_string();
        } else {
          if (e.value.type == GgufType::array) {
            me.element_type = gguf_type_name(e.value.elem);
            me.length = e.value.len;
          }
          me.value = gguf_value_as_json(e.value, o.max_array_items);
        }
        f.metadata.push_back(std::move(me));
      }
    } else {
      for (auto [source, json] : {std::pair<const char*, const Json*>{"config.json", &m.config},
                                  {"generation_config.json", &m.generation_config}})
        for (const auto& [key, value] : json->members)
          f.metadata.push_back({source, key, "json", "", 0, json_as_abbreviated_text(value, o.max_array_items)});
      for (const auto& [key, value] : m.st_metadata)
        f.metadata.push_back({"__metadata__", key, "string", "", 0, value});
    }
  }
  if (o.tensors) {
    f.tensors.reserve(m.tensors.size());
    for (const auto& t : m.tensors)
      f.tensors.push_back({t.name, dtype_name(t.type), std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.file_offset,
                           t.nbytes + t.aux_bytes()});
  }
  return f;
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

LLMI_API_DEF Result<ModelFileInfo> inspect_model_file(std::string_view path, const InspectOptions& options) {
  auto desc = detail::load_description(std::string(path));
  if (!desc) return desc.error();
  return detail::model_file_info(**desc, options);
}

// ---- a tokenizer without the weights ----
LLMI_API_DEF Result<Tokenizer> Tokenizer::load(std::string_view path) {
  const std::string p(path);
  auto desc = detail::load_description(p);
  if (!desc && detail::is_directory(p) && detail::file_exists(detail::path_join(p, "tokenizer.json")))
    desc = detail::tokenizer_description(p);  // a folder with only the tokenizer files
  if (!desc) return desc.error();
  auto tok = detail::Tokenizer::build(**desc);
  if (!tok) return tok.error();
  Tokenizer t;
  t.impl_ = std::move(*tok);
  return t;
}

LLMI_API_DEF Result<std::vector<int32_t>> Tokenizer::tokenize(std::string_view text, bool add_special,
                                                              bool parse_special) const {
  if (!impl_) return detail::make_error(Errc::invalid_argument, "tokenize: no tokenizer loaded");
  return impl_->encode(text, add_special, parse_special);
}

LLMI_API_DEF std::string Tokenizer::detokenize(std::span<const int32_t> ids, bool skip_special) const {
  if (!impl_) return std::string();
  return detail::utf8_lossy(impl_->decode(ids, skip_special));
}

LLMI_API_DEF int Tokenizer::n_vocab() const noexcept {
  return impl_ ? impl_->n_vocab() : 0;
}

// ---- architecture definitions and kernels ----
LLMI_API_DEF Result<Archdefs> load_archdefs(std::string_view archdef_dir) {
  auto reg = detail::load_arch_registry(std::string(archdef_dir));
  if (!reg) return reg.error();
  Archdefs out;
  out.defs.reserve(reg->defs.size());
  for (const auto& d : reg->defs)
    out.defs.push_back({d->name, d->origin, d->sha256, d->steps_per_layer(), d->text, d->default_conventions_text()});
  for (const auto& f : reg->failed) out.failed.push_back({f.name, f.path, f.error});
  return out;
}

LLMI_API_DEF KernelInfo kernel_info() {
  KernelInfo k;
  k.simd = detail::simd_compiled();
  const std::string levels = detail::kernel_levels_compiled();
  for (size_t i = 0, start = 0; i <= levels.size(); i++)
    if (i == levels.size() || levels[i] == ',') {
      k.levels.push_back(levels.substr(start, i - start));
      start = i + 1;
    }
  // the kernels a model loaded now would run (LLMINFER_KERNELS, else the best level this CPU has)
  auto sel = detail::select_kernels("");
  if (sel)
    k.selected = (*sel)->name;
  else
    k.error = sel.error();
  return k;
}

// ---- logits ----
LLMI_API_DEF Result<LogitsComparison> compare_logits(std::span<const float> ours, std::span<const float> reference,
                                                     int n_vocab) {
  if (n_vocab <= 0) return detail::make_error(Errc::invalid_argument, "compare_logits: n_vocab must be positive");
  if (ours.size() != reference.size() || ours.size() % static_cast<size_t>(n_vocab) != 0)
    return detail::make_error(Errc::invalid_argument,
                              detail::strf("compare_logits: %zu and %zu logits are not the same number of positions of "
                                           "%d",
                                           ours.size(), reference.size(), n_vocab));
  const size_t rows = ours.size() / static_cast<size_t>(n_vocab);
  if (rows > static_cast<size_t>(INT32_MAX))
    return detail::make_error(Errc::invalid_argument, "compare_logits: too many positions");
  return detail::compare_logits(ours.data(), reference.data(), static_cast<int>(rows), n_vocab);
}

LLMI_API_DEF std::vector<int32_t> top_k_ids(std::span<const float> logits, int k) {
  const int n = static_cast<int>(std::min<size_t>(logits.size(), INT32_MAX));
  std::vector<int> ids = detail::top_k_ids(logits.data(), n, k);
  return std::vector<int32_t>(ids.begin(), ids.end());
}

LLMI_API_DEF double logsumexp(std::span<const float> logits) {
  return detail::logsumexp(logits.data(), static_cast<int>(std::min<size_t>(logits.size(), INT32_MAX)));
}

}  // namespace v0_1
}  // namespace llminfer
