// llminfer detokenize -m MODEL --ids 1,2,3 [--skip-special] [--json]
// Token ids -> text, printed exactly (no newline added). The output is always valid UTF-8: bytes that do
// not form valid UTF-8 become U+FFFD (as Hugging Face decodes them). (llminfer::Tokenizer: no
// weights are read.)
#include "cli.hpp"

namespace {

const char* kDetokenizeUsage =
    "usage: llminfer detokenize -m MODEL --ids 1,2,3 [--skip-special] [--json]\n"
    "  -m, --model MODEL  a .gguf file, a model directory, or a folder with tokenizer.json\n"
    "  --ids LIST         token ids separated by commas or spaces (a JSON array works too)\n"
    "  --skip-special     leave out special (control) tokens\n"
    "  --json             print {\"text\":...} (text as a JSON string)\n";

}  // namespace

int cmd_detokenize(int argc, char** argv) {
  cli::Args args(kDetokenizeUsage);
  args.option({"-m", "--model"}, true)
      .option({"--ids"}, true)
      .option({"--skip-special"}, false)
      .option({"--json"}, false);
  if (!args.parse(argc, argv)) return args.exit_code();
  if (!args.positional().empty())
    return args.usage_error("unexpected argument '" + args.positional()[0] + "'"), args.exit_code();
  std::string model = args.get("--model");
  if (model.empty()) return args.usage_error("-m MODEL is required"), args.exit_code();
  if (!args.has("--ids")) return args.usage_error("--ids is required"), args.exit_code();
  auto parsed = llminfer::parse_token_ids(args.get("--ids"), /*allow_empty=*/true);
  if (!parsed) return args.usage_error(parsed.error().message), args.exit_code();
  std::vector<int32_t> ids = std::move(*parsed);

  auto tok = llminfer::Tokenizer::load(model);
  if (!tok) return cli::fail(tok.error());
  for (int32_t id : ids)
    if (id >= tok->n_vocab())
      return cli::fail({llminfer::Errc::invalid_argument,
                        cli::strf("token id %d is out of range (the vocabulary has %d tokens)", id, tok->n_vocab())});
  std::string text = tok->detokenize(ids, args.has("--skip-special"));
  cli::out(args.has("--json") ? "{\"text\":" + cli::json_quote(text) + "}\n" : text);
  return cli::kOk;
}
