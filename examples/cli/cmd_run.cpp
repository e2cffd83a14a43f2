// llminfer run: generate text from a prompt (or token ids), streamed to stdout as it is decided,
// with a one-line summary on stderr; --json prints one JSON object instead.
#include <atomic>
#include <csignal>

#include "cli.hpp"
#include "sampling.hpp"

namespace {

std::string run_usage() {
  return std::string(
             "usage: llminfer run -m MODEL (-p TEXT | -f FILE | --ids 1,2,3) [options]\n"
             "Generates a continuation of the prompt and streams it to stdout; a summary goes to stderr.\n"
             "  -m, --model MODEL       a .gguf file, a .safetensors file or a Hugging Face / MLX directory\n"
             "  -p, --prompt TEXT       the prompt (plain text: the model's BOS is added)\n"
             "  -f, --file FILE         read the prompt from FILE\n"
             "  --ids 1,2,3             the prompt as token ids, used exactly as given\n"
             "  --special               special-token text in the prompt (e.g. <|im_start|>) becomes control\n"
             "                          tokens; without it such text is plain text\n"
             "  --chat                  wrap the prompt in the model's chat template (as a user message)\n"
             "  --system TEXT           with --chat: a system message first\n"
             "  --echo                  print the prompt before the generated text\n"
             "  --json                  print "
             "{\"text\",\"tokens\",\"stop\",\"prompt_tokens\",\"timings\",\"peak_rss_mb\",\n"
             "                          \"seed\",\"seed_str\",\"kv_bytes\",...} instead of streaming (greedy unless "
             "--temp)\n"
             "  --kv-type f16|f32       KV cache element type (default f16)\n") +
         cli::kSamplingHelp +
         "common:\n"
         "  -t, --threads N         threads (default: all hardware threads)\n"
         "  -c, --context N         context size in tokens (default: min(trained context, 4096))\n"
         "  --archdef DIR           directory of <arch>.archdef files overriding the built-ins\n"
         "  --no-mmap               read the weights into memory instead of mapping the file\n"
         "  --max-program-steps N   refuse a definition compiled into more than N steps (default 1000000)\n"
         "  --max-session-mb N      refuse a context whose KV cache and scratch need more than N MiB\n"
         "                          (default: the machine's physical memory)\n"
         "Ctrl-C stops the generation (the summary is still printed). Exit status: 0 success (whatever the\n"
         "stop reason), 1 usage error, 2 model or input error.\n";
}

std::atomic<bool> g_run_cancel{false};
extern "C" void run_on_sigint(int) {
  g_run_cancel.store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the program
}

std::string result_json(const llminfer::GenerateResult& r) {
  std::string s = "{\"text\":" + cli::json_quote(r.text) + ",\"tokens\":[";
  for (size_t i = 0; i < r.tokens.size(); i++) s += (i ? "," : "") + std::to_string(r.tokens[i]);
  s += "],\"stop\":" + cli::json_quote(llminfer::to_string(r.stop));
  s += ",\"prompt_tokens\":" + std::to_string(r.prompt_tokens);
  s += ",\"prompt_tokens_evaluated\":" + std::to_string(r.prompt_tokens_evaluated);
  s += ",\"timings\":{\"load_ms\":" + cli::json_number(r.timings.load_ms) +
       ",\"prefill_ms\":" + cli::json_number(r.timings.prefill_ms) +
       ",\"prefill_tps\":" + cli::json_number(r.timings.prefill_tps) +
       ",\"decode_ms\":" + cli::json_number(r.timings.decode_ms) +
       ",\"decode_tps\":" + cli::json_number(r.timings.decode_tps) +
       ",\"ttft_ms\":" + cli::json_number(r.timings.ttft_ms) +
       ",\"constraint_ms\":" + cli::json_number(r.timings.constraint_ms) + "}";
  s += ",\"peak_rss_mb\":" + cli::json_number(r.peak_rss_mb);
  s += ",\"kv_bytes\":" + std::to_string(r.kv_bytes);
  // the seed also as a string: JSON readers keep integers only up to 2^53 exactly
  s += ",\"seed\":" + std::to_string(r.seed) + ",\"seed_str\":\"" + std::to_string(r.seed) + "\"";
  if (r.stop == llminfer::StopReason::error || r.error.code != llminfer::Errc::ok)
    s += ",\"error\":" + cli::json_quote(r.error.message);
  return s + "}";
}
}  // namespace

