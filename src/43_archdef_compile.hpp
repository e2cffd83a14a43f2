// ==== Compiling an architecture definition against a model (ArchCompiler -> Program) ====
// Engine::create (43_forward) binds a parsed definition to a model once: params are read from the
// metadata, `{i}` is expanded for every layer, tensors are found and their shapes and types
// checked, and the result is a flat list of Steps (prologue, block x n_layer, epilogue) holding
// tensor pointers: the Program that Context::eval runs. A broken definition, a missing tensor, a
// bad shape or a weight type the kernels cannot compute fails here, not during a forward pass.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

struct AttnSpec {
  int n_head = 0, n_kv = 0, hd_k = 0, hd_v = 0;
  int window = 0;      // keys p-window+1 .. p; 0: all previous keys
  float scale = 1.0f;  // applied to q.k before the soft-cap and the softmax
  float softcap = 0;   // c * tanh(s / c) when > 0
  int kv_layer = 0;
  bool shared = false;  // reads kv_layer, which an earlier layer writes (attention reuse_kv_from)
};

// One compiled operation.
struct Step {
  OpCode op = OpCode::copy;
  Section section = Section::none;
  int16_t dst = -1, a = -1, b = -1, c = -1;  // registers
  int layer = -1;                            // -1 outside the block
  int line = 0;                              // definition line (traces, messages)
  int w_in = 0, w_out = 0;                   // row widths of `a` and `dst`
  const TensorView* w = nullptr;             // embed / matmul weight
  const float* vec = nullptr;                // 1-D weights (norms, biases) as f32
  const float* vec2 = nullptr;               // layer_norm(_heads): the bias (nullptr: none)
  int vec_len = 0;
  int off = 0;      // slice: first column; layer_norm_heads: head length
  float f = 0;      // eps (norms), factor (scale), cap (softcap)
  float f2 = 0;     // scale: the bias added after the factor
  int idx = -1;     // RopeSpec / AttnSpec index
  int streams = 0;  // stream ops: the stream count; rms_normalize: the group size
  int from = 0;     // stream_add: the first stream
  // matmul: round the input to the weight's float type first (1 f16, 2 bf16). GGUF files are
  // computed as ggml computes them: F16/BF16 weights multiply f16/bf16 activations. (Idempotent,
  // so a kernel that converts the input itself gives the same result.)
  uint8_t round_input = 0;
};

// Everything Context needs from a compiled definition.
struct Program {
  std::vector<Step> steps;
  std::vector<std::string> reg_names;
  std::vector<int> reg_width;  // widest value each register holds
  int reg_logits = -1;
  bool has_last = false;
  std::vector<RopeSpec> ropes;
  std::vector<AttnSpec> attns;
  std::vector<KvLayerSpec> kv;
  std::vector<std::vector<float>> owned;  // 1-D weights converted to f32
  std::deque<TensorView> views;           // stream_matmul: one 2-D view per stream of a 3-D weight
  int n_vocab = 0;                        // logits width
  int64_t embed_rows = INT64_MAX;         // token ids must be below this
  int max_round_width = 0;                // widest matmul input that is rounded (Step::round_input)
};

// LoadOptions::max_program_steps when 0.
constexpr uint64_t kDefaultMaxProgramSteps = 1000000;

class ArchCompiler {
 public:
  ArchCompiler(const ArchDef& d, const ModelDesc& m, Program& p, uint64_t max_steps = 0)
      : d_(d), m_(m), p_(p), max_steps_(max_steps ? max_steps : kDefaultMaxProgramSteps) {}

  Result<void> run() {
    const HParams& hp = m_.hp;
    if (hp.n_layer <= 0 || hp.n_layer > 65536)
      return fail(Errc::bad_format, 0,
                  strf("block_count %lld is not a usable layer count", static_cast<long long>(hp.n_layer)));
    // The compiled size is known before anything is compiled: refuse it before allocating.
    const uint64_t n_steps =
        uint64_t(d_.prologue.size()) + uint64_t(hp.n_layer) * uint64_t(d_.block.size()) + uint64_t(d_.epilogue.size());
    if (n_steps > max_steps_)
      return fail(Errc::out_of_memory, 0,
                  strf("%s.block_count %lld x %zu steps per layer (+ %zu) makes %llu compiled steps, more than the "
                       "limit of %llu (LoadOptions::max_program_steps, --max-program-steps)",
                       m_.arch.c_str(), static_cast<long long>(hp.n_layer), d_.block.size(),
                       d_.prologue.size() + d_.epilogue.size(), static_cast<unsigned long long>(n_steps),
                       static_cast<unsigned long long>(max_steps_)));
    // Tensors of layers the file does not declare would be silently ignored.
    for (const auto& t : m_.tensors) {
      if (t.name.compare(0, 4, "blk.") != 0) continue;
      size_t e = t.name.find('.', 4);
      std::string_view num = std::string_view(t.name).substr(4, e == std::string::npos ? std::string::npos : e - 4);
      if (num.empty() || num.size() > 9 || num.find_first_not_of("0123456789") != std::string_view::npos) continue;
      if (std::stoll(std::string(num)) >= hp.n_layer)
        return fail(
            Errc::shape_mismatch, 0,
            strf("%s.block_count is %lld but the file holds tensor '%s' (layer %s): the count contradicts the tensors",
                 m_.arch.c_str(), static_cast<long long>(hp.n_layer), printable(t.name).c_str(),
                 std::string(num).c_str()));
    }
    p_.steps.reserve(static_cast<size_t>(n_steps));
    if (auto r = eval_params(); !r) return r;
    // which layers are sliding-window layers (from the block's attention arguments), layer by layer
    window_.assign(static_cast<size_t>(hp.n_layer), 0);
    for (const auto& s : d_.block) {
      if (s.op->code != OpCode::attention) continue;
      for (int i = 0; i < hp.n_layer; i++) {
        auto get = [&](const char* kw, double dflt) -> Result<double> {
          const ArgDef* a = s.kwarg(kw);
          return a ? value(a->value, s.line, i) : Result<double>(dflt);
        };
        auto w = get("window", 0), per = get("period", 0);
        if (!w) return w.error();
        if (!per) return per.error();
        auto off = get("offset", *per - 1);
        if (!off) return off.error();
        if (*w < 0 || *w > 1e9 || *per < 0 || *per > 1e9 || *w != std::floor(*w) || *per != std::floor(*per))
          return fail(Errc::bad_format, s.line,
                      strf("sliding window %g / period %g are not usable (layer %d)", *w, *per, i));
        if (*per > 0 && (*off < 0 || *off >= *per || *off != std::floor(*off)))
          return fail(
              Errc::bad_format, s.line,
              strf("offset %g is not a layer within the period %g (0 to %g; layer %d)", *off, *per, *per - 1, i));
        bool slides = *w > 0;
        if (const ArgDef* a = s.kwarg("sliding")) {
          auto v = value(a->value, s.line, i);
          if (!v) return v.error();
          slides = slides && *v != 0;
        } else if (*per > 0) {
          slides = slides && i % static_cast<int>(*per) != static_cast<int>(*off);
        }
        window_[static_cast<size_t>(i)] = slides ? static_cast<int>(*w) : 0;
      }
    }
    if (auto r = plan_kv_reuse(); !r) return r;
    for (const auto& s : d_.prologue)
      if (auto r = stmt(s, -1); !r) return r;
    // the residual stream is n_embd wide
    if (const MetaValue* mv = m_.find_meta(m_.arch + ".embedding_length"); mv && hp.n_embd > 0) {
      int wx = width_[static_cast<size_t>(reg_id("x"))];
      if (wx != hp.n_embd)
        return fail(Errc::shape_mismatch, 0,
                    strf("%s.embedding_length is %lld but the residual 'x' is %d wide (from tensor '%s'): the "
                         "metadata contradicts the tensors",
                         m_.arch.c_str(), static_cast<long long>(hp.n_embd), wx, x_tensor_.c_str()));
    }
    for (int i = 0; i < hp.n_layer; i++)
      for (const auto& s : d_.block)
        if (auto r = stmt(s, i); !r) return r;
    for (const auto& s : d_.epilogue)
      if (auto r = stmt(s, -1); !r) return r;
    p_.reg_logits = reg_id("logits");
    drop_dead_steps();
    p_.n_vocab = width_[static_cast<size_t>(p_.reg_logits)];
    if (p_.n_vocab <= 0) return fail(Errc::shape_mismatch, 0, "'logits' has no width");
    if (auto r = check_vocabulary(); !r) return r;
    p_.reg_width = max_width_;
    return {};
  }

