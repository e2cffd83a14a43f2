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
// the header builds with -fno-exceptions -fno-rtti. g++ 12 with AVX-512 enabled: add
// -fno-tree-slp-vectorize (at -O2 it builds some constant vectors of 64-bit values wrongly). Linux, macOS and other
// POSIX systems map files with mmap; Windows with CreateFileMapping / MapViewOfFile (UTF-8 paths through the
// wide-character API; tested with MinGW-w64 under Wine, MSVC is not tested). Only the implementation TU needs the SIMD
// flags (see STYLE: the ODR hazard). CMake: the targets llminfer::llminfer (this header) and, with
// -DLLMINFER_BUILD_LIBRARY=ON, llminfer::impl (the implementation compiled); pkg-config: llminfer, llminfer-impl
// (README: "Building with CMake / pkg-config").
//
// ==== Model files ====
//
//   Model::load(path) takes a GGUF file (versions 2 and 3), a .safetensors file with config.json
//   beside it, or a Hugging Face / MLX model directory: config.json; model.safetensors, a sharded
//   model.safetensors.index.json, or *.safetensors; optional tokenizer.json, tokenizer_config.json,
//   generation_config.json, chat_template.jinja or chat_template.json. MLX affine 4- and 8-bit
//   checkpoints (packed U32 weights with .scales and .biases, "quantization" in config.json, with
//   per-module overrides) load as one quantized tensor each (Gemma 3n's too: mlx-lm's and mlx-vlm's
//   layouts; the vision / audio towers of a multimodal checkpoint are listed, never combined nor
//   read). Weights are used in place in the
//   mapping, never read into memory (unless LoadOptions::read_into_memory, below). Every ggml tensor
//   type is known by name; a type without kernels loads (`llminfer info` lists it) and is refused
//   only when a model computes with it. Only regular files are opened: a FIFO or a device is
//   refused (opened without waiting for a writer), as is an `<arch>.archdef` that is not one.
//
//   Model::load_from_memory(bytes, name) takes a GGUF image the caller holds (an asset pack, a
//   file inside an APK, mapped by the caller), checked exactly as a file is (messages name `name`)
//   and used in place: the memory must stay valid and unchanged while the Model, its copies or
//   sessions live, and start at a multiple of 16 bytes (a mapping starts on a page); with
//   LoadOptions::read_into_memory it is copied and may go after the call. Safetensors models need
//   their directory (config.json, tokenizer files) and load only from files.
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
//   Limits computed before allocating (LoadOptions; 0 means the default; on the CLI the flags
//   --max-program-steps N and --max-session-mb N of every command that loads a model):
//     max_program_steps   compiled steps: prologue + block x block_count + epilogue (1,000,000);
//                         over it the load fails with out_of_memory, naming block_count and the
//                         steps per layer
//     max_session_bytes   a session's KV cache plus activation scratch (the machine's physical
//                         memory); a session of the load's context (LoadOptions::context or the
//                         default) over it fails the load with out_of_memory naming the file and
//                         both sizes (use a smaller context); a larger context asked for later
//                         (the logits of a longer sequence) is checked the same way when created
//
// ==== Build options (define before including, in the implementation TU) ====
//
//   LLMINFER_IMPLEMENTATION     compile the implementation into this translation unit
//   LLMINFER_INLINE_API         define the public functions `inline` (only for programs that define
//                               LLMINFER_IMPLEMENTATION in every unit that uses the library)
//   LLMINFER_SIMD_SCALAR        force the portable scalar kernels (also LLMINFER_FORCE_SCALAR)
//   LLMINFER_DISPATCH           x86-64: one binary for every CPU. Build with the baseline target
//                               (e.g. -march=x86-64, g++ or clang++); the kernels are compiled in
//                               for the levels scalar, avx2, avx2+sums, avx512, avx512bf16,
//                               avx512+amx and
//                               the best the CPU (and OS) runs is chosen when a model loads (below)
//   LLMINFER_NO_CPU_CHECK       do not verify at load that the CPU has the instructions compiled in
//   LLMINFER_MAX_TENSORS        largest tensor count a GGUF file may declare (default 1<<20)
//   LLMINFER_MAX_METADATA       largest metadata key/value count a GGUF file may declare (default 1<<20)
//   LLMINFER_MAX_JSON_DEPTH     deepest JSON nesting accepted (default 512)
//   LLMINFER_MAX_PROMPT_BYTES   most bytes one tokenizer call accepts (default 16 MiB; more is an
//                               invalid_argument error naming the limit; the environment variable of
//                               the same name overrides it at run time; tokenizing needs up to about
//                               50 bytes of memory per input byte, checked before it starts for inputs
//                               over 1 MiB, so a shortage is out_of_memory, not an abort)
//   LLMINFER_NO_TEMPLATES       leave the chat-template interpreter out (src/35-38, a fifth of the
//                               header): every call that needs a template (apply_chat_template,
//                               render_chat_template, generate with chat, Session::reply and
//                               begin_reply; the C API's chat and session replies) returns
//                               Errc::unsupported, "this build has no template interpreter"; raw
//                               prompts, token ids, tokenizers and Session::eval / sample work as
//                               before, and the declarations (and types) do not change. Measured
//                               (g++ 12 -O2, x86-64): the implementation TU compiles in about 20%
//                               less time and its code is 24% smaller (1.37 -> 1.04 MB of text)
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
//   Grammars and JSON Schemas (structured output) are untrusted input too; bounded by:
//   LLMINFER_GRAMMAR_MAX_BYTES    bytes of grammar text, a schema's grammar included (default 1 MiB)
//   LLMINFER_GRAMMAR_MAX_ELEMENTS compiled elements after repetitions expand (default 1M)
//   LLMINFER_GRAMMAR_MAX_REPEAT   largest m, n of {m,n}, minItems, maxLength, ... (default 10000)
//   LLMINFER_GRAMMAR_MAX_DEPTH    nesting of ( ) and repetitions in a rule (default 100)
//   LLMINFER_GRAMMAR_MAX_STACKS   parse stacks alive at once, and 64x as many expansion steps per
//                                 byte (default 10000): an error ("too ambiguous"), never a hang
//   LLMINFER_GRAMMAR_MAX_CACHE    bytes of matcher caches and token masks per generation (default
//                                 256 MiB); past it they are dropped and rebuilt from the current state
//   LLMI_ASSERT(x)              internal invariant check (default: message and abort); never used
//                               for anything a file or a caller controls
//
//   The kernels are chosen at compile time from the target's instruction set (-march): AVX-512
//   (F, BW, VL, with VNNI and BF16 when present), AVX2+FMA+F16C, NEON (with dotprod when present),
//   else scalar. MSVC: /arch:AVX2 and /arch:AVX512 select the AVX2 and AVX-512 kernels (not tested).
//   With LLMINFER_DISPATCH the levels are: scalar; avx2 (x86-64-v3: AVX2, FMA, F16C, BMI1/2, LZCNT,
//   MOVBE); avx2+sums (the avx2 kernels with prompts in the block-sum order, below); avx512 (x86-64-v4:
//   AVX512F/BW/CD/DQ/VL, and AVX512VNNI); avx512bf16 (avx512 and AVX512_BF16, for vdpbf16ps); avx512+amx (avx512bf16
//   and the AMX int8 tiles, where the OS grants them: the native AMX build's kernels, "AMX" below). AVX, AVX-512 and
//   AMX count only when the OS saves their registers. LoadOptions::kernels, or else the environment variable
//   LLMINFER_KERNELS, names a level to run instead of the best one (for tests and comparisons); a level the CPU lacks
//   is cpu_unsupported, an unknown name invalid_argument. At each level the dispatch build computes what the native
//   build of that level does for the kernels (`tools/dispatch-check`); code outside the kernels
//   (norms, rope, sampling) is compiled for the baseline. A native build runs only its own level
//   (LoadOptions::kernels may name it) and ignores LLMINFER_KERNELS (one with AMX, or for AVX2: below).
//   `llminfer status` says which kernels run ("simd", "kernels", "kernel_levels").
//
//   AMX: a native build for a CPU with AMX-INT8 (-march=native on a Xeon of the Sapphire Rapids
//   class, or -march=sapphirerapids) is "avx512+amx": matrix products of Q4_0, Q5_0, Q8_0, Q4_K and
//   Q6_K weights with 6 or more tokens (prompts) run on the tile registers, which the process asks the
//   OS for once (Linux: arch_prctl; elsewhere, or where refused, the level is "avx512" and the VNNI
//   kernels run). Each block's integer sum is exact (32 values; K-quants: a super-block of 256, each
//   value times its sub-block scale); the float order is then one chain per (row, token) over the
//   blocks, acc = fma(float(sum), d_row * d_token, acc) (Q4_K: then acc = fma(-float(mins), dmin_row *
//   d_token, acc)), not llama.cpp's 8 lanes, so such
//   logits differ from llama.cpp's and from a one-token evaluation in the last bits (within the
//   conformance tolerances). LoadOptions::kernels or LLMINFER_KERNELS "avx512" leaves the tiles alone:
//   llama.cpp's order for every batch.
//
//   The block-sum order on AVX2: a native build for AVX2 without AVX-512 (-march=native on such a
//   CPU, -march=x86-64-v3, LLMINFER_SIMD_AVX2) runs "avx2+sums", as does a dispatch build on such a
//   CPU: matrix products of Q4_0, Q5_0 and Q8_0 weights with 6 or more tokens (prompts) take the AMX
//   tiles' float order above for 32-blocks (exact integer block sums, then one chain per (row,
//   token): acc = fma(float(sum), d_row * d_token, acc)), computed for 8 tokens at once: on AMD Zen 3,
//   Q5_0 and Q4_0 products 1.15-1.55x and Q8_0 about 1.1x faster than in llama.cpp's order
//   (bench/RESULTS.md). K-quants, and products of fewer tokens or of independent tokens (batched
//   decoding), keep llama.cpp's order. Such logits differ from llama.cpp's and from a one-token
//   evaluation in the last bits, as with AMX. LoadOptions::kernels or LLMINFER_KERNELS "avx2": the
//   same kernels in llama.cpp's order for every batch (bit-exact with llama.cpp's AVX2 build).
//
// ==== Threads and ownership ====
//
//   A Model is immutable after load and cheap to copy (copies share the weights). Sessions are
//   independent: one session must be used by one thread at a time, separate sessions may run at
//   once on one model. Callbacks run on the thread that called generate()/reply().
//
//   Batched decoding: sessions (and generate() calls) of one model that run at the same time from
//   different threads share each evaluation step (continuous batching): the step evaluates one
//   token of every decoding sequence (and the next prompt chunk of any sequence still reading its
//   prompt) in one pass over the weights, so 4 conversations cost little more memory traffic than
//   one. Each sequence keeps its own KV cache, positions, sampler and stop state; sequences join and
//   leave at any step; a prompt is evaluated in chunks of at most 256 tokens, one per step, so a
//   long prompt delays the others' next token by one chunk at most. Results do not change: every
//   sequence gets the logits it would get alone, bit for bit (single tokens use a matrix product
//   that reads each weight row once for all of them but computes every token as alone; a prompt
//   chunk is multiplied on its own rows), hence the same tokens for the same seed. A step waits for
//   the sequences of the previous step to hand in their next token (they sample in between), at
//   most half a step's time (0.5..20 ms), so a session busy elsewhere delays the others little.
//   LoadOptions::batch caps the sequences per step (0: 32; 1 turns batching off). Cancelling one
//   sequence does not stop a step the others share (it ends after that step).
//
//   The model's threads (LoadOptions::threads, the calling thread included) spin between the jobs of
//   a pass, briefly, then sleep: an idle model uses no CPU. Cores the application or other programs
//   keep busy: a pool thread never spins on a CPU another of its threads occupies (where the system
//   says which CPU a thread is on: Linux, Windows); a worker the scheduler put on the caller's CPU
//   sleeps, and the caller runs the work alone until a worker is back on a free CPU. With one of two
//   cores busy, 2-thread decode ran 1.2x-1.8x slower than on the idle machine (bench/RESULTS.md).
//
// ==== C API ====
//
//   The section after the C++ declarations is C99: a C compiler including llminfer.hpp sees it
//   alone (the implementation stays C++20: compile it in one C++ file, or build the shared library
//   with `make libllminfer.so`, which exports the llminfer_* functions and nothing else). Opaque
//   handles (llminfer_model, llminfer_session); fallible calls return an llminfer_errc (0 = OK)
//   and, when given an llminfer_error** , an error with the code and a message naming the input
//   (llminfer_error_free); strings are UTF-8 with explicit lengths; results, token arrays and
//   strings the library allocates are freed by their matching _free (each accepts NULL).
//
//     llminfer_model* m = NULL; llminfer_error* err = NULL;
//     if (llminfer_model_load(path, strlen(path), NULL, &m, &err) != LLMINFER_OK) {
//       fprintf(stderr, "%s\n", llminfer_error_message(err, NULL)); llminfer_error_free(err); }
//     llminfer_generate_options go; llminfer_generate_options_init(&go);
//     go.max_tokens = 64; go.on_piece = print_piece;   /* int (*)(const char*, size_t, void*) */
//     llminfer_result* r = NULL;
//     if (llminfer_generate(m, "Once upon a time", 16, &go, &r, &err) == LLMINFER_OK)
//       printf("%zu tokens, %s\n", r->n_tokens, llminfer_stop_string(r->stop));
//     llminfer_result_free(r); llminfer_model_free(m);
//
//   Also: llminfer_generate_tokens (from ids), sessions (llminfer_session_new / _add / _reply /
//   _reset / _free; a session keeps the model alive), llminfer_tokenize / llminfer_detokenize.
//   Structured output: llminfer_generate_options.grammar / json_schema (text and length),
//   logit_bias_ids + logit_bias_values (n_logit_bias), banned_tokens (n_banned_tokens), as in
//   GenerateOptions; llminfer_result.constraint_ms; llminfer_json_schema_to_grammar.
//   A model may be used from several threads at once (their generations are batched as above); a
//   session by one thread at a time. examples/c/example.c; tests/capi/ (C99 and Python ctypes).
//
// ==== Sessions: conversations that live long ====
//
//   A Session holds a conversation (messages()), the tokens of its KV cache (tokens()), the
//   logits of the last evaluated token and an RNG. One thread at a time.
//
//   reply(): renders the conversation with the model's chat template, reuses the longest cached
//   prefix, evaluates the rest, generates and appends the assistant's message. A render that
//   fails (a template that raises, a cancelled render) returns the error and changes nothing: the
//   caller fixes the messages and replies again. A reply that cannot generate a single token for
//   a full context (ContextPolicy::stop) returns StopReason::context_full, GenerateResult::error
//   saying so, and adds no assistant message.
//
//   History editing: erase(i), replace(i, message), truncate(n), set_messages(list). The next
//   reply reuses the cache up to the first token that differs and evaluates from there (what
//   followed the change is evaluated again: its cells saw the old text).
//
//   Context shifting (ContextPolicy::slide). Before a reply, when the conversation plus room for
//   the reply (max_tokens, at most half the context; a quarter when max_tokens < 0) does not fit,
//   the oldest turns after the leading system message(s) leave the conversation (a turn is a
//   message and the non-user messages after it; the turn being answered always stays;
//   GenerateResult::messages_dropped counts them). The cache then keeps what the new rendering
//   shares with it: the common prefix, then runs of at least 8 cached tokens equal to what the
//   prompt continues with, moved down into place (KvCache::shift: values copied, keys rotated by
//   the distance moved, as llama.cpp's context shift does; sliding-window rings included) instead
//   of evaluated again (GenerateResult::tokens_shifted). A turn therefore evaluates its own tokens
//   plus a constant, however long the conversation. During a reply that fills the context the
//   cache slides at token level: it keeps the system message's tokens (at least LoadOptions::keep)
//   and drops half of the rest. A shifted cache is not a fresh evaluation: the kept cells were
//   computed while the dropped tokens were in the context, and re-rotating an f16 key rounds it
//   once more. (README "Generating text" gives the measured difference.) After history edits only
//   the exact common prefix is reused (shifting would keep what the removed text left in later
//   cells).
//
//   Step by step: begin_reply(options) prepares a reply; each step() does bounded work (a batch of
//   up to 256 prompt tokens, or one generated token) and returns ReplyStep{text, done, stop}: the
//   text that became final (complete UTF-8, possibly empty), or done with the stop reason, after
//   which the reply is in the conversation and result() holds the GenerateResult. reply() is
//   begin_reply() + step() until done; Model::generate() runs the same steps. add(), the edits,
//   reset(), eval() and load() end a reply in progress as cancelled. Timings of a stepped reply
//   include the caller's time between steps.
//
//   Tokens: eval(ids, all_logits, cancel) evaluates ids after the cached ones (no BOS added);
//   logits() is [n_vocab] (the last token) or [n][n_vocab]; sample(options) draws one id with the
//   sampling chain (the penalty looks at tokens()) and the session's RNG (set_seed); is_eog(id);
//   truncate_tokens(n). eval, sample, eval ... gives generate()'s tokens for the same seed.
//   generate(ids, options) generates after token ids in the session's cache (no BOS added): the
//   cached tokens the ids start with are reused, the rest evaluated, and the cache keeps the ids
//   and the generated tokens for the next call; messages() is neither read nor changed. What a
//   server's slot does: a client that resends its whole conversation costs only its new tokens.
//   Model::tokenize_chat(messages, add_generation_prompt) gives the ids Session::reply evaluates
//   for a conversation (the chat template, message content never parsed as control tokens, BOS
//   as the model asks); with GenerateOptions::chat, generate() from such ids (Session's or
//   Model's) gives the text reply() would (a SentencePiece reply's leading space dropped), e.g.
//     `auto ids = model->tokenize_chat(msgs); auto r = slot.generate(*ids, {.chat = true});`
//   To refuse a request before it takes a session: check_generate_options(options) checks the
//   values generate() checks (the message names the option; no model needed), ModelInfo::n_vocab
//   bounds logit_bias and banned ids, ModelInfo::n_input_ids the prompt's ids (the embedding's
//   rows), ModelInfo::context / Session::context_size() its length; check_grammar and
//   json_schema_to_grammar the constraints. examples/server uses exactly these.
//   Model::info() gives the architecture, sizes, vocabulary, special tokens, end-of-generation
//   ids, context, KV cache size, kernel level and the model's identity (a sha256 of the weights'
//   metadata: every tensor's name, type, shape and first 64 bytes, and the definition's sha256).
//   Model::logits(ids, all_positions) evaluates ids from position 0 in a fresh context that holds
//   them (not limited by LoadOptions::context; no BOS added) and returns the last position's
//   [n_vocab] logits or every position's [n][n_vocab]: the code `llminfer logits` and `compare`
//   run, e.g. `auto l = model->logits(ids, true); float x = (*l)[k * info.n_vocab + id];`.
//   Model::batch_stats() counts the continuous batcher's work since load: steps, shared_steps
//   (steps with more than one sequence) and sequences (sequences / steps is the mean batch), e.g.
//   `auto b = model->batch_stats();` before and after a parallel run (what `bench --parallel` shows).
//   parse_token_ids(text) reads ids written as "1,2,3", "1 2 3" or "[1, 2]" (the CLI's --ids), an
//   error naming the first item that is not an id, e.g. `auto ids = llminfer::parse_token_ids("[1, 2]");`.
//
//   Chat templates from JSON: Model::render_chat_template(messages_json, ChatTemplateOptions) and,
//   reading only a model's description (no weights: fast on big models),
//   llminfer::render_chat_template(model_path, messages_json, options) (model_path "" renders
//   options.template_source alone). messages_json is an array of message objects (every key
//   reaches the template: tool_calls, content parts, ...) or {"messages": [...], "tools": [...],
//   "documents": [...], "kwargs": {...}}; tools select the model's "tool_use" template variant when
//   it has one. ChatTemplateOptions: add_generation_prompt; variables, (name, value) pairs set
//   after the special tokens and kwargs, the value read as JSON when it parses, else as a string
//   (a special token's name with a string sets that token, "tools" sets the tools);
//   template_source (Jinja instead of the model's template); messages_name (names the input in
//   errors); cancel. The result RenderedChat holds the text, content_spans (byte ranges copied
//   from messages, tools and documents: tokenize them without special-token parsing) and fallback
//   (the built-in ChatML template was used). Errors: invalid_argument naming messages_name (not
//   JSON, not messages, a message that is not an object, an empty variable name), the model's
//   loading errors, template_error (syntax with line and column, raise_exception). E.g.
//   `ChatTemplateOptions o; o.variables = {{"enable_thinking", "false"}};
//    auto r = model->render_chat_template(R"([{"role":"user","content":"Hi"}])", o);`
//   `llminfer template` is this function.
//
//   Save and restore: save() (bytes) / save(path) and load(bytes) / load(path). The file holds
//   the conversation, the cached tokens and their KV cells (a sliding-window layer only its
//   window), the logits and the RNG state; restored into a session of the same model (same
//   identity and KV type; a context that holds the tokens) it continues token for token as the
//   saved session would have. Format (version 1, little-endian): "LLMISESS", u32 version, u32
//   flags, u64 length, the content, and a sha256 of everything before it. A file that is too
//   short, has another magic or version, bytes missing or extra, a checksum that does not match
//   (altered), another model's identity, another KV type, more tokens than the context, or any
//   length that runs past the end is refused with bad_format and a message naming the file and
//   the reason; the session is unchanged then. save(path) writes PATH.tmp and renames it over
//   PATH (a failed write leaves the old file). Saving during a reply is an error.
//
// ==== Tools: model files, tokenizers, definitions and logits without a loaded model ====
//
//   What `llminfer info`, `tokenize`, `detokenize`, `status` and `compare` print, as functions
//   (the command-line program, the server and every other example use the public API alone: no
//   llminfer::detail, which is the implementation's and may change in any release; `make
//   check-public-api`, run by `make test`, keeps it so):
//
//   inspect_model_file(path, InspectOptions) describes a GGUF file, a .safetensors file or a model
//   directory from its headers and side files, without loading the model (no architecture
//   definition needed): ModelFileInfo holds format, architecture, name, sizes, parameter and tensor
//   counts, tensors per type, hyperparameters, the vocabulary's kind, size and special ids, whether
//   it has a chat template; with InspectOptions::metadata every metadata entry (MetadataEntry:
//   source, key, type, value; a string as itself, anything else as JSON, arrays cut to
//   max_array_items) and with ::tensors every tensor (TensorInfo: name, type, shape in ggml order,
//   offset, bytes). E.g. `auto f = llminfer::inspect_model_file("m.gguf", {.tensors = true});`.
//
//   Tokenizer::load(path) builds a model's tokenizer without touching its weights (a GGUF file, a
//   model directory, or a directory holding only tokenizer.json and its companions):
//   tokenize(text, add_special, parse_special) and detokenize(ids, skip_special) work as the
//   Model's, n_vocab() bounds the ids. Copies share it; it may be used from many threads.
//
//   load_archdefs(dir) lists the architecture definitions a load with LoadOptions::archdef_dir =
//   dir would use (ArchdefInfo: name, origin, sha256, steps per layer, text, the conventions left at
//   their defaults) and the files that did not load (ArchdefFailure: name, path, error).
//   kernel_info() says what the build was compiled for, its kernel levels and the level a model
//   loaded now would run (or why none can: KernelInfo::error).
//
//   compare_logits(ours, reference, n_vocab) measures [positions][n_vocab] logits against a
//   reference (LogitsComparison: top-1 agreement, Pearson correlation, top-10 overlap, the first
//   position that differs, the largest absolute and relative difference, values that are not
//   finite); invalid_argument when the sizes differ. top_k_ids(logits, k) gives the ids of one
//   position's k largest logits (ties: the lower id first) and logsumexp(logits) its log-partition
//   function (a token's log-probability is its logit minus it), e.g. with Session::logits().
//
// ==== Architecture definitions (archdef) ====
//
//   An architecture is a short text, not code: `llama`, `qwen2`, `qwen3`, `gemma3`, `phi3`,
//   `starcoder2`, `stablelm`, `smollm3`, `gemma2`, `olmo2` (OLMo 2, and OLMo 3 with its sliding
//   window) and `gemma3n` (Gemma 3n E2B / E4B, text) are built in (`llminfer status --dump llama` prints one); a
//   directory of <arch>.archdef files (LoadOptions::archdef_dir, `--archdef DIR`) overrides the built-in of the same
//   name. A file that does not load makes its architecture unavailable (loading such a model fails and lists the broken
//   files); there is never a silent fallback to the built-in. `llminfer status` shows each definition in effect with
//   its steps per layer, origin and sha256 (load_archdefs, above).
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
//                register it would assign must be assigned before and keeps what it held);
//                {k} (the stream index) only in stream_matmul's weight
//   VALUE     := arithmetic in double over numbers, params and model values (n_embd n_layer
//                n_head n_head_kv head_dim head_dim_v n_ff n_vocab n_ctx_train rms_eps rope_base
//                rope_dims norm_eps, `layer` = the layer's index (block only), `inf`): + - * / ( ),
//                unary -, sqrt(V), rsqrt(V), every(P, O) = 1 on the layers i with i % P == O, else 0
//                (block only), less(A, B) = 1 when A < B, else 0, and where(C, A, B) = A where C is
//                not 0, else B. Granite's logits / logit_scale: scale(logits, 1 / logit_scale);
//                phi3's fused v: slice(qkv, (n_head + n_head_kv) * head_dim, n_head_kv * head_dim);
//                a default that holds on the first 10 layers only:
//                param sparsity = {arch}.activation_sparsity_scale | where(less(layer, 10), 1.64, -inf).
//                Values are worked out when a model is compiled, never while it runs: the forward
//                pass has no conditionals; per-layer differences are data (metadata arrays, every(),
//                where()). A value may be infinite (a metadata array's "off" entries, -inf); each use
//                checks its range, and NaN is refused. norm_eps is
//                {arch}.attention.layer_norm_epsilon (1e-5 when absent).
//   skip      := every statement of the block takes `skip = VALUE`: the step is left out of the
//                layers where the value is not 0 (like '| none', a register it would assign must be
//                assigned before): rope(q, pairs, skip = every(4, 3))  # no rope on layers 3, 7, ...
//
//   Registers are rows of f32 activations, one row per token ([n_tokens][width]); `x` is the
//   residual stream (the prologue assigns it), `logits` the result (the epilogue assigns it). A
//   register must be assigned before it is read. A register of S streams (multi-stream residuals:
//   Gemma 3n's AltUp, hyper-connections) is S rows of equal width side by side: [n_tokens][S * w],
//   stream k in columns k*w .. k*w+w-1. There are no conditionals, loops, calls, files,
//   environment or network: any other word where an operation belongs is an unknown operation.
//
//   operation                          computes
//   x = embed(T)                       row of T (a [n_vocab][n_embd] matrix) for each token id
//   x = embed(T, beyond = R)           the same, but ids past T's last row read row R (a smaller
//                                      table, e.g. Gemma 3n's per-layer one); otherwise T's rows
//                                      bound the ids the model accepts
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
//                                      `neox` for them (convention hf_rope). Context shifting
//                                      re-rotates a layer's cached keys by the rope last applied to
//                                      the key register before its attention (that rope's dims,
//                                      base and factors); where the layer has none (skip =, NoPE)
//                                      its keys move unchanged.
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
//                                      reuse_kv_from = F: the layers from F on keep no cache of
//                                      their own: each reads the cache of the last layer below F
//                                      of its kind (sliding or global), written earlier in the same
//                                      step, and their k / v steps are dropped (nothing reads
//                                      them): Gemma 3n's shared KV (F = n_layer - shared layers;
//                                      F >= n_layer: none). The cache is only the owning layers'.
//   silu(r) gelu(r) gelu_tanh(r) relu(r)   activations (gelu: erf form; gelu_tanh: tanh approximation)
//   mul(r, s)  add(r, s)  sub(r, s)    elementwise r*s, r+s, r-s (same widths)
//   mul_weight(r, W)                   r * W elementwise, W a vector of the row's width
//   rms_normalize(r, size=WIDTH, eps=rms_eps)
//                                      r / sqrt(mean(r^2) + eps) over groups of `size` (default
//                                      the whole row), no weight (Gemma 3n's V):
//                                      rms_normalize(v, size = head_dim_v)
//   gaussian_topk(r, V)                max(0, r - (mean(r) + V * std(r))) over the row (std with
//                                      n - 1, as llama.cpp): keeps the values V standard deviations
//                                      above the mean (V = icdf(p) of a target sparsity p). The
//                                      step is left out where V is not finite (-inf: p = 0)
//   scale(r, V, bias=B)                r * V (+ B: one fused multiply-add, as ggml_scale_bias)
//   softcap(r, V)                      V * tanh(r / V); skipped when V is 0
//   y = copy(r)                        a copy
//   put(r, s, START)                   writes s into columns START .. START+width(s)-1 of r
//   X = streams(r, S)                  S streams, each a copy of r ([n_tokens][S * width])
//   stream_matmul(X, W)                W is [w, w, n] (n stacked matrices, GGUF ne order): stream
//                                      S - n + k becomes W[k] times it (the last n streams); or W
//                                      names one [w, w] tensor per stream with {k} (k = 0, 1, ...
//                                      while they exist: altup_proj.{k}.weight), n = their count
//   match_norm(X, S)                   streams 1 .. S-1 scaled to the L2 norm of stream 0:
//                                      X[k] * |X[0]| / |X[k]|
//   P = stream_mix(X, c)               P[k] = X[k] + sum_j c[k*S + j] X[j]; c holds S*S values per
//                                      token (a router's coefficients)
//   stream_axpy(X, v, g)               X[k] = X[k] + g[k] * v; v one stream wide, g S values
//   stream_add(X, v, from=0)           X[k] = X[k] + v for the streams k >= from
//   y = stream_mean(X, S)              (X[0] + X[1] + ... + X[S-1]) / S, one stream wide
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
// ==== Structured output ====
//
//   GenerateOptions::grammar (GBNF text), json_schema (JSON Schema text, not with grammar),
//   logit_bias ((id, bias) pairs; biases of one id add up; -inf bans) and banned_tokens constrain
//   Model::generate, Session::reply and begin_reply/step (CLI: run and chat --grammar FILE,
//   --json-schema FILE, --logit-bias ID=BIAS, --ban IDS; llminfer serve: response_format and
//   logit_bias; C API: the same fields of llminfer_generate_options). Sessions decoding together
//   in shared steps (LoadOptions::batch) each apply their own constraint: batching changes nothing
//   in what is sampled. Session::sample(options) applies logit_bias and banned_tokens to its one
//   draw; a grammar or json_schema there is an error (invalid_argument): a grammar constrains a
//   whole reply, and a draw from logits() has no reply to match. The grammar's state lives for one
//   reply: saving is refused during a reply, so a saved session holds none, and after load() the
//   next reply with a grammar starts matching from its first token, as in the saved session.
//   Before the sampling chain every token the grammar forbids
//   gets the logit -inf, then the biases are added; the chain (penalties, top-k, top-p, min-p,
//   temperature) runs on the rest. Checked before the prompt is evaluated, each an invalid_argument
//   naming what is wrong: a malformed grammar (line and column) or schema (the keyword and its JSON
//   path), an id outside the vocabulary, a NaN or +inf bias, a grammar no string matches, a
//   constraint that leaves no token to start with. json_schema_to_grammar() shows the grammar a
//   schema becomes; check_grammar() checks a grammar without a model.
//
//   What it guarantees: each sampled token keeps the text a prefix of a string of the grammar
//   (tokens are matched by their bytes, which may end inside a character: the grammar is compiled
//   to bytes), and an end-of-generation token is allowed only where the text is a complete match.
//   With StopReason::eos the text is a whole match (for a schema: JSON valid under it); after
//   max_tokens, a stop string or a cancel it is a prefix. Control tokens other than the
//   end-of-generation ones are never allowed; a chat reply is matched as the text the caller gets
//   (SentencePiece vocabularies drop its leading space). Should the vocabulary be unable to spell
//   what the grammar needs next (a vocabulary without byte tokens), generation ends with
//   StopReason::error saying so. The model needs a vocabulary and an end-of-generation token.
//
//   GBNF (llama.cpp's syntax, so its grammars work): rules `name ::= alternatives` (names of
//   letters, digits and '-'; the start is `root`), "literals", [classes] with ranges, [^negated
//   classes], `.` (any character), ( groups ), * + ? {m} {m,} {m,n}, escapes \xXX \uXXXX
//   \UXXXXXXXX \t \r \n \\ \" \[ \] \-, # comments; a rule ends at the end of its line except
//   inside parentheses and after '|'. Characters are Unicode scalar values in UTF-8: a class never
//   matches a surrogate. Left recursion (a rule that can reach itself without consuming input, also
//   through a repetition of something that may be empty) is refused naming the rules of the cycle.
//   Refused where llama.cpp differs: token references <...> / !<...>; a rule defined twice
//   (llama.cpp keeps the last); an empty class [] or a reversed range [z-a] (llama.cpp: matches
//   nothing); a count above LLMINFER_GRAMMAR_MAX_REPEAT (llama.cpp turns {0,5000} into *);
//   escapes of surrogates or above U+10FFFF. tests/goldens/grammar holds llama.cpp's own verdicts
//   on 3,700 inputs of its grammars, ours and converted schemas; llminfer agrees on every one.
//
//   JSON Schema subset: type (a name or a list), properties, required, additionalProperties,
//   items (one schema), minItems, maxItems, minLength, maxLength, enum, const, anyOf, $ref to this
//   document ("#", "#/$defs/Name", "#/definitions/Name", any local JSON pointer), $defs and
//   definitions; title, description, default, examples, $schema, $id, $comment, deprecated,
//   readOnly and writeOnly are ignored (they do not constrain). Every other keyword is refused
//   with its name and path, never ignored: pattern, format, minimum, maximum, exclusiveMinimum,
//   exclusiveMaximum, multipleOf, oneOf, allOf, not, if/then/else, prefixItems, items as a list,
//   uniqueItems, contains, minProperties, maxProperties, patternProperties, propertyNames,
//   dependentRequired, dependentSchemas, unevaluatedProperties, $anchor, remote $ref ... . Also
//   refused: additionalProperties true or a schema next to properties, a required name missing
//   from properties, enum and const together, $ref or anyOf beside other constraining keywords.
//   What is generated: objects hold their declared properties in the order of `properties`, each
//   required one always, each optional one or not, and no other key (as llama.cpp and OpenAI's
//   structured outputs; an object schema without properties is any object, or a map when
//   additionalProperties is a schema); between tokens nothing, one space, or a line break and up
//   to 20 blanks or tabs; strings: no raw control characters, escapes \" \\ \/ \b \f \n \r \t
//   and \uXXXX (no surrogates), minLength/maxLength counting characters (an escape is one);
//   integers of at most 16 digits; numbers with up to 16 fraction digits and a 5-digit exponent.
//
//   Cost: the grammar is compiled to a pushdown matcher whose states and transitions are cached;
//   a state's allowed tokens come from one walk over a prefix tree of the vocabulary's bytes
//   (built once per model, 0.05-0.2 s for 150k tokens) that skips every subtree the state
//   refuses, and are cached per state, so a state seen again (the inside of a string) costs a
//   lookup and one pass over the logits. GenerateResult::timings.constraint_ms is the time a
//   generation spent on it (`run --json`: "constraint_ms"); bench/RESULTS.md ("Structured
//   output") has the figures.
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
//   (KV cache, scratch, loader buffers) are checked and fail with out_of_memory. A session's
//   evaluation context (its KV cache and every scratch buffer of a forward pass, sized from the
//   model and the context) is allocated when the session first evaluates (reply, generate, eval,
//   load): out_of_memory then, and the session stays usable. Evaluating tokens allocates nothing
//   afterwards, nor do shifting and sliding the cache, except Session::eval with all_logits when
//   its logits outgrow the last ones (checked: out_of_memory, nothing evaluated). A model's
//   second session also sizes the scratch of the steps sessions share (continuous batching).
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
