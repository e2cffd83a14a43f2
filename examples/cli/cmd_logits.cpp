// llminfer logits -m MODEL --ids 1,2,3 [--all] --out FILE.f32 [--json]
// Evaluates the ids as one sequence (positions 0..n-1) and writes the raw logits as float32
// little-endian [positions][n_vocab]: the last position, or every position with --all (the layout
// of the llama.cpp oracle's `logits --out`). (Model::logits, llminfer::top_k_ids, logsumexp.)
#include "cli.hpp"

namespace {

const char* kLogitsUsage =
    "usage: llminfer logits -m MODEL --ids 1,2,3 [--all] --out FILE.f32 [--json]\n"
    "  -m, --model MODEL   a .gguf file, a .safetensors file or a model directory\n"
    "  --ids LIST          token ids, comma separated (no tokenizer involved)\n"
    "  --all               every position's logits (default: the last position only)\n"
    "  --out FILE          where to write float32 little-endian [positions][n_vocab]\n"
    "  --json              print a summary per position (argmax, logsumexp, top 10) as JSON\n"
    "  --kv-type f16|f32   KV cache element type (default f32: the tightest comparison, as the\n"
    "                      llama.cpp oracle's --precise; f16 is the library's default)\n"
    "  -t, --threads N     threads (default: all)\n"
    "  --archdef DIR       architecture definitions that override the built-ins\n"
    "  --no-mmap           read the weights into memory instead of mapping the file\n"
    "  --max-program-steps N  refuse a definition compiled into more than N steps (default 1000000)\n"
    "  --max-session-mb N  refuse a context whose KV cache and scratch need more than N MiB\n"
    "                      (default: the machine's physical memory)\n";
}  // namespace

int cmd_logits(int argc, char** argv) {
  cli::Args args(kLogitsUsage);
  args.common().option({"-m", "--model"}, true).option({"--ids"}, true).option({"--all"}, false);
  args.option({"--out"}, true).option({"--json"}, false).option({"--kv-type"}, true);
  if (!args.parse(argc, argv)) return args.exit_code();
  llminfer::LoadOptions lo;
  if (!args.load_options(lo)) return args.exit_code();
  std::string kv = args.get("--kv-type", "f32");
  if (!args.kv_type(lo, "f32")) return args.exit_code();
  if (!args.has("--model") || !args.has("--ids") || !args.has("--out")) {
    args.usage_error("-m MODEL, --ids and --out are required");
    return args.exit_code();
  }
  std::vector<int32_t> ids;
  if (std::string err; !cli::parse_ids(args.get("--ids"), ids, err)) {
    args.usage_error(err);
    return args.exit_code();
  }
  auto model = llminfer::Model::load(args.get("--model"), lo);
  if (!model) return cli::fail(model.error());
  const llminfer::ModelInfo info = model->info();
  bool all = args.has("--all");
  auto logits = model->logits(ids, all);
  if (!logits) return cli::fail(logits.error());
  std::string out = args.get("--out");
  std::string werr;
  if (!cli::write_file(out, logits->data(), logits->size() * 4, werr))
    return cli::fail(llminfer::Error{llminfer::Errc::io, werr});
  const int nv = info.n_vocab;
  const int rows = static_cast<int>(logits->size() / static_cast<size_t>(nv));
  const int n = static_cast<int>(ids.size());
  if (args.has("--json")) {
    std::string s = cli::strf(
        "{\"model\":%s,\"architecture\":%s,\"n_vocab\":%d,\"n_tokens\":%d,\"n_positions\":%d,\"out\":%s,"
        "\"kv_type\":%s,\"positions\":[",
        cli::json_quote(args.get("--model")).c_str(), cli::json_quote(info.architecture).c_str(), nv, n, rows,
        cli::json_quote(out).c_str(), cli::json_quote(kv).c_str());
    for (int r = 0; r < rows; r++) {
      const std::span<const float> x(logits->data() + size_t(r) * nv, static_cast<size_t>(nv));
      int pos = all ? r : n - 1;
      auto top = llminfer::top_k_ids(x, 10);
      s += cli::strf("%s{\"pos\":%d,\"token\":%d,\"argmax\":%d,\"logsumexp\":%s,\"top\":[", r ? "," : "", pos,
                     ids[static_cast<size_t>(pos)], top[0], cli::json_number(llminfer::logsumexp(x)).c_str());
      for (size_t k = 0; k < top.size(); k++)
        s += cli::strf("%s[%d,%s]", k ? "," : "", top[k], cli::json_number(x[top[k]]).c_str());
      s += "]}";
    }
    cli::out(s + "]}\n");
  } else {
    std::printf("wrote %d position%s x %d logits to %s\n", rows, rows == 1 ? "" : "s", nv, out.c_str());
  }
  return cli::kOk;
}
