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
// ==== Architecture definitions (archdef) ====
//
//   An architecture is a short text, not code: `llama`, `qwen2`, `qwen3` and `gemma3` are built in
//   (`llminfer status --dump llama` prints one); a directory of <arch>.archdef files
//   (LoadOptions::archdef_dir, `--archdef DIR`) overrides the built-in of the same name. A file that
//   does not load makes its architecture unavailable (loading such a model fails and lists the
//   broken files); there is never a silent fallback to the built-in. `llminfer status` shows each
//   definition in effect with its steps per layer, origin and sha256.
//
//   file      := one statement per line; '#' starts a comment; blank lines are ignored
//   header    := 'arch' NAME                      (must equal the file name without .archdef)
//              | 'kind' 'decoder'
//              | 'param' NAME '=' ALT ('|' ALT)*  (ALT: a metadata key like {arch}.rope.freq_base_swa,
//                                                  or a VALUE; the first that exists is used)
//   sections  := 'prologue' | 'block' | 'epilogue' (each once, in this order; the block runs once
//                                                  per layer with {i} = the layer index)
//   statement := DST '=' OP '(' ARGS ')'           (a new value in register DST)
//              | OP '(' REG ARGS ')'               (updates register REG in place)
//   ARGS      := positional arguments, then KEY '=' ARG keyword arguments, comma separated
//   TENSOR    := a GGUF tensor name (blk.{i}.attn_q.weight); 'a | b' = a, or b when the model has
//                no a; a final '| none' makes the step optional (skipped when no name exists)
//   VALUE     := a number | a param | a model value (n_embd n_layer n_head n_head_kv head_dim
//                head_dim_v n_ff n_vocab n_ctx_train rms_eps rope_base rope_dims) | sqrt(V) | rsqrt(V)
//
//   Registers are rows of f32 activations, one row per token ([n_tokens][width]); `x` is the
//   residual stream (the prologue assigns it), `logits` the result (the epilogue assigns it). A
//   register must be assigned before it is read. There are no conditionals, loops, calls, files,
//   environment or network: any other word where an operation belongs is an unknown operation.
//
//   operation                          computes
//   x = embed(T)                       row of T (a [n_vocab][n_embd] matrix) for each token id
//   rms_norm(r, W, eps=rms_eps)        r * W / sqrt(mean(r^2) + eps) over the whole row
//   norm_heads(r, W, eps=rms_eps)      the same per head: W has the head's length
//   y = matmul(r, W)                   y[t][j] = sum_k W[j][k] r[t][k] (any computable weight type)
//   add_bias(r, B)                     r + B
//   rope(r, pairs|neox, factors=T, base=V, base_swa=V, dims=rope_dims)
//                                      rotary positions on each head of head_dim: `pairs` rotates
//                                      (2i, 2i+1) (GGUF llama, whose q/k rows the converter permuted),
//                                      `neox` rotates (i, i + dims/2). Angle = pos * base^(-2i/dims)
//                                      / factor_i. factors: a tensor (llama-3 rope_freqs); without it
//                                      the model's metadata {arch}.rope.scaling.type applies (linear,
//                                      llama3). base_swa replaces base on sliding-window layers.
//                                      Hugging Face checkpoints keep q/k in rotate-half order, so
//                                      `pairs` runs as `neox` for them (no if in the definition).
//   a = attention(q, k, v, window=0, period=0, scale=rsqrt(head_dim), softcap=0)
//                                      causal grouped-query attention over the layer's KV cache
//                                      (q: n_head heads, k/v: n_head_kv heads of head_dim/head_dim_v);
//                                      stores k and v. window > 0: a token sees the `window` latest
//                                      positions, on every layer, or with period P > 0 on all but
//                                      every P-th layer (layer i is global when (i+1) % P == 0).
//                                      softcap > 0: scores become softcap * tanh(score / softcap).
//   silu(r) gelu(r) gelu_tanh(r) relu(r)   activations (gelu: erf form; gelu_tanh: tanh approximation)
//   mul(r, s)  add(r, s)               elementwise r*s, r+s (same widths)
//   scale(r, V)                        r * V
//   softcap(r, V)                      V * tanh(r / V); skipped when V is 0
//   y = copy(r)                        a copy
//   last(r)                            epilogue only: keeps the rows whose logits are wanted (the
//                                      last token, or all of them); afterwards only r and registers
//                                      assigned later may be read
//
//   Definitions are parsed and checked without a model (unknown operations with a "did you mean",
//   argument counts and kinds, registers used before assignment, sections), then compiled once per
//   model at load: every tensor is found and its shape and type checked, params are read from the
//   metadata, and the result is a flat list of steps with resolved pointers. Errors name the file
//   and line: "llama.archdef:28: no operation 'siluu' — did you mean 'silu'?".
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
  std::string archdef_dir = {};    // directory of <arch>.archdef files that override built-ins
  KvType kv_type = KvType::f16;    // element type of the KV cache
  ContextPolicy context_policy = ContextPolicy::stop;
  int keep = 4;                    // ContextPolicy::slide keeps this many first tokens
  std::function<void(std::string_view)> log = {};  // diagnostics; silent when empty
};

enum class StopReason : uint8_t {
  eos,           // the model produced an end-of-generation token (not part of the result)
  stop,          // a stop string appeared (it and what follows are not part of the result)
  max_tokens,    // GenerateOptions::max_tokens tokens were generated
  cancelled,     // on_token returned false or the cancel flag was set
  context_full,  // the context is full (ContextPolicy::stop), or the prompt does not fit
  error,         // an error after some text was produced: GenerateResult::error says which
};
// "eos", "stop", "max_tokens", "cancelled", "context_full", "error"
const char* to_string(StopReason reason) noexcept;

// GenerateOptions::seed value that asks for a fresh random seed (reported in the result).
inline constexpr uint64_t random_seed = ~uint64_t{0};

// Sampling chain: repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw
// (temperature 0: greedy argmax, ties to the lowest id). See the manual for the exact rules.
struct GenerateOptions {
  int max_tokens = 256;            // < 0: until end of generation, a stop string or a full context
  float temperature = 0.0f;        // 0: greedy
  int top_k = 0;                   // 0: off
  float top_p = 1.0f;              // 1: off
  float min_p = 0.0f;              // 0: off
  float repeat_penalty = 1.0f;     // 1: off
  int repeat_last_n = 64;          // tokens the penalty looks back on (prompt included); -1: all
  uint64_t seed = 0;               // same seed, same text (any thread count); random_seed: fresh
  std::vector<std::string> stop = {};  // stop strings (matched on text, not included in the output)
  bool chat = false;               // Model::generate: wrap the prompt in the model's chat template
  std::string system = {};         // Model::generate with chat: a system message
  // Streaming: receives the text as it is decided, in complete UTF-8 pieces, on the calling
  // thread; return false to cancel (StopReason::cancelled).
  std::function<bool(std::string_view piece)> on_token = {};
  // Cancel from anywhere: polled before each token and at least once per layer during the
  // prompt's evaluation.
  const std::atomic<bool>* cancel = nullptr;
};

struct Timings {
  double load_ms = 0;       // Model::load
  double prefill_ms = 0;    // evaluating the prompt tokens that were not cached
  double prefill_tps = 0;   // prompt tokens evaluated per second
  double decode_ms = 0;     // from the first generated token to the last
  double decode_tps = 0;    // generated tokens per second after the first
  double ttft_ms = 0;       // from the call to the first generated token
};

struct GenerateResult {
  std::string text;                  // the generated text (without the prompt or a stop string)
  std::vector<int32_t> tokens;       // generated ids (without the end-of-generation token)
  StopReason stop = StopReason::max_tokens;
  Error error;                       // with StopReason::error: what went wrong
  int prompt_tokens = 0;             // tokens of the prompt (this turn's whole conversation)
  int prompt_tokens_evaluated = 0;   // of those, evaluated by this call
  int prompt_tokens_reused = 0;      // of those, already in the session's KV cache
  uint64_t seed = 0;                 // the seed used (the drawn one for random_seed)
  Timings timings;
  double peak_rss_mb = 0;            // peak resident memory of the process so far
  uint64_t kv_bytes = 0;             // KV cache of the session
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

  // One-shot generation (a fresh session each call; safe from many threads at once). The prompt
  // is plain text (BOS added as the model asks) or, with options.chat, a user message.
  Result<GenerateResult> generate(std::string_view prompt, const GenerateOptions& options = {}) const;
  // The same from token ids (used exactly as given: no BOS is added).
  Result<GenerateResult> generate(std::span<const int32_t> prompt_tokens, const GenerateOptions& options = {}) const;
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

  // Appends a message ("system", "user", "assistant", ...) to the conversation.
  void add(std::string_view role, std::string_view content);
  // Renders the conversation with the model's chat template, evaluates only the tokens that are
  // not already in the session's KV cache, generates the assistant's reply and appends it to the
  // conversation. (options.chat and options.system are not used: add a "system" message.)
  Result<GenerateResult> reply(const GenerateOptions& options = {});
  void reset();  // forget the conversation and the cache
  const std::vector<Message>& messages() const;
  int cached_tokens() const;  // tokens in the KV cache
  int context_size() const;   // tokens the KV cache holds at most

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
#include <random>
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
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
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
// GCC 12 reports its own _mm512_undefined_*() (self-initialised on purpose) as uninitialised
// when inlined; the warnings point into the header, so silencing them for its lines is enough.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
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

// What the CPU (and OS) offers, as raw cpuid words. Tests replace cpu_query to fake a CPU.
struct CpuInfo {
  uint32_t l1_ecx = 0, l1_edx = 0;            // leaf 1
  uint32_t l7_ebx = 0, l7_ecx = 0, l7_edx = 0;  // leaf 7, sub-leaf 0
  uint32_t l7s1_eax = 0;                       // leaf 7, sub-leaf 1
  uint32_t e1_ecx = 0;                         // leaf 0x80000001
  uint64_t xcr0 = 0;                           // OS-enabled register state (xgetbv)
};

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
inline CpuInfo cpu_query_hw() {
  CpuInfo c;
  unsigned r[4];
  llmi_cpuid(0, 0, r);
  unsigned max_leaf = r[0];
  llmi_cpuid(1, 0, r);
  c.l1_ecx = r[2];
  c.l1_edx = r[3];
  if (max_leaf >= 7) {
    llmi_cpuid(7, 0, r);
    c.l7_ebx = r[1];
    c.l7_ecx = r[2];
    c.l7_edx = r[3];
    if (r[0] >= 1) {
      llmi_cpuid(7, 1, r);
      c.l7s1_eax = r[0];
    }
  }
  llmi_cpuid(static_cast<int>(0x80000000u), 0, r);
  if (r[0] >= 0x80000001u) {
    llmi_cpuid(static_cast<int>(0x80000001u), 0, r);
    c.e1_ecx = r[2];
  }
  if ((c.l1_ecx >> 27) & 1) c.xcr0 = llmi_xgetbv();  // OSXSAVE
  return c;
}
// Replaceable for tests (fake a CPU that lacks something); nullptr = ask the hardware.
inline CpuInfo (*cpu_query)() = nullptr;

// Empty when this CPU (and OS) can run what was compiled in; otherwise the missing features.
// Every instruction-set macro the compiler defines is checked, since -march lets it use them
// anywhere (not only in our kernels).
inline std::string cpu_missing_features() {
  const CpuInfo c = cpu_query ? cpu_query() : cpu_query_hw();
  const bool ymm = (c.xcr0 & 0x6) == 0x6, zmm = (c.xcr0 & 0xE6) == 0xE6;
  std::string missing;
  auto need = [&](bool ok, const char* name) {
    if (!ok) missing += missing.empty() ? name : std::string(", ") + name;
  };
  auto bit = [](uint32_t w, int b) { return ((w >> b) & 1) != 0; };
  (void)need;
  (void)bit;
  (void)ymm;
  (void)zmm;
#if defined(__SSE3__)
  need(bit(c.l1_ecx, 0), "SSE3");
#endif
#if defined(__SSSE3__)
  need(bit(c.l1_ecx, 9), "SSSE3");
#endif
#if defined(__SSE4_1__)
  need(bit(c.l1_ecx, 19), "SSE4.1");
#endif
#if defined(__SSE4_2__)
  need(bit(c.l1_ecx, 20), "SSE4.2");
#endif
#if defined(__POPCNT__)
  need(bit(c.l1_ecx, 23), "POPCNT");
#endif
#if defined(__MOVBE__)
  need(bit(c.l1_ecx, 22), "MOVBE");
#endif
#if defined(__AVX__)
  need(bit(c.l1_ecx, 28) && ymm, "AVX");
#endif
#if defined(__FMA__)
  need(bit(c.l1_ecx, 12) && ymm, "FMA");
#endif
#if defined(__F16C__)
  need(bit(c.l1_ecx, 29) && ymm, "F16C");
#endif
#if defined(__AVX2__)
  need(bit(c.l7_ebx, 5) && ymm, "AVX2");
#endif
#if defined(__BMI__)
  need(bit(c.l7_ebx, 3), "BMI1");
#endif
#if defined(__BMI2__)
  need(bit(c.l7_ebx, 8), "BMI2");
#endif
#if defined(__LZCNT__)
  need(bit(c.e1_ecx, 5), "LZCNT");
#endif
#if defined(__AVXVNNI__)
  need(bit(c.l7s1_eax, 4) && ymm, "AVX-VNNI");
#endif
#if defined(__AVX512F__)
  need(bit(c.l7_ebx, 16) && zmm, "AVX512F");
#endif
#if defined(__AVX512DQ__)
  need(bit(c.l7_ebx, 17) && zmm, "AVX512DQ");
#endif
#if defined(__AVX512IFMA__)
  need(bit(c.l7_ebx, 21) && zmm, "AVX512IFMA");
#endif
#if defined(__AVX512CD__)
  need(bit(c.l7_ebx, 28) && zmm, "AVX512CD");
#endif
#if defined(__AVX512BW__)
  need(bit(c.l7_ebx, 30) && zmm, "AVX512BW");
#endif
#if defined(__AVX512VL__)
  need(bit(c.l7_ebx, 31) && zmm, "AVX512VL");
#endif
#if defined(__AVX512VBMI__)
  need(bit(c.l7_ecx, 1) && zmm, "AVX512VBMI");
#endif
#if defined(__AVX512VBMI2__)
  need(bit(c.l7_ecx, 6) && zmm, "AVX512VBMI2");
#endif
#if defined(__GFNI__)
  need(bit(c.l7_ecx, 8), "GFNI");
#endif
#if defined(__VAES__)
  need(bit(c.l7_ecx, 9), "VAES");
#endif
#if defined(__VPCLMULQDQ__)
  need(bit(c.l7_ecx, 10), "VPCLMULQDQ");
#endif
#if defined(__AVX512VNNI__)
  need(bit(c.l7_ecx, 11) && zmm, "AVX512VNNI");
#endif
#if defined(__AVX512BITALG__)
  need(bit(c.l7_ecx, 12) && zmm, "AVX512BITALG");
#endif
#if defined(__AVX512VPOPCNTDQ__)
  need(bit(c.l7_ecx, 14) && zmm, "AVX512VPOPCNTDQ");
#endif
#if defined(__AVX512VP2INTERSECT__)
  need(bit(c.l7_edx, 8) && zmm, "AVX512VP2INTERSECT");
#endif
#if defined(__AVX512FP16__)
  need(bit(c.l7_edx, 23) && zmm, "AVX512FP16");
#endif
#if defined(__AVX512BF16__)
  need(bit(c.l7s1_eax, 5) && zmm, "AVX512BF16");
#endif
  return missing;
}
#elif defined(__aarch64__) && defined(__linux__) && !defined(LLMINFER_NO_CPU_CHECK)
inline CpuInfo (*cpu_query)() = nullptr;
inline std::string cpu_missing_features() {
  std::string missing;
#if defined(__ARM_FEATURE_DOTPROD)
  if (!(getauxval(AT_HWCAP) & (1ul << 20))) missing = "ASIMDDP (the dot product instructions)";  // HWCAP_ASIMDDP
#endif
  return missing;
}
#else
inline CpuInfo (*cpu_query)() = nullptr;
inline std::string cpu_missing_features() { return std::string(); }
#endif

inline Result<void> check_cpu() {
  std::string missing = cpu_missing_features();
  if (missing.empty()) return {};
#if defined(__aarch64__)
  const char* hint = "`make LLMINFER_SIMD=neon` without extra -march flags, or `LLMINFER_SIMD=scalar`";
#else
  const char* hint = "`make LLMINFER_SIMD=avx2` or `LLMINFER_SIMD=scalar`";
#endif
  return make_error(Errc::cpu_unsupported,
                    strf("this program was built for %s, but this CPU (or OS) lacks %s; rebuild "
                         "with a lower target, e.g. %s",
                         simd_compiled(), missing.c_str(), hint));
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
// Every weight format the kernels read, bit-exact to GGUF (ggml-common.h) and to MLX affine
// quantization, with a readable scalar dequantizer and dot product. The SIMD kernels (21_simd,
// 23_matmul) must agree with these: integer parts exactly, float sums within the rounding of a
// different summation order. The structs document the byte layout; the code reads bytes through
// rd_u16 (blocks are only 2-byte aligned in a file, and safetensors data may be unaligned).
//
// Activations are quantized once per matmul into one of two 8-bit forms (ActQ8 below):
//   q8_32   blocks of 32: scale d, 32 int8, their sum      (for Q4_0, Q5_0, Q8_0 weights)
//   q8_256  blocks of 256: scale d, 256 int8, sums of 16   (for Q4_K, Q6_K weights)
// so that a weight block times an activation block is an integer dot product and one float
// multiply, as in ggml (Q8_0 / Q8_K).
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// An activation row quantized to 8 bits. Blocks of 32 (q8_32) or 256 (q8_256) share a scale;
// value i is d[i / block] * q[i]. `sums` are sums of q over 32 (q8_32) or 16 (q8_256) values:
// they apply weight offsets (Q4_0's -8, Q4_K's mins, ...) without touching every value.
struct ActQ8 {
  const int8_t* q = nullptr;     // [n]
  const float* d = nullptr;      // [n / block]
  const int16_t* sums = nullptr;  // [n / 32] (q8_32) or [n / 16] (q8_256)
};

namespace ref {

// ---- GGUF block layouts ----

// Q4_0: 32 weights: fp16 d, then 16 bytes; byte j holds weight j (low nibble) and weight j+16
// (high nibble). w = d * (q - 8), q in 0..15.
constexpr int kQK4_0 = 32;
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "q4_0 block is 18 bytes");

// Q5_0: 32 weights: fp16 d, 4 bytes qh (a little-endian uint32: bit j = 5th bit of weight j),
// 16 bytes qs as in Q4_0 (low nibble weight j, high nibble weight j+16).
// w = d * (q - 16), q = nibble | (bit << 4) in 0..31.
constexpr int kQK5_0 = 32;
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22, "q5_0 block is 22 bytes");

// Q8_0: 32 weights: fp16 d, then 32 int8 q. w = d * q.
constexpr int kQK8_0 = 32;
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "q8_0 block is 34 bytes");

// K-quants: super-blocks of 256 weights.
constexpr int kQK_K = 256;

// Q4_K: 256 weights in 8 sub-blocks of 32. fp16 d, fp16 dmin, 12 bytes of 6-bit sub-block
// scales sc[8] and mins m[8], 128 bytes of nibbles. Scales (j < 4): sc[j] = s[j] & 63,
// m[j] = s[j+4] & 63; (j >= 4): sc[j] = (s[j+4] & 15) | (s[j-4] >> 6) << 4,
// m[j] = (s[j+4] >> 4) | (s[j] >> 6) << 4. Nibbles: the 256 weights are 4 chunks of 64; chunk c
// uses bytes qs[32c .. 32c+31]: low nibbles are weights 64c+0..31 (sub-block 2c), high nibbles
// weights 64c+32..63 (sub-block 2c+1). w = d * sc[j] * q - dmin * m[j], q in 0..15.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "q4_K block is 144 bytes");

// Q6_K: 256 weights in 16 sub-blocks of 16. 128 bytes ql (low 4 bits), 64 bytes qh (high 2
// bits), 16 int8 scales, fp16 d (last). Two halves of 128 weights; half h uses ql[64h..64h+63],
// qh[32h..32h+31], scales[8h..8h+7]. Within a half, for l in 0..31:
//   weight l      : ql[l]    low nibble,  qh[l] bits 0-1
//   weight l + 32 : ql[l+32] low nibble,  qh[l] bits 2-3
//   weight l + 64 : ql[l]    high nibble, qh[l] bits 4-5
//   weight l + 96 : ql[l+32] high nibble, qh[l] bits 6-7
// w = d * scales[sub-block] * (q - 32), q = low | high << 4 in 0..63, sub-block = index / 16.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210, "q6_K block is 210 bytes");

// MLX affine (mlx_q4 / mlx_q8): a row is uint32 words holding 8 (4-bit) or 4 (8-bit) values,
// lowest bits first: value i of a word is (word >> (bits * i)) & mask. In memory (little-endian)
// a 4-bit row is therefore bytes whose low nibble is the even and high nibble the odd value, an
// 8-bit row is plain uint8. Groups of `group_size` values share a scale and a bias (f16, bf16 or
// f32, [rows][n / group_size]): w = q * scale + bias.

// ---- small helpers ----

// Q4_K's 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
inline void q4k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Unsigned quantized value of element i (0..31) of a Q4_0 / Q5_0 block (before the offset).
inline int q4_0_value(const uint8_t* blk, int i) {
  const uint8_t* qs = blk + offsetof(BlockQ4_0, qs);
  return i < 16 ? (qs[i] & 15) : (qs[i - 16] >> 4);
}
inline int q5_0_value(const uint8_t* blk, int i) {
  const uint8_t* qs = blk + offsetof(BlockQ5_0, qs);
  uint32_t qh = rd_u32(blk + offsetof(BlockQ5_0, qh));
  int lo = i < 16 ? (qs[i] & 15) : (qs[i - 16] >> 4);
  return lo | static_cast<int>(((qh >> i) & 1) << 4);
}
// Unsigned value (0..15) of element i (0..255) of a Q4_K super-block and its sub-block.
inline int q4_k_value(const uint8_t* blk, int i) {
  const uint8_t* qs = blk + offsetof(BlockQ4_K, qs);
  int chunk = i / 64, l = i % 64;
  return l < 32 ? (qs[32 * chunk + l] & 15) : (qs[32 * chunk + l - 32] >> 4);
}
// Unsigned value (0..63) of element i (0..255) of a Q6_K super-block.
inline int q6_k_value(const uint8_t* blk, int i) {
  const uint8_t* ql = blk + offsetof(BlockQ6_K, ql) + 64 * (i / 128);
  const uint8_t* qh = blk + offsetof(BlockQ6_K, qh) + 32 * (i / 128);
  int l = i % 128, quarter = l / 32, k = l % 32;
  int low = quarter == 0 ? (ql[k] & 15) : quarter == 1 ? (ql[k + 32] & 15) : quarter == 2 ? (ql[k] >> 4) : (ql[k + 32] >> 4);
  int high = (qh[k] >> (2 * quarter)) & 3;
  return low | high << 4;
}

// ---- dequantization: one row of n elements (n a multiple of the block size) ----

inline void dequant_row_q4_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK4_0; b++) {
    const uint8_t* blk = src + b * static_cast<int64_t>(sizeof(BlockQ4_0));
    float d = fp16_to_f32(rd_u16(blk));
    for (int i = 0; i < kQK4_0; i++) dst[b * kQK4_0 + i] = d * static_cast<float>(q4_0_value(blk, i) - 8);
  }
}

inline void dequant_row_q5_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK5_0; b++) {
    const uint8_t* blk = src + b * static_cast<int64_t>(sizeof(BlockQ5_0));
    float d = fp16_to_f32(rd_u16(blk));
    for (int i = 0; i < kQK5_0; i++) dst[b * kQK5_0 + i] = d * static_cast<float>(q5_0_value(blk, i) - 16);
  }
}

inline void dequant_row_q8_0(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK8_0; b++) {
    const uint8_t* blk = src + b * static_cast<int64_t>(sizeof(BlockQ8_0));
    float d = fp16_to_f32(rd_u16(blk));
    for (int i = 0; i < kQK8_0; i++) dst[b * kQK8_0 + i] = d * static_cast<float>(static_cast<int8_t>(blk[2 + i]));
  }
}

inline void dequant_row_q4_k(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; b++) {
    const uint8_t* blk = src + b * static_cast<int64_t>(sizeof(BlockQ4_K));
    float d = fp16_to_f32(rd_u16(blk + offsetof(BlockQ4_K, d)));
    float dmin = fp16_to_f32(rd_u16(blk + offsetof(BlockQ4_K, dmin)));
    for (int i = 0; i < kQK_K; i++) {
      int sc, m;
      q4k_scale_min(blk + offsetof(BlockQ4_K, scales), i / 32, &sc, &m);
      dst[b * kQK_K + i] = d * static_cast<float>(sc) * static_cast<float>(q4_k_value(blk, i)) - dmin * static_cast<float>(m);
    }
  }
}

inline void dequant_row_q6_k(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; b++) {
    const uint8_t* blk = src + b * static_cast<int64_t>(sizeof(BlockQ6_K));
    float d = fp16_to_f32(rd_u16(blk + offsetof(BlockQ6_K, d)));
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ6_K, scales));
    for (int i = 0; i < kQK_K; i++)
      dst[b * kQK_K + i] = d * static_cast<float>(sc[i / 16]) * static_cast<float>(q6_k_value(blk, i) - 32);
  }
}

// An MLX group scale or bias (f16, bf16 or f32).
inline float mlx_aux(const uint8_t* p, DType t, int64_t i) {
  switch (t) {
    case DType::f16: return fp16_to_f32(rd_u16(p + 2 * i));
    case DType::bf16: return bf16_to_f32(rd_u16(p + 2 * i));
    default: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
  }
}
// Unsigned value i of an MLX row (4 or 8 bits, lowest bits first in little-endian words).
inline int mlx_value(const uint8_t* row, int bits, int64_t i) {
  uint32_t word = rd_u32(row + 4 * (i * bits / 32));
  int per_word = 32 / bits;
  return static_cast<int>((word >> (bits * (i % per_word))) & ((1u << bits) - 1));
}
inline void dequant_row_mlx(const TensorView& w, int64_t row, float* dst) {
  const int bits = w.type == DType::mlx_q4 ? 4 : 8;
  const int64_t n = w.ne[0], groups = n / w.group_size;
  const uint8_t* q = w.data + static_cast<uint64_t>(row) * static_cast<uint64_t>(n * bits / 8);
  for (int64_t g = 0; g < groups; g++) {
    float s = mlx_aux(w.scales, w.aux_type, row * groups + g), b = mlx_aux(w.biases, w.aux_type, row * groups + g);
    for (int64_t i = g * w.group_size; i < (g + 1) * w.group_size; i++) dst[i] = static_cast<float>(mlx_value(q, bits, i)) * s + b;
  }
}

// ---- activation quantization ----

// The product of two 8-bit quantized values. GCC 12 with VNNI (-mavx512vnni / -mavxvnni)
// vectorises the integer dot-product loops below into vpdpbusd, which treats one operand as
// unsigned, and gets signed bytes read through uint8_t (and offset nibbles) wrong; an empty asm
// on one operand keeps these reference loops scalar there.
inline int mul_q(int a, int b) {
#if defined(__GNUC__) && !defined(__clang__) && (defined(__AVX512VNNI__) || defined(__AVXVNNI__))
  __asm__("" : "+r"(a));
#endif
  return a * b;
}

// Rounds like the SIMD conversions (round half to even, the default rounding mode).
inline int round_even(float v) { return static_cast<int>(std::nearbyint(v)); }

// One block of `len` values: d = amax / 127, q = round(x * 127 / amax) (0 when all are 0),
// sums over groups of `sum_len`.
inline void quantize_block_q8(const float* x, int len, int sum_len, int8_t* q, float* d, int16_t* sums) {
  float amax = 0;
  for (int i = 0; i < len; i++) amax = std::max(amax, std::fabs(x[i]));
  float id = amax > 0 ? 127.0f / amax : 0.0f;
  *d = amax / 127.0f;
  for (int i = 0; i < len; i++) q[i] = static_cast<int8_t>(std::clamp(round_even(x[i] * id), -127, 127));
  for (int g = 0; g < len / sum_len; g++) {
    int s = 0;
    for (int i = 0; i < sum_len; i++) s += q[g * sum_len + i];
    sums[g] = static_cast<int16_t>(s);
  }
}

// x[n] (n a multiple of 32) -> q8_32: q[n], d[n/32], sums[n/32].
inline void quantize_q8_32(const float* x, int64_t n, int8_t* q, float* d, int16_t* sums) {
  for (int64_t b = 0; b < n / 32; b++) quantize_block_q8(x + 32 * b, 32, 32, q + 32 * b, d + b, sums + b);
}
// x[n] (n a multiple of 256) -> q8_256: q[n], d[n/256], sums[n/16].
inline void quantize_q8_256(const float* x, int64_t n, int8_t* q, float* d, int16_t* sums) {
  for (int64_t b = 0; b < n / 256; b++) quantize_block_q8(x + 256 * b, 256, 16, q + 256 * b, d + b, sums + 16 * b);
}

// ---- dot products: one weight row (n elements) times one activation row ----
// Integer sums per block, then one float multiply-add per block in block order.