int cmd_run(int argc, char** argv) {
  cli::Args a(run_usage());
  a.option({"-m", "--model"}, true)
      .option({"-p", "--prompt"}, true)
      .option({"-f", "--file"}, true)
      .option({"--ids"}, true)
      .option({"--special"}, false)
      .option({"--chat"}, false)
      .option({"--system"}, true)
      .option({"--echo"}, false)
      .option({"--json"}, false)
      .option({"--kv-type"}, true)
      .common();
  cli::add_sampling_options(a);
  if (!a.parse(argc, argv)) return a.exit_code();
  if (!a.positional().empty()) return (a.usage_error("unexpected argument '" + a.positional()[0] + "'"), a.exit_code());
  if (!a.has("--model")) return (a.usage_error("-m MODEL is required"), a.exit_code());
  int sources = a.has("--prompt") + a.has("--file") + a.has("--ids");
  if (sources != 1) return (a.usage_error("give exactly one of -p TEXT, -f FILE or --ids 1,2,3"), a.exit_code());
  if (a.has("--ids") && a.has("--chat")) return (a.usage_error("--chat needs a text prompt, not --ids"), a.exit_code());
  if (a.has("--system") && !a.has("--chat")) return (a.usage_error("--system needs --chat"), a.exit_code());
  const bool json = a.has("--json");

  llminfer::GenerateOptions o;
  if (!cli::read_sampling(a, o, json)) return a.exit_code();
  if (int st = cli::read_structured(a, o); st != cli::kOk) return st;
  o.chat = a.has("--chat");
  o.parse_special = a.has("--special");
  o.system = a.get("--system");
  std::vector<int32_t> ids;
  std::string prompt = a.get("--prompt");
  if (a.has("--ids")) {
    std::string perr;
    if (!cli::parse_ids(a.get("--ids"), ids, perr)) return (a.usage_error("--ids: " + perr), a.exit_code());
  }
  std::string err;
  if (a.has("--file") && !cli::read_file(a.get("--file"), prompt, err)) return cli::fail({llminfer::Errc::io, err});
  llminfer::LoadOptions lo;
  if (!a.load_options(lo) || !a.kv_type(lo)) return a.exit_code();

  auto model = llminfer::Model::load(a.get("--model"), lo);
  if (!model) return cli::fail(model.error());

  if (!json) {
    if (a.has("--echo")) {
      cli::out(ids.empty() ? prompt : model->detokenize(ids));
      std::fflush(stdout);
    }
    o.on_token = [](std::string_view piece) {
      cli::out(piece);
      std::fflush(stdout);
      return true;
    };
  }
  o.cancel = &g_run_cancel;
  std::signal(SIGINT, run_on_sigint);
  auto r = ids.empty() ? model->generate(prompt, o) : model->generate(std::span<const int32_t>(ids), o);
  std::signal(SIGINT, SIG_DFL);
  if (!r) return cli::fail(r.error());
  if (json) {
    cli::out(result_json(*r) + "\n");
  } else {
    cli::out("\n");
    std::fflush(stdout);
    std::fprintf(stderr, "%s\n", cli::summary_line(*r).c_str());
  }
  if (r->stop == llminfer::StopReason::error ||
      (r->stop == llminfer::StopReason::context_full && r->error.code != llminfer::Errc::ok)) {
    std::fprintf(stderr, "error: %s\n", r->error.message.c_str());  // the prompt does not fit the context
    return cli::kFailure;
  }
  return cli::kOk;
}
