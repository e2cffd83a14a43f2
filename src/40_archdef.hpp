// ==== Architecture definitions: sha256, the text format, parser and validator ====
// An architecture is data: a short text (grammar in the manual at the top of this header) that
// lists fused operations in `prologue` / `block` / `epilogue` sections. This part parses and
// validates a text without looking at any model (unknown ops, argument counts, registers used
// before assignment, sections). Binding it to a model's tensors happens in the forward-pass part
// (compile), once at load, so the hot path does no string work.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// ---- sha256 (FIPS 180-4), for the status report of which definition ran ----
class Sha256 {
 public:
  Sha256() { reset(); }
  void reset() {
    static const uint32_t init[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::memcpy(h_, init, sizeof h_);
    len_ = 0;
    fill_ = 0;
  }
  void update(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    len_ += n;
    while (n > 0) {
      size_t take = std::min(n, sizeof buf_ - fill_);
      std::memcpy(buf_ + fill_, p, take);
      fill_ += take;
      p += take;
      n -= take;
      if (fill_ == sizeof buf_) {
        block(buf_);
        fill_ = 0;
      }
    }
  }
  std::string hex() {
    uint64_t bits = len_ * 8;
    uint8_t pad = 0x80;
    update(&pad, 1);
    uint8_t zero = 0;
    while (fill_ != 56) update(&zero, 1);
    uint8_t lenb[8];
    for (int k = 0; k < 8; k++) lenb[k] = static_cast<uint8_t>(bits >> (56 - 8 * k));
    update(lenb, 8);
    std::string out;
    for (uint32_t v : h_) out += strf("%08x", v);
    reset();
    return out;
  }

 private:
  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void block(const uint8_t* p) {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
      w[t] = (uint32_t(p[4 * t]) << 24) | (uint32_t(p[4 * t + 1]) << 16) | (uint32_t(p[4 * t + 2]) << 8) | p[4 * t + 3];
    for (int t = 16; t < 64; t++) {
      uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int t = 0; t < 64; t++) {
      uint32_t s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      uint32_t ch = (e & f) ^ (~e & g);
      uint32_t t1 = h + s1 + ch + k[t] + w[t];
      uint32_t s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = s0 + maj;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
    h_[5] += f;
    h_[6] += g;
    h_[7] += h;
  }
  uint32_t h_[8];
  uint8_t buf_[64];
  uint64_t len_ = 0;
  size_t fill_ = 0;
};

inline std::string sha256_hex(std::string_view s) {
  Sha256 h;
  h.update(s.data(), s.size());
  return h.hex();
}

// ---- "did you mean" ----
// Edit distance with adjacent transpositions ("bsae" -> "base" is 1), capped (names are short).
inline size_t edit_distance(std::string_view a, std::string_view b) {
  if (a.size() > 64 || b.size() > 64) return 1000;
  size_t d[65][65];
  for (size_t i = 0; i <= a.size(); i++) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); j++) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); i++)
    for (size_t j = 1; j <= b.size(); j++) {
      size_t v = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) v = std::min(v, d[i - 2][j - 2] + 1);
      d[i][j] = v;
    }
  return d[a.size()][b.size()];
}

// " — did you mean 'x'?" for the closest candidate when it is close enough, else "".
inline std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  size_t best = SIZE_MAX;
  const std::string* pick = nullptr;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best) {
      best = d;
      pick = &c;
    }
  }
  size_t limit = std::max<size_t>(1, std::min(word.size(), pick ? pick->size() : 0) / 3);
  if (!pick || best > limit) return std::string();
  return " \xE2\x80\x94 did you mean '" + *pick + "'?";
}

// ---- the operations (a closed set; see the manual for what each computes) ----
enum class OpCode : uint8_t {
  embed,
  rms_norm,
  norm_heads,
  matmul,
  add_bias,
  rope,
  attention,
  silu,
  gelu,
  gelu_tanh,
  relu,
  mul,
  add,
  scale,
  softcap,
  copy,
  last,
  layer_norm,
  layer_norm_heads,
  slice,
  sub,
  mul_weight,
  rms_normalize,
  gaussian_topk,
  put,
  streams,
  stream_matmul,
  match_norm,
  stream_mix,
  stream_axpy,
  stream_add,
  stream_mean,
};

// Argument kinds in signatures: 'r' register, 't' tensor (alternatives with |, optionally | none),
// 'v' value (an expression: numbers, named values, + - * / ( ), sqrt(..), rsqrt(..), every(..),
// less(..), where(..)),
// 'l' rope layout word (pairs / neox). Every statement of the block also takes `skip = VALUE`
// (the step is left out of the layers where the value is not 0).
struct OpKwarg {
  const char* name;
  char kind;
};

struct OpSpec {
  const char* name;
  OpCode code;
  const char* sig;    // positional argument kinds
  OpKwarg kwargs[8];  // keyword arguments (name == nullptr ends the list)
  bool needs_dst;     // must be written `dst = op(...)` (the result has a new shape)
  bool may_have_dst;  // `dst = op(a, ...)` allowed (copy a, then apply); else in-place only
};