inline float vec_dot_q4_0(const uint8_t* w, const ActQ8& a, int64_t n) {
  float acc = 0;
  for (int64_t b = 0; b < n / 32; b++) {
    const uint8_t* blk = w + b * static_cast<int64_t>(sizeof(BlockQ4_0));
    int s = 0;
    for (int i = 0; i < 32; i++) s += mul_q(q4_0_value(blk, i) - 8, a.q[32 * b + i]);
    acc += fp16_to_f32(rd_u16(blk)) * a.d[b] * static_cast<float>(s);
  }
  return acc;
}

inline float vec_dot_q5_0(const uint8_t* w, const ActQ8& a, int64_t n) {
  float acc = 0;
  for (int64_t b = 0; b < n / 32; b++) {
    const uint8_t* blk = w + b * static_cast<int64_t>(sizeof(BlockQ5_0));
    int s = 0;
    for (int i = 0; i < 32; i++) s += mul_q(q5_0_value(blk, i) - 16, a.q[32 * b + i]);
    acc += fp16_to_f32(rd_u16(blk)) * a.d[b] * static_cast<float>(s);
  }
  return acc;
}

inline float vec_dot_q8_0(const uint8_t* w, const ActQ8& a, int64_t n) {
  float acc = 0;
  for (int64_t b = 0; b < n / 32; b++) {
    const uint8_t* blk = w + b * static_cast<int64_t>(sizeof(BlockQ8_0));
    int s = 0;
    for (int i = 0; i < 32; i++) s += mul_q(static_cast<int8_t>(blk[2 + i]), a.q[32 * b + i]);
    acc += fp16_to_f32(rd_u16(blk)) * a.d[b] * static_cast<float>(s);
  }
  return acc;
}

// Q4_K x q8_256: sum = d*dx * sum_j sc_j * (q . a)_j  -  dmin*dx * sum_j m_j * (sum of a)_j.
inline float vec_dot_q4_k(const uint8_t* w, const ActQ8& a, int64_t n) {
  float acc = 0;
  for (int64_t b = 0; b < n / kQK_K; b++) {
    const uint8_t* blk = w + b * static_cast<int64_t>(sizeof(BlockQ4_K));
    const int8_t* q = a.q + kQK_K * b;
    int sum_q = 0, sum_m = 0;
    for (int j = 0; j < 8; j++) {
      int sc, m, s = 0;
      q4k_scale_min(blk + offsetof(BlockQ4_K, scales), j, &sc, &m);
      for (int i = 32 * j; i < 32 * j + 32; i++) s += mul_q(q4_k_value(blk, i), q[i]);
      sum_q += sc * s;
      sum_m += m * (a.sums[16 * b + 2 * j] + a.sums[16 * b + 2 * j + 1]);
    }
    float d = fp16_to_f32(rd_u16(blk + offsetof(BlockQ4_K, d))) * a.d[b];
    float dmin = fp16_to_f32(rd_u16(blk + offsetof(BlockQ4_K, dmin))) * a.d[b];
    acc += d * static_cast<float>(sum_q) - dmin * static_cast<float>(sum_m);
  }
  return acc;
}

// Q6_K x q8_256: d*dx * sum_j sc_j * ((q - 32) . a)_j.
inline float vec_dot_q6_k(const uint8_t* w, const ActQ8& a, int64_t n) {
  float acc = 0;
  for (int64_t b = 0; b < n / kQK_K; b++) {
    const uint8_t* blk = w + b * static_cast<int64_t>(sizeof(BlockQ6_K));
    const int8_t* sc = reinterpret_cast<const int8_t*>(blk + offsetof(BlockQ6_K, scales));
    const int8_t* q = a.q + kQK_K * b;
    int sum = 0;
    for (int j = 0; j < 16; j++) {
      int s = 0;
      for (int i = 16 * j; i < 16 * j + 16; i++) s += mul_q(q6_k_value(blk, i) - 32, q[i]);
      sum += sc[j] * s;
    }
    acc += fp16_to_f32(rd_u16(blk + offsetof(BlockQ6_K, d))) * a.d[b] * static_cast<float>(sum);
  }
  return acc;
}

// Float weights times f32 activations, in element order.
inline float vec_dot_f32(const uint8_t* w, const float* x, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n; i++) {
    float v;
    std::memcpy(&v, w + 4 * i, 4);
    acc += v * x[i];
  }
  return acc;
}
inline float vec_dot_f16(const uint8_t* w, const float* x, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n; i++) acc += fp16_to_f32(rd_u16(w + 2 * i)) * x[i];
  return acc;
}
inline float vec_dot_bf16(const uint8_t* w, const float* x, int64_t n) {
  float acc = 0;
  for (int64_t i = 0; i < n; i++) acc += bf16_to_f32(rd_u16(w + 2 * i)) * x[i];
  return acc;
}

// MLX affine row `row` times f32 activations: per group, scale * sum(q * x) + bias * sum(x).
inline float vec_dot_mlx(const TensorView& w, int64_t row, const float* x) {
  const int bits = w.type == DType::mlx_q4 ? 4 : 8;
  const int64_t n = w.ne[0], groups = n / w.group_size;
  const uint8_t* q = w.data + static_cast<uint64_t>(row) * static_cast<uint64_t>(n * bits / 8);
  float acc = 0;
  for (int64_t g = 0; g < groups; g++) {
    float sqx = 0, sx = 0;
    for (int64_t i = g * w.group_size; i < (g + 1) * w.group_size; i++) {
      sqx += static_cast<float>(mlx_value(q, bits, i)) * x[i];
      sx += x[i];
    }
    acc += mlx_aux(w.scales, w.aux_type, row * groups + g) * sqx + mlx_aux(w.biases, w.aux_type, row * groups + g) * sx;
  }
  return acc;
}

}  // namespace ref

// Whether tensors of this type can be computed with (dequantized / multiplied).
inline bool dtype_computable(DType t) {
  switch (t) {
    case DType::f32: case DType::f16: case DType::bf16:
    case DType::q4_0: case DType::q5_0: case DType::q8_0: case DType::q4_K: case DType::q6_K:
    case DType::mlx_q4: case DType::mlx_q8:
      return true;
    default: return false;
  }
}

// Bytes of one row of a 2-D weight (MLX: the packed words only).
inline uint64_t weight_row_bytes(const TensorView& w) {
  uint64_t rb = 0;
  dtype_row_bytes(w.type, static_cast<uint64_t>(w.ne[0]), &rb);
  return rb;
}

// Row `row` of a 2-D (or flattened) tensor as f32 (`out` holds ne[0] floats). The type must be
// computable (checked at load).
inline void dequant_row(const TensorView& w, int64_t row, float* out) {
  const int64_t n = w.ne[0];
  const uint8_t* src = w.data + static_cast<uint64_t>(row) * weight_row_bytes(w);
  switch (w.type) {
    case DType::f32: std::memcpy(out, src, static_cast<size_t>(n) * 4); break;
    case DType::f16: for (int64_t k = 0; k < n; k++) out[k] = fp16_to_f32(rd_u16(src + 2 * k)); break;
    case DType::bf16: for (int64_t k = 0; k < n; k++) out[k] = bf16_to_f32(rd_u16(src + 2 * k)); break;
    case DType::q4_0: ref::dequant_row_q4_0(src, out, n); break;
    case DType::q5_0: ref::dequant_row_q5_0(src, out, n); break;
    case DType::q8_0: ref::dequant_row_q8_0(src, out, n); break;
    case DType::q4_K: ref::dequant_row_q4_k(src, out, n); break;
    case DType::q6_K: ref::dequant_row_q6_k(src, out, n); break;
    case DType::mlx_q4: case DType::mlx_q8: ref::dequant_row_mlx(w, row, out); break;
    default: LLMI_ASSERT(!"dequant_row: type not computable"); break;
  }
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/21_simd.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== SIMD kernels: activation quantizers and row dot products (ref -> AVX2 -> AVX-512 -> NEON) ====
// Each function has the signature of its reference in detail::ref and a body per instruction set,
// chosen at compile time (LLMI_SIMD_*). What they must agree on with the reference:
//  * quantize_q8_32 / quantize_q8_256: bit-identical (same float operations, round half to even);
//  * integer dot products of a block: exactly (only the order of the float sums of per-block
//    results differs, so float results differ by rounding only).
// Signed x signed int8 products on x86 use |w| (unsigned) times a carrying w's sign (vpdpbusd /
// vpmaddubsw take one unsigned operand); K-quant values are non-negative, so their products
// are unsigned x signed directly, with the format's offset applied through activation sums.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// fp16 -> f32 for one scale (hardware conversion where there is one).
inline float f16_scale(const uint8_t* p) {
#if defined(LLMI_SIMD_AVX2)
  return _cvtsh_ss(rd_u16(p));
#elif defined(LLMI_SIMD_NEON)
  __fp16 h;
  std::memcpy(&h, p, 2);
  return static_cast<float>(h);
#else
  return fp16_to_f32(rd_u16(p));
#endif
}

// ---- x86 helpers ----
#if defined(LLMI_SIMD_AVX2)
inline float hsum_ps256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float hmax_ps256(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline int hsum_epi32_256(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}
// Sum over pairs of signed int8 products, as 8 int32 lanes (4 products each).
inline __m256i dot_s8_256(__m256i w, __m256i a) {
  __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
// 32 bytes of nibbles -> [low nibbles (32 B)] and [high nibbles (32 B)] as bytes 0..15.
inline __m256i nibbles_lo256(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(15)); }
inline __m256i nibbles_hi256(__m256i v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(15)); }
// 16 bytes of a Q4_0/Q5_0 block -> the 32 values in element order (low nibbles first).
inline __m256i q4_block_values(const uint8_t* qs) {
  __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  __m128i m = _mm_set1_epi8(15);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
}
// Bit i of a 32-bit mask -> byte i is 0x10 (Q5_0's fifth bit).
inline __m256i q5_high_bits(uint32_t qh) {
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)), shuf);
  const __m256i bits = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bits), bits);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}
#endif

#if defined(LLMI_SIMD_AVX512)
// Signed int8 products summed in groups of 4 into 16 int32 lanes.
inline __m512i dot_s8_512(__m512i w, __m512i a) {
  __mmask64 neg = _mm512_movepi8_mask(w);
  __m512i as = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
  __m512i wa = _mm512_abs_epi8(w);
#if defined(LLMI_SIMD_VNNI)
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), wa, as);
#else
  return _mm512_madd_epi16(_mm512_maddubs_epi16(wa, as), _mm512_set1_epi16(1));
#endif
}
// acc += sum over pairs of (u8 w * s8 a) * s16 scale (K-quant sub-block scales).
inline __m512i dot_u8s8_scaled_512(__m512i acc, __m512i w, __m512i a, __m512i scale16) {
  __m512i p = _mm512_maddubs_epi16(w, a);
#if defined(LLMI_SIMD_VNNI)
  return _mm512_dpwssd_epi32(acc, p, scale16);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(p, scale16));
#endif
}
// [s0, s1] (two per-block float scales) -> 8 lanes of s0 then 8 lanes of s1.
inline __m512 scale_pair_512(float s0, float s1) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_set1_ps(s0)), _mm256_castps_pd(_mm256_set1_ps(s1)), 1));
}
#endif

#if defined(LLMI_SIMD_NEON)
// acc += 4 groups of 4 signed int8 products.
inline int32x4_t neon_dot_s8(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
  return vdotq_s32(acc, a, b);
#else
  int16x8_t p0 = vmull_s8(vget_low_s8(a), vget_low_s8(b));
  int16x8_t p1 = vmull_high_s8(a, b);
  return vpadalq_s16(vpadalq_s16(acc, p0), p1);
#endif
}
// Bits 0..15 of `bits` -> bytes of 0x10 where set.
inline uint8x16_t neon_bits16(uint32_t bits) {
  const uint8x16_t mask = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  uint8x16_t v = vcombine_u8(vdup_n_u8(static_cast<uint8_t>(bits)), vdup_n_u8(static_cast<uint8_t>(bits >> 8)));
  return vandq_u8(vtstq_u8(v, mask), vdupq_n_u8(0x10));
}
#endif

// ---- activation quantizers (bit-identical to ref::quantize_q8_32 / ref::quantize_q8_256) ----

inline void quantize_q8_32(const float* x, int64_t n, int8_t* q, float* d, int16_t* sums) {
#if defined(LLMI_SIMD_AVX512)
  for (int64_t b = 0; b < n / 32; b++) {
    __m512 v0 = _mm512_loadu_ps(x + 32 * b), v1 = _mm512_loadu_ps(x + 32 * b + 16);
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    d[b] = amax / 127.0f;
    __m512 vid = _mm512_set1_ps(id);
    __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, vid)), i1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, vid));
    const __m512i lim = _mm512_set1_epi32(127);
    i0 = _mm512_max_epi32(_mm512_min_epi32(i0, lim), _mm512_sub_epi32(_mm512_setzero_si512(), lim));
    i1 = _mm512_max_epi32(_mm512_min_epi32(i1, lim), _mm512_sub_epi32(_mm512_setzero_si512(), lim));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b), _mm512_cvtepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 32 * b + 16), _mm512_cvtepi32_epi8(i1));
    sums[b] = static_cast<int16_t>(_mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1)));
  }
#elif defined(LLMI_SIMD_AVX2)
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i lim = _mm256_set1_epi32(127), nlim = _mm256_set1_epi32(-127);
  for (int64_t b = 0; b < n / 32; b++) {
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
      v[k] = _mm256_loadu_ps(x + 32 * b + 8 * k);
      m = _mm256_max_ps(m, _mm256_and_ps(v[k], absmask));
    }
    float amax = hmax_ps256(m);
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    d[b] = amax / 127.0f;
    __m256 vid = _mm256_set1_ps(id);
    __m256i iv[4];
    for (int k = 0; k < 4; k++)
      iv[k] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v[k], vid)), lim), nlim);
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(iv[0], iv[1]), _mm256_add_epi32(iv[2], iv[3]));
    sums[b] = static_cast<int16_t>(hsum_epi32_256(s));
    // int32 -> int8 keeping element order (packs interleave 128-bit lanes; undo with a permute)
    __m256i p01 = _mm256_packs_epi32(iv[0], iv[1]), p23 = _mm256_packs_epi32(iv[2], iv[3]);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * b), p);
  }
#elif defined(LLMI_SIMD_NEON)
  for (int64_t b = 0; b < n / 32; b++) {
    float32x4_t v[8];
    float32x4_t m = vdupq_n_f32(0);
    for (int k = 0; k < 8; k++) {
      v[k] = vld1q_f32(x + 32 * b + 4 * k);
      m = vmaxq_f32(m, vabsq_f32(v[k]));
    }
    float amax = vmaxvq_f32(m);
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    d[b] = amax / 127.0f;
    int32x4_t s = vdupq_n_s32(0);
    for (int k = 0; k < 8; k += 2) {
      int32x4_t i0 = vmaxq_s32(vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(v[k], id)), vdupq_n_s32(127)), vdupq_n_s32(-127));
      int32x4_t i1 = vmaxq_s32(vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(v[k + 1], id)), vdupq_n_s32(127)), vdupq_n_s32(-127));
      s = vaddq_s32(s, vaddq_s32(i0, i1));
      int16x8_t h = vcombine_s16(vmovn_s32(i0), vmovn_s32(i1));
      vst1_s8(q + 32 * b + 4 * k, vmovn_s16(h));
    }
    sums[b] = static_cast<int16_t>(vaddvq_s32(s));
  }
#else
  ref::quantize_q8_32(x, n, q, d, sums);
#endif
}

inline void quantize_q8_256(const float* x, int64_t n, int8_t* q, float* d, int16_t* sums) {
#if defined(LLMI_SIMD_AVX512)
  const __m512i lim = _mm512_set1_epi32(127), nlim = _mm512_set1_epi32(-127);
  for (int64_t b = 0; b < n / 256; b++) {
    const float* xb = x + 256 * b;
    __m512 m = _mm512_setzero_ps();
    for (int k = 0; k < 16; k++) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * k)));
    float amax = _mm512_reduce_max_ps(m);
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    d[b] = amax / 127.0f;
    __m512 vid = _mm512_set1_ps(id);
    for (int k = 0; k < 16; k++) {
      __m512i iv = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 16 * k), vid));
      iv = _mm512_max_epi32(_mm512_min_epi32(iv, lim), nlim);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 256 * b + 16 * k), _mm512_cvtepi32_epi8(iv));
      sums[16 * b + k] = static_cast<int16_t>(_mm512_reduce_add_epi32(iv));
    }
  }
#elif defined(LLMI_SIMD_AVX2) || defined(LLMI_SIMD_NEON)
  // the 32-blocks do the conversion; only the scale (one per 256) and the sums differ
  for (int64_t b = 0; b < n / 256; b++) {
    const float* xb = x + 256 * b;
    float amax = 0;
#if defined(LLMI_SIMD_AVX2)
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 32; k++) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(xb + 8 * k), absmask));
    amax = hmax_ps256(m);
#else
    float32x4_t m = vdupq_n_f32(0);
    for (int k = 0; k < 64; k++) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(xb + 4 * k)));
    amax = vmaxvq_f32(m);
#endif
    float id = amax > 0 ? 127.0f / amax : 0.0f;
    d[b] = amax / 127.0f;
    for (int i = 0; i < 256; i++) q[256 * b + i] = static_cast<int8_t>(std::clamp(ref::round_even(xb[i] * id), -127, 127));
    for (int g = 0; g < 16; g++) {
      int s = 0;
      for (int i = 0; i < 16; i++) s += q[256 * b + 16 * g + i];
      sums[16 * b + g] = static_cast<int16_t>(s);
    }
  }
#else
  ref::quantize_q8_256(x, n, q, d, sums);
#endif
}

// ---- dot products of one weight row with one quantized activation row ----

inline float dot_q8_0(const uint8_t* w, const ActQ8& a, int64_t n) {
  [[maybe_unused]] const int64_t nb = n / 32;
  [[maybe_unused]] constexpr int64_t bs = sizeof(ref::BlockQ8_0);
#if defined(LLMI_SIMD_AVX512)
  __m512 acc = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const uint8_t* p = w + b * bs;
    __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2))),
                                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + bs + 2)), 1);
    __m512i av = _mm512_loadu_si512(a.q + 32 * b);
    __m512 s = scale_pair_512(f16_scale(p) * a.d[b], f16_scale(p + bs) * a.d[b + 1]);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot_s8_512(wv, av)), s, acc);
  }
  float r = _mm512_reduce_add_ps(acc);
  for (; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    __m256i dv = dot_s8_256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2)),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b)));
    r += f16_scale(p) * a.d[b] * static_cast<float>(hsum_epi32_256(dv));
  }
  return r;
#elif defined(LLMI_SIMD_AVX2)
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    __m256i dv = dot_s8_256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2)),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dv), _mm256_set1_ps(f16_scale(p) * a.d[b]), acc);
  }
  return hsum_ps256(acc);
#elif defined(LLMI_SIMD_NEON)
  float acc = 0;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    int32x4_t s = neon_dot_s8(vdupq_n_s32(0), vld1q_s8(reinterpret_cast<const int8_t*>(p + 2)), vld1q_s8(a.q + 32 * b));
    s = neon_dot_s8(s, vld1q_s8(reinterpret_cast<const int8_t*>(p + 18)), vld1q_s8(a.q + 32 * b + 16));
    acc += f16_scale(p) * a.d[b] * static_cast<float>(vaddvq_s32(s));
  }
  return acc;
#else
  return ref::vec_dot_q8_0(w, a, n);
#endif
}

// Q4_0 and Q5_0 share the nibble layout; Q5_0 adds a fifth bit and a different offset.
template <bool kQ5>
inline float dot_q4_q5_0(const uint8_t* w, const ActQ8& a, int64_t n) {
  [[maybe_unused]] const int64_t nb = n / 32;
  [[maybe_unused]] constexpr int64_t bs = kQ5 ? sizeof(ref::BlockQ5_0) : sizeof(ref::BlockQ4_0);
  [[maybe_unused]] constexpr int qs_off = kQ5 ? 6 : 2;
  [[maybe_unused]] constexpr int offset = kQ5 ? 16 : 8;
#if defined(LLMI_SIMD_AVX2)
  auto values = [&](const uint8_t* p) {  // 32 signed values of one block
    __m256i v = q4_block_values(p + qs_off);
    if constexpr (kQ5) v = _mm256_or_si256(v, q5_high_bits(rd_u32(p + 2)));
    return _mm256_sub_epi8(v, _mm256_set1_epi8(offset));
  };
#if defined(LLMI_SIMD_AVX512)
  __m512 acc = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const uint8_t* p = w + b * bs;
    __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(values(p)), values(p + bs), 1);
    __m512 s = scale_pair_512(f16_scale(p) * a.d[b], f16_scale(p + bs) * a.d[b + 1]);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot_s8_512(wv, _mm512_loadu_si512(a.q + 32 * b))), s, acc);
  }
  float r = _mm512_reduce_add_ps(acc);
  for (; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    __m256i dv = dot_s8_256(values(p), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b)));
    r += f16_scale(p) * a.d[b] * static_cast<float>(hsum_epi32_256(dv));
  }
  return r;
#else
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    __m256i dv = dot_s8_256(values(p), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dv), _mm256_set1_ps(f16_scale(p) * a.d[b]), acc);
  }
  return hsum_ps256(acc);
#endif
#elif defined(LLMI_SIMD_NEON)
  float acc = 0;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    uint8x16_t v = vld1q_u8(p + qs_off);
    uint8x16_t lo = vandq_u8(v, vdupq_n_u8(15)), hi = vshrq_n_u8(v, 4);
    if constexpr (kQ5) {
      uint32_t qh = rd_u32(p + 2);
      lo = vorrq_u8(lo, neon_bits16(qh));
      hi = vorrq_u8(hi, neon_bits16(qh >> 16));
    }
    int8x16_t l = vsubq_s8(vreinterpretq_s8_u8(lo), vdupq_n_s8(offset));
    int8x16_t h = vsubq_s8(vreinterpretq_s8_u8(hi), vdupq_n_s8(offset));
    int32x4_t s = neon_dot_s8(neon_dot_s8(vdupq_n_s32(0), l, vld1q_s8(a.q + 32 * b)), h, vld1q_s8(a.q + 32 * b + 16));
    acc += f16_scale(p) * a.d[b] * static_cast<float>(vaddvq_s32(s));
  }
  return acc;
#else
  return kQ5 ? ref::vec_dot_q5_0(w, a, n) : ref::vec_dot_q4_0(w, a, n);
#endif
}
inline float dot_q4_0(const uint8_t* w, const ActQ8& a, int64_t n) { return dot_q4_q5_0<false>(w, a, n); }
inline float dot_q5_0(const uint8_t* w, const ActQ8& a, int64_t n) { return dot_q4_q5_0<true>(w, a, n); }

// Q4_K: the 8 six-bit scales and mins of a super-block as two 8-byte groups.
inline void q4k_unpack_scales(const uint8_t* s12, uint64_t* sc8, uint64_t* m8) {
  uint32_t s0 = rd_u32(s12), s1 = rd_u32(s12 + 4), s2 = rd_u32(s12 + 8);
  uint32_t sc_lo = s0 & 0x3F3F3F3Fu, m_lo = s1 & 0x3F3F3F3Fu;
  uint32_t sc_hi = (s2 & 0x0F0F0F0Fu) | (((s0 >> 6) & 0x03030303u) << 4);
  uint32_t m_hi = ((s2 >> 4) & 0x0F0F0F0Fu) | (((s1 >> 6) & 0x03030303u) << 4);
  *sc8 = sc_lo | static_cast<uint64_t>(sc_hi) << 32;
  *m8 = m_lo | static_cast<uint64_t>(m_hi) << 32;
}

inline float dot_q4_k(const uint8_t* w, const ActQ8& a, int64_t n) {
  [[maybe_unused]] const int64_t nb = n / ref::kQK_K;
  [[maybe_unused]] constexpr int64_t bs = sizeof(ref::BlockQ4_K);
#if defined(LLMI_SIMD_AVX512)
  const __m512i m4 = _mm512_set1_epi8(15);
  // scale vectors: int16 lanes 0..15 take sub-block scale k, lanes 16..31 take k + 1
  const __m512i sel0 = _mm512_set_epi64(0x0003000300030003, 0x0003000300030003, 0x0003000300030003, 0x0003000300030003,
                                        0x0002000200020002, 0x0002000200020002, 0x0002000200020002, 0x0002000200020002);
  __m512 acc = _mm512_setzero_ps();
  __m256 accm = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    uint64_t sc8, m8;
    q4k_unpack_scales(p + 4, &sc8, &m8);
    __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc8))));
    // mins: sum_j m_j * (sum of a over sub-block j), as 8 int32 lanes (one per sub-block)
    __m128i m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(m8)));
    __m256i mdup = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
    __m256i mins = _mm256_madd_epi16(mdup, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sums + 16 * b)));
    const int8_t* q8 = a.q + ref::kQK_K * b;
    __m512i isum = _mm512_setzero_si512();
    for (int c = 0; c < 2; c++) {  // 128 weights: bytes 64c..64c+63, sub-blocks 4c..4c+3
      __m512i v = _mm512_loadu_si512(p + 16 + 64 * c);
      __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      __m512i w0 = _mm512_shuffle_i64x2(lo, hi, 0x44);  // sub-blocks 4c, 4c+1
      __m512i w1 = _mm512_shuffle_i64x2(lo, hi, 0xEE);  // sub-blocks 4c+2, 4c+3
      __m512i s0 = _mm512_permutexvar_epi16(_mm512_add_epi16(sel0, _mm512_set1_epi16(static_cast<short>(4 * c - 2))), sc16);
      __m512i s1 = _mm512_permutexvar_epi16(_mm512_add_epi16(sel0, _mm512_set1_epi16(static_cast<short>(4 * c))), sc16);
      isum = dot_u8s8_scaled_512(isum, w0, _mm512_loadu_si512(q8 + 128 * c), s0);
      isum = dot_u8s8_scaled_512(isum, w1, _mm512_loadu_si512(q8 + 128 * c + 64), s1);
    }
    float dx = a.d[b];
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(f16_scale(p) * dx), acc);
    accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(f16_scale(p + 2) * dx), accm);
  }
  return _mm512_reduce_add_ps(acc) - hsum_ps256(accm);
#elif defined(LLMI_SIMD_AVX2)
  const __m256i m4 = _mm256_set1_epi8(15);
  __m256 acc = _mm256_setzero_ps();
  __m256 accm = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    uint64_t sc8, m8;
    q4k_unpack_scales(p + 4, &sc8, &m8);
    __m128i m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(m8)));
    __m256i mdup = _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16));
    __m256i mins = _mm256_madd_epi16(mdup, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sums + 16 * b)));
    const int8_t* q8 = a.q + ref::kQK_K * b;
    __m256i isum = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
      __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 + 32 * c));
      __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
      __m256i s_lo = _mm256_set1_epi16(static_cast<short>((sc8 >> (16 * c)) & 0xFF));
      __m256i s_hi = _mm256_set1_epi16(static_cast<short>((sc8 >> (16 * c + 8)) & 0xFF));
      __m256i p_lo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 64 * c)));
      __m256i p_hi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 64 * c + 32)));
      isum = _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_madd_epi16(p_lo, s_lo), _mm256_madd_epi16(p_hi, s_hi)));
    }
    float dx = a.d[b];
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(f16_scale(p) * dx), acc);
    accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(f16_scale(p + 2) * dx), accm);
  }
  return hsum_ps256(acc) - hsum_ps256(accm);
#elif defined(LLMI_SIMD_NEON)
  float acc = 0;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    const int8_t* q8 = a.q + ref::kQK_K * b;
    int sum_q = 0, sum_m = 0;
    for (int c = 0; c < 4; c++) {
      int sc_lo, m_lo, sc_hi, m_hi;
      ref::q4k_scale_min(p + 4, 2 * c, &sc_lo, &m_lo);
      ref::q4k_scale_min(p + 4, 2 * c + 1, &sc_hi, &m_hi);
      uint8x16_t v0 = vld1q_u8(p + 16 + 32 * c), v1 = vld1q_u8(p + 32 + 32 * c);
      int8x16_t l0 = vreinterpretq_s8_u8(vandq_u8(v0, vdupq_n_u8(15))), l1 = vreinterpretq_s8_u8(vandq_u8(v1, vdupq_n_u8(15)));
      int8x16_t h0 = vreinterpretq_s8_u8(vshrq_n_u8(v0, 4)), h1 = vreinterpretq_s8_u8(vshrq_n_u8(v1, 4));
      int32x4_t slo = neon_dot_s8(neon_dot_s8(vdupq_n_s32(0), l0, vld1q_s8(q8 + 64 * c)), l1, vld1q_s8(q8 + 64 * c + 16));
      int32x4_t shi = neon_dot_s8(neon_dot_s8(vdupq_n_s32(0), h0, vld1q_s8(q8 + 64 * c + 32)), h1, vld1q_s8(q8 + 64 * c + 48));
      sum_q += sc_lo * vaddvq_s32(slo) + sc_hi * vaddvq_s32(shi);
      sum_m += m_lo * (a.sums[16 * b + 4 * c] + a.sums[16 * b + 4 * c + 1]) +
               m_hi * (a.sums[16 * b + 4 * c + 2] + a.sums[16 * b + 4 * c + 3]);
    }
    float d = f16_scale(p) * a.d[b], dmin = f16_scale(p + 2) * a.d[b];
    acc += d * static_cast<float>(sum_q) - dmin * static_cast<float>(sum_m);
  }
  return acc;
