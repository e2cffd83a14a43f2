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
#include <tuple>
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
#if defined(__MINGW32__)
__attribute__((format(gnu_printf, 1, 2)))  // MinGW's own printf (C99 %zu, %lld), not msvcrt's
#elif defined(__GNUC__)
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
  (void)need;  // unused when the build targets baseline x86-64
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
// Strings are u64 length + bytes (no NUL). Arrays are u32 element type + u64 count + elements;
// an element of an array of arrays is again "element type, count, elements". Versions 2 and 3 share
// this layout (version 1 had 32-bit counts and is refused, as llama.cpp does).
// Everything is a view into the mapping; every read is bounds-checked against the file size, and
// nothing is allocated from a count before the file is known to hold that many entries.
// Where we differ from llama.cpp's gguf.cpp, on purpose: nested arrays are accepted (gguf-py writes
// them); tensors may sit anywhere in the data section as long as they are aligned and do not overlap
// (llama.cpp wants them back to back in table order); keys and tensor names must be valid UTF-8.
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
  uint32_t n_dims = 0;  // 0..4 (0: a scalar, as ggml allows)
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
      if (n_ < 4) return err(strf("too small to be a GGUF file (%llu bytes)", ull(n_)));
      return err(strf("not a GGUF file (magic '%s', expected 'GGUF')",
                      printable(std::string_view(reinterpret_cast<const char*>(d_), 4)).c_str()));
    }
    pos_ = 4;
    if (!u32(f.version, "version")) return error_;
    // A file written on a big-endian machine reads as 0x03000000 here (llama.cpp's test too).
    if (f.version != 0 && (f.version & 0xFFFF) == 0)
      return err(strf("GGUF version 0x%08X: a big-endian file? Only little-endian GGUF is supported", f.version));
    if (f.version == 1) return err("GGUF version 1 is not supported (only versions 2 and 3)");
    if (f.version != 2 && f.version != 3) return err(strf("unsupported GGUF version %u (only 2 and 3)", f.version));
    uint64_t n_tensors = 0, n_kv = 0;
    if (!u64(n_tensors, "tensor count") || !u64(n_kv, "metadata count")) return error_;
    // Smallest possible entries: a tensor info is >= 25 bytes, a key/value >= 14 bytes.
    if (n_tensors > LLMINFER_MAX_TENSORS)
      return err(strf("the header declares %llu tensors, more than LLMINFER_MAX_TENSORS (%llu)", ull(n_tensors),
                      ull(LLMINFER_MAX_TENSORS)));
    if (n_kv > LLMINFER_MAX_METADATA)
      return err(strf("the header declares %llu metadata entries, more than LLMINFER_MAX_METADATA (%llu)", ull(n_kv),
                      ull(LLMINFER_MAX_METADATA)));
    if (n_tensors * 25 + n_kv * 14 > remaining())
      return err(strf("the header declares %llu tensors and %llu metadata entries, but only %llu bytes follow "
                      "(a truncated file or a corrupt count)",
                      ull(n_tensors), ull(n_kv), ull(remaining())));

    // ---- metadata ----
    // Containers grow with what was actually read, never with a count the file merely claims.
    f.kv.reserve(static_cast<size_t>(std::min<uint64_t>(n_kv, 256)));
    std::unordered_map<std::string_view, size_t> seen;
    for (uint64_t k = 0; k < n_kv; k++) {
      where_ = strf("metadata entry %llu of %llu", ull(k + 1), ull(n_kv));
      GgufKV e;
      if (!string(e.key, "key")) return error_;
      if (e.key.empty()) return err(strf("%s has an empty key", where_.c_str()));
      if (!utf8_valid(e.key))
        return err(strf("%s: key is not valid UTF-8 ('%s')", where_.c_str(), printable(e.key).c_str()));
      if (!seen.emplace(e.key, k).second) return err(strf("duplicate metadata key '%s'", printable(e.key).c_str()));
      where_ = strf("metadata key '%s'", printable(e.key).c_str());
      uint32_t t = 0;
      if (!u32(t, "value type")) return error_;
      if (!value(e.value, t, 0)) return error_;
      f.kv.push_back(std::move(e));
    }
    if (const GgufValue* a = f.find("general.alignment")) {
      if (a->type != GgufType::u32)
        return err(strf("general.alignment has type %s, expected u32", gguf_type_name(a->type)));
      uint64_t v = static_cast<uint64_t>(a->as_int());
      if (v == 0 || (v & (v - 1)) != 0) return err(strf("general.alignment %llu is not a power of two", ull(v)));
      f.alignment = v;
    }

    // ---- tensor infos ----
    f.tensors.reserve(static_cast<size_t>(std::min<uint64_t>(n_tensors, 1024)));
    std::unordered_map<std::string_view, size_t> names;
    for (uint64_t k = 0; k < n_tensors; k++) {
      where_ = strf("tensor info %llu of %llu", ull(k + 1), ull(n_tensors));
      GgufTensorInfo ti;
      if (!string(ti.name, "name")) return error_;
      if (ti.name.empty()) return err(strf("%s has an empty name", where_.c_str()));
      if (!utf8_valid(ti.name))
        return err(strf("%s: name is not valid UTF-8 ('%s')", where_.c_str(), printable(ti.name).c_str()));
      if (!names.emplace(ti.name, k).second) return err(strf("duplicate tensor name '%s'", printable(ti.name).c_str()));
      where_ = strf("tensor '%s'", printable(ti.name).c_str());
      if (!u32(ti.n_dims, "n_dims")) return error_;
      if (ti.n_dims > 4) return err(strf("%s has %u dimensions (at most 4)", where_.c_str(), ti.n_dims));
      for (uint32_t dmn = 0; dmn < ti.n_dims; dmn++) {
        uint64_t ne = 0;
        if (!u64(ne, "dimensions")) return error_;
        if (ne > static_cast<uint64_t>(INT64_MAX))
          return err(strf("%s: dimension %u is negative (%lld)", where_.c_str(), dmn, static_cast<long long>(ne)));
        ti.ne[dmn] = static_cast<int64_t>(ne);
      }
      // Both the element count and the row count (ne1*ne2*ne3, even when ne0 is 0) must fit in int64.
      uint64_t nel = 1, rows = 1;
      bool over = mul_overflows(static_cast<uint64_t>(ti.ne[1]), static_cast<uint64_t>(ti.ne[2]), &rows) ||
                  mul_overflows(rows, static_cast<uint64_t>(ti.ne[3]), &rows) || rows > static_cast<uint64_t>(INT64_MAX) ||
                  mul_overflows(rows, static_cast<uint64_t>(ti.ne[0]), &nel) || nel > static_cast<uint64_t>(INT64_MAX);
      if (over)
        return err(strf("%s: dimensions [%lld, %lld, %lld, %lld] overflow", where_.c_str(), static_cast<long long>(ti.ne[0]),
                        static_cast<long long>(ti.ne[1]), static_cast<long long>(ti.ne[2]),
                        static_cast<long long>(ti.ne[3])));
      uint32_t type = 0;
      if (!u32(type, "type")) return error_;
      ti.type = static_cast<DType>(type);
      const DTypeTraits* tr = type < 200 ? dtype_traits(ti.type) : nullptr;
      if (!tr) return err(strf("%s has ggml type id %u, which is not a tensor type (unknown or removed)", where_.c_str(), type));
      if (static_cast<uint64_t>(ti.ne[0]) % tr->block != 0)
        return err(strf("%s: row length %lld is not a multiple of the %s block size %u", where_.c_str(),
                        static_cast<long long>(ti.ne[0]), tr->name, tr->block));
      if (mul_overflows(nel / tr->block, tr->bytes, &ti.nbytes)) return err(strf("%s: size overflows", where_.c_str()));
      if (!u64(ti.offset, "offset")) return error_;
      f.tensors.push_back(ti);
    }
    where_.clear();

    // ---- data section ----
    uint64_t data = 0;
    if (add_overflows(pos_, f.alignment - 1, &data)) return err("data section offset overflows");
    data = data / f.alignment * f.alignment;
    if (data > n_ && !f.tensors.empty())
      return err(strf("the data section (offset %llu, alignment %llu) starts past the end of the file (%s)", ull(data),
                      ull(f.alignment), human_bytes(n_).c_str()));
    f.data_offset = std::min(data, n_);
    uint64_t avail = n_ - f.data_offset;
    for (const auto& t : f.tensors) {
      if (t.offset % f.alignment != 0)
        return err(strf("tensor '%s' data offset %llu is not aligned to %llu bytes", printable(t.name).c_str(),
                        ull(t.offset), ull(f.alignment)));
      uint64_t end = 0, abs = 0;
      if (add_overflows(t.offset, t.nbytes, &end) || end > avail) {
        std::string at = add_overflows(f.data_offset, t.offset, &abs)
                             ? strf("data section + %llu", ull(t.offset))
                             : strf("%llu", ull(abs));
        return err(strf("tensor '%s' data [offset %s, size %s] runs past the end of the file (%s)",
                        printable(t.name).c_str(), at.c_str(), human_bytes(t.nbytes).c_str(), human_bytes(n_).c_str()));
      }
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
    err(strf("truncated in %s (%s) at offset %llu: the file ends at %llu bytes",
             where_.empty() ? "the header" : where_.c_str(), field, ull(pos_), ull(n_)));
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
      err(strf("%s: %s length %llu runs past the end of the file (%llu bytes left)", where_.c_str(), field, ull(len),
               ull(remaining())));
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
    // array: element type, count, elements (arrays may hold arrays, up to a small depth)
    if (depth >= 8) {
      err(strf("%s: arrays nested more than 8 deep", where_.c_str()));
      return false;
    }
    uint32_t et = 0;
    if (!u32(et, "array element type") || !u64(v.len, "array length")) return false;
    if (et > 12) {
      err(strf("%s: array has unknown element type %u", where_.c_str(), et));
      return false;
    }
    v.elem = static_cast<GgufType>(et);
    v.p = d_ + pos_;
    if (uint32_t sz = gguf_scalar_size(v.elem)) {
      uint64_t bytes = 0;
      if (mul_overflows(v.len, sz, &bytes) || bytes > remaining()) {
        err(strf("%s: array of %llu %s runs past the end of the file (%llu bytes left)", where_.c_str(), ull(v.len),
                 gguf_type_name(v.elem), ull(remaining())));
        return false;
      }
      pos_ += bytes;
      return true;
    }
    // Every string takes >= 8 bytes and every array >= 12, so a count the file cannot hold is refused
    // before anything is allocated; storage then grows with what was read.
    uint64_t min_size = v.elem == GgufType::string ? 8 : 12;
    if (v.len > remaining() / min_size) {
      err(strf("%s: array of %llu %ss runs past the end of the file (%llu bytes left)", where_.c_str(), ull(v.len),
               gguf_type_name(v.elem), ull(remaining())));
      return false;
    }
    if (v.elem == GgufType::string) {
      v.strings.reserve(static_cast<size_t>(std::min<uint64_t>(v.len, 1u << 16)));
      for (uint64_t k = 0; k < v.len; k++) {
        std::string_view s;
        if (!string(s, "array string")) return false;
        v.strings.push_back(s);
      }
      return true;
    }
    // Each element of an array of arrays is itself "u32 element type, u64 count, elements" (gguf-py).
    v.arrays.reserve(static_cast<size_t>(std::min<uint64_t>(v.len, 64)));
    for (uint64_t k = 0; k < v.len; k++) {
      GgufValue a;
      if (!value(a, static_cast<uint32_t>(GgufType::array), depth + 1)) return false;
      v.arrays.push_back(std::move(a));
    }
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
  if (hlen > kSafetensorsMaxHeader)
    return bad(strf("header length %llu is larger than the 100 MiB limit", static_cast<unsigned long long>(hlen)));
  if (hlen > size - 8)
    return bad(strf("header length %llu runs past the end of the file (%s)", static_cast<unsigned long long>(hlen),
                    human_bytes(size).c_str()));
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
  // Bytes of the MLX scales and biases that belong to this tensor (0 for other types).
  uint64_t aux_bytes() const {
    if (!scales || group_size <= 0) return 0;
    const DTypeTraits* tr = dtype_traits(aux_type);
    return 2 * static_cast<uint64_t>(rows()) * static_cast<uint64_t>(ne[0] / group_size) * (tr ? tr->bytes : 0);
  }
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
  // Every end-of-sequence id the files name: GGUF eos/eot/eom; Hugging Face generation_config.json's
  // eos_token_id (a number or a list) and tokenizer_config.json's eos_token. In-range ids only.
  std::vector<int32_t> eos_ids;
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

// Adds `id` to `ids` once (when it is a valid token id).
inline void add_id_once(std::vector<int32_t>& ids, int64_t id, size_t n_vocab) {
  if (id < 0 || static_cast<uint64_t>(id) >= n_vocab) return;
  if (std::find(ids.begin(), ids.end(), static_cast<int32_t>(id)) == ids.end()) ids.push_back(static_cast<int32_t>(id));
}

// ---- GGUF -> ModelDesc ----
// `base` is the start of the GGUF image (the mapping), `file` its name for messages.
inline Result<void> desc_from_gguf(ModelDesc& m, const uint8_t* base, const std::string& file) {
  const GgufFile& g = *m.gguf;
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
  m.tensors.reserve(g.tensors.size());
  for (const auto& ti : g.tensors) {
    TensorView t;
    t.name = std::string(ti.name);
    t.type = ti.type;
    t.n_dims = static_cast<int>(ti.n_dims);
    for (int k = 0; k < 4; k++) t.ne[k] = ti.ne[k];
    t.data = base + g.data_offset + ti.offset;
    t.nbytes = ti.nbytes;
    t.file = file;
    t.file_offset = g.data_offset + ti.offset;
    m.tensors.push_back(std::move(t));
  }
  // vocabulary
  VocabData& vd = m.vocab;
  vd.model = std::string(m.meta_string("tokenizer.ggml.model").value_or(""));
  vd.pre = std::string(m.meta_string("tokenizer.ggml.pre").value_or(""));
  auto bad = [&](const std::string& what) { return make_error(Errc::bad_format, file + ": " + what); };
  if (const GgufValue* v = g.find("tokenizer.ggml.tokens")) {
    if (v->type != GgufType::array || v->elem != GgufType::string)
      return bad("tokenizer.ggml.tokens is not an array of strings");
    vd.tokens.assign(v->strings.begin(), v->strings.end());
  }
  // A per-token numeric array (scores, token types): one entry per token.
  auto per_token = [&](const char* key) -> Result<const GgufValue*> {
    const GgufValue* v = g.find(key);
    if (!v) return static_cast<const GgufValue*>(nullptr);
    if (v->type != GgufType::array || !gguf_scalar_size(v->elem)) return bad(strf("%s is not a numeric array", key));
    if (v->len != vd.tokens.size())
      return bad(strf("%s has %llu entries but the vocabulary has %zu tokens", key,
                      static_cast<unsigned long long>(v->len), vd.tokens.size()));
    return v;
  };
  auto scores = per_token("tokenizer.ggml.scores");
  if (!scores) return scores.error();
  if (const GgufValue* v = *scores) {
    vd.scores.resize(static_cast<size_t>(v->len));
    for (uint64_t k = 0; k < v->len; k++) vd.scores[k] = static_cast<float>(v->number(k));
  }
  auto types = per_token("tokenizer.ggml.token_type");
  if (!types) return types.error();
  if (const GgufValue* v = *types) {
    vd.types.resize(static_cast<size_t>(v->len));
    for (uint64_t k = 0; k < v->len; k++)
      vd.types[k] = static_cast<int32_t>(std::clamp<int64_t>(v->integer(k), INT32_MIN, INT32_MAX));
  }
  if (const GgufValue* v = g.find("tokenizer.ggml.merges")) {
    if (v->type != GgufType::array || v->elem != GgufType::string)
      return bad("tokenizer.ggml.merges is not an array of strings");
    vd.merges.assign(v->strings.begin(), v->strings.end());
  }
  // Special token ids; an id outside the vocabulary is treated as absent (-1).
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
  id("tokenizer.ggml.seperator_token_id", vd.sep);  // sic: GGUF's spelling
  for (int32_t e : {vd.eos, vd.eot, vd.eom}) add_id_once(vd.eos_ids, e, vd.tokens.size());
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
// Two layers: the *_description() functions build a ModelDesc from bytes already in memory (they
// never touch the file system: tests and fuzz targets call them directly), and load_description()
// maps the files of a path and hands their bytes to them.
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

// "dir/sub/" -> "dir/sub" (so that base_name gives the directory's name).
inline std::string strip_trailing_separators(std::string path) {
  while (path.size() > 1 && (path.back() == '/' || path.back() == '\\')) path.pop_back();
  return path;
}

// Vocabulary from a Hugging Face tokenizer.json: ids, merges, added tokens and their kinds.
// (The tokenizer interprets normalizer / pre-tokenizer / post-processor itself.)
// `file` names tokenizer.json in messages.
inline Result<void> vocab_from_tokenizer_json(ModelDesc& m, const std::string& file) {
  const Json& tj = m.tokenizer_json;
  const Json& model = tj["model"];
  auto bad = [&](const std::string& what) { return make_error(Errc::bad_format, file + ": " + what); };
  if (!model.is_object()) return bad("no \"model\" object");
  std::string_view type = model["type"].as_string();
  if (!type.empty() && type != "BPE")
    return make_error(Errc::unsupported, file + ": tokenizer model type '" + printable(type) + "' is not supported (only BPE)");
  const Json& vocab = model["vocab"];
  if (!vocab.is_object()) return bad("model.vocab is not an object");
  const Json& added = tj["added_tokens"];
  if (!added.is_null() && !added.is_array()) return bad("added_tokens is not an array");
  VocabData& vd = m.vocab;
  // Ids index a table: they must be dense enough that the table stays proportional to the file
  // (real vocabularies are dense; a hole-ridden one would make an attacker-sized allocation).
  const uint64_t entries = vocab.members.size() + added.items.size();
  const int64_t id_limit = static_cast<int64_t>(std::min<uint64_t>(2 * entries + 1024, 1u << 24));
  int64_t max_id = -1;
  for (const auto& [tok, id] : vocab.members) {
    if (!id.is_int || id.i < 0) return bad(strf("token '%s' has an invalid id", printable(tok).c_str()));
    if (id.i >= id_limit)
      return bad(strf("token '%s' has id %lld, far beyond the %llu entries of the vocabulary", printable(tok).c_str(),
                      static_cast<long long>(id.i), static_cast<unsigned long long>(entries)));
    max_id = std::max<int64_t>(max_id, id.i);
  }
  for (const auto& a : added.items) {
    const Json& id = a["id"];
    if (!id.is_int || id.i < 0 || id.i >= id_limit || !a["content"].is_string())
      return bad("an added token has an invalid id or no content");
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
  if (!merges.is_null() && !merges.is_array()) return bad("model.merges is not an array");
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
  // special tokens named in tokenizer_config.json ("<s>" or {"content": "<s>", ...})
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

// bos/eos ids from generation_config.json (preferred: it is what generate() uses) and config.json,
// where tokenizer_config.json named none. eos_token_id may be a number or a list of numbers.
inline void special_ids_from_configs(ModelDesc& m) {
  VocabData& vd = m.vocab;
  const size_t n = vd.tokens.size();
  for (const Json* j : {&m.generation_config, &m.config}) {
    const Json& bos = (*j)["bos_token_id"];
    if (vd.bos < 0 && bos.is_int && bos.i >= 0 && static_cast<uint64_t>(bos.i) < n) vd.bos = static_cast<int32_t>(bos.i);
    const Json& eos = (*j)["eos_token_id"];
    if (eos.is_array()) {
      for (const auto& e : eos.items)
        if (e.is_int) add_id_once(vd.eos_ids, e.i, n);
    } else if (eos.is_int) {
      add_id_once(vd.eos_ids, eos.i, n);
    }
  }
  if (vd.eos < 0 && !vd.eos_ids.empty()) vd.eos = vd.eos_ids[0];
  if (vd.eos >= 0 && std::find(vd.eos_ids.begin(), vd.eos_ids.end(), vd.eos) == vd.eos_ids.end())
    vd.eos_ids.insert(vd.eos_ids.begin(), vd.eos);
}

// The JSON side files of a Hugging Face / MLX directory, already read.
struct HfSources {
  std::string dir;             // names the files in messages ("dir/config.json")
  std::string config_text;     // config.json (required)
  std::optional<std::string> tokenizer_json, tokenizer_config, generation_config;
  std::optional<std::string> chat_template_jinja;  // chat_template.jinja
  std::optional<std::string> chat_template_json;   // chat_template.json ({"chat_template": "..."})
  std::optional<std::string> index_json;           // model.safetensors.index.json (sharded models)
};

// One safetensors image: a mapped file, or memory (tests, fuzzing).
struct StImage {
  std::string name;  // path, for messages and TensorView::file
  const uint8_t* data = nullptr;
  uint64_t size = 0;
};

// Chat template of a directory: tokenizer_config.json "chat_template" (a string, or a list of
// {name, template} where "default" is used), else chat_template.json, else chat_template.jinja.
inline Result<void> chat_template_from_sources(ModelDesc& m, const HfSources& src) {
  auto use = [&](std::string t) {
    m.chat_template = std::move(t);
    m.has_chat_template = true;
  };
  const Json& ct = m.tokenizer_config["chat_template"];
  if (ct.is_string()) {
    use(ct.str);
    return {};
  }
  if (ct.is_array()) {
    for (const auto& e : ct.items) {
      if (e["name"].as_string() == "default" && e["template"].is_string()) {
        use(e["template"].str);
        return {};
      }
    }
  }
  if (src.chat_template_json) {
    std::string file = path_join(src.dir, "chat_template.json");
    auto j = json_parse(*src.chat_template_json, file);
    if (!j) return j.error();
    const Json& t = (*j)["chat_template"];
    if (!t.is_string()) return make_error(Errc::bad_format, file + ": no \"chat_template\" string");
    use(t.str);
    return {};
  }
  if (src.chat_template_jinja) use(*src.chat_template_jinja);
  return {};
}

// MLX affine quantization parameters of one weight: config.json "quantization" holds
// {"group_size", "bits"} and optionally per-module overrides keyed by the module's full name
// ("model.layers.0.mlp.down_proj": {"group_size": 32, "bits": 8}, or false for "not quantized").
struct MlxQuant {
  bool present = false;  // the config has a quantization block
  int group = 64, bits = 0;
  std::string mode = "affine";
};

inline Result<MlxQuant> mlx_quant_params(const Json& q, std::string_view module, const std::string& cfg_file) {
  MlxQuant out;
  if (!q.is_object()) return out;
  out.present = true;
  auto read = [&](const Json& obj, const char* where) -> Result<void> {
    if (const Json* g = obj.find("group_size")) {
      if (!g->is_int || (g->i != 32 && g->i != 64 && g->i != 128))
        return make_error(Errc::bad_format, strf("%s: %s group_size must be 32, 64 or 128", cfg_file.c_str(), where));
      out.group = static_cast<int>(g->i);
    }
    if (const Json* b = obj.find("bits")) {
      if (!b->is_int || b->i < 1 || b->i > 8)
        return make_error(Errc::bad_format, strf("%s: %s bits must be 1..8", cfg_file.c_str(), where));
      out.bits = static_cast<int>(b->i);
    }
    if (const Json* mo = obj.find("mode"); mo && mo->is_string()) out.mode = mo->str;
    return {};
  };
  if (auto r = read(q, "quantization"); !r) return r.error();
  if (const Json* o = q.find(module)) {
    if (o->is_bool() && !o->boolean) {
      out.present = false;  // this module is stored unquantized
    } else if (o->is_object()) {
      if (auto r = read(*o, ("quantization of " + printable(module)).c_str()); !r) return r.error();
    }
  }
  return out;
}

// Turns the safetensors tensors into TensorViews with GGUF names, combining MLX triples
// (weight U32 + scales + biases) into one quantized view.
inline Result<void> desc_tensors_from_safetensors(ModelDesc& m, const std::vector<StFile>& files, const HfArchInfo& info,
                                                  const std::string& cfg_file) {
  auto bad = [&](const std::string& what) { return make_error(Errc::bad_format, m.path + ": " + what); };
  const Json& q = m.config.find("quantization") ? m.config["quantization"] : m.config["quantization_config"];
  // all tensors by their (prefix-stripped) Hugging Face name
  std::unordered_map<std::string, const StTensor*> by_name;
  std::vector<std::pair<std::string, const StTensor*>> ordered;
  std::unordered_map<const StTensor*, const StFile*> file_of;
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
      file_of.emplace(&t, &f);
    }
  }
  m.tensors.reserve(ordered.size());
  for (const auto& [hf, t] : ordered) {
    if (ends_with(hf, ".scales") || ends_with(hf, ".biases")) {
      std::string base = hf.substr(0, hf.size() - 7);
      auto w = by_name.find(base + ".weight");
      if (w != by_name.end() && w->second->type == DType::u32) continue;  // part of an MLX triple
    }
    std::string gname = hf_tensor_name(hf, info);
    if (gname.empty()) gname = hf;  // unknown tensors keep their name (listed, never computed with)
    TensorView v;
    v.name = gname;
    v.type = t->type;
    v.data = t->data;
    v.nbytes = t->nbytes;
    v.file_offset = t->file_offset;
    v.file = file_of[t]->path;
    if (t->shape.size() > 4)
      return bad(strf("tensor '%s' has %zu dimensions (at most 4)", printable(t->name).c_str(), t->shape.size()));
    v.n_dims = static_cast<int>(t->shape.size());
    for (int k = 0; k < v.n_dims; k++) v.ne[k] = t->shape[t->shape.size() - 1 - static_cast<size_t>(k)];
    if (ends_with(hf, ".weight") && t->type == DType::u32) {
      std::string base = hf.substr(0, hf.size() - 7);
      auto si = by_name.find(base + ".scales"), bi = by_name.find(base + ".biases");
      std::string tn = printable(t->name);
      if (si != by_name.end() || bi != by_name.end()) {
        std::string_view module = std::string_view(t->name).substr(0, t->name.size() - 7);
        auto qp = mlx_quant_params(q, module, cfg_file);
        if (!qp) return qp.error();
        if (qp->present && qp->mode != "affine")
          return make_error(Errc::unsupported, strf("%s: MLX tensor '%s' uses quantization mode '%s' (only affine)",
                                                    m.path.c_str(), tn.c_str(), printable(qp->mode).c_str()));
        if (si == by_name.end() || bi == by_name.end())
          return bad(strf("MLX tensor '%s' has %s but no %s", tn.c_str(), si == by_name.end() ? "biases" : "scales",
                          si == by_name.end() ? "scales" : "biases"));
        const StTensor* s = si->second;
        const StTensor* b = bi->second;
        if (v.n_dims != 2 || s->shape.size() != 2 || s->shape != b->shape || s->type != b->type ||
            s->shape[0] != t->shape[0] || (s->type != DType::f16 && s->type != DType::bf16 && s->type != DType::f32))
          return bad(strf("MLX tensor '%s': scales/biases do not match the weight (want two [%lld, groups] f16/bf16/f32 "
                          "tensors of one type)",
                          tn.c_str(), static_cast<long long>(t->shape.empty() ? 0 : t->shape[0])));
        const int64_t groups = s->shape[1], words = t->shape[1];
        if (groups <= 0 || words <= 0) return bad(strf("MLX tensor '%s' is empty", tn.c_str()));
        if (groups > INT64_MAX / 1024 || words > INT64_MAX / 32)
          return bad(strf("MLX tensor '%s' has absurd dimensions", tn.c_str()));
        const int group = qp->group;
        int64_t bits = qp->bits;
        // words * 32 packed bits hold groups * group values of `bits` bits each
        if (bits == 0) {  // no bits in the config: infer the width from the shapes
          if ((words * 32) % (groups * group) != 0)
            return bad(strf("MLX tensor '%s': cannot infer its bit width", tn.c_str()));
          bits = words * 32 / (groups * group);
        }
        if (words * 32 != groups * group * bits)
          return bad(strf("MLX tensor '%s': %lld words of 32 bits do not hold %lld groups of %d %lld-bit values "
                          "(quantization in %s)",
                          tn.c_str(), static_cast<long long>(words), static_cast<long long>(groups), group,
                          static_cast<long long>(bits), cfg_file.c_str()));
        if (bits != 4 && bits != 8)
          return make_error(Errc::unsupported,
                            strf("%s: MLX tensor '%s' is %lld-bit; only 4- and 8-bit affine quantization is supported",
                                 m.path.c_str(), tn.c_str(), static_cast<long long>(bits)));
        v.type = bits == 4 ? DType::mlx_q4 : DType::mlx_q8;
        v.ne[0] = groups * group;
        v.scales = s->data;
        v.biases = b->data;
        v.aux_type = s->type;
        v.group_size = group;
      }
    }
    // Gemma stores norms as (w - 1): GGUF's convention (and ours) is w itself.
    if (info.norm_plus_one && ends_with(v.name, "norm.weight") && v.n_dims == 1) {
      if (v.type != DType::f32 && v.type != DType::f16 && v.type != DType::bf16)
        return bad(strf("norm tensor '%s' has type %s", printable(t->name).c_str(), dtype_name(v.type)));
      auto n = static_cast<size_t>(v.ne[0]);
      std::unique_ptr<float[]> w(new float[n]);
      for (size_t k = 0; k < n; k++) {
        float x;
        if (v.type == DType::f32) std::memcpy(&x, v.data + 4 * k, 4);
        else if (v.type == DType::f16) x = fp16_to_f32(rd_u16(v.data + 2 * k));
        else x = bf16_to_f32(rd_u16(v.data + 2 * k));
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

// A sharded model's index must agree with its shards: every tensor it lists is in the shard it
// names, and every tensor of a shard is listed.
inline Result<void> check_shard_index(const Json& weight_map, const std::vector<StFile>& files, const std::string& index_file) {
  std::unordered_map<std::string_view, std::string_view> shard_of;  // tensor -> shard base name
  for (const auto& f : files) {
    std::string_view shard = f.path;
    if (size_t p = shard.find_last_of("/\\"); p != std::string_view::npos) shard.remove_prefix(p + 1);
    for (const auto& t : f.tensors) shard_of.emplace(t.name, shard);
  }
  for (const auto& [tensor, file] : weight_map.members) {
    auto it = shard_of.find(tensor);
    if (it == shard_of.end() || it->second != file.str)
      return make_error(Errc::bad_format, strf("%s: tensor '%s' is not in %s, where the index puts it", index_file.c_str(),
                                               printable(tensor).c_str(), printable(file.str).c_str()));
  }
  if (shard_of.size() != weight_map.members.size()) {
    for (const auto& [tensor, shard] : shard_of)
      if (!weight_map.find(tensor))
        return make_error(Errc::bad_format, strf("%s: shard %s holds tensor '%s', which the index does not list",
                                                 index_file.c_str(), printable(shard).c_str(), printable(tensor).c_str()));
  }
  return {};
}

// The shard file names of model.safetensors.index.json (in the order first named), validated.
inline Result<std::vector<std::string>> shard_names(const Json& index, const std::string& index_file) {
  const Json& wm = index["weight_map"];
  if (!wm.is_object()) return make_error(Errc::bad_format, index_file + ": no weight_map object");
  std::vector<std::string> out;
  for (const auto& [tensor, file] : wm.members) {
    if (!file.is_string() || file.str.empty() || file.str.find('/') != std::string::npos ||
        file.str.find('\\') != std::string::npos || file.str == "." || file.str == ".." || !utf8_valid(file.str))
      return make_error(Errc::bad_format,
                        strf("%s: tensor '%s' maps to an invalid file name", index_file.c_str(), printable(tensor).c_str()));
    if (std::find(out.begin(), out.end(), file.str) == out.end()) out.push_back(file.str);
  }
  if (out.empty()) return make_error(Errc::bad_format, index_file + ": the weight_map is empty");
  return out;
}

// A safetensors model from memory: `path` names it (as the user gave it), `src` holds the side
// files, `images` the weights (for a sharded model, one per shard, named by their paths).
inline Result<std::shared_ptr<ModelDesc>> safetensors_description(const std::string& path, const HfSources& src,
                                                                  const std::vector<StImage>& images) {
  auto m = std::make_shared<ModelDesc>();
  m->path = path;
  m->format = "safetensors";
  m->name = base_name(strip_trailing_separators(src.dir == "." ? path : src.dir));
  const std::string cfg_file = path_join(src.dir, "config.json");
  auto cfg = json_parse(src.config_text, cfg_file);
  if (!cfg) return cfg.error();
  if (!cfg->is_object()) return make_error(Errc::bad_format, cfg_file + ": not a JSON object");
  m->config = std::move(*cfg);
  for (auto [file, text, slot] : {std::tuple<const char*, const std::optional<std::string>*, Json*>{
                                      "tokenizer.json", &src.tokenizer_json, &m->tokenizer_json},
                                  {"tokenizer_config.json", &src.tokenizer_config, &m->tokenizer_config},
                                  {"generation_config.json", &src.generation_config, &m->generation_config}}) {
    if (!*text) continue;
    auto j = json_parse(**text, path_join(src.dir, file));
    if (!j) return j.error();
    if (!j->is_object()) return make_error(Errc::bad_format, path_join(src.dir, file) + ": not a JSON object");
    *slot = std::move(*j);
  }
  const HfArchInfo* info = nullptr;
  if (auto r = desc_meta_from_config(*m, info); !r) return r.error();
  std::vector<StFile> parsed;
  parsed.reserve(images.size());
  for (const auto& img : images) {
    auto st = safetensors_parse(img.data, img.size, img.name);
    if (!st) return st.error();
    m->file_bytes += img.size;
    for (auto& kv : st->metadata) m->st_metadata.push_back(kv);
    parsed.push_back(std::move(*st));
  }
  if (src.index_json) {
    const std::string index_file = path_join(src.dir, "model.safetensors.index.json");
    auto index = json_parse(*src.index_json, index_file);
    if (!index) return index.error();
    if (auto names = shard_names(*index, index_file); !names) return names.error();
    if (auto r = check_shard_index((*index)["weight_map"], parsed, index_file); !r) return r.error();
  }
  if (auto r = desc_tensors_from_safetensors(*m, parsed, *info, cfg_file); !r) return r.error();
  desc_index(*m);
  if (m->tokenizer_json.is_object())
    if (auto r = vocab_from_tokenizer_json(*m, path_join(src.dir, "tokenizer.json")); !r) return r.error();
  special_ids_from_configs(*m);
  if (auto r = chat_template_from_sources(*m, src); !r) return r.error();
  m->hf_qk_order = true;
  if (auto r = desc_hparams(*m); !r) return r.error();
  if (m->find_meta("general.tie_word_embeddings") && m->meta_number("general.tie_word_embeddings").value_or(0) == 0 &&
      m->hp.tied_embeddings)
    return make_error(Errc::tensor_missing,
                      path + ": config.json says the embeddings are not tied, but lm_head.weight is missing");
  return m;
}

// A GGUF model from memory (the bytes must outlive the description).
inline Result<std::shared_ptr<ModelDesc>> gguf_description(const uint8_t* data, uint64_t size, const std::string& name) {
  auto g = gguf_parse(data, size, name);
  if (!g) return g.error();
  auto m = std::make_shared<ModelDesc>();
  m->path = name;
  m->format = "gguf";
  m->file_bytes = size;
  m->gguf = std::move(*g);
  if (auto r = desc_from_gguf(*m, data, name); !r) return r.error();
  desc_index(*m);
  if (auto r = desc_hparams(*m); !r) return r.error();
  return m;
}

// ---- the file system side ----

inline Result<std::shared_ptr<MappedFile>> map_file(const std::string& path) {
  auto f = MappedFile::open(path);
  if (!f) return f.error();
  return std::make_shared<MappedFile>(std::move(*f));
}

// A small text file of a model directory (mapped, then copied: these are kilobytes to tens of MB).
inline Result<std::optional<std::string>> read_optional_file(const std::string& path) {
  if (!file_exists(path)) return std::optional<std::string>();
  auto f = MappedFile::open(path);
  if (!f) return f.error();
  return std::optional<std::string>(std::string(f->view()));
}

// A safetensors model: `dir` holds config.json (and tokenizer files); `weights` are the files
// (nullopt: find them in `dir`: the index's shards, model.safetensors, or every *.safetensors).
inline Result<std::shared_ptr<ModelDesc>> load_safetensors_model(const std::string& path, const std::string& dir,
                                                                 std::optional<std::string> single_file) {
  HfSources src;
  src.dir = dir;
  std::string cfg_path = path_join(dir, "config.json");
  if (!file_exists(cfg_path))
    return make_error(Errc::bad_format, path + ": no config.json beside the safetensors weights");
  auto cfg = read_optional_file(cfg_path);
  if (!cfg) return cfg.error();
  src.config_text = std::move(**cfg);
  for (auto [file, slot] : {std::pair<const char*, std::optional<std::string>*>{"tokenizer.json", &src.tokenizer_json},
                            {"tokenizer_config.json", &src.tokenizer_config},
                            {"generation_config.json", &src.generation_config},
                            {"chat_template.jinja", &src.chat_template_jinja},
                            {"chat_template.json", &src.chat_template_json}}) {
    auto t = read_optional_file(path_join(dir, file));
    if (!t) return t.error();
    *slot = std::move(*t);
  }
  std::vector<std::string> weights;
  if (single_file) {
    weights.push_back(*single_file);
  } else {
    std::string index = path_join(dir, "model.safetensors.index.json");
    if (file_exists(index)) {
      auto text = read_optional_file(index);
      if (!text) return text.error();
      src.index_json = std::move(*text);
      auto j = json_parse(*src.index_json, index);
      if (!j) return j.error();
      auto names = shard_names(*j, index);
      if (!names) return names.error();
      for (const auto& n : *names) {
        std::string p = path_join(dir, n);
        if (!file_exists(p)) return make_error(Errc::io, index + ": shard " + printable(n) + " is missing");
        weights.push_back(p);
      }
    } else if (std::string single = path_join(dir, "model.safetensors"); file_exists(single)) {
      weights.push_back(single);
    } else {
      for (const auto& name : list_directory(dir))
        if (ends_with(name, ".safetensors")) weights.push_back(path_join(dir, name));
      if (weights.empty())
        return make_error(Errc::io, dir + ": no model.safetensors, model.safetensors.index.json or *.safetensors "
                                          "file in this directory (for a GGUF model, give the .gguf file itself)");
    }
  }
  std::vector<std::shared_ptr<MappedFile>> mapped;
  std::vector<StImage> images;
  for (const auto& w : weights) {
    auto f = map_file(w);
    if (!f) return f.error();
    images.push_back(StImage{w, (*f)->data(), (*f)->size()});
    mapped.push_back(std::move(*f));
  }
  auto m = safetensors_description(path, src, images);
  if (!m) return m.error();
  (*m)->files = std::move(mapped);
  return m;
}

// Opens a model description from a GGUF file, a safetensors file, or a model directory.
inline Result<std::shared_ptr<ModelDesc>> load_description(const std::string& path) {
  if (path.empty()) return make_error(Errc::invalid_argument, "no model path given");
  if (is_directory(path)) return load_safetensors_model(path, strip_trailing_separators(path), std::nullopt);
  auto f = map_file(path);
  if (!f) return f.error();
  const MappedFile& mf = **f;
  bool gguf = mf.size() >= 4 && std::memcmp(mf.data(), "GGUF", 4) == 0;
  bool st = !gguf && (ends_with(path, ".safetensors") || (mf.size() >= 9 && mf.data()[8] == '{'));
  if (st) return load_safetensors_model(path, parent_dir(path), path);
  auto m = gguf_description(mf.data(), mf.size(), path);
  if (!m) return m.error();
  (*m)->files.push_back(std::move(*f));
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

inline Result<std::vector<int32_t>> Model::tokenize(std::string_view, bool, bool) const {
  return detail::make_error(Errc::unsupported, impl_->desc->path + ": the tokenizer is not implemented yet");
}

inline std::string Model::detokenize(std::span<const int32_t>) const { return std::string(); }

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
