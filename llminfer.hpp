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
// `g++ -std=c++20 -O2 -march=native -pthread` (clang++ works too; link with -pthread). C++20 is
// required: as C++17 or older the header stops with one #error. Nothing needs exceptions or RTTI:
// the header builds with -fno-exceptions -fno-rtti. Linux, macOS and other POSIX systems map files
// with mmap; Windows with CreateFileMapping / MapViewOfFile (UTF-8 paths through the wide-character
// API; tested with MinGW-w64 under Wine, MSVC is not tested). Only the implementation TU needs the
// SIMD flags (see STYLE: the ODR hazard). CMake: the targets llminfer::llminfer (this header) and,
// with -DLLMINFER_BUILD_LIBRARY=ON, llminfer::impl (the implementation compiled); pkg-config:
// llminfer, llminfer-impl (README: "Building with CMake / pkg-config").
//
// ==== Model files ====
//
//   Model::load(path) takes a GGUF file (versions 2 and 3), a .safetensors file with config.json
//   beside it, or a Hugging Face / MLX model directory: config.json; model.safetensors, a sharded
//   model.safetensors.index.json, or *.safetensors; optional tokenizer.json, tokenizer_config.json,
//   generation_config.json, chat_template.jinja or chat_template.json. MLX affine 4- and 8-bit
//   checkpoints (packed U32 weights with .scales and .biases, "quantization" in config.json, with
//   per-module overrides) load as one quantized tensor each. Weights are used in place in the
//   mapping, never read into memory (unless LoadOptions::read_into_memory, below). Every ggml tensor
//   type is known by name; a type without kernels loads (`llminfer info` lists it) and is refused
//   only when a model computes with it. Only regular files are opened: a FIFO or a device is
//   refused (opened without waiting for a writer), as is an `<arch>.archdef` that is not one.
//
//   Files changing under the mapping: a mapped file must not be truncated or rewritten in place
//   while a model loaded from it is alive. Truncation kills every process that maps it (SIGBUS,
//   no message); rewriting it silently changes their weights. Replacing it by rename (write a new
//   file, then rename it over the old path) is safe: the old mapping keeps the old file. A program
//   that must survive such changes sets LoadOptions::read_into_memory (`--no-mmap` on the CLI): the
//   weights are read into memory the library owns (checked allocation: out_of_memory when it
//   fails; io when the file ends early), with the same results, at the cost of the file's size in
//   resident memory and the read time.
//
//   Load-time consistency: what the metadata says is checked against what the tensors hold,
//   generically from what the architecture definition binds: {arch}.embedding_length against the
//   width of the residual `x`, attention.head_count / head_count_kv against the heads the attention's
//   q and k widths give, the output's rows against the vocabulary (GGUF: tokenizer.ggml.tokens; any
//   format: {arch}.vocab_size, and never more than the embedding's rows), {arch}.block_count against
//   every blk.N tensor (a file holding more layers than it declares is refused), and the numbers
//   used as floats (rms epsilon, rope bases and scaling factors, rope factor tensors, definition
//   values) must be finite. Each error names the key and the tensor (shape_mismatch / bad_format).
//
//   Limits computed before allocating (LoadOptions; 0 means the default):
//     max_program_steps   compiled steps: prologue + block x block_count + epilogue (1,000,000);
//                         over it the load fails with out_of_memory, naming block_count and the
//                         steps per layer
//     max_session_bytes   a session's KV cache plus activation scratch (the machine's physical
//                         memory); over it the first generate/reply (Context creation) fails with
//                         out_of_memory naming both sizes: use a smaller LoadOptions::context
//
// ==== Build options (define before including, in the implementation TU) ====
//
//   LLMINFER_IMPLEMENTATION     compile the implementation into this translation unit
//   LLMINFER_INLINE_API         define the public functions `inline` (only for programs that define
//                               LLMINFER_IMPLEMENTATION in every unit that uses the library)
//   LLMINFER_SIMD_SCALAR        force the portable scalar kernels (also LLMINFER_FORCE_SCALAR)
//   LLMINFER_DISPATCH           x86-64: one binary for every CPU. Build with the baseline target
//                               (e.g. -march=x86-64, g++ or clang++); the kernels are compiled in
//                               for the levels scalar, avx2, avx512, avx512bf16 and the best the
//                               CPU (and OS) runs is chosen when a model loads (see below)
//   LLMINFER_NO_CPU_CHECK       do not verify at load that the CPU has the instructions compiled in
//   LLMINFER_MAX_TENSORS        largest tensor count a GGUF file may declare (default 1<<20)
//   LLMINFER_MAX_METADATA       largest metadata key/value count a GGUF file may declare (default 1<<20)
//   LLMINFER_MAX_JSON_DEPTH     deepest JSON nesting accepted (default 512)
//   LLMINFER_MAX_PROMPT_BYTES   most bytes one tokenizer call accepts (default 16 MiB; more is an
//                               invalid_argument error naming the limit; the environment variable of
//                               the same name overrides it at run time; tokenizing needs up to about
//                               50 bytes of memory per input byte, checked before it starts for inputs
//                               over 1 MiB, so a shortage is out_of_memory, not an abort)
//   Chat templates are untrusted input; everything they can do is bounded (errors name line:column):
//   LLMINFER_JINJA_MAX_TEMPLATE  bytes of template source (default 4 MiB)
//   LLMINFER_JINJA_MAX_DEPTH     nesting of blocks, elif branches and expressions (default 200), and of
//                                values built while rendering (lists, dicts, generator chains)
//   LLMINFER_JINJA_MAX_EVAL_DEPTH  nested evaluation while rendering (default 1000)
//   LLMINFER_JINJA_MAX_CALL_DEPTH  macro calls in flight (default 32)
//   LLMINFER_JINJA_MAX_STACK     stack bytes that parsing, and rendering, may use below their start
//                                (default 256 KiB, measured: templates render on a 512 KiB thread;
//                                1 MiB in an AddressSanitizer build, whose frames are larger)
//   LLMINFER_JINJA_MAX_STEPS     evaluation steps per render (default 10M, plus 10 per (message +
//                                tool)^2 and 1 per byte of conversation text; tests, filters and
//                                methods cost 1 step per 8 bytes of string operands, comparisons and
//                                searches 1 per 64, text written 1 per 64)
//   LLMINFER_JINJA_MAX_STRING    bytes of any string value and of the output (default 16 MiB)
//   LLMINFER_JINJA_MAX_LIST      items of a list built while rendering (default 262144)
//   LLMINFER_JINJA_MAX_RANGE     items of range() (default 100000, as Jinja2's sandbox)
//   GenerateOptions::cancel also stops a chat template render (polled every few thousand steps).
//   LLMI_ASSERT(x)              internal invariant check (default: message and abort); never used
//                               for anything a file or a caller controls
//
//   The kernels are chosen at compile time from the target's instruction set (-march): AVX-512
//   (F, BW, VL, with VNNI and BF16 when present), AVX2+FMA+F16C, NEON (with dotprod when present),
//   else scalar. MSVC: /arch:AVX2 and /arch:AVX512 select the AVX2 and AVX-512 kernels (not tested).
//   With LLMINFER_DISPATCH the levels are: scalar; avx2 (x86-64-v3: AVX2, FMA, F16C, BMI1/2, LZCNT,
//   MOVBE); avx512 (x86-64-v4: AVX512F/BW/CD/DQ/VL, and AVX512VNNI); avx512bf16 (avx512 and
//   AVX512_BF16, for vdpbf16ps). AVX and AVX-512 count only when the OS saves their registers.
//   LoadOptions::kernels, or else the environment variable LLMINFER_KERNELS, names a level to run
//   instead of the best one (for tests and comparisons); a level the CPU lacks is cpu_unsupported,
//   an unknown name invalid_argument. At each level the dispatch build computes what the native
//   build of that level does for the kernels (`tools/dispatch-check`); code outside the kernels
//   (norms, rope, sampling) is compiled for the baseline. A native build runs only its own level
//   (LoadOptions::kernels may name it) and ignores LLMINFER_KERNELS. `llminfer status` says which
//   kernels run ("simd", "kernels", "kernel_levels").
//
// ==== Threads and ownership ====
//
//   A Model is immutable after load and cheap to copy (copies share the weights). Sessions are
//   independent: one session must be used by one thread at a time, separate sessions may run at
//   once on one model. Callbacks run on the thread that called generate()/reply().
//
// ==== Architecture definitions (archdef) ====
//
//   An architecture is a short text, not code: `llama`, `qwen2`, `qwen3`, `gemma3`, `phi3`,
//   `starcoder2`, `stablelm`, `smollm3`, `gemma2` and `olmo2` (OLMo 2, and OLMo 3 with its sliding
//   window) are built in (`llminfer status --dump llama` prints one); a directory of <arch>.archdef
//   files (LoadOptions::archdef_dir, `--archdef DIR`) overrides the built-in of the same name. A
//   file that does not load makes its architecture unavailable (loading such a model fails and lists
//   the broken files); there is never a silent fallback to the built-in. `llminfer status` shows each
//   definition in effect with its steps per layer, origin and sha256.
//
//   file      := one statement per line; '#' starts a comment; blank lines are ignored
//   header    := 'arch' NAME                      (must equal the file name without .archdef)
//              | 'kind' 'decoder'
//              | 'param' NAME '=' ALT ('|' ALT)*  (ALT: a metadata key like {arch}.rope.freq_base_swa,
//                                                  nonzero(KEY), or a VALUE; the first that exists
//                                                  is used. A key holding an array gives one value
//                                                  per layer (its length must be block_count),
//                                                  usable in the block only. nonzero(KEY): a key
//                                                  holding 0 counts as absent:
//                                   param s = nonzero({arch}.attention.scale) | rsqrt(head_dim)
//              | 'convention' NAME '=' CHOICE     (a rule that depends on the file format, stated in
//                                                  the text; see "Conventions" below)
//   sections  := 'prologue' | 'block' | 'epilogue' (each once, in this order; the block runs once
//                                                  per layer with {i} = the layer index)
//   statement := DST '=' OP '(' ARGS ')'           (a new value in register DST)
//              | OP '(' REG ARGS ')'               (updates register REG in place)
//   ARGS      := positional arguments, then KEY '=' ARG keyword arguments, comma separated
//   TENSOR    := a GGUF tensor name (blk.{i}.attn_q.weight); 'a | b' = a, or b when the model has
//                no a; a final '| none' makes the step optional (skipped when no name exists; a
//                register it would assign must be assigned before and keeps what it held)
//   VALUE     := arithmetic in double over numbers, params and model values (n_embd n_layer
//                n_head n_head_kv head_dim head_dim_v n_ff n_vocab n_ctx_train rms_eps rope_base
//                rope_dims norm_eps): + - * / ( ), unary -, sqrt(V), rsqrt(V), and every(P, O) = 1
//                on the layers i with i % P == O, else 0 (block only). Granite's logits / logit_scale:
//                scale(logits, 1 / logit_scale); phi3's fused v:
//                slice(qkv, (n_head + n_head_kv) * head_dim, n_head_kv * head_dim). No comparisons,
//                conditionals or calls: per-layer differences are data (every(), metadata arrays).
//                norm_eps is {arch}.attention.layer_norm_epsilon (1e-5 when absent).
//   skip      := every statement of the block takes `skip = VALUE`: the step is left out of the
//                layers where the value is not 0 (like '| none', a register it would assign must be
//                assigned before): rope(q, pairs, skip = every(4, 3))  # no rope on layers 3, 7, ...
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
//   layer_norm(r, W, bias=B, eps=norm_eps)
//                                      LayerNorm: (r - mean) / sqrt(var + eps) * W + B over the row;
//                                      bias optional (a tensor, '| none' allowed):
//                                h = layer_norm(x, blk.{i}.attn_norm.weight, bias = blk.{i}.attn_norm.bias)
//   layer_norm_heads(r, W, bias=B, eps=norm_eps)   the same per head of head_dim; W (and B) of
//                                      head_dim elements (shared) or the register's width (a weight
//                                      per head, any shape: [head_dim, n_head]):
//                                      layer_norm_heads(q, blk.{i}.attn_q_norm.weight | none)
//   y = slice(r, START, WIDTH)         columns START .. START+WIDTH-1 of each row (fused tensors):
//                                      q = slice(qkv, 0, n_head * head_dim)
//   y = matmul(r, W)                   y[t][j] = sum_k W[j][k] r[t][k] (any computable weight type)
//   add_bias(r, B)                     r + B
//   rope(r, pairs|neox, factors=T, base=V, base_swa=V, dims=rope_dims)
//                                      rotary positions on each head of head_dim: `pairs` rotates
//                                      (2i, 2i+1) (GGUF llama, whose q/k rows the converter permuted),
//                                      `neox` rotates (i, i + dims/2). Angle = pos * base^(-2i/dims)
//                                      / factor_i. factors: a tensor (llama-3 rope_freqs); without it
//                                      the model's metadata {arch}.rope.scaling.type applies (linear,
//                                      llama3). base_swa replaces base on sliding-window layers.
//                                      dims < head_dim: partial rotary (the first dims of each head;
//                                      stablelm: rope(q, neox, dims = rope_dims)). Hugging Face
//                                      checkpoints keep q/k in rotate-half order: `pairs` runs as
//                                      `neox` for them (convention hf_rope).
//   a = attention(q, k, v, window=0, period=0, offset=P-1, sliding=V, scale=rsqrt(head_dim),
//                 softcap=0)
//                                      causal grouped-query attention over the layer's KV cache
//                                      (q: n_head heads, k/v: n_head_kv heads of head_dim/head_dim_v);
//                                      stores k and v. window > 0: a token sees the `window` latest
//                                      positions, on every layer, or with period P > 0 on all but
//                                      the layers i with i % P == offset (default P - 1: layer i is
//                                      global when (i+1) % P == 0; offset = 0: global at 0, P, 2P):
//                                      attention(q, k, v, window = w, period = 4, offset = 0).
//                                      sliding = V instead of period/offset: per layer, sliding
//                                      where V is not 0 (a metadata array, or every()):
//                                      attention(q, k, v, window = w, sliding = swa_layers).
//                                      window may differ per layer (0: global).
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
//   Conventions (`convention NAME = CHOICE` before the sections) are the rules that depend on the
//   file format; the built-ins declare all three. A definition that does not declare one gets its
//   default (the behaviour from before conventions existed), and `status --dump` lists those:
//     matmul_input = gguf_rounded | f32  gguf_rounded (default): in GGUF files the input of a
//                                      product with an F16/BF16 weight is rounded to that type first
//                                      (ggml's arithmetic; safetensors checkpoints compute in f32).
//                                      f32: never rounded.
//     hf_rope = neox | as_written        neox (default): Hugging Face checkpoints keep q/k rows in
//                                      rotate-half order, so rope `pairs` runs as `neox` for them.
//     hf_norm_offset = N                 Hugging Face checkpoints store the weights of rms_norm,
//                                      norm_heads and layer_norm(_heads) as w - N; N is added when
//                                      they are read (Gemma: convention hf_norm_offset = 1).
//                                      Default: the loader's table by config.json model_type
//                                      (gemma3: 1, else 0).
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
//   Error naming the file and what is wrong, never a crash, a hang or an unbounded allocation
//   (nothing is allocated from a count before the file is known to hold that many entries). The
//   readers are tested on a corpus of over 100 malformed files and fuzzed (libFuzzer, ASan, UBSan).
//
// ==== Errors ====
//
//   Every fallible call returns Result<T>: `if (!r)` then r.error().code (Errc: invalid_argument,
//   io, bad_format, unsupported, tensor_missing, shape_mismatch, archdef, tokenizer,
//   template_error, cpu_unsupported, out_of_memory, internal; describe(code) gives its text) and
//   r.error().message, which names the file or input and what is wrong. Reading the value of a
//   Result that holds an error (`*r`, `r->`, `r.value()`) is a caller bug: the library prints the
//   error's message to stderr and aborts, in every build (never undefined behaviour). A
//   default-constructed Model and a moved-from Session are safe: their calls return invalid_argument
//   (detokenize: empty text; Session::add / reset: nothing). A prompt longer than the context
//   (ContextPolicy::stop) ends with StopReason::context_full, no tokens, and GenerateResult::error
//   naming both lengths; `llminfer run` then exits 2. Allocations the engine sizes from the model
//   (KV cache, scratch, loader buffers) are checked and fail with out_of_memory.
//
// ==== Version ====
//
//   LLMINFER_VERSION_MAJOR / _MINOR / _PATCH / _STRING below; llminfer::version() at run time.
//   Everything is in namespace llminfer::v0_1 (inline), so two versions in one program do not clash.
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

// C++20 or later, or one error that says so (MSVC keeps __cplusplus at 199711L unless
// /Zc:__cplusplus: _MSVC_LANG is its real value). Everything else in the header is skipped then,
// the implementation too, so that this is the only message.
#if defined(__cplusplus) && ((defined(_MSVC_LANG) && _MSVC_LANG < 202002L) || \
                             (!defined(_MSVC_LANG) && __cplusplus < 202002L))
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
  int threads = 0;                 // 0: the number of hardware threads
  int context = 0;                 // tokens per session; 0: min(trained context, 4096)
  std::string archdef_dir = {};    // directory of <arch>.archdef files that override built-ins
  KvType kv_type = KvType::f16;    // element type of the KV cache
  ContextPolicy context_policy = ContextPolicy::stop;
  int keep = 4;                    // ContextPolicy::slide keeps this many first tokens
  // Kernel level (a build with LLMINFER_DISPATCH): "" the best this CPU has (or the environment
  // variable LLMINFER_KERNELS), else "scalar", "avx2", "avx512" or "avx512bf16" (at most what the
  // CPU has). A native build runs the one level it was compiled for and accepts only its name.
  std::string kernels = {};
  std::function<void(std::string_view)> log = {};  // diagnostics; silent when empty
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
  int max_tokens = 256;            // < 0: until end of generation, a stop string or a full context
  float temperature = 0.0f;        // 0: greedy
  int top_k = 0;                   // 0: off
  float top_p = 1.0f;              // 1: off
  float min_p = 0.0f;              // 0: off
  float repeat_penalty = 1.0f;     // 1: off
  int repeat_last_n = 64;          // tokens the penalty looks back on (prompt included); -1: all
  uint64_t seed = 0;               // same seed, same text (any thread count); random_seed: fresh
  std::vector<std::string> stop = {};  // stop strings (matched on text, not included in the output)
  bool parse_special = false;      // Model::generate (plain text): special-token text such as
                                   // "<|im_start|>" becomes control tokens; off: it is plain text
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
  Error error;                       // with StopReason::error: what went wrong; with context_full
                                     // and no token: that the prompt does not fit
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

// A default-constructed Model holds no model: every call returns an error (invalid_argument), or
// empty text from detokenize. A moved-from Session is the same: reply() returns an error, add()
// and reset() do nothing.
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
  // Always valid UTF-8 (bytes that do not decode become U+FFFD); special tokens are rendered as text.
  std::string detokenize(std::span<const int32_t> ids) const;
  // Renders the model's own chat template (or the documented fallback when it has none).
  Result<std::string> apply_chat_template(std::span<const Message> messages,
                                          bool add_generation_prompt = true) const;

  bool loaded() const noexcept { return impl_ != nullptr; }
  const detail::ModelImpl& impl() const;  // for tools and tests (aborts with a message when not loaded)

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

  detail::SessionImpl& impl();  // for tools and tests (aborts with a message when moved from)

 private:
  friend class Model;
  explicit Session(std::unique_ptr<detail::SessionImpl> impl);
  std::unique_ptr<detail::SessionImpl> impl_;
};

const char* version() noexcept;

}  // namespace v0_1
}  // namespace llminfer

#endif  // C++20
#endif  // LLMINFER_HPP

// ---- src/10_impl_begin.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Implementation ====
// Compiled only where LLMINFER_IMPLEMENTATION is defined. Internal functions (namespace detail) are
// `inline`, so tools and tests may define LLMINFER_IMPLEMENTATION in several translation units built
// with the same flags. The public functions declared above are defined with LLMI_API_DEF: ordinary
// (non-inline) definitions, emitted once, in the one translation unit that defines
// LLMINFER_IMPLEMENTATION, so that every other unit links against them with the declarations alone.
// A program that defines LLMINFER_IMPLEMENTATION in several units (our tests and CLI) also defines
// LLMINFER_INLINE_API everywhere: then the public functions are `inline` too.
// LLMINFER_DISPATCH: the header includes itself again once per x86 kernel level (LLMI_KERNEL_PASS
// set, see 21_kernels_begin): such a pass compiles the kernel parts only.
#if defined(LLMINFER_IMPLEMENTATION) && (!defined(LLMINFER_IMPLEMENTATION_INCLUDED) || defined(LLMI_KERNEL_PASS))
#if !defined(LLMI_KERNEL_PASS)
#define LLMINFER_IMPLEMENTATION_INCLUDED

#if defined(LLMINFER_INLINE_API)
#define LLMI_API_DEF inline
#else
#define LLMI_API_DEF
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
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
#include <set>
#include <thread>
#include <tuple>
#include <type_traits>
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
// MSVC never defines __FMA__ / __F16C__: its /arch:AVX2 (which defines __AVX2__) implies them,
// and /arch:AVX512 defines __AVX512F__, __AVX512BW__, __AVX512VL__, __AVX512DQ__, __AVX512CD__.
// LLMINFER_DISPATCH (x86-64, g++ / clang++): the code outside the kernels is compiled for the
// baseline the compiler targets; the kernels are compiled for several levels (21_kernels_begin)
// and the best one the CPU has is chosen at load. Here (the baseline) LLMI_SIMD_SCALAR is set.
#if defined(_MSC_VER) && !defined(__clang__) && defined(__AVX2__)
#define LLMI_HAS_FMA_F16C 1
#elif defined(__FMA__) && defined(__F16C__)
#define LLMI_HAS_FMA_F16C 1
#endif
#if defined(LLMINFER_DISPATCH) && !(defined(__x86_64__) || defined(_M_X64))
#error "LLMINFER_DISPATCH is for x86-64 (elsewhere build for the target CPU: LLMINFER_SIMD_* / -march)"
#endif
#if defined(LLMINFER_DISPATCH)
#define LLMI_DISPATCH 1
#define LLMI_SIMD_SCALAR 1
#elif defined(LLMINFER_FORCE_SCALAR) || defined(LLMINFER_SIMD_SCALAR)
#define LLMI_SIMD_SCALAR 1
#elif defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(LLMI_HAS_FMA_F16C)
#define LLMI_SIMD_AVX512 1
#define LLMI_SIMD_AVX2 1  // AVX-512 machines also run the 256-bit kernels where they fit better
#elif defined(__AVX2__) && defined(LLMI_HAS_FMA_F16C)
#define LLMI_SIMD_AVX2 1
#elif defined(__ARM_NEON) || defined(_M_ARM64)
#define LLMI_SIMD_NEON 1
#else
#define LLMI_SIMD_SCALAR 1
#endif
#if defined(LLMI_SIMD_AVX512) && defined(__AVX512VNNI__)
#define LLMI_SIMD_VNNI 1
#endif
#if defined(LLMI_SIMD_AVX512) && defined(__AVX512BF16__)
#define LLMI_SIMD_BF16 1  // vdpbf16ps (bf16 weights times bf16-exact activations)
#endif
#if defined(LLMI_SIMD_AVX2) || defined(LLMI_SIMD_AVX512) || defined(LLMI_DISPATCH)
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
#endif  // !LLMI_KERNEL_PASS

// ---- src/11_platform.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
// ==== Platform: errors, checked arithmetic, UTF-8, mmap, files, clocks, CPU check ====
namespace llminfer {
inline namespace v0_1 {

LLMI_API_DEF const char* describe(Errc code) noexcept {
  switch (code) {
#define LLMINFER_X(name, text) \
  case Errc::name:             \
    return text;
    LLMINFER_ERRC_LIST(LLMINFER_X)
#undef LLMINFER_X
  }
  return "unknown error";
}

LLMI_API_DEF const char* version() noexcept { return LLMINFER_VERSION_STRING; }

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

// Integer overflow checks for any integer type T (int64_t in the template language): true when
// a op b does not fit in T (*out is then unspecified). GCC and clang have builtins for them; the
// portable versions (MSVC, and the tests' reference) only compare before computing.
template <class T>
inline bool portable_add_overflow(T a, T b, T* out) {
  constexpr T hi = std::numeric_limits<T>::max(), lo = std::numeric_limits<T>::min();
  if constexpr (std::is_signed_v<T>) {
    if ((b > 0 && a > hi - b) || (b < 0 && a < lo - b)) return true;
  } else {
    if (a > hi - b) return true;
  }
  *out = static_cast<T>(a + b);
  return false;
}
template <class T>
inline bool portable_sub_overflow(T a, T b, T* out) {
  constexpr T hi = std::numeric_limits<T>::max(), lo = std::numeric_limits<T>::min();
  if constexpr (std::is_signed_v<T>) {
    if ((b < 0 && a > hi + b) || (b > 0 && a < lo + b)) return true;
  } else {
    if (a < b) return true;
  }
  *out = static_cast<T>(a - b);
  return false;
}
template <class T>
inline bool portable_mul_overflow(T a, T b, T* out) {
  constexpr T hi = std::numeric_limits<T>::max(), lo = std::numeric_limits<T>::min();
  if (a == 0 || b == 0) {
    *out = 0;
    return false;
  }
  if constexpr (std::is_signed_v<T>) {
    // (integer division truncates towards zero, which is the rounding each bound needs)
    if (a > 0 ? (b > 0 ? a > hi / b : b < lo / a) : (b > 0 ? a < lo / b : a < hi / b)) return true;
  } else {
    if (b > hi / a) return true;
  }
  *out = static_cast<T>(a * b);
  return false;
}
#if defined(__GNUC__) || defined(__clang__)
template <class T>
inline bool add_overflow(T a, T b, T* out) { return __builtin_add_overflow(a, b, out); }
template <class T>
inline bool sub_overflow(T a, T b, T* out) { return __builtin_sub_overflow(a, b, out); }
template <class T>
inline bool mul_overflow(T a, T b, T* out) { return __builtin_mul_overflow(a, b, out); }
#else
template <class T>
inline bool add_overflow(T a, T b, T* out) { return portable_add_overflow(a, b, out); }
template <class T>
inline bool sub_overflow(T a, T b, T* out) { return portable_sub_overflow(a, b, out); }
template <class T>
inline bool mul_overflow(T a, T b, T* out) { return portable_mul_overflow(a, b, out); }
#endif

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
  // The whole file read into memory this object owns (no mapping: the file may change afterwards).
  static Result<MappedFile> read(const std::string& path);
  bool owned() const { return owned_ != nullptr; }

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
    std::swap(owned_, o.owned_);
#if defined(_WIN32)
    std::swap(mapping_, o.mapping_);
#endif
  }
  // Frees owned memory (read()); true when there was some (then there is no mapping to close).
  bool free_owned() {
    if (!owned_) return false;
    std::free(owned_);
    owned_ = nullptr;
    data_ = nullptr;
    size_ = 0;
    return true;
  }
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
  void* owned_ = nullptr;
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

// "the system cannot find the file specified (error 2)": the system's text for a Win32 error code.
inline std::string win_error_text(DWORD code) {
  wchar_t* buf = nullptr;
  DWORD n = FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
                           nullptr, code, 0, reinterpret_cast<wchar_t*>(&buf), 0, nullptr);
  std::string text;
  if (n > 0 && buf) {
    int len = WideCharToMultiByte(CP_UTF8, 0, buf, static_cast<int>(n), nullptr, 0, nullptr, nullptr);
    if (len > 0) {
      text.resize(static_cast<size_t>(len));
      WideCharToMultiByte(CP_UTF8, 0, buf, static_cast<int>(n), text.data(), len, nullptr, nullptr);
    }
  }
  if (buf) LocalFree(buf);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '.'))
    text.pop_back();
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text.empty() ? strf("error %lu", code) : strf("%s (error %lu)", text.c_str(), code);
}

// Paths are UTF-8 and opened with the wide-character API (any file name, not the ANSI code page);
// sizes and the view are 64-bit (a whole file of any size on a 64-bit system).
inline Result<MappedFile> MappedFile::open(const std::string& path) {
  std::wstring wpath = utf8_to_wide(path);
  if (wpath.empty()) return make_error(Errc::io, path + ": cannot open: not a valid UTF-8 path");
  DWORD attrs = GetFileAttributesW(wpath.c_str());
  if (attrs != INVALID_FILE_ATTRIBUTES && (attrs & FILE_ATTRIBUTE_DIRECTORY))
    return make_error(Errc::io, path + ": not a regular file");
  HANDLE f = CreateFileW(wpath.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                         FILE_ATTRIBUTE_NORMAL, nullptr);
  if (f == INVALID_HANDLE_VALUE)
    return make_error(Errc::io, strf("%s: cannot open: %s", path.c_str(), win_error_text(GetLastError()).c_str()));
  if (GetFileType(f) != FILE_TYPE_DISK) {  // NUL, CON, pipes
    CloseHandle(f);
    return make_error(Errc::io, path + ": not a regular file");
  }
  LARGE_INTEGER sz;
  if (!GetFileSizeEx(f, &sz)) {
    std::string e = win_error_text(GetLastError());
    CloseHandle(f);
    return make_error(Errc::io, strf("%s: cannot get the file size: %s", path.c_str(), e.c_str()));
  }
  MappedFile m;
  m.path_ = path;
  m.size_ = static_cast<uint64_t>(sz.QuadPart);
  if (m.size_ == 0) {
    CloseHandle(f);
    return m;
  }
  if (m.size_ > static_cast<uint64_t>(SIZE_MAX)) {
    CloseHandle(f);
    return make_error(Errc::io, path + ": the file is larger than this process can map");
  }
  m.mapping_ = CreateFileMappingW(f, nullptr, PAGE_READONLY, 0, 0, nullptr);
  DWORD e = GetLastError();
  CloseHandle(f);  // the mapping keeps the file open
  if (!m.mapping_) return make_error(Errc::io, strf("%s: cannot map: %s", path.c_str(), win_error_text(e).c_str()));
  m.data_ = static_cast<const uint8_t*>(MapViewOfFile(m.mapping_, FILE_MAP_READ, 0, 0, 0));
  if (!m.data_)
    return make_error(Errc::io, strf("%s: cannot map: %s", path.c_str(), win_error_text(GetLastError()).c_str()));
  return m;
}

inline void MappedFile::close() {
  if (free_owned()) return;
  if (data_) UnmapViewOfFile(data_);
  if (mapping_) CloseHandle(mapping_);
  data_ = nullptr;
  mapping_ = nullptr;
  size_ = 0;
}

inline void MappedFile::release(uint64_t, uint64_t) const {}

inline Result<MappedFile> MappedFile::read(const std::string& path) {
  FILE* f = _wfopen(utf8_to_wide(path).c_str(), L"rb");
  if (!f) return make_error(Errc::io, path + ": cannot open");
  MappedFile m;
  m.path_ = path;
  if (_fseeki64(f, 0, SEEK_END) != 0) {
    std::fclose(f);
    return make_error(Errc::io, path + ": cannot get the file size");
  }
  long long size = _ftelli64(f);
  _fseeki64(f, 0, SEEK_SET);
  if (size < 0 || static_cast<unsigned long long>(size) > static_cast<unsigned long long>(SIZE_MAX)) {
    std::fclose(f);
    return make_error(Errc::io, path + ": cannot get the file size");
  }
  m.owned_ = std::malloc(static_cast<size_t>(std::max<long long>(size, 1)));
  if (!m.owned_) {
    std::fclose(f);
    return make_error(Errc::out_of_memory, path + ": cannot allocate " + human_bytes(static_cast<uint64_t>(size)) +
                                               " to read the file into memory");
  }
  m.data_ = static_cast<const uint8_t*>(m.owned_);
  m.size_ = static_cast<uint64_t>(size);
  size_t got = std::fread(m.owned_, 1, static_cast<size_t>(size), f);
  std::fclose(f);
  if (got != static_cast<size_t>(size)) return make_error(Errc::io, path + ": cannot read the whole file");
  return m;
}

inline bool is_directory(const std::string& path) {
  DWORD a = GetFileAttributesW(utf8_to_wide(path).c_str());
  return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY);
}
inline bool file_exists(const std::string& path) {
  DWORD a = GetFileAttributesW(utf8_to_wide(path).c_str());
  return a != INVALID_FILE_ATTRIBUTES && !(a & FILE_ATTRIBUTE_DIRECTORY);
}
inline std::vector<std::string> list_directory(const std::string& path, bool = true) {
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
inline uint64_t physical_memory_bytes() {
  MEMORYSTATUSEX ms;
  ms.dwLength = sizeof ms;
  return GlobalMemoryStatusEx(&ms) ? static_cast<uint64_t>(ms.ullTotalPhys) : 0;
}
inline double peak_rss_mb() {
  PROCESS_MEMORY_COUNTERS pmc;
  if (GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc))
    return static_cast<double>(pmc.PeakWorkingSetSize) / (1024.0 * 1024.0);
  return 0;
}
#else
// Opens a regular file for reading. O_NONBLOCK: opening a FIFO (or a device) must not wait for a
// writer; such files are refused once open (fstat says what they are).
inline Result<int> open_regular_file(const std::string& path, uint64_t& size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return make_error(Errc::io, strf("%s: cannot open: %s", path.c_str(), std::strerror(errno)));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return make_error(Errc::io, strf("%s: cannot stat: %s", path.c_str(), std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(Errc::io, path + (S_ISFIFO(st.st_mode) ? ": is a pipe (FIFO), not a regular file"
                                        : S_ISDIR(st.st_mode) ? ": is a directory, not a regular file"
                                                              : ": not a regular file"));
  }
  size = static_cast<uint64_t>(st.st_size);
  return fd;
}

inline Result<MappedFile> MappedFile::read(const std::string& path) {
  uint64_t size = 0;
  auto fd = open_regular_file(path, size);
  if (!fd) return fd.error();
  MappedFile m;
  m.path_ = path;
  if (size > (uint64_t(1) << 46) || size > static_cast<uint64_t>(SIZE_MAX)) {
    ::close(*fd);
    return make_error(Errc::out_of_memory, path + ": the file is too large to read into memory");
  }
  m.owned_ = std::malloc(static_cast<size_t>(std::max<uint64_t>(size, 1)));
  if (!m.owned_) {
    ::close(*fd);
    return make_error(Errc::out_of_memory, strf("%s: cannot allocate %s to read the file into memory", path.c_str(),
                                                human_bytes(size).c_str()));
  }
  m.data_ = static_cast<const uint8_t*>(m.owned_);
  m.size_ = size;
  uint64_t got = 0;
  auto* dst = static_cast<uint8_t*>(m.owned_);
  while (got < size) {
    ssize_t n = ::read(*fd, dst + got, static_cast<size_t>(std::min<uint64_t>(size - got, uint64_t(1) << 30)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : 0;
      ::close(*fd);
      return make_error(Errc::io, e ? strf("%s: cannot read: %s", path.c_str(), std::strerror(e))
                                    : strf("%s: the file ended after %llu of %llu bytes (it changed while it was read)",
                                           path.c_str(), static_cast<unsigned long long>(got),
                                           static_cast<unsigned long long>(size)));
    }
    got += static_cast<uint64_t>(n);
  }
  ::close(*fd);
  return m;
}

inline Result<MappedFile> MappedFile::open(const std::string& path) {
  uint64_t size = 0;
  auto ofd = open_regular_file(path, size);
  if (!ofd) return ofd.error();
  int fd = *ofd;
  MappedFile m;
  m.path_ = path;
  m.size_ = size;
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
  if (free_owned()) return;
  if (data_) munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  data_ = nullptr;
  size_ = 0;
}

inline void MappedFile::release(uint64_t offset, uint64_t bytes) const {
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0 || !data_ || owned_ || offset >= size_) return;
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
// Names of the regular files in a directory (every entry but . and .. when !regular_only), sorted.
inline std::vector<std::string> list_directory(const std::string& path, bool regular_only = true) {
  std::vector<std::string> out;
  DIR* d = opendir(path.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (!regular_only || file_exists(path_join(path, name))) out.push_back(name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}
// Peak resident memory of this process (MiB).
// Installed memory (0 when unknown).
inline uint64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}
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
// "dispatch": the kernels of several levels, chosen at load (select_kernels, 26_kernels_end).
constexpr const char* simd_compiled() {
#if defined(LLMI_DISPATCH)
  return "dispatch";
#elif defined(LLMI_SIMD_AVX512)
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

// (A dispatch build asks the CPU which kernel level it runs even with LLMINFER_NO_CPU_CHECK.)
#if (defined(__x86_64__) || defined(_M_X64) || defined(__i386__)) && \
    (!defined(LLMINFER_NO_CPU_CHECK) || defined(LLMINFER_DISPATCH))
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

// Whether this CPU (and OS) can run kernel level `level` of a dispatch build: 0 scalar, 1 avx2
// (AVX2, FMA, F16C and the rest of x86-64-v3), 2 avx512 (x86-64-v4: AVX512F/BW/CD/DQ/VL, with
// AVX512VNNI), 3 avx512bf16 (2 and AVX512_BF16). AVX and AVX-512 need the OS to save their
// registers (XCR0).
inline bool cpu_has_kernel_level(int level) {
  const CpuInfo c = cpu_query ? cpu_query() : cpu_query_hw();
  auto bit = [](uint32_t w, int b) { return ((w >> b) & 1) != 0; };
  const bool ymm = (c.xcr0 & 0x6) == 0x6, zmm = (c.xcr0 & 0xE6) == 0xE6;
  const bool v3 = ymm && bit(c.l1_ecx, 0) && bit(c.l1_ecx, 9) && bit(c.l1_ecx, 19) && bit(c.l1_ecx, 20) &&
                  bit(c.l1_ecx, 23) && bit(c.l1_ecx, 22) && bit(c.l1_ecx, 28) && bit(c.l1_ecx, 12) &&
                  bit(c.l1_ecx, 29) && bit(c.l7_ebx, 5) && bit(c.l7_ebx, 3) && bit(c.l7_ebx, 8) && bit(c.e1_ecx, 5);
  const bool v4 = v3 && zmm && bit(c.l7_ebx, 16) && bit(c.l7_ebx, 17) && bit(c.l7_ebx, 28) && bit(c.l7_ebx, 30) &&
                  bit(c.l7_ebx, 31) && bit(c.l7_ecx, 11);
  switch (level) {
    case 0: return true;
    case 1: return v3;
    case 2: return v4;
    case 3: return v4 && bit(c.l7s1_eax, 5);
    default: return false;
  }
}

// Empty when this CPU (and OS) can run what was compiled in; otherwise the missing features.
// Every instruction-set macro the compiler defines is checked, since -march lets it use them
// anywhere (not only in our kernels).
inline std::string cpu_missing_features() {
#if defined(LLMINFER_NO_CPU_CHECK)
  return std::string();
#endif
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
inline bool cpu_has_kernel_level(int level) { return level == 0; }
inline std::string cpu_missing_features() {
  std::string missing;
#if defined(__ARM_FEATURE_DOTPROD)
  if (!(getauxval(AT_HWCAP) & (1ul << 20))) missing = "ASIMDDP (the dot product instructions)";  // HWCAP_ASIMDDP
#endif
  return missing;
}
#else
inline CpuInfo (*cpu_query)() = nullptr;
inline bool cpu_has_kernel_level(int level) { return level == 0; }
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
#endif  // !LLMI_KERNEL_PASS

// ---- src/12_json.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
  std::string str;                                    // string value, or a number's literal text
  std::vector<Json> items;                            // array
  std::vector<JsonMember> members;                    // object, in file order (.first key, .second value)

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
#endif  // !LLMI_KERNEL_PASS

// ---- src/13_dtype.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
#endif  // !LLMI_KERNEL_PASS

// ---- src/14_gguf.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
      // The product of the dimensions, zeros counted as 1, must fit in int64: then every partial
      // product (element count, row count, in any order) does, even for a tensor with a 0 dimension.
      uint64_t nel = 1, bound = 1;
      bool over = false;
      for (int dmn = 0; dmn < 4 && !over; dmn++) {
        uint64_t e = static_cast<uint64_t>(ti.ne[dmn]);
        over = mul_overflows(bound, std::max<uint64_t>(e, 1), &bound) || bound > static_cast<uint64_t>(INT64_MAX);
        nel *= e;
      }
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
#endif  // !LLMI_KERNEL_PASS

// ---- src/15_safetensors.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
    // The product of the dimensions, zeros counted as 1, must fit in int64 (so that every partial
    // product does, whatever the order and even with a 0 dimension).
    uint64_t nel = 1, bound = 1;
    for (const auto& s : shape.items) {
      if (!s.is_number() || !s.is_int || s.i < 0) return bad(strf("tensor '%s': shape holds a non-integer or negative value", tn.c_str()));
      if (mul_overflows(bound, std::max<uint64_t>(static_cast<uint64_t>(s.i), 1), &bound) ||
          bound > static_cast<uint64_t>(INT64_MAX))
        return bad(strf("tensor '%s': shape overflows", tn.c_str()));
      nel *= static_cast<uint64_t>(s.i);
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
#endif  // !LLMI_KERNEL_PASS

// ---- src/16_model_desc.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
  // numeric and boolean arrays under "{arch}." keys (per-layer values: sliding_window_pattern,
  // head counts, ...); tokenizer arrays stay in `gguf`
  std::map<std::string, std::vector<double>, std::less<>> meta_arrays;
  std::vector<TensorView> tensors;
  std::unordered_map<std::string, size_t> tensor_index;
  HParams hp;
  VocabData vocab;
  std::string chat_template;
  bool has_chat_template = false;
  // Hugging Face llama checkpoints keep q/k rows in the order of rotate-half RoPE; GGUF llama files
  // permute them for adjacent-pair RoPE. True when q/k are in the Hugging Face order.
  bool hf_qk_order = false;
  // Hugging Face checkpoints of some architectures store norm weights as w - N (Gemma: N = 1): the
  // loader's table by model_type; the definition's `convention hf_norm_offset` overrides it.
  float hf_norm_offset = 0;
  std::vector<std::unique_ptr<float[]>> owned;  // small tensors converted at load (e.g. norm offsets)

  const TensorView* find(std::string_view tensor_name) const {
    auto it = tensor_index.find(std::string(tensor_name));
    return it == tensor_index.end() ? nullptr : &tensors[it->second];
  }
  const MetaValue* find_meta(std::string_view key) const {
    auto it = meta.find(key);
    return it == meta.end() ? nullptr : &it->second;
  }
  const std::vector<double>* find_meta_array(std::string_view key) const {
    auto it = meta_arrays.find(key);
    return it == meta_arrays.end() ? nullptr : &it->second;
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
      continue;  // arrays stay in `gguf` (numeric ones of the architecture: below)
    }
    m.meta.emplace(std::string(e.key), std::move(mv));
  }
  m.arch = std::string(m.meta_string("general.architecture").value_or(""));
  // numeric / boolean arrays of the architecture's keys, one value per element (at most 65536:
  // per-layer values, never vocabulary-sized tables)
  if (!m.arch.empty())
    for (const auto& e : g.kv) {
      const GgufValue& v = e.value;
      if (v.type != GgufType::array || !gguf_scalar_size(v.elem) || v.len > 65536) continue;
      if (e.key.size() <= m.arch.size() || e.key.compare(0, m.arch.size(), m.arch) != 0 || e.key[m.arch.size()] != '.')
        continue;
      std::vector<double> a(static_cast<size_t>(v.len));
      for (uint64_t k = 0; k < v.len; k++) a[k] = v.number(k);
      m.meta_arrays.emplace(std::string(e.key), std::move(a));
    }
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
  // Numbers the forward pass uses as floats must be finite floats (and in range), named when not.
  auto real = [&](const char* suffix, bool positive) -> Result<std::optional<float>> {
    auto v = m.arch_number(suffix);
    if (!v) return std::optional<float>();
    float f = static_cast<float>(*v);
    if (!std::isfinite(f) || f < 0 || (positive && !(f > 0)))
      return make_error(Errc::bad_format, strf("%s: metadata '%s.%s' is %g; it must be a finite %s number", m.path.c_str(),
                                               m.arch.c_str(), suffix, *v, positive ? "positive" : "non-negative"));
    return std::optional<float>(f);
  };
  auto eps = real("attention.layer_norm_rms_epsilon", false);
  if (!eps) return eps.error();
  if (*eps) hp.rms_eps = **eps;
  auto base = real("rope.freq_base", true);
  if (!base) return base.error();
  if (*base) hp.rope_freq_base = **base;
  if (auto r = real("rope.freq_base_swa", true); !r) return r.error();
  for (const char* k : {"rope.scaling.factor", "rope.scaling.low_freq_factor", "rope.scaling.high_freq_factor",
                        "rope.scaling.original_context_length", "attention.layer_norm_epsilon"})
    if (auto r = real(k, false); !r) return r.error();
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
#endif  // !LLMI_KERNEL_PASS

// ---- src/17_loader.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
  // Gemma stores norms as w - 1 (GGUF stores w): the offset is added when a definition reads them
  // (convention hf_norm_offset; this table is its default).
  m->hf_norm_offset = info->norm_plus_one ? 1.0f : 0.0f;
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

// Maps the file, or with `read` reads it into owned memory (LoadOptions::read_into_memory).
inline Result<std::shared_ptr<MappedFile>> map_file(const std::string& path, bool read = false) {
  auto f = read ? MappedFile::read(path) : MappedFile::open(path);
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
                                                                 std::optional<std::string> single_file,
                                                                 bool read_into_memory = false) {
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
    auto f = map_file(w, read_into_memory);
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
// `read_into_memory`: weights are read into owned memory instead of mapped (LoadOptions).
inline Result<std::shared_ptr<ModelDesc>> load_description(const std::string& path, bool read_into_memory = false) {
  if (path.empty()) return make_error(Errc::invalid_argument, "no model path given");
  if (is_directory(path))
    return load_safetensors_model(path, strip_trailing_separators(path), std::nullopt, read_into_memory);
  auto f = map_file(path);  // mapped to look at it (read below when asked)
  if (!f) return f.error();
  bool gguf = (*f)->size() >= 4 && std::memcmp((*f)->data(), "GGUF", 4) == 0;
  bool st = !gguf && (ends_with(path, ".safetensors") || ((*f)->size() >= 9 && (*f)->data()[8] == '{'));
  if (st) {
    f->reset();
    return load_safetensors_model(path, parent_dir(path), path, read_into_memory);
  }
  if (read_into_memory) {
    f->reset();
    f = map_file(path, true);
    if (!f) return f.error();
  }
  const MappedFile& mf = **f;
  auto m = gguf_description(mf.data(), mf.size(), path);
  if (!m) return m.error();
  (*m)->files.push_back(std::move(*f));
  return m;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
#endif  // !LLMI_KERNEL_PASS

// ---- src/20_quant.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
// ==== Quantized block formats: layouts and the scalar reference (the definition of truth) ====
// Every weight format the kernels read, bit-exact to GGUF (ggml-common.h) and to MLX affine
// quantization, with a readable scalar dequantizer and dot product. The SIMD kernels (21_simd,
// 25_matmul) must agree with these: integer parts exactly, float sums within the rounding of a
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

// Sums of q over groups of `len` values.
inline void group_sums(const int8_t* q, int64_t n, int len, int16_t* sums) {
  for (int64_t g = 0; g < n / len; g++) {
    int s = 0;
    for (int i = 0; i < len; i++) s += q[g * len + i];
    sums[g] = static_cast<int16_t>(s);
  }
}

// The activation quantizers follow ggml's exactly (same scale, same rounding), so that a model
// computes what llama.cpp computes on it: with 8-bit activations the rounding of each value is
// visible in the logits, and agreement with llama.cpp is how we check a model runs right.

// x[n] (n a multiple of 32) -> q8_32 (ggml's quantize_row_q8_0): per block of 32, amax = max |x|,
// d = amax / 127 rounded to fp16 (ggml stores it as fp16), q = round(x * (127 / amax)).
inline void quantize_q8_32(const float* x, int64_t n, int8_t* q, float* d, int16_t* sums) {
  for (int64_t b = 0; b < n / 32; b++) {
    const float* xb = x + 32 * b;
    float amax = 0;
    for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(xb[i]));
    const float id = amax != 0 ? 127.0f / amax : 0.0f;
    d[b] = fp16_to_f32(f32_to_fp16(amax / 127.0f));
    for (int i = 0; i < 32; i++) q[32 * b + i] = static_cast<int8_t>(std::clamp(round_even(xb[i] * id), -127, 127));
  }
  group_sums(q, n, 32, sums);
}

// x[n] (n a multiple of 256) -> q8_256 (ggml's quantize_row_q8_K_ref): per block of 256, m = the
// first value of largest magnitude (with its sign), iscale = -127 / m, q = min(127, round(x *
// iscale)), d = 1 / iscale (0 and all q = 0 for a block of zeros).
inline void quantize_q8_256(const float* x, int64_t n, int8_t* q, float* d, int16_t* sums) {
  for (int64_t b = 0; b < n / 256; b++) {
    const float* xb = x + 256 * b;
    float amax = 0, m = 0;
    for (int i = 0; i < 256; i++)
      if (std::fabs(xb[i]) > amax) {
        amax = std::fabs(xb[i]);
        m = xb[i];
      }
    if (amax == 0) {
      d[b] = 0;
      for (int i = 0; i < 256; i++) q[256 * b + i] = 0;
      continue;
    }
    const float iscale = -127.0f / m;
    d[b] = 1 / iscale;
    for (int i = 0; i < 256; i++) q[256 * b + i] = static_cast<int8_t>(std::clamp(round_even(iscale * xb[i]), -127, 127));
  }
  group_sums(q, n, 16, sums);
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

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
#endif  // !LLMI_KERNEL_PASS

// ---- src/21_kernels_begin.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== The kernel region (21_kernels_begin .. 26_kernels_end): one table of kernels per level ====
// The kernels (21_simd, 24_attention_kernels, 25_matmul) are what depends on the instruction set.
// The rest of the engine calls them through one table (KernelTable, 26_kernels_end): an evaluation
// context holds a `const KernelTable*` and writes `kern->matmul_x(...)`.
//  * A native build (the default: -march=native, or LLMINFER_SIMD_* / -march=...) compiles the
//    kernels once, in namespace detail, for the level the compiler targets (10_impl_begin). Its
//    KernelTable has static member functions that call them: no indirection at all.
//  * LLMINFER_DISPATCH (x86-64): the code outside the kernels is compiled for the compiler's
//    baseline (e.g. -march=x86-64); the kernel region is compiled once per level, each in a
//    namespace of its own (detail::k_scalar, k_avx2, k_avx512, k_avx512bf16) and with the target
//    of that level (#pragma GCC target / #pragma clang attribute): the header includes itself
//    again (`#include __FILE__`) with LLMI_KERNEL_PASS set, and a pass compiles only the kernel
//    parts (tools/amalgamate wraps every other part in `#if !defined(LLMI_KERNEL_PASS)`). Each
//    pass fills a KernelTable of function pointers; the best level the CPU (and OS) can run is
//    chosen when a model is loaded (LoadOptions::kernels / LLMINFER_KERNELS force a lower one).
//    Everything compiled for a higher level is defined inside its pass's namespace, so the linker
//    never picks a higher-level copy for baseline code; templates defined outside the region (std::
//    ones) keep the target of their definition, the baseline, when a pass instantiates them.
//    The kernels test only our own LLMI_SIMD_* macros (clang does not define __AVX2__ etc. under
//    a target pragma).
#if defined(LLMI_KERNEL_PASS)
#undef LLMI_SIMD_SCALAR
#undef LLMI_SIMD_AVX2
#undef LLMI_SIMD_AVX512
#undef LLMI_SIMD_VNNI
#undef LLMI_SIMD_BF16
#if LLMI_KERNEL_PASS == 2
#define LLMI_SIMD_AVX2 1
#define LLMI_KNS_BEGIN namespace k_avx2 {
#define LLMI_KERNEL_NAME "avx2"
#elif LLMI_KERNEL_PASS == 3 || LLMI_KERNEL_PASS == 4
#define LLMI_SIMD_AVX2 1
#define LLMI_SIMD_AVX512 1
#define LLMI_SIMD_VNNI 1
#if LLMI_KERNEL_PASS == 4
#define LLMI_SIMD_BF16 1
#define LLMI_KNS_BEGIN namespace k_avx512bf16 {
#define LLMI_KERNEL_NAME "avx512bf16"
#else
#define LLMI_KNS_BEGIN namespace k_avx512 {
#define LLMI_KERNEL_NAME "avx512"
#endif
#endif
#define LLMI_KNS_END }
// The target of the pass (the strings are spelled out: the pragmas do not expand macros).
// clang-format off
#if defined(__clang__)
#if LLMI_KERNEL_PASS == 2
#pragma clang attribute push(__attribute__((target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,sse3,ssse3,sse4.1,sse4.2"))), apply_to = function)
#elif LLMI_KERNEL_PASS == 3
#pragma clang attribute push(__attribute__((target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,sse3,ssse3,sse4.1,sse4.2,avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512vnni"))), apply_to = function)
#elif LLMI_KERNEL_PASS == 4
#pragma clang attribute push(__attribute__((target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,sse3,ssse3,sse4.1,sse4.2,avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512vnni,avx512bf16"))), apply_to = function)
#endif
#elif defined(__GNUC__)
#pragma GCC push_options
#if LLMI_KERNEL_PASS == 2
#pragma GCC target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,sse3,ssse3,sse4.1,sse4.2")
#elif LLMI_KERNEL_PASS == 3
#pragma GCC target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,sse3,ssse3,sse4.1,sse4.2,avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512vnni")
#elif LLMI_KERNEL_PASS == 4
#pragma GCC target("avx,avx2,fma,f16c,bmi,bmi2,lzcnt,popcnt,movbe,sse3,ssse3,sse4.1,sse4.2,avx512f,avx512bw,avx512cd,avx512dq,avx512vl,avx512vnni,avx512bf16")
#endif
// (see 10_impl_begin: GCC's own _mm512_undefined_*() inlined into our kernels)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
// clang-format on
#elif defined(LLMI_DISPATCH)
#define LLMI_KNS_BEGIN namespace k_scalar {
#define LLMI_KERNEL_NAME "scalar"
#define LLMI_KNS_END }
#else
#define LLMI_KNS_BEGIN
#define LLMI_KNS_END
#endif

#if !defined(LLMI_KERNEL_PASS)
namespace llminfer {
inline namespace v0_1 {
namespace detail {
class ThreadPool;
class MatmulInput;
struct MatmulScratch;
}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
#endif

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
LLMI_KNS_BEGIN

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
// v, hidden from the optimizer: a product passed through it is never fused into a following
// add (llama.cpp's build does not fuse the sums of its dot products' remainders).
inline float unfused(float v) {
#if defined(__GNUC__)
  __asm__("" : "+x"(v));
#endif
  return v;
}
// Sum of 16 lanes as a fixed tree (upper half + lower half, twice, then (0+2) + (1+3)): the
// order GCC's _mm512_reduce_add_ps has, written out so that it does not depend on the compiler.
inline float reduce16_ps(__m512 v) {
  __m256 a = _mm256_add_ps(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)), _mm512_castps512_ps256(v));
  __m128 b = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
  __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
}

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
// Unsigned int8 (at most 127) times signed int8 products summed in groups of 4 into 16 int32 lanes.
inline __m512i dot_u8s8_512(__m512i w, __m512i a) {
#if defined(LLMI_SIMD_VNNI)
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, a);
#else
  return _mm512_madd_epi16(_mm512_maddubs_epi16(w, a), _mm512_set1_epi16(1));
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

// f32 -> fp16 -> f32 (round to nearest even).
inline float fp16_round(float v) {
#if defined(LLMI_SIMD_AVX2)
  // (the vector intrinsics: clang's scalar _cvtss_sh is a macro with a C99 compound literal,
  // which -Wpedantic rejects in C++)
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(v), _MM_FROUND_TO_NEAREST_INT)));
#elif defined(LLMI_SIMD_NEON)
  return static_cast<float>(static_cast<__fp16>(v));
#else
  return fp16_to_f32(f32_to_fp16(v));
#endif
}

// 32 values -> int8 round(x * scale) (half to even; |x * scale| <= 127 by construction).
inline void convert_block32(const float* x, float scale, int8_t* q) {
#if defined(LLMI_SIMD_AVX512)
  __m512 vs = _mm512_set1_ps(scale);
  const __m512i lim = _mm512_set1_epi32(127), nlim = _mm512_set1_epi32(-127);
  for (int k = 0; k < 2; k++) {
    __m512i iv = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * k), vs));
    iv = _mm512_max_epi32(_mm512_min_epi32(iv, lim), nlim);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * k), _mm512_cvtepi32_epi8(iv));
  }
#elif defined(LLMI_SIMD_AVX2)
  __m256 vs = _mm256_set1_ps(scale);
  const __m256i lim = _mm256_set1_epi32(127), nlim = _mm256_set1_epi32(-127);
  __m256i iv[4];
  for (int k = 0; k < 4; k++)
    iv[k] = _mm256_max_epi32(_mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), vs)), lim), nlim);
  // int32 -> int8 keeping element order (packs interleave 128-bit lanes; undo with a permute)
  __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(iv[0], iv[1]), _mm256_packs_epi32(iv[2], iv[3]));
  p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), p);
#elif defined(LLMI_SIMD_NEON)
  for (int k = 0; k < 32; k += 8) {
    int32x4_t i0 = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + k), scale));
    int32x4_t i1 = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + k + 4), scale));
    i0 = vmaxq_s32(vminq_s32(i0, vdupq_n_s32(127)), vdupq_n_s32(-127));
    i1 = vmaxq_s32(vminq_s32(i1, vdupq_n_s32(127)), vdupq_n_s32(-127));
    vst1_s8(q + k, vmovn_s16(vcombine_s16(vmovn_s32(i0), vmovn_s32(i1))));
  }
#else
  for (int i = 0; i < 32; i++) q[i] = static_cast<int8_t>(std::clamp(ref::round_even(x[i] * scale), -127, 127));
#endif
}

// max |x| over n (a multiple of 32) values.
inline float abs_max(const float* x, int n) {
#if defined(LLMI_SIMD_AVX512)
  __m512 m = _mm512_setzero_ps();
  for (int k = 0; k < n; k += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
  return _mm512_reduce_max_ps(m);
#elif defined(LLMI_SIMD_AVX2)
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 m = _mm256_setzero_ps();
  for (int k = 0; k < n; k += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + k), absmask));
  return hmax_ps256(m);
#elif defined(LLMI_SIMD_NEON)
  float32x4_t m = vdupq_n_f32(0);
  for (int k = 0; k < n; k += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + k)));
  return vmaxvq_f32(m);
#else
  float m = 0;
  for (int k = 0; k < n; k++) m = std::max(m, std::fabs(x[k]));
  return m;
#endif
}

// Sums of q over groups of 16 values.
inline void sums16(const int8_t* q, int64_t n, int16_t* sums) {
#if defined(LLMI_SIMD_AVX2)
  for (int64_t g = 0; g < n / 16; g++) {
    __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + 16 * g)));
    __m256i s = _mm256_madd_epi16(w, _mm256_set1_epi16(1));
    sums[g] = static_cast<int16_t>(hsum_epi32_256(s));
  }
#else
  ref::group_sums(q, n, 16, sums);
#endif
}

inline void quantize_q8_32(const float* x, int64_t n, int8_t* q, float* d, int16_t* sums) {
  for (int64_t b = 0; b < n / 32; b++) {
    const float amax = abs_max(x + 32 * b, 32);
    d[b] = fp16_round(amax / 127.0f);
    convert_block32(x + 32 * b, amax != 0 ? 127.0f / amax : 0.0f, q + 32 * b);
  }
#if defined(LLMI_SIMD_AVX2)
  for (int64_t b = 0; b < n / 32; b++) {
    __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * b));
    __m256i s = _mm256_sad_epu8(_mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80))), _mm256_setzero_si256());
    // sum of (q + 128) over 32 bytes, in four 64-bit lanes
    __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    t = _mm_add_epi64(t, _mm_unpackhi_epi64(t, t));
    sums[b] = static_cast<int16_t>(_mm_cvtsi128_si32(t) - 32 * 128);
  }
#else
  ref::group_sums(q, n, 32, sums);
#endif
}

inline void quantize_q8_256(const float* x, int64_t n, int8_t* q, float* d, int16_t* sums) {
  for (int64_t b = 0; b < n / 256; b++) {
    const float* xb = x + 256 * b;
    const float amax = abs_max(xb, 256);
    if (amax == 0) {
      d[b] = 0;
      std::memset(q + 256 * b, 0, 256);
      continue;
    }
    float m = 0;  // the first value of largest magnitude
#if defined(LLMI_SIMD_AVX512)
    for (int k = 0; k < 256; k += 16) {
      __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + k)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (hit) {
        m = xb[k + std::countr_zero(static_cast<unsigned>(hit))];
        break;
      }
    }
#else
    for (int i = 0; i < 256; i++)
      if (std::fabs(xb[i]) == amax) {
        m = xb[i];
        break;
      }
#endif
    const float iscale = -127.0f / m;
    d[b] = 1 / iscale;
    for (int k = 0; k < 256; k += 32) convert_block32(xb + k, iscale, q + 256 * b + k);
  }
  sums16(q, n, sums);
}

// ---- dequantization of one row (embedding lookups, float panels) ----

// n fp16 / bf16 values -> f32.
inline void f16_to_f32_row(const uint8_t* src, float* dst, int64_t n, bool bf16) {
  int64_t k = 0;
#if defined(LLMI_SIMD_AVX512)
  for (; k + 16 <= n; k += 16) {
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * k));
    _mm512_storeu_ps(dst + k, bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h));
  }
#elif defined(LLMI_SIMD_AVX2)
  for (; k + 8 <= n; k += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * k));
    _mm256_storeu_ps(dst + k, bf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h));
  }
#elif defined(LLMI_SIMD_NEON)
  for (; k + 4 <= n; k += 4) {
    uint16x4_t h = vld1_u16(reinterpret_cast<const uint16_t*>(src + 2 * k));
    vst1q_f32(dst + k, bf16 ? vreinterpretq_f32_u32(vshll_n_u16(h, 16)) : vcvt_f32_f16(vreinterpret_f16_u16(h)));
  }
#endif
  for (; k < n; k++) dst[k] = bf16 ? bf16_to_f32(rd_u16(src + 2 * k)) : fp16_to_f32(rd_u16(src + 2 * k));
}

// Row `row` of a 2-D (or flattened) tensor as f32 (`out` holds ne[0] floats). The type must be
// computable (checked at load).
inline void dequant_row(const TensorView& w, int64_t row, float* out) {
  const int64_t n = w.ne[0];
  const uint8_t* src = w.data + static_cast<uint64_t>(row) * weight_row_bytes(w);
  switch (w.type) {
    case DType::f32: std::memcpy(out, src, static_cast<size_t>(n) * 4); break;
    case DType::f16: f16_to_f32_row(src, out, n, false); break;
    case DType::bf16: f16_to_f32_row(src, out, n, true); break;
    case DType::q4_0: ref::dequant_row_q4_0(src, out, n); break;
    case DType::q5_0: ref::dequant_row_q5_0(src, out, n); break;
    case DType::q8_0: ref::dequant_row_q8_0(src, out, n); break;
    case DType::q4_K: ref::dequant_row_q4_k(src, out, n); break;
    case DType::q6_K: ref::dequant_row_q6_k(src, out, n); break;
    case DType::mlx_q4: case DType::mlx_q8: ref::dequant_row_mlx(w, row, out); break;
    default: LLMI_ASSERT(!"dequant_row: type not computable"); break;
  }
}

// f16 <-> f32 rows (the cache's element type). F16C on AVX2 and up, else the portable code
// (the same bits).
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

// ---- dot products of one weight row with one quantized activation row ----

inline float dot_q8_0(const uint8_t* w, const ActQ8& a, int64_t n) {
  [[maybe_unused]] const int64_t nb = n / 32;
  [[maybe_unused]] constexpr int64_t bs = sizeof(ref::BlockQ8_0);
  // x86 (AVX2 and AVX-512 builds): 8 lanes of 4 products, one FMA per block with d(w) * d(a), then
  // the 8-lane tree: the order of llama.cpp's x86 Q8_0 kernels (ggml_vec_dot_q8_0_q8_0 and
  // llamafile's sgemm), so that the result is its bits.
#if defined(LLMI_SIMD_AVX2)
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
#if defined(LLMI_SIMD_AVX512)
  // Two blocks per step, as unsigned values (0..15, or 0..31 with the fifth bit added through a
  // byte mask) against the activations: sum (v - offset) * a = sum v * a - offset * sum a.
  // (Computing several rows at a time, sharing the activation loads, was faster with the weights
  // in cache but slower end to end, where they stream from memory; measured with the earlier
  // split of about 16 chunks per thread, see gemv.)
  const __m512i m4 = _mm512_set1_epi8(15);
  const __m512i off = _mm512_set1_epi8(static_cast<char>(offset));
  // a block's 16 bytes go to two 128-bit lanes: low nibbles (weights 0..15) from the first, high
  // nibbles (weights 16..31) from the second
  const __m512i shifts = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0);
  __m512 acc = _mm512_setzero_ps();
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    const uint8_t* p = w + b * bs;
    __m512i z = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + qs_off)))),
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + bs + qs_off))), 1);
    __m512i v = _mm512_and_si512(_mm512_srlv_epi16(z, shifts), m4);
    if constexpr (kQ5) {
      const __mmask64 hb = static_cast<__mmask64>(rd_u32(p + 2)) | static_cast<__mmask64>(rd_u32(p + bs + 2)) << 32;
      v = _mm512_mask_add_epi8(v, hb, v, _mm512_set1_epi8(16));
    }
    const __m512i av = _mm512_loadu_si512(a.q + 32 * b);
    const __m512i isum = _mm512_sub_epi32(dot_u8s8_512(v, av), dot_u8s8_512(off, av));
    const __m512 s = scale_pair_512(f16_scale(p) * a.d[b], f16_scale(p + bs) * a.d[b + 1]);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), s, acc);
  }
  float r = _mm512_reduce_add_ps(acc);
  for (; b < nb; b++) {  // an odd last block
    const uint8_t* p = w + b * bs;
    __m256i v = q4_block_values(p + qs_off);
    if constexpr (kQ5) v = _mm256_or_si256(v, q5_high_bits(rd_u32(p + 2)));
    v = _mm256_sub_epi8(v, _mm256_set1_epi8(offset));
    __m256i dv = dot_s8_256(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b)));
    r += f16_scale(p) * a.d[b] * static_cast<float>(hsum_epi32_256(dv));
  }
  return r;
#elif defined(LLMI_SIMD_AVX2)
  auto values = [&](const uint8_t* p) {  // 32 signed values of one block
    __m256i v = q4_block_values(p + qs_off);
    if constexpr (kQ5) v = _mm256_or_si256(v, q5_high_bits(rd_u32(p + 2)));
    return _mm256_sub_epi8(v, _mm256_set1_epi8(offset));
  };
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* p = w + b * bs;
    __m256i dv = dot_s8_256(values(p), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + 32 * b)));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dv), _mm256_set1_ps(f16_scale(p) * a.d[b]), acc);
  }
  return hsum_ps256(acc);
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

// sgemm: the product is part of a matmul of several tokens (llama.cpp's order differs then).
// bf16_exact: every x is a bf16 value (bf16 weights may use vdpbf16ps).
template <DType T>
inline float dot_float(const uint8_t* w, const float* x, int64_t n, [[maybe_unused]] bool sgemm = false,
                       [[maybe_unused]] bool bf16_exact = false) {
#if defined(LLMI_SIMD_AVX512)
  auto load = [&](int64_t i) {
    if constexpr (T == DType::f32) return _mm512_loadu_ps(reinterpret_cast<const float*>(w) + i);
    else if constexpr (T == DType::f16) return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * i)));
    else return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 2 * i))), 16));
  };
#if defined(LLMI_SIMD_BF16)
  if (T == DType::bf16 && bf16_exact) {
    // llama.cpp's order with vdpbf16ps (the activations already rounded to bf16): several tokens,
    // n a multiple of 32: llamafile's sgemm, one 32-pair accumulator then the tree; otherwise
    // ggml_vec_dot_bf16: two accumulators over chunks of 64, each tree added in double, then the
    // rest one product at a time in double.
    auto wv = [&](int64_t i) { return (__m512bh)_mm512_loadu_si512(w + 2 * i); };
    auto xv = [&](int64_t i) { return _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i)); };
    if (sgemm && n % 32 == 0) {
      __m512 acc = _mm512_setzero_ps();
      for (int64_t i = 0; i < n; i += 32) acc = _mm512_dpbf16_ps(acc, wv(i), xv(i));
      return reduce16_ps(acc);
    }
    __m512 c1 = _mm512_setzero_ps(), c2 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
      c1 = _mm512_dpbf16_ps(c1, wv(i), xv(i));
      c2 = _mm512_dpbf16_ps(c2, wv(i + 32), xv(i + 32));
    }
    double r = static_cast<double>(reduce16_ps(c1));
    r += static_cast<double>(reduce16_ps(c2));
    for (; i < n; i++) r += static_cast<double>(bf16_to_f32(rd_u16(w + 2 * i)) * x[i]);
    return static_cast<float>(r);
  }
#endif
  if constexpr (T != DType::bf16) {
    // llama.cpp's order for f32 / f16 weights (the activations already rounded to f16 for f16),
    // so that the result is its bits. Several tokens, n a multiple of 16: llamafile's sgemm, 16
    // lanes in order then the 16-lane tree. Otherwise ggml_vec_dot_f32 / _f16: 4 x 16 lanes
    // over chunks of 64, folded (0+2) + (1+3), the tree, then the rest one product at a time
    // (f16: summed in double).
    if (sgemm && n % 16 == 0) {
      __m512 acc = _mm512_setzero_ps();
      for (int64_t i = 0; i < n; i += 16) acc = _mm512_fmadd_ps(load(i), _mm512_loadu_ps(x + i), acc);
      return reduce16_ps(acc);
    }
    const int64_t np = n & ~int64_t(63);
    float red = 0;
    if (np > 0) {
      __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
      for (int64_t i = 0; i < np; i += 64)
        for (int k = 0; k < 4; k++) acc[k] = _mm512_fmadd_ps(load(i + 16 * k), _mm512_loadu_ps(x + i + 16 * k), acc[k]);
      red = reduce16_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3])));
    }
    if constexpr (T == DType::f32) {
      const float* wf = reinterpret_cast<const float*>(w);
      for (int64_t i = np; i < n; i++) red += unfused(wf[i] * x[i]);
      return red;
    } else {
      double r = red;
      for (int64_t i = np; i < n; i++) r += static_cast<double>(fp16_to_f32(rd_u16(w + 2 * i)) * x[i]);
      return static_cast<float>(r);
    }
  }
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

// The float dot products as table entries (26_kernels_end).
inline float dot_f32(const uint8_t* w, const float* x, int64_t n, bool sgemm, bool bf16_exact) {
  return dot_float<DType::f32>(w, x, n, sgemm, bf16_exact);
}
inline float dot_f16(const uint8_t* w, const float* x, int64_t n, bool sgemm, bool bf16_exact) {
  return dot_float<DType::f16>(w, x, n, sgemm, bf16_exact);
}
inline float dot_bf16(const uint8_t* w, const float* x, int64_t n, bool sgemm, bool bf16_exact) {
  return dot_float<DType::bf16>(w, x, n, sgemm, bf16_exact);
}

LLMI_KNS_END
}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/22_threadpool.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
// ==== Thread pool ====
// One persistent pool per model: std::thread workers plus the calling thread. parallel_for(n, fn)
// runs fn(task, thread) for every task in [0, n) and returns when all are done. Results must not
// depend on which thread ran a task (each output is written by exactly one task, with the same
// arithmetic), so any thread count gives the same bits.
//
// Scheduling: a job is published as one atomic word (job number, next task); threads claim tasks
// with a compare-and-swap that also checks the job number, and the caller waits for the count of
// *finished tasks*, not for every worker to check in, then closes the job in the same word. So a
// worker that is asleep or descheduled (a game or other programs share the cores) never delays a
// job: the threads that are running do its tasks. Waiting workers spin for a short while (a
// forward pass issues jobs back to back, microseconds apart), then sleep on a condition variable,
// so an idle model costs no CPU.
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
    const uint32_t job = ++job_number_;  // wraps after 2^32 jobs: only equality matters
    fn_.store(fn, std::memory_order_relaxed);
    ctx_.store(ctx, std::memory_order_relaxed);
    // release: a thread that reads this count also sees the previous job closed (below), so it
    // cannot claim a task of the previous job's ticket with this job's count
    n_tasks_.store(n_tasks, std::memory_order_release);
    done_.store(0, std::memory_order_relaxed);
    // publishes the job (task 0 next); seq_cst with the sleepers count so that either this thread
    // sees a worker going to sleep or the worker sees the job
    ticket_.store(static_cast<uint64_t>(job) << 32);
    if (sleepers_.load() > 0) {
      { std::lock_guard<std::mutex> lk(sleep_mu_); }  // a worker between its check and its wait sees the ticket
      sleep_cv_.notify_all();
    }
    work(job, 0);
    // the other threads finish the tasks they claimed
    for (int spins = 0; done_.load(std::memory_order_acquire) < n_tasks; spins++) {
      if (spins < kSpin) cpu_relax();
      else std::this_thread::yield();
    }
    // Close the job: no task index is below the count any more. Without this, a thread that read
    // this job's exhausted ticket and then the next job's (larger) task count could claim a task
    // of the ticket before the next job is published, and run it with the wrong function or count
    // it as done for the next job.
    ticket_.store(static_cast<uint64_t>(job) << 32 | kClosed);
  }

 private:
  // Claims and runs tasks of job `job` until there are none left (or another job started).
  void work(uint32_t job, int thread) {
    for (;;) {
      uint64_t t = ticket_.load(std::memory_order_acquire);
      if ((t >> 32) != job) return;
      const uint32_t n = static_cast<uint32_t>(n_tasks_.load(std::memory_order_acquire));
      const uint32_t i = static_cast<uint32_t>(t & 0xFFFFFFFFu);
      if (i >= n) return;  // all claimed, or the job closed (kClosed)
      if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) continue;
      // the job cannot end while this claimed task is unfinished, so fn_/ctx_ are its own
      fn_.load(std::memory_order_relaxed)(ctx_.load(std::memory_order_relaxed), static_cast<int>(i), thread);
      done_.fetch_add(1, std::memory_order_acq_rel);
    }
  }

  void worker(int thread) {
    uint32_t seen = 0;
    for (;;) {
      // spin a little, then sleep until a new job is published
      uint32_t job = static_cast<uint32_t>(ticket_.load(std::memory_order_acquire) >> 32);
      for (int spins = 0; job == seen && spins < kSpin; spins++) {
        cpu_relax();
        job = static_cast<uint32_t>(ticket_.load(std::memory_order_acquire) >> 32);
      }
      if (job == seen) {
        std::unique_lock<std::mutex> lk(sleep_mu_);
        sleepers_.fetch_add(1);
        sleep_cv_.wait(lk, [&] {
          return quit_.load(std::memory_order_acquire) || static_cast<uint32_t>(ticket_.load() >> 32) != seen;
        });
        sleepers_.fetch_sub(1);
        job = static_cast<uint32_t>(ticket_.load(std::memory_order_acquire) >> 32);
      }
      if (quit_.load(std::memory_order_acquire)) return;
      seen = job;
      work(job, thread);
    }
  }

  // ~10^4 pause instructions: tens to a few hundred microseconds depending on the CPU.
  static constexpr int kSpin = 1 << 14;
  static constexpr uint64_t kClosed = 0xFFFFFFFFu;  // the task index of a finished job

  int n_threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex job_mu_;  // one job at a time
  uint32_t job_number_ = 0;
  std::atomic<uint64_t> ticket_{0};  // job number << 32 | next task
  std::atomic<TaskFn> fn_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  std::atomic<int> n_tasks_{0};
  std::atomic<int> done_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> quit_{false};
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
#endif  // !LLMI_KERNEL_PASS

// ---- src/23_kernel_shared.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
// ==== Shared by every kernel level: scratch buffers, the matmul input, scalar activations ====
// Compiled once, for the baseline (outside the kernel region's passes, see 21_kernels_begin):
// types the engine and every kernel level share, and scalar helpers the kernels call.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Sums of x over MLX groups (shared by every row of a matmul): out[g] = sum of x[g*gs .. g*gs+gs-1].
inline void mlx_group_sums(const float* x, int64_t n, int gs, float* out) {
  for (int64_t g = 0; g < n / gs; g++) {
    float s = 0;
    for (int64_t i = g * gs; i < (g + 1) * gs; i++) s += x[i];
    out[g] = s;
  }
}

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
  // bf16_exact: every value of X is a bf16 value (rounded for bf16 weights, as ggml does for GGUF
  // files): bf16 weights may then use vdpbf16ps.
  void reset(const float* x, int64_t n_tokens, int64_t n, bool bf16_exact = false) {
    x_ = x;
    n_tokens_ = n_tokens;
    n_ = n;
    bf16_exact_ = bf16_exact;
    ready_[0] = ready_[1] = false;
    mlx_gs_ = 0;
  }
  const float* x() const { return x_; }
  bool bf16_exact() const { return bf16_exact_; }
  int64_t n_tokens() const { return n_tokens_; }
  int64_t n() const { return n_; }

  // The activation quantizer of one form (a kernel: the level's quantize_q8_32 / _256).
  using Quantizer = void (*)(const float* x, int64_t n, int8_t* q, float* d, int16_t* sums);
  // Quantizes X into `f` (q8_32 or q8_256) with `quantize` unless done already; false when out
  // of memory.
  bool prepare(ActForm f, ThreadPool& pool, Quantizer quantize) {
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
      quantize(xt, n_, q, d, s);
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
  bool bf16_exact_ = false;
  Form forms_[2];
  bool ready_[2] = {false, false};
  AlignedBuffer mlx_;
  int mlx_gs_ = 0;
};

// Scratch of the matrix products, owned by an evaluation context (created with it: one panel
// buffer per pool thread) and grown on first use of each size; a kernel that cannot grow it
// returns false and the context reports out_of_memory.
struct MatmulScratch {
  explicit MatmulScratch(int threads)
      : panels(std::make_unique<AlignedBuffer[]>(static_cast<size_t>(std::max(1, threads)))), n_panels(std::max(1, threads)) {}
  MatmulInput in;                           // the quantized input (matmul_x)
  AlignedBuffer starts;                     // gemm: integer start values of the blocks (offsets)
  AlignedBuffer xb;                         // gemm: the activations as bf16 (vdpbf16ps)
  std::unique_ptr<AlignedBuffer[]> panels;  // gemm: the decoded panel of each pool thread
  int n_panels;
};

// ---- elementwise activations (scalar; the row kernels are in 24_attention_kernels) ----
inline float silu_f32(float x) { return x / (1.0f + std::exp(-x)); }
// GELU, tanh approximation, at the fp16 precision ggml evaluates it with (ggml looks it up in a
// table indexed by fp16(x) holding fp16 results; beyond |x| >= 10 it is 0 or x): GGUF models then
// agree with llama.cpp, and the difference to the exact formula stays below fp16 resolution.
inline float gelu_tanh_f32(float x) {
  const float k = 0.79788456080286535587989211986876f;  // sqrt(2/pi)
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  const float f = fp16_to_f32(f32_to_fp16(x));
  // 1 + 0.044715 f^2 with one rounding, as g++ compiles ggml's expression (its table's bits)
  return fp16_to_f32(f32_to_fp16(0.5f * f * (1.0f + std::tanh(k * f * std::fma(0.044715f * f, f, 1.0f)))));
}
inline float gelu_erf_f32(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752440f)); }
// gelu_tanh_f32 of every fp16 value, indexed by its bits (built once, 256 KiB).
inline const float* gelu_tanh_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; h++) t[h] = gelu_tanh_f32(fp16_to_f32(static_cast<uint16_t>(h)));
    return t;
  }();
  return table.data();
}
}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
#endif  // !LLMI_KERNEL_PASS

// ---- src/24_attention_kernels.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== Attention kernels: one query head against a run of cached keys and values ====
// The forward pass (43_forward) walks the KV ring and calls these on contiguous runs of cells
// ([cells][hd], f16 or f32). SIMD bodies follow the scalar ones: dot products summed in lanes,
// exp by a polynomial (within 2 ulp of expf), softmax sums in double as ggml. With an f32 cache
// the AVX-512 build follows llama.cpp's float order exactly (end of the file).
namespace llminfer {
inline namespace v0_1 {
namespace detail {
LLMI_KNS_BEGIN

#if defined(LLMI_SIMD_AVX512)
// 16 cache values (f16 or f32) as f32.
inline __m512 load16_kv(const uint8_t* p, bool f16) {
  return f16 ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))) : _mm512_loadu_ps(reinterpret_cast<const float*>(p));
}
inline __m512 maskload16_kv(const uint8_t* p, bool f16, __mmask16 m) {
  return f16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)) : _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(p));
}
// e^x for 16 lanes, the same float operations as ggml's AVX-512 expf (llama.cpp's softmax and
// SiLU), so that our softmax weights and SiLU values are its bits: n = round(x / ln 2) by the
// 1.5 * 2^23 trick, b = x - n ln 2 in two parts, a degree-5 polynomial in b, times 2^n; |n| > 192
// gives 0 or infinity. Within about 1.5 ulp of expf.
inline __m512 exp16(__m512 x) {
  const __m512 shift = _mm512_set1_ps(0x1.8p23f);
  const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), shift);
  const __m512 n = _mm512_sub_ps(z, shift);
  const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f), _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
  const __m512 u = _mm512_mul_ps(b, b);
  const __m512 hi = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                                    _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f)));
  const __m512 j = _mm512_fmadd_ps(hi, u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
  const __m512 r = _mm512_scalef_ps(j, n);
  const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
  if (!big) return r;
  const __m512 edge = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ), _mm512_set1_ps(INFINITY), _mm512_setzero_ps());
  return _mm512_mask_blend_ps(big, r, edge);
}
#endif

#if defined(LLMI_SIMD_AVX2) && !defined(LLMI_SIMD_AVX512)
inline __m256 load8_kv(const uint8_t* p, bool f16) {
  return f16 ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))) : _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}
// e^x for 8 lanes (Cephes-style polynomial, within 2 ulp of expf).
inline __m256 exp8(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n through the exponent bits (n >= -126 after the clamp)
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}
#endif

// out[j] = scale * dot(q, cell j) for j < n; cells are `stride` bytes apart, hd values each.
inline void attn_scores(const float* q, const uint8_t* k, size_t stride, int n, int hd, bool f16, float scale, float* out) {
#if defined(LLMI_SIMD_AVX512)
  if (!f16) {  // llama.cpp's order: ggml_vec_dot_f32 (dot_float), then the scale
    for (int j = 0; j < n; j++) out[j] = scale * dot_float<DType::f32>(k + size_t(j) * stride, q, hd);
    return;
  }
  const int full = hd / 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (hd % 16)) - 1);
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int e = 0; e < full; e++) {
      __m512 qv = _mm512_loadu_ps(q + 16 * e);
      for (int u = 0; u < 4; u++) acc[u] = _mm512_fmadd_ps(qv, load16_kv(k + (j + u) * stride + (f16 ? 32 : 64) * e, f16), acc[u]);
    }
    if (tail) {
      __m512 qv = _mm512_maskz_loadu_ps(tail, q + 16 * full);
      for (int u = 0; u < 4; u++) acc[u] = _mm512_fmadd_ps(qv, maskload16_kv(k + (j + u) * stride + (f16 ? 32 : 64) * full, f16, tail), acc[u]);
    }
    for (int u = 0; u < 4; u++) out[j + u] = scale * _mm512_reduce_add_ps(acc[u]);
  }
  for (; j < n; j++) {
    __m512 acc = _mm512_setzero_ps();
    for (int e = 0; e < full; e++) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16 * e), load16_kv(k + j * stride + (f16 ? 32 : 64) * e, f16), acc);
    if (tail) acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, q + 16 * full), maskload16_kv(k + j * stride + (f16 ? 32 : 64) * full, f16, tail), acc);
    out[j] = scale * _mm512_reduce_add_ps(acc);
  }
#elif defined(LLMI_SIMD_AVX2)
  const size_t es = f16 ? 2 : 4;
  for (int j = 0; j < n; j++) {
    const uint8_t* c = k + size_t(j) * stride;
    __m256 acc = _mm256_setzero_ps();
    int e = 0;
    for (; e + 8 <= hd; e += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + e), load8_kv(c + es * size_t(e), f16), acc);
    float dot = hsum_ps256(acc);
    for (; e < hd; e++) {
      float x;
      if (f16) x = fp16_to_f32(rd_u16(c + 2 * e));
      else std::memcpy(&x, c + 4 * e, 4);
      dot += q[e] * x;
    }
    out[j] = scale * dot;
  }
#else
  for (int j = 0; j < n; j++) {
    const uint8_t* c = k + size_t(j) * stride;
    float dot = 0;
    if (f16) {
      for (int e = 0; e < hd; e++) dot += q[e] * fp16_to_f32(rd_u16(c + 2 * e));
    } else {
      for (int e = 0; e < hd; e++) {
        float v;
        std::memcpy(&v, c + 4 * e, 4);
        dot += q[e] * v;
      }
    }
    out[j] = dot * scale;
  }
#endif
}

// s[j] = exp(s[j] - max) for j < n; returns the sum (accumulated in double). `phase` is the
// position of s[0] modulo 16: the AVX-512 body works in chunks of 16 aligned to positions, as
// llama.cpp's softmax over cache cells, summing each chunk in float before adding it in double.
inline double attn_exp(float* s, int n, float max, [[maybe_unused]] int phase = 0) {
  double sum = 0;
  int j = 0;
#if defined(LLMI_SIMD_AVX512)
  const __m512 m = _mm512_set1_ps(max);
  for (int c = -phase; c < n; c += 16) {
    if (c >= 0 && c + 16 <= n) {
      __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(s + c), m));
      _mm512_storeu_ps(s + c, e);
      sum += static_cast<double>(reduce16_ps(e));
      continue;
    }
    // a partial chunk: the lanes outside 0..n-1 count as 0 (masked cells)
    const int from = std::max(c, 0), to = std::min(c + 16, n);
    alignas(64) float t[16];
    for (int i = 0; i < 16; i++) t[i] = max;
    for (int i = from; i < to; i++) t[i - c] = s[i];
    const __mmask16 mk = static_cast<__mmask16>(((1u << (to - from)) - 1) << (from - c));
    __m512 e = _mm512_maskz_mov_ps(mk, exp16(_mm512_sub_ps(_mm512_load_ps(t), m)));
    _mm512_store_ps(t, e);
    for (int i = from; i < to; i++) s[i] = t[i - c];
    sum += static_cast<double>(reduce16_ps(e));
  }
  j = n;
#elif defined(LLMI_SIMD_AVX2)
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  const __m256 m = _mm256_set1_ps(max);
  for (; j + 8 <= n; j += 8) {
    __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), m));
    _mm256_storeu_ps(s + j, e);
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  __m256d t = _mm256_add_pd(a0, a1);
  __m128d t2 = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
  sum = _mm_cvtsd_f64(_mm_add_sd(t2, _mm_unpackhi_pd(t2, t2)));
#endif
  for (; j < n; j++) {
    float e = std::exp(s[j] - max);
    s[j] = e;
    sum += e;
  }
  return sum;
}

// out[e] = sum_j w[j] * cell j [e] for e < hd (cells `stride` bytes apart).
inline void attn_weighted_sum(const float* w, const uint8_t* v, size_t stride, int n, int hd, bool f16, float* out) {
#if defined(LLMI_SIMD_AVX512)
  const size_t es = f16 ? 2 : 4;
  for (int e0 = 0; e0 < hd; e0 += 128) {
    const int len = std::min(128, hd - e0), chunks = (len + 15) / 16;
    __m512 acc[8];
    for (int c = 0; c < 8; c++) acc[c] = _mm512_setzero_ps();
    if (len == 128) {
      for (int j = 0; j < n; j++) {
        const __m512 wj = _mm512_set1_ps(w[j]);
        const uint8_t* row = v + size_t(j) * stride + es * size_t(e0);
#pragma GCC unroll 8
        for (int c = 0; c < 8; c++) acc[c] = _mm512_fmadd_ps(wj, load16_kv(row + es * 16 * size_t(c), f16), acc[c]);
      }
    } else {
      for (int j = 0; j < n; j++) {
        const __m512 wj = _mm512_set1_ps(w[j]);
        const uint8_t* row = v + size_t(j) * stride + es * size_t(e0);
        for (int c = 0; c < chunks; c++) {
          const int left = len - 16 * c;
          const __mmask16 mk = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
          acc[c] = _mm512_fmadd_ps(wj, maskload16_kv(row + es * 16 * size_t(c), f16, mk), acc[c]);
        }
      }
    }
    for (int c = 0; c < chunks; c++) {
      const int left = len - 16 * c;
      const __mmask16 mk = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
      _mm512_mask_storeu_ps(out + e0 + 16 * c, mk, acc[c]);
    }
  }
#elif defined(LLMI_SIMD_AVX2)
  const size_t es = f16 ? 2 : 4;
  int e0 = 0;
  for (; e0 + 64 <= hd; e0 += 64) {
    __m256 acc[8];
    for (int c = 0; c < 8; c++) acc[c] = _mm256_setzero_ps();
    for (int j = 0; j < n; j++) {
      const __m256 wj = _mm256_set1_ps(w[j]);
      const uint8_t* row = v + size_t(j) * stride + es * size_t(e0);
      for (int c = 0; c < 8; c++) acc[c] = _mm256_fmadd_ps(wj, load8_kv(row + es * 8 * size_t(c), f16), acc[c]);
    }
    for (int c = 0; c < 8; c++) _mm256_storeu_ps(out + e0 + 8 * c, acc[c]);
  }
  for (int e = e0; e < hd; e++) out[e] = 0;
  for (int j = 0; j < n && e0 < hd; j++) {
    const uint8_t* c = v + size_t(j) * stride;
    for (int e = e0; e < hd; e++) {
      float x;
      if (f16) x = fp16_to_f32(rd_u16(c + 2 * e));
      else std::memcpy(&x, c + 4 * e, 4);
      out[e] += w[j] * x;
    }
  }
#else
  for (int e = 0; e < hd; e++) out[e] = 0;
  for (int j = 0; j < n; j++) {
    const uint8_t* c = v + size_t(j) * stride;
    for (int e = 0; e < hd; e++) {
      float x;
      if (f16) x = fp16_to_f32(rd_u16(c + 2 * e));
      else std::memcpy(&x, c + 4 * e, 4);
      out[e] += w[j] * x;
    }
  }
#endif
}

#if defined(LLMI_SIMD_AVX512)
// ---- llama.cpp's order (f32 cache, AVX-512) ----
// With an f32 cache and no flash attention, llama.cpp computes q.k with ggml_vec_dot_f32 (as
// dot_float<f32>) and V x softmax with llamafile's sgemm (several tokens) or ggml_vec_dot_f32
// (one token). Doing the same float operations in the same order gives its bits, which matters
// where an activation is next rounded to 8 bits: one value on the other side of a rounding step
// moves a small model's logits by ~0.1.

// out[e] = sum over positions j = lo..pos of w[j - lo] * vrow(j)[e], in `lanes` partial sums by
// position: 16 (several tokens: sgemm's 16 lanes, then the 16-lane tree) or 64 (one token:
// ggml_vec_dot_f32's 4 x 16, folded (0+32) + (16+48) first). acc holds lanes x round_up(hd, 16).
// vrow(j) = the value row of position j: v0 + (j % slots) * stride (the KV ring).
inline void attn_weighted_sum_ggml(const float* w, const uint8_t* v0, size_t stride, int slots, int lo, int pos, int hd,
                                   int lanes, float* acc, float* out) {
  auto vrow = [&](int j) { return reinterpret_cast<const float*>(v0 + size_t(j % slots) * stride); };
  const int hs = (hd + 15) & ~15;
  std::fill(acc, acc + size_t(lanes) * size_t(hs), 0.0f);
  const __mmask16 tail = static_cast<__mmask16>(hd % 16 ? (1u << (hd % 16)) - 1 : 0xFFFF);
  for (int j = lo; j <= pos; j++) {
    float* a = acc + size_t(j % lanes) * size_t(hs);
    const float* v = vrow(j);
    const __m512 wj = _mm512_set1_ps(w[j - lo]);
    for (int e = 0; e < hd; e += 16) {
      const __mmask16 mk = e + 16 <= hd ? static_cast<__mmask16>(0xFFFF) : tail;
      _mm512_storeu_ps(a + e, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, v + e), wj, _mm512_loadu_ps(a + e)));
    }
  }
  for (int e = 0; e < hs; e += 16) {
    auto at = [&](int l) { return _mm512_loadu_ps(acc + size_t(l) * size_t(hs) + e); };
    __m512 x[16];
    for (int l = 0; l < 16; l++)
      x[l] = lanes == 64 ? _mm512_add_ps(_mm512_add_ps(at(l), at(32 + l)), _mm512_add_ps(at(16 + l), at(48 + l))) : at(l);
    for (int l = 0; l < 8; l++) x[l] = _mm512_add_ps(x[l + 8], x[l]);
    for (int l = 0; l < 4; l++) x[l] = _mm512_add_ps(x[l + 4], x[l]);
    __m512 r = _mm512_add_ps(_mm512_add_ps(x[0], x[2]), _mm512_add_ps(x[1], x[3]));
    const __mmask16 mk = e + 16 <= hd ? static_cast<__mmask16>(0xFFFF) : tail;
    _mm512_mask_storeu_ps(out + e, mk, r);
  }
}
#endif


// The values step of one (token, head): out[e] = sum over positions j = lo..pos of w[j - lo] *
// V(j)[e], where V(j) is the row at v0 + (j % slots) * stride (the KV ring: at most two runs of
// contiguous slots). part: scratch of hd floats (AVX-512 with an f32 cache: 64 * round_up(hd, 16)).
// several: the token is one of several evaluated together (llama.cpp's order differs then).
inline void attn_values(const float* w, const uint8_t* v0, size_t stride, int slots, int lo, int pos, int hd, bool f16,
                        [[maybe_unused]] bool several, float* part, float* out) {
#if defined(LLMI_SIMD_AVX512)
  if (!f16) {  // llama.cpp's order (several tokens: 16 lanes; one token: 64)
    attn_weighted_sum_ggml(w, v0, stride, slots, lo, pos, hd, several ? 16 : 64, part, out);
    return;
  }
#endif
  bool first = true;
  for (int j = lo; j <= pos;) {
    const int slot = j % slots, run = std::min(pos - j + 1, slots - slot);
    attn_weighted_sum(w + (j - lo), v0 + size_t(slot) * stride, stride, run, hd, f16, first ? out : part);
    if (!first)
      for (int e = 0; e < hd; e++) out[e] += part[e];
    first = false;
    j += run;
  }
}

// ==== Activation kernels (rows of f32) ====
// y = silu(x) over a row; AVX-512: chunks of 16 with exp16, the rest with expf, as llama.cpp's
// AVX-512 build (its bits).
inline void silu_row(const float* x, float* y, int n) {
  int k = 0;
#if defined(LLMI_SIMD_AVX512)
  for (; k + 16 <= n; k += 16) {
    const __m512 v = _mm512_loadu_ps(x + k);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), v));
    _mm512_storeu_ps(y + k, _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), e)));
  }
#endif
  for (; k < n; k++) y[k] = silu_f32(x[k]);
}
// y = gelu_tanh(x) over a row, by table (the values of gelu_tanh_f32).
inline void gelu_tanh_row(const float* x, float* y, int n) {
  const float* tab = gelu_tanh_table();
  int k = 0;
#if defined(LLMI_SIMD_AVX512)
  for (; k + 16 <= n; k += 16) {
    const __m512 v = _mm512_loadu_ps(x + k);
    const __m512i idx = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    __m512 r = _mm512_i32gather_ps(idx, tab, 4);
    r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_set1_ps(10.0f), _CMP_GE_OQ), r, v);
    r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_set1_ps(-10.0f), _CMP_NLE_UQ), r);
    _mm512_storeu_ps(y + k, r);
  }
#endif
  for (; k < n; k++) y[k] = x[k] <= -10.0f ? 0.0f : x[k] >= 10.0f ? x[k] : tab[f32_to_fp16(x[k])];
}


LLMI_KNS_END
}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/25_matmul.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
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
LLMI_KNS_BEGIN

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
  const bool sgemm = in.n_tokens() >= 2, bfx = in.bf16_exact();
  auto fl = [&](auto dot) {
    body([&, dot](int64_t r, int64_t t) { return dot(base + static_cast<uint64_t>(r) * rb, in.x() + t * n, n, sgemm, bfx); });
  };
  switch (w.type) {
    // (lambdas, not function pointers, so that the dot product inlines into the row loop)
    case DType::q4_0: q8([](const uint8_t* p, const ActQ8& a, int64_t k) { return dot_q4_0(p, a, k); }, ActForm::q8_32); break;
    case DType::q5_0: q8([](const uint8_t* p, const ActQ8& a, int64_t k) { return dot_q5_0(p, a, k); }, ActForm::q8_32); break;
    case DType::q8_0: q8([](const uint8_t* p, const ActQ8& a, int64_t k) { return dot_q8_0(p, a, k); }, ActForm::q8_32); break;
    case DType::q4_K: q8([](const uint8_t* p, const ActQ8& a, int64_t k) { return dot_q4_k(p, a, k); }, ActForm::q8_256); break;
    case DType::q6_K: q8([](const uint8_t* p, const ActQ8& a, int64_t k) { return dot_q6_k(p, a, k); }, ActForm::q8_256); break;
    case DType::f32: fl([](const uint8_t* p, const float* x, int64_t k, bool sg, bool bx) { return dot_float<DType::f32>(p, x, k, sg, bx); }); break;
    case DType::f16: fl([](const uint8_t* p, const float* x, int64_t k, bool sg, bool bx) { return dot_float<DType::f16>(p, x, k, sg, bx); }); break;
    case DType::bf16: fl([](const uint8_t* p, const float* x, int64_t k, bool sg, bool bx) { return dot_float<DType::bf16>(p, x, k, sg, bx); }); break;
    case DType::mlx_q4: case DType::mlx_q8:
      body([&](int64_t r, int64_t t) { return dot_mlx(w, r, in.x() + t * n, in.mlx_sums(t)); });
      break;
    default: LLMI_ASSERT(!"matmul: weight type not computable"); break;
  }
}

inline void gemv(const TensorView& w, const MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool) {
  const int64_t rows = w.rows(), T = in.n_tokens();
  const uint64_t rb = std::max<uint64_t>(1, weight_row_bytes(w));
  // Chunks: about 2 per thread (a thread that finishes early takes another), at least 64 KiB of
  // weights each. Long contiguous runs stream from memory much faster than many short ones:
  // decode of qwen3-0.6b q4_k_m, 2 threads, went from about 62 tokens/s with ~16 chunks per
  // thread to 74-80 with 4 and 80-89 with 2 (bench/RESULTS.md).
  int64_t chunk = std::max<int64_t>(rows / (2 * static_cast<int64_t>(pool.size())), static_cast<int64_t>(65536 / rb));
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
// Quantized weights: an outer-product kernel. A panel holds 16 rows interleaved by 4 values:
// [K/4][16 rows][4 bytes], so one zmm is 4 consecutive values of 16 rows, and vpdpbusd with the
// token's 4 activation bytes broadcast adds 4 products to each row's int32 lane (64 MACs per
// instruction, no horizontal sums). A micro-tile is 2 such groups (32 rows) x kRN tokens; a
// block's integer sum is scaled per row lane (sub-block scales, block scales) and accumulated
// in float per token. Offsets enter as integer start values (-offset * sum of the activations)
// or, for Q4_K's mins (another float scale), as one float FMA per sub-block.
// Float weights (f32/f16/bf16/MLX) use a dot-product tile over an f32 panel instead.
#if defined(LLMI_SIMD_AVX512)
constexpr int kGR = 16;   // rows per group (one zmm of int32 / f32 lanes)
constexpr int kRG = 2;    // row groups per micro-tile
constexpr int kRN = 4;    // tokens per micro-tile
constexpr int kRB = kGR * kRG;  // rows per task
constexpr int kTB = 512;  // tokens per task (a panel is decoded once per task)

inline bool gemm_supported(DType t) {
  switch (t) {
    case DType::q4_0: case DType::q5_0: case DType::q8_0: case DType::q4_K: case DType::q6_K:
    case DType::f32: case DType::f16: case DType::bf16: case DType::mlx_q4: case DType::mlx_q8:
      return true;
    default: return false;
  }
}

// acc + sums of 4 products (unsigned w bytes x signed a bytes) per int32 lane.
inline __m512i dpbusd(__m512i acc, __m512i w, __m512i a) {
#if defined(LLMI_SIMD_VNNI)
  return _mm512_dpbusd_epi32(acc, w, a);
#else
  // vpmaddubsw saturates for bytes above 127 (Q8_0 + 128): split them into nibbles
  const __m512i m4 = _mm512_set1_epi8(15);
  __m512i lo = _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_and_si512(w, m4), a), _mm512_set1_epi16(1));
  __m512i hi = _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(w, 4), m4), a), _mm512_set1_epi16(16));
  return _mm512_add_epi32(acc, _mm512_add_epi32(lo, hi));
#endif
}

// One row's unsigned values (Q4_K 0..15, Q6_K 0..63, Q4_0 0..15, Q5_0 0..31, Q8_0 q + 128) in
// element order, with its per-block numbers: Q4_K/Q6_K: sub-block scales (int32), super-block d,
// and Q4_K's -dmin*m_j; 32-blocks: d.
struct RowDecode {
  uint8_t* v;
  int32_t* sc;
  float* d;
  float* mins;
};
inline void decode_row(DType t, const uint8_t* src, int64_t K, const RowDecode& o) {
  const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
  switch (t) {
    case DType::q4_K:
      for (int64_t b = 0; b < K / 256; b++) {
        const uint8_t* blk = src + 144 * b;
        uint64_t sc8, m8;
        q4k_unpack_scales(blk + 4, &sc8, &m8);
        const float dmin = f16_scale(blk + 2);
        o.d[b] = f16_scale(blk);
        for (int j = 0; j < 8; j++) {
          o.sc[8 * b + j] = static_cast<int32_t>((sc8 >> (8 * j)) & 0xFF);
          o.mins[8 * b + j] = -dmin * static_cast<float>((m8 >> (8 * j)) & 0xFF);
        }
        for (int ch = 0; ch < 4; ch++) {
          __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * ch));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.v + 256 * b + 64 * ch), _mm256_and_si256(q, m4));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.v + 256 * b + 64 * ch + 32), nibbles_hi256(q));
        }
      }
      break;
    case DType::q6_K:
      for (int64_t b = 0; b < K / 256; b++) {
        const uint8_t* blk = src + 210 * b;
        o.d[b] = f16_scale(blk + 208);
        for (int j = 0; j < 16; j++) o.sc[16 * b + j] = static_cast<int8_t>(blk[192 + j]);
        for (int h = 0; h < 2; h++) {
          __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h));
          __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * h + 32));
          __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * h));
          uint8_t* out = o.v + 256 * b + 128 * h;
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30)));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32), _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30)));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 64), _mm256_or_si256(nibbles_hi256(ql0), _mm256_and_si256(qh, m30)));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 96), _mm256_or_si256(nibbles_hi256(ql1), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30)));
        }
      }
      break;
    default:  // 32-blocks
      for (int64_t b = 0; b < K / 32; b++) {
        __m256i q;
        const uint8_t* blk;
        if (t == DType::q8_0) {
          blk = src + 34 * b;
          q = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)), _mm256_set1_epi8(static_cast<char>(0x80)));
        } else if (t == DType::q4_0) {
          blk = src + 18 * b;
          q = q4_block_values(blk + 2);
        } else {
          blk = src + 22 * b;
          q = _mm256_or_si256(q4_block_values(blk + 6), q5_high_bits(rd_u32(blk + 2)));
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o.v + 32 * b), q);
        o.d[b] = f16_scale(blk);
      }
      break;
  }
}
inline int quant_offset(DType t) { return t == DType::q8_0 ? 128 : t == DType::q4_0 ? 8 : t == DType::q5_0 ? 16 : t == DType::q6_K ? 32 : 0; }

// out[j] = column j of the 16 x 16 dword matrix in[0..15] (rows).
inline void transpose16x16_epi32(const __m512i (&in)[16], __m512i (&out)[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(in[i], in[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(in[i], in[i + 1]);
  }
  for (int q = 0; q < 16; q += 4) {
    u[q] = _mm512_unpacklo_epi64(t[q], t[q + 2]);
    u[q + 1] = _mm512_unpackhi_epi64(t[q], t[q + 2]);
    u[q + 2] = _mm512_unpacklo_epi64(t[q + 1], t[q + 3]);
    u[q + 3] = _mm512_unpackhi_epi64(t[q + 1], t[q + 3]);
  }
  for (int m = 0; m < 4; m++) {
    __m512i v0 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x88), v1 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xDD);
    __m512i v2 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x88), v3 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xDD);
    out[m] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    out[m + 8] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    out[m + 4] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    out[m + 12] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
}

// A task's rows decoded for the micro-kernels.
//  quantized: v [groups][K/4][16][4] u8, sc [groups][K/sg][16] int32 (K-quants; sg 32 for Q4_K,
//             16 for Q6_K), d [groups][K/db][16] f32 (db 256 K-quants, 32 otherwise),
//             mins [groups][K/32][16] f32 (Q4_K).
//  float:     f [rows][K] f32.
struct Panel {
  int64_t K = 0, rows = 0;
  DType type = DType::f32;
  uint8_t* v = nullptr;
  int32_t* sc = nullptr;
  float* d = nullptr;
  float* mins = nullptr;
  float* f = nullptr;
  int sg = 32, db = 32;
};

// Decodes rows [r0, r0 + nr) (nr <= kRB; missing rows are zero) into P.
inline bool panel_decode(const TensorView& w, int64_t r0, int64_t nr, AlignedBuffer& buf, Panel& P) {
  const int64_t K = w.ne[0];
  const uint64_t rb = weight_row_bytes(w);
  P.K = K;
  P.rows = nr;
  P.type = w.type;
  const size_t k = static_cast<size_t>(K);
  if (act_form(w.type) == ActForm::f32) {
    if (!buf.reserve(static_cast<size_t>(nr) * k * 4)) return false;
    P.f = buf.as<float>();
    for (int64_t i = 0; i < nr; i++) dequant_row(w, r0 + i, P.f + static_cast<size_t>(i) * k);
    return true;
  }
  const bool kq = act_form(w.type) == ActForm::q8_256;
  P.sg = w.type == DType::q6_K ? 16 : 32;
  P.db = kq ? 256 : 32;
  const size_t G = kRG, vals = round_up(G * 16 * k, 64), scn = kq ? round_up(G * 16 * k / P.sg * 4, 64) : 0;
  const size_t dn = round_up(G * 16 * k / P.db * 4, 64), mn = w.type == DType::q4_K ? round_up(G * 16 * k / 32 * 4, 64) : 0;
  const size_t tmp = round_up(k, 64) * 16 + round_up(k / 16 * 4, 64) + 2 * round_up(k / 16 * 4, 64);
  if (!buf.reserve(vals + scn + dn + mn + tmp)) return false;
  P.v = buf.as<uint8_t>();
  P.sc = buf.as<int32_t>(vals);
  P.d = buf.as<float>(vals + scn);
  P.mins = buf.as<float>(vals + scn + dn);
  uint8_t* rows = buf.as<uint8_t>(vals + scn + dn + mn);            // [16][K] one group's rows
  const size_t rs = round_up(k, 64);
  int32_t* tsc = buf.as<int32_t>(vals + scn + dn + mn + rs * 16);  // one row's numbers
  float* td = reinterpret_cast<float*>(tsc + round_up(k / 16 * 4, 64) / 4);
  float* tm = td + round_up(k / 16 * 4, 64) / 4;
  const size_t nsc = kq ? k / static_cast<size_t>(P.sg) : 0, nd = k / static_cast<size_t>(P.db), nm = k / 32;
  for (size_t g = 0; g < G; g++) {
    for (int i = 0; i < 16; i++) {
      const int64_t r = static_cast<int64_t>(g) * 16 + i;
      uint8_t* rv = rows + static_cast<size_t>(i) * rs;
      if (r >= nr) {  // padding rows compute zeros (never stored)
        std::memset(rv, 0, k);
        for (size_t j = 0; j < nsc; j++) P.sc[(g * nsc + j) * 16 + static_cast<size_t>(i)] = 0;
        for (size_t j = 0; j < nd; j++) P.d[(g * nd + j) * 16 + static_cast<size_t>(i)] = 0;
        if (P.type == DType::q4_K)
          for (size_t j = 0; j < nm; j++) P.mins[(g * nm + j) * 16 + static_cast<size_t>(i)] = 0;
        continue;
      }
      decode_row(w.type, w.data + static_cast<uint64_t>(r0 + r) * rb, K, RowDecode{rv, tsc, td, tm});
      for (size_t j = 0; j < nsc; j++) P.sc[(g * nsc + j) * 16 + static_cast<size_t>(i)] = tsc[j];
      for (size_t j = 0; j < nd; j++) P.d[(g * nd + j) * 16 + static_cast<size_t>(i)] = td[j];
      if (P.type == DType::q4_K)
        for (size_t j = 0; j < nm; j++) P.mins[(g * nm + j) * 16 + static_cast<size_t>(i)] = tm[j];
    }
    // interleave: v[g][k4][i] = dword k4 of row i
    uint32_t* dst = reinterpret_cast<uint32_t*>(P.v + g * 16 * k);
    size_t k4 = 0;
    for (; k4 + 16 <= k / 4; k4 += 16) {
      __m512i in[16], out[16];
      for (int i = 0; i < 16; i++) in[i] = _mm512_loadu_si512(rows + static_cast<size_t>(i) * rs + 4 * k4);
      transpose16x16_epi32(in, out);
      for (int j = 0; j < 16; j++) _mm512_storeu_si512(dst + (k4 + static_cast<size_t>(j)) * 16, out[j]);
    }
    for (; k4 < k / 4; k4++)
      for (int i = 0; i < 16; i++) std::memcpy(dst + k4 * 16 + static_cast<size_t>(i), rows + static_cast<size_t>(i) * rs + 4 * k4, 4);
  }
  return true;
}

// The activations' start values of the integer sums: -offset * (sum of the activations) per block
// of `group` values (Q6_K: 16, 32-blocks: 32). [T][K/group].
inline void offset_starts(const MatmulInput& in, ActForm f, int offset, int group, int32_t* out) {
  const int64_t n = in.n() / group;
  for (int64_t t = 0; t < in.n_tokens(); t++) {
    const int16_t* s = in.row(f, t).sums;
    for (int64_t j = 0; j < n; j++) out[t * n + j] = -offset * s[j];
  }
}

// K-quant micro-kernel: the 32 panel rows times tokens tj[0..kRN); out[g][t] = 16 row results.
template <bool kQ4K>
inline void micro_kq(const Panel& P, const MatmulInput& in, const int32_t* starts, const int64_t (&tj)[kRN], __m512 (&out)[kRG][kRN]) {
  const int64_t K = P.K, nsb = K / 256, nsc = K / P.sg;
  const int sub = P.sg / 4;  // k4 steps per sub-block
  const int32_t* aq[kRN];
  const float* ad[kRN];
  const float* am[kRN];
  const int32_t* ast[kRN];
  for (int t = 0; t < kRN; t++) {
    ActQ8 a = in.row(ActForm::q8_256, tj[t]);
    aq[t] = reinterpret_cast<const int32_t*>(a.q);
    ad[t] = a.d;
    am[t] = in.corr(ActForm::q8_256, tj[t], 32);
    ast[t] = starts ? starts + tj[t] * nsc : nullptr;
  }
  const __m512i* wv[kRG];
  const __m512i* wsc[kRG];
  const float* wd[kRG];
  const float* wm[kRG];
  for (int g = 0; g < kRG; g++) {
    wv[g] = reinterpret_cast<const __m512i*>(P.v + static_cast<size_t>(g) * 16 * static_cast<size_t>(K));
    wsc[g] = reinterpret_cast<const __m512i*>(P.sc + static_cast<size_t>(g) * 16 * static_cast<size_t>(nsc));
    wd[g] = P.d + static_cast<size_t>(g) * 16 * static_cast<size_t>(nsb);
    wm[g] = P.mins + static_cast<size_t>(g) * 16 * static_cast<size_t>(K / 32);
  }
  __m512 accf[kRG][kRN];
  for (int g = 0; g < kRG; g++)
    for (int t = 0; t < kRN; t++) accf[g][t] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; s++) {
    __m512i acc[kRG][kRN];
    for (int g = 0; g < kRG; g++)
      for (int t = 0; t < kRN; t++) acc[g][t] = _mm512_setzero_si512();
    for (int64_t j = s * 256 / P.sg; j < (s + 1) * 256 / P.sg; j++) {  // sub-blocks
      __m512i sb[kRG][kRN];
#pragma GCC unroll 8
      for (int g = 0; g < kRG; g++)
#pragma GCC unroll 8
        for (int t = 0; t < kRN; t++) sb[g][t] = kQ4K ? _mm512_setzero_si512() : _mm512_set1_epi32(ast[t][j]);
      const int64_t k40 = j * sub;
#pragma GCC unroll 8
      for (int u = 0; u < sub; u++) {
        __m512i w[kRG];
#pragma GCC unroll 8
        for (int g = 0; g < kRG; g++) w[g] = _mm512_load_si512(wv[g] + k40 + u);
#pragma GCC unroll 8
        for (int t = 0; t < kRN; t++) {
          __m512i a = _mm512_set1_epi32(aq[t][k40 + u]);
#pragma GCC unroll 8
          for (int g = 0; g < kRG; g++) sb[g][t] = dpbusd(sb[g][t], w[g], a);
        }
      }
#pragma GCC unroll 8
      for (int g = 0; g < kRG; g++) {
        __m512i sc = _mm512_load_si512(wsc[g] + j);
#pragma GCC unroll 8
        for (int t = 0; t < kRN; t++) acc[g][t] = _mm512_add_epi32(acc[g][t], _mm512_mullo_epi32(sb[g][t], sc));
      }
      if (kQ4K) {  // mins: -dmin*m_j (row) times d*sum_j (token)
#pragma GCC unroll 8
        for (int g = 0; g < kRG; g++) {
          __m512 m = _mm512_load_ps(wm[g] + 16 * j);
#pragma GCC unroll 8
          for (int t = 0; t < kRN; t++) accf[g][t] = _mm512_fmadd_ps(m, _mm512_set1_ps(am[t][j]), accf[g][t]);
        }
      }
    }
#pragma GCC unroll 8
    for (int g = 0; g < kRG; g++) {
      __m512 d = _mm512_load_ps(wd[g] + 16 * s);
#pragma GCC unroll 8
      for (int t = 0; t < kRN; t++)
        accf[g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[g][t]), _mm512_mul_ps(d, _mm512_set1_ps(ad[t][s])), accf[g][t]);
    }
  }
  for (int g = 0; g < kRG; g++)
    for (int t = 0; t < kRN; t++) out[g][t] = accf[g][t];
}

// 32-block micro-kernel (Q4_0, Q5_0, Q8_0): per block, the integer sum starts at -offset * sum
// of the activations, then one float FMA with d(row) * d(token).
inline void micro_q32(const Panel& P, const MatmulInput& in, const int32_t* starts, const int64_t (&tj)[kRN], __m512 (&out)[kRG][kRN]) {
  const int64_t K = P.K, nb = K / 32;
  const int32_t* aq[kRN];
  const float* ad[kRN];
  const int32_t* ast[kRN];
  for (int t = 0; t < kRN; t++) {
    ActQ8 a = in.row(ActForm::q8_32, tj[t]);
    aq[t] = reinterpret_cast<const int32_t*>(a.q);
    ad[t] = a.d;
    ast[t] = starts + tj[t] * nb;
  }
  const __m512i* wv[kRG];
  const float* wd[kRG];
  for (int g = 0; g < kRG; g++) {
    wv[g] = reinterpret_cast<const __m512i*>(P.v + static_cast<size_t>(g) * 16 * static_cast<size_t>(K));
    wd[g] = P.d + static_cast<size_t>(g) * 16 * static_cast<size_t>(nb);
  }
  __m512 accf[kRG][kRN];
  for (int g = 0; g < kRG; g++)
    for (int t = 0; t < kRN; t++) accf[g][t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; b++) {
    __m512i acc[kRG][kRN];
#pragma GCC unroll 8
    for (int t = 0; t < kRN; t++) {
      __m512i st = _mm512_set1_epi32(ast[t][b]);
#pragma GCC unroll 8
      for (int g = 0; g < kRG; g++) acc[g][t] = st;
    }
#pragma GCC unroll 8
    for (int u = 0; u < 8; u++) {
      __m512i w[kRG];
#pragma GCC unroll 8
      for (int g = 0; g < kRG; g++) w[g] = _mm512_load_si512(wv[g] + 8 * b + u);
#pragma GCC unroll 8
      for (int t = 0; t < kRN; t++) {
        __m512i a = _mm512_set1_epi32(aq[t][8 * b + u]);
#pragma GCC unroll 8
        for (int g = 0; g < kRG; g++) acc[g][t] = dpbusd(acc[g][t], w[g], a);
      }
    }
#pragma GCC unroll 8
    for (int g = 0; g < kRG; g++) {
      __m512 d = _mm512_load_ps(wd[g] + 16 * b);
#pragma GCC unroll 8
      for (int t = 0; t < kRN; t++)
        accf[g][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[g][t]), _mm512_mul_ps(d, _mm512_set1_ps(ad[t][b])), accf[g][t]);
    }
  }
  for (int g = 0; g < kRG; g++)
    for (int t = 0; t < kRN; t++) out[g][t] = accf[g][t];
}

// Q8_0 micro-kernel in llama.cpp's order: per row and token, 8 float lanes (one per 4 values of a
// block) each take one FMA per block with d(row) * d(token), then the 8-lane tree, as dot_q8_0.
// Each 4-value sum is exact: (q + 128) . a starts at -128 * (sum of those 4 activations).
inline void micro_q8_0(const Panel& P, const MatmulInput& in, const int32_t* starts4, const int64_t (&tj)[kRN], __m512 (&out)[kRG][kRN]) {
  const int64_t K = P.K, nb = K / 32;
  const __m512i* wv[kRG];
  const float* wd[kRG];
  for (int g = 0; g < kRG; g++) {
    wv[g] = reinterpret_cast<const __m512i*>(P.v + static_cast<size_t>(g) * 16 * static_cast<size_t>(K));
    wd[g] = P.d + static_cast<size_t>(g) * 16 * static_cast<size_t>(nb);
  }
  for (int t = 0; t < kRN; t++) {
    ActQ8 a = in.row(ActForm::q8_32, tj[t]);
    const int32_t* aq = reinterpret_cast<const int32_t*>(a.q);
    const int32_t* st = starts4 + tj[t] * (K / 4);
    __m512 acc[kRG][8];
    for (int g = 0; g < kRG; g++)
      for (int u = 0; u < 8; u++) acc[g][u] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
      __m512 sc[kRG];
#pragma GCC unroll 8
      for (int g = 0; g < kRG; g++) sc[g] = _mm512_mul_ps(_mm512_load_ps(wd[g] + 16 * b), _mm512_set1_ps(a.d[b]));
#pragma GCC unroll 8
      for (int u = 0; u < 8; u++) {
        const __m512i av = _mm512_set1_epi32(aq[8 * b + u]), s0 = _mm512_set1_epi32(st[8 * b + u]);
#pragma GCC unroll 8
        for (int g = 0; g < kRG; g++)
          acc[g][u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dpbusd(s0, _mm512_load_si512(wv[g] + 8 * b + u), av)), sc[g], acc[g][u]);
      }
    }
    for (int g = 0; g < kRG; g++) {
      const __m512 t0 = _mm512_add_ps(acc[g][4], acc[g][0]), t1 = _mm512_add_ps(acc[g][5], acc[g][1]);
      const __m512 t2 = _mm512_add_ps(acc[g][6], acc[g][2]), t3 = _mm512_add_ps(acc[g][7], acc[g][3]);
      out[g][t] = _mm512_add_ps(_mm512_add_ps(t0, t2), _mm512_add_ps(t1, t3));
    }
  }
}

// Float micro-kernel (f32 panel of f32/f16/bf16/MLX weights times f32 X): 2 x 4 dot products.
inline void micro_f32(const Panel& P, const int64_t (&pi)[2], const MatmulInput& in, const int64_t (&tj)[4], float (&out)[2][4]) {
  const int64_t K = P.K;
  const float* wr[2] = {P.f + pi[0] * K, P.f + pi[1] * K};
  const float* xr[4];
  for (int j = 0; j < 4; j++) xr[j] = in.x() + tj[j] * K;
  __m512 acc[2][4];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 16) {
    __mmask16 mask = K - k >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (K - k)) - 1);
    __m512 x[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) x[j] = _mm512_maskz_loadu_ps(mask, xr[j] + k);
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
      __m512 wv = _mm512_maskz_loadu_ps(mask, wr[i] + k);
#pragma GCC unroll 4
      for (int j = 0; j < 4; j++) acc[i][j] = _mm512_fmadd_ps(wv, x[j], acc[i][j]);
    }
  }
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) out[i][j] = reduce16_ps(acc[i][j]);
}

#if defined(LLMI_SIMD_BF16)
// bf16 weights (read in place) times bf16 activations, 2 rows x 4 tokens, in llamafile's order
// (vdpbf16ps over 32 pairs at a time, then the tree; as dot_float<bf16> for several tokens).
inline void micro_bf16(const uint8_t* const (&wr)[2], const uint16_t* const (&xr)[4], int64_t K, float (&out)[2][4]) {
  __m512 acc[2][4];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) acc[i][j] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; k += 32) {
    __m512bh x[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) x[j] = (__m512bh)_mm512_loadu_si512(xr[j] + k);
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++) {
      const __m512bh wv = (__m512bh)_mm512_loadu_si512(wr[i] + 2 * k);
#pragma GCC unroll 4
      for (int j = 0; j < 4; j++) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], wv, x[j]);
    }
  }
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) out[i][j] = reduce16_ps(acc[i][j]);
}
#endif

// False when out of memory (the scratch could not grow).
inline bool gemm(const TensorView& w, const MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool, MatmulScratch& scratch) {
  const int64_t rows = w.rows(), T = in.n_tokens(), K = w.ne[0];
  const int64_t n_rb = (rows + kRB - 1) / kRB, n_tb = (T + kTB - 1) / kTB;
  const ActForm f = act_form(w.type);
  // integer start values of the blocks (offsets), shared by every task
  AlignedBuffer& starts_buf = scratch.starts;
  const int off = quant_offset(w.type), group = w.type == DType::q6_K ? 16 : 32;
  int32_t* starts = nullptr;
  if (w.type == DType::q8_0) {  // per 4 values (micro_q8_0)
    if (!starts_buf.reserve(static_cast<size_t>(T * (K / 4)) * 4 + 64)) return false;
    starts = starts_buf.as<int32_t>();
    for (int64_t t = 0; t < T; t++) {
      const int8_t* q = in.row(f, t).q;
      for (int64_t j = 0; j < K / 4; j++) starts[t * (K / 4) + j] = -off * (q[4 * j] + q[4 * j + 1] + q[4 * j + 2] + q[4 * j + 3]);
    }
  } else if (f != ActForm::f32 && off != 0) {
    if (!starts_buf.reserve(static_cast<size_t>(T * (K / group)) * 4 + 64)) return false;
    starts = starts_buf.as<int32_t>();
    offset_starts(in, f, off, group, starts);
  }
#if defined(LLMI_SIMD_BF16)
  // bf16: the activations (already rounded to bf16) as bf16 once; rows are used in place
  AlignedBuffer& xb_buf = scratch.xb;
  uint16_t* xb = nullptr;
  if (w.type == DType::bf16 && in.bf16_exact()) {
    if (!xb_buf.reserve(static_cast<size_t>(T * K) * 2 + 64)) return false;
    xb = xb_buf.as<uint16_t>();
    for (int64_t i = 0; i < T * K; i += 32)
      _mm512_storeu_si512(xb + i, (__m512i)_mm512_cvtne2ps_pbh(_mm512_loadu_ps(in.x() + i + 16), _mm512_loadu_ps(in.x() + i)));
  }
#endif
  LLMI_ASSERT(scratch.n_panels >= pool.size());
  std::atomic<bool> failed{false};
  pool.parallel_for(static_cast<int>(n_rb * n_tb), [&](int task, int thread) {
    AlignedBuffer& buf = scratch.panels[static_cast<size_t>(thread)];
    const int64_t rblk = task % n_rb, tblk = task / n_rb;
    const int64_t r0 = rblk * kRB, nr = std::min<int64_t>(kRB, rows - r0);
    const int64_t t0 = tblk * kTB, nt = std::min<int64_t>(kTB, T - t0);
#if defined(LLMI_SIMD_BF16)
    if (xb) {
      const uint64_t rb = weight_row_bytes(w);
      for (int64_t j0 = 0; j0 < nt; j0 += 4) {
        const uint16_t* xr[4];
        for (int j = 0; j < 4; j++) xr[j] = xb + (t0 + std::min<int64_t>(j0 + j, nt - 1)) * K;
        for (int64_t i0 = 0; i0 < nr; i0 += 2) {
          const uint8_t* wr[2] = {w.data + static_cast<uint64_t>(r0 + i0) * rb, w.data + static_cast<uint64_t>(r0 + std::min<int64_t>(i0 + 1, nr - 1)) * rb};
          float out[2][4];
          micro_bf16(wr, xr, K, out);
          for (int j = 0; j < 4 && j0 + j < nt; j++)
            for (int i = 0; i < 2 && i0 + i < nr; i++) y[(t0 + j0 + j) * ldy + r0 + i0 + i] = out[i][j];
        }
      }
      return;
    }
#endif
    Panel P;
    if (!panel_decode(w, r0, nr, buf, P)) {
      failed.store(true, std::memory_order_relaxed);
      return;
    }
    for (int64_t j0 = 0; j0 < nt; j0 += kRN) {
      int64_t tj[kRN];
      for (int j = 0; j < kRN; j++) tj[j] = t0 + std::min<int64_t>(j0 + j, nt - 1);
      if (f == ActForm::f32) {
        for (int64_t i0 = 0; i0 < nr; i0 += 2) {
          int64_t pi[2] = {i0, std::min<int64_t>(i0 + 1, nr - 1)};
          float out[2][4];
          micro_f32(P, pi, in, tj, out);
          for (int j = 0; j < kRN && j0 + j < nt; j++)
            for (int i = 0; i < 2 && i0 + i < nr; i++) y[(t0 + j0 + j) * ldy + r0 + i0 + i] = out[i][j];
        }
        continue;
      }
      __m512 out[kRG][kRN];
      if (w.type == DType::q4_K) micro_kq<true>(P, in, starts, tj, out);
      else if (w.type == DType::q6_K) micro_kq<false>(P, in, starts, tj, out);
      else if (w.type == DType::q8_0) micro_q8_0(P, in, starts, tj, out);
      else micro_q32(P, in, starts, tj, out);
      for (int j = 0; j < kRN && j0 + j < nt; j++) {
        float* yt = y + (t0 + j0 + j) * ldy + r0;
        for (int g = 0; g < kRG && 16 * g < nr; g++) {
          const int64_t left = nr - 16 * g;
          const __mmask16 m = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
          _mm512_mask_storeu_ps(yt + 16 * g, m, out[g][j]);
        }
      }
    }
  });
  return !failed.load();
}
#endif  // LLMI_SIMD_AVX512

// Smallest token count that takes the matrix-matrix path (fixed: it must not depend on threads).
constexpr int64_t kGemmMinTokens = 6;

// Y = X W^T for an input shared by several matmuls. False when out of memory.
inline bool matmul(const TensorView& w, MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool,
                   [[maybe_unused]] MatmulScratch& scratch) {
  LLMI_ASSERT(in.n() == w.ne[0]);
  if (in.n_tokens() <= 0 || w.rows() <= 0) return true;
  ActForm f = act_form(w.type);
  if (!in.prepare(f, pool, f == ActForm::q8_256 ? &quantize_q8_256 : &quantize_q8_32)) return false;
  if ((w.type == DType::mlx_q4 || w.type == DType::mlx_q8) && !in.prepare_mlx(w.group_size)) return false;
#if defined(LLMI_SIMD_AVX512)
  // f32 / f16 rows that are not a multiple of 16 long (bf16 with vdpbf16ps: 32): llama.cpp's order
  // is its vector dot product (dot_float) there, not the tiled one of the matrix kernel
  bool odd_float = (w.type == DType::f32 || w.type == DType::f16) && w.ne[0] % 16 != 0;
#if defined(LLMI_SIMD_BF16)
  odd_float = odd_float || (w.type == DType::bf16 && in.bf16_exact() && w.ne[0] % 32 != 0);
#endif
  if (in.n_tokens() >= kGemmMinTokens && gemm_supported(w.type) && !odd_float) {
    return gemm(w, in, y, ldy, pool, scratch);
  }
#endif
  gemv(w, in, y, ldy, pool);
  return true;
}

// Y[t][r] = sum_k W[r][k] * X[t][k]; X is [n_tokens][ne0(W)] f32, Y is [n_tokens][ldy] f32.
// False when out of memory.
inline bool matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t ldy, ThreadPool& pool,
                   bool bf16_exact, MatmulScratch& scratch) {
  scratch.in.reset(x, n_tokens, w.ne[0], bf16_exact);
  return matmul(w, scratch.in, y, ldy, pool, scratch);
}

// The two matmuls as table entries (26_kernels_end).
inline bool matmul_in(const TensorView& w, MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool, MatmulScratch& scratch) {
  return matmul(w, in, y, ldy, pool, scratch);
}
inline bool matmul_x(const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t ldy, ThreadPool& pool,
                     bool bf16_exact, MatmulScratch& scratch) {
  return matmul(w, x, n_tokens, y, ldy, pool, bf16_exact, scratch);
}

LLMI_KNS_END
}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// ---- src/26_kernels_end.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
// ==== The kernel table: what the engine calls, filled per level (end of the kernel region) ====
// One row per entry point: return type, name, parameters, arguments. A native build's KernelTable
// calls the kernels directly (static members); a dispatch build's holds one pointer per entry,
// one table per level (k_scalar::kernel_table, ...), chosen at load (select_kernels).
#if !defined(LLMI_KERNEL_ENTRIES)
// clang-format off
#define LLMI_KERNEL_ENTRIES(X)                                                                                      \
  X(void, quantize_q8_32, (const float* x, int64_t n, int8_t* q, float* d, int16_t* sums), (x, n, q, d, sums))       \
  X(void, quantize_q8_256, (const float* x, int64_t n, int8_t* q, float* d, int16_t* sums), (x, n, q, d, sums))      \
  X(float, dot_q4_0, (const uint8_t* w, const ActQ8& a, int64_t n), (w, a, n))                                       \
  X(float, dot_q5_0, (const uint8_t* w, const ActQ8& a, int64_t n), (w, a, n))                                       \
  X(float, dot_q8_0, (const uint8_t* w, const ActQ8& a, int64_t n), (w, a, n))                                       \
  X(float, dot_q4_k, (const uint8_t* w, const ActQ8& a, int64_t n), (w, a, n))                                       \
  X(float, dot_q6_k, (const uint8_t* w, const ActQ8& a, int64_t n), (w, a, n))                                       \
  X(float, dot_f32, (const uint8_t* w, const float* x, int64_t n, bool sgemm, bool bf16_exact), (w, x, n, sgemm, bf16_exact))   \
  X(float, dot_f16, (const uint8_t* w, const float* x, int64_t n, bool sgemm, bool bf16_exact), (w, x, n, sgemm, bf16_exact))   \
  X(float, dot_bf16, (const uint8_t* w, const float* x, int64_t n, bool sgemm, bool bf16_exact), (w, x, n, sgemm, bf16_exact))  \
  X(float, dot_mlx, (const TensorView& w, int64_t row, const float* x, const float* xs), (w, row, x, xs))            \
  X(void, dequant_row, (const TensorView& w, int64_t row, float* out), (w, row, out))                                \
  X(void, f16_row_to_f32, (const uint16_t* src, float* dst, int64_t n), (src, dst, n))                              \
  X(void, f32_row_to_f16, (const float* src, uint16_t* dst, int64_t n), (src, dst, n))                              \
  X(bool, matmul_in, (const TensorView& w, MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool, MatmulScratch& s), \
    (w, in, y, ldy, pool, s))                                                                                        \
  X(bool, matmul_x, (const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t ldy, ThreadPool& pool, \
    bool bf16_exact, MatmulScratch& s), (w, x, n_tokens, y, ldy, pool, bf16_exact, s))                               \
  X(void, attn_scores, (const float* q, const uint8_t* k, size_t stride, int n, int hd, bool f16, float scale, float* out), \
    (q, k, stride, n, hd, f16, scale, out))                                                                          \
  X(double, attn_exp, (float* s, int n, float max, int phase), (s, n, max, phase))                                   \
  X(void, attn_values, (const float* w, const uint8_t* v0, size_t stride, int slots, int lo, int pos, int hd, bool f16, \
    bool several, float* part, float* out), (w, v0, stride, slots, lo, pos, hd, f16, several, part, out))           \
  X(void, silu_row, (const float* x, float* y, int n), (x, y, n))                                                    \
  X(void, gelu_tanh_row, (const float* x, float* y, int n), (x, y, n))
// clang-format on
#endif

namespace llminfer {
inline namespace v0_1 {
namespace detail {
#if defined(LLMI_DISPATCH)
#if !defined(LLMI_KERNEL_PASS)
struct KernelTable {
  const char* name;  // "scalar", "avx2", "avx512", "avx512bf16"
#define LLMI_X(r, n, p, a) r(*n) p;
  LLMI_KERNEL_ENTRIES(LLMI_X)
#undef LLMI_X
};
#endif
LLMI_KNS_BEGIN
#define LLMI_X(r, n, p, a) &n,
inline constexpr KernelTable kernel_table = {LLMI_KERNEL_NAME, LLMI_KERNEL_ENTRIES(LLMI_X)};
#undef LLMI_X
LLMI_KNS_END
#else
struct KernelTable {
  static constexpr const char* name = simd_compiled();
#define LLMI_X(r, n, p, a) \
  static r n p { return detail::n a; }
  LLMI_KERNEL_ENTRIES(LLMI_X)
#undef LLMI_X
};
inline constexpr KernelTable native_kernels{};
#endif
}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

#if defined(LLMI_KERNEL_PASS)
#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif
#endif
#undef LLMI_KNS_BEGIN
#undef LLMI_KNS_END
#undef LLMI_KERNEL_NAME

// The dispatch build: the kernel region again for each x86 level (the header includes itself).
#if defined(LLMI_DISPATCH) && !defined(LLMI_KERNEL_PASS)
#define LLMI_KERNEL_PASS 2
#include __FILE__
#undef LLMI_KERNEL_PASS
#define LLMI_KERNEL_PASS 3
#include __FILE__
#undef LLMI_KERNEL_PASS
#define LLMI_KERNEL_PASS 4
#include __FILE__
#undef LLMI_KERNEL_PASS
// back to the baseline for the rest of the implementation
#undef LLMI_SIMD_AVX2
#undef LLMI_SIMD_AVX512
#undef LLMI_SIMD_VNNI
#undef LLMI_SIMD_BF16
#define LLMI_SIMD_SCALAR 1
#endif

#if !defined(LLMI_KERNEL_PASS)
namespace llminfer {
inline namespace v0_1 {
namespace detail {

#if defined(LLMI_DISPATCH)
// Every level compiled in, lowest first (indices as cpu_has_kernel_level's).
inline constexpr const KernelTable* kernel_levels[] = {&k_scalar::kernel_table, &k_avx2::kernel_table,
                                                       &k_avx512::kernel_table, &k_avx512bf16::kernel_table};
inline constexpr int kNumKernelLevels = 4;
#endif

// The names of the levels compiled in, lowest first, comma-separated ("avx512" in a native build).
inline std::string kernel_levels_compiled() {
#if defined(LLMI_DISPATCH)
  std::string s;
  for (const KernelTable* k : kernel_levels) s += (s.empty() ? "" : ",") + std::string(k->name);
  return s;
#else
  return simd_compiled();
#endif
}

// The kernels for a request: "" the best this CPU can run (a dispatch build reads the environment
// variable LLMINFER_KERNELS then), else a level by name, which the CPU must have.
inline Result<const KernelTable*> select_kernels(std::string_view request) {
#if defined(LLMI_DISPATCH)
  std::string req(request);
  const char* from = "LoadOptions::kernels";
  if (req.empty()) {
    if (const char* env = std::getenv("LLMINFER_KERNELS"); env && *env) {
      req = env;
      from = "LLMINFER_KERNELS";
    }
  }
  int best = 0;
  for (int i = 1; i < kNumKernelLevels; i++)
    if (cpu_has_kernel_level(i)) best = i;
  if (req.empty()) return kernel_levels[best];
  for (int i = 0; i < kNumKernelLevels; i++) {
    if (req != kernel_levels[i]->name) continue;
    if (i > best)
      return make_error(Errc::cpu_unsupported,
                        strf("%s=%s: this CPU (or OS) cannot run the %s kernels (the best it has here: %s)", from,
                             req.c_str(), req.c_str(), kernel_levels[best]->name));
    return kernel_levels[i];
  }
  return make_error(Errc::invalid_argument, strf("%s=%s: no such kernel level (this build has %s)", from,
                                                 printable(req).c_str(), kernel_levels_compiled().c_str()));
#else
  if (request.empty() || request == native_kernels.name) return &native_kernels;
  return make_error(Errc::invalid_argument,
                    strf("LoadOptions::kernels=%s: this build runs only the %s kernels (build with "
                         "LLMINFER_DISPATCH for a choice)",
                         printable(request).c_str(), native_kernels.name));
#endif
}

#if defined(LLMI_DISPATCH)
// The process's default kernels (select_kernels("")), for code outside an engine (tests, tools,
// the loader's dequantization); an invalid LLMINFER_KERNELS falls back to the best level here
// (loading a model reports it).
inline const KernelTable& kernels() {
  static const KernelTable* k = [] {
    auto r = select_kernels("");
    return r ? *r : kernel_levels[0];
  }();
  return *k;
}
// The kernels by their names, through the default table.
#define LLMI_X(r, n, p, a) \
  inline r n p { return kernels().n a; }
LLMI_KERNEL_ENTRIES(LLMI_X)
#undef LLMI_X
template <DType T>
inline float dot_float(const uint8_t* w, const float* x, int64_t n, bool sgemm = false, bool bf16_exact = false) {
  if constexpr (T == DType::f32) return kernels().dot_f32(w, x, n, sgemm, bf16_exact);
  else if constexpr (T == DType::f16) return kernels().dot_f16(w, x, n, sgemm, bf16_exact);
  else return kernels().dot_bf16(w, x, n, sgemm, bf16_exact);
}
#else
inline const KernelTable& kernels() { return native_kernels; }
#endif

// For tests and tools: a matmul with scratch of its own, through the default kernels (aborts when
// out of memory; the engine passes its context's scratch and reports out_of_memory instead).
inline void matmul(const TensorView& w, MatmulInput& in, float* y, int64_t ldy, ThreadPool& pool) {
  MatmulScratch scratch(pool.size());
  LLMI_ASSERT(kernels().matmul_in(w, in, y, ldy, pool, scratch));
}
inline void matmul(const TensorView& w, const float* x, int64_t n_tokens, float* y, int64_t ldy, ThreadPool& pool,
                   bool bf16_exact = false) {
  MatmulScratch scratch(pool.size());
  LLMI_ASSERT(kernels().matmul_x(w, x, n_tokens, y, ldy, pool, bf16_exact, scratch));
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
#endif  // !LLMI_KERNEL_PASS

// ---- src/30_unicode_data.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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

// 649 ranges of Lu and Lt letters: varint(gap from previous end), varint(length)
inline constexpr const char kUpperOnly[] =
    "hCalDXBHhBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBCBBBBBBBBBBBBBBBCBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
    "BBBBBBBBBBBBBBBBBBCBBBBDCBBBCBDCEBCBDDCBCBBBBBCBBCBBCBDBBBCDBHCBCBCBBBBBBBBBBBBBBBBCBBBBBBBBBBBBBBBBBCCBBBDBBB"
    "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBHCBCCBBEBBBBBBBBhJBBBDBIBGBBDBBBCBRBJjBBCDDBBBBBBBBBBBB"
    "BBBBBBBBBBBFBCBBCCzBwBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBJBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
    "CBBBBBBBBBBBBCBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBC"
    "mBp6CmBBBFByW2C6kCrBCDgKBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
    "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBJBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
    "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBJIIGKIIIIGLBBBBBBBIIYIIIIIIFLFLEMFLFlIBEBDDCDCBDFGBBBBBBECE"
    "KCFB9BB8zCwBwBBBDCBBBBBBEBBCBIDBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
    "BBBBBBBBBBBBBBBBBBBIBBBEBtqeBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBTBBBBBBBBBBBBBBBBBBBBBBBBBBBnEBBBBBBB"
    "BBBBBBDBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBKBBBBCBBBBBBBBEBBBCBBBDBBBBBBBBBBBBBBBBBBB"
    "BFBFBBBBBBBBBBBBBBBEBBGBFBBBcBr5ValmBoBoEkB8ELBPBHBCq3BzBt/CgBgsVgBgtZaaaaaaBBCCBCCCEBIaaaCBECIBHbCBEBFBBDHbaa"
    "aaaaaaaaaeZhBZhBZhBZhBZhBB1pEiB";

// 658 ranges of Ll letters: varint(gap from previous end), varint(length)
inline constexpr const char kLowerOnly[] =
    "hDa6BBpBYBIBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBCBBBBBBBBBBBBBBBCBBBBBBBBBBBBBBBBBBBBBBBBBBB"
    "BBBBBBBBBBBBBBBBBBBCBBBBDCBBBCBDCEBCBDDCBCBBBBBCBBCBBCBDBBBCCCDGBCBCBBBBBBBBBBBBBBBBCBBBBBBBBBBBBBBBBBCCBBBDBB"
    "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBHCBCCBBEBBBBBBBBlCBbhGBBBDBDDSBbjBBCDDBBBBBBBBBBBBBBBB"
    "BBBBBBBFBBCBCCzBwBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBJBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBCBBB"
    "BBBBBBBBBCBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBwBpB"
    "n6CrBCD4XGikCJ3DsB/BNBiBmDBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
    "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBJBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
    "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBJIGKIIIIGKIIIIOCIIIIIIFBCGBDDBCIECCIIKDBCyIBDCDBbBEBEBCCIE"
    "EB1BBr1CwBBBDCBBBBBBEBBCBGFBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
    "BBBBBBBBBBBBBBBCHBBBEBMmBBBFBzoeBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBTBBBBBBBBBBBBBBBBBBBBBBBBBBBnEBBB"
    "BBBBBBBBBDBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBIBBBBCBBBBBBBBBEBBBCBBDBBBBBBBBBBBBBB"
    "BBBBBBFBFBBBBBBBBBBBBBBBEBBBGBBBBBBBBBcBDB1ZrBFJHwCg6THMFphBatmBoBoEkB7ELBPBHBCj4BzBt+CgBgsVgB6sZaaHBSaaaEBBBH"
    "BLaaaaaaaaaaaaaaaaaccZBGaZBGaZBGaZBGaZBGBB05BKBUGG3vCiB";

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
#endif  // !LLMI_KERNEL_PASS

// ---- src/31_unicode.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
// ==== Unicode: character classes, White_Space, simple case folding, NFC ====
// Decodes the tables of 30_unicode_data.hpp once (thread-safe function-local static) into two-stage
// lookup tables: one byte of flags per code point (major general category, White_Space, cased-letter kind,
// "NFC may change this"), one byte of canonical combining class. Text that is not valid UTF-8 is handled byte by byte:
// an invalid byte is a unit of class C (other) that NFC leaves untouched.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Major general category classes, as the pre-tokenizer regexes use them (\p{L}, \p{N}, ...).
enum class UClass : uint8_t { other = 0, letter = 1, mark = 2, number = 3, punct = 4, symbol = 5, separator = 6 };

constexpr uint8_t kUClassMask = 7;
constexpr uint8_t kUWhiteSpace = 8;   // Unicode White_Space (regex \s)
constexpr uint8_t kUNfcUnsafe = 16;   // non-zero combining class, a decomposition, or a composition's 2nd part
constexpr uint8_t kUUpperOnly = 32;   // general category Lu or Lt (letters in \p{Lu}\p{Lt}, not in \p{Ll}\p{Lm}\p{Lo})
constexpr uint8_t kULowerOnly = 64;   // general category Ll

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
  for (auto [table, flag] : {std::pair<const char*, uint8_t>{ucd::kUpperOnly, kUUpperOnly}, {ucd::kLowerOnly, kULowerOnly}}) {
    const char* p = table;
    uint32_t cp = 0;
    while (*p) {
      cp += ucd_varint(p);
      uint32_t len = ucd_varint(p);
      for (uint32_t k = 0; k < len; k++) full[cp++] |= flag;
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

// NFC of a span by the full algorithm (decompose, reorder, compose).
inline void nfc_full_append(std::string_view s, std::string& out) {
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
  // canonical ordering: stable sort of each run of non-starters by combining class (a merge sort:
  // O(n log n) on a run of 80,000 combining marks, where an insertion sort took seconds)
  std::vector<std::pair<uint8_t, uint32_t>> run;
  for (size_t i = 0; i < buf.size();) {
    if (ccc(buf[i]) == 0) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < buf.size() && ccc(buf[j]) != 0) j++;
    if (j - i > 1) {
      run.clear();
      for (size_t k = i; k < j; k++) run.emplace_back(ccc(buf[k]), buf[k]);
      std::stable_sort(run.begin(), run.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (size_t k = i; k < j; k++) buf[k] = run[k - i].second;
    }
    i = j;
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

// Canonical composition of the canonical decomposition (Unicode NFC). Invalid bytes pass through.
// A character that NFC cannot touch (kUNfcUnsafe clear: combining class 0, no decomposition, never the
// second part of a composition) is a safe cut: nothing before it interacts with it or with what follows.
// So only the runs of "unsafe" characters, with the character just before each run, go through the full
// algorithm; everything else is copied.
inline void nfc_append(std::string_view s, std::string& out) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0, emitted = 0, prev = 0;  // prev: start of the last safe character
  while (i < n) {
    int len = p[i] < 0x80 ? 1 : utf8_valid_len(p + i, n - i);
    if (len == 0 || p[i] < 0xCC) {  // ASCII, invalid bytes and everything below U+0300 are safe
      prev = i;
      i += len ? size_t(len) : 1;
      continue;
    }
    size_t j = i;
    if (!(uflags(utf8_next(s, j)) & kUNfcUnsafe)) {
      prev = i;
      i = j;
      continue;
    }
    size_t begin = std::max(prev, emitted), end = j;  // the run of unsafe characters from i
    while (end < n) {
      int l2 = p[end] < 0x80 ? 1 : utf8_valid_len(p + end, n - end);
      if (l2 == 0 || p[end] < 0xCC) break;
      size_t k = end;
      if (!(uflags(utf8_next(s, k)) & kUNfcUnsafe)) break;
      end = k;
    }
    out.append(s.data() + emitted, begin - emitted);
    nfc_full_append(s.substr(begin, end - begin), out);
    emitted = end;
    i = prev = end;
  }
  out.append(s.data() + emitted, n - emitted);
}

inline std::string nfc(std::string_view s) {
  std::string out;
  nfc_append(s, out);
  return out;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
#endif  // !LLMI_KERNEL_PASS

// ---- src/32_tokenizer.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
#ifndef LLMINFER_MAX_PROMPT_BYTES
// Bytes of text one encode call accepts (a prompt, a rendered conversation); more is refused with
// a clear error before any work. Tokenizing takes up to about 50 bytes of memory per input byte,
// so the default bounds that below 1 GB; the environment variable of the same name
// overrides it at run time (a number of bytes, read once).
#define LLMINFER_MAX_PROMPT_BYTES (16ull << 20)
#endif

namespace llminfer {
inline namespace v0_1 {
namespace detail {

inline uint64_t max_prompt_bytes_default() {
  static const uint64_t v = [] {
    uint64_t d = LLMINFER_MAX_PROMPT_BYTES;
    if (const char* e = std::getenv("LLMINFER_MAX_PROMPT_BYTES")) {
      char* end = nullptr;
      unsigned long long x = std::strtoull(e, &end, 10);
      if (end && end != e && *end == 0 && x > 0) d = x;
    }
    return d;
  }();
  return v;
}

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
    o200k,         // [^\r\n\p{L}\p{N}]?U*L+C?|[^\r\n\p{L}\p{N}]?U+L*C?|\p{N}{1,k}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|
                   // \s+(?!\S)|\s+  with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], L = [\p{Ll}\p{Lm}\p{Lo}\p{M}], C = the
                   // (?i) contractions (gpt-4o / llama-4; tekken: \p{N} single and no contractions)
    digits,        // Hugging Face Digits: numeric characters isolated (one by one, or in runs)
    punct_runs,    // [\p{P}$+<=>^~|]+ isolated (llama.cpp's default BPE pre-tokenizer)
    number_runs,   // \p{N}+ isolated
    ascii_digit3,  // [0-9][0-9][0-9] isolated
    literal,       // split on a literal string with a Hugging Face SplitDelimiterBehavior
  } kind;
  int digit_max = 3;         // llama3: \p{N}{1,digit_max}
  bool marks_in_words = false;  // qwen3.5: [\p{L}\p{M}]+ words, punctuation excludes \p{M}
  bool contractions = true;  // o200k: the optional (?i:'s|'t|'re|'ve|'m|'ll|'d) after a word
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
    cp.reserve(s.size());  // exact upper bounds: growing by doubling would use up to twice that
    fl.reserve(s.size());
    off.reserve(s.size() + 1);
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

// o200k (gpt-4o, llama-4) and tekken (digit_max 1, no contractions), with the regex engine's leftmost-first
// backtracking made explicit:
//   [^\r\n\p{L}\p{N}]?U*L+C? | [^\r\n\p{L}\p{N}]?U+L*C? | \p{N}{1,k} | ?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ |
//   \s+(?!\S) | \s+
// U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], L = [\p{Ll}\p{Lm}\p{Lo}\p{M}] (they share Lm, Lo and marks), C = contractions.
inline void o200k(const Units& u, size_t b, size_t e, int digit_max, bool contractions, std::vector<URange>& out) {
  auto mark = [&](size_t i) { return cls(u, i) == UClass::mark; };
  auto up = [&](size_t i) { return mark(i) || (is_l(u, i) && !(u.fl[i] & kULowerOnly)); };
  auto low = [&](size_t i) { return mark(i) || (is_l(u, i) && !(u.fl[i] & kUUpperOnly)); };
  auto prefix = [&](size_t i) { return !is_crlf(u, i) && !is_l(u, i) && !is_n(u, i); };
  auto punct = [&](size_t i) { return !ws(u, i) && !is_l(u, i) && !is_n(u, i); };
  // the end of U*L+ from p, or 0 when it does not match: U* takes the longest run, then gives back until
  // L+ can start (a shared Lm/Lo/mark inside the run, or an Ll right after it)
  auto upper_lower = [&](size_t p) -> size_t {
    size_t k = p;
    while (k < e && up(k)) k++;
    for (size_t s = k + 1; s-- > p;) {
      if (s < e && low(s)) {
        size_t j = s + 1;
        while (j < e && low(j)) j++;
        return j;
      }
    }
    return 0;
  };
  auto upper_then_lower = [&](size_t p) -> size_t {  // U+L*
    if (p >= e || !up(p)) return 0;
    size_t j = p;
    while (j < e && up(j)) j++;
    while (j < e && low(j)) j++;
    return j;
  };
  auto with_contraction = [&](size_t j) {
    if (contractions && j < e)
      if (size_t c = contraction(u, j, e, true)) return j + c;
    return j;
  };
  size_t i = b;
  while (i < e) {
    size_t j = 0;
    bool pre = prefix(i) && i + 1 < e;
    if (pre) j = upper_lower(i + 1);
    if (!j) j = upper_lower(i);
    if (!j && pre) j = upper_then_lower(i + 1);
    if (!j) j = upper_then_lower(i);
    if (j) {
      j = with_contraction(j);
    } else if (is_n(u, i)) {
      j = i + 1;
      while (j < e && is_n(u, j) && j - i < static_cast<size_t>(digit_max)) j++;
    } else if (punct(i) || (u.cp[i] == ' ' && i + 1 < e && punct(i + 1))) {
      j = punct(i) ? i + 1 : i + 2;
      while (j < e && punct(j)) j++;
      while (j < e && (is_crlf(u, j) || u.cp[j] == '/')) j++;
    } else if (ws(u, i)) {
      size_t run = i;
      while (run < e && ws(u, run)) run++;
      size_t last_nl = e;
      for (size_t k = i; k < run; k++)
        if (is_crlf(u, k)) last_nl = k;
      j = last_nl != e ? last_nl + 1 : whitespace_tail(u, i, e);
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
  // The most bytes encode() and encode_prompt() accept (0: LLMINFER_MAX_PROMPT_BYTES or its
  // environment variable).
  void set_max_bytes(uint64_t n) { max_bytes_ = n; }
  uint64_t max_bytes() const { return max_bytes_ ? max_bytes_ : max_prompt_bytes_default(); }
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
    // pieces already merged in this call (words repeat): piece -> [offset, count) in cache_ids
    std::unordered_map<std::string, std::pair<uint32_t, uint32_t>> cache;
    std::vector<int32_t> cache_ids;
  };
  static constexpr size_t kCacheMaxPiece = 64, kCacheMaxEntries = 1 << 16;

  void encode_text(std::string_view text, bool parse_special, std::span<const std::pair<size_t, size_t>> no_special,
                   bool prompt_mode, std::vector<int32_t>& out) const;
  void encode_segment(std::string_view seg, bool first_segment, Scratch& s, std::vector<int32_t>& out) const;
  void encode_normalized(std::string_view text, Scratch& s, std::vector<int32_t>& out) const;
  void bpe_piece(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const;
  void bpe_merge(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const;
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
  uint64_t max_bytes_ = 0;

  // The size limit, and a probe that the working memory of a long input can be had (so that an
  // allocation failure is an error, not an abort, even without exceptions).
  std::optional<Error> check_input(size_t n) const {
    if (n > max_bytes())
      return make_error(Errc::invalid_argument,
                        strf("cannot tokenize %zu bytes: the limit is %llu (LLMINFER_MAX_PROMPT_BYTES)", n,
                             static_cast<unsigned long long>(max_bytes())));
    if (n >= (1u << 20)) {
      size_t need = n * 56 + (1u << 20);  // measured: up to ~50 bytes per byte (one long word)
      void* p = std::malloc(need);
      if (!p)
        return make_error(Errc::out_of_memory, strf("cannot tokenize %zu bytes: %s of working memory is not available",
                                                    n, human_bytes(need).c_str()));
      std::free(p);
    }
    return std::nullopt;
  }
};

// ---- encode ----

inline Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special,
                                                     bool parse_special) const {
  if (text.size() >= 0xFFFFFFF0u)
    return make_error(Errc::invalid_argument, strf("cannot tokenize %zu bytes at once (4 GiB at most)", text.size()));
  if (auto e = check_input(text.size())) return *e;
  std::vector<int32_t> out;
#if defined(__cpp_exceptions)
  try {
#endif
    out.reserve(text.size() / 3 + 4);
    if (add_special) out.insert(out.end(), prefix_.begin(), prefix_.end());
    encode_text(text, parse_special, {}, false, out);
    if (add_special) out.insert(out.end(), suffix_.begin(), suffix_.end());
#if defined(__cpp_exceptions)
  } catch (const std::bad_alloc&) {
    return make_error(Errc::out_of_memory, strf("out of memory tokenizing %zu bytes", text.size()));
  }
#endif
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
  if (auto e = check_input(text.size())) return *e;
  std::vector<std::pair<size_t, size_t>> ranges(no_special.begin(), no_special.end());
  std::sort(ranges.begin(), ranges.end());
  std::vector<int32_t> out;
#if defined(__cpp_exceptions)
  try {
#endif
    out.reserve(text.size() / 3 + 4);
    if (add_special) out.insert(out.end(), prefix_.begin(), prefix_.end());
    encode_text(text, true, ranges, true, out);
#if defined(__cpp_exceptions)
  } catch (const std::bad_alloc&) {
    return make_error(Errc::out_of_memory, strf("out of memory tokenizing %zu bytes", text.size()));
  }
#endif
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
        case PreStage::Kind::o200k: pretok::o200k(u, r.b, r.e, st.digit_max, st.contractions, s.b); break;
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
  bool cacheable = piece.size() <= kCacheMaxPiece;
  if (cacheable) {
    auto it = s.cache.find(std::string(piece));
    if (it != s.cache.end()) {
      out.insert(out.end(), s.cache_ids.begin() + it->second.first,
                 s.cache_ids.begin() + it->second.first + it->second.second);
      return;
    }
  }
  size_t out_start = out.size();
  bpe_merge(piece, s, out);
  if (cacheable && s.cache.size() < kCacheMaxEntries) {
    auto off = static_cast<uint32_t>(s.cache_ids.size());
    s.cache_ids.insert(s.cache_ids.end(), out.begin() + static_cast<ptrdiff_t>(out_start), out.end());
    s.cache.emplace(std::string(piece), std::make_pair(off, static_cast<uint32_t>(out.size() - out_start)));
  }
}

// The merge loop proper: symbols in a linked list, candidate pairs in a heap (lowest priority value first,
// then leftmost), stale candidates skipped when popped.
inline void Tokenizer::bpe_merge(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const {
  using Sym = Scratch::Sym;
  auto& syms = s.syms;
  syms.clear();
  // at most one symbol per byte and about as many candidates: reserved exactly, since growing a
  // long piece's vectors by doubling would hold the old and the new arrays at once (1.5-2x peak)
  syms.reserve(piece.size());
  s.heap.reserve(piece.size() + 16);
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
#endif  // !LLMI_KERNEL_PASS

// ---- src/33_tokenizer_build.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
constexpr std::string_view kRegexO200k =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kRegexTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
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
    } else if (in({"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"})) {
      t.pre_.push_back(stage(K::o200k));
    } else if (pre == "tekken") {
      PreStage s = stage(K::o200k);
      s.digit_max = 1;
      s.contractions = false;
      t.pre_.push_back(s);
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
                         "qwen2, qwen35, gpt-4o/llama4, tekken, gpt-2 style, smollm/starcoder style, default");
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
      bool invert = j["invert"].as_bool(false);
      std::string_view beh = j["behavior"].as_string("Isolated");
      const Json& pat = j["pattern"];
      if (pat["Regex"].is_string()) {
        std::string_view re = pat["Regex"].str;
        // The scanned patterns match every character, so the pieces are exactly the matches: Isolated keeps
        // matches and (empty) gaps either way round, and Removed with invert (tiktoken conversions) drops the
        // empty gaps.
        if (!(beh == "Isolated" || (beh == "Removed" && invert)))
          return unsupported("regex Split with behavior '" + printable(beh) + "'" + (invert ? " and invert" : "") +
                             " is not supported");
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
        } else if (re == kRegexO200k) {
          s = stage(K::o200k);
        } else if (re == kRegexTekken) {
          s = stage(K::o200k);
          s.digit_max = 1;
          s.contractions = false;
        } else {
          return unsupported("pre-tokenizer regex '" + printable(re, 200) +
                             "' has no scanner (supported: the llama-3, qwen2, qwen3.5, o200k, tekken and gpt-2 patterns)");
        }
        t.pre_.push_back(s);
        return {};
      }
      if (pat["String"].is_string()) {
        if (invert) return unsupported("a string Split with invert: true is not supported");
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
    auto text = read_optional_file(p);
    if (!text) return text.error();
    if (!*text) continue;
    auto j = json_parse(**text, p);
    if (!j) return j.error();
    if (!j->is_object()) return make_error(Errc::bad_format, p + ": not a JSON object");
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
#endif  // !LLMI_KERNEL_PASS

// ---- src/34_tokenizer_stream.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
  // strip_leading: strip the leading space(s) decode() strips (a whole text or a chat reply);
  // false for a continuation of a prompt, whose first piece keeps its space.
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false, bool strip_leading = true)
      : tok_(&tok), skip_special_(skip_special), strip_(strip_leading ? tok.strip_leading_spaces() : 0) {}

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
#endif  // !LLMI_KERNEL_PASS

// ---- src/35_jinja.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
// ==== Chat templates, part 1: Jinja values, lexer and parser ====
// A small Jinja interpreter for the `chat_template` of model files, configured as Hugging Face
// transformers configures Jinja2 (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, one
// trailing newline dropped, loop controls, `generation` blocks). Values follow Python semantics
// where templates can see them (truthiness, repr of lists/dicts, float printing, slicing by code
// point). Everything a template can do is bounded (LLMINFER_JINJA_* below): steps, nesting, call
// depth, string and output sizes, range length (as the sandbox: 100000).
//
// Strings carry provenance: which bytes came from message content (untrusted). It survives
// concatenation, slicing, splitting, stripping, replace, join, case changes and escaping, so the
// rendered prompt reports the byte ranges the tokenizer must not parse for special tokens.
#ifndef LLMINFER_JINJA_MAX_DEPTH
#define LLMINFER_JINJA_MAX_DEPTH 200  // nesting of statements and expressions in a template
#endif
#ifndef LLMINFER_JINJA_MAX_EVAL_DEPTH
#define LLMINFER_JINJA_MAX_EVAL_DEPTH 1000  // nested evaluation (incl. macro recursion) while rendering
#endif
#ifndef LLMINFER_JINJA_MAX_CALL_DEPTH
#define LLMINFER_JINJA_MAX_CALL_DEPTH 32  // macro calls in flight
#endif
#ifndef LLMINFER_JINJA_MAX_STACK
// Bytes of stack that parsing, and rendering, may use below where they start (measured, so the
// bound holds whatever the compiler's frame sizes): with the default a template renders on a
// thread with 512 KB of stack (macOS's default for secondary threads) with room to spare.
// AddressSanitizer's redzones make every frame several times larger: such a build allows 1 MiB.
#if defined(__SANITIZE_ADDRESS__)
#define LLMINFER_JINJA_MAX_STACK (1024u << 10)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LLMINFER_JINJA_MAX_STACK (1024u << 10)
#endif
#endif
#ifndef LLMINFER_JINJA_MAX_STACK
#define LLMINFER_JINJA_MAX_STACK (256u << 10)
#endif
#endif
#ifndef LLMINFER_JINJA_MAX_STEPS
// Evaluation steps per render (a node evaluated, a loop iteration, an element or 64 bytes of text
// copied; roughly 0.1-0.3 us each), plus 10 per (message + tool)^2 up to 100M more, since real
// templates scan the conversation once per message.
#define LLMINFER_JINJA_MAX_STEPS 10000000ull
#endif
#ifndef LLMINFER_JINJA_MAX_STRING
#define LLMINFER_JINJA_MAX_STRING (16ull << 20)  // bytes of any string value and of the output
#endif
#ifndef LLMINFER_JINJA_MAX_LIST
#define LLMINFER_JINJA_MAX_LIST (1u << 18)  // items of a list built while rendering
#endif
#ifndef LLMINFER_JINJA_MAX_RANGE
#define LLMINFER_JINJA_MAX_RANGE 100000  // items of range(), as Jinja2's sandbox
#endif
#ifndef LLMINFER_JINJA_MAX_TEMPLATE
#define LLMINFER_JINJA_MAX_TEMPLATE (4ull << 20)  // bytes of template source
#endif

#include <ctime>

namespace llminfer {
inline namespace v0_1 {
namespace detail {

// The current stack position (the stack's direction does not matter: distances are compared).
inline uintptr_t jstack_here() {
#if defined(__GNUC__) || defined(__clang__)
  return reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
#else
  volatile char c = 0;
  return reinterpret_cast<uintptr_t>(&c);
#endif
}
inline size_t jstack_used(uintptr_t base) {
  uintptr_t here = jstack_here();
  return base > here ? base - here : here - base;
}

// ---- text with provenance ----
// `spans` are the byte ranges of `s` that came from untrusted content: sorted, disjoint and never
// touching (adjacent ranges are merged).
struct PText {
  std::string s;
  std::vector<std::pair<size_t, size_t>> spans;

  PText() = default;
  explicit PText(std::string text, bool content = false) : s(std::move(text)) {
    if (content && !s.empty()) spans.emplace_back(0, s.size());
  }
  void mark(size_t b, size_t e) {
    if (b >= e) return;
    if (!spans.empty() && spans.back().second >= b) {
      spans.back().second = std::max(spans.back().second, e);
    } else {
      spans.emplace_back(b, e);
    }
  }
  void add(std::string_view t, bool content = false) {
    if (t.empty()) return;
    size_t b = s.size();
    s.append(t.data(), t.size());
    if (content) mark(b, s.size());
  }
  void add(char c, bool content = false) {
    s += c;
    if (content) mark(s.size() - 1, s.size());
  }
  // Appends o.s[b, e) with its provenance.
  void add_range(const PText& o, size_t b, size_t e) {
    if (b >= e) return;
    size_t base = s.size();
    s.append(o.s, b, e - b);
    auto it = std::lower_bound(o.spans.begin(), o.spans.end(), b,
                               [](const std::pair<size_t, size_t>& sp, size_t v) { return sp.second <= v; });
    for (; it != o.spans.end() && it->first < e; ++it)
      mark(base + std::max(it->first, b) - b, base + std::min(it->second, e) - b);
  }
  void add(const PText& o) { add_range(o, 0, o.s.size()); }
  bool any_content() const { return !spans.empty(); }
  // Is any byte of [b, e) from content?
  bool content_in(size_t b, size_t e) const {
    auto it = std::lower_bound(spans.begin(), spans.end(), b,
                               [](const std::pair<size_t, size_t>& sp, size_t v) { return sp.second <= v; });
    return it != spans.end() && it->first < e;
  }
};

// ---- code points ----
// Strings are UTF-8; an invalid byte counts as one code point of its own (U+DC80 + byte, as
// Python's surrogateescape), so indexing and slicing are defined on any bytes and round-trip.
inline uint32_t jcp_next(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  if (p[i] < 0x80) return p[i++];
  if (utf8_valid_len(p + i, s.size() - i) == 0) return 0xDC00u + p[i++];
  return utf8_next(s, i);
}
inline void jcp_append(std::string& out, uint32_t c) {
  if (c >= 0xDC80 && c <= 0xDCFF) {
    out += static_cast<char>(c - 0xDC00);
  } else {
    utf8_append(out, c);
  }
}
inline bool jis_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}
// Byte offset of every code point of s, plus s.size() at the end.
inline std::vector<size_t> jcp_offsets(std::string_view s) {
  std::vector<size_t> off;
  off.reserve(s.size() + 1);
  size_t i = 0;
  while (i < s.size()) {
    off.push_back(i);
    jcp_next(s, i);
  }
  off.push_back(s.size());
  return off;
}
inline size_t jcp_count(std::string_view s) {
  if (jis_ascii(s)) return s.size();
  size_t n = 0, i = 0;
  while (i < s.size()) {
    jcp_next(s, i);
    n++;
  }
  return n;
}
// Python's str.isspace() (also what `\s` matches in Jinja2's lexer and str.split() splits on).
inline bool jis_space(uint32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

// ---- values ----
struct JValue;
struct JFunc;
struct JLoop;

// A sequence value: Python's list and tuple, the dict views, range objects and the generators
// that filters such as map/select return (iterable once, never printable).
enum class JSeq : uint8_t { list, tuple, dict_items, dict_keys, dict_values, range, generator };

struct JList {
  std::vector<JValue> items;
  JSeq kind = JSeq::list;
  std::string tag;  // range: its repr, "range(0, 3)"
  // generator: produces the next item on demand (false on an error, `done` at the end), or, when
  // empty, hands out items[pos...]; either way each item is produced once (Python generators).
  std::function<bool(JValue& out, bool& done)> next;
  size_t pos = 0;
  // Levels of lists, dicts and generators inside (1: none). Bounded when a value is assigned, so
  // that comparing, printing, pulling and destroying a value never recurses without limit.
  uint32_t depth = 1;
};

struct JDict;
struct JValue;
inline uint32_t jv_items_depth(const std::vector<JValue>& items);

struct JValue {
  enum class T : uint8_t { undef, none, boolean, integer, real, string, list, dict, ns, func, loop };
  T t = T::undef;
  bool b = false;
  bool unsafe = false;  // undefined: from a sandbox-blocked attribute (calling it is a security error)
  union {
    int64_t i = 0;  // integer (and the state counter of cyclers / joiners)
    double d;       // real
  };
  std::shared_ptr<const PText> s;  // string; undefined: the error message for when it is used
  std::shared_ptr<JList> l;        // list / tuple / dict views
  std::shared_ptr<JDict> m;        // dict / namespace
  std::shared_ptr<JFunc> f;        // callable
  std::shared_ptr<JLoop> lp;       // loop object

  static JValue none() {
    JValue v;
    v.t = T::none;
    return v;
  }
  static JValue boolean(bool x) {
    JValue v;
    v.t = T::boolean;
    v.b = x;
    return v;
  }
  static JValue integer(int64_t x) {
    JValue v;
    v.t = T::integer;
    v.i = x;
    return v;
  }
  static JValue real(double x) {
    JValue v;
    v.t = T::real;
    v.d = x;
    return v;
  }
  static JValue str(PText x) {
    JValue v;
    v.t = T::string;
    v.s = std::make_shared<const PText>(std::move(x));
    return v;
  }
  static JValue str(std::string x, bool content = false) { return str(PText(std::move(x), content)); }
  static JValue undefined(std::string why) {
    JValue v;
    v.s = std::make_shared<const PText>(PText(std::move(why)));
    return v;
  }
  static JValue list(std::vector<JValue> items, JSeq kind = JSeq::list) {
    JValue v;
    v.t = T::list;
    v.l = std::make_shared<JList>();
    v.l->items = std::move(items);
    v.l->kind = kind;
    v.l->depth = jv_items_depth(v.l->items);
    return v;
  }
  bool is_undef() const { return t == T::undef; }
  bool is_none() const { return t == T::none; }
  bool is_str() const { return t == T::string; }
  bool is_list() const { return t == T::list; }
  bool is_dict() const { return t == T::dict; }
  bool is_num() const { return t == T::integer || t == T::real || t == T::boolean; }
  const std::string& text() const { return s->s; }  // string values only
};

// Dict and namespace storage: insertion-ordered, keys are values (usually strings).
struct JDict {
  std::vector<std::pair<JValue, JValue>> items;
  uint32_t depth = 1;  // as JList::depth (a namespace counts as 1: its items are cleared after a render)
  const JValue* find(std::string_view key) const {
    for (const auto& kv : items)
      if (kv.first.t == JValue::T::string && kv.first.s->s == key) return &kv.second;
    return nullptr;
  }
};

// Nesting of a value: lists, dicts and generators count, namespaces do not (JRender clears them).
inline uint32_t jv_depth(const JValue& v) {
  if (v.t == JValue::T::list) return v.l->depth;
  if (v.t == JValue::T::dict) return v.m->depth;
  return 0;
}
inline uint32_t jv_items_depth(const std::vector<JValue>& items) {
  uint32_t d = 0;
  for (const JValue& x : items) d = std::max(d, jv_depth(x));
  return d + 1;
}

// ---- syntax tree ----
enum class NK : uint8_t {
  // statements
  output, print, if_, for_, set, set_block, macro, call_block, filter_block, break_, continue_, scope,
  // expressions
  konst, name, list, tuple, dict, attr, item, slice, call, filter, test, not_, neg, pos, binop, compare, and_, or_,
  cond, concat, nsref
};
enum class BinOp : uint8_t { add, sub, mul, div, floordiv, mod, pow };
enum class CmpOp : uint8_t { eq, ne, lt, le, gt, ge, in, notin };

struct JNode {
  NK k = NK::konst;
  uint8_t op = 0;
  bool flag = false;  // for: recursive; filter/test: the name is unknown (an error where it runs)
  bool constant = false;  // an expression Jinja2's optimizer may compute when compiling (mark_constant)
  uint32_t pos = 0;   // byte offset in the (newline-normalized) template
  std::string str;    // name, attribute, filter/test name, output text
  JValue val;         // constant
  JNode* a = nullptr;  // subject / target / test / callee
  JNode* b = nullptr;  // value / iterable / start
  JNode* c = nullptr;  // loop filter / stop
  JNode* d = nullptr;  // step
  JNode* dyn_args = nullptr;    // f(*x)
  JNode* dyn_kwargs = nullptr;  // f(**x)
  std::vector<JNode*> list;             // items, positional arguments, compare operands, defaults
  std::vector<std::string> names;       // keyword names, parameter names
  std::vector<std::string> undef_names; // for/macro/call/block bodies: names bound to undefined at entry (scan_frame)
  std::vector<JNode*> kw;               // keyword values
  std::vector<uint8_t> ops;             // compare operators
  std::vector<JNode*> body, orelse;
};

struct JProgram {
  std::string source;  // newline-normalized, trailing newline dropped
  std::vector<std::unique_ptr<JNode>> nodes;
  std::vector<JNode*> root;
  std::vector<std::string> root_undef;  // the template's own frame (see JParser::scan_frame)
  bool uses_strftime = false;

  // "line L, column C" of a byte offset.
  std::string where(uint32_t pos) const {
    size_t line = 1, col = 1;
    for (size_t k = 0; k < pos && k < source.size(); k++) {
      if (source[k] == '\n') {
        line++;
        col = 1;
      } else if ((static_cast<unsigned char>(source[k]) & 0xC0) != 0x80) {
        col++;
      }
    }
    return strf("%zu:%zu", line, col);
  }
};

// ---- lexer ----
enum class TK : uint8_t { data, var_begin, var_end, block_begin, block_end, name, str, integer, real, op, eof };

struct JTok {
  TK k = TK::eof;
  std::string text;  // data, name, operator, decoded string literal
  int64_t i = 0;
  double d = 0;
  uint32_t pos = 0;
};

class JLexer {
 public:
  explicit JLexer(std::string_view src) : s_(src) {}

  // Fills `out`; false with `error` (and `error_pos`) set on a lexical error.
  bool run(std::vector<JTok>& out) {
    bool line_starting = true;
    while (pos_ < s_.size()) {
      // earliest tag opener: "{{", "{%", "{#"
      size_t p = pos_;
      char kind = 0;
      for (;;) {
        p = s_.find('{', p);
        if (p == std::string_view::npos || p + 1 >= s_.size()) {
          p = std::string_view::npos;
          break;
        }
        char n = s_[p + 1];
        if (n == '{' || n == '%' || n == '#') {
          kind = n;
          break;
        }
        p++;
      }
      if (p == std::string_view::npos) {
        push_data(out, s_.substr(pos_), static_cast<uint32_t>(pos_));
        pos_ = s_.size();
        break;
      }
      std::string_view text = s_.substr(pos_, p - pos_);
      size_t after = p + 2;
      char sign = (after < s_.size() && (s_[after] == '-' || s_[after] == '+')) ? s_[after] : 0;
      // {% raw %} is matched before the other openers
      size_t raw_end = 0;
      bool raw = kind == '%' && match_raw_begin(p, raw_end, sign);
      text = strip_before(text, sign, kind != '{', line_starting);
      push_data(out, text, static_cast<uint32_t>(pos_));
      if (raw) {
        if (!lex_raw(out, raw_end, line_starting)) return false;
        continue;
      }
      size_t tag_start = after + (sign ? 1 : 0);
      if (kind == '#') {
        if (!lex_comment(tag_start, line_starting)) {
          return fail(p, "missing end of comment tag");
        }
        continue;
      }
      JTok t;
      t.k = kind == '{' ? TK::var_begin : TK::block_begin;
      t.pos = static_cast<uint32_t>(p);
      out.push_back(std::move(t));
      pos_ = tag_start;
      if (!lex_tag(out, kind == '{', line_starting)) return false;
    }
    JTok e;
    e.k = TK::eof;
    e.pos = static_cast<uint32_t>(s_.size());
    out.push_back(std::move(e));
    return true;
  }

  std::string error;
  size_t error_pos = 0;

 private:
  bool fail(size_t at, std::string why) {
    error = std::move(why);
    error_pos = at;
    return false;
  }
  void push_data(std::vector<JTok>& out, std::string_view text, uint32_t at) {
    if (text.empty()) return;
    if (!out.empty() && out.back().k == TK::data) {
      out.back().text.append(text.data(), text.size());
      return;
    }
    JTok t;
    t.k = TK::data;
    t.text = std::string(text);
    t.pos = at;
    out.push_back(std::move(t));
  }
  // Python's str.rstrip() on a UTF-8 view.
  static std::string_view rstrip_space(std::string_view t) {
    size_t i = 0, keep = 0;
    while (i < t.size())
      if (!jis_space(jcp_next(t, i))) keep = i;
    return t.substr(0, keep);
  }
  static bool all_space(std::string_view t) {
    size_t i = 0;
    while (i < t.size())
      if (!jis_space(jcp_next(t, i))) return false;
    return true;
  }
  // Whitespace control before a tag: "{%-" strips all whitespace; lstrip_blocks removes the
  // spaces between the line start and a block/comment tag.
  std::string_view strip_before(std::string_view text, char sign, bool block_like, bool line_starting) {
    if (sign == '-') return rstrip_space(text);
    if (sign != '+' && block_like) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      if (l_pos > 0 || line_starting) {
        std::string_view tail = text.substr(l_pos);
        if (!tail.empty() && all_space(tail)) return text.substr(0, l_pos);
      }
    }
    return text;
  }
  size_t skip_space(size_t p) const {
    while (p < s_.size()) {
      size_t q = p;
      if (!jis_space(jcp_next(s_, q))) break;
      p = q;
    }
    return p;
  }
  bool word_at(size_t p, std::string_view w) const { return s_.substr(p, w.size()) == w; }
  // "{%[-+]?\s*raw\s*(-%}\s*|%})" at p; `end` is where the raw text begins.
  bool match_raw_begin(size_t p, size_t& end, char sign) const {
    size_t q = skip_space(p + 2 + (sign ? 1 : 0));
    if (!word_at(q, "raw")) return false;
    q = skip_space(q + 3);
    if (word_at(q, "-%}")) {
      end = skip_space(q + 3);
      return true;
    }
    if (word_at(q, "%}")) {
      end = q + 2;
      return true;
    }
    return false;
  }
  bool lex_raw(std::vector<JTok>& out, size_t start, bool& line_starting) {
    // earliest "{%[-+]?\s*endraw\s*(+%}|-%}\s*|%}\n?)"
    size_t p = start;
    for (;;) {
      p = s_.find("{%", p);
      if (p == std::string_view::npos) return fail(start, "missing end of raw directive");
      size_t q = p + 2;
      char sign = (q < s_.size() && (s_[q] == '-' || s_[q] == '+')) ? s_[q] : 0;
      q = skip_space(q + (sign ? 1 : 0));
      if (!word_at(q, "endraw")) {
        p += 2;
        continue;
      }
      q = skip_space(q + 6);
      size_t end;
      if (word_at(q, "+%}")) {
        end = q + 3;
      } else if (word_at(q, "-%}")) {
        end = skip_space(q + 3);
      } else if (word_at(q, "%}")) {
        end = q + 2;
        if (end < s_.size() && s_[end] == '\n') end++;
      } else {
        p += 2;
        continue;
      }
      std::string_view text = strip_before(s_.substr(start, p - start), sign, true, line_starting);
      push_data(out, text, static_cast<uint32_t>(start));
      line_starting = end > 0 && s_[end - 1] == '\n';
      pos_ = end;
      return true;
    }
  }
  bool lex_comment(size_t start, bool& line_starting) {
    size_t p = start;
    for (;;) {
      p = s_.find("#}", p);
      if (p == std::string_view::npos) return false;
      size_t end;
      if (p > start && s_[p - 1] == '-') {
        end = skip_space(p + 2);
      } else if (p > start && s_[p - 1] == '+') {
        end = p + 2;
      } else {
        end = p + 2;
        if (end < s_.size() && s_[end] == '\n') end++;  // trim_blocks
      }
      line_starting = s_[end - 1] == '\n';
      pos_ = end;
      return true;
    }
  }
  static bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  bool lex_tag(std::vector<JTok>& out, bool variable, bool& line_starting) {
    std::vector<char> balance;
    size_t tag_begin = pos_;
    for (;;) {
      if (pos_ >= s_.size()) return fail(tag_begin, "unexpected end of template (a tag is not closed)");
      if (balance.empty()) {
        size_t end = 0;
        bool closed = false;
        if (variable) {
          if (word_at(pos_, "-}}")) {
            end = skip_space(pos_ + 3);
            closed = true;
          } else if (word_at(pos_, "}}")) {
            end = pos_ + 2;
            closed = true;
          }
        } else {
          if (word_at(pos_, "+%}")) {
            end = pos_ + 3;
            closed = true;
          } else if (word_at(pos_, "-%}")) {
            end = skip_space(pos_ + 3);
            closed = true;
          } else if (word_at(pos_, "%}")) {
            end = pos_ + 2;
            if (end < s_.size() && s_[end] == '\n') end++;  // trim_blocks
            closed = true;
          }
        }
        if (closed) {
          JTok t;
          t.k = variable ? TK::var_end : TK::block_end;
          t.pos = static_cast<uint32_t>(pos_);
          out.push_back(std::move(t));
          line_starting = s_[end - 1] == '\n';
          pos_ = end;
          return true;
        }
      }
      size_t q = pos_;
      uint32_t c0 = jcp_next(s_, q);
      if (jis_space(c0)) {
        pos_ = skip_space(pos_);
        continue;
      }
      char c = s_[pos_];
      JTok t;
      t.pos = static_cast<uint32_t>(pos_);
      if (is_digit(c)) {
        if (!lex_number(t)) return false;
      } else if (is_name_start(c)) {
        size_t e = pos_;
        while (e < s_.size() && (is_name_start(s_[e]) || is_digit(s_[e]))) e++;
        t.k = TK::name;
        t.text = std::string(s_.substr(pos_, e - pos_));
        pos_ = e;
      } else if (c == '\'' || c == '"') {
        if (!lex_string(t)) return false;
      } else {
        static const char* const ops2[] = {"//", "**", "==", "!=", ">=", "<="};
        t.k = TK::op;
        for (const char* o : ops2)
          if (word_at(pos_, o)) t.text = o;
        if (t.text.empty()) {
          if (!std::strchr("+-/*%~[](){}=.:|,;<>", c) || c == 0)
            return fail(pos_, strf("unexpected character '%s'", printable(s_.substr(pos_, q - pos_)).c_str()));
          t.text = std::string(1, c);
          if (c == '(' || c == '[' || c == '{') {
            if (balance.size() >= LLMINFER_JINJA_MAX_DEPTH) return fail(pos_, "brackets nested too deeply");
            balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
          } else if (c == ')' || c == ']' || c == '}') {
            if (balance.empty()) return fail(pos_, strf("unexpected '%c'", c));
            if (balance.back() != c) return fail(pos_, strf("unexpected '%c', expected '%c'", c, balance.back()));
            balance.pop_back();
          }
        }
        pos_ += t.text.size();
      }
      out.push_back(std::move(t));
    }
  }
  // Integers (decimal, 0b, 0o, 0x, with '_' separators) and floats (with '.' or an exponent).
  bool lex_number(JTok& t) {
    size_t start = pos_;
    auto digits = [&](size_t p, auto ok) {
      // (_?d)* after a first digit already consumed by the caller
      while (p < s_.size()) {
        if (ok(s_[p])) {
          p++;
        } else if (s_[p] == '_' && p + 1 < s_.size() && ok(s_[p + 1])) {
          p += 2;
        } else {
          break;
        }
      }
      return p;
    };
    auto dec = [](char c) { return c >= '0' && c <= '9'; };
    // float: (\d+_)*\d+ ( (\.(\d+_)*\d+)? e[+-]?(\d+_)*\d+ | \.(\d+_)*\d+ ), not after a '.'
    bool after_dot = start > 0 && s_[start - 1] == '.';
    if (!after_dot) {
      size_t p = digits(start + 1, dec);
      size_t q = p;
      bool frac = false, expo = false;
      if (q + 1 < s_.size() && s_[q] == '.' && dec(s_[q + 1])) {
        q = digits(q + 2, dec);
        frac = true;
      }
      if (q < s_.size() && (s_[q] == 'e' || s_[q] == 'E')) {
        size_t r = q + 1;
        if (r < s_.size() && (s_[r] == '+' || s_[r] == '-')) r++;
        if (r < s_.size() && dec(s_[r])) {
          q = digits(r + 1, dec);
          expo = true;
        }
      }
      if (expo || frac) {
        std::string lit;
        for (size_t k = start; k < q; k++)
          if (s_[k] != '_') lit += s_[k];
        double v = 0;
        auto r = std::from_chars(lit.data(), lit.data() + lit.size(), v);
        if (r.ec == std::errc::result_out_of_range) {
          v = (lit.find("e-") != std::string::npos || lit.find("E-") != std::string::npos) ? 0.0 : HUGE_VAL;
        } else if (r.ec != std::errc()) {
          return fail(start, "invalid number");
        }
        t.k = TK::real;
        t.d = v;
        pos_ = q;
        return true;
      }
    }
    int base = 10;
    size_t p = start, q;
    char x = start + 1 < s_.size() ? static_cast<char>(s_[start + 1] | 0x20) : 0;
    if (s_[start] == '0' && (x == 'b' || x == 'o' || x == 'x')) {
      base = x == 'b' ? 2 : x == 'o' ? 8 : 16;
      auto ok = [base](char c) {
        if (base == 2) return c == '0' || c == '1';
        if (base == 8) return c >= '0' && c <= '7';
        return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
      };
      p = start + 2;
      if (p < s_.size() && s_[p] == '_') p++;
      if (p >= s_.size() || !ok(s_[p])) {
        q = start + 1;  // just "0"
        base = 10;
      } else {
        q = digits(p + 1, ok);
      }
    } else if (s_[start] == '0') {
      q = digits(start + 1, [](char c) { return c == '0'; });
    } else {
      q = digits(start + 1, dec);
    }
    std::string lit;
    for (size_t k = (base == 10 ? start : p); k < q; k++)
      if (s_[k] != '_') lit += s_[k];
    uint64_t v = 0;
    auto r = std::from_chars(lit.data(), lit.data() + lit.size(), v, base);
    if (r.ec != std::errc() || v > static_cast<uint64_t>(INT64_MAX))
      return fail(start, "integer literal too large (integers are limited to 64 bits)");
    t.k = TK::integer;
    t.i = static_cast<int64_t>(v);
    pos_ = q;
    return true;
  }
  static int hexval(char h) {
    if (h >= '0' && h <= '9') return h - '0';
    h = static_cast<char>(h | 0x20);
    if (h >= 'a' && h <= 'f') return h - 'a' + 10;
    return -1;
  }
  // A quoted string; escapes decoded as Python's "unicode-escape" codec does.
  bool lex_string(JTok& t) {
    char q = s_[pos_];
    size_t p = pos_ + 1;
    std::string v;
    while (p < s_.size() && s_[p] != q) {
      if (s_[p] != '\\') {
        v += s_[p++];
        continue;
      }
      if (p + 1 >= s_.size()) break;
      char e = s_[p + 1];
      p += 2;
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': v += '\\'; break;
        case '\'': v += '\''; break;
        case '"': v += '"'; break;
        case 'a': v += '\a'; break;
        case 'b': v += '\b'; break;
        case 'f': v += '\f'; break;
        case 'n': v += '\n'; break;
        case 'r': v += '\r'; break;
        case 't': v += '\t'; break;
        case 'v': v += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t c = 0;
          for (int k = 0; k < n; k++) {
            int h = p + static_cast<size_t>(k) < s_.size() ? hexval(s_[p + static_cast<size_t>(k)]) : -1;
            if (h < 0) return fail(p - 2, strf("truncated \\%c escape in a string literal", e));
            c = c * 16 + static_cast<uint32_t>(h);
          }
          p += static_cast<size_t>(n);
          if (c > 0x10FFFF) return fail(p, "escape outside the Unicode range in a string literal");
          if (c >= 0xD800 && c < 0xE000) return fail(p, "surrogate escape in a string literal");
          utf8_append(v, c);
          break;
        }
        case 'N': return fail(p - 2, "unsupported construct: \\N{...} escape in a string literal");
        default:
          if (e >= '0' && e <= '7') {
            uint32_t c = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && p < s_.size() && s_[p] >= '0' && s_[p] <= '7'; k++)
              c = c * 8 + static_cast<uint32_t>(s_[p++] - '0');
            utf8_append(v, c);
          } else {
            v += '\\';  // unknown escapes stay as written
            p -= 1;
          }
      }
    }
    if (p >= s_.size()) return fail(pos_, "unterminated string literal");
    t.k = TK::str;
    t.text = std::move(v);
    pos_ = p + 1;
    return true;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// Jinja2's filters and tests by name (an unknown name is a template error; see the parser).
inline bool jinja_known_filter(std::string_view n) {
  static const char* const names[] = {
      "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
      "filesizeformat", "first", "float", "forceescape", "format", "groupby", "indent", "int", "items", "join",
      "last", "length", "list", "lower", "map", "max", "min", "pprint", "random", "reject", "rejectattr",
      "replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort", "string", "striptags",
      "sum", "title", "tojson", "trim", "truncate", "unique", "upper", "urlencode", "urlize", "wordcount",
      "wordwrap", "xmlattr"};
  for (const char* x : names)
    if (n == x) return true;
  return false;
}
inline bool jinja_known_test(std::string_view n) {
  static const char* const names[] = {
      "!=", "<", "<=", "==", ">", ">=", "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped",
      "even", "false", "filter", "float", "ge", "greaterthan", "gt", "in", "integer", "iterable", "le", "lessthan",
      "lower", "lt", "mapping", "ne", "none", "number", "odd", "sameas", "sequence", "string", "test", "true",
      "undefined", "upper"};
  for (const char* x : names)
    if (n == x) return true;
  return false;
}

// ---- parser ----
// Recursive descent with Jinja2's grammar and precedence:
//   condexpr: or ('if' or ('else' condexpr)?)*      or: and ('or' and)*      and: not ('and' not)*
//   not: 'not' not | compare                         compare: math1 (cmpop math1)*
//   math1: concat (('+'|'-') concat)*                concat: math2 ('~' math2)*
//   math2: pow (('*'|'/'|'//'|'%') pow)*             pow: unary ('**' unary)*
//   unary: ('-'|'+') unary-without-filters | primary postfix, then filters / tests / calls
class JParser {
 public:
  JParser(JProgram& prog, std::vector<JTok> toks) : p_(prog), t_(std::move(toks)) {}

  bool run() {
    stack_base_ = jstack_here();
    std::vector<JNode*> body;
    if (!subparse(body, {})) return false;
    if (cur().k != TK::eof) {
      return fail(cur().pos, strf("unexpected '%s'", cur().text.c_str()));
    }
    p_.root = std::move(body);
    for (const JNode* n : p_.root)
      if (!check_unknown(n, false)) return false;
    for (JNode* n : p_.root) mark_constant(n);
    std::set<std::string> outer;
    scan_frame(p_.root, outer, {}, p_.root_undef);
    return true;
  }

  // ---- Jinja2's frame analysis (its idtracking), for one rule our dynamic scopes lack ----
  // A name that a frame (the template, a loop body, a macro, a block) assigns before it reads it
  // is bound to undefined from the frame's start, so a loop or macro body that runs before the
  // assignment sees undefined, not the context's variable. Names the frame reads first, assigns
  // in only some branches of an if, or that an enclosing frame knows, resolve as usual.
  // Linear in the template: the names the enclosing frames know are one set, extended while a
  // nested frame is scanned and restored after it (not copied per frame), and the branches of an
  // if are scanned in place (a name they assign first is looked up, so only their reads and
  // stores matter to the frame).
  struct FrameScan {
    std::set<std::string> refs, stored, undef;
    int branch = 0;  // inside an if's branches: nothing becomes undefined from the frame's start
  };
  static void scan_load(const std::string& name, FrameScan& f, const std::set<std::string>& outer) {
    if (!outer.count(name)) f.refs.insert(name);
  }
  static void scan_loads(const JNode* e, FrameScan& f, const std::set<std::string>& outer) {
    if (!e) return;
    if (e->k == NK::name || e->k == NK::nsref) scan_load(e->str, f, outer);
    for (const JNode* c : {e->a, e->b, e->c, e->d, e->dyn_args, e->dyn_kwargs}) scan_loads(c, f, outer);
    for (const auto* v : {&e->list, &e->kw})
      for (const JNode* c : *v) scan_loads(c, f, outer);
  }
  static void scan_store(const JNode* t, FrameScan& f, const std::set<std::string>& outer) {
    if (!t) return;
    if (t->k == NK::nsref) return scan_load(t->str, f, outer);
    if (t->k == NK::tuple) {
      for (const JNode* c : t->list) scan_store(c, f, outer);
      return;
    }
    if (t->k != NK::name) return;
    f.stored.insert(t->str);
    if (f.refs.count(t->str) || outer.count(t->str)) return;
    f.refs.insert(t->str);
    if (!f.branch) f.undef.insert(t->str);
  }
  static void scan_stmts(const std::vector<JNode*>& body, FrameScan& f, const std::set<std::string>& outer,
                         std::vector<JNode*>& children) {
    for (JNode* n : body) {
      switch (n->k) {
        case NK::print: scan_loads(n->a, f, outer); break;
        case NK::if_:
          // Jinja2 merges three branches (if, all the elifs together, else) and binds a name to
          // undefined only when all three assign it first; an "if / else" never does (its elif
          // branch is empty): names first seen in a branch are looked up. Both branches add
          // their reads and stores to the frame.
          scan_loads(n->a, f, outer);
          f.branch++;
          scan_stmts(n->body, f, outer, children);
          scan_stmts(n->orelse, f, outer, children);
          f.branch--;
          break;
        case NK::for_: scan_loads(n->b, f, outer); children.push_back(n); break;
        case NK::set:
          scan_loads(n->b, f, outer);
          scan_store(n->a, f, outer);
          break;
        case NK::set_block: scan_store(n->a, f, outer); children.push_back(n); break;
        case NK::macro: {
          JNode name;
          name.k = NK::name;
          name.str = n->str;
          scan_store(&name, f, outer);
          children.push_back(n);
          break;
        }
        case NK::call_block:
        case NK::filter_block: scan_loads(n->a, f, outer); children.push_back(n); break;
        case NK::scope:
          for (const JNode* v : n->list) scan_loads(v, f, outer);
          children.push_back(n);
          break;
        default: break;
      }
    }
  }
  // Scans one frame, then (with everything it knows) the frames nested in it. `outer`, the names
  // the enclosing frames know, is extended for the nested frames and restored before returning.
  static void scan_frame(const std::vector<JNode*>& body, std::set<std::string>& outer,
                         const std::set<std::string>& params, std::vector<std::string>& undef) {
    FrameScan f;
    f.refs = params;
    std::vector<JNode*> children;
    scan_stmts(body, f, outer, children);
    undef.assign(f.undef.begin(), f.undef.end());
    if (children.empty()) return;
    std::vector<std::set<std::string>::iterator> added;
    for (const std::string& r : f.refs) {
      auto ins = outer.insert(r);
      if (ins.second) added.push_back(ins.first);
    }
    for (JNode* c : children) {
      std::set<std::string> ps;
      FrameScan targets;
      switch (c->k) {
        case NK::for_:
          scan_store(c->a, targets, {});
          ps = targets.stored;
          ps.insert("loop");
          break;
        case NK::macro:
        case NK::call_block:
          ps.insert(c->names.begin(), c->names.end());
          for (const char* s : {"varargs", "kwargs", "caller"}) ps.insert(s);
          break;
        case NK::scope:
          for (const JNode* t : c->kw) scan_store(t, targets, {});
          ps = targets.stored;
          break;
        default: break;
      }
      scan_frame(c->body, outer, ps, c->undef_names);
    }
    for (auto it : added) outer.erase(it);
  }

  std::string error;
  size_t error_pos = 0;

 private:
  const JTok& cur() const { return t_[i_]; }
  const JTok& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() {
    if (i_ + 1 < t_.size()) i_++;
  }
  bool fail(size_t at, std::string why) {
    if (error.empty()) {
      error = std::move(why);
      error_pos = at;
    }
    return false;
  }
  bool is_op(const char* o) const { return cur().k == TK::op && cur().text == o; }
  bool is_name(const char* n) const { return cur().k == TK::name && cur().text == n; }
  static const char* describe(const JTok& t) {
    switch (t.k) {
      case TK::data: return "template data";
      case TK::var_begin: return "'{{'";
      case TK::var_end: return "'}}'";
      case TK::block_begin: return "'{%'";
      case TK::block_end: return "end of statement block";
      case TK::name: return "name";
      case TK::str: return "string";
      case TK::integer: return "integer";
      case TK::real: return "float";
      case TK::op: return "operator";
      case TK::eof: return "end of template";
    }
    return "token";
  }
  bool expect_op(const char* o) {
    if (!is_op(o)) {
      std::string got = cur().k == TK::op || cur().k == TK::name ? "'" + cur().text + "'" : describe(cur());
      return fail(cur().pos, strf("expected '%s', got %s", o, got.c_str()));
    }
    next();
    return true;
  }
  bool expect(TK k, const char* what) {
    if (cur().k != k) {
      std::string got = cur().k == TK::op || cur().k == TK::name ? "'" + cur().text + "'" : describe(cur());
      return fail(cur().pos, strf("expected %s, got %s", what, got.c_str()));
    }
    next();
    return true;
  }
  JNode* make(NK k, uint32_t pos) {
    p_.nodes.push_back(std::make_unique<JNode>());
    JNode* n = p_.nodes.back().get();
    n->k = k;
    n->pos = pos;
    return n;
  }
  // Operator chains (a + b + c ...) nest the tree without recursing here: count them as depth.
  struct ChainGuard {
    JParser& p;
    int n = 0;
    const char* what;
    explicit ChainGuard(JParser& parser, const char* w = "expression") : p(parser), what(w) {}
    bool step() {
      ++n;
      if (++p.depth_ <= LLMINFER_JINJA_MAX_DEPTH) return true;
      return p.fail(p.cur().pos, strf("%s nested too deeply (more than %d levels of blocks, elifs and expressions)",
                                      what, LLMINFER_JINJA_MAX_DEPTH));
    }
    ~ChainGuard() { p.depth_ -= n; }
  };
  struct DepthGuard {
    JParser& p;
    bool ok;
    explicit DepthGuard(JParser& parser) : p(parser), ok(++parser.depth_ <= LLMINFER_JINJA_MAX_DEPTH) {
      if (!ok) {
        p.fail(p.cur().pos, strf("template nested too deeply (more than %d levels of blocks, elifs and expressions)",
                                 LLMINFER_JINJA_MAX_DEPTH));
      } else if (jstack_used(p.stack_base_) > LLMINFER_JINJA_MAX_STACK) {
        ok = false;
        p.fail(p.cur().pos, strf("template nested too deeply (more than %u KB of stack)",
                                 static_cast<unsigned>(LLMINFER_JINJA_MAX_STACK >> 10)));
      }
    }
    ~DepthGuard() { --p.depth_; }
  };

  // Statements until one of `ends` (a block tag name) is the current tag; leaves the parser on
  // that name (after "{%").
  bool subparse(std::vector<JNode*>& body, std::initializer_list<const char*> ends) {
    DepthGuard g(*this);
    if (!g.ok) return false;
    for (;;) {
      const JTok& t = cur();
      if (t.k == TK::eof) {
        if (ends.size() == 0) return true;
        std::string want;
        for (const char* e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
        return fail(t.pos, "unexpected end of template: expected " + want);
      }
      if (t.k == TK::data) {
        JNode* n = make(NK::output, t.pos);
        n->str = t.text;
        body.push_back(n);
        next();
        continue;
      }
      if (t.k == TK::var_begin) {
        next();
        JNode* n = make(NK::print, t.pos);
        n->a = parse_tuple(true, false, {});
        if (!n->a) return false;
        if (!expect(TK::var_end, "'}}'")) return false;
        body.push_back(n);
        continue;
      }
      if (t.k == TK::block_begin) {
        next();
        if (cur().k == TK::name)
          for (const char* e : ends)
            if (cur().text == e) return true;
        if (!parse_statement(body)) return false;
        continue;
      }
      return fail(t.pos, strf("unexpected %s", describe(t)));
    }
  }
  // Body of a block statement: "%}" body "{% end..." ; leaves the parser on the end name.
  bool parse_body(std::vector<JNode*>& body, std::initializer_list<const char*> ends) {
    if (is_op(":")) next();
    if (!expect(TK::block_end, "end of statement block ('%}')")) return false;
    return subparse(body, ends);
  }
  // After the end tag name: expects "%}".
  bool finish_end_tag() {
    next();  // the end name
    return expect(TK::block_end, "end of statement block ('%}')");
  }

  bool parse_statement(std::vector<JNode*>& body) {
    const JTok& t = cur();
    if (t.k != TK::name) return fail(t.pos, "tag name expected");
    std::string tag = t.text;
    uint32_t pos = t.pos;
    if (tag == "if") return parse_if(body);
    if (tag == "for") return parse_for(body);
    if (tag == "set") return parse_set(body);
    if (tag == "macro") return parse_macro(body);
    if (tag == "call") return parse_call_block(body);
    if (tag == "filter") return parse_filter_block(body);
    if (tag == "with") return parse_with(body);
    if (tag == "generation") {
      // transformers' {% generation %} marks assistant text for masks; it renders its body
      next();
      JNode* n = make(NK::scope, pos);
      if (!parse_body(n->body, {"endgeneration"}) || !finish_end_tag()) return false;
      body.push_back(n);
      return true;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) return fail(pos, strf("'%s' outside of a for loop", tag.c_str()));
      next();
      body.push_back(make(tag == "break" ? NK::break_ : NK::continue_, pos));
      return expect(TK::block_end, "end of statement block ('%}')");
    }
    if (tag == "print") {
      next();
      while (cur().k != TK::block_end) {
        JNode* n = make(NK::print, cur().pos);
        n->a = parse_expression(true);
        if (!n->a) return false;
        body.push_back(n);
        if (cur().k == TK::block_end) break;
        if (!expect_op(",")) return false;
      }
      next();
      return true;
    }
    if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" || tag == "from" ||
        tag == "autoescape" || tag == "do")
      return fail(pos, strf("unsupported construct: the '%s' tag", tag.c_str()));
    return fail(pos, strf("unknown tag '%s'", tag.c_str()));
  }

  bool parse_if(std::vector<JNode*>& body) {
    JNode* n = make(NK::if_, cur().pos);
    next();
    JNode* node = n;
    // each elif nests an if node in the previous one's else branch: it counts as a level (the
    // passes over the tree and the renderer recurse once per level)
    ChainGuard cg(*this, "template");
    for (;;) {
      node->a = parse_tuple(false, false, {});
      if (!node->a) return false;
      if (!parse_body(node->body, {"elif", "else", "endif"})) return false;
      if (cur().text == "elif") {
        if (!cg.step()) return false;
        JNode* e = make(NK::if_, cur().pos);
        node->orelse.push_back(e);
        node = e;
        next();
        continue;
      }
      if (cur().text == "else") {
        next();
        if (!parse_body(node->orelse, {"endif"})) return false;
      }
      break;
    }
    if (!finish_end_tag()) return false;
    body.push_back(n);
    return true;
  }

  bool parse_for(std::vector<JNode*>& body) {
    JNode* n = make(NK::for_, cur().pos);
    next();
    n->a = parse_assign_target(false, {"in"});
    if (!n->a) return false;
    if (!is_name("in")) return fail(cur().pos, "expected 'in' in a for loop");
    next();
    n->b = parse_tuple(false, false, {"recursive"});
    if (!n->b) return false;
    if (is_name("if")) {
      next();
      n->c = parse_expression(true);
      if (!n->c) return false;
    }
    if (is_name("recursive")) {
      next();
      n->flag = true;
    }
    loop_depth_++;
    if (!parse_body(n->body, {"endfor", "else"})) return false;
    loop_depth_--;
    if (cur().text == "else") {
      int ld = loop_depth_;
      loop_depth_ = 0;  // break/continue in the else block are not inside the loop
      next();
      if (!parse_body(n->orelse, {"endfor"})) return false;
      loop_depth_ = ld;
    }
    if (!finish_end_tag()) return false;
    body.push_back(n);
    return true;
  }

  bool parse_set(std::vector<JNode*>& body) {
    uint32_t pos = cur().pos;
    next();
    JNode* target = parse_assign_target(true, {});
    if (!target) return false;
    if (is_op("=")) {
      next();
      JNode* n = make(NK::set, pos);
      n->a = target;
      n->b = parse_tuple(true, false, {});
      if (!n->b) return false;
      if (!expect(TK::block_end, "end of statement block ('%}')")) return false;
      body.push_back(n);
      return true;
    }
    if (target->k == NK::tuple) return fail(pos, "a block set assigns to a single name");
    JNode* n = make(NK::set_block, pos);
    n->a = target;
    if (is_op("|")) {
      n->b = parse_filter(nullptr, false);
      if (!n->b) return false;
    }
    if (!parse_body(n->body, {"endset"})) return false;
    if (!finish_end_tag()) return false;
    body.push_back(n);
    return true;
  }

  bool parse_signature(JNode* n) {
    if (!expect_op("(")) return false;
    while (!is_op(")")) {
      if (!n->names.empty() && !expect_op(",")) return false;
      if (cur().k != TK::name) return fail(cur().pos, "expected a parameter name");
      n->names.push_back(cur().text);
      next();
      if (is_op("=")) {
        next();
        JNode* d = parse_expression(true);
        if (!d) return false;
        n->list.push_back(d);
      } else if (!n->list.empty()) {
        return fail(cur().pos, "non-default argument follows default argument");
      }
    }
    next();
    return true;
  }

  bool parse_macro(std::vector<JNode*>& body) {
    JNode* n = make(NK::macro, cur().pos);
    next();
    if (cur().k != TK::name) return fail(cur().pos, "expected a macro name");
    n->str = cur().text;
    next();
    if (!parse_signature(n)) return false;
    int ld = loop_depth_;
    loop_depth_ = 0;
    if (!parse_body(n->body, {"endmacro"})) return false;
    loop_depth_ = ld;
    if (!finish_end_tag()) return false;
    for (const JNode* b : n->body) scan_special_names(b, n->op);
    body.push_back(n);
    return true;
  }
  // Jinja2 rejects an unknown filter or test when it compiles the template, except inside an if
  // statement or a conditional expression ("soft" frames), where it fails only when evaluated.
  // Loop, macro, call, filter and set-block bodies are new frames, not soft.
  bool check_unknown(const JNode* n, bool soft) {
    if (!n) return true;
    if ((n->k == NK::filter || n->k == NK::test) && n->flag && !soft)
      return fail(n->pos, strf("no %s named '%s'", n->k == NK::filter ? "filter" : "test", n->str.c_str()));
    bool inner_soft = soft;
    if (n->k == NK::if_ || n->k == NK::cond) inner_soft = true;
    bool body_soft = inner_soft;
    if (n->k == NK::for_ || n->k == NK::macro || n->k == NK::call_block || n->k == NK::filter_block ||
        n->k == NK::set_block || n->k == NK::scope)
      body_soft = false;
    if (n->k == NK::for_) {
      // the iterable belongs to the enclosing frame; target, filter and bodies to the loop's
      return check_unknown(n->b, soft) && check_unknown(n->c, false) && check_list(n->body, false) &&
             check_list(n->orelse, false);
    }
    for (const JNode* c : {n->a, n->b, n->c, n->d, n->dyn_args, n->dyn_kwargs})
      if (!check_unknown(c, inner_soft)) return false;
    return check_list(n->list, inner_soft) && check_list(n->kw, inner_soft) && check_list(n->body, body_soft) &&
           check_list(n->orelse, body_soft);
  }
  bool check_list(const std::vector<JNode*>& v, bool soft) {
    for (const JNode* c : v)
      if (!check_unknown(c, soft)) return false;
    return true;
  }
  // Marks the expressions Jinja2's optimizer can compute when it compiles (as_const): literals and
  // what is built from them with operators, subscripts, and filters and tests that need no context.
  static bool mark_constant(JNode* n) {
    if (!n) return true;
    bool all = true;
    for (JNode* c : {n->a, n->b, n->c, n->d, n->dyn_args, n->dyn_kwargs}) all = mark_constant(c) && all;
    for (auto* v : {&n->list, &n->kw, &n->body, &n->orelse})
      for (JNode* c : *v) all = mark_constant(c) && all;
    switch (n->k) {
      case NK::konst: n->constant = true; break;
      case NK::list: case NK::tuple: case NK::dict: case NK::compare: case NK::concat: case NK::slice: case NK::item:
      case NK::not_: case NK::neg: case NK::pos: case NK::binop:
        n->constant = all;
        break;
      // as_const() of these evaluates only the operands it needs: "c if t else d" with a constant
      // t and a constant chosen branch is constant, so is "a and x" when a is constant and false.
      // Here "constant" means "may be": the renderer finds out when it evaluates (see eval_folded).
      case NK::and_: case NK::or_: n->constant = n->a && n->a->constant; break;
      case NK::cond:
        n->constant = n->a && n->a->constant && ((n->b && n->b->constant) || (n->c && n->c->constant));
        break;
      case NK::filter:
      case NK::test:
        n->constant = all && n->a && !n->flag && !n->dyn_args && !n->dyn_kwargs &&
                      !(n->k == NK::filter && (n->str == "map" || n->str == "select" || n->str == "reject" ||
                                               n->str == "selectattr" || n->str == "rejectattr"));
        break;
      default: n->constant = false;
    }
    return n->constant;
  }
  // Which of varargs (1), kwargs (2), caller (4) a macro body refers to (Jinja2 binds them only then).
  static void scan_special_names(const JNode* n, uint8_t& flags) {
    if (!n) return;
    if (n->k == NK::name) {
      if (n->str == "varargs") flags |= 1;
      if (n->str == "kwargs") flags |= 2;
      if (n->str == "caller") flags |= 4;
    }
    for (const JNode* c : {n->a, n->b, n->c, n->d, n->dyn_args, n->dyn_kwargs}) scan_special_names(c, flags);
    for (const auto* v : {&n->list, &n->kw, &n->body, &n->orelse})
      for (const JNode* c : *v) scan_special_names(c, flags);
  }

  bool parse_call_block(std::vector<JNode*>& body) {
    JNode* n = make(NK::call_block, cur().pos);
    next();
    if (is_op("(") && !parse_signature(n)) return false;
    n->a = parse_expression(true);
    if (!n->a) return false;
    if (n->a->k != NK::call) return fail(n->pos, "expected a call after 'call'");
    int ld = loop_depth_;
    loop_depth_ = 0;
    if (!parse_body(n->body, {"endcall"})) return false;
    loop_depth_ = ld;
    if (!finish_end_tag()) return false;
    for (const JNode* b : n->body) scan_special_names(b, n->op);
    body.push_back(n);
    return true;
  }

  bool parse_filter_block(std::vector<JNode*>& body) {
    JNode* n = make(NK::filter_block, cur().pos);
    next();
    n->a = parse_filter(nullptr, true);
    if (!n->a) return false;
    if (!parse_body(n->body, {"endfilter"})) return false;
    if (!finish_end_tag()) return false;
    body.push_back(n);
    return true;
  }

  bool parse_with(std::vector<JNode*>& body) {
    JNode* n = make(NK::scope, cur().pos);
    next();
    while (cur().k != TK::block_end) {
      if (!n->list.empty() && !expect_op(",")) return false;
      JNode* target = parse_assign_target(true, {});
      if (!target) return false;
      if (!expect_op("=")) return false;
      JNode* v = parse_expression(true);
      if (!v) return false;
      n->kw.push_back(target);
      n->list.push_back(v);
    }
    if (!parse_body(n->body, {"endwith"})) return false;
    if (!finish_end_tag()) return false;
    body.push_back(n);
    return true;
  }

  // name | name.attr (set only) | tuple of names
  JNode* parse_assign_target(bool with_namespace, std::initializer_list<const char*> extra_end) {
    uint32_t pos = cur().pos;
    std::vector<JNode*> items;
    bool is_tuple = false;
    for (;;) {
      if (!items.empty()) {
        if (!expect_op(",")) return nullptr;
      }
      if (tuple_end(extra_end)) break;
      JNode* item = nullptr;
      if (cur().k == TK::name) {
        std::string nm = cur().text;
        uint32_t p = cur().pos;
        next();
        if (with_namespace && is_op(".") && peek().k == TK::name) {
          next();
          item = make(NK::nsref, p);
          item->str = nm;
          item->names.push_back(cur().text);
          next();
        } else {
          if (nm == "true" || nm == "false" || nm == "True" || nm == "False" || nm == "none" || nm == "None") {
            fail(p, strf("cannot assign to '%s'", nm.c_str()));
            return nullptr;
          }
          item = make(NK::name, p);
          item->str = nm;
        }
      } else if (is_op("(")) {
        next();
        item = parse_assign_target(false, {});
        if (!item || !expect_op(")")) return nullptr;
      } else {
        fail(cur().pos, "cannot assign to this expression");
        return nullptr;
      }
      items.push_back(item);
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (items.empty()) {
        fail(pos, "expected an assignment target");
        return nullptr;
      }
      return items[0];
    }
    for (JNode* it : items)
      if (it->k == NK::nsref) {
        fail(it->pos, "cannot assign to a namespace attribute inside a tuple");
        return nullptr;
      }
    JNode* t = make(NK::tuple, pos);
    t->list = std::move(items);
    return t;
  }

  bool tuple_end(std::initializer_list<const char*> extra) const {
    if (cur().k == TK::var_end || cur().k == TK::block_end || is_op(")")) return true;
    if (cur().k == TK::name)
      for (const char* e : extra)
        if (cur().text == e) return true;
    return false;
  }

  JNode* parse_tuple(bool with_condexpr, bool explicit_parens, std::initializer_list<const char*> extra_end) {
    uint32_t pos = cur().pos;
    std::vector<JNode*> args;
    bool is_tuple = false;
    for (;;) {
      if (!args.empty() && !expect_op(",")) return nullptr;
      if (tuple_end(extra_end)) break;
      JNode* e = parse_expression(with_condexpr);
      if (!e) return nullptr;
      args.push_back(e);
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return args[0];
      if (!explicit_parens) {
        fail(cur().pos, strf("expected an expression, got %s", describe(cur())));
        return nullptr;
      }
    }
    JNode* t = make(NK::tuple, pos);
    t->list = std::move(args);
    return t;
  }

  JNode* parse_expression(bool with_condexpr) {
    DepthGuard g(*this);
    if (!g.ok) return nullptr;
    if (!with_condexpr) return parse_or();
    uint32_t pos = cur().pos;
    JNode* e1 = parse_or();
    if (!e1) return nullptr;
    while (is_name("if")) {
      next();
      JNode* cond = parse_or();
      if (!cond) return nullptr;
      JNode* n = make(NK::cond, pos);
      n->a = cond;
      n->b = e1;
      if (is_name("else")) {
        next();
        n->c = parse_expression(true);
        if (!n->c) return nullptr;
      }
      e1 = n;
    }
    return e1;
  }
  JNode* parse_or() {
    ChainGuard cg(*this);
    JNode* l = parse_and();
    while (l && is_name("or")) {
      if (!cg.step()) return nullptr;
      JNode* n = make(NK::or_, cur().pos);
      next();
      n->a = l;
      n->b = parse_and();
      if (!n->b) return nullptr;
      l = n;
    }
    return l;
  }
  JNode* parse_and() {
    ChainGuard cg(*this);
    JNode* l = parse_not();
    while (l && is_name("and")) {
      if (!cg.step()) return nullptr;
      JNode* n = make(NK::and_, cur().pos);
      next();
      n->a = l;
      n->b = parse_not();
      if (!n->b) return nullptr;
      l = n;
    }
    return l;
  }
  JNode* parse_not() {
    DepthGuard g(*this);
    if (!g.ok) return nullptr;
    if (is_name("not")) {
      JNode* n = make(NK::not_, cur().pos);
      next();
      n->a = parse_not();
      return n->a ? n : nullptr;
    }
    return parse_compare();
  }
  JNode* parse_compare() {
    uint32_t pos = cur().pos;
    JNode* e = parse_math1();
    if (!e) return nullptr;
    JNode* n = nullptr;
    ChainGuard cg(*this);
    for (;;) {
      if (!cg.step()) return nullptr;
      CmpOp op;
      if (cur().k == TK::op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        const std::string& o = cur().text;
        op = o == "==" ? CmpOp::eq : o == "!=" ? CmpOp::ne : o == "<" ? CmpOp::lt : o == "<=" ? CmpOp::le
             : o == ">" ? CmpOp::gt : CmpOp::ge;
        next();
      } else if (is_name("in")) {
        op = CmpOp::in;
        next();
      } else if (is_name("not") && peek().k == TK::name && peek().text == "in") {
        op = CmpOp::notin;
        next();
        next();
      } else {
        break;
      }
      if (!n) {
        n = make(NK::compare, pos);
        n->list.push_back(e);
      }
      JNode* r = parse_math1();
      if (!r) return nullptr;
      n->ops.push_back(static_cast<uint8_t>(op));
      n->list.push_back(r);
    }
    return n ? n : e;
  }
  JNode* binop(BinOp op, JNode* l, JNode* r, uint32_t pos) {
    JNode* n = make(NK::binop, pos);
    n->op = static_cast<uint8_t>(op);
    n->a = l;
    n->b = r;
    return n;
  }
  JNode* parse_math1() {
    ChainGuard cg(*this);
    JNode* l = parse_concat();
    while (l && cur().k == TK::op && (cur().text == "+" || cur().text == "-")) {
      if (!cg.step()) return nullptr;
      BinOp op = cur().text == "+" ? BinOp::add : BinOp::sub;
      uint32_t pos = cur().pos;
      next();
      JNode* r = parse_concat();
      if (!r) return nullptr;
      l = binop(op, l, r, pos);
    }
    return l;
  }
  JNode* parse_concat() {
    JNode* first = parse_math2();
    if (!first || !is_op("~")) return first;
    JNode* n = make(NK::concat, cur().pos);
    n->list.push_back(first);
    while (is_op("~")) {
      next();
      JNode* r = parse_math2();
      if (!r) return nullptr;
      n->list.push_back(r);
    }
    return n;
  }
  JNode* parse_math2() {
    ChainGuard cg(*this);
    JNode* l = parse_pow();
    while (l && cur().k == TK::op &&
           (cur().text == "*" || cur().text == "/" || cur().text == "//" || cur().text == "%")) {
      if (!cg.step()) return nullptr;
      const std::string& o = cur().text;
      BinOp op = o == "*" ? BinOp::mul : o == "/" ? BinOp::div : o == "//" ? BinOp::floordiv : BinOp::mod;
      uint32_t pos = cur().pos;
      next();
      JNode* r = parse_pow();
      if (!r) return nullptr;
      l = binop(op, l, r, pos);
    }
    return l;
  }
  JNode* parse_pow() {
    ChainGuard cg(*this);
    JNode* l = parse_unary(true);
    while (l && is_op("**")) {
      if (!cg.step()) return nullptr;
      uint32_t pos = cur().pos;
      next();
      JNode* r = parse_unary(true);
      if (!r) return nullptr;
      l = binop(BinOp::pow, l, r, pos);
    }
    return l;
  }
  JNode* parse_unary(bool with_filter) {
    DepthGuard g(*this);
    if (!g.ok) return nullptr;
    JNode* n;
    if (is_op("-") || is_op("+")) {
      n = make(is_op("-") ? NK::neg : NK::pos, cur().pos);
      next();
      n->a = parse_unary(false);
      if (!n->a) return nullptr;
    } else {
      n = parse_primary();
      if (!n) return nullptr;
    }
    n = parse_postfix(n);
    if (n && with_filter) n = parse_filter_expr(n);
    return n;
  }
  JNode* parse_primary() {
    const JTok& t = cur();
    JNode* n = nullptr;
    switch (t.k) {
      case TK::name:
        if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
          n = make(NK::konst, t.pos);
          n->val = JValue::boolean(t.text[0] == 't' || t.text[0] == 'T');
        } else if (t.text == "none" || t.text == "None") {
          n = make(NK::konst, t.pos);
          n->val = JValue::none();
        } else {
          n = make(NK::name, t.pos);
          n->str = t.text;
          if (t.text == "strftime_now") p_.uses_strftime = true;
        }
        next();
        return n;
      case TK::str: {
        n = make(NK::konst, t.pos);
        std::string v = t.text;
        next();
        while (cur().k == TK::str) {  // adjacent literals join
          v += cur().text;
          next();
        }
        n->val = JValue::str(std::move(v));
        return n;
      }
      case TK::integer:
        n = make(NK::konst, t.pos);
        n->val = JValue::integer(t.i);
        next();
        return n;
      case TK::real:
        n = make(NK::konst, t.pos);
        n->val = JValue::real(t.d);
        next();
        return n;
      case TK::op:
        if (t.text == "(") {
          next();
          n = parse_tuple(true, true, {});
          if (!n || !expect_op(")")) return nullptr;
          return n;
        }
        if (t.text == "[") {
          n = make(NK::list, t.pos);
          next();
          while (!is_op("]")) {
            if (!n->list.empty() && !expect_op(",")) return nullptr;
            if (is_op("]")) break;
            JNode* e = parse_expression(true);
            if (!e) return nullptr;
            n->list.push_back(e);
          }
          next();
          return n;
        }
        if (t.text == "{") {
          n = make(NK::dict, t.pos);
          next();
          while (!is_op("}")) {
            if (!n->list.empty() && !expect_op(",")) return nullptr;
            if (is_op("}")) break;
            JNode* k = parse_expression(true);
            if (!k || !expect_op(":")) return nullptr;
            JNode* v = parse_expression(true);
            if (!v) return nullptr;
            n->list.push_back(k);
            n->kw.push_back(v);
          }
          next();
          return n;
        }
        break;
      default: break;
    }
    std::string got = t.k == TK::op || t.k == TK::name ? "'" + t.text + "'" : describe(t);
    fail(t.pos, strf("unexpected %s", got.c_str()));
    return nullptr;
  }
  JNode* parse_postfix(JNode* n) {
    ChainGuard cg(*this);
    while (n) {
      if (!cg.step()) return nullptr;
      if (is_op(".") || is_op("[")) {
        n = parse_subscript(n);
      } else if (is_op("(")) {
        n = parse_call(n);
      } else {
        break;
      }
    }
    return n;
  }
  JNode* parse_filter_expr(JNode* n) {
    ChainGuard cg(*this);
    while (n) {
      if (!cg.step()) return nullptr;
      if (is_op("|")) {
        n = parse_filter(n, false);
      } else if (is_name("is")) {
        n = parse_test(n);
      } else if (is_op("(")) {
        n = parse_call(n);
      } else {
        break;
      }
    }
    return n;
  }
  JNode* parse_subscript(JNode* obj) {
    DepthGuard g(*this);
    if (!g.ok) return nullptr;
    uint32_t pos = cur().pos;
    if (is_op(".")) {
      next();
      if (cur().k == TK::name) {
        JNode* n = make(NK::attr, pos);
        n->a = obj;
        n->str = cur().text;
        next();
        return n;
      }
      if (cur().k == TK::integer) {
        JNode* n = make(NK::item, pos);
        n->a = obj;
        n->b = make(NK::konst, cur().pos);
        n->b->val = JValue::integer(cur().i);
        next();
        return n;
      }
      fail(cur().pos, "expected a name or a number after '.'");
      return nullptr;
    }
    next();  // '['
    std::vector<JNode*> args;
    while (!is_op("]")) {
      if (!args.empty() && !expect_op(",")) return nullptr;
      JNode* a = parse_subscribed();
      if (!a) return nullptr;
      args.push_back(a);
    }
    next();
    if (args.empty()) {
      fail(pos, "expected a subscript expression");
      return nullptr;
    }
    JNode* n = make(NK::item, pos);
    n->a = obj;
    if (args.size() == 1) {
      n->b = args[0];
    } else {
      n->b = make(NK::tuple, pos);
      n->b->list = std::move(args);
    }
    return n;
  }
  JNode* parse_subscribed() {
    uint32_t pos = cur().pos;
    JNode* start = nullptr;
    if (is_op(":")) {
      next();
    } else {
      start = parse_expression(true);
      if (!start) return nullptr;
      if (!is_op(":")) return start;
      next();
    }
    JNode* n = make(NK::slice, pos);
    n->b = start;
    if (!is_op(":") && !is_op("]") && !is_op(",")) {
      n->c = parse_expression(true);
      if (!n->c) return nullptr;
    }
    if (is_op(":")) {
      next();
      if (!is_op("]") && !is_op(",")) {
        n->d = parse_expression(true);
        if (!n->d) return nullptr;
      }
    }
    return n;
  }
  bool parse_call_args(JNode* n) {
    uint32_t pos = cur().pos;
    if (!expect_op("(")) return false;
    bool require_comma = false;
    while (!is_op(")")) {
      if (require_comma) {
        if (!expect_op(",")) return false;
        if (is_op(")")) break;
      }
      if (is_op("*")) {
        if (n->dyn_args || n->dyn_kwargs) return fail(pos, "invalid syntax for function call expression");
        next();
        n->dyn_args = parse_expression(true);
        if (!n->dyn_args) return false;
      } else if (is_op("**")) {
        if (n->dyn_kwargs) return fail(pos, "invalid syntax for function call expression");
        next();
        n->dyn_kwargs = parse_expression(true);
        if (!n->dyn_kwargs) return false;
      } else if (cur().k == TK::name && peek().k == TK::op && peek().text == "=") {
        if (n->dyn_kwargs) return fail(pos, "invalid syntax for function call expression");
        n->names.push_back(cur().text);
        next();
        next();
        JNode* v = parse_expression(true);
        if (!v) return false;
        n->kw.push_back(v);
      } else {
        if (n->dyn_args || n->dyn_kwargs || !n->kw.empty())
          return fail(pos, "invalid syntax for function call expression");
        JNode* v = parse_expression(true);
        if (!v) return false;
        n->list.push_back(v);
      }
      require_comma = true;
    }
    next();
    return true;
  }
  JNode* parse_call(JNode* callee) {
    DepthGuard g(*this);
    if (!g.ok) return nullptr;
    JNode* n = make(NK::call, callee->pos);  // errors point at what is called
    n->a = callee;
    return parse_call_args(n) ? n : nullptr;
  }
  // `| name(args)` chain; with start_inline the first name has no leading '|' (filter blocks).
  JNode* parse_filter(JNode* subject, bool start_inline) {
    DepthGuard g(*this);
    if (!g.ok) return nullptr;
    ChainGuard cg(*this);
    while (is_op("|") || start_inline) {
      if (!cg.step()) return nullptr;
      if (!start_inline) next();
      start_inline = false;
      if (cur().k != TK::name) {
        fail(cur().pos, "expected a filter name");
        return nullptr;
      }
      JNode* n = make(NK::filter, cur().pos);
      n->str = cur().text;
      next();
      while (is_op(".")) {
        next();
        if (cur().k != TK::name) {
          fail(cur().pos, "expected a name");
          return nullptr;
        }
        n->str += "." + cur().text;
        next();
      }
      if (!jinja_known_filter(n->str)) n->flag = true;  // an error unless in a "soft" frame (check_unknown)
      if (is_op("(") && !parse_call_args(n)) return nullptr;
      n->a = subject;
      subject = n;
    }
    return subject;
  }
  JNode* parse_test(JNode* subject) {
    JNode* n = make(NK::test, cur().pos);
    next();  // 'is'
    bool negated = false;
    if (is_name("not")) {
      negated = true;
      next();
    }
    if (cur().k != TK::name) {
      fail(cur().pos, "expected a test name after 'is'");
      return nullptr;
    }
    n->str = cur().text;
    next();
    while (is_op(".")) {
      next();
      if (cur().k != TK::name) {
        fail(cur().pos, "expected a name");
        return nullptr;
      }
      n->str += "." + cur().text;
      next();
    }
    if (!jinja_known_test(n->str)) n->flag = true;  // an error unless in a "soft" frame (check_unknown)
    n->a = subject;
    if (is_op("(")) {
      if (!parse_call_args(n)) return nullptr;
    } else if ((cur().k == TK::name || cur().k == TK::str || cur().k == TK::integer || cur().k == TK::real ||
                is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) {
        fail(cur().pos, "you cannot chain multiple tests with 'is'");
        return nullptr;
      }
      JNode* arg = parse_primary();
      if (!arg) return nullptr;
      arg = parse_postfix(arg);
      if (!arg) return nullptr;
      n->list.push_back(arg);
    }
    if (negated) {
      JNode* x = make(NK::not_, n->pos);
      x->a = n;
      return x;
    }
    return n;
  }

  JProgram& p_;
  std::vector<JTok> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  uintptr_t stack_base_ = 0;
};

// Newline normalization and the trailing-newline rule of Jinja2's lexer: "\r\n", "\r", "\n" all
// become "\n" and one final newline is dropped (keep_trailing_newline=False).
inline std::string jinja_normalize_source(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t k = 0; k < src.size(); k++) {
    char c = src[k];
    if (c == '\r') {
      if (k + 1 < src.size() && src[k + 1] == '\n') k++;
      c = '\n';
    }
    out += c;
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Parses a template; errors name the construct and the line:column.
inline Result<std::shared_ptr<const JProgram>> jinja_parse(std::string_view source) {
  if (source.size() > LLMINFER_JINJA_MAX_TEMPLATE)
    return make_error(Errc::template_error, strf("chat template: %zu bytes is more than the limit of %llu", source.size(),
                                                 static_cast<unsigned long long>(LLMINFER_JINJA_MAX_TEMPLATE)));
  auto prog = std::make_shared<JProgram>();
  prog->source = jinja_normalize_source(source);
  std::vector<JTok> toks;
  JLexer lex(prog->source);
  if (!lex.run(toks))
    return make_error(Errc::template_error, strf("chat template %s: %s", prog->where(static_cast<uint32_t>(lex.error_pos)).c_str(),
                                                 lex.error.c_str()));
  JParser parser(*prog, std::move(toks));
  if (!parser.run())
    return make_error(Errc::template_error,
                      strf("chat template %s: %s", prog->where(static_cast<uint32_t>(parser.error_pos)).c_str(),
                           parser.error.c_str()));
  return std::shared_ptr<const JProgram>(std::move(prog));
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
#endif  // !LLMI_KERNEL_PASS

// ---- src/35_jinja_unicode.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
// ==== Chat templates: Unicode tables for Python's str methods (generated) ====
// Generated by tools/gen-jinja-unicode from Unicode 15.0.0 (Debian unicode-data): do not edit.
// Case mappings as runs {start, end, stride, delta}; unconditional SpecialCasing entries; the
// Uppercase / Lowercase properties beyond "has a mapping"; titlecase letters; Case_Ignorable (for
// the Final_Sigma rule); code points str.isprintable() rejects (categories C*, Z* but the space);
// letters (L*), decimals (Nd), digits and numerics (with Unihan's numeric values) for str.is*().
namespace llminfer {
inline namespace v0_1 {
namespace detail {

struct JCaseRun {
  uint32_t start, end, stride;
  int32_t delta;
};
struct JRange {
  uint32_t lo, hi;
};
struct JCaseSpecial {
  uint32_t cp;
  uint8_t kind;  // 0 upper, 1 lower, 2 title
  uint32_t to[3];
};

inline constexpr JCaseRun kJUpperRuns[] = {
    {0x61, 0x7A, 1, -32}, {0xB5, 0xB5, 1, 743}, {0xE0, 0xF6, 1, -32}, {0xF8, 0xFE, 1, -32},
    {0xFF, 0xFF, 1, 121}, {0x101, 0x12F, 2, -1}, {0x131, 0x131, 1, -232}, {0x133, 0x137, 2, -1},
    {0x13A, 0x148, 2, -1}, {0x14B, 0x177, 2, -1}, {0x17A, 0x17E, 2, -1}, {0x17F, 0x17F, 1, -300},
    {0x180, 0x180, 1, 195}, {0x183, 0x185, 2, -1}, {0x188, 0x188, 1, -1}, {0x18C, 0x18C, 1, -1},
    {0x192, 0x192, 1, -1}, {0x195, 0x195, 1, 97}, {0x199, 0x199, 1, -1}, {0x19A, 0x19A, 1, 163},
    {0x19E, 0x19E, 1, 130}, {0x1A1, 0x1A5, 2, -1}, {0x1A8, 0x1A8, 1, -1}, {0x1AD, 0x1AD, 1, -1},
    {0x1B0, 0x1B0, 1, -1}, {0x1B4, 0x1B6, 2, -1}, {0x1B9, 0x1B9, 1, -1}, {0x1BD, 0x1BD, 1, -1},
    {0x1BF, 0x1BF, 1, 56}, {0x1C5, 0x1C5, 1, -1}, {0x1C6, 0x1C6, 1, -2}, {0x1C8, 0x1C8, 1, -1},
    {0x1C9, 0x1C9, 1, -2}, {0x1CB, 0x1CB, 1, -1}, {0x1CC, 0x1CC, 1, -2}, {0x1CE, 0x1DC, 2, -1},
    {0x1DD, 0x1DD, 1, -79}, {0x1DF, 0x1EF, 2, -1}, {0x1F2, 0x1F2, 1, -1}, {0x1F3, 0x1F3, 1, -2},
    {0x1F5, 0x1F5, 1, -1}, {0x1F9, 0x21F, 2, -1}, {0x223, 0x233, 2, -1}, {0x23C, 0x23C, 1, -1},
    {0x23F, 0x240, 1, 10815}, {0x242, 0x242, 1, -1}, {0x247, 0x24F, 2, -1}, {0x250, 0x250, 1, 10783},
    {0x251, 0x251, 1, 10780}, {0x252, 0x252, 1, 10782}, {0x253, 0x253, 1, -210}, {0x254, 0x254, 1, -206},
    {0x256, 0x257, 1, -205}, {0x259, 0x259, 1, -202}, {0x25B, 0x25B, 1, -203}, {0x25C, 0x25C, 1, 42319},
    {0x260, 0x260, 1, -205}, {0x261, 0x261, 1, 42315}, {0x263, 0x263, 1, -207}, {0x265, 0x265, 1, 42280},
    {0x266, 0x266, 1, 42308}, {0x268, 0x268, 1, -209}, {0x269, 0x269, 1, -211}, {0x26A, 0x26A, 1, 42308},
    {0x26B, 0x26B, 1, 10743}, {0x26C, 0x26C, 1, 42305}, {0x26F, 0x26F, 1, -211}, {0x271, 0x271, 1, 10749},
    {0x272, 0x272, 1, -213}, {0x275, 0x275, 1, -214}, {0x27D, 0x27D, 1, 10727}, {0x280, 0x280, 1, -218},
    {0x282, 0x282, 1, 42307}, {0x283, 0x283, 1, -218}, {0x287, 0x287, 1, 42282}, {0x288, 0x288, 1, -218},
    {0x289, 0x289, 1, -69}, {0x28A, 0x28B, 1, -217}, {0x28C, 0x28C, 1, -71}, {0x292, 0x292, 1, -219},
    {0x29D, 0x29D, 1, 42261}, {0x29E, 0x29E, 1, 42258}, {0x345, 0x345, 1, 84}, {0x371, 0x373, 2, -1},
    {0x377, 0x377, 1, -1}, {0x37B, 0x37D, 1, 130}, {0x3AC, 0x3AC, 1, -38}, {0x3AD, 0x3AF, 1, -37},
    {0x3B1, 0x3C1, 1, -32}, {0x3C2, 0x3C2, 1, -31}, {0x3C3, 0x3CB, 1, -32}, {0x3CC, 0x3CC, 1, -64},
    {0x3CD, 0x3CE, 1, -63}, {0x3D0, 0x3D0, 1, -62}, {0x3D1, 0x3D1, 1, -57}, {0x3D5, 0x3D5, 1, -47},
    {0x3D6, 0x3D6, 1, -54}, {0x3D7, 0x3D7, 1, -8}, {0x3D9, 0x3EF, 2, -1}, {0x3F0, 0x3F0, 1, -86},
    {0x3F1, 0x3F1, 1, -80}, {0x3F2, 0x3F2, 1, 7}, {0x3F3, 0x3F3, 1, -116}, {0x3F5, 0x3F5, 1, -96},
    {0x3F8, 0x3F8, 1, -1}, {0x3FB, 0x3FB, 1, -1}, {0x430, 0x44F, 1, -32}, {0x450, 0x45F, 1, -80},
    {0x461, 0x481, 2, -1}, {0x48B, 0x4BF, 2, -1}, {0x4C2, 0x4CE, 2, -1}, {0x4CF, 0x4CF, 1, -15},
    {0x4D1, 0x52F, 2, -1}, {0x561, 0x586, 1, -48}, {0x10D0, 0x10FA, 1, 3008}, {0x10FD, 0x10FF, 1, 3008},
    {0x13F8, 0x13FD, 1, -8}, {0x1C80, 0x1C80, 1, -6254}, {0x1C81, 0x1C81, 1, -6253}, {0x1C82, 0x1C82, 1, -6244},
    {0x1C83, 0x1C84, 1, -6242}, {0x1C85, 0x1C85, 1, -6243}, {0x1C86, 0x1C86, 1, -6236}, {0x1C87, 0x1C87, 1, -6181},
    {0x1C88, 0x1C88, 1, 35266}, {0x1D79, 0x1D79, 1, 35332}, {0x1D7D, 0x1D7D, 1, 3814}, {0x1D8E, 0x1D8E, 1, 35384},
    {0x1E01, 0x1E95, 2, -1}, {0x1E9B, 0x1E9B, 1, -59}, {0x1EA1, 0x1EFF, 2, -1}, {0x1F00, 0x1F07, 1, 8},
    {0x1F10, 0x1F15, 1, 8}, {0x1F20, 0x1F27, 1, 8}, {0x1F30, 0x1F37, 1, 8}, {0x1F40, 0x1F45, 1, 8},
    {0x1F51, 0x1F57, 2, 8}, {0x1F60, 0x1F67, 1, 8}, {0x1F70, 0x1F71, 1, 74}, {0x1F72, 0x1F75, 1, 86},
    {0x1F76, 0x1F77, 1, 100}, {0x1F78, 0x1F79, 1, 128}, {0x1F7A, 0x1F7B, 1, 112}, {0x1F7C, 0x1F7D, 1, 126},
    {0x1F80, 0x1F87, 1, 8}, {0x1F90, 0x1F97, 1, 8}, {0x1FA0, 0x1FA7, 1, 8}, {0x1FB0, 0x1FB1, 1, 8},
    {0x1FB3, 0x1FB3, 1, 9}, {0x1FBE, 0x1FBE, 1, -7205}, {0x1FC3, 0x1FC3, 1, 9}, {0x1FD0, 0x1FD1, 1, 8},
    {0x1FE0, 0x1FE1, 1, 8}, {0x1FE5, 0x1FE5, 1, 7}, {0x1FF3, 0x1FF3, 1, 9}, {0x214E, 0x214E, 1, -28},
    {0x2170, 0x217F, 1, -16}, {0x2184, 0x2184, 1, -1}, {0x24D0, 0x24E9, 1, -26}, {0x2C30, 0x2C5F, 1, -48},
    {0x2C61, 0x2C61, 1, -1}, {0x2C65, 0x2C65, 1, -10795}, {0x2C66, 0x2C66, 1, -10792}, {0x2C68, 0x2C6C, 2, -1},
    {0x2C73, 0x2C73, 1, -1}, {0x2C76, 0x2C76, 1, -1}, {0x2C81, 0x2CE3, 2, -1}, {0x2CEC, 0x2CEE, 2, -1},
    {0x2CF3, 0x2CF3, 1, -1}, {0x2D00, 0x2D25, 1, -7264}, {0x2D27, 0x2D27, 1, -7264}, {0x2D2D, 0x2D2D, 1, -7264},
    {0xA641, 0xA66D, 2, -1}, {0xA681, 0xA69B, 2, -1}, {0xA723, 0xA72F, 2, -1}, {0xA733, 0xA76F, 2, -1},
    {0xA77A, 0xA77C, 2, -1}, {0xA77F, 0xA787, 2, -1}, {0xA78C, 0xA78C, 1, -1}, {0xA791, 0xA793, 2, -1},
    {0xA794, 0xA794, 1, 48}, {0xA797, 0xA7A9, 2, -1}, {0xA7B5, 0xA7C3, 2, -1}, {0xA7C8, 0xA7CA, 2, -1},
    {0xA7D1, 0xA7D1, 1, -1}, {0xA7D7, 0xA7D9, 2, -1}, {0xA7F6, 0xA7F6, 1, -1}, {0xAB53, 0xAB53, 1, -928},
    {0xAB70, 0xABBF, 1, -38864}, {0xFF41, 0xFF5A, 1, -32}, {0x10428, 0x1044F, 1, -40}, {0x104D8, 0x104FB, 1, -40},
    {0x10597, 0x105A1, 1, -39}, {0x105A3, 0x105B1, 1, -39}, {0x105B3, 0x105B9, 1, -39}, {0x105BB, 0x105BC, 1, -39},
    {0x10CC0, 0x10CF2, 1, -64}, {0x118C0, 0x118DF, 1, -32}, {0x16E60, 0x16E7F, 1, -32}, {0x1E922, 0x1E943, 1, -34},
};
inline constexpr JCaseRun kJLowerRuns[] = {
    {0x41, 0x5A, 1, 32}, {0xC0, 0xD6, 1, 32}, {0xD8, 0xDE, 1, 32}, {0x100, 0x12E, 2, 1},
    {0x130, 0x130, 1, -199}, {0x132, 0x136, 2, 1}, {0x139, 0x147, 2, 1}, {0x14A, 0x176, 2, 1},
    {0x178, 0x178, 1, -121}, {0x179, 0x17D, 2, 1}, {0x181, 0x181, 1, 210}, {0x182, 0x184, 2, 1},
    {0x186, 0x186, 1, 206}, {0x187, 0x187, 1, 1}, {0x189, 0x18A, 1, 205}, {0x18B, 0x18B, 1, 1},
    {0x18E, 0x18E, 1, 79}, {0x18F, 0x18F, 1, 202}, {0x190, 0x190, 1, 203}, {0x191, 0x191, 1, 1},
    {0x193, 0x193, 1, 205}, {0x194, 0x194, 1, 207}, {0x196, 0x196, 1, 211}, {0x197, 0x197, 1, 209},
    {0x198, 0x198, 1, 1}, {0x19C, 0x19C, 1, 211}, {0x19D, 0x19D, 1, 213}, {0x19F, 0x19F, 1, 214},
    {0x1A0, 0x1A4, 2, 1}, {0x1A6, 0x1A6, 1, 218}, {0x1A7, 0x1A7, 1, 1}, {0x1A9, 0x1A9, 1, 218},
    {0x1AC, 0x1AC, 1, 1}, {0x1AE, 0x1AE, 1, 218}, {0x1AF, 0x1AF, 1, 1}, {0x1B1, 0x1B2, 1, 217},
    {0x1B3, 0x1B5, 2, 1}, {0x1B7, 0x1B7, 1, 219}, {0x1B8, 0x1B8, 1, 1}, {0x1BC, 0x1BC, 1, 1},
    {0x1C4, 0x1C4, 1, 2}, {0x1C5, 0x1C5, 1, 1}, {0x1C7, 0x1C7, 1, 2}, {0x1C8, 0x1C8, 1, 1},
    {0x1CA, 0x1CA, 1, 2}, {0x1CB, 0x1DB, 2, 1}, {0x1DE, 0x1EE, 2, 1}, {0x1F1, 0x1F1, 1, 2},
    {0x1F2, 0x1F4, 2, 1}, {0x1F6, 0x1F6, 1, -97}, {0x1F7, 0x1F7, 1, -56}, {0x1F8, 0x21E, 2, 1},
    {0x220, 0x220, 1, -130}, {0x222, 0x232, 2, 1}, {0x23A, 0x23A, 1, 10795}, {0x23B, 0x23B, 1, 1},
    {0x23D, 0x23D, 1, -163}, {0x23E, 0x23E, 1, 10792}, {0x241, 0x241, 1, 1}, {0x243, 0x243, 1, -195},
    {0x244, 0x244, 1, 69}, {0x245, 0x245, 1, 71}, {0x246, 0x24E, 2, 1}, {0x370, 0x372, 2, 1},
    {0x376, 0x376, 1, 1}, {0x37F, 0x37F, 1, 116}, {0x386, 0x386, 1, 38}, {0x388, 0x38A, 1, 37},
    {0x38C, 0x38C, 1, 64}, {0x38E, 0x38F, 1, 63}, {0x391, 0x3A1, 1, 32}, {0x3A3, 0x3AB, 1, 32},
    {0x3CF, 0x3CF, 1, 8}, {0x3D8, 0x3EE, 2, 1}, {0x3F4, 0x3F4, 1, -60}, {0x3F7, 0x3F7, 1, 1},
    {0x3F9, 0x3F9, 1, -7}, {0x3FA, 0x3FA, 1, 1}, {0x3FD, 0x3FF, 1, -130}, {0x400, 0x40F, 1, 80},
    {0x410, 0x42F, 1, 32}, {0x460, 0x480, 2, 1}, {0x48A, 0x4BE, 2, 1}, {0x4C0, 0x4C0, 1, 15},
    {0x4C1, 0x4CD, 2, 1}, {0x4D0, 0x52E, 2, 1}, {0x531, 0x556, 1, 48}, {0x10A0, 0x10C5, 1, 7264},
    {0x10C7, 0x10C7, 1, 7264}, {0x10CD, 0x10CD, 1, 7264}, {0x13A0, 0x13EF, 1, 38864}, {0x13F0, 0x13F5, 1, 8},
    {0x1C90, 0x1CBA, 1, -3008}, {0x1CBD, 0x1CBF, 1, -3008}, {0x1E00, 0x1E94, 2, 1}, {0x1E9E, 0x1E9E, 1, -7615},
    {0x1EA0, 0x1EFE, 2, 1}, {0x1F08, 0x1F0F, 1, -8}, {0x1F18, 0x1F1D, 1, -8}, {0x1F28, 0x1F2F, 1, -8},
    {0x1F38, 0x1F3F, 1, -8}, {0x1F48, 0x1F4D, 1, -8}, {0x1F59, 0x1F5F, 2, -8}, {0x1F68, 0x1F6F, 1, -8},
    {0x1F88, 0x1F8F, 1, -8}, {0x1F98, 0x1F9F, 1, -8}, {0x1FA8, 0x1FAF, 1, -8}, {0x1FB8, 0x1FB9, 1, -8},
    {0x1FBA, 0x1FBB, 1, -74}, {0x1FBC, 0x1FBC, 1, -9}, {0x1FC8, 0x1FCB, 1, -86}, {0x1FCC, 0x1FCC, 1, -9},
    {0x1FD8, 0x1FD9, 1, -8}, {0x1FDA, 0x1FDB, 1, -100}, {0x1FE8, 0x1FE9, 1, -8}, {0x1FEA, 0x1FEB, 1, -112},
    {0x1FEC, 0x1FEC, 1, -7}, {0x1FF8, 0x1FF9, 1, -128}, {0x1FFA, 0x1FFB, 1, -126}, {0x1FFC, 0x1FFC, 1, -9},
    {0x2126, 0x2126, 1, -7517}, {0x212A, 0x212A, 1, -8383}, {0x212B, 0x212B, 1, -8262}, {0x2132, 0x2132, 1, 28},
    {0x2160, 0x216F, 1, 16}, {0x2183, 0x2183, 1, 1}, {0x24B6, 0x24CF, 1, 26}, {0x2C00, 0x2C2F, 1, 48},
    {0x2C60, 0x2C60, 1, 1}, {0x2C62, 0x2C62, 1, -10743}, {0x2C63, 0x2C63, 1, -3814}, {0x2C64, 0x2C64, 1, -10727},
    {0x2C67, 0x2C6B, 2, 1}, {0x2C6D, 0x2C6D, 1, -10780}, {0x2C6E, 0x2C6E, 1, -10749}, {0x2C6F, 0x2C6F, 1, -10783},
    {0x2C70, 0x2C70, 1, -10782}, {0x2C72, 0x2C72, 1, 1}, {0x2C75, 0x2C75, 1, 1}, {0x2C7E, 0x2C7F, 1, -10815},
    {0x2C80, 0x2CE2, 2, 1}, {0x2CEB, 0x2CED, 2, 1}, {0x2CF2, 0x2CF2, 1, 1}, {0xA640, 0xA66C, 2, 1},
    {0xA680, 0xA69A, 2, 1}, {0xA722, 0xA72E, 2, 1}, {0xA732, 0xA76E, 2, 1}, {0xA779, 0xA77B, 2, 1},
    {0xA77D, 0xA77D, 1, -35332}, {0xA77E, 0xA786, 2, 1}, {0xA78B, 0xA78B, 1, 1}, {0xA78D, 0xA78D, 1, -42280},
    {0xA790, 0xA792, 2, 1}, {0xA796, 0xA7A8, 2, 1}, {0xA7AA, 0xA7AA, 1, -42308}, {0xA7AB, 0xA7AB, 1, -42319},
    {0xA7AC, 0xA7AC, 1, -42315}, {0xA7AD, 0xA7AD, 1, -42305}, {0xA7AE, 0xA7AE, 1, -42308}, {0xA7B0, 0xA7B0, 1, -42258},
    {0xA7B1, 0xA7B1, 1, -42282}, {0xA7B2, 0xA7B2, 1, -42261}, {0xA7B3, 0xA7B3, 1, 928}, {0xA7B4, 0xA7C2, 2, 1},
    {0xA7C4, 0xA7C4, 1, -48}, {0xA7C5, 0xA7C5, 1, -42307}, {0xA7C6, 0xA7C6, 1, -35384}, {0xA7C7, 0xA7C9, 2, 1},
    {0xA7D0, 0xA7D0, 1, 1}, {0xA7D6, 0xA7D8, 2, 1}, {0xA7F5, 0xA7F5, 1, 1}, {0xFF21, 0xFF3A, 1, 32},
    {0x10400, 0x10427, 1, 40}, {0x104B0, 0x104D3, 1, 40}, {0x10570, 0x1057A, 1, 39}, {0x1057C, 0x1058A, 1, 39},
    {0x1058C, 0x10592, 1, 39}, {0x10594, 0x10595, 1, 39}, {0x10C80, 0x10CB2, 1, 64}, {0x118A0, 0x118BF, 1, 32},
    {0x16E40, 0x16E5F, 1, 32}, {0x1E900, 0x1E921, 1, 34},
};
inline constexpr JCaseRun kJTitleRuns[] = {
    {0x1C4, 0x1C4, 1, 1}, {0x1C5, 0x1C5, 1, 0}, {0x1C6, 0x1C6, 1, -1}, {0x1C7, 0x1C7, 1, 1},
    {0x1C8, 0x1C8, 1, 0}, {0x1C9, 0x1C9, 1, -1}, {0x1CA, 0x1CA, 1, 1}, {0x1CB, 0x1CB, 1, 0},
    {0x1CC, 0x1CC, 1, -1}, {0x1F1, 0x1F1, 1, 1}, {0x1F2, 0x1F2, 1, 0}, {0x1F3, 0x1F3, 1, -1},
    {0x10D0, 0x10FA, 1, 0}, {0x10FD, 0x10FF, 1, 0},
};
inline constexpr JCaseSpecial kJCaseSpecial[] = {
    {0xDF, 0, {0x53, 0x53, 0}},
    {0xDF, 2, {0x53, 0x73, 0}},
    {0x130, 1, {0x69, 0x307, 0}},
    {0x149, 0, {0x2BC, 0x4E, 0}},
    {0x149, 2, {0x2BC, 0x4E, 0}},
    {0x1F0, 0, {0x4A, 0x30C, 0}},
    {0x1F0, 2, {0x4A, 0x30C, 0}},
    {0x390, 0, {0x399, 0x308, 0x301}},
    {0x390, 2, {0x399, 0x308, 0x301}},
    {0x3B0, 0, {0x3A5, 0x308, 0x301}},
    {0x3B0, 2, {0x3A5, 0x308, 0x301}},
    {0x587, 0, {0x535, 0x552, 0}},
    {0x587, 2, {0x535, 0x582, 0}},
    {0x1E96, 0, {0x48, 0x331, 0}},
    {0x1E96, 2, {0x48, 0x331, 0}},
    {0x1E97, 0, {0x54, 0x308, 0}},
    {0x1E97, 2, {0x54, 0x308, 0}},
    {0x1E98, 0, {0x57, 0x30A, 0}},
    {0x1E98, 2, {0x57, 0x30A, 0}},
    {0x1E99, 0, {0x59, 0x30A, 0}},
    {0x1E99, 2, {0x59, 0x30A, 0}},
    {0x1E9A, 0, {0x41, 0x2BE, 0}},
    {0x1E9A, 2, {0x41, 0x2BE, 0}},
    {0x1F50, 0, {0x3A5, 0x313, 0}},
    {0x1F50, 2, {0x3A5, 0x313, 0}},
    {0x1F52, 0, {0x3A5, 0x313, 0x300}},
    {0x1F52, 2, {0x3A5, 0x313, 0x300}},
    {0x1F54, 0, {0x3A5, 0x313, 0x301}},
    {0x1F54, 2, {0x3A5, 0x313, 0x301}},
    {0x1F56, 0, {0x3A5, 0x313, 0x342}},
    {0x1F56, 2, {0x3A5, 0x313, 0x342}},
    {0x1F80, 0, {0x1F08, 0x399, 0}},
    {0x1F81, 0, {0x1F09, 0x399, 0}},
    {0x1F82, 0, {0x1F0A, 0x399, 0}},
    {0x1F83, 0, {0x1F0B, 0x399, 0}},
    {0x1F84, 0, {0x1F0C, 0x399, 0}},
    {0x1F85, 0, {0x1F0D, 0x399, 0}},
    {0x1F86, 0, {0x1F0E, 0x399, 0}},
    {0x1F87, 0, {0x1F0F, 0x399, 0}},
    {0x1F88, 0, {0x1F08, 0x399, 0}},
    {0x1F89, 0, {0x1F09, 0x399, 0}},
    {0x1F8A, 0, {0x1F0A, 0x399, 0}},
    {0x1F8B, 0, {0x1F0B, 0x399, 0}},
    {0x1F8C, 0, {0x1F0C, 0x399, 0}},
    {0x1F8D, 0, {0x1F0D, 0x399, 0}},
    {0x1F8E, 0, {0x1F0E, 0x399, 0}},
    {0x1F8F, 0, {0x1F0F, 0x399, 0}},
    {0x1F90, 0, {0x1F28, 0x399, 0}},
    {0x1F91, 0, {0x1F29, 0x399, 0}},
    {0x1F92, 0, {0x1F2A, 0x399, 0}},
    {0x1F93, 0, {0x1F2B, 0x399, 0}},
    {0x1F94, 0, {0x1F2C, 0x399, 0}},
    {0x1F95, 0, {0x1F2D, 0x399, 0}},
    {0x1F96, 0, {0x1F2E, 0x399, 0}},
    {0x1F97, 0, {0x1F2F, 0x399, 0}},
    {0x1F98, 0, {0x1F28, 0x399, 0}},
    {0x1F99, 0, {0x1F29, 0x399, 0}},
    {0x1F9A, 0, {0x1F2A, 0x399, 0}},
    {0x1F9B, 0, {0x1F2B, 0x399, 0}},
    {0x1F9C, 0, {0x1F2C, 0x399, 0}},
    {0x1F9D, 0, {0x1F2D, 0x399, 0}},
    {0x1F9E, 0, {0x1F2E, 0x399, 0}},
    {0x1F9F, 0, {0x1F2F, 0x399, 0}},
    {0x1FA0, 0, {0x1F68, 0x399, 0}},
    {0x1FA1, 0, {0x1F69, 0x399, 0}},
    {0x1FA2, 0, {0x1F6A, 0x399, 0}},
    {0x1FA3, 0, {0x1F6B, 0x399, 0}},
    {0x1FA4, 0, {0x1F6C, 0x399, 0}},
    {0x1FA5, 0, {0x1F6D, 0x399, 0}},
    {0x1FA6, 0, {0x1F6E, 0x399, 0}},
    {0x1FA7, 0, {0x1F6F, 0x399, 0}},
    {0x1FA8, 0, {0x1F68, 0x399, 0}},
    {0x1FA9, 0, {0x1F69, 0x399, 0}},
    {0x1FAA, 0, {0x1F6A, 0x399, 0}},
    {0x1FAB, 0, {0x1F6B, 0x399, 0}},
    {0x1FAC, 0, {0x1F6C, 0x399, 0}},
    {0x1FAD, 0, {0x1F6D, 0x399, 0}},
    {0x1FAE, 0, {0x1F6E, 0x399, 0}},
    {0x1FAF, 0, {0x1F6F, 0x399, 0}},
    {0x1FB2, 0, {0x1FBA, 0x399, 0}},
    {0x1FB2, 2, {0x1FBA, 0x345, 0}},
    {0x1FB3, 0, {0x391, 0x399, 0}},
    {0x1FB4, 0, {0x386, 0x399, 0}},
    {0x1FB4, 2, {0x386, 0x345, 0}},
    {0x1FB6, 0, {0x391, 0x342, 0}},
    {0x1FB6, 2, {0x391, 0x342, 0}},
    {0x1FB7, 0, {0x391, 0x342, 0x399}},
    {0x1FB7, 2, {0x391, 0x342, 0x345}},
    {0x1FBC, 0, {0x391, 0x399, 0}},
    {0x1FC2, 0, {0x1FCA, 0x399, 0}},
    {0x1FC2, 2, {0x1FCA, 0x345, 0}},
    {0x1FC3, 0, {0x397, 0x399, 0}},
    {0x1FC4, 0, {0x389, 0x399, 0}},
    {0x1FC4, 2, {0x389, 0x345, 0}},
    {0x1FC6, 0, {0x397, 0x342, 0}},
    {0x1FC6, 2, {0x397, 0x342, 0}},
    {0x1FC7, 0, {0x397, 0x342, 0x399}},
    {0x1FC7, 2, {0x397, 0x342, 0x345}},
    {0x1FCC, 0, {0x397, 0x399, 0}},
    {0x1FD2, 0, {0x399, 0x308, 0x300}},
    {0x1FD2, 2, {0x399, 0x308, 0x300}},
    {0x1FD3, 0, {0x399, 0x308, 0x301}},
    {0x1FD3, 2, {0x399, 0x308, 0x301}},
    {0x1FD6, 0, {0x399, 0x342, 0}},
    {0x1FD6, 2, {0x399, 0x342, 0}},
    {0x1FD7, 0, {0x399, 0x308, 0x342}},
    {0x1FD7, 2, {0x399, 0x308, 0x342}},
    {0x1FE2, 0, {0x3A5, 0x308, 0x300}},
    {0x1FE2, 2, {0x3A5, 0x308, 0x300}},
    {0x1FE3, 0, {0x3A5, 0x308, 0x301}},
    {0x1FE3, 2, {0x3A5, 0x308, 0x301}},
    {0x1FE4, 0, {0x3A1, 0x313, 0}},
    {0x1FE4, 2, {0x3A1, 0x313, 0}},
    {0x1FE6, 0, {0x3A5, 0x342, 0}},
    {0x1FE6, 2, {0x3A5, 0x342, 0}},
    {0x1FE7, 0, {0x3A5, 0x308, 0x342}},
    {0x1FE7, 2, {0x3A5, 0x308, 0x342}},
    {0x1FF2, 0, {0x1FFA, 0x399, 0}},
    {0x1FF2, 2, {0x1FFA, 0x345, 0}},
    {0x1FF3, 0, {0x3A9, 0x399, 0}},
    {0x1FF4, 0, {0x38F, 0x399, 0}},
    {0x1FF4, 2, {0x38F, 0x345, 0}},
    {0x1FF6, 0, {0x3A9, 0x342, 0}},
    {0x1FF6, 2, {0x3A9, 0x342, 0}},
    {0x1FF7, 0, {0x3A9, 0x342, 0x399}},
    {0x1FF7, 2, {0x3A9, 0x342, 0x345}},
    {0x1FFC, 0, {0x3A9, 0x399, 0}},
    {0xFB00, 0, {0x46, 0x46, 0}},
    {0xFB00, 2, {0x46, 0x66, 0}},
    {0xFB01, 0, {0x46, 0x49, 0}},
    {0xFB01, 2, {0x46, 0x69, 0}},
    {0xFB02, 0, {0x46, 0x4C, 0}},
    {0xFB02, 2, {0x46, 0x6C, 0}},
    {0xFB03, 0, {0x46, 0x46, 0x49}},
    {0xFB03, 2, {0x46, 0x66, 0x69}},
    {0xFB04, 0, {0x46, 0x46, 0x4C}},
    {0xFB04, 2, {0x46, 0x66, 0x6C}},
    {0xFB05, 0, {0x53, 0x54, 0}},
    {0xFB05, 2, {0x53, 0x74, 0}},
    {0xFB06, 0, {0x53, 0x54, 0}},
    {0xFB06, 2, {0x53, 0x74, 0}},
    {0xFB13, 0, {0x544, 0x546, 0}},
    {0xFB13, 2, {0x544, 0x576, 0}},
    {0xFB14, 0, {0x544, 0x535, 0}},
    {0xFB14, 2, {0x544, 0x565, 0}},
    {0xFB15, 0, {0x544, 0x53B, 0}},
    {0xFB15, 2, {0x544, 0x56B, 0}},
    {0xFB16, 0, {0x54E, 0x546, 0}},
    {0xFB16, 2, {0x54E, 0x576, 0}},
    {0xFB17, 0, {0x544, 0x53D, 0}},
    {0xFB17, 2, {0x544, 0x56D, 0}},
};
inline constexpr JRange kJUpperExtra[] = {
    {0x3D2, 0x3D4}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210B, 0x210D}, {0x2110, 0x2112}, {0x2115, 0x2115},
    {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2128, 0x2128}, {0x212C, 0x212D}, {0x2130, 0x2131}, {0x2133, 0x2133},
    {0x213E, 0x213F}, {0x2145, 0x2145}, {0x1D400, 0x1D419}, {0x1D434, 0x1D44D}, {0x1D468, 0x1D481}, {0x1D49C, 0x1D49C},
    {0x1D49E, 0x1D49F}, {0x1D4A2, 0x1D4A2}, {0x1D4A5, 0x1D4A6}, {0x1D4A9, 0x1D4AC}, {0x1D4AE, 0x1D4B5}, {0x1D4D0, 0x1D4E9},
    {0x1D504, 0x1D505}, {0x1D507, 0x1D50A}, {0x1D50D, 0x1D514}, {0x1D516, 0x1D51C}, {0x1D538, 0x1D539}, {0x1D53B, 0x1D53E},
    {0x1D540, 0x1D544}, {0x1D546, 0x1D546}, {0x1D54A, 0x1D550}, {0x1D56C, 0x1D585}, {0x1D5A0, 0x1D5B9}, {0x1D5D4, 0x1D5ED},
    {0x1D608, 0x1D621}, {0x1D63C, 0x1D655}, {0x1D670, 0x1D689}, {0x1D6A8, 0x1D6C0}, {0x1D6E2, 0x1D6FA}, {0x1D71C, 0x1D734},
    {0x1D756, 0x1D76E}, {0x1D790, 0x1D7A8}, {0x1D7CA, 0x1D7CA}, {0x1F130, 0x1F149}, {0x1F150, 0x1F169}, {0x1F170, 0x1F189},
};
inline constexpr JRange kJLowerExtra[] = {
    {0xAA, 0xAA}, {0xBA, 0xBA}, {0xDF, 0xDF}, {0x138, 0x138}, {0x149, 0x149}, {0x18D, 0x18D},
    {0x19B, 0x19B}, {0x1AA, 0x1AB}, {0x1BA, 0x1BA}, {0x1BE, 0x1BE}, {0x1F0, 0x1F0}, {0x221, 0x221},
    {0x234, 0x239}, {0x255, 0x255}, {0x258, 0x258}, {0x25A, 0x25A}, {0x25D, 0x25F}, {0x262, 0x262},
    {0x264, 0x264}, {0x267, 0x267}, {0x26D, 0x26E}, {0x270, 0x270}, {0x273, 0x274}, {0x276, 0x27C},
    {0x27E, 0x27F}, {0x281, 0x281}, {0x284, 0x286}, {0x28D, 0x291}, {0x293, 0x293}, {0x295, 0x29C},
    {0x29F, 0x2B8}, {0x2C0, 0x2C1}, {0x2E0, 0x2E4}, {0x37A, 0x37A}, {0x390, 0x390}, {0x3B0, 0x3B0},
    {0x3FC, 0x3FC}, {0x560, 0x560}, {0x587, 0x588}, {0x10FC, 0x10FC}, {0x1D00, 0x1D78}, {0x1D7A, 0x1D7C},
    {0x1D7E, 0x1D8D}, {0x1D8F, 0x1DBF}, {0x1E96, 0x1E9A}, {0x1E9C, 0x1E9D}, {0x1E9F, 0x1E9F}, {0x1F50, 0x1F50},
    {0x1F52, 0x1F52}, {0x1F54, 0x1F54}, {0x1F56, 0x1F56}, {0x1FB2, 0x1FB2}, {0x1FB4, 0x1FB4}, {0x1FB6, 0x1FB7},
    {0x1FC2, 0x1FC2}, {0x1FC4, 0x1FC4}, {0x1FC6, 0x1FC7}, {0x1FD2, 0x1FD3}, {0x1FD6, 0x1FD7}, {0x1FE2, 0x1FE4},
    {0x1FE6, 0x1FE7}, {0x1FF2, 0x1FF2}, {0x1FF4, 0x1FF4}, {0x1FF6, 0x1FF7}, {0x2071, 0x2071}, {0x207F, 0x207F},
    {0x2090, 0x209C}, {0x210A, 0x210A}, {0x210E, 0x210F}, {0x2113, 0x2113}, {0x212F, 0x212F}, {0x2134, 0x2134},
    {0x2139, 0x2139}, {0x213C, 0x213D}, {0x2146, 0x2149}, {0x2C71, 0x2C71}, {0x2C74, 0x2C74}, {0x2C77, 0x2C7D},
    {0x2CE4, 0x2CE4}, {0xA69C, 0xA69D}, {0xA730, 0xA731}, {0xA770, 0xA778}, {0xA78E, 0xA78E}, {0xA795, 0xA795},
    {0xA7AF, 0xA7AF}, {0xA7D3, 0xA7D3}, {0xA7D5, 0xA7D5}, {0xA7F2, 0xA7F4}, {0xA7F8, 0xA7FA}, {0xAB30, 0xAB52},
    {0xAB54, 0xAB5A}, {0xAB5C, 0xAB69}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0x10780, 0x10780}, {0x10783, 0x10785},
    {0x10787, 0x107B0}, {0x107B2, 0x107BA}, {0x1D41A, 0x1D433}, {0x1D44E, 0x1D454}, {0x1D456, 0x1D467}, {0x1D482, 0x1D49B},
    {0x1D4B6, 0x1D4B9}, {0x1D4BB, 0x1D4BB}, {0x1D4BD, 0x1D4C3}, {0x1D4C5, 0x1D4CF}, {0x1D4EA, 0x1D503}, {0x1D51E, 0x1D537},
    {0x1D552, 0x1D56B}, {0x1D586, 0x1D59F}, {0x1D5BA, 0x1D5D3}, {0x1D5EE, 0x1D607}, {0x1D622, 0x1D63B}, {0x1D656, 0x1D66F},
    {0x1D68A, 0x1D6A5}, {0x1D6C2, 0x1D6DA}, {0x1D6DC, 0x1D6E1}, {0x1D6FC, 0x1D714}, {0x1D716, 0x1D71B}, {0x1D736, 0x1D74E},
    {0x1D750, 0x1D755}, {0x1D770, 0x1D788}, {0x1D78A, 0x1D78F}, {0x1D7AA, 0x1D7C2}, {0x1D7C4, 0x1D7C9}, {0x1D7CB, 0x1D7CB},
    {0x1DF00, 0x1DF09}, {0x1DF0B, 0x1DF1E}, {0x1DF25, 0x1DF2A}, {0x1E030, 0x1E06D},
};
inline constexpr JRange kJTitlecase[] = {
    {0x1C5, 0x1C5}, {0x1C8, 0x1C8}, {0x1CB, 0x1CB}, {0x1F2, 0x1F2}, {0x1F88, 0x1F8F}, {0x1F98, 0x1F9F},
    {0x1FA8, 0x1FAF}, {0x1FBC, 0x1FBC}, {0x1FCC, 0x1FCC}, {0x1FFC, 0x1FFC},
};
inline constexpr JRange kJCaseIgnorable[] = {
    {0x27, 0x27}, {0x2E, 0x2E}, {0x3A, 0x3A}, {0x5E, 0x5E}, {0x60, 0x60}, {0xA8, 0xA8},
    {0xAD, 0xAD}, {0xAF, 0xAF}, {0xB4, 0xB4}, {0xB7, 0xB8}, {0x2B0, 0x36F}, {0x374, 0x375},
    {0x37A, 0x37A}, {0x384, 0x385}, {0x387, 0x387}, {0x483, 0x489}, {0x559, 0x559}, {0x55F, 0x55F},
    {0x591, 0x5BD}, {0x5BF, 0x5BF}, {0x5C1, 0x5C2}, {0x5C4, 0x5C5}, {0x5C7, 0x5C7}, {0x5F4, 0x5F4},
    {0x600, 0x605}, {0x610, 0x61A}, {0x61C, 0x61C}, {0x640, 0x640}, {0x64B, 0x65F}, {0x670, 0x670},
    {0x6D6, 0x6DD}, {0x6DF, 0x6E8}, {0x6EA, 0x6ED}, {0x70F, 0x70F}, {0x711, 0x711}, {0x730, 0x74A},
    {0x7A6, 0x7B0}, {0x7EB, 0x7F5}, {0x7FA, 0x7FA}, {0x7FD, 0x7FD}, {0x816, 0x82D}, {0x859, 0x85B},
    {0x888, 0x888}, {0x890, 0x891}, {0x898, 0x89F}, {0x8C9, 0x902}, {0x93A, 0x93A}, {0x93C, 0x93C},
    {0x941, 0x948}, {0x94D, 0x94D}, {0x951, 0x957}, {0x962, 0x963}, {0x971, 0x971}, {0x981, 0x981},
    {0x9BC, 0x9BC}, {0x9C1, 0x9C4}, {0x9CD, 0x9CD}, {0x9E2, 0x9E3}, {0x9FE, 0x9FE}, {0xA01, 0xA02},
    {0xA3C, 0xA3C}, {0xA41, 0xA42}, {0xA47, 0xA48}, {0xA4B, 0xA4D}, {0xA51, 0xA51}, {0xA70, 0xA71},
    {0xA75, 0xA75}, {0xA81, 0xA82}, {0xABC, 0xABC}, {0xAC1, 0xAC5}, {0xAC7, 0xAC8}, {0xACD, 0xACD},
    {0xAE2, 0xAE3}, {0xAFA, 0xAFF}, {0xB01, 0xB01}, {0xB3C, 0xB3C}, {0xB3F, 0xB3F}, {0xB41, 0xB44},
    {0xB4D, 0xB4D}, {0xB55, 0xB56}, {0xB62, 0xB63}, {0xB82, 0xB82}, {0xBC0, 0xBC0}, {0xBCD, 0xBCD},
    {0xC00, 0xC00}, {0xC04, 0xC04}, {0xC3C, 0xC3C}, {0xC3E, 0xC40}, {0xC46, 0xC48}, {0xC4A, 0xC4D},
    {0xC55, 0xC56}, {0xC62, 0xC63}, {0xC81, 0xC81}, {0xCBC, 0xCBC}, {0xCBF, 0xCBF}, {0xCC6, 0xCC6},
    {0xCCC, 0xCCD}, {0xCE2, 0xCE3}, {0xD00, 0xD01}, {0xD3B, 0xD3C}, {0xD41, 0xD44}, {0xD4D, 0xD4D},
    {0xD62, 0xD63}, {0xD81, 0xD81}, {0xDCA, 0xDCA}, {0xDD2, 0xDD4}, {0xDD6, 0xDD6}, {0xE31, 0xE31},
    {0xE34, 0xE3A}, {0xE46, 0xE4E}, {0xEB1, 0xEB1}, {0xEB4, 0xEBC}, {0xEC6, 0xEC6}, {0xEC8, 0xECE},
    {0xF18, 0xF19}, {0xF35, 0xF35}, {0xF37, 0xF37}, {0xF39, 0xF39}, {0xF71, 0xF7E}, {0xF80, 0xF84},
    {0xF86, 0xF87}, {0xF8D, 0xF97}, {0xF99, 0xFBC}, {0xFC6, 0xFC6}, {0x102D, 0x1030}, {0x1032, 0x1037},
    {0x1039, 0x103A}, {0x103D, 0x103E}, {0x1058, 0x1059}, {0x105E, 0x1060}, {0x1071, 0x1074}, {0x1082, 0x1082},
    {0x1085, 0x1086}, {0x108D, 0x108D}, {0x109D, 0x109D}, {0x10FC, 0x10FC}, {0x135D, 0x135F}, {0x1712, 0x1714},
    {0x1732, 0x1733}, {0x1752, 0x1753}, {0x1772, 0x1773}, {0x17B4, 0x17B5}, {0x17B7, 0x17BD}, {0x17C6, 0x17C6},
    {0x17C9, 0x17D3}, {0x17D7, 0x17D7}, {0x17DD, 0x17DD}, {0x180B, 0x180F}, {0x1843, 0x1843}, {0x1885, 0x1886},
    {0x18A9, 0x18A9}, {0x1920, 0x1922}, {0x1927, 0x1928}, {0x1932, 0x1932}, {0x1939, 0x193B}, {0x1A17, 0x1A18},
    {0x1A1B, 0x1A1B}, {0x1A56, 0x1A56}, {0x1A58, 0x1A5E}, {0x1A60, 0x1A60}, {0x1A62, 0x1A62}, {0x1A65, 0x1A6C},
    {0x1A73, 0x1A7C}, {0x1A7F, 0x1A7F}, {0x1AA7, 0x1AA7}, {0x1AB0, 0x1ACE}, {0x1B00, 0x1B03}, {0x1B34, 0x1B34},
    {0x1B36, 0x1B3A}, {0x1B3C, 0x1B3C}, {0x1B42, 0x1B42}, {0x1B6B, 0x1B73}, {0x1B80, 0x1B81}, {0x1BA2, 0x1BA5},
    {0x1BA8, 0x1BA9}, {0x1BAB, 0x1BAD}, {0x1BE6, 0x1BE6}, {0x1BE8, 0x1BE9}, {0x1BED, 0x1BED}, {0x1BEF, 0x1BF1},
    {0x1C2C, 0x1C33}, {0x1C36, 0x1C37}, {0x1C78, 0x1C7D}, {0x1CD0, 0x1CD2}, {0x1CD4, 0x1CE0}, {0x1CE2, 0x1CE8},
    {0x1CED, 0x1CED}, {0x1CF4, 0x1CF4}, {0x1CF8, 0x1CF9}, {0x1D2C, 0x1D6A}, {0x1D78, 0x1D78}, {0x1D9B, 0x1DFF},
    {0x1FBD, 0x1FBD}, {0x1FBF, 0x1FC1}, {0x1FCD, 0x1FCF}, {0x1FDD, 0x1FDF}, {0x1FED, 0x1FEF}, {0x1FFD, 0x1FFE},
    {0x200B, 0x200F}, {0x2018, 0x2019}, {0x2024, 0x2024}, {0x2027, 0x2027}, {0x202A, 0x202E}, {0x2060, 0x2064},
    {0x2066, 0x206F}, {0x2071, 0x2071}, {0x207F, 0x207F}, {0x2090, 0x209C}, {0x20D0, 0x20F0}, {0x2C7C, 0x2C7D},
    {0x2CEF, 0x2CF1}, {0x2D6F, 0x2D6F}, {0x2D7F, 0x2D7F}, {0x2DE0, 0x2DFF}, {0x2E2F, 0x2E2F}, {0x3005, 0x3005},
    {0x302A, 0x302D}, {0x3031, 0x3035}, {0x303B, 0x303B}, {0x3099, 0x309E}, {0x30FC, 0x30FE}, {0xA015, 0xA015},
    {0xA4F8, 0xA4FD}, {0xA60C, 0xA60C}, {0xA66F, 0xA672}, {0xA674, 0xA67D}, {0xA67F, 0xA67F}, {0xA69C, 0xA69F},
    {0xA6F0, 0xA6F1}, {0xA700, 0xA721}, {0xA770, 0xA770}, {0xA788, 0xA78A}, {0xA7F2, 0xA7F4}, {0xA7F8, 0xA7F9},
    {0xA802, 0xA802}, {0xA806, 0xA806}, {0xA80B, 0xA80B}, {0xA825, 0xA826}, {0xA82C, 0xA82C}, {0xA8C4, 0xA8C5},
    {0xA8E0, 0xA8F1}, {0xA8FF, 0xA8FF}, {0xA926, 0xA92D}, {0xA947, 0xA951}, {0xA980, 0xA982}, {0xA9B3, 0xA9B3},
    {0xA9B6, 0xA9B9}, {0xA9BC, 0xA9BD}, {0xA9CF, 0xA9CF}, {0xA9E5, 0xA9E6}, {0xAA29, 0xAA2E}, {0xAA31, 0xAA32},
    {0xAA35, 0xAA36}, {0xAA43, 0xAA43}, {0xAA4C, 0xAA4C}, {0xAA70, 0xAA70}, {0xAA7C, 0xAA7C}, {0xAAB0, 0xAAB0},
    {0xAAB2, 0xAAB4}, {0xAAB7, 0xAAB8}, {0xAABE, 0xAABF}, {0xAAC1, 0xAAC1}, {0xAADD, 0xAADD}, {0xAAEC, 0xAAED},
    {0xAAF3, 0xAAF4}, {0xAAF6, 0xAAF6}, {0xAB5B, 0xAB5F}, {0xAB69, 0xAB6B}, {0xABE5, 0xABE5}, {0xABE8, 0xABE8},
    {0xABED, 0xABED}, {0xFB1E, 0xFB1E}, {0xFBB2, 0xFBC2}, {0xFE00, 0xFE0F}, {0xFE13, 0xFE13}, {0xFE20, 0xFE2F},
    {0xFE52, 0xFE52}, {0xFE55, 0xFE55}, {0xFEFF, 0xFEFF}, {0xFF07, 0xFF07}, {0xFF0E, 0xFF0E}, {0xFF1A, 0xFF1A},
    {0xFF3E, 0xFF3E}, {0xFF40, 0xFF40}, {0xFF70, 0xFF70}, {0xFF9E, 0xFF9F}, {0xFFE3, 0xFFE3}, {0xFFF9, 0xFFFB},
    {0x101FD, 0x101FD}, {0x102E0, 0x102E0}, {0x10376, 0x1037A}, {0x10780, 0x10785}, {0x10787, 0x107B0}, {0x107B2, 0x107BA},
    {0x10A01, 0x10A03}, {0x10A05, 0x10A06}, {0x10A0C, 0x10A0F}, {0x10A38, 0x10A3A}, {0x10A3F, 0x10A3F}, {0x10AE5, 0x10AE6},
    {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50}, {0x10F82, 0x10F85}, {0x11001, 0x11001},
    {0x11038, 0x11046}, {0x11070, 0x11070}, {0x11073, 0x11074}, {0x1107F, 0x11081}, {0x110B3, 0x110B6}, {0x110B9, 0x110BA},
    {0x110BD, 0x110BD}, {0x110C2, 0x110C2}, {0x110CD, 0x110CD}, {0x11100, 0x11102}, {0x11127, 0x1112B}, {0x1112D, 0x11134},
    {0x11173, 0x11173}, {0x11180, 0x11181}, {0x111B6, 0x111BE}, {0x111C9, 0x111CC}, {0x111CF, 0x111CF}, {0x1122F, 0x11231},
    {0x11234, 0x11234}, {0x11236, 0x11237}, {0x1123E, 0x1123E}, {0x11241, 0x11241}, {0x112DF, 0x112DF}, {0x112E3, 0x112EA},
    {0x11300, 0x11301}, {0x1133B, 0x1133C}, {0x11340, 0x11340}, {0x11366, 0x1136C}, {0x11370, 0x11374}, {0x11438, 0x1143F},
    {0x11442, 0x11444}, {0x11446, 0x11446}, {0x1145E, 0x1145E}, {0x114B3, 0x114B8}, {0x114BA, 0x114BA}, {0x114BF, 0x114C0},
    {0x114C2, 0x114C3}, {0x115B2, 0x115B5}, {0x115BC, 0x115BD}, {0x115BF, 0x115C0}, {0x115DC, 0x115DD}, {0x11633, 0x1163A},
    {0x1163D, 0x1163D}, {0x1163F, 0x11640}, {0x116AB, 0x116AB}, {0x116AD, 0x116AD}, {0x116B0, 0x116B5}, {0x116B7, 0x116B7},
    {0x1171D, 0x1171F}, {0x11722, 0x11725}, {0x11727, 0x1172B}, {0x1182F, 0x11837}, {0x11839, 0x1183A}, {0x1193B, 0x1193C},
    {0x1193E, 0x1193E}, {0x11943, 0x11943}, {0x119D4, 0x119D7}, {0x119DA, 0x119DB}, {0x119E0, 0x119E0}, {0x11A01, 0x11A0A},
    {0x11A33, 0x11A38}, {0x11A3B, 0x11A3E}, {0x11A47, 0x11A47}, {0x11A51, 0x11A56}, {0x11A59, 0x11A5B}, {0x11A8A, 0x11A96},
    {0x11A98, 0x11A99}, {0x11C30, 0x11C36}, {0x11C38, 0x11C3D}, {0x11C3F, 0x11C3F}, {0x11C92, 0x11CA7}, {0x11CAA, 0x11CB0},
    {0x11CB2, 0x11CB3}, {0x11CB5, 0x11CB6}, {0x11D31, 0x11D36}, {0x11D3A, 0x11D3A}, {0x11D3C, 0x11D3D}, {0x11D3F, 0x11D45},
    {0x11D47, 0x11D47}, {0x11D90, 0x11D91}, {0x11D95, 0x11D95}, {0x11D97, 0x11D97}, {0x11EF3, 0x11EF4}, {0x11F00, 0x11F01},
    {0x11F36, 0x11F3A}, {0x11F40, 0x11F40}, {0x11F42, 0x11F42}, {0x13430, 0x13440}, {0x13447, 0x13455}, {0x16AF0, 0x16AF4},
    {0x16B30, 0x16B36}, {0x16B40, 0x16B43}, {0x16F4F, 0x16F4F}, {0x16F8F, 0x16F9F}, {0x16FE0, 0x16FE1}, {0x16FE3, 0x16FE4},
    {0x1AFF0, 0x1AFF3}, {0x1AFF5, 0x1AFFB}, {0x1AFFD, 0x1AFFE}, {0x1BC9D, 0x1BC9E}, {0x1BCA0, 0x1BCA3}, {0x1CF00, 0x1CF2D},
    {0x1CF30, 0x1CF46}, {0x1D167, 0x1D169}, {0x1D173, 0x1D182}, {0x1D185, 0x1D18B}, {0x1D1AA, 0x1D1AD}, {0x1D242, 0x1D244},
    {0x1DA00, 0x1DA36}, {0x1DA3B, 0x1DA6C}, {0x1DA75, 0x1DA75}, {0x1DA84, 0x1DA84}, {0x1DA9B, 0x1DA9F}, {0x1DAA1, 0x1DAAF},
    {0x1E000, 0x1E006}, {0x1E008, 0x1E018}, {0x1E01B, 0x1E021}, {0x1E023, 0x1E024}, {0x1E026, 0x1E02A}, {0x1E030, 0x1E06D},
    {0x1E08F, 0x1E08F}, {0x1E130, 0x1E13D}, {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4EB, 0x1E4EF}, {0x1E8D0, 0x1E8D6},
    {0x1E944, 0x1E94B}, {0x1F3FB, 0x1F3FF}, {0xE0001, 0xE0001}, {0xE0020, 0xE007F}, {0xE0100, 0xE01EF},
};
inline constexpr JRange kJNonPrintable[] = {
    {0x0, 0x1F}, {0x7F, 0xA0}, {0xAD, 0xAD}, {0x378, 0x379}, {0x380, 0x383}, {0x38B, 0x38B},
    {0x38D, 0x38D}, {0x3A2, 0x3A2}, {0x530, 0x530}, {0x557, 0x558}, {0x58B, 0x58C}, {0x590, 0x590},
    {0x5C8, 0x5CF}, {0x5EB, 0x5EE}, {0x5F5, 0x605}, {0x61C, 0x61C}, {0x6DD, 0x6DD}, {0x70E, 0x70F},
    {0x74B, 0x74C}, {0x7B2, 0x7BF}, {0x7FB, 0x7FC}, {0x82E, 0x82F}, {0x83F, 0x83F}, {0x85C, 0x85D},
    {0x85F, 0x85F}, {0x86B, 0x86F}, {0x88F, 0x897}, {0x8E2, 0x8E2}, {0x984, 0x984}, {0x98D, 0x98E},
    {0x991, 0x992}, {0x9A9, 0x9A9}, {0x9B1, 0x9B1}, {0x9B3, 0x9B5}, {0x9BA, 0x9BB}, {0x9C5, 0x9C6},
    {0x9C9, 0x9CA}, {0x9CF, 0x9D6}, {0x9D8, 0x9DB}, {0x9DE, 0x9DE}, {0x9E4, 0x9E5}, {0x9FF, 0xA00},
    {0xA04, 0xA04}, {0xA0B, 0xA0E}, {0xA11, 0xA12}, {0xA29, 0xA29}, {0xA31, 0xA31}, {0xA34, 0xA34},
    {0xA37, 0xA37}, {0xA3A, 0xA3B}, {0xA3D, 0xA3D}, {0xA43, 0xA46}, {0xA49, 0xA4A}, {0xA4E, 0xA50},
    {0xA52, 0xA58}, {0xA5D, 0xA5D}, {0xA5F, 0xA65}, {0xA77, 0xA80}, {0xA84, 0xA84}, {0xA8E, 0xA8E},
    {0xA92, 0xA92}, {0xAA9, 0xAA9}, {0xAB1, 0xAB1}, {0xAB4, 0xAB4}, {0xABA, 0xABB}, {0xAC6, 0xAC6},
    {0xACA, 0xACA}, {0xACE, 0xACF}, {0xAD1, 0xADF}, {0xAE4, 0xAE5}, {0xAF2, 0xAF8}, {0xB00, 0xB00},
    {0xB04, 0xB04}, {0xB0D, 0xB0E}, {0xB11, 0xB12}, {0xB29, 0xB29}, {0xB31, 0xB31}, {0xB34, 0xB34},
    {0xB3A, 0xB3B}, {0xB45, 0xB46}, {0xB49, 0xB4A}, {0xB4E, 0xB54}, {0xB58, 0xB5B}, {0xB5E, 0xB5E},
    {0xB64, 0xB65}, {0xB78, 0xB81}, {0xB84, 0xB84}, {0xB8B, 0xB8D}, {0xB91, 0xB91}, {0xB96, 0xB98},
    {0xB9B, 0xB9B}, {0xB9D, 0xB9D}, {0xBA0, 0xBA2}, {0xBA5, 0xBA7}, {0xBAB, 0xBAD}, {0xBBA, 0xBBD},
    {0xBC3, 0xBC5}, {0xBC9, 0xBC9}, {0xBCE, 0xBCF}, {0xBD1, 0xBD6}, {0xBD8, 0xBE5}, {0xBFB, 0xBFF},
    {0xC0D, 0xC0D}, {0xC11, 0xC11}, {0xC29, 0xC29}, {0xC3A, 0xC3B}, {0xC45, 0xC45}, {0xC49, 0xC49},
    {0xC4E, 0xC54}, {0xC57, 0xC57}, {0xC5B, 0xC5C}, {0xC5E, 0xC5F}, {0xC64, 0xC65}, {0xC70, 0xC76},
    {0xC8D, 0xC8D}, {0xC91, 0xC91}, {0xCA9, 0xCA9}, {0xCB4, 0xCB4}, {0xCBA, 0xCBB}, {0xCC5, 0xCC5},
    {0xCC9, 0xCC9}, {0xCCE, 0xCD4}, {0xCD7, 0xCDC}, {0xCDF, 0xCDF}, {0xCE4, 0xCE5}, {0xCF0, 0xCF0},
    {0xCF4, 0xCFF}, {0xD0D, 0xD0D}, {0xD11, 0xD11}, {0xD45, 0xD45}, {0xD49, 0xD49}, {0xD50, 0xD53},
    {0xD64, 0xD65}, {0xD80, 0xD80}, {0xD84, 0xD84}, {0xD97, 0xD99}, {0xDB2, 0xDB2}, {0xDBC, 0xDBC},
    {0xDBE, 0xDBF}, {0xDC7, 0xDC9}, {0xDCB, 0xDCE}, {0xDD5, 0xDD5}, {0xDD7, 0xDD7}, {0xDE0, 0xDE5},
    {0xDF0, 0xDF1}, {0xDF5, 0xE00}, {0xE3B, 0xE3E}, {0xE5C, 0xE80}, {0xE83, 0xE83}, {0xE85, 0xE85},
    {0xE8B, 0xE8B}, {0xEA4, 0xEA4}, {0xEA6, 0xEA6}, {0xEBE, 0xEBF}, {0xEC5, 0xEC5}, {0xEC7, 0xEC7},
    {0xECF, 0xECF}, {0xEDA, 0xEDB}, {0xEE0, 0xEFF}, {0xF48, 0xF48}, {0xF6D, 0xF70}, {0xF98, 0xF98},
    {0xFBD, 0xFBD}, {0xFCD, 0xFCD}, {0xFDB, 0xFFF}, {0x10C6, 0x10C6}, {0x10C8, 0x10CC}, {0x10CE, 0x10CF},
    {0x1249, 0x1249}, {0x124E, 0x124F}, {0x1257, 0x1257}, {0x1259, 0x1259}, {0x125E, 0x125F}, {0x1289, 0x1289},
    {0x128E, 0x128F}, {0x12B1, 0x12B1}, {0x12B6, 0x12B7}, {0x12BF, 0x12BF}, {0x12C1, 0x12C1}, {0x12C6, 0x12C7},
    {0x12D7, 0x12D7}, {0x1311, 0x1311}, {0x1316, 0x1317}, {0x135B, 0x135C}, {0x137D, 0x137F}, {0x139A, 0x139F},
    {0x13F6, 0x13F7}, {0x13FE, 0x13FF}, {0x1680, 0x1680}, {0x169D, 0x169F}, {0x16F9, 0x16FF}, {0x1716, 0x171E},
    {0x1737, 0x173F}, {0x1754, 0x175F}, {0x176D, 0x176D}, {0x1771, 0x1771}, {0x1774, 0x177F}, {0x17DE, 0x17DF},
    {0x17EA, 0x17EF}, {0x17FA, 0x17FF}, {0x180E, 0x180E}, {0x181A, 0x181F}, {0x1879, 0x187F}, {0x18AB, 0x18AF},
    {0x18F6, 0x18FF}, {0x191F, 0x191F}, {0x192C, 0x192F}, {0x193C, 0x193F}, {0x1941, 0x1943}, {0x196E, 0x196F},
    {0x1975, 0x197F}, {0x19AC, 0x19AF}, {0x19CA, 0x19CF}, {0x19DB, 0x19DD}, {0x1A1C, 0x1A1D}, {0x1A5F, 0x1A5F},
    {0x1A7D, 0x1A7E}, {0x1A8A, 0x1A8F}, {0x1A9A, 0x1A9F}, {0x1AAE, 0x1AAF}, {0x1ACF, 0x1AFF}, {0x1B4D, 0x1B4F},
    {0x1B7F, 0x1B7F}, {0x1BF4, 0x1BFB}, {0x1C38, 0x1C3A}, {0x1C4A, 0x1C4C}, {0x1C89, 0x1C8F}, {0x1CBB, 0x1CBC},
    {0x1CC8, 0x1CCF}, {0x1CFB, 0x1CFF}, {0x1F16, 0x1F17}, {0x1F1E, 0x1F1F}, {0x1F46, 0x1F47}, {0x1F4E, 0x1F4F},
    {0x1F58, 0x1F58}, {0x1F5A, 0x1F5A}, {0x1F5C, 0x1F5C}, {0x1F5E, 0x1F5E}, {0x1F7E, 0x1F7F}, {0x1FB5, 0x1FB5},
    {0x1FC5, 0x1FC5}, {0x1FD4, 0x1FD5}, {0x1FDC, 0x1FDC}, {0x1FF0, 0x1FF1}, {0x1FF5, 0x1FF5}, {0x1FFF, 0x200F},
    {0x2028, 0x202F}, {0x205F, 0x206F}, {0x2072, 0x2073}, {0x208F, 0x208F}, {0x209D, 0x209F}, {0x20C1, 0x20CF},
    {0x20F1, 0x20FF}, {0x218C, 0x218F}, {0x2427, 0x243F}, {0x244B, 0x245F}, {0x2B74, 0x2B75}, {0x2B96, 0x2B96},
    {0x2CF4, 0x2CF8}, {0x2D26, 0x2D26}, {0x2D28, 0x2D2C}, {0x2D2E, 0x2D2F}, {0x2D68, 0x2D6E}, {0x2D71, 0x2D7E},
    {0x2D97, 0x2D9F}, {0x2DA7, 0x2DA7}, {0x2DAF, 0x2DAF}, {0x2DB7, 0x2DB7}, {0x2DBF, 0x2DBF}, {0x2DC7, 0x2DC7},
    {0x2DCF, 0x2DCF}, {0x2DD7, 0x2DD7}, {0x2DDF, 0x2DDF}, {0x2E5E, 0x2E7F}, {0x2E9A, 0x2E9A}, {0x2EF4, 0x2EFF},
    {0x2FD6, 0x2FEF}, {0x2FFC, 0x3000}, {0x3040, 0x3040}, {0x3097, 0x3098}, {0x3100, 0x3104}, {0x3130, 0x3130},
    {0x318F, 0x318F}, {0x31E4, 0x31EF}, {0x321F, 0x321F}, {0xA48D, 0xA48F}, {0xA4C7, 0xA4CF}, {0xA62C, 0xA63F},
    {0xA6F8, 0xA6FF}, {0xA7CB, 0xA7CF}, {0xA7D2, 0xA7D2}, {0xA7D4, 0xA7D4}, {0xA7DA, 0xA7F1}, {0xA82D, 0xA82F},
    {0xA83A, 0xA83F}, {0xA878, 0xA87F}, {0xA8C6, 0xA8CD}, {0xA8DA, 0xA8DF}, {0xA954, 0xA95E}, {0xA97D, 0xA97F},
    {0xA9CE, 0xA9CE}, {0xA9DA, 0xA9DD}, {0xA9FF, 0xA9FF}, {0xAA37, 0xAA3F}, {0xAA4E, 0xAA4F}, {0xAA5A, 0xAA5B},
    {0xAAC3, 0xAADA}, {0xAAF7, 0xAB00}, {0xAB07, 0xAB08}, {0xAB0F, 0xAB10}, {0xAB17, 0xAB1F}, {0xAB27, 0xAB27},
    {0xAB2F, 0xAB2F}, {0xAB6C, 0xAB6F}, {0xABEE, 0xABEF}, {0xABFA, 0xABFF}, {0xD7A4, 0xD7AF}, {0xD7C7, 0xD7CA},
    {0xD7FC, 0xF8FF}, {0xFA6E, 0xFA6F}, {0xFADA, 0xFAFF}, {0xFB07, 0xFB12}, {0xFB18, 0xFB1C}, {0xFB37, 0xFB37},
    {0xFB3D, 0xFB3D}, {0xFB3F, 0xFB3F}, {0xFB42, 0xFB42}, {0xFB45, 0xFB45}, {0xFBC3, 0xFBD2}, {0xFD90, 0xFD91},
    {0xFDC8, 0xFDCE}, {0xFDD0, 0xFDEF}, {0xFE1A, 0xFE1F}, {0xFE53, 0xFE53}, {0xFE67, 0xFE67}, {0xFE6C, 0xFE6F},
    {0xFE75, 0xFE75}, {0xFEFD, 0xFF00}, {0xFFBF, 0xFFC1}, {0xFFC8, 0xFFC9}, {0xFFD0, 0xFFD1}, {0xFFD8, 0xFFD9},
    {0xFFDD, 0xFFDF}, {0xFFE7, 0xFFE7}, {0xFFEF, 0xFFFB}, {0xFFFE, 0xFFFF}, {0x1000C, 0x1000C}, {0x10027, 0x10027},
    {0x1003B, 0x1003B}, {0x1003E, 0x1003E}, {0x1004E, 0x1004F}, {0x1005E, 0x1007F}, {0x100FB, 0x100FF}, {0x10103, 0x10106},
    {0x10134, 0x10136}, {0x1018F, 0x1018F}, {0x1019D, 0x1019F}, {0x101A1, 0x101CF}, {0x101FE, 0x1027F}, {0x1029D, 0x1029F},
    {0x102D1, 0x102DF}, {0x102FC, 0x102FF}, {0x10324, 0x1032C}, {0x1034B, 0x1034F}, {0x1037B, 0x1037F}, {0x1039E, 0x1039E},
    {0x103C4, 0x103C7}, {0x103D6, 0x103FF}, {0x1049E, 0x1049F}, {0x104AA, 0x104AF}, {0x104D4, 0x104D7}, {0x104FC, 0x104FF},
    {0x10528, 0x1052F}, {0x10564, 0x1056E}, {0x1057B, 0x1057B}, {0x1058B, 0x1058B}, {0x10593, 0x10593}, {0x10596, 0x10596},
    {0x105A2, 0x105A2}, {0x105B2, 0x105B2}, {0x105BA, 0x105BA}, {0x105BD, 0x105FF}, {0x10737, 0x1073F}, {0x10756, 0x1075F},
    {0x10768, 0x1077F}, {0x10786, 0x10786}, {0x107B1, 0x107B1}, {0x107BB, 0x107FF}, {0x10806, 0x10807}, {0x10809, 0x10809},
    {0x10836, 0x10836}, {0x10839, 0x1083B}, {0x1083D, 0x1083E}, {0x10856, 0x10856}, {0x1089F, 0x108A6}, {0x108B0, 0x108DF},
    {0x108F3, 0x108F3}, {0x108F6, 0x108FA}, {0x1091C, 0x1091E}, {0x1093A, 0x1093E}, {0x10940, 0x1097F}, {0x109B8, 0x109BB},
    {0x109D0, 0x109D1}, {0x10A04, 0x10A04}, {0x10A07, 0x10A0B}, {0x10A14, 0x10A14}, {0x10A18, 0x10A18}, {0x10A36, 0x10A37},
    {0x10A3B, 0x10A3E}, {0x10A49, 0x10A4F}, {0x10A59, 0x10A5F}, {0x10AA0, 0x10ABF}, {0x10AE7, 0x10AEA}, {0x10AF7, 0x10AFF},
    {0x10B36, 0x10B38}, {0x10B56, 0x10B57}, {0x10B73, 0x10B77}, {0x10B92, 0x10B98}, {0x10B9D, 0x10BA8}, {0x10BB0, 0x10BFF},
    {0x10C49, 0x10C7F}, {0x10CB3, 0x10CBF}, {0x10CF3, 0x10CF9}, {0x10D28, 0x10D2F}, {0x10D3A, 0x10E5F}, {0x10E7F, 0x10E7F},
    {0x10EAA, 0x10EAA}, {0x10EAE, 0x10EAF}, {0x10EB2, 0x10EFC}, {0x10F28, 0x10F2F}, {0x10F5A, 0x10F6F}, {0x10F8A, 0x10FAF},
    {0x10FCC, 0x10FDF}, {0x10FF7, 0x10FFF}, {0x1104E, 0x11051}, {0x11076, 0x1107E}, {0x110BD, 0x110BD}, {0x110C3, 0x110CF},
    {0x110E9, 0x110EF}, {0x110FA, 0x110FF}, {0x11135, 0x11135}, {0x11148, 0x1114F}, {0x11177, 0x1117F}, {0x111E0, 0x111E0},
    {0x111F5, 0x111FF}, {0x11212, 0x11212}, {0x11242, 0x1127F}, {0x11287, 0x11287}, {0x11289, 0x11289}, {0x1128E, 0x1128E},
    {0x1129E, 0x1129E}, {0x112AA, 0x112AF}, {0x112EB, 0x112EF}, {0x112FA, 0x112FF}, {0x11304, 0x11304}, {0x1130D, 0x1130E},
    {0x11311, 0x11312}, {0x11329, 0x11329}, {0x11331, 0x11331}, {0x11334, 0x11334}, {0x1133A, 0x1133A}, {0x11345, 0x11346},
    {0x11349, 0x1134A}, {0x1134E, 0x1134F}, {0x11351, 0x11356}, {0x11358, 0x1135C}, {0x11364, 0x11365}, {0x1136D, 0x1136F},
    {0x11375, 0x113FF}, {0x1145C, 0x1145C}, {0x11462, 0x1147F}, {0x114C8, 0x114CF}, {0x114DA, 0x1157F}, {0x115B6, 0x115B7},
    {0x115DE, 0x115FF}, {0x11645, 0x1164F}, {0x1165A, 0x1165F}, {0x1166D, 0x1167F}, {0x116BA, 0x116BF}, {0x116CA, 0x116FF},
    {0x1171B, 0x1171C}, {0x1172C, 0x1172F}, {0x11747, 0x117FF}, {0x1183C, 0x1189F}, {0x118F3, 0x118FE}, {0x11907, 0x11908},
    {0x1190A, 0x1190B}, {0x11914, 0x11914}, {0x11917, 0x11917}, {0x11936, 0x11936}, {0x11939, 0x1193A}, {0x11947, 0x1194F},
    {0x1195A, 0x1199F}, {0x119A8, 0x119A9}, {0x119D8, 0x119D9}, {0x119E5, 0x119FF}, {0x11A48, 0x11A4F}, {0x11AA3, 0x11AAF},
    {0x11AF9, 0x11AFF}, {0x11B0A, 0x11BFF}, {0x11C09, 0x11C09}, {0x11C37, 0x11C37}, {0x11C46, 0x11C4F}, {0x11C6D, 0x11C6F},
    {0x11C90, 0x11C91}, {0x11CA8, 0x11CA8}, {0x11CB7, 0x11CFF}, {0x11D07, 0x11D07}, {0x11D0A, 0x11D0A}, {0x11D37, 0x11D39},
    {0x11D3B, 0x11D3B}, {0x11D3E, 0x11D3E}, {0x11D48, 0x11D4F}, {0x11D5A, 0x11D5F}, {0x11D66, 0x11D66}, {0x11D69, 0x11D69},
    {0x11D8F, 0x11D8F}, {0x11D92, 0x11D92}, {0x11D99, 0x11D9F}, {0x11DAA, 0x11EDF}, {0x11EF9, 0x11EFF}, {0x11F11, 0x11F11},
    {0x11F3B, 0x11F3D}, {0x11F5A, 0x11FAF}, {0x11FB1, 0x11FBF}, {0x11FF2, 0x11FFE}, {0x1239A, 0x123FF}, {0x1246F, 0x1246F},
    {0x12475, 0x1247F}, {0x12544, 0x12F8F}, {0x12FF3, 0x12FFF}, {0x13430, 0x1343F}, {0x13456, 0x143FF}, {0x14647, 0x167FF},
    {0x16A39, 0x16A3F}, {0x16A5F, 0x16A5F}, {0x16A6A, 0x16A6D}, {0x16ABF, 0x16ABF}, {0x16ACA, 0x16ACF}, {0x16AEE, 0x16AEF},
    {0x16AF6, 0x16AFF}, {0x16B46, 0x16B4F}, {0x16B5A, 0x16B5A}, {0x16B62, 0x16B62}, {0x16B78, 0x16B7C}, {0x16B90, 0x16E3F},
    {0x16E9B, 0x16EFF}, {0x16F4B, 0x16F4E}, {0x16F88, 0x16F8E}, {0x16FA0, 0x16FDF}, {0x16FE5, 0x16FEF}, {0x16FF2, 0x16FFF},
    {0x187F8, 0x187FF}, {0x18CD6, 0x18CFF}, {0x18D09, 0x1AFEF}, {0x1AFF4, 0x1AFF4}, {0x1AFFC, 0x1AFFC}, {0x1AFFF, 0x1AFFF},
    {0x1B123, 0x1B131}, {0x1B133, 0x1B14F}, {0x1B153, 0x1B154}, {0x1B156, 0x1B163}, {0x1B168, 0x1B16F}, {0x1B2FC, 0x1BBFF},
    {0x1BC6B, 0x1BC6F}, {0x1BC7D, 0x1BC7F}, {0x1BC89, 0x1BC8F}, {0x1BC9A, 0x1BC9B}, {0x1BCA0, 0x1CEFF}, {0x1CF2E, 0x1CF2F},
    {0x1CF47, 0x1CF4F}, {0x1CFC4, 0x1CFFF}, {0x1D0F6, 0x1D0FF}, {0x1D127, 0x1D128}, {0x1D173, 0x1D17A}, {0x1D1EB, 0x1D1FF},
    {0x1D246, 0x1D2BF}, {0x1D2D4, 0x1D2DF}, {0x1D2F4, 0x1D2FF}, {0x1D357, 0x1D35F}, {0x1D379, 0x1D3FF}, {0x1D455, 0x1D455},
    {0x1D49D, 0x1D49D}, {0x1D4A0, 0x1D4A1}, {0x1D4A3, 0x1D4A4}, {0x1D4A7, 0x1D4A8}, {0x1D4AD, 0x1D4AD}, {0x1D4BA, 0x1D4BA},
    {0x1D4BC, 0x1D4BC}, {0x1D4C4, 0x1D4C4}, {0x1D506, 0x1D506}, {0x1D50B, 0x1D50C}, {0x1D515, 0x1D515}, {0x1D51D, 0x1D51D},
    {0x1D53A, 0x1D53A}, {0x1D53F, 0x1D53F}, {0x1D545, 0x1D545}, {0x1D547, 0x1D549}, {0x1D551, 0x1D551}, {0x1D6A6, 0x1D6A7},
    {0x1D7CC, 0x1D7CD}, {0x1DA8C, 0x1DA9A}, {0x1DAA0, 0x1DAA0}, {0x1DAB0, 0x1DEFF}, {0x1DF1F, 0x1DF24}, {0x1DF2B, 0x1DFFF},
    {0x1E007, 0x1E007}, {0x1E019, 0x1E01A}, {0x1E022, 0x1E022}, {0x1E025, 0x1E025}, {0x1E02B, 0x1E02F}, {0x1E06E, 0x1E08E},
    {0x1E090, 0x1E0FF}, {0x1E12D, 0x1E12F}, {0x1E13E, 0x1E13F}, {0x1E14A, 0x1E14D}, {0x1E150, 0x1E28F}, {0x1E2AF, 0x1E2BF},
    {0x1E2FA, 0x1E2FE}, {0x1E300, 0x1E4CF}, {0x1E4FA, 0x1E7DF}, {0x1E7E7, 0x1E7E7}, {0x1E7EC, 0x1E7EC}, {0x1E7EF, 0x1E7EF},
    {0x1E7FF, 0x1E7FF}, {0x1E8C5, 0x1E8C6}, {0x1E8D7, 0x1E8FF}, {0x1E94C, 0x1E94F}, {0x1E95A, 0x1E95D}, {0x1E960, 0x1EC70},
    {0x1ECB5, 0x1ED00}, {0x1ED3E, 0x1EDFF}, {0x1EE04, 0x1EE04}, {0x1EE20, 0x1EE20}, {0x1EE23, 0x1EE23}, {0x1EE25, 0x1EE26},
    {0x1EE28, 0x1EE28}, {0x1EE33, 0x1EE33}, {0x1EE38, 0x1EE38}, {0x1EE3A, 0x1EE3A}, {0x1EE3C, 0x1EE41}, {0x1EE43, 0x1EE46},
    {0x1EE48, 0x1EE48}, {0x1EE4A, 0x1EE4A}, {0x1EE4C, 0x1EE4C}, {0x1EE50, 0x1EE50}, {0x1EE53, 0x1EE53}, {0x1EE55, 0x1EE56},
    {0x1EE58, 0x1EE58}, {0x1EE5A, 0x1EE5A}, {0x1EE5C, 0x1EE5C}, {0x1EE5E, 0x1EE5E}, {0x1EE60, 0x1EE60}, {0x1EE63, 0x1EE63},
    {0x1EE65, 0x1EE66}, {0x1EE6B, 0x1EE6B}, {0x1EE73, 0x1EE73}, {0x1EE78, 0x1EE78}, {0x1EE7D, 0x1EE7D}, {0x1EE7F, 0x1EE7F},
    {0x1EE8A, 0x1EE8A}, {0x1EE9C, 0x1EEA0}, {0x1EEA4, 0x1EEA4}, {0x1EEAA, 0x1EEAA}, {0x1EEBC, 0x1EEEF}, {0x1EEF2, 0x1EFFF},
    {0x1F02C, 0x1F02F}, {0x1F094, 0x1F09F}, {0x1F0AF, 0x1F0B0}, {0x1F0C0, 0x1F0C0}, {0x1F0D0, 0x1F0D0}, {0x1F0F6, 0x1F0FF},
    {0x1F1AE, 0x1F1E5}, {0x1F203, 0x1F20F}, {0x1F23C, 0x1F23F}, {0x1F249, 0x1F24F}, {0x1F252, 0x1F25F}, {0x1F266, 0x1F2FF},
    {0x1F6D8, 0x1F6DB}, {0x1F6ED, 0x1F6EF}, {0x1F6FD, 0x1F6FF}, {0x1F777, 0x1F77A}, {0x1F7DA, 0x1F7DF}, {0x1F7EC, 0x1F7EF},
    {0x1F7F1, 0x1F7FF}, {0x1F80C, 0x1F80F}, {0x1F848, 0x1F84F}, {0x1F85A, 0x1F85F}, {0x1F888, 0x1F88F}, {0x1F8AE, 0x1F8AF},
    {0x1F8B2, 0x1F8FF}, {0x1FA54, 0x1FA5F}, {0x1FA6E, 0x1FA6F}, {0x1FA7D, 0x1FA7F}, {0x1FA89, 0x1FA8F}, {0x1FABE, 0x1FABE},
    {0x1FAC6, 0x1FACD}, {0x1FADC, 0x1FADF}, {0x1FAE9, 0x1FAEF}, {0x1FAF9, 0x1FAFF}, {0x1FB93, 0x1FB93}, {0x1FBCB, 0x1FBEF},
    {0x1FBFA, 0x1FFFF}, {0x2A6E0, 0x2A6FF}, {0x2B73A, 0x2B73F}, {0x2B81E, 0x2B81F}, {0x2CEA2, 0x2CEAF}, {0x2EBE1, 0x2F7FF},
    {0x2FA1E, 0x2FFFF}, {0x3134B, 0x3134F}, {0x323B0, 0xE00FF}, {0xE01F0, 0x10FFFF},
};
inline constexpr JRange kJAlpha[] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xAA, 0xAA}, {0xB5, 0xB5}, {0xBA, 0xBA}, {0xC0, 0xD6},
    {0xD8, 0xF6}, {0xF8, 0x2C1}, {0x2C6, 0x2D1}, {0x2E0, 0x2E4}, {0x2EC, 0x2EC}, {0x2EE, 0x2EE},
    {0x370, 0x374}, {0x376, 0x377}, {0x37A, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A},
    {0x38C, 0x38C}, {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
    {0x559, 0x559}, {0x560, 0x588}, {0x5D0, 0x5EA}, {0x5EF, 0x5F2}, {0x620, 0x64A}, {0x66E, 0x66F},
    {0x671, 0x6D3}, {0x6D5, 0x6D5}, {0x6E5, 0x6E6}, {0x6EE, 0x6EF}, {0x6FA, 0x6FC}, {0x6FF, 0x6FF},
    {0x710, 0x710}, {0x712, 0x72F}, {0x74D, 0x7A5}, {0x7B1, 0x7B1}, {0x7CA, 0x7EA}, {0x7F4, 0x7F5},
    {0x7FA, 0x7FA}, {0x800, 0x815}, {0x81A, 0x81A}, {0x824, 0x824}, {0x828, 0x828}, {0x840, 0x858},
    {0x860, 0x86A}, {0x870, 0x887}, {0x889, 0x88E}, {0x8A0, 0x8C9}, {0x904, 0x939}, {0x93D, 0x93D},
    {0x950, 0x950}, {0x958, 0x961}, {0x971, 0x980}, {0x985, 0x98C}, {0x98F, 0x990}, {0x993, 0x9A8},
    {0x9AA, 0x9B0}, {0x9B2, 0x9B2}, {0x9B6, 0x9B9}, {0x9BD, 0x9BD}, {0x9CE, 0x9CE}, {0x9DC, 0x9DD},
    {0x9DF, 0x9E1}, {0x9F0, 0x9F1}, {0x9FC, 0x9FC}, {0xA05, 0xA0A}, {0xA0F, 0xA10}, {0xA13, 0xA28},
    {0xA2A, 0xA30}, {0xA32, 0xA33}, {0xA35, 0xA36}, {0xA38, 0xA39}, {0xA59, 0xA5C}, {0xA5E, 0xA5E},
    {0xA72, 0xA74}, {0xA85, 0xA8D}, {0xA8F, 0xA91}, {0xA93, 0xAA8}, {0xAAA, 0xAB0}, {0xAB2, 0xAB3},
    {0xAB5, 0xAB9}, {0xABD, 0xABD}, {0xAD0, 0xAD0}, {0xAE0, 0xAE1}, {0xAF9, 0xAF9}, {0xB05, 0xB0C},
    {0xB0F, 0xB10}, {0xB13, 0xB28}, {0xB2A, 0xB30}, {0xB32, 0xB33}, {0xB35, 0xB39}, {0xB3D, 0xB3D},
    {0xB5C, 0xB5D}, {0xB5F, 0xB61}, {0xB71, 0xB71}, {0xB83, 0xB83}, {0xB85, 0xB8A}, {0xB8E, 0xB90},
    {0xB92, 0xB95}, {0xB99, 0xB9A}, {0xB9C, 0xB9C}, {0xB9E, 0xB9F}, {0xBA3, 0xBA4}, {0xBA8, 0xBAA},
    {0xBAE, 0xBB9}, {0xBD0, 0xBD0}, {0xC05, 0xC0C}, {0xC0E, 0xC10}, {0xC12, 0xC28}, {0xC2A, 0xC39},
    {0xC3D, 0xC3D}, {0xC58, 0xC5A}, {0xC5D, 0xC5D}, {0xC60, 0xC61}, {0xC80, 0xC80}, {0xC85, 0xC8C},
    {0xC8E, 0xC90}, {0xC92, 0xCA8}, {0xCAA, 0xCB3}, {0xCB5, 0xCB9}, {0xCBD, 0xCBD}, {0xCDD, 0xCDE},
    {0xCE0, 0xCE1}, {0xCF1, 0xCF2}, {0xD04, 0xD0C}, {0xD0E, 0xD10}, {0xD12, 0xD3A}, {0xD3D, 0xD3D},
    {0xD4E, 0xD4E}, {0xD54, 0xD56}, {0xD5F, 0xD61}, {0xD7A, 0xD7F}, {0xD85, 0xD96}, {0xD9A, 0xDB1},
    {0xDB3, 0xDBB}, {0xDBD, 0xDBD}, {0xDC0, 0xDC6}, {0xE01, 0xE30}, {0xE32, 0xE33}, {0xE40, 0xE46},
    {0xE81, 0xE82}, {0xE84, 0xE84}, {0xE86, 0xE8A}, {0xE8C, 0xEA3}, {0xEA5, 0xEA5}, {0xEA7, 0xEB0},
    {0xEB2, 0xEB3}, {0xEBD, 0xEBD}, {0xEC0, 0xEC4}, {0xEC6, 0xEC6}, {0xEDC, 0xEDF}, {0xF00, 0xF00},
    {0xF40, 0xF47}, {0xF49, 0xF6C}, {0xF88, 0xF8C}, {0x1000, 0x102A}, {0x103F, 0x103F}, {0x1050, 0x1055},
    {0x105A, 0x105D}, {0x1061, 0x1061}, {0x1065, 0x1066}, {0x106E, 0x1070}, {0x1075, 0x1081}, {0x108E, 0x108E},
    {0x10A0, 0x10C5}, {0x10C7, 0x10C7}, {0x10CD, 0x10CD}, {0x10D0, 0x10FA}, {0x10FC, 0x1248}, {0x124A, 0x124D},
    {0x1250, 0x1256}, {0x1258, 0x1258}, {0x125A, 0x125D}, {0x1260, 0x1288}, {0x128A, 0x128D}, {0x1290, 0x12B0},
    {0x12B2, 0x12B5}, {0x12B8, 0x12BE}, {0x12C0, 0x12C0}, {0x12C2, 0x12C5}, {0x12C8, 0x12D6}, {0x12D8, 0x1310},
    {0x1312, 0x1315}, {0x1318, 0x135A}, {0x1380, 0x138F}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1401, 0x166C},
    {0x166F, 0x167F}, {0x1681, 0x169A}, {0x16A0, 0x16EA}, {0x16F1, 0x16F8}, {0x1700, 0x1711}, {0x171F, 0x1731},
    {0x1740, 0x1751}, {0x1760, 0x176C}, {0x176E, 0x1770}, {0x1780, 0x17B3}, {0x17D7, 0x17D7}, {0x17DC, 0x17DC},
    {0x1820, 0x1878}, {0x1880, 0x1884}, {0x1887, 0x18A8}, {0x18AA, 0x18AA}, {0x18B0, 0x18F5}, {0x1900, 0x191E},
    {0x1950, 0x196D}, {0x1970, 0x1974}, {0x1980, 0x19AB}, {0x19B0, 0x19C9}, {0x1A00, 0x1A16}, {0x1A20, 0x1A54},
    {0x1AA7, 0x1AA7}, {0x1B05, 0x1B33}, {0x1B45, 0x1B4C}, {0x1B83, 0x1BA0}, {0x1BAE, 0x1BAF}, {0x1BBA, 0x1BE5},
    {0x1C00, 0x1C23}, {0x1C4D, 0x1C4F}, {0x1C5A, 0x1C7D}, {0x1C80, 0x1C88}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF},
    {0x1CE9, 0x1CEC}, {0x1CEE, 0x1CF3}, {0x1CF5, 0x1CF6}, {0x1CFA, 0x1CFA}, {0x1D00, 0x1DBF}, {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D}, {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FC4},
    {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC}, {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC},
    {0x2071, 0x2071}, {0x207F, 0x207F}, {0x2090, 0x209C}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113},
    {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128}, {0x212A, 0x212D},
    {0x212F, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2CE4},
    {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0x2D00, 0x2D25}, {0x2D27, 0x2D27}, {0x2D2D, 0x2D2D}, {0x2D30, 0x2D67},
    {0x2D6F, 0x2D6F}, {0x2D80, 0x2D96}, {0x2DA0, 0x2DA6}, {0x2DA8, 0x2DAE}, {0x2DB0, 0x2DB6}, {0x2DB8, 0x2DBE},
    {0x2DC0, 0x2DC6}, {0x2DC8, 0x2DCE}, {0x2DD0, 0x2DD6}, {0x2DD8, 0x2DDE}, {0x2E2F, 0x2E2F}, {0x3005, 0x3006},
    {0x3031, 0x3035}, {0x303B, 0x303C}, {0x3041, 0x3096}, {0x309D, 0x309F}, {0x30A1, 0x30FA}, {0x30FC, 0x30FF},
    {0x3105, 0x312F}, {0x3131, 0x318E}, {0x31A0, 0x31BF}, {0x31F0, 0x31FF}, {0x3400, 0x4DBF}, {0x4E00, 0xA48C},
    {0xA4D0, 0xA4FD}, {0xA500, 0xA60C}, {0xA610, 0xA61F}, {0xA62A, 0xA62B}, {0xA640, 0xA66E}, {0xA67F, 0xA69D},
    {0xA6A0, 0xA6E5}, {0xA717, 0xA71F}, {0xA722, 0xA788}, {0xA78B, 0xA7CA}, {0xA7D0, 0xA7D1}, {0xA7D3, 0xA7D3},
    {0xA7D5, 0xA7D9}, {0xA7F2, 0xA801}, {0xA803, 0xA805}, {0xA807, 0xA80A}, {0xA80C, 0xA822}, {0xA840, 0xA873},
    {0xA882, 0xA8B3}, {0xA8F2, 0xA8F7}, {0xA8FB, 0xA8FB}, {0xA8FD, 0xA8FE}, {0xA90A, 0xA925}, {0xA930, 0xA946},
    {0xA960, 0xA97C}, {0xA984, 0xA9B2}, {0xA9CF, 0xA9CF}, {0xA9E0, 0xA9E4}, {0xA9E6, 0xA9EF}, {0xA9FA, 0xA9FE},
    {0xAA00, 0xAA28}, {0xAA40, 0xAA42}, {0xAA44, 0xAA4B}, {0xAA60, 0xAA76}, {0xAA7A, 0xAA7A}, {0xAA7E, 0xAAAF},
    {0xAAB1, 0xAAB1}, {0xAAB5, 0xAAB6}, {0xAAB9, 0xAABD}, {0xAAC0, 0xAAC0}, {0xAAC2, 0xAAC2}, {0xAADB, 0xAADD},
    {0xAAE0, 0xAAEA}, {0xAAF2, 0xAAF4}, {0xAB01, 0xAB06}, {0xAB09, 0xAB0E}, {0xAB11, 0xAB16}, {0xAB20, 0xAB26},
    {0xAB28, 0xAB2E}, {0xAB30, 0xAB5A}, {0xAB5C, 0xAB69}, {0xAB70, 0xABE2}, {0xAC00, 0xD7A3}, {0xD7B0, 0xD7C6},
    {0xD7CB, 0xD7FB}, {0xF900, 0xFA6D}, {0xFA70, 0xFAD9}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFB1D, 0xFB1D},
    {0xFB1F, 0xFB28}, {0xFB2A, 0xFB36}, {0xFB38, 0xFB3C}, {0xFB3E, 0xFB3E}, {0xFB40, 0xFB41}, {0xFB43, 0xFB44},
    {0xFB46, 0xFBB1}, {0xFBD3, 0xFD3D}, {0xFD50, 0xFD8F}, {0xFD92, 0xFDC7}, {0xFDF0, 0xFDFB}, {0xFE70, 0xFE74},
    {0xFE76, 0xFEFC}, {0xFF21, 0xFF3A}, {0xFF41, 0xFF5A}, {0xFF66, 0xFFBE}, {0xFFC2, 0xFFC7}, {0xFFCA, 0xFFCF},
    {0xFFD2, 0xFFD7}, {0xFFDA, 0xFFDC}, {0x10000, 0x1000B}, {0x1000D, 0x10026}, {0x10028, 0x1003A}, {0x1003C, 0x1003D},
    {0x1003F, 0x1004D}, {0x10050, 0x1005D}, {0x10080, 0x100FA}, {0x10280, 0x1029C}, {0x102A0, 0x102D0}, {0x10300, 0x1031F},
    {0x1032D, 0x10340}, {0x10342, 0x10349}, {0x10350, 0x10375}, {0x10380, 0x1039D}, {0x103A0, 0x103C3}, {0x103C8, 0x103CF},
    {0x10400, 0x1049D}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10500, 0x10527}, {0x10530, 0x10563}, {0x10570, 0x1057A},
    {0x1057C, 0x1058A}, {0x1058C, 0x10592}, {0x10594, 0x10595}, {0x10597, 0x105A1}, {0x105A3, 0x105B1}, {0x105B3, 0x105B9},
    {0x105BB, 0x105BC}, {0x10600, 0x10736}, {0x10740, 0x10755}, {0x10760, 0x10767}, {0x10780, 0x10785}, {0x10787, 0x107B0},
    {0x107B2, 0x107BA}, {0x10800, 0x10805}, {0x10808, 0x10808}, {0x1080A, 0x10835}, {0x10837, 0x10838}, {0x1083C, 0x1083C},
    {0x1083F, 0x10855}, {0x10860, 0x10876}, {0x10880, 0x1089E}, {0x108E0, 0x108F2}, {0x108F4, 0x108F5}, {0x10900, 0x10915},
    {0x10920, 0x10939}, {0x10980, 0x109B7}, {0x109BE, 0x109BF}, {0x10A00, 0x10A00}, {0x10A10, 0x10A13}, {0x10A15, 0x10A17},
    {0x10A19, 0x10A35}, {0x10A60, 0x10A7C}, {0x10A80, 0x10A9C}, {0x10AC0, 0x10AC7}, {0x10AC9, 0x10AE4}, {0x10B00, 0x10B35},
    {0x10B40, 0x10B55}, {0x10B60, 0x10B72}, {0x10B80, 0x10B91}, {0x10C00, 0x10C48}, {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2},
    {0x10D00, 0x10D23}, {0x10E80, 0x10EA9}, {0x10EB0, 0x10EB1}, {0x10F00, 0x10F1C}, {0x10F27, 0x10F27}, {0x10F30, 0x10F45},
    {0x10F70, 0x10F81}, {0x10FB0, 0x10FC4}, {0x10FE0, 0x10FF6}, {0x11003, 0x11037}, {0x11071, 0x11072}, {0x11075, 0x11075},
    {0x11083, 0x110AF}, {0x110D0, 0x110E8}, {0x11103, 0x11126}, {0x11144, 0x11144}, {0x11147, 0x11147}, {0x11150, 0x11172},
    {0x11176, 0x11176}, {0x11183, 0x111B2}, {0x111C1, 0x111C4}, {0x111DA, 0x111DA}, {0x111DC, 0x111DC}, {0x11200, 0x11211},
    {0x11213, 0x1122B}, {0x1123F, 0x11240}, {0x11280, 0x11286}, {0x11288, 0x11288}, {0x1128A, 0x1128D}, {0x1128F, 0x1129D},
    {0x1129F, 0x112A8}, {0x112B0, 0x112DE}, {0x11305, 0x1130C}, {0x1130F, 0x11310}, {0x11313, 0x11328}, {0x1132A, 0x11330},
    {0x11332, 0x11333}, {0x11335, 0x11339}, {0x1133D, 0x1133D}, {0x11350, 0x11350}, {0x1135D, 0x11361}, {0x11400, 0x11434},
    {0x11447, 0x1144A}, {0x1145F, 0x11461}, {0x11480, 0x114AF}, {0x114C4, 0x114C5}, {0x114C7, 0x114C7}, {0x11580, 0x115AE},
    {0x115D8, 0x115DB}, {0x11600, 0x1162F}, {0x11644, 0x11644}, {0x11680, 0x116AA}, {0x116B8, 0x116B8}, {0x11700, 0x1171A},
    {0x11740, 0x11746}, {0x11800, 0x1182B}, {0x118A0, 0x118DF}, {0x118FF, 0x11906}, {0x11909, 0x11909}, {0x1190C, 0x11913},
    {0x11915, 0x11916}, {0x11918, 0x1192F}, {0x1193F, 0x1193F}, {0x11941, 0x11941}, {0x119A0, 0x119A7}, {0x119AA, 0x119D0},
    {0x119E1, 0x119E1}, {0x119E3, 0x119E3}, {0x11A00, 0x11A00}, {0x11A0B, 0x11A32}, {0x11A3A, 0x11A3A}, {0x11A50, 0x11A50},
    {0x11A5C, 0x11A89}, {0x11A9D, 0x11A9D}, {0x11AB0, 0x11AF8}, {0x11C00, 0x11C08}, {0x11C0A, 0x11C2E}, {0x11C40, 0x11C40},
    {0x11C72, 0x11C8F}, {0x11D00, 0x11D06}, {0x11D08, 0x11D09}, {0x11D0B, 0x11D30}, {0x11D46, 0x11D46}, {0x11D60, 0x11D65},
    {0x11D67, 0x11D68}, {0x11D6A, 0x11D89}, {0x11D98, 0x11D98}, {0x11EE0, 0x11EF2}, {0x11F02, 0x11F02}, {0x11F04, 0x11F10},
    {0x11F12, 0x11F33}, {0x11FB0, 0x11FB0}, {0x12000, 0x12399}, {0x12480, 0x12543}, {0x12F90, 0x12FF0}, {0x13000, 0x1342F},
    {0x13441, 0x13446}, {0x14400, 0x14646}, {0x16800, 0x16A38}, {0x16A40, 0x16A5E}, {0x16A70, 0x16ABE}, {0x16AD0, 0x16AED},
    {0x16B00, 0x16B2F}, {0x16B40, 0x16B43}, {0x16B63, 0x16B77}, {0x16B7D, 0x16B8F}, {0x16E40, 0x16E7F}, {0x16F00, 0x16F4A},
    {0x16F50, 0x16F50}, {0x16F93, 0x16F9F}, {0x16FE0, 0x16FE1}, {0x16FE3, 0x16FE3}, {0x17000, 0x187F7}, {0x18800, 0x18CD5},
    {0x18D00, 0x18D08}, {0x1AFF0, 0x1AFF3}, {0x1AFF5, 0x1AFFB}, {0x1AFFD, 0x1AFFE}, {0x1B000, 0x1B122}, {0x1B132, 0x1B132},
    {0x1B150, 0x1B152}, {0x1B155, 0x1B155}, {0x1B164, 0x1B167}, {0x1B170, 0x1B2FB}, {0x1BC00, 0x1BC6A}, {0x1BC70, 0x1BC7C},
    {0x1BC80, 0x1BC88}, {0x1BC90, 0x1BC99}, {0x1D400, 0x1D454}, {0x1D456, 0x1D49C}, {0x1D49E, 0x1D49F}, {0x1D4A2, 0x1D4A2},
    {0x1D4A5, 0x1D4A6}, {0x1D4A9, 0x1D4AC}, {0x1D4AE, 0x1D4B9}, {0x1D4BB, 0x1D4BB}, {0x1D4BD, 0x1D4C3}, {0x1D4C5, 0x1D505},
    {0x1D507, 0x1D50A}, {0x1D50D, 0x1D514}, {0x1D516, 0x1D51C}, {0x1D51E, 0x1D539}, {0x1D53B, 0x1D53E}, {0x1D540, 0x1D544},
    {0x1D546, 0x1D546}, {0x1D54A, 0x1D550}, {0x1D552, 0x1D6A5}, {0x1D6A8, 0x1D6C0}, {0x1D6C2, 0x1D6DA}, {0x1D6DC, 0x1D6FA},
    {0x1D6FC, 0x1D714}, {0x1D716, 0x1D734}, {0x1D736, 0x1D74E}, {0x1D750, 0x1D76E}, {0x1D770, 0x1D788}, {0x1D78A, 0x1D7A8},
    {0x1D7AA, 0x1D7C2}, {0x1D7C4, 0x1D7CB}, {0x1DF00, 0x1DF1E}, {0x1DF25, 0x1DF2A}, {0x1E030, 0x1E06D}, {0x1E100, 0x1E12C},
    {0x1E137, 0x1E13D}, {0x1E14E, 0x1E14E}, {0x1E290, 0x1E2AD}, {0x1E2C0, 0x1E2EB}, {0x1E4D0, 0x1E4EB}, {0x1E7E0, 0x1E7E6},
    {0x1E7E8, 0x1E7EB}, {0x1E7ED, 0x1E7EE}, {0x1E7F0, 0x1E7FE}, {0x1E800, 0x1E8C4}, {0x1E900, 0x1E943}, {0x1E94B, 0x1E94B},
    {0x1EE00, 0x1EE03}, {0x1EE05, 0x1EE1F}, {0x1EE21, 0x1EE22}, {0x1EE24, 0x1EE24}, {0x1EE27, 0x1EE27}, {0x1EE29, 0x1EE32},
    {0x1EE34, 0x1EE37}, {0x1EE39, 0x1EE39}, {0x1EE3B, 0x1EE3B}, {0x1EE42, 0x1EE42}, {0x1EE47, 0x1EE47}, {0x1EE49, 0x1EE49},
    {0x1EE4B, 0x1EE4B}, {0x1EE4D, 0x1EE4F}, {0x1EE51, 0x1EE52}, {0x1EE54, 0x1EE54}, {0x1EE57, 0x1EE57}, {0x1EE59, 0x1EE59},
    {0x1EE5B, 0x1EE5B}, {0x1EE5D, 0x1EE5D}, {0x1EE5F, 0x1EE5F}, {0x1EE61, 0x1EE62}, {0x1EE64, 0x1EE64}, {0x1EE67, 0x1EE6A},
    {0x1EE6C, 0x1EE72}, {0x1EE74, 0x1EE77}, {0x1EE79, 0x1EE7C}, {0x1EE7E, 0x1EE7E}, {0x1EE80, 0x1EE89}, {0x1EE8B, 0x1EE9B},
    {0x1EEA1, 0x1EEA3}, {0x1EEA5, 0x1EEA9}, {0x1EEAB, 0x1EEBB}, {0x20000, 0x2A6DF}, {0x2A700, 0x2B739}, {0x2B740, 0x2B81D},
    {0x2B820, 0x2CEA1}, {0x2CEB0, 0x2EBE0}, {0x2F800, 0x2FA1D}, {0x30000, 0x3134A}, {0x31350, 0x323AF},
};
inline constexpr JRange kJDecimal[] = {
    {0x30, 0x39}, {0x660, 0x669}, {0x6F0, 0x6F9}, {0x7C0, 0x7C9}, {0x966, 0x96F}, {0x9E6, 0x9EF},
    {0xA66, 0xA6F}, {0xAE6, 0xAEF}, {0xB66, 0xB6F}, {0xBE6, 0xBEF}, {0xC66, 0xC6F}, {0xCE6, 0xCEF},
    {0xD66, 0xD6F}, {0xDE6, 0xDEF}, {0xE50, 0xE59}, {0xED0, 0xED9}, {0xF20, 0xF29}, {0x1040, 0x1049},
    {0x1090, 0x1099}, {0x17E0, 0x17E9}, {0x1810, 0x1819}, {0x1946, 0x194F}, {0x19D0, 0x19D9}, {0x1A80, 0x1A89},
    {0x1A90, 0x1A99}, {0x1B50, 0x1B59}, {0x1BB0, 0x1BB9}, {0x1C40, 0x1C49}, {0x1C50, 0x1C59}, {0xA620, 0xA629},
    {0xA8D0, 0xA8D9}, {0xA900, 0xA909}, {0xA9D0, 0xA9D9}, {0xA9F0, 0xA9F9}, {0xAA50, 0xAA59}, {0xABF0, 0xABF9},
    {0xFF10, 0xFF19}, {0x104A0, 0x104A9}, {0x10D30, 0x10D39}, {0x11066, 0x1106F}, {0x110F0, 0x110F9}, {0x11136, 0x1113F},
    {0x111D0, 0x111D9}, {0x112F0, 0x112F9}, {0x11450, 0x11459}, {0x114D0, 0x114D9}, {0x11650, 0x11659}, {0x116C0, 0x116C9},
    {0x11730, 0x11739}, {0x118E0, 0x118E9}, {0x11950, 0x11959}, {0x11C50, 0x11C59}, {0x11D50, 0x11D59}, {0x11DA0, 0x11DA9},
    {0x11F50, 0x11F59}, {0x16A60, 0x16A69}, {0x16AC0, 0x16AC9}, {0x16B50, 0x16B59}, {0x1D7CE, 0x1D7FF}, {0x1E140, 0x1E149},
    {0x1E2F0, 0x1E2F9}, {0x1E4F0, 0x1E4F9}, {0x1E950, 0x1E959}, {0x1FBF0, 0x1FBF9},
};
inline constexpr JRange kJDigit[] = {
    {0x30, 0x39}, {0xB2, 0xB3}, {0xB9, 0xB9}, {0x660, 0x669}, {0x6F0, 0x6F9}, {0x7C0, 0x7C9},
    {0x966, 0x96F}, {0x9E6, 0x9EF}, {0xA66, 0xA6F}, {0xAE6, 0xAEF}, {0xB66, 0xB6F}, {0xBE6, 0xBEF},
    {0xC66, 0xC6F}, {0xCE6, 0xCEF}, {0xD66, 0xD6F}, {0xDE6, 0xDEF}, {0xE50, 0xE59}, {0xED0, 0xED9},
    {0xF20, 0xF29}, {0x1040, 0x1049}, {0x1090, 0x1099}, {0x1369, 0x1371}, {0x17E0, 0x17E9}, {0x1810, 0x1819},
    {0x1946, 0x194F}, {0x19D0, 0x19DA}, {0x1A80, 0x1A89}, {0x1A90, 0x1A99}, {0x1B50, 0x1B59}, {0x1BB0, 0x1BB9},
    {0x1C40, 0x1C49}, {0x1C50, 0x1C59}, {0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2460, 0x2468},
    {0x2474, 0x247C}, {0x2488, 0x2490}, {0x24EA, 0x24EA}, {0x24F5, 0x24FD}, {0x24FF, 0x24FF}, {0x2776, 0x277E},
    {0x2780, 0x2788}, {0x278A, 0x2792}, {0xA620, 0xA629}, {0xA8D0, 0xA8D9}, {0xA900, 0xA909}, {0xA9D0, 0xA9D9},
    {0xA9F0, 0xA9F9}, {0xAA50, 0xAA59}, {0xABF0, 0xABF9}, {0xFF10, 0xFF19}, {0x104A0, 0x104A9}, {0x10A40, 0x10A43},
    {0x10D30, 0x10D39}, {0x10E60, 0x10E68}, {0x11052, 0x1105A}, {0x11066, 0x1106F}, {0x110F0, 0x110F9}, {0x11136, 0x1113F},
    {0x111D0, 0x111D9}, {0x112F0, 0x112F9}, {0x11450, 0x11459}, {0x114D0, 0x114D9}, {0x11650, 0x11659}, {0x116C0, 0x116C9},
    {0x11730, 0x11739}, {0x118E0, 0x118E9}, {0x11950, 0x11959}, {0x11C50, 0x11C59}, {0x11D50, 0x11D59}, {0x11DA0, 0x11DA9},
    {0x11F50, 0x11F59}, {0x16A60, 0x16A69}, {0x16AC0, 0x16AC9}, {0x16B50, 0x16B59}, {0x1D7CE, 0x1D7FF}, {0x1E140, 0x1E149},
    {0x1E2F0, 0x1E2F9}, {0x1E4F0, 0x1E4F9}, {0x1E950, 0x1E959}, {0x1F100, 0x1F10A}, {0x1FBF0, 0x1FBF9},
};
inline constexpr JRange kJNumeric[] = {
    {0x30, 0x39}, {0xB2, 0xB3}, {0xB9, 0xB9}, {0xBC, 0xBE}, {0x660, 0x669}, {0x6F0, 0x6F9},
    {0x7C0, 0x7C9}, {0x966, 0x96F}, {0x9E6, 0x9EF}, {0x9F4, 0x9F9}, {0xA66, 0xA6F}, {0xAE6, 0xAEF},
    {0xB66, 0xB6F}, {0xB72, 0xB77}, {0xBE6, 0xBF2}, {0xC66, 0xC6F}, {0xC78, 0xC7E}, {0xCE6, 0xCEF},
    {0xD58, 0xD5E}, {0xD66, 0xD78}, {0xDE6, 0xDEF}, {0xE50, 0xE59}, {0xED0, 0xED9}, {0xF20, 0xF33},
    {0x1040, 0x1049}, {0x1090, 0x1099}, {0x1369, 0x137C}, {0x16EE, 0x16F0}, {0x17E0, 0x17E9}, {0x17F0, 0x17F9},
    {0x1810, 0x1819}, {0x1946, 0x194F}, {0x19D0, 0x19DA}, {0x1A80, 0x1A89}, {0x1A90, 0x1A99}, {0x1B50, 0x1B59},
    {0x1BB0, 0x1BB9}, {0x1C40, 0x1C49}, {0x1C50, 0x1C59}, {0x2070, 0x2070}, {0x2074, 0x2079}, {0x2080, 0x2089},
    {0x2150, 0x2182}, {0x2185, 0x2189}, {0x2460, 0x249B}, {0x24EA, 0x24FF}, {0x2776, 0x2793}, {0x2CFD, 0x2CFD},
    {0x3007, 0x3007}, {0x3021, 0x3029}, {0x3038, 0x303A}, {0x3192, 0x3195}, {0x3220, 0x3229}, {0x3248, 0x324F},
    {0x3251, 0x325F}, {0x3280, 0x3289}, {0x32B1, 0x32BF}, {0x3405, 0x3405}, {0x3483, 0x3483}, {0x382A, 0x382A},
    {0x3B4D, 0x3B4D}, {0x4E00, 0x4E00}, {0x4E03, 0x4E03}, {0x4E07, 0x4E07}, {0x4E09, 0x4E09}, {0x4E5D, 0x4E5D},
    {0x4E8C, 0x4E8C}, {0x4E94, 0x4E94}, {0x4E96, 0x4E96}, {0x4EBF, 0x4EC0}, {0x4EDF, 0x4EDF}, {0x4EE8, 0x4EE8},
    {0x4F0D, 0x4F0D}, {0x4F70, 0x4F70}, {0x5104, 0x5104}, {0x5146, 0x5146}, {0x5169, 0x5169}, {0x516B, 0x516B},
    {0x516D, 0x516D}, {0x5341, 0x5341}, {0x5343, 0x5345}, {0x534C, 0x534C}, {0x53C1, 0x53C4}, {0x56DB, 0x56DB},
    {0x58F1, 0x58F1}, {0x58F9, 0x58F9}, {0x5E7A, 0x5E7A}, {0x5EFE, 0x5EFF}, {0x5F0C, 0x5F0E}, {0x5F10, 0x5F10},
    {0x62FE, 0x62FE}, {0x634C, 0x634C}, {0x67D2, 0x67D2}, {0x6F06, 0x6F06}, {0x7396, 0x7396}, {0x767E, 0x767E},
    {0x8086, 0x8086}, {0x842C, 0x842C}, {0x8CAE, 0x8CAE}, {0x8CB3, 0x8CB3}, {0x8D30, 0x8D30}, {0x9621, 0x9621},
    {0x9646, 0x9646}, {0x964C, 0x964C}, {0x9678, 0x9678}, {0x96F6, 0x96F6}, {0xA620, 0xA629}, {0xA6E6, 0xA6EF},
    {0xA830, 0xA835}, {0xA8D0, 0xA8D9}, {0xA900, 0xA909}, {0xA9D0, 0xA9D9}, {0xA9F0, 0xA9F9}, {0xAA50, 0xAA59},
    {0xABF0, 0xABF9}, {0xF96B, 0xF96B}, {0xF973, 0xF973}, {0xF978, 0xF978}, {0xF9B2, 0xF9B2}, {0xF9D1, 0xF9D1},
    {0xF9D3, 0xF9D3}, {0xF9FD, 0xF9FD}, {0xFF10, 0xFF19}, {0x10107, 0x10133}, {0x10140, 0x10178}, {0x1018A, 0x1018B},
    {0x102E1, 0x102FB}, {0x10320, 0x10323}, {0x10341, 0x10341}, {0x1034A, 0x1034A}, {0x103D1, 0x103D5}, {0x104A0, 0x104A9},
    {0x10858, 0x1085F}, {0x10879, 0x1087F}, {0x108A7, 0x108AF}, {0x108FB, 0x108FF}, {0x10916, 0x1091B}, {0x109BC, 0x109BD},
    {0x109C0, 0x109CF}, {0x109D2, 0x109FF}, {0x10A40, 0x10A48}, {0x10A7D, 0x10A7E}, {0x10A9D, 0x10A9F}, {0x10AEB, 0x10AEF},
    {0x10B58, 0x10B5F}, {0x10B78, 0x10B7F}, {0x10BA9, 0x10BAF}, {0x10CFA, 0x10CFF}, {0x10D30, 0x10D39}, {0x10E60, 0x10E7E},
    {0x10F1D, 0x10F26}, {0x10F51, 0x10F54}, {0x10FC5, 0x10FCB}, {0x11052, 0x1106F}, {0x110F0, 0x110F9}, {0x11136, 0x1113F},
    {0x111D0, 0x111D9}, {0x111E1, 0x111F4}, {0x112F0, 0x112F9}, {0x11450, 0x11459}, {0x114D0, 0x114D9}, {0x11650, 0x11659},
    {0x116C0, 0x116C9}, {0x11730, 0x1173B}, {0x118E0, 0x118F2}, {0x11950, 0x11959}, {0x11C50, 0x11C6C}, {0x11D50, 0x11D59},
    {0x11DA0, 0x11DA9}, {0x11F50, 0x11F59}, {0x11FC0, 0x11FD4}, {0x12400, 0x1246E}, {0x16A60, 0x16A69}, {0x16AC0, 0x16AC9},
    {0x16B50, 0x16B59}, {0x16B5B, 0x16B61}, {0x16E80, 0x16E96}, {0x1D2C0, 0x1D2D3}, {0x1D2E0, 0x1D2F3}, {0x1D360, 0x1D378},
    {0x1D7CE, 0x1D7FF}, {0x1E140, 0x1E149}, {0x1E2F0, 0x1E2F9}, {0x1E4F0, 0x1E4F9}, {0x1E8C7, 0x1E8CF}, {0x1E950, 0x1E959},
    {0x1EC71, 0x1ECAB}, {0x1ECAD, 0x1ECAF}, {0x1ECB1, 0x1ECB4}, {0x1ED01, 0x1ED2D}, {0x1ED2F, 0x1ED3D}, {0x1F100, 0x1F10C},
    {0x1FBF0, 0x1FBF9}, {0x20001, 0x20001}, {0x20064, 0x20064}, {0x200E2, 0x200E2}, {0x20121, 0x20121}, {0x2092A, 0x2092A},
    {0x20983, 0x20983}, {0x2098C, 0x2098C}, {0x2099C, 0x2099C}, {0x20AEA, 0x20AEA}, {0x20AFD, 0x20AFD}, {0x20B19, 0x20B19},
    {0x22390, 0x22390}, {0x22998, 0x22998}, {0x23B1B, 0x23B1B}, {0x2626D, 0x2626D}, {0x2F890, 0x2F890},
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
#endif  // !LLMI_KERNEL_PASS

// ---- src/36_jinja_values.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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

enum class FnKind : uint8_t { global, method, macro, caller, cycler_next, cycler_reset, joiner, loop_cycle, loop_changed };

struct JFunc {
  FnKind kind = FnKind::global;
  std::string name;                // global / method name
  JValue self;                     // bound receiver (methods), state (cycler, joiner, loop)
  const JNode* node = nullptr;     // macro / call block
  std::weak_ptr<JScope> closure;   // weak: a macro stored in its own scope must not keep it alive
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

inline bool jv_is_markup(const JValue& v) { return v.t == JValue::T::string && v.b; }
inline JValue jv_markup(PText t) {
  JValue v = JValue::str(std::move(t));
  v.b = true;  // strings use `b` as the Markup flag (|safe, |escape)
  return v;
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
    if (r[mid].hi < c) lo = mid + 1;
    else hi = mid;
  }
  return lo < N && r[lo].lo <= c;
}
// The simple mapping of c by disjoint runs; c itself when unmapped.
template <size_t N>
inline uint32_t jmap_runs(const JCaseRun (&r)[N], uint32_t c, bool* mapped = nullptr) {
  size_t lo = 0, hi = N;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (r[mid].end < c) lo = mid + 1;
    else hi = mid;
  }
  if (lo < N && r[lo].start <= c && (c - r[lo].start) % r[lo].stride == 0) {
    if (mapped) *mapped = true;
    return static_cast<uint32_t>(static_cast<int64_t>(c) + r[lo].delta);
  }
  if (mapped) *mapped = false;
  return c;
}
// Python's str.isprintable() per code point.
inline bool py_printable(uint32_t c) { return c <= 0x10FFFF && !jin_ranges(kJNonPrintable, c); }
inline bool jcase_is_title(uint32_t c) { return jin_ranges(kJTitlecase, c); }
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
inline bool jcase_cased(uint32_t c) { return jcase_is_upper(c) || jcase_is_lower(c) || jcase_is_title(c); }
inline bool jcase_ignorable(uint32_t c) { return jin_ranges(kJCaseIgnorable, c); }
// str.isalpha() / isdecimal() / isdigit() / isnumeric() / isalnum() per code point.
inline bool jis_alpha(uint32_t c) { return jin_ranges(kJAlpha, c); }
inline bool jis_decimal(uint32_t c) { return jin_ranges(kJDecimal, c); }
inline bool jis_digit(uint32_t c) { return jin_ranges(kJDigit, c); }
inline bool jis_numeric(uint32_t c) { return jin_ranges(kJNumeric, c); }
inline bool jis_alnum(uint32_t c) { return jis_alpha(c) || jis_decimal(c) || jis_digit(c) || jis_numeric(c); }
// Full case mapping (kind 0 upper, 1 lower, 2 title) into out[]; returns the count (1..3).
inline int jcase_full(uint32_t c, int kind, uint32_t out[3]) {
  size_t lo = 0, hi = sizeof kJCaseSpecial / sizeof kJCaseSpecial[0];
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    const JCaseSpecial& e = kJCaseSpecial[mid];
    if (e.cp < c || (e.cp == c && e.kind < kind)) lo = mid + 1;
    else hi = mid;
  }
  if (lo < sizeof kJCaseSpecial / sizeof kJCaseSpecial[0] && kJCaseSpecial[lo].cp == c && kJCaseSpecial[lo].kind == kind) {
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
    const char* rep = c == '&' ? "&amp;" : c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '\'' ? "&#39;"
                      : c == '"' ? "&#34;" : nullptr;
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
#endif  // !LLMI_KERNEL_PASS

// ---- src/37_jinja_render.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
// ==== Chat templates, part 3: the renderer ====
// Walks the syntax tree with Jinja2's semantics (scopes: a for loop or macro call gets its own
// scope, `if` does not; `set` writes to the innermost scope; namespaces are shared objects).
// Errors are values: the first failure stops the render and names the line:column.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

struct JArgs {
  std::vector<JValue> pos;
  std::vector<std::pair<std::string, JValue>> kw;
};

struct JRenderOptions {
  uint64_t max_steps = LLMINFER_JINJA_MAX_STEPS;
  size_t max_string = LLMINFER_JINJA_MAX_STRING;
  size_t max_stack = LLMINFER_JINJA_MAX_STACK;  // stack bytes the render may use (nested evaluation)
  std::function<std::tm()> clock;  // strftime_now(); the local time when empty
  // Polled while rendering (every few thousand steps): when it becomes true the render stops
  // with an error ("rendering cancelled"). Not owned.
  const std::atomic<bool>* cancel = nullptr;
};

class JRender {
  using SP = std::shared_ptr<JScope>;

 public:
  JRender(const JProgram& prog, const JRenderOptions& opt) : prog_(prog), opt_(opt) {}
  ~JRender() {
    // namespaces are the only mutable objects, so every reference cycle goes through one
    for (auto& w : namespaces_)
      if (auto p = w.lock()) p->items.clear();
  }

  bool run(const SP& globals, PText& out) {
    stack_base_ = jstack_here();
    auto top = std::make_shared<JScope>();
    top->parent = globals;
    predeclare(prog_.root_undef, *top);
    exec(prog_.root, top, out);
    // namespaces are cleared before the scopes go (a chain of namespaces holding each other
    // would otherwise be destroyed recursively, one level per link)
    for (auto& w : namespaces_)
      if (auto p = w.lock()) p->items.clear();
    return !failed_;
  }

  std::string error;
  bool raised = false;     // the template called raise_exception()
  bool cancelled = false;  // JRenderOptions::cancel was set
  uint64_t steps_used() const { return steps_; }

  // ---- value helpers usable before a render (building the context) ----
  JValue make_ns() {
    JValue v;
    v.t = JValue::T::ns;
    v.m = std::make_shared<JDict>();
    namespaces_.push_back(v.m);
    return v;
  }

 private:
  // Names a frame assigns before reading them start undefined (JParser::scan_frame).
  static void predeclare(const std::vector<std::string>& names, JScope& sc) {
    for (const auto& name : names) sc.set(name, JValue::undefined(strf("'%s' is undefined", name.c_str())));
  }

  // ================================================================ errors and limits
  bool fail(std::string msg) {
    if (!failed_) {
      failed_ = true;
      error = strf("chat template %s: %s", prog_.where(pos_).c_str(), msg.c_str());
    }
    return false;
  }
  JValue failv(std::string msg) {
    fail(std::move(msg));
    return JValue();
  }
  bool charge(uint64_t n = 1) {
    steps_ += n;
    if (opt_.cancel && steps_ >= next_poll_) {  // about every 2 ms
      next_poll_ = steps_ + 4096;
      if (opt_.cancel->load(std::memory_order_relaxed)) {
        cancelled = true;
        return fail("rendering cancelled");
      }
    }
    if (steps_ > opt_.max_steps)
      return fail(strf("the template ran more than %llu steps (a loop that does not end?)",
                       static_cast<unsigned long long>(opt_.max_steps)));
    return true;
  }
  // Text built costs steps too (1 per 64 bytes), so memory churn is bounded as well as time.
  bool charge_str(size_t bytes) { return charge(bytes / 64 + 1); }
  // Text or items an operation may scan cost steps too: tests, filters and methods (which decode
  // code points, copy, case-map) 1 per 8 bytes of each string operand, so a test on a 16 MB string
  // is 2 million steps, not 1; comparisons and searches (memcmp speed) 1 per 64 bytes. The budget
  // thus bounds the time whatever the operands' sizes.
  bool charge_scan(const JValue& v) {
    switch (v.t) {
      case JValue::T::string: return charge(v.s->s.size() / 8);
      case JValue::T::list: return charge(v.l->items.size() / 8);
      case JValue::T::dict:
      case JValue::T::ns: return v.m ? charge(v.m->items.size() / 8) : true;
      default: return true;
    }
  }
  bool charge_scan(const JValue& v, const JArgs& args) {
    if (!charge_scan(v)) return false;
    for (const JValue& x : args.pos)
      if (!charge_scan(x)) return false;
    for (const auto& kv : args.kw)
      if (!charge_scan(kv.second)) return false;
    return true;
  }
  // A list of n items is about to be built: each item costs 4 steps (values are ~100 bytes).
  bool charge_list(uint64_t n) {
    if (n > LLMINFER_JINJA_MAX_LIST)
      return fail(strf("a list of %llu items is longer than the limit of %u", static_cast<unsigned long long>(n),
                       static_cast<unsigned>(LLMINFER_JINJA_MAX_LIST)));
    return charge(4 * n);
  }
  bool check_len(size_t n) {
    if (n > opt_.max_string)
      return fail(strf("a string of %zu bytes is longer than the limit of %zu", n, opt_.max_string));
    return true;
  }
  struct DepthGuard {
    JRender& r;
    bool ok;
    explicit DepthGuard(JRender& rr) : r(rr), ok(++rr.depth_ <= LLMINFER_JINJA_MAX_EVAL_DEPTH) {
      if (!ok) {
        r.fail(strf("evaluation nested more than %d levels deep", LLMINFER_JINJA_MAX_EVAL_DEPTH));
      } else if (jstack_used(r.stack_base_) > r.opt_.max_stack) {
        ok = false;
        r.fail(strf("evaluation nested too deeply (more than %zu KB of stack; macro calls in flight: %d)",
                    r.opt_.max_stack >> 10, r.call_depth_));
      }
    }
    ~DepthGuard() { --r.depth_; }
  };
  // The error of using an undefined value.
  bool fail_undef(const JValue& v) {
    if (v.unsafe) return fail("security error: " + v.s->s);
    return fail(v.s ? v.s->s : std::string("undefined value"));
  }
  static JValue undef_attr(const JValue& obj, std::string_view name) {
    return JValue::undefined(strf("'%s object' has no attribute '%.*s'", jv_type(obj), static_cast<int>(name.size()),
                                  name.data()));
  }
  static JValue unsafe_attr(const JValue& obj, std::string_view name) {
    JValue u = JValue::undefined(strf("access to attribute '%.*s' of '%s' object is unsafe.",
                                      static_cast<int>(name.size()), name.data(), jv_type(obj)));
    u.unsafe = true;
    return u;
  }

  // ================================================================ statements
  bool exec(const std::vector<JNode*>& body, const SP& sc, PText& out) {
    for (const JNode* n : body) {
      if (failed_) return false;
      if (!exec_one(n, sc, out)) return false;
      if (flow_ != Flow::normal) return true;
    }
    return !failed_;
  }

  bool emit(PText& out, std::string_view s, bool content = false) {
    if (!check_len(out.s.size() + s.size()) || !charge_str(s.size())) return false;
    out.add(s, content);
    return true;
  }
  bool emit(PText& out, const PText& s) {
    if (!check_len(out.s.size() + s.s.size()) || !charge_str(s.s.size())) return false;
    out.add(s);
    return true;
  }

  bool exec_one(const JNode* n, const SP& sc, PText& out) {
    DepthGuard g(*this);
    if (!g.ok) return false;
    pos_ = n->pos;
    if (!charge()) return false;
    switch (n->k) {
      case NK::output: return emit(out, n->str);
      case NK::print: {
        // a wholly constant {{ expression }} is printed as Jinja2 computes it when compiling,
        // even when its value is not a plain value (see eval_folded)
        print_root_ = n->a;
        JValue v = eval(n->a, sc);
        print_root_ = nullptr;
        if (failed_) return false;
        if (v.t == JValue::T::string) return emit(out, *v.s);
        PText t;
        if (!to_str(v, t)) return false;
        return emit(out, t);
      }
      case NK::if_: {
        JValue c = eval(n->a, sc);
        if (failed_) return false;
        return exec(jv_truthy(c) ? n->body : n->orelse, sc, out);
      }
      case NK::for_: return exec_for(n, sc, out);
      case NK::set: {
        JValue v = eval(n->b, sc);
        if (failed_) return false;
        return assign(n->a, std::move(v), sc);
      }
      case NK::set_block: {
        PText buf;
        auto inner = std::make_shared<JScope>();
        inner->parent = sc;
        predeclare(n->undef_names, *inner);
        if (!exec(n->body, inner, buf)) return false;
        JValue v = JValue::str(std::move(buf));
        if (n->b) {
          v = eval_filter(n->b, sc, &v);
          if (failed_) return false;
        }
        return assign(n->a, std::move(v), sc);
      }
      case NK::macro: {
        JFunc f;
        f.kind = FnKind::macro;
        f.name = n->str;
        f.node = n;
        f.closure = sc;
        sc->set(n->str, jv_func(std::move(f)));
        return true;
      }
      case NK::call_block: {
        JFunc f;
        f.kind = FnKind::caller;
        f.name = "caller";
        f.node = n;
        f.closure = sc;
        JValue caller = jv_func(std::move(f));
        JValue r = eval_call(n->a, sc, &caller);
        if (failed_) return false;
        PText t;
        if (!to_str(r, t)) return false;
        return emit(out, t);
      }
      case NK::filter_block: {
        PText buf;
        auto inner = std::make_shared<JScope>();
        inner->parent = sc;
        predeclare(n->undef_names, *inner);
        if (!exec(n->body, inner, buf)) return false;
        JValue v = JValue::str(std::move(buf));
        JValue r = eval_filter(n->a, sc, &v);
        if (failed_) return false;
        PText t;
        if (!to_str(r, t)) return false;
        return emit(out, t);
      }
      case NK::break_: flow_ = Flow::brk; return true;
      case NK::continue_: flow_ = Flow::cont; return true;
      case NK::scope: {
        auto inner = std::make_shared<JScope>();
        inner->parent = sc;
        for (size_t k = 0; k < n->list.size(); k++) {
          JValue v = eval(n->list[k], sc);
          if (failed_) return false;
          if (!assign(n->kw[k], std::move(v), inner)) return false;
        }
        predeclare(n->undef_names, *inner);
        return exec(n->body, inner, out);
      }
      default: return fail("internal error: an expression where a statement was expected");
    }
  }

  // Each iteration runs in a fresh scope under the enclosing one (Jinja2 reloads outer names at
  // the start of every iteration, so `set` inside a loop never carries over to the next one).
  bool exec_for(const JNode* n, const SP& sc, PText& out) {
    if (n->flag) return fail("unsupported construct: recursive for loops");
    JValue it = eval(n->b, sc);
    if (failed_) return false;
    pos_ = n->pos;
    // an immutable list is iterated in place; anything else is materialized first
    std::shared_ptr<JList> list;
    if (it.is_list() && it.l->kind != JSeq::generator && !n->c) {
      if (!charge(it.l->items.size() / 8 + 1)) return false;
      list = it.l;
    } else {
      list = std::make_shared<JList>();
      if (!iterate(it, list->items)) return false;
    }
    std::vector<JValue>& items = list->items;
    if (n->c) {
      std::vector<JValue> kept;
      for (auto& v : items) {
        auto fs = std::make_shared<JScope>();
        fs->parent = sc;
        if (!charge() || !assign(n->a, v, fs)) return false;
        JValue c = eval(n->c, fs);
        if (failed_) return false;
        if (jv_truthy(c)) kept.push_back(std::move(v));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      auto es = std::make_shared<JScope>();
      es->parent = sc;
      return exec(n->orelse, es, out);
    }
    auto loop = std::make_shared<JLoop>();
    loop->length = static_cast<int64_t>(list->items.size());
    loop->items = list;
    JValue lv;
    lv.t = JValue::T::loop;
    lv.lp = loop;
    // Jinja2 clears its "no iteration" flag at the end of the loop body, which `break` and
    // `continue` skip: the else block also runs when no iteration ran to its end.
    bool completed = false;
    for (size_t k = 0; k < list->items.size(); k++) {
      if (!charge()) return false;
      loop->index0 = static_cast<int64_t>(k);
      auto ls = std::make_shared<JScope>();
      ls->parent = sc;
      ls->set("loop", lv);
      predeclare(n->undef_names, *ls);
      if (!assign(n->a, list->items[k], ls)) return false;
      if (!exec(n->body, ls, out)) return false;
      if (flow_ == Flow::brk) {
        flow_ = Flow::normal;
        break;
      }
      if (flow_ == Flow::normal) completed = true;
      flow_ = Flow::normal;
    }
    if (!completed && !n->orelse.empty()) {
      auto es = std::make_shared<JScope>();
      es->parent = sc;
      return exec(n->orelse, es, out);
    }
    return true;
  }

  bool assign(const JNode* target, JValue v, const SP& sc) {
    if (jv_depth(v) > LLMINFER_JINJA_MAX_DEPTH)
      return fail(strf("a value nested more than %d levels deep (lists, dicts or filters such as map of each other)",
                       LLMINFER_JINJA_MAX_DEPTH));
    switch (target->k) {
      case NK::name: sc->set(target->str, std::move(v)); return true;
      case NK::nsref: {
        const JValue* ns = find_var(target->str, sc);
        if (!ns || ns->t != JValue::T::ns)
          return fail(strf("cannot assign attribute '%s' on '%s': not a namespace", target->names[0].c_str(),
                           target->str.c_str()));
        if (!charge(ns->m->items.size() / 16)) return false;
        for (auto& kv : ns->m->items)
          if (kv.first.is_str() && kv.first.text() == target->names[0]) {
            kv.second = std::move(v);
            return true;
          }
        ns->m->items.emplace_back(JValue::str(target->names[0]), std::move(v));
        return true;
      }
      case NK::tuple: {
        std::vector<JValue> parts;
        if (!iterate(v, parts)) return false;
        if (parts.size() != target->list.size()) {
          if (parts.size() > target->list.size())
            return fail(strf("too many values to unpack (expected %zu)", target->list.size()));
          return fail(strf("not enough values to unpack (expected %zu, got %zu)", target->list.size(), parts.size()));
        }
        for (size_t k = 0; k < parts.size(); k++)
          if (!assign(target->list[k], std::move(parts[k]), sc)) return false;
        return true;
      }
      default: return fail("cannot assign to this expression");
    }
  }

  static const JValue* find_var(std::string_view name, const SP& sc) {
    for (JScope* s = sc.get(); s; s = s->parent.get())
      if (JValue* v = s->find_local(name)) return v;
    return nullptr;
  }

  // ================================================================ expressions
  static bool is_global(std::string_view n) {
    return n == "range" || n == "dict" || n == "namespace" || n == "raise_exception" || n == "strftime_now" ||
           n == "cycler" || n == "joiner" || n == "lipsum";
  }
  JValue lookup(const std::string& name, const SP& sc) {
    if (const JValue* v = find_var(name, sc)) return *v;
    if (is_global(name)) {
      JFunc f;
      f.kind = FnKind::global;
      f.name = name;
      return jv_func(std::move(f));
    }
    return JValue::undefined(strf("'%s' is undefined", name.c_str()));
  }

  // Jinja2's optimizer computes constant subexpressions when it compiles the template, through
  // getitem(), which turns a failing subscript into undefined ("abc"[5] and (none)[1:] are
  // undefined there, but an error at run time). A folded value is kept only when it is a plain
  // value (has a "safe repr"); the {{ }} expression itself is always kept.
  static bool safe_repr(const JValue& v, int depth = 0) {
    if (depth > 64) return false;
    switch (v.t) {
      case JValue::T::none:
      case JValue::T::boolean:
      case JValue::T::integer:
      case JValue::T::real:
      case JValue::T::string: return true;
      case JValue::T::list:
        if (v.l->kind == JSeq::range) return true;
        if (v.l->kind != JSeq::list && v.l->kind != JSeq::tuple) return false;
        for (const auto& x : v.l->items)
          if (!safe_repr(x, depth + 1)) return false;
        return true;
      case JValue::T::dict:
        for (const auto& kv : v.m->items)
          if (!safe_repr(kv.first, depth + 1) || !safe_repr(kv.second, depth + 1)) return false;
        return true;
      default: return false;
    }
  }
  JValue eval_folded(const JNode* n, const SP& sc) {
    uint32_t pos = pos_;
    uint64_t steps = steps_;
    fold_ = true;
    JValue v = eval_node(n, sc);
    fold_ = false;
    if (impossible_) {  // it reached a non-constant operand: not foldable after all
      impossible_ = failed_ = false;
    } else if (failed_ || safe_repr(v) || n == print_root_) {
      return v;
    }
    pos_ = pos;  // not foldable: evaluate as at run time
    steps_ = steps;
    return eval_node(n, sc);
  }

  JValue eval(const JNode* n, const SP& sc) {
    if (failed_) return JValue();
    if (!fold_ && n->constant && n->k != NK::konst) return eval_folded(n, sc);
    if (fold_ && !n->constant) {  // unwinds the constant evaluation without an error (eval_folded)
      impossible_ = failed_ = true;
      return JValue();
    }
    return eval_node(n, sc);
  }
  JValue eval_node(const JNode* n, const SP& sc) {
    DepthGuard g(*this);
    if (!g.ok) return JValue();
    pos_ = n->pos;
    if (!charge()) return JValue();
    switch (n->k) {
      case NK::konst: return n->val;
      case NK::name: return lookup(n->str, sc);
      case NK::list:
      case NK::tuple: {
        std::vector<JValue> items;
        items.reserve(n->list.size());
        for (const JNode* e : n->list) {
          items.push_back(eval(e, sc));
          if (failed_) return JValue();
        }
        return JValue::list(std::move(items), n->k == NK::tuple ? JSeq::tuple : JSeq::list);
      }
      case NK::dict: {
        JValue d;
        d.t = JValue::T::dict;
        d.m = std::make_shared<JDict>();
        for (size_t k = 0; k < n->list.size(); k++) {
          JValue key = eval(n->list[k], sc);
          if (failed_) return JValue();
          JValue val = eval(n->kw[k], sc);
          if (failed_) return JValue();
          if (!dict_set(*d.m, std::move(key), std::move(val))) return JValue();
        }
        return d;
      }
      case NK::attr: {
        JValue o = eval(n->a, sc);
        if (failed_) return JValue();
        pos_ = n->pos;
        return get_attr(o, n->str);
      }
      case NK::item: return eval_item(n, sc);
      case NK::call: return eval_call(n, sc, nullptr);
      case NK::filter: return eval_filter(n, sc, nullptr);
      case NK::test: return eval_test(n, sc);
      case NK::not_: {
        JValue v = eval(n->a, sc);
        if (failed_) return JValue();
        return JValue::boolean(!jv_truthy(v));
      }
      case NK::neg:
      case NK::pos: return eval_unary(n, sc);
      case NK::binop: {
        JValue l = eval(n->a, sc);
        if (failed_) return JValue();
        JValue r = eval(n->b, sc);
        if (failed_) return JValue();
        pos_ = n->pos;
        return binop(static_cast<BinOp>(n->op), l, r);
      }
      case NK::compare: return eval_compare(n, sc);
      case NK::and_: {
        JValue l = eval(n->a, sc);
        if (failed_ || !jv_truthy(l)) return l;
        return eval(n->b, sc);
      }
      case NK::or_: {
        JValue l = eval(n->a, sc);
        if (failed_ || jv_truthy(l)) return l;
        return eval(n->b, sc);
      }
      case NK::cond: {
        JValue c = eval(n->a, sc);
        if (failed_) return JValue();
        if (jv_truthy(c)) return eval(n->b, sc);
        if (n->c) return eval(n->c, sc);
        return JValue::undefined("the inline if-expression evaluated to false and has no else section");
      }
      case NK::concat: {
        // "~" joins str() of each operand; with autoescape off the result is a plain str
        PText t;
        for (const JNode* e : n->list) {
          JValue v = eval(e, sc);
          if (failed_) return JValue();
          pos_ = n->pos;
          if (v.is_str() && !check_len(t.s.size() + v.text().size())) return JValue();
          if (!to_str(v, t) || !check_len(t.s.size())) return JValue();
        }
        if (!charge_str(t.s.size())) return JValue();
        return JValue::str(std::move(t));
      }
      case NK::slice: return failv("a slice is only valid inside [ ]");
      default: return failv("internal error: a statement where an expression was expected");
    }
  }

  JValue eval_unary(const JNode* n, const SP& sc) {
    JValue v = eval(n->a, sc);
    if (failed_) return JValue();
    pos_ = n->pos;
    bool neg = n->k == NK::neg;
    switch (v.t) {
      case JValue::T::boolean:
      case JValue::T::integer: {
        int64_t x = v.t == JValue::T::boolean ? (v.b ? 1 : 0) : v.i;
        if (!neg) return JValue::integer(x);
        if (x == INT64_MIN) return failv("integer overflow (integers are limited to 64 bits)");
        return JValue::integer(-x);
      }
      case JValue::T::real: return JValue::real(neg ? -v.d : v.d);
      case JValue::T::undef: fail_undef(v); return JValue();
      default: return failv(strf("bad operand type for unary %c: '%s'", neg ? '-' : '+', jv_type(v)));
    }
  }

  // ---- numbers ----
  static bool as_int(const JValue& v, int64_t& out) {
    if (v.t == JValue::T::integer) {
      out = v.i;
      return true;
    }
    if (v.t == JValue::T::boolean) {
      out = v.b ? 1 : 0;
      return true;
    }
    return false;
  }
  static double as_double(const JValue& v) {
    return v.t == JValue::T::real ? v.d : v.t == JValue::T::boolean ? (v.b ? 1.0 : 0.0) : static_cast<double>(v.i);
  }
  static int sgn(double x) { return (x > 0) - (x < 0); }

  JValue binop(BinOp op, const JValue& l, const JValue& r) {
    static const char* const names[] = {"+", "-", "*", "/", "//", "%", "**"};
    if (l.is_undef()) {
      fail_undef(l);
      return JValue();
    }
    if (op == BinOp::mod && l.is_str()) return percent_format(l, r);  // str.__mod__ takes anything
    if (r.is_undef()) {
      fail_undef(r);
      return JValue();
    }
    int64_t a = 0, b = 0;
    bool ints = as_int(l, a) && as_int(r, b);
    bool nums = l.is_num() && r.is_num();
    auto type_error = [&]() {
      return failv(strf("unsupported operand type(s) for %s: '%s' and '%s'", names[static_cast<int>(op)], jv_type(l),
                        jv_type(r)));
    };
    switch (op) {
      case BinOp::add:
        if (ints) {
          int64_t x;
          if (add_overflow(a, b, &x)) return failv("integer overflow (integers are limited to 64 bits)");
          return JValue::integer(x);
        }
        if (nums) return JValue::real(as_double(l) + as_double(r));
        if (l.is_str() && r.is_str()) {
          if (!check_len(l.text().size() + r.text().size()) || !charge_str(l.text().size() + r.text().size()))
            return JValue();
          PText t;
          bool markup = jv_is_markup(l) || jv_is_markup(r);
          if (markup && !jv_is_markup(l)) html_escape(t, *l.s);
          else t.add(*l.s);
          if (markup && !jv_is_markup(r)) html_escape(t, *r.s);
          else t.add(*r.s);
          return markup ? jv_markup(std::move(t)) : JValue::str(std::move(t));
        }
        if (l.is_list() && r.is_list() && l.l->kind == r.l->kind &&
            (l.l->kind == JSeq::list || l.l->kind == JSeq::tuple)) {
          if (!charge_list(l.l->items.size() + r.l->items.size())) return JValue();
          std::vector<JValue> items = l.l->items;
          items.insert(items.end(), r.l->items.begin(), r.l->items.end());
          return JValue::list(std::move(items), l.l->kind);
        }
        if (l.is_str()) return failv(strf("can only concatenate str (not \"%s\") to str", jv_type(r)));
        return type_error();
      case BinOp::sub:
        if (ints) {
          int64_t x;
          if (sub_overflow(a, b, &x)) return failv("integer overflow (integers are limited to 64 bits)");
          return JValue::integer(x);
        }
        if (nums) return JValue::real(as_double(l) - as_double(r));
        return type_error();
      case BinOp::mul: {
        if (ints) {
          int64_t x;
          if (mul_overflow(a, b, &x)) return failv("integer overflow (integers are limited to 64 bits)");
          return JValue::integer(x);
        }
        if (nums) return JValue::real(as_double(l) * as_double(r));
        const JValue* seq = nullptr;
        int64_t times = 0;
        if ((l.is_str() || l.is_list()) && as_int(r, times)) seq = &l;
        else if ((r.is_str() || r.is_list()) && as_int(l, times)) seq = &r;
        if (!seq) return type_error();
        if (times < 0) times = 0;
        if (seq->is_str()) {
          size_t unit = seq->text().size();
          if (unit && static_cast<uint64_t>(times) > opt_.max_string / unit + 1) {
            check_len(opt_.max_string + 1);
            return JValue();
          }
          if (!check_len(unit * static_cast<size_t>(times)) || !charge_str(unit * static_cast<size_t>(times)))
            return JValue();
          PText t;
          for (int64_t k = 0; k < times; k++) t.add(*seq->s);
          JValue out = JValue::str(std::move(t));
          out.b = seq->b;
          return out;
        }
        if (seq->l->kind != JSeq::list && seq->l->kind != JSeq::tuple) return type_error();
        uint64_t total = 0;
        if (mul_overflows(seq->l->items.size(), static_cast<uint64_t>(times), &total))
          return failv("list repetition too large");
        if (!charge_list(total)) return JValue();
        std::vector<JValue> items;
        for (int64_t k = 0; k < times; k++) items.insert(items.end(), seq->l->items.begin(), seq->l->items.end());
        return JValue::list(std::move(items), seq->l->kind);
      }
      case BinOp::div: {
        if (!nums) return type_error();
        double y = as_double(r);
        if (y == 0) return failv("division by zero");
        return JValue::real(as_double(l) / y);
      }
      case BinOp::floordiv:
        if (ints) {
          if (b == 0) return failv("integer division or modulo by zero");
          if (a == INT64_MIN && b == -1) return failv("integer overflow (integers are limited to 64 bits)");
          int64_t q = a / b;
          if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
          return JValue::integer(q);
        }
        if (nums) {
          double x = as_double(l), y = as_double(r);
          if (y == 0) return failv("float floor division by zero");
          return JValue::real(py_floordiv(x, y));
        }
        return type_error();
      case BinOp::mod:
        if (ints) {
          if (b == 0) return failv("integer division or modulo by zero");
          if (b == -1) return JValue::integer(0);
          int64_t m = a % b;
          if (m != 0 && ((m < 0) != (b < 0))) m += b;
          return JValue::integer(m);
        }
        if (nums) {
          double x = as_double(l), y = as_double(r);
          if (y == 0) return failv("float modulo");
          double m = std::fmod(x, y);
          if (m != 0) {
            if ((y < 0) != (m < 0)) m += y;
          } else {
            m = std::copysign(0.0, y);
          }
          return JValue::real(m);
        }
        if (l.is_str()) return percent_format(l, r);
        return type_error();
      case BinOp::pow:
        if (ints && b >= 0) {
          int64_t x = 1, base = a, e = b;
          while (e > 0) {
            if (e & 1) {
              if (mul_overflow(x, base, &x)) return failv("integer overflow (integers are limited to 64 bits)");
            }
            e >>= 1;
            if (e > 0 && mul_overflow(base, base, &base))
              return failv("integer overflow (integers are limited to 64 bits)");
          }
          return JValue::integer(x);
        }
        if (nums) {
          double x = as_double(l), y = as_double(r);
          if (x == 0 && y < 0) return failv("0.0 cannot be raised to a negative power");
          if (x < 0 && y != std::floor(y)) return failv("unsupported: a negative number to a fractional power is complex");
          return JValue::real(std::pow(x, y));
        }
        return type_error();
    }
    return type_error();
  }
  static double py_floordiv(double x, double y) {
    double mod = std::fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1.0;
    if (div != 0) {
      double f = std::floor(div);
      if (div - f > 0.5) f += 1.0;
      return f;
    }
    return std::copysign(0.0, x / y);
  }

  // ---- comparison ----
  bool py_eq(const JValue& a, const JValue& b, int depth = 0) {
    if (depth > LLMINFER_JINJA_MAX_DEPTH) return false;
    if (a.is_num() && b.is_num()) {
      int64_t x, y;
      if (as_int(a, x) && as_int(b, y)) return x == y;
      if (a.t == JValue::T::real && b.t == JValue::T::real) return a.d == b.d;
      // int vs float: exact, as Python
      double f = a.t == JValue::T::real ? a.d : b.d;
      int64_t i = 0;
      as_int(a.t == JValue::T::real ? b : a, i);
      if (!(f == std::floor(f)) || std::fabs(f) >= 9.2e18) return false;
      return static_cast<int64_t>(f) == i;
    }
    if (a.t != b.t) return false;
    switch (a.t) {
      case JValue::T::undef:
      case JValue::T::none: return true;
      case JValue::T::string:
        if (a.s == b.s) return true;
        if (a.s->s.size() != b.s->s.size()) return false;
        return charge(a.s->s.size() / 64) && a.s->s == b.s->s;
      case JValue::T::list: {
        if (a.l == b.l) return true;
        if (a.l->kind == JSeq::generator || b.l->kind == JSeq::generator) return false;  // compared by identity
        if (a.l->kind != b.l->kind || a.l->items.size() != b.l->items.size()) return false;
        for (size_t k = 0; k < a.l->items.size(); k++)
          if (!py_eq(a.l->items[k], b.l->items[k], depth + 1)) return false;
        return true;
      }
      case JValue::T::dict: {
        if (a.m == b.m) return true;
        if (a.m->items.size() != b.m->items.size()) return false;
        for (const auto& kv : a.m->items) {
          const JValue* o = dict_find(*b.m, kv.first);
          if (!o || !py_eq(kv.second, *o, depth + 1)) return false;
        }
        return true;
      }
      case JValue::T::ns: return a.m == b.m;
      case JValue::T::func: return a.f == b.f;
      case JValue::T::loop: return a.lp == b.lp;
      default: return false;
    }
  }
  // Python's ordering; false (after failing) when the types cannot be ordered.
  bool py_less(const JValue& a, const JValue& b, bool& less, const char* op = "<", int depth = 0) {
    if (a.is_undef()) return fail_undef(a);
    if (b.is_undef()) return fail_undef(b);
    if (depth > LLMINFER_JINJA_MAX_DEPTH) return fail("comparison nested too deeply");
    if (a.is_num() && b.is_num()) {
      int64_t x, y;
      if (as_int(a, x) && as_int(b, y)) {
        less = x < y;
      } else {
        less = as_double(a) < as_double(b);
      }
      return true;
    }
    if (a.is_str() && b.is_str()) {
      if (!charge(std::min(a.text().size(), b.text().size()) / 64)) return false;
      less = a.text() < b.text();
      return true;
    }
    if (a.is_list() && b.is_list() && a.l->kind == b.l->kind && (a.l->kind == JSeq::list || a.l->kind == JSeq::tuple)) {
      size_t n = std::min(a.l->items.size(), b.l->items.size());
      for (size_t k = 0; k < n; k++) {
        if (py_eq(a.l->items[k], b.l->items[k], depth + 1)) continue;
        return py_less(a.l->items[k], b.l->items[k], less, op, depth + 1);
      }
      less = a.l->items.size() < b.l->items.size();
      return true;
    }
    return fail(strf("'%s' not supported between instances of '%s' and '%s'", op, jv_type(a), jv_type(b)));
  }
  bool compare(CmpOp op, const JValue& a, const JValue& b, bool& result) {
    switch (op) {
      case CmpOp::eq: result = py_eq(a, b); return true;
      case CmpOp::ne: result = !py_eq(a, b); return true;
      case CmpOp::lt: return py_less(a, b, result, "<");
      case CmpOp::gt: return py_less(b, a, result, ">");
      case CmpOp::le: {
        bool gt;
        if (!py_less(b, a, gt, "<=")) return false;
        result = !gt;
        return true;
      }
      case CmpOp::ge: {
        bool lt;
        if (!py_less(a, b, lt, ">=")) return false;
        result = !lt;
        return true;
      }
      case CmpOp::in: return contains(b, a, result);
      case CmpOp::notin:
        if (!contains(b, a, result)) return false;
        result = !result;
        return true;
    }
    return false;
  }
  JValue eval_compare(const JNode* n, const SP& sc) {
    JValue left = eval(n->list[0], sc);
    if (failed_) return JValue();
    for (size_t k = 0; k < n->ops.size(); k++) {
      JValue right = eval(n->list[k + 1], sc);
      if (failed_) return JValue();
      pos_ = n->pos;
      bool r = false;
      if (!compare(static_cast<CmpOp>(n->ops[k]), left, right, r)) return JValue();
      if (!r) return JValue::boolean(false);
      left = std::move(right);
    }
    return JValue::boolean(true);
  }
  bool contains(const JValue& container, const JValue& item, bool& result) {
    result = false;
    switch (container.t) {
      case JValue::T::string:
        if (!item.is_str())
          return fail(strf("'in <string>' requires string as left operand, not %s", jv_type(item)));
        if (!charge(container.text().size() / 64)) return false;
        result = container.text().find(item.text()) != std::string::npos;
        return true;
      case JValue::T::list:
        if (container.l->kind == JSeq::generator) {  // consumes the generator up to the match
          for (;;) {
            JValue v;
            bool done = false;
            if (!gen_pull(*container.l, v, done)) return false;
            if (done) return true;
            if (py_eq(v, item)) return (result = true), true;
          }
        }
        if (container.l->kind == JSeq::dict_items &&
            !(item.is_list() && item.l->kind == JSeq::tuple && item.l->items.size() == 2))
          return true;  // only (key, value) pairs can be in dict.items()
        if (container.l->kind == JSeq::dict_keys || container.l->kind == JSeq::dict_items) {
          const JValue& key = container.l->kind == JSeq::dict_keys ? item : item.l->items[0];
          if (key.is_dict() || (key.is_list() && key.l->kind != JSeq::tuple))
            return fail(strf("unhashable type: '%s'", jv_type(key)));
        }
        if (!charge(container.l->items.size())) return false;
        for (const auto& v : container.l->items)
          if (py_eq(v, item)) {
            result = true;
            break;
          }
        return true;
      case JValue::T::dict:
        if (item.is_dict() || (item.is_list() && item.l->kind != JSeq::tuple))
          return fail(strf("unhashable type: '%s'", jv_type(item)));
        result = dict_find(*container.m, item) != nullptr;
        return true;
      case JValue::T::undef: return true;
      default: return fail(strf("argument of type '%s' is not iterable", jv_type(container)));
    }
  }

  // ---- dicts ----
  const JValue* dict_find(const JDict& d, const JValue& key) {
    if (d.items.size() >= 16 && !charge(d.items.size() / 16)) return nullptr;
    for (const auto& kv : d.items)
      if (py_eq(kv.first, key)) return &kv.second;
    return nullptr;
  }
  bool dict_set(JDict& d, JValue key, JValue val) {
    if (key.t == JValue::T::list && key.l->kind != JSeq::tuple) return fail("unhashable type: 'list'");
    if (key.t == JValue::T::dict) return fail("unhashable type: 'dict'");
    if (!charge(d.items.size() / 16 + 1)) return false;
    d.depth = std::max(d.depth, std::max(jv_depth(key), jv_depth(val)) + 1);
    for (auto& kv : d.items)
      if (py_eq(kv.first, key)) {
        kv.second = std::move(val);
        return true;
      }
    d.items.emplace_back(std::move(key), std::move(val));
    return true;
  }

  // ---- iteration ----
  bool iterate(const JValue& v, std::vector<JValue>& out) {
    switch (v.t) {
      case JValue::T::list:
        if (v.l->kind == JSeq::generator) {  // used up once
          out.clear();
          for (;;) {
            JValue x;
            bool done = false;
            if (!gen_pull(*v.l, x, done)) return false;
            if (done) return true;
            if (!charge_list(out.size() + 1)) return false;
            out.push_back(std::move(x));
          }
        }
        if (!charge_list(v.l->items.size())) return false;
        out = v.l->items;
        return true;
      case JValue::T::dict:
        if (!charge_list(v.m->items.size())) return false;
        out.clear();
        for (const auto& kv : v.m->items) out.push_back(kv.first);
        return true;
      case JValue::T::string: {
        const PText& s = *v.s;
        if (!charge_list(jcp_count(s.s))) return false;
        out.clear();
        size_t i = 0;
        while (i < s.s.size()) {
          size_t b = i;
          jcp_next(s.s, i);
          PText c;
          c.add_range(s, b, i);
          out.push_back(JValue::str(std::move(c)));
        }
        return true;
      }
      case JValue::T::undef: out.clear(); return true;
      default: return fail(strf("'%s' object is not iterable", jv_type(v)));
    }
  }

  // ---- generators (what map/select/... return: lazy, single use, always true, no len()) ----
  using Puller = std::function<bool(JValue& out, bool& done)>;
  // `source`: the value it pulls from (a chain of generators pulls recursively: its depth counts)
  JValue make_gen(Puller next, const JValue& source) {
    JValue v = JValue::list({}, JSeq::generator);
    v.l->next = std::move(next);
    v.l->depth = jv_depth(source) + 1;
    return v;
  }
  bool gen_pull(JList& g, JValue& out, bool& done) {
    done = false;
    if (g.next) {
      if (!charge()) return false;
      if (!g.next(out, done)) return false;  // (a generator never pulls from itself)
      if (done) g.next = nullptr;            // releases what it captured
      return true;
    }
    if (g.pos < g.items.size()) {
      out = g.items[g.pos++];
      return true;
    }
    done = true;
    return true;
  }
  // Pulls the items of any iterable one by one; a non-iterable fails on the first pull (as a
  // Python generator fails when it first runs, not when it is made).
  Puller puller(JValue v) {
    return [this, v, idx = size_t(0), off = std::vector<size_t>()](JValue& out, bool& done) mutable -> bool {
      done = false;
      switch (v.t) {
        case JValue::T::list:
          if (v.l->kind == JSeq::generator) return gen_pull(*v.l, out, done);
          if (idx >= v.l->items.size()) return (done = true), true;
          out = v.l->items[idx++];
          return true;
        case JValue::T::dict:
          if (idx >= v.m->items.size()) return (done = true), true;
          out = v.m->items[idx++].first;
          return true;
        case JValue::T::string: {
          if (off.empty()) off = jcp_offsets(v.text());
          if (idx + 1 >= off.size()) return (done = true), true;
          PText c;
          c.add_range(*v.s, off[idx], off[idx + 1]);
          idx++;
          out = JValue::str(std::move(c));
          return true;
        }
        case JValue::T::undef: done = true; return true;
        default: return fail(strf("'%s' object is not iterable", jv_type(v)));
      }
    };
  }

  // ---- attribute and item access (Jinja2 sandbox rules) ----
  static bool is_str_method(std::string_view n) {
    static const char* const names[] = {
        "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format",
        "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower",
        "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "maketrans",
        "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit",
        "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill"};
    for (const char* x : names)
      if (n == x) return true;
    return false;
  }
  JValue bound(const JValue& self, std::string_view name) {
    JFunc f;
    f.kind = FnKind::method;
    f.name = std::string(name);
    f.self = self;
    return jv_func(std::move(f));
  }
  JValue get_attr(const JValue& obj, const std::string& name) {
    switch (obj.t) {
      case JValue::T::undef: fail_undef(obj); return JValue();
      case JValue::T::string:
        if (is_str_method(name)) return bound(obj, name);
        break;
      case JValue::T::list: {
        static const char* const mutators[] = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
        bool tuple = obj.l->kind == JSeq::tuple;
        if (obj.l->kind == JSeq::list || tuple) {
          if (name == "index" || name == "count" || (!tuple && name == "copy")) return bound(obj, name);
          if (!tuple)
            for (const char* m : mutators)
              if (name == m) return unsafe_attr(obj, name);
        }
        break;
      }
      case JValue::T::dict:
        if (name == "items" || name == "keys" || name == "values" || name == "get" || name == "copy")
          return bound(obj, name);
        if (name == "pop" || name == "popitem" || name == "update" || name == "setdefault" || name == "clear")
          return unsafe_attr(obj, name);
        if (name == "fromkeys") return failv("unsupported construct: dict.fromkeys");
        if (const JValue* v = obj.m->find(name)) return *v;
        break;
      case JValue::T::ns:
        if (const JValue* v = obj.m->find(name)) return *v;
        break;
      case JValue::T::loop: return loop_attr(obj, name);
      case JValue::T::integer:
      case JValue::T::boolean:
        if (name == "real" || name == "numerator") return JValue::integer(obj.t == JValue::T::boolean ? obj.b : obj.i);
        if (name == "imag") return JValue::integer(0);
        if (name == "denominator") return JValue::integer(1);
        break;
      case JValue::T::real:
        if (name == "real") return obj;
        if (name == "imag") return JValue::real(0.0);
        break;
      case JValue::T::func:
        if (obj.f->kind == FnKind::cycler_next && name == "next") return obj;
        if (obj.f->kind == FnKind::cycler_next && name == "current") {
          const JList& items = *obj.f->self.l;
          int64_t pos = items.items.empty() ? 0 : obj.f->self.i;
          return items.items.empty() ? JValue::none() : items.items[static_cast<size_t>(pos)];
        }
        if (obj.f->kind == FnKind::cycler_next && name == "reset") {
          JFunc f = *obj.f;
          f.kind = FnKind::cycler_reset;
          JValue v = jv_func(std::move(f));
          v.f->self = obj.f->self;
          v.f->node = nullptr;
          v.f->closure.reset();
          v.f->name = "reset";
          JValue holder = obj;  // reset acts on the same state
          v.f->self = holder;
          return v;
        }
        break;
      default: break;
    }
    if (name.size() > 1 && name[0] == '_' && name[1] == '_') return unsafe_attr(obj, name);
    return undef_attr(obj, name);
  }
  JValue loop_attr(const JValue& obj, const std::string& name) {
    const JLoop& L = *obj.lp;
    if (name == "index0") return JValue::integer(L.index0);
    if (name == "index") return JValue::integer(L.index0 + 1);
    if (name == "revindex") return JValue::integer(L.length - L.index0);
    if (name == "revindex0") return JValue::integer(L.length - L.index0 - 1);
    if (name == "first") return JValue::boolean(L.index0 == 0);
    if (name == "last") return JValue::boolean(L.index0 + 1 == L.length);
    if (name == "length") return JValue::integer(L.length);
    if (name == "depth") return JValue::integer(L.depth0 + 1);
    if (name == "depth0") return JValue::integer(L.depth0);
    if (name == "previtem") {
      if (L.index0 == 0) return JValue::undefined("there is no previous item");
      return L.items->items[static_cast<size_t>(L.index0 - 1)];
    }
    if (name == "nextitem") {
      if (L.index0 + 1 >= L.length) return JValue::undefined("there is no next item");
      return L.items->items[static_cast<size_t>(L.index0 + 1)];
    }
    if (name == "cycle" || name == "changed") {
      JFunc f;
      f.kind = name == "cycle" ? FnKind::loop_cycle : FnKind::loop_changed;
      f.name = name;
      f.self = obj;
      return jv_func(std::move(f));
    }
    return undef_attr(obj, name);
  }
  JValue get_item(const JValue& obj, const JValue& key) {
    int64_t idx;
    switch (obj.t) {
      case JValue::T::undef: fail_undef(obj); return JValue();
      case JValue::T::list:
        if ((obj.l->kind == JSeq::list || obj.l->kind == JSeq::tuple || obj.l->kind == JSeq::range) && as_int(key, idx)) {
          int64_t n = static_cast<int64_t>(obj.l->items.size());
          if (idx < 0) idx += n;
          if (idx < 0 || idx >= n) return JValue::undefined(strf("'%s object' has no element %lld", jv_type(obj),
                                                                 static_cast<long long>(as_int(key, idx) ? idx : 0)));
          return obj.l->items[static_cast<size_t>(idx)];
        }
        break;
      case JValue::T::string:
        if (as_int(key, idx)) {
          // walks to the code point (no table of offsets: 8 bytes per byte of a long string)
          const PText& s = *obj.s;
          if (!charge(s.s.size() / 64)) return JValue();
          if (idx < 0) idx += static_cast<int64_t>(jcp_count(s.s));
          size_t i = 0;
          for (int64_t k = 0; k < idx && i < s.s.size(); k++) jcp_next(s.s, i);
          if (idx < 0 || i >= s.s.size()) return JValue::undefined("string index out of range");
          size_t b = i;
          jcp_next(s.s, i);
          PText c;
          c.add_range(s, b, i);
          return JValue::str(std::move(c));
        }
        break;
      case JValue::T::dict:
        if (const JValue* v = dict_find(*obj.m, key)) return *v;
        break;
      default: break;
    }
    if (key.is_str()) return get_attr(obj, key.text());
    return JValue::undefined(strf("'%s object' has no element", jv_type(obj)));
  }

  JValue eval_item(const JNode* n, const SP& sc) {
    JValue obj = eval(n->a, sc);
    if (failed_) return JValue();
    if (n->b->k == NK::slice) {
      const JNode* s = n->b;
      JValue parts[3];
      const JNode* nodes[3] = {s->b, s->c, s->d};
      for (int k = 0; k < 3; k++) {
        if (nodes[k]) {
          parts[k] = eval(nodes[k], sc);
          if (failed_) return JValue();
        } else {
          parts[k] = JValue::none();
        }
      }
      pos_ = n->pos;
      if (fold_ && !obj.is_undef() && !obj.is_str() && !(obj.is_list() && (obj.l->kind == JSeq::list || obj.l->kind == JSeq::tuple || obj.l->kind == JSeq::range)))
        return JValue::undefined(strf("'%s' object is not subscriptable", jv_type(obj)));
      return slice(obj, parts[0], parts[1], parts[2]);
    }
    JValue key = eval(n->b, sc);
    if (failed_) return JValue();
    pos_ = n->pos;
    return get_item(obj, key);
  }

  // Python slice semantics on str / list / tuple; anything else gives undefined (as Jinja2's getitem).
  JValue slice(const JValue& obj, const JValue& start, const JValue& stop, const JValue& step) {
    if (obj.is_undef()) {
      fail_undef(obj);
      return JValue();
    }
    int64_t st = 1;
    if (!step.is_none() && !as_int(step, st)) return failv("slice indices must be integers or None or have an __index__ method");
    if (st == 0) return failv("slice step cannot be zero");
    bool is_str = obj.is_str();
    bool is_seq = obj.is_list() && (obj.l->kind == JSeq::list || obj.l->kind == JSeq::tuple || obj.l->kind == JSeq::range);
    if (!is_str && !is_seq) {
      if (obj.is_dict()) return failv("unhashable type: 'slice'");
      return failv(strf("'%s' object is not subscriptable", jv_type(obj)));
    }
    std::vector<size_t> off;
    int64_t n;
    if (is_str) {
      off = jcp_offsets(obj.text());
      n = static_cast<int64_t>(off.size()) - 1;
    } else {
      n = static_cast<int64_t>(obj.l->items.size());
    }
    auto adjust = [&](const JValue& v, int64_t def, int64_t& out) -> bool {
      if (v.is_none()) {
        out = def;
        return true;
      }
      if (!as_int(v, out)) return false;
      if (out < 0) {
        out += n;
        if (out < 0) out = st < 0 ? -1 : 0;
      } else if (out >= n) {
        out = st < 0 ? n - 1 : n;
      }
      return true;
    };
    int64_t b, e;
    if (!adjust(start, st < 0 ? n - 1 : 0, b) || !adjust(stop, st < 0 ? -1 : n, e))
      return failv("slice indices must be integers or None or have an __index__ method");
    if (!charge(static_cast<uint64_t>(n) / 8 + 1)) return JValue();
    if (is_str) {
      const PText& s = *obj.s;
      PText t;
      if (st == 1) {
        if (e > b) t.add_range(s, off[static_cast<size_t>(b)], off[static_cast<size_t>(e)]);
      } else {
        for (int64_t k = b; st > 0 ? k < e : k > e; k += st)
          t.add_range(s, off[static_cast<size_t>(k)], off[static_cast<size_t>(k) + 1]);
      }
      if (!charge_str(t.s.size())) return JValue();
      JValue r = JValue::str(std::move(t));
      r.b = obj.b;
      return r;
    }
    std::vector<JValue> items;
    for (int64_t k = b; st > 0 ? k < e : k > e; k += st) items.push_back(obj.l->items[static_cast<size_t>(k)]);
    JValue r = JValue::list(std::move(items), obj.l->kind);
    if (obj.l->kind == JSeq::range) {
      // a sliced range is a range: range(start + b*step, start + e*step, step*st)
      int64_t rs[3] = {0, 0, 1};
      std::string_view tag = obj.l->tag;
      size_t at = tag.find('(');
      for (int k = 0; k < 3 && at != std::string_view::npos && at + 1 < tag.size(); k++) {
        size_t from = at + 1;
        while (from < tag.size() && tag[from] == ' ') from++;
        std::from_chars(tag.data() + from, tag.data() + tag.size(), rs[k]);
        at = tag.find(',', from);
      }
      long double lo = static_cast<long double>(rs[0]) + static_cast<long double>(b) * rs[2];
      long double hi = static_cast<long double>(rs[0]) + static_cast<long double>(e) * rs[2];
      long double stp = static_cast<long double>(rs[2]) * st;
      if (std::fabs(lo) > 9e18L || std::fabs(hi) > 9e18L || std::fabs(stp) > 9e18L)
        return failv("integer overflow (integers are limited to 64 bits)");
      r.l->tag = stp != 1 ? strf("range(%lld, %lld, %lld)", static_cast<long long>(lo), static_cast<long long>(hi),
                                 static_cast<long long>(stp))
                          : strf("range(%lld, %lld)", static_cast<long long>(lo), static_cast<long long>(hi));
    }
    return r;
  }

  // ================================================================ calls
  bool eval_args(const JNode* n, const SP& sc, JArgs& args) {
    for (const JNode* e : n->list) {
      args.pos.push_back(eval(e, sc));
      if (failed_) return false;
    }
    if (n->dyn_args) {
      JValue v = eval(n->dyn_args, sc);
      if (failed_) return false;
      std::vector<JValue> more;
      if (!iterate(v, more)) return false;
      for (auto& x : more) args.pos.push_back(std::move(x));
    }
    for (size_t k = 0; k < n->names.size(); k++) {
      JValue v = eval(n->kw[k], sc);
      if (failed_) return false;
      args.kw.emplace_back(n->names[k], std::move(v));
    }
    if (n->dyn_kwargs) {
      JValue v = eval(n->dyn_kwargs, sc);
      if (failed_) return false;
      if (!v.is_dict()) return fail("argument after ** must be a mapping");
      for (const auto& kv : v.m->items) {
        if (!kv.first.is_str()) return fail("keywords must be strings");
        args.kw.emplace_back(kv.first.text(), kv.second);
      }
    }
    return true;
  }

  JValue eval_call(const JNode* n, const SP& sc, const JValue* caller) {
    JValue fn = eval(n->a, sc);
    if (failed_) return JValue();
    JArgs args;
    if (!eval_args(n, sc, args)) return JValue();
    if (caller) args.kw.emplace_back("caller", *caller);
    pos_ = n->pos;
    return call(fn, args);
  }

  // Binds arguments to a fixed signature; out[k] is null when parameter k was not given.
  bool bind(const JArgs& a, std::initializer_list<const char*> params, std::vector<const JValue*>& out,
            std::string_view what) {
    out.assign(params.size(), nullptr);
    if (a.pos.size() > params.size())
      return fail(strf("%.*s takes at most %zu argument(s) (%zu given)", static_cast<int>(what.size()), what.data(),
                       params.size(), a.pos.size()));
    for (size_t k = 0; k < a.pos.size(); k++) out[k] = &a.pos[k];
    for (const auto& kv : a.kw) {
      size_t k = 0;
      for (const char* p : params) {
        if (kv.first == p) break;
        k++;
      }
      if (k == params.size())
        return fail(strf("%.*s got an unexpected keyword argument '%s'", static_cast<int>(what.size()), what.data(),
                         kv.first.c_str()));
      if (out[k])
        return fail(strf("%.*s got multiple values for argument '%s'", static_cast<int>(what.size()), what.data(),
                         kv.first.c_str()));
      out[k] = &kv.second;
    }
    return true;
  }

  JValue call(const JValue& fn, const JArgs& args) {
    switch (fn.t) {
      case JValue::T::undef: fail_undef(fn); return JValue();
      case JValue::T::func: break;
      case JValue::T::loop: return failv("unsupported construct: calling loop() (recursive loops)");
      default: return failv(strf("'%s' object is not callable", jv_type(fn)));
    }
    const JFunc& f = *fn.f;
    switch (f.kind) {
      case FnKind::global: return call_global(f.name, args);
      case FnKind::method: return call_method(f.self, f.name, args);
      case FnKind::macro:
      case FnKind::caller: return call_macro(fn, args);
      case FnKind::cycler_next: {
        if (!args.pos.empty() || !args.kw.empty()) return failv("cycler.next() takes no arguments");
        JValue& state = fn.f->self;  // l: items, i: position
        if (state.l->items.empty()) return JValue::none();
        JValue v = state.l->items[static_cast<size_t>(state.i)];
        state.i = (state.i + 1) % static_cast<int64_t>(state.l->items.size());
        return v;
      }
      case FnKind::cycler_reset:
        f.self.f->self.i = 0;
        return JValue::none();
      case FnKind::joiner: {
        if (!args.pos.empty() || !args.kw.empty()) return failv("joiner() takes no arguments");
        JValue& state = fn.f->self;  // s: separator, i: used
        if (!state.i) {
          state.i = 1;
          return JValue::str("");
        }
        return JValue::str(*state.s);
      }
      case FnKind::loop_cycle: {
        if (args.pos.empty()) return failv("no items for cycling given");
        const JLoop& L = *f.self.lp;
        return args.pos[static_cast<size_t>(L.index0 % static_cast<int64_t>(args.pos.size()))];
      }
      case FnKind::loop_changed: {
        JLoop& L = *f.self.lp;
        JValue v = JValue::list(args.pos, JSeq::tuple);
        if (!L.has_changed || !py_eq(L.last_changed, v)) {
          L.has_changed = true;
          L.last_changed = v;
          return JValue::boolean(true);
        }
        return JValue::boolean(false);
      }
    }
    return failv("internal error: unknown callable");
  }

  JValue call_macro(const JValue& fn, const JArgs& args) {
    const JFunc& f = *fn.f;
    const JNode* m = f.node;
    auto closure = f.closure.lock();
    if (!closure) return failv(strf("macro '%s' is called after the scope that defined it ended", f.name.c_str()));
    if (++call_depth_ > LLMINFER_JINJA_MAX_CALL_DEPTH) {
      call_depth_--;
      return failv(strf("macro calls nested more than %d deep (unbounded recursion?)", LLMINFER_JINJA_MAX_CALL_DEPTH));
    }
    struct Dec {
      int& d;
      ~Dec() { d--; }
    } dec{call_depth_};
    bool uses_varargs = m->op & 1, uses_kwargs = m->op & 2, uses_caller = m->op & 4;
    auto sc = std::make_shared<JScope>();
    sc->parent = closure;
    const auto& params = m->names;
    std::vector<bool> given(params.size(), false);
    size_t npos = std::min(args.pos.size(), params.size());
    for (size_t k = 0; k < npos; k++) {
      sc->set(params[k], args.pos[k]);
      given[k] = true;
    }
    if (args.pos.size() > params.size() && !uses_varargs)
      return failv(strf("macro '%s' takes not more than %zu argument(s)", f.name.c_str(), params.size()));
    JValue kwargs;
    kwargs.t = JValue::T::dict;
    kwargs.m = std::make_shared<JDict>();
    bool have_caller = false;
    for (const auto& kv : args.kw) {
      size_t k = 0;
      while (k < params.size() && params[k] != kv.first) k++;
      if (k < params.size()) {
        if (given[k])
          return failv(strf("macro '%s' got multiple values for argument '%s'", f.name.c_str(), kv.first.c_str()));
        sc->set(params[k], kv.second);
        given[k] = true;
      } else if (kv.first == "caller" && f.kind == FnKind::macro && uses_caller) {
        sc->set("caller", kv.second);
        have_caller = true;
      } else if (uses_kwargs) {
        kwargs.m->items.emplace_back(JValue::str(kv.first), kv.second);
      } else if (kv.first == "caller" && f.kind == FnKind::macro) {
        // a call block whose macro never calls caller(): Jinja2 accepts it
      } else {
        return failv(strf("macro '%s' takes no keyword argument '%s'", f.name.c_str(), kv.first.c_str()));
      }
    }
    size_t first_default = params.size() - m->list.size();
    for (size_t k = 0; k < params.size(); k++) {
      if (given[k]) continue;
      if (k >= first_default) {
        JValue d = eval(m->list[k - first_default], sc);
        if (failed_) return JValue();
        sc->set(params[k], std::move(d));
      } else {
        sc->set(params[k], JValue::undefined(strf("parameter '%s' was not provided", params[k].c_str())));
      }
    }
    if (uses_varargs) {
      std::vector<JValue> extra;
      for (size_t k = params.size(); k < args.pos.size(); k++) extra.push_back(args.pos[k]);
      sc->set("varargs", JValue::list(std::move(extra), JSeq::tuple));
    }
    if (uses_kwargs) sc->set("kwargs", kwargs);
    if (uses_caller && !have_caller && f.kind == FnKind::macro) sc->set("caller", JValue::undefined("no caller defined"));
    predeclare(m->undef_names, *sc);
    PText out;
    Flow saved = flow_;
    flow_ = Flow::normal;
    bool ok = exec(m->body, sc, out);
    flow_ = saved;
    if (!ok) return JValue();
    return JValue::str(std::move(out));
  }

  // ---- globals ----
  JValue call_global(const std::string& name, const JArgs& args) {
    std::vector<const JValue*> a;
    if (name == "raise_exception") {
      if (!bind(args, {"message"}, a, "raise_exception()")) return JValue();
      PText t;
      if (a[0] && !to_str(*a[0], t)) return JValue();
      raised = true;
      return failv(t.s);
    }
    if (name == "strftime_now") {
      if (!bind(args, {"format"}, a, "strftime_now()")) return JValue();
      if (!a[0] || !a[0]->is_str()) return failv("strftime_now() expects a format string");
      std::tm tm = opt_.clock ? opt_.clock() : local_now();
      std::string out;
      if (!strftime_py(a[0]->text(), tm, out)) return JValue();
      return JValue::str(std::move(out));
    }
    if (name == "range") {
      int64_t v[3] = {0, 0, 1};
      if (!args.kw.empty()) return failv("range() takes no keyword arguments");
      if (args.pos.empty() || args.pos.size() > 3)
        return failv(strf("range expected 1 to 3 arguments, got %zu", args.pos.size()));
      for (size_t k = 0; k < args.pos.size(); k++)
        if (!as_int(args.pos[k], v[k]))
          return failv(strf("'%s' object cannot be interpreted as an integer", jv_type(args.pos[k])));
      int64_t start = 0, stop = v[0], step = 1;
      if (args.pos.size() >= 2) {
        start = v[0];
        stop = v[1];
      }
      if (args.pos.size() == 3) step = v[2];
      if (step == 0) return failv("range() arg 3 must not be zero");
      long double count = 0;
      if (step > 0 && stop > start) count = std::ceil((static_cast<long double>(stop) - start) / step);
      if (step < 0 && stop < start) count = std::ceil((static_cast<long double>(start) - stop) / -static_cast<long double>(step));
      if (count > LLMINFER_JINJA_MAX_RANGE)
        return failv(strf("range too big: the sandbox blocks ranges larger than %d items", LLMINFER_JINJA_MAX_RANGE));
      if (!charge_list(static_cast<uint64_t>(count))) return JValue();
      std::vector<JValue> items;
      items.reserve(static_cast<size_t>(count));
      for (int64_t k = 0; k < static_cast<int64_t>(count); k++) items.push_back(JValue::integer(start + k * step));
      JValue r = JValue::list(std::move(items), JSeq::range);
      r.l->tag = args.pos.size() == 3 && step != 1
                     ? strf("range(%lld, %lld, %lld)", static_cast<long long>(start), static_cast<long long>(stop),
                            static_cast<long long>(step))
                     : strf("range(%lld, %lld)", static_cast<long long>(start), static_cast<long long>(stop));
      return r;
    }
    if (name == "dict" || name == "namespace") {
      JValue d;
      if (name == "dict") {
        d.t = JValue::T::dict;
        d.m = std::make_shared<JDict>();
      } else {
        d = make_ns();
      }
      if (args.pos.size() > 1) return failv(strf("%s expected at most 1 argument, got %zu", name.c_str(), args.pos.size()));
      if (!args.pos.empty()) {
        const JValue& src = args.pos[0];
        if (src.is_dict() || src.t == JValue::T::ns) {
          for (const auto& kv : src.m->items)
            if (!dict_set(*d.m, kv.first, kv.second)) return JValue();
        } else {
          std::vector<JValue> pairs;
          if (!iterate(src, pairs)) return JValue();
          for (auto& p : pairs) {
            std::vector<JValue> kv;
            if (!iterate(p, kv)) return JValue();
            if (kv.size() != 2) return failv("dictionary update sequence element has the wrong length; 2 is required");
            if (!dict_set(*d.m, kv[0], kv[1])) return JValue();
          }
        }
      }
      for (const auto& kv : args.kw)
        if (!dict_set(*d.m, JValue::str(kv.first), kv.second)) return JValue();
      return d;
    }
    if (name == "cycler") {
      if (!args.kw.empty()) return failv(strf("cycler() got an unexpected keyword argument '%s'", args.kw[0].first.c_str()));
      if (args.pos.empty()) return failv("cycler(): at least one item has to be provided");
      JFunc f;
      f.kind = FnKind::cycler_next;
      f.name = "cycler";
      f.self = JValue::list(args.pos);
      f.self.i = 0;
      return jv_func(std::move(f));
    }
    if (name == "joiner") {
      if (!bind(args, {"sep"}, a, "joiner()")) return JValue();
      JFunc f;
      f.kind = FnKind::joiner;
      f.name = "joiner";
      PText sep(", ");
      if (a[0]) {
        sep = PText();
        if (!to_str(*a[0], sep)) return JValue();
      }
      f.self = JValue::str(std::move(sep));
      f.self.i = 0;
      return jv_func(std::move(f));
    }
    return failv(strf("unsupported construct: the global function '%s'", name.c_str()));
  }

  static std::tm local_now() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
#if defined(_WIN32)
    localtime_s(&tm, &t);
#else
    localtime_r(&t, &tm);
#endif
    return tm;
  }
  // C-locale strftime for the directives templates use (glibc's "%-d" style flags too).
  bool strftime_py(const std::string& fmt, const std::tm& tm, std::string& out) {
    static const char* const wd[] = {"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
    static const char* const mo[] = {"January", "February", "March",     "April",   "May",      "June",
                                     "July",    "August",   "September", "October", "November", "December"};
    int wday = ((tm.tm_wday % 7) + 7) % 7, mon = ((tm.tm_mon % 12) + 12) % 12;
    for (size_t k = 0; k < fmt.size(); k++) {
      if (fmt[k] != '%' || k + 1 >= fmt.size()) {
        out += fmt[k];
        continue;
      }
      char c = fmt[++k];
      bool nopad = false;
      if (c == '-' && k + 1 < fmt.size()) {
        nopad = true;
        c = fmt[++k];
      }
      auto num = [&](long v, int width) { out += nopad ? strf("%ld", v) : strf("%0*ld", width, v); };
      switch (c) {
        case '%': out += '%'; break;
        case 'a': out += std::string(wd[wday]).substr(0, 3); break;
        case 'A': out += wd[wday]; break;
        case 'b':
        case 'h': out += std::string(mo[mon]).substr(0, 3); break;
        case 'B': out += mo[mon]; break;
        case 'd': num(tm.tm_mday, 2); break;
        case 'e': out += nopad ? strf("%d", tm.tm_mday) : strf("%2d", tm.tm_mday); break;
        case 'm': num(mon + 1, 2); break;
        case 'y': num(((tm.tm_year + 1900) % 100 + 100) % 100, 2); break;
        case 'Y': out += strf("%ld", static_cast<long>(tm.tm_year) + 1900); break;
        case 'H': num(tm.tm_hour, 2); break;
        case 'I': num(tm.tm_hour % 12 == 0 ? 12 : tm.tm_hour % 12, 2); break;
        case 'M': num(tm.tm_min, 2); break;
        case 'S': num(tm.tm_sec, 2); break;
        case 'p': out += tm.tm_hour < 12 ? "AM" : "PM"; break;
        case 'j': num(tm.tm_yday + 1, 3); break;
        case 'w': out += strf("%d", wday); break;
        case 'u': out += strf("%d", wday == 0 ? 7 : wday); break;
        case 'D': out += strf("%02d/%02d/%02d", mon + 1, tm.tm_mday, ((tm.tm_year + 1900) % 100 + 100) % 100); break;
        case 'F': out += strf("%ld-%02d-%02d", static_cast<long>(tm.tm_year) + 1900, mon + 1, tm.tm_mday); break;
        case 'T': out += strf("%02d:%02d:%02d", tm.tm_hour, tm.tm_min, tm.tm_sec); break;
        case 'R': out += strf("%02d:%02d", tm.tm_hour, tm.tm_min); break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        default: return fail(strf("unsupported construct: strftime_now directive '%%%c'", c));
      }
    }
    return check_len(out.size());
  }

  // ================================================================ printing
  bool to_str(const JValue& v, PText& out, int depth = 0) {
    switch (v.t) {
      case JValue::T::undef: return true;
      case JValue::T::none: out.add("None"); return true;
      case JValue::T::boolean: out.add(v.b ? "True" : "False"); return true;
      case JValue::T::integer: out.add(std::to_string(v.i)); return true;
      case JValue::T::real: out.add(py_float_repr(v.d)); return true;
      case JValue::T::string: out.add(*v.s); return true;
      case JValue::T::list:
      case JValue::T::dict:
      case JValue::T::ns: {
        size_t before = out.s.size();
        return repr(v, out, depth) && charge_str(out.s.size() - before) && check_len(out.s.size());
      }
      case JValue::T::func: return fail("unsupported construct: printing a function or macro object");
      case JValue::T::loop: return fail("unsupported construct: printing a loop object");
    }
    return true;
  }
  bool repr(const JValue& v, PText& out, int depth = 0) {
    if (depth > LLMINFER_JINJA_MAX_DEPTH) return fail("value nested too deeply to print");
    if (!charge() || !check_len(out.s.size())) return false;
    switch (v.t) {
      case JValue::T::undef: out.add("Undefined"); return true;
      case JValue::T::string:
        if (v.b) {
          out.add("Markup(");
          py_repr_str(out, *v.s);
          out.add(")");
        } else {
          py_repr_str(out, *v.s);
        }
        return true;
      case JValue::T::list: {
        const JList& L = *v.l;
        const char* open = "[";
        const char* close = "]";
        switch (L.kind) {
          case JSeq::tuple: open = "("; close = L.items.size() == 1 ? ",)" : ")"; break;
          case JSeq::dict_items: open = "dict_items(["; close = "])"; break;
          case JSeq::dict_keys: open = "dict_keys(["; close = "])"; break;
          case JSeq::dict_values: open = "dict_values(["; close = "])"; break;
          case JSeq::range: out.add(L.tag); return true;
          case JSeq::generator: return fail("unsupported construct: printing a generator (add |list)");
          default: break;
        }
        if (std::find(repr_stack_.begin(), repr_stack_.end(), v.l.get()) != repr_stack_.end()) {
          out.add(L.kind == JSeq::tuple ? "(...)" : "[...]");  // Python's marker for a container inside itself
          return true;
        }
        repr_stack_.push_back(v.l.get());
        out.add(open);
        for (size_t k = 0; k < L.items.size(); k++) {
          if (k) out.add(", ");
          if (!repr(L.items[k], out, depth + 1)) return false;
        }
        out.add(close);
        repr_stack_.pop_back();
        return true;
      }
      case JValue::T::dict:
      case JValue::T::ns: {
        if (v.t == JValue::T::ns) out.add("<Namespace ");
        if (std::find(repr_stack_.begin(), repr_stack_.end(), v.m.get()) != repr_stack_.end()) {
          out.add(v.t == JValue::T::ns ? "{...}>" : "{...}");
          return true;
        }
        repr_stack_.push_back(v.m.get());
        out.add("{");
        bool first = true;
        for (const auto& kv : v.m->items) {
          if (!first) out.add(", ");
          first = false;
          if (!repr(kv.first, out, depth + 1)) return false;
          out.add(": ");
          if (!repr(kv.second, out, depth + 1)) return false;
        }
        out.add("}");
        if (v.t == JValue::T::ns) out.add(">");
        repr_stack_.pop_back();
        return true;
      }
      default: return to_str(v, out, depth);
    }
  }

  // ---- JSON (transformers' tojson: json.dumps with ensure_ascii=False by default) ----
  struct JsonOpts {
    bool ensure_ascii = false;
    bool indent_set = false;
    std::string indent;
    std::string item_sep = ", ", key_sep = ": ";
    bool sort_keys = false;
  };
  void json_str(PText& out, const PText& s, bool ensure_ascii) {
    out.add('"');
    size_t i = 0;
    while (i < s.s.size()) {
      size_t b = i;
      uint32_t c = jcp_next(s.s, i);
      bool content = s.content_in(b, i);
      switch (c) {
        case '"': out.add("\\\"", content); continue;
        case '\\': out.add("\\\\", content); continue;
        case '\n': out.add("\\n", content); continue;
        case '\r': out.add("\\r", content); continue;
        case '\t': out.add("\\t", content); continue;
        case '\b': out.add("\\b", content); continue;
        case '\f': out.add("\\f", content); continue;
        default: break;
      }
      if (c < 0x20) {
        out.add(strf("\\u%04x", c), content);
      } else if (ensure_ascii && c >= 0x7F) {
        if (c >= 0x10000) {
          uint32_t v = c - 0x10000;
          out.add(strf("\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)), content);
        } else {
          out.add(strf("\\u%04x", c), content);
        }
      } else {
        out.add(std::string_view(s.s).substr(b, i - b), content);
      }
    }
    out.add('"');
  }
  bool json_key(const JValue& k, PText& key) {
    switch (k.t) {
      case JValue::T::string: key.add(*k.s); return true;
      case JValue::T::integer: key.add(std::to_string(k.i)); return true;
      case JValue::T::boolean: key.add(k.b ? "true" : "false"); return true;
      case JValue::T::none: key.add("null"); return true;
      case JValue::T::real: key.add(json_float(k.d)); return true;
      default: return fail(strf("keys must be str, int, float, bool or None, not %s", jv_type(k)));
    }
  }
  static std::string json_float(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
    return py_float_repr(d);
  }
  bool to_json(const JValue& v, PText& out, const JsonOpts& o, int level) {
    if (level > LLMINFER_JINJA_MAX_DEPTH) return fail("value nested too deeply for tojson (circular reference?)");
    if (!charge() || !check_len(out.s.size())) return false;
    auto newline = [&](int lv) {
      if (!o.indent_set) return;
      out.add("\n");
      for (int k = 0; k < lv; k++) out.add(o.indent);
    };
    switch (v.t) {
      case JValue::T::none: out.add("null"); return true;
      case JValue::T::boolean: out.add(v.b ? "true" : "false"); return true;
      case JValue::T::integer: out.add(std::to_string(v.i)); return true;
      case JValue::T::real: out.add(json_float(v.d)); return true;
      case JValue::T::string: json_str(out, *v.s, o.ensure_ascii); return true;
      case JValue::T::list: {
        if (v.l->kind == JSeq::dict_items || v.l->kind == JSeq::dict_keys || v.l->kind == JSeq::dict_values ||
            v.l->kind == JSeq::generator || v.l->kind == JSeq::range)
          return fail(strf("Object of type %s is not JSON serializable", jv_type(v)));
        if (v.l->items.empty()) {
          out.add("[]");
          return true;
        }
        out.add("[");
        for (size_t k = 0; k < v.l->items.size(); k++) {
          if (k) out.add(o.item_sep);
          newline(level + 1);
          if (!to_json(v.l->items[k], out, o, level + 1)) return false;
        }
        newline(level);
        out.add("]");
        return true;
      }
      case JValue::T::dict: {
        if (v.m->items.empty()) {
          out.add("{}");
          return true;
        }
        std::vector<size_t> order(v.m->items.size());
        for (size_t k = 0; k < order.size(); k++) order[k] = k;
        if (o.sort_keys) {
          std::vector<JValue> keys;
          for (const auto& kv : v.m->items) keys.push_back(kv.first);
          if (!sort_indices(keys, order, false)) return false;
        }
        out.add("{");
        bool first = true;
        for (size_t k : order) {
          const auto& kv = v.m->items[k];
          if (!first) out.add(o.item_sep);
          first = false;
          newline(level + 1);
          PText key;
          if (!json_key(kv.first, key)) return false;
          json_str(out, key, o.ensure_ascii);
          out.add(o.key_sep);
          if (!to_json(kv.second, out, o, level + 1)) return false;
        }
        newline(level);
        out.add("}");
        return true;
      }
      default: return fail(strf("Object of type %s is not JSON serializable", jv_type(v)));
    }
  }

  // Stable merge sort of indices by Python ordering of keys (safe with any comparison outcome).
  // eq_first: keys compare as one-item lists (Jinja2's |sort), so equal keys never reach "<".
  bool sort_indices(const std::vector<JValue>& keys, std::vector<size_t>& idx, bool reverse, bool eq_first = false) {
    size_t n = idx.size();
    if (!charge(n * 4 + 1)) return false;
    std::vector<size_t> tmp(n);
    for (size_t width = 1; width < n; width *= 2) {
      for (size_t lo = 0; lo < n; lo += 2 * width) {
        size_t mid = std::min(lo + width, n), hi = std::min(lo + 2 * width, n);
        size_t a = lo, b = mid, o = lo;
        while (a < mid && b < hi) {
          bool less = false;
          // stable: take from the right run only when it is strictly before the left one
          if (eq_first && py_eq(keys[idx[a]], keys[idx[b]])) {
            less = false;
          } else if (reverse) {
            if (!py_less(keys[idx[a]], keys[idx[b]], less)) return false;
          } else {
            if (!py_less(keys[idx[b]], keys[idx[a]], less)) return false;
          }
          tmp[o++] = less ? idx[b++] : idx[a++];
        }
        while (a < mid) tmp[o++] = idx[a++];
        while (b < hi) tmp[o++] = idx[b++];
      }
      idx.swap(tmp);
    }
    return true;
  }

  // ---- builtins (38_jinja_builtins.hpp) ----
  JValue eval_filter(const JNode* n, const SP& sc, const JValue* subject);
  JValue eval_test(const JNode* n, const SP& sc);
  JValue apply_filter(const std::string& name, const JValue& v, const JArgs& args, const SP& sc);
  bool run_test(const std::string& name, const JValue& v, const JArgs& args, bool& result);
  JValue call_method(const JValue& self, const std::string& name, const JArgs& args);
  JValue percent_format(const JValue& fmt, const JValue& args);
  JValue str_format(const JValue& self, const JArgs& args);
  JValue attr_path(const JValue& item, const JValue& path, const JValue* def);
  static bool parse_py_int(std::string_view s, int base, int64_t& out);
  static bool parse_py_float(std::string_view s, double& out);

  const JProgram& prog_;
  JRenderOptions opt_;
  std::vector<std::weak_ptr<JDict>> namespaces_;
  enum class Flow : uint8_t { normal, brk, cont } flow_ = Flow::normal;
  bool failed_ = false;
  bool fold_ = false;                   // computing a constant expression (see eval_folded)
  bool impossible_ = false;             // ... which turned out not to be constant
  std::vector<const void*> repr_stack_;  // containers being printed (for "[...]" / "{...}")
  const JNode* print_root_ = nullptr;   // the expression of the {{ }} being printed
  uint32_t pos_ = 0;
  uint64_t steps_ = 0;
  uint64_t next_poll_ = 0;
  uintptr_t stack_base_ = 0;
  int depth_ = 0;
  int call_depth_ = 0;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
#endif  // !LLMI_KERNEL_PASS

// ---- src/38_jinja_builtins.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
// ==== Chat templates, part 4: filters, tests, string/dict/list methods, % and .format ====
// Jinja2 3.1's builtin filters and tests with transformers' tojson, and the Python str methods
// templates call. Anything Jinja2 has but this interpreter does not do gives an error that
// names it ("unsupported construct: ..."), never a silently different result.
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
        if (jcase_is_upper(c)) cnt = lower_at(k, 0, n, m);
        else if (jcase_is_lower(c)) cnt = jcase_full(c, 0, m);
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

inline JValue JRender::apply_filter(const std::string& name, const JValue& v, const JArgs& args, const SP& sc) {
  if (!charge_scan(v, args)) return JValue();
  std::vector<const JValue*> a;
  auto what = "filter '" + name + "'";
  auto str_of = [&](const JValue& x, PText& t) { return to_str(x, t); };
  auto need_str = [&](const JValue& x) -> bool { return x.is_str() || x.is_undef(); };
  auto result_str = [&](PText t, bool markup) { return markup ? jv_markup(std::move(t)) : JValue::str(std::move(t)); };
  // soft_str(): strings stay (Markup stays Markup), anything else is str()-ed
  auto soft = [&](const JValue& x, PText& t, bool& markup) {
    markup = jv_is_markup(x);
    if (x.is_str()) {
      t = *x.s;
      return true;
    }
    return str_of(x, t);
  };

  if (name == "tojson") {
    if (!bind(args, {"ensure_ascii", "indent", "separators", "sort_keys"}, a, what)) return JValue();
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
    if (!to_json(v, t, o, 0) || !charge_str(t.s.size()) || !check_len(t.s.size())) return JValue();
    return JValue::str(std::move(t));
  }
  if (name == "safe") {
    if (!bind(args, {}, a, what)) return JValue();
    PText t;
    bool m;
    if (!soft(v, t, m)) return JValue();
    return jv_markup(std::move(t));
  }
  if (name == "e" || name == "escape" || name == "forceescape") {
    if (!bind(args, {}, a, what)) return JValue();
    if (name != "forceescape" && jv_is_markup(v)) return v;
    PText s, t;
    if (!str_of(v, s)) return JValue();
    html_escape(t, s);
    return jv_markup(std::move(t));
  }
  if (name == "trim") {
    if (!bind(args, {"chars"}, a, what)) return JValue();
    PText t;
    bool m;
    if (!soft(v, t, m)) return JValue();
    std::string chars;
    bool have = a[0] && !a[0]->is_none();
    if (have) {
      if (!a[0]->is_str()) return failv("trim: chars must be a string");
      chars = a[0]->text();
    }
    return result_str(jstrip(t, have ? &chars : nullptr, true, true), m);
  }
  if (name == "length" || name == "count") {
    if (!bind(args, {}, a, what)) return JValue();
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
  if (name == "default" || name == "d") {
    if (!bind(args, {"default_value", "boolean"}, a, what)) return JValue();
    bool use = v.is_undef() || (a[1] && jv_truthy(*a[1]) && !jv_truthy(v));
    if (!use) return v;
    return a[0] ? *a[0] : JValue::str("");
  }
  if (name == "upper" || name == "lower" || name == "capitalize" || name == "title") {
    if (!bind(args, {}, a, what)) return JValue();
    PText t, out;
    bool m;
    if (!soft(v, t, m)) return JValue();
    JCase mode = name == "upper" ? JCase::upper : name == "lower" ? JCase::lower
                 : name == "capitalize" ? JCase::capitalize : JCase::title_filter;
    jcase(t, mode, out);
    if (!charge_str(out.s.size())) return JValue();
    return result_str(std::move(out), m && name != "title");
  }
  if (name == "string") {
    if (!bind(args, {}, a, what)) return JValue();
    if (v.is_str()) return v;
    PText t;
    if (!str_of(v, t)) return JValue();
    return JValue::str(std::move(t));
  }
  if (name == "list") {
    if (!bind(args, {}, a, what)) return JValue();
    std::vector<JValue> items;
    if (!iterate(v, items)) return JValue();
    return JValue::list(std::move(items));
  }
  if (name == "items") {
    if (!bind(args, {}, a, what)) return JValue();
    return make_gen([this, v, idx = size_t(0)](JValue& out, bool& done) mutable -> bool {
      done = false;
      if (v.is_undef()) return (done = true), true;
      if (!v.is_dict()) return fail("can only get item pairs from a mapping");
      if (idx >= v.m->items.size()) return (done = true), true;
      const auto& kv = v.m->items[idx++];
      out = JValue::list({kv.first, kv.second}, JSeq::tuple);
      return true;
    }, v);
  }
  if (name == "join") {
    if (!bind(args, {"d", "attribute"}, a, what)) return JValue();
    std::vector<JValue> items;
    if (!iterate(v, items)) return JValue();
    PText sep, out;
    if (a[0] && !str_of(*a[0], sep)) return JValue();
    for (size_t k = 0; k < items.size(); k++) {
      if (k) out.add(sep);
      JValue item = items[k];
      if (a[1] && !a[1]->is_none()) {
        item = attr_path(item, *a[1], nullptr);
        if (failed_) return JValue();
      }
      if (!str_of(item, out) || !check_len(out.s.size())) return JValue();
    }
    if (!charge_str(out.s.size())) return JValue();
    return JValue::str(std::move(out));
  }
  if (name == "first" || name == "last") {
    if (!bind(args, {}, a, what)) return JValue();
    if (name == "last" && v.is_list() && v.l->kind == JSeq::generator)
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
    if (items.empty()) return JValue::undefined(strf("no %s item, sequence was empty", name.c_str()));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (!bind(args, {}, a, what)) return JValue();
    if (v.is_str()) return slice(v, JValue::none(), JValue::none(), JValue::integer(-1));
    // reversed(value) (an iterator) for sequences and dicts; list(value) reversed for the rest
    std::vector<JValue> items;
    if (!iterate(v, items)) return JValue();
    std::reverse(items.begin(), items.end());
    bool reversible = v.is_dict() || v.is_undef() || (v.is_list() && v.l->kind != JSeq::generator);
    return JValue::list(std::move(items), reversible ? JSeq::generator : JSeq::list);
  }
  if (name == "replace") {
    if (!bind(args, {"old", "new", "count"}, a, what)) return JValue();
    if (!a[0] || !a[1]) return failv("replace() needs the old and the new string");
    JArgs m;
    JValue s = v;
    if (!v.is_str()) {
      PText t;
      if (!str_of(v, t)) return JValue();
      s = JValue::str(std::move(t));
    }
    s.b = false;  // the filter returns a plain str when autoescape is off
    PText o, nw;
    if (!str_of(*a[0], o) || !str_of(*a[1], nw)) return JValue();
    m.pos = {JValue::str(std::move(o)), JValue::str(std::move(nw))};
    if (a[2] && !a[2]->is_none()) m.pos.push_back(*a[2]);
    return call_method(s, "replace", m);
  }
  if (name == "indent") {
    if (!bind(args, {"width", "first", "blank"}, a, what)) return JValue();
    if (v.is_undef()) return (fail_undef(v), JValue());
    if (!v.is_str()) return failv(strf("unsupported operand type(s) for +=: '%s' and 'str'", jv_type(v)));
    PText s;
    bool m;
    if (!soft(v, s, m)) return JValue();
    std::string ind = "    ";
    if (a[0]) {
      int64_t w;
      if (a[0]->is_str()) ind = a[0]->text();
      else if (as_int(*a[0], w)) ind = std::string(static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(w, 1 << 16))), ' ');
      else return failv("indent: width must be an integer or a string");
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
    return result_str(std::move(out), m);
  }
  if (name == "int") {
    if (!bind(args, {"default", "base"}, a, what)) return JValue();
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
  if (name == "float") {
    if (!bind(args, {"default"}, a, what)) return JValue();
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
  if (name == "abs") {
    if (!bind(args, {}, a, what)) return JValue();
    int64_t i;
    if (as_int(v, i)) {
      if (i == INT64_MIN) return failv("integer overflow (integers are limited to 64 bits)");
      return JValue::integer(i < 0 ? -i : i);
    }
    if (v.t == JValue::T::real) return JValue::real(std::fabs(v.d));
    return failv(strf("bad operand type for abs(): '%s'", jv_type(v)));
  }
  if (name == "round") {
    if (!bind(args, {"precision", "method"}, a, what)) return JValue();
    int64_t prec = 0;
    if (a[0] && !as_int(*a[0], prec)) return failv("round: precision must be an integer");
    std::string method = a[1] && a[1]->is_str() ? a[1]->text() : "common";
    if (method != "common" && method != "ceil" && method != "floor")
      return failv("method must be common, ceil or floor");
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
  if (name == "truncate") {
    // Jinja2's do_truncate: at most length + leeway (5) characters are kept as they are; longer
    // text is cut to length - len(end) characters, back to the last space unless killwords
    if (!bind(args, {"length", "killwords", "end", "leeway"}, a, what)) return JValue();
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
    if (length < end_len) return failv(strf("expected length >= %lld, got %lld", static_cast<long long>(end_len),
                                            static_cast<long long>(length)));
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
  if (name == "center") {
    if (!bind(args, {"width"}, a, what)) return JValue();
    JArgs m;
    m.pos.push_back(a[0] ? *a[0] : JValue::integer(80));
    PText t;
    bool mk;
    if (!soft(v, t, mk)) return JValue();
    JValue s = JValue::str(std::move(t));
    s.b = mk;
    return call_method(s, "center", m);
  }
  if (name == "format") {
    if (!args.kw.empty() && !args.pos.empty()) return failv("can't handle positional and keyword arguments at the same time");
    PText t;
    bool m;
    if (!soft(v, t, m)) return JValue();
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
  if (name == "dictsort") {
    if (!bind(args, {"case_sensitive", "by", "reverse"}, a, what)) return JValue();
    if (!v.is_dict()) return failv("you can only sort by either \"key\" or \"value\" of a dict");
    bool cs = a[0] && jv_truthy(*a[0]);
    std::string by = a[1] && a[1]->is_str() ? a[1]->text() : "key";
    if (by != "key" && by != "value") return failv("you can only sort by either \"key\" or \"value\"");
    std::vector<JValue> keys, pairs;
    for (const auto& kv : v.m->items) {
      JValue k = by == "key" ? kv.first : kv.second;
      if (!cs && k.is_str()) {
        PText lo;
        jcase(*k.s, JCase::lower, lo);
        k = JValue::str(std::move(lo));
      }
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
  if (name == "unique") {
    // a generator: duplicates (by the lower-cased key unless case_sensitive) are skipped lazily
    if (!bind(args, {"case_sensitive", "attribute"}, a, what)) return JValue();
    bool cs = a[0] && jv_truthy(*a[0]);
    JValue attribute = a[1] ? *a[1] : JValue::none();
    Puller src = puller(v);
    return make_gen([this, src, cs, attribute, seen = std::vector<JValue>()](JValue& out, bool& done) mutable -> bool {
      for (;;) {
        if (!src(out, done) || done) return !failed_;
        JValue k = out;
        if (!attribute.is_none()) {
          k = attr_path(out, attribute, nullptr);
          if (failed_) return false;
        }
        if (!cs && k.is_str()) {
          PText lo;
          jcase(*k.s, JCase::lower, lo);
          k = JValue::str(std::move(lo));
        }
        if (k.is_dict() || (k.is_list() && k.l->kind != JSeq::tuple)) return fail(strf("unhashable type: '%s'", jv_type(k)));
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
    }, v);
  }
  if (name == "sort" || name == "min" || name == "max") {
    bool is_sort = name == "sort";
    if (is_sort) {
      if (!bind(args, {"reverse", "case_sensitive", "attribute"}, a, what)) return JValue();
    } else {
      if (!bind(args, {"case_sensitive", "attribute"}, a, what)) return JValue();
      a.insert(a.begin(), nullptr);
    }
    std::vector<JValue> items;
    if (!iterate(v, items)) return JValue();
    bool cs = a[1] && jv_truthy(*a[1]);
    std::vector<JValue> keys;
    for (const auto& it : items) {
      JValue k = it;
      if (a[2] && !a[2]->is_none()) {
        k = attr_path(it, *a[2], nullptr);
        if (failed_) return JValue();
      }
      if (!cs && k.is_str()) {
        PText lo;
        jcase(*k.s, JCase::lower, lo);
        k = JValue::str(std::move(lo));
      }
      keys.push_back(std::move(k));
    }
    if (name == "min" || name == "max") {
      if (items.empty()) return JValue::undefined("no aggregated item, sequence was empty");
      size_t best = 0;
      for (size_t k = 1; k < items.size(); k++) {
        bool less;
        if (!py_less(name == "min" ? keys[k] : keys[best], name == "min" ? keys[best] : keys[k], less)) return JValue();
        if (less) best = k;
      }
      return items[best];
    }
    std::vector<size_t> idx(items.size());
    for (size_t k = 0; k < idx.size(); k++) idx[k] = k;
    if (!sort_indices(keys, idx, a[0] && jv_truthy(*a[0]), true)) return JValue();
    std::vector<JValue> out;
    for (size_t k : idx) out.push_back(items[k]);
    return JValue::list(std::move(out));
  }
  if (name == "sum") {
    if (!bind(args, {"attribute", "start"}, a, what)) return JValue();
    std::vector<JValue> items;
    if (!iterate(v, items)) return JValue();
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
  if (name == "map" || name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    // Generators, as in Jinja2: nothing runs until the result is consumed, a false input gives
    // nothing, and an error (a non-iterable input, a failing test) happens when consumed.
    Puller src = puller(v);
    bool falsy = !jv_truthy(v);
    if (name == "map") {
      const JValue* attribute = nullptr;
      const JValue* def = nullptr;
      for (const auto& kv : args.kw) {
        if (kv.first == "attribute") attribute = &kv.second;
        else if (kv.first == "default") def = &kv.second;
      }
      if (attribute && args.pos.empty()) {
        for (const auto& kv : args.kw)
          if (kv.first != "attribute" && kv.first != "default")
            return failv(strf("unexpected keyword argument '%s'", kv.first.c_str()));
        JValue attr = *attribute, dflt = def ? *def : JValue::none();
        return make_gen([this, src, falsy, attr, dflt](JValue& out, bool& done) mutable -> bool {
          if (falsy) return (done = true), true;
          if (!src(out, done) || done) return !failed_;
          out = attr_path(out, attr, &dflt);
          return !failed_;
        }, v);
      }
      if (args.pos.empty()) return failv("map requires a filter argument");
      if (!args.pos[0].is_str()) return failv("map: the filter name must be a string");
      std::string fname = args.pos[0].text();
      JArgs rest;
      rest.pos.assign(args.pos.begin() + 1, args.pos.end());
      rest.kw = args.kw;
      // (the scope weakly: a generator stored in that scope must not keep it alive, a reference cycle;
      // pulled after the scope ended, the filter runs in an empty one)
      std::weak_ptr<JScope> wsc = sc;
      return make_gen([this, src, falsy, fname, rest, wsc](JValue& out, bool& done) mutable -> bool {
        if (falsy) return (done = true), true;
        if (!src(out, done) || done) return !failed_;
        if (!jinja_known_filter(fname)) return fail(strf("no filter named '%s'", fname.c_str()));
        auto scope = wsc.lock();
        if (!scope) scope = std::make_shared<JScope>();
        out = apply_filter(fname, out, rest, scope);
        return !failed_;
      }, v);
    }
    bool attr = name == "selectattr" || name == "rejectattr";
    bool keep_if = name == "select" || name == "selectattr";
    size_t at = 0;
    JValue attrname;
    if (attr) {
      if (args.pos.empty()) return failv(strf("%s needs an attribute name", name.c_str()));
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
    return make_gen([this, src, falsy, attr, attrname, test, targs, keep_if](JValue& out, bool& done) mutable -> bool {
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
    }, v);
  }
  if (name == "batch") {
    if (!bind(args, {"linecount", "fill_with"}, a, what)) return JValue();
    int64_t n;
    if (!a[0] || !as_int(*a[0], n) || n <= 0) return failv("batch: linecount must be a positive integer");
    JValue fill = a[1] ? *a[1] : JValue::none();
    Puller src = puller(v);
    return make_gen([this, src, n, fill, end = false](JValue& out, bool& done) mutable -> bool {
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
    }, v);
  }
  if (name == "attr") {
    if (!bind(args, {"name"}, a, what)) return JValue();
    if (!a[0] || !a[0]->is_str()) return failv("attr: the name must be a string");
    return get_attr(v, a[0]->text());
  }
  if (name == "wordcount") {
    if (!bind(args, {}, a, what)) return JValue();
    PText t;
    bool m;
    if (!soft(v, t, m)) return JValue();
    // runs of Python's \w: str.isalnum() characters and "_"
    int64_t count = 0;
    bool in = false;
    size_t i = 0;
    while (i < t.s.size()) {
      uint32_t c = jcp_next(t.s, i);
      bool w = c == '_' || jis_alnum(c);
      if (w && !in) count++;
      in = w;
    }
    return JValue::integer(count);
  }
  (void)need_str;
  return failv(strf("unsupported construct: the '%s' filter", name.c_str()));
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

inline bool JRender::run_test(const std::string& name, const JValue& v, const JArgs& args, bool& r) {
  using T = JValue::T;
  const JValue* arg = args.pos.empty() ? (args.kw.empty() ? nullptr : &args.kw[0].second) : &args.pos[0];
  auto need_arg = [&]() {
    if (!arg) return fail(strf("test '%s' needs an argument", name.c_str()));
    return true;
  };
  r = false;
  {
    // Jinja2's tests are plain functions: the value plus at most the one argument they declare
    static const char* const one_arg[] = {"divisibleby", "sameas", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan",
                                          "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "in"};
    size_t max_args = 0;
    for (const char* t : one_arg)
      if (name == t) max_args = 1;
    size_t given = args.pos.size() + args.kw.size();
    if (given > max_args)
      return fail(strf("test '%s' takes %zu argument%s but %zu were given", name.c_str(), max_args + 1,
                       max_args ? "s" : "", given + 1));
  }
  if (name == "defined") return (r = !v.is_undef()), true;
  if (name == "undefined") return (r = v.is_undef()), true;
  if (name == "none") return (r = v.is_none()), true;
  if (name == "boolean") return (r = v.t == T::boolean), true;
  if (name == "false") return (r = v.t == T::boolean && !v.b), true;
  if (name == "true") return (r = v.t == T::boolean && v.b), true;
  if (name == "integer") return (r = v.t == T::integer), true;
  if (name == "float") return (r = v.t == T::real), true;
  if (name == "number") return (r = v.is_num()), true;
  if (name == "string") return (r = v.is_str()), true;
  if (name == "mapping") return (r = v.is_dict()), true;
  if (name == "iterable") return (r = v.is_str() || v.is_list() || v.is_dict() || v.is_undef() || v.t == T::loop), true;
  if (name == "sequence")
    return (r = v.is_str() || v.is_dict() || v.is_undef() ||
                (v.is_list() && (v.l->kind == JSeq::list || v.l->kind == JSeq::tuple || v.l->kind == JSeq::range))),
           true;
  if (name == "callable") return (r = v.t == T::func || v.is_undef() || v.t == T::loop), true;
  if (name == "escaped") return (r = jv_is_markup(v)), true;
  if (name == "filter") return (r = v.is_str() && jinja_known_filter(v.text())), true;
  if (name == "test") return (r = v.is_str() && jinja_known_test(v.text())), true;
  if (!charge_scan(v, args)) return false;  // the tests below may scan their operands
  if (name == "odd" || name == "even" || name == "divisibleby") {
    JValue d = name == "divisibleby" ? (need_arg() ? *arg : JValue()) : JValue::integer(2);
    if (failed_) return false;
    JValue m = binop(BinOp::mod, v, d);
    if (failed_) return false;
    r = py_eq(m, JValue::integer(name == "odd" ? 1 : 0));
    return true;
  }
  if (name == "lower" || name == "upper") {
    // str.islower() / str.isupper(): some cased character and none of the other case or titlecase
    PText t;
    if (!to_str(v, t)) return false;
    bool cased = false, ok = true;
    size_t i = 0;
    while (i < t.s.size() && ok) {
      uint32_t c = jcp_next(t.s, i);
      bool other = name == "lower" ? jcase_is_upper(c) : jcase_is_lower(c);
      if (other || jcase_is_title(c)) ok = false;
      else if (name == "lower" ? jcase_is_lower(c) : jcase_is_upper(c)) cased = true;
    }
    r = ok && cased;
    return true;
  }
  if (name == "sameas") {
    if (!need_arg()) return false;
    const JValue& o = *arg;
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
  CmpOp op;
  if (name == "eq" || name == "equalto" || name == "==") op = CmpOp::eq;
  else if (name == "ne" || name == "!=") op = CmpOp::ne;
  else if (name == "lt" || name == "lessthan" || name == "<") op = CmpOp::lt;
  else if (name == "le" || name == "<=") op = CmpOp::le;
  else if (name == "gt" || name == "greaterthan" || name == ">") op = CmpOp::gt;
  else if (name == "ge" || name == ">=") op = CmpOp::ge;
  else if (name == "in") op = CmpOp::in;
  else return fail(strf("no test named '%s'", name.c_str()));
  if (!need_arg()) return false;
  return compare(op, v, *arg, r);
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
      if (c == 'x') base = 16;
      else if (c == 'o') base = 8;
      else if (c == 'b') base = 2;
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
  if (r.ec == std::errc::result_out_of_range) v = (x.find("e-") != std::string::npos) ? 0.0 : (neg ? -HUGE_VAL : HUGE_VAL);
  else if (r.ec != std::errc()) return false;
  out = v;
  return true;
}

// ---- methods of str, dict, list ----
inline JValue JRender::call_method(const JValue& self, const std::string& name, const JArgs& args) {
  if (!charge_scan(self, args)) return JValue();
  std::vector<const JValue*> a;
  std::string what = std::string(jv_type(self)) + "." + name + "()";
  if (self.is_dict()) {
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
      if (name == "items") out.push_back(JValue::list({kv.first, kv.second}, JSeq::tuple));
      else out.push_back(name == "keys" ? kv.first : kv.second);
    }
    return JValue::list(std::move(out), kind);
  }
  if (self.is_list()) {
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
  if (!self.is_str()) return failv(strf("unsupported construct: method '%s' of '%s'", name.c_str(), jv_type(self)));
  const PText& s = *self.s;
  bool mk = self.b;
  auto ret = [&](PText t) { return mk ? jv_markup(std::move(t)) : JValue::str(std::move(t)); };
  auto str_arg = [&](const JValue* x, const char* pname, std::string& out) -> bool {
    if (!x || !x->is_str()) return fail(strf("%s: argument '%s' must be a str, not %s", what.c_str(), pname,
                                             x ? jv_type(*x) : "nothing"));
    out = x->text();
    return true;
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    if (!bind(args, {"chars"}, a, what)) return JValue();
    std::string chars;
    bool have = a[0] && !a[0]->is_none();
    if (have && !str_arg(a[0], "chars", chars)) return JValue();
    return ret(jstrip(s, have ? &chars : nullptr, name != "rstrip", name != "lstrip"));
  }
  if (name == "startswith" || name == "endswith") {
    if (!bind(args, {"prefix", "start", "end"}, a, what)) return JValue();
    if (!a[0]) return failv(what + " takes at least 1 argument");
    if ((a[1] && !a[1]->is_none()) || (a[2] && !a[2]->is_none()))
      return failv("unsupported construct: start/end arguments of " + what);
    std::vector<JValue> cands;
    if (a[0]->is_str()) {
      cands.push_back(*a[0]);
    } else if (a[0]->is_list() && a[0]->l->kind == JSeq::tuple) {
      cands = a[0]->l->items;
    } else {
      return failv(strf("%s first arg must be str or a tuple of str, not %s", what.c_str(), jv_type(*a[0])));
    }
    for (const auto& c : cands) {
      if (!c.is_str()) return failv(what + ": tuple for startswith/endswith must only contain str");
      const std::string& p = c.text();
      bool hit = name == "startswith" ? s.s.compare(0, p.size(), p) == 0 && s.s.size() >= p.size()
                                      : s.s.size() >= p.size() && s.s.compare(s.s.size() - p.size(), p.size(), p) == 0;
      if (hit) return JValue::boolean(true);
    }
    return JValue::boolean(false);
  }
  if (name == "split" || name == "rsplit") {
    if (!bind(args, {"sep", "maxsplit"}, a, what)) return JValue();
    int64_t maxsplit = -1;
    if (a[1] && !as_int(*a[1], maxsplit)) return failv("maxsplit must be an integer");
    std::vector<PText> parts;
    bool right = name == "rsplit";
    if (!a[0] || a[0]->is_none()) {
      // runs of whitespace, no empty strings
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
      if (maxsplit < 0 || static_cast<size_t>(maxsplit) >= words.size()) {
        for (auto& w : words) parts.push_back(jsub(s, w.first, w.second));
      } else if (!right) {
        for (int64_t k = 0; k < maxsplit; k++) parts.push_back(jsub(s, words[static_cast<size_t>(k)].first,
                                                                   words[static_cast<size_t>(k)].second));
        parts.push_back(jstrip(jsub(s, words[static_cast<size_t>(maxsplit)].first, s.s.size()), nullptr, false, true));
      } else {
        size_t first = words.size() - static_cast<size_t>(maxsplit);
        parts.push_back(jstrip(jsub(s, 0, words[first - 1].second), nullptr, true, false));
        for (size_t k = first; k < words.size(); k++) parts.push_back(jsub(s, words[k].first, words[k].second));
      }
    } else {
      std::string sep;
      if (!str_arg(a[0], "sep", sep)) return JValue();
      if (sep.empty()) return failv("empty separator");
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
      size_t b = 0;
      for (size_t h : hits) {
        parts.push_back(jsub(s, b, h));
        b = h + sep.size();
      }
      parts.push_back(jsub(s, b, s.s.size()));
    }
    if (!charge_list(parts.size())) return JValue();
    std::vector<JValue> out;
    for (auto& p : parts) out.push_back(ret(std::move(p)));
    return JValue::list(std::move(out));
  }
  if (name == "replace") {
    if (!bind(args, {"old", "new", "count"}, a, what)) return JValue();
    std::string old;
    if (!str_arg(a[0], "old", old) || !a[1] || !a[1]->is_str()) {
      if (!failed_) fail(what + ": new must be a str");
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
      return ret(std::move(out));
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
    return ret(std::move(out));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize" || name == "swapcase" ||
      name == "casefold") {
    if (!bind(args, {}, a, what)) return JValue();
    if (name == "casefold" && !jis_ascii(s.s)) return failv("unsupported construct: str.casefold() on non-ASCII text");
    JCase mode = name == "upper" ? JCase::upper : (name == "lower" || name == "casefold") ? JCase::lower
                 : name == "title" ? JCase::title_method : name == "capitalize" ? JCase::capitalize : JCase::swapcase;
    PText out;
    jcase(s, mode, out);
    if (!charge_str(out.s.size())) return JValue();
    return ret(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    if (!bind(args, {"sub", "start", "end"}, a, what)) return JValue();
    std::string sub;
    if (!str_arg(a[0], "sub", sub)) return JValue();
    if ((a[1] && !a[1]->is_none()) || (a[2] && !a[2]->is_none()))
      return failv("unsupported construct: start/end arguments of " + what);
    if (name == "count") {
      if (sub.empty()) return JValue::integer(static_cast<int64_t>(jcp_count(s.s)) + 1);
      int64_t n = 0;
      size_t p = 0;
      while ((p = s.s.find(sub, p)) != std::string::npos) {
        n++;
        p += sub.size();
      }
      return JValue::integer(n);
    }
    size_t p = (name == "find" || name == "index") ? s.s.find(sub) : s.s.rfind(sub);
    if (p == std::string::npos) {
      if (name == "index" || name == "rindex") return failv("substring not found");
      return JValue::integer(-1);
    }
    return JValue::integer(static_cast<int64_t>(jcp_count(std::string_view(s.s).substr(0, p))));
  }
  if (name == "join") {
    if (!bind(args, {"iterable"}, a, what)) return JValue();
    if (!a[0]) return failv("join() takes exactly one argument");
    std::vector<JValue> items;
    if (!iterate(*a[0], items)) return JValue();
    PText out;
    for (size_t k = 0; k < items.size(); k++) {
      if (!items[k].is_str())
        return failv(strf("sequence item %zu: expected str instance, %s found", k, jv_type(items[k])));
      if (k) out.add(s);
      if (mk && !jv_is_markup(items[k])) html_escape(out, *items[k].s);
      else out.add(*items[k].s);
      if (!check_len(out.s.size())) return JValue();
    }
    if (!charge_str(out.s.size())) return JValue();
    return ret(std::move(out));
  }
  if (name == "format") return str_format(self, args);
  if (name == "splitlines") {
    if (!bind(args, {"keepends"}, a, what)) return JValue();
    std::vector<JValue> out;
    for (auto& p : jsplitlines(s, a[0] && jv_truthy(*a[0]))) out.push_back(ret(std::move(p)));
    return JValue::list(std::move(out));
  }
  if (name == "partition" || name == "rpartition") {
    if (!bind(args, {"sep"}, a, what)) return JValue();
    std::string sep;
    if (!str_arg(a[0], "sep", sep)) return JValue();
    if (sep.empty()) return failv("empty separator");
    size_t p = name == "partition" ? s.s.find(sep) : s.s.rfind(sep);
    if (p == std::string::npos) {
      if (name == "partition") return JValue::list({self, ret(PText()), ret(PText())}, JSeq::tuple);
      return JValue::list({ret(PText()), ret(PText()), self}, JSeq::tuple);
    }
    return JValue::list({ret(jsub(s, 0, p)), ret(jsub(s, p, p + sep.size())), ret(jsub(s, p + sep.size(), s.s.size()))},
                        JSeq::tuple);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    if (!bind(args, {"fix"}, a, what)) return JValue();
    std::string fix;
    if (!str_arg(a[0], "fix", fix)) return JValue();
    if (name == "removeprefix" && s.s.compare(0, fix.size(), fix) == 0 && s.s.size() >= fix.size())
      return ret(jsub(s, fix.size(), s.s.size()));
    if (name == "removesuffix" && !fix.empty() && s.s.size() >= fix.size() &&
        s.s.compare(s.s.size() - fix.size(), fix.size(), fix) == 0)
      return ret(jsub(s, 0, s.s.size() - fix.size()));
    return self;
  }
  if (name == "ljust" || name == "rjust" || name == "center" || name == "zfill") {
    if (!bind(args, name == "zfill" ? std::initializer_list<const char*>{"width"}
                                    : std::initializer_list<const char*>{"width", "fillchar"},
              a, what))
      return JValue();
    int64_t width;
    if (!a[0] || !as_int(*a[0], width)) return failv(what + ": width must be an integer");
    std::string fill = " ";
    if (name != "zfill" && a.size() > 1 && a[1]) {
      if (!a[1]->is_str() || jcp_count(a[1]->text()) != 1)
        return failv("The fill character must be exactly one character long");
      fill = a[1]->text();
    }
    int64_t len = static_cast<int64_t>(jcp_count(s.s));
    if (width <= len) return self;
    if (!check_len(static_cast<size_t>(width) * fill.size())) return JValue();
    size_t pad = static_cast<size_t>(width - len);
    size_t left = 0;
    if (name == "rjust") left = pad;
    else if (name == "center") left = pad / 2 + (pad & static_cast<size_t>(width) & 1);
    PText out;
    if (name == "zfill") {
      size_t sign = (!s.s.empty() && (s.s[0] == '+' || s.s[0] == '-')) ? 1 : 0;
      out.add_range(s, 0, sign);
      out.add(std::string(pad, '0'));
      out.add_range(s, sign, s.s.size());
      return ret(std::move(out));
    }
    for (size_t k = 0; k < left; k++) out.add(fill);
    out.add(s);
    for (size_t k = left; k < pad; k++) out.add(fill);
    return ret(std::move(out));
  }
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric" || name == "isalpha" || name == "isalnum" ||
      name == "isspace" || name == "islower" || name == "isupper" || name == "isascii" || name == "istitle") {
    if (!bind(args, {}, a, what)) return JValue();
    if (name == "isascii") return JValue::boolean(jis_ascii(s.s));
    if (s.s.empty()) return JValue::boolean(false);
    if (name == "islower" || name == "isupper") {
      bool r;
      JArgs none;
      if (!run_test(name == "islower" ? "lower" : "upper", self, none, r)) return JValue();
      return JValue::boolean(r);
    }
    if (name == "istitle") {
      bool cased = false, prev = false;
      size_t i = 0;
      while (i < s.s.size()) {
        uint32_t c = jcp_next(s.s, i);
        if (jcase_is_upper(c) || jcase_is_title(c)) {
          if (prev) return JValue::boolean(false);
          prev = cased = true;
        } else if (jcase_is_lower(c)) {
          if (!prev) return JValue::boolean(false);
          prev = cased = true;
        } else {
          prev = false;
        }
      }
      return JValue::boolean(cased);
    }
    bool all = true;
    size_t i = 0;
    while (i < s.s.size() && all) {
      uint32_t c = jcp_next(s.s, i);
      if (name == "isspace") all = jis_space(c);
      else if (name == "isalpha") all = jis_alpha(c);
      else if (name == "isalnum") all = jis_alnum(c);
      else if (name == "isdecimal") all = jis_decimal(c);
      else if (name == "isdigit") all = jis_digit(c);
      else all = jis_numeric(c);  // isnumeric
    }
    return JValue::boolean(all);
  }
  return failv(strf("unsupported construct: the string method '%s'", name.c_str()));
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
  if (argv.is_list() && argv.l->kind == JSeq::tuple) args = argv.l->items;
  else if (argv.is_dict()) mapping = argv.m.get();
  else args.push_back(argv);
  size_t next = 0;
  PText out;
  size_t i = 0;
  bool used_mapping = false;
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
      used_mapping = true;
      p = close + 1;
    }
    std::string flags;
    while (p < fmt.s.size() && std::strchr("-+ #0", fmt.s[p]) && fmt.s[p]) flags += fmt.s[p++];
    std::string width, prec;
    while (p < fmt.s.size() && std::isdigit(static_cast<unsigned char>(fmt.s[p]))) width += fmt.s[p++];
    bool has_prec = false;
    if (p < fmt.s.size() && fmt.s[p] == '.') {
      has_prec = true;
      p++;
      while (p < fmt.s.size() && std::isdigit(static_cast<unsigned char>(fmt.s[p]))) prec += fmt.s[p++];
    }
    if (width.size() > 6 || prec.size() > 6) return failv("format width or precision too large");
    if (p >= fmt.s.size()) return failv("incomplete format");
    char conv = fmt.s[p++];
    i = p;
    if (conv == '%') {
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
    if (conv == 's' || conv == 'r' || conv == 'a') {
      PText t;
      if (conv == 's' ? !to_str(*arg, t) : !repr(*arg, t)) return JValue();
      if (mk && !jv_is_markup(*arg)) {
        PText e;
        html_escape(e, t);
        t = std::move(e);
      }
      if (has_prec) {
        int64_t n = 0;
        std::from_chars(prec.data(), prec.data() + prec.size(), n);
        std::vector<size_t> off = jcp_offsets(t.s);
        if (static_cast<size_t>(n) + 1 < off.size()) t = jsub(t, 0, off[static_cast<size_t>(n)]);
      }
      int64_t w = 0;
      if (!width.empty()) std::from_chars(width.data(), width.data() + width.size(), w);
      int64_t len = static_cast<int64_t>(jcp_count(t.s));
      bool left = flags.find('-') != std::string::npos;
      if (!left)
        for (int64_t k = len; k < w; k++) piece.add(" ");
      piece.add(t);
      if (left)
        for (int64_t k = len; k < w; k++) piece.add(" ");
    } else if (std::strchr("diouxXeEfFgGc", conv)) {
      if (!arg->is_num()) return failv(strf("%%%c format: a real number is required, not %s", conv, jv_type(*arg)));
      std::string spec = "%" + flags + width + (has_prec ? "." + prec : "");
      int64_t iv;
      bool is_int = as_int(*arg, iv);
      if (std::strchr("diouxX", conv)) {
        if (!is_int) {
          if (conv != 'd' && conv != 'i' && conv != 'u')
            return failv(strf("%%%c format: an integer is required, not float", conv));
          if (!std::isfinite(arg->d) || std::fabs(arg->d) >= 9.2e18) return failv("cannot convert float to integer");
          iv = static_cast<int64_t>(arg->d);
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
        if (!is_int || iv < 0 || iv > 0x10FFFF) return failv("%c requires an int in range(0x110000) or a char");
        std::string ch;
        utf8_append(ch, static_cast<uint32_t>(iv));
        piece.add(ch);
      } else {
        double d = as_double(*arg);
        if (!std::isfinite(d)) {
          std::string t = std::isnan(d) ? "nan" : (d < 0 ? "-inf" : (flags.find('+') != std::string::npos ? "+inf" : "inf"));
          if (std::isupper(static_cast<unsigned char>(conv))) for (auto& ch : t) ch = static_cast<char>(std::toupper(ch));
          piece.add(t);
        } else {
          piece.add(strf((spec + conv).c_str(), d));
        }
      }
    } else {
      return failv(strf("unsupported format character '%c'", conv));
    }
    out.add(piece);
    if (!check_len(out.s.size())) return JValue();
  }
  if (!mapping && !mapping_like && next < args.size()) return failv("not all arguments converted during string formatting");
  if (!charge_str(out.s.size())) return JValue();
  (void)used_mapping;
  return mk ? jv_markup(std::move(out)) : JValue::str(std::move(out));
}

// ---- str.format(): "{}", "{0}", "{name}", "{0[key]}", "{x.attr}", conversions and simple specs ----
inline JValue JRender::str_format(const JValue& self, const JArgs& args) {
  const PText& f = *self.s;
  PText out;
  size_t auto_idx = 0;
  size_t i = 0;
  while (i < f.s.size()) {
    char c = f.s[i];
    if (c == '}') {
      if (i + 1 < f.s.size() && f.s[i + 1] == '}') {
        out.add("}");
        i += 2;
        continue;
      }
      return failv("Single '}' encountered in format string");
    }
    if (c != '{') {
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
    size_t end = field.find_first_of(".[");
    std::string head = field.substr(0, end);
    JValue v;
    if (head.empty()) {
      if (auto_idx >= args.pos.size()) return failv("Replacement index out of range for positional args tuple");
      v = args.pos[auto_idx++];
    } else if (std::isdigit(static_cast<unsigned char>(head[0]))) {
      size_t k = 0;
      std::from_chars(head.data(), head.data() + head.size(), k);
      if (k >= args.pos.size()) return failv("Replacement index out of range for positional args tuple");
      v = args.pos[k];
    } else {
      bool found = false;
      for (const auto& kv : args.kw)
        if (kv.first == head) {
          v = kv.second;
          found = true;
        }
      if (!found) return failv("KeyError '" + head + "' in str.format");
    }
    size_t p = end;
    while (p != std::string::npos && p < field.size()) {
      if (field[p] == '.') {
        size_t q = field.find_first_of(".[", p + 1);
        v = get_attr(v, field.substr(p + 1, q == std::string::npos ? std::string::npos : q - p - 1));
        p = q;
      } else {
        size_t q = field.find(']', p);
        if (q == std::string::npos) return failv("Missing ']' in format string");
        std::string key = field.substr(p + 1, q - p - 1);
        int64_t idx;
        auto r = std::from_chars(key.data(), key.data() + key.size(), idx);
        if (!key.empty() && r.ec == std::errc() && r.ptr == key.data() + key.size()) v = get_item(v, JValue::integer(idx));
        else v = get_item(v, JValue::str(key));
        p = q + 1;
      }
      if (failed_) return JValue();
    }
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
    if (!spec.empty()) {
      // [[fill]align][width] for strings; numbers with a type need the full mini-language
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
        return failv("unsupported construct: format spec '" + spec + "' in str.format");
      if (!align) align = v.is_num() ? '>' : '<';
      size_t len = jcp_count(t.s);
      if (w > len) {
        size_t pad = w - len, left = align == '>' ? pad : align == '^' ? pad / 2 : 0;
        PText padded;
        for (size_t k = 0; k < left; k++) padded.add(fill);
        padded.add(t);
        for (size_t k = left; k < pad; k++) padded.add(fill);
        t = std::move(padded);
      }
    }
    out.add(t);
    if (!check_len(out.s.size())) return JValue();
  }
  if (!charge_str(out.s.size())) return JValue();
  return self.b ? jv_markup(std::move(out)) : JValue::str(std::move(out));
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
#endif  // !LLMI_KERNEL_PASS

// ---- src/39_chat.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
// ==== Chat templates, part 5: the chat API (ChatInput -> RenderedPrompt) ====
// What a model's template sees, as transformers' apply_chat_template passes it: `messages` (any
// keys pass through), `add_generation_prompt`, the special-token strings, `tools` only when given,
// and extra variables (enable_thinking, documents, ...). Strings from messages, tools and documents
// are untrusted: their bytes in the output are reported in RenderedPrompt::content_spans, so the
// tokenizer never turns text a user typed (say "<|im_end|>") into a control token.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

struct RenderedPrompt {
  std::string text;
  // Byte ranges of `text` copied from message content (sorted, disjoint): tokenize them without
  // special-token parsing.
  std::vector<std::pair<size_t, size_t>> content_spans;
  bool fallback = false;  // rendered with the built-in ChatML template (the model has none)
};

struct ChatInput {
  Json messages;  // an array of message objects ({"role", "content", ...}; content may be a list of parts)
  bool add_generation_prompt = false;
  // Template variables such as {"bos_token", "<s>"}, {"eos_token", "</s>"} (see chat_special_tokens).
  std::vector<std::pair<std::string, std::string>> special_tokens;
  std::optional<std::vector<std::string>> additional_special_tokens;  // tokenizer_config's list, if any
  Json tools;  // null: no `tools` variable at all
  Json extra;  // object: more variables (enable_thinking, documents, ...); untrusted if named "documents"
  std::function<std::tm()> clock;  // strftime_now(); local time when empty (tests fix it)
  uint64_t max_steps = 0;          // evaluation budget; 0: LLMINFER_JINJA_MAX_STEPS scaled by the input size
  const std::atomic<bool>* cancel = nullptr;  // polled while rendering: set, the render fails ("rendering cancelled")

  // messages from role/content pairs
  static Json messages_from(std::span<const Message> msgs) {
    Json arr;
    arr.type = Json::Type::array;
    for (const auto& m : msgs) {
      Json o;
      o.type = Json::Type::object;
      Json role, content;
      role.type = content.type = Json::Type::string;
      role.str = m.role;
      content.str = m.content;
      o.members.emplace_back("role", std::move(role));
      o.members.emplace_back("content", std::move(content));
      arr.items.push_back(std::move(o));
    }
    return arr;
  }
};

// Converts JSON to template values; `content` marks every string (keys too) as untrusted text.
inline JValue jinja_from_json(const Json& j, bool content, int depth = 0) {
  switch (j.type) {
    case Json::Type::null: return JValue::none();
    case Json::Type::boolean: return JValue::boolean(j.boolean);
    case Json::Type::number:
      if (j.is_int) return JValue::integer(j.i);
      return JValue::real(j.num);
    case Json::Type::string: return JValue::str(j.str, content);
    case Json::Type::array: {
      std::vector<JValue> items;
      items.reserve(j.items.size());
      for (const auto& x : j.items) items.push_back(jinja_from_json(x, content, depth + 1));
      return JValue::list(std::move(items));
    }
    case Json::Type::object: {
      JValue d;
      d.t = JValue::T::dict;
      d.m = std::make_shared<JDict>();
      // a repeated key: the last one wins, in the first one's place (as Python's json module);
      // found with an index (an object of 100,000 keys would otherwise take quadratic time)
      std::unordered_map<std::string_view, size_t> at;
      for (const auto& kv : j.members) {
        JValue val = jinja_from_json(kv.second, content, depth + 1);
        d.m->depth = std::max(d.m->depth, jv_depth(val) + 1);
        auto [it, fresh] = at.emplace(kv.first, d.m->items.size());
        if (!fresh) {
          d.m->items[it->second].second = std::move(val);
          continue;
        }
        d.m->items.emplace_back(JValue::str(kv.first, content), std::move(val));
      }
      return d;
    }
  }
  return JValue::none();
}

// The built-in template for files without one: ChatML, the same text as transformers' former
// default (`<|im_start|>{role}\n{content}<|im_end|>\n` per message, then `<|im_start|>assistant\n`
// when a generation prompt is asked for). Content given as a list of parts uses its text parts.
inline const char* chat_fallback_template() {
  return "{%- for message in messages -%}"
         "{%- if message['content'] is string -%}{%- set content = message['content'] -%}"
         "{%- else -%}{%- set content = message['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text')"
         " | join('') -%}{%- endif -%}"
         "{{ '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>' + '\\n' }}"
         "{%- endfor -%}"
         "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}";
}

class ChatTemplate {
 public:
  ChatTemplate() = default;

  // Parses a Jinja chat template; errors name the construct and the line:column.
  static Result<ChatTemplate> parse(std::string_view source) {
    auto p = jinja_parse(source);
    if (!p) return p.error();
    ChatTemplate t;
    t.prog_ = std::move(*p);
    return t;
  }

  static uint64_t json_text_bytes(const Json& j) {
    uint64_t n = j.str.size();
    for (const Json& x : j.items) n += json_text_bytes(x);
    for (const auto& kv : j.members) n += kv.first.size() + json_text_bytes(kv.second);
    return n;
  }

  Result<RenderedPrompt> render(const ChatInput& in) const {
    if (!prog_) return make_error(Errc::template_error, "chat template: not parsed");
    if (!in.messages.is_array())
      return make_error(Errc::invalid_argument, "chat template: messages must be a JSON array of message objects");
    auto globals = std::make_shared<JScope>();
    for (const auto& kv : in.special_tokens) globals->set(kv.first, JValue::str(kv.second));
    if (in.additional_special_tokens) {
      std::vector<JValue> items;
      for (const auto& s : *in.additional_special_tokens) items.push_back(JValue::str(s));
      globals->set("additional_special_tokens", JValue::list(std::move(items)));
    }
    globals->set("messages", jinja_from_json(in.messages, true));
    globals->set("add_generation_prompt", JValue::boolean(in.add_generation_prompt));
    if (!in.tools.is_null()) globals->set("tools", jinja_from_json(in.tools, true));
    if (in.extra.is_object())
      for (const auto& kv : in.extra.members) globals->set(kv.first, jinja_from_json(kv.second, kv.first == "documents"));
    // the budget grows with the conversation: 10 steps per (message + tool)^2 (templates scan it
    // once per message) and 1 per byte of its text (tests and methods on it cost 1 per 8 bytes)
    uint64_t n = in.messages.size() + in.tools.size();
    uint64_t text = json_text_bytes(in.messages) + json_text_bytes(in.tools) + json_text_bytes(in.extra);
    uint64_t budget = in.max_steps ? in.max_steps
                                   : LLMINFER_JINJA_MAX_STEPS + std::min<uint64_t>(10 * n * n, 100000000ull) +
                                         std::min<uint64_t>(text, 100000000ull);
    return run(globals, in.clock, budget, in.cancel);
  }

  // Renders with arbitrary variables (a JSON object); strings under "messages", "tools" and
  // "documents" are untrusted content. For tests and tools.
  Result<RenderedPrompt> render_vars(const Json& vars, std::function<std::tm()> clock = {},
                                     uint64_t max_steps = LLMINFER_JINJA_MAX_STEPS) const {
    if (!prog_) return make_error(Errc::template_error, "chat template: not parsed");
    auto globals = std::make_shared<JScope>();
    for (const auto& kv : vars.members)
      globals->set(kv.first, jinja_from_json(kv.second, kv.first == "messages" || kv.first == "tools" || kv.first == "documents"));
    return run(globals, std::move(clock), max_steps);
  }

  const std::string& source() const {
    static const std::string empty;
    return prog_ ? prog_->source : empty;
  }
  bool uses_strftime() const { return prog_ && prog_->uses_strftime; }

 private:
  Result<RenderedPrompt> run(const std::shared_ptr<JScope>& globals, std::function<std::tm()> clock,
                             uint64_t max_steps, const std::atomic<bool>* cancel = nullptr) const {
    JRenderOptions opt;
    opt.clock = std::move(clock);
    opt.max_steps = max_steps;
    opt.cancel = cancel;
    JRender r(*prog_, opt);
    PText out;
    if (!r.run(globals, out)) return make_error(Errc::template_error, r.error);
    RenderedPrompt rp;
    rp.text = std::move(out.s);
    rp.content_spans = std::move(out.spans);
    return rp;
  }

  std::shared_ptr<const JProgram> prog_;
};

struct ChatTemplateSource {
  std::string source;
  bool fallback = false;  // the model has no template: this is chat_fallback_template()
};

// The model's chat template (the "tool_use" variant when tools are given and the file has one),
// or the built-in ChatML fallback.
inline ChatTemplateSource chat_template_for(const ModelDesc& m, bool with_tools = false) {
  ChatTemplateSource out;
  if (with_tools) {
    if (auto t = m.meta_string("tokenizer.chat_template.tool_use")) {
      out.source = std::string(*t);
      return out;
    }
    const Json& ct = m.tokenizer_config["chat_template"];
    if (ct.is_array())
      for (const auto& e : ct.items)
        if (e["name"].as_string() == "tool_use" && e["template"].is_string()) {
          out.source = e["template"].str;
          return out;
        }
  }
  if (m.has_chat_template) {
    out.source = m.chat_template;
    return out;
  }
  out.source = chat_fallback_template();
  out.fallback = true;
  return out;
}

// Special-token variables: GGUF files give the vocabulary text of their bos/eos/unk/pad ids;
// Hugging Face directories give tokenizer_config.json's strings (or {"content": ...} objects).
inline void chat_special_tokens(const ModelDesc& m, ChatInput& in) {
  in.special_tokens.clear();
  in.additional_special_tokens.reset();
  if (m.format == "gguf") {
    auto add = [&](const char* name, int32_t id) {
      if (id >= 0 && static_cast<size_t>(id) < m.vocab.tokens.size()) in.special_tokens.emplace_back(name, m.vocab.tokens[static_cast<size_t>(id)]);
    };
    add("bos_token", m.vocab.bos);
    add("eos_token", m.vocab.eos);
    add("unk_token", m.vocab.unk);
    add("sep_token", m.vocab.sep);
    add("pad_token", m.vocab.pad);
    return;
  }
  auto text = [](const Json& v) -> const std::string* {
    if (v.is_string()) return &v.str;
    if (v.is_object() && v["content"].is_string()) return &v["content"].str;
    return nullptr;
  };
  for (const char* name : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"})
    if (const std::string* s = text(m.tokenizer_config[name])) in.special_tokens.emplace_back(name, *s);
  const Json& extra = m.tokenizer_config["additional_special_tokens"];
  if (extra.is_array()) {
    in.additional_special_tokens.emplace();
    for (const auto& e : extra.items)
      if (const std::string* s = text(e)) in.additional_special_tokens->push_back(*s);
  }
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
#endif  // !LLMI_KERNEL_PASS

// ---- src/40_archdef.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
  layer_norm, layer_norm_heads, slice,
};

// Argument kinds in signatures: 'r' register, 't' tensor (alternatives with |, optionally | none),
// 'v' value (an expression: numbers, named values, + - * / ( ), sqrt(..), rsqrt(..), every(..)),
// 'l' rope layout word (pairs / neox). Every statement of the block also takes `skip = VALUE`
// (the step is left out of the layers where the value is not 0).
struct OpKwarg {
  const char* name;
  char kind;
};

struct OpSpec {
  const char* name;
  OpCode code;
  const char* sig;         // positional argument kinds
  OpKwarg kwargs[8];       // keyword arguments (name == nullptr ends the list)
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
      {"attention", OpCode::attention, "rrr",
       {{"window", 'v'}, {"period", 'v'}, {"scale", 'v'}, {"softcap", 'v'}, {"offset", 'v'}, {"sliding", 'v'}},
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
      {"layer_norm", OpCode::layer_norm, "rt", {{"bias", 't'}, {"eps", 'v'}}, false, true},
      {"layer_norm_heads", OpCode::layer_norm_heads, "rt", {{"bias", 't'}, {"eps", 'v'}}, false, true},
      {"slice", OpCode::slice, "rvv", {}, true, true},
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
                                                 "rope_base", "rope_dims", "norm_eps"};
  return names;
}

// Functions a value may use (not calls of anything the text defines: fixed arithmetic).
inline bool archdef_value_function(std::string_view w) { return w == "sqrt" || w == "rsqrt" || w == "every"; }

// The conventions a definition may declare (`convention NAME = VALUE`): rules that depend on the
// file format, stated in the text so that the text says everything that runs. A definition that
// does not declare one gets its default (the behaviour from before conventions existed).
struct ConventionSpec {
  const char* name;
  const char* choices;  // "a|b" words, or "" for a number
  const char* dflt;     // the default, as it would be written
  const char* what;
};
inline const std::vector<ConventionSpec>& archdef_conventions() {
  static const std::vector<ConventionSpec> c = {
      {"matmul_input", "gguf_rounded|f32", "gguf_rounded",
       "GGUF files: the input of a product with an F16/BF16 weight is rounded to that type first (ggml's "
       "arithmetic); f32: never rounded"},
      {"hf_rope", "neox|as_written", "neox",
       "Hugging Face checkpoints keep q/k rows in rotate-half order: rope 'pairs' runs as 'neox'; as_written: "
       "the layout as written"},
      {"hf_norm_offset", "", "table",
       "Hugging Face checkpoints store the weights of rms_norm / norm_heads / layer_norm(_heads) as w - N: N "
       "is added at load (Gemma: 1); default 'table': the loader's table by model_type (gemma3: 1, others 0)"},
  };
  return c;
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

// A value: an expression tree over numbers and named values (params, hyperparameters), evaluated in
// double when a model is compiled (per layer in the block). every(P, O) is 1 on the layers i with
// i % P == O and 0 on the others.
struct ValueTerm {
  enum class Fn : uint8_t { number, name, add, sub, mul, div, neg, sqrt, rsqrt, every } fn = Fn::number;
  double number = 0;
  std::string name;
  std::vector<ValueTerm> kids;
  bool per_layer = false;  // uses every() or a param that does (known when parsed)
};

// One alternative of a param: a metadata key ("{arch}.rope.freq_base_swa") or a term. A key that
// holds an array gives one value per layer (its length must be block_count). nonzero(KEY): the key
// counts as absent when it holds 0.
struct ParamAlt {
  bool is_meta = false;
  bool nonzero = false;
  std::string key;
  ValueTerm term;
};

struct ParamDef {
  std::string name;
  std::vector<ParamAlt> alts;  // the first that exists wins
  int line = 0;
  bool per_layer = false;      // a term alternative uses every() (metadata arrays are known at compile)
};

struct ConventionDef {
  std::string name, value;  // value: a choice word or a number as written
  double number = 0;
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
  std::vector<ConventionDef> conventions;  // declared ones only (archdef_conventions() has the defaults)
  std::vector<StmtDef> prologue, block, epilogue;
  int steps_per_layer() const { return static_cast<int>(block.size()); }
  const ConventionDef* convention(std::string_view name) const {
    for (const auto& c : conventions)
      if (c.name == name) return &c;
    return nullptr;
  }
  // The conventions this definition does not declare, as comment lines (what `status --dump` adds).
  std::string default_conventions_text() const {
    std::string out;
    for (const auto& c : archdef_conventions())
      if (!convention(c.name))
        out += std::string(out.empty() ? "# not declared above, in effect by default:\n" : "") + "# convention " +
               c.name + " = " + c.dflt + "\n";
    return out;
  }
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
      } else if (t0.kind == Tok::word && t0.text == "convention") {
        if (sec != Section::none) return fail(line_no, "'convention' lines belong before the sections");
        auto c = parse_convention(d);
        if (!c) return c.error();
        d.conventions.push_back(std::move(*c));
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
    return w == "arch" || w == "kind" || w == "param" || w == "convention" || w == "prologue" || w == "block" ||
           w == "epilogue";
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
      } else if (c == '=' || c == '(' || c == ')' || c == ',' || c == '|' || c == ':' || c == '*' || c == '/' ||
                 ((c == '-' || c == '+') && (after_operand() || !starts_number(s, k + 1)))) {
        // a sign after an operand is the binary operator ("a -1" is a minus 1), before one a number's
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

  static bool starts_number(std::string_view s, size_t k) {
    return k < s.size() && (std::isdigit(static_cast<unsigned char>(s[k])) || s[k] == '.');
  }
  // The last token ends an operand (a word, a number, or ')'): a following sign is an operator.
  bool after_operand() const {
    if (toks_.empty()) return false;
    const Tok& t = toks_.back();
    return t.kind != Tok::punct || t.text == ")";
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

  // VALUE := EXPR;  EXPR := PRODUCT (('+' | '-') PRODUCT)*;  PRODUCT := UNARY (('*' | '/') UNARY)*;
  // UNARY := '-' UNARY | NUMBER | NAME | '(' EXPR ')' | sqrt(EXPR) | rsqrt(EXPR) | every(EXPR, EXPR).
  // `block`: every() and per-layer params are allowed (they need a layer).
  static constexpr int kMaxValueDepth = 32;
  Result<ValueTerm> parse_term(const ArchDef& d, bool block = true) { return parse_sum(d, block, 0); }

  Result<ValueTerm> parse_sum(const ArchDef& d, bool block, int depth) {
    auto left = parse_product(d, block, depth);
    if (!left) return left;
    ValueTerm t = std::move(*left);
    while (at_punct("+") || at_punct("-")) {
      ValueTerm n;
      n.fn = toks_[i_].text == "+" ? ValueTerm::Fn::add : ValueTerm::Fn::sub;
      i_++;
      auto right = parse_product(d, block, depth);
      if (!right) return right;
      n.per_layer = t.per_layer || right->per_layer;
      n.kids.push_back(std::move(t));
      n.kids.push_back(std::move(*right));
      t = std::move(n);
    }
    return t;
  }

  Result<ValueTerm> parse_product(const ArchDef& d, bool block, int depth) {
    auto left = parse_unary(d, block, depth);
    if (!left) return left;
    ValueTerm t = std::move(*left);
    while (at_punct("*") || at_punct("/")) {
      ValueTerm n;
      n.fn = toks_[i_].text == "*" ? ValueTerm::Fn::mul : ValueTerm::Fn::div;
      i_++;
      auto right = parse_unary(d, block, depth);
      if (!right) return right;
      n.per_layer = t.per_layer || right->per_layer;
      n.kids.push_back(std::move(t));
      n.kids.push_back(std::move(*right));
      t = std::move(n);
    }
    return t;
  }

  Result<ValueTerm> parse_unary(const ArchDef& d, bool block, int depth) {
    if (depth > kMaxValueDepth) return fail(line_, strf("a value nested more than %d deep", kMaxValueDepth));
    ValueTerm t;
    if (at_end()) return fail(line_, "expected a value at end of line");
    const Tok& tk = toks_[i_];
    if (at_punct("-")) {
      i_++;
      auto in = parse_unary(d, block, depth + 1);
      if (!in) return in;
      t.fn = ValueTerm::Fn::neg;
      t.per_layer = in->per_layer;
      t.kids.push_back(std::move(*in));
      return t;
    }
    if (at_punct("(")) {
      i_++;
      auto in = parse_sum(d, block, depth + 1);
      if (!in) return in;
      if (!at_punct(")")) return fail(line_, "expected ')' to close '(', found " + here());
      i_++;
      return in;
    }
    if (tk.kind == Tok::number) {
      t.fn = ValueTerm::Fn::number;
      t.number = tk.num;
      i_++;
      return t;
    }
    if (tk.kind == Tok::word && tk.text.find('.') != std::string::npos)
      return fail(line_, "metadata keys are read in 'param' lines; name the param here (found " + here() + ")");
    if (tk.kind != Tok::word || !is_ident(tk.text)) return fail(line_, "expected a value, found " + here());
    if (archdef_value_function(tk.text) && at_punct_at(i_ + 1, "(")) {
      const std::string fn = tk.text;
      t.fn = fn == "sqrt" ? ValueTerm::Fn::sqrt : fn == "rsqrt" ? ValueTerm::Fn::rsqrt : ValueTerm::Fn::every;
      const size_t want = fn == "every" ? 2 : 1;
      i_ += 2;
      for (size_t k = 0; k < want; k++) {
        if (k > 0) {
          if (!at_punct(","))
            return fail(line_, "every(PERIOD, OFFSET) takes two values: expected ',', found " + here());
          i_++;
        }
        if (at_end()) return fail(line_, "expected a value after '" + fn + "('");
        auto in = parse_sum(d, block, depth + 1);
        if (!in) return in;
        t.per_layer = t.per_layer || in->per_layer;
        t.kids.push_back(std::move(*in));
      }
      if (!at_punct(")"))
        return fail(line_, fn == "every" ? "every(PERIOD, OFFSET) takes two values: expected ')', found " + here()
                                         : "expected ')' after the value of " + fn + "(), found " + here());
      i_++;
      if (t.fn == ValueTerm::Fn::every) {
        t.per_layer = true;
        if (!block)
          return fail(line_, "every() is 1 on some layers and 0 on others: only the 'block' section (or a param "
                             "it uses) may use it");
      }
      return t;
    }
    t.fn = ValueTerm::Fn::name;
    t.name = tk.text;
    if (auto r = check_value_name(t.name, d); !r) return r.error();
    for (const auto& p : d.params)
      if (p.name == t.name && p.per_layer) {
        t.per_layer = true;
        if (!block)
          return fail(line_, "param '" + p.name + "' differs per layer (it uses every()): only the 'block' section "
                             "may use it");
      }
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
    std::string list;
    for (const auto& b : archdef_builtin_values()) list += (list.empty() ? "" : ", ") + b;
    return fail(line_, "no value named '" + printable(name) + "' (a param or one of " + list + ")" +
                           did_you_mean(name, known));
  }

  Result<ParamDef> parse_param(const ArchDef& d) {
    ParamDef p;
    p.line = line_;
    i_ = 1;
    if (at_end() || toks_[i_].kind != Tok::word || !is_ident(toks_[i_].text))
      return fail(line_, "expected 'param NAME = VALUE'");
    p.name = toks_[i_].text;
    if (find_op(p.name) || archdef_value_function(p.name) || p.name == "nonzero" || p.name == "none" ||
        p.name == "pairs" || p.name == "neox")
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
      if (!at_end() && toks_[i_].kind == Tok::word && toks_[i_].text == "nonzero" && at_punct_at(i_ + 1, "(")) {
        // nonzero(KEY): the key counts as absent when it holds 0 ("0 means none" in many configs)
        i_ += 2;
        if (at_end() || toks_[i_].kind != Tok::word || toks_[i_].text.find('.') == std::string::npos)
          return fail(line_, "nonzero() takes a metadata key (like {arch}.attention.scale), found " + here());
        a.is_meta = true;
        a.nonzero = true;
        a.key = toks_[i_].text;
        if (auto r = check_placeholders(a.key, false, Section::none); !r) return r.error();
        i_++;
        if (!at_punct(")")) return fail(line_, "expected ')' after the key of nonzero(), found " + here());
        i_++;
      } else if (!at_end() && toks_[i_].kind == Tok::word && toks_[i_].text.find('.') != std::string::npos) {
        a.is_meta = true;
        a.key = toks_[i_].text;
        if (auto r = check_placeholders(a.key, false, Section::none); !r) return r.error();
        i_++;
      } else {
        auto t = parse_term(d);
        if (!t) return t.error();
        a.term = std::move(*t);
        p.per_layer = p.per_layer || a.term.per_layer;
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

  Result<ConventionDef> parse_convention(const ArchDef& d) {
    ConventionDef c;
    c.line = line_;
    i_ = 1;
    std::vector<std::string> names;
    for (const auto& s : archdef_conventions()) names.emplace_back(s.name);
    if (at_end() || toks_[i_].kind != Tok::word || !is_ident(toks_[i_].text))
      return fail(line_, "expected 'convention NAME = VALUE'");
    c.name = toks_[i_].text;
    const ConventionSpec* spec = nullptr;
    for (const auto& s : archdef_conventions())
      if (c.name == s.name) spec = &s;
    if (!spec) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      return fail(line_, "no convention '" + printable(c.name) + "' (known: " + list + ")" +
                             did_you_mean(c.name, names));
    }
    if (const ConventionDef* prev = d.convention(c.name))
      return fail(line_, strf("convention '%s' is declared twice (first at line %d)", c.name.c_str(), prev->line));
    i_++;
    if (!at_punct("=")) return fail(line_, "expected '=' after 'convention " + c.name + "', found " + here());
    i_++;
    if (at_end()) return fail(line_, "expected a value after 'convention " + c.name + " ='");
    const Tok& v = toks_[i_];
    std::string_view choices = spec->choices;
    if (choices.empty()) {
      if (v.kind != Tok::number || !(v.num >= 0) || v.num > 1e6)
        return fail(line_, "convention " + c.name + " takes a non-negative number, found " + here());
      c.number = v.num;
    } else {
      std::vector<std::string> ok;
      for (size_t k = 0; k <= choices.size();) {
        size_t e = choices.find('|', k);
        if (e == std::string_view::npos) e = choices.size();
        ok.emplace_back(choices.substr(k, e - k));
        k = e + 1;
      }
      if (v.kind != Tok::word || std::find(ok.begin(), ok.end(), v.text) == ok.end())
        return fail(line_, "convention " + c.name + " is one of " + std::string(choices) + ", found " + here() +
                               (v.kind == Tok::word ? did_you_mean(v.text, ok) : std::string()));
    }
    c.value = v.text;
    i_++;
    if (!at_end()) return fail(line_, "unexpected " + here() + " after the convention's value");
    return c;
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
        auto t = parse_term(d, sec == Section::block);
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
        static const OpKwarg skip_kw{"skip", 'v'};  // every statement of the block
        if (sec == Section::block) names.emplace_back("skip");
        if (!kw && key == "skip") {
          if (sec != Section::block)
            return fail(line_, "'skip' leaves a step out of some layers: only statements of the 'block' section "
                               "take it");
          kw = &skip_kw;
        }
        if (!kw) {
          std::string msg = "'" + std::string(s.op->name) + "' has no argument '" + printable(key) + "'";
          if (names.empty() || (names.size() == 1 && names[0] == "skip"))
            msg += names.empty() ? " (it takes no keyword arguments)" : " (it takes only 'skip')";
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
    return n.empty() || !(find_op(n) || n == "none" || n == "pairs" || n == "neox" || archdef_value_function(n) ||
                          n == "nonzero" || n == "arch" || n == "kind" || n == "param" || n == "convention" ||
                          n == "prologue" || n == "block" || n == "epilogue");
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
        if (optional && !s.dst.empty() && !is_assigned(s.dst))
          return err("'| none' makes this step optional, so it cannot be the first to assign '" + s.dst +
                     "' (where it is left out, the register keeps what it held); assign it before, or use the "
                     "in-place form (op(REGISTER, ...))");
        if (s.kwarg("skip") && op.code == OpCode::attention)
          return err("attention cannot be skipped (every layer has its KV cache); use window/period/sliding");
        if (s.kwarg("skip") && !s.dst.empty() && !is_assigned(s.dst))
          return err("'skip' leaves this step out of some layers, so it cannot be the first to assign '" + s.dst +
                     "'; assign it before, or use the in-place form (op(REGISTER, ...))");
        if ((op.code == OpCode::matmul || op.code == OpCode::attention || op.code == OpCode::copy ||
             op.code == OpCode::slice) && !s.dst.empty()) {
          for (const auto& r : reads)
            if (r == s.dst) return err(strf("'%s' cannot write its own input '%s'; assign another register", op.name, r.c_str()));
        }
        if (op.code == OpCode::attention) {
          if (sec != Section::block) return err("attention belongs in the 'block' section (it uses the layer's cache)");
          if (s.kwarg("sliding") && (s.kwarg("period") || s.kwarg("offset")))
            return err("attention: 'sliding' says per layer which layers slide; it replaces 'period' and 'offset'");
          if (s.kwarg("offset") && !s.kwarg("period"))
            return err("attention: 'offset' places the global layers within a 'period'; give the period too");
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
#endif  // !LLMI_KERNEL_PASS

// ---- src/41_archdefs_builtin.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
# GGUF files keep q/k rows permuted for adjacent-pair RoPE; Hugging Face checkpoints keep them in
# rotate-half order, where `pairs` runs as `neox` (convention hf_rope).
arch llama
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

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
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

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
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

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
# `sliding_period`-th layer global. GGUF norm weights already include Gemma's +1; Hugging Face
# checkpoints store w - 1 (convention hf_norm_offset).
arch gemma3
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 1            # Hugging Face norm weights are stored as w - 1

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
  scale(q, rsqrt(query_scalar))   # scaled queries, then unscaled scores: llama.cpp's order
  a = attention(q, k, v, scale = 1, window = sliding_window, period = sliding_period)
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
      {"phi3", R"(# Phi-3 / Phi-3.5 / Phi-4-mini dense decoders: q, k and v are column ranges of one fused
# attn_qkv product; ffn_up is gate and up side by side (silu(first half) * second half); NEOX rope;
# queries scaled before the scores (llama.cpp's order). Not described: the 128k variants' rope
# factors (rope_factors_long / _short) and the MoE variant.
arch phi3
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

prologue
  x = embed(token_embd.weight)

block
  h = rms_norm(x, blk.{i}.attn_norm.weight)
  qkv = matmul(h, blk.{i}.attn_qkv.weight)
  add_bias(qkv, blk.{i}.attn_qkv.bias | none)
  q = slice(qkv, 0, n_head * head_dim)
  k = slice(qkv, n_head * head_dim, n_head_kv * head_dim)
  v = slice(qkv, (n_head + n_head_kv) * head_dim, n_head_kv * head_dim)
  rope(q, neox)
  rope(k, neox)
  scale(q, rsqrt(head_dim))
  a = attention(q, k, v, scale = 1)
  o = matmul(a, blk.{i}.attn_output.weight)
  add(x, o)
  h = rms_norm(x, blk.{i}.ffn_norm.weight)
  gu = matmul(h, blk.{i}.ffn_up.weight)     # [gate | up], 2 * n_ff wide
  g = slice(gu, 0, n_ff)
  u = slice(gu, n_ff, n_ff)
  silu(g)
  mul(g, u)
  o = matmul(g, blk.{i}.ffn_down.weight)
  add(x, o)

epilogue
  last(x)
  rms_norm(x, output_norm.weight)
  logits = matmul(x, output.weight | token_embd.weight)
  add_bias(logits, output.bias | none)
)"},
      {"starcoder2", R"(# StarCoder2 decoders: LayerNorm with bias (eps {arch}.attention.layer_norm_epsilon), biases on
# every projection, NEOX rope, a GELU (tanh) MLP without a gate.
arch starcoder2
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

prologue
  x = embed(token_embd.weight)

block
  h = layer_norm(x, blk.{i}.attn_norm.weight, bias = blk.{i}.attn_norm.bias)
  q = matmul(h, blk.{i}.attn_q.weight)
  k = matmul(h, blk.{i}.attn_k.weight)
  v = matmul(h, blk.{i}.attn_v.weight)
  add_bias(q, blk.{i}.attn_q.bias | none)
  add_bias(k, blk.{i}.attn_k.bias | none)
  add_bias(v, blk.{i}.attn_v.bias | none)
  rope(q, neox)
  rope(k, neox)
  a = attention(q, k, v)
  o = matmul(a, blk.{i}.attn_output.weight)
  add_bias(o, blk.{i}.attn_output.bias)
  add(x, o)
  h = layer_norm(x, blk.{i}.ffn_norm.weight, bias = blk.{i}.ffn_norm.bias)
  u = matmul(h, blk.{i}.ffn_up.weight)
  add_bias(u, blk.{i}.ffn_up.bias)
  gelu_tanh(u)
  o = matmul(u, blk.{i}.ffn_down.weight)
  add_bias(o, blk.{i}.ffn_down.bias)
  add(x, o)

epilogue
  last(x)
  layer_norm(x, output_norm.weight, bias = output_norm.bias)
  logits = matmul(x, output.weight | token_embd.weight)
)"},
      {"stablelm", R"(# StableLM (2) decoders: LayerNorm with bias, q/k/v biases, partial NEOX rope (the first
# rope_dims = {arch}.rope.dimension_count of each head, 25% in StableLM 2), optional per-head q/k
# LayerNorm with a weight per head (StableLM 2 12B). Without ffn_norm (12B) the MLP reads the
# attention's input norm: the parallel residual.
arch stablelm
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

prologue
  x = embed(token_embd.weight)

block
  h = layer_norm(x, blk.{i}.attn_norm.weight, bias = blk.{i}.attn_norm.bias)
  q = matmul(h, blk.{i}.attn_q.weight)
  k = matmul(h, blk.{i}.attn_k.weight)
  v = matmul(h, blk.{i}.attn_v.weight)
  add_bias(q, blk.{i}.attn_q.bias | none)
  add_bias(k, blk.{i}.attn_k.bias | none)
  add_bias(v, blk.{i}.attn_v.bias | none)
  layer_norm_heads(q, blk.{i}.attn_q_norm.weight | none)
  layer_norm_heads(k, blk.{i}.attn_k_norm.weight | none)
  rope(q, neox, dims = rope_dims)
  rope(k, neox, dims = rope_dims)
  a = attention(q, k, v)
  o = matmul(a, blk.{i}.attn_output.weight)
  add(x, o)
  h = layer_norm(x, blk.{i}.ffn_norm.weight | none, bias = blk.{i}.ffn_norm.bias | none)
  g = matmul(h, blk.{i}.ffn_gate.weight)
  u = matmul(h, blk.{i}.ffn_up.weight)
  silu(g)
  mul(g, u)
  o = matmul(g, blk.{i}.ffn_down.weight)
  add(x, o)

epilogue
  last(x)
  layer_norm(x, output_norm.weight, bias = output_norm.bias)
  logits = matmul(x, output.weight)
)"},
      {"smollm3", R"(# SmolLM3 decoders: Llama-style, with no rope on every 4th layer (NoPE: layers 3, 7, 11, ...,
# where (i + 1) % 4 == 0; llama.cpp's n_no_rope_layer_step).
arch smollm3
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

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
  rope(q, pairs, skip = every(4, 3))
  rope(k, pairs, skip = every(4, 3))
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
  logits = matmul(x, output.weight | token_embd.weight)
)"},
      {"gemma2", R"(# Gemma 2 decoders: scaled embeddings, post-attention and post-FFN norms, GELU (tanh) gating,
# soft-capped attention scores and logits, sliding-window layers alternating with global ones
# (layer i global iff i % sliding_period == sliding_period - 1). GGUF norm weights include Gemma's +1.
# The query scale: {arch}.attention.query_pre_attn_scalar when the file has it, else head_dim
# (llama.cpp picks n_embd / n_head for the 46-layer 27B model by its layer count).
arch gemma2
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 1            # Hugging Face norm weights are stored as w - 1

param sliding_window = {arch}.attention.sliding_window | 4096
param sliding_period = {arch}.attention.sliding_window_pattern | 2
param rope_base_local = {arch}.rope.freq_base_swa | rope_base
param query_scalar = {arch}.attention.query_pre_attn_scalar | head_dim
param attn_softcap = {arch}.attn_logit_softcapping | 50
param final_softcap = {arch}.final_logit_softcapping | 30

prologue
  x = embed(token_embd.weight)
  scale(x, sqrt(n_embd))

block
  h = rms_norm(x, blk.{i}.attn_norm.weight)
  q = matmul(h, blk.{i}.attn_q.weight)
  k = matmul(h, blk.{i}.attn_k.weight)
  v = matmul(h, blk.{i}.attn_v.weight)
  rope(q, neox, base_swa = rope_base_local)
  rope(k, neox, base_swa = rope_base_local)
  scale(q, rsqrt(query_scalar))
  a = attention(q, k, v, scale = 1, softcap = attn_softcap, window = sliding_window, period = sliding_period)
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
  logits = matmul(x, token_embd.weight)
  softcap(logits, final_softcap)
)"},
      {"olmo2", R"(# OLMo 2 and OLMo 3 decoders: no pre-norms; RMSNorm over all of q and of k, post-attention and
# post-FFN norms, NEOX rope. OLMo 3 ({arch}.attention.sliding_window > 0): sliding-window layers,
# every sliding_period-th layer (i % 4 == 3) global.
arch olmo2
kind decoder
convention matmul_input = gguf_rounded   # GGUF: F16/BF16 weights multiply activations rounded to their type
convention hf_rope = neox                # Hugging Face q/k rows are in rotate-half order: 'pairs' runs as 'neox'
convention hf_norm_offset = 0            # Hugging Face norm weights are stored as they are used

param sliding_window = {arch}.attention.sliding_window | 0           # 0: no sliding layers
param sliding_period = {arch}.attention.sliding_window_pattern | 4

prologue
  x = embed(token_embd.weight)

block
  q = matmul(x, blk.{i}.attn_q.weight)
  k = matmul(x, blk.{i}.attn_k.weight)
  v = matmul(x, blk.{i}.attn_v.weight)
  rms_norm(q, blk.{i}.attn_q_norm.weight)
  rms_norm(k, blk.{i}.attn_k_norm.weight)
  rope(q, neox)
  rope(k, neox)
  a = attention(q, k, v, window = sliding_window, period = sliding_period)
  o = matmul(a, blk.{i}.attn_output.weight)
  rms_norm(o, blk.{i}.post_attention_norm.weight)
  add(x, o)
  g = matmul(x, blk.{i}.ffn_gate.weight)
  u = matmul(x, blk.{i}.ffn_up.weight)
  silu(g)
  mul(g, u)
  o = matmul(g, blk.{i}.ffn_down.weight)
  rms_norm(o, blk.{i}.post_ffw_norm.weight)
  add(x, o)

epilogue
  last(x)
  rms_norm(x, output_norm.weight)
  logits = matmul(x, output.weight)
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
    // Every entry: a NAME.archdef that is not a regular file (a directory, a FIFO, a dangling
    // link) is a definition that did not load, not one to skip.
    for (const auto& file : list_directory(user_dir, false)) {
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
#endif  // !LLMI_KERNEL_PASS

// ---- src/42_kv_cache.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
  // Bytes init() would allocate (UINT64_MAX when that does not fit 64 bits), computed first so that
  // a cache the machine cannot hold is refused before any of it is allocated.
  static uint64_t planned_bytes(const std::vector<KvLayerSpec>& specs, int n_ctx, int ubatch, KvType type) {
    const uint64_t elem = type == KvType::f16 ? 2 : 4;
    uint64_t total = 0;
    for (const auto& s : specs) {
      uint64_t slots = uint64_t(n_ctx);
      if (s.window > 0) slots = std::min<uint64_t>(slots, uint64_t(s.window) + uint64_t(ubatch) - 1);
      uint64_t per = 0, b = 0;
      if (add_overflows(uint64_t(s.hd_k), uint64_t(s.hd_v), &per) || mul_overflows(per, uint64_t(s.n_kv), &b) ||
          mul_overflows(b, slots, &b) || mul_overflows(b, elem, &b) || add_overflows(total, b, &total))
        return UINT64_MAX;
    }
    return total;
  }

  // kern: the kernels that convert rows to and from f16 (the evaluation context's).
  Result<void> init(const std::vector<KvLayerSpec>& specs, int n_ctx, int ubatch, KvType type, const KernelTable* kern) {
    kern_ = kern;
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
    if (type_ == KvType::f16) kern_->f32_row_to_f16(src, reinterpret_cast<uint16_t*>(dst), n);
    else std::memcpy(dst, src, size_t(n) * 4);
  }
  void load(const uint8_t* src, float* dst, int n) const {
    if (type_ == KvType::f16) kern_->f16_row_to_f32(reinterpret_cast<const uint16_t*>(src), dst, n);
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
  const KernelTable* kern_ = nullptr;
  size_t elem_ = 2;
  int n_ctx_ = 0;
  std::vector<KvLayer> layers_;
  std::vector<HeapBuf> bufs_;
  uint64_t bytes_ = 0;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
#endif  // !LLMI_KERNEL_PASS

// ---- src/43_forward.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
  const float* vec2 = nullptr;               // layer_norm(_heads): the bias (nullptr: none)
  int vec_len = 0;
  int off = 0;                               // slice: first column; layer_norm_heads: head length
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
// LoadOptions::max_program_steps when 0.
constexpr uint64_t kDefaultMaxProgramSteps = 1000000;

class ArchCompiler {
 public:
  ArchCompiler(const ArchDef& d, const ModelDesc& m, Program& p, uint64_t max_steps = 0)
      : d_(d), m_(m), p_(p), max_steps_(max_steps ? max_steps : kDefaultMaxProgramSteps) {}

  Result<void> run() {
    const HParams& hp = m_.hp;
    if (hp.n_layer <= 0 || hp.n_layer > 65536)
      return fail(Errc::bad_format, 0, strf("block_count %lld is not a usable layer count", static_cast<long long>(hp.n_layer)));
    // The compiled size is known before anything is compiled: refuse it before allocating.
    const uint64_t n_steps = uint64_t(d_.prologue.size()) + uint64_t(hp.n_layer) * uint64_t(d_.block.size()) +
                             uint64_t(d_.epilogue.size());
    if (n_steps > max_steps_)
      return fail(Errc::out_of_memory, 0,
                  strf("%s.block_count %lld x %zu steps per layer (+ %zu) makes %llu compiled steps, more than the "
                       "limit of %llu (LoadOptions::max_program_steps)",
                       m_.arch.c_str(), static_cast<long long>(hp.n_layer), d_.block.size(),
                       d_.prologue.size() + d_.epilogue.size(), static_cast<unsigned long long>(n_steps),
                       static_cast<unsigned long long>(max_steps_)));
    // Tensors of layers the file does not declare would be silently ignored.
    for (const auto& t : m_.tensors) {
      if (t.name.compare(0, 4, "blk.") != 0) continue;
      size_t e = t.name.find('.', 4);
      std::string_view num = std::string_view(t.name).substr(4, e == std::string::npos ? std::string::npos : e - 4);
      if (num.empty() || num.size() > 9 || num.find_first_not_of("0123456789") != std::string_view::npos) continue;
      if (std::stoll(std::string(num)) >= hp.n_layer)
        return fail(Errc::shape_mismatch, 0,
                    strf("%s.block_count is %lld but the file holds tensor '%s' (layer %s): the count contradicts the tensors",
                         m_.arch.c_str(), static_cast<long long>(hp.n_layer), printable(t.name).c_str(),
                         std::string(num).c_str()));
    }
    p_.steps.reserve(static_cast<size_t>(n_steps));
    if (auto r = eval_params(); !r) return r;
    // which layers are sliding-window layers (from the block's attention arguments), layer by layer
    window_.assign(static_cast<size_t>(hp.n_layer), 0);
    for (const auto& s : d_.block) {
      if (s.op->code != OpCode::attention) continue;
      for (int i = 0; i < hp.n_layer; i++) {
        auto get = [&](const char* kw, double dflt) -> Result<double> {
          const ArgDef* a = s.kwarg(kw);
          return a ? value(a->value, s.line, i) : Result<double>(dflt);
        };
        auto w = get("window", 0), per = get("period", 0);
        if (!w) return w.error();
        if (!per) return per.error();
        auto off = get("offset", *per - 1);
        if (!off) return off.error();
        if (*w < 0 || *w > 1e9 || *per < 0 || *per > 1e9 || *w != std::floor(*w) || *per != std::floor(*per))
          return fail(Errc::bad_format, s.line,
                      strf("sliding window %g / period %g are not usable (layer %d)", *w, *per, i));
        if (*per > 0 && (*off < 0 || *off >= *per || *off != std::floor(*off)))
          return fail(Errc::bad_format, s.line, strf("offset %g is not a layer within the period %g (0 to %g; layer %d)",
                                                     *off, *per, *per - 1, i));
        bool slides = *w > 0;
        if (const ArgDef* a = s.kwarg("sliding")) {
          auto v = value(a->value, s.line, i);
          if (!v) return v.error();
          slides = slides && *v != 0;
        } else if (*per > 0) {
          slides = slides && i % static_cast<int>(*per) != static_cast<int>(*off);
        }
        window_[static_cast<size_t>(i)] = slides ? static_cast<int>(*w) : 0;
      }
    }
    for (const auto& s : d_.prologue)
      if (auto r = stmt(s, -1); !r) return r;
    // the residual stream is n_embd wide
    if (const MetaValue* mv = m_.find_meta(m_.arch + ".embedding_length"); mv && hp.n_embd > 0) {
      int wx = width_[static_cast<size_t>(reg_id("x"))];
      if (wx != hp.n_embd)
        return fail(Errc::shape_mismatch, 0,
                    strf("%s.embedding_length is %lld but the residual 'x' is %d wide (from tensor '%s'): the "
                         "metadata contradicts the tensors",
                         m_.arch.c_str(), static_cast<long long>(hp.n_embd), wx, x_tensor_.c_str()));
    }
    for (int i = 0; i < hp.n_layer; i++)
      for (const auto& s : d_.block)
        if (auto r = stmt(s, i); !r) return r;
    for (const auto& s : d_.epilogue)
      if (auto r = stmt(s, -1); !r) return r;
    p_.reg_logits = reg_id("logits");
    p_.n_vocab = width_[static_cast<size_t>(p_.reg_logits)];
    if (p_.n_vocab <= 0) return fail(Errc::shape_mismatch, 0, "'logits' has no width");
    if (auto r = check_vocabulary(); !r) return r;
    p_.reg_width = max_width_;
    return {};
  }

 private:
  // Every id the output can produce must be one the embedding can read back; a GGUF vocabulary has
  // exactly one token per output row (as llama.cpp requires). Hugging Face tokenizers may differ from
  // the rows either way (padded embeddings; gemma3's tokenizer.json has one token more than its
  // 262144 rows), so only {arch}.vocab_size (config.json's) is checked against them.
  Result<void> check_vocabulary() const {
    const std::string out = logits_tensor_.empty() ? std::string("'logits'") : "'" + logits_tensor_ + "'";
    const long long nv = p_.n_vocab;
    if (p_.embed_rows != INT64_MAX && p_.n_vocab > p_.embed_rows)
      return fail(Errc::shape_mismatch, 0,
                  strf("the output %s gives %lld logits but the embedding '%s' has %lld rows: ids it produces could "
                       "not be read back", out.c_str(), nv, x_tensor_.c_str(), static_cast<long long>(p_.embed_rows)));
    const size_t n_tokens = m_.vocab.tokens.size();
    if (m_.format == "gguf" && n_tokens > 0 && n_tokens != static_cast<size_t>(p_.n_vocab))
      return fail(Errc::shape_mismatch, 0,
                  strf("the vocabulary (tokenizer.ggml.tokens) has %zu tokens but the output %s gives %lld logits",
                       n_tokens, out.c_str(), nv));
    if (auto v = m_.arch_number("vocab_size"); v && *v != static_cast<double>(p_.n_vocab))
      return fail(Errc::shape_mismatch, 0,
                  strf("%s.vocab_size is %g but the output %s gives %lld logits", m_.arch.c_str(), *v, out.c_str(), nv));
    return {};
  }


  Error fail(Errc code, int line, const std::string& msg) const {
    std::string where = line > 0 ? strf("%s:%d", d_.where.c_str(), line) : d_.where;
    return make_error(code, m_.path + ": " + where + ": " + msg);
  }

  bool sliding(int layer) const { return layer >= 0 && window_[static_cast<size_t>(layer)] > 0; }

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
    if (n == "norm_eps") return m_.arch_number("attention.layer_norm_epsilon").value_or(1e-5);
    return make_error(Errc::internal, "unknown value " + n);
  }

  // A param's value: a number, one number per layer (a metadata array), or a term (evaluated where
  // it is used, per layer when it uses every()).
  struct ParamValue {
    std::string name;
    double num = 0;
    std::vector<double> per_layer;  // non-empty: a metadata array, one value per layer
    std::string key;                // that array's key (messages)
    const ValueTerm* term = nullptr;
  };

  // Evaluates a value at `layer` (-1: outside the block) in double.
  Result<double> value(const ValueTerm& t, int line, int layer = -1, int depth = 0) const {
    if (depth > 256) return fail(Errc::archdef, line, "a value nests too deep");
    double v = 0;
    auto kid = [&](size_t k) { return value(t.kids[k], line, layer, depth + 1); };
    switch (t.fn) {
      case ValueTerm::Fn::number:
        v = t.number;
        break;
      case ValueTerm::Fn::name: {
        const ParamValue* pv = nullptr;
        for (const auto& p : params_)
          if (p.name == t.name) pv = &p;
        if (!pv) {
          auto b = builtin_value(t.name);
          if (!b) return fail(Errc::archdef, line, "no value named '" + t.name + "'");
          v = *b;
        } else if (pv->term) {
          auto r = value(*pv->term, line, layer, depth + 1);
          if (!r) return r;
          v = *r;
        } else if (!pv->per_layer.empty()) {
          if (layer < 0)
            return fail(Errc::archdef, line, "param '" + pv->name + "' reads the metadata array '" + pv->key +
                                                 "' (one value per layer): only the 'block' section can use it");
          v = pv->per_layer[static_cast<size_t>(layer)];
        } else {
          v = pv->num;
        }
        break;
      }
      case ValueTerm::Fn::add:
      case ValueTerm::Fn::sub:
      case ValueTerm::Fn::mul:
      case ValueTerm::Fn::div: {
        auto a = kid(0);
        if (!a) return a;
        auto b = kid(1);
        if (!b) return b;
        if (t.fn == ValueTerm::Fn::div && *b == 0) return fail(Errc::bad_format, line, strf("division of %g by 0", *a));
        v = t.fn == ValueTerm::Fn::add ? *a + *b : t.fn == ValueTerm::Fn::sub ? *a - *b
          : t.fn == ValueTerm::Fn::mul ? *a * *b : *a / *b;
        break;
      }
      case ValueTerm::Fn::neg: {
        auto a = kid(0);
        if (!a) return a;
        v = -*a;
        break;
      }
      case ValueTerm::Fn::sqrt:
      case ValueTerm::Fn::rsqrt: {
        auto a = kid(0);
        if (!a) return a;
        if (t.fn == ValueTerm::Fn::sqrt) {
          if (!(*a >= 0)) return fail(Errc::bad_format, line, strf("sqrt of %g", *a));
          v = std::sqrt(*a);
        } else {
          if (!(*a > 0)) return fail(Errc::bad_format, line, strf("rsqrt of %g", *a));
          v = 1.0 / std::sqrt(*a);
        }
        break;
      }
      case ValueTerm::Fn::every: {
        auto per = kid(0);
        if (!per) return per;
        auto off = kid(1);
        if (!off) return off;
        if (!(*per >= 1) || *per > 1e9 || *per != std::floor(*per) || !(*off >= 0) || *off >= *per ||
            *off != std::floor(*off))
          return fail(Errc::bad_format, line, strf("every(%g, %g): the period must be a whole number >= 1 and the offset "
                                                   "a whole number below it", *per, *off));
        if (layer < 0) return fail(Errc::archdef, line, "every() needs a layer: only the 'block' section can use it");
        v = layer % static_cast<int64_t>(*per) == static_cast<int64_t>(*off) ? 1 : 0;
        break;
      }
    }
    if (!std::isfinite(v)) return fail(Errc::bad_format, line, "a value is not finite");
    return v;
  }

  // Whether a term names a param that differs per layer (a metadata array, or every()).
  bool refs_per_layer(const ValueTerm& t) const {
    if (t.fn == ValueTerm::Fn::every) return true;
    if (t.fn == ValueTerm::Fn::name)
      for (const auto& p : params_)
        if (p.name == t.name) return !p.per_layer.empty() || (p.term && refs_per_layer(*p.term));
    for (const auto& k : t.kids)
      if (refs_per_layer(k)) return true;
    return false;
  }

  Result<void> eval_params() {
    for (const auto& p : d_.params) {
      bool done = false;
      std::string tried;
      for (const auto& a : p.alts) {
        ParamValue pv;
        pv.name = p.name;
        if (a.is_meta) {
          std::string key = expand(a.key, -1);
          const MetaValue* mv = m_.find_meta(key);
          const std::vector<double>* arr = m_.find_meta_array(key);
          if (!mv && !arr) {
            tried += (tried.empty() ? "" : ", ") + key;
            continue;
          }
          if (mv && mv->kind == MetaValue::Kind::string)
            return fail(Errc::bad_format, p.line, "metadata '" + key + "' is a string, param '" + p.name + "' needs a number");
          if (arr) {
            if (arr->size() != static_cast<size_t>(m_.hp.n_layer))
              return fail(Errc::shape_mismatch, p.line,
                          strf("metadata '%s' is an array of %zu values, param '%s' needs one per layer (%s.block_count "
                               "is %lld)", key.c_str(), arr->size(), p.name.c_str(), m_.arch.c_str(),
                               static_cast<long long>(m_.hp.n_layer)));
            for (double x : *arr)
              if (!std::isfinite(x))
                return fail(Errc::bad_format, p.line, "metadata '" + key + "' holds a value that is not finite");
            // nonzero(KEY) on an array: absent when every value is 0
            if (a.nonzero && std::all_of(arr->begin(), arr->end(), [](double x) { return x == 0; })) {
              tried += (tried.empty() ? "" : ", ") + key + " (all 0)";
              continue;
            }
            pv.per_layer = *arr;
            pv.key = key;
          } else {
            if (!std::isfinite(mv->num)) return fail(Errc::bad_format, p.line, "metadata '" + key + "' is not finite");
            if (a.nonzero && mv->num == 0) {
              tried += (tried.empty() ? "" : ", ") + key + " (0)";
              continue;
            }
            pv.num = mv->num;
          }
        } else if (a.term.per_layer || refs_per_layer(a.term)) {
          pv.term = &a.term;  // evaluated per layer where it is used
        } else {
          auto v = value(a.term, p.line);
          if (!v) return v.error();
          pv.num = *v;
        }
        params_.push_back(std::move(pv));
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

  // A 1-D weight as f32 (converted once; shared by every step that uses it). `flat`: any shape,
  // read row after row (a weight per head: [head_dim, n_head]); `offset` is added to every element
  // (norm weights stored as w - offset).
  Result<const float*> vector_of(const TensorView& t, int line, int64_t expect_len, const char* what, bool flat = false,
                                 float offset = 0) {
    if (!flat && t.nelements() != t.ne[0])
      return fail(Errc::shape_mismatch, line, strf("%s '%s' should be a vector, it has shape %s", what, t.name.c_str(), t.shape_string().c_str()));
    const int64_t n = t.nelements();
    if (expect_len >= 0 && n != expect_len)
      return fail(Errc::shape_mismatch, line, strf("%s '%s' has %lld elements, expected %lld", what, t.name.c_str(),
                                                   static_cast<long long>(n), static_cast<long long>(expect_len)));
    if (n <= 0 || n > (int64_t(1) << 28))
      return fail(Errc::shape_mismatch, line,
                  strf("%s '%s' has %lld elements", what, t.name.c_str(), static_cast<long long>(n)));
    if (auto r = check_computable(t, line); !r) return r.error();
    auto it = vec_index_.find({&t, offset});
    if (it != vec_index_.end()) return static_cast<const float*>(p_.owned[it->second].data());
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t r = 0; r < t.rows(); r++) dequant_row(t, r, v.data() + r * t.ne[0]);
    for (float& x : v) {
      if (!std::isfinite(x)) return fail(Errc::bad_format, line, "tensor '" + t.name + "' holds a value that is not finite");
      if (offset != 0) x = x + offset;
    }
    p_.owned.push_back(std::move(v));
    vec_index_[{&t, offset}] = p_.owned.size() - 1;
    return static_cast<const float*>(p_.owned.back().data());
  }

  // What Hugging Face checkpoints subtract from norm weights (Gemma: w - 1): the definition's
  // `convention hf_norm_offset`, else the loader's table by model_type. 0 for other formats.
  float norm_offset() const {
    if (m_.format != "safetensors") return 0;
    if (const ConventionDef* c = d_.convention("hf_norm_offset")) return static_cast<float>(c->number);
    return m_.hf_norm_offset;
  }

  Result<float> fvalue(const StmtDef& s, const char* kw, double dflt) const {
    const ArgDef* a = s.kwarg(kw);
    if (!a) {
      if (!std::isfinite(static_cast<float>(dflt)))
        return fail(Errc::bad_format, s.line, strf("the model's default %s (%g) is not a finite float", kw, dflt));
      return static_cast<float>(dflt);
    }
    auto v = value(a->value, s.line, cur_layer_);
    if (!v) return v.error();
    float f = static_cast<float>(*v);
    if (!std::isfinite(f)) return fail(Errc::bad_format, s.line, strf("%s = %g does not fit a float", kw, *v));
    return f;
  }

  Result<int> rope_spec(const StmtDef& s, int layer, int width) {
    const HParams& hp = m_.hp;
    RopeSpec r;
    r.head_dim = static_cast<int>(hp.head_dim);
    if (r.head_dim <= 0 || width % r.head_dim != 0)
      return fail(Errc::shape_mismatch, s.line, strf("rope: '%s' (%d wide) is not a whole number of heads of head_dim %d",
                                                     s.args[0].word.c_str(), width, r.head_dim));
    // Hugging Face checkpoints keep q/k in rotate-half order: the GGUF "pairs" layout is then
    // the same rotation as "neox" on those rows (the loader does not permute them). The definition's
    // `convention hf_rope` says so (default neox); as_written keeps the layout as written.
    const ConventionDef* hc = d_.convention("hf_rope");
    const bool hf_as_neox = !hc || hc->value == "neox";
    r.neox = s.args[1].word == "neox" || (m_.hf_qk_order && hf_as_neox);
    double dims = 0;
    if (const ArgDef* a = s.kwarg("dims")) {
      auto v = value(a->value, s.line, layer);
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
    if (!(r.base > 0) || !std::isfinite(r.base))
      return fail(Errc::bad_format, s.line, strf("rope base %g is not a positive finite number", double(r.base)));
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
      for (float f : r.factors)
        if (!(f > 0)) return fail(Errc::bad_format, s.line, strf("rope factors '%s' holds %g: the factors divide the angle, they must be positive", ft->name.c_str(), double(f)));
    } else if (type == "llama3") {
      // Hugging Face llama-3 configs: the same factors convert_hf_to_gguf bakes into rope_freqs.
      double lo = m_.arch_number("rope.scaling.low_freq_factor").value_or(1.0);
      double hi = m_.arch_number("rope.scaling.high_freq_factor").value_or(4.0);
      double orig = m_.arch_number("rope.scaling.original_context_length").value_or(8192.0);
      if (!(factor > 0) || !(hi > lo) || !(orig > 0) || !std::isfinite(factor) || !std::isfinite(hi) ||
          !std::isfinite(lo) || !std::isfinite(orig))
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
      if (!(factor > 0) || !std::isfinite(factor))
        return fail(Errc::bad_format, s.line, strf("rope scaling 'linear': %s.rope.scaling.factor %g is not usable", m_.arch.c_str(), factor));
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
    cur_layer_ = layer;
    if (const ArgDef* a = s.kwarg("skip")) {  // left out of the layers where the value is not 0
      auto v = value(a->value, s.line, layer);
      if (!v) return v.error();
      if (*v != 0) return {};
    }
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
        if (x_tensor_.empty()) x_tensor_ = t->name;
        break;
      }
      case OpCode::rms_norm:
      case OpCode::norm_heads: {
        bool heads = op.code == OpCode::norm_heads;
        auto v = vector_of(*t, s.line, heads ? -1 : w_a, heads ? "head norm" : "norm", false, norm_offset());
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
        if (tgt == "logits") logits_tensor_ = t->name;
        // convention matmul_input (default gguf_rounded): ggml multiplies an F16/BF16 weight by
        // activations rounded to that type; safetensors checkpoints are computed in f32
        const ConventionDef* mc = d_.convention("matmul_input");
        if (m_.format == "gguf" && (!mc || mc->value == "gguf_rounded"))
          st.round_input = t->type == DType::f16 ? 1 : t->type == DType::bf16 ? 2 : 0;
        if (st.round_input) p_.max_round_width = std::max(p_.max_round_width, w_a);
        break;
      }
      case OpCode::layer_norm:
      case OpCode::layer_norm_heads: {
        const bool heads = op.code == OpCode::layer_norm_heads;
        const int seg = heads ? static_cast<int>(m_.hp.head_dim) : w_a;
        if (seg <= 0 || w_a % seg != 0)
          return fail(Errc::shape_mismatch, s.line, strf("%s: '%s' (%d wide) is not a whole number of heads of head_dim %d",
                                                         op.name, s.args[0].word.c_str(), w_a, seg));
        // the weight: one for the row (layer_norm), one shared by every head or one per head (heads)
        const int64_t nw = t->nelements();
        if (nw != w_a && nw != seg)
          return fail(Errc::shape_mismatch, s.line,
                      heads ? strf("%s: weight '%s' has %lld elements: expected head_dim (%d, shared by every head) or "
                                   "the width of '%s' (%d, one weight per head)", op.name, t->name.c_str(),
                                   static_cast<long long>(nw), seg, s.args[0].word.c_str(), w_a)
                            : strf("%s: weight '%s' has %lld elements but '%s' is %d wide", op.name, t->name.c_str(),
                                   static_cast<long long>(nw), s.args[0].word.c_str(), w_a));
        auto v = vector_of(*t, s.line, nw, "norm", true, norm_offset());
        if (!v) return v.error();
        st.vec = *v;
        st.vec_len = static_cast<int>(nw);
        st.off = seg;
        if (const ArgDef* b = s.kwarg("bias")) {
          std::string tried;
          const TensorView* bt = find_tensor(*b, layer, tried);
          if (!bt && !b->optional) return missing_tensor(*b, layer, s.line, tried);
          if (bt) {
            if (bt->nelements() != nw)
              return fail(Errc::shape_mismatch, s.line,
                          strf("%s: bias '%s' has %lld elements, the weight '%s' %lld", op.name, bt->name.c_str(),
                               static_cast<long long>(bt->nelements()), t->name.c_str(), static_cast<long long>(nw)));
            auto bv = vector_of(*bt, s.line, nw, "bias", true);
            if (!bv) return bv.error();
            st.vec2 = *bv;
          }
        }
        auto eps = fvalue(s, "eps", *builtin_value("norm_eps"));
        if (!eps) return eps.error();
        st.f = *eps;
        if (!(st.f >= 0)) return fail(Errc::bad_format, s.line, "eps is negative");
        break;
      }
      case OpCode::slice: {
        auto a0 = value(s.args[1].value, s.line, layer);
        if (!a0) return a0.error();
        auto a1 = value(s.args[2].value, s.line, layer);
        if (!a1) return a1.error();
        const double start = *a0, width = *a1;
        if (start < 0 || width < 1 || start != std::floor(start) || width != std::floor(width) || start + width > w_a)
          return fail(Errc::shape_mismatch, s.line, strf("slice: columns %g to %g (start %g, width %g) are not within '%s' "
                                                         "(%d wide)", start, start + width - 1, start, width,
                                                         s.args[0].word.c_str(), w_a));
        st.off = static_cast<int>(start);
        w_out = static_cast<int>(width);
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
        for (auto [key, have, declared] : {std::tuple<const char*, int, int64_t>{"attention.head_count", at.n_head, hp.n_head},
                                           {"attention.head_count_kv", at.n_kv, hp.n_head_kv}}) {
          const MetaValue* mv = m_.find_meta(m_.arch + "." + key);
          if (!mv || mv->kind == MetaValue::Kind::string || declared <= 0 || have == declared) continue;
          return fail(Errc::shape_mismatch, s.line,
                      strf("%s.%s is %lld but attention gets %d heads of %d from '%s' (%d wide) and '%s' (%d wide) in "
                           "layer %d: the metadata contradicts the tensors",
                           m_.arch.c_str(), key, static_cast<long long>(declared), have, at.hd_k, s.args[0].word.c_str(),
                           w_a, s.args[1].word.c_str(), wk, layer));
        }
        at.window = sliding(layer) ? window_[static_cast<size_t>(layer)] : 0;
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
        auto v = value(s.args[1].value, s.line, layer);
        if (!v) return v.error();
        st.f = static_cast<float>(*v);
        if (!std::isfinite(st.f)) return fail(Errc::bad_format, s.line, strf("%s: %g does not fit a float", op.name, *v));
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
  std::vector<ParamValue> params_;
  std::vector<int> width_, max_width_;
  std::map<std::pair<const TensorView*, float>, size_t> vec_index_;
  std::vector<int> window_;  // per layer: the sliding window, 0 on global layers
  int cur_layer_ = -1;       // the layer stmt() compiles (-1: prologue / epilogue)
  uint64_t max_steps_;
  std::string x_tensor_, logits_tensor_;  // the embedding and the output weight (messages)
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
    ArchCompiler comp(*def, *e->desc_, e->prog_, opts.max_program_steps);
    if (auto r = comp.run(); !r) return r.error();
    auto kern = select_kernels(opts.kernels);
    if (!kern) return kern.error();
    e->kern_ = *kern;
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
  // The kernels this engine runs (the level chosen at load, see 26_kernels_end).
  const KernelTable& kernels() const { return *kern_; }
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
  const KernelTable* kern_ = nullptr;
};

enum class EvalStatus { ok, cancelled, context_full };

// ---- elementwise kernels (f32 activations) ----
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
  // x0 c - x1 s and x0 s + x1 c with the first product fused, as llama.cpp's CPU build computes
  // them (the compiler contracts its expressions): its bits, not one rounding better or worse.
  if (r.neox) {
    const int h = n / 2;
    for (int i = 0; i < h; i++) {
      float c = cache[2 * i], s = cache[2 * i + 1];
      float x0 = in[i], x1 = in[i + h];
      out[i] = std::fma(x0, c, -(x1 * s));
      out[i + h] = std::fma(x0, s, x1 * c);
    }
  } else {
    for (int i = 0; i < n; i += 2) {
      float c = cache[i], s = cache[i + 1];
      float x0 = in[i], x1 = in[i + 1];
      out[i] = std::fma(x0, c, -(x1 * s));
      out[i + 1] = std::fma(x0, s, x1 * c);
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
    c.kern_ = &c.e_->kernels();
    const Program& p = c.e_->program();
    const LoadOptions& o = c.e_->options();
    c.n_ctx_ = n_ctx > 0 ? n_ctx : c.e_->n_ctx_default();
    if (c.n_ctx_ > (1 << 24)) return make_error(Errc::invalid_argument, strf("context of %d tokens is too large", c.n_ctx_));
    c.ubatch_ = std::min(kUbatch, c.n_ctx_);
    // What the session will allocate, against the limit, before allocating any of it.
    {
      uint64_t kv = KvCache::planned_bytes(p.kv, c.n_ctx_, c.ubatch_, o.kv_type);
      uint64_t scratch = 0;
      for (size_t r = 0; r < p.reg_names.size(); r++)
        scratch += uint64_t(c.ubatch_) * uint64_t(std::max(1, p.reg_width[r])) * 4;
      scratch += uint64_t(c.ubatch_) * uint64_t(p.max_round_width) * 4;
      uint64_t total = kv == UINT64_MAX ? UINT64_MAX : kv + scratch;
      uint64_t limit = o.max_session_bytes ? o.max_session_bytes : physical_memory_bytes();
      if (limit && total > limit)
        return make_error(Errc::out_of_memory,
                          strf("%s: a session of %d tokens needs %s (KV cache %s for %d attention layers, scratch %s), more "
                               "than the limit of %s (%s); use a smaller context",
                               c.e_->desc().path.c_str(), c.n_ctx_, kv == UINT64_MAX ? "more than 2^64 bytes" : human_bytes(total).c_str(),
                               kv == UINT64_MAX ? "overflow" : human_bytes(kv).c_str(), static_cast<int>(p.kv.size()),
                               human_bytes(scratch).c_str(), human_bytes(limit).c_str(),
                               o.max_session_bytes ? "LoadOptions::max_session_bytes" : "the machine's physical memory; "
                                                                                       "LoadOptions::max_session_bytes"));
    }
    if (auto r = c.kv_.init(p.kv, c.n_ctx_, c.ubatch_, o.kv_type, c.kern_); !r) return r.error();
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
    c.mm_ = std::make_unique<MatmulScratch>(threads);
    int max_slots = 1, max_hd = 1;
    for (int l = 0; l < c.kv_.n_layers(); l++) {
      max_slots = std::max(max_slots, c.kv_.layer(l).slots);
      max_hd = std::max({max_hd, c.kv_.layer(l).spec.hd_k, c.kv_.layer(l).spec.hd_v});
    }
    for (const auto& r : p.ropes) max_hd = std::max(max_hd, r.head_dim);
    c.scores_stride_ = max_slots;
    // per thread: a row of partial sums, or 64 lanes of them (llama.cpp's order)
    c.row_stride_ = size_t(64) * size_t((max_hd + 15) & ~15);
    auto sb = HeapBuf::alloc(uint64_t(threads) * uint64_t(max_slots), 4, "attention scratch");
    if (!sb) return sb.error();
    c.scores_ = std::move(*sb);
    auto rb = HeapBuf::alloc(uint64_t(threads) * c.row_stride_, 4, "attention scratch");
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
    if (all_logits) {  // [n][n_vocab] floats: refused, not an abort, when the machine cannot hold them
      const LoadOptions& o = e_->options();
      uint64_t limit = o.max_session_bytes ? o.max_session_bytes : physical_memory_bytes();
      if (limit && out_n > limit / 4)
        return make_error(Errc::out_of_memory, strf("eval: the logits of %d tokens x %d would need %s, more than %s", n,
                                                    p.n_vocab, human_bytes(out_n * 4).c_str(), human_bytes(limit).c_str()));
    }
    logits.resize(static_cast<size_t>(out_n));
    int done = 0;
    while (done < n) {
      int chunk = std::min(n - done, slide_ ? slide_chunk_ : ubatch_);
      if (n_past_ + chunk > n_ctx_) slide(n_past_ + chunk - n_ctx_);
      bool final_chunk = done + chunk == n;
      float* out = all_logits ? logits.data() + size_t(done) * p.n_vocab : (final_chunk ? logits.data() : nullptr);
      auto st = run_chunk(tokens.data() + done, chunk, out, all_logits, cancel);
      if (!st) return st.error();
      if (*st != EvalStatus::ok) return *st;
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

  Result<EvalStatus> run_chunk(const int32_t* toks, int n, float* out_logits, bool all_logits, const std::function<bool()>& cancel) {
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
          for_rows(rows, wo, [&](int t, int) { kern_->dequant_row(*s.w, toks[t], d + size_t(t) * wo); });
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
          if (!kern_->matmul_x(*s.w, in, rows, d, wo, e_->pool(), s.round_input == 2, *mm_))
            return make_error(Errc::out_of_memory, strf("out of memory for the scratch of a matrix product (%s, %d tokens)",
                                                        s.w->name.c_str(), rows));
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
              case OpCode::silu: kern_->silu_row(x, y, wi); break;
              case OpCode::gelu: for (int k = 0; k < wi; k++) y[k] = gelu_erf_f32(x[k]); break;
              case OpCode::gelu_tanh: kern_->gelu_tanh_row(x, y, wi); break;
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
            // tanh(x * (1/c)) * c, llama.cpp's operations
            const float inv = 1.0f / s.f;
            for (int k = 0; k < wi; k++) d[size_t(t) * wi + k] = std::tanh(a[size_t(t) * wi + k] * inv) * s.f;
          });
          break;
        case OpCode::copy:
          std::memcpy(d, a, size_t(rows) * wi * 4);
          break;
        case OpCode::slice:
          for (int t = 0; t < rows; t++) std::memcpy(d + size_t(t) * wo, a + size_t(t) * wi + s.off, size_t(wo) * 4);
          break;
        case OpCode::layer_norm:
        case OpCode::layer_norm_heads: {
          const int seg = s.off;
          const bool per_head = s.vec_len != seg;  // one weight (and bias) per head
          for_rows(rows, wi, [&](int t, int) {
            for (int h = 0; h < wi / seg; h++) {
              const float* x = a + size_t(t) * wi + size_t(h) * seg;
              float* y = d + size_t(t) * wo + size_t(h) * seg;
              const float* w = s.vec + (per_head ? size_t(h) * seg : 0);
              const float* b = s.vec2 ? s.vec2 + (per_head ? size_t(h) * seg : 0) : nullptr;
              // as ggml's CPU build (AVX2): the sum in double, the mean in float; the squares of the
              // float differences added in float by groups of 8 (its lane order), the groups in double
              double sum = 0;
              for (int k = 0; k < seg; k++) sum += double(x[k]);
              const float mean = static_cast<float>(sum) / static_cast<float>(seg);
              double var = 0;
              int k0 = 0;
              for (; k0 + 7 < seg; k0 += 8) {
                float q[8];
                for (int j = 0; j < 8; j++) {
                  const float dv = x[k0 + j] - mean;
                  q[j] = dv * dv;
                }
                var += double(((q[0] + q[4]) + (q[2] + q[6])) + ((q[1] + q[5]) + (q[3] + q[7])));
              }
              for (; k0 < seg; k0++) {
                const float dv = x[k0] - mean;
                var += double(dv * dv);
              }
              const float sc = 1.0f / std::sqrt(static_cast<float>(var / seg) + s.f);
              for (int k = 0; k < seg; k++) {
                const float v = ((x[k] - mean) * sc) * w[k];
                y[k] = b ? v + b[k] : v;
              }
            }
          });
          break;
        }
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
    const bool f16 = kv_.type() == KvType::f16;
    const size_t ks = size_t(at.hd_k) * kv_.elem(), vs = size_t(at.hd_v) * kv_.elem();
    auto task = [&](int t, int h, int thread) {
      const int pos = pos0 + t;
      const int lo = at.window > 0 ? std::max(0, pos - at.window + 1) : 0;
      const int g = h / group;
      const float* qh = q + size_t(t) * wq + size_t(h) * at.hd_k;
      float* sc = scores_.as<float>() + size_t(thread) * scores_stride_;
      // the visible keys lo..pos are at most two contiguous runs of ring slots
      for (int j = lo; j <= pos;) {
        const int slot = j % L.slots, run = std::min(pos - j + 1, L.slots - slot);
        kern_->attn_scores(qh, kv_.k_at(L, g, slot), ks, run, at.hd_k, f16, at.scale, sc + (j - lo));
        j += run;
      }
      const int nk = pos - lo + 1;
      float mx = -INFINITY;
      for (int j = 0; j < nk; j++) {
        if (at.softcap > 0) sc[j] = std::tanh(sc[j] * (1.0f / at.softcap)) * at.softcap;  // as llama.cpp
        mx = std::max(mx, sc[j]);
      }
      const double sum = kern_->attn_exp(sc, nk, mx, lo % 16);
      const float inv = static_cast<float>(1.0 / sum);
      for (int j = 0; j < nk; j++) sc[j] *= inv;
      float* o = out + size_t(t) * wo + size_t(h) * at.hd_v;
      float* part = rows_.as<float>() + size_t(thread) * row_stride_;
      kern_->attn_values(sc, kv_.v_at(L, g, 0), vs, L.slots, lo, pos, at.hd_v, f16, n > 1, part, o);
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
  const KernelTable* kern_ = nullptr;  // the engine's kernels
  std::unique_ptr<MatmulScratch> mm_;  // the matrix products' scratch
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
#endif  // !LLMI_KERNEL_PASS

// ---- src/44_validate.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
  // Largest |ours - reference| over every finite logit, and that divided by the reference's largest
  // |logit| (a wrong scale or shift shows here: top-1, Pearson and top-10 ignore it).
  double max_abs_diff = 0, max_rel_diff = 0;
  double ref_max_abs = 0;
  // NaN or infinite logits: such a position never matches (top-1 differs, Pearson 0)
  uint64_t nonfinite_ours = 0, nonfinite_ref = 0;
  int first_nonfinite_pos = -1, first_nonfinite_id = -1;
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
    bool finite = true;
    for (int i = 0; i < n_vocab; i++) {
      bool fa = std::isfinite(a[i]), fb = std::isfinite(b[i]);
      if (fa && fb) {
        r.max_abs_diff = std::max(r.max_abs_diff, std::fabs(double(a[i]) - double(b[i])));
        r.ref_max_abs = std::max(r.ref_max_abs, std::fabs(double(b[i])));
      }
      r.nonfinite_ours += !fa;
      r.nonfinite_ref += !fb;
      if ((!fa || !fb) && finite) {
        finite = false;
        if (r.first_nonfinite_pos < 0) {
          r.first_nonfinite_pos = p;
          r.first_nonfinite_id = i;
        }
      }
    }
    std::vector<int> ta = top_k_ids(a, n_vocab, 10), tb = top_k_ids(b, n_vocab, 10);
    bool same = finite && !ta.empty() && !tb.empty() && ta[0] == tb[0];
    r.top1_matches += same;
    if (!same && r.first_divergence < 0) r.first_divergence = p;
    double pc = finite ? pearson(a, b, static_cast<size_t>(n_vocab)) : 0.0;
    psum += pc;
    r.pearson_min = std::min(r.pearson_min, pc);
    int overlap = 0;
    for (int x : ta) overlap += std::find(tb.begin(), tb.end(), x) != tb.end();
    osum += overlap;
  }
  r.top1_match_all = r.top1_matches == rows;
  r.max_rel_diff = r.ref_max_abs > 0 ? r.max_abs_diff / r.ref_max_abs : (r.max_abs_diff > 0 ? INFINITY : 0);
  r.pearson_mean = rows ? psum / rows : 1;
  r.top10_overlap_mean = rows ? osum / rows : 10;
  if (rows == 0) r.pearson_min = 1;
  return r;
}

// Token ids separated by commas and/or white space: "1,2,3", "1 2 3", or a JSON array "[1, 2]".
// At least one id unless allow_empty; an item that is not a non-negative 32-bit integer is an error
// naming it.
inline Result<std::vector<int32_t>> parse_id_list(std::string_view s, bool allow_empty = false) {
  auto is_sep = [](char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '[' || c == ']'; };
  std::vector<int32_t> ids;
  size_t k = 0;
  while (k < s.size()) {
    if (is_sep(s[k])) {
      k++;
      continue;
    }
    size_t e = k;
    while (e < s.size() && !is_sep(s[e])) e++;
    std::string_view tok = s.substr(k, e - k);
    int32_t v = 0;
    auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (ec != std::errc() || p != tok.data() + tok.size() || v < 0)
      return make_error(Errc::invalid_argument, "'" + printable(tok) + "' is not a token id (expected ids like 1,2,3)");
    ids.push_back(v);
    k = e;
  }
  if (ids.empty() && !allow_empty) return make_error(Errc::invalid_argument, "no token ids given");
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
#endif  // !LLMI_KERNEL_PASS

// ---- src/50_sampler.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
#endif  // !LLMI_KERNEL_PASS

// ---- src/51_generate.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
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
#endif  // !LLMI_KERNEL_PASS

// ---- src/90_model.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
// ==== Model and Session ====
namespace llminfer {
inline namespace v0_1 {

LLMI_API_DEF const char* to_string(StopReason reason) noexcept {
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
  // The tokenizer, or why there is none: a model whose vocabulary is missing or unsupported still loads
  // (it can run from token ids); tokenize() then returns `tokenizer_error`.
  std::shared_ptr<const Tokenizer> tokenizer;
  Error tokenizer_error;
  // The chat template, parsed at first use (replies, generate with chat).
  mutable std::once_flag chat_once;
  mutable std::optional<ChatTemplate> chat_template;
  mutable Error chat_error;
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

LLMI_API_DEF Result<Model> Model::load(std::string_view path, const LoadOptions& options) {
  double t0 = detail::now_ms();
#if !defined(LLMINFER_NO_CPU_CHECK)
  if (auto cpu = detail::check_cpu(); !cpu) return cpu.error();
#endif
  auto desc = detail::load_description(std::string(path), options.read_into_memory);
  if (!desc) return desc.error();
  auto impl = std::make_shared<detail::ModelImpl>();
  impl->desc = std::move(*desc);
  impl->options = options;
  // A malformed vocabulary is a broken file (the load fails); a missing or unsupported one is reported
  // by tokenize() (the model still runs from token ids).
  if (auto tok = detail::Tokenizer::build(*impl->desc)) {
    impl->tokenizer = std::move(*tok);
  } else {
    if (tok.error().code == Errc::bad_format) return tok.error();
    impl->tokenizer_error = tok.error();
    if (options.log) options.log("tokenizer unavailable: " + tok.error().message);
  }
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
  // strip_leading: a chat reply drops the leading space SentencePiece vocabularies put on its first
  // piece (as decoding the reply alone does); a continuation keeps it (prompt + text = the whole).
  ContextIO(const ModelImpl& m, Context& ctx, std::vector<float>& logits, bool strip_leading)
      : ctx_(ctx), logits_(logits), tok_(m.tokenizer.get()) {
    if (tok_) {
      decoder_.emplace(*tok_, false, strip_leading);
    } else {  // no usable vocabulary: the ids the file names end the generation, no text
      const VocabData& vd = m.desc->vocab;
      for (int32_t id : {vd.eos, vd.eot, vd.eom})
        if (id >= 0) eog_.push_back(id);
    }
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
  bool is_eog(int32_t id) const override {
    if (tok_) return tok_->is_eog(id);
    return std::find(eog_.begin(), eog_.end(), id) != eog_.end();
  }
  std::string piece(int32_t id) override { return decoder_ ? decoder_->push(id) : std::string(); }
  std::string flush() override { return decoder_ ? decoder_->flush() : std::string(); }

 private:
  Context& ctx_;
  std::vector<float>& logits_;
  const Tokenizer* tok_;
  std::optional<StreamDecoder> decoder_;
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
                                               const GenerateOptions& o, double t_start, bool strip_leading) {
  if (!s.model) return make_error(Errc::invalid_argument, "generate: the model is not loaded");
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
  ContextIO io(m, ctx, s.logits, strip_leading);
  std::vector<int32_t> history(prompt.begin(), prompt.end());
  auto run = run_generation(io, prompt.subspan(reuse), std::move(history), o, s.sampler, s.rng, t_start, r);
  if (!run) return run.error();
  if (r.stop == StopReason::context_full && r.tokens.empty() && prompt.size() > static_cast<size_t>(ctx.n_ctx()))
    r.error = make_error(Errc::invalid_argument,
                         strf("%s: the prompt is %zu tokens but the context holds %d (LoadOptions::context, --context): "
                              "nothing was generated",
                              m.desc->path.c_str(), prompt.size(), ctx.n_ctx()));
  r.timings.load_ms = m.load_ms;
  r.peak_rss_mb = peak_rss_mb();
  r.kv_bytes = ctx.kv_bytes();
  return r;
}

}  // namespace detail

namespace detail {

// The conversation rendered by the model's chat template (ending with the assistant's turn) and
// tokenized so that message content never becomes control tokens. BOS is added when the model
// asks for it and the template did not write it.
inline Result<std::vector<int32_t>> chat_prompt_tokens(const ModelImpl& m, std::span<const Message> messages,
                                                       const std::atomic<bool>* cancel = nullptr) {
  if (!m.tokenizer) return m.tokenizer_error;
  std::call_once(m.chat_once, [&] {
    auto tpl = ChatTemplate::parse(chat_template_for(*m.desc).source);
    if (tpl) m.chat_template.emplace(std::move(*tpl));
    else m.chat_error = make_error(tpl.error().code, m.desc->path + ": " + tpl.error().message);
  });
  if (!m.chat_template) return m.chat_error;
  ChatInput in;
  chat_special_tokens(*m.desc, in);
  in.messages = ChatInput::messages_from(messages);
  in.add_generation_prompt = true;
  in.cancel = cancel;  // GenerateOptions::cancel stops a long render too
  auto r = m.chat_template->render(in);
  if (!r) return make_error(r.error().code, m.desc->path + ": " + r.error().message);
  auto ids = m.tokenizer->encode_prompt(r->text, r->content_spans, false);
  if (!ids) return ids.error();
  const auto& prefix = m.tokenizer->prefix_ids();
  if (!prefix.empty() && !(ids->size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), ids->begin())))
    ids->insert(ids->begin(), prefix.begin(), prefix.end());
  return ids;
}

}  // namespace detail

LLMI_API_DEF Result<GenerateResult> Model::generate(std::string_view prompt, const GenerateOptions& options) const {
  double t0 = detail::now_ms();
  if (!impl_) return detail::make_error(Errc::invalid_argument, "generate: the model is not loaded");
  if (!impl_->tokenizer) return impl_->tokenizer_error;
  if (options.chat) {
    std::vector<Message> msgs;
    if (!options.system.empty()) msgs.push_back(Message{"system", options.system});
    msgs.push_back(Message{"user", std::string(prompt)});
    auto ids = detail::chat_prompt_tokens(*impl_, msgs, options.cancel);
    if (!ids) return ids.error();
    detail::SessionImpl s;
    s.model = impl_;
    return detail::session_generate(s, *ids, options, t0, true);
  }
  auto ids = impl_->tokenizer->encode(prompt, true, options.parse_special);
  if (!ids) return ids.error();
  // add_special's EOS (a few vocabularies ask for one) would end the text before it starts
  const auto& suffix = impl_->tokenizer->suffix_ids();
  if (!suffix.empty() && ids->size() > suffix.size() &&
      std::equal(suffix.begin(), suffix.end(), ids->end() - static_cast<std::ptrdiff_t>(suffix.size())))
    ids->resize(ids->size() - suffix.size());
  detail::SessionImpl s;
  s.model = impl_;
  return detail::session_generate(s, *ids, options, t0, false);
}

LLMI_API_DEF Result<GenerateResult> Model::generate(std::span<const int32_t> prompt_tokens, const GenerateOptions& options) const {
  double t0 = detail::now_ms();
  if (!impl_) return detail::make_error(Errc::invalid_argument, "generate: the model is not loaded");
  detail::SessionImpl s;
  s.model = impl_;
  return detail::session_generate(s, prompt_tokens, options, t0, false);
}

LLMI_API_DEF Session Model::session() const {
  auto s = std::make_unique<detail::SessionImpl>();
  s->model = impl_;
  return Session(std::move(s));
}

LLMI_API_DEF const detail::ModelImpl& Model::impl() const {
  if (!impl_) {
    std::fputs("llminfer: Model::impl() on a Model that holds no model (default-constructed or moved from)\n", stderr);
    std::abort();
  }
  return *impl_;
}

LLMI_API_DEF Result<std::vector<int32_t>> Model::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  if (!impl_) return detail::make_error(Errc::invalid_argument, "tokenize: the model is not loaded");
  if (!impl_->tokenizer) return impl_->tokenizer_error;
  return impl_->tokenizer->encode(text, add_special, parse_special);
}

// Valid UTF-8 always: bytes that do not form valid UTF-8 become U+FFFD (as Hugging Face decodes).
LLMI_API_DEF std::string Model::detokenize(std::span<const int32_t> ids) const {
  if (!impl_ || !impl_->tokenizer) return std::string();
  return detail::utf8_lossy(impl_->tokenizer->decode(ids));
}

// The model's own chat template (or the documented ChatML fallback, see chat_template_for).
LLMI_API_DEF Result<std::string> Model::apply_chat_template(std::span<const Message> messages,
                                                            bool add_generation_prompt) const {
  if (!impl_) return detail::make_error(Errc::invalid_argument, "apply_chat_template: the model is not loaded");
  auto src = detail::chat_template_for(*impl_->desc);
  auto tpl = detail::ChatTemplate::parse(src.source);
  if (!tpl) return detail::make_error(tpl.error().code, impl_->desc->path + ": " + tpl.error().message);
  detail::ChatInput in;
  detail::chat_special_tokens(*impl_->desc, in);
  in.messages = detail::ChatInput::messages_from(messages);
  in.add_generation_prompt = add_generation_prompt;
  auto r = tpl->render(in);
  if (!r) return detail::make_error(r.error().code, impl_->desc->path + ": " + r.error().message);
  return std::move(r->text);
}

LLMI_API_DEF Session::Session(std::unique_ptr<detail::SessionImpl> impl) : impl_(std::move(impl)) {}
LLMI_API_DEF Session::Session(Session&&) noexcept = default;
LLMI_API_DEF Session& Session::operator=(Session&&) noexcept = default;
LLMI_API_DEF Session::~Session() = default;

LLMI_API_DEF detail::SessionImpl& Session::impl() {
  if (!impl_) {
    std::fputs("llminfer: Session::impl() on a moved-from Session\n", stderr);
    std::abort();
  }
  return *impl_;
}

LLMI_API_DEF void Session::add(std::string_view role, std::string_view content) {
  if (!impl_) return;  // moved from: reply() reports it
  impl_->messages.push_back(Message{std::string(role), std::string(content)});
}

LLMI_API_DEF Result<GenerateResult> Session::reply(const GenerateOptions& options) {
  double t0 = detail::now_ms();
  if (!impl_) return detail::make_error(Errc::invalid_argument, "reply: the session was moved from (use the Session it was moved to)");
  detail::SessionImpl& s = *impl_;
  if (!s.model) return detail::make_error(Errc::invalid_argument, "reply: the model is not loaded");
  if (s.messages.empty()) return detail::make_error(Errc::invalid_argument, "reply: the conversation is empty (add a message first)");
  auto ids = detail::chat_prompt_tokens(*s.model, s.messages, options.cancel);
  if (!ids) return ids.error();
  auto r = detail::session_generate(s, *ids, options, t0, true);
  if (!r) return r.error();
  // The reply joins the conversation even when it was cut short (what the user saw), so roles
  // keep alternating for templates that insist on it.
  s.messages.push_back(Message{"assistant", r->text});
  return r;
}

LLMI_API_DEF void Session::reset() {
  if (!impl_) return;
  impl_->messages.clear();
  if (impl_->ctx) impl_->ctx->clear();
}

LLMI_API_DEF const std::vector<Message>& Session::messages() const {
  static const std::vector<Message> none;
  return impl_ ? impl_->messages : none;
}
LLMI_API_DEF int Session::cached_tokens() const { return impl_ && impl_->ctx ? impl_->ctx->n_past() : 0; }
LLMI_API_DEF int Session::context_size() const {
  if (!impl_ || !impl_->model) return 0;
  return impl_->ctx ? impl_->ctx->n_ctx() : impl_->model->engine->n_ctx_default();
}

}  // namespace v0_1
}  // namespace llminfer
#endif  // !LLMI_KERNEL_PASS

// ---- src/99_impl_end.hpp (generated from src/ by tools/amalgamate: edit the part, not this file) ----
#if !defined(LLMI_KERNEL_PASS)
#undef LLMI_API_DEF
#endif
#endif  // LLMINFER_IMPLEMENTATION

// ---------------------------------------------------------------------------------------------
// llminfer is released under the MIT License (also in the file LICENSE of the repository):
//
// MIT License
//
// Copyright (c) 2026 the llminfer authors
//
// Permission is hereby granted, free of charge, to any person obtaining a copy
// of this software and associated documentation files (the "Software"), to deal
// in the Software without restriction, including without limitation the rights
// to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
// copies of the Software, and to permit persons to whom the Software is
// furnished to do so, subject to the following conditions:
//
// The above copyright notice and this permission notice shall be included in all
// copies or substantial portions of the Software.
//
// THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
// IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
// FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
// AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
// LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
// OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
// SOFTWARE.
