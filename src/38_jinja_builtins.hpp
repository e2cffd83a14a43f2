// ==== Chat templates, part 4: filters, tests, string/dict/list methods, % and .format ====
// Jinja2 3.1's builtin filters and tests with transformers' tojson, and the Python str methods
// templates call. Filters, tests and str methods (and the globals, in part 3) are each a sorted
// table of {name, handler}, found by binary search; a family (upper, lower, title, ...) shares a
// handler, which looks at the name. Anything Jinja2 has but this interpreter does not do gives an
// error that names it ("unsupported construct: ..."), never a silently different result.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// ---- string helpers (code points, provenance kept) ----
inline PText jsub(const PText& s, size_t b, size_t e) {
  PText t;
  t.add_range(s, b, e);
  return t;
}
// Python's str.strip family: `chars` null means whitespace.
inline PText jstrip(const PText& s, const std::string* chars, bool left, bool right) {
  auto strip_cp = [&](uint32_t c) {
    if (!chars) return jis_space(c);
    size_t i = 0;
    while (i < chars->size())
      if (jcp_next(*chars, i) == c) return true;
    return false;
  };
  size_t b = 0, e = s.s.size();
  if (left) {
    while (b < e) {
      size_t i = b;
      if (!strip_cp(jcp_next(s.s, i))) break;
      b = i;
    }
  }
  if (right) {
    size_t i = b, keep = b;
    while (i < e)
      if (!strip_cp(jcp_next(s.s, i))) keep = i;
    e = keep;
  }
  return jsub(s, b, e);
}
// Python's str.splitlines() boundaries.
inline bool jis_linebreak(uint32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}
inline std::vector<PText> jsplitlines(const PText& s, bool keepends) {
  std::vector<PText> out;
  size_t i = 0, start = 0;
  while (i < s.s.size()) {
    size_t b = i;
    uint32_t c = jcp_next(s.s, i);
    if (!jis_linebreak(c)) continue;
    size_t end = i;
    if (c == '\r' && i < s.s.size() && s.s[i] == '\n') end = ++i;
    out.push_back(jsub(s, start, keepends ? end : b));
    start = i;
  }
  if (start < s.s.size()) out.push_back(jsub(s, start, s.s.size()));
  return out;
}

// Case mapping of a whole string as Python's str methods do it (full mappings, Final_Sigma),
// provenance kept per code point. title_filter is Jinja2's |title: every chunk after "-", a space,
// "(", "{", "[" or "<" is chunk[0].upper() + chunk[1:].lower().
enum class JCase : uint8_t { upper, lower, title_filter, capitalize, title_method, swapcase };
inline void jcase(const PText& s, JCase mode, PText& out) {
  std::vector<uint32_t> cps;
  std::vector<size_t> off;
  size_t i = 0;
  while (i < s.s.size()) {
    off.push_back(i);
    cps.push_back(jcp_next(s.s, i));
  }
  off.push_back(s.s.size());
  size_t n = cps.size();
  // str.lower() of cps[k] within [lo, hi): U+03A3 becomes final sigma after a cased letter
  // (skipping case-ignorables) when no cased letter follows.
  auto lower_at = [&](size_t k, size_t lo, size_t hi, uint32_t m[3]) -> int {
    if (cps[k] != 0x3A3) return jcase_full(cps[k], 1, m);
    size_t j = k;
    bool final_sigma = false;
    while (j > lo && jcase_ignorable(cps[j - 1])) j--;
    if (j > lo && jcase_cased(cps[j - 1])) {
      size_t q = k + 1;
      while (q < hi && jcase_ignorable(cps[q])) q++;
      final_sigma = q == hi || !jcase_cased(cps[q]);
    }
    m[0] = final_sigma ? 0x3C2 : 0x3C3;
    return 1;
  };
  auto is_sep = [](uint32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || jis_space(c); };
  bool prev_cased = false;
  size_t chunk_lo = 0, chunk_hi = 0;
  for (size_t k = 0; k < n; k++) {
    uint32_t c = cps[k], m[3];
    int cnt = 1;
    m[0] = c;
    switch (mode) {
      case JCase::upper: cnt = jcase_full(c, 0, m); break;
      case JCase::lower: cnt = lower_at(k, 0, n, m); break;
      case JCase::swapcase:
        if (jcase_is_upper(c))
          cnt = lower_at(k, 0, n, m);
        else if (jcase_is_lower(c))
          cnt = jcase_full(c, 0, m);
        break;
      case JCase::capitalize: cnt = k == 0 ? jcase_full(c, 2, m) : lower_at(k, 0, n, m); break;
      case JCase::title_method:
        cnt = prev_cased ? lower_at(k, 0, n, m) : jcase_full(c, 2, m);
        prev_cased = jcase_cased(c);
        break;
      case JCase::title_filter:
        if (k >= chunk_hi) {  // the next chunk: a run of separators, or a run of anything else
          chunk_lo = k;
          chunk_hi = k + 1;
          while (chunk_hi < n && is_sep(cps[chunk_hi]) == is_sep(c)) chunk_hi++;
        }
        cnt = k == chunk_lo ? jcase_full(c, 0, m) : lower_at(k, chunk_lo + 1, chunk_hi, m);
        break;
    }
    if (cnt == 1 && m[0] == c) {
      out.add_range(s, off[k], off[k + 1]);
    } else {
      std::string e;
      for (int q = 0; q < cnt; q++) jcp_append(e, m[q]);
      out.add(e, s.content_in(off[k], off[k + 1]));
    }
  }
}

// ---- filters ----
inline JValue JRender::eval_filter(const JNode* n, const SP& sc, const JValue* subject) {
  JValue v;
  if (n->a) {
    v = eval(n->a, sc);
    if (failed_) return JValue();
  } else if (subject) {
    v = *subject;
  }
  JArgs args;
  if (!eval_args(n, sc, args)) return JValue();
  pos_ = n->pos;
  if (n->flag) return failv(strf("no filter named '%s'", n->str.c_str()));
  return apply_filter(n->str, v, args, sc);
}

// A filter is found by name in a sorted table (binary search); a family of filters (upper, lower,
// capitalize, title) shares one handler, which looks at the name. Jinja2 filters that are not in the
// table (jinja_known_filter has them all) are an error that names them.
inline JValue JRender::apply_filter(const std::string& name, const JValue& v, const JArgs& args, const SP& sc) {
  struct Def {
    std::string_view name;
    JValue (JRender::*fn)(const FilterCall&);
  };
  static constexpr Def table[] = {
      {"abs", &JRender::filter_abs},           {"attr", &JRender::filter_attr},
      {"batch", &JRender::filter_batch},       {"capitalize", &JRender::filter_case},
      {"center", &JRender::filter_center},     {"count", &JRender::filter_length},
      {"d", &JRender::filter_default},         {"default", &JRender::filter_default},
      {"dictsort", &JRender::filter_dictsort}, {"e", &JRender::filter_escape},
      {"escape", &JRender::filter_escape},     {"first", &JRender::filter_first_last},
      {"float", &JRender::filter_float},       {"forceescape", &JRender::filter_escape},
      {"format", &JRender::filter_format},     {"indent", &JRender::filter_indent},
      {"int", &JRender::filter_int},           {"items", &JRender::filter_items},
      {"join", &JRender::filter_join},         {"last", &JRender::filter_first_last},
      {"length", &JRender::filter_length},     {"list", &JRender::filter_list},
      {"lower", &JRender::filter_case},        {"map", &JRender::filter_map},
      {"max", &JRender::filter_min_max},       {"min", &JRender::filter_min_max},
      {"reject", &JRender::filter_select},     {"rejectattr", &JRender::filter_select},
      {"replace", &JRender::filter_replace},   {"reverse", &JRender::filter_reverse},
      {"round", &JRender::filter_round},       {"safe", &JRender::filter_safe},
      {"select", &JRender::filter_select},     {"selectattr", &JRender::filter_select},
      {"sort", &JRender::filter_sort},         {"string", &JRender::filter_string},
      {"sum", &JRender::filter_sum},           {"title", &JRender::filter_case},
      {"tojson", &JRender::filter_tojson},     {"trim", &JRender::filter_trim},
      {"truncate", &JRender::filter_truncate}, {"unique", &JRender::filter_unique},
      {"upper", &JRender::filter_case},        {"wordcount", &JRender::filter_wordcount},
  };
  static_assert(jtable_sorted(table), "the filter table must be sorted by name");
  if (!charge_scan(v, args)) return JValue();
  const Def* d = jtable_find(table, name);
  if (!d) return failv(strf("unsupported construct: the '%s' filter", name.c_str()));
  return (this->*d->fn)(FilterCall{name, v, args, sc, "filter '" + name + "'"});
}

// Jinja2's soft_str(): strings stay (Markup stays Markup), anything else is str()-ed.
inline bool JRender::soft_str(const JValue& x, PText& t, bool& markup) {
  markup = jv_is_markup(x);
  if (x.is_str()) {
    t = *x.s;
    return true;
  }
  return to_str(x, t);
}

