// llminfer-serve (`llminfer serve`): an OpenAI-compatible HTTP server over one model.
//
//   llminfer serve -m MODEL [--host 127.0.0.1] [--port 8080] [--parallel N] [--api-key KEY] [-c N]
//                  [-t N] [--queue N] [--max-body BYTES] [--timeout S] [--queue-timeout S]
//
// Endpoints: POST /v1/chat/completions (the model's own chat template; "stream": true as server-sent
// events ending with `data: [DONE]`), POST /v1/completions, GET /v1/models, GET /health.
//
// How it works:
//   * N slots (--parallel), each a Session of its own with its KV cache. A request takes the free
//     slot whose cache shares the longest prefix with its prompt (else the least recently used), so
//     a conversation that comes back reuses what it evaluated before (usage.prompt_tokens_details.
//     cached_tokens says how many tokens). Slots that generate at the same time decode in shared
//     steps: the library batches sessions of one model across threads (LoadOptions::batch).
//   * When every slot is busy, up to --queue requests wait (at most --queue-timeout seconds); more
//     get 503 with a JSON error at once.
//   * A streaming client that disconnects: the next token's write fails, which cancels the
//     generation and frees its slot.
//   * Errors have the OpenAI shape {"error":{"message","type","param","code"}}: malformed JSON and
//     wrong types 400, bodies over --max-body 413, a missing or wrong key (with --api-key) 401, an
//     unknown path 404. Idle keep-alive connections close after 5 s; reads and writes time out after
//     --timeout seconds. No endpoint reads or writes files.
//
// Dependencies: Debian's cpp-httplib (libcpp-httplib-dev; Debian ships it compiled, libcpp-httplib0.11)
// and header-only nlohmann-json
// (nlohmann-json3-dev), installed by `make serve` / .ci/run by package name. The llminfer header
// itself stays standard-library only; this program is built separately from the CLI, which runs it
// for `llminfer serve` (examples/cli/cmd_serve.cpp).
#define LLMINFER_IMPLEMENTATION
#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../cli/cli.hpp"

using json = nlohmann::json;

namespace {

const char* kUsage =
    "usage: llminfer serve -m MODEL [--host H] [--port P] [--parallel N] [--api-key KEY] [-c N] [-t N]\n"
    "                      [--queue N] [--max-body BYTES] [--timeout S] [--queue-timeout S]\n"
    "  -m, --model MODEL     a .gguf file, a .safetensors file or a model directory\n"
    "  --host H              address to bind (default 127.0.0.1: loopback only)\n"
    "  --port P              port (default 8080; 0 picks a free one, printed on stderr)\n"
    "  --parallel N          slots: requests generating at once, decoded in shared steps (default 4)\n"
    "  --api-key KEY         require 'Authorization: Bearer KEY' on /v1/* (also $LLMINFER_API_KEY)\n"
    "  -c, --context N       tokens per slot (default: the model's, at most 4096)\n"
    "  -t, --threads N       compute threads (default: all)\n"
    "  --queue N             requests that may wait for a slot; more get 503 (default 16)\n"
    "  --max-body BYTES      largest request body; more gets 413 (default 1048576)\n"
    "  --timeout S           read/write timeout of a connection in seconds (default 30)\n"
    "  --queue-timeout S     longest wait for a slot before 503 (default 60)\n"
    "  --archdef DIR, --no-mmap, --max-program-steps N, --max-session-mb N   as for the other commands\n"
    "                        (--max-session-mb is per slot)\n";

// ---- errors in the OpenAI shape ----
json error_body(const std::string& message, const char* type, const char* param = nullptr, const char* code = nullptr) {
  json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (param) e["param"] = param;
  if (code) e["code"] = code;
  return json{{"error", e}};
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message, const char* param = nullptr,
                const char* code = nullptr) {
  const char* type = status == 401   ? "authentication_error"
                     : status == 503 ? "server_busy"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  send_json(res, status, error_body(message, type, param, code));
}

// A request that cannot be served: status, message, the parameter at fault.
struct BadRequest {
  int status = 400;
  std::string message;
  const char* param = nullptr;
};

// ---- slots ----
struct Slot {
  int id = 0;
  llminfer::Session session;
  bool busy = false;
  uint64_t last_used = 0;
};

class Slots {
 public:
  Slots(const llminfer::Model& m, int n, int max_queue) : max_queue_(max_queue) {
    for (int i = 0; i < n; i++) {
      auto s = std::make_unique<Slot>(Slot{i, m.session()});
      slots_.push_back(std::move(s));
    }
  }

