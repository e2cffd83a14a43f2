// llminfer tokenize -m MODEL (--text S | --file F) [--special] [--no-bos] [--json]
// llminfer tokenize -m MODEL --jsonl FILE [--special] [--no-bos]
// Text -> token ids with the model's own tokenizer. Only the model description and the tokenizer are
// built (no weights are touched: llminfer::Tokenizer), so this is fast even for large models.
#include <string>

#include "cli.hpp"

namespace {

const char* kTokenizeUsage =
    "usage: llminfer tokenize -m MODEL (--text S | --file F) [--special] [--no-bos] [--json]\n"
    "       llminfer tokenize -m MODEL --jsonl FILE [--special] [--no-bos]\n"
    "  -m, --model MODEL  a .gguf file, a model directory, or a folder with tokenizer.json\n"
    "  --text S           the text to tokenize (exactly as given)\n"
    "  --file F           read the text from F, byte for byte ('-': standard input)\n"
    "  --jsonl FILE       one {\"id\":..., \"text\":...} per line; prints one {\"id\":..., \"ids\":[...]} per line\n"
    "  --special          special-token text in the input becomes control tokens\n"
    "  --no-bos           do not add the BOS/EOS the model would add\n"
    "  --json             print {\"ids\":[...]} instead of space-separated ids\n";

// A strict JSON reader (RFC 8259, as the library reads its own files) for the lines of --jsonl:
// each line's top-level members, every value written back compactly (strings decoded and quoted
// again, numbers as written). Malformed text is an error naming the line and column.
class JsonlReader {
 public:
  struct Member {
    std::string key;
    std::string json;  // the value, compact
    bool is_string = false;
    std::string text;  // a string value, decoded
  };

  // Reads one JSON value from `s`; false with `error` set. `is_object` and `members` describe it.
  bool read(std::string_view s, const std::string& what, bool& is_object, std::vector<Member>& members,
            std::string& error) {
    s_ = s;
    pos_ = 0;
    why_ = nullptr;
    members.clear();
    std::string json;
    skip_ws();
    is_object = pos_ < s_.size() && s_[pos_] == '{';
    bool ok = value(json, 0, nullptr, &members);
    if (ok) {
      skip_ws();
      if (pos_ != s_.size()) ok = fail("unexpected data after the JSON value");
    }
    if (!ok) {
      size_t line = 1, col = 1;
      for (size_t k = 0; k < err_pos_ && k < s_.size(); k++) {
        if (s_[k] == '\n')
          line++, col = 1;
        else
          col++;
      }
      error = cli::strf("%s: invalid JSON at line %zu, column %zu: %s", what.c_str(), line, col, why_);
    }
    return ok;
  }

 private:
  static constexpr int kMaxDepth = 512;  // the library's LLMINFER_MAX_JSON_DEPTH default

  bool fail(const char* why) {
    if (!why_) why_ = why, err_pos_ = pos_;
    return false;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) pos_++;
  }
  bool literal(std::string_view word, std::string& out) {
    if (s_.substr(pos_, word.size()) != word) return fail("invalid literal");
    pos_ += word.size();
    out += word;
    return true;
  }
  // Appends the value at pos_ to `out`; a string's decoded text goes to `text` too, an object's
  // members to `members` (the top level only).
  bool value(std::string& out, int depth, std::string* text, std::vector<Member>* members) {
    if (depth >= kMaxDepth) return fail("nested too deeply");
    if (pos_ >= s_.size()) return fail("unexpected end of input");
    char c = s_[pos_];
    switch (c) {
      case '{': return object(out, depth, members);
      case '[': return array(out, depth);
      case '"': {
        std::string str;
        if (!string(str)) return false;
        out += cli::json_quote(str);
        if (text) *text = std::move(str);
        return true;
      }
      case 't': return literal("true", out);
      case 'f': return literal("false", out);
      case 'n': return literal("null", out);
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return number(out);
        return fail("unexpected character");
    }
  }
  bool object(std::string& out, int depth, std::vector<Member>* members) {
    pos_++;  // '{'
    out += '{';
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      pos_++;
      out += '}';
      return true;
    }
    for (bool first = true;; first = false) {
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a string key");
      Member m;
      if (!string(m.key)) return false;
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') return fail("expected ':'");
      pos_++;
      skip_ws();
      m.is_string = pos_ < s_.size() && s_[pos_] == '"';
      if (!value(m.json, depth + 1, &m.text, nullptr)) return false;
      out += (first ? "" : ",") + cli::json_quote(m.key) + ":" + m.json;
      if (members) members->push_back(std::move(m));
      skip_ws();
      if (pos_ >= s_.size()) return fail("unexpected end of input in an object");
      if (s_[pos_] == ',') {
        pos_++;
        continue;
      }
      if (s_[pos_] == '}') {
        pos_++;
        out += '}';
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }
  bool array(std::string& out, int depth) {
    pos_++;  // '['
    out += '[';
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      pos_++;
      out += ']';
      return true;
    }
    for (bool first = true;; first = false) {
      skip_ws();
      if (!first) out += ',';
      if (!value(out, depth + 1, nullptr, nullptr)) return false;
      skip_ws();
      if (pos_ >= s_.size()) return fail("unexpected end of input in an array");
      if (s_[pos_] == ',') {
        pos_++;
        continue;
      }
      if (s_[pos_] == ']') {
        pos_++;
        out += ']';
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
  static void append_utf8(std::string& out, uint32_t c) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  bool string(std::string& out) {
    pos_++;  // '"'
    const auto* p = reinterpret_cast<const unsigned char*>(s_.data());
    for (;;) {
      size_t start = pos_;  // a run of plain bytes at once
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
        int l = cli::utf8_len(p + pos_, s_.size() - pos_);
        if (l == 0) return fail("invalid UTF-8 in a string");
        out.append(s_.data() + pos_, static_cast<size_t>(l));
        pos_ += static_cast<size_t>(l);
        continue;
      }
      pos_++;  // backslash
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
          if (u >= 0xD800 && u < 0xDC00) {  // a high surrogate: a low one must follow
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
            u = 0xFFFD;  // a lone low surrogate
          }
          append_utf8(out, u);
          break;
        }
        default: return fail("invalid escape");
      }
    }
  }
  bool number(std::string& out) {
    size_t start = pos_;
    auto digit = [&] { return pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; };
    if (s_[pos_] == '-') pos_++;
    if (!digit()) return fail("invalid number");
    if (s_[pos_] == '0') {
      pos_++;
    } else {
      while (digit()) pos_++;
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      pos_++;
      if (!digit()) return fail("invalid number");
      while (digit()) pos_++;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      pos_++;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) pos_++;
      if (!digit()) return fail("invalid number");
      while (digit()) pos_++;
    }
    out.append(s_.data() + start, pos_ - start);  // as written
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
  const char* why_ = nullptr;
  size_t err_pos_ = 0;
};

