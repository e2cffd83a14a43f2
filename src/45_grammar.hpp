// ==== Grammars: the GBNF parser, compilation to bytes, the matcher ====
// A grammar in llama.cpp's GBNF syntax (rules `name ::= alternatives`, "literals", [classes],
// [^negated], `.`, ( groups ), * + ? {m} {m,} {m,n}, # comments) is parsed into a syntax tree
// (GbnfGrammar: kept for messages and tests), then compiled into a grammar over BYTES:
// GrammarCore. A character class over code points becomes the alternatives of its UTF-8 byte
// sequences ([^"] = [\x00-!#-\x7F] | [\xC2-\xDF][\x80-\xBF] | ...), so that tokens, which are
// byte strings that may end inside a character, are matched byte by byte and only valid UTF-8 can
// ever match (surrogates are never matched: UTF-8 cannot hold them). Repetitions become rules:
// S{2,4} = S S S'2, S'2 ::= S S'1 | (empty), S'1 ::= S | (empty); S* = S', S' ::= S S' | (empty).
//
// Checked when compiling, so that matching always terminates and every prefix it allows can be
// completed: every rule referenced is defined (once) and `root` exists; no rule can reach itself
// without consuming input (left recursion: refused, naming the rules of the cycle); alternatives
// that can never finish (a rule with no way to end) are dropped, and when `root` itself cannot
// finish the grammar is refused ("no string matches"). Sizes are bounded (LLMINFER_GRAMMAR_*).
//
// The matcher is a set of parse stacks (an Earley-like pushdown simulation): a stack is a chain
// of positions "what comes next" in each open rule, kept as interned nodes (position, parent) so
// that equal stacks are equal numbers and tails are shared. A state (the set of stacks whose top
// is a byte set, plus whether the input so far is a complete match) is interned too, and each
// state's transitions are cached per byte: after warm-up, matching a byte is one table lookup.
// A rule reference at the end of an alternative does not keep its caller's frame (tail call), so
// right recursion (S' ::= S S') runs in constant stack depth. The caches are bounded: past
// LLMINFER_GRAMMAR_MAX_CACHE bytes they are dropped and rebuilt from the current state.
#ifndef LLMINFER_GRAMMAR_MAX_BYTES
#define LLMINFER_GRAMMAR_MAX_BYTES (1u << 20)  // grammar text (a JSON schema's grammar included)
#endif
#ifndef LLMINFER_GRAMMAR_MAX_ELEMENTS
#define LLMINFER_GRAMMAR_MAX_ELEMENTS (1u << 20)  // compiled elements, after repetitions expand
#endif
#ifndef LLMINFER_GRAMMAR_MAX_REPEAT
#define LLMINFER_GRAMMAR_MAX_REPEAT 10000u  // largest m and n of {m,n}
#endif
#ifndef LLMINFER_GRAMMAR_MAX_DEPTH
#define LLMINFER_GRAMMAR_MAX_DEPTH 100  // nesting of ( ) in a rule
#endif
#ifndef LLMINFER_GRAMMAR_MAX_STACKS
#define LLMINFER_GRAMMAR_MAX_STACKS 10000u  // parse stacks alive at once (ambiguity)
#endif
#ifndef LLMINFER_GRAMMAR_MAX_CACHE
#define LLMINFER_GRAMMAR_MAX_CACHE (256ull << 20)  // bytes of matcher caches and token masks
#endif

namespace llminfer {
inline namespace v0_1 {
namespace detail {

// ---- syntax tree ----
struct GbnfExpr;
using GbnfSeq = std::vector<GbnfExpr>;

struct GbnfExpr {
  enum class Kind : uint8_t { literal, char_class, any, rule, group, repeat };
  static constexpr uint32_t kUnbounded = ~0u;
  Kind kind = Kind::literal;
  bool negated = false;                               // char_class: [^...]
  int32_t rule = -1;                                  // rule: index into GbnfGrammar::rules
  uint32_t min = 0, max = 0;                          // repeat: {min,max}; max = kUnbounded
  uint32_t line = 0, col = 0;                         // where it starts in the text (1-based)
  std::vector<uint32_t> chars;                        // literal: code points
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // char_class: inclusive code point ranges
  std::vector<GbnfSeq> alts;                          // group: alternatives; repeat: {{child}}
};

struct GbnfRule {
  std::string name;
  std::vector<GbnfSeq> alts;
  uint32_t line = 0;                   // definition (0: not defined)
  uint32_t ref_line = 0, ref_col = 0;  // first reference
};

struct GbnfGrammar {
  std::vector<GbnfRule> rules;
  int32_t root = -1;
};

// ---- parser ----
class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : s_(text) {}

  Result<GbnfGrammar> parse() {
    if (s_.size() > LLMINFER_GRAMMAR_MAX_BYTES)
      return make_error(Errc::invalid_argument, strf("grammar: the text is %zu bytes, more than the limit of %u "
                                                     "(LLMINFER_GRAMMAR_MAX_BYTES)",
                                                     s_.size(), static_cast<unsigned>(LLMINFER_GRAMMAR_MAX_BYTES)));
    const auto* p = reinterpret_cast<const unsigned char*>(s_.data());
    for (size_t i = 0; i < s_.size();) {
      int l = utf8_valid_len(p + i, s_.size() - i);
      if (l == 0) {
        pos_ = i;
        return error("the text is not valid UTF-8");
      }
      i += static_cast<size_t>(l);
    }
    space(true);
    while (pos_ < s_.size()) {
      if (!rule()) return error_result();
    }
    for (const auto& r : g_.rules) {
      if (r.line == 0) {
        err_ = strf("grammar line %u, column %u: rule '%s' is used but never defined", r.ref_line, r.ref_col,
                    r.name.c_str());
        return make_error(Errc::invalid_argument, err_);
      }
    }
    auto it = ids_.find("root");
    if (it == ids_.end()) return make_error(Errc::invalid_argument, "grammar: there is no rule 'root' (the start)");
    g_.root = it->second;
    return std::move(g_);
  }

 private:
  static bool word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  }
  char peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }
  bool at_end() const { return pos_ >= s_.size(); }