  // A free slot for `prompt` (the longest cached prefix, else the least recently used); nullptr
  // when the queue is full (`full`) or the wait timed out.
  Slot* acquire(std::span<const int32_t> prompt, std::chrono::seconds max_wait, bool& full) {
    std::unique_lock<std::mutex> lk(mu_);
    full = false;
    auto free_slot = [&] {
      for (auto& s : slots_)
        if (!s->busy) return true;
      return false;
    };
    if (!free_slot()) {
      if (waiting_ >= max_queue_) {
        full = true;
        return nullptr;
      }
      waiting_++;
      bool ok = cv_.wait_for(lk, max_wait, free_slot);
      waiting_--;
      if (!ok) return nullptr;
    }
    Slot* best = nullptr;
    size_t best_prefix = 0;
    for (auto& s : slots_) {
      if (s->busy) continue;
      size_t p = cached_prefix(*s, prompt);
      if (!best || p > best_prefix || (p == best_prefix && s->last_used < best->last_used)) {
        best = s.get();
        best_prefix = p;
      }
    }
    best->busy = true;
    best->last_used = ++clock_;
    served_++;
    return best;
  }

  void release(Slot* s) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      s->busy = false;
    }
    cv_.notify_one();
  }

  json stats() {
    std::lock_guard<std::mutex> lk(mu_);
    int busy = 0;
    for (auto& s : slots_) busy += s->busy ? 1 : 0;
    return json{{"slots_idle", int(slots_.size()) - busy},
                {"slots_processing", busy},
                {"queue", waiting_},
                {"requests_served", served_}};
  }

 private:
  static size_t cached_prefix(Slot& s, std::span<const int32_t> prompt) {
    const auto& t = s.session.tokens();
    size_t n = std::min(t.size(), prompt.size()), i = 0;
    while (i < n && t[i] == prompt[i]) i++;
    return i;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Slot>> slots_;
  int waiting_ = 0;
  uint64_t served_ = 0;  // requests that got a slot
  int max_queue_;
  uint64_t clock_ = 0;
};

// A slot taken by a request: freed by release() (idempotent) or, at the latest, by the last owner.
struct SlotLease {
  SlotLease(Slots* s, Slot* sl) : slots(s), slot(sl) {}
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;
  ~SlotLease() { release(); }
  void release() {
    if (!released.exchange(true)) slots->release(slot);
  }
  Slots* slots;
  Slot* slot;
  std::atomic<bool> released{false};
};

// ---- request parsing (every field's type checked; unknown fields are ignored, as OpenAI's) ----
struct Request {
  bool chat = false;
  bool stream = false;
  bool include_usage = false;
  std::vector<llminfer::Message> messages;
  std::string prompt;
  std::vector<int32_t> prompt_ids;  // /v1/completions with a token array
  bool prompt_is_ids = false;
  llminfer::GenerateOptions options;
};

std::optional<BadRequest> number_field(const json& body, const char* name, double lo, double hi, float& out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) return BadRequest{400, std::string(name) + " must be a number", name};
  double v = it->get<double>();
  if (!(v >= lo && v <= hi))
    return BadRequest{400, cli::strf("%s must be between %g and %g, got %g", name, lo, hi, v), name};
  out = static_cast<float>(v);
  return std::nullopt;
}

