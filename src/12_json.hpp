// ==== JSON: reader for config.json / tokenizer.json / safetensors headers, and string quoting ====
// Strict RFC 8259: UTF-8 checked, escapes and surrogate pairs decoded, nesting limited by
// LLMINFER_MAX_JSON_DEPTH, objects keep their member order (chat templates print them in order).
// Integers that fit in int64 are kept exactly (is_int); the literal text of every number is kept.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

struct JsonMember;

struct Json {
  enum class Type : uint8_t { null, boolean, number, string, array, object };
  Type type = Type::null;
  bool boolean = false;
  bool is_int = false;  // number: an integer that fits in int64 (then `i` is exact)
  int64_t i = 0;
  double num = 0;
  std::string str;                  // string value, or a number's literal text
  std::vector<Json> items;          // array
  std::vector<JsonMember> members;  // object, in file order (.first key, .second value)

  // Declared here, defaulted after JsonMember: clang with libstdc++ otherwise checks the member
  // type while Json is still incomplete when a Json is copied or destroyed.
  Json();
  Json(const Json&);
  Json(Json&&) noexcept;
  Json& operator=(const Json&);
  Json& operator=(Json&&) noexcept;
  ~Json();

  bool is_null() const { return type == Type::null; }
  bool is_bool() const { return type == Type::boolean; }
  bool is_number() const { return type == Type::number; }
  bool is_string() const { return type == Type::string; }
  bool is_array() const { return type == Type::array; }
  bool is_object() const { return type == Type::object; }

  // Member lookup (the last one wins if a key repeats, as in Python); nullptr if absent.
  const Json* find(std::string_view key) const;
  // Member or element, or a null value when absent / of another type.
  const Json& operator[](std::string_view key) const;
  const Json& operator[](size_t index) const;
  size_t size() const;  // elements of an array, members of an object, else 0

  std::string_view as_string(std::string_view fallback = {}) const {
    return type == Type::string ? std::string_view(str) : fallback;
  }
  double as_number(double fallback = 0) const { return type == Type::number ? num : fallback; }
  int64_t as_int(int64_t fallback = 0) const {
    if (type != Type::number) return fallback;
    if (is_int) return i;
    if (std::isfinite(num) && num == std::floor(num) && std::fabs(num) < 9.2e18) return static_cast<int64_t>(num);
    return fallback;
  }
  bool as_bool(bool fallback = false) const { return type == Type::boolean ? boolean : fallback; }

  static const Json& null_value();
};

// An object member. Not std::pair<std::string, Json>: clang with libstdc++ cannot instantiate that
// pair while Json is being defined (the pair asks whether Json is default-constructible).
struct JsonMember {
  std::string first;  // key
  Json second;        // value
  JsonMember() = default;
  JsonMember(std::string key, Json value) : first(std::move(key)), second(std::move(value)) {}
};

inline Json::Json() = default;
inline Json::Json(const Json&) = default;
inline Json::Json(Json&&) noexcept = default;
inline Json& Json::operator=(const Json&) = default;
inline Json& Json::operator=(Json&&) noexcept = default;
inline Json::~Json() = default;

inline const Json& Json::null_value() {
  static const Json null_json;
  return null_json;
}
inline const Json* Json::find(std::string_view key) const {
  if (type != Type::object) return nullptr;
  for (size_t k = members.size(); k-- > 0;)
    if (members[k].first == key) return &members[k].second;
  return nullptr;
}
inline const Json& Json::operator[](std::string_view key) const {
  const Json* j = find(key);
  return j ? *j : null_value();
}
inline const Json& Json::operator[](size_t index) const {
  return (type == Type::array && index < items.size()) ? items[index] : null_value();
}
inline size_t Json::size() const {
  return type == Type::array ? items.size() : type == Type::object ? members.size() : 0;
}

class JsonParser {
 public:
  JsonParser(std::string_view text, std::string_view what) : s_(text), what_(what) {}