inline const std::vector<OpSpec>& op_specs() {
  static const std::vector<OpSpec> specs = {
      {"embed", OpCode::embed, "t", {{"beyond", 'v'}}, true, true},
      {"rms_norm", OpCode::rms_norm, "rt", {{"eps", 'v'}}, false, true},
      {"norm_heads", OpCode::norm_heads, "rt", {{"eps", 'v'}}, false, true},
      {"matmul", OpCode::matmul, "rt", {}, true, true},
      {"add_bias", OpCode::add_bias, "rt", {}, false, true},
      {"rope", OpCode::rope, "rl", {{"factors", 't'}, {"base", 'v'}, {"base_swa", 'v'}, {"dims", 'v'}}, false, true},
      {"attention",
       OpCode::attention,
       "rrr",
       {{"window", 'v'},
        {"period", 'v'},
        {"scale", 'v'},
        {"softcap", 'v'},
        {"offset", 'v'},
        {"sliding", 'v'},
        {"reuse_kv_from", 'v'}},
       true,
       true},
      {"silu", OpCode::silu, "r", {}, false, true},
      {"gelu", OpCode::gelu, "r", {}, false, true},
      {"gelu_tanh", OpCode::gelu_tanh, "r", {}, false, true},
      {"relu", OpCode::relu, "r", {}, false, true},
      {"mul", OpCode::mul, "rr", {}, false, true},
      {"add", OpCode::add, "rr", {}, false, true},
      {"scale", OpCode::scale, "rv", {{"bias", 'v'}}, false, true},
      {"softcap", OpCode::softcap, "rv", {}, false, true},
      {"copy", OpCode::copy, "r", {}, true, true},
      {"last", OpCode::last, "r", {}, false, false},
      {"layer_norm", OpCode::layer_norm, "rt", {{"bias", 't'}, {"eps", 'v'}}, false, true},
      {"layer_norm_heads", OpCode::layer_norm_heads, "rt", {{"bias", 't'}, {"eps", 'v'}}, false, true},
      {"slice", OpCode::slice, "rvv", {}, true, true},
      {"sub", OpCode::sub, "rr", {}, false, true},
      {"mul_weight", OpCode::mul_weight, "rt", {}, false, true},
      {"rms_normalize", OpCode::rms_normalize, "r", {{"size", 'v'}, {"eps", 'v'}}, false, true},
      {"gaussian_topk", OpCode::gaussian_topk, "rv", {}, false, true},
      {"put", OpCode::put, "rrv", {}, false, false},
      {"streams", OpCode::streams, "rv", {}, true, true},
      {"stream_matmul", OpCode::stream_matmul, "rt", {}, false, false},
      {"match_norm", OpCode::match_norm, "rv", {}, false, true},
      {"stream_mix", OpCode::stream_mix, "rr", {}, true, true},
      {"stream_axpy", OpCode::stream_axpy, "rrr", {}, false, true},
      {"stream_add", OpCode::stream_add, "rr", {{"from", 'v'}}, false, true},
      {"stream_mean", OpCode::stream_mean, "rv", {}, true, true},
  };
  return specs;
}

inline const OpSpec& op_spec(OpCode c) {
  return op_specs()[static_cast<size_t>(c)];
}

inline const OpSpec* find_op(std::string_view name) {
  for (const auto& s : op_specs())
    if (name == s.name) return &s;
  return nullptr;
}

// Values the definitions can name without a `param` line (from the model's hyperparameters).
inline const std::vector<std::string>& archdef_builtin_values() {
  static const std::vector<std::string> names = {"n_embd",     "n_layer",   "n_head",   "n_head_kv",   "head_dim",
                                                 "head_dim_v", "n_ff",      "n_vocab",  "n_ctx_train", "rms_eps",
                                                 "rope_base",  "rope_dims", "norm_eps", "layer",       "inf"};
  return names;
}

// Functions a value may use (not calls of anything the text defines: fixed arithmetic).
inline bool archdef_value_function(std::string_view w) {
  return w == "sqrt" || w == "rsqrt" || w == "every" || w == "less" || w == "where";
}

// The conventions a definition may declare (`convention NAME = VALUE`): rules that depend on the
// file format, stated in the text so that the text says everything that runs. A definition that
// does not declare one gets its default (the behaviour from before conventions existed).
struct ConventionSpec {
  const char* name;
  const char* choices;  // "a|b" words, or "" for a number
  const char* dflt;     // the default, as it would be written
  const char* what;
};
inline const std::vector<ConventionSpec>& archdef_conventions() {
  static const std::vector<ConventionSpec> c = {
      {"matmul_input", "gguf_rounded|f32", "gguf_rounded",
       "GGUF files: the input of a product with an F16/BF16 weight is rounded to that type first (ggml's "
       "arithmetic); f32: never rounded"},
      {"hf_rope", "neox|as_written", "neox",
       "Hugging Face checkpoints keep q/k rows in rotate-half order: rope 'pairs' runs as 'neox'; as_written: "
       "the layout as written"},
      {"hf_norm_offset", "", "table",
       "Hugging Face checkpoints store the weights of rms_norm / norm_heads / layer_norm(_heads) as w - N: N "
       "is added at load (Gemma: 1); default 'table': the loader's table by model_type (gemma3: 1, others 0)"},
  };
  return c;
}

// ---- the parsed form ----
enum class Section : uint8_t { none, prologue, block, epilogue };

inline const char* section_name(Section s) {
  switch (s) {
    case Section::prologue: return "prologue";
    case Section::block: return "block";
    case Section::epilogue: return "epilogue";
    default: return "(none)";
  }
}

// A value: an expression tree over numbers and named values (params, hyperparameters), evaluated in
// double when a model is compiled (per layer in the block). every(P, O) is 1 on the layers i with
// i % P == O and 0 on the others; less(A, B) is 1 when A < B, else 0; where(C, A, B) is A when C
// is not 0, else B (chosen when the model is compiled: not control flow of the forward pass).
// `layer` is the index of the layer being compiled (block only), `inf` infinity.
struct ValueTerm {
  enum class Fn : uint8_t { number, name, add, sub, mul, div, neg, sqrt, rsqrt, every, less, where } fn = Fn::number;
  double number = 0;
  std::string name;
  std::vector<ValueTerm> kids;
  bool per_layer = false;  // uses every() or a param that does (known when parsed)
};

// One alternative of a param: a metadata key ("{arch}.rope.freq_base_swa") or a term. A key that
// holds an array gives one value per layer (its length must be block_count). nonzero(KEY): the key
// counts as absent when it holds 0.
struct ParamAlt {
  bool is_meta = false;
  bool nonzero = false;
  std::string key;
  ValueTerm term;
};

struct ParamDef {
  std::string name;
  std::vector<ParamAlt> alts;  // the first that exists wins
  int line = 0;
  bool per_layer = false;  // a term alternative uses every() (metadata arrays are known at compile)
};

struct ConventionDef {
  std::string name, value;  // value: a choice word or a number as written
  double number = 0;
  int line = 0;
};

struct ArgDef {
  char kind = 'r';
  std::string word;                  // register name or layout word
  std::vector<std::string> tensors;  // tensor alternatives ({i} allowed in block, {k} in stream_matmul)
  bool optional = false;             // `| none`: the step is skipped when no alternative exists
  ValueTerm value;
};

