// ==== Chat templates, part 1: Jinja values, lexer and parser ====
// A small Jinja interpreter for the `chat_template` of model files, configured as Hugging Face
// transformers configures Jinja2 (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, one
// trailing newline dropped, loop controls, `generation` blocks). Values follow Python semantics
// where templates can see them (truthiness, repr of lists/dicts, float printing, slicing by code
// point). Everything a template can do is bounded (LLMINFER_JINJA_* below): steps, nesting, call
// depth, string and output sizes, range length (as the sandbox: 100000).
//
// Strings carry provenance: which bytes came from message content (untrusted). It survives
// concatenation, slicing, splitting, stripping, replace, join, case changes and escaping, so the
// rendered prompt reports the byte ranges the tokenizer must not parse for special tokens.
#ifndef LLMINFER_JINJA_MAX_DEPTH
#define LLMINFER_JINJA_MAX_DEPTH 200  // nesting of statements and expressions in a template
#endif
#ifndef LLMINFER_JINJA_MAX_EVAL_DEPTH
#define LLMINFER_JINJA_MAX_EVAL_DEPTH 1000  // nested evaluation (incl. macro recursion) while rendering
#endif
#ifndef LLMINFER_JINJA_MAX_CALL_DEPTH
#define LLMINFER_JINJA_MAX_CALL_DEPTH 32  // macro calls in flight
#endif
#ifndef LLMINFER_JINJA_MAX_STACK
// Bytes of stack that parsing, and rendering, may use below where they start (measured, so the
// bound holds whatever the compiler's frame sizes): with the default a template renders on a
// thread with 512 KB of stack (macOS's default for secondary threads) with room to spare.
// AddressSanitizer's redzones make every frame several times larger: such a build allows 1 MiB.
#if defined(__SANITIZE_ADDRESS__)
#define LLMINFER_JINJA_MAX_STACK (1024u << 10)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LLMINFER_JINJA_MAX_STACK (1024u << 10)
#endif
#endif
#ifndef LLMINFER_JINJA_MAX_STACK
#define LLMINFER_JINJA_MAX_STACK (256u << 10)
#endif
#endif
#ifndef LLMINFER_JINJA_MAX_STEPS
// Evaluation steps per render (a node evaluated, a loop iteration, an element or 64 bytes of text
// copied; roughly 0.1-0.3 us each), plus 10 per (message + tool)^2 up to 100M more, since real
// templates scan the conversation once per message.
#define LLMINFER_JINJA_MAX_STEPS 10000000ull
#endif
#ifndef LLMINFER_JINJA_MAX_STRING
#define LLMINFER_JINJA_MAX_STRING (16ull << 20)  // bytes of any string value and of the output
#endif
#ifndef LLMINFER_JINJA_MAX_LIST
#define LLMINFER_JINJA_MAX_LIST (1u << 18)  // items of a list built while rendering
#endif
#ifndef LLMINFER_JINJA_MAX_RANGE
#define LLMINFER_JINJA_MAX_RANGE 100000  // items of range(), as Jinja2's sandbox
#endif
#ifndef LLMINFER_JINJA_MAX_TEMPLATE
#define LLMINFER_JINJA_MAX_TEMPLATE (4ull << 20)  // bytes of template source
#endif

#include <ctime>

namespace llminfer {
inline namespace v0_1 {
namespace detail {

// The current stack position (the stack's direction does not matter: distances are compared).
inline uintptr_t jstack_here() {
#if defined(__GNUC__) || defined(__clang__)
  return reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
#else
  volatile char c = 0;
  return reinterpret_cast<uintptr_t>(&c);
#endif
}
inline size_t jstack_used(uintptr_t base) {
  uintptr_t here = jstack_here();
  return base > here ? base - here : here - base;
}

// ---- text with provenance ----
// `spans` are the byte ranges of `s` that came from untrusted content: sorted, disjoint and never
// touching (adjacent ranges are merged).
struct PText {
  std::string s;
  std::vector<std::pair<size_t, size_t>> spans;

  PText() = default;
  explicit PText(std::string text, bool content = false) : s(std::move(text)) {
    if (content && !s.empty()) spans.emplace_back(0, s.size());
  }
  void mark(size_t b, size_t e) {
    if (b >= e) return;
    if (!spans.empty() && spans.back().second >= b) {
      spans.back().second = std::max(spans.back().second, e);
    } else {
      spans.emplace_back(b, e);
    }
  }
  void add(std::string_view t, bool content = false) {
    if (t.empty()) return;
    size_t b = s.size();
    s.append(t.data(), t.size());
    if (content) mark(b, s.size());
  }
  void add(char c, bool content = false) {
    s += c;
    if (content) mark(s.size() - 1, s.size());
  }
  // Appends o.s[b, e) with its provenance.
  void add_range(const PText& o, size_t b, size_t e) {
    if (b >= e) return;
    size_t base = s.size();
    s.append(o.s, b, e - b);
    auto it = std::lower_bound(o.spans.begin(), o.spans.end(), b,
                               [](const std::pair<size_t, size_t>& sp, size_t v) { return sp.second <= v; });
    for (; it != o.spans.end() && it->first < e; ++it)
      mark(base + std::max(it->first, b) - b, base + std::min(it->second, e) - b);
  }
  void add(const PText& o) { add_range(o, 0, o.s.size()); }
  bool any_content() const { return !spans.empty(); }
  // Is any byte of [b, e) from content?
  bool content_in(size_t b, size_t e) const {
    auto it = std::lower_bound(spans.begin(), spans.end(), b,
                               [](const std::pair<size_t, size_t>& sp, size_t v) { return sp.second <= v; });
    return it != spans.end() && it->first < e;
  }
};

// ---- code points ----
// Strings are UTF-8; an invalid byte counts as one code point of its own (U+DC80 + byte, as
// Python's surrogateescape), so indexing and slicing are defined on any bytes and round-trip.
inline uint32_t jcp_next(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  if (p[i] < 0x80) return p[i++];
  if (utf8_valid_len(p + i, s.size() - i) == 0) return 0xDC00u + p[i++];
  return utf8_next(s, i);
}
inline void jcp_append(std::string& out, uint32_t c) {
  if (c >= 0xDC80 && c <= 0xDCFF) {
    out += static_cast<char>(c - 0xDC00);
  } else {
    utf8_append(out, c);
  }
}
inline bool jis_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}
// Byte offset of every code point of s, plus s.size() at the end.
inline std::vector<size_t> jcp_offsets(std::string_view s) {
  std::vector<size_t> off;
  off.reserve(s.size() + 1);
  size_t i = 0;
  while (i < s.size()) {
    off.push_back(i);
    jcp_next(s, i);
  }
  off.push_back(s.size());
  return off;
}
inline size_t jcp_count(std::string_view s) {
  if (jis_ascii(s)) return s.size();
  size_t n = 0, i = 0;
  while (i < s.size()) {
    jcp_next(s, i);
    n++;
  }
  return n;
}
// Python's str.isspace() (also what `\s` matches in Jinja2's lexer and str.split() splits on): White_Space
// and the separators U+001C..U+001F.
inline bool jis_space(uint32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  return c >= 0x85 && is_uwhitespace(c);
}

// ---- values ----
struct JValue;
struct JFunc;
struct JLoop;

// A sequence value: Python's list and tuple, the dict views, range objects and the generators
// that filters such as map/select return (iterable once, never printable).
enum class JSeq : uint8_t { list, tuple, dict_items, dict_keys, dict_values, range, generator };

struct JList {
  std::vector<JValue> items;
  JSeq kind = JSeq::list;
  std::string tag;  // range: its repr, "range(0, 3)"
  // generator: produces the next item on demand (false on an error, `done` at the end), or, when
  // empty, hands out items[pos...]; either way each item is produced once (Python generators).
  std::function<bool(JValue& out, bool& done)> next;
  size_t pos = 0;
  // Levels of lists, dicts and generators inside (1: none). Bounded when a value is assigned, so
  // that comparing, printing, pulling and destroying a value never recurses without limit.
  uint32_t depth = 1;
};

struct JDict;
struct JValue;
inline uint32_t jv_items_depth(const std::vector<JValue>& items);

struct JValue {
  enum class T : uint8_t { undef, none, boolean, integer, real, string, list, dict, ns, func, loop };
  T t = T::undef;
  bool b = false;
  bool unsafe = false;  // undefined: from a sandbox-blocked attribute (calling it is a security error)
  union {
    int64_t i = 0;  // integer (and the state counter of cyclers / joiners)
    double d;       // real
  };
  std::shared_ptr<const PText> s;  // string; undefined: the error message for when it is used
  std::shared_ptr<JList> l;        // list / tuple / dict views
  std::shared_ptr<JDict> m;        // dict / namespace
  std::shared_ptr<JFunc> f;        // callable
  std::shared_ptr<JLoop> lp;       // loop object

  static JValue none() {
    JValue v;
    v.t = T::none;
    return v;
  }
  static JValue boolean(bool x) {
    JValue v;
    v.t = T::boolean;
    v.b = x;
    return v;
  }
  static JValue integer(int64_t x) {
    JValue v;
    v.t = T::integer;
    v.i = x;
    return v;
  }
  static JValue real(double x) {
    JValue v;
    v.t = T::real;
    v.d = x;
    return v;
  }
  static JValue str(PText x) {
    JValue v;
    v.t = T::string;
    v.s = std::make_shared<const PText>(std::move(x));
    return v;
  }
  static JValue str(std::string x, bool content = false) { return str(PText(std::move(x), content)); }
  static JValue undefined(std::string why) {
    JValue v;
    v.s = std::make_shared<const PText>(PText(std::move(why)));
    return v;
  }
  static JValue list(std::vector<JValue> items, JSeq kind = JSeq::list) {
    JValue v;
    v.t = T::list;
    v.l = std::make_shared<JList>();
    v.l->items = std::move(items);
    v.l->kind = kind;
    v.l->depth = jv_items_depth(v.l->items);
    return v;
  }
  bool is_undef() const { return t == T::undef; }
  bool is_none() const { return t == T::none; }
  bool is_str() const { return t == T::string; }
  bool is_list() const { return t == T::list; }
  bool is_dict() const { return t == T::dict; }
  bool is_num() const { return t == T::integer || t == T::real || t == T::boolean; }
  const std::string& text() const { return s->s; }  // string values only
};

// Dict and namespace storage: insertion-ordered, keys are values (usually strings).
struct JDict {
  std::vector<std::pair<JValue, JValue>> items;
  uint32_t depth = 1;  // as JList::depth (a namespace counts as 1: its items are cleared after a render)
  const JValue* find(std::string_view key) const {
    for (const auto& kv : items)
      if (kv.first.t == JValue::T::string && kv.first.s->s == key) return &kv.second;
    return nullptr;
  }
};

// Nesting of a value: lists, dicts and generators count, namespaces do not (JRender clears them).
inline uint32_t jv_depth(const JValue& v) {
  if (v.t == JValue::T::list) return v.l->depth;
  if (v.t == JValue::T::dict) return v.m->depth;
  return 0;
}
inline uint32_t jv_items_depth(const std::vector<JValue>& items) {
  uint32_t d = 0;
  for (const JValue& x : items) d = std::max(d, jv_depth(x));
  return d + 1;
}

// ---- syntax tree ----
enum class NK : uint8_t {
  // statements
  output,
  print,
  if_,
  for_,
  set,
  set_block,
  macro,
  call_block,
  filter_block,
  break_,
  continue_,
  scope,
  // expressions
  konst,
  name,
  list,
  tuple,
  dict,
  attr,
  item,
  slice,
  call,
  filter,
  test,
  not_,
  neg,
  pos,
  binop,
  compare,
  and_,
  or_,
  cond,
  concat,
  nsref
};
enum class BinOp : uint8_t { add, sub, mul, div, floordiv, mod, pow };
enum class CmpOp : uint8_t { eq, ne, lt, le, gt, ge, in, notin };

struct JNode {
  NK k = NK::konst;
  uint8_t op = 0;
  bool flag = false;                     // for: recursive; filter/test: the name is unknown (an error where it runs)
  bool constant = false;                 // an expression Jinja2's optimizer may compute when compiling (mark_constant)
  uint32_t pos = 0;                      // byte offset in the (newline-normalized) template
  std::string str;                       // name, attribute, filter/test name, output text
  JValue val;                            // constant
  JNode* a = nullptr;                    // subject / target / test / callee
  JNode* b = nullptr;                    // value / iterable / start
  JNode* c = nullptr;                    // loop filter / stop
  JNode* d = nullptr;                    // step
  JNode* dyn_args = nullptr;             // f(*x)
  JNode* dyn_kwargs = nullptr;           // f(**x)
  std::vector<JNode*> list;              // items, positional arguments, compare operands, defaults
  std::vector<std::string> names;        // keyword names, parameter names
  std::vector<std::string> undef_names;  // for/macro/call/block bodies: names bound to undefined at entry (scan_frame)
  std::vector<JNode*> kw;                // keyword values
  std::vector<uint8_t> ops;              // compare operators
  std::vector<JNode*> body, orelse;
};

struct JProgram {
  std::string source;  // newline-normalized, trailing newline dropped
  std::vector<std::unique_ptr<JNode>> nodes;
  std::vector<JNode*> root;
  std::vector<std::string> root_undef;  // the template's own frame (see JParser::scan_frame)
  bool uses_strftime = false;

  // "line L, column C" of a byte offset.
  std::string where(uint32_t pos) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < pos && k < source.size(); k++) {
      if (source[k] == '\n') {
        line++;
        col = 1;
      } else if ((static_cast<unsigned char>(source[k]) & 0xC0) != 0x80) {
        col++;
      }
    }
    return strf("%zu:%zu", line, col);
  }
};

