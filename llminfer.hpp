// llminfer.hpp — load a language model (GGUF or safetensors) and generate text on a CPU.
// One C++20 header, nothing beyond the standard library. Generated from src/ by tools/amalgamate:
// edit the parts in src/, never this file.
//
// ==== Quick start ====
//
//   // In exactly ONE .cpp file of your program:
//   #define LLMINFER_IMPLEMENTATION
//   #include "llminfer.hpp"
//   // Everywhere else just #include "llminfer.hpp" (declarations only, cheap to include).
//
//   auto model = llminfer::Model::load("model.gguf", {.threads = 4, .context = 4096});
//   if (!model) { std::puts(model.error().message.c_str()); return 1; }   // errors are values
//   auto result = model->generate("Once upon a time", {.max_tokens = 32});
//   if (result) std::puts(result->text.c_str());
//
// Build the implementation TU with optimisation and the CPU's instruction set, for example
// `g++ -std=c++20 -O2 -march=native -pthread`. Nothing needs exceptions or RTTI: the header
// builds with -fno-exceptions -fno-rtti.
//
// ==== Build options (define before including, in the implementation TU) ====
//
//   LLMINFER_IMPLEMENTATION     compile the implementation into this translation unit
//   LLMINFER_SIMD_SCALAR        force the portable scalar kernels (also LLMINFER_FORCE_SCALAR)
//   LLMINFER_NO_CPU_CHECK       do not verify at load that the CPU has the instructions compiled in
//   LLMINFER_MAX_TENSORS        largest tensor count a file may declare (default 1<<20)
//   LLMINFER_MAX_METADATA       largest metadata key/value count a file may declare (default 1<<20)
//   LLMINFER_MAX_JSON_DEPTH     deepest JSON nesting accepted (default 512)
//
// ==== Threads and ownership ====
//
//   A Model is immutable after load and cheap to copy (copies share the weights). Sessions are
//   independent: one session must be used by one thread at a time, separate sessions may run at
//   once on one model. Callbacks run on the thread that called generate()/reply().
//
// ==== Security ====
//
//   Model files, tokenizer files, chat templates and architecture definitions are untrusted
//   input. Every size and offset is checked before use (overflow-safe); bad input produces an
//   Error naming the file and what is wrong, never a crash, a hang or an unbounded allocation.
//
// ==== Version ====
#ifndef LLMINFER_HPP
#define LLMINFER_HPP

#define LLMINFER_VERSION_MAJOR 0
#define LLMINFER_VERSION_MINOR 1
#define LLMINFER_VERSION_PATCH 0
#define LLMINFER_VERSION_STRING "0.1.0"

// ---- src/01_api.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Public declarations ====
// Everything a program that embeds llminfer uses. Aggregates whose zero/empty value means "the
// model's own value", errors returned as values (no exceptions needed anywhere).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if defined(LLMINFER_API_VERSION_SEEN) && LLMINFER_API_VERSION_SEEN != 1
#warning "two different versions of llminfer.hpp are included in one program"
#endif
#define LLMINFER_API_VERSION_SEEN 1

namespace llminfer {
inline namespace v0_1 {

// ---- errors ----
// X(name, description): one list makes the enum and its messages.
#define LLMINFER_ERRC_LIST(X)                                                      \
  X(ok, "ok")                                                                     \
  X(invalid_argument, "invalid argument")                                        \
  X(io, "cannot read the file")                                                  \
  X(bad_format, "malformed file")                                                \
  X(unsupported, "not supported")                                                \
  X(tensor_missing, "tensor missing")                                            \
  X(shape_mismatch, "tensor shape mismatch")                                     \
  X(archdef, "architecture definition error")                                    \
  X(tokenizer, "tokenizer error")                                                \
  X(template_error, "chat template error")                                       \
  X(cpu_unsupported, "this CPU lacks instructions the library was compiled for") \
  X(out_of_memory, "out of memory")                                              \
  X(internal, "internal error")

enum class Errc : uint16_t {
#define LLMINFER_X(name, text) name,
  LLMINFER_ERRC_LIST(LLMINFER_X)
#undef LLMINFER_X
};

// Stable text for a code.
const char* describe(Errc code) noexcept;

struct Error {
  Errc code = Errc::ok;
  std::string message;  // names the file / input and what is wrong
};

// A value or an Error. Never throws; check with `if (r)` before using the value.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit on purpose
  Result(Error error) : error_(std::move(error)) {
    if (error_.code == Errc::ok) error_.code = Errc::internal;
  }
  explicit operator bool() const noexcept { return value_.has_value(); }
  bool ok() const noexcept { return value_.has_value(); }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  const Error& error() const noexcept { return error_; }

 private:
  std::optional<T> value_;
  Error error_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), failed_(true) {
    if (error_.code == Errc::ok) error_.code = Errc::internal;
  }
  explicit operator bool() const noexcept { return !failed_; }
  bool ok() const noexcept { return !failed_; }
  const Error& error() const noexcept { return error_; }

 private:
  Error error_;
  bool failed_ = false;
};

// ---- options ----
enum class KvType : uint8_t { f16, f32 };

// What happens when a session's context is full.
enum class ContextPolicy : uint8_t {
  stop,   // stop generating with StopReason::context_full (default)
  slide,  // drop the oldest tokens after the first `keep` and continue
};

struct LoadOptions {
  int threads = 0;                 // 0: the number of hardware threads
  int context = 0;                 // tokens per session; 0: min(trained context, 4096)
  std::string archdef_dir;         // directory of <arch>.archdef files that override built-ins
  KvType kv_type = KvType::f16;    // element type of the KV cache
  ContextPolicy context_policy = ContextPolicy::stop;
  int keep = 4;                    // ContextPolicy::slide keeps this many first tokens
  std::function<void(std::string_view)> log;  // diagnostics; silent when empty
};

enum class StopReason : uint8_t { eos, stop, max_tokens, cancelled, context_full, error };
// "eos", "stop", "max_tokens", "cancelled", "context_full", "error"
const char* to_string(StopReason reason) noexcept;

struct GenerateOptions {
  int max_tokens = 256;
  float temperature = 0.0f;        // 0: greedy
  int top_k = 0;                   // 0: off
  float top_p = 1.0f;              // 1: off
  float min_p = 0.0f;              // 0: off
  float repeat_penalty = 1.0f;     // 1: off
  int repeat_last_n = 64;          // window of the repetition penalty
  uint64_t seed = 0;               // same seed, same text
  std::vector<std::string> stop;   // stop strings (not included in the output)
  bool chat = false;               // generate(): wrap the prompt in the model's chat template
  std::string system;              // generate() with chat: a system message
  // Streaming: receives complete UTF-8 pieces as they are decided; return false to cancel.
  std::function<bool(std::string_view piece)> on_token;
  const std::atomic<bool>* cancel = nullptr;  // polled per token and during prefill
};

struct Timings {
  double load_ms = 0;
  double prefill_ms = 0;
  double prefill_tps = 0;   // prompt tokens evaluated per second
  double decode_ms = 0;
  double decode_tps = 0;    // generated tokens per second
  double ttft_ms = 0;       // time to first generated token
};

struct GenerateResult {
  std::string text;
  std::vector<int32_t> tokens;       // generated ids
  StopReason stop = StopReason::max_tokens;
  int prompt_tokens = 0;             // tokens of the prompt (this turn, incl. reused)
  int prompt_tokens_evaluated = 0;   // of those, evaluated now
  int prompt_tokens_reused = 0;      // of those, found in the session's KV cache
  Timings timings;
  double peak_rss_mb = 0;
  uint64_t kv_bytes = 0;
};

struct Message {
  std::string role;
  std::string content;
};

namespace detail {
struct ModelImpl;
struct SessionImpl;
}  // namespace detail

class Session;

class Model {
 public:
  // A GGUF file, a safetensors file, or a Hugging Face / MLX model directory.
  static Result<Model> load(std::string_view path, const LoadOptions& options = {});

  // One-shot generation (a fresh session each call).
  Result<GenerateResult> generate(std::string_view prompt, const GenerateOptions& options = {}) const;
  // A conversation that keeps its KV cache between turns.
  Session session() const;

  // add_special: add the BOS/EOS the model asks for; parse_special: special-token text in
  // `text` becomes control tokens (otherwise it is plain text).
  Result<std::vector<int32_t>> tokenize(std::string_view text, bool add_special = true,
                                        bool parse_special = false) const;
  // Always valid UTF-8 (bytes that do not decode become U+FFFD); special tokens are rendered as text.
  std::string detokenize(std::span<const int32_t> ids) const;
  // Renders the model's own chat template (or the documented fallback when it has none).
  Result<std::string> apply_chat_template(std::span<const Message> messages,
                                          bool add_generation_prompt = true) const;

  const detail::ModelImpl& impl() const { return *impl_; }  // for tools and tests

 private:
  friend class Session;
  std::shared_ptr<const detail::ModelImpl> impl_;
};

class Session {
 public:
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  void add(std::string_view role, std::string_view content);
  Result<GenerateResult> reply(const GenerateOptions& options = {});
  void reset();  // forget the conversation and the cache
  const std::vector<Message>& messages() const;

  detail::SessionImpl& impl() { return *impl_; }  // for tools and tests

 private:
  friend class Model;
  explicit Session(std::unique_ptr<detail::SessionImpl> impl);
  std::unique_ptr<detail::SessionImpl> impl_;
};

const char* version() noexcept;

}  // namespace v0_1
}  // namespace llminfer

#endif  // LLMINFER_HPP

// ---- src/10_impl_begin.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Implementation ====
// Compiled only where LLMINFER_IMPLEMENTATION is defined. Every function here is `inline`, so a
// program may (wastefully, but correctly) define LLMINFER_IMPLEMENTATION in several translation
// units built with the same flags; tests rely on that.
#if defined(LLMINFER_IMPLEMENTATION) && !defined(LLMINFER_IMPLEMENTATION_INCLUDED)
#define LLMINFER_IMPLEMENTATION_INCLUDED

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#include <psapi.h>
#if defined(_MSC_VER)
#include <intrin.h>
#endif
#else
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

// ---- SIMD selection (compile time) ----
// Exactly one of LLMI_SIMD_AVX512 / LLMI_SIMD_AVX2 / LLMI_SIMD_NEON / LLMI_SIMD_SCALAR is set.
// The scalar reference kernels (detail::ref) are always compiled: they are the test oracle.
#if defined(LLMINFER_FORCE_SCALAR) || defined(LLMINFER_SIMD_SCALAR)
#define LLMI_SIMD_SCALAR 1
#elif defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__) && \
    defined(__F16C__)
#define LLMI_SIMD_AVX512 1
#define LLMI_SIMD_AVX2 1  // AVX-512 machines also run the 256-bit kernels where they fit better
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define LLMI_SIMD_AVX2 1
#elif defined(__ARM_NEON) || defined(_M_ARM64)
#define LLMI_SIMD_NEON 1
#else
#define LLMI_SIMD_SCALAR 1
#endif
#if defined(LLMI_SIMD_AVX512) && defined(__AVX512VNNI__)
#define LLMI_SIMD_VNNI 1
#endif
#if defined(LLMI_SIMD_AVX2) || defined(LLMI_SIMD_AVX512)
#include <immintrin.h>
#endif
#if defined(LLMI_SIMD_NEON)
#include <arm_neon.h>
#endif

#ifndef LLMINFER_MAX_TENSORS
#define LLMINFER_MAX_TENSORS (1u << 20)
#endif
#ifndef LLMINFER_MAX_METADATA
#define LLMINFER_MAX_METADATA (1u << 20)
#endif
#ifndef LLMINFER_MAX_JSON_DEPTH
#define LLMINFER_MAX_JSON_DEPTH 512
#endif

// Internal invariant check (never used for anything a file or a caller controls).
#ifndef LLMI_ASSERT
#define LLMI_ASSERT(x)                                                                      \
  do {                                                                                      \
    if (!(x)) {                                                                             \
      std::fprintf(stderr, "llminfer: internal error %s:%d: %s\n", __FILE__, __LINE__, #x); \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)
#endif

// ---- src/11_platform.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Platform: errors, checked arithmetic, UTF-8, mmap, files, clocks, CPU check ====
namespace llminfer {
inline namespace v0_1 {

inline const char* describe(Errc code) noexcept {
  switch (code) {
#define LLMINFER_X(name, text) \
  case Errc::name:             \
    return text;
    LLMINFER_ERRC_LIST(LLMINFER_X)
#undef LLMINFER_X
  }
  return "unknown error";
}

inline const char* version() noexcept { return LLMINFER_VERSION_STRING; }

namespace detail {

// printf into a std::string (error messages, JSON output).
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
inline std::string strf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return std::string();
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, static_cast<size_t>(n));
  std::string out(static_cast<size_t>(n), '\0');
  va_start(ap, fmt);
  std::vsnprintf(out.data(), out.size() + 1, fmt, ap);
  va_end(ap);
  return out;
}

inline Error make_error(Errc code, std::string message) { return Error{code, std::move(message)}; }

// Human-readable byte count: "512 B", "1.5 KiB", "2 MiB".
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

// ---- checked arithmetic (sizes and offsets from files) ----
inline bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  if (a > UINT64_MAX - b) return true;
  *out = a + b;
  return false;
}
inline bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > UINT64_MAX / a) return true;
  *out = a * b;
  return false;
}

// ---- UTF-8 ----
// Length of the valid UTF-8 sequence starting at s[0] (1..4), or 0 if it is not valid
// (overlong forms, surrogates, code points above U+10FFFF and truncated sequences are invalid).
inline int utf8_valid_len(const unsigned char* s, size_t n) {
  if (n == 0) return 0;
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  if (c < 0xC2) return 0;
  if (c < 0xE0) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
  if (c < 0xF0) {
    if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0;   // overlong
    if (c == 0xED && s[1] >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c < 0xF5) {
    if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
    if (c == 0xF0 && s[1] < 0x90) return 0;   // overlong
    if (c == 0xF4 && s[1] >= 0x90) return 0;  // > U+10FFFF
    return 4;
  }
  return 0;
}

inline bool utf8_valid(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0, n = s.size();
  while (i < n) {
    int l = utf8_valid_len(p + i, n - i);
    if (l == 0) return false;
    i += static_cast<size_t>(l);
  }
  return true;
}

// Decodes one code point at s[i] and advances i; invalid bytes decode as U+FFFD (one byte each).
inline uint32_t utf8_next(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  int l = utf8_valid_len(p + i, s.size() - i);
  uint32_t c;
  switch (l) {
    case 1: c = p[i]; break;
    case 2: c = (uint32_t(p[i] & 0x1F) << 6) | (p[i + 1] & 0x3F); break;
    case 3: c = (uint32_t(p[i] & 0x0F) << 12) | (uint32_t(p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F); break;
    case 4:
      c = (uint32_t(p[i] & 0x07) << 18) | (uint32_t(p[i + 1] & 0x3F) << 12) |
          (uint32_t(p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F);
      break;
    default: i += 1; return 0xFFFD;
  }
  i += static_cast<size_t>(l);
  return c;
}

inline void utf8_append(std::string& out, uint32_t c) {
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

// A printable rendering of untrusted bytes for error messages: at most `max` bytes, invalid UTF-8
// and control characters escaped as \xNN.
inline std::string printable(std::string_view s, size_t max = 80) {
  std::string out;
  size_t i = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size() && out.size() < max) {
    int l = utf8_valid_len(p + i, s.size() - i);
    if (l == 1 && p[i] >= 0x20 && p[i] != 0x7F) {
      out += static_cast<char>(p[i]);
    } else if (l > 1) {
      out.append(s.data() + i, static_cast<size_t>(l));
    } else {
      out += strf("\\x%02X", p[i]);
      l = 1;
    }
    i += static_cast<size_t>(l);
  }
  if (i < s.size()) out += "...";
  return out;
}

// Last path component, for messages ("model.gguf: ...").
inline std::string base_name(std::string_view path) {
  size_t p = path.find_last_of("/\\");
  return std::string(p == std::string_view::npos ? path : path.substr(p + 1));
}

inline std::string path_join(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (!out.empty() && out.back() != '/' && out.back() != '\\') out += '/';
  out += name;
  return out;
}

// ---- a read-only memory map of a whole file ----
class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& o) noexcept { swap(o); }
  MappedFile& operator=(MappedFile&& o) noexcept {
    if (this != &o) {
      close();
      swap(o);
    }
    return *this;
  }
  ~MappedFile() { close(); }

  static Result<MappedFile> open(const std::string& path);

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }
  // Tells the OS the byte range is no longer needed (after a tensor was repacked elsewhere).
  void release(uint64_t offset, uint64_t bytes) const;

 private:
  void close();
  void swap(MappedFile& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(path_, o.path_);
#if defined(_WIN32)
    std::swap(mapping_, o.mapping_);
#endif
  }
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
#if defined(_WIN32)
  HANDLE mapping_ = nullptr;
#endif
};

#if defined(_WIN32)
inline std::wstring utf8_to_wide(const std::string& s) {
  if (s.empty()) return std::wstring();
  int n = MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), nullptr, 0);
  if (n <= 0) return std::wstring();
  std::wstring w(static_cast<size_t>(n), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), w.data(), n);
  return w;
}

inline Result<MappedFile> MappedFile::open(const std::string& path) {
  std::wstring wpath = utf8_to_wide(path);
  HANDLE f = CreateFileW(wpath.c_str(), GENERIC_READ, FILE_SHARE_READ, nullptr, OPEN_EXISTING,
                         FILE_ATTRIBUTE_NORMAL, nullptr);
  if (f == INVALID_HANDLE_VALUE)
    return make_error(Errc::io, strf("%s: cannot open (error %lu)", path.c_str(), GetLastError()));
  LARGE_INTEGER sz;
  if (!GetFileSizeEx(f, &sz)) {
    CloseHandle(f);
    return make_error(Errc::io, path + ": cannot get the file size");
  }
  MappedFile m;
  m.path_ = path;
  m.size_ = static_cast<uint64_t>(sz.QuadPart);
  if (m.size_ == 0) {
    CloseHandle(f);
    return m;
  }
  m.mapping_ = CreateFileMappingW(f, nullptr, PAGE_READONLY, 0, 0, nullptr);
  CloseHandle(f);
  if (!m.mapping_) return make_error(Errc::io, path + ": cannot map the file");
  m.data_ = static_cast<const uint8_t*>(MapViewOfFile(m.mapping_, FILE_MAP_READ, 0, 0, 0));
  if (!m.data_) return make_error(Errc::io, path + ": cannot map the file");
  return m;
}

inline void MappedFile::close() {
  if (data_) UnmapViewOfFile(data_);
  if (mapping_) CloseHandle(mapping_);
  data_ = nullptr;
  mapping_ = nullptr;
  size_ = 0;
}

inline void MappedFile::release(uint64_t, uint64_t) const {}

inline bool is_directory(const std::string& path) {
  DWORD a = GetFileAttributesW(utf8_to_wide(path).c_str());
  return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY);
}
inline bool file_exists(const std::string& path) {
  DWORD a = GetFileAttributesW(utf8_to_wide(path).c_str());
  return a != INVALID_FILE_ATTRIBUTES && !(a & FILE_ATTRIBUTE_DIRECTORY);
}
inline std::vector<std::string> list_directory(const std::string& path) {
  std::vector<std::string> out;
  WIN32_FIND_DATAW fd;
  HANDLE h = FindFirstFileW(utf8_to_wide(path_join(path, "*")).c_str(), &fd);
  if (h == INVALID_HANDLE_VALUE) return out;
  do {
    if (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) continue;
    int n = WideCharToMultiByte(CP_UTF8, 0, fd.cFileName, -1, nullptr, 0, nullptr, nullptr);
    if (n <= 1) continue;
    std::string name(static_cast<size_t>(n - 1), '\0');
    WideCharToMultiByte(CP_UTF8, 0, fd.cFileName, -1, name.data(), n, nullptr, nullptr);
    out.push_back(name);
  } while (FindNextFileW(h, &fd));
  FindClose(h);
  std::sort(out.begin(), out.end());
  return out;
}
inline double peak_rss_mb() {
  PROCESS_MEMORY_COUNTERS pmc;
  if (GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc))
    return static_cast<double>(pmc.PeakWorkingSetSize) / (1024.0 * 1024.0);
  return 0;
}
#else
inline Result<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(Errc::io, strf("%s: cannot open: %s", path.c_str(), std::strerror(errno)));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return make_error(Errc::io, strf("%s: cannot stat: %s", path.c_str(), std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(Errc::io, path + ": not a regular file");
  }
  MappedFile m;
  m.path_ = path;
  m.size_ = static_cast<uint64_t>(st.st_size);
  if (m.size_ == 0) {
    ::close(fd);
    return m;
  }
  void* p = mmap(nullptr, static_cast<size_t>(m.size_), PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) return make_error(Errc::io, strf("%s: cannot map: %s", path.c_str(), std::strerror(e)));
  m.data_ = static_cast<const uint8_t*>(p);
  return m;
}

inline void MappedFile::close() {
  if (data_) munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  data_ = nullptr;
  size_ = 0;
}

inline void MappedFile::release(uint64_t offset, uint64_t bytes) const {
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0 || !data_ || offset >= size_) return;
  uint64_t p = static_cast<uint64_t>(page);
  uint64_t begin = (offset + p - 1) / p * p;
  uint64_t end = std::min(offset + bytes, size_) / p * p;
  if (end > begin)
    madvise(const_cast<uint8_t*>(data_) + begin, static_cast<size_t>(end - begin), MADV_DONTNEED);
}

inline bool is_directory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
inline bool file_exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
// Names of the regular files in a directory, sorted.
inline std::vector<std::string> list_directory(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = opendir(path.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (file_exists(path_join(path, name))) out.push_back(name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}
// Peak resident memory of this process (MiB).
inline double peak_rss_mb() {
#if defined(__linux__)
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    double kib = 0;
    while (std::fgets(line, sizeof line, f)) {
      if (std::strncmp(line, "VmHWM:", 6) == 0) {
        kib = std::strtod(line + 6, nullptr);
        break;
      }
    }
    std::fclose(f);
    if (kib > 0) return kib / 1024.0;
  }
#endif
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0) {
#if defined(__APPLE__)
    return static_cast<double>(ru.ru_maxrss) / (1024.0 * 1024.0);
#else
    return static_cast<double>(ru.ru_maxrss) / 1024.0;
#endif
  }
  return 0;
}
#endif

inline double now_ms() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

// ---- CPU check: refuse, with a message, a CPU that lacks what was compiled in ----
// The name of the SIMD path compiled into this translation unit.
inline const char* simd_compiled() {
#if defined(LLMI_SIMD_AVX512)
  return "avx512";
#elif defined(LLMI_SIMD_AVX2)
  return "avx2";
#elif defined(LLMI_SIMD_NEON)
  return "neon";
#else
  return "scalar";
#endif
}