 private:
  // Every id the output can produce must be one the embedding can read back; a GGUF vocabulary has
  // exactly one token per output row (as llama.cpp requires). Hugging Face tokenizers may differ from
  // the rows either way (padded embeddings; gemma3's tokenizer.json has one token more than its
  // 262144 rows), so only {arch}.vocab_size (config.json's) is checked against them.
  Result<void> check_vocabulary() const {
    const std::string out = logits_tensor_.empty() ? std::string("'logits'") : "'" + logits_tensor_ + "'";
    const long long nv = p_.n_vocab;
    if (p_.embed_rows != INT64_MAX && p_.n_vocab > p_.embed_rows)
      return fail(Errc::shape_mismatch, 0,
                  strf("the output %s gives %lld logits but the embedding '%s' has %lld rows: ids it produces could "
                       "not be read back",
                       out.c_str(), nv, rows_tensor_.c_str(), static_cast<long long>(p_.embed_rows)));
    const size_t n_tokens = m_.vocab.tokens.size();
    if (m_.format == FileFormat::gguf && n_tokens > 0 && n_tokens != static_cast<size_t>(p_.n_vocab))
      return fail(Errc::shape_mismatch, 0,
                  strf("the vocabulary (tokenizer.ggml.tokens) has %zu tokens but the output %s gives %lld logits",
                       n_tokens, out.c_str(), nv));
    if (auto v = m_.arch_number("vocab_size"); v && *v != static_cast<double>(p_.n_vocab))
      return fail(
          Errc::shape_mismatch, 0,
          strf("%s.vocab_size is %g but the output %s gives %lld logits", m_.arch.c_str(), *v, out.c_str(), nv));
    return {};
  }

  Error fail(Errc code, int line, const std::string& msg) const {
    std::string where = line > 0 ? strf("%s:%d", d_.where.c_str(), line) : d_.where;
    return make_error(code, m_.path + ": " + where + ": " + msg);
  }

  bool sliding(int layer) const { return layer >= 0 && window_[static_cast<size_t>(layer)] > 0; }

  // attention(..., reuse_kv_from = F): the layers from F on keep no cache of their own; each reads
  // the cache of the last layer below F of the same kind (sliding or global), which that layer has
  // written earlier in the same evaluation. F >= n_layer (or inf): no layer reuses.
  Result<void> plan_kv_reuse() {
    const int n_layer = static_cast<int>(m_.hp.n_layer);
    kv_src_.assign(static_cast<size_t>(n_layer), -1);
    layer_kv_.assign(static_cast<size_t>(n_layer), -1);
    for (const auto& s : d_.block) {
      const ArgDef* a = s.op->code == OpCode::attention ? s.kwarg("reuse_kv_from") : nullptr;
      if (!a) continue;
      for (int i = 0; i < n_layer; i++) {
        auto f = value(a->value, s.line, i);
        if (!f) return f.error();
        if (!(*f >= 1) || *f != std::floor(*f))
          return fail(Errc::bad_format, s.line,
                      strf("reuse_kv_from = %g is not a layer index of 1 or more (layer %d)", *f, i));
        if (*f >= n_layer || i < *f) continue;
        const int first = static_cast<int>(*f);
        const bool kind = window_[static_cast<size_t>(i)] > 0;
        int src = -1;
        for (int j = first - 1; j >= 0 && src < 0; j--)
          if ((window_[static_cast<size_t>(j)] > 0) == kind) src = j;
        if (src < 0)
          return fail(Errc::shape_mismatch, s.line,
                      strf("layer %d reuses the cache of the last %s layer below %d, and there is none", i,
                           kind ? "sliding-window" : "global", first));
        if (window_[static_cast<size_t>(src)] != window_[static_cast<size_t>(i)])
          return fail(Errc::shape_mismatch, s.line,
                      strf("layer %d (window %d) would read the cache of layer %d (window %d): the windows differ", i,
                           window_[static_cast<size_t>(i)], src, window_[static_cast<size_t>(src)]));
        kv_src_[static_cast<size_t>(i)] = src;
      }
    }
    return {};
  }

  // Drops the steps whose result nothing reads (walking back from the logits): the key and value
  // projections of layers that reuse another layer's cache, since every layer compiles the same
  // block. A step with an effect beyond its register stays: attention that writes a cache, last().
  void drop_dead_steps() {
    std::vector<char> live(p_.reg_names.size(), 0);
    live[static_cast<size_t>(p_.reg_logits)] = 1;
    std::vector<char> keep(p_.steps.size(), 0);
    for (size_t k = p_.steps.size(); k-- > 0;) {
      const Step& st = p_.steps[k];
      const bool effect =
          st.op == OpCode::last || (st.op == OpCode::attention && !p_.attns[static_cast<size_t>(st.idx)].shared);
      if (!effect && !live[static_cast<size_t>(st.dst)]) continue;
      keep[k] = 1;
      live[static_cast<size_t>(st.dst)] = 0;
      for (int16_t r : {st.a, st.b, st.c})
        if (r >= 0) live[static_cast<size_t>(r)] = 1;
    }
    size_t n = 0;
    for (size_t k = 0; k < p_.steps.size(); k++)
      if (keep[k]) p_.steps[n++] = p_.steps[k];
    p_.steps.resize(n);
  }

  std::string expand(const std::string& name, int layer) const {
    std::string out;
    size_t k = 0;
    for (;;) {
      size_t b = name.find('{', k);
      if (b == std::string::npos) break;
      size_t e = name.find('}', b);
      out.append(name, k, b - k);
      std::string ph = name.substr(b + 1, e - b - 1);
      out += ph == "i" ? std::to_string(layer) : ph == "arch" ? m_.arch : std::string();
      k = e + 1;
    }
    out.append(name, k, std::string::npos);
    return out;
  }

  Result<double> builtin_value(const std::string& n) const {
    const HParams& hp = m_.hp;
    if (n == "n_embd") return double(hp.n_embd);
    if (n == "n_layer") return double(hp.n_layer);
    if (n == "n_head") return double(hp.n_head);
    if (n == "n_head_kv") return double(hp.n_head_kv);
    if (n == "head_dim") return double(hp.head_dim);
    if (n == "head_dim_v") return double(hp.head_dim_v);
    if (n == "n_ff") return double(hp.n_ff);
    if (n == "n_vocab") return double(hp.n_vocab);
    if (n == "n_ctx_train") return double(hp.n_ctx_train);
    if (n == "rms_eps") return double(hp.rms_eps);
    if (n == "rope_base") return double(hp.rope_freq_base);
    if (n == "rope_dims") return m_.arch_number("rope.dimension_count").value_or(double(hp.head_dim));
    if (n == "norm_eps") return m_.arch_number("attention.layer_norm_epsilon").value_or(1e-5);
    if (n == "inf") return double(INFINITY);
    return make_error(Errc::internal, "unknown value " + n);
  }

  // A param's value: a number, one number per layer (a metadata array), or a term (evaluated where
  // it is used, per layer when it uses every()).
  struct ParamValue {
    std::string name;
    double num = 0;
    std::vector<double> per_layer;  // non-empty: a metadata array, one value per layer
    std::string key;                // that array's key (messages)
    const ValueTerm* term = nullptr;
  };

