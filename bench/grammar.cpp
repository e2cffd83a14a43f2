// Structured output: the cost of a JSON Schema constraint next to unconstrained decoding, measured
// side by side in one run (the machine is shared: the ratio is what counts, repeated and alternated).
//   build/bench-grammar -m MODEL [--schema FILE] [-n 256] [-r 5] [-t THREADS] [--temp 0.8]
// Each round generates with the schema, then without it for exactly as many tokens (same seed,
// same prompt), alternating which goes first; decode time per token excludes the first token (as
// GenerateResult::timings). Reported besides: the constraint's own work per token (masks, bias,
// feeding the grammar) replayed on the constrained tokens without the model, how many masks were
// computed by walking the vocabulary and what each cost, the same masks computed naively (every
// token's bytes fed to the matcher) for comparison, and the one-time vocabulary prefix tree build.
#define LLMINFER_IMPLEMENTATION
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../llminfer.hpp"

namespace li = llminfer::detail;

namespace {
double cpu_ms() {  // the process's CPU time (all threads): less disturbed by other load than wall time
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}
std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}
}  // namespace

int main(int argc, char** argv) {
  std::string model_path, schema_path = "tests/data/grammar/schemas/ten_fields.json";
  int n = 256, rounds = 5, threads = 0;
  float temp = 0.8f;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "-m") model_path = v;
    else if (a == "--schema") schema_path = v;
    else if (a == "-n") n = std::atoi(v.c_str());
    else if (a == "-r") rounds = std::atoi(v.c_str());
    else if (a == "-t") threads = std::atoi(v.c_str());
    else if (a == "--temp") temp = static_cast<float>(std::atof(v.c_str()));
  }
  if (model_path.empty()) {
    std::fprintf(stderr, "usage: bench-grammar -m MODEL [--schema FILE] [-n 256] [-r 5] [-t THREADS] [--temp 0.8]\n");
    return 1;
  }
  std::ifstream sf(schema_path);
  std::stringstream ss;
  ss << sf.rdbuf();
  const std::string schema = ss.str();
  auto model = llminfer::Model::load(model_path, {.threads = threads});
  if (!model) {
    std::fprintf(stderr, "%s\n", model.error().message.c_str());
    return 1;
  }
  const li::ModelImpl& mi = llminfer::detail::model_impl(*model);
  const std::string prompt = "Describe a user of the system as a JSON object:";

  double t0 = li::now_ms();
  auto trie = li::VocabTrie::build(*mi.tokenizer);
  const double trie_ms = li::now_ms() - t0;

  llminfer::GenerateOptions warm;
  warm.max_tokens = 8;
  warm.json_schema = schema;
  if (auto w = model->generate(prompt, warm); !w) {  // builds the model's prefix tree once
    std::fprintf(stderr, "%s\n", w.error().message.c_str());
    return 1;
  }

  std::vector<double> ms_c, ms_u, ratio, ttft_c, ttft_u, cpu_ratio, share;
  std::vector<int32_t> replay_tokens;
  int eos = 0;
  for (int r = 0; r < rounds; r++) {
    llminfer::GenerateOptions oc, ou;
    oc.temperature = ou.temperature = temp;
    oc.seed = ou.seed = static_cast<uint64_t>(r + 1);
    oc.max_tokens = n;
    oc.json_schema = schema;
    llminfer::Result<llminfer::GenerateResult> rc = llminfer::GenerateResult{}, ru = llminfer::GenerateResult{};
    double cpu_c = 0, cpu_u = 0;
    auto run_c = [&] {
      double a = cpu_ms();
      rc = model->generate(prompt, oc);
      cpu_c = cpu_ms() - a;
    };
    auto run_u = [&] {
      double a = cpu_ms();
      ru = model->generate(prompt, ou);
      cpu_u = cpu_ms() - a;
    };
    if (r % 2 == 0) {
      run_c();
      ou.max_tokens = rc ? static_cast<int>(rc->tokens.size()) : n;
      run_u();
    } else {  // unconstrained first: its length comes from the previous round's constrained run
      ou.max_tokens = static_cast<int>(replay_tokens.empty() ? n : replay_tokens.size());
      run_u();
      run_c();
    }
    if (!rc || !ru) {
      std::fprintf(stderr, "%s\n", (!rc ? rc.error() : ru.error()).message.c_str());
      return 1;
    }
    if (rc->stop == llminfer::StopReason::eos) eos++;
    replay_tokens = rc->tokens;
    double c = rc->timings.decode_ms / static_cast<double>(std::max<size_t>(1, rc->tokens.size() - 1));
    double u = ru->timings.decode_ms / static_cast<double>(std::max<size_t>(1, ru->tokens.size() - 1));
    ms_c.push_back(c);
    ms_u.push_back(u);
    ratio.push_back(c / u);
    ttft_c.push_back(rc->timings.ttft_ms);
    ttft_u.push_back(ru->timings.ttft_ms);
    // CPU time of the whole call per generated token (prompt and setup included, the same prompt)
    const double pc = cpu_c / static_cast<double>(rc->tokens.size()), pu = cpu_u / static_cast<double>(ru->tokens.size());
    cpu_ratio.push_back(pc / pu);
    // the constraint's own time in the same run, against that run's decode time
    share.push_back(rc->timings.constraint_ms / rc->timings.decode_ms);
    std::printf("round %d: constrained %zu tokens (%s) %.2f ms/token | unconstrained %zu tokens %.2f ms/token | ratio %.3f"
                " | CPU ms/token %.2f vs %.2f, ratio %.3f | constraint %.2f%% of decode\n",
                r + 1, rc->tokens.size(), llminfer::to_string(rc->stop), c, ru->tokens.size(), u, c / u, pc, pu, pc / pu,
                100 * share.back());
    std::fflush(stdout);
  }

  // The constraint alone, replayed on the last constrained run's tokens (random logits, no model).
  llminfer::GenerateOptions o;
  o.json_schema = schema;
  t0 = li::now_ms();
  auto con = li::TokenConstraint::create(mi.tokenizer.get(), [&] { return trie; }, o, 0,
                                         static_cast<size_t>(mi.engine->n_vocab()));
  const double create_ms = li::now_ms() - t0;
  if (!con) {
    std::fprintf(stderr, "%s\n", con.error().message.c_str());
    return 1;
  }
  std::vector<float> logits(static_cast<size_t>(mi.engine->n_vocab()));
  li::Rng rng(1);
  for (auto& l : logits) l = static_cast<float>(rng.uniform());
  double work = 0;
  std::vector<int32_t> states_seen;
  for (int32_t id : replay_tokens) {
    double a = li::now_ms();
    auto m = (*con)->apply(logits);
    if (!m) break;
    (void)(*con)->accept(id);
    work += li::now_ms() - a;
  }
  const double work_per_token = work / static_cast<double>(std::max<size_t>(1, replay_tokens.size()));
  const double walk_ms = (*con)->mask_ms() / static_cast<double>(std::max<size_t>(1, (*con)->masks_computed()));

  // Naive masks for comparison: every token's bytes fed to the matcher from the state (transitions
  // already cached), at every state of the same replay (the states the walk computed masks for).
  auto core = li::compile_grammar(*llminfer::json_schema_to_grammar(schema));
  li::GrammarMatcher gm(*core);
  int32_t st = *gm.start();
  double naive = 0;
  int naive_n = 0;
  for (size_t k = 0; k < replay_tokens.size(); k++) {
    {
      double a = li::now_ms();
      size_t allowed = 0;
      for (int32_t id : trie->ids) {
        auto s = gm.feed(st, mi.tokenizer->token_bytes(id));
        allowed += s && *s >= 0;
      }
      naive += li::now_ms() - a;
      naive_n++;
      (void)allowed;
    }
    auto s = gm.feed(st, mi.tokenizer->token_bytes(replay_tokens[k]));
    if (!s || *s < 0) break;
    st = *s;
  }
  const double naive_ms = naive / std::max(1, naive_n);

  const double mc = median(ms_c), mu = median(ms_u), mr = median(ratio);
  std::printf("\nmodel %s, %d threads, CPU %s\n", model_path.c_str(), threads, cpu_model().c_str());
  std::printf("schema %s, %d rounds, temp %.2f, %d of %d constrained runs ended at eos\n", schema_path.c_str(), rounds,
              temp, eos, rounds);
  std::printf("decode ms/token, medians: constrained %.2f, unconstrained %.2f; median ratio %.3f (min %.3f, max %.3f)\n",
              mc, mu, mr, *std::min_element(ratio.begin(), ratio.end()), *std::max_element(ratio.begin(), ratio.end()));
  std::printf("overhead of decode time: side by side %.1f%% (wall, noisy on a shared machine); CPU time per token "
              "(whole call, all threads) median ratio %.3f; the constraint's own time in the constrained runs: "
              "median %.2f%% of their decode time (max %.2f%%)\n",
              (mr - 1) * 100, median(cpu_ratio), 100 * median(share), 100 * *std::max_element(share.begin(), share.end()));
  std::printf("first token ms, medians: constrained %.1f, unconstrained %.1f (schema -> grammar, first mask)\n",
              median(ttft_c), median(ttft_u));
  std::printf("constraint alone (replayed, no model): %.3f ms/token over %zu tokens; create %.1f ms\n", work_per_token,
              replay_tokens.size(), create_ms);
  std::printf("masks computed by the vocabulary walk: %zu, %.2f ms each (the rest from the per-state cache)\n",
              (*con)->masks_computed(), walk_ms);
  std::printf("naive mask (every token's bytes through the matcher, transitions cached): %.2f ms each (%d states)\n",
              naive_ms, naive_n);
  std::printf("vocabulary prefix tree: %zu tokens, %zu nodes, built in %.1f ms (once per model)\n", trie->ids.size(),
              trie->byte.size(), trie_ms);
  std::printf("{\"share\":%.4f,\"cpu_ratio\":%.4f,\"ratio\":%.4f,\"constrained_ms\":%.3f,\"unconstrained_ms\":%.3f,\"constraint_ms_per_token\":%.4f,"
              "\"masks_computed\":%zu,\"walk_ms\":%.3f,\"naive_ms\":%.3f,\"trie_ms\":%.1f}\n",
              median(share), median(cpu_ratio), mr, mc, mu, work_per_token, (*con)->masks_computed(), walk_ms, naive_ms, trie_ms);
  return 0;
}