// ---- lexer ----
enum class TK : uint8_t { data, var_begin, var_end, block_begin, block_end, name, str, integer, real, op, eof };

struct JTok {
  TK k = TK::eof;
  std::string text;  // data, name, operator, decoded string literal
  int64_t i = 0;
  double d = 0;
  uint32_t pos = 0;
};

class JLexer {
 public:
  explicit JLexer(std::string_view src) : s_(src) {}

  // Fills `out`; false with `error` (and `error_pos`) set on a lexical error.
  bool run(std::vector<JTok>& out) {
    bool line_starting = true;
    while (pos_ < s_.size()) {
      // earliest tag opener: "{{", "{%", "{#"
      size_t p = pos_;
      char kind = 0;
      for (;;) {
        p = s_.find('{', p);
        if (p == std::string_view::npos || p + 1 >= s_.size()) {
          p = std::string_view::npos;
          break;
        }
        char n = s_[p + 1];
        if (n == '{' || n == '%' || n == '#') {
          kind = n;
          break;
        }
        p++;
      }
      if (p == std::string_view::npos) {
        push_data(out, s_.substr(pos_), static_cast<uint32_t>(pos_));
        pos_ = s_.size();
        break;
      }
      std::string_view text = s_.substr(pos_, p - pos_);
      size_t after = p + 2;
      char sign = (after < s_.size() && (s_[after] == '-' || s_[after] == '+')) ? s_[after] : 0;
      // {% raw %} is matched before the other openers
      size_t raw_end = 0;
      bool raw = kind == '%' && match_raw_begin(p, raw_end, sign);
      text = strip_before(text, sign, kind != '{', line_starting);
      push_data(out, text, static_cast<uint32_t>(pos_));
      if (raw) {
        if (!lex_raw(out, raw_end, line_starting)) return false;
        continue;
      }
      size_t tag_start = after + (sign ? 1 : 0);
      if (kind == '#') {
        if (!lex_comment(tag_start, line_starting)) {
          return fail(p, "missing end of comment tag");
        }
        continue;
      }
      JTok t;
      t.k = kind == '{' ? TK::var_begin : TK::block_begin;
      t.pos = static_cast<uint32_t>(p);
      out.push_back(std::move(t));
      pos_ = tag_start;
      if (!lex_tag(out, kind == '{', line_starting)) return false;
    }
    JTok e;
    e.k = TK::eof;
    e.pos = static_cast<uint32_t>(s_.size());
    out.push_back(std::move(e));
    return true;
  }

  std::string error;
  size_t error_pos = 0;

