// llminfer bench -m MODEL [-t THREADS] [-p 128[,512...]] [-n 64] [-r 3] [-d 0] [-c CTX] [--parallel P] [--json]
// Times what a user waits for, the way llama-bench (and the llama.cpp oracle's `bench`) does, so
// the two can be compared side by side (bench/compare.py):
//   load    Model::load (mapping, parsing, compiling the forward pass)
//   prefill pp<N>: a warm-up, then R runs of N pseudo-random tokens evaluated as one prompt from
//           an empty cache; tokens/s = N / time
//   decode  tg<N>: a warm-up token, then R runs of N single-token evaluations from an empty cache
//   -d D:   each run starts with D tokens already in the cache instead (llama-bench's --n-depth):
//           pp<N>@d<D>, tg<N>@d<D>; the D tokens are evaluated once (in each session), untimed, and
//           each run cuts the cache back to them (Session::truncate_tokens)
//   --parallel P: decode is tg<N>x<P>, P sessions (contexts) decoding N tokens each at the same time
//           from P threads (the library batches them, see LoadOptions::batch); tokens/s is the
//           aggregate, P x N / wall time. --no-batch runs the same without batching.
// Reports the median of the R runs (and every sample), the peak resident memory and the file size.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "cli.hpp"

namespace {

const char* kBenchUsage =
    "usage: llminfer bench -m MODEL [-t THREADS] [-p 128[,512...]] [-n 64] [-r 3] [-d 0] [-c CTX] [--parallel P]\n"
    "                      [--no-batch] [--json]\n"
    "  -m, --model MODEL   a .gguf file, a .safetensors file or a model directory\n"
    "  -p, --prompt N,...  prompt lengths to time (default 128); prefill_tps is the first one\n"
    "  -n, --gen N         tokens to generate one at a time (default 64; 0 skips decode)\n"
    "  -r, --reps N        timed runs of each test after a warm-up (default 3); medians are reported\n"
    "  -d, --depth D       tokens already in the cache when each run starts (default 0): the speed at that\n"
    "                      context length (evaluated once, untimed)\n"
    "  -c, --context N     context size (default 2048, as llama-bench), at least depth + the longest test\n"
    "  -t, --threads N     threads (default: all)\n"
    "  --kv-type f16|f32   KV cache element type (default f16)\n"
    "  --archdef DIR, --no-mmap, --max-program-steps N, --max-session-mb N   as for `llminfer run`\n"
    "  --parallel P        decode with P sessions at once (one thread each); decode_tps is the aggregate\n"
    "  --no-batch          with --parallel: the sessions do not share steps (LoadOptions::batch = 1)\n"
    "  --json              one JSON object: model, threads, depth, prefill_tps, decode_tps, load_ms,\n"
    "                      peak_rss_mb, file_mb, kv_mb, tests:[{name, tokens, median_tps, samples_ms}]\n";

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Test {
  std::string name;
  int tokens = 0;
  std::vector<double> ms;
  double median_tps() const {
    std::vector<double> tps;
    for (double m : ms) tps.push_back(m > 0 ? 1000.0 * tokens / m : 0);
    return median(tps);
  }
};

}  // namespace

