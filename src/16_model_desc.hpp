// ==== Model description: one in-memory shape for GGUF files and safetensors directories ====
// Whatever the source, tensors carry GGUF names (blk.{i}.attn_q.weight) and ggml dimension order
// (ne[0] = row length), metadata is readable under GGUF keys ({arch}.block_count, ...), and
// Hugging Face conventions are recorded (not hidden) where they differ from GGUF's.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// A tensor in the mapped file (weights are used in place).
struct TensorView {
  std::string name;  // GGUF naming
  DType type = DType::f32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0]: row length (innermost); ne[1]: rows; ...
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  // MLX affine (mlx_q4 / mlx_q8): w = q * scale + bias, groups of `group_size` along a row;
  // `data` holds [rows][ne0 * bits / 32] uint32 words (lowest bits first), `scales` and `biases`
  // are [rows][ne0 / group_size] of `aux_type` (f16, bf16 or f32).
  const uint8_t* scales = nullptr;
  const uint8_t* biases = nullptr;
  DType aux_type = DType::f32;
  int group_size = 0;
  std::string file;          // source file (messages)
  uint64_t file_offset = 0;  // absolute offset of `data` in that file

  int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  // Bytes of the MLX scales and biases that belong to this tensor (0 for other types).
  uint64_t aux_bytes() const {
    if (!scales || group_size <= 0) return 0;
    const DTypeTraits* tr = dtype_traits(aux_type);
    return 2 * static_cast<uint64_t>(rows()) * static_cast<uint64_t>(ne[0] / group_size) * (tr ? tr->bytes : 0);
  }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  std::string shape_string() const {
    std::string s = "[";
    for (int k = 0; k < n_dims; k++) s += (k ? ", " : "") + std::to_string(ne[k]);
    return s + "]";
  }
};

// A scalar metadata value under its GGUF key.
struct MetaValue {
  enum class Kind : uint8_t { number, boolean, string } kind = Kind::number;
  bool is_int = false;
  int64_t i = 0;
  double num = 0;
  std::string str;
};

struct HParams {
  std::string arch;
  int64_t n_vocab = 0, n_ctx_train = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0;
  int64_t head_dim = 0, head_dim_v = 0;  // key / value length per head
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  bool tied_embeddings = false;  // no output.weight: the output uses token_embd
};

// Vocabulary as stored in the file (the tokenizer builds its tables from this).
struct VocabData {
  std::string model;  // GGUF tokenizer.ggml.model: "gpt2" (byte-level BPE), "llama" (SentencePiece), ...
  std::string pre;    // GGUF tokenizer.ggml.pre: "llama-bpe", "qwen2", "smollm", "default", ...
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;       // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<std::string> merges;  // "left right"
  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1, sep = -1;
  // Every end-of-sequence id the files name: GGUF eos/eot/eom; Hugging Face generation_config.json's
  // eos_token_id (a number or a list) and tokenizer_config.json's eos_token. In-range ids only.
  std::vector<int32_t> eos_ids;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

// Where a description came from. MLX directories are safetensors (their quantized weights are
// tensor types, DType::mlx_q4 / mlx_q8). tokenizer_json: a folder with only the tokenizer files.
enum class FileFormat : uint8_t { gguf, safetensors, tokenizer_json };

// The format's name in ModelInfo::format, ModelFileInfo::format and messages.
inline const char* file_format_name(FileFormat f) {
  switch (f) {
    case FileFormat::gguf: return "gguf";
    case FileFormat::safetensors: return "safetensors";
    case FileFormat::tokenizer_json: return "tokenizer.json";
  }
  return "?";
}

struct ModelDesc {
  std::string path;  // as given
  // set by every loader; the default is what a description built from JSON side files (tests) wants
  FileFormat format = FileFormat::safetensors;
  std::string arch;  // architecture name (selects the architecture definition)
  std::string name;  // general.name / model directory name
  uint64_t file_bytes = 0;
  std::vector<std::shared_ptr<MappedFile>> files;
  std::optional<GgufFile> gguf;                                      // GGUF: all metadata (views into files[0])
  Json config, tokenizer_json, tokenizer_config, generation_config;  // safetensors directories
  std::vector<std::pair<std::string, std::string>> st_metadata;      // safetensors __metadata__
  std::map<std::string, MetaValue, std::less<>> meta;                // scalar metadata under GGUF keys
  // numeric and boolean arrays under "{arch}." keys (per-layer values: sliding_window_pattern,
  // head counts, ...); tokenizer arrays stay in `gguf`
  std::map<std::string, std::vector<double>, std::less<>> meta_arrays;
  std::vector<TensorView> tensors;
  std::unordered_map<std::string, size_t> tensor_index;
  HParams hp;
  VocabData vocab;
  std::string chat_template;
  bool has_chat_template = false;
  // Hugging Face llama checkpoints keep q/k rows in the order of rotate-half RoPE; GGUF llama files
  // permute them for adjacent-pair RoPE. True when q/k are in the Hugging Face order.
  bool hf_qk_order = false;
  // Hugging Face checkpoints of some architectures store norm weights as w - N (Gemma: N = 1): the
  // loader's table by model_type; the definition's `convention hf_norm_offset` overrides it.
  float hf_norm_offset = 0;
  std::vector<std::unique_ptr<float[]>> owned;  // small tensors converted at load (e.g. norm offsets)