#else
  return ref::vec_dot_q4_k(w, a, n);
#endif
}

inline float dot_q6_k(const uint8_t* w, const ActQ8& a, int64_t n) {
  [[maybe_unused]] const int64_t nb = n / ref::kQK_K;
  [[maybe_unused]] constexpr int64_t bs = sizeof(ref::BlockQ6_K);
#if defined(LLMI_SIMD_AVX512)
  const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
  // qh bits for weights 0..31 / 32..63 of a half: shift left by 4 / 2; for 64..95 / 96..127: by 0 / right 2
  const __m512i shl = _mm512_set_epi64(0x0002000200020002, 0x0002000200020002, 0x0002000200020002, 0x0002000200020002,
                                       0x0004000400040004, 0x0004000400040004, 0x0004000400040004, 0x0004000400040004);
  const __m512i shr = _mm512_set_epi64(0x0002000200020002, 0x0002000200020002, 0x0002000200020002, 0x0002000200020002, 0, 0, 0, 0);
  // int16 lane i of a 64-weight scale vector takes scale 4k + i / 8
  const __m512i sel = _mm512_set_epi64(0x0003000300030003, 0x0003000300030003, 0x0002000200020002, 0x0002000200020002,
                                       0x0001000100010001, 0x0001000100010001, 0, 0);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192)));
    __m512i sc512 = _mm512_castsi256_si512(sc);
    // the -32 offset: -32 * sum_j sc_j * (sum of a over sub-block j)
    __m256i off = _mm256_madd_epi16(sc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sums + 16 * b)));
    __m512i isum = _mm512_castsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5)));
    isum = _mm512_inserti64x4(isum, _mm256_setzero_si256(), 1);
    const int8_t* q8 = a.q + ref::kQK_K * b;
    for (int h = 0; h < 2; h++) {
      __m512i ql = _mm512_loadu_si512(p + 64 * h);
      __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h)));
      __m512i v0 = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m30));
      __m512i v1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), _mm512_and_si512(_mm512_srlv_epi16(qh, shr), m30));
      __m512i s0 = _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16(static_cast<short>(8 * h))), sc512);
      __m512i s1 = _mm512_permutexvar_epi16(_mm512_add_epi16(sel, _mm512_set1_epi16(static_cast<short>(8 * h + 4))), sc512);
      isum = dot_u8s8_scaled_512(isum, v0, _mm512_loadu_si512(q8 + 128 * h), s0);
      isum = dot_u8s8_scaled_512(isum, v1, _mm512_loadu_si512(q8 + 128 * h + 64), s1);
    }
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(f16_scale(p + 208) * a.d[b]), acc);
  }
  return _mm512_reduce_add_ps(acc);
#elif defined(LLMI_SIMD_AVX2)
  const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    const int8_t* scs = reinterpret_cast<const int8_t*>(p + 192);
    __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scs)));
    __m256i off = _mm256_madd_epi16(sc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sums + 16 * b)));
    __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5));
    const int8_t* q8 = a.q + ref::kQK_K * b;
    for (int h = 0; h < 2; h++) {
      __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * h));
      __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * h + 32));
      __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h));
      __m256i v[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)),
          _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m30)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)),
      };
      for (int k = 0; k < 4; k++) {
        int j = 8 * h + 2 * k;  // sub-blocks j, j + 1
        __m256i s = _mm256_set_m128i(_mm_set1_epi16(scs[j + 1]), _mm_set1_epi16(scs[j]));
        __m256i pr = _mm256_maddubs_epi16(v[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 128 * h + 32 * k)));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pr, s));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(f16_scale(p + 208) * a.d[b]), acc);
  }
  return hsum_ps256(acc);
#elif defined(LLMI_SIMD_NEON)
  float acc = 0;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    const int8_t* scs = reinterpret_cast<const int8_t*>(p + 192);
    const int8_t* q8 = a.q + ref::kQK_K * b;
    int sum = 0;
    for (int h = 0; h < 2; h++) {
      const uint8_t* ql = p + 64 * h;
      const uint8_t* qh = p + 128 + 32 * h;
      for (int l = 0; l < 32; l += 16) {
        uint8x16_t a0 = vld1q_u8(ql + l), a1 = vld1q_u8(ql + 32 + l), hb = vld1q_u8(qh + l);
        const uint8x16_t m4 = vdupq_n_u8(15), m30 = vdupq_n_u8(0x30);
        uint8x16_t v[4] = {
            vorrq_u8(vandq_u8(a0, m4), vandq_u8(vshlq_n_u8(hb, 4), m30)),
            vorrq_u8(vandq_u8(a1, m4), vandq_u8(vshlq_n_u8(hb, 2), m30)),
            vorrq_u8(vshrq_n_u8(a0, 4), vandq_u8(hb, m30)),
            vorrq_u8(vshrq_n_u8(a1, 4), vandq_u8(vshrq_n_u8(hb, 2), m30)),
        };
        for (int k = 0; k < 4; k++) {
          int e = 128 * h + 32 * k + l;  // first weight of these 16 (one sub-block)
          int8x16_t sv = vsubq_s8(vreinterpretq_s8_u8(v[k]), vdupq_n_s8(32));
          sum += scs[e / 16] * vaddvq_s32(neon_dot_s8(vdupq_n_s32(0), sv, vld1q_s8(q8 + e)));
        }
      }
    }
    acc += f16_scale(p + 208) * a.d[b] * static_cast<float>(sum);
  }
  return acc;
#else
  return ref::vec_dot_q6_k(w, a, n);
#endif
}

// ---- float weights times f32 activations ----

template <DType T>
inline float dot_float(const uint8_t* w, const float* x, int64_t n) {
#if defined(LLMI_SIMD_AVX512)
  auto load = [&](int64_t i) {
    if constexpr (T == DType::f32) return _mm512_loadu_ps(reinterpret_cast<const float*>(w) + i);
    else if constexpr (T == DType::f16) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * i)));
    else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * i))), 16));
  };
  __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int k = 0; k < 4; k++) acc[k] = _mm512_fmadd_ps(load(i + 16 * k), _mm512_loadu_ps(x + i + 16 * k), acc[k]);
  for (; i + 16 <= n; i += 16) acc[0] = _mm512_fmadd_ps(load(i), _mm512_loadu_ps(x + i), acc[0]);
  float r = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
#elif defined(LLMI_SIMD_AVX2)
  auto load = [&](int64_t i) {
    if constexpr (T == DType::f32) return _mm256_loadu_ps(reinterpret_cast<const float*>(w) + i);
    else if constexpr (T == DType::f16) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i)));
    else return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 2 * i))), 16));
  };
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; k++) acc[k] = _mm256_fmadd_ps(load(i + 8 * k), _mm256_loadu_ps(x + i + 8 * k), acc[k]);
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(load(i), _mm256_loadu_ps(x + i), acc[0]);
  float r = hsum_ps256(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
#elif defined(LLMI_SIMD_NEON)
  auto load = [&](int64_t i) {
    if constexpr (T == DType::f32) return vld1q_f32(reinterpret_cast<const float*>(w) + i);
    else if constexpr (T == DType::f16) return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(w + 2 * i))));
    else return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const uint16_t*>(w + 2 * i)), 16));
  };
  float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int k = 0; k < 4; k++) acc[k] = vfmaq_f32(acc[k], load(i + 4 * k), vld1q_f32(x + i + 4 * k));
  for (; i + 4 <= n; i += 4) acc[0] = vfmaq_f32(acc[0], load(i), vld1q_f32(x + i));
  float r = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
#else
  float r = 0;
  int64_t i = 0;
#endif
  // remaining elements (and the whole row on the scalar path), as the reference does
  if (i < n) {
    if constexpr (T == DType::f32) r += ref::vec_dot_f32(w + 4 * i, x + i, n - i);
    else if constexpr (T == DType::f16) r += ref::vec_dot_f16(w + 2 * i, x + i, n - i);
    else r += ref::vec_dot_bf16(w + 2 * i, x + i, n - i);
  }
  return r;
}

// Sums of x over MLX groups (shared by every row of a matmul): out[g] = sum of x[g*gs .. g*gs+gs-1].
inline void mlx_group_sums(const float* x, int64_t n, int gs, float* out) {
  for (int64_t g = 0; g < n / gs; g++) {
    float s = 0;
    for (int64_t i = g * gs; i < (g + 1) * gs; i++) s += x[i];
    out[g] = s;
  }
}

// MLX affine row `row` times f32 x: per group, scale * sum(q * x) + bias * sum(x) (xs: group sums).
inline float dot_mlx(const TensorView& w, int64_t row, const float* x, const float* xs) {
  const int bits = w.type == DType::mlx_q4 ? 4 : 8;
  const int64_t n = w.ne[0], gs = w.group_size, groups = n / gs;
  const uint8_t* q = w.data + static_cast<uint64_t>(row) * static_cast<uint64_t>(n * bits / 8);
  float acc = 0;
#if defined(LLMI_SIMD_AVX512)
  if (gs % 16 == 0) {
    __m512 vacc = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; g++) {
      __m512 gacc = _mm512_setzero_ps();
      for (int64_t i = g * gs; i < (g + 1) * gs; i += 16) {
        __m128i v;
        if (bits == 4) {
          __m128i b8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i / 2));
          __m128i lo = _mm_and_si128(b8, _mm_set1_epi8(15)), hi = _mm_and_si128(_mm_srli_epi16(b8, 4), _mm_set1_epi8(15));
          v = _mm_unpacklo_epi8(lo, hi);
        } else {
          v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i));
        }
        gacc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(v)), _mm512_loadu_ps(x + i), gacc);
      }
      vacc = _mm512_fmadd_ps(gacc, _mm512_set1_ps(ref::mlx_aux(w.scales, w.aux_type, row * groups + g)), vacc);
      acc += ref::mlx_aux(w.biases, w.aux_type, row * groups + g) * xs[g];
    }
    return acc + _mm512_reduce_add_ps(vacc);
  }
#elif defined(LLMI_SIMD_AVX2)
  if (gs % 16 == 0) {
    __m256 vacc = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; g++) {
      __m256 gacc = _mm256_setzero_ps();
      for (int64_t i = g * gs; i < (g + 1) * gs; i += 16) {
        __m128i v;
        if (bits == 4) {
          __m128i b8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i / 2));
          __m128i lo = _mm_and_si128(b8, _mm_set1_epi8(15)), hi = _mm_and_si128(_mm_srli_epi16(b8, 4), _mm_set1_epi8(15));
          v = _mm_unpacklo_epi8(lo, hi);
        } else {
          v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i));
        }
        gacc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)), _mm256_loadu_ps(x + i), gacc);
        gacc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8))), _mm256_loadu_ps(x + i + 8), gacc);
      }
      vacc = _mm256_fmadd_ps(gacc, _mm256_set1_ps(ref::mlx_aux(w.scales, w.aux_type, row * groups + g)), vacc);
      acc += ref::mlx_aux(w.biases, w.aux_type, row * groups + g) * xs[g];
    }
    return acc + hsum_ps256(vacc);
  }
#endif
  for (int64_t g = 0; g < groups; g++) {
    float sqx = 0;
    for (int64_t i = g * gs; i < (g + 1) * gs; i++) sqx += static_cast<float>(ref::mlx_value(q, bits, i)) * x[i];
    acc += ref::mlx_aux(w.scales, w.aux_type, row * groups + g) * sqx + ref::mlx_aux(w.biases, w.aux_type, row * groups + g) * xs[g];
  }
  return acc;
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
// Y is [n_tokens][ldy] f32 (ldy >= rows).
//
// How:
//  * The input is quantized once per matmul (or once for several matmuls sharing it, through
//    MatmulInput): q8_32 blocks for Q4_0/Q5_0/Q8_0 weights, q8_256 for Q4_K/Q6_K (21_simd).
//    Float and MLX weights use the f32 input.
//  * Few tokens (decode): a threaded matrix-vector product; tasks are chunks of rows, each row is
//    one dot product straight from the mapped weights (21_simd), for each token.
//  * Many tokens (prefill, AVX-512): a blocked matrix-matrix product. A task takes a block of rows
//    and a block of tokens, decodes the rows once into a panel (unsigned 8-bit values with their
//    scales, or f32 for float/MLX types) kept in cache, and runs a register-tiled micro-kernel
//    (kRM rows x kRN tokens) over it: vpmaddubsw + vpdpwssd for K-quants, vpdpbusd for the
//    32-blocks, f32 FMA for float types. Offsets (Q4_K mins, Q6_K's -32, Q4_0's -8, ...) are a
//    small float product of per-block weight factors and per-block activation sums added in
//    the same micro-kernel.
//  * Determinism: every output element is computed by one task with arithmetic that depends
//    only on (row, token, K), never on the thread count or which tile it fell in (ragged tiles
//    repeat a valid row/token and drop the result), so 1..N threads give the same bits.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// 64-byte aligned growable scratch (malloc based: no exceptions; false when out of memory).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { std::free(raw_); }
  bool reserve(size_t bytes) {
    if (bytes <= cap_) return true;
    std::free(raw_);
    raw_ = std::malloc(bytes + 64);
    if (!raw_) {
      ptr_ = nullptr;
      cap_ = 0;
      return false;
    }
    ptr_ = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(raw_) + 63) & ~static_cast<uintptr_t>(63));
    cap_ = bytes;
    return true;
  }
  template <class T>
  T* as(size_t byte_offset = 0) const {
    return reinterpret_cast<T*>(static_cast<uint8_t*>(ptr_) + byte_offset);
  }

 private:
  void* raw_ = nullptr;
  void* ptr_ = nullptr;
  size_t cap_ = 0;
};

inline size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

// Which form of the input a weight type multiplies with.
enum class ActForm : uint8_t { f32, q8_32, q8_256 };
inline ActForm act_form(DType t) {
  switch (t) {
    case DType::q4_0: case DType::q5_0: case DType::q8_0: return ActForm::q8_32;
    case DType::q4_K: case DType::q6_K: return ActForm::q8_256;
    default: return ActForm::f32;
  }
}

// The input X [n_tokens][n] of one or more matmuls. Each quantized form is made on first use
// and kept until reset(), so matrices that read the same input (attention q/k/v, FFN gate/up)
// share one quantization. Keep one per context and reset() it: its buffers are reused.
class MatmulInput {
 public:
  MatmulInput() = default;
  MatmulInput(const float* x, int64_t n_tokens, int64_t n) { reset(x, n_tokens, n); }
  void reset(const float* x, int64_t n_tokens, int64_t n) {
    x_ = x;
    n_tokens_ = n_tokens;
    n_ = n;
    ready_[0] = ready_[1] = false;
    mlx_gs_ = 0;
  }
  const float* x() const { return x_; }
  int64_t n_tokens() const { return n_tokens_; }
  int64_t n() const { return n_; }

  // Quantizes X into `f` (q8_32 or q8_256) unless done already; false when out of memory.
  bool prepare(ActForm f, ThreadPool& pool) {
    if (f == ActForm::f32) return true;
    Form& F = form(f);
    if (ready_[f == ActForm::q8_256]) return true;
    const int64_t blk = f == ActForm::q8_32 ? 32 : 256, sum_len = f == ActForm::q8_32 ? 32 : 16;
    F.q_stride = round_up(static_cast<size_t>(n_), 64);
    F.nd = static_cast<size_t>(n_ / blk);
    F.ns = static_cast<size_t>(n_ / sum_len);
    F.nc = static_cast<size_t>(n_ / 32);
    const size_t T = static_cast<size_t>(n_tokens_);
    // per token (each part 64-byte aligned): q [q_stride] int8 | d [nd] f32 | sums [ns] int16 |
    // corr16 [ns] f32 | corr32 [nc] f32
    F.off_d = F.q_stride;
    F.off_s = F.off_d + round_up(4 * F.nd, 64);
    F.off_c16 = F.off_s + round_up(2 * F.ns, 64);
    F.off_c32 = F.off_c16 + round_up(4 * F.ns, 64);
    F.row_bytes = F.off_c32 + round_up(4 * F.nc, 64);
    if (!F.buf.reserve(F.row_bytes * T)) return false;
    auto one = [&](int64_t t) {
      const float* xt = x_ + t * n_;
      ActQ8 a = row(f, t);
      int8_t* q = const_cast<int8_t*>(a.q);
      float* d = const_cast<float*>(a.d);
      int16_t* s = const_cast<int16_t*>(a.sums);
      if (f == ActForm::q8_32) quantize_q8_32(xt, n_, q, d, s);
      else quantize_q8_256(xt, n_, q, d, s);
      // activation factors of the offset corrections: d * (sum of q) per 16 (q8_256) and per 32
      float* c16 = corr(f, t, 16);
      float* c32 = corr(f, t, 32);
      if (f == ActForm::q8_256) {
        for (size_t g = 0; g < F.ns; g++) c16[g] = d[g / 16] * static_cast<float>(s[g]);
        for (size_t g = 0; g < F.nc; g++) c32[g] = d[g / 8] * static_cast<float>(s[2 * g] + s[2 * g + 1]);
      } else {
        for (size_t g = 0; g < F.nc; g++) c32[g] = d[g] * static_cast<float>(s[g]);
      }
    };
    if (n_tokens_ * n_ >= 16384 && n_tokens_ > 1) pool.parallel_for(static_cast<int>(n_tokens_), [&](int t, int) { one(t); });
    else for (int64_t t = 0; t < n_tokens_; t++) one(t);
    ready_[f == ActForm::q8_256] = true;
    return true;
  }

  // Row t of a prepared form.
  ActQ8 row(ActForm f, int64_t t) const {
    const Form& F = form(f);
    const uint8_t* base = F.buf.as<uint8_t>(F.row_bytes * static_cast<size_t>(t));
    ActQ8 a;
    a.q = reinterpret_cast<const int8_t*>(base);
    a.d = reinterpret_cast<const float*>(base + F.off_d);
    a.sums = reinterpret_cast<const int16_t*>(base + F.off_s);
    return a;
  }
  // Per-token activation factors d * (sum of q) over groups of 16 or 32 (offset corrections).
  float* corr(ActForm f, int64_t t, int group) const {
    const Form& F = form(f);
    return F.buf.as<float>(F.row_bytes * static_cast<size_t>(t) + (group == 16 ? F.off_c16 : F.off_c32));
  }

  // Sums of X over groups of `gs` (MLX biases), made once per group size.
  bool prepare_mlx(int gs) {
    if (mlx_gs_ == gs) return true;
    size_t groups = static_cast<size_t>(n_ / gs);
    if (!mlx_.reserve(4 * groups * static_cast<size_t>(n_tokens_) + 64)) return false;
    mlx_gs_ = gs;
    for (int64_t t = 0; t < n_tokens_; t++) mlx_group_sums(x_ + t * n_, n_, gs, mlx_sums(t));
    return true;
  }
  float* mlx_sums(int64_t t) const { return mlx_.as<float>(4 * static_cast<size_t>(t) * static_cast<size_t>(n_ / std::max(1, mlx_gs_))); }

 private:
  struct Form {
    AlignedBuffer buf;
    size_t q_stride = 0, nd = 0, ns = 0, nc = 0, row_bytes = 0;
    size_t off_d = 0, off_s = 0, off_c16 = 0, off_c32 = 0;
  };
  Form& form(ActForm f) { return forms_[f == ActForm::q8_256]; }
  const Form& form(ActForm f) const { return forms_[f == ActForm::q8_256]; }

  const float* x_ = nullptr;
  int64_t n_tokens_ = 0, n_ = 0;
  Form forms_[2];
  bool ready_[2] = {false, false};
  AlignedBuffer mlx_;
  int mlx_gs_ = 0;
};

// ---- matrix-vector products (few tokens) ----

// The dot product of row r with token t, for one weight type (the switch is outside the loops).
template <class F>
inline void for_weight_type(const TensorView& w, const MatmulInput& in, F&& body) {
  const uint64_t rb = weight_row_bytes(w);
  const int64_t n = w.ne[0];
  const uint8_t* base = w.data;
  auto q8 = [&](auto dot, ActForm f) {
    body([&, dot, f](int64_t r, int64_t t) { return dot(base + static_cast<uint64_t>(r) * rb, in.row(f, t), n); });
  };
  auto fl = [&](auto dot) {
    body([&, dot](int64_t r, int64_t t) { return dot(base + static_cast<uint64_t>(r) * rb, in.x() + t * n, n); });
  };
  switch (w.type) {
    // (lambdas, not function pointers, so that the dot product inlines into the row loop)
    case DType::q4_0: q8([](const uint8_t* p, const ActQ8& a, int64_t k) { return dot_q4_0(p, a, k); }, ActForm::q8_32); break;
    case DType::q5_0: q8([](const uint8_t* p, const ActQ8& a, int64_t k) { return dot_q5_0(p, a, k); }, ActForm::q8_32); break;
    case DType::q8_0: q8([](const uint8_t* p, const ActQ8& a, int64_t k) { return dot_q8_0(p, a, k); }, ActForm::q8_32); break;
    case DType::q4_K: q8([](const uint8_t* p, const ActQ8& a, int64_t k) { return dot_q4_k(p, a, k); }, ActForm::q8_256); break;
    case DType::q6_K: q8([](const uint8_t* p, const ActQ8& a, int64_t k) { return dot_q6_k(p, a, k); }, ActForm::q8_256); break;
    case DType::f32: fl([](const uint8_t* p, const float* x, int64_t k) { return dot_float<DType::f32>(p, x, k); }); break;
    case DType::f16: fl([](const uint8_t* p, const float* x, int64_t k) { return dot_float<DType::f16>(p, x, k); }); break;
    case DType::bf16: fl([](const uint8_t* p, const float* x, int64_t k) { return dot_float<DType::bf16>(p, x, k); }); break;
    case DType::mlx_q4: case DType::mlx_q8:
      body([&](int64_t r, int64_t t) { return dot_mlx(w, r, in.x() + t * n, in.mlx_sums(t)); });
      break;
    default: LLMI_ASSERT(!"matmul: weight type not computable"); break;
  }
}

inline void gemv(const TensorView& w, const MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool) {
  const int64_t rows = w.rows(), T = in.n_tokens();
  const uint64_t rb = std::max<uint64_t>(1, weight_row_bytes(w));
  // chunks: ~16 per thread for balance, but at least ~16 KiB of weights each
  int64_t chunk = std::max<int64_t>(rows / (16 * static_cast<int64_t>(pool.size())), static_cast<int64_t>(16384 / rb));
  chunk = std::clamp<int64_t>(chunk, 1, std::max<int64_t>(1, rows));
  const int n_tasks = static_cast<int>((rows + chunk - 1) / chunk);
  for_weight_type(w, in, [&](auto dot) {
    pool.parallel_for(n_tasks, [&](int task, int) {
      const int64_t r0 = task * chunk, r1 = std::min(rows, r0 + chunk);
      for (int64_t t = 0; t < T; t++) {
        float* yt = y + t * ldy;
        for (int64_t r = r0; r < r1; r++) yt[r] = dot(r, t);
      }
    });
  });
}

// ---- blocked matrix-matrix product (AVX-512) ----
#if defined(LLMI_SIMD_AVX512)
constexpr int kRM = 2;    // micro-tile rows (weights)
constexpr int kRN = 4;    // micro-tile columns (tokens)
constexpr int kRB = 32;   // rows per task (panel)
constexpr int kTB = 128;  // tokens per task

// A panel: kRB rows of W decoded for the micro-kernels.
//  K-quants: vals [rows][K] u8 (Q4_K 0..15, Q6_K 0..63), sc [rows][K/16] int16 (a scale per 16
//            values; Q4_K's 32-value scales twice), d [rows][K/256] f32, corr [rows][K/cg] f32.
//  32-blocks: vals [rows][K] u8 (Q4_0 0..15, Q5_0 0..31, Q8_0 q+128), d [rows][K/32] f32,
//            corr [rows][K/32] f32 = -offset * d.
//  float:    f [rows][K] f32.
// The corrections: row factor corr * token factor (d * sum of q) over groups of cg values gives
// the offset term (Q4_K: -dmin*m_j with cg 32; Q6_K: -32*d*sc_j with cg 16; 32-blocks: cg 32).
struct Panel {
  int64_t K = 0, rows = 0;
  uint8_t* vals = nullptr;
  int16_t* sc = nullptr;
  float* d = nullptr;
  float* corr = nullptr;
  float* f = nullptr;
  int cg = 32;
};

inline bool gemm_supported(DType t) {
  switch (t) {
    case DType::q4_0: case DType::q5_0: case DType::q8_0: case DType::q4_K: case DType::q6_K:
    case DType::f32: case DType::f16: case DType::bf16: case DType::mlx_q4: case DType::mlx_q8:
      return true;
    default: return false;
  }
}

// Decodes rows [r0, r0 + nr) of w into P (buffer `buf`).
inline bool panel_decode(const TensorView& w, int64_t r0, int64_t nr, AlignedBuffer& buf, Panel& P) {
  const int64_t K = w.ne[0];
  const uint64_t rb = weight_row_bytes(w);
  P.K = K;
  P.rows = nr;
  const size_t n = static_cast<size_t>(nr), k = static_cast<size_t>(K);
  ActForm f = act_form(w.type);
  if (f == ActForm::f32) {
    if (!buf.reserve(n * k * 4)) return false;
    P.f = buf.as<float>();
    for (int64_t i = 0; i < nr; i++) dequant_row(w, r0 + i, P.f + static_cast<size_t>(i) * k);
    return true;
  }
  const bool kq = f == ActForm::q8_256;
  P.cg = w.type == DType::q6_K ? 16 : 32;
  const size_t vals = round_up(n * k, 64), sc = kq ? round_up(n * k / 16 * 2, 64) : 0;
  const size_t dn = round_up(n * k / (kq ? 256 : 32) * 4, 64), cn = round_up(n * k / static_cast<size_t>(P.cg) * 4, 64);
  if (!buf.reserve(vals + sc + dn + cn)) return false;
  P.vals = buf.as<uint8_t>();
  P.sc = buf.as<int16_t>(vals);
  P.d = buf.as<float>(vals + sc);
  P.corr = buf.as<float>(vals + sc + dn);
  const __m256i m4 = _mm256_set1_epi8(15);
  for (int64_t i = 0; i < nr; i++) {
    const uint8_t* src = w.data + static_cast<uint64_t>(r0 + i) * rb;
    uint8_t* v = P.vals + static_cast<size_t>(i) * k;
    switch (w.type) {
      case DType::q4_K: {
        int16_t* sc16 = P.sc + static_cast<size_t>(i) * k / 16;
        float* d = P.d + static_cast<size_t>(i) * k / 256;
        float* c = P.corr + static_cast<size_t>(i) * k / 32;
        for (int64_t b = 0; b < K / 256; b++) {
          const uint8_t* blk = src + 144 * b;
          uint64_t sc8, m8;
          q4k_unpack_scales(blk + 4, &sc8, &m8);
          float dmin = f16_scale(blk + 2);
          d[b] = f16_scale(blk);
          for (int j = 0; j < 8; j++) {
            sc16[16 * b + 2 * j] = sc16[16 * b + 2 * j + 1] = static_cast<int16_t>((sc8 >> (8 * j)) & 0xFF);
            c[8 * b + j] = -dmin * static_cast<float>((m8 >> (8 * j)) & 0xFF);
          }
          for (int ch = 0; ch < 4; ch++) {
            __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * ch));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + 256 * b + 64 * ch), _mm256_and_si256(q, m4));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + 256 * b + 64 * ch + 32), nibbles_hi256(q));
          }
        }
        break;
      }
      case DType::q6_K: {
        int16_t* sc16 = P.sc + static_cast<size_t>(i) * k / 16;
        float* d = P.d + static_cast<size_t>(i) * k / 256;
        float* c = P.corr + static_cast<size_t>(i) * k / 16;
        const __m256i m30 = _mm256_set1_epi8(0x30);
        for (int64_t b = 0; b < K / 256; b++) {
          const uint8_t* blk = src + 210 * b;
          float db = f16_scale(blk + 208);
          d[b] = db;
          for (int j = 0; j < 16; j++) {
            int8_t s = static_cast<int8_t>(blk[192 + j]);
            sc16[16 * b + j] = s;
            c[16 * b + j] = -32.0f * db * static_cast<float>(s);
          }
          for (int h = 0; h < 2; h++) {
            __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h));
            __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
            uint8_t* o = v + 256 * b + 128 * h;
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 32), _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64), _mm256_or_si256(nibbles_hi256(ql0), _mm256_and_si256(qh, m30)));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 96), _mm256_or_si256(nibbles_hi256(ql1), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)));
          }
        }
        break;
      }
      default: {  // 32-blocks
        float* d = P.d + static_cast<size_t>(i) * k / 32;
        float* c = P.corr + static_cast<size_t>(i) * k / 32;
        for (int64_t b = 0; b < K / 32; b++) {
          __m256i q;
          float off;
          const uint8_t* blk;
          if (w.type == DType::q8_0) {
            blk = src + 34 * b;
            q = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)), _mm256_set1_epi8(static_cast<char>(0x80)));
            off = 128;
          } else if (w.type == DType::q4_0) {
            blk = src + 18 * b;
            q = q4_block_values(blk + 2);
            off = 8;
          } else {
            blk = src + 22 * b;
            q = _mm256_or_si256(q4_block_values(blk + 6), q5_high_bits(rd_u32(blk + 2)));
            off = 16;
          }
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + 32 * b), q);
          d[b] = f16_scale(blk);
          c[b] = -off * d[b];
        }
        break;
      }
    }
  }
  return true;
}