std::string ids_json(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t k = 0; k < ids.size(); k++) s += (k ? "," : "") + std::to_string(ids[k]);
  return s + "]";
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  cli::Args args(kTokenizeUsage);
  args.option({"-m", "--model"}, true)
      .option({"--text"}, true)
      .option({"--file"}, true)
      .option({"--jsonl"}, true)
      .option({"--special"}, false)
      .option({"--no-bos"}, false)
      .option({"--json"}, false);
  if (!args.parse(argc, argv)) return args.exit_code();
  if (!args.positional().empty())
    return args.usage_error("unexpected argument '" + args.positional()[0] + "'"), args.exit_code();
  std::string model = args.get("--model");
  if (model.empty()) return args.usage_error("-m MODEL is required"), args.exit_code();
  int sources = int(args.has("--text")) + int(args.has("--file")) + int(args.has("--jsonl"));
  if (sources != 1) return args.usage_error("give exactly one of --text, --file, --jsonl"), args.exit_code();
  bool special = args.has("--special"), add_special = !args.has("--no-bos");

  std::string text, err;
  if (args.has("--file") && !cli::read_file(args.get("--file"), text, err)) return cli::fail({llminfer::Errc::io, err});
  if (args.has("--jsonl") && !cli::read_file(args.get("--jsonl"), text, err))
    return cli::fail({llminfer::Errc::io, err});
  if (args.has("--text")) text = args.get("--text");

  auto tok = llminfer::Tokenizer::load(model);
  if (!tok) return cli::fail(tok.error());

  if (!args.has("--jsonl")) {
    auto ids = tok->tokenize(text, add_special, special);
    if (!ids) {
      llminfer::Error e = ids.error();
      if (args.has("--file")) e.message = args.get("--file") + ": " + e.message;  // which input
      return cli::fail(e);
    }
    if (args.has("--json")) {
      cli::out("{\"ids\":" + ids_json(*ids) + "}\n");
    } else {
      std::string s;
      for (size_t k = 0; k < ids->size(); k++) s += (k ? " " : "") + std::to_string((*ids)[k]);
      cli::out(s + "\n");
    }
    return cli::kOk;
  }
  // --jsonl: validate every line before printing anything
  std::string out;
  size_t line_no = 0, pos = 0;
  const std::string path = args.get("--jsonl");
  JsonlReader reader;
  std::vector<JsonlReader::Member> members;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line(text.data() + pos, (nl == std::string::npos ? text.size() : nl) - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    line_no++;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    bool is_object = false;
    if (!reader.read(line, cli::strf("%s line %zu", path.c_str(), line_no), is_object, members, err))
      return cli::fail({llminfer::Errc::bad_format, err});
    const JsonlReader::Member* t = nullptr;
    const JsonlReader::Member* id = nullptr;
    for (const auto& m : members) {  // the last of a repeated key counts, as in Python
      if (m.key == "text") t = &m;
      if (m.key == "id") id = &m;
    }
    if (!is_object || !t || !t->is_string)
      return cli::fail({llminfer::Errc::invalid_argument,
                        cli::strf("%s line %zu: expected an object with a string \"text\"", path.c_str(), line_no)});
    auto ids = tok->tokenize(t->text, add_special, special);
    if (!ids)
      return cli::fail(
          {ids.error().code, cli::strf("%s line %zu: %s", path.c_str(), line_no, ids.error().message.c_str())});
    out += "{\"id\":" + (id ? id->json : std::string("null")) + ",\"ids\":" + ids_json(*ids) + "}\n";
  }
  cli::out(out);
  return cli::kOk;
}