 private:
  bool fail(size_t at, std::string why) {
    error = std::move(why);
    error_pos = at;
    return false;
  }
  void push_data(std::vector<JTok>& out, std::string_view text, uint32_t at) {
    if (text.empty()) return;
    if (!out.empty() && out.back().k == TK::data) {
      out.back().text.append(text.data(), text.size());
      return;
    }
    JTok t;
    t.k = TK::data;
    t.text = std::string(text);
    t.pos = at;
    out.push_back(std::move(t));
  }
  // Python's str.rstrip() on a UTF-8 view.
  static std::string_view rstrip_space(std::string_view t) {
    size_t i = 0, keep = 0;
    while (i < t.size())
      if (!jis_space(jcp_next(t, i))) keep = i;
    return t.substr(0, keep);
  }
  static bool all_space(std::string_view t) {
    size_t i = 0;
    while (i < t.size())
      if (!jis_space(jcp_next(t, i))) return false;
    return true;
  }
  // Whitespace control before a tag: "{%-" strips all whitespace; lstrip_blocks removes the
  // spaces between the line start and a block/comment tag.
  std::string_view strip_before(std::string_view text, char sign, bool block_like, bool line_starting) {
    if (sign == '-') return rstrip_space(text);
    if (sign != '+' && block_like) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        std::string_view tail = text.substr(l_pos);
        if (!tail.empty() && all_space(tail)) return text.substr(0, l_pos);
      }
    }
    return text;
  }
  size_t skip_space(size_t p) const {
    while (p < s_.size()) {
      size_t q = p;
      if (!jis_space(jcp_next(s_, q))) break;
      p = q;
    }
    return p;
  }
  bool word_at(size_t p, std::string_view w) const { return s_.substr(p, w.size()) == w; }
  // "{%[-+]?\s*raw\s*(-%}\s*|%})" at p; `end` is where the raw text begins.
  bool match_raw_begin(size_t p, size_t& end, char sign) const {
    size_t q = skip_space(p + 2 + (sign ? 1 : 0));
    if (!word_at(q, "raw")) return false;
    q = skip_space(q + 3);
    if (word_at(q, "-%}")) {
      end = skip_space(q + 3);
      return true;
    }
    if (word_at(q, "%}")) {
      end = q + 2;
      return true;
    }
    return false;
  }
  bool lex_raw(std::vector<JTok>& out, size_t start, bool& line_starting) {
    // earliest "{%[-+]?\s*endraw\s*(+%}|-%}\s*|%}\n?)"
    size_t p = start;
    for (;;) {
      p = s_.find("{%", p);
      if (p == std::string_view::npos) return fail(start, "missing end of raw directive");
      size_t q = p + 2;
      char sign = (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) ? s_[q] : 0;
      q = skip_space(q + (sign ? 1 : 0));
      if (!word_at(q, "endraw")) {
        p += 2;
        continue;
      }
      q = skip_space(q + 6);
      size_t end;
      if (word_at(q, "+%}")) {
        end = q + 3;
      } else if (word_at(q, "-%}")) {
        end = skip_space(q + 3);
      } else if (word_at(q, "%}")) {
        end = q + 2;
        if (end < s_.size() && s_[end] == '\n') end++;
      } else {
        p += 2;
        continue;
      }
      std::string_view text = strip_before(s_.substr(start, p - start), sign, true, line_starting);
      push_data(out, text, static_cast<uint32_t>(start));
      line_starting = end > 0 && s_[end - 1] == '\n';
      pos_ = end;
      return true;
    }
  }
  bool lex_comment(size_t start, bool& line_starting) {
    size_t p = start;
    for (;;) {
      p = s_.find("#}", p);
      if (p == std::string_view::npos) return false;
      size_t end;
      if (p > start && s_[p - 1] == '-') {
        end = skip_space(p + 2);
      } else if (p > start && s_[p - 1] == '+') {
        end = p + 2;
      } else {
        end = p + 2;
        if (end < s_.size() && s_[end] == '\n') end++;  // trim_blocks
      }
      line_starting = s_[end - 1] == '\n';
      pos_ = end;
      return true;
    }
  }
  static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  bool lex_tag(std::vector<JTok>& out, bool variable, bool& line_starting) {
    std::vector<char> balance;
    size_t tag_begin = pos_;
    for (;;) {
      if (pos_ >= s_.size()) return fail(tag_begin, "unexpected end of template (a tag is not closed)");
      if (balance.empty()) {
        size_t end = 0;
        bool closed = false;
        if (variable) {
          if (word_at(pos_, "-}}")) {
            end = skip_space(pos_ + 3);
            closed = true;
          } else if (word_at(pos_, "}}")) {
            end = pos_ + 2;
            closed = true;
          }
        } else {
          if (word_at(pos_, "+%}")) {
            end = pos_ + 3;
            closed = true;
          } else if (word_at(pos_, "-%}")) {
            end = skip_space(pos_ + 3);
            closed = true;
          } else if (word_at(pos_, "%}")) {
            end = pos_ + 2;
            if (end < s_.size() && s_[end] == '\n') end++;  // trim_blocks
            closed = true;
          }
        }
        if (closed) {
          JTok t;
          t.k = variable ? TK::var_end : TK::block_end;
          t.pos = static_cast<uint32_t>(pos_);
          out.push_back(std::move(t));
          line_starting = s_[end - 1] == '\n';
          pos_ = end;
          return true;
        }
      }
      size_t q = pos_;
      uint32_t c0 = jcp_next(s_, q);
      if (jis_space(c0)) {
        pos_ = skip_space(pos_);
        continue;
      }
      char c = s_[pos_];
      JTok t;
      t.pos = static_cast<uint32_t>(pos_);
      if (is_digit(c)) {
        if (!lex_number(t)) return false;
      } else if (is_name_start(c)) {
        size_t e = pos_;
        while (e < s_.size() && (is_name_start(s_[e]) || is_digit(s_[e]))) e++;
        t.k = TK::name;
        t.text = std::string(s_.substr(pos_, e - pos_));
        pos_ = e;
      } else if (c == '\'' || c == '"') {
        if (!lex_string(t)) return false;
      } else {
        static const char* const ops2[] = {"//", "**", "==", "!=", ">=", "<="};
        t.k = TK::op;
        for (const char* o : ops2)
          if (word_at(pos_, o)) t.text = o;
        if (t.text.empty()) {
          if (!std::strchr("+-/*%~[](){}=.:|,;<>", c) || c == 0)
            return fail(pos_, strf("unexpected character '%s'", printable(s_.substr(pos_, q - pos_)).c_str()));
          t.text = std::string(1, c);
          if (c == '(' || c == '[' || c == '{') {
            if (balance.size() >= LLMINFER_JINJA_MAX_DEPTH) return fail(pos_, "brackets nested too deeply");
            balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
          } else if (c == ')' || c == ']' || c == '}') {
            if (balance.empty()) return fail(pos_, strf("unexpected '%c'", c));
            if (balance.back() != c) return fail(pos_, strf("unexpected '%c', expected '%c'", c, balance.back()));
            balance.pop_back();
          }
        }
        pos_ += t.text.size();
      }
      out.push_back(std::move(t));
    }
  }
  // Integers (decimal, 0b, 0o, 0x, with '_' separators) and floats (with '.' or an exponent).
  bool lex_number(JTok& t) {
    size_t start = pos_;
    auto digits = [&](size_t p, auto ok) {
      // (_?d)* after a first digit already consumed by the caller
      while (p < s_.size()) {
        if (ok(s_[p])) {
          p++;
        } else if (s_[p] == '_' && p + 1 < s_.size() && ok(s_[p + 1])) {
          p += 2;
        } else {
          break;
        }
      }
      return p;
    };
    auto dec = [](char c) { return c >= '0' && c <= '9'; };
    // float: (\d+_)*\d+ ( (\.(\d+_)*\d+)? e[+-]?(\d+_)*\d+ | \.(\d+_)*\d+ ), not after a '.'
    bool after_dot = start > 0 && s_[start - 1] == '.';
    if (!after_dot) {
      size_t p = digits(start + 1, dec);
      size_t q = p;
      bool frac = false, expo = false;
      if (q + 1 < s_.size() && s_[q] == '.' && dec(s_[q + 1])) {
        q = digits(q + 2, dec);
        frac = true;
      }
      if (q < s_.size() && (s_[q] == 'e' || s_[q] == 'E')) {
        size_t r = q + 1;
        if (r < s_.size() && (s_[r] == '+' || s_[r] == '-')) r++;
        if (r < s_.size() && dec(s_[r])) {
          q = digits(r + 1, dec);
          expo = true;
        }
      }
      if (expo || frac) {
        std::string lit;
        for (size_t k = start; k < q; k++)
          if (s_[k] != '_') lit += s_[k];
        double v = 0;
        auto r = std::from_chars(lit.data(), lit.data() + lit.size(), v);
        if (r.ec == std::errc::result_out_of_range) {
          v = (lit.find("e-") != std::string::npos || lit.find("E-") != std::string::npos) ? 0.0 : HUGE_VAL;
        } else if (r.ec != std::errc()) {
          return fail(start, "invalid number");
        }
        t.k = TK::real;
        t.d = v;
        pos_ = q;
        return true;
      }
    }
    int base = 10;
    size_t p = start, q;
    char x = start + 1 < s_.size() ? static_cast<char>(s_[start + 1] | 0x20) : 0;
    if (s_[start] == '0' && (x == 'b' || x == 'o' || x == 'x')) {
      base = x == 'b' ? 2 : x == 'o' ? 8 : 16;
      auto ok = [base](char c) {
        if (base == 2) return c == '0' || c == '1';
        if (base == 8) return c >= '0' && c <= '7';
        return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
      };
      p = start + 2;
      if (p < s_.size() && s_[p] == '_') p++;
      if (p >= s_.size() || !ok(s_[p])) {
        q = start + 1;  // just "0"
        base = 10;
      } else {
        q = digits(p + 1, ok);
      }
    } else if (s_[start] == '0') {
      q = digits(start + 1, [](char c) { return c == '0'; });
    } else {
      q = digits(start + 1, dec);
    }
    std::string lit;
    for (size_t k = (base == 10 ? start : p); k < q; k++)
      if (s_[k] != '_') lit += s_[k];
    uint64_t v = 0;
    auto r = std::from_chars(lit.data(), lit.data() + lit.size(), v, base);
    if (r.ec != std::errc() || v > static_cast<uint64_t>(INT64_MAX))
      return fail(start, "integer literal too large (integers are limited to 64 bits)");
    t.k = TK::integer;
    t.i = static_cast<int64_t>(v);
    pos_ = q;
    return true;
  }
  static int hexval(char h) {
    if (h >= '0' && h <= '9') return h - '0';
    h = static_cast<char>(h | 0x20);
    if (h >= 'a' && h <= 'f') return h - 'a' + 10;
    return -1;
  }
  // A quoted string; escapes decoded as Python's "unicode-escape" codec does.
  bool lex_string(JTok& t) {
    char q = s_[pos_];
    size_t p = pos_ + 1;
    std::string v;
    while (p < s_.size() && s_[p] != q) {
      if (s_[p] != '\\') {
        v += s_[p++];
        continue;
      }
      if (p + 1 >= s_.size()) break;
      char e = s_[p + 1];
      p += 2;
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': v += '\\'; break;
        case '\'': v += '\''; break;
        case '"': v += '"'; break;
        case 'a': v += '\a'; break;
        case 'b': v += '\b'; break;
        case 'f': v += '\f'; break;
        case 'n': v += '\n'; break;
        case 'r': v += '\r'; break;
        case 't': v += '\t'; break;
        case 'v': v += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t c = 0;
          for (int k = 0; k < n; k++) {
            int h = p + static_cast<size_t>(k) < s_.size() ? hexval(s_[p + static_cast<size_t>(k)]) : -1;
            if (h < 0) return fail(p - 2, strf("truncated \\%c escape in a string literal", e));
            c = c * 16 + static_cast<uint32_t>(h);
          }
          p += static_cast<size_t>(n);
          if (c > 0x10FFFF) return fail(p, "escape outside the Unicode range in a string literal");
          if (c >= 0xD800 && c < 0xE000) return fail(p, "surrogate escape in a string literal");
          utf8_append(v, c);
          break;
        }
        case 'N': return fail(p - 2, "unsupported construct: \\N{...} escape in a string literal");
        default:
          if (e >= '0' && e <= '7') {
            uint32_t c = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && p < s_.size() && s_[p] >= '0' && s_[p] <= '7'; k++)
              c = c * 8 + static_cast<uint32_t>(s_[p++] - '0');
            utf8_append(v, c);
          } else {
            v += '\\';  // unknown escapes stay as written
            p -= 1;
          }
      }
    }
    if (p >= s_.size()) return fail(pos_, "unterminated string literal");
    t.k = TK::str;
    t.text = std::move(v);
    pos_ = p + 1;
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// Jinja2's filters and tests by name (an unknown name is a template error; see the parser).
inline bool jinja_known_filter(std::string_view n) {
  static const char* const names[] = {"abs",    "attr",       "batch",       "capitalize", "center",   "count",
                                      "d",      "default",    "dictsort",    "e",          "escape",   "filesizeformat",
                                      "first",  "float",      "forceescape", "format",     "groupby",  "indent",
                                      "int",    "items",      "join",        "last",       "length",   "list",
                                      "lower",  "map",        "max",         "min",        "pprint",   "random",
                                      "reject", "rejectattr", "replace",     "reverse",    "round",    "safe",
                                      "select", "selectattr", "slice",       "sort",       "string",   "striptags",
                                      "sum",    "title",      "tojson",      "trim",       "truncate", "unique",
                                      "upper",  "urlencode",  "urlize",      "wordcount",  "wordwrap", "xmlattr"};
  for (const char* x : names)
    if (n == x) return true;
  return false;
}
inline bool jinja_known_test(std::string_view n) {
  static const char* const names[] = {
      "!=",       "<",           "<=",          "==",      ">",       ">=",        "boolean",  "callable",
      "defined",  "divisibleby", "eq",          "equalto", "escaped", "even",      "false",    "filter",
      "float",    "ge",          "greaterthan", "gt",      "in",      "integer",   "iterable", "le",
      "lessthan", "lower",       "lt",          "mapping", "ne",      "none",      "number",   "odd",
      "sameas",   "sequence",    "string",      "test",    "true",    "undefined", "upper"};
  for (const char* x : names)
    if (n == x) return true;
  return false;
}

