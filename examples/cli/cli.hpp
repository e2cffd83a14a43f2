// Shared helpers of the llminfer command-line program: argument parsing, output, exit codes.
// Every cmd_*.cpp implements one subcommand (see main.cpp for the table).
#pragma once
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "../../llminfer.hpp"

namespace cli {

// Exit status contract (DESIGN.md): 0 success, 1 usage error, 2 model/input error.
enum Exit : int { kOk = 0, kUsage = 1, kFailure = 2 };

// A small option parser: named options (with or without a value, possibly repeated) and
// positional arguments. Unknown options and missing values are usage errors.
class Args {
 public:
  explicit Args(std::string usage) : usage_(std::move(usage)) {}

  // names: e.g. {"-t", "--threads"}; the first long name is the key.
  Args& option(std::initializer_list<const char*> names, bool takes_value) {
    Opt o;
    for (const char* n : names) o.names.emplace_back(n);
    o.takes_value = takes_value;
    opts_.push_back(std::move(o));
    return *this;
  }
  // Adds -t/--threads, -c/--context, --archdef, --no-mmap, --max-program-steps and --max-session-mb
  // (common to every model command).
  Args& common() {
    option({"-t", "--threads"}, true);
    option({"-c", "--context"}, true);
    option({"--archdef"}, true);
    option({"--no-mmap"}, false);
    option({"--max-program-steps"}, true);
    option({"--max-session-mb"}, true);
    return *this;
  }

  // Returns false after printing the error (or the usage for --help): exit with exit_code().
  bool parse(int argc, char** argv) {
    for (int i = 0; i < argc; i++) {
      std::string a = argv[i];
      if (a == "-h" || a == "--help") {
        std::fputs(usage_.c_str(), stdout);
        code_ = kOk;
        return false;
      }
      if (a.size() > 1 && a[0] == '-' &&
          !(a.size() > 1 && (std::isdigit(static_cast<unsigned char>(a[1])) || a[1] == '.'))) {
        std::string value;
        bool inline_value = false;
        if (size_t eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) == 0) {
          value = a.substr(eq + 1);
          a = a.substr(0, eq);
          inline_value = true;
        }
        Opt* o = find(a);
        if (!o) return usage_error("unknown option " + a);
        o->seen = true;
        if (o->takes_value) {
          if (!inline_value) {
            if (i + 1 >= argc) return usage_error("option " + a + " needs a value");
            value = argv[++i];
          }
          o->values.push_back(value);
        } else if (inline_value) {
          return usage_error("option " + a + " takes no value");
        }
      } else {
        positional_.push_back(a);
      }
    }
    return true;
  }
  int exit_code() const { return code_; }

  bool has(const char* name) const {
    const Opt* o = find(name);
    return o && o->seen;
  }
  std::string get(const char* name, const std::string& fallback = "") const {
    const Opt* o = find(name);
    return (o && !o->values.empty()) ? o->values.back() : fallback;
  }
  std::vector<std::string> all(const char* name) const {
    const Opt* o = find(name);
    return o ? o->values : std::vector<std::string>();
  }
  // Integer option; prints a usage error and returns false when it is not a number.
  bool get_int(const char* name, long long& out) {
    std::string v = get(name);
    if (v.empty()) return true;
    char* end = nullptr;
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (!end || *end || end == v.c_str())
      return usage_error(std::string(name) + " expects an integer, got '" + v + "'");
    out = x;
    return true;
  }
  bool get_float(const char* name, double& out) {
    std::string v = get(name);
    if (v.empty()) return true;
    char* end = nullptr;
    double x = std::strtod(v.c_str(), &end);
    if (!end || *end || end == v.c_str()) return usage_error(std::string(name) + " expects a number, got '" + v + "'");
    out = x;
    return true;
  }
  // A whole number from 1 to `max` (no sign, no spaces); unchanged when the option is absent. Prints a
  // usage error naming the option and returns false otherwise (0, negative, junk, too large).
  bool get_count(const char* name, uint64_t max, uint64_t& out) {
    if (!has(name)) return true;
    std::string v = get(name);
    uint64_t x = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (v.empty() || ec != std::errc() || p != v.data() + v.size() || x < 1 || x > max)
      return usage_error(std::string(name) + " expects a whole number from 1 to " + std::to_string(max) + ", got '" +
                         v + "'");
    out = x;
    return true;
  }
  const std::vector<std::string>& positional() const { return positional_; }