#if (defined(__x86_64__) || defined(_M_X64) || defined(__i386__)) && !defined(LLMINFER_NO_CPU_CHECK)
#if defined(_MSC_VER)
inline void llmi_cpuid(int leaf, int sub, unsigned r[4]) {
  int regs[4];
  __cpuidex(regs, leaf, sub);
  for (int i = 0; i < 4; i++) r[i] = static_cast<unsigned>(regs[i]);
}
inline uint64_t llmi_xgetbv() { return _xgetbv(0); }
#else
inline void llmi_cpuid(int leaf, int sub, unsigned r[4]) {
  __asm__ __volatile__("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}
inline uint64_t llmi_xgetbv() {
  unsigned lo, hi;
  __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}
#endif
// Empty when this CPU (and OS) can run what was compiled in; otherwise what is missing.
inline std::string cpu_missing_features() {
  unsigned r1[4], r7[4], r0[4];
  llmi_cpuid(0, 0, r0);
  llmi_cpuid(1, 0, r1);
  bool has7 = r0[0] >= 7;
  if (has7) llmi_cpuid(7, 0, r7);
  else r7[0] = r7[1] = r7[2] = r7[3] = 0;
  bool osxsave = (r1[2] >> 27) & 1;
  uint64_t xcr0 = osxsave ? llmi_xgetbv() : 0;
  bool ymm_os = (xcr0 & 0x6) == 0x6, zmm_os = (xcr0 & 0xE6) == 0xE6;
  std::string missing;
  auto need = [&](bool ok, const char* name) {
    if (!ok) missing += missing.empty() ? name : std::string(", ") + name;
  };
#if defined(__FMA__)
  need(((r1[2] >> 12) & 1) && ymm_os, "FMA");
#endif
#if defined(__F16C__)
  need(((r1[2] >> 29) & 1) && ymm_os, "F16C");
#endif
#if defined(__AVX2__)
  need(((r7[1] >> 5) & 1) && ymm_os, "AVX2");
#endif
#if defined(__AVX512F__)
  need(((r7[1] >> 16) & 1) && zmm_os, "AVX512F");
#endif
#if defined(__AVX512BW__)
  need(((r7[1] >> 30) & 1) && zmm_os, "AVX512BW");
#endif
#if defined(__AVX512VL__)
  need(((r7[1] >> 31) & 1) && zmm_os, "AVX512VL");
#endif
#if defined(__AVX512VNNI__)
  need(((r7[2] >> 11) & 1) && zmm_os, "AVX512VNNI");
#endif
  (void)ymm_os;
  (void)zmm_os;
  return missing;
}
#else
inline std::string cpu_missing_features() { return std::string(); }
#endif

inline Result<void> check_cpu() {
  std::string missing = cpu_missing_features();
  if (missing.empty()) return {};
  return make_error(Errc::cpu_unsupported,
                    strf("this program was built for %s, but this CPU (or OS) lacks %s; rebuild "
                         "with a lower target, e.g. `make LLMINFER_SIMD=avx2` or `LLMINFER_SIMD=scalar`",
                         simd_compiled(), missing.c_str()));
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/12_json.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== JSON: reader for config.json / tokenizer.json / safetensors headers, and string quoting ====
// Strict RFC 8259: UTF-8 checked, escapes and surrogate pairs decoded, nesting limited by
// LLMINFER_MAX_JSON_DEPTH, objects keep their member order (chat templates print them in order).
// Integers that fit in int64 are kept exactly (is_int); the literal text of every number is kept.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

struct Json {
  enum class Type : uint8_t { null, boolean, number, string, array, object };
  Type type = Type::null;
  bool boolean = false;
  bool is_int = false;  // number: an integer that fits in int64 (then `i` is exact)
  int64_t i = 0;
  double num = 0;
  std::string str;                                    // string value, or a number's literal text
  std::vector<Json> items;                            // array
  std::vector<std::pair<std::string, Json>> members;  // object, in file order

  bool is_null() const { return type == Type::null; }
  bool is_bool() const { return type == Type::boolean; }
  bool is_number() const { return type == Type::number; }
  bool is_string() const { return type == Type::string; }
  bool is_array() const { return type == Type::array; }
  bool is_object() const { return type == Type::object; }

  // Member lookup (the last one wins if a key repeats, as in Python); nullptr if absent.
  const Json* find(std::string_view key) const {
    if (type != Type::object) return nullptr;
    for (size_t k = members.size(); k-- > 0;)
      if (members[k].first == key) return &members[k].second;
    return nullptr;
  }
  // Member or element, or a null value when absent / of another type.
  const Json& operator[](std::string_view key) const {
    const Json* j = find(key);
    return j ? *j : null_value();
  }
  const Json& operator[](size_t index) const {
    return (type == Type::array && index < items.size()) ? items[index] : null_value();
  }
  size_t size() const { return type == Type::array ? items.size() : type == Type::object ? members.size() : 0; }

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

  static const Json& null_value() {
    static const Json null_json;
    return null_json;
  }
};

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
    return strf("%.*s: invalid JSON at line %zu, column %zu: %s", static_cast<int>(what_.size()),
                what_.data(), line, col, err_.c_str());
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      pos_++;
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
      case '"':
        out.type = Json::Type::string;
        return string(out.str);
      case 't':
        out.type = Json::Type::boolean;
        out.boolean = true;
        return literal("true");
      case 'f':
        out.type = Json::Type::boolean;
        out.boolean = false;
        return literal("false");
      case 'n':
        out.type = Json::Type::null;
        return literal("null");
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
      out.members.emplace_back(std::move(key), Json());
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
      if (h >= '0' && h <= '9') v |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') v |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= static_cast<uint32_t>(h - 'A' + 10);
      else return fail("invalid \\u escape");
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
          if (c < 0x20 || c == 0x7F) out += strf("\\u%04x", c);
          else out += static_cast<char>(c);
      }
      i++;
      continue;
    }
    int l = utf8_valid_len(p + i, s.size() - i);
    if (l == 0) {
      out += "\xEF\xBF\xBD";
      i++;
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

// ---- src/13_dtype.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Element types: every ggml type id by name, plus safetensors and MLX types ====
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Values 0..42 are ggml's type ids (GGUF tensor table); larger values are ours.
enum class DType : uint16_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
  q2_K = 10, q3_K = 11, q4_K = 12, q5_K = 13, q6_K = 14, q8_K = 15,
  iq2_xxs = 16, iq2_xs = 17, iq3_xxs = 18, iq1_s = 19, iq4_nl = 20, iq3_s = 21, iq2_s = 22,
  iq4_xs = 23, i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, iq1_m = 29, bf16 = 30,
  tq1_0 = 34, tq2_0 = 35, mxfp4 = 39, nvfp4 = 40, q1_0 = 41, q2_0 = 42,
  // safetensors-only element types
  u8 = 200, u16 = 201, u32 = 202, u64 = 203, boolean = 204, f8_e4m3 = 205, f8_e5m2 = 206,
  // MLX affine quantization: packed uint32 words + per-group scale and bias (see TensorView)
  mlx_q4 = 210, mlx_q8 = 211,
  invalid = 0xFFFF,
};

struct DTypeTraits {
  const char* name;  // as ggml spells it (GGUF types) or as safetensors spells it
  uint32_t block;    // elements per block
  uint32_t bytes;    // bytes per block
};

// Traits of a type, or nullptr for an id that is not a type (removed or unknown ggml ids).
inline const DTypeTraits* dtype_traits(DType t) {
  static const DTypeTraits ggml[43] = {
      {"f32", 1, 4},        {"f16", 1, 2},       {"q4_0", 32, 18},    {"q4_1", 32, 20},
      {nullptr, 0, 0},      {nullptr, 0, 0},     {"q5_0", 32, 22},    {"q5_1", 32, 24},
      {"q8_0", 32, 34},     {"q8_1", 32, 36},    {"q2_K", 256, 84},   {"q3_K", 256, 110},
      {"q4_K", 256, 144},   {"q5_K", 256, 176},  {"q6_K", 256, 210},  {"q8_K", 256, 292},
      {"iq2_xxs", 256, 66}, {"iq2_xs", 256, 74}, {"iq3_xxs", 256, 98}, {"iq1_s", 256, 50},
      {"iq4_nl", 32, 18},   {"iq3_s", 256, 110}, {"iq2_s", 256, 82},  {"iq4_xs", 256, 136},
      {"i8", 1, 1},         {"i16", 1, 2},       {"i32", 1, 4},       {"i64", 1, 8},
      {"f64", 1, 8},        {"iq1_m", 256, 56},  {"bf16", 1, 2},      {nullptr, 0, 0},
      {nullptr, 0, 0},      {nullptr, 0, 0},     {"tq1_0", 256, 54},  {"tq2_0", 256, 66},
      {nullptr, 0, 0},      {nullptr, 0, 0},     {nullptr, 0, 0},     {"mxfp4", 32, 17},
      {"nvfp4", 64, 36},    {"q1_0", 128, 18},   {"q2_0", 64, 18},
  };
  static const DTypeTraits extra[] = {
      {"u8", 1, 1},  {"u16", 1, 2},   {"u32", 1, 4},     {"u64", 1, 8},
      {"bool", 1, 1}, {"f8_e4m3", 1, 1}, {"f8_e5m2", 1, 1},
  };
  static const DTypeTraits mlx[] = {{"mlx_q4", 8, 4}, {"mlx_q8", 4, 4}};  // elements per uint32 word
  auto v = static_cast<uint32_t>(t);
  if (v < 43) return ggml[v].name ? &ggml[v] : nullptr;
  if (v >= 200 && v <= 206) return &extra[v - 200];
  if (v == 210 || v == 211) return &mlx[v - 210];
  return nullptr;
}

inline const char* dtype_name(DType t) {
  const DTypeTraits* tr = dtype_traits(t);
  return tr ? tr->name : "invalid";
}

// Bytes of one row of `n` elements, or false when n is not a whole number of blocks.
inline bool dtype_row_bytes(DType t, uint64_t n, uint64_t* bytes) {
  const DTypeTraits* tr = dtype_traits(t);
  if (!tr || n % tr->block != 0) return false;
  return !mul_overflows(n / tr->block, tr->bytes, bytes);
}

// fp16 / bf16 <-> f32, bit-exact (round to nearest even), portable.
inline float fp16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        man <<= 1;
        e++;
      } while (!(man & 0x400));
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((man & 0x3FF) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t ax = x & 0x7FFFFFFF;
  if (ax >= 0x7F800000) return static_cast<uint16_t>(sign | 0x7C00 | (ax > 0x7F800000 ? 0x200 : 0));
  if (ax >= 0x477FF000) return static_cast<uint16_t>(sign | 0x7C00);  // rounds to infinity
  if (ax < 0x38800000) {                                               // subnormal or zero in fp16
    if (ax < 0x33000000) return static_cast<uint16_t>(sign);           // rounds to zero
    // value = M * 2^(e-150) with M the 24-bit significand; in units of 2^-24: M >> (126 - e)
    uint32_t e = ax >> 23, m = (ax & 0x7FFFFF) | 0x800000;
    uint32_t shift = 126 - e;  // 14..24
    uint32_t h = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = ((ax >> 13) - ((127 - 15) << 10));
  uint32_t rem = ax & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return static_cast<uint16_t>(sign | h);
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  x += 0x7FFF + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

// Little-endian loads from possibly unaligned bytes.
inline uint16_t rd_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t rd_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t rd_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/14_gguf.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== GGUF v2/v3 reader ====
// Layout (little-endian): "GGUF" u32 version, u64 n_tensors, u64 n_kv, then n_kv key/values
// (string key, u32 type, value), then n_tensors infos (string name, u32 n_dims, u64 ne[n_dims],
// u32 ggml type, u64 offset), padding to `general.alignment` (default 32), then the data section.
// Strings are u64 length + bytes (no NUL). Arrays are u32 element type + u64 count + elements.
// Everything is a view into the mapping; every read is bounds-checked against the file size.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

enum class GgufType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

inline const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  auto v = static_cast<uint32_t>(t);
  return v < 13 ? names[v] : "invalid";
}

// Size of a fixed-size scalar type, 0 for string/array/invalid.
inline uint32_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::u8: case GgufType::i8: case GgufType::boolean: return 1;
    case GgufType::u16: case GgufType::i16: return 2;
    case GgufType::u32: case GgufType::i32: case GgufType::f32: return 4;
    case GgufType::u64: case GgufType::i64: case GgufType::f64: return 8;
    default: return 0;
  }
}

struct GgufValue {
  GgufType type = GgufType::u8;
  const uint8_t* p = nullptr;  // scalar bytes; string bytes; first array element
  uint64_t len = 0;            // string: bytes; array: element count
  GgufType elem = GgufType::u8;
  std::vector<std::string_view> strings;  // array of strings
  std::vector<GgufValue> arrays;          // array of arrays

  bool is_number() const { return gguf_scalar_size(type) != 0 && type != GgufType::boolean; }
  bool is_integer() const { return is_number() && type != GgufType::f32 && type != GgufType::f64; }
  std::string_view as_string() const {
    return type == GgufType::string ? std::string_view(reinterpret_cast<const char*>(p), len) : std::string_view();
  }
  // Scalar at `q` of type `t` as double / int64 (booleans as 0/1).
  static double number_at(GgufType t, const uint8_t* q) {
    switch (t) {
      case GgufType::u8: return q[0];
      case GgufType::i8: return static_cast<int8_t>(q[0]);
      case GgufType::boolean: return q[0] != 0;
      case GgufType::u16: return rd_u16(q);
      case GgufType::i16: return static_cast<int16_t>(rd_u16(q));
      case GgufType::u32: return rd_u32(q);
      case GgufType::i32: return static_cast<int32_t>(rd_u32(q));
      case GgufType::u64: return static_cast<double>(rd_u64(q));
      case GgufType::i64: return static_cast<double>(static_cast<int64_t>(rd_u64(q)));
      case GgufType::f32: {
        float f;
        std::memcpy(&f, q, 4);
        return f;
      }
      case GgufType::f64: {
        double d;
        std::memcpy(&d, q, 8);
        return d;
      }
      default: return 0;
    }
  }
  static int64_t int_at(GgufType t, const uint8_t* q) {
    switch (t) {
      case GgufType::u64: return static_cast<int64_t>(std::min<uint64_t>(rd_u64(q), INT64_MAX));
      case GgufType::i64: return static_cast<int64_t>(rd_u64(q));
      case GgufType::f32: case GgufType::f64: {
        double d = number_at(t, q);
        return std::isfinite(d) && std::fabs(d) < 9.2e18 ? static_cast<int64_t>(d) : 0;
      }
      default: return static_cast<int64_t>(number_at(t, q));
    }
  }
  double as_number() const { return gguf_scalar_size(type) ? number_at(type, p) : 0; }
  int64_t as_int() const { return gguf_scalar_size(type) ? int_at(type, p) : 0; }
  bool as_bool() const { return gguf_scalar_size(type) ? number_at(type, p) != 0 : false; }
  // Numeric array element k (k < len).
  double number(uint64_t k) const { return number_at(elem, p + k * gguf_scalar_size(elem)); }
  int64_t integer(uint64_t k) const { return int_at(elem, p + k * gguf_scalar_size(elem)); }
};

struct GgufKV {
  std::string_view key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string_view name;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the innermost (row) dimension
  DType type = DType::f32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;
};

struct GgufFile {
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  // absolute offset of the data section
  std::vector<GgufKV> kv;
  std::vector<GgufTensorInfo> tensors;

  const GgufValue* find(std::string_view key) const {
    for (const auto& e : kv)
      if (e.key == key) return &e.value;
    return nullptr;
  }
};

class GgufReader {
 public:
  GgufReader(const uint8_t* data, uint64_t size, const std::string& name) : d_(data), n_(size), name_(name) {}

  Result<GgufFile> parse() {
    GgufFile f;
    if (n_ < 4 || std::memcmp(d_, "GGUF", 4) != 0) {
      if (n_ >= 4 && std::memcmp(d_, "FUGG", 4) == 0) return err("big-endian GGUF files are not supported");
      return err(n_ < 4 ? strf("too small to be a GGUF file (%llu bytes)", ull(n_)) : std::string("not a GGUF file (bad magic)"));
    }
    pos_ = 4;
    if (!u32(f.version, "the header")) return error_;
    if (f.version == 1) return err("GGUF version 1 is not supported (only versions 2 and 3)");
    if (f.version != 2 && f.version != 3) return err(strf("unsupported GGUF version %u (only 2 and 3)", f.version));
    uint64_t n_tensors = 0, n_kv = 0;
    if (!u64(n_tensors, "the header") || !u64(n_kv, "the header")) return error_;
    if (n_tensors > LLMINFER_MAX_TENSORS || n_tensors > remaining() / 24)
      return err(strf("absurd tensor count %llu", ull(n_tensors)));
    if (n_kv > LLMINFER_MAX_METADATA || n_kv > remaining() / 13)
      return err(strf("absurd metadata count %llu", ull(n_kv)));

    // ---- metadata ----
    f.kv.reserve(static_cast<size_t>(n_kv));
    std::unordered_map<std::string_view, size_t> seen;
    for (uint64_t k = 0; k < n_kv; k++) {
      where_ = strf("metadata entry %llu of %llu", ull(k + 1), ull(n_kv));
      GgufKV e;
      if (!string(e.key, "key")) return error_;
      if (!utf8_valid(e.key)) return err(strf("%s: key is not valid UTF-8 ('%s')", where_.c_str(), printable(e.key).c_str()));
      where_ = strf("metadata key '%s'", printable(e.key).c_str());
      uint32_t t = 0;
      if (!u32(t, "type")) return error_;
      if (!value(e.value, t, 0)) return error_;
      if (!seen.emplace(e.key, k).second) return err(strf("duplicate metadata key '%s'", printable(e.key).c_str()));
      f.kv.push_back(std::move(e));
    }
    if (const GgufValue* a = f.find("general.alignment")) {
      if (a->type != GgufType::u32) return err(strf("general.alignment has type %s, expected u32", gguf_type_name(a->type)));
      uint64_t v = static_cast<uint64_t>(a->as_int());
      if (v == 0 || (v & (v - 1)) != 0) return err(strf("general.alignment %llu is not a power of two", ull(v)));
      f.alignment = v;
    }

    // ---- tensor infos ----
    f.tensors.reserve(static_cast<size_t>(n_tensors));
    std::unordered_map<std::string_view, size_t> names;
    for (uint64_t k = 0; k < n_tensors; k++) {
      where_ = strf("tensor info %llu of %llu", ull(k + 1), ull(n_tensors));
      GgufTensorInfo ti;
      if (!string(ti.name, "name")) return error_;
      if (!utf8_valid(ti.name)) return err(strf("%s: name is not valid UTF-8", where_.c_str()));
      if (ti.name.empty()) return err(strf("%s: empty tensor name", where_.c_str()));
      where_ = strf("tensor '%s'", printable(ti.name).c_str());
      if (!u32(ti.n_dims, "n_dims")) return error_;
      if (ti.n_dims < 1 || ti.n_dims > 4)
        return err(strf("%s has %u dimensions (1 to 4 allowed)", where_.c_str(), ti.n_dims));
      uint64_t nel = 1;
      for (uint32_t dmn = 0; dmn < ti.n_dims; dmn++) {
        uint64_t ne = 0;
        if (!u64(ne, "dimensions")) return error_;
        if (ne > static_cast<uint64_t>(INT64_MAX) || mul_overflows(nel, ne, &nel) || nel > static_cast<uint64_t>(INT64_MAX))
          return err(strf("%s: dimensions overflow (dimension %u is %llu)", where_.c_str(), dmn, ull(ne)));
        ti.ne[dmn] = static_cast<int64_t>(ne);
      }
      uint32_t type = 0;
      if (!u32(type, "type")) return error_;
      ti.type = static_cast<DType>(type);
      const DTypeTraits* tr = type < 200 ? dtype_traits(ti.type) : nullptr;
      if (!tr) return err(strf("%s has unknown ggml type id %u", where_.c_str(), type));
      if (static_cast<uint64_t>(ti.ne[0]) % tr->block != 0)
        return err(strf("%s: row length %lld is not a multiple of the %s block size %u", where_.c_str(),
                        static_cast<long long>(ti.ne[0]), tr->name, tr->block));
      if (mul_overflows(nel / tr->block, tr->bytes, &ti.nbytes))
        return err(strf("%s: size overflows", where_.c_str()));
      if (!u64(ti.offset, "offset")) return error_;
      if (!names.emplace(ti.name, k).second) return err(strf("duplicate tensor name '%s'", printable(ti.name).c_str()));
      f.tensors.push_back(ti);
    }

    // ---- data section ----
    uint64_t data = 0;
    if (add_overflows(pos_, f.alignment - 1, &data)) return err("data section offset overflows");
    data = data / f.alignment * f.alignment;
    if (data > n_ && !f.tensors.empty())
      return err(strf("the data section (offset %llu) starts past the end of the file (%s)", ull(data),
                      human_bytes(n_).c_str()));
    f.data_offset = std::min(data, n_);
    uint64_t avail = n_ - f.data_offset;
    for (const auto& t : f.tensors) {
      if (t.offset % f.alignment != 0)
        return err(strf("tensor '%s' data offset %llu is not aligned to %llu bytes", printable(t.name).c_str(),
                        ull(t.offset), ull(f.alignment)));
      uint64_t end = 0;
      if (add_overflows(t.offset, t.nbytes, &end) || end > avail)
        return err(strf("tensor '%s' data [offset %llu, size %s] runs past the end of the file (%s)",
                        printable(t.name).c_str(), ull(f.data_offset + t.offset), human_bytes(t.nbytes).c_str(),
                        human_bytes(n_).c_str()));
    }
    std::vector<size_t> order(f.tensors.size());
    for (size_t k = 0; k < order.size(); k++) order[k] = k;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return f.tensors[a].offset < f.tensors[b].offset; });
    for (size_t k = 1; k < order.size(); k++) {
      const auto& a = f.tensors[order[k - 1]];
      const auto& b = f.tensors[order[k]];
      if (a.nbytes > 0 && b.nbytes > 0 && a.offset + a.nbytes > b.offset)
        return err(strf("tensors '%s' and '%s' overlap in the data section", printable(a.name).c_str(),
                        printable(b.name).c_str()));
    }
    return f;
  }

 private:
  static unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }
  uint64_t remaining() const { return n_ - pos_; }
  Error err(const std::string& what) {
    error_ = make_error(Errc::bad_format, name_ + ": " + what);
    return error_;
  }
  bool truncated(const char* field) {
    err(strf("truncated in %s (%s) at offset %llu: the file ends at %llu bytes", where_.empty() ? "the header" : where_.c_str(),
             field, ull(pos_), ull(n_)));
    return false;
  }
  bool take(uint64_t bytes, const char* field) {
    if (bytes > remaining()) return truncated(field);
    pos_ += bytes;
    return true;
  }
  bool u32(uint32_t& v, const char* field) {
    if (remaining() < 4) return truncated(field);
    v = rd_u32(d_ + pos_);
    pos_ += 4;
    return true;
  }
  bool u64(uint64_t& v, const char* field) {
    if (remaining() < 8) return truncated(field);
    v = rd_u64(d_ + pos_);
    pos_ += 8;
    return true;
  }
  bool string(std::string_view& s, const char* field) {
    uint64_t len = 0;
    if (!u64(len, field)) return false;
    if (len > remaining()) {
      err(strf("%s: %s length %llu runs past the end of the file", where_.c_str(), field, ull(len)));
      return false;
    }
    s = std::string_view(reinterpret_cast<const char*>(d_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return true;
  }
  bool value(GgufValue& v, uint32_t type, int depth) {
    if (type > 12) {
      err(strf("%s has unknown value type %u", where_.c_str(), type));
      return false;
    }
    v.type = static_cast<GgufType>(type);
    if (uint32_t sz = gguf_scalar_size(v.type)) {
      v.p = d_ + pos_;
      return take(sz, "value");
    }
    if (v.type == GgufType::string) {
      std::string_view s;
      if (!string(s, "string value")) return false;
      v.p = reinterpret_cast<const uint8_t*>(s.data());
      v.len = s.size();
      return true;
    }
    // array
    if (depth >= 8) {
      err(strf("%s: arrays nested too deeply", where_.c_str()));
      return false;
    }
    uint32_t et = 0;
    if (!u32(et, "array type") || !u64(v.len, "array length")) return false;
    if (et > 12) {
      err(strf("%s: array has unknown element type %u", where_.c_str(), et));
      return false;
    }
    v.elem = static_cast<GgufType>(et);
    v.p = d_ + pos_;
    if (uint32_t sz = gguf_scalar_size(v.elem)) {
      uint64_t bytes = 0;
      if (mul_overflows(v.len, sz, &bytes) || bytes > remaining()) {
        err(strf("%s: array of %llu %s runs past the end of the file", where_.c_str(), ull(v.len), gguf_type_name(v.elem)));
        return false;
      }
      pos_ += bytes;
      return true;
    }
    if (v.elem == GgufType::string) {
      if (v.len > remaining() / 8) {
        err(strf("%s: array of %llu strings runs past the end of the file", where_.c_str(), ull(v.len)));
        return false;
      }
      v.strings.resize(static_cast<size_t>(v.len));
      for (auto& s : v.strings)
        if (!string(s, "array string")) return false;
      return true;
    }
    if (v.len > remaining() / 12) {
      err(strf("%s: array of %llu arrays runs past the end of the file", where_.c_str(), ull(v.len)));
      return false;
    }
    v.arrays.resize(static_cast<size_t>(v.len));
    for (auto& a : v.arrays)
      if (!value(a, 9, depth + 1)) return false;
    return true;
  }

  const uint8_t* d_;
  uint64_t n_;
  uint64_t pos_ = 0;
  std::string name_;
  std::string where_;
  Error error_;
};

inline Result<GgufFile> gguf_parse(const uint8_t* data, uint64_t size, const std::string& name) {
  return GgufReader(data, size, name).parse();
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/15_safetensors.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== safetensors reader ====
// Layout: u64 N (little-endian), N bytes of JSON header, then the data. The header maps each
// tensor name to {"dtype", "shape" (outermost first), "data_offsets": [begin, end)} relative to
// the data; "__metadata__" maps strings to strings. Offsets are checked for bounds, size and overlap.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

struct StTensor {
  std::string name;
  DType type = DType::f32;
  std::vector<int64_t> shape;  // outermost first, as written (row-major)
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  uint64_t file_offset = 0;  // absolute offset in its file
};

struct StFile {
  std::string path;
  std::vector<StTensor> tensors;
  std::vector<std::pair<std::string, std::string>> metadata;
};

inline DType safetensors_dtype(std::string_view s) {
  static const std::pair<const char*, DType> table[] = {
      {"F32", DType::f32},   {"F16", DType::f16},         {"BF16", DType::bf16},       {"F64", DType::f64},
      {"I8", DType::i8},     {"I16", DType::i16},         {"I32", DType::i32},         {"I64", DType::i64},
      {"U8", DType::u8},     {"U16", DType::u16},         {"U32", DType::u32},         {"U64", DType::u64},
      {"BOOL", DType::boolean}, {"F8_E4M3", DType::f8_e4m3}, {"F8_E5M2", DType::f8_e5m2},
  };
  for (const auto& e : table)
    if (s == e.first) return e.second;
  return DType::invalid;
}

// Largest header accepted (the reference implementation's limit).
constexpr uint64_t kSafetensorsMaxHeader = 100ull << 20;

// Parses a safetensors image of `size` bytes at `d`; `name` is used in messages.
inline Result<StFile> safetensors_parse(const uint8_t* d, uint64_t size, const std::string& name) {
  auto bad = [&](const std::string& what) { return make_error(Errc::bad_format, name + ": " + what); };
  if (size < 8) return bad(strf("too small to be a safetensors file (%llu bytes)", static_cast<unsigned long long>(size)));
  uint64_t hlen = rd_u64(d);
  if (hlen > size - 8)
    return bad(strf("header length %llu runs past the end of the file (%s)", static_cast<unsigned long long>(hlen),
                    human_bytes(size).c_str()));
  if (hlen > kSafetensorsMaxHeader) return bad(strf("header of %s is larger than the 100 MiB limit", human_bytes(hlen).c_str()));
  if (hlen < 2 || d[8] != '{') return bad("the header is not a JSON object");
  auto header = json_parse(std::string_view(reinterpret_cast<const char*>(d + 8), static_cast<size_t>(hlen)), name + " header");
  if (!header) return header.error();
  const Json& h = *header;
  if (!h.is_object()) return bad("the header is not a JSON object");
  const uint64_t data_start = 8 + hlen, avail = size - data_start;
  StFile out;
  out.path = name;
  std::vector<std::string_view> seen;
  for (const auto& [key, v] : h.members) {
    if (key == "__metadata__") {
      if (!v.is_object()) return bad("__metadata__ is not an object");
      for (const auto& [mk, mv] : v.members) {
        if (!mv.is_string()) return bad(strf("__metadata__ value of '%s' is not a string", printable(mk).c_str()));
        out.metadata.emplace_back(mk, mv.str);
      }
      continue;
    }
    std::string tn = printable(key);
    if (!v.is_object()) return bad(strf("tensor '%s': entry is not an object", tn.c_str()));
    const Json& dt = v["dtype"];
    const Json& shape = v["shape"];
    const Json& offs = v["data_offsets"];
    if (!dt.is_string()) return bad(strf("tensor '%s': missing dtype", tn.c_str()));
    StTensor t;
    t.name = key;
    t.type = safetensors_dtype(dt.str);
    if (t.type == DType::invalid) return bad(strf("tensor '%s': unknown dtype '%s'", tn.c_str(), printable(dt.str).c_str()));
    if (!shape.is_array()) return bad(strf("tensor '%s': missing shape", tn.c_str()));
    if (shape.items.size() > 8) return bad(strf("tensor '%s': %zu dimensions (at most 8)", tn.c_str(), shape.items.size()));
    uint64_t nel = 1;
    for (const auto& s : shape.items) {
      if (!s.is_number() || !s.is_int || s.i < 0) return bad(strf("tensor '%s': shape holds a non-integer or negative value", tn.c_str()));
      if (mul_overflows(nel, static_cast<uint64_t>(s.i), &nel) || nel > static_cast<uint64_t>(INT64_MAX))
        return bad(strf("tensor '%s': shape overflows", tn.c_str()));
      t.shape.push_back(s.i);
    }
    if (!offs.is_array() || offs.items.size() != 2 || !offs.items[0].is_int || !offs.items[1].is_int ||
        offs.items[0].i < 0 || offs.items[1].i < offs.items[0].i)
      return bad(strf("tensor '%s': data_offsets must be [begin, end] with 0 <= begin <= end", tn.c_str()));
    uint64_t b = static_cast<uint64_t>(offs.items[0].i), e = static_cast<uint64_t>(offs.items[1].i);
    uint64_t want = 0;
    if (mul_overflows(nel, dtype_traits(t.type)->bytes, &want) || want != e - b)
      return bad(strf("tensor '%s': data_offsets span %llu bytes but the shape and dtype need %llu", tn.c_str(),
                      static_cast<unsigned long long>(e - b), static_cast<unsigned long long>(want)));
    if (e > avail)
      return bad(strf("tensor '%s' data [offset %llu, size %s] runs past the end of the file (%s)", tn.c_str(),
                      static_cast<unsigned long long>(data_start + b), human_bytes(e - b).c_str(), human_bytes(size).c_str()));
    t.data = d + data_start + b;
    t.nbytes = e - b;
    t.file_offset = data_start + b;
    out.tensors.push_back(std::move(t));
  }
  // duplicate names (JSON allows repeated keys) and overlapping data
  std::vector<size_t> order(out.tensors.size());
  for (size_t k = 0; k < order.size(); k++) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return out.tensors[a].name < out.tensors[b].name; });
  for (size_t k = 1; k < order.size(); k++)
    if (out.tensors[order[k]].name == out.tensors[order[k - 1]].name)
      return bad(strf("tensor '%s' is listed twice", printable(out.tensors[order[k]].name).c_str()));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return out.tensors[a].file_offset < out.tensors[b].file_offset; });
  for (size_t k = 1; k < order.size(); k++) {
    const auto& a = out.tensors[order[k - 1]];
    const auto& b = out.tensors[order[k]];
    if (a.nbytes > 0 && b.nbytes > 0 && a.file_offset + a.nbytes > b.file_offset)
      return bad(strf("tensors '%s' and '%s' overlap", printable(a.name).c_str(), printable(b.name).c_str()));
  }
  return out;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/16_model_desc.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Model description: one in-memory shape for GGUF files and safetensors directories ====
// Whatever the source, tensors carry GGUF names (blk.{i}.attn_q.weight) and ggml dimension order
// (ne[0] = row length), metadata is readable under GGUF keys ({arch}.block_count, ...), and
// Hugging Face conventions are recorded (not hidden) where they differ from GGUF's.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// A tensor in the mapped file (weights are used in place).
struct TensorView {
  std::string name;  // GGUF naming
  DType type = DType::f32;
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0]: row length (innermost); ne[1]: rows; ...
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  // MLX affine (mlx_q4 / mlx_q8): w = q * scale + bias, groups of `group_size` along a row;
  // `data` holds [rows][ne0 * bits / 32] uint32 words (lowest bits first), `scales` and `biases`
  // are [rows][ne0 / group_size] of `aux_type` (f16, bf16 or f32).
  const uint8_t* scales = nullptr;
  const uint8_t* biases = nullptr;
  DType aux_type = DType::f32;
  int group_size = 0;
  std::string file;          // source file (messages)
  uint64_t file_offset = 0;  // absolute offset of `data` in that file

  int64_t nelements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t rows() const { return ne[1] * ne[2] * ne[3]; }
  std::string shape_string() const {
    std::string s = "[";
    for (int k = 0; k < n_dims; k++) s += (k ? ", " : "") + std::to_string(ne[k]);
    return s + "]";
  }
};

// A scalar metadata value under its GGUF key.
struct MetaValue {
  enum class Kind : uint8_t { number, boolean, string } kind = Kind::number;
  bool is_int = false;
  int64_t i = 0;
  double num = 0;
  std::string str;
};

struct HParams {
  std::string arch;
  int64_t n_vocab = 0, n_ctx_train = 0, n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0;
  int64_t head_dim = 0, head_dim_v = 0;  // key / value length per head
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  bool tied_embeddings = false;  // no output.weight: the output uses token_embd
};