std::optional<BadRequest> int_field(const json& body, const char* name, long long lo, long long hi, long long& out) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() && !it->is_number_unsigned())
    return BadRequest{400, std::string(name) + " must be an integer", name};
  if (it->is_number_unsigned() && it->get<unsigned long long>() > static_cast<unsigned long long>(hi))
    return BadRequest{400, cli::strf("%s must be at most %lld", name, hi), name};
  long long v = it->is_number_unsigned() ? static_cast<long long>(it->get<unsigned long long>()) : it->get<long long>();
  if (v < lo || v > hi) return BadRequest{400, cli::strf("%s must be between %lld and %lld", name, lo, hi), name};
  out = v;
  return std::nullopt;
}

std::optional<BadRequest> parse_common(const json& body, Request& r) {
  llminfer::GenerateOptions& o = r.options;
  // OpenAI's defaults: temperature 1, top_p 1, a fresh seed, no token limit but the context
  o.temperature = 1.0f;
  o.top_p = 1.0f;
  o.max_tokens = -1;
  o.seed = llminfer::random_seed;
  o.repeat_penalty = 1.0f;
  if (auto it = body.find("stream"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return BadRequest{400, "stream must be a boolean", "stream"};
    r.stream = it->get<bool>();
  }
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return BadRequest{400, "stream_options must be an object", "stream_options"};
    if (auto u = it->find("include_usage"); u != it->end() && !u->is_null()) {
      if (!u->is_boolean()) return BadRequest{400, "stream_options.include_usage must be a boolean", "stream_options"};
      r.include_usage = u->get<bool>();
    }
  }
  long long v = 0;
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    v = -1;
    if (auto e = int_field(body, name, 0, 1 << 24, v)) return e;
    if (v >= 0) o.max_tokens = static_cast<int>(v);
  }
  if (auto e = number_field(body, "temperature", 0, 2, o.temperature)) return e;
  if (auto e = number_field(body, "top_p", 0, 1, o.top_p)) return e;
  if (body.contains("top_p") && o.top_p <= 0) return BadRequest{400, "top_p must be greater than 0", "top_p"};
  if (auto e = number_field(body, "min_p", 0, 1, o.min_p)) return e;
  if (auto e = number_field(body, "repeat_penalty", 0.01, 100, o.repeat_penalty)) return e;
  v = 0;
  if (auto e = int_field(body, "top_k", 0, 1 << 30, v)) return e;
  o.top_k = static_cast<int>(v);
  if (auto it = body.find("seed"); it != body.end() && !it->is_null()) {
    if (it->is_number_unsigned())
      o.seed = it->get<unsigned long long>();
    else if (it->is_number_integer())
      o.seed = static_cast<uint64_t>(it->get<long long>());
    else
      return BadRequest{400, "seed must be an integer", "seed"};
    if (o.seed == llminfer::random_seed) o.seed = 0;
  }
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    std::vector<json> items;
    if (it->is_string())
      items.push_back(*it);
    else if (it->is_array())
      items.assign(it->begin(), it->end());
    else
      return BadRequest{400, "stop must be a string or an array of strings", "stop"};
    if (items.size() > 16) return BadRequest{400, "stop: at most 16 strings", "stop"};
    for (const auto& s : items) {
      if (!s.is_string()) return BadRequest{400, "stop must be a string or an array of strings", "stop"};
      if (s.get_ref<const std::string&>().empty()) return BadRequest{400, "stop strings must not be empty", "stop"};
      o.stop.push_back(s.get<std::string>());
    }
  }
  // not supported: refused by name rather than ignored
  for (const char* name : {"presence_penalty", "frequency_penalty"}) {
    float p = 0;
    if (auto e = number_field(body, name, -2, 2, p)) return e;
    if (p != 0)
      return BadRequest{400,
                        std::string(name) +
                            " is not supported (only 0); use repeat_penalty (a multiplicative "
                            "penalty on recent tokens) instead",
                        name};
  }
  if (auto e = int_field(body, "n", 1, 1, v)) return BadRequest{400, "n: only 1 choice per request is supported", "n"};
  if (auto it = body.find("logprobs"); it != body.end() && !it->is_null() && !(it->is_boolean() && !it->get<bool>()))
    return BadRequest{400, "logprobs are not supported", "logprobs"};
  if (auto it = body.find("tools"); it != body.end() && !it->is_null() && !(it->is_array() && it->empty()))
    return BadRequest{400, "tools are not supported", "tools"};
  // Structured output: response_format json_schema / json_object, logit_bias (OpenAI's), grammar
  // (GBNF, llminfer's own as in llama.cpp's server). A malformed schema or grammar is a 400 naming
  // what is wrong, before a slot is taken.
  if (auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    const char* kTypes =
        "response_format must be {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
        "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": {...}}}";
    if (!it->is_object()) return BadRequest{400, kTypes, "response_format"};
    auto type = it->find("type");
    if (type == it->end() || !type->is_string()) return BadRequest{400, kTypes, "response_format"};
    const std::string& t = type->get_ref<const std::string&>();
    if (t == "json_object") {
      o.json_schema = R"({"type": "object"})";
    } else if (t == "json_schema") {
      auto js = it->find("json_schema");
      if (js == it->end() || !js->is_object()) return BadRequest{400, kTypes, "response_format"};
      auto schema = js->find("schema");
      if (schema == js->end() || !(schema->is_object() || schema->is_boolean()))
        return BadRequest{400, "response_format.json_schema.schema must be a JSON Schema (an object)",
                          "response_format"};
      o.json_schema = schema->dump();
      if (auto g = llminfer::json_schema_to_grammar(o.json_schema); !g)
        return BadRequest{400, "response_format.json_schema.schema: " + g.error().message, "response_format"};
    } else if (t != "text") {
      return BadRequest{400, kTypes, "response_format"};
    }
  }
  if (auto it = body.find("grammar"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) return BadRequest{400, "grammar must be a string (GBNF)", "grammar"};
    if (!o.json_schema.empty()) return BadRequest{400, "give grammar or a JSON response_format, not both", "grammar"};
    o.grammar = it->get<std::string>();
    if (auto c = llminfer::check_grammar(o.grammar); !c) return BadRequest{400, c.error().message, "grammar"};
  }
  if (auto it = body.find("logit_bias"); it != body.end() && !it->is_null()) {
    if (!it->is_object())
      return BadRequest{400, "logit_bias must be an object mapping token ids to biases (-100..100)", "logit_bias"};
    for (const auto& [key, value] : it->items()) {
      int32_t id = -1;
      auto r = std::from_chars(key.data(), key.data() + key.size(), id);
      if (r.ec != std::errc() || r.ptr != key.data() + key.size() || id < 0)
        return BadRequest{400, "logit_bias: '" + key + "' is not a token id", "logit_bias"};
      if (!value.is_number() || !(value.get<double>() >= -100 && value.get<double>() <= 100))
        return BadRequest{400, "logit_bias: the bias of token " + key + " must be a number between -100 and 100",
                          "logit_bias"};
      o.logit_bias.emplace_back(id, static_cast<float>(value.get<double>()));
    }
  }
  return std::nullopt;
}

