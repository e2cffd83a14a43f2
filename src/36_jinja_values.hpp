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

// ---- Unicode properties and case mapping (tables in 35_jinja_unicode.hpp) ----
template <size_t N>
inline bool jin_ranges(const JRange (&r)[N], uint32_t c) {
  size_t lo = 0, hi = N;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (r[mid].hi < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < N && r[lo].lo <= c;
}
// The simple mapping of c by disjoint runs; c itself when unmapped.
template <size_t N>
inline uint32_t jmap_runs(const JCaseRun (&r)[N], uint32_t c, bool* mapped = nullptr) {
  size_t lo = 0, hi = N;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (r[mid].end < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < N && r[lo].start <= c && (c - r[lo].start) % r[lo].stride == 0) {
    if (mapped) *mapped = true;
    return static_cast<uint32_t>(static_cast<int64_t>(c) + r[lo].delta);
  }
  if (mapped) *mapped = false;
  return c;
}
// Python's str.isprintable() per code point.
inline bool py_printable(uint32_t c) {
  return c <= 0x10FFFF && !jin_ranges(kJNonPrintable, c);
}
inline bool jcase_is_title(uint32_t c) {
  return jin_ranges(kJTitlecase, c);
}
inline bool jcase_is_upper(uint32_t c) {
  bool m;
  jmap_runs(kJLowerRuns, c, &m);
  return (m && !jcase_is_title(c)) || jin_ranges(kJUpperExtra, c);
}
inline bool jcase_is_lower(uint32_t c) {
  bool m;
  jmap_runs(kJUpperRuns, c, &m);
  return (m && !jcase_is_title(c)) || jin_ranges(kJLowerExtra, c);
}
inline bool jcase_cased(uint32_t c) {
  return jcase_is_upper(c) || jcase_is_lower(c) || jcase_is_title(c);
}
inline bool jcase_ignorable(uint32_t c) {
  return jin_ranges(kJCaseIgnorable, c);
}
// str.isalpha() / isdecimal() / isdigit() / isnumeric() / isalnum() per code point.
inline bool jis_alpha(uint32_t c) {
  return jin_ranges(kJAlpha, c);
}
inline bool jis_decimal(uint32_t c) {
  return jin_ranges(kJDecimal, c);
}
inline bool jis_digit(uint32_t c) {
  return jin_ranges(kJDigit, c);
}
inline bool jis_numeric(uint32_t c) {
  return jin_ranges(kJNumeric, c);
}
inline bool jis_alnum(uint32_t c) {
  return jis_alpha(c) || jis_decimal(c) || jis_digit(c) || jis_numeric(c);
}
// Full case mapping (kind 0 upper, 1 lower, 2 title) into out[]; returns the count (1..3).
inline int jcase_full(uint32_t c, int kind, uint32_t out[3]) {
  size_t lo = 0, hi = sizeof kJCaseSpecial / sizeof kJCaseSpecial[0];
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    const JCaseSpecial& e = kJCaseSpecial[mid];
    if (e.cp < c || (e.cp == c && e.kind < kind))
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo < sizeof kJCaseSpecial / sizeof kJCaseSpecial[0] && kJCaseSpecial[lo].cp == c &&
      kJCaseSpecial[lo].kind == kind) {
    int n = 0;
    for (uint32_t x : kJCaseSpecial[lo].to)
      if (x) out[n++] = x;
    return n;
  }
  if (kind == 0) {
    out[0] = jmap_runs(kJUpperRuns, c);
  } else if (kind == 1) {
    out[0] = jmap_runs(kJLowerRuns, c);
  } else {
    bool m;
    out[0] = jmap_runs(kJTitleRuns, c, &m);
    if (!m) out[0] = jmap_runs(kJUpperRuns, c);
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