  Result<Json> parse() {
    Json out;
    skip_ws();
    if (!value(out, 0)) return make_error(Errc::bad_format, message());
    skip_ws();
    if (pos_ != s_.size()) {
      fail("unexpected data after the JSON value");
      return make_error(Errc::bad_format, message());
    }
    return out;
  }

 private:
  bool fail(const char* why) {
    if (err_.empty()) {
      err_ = why;
      err_pos_ = pos_;
    }
    return false;
  }
  std::string message() const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < err_pos_ && k < s_.size(); k++) {
      if (s_[k] == '\n') {
        line++;
        col = 1;
      } else {
        col++;
      }
    }
    return strf("%.*s: invalid JSON at line %zu, column %zu: %s", static_cast<int>(what_.size()), what_.data(), line,
                col, err_.c_str());
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) pos_++;
  }
  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return fail("invalid literal");
    pos_ += word.size();
    return true;
  }
  bool value(Json& out, int depth) {
    if (depth >= LLMINFER_MAX_JSON_DEPTH) return fail("nested too deeply");
    if (pos_ >= s_.size()) return fail("unexpected end of input");
    char c = s_[pos_];
    switch (c) {
      case '{': return object(out, depth);
      case '[': return array(out, depth);
      case '"': out.type = Json::Type::string; return string(out.str);
      case 't':
        out.type = Json::Type::boolean;
        out.boolean = true;
        return literal("true");
      case 'f':
        out.type = Json::Type::boolean;
        out.boolean = false;
        return literal("false");
      case 'n': out.type = Json::Type::null; return literal("null");
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return number(out);
        return fail("unexpected character");
    }
  }
  bool object(Json& out, int depth) {
    out.type = Json::Type::object;
    pos_++;  // '{'
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      pos_++;
      return true;
    }
    for (;;) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a string key");
      std::string key;
      if (!string(key)) return false;
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected ':'");
      pos_++;
      skip_ws();
      out.members.push_back(JsonMember{std::move(key), Json()});
      if (!value(out.members.back().second, depth + 1)) return false;
      skip_ws();
      if (pos_ >= s_.size()) return fail("unexpected end of input in an object");
      if (s_[pos_] == ',') {
        pos_++;
        continue;
      }
      if (s_[pos_] == '}') {
        pos_++;
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }
  bool array(Json& out, int depth) {
    out.type = Json::Type::array;
    pos_++;  // '['
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      pos_++;
      return true;
    }
    for (;;) {
      skip_ws();
      out.items.emplace_back();
      if (!value(out.items.back(), depth + 1)) return false;
      skip_ws();
      if (pos_ >= s_.size()) return fail("unexpected end of input in an array");
      if (s_[pos_] == ',') {
        pos_++;
        continue;
      }
      if (s_[pos_] == ']') {
        pos_++;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }
  bool hex4(uint32_t& v) {
    if (s_.size() - pos_ < 4) return fail("truncated \\u escape");
    v = 0;
    for (int k = 0; k < 4; k++) {
      char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= static_cast<uint32_t>(h - 'A' + 10);
      else
        return fail("invalid \\u escape");
    }
    return true;
  }
  bool string(std::string& out) {
    pos_++;  // '"'
    const auto* p = reinterpret_cast<const unsigned char*>(s_.data());
    for (;;) {
      // copy a run of plain bytes at once
      size_t start = pos_;
      while (pos_ < s_.size() && p[pos_] >= 0x20 && p[pos_] < 0x80 && p[pos_] != '"' && p[pos_] != '\\') pos_++;
      out.append(s_.data() + start, pos_ - start);
      if (pos_ >= s_.size()) return fail("unterminated string");
      unsigned char c = p[pos_];
      if (c == '"') {
        pos_++;
        return true;
      }
      if (c < 0x20) return fail("control character in a string");
      if (c >= 0x80) {
        int l = utf8_valid_len(p + pos_, s_.size() - pos_);
        if (l == 0) return fail("invalid UTF-8 in a string");
        out.append(s_.data() + pos_, static_cast<size_t>(l));
        pos_ += static_cast<size_t>(l);
        continue;
      }
      // backslash escape
      pos_++;
      if (pos_ >= s_.size()) return fail("unterminated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t u;
          if (!hex4(u)) return false;
          if (u >= 0xD800 && u < 0xDC00) {
            // a high surrogate must be followed by \u and a low surrogate
            uint32_t lo = 0;
            if (s_.substr(pos_, 2) == "\\u") {
              size_t save = pos_;
              pos_ += 2;
              if (!hex4(lo)) return false;
              if (lo < 0xDC00 || lo >= 0xE000) {
                pos_ = save;
                lo = 0;
              }
            }
            u = lo ? 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00) : 0xFFFD;  // lone: U+FFFD
          } else if (u >= 0xDC00 && u < 0xE000) {
            u = 0xFFFD;  // lone low surrogate
          }
          utf8_append(out, u);
          break;
        }
        default: return fail("invalid escape");
      }
    }
  }
  bool number(Json& out) {
    out.type = Json::Type::number;
    size_t start = pos_;
    if (s_[pos_] == '-') pos_++;
    if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) return fail("invalid number");
    if (s_[pos_] == '0') {
      pos_++;
    } else {
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') pos_++;
    }
    bool integral = true;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      integral = false;
      pos_++;
      if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) return fail("invalid number");
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') pos_++;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integral = false;
      pos_++;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) pos_++;
      if (pos_ >= s_.size() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) return fail("invalid number");
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') pos_++;
    }
    const char* b = s_.data() + start;
    const char* e = s_.data() + pos_;
    out.str.assign(b, e);
    if (integral) {
      auto r = std::from_chars(b, e, out.i);
      out.is_int = (r.ec == std::errc() && r.ptr == e);
    }
    if (out.is_int) {
      out.num = static_cast<double>(out.i);
    } else {
      auto r = std::from_chars(b, e, out.num);
      if (r.ec == std::errc::result_out_of_range) {
        out.num = (*b == '-') ? -HUGE_VAL : HUGE_VAL;  // 1e999: like Python, infinity
        if (std::strchr(out.str.c_str(), 'e') || std::strchr(out.str.c_str(), 'E')) {
          // tiny exponents underflow to zero, not infinity
          const char* x = std::strpbrk(out.str.c_str(), "eE");
          if (x && x[1] == '-') out.num = (*b == '-') ? -0.0 : 0.0;
        }
      } else if (r.ec != std::errc()) {
        return fail("invalid number");
      }
    }
    return true;
  }

  std::string_view s_;
  std::string_view what_;
  size_t pos_ = 0;
  std::string err_;
  size_t err_pos_ = 0;
};

// Parses `text`; `what` names the source in error messages ("tokenizer.json").
inline Result<Json> json_parse(std::string_view text, std::string_view what) {
  return JsonParser(text, what).parse();
}

// A JSON string literal for `s`. Non-ASCII stays raw (as Python's ensure_ascii=False); invalid
// UTF-8 bytes become U+FFFD so the output is always valid JSON.
inline std::string json_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = p[i];
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20 || c == 0x7F)
            out += strf("\\u%04x", c);
          else
            out += static_cast<char>(c);
      }
      i++;
      continue;
    }
    int l = utf8_valid_len(p + i, s.size() - i);
    if (l == 0) {
      out += "\xEF\xBF\xBD";
      i++;
    } else if (l == 2 && c == 0xC2 && p[i + 1] < 0xA0) {  // C1 controls (U+0080..U+009F, e.g. CSI)
      out += strf("\\u%04x", p[i + 1]);
      i += 2;
    } else {
      out.append(s.data() + i, static_cast<size_t>(l));
      i += static_cast<size_t>(l);
    }
  }
  out += '"';
  return out;
}

// Shortest text that reads back as the same double ("0.1", "1e-06", "5e+05"): for JSON output.
inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return strf("%.0f", v);
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