std::optional<BadRequest> parse_chat(const json& body, Request& r) {
  r.chat = true;
  auto it = body.find("messages");
  if (it == body.end() || !it->is_array() || it->empty())
    return BadRequest{400, "messages must be a non-empty array", "messages"};
  for (const auto& m : *it) {
    if (!m.is_object()) return BadRequest{400, "each message must be an object", "messages"};
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return BadRequest{400, "each message needs a string 'role'", "messages"};
    auto content = m.find("content");
    std::string text;
    if (content == m.end() || content->is_null()) {
      return BadRequest{400, "each message needs 'content' (a string or an array of text parts)", "messages"};
    } else if (content->is_string()) {
      text = content->get<std::string>();
    } else if (content->is_array()) {
      for (const auto& part : *content) {
        if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
            !part["text"].is_string())
          return BadRequest{400, "message content parts: only {\"type\": \"text\", \"text\": ...} is supported",
                            "messages"};
        text += part["text"].get<std::string>();
      }
    } else {
      return BadRequest{400, "message content must be a string or an array of text parts", "messages"};
    }
    r.messages.push_back(llminfer::Message{role->get<std::string>(), std::move(text)});
  }
  return parse_common(body, r);
}

std::optional<BadRequest> parse_completion(const json& body, Request& r) {
  auto it = body.find("prompt");
  if (it == body.end()) return BadRequest{400, "prompt is required", "prompt"};
  if (it->is_string()) {
    r.prompt = it->get<std::string>();
  } else if (it->is_array() && it->size() == 1 && (*it)[0].is_string()) {
    r.prompt = (*it)[0].get<std::string>();
  } else if (it->is_array() && !it->empty() && (*it)[0].is_number_integer()) {
    r.prompt_is_ids = true;
    for (const auto& t : *it) {
      if (!t.is_number_integer()) return BadRequest{400, "prompt: a token array holds integers only", "prompt"};
      long long id = t.get<long long>();
      if (id < 0 || id > INT32_MAX) return BadRequest{400, "prompt: token id out of range", "prompt"};
      r.prompt_ids.push_back(static_cast<int32_t>(id));
    }
  } else {
    return BadRequest{400, "prompt must be a string, an array of one string, or an array of token ids", "prompt"};
  }
  if (auto e = body.find("echo"); e != body.end() && e->is_boolean() && e->get<bool>())
    return BadRequest{400, "echo is not supported", "echo"};
  if (auto e = body.find("suffix"); e != body.end() && !e->is_null())
    return BadRequest{400, "suffix is not supported", "suffix"};
  return parse_common(body, r);
}