struct StmtDef {
  int line = 0;
  Section section = Section::none;
  const OpSpec* op = nullptr;
  std::string dst;           // "" for the in-place form
  std::vector<ArgDef> args;  // positional, in signature order
  std::vector<std::pair<std::string, ArgDef>> kwargs;
  const ArgDef* kwarg(std::string_view name) const {
    for (const auto& kv : kwargs)
      if (kv.first == name) return &kv.second;
    return nullptr;
  }
  // The register the statement writes.
  const std::string& target() const { return dst.empty() ? args[0].word : dst; }
};

struct ArchDef {
  std::string name;    // `arch` line (= file name without .archdef)
  std::string kind;    // `kind` line ("decoder")
  std::string origin;  // "builtin" or the file's path
  std::string where;   // how messages name the text: the path, or "<builtin>/NAME.archdef"
  std::string text;    // exactly as read (the sha256 is of these bytes)
  std::string sha256;
  std::vector<ParamDef> params;
  std::vector<ConventionDef> conventions;  // declared ones only (archdef_conventions() has the defaults)
  std::vector<StmtDef> prologue, block, epilogue;
  int steps_per_layer() const { return static_cast<int>(block.size()); }
  const ConventionDef* convention(std::string_view name) const {
    for (const auto& c : conventions)
      if (c.name == name) return &c;
    return nullptr;
  }
  // The conventions this definition does not declare, as comment lines (what `status --dump` adds).
  std::string default_conventions_text() const {
    std::string out;
    for (const auto& c : archdef_conventions())
      if (!convention(c.name))
        out += std::string(out.empty() ? "# not declared above, in effect by default:\n" : "") + "# convention " +
               c.name + " = " + c.dflt + "\n";
    return out;
  }
};

constexpr size_t kArchdefMaxBytes = 64 * 1024;
constexpr size_t kArchdefMaxLine = 1000;

// ---- parser ----
class ArchdefParser {
 public:
  ArchdefParser(std::string_view text, std::string where, std::string expected_name)
      : text_(text), where_(std::move(where)), expected_(std::move(expected_name)) {}

