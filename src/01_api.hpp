// ==== Public declarations ====
// Everything a program that embeds llminfer uses. Aggregates whose zero/empty value means "the
// model's own value", errors returned as values (no exceptions needed anywhere).

// C++20 or later, or one error that says so (MSVC keeps __cplusplus at 199711L unless
// /Zc:__cplusplus: _MSVC_LANG is its real value). Everything else in the header is skipped then,
// the implementation too, so that this is the only message. A C compiler sees the C API alone
// (the section after this one); the implementation is C++20.
#if !defined(__cplusplus)
// The C++ text below is skipped, but a C preprocessor still reads it, and C++ raw strings look
// like unterminated C strings to it (a warning GCC cannot turn off by name): as a system header
// the file gives no such warnings. (The C API section is checked with -Wall -Wextra -Werror
// -pedantic in tests/capi all the same: its declarations are compiled as C there.)
#if defined(__GNUC__)
#pragma GCC system_header
#endif
#if defined(LLMINFER_IMPLEMENTATION)
#error \
    "the llminfer implementation is C++20: define LLMINFER_IMPLEMENTATION in a C++ file (C programs include llminfer.hpp for its C API and link with the library built from it, e.g. make libllminfer.so)"
#endif
#define LLMINFER_IMPLEMENTATION_INCLUDED
#elif (defined(_MSVC_LANG) && _MSVC_LANG < 202002L) || (!defined(_MSVC_LANG) && __cplusplus < 202002L)
#error "llminfer.hpp requires C++20 or later: compile with -std=c++20 (MSVC: /std:c++20)"
#define LLMINFER_IMPLEMENTATION_INCLUDED
#else

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#if defined(LLMINFER_API_VERSION_SEEN) && LLMINFER_API_VERSION_SEEN != 1
#if defined(_MSC_VER)
#pragma message("warning: two different versions of llminfer.hpp are included in one program")
#else
#warning "two different versions of llminfer.hpp are included in one program"
#endif
#endif
#define LLMINFER_API_VERSION_SEEN 1