  // Line and column (in characters) of byte `at`; incremental, as parsing moves forward.
  void line_col(size_t at, uint32_t& line, uint32_t& col) {
    if (at < lc_pos_) lc_pos_ = 0, lc_line_ = 1, lc_col_ = 1;
    for (; lc_pos_ < at && lc_pos_ < s_.size(); lc_pos_++) {
      if (s_[lc_pos_] == '\n') {
        lc_line_++;
        lc_col_ = 1;
      } else if ((static_cast<unsigned char>(s_[lc_pos_]) & 0xC0) != 0x80) {
        lc_col_++;
      }
    }
    line = lc_line_;
    col = lc_col_;
  }
  bool fail(std::string msg) {
    if (err_.empty()) {
      uint32_t line, col;
      line_col(pos_, line, col);
      err_ = strf("grammar line %u, column %u: %s", line, col, msg.c_str());
    }
    return false;
  }
  Error error(std::string msg) {
    fail(std::move(msg));
    return error_result();
  }
  Error error_result() const { return make_error(Errc::invalid_argument, err_); }

  // Blanks, tabs and # comments; line breaks too when newline_ok.
  void space(bool newline_ok) {
    while (!at_end()) {
      char c = peek();
      if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
        pos_++;
      } else if (c == '#') {
        while (!at_end() && peek() != '\r' && peek() != '\n') pos_++;
      } else {
        break;
      }
    }
  }

  int32_t rule_id(const std::string& name, size_t at) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    int32_t id = static_cast<int32_t>(g_.rules.size());
    GbnfRule r;
    r.name = name;
    line_col(at, r.ref_line, r.ref_col);
    g_.rules.push_back(std::move(r));
    ids_.emplace(name, id);
    return id;
  }

  bool rule() {
    size_t start = pos_;
    while (!at_end() && word_char(peek())) pos_++;
    if (pos_ == start) return fail(strf("expected a rule name, found '%s'", shown(pos_).c_str()));
    std::string name(s_.substr(start, pos_ - start));
    space(false);
    if (!(peek() == ':' && peek(1) == ':' && peek(2) == '='))
      return fail("expected '::=' after the rule name '" + name + "'");
    pos_ += 3;
    space(true);
    int32_t id = rule_id(name, start);
    GbnfRule& r = g_.rules[static_cast<size_t>(id)];
    if (r.line != 0) {
      size_t keep = pos_;
      pos_ = start;
      fail(strf("rule '%s' is defined twice (first on line %u)", name.c_str(), r.line));
      pos_ = keep;
      return false;
    }
    uint32_t line, col;
    line_col(start, line, col);
    std::vector<GbnfSeq> alts;
    if (!alternates(alts, false, 0)) return false;
    GbnfRule& r2 = g_.rules[static_cast<size_t>(id)];  // alternates() may have added rules
    r2.line = line;
    r2.alts = std::move(alts);
    if (peek() == '\r') {
      pos_ += peek(1) == '\n' ? 2 : 1;
    } else if (peek() == '\n') {
      pos_++;
    } else if (!at_end()) {
      return fail(strf("expected the end of the line after rule '%s', found '%s'", name.c_str(), shown(pos_).c_str()));
    }
    space(true);
    return true;
  }

  bool alternates(std::vector<GbnfSeq>& out, bool nested, int depth) {
    if (depth > LLMINFER_GRAMMAR_MAX_DEPTH)
      return fail(strf("parentheses nested deeper than %d (LLMINFER_GRAMMAR_MAX_DEPTH)", LLMINFER_GRAMMAR_MAX_DEPTH));
    out.emplace_back();
    if (!sequence(out.back(), nested, depth)) return false;
    while (peek() == '|') {
      pos_++;
      space(true);
      out.emplace_back();
      if (!sequence(out.back(), nested, depth)) return false;
    }
    return true;
  }

  // The text at `at`, for messages: one character, or "end of input".
  std::string shown(size_t at) const {
    if (at >= s_.size()) return "end of input";
    size_t i = at;
    utf8_next(s_, i);
    std::string c(s_.substr(at, i - at));
    if (c == "\n") return "\\n";
    if (c == "\r") return "\\r";
    return c;
  }

  bool hex(int digits, uint32_t& v) {
    v = 0;
    for (int k = 0; k < digits; k++) {
      char c = peek();
      uint32_t d;
      if (c >= '0' && c <= '9')
        d = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f')
        d = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        d = static_cast<uint32_t>(c - 'A' + 10);
      else
        return fail(strf("expected %d hexadecimal digits", digits));
      v = (v << 4) | d;
      pos_++;
    }
    return true;
  }

  // One character of a literal or a class: raw UTF-8 or an escape (\x.. \u.... \U........ \t \r \n
  // \\ \" \[ \] \-, as llama.cpp).
  bool character(uint32_t& cp) {
    if (at_end()) return fail("unexpected end of input");
    size_t start = pos_;
    if (peek() == '\\') {
      pos_++;
      char e = peek();
      pos_++;
      switch (e) {
        case 'x':
          if (!hex(2, cp)) return false;
          break;
        case 'u':
          if (!hex(4, cp)) return false;
          break;
        case 'U':
          if (!hex(8, cp)) return false;
          break;
        case 't': cp = '\t'; break;
        case 'r': cp = '\r'; break;
        case 'n': cp = '\n'; break;
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-': cp = static_cast<unsigned char>(e); break;
        default: pos_ = start; return fail(strf("unknown escape '\\%s'", shown(start + 1).c_str()));
      }
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        pos_ = start;
        return fail(
            strf("escape U+%X is not a Unicode scalar value (surrogates and values above U+10FFFF never "
                 "appear in UTF-8 text)",
                 cp));
      }
      return true;
    }
    cp = utf8_next(s_, pos_);  // the text was checked to be valid UTF-8
    return true;
  }

  bool number(uint32_t& v) {
    size_t start = pos_;
    uint64_t x = 0;
    while (peek() >= '0' && peek() <= '9') {
      x = x * 10 + static_cast<uint64_t>(peek() - '0');
      if (x > LLMINFER_GRAMMAR_MAX_REPEAT) {
        pos_ = start;
        return fail(strf("repetition count above the limit of %u (LLMINFER_GRAMMAR_MAX_REPEAT)",
                         static_cast<unsigned>(LLMINFER_GRAMMAR_MAX_REPEAT)));
      }
      pos_++;
    }
    if (pos_ == start) return fail(strf("expected a number, found '%s'", shown(pos_).c_str()));
    v = static_cast<uint32_t>(x);
    return true;
  }

  bool sequence(GbnfSeq& out, bool nested, int depth) {
    while (!at_end()) {
      GbnfExpr e;
      line_col(pos_, e.line, e.col);
      char c = peek();
      if (c == '"') {
        size_t start = pos_;
        pos_++;
        e.kind = GbnfExpr::Kind::literal;
        while (peek() != '"') {
          if (at_end()) {
            pos_ = start;
            return fail("unterminated string (no closing \")");
          }
          uint32_t cp;
          if (!character(cp)) return false;
          e.chars.push_back(cp);
        }
        pos_++;
        out.push_back(std::move(e));
      } else if (c == '[') {
        size_t start = pos_;
        pos_++;
        e.kind = GbnfExpr::Kind::char_class;
        if (peek() == '^') {
          e.negated = true;
          pos_++;
        }
        while (peek() != ']') {
          if (at_end()) {
            pos_ = start;
            return fail("unterminated character class (no closing ])");
          }
          uint32_t lo, hi;
          size_t item = pos_;
          if (!character(lo)) return false;
          hi = lo;
          if (peek() == '-' && peek(1) != ']' && pos_ + 1 < s_.size()) {
            pos_++;
            if (!character(hi)) return false;
            if (hi < lo) {
              pos_ = item;
              return fail(strf("empty range in a character class (U+%X after U+%X)", lo, hi));
            }
          }
          e.ranges.emplace_back(lo, hi);
        }
        if (e.ranges.empty()) return fail("empty character class []");
        pos_++;
        out.push_back(std::move(e));
      } else if (c == '<' || c == '!') {
        return fail("token references (<...>, !<...>) are not supported; write the text as a \"literal\"");
      } else if (word_char(c)) {
        size_t start = pos_;
        while (!at_end() && word_char(peek())) pos_++;
        e.kind = GbnfExpr::Kind::rule;
        e.rule = rule_id(std::string(s_.substr(start, pos_ - start)), start);
        out.push_back(std::move(e));
      } else if (c == '(') {
        pos_++;
        space(true);
        e.kind = GbnfExpr::Kind::group;
        if (!alternates(e.alts, true, depth + 1)) return false;
        if (peek() != ')') return fail(strf("expected ')', found '%s'", shown(pos_).c_str()));
        pos_++;
        out.push_back(std::move(e));
      } else if (c == '.') {
        pos_++;
        e.kind = GbnfExpr::Kind::any;
        out.push_back(std::move(e));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (out.empty()) return fail(strf("'%c' follows nothing it could repeat", c));
        int chain = depth + 1;  // repetitions of repetitions nest too (x***...): bounded with ( )
        for (const GbnfExpr* x = &out.back(); x->kind == GbnfExpr::Kind::repeat; x = &x->alts[0][0]) chain++;
        if (chain > LLMINFER_GRAMMAR_MAX_DEPTH)
          return fail(strf("repetitions and parentheses nested deeper than %d (LLMINFER_GRAMMAR_MAX_DEPTH)",
                           LLMINFER_GRAMMAR_MAX_DEPTH));
        uint32_t mn = 0, mx = GbnfExpr::kUnbounded;
        pos_++;
        if (c == '+') {
          mn = 1;
        } else if (c == '?') {
          mx = 1;
        } else if (c == '{') {
          space(nested);
          if (!number(mn)) return false;
          space(nested);
          if (peek() == '}') {
            mx = mn;
          } else if (peek() == ',') {
            pos_++;
            space(nested);
            if (peek() >= '0' && peek() <= '9') {
              if (!number(mx)) return false;
              space(nested);
              if (mx < mn) return fail(strf("repetition {%u,%u}: the maximum is below the minimum", mn, mx));
            }
            if (peek() != '}') return fail(strf("expected '}', found '%s'", shown(pos_).c_str()));
          } else {
            return fail(strf("expected ',' or '}' in a repetition, found '%s'", shown(pos_).c_str()));
          }
          pos_++;
        }
        GbnfExpr rep;
        rep.kind = GbnfExpr::Kind::repeat;
        rep.min = mn;
        rep.max = mx;
        rep.line = out.back().line;
        rep.col = out.back().col;
        rep.alts.emplace_back();
        rep.alts.back().push_back(std::move(out.back()));
        out.back() = std::move(rep);
      } else {
        break;
      }
      space(nested);
    }
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
  size_t lc_pos_ = 0;
  uint32_t lc_line_ = 1, lc_col_ = 1;
  std::string err_;
  GbnfGrammar g_;
  std::unordered_map<std::string, int32_t> ids_;
};