// Vocabulary as stored in the file (the tokenizer builds its tables from this).
struct VocabData {
  std::string model;  // GGUF tokenizer.ggml.model: "gpt2" (byte-level BPE), "llama" (SentencePiece), ...
  std::string pre;    // GGUF tokenizer.ggml.pre: "llama-bpe", "qwen2", "smollm", "default", ...
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
  std::vector<std::string> merges;  // "left right"
  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1, sep = -1;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

struct ModelDesc {
  std::string path;    // as given
  std::string format;  // "gguf" or "safetensors"
  std::string arch;    // architecture name (selects the architecture definition)
  std::string name;    // general.name / model directory name
  uint64_t file_bytes = 0;
  std::vector<std::shared_ptr<MappedFile>> files;
  std::optional<GgufFile> gguf;  // GGUF: all metadata (views into files[0])
  Json config, tokenizer_json, tokenizer_config, generation_config;  // safetensors directories
  std::vector<std::pair<std::string, std::string>> st_metadata;     // safetensors __metadata__
  std::map<std::string, MetaValue, std::less<>> meta;  // scalar metadata under GGUF keys
  std::vector<TensorView> tensors;
  std::unordered_map<std::string, size_t> tensor_index;
  HParams hp;
  VocabData vocab;
  std::string chat_template;
  bool has_chat_template = false;
  // Hugging Face llama checkpoints keep q/k rows in the order of rotate-half RoPE; GGUF llama files
  // permute them for adjacent-pair RoPE. True when q/k are in the Hugging Face order.
  bool hf_qk_order = false;
  std::vector<std::unique_ptr<float[]>> owned;  // small tensors converted at load (e.g. norm offsets)

