// ==== JSON Schema -> GBNF ====
// The subset of JSON Schema that structured output uses, turned into a GBNF grammar (then compiled
// like any other). Supported: type (one name or a list), properties, required, additionalProperties
// (false; or absent; a schema or true only on an object without properties: a map), items (one
// schema), minItems, maxItems, minLength, maxLength, enum, const, anyOf, $ref to a local JSON pointer
// ("#/$defs/Name", "#/definitions/Name", "#"), $defs/definitions; the annotations title,
// description, default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly are
// ignored. Any other keyword is refused with an error naming it and where it is (never ignored:
// pattern, format, minimum, oneOf, allOf, not, prefixItems, uniqueItems, ...).
//
// What is generated (every output validates against the schema):
// * objects list their declared properties in the order of `properties`, each required one always,
//   each optional one or not; no other key (as llama.cpp and OpenAI's structured outputs do). An
//   object schema without properties is any object (or a map when additionalProperties is a schema).
// * whitespace between tokens: nothing, one space, or a line break and up to 20 blanks/tabs.
// * strings: any character except controls and DEL raw, escapes \" \\ \/ \b \f \n \r \t and
//   \uXXXX without surrogates; minLength/maxLength count characters (an escape is one).
// * integers: at most 16 digits; numbers: also up to 16 fraction digits and an exponent of up to
//   5 digits.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// A GBNF literal for the bytes of `s` (valid UTF-8).
inline std::string gbnf_literal(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7F)
      out += strf("\\x%02X", c);
    else
      out += ch;
  }
  return out + "\"";
}

// Compact JSON text of a value (numbers as written in the schema).
inline void json_compact(const Json& v, std::string& out) {
  switch (v.type) {
    case Json::Type::null: out += "null"; break;
    case Json::Type::boolean: out += v.boolean ? "true" : "false"; break;
    case Json::Type::number: out += v.str.empty() ? json_number(v.num) : v.str; break;
    case Json::Type::string: out += json_quote(v.str); break;
    case Json::Type::array:
      out += '[';
      for (size_t i = 0; i < v.items.size(); i++) {
        if (i) out += ',';
        json_compact(v.items[i], out);
      }
      out += ']';
      break;
    case Json::Type::object:
      out += '{';
      for (size_t i = 0; i < v.members.size(); i++) {
        if (i) out += ',';
        out += json_quote(v.members[i].first);
        out += ':';
        json_compact(v.members[i].second, out);
      }
      out += '}';
      break;
  }
}

class JsonSchemaConverter {
 public:
  explicit JsonSchemaConverter(const Json& root) : root_(root) {}

  Result<std::string> convert() {
    std::string expr;
    if (!visit(root_, "", "root", expr)) return make_error(Errc::invalid_argument, err_);
    std::string out = "root ::= " + expr + "\n";
    for (const auto& [name, body] : rules_) out += name + " ::= " + body + "\n";
    out += kPrimitives;
    return out;
  }

 private:
  static constexpr const char* kPrimitives =
      "space ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"
      "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | "
      "[dD] [0-7] [0-9a-fA-F]{2}))\n"
      "string ::= \"\\\"\" char* \"\\\"\" space\n"
      "integer ::= \"-\"? ([0-9] | [1-9] [0-9]{1,15}) space\n"
      "number ::= \"-\"? ([0-9] | [1-9] [0-9]{1,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,5})? space\n"
      "boolean ::= (\"true\" | \"false\") space\n"
      "null ::= \"null\" space\n"
      "value ::= object | array | string | number | boolean | null\n"
      "object ::= \"{\" space (string \":\" space value (\",\" space string \":\" space value)*)? \"}\" space\n"
      "array ::= \"[\" space (value (\",\" space value)*)? \"]\" space\n";

  bool fail(const std::string& path, const std::string& msg) {
    if (err_.empty()) err_ = "json_schema at " + (path.empty() ? std::string("the root") : path) + ": " + msg;
    return false;
  }

