// ==== C API ====
// For C and every language that binds C (C#/Unity, Godot, Rust, Python ctypes, Node ffi). C99; a C
// compiler including llminfer.hpp sees this section alone. Implemented in the implementation
// translation unit (src/95_c_api.hpp); `make libllminfer.so` builds a shared library that exports
// exactly these functions (examples/c/, tests/capi/).
//   * Opaque handles: llminfer_model, llminfer_session. Every object the library allocates is
//     released by its matching _free function (NULL is accepted and ignored by every _free).
//   * Errors: fallible functions return an llminfer_errc (LLMINFER_OK = 0). When `err` is not
//     NULL and the call fails, *err receives an llminfer_error (code + message naming the input),
//     freed with llminfer_error_free; on success *err is set to NULL.
//   * Strings are UTF-8 with explicit lengths (not NUL-terminated on input; a NULL pointer with
//     length 0 is the empty string). Strings the library returns are NUL-terminated as well.
//   * Threads: a model may be used from many threads at once (generations on one model decode in
//     shared steps, see LoadOptions::batch); a session by one thread at a time. A session keeps the
//     model's weights alive: the model handle may be freed before its sessions.
#ifndef LLMINFER_C_API_H
#define LLMINFER_C_API_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#if defined(LLMINFER_C_API_EXPORT)
#define LLMINFER_C_API __declspec(dllexport)
#else
#define LLMINFER_C_API
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define LLMINFER_C_API __attribute__((visibility("default")))
#else
#define LLMINFER_C_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct llminfer_model llminfer_model;
typedef struct llminfer_session llminfer_session;
typedef struct llminfer_error llminfer_error;

/* The codes of llminfer::Errc, in the same order. */
typedef enum llminfer_errc {
  LLMINFER_OK = 0,
  LLMINFER_E_INVALID_ARGUMENT = 1,
  LLMINFER_E_IO = 2,
  LLMINFER_E_BAD_FORMAT = 3,
  LLMINFER_E_UNSUPPORTED = 4,
  LLMINFER_E_TENSOR_MISSING = 5,
  LLMINFER_E_SHAPE_MISMATCH = 6,
  LLMINFER_E_ARCHDEF = 7,
  LLMINFER_E_TOKENIZER = 8,
  LLMINFER_E_TEMPLATE = 9,
  LLMINFER_E_CPU_UNSUPPORTED = 10,
  LLMINFER_E_OUT_OF_MEMORY = 11,
  LLMINFER_E_INTERNAL = 12
} llminfer_errc;

/* Why a generation ended (llminfer::StopReason). */
typedef enum llminfer_stop {
  LLMINFER_STOP_EOS = 0,    /* end-of-generation token */
  LLMINFER_STOP_STRING = 1, /* a stop string appeared */
  LLMINFER_STOP_MAX_TOKENS = 2,
  LLMINFER_STOP_CANCELLED = 3, /* the callback returned 0 */
  LLMINFER_STOP_CONTEXT_FULL = 4,
  LLMINFER_STOP_ERROR = 5 /* see llminfer_result.error_code / error_message */
} llminfer_stop;

/* llminfer_generate_options.seed: a fresh random seed (reported in the result). */
#define LLMINFER_RANDOM_SEED UINT64_MAX

typedef struct llminfer_load_options {
  int threads;             /* 0: the hardware threads */
  int context;             /* tokens per session; 0: min(trained context, 4096) */
  int kv_f32;              /* nonzero: f32 KV cache (default f16) */
  int batch;               /* sequences per shared decoding step; 0: 32, 1: no batching */
  const char* archdef_dir; /* a directory of <arch>.archdef files, or NULL */
  size_t archdef_dir_len;
} llminfer_load_options;

/* Streaming: receives the text as it is decided, in complete UTF-8 pieces, on the calling thread.
   Return nonzero to continue, 0 to cancel (the generation ends with LLMINFER_STOP_CANCELLED). */
typedef int (*llminfer_piece_fn)(const char* piece, size_t len, void* user_data);

typedef struct llminfer_generate_options {
  int max_tokens;       /* < 0: until end of generation, a stop string or a full context */
  float temperature;    /* 0: greedy */
  int top_k;            /* 0: off */
  float top_p;          /* 1: off */
  float min_p;          /* 0: off */
  float repeat_penalty; /* 1: off */
  int repeat_last_n;
  uint64_t seed;           /* same seed, same text; LLMINFER_RANDOM_SEED: fresh */
  const char* const* stop; /* n_stop stop strings, stop_lens[i] bytes each */
  const size_t* stop_lens;
  size_t n_stop;
  int parse_special;  /* llminfer_generate: special-token text becomes control tokens */
  int chat;           /* llminfer_generate: the prompt is a user message in the chat template */
  const char* system; /* with chat: a system message, or NULL */
  size_t system_len;
  llminfer_piece_fn on_piece; /* or NULL */
  void* user_data;            /* passed to on_piece */
  /* Structured output (the manual's "Structured output"); NULL / 0: none. A malformed or
     impossible constraint is LLMINFER_E_INVALID_ARGUMENT naming line and column. */
  const char* grammar; /* GBNF text (llama.cpp's syntax, rule root) */
  size_t grammar_len;
  const char* json_schema; /* a JSON Schema (text): the output is JSON valid under it; not with grammar */
  size_t json_schema_len;
  const int32_t* logit_bias_ids;  /* n_logit_bias token ids, and the bias added to each one's logit */
  const float* logit_bias_values; /* (-INFINITY bans) */
  size_t n_logit_bias;
  const int32_t* banned_tokens; /* token ids never sampled */
  size_t n_banned_tokens;
} llminfer_generate_options;