namespace llminfer {
inline namespace v0_1 {

// ---- errors ----
// X(name, description): one list makes the enum and its messages.
#define LLMINFER_ERRC_LIST(X)                                                    \
  X(ok, "ok")                                                                    \
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

namespace detail {
// Reading the value of a Result that holds an error is a bug in the caller: it stops the program
// with the error's message (in every build; never undefined behaviour).
[[noreturn]] inline void result_has_no_value(const Error& e) noexcept {
  std::fprintf(stderr, "llminfer: the value of a Result that holds an error was used (check `if (result)` first): %s\n",
               e.message.empty() ? "(no message)" : e.message.c_str());
  std::fflush(stderr);
  std::abort();
}
}  // namespace detail

// A value or an Error. Never throws; check with `if (r)` before using the value: value(), `*` and
// `->` on a Result that holds an error print its message to stderr and abort the program.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit on purpose
  Result(Error error) : error_(std::move(error)) {
    if (error_.code == Errc::ok) error_.code = Errc::internal;
  }
  explicit operator bool() const noexcept { return value_.has_value(); }
  bool ok() const noexcept { return value_.has_value(); }
  T& value() & { return checked(); }
  const T& value() const& { return checked(); }
  T&& value() && { return std::move(checked()); }
  T* operator->() { return &checked(); }
  const T* operator->() const { return &checked(); }
  T& operator*() & { return checked(); }
  const T& operator*() const& { return checked(); }
  const Error& error() const noexcept { return error_; }

 private:
  T& checked() {
    if (!value_) detail::result_has_no_value(error_);
    return *value_;
  }
  const T& checked() const {
    if (!value_) detail::result_has_no_value(error_);
    return *value_;
  }
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
  int threads = 0;               // 0: the number of hardware threads
  int context = 0;               // tokens per session; 0: min(trained context, 4096)
  std::string archdef_dir = {};  // directory of <arch>.archdef files that override built-ins
  KvType kv_type = KvType::f16;  // element type of the KV cache
  ContextPolicy context_policy = ContextPolicy::stop;
  int keep = 4;  // ContextPolicy::slide keeps this many first tokens
  // Kernel level (a build with LLMINFER_DISPATCH): "" the best this CPU has (or the environment
  // variable LLMINFER_KERNELS), else "scalar", "avx2", "avx2+sums", "avx512", "avx512bf16" or
  // "avx512+amx" (at most what the CPU has). A native build runs the one level it was compiled for
  // and accepts only its name; one compiled with AMX-INT8 (e.g. -march=native on a Xeon with AMX) is
  // "avx512+amx" where the OS grants the tiles and "avx512" elsewhere, and takes "avx512" (here or in
  // LLMINFER_KERNELS) to leave the tiles alone; one compiled for AVX2 (without AVX-512) is
  // "avx2+sums" and takes "avx2" likewise (matrix products in llama.cpp's float order for any batch;
  // see the manual: "The block-sum order").
  std::string kernels = {};
  std::function<void(std::string_view)> log = {};  // diagnostics; silent when empty
  // Continuous batching: sessions of this model that evaluate at the same time (from different
  // threads) share each step, reading the weights once for all of them; at most this many
  // sequences per step. 0: 32; 1: off (each evaluation runs on its own). Results are the same
  // either way (see the manual).
  int batch = 0;
  // Read the weights into memory the library owns instead of mapping the file: the model then
  // survives its file being truncated or rewritten while it runs (a mapped file must not be:
  // truncation kills the process with SIGBUS, rewriting changes the weights). Costs the file's
  // size in memory and the time to read it.
  bool read_into_memory = false;
  // Limits checked before anything is allocated (0: the default, see the manual):
  uint64_t max_program_steps = 0;  // compiled steps (prologue + block x layers + epilogue); 1,000,000
  uint64_t max_session_bytes = 0;  // one session's KV cache and scratch; the machine's physical memory
};

enum class StopReason : uint8_t {
  eos,           // the model produced an end-of-generation token (not part of the result)
  stop,          // a stop string appeared (it and what follows are not part of the result)
  max_tokens,    // GenerateOptions::max_tokens tokens were generated
  cancelled,     // on_token returned false or the cancel flag was set
  context_full,  // the context is full (ContextPolicy::stop), or the prompt does not fit (then
                 // nothing is generated and GenerateResult::error says how long each is)
  error,         // an error after some text was produced: GenerateResult::error says which
};
// "eos", "stop", "max_tokens", "cancelled", "context_full", "error"
const char* to_string(StopReason reason) noexcept;

// GenerateOptions::seed value that asks for a fresh random seed (reported in the result).
inline constexpr uint64_t random_seed = ~uint64_t{0};

// Sampling chain: repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw
// (temperature 0: greedy argmax, ties to the lowest id). See the manual for the exact rules.
struct GenerateOptions {
  int max_tokens = 256;                // < 0: until end of generation, a stop string or a full context
  float temperature = 0.0f;            // 0: greedy
  int top_k = 0;                       // 0: off
  float top_p = 1.0f;                  // 1: off
  float min_p = 0.0f;                  // 0: off
  float repeat_penalty = 1.0f;         // 1: off
  int repeat_last_n = 64;              // tokens the penalty looks back on (prompt included); -1: all
  uint64_t seed = 0;                   // same seed, same text (any thread count); random_seed: fresh
  std::vector<std::string> stop = {};  // stop strings (matched on text, not included in the output)
  bool parse_special = false;          // Model::generate (plain text): special-token text such as
                                       // "<|im_start|>" becomes control tokens; off: it is plain text
  bool chat = false;                   // Model::generate from text: wrap the prompt in the model's chat
                                       // template. From token ids (Model::generate, Session::generate):
                                       // the ids are a chat prompt (Model::tokenize_chat), so the text
                                       // is a reply's, as Session::reply gives it (SentencePiece's
                                       // leading space of the first token dropped)
  std::string system = {};             // Model::generate with chat: a system message
  // Structured output (manual: "Structured output"); checked before the prompt is evaluated, an
  // impossible or malformed constraint is an error (invalid_argument naming line and column).
  std::string grammar = {};      // GBNF text (llama.cpp's syntax, rule `root`): the output is a
                                 // prefix of a string of the grammar, a whole one when stop is eos
  std::string json_schema = {};  // a JSON Schema (text): the output is JSON valid under it (when
                                 // stop is eos); not together with grammar
  std::vector<std::pair<int32_t, float> > logit_bias = {};  // (token id, added to its logit); -inf bans
  std::vector<int32_t> banned_tokens = {};                  // token ids never sampled
  // Streaming: receives the text as it is decided, in complete UTF-8 pieces, on the calling
  // thread; return false to cancel (StopReason::cancelled).
  std::function<bool(std::string_view piece)> on_token = {};
  // Cancel from anywhere: polled before each token and at least once per layer during the
  // prompt's evaluation.
  const std::atomic<bool>* cancel = nullptr;
};

struct Timings {
  double load_ms = 0;        // Model::load
  double prefill_ms = 0;     // evaluating the prompt tokens that were not cached
  double prefill_tps = 0;    // prompt tokens evaluated per second
  double decode_ms = 0;      // from the first generated token to the last
  double decode_tps = 0;     // generated tokens per second after the first
  double ttft_ms = 0;        // from the call to the first generated token
  double constraint_ms = 0;  // of the above, structured output: masking logits, feeding the grammar
};

struct GenerateResult {
  std::string text;             // the generated text (without the prompt or a stop string)
  std::vector<int32_t> tokens;  // generated ids (without the end-of-generation token)
  StopReason stop = StopReason::max_tokens;
  Error error;                      // with StopReason::error: what went wrong; with context_full
                                    // and no token: that the prompt does not fit
  int prompt_tokens = 0;            // tokens of the prompt (this turn's whole conversation)
  int prompt_tokens_evaluated = 0;  // of those, evaluated by this call
  int prompt_tokens_reused = 0;     // of those, already in the session's KV cache
  uint64_t seed = 0;                // the seed used (the drawn one for random_seed)
  int messages_dropped = 0;         // Session::reply with ContextPolicy::slide: oldest messages
                                    // dropped from the conversation to make room (see the manual)
  int tokens_shifted = 0;           // of prompt_tokens_reused, cached tokens moved to new positions
                                    // (their keys re-rotated) instead of evaluated again
  Timings timings;
  double peak_rss_mb = 0;  // peak resident memory of the process so far
  uint64_t kv_bytes = 0;   // KV cache of the session
};

struct Message {
  std::string role;
  std::string content;
};

// One step of a reply (Session::step): the next piece of text, or the end.
struct ReplyStep {
  std::string text;   // the next piece (complete UTF-8); empty when the step only evaluated prompt
                      // tokens or a token whose text is not final yet (held back for a stop string)
  bool done = false;  // the reply has ended: `stop` says why, Session::result() holds all of it
  StopReason stop = StopReason::max_tokens;
};

// Facts about a loaded model (Model::info).
struct ModelInfo {
  std::string path;          // as given to load ("" for load_from_memory: its name)
  std::string format;        // "gguf" or "safetensors"
  std::string architecture;  // "llama", "qwen3", ...
  std::string name;          // general.name, or the directory's name
  uint64_t file_bytes = 0;
  uint64_t n_params = 0;
  int n_vocab = 0;  // logits per position
  // Token ids a prompt may hold: 0 .. n_input_ids - 1 (the embedding's rows: n_vocab, or more when
  // the embedding is padded); an id outside fails eval()/generate(). Check ids from untrusted input
  // against it before taking a session, as examples/server does.
  int64_t n_input_ids = 0;
  int n_ctx_train = 0;  // the context the model was trained with
  int context = 0;      // tokens a session holds (LoadOptions::context or the default)
  int n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_ff = 0;
  KvType kv_type = KvType::f16;
  ContextPolicy context_policy = ContextPolicy::stop;
  uint64_t kv_bytes = 0;  // one session's KV cache
  std::string kernels;    // the kernel level in use ("avx512+amx", "avx512", "avx2+sums", "avx2", "neon", ...)
  int threads = 0;        // threads of the model's pool
  // Tokenizer: "" when the model has none usable (it runs from ids; tokenizer_error says why).
  std::string tokenizer;  // "gpt2" (byte-level BPE), "llama" (SentencePiece), ...
  std::string tokenizer_error;
  int32_t bos = -1, eos = -1, eot = -1, pad = -1, unk = -1;  // -1: none
  std::vector<int32_t> eog;                                  // every id that ends a generation
  bool add_bos = false;                                      // tokenize(add_special) starts with bos
  bool chat_template = false;  // the model has its own (otherwise the documented fallback is used)
  std::string identity;        // sha256 of the weights' metadata (checked by Session::load)
};

// Model::render_chat_template / render_chat_template: what the template sees besides the messages.
struct ChatTemplateOptions {
  bool add_generation_prompt = false;  // end with the header of an assistant turn
  // Template variables, set after the model's special tokens and the messages' `kwargs` (so they
  // override them): a name and its value as JSON text (true, 3, "text", [...], {...}); a value that
  // is not valid JSON is taken as a string. A special token's name (bos_token, eos_token, ...) with
  // a string value sets that token; "tools" sets the tools.
  std::vector<std::pair<std::string, std::string> > variables = {};
  // Jinja source rendered instead of the model's own template ("": the model's, or the fallback).
  std::string template_source = {};
  std::string messages_name = "messages";     // names the messages in errors (a file name, say)
  const std::atomic<bool>* cancel = nullptr;  // set: the render fails ("rendering cancelled")
};

struct RenderedChat {
  std::string text;  // the prompt
  // Byte ranges of `text` copied from message content, tools and documents (sorted, disjoint):
  // untrusted text, to tokenize without special-token parsing.
  std::vector<std::pair<size_t, size_t> > content_spans;
  bool fallback = false;  // rendered with the built-in ChatML template (the model has none)
};

// Counters of a model's continuous batching (LoadOptions::batch), since the model was loaded.
struct BatchStats {
  uint64_t steps = 0;         // forward passes run by the batcher
  uint64_t shared_steps = 0;  // of those, passes that evaluated more than one sequence
  uint64_t sequences = 0;     // sequence-chunks evaluated (sequences / steps: the mean batch)
};

class Model;
class Session;

namespace detail {
struct ModelImpl;
struct SessionImpl;
class Tokenizer;
// The implementation behind the public types, for the library's own tests (not an interface:
// programs, the examples among them, use the public API alone, and `make check-public-api` keeps
// examples/ so). Aborts with a message when `m` holds no model or `s` was moved from.
const ModelImpl& model_impl(const Model& m);
SessionImpl& session_impl(Session& s);
}  // namespace detail

// A default-constructed Model holds no model: every call returns an error (invalid_argument), or
// empty text from detokenize. A moved-from Session is the same: reply() returns an error, add()
// and reset() do nothing.
class Model {
 public:
  // A GGUF file, a safetensors file, or a Hugging Face / MLX model directory.
  static Result<Model> load(std::string_view path, const LoadOptions& options = {});
  // A GGUF file the caller holds in memory (an asset pack, a file inside an APK, mapped by the
  // caller): validated as a file is, used in place (never copied), so `data` must stay valid and
  // unchanged while the Model or any Session or copy of it lives. `name` names it in messages.
  // (options.read_into_memory copies it instead; then the buffer may go after load returns.)
  static Result<Model> load_from_memory(std::span<const uint8_t> data, std::string_view name = "memory",
                                        const LoadOptions& options = {});