// Horizontal sums of the accumulators into out (row-major kRM x kRN).
template <int RM, int RN>
inline void store_tile(const __m512 (&acc)[RM][RN], float (&out)[RM][RN]) {
  for (int i = 0; i < RM; i++)
    for (int j = 0; j < RN; j++) out[i][j] = _mm512_reduce_add_ps(acc[i][j]);
}

// Adds the offset corrections: acc[i][j] += corr_i . act_j over m values.
template <int RM, int RN>
inline void add_corrections(__m512 (&acc)[RM][RN], const float* const (&ci)[RM], const float* const (&aj)[RN], int64_t m) {
  for (int64_t k = 0; k < m; k += 16) {
    __mmask16 mask = m - k >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (m - k)) - 1);
    __m512 a[RN];
#pragma GCC unroll 8
    for (int j = 0; j < RN; j++) a[j] = _mm512_maskz_loadu_ps(mask, aj[j] + k);
#pragma GCC unroll 8
    for (int i = 0; i < RM; i++) {
      __m512 c = _mm512_maskz_loadu_ps(mask, ci[i] + k);
#pragma GCC unroll 8
      for (int j = 0; j < RN; j++) acc[i][j] = _mm512_fmadd_ps(c, a[j], acc[i][j]);
    }
  }
}

// K-quant micro-kernel: rows pi[0..RM) of the panel times tokens tj[0..RN).
inline void micro_kq(const Panel& P, const int64_t (&pi)[kRM], const MatmulInput& in, const int64_t (&tj)[kRN], float (&out)[kRM][kRN]) {
  const int64_t K = P.K, nsb = K / 256;
  const uint8_t* wv[kRM];
  const int16_t* ws[kRM];
  const float* wd[kRM];
  const float* wc[kRM];
  for (int i = 0; i < kRM; i++) {
    wv[i] = P.vals + pi[i] * K;
    ws[i] = P.sc + pi[i] * K / 16;
    wd[i] = P.d + pi[i] * K / 256;
    wc[i] = P.corr + pi[i] * K / P.cg;
  }
  const int8_t* aq[kRN];
  const float* ad[kRN];
  const float* ac[kRN];
  for (int j = 0; j < kRN; j++) {
    ActQ8 a = in.row(ActForm::q8_256, tj[j]);
    aq[j] = a.q;
    ad[j] = a.d;
    ac[j] = in.corr(ActForm::q8_256, tj[j], P.cg);
  }
  // int16 lane l of the scale vector for values 64c..64c+63 takes scale 4c + l / 8
  const __m512i sel = _mm512_set_epi64(0x0003000300030003, 0x0003000300030003, 0x0002000200020002, 0x0002000200020002,
                                       0x0001000100010001, 0x0001000100010001, 0, 0);
  __m512 accf[kRM][kRN];
  for (int i = 0; i < kRM; i++)
    for (int j = 0; j < kRN; j++) accf[i][j] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; s++) {
    __m512i acc[kRM][kRN];
    __m512i scv[kRM];
#pragma GCC unroll 8
    for (int i = 0; i < kRM; i++) {
      scv[i] = _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ws[i] + 16 * s)));
#pragma GCC unroll 8
      for (int j = 0; j < kRN; j++) acc[i][j] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
      __m512i w[kRM], sv[kRM];
      const __m512i idx = _mm512_add_epi16(sel, _mm512_set1_epi16(static_cast<short>(4 * c)));
#pragma GCC unroll 8
      for (int i = 0; i < kRM; i++) {
        w[i] = _mm512_loadu_si512(wv[i] + 256 * s + 64 * c);
        sv[i] = _mm512_permutexvar_epi16(idx, scv[i]);
      }
#pragma GCC unroll 8
      for (int j = 0; j < kRN; j++) {
        __m512i a = _mm512_loadu_si512(aq[j] + 256 * s + 64 * c);
#pragma GCC unroll 8
        for (int i = 0; i < kRM; i++) acc[i][j] = dot_u8s8_scaled_512(acc[i][j], w[i], a, sv[i]);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < kRM; i++)
#pragma GCC unroll 8
      for (int j = 0; j < kRN; j++)
        accf[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i][j]), _mm512_set1_ps(wd[i][s] * ad[j][s]), accf[i][j]);
  }
  add_corrections(accf, wc, ac, K / P.cg);
  store_tile(accf, out);
}

// 32-block micro-kernel (Q4_0, Q5_0, Q8_0).
inline void micro_q32(const Panel& P, const int64_t (&pi)[kRM], const MatmulInput& in, const int64_t (&tj)[kRN], float (&out)[kRM][kRN]) {
  const int64_t K = P.K, nb = K / 32;
  const uint8_t* wv[kRM];
  const float* wd[kRM];
  const float* wc[kRM];
  for (int i = 0; i < kRM; i++) {
    wv[i] = P.vals + pi[i] * K;
    wd[i] = P.d + pi[i] * nb;
    wc[i] = P.corr + pi[i] * nb;
  }
  const int8_t* aq[kRN];
  const float* ad[kRN];
  const float* ac[kRN];
  for (int j = 0; j < kRN; j++) {
    ActQ8 a = in.row(ActForm::q8_32, tj[j]);
    aq[j] = a.q;
    ad[j] = a.d;
    ac[j] = in.corr(ActForm::q8_32, tj[j], 32);
  }
  // lanes 0..7 take the scale of the first block, 8..15 the second
  const __m512i two = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  __m512 accf[kRM][kRN];
  for (int i = 0; i < kRM; i++)
    for (int j = 0; j < kRN; j++) accf[i][j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b += 2) {
    const bool pair = b + 1 < nb;
    const __mmask64 m = pair ? ~static_cast<__mmask64>(0) : static_cast<__mmask64>(0xFFFFFFFFull);
    const __mmask8 m2 = pair ? 3 : 1;
    __m512i w[kRM];
    __m512 dw[kRM];
#pragma GCC unroll 8
    for (int i = 0; i < kRM; i++) {
      w[i] = _mm512_maskz_loadu_epi8(m, wv[i] + 32 * b);
      dw[i] = _mm512_permutexvar_ps(two, _mm512_castps128_ps512(_mm_maskz_loadu_ps(m2, wd[i] + b)));
    }
#pragma GCC unroll 8
    for (int j = 0; j < kRN; j++) {
      __m512i a = _mm512_maskz_loadu_epi8(m, aq[j] + 32 * b);
      __m512 dx = _mm512_permutexvar_ps(two, _mm512_castps128_ps512(_mm_maskz_loadu_ps(m2, ad[j] + b)));
#pragma GCC unroll 8
      for (int i = 0; i < kRM; i++) {
#if defined(LLMI_SIMD_VNNI)
        __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[i], a);
#else
        // unsigned values up to 255 (Q8_0 + 128) would saturate vpmaddubsw: split into nibbles
        __m512i lo = _mm512_and_si512(w[i], _mm512_set1_epi8(15)), hi = _mm512_and_si512(_mm512_srli_epi16(w[i], 4), _mm512_set1_epi8(15));
        __m512i p = _mm512_add_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(lo, a), _mm512_set1_epi16(1)),
                                     _mm512_madd_epi16(_mm512_maddubs_epi16(hi, a), _mm512_set1_epi16(16)));
#endif
        accf[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw[i], dx), accf[i][j]);
      }
    }
  }
  add_corrections(accf, wc, ac, nb);
  store_tile(accf, out);
}

// Float micro-kernel (f32 panel of f32/f16/bf16/MLX weights times f32 X).
inline void micro_f32(const Panel& P, const int64_t (&pi)[kRM], const MatmulInput& in, const int64_t (&tj)[kRN], float (&out)[kRM][kRN]) {
  const int64_t K = P.K;
  const float* wr[kRM];
  const float* xr[kRN];
  for (int i = 0; i < kRM; i++) wr[i] = P.f + pi[i] * K;
  for (int j = 0; j < kRN; j++) xr[j] = in.x() + tj[j] * K;
  __m512 acc[kRM][kRN];
  for (int i = 0; i < kRM; i++)
    for (int j = 0; j < kRN; j++) acc[i][j] = _mm512_setzero_ps();
  add_corrections(acc, wr, xr, K);  // the same dot-product loop
  store_tile(acc, out);
}

inline void gemm(const TensorView& w, const MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool) {
  const int64_t rows = w.rows(), T = in.n_tokens();
  const int64_t n_rb = (rows + kRB - 1) / kRB, n_tb = (T + kTB - 1) / kTB;
  const ActForm f = act_form(w.type);
  auto micro = f == ActForm::q8_256 ? micro_kq : f == ActForm::q8_32 ? micro_q32 : micro_f32;
  pool.parallel_for(static_cast<int>(n_rb * n_tb), [&](int task, int) {
    static thread_local AlignedBuffer buf;
    const int64_t rblk = task % n_rb, tblk = task / n_rb;
    const int64_t r0 = rblk * kRB, nr = std::min<int64_t>(kRB, rows - r0);
    const int64_t t0 = tblk * kTB, nt = std::min<int64_t>(kTB, T - t0);
    Panel P;
    LLMI_ASSERT(panel_decode(w, r0, nr, buf, P));
    for (int64_t j0 = 0; j0 < nt; j0 += kRN) {
      int64_t tj[kRN];
      for (int j = 0; j < kRN; j++) tj[j] = t0 + std::min<int64_t>(j0 + j, nt - 1);
      for (int64_t i0 = 0; i0 < nr; i0 += kRM) {
        int64_t pi[kRM];
        for (int i = 0; i < kRM; i++) pi[i] = std::min<int64_t>(i0 + i, nr - 1);
        float out[kRM][kRN];
        micro(P, pi, in, tj, out);
        for (int j = 0; j < kRN && j0 + j < nt; j++)
          for (int i = 0; i < kRM && i0 + i < nr; i++) y[(t0 + j0 + j) * ldy + r0 + i0 + i] = out[i][j];
      }
    }
  });
}
#endif  // LLMI_SIMD_AVX512

// Smallest token count that takes the matrix-matrix path (fixed: it must not depend on threads).
constexpr int64_t kGemmMinTokens = 4;

// Y = X W^T for an input shared by several matmuls.
inline void matmul(const TensorView& w, MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool) {
  LLMI_ASSERT(in.n() == w.ne[0]);
  if (in.n_tokens() <= 0 || w.rows() <= 0) return;
  ActForm f = act_form(w.type);
  LLMI_ASSERT(in.prepare(f, pool));
  if (w.type == DType::mlx_q4 || w.type == DType::mlx_q8) LLMI_ASSERT(in.prepare_mlx(w.group_size));
#if defined(LLMI_SIMD_AVX512)
  if (in.n_tokens() >= kGemmMinTokens && gemm_supported(w.type)) {
    gemm(w, in, y, ldy, pool);
    return;
  }
#endif
  gemv(w, in, y, ldy, pool);
}

// Y[t][r] = sum_k W[r][k] * X[t][k]; X is [n_tokens][ne0(W)] f32, Y is [n_tokens][ldy] f32.
inline void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t ldy, ThreadPool& pool) {
  static thread_local MatmulInput in;
  in.reset(x, n_tokens, w.ne[0]);
  matmul(w, in, y, ldy, pool);
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/40_archdef.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Architecture definitions: sha256, the text format, parser and validator ====
// An architecture is data: a short text (grammar in the manual at the top of this header) that
// lists fused operations in `prologue` / `block` / `epilogue` sections. This part parses and
// validates a text without looking at any model (unknown ops, argument counts, registers used
// before assignment, sections). Binding it to a model's tensors happens in the forward-pass part
// (compile), once at load, so the hot path does no string work.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// ---- sha256 (FIPS 180-4), for the status report of which definition ran ----
class Sha256 {
 public:
  Sha256() { reset(); }
  void reset() {
    static const uint32_t init[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    std::memcpy(h_, init, sizeof h_);
    len_ = 0;
    fill_ = 0;
  }
  void update(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    len_ += n;
    while (n > 0) {
      size_t take = std::min(n, sizeof buf_ - fill_);
      std::memcpy(buf_ + fill_, p, take);
      fill_ += take;
      p += take;
      n -= take;
      if (fill_ == sizeof buf_) {
        block(buf_);
        fill_ = 0;
      }
    }
  }
  std::string hex() {
    uint64_t bits = len_ * 8;
    uint8_t pad = 0x80;
    update(&pad, 1);
    uint8_t zero = 0;
    while (fill_ != 56) update(&zero, 1);
    uint8_t lenb[8];
    for (int k = 0; k < 8; k++) lenb[k] = static_cast<uint8_t>(bits >> (56 - 8 * k));
    update(lenb, 8);
    std::string out;
    for (uint32_t v : h_) out += strf("%08x", v);
    reset();
    return out;
  }

 private:
  static uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
  void block(const uint8_t* p) {
    static const uint32_t k[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
    uint32_t w[64];
    for (int t = 0; t < 16; t++)
      w[t] = (uint32_t(p[4 * t]) << 24) | (uint32_t(p[4 * t + 1]) << 16) | (uint32_t(p[4 * t + 2]) << 8) | p[4 * t + 3];
    for (int t = 16; t < 64; t++) {
      uint32_t s0 = rotr(w[t - 15], 7) ^ rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      uint32_t s1 = rotr(w[t - 2], 17) ^ rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3], e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int t = 0; t < 64; t++) {
      uint32_t s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      uint32_t ch = (e & f) ^ (~e & g);
      uint32_t t1 = h + s1 + ch + k[t] + w[t];
      uint32_t s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = s0 + maj;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a; h_[1] += b; h_[2] += c; h_[3] += d;
    h_[4] += e; h_[5] += f; h_[6] += g; h_[7] += h;
  }
  uint32_t h_[8];
  uint8_t buf_[64];
  uint64_t len_ = 0;
  size_t fill_ = 0;
};

inline std::string sha256_hex(std::string_view s) {
  Sha256 h;
  h.update(s.data(), s.size());
  return h.hex();
}

// ---- "did you mean" ----
// Edit distance with adjacent transpositions ("bsae" -> "base" is 1), capped (names are short).
inline size_t edit_distance(std::string_view a, std::string_view b) {
  if (a.size() > 64 || b.size() > 64) return 1000;
  size_t d[65][65];
  for (size_t i = 0; i <= a.size(); i++) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); j++) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); i++)
    for (size_t j = 1; j <= b.size(); j++) {
      size_t v = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) v = std::min(v, d[i - 2][j - 2] + 1);
      d[i][j] = v;
    }
  return d[a.size()][b.size()];
}

// " — did you mean 'x'?" for the closest candidate when it is close enough, else "".
inline std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  size_t best = SIZE_MAX;
  const std::string* pick = nullptr;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best) {
      best = d;
      pick = &c;
    }
  }
  size_t limit = std::max<size_t>(1, std::min(word.size(), pick ? pick->size() : 0) / 3);
  if (!pick || best > limit) return std::string();
  return " \xE2\x80\x94 did you mean '" + *pick + "'?";
}

// ---- the operations (a closed set; see the manual for what each computes) ----
enum class OpCode : uint8_t {
  embed, rms_norm, norm_heads, matmul, add_bias, rope, attention,
  silu, gelu, gelu_tanh, relu, mul, add, scale, softcap, copy, last,
};

// Argument kinds in signatures: 'r' register, 't' tensor (alternatives with |, optionally | none),
// 'v' value (number, named value, sqrt(..), rsqrt(..)), 'l' rope layout word (pairs / neox).
struct OpKwarg {
  const char* name;
  char kind;
};

struct OpSpec {
  const char* name;
  OpCode code;
  const char* sig;         // positional argument kinds
  OpKwarg kwargs[4];       // keyword arguments (name == nullptr ends the list)
  bool needs_dst;          // must be written `dst = op(...)` (the result has a new shape)
  bool may_have_dst;       // `dst = op(a, ...)` allowed (copy a, then apply); else in-place only
};

inline const std::vector<OpSpec>& op_specs() {
  static const std::vector<OpSpec> specs = {
      {"embed", OpCode::embed, "t", {}, true, true},
      {"rms_norm", OpCode::rms_norm, "rt", {{"eps", 'v'}}, false, true},
      {"norm_heads", OpCode::norm_heads, "rt", {{"eps", 'v'}}, false, true},
      {"matmul", OpCode::matmul, "rt", {}, true, true},
      {"add_bias", OpCode::add_bias, "rt", {}, false, true},
      {"rope", OpCode::rope, "rl", {{"factors", 't'}, {"base", 'v'}, {"base_swa", 'v'}, {"dims", 'v'}}, false, true},
      {"attention", OpCode::attention, "rrr", {{"window", 'v'}, {"period", 'v'}, {"scale", 'v'}, {"softcap", 'v'}},
       true, true},
      {"silu", OpCode::silu, "r", {}, false, true},
      {"gelu", OpCode::gelu, "r", {}, false, true},
      {"gelu_tanh", OpCode::gelu_tanh, "r", {}, false, true},
      {"relu", OpCode::relu, "r", {}, false, true},
      {"mul", OpCode::mul, "rr", {}, false, true},
      {"add", OpCode::add, "rr", {}, false, true},
      {"scale", OpCode::scale, "rv", {}, false, true},
      {"softcap", OpCode::softcap, "rv", {}, false, true},
      {"copy", OpCode::copy, "r", {}, true, true},
      {"last", OpCode::last, "r", {}, false, false},
  };
  return specs;
}

inline const OpSpec& op_spec(OpCode c) { return op_specs()[static_cast<size_t>(c)]; }

inline const OpSpec* find_op(std::string_view name) {
  for (const auto& s : op_specs())
    if (name == s.name) return &s;
  return nullptr;
}

// Values the definitions can name without a `param` line (from the model's hyperparameters).
inline const std::vector<std::string>& archdef_builtin_values() {
  static const std::vector<std::string> names = {"n_embd", "n_layer", "n_head", "n_head_kv", "head_dim",
                                                 "head_dim_v", "n_ff", "n_vocab", "n_ctx_train", "rms_eps",
                                                 "rope_base", "rope_dims"};
  return names;
}

// ---- the parsed form ----
enum class Section : uint8_t { none, prologue, block, epilogue };

inline const char* section_name(Section s) {
  switch (s) {
    case Section::prologue: return "prologue";
    case Section::block: return "block";
    case Section::epilogue: return "epilogue";
    default: return "(none)";
  }
}

// A number, a named value (param or hyperparameter), or sqrt()/rsqrt() of one.
struct ValueTerm {
  enum class Fn : uint8_t { id, sqrt, rsqrt } fn = Fn::id;
  bool is_number = false;
  double number = 0;
  std::string name;
};

// One alternative of a param: a metadata key ("{arch}.rope.freq_base_swa") or a term.
struct ParamAlt {
  bool is_meta = false;
  std::string key;
  ValueTerm term;
};

struct ParamDef {
  std::string name;
  std::vector<ParamAlt> alts;  // the first that exists wins
  int line = 0;
};

struct ArgDef {
  char kind = 'r';
  std::string word;                  // register name or layout word
  std::vector<std::string> tensors;  // tensor alternatives ({i} allowed in block)
  bool optional = false;             // `| none`: the step is skipped when no alternative exists
  ValueTerm value;
};

struct StmtDef {
  int line = 0;
  Section section = Section::none;
  const OpSpec* op = nullptr;
  std::string dst;                                   // "" for the in-place form
  std::vector<ArgDef> args;                          // positional, in signature order
  std::vector<std::pair<std::string, ArgDef>> kwargs;
  const ArgDef* kwarg(std::string_view name) const {
    for (const auto& kv : kwargs)
      if (kv.first == name) return &kv.second;
    return nullptr;
  }
  // The register the statement writes.
  const std::string& target() const { return dst.empty() ? args[0].word : dst; }
};

struct ArchDef {
  std::string name;    // `arch` line (= file name without .archdef)
  std::string kind;    // `kind` line ("decoder")
  std::string origin;  // "builtin" or the file's path
  std::string where;   // how messages name the text: the path, or "<builtin>/NAME.archdef"
  std::string text;    // exactly as read (the sha256 is of these bytes)
  std::string sha256;
  std::vector<ParamDef> params;
  std::vector<StmtDef> prologue, block, epilogue;
  int steps_per_layer() const { return static_cast<int>(block.size()); }
};

constexpr size_t kArchdefMaxBytes = 64 * 1024;
constexpr size_t kArchdefMaxLine = 1000;

// ---- parser ----
class ArchdefParser {
 public:
  ArchdefParser(std::string_view text, std::string where, std::string expected_name)
      : text_(text), where_(std::move(where)), expected_(std::move(expected_name)) {}