// ---- the server ----
struct Server {
  llminfer::Model model;
  std::string model_name;
  std::string api_key;
  std::unique_ptr<Slots> slots;
  std::chrono::seconds queue_timeout{60};
  std::atomic<uint64_t> next_id{1};
  uint64_t id_salt = 0;
  int n_ctx = 0;
  int64_t n_vocab = 0;      // logits per position (logit_bias ids are below it)
  int64_t n_input_ids = 0;  // prompt ids are below it

  std::string new_id(const char* prefix) {
    return cli::strf("%s-%016llx%06llx", prefix, static_cast<unsigned long long>(id_salt),
                     static_cast<unsigned long long>(next_id++));
  }

  bool authorized(const httplib::Request& req, httplib::Response& res) {
    if (api_key.empty()) return true;
    std::string h = req.get_header_value("Authorization");
    std::string want = "Bearer " + api_key;
    // constant time in the key's length
    bool same = h.size() == want.size();
    unsigned char diff = 0;
    for (size_t i = 0; i < want.size(); i++) diff |= static_cast<unsigned char>(i < h.size() ? h[i] ^ want[i] : 1);
    if (!same || diff != 0) {
      send_error(res, 401, h.empty() ? "missing API key: send 'Authorization: Bearer KEY'" : "invalid API key", nullptr,
                 "invalid_api_key");
      return false;
    }
    return true;
  }

  static const char* finish_reason(llminfer::StopReason s) {
    switch (s) {
      case llminfer::StopReason::eos:
      case llminfer::StopReason::stop: return "stop";
      case llminfer::StopReason::max_tokens:
      case llminfer::StopReason::context_full: return "length";
      case llminfer::StopReason::cancelled: return "cancelled";
      case llminfer::StopReason::error: return "error";
    }
    return "stop";
  }