  // One-shot generation (a fresh session each call; safe from many threads at once). The prompt
  // is plain text (BOS added as the model asks) or, with options.chat, a user message.
  Result<GenerateResult> generate(std::string_view prompt, const GenerateOptions& options = {}) const;
  // The same from token ids (used exactly as given: no BOS is added).
  Result<GenerateResult> generate(std::span<const int32_t> prompt_tokens, const GenerateOptions& options = {}) const;
  // A conversation that keeps its KV cache between turns.
  Session session() const;

  // add_special: add the BOS/EOS the model asks for; parse_special: special-token text in
  // `text` becomes control tokens (otherwise it is plain text).
  Result<std::vector<int32_t> > tokenize(std::string_view text, bool add_special = true,
                                         bool parse_special = false) const;
  // Always valid UTF-8 (bytes that do not decode become U+FFFD); special tokens are rendered as text.
  std::string detokenize(std::span<const int32_t> ids) const;
  // The conversation as Session::reply evaluates it: rendered by the model's chat template (or
  // the fallback) ending with the header of the assistant's turn when add_generation_prompt, and
  // tokenized so that message content never becomes control tokens (only the template's own
  // special-token text does); BOS first when the model asks for one and the template did not
  // write it. For Session::generate / generate with GenerateOptions::chat, and to count or check a
  // conversation's tokens before generating (e.g. against the context).
  Result<std::vector<int32_t> > tokenize_chat(std::span<const Message> messages,
                                              bool add_generation_prompt = true) const;
  // Renders the model's own chat template (or the documented fallback when it has none).
  Result<std::string> apply_chat_template(std::span<const Message> messages, bool add_generation_prompt = true) const;
  // Renders a conversation given as JSON text: an array of message objects ({"role", "content",
  // ...}: every key reaches the template), or {"messages": [...], "tools": [...], "documents":
  // [...], "kwargs": {...}} (each kwargs member becomes a variable). The "tool_use" template
  // variant is used when the JSON has tools and the model has one. Errors name the input
  // (options.messages_name) or the template's line.
  Result<RenderedChat> render_chat_template(std::string_view messages_json,
                                            const ChatTemplateOptions& options = {}) const;