  Result<ArchDef> parse() {
    ArchDef d;
    d.where = where_;
    if (text_.size() > kArchdefMaxBytes)
      return fail(0, strf("the definition is %zu bytes; at most %zu are accepted", text_.size(), kArchdefMaxBytes));
    if (!utf8_valid(text_)) return fail(0, "the text is not valid UTF-8");
    int arch_line = 0, kind_line = 0;
    int section_line[4] = {0, 0, 0, 0};
    Section sec = Section::none;
    size_t pos = 0;
    int line_no = 0;
    while (pos <= text_.size()) {
      size_t eol = text_.find('\n', pos);
      if (eol == std::string_view::npos) eol = text_.size();
      std::string_view raw = text_.substr(pos, eol - pos);
      pos = eol + 1;
      line_no++;
      if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
      if (raw.size() > kArchdefMaxLine) return fail(line_no, strf("line is longer than %zu bytes", kArchdefMaxLine));
      for (char c : raw)
        if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7F)
          return fail(line_no, "control character in the text");
      if (size_t hash = raw.find('#'); hash != std::string_view::npos) raw = raw.substr(0, hash);
      line_ = line_no;
      // The first word of a statement names an operation: anything else (if, while, import, ...) is
      // an unknown operation, whatever follows it.
      if (std::string w = leading_op_word(raw); !w.empty() && !find_op(w) && !is_keyword(w)) return unknown_op(w);
      toks_.clear();
      if (auto r = lex(raw); !r) return r.error();
      if (toks_.empty()) {
        if (pos > text_.size()) break;
        continue;
      }
      i_ = 0;
      const Tok& t0 = toks_[0];
      if (t0.kind == Tok::word && (t0.text == "prologue" || t0.text == "block" || t0.text == "epilogue")) {
        size_t n = toks_.size();
        if (n == 2 && toks_[1].kind == Tok::punct && toks_[1].text == ":") n = 1;
        if (n != 1) return fail(line_no, "a section header stands alone on its line ('" + t0.text + "')");
        Section s = t0.text == "prologue" ? Section::prologue : t0.text == "block" ? Section::block : Section::epilogue;
        int& seen = section_line[static_cast<int>(s)];
        if (seen) return fail(line_no, strf("section '%s' appears twice (first at line %d)", t0.text.c_str(), seen));
        if (static_cast<int>(s) < static_cast<int>(sec))
          return fail(line_no, strf("section '%s' after '%s': the order is prologue, block, epilogue", t0.text.c_str(),
                                    section_name(sec)));
        seen = line_no;
        sec = s;
      } else if (t0.kind == Tok::word && t0.text == "arch") {
        if (arch_line) return fail(line_no, strf("a second 'arch' line (first at line %d)", arch_line));
        if (sec != Section::none) return fail(line_no, "'arch' belongs before the sections");
        if (toks_.size() != 2 || toks_[1].kind != Tok::word || !is_ident(toks_[1].text))
          return fail(line_no, "expected 'arch NAME'");
        d.name = toks_[1].text;
        arch_line = line_no;
        if (!expected_.empty() && d.name != expected_)
          return fail(line_no, strf("the file is named '%s.archdef' but defines 'arch %s'; they must match",
                                    expected_.c_str(), d.name.c_str()));
      } else if (t0.kind == Tok::word && t0.text == "kind") {
        if (kind_line) return fail(line_no, strf("a second 'kind' line (first at line %d)", kind_line));
        if (sec != Section::none) return fail(line_no, "'kind' belongs before the sections");
        if (toks_.size() != 2 || toks_[1].kind != Tok::word) return fail(line_no, "expected 'kind decoder'");
        if (toks_[1].text != "decoder")
          return fail(line_no, "kind '" + printable(toks_[1].text) + "' is not supported (only 'decoder')" +
                                   did_you_mean(toks_[1].text, {"decoder"}));
        d.kind = toks_[1].text;
        kind_line = line_no;
      } else if (t0.kind == Tok::word && t0.text == "param") {
        if (sec != Section::none) return fail(line_no, "'param' lines belong before the sections");
        auto p = parse_param(d);
        if (!p) return p.error();
        d.params.push_back(std::move(*p));
      } else {
        if (sec == Section::none)
          return fail_stmt_outside(t0);
        auto s = parse_stmt(sec, d);
        if (!s) return s.error();
        (sec == Section::prologue ? d.prologue : sec == Section::block ? d.block : d.epilogue).push_back(std::move(*s));
      }
      if (pos > text_.size()) break;
    }
    if (!arch_line) return fail(0, "no 'arch NAME' line");
    if (!kind_line) return fail(0, "no 'kind decoder' line");
    for (Section s : {Section::prologue, Section::block, Section::epilogue})
      if (!section_line[static_cast<int>(s)]) return fail(0, strf("no '%s' section", section_name(s)));
    if (d.block.empty()) return fail(section_line[2], "the 'block' section is empty");
    if (auto r = validate(d); !r) return r.error();
    d.text = std::string(text_);
    d.sha256 = sha256_hex(text_);
    return d;
  }

 private:
  struct Tok {
    enum Kind : uint8_t { word, number, punct } kind;
    std::string text;
    double num = 0;
  };

  Error fail(int line, const std::string& msg) const {
    if (line <= 0) return make_error(Errc::archdef, where_ + ": " + msg);
    return make_error(Errc::archdef, strf("%s:%d: ", where_.c_str(), line) + msg);
  }

  static bool is_ident(std::string_view s) {
    if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
    for (char c : s)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    return true;
  }
  static bool is_keyword(std::string_view w) {
    return w == "arch" || w == "kind" || w == "param" || w == "prologue" || w == "block" || w == "epilogue";
  }
  // The identifier that stands where an operation name belongs: the first word of the line, or
  // the word after `NAME =`. Empty when the line does not start with an identifier.
  static std::string leading_op_word(std::string_view s) {
    size_t k = 0;
    auto skip = [&] {
      while (k < s.size() && (s[k] == ' ' || s[k] == '\t')) k++;
    };
    auto ident = [&]() -> std::string {
      size_t b = k;
      if (k < s.size() && (std::isalpha(static_cast<unsigned char>(s[k])) || s[k] == '_')) {
        while (k < s.size() && (std::isalnum(static_cast<unsigned char>(s[k])) || s[k] == '_')) k++;
      }
      return std::string(s.substr(b, k - b));
    };
    skip();
    std::string w = ident();
    if (w.empty() || is_keyword(w)) return w;
    if (k < s.size() && (s[k] == '.' || s[k] == '{')) return std::string();  // a dotted name: not an op position
    skip();
    if (k < s.size() && s[k] == '=' && (k + 1 >= s.size() || s[k + 1] != '=')) {
      k++;
      skip();
      std::string op = ident();
      if (k < s.size() && (s[k] == '.' || s[k] == '{')) return std::string();
      return op;
    }
    return w;
  }
  static bool word_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '{' || c == '}';
  }

  Result<void> lex(std::string_view s) {
    size_t k = 0;
    while (k < s.size()) {
      char c = s[k];
      if (c == ' ' || c == '\t') {
        k++;
      } else if (c == '=' || c == '(' || c == ')' || c == ',' || c == '|' || c == ':') {
        toks_.push_back({Tok::punct, std::string(1, c)});
        k++;
      } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' ||
                 (c == '.' && k + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[k + 1])))) {
        size_t e = k + 1;
        while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '.' ||
                                ((s[e] == '-' || s[e] == '+') && (s[e - 1] == 'e' || s[e - 1] == 'E'))))
          e++;
        std::string_view lit = s.substr(k, e - k);
        std::string_view digits = lit;
        if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
        double v = 0;
        auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
        if (ec != std::errc() || p != digits.data() + digits.size() || !std::isfinite(v))
          return fail(line_, "'" + printable(lit) + "' is not a number");
        toks_.push_back({Tok::number, std::string(lit), v});
        k = e;
      } else if (word_char(c)) {
        size_t e = k;
        while (e < s.size() && word_char(s[e])) e++;
        toks_.push_back({Tok::word, std::string(s.substr(k, e - k))});
        k = e;
      } else {
        size_t l = static_cast<size_t>(std::max(1, utf8_valid_len(reinterpret_cast<const unsigned char*>(s.data() + k), s.size() - k)));
        return fail(line_, "unexpected character '" + printable(s.substr(k, l)) + "'");
      }
    }
    return {};
  }

  bool at_punct(const char* p) const { return i_ < toks_.size() && toks_[i_].kind == Tok::punct && toks_[i_].text == p; }
  bool at_end() const { return i_ >= toks_.size(); }
  std::string here() const { return at_end() ? std::string("end of line") : "'" + printable(toks_[i_].text) + "'"; }

  Error fail_stmt_outside(const Tok& t0) const {
    // The first word of a statement names an operation (or the register it assigns).
    std::string op = t0.text;
    if (toks_.size() >= 3 && toks_[1].kind == Tok::punct && toks_[1].text == "=" && toks_[2].kind == Tok::word)
      op = toks_[2].text;
    if (!find_op(op) && is_ident(op)) return unknown_op(op);
    return fail(line_, "a statement outside any section (start the section with 'prologue', 'block' or 'epilogue')");
  }

  Error unknown_op(const std::string& name) const {
    std::vector<std::string> names;
    for (const auto& s : op_specs()) names.emplace_back(s.name);
    return fail(line_, "no operation '" + printable(name) + "'" + did_you_mean(name, names));
  }

  // Checks the {..} placeholders of a dotted name: {i} in tensor names (block only), {arch} in keys.
  Result<void> check_placeholders(const std::string& w, bool tensor, Section sec) const {
    size_t k = 0;
    while ((k = w.find_first_of("{}", k)) != std::string::npos) {
      if (w[k] == '}') return fail(line_, "unbalanced '}' in '" + printable(w) + "'");
      size_t e = w.find('}', k);
      if (e == std::string::npos) return fail(line_, "unbalanced '{' in '" + printable(w) + "'");
      std::string ph = w.substr(k + 1, e - k - 1);
      if (tensor && ph == "i") {
        if (sec != Section::block)
          return fail(line_, "'{i}' (the layer index) is only defined in the 'block' section");
      } else if (!tensor && ph == "arch") {
      } else {
        return fail(line_, "unknown placeholder '{" + printable(ph) + "}' in '" + printable(w) + "' (" +
                               (tensor ? "tensor names know {i}" : "metadata keys know {arch}") + ")");
      }
      k = e + 1;
    }
    return {};
  }

  Result<ValueTerm> parse_term(const ArchDef& d) {
    ValueTerm t;
    if (at_end()) return fail(line_, "expected a value at end of line");
    const Tok& tk = toks_[i_];
    if (tk.kind == Tok::number) {
      t.is_number = true;
      t.number = tk.num;
      i_++;
      return t;
    }
    if (tk.kind != Tok::word || !is_ident(tk.text)) return fail(line_, "expected a value, found " + here());
    if ((tk.text == "sqrt" || tk.text == "rsqrt") && i_ + 1 < toks_.size() && toks_[i_ + 1].kind == Tok::punct &&
        toks_[i_ + 1].text == "(") {
      t.fn = tk.text == "sqrt" ? ValueTerm::Fn::sqrt : ValueTerm::Fn::rsqrt;
      i_ += 2;
      if (at_end()) return fail(line_, "expected a value after '" + std::string(tk.text) + "('");
      const Tok& in = toks_[i_];
      if (in.kind == Tok::number) {
        t.is_number = true;
        t.number = in.num;
      } else if (in.kind == Tok::word && is_ident(in.text)) {
        t.name = in.text;
        if (auto r = check_value_name(t.name, d); !r) return r.error();
      } else {
        return fail(line_, "expected a number or a name inside " + std::string(t.fn == ValueTerm::Fn::sqrt ? "sqrt" : "rsqrt") + "(), found " + here());
      }
      i_++;
      if (!at_punct(")")) return fail(line_, "expected ')' after the value, found " + here());
      i_++;
      return t;
    }
    t.name = tk.text;
    if (auto r = check_value_name(t.name, d); !r) return r.error();
    i_++;
    return t;
  }

  Result<void> check_value_name(const std::string& name, const ArchDef& d) const {
    std::vector<std::string> known = archdef_builtin_values();
    for (const auto& p : d.params) {
      if (p.name == name) return {};
      known.push_back(p.name);
    }
    for (const auto& b : archdef_builtin_values())
      if (b == name) return {};
    return fail(line_, "no value named '" + printable(name) + "' (a param or one of n_embd, n_layer, n_head, "
                       "n_head_kv, head_dim, head_dim_v, n_ff, n_vocab, n_ctx_train, rms_eps, rope_base, rope_dims)" +
                           did_you_mean(name, known));
  }

  Result<ParamDef> parse_param(const ArchDef& d) {
    ParamDef p;
    p.line = line_;
    i_ = 1;
    if (at_end() || toks_[i_].kind != Tok::word || !is_ident(toks_[i_].text))
      return fail(line_, "expected 'param NAME = VALUE'");
    p.name = toks_[i_].text;
    if (find_op(p.name) || p.name == "sqrt" || p.name == "rsqrt" || p.name == "none" || p.name == "pairs" || p.name == "neox")
      return fail(line_, "'" + p.name + "' is a reserved word and cannot name a param");
    for (const auto& b : archdef_builtin_values())
      if (b == p.name) return fail(line_, "'" + p.name + "' is a built-in value; a param cannot redefine it");
    for (const auto& q : d.params)
      if (q.name == p.name) return fail(line_, strf("param '%s' is defined twice (first at line %d)", p.name.c_str(), q.line));
    i_++;
    if (!at_punct("=")) return fail(line_, "expected '=' after 'param " + p.name + "', found " + here());
    i_++;
    for (;;) {
      ParamAlt a;
      if (!at_end() && toks_[i_].kind == Tok::word && toks_[i_].text.find('.') != std::string::npos) {
        a.is_meta = true;
        a.key = toks_[i_].text;
        if (auto r = check_placeholders(a.key, false, Section::none); !r) return r.error();
        i_++;
      } else {
        auto t = parse_term(d);
        if (!t) return t.error();
        a.term = std::move(*t);
      }
      p.alts.push_back(std::move(a));
      if (at_end()) break;
      if (!at_punct("|")) return fail(line_, "expected '|' or end of line, found " + here());
      i_++;
    }
    for (size_t k = 0; k + 1 < p.alts.size(); k++)
      if (!p.alts[k].is_meta)
        return fail(line_, "in param '" + p.name + "', a number or name always exists: nothing after it is used");
    return p;
  }

  Result<ArgDef> parse_arg(char kind, const ArchDef& d, Section sec) {
    ArgDef a;
    a.kind = kind;
    if (at_end()) return fail(line_, "expected an argument, found end of line");
    const Tok& tk = toks_[i_];
    switch (kind) {
      case 'r':
        if (tk.kind != Tok::word || !is_ident(tk.text))
          return fail(line_, "expected a register name, found " + here() +
                                 (tk.kind == Tok::word && tk.text.find('.') != std::string::npos ? " (a tensor)" : ""));
        a.word = tk.text;
        i_++;
        return a;
      case 'l':
        if (tk.kind != Tok::word || (tk.text != "pairs" && tk.text != "neox"))
          return fail(line_, "expected a rope layout ('pairs' or 'neox'), found " + here() +
                                 (tk.kind == Tok::word ? did_you_mean(tk.text, {"pairs", "neox"}) : std::string()));
        a.word = tk.text;
        i_++;
        return a;
      case 'v': {
        if (tk.kind == Tok::word && tk.text.find('.') != std::string::npos)
          return fail(line_, "metadata keys are read in 'param' lines; name the param here (found " + here() + ")");
        auto t = parse_term(d);
        if (!t) return t.error();
        a.value = std::move(*t);
        return a;
      }
      default: {  // 't'
        for (;;) {
          if (at_end()) return fail(line_, "expected a tensor name, found end of line");
          const Tok& t = toks_[i_];
          if (t.kind == Tok::word && t.text == "none") {
            if (a.tensors.empty()) return fail(line_, "'none' must follow a tensor name: 'name | none'");
            a.optional = true;
            i_++;
            break;
          }
          if (t.kind != Tok::word || t.text.find('.') == std::string::npos)
            return fail(line_, "expected a tensor name (like blk.{i}.attn_q.weight), found " + here());
          if (auto r = check_placeholders(t.text, true, sec); !r) return r.error();
          a.tensors.push_back(t.text);
          i_++;
          if (!at_punct("|")) break;
          i_++;
        }
        if (a.optional && at_punct("|")) return fail(line_, "nothing may follow 'none'");
        return a;
      }
    }
  }

  Result<StmtDef> parse_stmt(Section sec, const ArchDef& d) {
    StmtDef s;
    s.line = line_;
    s.section = sec;
    i_ = 0;
    if (toks_[0].kind == Tok::word && toks_.size() >= 2 && at_punct_at(1, "=")) {
      if (!is_ident(toks_[0].text)) return fail(line_, "'" + printable(toks_[0].text) + "' cannot name a register");
      s.dst = toks_[0].text;
      i_ = 2;
    }
    if (at_end()) return fail(line_, "expected an operation after '='");
    const Tok& opt = toks_[i_];
    if (opt.kind != Tok::word || !is_ident(opt.text))
      return fail(line_, "expected an operation, found " + here());
    s.op = find_op(opt.text);
    if (!s.op) return unknown_op(opt.text);
    if (!is_register_name_ok(s.dst)) return fail(line_, "'" + s.dst + "' is a reserved word and cannot name a register");
    i_++;
    if (!at_punct("(")) return fail(line_, "expected '(' after '" + opt.text + "', found " + here());
    i_++;
    const std::string_view sig = s.op->sig;
    bool first = true;
    while (!at_punct(")")) {
      if (at_end()) return fail(line_, "missing ')' at end of line");
      if (!first) {
        if (!at_punct(",")) return fail(line_, "expected ',' or ')', found " + here());
        i_++;
      }
      first = false;
      // keyword argument?
      if (i_ + 1 < toks_.size() && toks_[i_].kind == Tok::word && at_punct_at(i_ + 1, "=")) {
        std::string key = toks_[i_].text;
        const OpKwarg* kw = nullptr;
        std::vector<std::string> names;
        for (const auto& k : s.op->kwargs) {
          if (!k.name) break;
          names.emplace_back(k.name);
          if (key == k.name) kw = &k;
        }
        if (!kw) {
          std::string msg = "'" + std::string(s.op->name) + "' has no argument '" + printable(key) + "'";
          if (names.empty()) msg += " (it takes no keyword arguments)";
          return fail(line_, msg + did_you_mean(key, names));
        }
        if (s.kwarg(key)) return fail(line_, "argument '" + key + "' is given twice");
        i_ += 2;
        auto a = parse_arg(kw->kind, d, sec);
        if (!a) return a.error();
        s.kwargs.emplace_back(key, std::move(*a));
        continue;
      }
      if (!s.kwargs.empty()) return fail(line_, "a positional argument after a keyword argument");
      if (s.args.size() >= sig.size())
        return fail(line_, strf("'%s' takes %zu argument%s, more are given", s.op->name, sig.size(), sig.size() == 1 ? "" : "s"));
      auto a = parse_arg(sig[s.args.size()], d, sec);
      if (!a) return a.error();
      s.args.push_back(std::move(*a));
    }
    i_++;
    if (!at_end()) return fail(line_, "unexpected " + here() + " after ')'");
    if (s.args.size() != sig.size())
      return fail(line_, strf("'%s' takes %zu argument%s, %zu given", s.op->name, sig.size(), sig.size() == 1 ? "" : "s",
                              s.args.size()));
    return s;
  }

  bool at_punct_at(size_t k, const char* p) const {
    return k < toks_.size() && toks_[k].kind == Tok::punct && toks_[k].text == p;
  }
  static bool is_register_name_ok(const std::string& n) {
    return n.empty() || !(find_op(n) || n == "none" || n == "pairs" || n == "neox" || n == "sqrt" || n == "rsqrt" ||
                          n == "arch" || n == "kind" || n == "param" || n == "prologue" || n == "block" ||
                          n == "epilogue");
  }

  // Program-order checks: registers assigned before use, `x` and `logits`, `last`, attention count.
  Result<void> validate(const ArchDef& d) const {
    std::vector<std::string> assigned;
    auto is_assigned = [&](const std::string& r) { return std::find(assigned.begin(), assigned.end(), r) != assigned.end(); };
    bool after_last = false;
    std::vector<std::string> reduced;  // registers with the rows kept by last()
    for (Section sec : {Section::prologue, Section::block, Section::epilogue}) {
      const auto& list = sec == Section::prologue ? d.prologue : sec == Section::block ? d.block : d.epilogue;
      int attentions = 0;
      for (const auto& s : list) {
        const OpSpec& op = *s.op;
        int line = s.line;
        auto err = [&](const std::string& m) { return make_error(Errc::archdef, strf("%s:%d: ", where_.c_str(), line) + m); };
        // registers read
        std::vector<std::string> reads;
        for (size_t k = 0; k < s.args.size(); k++)
          if (s.args[k].kind == 'r') reads.push_back(s.args[k].word);
        for (const auto& r : reads) {
          if (!is_register_name_ok(r)) return err("'" + r + "' is a reserved word and cannot name a register");
          if (!is_assigned(r)) {
            std::string hint = did_you_mean(r, assigned);
            return err("register '" + r + "' is used before it is assigned" + hint);
          }
          if (after_last && std::find(reduced.begin(), reduced.end(), r) == reduced.end())
            return err("register '" + r + "' still holds every token; after last() only '" + reduced[0] +
                       "' and registers assigned since then may be used");
        }
        if (op.needs_dst && s.dst.empty())
          return err(strf("'%s' makes a new value: write 'NAME = %s(...)'", op.name, op.name));
        if (!op.may_have_dst && !s.dst.empty()) return err(strf("'%s' works in place: write '%s(REGISTER)'", op.name, op.name));
        bool optional = false;
        for (const auto& a : s.args)
          if (a.kind == 't' && a.optional) optional = true;
        if (optional && !s.dst.empty())
          return err("'| none' makes this step optional, so it cannot assign '" + s.dst +
                     "'; use the in-place form (op(REGISTER, ...))");
        if ((op.code == OpCode::matmul || op.code == OpCode::attention || op.code == OpCode::copy) && !s.dst.empty()) {
          for (const auto& r : reads)
            if (r == s.dst) return err(strf("'%s' cannot write its own input '%s'; assign another register", op.name, r.c_str()));
        }
        if (op.code == OpCode::attention) {
          if (sec != Section::block) return err("attention belongs in the 'block' section (it uses the layer's cache)");
          if (++attentions > 1) return err("a block has at most one attention (one KV cache per layer)");
        }
        if (op.code == OpCode::last) {
          if (sec != Section::epilogue) return err("last() belongs in the 'epilogue' section");
          if (after_last) return err("last() is used twice");
          after_last = true;
          reduced.push_back(s.args[0].word);
        }
        if (!s.dst.empty()) {
          if (!is_assigned(s.dst)) assigned.push_back(s.dst);
          if (after_last && std::find(reduced.begin(), reduced.end(), s.dst) == reduced.end()) reduced.push_back(s.dst);
        }
      }
      if (sec == Section::prologue && !is_assigned("x"))
        return make_error(Errc::archdef, where_ + ": the prologue must assign the residual register 'x' (x = embed(...))");
    }
    if (!is_assigned("logits") ||
        std::none_of(d.epilogue.begin(), d.epilogue.end(), [](const StmtDef& s) { return s.dst == "logits"; }))
      return make_error(Errc::archdef, where_ + ": the epilogue must assign 'logits' (logits = matmul(...))");
    return {};
  }

  std::string_view text_;
  std::string where_, expected_;
  int line_ = 0;
  std::vector<Tok> toks_;
  size_t i_ = 0;
};

// Parses and validates a definition. `where` names it in messages; `expected_name` (from the file
// name; empty to skip) must equal its `arch` line; `origin` is "builtin" or the path.
inline Result<ArchDef> archdef_parse(std::string_view text, const std::string& where, const std::string& expected_name,
                                     const std::string& origin) {
  ArchdefParser p(text, where, expected_name);
  auto d = p.parse();
  if (!d) return d.error();
  d->origin = origin;
  return d;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/41_archdefs_builtin.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Built-in architecture definitions and the registry (built-ins + a user directory) ====
// The texts below are the whole description of each architecture: the forward pass has no
// `if (arch == ...)` anywhere. A directory of <arch>.archdef files (LoadOptions::archdef_dir,
// --archdef DIR) overrides a built-in of the same name; a broken file makes that architecture
// unavailable instead of silently falling back to the built-in.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

struct BuiltinArchdef {
  const char* name;
  const char* text;
};

inline const std::vector<BuiltinArchdef>& builtin_archdefs() {
  static const std::vector<BuiltinArchdef> defs = {
      {"llama", R"(# Llama 1/2/3, SmolLM, Mistral-style decoders (GGUF architecture "llama").
# GGUF files keep q/k rows permuted for adjacent-pair RoPE; for Hugging Face checkpoints
# (rotate-half order) the rope op switches `pairs` to `neox` itself.
arch llama
kind decoder

prologue
  x = embed(token_embd.weight)

block
  h = rms_norm(x, blk.{i}.attn_norm.weight)
  q = matmul(h, blk.{i}.attn_q.weight)
  k = matmul(h, blk.{i}.attn_k.weight)
  v = matmul(h, blk.{i}.attn_v.weight)
  add_bias(q, blk.{i}.attn_q.bias | none)
  add_bias(k, blk.{i}.attn_k.bias | none)
  add_bias(v, blk.{i}.attn_v.bias | none)
  rope(q, pairs, factors = rope_freqs.weight | none)   # llama-3 frequency factors when present
  rope(k, pairs, factors = rope_freqs.weight | none)
  a = attention(q, k, v)
  o = matmul(a, blk.{i}.attn_output.weight)
  add_bias(o, blk.{i}.attn_output.bias | none)
  add(x, o)
  h = rms_norm(x, blk.{i}.ffn_norm.weight)
  g = matmul(h, blk.{i}.ffn_gate.weight)
  u = matmul(h, blk.{i}.ffn_up.weight)
  silu(g)
  mul(g, u)
  o = matmul(g, blk.{i}.ffn_down.weight)
  add(x, o)

epilogue
  last(x)
  rms_norm(x, output_norm.weight)
  logits = matmul(x, output.weight | token_embd.weight)   # tied embeddings: no output.weight
)"},
      {"qwen2", R"(# Qwen2 / Qwen2.5 decoders: q/k/v biases, NEOX rope.
arch qwen2
kind decoder

prologue
  x = embed(token_embd.weight)

block
  h = rms_norm(x, blk.{i}.attn_norm.weight)
  q = matmul(h, blk.{i}.attn_q.weight)
  k = matmul(h, blk.{i}.attn_k.weight)
  v = matmul(h, blk.{i}.attn_v.weight)
  add_bias(q, blk.{i}.attn_q.bias)
  add_bias(k, blk.{i}.attn_k.bias)
  add_bias(v, blk.{i}.attn_v.bias)
  rope(q, neox)
  rope(k, neox)
  a = attention(q, k, v)
  o = matmul(a, blk.{i}.attn_output.weight)
  add(x, o)
  h = rms_norm(x, blk.{i}.ffn_norm.weight)
  g = matmul(h, blk.{i}.ffn_gate.weight)
  u = matmul(h, blk.{i}.ffn_up.weight)
  silu(g)
  mul(g, u)
  o = matmul(g, blk.{i}.ffn_down.weight)
  add(x, o)

epilogue
  last(x)
  rms_norm(x, output_norm.weight)
  logits = matmul(x, output.weight | token_embd.weight)
)"},
      {"qwen3", R"(# Qwen3 dense decoders: per-head RMSNorm of q and k before rope, NEOX rope, no biases.
arch qwen3
kind decoder

prologue
  x = embed(token_embd.weight)

block
  h = rms_norm(x, blk.{i}.attn_norm.weight)
  q = matmul(h, blk.{i}.attn_q.weight)
  k = matmul(h, blk.{i}.attn_k.weight)
  v = matmul(h, blk.{i}.attn_v.weight)
  norm_heads(q, blk.{i}.attn_q_norm.weight)
  norm_heads(k, blk.{i}.attn_k_norm.weight)
  rope(q, neox)
  rope(k, neox)
  a = attention(q, k, v)
  o = matmul(a, blk.{i}.attn_output.weight)
  add(x, o)
  h = rms_norm(x, blk.{i}.ffn_norm.weight)
  g = matmul(h, blk.{i}.ffn_gate.weight)
  u = matmul(h, blk.{i}.ffn_up.weight)
  silu(g)
  mul(g, u)
  o = matmul(g, blk.{i}.ffn_down.weight)
  add(x, o)

epilogue
  last(x)
  rms_norm(x, output_norm.weight)
  logits = matmul(x, output.weight | token_embd.weight)
)"},
      {"gemma3", R"(# Gemma 3 text decoders: scaled embeddings, q/k norms, post-attention and post-FFN norms,
# GELU (tanh) gating, local sliding-window layers with their own rope base, every
# `sliding_period`-th layer global. GGUF norm weights already include Gemma's +1.
arch gemma3
kind decoder

param sliding_window = {arch}.attention.sliding_window | 0           # 0: no sliding layers
param sliding_period = {arch}.attention.sliding_window_pattern | 6   # layer i global iff (i+1) % 6 == 0
param rope_base_local = {arch}.rope.freq_base_swa | 10000
param query_scalar = {arch}.attention.query_pre_attn_scalar | head_dim
param final_softcap = {arch}.final_logit_softcapping | 0            # 0: none

prologue
  x = embed(token_embd.weight)
  scale(x, sqrt(n_embd))

block
  h = rms_norm(x, blk.{i}.attn_norm.weight)
  q = matmul(h, blk.{i}.attn_q.weight)
  k = matmul(h, blk.{i}.attn_k.weight)
  v = matmul(h, blk.{i}.attn_v.weight)
  norm_heads(q, blk.{i}.attn_q_norm.weight)
  norm_heads(k, blk.{i}.attn_k_norm.weight)
  rope(q, neox, base_swa = rope_base_local)
  rope(k, neox, base_swa = rope_base_local)
  a = attention(q, k, v, scale = rsqrt(query_scalar), window = sliding_window, period = sliding_period)
  o = matmul(a, blk.{i}.attn_output.weight)
  rms_norm(o, blk.{i}.post_attention_norm.weight)
  add(x, o)
  h = rms_norm(x, blk.{i}.ffn_norm.weight)
  g = matmul(h, blk.{i}.ffn_gate.weight)
  u = matmul(h, blk.{i}.ffn_up.weight)
  gelu_tanh(g)
  mul(g, u)
  o = matmul(g, blk.{i}.ffn_down.weight)
  rms_norm(o, blk.{i}.post_ffw_norm.weight)
  add(x, o)

epilogue
  last(x)
  rms_norm(x, output_norm.weight)
  logits = matmul(x, output.weight | token_embd.weight)
  softcap(logits, final_softcap)
)"},
  };
  return defs;
}

// Every definition in effect: the built-ins, overridden by a user directory.
struct ArchdefFailure {
  std::string name;   // architecture the file was for (from its file name)
  std::string path;
  std::string error;  // file:line: message
};

struct ArchRegistry {
  std::vector<std::shared_ptr<const ArchDef>> defs;  // sorted by name
  std::vector<ArchdefFailure> failed;

  const ArchDef* find(std::string_view name) const {
    for (const auto& d : defs)
      if (d->name == name) return d.get();
    return nullptr;
  }
  const ArchdefFailure* failure(std::string_view name) const {
    for (const auto& f : failed)
      if (f.name == name) return &f;
    return nullptr;
  }
};

inline Result<ArchRegistry> load_arch_registry(const std::string& user_dir) {
  ArchRegistry reg;
  for (const auto& b : builtin_archdefs()) {
    auto d = archdef_parse(b.text, std::string("<builtin>/") + b.name + ".archdef", b.name, "builtin");
    if (!d) {  // a built-in that does not parse is a bug in this file (the tests catch it)
      reg.failed.push_back({b.name, std::string("<builtin>/") + b.name + ".archdef", d.error().message});
      continue;
    }
    reg.defs.push_back(std::make_shared<const ArchDef>(std::move(*d)));
  }
  if (!user_dir.empty()) {
    if (!is_directory(user_dir))
      return make_error(Errc::io, "architecture definitions: '" + user_dir + "' is not a directory");
    for (const auto& file : list_directory(user_dir)) {
      if (!ends_with(file, ".archdef")) continue;
      std::string name = file.substr(0, file.size() - 8);
      std::string path = path_join(user_dir, file);
      // The user's file replaces the built-in, whether or not it loads (never a silent fallback).
      reg.defs.erase(std::remove_if(reg.defs.begin(), reg.defs.end(), [&](const auto& d) { return d->name == name; }),
                     reg.defs.end());
      auto f = MappedFile::open(path);
      if (!f) {
        reg.failed.push_back({name, path, f.error().message});
        continue;
      }
      auto d = archdef_parse(f->view(), path, name, path);
      if (!d) {
        reg.failed.push_back({name, path, d.error().message});
        continue;
      }
      reg.defs.push_back(std::make_shared<const ArchDef>(std::move(*d)));
    }
  }
  std::sort(reg.defs.begin(), reg.defs.end(), [](const auto& a, const auto& b) { return a->name < b->name; });
  return reg;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/42_kv_cache.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== KV cache: per-session, per-layer ring buffers of keys and values (f16 or f32) ====
// A cell is addressed by the token's absolute position: slot = pos % slots. A layer that attends
// to the whole context has slots = n_ctx (it never wraps); a sliding-window layer keeps only
// window + ubatch - 1 slots (the window of the oldest query of a batch plus the batch itself), so
// a 512-token window costs 512 + ubatch cells whatever the context length.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// A checked heap allocation (KV caches and scratch can be large: no std::vector, whose failure
// would abort under -fno-exceptions).
class HeapBuf {
 public:
  HeapBuf() = default;
  HeapBuf(const HeapBuf&) = delete;
  HeapBuf& operator=(const HeapBuf&) = delete;
  HeapBuf(HeapBuf&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  HeapBuf& operator=(HeapBuf&& o) noexcept {
    if (this != &o) {
      std::free(p_);
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  ~HeapBuf() { std::free(p_); }

  // `count` elements of `elem` bytes, zeroed.
  static Result<HeapBuf> alloc(uint64_t count, uint64_t elem, const char* what) {
    uint64_t bytes = 0;
    if (mul_overflows(count, elem, &bytes) || bytes > (uint64_t(1) << 46))
      return make_error(Errc::out_of_memory, strf("%s: %llu x %llu bytes is too large", what,
                                                  static_cast<unsigned long long>(count),
                                                  static_cast<unsigned long long>(elem)));
    HeapBuf b;
    if (bytes == 0) return b;
    b.p_ = std::calloc(1, static_cast<size_t>(bytes));
    if (!b.p_) return make_error(Errc::out_of_memory, strf("%s: cannot allocate %s", what, human_bytes(bytes).c_str()));
    b.n_ = bytes;
    return b;
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  uint64_t bytes() const { return n_; }

 private:
  void* p_ = nullptr;
  uint64_t n_ = 0;
};

// f16 <-> f32 rows (the cache's element type). F16C when compiled in, else the portable code.
inline void f16_row_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t k = 0;
#if defined(LLMI_SIMD_AVX2)
  for (; k + 8 <= n; k += 8)
    _mm256_storeu_ps(dst + k, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k))));
#endif
  for (; k < n; k++) dst[k] = fp16_to_f32(src[k]);
}
inline void f32_row_to_f16(const float* src, uint16_t* dst, int64_t n) {
  int64_t k = 0;
#if defined(LLMI_SIMD_AVX2)
  for (; k + 8 <= n; k += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + k),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + k), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; k < n; k++) dst[k] = f32_to_fp16(src[k]);
}

// What one layer's cache holds.
struct KvLayerSpec {
  int n_kv = 0;      // key/value heads
  int hd_k = 0;      // key length per head
  int hd_v = 0;      // value length per head
  int window = 0;    // sliding window (keys p-window+1..p); 0: the whole context
  int k_rope = -1;   // rope applied to the keys (to re-rotate them when the context slides); -1: none
};

struct KvLayer {
  KvLayerSpec spec;
  int slots = 0;        // cells; slot of position p = p % slots
  uint8_t* k = nullptr;  // [n_kv][slots][hd_k] elements
  uint8_t* v = nullptr;  // [n_kv][slots][hd_v] elements
  int oldest = 0;       // smallest position still guaranteed to be held (ring layers lose older ones)
  bool wraps(int n_ctx) const { return slots < n_ctx; }
};

class KvCache {
 public:
  Result<void> init(const std::vector<KvLayerSpec>& specs, int n_ctx, int ubatch, KvType type) {
    type_ = type;
    elem_ = type == KvType::f16 ? 2 : 4;
    n_ctx_ = n_ctx;
    layers_.clear();
    bufs_.clear();
    bytes_ = 0;
    for (const auto& s : specs) {
      KvLayer l;
      l.spec = s;
      l.slots = n_ctx;
      if (s.window > 0) l.slots = static_cast<int>(std::min<int64_t>(n_ctx, int64_t(s.window) + ubatch - 1));
      auto kb = HeapBuf::alloc(uint64_t(s.n_kv) * uint64_t(l.slots) * uint64_t(s.hd_k), elem_, "KV cache (keys)");
      if (!kb) return kb.error();
      auto vb = HeapBuf::alloc(uint64_t(s.n_kv) * uint64_t(l.slots) * uint64_t(s.hd_v), elem_, "KV cache (values)");
      if (!vb) return vb.error();
      l.k = kb->as<uint8_t>();
      l.v = vb->as<uint8_t>();
      bytes_ += kb->bytes() + vb->bytes();
      bufs_.push_back(std::move(*kb));
      bufs_.push_back(std::move(*vb));
      layers_.push_back(l);
    }
    return {};
  }

  KvType type() const { return type_; }
  size_t elem() const { return elem_; }
  uint64_t bytes() const { return bytes_; }
  int n_layers() const { return static_cast<int>(layers_.size()); }
  KvLayer& layer(int l) { return layers_[static_cast<size_t>(l)]; }
  const KvLayer& layer(int l) const { return layers_[static_cast<size_t>(l)]; }