  json usage(const llminfer::GenerateResult& r) {
    return json{{"prompt_tokens", r.prompt_tokens},
                {"completion_tokens", r.tokens.size()},
                {"total_tokens", r.prompt_tokens + static_cast<long long>(r.tokens.size())},
                {"prompt_tokens_details", {{"cached_tokens", r.prompt_tokens_reused}}}};
  }

  // Token ids of the request's prompt, or a 400.
  std::optional<BadRequest> prompt_tokens(const Request& r, std::vector<int32_t>& ids) {
    if (r.chat) {
      auto t = model.tokenize_chat(r.messages);
      if (!t) return BadRequest{400, t.error().message, "messages"};
      ids = std::move(*t);
    } else if (r.prompt_is_ids) {
      for (int32_t id : r.prompt_ids)
        if (id >= n_input_ids)
          return BadRequest{400, cli::strf("prompt: token id %d is outside the vocabulary", id), "prompt"};
      ids = r.prompt_ids;
    } else {
      // a raw prompt may hold the model's control tokens (as llama.cpp's server reads it)
      auto t = model.tokenize(r.prompt, true, true);
      if (!t) return BadRequest{400, t.error().message, "prompt"};
      ids = std::move(*t);
    }
    if (ids.empty()) return BadRequest{400, "the prompt is empty", r.chat ? "messages" : "prompt"};
    for (const auto& [id, bias] : r.options.logit_bias)
      if (id >= n_vocab)
        return BadRequest{400,
                          cli::strf("logit_bias: token id %d is outside the vocabulary (0..%lld)", id,
                                    static_cast<long long>(n_vocab - 1)),
                          "logit_bias"};
    if (ids.size() >= static_cast<size_t>(n_ctx))
      return BadRequest{400, cli::strf("the prompt is %zu tokens but the context holds %d", ids.size(), n_ctx),
                        r.chat ? "messages" : "prompt"};
    return std::nullopt;
  }