  // The logits of `ids` evaluated as one sequence from position 0 in a fresh context that holds
  // them all (used exactly as given: no BOS is added): the last position's [n_vocab], or with
  // all_positions every position's [ids.size()][n_vocab]. (What `llminfer logits` writes.)
  Result<std::vector<float> > logits(std::span<const int32_t> ids, bool all_positions = false) const;

  // Continuous batching counters (all zero when not loaded or nothing was batched yet).
  BatchStats batch_stats() const;

  // Architecture, sizes, vocabulary, special tokens, context (an empty ModelInfo when not loaded).
  ModelInfo info() const;

  bool loaded() const noexcept { return impl_ != nullptr; }

 private:
  friend class Session;
  friend const detail::ModelImpl& detail::model_impl(const Model& m);
  std::shared_ptr<const detail::ModelImpl> impl_;
};

class Session {
 public:
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  // ---- the conversation ----
  // Appends a message ("system", "user", "assistant", ...) to the conversation.
  void add(std::string_view role, std::string_view content);
  // Renders the conversation with the model's chat template, evaluates only the tokens that are
  // not already in the session's KV cache, generates the assistant's reply and appends it to the
  // conversation. (options.chat and options.system are not used: add a "system" message.)
  // An error (a template that refuses the conversation, a cancelled render) changes nothing: fix
  // the messages (erase, replace) and reply again. A full context (ContextPolicy::stop) that
  // leaves no room for a single token ends with StopReason::context_full, no assistant message
  // and GenerateResult::error saying so. With ContextPolicy::slide the oldest turns after the
  // system message are dropped and the cache shifted instead (see the manual).
  Result<GenerateResult> reply(const GenerateOptions& options = {});
  void reset();  // forget the conversation and the cache
  const std::vector<Message>& messages() const;