// ---- filters: text ----
inline JValue JRender::filter_tojson(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"ensure_ascii", "indent", "separators", "sort_keys"}, a, c.what)) return JValue();
  JsonOpts o;
  if (a[0]) o.ensure_ascii = jv_truthy(*a[0]);
  if (a[1] && !a[1]->is_none()) {
    o.indent_set = true;
    int64_t ind;
    if (as_int(*a[1], ind)) {
      o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(ind, 64))), ' ');
    } else if (a[1]->is_str()) {
      o.indent = a[1]->text();
    } else {
      return failv("tojson: indent must be an integer or a string");
    }
    o.item_sep = ",";
  }
  if (a[2] && !a[2]->is_none()) {
    std::vector<JValue> seps;
    if (!iterate(*a[2], seps)) return JValue();
    if (seps.size() != 2 || !seps[0].is_str() || !seps[1].is_str())
      return failv("tojson: separators must be a pair of strings");
    o.item_sep = seps[0].text();
    o.key_sep = seps[1].text();
  }
  if (a[3]) o.sort_keys = jv_truthy(*a[3]);
  PText t;
  if (!to_json(c.v, t, o, 0) || !charge_str(t.s.size()) || !check_len(t.s.size())) return JValue();
  return JValue::str(std::move(t));
}
inline JValue JRender::filter_safe(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {}, a, c.what)) return JValue();
  PText t;
  bool m;
  if (!soft_str(c.v, t, m)) return JValue();
  return jv_markup(std::move(t));
}
// e, escape, forceescape
inline JValue JRender::filter_escape(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {}, a, c.what)) return JValue();
  if (c.name != "forceescape" && jv_is_markup(c.v)) return c.v;
  PText s, t;
  if (!to_str(c.v, s)) return JValue();
  html_escape(t, s);
  return jv_markup(std::move(t));
}
inline JValue JRender::filter_trim(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"chars"}, a, c.what)) return JValue();
  PText t;
  bool m;
  if (!soft_str(c.v, t, m)) return JValue();
  std::string chars;
  bool have = a[0] && !a[0]->is_none();
  if (have) {
    if (!a[0]->is_str()) return failv("trim: chars must be a string");
    chars = a[0]->text();
  }
  return jv_text(jstrip(t, have ? &chars : nullptr, true, true), m);
}
// upper, lower, capitalize, title
inline JValue JRender::filter_case(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {}, a, c.what)) return JValue();
  PText t, out;
  bool m;
  if (!soft_str(c.v, t, m)) return JValue();
  const std::string& name = c.name;
  JCase mode = name == "upper"        ? JCase::upper
               : name == "lower"      ? JCase::lower
               : name == "capitalize" ? JCase::capitalize
                                      : JCase::title_filter;
  jcase(t, mode, out);
  if (!charge_str(out.s.size())) return JValue();
  return jv_text(std::move(out), m && name != "title");
}
inline JValue JRender::filter_string(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {}, a, c.what)) return JValue();
  if (c.v.is_str()) return c.v;
  PText t;
  if (!to_str(c.v, t)) return JValue();
  return JValue::str(std::move(t));
}
inline JValue JRender::filter_join(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"d", "attribute"}, a, c.what)) return JValue();
  std::vector<JValue> items;
  if (!iterate(c.v, items)) return JValue();
  PText sep, out;
  if (a[0] && !to_str(*a[0], sep)) return JValue();
  for (size_t k = 0; k < items.size(); k++) {
    if (k) out.add(sep);
    JValue item = items[k];
    if (a[1] && !a[1]->is_none()) {
      item = attr_path(item, *a[1], nullptr);
      if (failed_) return JValue();
    }
    if (!to_str(item, out) || !check_len(out.s.size())) return JValue();
  }
  if (!charge_str(out.s.size())) return JValue();
  return JValue::str(std::move(out));
}
inline JValue JRender::filter_replace(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"old", "new", "count"}, a, c.what)) return JValue();
  if (!a[0] || !a[1]) return failv("replace() needs the old and the new string");
  JArgs m;
  JValue s = c.v;
  if (!c.v.is_str()) {
    PText t;
    if (!to_str(c.v, t)) return JValue();
    s = JValue::str(std::move(t));
  }
  s.b = false;  // the filter returns a plain str when autoescape is off
  PText o, nw;
  if (!to_str(*a[0], o) || !to_str(*a[1], nw)) return JValue();
  m.pos = {JValue::str(std::move(o)), JValue::str(std::move(nw))};
  if (a[2] && !a[2]->is_none()) m.pos.push_back(*a[2]);
  return call_method(s, "replace", m);
}
inline JValue JRender::filter_indent(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"width", "first", "blank"}, a, c.what)) return JValue();
  const JValue& v = c.v;
  if (v.is_undef()) return (fail_undef(v), JValue());
  if (!v.is_str()) return failv(strf("unsupported operand type(s) for +=: '%s' and 'str'", jv_type(v)));
  PText s;
  bool m;
  if (!soft_str(v, s, m)) return JValue();
  std::string ind = "    ";
  if (a[0]) {
    int64_t w;
    if (a[0]->is_str())
      ind = a[0]->text();
    else if (as_int(*a[0], w))
      ind = std::string(static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(w, 1 << 16))), ' ');
    else
      return failv("indent: width must be an integer or a string");
  }
  bool first = a[1] && jv_truthy(*a[1]), blank = a[2] && jv_truthy(*a[2]);
  s.add("\n");
  std::vector<PText> lines = jsplitlines(s, false);
  PText out;
  for (size_t k = 0; k < lines.size(); k++) {
    if (k) out.add("\n");
    if (k && (blank || !lines[k].s.empty())) out.add(ind);
    out.add(lines[k]);
    if (!check_len(out.s.size())) return JValue();
  }
  if (first) {
    PText t(ind);
    t.add(out);
    out = std::move(t);
  }
  return jv_text(std::move(out), m);
}
inline JValue JRender::filter_truncate(const FilterCall& c) {
  // Jinja2's do_truncate: at most length + leeway (5) characters are kept as they are; longer
  // text is cut to length - len(end) characters, back to the last space unless killwords
  std::vector<const JValue*> a;
  if (!bind(c.args, {"length", "killwords", "end", "leeway"}, a, c.what)) return JValue();
  const JValue& v = c.v;
  if (v.is_undef()) return v;
  if (!v.is_str()) return failv(strf("object of type '%s' has no len()", jv_type(v)));
  int64_t length = 255, leeway = 5;
  if (a[0] && !as_int(*a[0], length)) return failv("truncate: length must be an integer");
  if (a[3] && !a[3]->is_none() && !as_int(*a[3], leeway)) return failv("truncate: leeway must be an integer");
  PText end("...");
  if (a[2]) {
    if (!a[2]->is_str()) return failv("truncate: end must be a string");
    end = *a[2]->s;
  }
  const PText& s = *v.s;
  std::vector<size_t> off = jcp_offsets(s.s);
  int64_t n = static_cast<int64_t>(off.size()) - 1;
  int64_t end_len = static_cast<int64_t>(jcp_offsets(end.s).size()) - 1;
  if (length < end_len)
    return failv(
        strf("expected length >= %lld, got %lld", static_cast<long long>(end_len), static_cast<long long>(length)));
  if (leeway < 0) return failv("expected leeway >= 0");
  if (n <= length + leeway) return v;
  size_t cut = off[static_cast<size_t>(length - end_len)];
  if (!(a[1] && jv_truthy(*a[1]))) {
    size_t sp = s.s.rfind(' ', cut ? cut - 1 : 0);
    if (cut && sp != std::string::npos && sp < cut) cut = sp;
  }
  PText out;
  out.add_range(s, 0, cut);
  out.add(end);
  JValue r = JValue::str(std::move(out));
  r.b = v.b;
  return r;
}
inline JValue JRender::filter_center(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"width"}, a, c.what)) return JValue();
  JArgs m;
  m.pos.push_back(a[0] ? *a[0] : JValue::integer(80));
  PText t;
  bool mk;
  if (!soft_str(c.v, t, mk)) return JValue();
  JValue s = JValue::str(std::move(t));
  s.b = mk;
  return call_method(s, "center", m);
}
inline JValue JRender::filter_format(const FilterCall& c) {
  const JArgs& args = c.args;
  if (!args.kw.empty() && !args.pos.empty())
    return failv("can't handle positional and keyword arguments at the same time");
  PText t;
  bool m;
  if (!soft_str(c.v, t, m)) return JValue();
  JValue f = JValue::str(std::move(t));
  f.b = m;
  if (!args.kw.empty()) {
    JValue d;
    d.t = JValue::T::dict;
    d.m = std::make_shared<JDict>();
    for (const auto& kv : args.kw) d.m->items.emplace_back(JValue::str(kv.first), kv.second);
    return percent_format(f, d);
  }
  return percent_format(f, JValue::list(args.pos, JSeq::tuple));
}
inline JValue JRender::filter_wordcount(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {}, a, c.what)) return JValue();
  PText t;
  bool m;
  if (!soft_str(c.v, t, m)) return JValue();
  // runs of Python's \w: str.isalnum() characters and "_"
  int64_t count = 0;
  bool in = false;
  size_t i = 0;
  while (i < t.s.size()) {
    uint32_t ch = jcp_next(t.s, i);
    bool w = ch == '_' || jis_alnum(ch);
    if (w && !in) count++;
    in = w;
  }
  return JValue::integer(count);
}

