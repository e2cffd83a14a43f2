// llminfer compare -m MODEL --ids 1,2,3 --reference FILE.f32 [--json]
// llminfer compare -m MODEL --ids PROMPT --generated 4,5,6 --reference STEPS.f32 [--json]
// The validation report of a model against reference logits (for example from llama.cpp or from
// the model's original implementation) for the same ids: top-1 agreement at every position,
// Pearson correlation of all logits, top-10 overlap, the first position where the top-1 differs, and
// the largest difference of any logit, absolute and relative to the reference's largest |logit|.
// FILE.f32 is float32 little-endian [positions][n_vocab]: every position, or the last only.
// With --generated, the report of a generation: the reference generated those ids after the prompt
// --ids and STEPS.f32 holds the logits each was chosen from ([n_generated][n_vocab], the llama.cpp
// oracle's `generate --out`); we evaluate the prompt, then the reference's ids one at a time through
// the KV cache as generation does, and compare the logits of every generated prefix (position i of
// the report: the choice of generated id i; the first divergence: where our greedy choice leaves it).
// (Model::logits and llminfer::compare_logits.)
#include <cstring>
#include <filesystem>

#include "cli.hpp"

namespace {

// An open regular file and its size (a FIFO or a device is refused: nothing waits for a writer).
struct InputFile {
  FILE* f = nullptr;
  uint64_t size = 0;
  InputFile() = default;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile() {
    if (f) std::fclose(f);
  }
  bool open(const std::string& path, std::string& err) {
    std::error_code ec;
    const auto st = std::filesystem::status(path, ec);
    if (ec) return err = path + ": cannot open: " + ec.message(), false;
    if (!std::filesystem::is_regular_file(st))
      return err = path + (std::filesystem::is_fifo(st)        ? ": is a pipe (FIFO), not a regular file"
                           : std::filesystem::is_directory(st) ? ": is a directory, not a regular file"
                                                               : ": not a regular file"),
             false;
    f = std::fopen(path.c_str(), "rb");
    if (!f) return err = path + ": cannot open: " + std::strerror(errno), false;
    size = std::filesystem::file_size(path, ec);
    if (ec) return err = path + ": cannot stat: " + ec.message(), false;
    return true;
  }
  bool read(void* dst, size_t bytes, const std::string& path, std::string& err) {
    if (std::fread(dst, 1, bytes, f) == bytes) return true;
    err = std::ferror(f) ? path + ": cannot read: " + std::strerror(errno)
                         : path + ": the file ended early (it changed while it was read)";
    return false;
  }
};

const char* kCompareUsage =
    "usage: llminfer compare -m MODEL --ids 1,2,3 [--generated 4,5,6] --reference FILE.f32 [--json]\n"
    "  -m, --model MODEL   a .gguf file, a .safetensors file or a model directory\n"
    "  --ids LIST          the token ids the reference was computed for (with --generated: the prompt)\n"
    "  --reference FILE    float32 little-endian [positions][n_vocab], every position or the last one;\n"
    "                      with --generated, one row per generated id: the logits it was chosen from\n"
    "  --generated LIST    the ids the reference generated after --ids: compare every generated\n"
    "                      prefix, evaluated one token at a time as in generation\n"
    "  --json              machine-readable report\n"
    "  --kv-type f16|f32   KV cache element type (default f32: the tightest comparison, as the\n"
    "                      llama.cpp oracle's --precise; f16 is the library's default)\n"
    "  -t, --threads N     threads (default: all)\n"
    "  --archdef DIR       architecture definitions that override the built-ins\n"
    "  --no-mmap           read the weights into memory instead of mapping the file\n"
    "  --max-program-steps N  refuse a definition compiled into more than N steps (default 1000000)\n"
    "  --max-session-mb N  refuse a context whose KV cache and scratch need more than N MiB\n"
    "                      (default: the machine's physical memory)\n";
// The logits each generated id was chosen from: the prompt as one batch, then the generated ids one
// at a time (the last one is not evaluated: nothing was chosen after it).
llminfer::Result<std::vector<float>> generation_logits(const llminfer::Model& model, const std::vector<int32_t>& prompt,
                                                       const std::vector<int32_t>& gen) {
  llminfer::Session s = model.session();
  std::vector<float> out;
  for (size_t i = 0; i < gen.size(); i++) {
    auto r = i == 0 ? s.eval(prompt) : s.eval(std::span<const int32_t>(&gen[i - 1], 1));
    if (!r) return r.error();
    out.insert(out.end(), s.logits().begin(), s.logits().end());
  }
  return out;
}

}  // namespace

