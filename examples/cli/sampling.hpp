// Sampling flags shared by `llminfer run` and `llminfer chat`, and the end-of-run summary.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>

#include "cli.hpp"

namespace cli {

// Defaults of the interactive commands (llama.cpp's): `run --json` defaults to greedy instead.
constexpr float kDefaultTemp = 0.8f;
constexpr int kDefaultTopK = 40;
constexpr float kDefaultTopP = 0.95f;
constexpr float kDefaultMinP = 0.05f;

inline const char* kSamplingHelp =
    "sampling:\n"
    "  -n, --max-tokens N      tokens to generate at most (default 256; -1: until the end of generation)\n"
    "  --temp T                temperature; 0 = greedy (default 0.8, or 0 with --json)\n"
    "  --top-k K               keep the K most likely tokens (default 40; 0 = off)\n"
    "  --top-p P               keep the smallest set of tokens with probability >= P (default 0.95; 1 = off)\n"
    "  --min-p M               drop tokens less likely than M x the most likely one (default 0.05; 0 = off)\n"
    "  --repeat-penalty R      penalise tokens seen in the last --repeat-last-n tokens (default 1 = off)\n"
    "  --repeat-last-n N       window of the penalty (default 64; -1 = everything)\n"
    "  --seed S                random seed: the same seed gives the same text (default: a random one)\n"
    "  --stop S                stop when the text S appears (repeatable; S is not printed)\n"
    "structured output:\n"
    "  --grammar FILE          the output follows the GBNF grammar in FILE (llama.cpp's syntax, rule root)\n"
    "  --json-schema FILE      the output is JSON valid under the JSON Schema in FILE (the subset in the\n"
    "                          README; an unsupported keyword is an error)\n"
    "  --logit-bias ID=BIAS    add BIAS to token ID's logit (repeatable; BIAS -inf bans it)\n"
    "  --ban 1,2,3             never sample these token ids (repeatable)\n";

inline void add_sampling_options(Args& a) {
  a.option({"-n", "--max-tokens"}, true);
  a.option({"--temp", "--temperature"}, true);
  a.option({"--top-k"}, true);
  a.option({"--top-p"}, true);
  a.option({"--min-p"}, true);
  a.option({"--repeat-penalty"}, true);
  a.option({"--repeat-last-n"}, true);
  a.option({"--seed"}, true);
  a.option({"--stop"}, true);
  a.option({"--grammar"}, true);
  a.option({"--json-schema"}, true);
  a.option({"--logit-bias"}, true);
  a.option({"--ban"}, true);
}

// Fills the sampling fields of `o`; false after a usage error.
inline bool read_sampling(Args& a, llminfer::GenerateOptions& o, bool greedy_default) {
  long long n = 256, top_k = kDefaultTopK, last_n = 64;
  double temp = greedy_default ? 0.0 : kDefaultTemp, top_p = kDefaultTopP, min_p = kDefaultMinP, rep = 1.0;
  if (!a.get_int("--max-tokens", n) || !a.get_float("--temperature", temp) || !a.get_int("--top-k", top_k) ||
      !a.get_float("--top-p", top_p) || !a.get_float("--min-p", min_p) || !a.get_float("--repeat-penalty", rep) ||
      !a.get_int("--repeat-last-n", last_n))
    return false;
  if (n < -1 || n > (1ll << 30)) return a.usage_error("--max-tokens must be -1 or a number of tokens");
  if (!(temp >= 0) || !std::isfinite(temp)) return a.usage_error("--temp must be >= 0");
  if (top_k < 0 || top_k > (1ll << 30)) return a.usage_error("--top-k must be >= 0");
  if (!(top_p > 0 && top_p <= 1)) return a.usage_error("--top-p must be in (0, 1]");
  if (!(min_p >= 0 && min_p <= 1)) return a.usage_error("--min-p must be in [0, 1]");
  if (!(rep > 0) || !std::isfinite(rep)) return a.usage_error("--repeat-penalty must be > 0");
  if (last_n < -1 || last_n > (1ll << 30)) return a.usage_error("--repeat-last-n must be >= -1");
  o.max_tokens = static_cast<int>(n);
  o.temperature = static_cast<float>(temp);
  o.top_k = static_cast<int>(top_k);
  o.top_p = static_cast<float>(top_p);
  o.min_p = static_cast<float>(min_p);
  o.repeat_penalty = static_cast<float>(rep);
  o.repeat_last_n = static_cast<int>(last_n);
  o.seed = llminfer::random_seed;
  if (a.has("--seed")) {
    std::string s = a.get("--seed");
    uint64_t v = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size() || v == llminfer::random_seed)
      return a.usage_error("--seed expects a number from 0 to 18446744073709551614, got '" + s + "'");
    o.seed = v;
  }
  for (const auto& s : a.all("--stop")) {
    if (s.empty()) return a.usage_error("--stop needs a non-empty text");
    o.stop.push_back(s);
  }
  for (const auto& s : a.all("--logit-bias")) {
    size_t eq = s.find('=');
    int32_t id = -1;
    double bias = 0;
    auto r = std::from_chars(s.data(), s.data() + (eq == std::string::npos ? s.size() : eq), id);
    bool ok = eq != std::string::npos && r.ec == std::errc() && r.ptr == s.data() + eq && id >= 0;
    std::string b = ok ? s.substr(eq + 1) : std::string();
    if (ok && (b == "-inf" || b == "-infinity")) {
      bias = -INFINITY;
    } else if (ok) {
      auto rb = std::from_chars(b.data(), b.data() + b.size(), bias);
      ok = !b.empty() && rb.ec == std::errc() && rb.ptr == b.data() + b.size() && std::isfinite(bias);
    }
    if (!ok) return a.usage_error("--logit-bias expects ID=BIAS (a token id and a number, or -inf), got '" + s + "'");
    o.logit_bias.emplace_back(id, static_cast<float>(bias));
  }
  for (const auto& s : a.all("--ban")) {
    std::vector<int32_t> ids;
    std::string err;
    if (!parse_ids(s, ids, err)) return a.usage_error("--ban: " + err);
    o.banned_tokens.insert(o.banned_tokens.end(), ids.begin(), ids.end());
  }
  if (a.has("--grammar") && a.has("--json-schema")) return a.usage_error("give --grammar or --json-schema, not both");
  return true;
}