// ---- filters: values and numbers ----
// length, count
inline JValue JRender::filter_length(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {}, a, c.what)) return JValue();
  const JValue& v = c.v;
  switch (v.t) {
    case JValue::T::string: return JValue::integer(static_cast<int64_t>(jcp_count(v.text())));
    case JValue::T::list:
      if (v.l->kind == JSeq::generator) return failv("object of type 'generator' has no len()");
      return JValue::integer(static_cast<int64_t>(v.l->items.size()));
    case JValue::T::dict: return JValue::integer(static_cast<int64_t>(v.m->items.size()));
    case JValue::T::undef: return JValue::integer(0);
    default: return failv(strf("object of type '%s' has no len()", jv_type(v)));
  }
}
// default, d
inline JValue JRender::filter_default(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"default_value", "boolean"}, a, c.what)) return JValue();
  bool use = c.v.is_undef() || (a[1] && jv_truthy(*a[1]) && !jv_truthy(c.v));
  if (!use) return c.v;
  return a[0] ? *a[0] : JValue::str("");
}
inline JValue JRender::filter_attr(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"name"}, a, c.what)) return JValue();
  if (!a[0] || !a[0]->is_str()) return failv("attr: the name must be a string");
  return get_attr(c.v, a[0]->text());
}
inline JValue JRender::filter_int(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"default", "base"}, a, c.what)) return JValue();
  const JValue& v = c.v;
  JValue def = a[0] ? *a[0] : JValue::integer(0);
  int64_t base = 10;
  if (a[1] && !as_int(*a[1], base)) return failv("int: base must be an integer");
  int64_t i;
  if (as_int(v, i)) return JValue::integer(i);
  if (v.t == JValue::T::real) {
    if (std::isnan(v.d)) return def;  // int(nan) is a ValueError: the default
    if (std::isinf(v.d)) return def;  // OverflowError: the default
    if (std::fabs(v.d) >= 9.2e18) return failv("integer overflow (integers are limited to 64 bits)");
    return JValue::integer(static_cast<int64_t>(v.d));
  }
  if (v.is_str()) {
    if (parse_py_int(v.text(), static_cast<int>(base), i)) return JValue::integer(i);
    double d;
    if (parse_py_float(v.text(), d)) {
      if (!std::isfinite(d)) return def;
      if (std::fabs(d) >= 9.2e18) return failv("integer overflow (integers are limited to 64 bits)");
      return JValue::integer(static_cast<int64_t>(d));
    }
    return def;
  }
  if (v.is_undef()) {
    fail_undef(v);
    return JValue();
  }
  return def;
}
inline JValue JRender::filter_float(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"default"}, a, c.what)) return JValue();
  const JValue& v = c.v;
  JValue def = a[0] ? *a[0] : JValue::real(0.0);
  if (v.is_num()) return JValue::real(as_double(v));
  double d;
  if (v.is_str() && parse_py_float(v.text(), d)) return JValue::real(d);
  if (v.is_undef()) {
    fail_undef(v);
    return JValue();
  }
  return def;
}
inline JValue JRender::filter_abs(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {}, a, c.what)) return JValue();
  int64_t i;
  if (as_int(c.v, i)) {
    if (i == INT64_MIN) return failv("integer overflow (integers are limited to 64 bits)");
    return JValue::integer(i < 0 ? -i : i);
  }
  if (c.v.t == JValue::T::real) return JValue::real(std::fabs(c.v.d));
  return failv(strf("bad operand type for abs(): '%s'", jv_type(c.v)));
}
inline JValue JRender::filter_round(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"precision", "method"}, a, c.what)) return JValue();
  const JValue& v = c.v;
  int64_t prec = 0;
  if (a[0] && !as_int(*a[0], prec)) return failv("round: precision must be an integer");
  std::string method = a[1] && a[1]->is_str() ? a[1]->text() : "common";
  if (method != "common" && method != "ceil" && method != "floor") return failv("method must be common, ceil or floor");
  int64_t i;
  if (method == "common" && as_int(v, i) && prec >= 0) return JValue::integer(i);
  if (!v.is_num()) return failv(strf("type %s doesn't define __round__ method", jv_type(v)));
  double x = as_double(v);
  if (method == "common") {
    if (prec < -300 || prec > 300 || !std::isfinite(x)) return JValue::real(x);
    char buf[512];
    if (prec >= 0) {
      std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(prec), x);  // exact, ties to even
      double r = 0;
      std::from_chars(buf, buf + std::strlen(buf), r);
      return JValue::real(r);
    }
    double p = std::pow(10.0, static_cast<double>(-prec));
    return JValue::real(std::nearbyint(x / p) * p);
  }
  double p = std::pow(10.0, static_cast<double>(prec));
  double r = method == "ceil" ? std::ceil(x * p) / p : std::floor(x * p) / p;
  return JValue::real(r);
}

// ---- filters: sequences ----
inline JValue JRender::filter_list(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {}, a, c.what)) return JValue();
  std::vector<JValue> items;
  if (!iterate(c.v, items)) return JValue();
  return JValue::list(std::move(items));
}
inline JValue JRender::filter_items(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {}, a, c.what)) return JValue();
  return make_gen(
      [this, v = c.v, idx = size_t(0)](JValue& out, bool& done) mutable -> bool {
        done = false;
        if (v.is_undef()) return (done = true), true;
        if (!v.is_dict()) return fail("can only get item pairs from a mapping");
        if (idx >= v.m->items.size()) return (done = true), true;
        const auto& kv = v.m->items[idx++];
        out = JValue::list({kv.first, kv.second}, JSeq::tuple);
        return true;
      },
      c.v);
}
// first, last
inline JValue JRender::filter_first_last(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {}, a, c.what)) return JValue();
  const JValue& v = c.v;
  if (c.name == "last" && v.is_list() && v.l->kind == JSeq::generator)
    return failv("'generator' object is not reversible");
  if (v.is_list() && v.l->kind == JSeq::generator) {
    JValue x;
    bool done = false;
    if (!gen_pull(*v.l, x, done)) return JValue();
    if (done) return JValue::undefined("no first item, sequence was empty");
    return x;
  }
  std::vector<JValue> items;
  if (!iterate(v, items)) return JValue();
  if (items.empty()) return JValue::undefined(strf("no %s item, sequence was empty", c.name.c_str()));
  return c.name == "first" ? items.front() : items.back();
}
inline JValue JRender::filter_reverse(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {}, a, c.what)) return JValue();
  const JValue& v = c.v;
  if (v.is_str()) return slice(v, JValue::none(), JValue::none(), JValue::integer(-1));
  // reversed(value) (an iterator) for sequences and dicts; list(value) reversed for the rest
  std::vector<JValue> items;
  if (!iterate(v, items)) return JValue();
  std::reverse(items.begin(), items.end());
  bool reversible = v.is_dict() || v.is_undef() || (v.is_list() && v.l->kind != JSeq::generator);
  return JValue::list(std::move(items), reversible ? JSeq::generator : JSeq::list);
}
inline JValue JRender::filter_batch(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"linecount", "fill_with"}, a, c.what)) return JValue();
  int64_t n;
  if (!a[0] || !as_int(*a[0], n) || n <= 0) return failv("batch: linecount must be a positive integer");
  JValue fill = a[1] ? *a[1] : JValue::none();
  Puller src = puller(c.v);
  return make_gen(
      [this, src, n, fill, end = false](JValue& out, bool& done) mutable -> bool {
        done = false;
        if (end) return (done = true), true;
        std::vector<JValue> cur;
        while (static_cast<int64_t>(cur.size()) < n) {
          JValue x;
          bool fin = false;
          if (!src(x, fin)) return false;
          if (fin) {
            end = true;
            break;
          }
          cur.push_back(std::move(x));
        }
        if (cur.empty()) return (done = true), true;
        if (!fill.is_none())
          while (static_cast<int64_t>(cur.size()) < n) cur.push_back(fill);
        if (!charge_list(cur.size())) return false;
        out = JValue::list(std::move(cur));
        return true;
      },
      c.v);
}
inline JValue JRender::filter_sum(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"attribute", "start"}, a, c.what)) return JValue();
  std::vector<JValue> items;
  if (!iterate(c.v, items)) return JValue();
  JValue total = a[1] ? *a[1] : JValue::integer(0);
  if (total.is_str()) return failv("sum() can't sum strings [use ''.join(seq) instead]");
  for (const auto& it : items) {
    JValue x = it;
    if (a[0] && !a[0]->is_none()) {
      x = attr_path(it, *a[0], nullptr);
      if (failed_) return JValue();
    }
    total = binop(BinOp::add, total, x);
    if (failed_) return JValue();
  }
  return total;
}

// ---- filters: sorting and picking ----
// The key of an item for sort, min, max, unique and dictsort: its attribute when one is named, and
// lower-cased when a string and not case_sensitive.
inline bool JRender::sort_key(const JValue& item, const JValue* attribute, bool case_sensitive, JValue& key) {
  key = item;
  if (attribute && !attribute->is_none()) {
    key = attr_path(item, *attribute, nullptr);
    if (failed_) return false;
  }
  if (!case_sensitive && key.is_str()) {
    PText lo;
    jcase(*key.s, JCase::lower, lo);
    key = JValue::str(std::move(lo));
  }
  return true;
}
inline JValue JRender::filter_dictsort(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"case_sensitive", "by", "reverse"}, a, c.what)) return JValue();
  const JValue& v = c.v;
  if (!v.is_dict()) return failv("you can only sort by either \"key\" or \"value\" of a dict");
  bool cs = a[0] && jv_truthy(*a[0]);
  std::string by = a[1] && a[1]->is_str() ? a[1]->text() : "key";
  if (by != "key" && by != "value") return failv("you can only sort by either \"key\" or \"value\"");
  std::vector<JValue> keys, pairs;
  for (const auto& kv : v.m->items) {
    JValue k;
    if (!sort_key(by == "key" ? kv.first : kv.second, nullptr, cs, k)) return JValue();
    keys.push_back(std::move(k));
    pairs.push_back(JValue::list({kv.first, kv.second}, JSeq::tuple));
  }
  std::vector<size_t> idx(keys.size());
  for (size_t k = 0; k < idx.size(); k++) idx[k] = k;
  if (!sort_indices(keys, idx, a[2] && jv_truthy(*a[2]))) return JValue();
  std::vector<JValue> out;
  for (size_t k : idx) out.push_back(pairs[k]);
  return JValue::list(std::move(out));
}
inline JValue JRender::filter_unique(const FilterCall& c) {
  // a generator: duplicates (by the lower-cased key unless case_sensitive) are skipped lazily
  std::vector<const JValue*> a;
  if (!bind(c.args, {"case_sensitive", "attribute"}, a, c.what)) return JValue();
  bool cs = a[0] && jv_truthy(*a[0]);
  JValue attribute = a[1] ? *a[1] : JValue::none();
  Puller src = puller(c.v);
  return make_gen(
      [this, src, cs, attribute, seen = std::vector<JValue>()](JValue& out, bool& done) mutable -> bool {
        for (;;) {
          if (!src(out, done) || done) return !failed_;
          JValue k;
          if (!sort_key(out, &attribute, cs, k)) return false;
          if (k.is_dict() || (k.is_list() && k.l->kind != JSeq::tuple))
            return fail(strf("unhashable type: '%s'", jv_type(k)));
          if (!charge(seen.size() / 8 + 1)) return false;
          bool dup = false;
          for (const auto& x : seen)
            if (py_eq(x, k)) {
              dup = true;
              break;
            }
          if (!dup) {
            seen.push_back(std::move(k));
            return true;
          }
        }
      },
      c.v);
}
inline JValue JRender::filter_sort(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"reverse", "case_sensitive", "attribute"}, a, c.what)) return JValue();
  std::vector<JValue> items, keys;
  if (!iterate(c.v, items)) return JValue();
  for (const auto& it : items) {
    JValue k;
    if (!sort_key(it, a[2], a[1] && jv_truthy(*a[1]), k)) return JValue();
    keys.push_back(std::move(k));
  }
  std::vector<size_t> idx(items.size());
  for (size_t k = 0; k < idx.size(); k++) idx[k] = k;
  if (!sort_indices(keys, idx, a[0] && jv_truthy(*a[0]), true)) return JValue();
  std::vector<JValue> out;
  for (size_t k : idx) out.push_back(items[k]);
  return JValue::list(std::move(out));
}
// min, max
inline JValue JRender::filter_min_max(const FilterCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"case_sensitive", "attribute"}, a, c.what)) return JValue();
  std::vector<JValue> items, keys;
  if (!iterate(c.v, items)) return JValue();
  for (const auto& it : items) {
    JValue k;
    if (!sort_key(it, a[1], a[0] && jv_truthy(*a[0]), k)) return JValue();
    keys.push_back(std::move(k));
  }
  if (items.empty()) return JValue::undefined("no aggregated item, sequence was empty");
  bool min = c.name == "min";
  size_t best = 0;
  for (size_t k = 1; k < items.size(); k++) {
    bool less;
    if (!py_less(min ? keys[k] : keys[best], min ? keys[best] : keys[k], less)) return JValue();
    if (less) best = k;
  }
  return items[best];
}