// ---- parser ----
// Recursive descent with Jinja2's grammar and precedence:
//   condexpr: or ('if' or ('else' condexpr)?)*      or: and ('or' and)*      and: not ('and' not)*
//   not: 'not' not | compare                         compare: math1 (cmpop math1)*
//   math1: concat (('+'|'-') concat)*                concat: math2 ('~' math2)*
//   math2: pow (('*'|'/'|'//'|'%') pow)*             pow: unary ('**' unary)*
//   unary: ('-'|'+') unary-without-filters | primary postfix, then filters / tests / calls
class JParser {
 public:
  JParser(JProgram& prog, std::vector<JTok> toks) : p_(prog), t_(std::move(toks)) {}

  bool run() {
    stack_base_ = jstack_here();
    std::vector<JNode*> body;
    if (!subparse(body, {})) return false;
    if (cur().k != TK::eof) {
      return fail(cur().pos, strf("unexpected '%s'", cur().text.c_str()));
    }
    p_.root = std::move(body);
    for (const JNode* n : p_.root)
      if (!check_unknown(n, false)) return false;
    for (JNode* n : p_.root) mark_constant(n);
    std::set<std::string> outer;
    scan_frame(p_.root, outer, {}, p_.root_undef);
    return true;
  }

  // ---- Jinja2's frame analysis (its idtracking), for one rule our dynamic scopes lack ----
  // A name that a frame (the template, a loop body, a macro, a block) assigns before it reads it
  // is bound to undefined from the frame's start, so a loop or macro body that runs before the
  // assignment sees undefined, not the context's variable. Names the frame reads first, assigns
  // in only some branches of an if, or that an enclosing frame knows, resolve as usual.
  // Linear in the template: the names the enclosing frames know are one set, extended while a
  // nested frame is scanned and restored after it (not copied per frame), and the branches of an
  // if are scanned in place (a name they assign first is looked up, so only their reads and
  // stores matter to the frame).
  struct FrameScan {
    std::set<std::string> refs, stored, undef;
    int branch = 0;  // inside an if's branches: nothing becomes undefined from the frame's start
  };
  static void scan_load(const std::string& name, FrameScan& f, const std::set<std::string>& outer) {
    if (!outer.count(name)) f.refs.insert(name);
  }
  static void scan_loads(const JNode* e, FrameScan& f, const std::set<std::string>& outer) {
    if (!e) return;
    if (e->k == NK::name || e->k == NK::nsref) scan_load(e->str, f, outer);
    for (const JNode* c : {e->a, e->b, e->c, e->d, e->dyn_args, e->dyn_kwargs}) scan_loads(c, f, outer);
    for (const auto* v : {&e->list, &e->kw})
      for (const JNode* c : *v) scan_loads(c, f, outer);
  }
  static void scan_store(const JNode* t, FrameScan& f, const std::set<std::string>& outer) {
    if (!t) return;
    if (t->k == NK::nsref) return scan_load(t->str, f, outer);
    if (t->k == NK::tuple) {
      for (const JNode* c : t->list) scan_store(c, f, outer);
      return;
    }
    if (t->k != NK::name) return;
    f.stored.insert(t->str);
    if (f.refs.count(t->str) || outer.count(t->str)) return;
    f.refs.insert(t->str);
    if (!f.branch) f.undef.insert(t->str);
  }
  static void scan_stmts(const std::vector<JNode*>& body, FrameScan& f, const std::set<std::string>& outer,
                         std::vector<JNode*>& children) {
    for (JNode* n : body) {
      switch (n->k) {
        case NK::print: scan_loads(n->a, f, outer); break;
        case NK::if_:
          // Jinja2 merges three branches (if, all the elifs together, else) and binds a name to
          // undefined only when all three assign it first; an "if / else" never does (its elif
          // branch is empty): names first seen in a branch are looked up. Both branches add
          // their reads and stores to the frame.
          scan_loads(n->a, f, outer);
          f.branch++;
          scan_stmts(n->body, f, outer, children);
          scan_stmts(n->orelse, f, outer, children);
          f.branch--;
          break;
        case NK::for_:
          scan_loads(n->b, f, outer);
          children.push_back(n);
          break;
        case NK::set:
          scan_loads(n->b, f, outer);
          scan_store(n->a, f, outer);
          break;
        case NK::set_block:
          scan_store(n->a, f, outer);
          children.push_back(n);
          break;
        case NK::macro: {
          JNode name;
          name.k = NK::name;
          name.str = n->str;
          scan_store(&name, f, outer);
          children.push_back(n);
          break;
        }
        case NK::call_block:
        case NK::filter_block:
          scan_loads(n->a, f, outer);
          children.push_back(n);
          break;
        case NK::scope:
          for (const JNode* v : n->list) scan_loads(v, f, outer);
          children.push_back(n);
          break;
        default: break;
      }
    }
  }
  // Scans one frame, then (with everything it knows) the frames nested in it. `outer`, the names
  // the enclosing frames know, is extended for the nested frames and restored before returning.
  static void scan_frame(const std::vector<JNode*>& body, std::set<std::string>& outer,
                         const std::set<std::string>& params, std::vector<std::string>& undef) {
    FrameScan f;
    f.refs = params;
    std::vector<JNode*> children;
    scan_stmts(body, f, outer, children);
    undef.assign(f.undef.begin(), f.undef.end());
    if (children.empty()) return;
    std::vector<std::set<std::string>::iterator> added;
    for (const std::string& r : f.refs) {
      auto ins = outer.insert(r);
      if (ins.second) added.push_back(ins.first);
    }
    for (JNode* c : children) {
      std::set<std::string> ps;
      FrameScan targets;
      switch (c->k) {
        case NK::for_:
          scan_store(c->a, targets, {});
          ps = targets.stored;
          ps.insert("loop");
          break;
        case NK::macro:
        case NK::call_block:
          ps.insert(c->names.begin(), c->names.end());
          for (const char* s : {"varargs", "kwargs", "caller"}) ps.insert(s);
          break;
        case NK::scope:
          for (const JNode* t : c->kw) scan_store(t, targets, {});
          ps = targets.stored;
          break;
        default: break;
      }
      scan_frame(c->body, outer, ps, c->undef_names);
    }
    for (auto it : added) outer.erase(it);
  }

