// ==== Loader: a path (GGUF file, safetensors file, Hugging Face / MLX directory) -> ModelDesc ====
// Two layers: the *_description() functions build a ModelDesc from bytes already in memory (they
// never touch the file system: tests and fuzz targets call them directly), and load_description()
// maps the files of a path and hands their bytes to them.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

inline bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}
inline bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

inline std::string parent_dir(const std::string& path) {
  size_t p = path.find_last_of("/\\");
  if (p == std::string::npos) return ".";
  if (p == 0) return "/";
  return path.substr(0, p);
}

// "dir/sub/" -> "dir/sub" (so that base_name gives the directory's name).
inline std::string strip_trailing_separators(std::string path) {
  while (path.size() > 1 && (path.back() == '/' || path.back() == '\\')) path.pop_back();
  return path;
}

// Vocabulary from a Hugging Face tokenizer.json: ids, merges, added tokens and their kinds.
// (The tokenizer interprets normalizer / pre-tokenizer / post-processor itself.)
// `file` names tokenizer.json in messages.
inline Result<void> vocab_from_tokenizer_json(ModelDesc& m, const std::string& file) {
  const Json& tj = m.tokenizer_json;
  const Json& model = tj["model"];
  auto bad = [&](const std::string& what) { return make_error(Errc::bad_format, file + ": " + what); };
  if (!model.is_object()) return bad("no \"model\" object");
  std::string_view type = model["type"].as_string();
  if (!type.empty() && type != "BPE")
    return make_error(Errc::unsupported,
                      file + ": tokenizer model type '" + printable(type) + "' is not supported (only BPE)");
  const Json& vocab = model["vocab"];
  if (!vocab.is_object()) return bad("model.vocab is not an object");
  const Json& added = tj["added_tokens"];
  if (!added.is_null() && !added.is_array()) return bad("added_tokens is not an array");
  VocabData& vd = m.vocab;
  // Ids index a table: they must be dense enough that the table stays proportional to the file
  // (real vocabularies are dense; a hole-ridden one would make an attacker-sized allocation).
  const uint64_t entries = vocab.members.size() + added.items.size();
  const int64_t id_limit = static_cast<int64_t>(std::min<uint64_t>(2 * entries + 1024, 1u << 24));
  int64_t max_id = -1;
  for (const auto& [tok, id] : vocab.members) {
    if (!id.is_int || id.i < 0) return bad(strf("token '%s' has an invalid id", printable(tok).c_str()));
    if (id.i >= id_limit)
      return bad(strf("token '%s' has id %lld, far beyond the %llu entries of the vocabulary", printable(tok).c_str(),
                      static_cast<long long>(id.i), static_cast<unsigned long long>(entries)));
    max_id = std::max<int64_t>(max_id, id.i);
  }
  for (const auto& a : added.items) {
    const Json& id = a["id"];
    if (!id.is_int || id.i < 0 || id.i >= id_limit || !a["content"].is_string())
      return bad("an added token has an invalid id or no content");
    max_id = std::max<int64_t>(max_id, id.i);
  }
  size_t n = static_cast<size_t>(max_id + 1);
  vd.tokens.assign(n, std::string());
  vd.types.assign(n, 5);  // unused until seen
  bool byte_fallback = model["byte_fallback"].as_bool(false);
  for (const auto& [tok, id] : vocab.members) {
    auto k = static_cast<size_t>(id.i);
    vd.tokens[k] = tok;
    bool is_byte = byte_fallback && tok.size() == 6 && starts_with(tok, "<0x") && tok[5] == '>';
    vd.types[k] = is_byte ? 6 : 1;
  }
  for (const auto& a : added.items) {
    auto k = static_cast<size_t>(a["id"].i);
    vd.tokens[k] = std::string(a["content"].as_string());
    vd.types[k] = a["special"].as_bool(false) ? 3 : 4;
  }
  for (size_t k = 0; k < n; k++)
    if (vd.types[k] == 5 && vd.tokens[k].empty()) vd.tokens[k] = "[PAD" + std::to_string(k) + "]";
  const Json& merges = model["merges"];
  if (!merges.is_null() && !merges.is_array()) return bad("model.merges is not an array");
  vd.merges.reserve(merges.items.size());
  for (const auto& mg : merges.items) {
    if (mg.is_string()) {
      vd.merges.push_back(mg.str);
    } else if (mg.is_array() && mg.items.size() == 2 && mg.items[0].is_string() && mg.items[1].is_string()) {
      vd.merges.push_back(mg.items[0].str + " " + mg.items[1].str);
    } else {
      return bad("model.merges holds an entry that is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  // SentencePiece-style (Metaspace / "▁" normalizer, byte fallback) or byte-level (GPT-2) BPE
  std::string_view pre_type = tj["pre_tokenizer"]["type"].as_string();
  std::string_view dec_type = tj["decoder"]["type"].as_string();
  bool spm = byte_fallback || pre_type == "Metaspace" || dec_type == "Metaspace";
  if (tj["normalizer"].is_object()) {
    std::string_view nt = tj["normalizer"]["type"].as_string();
    if (nt == "Replace" && tj["normalizer"]["content"].as_string() == "\xE2\x96\x81") spm = true;
    for (const auto& sub : tj["normalizer"]["normalizers"].items)
      if (sub["type"].as_string() == "Replace" && sub["content"].as_string() == "\xE2\x96\x81") spm = true;
  }
  vd.model = spm ? "llama" : "gpt2";
  // special tokens named in tokenizer_config.json ("<s>" or {"content": "<s>", ...})
  auto token_id = [&](const Json& entry) -> int32_t {
    std::string_view s = entry.is_object() ? entry["content"].as_string() : entry.as_string();
    if (s.empty()) return -1;
    for (const auto& a : added.items)
      if (a["content"].as_string() == s) return static_cast<int32_t>(a["id"].i);
    if (const Json* id = vocab.find(s)) return static_cast<int32_t>(id->i);
    return -1;
  };
  const Json& tc = m.tokenizer_config;
  vd.bos = token_id(tc["bos_token"]);
  vd.eos = token_id(tc["eos_token"]);
  vd.unk = token_id(tc["unk_token"]);
  vd.pad = token_id(tc["pad_token"]);
  if (const Json* ab = tc.find("add_bos_token"); ab && ab->is_bool()) vd.add_bos = ab->boolean;
  if (const Json* ae = tc.find("add_eos_token"); ae && ae->is_bool()) vd.add_eos = ae->boolean;
  return {};
}

// bos/eos ids from generation_config.json (preferred: it is what generate() uses) and config.json,
// where tokenizer_config.json named none. eos_token_id may be a number or a list of numbers.
inline void special_ids_from_configs(ModelDesc& m) {
  VocabData& vd = m.vocab;
  const size_t n = vd.tokens.size();
  for (const Json* j : {&m.generation_config, &m.config}) {
    const Json& bos = (*j)["bos_token_id"];
    if (vd.bos < 0 && bos.is_int && bos.i >= 0 && static_cast<uint64_t>(bos.i) < n)
      vd.bos = static_cast<int32_t>(bos.i);
    const Json& eos = (*j)["eos_token_id"];
    if (eos.is_array()) {
      for (const auto& e : eos.items)
        if (e.is_int) add_id_once(vd.eos_ids, e.i, n);
    } else if (eos.is_int) {
      add_id_once(vd.eos_ids, eos.i, n);
    }
  }
  if (vd.eos < 0 && !vd.eos_ids.empty()) vd.eos = vd.eos_ids[0];
  if (vd.eos >= 0 && std::find(vd.eos_ids.begin(), vd.eos_ids.end(), vd.eos) == vd.eos_ids.end())
    vd.eos_ids.insert(vd.eos_ids.begin(), vd.eos);
}

// The JSON side files of a Hugging Face / MLX directory, already read.
struct HfSources {
  std::string dir;          // names the files in messages ("dir/config.json")
  std::string config_text;  // config.json (required)
  std::optional<std::string> tokenizer_json, tokenizer_config, generation_config;
  std::optional<std::string> chat_template_jinja;  // chat_template.jinja
  std::optional<std::string> chat_template_json;   // chat_template.json ({"chat_template": "..."})
  std::optional<std::string> index_json;           // model.safetensors.index.json (sharded models)
};

// One safetensors image: a mapped file, or memory (tests, fuzzing).
struct StImage {
  std::string name;  // path, for messages and TensorView::file
  const uint8_t* data = nullptr;
  uint64_t size = 0;
};

// Chat template of a directory: tokenizer_config.json "chat_template" (a string, or a list of
// {name, template} where "default" is used), else chat_template.json, else chat_template.jinja.
inline Result<void> chat_template_from_sources(ModelDesc& m, const HfSources& src) {
  auto use = [&](std::string t) {
    m.chat_template = std::move(t);
    m.has_chat_template = true;
  };
  const Json& ct = m.tokenizer_config["chat_template"];
  if (ct.is_string()) {
    use(ct.str);
    return {};
  }
  if (ct.is_array()) {
    for (const auto& e : ct.items) {
      if (e["name"].as_string() == "default" && e["template"].is_string()) {
        use(e["template"].str);
        return {};
      }
    }
  }
  if (src.chat_template_json) {
    std::string file = path_join(src.dir, "chat_template.json");
    auto j = json_parse(*src.chat_template_json, file);
    if (!j) return j.error();
    const Json& t = (*j)["chat_template"];
    if (!t.is_string()) return make_error(Errc::bad_format, file + ": no \"chat_template\" string");
    use(t.str);
    return {};
  }
  if (src.chat_template_jinja) use(*src.chat_template_jinja);
  return {};
}

// MLX affine quantization parameters of one weight: config.json "quantization" holds
// {"group_size", "bits"} and optionally per-module overrides keyed by the module's full name
// ("model.layers.0.mlp.down_proj": {"group_size": 32, "bits": 8}, or false for "not quantized").
struct MlxQuant {
  bool present = false;  // the config has a quantization block
  int group = 64, bits = 0;
  std::string mode = "affine";
};

inline Result<MlxQuant> mlx_quant_params(const Json& q, std::string_view module, const std::string& cfg_file) {
  MlxQuant out;
  if (!q.is_object()) return out;
  out.present = true;
  auto read = [&](const Json& obj, const char* where) -> Result<void> {
    if (const Json* g = obj.find("group_size")) {
      if (!g->is_int || (g->i != 32 && g->i != 64 && g->i != 128))
        return make_error(Errc::bad_format, strf("%s: %s group_size must be 32, 64 or 128", cfg_file.c_str(), where));
      out.group = static_cast<int>(g->i);
    }
    if (const Json* b = obj.find("bits")) {
      if (!b->is_int || b->i < 1 || b->i > 8)
        return make_error(Errc::bad_format, strf("%s: %s bits must be 1..8", cfg_file.c_str(), where));
      out.bits = static_cast<int>(b->i);
    }
    if (const Json* mo = obj.find("mode"); mo && mo->is_string()) out.mode = mo->str;
    return {};
  };
  if (auto r = read(q, "quantization"); !r) return r.error();
  if (const Json* o = q.find(module)) {
    if (o->is_bool() && !o->boolean) {
      out.present = false;  // this module is stored unquantized
    } else if (o->is_object()) {
      if (auto r = read(*o, ("quantization of " + printable(module)).c_str()); !r) return r.error();
    }
  }
  return out;
}

// Turns the safetensors tensors into TensorViews with GGUF names, combining MLX triples
// (weight U32 + scales + biases) into one quantized view.
inline Result<void> desc_tensors_from_safetensors(ModelDesc& m, const std::vector<StFile>& files,
                                                  const HfArchInfo& info, const std::string& cfg_file) {
  auto bad = [&](const std::string& what) { return make_error(Errc::bad_format, m.path + ": " + what); };
  const Json& q = m.config.find("quantization") ? m.config["quantization"] : m.config["quantization_config"];
  // all tensors by their (prefix-stripped) Hugging Face name
  std::unordered_map<std::string, const StTensor*> by_name;
  std::vector<std::pair<std::string, const StTensor*>> ordered;
  std::unordered_map<const StTensor*, const StFile*> file_of;
  for (const auto& f : files) {
    for (const auto& t : f.tensors) {
      std::string_view n = t.name;
      for (std::string_view prefix : {"language_model.model.", "model.language_model.", "language_model.", "model."}) {
        if (starts_with(n, prefix)) {
          n.remove_prefix(prefix.size());
          break;
        }
      }
      if (!by_name.emplace(std::string(n), &t).second)
        return bad(strf("tensor '%s' appears twice", printable(t.name).c_str()));
      ordered.emplace_back(std::string(n), &t);
      file_of.emplace(&t, &f);
    }
  }
  // The vision / audio towers of a multimodal checkpoint (Gemma 3n from mlx-vlm or Hugging Face) are
  // listed as stored and never computed with: their MLX triples are not combined nor checked, so
  // that a quantization the text model does not use (other bits, shapes) does not stop the load.
  auto tower = [](std::string_view n) {
    for (std::string_view p :
         {"vision_tower.", "audio_tower.", "embed_vision.", "embed_audio.", "multi_modal_projector."})
      if (starts_with(n, p)) return true;
    return false;
  };
  m.tensors.reserve(ordered.size());
  for (const auto& [hf, t] : ordered) {
    if (!tower(hf) && (ends_with(hf, ".scales") || ends_with(hf, ".biases"))) {
      std::string base = hf.substr(0, hf.size() - 7);
      auto w = by_name.find(base + ".weight");
      if (w != by_name.end() && w->second->type == DType::u32) continue;  // part of an MLX triple
    }
    std::string gname = hf_tensor_name(hf, info);
    if (gname.empty()) gname = hf;  // unknown tensors keep their name (listed, never computed with)
    TensorView v;
    v.name = gname;
    v.type = t->type;
    v.data = t->data;
    v.nbytes = t->nbytes;
    v.file_offset = t->file_offset;
    v.file = file_of[t]->path;
    if (t->shape.size() > 4)
      return bad(strf("tensor '%s' has %zu dimensions (at most 4)", printable(t->name).c_str(), t->shape.size()));
    v.n_dims = static_cast<int>(t->shape.size());
    for (int k = 0; k < v.n_dims; k++) v.ne[k] = t->shape[t->shape.size() - 1 - static_cast<size_t>(k)];
    if (ends_with(hf, ".weight") && t->type == DType::u32 && !tower(hf)) {
      std::string base = hf.substr(0, hf.size() - 7);
      auto si = by_name.find(base + ".scales"), bi = by_name.find(base + ".biases");
      std::string tn = printable(t->name);
      if (si != by_name.end() || bi != by_name.end()) {
        std::string_view module = std::string_view(t->name).substr(0, t->name.size() - 7);
        auto qp = mlx_quant_params(q, module, cfg_file);
        if (!qp) return qp.error();
        if (qp->present && qp->mode != "affine")
          return make_error(Errc::unsupported, strf("%s: MLX tensor '%s' uses quantization mode '%s' (only affine)",
                                                    m.path.c_str(), tn.c_str(), printable(qp->mode).c_str()));
        if (si == by_name.end() || bi == by_name.end())
          return bad(strf("MLX tensor '%s' has %s but no %s", tn.c_str(), si == by_name.end() ? "biases" : "scales",
                          si == by_name.end() ? "scales" : "biases"));
        const StTensor* s = si->second;
        const StTensor* b = bi->second;
        if (v.n_dims != 2 || s->shape.size() != 2 || s->shape != b->shape || s->type != b->type ||
            s->shape[0] != t->shape[0] || (s->type != DType::f16 && s->type != DType::bf16 && s->type != DType::f32))
          return bad(
              strf("MLX tensor '%s': scales/biases do not match the weight (want two [%lld, groups] f16/bf16/f32 "
                   "tensors of one type)",
                   tn.c_str(), static_cast<long long>(t->shape.empty() ? 0 : t->shape[0])));
        const int64_t groups = s->shape[1], words = t->shape[1];
        if (groups <= 0 || words <= 0) return bad(strf("MLX tensor '%s' is empty", tn.c_str()));
        if (groups > INT64_MAX / 1024 || words > INT64_MAX / 32)
          return bad(strf("MLX tensor '%s' has absurd dimensions", tn.c_str()));
        const int group = qp->group;
        int64_t bits = qp->bits;
        // words * 32 packed bits hold groups * group values of `bits` bits each
        if (bits == 0) {  // no bits in the config: infer the width from the shapes
          if ((words * 32) % (groups * group) != 0)
            return bad(strf("MLX tensor '%s': cannot infer its bit width", tn.c_str()));
          bits = words * 32 / (groups * group);
        }
        if (words * 32 != groups * group * bits)
          return bad(
              strf("MLX tensor '%s': %lld words of 32 bits do not hold %lld groups of %d %lld-bit values "
                   "(quantization in %s)",
                   tn.c_str(), static_cast<long long>(words), static_cast<long long>(groups), group,
                   static_cast<long long>(bits), cfg_file.c_str()));
        if (bits != 4 && bits != 8)
          return make_error(Errc::unsupported,
                            strf("%s: MLX tensor '%s' is %lld-bit; only 4- and 8-bit affine quantization is supported",
                                 m.path.c_str(), tn.c_str(), static_cast<long long>(bits)));
        v.type = bits == 4 ? DType::mlx_q4 : DType::mlx_q8;
        v.ne[0] = groups * group;
        v.scales = s->data;
        v.biases = b->data;
        v.aux_type = s->type;
        v.group_size = group;
      }
    }
    m.tensors.push_back(std::move(v));
  }
  return {};
}

// A sharded model's index must agree with its shards: every tensor it lists is in the shard it
// names, and every tensor of a shard is listed.
inline Result<void> check_shard_index(const Json& weight_map, const std::vector<StFile>& files,
                                      const std::string& index_file) {
  std::unordered_map<std::string_view, std::string_view> shard_of;  // tensor -> shard base name
  for (const auto& f : files) {
    std::string_view shard = f.path;
    if (size_t p = shard.find_last_of("/\\"); p != std::string_view::npos) shard.remove_prefix(p + 1);
    for (const auto& t : f.tensors) shard_of.emplace(t.name, shard);
  }
  for (const auto& [tensor, file] : weight_map.members) {
    auto it = shard_of.find(tensor);
    if (it == shard_of.end() || it->second != file.str)
      return make_error(Errc::bad_format,
                        strf("%s: tensor '%s' is not in %s, where the index puts it", index_file.c_str(),
                             printable(tensor).c_str(), printable(file.str).c_str()));
  }
  if (shard_of.size() != weight_map.members.size()) {
    for (const auto& [tensor, shard] : shard_of)
      if (!weight_map.find(tensor))
        return make_error(Errc::bad_format,
                          strf("%s: shard %s holds tensor '%s', which the index does not list", index_file.c_str(),
                               printable(shard).c_str(), printable(tensor).c_str()));
  }
  return {};
}

// The shard file names of model.safetensors.index.json (in the order first named), validated.
inline Result<std::vector<std::string>> shard_names(const Json& index, const std::string& index_file) {
  const Json& wm = index["weight_map"];
  if (!wm.is_object()) return make_error(Errc::bad_format, index_file + ": no weight_map object");
  std::vector<std::string> out;
  for (const auto& [tensor, file] : wm.members) {
    if (!file.is_string() || file.str.empty() || file.str.find('/') != std::string::npos ||
        file.str.find('\\') != std::string::npos || file.str == "." || file.str == ".." || !utf8_valid(file.str))
      return make_error(Errc::bad_format, strf("%s: tensor '%s' maps to an invalid file name", index_file.c_str(),
                                               printable(tensor).c_str()));
    if (std::find(out.begin(), out.end(), file.str) == out.end()) out.push_back(file.str);
  }
  if (out.empty()) return make_error(Errc::bad_format, index_file + ": the weight_map is empty");
  return out;
}

// A safetensors model from memory: `path` names it (as the user gave it), `src` holds the side
// files, `images` the weights (for a sharded model, one per shard, named by their paths).
inline Result<std::shared_ptr<ModelDesc>> safetensors_description(const std::string& path, const HfSources& src,
                                                                  const std::vector<StImage>& images) {
  auto m = std::make_shared<ModelDesc>();
  m->path = path;
  m->format = FileFormat::safetensors;
  m->name = base_name(strip_trailing_separators(src.dir == "." ? path : src.dir));
  const std::string cfg_file = path_join(src.dir, "config.json");
  auto cfg = json_parse(src.config_text, cfg_file);
  if (!cfg) return cfg.error();
  if (!cfg->is_object()) return make_error(Errc::bad_format, cfg_file + ": not a JSON object");
  m->config = std::move(*cfg);
  for (auto [file, text, slot] : {std::tuple<const char*, const std::optional<std::string>*, Json*>{
                                      "tokenizer.json", &src.tokenizer_json, &m->tokenizer_json},
                                  {"tokenizer_config.json", &src.tokenizer_config, &m->tokenizer_config},
                                  {"generation_config.json", &src.generation_config, &m->generation_config}}) {
    if (!*text) continue;
    auto j = json_parse(**text, path_join(src.dir, file));
    if (!j) return j.error();
    if (!j->is_object()) return make_error(Errc::bad_format, path_join(src.dir, file) + ": not a JSON object");
    *slot = std::move(*j);
  }
  const HfArchInfo* info = nullptr;
  if (auto r = desc_meta_from_config(*m, info); !r) return r.error();
  std::vector<StFile> parsed;
  parsed.reserve(images.size());
  for (const auto& img : images) {
    auto st = safetensors_parse(img.data, img.size, img.name);
    if (!st) return st.error();
    m->file_bytes += img.size;
    for (auto& kv : st->metadata) m->st_metadata.push_back(kv);
    parsed.push_back(std::move(*st));
  }
  if (src.index_json) {
    const std::string index_file = path_join(src.dir, "model.safetensors.index.json");
    auto index = json_parse(*src.index_json, index_file);
    if (!index) return index.error();
    if (auto names = shard_names(*index, index_file); !names) return names.error();
    if (auto r = check_shard_index((*index)["weight_map"], parsed, index_file); !r) return r.error();
  }
  if (auto r = desc_tensors_from_safetensors(*m, parsed, *info, cfg_file); !r) return r.error();
  desc_index(*m);
  if (m->tokenizer_json.is_object())
    if (auto r = vocab_from_tokenizer_json(*m, path_join(src.dir, "tokenizer.json")); !r) return r.error();
  special_ids_from_configs(*m);
  if (auto r = chat_template_from_sources(*m, src); !r) return r.error();
  m->hf_qk_order = true;
  // Gemma stores norms as w - 1 (GGUF stores w): the offset is added when a definition reads them
  // (convention hf_norm_offset; this table is its default).
  m->hf_norm_offset = info->norm_plus_one ? 1.0f : 0.0f;
  if (auto r = desc_hparams(*m); !r) return r.error();
  if (m->find_meta("general.tie_word_embeddings") && m->meta_number("general.tie_word_embeddings").value_or(0) == 0 &&
      m->hp.tied_embeddings)
    return make_error(Errc::tensor_missing,
                      path + ": config.json says the embeddings are not tied, but lm_head.weight is missing");
  return m;
}

// A GGUF model from memory (the bytes must outlive the description).
inline Result<std::shared_ptr<ModelDesc>> gguf_description(const uint8_t* data, uint64_t size,
                                                           const std::string& name) {
  auto g = gguf_parse(data, size, name);
  if (!g) return g.error();
  auto m = std::make_shared<ModelDesc>();
  m->path = name;
  m->format = FileFormat::gguf;
  m->file_bytes = size;
  m->gguf = std::move(*g);
  if (auto r = desc_from_gguf(*m, data, name); !r) return r.error();
  desc_index(*m);
  if (auto r = desc_hparams(*m); !r) return r.error();
  return m;
}

// ---- the file system side ----

// Maps the file, or with `read` reads it into owned memory (LoadOptions::read_into_memory).
inline Result<std::shared_ptr<MappedFile>> map_file(const std::string& path, bool read = false) {
  auto f = read ? MappedFile::read(path) : MappedFile::open(path);
  if (!f) return f.error();
  return std::make_shared<MappedFile>(std::move(*f));
}

// A small text file of a model directory (mapped, then copied: these are kilobytes to tens of MB).
inline Result<std::optional<std::string>> read_optional_file(const std::string& path) {
  if (!file_exists(path)) return std::optional<std::string>();
  auto f = MappedFile::open(path);
  if (!f) return f.error();
  return std::optional<std::string>(std::string(f->view()));
}

// A safetensors model: `dir` holds config.json (and tokenizer files); `weights` are the files
// (nullopt: find them in `dir`: the index's shards, model.safetensors, or every *.safetensors).
inline Result<std::shared_ptr<ModelDesc>> load_safetensors_model(const std::string& path, const std::string& dir,
                                                                 std::optional<std::string> single_file,
                                                                 bool read_into_memory = false) {
  HfSources src;
  src.dir = dir;
  std::string cfg_path = path_join(dir, "config.json");
  if (!file_exists(cfg_path))
    return make_error(Errc::bad_format, path + ": no config.json beside the safetensors weights");
  auto cfg = read_optional_file(cfg_path);
  if (!cfg) return cfg.error();
  src.config_text = std::move(**cfg);
  for (auto [file, slot] : {std::pair<const char*, std::optional<std::string>*>{"tokenizer.json", &src.tokenizer_json},
                            {"tokenizer_config.json", &src.tokenizer_config},
                            {"generation_config.json", &src.generation_config},
                            {"chat_template.jinja", &src.chat_template_jinja},
                            {"chat_template.json", &src.chat_template_json}}) {
    auto t = read_optional_file(path_join(dir, file));
    if (!t) return t.error();
    *slot = std::move(*t);
  }
  std::vector<std::string> weights;
  if (single_file) {
    weights.push_back(*single_file);
  } else {
    std::string index = path_join(dir, "model.safetensors.index.json");
    if (file_exists(index)) {
      auto text = read_optional_file(index);
      if (!text) return text.error();
      src.index_json = std::move(*text);
      auto j = json_parse(*src.index_json, index);
      if (!j) return j.error();
      auto names = shard_names(*j, index);
      if (!names) return names.error();
      for (const auto& n : *names) {
        std::string p = path_join(dir, n);
        if (!file_exists(p)) return make_error(Errc::io, index + ": shard " + printable(n) + " is missing");
        weights.push_back(p);
      }
    } else if (std::string single = path_join(dir, "model.safetensors"); file_exists(single)) {
      weights.push_back(single);
    } else {
      for (const auto& name : list_directory(dir))
        if (ends_with(name, ".safetensors")) weights.push_back(path_join(dir, name));
      if (weights.empty())
        return make_error(Errc::io, dir +
                                        ": no model.safetensors, model.safetensors.index.json or *.safetensors "
                                        "file in this directory (for a GGUF model, give the .gguf file itself)");
    }
  }
  std::vector<std::shared_ptr<MappedFile>> mapped;
  std::vector<StImage> images;
  for (const auto& w : weights) {
    auto f = map_file(w, read_into_memory);
    if (!f) return f.error();
    images.push_back(StImage{w, (*f)->data(), (*f)->size()});
    mapped.push_back(std::move(*f));
  }
  auto m = safetensors_description(path, src, images);
  if (!m) return m.error();
  (*m)->files = std::move(mapped);
  return m;
}

// Opens a model description from a GGUF file, a safetensors file, or a model directory.
// `read_into_memory`: weights are read into owned memory instead of mapped (LoadOptions).
inline Result<std::shared_ptr<ModelDesc>> load_description(const std::string& path, bool read_into_memory = false) {
  if (path.empty()) return make_error(Errc::invalid_argument, "no model path given");
  if (is_directory(path))
    return load_safetensors_model(path, strip_trailing_separators(path), std::nullopt, read_into_memory);
  auto f = map_file(path);  // mapped to look at it (read below when asked)
  if (!f) return f.error();
  bool gguf = (*f)->size() >= 4 && std::memcmp((*f)->data(), "GGUF", 4) == 0;
  bool st = !gguf && (ends_with(path, ".safetensors") || ((*f)->size() >= 9 && (*f)->data()[8] == '{'));
  if (st) {
    f->reset();
    return load_safetensors_model(path, parent_dir(path), path, read_into_memory);
  }
  if (read_into_memory) {
    f->reset();
    f = map_file(path, true);
    if (!f) return f.error();
  }
  const MappedFile& mf = **f;
  auto m = gguf_description(mf.data(), mf.size(), path);
  if (!m) return m.error();
  (*m)->files.push_back(std::move(*f));
  return m;
}

// A GGUF image in the caller's memory (Model::load_from_memory): the same checks as a file; used
// in place (borrowed), or copied into owned memory with `copy`.
inline Result<std::shared_ptr<ModelDesc>> load_description_from_memory(std::span<const uint8_t> data,
                                                                       const std::string& name, bool copy = false) {
  if (!data.data() && !data.empty()) return make_error(Errc::invalid_argument, name + ": no memory given");
  if (data.size() < 4 || std::memcmp(data.data(), "GGUF", 4) != 0)
    return make_error(Errc::bad_format,
                      name +
                          ": not a GGUF image (a model in memory must be one GGUF file; safetensors need their "
                          "directory: load them from files)");
  // Tensors sit at multiples of the file's alignment (32 by default) from its start: a mapping
  // starts on a page, and the kernels need at least the 16 bytes malloc gives (read_into_memory).
  if (!copy && reinterpret_cast<uintptr_t>(data.data()) % 16 != 0)
    return make_error(Errc::invalid_argument,
                      strf("%s: the image starts at an address that is not a multiple of 16 (a mapping starts on a "
                           "page): align it, or set LoadOptions::read_into_memory to copy it",
                           name.c_str()));
  std::shared_ptr<MappedFile> f;
  if (copy) {
    auto c = MappedFile::copy(data.data(), data.size(), name);
    if (!c) return c.error();
    f = std::make_shared<MappedFile>(std::move(*c));
  } else {
    f = std::make_shared<MappedFile>(MappedFile::borrow(data.data(), data.size(), name));
  }
  auto m = gguf_description(f->data(), f->size(), name);
  if (!m) return m.error();
  (*m)->files.push_back(std::move(f));
  return m;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