// ---- filters: generators (as in Jinja2: nothing runs until the result is consumed, a false input
// gives nothing, and an error (a non-iterable input, a failing test) happens when consumed) ----
inline JValue JRender::filter_map(const FilterCall& c) {
  const JArgs& args = c.args;
  Puller src = puller(c.v);
  bool falsy = !jv_truthy(c.v);
  const JValue* attribute = nullptr;
  const JValue* def = nullptr;
  for (const auto& kv : args.kw) {
    if (kv.first == "attribute")
      attribute = &kv.second;
    else if (kv.first == "default")
      def = &kv.second;
  }
  if (attribute && args.pos.empty()) {
    for (const auto& kv : args.kw)
      if (kv.first != "attribute" && kv.first != "default")
        return failv(strf("unexpected keyword argument '%s'", kv.first.c_str()));
    JValue attr = *attribute, dflt = def ? *def : JValue::none();
    return make_gen(
        [this, src, falsy, attr, dflt](JValue& out, bool& done) mutable -> bool {
          if (falsy) return (done = true), true;
          if (!src(out, done) || done) return !failed_;
          out = attr_path(out, attr, &dflt);
          return !failed_;
        },
        c.v);
  }
  if (args.pos.empty()) return failv("map requires a filter argument");
  if (!args.pos[0].is_str()) return failv("map: the filter name must be a string");
  std::string fname = args.pos[0].text();
  JArgs rest;
  rest.pos.assign(args.pos.begin() + 1, args.pos.end());
  rest.kw = args.kw;
  // (the scope weakly: a generator stored in that scope must not keep it alive, a reference cycle;
  // pulled after the scope ended, the filter runs in an empty one)
  std::weak_ptr<JScope> wsc = c.sc;
  return make_gen(
      [this, src, falsy, fname, rest, wsc](JValue& out, bool& done) mutable -> bool {
        if (falsy) return (done = true), true;
        if (!src(out, done) || done) return !failed_;
        if (!jinja_known_filter(fname)) return fail(strf("no filter named '%s'", fname.c_str()));
        auto scope = wsc.lock();
        if (!scope) scope = std::make_shared<JScope>();
        out = apply_filter(fname, out, rest, scope);
        return !failed_;
      },
      c.v);
}
// select, reject, selectattr, rejectattr
inline JValue JRender::filter_select(const FilterCall& c) {
  const JArgs& args = c.args;
  Puller src = puller(c.v);
  bool falsy = !jv_truthy(c.v);
  bool attr = c.name == "selectattr" || c.name == "rejectattr";
  bool keep_if = c.name == "select" || c.name == "selectattr";
  size_t at = 0;
  JValue attrname;
  if (attr) {
    if (args.pos.empty()) return failv(strf("%s needs an attribute name", c.name.c_str()));
    attrname = args.pos[at++];
  }
  std::string test;
  if (at < args.pos.size()) {
    if (!args.pos[at].is_str()) return failv("the test name must be a string");
    test = args.pos[at++].text();
  }
  JArgs targs;
  targs.pos.assign(args.pos.begin() + static_cast<std::ptrdiff_t>(at), args.pos.end());
  targs.kw = args.kw;
  return make_gen(
      [this, src, falsy, attr, attrname, test, targs, keep_if](JValue& out, bool& done) mutable -> bool {
        if (falsy) return (done = true), true;
        if (!test.empty() && !jinja_known_test(test)) return fail(strf("no test named '%s'", test.c_str()));
        for (;;) {
          if (!src(out, done) || done) return !failed_;
          if (!charge()) return false;
          JValue x = out;
          if (attr) {
            x = attr_path(out, attrname, nullptr);
            if (failed_) return false;
          }
          bool r;
          if (test.empty()) {
            r = jv_truthy(x);
          } else if (!run_test(test, x, targs, r)) {
            return false;
          }
          if (r == keep_if) return true;
        }
      },
      c.v);
}

// ---- tests ----
inline JValue JRender::eval_test(const JNode* n, const SP& sc) {
  JValue v = eval(n->a, sc);
  if (failed_) return JValue();
  JArgs args;
  if (!eval_args(n, sc, args)) return JValue();
  pos_ = n->pos;
  if (n->flag) return failv(strf("no test named '%s'", n->str.c_str()));
  bool r;
  if (!run_test(n->str, v, args, r)) return JValue();
  return JValue::boolean(r);
}

// A test is found by name in a sorted table. Jinja2's tests are plain functions: the value plus at
// most the one argument they declare (`args`). A test of the value's type alone is a predicate
// (`is`); the others (`fn`) may scan their operands, which costs steps first.
inline bool JRender::run_test(const std::string& name, const JValue& v, const JArgs& args, bool& r) {
  using T = JValue::T;
  struct Def {
    std::string_view name;
    bool (*is)(const JValue&);
    bool (JRender::*fn)(const TestCall&, bool&);
    size_t args;
  };
  static constexpr Def table[] = {
      {"!=", nullptr, &JRender::test_compare, 1},
      {"<", nullptr, &JRender::test_compare, 1},
      {"<=", nullptr, &JRender::test_compare, 1},
      {"==", nullptr, &JRender::test_compare, 1},
      {">", nullptr, &JRender::test_compare, 1},
      {">=", nullptr, &JRender::test_compare, 1},
      {"boolean", [](const JValue& x) { return x.t == T::boolean; }, nullptr, 0},
      {"callable", [](const JValue& x) { return x.t == T::func || x.is_undef() || x.t == T::loop; }, nullptr, 0},
      {"defined", [](const JValue& x) { return !x.is_undef(); }, nullptr, 0},
      {"divisibleby", nullptr, &JRender::test_divisible, 1},
      {"eq", nullptr, &JRender::test_compare, 1},
      {"equalto", nullptr, &JRender::test_compare, 1},
      {"escaped", [](const JValue& x) { return jv_is_markup(x); }, nullptr, 0},
      {"even", nullptr, &JRender::test_divisible, 0},
      {"false", [](const JValue& x) { return x.t == T::boolean && !x.b; }, nullptr, 0},
      {"filter", [](const JValue& x) { return x.is_str() && jinja_known_filter(x.text()); }, nullptr, 0},
      {"float", [](const JValue& x) { return x.t == T::real; }, nullptr, 0},
      {"ge", nullptr, &JRender::test_compare, 1},
      {"greaterthan", nullptr, &JRender::test_compare, 1},
      {"gt", nullptr, &JRender::test_compare, 1},
      {"in", nullptr, &JRender::test_compare, 1},
      {"integer", [](const JValue& x) { return x.t == T::integer; }, nullptr, 0},
      {"iterable",
       [](const JValue& x) { return x.is_str() || x.is_list() || x.is_dict() || x.is_undef() || x.t == T::loop; },
       nullptr, 0},
      {"le", nullptr, &JRender::test_compare, 1},
      {"lessthan", nullptr, &JRender::test_compare, 1},
      {"lower", nullptr, &JRender::test_case, 0},
      {"lt", nullptr, &JRender::test_compare, 1},
      {"mapping", [](const JValue& x) { return x.is_dict(); }, nullptr, 0},
      {"ne", nullptr, &JRender::test_compare, 1},
      {"none", [](const JValue& x) { return x.is_none(); }, nullptr, 0},
      {"number", [](const JValue& x) { return x.is_num(); }, nullptr, 0},
      {"odd", nullptr, &JRender::test_divisible, 0},
      {"sameas", nullptr, &JRender::test_sameas, 1},
      {"sequence",
       [](const JValue& x) {
         return x.is_str() || x.is_dict() || x.is_undef() ||
                (x.is_list() && (x.l->kind == JSeq::list || x.l->kind == JSeq::tuple || x.l->kind == JSeq::range));
       },
       nullptr, 0},
      {"string", [](const JValue& x) { return x.is_str(); }, nullptr, 0},
      {"test", [](const JValue& x) { return x.is_str() && jinja_known_test(x.text()); }, nullptr, 0},
      {"true", [](const JValue& x) { return x.t == T::boolean && x.b; }, nullptr, 0},
      {"undefined", [](const JValue& x) { return x.is_undef(); }, nullptr, 0},
      {"upper", nullptr, &JRender::test_case, 0},
  };
  static_assert(jtable_sorted(table), "the test table must be sorted by name");
  r = false;
  const Def* d = jtable_find(table, name);
  size_t max_args = d ? d->args : 0, given = args.pos.size() + args.kw.size();
  if (given > max_args)
    return fail(strf("test '%s' takes %zu argument%s but %zu were given", name.c_str(), max_args + 1,
                     max_args ? "s" : "", given + 1));
  if (d && d->is) return (r = d->is(v)), true;
  if (!charge_scan(v, args)) return false;
  if (!d) return fail(strf("no test named '%s'", name.c_str()));
  const JValue* arg = args.pos.empty() ? (args.kw.empty() ? nullptr : &args.kw[0].second) : &args.pos[0];
  return (this->*d->fn)(TestCall{name, v, arg}, r);
}