  const TensorView* find(std::string_view tensor_name) const {
    auto it = tensor_index.find(std::string(tensor_name));
    return it == tensor_index.end() ? nullptr : &tensors[it->second];
  }
  const MetaValue* find_meta(std::string_view key) const {
    auto it = meta.find(key);
    return it == meta.end() ? nullptr : &it->second;
  }
  const std::vector<double>* find_meta_array(std::string_view key) const {
    auto it = meta_arrays.find(key);
    return it == meta_arrays.end() ? nullptr : &it->second;
  }
  std::optional<double> meta_number(std::string_view key) const {
    const MetaValue* v = find_meta(key);
    if (!v || v->kind == MetaValue::Kind::string) return std::nullopt;
    return v->num;
  }
  std::optional<std::string_view> meta_string(std::string_view key) const {
    const MetaValue* v = find_meta(key);
    if (!v || v->kind != MetaValue::Kind::string) return std::nullopt;
    return std::string_view(v->str);
  }
  // "{arch}.block_count" style lookups.
  std::optional<double> arch_number(std::string_view suffix) const {
    return meta_number(arch + "." + std::string(suffix));
  }
  uint64_t n_params() const {
    uint64_t n = 0;
    for (const auto& t : tensors) n += static_cast<uint64_t>(t.nelements());
    return n;
  }
};

// Adds `id` to `ids` once (when it is a valid token id).
inline void add_id_once(std::vector<int32_t>& ids, int64_t id, size_t n_vocab) {
  if (id < 0 || static_cast<uint64_t>(id) >= n_vocab) return;
  if (std::find(ids.begin(), ids.end(), static_cast<int32_t>(id)) == ids.end()) ids.push_back(static_cast<int32_t>(id));
}

// ---- GGUF -> ModelDesc ----
// `base` is the start of the GGUF image (the mapping), `file` its name for messages.
inline Result<void> desc_from_gguf(ModelDesc& m, const uint8_t* base, const std::string& file) {
  const GgufFile& g = *m.gguf;
  for (const auto& e : g.kv) {
    const GgufValue& v = e.value;
    MetaValue mv;
    if (v.type == GgufType::string) {
      mv.kind = MetaValue::Kind::string;
      mv.str = std::string(v.as_string());
    } else if (v.type == GgufType::boolean) {
      mv.kind = MetaValue::Kind::boolean;
      mv.is_int = true;
      mv.i = v.as_int();
      mv.num = static_cast<double>(mv.i);
    } else if (v.is_number()) {
      mv.is_int = v.is_integer();
      mv.i = v.as_int();
      mv.num = v.as_number();
    } else {
      continue;  // arrays stay in `gguf` (numeric ones of the architecture: below)
    }
    m.meta.emplace(std::string(e.key), std::move(mv));
  }
  m.arch = std::string(m.meta_string("general.architecture").value_or(""));
  // numeric / boolean arrays of the architecture's keys, one value per element (at most 65536:
  // per-layer values, never vocabulary-sized tables)
  if (!m.arch.empty())
    for (const auto& e : g.kv) {
      const GgufValue& v = e.value;
      if (v.type != GgufType::array || !gguf_scalar_size(v.elem) || v.len > 65536) continue;
      if (e.key.size() <= m.arch.size() || e.key.compare(0, m.arch.size(), m.arch) != 0 || e.key[m.arch.size()] != '.')
        continue;
      std::vector<double> a(static_cast<size_t>(v.len));
      for (uint64_t k = 0; k < v.len; k++) a[k] = v.number(k);
      m.meta_arrays.emplace(std::string(e.key), std::move(a));
    }
  m.name = std::string(m.meta_string("general.name").value_or(""));
  m.tensors.reserve(g.tensors.size());
  for (const auto& ti : g.tensors) {
    TensorView t;
    t.name = std::string(ti.name);
    t.type = ti.type;
    t.n_dims = static_cast<int>(ti.n_dims);
    for (int k = 0; k < 4; k++) t.ne[k] = ti.ne[k];
    t.data = base + g.data_offset + ti.offset;
    t.nbytes = ti.nbytes;
    t.file = file;
    t.file_offset = g.data_offset + ti.offset;
    m.tensors.push_back(std::move(t));
  }
  // vocabulary
  VocabData& vd = m.vocab;
  vd.model = std::string(m.meta_string("tokenizer.ggml.model").value_or(""));
  vd.pre = std::string(m.meta_string("tokenizer.ggml.pre").value_or(""));
  auto bad = [&](const std::string& what) { return make_error(Errc::bad_format, file + ": " + what); };
  if (const GgufValue* v = g.find("tokenizer.ggml.tokens")) {
    if (v->type != GgufType::array || v->elem != GgufType::string)
      return bad("tokenizer.ggml.tokens is not an array of strings");
    vd.tokens.assign(v->strings.begin(), v->strings.end());
  }
  // A per-token numeric array (scores, token types): one entry per token.
  auto per_token = [&](const char* key) -> Result<const GgufValue*> {
    const GgufValue* v = g.find(key);
    if (!v) return static_cast<const GgufValue*>(nullptr);
    if (v->type != GgufType::array || !gguf_scalar_size(v->elem)) return bad(strf("%s is not a numeric array", key));
    if (v->len != vd.tokens.size())
      return bad(strf("%s has %llu entries but the vocabulary has %zu tokens", key,
                      static_cast<unsigned long long>(v->len), vd.tokens.size()));
    return v;
  };
  auto scores = per_token("tokenizer.ggml.scores");
  if (!scores) return scores.error();
  if (const GgufValue* v = *scores) {
    vd.scores.resize(static_cast<size_t>(v->len));
    for (uint64_t k = 0; k < v->len; k++) vd.scores[k] = static_cast<float>(v->number(k));
  }
  auto types = per_token("tokenizer.ggml.token_type");
  if (!types) return types.error();
  if (const GgufValue* v = *types) {
    vd.types.resize(static_cast<size_t>(v->len));
    for (uint64_t k = 0; k < v->len; k++)
      vd.types[k] = static_cast<int32_t>(std::clamp<int64_t>(v->integer(k), INT32_MIN, INT32_MAX));
  }
  if (const GgufValue* v = g.find("tokenizer.ggml.merges")) {
    if (v->type != GgufType::array || v->elem != GgufType::string)
      return bad("tokenizer.ggml.merges is not an array of strings");
    vd.merges.assign(v->strings.begin(), v->strings.end());
  }
  // Special token ids; an id outside the vocabulary is treated as absent (-1).
  auto id = [&](const char* key, int32_t& out) {
    if (auto v = m.meta_number(key)) {
      double d = *v;
      out = (d >= 0 && d < static_cast<double>(vd.tokens.size())) ? static_cast<int32_t>(d) : -1;
    }
  };
  id("tokenizer.ggml.bos_token_id", vd.bos);
  id("tokenizer.ggml.eos_token_id", vd.eos);
  id("tokenizer.ggml.eot_token_id", vd.eot);
  id("tokenizer.ggml.eom_token_id", vd.eom);
  id("tokenizer.ggml.unknown_token_id", vd.unk);
  id("tokenizer.ggml.padding_token_id", vd.pad);
  id("tokenizer.ggml.seperator_token_id", vd.sep);  // sic: GGUF's spelling
  for (int32_t e : {vd.eos, vd.eot, vd.eom}) add_id_once(vd.eos_ids, e, vd.tokens.size());
  auto flag = [&](const char* key, std::optional<bool>& out) {
    if (const MetaValue* v = m.find_meta(key); v && v->kind != MetaValue::Kind::string) out = v->num != 0;
  };
  flag("tokenizer.ggml.add_bos_token", vd.add_bos);
  flag("tokenizer.ggml.add_eos_token", vd.add_eos);
  flag("tokenizer.ggml.add_space_prefix", vd.add_space_prefix);
  if (auto t = m.meta_string("tokenizer.chat_template")) {
    m.chat_template = std::string(*t);
    m.has_chat_template = true;
  }
  return {};
}

// ---- Hugging Face config.json -> GGUF keys and names ----
struct HfArchInfo {
  const char* model_type;       // config.json "model_type"
  const char* arch;             // our architecture name
  bool norm_plus_one;           // norms are stored as w - 1 (gemma): GGUF stores w
  bool post_attn_is_post_norm;  // "post_attention_layernorm" is a post-norm, not the FFN pre-norm
};

inline const HfArchInfo* hf_arch_info(std::string_view model_type) {
  static const HfArchInfo table[] = {
      {"llama", "llama", false, false},         {"mistral", "llama", false, false},    {"qwen2", "qwen2", false, false},
      {"qwen3", "qwen3", false, false},         {"gemma3_text", "gemma3", true, true}, {"gemma3", "gemma3", true, true},
      {"gemma3n_text", "gemma3n", false, true}, {"gemma3n", "gemma3n", false, true},
  };
  for (const auto& e : table)
    if (model_type == e.model_type) return &e;
  return nullptr;
}

// Maps a Hugging Face tensor name (prefix already stripped) to its GGUF name, or "" if unknown.
inline std::string hf_tensor_name(std::string_view n, const HfArchInfo& info) {
  if (n == "embed_tokens.weight") return "token_embd.weight";
  if (n == "norm.weight") return "output_norm.weight";
  if (n == "lm_head.weight") return "output.weight";
  // Gemma 3n: per-layer inputs, and the AltUp stream projections, one matrix per stream k (GGUF
  // stacks them into one [D, D, n] tensor; stream_matmul reads either form)
  static const std::pair<const char*, const char*> top[] = {
      {"embed_tokens_per_layer.weight", "per_layer_token_embd.weight"},
      {"per_layer_model_projection.weight", "per_layer_model_proj.weight"},
      {"per_layer_projection_norm.weight", "per_layer_proj_norm.weight"},
  };
  for (const auto& [hf, gg] : top)
    if (n == hf) return gg;
  for (const auto& [hf, gg] : {std::pair<std::string_view, std::string_view>{"altup_projections.", "altup_proj."},
                               {"altup_unembed_projections.", "altup_unembd_proj."}})
    if (n.substr(0, hf.size()) == hf) return std::string(gg) + std::string(n.substr(hf.size()));
  if (n.substr(0, 7) != "layers.") return std::string();
  size_t dot = n.find('.', 7);
  if (dot == std::string_view::npos) return std::string();
  std::string_view layer = n.substr(7, dot - 7), rest = n.substr(dot + 1);
  if (layer.empty() || layer.find_first_not_of("0123456789") != std::string_view::npos) return std::string();
  static const std::pair<const char*, const char*> map[] = {
      {"input_layernorm", "attn_norm"},
      {"self_attn.q_proj", "attn_q"},
      {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"},
      {"self_attn.q_norm", "attn_q_norm"},
      {"self_attn.k_norm", "attn_k_norm"},
      {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"},
      {"mlp.down_proj", "ffn_down"},
      {"pre_feedforward_layernorm", "ffn_norm"},
      {"post_feedforward_layernorm", "post_ffw_norm"},
      // Gemma 3n: per-layer input, AltUp, LAuReL
      {"per_layer_input_gate", "inp_gate"},
      {"per_layer_projection", "proj"},
      {"post_per_layer_input_norm", "post_norm"},
      {"altup.correction_coefs", "altup_correct_coef"},
      {"altup.prediction_coefs", "altup_predict_coef"},
      {"altup.modality_router", "altup_router"},
      {"altup.router_norm", "altup_router_norm"},
      {"laurel.linear_left", "laurel_l"},
      {"laurel.linear_right", "laurel_r"},
      {"laurel.post_laurel_norm", "laurel_post_norm"},
  };
  // a bare parameter (no ".weight"): GGUF appends it
  if (rest == "altup.correct_output_scale") return "blk." + std::string(layer) + ".altup_correct_scale.weight";
  size_t last = rest.rfind('.');
  if (last == std::string_view::npos) return std::string();
  std::string_view base = rest.substr(0, last), suffix = rest.substr(last);  // ".weight", ".bias", ".scales", ...
  const char* g = nullptr;
  if (base == "post_attention_layernorm") g = info.post_attn_is_post_norm ? "post_attention_norm" : "ffn_norm";
  for (const auto& [hf, gg] : map)
    if (base == hf) g = gg;
  if (!g) return std::string();
  return "blk." + std::string(layer) + "." + g + std::string(suffix);
}

inline void meta_set_num(ModelDesc& m, const std::string& key, const Json& j) {
  if (!j.is_number() && !j.is_bool()) return;
  MetaValue v;
  if (j.is_bool()) {
    v.kind = MetaValue::Kind::boolean;
    v.is_int = true;
    v.i = j.boolean;
    v.num = j.boolean;
  } else {
    v.is_int = j.is_int;
    v.i = j.as_int();
    v.num = j.num;
  }
  m.meta[key] = std::move(v);
}
inline void meta_set_str(ModelDesc& m, const std::string& key, std::string value) {
  MetaValue v;
  v.kind = MetaValue::Kind::string;
  v.str = std::move(value);
  m.meta[key] = std::move(v);
}

// The standard normal quantile: x with P(N(0, 1) <= x) = p, to double precision (bisection on
// erfc); -inf for p = 0.
inline double normal_quantile(double p) {
  if (!(p > 0)) return -std::numeric_limits<double>::infinity();
  if (!(p < 1)) return std::numeric_limits<double>::infinity();
  double lo = -40, hi = 40;
  for (int k = 0; k < 200 && lo < hi; k++) {
    const double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// Reads config.json into GGUF-style keys. Multimodal configs keep the text model in text_config.
inline Result<void> desc_meta_from_config(ModelDesc& m, const HfArchInfo*& info) {
  const Json* cfg = &m.config;
  std::string model_type(m.config["model_type"].as_string());
  if (const Json* tc = m.config.find("text_config"); tc && tc->is_object()) {
    cfg = tc;
    if (tc->find("model_type")) model_type = std::string((*tc)["model_type"].as_string());
  }
  info = hf_arch_info(model_type);
  if (!info)
    return make_error(Errc::unsupported, strf("%s: config.json model_type '%s' is not a supported architecture "
                                              "(llama, mistral, qwen2, qwen3, gemma3, gemma3n)",
                                              m.path.c_str(), printable(model_type).c_str()));
  m.arch = info->arch;
  const std::string a = m.arch + ".";
  const Json& c = *cfg;
  meta_set_str(m, "general.architecture", m.arch);
  meta_set_str(m, "general.name", m.name);
  meta_set_num(m, a + "block_count", c["num_hidden_layers"]);
  meta_set_num(m, a + "embedding_length", c["hidden_size"]);
  meta_set_num(m, a + "feed_forward_length", c["intermediate_size"]);
  meta_set_num(m, a + "attention.head_count", c["num_attention_heads"]);
  meta_set_num(m, a + "attention.head_count_kv",
               c.find("num_key_value_heads") ? c["num_key_value_heads"] : c["num_attention_heads"]);
  meta_set_num(m, a + "context_length", c["max_position_embeddings"]);
  meta_set_num(m, a + "attention.layer_norm_rms_epsilon", c["rms_norm_eps"]);
  meta_set_num(m, a + "rope.freq_base", c.find("rope_theta") ? c["rope_theta"] : Json::null_value());
  meta_set_num(m, a + "vocab_size", c["vocab_size"]);
  if (c.find("head_dim") && c["head_dim"].is_number()) {
    meta_set_num(m, a + "attention.key_length", c["head_dim"]);
    meta_set_num(m, a + "attention.value_length", c["head_dim"]);
  }
  meta_set_num(m, a + "attention.sliding_window", c["sliding_window"]);
  meta_set_num(m, a + "attention.sliding_window_pattern", c["sliding_window_pattern"]);
  meta_set_num(m, a + "rope.freq_base_swa", c["rope_local_base_freq"]);
  meta_set_num(m, a + "attn_logit_softcapping", c["attn_logit_softcapping"]);
  meta_set_num(m, a + "final_logit_softcapping", c["final_logit_softcapping"]);
  meta_set_num(m, a + "attention.query_pre_attn_scalar", c["query_pre_attn_scalar"]);
  if (const Json* rs = c.find("rope_scaling"); rs && rs->is_object()) {
    std::string type(rs->find("rope_type") ? (*rs)["rope_type"].as_string() : (*rs)["type"].as_string());
    meta_set_str(m, a + "rope.scaling.type", type);
    meta_set_num(m, a + "rope.scaling.factor", (*rs)["factor"]);
    meta_set_num(m, a + "rope.scaling.original_context_length", (*rs)["original_max_position_embeddings"]);
    meta_set_num(m, a + "rope.scaling.low_freq_factor", (*rs)["low_freq_factor"]);
    meta_set_num(m, a + "rope.scaling.high_freq_factor", (*rs)["high_freq_factor"]);
  }
  // Gemma 3n (Gemma3nTextConfig): newer configs give the rope bases as rope_parameters
  if (const Json* rp = c.find("rope_parameters"); rp && rp->is_object()) {
    if (const Json* f = rp->find("full_attention"); f && f->is_object())
      meta_set_num(m, a + "rope.freq_base", (*f)["rope_theta"]);
    if (const Json* f = rp->find("sliding_attention"); f && f->is_object())
      meta_set_num(m, a + "rope.freq_base_swa", (*f)["rope_theta"]);
  }
  meta_set_num(m, a + "altup.num_inputs", c["altup_num_inputs"]);
  meta_set_num(m, a + "altup.active_idx", c["altup_active_idx"]);
  meta_set_num(m, a + "embedding_length_per_layer_input", c["hidden_size_per_layer_input"]);
  meta_set_num(m, a + "attention.shared_kv_layers", c["num_kv_shared_layers"]);
  // per-layer lists, as GGUF arrays (a list of another length than num_hidden_layers is kept: the
  // definition names the mismatch when it reads it)
  auto numbers = [&](const Json& list, auto&& f) -> Result<std::vector<double>> {
    std::vector<double> out;
    for (const Json& e : list.items) {
      auto v = f(e);
      if (!v)
        return make_error(Errc::bad_format,
                          strf("%s: config.json: an entry of a per-layer list is not valid", m.path.c_str()));
      out.push_back(*v);
    }
    return out;
  };
  auto number = [](const Json& e) -> std::optional<double> {
    return e.is_number() ? std::optional<double>(e.num) : std::nullopt;
  };
  if (const Json* ff = c.find("intermediate_size"); ff && ff->is_array()) {
    auto v = numbers(*ff, number);
    if (!v) return v.error();
    m.meta_arrays[a + "feed_forward_length"] = std::move(*v);
  }
  // layer_types: "sliding_attention" -> 1 (the per-layer sliding_window_pattern)
  if (const Json* lt = c.find("layer_types"); lt && lt->is_array() && model_type.rfind("gemma3n", 0) == 0) {
    auto v = numbers(*lt, [](const Json& e) -> std::optional<double> {
      if (!e.is_string()) return std::nullopt;
      return e.str == "sliding_attention" ? 1.0 : 0.0;
    });
    if (!v) return v.error();
    m.meta_arrays[a + "attention.sliding_window_pattern"] = std::move(*v);
  }
  // activation_sparsity_pattern: probabilities p -> the std multiplier of the Gaussian top-k, the
  // standard normal quantile of p (what the GGUF converter writes); p = 0 -> -inf (no sparsity)
  if (const Json* sp = c.find("activation_sparsity_pattern"); sp && sp->is_array()) {
    auto v = numbers(*sp, [](const Json& e) -> std::optional<double> {
      if (!e.is_number() || !(e.num >= 0) || !(e.num < 1)) return std::nullopt;
      return normal_quantile(e.num);
    });
    if (!v)
      return make_error(Errc::bad_format,
                        m.path + ": config.json: activation_sparsity_pattern must hold numbers in [0, 1)");
    m.meta_arrays[a + "activation_sparsity_scale"] = std::move(*v);
  }
  if (const Json* t = c.find("tie_word_embeddings"); t && t->is_bool())
    meta_set_num(m, "general.tie_word_embeddings", *t);
  else if (const Json* t2 = m.config.find("tie_word_embeddings"); t2 && t2->is_bool())
    meta_set_num(m, "general.tie_word_embeddings", *t2);
  return {};
}

// Fills `hp` from the GGUF-style metadata and the tensor shapes.
inline Result<void> desc_hparams(ModelDesc& m) {
  HParams& hp = m.hp;
  hp.arch = m.arch;
  auto num = [&](const char* suffix, int64_t fallback) -> int64_t {
    auto v = m.arch_number(suffix);
    return v && std::isfinite(*v) && *v >= 0 && *v < 9.2e18 ? static_cast<int64_t>(*v) : fallback;
  };
  hp.n_layer = num("block_count", 0);
  hp.n_embd = num("embedding_length", 0);
  hp.n_head = num("attention.head_count", 0);
  hp.n_head_kv = num("attention.head_count_kv", hp.n_head);
  hp.n_ff = num("feed_forward_length", 0);
  // a per-layer list (Gemma 3n's intermediate_size): the largest, for what a summary shows
  if (const auto* ff = m.find_meta_array(m.arch + ".feed_forward_length"); ff && !hp.n_ff)
    for (double v : *ff)
      if (std::isfinite(v) && v > double(hp.n_ff) && v < 9.2e18) hp.n_ff = static_cast<int64_t>(v);
  hp.n_ctx_train = num("context_length", 0);
  hp.head_dim = num("attention.key_length", hp.n_head > 0 ? hp.n_embd / hp.n_head : 0);
  hp.head_dim_v = num("attention.value_length", hp.head_dim);
  // Numbers the forward pass uses as floats must be finite floats (and in range), named when not.
  auto real = [&](const char* suffix, bool positive) -> Result<std::optional<float>> {
    auto v = m.arch_number(suffix);
    if (!v) return std::optional<float>();
    float f = static_cast<float>(*v);
    if (!std::isfinite(f) || f < 0 || (positive && !(f > 0)))
      return make_error(Errc::bad_format,
                        strf("%s: metadata '%s.%s' is %g; it must be a finite %s number", m.path.c_str(),
                             m.arch.c_str(), suffix, *v, positive ? "positive" : "non-negative"));
    return std::optional<float>(f);
  };
  auto eps = real("attention.layer_norm_rms_epsilon", false);
  if (!eps) return eps.error();
  if (*eps) hp.rms_eps = **eps;
  auto base = real("rope.freq_base", true);
  if (!base) return base.error();
  if (*base) hp.rope_freq_base = **base;
  if (auto r = real("rope.freq_base_swa", true); !r) return r.error();
  for (const char* k : {"rope.scaling.factor", "rope.scaling.low_freq_factor", "rope.scaling.high_freq_factor",
                        "rope.scaling.original_context_length", "attention.layer_norm_epsilon"})
    if (auto r = real(k, false); !r) return r.error();
  const TensorView* emb = m.find("token_embd.weight");
  hp.n_vocab = num("vocab_size", 0);
  if (hp.n_vocab == 0 && !m.vocab.tokens.empty()) hp.n_vocab = static_cast<int64_t>(m.vocab.tokens.size());
  if (hp.n_vocab == 0 && emb) hp.n_vocab = emb->ne[1];
  hp.tied_embeddings = m.find("output.weight") == nullptr;
  return {};
}

inline void desc_index(ModelDesc& m) {
  m.tensor_index.clear();
  for (size_t k = 0; k < m.tensors.size(); k++) m.tensor_index.emplace(m.tensors[k].name, k);
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