/* A generation's result (allocated by the library; llminfer_result_free). */
typedef struct llminfer_result {
  char* text; /* the generated text, UTF-8, NUL-terminated */
  size_t text_len;
  int32_t* tokens; /* generated ids */
  size_t n_tokens;
  int stop;          /* llminfer_stop */
  int prompt_tokens; /* tokens of the prompt */
  int prompt_tokens_evaluated;
  int prompt_tokens_reused; /* already in the session's cache */
  uint64_t seed;            /* the seed used */
  double prefill_ms, prefill_tps, decode_ms, decode_tps, ttft_ms;
  int error_code;      /* with LLMINFER_STOP_ERROR (or a prompt that does not fit): why */
  char* error_message; /* NUL-terminated; empty when error_code is LLMINFER_OK */
  size_t error_message_len;
  double constraint_ms; /* of the decoding time, structured output (masks, the grammar) */
} llminfer_result;

LLMINFER_C_API const char* llminfer_version(void);
/* Stable text of a code / stop reason ("invalid argument"; "eos", "stop", "max_tokens", ...). */
LLMINFER_C_API const char* llminfer_errc_string(int code);
LLMINFER_C_API const char* llminfer_stop_string(int stop);

LLMINFER_C_API int llminfer_error_code(const llminfer_error* err);
/* The message (NUL-terminated; its length in *len when len is not NULL). */
LLMINFER_C_API const char* llminfer_error_message(const llminfer_error* err, size_t* len);
LLMINFER_C_API void llminfer_error_free(llminfer_error* err);

/* The defaults (every field "the model's value"). */
LLMINFER_C_API void llminfer_load_options_init(llminfer_load_options* opts);
LLMINFER_C_API void llminfer_generate_options_init(llminfer_generate_options* opts);

/* A GGUF file, a safetensors file or a Hugging Face / MLX directory. opts may be NULL. */
LLMINFER_C_API int llminfer_model_load(const char* path, size_t path_len, const llminfer_load_options* opts,
                                       llminfer_model** out, llminfer_error** err);
LLMINFER_C_API void llminfer_model_free(llminfer_model* model);

/* One-shot generation from text (BOS added as the model asks; with opts->chat, a user message in
   the model's chat template) or from token ids (used as given). opts may be NULL (defaults). */
LLMINFER_C_API int llminfer_generate(const llminfer_model* model, const char* prompt, size_t prompt_len,
                                     const llminfer_generate_options* opts, llminfer_result** out,
                                     llminfer_error** err);
LLMINFER_C_API int llminfer_generate_tokens(const llminfer_model* model, const int32_t* ids, size_t n_ids,
                                            const llminfer_generate_options* opts, llminfer_result** out,
                                            llminfer_error** err);
LLMINFER_C_API void llminfer_result_free(llminfer_result* result);

/* A conversation that keeps its KV cache between turns. */
LLMINFER_C_API int llminfer_session_new(const llminfer_model* model, llminfer_session** out, llminfer_error** err);
LLMINFER_C_API int llminfer_session_add(llminfer_session* session, const char* role, size_t role_len,
                                        const char* content, size_t content_len, llminfer_error** err);
/* Generates the assistant's reply to the conversation (and appends it to the conversation). */
LLMINFER_C_API int llminfer_session_reply(llminfer_session* session, const llminfer_generate_options* opts,
                                          llminfer_result** out, llminfer_error** err);
LLMINFER_C_API void llminfer_session_reset(llminfer_session* session); /* forget messages and cache */
LLMINFER_C_API size_t llminfer_session_message_count(const llminfer_session* session);
LLMINFER_C_API int llminfer_session_cached_tokens(const llminfer_session* session);
LLMINFER_C_API void llminfer_session_free(llminfer_session* session);

/* Token ids of a text (free *ids with llminfer_tokens_free) and the text of ids (free *text with
   llminfer_string_free; always valid UTF-8, special tokens rendered as text). */
LLMINFER_C_API int llminfer_tokenize(const llminfer_model* model, const char* text, size_t text_len, int add_special,
                                     int parse_special, int32_t** ids, size_t* n_ids, llminfer_error** err);
LLMINFER_C_API void llminfer_tokens_free(int32_t* ids);
LLMINFER_C_API int llminfer_detokenize(const llminfer_model* model, const int32_t* ids, size_t n_ids, char** text,
                                       size_t* text_len, llminfer_error** err);
LLMINFER_C_API void llminfer_string_free(char* text);

/* The GBNF grammar a JSON Schema compiles to (json_schema in llminfer_generate_options uses it), to
   inspect or edit it; free *gbnf with llminfer_string_free. An unsupported keyword is
   LLMINFER_E_INVALID_ARGUMENT naming it. */
LLMINFER_C_API int llminfer_json_schema_to_grammar(const char* schema, size_t schema_len, char** gbnf, size_t* gbnf_len,
                                                   llminfer_error** err);

#ifdef __cplusplus
}
#endif

#endif /* LLMINFER_C_API_H */