  void handle(const httplib::Request& req, httplib::Response& res, bool chat) {
    if (!authorized(req, res)) return;
    json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded()) return send_error(res, 400, "the request body is not valid JSON");
    if (!body.is_object()) return send_error(res, 400, "the request body must be a JSON object");
    Request r;
    if (auto e = chat ? parse_chat(body, r) : parse_completion(body, r))
      return send_error(res, e->status, e->message, e->param);
    if (auto v = llminfer::check_generate_options(r.options); !v) return send_error(res, 400, v.error().message);
    r.options.chat = chat;  // a chat prompt's reply: its text as Session::reply gives it
    std::vector<int32_t> ids;
    if (auto e = prompt_tokens(r, ids)) return send_error(res, e->status, e->message, e->param);
    bool full = false;
    Slot* slot = slots->acquire(ids, queue_timeout, full);
    if (!slot)
      return send_error(res, 503,
                        full ? "the server is busy: every slot is generating and the queue is full; retry later"
                             : "the server is busy: no slot became free in time; retry later");
    auto lease = std::make_shared<SlotLease>(slots.get(), slot);
    const std::string id = new_id(chat ? "chatcmpl" : "cmpl");
    const long long created = static_cast<long long>(std::time(nullptr));
    if (!r.stream) {
      auto g = slot->session.generate(ids, r.options);
      lease->release();
      if (!g) return send_error(res, 500, g.error().message);
      if (g->stop == llminfer::StopReason::error) return send_error(res, 500, g->error.message);
      json choice = {{"index", 0}, {"finish_reason", finish_reason(g->stop)}, {"logprobs", nullptr}};
      if (chat)
        choice["message"] = {{"role", "assistant"}, {"content", g->text}};
      else
        choice["text"] = g->text;
      return send_json(res, 200,
                       json{{"id", id},
                            {"object", chat ? "chat.completion" : "text_completion"},
                            {"created", created},
                            {"model", model_name},
                            {"choices", json::array({choice})},
                            {"usage", usage(*g)}});
    }
    // streaming: the generation runs in the content provider, on this connection's thread
    auto state = std::make_shared<Request>(std::move(r));
    auto prompt = std::make_shared<std::vector<int32_t>>(std::move(ids));
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");  // nginx: pass the events on as they come
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, lease, state, prompt, id, created, chat](size_t, httplib::DataSink& sink) mutable {
          auto event = [&](const json& j) {
            std::string s = "data: " + j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
            return sink.write(s.data(), s.size());
          };
          auto chunk = [&](const json& delta_or_text, const json& finish) {
            json c = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
            if (chat)
              c["delta"] = delta_or_text;
            else
              c["text"] = delta_or_text;
            return json{{"id", id},
                        {"object", chat ? "chat.completion.chunk" : "text_completion"},
                        {"created", created},
                        {"model", model_name},
                        {"choices", json::array({c})}};
          };
          bool open = event(chunk(chat ? json{{"role", "assistant"}, {"content", ""}} : json(""), nullptr));
          llminfer::GenerateOptions o = state->options;
          o.on_token = [&](std::string_view piece) {
            if (!open) return false;
            std::string p(piece);
            open = event(chunk(chat ? json{{"content", p}} : json(p), nullptr));
            return open;  // a failed write (client gone) cancels: the slot is freed at once
          };
          Slot* slot = lease->slot;
          auto g = open ? slot->session.generate(*prompt, o)
                        : llminfer::Result<llminfer::GenerateResult>(
                              llminfer::Error{llminfer::Errc::internal, "client gone"});
          lease->release();  // the slot is free before the last events are written
          if (!open) return false;
          if (!g || g->stop == llminfer::StopReason::error) {
            event(error_body(g ? g->error.message : g.error().message, "server_error"));
          } else {
            event(chunk(chat ? json::object() : json(""), finish_reason(g->stop)));
            if (state->include_usage)
              event(json{{"id", id},
                         {"object", chat ? "chat.completion.chunk" : "text_completion"},
                         {"created", created},
                         {"model", model_name},
                         {"choices", json::array()},
                         {"usage", usage(*g)}});
          }
          const char done[] = "data: [DONE]\n\n";
          sink.write(done, sizeof(done) - 1);
          sink.done();
          return true;
        },
        [lease](bool) { lease->release(); });  // also when the provider never ran or failed
  }
};

}  // namespace