  std::string rule_name(std::string_view hint) {
    std::string base;
    for (char c : hint) base += ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) ? c : '-';
    if (base.empty()) base = "r";
    std::string name = base;
    int& k = next_suffix_[base];  // (a counter per base: many equal hints stay linear)
    if (k < 2) k = 2;
    while (reserved(name) || names_.count(name)) name = base + "-" + std::to_string(k++);
    names_.insert(name);
    return name;
  }
  static bool reserved(const std::string& n) {
    static const char* const kNames[] = {"root",    "space", "char",  "string", "integer", "number",
                                         "boolean", "null",  "value", "object", "array"};
    for (const char* k : kNames)
      if (n == k) return true;
    return false;
  }
  std::string add_rule(std::string_view hint, std::string body) {
    std::string name = rule_name(hint);
    rules_.emplace_back(name, std::move(body));
    return name;
  }

  bool count(const Json& s, const char* key, const std::string& path, uint32_t& out, bool& present) {
    const Json* v = s.find(key);
    present = v != nullptr;
    if (!v) return true;
    if (!v->is_number() || v->as_int(-1) < 0 || static_cast<double>(v->as_int(-1)) != v->num)
      return fail(path + "/" + key, "must be a non-negative integer");
    if (v->as_int() > static_cast<int64_t>(LLMINFER_GRAMMAR_MAX_REPEAT))
      return fail(path + "/" + key,
                  strf("%lld is above the limit of %u (LLMINFER_GRAMMAR_MAX_REPEAT)",
                       static_cast<long long>(v->as_int()), static_cast<unsigned>(LLMINFER_GRAMMAR_MAX_REPEAT)));
    out = static_cast<uint32_t>(v->as_int());
    return true;
  }

  static bool has_type(const Json& v, std::string_view t) {
    if (t == "null") return v.is_null();
    if (t == "boolean") return v.is_bool();
    if (t == "string") return v.is_string();
    if (t == "array") return v.is_array();
    if (t == "object") return v.is_object();
    if (t == "number") return v.is_number();
    if (t == "integer") return v.is_number() && std::isfinite(v.num) && v.num == std::floor(v.num);
    return false;
  }

  // Resolves a local reference ("#", "#/a/b" with ~0 ~1 escapes).
  const Json* resolve(std::string_view ref) const {
    if (ref.empty() || ref[0] != '#') return nullptr;
    ref.remove_prefix(1);
    const Json* cur = &root_;
    while (!ref.empty()) {
      if (ref[0] != '/') return nullptr;
      ref.remove_prefix(1);
      size_t end = ref.find('/');
      std::string tok(ref.substr(0, end));
      ref = end == std::string_view::npos ? std::string_view() : ref.substr(end);
      std::string key;
      for (size_t i = 0; i < tok.size(); i++) {
        if (tok[i] == '~' && i + 1 < tok.size() && (tok[i + 1] == '0' || tok[i + 1] == '1')) {
          key += tok[i + 1] == '0' ? '~' : '/';
          i++;
        } else {
          key += tok[i];
        }
      }
      if (cur->is_object()) {
        cur = cur->find(key);
      } else if (cur->is_array()) {
        size_t idx = 0;
        auto r = std::from_chars(key.data(), key.data() + key.size(), idx);
        if (r.ec != std::errc() || r.ptr != key.data() + key.size() || idx >= cur->items.size()) return nullptr;
        cur = &cur->items[idx];
      } else {
        return nullptr;
      }
      if (!cur) return nullptr;
    }
    return cur;
  }

  bool visit(const Json& s, const std::string& path, const std::string& hint, std::string& expr) {
    if (++depth_ > 256) return fail(path, "nested deeper than 256 schemas");
    bool ok = visit_inner(s, path, hint, expr);
    depth_--;
    return ok;
  }

  bool visit_inner(const Json& s, const std::string& path, const std::string& hint, std::string& expr) {
    if (s.is_bool()) {
      if (!s.boolean) return fail(path, "the schema false matches nothing");
      expr = "value";
      return true;
    }
    if (!s.is_object()) return fail(path, "a schema must be an object or a boolean");
    static const char* const kIgnored[] = {"title",    "description", "default",  "examples",
                                           "$schema",  "$id",         "$comment", "deprecated",
                                           "readOnly", "writeOnly",   "$defs",    "definitions"};
    static const char* const kKnown[] = {"type",      "properties", "required", "additionalProperties",
                                         "items",     "minItems",   "maxItems", "minLength",
                                         "maxLength", "enum",       "const",    "anyOf",
                                         "$ref"};
    for (const auto& m : s.members) {
      bool known = false;
      for (const char* k : kIgnored) known = known || m.first == k;
      for (const char* k : kKnown) known = known || m.first == k;
      if (!known)
        return fail(path,
                    "unsupported keyword '" + m.first +
                        "' (supported: type, properties, required, additionalProperties, items, minItems, maxItems, "
                        "minLength, maxLength, enum, const, anyOf, $ref, $defs; see the manual)");
    }
    auto constraining_besides = [&](std::initializer_list<const char*> allowed) -> const char* {
      for (const auto& m : s.members) {
        bool ok = false;
        for (const char* k : kIgnored) ok = ok || m.first == k;
        for (const char* k : allowed) ok = ok || m.first == k;
        if (!ok) return m.first.c_str();
      }
      return nullptr;
    };

    if (const Json* ref = s.find("$ref")) {
      if (const char* other = constraining_besides({"$ref"}))
        return fail(path, std::string("'$ref' together with '") + other + "' is not supported");
      if (!ref->is_string()) return fail(path + "/$ref", "must be a string");
      auto it = refs_.find(ref->str);
      if (it != refs_.end()) {
        expr = it->second;
        return true;
      }
      const Json* target = resolve(ref->str);
      if (!target)
        return fail(path + "/$ref", "'" + ref->str +
                                        "' does not lead to a schema in this document (only local "
                                        "references such as #/$defs/Name are supported)");
      std::string name = rule_name("ref-" + ref->str.substr(ref->str.rfind('/') + 1));
      refs_.emplace(ref->str, name);  // before visiting: recursive schemas refer to the rule
      size_t slot = rules_.size();
      rules_.emplace_back(name, "");
      std::string body;
      if (!visit(*target, ref->str.substr(1), name, body)) return false;
      rules_[slot].second = body;
      expr = name;
      return true;
    }

    if (const Json* any = s.find("anyOf")) {
      if (const char* other = constraining_besides({"anyOf"}))
        return fail(path,
                    std::string("'anyOf' together with '") + other + "' is not supported (put it in each branch)");
      if (!any->is_array() || any->items.empty()) return fail(path + "/anyOf", "must be a non-empty array of schemas");
      std::string body;
      for (size_t i = 0; i < any->items.size(); i++) {
        std::string e;
        if (!visit(any->items[i], path + "/anyOf/" + std::to_string(i), hint + "-" + std::to_string(i), e))
          return false;
        body += (i ? " | " : "") + e;
      }
      expr = add_rule(hint, body);
      return true;
    }

    // the types asked for (none: inferred from the keywords, or any value)
    std::vector<std::string> types;
    if (const Json* t = s.find("type")) {
      if (t->is_string()) {
        types.push_back(t->str);
      } else if (t->is_array() && !t->items.empty()) {
        for (const auto& x : t->items) {
          if (!x.is_string()) return fail(path + "/type", "must be a type name or a list of them");
          types.push_back(x.str);
        }
      } else {
        return fail(path + "/type", "must be a type name or a non-empty list of them");
      }
      for (const auto& x : types)
        if (x != "object" && x != "array" && x != "string" && x != "number" && x != "integer" && x != "boolean" &&
            x != "null")
          return fail(path + "/type", "unknown type '" + x + "'");
    }

    const Json* en = s.find("enum");
    const Json* cn = s.find("const");
    if (en || cn) {
      if (en && cn) return fail(path, "'enum' together with 'const' is not supported");
      std::vector<const Json*> values;
      if (cn) {
        values.push_back(cn);
      } else {
        if (!en->is_array() || en->items.empty()) return fail(path + "/enum", "must be a non-empty array");
        for (const auto& v : en->items) values.push_back(&v);
      }
      std::string body;
      size_t n = 0;
      for (const Json* v : values) {
        bool typed = types.empty();
        for (const auto& t : types) typed = typed || has_type(*v, t);
        if (!typed) continue;
        std::string text;
        json_compact(*v, text);
        body += (n++ ? " | " : "") + gbnf_literal(text);
      }
      if (n == 0)
        return fail(path, std::string("no value of '") + (cn ? "const" : "enum") + "' has the type asked for");
      expr = "(" + body + ") space";
      return true;
    }

    if (types.empty()) {
      bool obj = s.find("properties") || s.find("required") || s.find("additionalProperties");
      bool arr = s.find("items") || s.find("minItems") || s.find("maxItems");
      bool str = s.find("minLength") || s.find("maxLength");
      if (obj) types.push_back("object");
      if (arr) types.push_back("array");
      if (str) types.push_back("string");
      if (types.empty()) {
        expr = "value";
        return true;
      }
    }
    std::string body;
    for (size_t i = 0; i < types.size(); i++) {
      std::string e;
      if (!typed(s, types[i], path, types.size() > 1 ? hint + "-" + types[i] : hint, e)) return false;
      body += (i ? " | " : "") + e;
    }
    expr = types.size() == 1 ? body : "(" + body + ")";
    return true;
  }

  bool typed(const Json& s, const std::string& t, const std::string& path, const std::string& hint, std::string& expr) {
    if (t == "null" || t == "boolean" || t == "number" || t == "integer") {
      expr = t;
      return true;
    }
    if (t == "string") {
      uint32_t mn = 0, mx = 0;
      bool has_min, has_max;
      if (!count(s, "minLength", path, mn, has_min) || !count(s, "maxLength", path, mx, has_max)) return false;
      if (!has_min && !has_max) {
        expr = "string";
        return true;
      }
      if (has_max && mx < mn) return fail(path, "maxLength is below minLength");
      std::string rep = has_max ? strf("{%u,%u}", mn, mx) : strf("{%u,}", mn);
      expr = add_rule(hint, "\"\\\"\" char" + rep + " \"\\\"\" space");
      return true;
    }
    if (t == "array") {
      std::string item = "value";
      if (const Json* it = s.find("items")) {
        if (it->is_array())
          return fail(path + "/items", "a list of item schemas (tuple) is not supported: give one schema");
        if (!visit(*it, path + "/items", hint + "-item", item)) return false;
      }
      uint32_t mn = 0, mx = 0;
      bool has_min, has_max;
      if (!count(s, "minItems", path, mn, has_min) || !count(s, "maxItems", path, mx, has_max)) return false;
      if (has_max && mx < mn) return fail(path, "maxItems is below minItems");
      std::string more = "\",\" space " + item;
      std::string body;
      if (has_max && mx == 0) {
        body = "\"[\" space \"]\" space";
      } else if (mn == 0) {
        body = "\"[\" space (" + item + " (" + more + ")" + (has_max ? strf("{0,%u}", mx - 1) : std::string("*")) +
               ")? \"]\" space";
      } else {
        body = "\"[\" space " + item + " (" + more + ")" +
               (has_max ? strf("{%u,%u}", mn - 1, mx - 1) : strf("{%u,}", mn - 1)) + " \"]\" space";
      }
      expr = add_rule(hint, body);
      return true;
    }
    // object
    const Json* props = s.find("properties");
    const Json* req = s.find("required");
    const Json* add = s.find("additionalProperties");
    if (props && !props->is_object()) return fail(path + "/properties", "must be an object");
    if (add && !add->is_bool() && !add->is_object())
      return fail(path + "/additionalProperties", "must be a boolean or a schema");
    std::vector<std::string> required;
    if (req) {
      if (!req->is_array()) return fail(path + "/required", "must be an array of property names");
      for (const auto& r : req->items) {
        if (!r.is_string()) return fail(path + "/required", "must be an array of property names");
        if (!props || !props->find(r.str))
          return fail(path + "/required", "required property '" + r.str +
                                              "' is not in 'properties' (only declared properties are generated)");
        required.push_back(r.str);
      }
    }
    if (!props || props->members.empty()) {
      if (add && add->is_object()) {  // a map: any keys, values of one schema
        std::string v;
        if (!visit(*add, path + "/additionalProperties", hint + "-value", v)) return false;
        std::string kv = "string \":\" space " + v;
        expr = add_rule(hint, "\"{\" space (" + kv + " (\",\" space " + kv + ")*)? \"}\" space");
      } else if (add && add->is_bool() && !add->boolean) {
        expr = add_rule(hint, "\"{\" space \"}\" space");
      } else {
        expr = "object";
      }
      return true;
    }
    if (add && !(add->is_bool() && !add->boolean))
      return fail(path + "/additionalProperties",
                  "only false is supported next to 'properties' (objects get their declared properties only)");
    // rest(i, comma): the properties from i on, a comma first when one was written before
    const size_t n = props->members.size();
    std::vector<std::string> kv(n);
    std::vector<bool> is_req(n);
    for (size_t i = 0; i < n; i++) {
      const auto& m = props->members[i];
      for (size_t j = 0; j < i; j++)
        if (props->members[j].first == m.first)
          return fail(path + "/properties", "property '" + m.first + "' is listed twice");
      std::string v;
      if (!visit(m.second, path + "/properties/" + m.first, hint + "-" + m.first, v)) return false;
      kv[i] = gbnf_literal(json_quote(m.first)) + " space \":\" space " + v;
      is_req[i] = std::find(required.begin(), required.end(), m.first) != required.end();
    }
    std::string next_c, next_n;  // rest(i+1, true), rest(i+1, false): "" when empty
    for (size_t i = n; i-- > 0;) {
      auto build = [&](bool comma) {
        std::string with = (comma ? "\",\" space " : "") + kv[i] + (next_c.empty() ? "" : " " + next_c);
        if (is_req[i]) return with;
        std::string without = comma ? next_c : next_n;
        // (an empty alternative is written as `?`: a line ending in '|' would continue on the next)
        return without.empty() ? "(" + with + ")?" : "(" + with + ") | " + without;
      };
      std::string c = build(true), nc = build(false);
      std::string rc = add_rule(hint + "-rest", c);
      std::string rn = add_rule(hint + "-first", nc);
      next_c = rc;
      next_n = rn;
    }
    expr = add_rule(hint, "\"{\" space " + next_n + " \"}\" space");
    return true;
  }

  const Json& root_;
  std::string err_;
  int depth_ = 0;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> names_;
  std::map<std::string, int> next_suffix_;
  std::map<std::string, std::string> refs_;
};

inline Result<std::string> json_schema_to_gbnf(std::string_view schema) {
  auto j = json_parse(schema, "json_schema");
  if (!j) return make_error(Errc::invalid_argument, j.error().message);
  return JsonSchemaConverter(*j).convert();
}

}  // namespace detail

LLMI_API_DEF Result<std::string> json_schema_to_grammar(std::string_view schema) {
  return detail::json_schema_to_gbnf(schema);
}

LLMI_API_DEF Result<void> check_grammar(std::string_view gbnf) {
  auto g = detail::compile_grammar(gbnf);
  if (!g) return g.error();
  return {};
}

}  // namespace v0_1
}  // namespace llminfer