// The argument of a test that needs one.
inline bool JRender::test_arg(const TestCall& c) {
  if (!c.arg) return fail(strf("test '%s' needs an argument", c.name.c_str()));
  return true;
}
// odd, even, divisibleby
inline bool JRender::test_divisible(const TestCall& c, bool& r) {
  JValue d = c.name == "divisibleby" ? (test_arg(c) ? *c.arg : JValue()) : JValue::integer(2);
  if (failed_) return false;
  JValue m = binop(BinOp::mod, c.v, d);
  if (failed_) return false;
  r = py_eq(m, JValue::integer(c.name == "odd" ? 1 : 0));
  return true;
}
// lower, upper: str.islower() / str.isupper(), some cased character and none of the other case
// or titlecase
inline bool JRender::test_case(const TestCall& c, bool& r) {
  PText t;
  if (!to_str(c.v, t)) return false;
  bool lower = c.name == "lower", cased = false, ok = true;
  size_t i = 0;
  while (i < t.s.size() && ok) {
    uint32_t ch = jcp_next(t.s, i);
    bool other = lower ? jcase_is_upper(ch) : jcase_is_lower(ch);
    if (other || jcase_is_title(ch))
      ok = false;
    else if (lower ? jcase_is_lower(ch) : jcase_is_upper(ch))
      cased = true;
  }
  r = ok && cased;
  return true;
}
inline bool JRender::test_sameas(const TestCall& c, bool& r) {
  using T = JValue::T;
  if (!test_arg(c)) return false;
  const JValue& v = c.v;
  const JValue& o = *c.arg;
  if (v.t != o.t) return (r = false), true;
  switch (v.t) {
    case T::none:
    case T::undef: r = true; break;
    case T::boolean: r = v.b == o.b; break;
    case T::integer: r = v.i == o.i && v.i >= -5 && v.i <= 256; break;  // CPython's small-int cache
    case T::string: r = v.s == o.s; break;
    case T::list: r = v.l == o.l; break;
    case T::dict:
    case T::ns: r = v.m == o.m; break;
    case T::func: r = v.f == o.f; break;
    case T::loop: r = v.lp == o.lp; break;
    default: r = false;
  }
  return true;
}
// eq, equalto, ==, ne, !=, lt, lessthan, <, le, <=, gt, greaterthan, >, ge, >=, in
inline bool JRender::test_compare(const TestCall& c, bool& r) {
  const std::string& name = c.name;
  CmpOp op;
  if (name == "eq" || name == "equalto" || name == "==")
    op = CmpOp::eq;
  else if (name == "ne" || name == "!=")
    op = CmpOp::ne;
  else if (name == "lt" || name == "lessthan" || name == "<")
    op = CmpOp::lt;
  else if (name == "le" || name == "<=")
    op = CmpOp::le;
  else if (name == "gt" || name == "greaterthan" || name == ">")
    op = CmpOp::gt;
  else if (name == "ge" || name == ">=")
    op = CmpOp::ge;
  else
    op = CmpOp::in;
  if (!test_arg(c)) return false;
  return compare(op, c.v, *c.arg, r);
}

// ---- attribute paths for map/selectattr/sort (Jinja2's make_attrgetter: "a.b.0") ----
inline JValue JRender::attr_path(const JValue& item, const JValue& path, const JValue* def) {
  JValue cur = item;
  if (path.is_str()) {
    const std::string& p = path.text();
    size_t b = 0;
    for (;;) {
      size_t e = p.find('.', b);
      std::string part = p.substr(b, e == std::string::npos ? std::string::npos : e - b);
      int64_t idx = 0;
      auto r = std::from_chars(part.data(), part.data() + part.size(), idx);
      if (!part.empty() && r.ec == std::errc() && r.ptr == part.data() + part.size()) {
        cur = get_item(cur, JValue::integer(idx));
      } else {
        cur = get_item(cur, JValue::str(part));
      }
      if (failed_) return JValue();
      if (def && !def->is_none() && cur.is_undef()) cur = *def;
      if (e == std::string::npos) break;
      b = e + 1;
    }
  } else {
    cur = get_item(cur, path);
    if (failed_) return JValue();
    if (def && !def->is_none() && cur.is_undef()) cur = *def;
  }
  return cur;
}

// ---- number parsing as Python's int() / float() on strings ----
inline bool JRender::parse_py_int(std::string_view s, int base, int64_t& out) {
  PText t(std::string{s});
  PText st = jstrip(t, nullptr, true, true);
  std::string x;
  for (size_t k = 0; k < st.s.size(); k++) {
    char c = st.s[k];
    if (c == '_') {
      if (k == 0 || k + 1 >= st.s.size() || st.s[k + 1] == '_') return false;
      continue;
    }
    x += c;
  }
  bool neg = false;
  size_t p = 0;
  if (p < x.size() && (x[p] == '+' || x[p] == '-')) neg = x[p++] == '-';
  if (base == 0) {
    base = 10;
    if (x.size() > p + 1 && x[p] == '0') {
      char c = static_cast<char>(x[p + 1] | 0x20);
      if (c == 'x')
        base = 16;
      else if (c == 'o')
        base = 8;
      else if (c == 'b')
        base = 2;
      if (base != 10) p += 2;
    }
  } else if (x.size() > p + 1 && x[p] == '0') {
    char c = static_cast<char>(x[p + 1] | 0x20);
    if ((base == 16 && c == 'x') || (base == 8 && c == 'o') || (base == 2 && c == 'b')) p += 2;
  }
  if (base < 2 || base > 36 || p >= x.size()) return false;
  uint64_t v = 0;
  auto r = std::from_chars(x.data() + p, x.data() + x.size(), v, base);
  if (r.ec != std::errc() || r.ptr != x.data() + x.size()) return false;
  if (v > static_cast<uint64_t>(INT64_MAX) + (neg ? 1u : 0u)) return false;
  out = neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}
