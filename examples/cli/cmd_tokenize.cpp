// llminfer tokenize -m MODEL (--text S | --file F) [--special] [--no-bos] [--json]
// llminfer tokenize -m MODEL --jsonl FILE [--special] [--no-bos]
// Text -> token ids with the model's own tokenizer. Only the model description and the tokenizer are
// built (no weights are touched), so this is fast even for large models.
#define LLMINFER_IMPLEMENTATION  // uses the tokenizer directly (all functions are inline)
#include "cli.hpp"

#include <string>

namespace {
using namespace llminfer::detail;

const char* kTokenizeUsage =
    "usage: llminfer tokenize -m MODEL (--text S | --file F) [--special] [--no-bos] [--json]\n"
    "       llminfer tokenize -m MODEL --jsonl FILE [--special] [--no-bos]\n"
    "  -m, --model MODEL  a .gguf file, a model directory, or a folder with tokenizer.json\n"
    "  --text S           the text to tokenize (exactly as given)\n"
    "  --file F           read the text from F, byte for byte ('-': standard input)\n"
    "  --jsonl FILE       one {\"id\":..., \"text\":...} per line; prints one {\"id\":..., \"ids\":[...]} per line\n"
    "  --special          special-token text in the input becomes control tokens\n"
    "  --no-bos           do not add the BOS/EOS the model would add\n"
    "  --json             print {\"ids\":[...]} instead of space-separated ids\n";

// A JSON value printed back compactly (for the "id" of --jsonl lines).
std::string dump(const Json& j) {
  switch (j.type) {
    case Json::Type::null: return "null";
    case Json::Type::boolean: return j.boolean ? "true" : "false";
    case Json::Type::number: return j.str;
    case Json::Type::string: return json_quote(j.str);
    case Json::Type::array: {
      std::string s = "[";
      for (size_t k = 0; k < j.items.size(); k++) s += (k ? "," : "") + dump(j.items[k]);
      return s + "]";
    }
    case Json::Type::object: {
      std::string s = "{";
      for (size_t k = 0; k < j.members.size(); k++)
        s += (k ? "," : "") + json_quote(j.members[k].first) + ":" + dump(j.members[k].second);
      return s + "}";
    }
  }
  return "null";
}

std::string ids_json(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t k = 0; k < ids.size(); k++) s += (k ? "," : "") + std::to_string(ids[k]);
  return s + "]";
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  cli::Args args(kTokenizeUsage);
  args.option({"-m", "--model"}, true)
      .option({"--text"}, true)
      .option({"--file"}, true)
      .option({"--jsonl"}, true)
      .option({"--special"}, false)
      .option({"--no-bos"}, false)
      .option({"--json"}, false);
  if (!args.parse(argc, argv)) return args.exit_code();
  if (!args.positional().empty()) return args.usage_error("unexpected argument '" + args.positional()[0] + "'"), args.exit_code();
  std::string model = args.get("--model");
  if (model.empty()) return args.usage_error("-m MODEL is required"), args.exit_code();
  int sources = int(args.has("--text")) + int(args.has("--file")) + int(args.has("--jsonl"));
  if (sources != 1) return args.usage_error("give exactly one of --text, --file, --jsonl"), args.exit_code();
  bool special = args.has("--special"), add_special = !args.has("--no-bos");

  std::string text, err;
  if (args.has("--file") && !cli::read_file(args.get("--file"), text, err)) return cli::fail({llminfer::Errc::io, err});
  if (args.has("--jsonl") && !cli::read_file(args.get("--jsonl"), text, err)) return cli::fail({llminfer::Errc::io, err});
  if (args.has("--text")) text = args.get("--text");

  auto desc = load_description(model);
  if (!desc && is_directory(model) && file_exists(path_join(model, "tokenizer.json")))
    desc = tokenizer_description(model);  // a folder with only the tokenizer files
  if (!desc) return cli::fail(desc.error());
  auto tok = Tokenizer::build(**desc);
  if (!tok) return cli::fail(tok.error());

  if (!args.has("--jsonl")) {
    auto ids = (*tok)->encode(text, add_special, special);
    if (!ids) {
      llminfer::Error e = ids.error();
      if (args.has("--file")) e.message = args.get("--file") + ": " + e.message;  // which input
      return cli::fail(e);
    }
    if (args.has("--json")) {
      cli::out("{\"ids\":" + ids_json(*ids) + "}\n");
    } else {
      std::string s;
      for (size_t k = 0; k < ids->size(); k++) s += (k ? " " : "") + std::to_string((*ids)[k]);
      cli::out(s + "\n");
    }
    return cli::kOk;
  }
  // --jsonl: validate every line before printing anything
  std::string out;
  size_t line_no = 0, pos = 0;
  const std::string path = args.get("--jsonl");
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line(text.data() + pos, (nl == std::string::npos ? text.size() : nl) - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    line_no++;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    auto j = json_parse(line, strf("%s line %zu", path.c_str(), line_no));
    if (!j) return cli::fail(j.error());
    const Json* t = j->find("text");
    if (!j->is_object() || !t || !t->is_string())
      return cli::fail({llminfer::Errc::invalid_argument,
                        strf("%s line %zu: expected an object with a string \"text\"", path.c_str(), line_no)});
    auto ids = (*tok)->encode(t->str, add_special, special);
    if (!ids) return cli::fail({ids.error().code, strf("%s line %zu: %s", path.c_str(), line_no, ids.error().message.c_str())});
    out += "{\"id\":" + dump((*j)["id"]) + ",\"ids\":" + ids_json(*ids) + "}\n";
  }
  cli::out(out);
  return cli::kOk;
}