  // Evaluates a value at `layer` (-1: outside the block) in double.
  Result<double> value(const ValueTerm& t, int line, int layer = -1, int depth = 0) const {
    if (depth > 256) return fail(Errc::archdef, line, "a value nests too deep");
    double v = 0;
    auto kid = [&](size_t k) { return value(t.kids[k], line, layer, depth + 1); };
    switch (t.fn) {
      case ValueTerm::Fn::number: v = t.number; break;
      case ValueTerm::Fn::name: {
        if (t.name == "layer") {
          if (layer < 0)
            return fail(Errc::archdef, line, "'layer' (the layer's index) is only defined in the 'block' section");
          v = layer;
          break;
        }
        const ParamValue* pv = nullptr;
        for (const auto& p : params_)
          if (p.name == t.name) pv = &p;
        if (!pv) {
          auto b = builtin_value(t.name);
          if (!b) return fail(Errc::archdef, line, "no value named '" + t.name + "'");
          v = *b;
        } else if (pv->term) {
          auto r = value(*pv->term, line, layer, depth + 1);
          if (!r) return r;
          v = *r;
        } else if (!pv->per_layer.empty()) {
          if (layer < 0)
            return fail(Errc::archdef, line,
                        "param '" + pv->name + "' reads the metadata array '" + pv->key +
                            "' (one value per layer): only the 'block' section can use it");
          v = pv->per_layer[static_cast<size_t>(layer)];
        } else {
          v = pv->num;
        }
        break;
      }
      case ValueTerm::Fn::add:
      case ValueTerm::Fn::sub:
      case ValueTerm::Fn::mul:
      case ValueTerm::Fn::div: {
        auto a = kid(0);
        if (!a) return a;
        auto b = kid(1);
        if (!b) return b;
        if (t.fn == ValueTerm::Fn::div && *b == 0) return fail(Errc::bad_format, line, strf("division of %g by 0", *a));
        v = t.fn == ValueTerm::Fn::add   ? *a + *b
            : t.fn == ValueTerm::Fn::sub ? *a - *b
            : t.fn == ValueTerm::Fn::mul ? *a * *b
                                         : *a / *b;
        break;
      }
      case ValueTerm::Fn::neg: {
        auto a = kid(0);
        if (!a) return a;
        v = -*a;
        break;
      }
      case ValueTerm::Fn::sqrt:
      case ValueTerm::Fn::rsqrt: {
        auto a = kid(0);
        if (!a) return a;
        if (t.fn == ValueTerm::Fn::sqrt) {
          if (!(*a >= 0)) return fail(Errc::bad_format, line, strf("sqrt of %g", *a));
          v = std::sqrt(*a);
        } else {
          if (!(*a > 0)) return fail(Errc::bad_format, line, strf("rsqrt of %g", *a));
          v = 1.0 / std::sqrt(*a);
        }
        break;
      }
      case ValueTerm::Fn::every: {
        auto per = kid(0);
        if (!per) return per;
        auto off = kid(1);
        if (!off) return off;
        if (!(*per >= 1) || *per > 1e9 || *per != std::floor(*per) || !(*off >= 0) || *off >= *per ||
            *off != std::floor(*off))
          return fail(Errc::bad_format, line,
                      strf("every(%g, %g): the period must be a whole number >= 1 and the offset "
                           "a whole number below it",
                           *per, *off));
        if (layer < 0) return fail(Errc::archdef, line, "every() needs a layer: only the 'block' section can use it");
        v = layer % static_cast<int64_t>(*per) == static_cast<int64_t>(*off) ? 1 : 0;
        break;
      }
      case ValueTerm::Fn::less: {
        auto a = kid(0);
        if (!a) return a;
        auto b = kid(1);
        if (!b) return b;
        v = *a < *b ? 1 : 0;
        break;
      }
      case ValueTerm::Fn::where: {
        auto c = kid(0);
        if (!c) return c;
        auto r = kid(*c != 0 ? 1 : 2);  // only the branch chosen is evaluated
        if (!r) return r;
        v = *r;
        break;
      }
    }
    // infinities are values (inf; a metadata array's "off" entries); each use checks its range
    if (std::isnan(v)) return fail(Errc::bad_format, line, "a value is not a number (NaN)");
    return v;
  }

  // Whether a term names a param that differs per layer (a metadata array, or every()).
  bool refs_per_layer(const ValueTerm& t) const {
    if (t.fn == ValueTerm::Fn::every) return true;
    if (t.fn == ValueTerm::Fn::name && t.name == "layer") return true;
    if (t.fn == ValueTerm::Fn::name)
      for (const auto& p : params_)
        if (p.name == t.name) return !p.per_layer.empty() || (p.term && refs_per_layer(*p.term));
    for (const auto& k : t.kids)
      if (refs_per_layer(k)) return true;
    return false;
  }

  Result<void> eval_params() {
    for (const auto& p : d_.params) {
      bool done = false;
      std::string tried;
      for (const auto& a : p.alts) {
        ParamValue pv;
        pv.name = p.name;
        if (a.is_meta) {
          std::string key = expand(a.key, -1);
          const MetaValue* mv = m_.find_meta(key);
          const std::vector<double>* arr = m_.find_meta_array(key);
          if (!mv && !arr) {
            tried += (tried.empty() ? "" : ", ") + key;
            continue;
          }
          if (mv && mv->kind == MetaValue::Kind::string)
            return fail(Errc::bad_format, p.line,
                        "metadata '" + key + "' is a string, param '" + p.name + "' needs a number");
          if (arr) {
            if (arr->size() != static_cast<size_t>(m_.hp.n_layer))
              return fail(
                  Errc::shape_mismatch, p.line,
                  strf("metadata '%s' is an array of %zu values, param '%s' needs one per layer (%s.block_count "
                       "is %lld)",
                       key.c_str(), arr->size(), p.name.c_str(), m_.arch.c_str(),
                       static_cast<long long>(m_.hp.n_layer)));
            for (double x : *arr)
              if (std::isnan(x)) return fail(Errc::bad_format, p.line, "metadata '" + key + "' holds a NaN");
            // nonzero(KEY) on an array: absent when every value is 0
            if (a.nonzero && std::all_of(arr->begin(), arr->end(), [](double x) { return x == 0; })) {
              tried += (tried.empty() ? "" : ", ") + key + " (all 0)";
              continue;
            }
            pv.per_layer = *arr;
            pv.key = key;
          } else {
            if (std::isnan(mv->num)) return fail(Errc::bad_format, p.line, "metadata '" + key + "' is a NaN");
            if (a.nonzero && mv->num == 0) {
              tried += (tried.empty() ? "" : ", ") + key + " (0)";
              continue;
            }
            pv.num = mv->num;
          }
        } else if (a.term.per_layer || refs_per_layer(a.term)) {
          pv.term = &a.term;  // evaluated per layer where it is used
        } else {
          auto v = value(a.term, p.line);
          if (!v) return v.error();
          pv.num = *v;
        }
        params_.push_back(std::move(pv));
        done = true;
        break;
      }
      if (!done)
        return fail(Errc::bad_format, p.line,
                    "param '" + p.name + "': the model has no metadata " + tried + " and the param gives no default");
    }
    return {};
  }

  int reg_id(const std::string& name) {
    for (size_t k = 0; k < p_.reg_names.size(); k++)
      if (p_.reg_names[k] == name) return static_cast<int>(k);
    p_.reg_names.push_back(name);
    width_.push_back(0);
    max_width_.push_back(0);
    return static_cast<int>(p_.reg_names.size() - 1);
  }

  void set_width(int r, int w) {
    width_[static_cast<size_t>(r)] = w;
    max_width_[static_cast<size_t>(r)] = std::max(max_width_[static_cast<size_t>(r)], w);
  }

  // The first existing alternative, or nullptr (then `missing` lists the names tried).
  const TensorView* find_tensor(const ArgDef& a, int layer, std::string& missing) const {
    missing.clear();
    for (const auto& n : a.tensors) {
      std::string name = expand(n, layer);
      if (const TensorView* t = m_.find(name)) return t;
      missing += (missing.empty() ? "'" : " | '") + name + "'";
    }
    return nullptr;
  }

  Error missing_tensor(const ArgDef& a, int layer, int line, const std::string& tried) const {
    std::vector<std::string> names;
    for (const auto& t : m_.tensors) names.push_back(t.name);
    std::string first = expand(a.tensors[0], layer);
    return fail(Errc::tensor_missing, line, "tensor " + tried + " not found in the model" + did_you_mean(first, names));
  }

  Result<void> check_computable(const TensorView& t, int line) const {
    if (dtype_computable(t.type)) return {};
    std::string ok;
    for (const DTypeTraits& tr : kDTypeTraits)
      if (tr.computable) ok += (ok.empty() ? "" : ", ") + std::string(tr.name);
    return fail(Errc::unsupported, line,
                strf("tensor '%s' has type %s, which this build cannot compute yet (it computes %s)", t.name.c_str(),
                     dtype_name(t.type), ok.c_str()));
  }