  const TensorView* find(std::string_view tensor_name) const {
    auto it = tensor_index.find(std::string(tensor_name));
    return it == tensor_index.end() ? nullptr : &tensors[it->second];
  }
  const MetaValue* find_meta(std::string_view key) const {
    auto it = meta.find(key);
    return it == meta.end() ? nullptr : &it->second;
  }
  std::optional<double> meta_number(std::string_view key) const {
    const MetaValue* v = find_meta(key);
    if (!v || v->kind == MetaValue::Kind::string) return std::nullopt;
    return v->num;
  }
  std::optional<std::string_view> meta_string(std::string_view key) const {
    const MetaValue* v = find_meta(key);
    if (!v || v->kind != MetaValue::Kind::string) return std::nullopt;
    return std::string_view(v->str);
  }
  // "{arch}.block_count" style lookups.
  std::optional<double> arch_number(std::string_view suffix) const {
    return meta_number(arch + "." + std::string(suffix));
  }
  uint64_t n_params() const {
    uint64_t n = 0;
    for (const auto& t : tensors) n += static_cast<uint64_t>(t.nelements());
    return n;
  }
};

// ---- GGUF -> ModelDesc ----
inline Result<void> desc_from_gguf(ModelDesc& m) {
  const GgufFile& g = *m.gguf;
  const MappedFile& f = *m.files[0];
  for (const auto& e : g.kv) {
    const GgufValue& v = e.value;
    MetaValue mv;
    if (v.type == GgufType::string) {
      mv.kind = MetaValue::Kind::string;
      mv.str = std::string(v.as_string());
    } else if (v.type == GgufType::boolean) {
      mv.kind = MetaValue::Kind::boolean;
      mv.is_int = true;
      mv.i = v.as_int();
      mv.num = static_cast<double>(mv.i);
    } else if (v.is_number()) {
      mv.is_int = v.is_integer();
      mv.i = v.as_int();
      mv.num = v.as_number();
    } else {
      continue;  // arrays stay in `gguf`
    }
    m.meta.emplace(std::string(e.key), std::move(mv));
  }
  m.arch = std::string(m.meta_string("general.architecture").value_or(""));
  m.name = std::string(m.meta_string("general.name").value_or(""));
  for (const auto& ti : g.tensors) {
    TensorView t;
    t.name = std::string(ti.name);
    t.type = ti.type;
    t.n_dims = static_cast<int>(ti.n_dims);
    for (int k = 0; k < 4; k++) t.ne[k] = ti.ne[k];
    t.data = f.data() + g.data_offset + ti.offset;
    t.nbytes = ti.nbytes;
    t.file = f.path();
    t.file_offset = g.data_offset + ti.offset;
    m.tensors.push_back(std::move(t));
  }
  // vocabulary
  VocabData& vd = m.vocab;
  vd.model = std::string(m.meta_string("tokenizer.ggml.model").value_or(""));
  vd.pre = std::string(m.meta_string("tokenizer.ggml.pre").value_or(""));
  auto bad = [&](const std::string& what) { return make_error(Errc::bad_format, m.path + ": " + what); };
  if (const GgufValue* v = g.find("tokenizer.ggml.tokens")) {
    if (v->type != GgufType::array || v->elem != GgufType::string) return bad("tokenizer.ggml.tokens is not an array of strings");
    vd.tokens.assign(v->strings.begin(), v->strings.end());
  }
  auto numeric_array = [&](const char* key, auto& out) -> Result<void> {
    const GgufValue* v = g.find(key);
    if (!v) return {};
    if (v->type != GgufType::array || !gguf_scalar_size(v->elem))
      return bad(strf("%s is not a numeric array", key));
    if (v->len != vd.tokens.size())
      return bad(strf("%s has %llu entries but the vocabulary has %zu tokens", key,
                      static_cast<unsigned long long>(v->len), vd.tokens.size()));
    out.resize(static_cast<size_t>(v->len));
    for (uint64_t k = 0; k < v->len; k++) out[k] = static_cast<std::decay_t<decltype(out[0])>>(v->number(k));
    return {};
  };
  if (auto r = numeric_array("tokenizer.ggml.scores", vd.scores); !r) return r.error();
  if (auto r = numeric_array("tokenizer.ggml.token_type", vd.types); !r) return r.error();
  if (const GgufValue* v = g.find("tokenizer.ggml.merges")) {
    if (v->type != GgufType::array || v->elem != GgufType::string) return bad("tokenizer.ggml.merges is not an array of strings");
    vd.merges.assign(v->strings.begin(), v->strings.end());
  }
  auto id = [&](const char* key, int32_t& out) {
    if (auto v = m.meta_number(key)) {
      double d = *v;
      out = (d >= 0 && d < static_cast<double>(vd.tokens.size())) ? static_cast<int32_t>(d) : -1;
    }
  };
  id("tokenizer.ggml.bos_token_id", vd.bos);
  id("tokenizer.ggml.eos_token_id", vd.eos);
  id("tokenizer.ggml.eot_token_id", vd.eot);
  id("tokenizer.ggml.eom_token_id", vd.eom);
  id("tokenizer.ggml.unknown_token_id", vd.unk);
  id("tokenizer.ggml.padding_token_id", vd.pad);
  id("tokenizer.ggml.seperator_token_id", vd.sep);
  auto flag = [&](const char* key, std::optional<bool>& out) {
    if (const MetaValue* v = m.find_meta(key); v && v->kind != MetaValue::Kind::string) out = v->num != 0;
  };
  flag("tokenizer.ggml.add_bos_token", vd.add_bos);
  flag("tokenizer.ggml.add_eos_token", vd.add_eos);
  flag("tokenizer.ggml.add_space_prefix", vd.add_space_prefix);
  if (auto t = m.meta_string("tokenizer.chat_template")) {
    m.chat_template = std::string(*t);
    m.has_chat_template = true;
  }
  return {};
}

// ---- Hugging Face config.json -> GGUF keys and names ----
struct HfArchInfo {
  const char* model_type;  // config.json "model_type"
  const char* arch;        // our architecture name
  bool norm_plus_one;      // norms are stored as w - 1 (gemma): GGUF stores w
  bool post_attn_is_post_norm;  // "post_attention_layernorm" is a post-norm, not the FFN pre-norm
};

inline const HfArchInfo* hf_arch_info(std::string_view model_type) {
  static const HfArchInfo table[] = {
      {"llama", "llama", false, false},     {"mistral", "llama", false, false},
      {"qwen2", "qwen2", false, false},     {"qwen3", "qwen3", false, false},
      {"gemma3_text", "gemma3", true, true}, {"gemma3", "gemma3", true, true},
  };
  for (const auto& e : table)
    if (model_type == e.model_type) return &e;
  return nullptr;
}

// Maps a Hugging Face tensor name (prefix already stripped) to its GGUF name, or "" if unknown.
inline std::string hf_tensor_name(std::string_view n, const HfArchInfo& info) {
  if (n == "embed_tokens.weight") return "token_embd.weight";
  if (n == "norm.weight") return "output_norm.weight";
  if (n == "lm_head.weight") return "output.weight";
  if (n.substr(0, 7) != "layers.") return std::string();
  size_t dot = n.find('.', 7);
  if (dot == std::string_view::npos) return std::string();
  std::string_view layer = n.substr(7, dot - 7), rest = n.substr(dot + 1);
  if (layer.empty() || layer.find_first_not_of("0123456789") != std::string_view::npos) return std::string();
  static const std::pair<const char*, const char*> map[] = {
      {"input_layernorm", "attn_norm"},     {"self_attn.q_proj", "attn_q"},
      {"self_attn.k_proj", "attn_k"},       {"self_attn.v_proj", "attn_v"},
      {"self_attn.o_proj", "attn_output"},  {"self_attn.q_norm", "attn_q_norm"},
      {"self_attn.k_norm", "attn_k_norm"},  {"mlp.gate_proj", "ffn_gate"},
      {"mlp.up_proj", "ffn_up"},            {"mlp.down_proj", "ffn_down"},
      {"pre_feedforward_layernorm", "ffn_norm"}, {"post_feedforward_layernorm", "post_ffw_norm"},
  };
  size_t last = rest.rfind('.');
  if (last == std::string_view::npos) return std::string();
  std::string_view base = rest.substr(0, last), suffix = rest.substr(last);  // ".weight", ".bias", ".scales", ...
  const char* g = nullptr;
  if (base == "post_attention_layernorm") g = info.post_attn_is_post_norm ? "post_attention_norm" : "ffn_norm";
  for (const auto& [hf, gg] : map)
    if (base == hf) g = gg;
  if (!g) return std::string();
  return "blk." + std::string(layer) + "." + g + std::string(suffix);
}

inline void meta_set_num(ModelDesc& m, const std::string& key, const Json& j) {
  if (!j.is_number() && !j.is_bool()) return;
  MetaValue v;
  if (j.is_bool()) {
    v.kind = MetaValue::Kind::boolean;
    v.is_int = true;
    v.i = j.boolean;
    v.num = j.boolean;
  } else {
    v.is_int = j.is_int;
    v.i = j.as_int();
    v.num = j.num;
  }
  m.meta[key] = std::move(v);
}
inline void meta_set_str(ModelDesc& m, const std::string& key, std::string value) {
  MetaValue v;
  v.kind = MetaValue::Kind::string;
  v.str = std::move(value);
  m.meta[key] = std::move(v);
}

// Reads config.json into GGUF-style keys. Multimodal configs keep the text model in text_config.
inline Result<void> desc_meta_from_config(ModelDesc& m, const HfArchInfo*& info) {
  const Json* cfg = &m.config;
  std::string model_type(m.config["model_type"].as_string());
  if (const Json* tc = m.config.find("text_config"); tc && tc->is_object()) {
    cfg = tc;
    if (tc->find("model_type")) model_type = std::string((*tc)["model_type"].as_string());
  }
  info = hf_arch_info(model_type);
  if (!info)
    return make_error(Errc::unsupported, strf("%s: config.json model_type '%s' is not a supported architecture "
                                              "(llama, mistral, qwen2, qwen3, gemma3)",
                                              m.path.c_str(), printable(model_type).c_str()));
  m.arch = info->arch;
  const std::string a = m.arch + ".";
  const Json& c = *cfg;
  meta_set_str(m, "general.architecture", m.arch);
  meta_set_str(m, "general.name", m.name);
  meta_set_num(m, a + "block_count", c["num_hidden_layers"]);
  meta_set_num(m, a + "embedding_length", c["hidden_size"]);
  meta_set_num(m, a + "feed_forward_length", c["intermediate_size"]);
  meta_set_num(m, a + "attention.head_count", c["num_attention_heads"]);
  meta_set_num(m, a + "attention.head_count_kv",
               c.find("num_key_value_heads") ? c["num_key_value_heads"] : c["num_attention_heads"]);
  meta_set_num(m, a + "context_length", c["max_position_embeddings"]);
  meta_set_num(m, a + "attention.layer_norm_rms_epsilon", c["rms_norm_eps"]);
  meta_set_num(m, a + "rope.freq_base", c.find("rope_theta") ? c["rope_theta"] : Json::null_value());
  meta_set_num(m, a + "vocab_size", c["vocab_size"]);
  if (c.find("head_dim") && c["head_dim"].is_number()) {
    meta_set_num(m, a + "attention.key_length", c["head_dim"]);
    meta_set_num(m, a + "attention.value_length", c["head_dim"]);
  }
  meta_set_num(m, a + "attention.sliding_window", c["sliding_window"]);
  meta_set_num(m, a + "attention.sliding_window_pattern", c["sliding_window_pattern"]);
  meta_set_num(m, a + "rope.freq_base_swa", c["rope_local_base_freq"]);
  meta_set_num(m, a + "attn_logit_softcapping", c["attn_logit_softcapping"]);
  meta_set_num(m, a + "final_logit_softcapping", c["final_logit_softcapping"]);
  meta_set_num(m, a + "attention.query_pre_attn_scalar", c["query_pre_attn_scalar"]);
  if (const Json* rs = c.find("rope_scaling"); rs && rs->is_object()) {
    std::string type(rs->find("rope_type") ? (*rs)["rope_type"].as_string() : (*rs)["type"].as_string());
    meta_set_str(m, a + "rope.scaling.type", type);
    meta_set_num(m, a + "rope.scaling.factor", (*rs)["factor"]);
    meta_set_num(m, a + "rope.scaling.original_context_length", (*rs)["original_max_position_embeddings"]);
    meta_set_num(m, a + "rope.scaling.low_freq_factor", (*rs)["low_freq_factor"]);
    meta_set_num(m, a + "rope.scaling.high_freq_factor", (*rs)["high_freq_factor"]);
  }
  if (const Json* t = c.find("tie_word_embeddings"); t && t->is_bool()) meta_set_num(m, "general.tie_word_embeddings", *t);
  else if (const Json* t2 = m.config.find("tie_word_embeddings"); t2 && t2->is_bool()) meta_set_num(m, "general.tie_word_embeddings", *t2);
  return {};
}

// Fills `hp` from the GGUF-style metadata and the tensor shapes.
inline Result<void> desc_hparams(ModelDesc& m) {
  HParams& hp = m.hp;
  hp.arch = m.arch;
  auto num = [&](const char* suffix, int64_t fallback) -> int64_t {
    auto v = m.arch_number(suffix);
    return v && std::isfinite(*v) && *v >= 0 && *v < 9.2e18 ? static_cast<int64_t>(*v) : fallback;
  };
  hp.n_layer = num("block_count", 0);
  hp.n_embd = num("embedding_length", 0);
  hp.n_head = num("attention.head_count", 0);
  hp.n_head_kv = num("attention.head_count_kv", hp.n_head);
  hp.n_ff = num("feed_forward_length", 0);
  hp.n_ctx_train = num("context_length", 0);
  hp.head_dim = num("attention.key_length", hp.n_head > 0 ? hp.n_embd / hp.n_head : 0);
  hp.head_dim_v = num("attention.value_length", hp.head_dim);
  if (auto v = m.arch_number("attention.layer_norm_rms_epsilon")) hp.rms_eps = static_cast<float>(*v);
  if (auto v = m.arch_number("rope.freq_base")) hp.rope_freq_base = static_cast<float>(*v);
  const TensorView* emb = m.find("token_embd.weight");
  hp.n_vocab = num("vocab_size", 0);
  if (hp.n_vocab == 0 && !m.vocab.tokens.empty()) hp.n_vocab = static_cast<int64_t>(m.vocab.tokens.size());
  if (hp.n_vocab == 0 && emb) hp.n_vocab = emb->ne[1];
  hp.tied_embeddings = m.find("output.weight") == nullptr;
  return {};
}

inline void desc_index(ModelDesc& m) {
  m.tensor_index.clear();
  for (size_t k = 0; k < m.tensors.size(); k++) m.tensor_index.emplace(m.tensors[k].name, k);
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/17_loader.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Loader: a path (GGUF file, safetensors file, Hugging Face / MLX directory) -> ModelDesc ====
namespace llminfer {
inline namespace v0_1 {
namespace detail {

inline bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
inline bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

inline std::string parent_dir(const std::string& path) {
  size_t p = path.find_last_of("/\\");
  if (p == std::string::npos) return ".";
  if (p == 0) return "/";
  return path.substr(0, p);
}

// Reads and parses a small JSON file of a model directory (mapped, not read).
inline Result<Json> load_json_file(const std::string& path) {
  auto f = MappedFile::open(path);
  if (!f) return f.error();
  return json_parse(f->view(), path);
}

// Vocabulary from a Hugging Face tokenizer.json: ids, merges, added tokens and their kinds.
// (The tokenizer interprets normalizer / pre-tokenizer / post-processor itself.)
inline Result<void> vocab_from_tokenizer_json(ModelDesc& m) {
  const Json& tj = m.tokenizer_json;
  const Json& model = tj["model"];
  auto bad = [&](const std::string& what) { return make_error(Errc::bad_format, m.path + "/tokenizer.json: " + what); };
  if (!model.is_object()) return bad("no \"model\" object");
  std::string_view type = model["type"].as_string();
  if (!type.empty() && type != "BPE") return bad(strf("tokenizer model type '%s' is not supported (only BPE)", printable(type).c_str()));
  const Json& vocab = model["vocab"];
  if (!vocab.is_object()) return bad("model.vocab is not an object");
  VocabData& vd = m.vocab;
  int64_t max_id = -1;
  for (const auto& [tok, id] : vocab.members) {
    if (!id.is_int || id.i < 0 || id.i >= (1 << 24)) return bad(strf("token '%s' has an invalid id", printable(tok).c_str()));
    max_id = std::max<int64_t>(max_id, id.i);
  }
  const Json& added = tj["added_tokens"];
  for (const auto& a : added.items) {
    const Json& id = a["id"];
    if (!id.is_int || id.i < 0 || id.i >= (1 << 24)) return bad("an added token has an invalid id");
    max_id = std::max<int64_t>(max_id, id.i);
  }
  size_t n = static_cast<size_t>(max_id + 1);
  vd.tokens.assign(n, std::string());
  vd.types.assign(n, 5);  // unused until seen
  bool byte_fallback = model["byte_fallback"].as_bool(false);
  for (const auto& [tok, id] : vocab.members) {
    auto k = static_cast<size_t>(id.i);
    vd.tokens[k] = tok;
    bool is_byte = byte_fallback && tok.size() == 6 && starts_with(tok, "<0x") && tok[5] == '>';
    vd.types[k] = is_byte ? 6 : 1;
  }
  for (const auto& a : added.items) {
    auto k = static_cast<size_t>(a["id"].i);
    vd.tokens[k] = std::string(a["content"].as_string());
    vd.types[k] = a["special"].as_bool(false) ? 3 : 4;
  }
  for (size_t k = 0; k < n; k++)
    if (vd.types[k] == 5 && vd.tokens[k].empty()) vd.tokens[k] = "[PAD" + std::to_string(k) + "]";
  const Json& merges = model["merges"];
  vd.merges.reserve(merges.items.size());
  for (const auto& mg : merges.items) {
    if (mg.is_string()) {
      vd.merges.push_back(mg.str);
    } else if (mg.is_array() && mg.items.size() == 2 && mg.items[0].is_string() && mg.items[1].is_string()) {
      vd.merges.push_back(mg.items[0].str + " " + mg.items[1].str);
    } else {
      return bad("model.merges holds an entry that is neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  // SentencePiece-style (Metaspace / "▁" normalizer, byte fallback) or byte-level (GPT-2) BPE
  std::string_view pre_type = tj["pre_tokenizer"]["type"].as_string();
  std::string_view dec_type = tj["decoder"]["type"].as_string();
  bool spm = byte_fallback || pre_type == "Metaspace" || dec_type == "Metaspace";
  if (tj["normalizer"].is_object()) {
    std::string_view nt = tj["normalizer"]["type"].as_string();
    if (nt == "Replace" && tj["normalizer"]["content"].as_string() == "\xE2\x96\x81") spm = true;
    for (const auto& sub : tj["normalizer"]["normalizers"].items)
      if (sub["type"].as_string() == "Replace" && sub["content"].as_string() == "\xE2\x96\x81") spm = true;
  }
  vd.model = spm ? "llama" : "gpt2";
  // special tokens named in tokenizer_config.json
  auto token_id = [&](const Json& entry) -> int32_t {
    std::string_view s = entry.is_object() ? entry["content"].as_string() : entry.as_string();
    if (s.empty()) return -1;
    for (const auto& a : added.items)
      if (a["content"].as_string() == s) return static_cast<int32_t>(a["id"].i);
    if (const Json* id = vocab.find(s)) return static_cast<int32_t>(id->i);
    return -1;
  };
  const Json& tc = m.tokenizer_config;
  vd.bos = token_id(tc["bos_token"]);
  vd.eos = token_id(tc["eos_token"]);
  vd.unk = token_id(tc["unk_token"]);
  vd.pad = token_id(tc["pad_token"]);
  if (const Json* ab = tc.find("add_bos_token"); ab && ab->is_bool()) vd.add_bos = ab->boolean;
  if (const Json* ae = tc.find("add_eos_token"); ae && ae->is_bool()) vd.add_eos = ae->boolean;
  return {};
}

// Chat template of a directory: tokenizer_config.json "chat_template" (a string, or a list of
// {name, template} where "default" is used), else a chat_template.jinja file.
inline void chat_template_from_dir(ModelDesc& m, const std::string& dir) {
  const Json& ct = m.tokenizer_config["chat_template"];
  if (ct.is_string()) {
    m.chat_template = ct.str;
    m.has_chat_template = true;
    return;
  }
  if (ct.is_array()) {
    for (const auto& e : ct.items) {
      if (e["name"].as_string() == "default" && e["template"].is_string()) {
        m.chat_template = e["template"].str;
        m.has_chat_template = true;
        return;
      }
    }
  }
  std::string jinja = path_join(dir, "chat_template.jinja");
  if (file_exists(jinja)) {
    if (auto f = MappedFile::open(jinja)) {
      m.chat_template = std::string(f->view());
      m.has_chat_template = true;
    }
  }
}

// Turns the safetensors tensors into TensorViews with GGUF names, combining MLX triples
// (weight U32 + scales + biases) into one quantized view.
inline Result<void> desc_tensors_from_safetensors(ModelDesc& m, std::vector<StFile>& files, const HfArchInfo& info) {
  auto bad = [&](const std::string& what) { return make_error(Errc::bad_format, m.path + ": " + what); };
  const Json& q = m.config.find("quantization") ? m.config["quantization"] : m.config["quantization_config"];
  int cfg_group = static_cast<int>(q["group_size"].as_int(64));
  // all tensors by their (prefix-stripped) Hugging Face name
  std::unordered_map<std::string, const StTensor*> by_name;
  std::vector<std::pair<std::string, const StTensor*>> ordered;
  for (const auto& f : files) {
    for (const auto& t : f.tensors) {
      std::string_view n = t.name;
      for (std::string_view prefix : {"language_model.model.", "model.language_model.", "language_model.", "model."}) {
        if (starts_with(n, prefix)) {
          n.remove_prefix(prefix.size());
          break;
        }
      }
      if (!by_name.emplace(std::string(n), &t).second)
        return bad(strf("tensor '%s' appears twice", printable(t.name).c_str()));
      ordered.emplace_back(std::string(n), &t);
    }
  }
  for (const auto& [hf, t] : ordered) {
    if (ends_with(hf, ".scales") || ends_with(hf, ".biases")) {
      std::string base = hf.substr(0, hf.size() - 7);
      if (by_name.count(base + ".weight")) continue;  // part of an MLX triple
    }
    std::string gname = hf_tensor_name(hf, info);
    if (gname.empty()) gname = hf;  // unknown tensors keep their name (listed, never computed with)
    TensorView v;
    v.name = gname;
    v.type = t->type;
    v.data = t->data;
    v.nbytes = t->nbytes;
    v.file_offset = t->file_offset;
    for (const auto& f : files)
      if (t >= f.tensors.data() && t < f.tensors.data() + f.tensors.size()) v.file = f.path;
    if (t->shape.size() > 4) return bad(strf("tensor '%s' has %zu dimensions (at most 4)", printable(hf).c_str(), t->shape.size()));
    v.n_dims = static_cast<int>(t->shape.size());
    for (int k = 0; k < v.n_dims; k++) v.ne[k] = t->shape[t->shape.size() - 1 - static_cast<size_t>(k)];
    if (ends_with(hf, ".weight") && t->type == DType::u32) {
      std::string base = hf.substr(0, hf.size() - 7);
      auto si = by_name.find(base + ".scales"), bi = by_name.find(base + ".biases");
      if (si != by_name.end() && bi != by_name.end()) {
        const StTensor* s = si->second;
        const StTensor* b = bi->second;
        if (v.n_dims != 2 || s->shape.size() != 2 || s->shape != b->shape || s->type != b->type ||
            s->shape[0] != t->shape[0] ||
            (s->type != DType::f16 && s->type != DType::bf16 && s->type != DType::f32))
          return bad(strf("MLX tensor '%s': scales/biases do not match the weight", printable(hf).c_str()));
        int64_t groups = s->shape[1], words = t->shape[1];
        if (groups <= 0) return bad(strf("MLX tensor '%s' has no groups", printable(hf).c_str()));
        int group = cfg_group > 0 ? cfg_group : 64;
        int64_t n_in = groups * group;
        if ((words * 32) % n_in != 0) return bad(strf("MLX tensor '%s': cannot infer its bit width", printable(hf).c_str()));
        int64_t bits = words * 32 / n_in;
        if (bits != 4 && bits != 8)
          return bad(strf("MLX tensor '%s' is %lld-bit; only 4- and 8-bit affine quantization is supported",
                          printable(hf).c_str(), static_cast<long long>(bits)));
        v.type = bits == 4 ? DType::mlx_q4 : DType::mlx_q8;
        v.ne[0] = n_in;
        v.scales = s->data;
        v.biases = b->data;
        v.aux_type = s->type;
        v.group_size = group;
      }
    }
    // Gemma stores norms as (w - 1): GGUF's convention (and ours) is w itself.
    if (info.norm_plus_one && ends_with(v.name, "norm.weight") && v.n_dims == 1) {
      if (v.type != DType::f32 && v.type != DType::f16 && v.type != DType::bf16)
        return bad(strf("norm tensor '%s' has type %s", printable(hf).c_str(), dtype_name(v.type)));
      auto n = static_cast<size_t>(v.ne[0]);
      std::unique_ptr<float[]> w(new float[n]);
      for (size_t k = 0; k < n; k++) {
        float x = v.type == DType::f32 ? [&] { float f; std::memcpy(&f, v.data + 4 * k, 4); return f; }()
                  : v.type == DType::f16 ? fp16_to_f32(rd_u16(v.data + 2 * k))
                                         : bf16_to_f32(rd_u16(v.data + 2 * k));
        w[k] = x + 1.0f;
      }
      v.type = DType::f32;
      v.data = reinterpret_cast<const uint8_t*>(w.get());
      v.nbytes = n * 4;
      m.owned.push_back(std::move(w));
    }
    m.tensors.push_back(std::move(v));
  }
  return {};
}

inline Result<std::shared_ptr<MappedFile>> map_file(const std::string& path) {
  auto f = MappedFile::open(path);
  if (!f) return f.error();
  return std::make_shared<MappedFile>(std::move(*f));
}

// A safetensors model: `dir` holds config.json (and tokenizer files); `weights` are the files.
inline Result<std::shared_ptr<ModelDesc>> load_safetensors_model(const std::string& path, const std::string& dir,
                                                                 std::vector<std::string> weights) {
  auto m = std::make_shared<ModelDesc>();
  m->path = path;
  m->format = "safetensors";
  m->name = base_name(dir == "." ? path : dir);
  std::string cfg_path = path_join(dir, "config.json");
  if (!file_exists(cfg_path))
    return make_error(Errc::bad_format, path + ": no config.json beside the safetensors weights");
  auto cfg = load_json_file(cfg_path);
  if (!cfg) return cfg.error();
  m->config = std::move(*cfg);
  for (auto [file, slot] : {std::pair<const char*, Json*>{"tokenizer.json", &m->tokenizer_json},
                            {"tokenizer_config.json", &m->tokenizer_config},
                            {"generation_config.json", &m->generation_config}}) {
    std::string p = path_join(dir, file);
    if (!file_exists(p)) continue;
    auto j = load_json_file(p);
    if (!j) return j.error();
    *slot = std::move(*j);
  }
  const HfArchInfo* info = nullptr;
  if (auto r = desc_meta_from_config(*m, info); !r) return r.error();
  std::vector<StFile> parsed;
  for (const auto& w : weights) {
    auto f = map_file(w);
    if (!f) return f.error();
    auto st = safetensors_parse((*f)->data(), (*f)->size(), w);
    if (!st) return st.error();
    m->file_bytes += (*f)->size();
    for (auto& kv : st->metadata) m->st_metadata.push_back(kv);
    m->files.push_back(std::move(*f));
    parsed.push_back(std::move(*st));
  }
  if (auto r = desc_tensors_from_safetensors(*m, parsed, *info); !r) return r.error();
  desc_index(*m);
  if (m->tokenizer_json.is_object())
    if (auto r = vocab_from_tokenizer_json(*m); !r) return r.error();
  chat_template_from_dir(*m, dir);
  m->hf_qk_order = true;
  if (auto r = desc_hparams(*m); !r) return r.error();
  if (m->find_meta("general.tie_word_embeddings") && m->meta_number("general.tie_word_embeddings").value_or(0) == 0 &&
      m->hp.tied_embeddings)
    return make_error(Errc::tensor_missing, path + ": config.json says the embeddings are not tied, but lm_head.weight is missing");
  return m;
}

// The weight files of a model directory: the index's shards, or model.safetensors, or every
// *.safetensors file.
inline Result<std::vector<std::string>> safetensors_files_of_dir(const std::string& dir) {
  std::string index = path_join(dir, "model.safetensors.index.json");
  std::vector<std::string> out;
  if (file_exists(index)) {
    auto j = load_json_file(index);
    if (!j) return j.error();
    const Json& wm = (*j)["weight_map"];
    if (!wm.is_object()) return make_error(Errc::bad_format, index + ": no weight_map object");
    for (const auto& [tensor, file] : wm.members) {
      if (!file.is_string() || file.str.empty() || file.str.find('/') != std::string::npos ||
          file.str.find('\\') != std::string::npos || file.str == "." || file.str == "..")
        return make_error(Errc::bad_format, strf("%s: tensor '%s' maps to an invalid file name", index.c_str(), printable(tensor).c_str()));
      std::string p = path_join(dir, file.str);
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    }
    for (const auto& p : out)
      if (!file_exists(p)) return make_error(Errc::io, index + ": shard " + base_name(p) + " is missing");
    if (out.empty()) return make_error(Errc::bad_format, index + ": the weight_map is empty");
    return out;
  }
  std::string single = path_join(dir, "model.safetensors");
  if (file_exists(single)) return std::vector<std::string>{single};
  for (const auto& name : list_directory(dir))
    if (ends_with(name, ".safetensors")) out.push_back(path_join(dir, name));
  if (out.empty()) return make_error(Errc::io, dir + ": no .gguf file and no safetensors weights in this directory");
  return out;
}

// Opens a model description from a GGUF file, a safetensors file, or a model directory.
inline Result<std::shared_ptr<ModelDesc>> load_description(const std::string& path) {
  if (path.empty()) return make_error(Errc::invalid_argument, "no model path given");
  if (is_directory(path)) {
    auto files = safetensors_files_of_dir(path);
    if (!files) return files.error();
    return load_safetensors_model(path, path, std::move(*files));
  }
  auto f = map_file(path);
  if (!f) return f.error();
  const MappedFile& mf = **f;
  bool gguf = mf.size() >= 4 && std::memcmp(mf.data(), "GGUF", 4) == 0;
  bool st = !gguf && mf.size() >= 9 && mf.data()[8] == '{';
  if (st) return load_safetensors_model(path, parent_dir(path), {path});
  auto g = gguf_parse(mf.data(), mf.size(), path);
  if (!g) return g.error();
  auto m = std::make_shared<ModelDesc>();
  m->path = path;
  m->format = "gguf";
  m->file_bytes = mf.size();
  m->gguf = std::move(*g);
  m->files.push_back(std::move(*f));
  if (auto r = desc_from_gguf(*m); !r) return r.error();
  desc_index(*m);
  if (auto r = desc_hparams(*m); !r) return r.error();
  return m;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/20_quant.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Quantized block formats: layouts and the scalar reference (the definition of truth) ====
namespace llminfer {
inline namespace v0_1 {
namespace detail {
namespace ref {

// Q8_0: 32 weights per block: fp16 scale d, then 32 int8 q. w = d * q.
constexpr int kQK8_0 = 32;
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "q8_0 block is 34 bytes");

inline void dequant_row_q8_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; b++) {
    const uint8_t* blk = src + b * sizeof(BlockQ8_0);
    float d = fp16_to_f32(rd_u16(blk));
    for (int k = 0; k < kQK8_0; k++) dst[b * kQK8_0 + k] = d * static_cast<float>(static_cast<int8_t>(blk[2 + k]));
  }
}

}  // namespace ref

// Whether tensors of this type can be computed with (dequantized / multiplied).
inline bool dtype_computable(DType t) {
  switch (t) {
    case DType::f32: case DType::f16: case DType::bf16: case DType::q8_0: return true;
    default: return false;
  }
}

// Row `row` of a 2-D (or flattened) tensor as f32 (`out` holds ne[0] floats). The type must be
// computable (checked at load).
inline void dequant_row(const TensorView& w, int64_t row, float* out) {
  const int64_t n = w.ne[0];
  uint64_t rb = 0;
  dtype_row_bytes(w.type, static_cast<uint64_t>(n), &rb);
  const uint8_t* src = w.data + static_cast<uint64_t>(row) * rb;
  switch (w.type) {
    case DType::f32: std::memcpy(out, src, static_cast<size_t>(n) * 4); break;
    case DType::f16: for (int64_t k = 0; k < n; k++) out[k] = fp16_to_f32(rd_u16(src + 2 * k)); break;
    case DType::bf16: for (int64_t k = 0; k < n; k++) out[k] = bf16_to_f32(rd_u16(src + 2 * k)); break;
    case DType::q8_0: ref::dequant_row_q8_0(src, out, n); break;
    default: LLMI_ASSERT(!"dequant_row: type not computable"); break;
  }
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/22_threadpool.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Thread pool ====
// One persistent pool per model: std::thread workers plus the calling thread. parallel_for(n, fn)
// runs fn(task, thread) for every task in [0, n) and returns when all are done. Tasks are handed
// out from an atomic counter; results must not depend on which thread ran a task (each output is
// written by exactly one task), so any thread count gives the same bits.
// Waiting workers spin for a short while (a forward pass issues many small jobs back to back),
// then sleep on a condition variable, so an idle model costs no CPU (a game shares the cores).
// Jobs from different threads (several sessions on one model) are serialised by a mutex.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#if defined(_MSC_VER)
  _mm_pause();
#else
  __builtin_ia32_pause();
#endif
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

class ThreadPool {
 public:
  using TaskFn = void (*)(void* ctx, int task, int thread);

  // n_threads: total threads including the caller (>= 1); 0 picks the hardware thread count.
  explicit ThreadPool(int n_threads = 0) {
    if (n_threads <= 0) n_threads = default_threads();
    n_threads_ = std::max(1, std::min(n_threads, 512));
    for (int t = 1; t < n_threads_; t++) workers_.emplace_back([this, t] { worker(t); });
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lk(sleep_mu_);
      quit_.store(true, std::memory_order_release);
      generation_.fetch_add(1, std::memory_order_acq_rel);
    }
    sleep_cv_.notify_all();
    for (auto& w : workers_) w.join();
  }

  int size() const { return n_threads_; }

  static int default_threads() {
    unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
  }

  // Runs fn(task, thread) for task in [0, n_tasks); `thread` is in [0, size()).
  template <class F>
  void parallel_for(int n_tasks, F&& fn) {
    auto trampoline = [](void* ctx, int task, int thread) { (*static_cast<std::remove_reference_t<F>*>(ctx))(task, thread); };
    run(n_tasks, trampoline, const_cast<void*>(static_cast<const void*>(&fn)));
  }

  void run(int n_tasks, TaskFn fn, void* ctx) {
    if (n_tasks <= 0) return;
    if (n_threads_ == 1 || n_tasks == 1) {
      for (int i = 0; i < n_tasks; i++) fn(ctx, i, 0);
      return;
    }
    std::lock_guard<std::mutex> job_lock(job_mu_);
    fn_ = fn;
    ctx_ = ctx;
    n_tasks_ = n_tasks;
    next_.store(0, std::memory_order_relaxed);
    busy_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lk(sleep_mu_);
      generation_.fetch_add(1, std::memory_order_acq_rel);
    }
    if (sleepers_.load(std::memory_order_acquire) > 0) sleep_cv_.notify_all();
    work(0);
    // wait for the workers to finish their last task
    for (int spins = 0; busy_.load(std::memory_order_acquire) > 0; spins++) {
      if (spins < 1 << 16) cpu_relax();
      else std::this_thread::yield();
    }
  }

 private:
  void work(int thread) {
    for (;;) {
      int i = next_.fetch_add(1, std::memory_order_relaxed);
      if (i >= n_tasks_) break;
      fn_(ctx_, i, thread);
    }
  }

  void worker(int thread) {
    uint64_t seen = 0;
    for (;;) {
      // spin a little, then sleep until the next job
      uint64_t g = generation_.load(std::memory_order_acquire);
      for (int spins = 0; g == seen && spins < kSpin; spins++) {
        cpu_relax();
        g = generation_.load(std::memory_order_acquire);
      }
      if (g == seen) {
        std::unique_lock<std::mutex> lk(sleep_mu_);
        sleepers_.fetch_add(1, std::memory_order_acq_rel);
        sleep_cv_.wait(lk, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        sleepers_.fetch_sub(1, std::memory_order_acq_rel);
        g = generation_.load(std::memory_order_acquire);
      }
      seen = g;
      if (quit_.load(std::memory_order_acquire)) return;
      work(thread);
      busy_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  static constexpr int kSpin = 1 << 14;  // ~ tens of microseconds of pause instructions

  int n_threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex job_mu_;  // one job at a time
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int n_tasks_ = 0;
  std::atomic<int> next_{0};
  std::atomic<int> busy_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> quit_{false};
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/23_matmul.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Matrix products: the kernel seam the forward pass calls ====
// Y[t][r] = sum_k W[r][k] * X[t][k] for t < n_tokens, r < rows(W); X is [n_tokens][ne0(W)] f32,
// Y is [n_tokens][ldy] f32 (ldy >= rows). Work is split over rows, so every output element is
// computed by one task with the same arithmetic whatever the thread count.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Scratch for one thread of a matmul (dequantized rows).
struct MatmulScratch {
  std::vector<float> row;
};

inline void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t ldy, ThreadPool& pool) {
  const int64_t rows = w.rows(), n = w.ne[0];
  constexpr int64_t kRowsPerTask = 16;
  const int n_tasks = static_cast<int>((rows + kRowsPerTask - 1) / kRowsPerTask);
  std::vector<std::vector<float>> scratch(static_cast<size_t>(pool.size()));
  pool.parallel_for(n_tasks, [&](int task, int thread) {
    std::vector<float>& buf = scratch[static_cast<size_t>(thread)];
    if (buf.size() < static_cast<size_t>(n)) buf.resize(static_cast<size_t>(n));
    int64_t r0 = task * kRowsPerTask, r1 = std::min(rows, r0 + kRowsPerTask);
    for (int64_t r = r0; r < r1; r++) {
      dequant_row(w, r, buf.data());
      for (int64_t t = 0; t < n_tokens; t++) {
        const float* xt = x + t * n;
        float acc = 0;
        for (int64_t k = 0; k < n; k++) acc += buf[static_cast<size_t>(k)] * xt[k];
        y[t * ldy + r] = acc;
      }
    }
  });
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/30_unicode_data.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Unicode data (generated by tools/gen_unicode from Debian's unicode-data; do not edit) ====
// Unicode 15.0.0. Run-length tables as base64-alphabet varints (5 bits per digit, value 32 = more digits
// follow, low group first); decoded once by src/31_unicode.hpp. Regenerate: tools/gen_unicode
namespace llminfer {
inline namespace v0_1 {
namespace detail {
namespace ucd {

inline constexpr const char kVersion[] = "15.0.0";
inline constexpr const char kClassNames[] = "CLMNPSZ";  // class id -> general category major class

// 2249 runs covering U+0000..U+10FFFF: varint(length * 8 + class id)
inline constexpr const char kCategories[] =
    "gIOcN0BNkBzCUdUxGcNMNxGMNMNoIOMtBMVJMNIlBTNJUNLJMbM5FN5HNxyDlBhD1DpB9BJNJtEicpBNRQhBMJgBVJMZIJIhFI5UN5iBN6BxpB"
    "IxJQJ0BpKUQdIqLMKMSMSMKgC5GgBhBUoEdUNUV6CMIc5KqFzCkBRK5YMJ6BINyBRSNiBRzCZVJ0DQJKxH6GQpW6CJwDzCpIqCRNcJQKVxFiBJ"
    "qCJaJqBQ8DIpGaQMI5CoBhGNxBoCiCxKiGIqIxNaJyEJ6BxCSUzCMhEaIhCQRQxFI5BIJYhBQKJ6BQSQaJgCKgBRIZSQzCRVzBVJMKQaIxBgBR"
    "QxFI5BIRIRIRQKIqBgBSQaYK4BhBIJ4BzCSZKMwCaIpCIZIxFI5BIRIpBQKJiCIaIaQJ4DRSQzCMN4BJyBIaIhCQRQxFI5BIRIpBQKJ6BQSQa4"
    "BagBRIZSQzCNJzBwCKJIxBYZIhBYRIJIRYRYZYhDgBqBYaIiBQJwBKwDrDlCoBqBhCIZI5FIhEQKJ6BIaIiB4BSIZQJQRSQzC4BM7BNJaMhCIZ"
    "I5FIxCIpBQKJ6BIaIiB4BSwBRIRSQzCIRKgDiBpCIZIpKSJ6BIaIiBJNgBZK7BZSQ7ENxBIaIxEYhGIpCIJQ5BYKgByBIKIiCwBzCQSMgDhMKR"
    "6BgBN5BiCMzCUoJRIJIpBIhGIJIxCKRqCJQpBIJI6BIzCQhBgIJd8DNMdS1BjFNKNKNKkBShCIhJgBiFMSpB6CIiJIlCK1BIVsBlBUoJ5KiFJz"
    "C0BxBiBhBaJaR6BZiBpDiDJKzCiBVxJIJoBJQ5KMpzCIhBQ5BIJIhBQpKIhBQpIIhBQ5BIJIhBQ5DIpOIhBQ5QQasCjFYhE1CwBxVQxBQMh7EN"
    "MpEOxGUY5ScbhC4BxEiBoC5EaUoCxESgDpDIZISgDhNiIcJcNJKQzCwBzCwB8CaIKzCwBpW4BpBSxIKJoBxRwC5HIiDgBiDgBNYUzCxHQpB4Ch"
    "LgBxGwB7CY1I5FqBQUpNyCIqHQKzCwBzCwB8BJ0BQ6HoMqB5LqEhCYzC8B1CqCtCUIaxHqDRzChLyDgCkBhJiFYsBzCYZzChJUpC4B5KQZkCgC"
    "aMqFhBKxBKRaJoBhwBiQxlCQxBQxJQxBQhCIJIJIJI5HQpNI5BNJdZI5BdhBQxBIdpDdQZI5BVI+CoBkGWoBOkFNsDNkDOgELJQzBdUJzCdUIp"
    "DYtI4DqI4DVJlBJVxCNJdpB1BJNJNJNhBN5CVhBtBpBlBJN7MRrBVgBl+CkBtHUl/BoG9CoFjP1TzFl6E0DzHtMU9H0C9kD0F9PkBlIU19CQlI"
    "Itap5B1BhBaRoBkBLUxJIJoBJQhO4BJMwDK5FoC5BI5BI5BI5BI5BI5BI5BI5BIiI8LJkIVkDwI1GItWgD11BwGlDgBOcNRL0CVkDNrCyBMpBV"
    "bRMVIxVQSVZMxWMhBoB5KIxXIVjB1ChIlJgDhE9HIzC1HjCN7DlIzC9J7DlwChwzBlQpjtFY9NoCxLUpjCchEzCRgF5LiBMyCM5HSxRzCS0BgC"
    "9FpCV5ZVhQoBRIJIpBgGhEKZKhBK5FqBlBKYzBlBwBhNkBgCSxMyEgCUzCwByExBcJMRKzChHiCU5FqD4CMpHYiB5LyDsDIJzCgBUpBKxCzCpB"
    "IpKyDoCZKhCSQzCQkB5FdJaxMKJaRSpBSJKJgGZU5CqBUZSwCxBQxBQxBoC5BI5BI5KNxDVgB5ciCMSQzCwBhp3CgD5FgBpMghiCx7CQxawJ5B"
    "gDpBoBJKxCNpDIpBIJIRIRIhbtEgE56CUlEhQQxN4BNgIhDlBiE0CwBiE8II0DNMdIMNUgBpBI5hBgBcN0BNkBzCUdUxGcNMNxGMNMN8BpWYxB"
    "QxBQxBQZY9BI9BoDVQhDIxGI5EIRI5DQxDwI5eoBcgBrLYtCrOtETdItDYN4LtLKwgBpHYpM4DK7GgBhIjBoChFLhCLoBxJqBoBxHIMhJgBhCM"
    "rBwKxnBQzCwBhJgBhJgBhKgChN4CM5CI5DI5BIRI5CI5DI5BIR4Q5tCoCxFwChCgGxBIxKIpCoRxBQJIhLIRYJQ5FIMjC5FV7B5HgCrCgM5EIR"
    "oBrBxFzBYMxGoBMgQhOgBTRjEQzLJaISoBiBhBIZIpHQagBKrC4BsC4BpHTMpHbgIhCNhHSgBrB8BoCxNY8BxFQjC5EoBjCxE4BkBgD7BgUpS4"
    "N5MoD5M4BzBhJiBgCzCwpC7HIxKISMQR4SapHzCJgCxF6CjBsBwFxEiBkBwJpF7BgF5FoCapN6D8BgBzHKRSJoCiBpL6CUIkBKoDpG4BzCwBah"
    "JyDIzCkBJSJgC5IKUJoCahMyDhBkBiBMSzCJMJcIjF4CxEIpGiD0BKRKwP5BIJIhBI5DIxCMwB5LiDoBzCwBiBIhCQRQxFI5BIRIpBISJ6BQSQ"
    "aQJwBKoBpBSQ6BYqB4iBpNyEhBsBzCUIMKZwHhMiFRMJgCzCwpB5L6BQqC8FhBSwIhMqEcJ4CzCwBsD4E5KqDJMwBzCwN5GQ6DgBjDcN5BouBh"
    "L6DMgZhQ7EgDhCQJQhCIRIhGyBISQiBJKJScoCzCwRhCQ5J6BQ6BJMJK4GJyChK6BJiBkCKgCJ6CxLiEcJsBoDpS4B0Cw9BpCIpJiCIiCJsBwC"
    "rHYUxHQyFIyDoS5BIRIxJyBYKISI6BJKgCzCwBxBIRIhIqBISIqBJ4BzCwtC5EiBU4BSJKpDIxI6BYqBsDzCwVJ4DrFtHoDMxmHwZ7bIsB4Chx"
    "BgzUpYUoDhsIgEKxB6Dwqf5xEoujCpuE4B5HIzCgBU5TIzCwBxHQqBMwChM6BsBlBhBMNwCzCI7BIpFoB5EgsFhQ7FkBoZ5SgBKJ6N4BiBpDgQ"
    "RMJK4CSwDh+vBgCx1JwKpC45lChBI5BIRI5oC4DJoHZQJwDhBgChjDghS5aoBpDYpC4BxCQNSMg4kByLQ6FoCldgP19BwC9JQlPqBdyBgCiCV6"
    "B1HiBtPoF1QaNwejFgDjFgD9VoCrG4hBpVI5RIRQJQRQhBIhDIJI5BIpQIhBQhCI5BIhHIhBIpBIJY5BIh1CQpGNpGN5HNpGN5HNpGN5HNpGN5"
    "HNpGNhCQzMlgE6NlByMlCK1DKVsB4DqBI6Dg0I5HwBxBo1B6BIqEQ6BISIqBoBxPoIKgcpLY6B5BQzCgBJNgwCxHKoEhLiBzCoBNg0DhHiBzCw"
    "5F5BIhBIRI5DIpxBQrC6BoKhR6BJgBzCgBUokG7ONbNjBgTrLN7DwwBhBI5GIRIJQJIxCIhBIJIJwBJgBJIJIJIZIRIJQJIJIJIJIJIRIJQhBI"
    "5BIhBIhBIJIxCIpEoBZIpBIpEgNVwjClLgBlZgD9DQ9DI9DItJwCrDtoBgOtHoDlLgBtC4BVwD1BwmBl2HgBtEYtDY9dgB9XwBlDgBN4DlDgBl"
    "OgC1CwBlKgC1HQVwTl1CgD1DQtDYtC4B1LI9BgC1DgBtC4BtC4B9kBI9NoJzCwhIh4tKgIxugBwBx3BQxgtBwDps6B4nYxnEw4L5ymBoBh4gBg"
    "06tFi8Bgk8vB";

// 10 White_Space ranges: varint(gap from previous end), varint(length)
inline constexpr const char kWhiteSpace[] =
    "JFSBkDBaB/uFB/rCLdCFBvBBg9DB";

// 388 runs of non-zero canonical combining class: varint(gap), varint(length), varint(class)
inline constexpr const char kCombiningClass[] =
    "gYVmHABoHAE8GABoHAB4GAF8GACqGAE8GACqGAL8GAFBAE8GAImHABwHABmHAD8GADmHAC8GBDmHAE8GABmHABoHAC8GABmHABpHACqHABpHAC"
    "qHABpHANmHzIFmHpIB8GAEmHAB8GADmHAB+GAB8GAGmHAG8GACmHAB8GACmHAB+GABkHABmHABKABLABMABNABOABPABQABRABSACTABUABVAB"
    "WBBXBBYABZBBmHAB8GBBSoCImHABeABfABgBwBBbABcABdABeABfABgBABhBABiBACmHAC8GAFmHAB8GACmHAB8GQBjBlDHmHCEmHAB8GABmHC"
    "CmHBB8GACmHAB8GjBBkBeBmHAB8GACmHAB8GACmHAD8GABmHAC8GABmHAB8GADmHAB8GABmHAB8GABmHAB8GABmHAB8GACmHgFHmHAB8GABmHJ"
    "B8GYEmHBJmHBDmHBFmHrBD8G8BBmHAD8GAEmHqBFmHAF8GAOmHBB8GACmHAB8GACmHAB8GADmHAD8GABbABcABdADmHAB8GACmHAC8GAFmH8BB"
    "HQBJDBmHAB8GACmHnDBHQBJwBBmH9BBHQBJuDBHQBJuDBHQBJ/DBJuDBHQBJHB0CAB7ClDBHQBJtDCJQBJ8DBJtDCnDABJNErDsDC2DABJNE6D"
    "sCC8GbB8GBB8GBB4G3BBhEABiEBBkEFEiECBiEBCmHABJBCmH+BB8GwDBHBCJyCB8GvWDmH0dCJeBJ9EBJKBmHrGBkHvEB+GABmHAB8G7GBmHA"
    "B8GnCBJUImHCB8GwBFmHAG8GACmHAB8GBC8GACmHAC8GAFmHAB8GAEmHlDBHPBJmBBmHAB8GAHmH2BCJ6BBHLCJjCBH4EDmHBBBAF8GACmHAE8"
    "GABmHBHBEB8GGBmHDCmHmGCmHAB8GAHmHAB8GACmHABqHAB2GAB8GABqGAlBmHABoHACkHAB8GAB6GABmHABpHAB8GABmHAB8GwWCmHACBAEmH"
    "ADBACmHEBmHDCBABmHAB8GABmHACBAE8GABmH+/CDmHtEBJgDgBmHqRB6GABkHABoHAB+GACgHpDCI0udBmHEKmHgBCmHwCCmH0IBJlBBJ3EBJ"
    "bSmH5BD8GlBBJ/CBHMBJvHBmHBCmHAB8GCCmHFCmHBBmH0BBJ2HBJw5TBahYHmHAH8GACmHteB8GiHB8G1EFmHy0BB8GBBmHoBBmHABBAB8GEB"
    "JlFBmHAB8G9REmHjMCmHwCD8GmCC8GADmHAB8GABmHAE8GxBBmHAB8GABmHAB8GgGBJpBBJOBJ5BBJABHlCDmHwBCJ+BBHsCBJJBHqDBJABHyF"
    "BHABJwCCHQBJYHmHDFmHtGBJDBHXBmHjDBJABH7HBJABH+DBJ2DBJABHzDBJtIBJABHiICJEBH8EBJzCBJSBJxCBJlNBJiIBHBCJxCBJpNCJt9"
    "SFB7BHmH5lBCGslTBBmmFC4GADBDBiHAF4GII8GCFmHAC8GeEmH0EDmH7tDHmHBRmHCHmHBCmHBFmHkDBmHgFHmH3LBmH9BEmH8PCoHAB8GABm"
    "HgfH8GtDGmHABH";

// 202 simple case folding runs (status C+S): varint(gap from previous run's last code point),
// varint(count * 2 + (step == 2)), varint(zigzag(folded - code point))
inline constexpr const char kCaseFold[] =
    "hC0BgC7CCuwBLuBgCCOgCiBxBCEHCDRCDvBCCCxHBHCCC3QCCkNBFCCC8MBCCCE6MBCCDC+EBC0MBC2MBCCCC6MBC+MCCmNBCiNBCCECmNBCqN"
    "CCsNBHCCC0NBCCCC0NDCCCC0NBCCCEyNBFCCC2NBCCECCICEBCCCCEBCCCCEBTCDTCDCEBFCCChGBCvDBpBCCCjICTCIC2iVBCCCClKBCwiVDC"
    "CCClMBCqEBCuEBLC3HCoHrBFCECCJCoHHCsCCGqCCCgECE+DCiBgCCSgCXCCNCQBC7BBCxBECdBCrBCZCCCrDBC/CDC3DBC/DCCCCCNBCCDGjI"
    "BgBgFBgCgCxBjBCK3BCCCeBPCDhDCDsCgDq6CsCgmOCCgmOGCgmOrZMPjkCC7kMBC5kMBCnkMBEjkMBClkMBC3jMBCniMBCm8kCI2C/7FDG/7F"
    "hK3ECHCzDDC97OChDCKQPJMPLQPJQPJMPMJPJQPZQPJQPJQPJEPBEzEBCRCCpgOKIrFBCRMEPBEnGNEPBE/GBCNME/HBE7HBCRqJC51OEC9rQB"
    "CrkQHC4BuBgBgBUCCzZ0B0Bx5BgDgDxBCCCCt/UBCruHBCt+UDHCCC3hVBC5/UBC9hVBC7hVCCCDCCJE9jVBlDCJFCFCCuqevBCUdCoEPCE/BC"
    "LFCCCnglCBLCFCCCCvyyCDFCEVCCCn0yCBC90yCBC10yCBCh0yCBCn0yCCCjxyCBCzyyCBCpxyCBCg6BBRCCC/CBCl0yCBCvjlCBFCHCCGFCdC"
    "C7bgF/8rCi7U0BgCmmBwCwCpEoCwC9EWuCCeuCCOuCCEuCr3BmDgEu/CgCgChsVgCgCh1ekCkC";

// 2061 canonical decompositions: varint(code point - previous), varint(first * 2 + composes),
// varint(second or 0 for a singleton); composes = not Full_Composition_Exclusion (Hangul is
// algorithmic and not listed)
inline constexpr const char kDecompositions[] =
    "gGjEgYBjEhYBjEiYBjEjYBjEoYBjEqYCnEnZBrEgYBrEhYBrEiYBrEoYBzEgYBzEhYBzEiYBzEoYC9EjYB/EgYB/EhYB/EiYB/EjYB/EoYDrFg"
    "YBrFhYBrFiYBrFoYBzFhYDjGgYBjGhYBjGiYBjGjYBjGoYBjGqYCnGnZBrGgYBrGhYBrGiYBrGoYBzGgYBzGhYBzGiYBzGoYC9GjYB/GgYB/Gh"
    "YB/GiYB/GjYB/GoYDrHgYBrHhYBrHiYBrHoYBzHhYCzHoYBjEkYBjGkYBjEmYBjGmYBjEoZBjGoZBnEhYBnGhYBnEiYBnGiYBnEnYBnGnYBnEs"
    "YBnGsYBpEsYBpGsYDrEkYBrGkYBrEmYBrGmYBrEnYBrGnYBrEoZBrGoZBrEsYBrGsYBvEiYBvGiYBvEmYBvGmYBvEnYBvGnYBvEnZBvGnZBxEi"
    "YBxGiYDzEjYBzGjYBzEkYBzGkYBzEmYBzGmYBzEoZBzGoZBzEnYE1EiYB1GiYB3EnZB3GnZC5EhYB5GhYB5EnZB5GnZB5EsYB5GsYF9EhYB9Gh"
    "YB9EnZB9GnZB9EsYB9GsYE/EkYB/GkYB/EmYB/GmYB/ErYB/GrYDlFhYBlHhYBlFnZBlHnZBlFsYBlHsYBnFhYBnHhYBnFiYBnHiYBnFnZBnHn"
    "ZBnFsYBnHsYBpFnZBpHnZBpFsYBpHsYDrFjYBrHjYBrFkYBrHkYBrFmYBrHmYBrFqYBrHqYBrFrYBrHrYBrFoZBrHoZBvFiYBvHiYBzFiYBzHi"
    "YBzFoYB1FhYB1HhYB1FnYB1HnYB1FsYB1HsYiB/E7YB/G7YOrF7YBrH7YdjEsYBjGsYBzEsYBzGsYB/EsYB/GsYBrFsYBrHsYB5NkYB5PkYB5N"
    "hYB5PhYB5NsYB5PsYB5NgYB5PgYCpMkYBpOkYBtiBkYBviBkYBtMkYBtOkYDvEsYBvGsYB3EsYB3GsYB/EoZB/GoZB1ekYB3ekYBvbsYBlpBsY"
    "B1GsYEvEhYBvGhYD9EgYB9GgYBrMhYBrOhYBtMhYBtOhYBxNhYBxPhYBjEvYBjGvYBjExYBjGxYBrEvYBrGvYBrExYBrGxYBzEvYBzGvYBzExY"
    "BzGxYB/EvYB/GvYB/ExYB/GxYBlFvYBlHvYBlFxYBlHxYBrFvYBrHvYBrFxYBrHxYBnFmZBnHmZBpFmZBpHmZDxEsYBxGsYHjEnYBjGnYBrEnZ"
    "BrGnZBtNkYBtPkYBrNkYBrPkYB/EnYB/GnYB9iBkYB/iBkYBzFkYBzHkYtIgwBABiwBACmxBABwwBhYwByrBAK2DAHxKhYBj5BhYBuLABr5BhY"
    "Bv5BhYBz5BhYC/5BhYCr6BhYBz6BhYB18BhYaz5BoYBr6BoYBj7BhYBr7BhYBv7BhYBz7BhYB38BhYaz7BoYBr8BoYB/7BhYBr8BhYBz8BhYFl"
    "9BhYBl9BoYsBrhCgYBrhCoYCnhChYEtgCoYF1hChYBxhCgYBniCmYLxhCmYgBxjCmYXrjCgYBrjCoYCnjChYEtlCoYF1jChYBxjCgYBnkCmYYp"
    "nCvYBrnCvYqCthCmYBtjCmYOhhCmYBhjCmYBhhCoYBhjCoYDrhCmYBrjCmYDxtCoYBztCoYBthCoYBtjCoYBvhCoYBvjCoYDxhCkYBxjCkYBxh"
    "CoYBxjCoYB9hCoYB9jCoYDxuCoYBzuCoYB7iCoYB7kCoYBniCkYBnkCkYBniCoYBnkCoYBniCrYBnkCrYBviCoYBvkCoYD3iCoYB3kCoYpJviD"
    "zyBBviD0yBBxkD0yBBviD1yBB1kD0yB6ErtD0yBCjsD0yBRltD0yB2SxyE8pCIhzE8pCDnzE8pCkBqxE8pCBsxE8pCBuxE8pCB4xE8pCBiyE8p"
    "CBkyE8pCB2yE8pCB+yE8pCsDv8E+tCBv8E3uCQi6E8tCBk6E8tCC+6E8tC0CkjF8xCDwjF8xCjBshF8xCBuhF8xCB4hF8xCD2iF8xCqHv0F26C"
    "Dv0F+5CBv0F36CQiyF85CBkyF85C3Bl5F3+C2Bt8F+9CBv8F+9CBt8F3+C8DtkG2iD4D/rG1mDHtsG1mDBtsG2mDCtsGimDB1sG1mD/Dt0G+pD"
    "Bv0G+pDBt0G3qDuEz9GquDCz9GvuDB59GquDBz9G/uDlLk0H39DK40H39DFi1H39DFs1H39DF21H39DNg0H19DKi3Hy7DCi3H07DBk7Hg8DCm7"
    "Hg8DJi3Hg8DSk5H39DK45H39DFi6H39DFs6H39DF26H39DNg5H19DtDriIuhEg3CrwN15GCvwN15GCzwN15GC3wN15GC7wN15GEjxN15GpB1zN"
    "15GC5zN15GD9zN15GB/zN15GCl0N15G9VjElZBjGlZBlEnYBlGnYBlEjZBlGjZBlExZBlGxZBvMhYBvOhYBpEnYBpGnYBpEjZBpGjZBpExZBpG"
    "xZBpEnZBpGnZBpEtZBpGtZBlRgYBnRgYBlRhYBnRhYBrEtZBrGtZBrEwZBrGwZBxiBmYBziBmYBtEnYBtGnYBvEkYBvGkYBxEnYBxGnYBxEjZB"
    "xGjZBxEoYBxGoYBxEnZBxGnZBxEuZBxGuZBzEwZBzGwZB/MhYB/OhYB3EhYB3GhYB3EjZB3GjZB3ExZB3GxZB5EjZB5GjZBtjPkYBvjPkYB5Ex"
    "ZB5GxZB5EtZB5GtZB7EhYB7GhYB7EnYB7GnYB7EjZB7GjZB9EnYB9GnYB9EjZB9GjZB9ExZB9GxZB9EtZB9GtZBrNhYBrPhYBrNoYBrPoYB5Ug"
    "YB7UgYB5UhYB7UhYBhFhYBhHhYBhFnYBhHnYBlFnYBlHnYBlFjZBlHjZB1lPkYB3lPkYBlFxZBlHxZBnFnYBnHnYBnFjZBnHjZB1VnYB3VnYBh"
    "WnYBjWnYBlmPnYBnmPnYBpFnYBpHnYBpFjZBpHjZBpFxZBpHxZBpFtZBpHtZBrFkZBrHkZBrFwZBrHwZBrFtZBrHtZBxWhYBzWhYB1WoYB3WoY"
    "BtFjYBtHjYBtFjZBtHjZBvFgYBvHgYBvFhYBvHhYBvFoYBvHoYBvFnYBvHnYBvFjZBvHjZBxFnYBxHnYBxFoYBxHoYBzFnYBzHnYB1FiYB1HiY"
    "B1FjZB1HjZB1FxZB1HxZBxGxZBpHoYBvHqYBzHqYC/XnYFjEjZBjGjZBjEpYBjGpYBlMhYBlOhYBlMgYBlOgYBlMpYBlOpYBlMjYBlOjYBhqPi"
    "YBjqPiYBlQhYBnQhYBlQgYBnQgYBlQpYBnQpYBlQjYBnQjYBhqPmYBjqPmYBrEjZBrGjZBrEpYBrGpYBrEjYBrGjYB1MhYB1OhYB1MgYB1OgYB"
    "1MpYB1OpYB1MjYB1OjYBxrPiYBzrPiYBzEpYBzGpYBzEjZBzGjZB/EjZB/GjZB/EpYB/GpYBpNhYBpPhYBpNgYBpPgYBpNpYBpPpYBpNjYBpPj"
    "YB5sPiYB7sPiYBhahYBjahYBhagYBjagYBhapYBjapYBhajYBjajYBhajZBjajZBrFjZBrHjZBrFpYBrHpYB/ahYBhbhYB/agYBhbgYB/apYBh"
    "bpYB/ajYBhbjYB/ajZBhbjZBzFgYBzHgYBzFjZBzHjZBzFpYBzHpYBzFjYBzHjYHj7BzYBj7B0YBhwPgYBjwPgYBhwPhYBjwPhYBhwPiaBjwPi"
    "aBj5BzYBj5B0YBxwPgYBzwPgYBxwPhYBzwPhYBxwPiaBzwPiaBr7BzYBr7B0YBhxPgYBjxPgYBhxPhYBjxPhYDr5BzYBr5B0YBxxPgYBzxPgYB"
    "xxPhYBzxPhYDv7BzYBv7B0YBhyPgYBjyPgYBhyPhYBjyPhYBhyPiaBjyPiaBv5BzYBv5B0YBxyPgYBzyPgYBxyPhYBzyPhYBxyPiaBzyPiaBz7"
    "BzYBz7B0YBhzPgYBjzPgYBhzPhYBjzPhYBhzPiaBjzPiaBz5BzYBz5B0YBxzPgYBzzPgYBxzPhYBzzPhYBxzPiaBzzPiaB/7BzYB/7B0YBh0Pg"
    "YBj0PgYBh0PhYBj0PhYD/5BzYB/5B0YBx0PgYBz0PgYBx0PhYBz0PhYDr8BzYBr8B0YBh1PgYBj1PgYBh1PhYBj1PhYBh1PiaBj1PiaCr6B0YC"
    "z1PgYCz1PhYCz1PiaBz8BzYBz8B0YBh2PgYBj2PgYBh2PhYBj2PhYBh2PiaBj2PiaBz6BzYBz6B0YBx2PgYBz2PgYBx2PhYBz2PhYBx2PiaBz2"
    "PiaBj7BgYB46BABr7BgYB66BABv7BgYB86BABz7BgYB+6BAB/7BgYB48BABr8BgYB68BABz8BgYB88BADhwPlaBjwPlaBlwPlaBnwPlaBpwPla"
    "BrwPlaBtwPlaBvwPlaBxwPlaBzwPlaB1wPlaB3wPlaB5wPlaB7wPlaB9wPlaB/wPlaBhyPlaBjyPlaBlyPlaBnyPlaBpyPlaBryPlaBtyPlaBv"
    "yPlaBxyPlaBzyPlaB1yPlaB3yPlaB5yPlaB7yPlaB9yPlaB/yPlaBh2PlaBj2PlaBl2PlaBn2PlaBp2PlaBr2PlaBt2PlaBv2PlaBx2PlaBz2P"
    "laB12PlaB32PlaB52PlaB72PlaB92PlaB/2PlaBj7BmYBj7BkYBh3PlaBj7BlaB56BlaCj7BiaBt7PlaBj5BmYBj5BkYBj5BgYBs4BABj5BlaC"
    "y7BADxKiaBp3PlaBv7BlaB96BlaCv7BiaBt8PlaBr5BgYBw4BABv5BgYBy4BABv5BlaB/7PgYB/7PhYB/7PiaBz7BmYBz7BkYB18BgYBg5BADz"
    "7BiaB18BiaBz5BmYBz5BkYBz5BgYB04BAC9/PgYB9/PhYB9/PiaBr8BmYBr8BkYB38BgYBg7BABj8BzYBj8B0YBr8BiaB38BiaBr6BmYBr6BkY"
    "Br6BgYB84BABj6B0YBxKgYBq4BABgGAD53PlaBz8BlaB98BlaCz8BiaBt/PlaB/5BgYB44BABz6BgYB+4BABz6BlaBoLADkgQABmgQAlJy6BAE"
    "2EABqMAvDh5Q4ZBl5Q4ZTp5Q4Zfh9Q4ZBp9Q4ZBl9Q4Z1BngR4ZFxgR4ZD3gR4ZYniR4ZCriR4Zb5jR4ZDnkR4ZDrkR4ZCxkR4ZX7D4ZCjmR4Z"
    "L7kR4ZB5D4ZB9D4ZBpmR4ZBrmR4ZDlnR4ZBnnR4ZDtnR4ZBvnR4ZH1nR4ZB3nR4ZDloR4ZBnoR4ZDtoR4ZBvoR4ZjBlqR4ZBxqR4ZBzqR4ZB3q"
    "R4ZxB5nR4ZB7nR4ZBjpR4ZBlpR4ZHlrR4ZBnrR4ZBprR4ZBrrR4Z8BwgYABygYAy9B6tV4ZwrB3kY5kMC7kY5kMC/kY5kMCjlY5kMCnlY5kMCr"
    "lY5kMCvlY5kMCzlY5kMC3lY5kMC7lY5kMC/lY5kMCjmY5kMDpmY5kMCtmY5kMCxmY5kMH/mY5kMB/mY6kMClnY5kMBlnY6kMCrnY5kMBrnY6kM"
    "CxnY5kMBxnY6kMC3nY5kMB3nY6kMXtkY5kMK7pY5kMO3qY5kMC7qY5kMC/qY5kMCjrY5kMCnrY5kMCrrY5kMCvrY5kMCzrY5kMC3rY5kMC7rY5"
    "kMC/rY5kMCjsY5kMDpsY5kMCtsY5kMCxsY5kMH/sY5kMB/sY6kMCltY5kMBltY6kMCrtY5kMBrtY6kMCxtY5kMBxtY6kMC3tY5kMB3tY6kMXtq"
    "Y5kMD/uY5kMBhvY5kMBjvY5kMBlvY5kME7vY5kMigyBwkmCABovzBAB0snCABwsmCABit3BABkjnBABq+pBAB45vCAB45vCABi1sBABi9oCABu"
    "4qBABw0sBABs/wBABym7BABq4/BAB+jjCAB07jCABwvkCAB+ooCABkg1BAB2x2BAByt4BAB895BAB6jiCAB02oCABi/sCABkonBABq3pBABow1"
    "BAB2h5BAB6ijCAB8hvCABg1uBAB2+3BAB68iCABo2kCABysxBABw9gCAB+hkCAB0svBABuxzBAB022BAB4v5BAB8soCABs4nBABu7oBAB8tpBA"
    "BosyBABmt1BABgh5BABuu7BABiggCABsgjCAB4ljCAB++mCABkzrCAB+2tCAB0/uCAB4o8BAB+38BABg6+BABy8hCABowpCAB+nvCABstlCAB+"
    "tsBABowvBABgm+BAB8ngCABkm5BAB0s8BABksmCABuvrCABwtsBABkmuBABmh1BAB092BAB+w3BAB+y+BABuj/BAB2krCABktpBAB2ogCAB49o"
    "BAB48oBAB4h9BAB87+BABi/hCABqnrCABg4lCAB+sxBABkg1BAB8vlCAByjnBABu+tBABkhwBABu45BABg36BABuxpBAB2v8BAB+7nBABy6vBA"
    "B6gnBAB4s2BABw3yBABky+BABm8pBAB8lsBABiw7BABykiCAB0qlCAB071BABg7nCABwo2BAB8vxBABquhCABg6xBABq26BAB8qnBABy2oBABy"
    "8oBABio0BABuu+BAB+mhCABktlCAB+8oCABqvpBABkkqBABm3sBAB4uvBABq8yBAB8/3BAB0y8BAB66qCAB0mtCABupvCAB8svCAB2ppBABssz"
    "BABu31BABk2nCABonvBABg5wBABggxBAB0pyBABmy3BABy04BAByo6BAB088BABo/+BAB+mgCABsynCAB8uiCABmioCAB00pCABuhpBABmqpBA"
    "B6rqBABws4BABkskCAB0qlCABysvBABq/vBAB23xBAB861BAB8j+BABq35BABounBAByvrBABu+tBAB07uBAB4hwBABk75BABym6BAB05/BABs"
    "kgCABojpCABsvrCABw0rCABwhsCAB24nBAB868BABo7oCABwrrCABiuwBABsonBAB0toBAB8+tBAB+juBABy5yBABkg1BAB884BABkk7BAB4vi"
    "CAB4noCAB64vCABwozBAB8irCAByopBAB23zBABm/zBABi02BAB4p3BAByg6BABy16BAB2m8BABgx+BAB8lsCAB62oBAB8ixBABwnrCAB2ioBA"
    "ByxuBAB0+2BAB0ynCAB24vBABo0wBABuh0BABu45BABsorCAByipBAB+gqBABqmuBABmhzBAB80zBABwq0BABqu2BABsg6BABk+6BABy3/BAB+"
    "skCABiukCAB48oCABkurCAB+zpBAB0r3BAB6hqBABg94BABwp6BAB0/iCABmqrCABuluCAB+pvCABu5zBAB282BABw+gCAB2s9BABgy9BABkp+"
    "BABgs5BAByp4BABw1lCABgsnBABszhCAB0jpBABugpBABsqvBABmtxBABst+BABq4tBAB8x2BABorzBAB2znCAB4kkCAB6krCAB24kCABmtvBA"
    "Bg0oBABg8qBAD0lsBAConzBAD89oBAB0y5BAB0s7BAB4z8BAB818BABq28BAB+48BABs1rCAB8r+BAB67/BACkhjCACwvlCADwjoCAB6voCAE+"
    "usCAB4vsCABwysCABo7uCAB8toCABurrCAB86nBABuuoBAB60oBAByspBABoupBABi1pBAB65qBABsgrBABwmrBABgksBABwqsBABomuBAB8mu"
    "BABopwBABw2wBAB84wBABk/wBAB+0yBABk+yBABipzBABqo0BABu32BAB0h3BABky3BAB824BAB2i5BABki6BABip8BAB8z8BABy08BABw08BA"
    "Bg18BABs18BAB618BAB648BAB848BABgk9BABio9BABg89BABo/+BAByg/BABik/BABk3/BABqggCAB6+gCABynhCABynhCABuliCABgxkCABs"
    "5kCABiwlCAByzlCABmtmCABwwmCABs7nCABwjoCABmurCAB+/rCAB2jsCABqnwBAB8uhJABwhhCADsinBABq7oBABw2oBABg4nBABq0oBABg4o"
    "BABuspBAB0vpBAB65qBABq1qBABy5qBABk+qBAB0lsBABmrsBABo0sBABo1sBABkmtBABwytBABktvBABytvBABy2vBAB66vBABwtwBAB80wBA"
    "BwwwBAB84wBABg2wBABk/wBABojxBABo8xBAB4hyBABklyBABs1yBABonzBABuxzBAB2xzBABs1zBABy31BAB071BABi02BAB2t3BAB2s3BABk"
    "y3BAB8h4BAB824BABu67BABqj5BAB+q5BAB0y5BABin6BABsw6BAB2z6BAB6h7BAB+h7BAB0s7BAB2t7BABov7BAB007BABg07BAB4s8BABir9"
    "BABg89BAB2n+BAB21+BABo/+BAB8z/BABqggCABk1hCAB++hCABy3jCABi0kCABs4kCABs5kCAB+rlCABwvlCAB2slCABiwlCAB8vlCAB6ulCA"
    "ByzlCAB04lCABwwmCABwznCABknoCABy5oCABsnpCAB4nrCABmurCABs1rCAB29rCAB+/rCAB2gsCAB2jsCABkxtCAB45vCAB0k0IABok0IABq"
    "95IAB65dABwhgBAByjgBABykpJABgtuJABmt/JABm0vCAB84vCAkCy9C0tBCk/C3tBLy+ChuBBy+CiuBBy09DhuBBy09DiuBBg9C3tBBg9C4tB"
    "Bg9C8tBBi9C8tBBk9C8tBBm9C8tBBo9C8tBBq9C8tBBs9C8tBCw9C8tBBy9C8tBB09C8tBB29C8tBB49C8tBC89C8tBCg+C8tBBi+C8tBCm+C8"
    "tBBo+C8tBCs+C8tBBu+C8tBBw+C8tBBy+C8tBB0+C8tBBq9C5tBBi9C/tBB29C/tBBo+C/tBsqFzpoE6lkCC3poE6lkCPrqoE6lkCjEjzoEnpk"
    "CBlzoEnpkC8Qv0pE+5kCBv0pE36kCvLzrqE6llCBzrqEwllCCzrqE9llC8Hx7qEvtlCBz7qEvtlC9brzsEwpmCmhuBu1oHlr0DBw1oHlr0DB+1"
    "oHur0DB+1oHvr0DB+1oHwr0DB+1oHxr0DB+1oHyr0D3Cy7oHlr0DB07oHlr0DB27oHur0DB47oHur0DB27oHvr0DB47oHvr0DgypC6jnBABwjn"
    "BABiknBABkygIABg2nBAB86nBAB27nBABkgoBAB0noBABypoBABuuoBAB+soBAB8paAB0jjIAB60oBABo1oBABo2oBABu3oBAB4xiIAByraABu"
    "2oBAB64oBAB20iIABu5oBABo6oBAB4snBAB46oBABq7oBAB+9oKABq/oBABmgpBAB+taAB2jpBABskpBABknpBABunpBABqxaABuspBAByspBA"
    "BoupBAB0vpBABqwpBABswpBABuxpBABy0pBABi1pBAB01pBABm3pBAB63pBAB+3pBAB+3pBAB+3pBAB4ilIABgn4BAB08pBAB+9pBABm2lIAB2"
    "+pBABi/pBABsgqBAB8pqBABwjqBABwkqBABwmqBABkqqBABsvqBABgxqBABm1qBABm2qBABo4qBABo4qBABy5qBAB26qBABm7qBABk8qBABsxr"
    "BABsgrBABuxrBABilrBABonrBABugpBAB8usBAB88rBABo/rBAB6gsBAB24rBABkjsBABijsBAB4qsBABouqIABkvsBABuvsBABswsBAB0xsBA"
    "BkysBABk2sBABwqrIAB0urIAB4+sBAB2htBABuitBABw9sBABsmtBAB8ubAB4vbABwwtBAB8ztBAB8ztBABw8sIABm8tBABw9tBABu+tBABm/t"
    "BABwxtIAB+/tBABsguBABm1vBABkiuBABi4bABgmuBAB8muBABgsuBAB6ouBABo+uIABm0uBABs+uIAB82uBAB22uBAB43uBABi+uBABk+uBAB"
    "+icAB6/uBABwivBAB6jvBABymvBABkmcABm4wIAB4ncABgrvBABmrvBABsrvBAB0svBABk5xKAB8vvBABizxIABizxIABighCABkyvBABkyvBA"
    "BuscABwr5IAB09wJABk2vBAB22vBABmucAB05vBAB68vBABu9vBABy/vBABiowBAB0zcAB4xcABopwBABotzIABuswBABw0wBAB40wBAB80wBA"
    "B40wBAB03wBAB84wBABk7wBABo6wBAB+6wBAB89wBABk/wBABs/wBABghxBAB2hxBAB6lxBABirxBABotxBABg1xBAB4w1IAB6zxBAB4vxBABw"
    "2xBABm4xBABo+xBABi/1IABkiyBABq8xBABy6xBAB8idABymyBAB8nyBAB6pyBABunyBAB4mdAB+0yBAB42yBAB0g4IABm+yBABwvzBABykzBA"
    "ByxdABipzBABwwdABoudABk5oBABq5oBABgwzBAB4pzBAB6qgCABy9hBABuxzBAB2xzBABiyzBAB81zBABm1zBABm85IABy0dAB0/zBABq4zBA"
    "Bkl0BABqo0BAB6m6IAB8o0BAB+h0BABox0BAB65dABk00BABm60BAB0+0BABwq1BABmq7IAB2t1BABwheABiy1BABuq8IABo11BAB8keABk31B"
    "AB+51BAB071BAB271BAB6o9IAB2wuIAB0v9IAB8k2BAB4r+IAB+r2BAB6s2BABum2BABsx2BAB8z2BABu32BABi02BABy22BABw32BABq42BAB"
    "8x+IABoz2BAB+i3BAB8m3BABmzeAB2s3BABus3BABit/IABy/2BAB823BAB81/IAB84/IABs83BAByj4BAB8h4BAB2h4BABs5eAB0k4BAB6n4B"
    "ABun4BAB6q4BABqyiIABq04BABmmhJAB454BAB26hJABwi5BABqj5BABgl5BABwgjJABgo5BABqp5BABqzjJABohkJAB035BAB245BAB4qfABq"
    "65BABwrfABwrfABuk6BAB4l6BABin6BABqo6BAB0s6BAB2xfABoy6BABsjmJAB8z6BABkpmJABg36BAB+5wIABgh7BABi6nJABw7nJABokoJAB"
    "4/fABwggBABov7BABmvoJABkvoJAByxoJABmzoJAB8x7BAB+x7BAB+x7BAB007BAByjgBAB247BABskgBABspgBAB6hqJAB8k8BAB4o8BAB4s8"
    "BABmugBABsirJABs18BAB0prJABqsrJAB+48BAB2+8BAB+ygBABgk9BAB0k9BAB+k9BAB43sJABuqtJABuqtJAB8u9BABkghBAB26tJABs89BA"
    "By89BABuihBABgouJABkt+BABgqhBABwu+BABmu+BABgw+BABs4vJABm2+BABiwhBABu8+BABkg/BABqk/BABozhBABwixJABukxJABy1hBABy"
    "txJAB03/BAB8zxJABq5/BAB0//BABqggCAB0tyJABmyyJABgmgCABw6yJABgngCAB+15IABq9hBABkrgCABmwgCAB2giBAB8zgCABqrtBABu6z"
    "JABq7zJABm55IAB455IABighCABoghCAB85nCAB2miBABiphCAB2ohCAB6phCABmrpBABirhCABmrhCAB6rhCABsuhCAB4z1JABquhCAB6xhCA"
    "Bm2hCAB66hCABmyhCAB67hCABu+hCABuliCABm1hCAB08hCAB48hCAB49hCABsj2JAB222JABqt2JAB2yiBABiviCABmviCABsxiCAB085JABo"
    "2iCAB4y3JAB61iBABi2iBABi73JABkt4JAB22iBABgljCAB4ljCABumjCABymjCAByqjCABwojCAB8wjCABkujCABy3jCABwyjCAB22jCABs4j"
    "CABu9iBABi+jCABigkCABy/iBABgmkCABmmkCABum7JAButkCAB8tkCABqjjBAB0vkCAB2raAB8q8JABs28JAB8rjBABusjBABgqlCAB6ulCAB"
    "04lCABqlmCABwq+JAB2qmCABismCAB2xmCABu3mCAB+y/JABogkIAB28mCAB47mCABg/mCAB8tkIABotnCABwznCABk9iKAB6+iKABopoCABiv"
    "oCABixoCAB8yjKAB2xoCABwjpCAButpCABwtpCAB4npCABy/pCABqhqCAB0/lKAB24qCABq5kBABu7qCABu3mKABs+kBABmsrCABk7uBABmyrC"
    "ABq0oKAB0hpKAB8mlBABsnlBABg+rCAB0gqKABkrlBABspqKAB2gsCAB2gsCAByisCABs7qKABkusCABmzlBAByysCABu6sCABk8sCAB8/sCAB"
    "88lBABgztKABkxtCABgkuCAB6vuCAB8smBAB6umBABu2uCAB8swKABwvmBABqwwKAB8gxKABipxKAB2rvCABs1mBAByvvCAB8vvCABqwvCAB+w"
    "vCABsxvCAB2zvCABggzKA";

}  // namespace ucd
}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/31_unicode.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Unicode: character classes, White_Space, simple case folding, NFC ====
// Decodes the tables of 30_unicode_data.hpp once (thread-safe function-local static) into two-stage
// lookup tables: one byte of flags per code point (major general category, White_Space, "NFC may change
// this"), one byte of canonical combining class. Text that is not valid UTF-8 is handled byte by byte:
// an invalid byte is a unit of class C (other) that NFC leaves untouched.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Major general category classes, as the pre-tokenizer regexes use them (\p{L}, \p{N}, ...).
enum class UClass : uint8_t { other = 0, letter = 1, mark = 2, number = 3, punct = 4, symbol = 5, separator = 6 };

constexpr uint8_t kUClassMask = 7;
constexpr uint8_t kUWhiteSpace = 8;   // Unicode White_Space (regex \s)
constexpr uint8_t kUNfcUnsafe = 16;   // non-zero combining class, a decomposition, or a composition's 2nd part

// A 0x110000-entry byte table stored as 4352 blocks of 256, identical blocks shared.
class UTable {
 public:
  void build(const std::vector<uint8_t>& full) {
    stage1_.assign(kBlocks, 0);
    std::unordered_map<std::string, uint16_t> seen;
    for (uint32_t b = 0; b < kBlocks; b++) {
      std::string key(reinterpret_cast<const char*>(full.data()) + b * 256, 256);
      auto it = seen.find(key);
      if (it == seen.end()) {
        auto idx = static_cast<uint16_t>(stage2_.size() / 256);
        stage2_.insert(stage2_.end(), full.begin() + b * 256, full.begin() + (b + 1) * 256);
        it = seen.emplace(std::move(key), idx).first;
      }
      stage1_[b] = it->second;
    }
  }
  uint8_t operator()(uint32_t cp) const {
    if (cp >= 0x110000) return 0;
    return stage2_[static_cast<size_t>(stage1_[cp >> 8]) * 256 + (cp & 255)];
  }
  size_t bytes() const { return stage1_.size() * 2 + stage2_.size(); }

 private:
  static constexpr uint32_t kBlocks = 0x110000 / 256;
  std::vector<uint16_t> stage1_;
  std::vector<uint8_t> stage2_;
};

struct UnicodeTables {
  UTable flags, ccc;
  struct FoldRun {
    uint32_t start, count, step;
    int32_t delta;
  };
  std::vector<FoldRun> fold;
  std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> decomp;  // cp -> (first, second or 0)
  std::unordered_map<uint64_t, uint32_t> compose;                       // (first << 21 | second) -> composite
};

// Reads one varint of the generated tables (see tools/gen_unicode).
inline uint32_t ucd_varint(const char*& p) {
  uint32_t v = 0;
  int shift = 0;
  for (;;) {
    char c = *p++;
    uint32_t d = c >= 'A' && c <= 'Z'   ? uint32_t(c - 'A')
                 : c >= 'a' && c <= 'z' ? uint32_t(c - 'a' + 26)
                 : c >= '0' && c <= '9' ? uint32_t(c - '0' + 52)
                 : c == '+'             ? 62u
                                        : 63u;
    v |= (d & 31) << shift;
    shift += 5;
    if (!(d & 32)) return v;
  }
}

namespace hangul {
constexpr uint32_t SBase = 0xAC00, LBase = 0x1100, VBase = 0x1161, TBase = 0x11A7;
constexpr uint32_t LCount = 19, VCount = 21, TCount = 28, NCount = VCount * TCount, SCount = LCount * NCount;
}  // namespace hangul

inline UnicodeTables build_unicode_tables() {
  UnicodeTables t;
  std::vector<uint8_t> full(0x110000, 0);
  // categories
  {
    const char* p = ucd::kCategories;
    uint32_t cp = 0;
    while (*p && cp < 0x110000) {
      uint32_t v = ucd_varint(p);
      uint32_t len = v >> 3, cls = v & 7;
      for (uint32_t k = 0; k < len && cp < 0x110000; k++) full[cp++] = static_cast<uint8_t>(cls);
    }
    LLMI_ASSERT(cp == 0x110000);
  }
  {
    const char* p = ucd::kWhiteSpace;
    uint32_t cp = 0;
    while (*p) {
      cp += ucd_varint(p);
      uint32_t len = ucd_varint(p);
      for (uint32_t k = 0; k < len; k++) full[cp++] |= kUWhiteSpace;
    }
  }
  std::vector<uint8_t> ccc(0x110000, 0);
  {
    const char* p = ucd::kCombiningClass;
    uint32_t cp = 0;
    while (*p) {
      cp += ucd_varint(p);
      uint32_t len = ucd_varint(p), cls = ucd_varint(p);
      for (uint32_t k = 0; k < len; k++) {
        ccc[cp] = static_cast<uint8_t>(cls);
        full[cp++] |= kUNfcUnsafe;
      }
    }
  }
  {
    const char* p = ucd::kDecompositions;
    uint32_t cp = 0;
    while (*p) {
      cp += ucd_varint(p);
      uint32_t first = ucd_varint(p), second = ucd_varint(p);
      bool composes = first & 1;
      first >>= 1;
      t.decomp.emplace(cp, std::make_pair(first, second));
      full[cp] |= kUNfcUnsafe;
      if (composes) {
        t.compose.emplace((uint64_t(first) << 21) | second, cp);
        full[second] |= kUNfcUnsafe;
      }
    }
  }
  // Hangul: precomposed syllables are stable, but jamo vowels and trailing consonants compose
  for (uint32_t c = hangul::VBase; c < hangul::VBase + hangul::VCount; c++) full[c] |= kUNfcUnsafe;
  for (uint32_t c = hangul::TBase + 1; c < hangul::TBase + hangul::TCount; c++) full[c] |= kUNfcUnsafe;
  {
    const char* p = ucd::kCaseFold;
    uint32_t cp = 0;
    while (*p) {
      cp += ucd_varint(p);
      uint32_t cs = ucd_varint(p), z = ucd_varint(p);
      UnicodeTables::FoldRun r;
      r.start = cp;
      r.count = cs >> 1;
      r.step = (cs & 1) ? 2 : 1;
      r.delta = (z & 1) ? -static_cast<int32_t>((z + 1) >> 1) : static_cast<int32_t>(z >> 1);
      t.fold.push_back(r);
      cp = r.start + (r.count - 1) * r.step;
    }
  }
  t.flags.build(full);
  t.ccc.build(ccc);
  return t;
}

inline const UnicodeTables& unicode_tables() {
  static const UnicodeTables t = build_unicode_tables();
  return t;
}

inline uint8_t uflags(uint32_t cp) { return unicode_tables().flags(cp); }
inline UClass uclass(uint32_t cp) { return static_cast<UClass>(uflags(cp) & kUClassMask); }
inline bool is_uletter(uint32_t cp) { return uclass(cp) == UClass::letter; }
inline bool is_unumber(uint32_t cp) { return uclass(cp) == UClass::number; }
inline bool is_uwhitespace(uint32_t cp) { return (uflags(cp) & kUWhiteSpace) != 0; }
inline uint8_t combining_class(uint32_t cp) { return unicode_tables().ccc(cp); }

// Unicode simple case folding (CaseFolding.txt status C and S).
inline uint32_t case_fold(uint32_t cp) {
  const auto& runs = unicode_tables().fold;
  auto it = std::upper_bound(runs.begin(), runs.end(), cp,
                             [](uint32_t c, const UnicodeTables::FoldRun& r) { return c < r.start; });
  if (it == runs.begin()) return cp;
  --it;
  uint32_t off = cp - it->start;
  if (off % it->step != 0 || off / it->step >= it->count) return cp;
  return static_cast<uint32_t>(static_cast<int64_t>(cp) + it->delta);
}

// ---- NFC ----
// Units above U+10FFFF stand for invalid bytes (0x110000 + byte): combining class 0, never composed.
constexpr uint32_t kInvalidByteUnit = 0x110000;

inline void nfc_decompose_append(uint32_t cp, std::vector<uint32_t>& out) {
  using namespace hangul;
  if (cp >= SBase && cp < SBase + SCount) {
    uint32_t s = cp - SBase;
    out.push_back(LBase + s / NCount);
    out.push_back(VBase + (s % NCount) / TCount);
    if (s % TCount) out.push_back(TBase + s % TCount);
    return;
  }
  const auto& d = unicode_tables().decomp;
  auto it = cp < kInvalidByteUnit ? d.find(cp) : d.end();
  if (it == d.end()) {
    out.push_back(cp);
    return;
  }
  nfc_decompose_append(it->second.first, out);  // depth is bounded by the data (at most 4)
  if (it->second.second) nfc_decompose_append(it->second.second, out);
}

inline uint32_t nfc_compose_pair(uint32_t a, uint32_t b) {
  using namespace hangul;
  if (a >= LBase && a < LBase + LCount && b >= VBase && b < VBase + VCount)
    return SBase + ((a - LBase) * VCount + (b - VBase)) * TCount;
  if (a >= SBase && a < SBase + SCount && (a - SBase) % TCount == 0 && b > TBase && b < TBase + TCount)
    return a + (b - TBase);
  if (a >= kInvalidByteUnit || b >= kInvalidByteUnit) return 0;
  const auto& c = unicode_tables().compose;
  auto it = c.find((uint64_t(a) << 21) | b);
  return it == c.end() ? 0 : it->second;
}

// True when NFC leaves `s` unchanged for sure (no code point that NFC could touch).
inline bool nfc_quick_stable(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0, n = s.size();
  while (i < n) {
    if (p[i] < 0x80) {
      i++;
      continue;
    }
    int len = utf8_valid_len(p + i, n - i);
    if (len == 0) {  // an invalid byte: NFC leaves it alone
      i++;
      continue;
    }
    if (p[i] >= 0xCC) {  // everything below U+0300 is stable
      size_t j = i;
      if (uflags(utf8_next(s, j)) & kUNfcUnsafe) return false;
    }
    i += static_cast<size_t>(len);
  }
  return true;
}

// Canonical composition of the canonical decomposition (Unicode NFC). Invalid bytes pass through.
inline void nfc_append(std::string_view s, std::string& out) {
  if (nfc_quick_stable(s)) {
    out.append(s);
    return;
  }
  std::vector<uint32_t> buf;
  buf.reserve(s.size() + 8);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    if (utf8_valid_len(p + i, s.size() - i) == 0) {
      buf.push_back(kInvalidByteUnit + p[i]);
      i++;
      continue;
    }
    nfc_decompose_append(utf8_next(s, i), buf);
  }
  auto ccc = [](uint32_t c) -> uint8_t { return c >= kInvalidByteUnit ? 0 : combining_class(c); };
  // canonical ordering: stable sort of each run of non-starters by combining class
  for (size_t i = 1; i < buf.size(); i++) {
    uint8_t c = ccc(buf[i]);
    if (c == 0) continue;
    size_t j = i;
    while (j > 0 && ccc(buf[j - 1]) > c) {
      std::swap(buf[j - 1], buf[j]);
      j--;
    }
  }
  // canonical composition
  if (!buf.empty()) {
    size_t starter = 0, w = 1;
    uint32_t starter_cp = buf[0];
    int last_class = ccc(starter_cp) ? 256 : 0;
    for (size_t r = 1; r < buf.size(); r++) {
      uint32_t ch = buf[r];
      int cls = ccc(ch);
      uint32_t comp = nfc_compose_pair(starter_cp, ch);
      if (comp && (last_class < cls || last_class == 0)) {
        buf[starter] = comp;
        starter_cp = comp;
        continue;
      }
      if (cls == 0) {
        starter = w;
        starter_cp = ch;
      }
      last_class = cls;
      buf[w++] = ch;
    }
    buf.resize(w);
  }
  for (uint32_t c : buf) {
    if (c >= kInvalidByteUnit) out += static_cast<char>(c - kInvalidByteUnit);
    else utf8_append(out, c);
  }
}

inline std::string nfc(std::string_view s) {
  std::string out;
  nfc_append(s, out);
  return out;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/32_tokenizer.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Tokenizer: byte-level BPE and SentencePiece-style BPE, as Hugging Face `tokenizers` runs them ====
// encode: added/special tokens are split out of the raw text first (leftmost, longest; a trie), then each
// remaining segment is normalized (NFC, space -> U+2581, prefix), pre-tokenized by hand-written scanners
// that implement the split regexes of real models exactly (Oniguruma semantics: \s = White_Space,
// \p{L}/\p{N} from the Unicode tables, (?i) by simple case folding), and each piece is merged by BPE
// (O(n log n): a heap of candidate pairs over a linked list of symbols).
// Two kinds of merge priority: the rank of the pair in the merges list (GPT-2 style files and every
// tokenizer.json), or the score of the merged token (SentencePiece vocabularies in GGUF, which carry
// scores and no merges; this is how SentencePiece and llama.cpp merge).
// Bytes that are not valid UTF-8 are handled one by one as characters of class "other": byte-level BPE
// encodes them as their byte tokens and SentencePiece vocabularies with byte fallback as <0xXX>, so any
// input round-trips through encode/decode.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// GGUF token types (tokenizer.ggml.token_type).
enum TokenType : uint8_t {
  tok_undefined = 0, tok_normal = 1, tok_unknown = 2, tok_control = 3, tok_user_defined = 4, tok_unused = 5,
  tok_byte = 6
};

// ---- GPT-2 byte <-> unicode mapping (byte-level BPE vocabularies spell byte b as this code point) ----
inline const std::array<uint16_t, 256>& gpt2_byte_to_cp() {
  static const std::array<uint16_t, 256> table = [] {
    std::array<uint16_t, 256> t{};
    uint16_t next = 256;
    for (int b = 0; b < 256; b++) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[static_cast<size_t>(b)] = printable ? static_cast<uint16_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

// Code point -> byte (-1 if the code point is not part of the mapping).
inline int gpt2_cp_to_byte(uint32_t cp) {
  static const std::array<int16_t, 324> table = [] {
    std::array<int16_t, 324> t{};
    t.fill(-1);
    const auto& fwd = gpt2_byte_to_cp();
    for (int b = 0; b < 256; b++) t[fwd[static_cast<size_t>(b)]] = static_cast<int16_t>(b);
    return t;
  }();
  return cp < table.size() ? table[cp] : -1;
}

// Raw bytes of a byte-level vocabulary string; false if it uses a code point outside the mapping.
inline bool gpt2_unmap(std::string_view s, std::string& out) {
  out.clear();
  size_t i = 0;
  while (i < s.size()) {
    if (utf8_valid_len(reinterpret_cast<const unsigned char*>(s.data()) + i, s.size() - i) == 0) return false;
    int b = gpt2_cp_to_byte(utf8_next(s, i));
    if (b < 0) return false;
    out += static_cast<char>(b);
  }
  return true;
}

inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a, then a final mix
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 32);
}

inline size_t table_size_for(size_t n) {
  size_t cap = 16;
  while (cap < n * 2 + 16) cap <<= 1;
  return cap;
}

// ---- string -> id, open addressing; the strings live in one arena ----
// A slot holds (32-bit hash fingerprint << 32 | entry + 1), so a probe touches the arena only on a likely hit.
class StringIndex {
 public:
  void reserve(size_t n, size_t bytes) {
    slots_.assign(table_size_for(n), 0);
    arena_.reserve(bytes);
    off_.reserve(n + 1);
    ids_.reserve(n);
  }
  // Adds (or replaces: the last id given for a string wins) a key.
  void add(std::string_view key, int32_t id) {
    if (slots_.empty() || (ids_.size() + 1) * 2 > slots_.size()) grow();
    uint64_t h = hash_bytes(key);
    uint64_t fp = h >> 32;
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      uint64_t e = slots_[i];
      if (e == 0) {
        slots_[i] = (fp << 32) | (ids_.size() + 1);
        if (off_.empty()) off_.push_back(0);
        arena_.append(key);
        off_.push_back(static_cast<uint32_t>(arena_.size()));
        ids_.push_back(id);
        return;
      }
      if ((e >> 32) == fp && key_of((e & 0xffffffffu) - 1) == key) {
        ids_[(e & 0xffffffffu) - 1] = id;
        return;
      }
    }
  }
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    uint64_t h = hash_bytes(key);
    uint64_t fp = h >> 32;
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      uint64_t e = slots_[i];
      if (e == 0) return -1;
      if ((e >> 32) == fp && key_of((e & 0xffffffffu) - 1) == key) return ids_[(e & 0xffffffffu) - 1];
    }
  }
  size_t size() const { return ids_.size(); }

 private:
  std::string_view key_of(uint64_t k) const {
    return std::string_view(arena_).substr(off_[k], off_[k + 1] - off_[k]);
  }
  void grow() {
    std::vector<int32_t> old_ids = std::move(ids_);
    std::vector<uint32_t> old_off = std::move(off_);
    std::string old_arena = std::move(arena_);
    slots_.assign(table_size_for(std::max<size_t>(old_ids.size() * 2, 64)), 0);
    ids_.clear();
    off_.clear();
    arena_.clear();
    for (size_t k = 0; k < old_ids.size(); k++)
      add(std::string_view(old_arena).substr(old_off[k], old_off[k + 1] - old_off[k]), old_ids[k]);
  }
  std::vector<uint64_t> slots_;  // 0 = empty
  std::string arena_;
  std::vector<uint32_t> off_;
  std::vector<int32_t> ids_;
};

// ---- (left id, right id) -> (rank, merged id), open addressing ----
class MergeTable {
 public:
  void reserve(size_t n) { slots_.assign(table_size_for(n), Slot{}); }
  // The first occurrence of a pair keeps its rank (Hugging Face builds the map the same way... and a
  // repeated pair never changes the result of a well-formed file).
  void add(int32_t left, int32_t right, int32_t rank, int32_t merged) {
    if (slots_.empty() || (n_ + 1) * 2 > slots_.size()) rehash(std::max<size_t>(n_ * 2, 64));
    uint64_t key = pack(left, right);
    size_t mask = slots_.size() - 1;
    for (size_t h = mix(key) & mask;; h = (h + 1) & mask) {
      if (slots_[h].key == kEmpty) {
        slots_[h] = Slot{key, rank, merged};
        n_++;
        return;
      }
      if (slots_[h].key == key) return;
    }
  }
  // Rank and merged id, or false.
  bool find(int32_t left, int32_t right, int32_t& rank, int32_t& merged) const {
    if (slots_.empty() || left < 0 || right < 0) return false;
    uint64_t key = pack(left, right);
    size_t mask = slots_.size() - 1;
    for (size_t h = mix(key) & mask;; h = (h + 1) & mask) {
      const Slot& s = slots_[h];
      if (s.key == kEmpty) return false;
      if (s.key == key) {
        rank = s.rank;
        merged = s.merged;
        return true;
      }
    }
  }
  size_t size() const { return n_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0, merged = 0;
  };
  static uint64_t pack(int32_t l, int32_t r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }
  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
  }
  void rehash(size_t n) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(table_size_for(n), Slot{});
    n_ = 0;
    for (const Slot& s : old)
      if (s.key != kEmpty) add(int32_t(s.key >> 32), int32_t(s.key & 0xffffffffu), s.rank, s.merged);
  }
  std::vector<Slot> slots_;
  size_t n_ = 0;
};

// ---- added / special tokens: a byte trie, matched leftmost-longest on the raw text ----
class TokenTrie {
 public:
  TokenTrie() { nodes_.push_back(Node{}); }
  void add(std::string_view text, int32_t id) {
    if (text.empty()) return;
    uint32_t n = 0;
    for (unsigned char c : text) {
      int32_t child = next(n, c);
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_.push_back(Node{});
        if (n == 0) root_[c] = child;
        else edges_.emplace((uint64_t(n) << 8) | c, child);
      }
      n = static_cast<uint32_t>(child);
    }
    if (nodes_[n].token < 0) nodes_[n].token = id;  // the first token given for a text wins
    max_len_ = std::max(max_len_, text.size());
    n_tokens_++;
  }
  int32_t next(uint32_t node, unsigned char c) const {
    if (node == 0) return root_[c];
    auto it = edges_.find((uint64_t(node) << 8) | c);
    return it == edges_.end() ? -1 : it->second;
  }
  int32_t token_at(uint32_t node) const { return nodes_[node].token; }
  bool can_start(unsigned char c) const { return root_[c] >= 0; }
  size_t n_tokens() const { return n_tokens_; }

 private:
  struct Node {
    int32_t token = -1;
  };
  std::vector<Node> nodes_;
  std::array<int32_t, 256> root_ = [] {
    std::array<int32_t, 256> a{};
    a.fill(-1);
    return a;
  }();
  std::unordered_map<uint64_t, int32_t> edges_;
  size_t max_len_ = 0, n_tokens_ = 0;
};

// ---- normalizers and pre-tokenizers (what a tokenizer.json or a GGUF `pre` name describes) ----
struct NormOp {
  enum class Kind : uint8_t {
    nfc,             // Unicode NFC
    replace,         // every `from` -> `to` (literal)
    prepend,         // `to` in front of a non-empty segment (Hugging Face Prepend)
    prepend_if_not,  // `to` in front unless the segment already starts with it (ByteLevel / Metaspace prefix)
  } kind;
  std::string from, to;
  bool first_segment_only = false;  // Metaspace prepend_scheme "first"
};

struct PreStage {
  enum class Kind : uint8_t {
    gpt2,          // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    llama3,        // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,k}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    digits,        // Hugging Face Digits: numeric characters isolated (one by one, or in runs)
    punct_runs,    // [\p{P}$+<=>^~|]+ isolated (llama.cpp's default BPE pre-tokenizer)
    number_runs,   // \p{N}+ isolated
    ascii_digit3,  // [0-9][0-9][0-9] isolated
    literal,       // split on a literal string with a Hugging Face SplitDelimiterBehavior
  } kind;
  int digit_max = 3;         // llama3: \p{N}{1,digit_max}
  bool marks_in_words = false;  // qwen3.5: [\p{L}\p{M}]+ words, punctuation excludes \p{M}
  bool individual = true;    // digits
  enum class Behavior : uint8_t { removed, isolated, merged_with_previous, merged_with_next, contiguous };
  Behavior behavior = Behavior::isolated;
  std::string literal_text;
};

// A segment decoded into code points, with class flags and byte offsets (invalid bytes: class other).
struct Units {
  std::vector<uint32_t> cp;
  std::vector<uint8_t> fl;
  std::vector<uint32_t> off;  // size n + 1
  void decode(std::string_view s) {
    cp.clear();
    fl.clear();
    off.clear();
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    size_t i = 0;
    while (i < s.size()) {
      off.push_back(static_cast<uint32_t>(i));
      if (p[i] < 0x80) {
        cp.push_back(p[i]);
        fl.push_back(uflags(p[i]));
        i++;
        continue;
      }
      int len = utf8_valid_len(p + i, s.size() - i);
      if (len == 0) {
        cp.push_back(kInvalidByteUnit + p[i]);
        fl.push_back(0);
        i++;
        continue;
      }
      uint32_t c = utf8_next(s, i);
      cp.push_back(c);
      fl.push_back(uflags(c));
    }
    off.push_back(static_cast<uint32_t>(s.size()));
  }
  size_t size() const { return cp.size(); }
};

struct URange {
  uint32_t b, e;  // unit indexes [b, e)
};

namespace pretok {

inline UClass cls(const Units& u, size_t i) { return static_cast<UClass>(u.fl[i] & kUClassMask); }
inline bool ws(const Units& u, size_t i) { return (u.fl[i] & kUWhiteSpace) != 0; }
inline bool is_l(const Units& u, size_t i) { return cls(u, i) == UClass::letter; }
inline bool is_n(const Units& u, size_t i) { return cls(u, i) == UClass::number; }
inline bool is_crlf(const Units& u, size_t i) { return u.cp[i] == '\r' || u.cp[i] == '\n'; }

inline void emit(std::vector<URange>& out, size_t b, size_t e) {
  if (e > b) out.push_back(URange{static_cast<uint32_t>(b), static_cast<uint32_t>(e)});
}

// Contractions: 's 't 'm 'd (length 2) or 're 've 'll (length 3) at i; 0 if none. `fold`: (?i) matching.
inline size_t contraction(const Units& u, size_t i, size_t e, bool fold) {
  if (u.cp[i] != '\'' || i + 1 >= e) return 0;
  auto f = [&](size_t k) { return fold ? case_fold(u.cp[k]) : u.cp[k]; };
  uint32_t a = f(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= e) return 0;
  uint32_t b = f(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// A run of White_Space starting at i (i is whitespace): the end of the \s+(?!\S) | \s+ match.
inline size_t whitespace_tail(const Units& u, size_t i, size_t e) {
  size_t j = i;
  while (j < e && ws(u, j)) j++;
  if (j < e && j - i > 1) return j - 1;  // \s+(?!\S): leave the last one to the next word
  return j;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
inline void gpt2(const Units& u, size_t b, size_t e, std::vector<URange>& out) {
  size_t i = b;
  while (i < e) {
    if (size_t c = contraction(u, i, e, false)) {
      emit(out, i, i + c);
      i += c;
      continue;
    }
    size_t k = (u.cp[i] == ' ' && i + 1 < e) ? i + 1 : i;  // the optional leading space
    size_t j = k;
    if (is_l(u, k)) {
      while (j < e && is_l(u, j)) j++;
    } else if (is_n(u, k)) {
      while (j < e && is_n(u, j)) j++;
    } else if (!ws(u, k)) {
      while (j < e && !ws(u, j) && !is_l(u, j) && !is_n(u, j)) j++;
    } else {
      j = whitespace_tail(u, i, e);
    }
    emit(out, i, j);
    i = j;
  }
}

// Llama 3 / Qwen 2 family (digit_max 3 / 1; qwen3.5 puts marks into words):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,k}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
inline void llama3(const Units& u, size_t b, size_t e, int digit_max, bool marks, std::vector<URange>& out) {
  auto word = [&](size_t i) { return is_l(u, i) || (marks && cls(u, i) == UClass::mark); };
  auto punct = [&](size_t i) {
    return !ws(u, i) && !is_l(u, i) && !is_n(u, i) && !(marks && cls(u, i) == UClass::mark);
  };
  size_t i = b;
  while (i < e) {
    if (size_t c = contraction(u, i, e, true)) {
      emit(out, i, i + c);
      i += c;
      continue;
    }
    size_t j = i;
    if (word(i) || (i + 1 < e && !is_crlf(u, i) && !is_l(u, i) && !is_n(u, i) && word(i + 1))) {
      j = word(i) ? i + 1 : i + 2;
      while (j < e && word(j)) j++;
    } else if (is_n(u, i)) {
      j = i + 1;
      while (j < e && is_n(u, j) && j - i < static_cast<size_t>(digit_max)) j++;
    } else if (punct(i) || (u.cp[i] == ' ' && i + 1 < e && punct(i + 1))) {
      j = punct(i) ? i + 1 : i + 2;
      while (j < e && punct(j)) j++;
      while (j < e && is_crlf(u, j)) j++;
    } else if (ws(u, i)) {
      size_t run = i;
      while (run < e && ws(u, run)) run++;
      size_t last_nl = e;
      for (size_t k = i; k < run; k++)
        if (is_crlf(u, k)) last_nl = k;
      j = last_nl != e ? last_nl + 1 : whitespace_tail(u, i, e);  // \s*[\r\n]+ first
    } else {
      j = i + 1;  // not reachable: every unit is a letter, a number, whitespace or "other"
    }
    emit(out, i, j);
    i = j;
  }
}

// Isolate the units for which `in` holds: one by one, or as runs.
template <class Pred>
inline void isolate(size_t b, size_t e, bool one_by_one, Pred in, std::vector<URange>& out) {
  size_t i = b;
  while (i < e) {
    size_t j = i + 1;
    if (in(i)) {
      if (!one_by_one)
        while (j < e && in(j)) j++;
    } else {
      while (j < e && !in(j)) j++;
    }
    emit(out, i, j);
    i = j;
  }
}

inline void ascii_digit3(const Units& u, size_t b, size_t e, std::vector<URange>& out) {
  auto d = [&](size_t k) { return u.cp[k] >= '0' && u.cp[k] <= '9'; };
  size_t i = b, start = b;
  while (i + 3 <= e) {
    if (d(i) && d(i + 1) && d(i + 2)) {
      emit(out, start, i);
      emit(out, i, i + 3);
      i += 3;
      start = i;
    } else {
      i++;
    }
  }
  emit(out, start, e);
}

inline void literal(const Units& u, size_t b, size_t e, const std::vector<uint32_t>& lit, PreStage::Behavior beh,
                    std::vector<URange>& out) {
  using B = PreStage::Behavior;
  if (lit.empty()) {
    emit(out, b, e);
    return;
  }
  std::vector<URange> parts;  // alternating text / match, match marked by a flag vector
  std::vector<bool> is_match;
  size_t i = b, start = b;
  while (i + lit.size() <= e) {
    bool m = true;
    for (size_t k = 0; k < lit.size() && m; k++) m = u.cp[i + k] == lit[k];
    if (m) {
      if (i > start) {
        parts.push_back(URange{uint32_t(start), uint32_t(i)});
        is_match.push_back(false);
      }
      parts.push_back(URange{uint32_t(i), uint32_t(i + lit.size())});
      is_match.push_back(true);
      i += lit.size();
      start = i;
    } else {
      i++;
    }
  }
  if (e > start) {
    parts.push_back(URange{uint32_t(start), uint32_t(e)});
    is_match.push_back(false);
  }
  size_t k = 0;
  while (k < parts.size()) {
    URange r = parts[k];
    switch (beh) {
      case B::removed:
        if (!is_match[k]) emit(out, r.b, r.e);
        k++;
        break;
      case B::isolated: emit(out, r.b, r.e); k++; break;
      case B::contiguous: {
        size_t j = k + 1;
        if (is_match[k])
          while (j < parts.size() && is_match[j]) r.e = parts[j++].e;
        emit(out, r.b, r.e);
        k = j;
        break;
      }
      case B::merged_with_previous:
        if (!is_match[k] && k + 1 < parts.size() && is_match[k + 1]) {
          r.e = parts[k + 1].e;
          k += 2;
        } else {
          k++;
        }
        emit(out, r.b, r.e);
        break;
      case B::merged_with_next:
        if (is_match[k] && k + 1 < parts.size() && !is_match[k + 1]) {
          r.e = parts[k + 1].e;
          k += 2;
        } else {
          k++;
        }
        emit(out, r.b, r.e);
        break;
    }
  }
}

}  // namespace pretok

class StreamDecoder;

class Tokenizer {
 public:
  // Builds from the model description: a GGUF vocabulary (tokenizer.ggml.*) or a Hugging Face
  // tokenizer.json (+ tokenizer_config.json, generation_config.json) of a model directory.
  static Result<std::shared_ptr<const Tokenizer>> build(const ModelDesc& desc);

  // add_special: BOS/EOS as the model asks; parse_special: special-token text in `text` becomes control tokens.
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special, bool parse_special) const;
  // Like encode(text, add_special, /*parse_special=*/true) but special tokens are NOT recognised inside the
  // byte ranges `no_special` (half-open [begin,end) offsets into `text`; they hold message content rendered by
  // a chat template). Pre-tokenization and merges still run over the whole text exactly as encode() would.
  Result<std::vector<int32_t>> encode_prompt(std::string_view text,
                                             std::span<const std::pair<size_t, size_t>> no_special,
                                             bool add_special) const;
  // Raw bytes (invalid UTF-8 only if the tokens are). Ids out of range contribute nothing.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  std::string_view token_bytes(int32_t id) const;  // the bytes this token contributes when decoded
  const std::string& token_text(int32_t id) const;  // the vocabulary string ("" when out of range)
  int32_t n_vocab() const { return static_cast<int32_t>(text_.size()); }
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  bool is_eog(int32_t id) const { return in_range(id) && (flags_[size_t(id)] & kEog); }
  // A special token in the Hugging Face sense (control or unknown): parsed only when asked, skipped by
  // decode(skip_special).
  bool is_control(int32_t id) const { return in_range(id) && (flags_[size_t(id)] & kSpecial); }
  const std::vector<int32_t>& eog_ids() const { return eog_; }
  // The ids that add_special puts before / after the text.
  const std::vector<int32_t>& prefix_ids() const { return prefix_; }
  const std::vector<int32_t>& suffix_ids() const { return suffix_; }
  // How many leading spaces decode() strips from its output (SentencePiece dummy prefix).
  int strip_leading_spaces() const { return strip_spaces_; }
  // One line: model kind, pre-tokenizer, vocabulary size (for status output and messages).
  const std::string& summary() const { return summary_; }

 private:
  friend class StreamDecoder;
  friend struct TokenizerBuilder;
  static constexpr uint8_t kSpecial = 1, kEog = 2, kMatchable = 4, kLstrip = 8, kRstrip = 16;

  bool in_range(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < text_.size(); }

  struct Scratch {
    std::string norm;
    Units units;
    std::vector<URange> a, b;
    struct Sym {
      uint32_t start, len;  // bytes in the piece
      int32_t id;           // token id (-1: not in the vocabulary, score mode only)
      int32_t prev, next;
    };
    std::vector<Sym> syms;
    struct Cand {
      int32_t prio;   // lower merges first
      int32_t left;   // symbol index (ties: leftmost first)
      int32_t right;
      uint32_t len;   // bytes of left + right when queued (stale check)
      int32_t merged;
    };
    std::vector<Cand> heap;
  };

  void encode_text(std::string_view text, bool parse_special, std::span<const std::pair<size_t, size_t>> no_special,
                   bool prompt_mode, std::vector<int32_t>& out) const;
  void encode_segment(std::string_view seg, bool first_segment, Scratch& s, std::vector<int32_t>& out) const;
  void encode_normalized(std::string_view text, Scratch& s, std::vector<int32_t>& out) const;
  void bpe_piece(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const;
  void push_unknown_bytes(std::string_view bytes, std::vector<int32_t>& out) const;

  enum class Merge : uint8_t { by_rank, by_score };
  bool byte_level_ = true;  // the vocabulary spells bytes with the GPT-2 mapping (tokens stored as raw bytes)
  Merge merge_mode_ = Merge::by_rank;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  int32_t unk_ = -1, bos_ = -1, eos_ = -1;
  int strip_spaces_ = 0;

  std::vector<std::string> text_;
  std::vector<uint8_t> type_;
  std::vector<uint8_t> flags_;
  std::string bytes_arena_;
  std::vector<uint32_t> bytes_off_;  // n + 1
  StringIndex index_;               // merge-space string (byte-level: raw bytes) -> id
  MergeTable merges_;
  std::vector<int32_t> score_prio_;  // by_score: merge priority of each token (lower first)
  std::array<int32_t, 256> byte_tok_{};  // byte-level: the token of each byte; otherwise <0xXX>
  TokenTrie trie_;       // added tokens, matched on the raw text
  TokenTrie norm_trie_;  // user-defined pieces matched on the normalized text (SentencePiece semantics)
  std::vector<NormOp> norm_;
  std::vector<PreStage> pre_;
  std::vector<std::vector<uint32_t>> pre_literals_;  // literal stages as code points
  std::vector<int32_t> prefix_, suffix_;
  std::vector<int32_t> eog_;
  std::string summary_;
};

// ---- encode ----

inline Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special,
                                                     bool parse_special) const {
  if (text.size() >= 0xFFFFFFF0u)
    return make_error(Errc::invalid_argument, strf("cannot tokenize %zu bytes at once (4 GiB at most)", text.size()));
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special) out.insert(out.end(), prefix_.begin(), prefix_.end());
  encode_text(text, parse_special, {}, false, out);
  if (add_special) out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

inline Result<std::vector<int32_t>> Tokenizer::encode_prompt(std::string_view text,
                                                            std::span<const std::pair<size_t, size_t>> no_special,
                                                            bool add_special) const {
  if (text.size() >= 0xFFFFFFF0u)
    return make_error(Errc::invalid_argument, strf("cannot tokenize %zu bytes at once (4 GiB at most)", text.size()));
  for (const auto& [b, e] : no_special)
    if (b > e || e > text.size())
      return make_error(Errc::invalid_argument,
                        strf("encode_prompt: range [%zu, %zu) is not inside the %zu-byte text", b, e, text.size()));
  std::vector<std::pair<size_t, size_t>> ranges(no_special.begin(), no_special.end());
  std::sort(ranges.begin(), ranges.end());
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special) out.insert(out.end(), prefix_.begin(), prefix_.end());
  encode_text(text, true, ranges, true, out);
  if (add_special) out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

// Whitespace (White_Space) ending at `end` (> begin): moves `end` before it and returns true.
inline bool is_ascii_or_uspace_before(std::string_view text, size_t begin, size_t& end) {
  size_t k = end - 1;
  while (k > begin && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) k--;
  size_t j = k;
  uint32_t cp = utf8_next(text, j);
  if (j != end || !is_uwhitespace(cp)) return false;
  end = k;
  return true;
}
// Whitespace starting at `pos`: moves `pos` after it and returns true.
inline bool is_uspace_at(std::string_view text, size_t& pos) {
  size_t j = pos;
  if (utf8_valid_len(reinterpret_cast<const unsigned char*>(text.data()) + pos, text.size() - pos) == 0) return false;
  if (!is_uwhitespace(utf8_next(text, j))) return false;
  pos = j;
  return true;
}

// Splits out added tokens (leftmost-longest), encodes the text between them.
inline void Tokenizer::encode_text(std::string_view text, bool parse_special,
                                   std::span<const std::pair<size_t, size_t>> no_special, bool prompt_mode,
                                   std::vector<int32_t>& out) const {
  Scratch s;
  // true when [b, e) overlaps one of the sorted no_special ranges
  auto in_content = [&](size_t b, size_t e) {
    auto it = std::upper_bound(no_special.begin(), no_special.end(), std::make_pair(b, SIZE_MAX));
    if (it != no_special.begin()) {
      auto p = std::prev(it);
      if (p->second > b) return true;
    }
    for (; it != no_special.end() && it->first < e; ++it)
      if (it->second > it->first) return true;
    return false;
  };
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  size_t seg_start = 0, i = 0;
  bool first = true;
  while (i < text.size()) {
    if (!trie_.can_start(p[i])) {
      i++;
      continue;
    }
    int32_t best = -1;
    size_t best_end = 0;
    uint32_t node = 0;
    for (size_t k = i; k < text.size(); k++) {
      int32_t nx = trie_.next(node, p[k]);
      if (nx < 0) break;
      node = static_cast<uint32_t>(nx);
      int32_t tok = trie_.token_at(node);
      if (tok < 0) continue;
      bool special = flags_[size_t(tok)] & kSpecial;
      if (special && !parse_special) continue;
      if (special && prompt_mode && in_content(i, k + 1)) continue;
      best = tok;
      best_end = k + 1;
    }
    if (best < 0) {
      i++;
      continue;
    }
    // lstrip / rstrip added tokens (tokenizer.json) swallow the whitespace next to them
    size_t seg_end = i;
    if (flags_[size_t(best)] & kLstrip)
      while (seg_end > seg_start && is_ascii_or_uspace_before(text, seg_start, seg_end)) {}
    if (flags_[size_t(best)] & kRstrip)
      while (best_end < text.size() && is_uspace_at(text, best_end)) {}
    if (seg_end > seg_start) encode_segment(text.substr(seg_start, seg_end - seg_start), first, s, out);
    first = false;
    out.push_back(best);
    i = seg_start = best_end;
  }
  if (seg_start < text.size()) encode_segment(text.substr(seg_start), first, s, out);
}

inline void Tokenizer::encode_segment(std::string_view seg, bool first_segment, Scratch& s,
                                      std::vector<int32_t>& out) const {
  // normalize
  std::string_view text = seg;
  if (!norm_.empty()) {
    std::string cur(seg), next;
    for (const NormOp& op : norm_) {
      switch (op.kind) {
        case NormOp::Kind::nfc:
          next.clear();
          nfc_append(cur, next);
          cur.swap(next);
          break;
        case NormOp::Kind::replace: {
          if (op.from.empty() || cur.find(op.from) == std::string::npos) break;
          next.clear();
          size_t pos = 0;
          for (size_t f; (f = cur.find(op.from, pos)) != std::string::npos; pos = f + op.from.size()) {
            next.append(cur, pos, f - pos);
            next += op.to;
          }
          next.append(cur, pos, std::string::npos);
          cur.swap(next);
          break;
        }
        case NormOp::Kind::prepend:
          if (!cur.empty() && (!op.first_segment_only || first_segment)) cur.insert(0, op.to);
          break;
        case NormOp::Kind::prepend_if_not:
          if (!cur.empty() && (!op.first_segment_only || first_segment) && cur.compare(0, op.to.size(), op.to) != 0)
            cur.insert(0, op.to);
          break;
      }
    }
    s.norm.swap(cur);
    text = s.norm;
  }
  if (text.empty()) return;
  if (norm_trie_.n_tokens() == 0) {
    encode_normalized(text, s, out);
    return;
  }
  // user-defined pieces on the normalized text, leftmost-longest; the rest goes on as usual
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  size_t start = 0, i = 0;
  while (i < text.size()) {
    int32_t best = -1;
    size_t best_end = 0;
    uint32_t node = 0;
    for (size_t k = i; k < text.size() && norm_trie_.can_start(p[i]); k++) {
      int32_t nx = norm_trie_.next(node, p[k]);
      if (nx < 0) break;
      node = static_cast<uint32_t>(nx);
      if (norm_trie_.token_at(node) >= 0) {
        best = norm_trie_.token_at(node);
        best_end = k + 1;
      }
    }
    if (best < 0) {
      i++;
      continue;
    }
    if (i > start) encode_normalized(text.substr(start, i - start), s, out);
    out.push_back(best);
    i = start = best_end;
  }
  if (start < text.size()) encode_normalized(text.substr(start), s, out);
}

// Pre-tokenization and BPE of normalized text.
inline void Tokenizer::encode_normalized(std::string_view text, Scratch& s, std::vector<int32_t>& out) const {
  if (pre_.empty()) {
    bpe_piece(text, s, out);
    return;
  }
  // pre-tokenize: each stage refines the pieces of the previous one
  s.units.decode(text);
  const Units& u = s.units;
  s.a.clear();
  s.a.push_back(URange{0, static_cast<uint32_t>(u.size())});
  for (size_t k = 0; k < pre_.size(); k++) {
    const PreStage& st = pre_[k];
    s.b.clear();
    for (const URange& r : s.a) {
      switch (st.kind) {
        case PreStage::Kind::gpt2: pretok::gpt2(u, r.b, r.e, s.b); break;
        case PreStage::Kind::llama3: pretok::llama3(u, r.b, r.e, st.digit_max, st.marks_in_words, s.b); break;
        case PreStage::Kind::digits:
          pretok::isolate(r.b, r.e, st.individual, [&](size_t q) { return pretok::is_n(u, q); }, s.b);
          break;
        case PreStage::Kind::number_runs:
          pretok::isolate(r.b, r.e, false, [&](size_t q) { return pretok::is_n(u, q); }, s.b);
          break;
        case PreStage::Kind::punct_runs:
          pretok::isolate(r.b, r.e, false, [&](size_t q) {
            uint32_t c = u.cp[q];
            return pretok::cls(u, q) == UClass::punct || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' ||
                   c == '^' || c == '~' || c == '|';
          }, s.b);
          break;
        case PreStage::Kind::ascii_digit3: pretok::ascii_digit3(u, r.b, r.e, s.b); break;
        case PreStage::Kind::literal: pretok::literal(u, r.b, r.e, pre_literals_[k], st.behavior, s.b); break;
      }
    }
    s.a.swap(s.b);
  }
  for (const URange& r : s.a) {  // bpe_piece uses other scratch buffers
    uint32_t b = u.off[r.b], e = u.off[r.e];
    bpe_piece(text.substr(b, e - b), s, out);
  }
}

// Bytes of a character that has no token: <0xXX> tokens (byte fallback), else the unknown token.
inline void Tokenizer::push_unknown_bytes(std::string_view bytes, std::vector<int32_t>& out) const {
  if (byte_fallback_) {
    bool all = true;
    for (unsigned char c : bytes) all = all && byte_tok_[c] >= 0;
    if (all) {
      for (unsigned char c : bytes) out.push_back(byte_tok_[c]);
      return;
    }
  }
  if (unk_ >= 0) {
    if (fuse_unk_ && !out.empty() && out.back() == unk_) return;
    out.push_back(unk_);
  }
  // no byte token and no unknown token: the character is dropped (as Hugging Face does)
}

inline void Tokenizer::bpe_piece(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    int32_t whole = index_.find(piece);
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  using Sym = Scratch::Sym;
  auto& syms = s.syms;
  syms.clear();
  const auto* p = reinterpret_cast<const unsigned char*>(piece.data());
  if (byte_level_) {
    for (size_t i = 0; i < piece.size(); i++)
      syms.push_back(Sym{uint32_t(i), 1, byte_tok_[p[i]], int32_t(syms.size()) - 1, int32_t(syms.size()) + 1});
  } else {
    for (size_t i = 0; i < piece.size();) {
      int len = utf8_valid_len(p + i, piece.size() - i);
      if (len == 0) len = 1;
      int32_t id = index_.find(piece.substr(i, size_t(len)));
      if (id < 0 && merge_mode_ == Merge::by_rank && byte_fallback_) {
        // Hugging Face: a character outside the vocabulary becomes its byte tokens before merging
        bool all = true;
        for (int k = 0; k < len; k++) all = all && byte_tok_[p[i + size_t(k)]] >= 0;
        if (all) {
          for (int k = 0; k < len; k++)
            syms.push_back(Sym{uint32_t(i + size_t(k)), 1, byte_tok_[p[i + size_t(k)]], int32_t(syms.size()) - 1,
                               int32_t(syms.size()) + 1});
          i += size_t(len);
          continue;
        }
      }
      syms.push_back(Sym{uint32_t(i), uint32_t(len), id, int32_t(syms.size()) - 1, int32_t(syms.size()) + 1});
      i += size_t(len);
    }
  }
  if (syms.empty()) return;
  syms.back().next = -1;
  // candidate pairs, lowest priority value first, then leftmost
  auto& heap = s.heap;
  heap.clear();
  auto cmp = [](const Scratch::Cand& a, const Scratch::Cand& b) {
    return a.prio != b.prio ? a.prio > b.prio : a.left > b.left;
  };
  auto consider = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const Sym& L = syms[size_t(l)];
    const Sym& R = syms[size_t(r)];
    int32_t prio = 0, merged = -1;
    if (merge_mode_ == Merge::by_rank) {
      if (!merges_.find(L.id, R.id, prio, merged)) return;
    } else {
      merged = index_.find(piece.substr(L.start, L.len + R.len));
      if (merged < 0) return;
      prio = score_prio_[size_t(merged)];
    }
    heap.push_back(Scratch::Cand{prio, l, r, L.len + R.len, merged});
    std::push_heap(heap.begin(), heap.end(), cmp);
  };
  for (size_t i = 0; i + 1 < syms.size(); i++) consider(int32_t(i), int32_t(i + 1));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    Scratch::Cand c = heap.back();
    heap.pop_back();
    Sym& L = syms[size_t(c.left)];
    if (L.len == 0 || L.next != c.right) continue;
    Sym& R = syms[size_t(c.right)];
    if (R.len == 0 || L.len + R.len != c.len) continue;
    L.len += R.len;
    L.id = c.merged;
    R.len = 0;
    L.next = R.next;
    if (R.next >= 0) syms[size_t(R.next)].prev = c.left;
    consider(L.prev, c.left);
    consider(c.left, L.next);
  }
  for (int32_t i = 0; i >= 0; i = syms[size_t(i)].next) {
    const Sym& sy = syms[size_t(i)];
    if (sy.id >= 0) out.push_back(sy.id);
    else push_unknown_bytes(piece.substr(sy.start, sy.len), out);
  }
}

// ---- decode ----

inline std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (!in_range(id)) return {};
  auto k = static_cast<size_t>(id);
  return std::string_view(bytes_arena_).substr(bytes_off_[k], bytes_off_[k + 1] - bytes_off_[k]);
}

inline const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string empty;
  return in_range(id) ? text_[size_t(id)] : empty;
}

inline std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (skip_special && is_control(id)) continue;
    out.append(token_bytes(id));
  }
  size_t strip = 0;
  while (strip < out.size() && strip < static_cast<size_t>(strip_spaces_) && out[strip] == ' ') strip++;
  out.erase(0, strip);
  return out;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/33_tokenizer_build.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Tokenizer construction: from a GGUF vocabulary or from a Hugging Face tokenizer.json ====
// GGUF (tokenizer.ggml.*): "gpt2" = byte-level BPE with merges, the pre-tokenizer named by
// tokenizer.ggml.pre; "llama" = SentencePiece BPE (scores, byte fallback, U+2581 for spaces, dummy prefix
// per tokenizer.ggml.add_space_prefix). tokenizer.json: the normalizer, pre_tokenizer, model, decoder and
// post_processor sections are read and mapped onto the same machinery; anything outside what is
// implemented is a clear `unsupported` error rather than a silently different tokenization.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Token texts that end a generation turn (llama.cpp's list; Hugging Face generation_config files list
// the same tokens as eos_token_id). `</s>` is not here: gemma uses it as an ordinary HTML tag.
inline bool is_known_eog_text(std::string_view t) {
  static const char* const k[] = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>",
      "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
      ("<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"),  // DeepSeek
  };
  for (const char* s : k)
    if (t == s) return true;
  return false;
}

// The split regexes of tokenizer.json files that have a hand-written scanner.
constexpr std::string_view kRegexLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kRegexQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kRegexQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kRegexGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct TokenizerBuilder {
  Tokenizer t;
  std::string where;  // file name for messages
  std::vector<bool> merge_vocab;  // tokens that BPE may produce (the model vocabulary)
  std::vector<std::pair<std::string, int32_t>> extra_trie;  // additional trie keys
  std::vector<size_t> spaced_user_defined;  // SentencePiece user-defined tokens stored with spaces

  Error bad(const std::string& what) const { return make_error(Errc::bad_format, where + ": " + what); }
  Error unsupported(const std::string& what) const { return make_error(Errc::unsupported, where + ": " + what); }

  static PreStage stage(PreStage::Kind k) {
    PreStage s;
    s.kind = k;
    return s;
  }

  // ---- GGUF ----
  // Pre-tokenizer of a byte-level BPE vocabulary, by its llama.cpp name.
  Result<void> gguf_pre(const std::string& pre, bool& ignore_merges, bool& add_bos, bool& nfc) {
    auto in = [&](std::initializer_list<const char*> names) {
      for (const char* n : names)
        if (pre == n) return true;
      return false;
    };
    using K = PreStage::Kind;
    if (in({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
            "jina-v5-nano"})) {
      t.pre_.push_back(stage(K::llama3));
      ignore_merges = true;
      add_bos = true;
    } else if (in({"dbrx", "smaug-bpe", "glm4", "chatglm-bpe"})) {
      t.pre_.push_back(stage(K::llama3));
    } else if (in({"qwen2", "deepseek-r1-qwen", "qwen35", "kormo", "f2llmv2", "stablelm2", "megrez", "hunyuan",
                   "solar-open", "grok-2"})) {
      PreStage s = stage(K::llama3);
      s.digit_max = 1;
      s.marks_in_words = pre == "qwen35";
      t.pre_.push_back(s);
      // Qwen2/2.5/3's tokenizer.json normalizes to NFC (llama.cpp does not; Hugging Face does). Qwen3.5's
      // does not (llama.cpp's qwen35 test vectors, made with Hugging Face, keep NFD text decomposed).
      nfc = pre == "qwen2";
    } else if (in({"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
                   "modern-bert", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4", "jina-v1-en",
                   "jina-v2-code", "roberta-bpe"})) {
      t.pre_.push_back(stage(K::gpt2));
    } else if (in({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"})) {
      t.pre_.push_back(stage(K::digits));
      t.pre_.push_back(stage(K::gpt2));
    } else if (pre.empty() || pre == "default") {
      // llama.cpp's fallback for byte-level vocabularies without a pre-tokenizer name
      t.pre_.push_back(stage(K::punct_runs));
      t.pre_.push_back(stage(K::gpt2));
      t.pre_.push_back(stage(K::number_runs));
      t.pre_.push_back(stage(K::ascii_digit3));
    } else {
      return unsupported("pre-tokenizer '" + printable(pre) +
                         "' (tokenizer.ggml.pre) is not supported; supported: llama-bpe and the llama-3 family, "
                         "qwen2, qwen35, gpt-2 style, smollm/starcoder style, default");
    }
    return {};
  }

  Result<void> from_gguf(const ModelDesc& desc) {
    const VocabData& v = desc.vocab;
    where = desc.path;
    if (v.tokens.empty()) return unsupported("the file has no vocabulary (tokenizer.ggml.tokens)");
    if (v.tokens.size() >= (1u << 30)) return bad("the vocabulary is too large");
    size_t n = v.tokens.size();
    t.text_ = v.tokens;
    t.type_.assign(n, tok_normal);
    if (!v.types.empty()) {
      if (v.types.size() != n) return bad("tokenizer.ggml.token_type does not match the vocabulary size");
      for (size_t i = 0; i < n; i++) t.type_[i] = (v.types[i] >= 0 && v.types[i] <= 6) ? uint8_t(v.types[i]) : 0;
    }
    for (size_t i = 0; i < n; i++)  // as llama.cpp: an empty string is not a usable token text
      if (t.text_[i].empty()) t.text_[i] = "[EMPTY_" + std::to_string(i) + "]";
    bool add_bos = false, add_eos = false;
    if (v.model == "gpt2") {
      bool ignore_merges = false, nfc = false;
      if (auto r = gguf_pre(v.pre, ignore_merges, add_bos, nfc); !r) return r.error();
      t.byte_level_ = true;
      t.merge_mode_ = Tokenizer::Merge::by_rank;
      t.ignore_merges_ = ignore_merges;
      if (nfc) t.norm_.push_back(NormOp{NormOp::Kind::nfc, {}, {}, false});
      merge_vocab.assign(n, false);
      for (size_t i = 0; i < n; i++) merge_vocab[i] = t.type_[i] == tok_normal || t.type_[i] == tok_undefined;
      if (v.merges.empty()) return bad("a byte-level BPE vocabulary (gpt2) without tokenizer.ggml.merges");
      if (auto r = build_byte_level(v.merges, /*strict=*/false); !r) return r.error();
      for (size_t i = 0; i < n; i++) set_bytes_byte_level(i);
      t.unk_ = v.unk;
    } else if (v.model == "llama") {
      // SentencePiece BPE; llama.cpp's defaults where the metadata is silent
      t.byte_level_ = false;
      t.merge_mode_ = Tokenizer::Merge::by_score;
      t.byte_fallback_ = true;
      add_bos = true;
      bool prefix = v.add_space_prefix.value_or(true);
      t.norm_.push_back(NormOp{NormOp::Kind::replace, " ", "\xE2\x96\x81", false});
      if (prefix) t.norm_.push_back(NormOp{NormOp::Kind::prepend, {}, "\xE2\x96\x81", false});
      t.strip_spaces_ = prefix ? 1 : 0;
      std::vector<float> scores = v.scores;
      if (scores.size() != n) scores.assign(n, 0.0f);
      // merge priority: higher score first, equal scores equal priority (then leftmost)
      std::vector<int32_t> order(n);
      for (size_t i = 0; i < n; i++) order[i] = int32_t(i);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return scores[size_t(a)] > scores[size_t(b)]; });
      t.score_prio_.assign(n, 0);
      int32_t prio = 0;
      for (size_t k = 0; k < n; k++) {
        if (k > 0 && scores[size_t(order[k])] != scores[size_t(order[k - 1])]) prio++;
        t.score_prio_[size_t(order[k])] = prio;
      }
      size_t bytes = 0;
      for (const auto& s : t.text_) bytes += s.size();
      t.index_.reserve(n, bytes);
      for (size_t i = 0; i < n; i++) t.index_.add(t.text_[i], int32_t(i));  // as llama.cpp: every token
      t.byte_tok_.fill(-1);
      for (int b = 0; b < 256; b++) {
        int32_t id = t.index_.find(strf("<0x%02X>", b));
        if (id < 0) id = t.index_.find(std::string(1, char(b)));
        t.byte_tok_[size_t(b)] = id;
      }
      for (size_t i = 0; i < n; i++) set_bytes_spm(i, /*replace_marks=*/true, /*byte_tokens=*/true);
      t.unk_ = v.unk >= 0 ? v.unk : (n > 0 ? 0 : -1);
      // convert_hf_to_gguf stores user-defined pieces (gemma's runs of U+2581) with spaces. llama.cpp matches
      // those on the raw text, so raw spaces never reach the merges; SentencePiece and Hugging Face match the
      // U+2581 spelling: literally in the raw text (an added token), and after spaces became U+2581 (by the
      // merges, which rank these runs first). Both are reproduced: the raw pass and a pass over the
      // normalized segment use the U+2581 spelling.
      for (size_t i = 0; i < n; i++)
        if (t.type_[i] == tok_user_defined && t.text_[i].find(' ') != std::string::npos) {
          std::string marked;
          for (char c : t.text_[i]) marked += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
          extra_trie.emplace_back(marked, int32_t(i));
          t.norm_trie_.add(marked, int32_t(i));
          spaced_user_defined.push_back(i);
        }
    } else {
      return unsupported("tokenizer model '" + printable(v.model) +
                         "' (tokenizer.ggml.model) is not supported; supported: gpt2 (byte-level BPE), llama "
                         "(SentencePiece BPE)");
    }
    // special tokens and BOS/EOS
    auto valid = [&](int32_t id) { return id >= 0 && size_t(id) < n ? id : -1; };
    t.bos_ = valid(v.bos);
    t.eos_ = valid(v.eos);
    if (v.model == "llama") {  // llama.cpp's SentencePiece defaults
      if (!desc.find_meta("tokenizer.ggml.bos_token_id")) t.bos_ = valid(1);
      if (!desc.find_meta("tokenizer.ggml.eos_token_id")) t.eos_ = valid(2);
    }
    add_bos = v.add_bos.value_or(add_bos);
    add_eos = v.add_eos.value_or(add_eos);
    if (add_bos && t.bos_ >= 0) t.prefix_.push_back(t.bos_);
    if (add_eos && t.eos_ >= 0) t.suffix_.push_back(t.eos_);
    t.flags_.assign(n, 0);
    for (size_t i = 0; i < n; i++) {
      uint8_t ty = t.type_[i];
      if (ty == tok_control || ty == tok_unknown) t.flags_[i] |= Tokenizer::kSpecial;
      if (ty == tok_control || ty == tok_unknown || ty == tok_user_defined) t.flags_[i] |= Tokenizer::kMatchable;
    }
    for (size_t i : spaced_user_defined) t.flags_[i] &= uint8_t(~Tokenizer::kMatchable);  // U+2581 spelling only
    std::vector<int32_t> eog;
    for (int32_t id : {t.eos_, valid(v.eot), valid(v.eom)})
      if (id >= 0) eog.push_back(id);
    finish(eog);
    t.summary_ = strf("%s, %s%s, %zu tokens", v.model == "gpt2" ? "byte-level BPE" : "SentencePiece BPE",
                      v.model == "gpt2" ? "pre-tokenizer " : "", v.model == "gpt2" ? (v.pre.empty() ? "default" : v.pre.c_str()) : "scores + byte fallback", n);
    return {};
  }

  // ---- shared pieces ----
  // Byte-level: merge-space strings are raw bytes; merges "a b" name vocabulary strings.
  Result<void> build_byte_level(const std::vector<std::string>& merges, bool strict) {
    size_t n = t.text_.size();
    size_t bytes = 0;
    for (const auto& s : t.text_) bytes += s.size();
    t.index_.reserve(n, bytes);
    std::string raw;
    for (size_t i = 0; i < n; i++)
      if (merge_vocab[i] && gpt2_unmap(t.text_[i], raw)) t.index_.add(raw, int32_t(i));
    t.byte_tok_.fill(-1);
    for (int b = 0; b < 256; b++) t.byte_tok_[size_t(b)] = t.index_.find(std::string(1, char(b)));
    return add_merges(merges, /*byte_level=*/true, strict);
  }

  // merges: "a b" (split at the first space after the first byte, as llama.cpp), ranked by position
  Result<void> add_merges(const std::vector<std::string>& merges, bool byte_level, bool strict) {
    t.merges_.reserve(merges.size());
    std::string a, b, joined;
    for (size_t r = 0; r < merges.size(); r++) {
      const std::string& m = merges[r];
      size_t sp = m.find(' ', 1);
      bool ok = sp != std::string::npos;
      if (ok && byte_level) {
        ok = gpt2_unmap(std::string_view(m).substr(0, sp), a) && gpt2_unmap(std::string_view(m).substr(sp + 1), b);
      } else if (ok) {
        a.assign(m, 0, sp);
        b.assign(m, sp + 1, std::string::npos);
      }
      int32_t ia = -1, ib = -1, im = -1;
      if (ok) {
        joined.assign(a);
        joined.append(b);
        ia = t.index_.find(a);
        ib = t.index_.find(b);
        im = t.index_.find(joined);
      }
      if (ia < 0 || ib < 0 || im < 0) {
        if (strict)
          return bad(strf("merge %zu ('%s') is not two vocabulary tokens separated by a space", r, printable(m).c_str()));
        continue;  // llama.cpp ignores such merges too
      }
      t.merges_.add(ia, ib, int32_t(r), im);
    }
    return {};
  }

  // Decoded bytes of a byte-level token: its GPT-2-mapped characters as bytes, or (when a character is
  // outside the mapping, e.g. an added token with a raw space) its text as it is.
  void set_bytes_byte_level(size_t i) {
    if (t.bytes_off_.empty()) t.bytes_off_.push_back(0);
    if (t.type_[i] != tok_unused) {
      std::string raw;
      if (gpt2_unmap(t.text_[i], raw)) t.bytes_arena_ += raw;
      else t.bytes_arena_ += t.text_[i];
    }
    t.bytes_off_.push_back(uint32_t(t.bytes_arena_.size()));
  }

  // SentencePiece: U+2581 -> space, <0xXX> byte tokens -> that byte.
  void set_bytes_spm(size_t i, bool replace_marks, bool byte_tokens) {
    if (t.bytes_off_.empty()) t.bytes_off_.push_back(0);
    const std::string& s = t.text_[i];
    unsigned hex = 0;
    if (t.type_[i] == tok_unused) {
      // nothing
    } else if (byte_tokens && s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' &&
               std::from_chars(s.data() + 3, s.data() + 5, hex, 16).ptr == s.data() + 5) {
      t.bytes_arena_ += char(hex);
    } else if (replace_marks) {
      for (size_t k = 0; k < s.size(); k++) {
        if (s.compare(k, 3, "\xE2\x96\x81") == 0) {
          t.bytes_arena_ += ' ';
          k += 2;
        } else {
          t.bytes_arena_ += s[k];
        }
      }
    } else {
      t.bytes_arena_ += s;
    }
    t.bytes_off_.push_back(uint32_t(t.bytes_arena_.size()));
  }

  // Trie of matchable tokens, EOG set, summary.
  void finish(std::vector<int32_t> eog) {
    size_t n = t.text_.size();
    for (size_t i = 0; i < n; i++)
      if (t.flags_[i] & Tokenizer::kMatchable) t.trie_.add(t.text_[i], int32_t(i));
    for (const auto& [text, id] : extra_trie) t.trie_.add(text, id);
    for (size_t i = 0; i < n; i++)
      if (t.type_[i] != tok_normal && t.type_[i] != tok_unused && t.type_[i] != tok_byte &&
          is_known_eog_text(t.text_[i]))
        eog.push_back(int32_t(i));
    std::sort(eog.begin(), eog.end());
    eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
    t.eog_ = eog;
    for (int32_t id : eog) t.flags_[size_t(id)] |= Tokenizer::kEog;
    for (size_t k = 0; k < t.pre_.size(); k++) {
      std::vector<uint32_t> cps;
      const std::string& lit = t.pre_[k].literal_text;
      for (size_t i = 0; i < lit.size();) cps.push_back(utf8_next(lit, i));
      t.pre_literals_.push_back(std::move(cps));
    }
  }

  // ---- tokenizer.json ----
  static int32_t json_id(const Json& j) {
    return (j.is_int && j.i >= 0 && j.i < (1 << 30)) ? int32_t(j.i) : -1;
  }

  Result<void> json_normalizer(const Json& j) {
    if (j.is_null()) return {};
    std::string_view type = j["type"].as_string();
    if (type == "Sequence") {
      for (const Json& sub : j["normalizers"].items)
        if (auto r = json_normalizer(sub); !r) return r;
      return {};
    }
    if (type == "NFC") {
      t.norm_.push_back(NormOp{NormOp::Kind::nfc, {}, {}, false});
      return {};
    }
    if (type == "Replace") {
      const Json& pat = j["pattern"];
      if (!pat["String"].is_string())
        return unsupported("normalizer Replace with a regex pattern is not supported");
      t.norm_.push_back(NormOp{NormOp::Kind::replace, pat["String"].str, std::string(j["content"].as_string()), false});
      return {};
    }
    if (type == "Prepend") {
      t.norm_.push_back(NormOp{NormOp::Kind::prepend, {}, std::string(j["prepend"].as_string()), false});
      return {};
    }
    return unsupported("normalizer '" + printable(type) + "' is not supported (supported: NFC, Replace, Prepend, Sequence)");
  }

  Result<void> json_pre(const Json& j, bool& byte_level, bool& first) {
    if (j.is_null()) return {};
    std::string_view type = j["type"].as_string();
    using K = PreStage::Kind;
    if (type == "Sequence") {
      for (const Json& sub : j["pretokenizers"].items)
        if (auto r = json_pre(sub, byte_level, first); !r) return r;
      return {};
    }
    bool was_first = first;
    first = false;
    if (type == "ByteLevel") {
      byte_level = true;
      if (j["add_prefix_space"].as_bool(false)) {
        if (!was_first) return unsupported("ByteLevel(add_prefix_space) after another pre-tokenizer is not supported");
        t.norm_.push_back(NormOp{NormOp::Kind::prepend_if_not, {}, " ", false});
      }
      if (j["use_regex"].as_bool(true)) t.pre_.push_back(stage(K::gpt2));
      return {};
    }
    if (type == "Digits") {
      PreStage s = stage(K::digits);
      s.individual = j["individual_digits"].as_bool(false);
      t.pre_.push_back(s);
      return {};
    }
    if (type == "Metaspace") {
      if (!was_first) return unsupported("Metaspace after another pre-tokenizer is not supported");
      std::string repl(j["replacement"].as_string("\xE2\x96\x81"));
      std::string_view scheme = j["prepend_scheme"].as_string(j["add_prefix_space"].as_bool(true) ? "always" : "never");
      t.norm_.push_back(NormOp{NormOp::Kind::replace, " ", repl, false});
      if (scheme != "never") t.norm_.push_back(NormOp{NormOp::Kind::prepend_if_not, {}, repl, scheme == "first"});
      if (j["split"].as_bool(true)) {
        PreStage s = stage(K::literal);
        s.literal_text = repl;
        s.behavior = PreStage::Behavior::merged_with_next;
        t.pre_.push_back(s);
      }
      return {};
    }
    if (type == "Split") {
      if (j["invert"].as_bool(false)) return unsupported("Split with invert: true is not supported");
      std::string_view beh = j["behavior"].as_string("Isolated");
      const Json& pat = j["pattern"];
      if (pat["Regex"].is_string()) {
        std::string_view re = pat["Regex"].str;
        if (beh != "Isolated") return unsupported("regex Split with behavior '" + printable(beh) + "' is not supported");
        PreStage s = stage(K::llama3);
        if (re == kRegexLlama3) {
          s.digit_max = 3;
        } else if (re == kRegexQwen2) {
          s.digit_max = 1;
        } else if (re == kRegexQwen35) {
          s.digit_max = 1;
          s.marks_in_words = true;
        } else if (re == kRegexGpt2) {
          s = stage(K::gpt2);
        } else {
          return unsupported("pre-tokenizer regex '" + printable(re, 200) +
                             "' has no scanner (supported: the llama-3, qwen2, qwen3.5 and gpt-2 patterns)");
        }
        t.pre_.push_back(s);
        return {};
      }
      if (pat["String"].is_string()) {
        PreStage s = stage(K::literal);
        s.literal_text = pat["String"].str;
        if (beh == "Removed") s.behavior = PreStage::Behavior::removed;
        else if (beh == "Isolated") s.behavior = PreStage::Behavior::isolated;
        else if (beh == "MergedWithPrevious") s.behavior = PreStage::Behavior::merged_with_previous;
        else if (beh == "MergedWithNext") s.behavior = PreStage::Behavior::merged_with_next;
        else if (beh == "Contiguous") s.behavior = PreStage::Behavior::contiguous;
        else return unsupported("Split behavior '" + printable(beh) + "' is not supported");
        t.pre_.push_back(s);
        return {};
      }
      return bad("Split pre-tokenizer without a String or Regex pattern");
    }
    return unsupported("pre-tokenizer '" + printable(type) +
                       "' is not supported (supported: ByteLevel, Split, Digits, Metaspace, Sequence)");
  }

  // post_processor -> ids around the text (TemplateProcessing "single", Roberta/Bert cls/sep).
  Result<void> json_post(const Json& j, const std::function<int32_t(std::string_view)>& lookup) {
    if (j.is_null()) return {};
    std::string_view type = j["type"].as_string();
    if (type == "Sequence") {
      for (const Json& sub : j["processors"].items)
        if (auto r = json_post(sub, lookup); !r) return r;
      return {};
    }
    if (type == "ByteLevel") return {};
    if (type == "TemplateProcessing") {
      bool after = false;
      t.prefix_.clear();
      t.suffix_.clear();
      for (const Json& piece : j["single"].items) {
        if (piece.find("Sequence")) {
          after = true;
          continue;
        }
        const Json& sp = piece["SpecialToken"];
        std::string_view name = sp["id"].as_string();
        const Json& def = j["special_tokens"][name];
        std::vector<int32_t> ids;
        for (const Json& id : def["ids"].items) {
          int32_t v = json_id(id);
          if (v < 0 || size_t(v) >= t.text_.size())
            return bad("post_processor special token '" + printable(name) + "' has an invalid id");
          ids.push_back(v);
        }
        if (!def.is_object()) {
          int32_t v = lookup(name);
          if (v < 0) return bad("post_processor names an unknown special token '" + printable(name) + "'");
          ids.push_back(v);
        }
        auto& dst = after ? t.suffix_ : t.prefix_;
        dst.insert(dst.end(), ids.begin(), ids.end());
      }
      return {};
    }
    if (type == "RobertaProcessing" || type == "BertProcessing") {
      int32_t cls = json_id(j["cls"][1]), sep = json_id(j["sep"][1]);
      if (cls < 0 || sep < 0 || size_t(cls) >= t.text_.size() || size_t(sep) >= t.text_.size())
        return bad("post_processor cls/sep ids are invalid");
      t.prefix_ = {cls};
      t.suffix_ = {sep};
      return {};
    }
    return unsupported("post_processor '" + printable(type) + "' is not supported");
  }

  // decoder -> byte mapping and leading-space strip
  Result<void> json_decoder(const Json& j, bool& replace_marks, bool& byte_fallback, bool& byte_level) {
    if (j.is_null()) return {};
    std::string_view type = j["type"].as_string();
    if (type == "Sequence") {
      for (const Json& sub : j["decoders"].items)
        if (auto r = json_decoder(sub, replace_marks, byte_fallback, byte_level); !r) return r;
      return {};
    }
    if (type == "ByteLevel") {
      byte_level = true;
      return {};
    }
    if (type == "Replace") {
      if (j["pattern"]["String"].as_string() == "\xE2\x96\x81" && j["content"].as_string() == " ") {
        replace_marks = true;
        return {};
      }
      return unsupported("decoder Replace other than U+2581 -> space is not supported");
    }
    if (type == "ByteFallback") {
      byte_fallback = true;
      return {};
    }
    if (type == "Fuse") return {};
    if (type == "Strip") {
      if (j["content"].as_string() != " " || j["stop"].as_int(0) != 0)
        return unsupported("decoder Strip other than leading spaces is not supported");
      t.strip_spaces_ += static_cast<int>(std::clamp<int64_t>(j["start"].as_int(0), 0, 64));
      return {};
    }
    if (type == "Metaspace") {
      replace_marks = true;
      std::string_view scheme = j["prepend_scheme"].as_string(j["add_prefix_space"].as_bool(true) ? "always" : "never");
      if (scheme != "never") t.strip_spaces_ += 1;
      return {};
    }
    return unsupported("decoder '" + printable(type) + "' is not supported");
  }

  Result<void> from_json(const ModelDesc& desc) {
    where = desc.path + "/tokenizer.json";
    const Json& tj = desc.tokenizer_json;
    const Json& model = tj["model"];
    if (!model.is_object()) return bad("no \"model\" object");
    std::string_view mtype = model["type"].as_string("BPE");
    if (mtype != "BPE")
      return unsupported("tokenizer model '" + printable(mtype) + "' is not supported (only BPE)");
    if (!model["continuing_subword_prefix"].as_string().empty() || !model["end_of_word_suffix"].as_string().empty())
      return unsupported("BPE with continuing_subword_prefix / end_of_word_suffix is not supported");
    const Json& vocab = model["vocab"];
    if (!vocab.is_object()) return bad("model.vocab is not an object");
    const Json& added = tj["added_tokens"];
    int64_t max_id = -1;
    for (const auto& [tok, id] : vocab.members) {
      if (json_id(id) < 0) return bad(strf("token '%s' has an invalid id", printable(tok).c_str()));
      max_id = std::max<int64_t>(max_id, id.i);
    }
    for (const Json& a : added.items) {
      if (json_id(a["id"]) < 0 || !a["content"].is_string()) return bad("an added token has an invalid id or content");
      max_id = std::max<int64_t>(max_id, a["id"].i);
    }
    if (max_id < 0) return bad("the vocabulary is empty");
    size_t n = size_t(max_id + 1);
    t.text_.assign(n, std::string());
    t.type_.assign(n, tok_unused);
    merge_vocab.assign(n, false);
    t.byte_fallback_ = model["byte_fallback"].as_bool(false);
    for (const auto& [tok, id] : vocab.members) {
      auto k = size_t(id.i);
      t.text_[k] = tok;
      bool is_byte = t.byte_fallback_ && tok.size() == 6 && tok.compare(0, 3, "<0x") == 0 && tok[5] == '>';
      t.type_[k] = is_byte ? tok_byte : tok_normal;
      merge_vocab[k] = true;
    }
    t.flags_.assign(n, 0);
    for (const Json& a : added.items) {
      auto k = size_t(a["id"].i);
      t.text_[k] = a["content"].str;
      bool special = a["special"].as_bool(false);
      t.type_[k] = special ? tok_control : tok_user_defined;
      t.flags_[k] = uint8_t((special ? Tokenizer::kSpecial : 0) | Tokenizer::kMatchable |
                            (a["lstrip"].as_bool(false) ? Tokenizer::kLstrip : 0) |
                            (a["rstrip"].as_bool(false) ? Tokenizer::kRstrip : 0));
    }
    // pipeline
    if (auto r = json_normalizer(tj["normalizer"]); !r) return r.error();
    bool byte_level = false, first = true;
    if (auto r = json_pre(tj["pre_tokenizer"], byte_level, first); !r) return r.error();
    bool replace_marks = false, dec_byte_fallback = false, dec_byte_level = false;
    if (auto r = json_decoder(tj["decoder"], replace_marks, dec_byte_fallback, dec_byte_level); !r) return r.error();
    byte_level = byte_level || dec_byte_level;
    t.byte_level_ = byte_level;
    t.merge_mode_ = Tokenizer::Merge::by_rank;
    t.ignore_merges_ = model["ignore_merges"].as_bool(false);
    t.fuse_unk_ = model["fuse_unk"].as_bool(false);
    // merges: "a b" strings or ["a", "b"] pairs
    std::vector<std::string> merges;
    merges.reserve(model["merges"].items.size());
    for (const Json& m : model["merges"].items) {
      if (m.is_string()) merges.push_back(m.str);
      else if (m.is_array() && m.items.size() == 2 && m.items[0].is_string() && m.items[1].is_string())
        merges.push_back(m.items[0].str + " " + m.items[1].str);
      else return bad("model.merges holds an entry that is neither \"a b\" nor [\"a\", \"b\"]");
    }
    if (byte_level) {
      if (auto r = build_byte_level(merges, /*strict=*/true); !r) return r.error();
      for (size_t i = 0; i < n; i++) set_bytes_byte_level(i);
    } else {
      size_t bytes = 0;
      for (const auto& s : t.text_) bytes += s.size();
      t.index_.reserve(n, bytes);
      for (size_t i = 0; i < n; i++)
        if (merge_vocab[i]) t.index_.add(t.text_[i], int32_t(i));
      if (auto r = add_merges(merges, /*byte_level=*/false, /*strict=*/true); !r) return r.error();
      t.byte_tok_.fill(-1);
      for (int b = 0; b < 256; b++) t.byte_tok_[size_t(b)] = t.index_.find(strf("<0x%02X>", b));
      for (size_t i = 0; i < n; i++) set_bytes_spm(i, replace_marks, dec_byte_fallback);
    }
    auto lookup = [&](std::string_view s) -> int32_t {
      if (s.empty()) return -1;
      for (const Json& a : added.items)
        if (a["content"].as_string() == s) return json_id(a["id"]);
      if (const Json* id = vocab.find(s)) return json_id(*id);
      return -1;
    };
    std::string_view unk = model["unk_token"].as_string();
    t.unk_ = lookup(unk);
    if (auto r = json_post(tj["post_processor"], lookup); !r) return r.error();
    // bos / eos named by tokenizer_config.json (else by config.json / generation_config.json ids)
    const Json& tc = desc.tokenizer_config;
    auto config_token = [&](const char* key) {
      const Json& e = tc[key];
      return lookup(e.is_object() ? e["content"].as_string() : e.as_string());
    };
    auto valid = [&](int64_t id) { return id >= 0 && size_t(id) < n ? int32_t(id) : -1; };
    t.bos_ = config_token("bos_token");
    t.eos_ = config_token("eos_token");
    if (t.bos_ < 0) t.bos_ = valid(desc.generation_config["bos_token_id"].as_int(desc.config["bos_token_id"].as_int(-1)));
    std::vector<int32_t> eog;
    const Json& gen_eos = desc.generation_config["eos_token_id"];
    if (gen_eos.is_array()) {
      for (const Json& e : gen_eos.items)
        if (valid(e.as_int(-1)) >= 0) eog.push_back(valid(e.as_int(-1)));
    } else if (valid(gen_eos.as_int(-1)) >= 0) {
      eog.push_back(valid(gen_eos.as_int(-1)));
    }
    if (t.eos_ < 0) {
      const Json& ce = desc.config["eos_token_id"];
      t.eos_ = ce.is_array() ? valid(ce[0].as_int(-1)) : valid(ce.as_int(-1));
      if (t.eos_ < 0 && !eog.empty()) t.eos_ = eog[0];
    }
    if (t.eos_ >= 0) eog.push_back(t.eos_);
    for (size_t i = 0; i < n; i++)
      if (t.text_[i].empty() && t.type_[i] == tok_unused) t.text_[i] = "[PAD" + std::to_string(i) + "]";
    finish(eog);
    t.summary_ = strf("%s BPE from tokenizer.json, %zu tokens", byte_level ? "byte-level" : "SentencePiece-style", n);
    return {};
  }
};

// A description holding only the tokenizer files of a directory (tokenizer.json, tokenizer_config.json,
// generation_config.json, config.json when present): lets `tokenize` work on a tokenizer-only folder.
inline Result<std::shared_ptr<ModelDesc>> tokenizer_description(const std::string& dir) {
  auto m = std::make_shared<ModelDesc>();
  m->path = dir;
  m->format = "tokenizer.json";
  m->name = base_name(dir);
  if (!file_exists(path_join(dir, "tokenizer.json")))
    return make_error(Errc::io, dir + ": no tokenizer.json in this directory");
  for (auto [file, slot] : {std::pair<const char*, Json*>{"tokenizer.json", &m->tokenizer_json},
                            {"tokenizer_config.json", &m->tokenizer_config},
                            {"generation_config.json", &m->generation_config},
                            {"config.json", &m->config}}) {
    std::string p = path_join(dir, file);
    if (!file_exists(p)) continue;
    auto j = load_json_file(p);
    if (!j) return j.error();
    *slot = std::move(*j);
  }
  return m;
}

inline Result<std::shared_ptr<const Tokenizer>> Tokenizer::build(const ModelDesc& desc) {
  TokenizerBuilder b;
  if (desc.tokenizer_json.is_object()) {
    if (auto r = b.from_json(desc); !r) return r.error();
  } else if (desc.format == "gguf") {
    if (auto r = b.from_gguf(desc); !r) return r.error();
  } else {
    return make_error(Errc::unsupported, desc.path + ": no tokenizer (no tokenizer.json beside the weights)");
  }
  return std::shared_ptr<const Tokenizer>(std::make_shared<Tokenizer>(std::move(b.t)));
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/34_tokenizer_stream.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Streaming detokenization: only complete, valid UTF-8 leaves ====
// A token may end inside a UTF-8 sequence (byte tokens, byte-level BPE pieces of emoji and CJK): those
// bytes are held until the sequence completes. Bytes that can never become valid are replaced by U+FFFD,
// one per maximal invalid subpart (as Rust's String::from_utf8_lossy, which Hugging Face's byte-level
// decoder uses), so the output is always valid UTF-8.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Appends the valid UTF-8 of `in` to `out`, invalid subparts as U+FFFD. When `final` is false a sequence
// cut off by the end of `in` is not consumed. Returns the number of bytes consumed.
inline size_t utf8_lossy_append(std::string_view in, std::string& out, bool final) {
  const auto* s = reinterpret_cast<const unsigned char*>(in.data());
  size_t n = in.size(), i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      out += static_cast<char>(c);
      i++;
      continue;
    }
    size_t need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (need == 0) {
      out += "\xEF\xBF\xBD";
      i++;
      continue;
    }
    // length of the valid prefix of this sequence
    size_t k = 1;
    while (k < need && i + k < n) {
      unsigned char d = s[i + k];
      unsigned char lo = 0x80, hi = 0xBF;
      if (k == 1) {
        if (c == 0xE0) lo = 0xA0;
        else if (c == 0xED) hi = 0x9F;
        else if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;
      }
      if (d < lo || d > hi) break;
      k++;
    }
    if (k == need) {
      out.append(in.data() + i, need);
      i += need;
    } else if (i + k == n && !final) {
      break;  // may still complete
    } else {
      out += "\xEF\xBF\xBD";  // the maximal subpart
      i += k;
    }
  }
  return i;
}

inline std::string utf8_lossy(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  utf8_lossy_append(in, out, true);
  return out;
}

class StreamDecoder {
 public:
  // skip_special: control tokens (Hugging Face "special") produce nothing, as decode(ids, true).
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false)
      : tok_(&tok), skip_special_(skip_special), strip_(tok.strip_leading_spaces()) {}

  // The text that `id` completes (possibly empty while a UTF-8 sequence is incomplete).
  std::string push(int32_t id) {
    if (skip_special_ && tok_->is_control(id)) return std::string();
    std::string_view b = tok_->token_bytes(id);
    while (strip_ > 0 && !b.empty()) {  // decode()'s leading-space strip, before anything was written
      if (b.front() != ' ') {
        strip_ = 0;
        break;
      }
      b.remove_prefix(1);
      strip_--;
    }
    pending_.append(b);
    std::string out;
    size_t used = utf8_lossy_append(pending_, out, false);
    pending_.erase(0, used);
    return out;
  }
  // Whatever is still held (an incomplete sequence becomes U+FFFD).
  std::string flush() {
    std::string out = utf8_lossy(pending_);
    pending_.clear();
    return out;
  }
  // Bytes held back waiting for the rest of a UTF-8 sequence.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  int strip_;
  std::string pending_;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/90_model.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Model and Session ====
namespace llminfer {
inline namespace v0_1 {

inline const char* to_string(StopReason reason) noexcept {
  switch (reason) {
    case StopReason::eos: return "eos";
    case StopReason::stop: return "stop";
    case StopReason::max_tokens: return "max_tokens";
    case StopReason::cancelled: return "cancelled";
    case StopReason::context_full: return "context_full";
    case StopReason::error: return "error";
  }
  return "error";
}

namespace detail {

struct ModelImpl {
  std::shared_ptr<ModelDesc> desc;
  LoadOptions options;
  double load_ms = 0;
  // The tokenizer, or why there is none: a model whose vocabulary is missing or unsupported still loads
  // (it can run from token ids); tokenize() then returns `tokenizer_error`.
  std::shared_ptr<const Tokenizer> tokenizer;
  Error tokenizer_error;
};

struct SessionImpl {
  std::shared_ptr<const ModelImpl> model;
  std::vector<Message> messages;
};

}  // namespace detail

inline Result<Model> Model::load(std::string_view path, const LoadOptions& options) {
  double t0 = detail::now_ms();
#if !defined(LLMINFER_NO_CPU_CHECK)
  if (auto cpu = detail::check_cpu(); !cpu) return cpu.error();
#endif
  auto desc = detail::load_description(std::string(path));
  if (!desc) return desc.error();
  auto impl = std::make_shared<detail::ModelImpl>();
  impl->desc = std::move(*desc);
  impl->options = options;
  if (auto tok = detail::Tokenizer::build(*impl->desc)) {
    impl->tokenizer = std::move(*tok);
  } else {
    if (tok.error().code == Errc::bad_format) return tok.error();  // a malformed vocabulary is a broken file
    impl->tokenizer_error = tok.error();
    if (options.log) options.log("tokenizer unavailable: " + tok.error().message);
  }
  impl->load_ms = detail::now_ms() - t0;
  Model m;
  m.impl_ = std::move(impl);
  return m;
}

inline Result<GenerateResult> Model::generate(std::string_view, const GenerateOptions&) const {
  return detail::make_error(Errc::unsupported, impl_->desc->path + ": text generation is not implemented yet");
}

inline Session Model::session() const {
  auto s = std::make_unique<detail::SessionImpl>();
  s->model = impl_;
  return Session(std::move(s));
}

inline Result<std::vector<int32_t>> Model::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  if (!impl_->tokenizer) return impl_->tokenizer_error;
  return impl_->tokenizer->encode(text, add_special, parse_special);
}

// Valid UTF-8 always: bytes that do not form valid UTF-8 become U+FFFD (as Hugging Face decodes).
inline std::string Model::detokenize(std::span<const int32_t> ids) const {
  if (!impl_->tokenizer) return std::string();
  return detail::utf8_lossy(impl_->tokenizer->decode(ids));
}

inline Result<std::string> Model::apply_chat_template(std::span<const Message>, bool) const {
  return detail::make_error(Errc::unsupported, impl_->desc->path + ": chat templates are not implemented yet");
}

inline Session::Session(std::unique_ptr<detail::SessionImpl> impl) : impl_(std::move(impl)) {}
inline Session::Session(Session&&) noexcept = default;
inline Session& Session::operator=(Session&&) noexcept = default;
inline Session::~Session() = default;

inline void Session::add(std::string_view role, std::string_view content) {
  impl_->messages.push_back(Message{std::string(role), std::string(content)});
}

inline Result<GenerateResult> Session::reply(const GenerateOptions&) {
  return detail::make_error(Errc::unsupported, "sessions are not implemented yet");
}

inline void Session::reset() { impl_->messages.clear(); }

inline const std::vector<Message>& Session::messages() const { return impl_->messages; }

}  // namespace v0_1
}  // namespace llminfer

// ---- src/99_impl_end.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#endif  // LLMINFER_IMPLEMENTATION

// ---------------------------------------------------------------------------------------------
// License: MIT. Copyright (c) 2026 the llminfer developers.
//
// Permission is hereby granted, free of charge, to any person obtaining a copy of this software
// and associated documentation files (the "Software"), to deal in the Software without
// restriction, including without limitation the rights to use, copy, modify, merge, publish,
// distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the
// Software is furnished to do so, subject to the following conditions: The above copyright notice
// and this permission notice shall be included in all copies or substantial portions of the
// Software. THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED.