int cmd_compare(int argc, char** argv) {
  cli::Args args(kCompareUsage);
  args.common().option({"-m", "--model"}, true).option({"--ids"}, true).option({"--reference"}, true);
  args.option({"--json"}, false).option({"--kv-type"}, true).option({"--generated"}, true);
  if (!args.parse(argc, argv)) return args.exit_code();
  llminfer::LoadOptions lo;
  if (!args.load_options(lo)) return args.exit_code();
  std::string kv = args.get("--kv-type", "f32");
  if (!args.kv_type(lo, "f32")) return args.exit_code();
  if (!args.has("--model") || !args.has("--ids") || !args.has("--reference")) {
    args.usage_error("-m MODEL, --ids and --reference are required");
    return args.exit_code();
  }
  std::vector<int32_t> ids;
  if (std::string err; !cli::parse_ids(args.get("--ids"), ids, err)) {
    args.usage_error(err);
    return args.exit_code();
  }
  std::vector<int32_t> gen;
  if (std::string err; args.has("--generated") && !cli::parse_ids(args.get("--generated"), gen, err)) {
    args.usage_error(err);
    return args.exit_code();
  }
  if (args.has("--generated") && (ids.empty() || gen.empty())) {
    args.usage_error("--generated needs a prompt (--ids) and at least one generated id");
    return args.exit_code();
  }
  std::string ref_path = args.get("--reference");
  InputFile ref;
  std::string err;
  if (!ref.open(ref_path, err)) return cli::fail(llminfer::Error{llminfer::Errc::io, err});
  auto model = llminfer::Model::load(args.get("--model"), lo);
  if (!model) return cli::fail(model.error());
  const llminfer::ModelInfo info = model->info();
  const int nv = info.n_vocab;
  const uint64_t row_bytes = uint64_t(nv) * 4;
  const int n = static_cast<int>(gen.empty() ? ids.size() : gen.size());
  if (!gen.empty() && ref.size != uint64_t(n) * row_bytes)
    return cli::fail(llminfer::Error{llminfer::Errc::bad_format,
                                     cli::strf("%s: %llu bytes is not %d generated positions of %d float32 logits",
                                               ref_path.c_str(), static_cast<unsigned long long>(ref.size), n, nv)});
  if (ref.size == 0 || ref.size % row_bytes != 0 || (ref.size / row_bytes != 1 && ref.size / row_bytes != uint64_t(n)))
    return cli::fail(llminfer::Error{llminfer::Errc::bad_format,
                                     cli::strf("%s: %llu bytes is neither 1 nor %d positions of %d float32 logits",
                                               ref_path.c_str(), static_cast<unsigned long long>(ref.size), n, nv)});
  const int rows = static_cast<int>(ref.size / row_bytes);
  auto logits = gen.empty() ? model->logits(ids, rows > 1) : generation_logits(*model, ids, gen);
  if (!logits) return cli::fail(logits.error());
  std::vector<float> refv(static_cast<size_t>(rows) * nv);
  if (!ref.read(refv.data(), refv.size() * 4, ref_path, err))
    return cli::fail(llminfer::Error{llminfer::Errc::io, err});
  auto cmp = llminfer::compare_logits(*logits, refv, nv);
  if (!cmp) return cli::fail(cmp.error());
  const llminfer::LogitsComparison& r = *cmp;
  int status = cli::kOk;
  if (r.nonfinite_ours || r.nonfinite_ref) {  // never a match, and an error: such logits mean nothing
    std::fprintf(stderr,
                 "error: %s%s%s holds values that are not finite (NaN or infinite): %llu in ours, %llu in the "
                 "reference; first at position %d, id %d\n",
                 r.nonfinite_ours ? args.get("--model").c_str() : "",
                 r.nonfinite_ours && r.nonfinite_ref ? " and " : "", r.nonfinite_ref ? ref_path.c_str() : "",
                 static_cast<unsigned long long>(r.nonfinite_ours), static_cast<unsigned long long>(r.nonfinite_ref),
                 r.first_nonfinite_pos, r.first_nonfinite_id);
    status = cli::kFailure;
  }
  if (args.has("--json")) {
    cli::out(cli::strf(
        "{\"positions\":%d,\"top1_match_all\":%s,\"top1_matches\":%d,\"pearson_mean\":%s,\"pearson_min\":%s,"
        "\"top10_overlap_mean\":%s,\"first_divergence\":%d,\"nonfinite_ours\":%llu,"
        "\"nonfinite_reference\":%llu,\"max_abs_diff\":%s,\"max_rel_diff\":%s}\n",
        r.positions, r.top1_match_all ? "true" : "false", r.top1_matches, cli::json_number(r.pearson_mean).c_str(),
        cli::json_number(r.pearson_min).c_str(), cli::json_number(r.top10_overlap_mean).c_str(), r.first_divergence,
        static_cast<unsigned long long>(r.nonfinite_ours), static_cast<unsigned long long>(r.nonfinite_ref),
        cli::json_number(r.max_abs_diff).c_str(), cli::json_number(r.max_rel_diff).c_str()));
  } else {
    std::printf("model       %s (%s, %s)\n", args.get("--model").c_str(), info.architecture.c_str(), kv.c_str());
    std::printf("reference   %s (%d %sposition%s x %d)\n", ref_path.c_str(), rows, gen.empty() ? "" : "generated ",
                rows == 1 ? "" : "s", nv);
    std::printf("top-1       %d / %d positions agree%s\n", r.top1_matches, r.positions,
                r.top1_match_all ? "" : " (MISMATCH)");
    std::printf("pearson     mean %.7f, min %.7f\n", r.pearson_mean, r.pearson_min);
    std::printf("top-10      mean overlap %.2f / 10\n", r.top10_overlap_mean);
    std::printf("max diff    %.3g absolute, %.3g relative to the reference's largest |logit| (%.4g)\n", r.max_abs_diff,
                r.max_rel_diff, r.ref_max_abs);
    if (r.first_divergence >= 0)
      std::printf("first divergence at position %d\n", r.first_divergence);
    else
      std::printf("no divergence\n");
  }
  return status;
}