  // History editing. The next reply() reuses the cached tokens up to the first change and
  // evaluates the rest. Out-of-range indices are invalid_argument errors (nothing changes).
  Result<void> erase(size_t index);  // removes messages()[index]
  Result<void> replace(size_t index, Message message);
  Result<void> truncate(size_t count);               // keeps the first `count` messages
  void set_messages(std::vector<Message> messages);  // the whole conversation

  // ---- a reply one step at a time (for a frame loop on one thread) ----
  // begin_reply() renders the conversation and prepares the reply (as reply() does, without
  // evaluating anything); each step() then does a bounded amount of work (a batch of up to 256
  // prompt tokens, or one generated token) and returns the text that became final, or the end
  // (done, with the stop reason; the reply then joins the conversation and result() holds it).
  // on_token, cancel and every other option work as in reply(), which is begin_reply() + step()
  // until done. add(), the edits, reset(), eval() and load() end a reply in progress as cancelled.
  Result<void> begin_reply(const GenerateOptions& options = {});
  Result<ReplyStep> step();              // an error ends the reply (nothing joins the conversation)
  bool replying() const;                 // between begin_reply() and the step that returned done
  const GenerateResult& result() const;  // the last reply that ended (begin_reply clears it)

  // ---- tokens ----
  // Generates after `prompt` (ids used exactly as given: no BOS is added) in this session's KV
  // cache: the cached tokens the prompt starts with are reused and only the rest is evaluated;
  // afterwards the cache holds the prompt and the generated tokens, for the next call to reuse (a
  // server's slot, a client that resends the whole conversation). The conversation (messages()) is
  // neither read nor changed. With options.chat the prompt is a chat prompt (Model::tokenize_chat)
  // and the text is a reply's. A reply in progress ends as cancelled; result() holds this one
  // afterwards. A full context ends as Model::generate does (ContextPolicy::slide: the cache slides).
  Result<GenerateResult> generate(std::span<const int32_t> prompt, const GenerateOptions& options = {});
  // Evaluates token ids after the cached ones (the prompt exactly as given: no BOS is added);
  // logits() then holds the logits of the last one ([n_vocab]), or with all_logits of each
  // ([n][n_vocab]). A full context is an error with ContextPolicy::stop (nothing is evaluated)
  // and slides with ContextPolicy::slide. `cancel` is polled once per layer.
  Result<void> eval(std::span<const int32_t> tokens, bool all_logits = false,
                    const std::atomic<bool>* cancel = nullptr);
  std::span<const float> logits() const;
  // One token from logits() by the sampling chain of `options` (temperature, top_k, top_p,
  // min_p, repeat_penalty over the cached tokens), drawn with the session's RNG (set_seed).
  // logit_bias and banned_tokens apply; a grammar or json_schema is an error (invalid_argument:
  // they constrain a whole reply, see begin_reply).
  Result<int32_t> sample(const GenerateOptions& options = {});
  void set_seed(uint64_t seed);                // as GenerateOptions::seed (reply() and generate() set it too)
  const std::vector<int32_t>& tokens() const;  // the tokens in the KV cache, in order
  Result<void> truncate_tokens(int count);     // keeps the first `count` cached tokens
  bool is_eog(int32_t id) const;               // whether the id ends a generation