  std::string error;
  size_t error_pos = 0;

 private:
  const JTok& cur() const { return t_[i_]; }
  const JTok& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() {
    if (i_ + 1 < t_.size()) i_++;
  }
  bool fail(size_t at, std::string why) {
    if (error.empty()) {
      error = std::move(why);
      error_pos = at;
    }
    return false;
  }
  bool is_op(const char* o) const { return cur().k == TK::op && cur().text == o; }
  bool is_name(const char* n) const { return cur().k == TK::name && cur().text == n; }
  static const char* describe(const JTok& t) {
    switch (t.k) {
      case TK::data: return "template data";
      case TK::var_begin: return "'{{'";
      case TK::var_end: return "'}}'";
      case TK::block_begin: return "'{%'";
      case TK::block_end: return "end of statement block";
      case TK::name: return "name";
      case TK::str: return "string";
      case TK::integer: return "integer";
      case TK::real: return "float";
      case TK::op: return "operator";
      case TK::eof: return "end of template";
    }
    return "token";
  }
  bool expect_op(const char* o) {
    if (!is_op(o)) {
      std::string got = cur().k == TK::op || cur().k == TK::name ? "'" + cur().text + "'" : describe(cur());
      return fail(cur().pos, strf("expected '%s', got %s", o, got.c_str()));
    }
    next();
    return true;
  }
  bool expect(TK k, const char* what) {
    if (cur().k != k) {
      std::string got = cur().k == TK::op || cur().k == TK::name ? "'" + cur().text + "'" : describe(cur());
      return fail(cur().pos, strf("expected %s, got %s", what, got.c_str()));
    }
    next();
    return true;
  }
  JNode* make(NK k, uint32_t pos) {
    p_.nodes.push_back(std::make_unique<JNode>());
    JNode* n = p_.nodes.back().get();
    n->k = k;
    n->pos = pos;
    return n;
  }
  // Operator chains (a + b + c ...) nest the tree without recursing here: count them as depth.
  struct ChainGuard {
    JParser& p;
    int n = 0;
    const char* what;
    explicit ChainGuard(JParser& parser, const char* w = "expression") : p(parser), what(w) {}
    bool step() {
      ++n;
      if (++p.depth_ <= LLMINFER_JINJA_MAX_DEPTH) return true;
      return p.fail(p.cur().pos, strf("%s nested too deeply (more than %d levels of blocks, elifs and expressions)",
                                      what, LLMINFER_JINJA_MAX_DEPTH));
    }
    ~ChainGuard() { p.depth_ -= n; }
  };
  struct DepthGuard {
    JParser& p;
    bool ok;
    explicit DepthGuard(JParser& parser) : p(parser), ok(++parser.depth_ <= LLMINFER_JINJA_MAX_DEPTH) {
      if (!ok) {
        p.fail(p.cur().pos, strf("template nested too deeply (more than %d levels of blocks, elifs and expressions)",
                                 LLMINFER_JINJA_MAX_DEPTH));
      } else if (jstack_used(p.stack_base_) > LLMINFER_JINJA_MAX_STACK) {
        ok = false;
        p.fail(p.cur().pos, strf("template nested too deeply (more than %u KB of stack)",
                                 static_cast<unsigned>(LLMINFER_JINJA_MAX_STACK >> 10)));
      }
    }
    ~DepthGuard() { --p.depth_; }
  };

  // Statements until one of `ends` (a block tag name) is the current tag; leaves the parser on
  // that name (after "{%").
  bool subparse(std::vector<JNode*>& body, std::initializer_list<const char*> ends) {
    DepthGuard g(*this);
    if (!g.ok) return false;
    for (;;) {
      const JTok& t = cur();
      if (t.k == TK::eof) {
        if (ends.size() == 0) return true;
        std::string want;
        for (const char* e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
        return fail(t.pos, "unexpected end of template: expected " + want);
      }
      if (t.k == TK::data) {
        JNode* n = make(NK::output, t.pos);
        n->str = t.text;
        body.push_back(n);
        next();
        continue;
      }
      if (t.k == TK::var_begin) {
        next();
        JNode* n = make(NK::print, t.pos);
        n->a = parse_tuple(true, false, {});
        if (!n->a) return false;
        if (!expect(TK::var_end, "'}}'")) return false;
        body.push_back(n);
        continue;
      }
      if (t.k == TK::block_begin) {
        next();
        if (cur().k == TK::name)
          for (const char* e : ends)
            if (cur().text == e) return true;
        if (!parse_statement(body)) return false;
        continue;
      }
      return fail(t.pos, strf("unexpected %s", describe(t)));
    }
  }
  // Body of a block statement: "%}" body "{% end..." ; leaves the parser on the end name.
  bool parse_body(std::vector<JNode*>& body, std::initializer_list<const char*> ends) {
    if (is_op(":")) next();
    if (!expect(TK::block_end, "end of statement block ('%}')")) return false;
    return subparse(body, ends);
  }
  // After the end tag name: expects "%}".
  bool finish_end_tag() {
    next();  // the end name
    return expect(TK::block_end, "end of statement block ('%}')");
  }

  bool parse_statement(std::vector<JNode*>& body) {
    const JTok& t = cur();
    if (t.k != TK::name) return fail(t.pos, "tag name expected");
    std::string tag = t.text;
    uint32_t pos = t.pos;
    if (tag == "if") return parse_if(body);
    if (tag == "for") return parse_for(body);
    if (tag == "set") return parse_set(body);
    if (tag == "macro") return parse_macro(body);
    if (tag == "call") return parse_call_block(body);
    if (tag == "filter") return parse_filter_block(body);
    if (tag == "with") return parse_with(body);
    if (tag == "generation") {
      // transformers' {% generation %} marks assistant text for masks; it renders its body
      next();
      JNode* n = make(NK::scope, pos);
      if (!parse_body(n->body, {"endgeneration"}) || !finish_end_tag()) return false;
      body.push_back(n);
      return true;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return fail(pos, strf("'%s' outside of a for loop", tag.c_str()));
      next();
      body.push_back(make(tag == "break" ? NK::break_ : NK::continue_, pos));
      return expect(TK::block_end, "end of statement block ('%}')");
    }
    if (tag == "print") {
      next();
      while (cur().k != TK::block_end) {
        JNode* n = make(NK::print, cur().pos);
        n->a = parse_expression(true);
        if (!n->a) return false;
        body.push_back(n);
        if (cur().k == TK::block_end) break;
        if (!expect_op(",")) return false;
      }
      next();
      return true;
    }
    if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" || tag == "from" ||
        tag == "autoescape" || tag == "do")
      return fail(pos, strf("unsupported construct: the '%s' tag", tag.c_str()));
    return fail(pos, strf("unknown tag '%s'", tag.c_str()));
  }

  bool parse_if(std::vector<JNode*>& body) {
    JNode* n = make(NK::if_, cur().pos);
    next();
    JNode* node = n;
    // each elif nests an if node in the previous one's else branch: it counts as a level (the
    // passes over the tree and the renderer recurse once per level)
    ChainGuard cg(*this, "template");
    for (;;) {
      node->a = parse_tuple(false, false, {});
      if (!node->a) return false;
      if (!parse_body(node->body, {"elif", "else", "endif"})) return false;
      if (cur().text == "elif") {
        if (!cg.step()) return false;
        JNode* e = make(NK::if_, cur().pos);
        node->orelse.push_back(e);
        node = e;
        next();
        continue;
      }
      if (cur().text == "else") {
        next();
        if (!parse_body(node->orelse, {"endif"})) return false;
      }
      break;
    }
    if (!finish_end_tag()) return false;
    body.push_back(n);
    return true;
  }

  bool parse_for(std::vector<JNode*>& body) {
    JNode* n = make(NK::for_, cur().pos);
    next();
    n->a = parse_assign_target(false, {"in"});
    if (!n->a) return false;
    if (!is_name("in")) return fail(cur().pos, "expected 'in' in a for loop");
    next();
    n->b = parse_tuple(false, false, {"recursive"});
    if (!n->b) return false;
    if (is_name("if")) {
      next();
      n->c = parse_expression(true);
      if (!n->c) return false;
    }
    if (is_name("recursive")) {
      next();
      n->flag = true;
    }
    loop_depth_++;
    if (!parse_body(n->body, {"endfor", "else"})) return false;
    loop_depth_--;
    if (cur().text == "else") {
      int ld = loop_depth_;
      loop_depth_ = 0;  // break/continue in the else block are not inside the loop
      next();
      if (!parse_body(n->orelse, {"endfor"})) return false;
      loop_depth_ = ld;
    }
    if (!finish_end_tag()) return false;
    body.push_back(n);
    return true;
  }