  // A 1-D weight as f32 (converted once; shared by every step that uses it). `flat`: any shape,
  // read row after row (a weight per head: [head_dim, n_head]); `offset` is added to every element
  // (norm weights stored as w - offset).
  Result<const float*> vector_of(const TensorView& t, int line, int64_t expect_len, const char* what, bool flat = false,
                                 float offset = 0) {
    if (!flat && t.nelements() != t.ne[0])
      return fail(Errc::shape_mismatch, line,
                  strf("%s '%s' should be a vector, it has shape %s", what, t.name.c_str(), t.shape_string().c_str()));
    const int64_t n = t.nelements();
    if (expect_len >= 0 && n != expect_len)
      return fail(Errc::shape_mismatch, line,
                  strf("%s '%s' has %lld elements, expected %lld", what, t.name.c_str(), static_cast<long long>(n),
                       static_cast<long long>(expect_len)));
    if (n <= 0 || n > (int64_t(1) << 28))
      return fail(Errc::shape_mismatch, line,
                  strf("%s '%s' has %lld elements", what, t.name.c_str(), static_cast<long long>(n)));
    if (auto r = check_computable(t, line); !r) return r.error();
    auto it = vec_index_.find({&t, offset});
    if (it != vec_index_.end()) return static_cast<const float*>(p_.owned[it->second].data());
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t r = 0; r < t.rows(); r++) dequant_row(t, r, v.data() + r * t.ne[0]);
    for (float& x : v) {
      if (!std::isfinite(x))
        return fail(Errc::bad_format, line, "tensor '" + t.name + "' holds a value that is not finite");
      if (offset != 0) x = x + offset;
    }
    p_.owned.push_back(std::move(v));
    vec_index_[{&t, offset}] = p_.owned.size() - 1;
    return static_cast<const float*>(p_.owned.back().data());
  }

  // What Hugging Face checkpoints subtract from norm weights (Gemma: w - 1): the definition's
  // `convention hf_norm_offset`, else the loader's table by model_type. 0 for other formats.
  float norm_offset() const {
    if (m_.format != FileFormat::safetensors) return 0;
    if (const ConventionDef* c = d_.convention("hf_norm_offset")) return static_cast<float>(c->number);
    return m_.hf_norm_offset;
  }

  Result<float> fvalue(const StmtDef& s, const char* kw, double dflt) const {
    const ArgDef* a = s.kwarg(kw);
    if (!a) {
      if (!std::isfinite(static_cast<float>(dflt)))
        return fail(Errc::bad_format, s.line, strf("the model's default %s (%g) is not a finite float", kw, dflt));
      return static_cast<float>(dflt);
    }
    auto v = value(a->value, s.line, cur_layer_);
    if (!v) return v.error();
    float f = static_cast<float>(*v);
    if (!std::isfinite(f)) return fail(Errc::bad_format, s.line, strf("%s = %g does not fit a float", kw, *v));
    return f;
  }

  Result<int> rope_spec(const StmtDef& s, int layer, int width) {
    const HParams& hp = m_.hp;
    RopeSpec r;
    r.head_dim = static_cast<int>(hp.head_dim);
    if (r.head_dim <= 0 || width % r.head_dim != 0)
      return fail(Errc::shape_mismatch, s.line,
                  strf("rope: '%s' (%d wide) is not a whole number of heads of head_dim %d", s.args[0].word.c_str(),
                       width, r.head_dim));
    // Hugging Face checkpoints keep q/k in rotate-half order: the GGUF "pairs" layout is then
    // the same rotation as "neox" on those rows (the loader does not permute them). The definition's
    // `convention hf_rope` says so (default neox); as_written keeps the layout as written.
    const ConventionDef* hc = d_.convention("hf_rope");
    const bool hf_as_neox = !hc || hc->value == "neox";
    r.neox = s.args[1].word == "neox" || (m_.hf_qk_order && hf_as_neox);
    double dims = 0;
    if (const ArgDef* a = s.kwarg("dims")) {
      auto v = value(a->value, s.line, layer);
      if (!v) return v.error();
      dims = *v;
    } else {
      dims = *builtin_value("rope_dims");
    }
    if (dims <= 0 || dims > r.head_dim || dims != std::floor(dims) || static_cast<int>(dims) % 2 != 0)
      return fail(Errc::shape_mismatch, s.line,
                  strf("rope: %g rotated dimensions do not fit heads of %d", dims, r.head_dim));
    r.n_dims = static_cast<int>(dims);
    auto base = fvalue(s, "base", hp.rope_freq_base);
    if (!base) return base.error();
    r.base = *base;
    if (sliding(layer) && s.kwarg("base_swa")) {
      auto b = fvalue(s, "base_swa", 0);
      if (!b) return b.error();
      r.base = *b;
    }
    if (!(r.base > 0) || !std::isfinite(r.base))
      return fail(Errc::bad_format, s.line, strf("rope base %g is not a positive finite number", double(r.base)));
    r.theta_scale = std::pow(r.base, -2.0f / static_cast<float>(r.n_dims));
    // frequency scaling: a factors tensor (llama-3 GGUF), else what the metadata says
    const TensorView* ft = nullptr;
    if (const ArgDef* a = s.kwarg("factors")) {
      std::string tried;
      ft = find_tensor(*a, layer, tried);
      if (!ft && !a->optional) return missing_tensor(*a, layer, s.line, tried);
    }
    std::string type(m_.meta_string(m_.arch + ".rope.scaling.type").value_or(""));
    double factor = m_.arch_number("rope.scaling.factor").value_or(1.0);
    if (ft) {
      auto v = vector_of(*ft, s.line, -1, "rope factors");
      if (!v) return v.error();
      if (ft->ne[0] < r.n_dims / 2)
        return fail(Errc::shape_mismatch, s.line,
                    strf("rope factors '%s' has %lld entries, rope needs %d", ft->name.c_str(),
                         static_cast<long long>(ft->ne[0]), r.n_dims / 2));
      r.factors.assign(*v, *v + r.n_dims / 2);
      for (float f : r.factors)
        if (!(f > 0))
          return fail(Errc::bad_format, s.line,
                      strf("rope factors '%s' holds %g: the factors divide the angle, they must be positive",
                           ft->name.c_str(), double(f)));
    } else if (type == "llama3") {
      // Hugging Face llama-3 configs: the same factors convert_hf_to_gguf bakes into rope_freqs.
      double lo = m_.arch_number("rope.scaling.low_freq_factor").value_or(1.0);
      double hi = m_.arch_number("rope.scaling.high_freq_factor").value_or(4.0);
      double orig = m_.arch_number("rope.scaling.original_context_length").value_or(8192.0);
      if (!(factor > 0) || !(hi > lo) || !(orig > 0) || !std::isfinite(factor) || !std::isfinite(hi) ||
          !std::isfinite(lo) || !std::isfinite(orig))
        return fail(Errc::bad_format, s.line,
                    "rope scaling 'llama3' has unusable factor / low_freq_factor / high_freq_factor");
      double lo_wl = orig / lo, hi_wl = orig / hi;
      for (int i = 0; i < r.n_dims / 2; i++) {
        double freq = std::pow(double(r.base), -2.0 * i / r.n_dims);
        double wl = 2 * 3.14159265358979323846 / freq;
        double f;
        if (wl < hi_wl)
          f = 1.0;
        else if (wl > lo_wl)
          f = factor;
        else {
          double smooth = (orig / wl - lo) / (hi - lo);
          f = 1.0 / ((1 - smooth) / factor + smooth);
        }
        r.factors.push_back(static_cast<float>(f));
      }
    } else if (type == "linear") {
      if (!(factor > 0) || !std::isfinite(factor))
        return fail(Errc::bad_format, s.line,
                    strf("rope scaling 'linear': %s.rope.scaling.factor %g is not usable", m_.arch.c_str(), factor));
      r.freq_scale = static_cast<float>(1.0 / factor);
    } else if (!type.empty() && type != "none") {
      return fail(Errc::unsupported, s.line,
                  "rope scaling '" + printable(type) + "' is not supported (none, linear, llama3)");
    }
    for (size_t k = 0; k < p_.ropes.size(); k++)
      if (p_.ropes[k].same(r)) return static_cast<int>(k);
    p_.ropes.push_back(std::move(r));
    return static_cast<int>(p_.ropes.size() - 1);
  }

  // convention matmul_input (default gguf_rounded): ggml multiplies an F16/BF16 weight by
  // activations rounded to that type; safetensors checkpoints are computed in f32
  uint8_t round_input(const TensorView& t, int w_in) {
    const ConventionDef* mc = d_.convention("matmul_input");
    uint8_t r = 0;
    if (m_.format == FileFormat::gguf && (!mc || mc->value == "gguf_rounded"))
      r = t.type == DType::f16 ? 1 : t.type == DType::bf16 ? 2 : 0;
    if (r) p_.max_round_width = std::max(p_.max_round_width, w_in);
    return r;
  }

  // A count of streams: a whole number from 1 to 256.
  Result<int> stream_count(const StmtDef& s, const ArgDef& a, int w_a) {
    auto v = value(a.value, s.line, cur_layer_);
    if (!v) return v.error();
    if (!(*v >= 1) || *v > 256 || *v != std::floor(*v))
      return fail(Errc::bad_format, s.line, strf("%s: %g streams (a whole number from 1 to 256)", s.op->name, *v));
    const int n = static_cast<int>(*v);
    if (s.op->code != OpCode::streams && w_a % n != 0)
      return fail(
          Errc::shape_mismatch, s.line,
          strf("%s: '%s' (%d wide) is not %d streams of equal width", s.op->name, s.args[0].word.c_str(), w_a, n));
    return n;
  }

  // stream_matmul(X, W): the streams of X are [S][D]; W is [D, D, n] (n matrices, D to D): stream
  // S - n + k becomes W[k] times it. W may also name one [D, D] tensor per stream with {k}
  // (altup_proj.{k}.weight: k = 0, 1, ... while they exist). Compiled as slice, matmul and put for
  // each of the n streams, with a 2-D view of each matrix.
  Result<void> stream_matmul(const StmtDef& s, const Step& st, int layer, int w_a) {
    const ArgDef& arg = s.args[1];
    std::vector<const TensorView*> parts;  // one [D, D] per stream ({k})
    const TensorView* t = nullptr;         // or one [D, D, n]
    std::string tried;
    auto with_k = [&](std::string n, int k) {  // {k} first: expand() drops the placeholders it does not know
      for (size_t p = n.find("{k}"); p != std::string::npos; p = n.find("{k}", p)) n.replace(p, 3, std::to_string(k));
      return expand(n, layer);
    };
    for (const auto& n : arg.tensors) {
      if (n.find("{k}") == std::string::npos) {
        t = m_.find(expand(n, layer));
        if (t) break;
        tried += (tried.empty() ? "'" : " | '") + expand(n, layer) + "'";
        continue;
      }
      for (int k = 0; k <= w_a; k++) {  // at most one per stream (checked below)
        const TensorView* p = m_.find(with_k(n, k));
        if (!p) break;
        parts.push_back(p);
      }
      if (!parts.empty()) break;
      tried += (tried.empty() ? "'" : " | '") + with_k(n, 0) + "'";
    }
    if (!t && parts.empty()) {
      if (arg.optional) return {};
      std::vector<std::string> names;
      for (const auto& v : m_.tensors) names.push_back(v.name);
      return fail(Errc::tensor_missing, s.line,
                  "tensor " + tried + " not found in the model" + did_you_mean(with_k(arg.tensors[0], 0), names));
    }
    const int64_t D = t ? t->ne[0] : parts[0]->ne[0];
    const int64_t n64 = t ? t->ne[2] : static_cast<int64_t>(parts.size());
    auto bad_shape = [&](const TensorView& v, const char* want) {
      return fail(
          Errc::shape_mismatch, s.line,
          strf("stream_matmul: weight '%s' %s does not map the streams of '%s' (%d wide) to themselves: it must "
               "be %s with D the width of a stream and n at most the number of streams",
               v.name.c_str(), v.shape_string().c_str(), s.args[0].word.c_str(), w_a, want));
    };
    if (t && (t->n_dims < 2 || t->n_dims > 3 || t->ne[3] != 1 || t->ne[1] != D || D <= 0 || w_a % D != 0 ||
              t->ne[2] > w_a / D))
      return bad_shape(*t, "[D, D, n]");
    for (const TensorView* p : parts)
      if (p->n_dims != 2 || p->ne[0] != D || p->ne[1] != D || D <= 0 || w_a % D != 0 || n64 > w_a / D)
        return bad_shape(*p, "n tensors [D, D]");
    for (const TensorView* p : parts)
      if (auto r = check_computable(*p, s.line); !r) return r;
    if (t)
      if (auto r = check_computable(*t, s.line); !r) return r;
    const int n = static_cast<int>(n64), first = static_cast<int>(w_a / D) - n;
    if (p_.steps.size() + 3 * static_cast<uint64_t>(n) > max_steps_)
      return fail(Errc::out_of_memory, s.line,
                  strf("stream_matmul over %d streams makes more than the limit of %llu compiled steps "
                       "(LoadOptions::max_program_steps, --max-program-steps)",
                       n, static_cast<unsigned long long>(max_steps_)));
    const std::string& x = s.args[0].word;
    const int rx = reg_id(x), rin = reg_id(x + "#in"), rout = reg_id(x + "#out");
    for (int k = 0; k < n; k++) {
      if (t) {
        const uint64_t rb = weight_row_bytes(*t);
        const uint64_t aux_row = t->scales ? t->aux_bytes() / 2 / static_cast<uint64_t>(t->rows()) : 0;
        TensorView v = *t;
        const uint64_t skip = static_cast<uint64_t>(k) * static_cast<uint64_t>(D);  // rows before matrix k
        v.name = strf("%s[%d]", t->name.c_str(), k);
        v.n_dims = 2;
        v.ne[2] = 1;
        v.data = t->data + skip * rb;
        v.nbytes = static_cast<uint64_t>(D) * rb;
        v.file_offset = t->file_offset + skip * rb;
        if (t->scales) {
          v.scales = t->scales + skip * aux_row;
          v.biases = t->biases + skip * aux_row;
        }
        p_.views.push_back(std::move(v));
      } else {
        p_.views.push_back(*parts[static_cast<size_t>(k)]);
      }
      const int col = (first + k) * static_cast<int>(D);
      Step a = st, m = st, b = st;
      a.op = OpCode::slice;
      a.a = static_cast<int16_t>(rx);
      a.dst = static_cast<int16_t>(rin);
      a.w_in = w_a;
      a.w_out = static_cast<int>(D);
      a.off = col;
      set_width(rin, a.w_out);
      m.op = OpCode::matmul;
      m.a = static_cast<int16_t>(rin);
      m.dst = static_cast<int16_t>(rout);
      m.w = &p_.views.back();
      m.w_in = m.w_out = static_cast<int>(D);
      m.round_input = round_input(*m.w, m.w_in);
      set_width(rout, m.w_out);
      b.op = OpCode::put;
      b.a = b.dst = static_cast<int16_t>(rx);
      b.b = static_cast<int16_t>(rout);
      b.w_in = b.w_out = w_a;
      b.off = col;
      b.vec_len = static_cast<int>(D);
      for (const Step& e : {a, m, b}) p_.steps.push_back(e);
    }
    return {};
  }

  // ---- one statement: its arguments resolved here, the rest by its op's rule ----
  // A statement being compiled, as its op's rule sees it: `st` has its op, section, layer, line and
  // first register (a, w_in) set; `t` is its positional tensor (embed: args[0]; norms, matmul,
  // add_bias, mul_weight: args[1]), nullptr for an op without one; `w_out`, the width of the
  // target, starts as w_a (the first register's) and is the rule's to change.
  struct Stmt {
    const StmtDef& s;
    int layer;
    Step& st;
    const TensorView* t;
    int w_a;
    int w_out;
  };
  // What a rule decides: emit the step, or leave it out of this layer (a value that turns it off).
  enum class Emit { step, none };
  using Rule = Result<Emit> (ArchCompiler::*)(Stmt&);

  // The rule of each op: the checks its arguments need and the Step fields it fills. The
  // elementwise ops need none; stream_matmul compiles into steps of its own (stream_matmul()).
  static Rule rule(OpCode op) {
    switch (op) {
      case OpCode::embed: return &ArchCompiler::embed_rule;
      case OpCode::rms_norm:
      case OpCode::norm_heads: return &ArchCompiler::rms_norm_rule;
      case OpCode::layer_norm:
      case OpCode::layer_norm_heads: return &ArchCompiler::layer_norm_rule;
      case OpCode::matmul: return &ArchCompiler::matmul_rule;
      case OpCode::add_bias:
      case OpCode::mul_weight: return &ArchCompiler::row_vector_rule;
      case OpCode::rope: return &ArchCompiler::rope_rule;
      case OpCode::attention: return &ArchCompiler::attention_rule;
      case OpCode::sub:
      case OpCode::mul:
      case OpCode::add: return &ArchCompiler::binary_rule;
      case OpCode::scale:
      case OpCode::softcap: return &ArchCompiler::scalar_rule;
      case OpCode::slice: return &ArchCompiler::slice_rule;
      case OpCode::put: return &ArchCompiler::put_rule;
      case OpCode::rms_normalize: return &ArchCompiler::rms_normalize_rule;
      case OpCode::gaussian_topk: return &ArchCompiler::gaussian_topk_rule;
      case OpCode::streams:
      case OpCode::match_norm:
      case OpCode::stream_mean: return &ArchCompiler::streams_rule;
      case OpCode::stream_mix: return &ArchCompiler::stream_mix_rule;
      case OpCode::stream_axpy:
      case OpCode::stream_add: return &ArchCompiler::stream_update_rule;
      case OpCode::last: return &ArchCompiler::last_rule;
      case OpCode::silu:
      case OpCode::gelu:
      case OpCode::gelu_tanh:
      case OpCode::relu:
      case OpCode::copy:
      case OpCode::stream_matmul: return nullptr;
    }
    return nullptr;
  }

  // Compiles one statement for `layer` (-1: prologue / epilogue) into a step, or into none (a step
  // skipped in this layer, an optional tensor the model does not have).
  Result<void> stmt(const StmtDef& s, int layer) {
    cur_layer_ = layer;
    if (const ArgDef* a = s.kwarg("skip")) {  // left out of the layers where the value is not 0
      auto v = value(a->value, s.line, layer);
      if (!v) return v.error();
      if (*v != 0) return {};
    }
    Step st;
    st.op = s.op->code;
    st.section = s.section;
    st.layer = layer;
    st.line = s.line;
    int w_a = 0;
    if (!s.args.empty() && s.args[0].kind == 'r') {
      st.a = static_cast<int16_t>(reg_id(s.args[0].word));
      w_a = width_of(s.args[0].word);
    }
    st.w_in = w_a;
    if (st.op == OpCode::stream_matmul) return stream_matmul(s, st, layer, w_a);  // finds its tensors itself
    const TensorView* t = nullptr;
    for (const auto& a : s.args) {
      if (a.kind != 't') continue;
      std::string tried;
      t = find_tensor(a, layer, tried);
      if (!t) {
        if (a.optional) return {};  // an optional step the model does not have
        return missing_tensor(a, layer, s.line, tried);
      }
    }
    Stmt in{s, layer, st, t, w_a, w_a};
    if (const Rule r = rule(st.op)) {
      auto e = (this->*r)(in);
      if (!e) return e.error();
      if (*e == Emit::none) return {};
    }
    const std::string& tgt = s.target();
    int d = reg_id(tgt);
    st.dst = static_cast<int16_t>(d);
    st.w_out = in.w_out;
    if (in.w_out <= 0) return fail(Errc::shape_mismatch, s.line, "'" + tgt + "' would have no elements");
    set_width(d, in.w_out);
    p_.steps.push_back(st);
    return {};
  }

  int width_of(const std::string& reg) { return width_[static_cast<size_t>(reg_id(reg))]; }

  // eps = (default dflt): a norm's epsilon, not negative.
  Result<void> set_eps(Stmt& c, double dflt) {
    auto eps = fvalue(c.s, "eps", dflt);
    if (!eps) return eps.error();
    c.st.f = *eps;
    if (!(c.st.f >= 0)) return fail(Errc::bad_format, c.s.line, "eps is negative");
    return {};
  }

  // embed(TABLE [, beyond = ROW]): a row of the table per token id.
  Result<Emit> embed_rule(Stmt& c) {
    const StmtDef& s = c.s;
    const TensorView* t = c.t;
    if (t->n_dims != 2)
      return fail(Errc::shape_mismatch, s.line, "embedding '" + t->name + "' is not 2-D: " + t->shape_string());
    if (auto r = check_computable(*t, s.line); !r) return r.error();
    c.st.w = t;
    c.w_out = static_cast<int>(t->ne[0]);
    if (s.kwarg("beyond")) {  // ids past its rows read row `beyond`: the table sets no id limit
      auto b = value(s.kwarg("beyond")->value, s.line, c.layer);
      if (!b) return b.error();
      if (!(*b >= 0) || *b >= static_cast<double>(t->ne[1]) || *b != std::floor(*b) || t->ne[1] > INT32_MAX)
        return fail(Errc::shape_mismatch, s.line,
                    strf("embed: beyond = %g is not a row of '%s' (%lld rows)", *b, t->name.c_str(),
                         static_cast<long long>(t->ne[1])));
      c.st.off = static_cast<int>(*b);
      c.st.vec_len = static_cast<int>(t->ne[1]);
    } else if (t->ne[1] < p_.embed_rows) {
      p_.embed_rows = t->ne[1];
      rows_tensor_ = t->name;
    }
    if (x_tensor_.empty()) x_tensor_ = t->name;
    return Emit::step;
  }

  // rms_norm(X, W) over the row; norm_heads(X, W) over each head (W: one head's weights).
  Result<Emit> rms_norm_rule(Stmt& c) {
    const StmtDef& s = c.s;
    const TensorView* t = c.t;
    const bool heads = c.st.op == OpCode::norm_heads;
    auto v = vector_of(*t, s.line, heads ? -1 : c.w_a, heads ? "head norm" : "norm", false, norm_offset());
    if (!v) return v.error();
    if (heads && (t->ne[0] <= 0 || c.w_a % t->ne[0] != 0))
      return fail(Errc::shape_mismatch, s.line,
                  strf("head norm '%s' (%lld) does not divide '%s' (%d wide)", t->name.c_str(),
                       static_cast<long long>(t->ne[0]), s.args[0].word.c_str(), c.w_a));
    c.st.vec = *v;
    c.st.vec_len = static_cast<int>(t->ne[0]);
    if (auto r = set_eps(c, m_.hp.rms_eps); !r) return r.error();
    return Emit::step;
  }

  // layer_norm(X, W [, bias = B]) over the row; layer_norm_heads over each head of head_dim, with
  // a weight shared by every head or one per head.
  Result<Emit> layer_norm_rule(Stmt& c) {
    const StmtDef& s = c.s;
    const TensorView* t = c.t;
    const char* name = s.op->name;
    const int w_a = c.w_a;
    const bool heads = c.st.op == OpCode::layer_norm_heads;
    const int seg = heads ? static_cast<int>(m_.hp.head_dim) : w_a;
    if (seg <= 0 || w_a % seg != 0)
      return fail(Errc::shape_mismatch, s.line,
                  strf("%s: '%s' (%d wide) is not a whole number of heads of head_dim %d", name, s.args[0].word.c_str(),
                       w_a, seg));
    // the weight: one for the row (layer_norm), one shared by every head or one per head (heads)
    const int64_t nw = t->nelements();
    if (nw != w_a && nw != seg)
      return fail(Errc::shape_mismatch, s.line,
                  heads ? strf("%s: weight '%s' has %lld elements: expected head_dim (%d, shared by every head) or "
                               "the width of '%s' (%d, one weight per head)",
                               name, t->name.c_str(), static_cast<long long>(nw), seg, s.args[0].word.c_str(), w_a)
                        : strf("%s: weight '%s' has %lld elements but '%s' is %d wide", name, t->name.c_str(),
                               static_cast<long long>(nw), s.args[0].word.c_str(), w_a));
    auto v = vector_of(*t, s.line, nw, "norm", true, norm_offset());
    if (!v) return v.error();
    c.st.vec = *v;
    c.st.vec_len = static_cast<int>(nw);
    c.st.off = seg;
    if (const ArgDef* b = s.kwarg("bias")) {
      std::string tried;
      const TensorView* bt = find_tensor(*b, c.layer, tried);
      if (!bt && !b->optional) return missing_tensor(*b, c.layer, s.line, tried);
      if (bt) {
        if (bt->nelements() != nw)
          return fail(Errc::shape_mismatch, s.line,
                      strf("%s: bias '%s' has %lld elements, the weight '%s' %lld", name, bt->name.c_str(),
                           static_cast<long long>(bt->nelements()), t->name.c_str(), static_cast<long long>(nw)));
        auto bv = vector_of(*bt, s.line, nw, "bias", true);
        if (!bv) return bv.error();
        c.st.vec2 = *bv;
      }
    }
    if (auto r = set_eps(c, *builtin_value("norm_eps")); !r) return r.error();
    return Emit::step;
  }

  // matmul(X, W): W is [w_a, rows], a row of X times each of its rows.
  Result<Emit> matmul_rule(Stmt& c) {
    const StmtDef& s = c.s;
    const TensorView* t = c.t;
    if (t->n_dims < 1 || t->ne[2] != 1 || t->ne[3] != 1 || t->n_dims > 2)
      return fail(Errc::shape_mismatch, s.line,
                  "matmul weight '" + t->name + "' is not a matrix: " + t->shape_string());
    if (t->ne[0] != c.w_a)
      return fail(Errc::shape_mismatch, s.line,
                  strf("matmul: '%s' rows have %lld elements but '%s' is %d wide", t->name.c_str(),
                       static_cast<long long>(t->ne[0]), s.args[0].word.c_str(), c.w_a));
    if (t->ne[1] > (1 << 28))
      return fail(Errc::shape_mismatch, s.line, "matmul weight '" + t->name + "' has too many rows");
    if (auto r = check_computable(*t, s.line); !r) return r.error();
    c.st.w = t;
    c.w_out = static_cast<int>(t->ne[1]);
    if (s.target() == "logits") logits_tensor_ = t->name;
    c.st.round_input = round_input(*t, c.w_a);
    return Emit::step;
  }

  // add_bias(X, B) / mul_weight(X, W): a vector as wide as X.
  Result<Emit> row_vector_rule(Stmt& c) {
    auto v = vector_of(*c.t, c.s.line, c.w_a, c.st.op == OpCode::add_bias ? "bias" : "weight");
    if (!v) return v.error();
    c.st.vec = *v;
    c.st.vec_len = c.w_a;
    return Emit::step;
  }

  Result<Emit> rope_rule(Stmt& c) {
    auto r = rope_spec(c.s, c.layer, c.w_a);
    if (!r) return r.error();
    c.st.idx = *r;
    return Emit::step;
  }

  // The heads, window, scale and soft-cap of attention(q, k, v) in a layer.
  Result<AttnSpec> attention_spec(const Stmt& c, int wk, int wv) {
    const StmtDef& s = c.s;
    const HParams& hp = m_.hp;
    const int w_a = c.w_a, layer = c.layer;
    AttnSpec at;
    at.hd_k = static_cast<int>(hp.head_dim);
    at.hd_v = static_cast<int>(hp.head_dim_v);
    if (at.hd_k <= 0 || at.hd_v <= 0 || w_a % at.hd_k || wk % at.hd_k || wv % at.hd_v)
      return fail(
          Errc::shape_mismatch, s.line,
          strf("attention: q (%d), k (%d), v (%d) are not whole heads of %d / %d", w_a, wk, wv, at.hd_k, at.hd_v));
    at.n_head = w_a / at.hd_k;
    at.n_kv = wk / at.hd_k;
    if (at.n_kv <= 0 || at.n_head % at.n_kv != 0 || wv / at.hd_v != at.n_kv)
      return fail(Errc::shape_mismatch, s.line,
                  strf("attention: %d query heads, %d key heads and %d value heads do not group", at.n_head, at.n_kv,
                       wv / at.hd_v));
    for (auto [key, have, declared] :
         {std::tuple<const char*, int, int64_t>{"attention.head_count", at.n_head, hp.n_head},
          {"attention.head_count_kv", at.n_kv, hp.n_head_kv}}) {
      const MetaValue* mv = m_.find_meta(m_.arch + "." + key);
      if (!mv || mv->kind == MetaValue::Kind::string || declared <= 0 || have == declared) continue;
      return fail(Errc::shape_mismatch, s.line,
                  strf("%s.%s is %lld but attention gets %d heads of %d from '%s' (%d wide) and '%s' (%d wide) in "
                       "layer %d: the metadata contradicts the tensors",
                       m_.arch.c_str(), key, static_cast<long long>(declared), have, at.hd_k, s.args[0].word.c_str(),
                       w_a, s.args[1].word.c_str(), wk, layer));
    }
    at.window = sliding(layer) ? window_[static_cast<size_t>(layer)] : 0;
    auto sc = fvalue(s, "scale", 1.0 / std::sqrt(static_cast<float>(at.hd_k)));
    if (!sc) return sc.error();
    // llama.cpp computes the default as 1.0f/sqrtf(float(head_dim))
    at.scale = s.kwarg("scale") ? *sc : 1.0f / std::sqrt(static_cast<float>(at.hd_k));
    auto cap = fvalue(s, "softcap", 0);
    if (!cap) return cap.error();
    at.softcap = *cap;
    if (at.softcap < 0) return fail(Errc::bad_format, s.line, "softcap is negative");
    return at;
  }

  // attention(q, k, v): writes this layer's cache (a new entry of Program::kv) and reads it, or
  // reads the cache of an earlier layer (reuse_kv_from, plan_kv_reuse()).
  Result<Emit> attention_rule(Stmt& c) {
    const StmtDef& s = c.s;
    const int layer = c.layer;
    const int wk = width_of(s.args[1].word), wv = width_of(s.args[2].word);
    auto spec = attention_spec(c, wk, wv);
    if (!spec) return spec.error();
    AttnSpec& at = *spec;
    c.w_out = at.n_head * at.hd_v;
    if (const int src = kv_src_[static_cast<size_t>(layer)]; src >= 0) {  // reads an earlier layer's cache
      at.kv_layer = layer_kv_[static_cast<size_t>(src)];
      at.shared = true;
      const KvLayerSpec& ks = p_.kv[static_cast<size_t>(at.kv_layer)];
      if (ks.n_kv != at.n_kv || ks.hd_k != at.hd_k || ks.hd_v != at.hd_v)
        return fail(
            Errc::shape_mismatch, s.line,
            strf("layer %d reads the cache of layer %d, whose heads differ (%d of %d/%d there, %d of %d/%d here)",
                 layer, src, ks.n_kv, ks.hd_k, ks.hd_v, at.n_kv, at.hd_k, at.hd_v));
      c.st.idx = static_cast<int>(p_.attns.size());
      p_.attns.push_back(at);
      return Emit::step;
    }
    at.kv_layer = static_cast<int>(p_.kv.size());
    layer_kv_[static_cast<size_t>(layer)] = at.kv_layer;
    KvLayerSpec kv;
    kv.n_kv = at.n_kv;
    kv.hd_k = at.hd_k;
    kv.hd_v = at.hd_v;
    kv.window = at.window;
    // the rope last applied to the key register in this layer (to re-rotate cached keys)
    int kreg = reg_id(s.args[1].word);
    for (auto it = p_.steps.rbegin(); it != p_.steps.rend() && it->layer == layer; ++it)
      if (it->op == OpCode::rope && it->dst == kreg) {
        kv.k_rope = it->idx;
        break;
      }
    p_.kv.push_back(kv);
    c.st.b = static_cast<int16_t>(kreg);
    c.st.c = static_cast<int16_t>(reg_id(s.args[2].word));
    c.st.idx = static_cast<int>(p_.attns.size());
    p_.attns.push_back(at);
    return Emit::step;
  }

  // sub / mul / add(A, B): elementwise, A and B as wide.
  Result<Emit> binary_rule(Stmt& c) {
    const StmtDef& s = c.s;
    const int w_b = width_of(s.args[1].word);
    if (w_b != c.w_a)
      return fail(Errc::shape_mismatch, s.line,
                  strf("%s: '%s' is %d wide but '%s' is %d wide", s.op->name, s.args[0].word.c_str(), c.w_a,
                       s.args[1].word.c_str(), w_b));
    c.st.b = static_cast<int16_t>(reg_id(s.args[1].word));
    return Emit::step;
  }

  // scale(X, F [, bias = B]) / softcap(X, C): a float of the definition (softcap 0: no step).
  Result<Emit> scalar_rule(Stmt& c) {
    const StmtDef& s = c.s;
    auto v = value(s.args[1].value, s.line, c.layer);
    if (!v) return v.error();
    c.st.f = static_cast<float>(*v);
    if (!std::isfinite(c.st.f))
      return fail(Errc::bad_format, s.line, strf("%s: %g does not fit a float", s.op->name, *v));
    if (c.st.op == OpCode::scale) {
      auto b = fvalue(s, "bias", 0);
      if (!b) return b.error();
      c.st.f2 = *b;
    }
    if (c.st.op == OpCode::softcap) {
      if (c.st.f < 0) return fail(Errc::bad_format, s.line, "softcap is negative");
      if (c.st.f == 0) return Emit::none;  // no soft-capping for this model
    }
    return Emit::step;
  }

  // slice(X, START, WIDTH): columns of X.
  Result<Emit> slice_rule(Stmt& c) {
    const StmtDef& s = c.s;
    auto a0 = value(s.args[1].value, s.line, c.layer);
    if (!a0) return a0.error();
    auto a1 = value(s.args[2].value, s.line, c.layer);
    if (!a1) return a1.error();
    const double start = *a0, width = *a1;
    if (start < 0 || width < 1 || start != std::floor(start) || width != std::floor(width) || start + width > c.w_a)
      return fail(Errc::shape_mismatch, s.line,
                  strf("slice: columns %g to %g (start %g, width %g) are not within '%s' "
                       "(%d wide)",
                       start, start + width - 1, start, width, s.args[0].word.c_str(), c.w_a));
    c.st.off = static_cast<int>(start);
    c.w_out = static_cast<int>(width);
    return Emit::step;
  }

  // put(X, Y, COL): Y into the columns of X from COL.
  Result<Emit> put_rule(Stmt& c) {
    const StmtDef& s = c.s;
    const int w_b = width_of(s.args[1].word);
    auto v = value(s.args[2].value, s.line, c.layer);
    if (!v) return v.error();
    if (!(*v >= 0) || *v != std::floor(*v) || *v + w_b > c.w_a)
      return fail(Errc::shape_mismatch, s.line,
                  strf("put: '%s' (%d wide) at column %g does not fit in '%s' (%d wide)", s.args[1].word.c_str(), w_b,
                       *v, s.args[0].word.c_str(), c.w_a));
    c.st.b = static_cast<int16_t>(reg_id(s.args[1].word));
    c.st.off = static_cast<int>(*v);
    c.st.vec_len = w_b;
    return Emit::step;
  }

  // rms_normalize(X [, size = N]): RMS-normalizes each group of N (default: the row), no weight.
  Result<Emit> rms_normalize_rule(Stmt& c) {
    const StmtDef& s = c.s;
    double size = c.w_a;
    if (const ArgDef* a = s.kwarg("size")) {
      auto v = value(a->value, s.line, c.layer);
      if (!v) return v.error();
      size = *v;
    }
    if (!(size >= 1) || size != std::floor(size) || c.w_a % static_cast<int>(std::min<double>(size, 1 << 30)) != 0)
      return fail(
          Errc::shape_mismatch, s.line,
          strf("rms_normalize: groups of %g do not divide '%s' (%d wide)", size, s.args[0].word.c_str(), c.w_a));
    c.st.streams = static_cast<int>(size);
    if (auto r = set_eps(c, m_.hp.rms_eps); !r) return r.error();
    return Emit::step;
  }

  // gaussian_topk(X, Z): keeps what lies Z standard deviations above the mean (Z = -inf: no step).
  Result<Emit> gaussian_topk_rule(Stmt& c) {
    const StmtDef& s = c.s;
    auto v = value(s.args[1].value, s.line, c.layer);
    if (!v) return v.error();
    if (!std::isfinite(*v)) return Emit::none;  // no sparsity in this layer (a probability of 0: -inf deviations)
    c.st.f = static_cast<float>(*v);
    if (!std::isfinite(c.st.f))
      return fail(Errc::bad_format, s.line, strf("gaussian_topk: %g does not fit a float", *v));
    if (c.w_a < 2)
      return fail(Errc::shape_mismatch, s.line, "gaussian_topk needs at least 2 values (a standard deviation)");
    return Emit::step;
  }

  // streams(X, N): N copies of X; match_norm(X, N): the streams scaled to the first's norm;
  // stream_mean(X, N): their mean.
  Result<Emit> streams_rule(Stmt& c) {
    const StmtDef& s = c.s;
    auto n = stream_count(s, s.args[1], c.w_a);
    if (!n) return n.error();
    c.st.streams = *n;
    if (c.st.op == OpCode::streams && int64_t(c.w_a) * *n > (1 << 28))
      return fail(Errc::shape_mismatch, s.line,
                  strf("streams: %d streams of '%s' (%d wide) are too wide", *n, s.args[0].word.c_str(), c.w_a));
    if (c.st.op == OpCode::streams) c.w_out = c.w_a * *n;
    if (c.st.op == OpCode::stream_mean) c.w_out = c.w_a / *n;
    return Emit::step;
  }

  // stream_mix(X, C): the streams of X mixed by the S x S coefficients C.
  Result<Emit> stream_mix_rule(Stmt& c) {
    const StmtDef& s = c.s;
    const int w_c = width_of(s.args[1].word);
    const int n = static_cast<int>(std::lround(std::sqrt(double(w_c))));
    if (n < 1 || n > 256 || n * n != w_c || c.w_a % n != 0)
      return fail(Errc::shape_mismatch, s.line,
                  strf("stream_mix: '%s' has %d coefficients, which is not S x S for a count S of streams of '%s' "
                       "(%d wide)",
                       s.args[1].word.c_str(), w_c, s.args[0].word.c_str(), c.w_a));
    c.st.b = static_cast<int16_t>(reg_id(s.args[1].word));
    c.st.streams = n;
    return Emit::step;
  }

  // stream_axpy(X, V, G): every stream of X gets its gain in G times V; stream_add(X, V [, from =
  // F]): the streams from F get V.
  Result<Emit> stream_update_rule(Stmt& c) {
    const StmtDef& s = c.s;
    const int w_a = c.w_a, w_v = width_of(s.args[1].word);
    if (w_v <= 0 || w_a % w_v != 0 || w_a / w_v > 256)
      return fail(Errc::shape_mismatch, s.line,
                  strf("%s: '%s' (%d wide) is not one stream of '%s' (%d wide)", s.op->name, s.args[1].word.c_str(),
                       w_v, s.args[0].word.c_str(), w_a));
    const int n = w_a / w_v;
    c.st.b = static_cast<int16_t>(reg_id(s.args[1].word));
    c.st.streams = n;
    if (c.st.op == OpCode::stream_axpy) {
      const int w_g = width_of(s.args[2].word);
      if (w_g != n)
        return fail(Errc::shape_mismatch, s.line,
                    strf("stream_axpy: '%s' holds %d gains for %d streams", s.args[2].word.c_str(), w_g, n));
      c.st.c = static_cast<int16_t>(reg_id(s.args[2].word));
      return Emit::step;
    }
    double from = 0;
    if (const ArgDef* a = s.kwarg("from")) {
      auto v = value(a->value, s.line, c.layer);
      if (!v) return v.error();
      from = *v;
    }
    if (!(from >= 0) || from > n || from != std::floor(from))
      return fail(Errc::bad_format, s.line, strf("stream_add: from = %g is not a stream (0 to %d)", from, n));
    c.st.from = static_cast<int>(from);
    return Emit::step;
  }

  // last(X): only the last token's row goes on (the logits of the prompt's last token).
  Result<Emit> last_rule(Stmt&) {
    p_.has_last = true;
    return Emit::step;
  }

  const ArchDef& d_;
  const ModelDesc& m_;
  Program& p_;
  std::vector<ParamValue> params_;
  std::vector<int> width_, max_width_;
  std::map<std::pair<const TensorView*, float>, size_t> vec_index_;
  std::vector<int> window_;    // per layer: the sliding window, 0 on global layers
  std::vector<int> kv_src_;    // per layer: the layer whose cache it reads (-1: its own)
  std::vector<int> layer_kv_;  // per layer: its cache (index in Program::kv), -1 when it has none
  int cur_layer_ = -1;         // the layer stmt() compiles (-1: prologue / epilogue)
  uint64_t max_steps_;
  std::string x_tensor_, logits_tensor_;  // the embedding and the output weight (messages)
  std::string rows_tensor_;               // the embedding with the fewest rows (messages)
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