  int cached_tokens() const;  // tokens in the KV cache
  int context_size() const;   // tokens the KV cache holds at most

  // ---- save and restore ----
  // The whole session (messages, cached tokens, KV cache, logits, RNG) as bytes or a file, and
  // back into a session of the same model (LoadOptions may differ in threads and in a context
  // that still holds the tokens, not in the KV type). After load() the session continues exactly
  // as the saved one would have. A file that is truncated, altered, of another version or made
  // with another model is refused with a message naming what is wrong; nothing changes then.
  // Not during a reply (invalid_argument).
  Result<std::vector<uint8_t> > save() const;
  Result<void> save(std::string_view path) const;
  Result<void> load(std::span<const uint8_t> bytes);
  Result<void> load(std::string_view path);

 private:
  friend class Model;
  friend detail::SessionImpl& detail::session_impl(Session& s);
  explicit Session(std::unique_ptr<detail::SessionImpl> impl);
  std::unique_ptr<detail::SessionImpl> impl_;
};

// A model's tokenizer without its weights: only the model's description is read (fast on big
// models). Copies share one immutable tokenizer, usable from many threads at once. A
// default-constructed Tokenizer holds none: tokenize() returns an error (invalid_argument),
// detokenize() empty text, n_vocab() 0.
class Tokenizer {
 public:
  // A GGUF file, a Hugging Face / MLX model directory, or a directory that holds only
  // tokenizer.json (with tokenizer_config.json, generation_config.json, config.json when present).
  static Result<Tokenizer> load(std::string_view path);

  // As Model::tokenize.
  Result<std::vector<int32_t> > tokenize(std::string_view text, bool add_special = true,
                                         bool parse_special = false) const;
  // As Model::detokenize (always valid UTF-8); skip_special leaves out special (control) tokens.
  // Ids outside 0 .. n_vocab()-1 add nothing.
  std::string detokenize(std::span<const int32_t> ids, bool skip_special = false) const;
  int n_vocab() const noexcept;

  bool loaded() const noexcept { return impl_ != nullptr; }