  bool usage_error(const std::string& what) {
    std::fprintf(stderr, "error: %s\n\n%s", what.c_str(), usage_.c_str());
    code_ = kUsage;
    return false;
  }

  // LoadOptions from the common flags; false (after a usage error) on a bad value.
  bool load_options(llminfer::LoadOptions& lo) {
    long long t = 0, c = 0;
    if (!get_int("--threads", t) || !get_int("--context", c)) return false;
    if (t < 0 || t > 1024) return usage_error("--threads must be between 0 and 1024");
    if (c < 0 || c > (1ll << 24)) return usage_error("--context must be between 0 and 16777216");
    lo.threads = static_cast<int>(t);
    lo.context = static_cast<int>(c);
    lo.archdef_dir = get("--archdef");
    lo.read_into_memory = has("--no-mmap");
    // the load limits (LoadOptions::max_program_steps, max_session_bytes); absent: the library's defaults
    uint64_t steps = 0, mb = 0;
    if (!get_count("--max-program-steps", UINT64_MAX, steps) || !get_count("--max-session-mb", UINT64_MAX >> 20, mb))
      return false;
    lo.max_program_steps = steps;
    lo.max_session_bytes = mb << 20;
    return true;
  }

  // --kv-type f16|f32 (when the command has it); false after a usage error.
  bool kv_type(llminfer::LoadOptions& lo, const char* fallback = "f16") {
    std::string kv = get("--kv-type", fallback);
    if (kv != "f16" && kv != "f32") return usage_error("--kv-type must be f16 or f32");
    lo.kv_type = kv == "f32" ? llminfer::KvType::f32 : llminfer::KvType::f16;
    return true;
  }

 private:
  struct Opt {
    std::vector<std::string> names;
    bool takes_value = false;
    bool seen = false;
    std::vector<std::string> values;
  };
  Opt* find(const std::string& name) {
    for (auto& o : opts_)
      for (const auto& n : o.names)
        if (n == name) return &o;
    return nullptr;
  }
  const Opt* find(const std::string& name) const { return const_cast<Args*>(this)->find(name); }

  std::string usage_;
  std::vector<Opt> opts_;
  std::vector<std::string> positional_;
  int code_ = kOk;
};

// printf into a std::string.
#if defined(__MINGW32__)
inline std::string strf(const char* fmt, ...) __attribute__((format(gnu_printf, 1, 2)));  // MinGW's C99 printf
#elif defined(__GNUC__)
inline std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
#endif
inline std::string strf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[512];
  va_list ap2;
  va_copy(ap2, ap);
  int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::string out;
  if (n < 0) {
    va_end(ap2);
    return out;
  }
  if (static_cast<size_t>(n) < sizeof buf) {
    out.assign(buf, static_cast<size_t>(n));
  } else {
    out.resize(static_cast<size_t>(n) + 1);
    std::vsnprintf(out.data(), out.size(), fmt, ap2);
    out.resize(static_cast<size_t>(n));
  }
  va_end(ap2);
  return out;
}

