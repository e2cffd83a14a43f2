// ==== Chat templates, part 2: Python value semantics (printing, repr, JSON, comparison) ====
namespace llminfer {
inline namespace v0_1 {
namespace detail {

struct JScope {
  std::shared_ptr<JScope> parent;
  std::vector<std::pair<std::string, JValue>> vars;
  // Past a few names, an index (a template defining 20,000 macros or variables in one scope
  // would otherwise take quadratic time, which the step budget does not see).
  std::map<std::string, size_t, std::less<>> index;

  JValue* find_local(std::string_view name) {
    if (!index.empty()) {
      auto it = index.find(name);
      return it == index.end() ? nullptr : &vars[it->second].second;
    }
    for (auto& kv : vars)
      if (kv.first == name) return &kv.second;
    return nullptr;
  }
  void set(std::string_view name, JValue v) {
    if (JValue* x = find_local(name)) {
      *x = std::move(v);
      return;
    }
    vars.emplace_back(std::string(name), std::move(v));
    if (vars.size() == 16 && index.empty()) {
      for (size_t k = 0; k < vars.size(); k++) index.emplace(vars[k].first, k);
    } else if (!index.empty()) {
      index.emplace(vars.back().first, vars.size() - 1);
    }
  }
};

enum class FnKind : uint8_t {
  global,
  method,
  macro,
  caller,
  cycler_next,
  cycler_reset,
  joiner,
  loop_cycle,
  loop_changed
};

struct JFunc {
  FnKind kind = FnKind::global;
  std::string name;               // global / method name
  JValue self;                    // bound receiver (methods), state (cycler, joiner, loop)
  const JNode* node = nullptr;    // macro / call block
  std::weak_ptr<JScope> closure;  // weak: a macro stored in its own scope must not keep it alive
};

struct JLoop {
  int64_t index0 = 0, length = 0;
  int depth0 = 0;
  std::shared_ptr<const JList> items;  // previtem / nextitem
  bool has_changed = false;
  JValue last_changed;
};

inline JValue jv_func(JFunc f) {
  JValue v;
  v.t = JValue::T::func;
  v.f = std::make_shared<JFunc>(std::move(f));
  return v;
}

inline bool jv_is_markup(const JValue& v) {
  return v.t == JValue::T::string && v.b;
}
inline JValue jv_markup(PText t) {
  JValue v = JValue::str(std::move(t));
  v.b = true;  // strings use `b` as the Markup flag (|safe, |escape)
  return v;
}
// A str result that stays Markup when its input was.
inline JValue jv_text(PText t, bool markup) {
  return markup ? jv_markup(std::move(t)) : JValue::str(std::move(t));
}

// Python's type name of a value (for messages such as "'int' object is not iterable").
inline const char* jv_type(const JValue& v) {
  switch (v.t) {
    case JValue::T::undef: return "Undefined";
    case JValue::T::none: return "NoneType";
    case JValue::T::boolean: return "bool";
    case JValue::T::integer: return "int";
    case JValue::T::real: return "float";
    case JValue::T::string: return v.b ? "Markup" : "str";
    case JValue::T::list:
      switch (v.l->kind) {
        case JSeq::list: return "list";
        case JSeq::tuple: return "tuple";
        case JSeq::dict_items: return "dict_items";
        case JSeq::dict_keys: return "dict_keys";
        case JSeq::dict_values: return "dict_values";
        case JSeq::range: return "range";
        case JSeq::generator: return "generator";
      }
      return "list";
    case JValue::T::dict: return "dict";
    case JValue::T::ns: return "Namespace";
    case JValue::T::func: return v.f->kind == FnKind::macro ? "Macro" : "function";
    case JValue::T::loop: return "LoopContext";
  }
  return "object";
}

inline bool jv_truthy(const JValue& v) {
  switch (v.t) {
    case JValue::T::undef:
    case JValue::T::none: return false;
    case JValue::T::boolean: return v.b;
    case JValue::T::integer: return v.i != 0;
    case JValue::T::real: return v.d != 0;
    case JValue::T::string: return !v.s->s.empty();
    case JValue::T::list: return v.l->kind == JSeq::generator || !v.l->items.empty();  // a generator is always true
    case JValue::T::dict: return !v.m->items.empty();
    default: return true;
  }
}

// Python's repr() of a float: shortest round-trip digits; exponent form below 1e-4 and from 1e16.
inline std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // "-1.2345e+02"
  bool neg = sci[0] == '-';
  size_t e = sci.find('e');
  std::string mant = sci.substr(neg ? 1 : 0, e - (neg ? 1 : 0));
  int exp10 = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exp10);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits += c;
  int decpt = exp10 + 1;  // digits[0] is at 10^(decpt-1)
  std::string out = neg ? "-" : "";
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(decpt) - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  out += strf("e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
  return out;
}

// ---- Unicode properties and case mapping ----
// From the tables shared with the tokenizer (general category, White_Space, lowercase mapping:
// 30_unicode_data.hpp, decoded by 31_unicode.hpp) and what only the interpreter reads
// (35_jinja_unicode.hpp), decoded once into one byte of properties per code point and the case mappings.
constexpr uint8_t kJTitle = 1;          // general category Lt
constexpr uint8_t kJUpper = 2;          // Uppercase: Lu and Other_Uppercase
constexpr uint8_t kJLower = 4;          // Lowercase: Ll and Other_Lowercase
constexpr uint8_t kJCaseIgnorable = 8;  // Case_Ignorable (the Final_Sigma rule)
constexpr uint8_t kJDecimal = 16;       // Nd: str.isdecimal()
constexpr uint8_t kJDigit = 32;         // a digit value: str.isdigit()
constexpr uint8_t kJNumeric = 64;       // a numeric value, Unihan's too: str.isnumeric()

struct JCaseSpecial {
  uint32_t cp;
  uint8_t kind;  // 0 upper, 1 lower, 2 title
  uint8_t n;
  uint32_t to[3];
};
struct JUnicodeTables {
  UTable props;
  UMap upper, title_overrides;
  std::vector<JCaseSpecial> special;  // by code point, then kind
};

inline JUnicodeTables build_junicode_tables() {
  JUnicodeTables t;
  std::vector<uint8_t> full(0x110000, 0);
  uint8_t by_gc[32] = {};
  by_gc[int(UGc::Lt)] = kJTitle;
  by_gc[int(UGc::Lu)] = kJUpper;
  by_gc[int(UGc::Ll)] = kJLower;
  for (UGc gc : {UGc::Mn, UGc::Me, UGc::Cf, UGc::Lm, UGc::Sk}) by_gc[int(gc)] = kJCaseIgnorable;
  by_gc[int(UGc::Nd)] = kJDecimal | kJDigit | kJNumeric;
  by_gc[int(UGc::Nl)] = by_gc[int(UGc::No)] = kJNumeric;
  ucd_each_category([&](uint32_t cp, uint32_t len, UGc gc) { std::fill_n(full.begin() + cp, len, by_gc[int(gc)]); });
  for (auto [table, flag] : {std::pair<const char*, uint8_t>{ucd::kOtherUppercase, kJUpper},
                             {ucd::kOtherLowercase, kJLower},
                             {ucd::kCaseIgnorableExtra, kJCaseIgnorable},
                             {ucd::kDigitExtra, kJDigit},
                             {ucd::kNumericExtra, kJNumeric}})
    ucd_each_range(table, [&, flag = flag](uint32_t cp, uint32_t len) {
      for (uint32_t k = 0; k < len; k++) full[cp + k] |= flag;
    });
  t.props.build(full);
  t.upper = ucd_map(ucd::kUppercase);
  t.title_overrides = ucd_map(ucd::kTitlecaseOverrides);
  const char* p = ucd::kSpecialCasing;
  uint32_t cp = 0;
  while (*p) {
    cp += ucd_varint(p);
    uint32_t nk = ucd_varint(p);
    JCaseSpecial e{cp, static_cast<uint8_t>(nk & 3), static_cast<uint8_t>(nk >> 2), {0, 0, 0}};
    for (uint32_t k = 0; k < e.n; k++) e.to[k] = static_cast<uint32_t>(int64_t(cp) + ucd_unzigzag(ucd_varint(p)));
    t.special.push_back(e);
  }
  return t;
}
inline const JUnicodeTables& junicode_tables() {
  static const JUnicodeTables t = build_junicode_tables();
  return t;
}
inline uint8_t jprops(uint32_t c) {
  return junicode_tables().props(c);
}

// Python's str.isprintable() per code point: not C* (unassigned included) or Z*, but the space.
inline bool py_printable(uint32_t c) {
  if (c == ' ') return true;
  UClass k = uclass(c);
  return c <= 0x10FFFF && k != UClass::other && k != UClass::separator;
}
inline bool jcase_is_title(uint32_t c) {
  return jprops(c) & kJTitle;
}
inline bool jcase_is_upper(uint32_t c) {
  return jprops(c) & kJUpper;
}
inline bool jcase_is_lower(uint32_t c) {
  return jprops(c) & kJLower;
}
inline bool jcase_cased(uint32_t c) {
  return jprops(c) & (kJUpper | kJLower | kJTitle);
}
inline bool jcase_ignorable(uint32_t c) {
  return jprops(c) & kJCaseIgnorable;
}
// str.isalpha() / isdecimal() / isdigit() / isnumeric() / isalnum() per code point.
inline bool jis_alpha(uint32_t c) {
  return is_uletter(c);
}
inline bool jis_decimal(uint32_t c) {
  return jprops(c) & kJDecimal;
}
inline bool jis_digit(uint32_t c) {
  return jprops(c) & kJDigit;
}
inline bool jis_numeric(uint32_t c) {
  return jprops(c) & kJNumeric;
}
inline bool jis_alnum(uint32_t c) {
  return jis_alpha(c) || jis_decimal(c) || jis_digit(c) || jis_numeric(c);
}
// Full case mapping (kind 0 upper, 1 lower, 2 title) into out[]; returns the count (1..3).
inline int jcase_full(uint32_t c, int kind, uint32_t out[3]) {
  const auto& t = junicode_tables();
  auto it = std::lower_bound(t.special.begin(), t.special.end(), std::make_pair(c, kind),
                             [](const JCaseSpecial& e, std::pair<uint32_t, int> key) {
                               return e.cp < key.first || (e.cp == key.first && e.kind < key.second);
                             });
  if (it != t.special.end() && it->cp == c && it->kind == kind) {
    for (int k = 0; k < it->n; k++) out[k] = it->to[k];
    return it->n;
  }
  out[0] = c;
  if (kind == 1) {
    out[0] = simple_lower(c);
  } else if (kind == 0 || !umap_find(t.title_overrides, c, out[0])) {
    umap_find(t.upper, c, out[0]);
  }
  return 1;
}

// repr() of a string, with provenance kept per character.
inline void py_repr_str(PText& out, const PText& s) {
  bool has_sq = s.s.find('\'') != std::string::npos, has_dq = s.s.find('"') != std::string::npos;
  char q = (has_sq && !has_dq) ? '"' : '\'';
  out.add(q);
  size_t i = 0;
  while (i < s.s.size()) {
    size_t b = i;
    uint32_t c = jcp_next(s.s, i);
    bool content = s.content_in(b, i);
    std::string piece;
    if (c == static_cast<uint32_t>(q) || c == '\\') {
      piece = std::string("\\") + static_cast<char>(c);
    } else if (c == '\t') {
      piece = "\\t";
    } else if (c == '\n') {
      piece = "\\n";
    } else if (c == '\r') {
      piece = "\\r";
    } else if (c < 0x7F && c >= 0x20) {
      piece = std::string(1, static_cast<char>(c));
    } else if (py_printable(c)) {
      piece = s.s.substr(b, i - b);
    } else if (c <= 0xFF) {
      piece = strf("\\x%02x", c);
    } else if (c <= 0xFFFF) {
      piece = strf("\\u%04x", c);
    } else {
      piece = strf("\\U%08x", c);
    }
    out.add(piece, content);
  }
  out.add(q);
}

// markupsafe.escape: & < > ' " as HTML entities, provenance kept.
inline void html_escape(PText& out, const PText& s) {
  size_t i = 0;
  while (i < s.s.size()) {
    char c = s.s[i];
    const char* rep = c == '&'    ? "&amp;"
                      : c == '<'  ? "&lt;"
                      : c == '>'  ? "&gt;"
                      : c == '\'' ? "&#39;"
                      : c == '"'  ? "&#34;"
                                  : nullptr;
    if (rep) {
      out.add(rep, s.content_in(i, i + 1));
      i++;
      continue;
    }
    size_t j = i;
    while (j < s.s.size() && !std::strchr("&<>'\"", s.s[j])) j++;
    out.add_range(s, i, j);
    i = j;
  }
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
