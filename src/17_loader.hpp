// ==== Loader: a path (GGUF file, safetensors file, Hugging Face / MLX directory) -> ModelDesc ====
namespace llminfer {
inline namespace v0_1 {
namespace detail {

inline bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
inline bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

inline std::string parent_dir(const std::string& path) {
  size_t p = path.find_last_of("/\\");
  if (p == std::string::npos) return ".";
  if (p == 0) return "/";
  return path.substr(0, p);
}

// Reads and parses a small JSON file of a model directory (mapped, not read).
inline Result<Json> load_json_file(const std::string& path) {
  auto f = MappedFile::open(path);
  if (!f) return f.error();
  return json_parse(f->view(), path);
}

// Vocabulary from a Hugging Face tokenizer.json: ids, merges, added tokens and their kinds.
// (The tokenizer interprets normalizer / pre-tokenizer / post-processor itself.)
inline Result<void> vocab_from_tokenizer_json(ModelDesc& m) {
  const Json& tj = m.tokenizer_json;
  const Json& model = tj["model"];
  auto bad = [&](const std::string& what) { return make_error(Errc::bad_format, m.path + "/tokenizer.json: " + what); };
  if (!model.is_object()) return bad("no \"model\" object");
  std::string_view type = model["type"].as_string();
  if (!type.empty() && type != "BPE") {
    // not a BPE vocabulary (WordPiece, Unigram, ...): the model still describes and loads; the tokenizer
    // (Tokenizer::build) reports that it cannot tokenize it
    m.vocab.model = std::string(type);
    return {};
  }
  const Json& vocab = model["vocab"];
  if (!vocab.is_object()) return bad("model.vocab is not an object");
  VocabData& vd = m.vocab;
  int64_t max_id = -1;
  for (const auto& [tok, id] : vocab.members) {
    if (!id.is_int || id.i < 0 || id.i >= (1 << 24)) return bad(strf("token '%s' has an invalid id", printable(tok).c_str()));
    max_id = std::max<int64_t>(max_id, id.i);
  }
  const Json& added = tj["added_tokens"];
  for (const auto& a : added.items) {
    const Json& id = a["id"];
    if (!id.is_int || id.i < 0 || id.i >= (1 << 24)) return bad("an added token has an invalid id");
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
  // special tokens named in tokenizer_config.json
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

// Chat template of a directory: tokenizer_config.json "chat_template" (a string, or a list of
// {name, template} where "default" is used), else a chat_template.jinja file.
inline void chat_template_from_dir(ModelDesc& m, const std::string& dir) {
  const Json& ct = m.tokenizer_config["chat_template"];
  if (ct.is_string()) {
    m.chat_template = ct.str;
    m.has_chat_template = true;
    return;
  }
  if (ct.is_array()) {
    for (const auto& e : ct.items) {
      if (e["name"].as_string() == "default" && e["template"].is_string()) {
        m.chat_template = e["template"].str;
        m.has_chat_template = true;
        return;
      }
    }
  }
  std::string jinja = path_join(dir, "chat_template.jinja");
  if (file_exists(jinja)) {
    if (auto f = MappedFile::open(jinja)) {
      m.chat_template = std::string(f->view());
      m.has_chat_template = true;
    }
  }
}

// Turns the safetensors tensors into TensorViews with GGUF names, combining MLX triples
// (weight U32 + scales + biases) into one quantized view.
inline Result<void> desc_tensors_from_safetensors(ModelDesc& m, std::vector<StFile>& files, const HfArchInfo& info) {
  auto bad = [&](const std::string& what) { return make_error(Errc::bad_format, m.path + ": " + what); };
  const Json& q = m.config.find("quantization") ? m.config["quantization"] : m.config["quantization_config"];
  int cfg_group = static_cast<int>(q["group_size"].as_int(64));
  // all tensors by their (prefix-stripped) Hugging Face name
  std::unordered_map<std::string, const StTensor*> by_name;
  std::vector<std::pair<std::string, const StTensor*>> ordered;
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
    }
  }
  for (const auto& [hf, t] : ordered) {
    if (ends_with(hf, ".scales") || ends_with(hf, ".biases")) {
      std::string base = hf.substr(0, hf.size() - 7);
      if (by_name.count(base + ".weight")) continue;  // part of an MLX triple
    }
    std::string gname = hf_tensor_name(hf, info);
    if (gname.empty()) gname = hf;  // unknown tensors keep their name (listed, never computed with)
    TensorView v;
    v.name = gname;
    v.type = t->type;
    v.data = t->data;
    v.nbytes = t->nbytes;
    v.file_offset = t->file_offset;
    for (const auto& f : files)
      if (t >= f.tensors.data() && t < f.tensors.data() + f.tensors.size()) v.file = f.path;
    if (t->shape.size() > 4) return bad(strf("tensor '%s' has %zu dimensions (at most 4)", printable(hf).c_str(), t->shape.size()));
    v.n_dims = static_cast<int>(t->shape.size());
    for (int k = 0; k < v.n_dims; k++) v.ne[k] = t->shape[t->shape.size() - 1 - static_cast<size_t>(k)];
    if (ends_with(hf, ".weight") && t->type == DType::u32) {
      std::string base = hf.substr(0, hf.size() - 7);
      auto si = by_name.find(base + ".scales"), bi = by_name.find(base + ".biases");
      if (si != by_name.end() && bi != by_name.end()) {
        const StTensor* s = si->second;
        const StTensor* b = bi->second;
        if (v.n_dims != 2 || s->shape.size() != 2 || s->shape != b->shape || s->type != b->type ||
            s->shape[0] != t->shape[0] ||
            (s->type != DType::f16 && s->type != DType::bf16 && s->type != DType::f32))
          return bad(strf("MLX tensor '%s': scales/biases do not match the weight", printable(hf).c_str()));
        int64_t groups = s->shape[1], words = t->shape[1];
        if (groups <= 0) return bad(strf("MLX tensor '%s' has no groups", printable(hf).c_str()));
        int group = cfg_group > 0 ? cfg_group : 64;
        int64_t n_in = groups * group;
        if ((words * 32) % n_in != 0) return bad(strf("MLX tensor '%s': cannot infer its bit width", printable(hf).c_str()));
        int64_t bits = words * 32 / n_in;
        if (bits != 4 && bits != 8)
          return bad(strf("MLX tensor '%s' is %lld-bit; only 4- and 8-bit affine quantization is supported",
                          printable(hf).c_str(), static_cast<long long>(bits)));
        v.type = bits == 4 ? DType::mlx_q4 : DType::mlx_q8;
        v.ne[0] = n_in;
        v.scales = s->data;
        v.biases = b->data;
        v.aux_type = s->type;
        v.group_size = group;
      }
    }
    // Gemma stores norms as (w - 1): GGUF's convention (and ours) is w itself.
    if (info.norm_plus_one && ends_with(v.name, "norm.weight") && v.n_dims == 1) {
      if (v.type != DType::f32 && v.type != DType::f16 && v.type != DType::bf16)
        return bad(strf("norm tensor '%s' has type %s", printable(hf).c_str(), dtype_name(v.type)));
      auto n = static_cast<size_t>(v.ne[0]);
      std::unique_ptr<float[]> w(new float[n]);
      for (size_t k = 0; k < n; k++) {
        float x = v.type == DType::f32 ? [&] { float f; std::memcpy(&f, v.data + 4 * k, 4); return f; }()
                  : v.type == DType::f16 ? fp16_to_f32(rd_u16(v.data + 2 * k))
                                         : bf16_to_f32(rd_u16(v.data + 2 * k));
        w[k] = x + 1.0f;
      }
      v.type = DType::f32;
      v.data = reinterpret_cast<const uint8_t*>(w.get());
      v.nbytes = n * 4;
      m.owned.push_back(std::move(w));
    }
    m.tensors.push_back(std::move(v));
  }
  return {};
}

inline Result<std::shared_ptr<MappedFile>> map_file(const std::string& path) {
  auto f = MappedFile::open(path);
  if (!f) return f.error();
  return std::make_shared<MappedFile>(std::move(*f));
}

// A safetensors model: `dir` holds config.json (and tokenizer files); `weights` are the files.
inline Result<std::shared_ptr<ModelDesc>> load_safetensors_model(const std::string& path, const std::string& dir,
                                                                 std::vector<std::string> weights) {
  auto m = std::make_shared<ModelDesc>();
  m->path = path;
  m->format = "safetensors";
  m->name = base_name(dir == "." ? path : dir);
  std::string cfg_path = path_join(dir, "config.json");
  if (!file_exists(cfg_path))
    return make_error(Errc::bad_format, path + ": no config.json beside the safetensors weights");
  auto cfg = load_json_file(cfg_path);
  if (!cfg) return cfg.error();
  m->config = std::move(*cfg);
  for (auto [file, slot] : {std::pair<const char*, Json*>{"tokenizer.json", &m->tokenizer_json},
                            {"tokenizer_config.json", &m->tokenizer_config},
                            {"generation_config.json", &m->generation_config}}) {
    std::string p = path_join(dir, file);
    if (!file_exists(p)) continue;
    auto j = load_json_file(p);
    if (!j) return j.error();
    *slot = std::move(*j);
  }
  const HfArchInfo* info = nullptr;
  if (auto r = desc_meta_from_config(*m, info); !r) return r.error();
  std::vector<StFile> parsed;
  for (const auto& w : weights) {
    auto f = map_file(w);
    if (!f) return f.error();
    auto st = safetensors_parse((*f)->data(), (*f)->size(), w);
    if (!st) return st.error();
    m->file_bytes += (*f)->size();
    for (auto& kv : st->metadata) m->st_metadata.push_back(kv);
    m->files.push_back(std::move(*f));
    parsed.push_back(std::move(*st));
  }
  if (auto r = desc_tensors_from_safetensors(*m, parsed, *info); !r) return r.error();
  desc_index(*m);
  if (m->tokenizer_json.is_object())
    if (auto r = vocab_from_tokenizer_json(*m); !r) return r.error();
  chat_template_from_dir(*m, dir);
  m->hf_qk_order = true;
  if (auto r = desc_hparams(*m); !r) return r.error();
  if (m->find_meta("general.tie_word_embeddings") && m->meta_number("general.tie_word_embeddings").value_or(0) == 0 &&
      m->hp.tied_embeddings)
    return make_error(Errc::tensor_missing, path + ": config.json says the embeddings are not tied, but lm_head.weight is missing");
  return m;
}

// The weight files of a model directory: the index's shards, or model.safetensors, or every
// *.safetensors file.
inline Result<std::vector<std::string>> safetensors_files_of_dir(const std::string& dir) {
  std::string index = path_join(dir, "model.safetensors.index.json");
  std::vector<std::string> out;
  if (file_exists(index)) {
    auto j = load_json_file(index);
    if (!j) return j.error();
    const Json& wm = (*j)["weight_map"];
    if (!wm.is_object()) return make_error(Errc::bad_format, index + ": no weight_map object");
    for (const auto& [tensor, file] : wm.members) {
      if (!file.is_string() || file.str.empty() || file.str.find('/') != std::string::npos ||
          file.str.find('\\') != std::string::npos || file.str == "." || file.str == "..")
        return make_error(Errc::bad_format, strf("%s: tensor '%s' maps to an invalid file name", index.c_str(), printable(tensor).c_str()));
      std::string p = path_join(dir, file.str);
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    }
    for (const auto& p : out)
      if (!file_exists(p)) return make_error(Errc::io, index + ": shard " + base_name(p) + " is missing");
    if (out.empty()) return make_error(Errc::bad_format, index + ": the weight_map is empty");
    return out;
  }
  std::string single = path_join(dir, "model.safetensors");
  if (file_exists(single)) return std::vector<std::string>{single};
  for (const auto& name : list_directory(dir))
    if (ends_with(name, ".safetensors")) out.push_back(path_join(dir, name));
  if (out.empty()) return make_error(Errc::io, dir + ": no .gguf file and no safetensors weights in this directory");
  return out;
}

// Opens a model description from a GGUF file, a safetensors file, or a model directory.
inline Result<std::shared_ptr<ModelDesc>> load_description(const std::string& path) {
  if (path.empty()) return make_error(Errc::invalid_argument, "no model path given");
  if (is_directory(path)) {
    auto files = safetensors_files_of_dir(path);
    if (!files) return files.error();
    return load_safetensors_model(path, path, std::move(*files));
  }
  auto f = map_file(path);
  if (!f) return f.error();
  const MappedFile& mf = **f;
  bool gguf = mf.size() >= 4 && std::memcmp(mf.data(), "GGUF", 4) == 0;
  bool st = !gguf && mf.size() >= 9 && mf.data()[8] == '{';
  if (st) return load_safetensors_model(path, parent_dir(path), {path});
  auto g = gguf_parse(mf.data(), mf.size(), path);
  if (!g) return g.error();
  auto m = std::make_shared<ModelDesc>();
  m->path = path;
  m->format = "gguf";
  m->file_bytes = mf.size();
  m->gguf = std::move(*g);
  m->files.push_back(std::move(*f));
  if (auto r = desc_from_gguf(*m); !r) return r.error();
  desc_index(*m);
  if (auto r = desc_hparams(*m); !r) return r.error();
  return m;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