inline bool JRender::parse_py_float(std::string_view s, double& out) {
  PText t(std::string{s});
  PText st = jstrip(t, nullptr, true, true);
  std::string x;
  for (size_t k = 0; k < st.s.size(); k++) {
    char c = st.s[k];
    if (c == '_') {
      if (k == 0 || k + 1 >= st.s.size() || !std::isdigit(static_cast<unsigned char>(st.s[k - 1])) ||
          !std::isdigit(static_cast<unsigned char>(st.s[k + 1])))
        return false;
      continue;
    }
    x += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  size_t p = (!x.empty() && (x[0] == '+' || x[0] == '-')) ? 1 : 0;
  bool neg = !x.empty() && x[0] == '-';
  std::string body = x.substr(p);
  if (body == "inf" || body == "infinity") {
    out = neg ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  if (body == "nan") {
    out = std::nan("");
    return true;
  }
  if (body.empty() || body.find_first_not_of("0123456789.e+-") != std::string::npos) return false;
  double v = 0;
  auto r = std::from_chars(x.data() + (x[0] == '+' ? 1 : 0), x.data() + x.size(), v);
  if (r.ptr != x.data() + x.size()) return false;
  if (r.ec == std::errc::result_out_of_range)
    v = (x.find("e-") != std::string::npos) ? 0.0 : (neg ? -HUGE_VAL : HUGE_VAL);
  else if (r.ec != std::errc())
    return false;
  out = v;
  return true;
}

// ---- methods of str, dict, list ----
// get_attr binds only the methods named there (is_str_method, the dict and list ones); a str
// method is found by name in a sorted table, and one of them that is not in it is an error that
// names it.
inline JValue JRender::call_method(const JValue& self, const std::string& name, const JArgs& args) {
  struct Def {
    std::string_view name;
    JValue (JRender::*fn)(const StrCall&);
  };
  static constexpr Def table[] = {
      {"capitalize", &JRender::str_case},
      {"casefold", &JRender::str_case},
      {"center", &JRender::str_justify},
      {"count", &JRender::str_find},
      {"endswith", &JRender::str_starts_ends},
      {"find", &JRender::str_find},
      {"format", &JRender::str_format},
      {"index", &JRender::str_find},
      {"isalnum", &JRender::str_is},
      {"isalpha", &JRender::str_is},
      {"isascii", &JRender::str_is},
      {"isdecimal", &JRender::str_is},
      {"isdigit", &JRender::str_is},
      {"islower", &JRender::str_is},
      {"isnumeric", &JRender::str_is},
      {"isspace", &JRender::str_is},
      {"istitle", &JRender::str_is},
      {"isupper", &JRender::str_is},
      {"join", &JRender::str_join},
      {"ljust", &JRender::str_justify},
      {"lower", &JRender::str_case},
      {"lstrip", &JRender::str_strip},
      {"partition", &JRender::str_partition},
      {"removeprefix", &JRender::str_remove_fix},
      {"removesuffix", &JRender::str_remove_fix},
      {"replace", &JRender::str_replace},
      {"rfind", &JRender::str_find},
      {"rindex", &JRender::str_find},
      {"rjust", &JRender::str_justify},
      {"rpartition", &JRender::str_partition},
      {"rsplit", &JRender::str_split},
      {"rstrip", &JRender::str_strip},
      {"split", &JRender::str_split},
      {"splitlines", &JRender::str_splitlines},
      {"startswith", &JRender::str_starts_ends},
      {"strip", &JRender::str_strip},
      {"swapcase", &JRender::str_case},
      {"title", &JRender::str_case},
      {"upper", &JRender::str_case},
      {"zfill", &JRender::str_justify},
  };
  static_assert(jtable_sorted(table), "the str method table must be sorted by name");
  if (!charge_scan(self, args)) return JValue();
  std::string what = std::string(jv_type(self)) + "." + name + "()";
  if (self.is_dict()) return dict_method(self, name, args, what);
  if (self.is_list()) return list_method(self, name, args, what);
  if (!self.is_str()) return failv(strf("unsupported construct: method '%s' of '%s'", name.c_str(), jv_type(self)));
  const Def* d = jtable_find(table, name);
  if (!d) return failv(strf("unsupported construct: the string method '%s'", name.c_str()));
  return (this->*d->fn)(StrCall{self, *self.s, name, args, what});
}

// dict.get, copy, items, keys, values
inline JValue JRender::dict_method(const JValue& self, const std::string& name, const JArgs& args,
                                   const std::string& what) {
  std::vector<const JValue*> a;
  if (name == "get") {
    if (!bind(args, {"key", "default"}, a, what)) return JValue();
    if (!a[0]) return failv("get expected at least 1 argument, got 0");
    if (const JValue* x = dict_find(*self.m, *a[0])) return *x;
    return a[1] ? *a[1] : JValue::none();
  }
  if (!bind(args, {}, a, what)) return JValue();
  if (name == "copy") {
    JValue d;
    d.t = JValue::T::dict;
    d.m = std::make_shared<JDict>(*self.m);
    return d;
  }
  std::vector<JValue> out;
  JSeq kind = name == "items" ? JSeq::dict_items : name == "keys" ? JSeq::dict_keys : JSeq::dict_values;
  for (const auto& kv : self.m->items) {
    if (name == "items")
      out.push_back(JValue::list({kv.first, kv.second}, JSeq::tuple));
    else
      out.push_back(name == "keys" ? kv.first : kv.second);
  }
  return JValue::list(std::move(out), kind);
}
// list.copy, index, count (and tuple.index, count)
inline JValue JRender::list_method(const JValue& self, const std::string& name, const JArgs& args,
                                   const std::string& what) {
  std::vector<const JValue*> a;
  if (name == "copy") {
    if (!bind(args, {}, a, what)) return JValue();
    return JValue::list(self.l->items);
  }
  if (!bind(args, {"value"}, a, what)) return JValue();
  if (!a[0]) return failv(what + " takes exactly one argument");
  int64_t count = 0;
  for (size_t k = 0; k < self.l->items.size(); k++) {
    if (py_eq(self.l->items[k], *a[0])) {
      if (name == "index") return JValue::integer(static_cast<int64_t>(k));
      count++;
    }
  }
  if (name == "index") return failv("list.index(x): x not in list");
  return JValue::integer(count);
}

// A str argument of a str method, or the error Python gives.
inline bool JRender::str_arg(const StrCall& c, const JValue* x, const char* pname, std::string& out) {
  if (!x || !x->is_str())
    return fail(strf("%s: argument '%s' must be a str, not %s", c.what.c_str(), pname, x ? jv_type(*x) : "nothing"));
  out = x->text();
  return true;
}
// strip, lstrip, rstrip
inline JValue JRender::str_strip(const StrCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"chars"}, a, c.what)) return JValue();
  std::string chars;
  bool have = a[0] && !a[0]->is_none();
  if (have && !str_arg(c, a[0], "chars", chars)) return JValue();
  return c.ret(jstrip(c.s, have ? &chars : nullptr, c.name != "rstrip", c.name != "lstrip"));
}
// startswith, endswith
inline JValue JRender::str_starts_ends(const StrCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"prefix", "start", "end"}, a, c.what)) return JValue();
  if (!a[0]) return failv(c.what + " takes at least 1 argument");
  if ((a[1] && !a[1]->is_none()) || (a[2] && !a[2]->is_none()))
    return failv("unsupported construct: start/end arguments of " + c.what);
  std::vector<JValue> cands;
  if (a[0]->is_str()) {
    cands.push_back(*a[0]);
  } else if (a[0]->is_list() && a[0]->l->kind == JSeq::tuple) {
    cands = a[0]->l->items;
  } else {
    return failv(strf("%s first arg must be str or a tuple of str, not %s", c.what.c_str(), jv_type(*a[0])));
  }
  const std::string& s = c.s.s;
  for (const auto& x : cands) {
    if (!x.is_str()) return failv(c.what + ": tuple for startswith/endswith must only contain str");
    const std::string& p = x.text();
    bool hit = c.name == "startswith" ? s.compare(0, p.size(), p) == 0 && s.size() >= p.size()
                                      : s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
    if (hit) return JValue::boolean(true);
  }
  return JValue::boolean(false);
}
// str.split() / rsplit() without a separator: runs of whitespace, no empty strings; at most
// maxsplit splits (-1: no limit) from the left or the right, the rest one piece with its
// whitespace stripped on the outer side only.
inline std::vector<PText> jsplit_space(const PText& s, int64_t maxsplit, bool right) {
  std::vector<std::pair<size_t, size_t>> words;
  size_t i = 0;
  while (i < s.s.size()) {
    size_t b = i;
    uint32_t c = jcp_next(s.s, i);
    if (jis_space(c)) continue;
    size_t e = i;
    while (e < s.s.size()) {
      size_t q = e;
      if (jis_space(jcp_next(s.s, q))) break;
      e = q;
    }
    words.emplace_back(b, e);
    i = e;
  }
  std::vector<PText> parts;
  if (maxsplit < 0 || static_cast<size_t>(maxsplit) >= words.size()) {
    for (auto& w : words) parts.push_back(jsub(s, w.first, w.second));
  } else if (!right) {
    for (int64_t k = 0; k < maxsplit; k++)
      parts.push_back(jsub(s, words[static_cast<size_t>(k)].first, words[static_cast<size_t>(k)].second));
    parts.push_back(jstrip(jsub(s, words[static_cast<size_t>(maxsplit)].first, s.s.size()), nullptr, false, true));
  } else {
    size_t first = words.size() - static_cast<size_t>(maxsplit);
    parts.push_back(jstrip(jsub(s, 0, words[first - 1].second), nullptr, true, false));
    for (size_t k = first; k < words.size(); k++) parts.push_back(jsub(s, words[k].first, words[k].second));
  }
  return parts;
}
// str.split(sep) / rsplit(sep): at most maxsplit splits (-1: no limit) from the left or the right.
inline std::vector<PText> jsplit_sep(const PText& s, const std::string& sep, int64_t maxsplit, bool right) {
  std::vector<size_t> hits;
  if (!right) {
    size_t p = 0;
    while ((maxsplit < 0 || static_cast<int64_t>(hits.size()) < maxsplit) &&
           (p = s.s.find(sep, p)) != std::string::npos) {
      hits.push_back(p);
      p += sep.size();
    }
  } else {
    size_t p = s.s.size();
    while ((maxsplit < 0 || static_cast<int64_t>(hits.size()) < maxsplit) && p >= sep.size()) {
      size_t q = s.s.rfind(sep, p - sep.size());
      if (q == std::string::npos) break;
      hits.push_back(q);
      p = q;
    }
    std::reverse(hits.begin(), hits.end());
  }
  std::vector<PText> parts;
  size_t b = 0;
  for (size_t h : hits) {
    parts.push_back(jsub(s, b, h));
    b = h + sep.size();
  }
  parts.push_back(jsub(s, b, s.s.size()));
  return parts;
}
// split, rsplit
inline JValue JRender::str_split(const StrCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"sep", "maxsplit"}, a, c.what)) return JValue();
  int64_t maxsplit = -1;
  if (a[1] && !as_int(*a[1], maxsplit)) return failv("maxsplit must be an integer");
  std::vector<PText> parts;
  bool right = c.name == "rsplit";
  if (!a[0] || a[0]->is_none()) {
    parts = jsplit_space(c.s, maxsplit, right);
  } else {
    std::string sep;
    if (!str_arg(c, a[0], "sep", sep)) return JValue();
    if (sep.empty()) return failv("empty separator");
    parts = jsplit_sep(c.s, sep, maxsplit, right);
  }
  if (!charge_list(parts.size())) return JValue();
  std::vector<JValue> out;
  for (auto& p : parts) out.push_back(c.ret(std::move(p)));
  return JValue::list(std::move(out));
}
inline JValue JRender::str_replace(const StrCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"old", "new", "count"}, a, c.what)) return JValue();
  const PText& s = c.s;
  std::string old;
  if (!str_arg(c, a[0], "old", old) || !a[1] || !a[1]->is_str()) {
    if (!failed_) fail(c.what + ": new must be a str");
    return JValue();
  }
  int64_t count = -1;
  if (a[2] && !as_int(*a[2], count)) return failv("count must be an integer");
  const PText& nw = *a[1]->s;
  PText out;
  int64_t done = 0;
  if (old.empty()) {
    // inserts `new` before every code point and at the end
    size_t i = 0;
    while (count < 0 || done < count) {
      out.add(nw);
      done++;
      if (i >= s.s.size()) break;
      size_t b = i;
      jcp_next(s.s, i);
      out.add_range(s, b, i);
      if (!check_len(out.s.size())) return JValue();
    }
    out.add_range(s, i, s.s.size());
    return c.ret(std::move(out));
  }
  size_t b = 0, p;
  while ((count < 0 || done < count) && (p = s.s.find(old, b)) != std::string::npos) {
    out.add_range(s, b, p);
    out.add(nw);
    if (!check_len(out.s.size())) return JValue();
    b = p + old.size();
    done++;
  }
  out.add_range(s, b, s.s.size());
  if (!charge_str(out.s.size())) return JValue();
  return c.ret(std::move(out));
}
// upper, lower, title, capitalize, swapcase, casefold
inline JValue JRender::str_case(const StrCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {}, a, c.what)) return JValue();
  const std::string& name = c.name;
  if (name == "casefold" && !jis_ascii(c.s.s)) return failv("unsupported construct: str.casefold() on non-ASCII text");
  JCase mode = name == "upper"                           ? JCase::upper
               : (name == "lower" || name == "casefold") ? JCase::lower
               : name == "title"                         ? JCase::title_method
               : name == "capitalize"                    ? JCase::capitalize
                                                         : JCase::swapcase;
  PText out;
  jcase(c.s, mode, out);
  if (!charge_str(out.s.size())) return JValue();
  return c.ret(std::move(out));
}
// find, rfind, index, rindex, count
inline JValue JRender::str_find(const StrCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"sub", "start", "end"}, a, c.what)) return JValue();
  const std::string& s = c.s.s;
  const std::string& name = c.name;
  std::string sub;
  if (!str_arg(c, a[0], "sub", sub)) return JValue();
  if ((a[1] && !a[1]->is_none()) || (a[2] && !a[2]->is_none()))
    return failv("unsupported construct: start/end arguments of " + c.what);
  if (name == "count") {
    if (sub.empty()) return JValue::integer(static_cast<int64_t>(jcp_count(s)) + 1);
    int64_t n = 0;
    size_t p = 0;
    while ((p = s.find(sub, p)) != std::string::npos) {
      n++;
      p += sub.size();
    }
    return JValue::integer(n);
  }
  size_t p = (name == "find" || name == "index") ? s.find(sub) : s.rfind(sub);
  if (p == std::string::npos) {
    if (name == "index" || name == "rindex") return failv("substring not found");
    return JValue::integer(-1);
  }
  return JValue::integer(static_cast<int64_t>(jcp_count(std::string_view(s).substr(0, p))));
}
inline JValue JRender::str_join(const StrCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"iterable"}, a, c.what)) return JValue();
  if (!a[0]) return failv("join() takes exactly one argument");
  std::vector<JValue> items;
  if (!iterate(*a[0], items)) return JValue();
  PText out;
  for (size_t k = 0; k < items.size(); k++) {
    if (!items[k].is_str())
      return failv(strf("sequence item %zu: expected str instance, %s found", k, jv_type(items[k])));
    if (k) out.add(c.s);
    if (c.self.b && !jv_is_markup(items[k]))
      html_escape(out, *items[k].s);
    else
      out.add(*items[k].s);
    if (!check_len(out.s.size())) return JValue();
  }
  if (!charge_str(out.s.size())) return JValue();
  return c.ret(std::move(out));
}
inline JValue JRender::str_splitlines(const StrCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"keepends"}, a, c.what)) return JValue();
  std::vector<JValue> out;
  for (auto& p : jsplitlines(c.s, a[0] && jv_truthy(*a[0]))) out.push_back(c.ret(std::move(p)));
  return JValue::list(std::move(out));
}
// partition, rpartition
inline JValue JRender::str_partition(const StrCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"sep"}, a, c.what)) return JValue();
  const PText& s = c.s;
  std::string sep;
  if (!str_arg(c, a[0], "sep", sep)) return JValue();
  if (sep.empty()) return failv("empty separator");
  size_t p = c.name == "partition" ? s.s.find(sep) : s.s.rfind(sep);
  if (p == std::string::npos) {
    if (c.name == "partition") return JValue::list({c.self, c.ret(PText()), c.ret(PText())}, JSeq::tuple);
    return JValue::list({c.ret(PText()), c.ret(PText()), c.self}, JSeq::tuple);
  }
  return JValue::list(
      {c.ret(jsub(s, 0, p)), c.ret(jsub(s, p, p + sep.size())), c.ret(jsub(s, p + sep.size(), s.s.size()))},
      JSeq::tuple);
}
// removeprefix, removesuffix
inline JValue JRender::str_remove_fix(const StrCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {"fix"}, a, c.what)) return JValue();
  const PText& s = c.s;
  std::string fix;
  if (!str_arg(c, a[0], "fix", fix)) return JValue();
  if (c.name == "removeprefix" && s.s.compare(0, fix.size(), fix) == 0 && s.s.size() >= fix.size())
    return c.ret(jsub(s, fix.size(), s.s.size()));
  if (c.name == "removesuffix" && !fix.empty() && s.s.size() >= fix.size() &&
      s.s.compare(s.s.size() - fix.size(), fix.size(), fix) == 0)
    return c.ret(jsub(s, 0, s.s.size() - fix.size()));
  return c.self;
}
// ljust, rjust, center, zfill
inline JValue JRender::str_justify(const StrCall& c) {
  const std::string& name = c.name;
  std::vector<const JValue*> a;
  if (!bind(c.args,
            name == "zfill" ? std::initializer_list<const char*>{"width"}
                            : std::initializer_list<const char*>{"width", "fillchar"},
            a, c.what))
    return JValue();
  const PText& s = c.s;
  int64_t width;
  if (!a[0] || !as_int(*a[0], width)) return failv(c.what + ": width must be an integer");
  std::string fill = " ";
  if (name != "zfill" && a.size() > 1 && a[1]) {
    if (!a[1]->is_str() || jcp_count(a[1]->text()) != 1)
      return failv("The fill character must be exactly one character long");
    fill = a[1]->text();
  }
  int64_t len = static_cast<int64_t>(jcp_count(s.s));
  if (width <= len) return c.self;
  if (!check_len(static_cast<size_t>(width) * fill.size())) return JValue();
  size_t pad = static_cast<size_t>(width - len);
  size_t left = 0;
  if (name == "rjust")
    left = pad;
  else if (name == "center")
    left = pad / 2 + (pad & static_cast<size_t>(width) & 1);
  PText out;
  if (name == "zfill") {
    size_t sign = (!s.s.empty() && (s.s[0] == '+' || s.s[0] == '-')) ? 1 : 0;
    out.add_range(s, 0, sign);
    out.add(std::string(pad, '0'));
    out.add_range(s, sign, s.s.size());
    return c.ret(std::move(out));
  }
  for (size_t k = 0; k < left; k++) out.add(fill);
  out.add(s);
  for (size_t k = left; k < pad; k++) out.add(fill);
  return c.ret(std::move(out));
}
// Python's str.istitle(): uppercase (or titlecase) characters only after uncased ones, lowercase
// ones only after cased ones, and some cased character.
inline bool jis_title(const std::string& s) {
  bool cased = false, prev = false;
  size_t i = 0;
  while (i < s.size()) {
    uint32_t c = jcp_next(s, i);
    if (jcase_is_upper(c) || jcase_is_title(c)) {
      if (prev) return false;
      prev = cased = true;
    } else if (jcase_is_lower(c)) {
      if (!prev) return false;
      prev = cased = true;
    } else {
      prev = false;
    }
  }
  return cased;
}
// isdigit, isdecimal, isnumeric, isalpha, isalnum, isspace, islower, isupper, isascii, istitle
inline JValue JRender::str_is(const StrCall& c) {
  std::vector<const JValue*> a;
  if (!bind(c.args, {}, a, c.what)) return JValue();
  const std::string& name = c.name;
  const std::string& s = c.s.s;
  if (name == "isascii") return JValue::boolean(jis_ascii(s));
  if (s.empty()) return JValue::boolean(false);
  if (name == "islower" || name == "isupper") {
    bool r;
    JArgs none;
    if (!run_test(name == "islower" ? "lower" : "upper", c.self, none, r)) return JValue();
    return JValue::boolean(r);
  }
  if (name == "istitle") return JValue::boolean(jis_title(s));
  bool all = true;
  size_t i = 0;
  while (i < s.size() && all) {
    uint32_t ch = jcp_next(s, i);
    if (name == "isspace")
      all = jis_space(ch);
    else if (name == "isalpha")
      all = jis_alpha(ch);
    else if (name == "isalnum")
      all = jis_alnum(ch);
    else if (name == "isdecimal")
      all = jis_decimal(ch);
    else if (name == "isdigit")
      all = jis_digit(ch);
    else
      all = jis_numeric(ch);  // isnumeric
  }
  return JValue::boolean(all);
}

