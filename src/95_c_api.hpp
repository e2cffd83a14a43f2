// ==== C API: the implementation (declarations in 02_c_api) ====
// Thin wrappers over Model and Session. Every entry point checks its pointers (a NULL handle or a
// NULL string with a nonzero length is LLMINFER_E_INVALID_ARGUMENT naming the parameter), never
// lets an allocation failure escape as an abort it could avoid, and copies results into memory the
// caller frees with the matching _free.
#include <new>

struct llminfer_model {
  llminfer::Model model;
};
struct llminfer_session {
  llminfer::Session session;
};
struct llminfer_error {
  int code;
  std::string message;
};

namespace llminfer {
inline namespace v0_1 {
namespace detail {

inline int c_code(Errc c) {
  switch (c) {
    case Errc::ok: return LLMINFER_OK;
    case Errc::invalid_argument: return LLMINFER_E_INVALID_ARGUMENT;
    case Errc::io: return LLMINFER_E_IO;
    case Errc::bad_format: return LLMINFER_E_BAD_FORMAT;
    case Errc::unsupported: return LLMINFER_E_UNSUPPORTED;
    case Errc::tensor_missing: return LLMINFER_E_TENSOR_MISSING;
    case Errc::shape_mismatch: return LLMINFER_E_SHAPE_MISMATCH;
    case Errc::archdef: return LLMINFER_E_ARCHDEF;
    case Errc::tokenizer: return LLMINFER_E_TOKENIZER;
    case Errc::template_error: return LLMINFER_E_TEMPLATE;
    case Errc::cpu_unsupported: return LLMINFER_E_CPU_UNSUPPORTED;
    case Errc::out_of_memory: return LLMINFER_E_OUT_OF_MEMORY;
    default: return LLMINFER_E_INTERNAL;  // a code added later than the C enum
  }
}

inline int c_fail(llminfer_error** err, int code, std::string message) {
  if (err) *err = new (std::nothrow) llminfer_error{code, std::move(message)};
  return code;
}
inline int c_fail(llminfer_error** err, const Error& e) {
  return c_fail(err, c_code(e.code), e.message);
}
inline int c_ok(llminfer_error** err) {
  if (err) *err = nullptr;
  return LLMINFER_OK;
}
inline int c_null(llminfer_error** err, const char* fn, const char* param) {
  return c_fail(err, LLMINFER_E_INVALID_ARGUMENT, strf("%s: %s is NULL", fn, param));
}

// A (pointer, length) string; false when the pointer is NULL but the length is not 0.
inline bool c_str(const char* p, size_t n, std::string_view& out) {
  if (!p && n) return false;
  out = p ? std::string_view(p, n) : std::string_view();
  return true;
}

// Copies into malloc'ed memory (NUL-terminated); nullptr when out of memory.
inline char* c_dup(std::string_view s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) return nullptr;
  if (!s.empty()) std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  return p;
}

inline Result<GenerateOptions> c_generate_options(const llminfer_generate_options* c, const char* fn) {
  GenerateOptions o;
  if (!c) return o;
  o.max_tokens = c->max_tokens;
  o.temperature = c->temperature;
  o.top_k = c->top_k;
  o.top_p = c->top_p;
  o.min_p = c->min_p;
  o.repeat_penalty = c->repeat_penalty;
  o.repeat_last_n = c->repeat_last_n;
  o.seed = c->seed;
  if (c->n_stop > 0 && (!c->stop || !c->stop_lens))
    return make_error(Errc::invalid_argument, strf("%s: n_stop is %zu but stop or stop_lens is NULL", fn, c->n_stop));
  for (size_t i = 0; i < c->n_stop; i++) {
    std::string_view s;
    if (!c_str(c->stop[i], c->stop_lens[i], s))
      return make_error(Errc::invalid_argument, strf("%s: stop[%zu] is NULL", fn, i));
    o.stop.emplace_back(s);
  }
  o.parse_special = c->parse_special != 0;
  o.chat = c->chat != 0;
  std::string_view sys;
  if (!c_str(c->system, c->system_len, sys))
    return make_error(Errc::invalid_argument, strf("%s: system is NULL but system_len is %zu", fn, c->system_len));
  o.system = std::string(sys);
  if (c->on_piece) {
    llminfer_piece_fn fnp = c->on_piece;
    void* ud = c->user_data;
    o.on_token = [fnp, ud](std::string_view piece) { return fnp(piece.data(), piece.size(), ud) != 0; };
  }
  std::string_view text;
  if (!c_str(c->grammar, c->grammar_len, text))
    return make_error(Errc::invalid_argument, strf("%s: grammar is NULL but grammar_len is %zu", fn, c->grammar_len));
  o.grammar = std::string(text);
  if (!c_str(c->json_schema, c->json_schema_len, text))
    return make_error(Errc::invalid_argument,
                      strf("%s: json_schema is NULL but json_schema_len is %zu", fn, c->json_schema_len));
  o.json_schema = std::string(text);
  if (c->n_logit_bias > 0 && (!c->logit_bias_ids || !c->logit_bias_values))
    return make_error(
        Errc::invalid_argument,
        strf("%s: n_logit_bias is %zu but logit_bias_ids or logit_bias_values is NULL", fn, c->n_logit_bias));
  for (size_t i = 0; i < c->n_logit_bias; i++) o.logit_bias.emplace_back(c->logit_bias_ids[i], c->logit_bias_values[i]);
  if (c->n_banned_tokens > 0 && !c->banned_tokens)
    return make_error(Errc::invalid_argument,
                      strf("%s: n_banned_tokens is %zu but banned_tokens is NULL", fn, c->n_banned_tokens));
  o.banned_tokens.assign(c->banned_tokens, c->banned_tokens + c->n_banned_tokens);
  return o;
}

inline int c_result(const Result<GenerateResult>& r, llminfer_result** out, llminfer_error** err) {
  if (!r) return c_fail(err, r.error());
  auto* res = static_cast<llminfer_result*>(std::calloc(1, sizeof(llminfer_result)));
  if (!res) return c_fail(err, LLMINFER_E_OUT_OF_MEMORY, "llminfer_result: out of memory");
  res->text = c_dup(r->text);
  res->text_len = r->text.size();
  res->error_message = c_dup(r->error.message);
  res->error_message_len = r->error.message.size();
  res->tokens = static_cast<int32_t*>(std::malloc(std::max<size_t>(1, r->tokens.size()) * sizeof(int32_t)));
  if (!res->text || !res->error_message || !res->tokens) {
    llminfer_result_free(res);
    return c_fail(err, LLMINFER_E_OUT_OF_MEMORY, "llminfer_result: out of memory");
  }
  if (!r->tokens.empty()) std::memcpy(res->tokens, r->tokens.data(), r->tokens.size() * sizeof(int32_t));
  res->n_tokens = r->tokens.size();
  res->stop = static_cast<int>(r->stop);
  res->prompt_tokens = r->prompt_tokens;
  res->prompt_tokens_evaluated = r->prompt_tokens_evaluated;
  res->prompt_tokens_reused = r->prompt_tokens_reused;
  res->seed = r->seed;
  res->prefill_ms = r->timings.prefill_ms;
  res->prefill_tps = r->timings.prefill_tps;
  res->decode_ms = r->timings.decode_ms;
  res->decode_tps = r->timings.decode_tps;
  res->ttft_ms = r->timings.ttft_ms;
  res->constraint_ms = r->timings.constraint_ms;
  res->error_code = r->error.code == Errc::ok ? LLMINFER_OK : c_code(r->error.code);
  *out = res;
  return c_ok(err);
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer

// the C enums follow the C++ ones
static_assert(static_cast<int>(llminfer::StopReason::eos) == LLMINFER_STOP_EOS &&
                  static_cast<int>(llminfer::StopReason::stop) == LLMINFER_STOP_STRING &&
                  static_cast<int>(llminfer::StopReason::max_tokens) == LLMINFER_STOP_MAX_TOKENS &&
                  static_cast<int>(llminfer::StopReason::cancelled) == LLMINFER_STOP_CANCELLED &&
                  static_cast<int>(llminfer::StopReason::context_full) == LLMINFER_STOP_CONTEXT_FULL &&
                  static_cast<int>(llminfer::StopReason::error) == LLMINFER_STOP_ERROR,
              "llminfer_stop must follow StopReason");

extern "C" {

LLMI_API_DEF LLMINFER_C_API const char* llminfer_version(void) {
  return LLMINFER_VERSION_STRING;
}

LLMI_API_DEF LLMINFER_C_API const char* llminfer_errc_string(int code) {
  if (code < 0 || code > LLMINFER_E_INTERNAL) return "unknown error code";
  return llminfer::describe(static_cast<llminfer::Errc>(code));
}

LLMI_API_DEF LLMINFER_C_API const char* llminfer_stop_string(int stop) {
  if (stop < 0 || stop > LLMINFER_STOP_ERROR) return "unknown";
  return llminfer::to_string(static_cast<llminfer::StopReason>(stop));
}

LLMI_API_DEF LLMINFER_C_API int llminfer_error_code(const llminfer_error* err) {
  return err ? err->code : LLMINFER_OK;
}
LLMI_API_DEF LLMINFER_C_API const char* llminfer_error_message(const llminfer_error* err, size_t* len) {
  if (len) *len = err ? err->message.size() : 0;
  return err ? err->message.c_str() : "";
}
LLMI_API_DEF LLMINFER_C_API void llminfer_error_free(llminfer_error* err) {
  delete err;
}

LLMI_API_DEF LLMINFER_C_API void llminfer_load_options_init(llminfer_load_options* o) {
  if (!o) return;
  *o = llminfer_load_options{};
}

LLMI_API_DEF LLMINFER_C_API void llminfer_generate_options_init(llminfer_generate_options* o) {
  if (!o) return;
  const llminfer::GenerateOptions d;
  *o = llminfer_generate_options{};
  o->max_tokens = d.max_tokens;
  o->temperature = d.temperature;
  o->top_k = d.top_k;
  o->top_p = d.top_p;
  o->min_p = d.min_p;
  o->repeat_penalty = d.repeat_penalty;
  o->repeat_last_n = d.repeat_last_n;
  o->seed = d.seed;
}

LLMI_API_DEF LLMINFER_C_API int llminfer_model_load(const char* path, size_t path_len,
                                                    const llminfer_load_options* opts, llminfer_model** out,
                                                    llminfer_error** err) {
  using namespace llminfer::detail;
  if (!out) return c_null(err, "llminfer_model_load", "out");
  *out = nullptr;
  std::string_view p;
  if (!c_str(path, path_len, p) || p.empty()) return c_null(err, "llminfer_model_load", "path");
  llminfer::LoadOptions lo;
  if (opts) {
    lo.threads = opts->threads;
    lo.context = opts->context;
    lo.kv_type = opts->kv_f32 ? llminfer::KvType::f32 : llminfer::KvType::f16;
    lo.batch = opts->batch;
    std::string_view dir;
    if (!c_str(opts->archdef_dir, opts->archdef_dir_len, dir))
      return c_fail(err, LLMINFER_E_INVALID_ARGUMENT,
                    "llminfer_model_load: archdef_dir is NULL but archdef_dir_len is not 0");
    lo.archdef_dir = std::string(dir);
    if (lo.threads < 0 || lo.context < 0 || lo.batch < 0)
      return c_fail(err, LLMINFER_E_INVALID_ARGUMENT, "llminfer_model_load: threads, context and batch must be >= 0");
  }
  auto m = llminfer::Model::load(p, lo);
  if (!m) return c_fail(err, m.error());
  auto* h = new (std::nothrow) llminfer_model{std::move(*m)};
  if (!h) return c_fail(err, LLMINFER_E_OUT_OF_MEMORY, "llminfer_model_load: out of memory");
  *out = h;
  return c_ok(err);
}

LLMI_API_DEF LLMINFER_C_API void llminfer_model_free(llminfer_model* model) {
  delete model;
}

LLMI_API_DEF LLMINFER_C_API int llminfer_generate(const llminfer_model* model, const char* prompt, size_t prompt_len,
                                                  const llminfer_generate_options* opts, llminfer_result** out,
                                                  llminfer_error** err) {
  using namespace llminfer::detail;
  if (!out) return c_null(err, "llminfer_generate", "out");
  *out = nullptr;
  if (!model) return c_null(err, "llminfer_generate", "model");
  std::string_view p;
  if (!c_str(prompt, prompt_len, p)) return c_null(err, "llminfer_generate", "prompt");
  auto o = c_generate_options(opts, "llminfer_generate");
  if (!o) return c_fail(err, o.error());
  return c_result(model->model.generate(p, *o), out, err);
}

LLMI_API_DEF LLMINFER_C_API int llminfer_generate_tokens(const llminfer_model* model, const int32_t* ids, size_t n_ids,
                                                         const llminfer_generate_options* opts, llminfer_result** out,
                                                         llminfer_error** err) {
  using namespace llminfer::detail;
  if (!out) return c_null(err, "llminfer_generate_tokens", "out");
  *out = nullptr;
  if (!model) return c_null(err, "llminfer_generate_tokens", "model");
  if (!ids && n_ids) return c_null(err, "llminfer_generate_tokens", "ids");
  auto o = c_generate_options(opts, "llminfer_generate_tokens");
  if (!o) return c_fail(err, o.error());
  o->chat = false;  // opts->chat is llminfer_generate's (a text prompt); ids are used as given
  return c_result(model->model.generate(std::span<const int32_t>(ids, n_ids), *o), out, err);
}

LLMI_API_DEF LLMINFER_C_API void llminfer_result_free(llminfer_result* r) {
  if (!r) return;
  std::free(r->text);
  std::free(r->tokens);
  std::free(r->error_message);
  std::free(r);
}

LLMI_API_DEF LLMINFER_C_API int llminfer_session_new(const llminfer_model* model, llminfer_session** out,
                                                     llminfer_error** err) {
  using namespace llminfer::detail;
  if (!out) return c_null(err, "llminfer_session_new", "out");
  *out = nullptr;
  if (!model) return c_null(err, "llminfer_session_new", "model");
  auto* s = new (std::nothrow) llminfer_session{model->model.session()};
  if (!s) return c_fail(err, LLMINFER_E_OUT_OF_MEMORY, "llminfer_session_new: out of memory");
  *out = s;
  return c_ok(err);
}

LLMI_API_DEF LLMINFER_C_API int llminfer_session_add(llminfer_session* session, const char* role, size_t role_len,
                                                     const char* content, size_t content_len, llminfer_error** err) {
  using namespace llminfer::detail;
  if (!session) return c_null(err, "llminfer_session_add", "session");
  std::string_view r, c;
  if (!c_str(role, role_len, r) || r.empty()) return c_null(err, "llminfer_session_add", "role");
  if (!c_str(content, content_len, c)) return c_null(err, "llminfer_session_add", "content");
  session->session.add(r, c);
  return c_ok(err);
}

LLMI_API_DEF LLMINFER_C_API int llminfer_session_reply(llminfer_session* session, const llminfer_generate_options* opts,
                                                       llminfer_result** out, llminfer_error** err) {
  using namespace llminfer::detail;
  if (!out) return c_null(err, "llminfer_session_reply", "out");
  *out = nullptr;
  if (!session) return c_null(err, "llminfer_session_reply", "session");
  auto o = c_generate_options(opts, "llminfer_session_reply");
  if (!o) return c_fail(err, o.error());
  return c_result(session->session.reply(*o), out, err);
}

LLMI_API_DEF LLMINFER_C_API void llminfer_session_reset(llminfer_session* session) {
  if (session) session->session.reset();
}
LLMI_API_DEF LLMINFER_C_API size_t llminfer_session_message_count(const llminfer_session* session) {
  return session ? session->session.messages().size() : 0;
}
LLMI_API_DEF LLMINFER_C_API int llminfer_session_cached_tokens(const llminfer_session* session) {
  return session ? session->session.cached_tokens() : 0;
}
LLMI_API_DEF LLMINFER_C_API void llminfer_session_free(llminfer_session* session) {
  delete session;
}

LLMI_API_DEF LLMINFER_C_API int llminfer_tokenize(const llminfer_model* model, const char* text, size_t text_len,
                                                  int add_special, int parse_special, int32_t** ids, size_t* n_ids,
                                                  llminfer_error** err) {
  using namespace llminfer::detail;
  if (!ids) return c_null(err, "llminfer_tokenize", "ids");
  if (!n_ids) return c_null(err, "llminfer_tokenize", "n_ids");
  *ids = nullptr;
  *n_ids = 0;
  if (!model) return c_null(err, "llminfer_tokenize", "model");
  std::string_view t;
  if (!c_str(text, text_len, t)) return c_null(err, "llminfer_tokenize", "text");
  auto r = model->model.tokenize(t, add_special != 0, parse_special != 0);
  if (!r) return c_fail(err, r.error());
  auto* p = static_cast<int32_t*>(std::malloc(std::max<size_t>(1, r->size()) * sizeof(int32_t)));
  if (!p) return c_fail(err, LLMINFER_E_OUT_OF_MEMORY, "llminfer_tokenize: out of memory");
  if (!r->empty()) std::memcpy(p, r->data(), r->size() * sizeof(int32_t));
  *ids = p;
  *n_ids = r->size();
  return c_ok(err);
}

LLMI_API_DEF LLMINFER_C_API void llminfer_tokens_free(int32_t* ids) {
  std::free(ids);
}

LLMI_API_DEF LLMINFER_C_API int llminfer_detokenize(const llminfer_model* model, const int32_t* ids, size_t n_ids,
                                                    char** text, size_t* text_len, llminfer_error** err) {
  using namespace llminfer::detail;
  if (!text) return c_null(err, "llminfer_detokenize", "text");
  *text = nullptr;
  if (text_len) *text_len = 0;
  if (!model) return c_null(err, "llminfer_detokenize", "model");
  if (!ids && n_ids) return c_null(err, "llminfer_detokenize", "ids");
  if (!llminfer::detail::model_impl(model->model).tokenizer)
    return c_fail(err, llminfer::detail::model_impl(model->model).tokenizer_error);
  const int64_t n_vocab = static_cast<int64_t>(llminfer::detail::model_impl(model->model).tokenizer->n_vocab());
  for (size_t i = 0; i < n_ids; i++)
    if (ids[i] < 0 || ids[i] >= n_vocab)
      return c_fail(err, LLMINFER_E_INVALID_ARGUMENT,
                    strf("llminfer_detokenize: id %d (at %zu) is outside the vocabulary (0..%lld)", ids[i], i,
                         static_cast<long long>(n_vocab - 1)));
  std::string s = model->model.detokenize(std::span<const int32_t>(ids, n_ids));
  char* p = c_dup(s);
  if (!p) return c_fail(err, LLMINFER_E_OUT_OF_MEMORY, "llminfer_detokenize: out of memory");
  *text = p;
  if (text_len) *text_len = s.size();
  return c_ok(err);
}

LLMI_API_DEF LLMINFER_C_API void llminfer_string_free(char* text) {
  std::free(text);
}

LLMI_API_DEF LLMINFER_C_API int llminfer_json_schema_to_grammar(const char* schema, size_t schema_len, char** gbnf,
                                                                size_t* gbnf_len, llminfer_error** err) {
  using namespace llminfer::detail;
  if (!gbnf) return c_null(err, "llminfer_json_schema_to_grammar", "gbnf");
  *gbnf = nullptr;
  if (gbnf_len) *gbnf_len = 0;
  std::string_view in;
  if (!c_str(schema, schema_len, in)) return c_null(err, "llminfer_json_schema_to_grammar", "schema");
  auto g = llminfer::json_schema_to_grammar(in);
  if (!g) return c_fail(err, g.error());
  char* p = c_dup(*g);
  if (!p) return c_fail(err, LLMINFER_E_OUT_OF_MEMORY, "llminfer_json_schema_to_grammar: out of memory");
  *gbnf = p;
  if (gbnf_len) *gbnf_len = g->size();
  return c_ok(err);
}

}  // extern "C"