// Reads --grammar / --json-schema into `o` and checks them before the model loads: kOk, or the
// exit status after printing the error (prefixed with the file name).
inline int read_structured(Args& a, llminfer::GenerateOptions& o) {
  for (const char* flag : {"--grammar", "--json-schema"}) {
    if (!a.has(flag)) continue;
    const std::string path = a.get(flag);
    std::string text, err;
    if (!read_file(path, text, err)) return fail({llminfer::Errc::io, err});
    if (std::string(flag) == "--grammar") {
      if (auto c = llminfer::check_grammar(text); !c) return fail({c.error().code, path + ": " + c.error().message});
      o.grammar = std::move(text);
    } else {
      if (auto g = llminfer::json_schema_to_grammar(text); !g)
        return fail({g.error().code, path + ": " + g.error().message});
      o.json_schema = std::move(text);
    }
  }
  return kOk;
}

// One line for stderr: "[42 tokens, stop: eos | prompt 12 tokens at 340.2 tok/s | ...]".
inline std::string summary_line(const llminfer::GenerateResult& r) {
  using cli::strf;
  std::string s =
      strf("[%zu tokens, stop: %s | prompt %d tokens", r.tokens.size(), llminfer::to_string(r.stop), r.prompt_tokens);
  if (r.prompt_tokens_reused > 0) s += strf(" (%d cached)", r.prompt_tokens_reused);
  if (r.prompt_tokens_evaluated > 0) s += strf(" at %.1f tok/s", r.timings.prefill_tps);
  if (r.tokens.size() > 1) s += strf(" | decode %.1f tok/s", r.timings.decode_tps);
  s += strf(" | first token %.0f ms | load %.0f ms | peak RSS %.1f MiB | seed %llu]", r.timings.ttft_ms,
            r.timings.load_ms, r.peak_rss_mb, static_cast<unsigned long long>(r.seed));
  return s;
}

}  // namespace cli