  Result<ArchDef> parse() {
    ArchDef d;
    d.where = where_;
    if (text_.size() > kArchdefMaxBytes)
      return fail(0, strf("the definition is %zu bytes; at most %zu are accepted", text_.size(), kArchdefMaxBytes));
    if (!utf8_valid(text_)) return fail(0, "the text is not valid UTF-8");
    int arch_line = 0, kind_line = 0;
    int section_line[4] = {0, 0, 0, 0};
    Section sec = Section::none;
    size_t pos = 0;
    int line_no = 0;
    while (pos <= text_.size()) {
      size_t eol = text_.find('\n', pos);
      if (eol == std::string_view::npos) eol = text_.size();
      std::string_view raw = text_.substr(pos, eol - pos);
      pos = eol + 1;
      line_no++;
      if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
      if (raw.size() > kArchdefMaxLine) return fail(line_no, strf("line is longer than %zu bytes", kArchdefMaxLine));
      for (char c : raw)
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7F)
          return fail(line_no, "control character in the text");
      if (size_t hash = raw.find('#'); hash != std::string_view::npos) raw = raw.substr(0, hash);
      line_ = line_no;
      // The first word of a statement names an operation: anything else (if, while, import, ...) is
      // an unknown operation, whatever follows it.
      if (std::string w = leading_op_word(raw); !w.empty() && !find_op(w) && !is_keyword(w)) return unknown_op(w);
      toks_.clear();
      if (auto r = lex(raw); !r) return r.error();
      if (toks_.empty()) {
        if (pos > text_.size()) break;
        continue;
      }
      i_ = 0;
      const Tok& t0 = toks_[0];
      if (t0.kind == Tok::word && (t0.text == "prologue" || t0.text == "block" || t0.text == "epilogue")) {
        size_t n = toks_.size();
        if (n == 2 && toks_[1].kind == Tok::punct && toks_[1].text == ":") n = 1;
        if (n != 1) return fail(line_no, "a section header stands alone on its line ('" + t0.text + "')");
        Section s = t0.text == "prologue" ? Section::prologue : t0.text == "block" ? Section::block : Section::epilogue;
        int& seen = section_line[static_cast<int>(s)];
        if (seen) return fail(line_no, strf("section '%s' appears twice (first at line %d)", t0.text.c_str(), seen));
        if (static_cast<int>(s) < static_cast<int>(sec))
          return fail(line_no, strf("section '%s' after '%s': the order is prologue, block, epilogue", t0.text.c_str(),
                                    section_name(sec)));
        seen = line_no;
        sec = s;
      } else if (t0.kind == Tok::word && t0.text == "arch") {
        if (arch_line) return fail(line_no, strf("a second 'arch' line (first at line %d)", arch_line));
        if (sec != Section::none) return fail(line_no, "'arch' belongs before the sections");
        if (toks_.size() != 2 || toks_[1].kind != Tok::word || !is_ident(toks_[1].text))
          return fail(line_no, "expected 'arch NAME'");
        d.name = toks_[1].text;
        arch_line = line_no;
        if (!expected_.empty() && d.name != expected_)
          return fail(line_no, strf("the file is named '%s.archdef' but defines 'arch %s'; they must match",
                                    expected_.c_str(), d.name.c_str()));
      } else if (t0.kind == Tok::word && t0.text == "kind") {
        if (kind_line) return fail(line_no, strf("a second 'kind' line (first at line %d)", kind_line));
        if (sec != Section::none) return fail(line_no, "'kind' belongs before the sections");
        if (toks_.size() != 2 || toks_[1].kind != Tok::word) return fail(line_no, "expected 'kind decoder'");
        if (toks_[1].text != "decoder")
          return fail(line_no, "kind '" + printable(toks_[1].text) + "' is not supported (only 'decoder')" +
                                   did_you_mean(toks_[1].text, {"decoder"}));
        d.kind = toks_[1].text;
        kind_line = line_no;
      } else if (t0.kind == Tok::word && t0.text == "param") {
        if (sec != Section::none) return fail(line_no, "'param' lines belong before the sections");
        auto p = parse_param(d);
        if (!p) return p.error();
        d.params.push_back(std::move(*p));
      } else if (t0.kind == Tok::word && t0.text == "convention") {
        if (sec != Section::none) return fail(line_no, "'convention' lines belong before the sections");
        auto c = parse_convention(d);
        if (!c) return c.error();
        d.conventions.push_back(std::move(*c));
      } else {
        if (sec == Section::none) return fail_stmt_outside(t0);
        auto s = parse_stmt(sec, d);
        if (!s) return s.error();
        (sec == Section::prologue ? d.prologue : sec == Section::block ? d.block : d.epilogue).push_back(std::move(*s));
      }
      if (pos > text_.size()) break;
    }
    if (!arch_line) return fail(0, "no 'arch NAME' line");
    if (!kind_line) return fail(0, "no 'kind decoder' line");
    for (Section s : {Section::prologue, Section::block, Section::epilogue})
      if (!section_line[static_cast<int>(s)]) return fail(0, strf("no '%s' section", section_name(s)));
    if (d.block.empty()) return fail(section_line[2], "the 'block' section is empty");
    if (auto r = validate(d); !r) return r.error();
    d.text = std::string(text_);
    d.sha256 = sha256_hex(text_);
    return d;
  }

 private:
  struct Tok {
    enum Kind : uint8_t { word, number, punct } kind;
    std::string text;
    double num = 0;
  };

  Error fail(int line, const std::string& msg) const {
    if (line <= 0) return make_error(Errc::archdef, where_ + ": " + msg);
    return make_error(Errc::archdef, strf("%s:%d: ", where_.c_str(), line) + msg);
  }

  static bool is_ident(std::string_view s) {
    if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
    for (char c : s)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    return true;
  }
  static bool is_keyword(std::string_view w) {
    return w == "arch" || w == "kind" || w == "param" || w == "convention" || w == "prologue" || w == "block" ||
           w == "epilogue";
  }
  // The identifier that stands where an operation name belongs: the first word of the line, or
  // the word after `NAME =`. Empty when the line does not start with an identifier.
  static std::string leading_op_word(std::string_view s) {
    size_t k = 0;
    auto skip = [&] {
      while (k < s.size() && (s[k] == ' ' || s[k] == '\t')) k++;
    };
    auto ident = [&]() -> std::string {
      size_t b = k;
      if (k < s.size() && (std::isalpha(static_cast<unsigned char>(s[k])) || s[k] == '_')) {
        while (k < s.size() && (std::isalnum(static_cast<unsigned char>(s[k])) || s[k] == '_')) k++;
      }
      return std::string(s.substr(b, k - b));
    };
    skip();
    std::string w = ident();
    if (w.empty() || is_keyword(w)) return w;
    if (k < s.size() && (s[k] == '.' || s[k] == '{')) return std::string();  // a dotted name: not an op position
    skip();
    if (k < s.size() && s[k] == '=' && (k + 1 >= s.size() || s[k + 1] != '=')) {
      k++;
      skip();
      std::string op = ident();
      if (k < s.size() && (s[k] == '.' || s[k] == '{')) return std::string();
      return op;
    }
    return w;
  }
  static bool word_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '{' || c == '}';
  }

  Result<void> lex(std::string_view s) {
    size_t k = 0;
    while (k < s.size()) {
      char c = s[k];
      if (c == ' ' || c == '\t') {
        k++;
      } else if (c == '=' || c == '(' || c == ')' || c == ',' || c == '|' || c == ':' || c == '*' || c == '/' ||
                 ((c == '-' || c == '+') && (after_operand() || !starts_number(s, k + 1)))) {
        // a sign after an operand is the binary operator ("a -1" is a minus 1), before one a number's
        toks_.push_back({Tok::punct, std::string(1, c)});
        k++;
      } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' ||
                 (c == '.' && k + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[k + 1])))) {
        size_t e = k + 1;
        while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '.' ||
                                ((s[e] == '-' || s[e] == '+') && (s[e - 1] == 'e' || s[e - 1] == 'E'))))
          e++;
        std::string_view lit = s.substr(k, e - k);
        std::string_view digits = lit;
        if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
        double v = 0;
        auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
        if (ec != std::errc() || p != digits.data() + digits.size() || !std::isfinite(v))
          return fail(line_, "'" + printable(lit) + "' is not a number");
        toks_.push_back({Tok::number, std::string(lit), v});
        k = e;
      } else if (word_char(c)) {
        size_t e = k;
        while (e < s.size() && word_char(s[e])) e++;
        toks_.push_back({Tok::word, std::string(s.substr(k, e - k))});
        k = e;
      } else {
        size_t l = static_cast<size_t>(
            std::max(1, utf8_valid_len(reinterpret_cast<const unsigned char*>(s.data() + k), s.size() - k)));
        return fail(line_, "unexpected character '" + printable(s.substr(k, l)) + "'");
      }
    }
    return {};
  }

  static bool starts_number(std::string_view s, size_t k) {
    return k < s.size() && (std::isdigit(static_cast<unsigned char>(s[k])) || s[k] == '.');
  }
  // The last token ends an operand (a word, a number, or ')'): a following sign is an operator.
  bool after_operand() const {
    if (toks_.empty()) return false;
    const Tok& t = toks_.back();
    return t.kind != Tok::punct || t.text == ")";
  }

  bool at_punct(const char* p) const {
    return i_ < toks_.size() && toks_[i_].kind == Tok::punct && toks_[i_].text == p;
  }
  bool at_end() const { return i_ >= toks_.size(); }
  std::string here() const { return at_end() ? std::string("end of line") : "'" + printable(toks_[i_].text) + "'"; }

  Error fail_stmt_outside(const Tok& t0) const {
    // The first word of a statement names an operation (or the register it assigns).
    std::string op = t0.text;
    if (toks_.size() >= 3 && toks_[1].kind == Tok::punct && toks_[1].text == "=" && toks_[2].kind == Tok::word)
      op = toks_[2].text;
    if (!find_op(op) && is_ident(op)) return unknown_op(op);
    return fail(line_, "a statement outside any section (start the section with 'prologue', 'block' or 'epilogue')");
  }

  Error unknown_op(const std::string& name) const {
    std::vector<std::string> names;
    for (const auto& s : op_specs()) names.emplace_back(s.name);
    return fail(line_, "no operation '" + printable(name) + "'" + did_you_mean(name, names));
  }

  // Checks the {..} placeholders of a dotted name: {i} in tensor names (block only), {k} in tensor
  // names (stream_matmul's weight: checked with the statement), {arch} in keys.
  Result<void> check_placeholders(const std::string& w, bool tensor, Section sec) const {
    size_t k = 0;
    while ((k = w.find_first_of("{}", k)) != std::string::npos) {
      if (w[k] == '}') return fail(line_, "unbalanced '}' in '" + printable(w) + "'");
      size_t e = w.find('}', k);
      if (e == std::string::npos) return fail(line_, "unbalanced '{' in '" + printable(w) + "'");
      std::string ph = w.substr(k + 1, e - k - 1);
      if (tensor && ph == "i") {
        if (sec != Section::block) return fail(line_, "'{i}' (the layer index) is only defined in the 'block' section");
      } else if ((tensor && ph == "k") || (!tensor && ph == "arch")) {
      } else {
        return fail(line_, "unknown placeholder '{" + printable(ph) + "}' in '" + printable(w) + "' (" +
                               (tensor ? "tensor names know {i} and {k}" : "metadata keys know {arch}") + ")");
      }
      k = e + 1;
    }
    return {};
  }

  // VALUE := EXPR;  EXPR := PRODUCT (('+' | '-') PRODUCT)*;  PRODUCT := UNARY (('*' | '/') UNARY)*;
  // UNARY := '-' UNARY | NUMBER | NAME | '(' EXPR ')' | sqrt(EXPR) | rsqrt(EXPR) | every(EXPR, EXPR).
  // `block`: every() and per-layer params are allowed (they need a layer).
  static constexpr int kMaxValueDepth = 32;
  Result<ValueTerm> parse_term(const ArchDef& d, bool block = true) { return parse_sum(d, block, 0); }

  Result<ValueTerm> parse_sum(const ArchDef& d, bool block, int depth) { return parse_binary(d, block, depth, 0); }

  // One level of left-associative binary operators: level 0 is '+' '-' over PRODUCTs, level 1 is
  // '*' '/' over UNARYs.
  Result<ValueTerm> parse_binary(const ArchDef& d, bool block, int depth, int level) {
    static constexpr struct {
      const char* op[2];
      ValueTerm::Fn fn[2];
    } kLevels[2] = {
        {{"+", "-"}, {ValueTerm::Fn::add, ValueTerm::Fn::sub}},
        {{"*", "/"}, {ValueTerm::Fn::mul, ValueTerm::Fn::div}},
    };
    const auto& L = kLevels[level];
    auto operand = [&] { return level == 0 ? parse_binary(d, block, depth, 1) : parse_unary(d, block, depth); };
    auto left = operand();
    if (!left) return left;
    ValueTerm t = std::move(*left);
    while (at_punct(L.op[0]) || at_punct(L.op[1])) {
      ValueTerm n;
      n.fn = toks_[i_].text == L.op[0] ? L.fn[0] : L.fn[1];
      i_++;
      auto right = operand();
      if (!right) return right;
      n.per_layer = t.per_layer || right->per_layer;
      n.kids.push_back(std::move(t));
      n.kids.push_back(std::move(*right));
      t = std::move(n);
    }
    return t;
  }

  Result<ValueTerm> parse_unary(const ArchDef& d, bool block, int depth) {
    if (depth > kMaxValueDepth) return fail(line_, strf("a value nested more than %d deep", kMaxValueDepth));
    ValueTerm t;
    if (at_end()) return fail(line_, "expected a value at end of line");
    const Tok& tk = toks_[i_];
    if (at_punct("-")) {
      i_++;
      auto in = parse_unary(d, block, depth + 1);
      if (!in) return in;
      t.fn = ValueTerm::Fn::neg;
      t.per_layer = in->per_layer;
      t.kids.push_back(std::move(*in));
      return t;
    }
    if (at_punct("(")) {
      i_++;
      auto in = parse_sum(d, block, depth + 1);
      if (!in) return in;
      if (!at_punct(")")) return fail(line_, "expected ')' to close '(', found " + here());
      i_++;
      return in;
    }
    if (tk.kind == Tok::number) {
      t.fn = ValueTerm::Fn::number;
      t.number = tk.num;
      i_++;
      return t;
    }
    if (tk.kind == Tok::word && tk.text.find('.') != std::string::npos)
      return fail(line_, "metadata keys are read in 'param' lines; name the param here (found " + here() + ")");
    if (tk.kind != Tok::word || !is_ident(tk.text)) return fail(line_, "expected a value, found " + here());
    if (archdef_value_function(tk.text) && at_punct_at(i_ + 1, "(")) {
      const std::string fn = tk.text;
      t.fn = fn == "sqrt"    ? ValueTerm::Fn::sqrt
             : fn == "rsqrt" ? ValueTerm::Fn::rsqrt
             : fn == "every" ? ValueTerm::Fn::every
             : fn == "less"  ? ValueTerm::Fn::less
                             : ValueTerm::Fn::where;
      const size_t want = fn == "every" || fn == "less" ? 2 : fn == "where" ? 3 : 1;
      const char* usage = fn == "every"  ? "every(PERIOD, OFFSET) takes two values"
                          : fn == "less" ? "less(A, B) takes two values"
                                         : "where(CONDITION, THEN, ELSE) takes three values";
      i_ += 2;
      for (size_t k = 0; k < want; k++) {
        if (k > 0) {
          if (!at_punct(",")) return fail(line_, std::string(usage) + ": expected ',', found " + here());
          i_++;
        }
        if (at_end()) return fail(line_, "expected a value after '" + fn + "('");
        auto in = parse_sum(d, block, depth + 1);
        if (!in) return in;
        t.per_layer = t.per_layer || in->per_layer;
        t.kids.push_back(std::move(*in));
      }
      if (!at_punct(")"))
        return fail(line_, want > 1 ? std::string(usage) + ": expected ')', found " + here()
                                    : "expected ')' after the value of " + fn + "(), found " + here());
      i_++;
      if (t.fn == ValueTerm::Fn::every) {
        t.per_layer = true;
        if (!block)
          return fail(line_,
                      "every() is 1 on some layers and 0 on others: only the 'block' section (or a param "
                      "it uses) may use it");
      }
      return t;
    }
    t.fn = ValueTerm::Fn::name;
    t.name = tk.text;
    if (auto r = check_value_name(t.name, d); !r) return r.error();
    if (t.name == "layer") {  // (no param can take a built-in value's name)
      t.per_layer = true;
      if (!block)
        return fail(line_, "'layer' (the layer's index) is only defined in the 'block' section (or a param it uses)");
    }
    for (const auto& p : d.params)
      if (p.name == t.name && p.per_layer) {
        t.per_layer = true;
        if (!block)
          return fail(line_, "param '" + p.name +
                                 "' differs per layer (it uses every()): only the 'block' section "
                                 "may use it");
      }
    i_++;
    return t;
  }

  Result<void> check_value_name(const std::string& name, const ArchDef& d) const {
    std::vector<std::string> known = archdef_builtin_values();
    for (const auto& p : d.params) {
      if (p.name == name) return {};
      known.push_back(p.name);
    }
    for (const auto& b : archdef_builtin_values())
      if (b == name) return {};
    std::string list;
    for (const auto& b : archdef_builtin_values()) list += (list.empty() ? "" : ", ") + b;
    return fail(
        line_, "no value named '" + printable(name) + "' (a param or one of " + list + ")" + did_you_mean(name, known));
  }

  Result<ParamDef> parse_param(const ArchDef& d) {
    ParamDef p;
    p.line = line_;
    i_ = 1;
    if (at_end() || toks_[i_].kind != Tok::word || !is_ident(toks_[i_].text))
      return fail(line_, "expected 'param NAME = VALUE'");
    p.name = toks_[i_].text;
    if (find_op(p.name) || archdef_value_function(p.name) || p.name == "nonzero" || p.name == "none" ||
        p.name == "pairs" || p.name == "neox")
      return fail(line_, "'" + p.name + "' is a reserved word and cannot name a param");
    for (const auto& b : archdef_builtin_values())
      if (b == p.name) return fail(line_, "'" + p.name + "' is a built-in value; a param cannot redefine it");
    for (const auto& q : d.params)
      if (q.name == p.name)
        return fail(line_, strf("param '%s' is defined twice (first at line %d)", p.name.c_str(), q.line));
    i_++;
    if (!at_punct("=")) return fail(line_, "expected '=' after 'param " + p.name + "', found " + here());
    i_++;
    for (;;) {
      ParamAlt a;
      if (!at_end() && toks_[i_].kind == Tok::word && toks_[i_].text == "nonzero" && at_punct_at(i_ + 1, "(")) {
        // nonzero(KEY): the key counts as absent when it holds 0 ("0 means none" in many configs)
        i_ += 2;
        if (at_end() || toks_[i_].kind != Tok::word || toks_[i_].text.find('.') == std::string::npos)
          return fail(line_, "nonzero() takes a metadata key (like {arch}.attention.scale), found " + here());
        a.is_meta = true;
        a.nonzero = true;
        a.key = toks_[i_].text;
        if (auto r = check_placeholders(a.key, false, Section::none); !r) return r.error();
        i_++;
        if (!at_punct(")")) return fail(line_, "expected ')' after the key of nonzero(), found " + here());
        i_++;
      } else if (!at_end() && toks_[i_].kind == Tok::word && toks_[i_].text.find('.') != std::string::npos) {
        a.is_meta = true;
        a.key = toks_[i_].text;
        if (auto r = check_placeholders(a.key, false, Section::none); !r) return r.error();
        i_++;
      } else {
        auto t = parse_term(d);
        if (!t) return t.error();
        a.term = std::move(*t);
        p.per_layer = p.per_layer || a.term.per_layer;
      }
      p.alts.push_back(std::move(a));
      if (at_end()) break;
      if (!at_punct("|")) return fail(line_, "expected '|' or end of line, found " + here());
      i_++;
    }
    for (size_t k = 0; k + 1 < p.alts.size(); k++)
      if (!p.alts[k].is_meta)
        return fail(line_, "in param '" + p.name + "', a number or name always exists: nothing after it is used");
    return p;
  }

  Result<ConventionDef> parse_convention(const ArchDef& d) {
    ConventionDef c;
    c.line = line_;
    i_ = 1;
    std::vector<std::string> names;
    for (const auto& s : archdef_conventions()) names.emplace_back(s.name);
    if (at_end() || toks_[i_].kind != Tok::word || !is_ident(toks_[i_].text))
      return fail(line_, "expected 'convention NAME = VALUE'");
    c.name = toks_[i_].text;
    const ConventionSpec* spec = nullptr;
    for (const auto& s : archdef_conventions())
      if (c.name == s.name) spec = &s;
    if (!spec) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      return fail(line_,
                  "no convention '" + printable(c.name) + "' (known: " + list + ")" + did_you_mean(c.name, names));
    }
    if (const ConventionDef* prev = d.convention(c.name))
      return fail(line_, strf("convention '%s' is declared twice (first at line %d)", c.name.c_str(), prev->line));
    i_++;
    if (!at_punct("=")) return fail(line_, "expected '=' after 'convention " + c.name + "', found " + here());
    i_++;
    if (at_end()) return fail(line_, "expected a value after 'convention " + c.name + " ='");
    const Tok& v = toks_[i_];
    std::string_view choices = spec->choices;
    if (choices.empty()) {
      if (v.kind != Tok::number || !(v.num >= 0) || v.num > 1e6)
        return fail(line_, "convention " + c.name + " takes a non-negative number, found " + here());
      c.number = v.num;
    } else {
      std::vector<std::string> ok;
      for (size_t k = 0; k <= choices.size();) {
        size_t e = choices.find('|', k);
        if (e == std::string_view::npos) e = choices.size();
        ok.emplace_back(choices.substr(k, e - k));
        k = e + 1;
      }
      if (v.kind != Tok::word || std::find(ok.begin(), ok.end(), v.text) == ok.end())
        return fail(line_, "convention " + c.name + " is one of " + std::string(choices) + ", found " + here() +
                               (v.kind == Tok::word ? did_you_mean(v.text, ok) : std::string()));
    }
    c.value = v.text;
    i_++;
    if (!at_end()) return fail(line_, "unexpected " + here() + " after the convention's value");
    return c;
  }

  Result<ArgDef> parse_arg(char kind, const ArchDef& d, Section sec) {
    ArgDef a;
    a.kind = kind;
    if (at_end()) return fail(line_, "expected an argument, found end of line");
    const Tok& tk = toks_[i_];
    switch (kind) {
      case 'r':
        if (tk.kind != Tok::word || !is_ident(tk.text))
          return fail(line_, "expected a register name, found " + here() +
                                 (tk.kind == Tok::word && tk.text.find('.') != std::string::npos ? " (a tensor)" : ""));
        a.word = tk.text;
        i_++;
        return a;
      case 'l':
        if (tk.kind != Tok::word || (tk.text != "pairs" && tk.text != "neox"))
          return fail(line_, "expected a rope layout ('pairs' or 'neox'), found " + here() +
                                 (tk.kind == Tok::word ? did_you_mean(tk.text, {"pairs", "neox"}) : std::string()));
        a.word = tk.text;
        i_++;
        return a;
      case 'v': {
        if (tk.kind == Tok::word && tk.text.find('.') != std::string::npos)
          return fail(line_, "metadata keys are read in 'param' lines; name the param here (found " + here() + ")");
        auto t = parse_term(d, sec == Section::block);
        if (!t) return t.error();
        a.value = std::move(*t);
        return a;
      }
      default: {  // 't'
        for (;;) {
          if (at_end()) return fail(line_, "expected a tensor name, found end of line");
          const Tok& t = toks_[i_];
          if (t.kind == Tok::word && t.text == "none") {
            if (a.tensors.empty()) return fail(line_, "'none' must follow a tensor name: 'name | none'");
            a.optional = true;
            i_++;
            break;
          }
          if (t.kind != Tok::word || t.text.find('.') == std::string::npos)
            return fail(line_, "expected a tensor name (like blk.{i}.attn_q.weight), found " + here());
          if (auto r = check_placeholders(t.text, true, sec); !r) return r.error();
          a.tensors.push_back(t.text);
          i_++;
          if (!at_punct("|")) break;
          i_++;
        }
        if (a.optional && at_punct("|")) return fail(line_, "nothing may follow 'none'");
        return a;
      }
    }
  }

  Result<StmtDef> parse_stmt(Section sec, const ArchDef& d) {
    StmtDef s;
    s.line = line_;
    s.section = sec;
    i_ = 0;
    if (toks_[0].kind == Tok::word && toks_.size() >= 2 && at_punct_at(1, "=")) {
      if (!is_ident(toks_[0].text)) return fail(line_, "'" + printable(toks_[0].text) + "' cannot name a register");
      s.dst = toks_[0].text;
      i_ = 2;
    }
    if (at_end()) return fail(line_, "expected an operation after '='");
    const Tok& opt = toks_[i_];
    if (opt.kind != Tok::word || !is_ident(opt.text)) return fail(line_, "expected an operation, found " + here());
    s.op = find_op(opt.text);
    if (!s.op) return unknown_op(opt.text);
    if (!is_register_name_ok(s.dst))
      return fail(line_, "'" + s.dst + "' is a reserved word and cannot name a register");
    i_++;
    if (!at_punct("(")) return fail(line_, "expected '(' after '" + opt.text + "', found " + here());
    i_++;
    const std::string_view sig = s.op->sig;
    bool first = true;
    while (!at_punct(")")) {
      if (at_end()) return fail(line_, "missing ')' at end of line");
      if (!first) {
        if (!at_punct(",")) return fail(line_, "expected ',' or ')', found " + here());
        i_++;
      }
      first = false;
      // keyword argument?
      if (i_ + 1 < toks_.size() && toks_[i_].kind == Tok::word && at_punct_at(i_ + 1, "=")) {
        std::string key = toks_[i_].text;
        const OpKwarg* kw = nullptr;
        std::vector<std::string> names;
        for (const auto& k : s.op->kwargs) {
          if (!k.name) break;
          names.emplace_back(k.name);
          if (key == k.name) kw = &k;
        }
        static const OpKwarg skip_kw{"skip", 'v'};  // every statement of the block
        if (sec == Section::block) names.emplace_back("skip");
        if (!kw && key == "skip") {
          if (sec != Section::block)
            return fail(line_,
                        "'skip' leaves a step out of some layers: only statements of the 'block' section "
                        "take it");
          kw = &skip_kw;
        }
        if (!kw) {
          std::string msg = "'" + std::string(s.op->name) + "' has no argument '" + printable(key) + "'";
          if (names.empty() || (names.size() == 1 && names[0] == "skip"))
            msg += names.empty() ? " (it takes no keyword arguments)" : " (it takes only 'skip')";
          return fail(line_, msg + did_you_mean(key, names));
        }
        if (s.kwarg(key)) return fail(line_, "argument '" + key + "' is given twice");
        i_ += 2;
        auto a = parse_arg(kw->kind, d, sec);
        if (!a) return a.error();
        s.kwargs.emplace_back(key, std::move(*a));
        continue;
      }
      if (!s.kwargs.empty()) return fail(line_, "a positional argument after a keyword argument");
      if (s.args.size() >= sig.size())
        return fail(line_, strf("'%s' takes %zu argument%s, more are given", s.op->name, sig.size(),
                                sig.size() == 1 ? "" : "s"));
      auto a = parse_arg(sig[s.args.size()], d, sec);
      if (!a) return a.error();
      s.args.push_back(std::move(*a));
    }
    i_++;
    if (!at_end()) return fail(line_, "unexpected " + here() + " after ')'");
    if (s.args.size() != sig.size())
      return fail(line_, strf("'%s' takes %zu argument%s, %zu given", s.op->name, sig.size(),
                              sig.size() == 1 ? "" : "s", s.args.size()));
    auto has_k = [](const ArgDef& a) {
      return std::any_of(a.tensors.begin(), a.tensors.end(),
                         [](const std::string& t) { return t.find("{k}") != std::string::npos; });
    };
    bool k_used = std::any_of(s.kwargs.begin(), s.kwargs.end(), [&](const auto& kw) { return has_k(kw.second); });
    if (s.op->code != OpCode::stream_matmul) k_used = k_used || std::any_of(s.args.begin(), s.args.end(), has_k);
    if (k_used)
      return fail(line_, "'{k}' (the stream index) is only defined in stream_matmul's weight, not in '" +
                             std::string(s.op->name) + "'" + (s.kwargs.empty() ? "" : " or a keyword argument"));
    return s;
  }

  bool at_punct_at(size_t k, const char* p) const {
    return k < toks_.size() && toks_[k].kind == Tok::punct && toks_[k].text == p;
  }
  static bool is_register_name_ok(const std::string& n) {
    return n.empty() || !(find_op(n) || n == "none" || n == "pairs" || n == "neox" || archdef_value_function(n) ||
                          n == "nonzero" || n == "arch" || n == "kind" || n == "param" || n == "convention" ||
                          n == "prologue" || n == "block" || n == "epilogue");
  }

  // Program-order checks: registers assigned before use, `x` and `logits`, `last`, attention count.
  Result<void> validate(const ArchDef& d) const {
    std::vector<std::string> assigned;
    auto is_assigned = [&](const std::string& r) {
      return std::find(assigned.begin(), assigned.end(), r) != assigned.end();
    };
    bool after_last = false;
    std::vector<std::string> reduced;  // registers with the rows kept by last()
    for (Section sec : {Section::prologue, Section::block, Section::epilogue}) {
      const auto& list = sec == Section::prologue ? d.prologue : sec == Section::block ? d.block : d.epilogue;
      int attentions = 0;
      for (const auto& s : list) {
        const OpSpec& op = *s.op;
        int line = s.line;
        auto err = [&](const std::string& m) {
          return make_error(Errc::archdef, strf("%s:%d: ", where_.c_str(), line) + m);
        };
        // registers read
        std::vector<std::string> reads;
        for (size_t k = 0; k < s.args.size(); k++)
          if (s.args[k].kind == 'r') reads.push_back(s.args[k].word);
        for (const auto& r : reads) {
          if (!is_register_name_ok(r)) return err("'" + r + "' is a reserved word and cannot name a register");
          if (!is_assigned(r)) {
            std::string hint = did_you_mean(r, assigned);
            return err("register '" + r + "' is used before it is assigned" + hint);
          }
          if (after_last && std::find(reduced.begin(), reduced.end(), r) == reduced.end())
            return err("register '" + r + "' still holds every token; after last() only '" + reduced[0] +
                       "' and registers assigned since then may be used");
        }
        if (op.needs_dst && s.dst.empty())
          return err(strf("'%s' makes a new value: write 'NAME = %s(...)'", op.name, op.name));
        if (!op.may_have_dst && !s.dst.empty())
          return err(strf("'%s' works in place: write '%s(REGISTER)'", op.name, op.name));
        bool optional = false;
        for (const auto& a : s.args)
          if (a.kind == 't' && a.optional) optional = true;
        if (optional && !s.dst.empty() && !is_assigned(s.dst))
          return err("'| none' makes this step optional, so it cannot be the first to assign '" + s.dst +
                     "' (where it is left out, the register keeps what it held); assign it before, or use the "
                     "in-place form (op(REGISTER, ...))");
        if (s.kwarg("skip") && op.code == OpCode::attention)
          return err("attention cannot be skipped (every layer has its KV cache); use window/period/sliding");
        if (s.kwarg("skip") && !s.dst.empty() && !is_assigned(s.dst))
          return err("'skip' leaves this step out of some layers, so it cannot be the first to assign '" + s.dst +
                     "'; assign it before, or use the in-place form (op(REGISTER, ...))");
        if ((op.code == OpCode::matmul || op.code == OpCode::attention || op.code == OpCode::copy ||
             op.code == OpCode::slice || op.code == OpCode::streams || op.code == OpCode::stream_mix ||
             op.code == OpCode::stream_mean) &&
            !s.dst.empty()) {
          for (const auto& r : reads)
            if (r == s.dst)
              return err(strf("'%s' cannot write its own input '%s'; assign another register", op.name, r.c_str()));
        }
        if (op.code == OpCode::attention) {
          if (sec != Section::block) return err("attention belongs in the 'block' section (it uses the layer's cache)");
          if (s.kwarg("sliding") && (s.kwarg("period") || s.kwarg("offset")))
            return err("attention: 'sliding' says per layer which layers slide; it replaces 'period' and 'offset'");
          if (s.kwarg("offset") && !s.kwarg("period"))
            return err("attention: 'offset' places the global layers within a 'period'; give the period too");
          if (++attentions > 1) return err("a block has at most one attention (one KV cache per layer)");
        }
        if (op.code == OpCode::last) {
          if (sec != Section::epilogue) return err("last() belongs in the 'epilogue' section");
          if (after_last) return err("last() is used twice");
          after_last = true;
          reduced.push_back(s.args[0].word);
        }
        if (!s.dst.empty()) {
          if (!is_assigned(s.dst)) assigned.push_back(s.dst);
          if (after_last && std::find(reduced.begin(), reduced.end(), s.dst) == reduced.end()) reduced.push_back(s.dst);
        }
      }
      if (sec == Section::prologue && !is_assigned("x"))
        return make_error(Errc::archdef,
                          where_ + ": the prologue must assign the residual register 'x' (x = embed(...))");
    }
    if (!is_assigned("logits") ||
        std::none_of(d.epilogue.begin(), d.epilogue.end(), [](const StmtDef& s) { return s.dst == "logits"; }))
      return make_error(Errc::archdef, where_ + ": the epilogue must assign 'logits' (logits = matmul(...))");
    return {};
  }

  std::string_view text_;
  std::string where_, expected_;
  int line_ = 0;
  std::vector<Tok> toks_;
  size_t i_ = 0;
};

// Parses and validates a definition. `where` names it in messages; `expected_name` (from the file
// name; empty to skip) must equal its `arch` line; `origin` is "builtin" or the path.
inline Result<ArchDef> archdef_parse(std::string_view text, const std::string& where, const std::string& expected_name,
                                     const std::string& origin) {
  ArchdefParser p(text, where, expected_name);
  auto d = p.parse();
  if (!d) return d.error();
  d->origin = origin;
  return d;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