  bool parse_set(std::vector<JNode*>& body) {
    uint32_t pos = cur().pos;
    next();
    JNode* target = parse_assign_target(true, {});
    if (!target) return false;
    if (is_op("=")) {
      next();
      JNode* n = make(NK::set, pos);
      n->a = target;
      n->b = parse_tuple(true, false, {});
      if (!n->b) return false;
      if (!expect(TK::block_end, "end of statement block ('%}')")) return false;
      body.push_back(n);
      return true;
    }
    if (target->k == NK::tuple) return fail(pos, "a block set assigns to a single name");
    JNode* n = make(NK::set_block, pos);
    n->a = target;
    if (is_op("|")) {
      n->b = parse_filter(nullptr, false);
      if (!n->b) return false;
    }
    if (!parse_body(n->body, {"endset"})) return false;
    if (!finish_end_tag()) return false;
    body.push_back(n);
    return true;
  }

  bool parse_signature(JNode* n) {
    if (!expect_op("(")) return false;
    while (!is_op(")")) {
      if (!n->names.empty() && !expect_op(",")) return false;
      if (cur().k != TK::name) return fail(cur().pos, "expected a parameter name");
      n->names.push_back(cur().text);
      next();
      if (is_op("=")) {
        next();
        JNode* d = parse_expression(true);
        if (!d) return false;
        n->list.push_back(d);
      } else if (!n->list.empty()) {
        return fail(cur().pos, "non-default argument follows default argument");
      }
    }
    next();
    return true;
  }

  bool parse_macro(std::vector<JNode*>& body) {
    JNode* n = make(NK::macro, cur().pos);
    next();
    if (cur().k != TK::name) return fail(cur().pos, "expected a macro name");
    n->str = cur().text;
    next();
    if (!parse_signature(n)) return false;
    int ld = loop_depth_;
    loop_depth_ = 0;
    if (!parse_body(n->body, {"endmacro"})) return false;
    loop_depth_ = ld;
    if (!finish_end_tag()) return false;
    for (const JNode* b : n->body) scan_special_names(b, n->op);
    body.push_back(n);
    return true;
  }
  // Jinja2 rejects an unknown filter or test when it compiles the template, except inside an if
  // statement or a conditional expression ("soft" frames), where it fails only when evaluated.
  // Loop, macro, call, filter and set-block bodies are new frames, not soft.
  bool check_unknown(const JNode* n, bool soft) {
    if (!n) return true;
    if ((n->k == NK::filter || n->k == NK::test) && n->flag && !soft)
      return fail(n->pos, strf("no %s named '%s'", n->k == NK::filter ? "filter" : "test", n->str.c_str()));
    bool inner_soft = soft;
    if (n->k == NK::if_ || n->k == NK::cond) inner_soft = true;
    bool body_soft = inner_soft;
    if (n->k == NK::for_ || n->k == NK::macro || n->k == NK::call_block || n->k == NK::filter_block ||
        n->k == NK::set_block || n->k == NK::scope)
      body_soft = false;
    if (n->k == NK::for_) {
      // the iterable belongs to the enclosing frame; target, filter and bodies to the loop's
      return check_unknown(n->b, soft) && check_unknown(n->c, false) && check_list(n->body, false) &&
             check_list(n->orelse, false);
    }
    for (const JNode* c : {n->a, n->b, n->c, n->d, n->dyn_args, n->dyn_kwargs})
      if (!check_unknown(c, inner_soft)) return false;
    return check_list(n->list, inner_soft) && check_list(n->kw, inner_soft) && check_list(n->body, body_soft) &&
           check_list(n->orelse, body_soft);
  }
  bool check_list(const std::vector<JNode*>& v, bool soft) {
    for (const JNode* c : v)
      if (!check_unknown(c, soft)) return false;
    return true;
  }
  // Marks the expressions Jinja2's optimizer can compute when it compiles (as_const): literals and
  // what is built from them with operators, subscripts, and filters and tests that need no context.
  static bool mark_constant(JNode* n) {
    if (!n) return true;
    bool all = true;
    for (JNode* c : {n->a, n->b, n->c, n->d, n->dyn_args, n->dyn_kwargs}) all = mark_constant(c) && all;
    for (auto* v : {&n->list, &n->kw, &n->body, &n->orelse})
      for (JNode* c : *v) all = mark_constant(c) && all;
    switch (n->k) {
      case NK::konst: n->constant = true; break;
      case NK::list:
      case NK::tuple:
      case NK::dict:
      case NK::compare:
      case NK::concat:
      case NK::slice:
      case NK::item:
      case NK::not_:
      case NK::neg:
      case NK::pos:
      case NK::binop: n->constant = all; break;
      // as_const() of these evaluates only the operands it needs: "c if t else d" with a constant
      // t and a constant chosen branch is constant, so is "a and x" when a is constant and false.
      // Here "constant" means "may be": the renderer finds out when it evaluates (see eval_folded).
      case NK::and_:
      case NK::or_: n->constant = n->a && n->a->constant; break;
      case NK::cond:
        n->constant = n->a && n->a->constant && ((n->b && n->b->constant) || (n->c && n->c->constant));
        break;
      case NK::filter:
      case NK::test:
        n->constant = all && n->a && !n->flag && !n->dyn_args && !n->dyn_kwargs &&
                      !(n->k == NK::filter && (n->str == "map" || n->str == "select" || n->str == "reject" ||
                                               n->str == "selectattr" || n->str == "rejectattr"));
        break;
      default: n->constant = false;
    }
    return n->constant;
  }
  // Which of varargs (1), kwargs (2), caller (4) a macro body refers to (Jinja2 binds them only then).
  static void scan_special_names(const JNode* n, uint8_t& flags) {
    if (!n) return;
    if (n->k == NK::name) {
      if (n->str == "varargs") flags |= 1;
      if (n->str == "kwargs") flags |= 2;
      if (n->str == "caller") flags |= 4;
    }
    for (const JNode* c : {n->a, n->b, n->c, n->d, n->dyn_args, n->dyn_kwargs}) scan_special_names(c, flags);
    for (const auto* v : {&n->list, &n->kw, &n->body, &n->orelse})
      for (const JNode* c : *v) scan_special_names(c, flags);
  }

  bool parse_call_block(std::vector<JNode*>& body) {
    JNode* n = make(NK::call_block, cur().pos);
    next();
    if (is_op("(") && !parse_signature(n)) return false;
    n->a = parse_expression(true);
    if (!n->a) return false;
    if (n->a->k != NK::call) return fail(n->pos, "expected a call after 'call'");
    int ld = loop_depth_;
    loop_depth_ = 0;
    if (!parse_body(n->body, {"endcall"})) return false;
    loop_depth_ = ld;
    if (!finish_end_tag()) return false;
    for (const JNode* b : n->body) scan_special_names(b, n->op);
    body.push_back(n);
    return true;
  }

  bool parse_filter_block(std::vector<JNode*>& body) {
    JNode* n = make(NK::filter_block, cur().pos);
    next();
    n->a = parse_filter(nullptr, true);
    if (!n->a) return false;
    if (!parse_body(n->body, {"endfilter"})) return false;
    if (!finish_end_tag()) return false;
    body.push_back(n);
    return true;
  }

  bool parse_with(std::vector<JNode*>& body) {
    JNode* n = make(NK::scope, cur().pos);
    next();
    while (cur().k != TK::block_end) {
      if (!n->list.empty() && !expect_op(",")) return false;
      JNode* target = parse_assign_target(true, {});
      if (!target) return false;
      if (!expect_op("=")) return false;
      JNode* v = parse_expression(true);
      if (!v) return false;
      n->kw.push_back(target);
      n->list.push_back(v);
    }
    if (!parse_body(n->body, {"endwith"})) return false;
    if (!finish_end_tag()) return false;
    body.push_back(n);
    return true;
  }

  // name | name.attr (set only) | tuple of names
  JNode* parse_assign_target(bool with_namespace, std::initializer_list<const char*> extra_end) {
    uint32_t pos = cur().pos;
    std::vector<JNode*> items;
    bool is_tuple = false;
    for (;;) {
      if (!items.empty()) {
        if (!expect_op(",")) return nullptr;
      }
      if (tuple_end(extra_end)) break;
      JNode* item = nullptr;
      if (cur().k == TK::name) {
        std::string nm = cur().text;
        uint32_t p = cur().pos;
        next();
        if (with_namespace && is_op(".") && peek().k == TK::name) {
          next();
          item = make(NK::nsref, p);
          item->str = nm;
          item->names.push_back(cur().text);
          next();
        } else {
          if (nm == "true" || nm == "false" || nm == "True" || nm == "False" || nm == "none" || nm == "None") {
            fail(p, strf("cannot assign to '%s'", nm.c_str()));
            return nullptr;
          }
          item = make(NK::name, p);
          item->str = nm;
        }
      } else if (is_op("(")) {
        next();
        item = parse_assign_target(false, {});
        if (!item || !expect_op(")")) return nullptr;
      } else {
        fail(cur().pos, "cannot assign to this expression");
        return nullptr;
      }
      items.push_back(item);
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (items.empty()) {
        fail(pos, "expected an assignment target");
        return nullptr;
      }
      return items[0];
    }
    for (JNode* it : items)
      if (it->k == NK::nsref) {
        fail(it->pos, "cannot assign to a namespace attribute inside a tuple");
        return nullptr;
      }
    JNode* t = make(NK::tuple, pos);
    t->list = std::move(items);
    return t;
  }