// ---- "%" formatting (printf style, as Python's str % args) ----
inline JValue JRender::percent_format(const JValue& fmtv, const JValue& argv) {
  const PText& fmt = *fmtv.s;
  bool mk = fmtv.b;
  std::vector<JValue> args;
  const JDict* mapping = nullptr;
  // Python: a tuple gives the arguments; anything else is one argument, and a mapping-like one
  // (a dict, also a list) is never "not all converted"
  bool mapping_like = argv.is_dict() || argv.is_undef() || (argv.is_list() && argv.l->kind != JSeq::tuple);
  if (argv.is_list() && argv.l->kind == JSeq::tuple)
    args = argv.l->items;
  else if (argv.is_dict())
    mapping = argv.m.get();
  else
    args.push_back(argv);
  size_t next = 0;
  PText out;
  size_t i = 0;
  while (i < fmt.s.size()) {
    size_t pct = fmt.s.find('%', i);
    if (pct == std::string::npos) {
      out.add_range(fmt, i, fmt.s.size());
      break;
    }
    out.add_range(fmt, i, pct);
    size_t p = pct + 1;
    if (p >= fmt.s.size()) return failv("incomplete format");
    const JValue* arg = nullptr;
    if (fmt.s[p] == '(') {
      size_t close = fmt.s.find(')', p);
      if (close == std::string::npos || !mapping) return failv("format requires a mapping");
      const JValue* x = mapping->find(std::string_view(fmt.s).substr(p + 1, close - p - 1));
      if (!x) return failv("KeyError in % formatting");
      arg = x;
      p = close + 1;
    }
    PctSpec sp;
    if (!percent_spec(fmt.s, p, sp)) return JValue();
    i = p;
    if (sp.conv == '%') {
      out.add("%");
      continue;
    }
    if (!arg) {
      if (mapping) {
        arg = &argv;  // "%s" % {"a": 1} formats the dict itself
      } else {
        if (next >= args.size()) return failv("not enough arguments for format string");
        arg = &args[next++];
      }
    }
    PText piece;
    if (sp.conv == 's' || sp.conv == 'r' || sp.conv == 'a') {
      if (!percent_str(sp, *arg, mk, piece)) return JValue();
    } else if (std::strchr("diouxXeEfFgGc", sp.conv)) {
      if (!percent_num(sp, *arg, piece)) return JValue();
    } else {
      return failv(strf("unsupported format character '%c'", sp.conv));
    }
    out.add(piece);
    if (!check_len(out.s.size())) return JValue();
  }
  if (!mapping && !mapping_like && next < args.size())
    return failv("not all arguments converted during string formatting");
  if (!charge_str(out.s.size())) return JValue();
  return mk ? jv_markup(std::move(out)) : JValue::str(std::move(out));
}
// The rest of a conversion after "%" and "(key)": [flags][width][.precision]type; p moves past it.
inline bool JRender::percent_spec(const std::string& fmt, size_t& p, PctSpec& sp) {
  while (p < fmt.size() && std::strchr("-+ #0", fmt[p]) && fmt[p]) sp.flags += fmt[p++];
  while (p < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[p]))) sp.width += fmt[p++];
  if (p < fmt.size() && fmt[p] == '.') {
    sp.has_prec = true;
    p++;
    while (p < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[p]))) sp.prec += fmt[p++];
  }
  if (sp.width.size() > 6 || sp.prec.size() > 6) return fail("format width or precision too large");
  if (p >= fmt.size()) return fail("incomplete format");
  sp.conv = fmt[p++];
  return true;
}
// %s, %r, %a: str() or repr(), escaped into a Markup format, cut to the precision, padded to the width
inline bool JRender::percent_str(const PctSpec& sp, const JValue& arg, bool mk, PText& piece) {
  PText t;
  if (sp.conv == 's' ? !to_str(arg, t) : !repr(arg, t)) return false;
  if (mk && !jv_is_markup(arg)) {
    PText e;
    html_escape(e, t);
    t = std::move(e);
  }
  if (sp.has_prec) {
    int64_t n = 0;
    std::from_chars(sp.prec.data(), sp.prec.data() + sp.prec.size(), n);
    std::vector<size_t> off = jcp_offsets(t.s);
    if (static_cast<size_t>(n) + 1 < off.size()) t = jsub(t, 0, off[static_cast<size_t>(n)]);
  }
  int64_t w = 0;
  if (!sp.width.empty()) std::from_chars(sp.width.data(), sp.width.data() + sp.width.size(), w);
  int64_t len = static_cast<int64_t>(jcp_count(t.s));
  bool left = sp.flags.find('-') != std::string::npos;
  if (!left)
    for (int64_t k = len; k < w; k++) piece.add(" ");
  piece.add(t);
  if (left)
    for (int64_t k = len; k < w; k++) piece.add(" ");
  return true;
}
// %d %i %o %u %x %X %e %E %f %F %g %G %c: C's printf with Python's differences (0o, inf, nan)
inline bool JRender::percent_num(const PctSpec& sp, const JValue& arg, PText& piece) {
  char conv = sp.conv;
  const std::string& flags = sp.flags;
  if (!arg.is_num()) return fail(strf("%%%c format: a real number is required, not %s", conv, jv_type(arg)));
  std::string spec = "%" + flags + sp.width + (sp.has_prec ? "." + sp.prec : "");
  int64_t iv;
  bool is_int = as_int(arg, iv);
  if (std::strchr("diouxX", conv)) {
    if (!is_int) {
      if (conv != 'd' && conv != 'i' && conv != 'u')
        return fail(strf("%%%c format: an integer is required, not float", conv));
      if (!std::isfinite(arg.d) || std::fabs(arg.d) >= 9.2e18) return fail("cannot convert float to integer");
      iv = static_cast<int64_t>(arg.d);
    }
    char c = conv == 'i' || conv == 'u' ? 'd' : conv;
    piece.add(strf((spec + "ll" + c).c_str(), static_cast<long long>(iv)));
    if (conv == 'o' && flags.find('#') != std::string::npos) {
      // Python writes 0o17 where C writes 017
      std::string& t = piece.s;
      size_t z = t.find('0');
      if (z != std::string::npos) t.insert(z + 1, "o");
    }
  } else if (conv == 'c') {
    if (!is_int || iv < 0 || iv > 0x10FFFF) return fail("%c requires an int in range(0x110000) or a char");
    std::string ch;
    utf8_append(ch, static_cast<uint32_t>(iv));
    piece.add(ch);
  } else {
    double d = as_double(arg);
    if (!std::isfinite(d)) {
      std::string t =
          std::isnan(d) ? "nan" : (d < 0 ? "-inf" : (flags.find('+') != std::string::npos ? "+inf" : "inf"));
      if (std::isupper(static_cast<unsigned char>(conv)))
        for (auto& ch : t) ch = static_cast<char>(std::toupper(ch));
      piece.add(t);
    } else {
      piece.add(strf((spec + conv).c_str(), d));
    }
  }
  return true;
}