  // Address of head g's key / value at a slot.
  uint8_t* k_at(const KvLayer& l, int g, int slot) const {
    return l.k + (uint64_t(g) * l.slots + uint64_t(slot)) * l.spec.hd_k * elem_;
  }
  uint8_t* v_at(const KvLayer& l, int g, int slot) const {
    return l.v + (uint64_t(g) * l.slots + uint64_t(slot)) * l.spec.hd_v * elem_;
  }

  void store(uint8_t* dst, const float* src, int n) const {
    if (type_ == KvType::f16) f32_row_to_f16(src, reinterpret_cast<uint16_t*>(dst), n);
    else std::memcpy(dst, src, size_t(n) * 4);
  }
  void load(const uint8_t* src, float* dst, int n) const {
    if (type_ == KvType::f16) f16_row_to_f32(reinterpret_cast<const uint16_t*>(src), dst, n);
    else std::memcpy(dst, src, size_t(n) * 4);
  }

  // Stores the keys [n][n_kv*hd_k] and values [n][n_kv*hd_v] of positions pos0 .. pos0+n-1.
  void write(int li, int pos0, int n, const float* k, const float* v) {
    KvLayer& l = layer(li);
    const int nk = l.spec.n_kv, hk = l.spec.hd_k, hv = l.spec.hd_v;
    for (int t = 0; t < n; t++) {
      int slot = (pos0 + t) % l.slots;
      for (int g = 0; g < nk; g++) {
        store(k_at(l, g, slot), k + size_t(t) * nk * hk + size_t(g) * hk, hk);
        store(v_at(l, g, slot), v + size_t(t) * nk * hv + size_t(g) * hv, hv);
      }
    }
    int last = pos0 + n - 1;
    l.oldest = std::max(l.oldest, last - l.slots + 1);
  }

  // Whether every layer still holds what a continuation after `n_keep` tokens needs.
  bool can_truncate(int n_keep) const {
    for (const auto& l : layers_) {
      int need = l.spec.window > 0 ? std::max(0, n_keep - l.spec.window + 1) : 0;
      if (need < l.oldest) return false;
    }
    return true;
  }

  void clear() {
    for (auto& l : layers_) l.oldest = 0;
  }

 private:
  KvType type_ = KvType::f16;
  size_t elem_ = 2;
  int n_ctx_ = 0;
  std::vector<KvLayer> layers_;
  std::vector<HeapBuf> bufs_;
  uint64_t bytes_ = 0;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/43_forward.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Forward pass: compile a definition against a model, then run it (Engine / Context) ====
// Engine::create binds a parsed definition to a model once: params are read from the metadata,
// `{i}` is expanded for every layer, tensors are found and their shapes and types checked, and
// the result is a flat list of Steps (prologue, block x n_layer, epilogue) holding tensor
// pointers. Context::eval runs that list with a switch per step: no strings, no lookups, and no
// architecture names anywhere.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Which definition an Engine runs (the status report shows the same for every architecture).
struct ArchInfo {
  std::string name;
  std::string origin;  // "builtin" or the path of the user's .archdef file
  std::string sha256;  // of the definition text
  int steps_per_layer = 0;
};

// RoPE of one (layer, register): rotates pairs (2i, 2i+1) ("pairs", GGUF llama) or (i, i+n/2)
// ("neox") of the first n_dims elements of every head, angle pos * base^(-2i/n_dims) / factor_i
// * freq_scale, computed as llama.cpp does (theta multiplied by theta_scale per pair, in float).
struct RopeSpec {
  bool neox = false;
  int n_dims = 0;
  int head_dim = 0;
  float base = 10000.0f;
  float theta_scale = 1.0f;
  float freq_scale = 1.0f;
  std::vector<float> factors;  // [n_dims/2] divisors of the angle (llama-3 scaling); empty: none
  bool same(const RopeSpec& o) const {
    return neox == o.neox && n_dims == o.n_dims && head_dim == o.head_dim && base == o.base &&
           freq_scale == o.freq_scale && factors == o.factors;
  }
};

struct AttnSpec {
  int n_head = 0, n_kv = 0, hd_k = 0, hd_v = 0;
  int window = 0;      // keys p-window+1 .. p; 0: all previous keys
  float scale = 1.0f;  // applied to q.k before the soft-cap and the softmax
  float softcap = 0;   // c * tanh(s / c) when > 0
  int kv_layer = 0;
};

// One compiled operation.
struct Step {
  OpCode op = OpCode::copy;
  Section section = Section::none;
  int16_t dst = -1, a = -1, b = -1, c = -1;  // registers
  int layer = -1;                            // -1 outside the block
  int line = 0;                              // definition line (traces, messages)
  int w_in = 0, w_out = 0;                   // row widths of `a` and `dst`
  const TensorView* w = nullptr;             // embed / matmul weight
  const float* vec = nullptr;                // 1-D weights (norms, biases) as f32
  int vec_len = 0;
  float f = 0;                               // eps (norms), factor (scale), cap (softcap)
  int idx = -1;                              // RopeSpec / AttnSpec index
  // matmul: round the input to the weight's float type first (1 f16, 2 bf16). GGUF files are
  // computed as ggml computes them: F16/BF16 weights multiply f16/bf16 activations. (Idempotent,
  // so a kernel that converts the input itself gives the same result.)
  uint8_t round_input = 0;
};

// Everything Context needs from a compiled definition.
struct Program {
  std::vector<Step> steps;
  std::vector<std::string> reg_names;
  std::vector<int> reg_width;  // widest value each register holds
  int reg_logits = -1;
  bool has_last = false;
  std::vector<RopeSpec> ropes;
  std::vector<AttnSpec> attns;
  std::vector<KvLayerSpec> kv;
  std::vector<std::vector<float>> owned;  // 1-D weights converted to f32
  int n_vocab = 0;                        // logits width
  int64_t embed_rows = INT64_MAX;         // token ids must be below this
  int max_round_width = 0;                // widest matmul input that is rounded (Step::round_input)
};

// Reported to a trace callback after every step (debugging, conformance diffs).
struct TraceEvent {
  int step;
  const char* op;
  int layer;
  int line;
  const std::string& reg;
  const float* data;  // [rows][width]
  int rows;
  int width;
};

// ---- compiling a definition against a model ----
class ArchCompiler {
 public:
  ArchCompiler(const ArchDef& d, const ModelDesc& m, Program& p) : d_(d), m_(m), p_(p) {}

  Result<void> run() {
    const HParams& hp = m_.hp;
    if (hp.n_layer <= 0 || hp.n_layer > 65536)
      return fail(Errc::bad_format, 0, strf("block_count %lld is not a usable layer count", static_cast<long long>(hp.n_layer)));
    if (auto r = eval_params(); !r) return r;
    // which layers are sliding-window layers (from the block's attention arguments)
    for (const auto& s : d_.block) {
      if (s.op->code != OpCode::attention) continue;
      double w = 0, per = 0;
      if (const ArgDef* a = s.kwarg("window")) {
        auto v = value(a->value, s.line);
        if (!v) return v.error();
        w = *v;
      }
      if (const ArgDef* a = s.kwarg("period")) {
        auto v = value(a->value, s.line);
        if (!v) return v.error();
        per = *v;
      }
      if (w < 0 || w > 1e9 || per < 0 || per > 1e9 || w != std::floor(w) || per != std::floor(per))
        return fail(Errc::bad_format, s.line, strf("sliding window %g / period %g are not usable", w, per));
      window_ = static_cast<int>(w);
      period_ = static_cast<int>(per);
    }
    for (const auto& s : d_.prologue)
      if (auto r = stmt(s, -1); !r) return r;
    for (int i = 0; i < hp.n_layer; i++)
      for (const auto& s : d_.block)
        if (auto r = stmt(s, i); !r) return r;
    for (const auto& s : d_.epilogue)
      if (auto r = stmt(s, -1); !r) return r;
    p_.reg_logits = reg_id("logits");
    p_.n_vocab = width_[static_cast<size_t>(p_.reg_logits)];
    if (p_.n_vocab <= 0) return fail(Errc::shape_mismatch, 0, "'logits' has no width");
    p_.reg_width = max_width_;
    return {};
  }

 private:
  Error fail(Errc code, int line, const std::string& msg) const {
    std::string where = line > 0 ? strf("%s:%d", d_.where.c_str(), line) : d_.where;
    return make_error(code, m_.path + ": " + where + ": " + msg);
  }

  bool sliding(int layer) const {
    if (window_ <= 0 || layer < 0) return false;
    return period_ == 0 || (layer + 1) % period_ != 0;
  }

  std::string expand(const std::string& name, int layer) const {
    std::string out;
    size_t k = 0;
    for (;;) {
      size_t b = name.find('{', k);
      if (b == std::string::npos) break;
      size_t e = name.find('}', b);
      out.append(name, k, b - k);
      std::string ph = name.substr(b + 1, e - b - 1);
      out += ph == "i" ? std::to_string(layer) : ph == "arch" ? m_.arch : std::string();
      k = e + 1;
    }
    out.append(name, k, std::string::npos);
    return out;
  }

  Result<double> builtin_value(const std::string& n) const {
    const HParams& hp = m_.hp;
    if (n == "n_embd") return double(hp.n_embd);
    if (n == "n_layer") return double(hp.n_layer);
    if (n == "n_head") return double(hp.n_head);
    if (n == "n_head_kv") return double(hp.n_head_kv);
    if (n == "head_dim") return double(hp.head_dim);
    if (n == "head_dim_v") return double(hp.head_dim_v);
    if (n == "n_ff") return double(hp.n_ff);
    if (n == "n_vocab") return double(hp.n_vocab);
    if (n == "n_ctx_train") return double(hp.n_ctx_train);
    if (n == "rms_eps") return double(hp.rms_eps);
    if (n == "rope_base") return double(hp.rope_freq_base);
    if (n == "rope_dims") return m_.arch_number("rope.dimension_count").value_or(double(hp.head_dim));
    return make_error(Errc::internal, "unknown value " + n);
  }

  Result<double> value(const ValueTerm& t, int line) const {
    double v = t.number;
    if (!t.is_number) {
      bool found = false;
      for (const auto& [name, val] : params_)
        if (name == t.name) {
          v = val;
          found = true;
        }
      if (!found) {
        auto b = builtin_value(t.name);
        if (!b) return fail(Errc::archdef, line, "no value named '" + t.name + "'");
        v = *b;
      }
    }
    if (t.fn == ValueTerm::Fn::sqrt) {
      if (!(v >= 0)) return fail(Errc::bad_format, line, strf("sqrt of %g", v));
      v = std::sqrt(v);
    } else if (t.fn == ValueTerm::Fn::rsqrt) {
      if (!(v > 0)) return fail(Errc::bad_format, line, strf("rsqrt of %g", v));
      v = 1.0 / std::sqrt(v);
    }
    if (!std::isfinite(v)) return fail(Errc::bad_format, line, "a value is not finite");
    return v;
  }

  Result<void> eval_params() {
    for (const auto& p : d_.params) {
      bool done = false;
      std::string tried;
      for (const auto& a : p.alts) {
        if (a.is_meta) {
          std::string key = expand(a.key, -1);
          const MetaValue* mv = m_.find_meta(key);
          if (!mv) {
            tried += (tried.empty() ? "" : ", ") + key;
            continue;
          }
          if (mv->kind == MetaValue::Kind::string)
            return fail(Errc::bad_format, p.line, "metadata '" + key + "' is a string, param '" + p.name + "' needs a number");
          if (!std::isfinite(mv->num)) return fail(Errc::bad_format, p.line, "metadata '" + key + "' is not finite");
          params_.emplace_back(p.name, mv->num);
        } else {
          auto v = value(a.term, p.line);
          if (!v) return v.error();
          params_.emplace_back(p.name, *v);
        }
        done = true;
        break;
      }
      if (!done)
        return fail(Errc::bad_format, p.line, "param '" + p.name + "': the model has no metadata " + tried + " and the param gives no default");
    }
    return {};
  }

  int reg_id(const std::string& name) {
    for (size_t k = 0; k < p_.reg_names.size(); k++)
      if (p_.reg_names[k] == name) return static_cast<int>(k);
    p_.reg_names.push_back(name);
    width_.push_back(0);
    max_width_.push_back(0);
    return static_cast<int>(p_.reg_names.size() - 1);
  }

  void set_width(int r, int w) {
    width_[static_cast<size_t>(r)] = w;
    max_width_[static_cast<size_t>(r)] = std::max(max_width_[static_cast<size_t>(r)], w);
  }

  // The first existing alternative, or nullptr (then `missing` lists the names tried).
  const TensorView* find_tensor(const ArgDef& a, int layer, std::string& missing) const {
    missing.clear();
    for (const auto& n : a.tensors) {
      std::string name = expand(n, layer);
      if (const TensorView* t = m_.find(name)) return t;
      missing += (missing.empty() ? "'" : " | '") + name + "'";
    }
    return nullptr;
  }

  Error missing_tensor(const ArgDef& a, int layer, int line, const std::string& tried) const {
    std::vector<std::string> names;
    for (const auto& t : m_.tensors) names.push_back(t.name);
    std::string first = expand(a.tensors[0], layer);
    return fail(Errc::tensor_missing, line, "tensor " + tried + " not found in the model" + did_you_mean(first, names));
  }

  Result<void> check_computable(const TensorView& t, int line) const {
    if (dtype_computable(t.type)) return {};
    std::string ok;
    for (uint16_t k = 0; k < 256; k++)
      if (dtype_traits(static_cast<DType>(k)) && dtype_computable(static_cast<DType>(k)))
        ok += (ok.empty() ? "" : ", ") + std::string(dtype_name(static_cast<DType>(k)));
    for (DType extra : {DType::mlx_q4, DType::mlx_q8})
      if (dtype_computable(extra)) ok += ", " + std::string(dtype_name(extra));
    return fail(Errc::unsupported, line, strf("tensor '%s' has type %s, which this build cannot compute yet (it computes %s)",
                                              t.name.c_str(), dtype_name(t.type), ok.c_str()));
  }

  // A 1-D weight as f32 (converted once; shared by every step that uses it).
  Result<const float*> vector_of(const TensorView& t, int line, int64_t expect_len, const char* what) {
    if (t.nelements() != t.ne[0])
      return fail(Errc::shape_mismatch, line, strf("%s '%s' should be a vector, it has shape %s", what, t.name.c_str(), t.shape_string().c_str()));
    if (expect_len >= 0 && t.ne[0] != expect_len)
      return fail(Errc::shape_mismatch, line, strf("%s '%s' has %lld elements, expected %lld", what, t.name.c_str(),
                                                   static_cast<long long>(t.ne[0]), static_cast<long long>(expect_len)));
    if (auto r = check_computable(t, line); !r) return r.error();
    auto it = vec_index_.find(&t);
    if (it != vec_index_.end()) return static_cast<const float*>(p_.owned[it->second].data());
    std::vector<float> v(static_cast<size_t>(t.ne[0]));
    dequant_row(t, 0, v.data());
    for (float x : v)
      if (!std::isfinite(x)) return fail(Errc::bad_format, line, "tensor '" + t.name + "' holds a value that is not finite");
    p_.owned.push_back(std::move(v));
    vec_index_[&t] = p_.owned.size() - 1;
    return static_cast<const float*>(p_.owned.back().data());
  }

  Result<float> fvalue(const StmtDef& s, const char* kw, double dflt) const {
    const ArgDef* a = s.kwarg(kw);
    if (!a) return static_cast<float>(dflt);
    auto v = value(a->value, s.line);
    if (!v) return v.error();
    return static_cast<float>(*v);
  }

  Result<int> rope_spec(const StmtDef& s, int layer, int width) {
    const HParams& hp = m_.hp;
    RopeSpec r;
    r.head_dim = static_cast<int>(hp.head_dim);
    if (r.head_dim <= 0 || width % r.head_dim != 0)
      return fail(Errc::shape_mismatch, s.line, strf("rope: '%s' (%d wide) is not a whole number of heads of head_dim %d",
                                                     s.args[0].word.c_str(), width, r.head_dim));
    // Hugging Face checkpoints keep q/k in rotate-half order: the GGUF "pairs" layout is then
    // the same rotation as "neox" on those rows (the loader does not permute them).
    r.neox = s.args[1].word == "neox" || m_.hf_qk_order;
    double dims = 0;
    if (const ArgDef* a = s.kwarg("dims")) {
      auto v = value(a->value, s.line);
      if (!v) return v.error();
      dims = *v;
    } else {
      dims = *builtin_value("rope_dims");
    }
    if (dims <= 0 || dims > r.head_dim || dims != std::floor(dims) || static_cast<int>(dims) % 2 != 0)
      return fail(Errc::shape_mismatch, s.line, strf("rope: %g rotated dimensions do not fit heads of %d", dims, r.head_dim));
    r.n_dims = static_cast<int>(dims);
    auto base = fvalue(s, "base", hp.rope_freq_base);
    if (!base) return base.error();
    r.base = *base;
    if (sliding(layer) && s.kwarg("base_swa")) {
      auto b = fvalue(s, "base_swa", 0);
      if (!b) return b.error();
      r.base = *b;
    }
    if (!(r.base > 0)) return fail(Errc::bad_format, s.line, strf("rope base %g is not positive", double(r.base)));
    r.theta_scale = std::pow(r.base, -2.0f / static_cast<float>(r.n_dims));
    // frequency scaling: a factors tensor (llama-3 GGUF), else what the metadata says
    const TensorView* ft = nullptr;
    if (const ArgDef* a = s.kwarg("factors")) {
      std::string tried;
      ft = find_tensor(*a, layer, tried);
      if (!ft && !a->optional) return missing_tensor(*a, layer, s.line, tried);
    }
    std::string type(m_.meta_string(m_.arch + ".rope.scaling.type").value_or(""));
    double factor = m_.arch_number("rope.scaling.factor").value_or(1.0);
    if (ft) {
      auto v = vector_of(*ft, s.line, -1, "rope factors");
      if (!v) return v.error();
      if (ft->ne[0] < r.n_dims / 2)
        return fail(Errc::shape_mismatch, s.line, strf("rope factors '%s' has %lld entries, rope needs %d", ft->name.c_str(),
                                                       static_cast<long long>(ft->ne[0]), r.n_dims / 2));
      r.factors.assign(*v, *v + r.n_dims / 2);
    } else if (type == "llama3") {
      // Hugging Face llama-3 configs: the same factors convert_hf_to_gguf bakes into rope_freqs.
      double lo = m_.arch_number("rope.scaling.low_freq_factor").value_or(1.0);
      double hi = m_.arch_number("rope.scaling.high_freq_factor").value_or(4.0);
      double orig = m_.arch_number("rope.scaling.original_context_length").value_or(8192.0);
      if (!(factor > 0) || !(hi > lo) || !(orig > 0))
        return fail(Errc::bad_format, s.line, "rope scaling 'llama3' has unusable factor / low_freq_factor / high_freq_factor");
      double lo_wl = orig / lo, hi_wl = orig / hi;
      for (int i = 0; i < r.n_dims / 2; i++) {
        double freq = std::pow(double(r.base), -2.0 * i / r.n_dims);
        double wl = 2 * 3.14159265358979323846 / freq;
        double f;
        if (wl < hi_wl) f = 1.0;
        else if (wl > lo_wl) f = factor;
        else {
          double smooth = (orig / wl - lo) / (hi - lo);
          f = 1.0 / ((1 - smooth) / factor + smooth);
        }
        r.factors.push_back(static_cast<float>(f));
      }
    } else if (type == "linear") {
      if (!(factor > 0)) return fail(Errc::bad_format, s.line, "rope scaling 'linear' has no usable factor");
      r.freq_scale = static_cast<float>(1.0 / factor);
    } else if (!type.empty() && type != "none") {
      return fail(Errc::unsupported, s.line, "rope scaling '" + printable(type) + "' is not supported (none, linear, llama3)");
    }
    for (size_t k = 0; k < p_.ropes.size(); k++)
      if (p_.ropes[k].same(r)) return static_cast<int>(k);
    p_.ropes.push_back(std::move(r));
    return static_cast<int>(p_.ropes.size() - 1);
  }

  Result<void> stmt(const StmtDef& s, int layer) {
    const OpSpec& op = *s.op;
    Step st;
    st.op = op.code;
    st.section = s.section;
    st.layer = layer;
    st.line = s.line;
    const std::string& tgt = s.target();
    auto width_of = [&](const std::string& r) { return width_[static_cast<size_t>(reg_id(r))]; };
    int w_a = 0;
    if (!s.args.empty() && s.args[0].kind == 'r') {
      st.a = static_cast<int16_t>(reg_id(s.args[0].word));
      w_a = width_of(s.args[0].word);
    }
    st.w_in = w_a;
    int w_out = w_a;
    // positional tensor (embed: args[0]; norms, matmul, add_bias: args[1])
    const TensorView* t = nullptr;
    for (const auto& a : s.args) {
      if (a.kind != 't') continue;
      std::string tried;
      t = find_tensor(a, layer, tried);
      if (!t) {
        if (a.optional) return {};  // an optional step the model does not have
        return missing_tensor(a, layer, s.line, tried);
      }
    }
    switch (op.code) {
      case OpCode::embed: {
        if (t->n_dims != 2) return fail(Errc::shape_mismatch, s.line, "embedding '" + t->name + "' is not 2-D: " + t->shape_string());
        if (auto r = check_computable(*t, s.line); !r) return r;
        st.w = t;
        w_out = static_cast<int>(t->ne[0]);
        p_.embed_rows = std::min<int64_t>(p_.embed_rows, t->ne[1]);
        break;
      }
      case OpCode::rms_norm:
      case OpCode::norm_heads: {
        bool heads = op.code == OpCode::norm_heads;
        auto v = vector_of(*t, s.line, heads ? -1 : w_a, heads ? "head norm" : "norm");
        if (!v) return v.error();
        if (heads && (t->ne[0] <= 0 || w_a % t->ne[0] != 0))
          return fail(Errc::shape_mismatch, s.line, strf("head norm '%s' (%lld) does not divide '%s' (%d wide)", t->name.c_str(),
                                                         static_cast<long long>(t->ne[0]), s.args[0].word.c_str(), w_a));
        st.vec = *v;
        st.vec_len = static_cast<int>(t->ne[0]);
        auto eps = fvalue(s, "eps", m_.hp.rms_eps);
        if (!eps) return eps.error();
        st.f = *eps;
        if (!(st.f >= 0)) return fail(Errc::bad_format, s.line, "eps is negative");
        break;
      }
      case OpCode::matmul: {
        if (t->n_dims < 1 || t->ne[2] != 1 || t->ne[3] != 1 || t->n_dims > 2)
          return fail(Errc::shape_mismatch, s.line, "matmul weight '" + t->name + "' is not a matrix: " + t->shape_string());
        if (t->ne[0] != w_a)
          return fail(Errc::shape_mismatch, s.line, strf("matmul: '%s' rows have %lld elements but '%s' is %d wide",
                                                         t->name.c_str(), static_cast<long long>(t->ne[0]), s.args[0].word.c_str(), w_a));
        if (t->ne[1] > (1 << 28)) return fail(Errc::shape_mismatch, s.line, "matmul weight '" + t->name + "' has too many rows");
        if (auto r = check_computable(*t, s.line); !r) return r;
        st.w = t;
        w_out = static_cast<int>(t->ne[1]);
        if (m_.format == "gguf") st.round_input = t->type == DType::f16 ? 1 : t->type == DType::bf16 ? 2 : 0;
        if (st.round_input) p_.max_round_width = std::max(p_.max_round_width, w_a);
        break;
      }
      case OpCode::add_bias: {
        auto v = vector_of(*t, s.line, w_a, "bias");
        if (!v) return v.error();
        st.vec = *v;
        st.vec_len = w_a;
        break;
      }
      case OpCode::rope: {
        auto r = rope_spec(s, layer, w_a);
        if (!r) return r.error();
        st.idx = *r;
        break;
      }
      case OpCode::attention: {
        const HParams& hp = m_.hp;
        AttnSpec at;
        at.hd_k = static_cast<int>(hp.head_dim);
        at.hd_v = static_cast<int>(hp.head_dim_v);
        int wk = width_of(s.args[1].word), wv = width_of(s.args[2].word);
        if (at.hd_k <= 0 || at.hd_v <= 0 || w_a % at.hd_k || wk % at.hd_k || wv % at.hd_v)
          return fail(Errc::shape_mismatch, s.line, strf("attention: q (%d), k (%d), v (%d) are not whole heads of %d / %d", w_a, wk, wv, at.hd_k, at.hd_v));
        at.n_head = w_a / at.hd_k;
        at.n_kv = wk / at.hd_k;
        if (at.n_kv <= 0 || at.n_head % at.n_kv != 0 || wv / at.hd_v != at.n_kv)
          return fail(Errc::shape_mismatch, s.line, strf("attention: %d query heads, %d key heads and %d value heads do not group",
                                                         at.n_head, at.n_kv, wv / at.hd_v));
        at.window = sliding(layer) ? window_ : 0;
        auto sc = fvalue(s, "scale", 1.0 / std::sqrt(static_cast<float>(at.hd_k)));
        if (!sc) return sc.error();
        // llama.cpp computes the default as 1.0f/sqrtf(float(head_dim))
        at.scale = s.kwarg("scale") ? *sc : 1.0f / std::sqrt(static_cast<float>(at.hd_k));
        auto cap = fvalue(s, "softcap", 0);
        if (!cap) return cap.error();
        at.softcap = *cap;
        if (at.softcap < 0) return fail(Errc::bad_format, s.line, "softcap is negative");
        at.kv_layer = static_cast<int>(p_.kv.size());
        KvLayerSpec kv;
        kv.n_kv = at.n_kv;
        kv.hd_k = at.hd_k;
        kv.hd_v = at.hd_v;
        kv.window = at.window;
        // the rope last applied to the key register in this layer (to re-rotate cached keys)
        int kreg = reg_id(s.args[1].word);
        for (auto it = p_.steps.rbegin(); it != p_.steps.rend() && it->layer == layer; ++it)
          if (it->op == OpCode::rope && it->dst == kreg) {
            kv.k_rope = it->idx;
            break;
          }
        p_.kv.push_back(kv);
        st.b = static_cast<int16_t>(kreg);
        st.c = static_cast<int16_t>(reg_id(s.args[2].word));
        st.idx = static_cast<int>(p_.attns.size());
        p_.attns.push_back(at);
        w_out = at.n_head * at.hd_v;
        break;
      }
      case OpCode::mul:
      case OpCode::add: {
        int w_b = width_of(s.args[1].word);
        if (w_b != w_a)
          return fail(Errc::shape_mismatch, s.line, strf("%s: '%s' is %d wide but '%s' is %d wide", op.name, s.args[0].word.c_str(), w_a,
                                                         s.args[1].word.c_str(), w_b));
        st.b = static_cast<int16_t>(reg_id(s.args[1].word));
        break;
      }
      case OpCode::scale:
      case OpCode::softcap: {
        auto v = value(s.args[1].value, s.line);
        if (!v) return v.error();
        st.f = static_cast<float>(*v);
        if (op.code == OpCode::softcap) {
          if (st.f < 0) return fail(Errc::bad_format, s.line, "softcap is negative");
          if (st.f == 0) return {};  // no soft-capping for this model
        }
        break;
      }
      case OpCode::last:
        p_.has_last = true;
        break;
      default:
        break;
    }
    int d = reg_id(tgt);
    st.dst = static_cast<int16_t>(d);
    st.w_out = w_out;
    if (w_out <= 0) return fail(Errc::shape_mismatch, s.line, "'" + tgt + "' would have no elements");
    set_width(d, w_out);
    p_.steps.push_back(st);
    return {};
  }

  const ArchDef& d_;
  const ModelDesc& m_;
  Program& p_;
  std::vector<std::pair<std::string, double>> params_;
  std::vector<int> width_, max_width_;
  std::unordered_map<const TensorView*, size_t> vec_index_;
  int window_ = 0, period_ = 0;
};

// ---- the engine: one per loaded model, immutable, shared by every session ----
class Engine {
 public:
  // Compiles the model's architecture definition (built-in, or LoadOptions::archdef_dir's) against
  // the model: a broken definition, a missing tensor, a bad shape or a weight type the kernels
  // cannot compute fails here, not during a forward pass.
  static Result<std::shared_ptr<const Engine>> create(std::shared_ptr<const ModelDesc> desc, const LoadOptions& opts) {
    if (!desc) return make_error(Errc::invalid_argument, "Engine::create: no model");
    auto reg = load_arch_registry(opts.archdef_dir);
    if (!reg) return reg.error();
    const ArchDef* def = reg->find(desc->arch);
    std::string failures;
    for (const auto& f : reg->failed) failures += "\n  " + f.error;
    if (!def) {
      if (reg->failure(desc->arch))
        return make_error(Errc::archdef, strf("%s: architecture '%s' is unavailable: its definition did not load:%s",
                                              desc->path.c_str(), printable(desc->arch).c_str(), failures.c_str()));
      std::string known;
      for (const auto& d : reg->defs) known += (known.empty() ? "" : ", ") + d->name;
      return make_error(Errc::unsupported,
                        strf("%s: no architecture definition for '%s' (known: %s)%s%s", desc->path.c_str(),
                             printable(desc->arch).c_str(), known.c_str(),
                             failures.empty() ? "" : "; definitions that did not load:", failures.c_str()));
    }
    std::shared_ptr<Engine> e(new Engine());
    e->desc_ = std::move(desc);
    e->opts_ = opts;
    e->def_ = reg->defs[static_cast<size_t>(std::find_if(reg->defs.begin(), reg->defs.end(),
                                                         [&](const auto& d) { return d.get() == def; }) -
                                            reg->defs.begin())];
    e->arch_ = ArchInfo{def->name, def->origin, def->sha256, def->steps_per_layer()};
    ArchCompiler comp(*def, *e->desc_, e->prog_);
    if (auto r = comp.run(); !r) return r.error();
    e->pool_ = std::make_unique<ThreadPool>(opts.threads);
    return std::shared_ptr<const Engine>(std::move(e));
  }