  bool tuple_end(std::initializer_list<const char*> extra) const {
    if (cur().k == TK::var_end || cur().k == TK::block_end || is_op(")")) return true;
    if (cur().k == TK::name)
      for (const char* e : extra)
        if (cur().text == e) return true;
    return false;
  }

  JNode* parse_tuple(bool with_condexpr, bool explicit_parens, std::initializer_list<const char*> extra_end) {
    uint32_t pos = cur().pos;
    std::vector<JNode*> args;
    bool is_tuple = false;
    for (;;) {
      if (!args.empty() && !expect_op(",")) return nullptr;
      if (tuple_end(extra_end)) break;
      JNode* e = parse_expression(with_condexpr);
      if (!e) return nullptr;
      args.push_back(e);
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return args[0];
      if (!explicit_parens) {
        fail(cur().pos, strf("expected an expression, got %s", describe(cur())));
        return nullptr;
      }
    }
    JNode* t = make(NK::tuple, pos);
    t->list = std::move(args);
    return t;
  }

  JNode* parse_expression(bool with_condexpr) {
    DepthGuard g(*this);
    if (!g.ok) return nullptr;
    if (!with_condexpr) return parse_or();
    uint32_t pos = cur().pos;
    JNode* e1 = parse_or();
    if (!e1) return nullptr;
    while (is_name("if")) {
      next();
      JNode* cond = parse_or();
      if (!cond) return nullptr;
      JNode* n = make(NK::cond, pos);
      n->a = cond;
      n->b = e1;
      if (is_name("else")) {
        next();
        n->c = parse_expression(true);
        if (!n->c) return nullptr;
      }
      e1 = n;
    }
    return e1;
  }
  JNode* parse_or() {
    ChainGuard cg(*this);
    JNode* l = parse_and();
    while (l && is_name("or")) {
      if (!cg.step()) return nullptr;
      JNode* n = make(NK::or_, cur().pos);
      next();
      n->a = l;
      n->b = parse_and();
      if (!n->b) return nullptr;
      l = n;
    }
    return l;
  }
  JNode* parse_and() {
    ChainGuard cg(*this);
    JNode* l = parse_not();
    while (l && is_name("and")) {
      if (!cg.step()) return nullptr;
      JNode* n = make(NK::and_, cur().pos);
      next();
      n->a = l;
      n->b = parse_not();
      if (!n->b) return nullptr;
      l = n;
    }
    return l;
  }
  JNode* parse_not() {
    DepthGuard g(*this);
    if (!g.ok) return nullptr;
    if (is_name("not")) {
      JNode* n = make(NK::not_, cur().pos);
      next();
      n->a = parse_not();
      return n->a ? n : nullptr;
    }
    return parse_compare();
  }
  JNode* parse_compare() {
    uint32_t pos = cur().pos;
    JNode* e = parse_math1();
    if (!e) return nullptr;
    JNode* n = nullptr;
    ChainGuard cg(*this);
    for (;;) {
      if (!cg.step()) return nullptr;
      CmpOp op;
      if (cur().k == TK::op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" ||
                                cur().text == ">" || cur().text == ">=")) {
        const std::string& o = cur().text;
        op = o == "=="   ? CmpOp::eq
             : o == "!=" ? CmpOp::ne
             : o == "<"  ? CmpOp::lt
             : o == "<=" ? CmpOp::le
             : o == ">"  ? CmpOp::gt
                         : CmpOp::ge;
        next();
      } else if (is_name("in")) {
        op = CmpOp::in;
        next();
      } else if (is_name("not") && peek().k == TK::name && peek().text == "in") {
        op = CmpOp::notin;
        next();
        next();
      } else {
        break;
      }
      if (!n) {
        n = make(NK::compare, pos);
        n->list.push_back(e);
      }
      JNode* r = parse_math1();
      if (!r) return nullptr;
      n->ops.push_back(static_cast<uint8_t>(op));
      n->list.push_back(r);
    }
    return n ? n : e;
  }
  JNode* binop(BinOp op, JNode* l, JNode* r, uint32_t pos) {
    JNode* n = make(NK::binop, pos);
    n->op = static_cast<uint8_t>(op);
    n->a = l;
    n->b = r;
    return n;
  }
  JNode* parse_math1() {
    ChainGuard cg(*this);
    JNode* l = parse_concat();
    while (l && cur().k == TK::op && (cur().text == "+" || cur().text == "-")) {
      if (!cg.step()) return nullptr;
      BinOp op = cur().text == "+" ? BinOp::add : BinOp::sub;
      uint32_t pos = cur().pos;
      next();
      JNode* r = parse_concat();
      if (!r) return nullptr;
      l = binop(op, l, r, pos);
    }
    return l;
  }
  JNode* parse_concat() {
    JNode* first = parse_math2();
    if (!first || !is_op("~")) return first;
    JNode* n = make(NK::concat, cur().pos);
    n->list.push_back(first);
    while (is_op("~")) {
      next();
      JNode* r = parse_math2();
      if (!r) return nullptr;
      n->list.push_back(r);
    }
    return n;
  }
  JNode* parse_math2() {
    ChainGuard cg(*this);
    JNode* l = parse_pow();
    while (l && cur().k == TK::op &&
           (cur().text == "*" || cur().text == "/" || cur().text == "//" || cur().text == "%")) {
      if (!cg.step()) return nullptr;
      const std::string& o = cur().text;
      BinOp op = o == "*" ? BinOp::mul : o == "/" ? BinOp::div : o == "//" ? BinOp::floordiv : BinOp::mod;
      uint32_t pos = cur().pos;
      next();
      JNode* r = parse_pow();
      if (!r) return nullptr;
      l = binop(op, l, r, pos);
    }
    return l;
  }
  JNode* parse_pow() {
    ChainGuard cg(*this);
    JNode* l = parse_unary(true);
    while (l && is_op("**")) {
      if (!cg.step()) return nullptr;
      uint32_t pos = cur().pos;
      next();
      JNode* r = parse_unary(true);
      if (!r) return nullptr;
      l = binop(BinOp::pow, l, r, pos);
    }
    return l;
  }
  JNode* parse_unary(bool with_filter) {
    DepthGuard g(*this);
    if (!g.ok) return nullptr;
    JNode* n;
    if (is_op("-") || is_op("+")) {
      n = make(is_op("-") ? NK::neg : NK::pos, cur().pos);
      next();
      n->a = parse_unary(false);
      if (!n->a) return nullptr;
    } else {
      n = parse_primary();
      if (!n) return nullptr;
    }
    n = parse_postfix(n);
    if (n && with_filter) n = parse_filter_expr(n);
    return n;
  }
  JNode* parse_primary() {
    const JTok& t = cur();
    JNode* n = nullptr;
    switch (t.k) {
      case TK::name:
        if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
          n = make(NK::konst, t.pos);
          n->val = JValue::boolean(t.text[0] == 't' || t.text[0] == 'T');
        } else if (t.text == "none" || t.text == "None") {
          n = make(NK::konst, t.pos);
          n->val = JValue::none();
        } else {
          n = make(NK::name, t.pos);
          n->str = t.text;
          if (t.text == "strftime_now") p_.uses_strftime = true;
        }
        next();
        return n;
      case TK::str: {
        n = make(NK::konst, t.pos);
        std::string v = t.text;
        next();
        while (cur().k == TK::str) {  // adjacent literals join
          v += cur().text;
          next();
        }
        n->val = JValue::str(std::move(v));
        return n;
      }
      case TK::integer:
        n = make(NK::konst, t.pos);
        n->val = JValue::integer(t.i);
        next();
        return n;
      case TK::real:
        n = make(NK::konst, t.pos);
        n->val = JValue::real(t.d);
        next();
        return n;
      case TK::op:
        if (t.text == "(") {
          next();
          n = parse_tuple(true, true, {});
          if (!n || !expect_op(")")) return nullptr;
          return n;
        }
        if (t.text == "[") {
          n = make(NK::list, t.pos);
          next();
          while (!is_op("]")) {
            if (!n->list.empty() && !expect_op(",")) return nullptr;
            if (is_op("]")) break;
            JNode* e = parse_expression(true);
            if (!e) return nullptr;
            n->list.push_back(e);
          }
          next();
          return n;
        }
        if (t.text == "{") {
          n = make(NK::dict, t.pos);
          next();
          while (!is_op("}")) {
            if (!n->list.empty() && !expect_op(",")) return nullptr;
            if (is_op("}")) break;
            JNode* k = parse_expression(true);
            if (!k || !expect_op(":")) return nullptr;
            JNode* v = parse_expression(true);
            if (!v) return nullptr;
            n->list.push_back(k);
            n->kw.push_back(v);
          }
          next();
          return n;
        }
        break;
      default: break;
    }
    std::string got = t.k == TK::op || t.k == TK::name ? "'" + t.text + "'" : describe(t);
    fail(t.pos, strf("unexpected %s", got.c_str()));
    return nullptr;
  }
  JNode* parse_postfix(JNode* n) {
    ChainGuard cg(*this);
    while (n) {
      if (!cg.step()) return nullptr;
      if (is_op(".") || is_op("[")) {
        n = parse_subscript(n);
      } else if (is_op("(")) {
        n = parse_call(n);
      } else {
        break;
      }
    }
    return n;
  }
  JNode* parse_filter_expr(JNode* n) {
    ChainGuard cg(*this);
    while (n) {
      if (!cg.step()) return nullptr;
      if (is_op("|")) {
        n = parse_filter(n, false);
      } else if (is_name("is")) {
        n = parse_test(n);
      } else if (is_op("(")) {
        n = parse_call(n);
      } else {
        break;
      }
    }
    return n;
  }
  JNode* parse_subscript(JNode* obj) {
    DepthGuard g(*this);
    if (!g.ok) return nullptr;
    uint32_t pos = cur().pos;
    if (is_op(".")) {
      next();
      if (cur().k == TK::name) {
        JNode* n = make(NK::attr, pos);
        n->a = obj;
        n->str = cur().text;
        next();
        return n;
      }
      if (cur().k == TK::integer) {
        JNode* n = make(NK::item, pos);
        n->a = obj;
        n->b = make(NK::konst, cur().pos);
        n->b->val = JValue::integer(cur().i);
        next();
        return n;
      }
      fail(cur().pos, "expected a name or a number after '.'");
      return nullptr;
    }
    next();  // '['
    std::vector<JNode*> args;
    while (!is_op("]")) {
      if (!args.empty() && !expect_op(",")) return nullptr;
      JNode* a = parse_subscribed();
      if (!a) return nullptr;
      args.push_back(a);
    }
    next();
    if (args.empty()) {
      fail(pos, "expected a subscript expression");
      return nullptr;
    }
    JNode* n = make(NK::item, pos);
    n->a = obj;
    if (args.size() == 1) {
      n->b = args[0];
    } else {
      n->b = make(NK::tuple, pos);
      n->b->list = std::move(args);
    }
    return n;
  }
  JNode* parse_subscribed() {
    uint32_t pos = cur().pos;
    JNode* start = nullptr;
    if (is_op(":")) {
      next();
    } else {
      start = parse_expression(true);
      if (!start) return nullptr;
      if (!is_op(":")) return start;
      next();
    }
    JNode* n = make(NK::slice, pos);
    n->b = start;
    if (!is_op(":") && !is_op("]") && !is_op(",")) {
      n->c = parse_expression(true);
      if (!n->c) return nullptr;
    }
    if (is_op(":")) {
      next();
      if (!is_op("]") && !is_op(",")) {
        n->d = parse_expression(true);
        if (!n->d) return nullptr;
      }
    }
    return n;
  }
  bool parse_call_args(JNode* n) {
    uint32_t pos = cur().pos;
    if (!expect_op("(")) return false;
    bool require_comma = false;
    while (!is_op(")")) {
      if (require_comma) {
        if (!expect_op(",")) return false;
        if (is_op(")")) break;
      }
      if (is_op("*")) {
        if (n->dyn_args || n->dyn_kwargs) return fail(pos, "invalid syntax for function call expression");
        next();
        n->dyn_args = parse_expression(true);
        if (!n->dyn_args) return false;
      } else if (is_op("**")) {
        if (n->dyn_kwargs) return fail(pos, "invalid syntax for function call expression");
        next();
        n->dyn_kwargs = parse_expression(true);
        if (!n->dyn_kwargs) return false;
      } else if (cur().k == TK::name && peek().k == TK::op && peek().text == "=") {
        if (n->dyn_kwargs) return fail(pos, "invalid syntax for function call expression");
        n->names.push_back(cur().text);
        next();
        next();
        JNode* v = parse_expression(true);
        if (!v) return false;
        n->kw.push_back(v);
      } else {
        if (n->dyn_args || n->dyn_kwargs || !n->kw.empty())
          return fail(pos, "invalid syntax for function call expression");
        JNode* v = parse_expression(true);
        if (!v) return false;
        n->list.push_back(v);
      }
      require_comma = true;
    }
    next();
    return true;
  }
  JNode* parse_call(JNode* callee) {
    DepthGuard g(*this);
    if (!g.ok) return nullptr;
    JNode* n = make(NK::call, callee->pos);  // errors point at what is called
    n->a = callee;
    return parse_call_args(n) ? n : nullptr;
  }
  // `| name(args)` chain; with start_inline the first name has no leading '|' (filter blocks).
  JNode* parse_filter(JNode* subject, bool start_inline) {
    DepthGuard g(*this);
    if (!g.ok) return nullptr;
    ChainGuard cg(*this);
    while (is_op("|") || start_inline) {
      if (!cg.step()) return nullptr;
      if (!start_inline) next();
      start_inline = false;
      if (cur().k != TK::name) {
        fail(cur().pos, "expected a filter name");
        return nullptr;
      }
      JNode* n = make(NK::filter, cur().pos);
      n->str = cur().text;
      next();
      while (is_op(".")) {
        next();
        if (cur().k != TK::name) {
          fail(cur().pos, "expected a name");
          return nullptr;
        }
        n->str += "." + cur().text;
        next();
      }
      if (!jinja_known_filter(n->str)) n->flag = true;  // an error unless in a "soft" frame (check_unknown)
      if (is_op("(") && !parse_call_args(n)) return nullptr;
      n->a = subject;
      subject = n;
    }
    return subject;
  }
  JNode* parse_test(JNode* subject) {
    JNode* n = make(NK::test, cur().pos);
    next();  // 'is'
    bool negated = false;
    if (is_name("not")) {
      negated = true;
      next();
    }
    if (cur().k != TK::name) {
      fail(cur().pos, "expected a test name after 'is'");
      return nullptr;
    }
    n->str = cur().text;
    next();
    while (is_op(".")) {
      next();
      if (cur().k != TK::name) {
        fail(cur().pos, "expected a name");
        return nullptr;
      }
      n->str += "." + cur().text;
      next();
    }
    if (!jinja_known_test(n->str)) n->flag = true;  // an error unless in a "soft" frame (check_unknown)
    n->a = subject;
    if (is_op("(")) {
      if (!parse_call_args(n)) return nullptr;
    } else if ((cur().k == TK::name || cur().k == TK::str || cur().k == TK::integer || cur().k == TK::real ||
                is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) {
        fail(cur().pos, "you cannot chain multiple tests with 'is'");
        return nullptr;
      }
      JNode* arg = parse_primary();
      if (!arg) return nullptr;
      arg = parse_postfix(arg);
      if (!arg) return nullptr;
      n->list.push_back(arg);
    }
    if (negated) {
      JNode* x = make(NK::not_, n->pos);
      x->a = n;
      return x;
    }
    return n;
  }

  JProgram& p_;
  std::vector<JTok> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  uintptr_t stack_base_ = 0;
};

