// llminfer template: renders a model's chat template for a conversation, exactly as transformers'
// apply_chat_template would, and prints the prompt (nothing else, no newline added).
// Only the model description is read (no forward pass), so it is fast on big models.
#include "cli.hpp"

namespace {

const char* kTemplateUsage =
    "usage: llminfer template -m MODEL --messages FILE.json [--add-generation-prompt] [--var KEY=VALUE]...\n"
    "                         [--template FILE.jinja] [--json]\n"
    "\n"
    "Prints the prompt the model's chat template renders for the conversation in FILE.json: a JSON\n"
    "array of {\"role\", \"content\", ...} messages, or {\"messages\": [...], \"tools\": [...],\n"
    "\"documents\": [...]}. --var sets a template variable (the value is read as JSON when it parses,\n"
    "else as a string; KEY alone means true), e.g. --var enable_thinking=false.\n"
    "--template renders FILE.jinja instead of the model's template (-m is then optional; the\n"
    "special tokens come from --var bos_token=... and the like).\n"
    "--json prints {\"text\", \"content_spans\" (byte ranges from message content), \"fallback\"}.\n"
    "A model without a template uses the built-in ChatML template (reported by --json).\n"
    "Exit status: 0 success, 1 usage error, 2 model/input/template error (raise_exception included).\n";

}  // namespace

int cmd_template(int argc, char** argv) {
  using namespace llminfer;
  cli::Args args(kTemplateUsage);
  args.option({"-m", "--model"}, true)
      .option({"--messages"}, true)
      .option({"--add-generation-prompt"}, false)
      .option({"--var"}, true)
      .option({"--template"}, true)
      .option({"--json"}, false)
      .common();
  if (!args.parse(argc, argv)) return args.exit_code();
  if (!args.positional().empty()) {
    args.usage_error("unexpected argument '" + args.positional()[0] + "'");
    return args.exit_code();
  }
  std::string model = args.get("--model"), messages_path = args.get("--messages"), tpl_path = args.get("--template");
  if (model.empty() && tpl_path.empty()) {
    args.usage_error("-m MODEL is required");
    return args.exit_code();
  }
  if (messages_path.empty()) {
    args.usage_error("--messages FILE.json is required");
    return args.exit_code();
  }

  llminfer::ChatTemplateOptions opts;
  opts.add_generation_prompt = args.has("--add-generation-prompt");
  opts.messages_name = messages_path;
  std::string text, err;
  if (!cli::read_file(messages_path, text, err)) return cli::fail(Error{Errc::io, err});
  if (!tpl_path.empty() && !cli::read_file(tpl_path, opts.template_source, err)) return cli::fail(Error{Errc::io, err});
  // --var KEY=VALUE (the library reads VALUE as JSON when it parses, else as a string)
  for (const std::string& kv : args.all("--var")) {
    size_t eq = kv.find('=');
    std::string key = kv.substr(0, eq);
    if (key.empty()) {
      args.usage_error("--var expects KEY=VALUE, got '" + kv + "'");
      return args.exit_code();
    }
    opts.variables.emplace_back(key, eq == std::string::npos ? std::string("true") : kv.substr(eq + 1));
  }

  auto r = llminfer::render_chat_template(model, text, opts);
  if (!r) return cli::fail(r.error());
  if (args.has("--json")) {
    std::string o = "{\"text\":" + cli::json_quote(r->text) + ",\"content_spans\":[";
    for (size_t k = 0; k < r->content_spans.size(); k++)
      o += cli::strf("%s[%zu,%zu]", k ? "," : "", r->content_spans[k].first, r->content_spans[k].second);
    o += std::string("],\"fallback\":") + (r->fallback ? "true" : "false") + "}\n";
    cli::out(o);
  } else {
    cli::out(r->text);
  }
  return cli::kOk;
}