  const ModelDesc& desc() const { return *desc_; }
  const HParams& hparams() const { return desc_->hp; }
  int n_vocab() const { return prog_.n_vocab; }
  // LoadOptions::context, else the trained context capped at 4096.
  int n_ctx_default() const {
    if (opts_.context > 0) return opts_.context;
    int64_t t = desc_->hp.n_ctx_train;
    return t > 0 ? static_cast<int>(std::min<int64_t>(t, 4096)) : 4096;
  }
  const ArchInfo& arch() const { return arch_; }
  const ArchDef& archdef() const { return *def_; }
  ThreadPool& pool() const { return *pool_; }
  const LoadOptions& options() const { return opts_; }
  const Program& program() const { return prog_; }

 private:
  Engine() = default;
  std::shared_ptr<const ModelDesc> desc_;
  std::shared_ptr<const ArchDef> def_;
  LoadOptions opts_;
  ArchInfo arch_;
  Program prog_;
  std::unique_ptr<ThreadPool> pool_;
};

enum class EvalStatus { ok, cancelled, context_full };

// ---- elementwise kernels (f32 activations) ----
inline float silu_f32(float x) { return x / (1.0f + std::exp(-x)); }
// GELU, tanh approximation, at the fp16 precision ggml evaluates it with (ggml looks it up in a
// table indexed by fp16(x) holding fp16 results; beyond |x| >= 10 it is 0 or x): GGUF models then
// agree with llama.cpp, and the difference to the exact formula stays below fp16 resolution.
inline float gelu_tanh_f32(float x) {
  const float k = 0.79788456080286535587989211986876f;  // sqrt(2/pi)
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  const float f = fp16_to_f32(f32_to_fp16(x));
  return fp16_to_f32(f32_to_fp16(0.5f * f * (1.0f + std::tanh(k * f * (1.0f + 0.044715f * f * f)))));
}
inline float gelu_erf_f32(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752440f)); }

// cos/sin of one position for a rope spec: cache[2i] = cos, cache[2i+1] = sin.
inline void rope_angles(const RopeSpec& r, int64_t pos, float* cache) {
  float theta = static_cast<float>(pos);
  for (int i0 = 0; i0 < r.n_dims; i0 += 2) {
    float ff = r.factors.empty() ? 1.0f : r.factors[static_cast<size_t>(i0 / 2)];
    float th = r.freq_scale * (theta / ff);
    cache[i0] = std::cos(th);
    cache[i0 + 1] = std::sin(th);
    theta *= r.theta_scale;
  }
}

// Rotates one head (head_dim elements, first n_dims rotated) in place or into `out`.
inline void rope_head(const RopeSpec& r, const float* cache, const float* in, float* out) {
  const int n = r.n_dims;
  if (r.neox) {
    const int h = n / 2;
    for (int i = 0; i < h; i++) {
      float c = cache[2 * i], s = cache[2 * i + 1];
      float x0 = in[i], x1 = in[i + h];
      out[i] = x0 * c - x1 * s;
      out[i + h] = x0 * s + x1 * c;
    }
  } else {
    for (int i = 0; i < n; i += 2) {
      float c = cache[i], s = cache[i + 1];
      float x0 = in[i], x1 = in[i + 1];
      out[i] = x0 * c - x1 * s;
      out[i + 1] = x0 * s + x1 * c;
    }
  }
  if (out != in)
    for (int i = n; i < r.head_dim; i++) out[i] = in[i];
}

// ---- a context: one session's KV cache and scratch ----
class Context {
 public:
  Context(Context&&) noexcept = default;
  Context& operator=(Context&&) noexcept = default;

  // n_ctx: tokens this context can hold (0: the engine's default).
  static Result<Context> create(std::shared_ptr<const Engine> engine, int n_ctx) {
    if (!engine) return make_error(Errc::invalid_argument, "Context::create: no engine");
    Context c;
    c.e_ = std::move(engine);
    const Program& p = c.e_->program();
    const LoadOptions& o = c.e_->options();
    c.n_ctx_ = n_ctx > 0 ? n_ctx : c.e_->n_ctx_default();
    if (c.n_ctx_ > (1 << 24)) return make_error(Errc::invalid_argument, strf("context of %d tokens is too large", c.n_ctx_));
    c.ubatch_ = std::min(kUbatch, c.n_ctx_);
    if (auto r = c.kv_.init(p.kv, c.n_ctx_, c.ubatch_, o.kv_type); !r) return r.error();
    c.slide_ = o.context_policy == ContextPolicy::slide;
    c.keep_ = std::max(0, o.keep);
    if (c.slide_) {
      // Sliding keeps `keep` tokens, and ring layers must still hold their window afterwards.
      int wmax = 1;
      for (int l = 0; l < c.kv_.n_layers(); l++)
        if (c.kv_.layer(l).wraps(c.n_ctx_)) wmax = std::max(wmax, c.kv_.layer(l).spec.window);
      c.slide_chunk_ = std::min(c.ubatch_, c.n_ctx_ - c.keep_ - wmax + 1);
      if (c.slide_chunk_ < 1)
        return make_error(Errc::invalid_argument, strf("a context of %d tokens is too small to slide while keeping %d tokens",
                                                       c.n_ctx_, c.keep_));
    }
    // scratch: every register [ubatch][widest], logits handled per eval
    c.regs_.resize(p.reg_names.size());
    c.reg_ptr_.assign(p.reg_names.size(), nullptr);
    for (size_t r = 0; r < p.reg_names.size(); r++) {
      if (static_cast<int>(r) == p.reg_logits) continue;
      auto b = HeapBuf::alloc(uint64_t(c.ubatch_) * uint64_t(std::max(1, p.reg_width[r])), 4, "activations");
      if (!b) return b.error();
      c.regs_[r] = std::move(*b);
    }
    auto lb = HeapBuf::alloc(uint64_t(p.has_last ? 1 : c.ubatch_) * uint64_t(p.n_vocab), 4, "logits");
    if (!lb) return lb.error();
    c.logits_buf_ = std::move(*lb);
    int threads = c.e_->pool().size();
    int max_slots = 1, max_hd = 1;
    for (int l = 0; l < c.kv_.n_layers(); l++) {
      max_slots = std::max(max_slots, c.kv_.layer(l).slots);
      max_hd = std::max({max_hd, c.kv_.layer(l).spec.hd_k, c.kv_.layer(l).spec.hd_v});
    }
    for (const auto& r : p.ropes) max_hd = std::max(max_hd, r.head_dim);
    c.scores_stride_ = max_slots;
    c.row_stride_ = max_hd;
    auto sb = HeapBuf::alloc(uint64_t(threads) * uint64_t(max_slots), 4, "attention scratch");
    if (!sb) return sb.error();
    c.scores_ = std::move(*sb);
    auto rb = HeapBuf::alloc(uint64_t(threads) * 3 * uint64_t(max_hd), 4, "attention scratch");
    if (!rb) return rb.error();
    c.rows_ = std::move(*rb);
    auto rnd = HeapBuf::alloc(uint64_t(c.ubatch_) * uint64_t(p.max_round_width), 4, "activations");
    if (!rnd) return rnd.error();
    c.round_buf_ = std::move(*rnd);
    c.rope_cache_.resize(p.ropes.size());
    c.rope_valid_.assign(p.ropes.size(), 0);
    return c;
  }

  // Evaluates `tokens` at positions n_past()...; fills logits of the last token ([n_vocab]) or, with
  // all_logits, of every token ([n][n_vocab]). `cancel` (may be empty) is polled before every layer.
  // context_full (policy stop): nothing was evaluated. cancelled: the chunks (of up to 256 tokens)
  // finished before the cancel stay in the cache (tokens() says which), logits are not filled.
  Result<EvalStatus> eval(std::span<const int32_t> tokens, std::vector<float>& logits, bool all_logits = false,
                          const std::function<bool()>& cancel = {}) {
    const Program& p = e_->program();
    const int n = static_cast<int>(tokens.size());
    if (tokens.empty()) return make_error(Errc::invalid_argument, "eval: no tokens");
    if (tokens.size() > size_t(1) << 30) return make_error(Errc::invalid_argument, "eval: too many tokens");
    for (size_t k = 0; k < tokens.size(); k++)
      if (tokens[k] < 0 || tokens[k] >= p.embed_rows)
        return make_error(Errc::invalid_argument, strf("eval: token id %d (at %zu) is outside the vocabulary (0..%lld)",
                                                       tokens[k], k, static_cast<long long>(p.embed_rows - 1)));
    if (!slide_ && n_past_ + n > n_ctx_) return EvalStatus::context_full;
    uint64_t out_n = uint64_t(all_logits ? n : 1) * uint64_t(p.n_vocab);
    logits.resize(static_cast<size_t>(out_n));
    int done = 0;
    while (done < n) {
      int chunk = std::min(n - done, slide_ ? slide_chunk_ : ubatch_);
      if (n_past_ + chunk > n_ctx_) slide(n_past_ + chunk - n_ctx_);
      bool final_chunk = done + chunk == n;
      float* out = all_logits ? logits.data() + size_t(done) * p.n_vocab : (final_chunk ? logits.data() : nullptr);
      EvalStatus st = run_chunk(tokens.data() + done, chunk, out, all_logits, cancel);
      if (st != EvalStatus::ok) return st;
      tokens_.insert(tokens_.end(), tokens.begin() + done, tokens.begin() + done + chunk);
      n_past_ += chunk;
      done += chunk;
    }
    return EvalStatus::ok;
  }

  int n_past() const { return n_past_; }
  int n_ctx() const { return n_ctx_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }

  // Keeps the first n_keep tokens (prefix reuse). False when a sliding-window layer no longer
  // holds the keys a continuation needs (then clear() and evaluate again).
  bool truncate(int n_keep) {
    if (n_keep < 0 || n_keep > n_past_) return false;
    if (!kv_.can_truncate(n_keep)) return false;
    n_past_ = n_keep;
    tokens_.resize(static_cast<size_t>(n_keep));
    return true;
  }
  void clear() {
    n_past_ = 0;
    tokens_.clear();
    kv_.clear();
  }
  uint64_t kv_bytes() const { return kv_.bytes(); }
  const Engine& engine() const { return *e_; }
  // Called after every step with the register it wrote (slow; for debugging and tests).
  void set_trace(std::function<void(const TraceEvent&)> fn) { trace_ = std::move(fn); }

 private:
  static constexpr int kUbatch = 256;  // tokens per prefill batch (bounds the scratch)

  Context() = default;

  float* reg(int r) const { return reg_ptr_[static_cast<size_t>(r)]; }

  // Runs fn(row) for rows [0, rows), on the pool when the work is worth it. Each row is computed
  // by one task with the same arithmetic, so the thread count never changes a result.
  template <class F>
  void for_rows(int rows, int64_t work_per_row, F&& fn) {
    ThreadPool& pool = e_->pool();
    int nt = pool.size();
    if (nt == 1 || rows == 1 || int64_t(rows) * work_per_row < 32768) {
      for (int r = 0; r < rows; r++) fn(r, 0);
      return;
    }
    int tasks = std::min(rows, nt * 4);
    pool.parallel_for(tasks, [&](int task, int thread) {
      int r0 = static_cast<int>(int64_t(rows) * task / tasks), r1 = static_cast<int>(int64_t(rows) * (task + 1) / tasks);
      for (int r = r0; r < r1; r++) fn(r, thread);
    });
  }

  EvalStatus run_chunk(const int32_t* toks, int n, float* out_logits, bool all_logits, const std::function<bool()>& cancel) {
    const Program& p = e_->program();
    for (size_t r = 0; r < regs_.size(); r++) reg_ptr_[r] = regs_[r].as<float>();
    float* lg = all_logits ? out_logits : logits_buf_.as<float>();
    reg_ptr_[static_cast<size_t>(p.reg_logits)] = lg;
    std::fill(rope_valid_.begin(), rope_valid_.end(), 0);
    const int pos0 = n_past_;
    int rows = n;
    int cur_layer = -2;
    for (size_t si = 0; si < p.steps.size(); si++) {
      const Step& s = p.steps[si];
      if (s.section == Section::epilogue && !out_logits) break;  // a middle chunk: its logits are not wanted
      if (s.layer != cur_layer) {
        cur_layer = s.layer;
        if (cancel && cancel()) return EvalStatus::cancelled;
      }
      float* a = s.a >= 0 ? reg(s.a) : nullptr;
      float* d = reg(s.dst);
      const int wi = s.w_in, wo = s.w_out;
      switch (s.op) {
        case OpCode::embed:
          for_rows(rows, wo, [&](int t, int) { dequant_row(*s.w, toks[t], d + size_t(t) * wo); });
          break;
        case OpCode::rms_norm:
        case OpCode::norm_heads: {
          const int seg = s.op == OpCode::rms_norm ? wi : s.vec_len;
          for_rows(rows, wi, [&](int t, int) {
            for (int h = 0; h < wi / seg; h++) {
              const float* x = a + size_t(t) * wi + size_t(h) * seg;
              float* y = d + size_t(t) * wo + size_t(h) * seg;
              double sum = 0;  // as ggml: squares in float, summed in double
              for (int k = 0; k < seg; k++) sum += double(x[k] * x[k]);
              const float mean = static_cast<float>(sum / seg);
              const float sc = 1.0f / std::sqrt(mean + s.f);
              for (int k = 0; k < seg; k++) y[k] = (x[k] * sc) * s.vec[k];
            }
          });
          break;
        }
        case OpCode::matmul: {
          const float* in = a;
          if (s.round_input) {
            float* r = round_buf_.as<float>();
            const bool bf = s.round_input == 2;
            for_rows(rows, wi, [&](int t, int) {
              const float* x = a + size_t(t) * wi;
              float* y = r + size_t(t) * wi;
              if (bf) for (int k = 0; k < wi; k++) y[k] = bf16_to_f32(f32_to_bf16(x[k]));
              else for (int k = 0; k < wi; k++) y[k] = fp16_to_f32(f32_to_fp16(x[k]));
            });
            in = r;
          }
          matmul(*s.w, in, rows, d, wo, e_->pool());
          break;
        }
        case OpCode::add_bias:
          for_rows(rows, wi, [&](int t, int) {
            for (int k = 0; k < wi; k++) d[size_t(t) * wi + k] = a[size_t(t) * wi + k] + s.vec[k];
          });
          break;
        case OpCode::rope: {
          const RopeSpec& rs = p.ropes[static_cast<size_t>(s.idx)];
          std::vector<float>& cache = rope_cache_[static_cast<size_t>(s.idx)];
          if (!rope_valid_[static_cast<size_t>(s.idx)]) {
            cache.resize(size_t(n) * rs.n_dims);
            for (int t = 0; t < n; t++) rope_angles(rs, pos0 + t, cache.data() + size_t(t) * rs.n_dims);
            rope_valid_[static_cast<size_t>(s.idx)] = 1;
          }
          for_rows(rows, wi, [&](int t, int) {
            for (int h = 0; h < wi / rs.head_dim; h++) {
              size_t off = size_t(t) * wi + size_t(h) * rs.head_dim;
              rope_head(rs, cache.data() + size_t(t) * rs.n_dims, a + off, d + off);
            }
          });
          break;
        }
        case OpCode::attention:
          attention(s, n, pos0, a, reg(s.b), reg(s.c), d);
          break;
        case OpCode::silu:
        case OpCode::gelu:
        case OpCode::gelu_tanh:
        case OpCode::relu: {
          OpCode op = s.op;
          for_rows(rows, wi * 8, [&](int t, int) {
            const float* x = a + size_t(t) * wi;
            float* y = d + size_t(t) * wi;
            switch (op) {
              case OpCode::silu: for (int k = 0; k < wi; k++) y[k] = silu_f32(x[k]); break;
              case OpCode::gelu: for (int k = 0; k < wi; k++) y[k] = gelu_erf_f32(x[k]); break;
              case OpCode::gelu_tanh: for (int k = 0; k < wi; k++) y[k] = gelu_tanh_f32(x[k]); break;
              default: for (int k = 0; k < wi; k++) y[k] = x[k] > 0 ? x[k] : 0.0f; break;
            }
          });
          break;
        }
        case OpCode::mul:
        case OpCode::add: {
          const float* b = reg(s.b);
          bool mul_op = s.op == OpCode::mul;
          for_rows(rows, wi, [&](int t, int) {
            size_t o = size_t(t) * wi;
            if (mul_op) for (int k = 0; k < wi; k++) d[o + k] = a[o + k] * b[o + k];
            else for (int k = 0; k < wi; k++) d[o + k] = a[o + k] + b[o + k];
          });
          break;
        }
        case OpCode::scale:
          for_rows(rows, wi, [&](int t, int) {
            for (int k = 0; k < wi; k++) d[size_t(t) * wi + k] = a[size_t(t) * wi + k] * s.f;
          });
          break;
        case OpCode::softcap:
          for_rows(rows, wi * 8, [&](int t, int) {
            for (int k = 0; k < wi; k++) d[size_t(t) * wi + k] = s.f * std::tanh(a[size_t(t) * wi + k] / s.f);
          });
          break;
        case OpCode::copy:
          std::memcpy(d, a, size_t(rows) * wi * 4);
          break;
        case OpCode::last:
          if (!all_logits && rows > 1) {
            std::memmove(a, a + size_t(rows - 1) * wi, size_t(wi) * 4);
            rows = 1;
          }
          break;
      }
      if (trace_) trace_(TraceEvent{static_cast<int>(si), op_spec(s.op).name, s.layer, s.line,
                                    p.reg_names[static_cast<size_t>(s.dst)], d, rows, wo});
    }
    if (out_logits && !all_logits && lg != out_logits)
      std::memcpy(out_logits, lg + size_t(rows - 1) * p.n_vocab, size_t(p.n_vocab) * 4);
    return EvalStatus::ok;
  }

  // Grouped-query causal attention of n new tokens (positions pos0..): stores their keys and values,
  // then for every (token, head): softmax(scale * q.k (soft-capped)) over the visible keys, times V.
  void attention(const Step& s, int n, int pos0, const float* q, const float* k, const float* v, float* out) {
    const AttnSpec& at = e_->program().attns[static_cast<size_t>(s.idx)];
    kv_.write(at.kv_layer, pos0, n, k, v);
    const KvLayer& L = kv_.layer(at.kv_layer);
    const int group = at.n_head / at.n_kv;
    const int wq = at.n_head * at.hd_k, wo = at.n_head * at.hd_v;
    auto task = [&](int t, int h, int thread) {
      const int pos = pos0 + t;
      const int lo = at.window > 0 ? std::max(0, pos - at.window + 1) : 0;
      const int g = h / group;
      const float* qh = q + size_t(t) * wq + size_t(h) * at.hd_k;
      float* sc = scores_.as<float>() + size_t(thread) * scores_stride_;
      float* row = rows_.as<float>() + size_t(thread) * 3 * row_stride_;
      float mx = -INFINITY;
      for (int j = lo; j <= pos; j++) {
        int slot = j % L.slots;
        kv_.load(kv_.k_at(L, g, slot), row, at.hd_k);
        float dot = 0;
        for (int e = 0; e < at.hd_k; e++) dot += qh[e] * row[e];
        float x = dot * at.scale;
        if (at.softcap > 0) x = at.softcap * std::tanh(x / at.softcap);
        sc[j - lo] = x;
        mx = std::max(mx, x);
      }
      double sum = 0;
      for (int j = lo; j <= pos; j++) {
        float e = std::exp(sc[j - lo] - mx);
        sc[j - lo] = e;
        sum += e;
      }
      const float inv = static_cast<float>(1.0 / sum);
      float* o = out + size_t(t) * wo + size_t(h) * at.hd_v;
      for (int e = 0; e < at.hd_v; e++) o[e] = 0;
      for (int j = lo; j <= pos; j++) {
        kv_.load(kv_.v_at(L, g, j % L.slots), row, at.hd_v);
        const float w = sc[j - lo] * inv;
        for (int e = 0; e < at.hd_v; e++) o[e] += w * row[e];
      }
    };
    const int tasks = n * at.n_head;
    ThreadPool& pool = e_->pool();
    int64_t work = int64_t(tasks) * (pos0 + n) * (at.hd_k + at.hd_v);
    if (pool.size() == 1 || tasks == 1 || work < 32768) {
      for (int i = 0; i < tasks; i++) task(i / at.n_head, i % at.n_head, 0);
    } else {
      pool.parallel_for(tasks, [&](int i, int thread) { task(i / at.n_head, i % at.n_head, thread); });
    }
  }

  // ContextPolicy::slide: drops `need` or more tokens after the first keep_, moves the rest down
  // and re-rotates their keys, so positions stay 0..n_past-1 (as llama.cpp's context shift).
  void slide(int need) {
    const int keep = std::min(keep_, n_past_);
    int wmax = 1;
    for (int l = 0; l < kv_.n_layers(); l++)
      if (kv_.layer(l).wraps(n_ctx_)) wmax = std::max(wmax, kv_.layer(l).spec.window);
    int d = std::max(need, (n_past_ - keep) / 2);
    d = std::min(d, n_past_ - keep - wmax + 1);  // ring layers keep their window of the kept part
    d = std::max(d, need);
    d = std::min(d, n_past_ - keep);
    if (d <= 0) return;
    const int n_new = n_past_ - d;
    const Program& p = e_->program();
    std::vector<float> cs, tmp;
    for (int li = 0; li < kv_.n_layers(); li++) {
      KvLayer& L = kv_.layer(li);
      const KvLayerSpec& sp = L.spec;
      const RopeSpec* rs = sp.k_rope >= 0 ? &p.ropes[static_cast<size_t>(sp.k_rope)] : nullptr;
      if (rs) {
        cs.resize(size_t(rs->n_dims));
        rope_angles(*rs, -int64_t(d), cs.data());
      }
      int lo = keep;
      if (L.wraps(n_ctx_)) lo = std::max(keep, n_new - sp.window + 1);
      const int cnt = std::max(0, n_new - lo);
      // gather (old positions q + d), then scatter to the new slots: ring slots may overlap
      const size_t rk = size_t(sp.hd_k), rv = size_t(sp.hd_v);
      tmp.resize(size_t(cnt) * sp.n_kv * (rk + rv));
      for (int qi = 0; qi < cnt; qi++)
        for (int g = 0; g < sp.n_kv; g++) {
          float* tk = tmp.data() + (size_t(qi) * sp.n_kv + g) * (rk + rv);
          int old_slot = (lo + qi + d) % L.slots;
          kv_.load(kv_.k_at(L, g, old_slot), tk, sp.hd_k);
          kv_.load(kv_.v_at(L, g, old_slot), tk + rk, sp.hd_v);
          if (rs) rope_head(*rs, cs.data(), tk, tk);
        }
      for (int qi = 0; qi < cnt; qi++)
        for (int g = 0; g < sp.n_kv; g++) {
          const float* tk = tmp.data() + (size_t(qi) * sp.n_kv + g) * (rk + rv);
          int slot = (lo + qi) % L.slots;
          kv_.store(kv_.k_at(L, g, slot), tk, sp.hd_k);
          kv_.store(kv_.v_at(L, g, slot), tk + rk, sp.hd_v);
        }
      if (L.wraps(n_ctx_)) L.oldest = lo;
    }
    tokens_.erase(tokens_.begin() + keep, tokens_.begin() + keep + d);
    n_past_ = n_new;
  }

  std::shared_ptr<const Engine> e_;
  KvCache kv_;
  int n_ctx_ = 0, n_past_ = 0, ubatch_ = 0;
  bool slide_ = false;
  int keep_ = 0, slide_chunk_ = 0;
  std::vector<int32_t> tokens_;
  std::vector<HeapBuf> regs_;
  std::vector<float*> reg_ptr_;
  HeapBuf logits_buf_, scores_, rows_, round_buf_;
  size_t scores_stride_ = 0, row_stride_ = 0;
  std::vector<std::vector<float>> rope_cache_;
  std::vector<char> rope_valid_;
  std::function<void(const TraceEvent&)> trace_;
};

// Greedy continuation by ids (argmax, ties to the lowest id, as llama.cpp's greedy sampler):
// evaluates `prompt`, then up to n_predict tokens; stops early at an id in `stop_ids`.
inline int argmax_f32(const float* x, int n) {
  int best = 0;
  for (int k = 1; k < n; k++)
    if (x[k] > x[best]) best = k;
  return best;
}

inline Result<std::vector<int32_t>> greedy_ids(Context& ctx, std::span<const int32_t> prompt, int n_predict,
                                               std::span<const int32_t> stop_ids = {}) {
  std::vector<float> logits;
  std::vector<int32_t> out;
  auto st = ctx.eval(prompt, logits);
  if (!st) return st.error();
  if (*st != EvalStatus::ok) return out;
  const int nv = ctx.engine().n_vocab();
  for (int k = 0; k < n_predict; k++) {
    int32_t id = argmax_f32(logits.data(), nv);
    out.push_back(id);
    if (std::find(stop_ids.begin(), stop_ids.end(), id) != stop_ids.end()) break;
    if (k + 1 == n_predict) break;
    auto s = ctx.eval(std::span<const int32_t>(&id, 1), logits);
    if (!s) return s.error();
    if (*s != EvalStatus::ok) break;
  }
  return out;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/44_validate.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Validation report: how close two sets of logits are (compare CLI, conformance tests) ====
// Per position: top-1 equal, Pearson correlation over the whole vocabulary, overlap of the two
// top-10 sets. The same measures a user runs with `llminfer compare` against a reference file.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

struct LogitsReport {
  int positions = 0;
  bool top1_match_all = true;
  int top1_matches = 0;
  double pearson_mean = 0;
  double pearson_min = 1;
  double top10_overlap_mean = 0;
  int first_divergence = -1;  // first position whose top-1 differs
};

// Pearson correlation in double (1 when both are constant and equal, 0 when only one is).
inline double pearson(const float* a, const float* b, size_t n) {
  if (n == 0) return 1;
  double ma = 0, mb = 0;
  for (size_t k = 0; k < n; k++) {
    ma += a[k];
    mb += b[k];
  }
  ma /= double(n);
  mb /= double(n);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t k = 0; k < n; k++) {
    double da = a[k] - ma, db = b[k] - mb;
    sab += da * db;
    saa += da * da;
    sbb += db * db;
  }
  if (saa == 0 || sbb == 0) return saa == sbb ? 1.0 : 0.0;
  return sab / std::sqrt(saa * sbb);
}

// Ids of the k largest values, largest first (ties: lower id first, as llama.cpp's sampler).
inline std::vector<int> top_k_ids(const float* x, int n, int k) {
  k = std::max(0, std::min(k, n));
  std::vector<int> ids;
  ids.reserve(static_cast<size_t>(k) + 1);
  auto better = [&](int i, int j) { return x[i] > x[j] || (x[i] == x[j] && i < j); };
  for (int i = 0; i < n; i++) {
    if (static_cast<int>(ids.size()) == k && (k == 0 || !better(i, ids.back()))) continue;
    auto it = std::upper_bound(ids.begin(), ids.end(), i, [&](int a, int b) { return better(a, b); });
    ids.insert(it, i);
    if (static_cast<int>(ids.size()) > k) ids.pop_back();
  }
  return ids;
}

inline double logsumexp(const float* x, int n) {
  float mx = -INFINITY;
  for (int i = 0; i < n; i++) mx = std::max(mx, x[i]);
  if (!std::isfinite(mx)) return mx;
  double s = 0;
  for (int i = 0; i < n; i++) s += std::exp(double(x[i]) - mx);
  return mx + std::log(s);
}

// Compares `rows` positions of [rows][n_vocab] logits.
inline LogitsReport compare_logits(const float* ours, const float* ref, int rows, int n_vocab) {
  LogitsReport r;
  r.positions = rows;
  double psum = 0, osum = 0;
  for (int p = 0; p < rows; p++) {
    const float* a = ours + size_t(p) * n_vocab;
    const float* b = ref + size_t(p) * n_vocab;
    std::vector<int> ta = top_k_ids(a, n_vocab, 10), tb = top_k_ids(b, n_vocab, 10);
    bool same = !ta.empty() && !tb.empty() && ta[0] == tb[0];
    r.top1_matches += same;
    if (!same && r.first_divergence < 0) r.first_divergence = p;
    double pc = pearson(a, b, static_cast<size_t>(n_vocab));
    psum += pc;
    r.pearson_min = std::min(r.pearson_min, pc);
    int overlap = 0;
    for (int x : ta) overlap += std::find(tb.begin(), tb.end(), x) != tb.end();
    osum += overlap;
  }
  r.top1_match_all = r.top1_matches == rows;
  r.pearson_mean = rows ? psum / rows : 1;
  r.top10_overlap_mean = rows ? osum / rows : 10;
  if (rows == 0) r.pearson_min = 1;
  return r;
}