int main(int argc, char** argv) {
  // `llminfer serve ...` runs this program with "serve" as argv[1]
  int first = argc > 1 && std::string(argv[1]) == "serve" ? 2 : 1;
  cli::Args args(kUsage);
  args.common().option({"-m", "--model"}, true).option({"--host"}, true).option({"--port"}, true);
  args.option({"--parallel", "-np"}, true).option({"--api-key"}, true).option({"--queue"}, true);
  args.option({"--max-body"}, true).option({"--timeout"}, true).option({"--queue-timeout"}, true);
  if (!args.parse(argc - first, argv + first)) return args.exit_code();
  llminfer::LoadOptions lo;
  if (!args.load_options(lo)) return args.exit_code();
  long long port = 8080, parallel = 4, queue = 16, max_body = 1 << 20, timeout = 30, queue_timeout = 60;
  if (!args.get_int("--port", port) || !args.get_int("--parallel", parallel) || !args.get_int("--queue", queue) ||
      !args.get_int("--max-body", max_body) || !args.get_int("--timeout", timeout) ||
      !args.get_int("--queue-timeout", queue_timeout))
    return args.exit_code();
  if (!args.has("--model")) {
    args.usage_error("-m MODEL is required");
    return args.exit_code();
  }
  if (port < 0 || port > 65535 || parallel < 1 || parallel > 256 || queue < 0 || queue > 100000 || max_body < 1 ||
      timeout < 1 || queue_timeout < 0) {
    args.usage_error("--port 0..65535, --parallel 1..256, --queue 0..100000, --max-body >= 1, --timeout >= 1");
    return args.exit_code();
  }
  lo.batch = static_cast<int>(std::max<long long>(parallel, 2));  // the slots decode in shared steps

  // SIGINT/SIGTERM stop the server cleanly (waited for on a thread of its own)
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  Server srv;
  const std::string path = args.get("--model");
  auto m = llminfer::Model::load(path, lo);
  if (!m) return cli::fail(m.error());
  srv.model = std::move(*m);
  {
    size_t slash = path.find_last_of('/');
    srv.model_name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (srv.model_name.empty()) srv.model_name = path;
  }
  srv.api_key = args.get("--api-key", "");
  if (srv.api_key.empty())
    if (const char* k = std::getenv("LLMINFER_API_KEY")) srv.api_key = k;
  srv.queue_timeout = std::chrono::seconds(queue_timeout);
  srv.id_salt = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                (static_cast<uint64_t>(getpid()) << 40);
  srv.slots = std::make_unique<Slots>(srv.model, static_cast<int>(parallel), static_cast<int>(queue));
  srv.n_ctx = srv.slots ? srv.model.session().context_size() : 0;
  {
    const llminfer::ModelInfo info = srv.model.info();
    srv.n_vocab = info.n_vocab;
    srv.n_input_ids = info.n_input_ids;
  }

  httplib::Server http;
  // enough handler threads for every slot and every queued request, plus a few for /health
  const size_t handler_threads = static_cast<size_t>(parallel + queue + 4);
  http.new_task_queue = [handler_threads] { return new httplib::ThreadPool(handler_threads); };
  http.set_payload_max_length(static_cast<size_t>(max_body));
  http.set_read_timeout(static_cast<time_t>(timeout), 0);
  http.set_write_timeout(static_cast<time_t>(timeout), 0);
  http.set_keep_alive_timeout(5);
  http.set_keep_alive_max_count(1000);
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, 500, what);
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      send_error(res, 413, "the request body is larger than the limit (--max-body)");
    else if (res.status == 404)
      send_error(res, 404, "no such endpoint: " + req.method + " " + req.path);
    else if (res.status == 405)
      send_error(res, 405, "method not allowed: " + req.method + " " + req.path);
    else
      send_error(res, res.status, cli::strf("HTTP status %d", res.status));
  });
  http.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
    json j = srv.slots->stats();
    j["status"] = "ok";
    send_json(res, 200, j);
  });
  http.Get("/v1/models", [&](const httplib::Request& req, httplib::Response& res) {
    if (!srv.authorized(req, res)) return;
    send_json(res, 200,
              json{{"object", "list"},
                   {"data", json::array({json{{"id", srv.model_name},
                                              {"object", "model"},
                                              {"created", 0},
                                              {"owned_by", "llminfer"},
                                              {"context_length", srv.n_ctx}}})}});
  });
  http.Post("/v1/chat/completions",
            [&](const httplib::Request& req, httplib::Response& res) { srv.handle(req, res, true); });
  http.Post("/v1/completions",
            [&](const httplib::Request& req, httplib::Response& res) { srv.handle(req, res, false); });

  const std::string host = args.get("--host", "127.0.0.1");
  int bound =
      port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, static_cast<int>(port)) ? int(port) : -1);
  if (bound < 0) {
    std::fprintf(stderr, "error: cannot listen on %s:%lld\n", host.c_str(), port);
    return cli::kFailure;
  }
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    http.stop();
  });
  std::fprintf(stderr, "llminfer serve: %s (%d slots of %d tokens) listening on http://%s:%d\n", srv.model_name.c_str(),
               static_cast<int>(parallel), srv.n_ctx, host.c_str(), bound);
  std::fflush(stderr);
  bool ok = http.listen_after_bind();
  if (stopper.joinable()) {
    pthread_kill(stopper.native_handle(), SIGTERM);
    stopper.join();
  }
  return ok ? cli::kOk : cli::kFailure;
}