// Length of the valid UTF-8 sequence at s[0..n) (1..4), or 0 when it is not one.
inline int utf8_len(const unsigned char* s, size_t n) {
  unsigned char c = s[0];
  int len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (len == 0 || static_cast<size_t>(len) > n) return 0;
  for (int i = 1; i < len; i++) {
    unsigned char lo = 0x80, hi = 0xBF;
    if (i == 1 && c == 0xE0) lo = 0xA0;
    if (i == 1 && c == 0xED) hi = 0x9F;
    if (i == 1 && c == 0xF0) lo = 0x90;
    if (i == 1 && c == 0xF4) hi = 0x8F;
    if (s[i] < lo || s[i] > hi) return 0;
  }
  return len;
}

// A JSON string: control characters escaped (\b \f \n \r \t as such, as Python's json.dumps
// writes them; the others as \u00XX), bytes that are not UTF-8 replaced by U+FFFD.
inline std::string json_quote(std::string_view s) {
  std::string out = "\"";
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    unsigned char c = p[i];
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      i++;
    } else if (c == '\n') {
      out += "\\n", i++;
    } else if (c == '\r') {
      out += "\\r", i++;
    } else if (c == '\t') {
      out += "\\t", i++;
    } else if (c == '\b') {
      out += "\\b", i++;
    } else if (c == '\f') {
      out += "\\f", i++;
    } else if (c < 0x20 || c == 0x7F) {
      out += strf("\\u%04x", c), i++;
    } else {
      int l = utf8_len(p + i, s.size() - i);
      if (l == 0) {
        out += "\xEF\xBF\xBD";
        i++;
      } else if (l == 2 && c == 0xC2 && p[i + 1] < 0xA0) {  // C1 controls
        out += strf("\\u%04x", p[i + 1]);
        i += 2;
      } else {
        out.append(s.data() + i, static_cast<size_t>(l));
        i += static_cast<size_t>(l);
      }
    }
  }
  return out + "\"";
}

// The shortest text that reads back as the same double; null when not finite.
inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return strf("%.0f", v);
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// Text from a file for a terminal: at most `max` bytes ("..." after a longer text); control
// characters (C0, DEL and C1 such as ESC and CSI, which would drive the terminal) and bytes that
// are not UTF-8 escaped as \xNN (C1 as \u00NN).
inline std::string term_safe(std::string_view s, size_t max = 4096) {
  std::string p;  // C0, DEL and invalid bytes escaped, cut at `max`
  size_t i = 0;
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size() && p.size() < max) {
    int l = utf8_len(b + i, s.size() - i);
    if (l == 1 && b[i] >= 0x20 && b[i] != 0x7F) {
      p += static_cast<char>(b[i]);
    } else if (l > 1) {
      p.append(s.data() + i, static_cast<size_t>(l));
    } else {
      p += strf("\\x%02X", b[i]);
      l = 1;
    }
    i += static_cast<size_t>(l);
  }
  if (i < s.size()) p += "...";
  std::string out;  // then C1 (U+0080..U+009F, two bytes C2 xx)
  for (size_t k = 0; k < p.size(); k++) {
    auto c = static_cast<unsigned char>(p[k]);
    if (c == 0xC2 && k + 1 < p.size() && static_cast<unsigned char>(p[k + 1]) >= 0x80 &&
        static_cast<unsigned char>(p[k + 1]) < 0xA0) {
      out += strf("\\u%04x", static_cast<unsigned char>(p[k + 1]));
      k++;
    } else {
      out += p[k];
    }
  }
  return out;
}

// A byte count for people: "512 B", "1.5 KiB", "2 MiB".
inline std::string human_bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return strf("%llu B", static_cast<unsigned long long>(n));
  if (v == std::floor(v)) return strf("%.0f %s", v, units[u]);
  return strf("%.1f %s", v, units[u]);
}

// Token ids ("1,2,3", "1 2 3", "[1, 2]") by the library's llminfer::parse_token_ids; false with
// `err` naming the first item that is not an id, or saying that there is none.
inline bool parse_ids(std::string_view s, std::vector<int32_t>& ids, std::string& err) {
  auto r = llminfer::parse_token_ids(s);
  if (!r) return err = r.error().message, false;
  ids = std::move(*r);
  return true;
}