 private:
  std::shared_ptr<const detail::Tokenizer> impl_;
};

const char* version() noexcept;
// Peak resident memory of the process so far, in MiB (0 where the system does not say).
double peak_memory_mb() noexcept;

// Model::render_chat_template without loading the weights: only the description of the model at
// `model_path` is read (fast on big models). An empty model_path renders options.template_source
// with no special tokens but those in options.variables.
Result<RenderedChat> render_chat_template(std::string_view model_path, std::string_view messages_json,
                                          const ChatTemplateOptions& options = {});

// Token ids written as text, separated by commas and/or white space: "1,2,3", "1 2 3", or a JSON
// array "[1, 2]". At least one id unless allow_empty; an item that is not a non-negative 32-bit
// integer is an invalid_argument error naming it.
Result<std::vector<int32_t> > parse_token_ids(std::string_view text, bool allow_empty = false);

// ---- model files, definitions and logits, without loading a model (what `llminfer info`,
// `status` and `compare` print) ----

// A tensor of a model file (inspect_model_file).
struct TensorInfo {
  std::string name;            // GGUF naming (blk.0.attn_q.weight), whatever the file's format
  std::string type;            // as ggml names it: "f32", "bf16", "q4_K", "q8_0", ...
  std::vector<int64_t> shape;  // ggml order: shape[0] is the row length
  uint64_t offset = 0;         // where its data starts in its file
  uint64_t bytes = 0;          // its data (with the scales and biases of an MLX quantized tensor)
};

// A metadata value of a model file (inspect_model_file with InspectOptions::metadata).
struct MetadataEntry {
  // Where it is: "" for a GGUF file's key/value pairs; in a safetensors model "config.json" or
  // "generation_config.json" (their top-level members), or "__metadata__" (a weights file's header).
  std::string source;
  std::string key;
  // GGUF: "string", "bool", "u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "f32", "f64" or
  // "array"; the members of config files: "json"; __metadata__: "string".
  std::string type;
  std::string element_type;  // "array": the GGUF type of its elements
  uint64_t length = 0;       // "array": its elements
  // "string": the string itself, bytes as in the file. Otherwise the value as JSON (numbers as
  // written); an array with more than InspectOptions::max_array_items elements, at any depth, is
  // written {"type":T,"length":N,"first":[its first max_array_items elements]} ("type", the
  // element type, in GGUF files only).
  std::string value;
};

struct InspectOptions {
  bool metadata = false;         // fill ModelFileInfo::metadata
  bool tensors = false;          // fill ModelFileInfo::tensors
  uint64_t max_array_items = 8;  // metadata arrays longer than this are cut (0: never)
};

// What a model file says about itself (inspect_model_file).
struct ModelFileInfo {
  std::string path;          // as given
  std::string format;        // "gguf" or "safetensors"
  std::string architecture;  // "llama", "qwen3", ... (selects the architecture definition)
  std::string name;          // general.name, or the directory's name
  uint64_t file_bytes = 0;   // every weights file
  uint64_t n_params = 0;
  uint64_t n_tensors = 0;
  uint64_t tensor_bytes = 0;
  std::vector<std::pair<std::string, uint64_t> > tensor_types;  // (type, tensors of it), by type name
  int64_t n_layer = 0, n_embd = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_ctx_train = 0, head_dim = 0;
  double rope_freq_base = 0;
  std::string tokenizer;                // the vocabulary's kind: "gpt2" (byte-level BPE), "llama", ... ("": none)
  std::string tokenizer_pre;            // its pre-tokenizer: "llama-bpe", "qwen2", ... ("": none named)
  int64_t n_vocab = 0;                  // tokens in the vocabulary
  int32_t bos = -1, eos = -1;           // -1: none
  std::vector<int32_t> eos_ids;         // every end-of-sequence id the files name
  bool chat_template = false;           // the model has its own
  std::vector<MetadataEntry> metadata;  // with InspectOptions::metadata, in file order
  std::vector<TensorInfo> tensors;      // with InspectOptions::tensors, in file order
};

// A GGUF file, a .safetensors file or a model directory described without loading it: only the
// headers and the small side files are read (fast on big models; no architecture definition is
// needed, so this works for architectures the library cannot run). The file checks of Model::load
// apply: a malformed file is an error naming it.
Result<ModelFileInfo> inspect_model_file(std::string_view path, const InspectOptions& options = {});

// An architecture definition in effect (load_archdefs).
struct ArchdefInfo {
  std::string name;
  std::string origin;  // "builtin" or the file's path
  std::string sha256;  // of `text`
  int steps_per_layer = 0;
  std::string text;  // exactly as read
  // The conventions `text` does not declare (their defaults apply), as comment lines
  // ("# convention NAME = VALUE", after a heading line); "" when it declares them all.
  std::string default_conventions;
};
// A definition file that did not load (its architecture is unavailable: never a silent fallback).
struct ArchdefFailure {
  std::string name;  // the architecture, from the file's name
  std::string path;
  std::string error;  // file:line: what is wrong
};
struct Archdefs {
  std::vector<ArchdefInfo> defs;  // sorted by name
  std::vector<ArchdefFailure> failed;
};
// The architecture definitions a model loaded with LoadOptions::archdef_dir = `archdef_dir` would
// use: the built-ins, each replaced by the directory's <arch>.archdef when there is one. An error
// only when the directory cannot be read.
Result<Archdefs> load_archdefs(std::string_view archdef_dir = {});

// The kernels of this build, and the ones a model loaded now would run.
struct KernelInfo {
  std::string simd;                 // compiled for: "avx512+amx", "avx512", "avx2", "neon", "scalar" or "dispatch"
  std::vector<std::string> levels;  // kernel levels compiled in, lowest first
  std::string selected;             // the level a load with LoadOptions::kernels "" runs (see the manual); ""
                                    // when that load would fail, `error` saying why
  Error error;
};
KernelInfo kernel_info();

// How close logits are to reference logits, position by position (`llminfer compare`).
struct LogitsComparison {
  int positions = 0;
  bool top1_match_all = true;
  int top1_matches = 0;     // positions whose largest logit is the same token
  double pearson_mean = 0;  // Pearson correlation over the whole vocabulary
  double pearson_min = 1;
  double top10_overlap_mean = 0;  // tokens the two top-10 sets share
  int first_divergence = -1;      // the first position whose top-1 differs (-1: none)
  // Largest |ours - reference| over every finite logit, and that divided by the reference's largest
  // |logit| (a wrong scale or shift shows here: top-1, Pearson and top-10 ignore it).
  double max_abs_diff = 0, max_rel_diff = 0;
  double ref_max_abs = 0;
  // NaN or infinite logits: such a position never matches (top-1 differs, Pearson 0)
  uint64_t nonfinite_ours = 0, nonfinite_ref = 0;
  int first_nonfinite_pos = -1, first_nonfinite_id = -1;
};
// `ours` and `reference`: [positions][n_vocab] each, the same size (else invalid_argument).
Result<LogitsComparison> compare_logits(std::span<const float> ours, std::span<const float> reference, int n_vocab);
// Ids of the k largest logits of one position, largest first (ties: the lower id first, as
// llama.cpp's sampler).
std::vector<int32_t> top_k_ids(std::span<const float> logits, int k);
// log(sum(exp(logits))) of one position, in double: a token's log-probability is its logit minus
// this (-inf for no logits; not finite when a logit is not).
double logsumexp(std::span<const float> logits);

// Checks the values of `options` as generate(), reply() and begin_reply() do (the sampling
// parameters' ranges, stop strings that are empty or not UTF-8), without a model: invalid_argument
// naming the option. (grammar and json_schema: check_grammar, json_schema_to_grammar; token ids in
// logit_bias and banned_tokens: ModelInfo::n_vocab.)
Result<void> check_generate_options(const GenerateOptions& options);

// The GBNF grammar that GenerateOptions::json_schema compiles to (to inspect or edit it), or an
// error naming the unsupported keyword and where it is.
Result<std::string> json_schema_to_grammar(std::string_view schema);
// Checks a GBNF grammar as GenerateOptions::grammar would (syntax, undefined rules, left recursion,
// an empty language, limits), without a model: the error names line and column.
Result<void> check_grammar(std::string_view gbnf);

}  // namespace v0_1
}  // namespace llminfer

#endif  // C++20
#endif  // LLMINFER_HPP