inline Result<GbnfGrammar> gbnf_parse(std::string_view text) {
  return GbnfParser(text).parse();
}

// ---- the compiled grammar over bytes ----
struct ByteSet {
  uint64_t w[4] = {0, 0, 0, 0};
  void set(unsigned b) { w[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(unsigned lo, unsigned hi) {
    for (unsigned b = lo; b <= hi; b++) set(b);
  }
  bool has(unsigned b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  bool operator==(const ByteSet& o) const {
    return w[0] == o.w[0] && w[1] == o.w[1] && w[2] == o.w[2] && w[3] == o.w[3];
  }
};

struct GrammarCore {
  enum Kind : uint8_t { kEnd, kBytes, kRef };
  struct Elem {
    Kind kind;
    int32_t arg;  // kBytes: index into sets; kRef: rule
  };
  std::vector<Elem> elems;                      // alternatives, each ended by kEnd
  std::vector<std::vector<int32_t>> rule_alts;  // rule -> start of each alternative in elems
  std::vector<std::string> rule_names;          // for messages ("x", or "x: group at 3:5")
  std::vector<ByteSet> sets;
  int32_t root = -1;
};

// Splits the code points [lo, hi] (one UTF-8 length, no surrogates) into byte-range sequences.
inline void utf8_range_sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  static const uint32_t kMax[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  for (int n = 0; n < 3; n++) {  // different lengths: split at the boundaries
    if (lo <= kMax[n] && hi > kMax[n]) {
      utf8_range_sequences(lo, kMax[n], out);
      utf8_range_sequences(kMax[n] + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out.push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  const int len = hi <= 0x7FF ? 2 : hi <= 0xFFFF ? 3 : 4;
  for (int i = 1; i < len; i++) {  // make every trailing-byte group span its full range
    uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_range_sequences(lo, lo | m, out);
        utf8_range_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_range_sequences(lo, (hi & ~m) - 1, out);
        utf8_range_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  utf8_append(a, lo);
  utf8_append(b, hi);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (size_t k = 0; k < a.size(); k++) seq.emplace_back(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
  out.push_back(std::move(seq));
}

class GrammarCompiler {
 public:
  explicit GrammarCompiler(const GbnfGrammar& g) : g_(g) {}

  Result<GrammarCore> compile() {
    const size_t n = g_.rules.size();
    c_.rule_alts.resize(n);
    for (const auto& r : g_.rules) c_.rule_names.push_back(r.name);
    for (size_t r = 0; r < n; r++) {
      std::vector<std::vector<GrammarCore::Elem>> alts;
      for (const auto& seq : g_.rules[r].alts) {
        alts.emplace_back();
        if (!lower_seq(seq, alts.back(), g_.rules[r].name)) return make_error(Errc::invalid_argument, err_);
      }
      emit_rule(static_cast<int32_t>(r), alts);
    }
    if (!err_.empty()) return make_error(Errc::invalid_argument, err_);
    c_.root = g_.root;
    if (auto a = analyse(); !a) return a.error();
    return std::move(c_);
  }

 private:
  using Elem = GrammarCore::Elem;
  using Alts = std::vector<std::vector<Elem>>;

  bool budget(size_t more, const GbnfExpr& at) {
    if (c_.elems.size() + pending_ + more > LLMINFER_GRAMMAR_MAX_ELEMENTS) {
      if (err_.empty())
        err_ = strf(
            "grammar line %u, column %u: the grammar grows past %u elements when its repetitions are "
            "expanded (LLMINFER_GRAMMAR_MAX_ELEMENTS)",
            at.line, at.col, static_cast<unsigned>(LLMINFER_GRAMMAR_MAX_ELEMENTS));
      return false;
    }
    pending_ += more;
    return true;
  }

  int32_t set_index(const ByteSet& s) {
    std::string key(reinterpret_cast<const char*>(s.w), sizeof s.w);
    auto [it, fresh] = set_ids_.emplace(key, static_cast<int32_t>(c_.sets.size()));
    if (fresh) c_.sets.push_back(s);
    return it->second;
  }
  int32_t byte_elem(unsigned lo, unsigned hi) {
    auto key = (lo << 8) | hi;
    auto it = range_sets_.find(key);
    if (it != range_sets_.end()) return it->second;
    ByteSet s;
    s.set_range(lo, hi);
    int32_t id = set_index(s);
    range_sets_.emplace(key, id);
    return id;
  }

  int32_t new_rule(std::string name) {
    c_.rule_alts.emplace_back();
    c_.rule_names.push_back(std::move(name));
    return static_cast<int32_t>(c_.rule_alts.size() - 1);
  }
  void emit_rule(int32_t r, const Alts& alts) {
    for (const auto& a : alts) {
      c_.rule_alts[static_cast<size_t>(r)].push_back(static_cast<int32_t>(c_.elems.size()));
      c_.elems.insert(c_.elems.end(), a.begin(), a.end());
      c_.elems.push_back({GrammarCore::kEnd, 0});
      pending_ -= std::min(pending_, a.size() + 1);
    }
  }

  bool lower_seq(const GbnfSeq& seq, std::vector<Elem>& out, const std::string& ctx) {
    for (const auto& e : seq)
      if (!lower(e, out, ctx)) return false;
    return true;
  }

  // A code point class -> one byte set (ASCII only) or a rule of UTF-8 sequences.
  bool lower_class(std::vector<std::pair<uint32_t, uint32_t>> ranges, bool negated, std::vector<Elem>& out,
                   const std::string& ctx, const GbnfExpr& at) {
    // normalise: sorted, merged, surrogates removed, complemented when negated
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<uint32_t, uint32_t>> m;
    for (auto r : ranges) {
      if (!m.empty() && r.first <= m.back().second + 1)
        m.back().second = std::max(m.back().second, r.second);
      else
        m.push_back(r);
    }
    if (negated) {
      std::vector<std::pair<uint32_t, uint32_t>> inv;
      uint32_t next = 0;
      for (auto r : m) {
        if (r.first > next) inv.emplace_back(next, r.first - 1);
        next = r.second + 1;
      }
      if (next <= 0x10FFFF) inv.emplace_back(next, 0x10FFFF);
      m = std::move(inv);
    }
    std::vector<std::pair<uint32_t, uint32_t>> valid;
    for (auto r : m) {
      if (r.first < 0xD800 && r.second >= 0xD800) {
        valid.emplace_back(r.first, 0xD7FF);
        if (r.second > 0xDFFF) valid.emplace_back(0xE000, r.second);
      } else if (r.first >= 0xD800 && r.first <= 0xDFFF) {
        if (r.second > 0xDFFF) valid.emplace_back(0xE000, r.second);
      } else {
        valid.push_back(r);
      }
    }
    std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
    for (auto r : valid) utf8_range_sequences(r.first, r.second, seqs);
    // the one-byte sequences become one set, the others one alternative each
    ByteSet ascii;
    bool any_ascii = false;
    Alts alts;
    for (const auto& s : seqs) {
      if (s.size() == 1) {
        ascii.set_range(s[0].first, s[0].second);
        any_ascii = true;
        continue;
      }
      alts.emplace_back();
      for (auto br : s) alts.back().push_back({GrammarCore::kBytes, byte_elem(br.first, br.second)});
    }
    if (alts.empty()) {
      if (!budget(1, at)) return false;
      if (!any_ascii) {  // nothing at all: a rule without alternatives (never finishes; pruned)
        out.push_back({GrammarCore::kRef, new_rule(ctx + strf(": empty class at %u:%u", at.line, at.col))});
        return true;
      }
      out.push_back({GrammarCore::kBytes, set_index(ascii)});
      return true;
    }
    if (any_ascii) alts.insert(alts.begin(), std::vector<Elem>{{GrammarCore::kBytes, set_index(ascii)}});
    // the same class again (e.g. a string's character) reuses its rule
    std::string key;
    for (const auto& a : alts) {
      for (auto el : a) key += strf("%d,", el.arg);
      key += ';';
    }
    auto it = class_rules_.find(key);
    if (it == class_rules_.end()) {
      size_t size = 0;
      for (const auto& a : alts) size += a.size() + 1;
      if (!budget(size + 1, at)) return false;
      int32_t r = new_rule(ctx + strf(": class at %u:%u", at.line, at.col));
      emit_rule(r, alts);
      it = class_rules_.emplace(key, r).first;
    } else if (!budget(1, at)) {
      return false;
    }
    out.push_back({GrammarCore::kRef, it->second});
    return true;
  }

  bool lower(const GbnfExpr& e, std::vector<Elem>& out, const std::string& ctx) {
    using K = GbnfExpr::Kind;
    switch (e.kind) {
      case K::literal: {
        std::string bytes;
        for (uint32_t cp : e.chars) utf8_append(bytes, cp);
        if (!budget(bytes.size(), e)) return false;
        for (unsigned char b : bytes) out.push_back({GrammarCore::kBytes, byte_elem(b, b)});
        return true;
      }
      case K::char_class: return lower_class(e.ranges, e.negated, out, ctx, e);
      case K::any: return lower_class({{0, 0x10FFFF}}, false, out, ctx, e);
      case K::rule:
        if (!budget(1, e)) return false;
        out.push_back({GrammarCore::kRef, e.rule});
        return true;
      case K::group: {
        if (e.alts.size() == 1) return lower_seq(e.alts[0], out, ctx);
        Alts alts;
        for (const auto& seq : e.alts) {
          alts.emplace_back();
          if (!lower_seq(seq, alts.back(), ctx)) return false;
        }
        if (!budget(1, e)) return false;
        int32_t r = new_rule(ctx + strf(": group at %u:%u", e.line, e.col));
        emit_rule(r, alts);
        out.push_back({GrammarCore::kRef, r});
        return true;
      }
      case K::repeat: {
        std::vector<Elem> s;
        if (!lower_seq(e.alts[0], s, ctx)) return false;
        const std::string name = ctx + strf(": repetition at %u:%u", e.line, e.col);
        if (s.size() != 1) {  // the repeated part as one rule, referenced once per copy
          int32_t r = new_rule(name + " (item)");
          emit_rule(r, Alts{s});
          s.assign(1, {GrammarCore::kRef, r});
        }
        if (!budget(static_cast<size_t>(e.min) + 1, e)) return false;
        for (uint32_t k = 0; k < e.min; k++) out.push_back(s[0]);
        if (e.max == GbnfExpr::kUnbounded) {  // S' ::= S S' | (empty)
          if (!budget(4, e)) return false;
          int32_t r = new_rule(name);
          emit_rule(r, Alts{{s[0], {GrammarCore::kRef, r}}, {}});
          out.push_back({GrammarCore::kRef, r});
        } else if (e.max > e.min) {  // S'1 ::= S | ; S'k ::= S S'(k-1) |
          const uint32_t opt = e.max - e.min;
          if (!budget(static_cast<size_t>(opt) * 4, e)) return false;
          int32_t prev = -1;
          for (uint32_t k = 1; k <= opt; k++) {
            int32_t r = new_rule(name);
            std::vector<Elem> a{s[0]};
            if (prev >= 0) a.push_back({GrammarCore::kRef, prev});
            emit_rule(r, Alts{a, {}});
            prev = r;
          }
          out.push_back({GrammarCore::kRef, prev});
        }
        return true;
      }
    }
    return true;
  }

  // Nullable and productive rules; refuses left recursion; drops alternatives that never finish.
  Result<void> analyse() {
    const size_t n = c_.rule_alts.size();
    auto elem_at = [&](int32_t p) { return c_.elems[static_cast<size_t>(p)]; };
    // productive (some alternative whose references all are) and nullable (some alternative of
    // references to nullable rules only): worklists over "rule t is used by alternative a", linear
    std::vector<uint8_t> productive(n, 0), nullable(n, 0);
    std::vector<int32_t> alt_rule, need_p, need_n;
    std::vector<std::vector<int32_t>> users(n);  // rule -> alternatives referring to it (per use)
    for (size_t r = 0; r < n; r++) {
      for (int32_t a : c_.rule_alts[r]) {
        int32_t id = static_cast<int32_t>(alt_rule.size());
        int32_t refs = 0, bytes = 0;
        for (int32_t p = a; elem_at(p).kind != GrammarCore::kEnd; p++) {
          if (elem_at(p).kind == GrammarCore::kRef) {
            refs++;
            users[static_cast<size_t>(elem_at(p).arg)].push_back(id);
          } else {
            bytes++;
          }
        }
        alt_rule.push_back(static_cast<int32_t>(r));
        need_p.push_back(refs);
        need_n.push_back(bytes > 0 ? -1 : refs);  // -1: never nullable
      }
    }
    auto propagate = [&](std::vector<uint8_t>& done, std::vector<int32_t>& need) {
      std::vector<int32_t> work;
      for (size_t a = 0; a < need.size(); a++)
        if (need[a] == 0 && !done[static_cast<size_t>(alt_rule[a])]) {
          done[static_cast<size_t>(alt_rule[a])] = 1;
          work.push_back(alt_rule[a]);
        }
      while (!work.empty()) {
        int32_t t = work.back();
        work.pop_back();
        for (int32_t a : users[static_cast<size_t>(t)]) {
          if (need[static_cast<size_t>(a)] <= 0 || --need[static_cast<size_t>(a)] != 0) continue;
          int32_t r = alt_rule[static_cast<size_t>(a)];
          if (!done[static_cast<size_t>(r)]) {
            done[static_cast<size_t>(r)] = 1;
            work.push_back(r);
          }
        }
      }
    };
    propagate(productive, need_p);
    propagate(nullable, need_n);
    // left recursion: a cycle of "may start with" edges (refs reached through nullable prefixes)
    std::vector<std::vector<int32_t>> starts(n);
    for (size_t r = 0; r < n; r++) {
      for (int32_t a : c_.rule_alts[r]) {
        for (int32_t p = a; elem_at(p).kind == GrammarCore::kRef; p++) {
          int32_t t = elem_at(p).arg;
          starts[r].push_back(t);
          if (!nullable[static_cast<size_t>(t)]) break;
        }
      }
    }
    std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<int32_t, size_t>> path;
    for (size_t r0 = 0; r0 < n; r0++) {
      if (color[r0]) continue;
      path.emplace_back(static_cast<int32_t>(r0), 0);
      color[r0] = 1;
      while (!path.empty()) {
        auto& [r, k] = path.back();
        if (k < starts[static_cast<size_t>(r)].size()) {
          int32_t t = starts[static_cast<size_t>(r)][k++];
          if (color[static_cast<size_t>(t)] == 1) {
            std::string cycle;
            size_t from = 0;
            while (path[from].first != t) from++;
            for (size_t i = from; i < path.size(); i++)
              cycle += "'" + c_.rule_names[static_cast<size_t>(path[i].first)] + "' -> ";
            cycle += "'" + c_.rule_names[static_cast<size_t>(t)] + "'";
            return make_error(
                Errc::invalid_argument,
                "grammar: left recursion: " + cycle +
                    " can recurse without consuming input (rewrite it with repetition, e.g. x ::= y (\"+\" y)*)");
          }
          if (color[static_cast<size_t>(t)] == 0) {
            color[static_cast<size_t>(t)] = 1;
            path.emplace_back(t, 0);
          }
        } else {
          color[static_cast<size_t>(r)] = 2;
          path.pop_back();
        }
      }
    }
    if (!productive[static_cast<size_t>(c_.root)])
      return make_error(Errc::invalid_argument,
                        "grammar: no string matches the grammar ('root' can never finish: every alternative needs a "
                        "rule that never ends, or an empty character class)");
    // drop the alternatives that cannot finish (they match nothing: the language is unchanged)
    for (size_t r = 0; r < n; r++) {
      auto& alts = c_.rule_alts[r];
      alts.erase(std::remove_if(alts.begin(), alts.end(),
                                [&](int32_t a) {
                                  for (int32_t p = a; elem_at(p).kind != GrammarCore::kEnd; p++)
                                    if (elem_at(p).kind == GrammarCore::kRef &&
                                        !productive[static_cast<size_t>(elem_at(p).arg)])
                                      return true;
                                  return false;
                                }),
                 alts.end());
    }
    return {};
  }

  const GbnfGrammar& g_;
  GrammarCore c_;
  std::string err_;
  size_t pending_ = 0;  // elements of alternatives built but not emitted yet
  std::unordered_map<unsigned, int32_t> range_sets_;
  std::unordered_map<std::string, int32_t> set_ids_;
  std::unordered_map<std::string, int32_t> class_rules_;
};

inline Result<std::shared_ptr<const GrammarCore>> compile_grammar(std::string_view gbnf) {
  auto g = gbnf_parse(gbnf);
  if (!g) return g.error();
  auto c = GrammarCompiler(*g).compile();
  if (!c) return c.error();
  return std::make_shared<const GrammarCore>(std::move(*c));
}

// ---- the matcher ----
// States are numbers (>= 0); kDead (-1) is "no continuation". Not thread-safe: one per generation.
class GrammarMatcher {
 public:
  static constexpr int32_t kDead = -1;
  static constexpr int32_t kUnknown = -2;

  explicit GrammarMatcher(std::shared_ptr<const GrammarCore> g) : g_(std::move(g)) {}

  // The state before any input.
  Result<int32_t> start() {
    begin_step();
    for (int32_t a : g_->rule_alts[static_cast<size_t>(g_->root)])
      if (!expand(a, -1)) return too_complex();
    return finish_step();
  }

  // The state after `byte`, or kDead.
  Result<int32_t> next(int32_t state, uint8_t byte) {
    int32_t& slot = trans_slot(state, byte);
    if (slot != kUnknown) return slot;
    begin_step();
    const State st = states_[static_cast<size_t>(state)];
    for (uint32_t k = 0; k < st.len; k++) {
      const Node nd = nodes_[static_cast<size_t>(stack_pool_[st.off + k])];
      const GrammarCore::Elem e = g_->elems[static_cast<size_t>(nd.pos)];
      if (!g_->sets[static_cast<size_t>(e.arg)].has(byte)) continue;
      if (!expand(nd.pos + 1, nd.parent)) return too_complex();
    }
    auto r = finish_step();
    if (!r) return r;
    trans_slot(state, byte) = *r;  // (the pool may have grown: look the slot up again)
    return r;
  }

  // The transition if it is known, else kUnknown (the fast path of a walk over many tokens).
  int32_t cached(int32_t state, uint8_t byte) const {
    int32_t t = states_[static_cast<size_t>(state)].trans;
    return t < 0 ? kUnknown : trans_pool_[static_cast<size_t>(t) + byte];
  }

  // The 256 transitions of `state` (kUnknown where not computed yet), for walks over many tokens.
  // Valid until the transition pool moves (pool() changes): next() and transitions() may move it.
  const int32_t* transitions(int32_t state) {
    trans_slot(state, 0);
    return trans_pool_.data() + states_[static_cast<size_t>(state)].trans;
  }
  const int32_t* pool() const { return trans_pool_.data(); }

  // Feeds bytes; kDead as soon as one does not fit.
  Result<int32_t> feed(int32_t state, std::string_view bytes) {
    for (unsigned char b : bytes) {
      if (state == kDead) return state;
      auto n = next(state, b);
      if (!n) return n;
      state = *n;
    }
    return state;
  }

  bool accepting(int32_t state) const { return state >= 0 && states_[static_cast<size_t>(state)].accept; }
  // True when some byte may follow (the state has stacks waiting for input).
  bool can_continue(int32_t state) const { return state >= 0 && states_[static_cast<size_t>(state)].len > 0; }

  size_t cache_bytes() const {
    return nodes_.size() * sizeof(Node) + node_ids_.size() * 32 + states_.size() * (sizeof(State) + 32) +
           stack_pool_.size() * 4 + trans_pool_.size() * 4;
  }
  // Bumped by compact(): state numbers from before are meaningless afterwards.
  uint32_t generation() const { return generation_; }

  // Drops every cache, keeping only `state` (renumbered: the new number is returned).
  Result<int32_t> compact(int32_t state) {
    if (state < 0) return state;
    const State st = states_[static_cast<size_t>(state)];
    std::vector<Node> old_nodes = std::move(nodes_);
    std::vector<int32_t> tops(stack_pool_.begin() + st.off, stack_pool_.begin() + st.off + st.len);
    nodes_.clear();
    node_ids_.clear();
    states_.clear();
    state_ids_.clear();
    stack_pool_.clear();
    trans_pool_.clear();
    visited_.clear();
    generation_++;
    std::unordered_map<int32_t, int32_t> remap;
    // re-intern each stack from the bottom up (parents first)
    std::vector<int32_t> chain;
    auto copy = [&](int32_t id) {
      chain.clear();
      for (int32_t c = id; c >= 0 && !remap.count(c); c = old_nodes[static_cast<size_t>(c)].parent) chain.push_back(c);
      for (size_t k = chain.size(); k-- > 0;) {
        const Node& o = old_nodes[static_cast<size_t>(chain[k])];
        int32_t parent = o.parent < 0 ? -1 : remap[o.parent];
        remap[chain[k]] = intern(o.pos, parent);
      }
      return remap[id];
    };
    ready_.clear();
    for (int32_t t : tops) ready_.push_back(copy(t));
    accept_ = st.accept;
    return intern_state();
  }

 private:
  struct Node {
    int32_t pos;     // next element of this frame's alternative
    int32_t parent;  // the frame below (-1: none)
  };
  struct State {
    uint32_t off, len;  // ready stacks in stack_pool_
    bool accept;
    int32_t trans;  // offset of 256 transitions in trans_pool_, or -1
  };

  Error too_complex() const {
    return make_error(Errc::invalid_argument,
                      strf("grammar: more than %u parse stacks at once, or 64 times as many expansion steps for one "
                           "byte (LLMINFER_GRAMMAR_MAX_STACKS): the grammar is too ambiguous",
                           static_cast<unsigned>(LLMINFER_GRAMMAR_MAX_STACKS)));
  }

  int32_t& trans_slot(int32_t state, uint8_t byte) {
    State& st = states_[static_cast<size_t>(state)];
    if (st.trans < 0) {
      st.trans = static_cast<int32_t>(trans_pool_.size());
      if (trans_pool_.capacity() < trans_pool_.size() + 256)
        trans_pool_.reserve(std::max<size_t>(trans_pool_.size() * 2, 256 * 1024));
      trans_pool_.resize(trans_pool_.size() + 256, kUnknown);
    }
    return trans_pool_[static_cast<size_t>(st.trans) + byte];
  }

  int32_t intern(int32_t pos, int32_t parent) {
    uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent);
    auto [it, fresh] = node_ids_.emplace(key, static_cast<int32_t>(nodes_.size()));
    if (fresh) nodes_.push_back({pos, parent});
    return it->second;
  }

  void begin_step() {
    ready_.clear();
    accept_ = false;
    steps_ = 0;
    if (++epoch_ == 0) {
      std::fill(visited_.begin(), visited_.end(), 0u);
      epoch_ = 1;
    }
  }

  // Adds the stacks that (pos, parent) leads to without consuming input. False when too many.
  bool expand(int32_t pos0, int32_t parent0) {
    work_.clear();
    work_.emplace_back(pos0, parent0);
    while (!work_.empty()) {
      if (++steps_ > 64 * static_cast<size_t>(LLMINFER_GRAMMAR_MAX_STACKS)) return false;
      auto [pos, parent] = work_.back();
      work_.pop_back();
      GrammarCore::Elem e = g_->elems[static_cast<size_t>(pos)];
      while (e.kind == GrammarCore::kEnd) {  // the alternative is complete: return to the caller
        if (parent < 0) break;
        pos = nodes_[static_cast<size_t>(parent)].pos;
        parent = nodes_[static_cast<size_t>(parent)].parent;
        e = g_->elems[static_cast<size_t>(pos)];
      }
      if (e.kind == GrammarCore::kEnd) {
        accept_ = true;
        continue;
      }
      int32_t id = intern(pos, parent);
      if (visited_.size() < nodes_.size()) visited_.resize(nodes_.size() * 2, 0u);
      if (visited_[static_cast<size_t>(id)] == epoch_) continue;
      visited_[static_cast<size_t>(id)] = epoch_;
      if (e.kind == GrammarCore::kBytes) {
        ready_.push_back(id);
        if (ready_.size() > LLMINFER_GRAMMAR_MAX_STACKS) return false;
        continue;
      }
      // a rule: its alternatives, returning to pos + 1 (not kept when that ends the caller: tail call)
      int32_t cont =
          g_->elems[static_cast<size_t>(pos) + 1].kind == GrammarCore::kEnd ? parent : intern(pos + 1, parent);
      for (int32_t a : g_->rule_alts[static_cast<size_t>(e.arg)]) work_.emplace_back(a, cont);
      if (work_.size() > 16 * static_cast<size_t>(LLMINFER_GRAMMAR_MAX_STACKS)) return false;
    }
    return true;
  }

  Result<int32_t> finish_step() {
    if (ready_.empty() && !accept_) return kDead;
    std::sort(ready_.begin(), ready_.end());
    ready_.erase(std::unique(ready_.begin(), ready_.end()), ready_.end());
    return intern_state();
  }

  int32_t intern_state() {
    uint64_t h = accept_ ? 0x9e3779b97f4a7c15ull : 0;
    for (int32_t id : ready_) h = (h ^ static_cast<uint32_t>(id)) * 0x100000001b3ull;
    auto range = state_ids_.equal_range(h);
    for (auto it = range.first; it != range.second; it++) {
      const State& s = states_[static_cast<size_t>(it->second)];
      if (s.accept == accept_ && s.len == ready_.size() &&
          std::equal(ready_.begin(), ready_.end(), stack_pool_.begin() + s.off))
        return it->second;
    }
    int32_t id = static_cast<int32_t>(states_.size());
    states_.push_back({static_cast<uint32_t>(stack_pool_.size()), static_cast<uint32_t>(ready_.size()), accept_, -1});
    stack_pool_.insert(stack_pool_.end(), ready_.begin(), ready_.end());
    state_ids_.emplace(h, id);
    return id;
  }

  std::shared_ptr<const GrammarCore> g_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<State> states_;
  std::unordered_multimap<uint64_t, int32_t> state_ids_;
  std::vector<int32_t> stack_pool_;
  std::vector<int32_t> trans_pool_;
  std::vector<uint32_t> visited_;
  uint32_t epoch_ = 0;
  uint32_t generation_ = 0;
  std::vector<std::pair<int32_t, int32_t>> work_;
  std::vector<int32_t> ready_;
  bool accept_ = false;
  size_t steps_ = 0;  // expansion steps of this transition (bounded: a hostile grammar cannot hang)
};

// How a whole text fares: rejected, a prefix of some match, or a complete match.
enum class GrammarVerdict : uint8_t { reject, prefix, complete };

inline Result<GrammarVerdict> grammar_match(GrammarMatcher& m, std::string_view text) {
  auto s = m.start();
  if (!s) return s.error();
  auto e = m.feed(*s, text);
  if (!e) return e.error();
  if (*e == GrammarMatcher::kDead) return GrammarVerdict::reject;
  return m.accepting(*e) ? GrammarVerdict::complete : GrammarVerdict::prefix;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