// "1,2,3" -> ids (spaces allowed around the commas).
inline Result<std::vector<int32_t>> parse_id_list(std::string_view s) {
  std::vector<int32_t> ids;
  size_t k = 0;
  while (k < s.size()) {
    while (k < s.size() && (s[k] == ' ' || s[k] == '\t')) k++;
    size_t e = k;
    while (e < s.size() && s[e] != ',') e++;
    std::string_view tok = s.substr(k, e - k);
    while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\t')) tok.remove_suffix(1);
    int32_t v = 0;
    auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (tok.empty() || ec != std::errc() || p != tok.data() + tok.size() || v < 0)
      return make_error(Errc::invalid_argument, "'" + printable(tok) + "' is not a token id (expected ids like 1,2,3)");
    ids.push_back(v);
    k = e + 1;
    if (e == s.size()) break;
    if (k == s.size()) return make_error(Errc::invalid_argument, "the id list ends with a comma");
  }
  if (ids.empty()) return make_error(Errc::invalid_argument, "no token ids given");
  return ids;
}

// Logits of `ids` evaluated as one sequence from position 0 in a fresh context (big enough for
// them): the last position's [n_vocab], or every position's [n][n_vocab] with `all`.
inline Result<std::vector<float>> logits_of_ids(const std::shared_ptr<const Engine>& engine,
                                                std::span<const int32_t> ids, bool all) {
  int n_ctx = std::max<int>(engine->n_ctx_default(), static_cast<int>(std::min<size_t>(ids.size(), 1u << 24)));
  auto ctx = Context::create(engine, n_ctx);
  if (!ctx) return ctx.error();
  std::vector<float> logits;
  auto st = ctx->eval(ids, logits, all);
  if (!st) return st.error();
  if (*st != EvalStatus::ok) return make_error(Errc::internal, "evaluation did not complete");
  return logits;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/50_sampler.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Sampling: RNG and the sampler chain ====
// The chain, in the conventional order (llama.cpp's default order, without its extras):
//   penalties -> top-k -> top-p -> min-p -> temperature -> draw
// * penalties: every distinct token among the last `repeat_last_n` of the history (prompt and
//   generated tokens; 0 disables, -1 means the whole history) has its logit divided by
//   `repeat_penalty` when positive and multiplied by it otherwise (CTRL / llama.cpp rule).
// * temperature 0: greedy. The argmax of the penalised logits (ties -> the lowest id); the
//   truncations cannot remove the argmax, so they are skipped. The RNG is not used.
// * top-k (k > 0): the k largest logits (ties -> lower id first).
// * top-p (p < 1): softmax over the top-k set (temperature 1), tokens in decreasing order; keep the
//   shortest prefix whose probability sum reaches p (the token that crosses p is kept).
// * min-p (m > 0): keep tokens whose probability is at least m times the largest one, i.e.
//   logit >= max_logit + ln(m). It is relative to the maximum, which no truncation removes, so
//   applying it after top-p is the same as intersecting the two prefixes.
// * temperature T > 0: the kept tokens are drawn with probability proportional to exp(logit / T).
// At least one token always survives. NaN and -inf logits never do; when no token is left the
// sampler returns -1 and the caller reports an error.
//
// The RNG is xoshiro256** (Blackman & Vigna) seeded through splitmix64, 53-bit doubles in [0, 1):
// a few lines, identical on every platform and compiler, so a seed means the same tokens
// everywhere. One draw per sampled token. Each Session owns one; it is reseeded from
// GenerateOptions::seed at the start of every generate()/reply() call.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }

  void reseed(uint64_t seed) {
    uint64_t x = seed;
    for (auto& s : s_) s = splitmix64(x);
  }

  uint64_t next() {
    uint64_t result = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

struct SamplerParams {
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
};

// Checks the sampling options; the message names the offending option.
inline Result<void> validate_sampler_params(const SamplerParams& p) {
  auto bad = [](const char* what) { return make_error(Errc::invalid_argument, what); };
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    return bad("temperature must be a finite number >= 0 (0 = greedy)");
  if (p.top_k < 0) return bad("top_k must be >= 0 (0 = off)");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return bad("top_p must be in (0, 1] (1 = off)");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return bad("min_p must be in [0, 1] (0 = off)");
  if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty))
    return bad("repeat_penalty must be a finite number > 0 (1 = off)");
  if (p.repeat_last_n < -1) return bad("repeat_last_n must be >= -1 (-1 = whole history, 0 = off)");
  return {};
}

class Sampler {
 public:
  struct Candidate {
    int32_t id;
    float logit;
    float w;  // exp(logit - max logit) once computed (float exp: 1e-7 relative error, 3x faster)
  };

  // One token from `logits` ([n_vocab]) given the tokens so far (for the penalties), or -1 when
  // no token has a usable logit. Params must have passed validate_sampler_params.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history, const SamplerParams& p,
                 Rng& rng) {
    if (!truncate(logits, history, p)) return -1;
    if (p.temperature <= 0.0f || cand_.size() == 1) return cand_[0].id;
    // draw: probabilities proportional to exp((l - max) / T) over the kept tokens
    const double total = temper(p.temperature);
    double u = rng.uniform() * total;
    double cum = 0;
    for (const auto& c : cand_) {
      cum += c.w;
      if (u < cum) return c.id;
    }
    return cand_.back().id;  // u rounded up to the total
  }

  // The tokens that may be drawn, with their probabilities (the exact distribution sample()
  // draws from). For tests and diagnostics.
  std::vector<std::pair<int32_t, double>> distribution(std::span<const float> logits,
                                                       std::span<const int32_t> history,
                                                       const SamplerParams& p) {
    std::vector<std::pair<int32_t, double>> out;
    if (!truncate(logits, history, p)) return out;
    if (p.temperature <= 0.0f) {
      out.emplace_back(cand_[0].id, 1.0);
      return out;
    }
    const double total = temper(p.temperature);
    for (const auto& c : cand_) out.emplace_back(c.id, c.w / total);
    return out;
  }

 private:
  static constexpr size_t kSortDirectly = 256;   // above: the histogram cut (faster)
  static constexpr int kBins = 4096;

  // Strict total order: larger logit first, then lower id.
  static bool before(const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
  static float usable(float l) {  // NaN -> -inf (never kept); +inf -> the largest float
    if (std::isnan(l)) return -std::numeric_limits<float>::infinity();
    return std::min(l, std::numeric_limits<float>::max());
  }

  // Sets w = exp((l - max) / T) on the kept tokens; returns their sum.
  double temper(float temperature) {
    float max_l = cand_[0].logit;
    for (const auto& c : cand_) max_l = std::max(max_l, c.logit);
    double total = 0;
    const float inv_t = 1.0f / temperature;
    for (auto& c : cand_) total += c.w = std::exp((c.logit - max_l) * inv_t);
    return total;
  }

  // Penalties and truncations; leaves the surviving tokens in cand_ (for greedy: just the
  // argmax). False when nothing survives.
  bool truncate(std::span<const float> logits, std::span<const int32_t> history, const SamplerParams& p) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    const size_t n_vocab = logits.size();
    cand_.clear();
    if (n_vocab == 0) return false;
    work_.resize(n_vocab);
    for (size_t i = 0; i < n_vocab; i++) work_[i] = usable(logits[i]);

    // penalties: every distinct token of the window once
    if (p.repeat_penalty != 1.0f && p.repeat_last_n != 0 && !history.empty()) {
      size_t n = p.repeat_last_n < 0 ? history.size() : std::min(history.size(), static_cast<size_t>(p.repeat_last_n));
      window_.assign(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
      std::sort(window_.begin(), window_.end());
      window_.erase(std::unique(window_.begin(), window_.end()), window_.end());
      for (int32_t id : window_) {
        if (id < 0 || static_cast<size_t>(id) >= n_vocab) continue;
        float& l = work_[static_cast<size_t>(id)];
        l = l > 0 ? l / p.repeat_penalty : l * p.repeat_penalty;
      }
    }

    if (p.temperature <= 0.0f) {
      size_t best = 0;  // strict '>' over ascending ids: ties go to the lowest id
      for (size_t i = 1; i < n_vocab; i++)
        if (work_[i] > work_[best]) best = i;
      if (work_[best] == kNegInf) return false;
      cand_.push_back({static_cast<int32_t>(best), work_[best], 1.0f});
      return true;
    }

    // top-k: one pass with a k-element min-heap (k is usually small next to the vocabulary)
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n_vocab) {
      const size_t k = static_cast<size_t>(p.top_k);
      auto worse_on_top = [](const Candidate& a, const Candidate& b) { return before(a, b); };
      for (size_t i = 0; i < n_vocab; i++) {
        if (work_[i] == kNegInf) continue;
        Candidate c{static_cast<int32_t>(i), work_[i], 0.0f};
        if (cand_.size() < k) {
          cand_.push_back(c);
          std::push_heap(cand_.begin(), cand_.end(), worse_on_top);
        } else if (before(c, cand_.front())) {
          std::pop_heap(cand_.begin(), cand_.end(), worse_on_top);
          cand_.back() = c;
          std::push_heap(cand_.begin(), cand_.end(), worse_on_top);
        }
      }
    } else {
      cand_.reserve(n_vocab);
      for (size_t i = 0; i < n_vocab; i++)
        if (work_[i] != kNegInf) cand_.push_back({static_cast<int32_t>(i), work_[i], 0.0f});
    }
    if (cand_.empty()) return false;
    float max_l = cand_[0].logit;
    for (const auto& c : cand_) max_l = std::max(max_l, c.logit);

    if (p.top_p >= 1.0f) {
      if (p.min_p > 0.0f) min_p_filter(max_l, p.min_p);
      return true;
    }

    // top-p: probabilities over the whole top-k set, so the normaliser is computed first
    double z = 0;
    for (auto& c : cand_) z += c.w = std::exp(c.logit - max_l);
    // min-p keeps a prefix of the same order: only its survivors need ordering
    if (p.min_p > 0.0f) min_p_filter(max_l, p.min_p);
    const double top_p = static_cast<double>(p.top_p);
    double cum = 0;
    size_t first = 0;  // cand_[first, end) still to be walked in order
    if (cand_.size() > kSortDirectly) {
      // Large sets (a big vocabulary without top-k): a histogram of the logits finds the bin where
      // the cumulative probability crosses p in O(n); only that bin is sorted. Bins are ordered
      // like the logits, so this keeps exactly the prefix a full sort would.
      float lo = max_l;
      for (const auto& c : cand_) lo = std::min(lo, c.logit);
      const double scale = max_l > lo ? (kBins - 1) / (static_cast<double>(max_l) - lo) : 0.0;
      auto bin = [&](float l) {
        return std::min(kBins - 1, static_cast<int>((static_cast<double>(max_l) - l) * scale));
      };
      bin_mass_.assign(kBins, 0.0);
      for (const auto& c : cand_) bin_mass_[static_cast<size_t>(bin(c.logit))] += c.w / z;
      int cross = kBins;
      for (int b = 0; b < kBins; b++) {
        if (cum + bin_mass_[static_cast<size_t>(b)] >= top_p) {
          cross = b;
          break;
        }
        cum += bin_mass_[static_cast<size_t>(b)];
      }
      if (cross == kBins) return true;  // rounding: the whole set is needed
      auto below = std::partition(cand_.begin(), cand_.end(), [&](const Candidate& c) { return bin(c.logit) < cross; });
      auto at = std::partition(below, cand_.end(), [&](const Candidate& c) { return bin(c.logit) == cross; });
      cand_.erase(at, cand_.end());
      first = static_cast<size_t>(below - cand_.begin());
    }
    std::sort(cand_.begin() + static_cast<std::ptrdiff_t>(first), cand_.end(), before);
    for (size_t i = first; i < cand_.size(); i++) {
      cum += cand_[i].w / z;
      if (cum >= top_p) {
        cand_.resize(i + 1);
        break;
      }
    }
    return true;
  }

  void min_p_filter(float max_l, float min_p) {
    const double threshold = static_cast<double>(max_l) + std::log(static_cast<double>(min_p));
    size_t k = 0;
    for (const auto& c : cand_)
      if (static_cast<double>(c.logit) >= threshold) cand_[k++] = c;
    cand_.resize(k);  // the maximum always passes
  }

  std::vector<float> work_;  // [n_vocab] penalised logits
  std::vector<Candidate> cand_;
  std::vector<double> bin_mass_;
  std::vector<int32_t> window_;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/51_generate.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Generation: stop strings, streaming text, the decode loop ====
// The loop is written against GenerationIO (evaluate tokens, logits, end-of-generation test,
// streaming detokenizer), so that it runs the same on a real model and on the scripted fakes of
// the tests.
//
// Decisions (also in the manual):
// * Text reaches on_token only as complete UTF-8. Bytes that can never become valid UTF-8 are
//   replaced by U+FFFD (one per maximal invalid subpart, as the Unicode standard recommends).
// * Stop strings are matched on text, across token boundaries. The stop string and everything
//   after it are not emitted; text that could still be the beginning of a stop string is held
//   back until it is not (then emitted, nothing is lost) or the generation ends (then flushed).
// * GenerateResult::text is everything emitted. It equals the concatenation of the pieces the
//   callback received, unless the callback cancelled: then it also holds the text that was still
//   held back (the callback is not called again after it returned false).
// * GenerateResult::tokens are the sampled tokens, including those that carried a stop string,
//   but not the end-of-generation token.
// * The last sampled token is not evaluated (its logits are not needed); a session evaluates it
//   with the next turn.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Length (1..3) of the incomplete but so far valid UTF-8 sequence at s[0..n) that needs more
// bytes than n, or 0 when s[0..n) does not start such a sequence.
inline int utf8_incomplete_len(const unsigned char* s, size_t n) {
  if (n == 0) return 0;
  unsigned char c = s[0];
  int need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (need == 0) return 0;
  int have = 1;
  for (size_t i = 1; i < n && have < need; i++, have++) {
    unsigned char lo = 0x80, hi = 0xBF;
    if (i == 1) {
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    if (s[i] < lo || s[i] > hi) return have < need ? -have : 0;  // broken: caller replaces `have` bytes
  }
  return have < need ? have : 0;
}

// Appends the valid UTF-8 of `in` to `out`, replacing invalid bytes with U+FFFD; an incomplete
// sequence at the very end is left in `rest` (to be completed by the next bytes) unless `final`.
inline void utf8_sanitize(std::string_view in, bool final, std::string& out, std::string& rest) {
  static const char kReplacement[] = "\xEF\xBF\xBD";
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  size_t i = 0, n = in.size();
  rest.clear();
  while (i < n) {
    int l = utf8_valid_len(p + i, n - i);
    if (l > 0) {
      out.append(in.data() + i, static_cast<size_t>(l));
      i += static_cast<size_t>(l);
      continue;
    }
    int partial = utf8_incomplete_len(p + i, n - i);
    if (partial > 0 && !final) {  // runs to the end of the input: may still be completed
      rest.assign(in.data() + i, n - i);
      return;
    }
    out += kReplacement;
    i += partial > 0 ? static_cast<size_t>(partial) : partial < 0 ? static_cast<size_t>(-partial) : 1;
  }
}

// Turns the decoded pieces of generated tokens into the text that may be shown: complete UTF-8,
// stop strings cut, possible stop-string beginnings held back.
class TextStream {
 public:
  TextStream() = default;
  explicit TextStream(std::vector<std::string> stops) : stops_(std::move(stops)) {
    for (const auto& s : stops_) max_stop_ = std::max(max_stop_, s.size());
  }

  // Adds decoded bytes; returns the text that became safe to emit (possibly empty).
  std::string push(std::string_view bytes) {
    if (stopped_) return std::string();
    pending_ += bytes;
    std::string rest;
    utf8_sanitize(pending_, false, text_, rest);
    pending_ = std::move(rest);
    return advance(false);
  }

  // The generation ended: completes what is pending and returns everything still held back
  // (unless a stop string completes in it, which is then cut as usual).
  std::string finish() {
    if (stopped_) return std::string();
    std::string rest;
    utf8_sanitize(pending_, true, text_, rest);
    pending_.clear();
    return advance(true);
  }

  bool stopped() const { return stopped_; }
  // Everything emitted so far (the text of the result).
  std::string_view emitted() const { return std::string_view(text_).substr(0, emitted_); }
  // Text received but not emitted yet (held back as a possible stop-string beginning).
  std::string_view held() const { return std::string_view(text_).substr(emitted_); }

 private:
  std::string advance(bool final) {
    // earliest complete stop string at or after the emitted point (none can start before it)
    size_t stop_at = std::string::npos;
    for (const auto& s : stops_) stop_at = std::min(stop_at, text_.find(s, emitted_));
    size_t end = text_.size();
    if (stop_at != std::string::npos) {
      end = stop_at;
      stopped_ = true;
      text_.resize(stop_at);
    } else if (!final && max_stop_ > 0) {
      // hold back the earliest suffix that is a proper beginning of a stop string
      size_t from = std::max(emitted_, text_.size() > max_stop_ ? text_.size() - max_stop_ + 1 : 0);
      for (size_t p = from; p < text_.size(); p++) {
        std::string_view tail = std::string_view(text_).substr(p);
        bool prefix = false;
        for (const auto& s : stops_)
          if (s.size() > tail.size() && s.compare(0, tail.size(), tail) == 0) prefix = true;
        if (prefix) {
          end = p;  // stop strings are valid UTF-8, so p is a character boundary
          break;
        }
      }
    }
    std::string out = text_.substr(emitted_, end - emitted_);
    emitted_ = end;
    return out;
  }

  std::vector<std::string> stops_;
  size_t max_stop_ = 0;
  std::string text_;     // sanitized text received so far
  size_t emitted_ = 0;   // text_[0, emitted_) has been returned
  std::string pending_;  // incomplete UTF-8 at the end of the received bytes
  bool stopped_ = false;
};

// Checks what generate()/reply() accept; the message names the option.
inline Result<void> validate_generate_options(const GenerateOptions& o) {
  SamplerParams sp{o.temperature, o.top_k, o.top_p, o.min_p, o.repeat_penalty, o.repeat_last_n};
  if (auto v = validate_sampler_params(sp); !v) return v.error();
  for (size_t i = 0; i < o.stop.size(); i++) {
    if (o.stop[i].empty()) return make_error(Errc::invalid_argument, strf("stop string %zu is empty", i + 1));
    if (!utf8_valid(o.stop[i]))
      return make_error(Errc::invalid_argument, strf("stop string %zu is not valid UTF-8", i + 1));
  }
  return {};
}

enum class EvalOutcome : uint8_t { ok, cancelled, context_full };

// What the decode loop needs from a model and the session's context.
class GenerationIO {
 public:
  virtual ~GenerationIO() = default;
  // Evaluates `tokens` after those already in the context; on `ok` logits() holds the logits of
  // the last one. `context_full`: nothing was evaluated. `cancelled`: the cancel function said
  // so (polled during the evaluation).
  virtual Result<EvalOutcome> eval(std::span<const int32_t> tokens, const std::function<bool()>& cancel) = 0;
  virtual std::span<const float> logits() const = 0;
  // Called when eval() reported a full context: `ok` when room was made (context policy
  // `slide`), so the same eval may be retried; `context_full` to stop.
  virtual Result<EvalOutcome> on_context_full(const std::function<bool()>& cancel) = 0;
  virtual bool is_eog(int32_t id) const = 0;
  // Streaming detokenization of the generated tokens (bytes; the TextStream completes UTF-8).
  virtual std::string piece(int32_t id) = 0;
  virtual std::string flush() = 0;
};

// Evaluates `prefill` (the prompt tokens not in the context yet; must not be empty), then samples
// until a stop condition. `history`: the prompt (for the repetition penalty). Fills text, tokens,
// stop, the timings and prompt_tokens_evaluated of `r`; returns an error only when nothing was
// generated (afterwards an error ends the result with StopReason::error and r.error).
inline Result<void> run_generation(GenerationIO& io, std::span<const int32_t> prefill, std::vector<int32_t> history,
                                   const GenerateOptions& o, Sampler& sampler, Rng& rng, double t_start,
                                   GenerateResult& r) {
  const std::atomic<bool>* flag = o.cancel;
  const std::function<bool()> cancel = [flag] { return flag != nullptr && flag->load(std::memory_order_relaxed); };
  const SamplerParams sp{o.temperature, o.top_k, o.top_p, o.min_p, o.repeat_penalty, o.repeat_last_n};
  r.text.clear();
  r.tokens.clear();

  // eval with the context policy applied
  auto eval = [&](std::span<const int32_t> toks) -> Result<EvalOutcome> {
    for (int attempt = 0;; attempt++) {
      auto e = io.eval(toks, cancel);
      if (!e || *e != EvalOutcome::context_full || attempt > 0) return e;
      auto room = io.on_context_full(cancel);
      if (!room || *room != EvalOutcome::ok) return room;
    }
  };

  if (cancel()) {
    r.stop = StopReason::cancelled;
    return {};
  }
  double t0 = now_ms();
  auto pre = eval(prefill);
  if (!pre) return pre.error();
  r.timings.prefill_ms = now_ms() - t0;
  if (*pre != EvalOutcome::ok) {
    r.stop = *pre == EvalOutcome::cancelled ? StopReason::cancelled : StopReason::context_full;
    return {};
  }
  r.prompt_tokens_evaluated = static_cast<int>(prefill.size());
  if (r.timings.prefill_ms > 0)
    r.timings.prefill_tps = static_cast<double>(prefill.size()) * 1000.0 / r.timings.prefill_ms;

  TextStream ts(o.stop);
  bool callback_open = static_cast<bool>(o.on_token);
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    r.text += text;
    if (callback_open && !o.on_token(text)) {
      callback_open = false;
      r.stop = StopReason::cancelled;
    }
  };

  double t_first = 0, t_last = 0;
  r.stop = StopReason::max_tokens;
  bool done = false;
  for (int n = 0; !done;) {
    if (o.max_tokens >= 0 && n >= o.max_tokens) {
      r.stop = StopReason::max_tokens;
      break;
    }
    if (cancel()) {
      r.stop = StopReason::cancelled;
      break;
    }
    int32_t id = sampler.sample(io.logits(), history, sp, rng);
    if (id < 0) {
      r.stop = StopReason::error;
      r.error = make_error(Errc::internal, "the model produced no usable logits (NaN or -inf everywhere)");
      break;
    }
    t_last = now_ms();
    if (n == 0) {
      t_first = t_last;
      r.timings.ttft_ms = t_first - t_start;
    }
    if (io.is_eog(id)) {
      r.stop = StopReason::eos;
      break;
    }
    n++;
    r.tokens.push_back(id);
    history.push_back(id);
    emit(ts.push(io.piece(id)));
    if (ts.stopped()) {
      r.stop = StopReason::stop;
      break;
    }
    if (!callback_open && o.on_token) break;  // the callback cancelled (stop already set)
    if (o.max_tokens >= 0 && n >= o.max_tokens) {
      r.stop = StopReason::max_tokens;
      break;
    }
    auto e = eval(std::span<const int32_t>(&r.tokens.back(), 1));
    if (!e) {
      r.stop = StopReason::error;
      r.error = e.error();
      break;
    }
    if (*e == EvalOutcome::cancelled) {
      r.stop = StopReason::cancelled;
      done = true;
    } else if (*e == EvalOutcome::context_full) {
      r.stop = StopReason::context_full;
      done = true;
    }
  }
  // The end: what the detokenizer and the stop matcher still hold (a stop string may complete).
  // After the callback cancelled, the tail still goes to r.text (emit() no longer calls it).
  if (!ts.stopped()) {
    std::string tail = ts.push(io.flush());
    tail += ts.finish();
    if (ts.stopped() && r.stop != StopReason::cancelled) r.stop = StopReason::stop;
    emit(tail);
  }
  if (r.tokens.size() > 1 && t_last > t_first) {
    r.timings.decode_ms = t_last - t_first;
    r.timings.decode_tps = static_cast<double>(r.tokens.size() - 1) * 1000.0 / r.timings.decode_ms;
  }
  return {};
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
  std::shared_ptr<const Engine> engine;  // the compiled forward pass (shared by every session)
};

// A conversation: messages, the KV cache (created at the first reply), sampler and RNG.
struct SessionImpl {
  std::shared_ptr<const ModelImpl> model;
  std::vector<Message> messages;
  std::optional<Context> ctx;
  std::vector<float> logits;  // [n_vocab] of the last evaluated token
  Sampler sampler;
  Rng rng;
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
  // The architecture definition is compiled now: a broken definition, a missing tensor or a weight
  // type the kernels cannot compute fails the load, not the first forward pass.
  auto engine = detail::Engine::create(impl->desc, options);
  if (!engine) return engine.error();
  impl->engine = std::move(*engine);
  impl->load_ms = detail::now_ms() - t0;
  Model m;
  m.impl_ = std::move(impl);
  return m;
}

// ---- generation on a session's context ----
namespace detail {

// The decode loop's view of a Context and the model's vocabulary.
class ContextIO final : public GenerationIO {
 public:
  ContextIO(const ModelImpl& m, Context& ctx, std::vector<float>& logits) : m_(m), ctx_(ctx), logits_(logits) {
    const VocabData& vd = m.desc->vocab;
    for (int32_t id : {vd.eos, vd.eot, vd.eom})
      if (id >= 0) eog_.push_back(id);
  }
  Result<EvalOutcome> eval(std::span<const int32_t> tokens, const std::function<bool()>& cancel) override {
    auto st = ctx_.eval(tokens, logits_, false, cancel);
    if (!st) return st.error();
    return *st == EvalStatus::ok ? EvalOutcome::ok
           : *st == EvalStatus::cancelled ? EvalOutcome::cancelled
                                          : EvalOutcome::context_full;
  }
  std::span<const float> logits() const override { return logits_; }
  // ContextPolicy::slide is carried out by the Context itself (it shifts the cache), so a full
  // context reported here is final.
  Result<EvalOutcome> on_context_full(const std::function<bool()>&) override { return EvalOutcome::context_full; }
  bool is_eog(int32_t id) const override { return std::find(eog_.begin(), eog_.end(), id) != eog_.end(); }
  std::string piece(int32_t) override { return std::string(); }
  std::string flush() override { return std::string(); }

 private:
  const ModelImpl& m_;
  Context& ctx_;
  std::vector<float>& logits_;
  std::vector<int32_t> eog_;
};

inline size_t common_prefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) i++;
  return i;
}

inline uint64_t fresh_seed() {
  std::random_device rd;
  uint64_t s = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(now_ms() * 1000.0);
  return s == random_seed ? 0 : s;
}

// Generates after `prompt` on the session's context, reusing the longest cached prefix.
inline Result<GenerateResult> session_generate(SessionImpl& s, std::span<const int32_t> prompt,
                                               const GenerateOptions& o, double t_start) {
  const ModelImpl& m = *s.model;
  if (auto v = validate_generate_options(o); !v) return v.error();
  if (prompt.empty()) return make_error(Errc::invalid_argument, "the prompt is empty (no tokens to start from)");
  if (!s.ctx) {
    auto c = Context::create(m.engine, 0);
    if (!c) return c.error();
    s.ctx.emplace(std::move(*c));
  }
  Context& ctx = *s.ctx;
  // Reuse the cached prefix; the last prompt token is always evaluated (its logits start the reply).
  size_t reuse = std::min(common_prefix(ctx.tokens(), prompt), prompt.size() - 1);
  if (!ctx.truncate(static_cast<int>(reuse))) {
    ctx.clear();
    reuse = 0;
  }
  GenerateResult r;
  r.prompt_tokens = static_cast<int>(prompt.size());
  r.prompt_tokens_reused = static_cast<int>(reuse);
  r.seed = o.seed == random_seed ? fresh_seed() : o.seed;
  s.rng.reseed(r.seed);
  if (m.options.log)
    m.options.log(strf("prefill: %zu tokens (%zu reused from the cache)", prompt.size() - reuse, reuse));
  ContextIO io(m, ctx, s.logits);
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  auto run = run_generation(io, prompt.subspan(reuse), std::move(history), o, s.sampler, s.rng, t_start, r);
  if (!run) return run.error();
  r.timings.load_ms = m.load_ms;
  r.peak_rss_mb = peak_rss_mb();
  r.kv_bytes = ctx.kv_bytes();
  return r;
}

}  // namespace detail

inline Result<GenerateResult> Model::generate(std::string_view prompt, const GenerateOptions& options) const {
  double t0 = detail::now_ms();
  if (!impl_) return detail::make_error(Errc::invalid_argument, "generate: the model is not loaded");
  auto ids = tokenize(prompt, true, false);
  if (!ids) return ids.error();
  detail::SessionImpl s;
  s.model = impl_;
  return detail::session_generate(s, *ids, options, t0);
}

inline Result<GenerateResult> Model::generate(std::span<const int32_t> prompt_tokens, const GenerateOptions& options) const {
  double t0 = detail::now_ms();
  if (!impl_) return detail::make_error(Errc::invalid_argument, "generate: the model is not loaded");
  detail::SessionImpl s;
  s.model = impl_;
  return detail::session_generate(s, prompt_tokens, options, t0);
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

inline void Session::reset() {
  impl_->messages.clear();
  if (impl_->ctx) impl_->ctx->clear();
}

inline const std::vector<Message>& Session::messages() const { return impl_->messages; }
inline int Session::cached_tokens() const { return impl_->ctx ? impl_->ctx->n_past() : 0; }
inline int Session::context_size() const {
  return impl_->ctx ? impl_->ctx->n_ctx() : impl_->model->engine->n_ctx_default();
}

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
