// llminfer template: renders a model's chat template for a conversation, exactly as transformers'
// apply_chat_template would, and prints the prompt (nothing else, no newline added).
// Only the model description is read (no forward pass), so it is fast on big models.
#define LLMINFER_IMPLEMENTATION  // uses the chat template interpreter and the loader directly
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

  detail::ChatInput in;
  in.add_generation_prompt = args.has("--add-generation-prompt");
  in.extra.type = detail::Json::Type::object;

  // messages file
  std::string text, err;
  if (!cli::read_file(messages_path, text, err)) return cli::fail(Error{Errc::io, err});
  auto j = detail::json_parse(text, messages_path);
  if (!j) return cli::fail(j.error());
  if (j->is_array()) {
    in.messages = std::move(*j);
  } else if (j->is_object() && (*j)["messages"].is_array()) {
    in.messages = (*j)["messages"];
    if (const detail::Json* t = j->find("tools"); t && !t->is_null()) in.tools = *t;
    if (const detail::Json* d = j->find("documents"); d && !d->is_null()) in.extra.members.emplace_back("documents", *d);
    if (const detail::Json* kw = j->find("kwargs"); kw && kw->is_object())
      for (const auto& kv : kw->members) in.extra.members.emplace_back(kv.first, kv.second);
  } else {
    return cli::fail(Error{Errc::invalid_argument,
                           messages_path + ": expected a JSON array of messages or {\"messages\": [...], \"tools\": [...]}"});
  }
  for (const auto& m : in.messages.items)
    if (!m.is_object()) return cli::fail(Error{Errc::invalid_argument, messages_path + ": every message must be a JSON object"});

  // the template and the special tokens
  detail::ChatTemplateSource src;
  if (!model.empty()) {
    auto desc = detail::load_description(model);
    if (!desc) return cli::fail(desc.error());
    src = detail::chat_template_for(**desc, !in.tools.is_null());
    detail::chat_special_tokens(**desc, in);
  }
  if (!tpl_path.empty()) {
    if (!cli::read_file(tpl_path, src.source, err)) return cli::fail(Error{Errc::io, err});
    src.fallback = false;
  }

  // --var KEY=VALUE (after the model's values, so they override them)
  for (const std::string& kv : args.all("--var")) {
    size_t eq = kv.find('=');
    std::string key = kv.substr(0, eq);
    if (key.empty()) {
      args.usage_error("--var expects KEY=VALUE, got '" + kv + "'");
      return args.exit_code();
    }
    detail::Json value;
    if (eq == std::string::npos) {
      value.type = detail::Json::Type::boolean;
      value.boolean = true;
    } else {
      std::string raw = kv.substr(eq + 1);
      auto parsed = detail::json_parse(raw, "--var");
      if (parsed) {
        value = std::move(*parsed);
      } else {
        value.type = detail::Json::Type::string;
        value.str = raw;
      }
    }
    bool special = false;
    for (auto& st : in.special_tokens)
      if (st.first == key && value.is_string()) {
        st.second = value.str;
        special = true;
      }
    if (special) continue;
    if (key == "tools") {
      in.tools = std::move(value);
      continue;
    }
    bool replaced = false;
    for (auto& m : in.extra.members)
      if (m.first == key) {
        m.second = value;
        replaced = true;
      }
    if (!replaced) in.extra.members.emplace_back(key, std::move(value));
  }

  auto tpl = detail::ChatTemplate::parse(src.source);
  if (!tpl) return cli::fail(tpl.error());
  auto r = tpl->render(in);
  if (!r) return cli::fail(r.error());
  if (args.has("--json")) {
    std::string o = "{\"text\":" + detail::json_quote(r->text) + ",\"content_spans\":[";
    for (size_t k = 0; k < r->content_spans.size(); k++)
      o += detail::strf("%s[%zu,%zu]", k ? "," : "", r->content_spans[k].first, r->content_spans[k].second);
    o += std::string("],\"fallback\":") + (src.fallback ? "true" : "false") + "}\n";
    cli::out(o);
  } else {
    cli::out(r->text);
  }
  return cli::kOk;
}