int cmd_bench(int argc, char** argv) {
  cli::Args args(kBenchUsage);
  args.common().option({"-m", "--model"}, true).option({"-p", "--prompt"}, true).option({"-n", "--gen"}, true);
  args.option({"-r", "--reps"}, true)
      .option({"-d", "--depth"}, true)
      .option({"--kv-type"}, true)
      .option({"--json"}, false);
  args.option({"--parallel"}, true).option({"--no-batch"}, false);
  if (!args.parse(argc, argv)) return args.exit_code();
  llminfer::LoadOptions lo;
  if (!args.load_options(lo)) return args.exit_code();
  long long n_gen = 64, reps = 3, parallel = 1, depth = 0;
  if (!args.get_int("--gen", n_gen) || !args.get_int("--reps", reps) || !args.get_int("--parallel", parallel) ||
      !args.get_int("--depth", depth))
    return args.exit_code();
  if (depth < 0 || depth > (1 << 20)) {
    args.usage_error("--depth must be 0..1048576");
    return args.exit_code();
  }
  if (parallel < 1 || parallel > 256) {
    args.usage_error("--parallel must be 1..256");
    return args.exit_code();
  }
  if (args.has("--no-batch")) lo.batch = 1;
  std::vector<int> prompts;
  for (const std::string& list : args.all("--prompt")) {
    size_t at = 0;
    while (at <= list.size()) {
      size_t comma = std::min(list.find(',', at), list.size());
      std::string item = list.substr(at, comma - at);
      char* end = nullptr;
      long v = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || !end || *end || v < 1 || v > (1 << 20)) {
        args.usage_error("-p expects positive token counts, got '" + list + "'");
        return args.exit_code();
      }
      prompts.push_back(static_cast<int>(v));
      at = comma + 1;
    }
  }
  if (prompts.empty()) prompts.push_back(128);
  if (n_gen < 0 || n_gen > (1 << 20) || reps < 1 || reps > 1000) {
    args.usage_error("-n must be 0..1048576 and -r 1..1000");
    return args.exit_code();
  }
  std::string kv = args.get("--kv-type", "f16");
  if (kv != "f16" && kv != "f32") {
    args.usage_error("--kv-type must be f16 or f32");
    return args.exit_code();
  }
  lo.kv_type = kv == "f32" ? llminfer::KvType::f32 : llminfer::KvType::f16;
  if (!args.has("--model")) {
    args.usage_error("-m MODEL is required");
    return args.exit_code();
  }
  const int longest = static_cast<int>(depth) +
                      std::max(*std::max_element(prompts.begin(), prompts.end()), static_cast<int>(n_gen) + 1);
  if (lo.context == 0) lo.context = std::max(2048, longest);
  if (lo.context < longest) {
    args.usage_error("--context is smaller than depth + the longest test");
    return args.exit_code();
  }

  double t0 = now_ms();
  auto model = llminfer::Model::load(args.get("--model"), lo);
  if (!model) return cli::fail(model.error());
  const double load_ms = now_ms() - t0;
  const llminfer::ModelInfo info = model->info();
  auto session = model->session();

  // pseudo-random tokens (as llama-bench), BOS first when the model adds one
  const int n_vocab = info.n_vocab;
  uint64_t state = 0x2545F4914F6CDD1Dull;
  auto next_token = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(n_vocab));
  };
  const int32_t bos = info.bos;
  const bool add_bos = bos >= 0 && bos < n_vocab && (info.tokenizer.empty() || info.add_bos);

  auto eval = [&](const std::vector<int32_t>& toks) -> bool {
    auto st = session.eval(toks);
    if (!st) {
      cli::fail(st.error());
      return false;
    }
    return true;
  };
  // --depth: the D tokens every run starts from (BOS first, as a prompt), in each session's cache
  // once; `clear` cuts the cache back to them
  std::vector<int32_t> prefix(static_cast<size_t>(depth));
  for (auto& tk : prefix) tk = next_token();
  if (add_bos && depth > 0) prefix[0] = bos;
  const std::string at_depth = depth > 0 ? "@d" + std::to_string(depth) : "";
  auto fill = [&](llminfer::Session& s) -> bool {
    if (depth == 0) return true;
    auto st = s.truncate_tokens(0);
    if (st) st = s.eval(prefix);
    if (!st) cli::fail(st.error());
    return static_cast<bool>(st);
  };
  if (!fill(session)) return cli::kFailure;
  auto clear = [&] {
    auto st = session.truncate_tokens(static_cast<int>(depth));
    if (!st) cli::fail(st.error());
    return static_cast<bool>(st);
  };
  // the first token of a run: BOS where the model adds one and the cache is empty
  auto first_token = [&] { return add_bos && depth == 0 ? bos : next_token(); };

  std::vector<Test> tests;
  double seqs_per_step = 0;  // --parallel: sequences per shared step, on average (1 without batching)
  for (int p : prompts) {
    Test t{"pp" + std::to_string(p) + at_depth, p, {}};
    std::vector<int32_t> toks(static_cast<size_t>(p));
    for (int rep = -1; rep < reps; rep++) {  // rep -1: the warm-up
      for (auto& tk : toks) tk = next_token();
      toks[0] = first_token();
      if (!clear()) return cli::kFailure;
      double s = now_ms();
      if (!eval(toks)) return cli::kFailure;
      double e = now_ms() - s;
      if (rep >= 0) t.ms.push_back(e);
    }
    tests.push_back(std::move(t));
  }
  if (n_gen > 0 && parallel > 1) {
    // P sessions decoding at once, one thread each; each thread draws its own tokens
    const int P = static_cast<int>(parallel);
    Test t{"tg" + std::to_string(n_gen) + "x" + std::to_string(P) + at_depth, static_cast<int>(n_gen * P), {}};
    std::vector<llminfer::Session> sessions;
    for (int i = 0; i < P; i++) {
      sessions.push_back(model->session());
      if (!fill(sessions.back())) return cli::kFailure;
    }
    std::atomic<bool> failed{false};
    // every session back to its D tokens, before the clock starts (a sliding-window cache that no
    // longer holds them evaluates them again: Session::truncate_tokens)
    auto reset_all = [&] {
      for (auto& s : sessions)
        if (!s.truncate_tokens(static_cast<int>(depth))) failed = true;
    };
    auto run_all = [&](long long n) {
      std::vector<std::thread> th;
      for (int i = 0; i < P; i++)
        th.emplace_back([&, i] {
          uint64_t st = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i + 1);
          llminfer::Session& s = sessions[static_cast<size_t>(i)];
          int32_t tok = add_bos && depth == 0 ? bos : 1;
          for (long long k = 0; k < n && !failed; k++) {
            if (!s.eval(std::span<const int32_t>(&tok, 1))) failed = true;
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            tok = static_cast<int32_t>((st >> 33) % static_cast<uint64_t>(n_vocab));
          }
        });
      for (auto& x : th) x.join();
    };
    reset_all();
    run_all(1);  // warm-up
    const llminfer::BatchStats before = model->batch_stats();
    for (int rep = 0; rep < reps; rep++) {
      reset_all();
      double s = now_ms();
      run_all(n_gen);
      t.ms.push_back(now_ms() - s);
    }
    if (failed) return cli::fail(llminfer::Error{llminfer::Errc::internal, "a parallel decode failed"});
    const llminfer::BatchStats after = model->batch_stats();
    const auto steps = after.steps - before.steps, chunks = after.sequences - before.sequences;
    seqs_per_step = steps ? static_cast<double>(chunks) / static_cast<double>(steps) : 0;
    tests.push_back(std::move(t));
  } else if (n_gen > 0) {
    Test t{"tg" + std::to_string(n_gen) + at_depth, static_cast<int>(n_gen), {}};
    if (!clear() || !eval({first_token()})) return cli::kFailure;  // warm-up
    for (int rep = 0; rep < reps; rep++) {
      if (!clear()) return cli::kFailure;
      double s = now_ms();
      int32_t tok = first_token();
      for (long long k = 0; k < n_gen; k++) {
        if (!eval({tok})) return cli::kFailure;
        tok = next_token();
      }
      t.ms.push_back(now_ms() - s);
    }
    tests.push_back(std::move(t));
  }

  const double rss = llminfer::peak_memory_mb();
  const double file_mb = static_cast<double>(info.file_bytes) / (1024.0 * 1024.0);
  const double kv_mb = static_cast<double>(info.kv_bytes) / (1024.0 * 1024.0);
  const double prefill = tests.front().name[0] == 'p' ? tests.front().median_tps() : 0;
  const double decode = n_gen > 0 ? tests.back().median_tps() : 0;
  const int threads = info.threads;
  if (args.has("--json")) {
    using cli::json_quote;
    std::string o = cli::strf(
        "{\"model\":%s,\"threads\":%d,\"parallel\":%d,\"depth\":%lld,\"prefill_tps\":%.2f,\"decode_tps\":%.2f,\"load_"
        "ms\":%.1f,\"peak_"
        "rss_mb\":%.1f,"
        "\"file_mb\":%.1f,\"kv_mb\":%.1f,\"kv_type\":%s,\"context\":%d,\"simd\":%s,\"seqs_per_step\":%.2f,\"tests\":[",
        json_quote(args.get("--model")).c_str(), threads, static_cast<int>(parallel), depth, prefill, decode, load_ms,
        rss, file_mb, kv_mb, json_quote(kv).c_str(), lo.context, json_quote(info.kernels).c_str(), seqs_per_step);
    for (size_t i = 0; i < tests.size(); i++) {
      o += cli::strf("%s{\"name\":\"%s\",\"tokens\":%d,\"median_tps\":%.2f,\"samples_ms\":[", i ? "," : "",
                     tests[i].name.c_str(), tests[i].tokens, tests[i].median_tps());
      for (size_t k = 0; k < tests[i].ms.size(); k++) o += cli::strf("%s%.3f", k ? "," : "", tests[i].ms[k]);
      o += "]}";
    }
    o += "]}\n";
    cli::out(o);
  } else {
    std::printf("model     %s\nthreads   %d (%s kernels)\nload      %.1f ms\n", args.get("--model").c_str(), threads,
                info.kernels.c_str(), load_ms);
    for (const Test& t : tests)
      std::printf("%-9s %.2f tokens/s (median of %zu)\n", t.name.c_str(), t.median_tps(), t.ms.size());
    if (parallel > 1) std::printf("batching  %.2f sequences per step on average\n", seqs_per_step);
    std::printf("peak RSS  %.1f MiB (file %.1f MiB, KV cache %.1f MiB)\n", rss, file_mb, kv_mb);
  }
  return cli::kOk;
}