// Prints an error from the library and returns the model/input exit status.
inline int fail(const llminfer::Error& e) {
  std::fprintf(stderr, "error: %s\n", e.message.c_str());
  return kFailure;
}

// The reason the first write to stdout failed (0: none yet).
inline int& out_errno() {
  static int e = 0;
  return e;
}

// Writes all of `s` to stdout (binary-safe). A failed write is reported by finish_output().
inline void out(std::string_view s) {
  errno = 0;
  if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size() && !out_errno()) out_errno() = errno ? errno : EIO;
}

// After a command: output that could not be written (a full disk, a closed pipe) is an error, not
// a success. Returns the exit status to use (and forgets the failure, for the next command).
inline int finish_output(int code) {
  errno = 0;
  bool bad = std::fflush(stdout) != 0 || std::ferror(stdout);
  int e = out_errno() ? out_errno() : errno;
  out_errno() = 0;
  if (bad) {
    std::fprintf(stderr, "error: cannot write the output (standard output): %s\n",
                 e ? std::strerror(e) : "write error");
    return code == kOk ? kFailure : code;
  }
  return code;
}

// Writes `bytes` bytes to the file `path`; false with `err` naming the file and the reason.
inline bool write_file(const std::string& path, const void* data, size_t bytes, std::string& err) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    err = path + ": cannot open for writing: " + std::strerror(errno);
    return false;
  }
  errno = 0;
  bool ok = std::fwrite(data, 1, bytes, f) == bytes;
  ok = std::fflush(f) == 0 && ok;
  int e = errno;
  ok = std::fclose(f) == 0 && ok;
  if (!e) e = errno;
  if (!ok) err = path + ": cannot write: " + (e ? std::strerror(e) : "write error");
  return ok;
}

// The most bytes the CLI reads from one input (-f/--file, --messages, --template, --jsonl, stdin,
// a chat message): 64 MiB, or the environment variable LLMINFER_MAX_INPUT_BYTES. A longer input
// (or an endless one: /dev/zero, a FIFO that never closes its data) is an error naming it.
inline uint64_t max_input_bytes() {
  static const uint64_t v = [] {
    uint64_t d = 64ull << 20;
    if (const char* e = std::getenv("LLMINFER_MAX_INPUT_BYTES")) {
      char* end = nullptr;
      unsigned long long x = std::strtoull(e, &end, 10);
      if (end && end != e && *end == 0 && x > 0) d = x;
    }
    return d;
  }();
  return v;
}
inline std::string input_too_long(const std::string& path) {
  return (path == "-" ? std::string("standard input") : path) + ": longer than the limit of " +
         std::to_string(max_input_bytes()) + " bytes for an input (LLMINFER_MAX_INPUT_BYTES)";
}

// Reads a whole file ("-" is standard input) into `out`, at most max_input_bytes() of it; false
// with `err` set on failure. Works on pipes, FIFOs and devices (reads until end of file or the limit).
inline bool read_file(const std::string& path, std::string& out, std::string& err) {
  FILE* f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  if (!f) {
    err = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  const uint64_t limit = max_input_bytes();
  char buf[65536];
  size_t n;
  bool too_long = false;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    if (out.size() + n > limit) {
      too_long = true;
      break;
    }
    out.append(buf, n);
  }
  bool ok = !too_long && !std::ferror(f);
  if (f != stdin) std::fclose(f);
  if (too_long) {
    err = input_too_long(path);
    out.clear();
    out.shrink_to_fit();
  } else if (!ok) {
    err = path + ": read error";
  }
  return ok;
}

}  // namespace cli

// The subcommands (one file each).
int cmd_info(int argc, char** argv);
int cmd_status(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_detokenize(int argc, char** argv);
int cmd_template(int argc, char** argv);
int cmd_logits(int argc, char** argv);
int cmd_compare(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_chat(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_serve(int argc, char** argv);