// ---- str.format(): "{}", "{0}", "{name}", "{0[key]}", "{x.attr}", conversions and simple specs ----
inline JValue JRender::str_format(const StrCall& c) {
  const JValue& self = c.self;
  const PText& f = c.s;
  PText out;
  size_t auto_idx = 0;
  size_t i = 0;
  while (i < f.s.size()) {
    char ch = f.s[i];
    if (ch == '}') {
      if (i + 1 < f.s.size() && f.s[i + 1] == '}') {
        out.add("}");
        i += 2;
        continue;
      }
      return failv("Single '}' encountered in format string");
    }
    if (ch != '{') {
      size_t j = i;
      while (j < f.s.size() && f.s[j] != '{' && f.s[j] != '}') j++;
      out.add_range(f, i, j);
      i = j;
      continue;
    }
    if (i + 1 < f.s.size() && f.s[i + 1] == '{') {
      out.add("{");
      i += 2;
      continue;
    }
    size_t close = f.s.find('}', i);
    if (close == std::string::npos) return failv("Single '{' encountered in format string");
    std::string field = f.s.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string::npos) return failv("unsupported construct: nested fields in str.format");
    i = close + 1;
    std::string spec, conv;
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    size_t bang = field.find('!');
    if (bang != std::string::npos) {
      conv = field.substr(bang + 1);
      field = field.substr(0, bang);
    }
    JValue v;
    if (!format_field(field, c.args, auto_idx, v)) return JValue();
    PText t;
    if (conv.empty() || conv == "s") {
      if (!to_str(v, t)) return JValue();
    } else if (conv == "r" || conv == "a") {
      if (!repr(v, t)) return JValue();
    } else {
      return failv("Unknown conversion specifier " + conv);
    }
    if (self.b && !jv_is_markup(v)) {
      PText e;
      html_escape(e, t);
      t = std::move(e);
    }
    if (!spec.empty() && !format_pad(spec, v.is_num(), t)) return JValue();
    out.add(t);
    if (!check_len(out.s.size())) return JValue();
  }
  if (!charge_str(out.s.size())) return JValue();
  return self.b ? jv_markup(std::move(out)) : JValue::str(std::move(out));
}
// The value of a replacement field's name: "" (the next positional), "0", "name", then any
// ".attr" and "[key]" parts.
inline bool JRender::format_field(const std::string& field, const JArgs& args, size_t& auto_idx, JValue& v) {
  size_t end = field.find_first_of(".[");
  std::string head = field.substr(0, end);
  if (head.empty()) {
    if (auto_idx >= args.pos.size()) return fail("Replacement index out of range for positional args tuple");
    v = args.pos[auto_idx++];
  } else if (std::isdigit(static_cast<unsigned char>(head[0]))) {
    size_t k = 0;
    std::from_chars(head.data(), head.data() + head.size(), k);
    if (k >= args.pos.size()) return fail("Replacement index out of range for positional args tuple");
    v = args.pos[k];
  } else {
    bool found = false;
    for (const auto& kv : args.kw)
      if (kv.first == head) {
        v = kv.second;
        found = true;
      }
    if (!found) return fail("KeyError '" + head + "' in str.format");
  }
  size_t p = end;
  while (p != std::string::npos && p < field.size()) {
    if (field[p] == '.') {
      size_t q = field.find_first_of(".[", p + 1);
      v = get_attr(v, field.substr(p + 1, q == std::string::npos ? std::string::npos : q - p - 1));
      p = q;
    } else {
      size_t q = field.find(']', p);
      if (q == std::string::npos) return fail("Missing ']' in format string");
      std::string key = field.substr(p + 1, q - p - 1);
      int64_t idx;
      auto r = std::from_chars(key.data(), key.data() + key.size(), idx);
      bool index = !key.empty() && r.ec == std::errc() && r.ptr == key.data() + key.size();
      v = index ? get_item(v, JValue::integer(idx)) : get_item(v, JValue::str(key));
      p = q + 1;
    }
    if (failed_) return false;
  }
  return true;
}
// A format spec, [[fill]align][width] (numbers with a type would need the full mini-language):
// pads t, on the left for numbers and on the right for the rest unless an alignment is given.
inline bool JRender::format_pad(const std::string& spec, bool number, PText& t) {
  size_t q = 0;
  std::string fill = " ";
  char align = 0;
  if (spec.size() >= 2 && std::strchr("<>^", spec[1])) {
    fill = spec.substr(0, 1);
    align = spec[1];
    q = 2;
  } else if (!spec.empty() && std::strchr("<>^", spec[0])) {
    align = spec[0];
    q = 1;
  }
  size_t w = 0;
  auto r = std::from_chars(spec.data() + q, spec.data() + spec.size(), w);
  if (r.ptr != spec.data() + spec.size() || w > (1u << 20))
    return fail("unsupported construct: format spec '" + spec + "' in str.format");
  if (!align) align = number ? '>' : '<';
  size_t len = jcp_count(t.s);
  if (w > len) {
    size_t pad = w - len, left = align == '>' ? pad : align == '^' ? pad / 2 : 0;
    PText padded;
    for (size_t k = 0; k < left; k++) padded.add(fill);
    padded.add(t);
    for (size_t k = left; k < pad; k++) padded.add(fill);
    t = std::move(padded);
  }
  return true;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