// Newline normalization and the trailing-newline rule of Jinja2's lexer: "\r\n", "\r", "\n" all
// become "\n" and one final newline is dropped (keep_trailing_newline=False).
inline std::string jinja_normalize_source(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t k = 0; k < src.size(); k++) {
    char c = src[k];
    if (c == '\r') {
      if (k + 1 < src.size() && src[k + 1] == '\n') k++;
      c = '\n';
    }
    out += c;
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Parses a template; errors name the construct and the line:column.
inline Result<std::shared_ptr<const JProgram>> jinja_parse(std::string_view source) {
  if (source.size() > LLMINFER_JINJA_MAX_TEMPLATE)
    return make_error(Errc::template_error,
                      strf("chat template: %zu bytes is more than the limit of %llu", source.size(),
                           static_cast<unsigned long long>(LLMINFER_JINJA_MAX_TEMPLATE)));
  auto prog = std::make_shared<JProgram>();
  prog->source = jinja_normalize_source(source);
  std::vector<JTok> toks;
  JLexer lex(prog->source);
  if (!lex.run(toks))
    return make_error(
        Errc::template_error,
        strf("chat template %s: %s", prog->where(static_cast<uint32_t>(lex.error_pos)).c_str(), lex.error.c_str()));
  JParser parser(*prog, std::move(toks));
  if (!parser.run())
    return make_error(Errc::template_error,
                      strf("chat template %s: %s", prog->where(static_cast<uint32_t>(parser.error_pos)).c_str(),
                           parser.error.c_str()));
  return std::shared_ptr<const JProgram>(std::move(prog));
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
