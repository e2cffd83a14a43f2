// llminfer info FILE_OR_DIR [--json] [--all]
// Architecture, hyperparameters, parameter count, tensor types, file size, tokenizer, chat template;
// --all adds every metadata key (long arrays abbreviated) and every tensor.
// (llminfer::inspect_model_file: the file is described without loading the model.)
#include "cli.hpp"

namespace {

const char* kInfoUsage =
    "usage: llminfer info FILE_OR_DIR [--json] [--all]\n"
    "  FILE_OR_DIR  a .gguf file, a .safetensors file, or a Hugging Face / MLX model directory\n"
    "  --json       machine-readable output (stable keys, see README)\n"
    "  --all        also every metadata key and every tensor\n";

constexpr uint64_t kArrayPreview = 8;  // arrays longer than this are abbreviated by --all

// A metadata value as JSON (long arrays come abbreviated from the library).
std::string value_json(const llminfer::MetadataEntry& e) {
  return e.type == "string" ? cli::json_quote(e.value) : e.value;
}

std::string info_json(const llminfer::ModelFileInfo& m, bool all) {
  std::string s = "{";
  s += "\"path\":" + cli::json_quote(m.path);
  s += ",\"format\":" + cli::json_quote(m.format);
  s += ",\"architecture\":" + cli::json_quote(m.architecture);
  s += ",\"name\":" + cli::json_quote(m.name);
  s += ",\"file_bytes\":" + std::to_string(m.file_bytes);
  s += ",\"n_params\":" + std::to_string(m.n_params);
  s += ",\"n_tensors\":" + std::to_string(m.n_tensors);
  s += ",\"tensor_bytes\":" + std::to_string(m.tensor_bytes);
  s += ",\"tensor_types\":{";
  for (size_t k = 0; k < m.tensor_types.size(); k++)
    s += (k ? "," : "") + cli::json_quote(m.tensor_types[k].first) + ":" + std::to_string(m.tensor_types[k].second);
  s += "}";
  s += cli::strf(
      ",\"hparams\":{\"n_layer\":%lld,\"n_embd\":%lld,\"n_head\":%lld,\"n_head_kv\":%lld,\"n_ff\":%lld,"
      "\"n_ctx_train\":%lld,\"head_dim\":%lld,\"rope_freq_base\":%s}",
      static_cast<long long>(m.n_layer), static_cast<long long>(m.n_embd), static_cast<long long>(m.n_head),
      static_cast<long long>(m.n_head_kv), static_cast<long long>(m.n_ff), static_cast<long long>(m.n_ctx_train),
      static_cast<long long>(m.head_dim), cli::json_number(m.rope_freq_base).c_str());
  s += ",\"tokenizer\":{\"model\":" + cli::json_quote(m.tokenizer) + ",\"pre\":" + cli::json_quote(m.tokenizer_pre) +
       ",\"n_vocab\":" + std::to_string(m.n_vocab) + ",\"bos\":" + std::to_string(m.bos) +
       ",\"eos\":" + std::to_string(m.eos) + ",\"eos_ids\":[";
  for (size_t k = 0; k < m.eos_ids.size(); k++) s += (k ? "," : "") + std::to_string(m.eos_ids[k]);
  s += "]}";
  s += std::string(",\"chat_template\":") + (m.chat_template ? "true" : "false");
  if (all) {
    // GGUF: {key: value, ...}; safetensors: {"config.json": {...}, "generation_config.json": {...},
    // "__metadata__": {...}}, each object holding its file's members
    s += ",\"metadata\":{";
    const bool gguf = m.format == "gguf";
    if (!gguf) s += "\"config.json\":{";
    std::string source = "config.json";
    bool first = true;
    for (const auto& e : m.metadata) {
      if (!gguf && e.source != source) {
        s += "}," + cli::json_quote(e.source) + ":{";
        source = e.source;
        first = true;
      }
      s += (first ? "" : ",") + cli::json_quote(e.key) + ":" + value_json(e);
      first = false;
    }
    if (!gguf) s += "}";
    s += "},\"tensors\":[";
    for (size_t k = 0; k < m.tensors.size(); k++) {
      const llminfer::TensorInfo& t = m.tensors[k];
      s += (k ? "," : "") + std::string("{\"name\":") + cli::json_quote(t.name) +
           ",\"type\":" + cli::json_quote(t.type) + ",\"shape\":[";
      for (size_t d = 0; d < t.shape.size(); d++) s += (d ? "," : "") + std::to_string(t.shape[d]);
      s += "],\"offset\":" + std::to_string(t.offset) + ",\"bytes\":" + std::to_string(t.bytes) + "}";
    }
    s += "]";
  }
  return s + "}\n";
}

// A metadata value for the text output: long strings cut at 200 bytes, arrays led by their type
// and length.
std::string value_text(const llminfer::MetadataEntry& e) {
  if (e.source.empty() && e.type == "string") {
    std::string_view s = e.value;
    return cli::json_quote(s.size() > 200 ? s.substr(0, 200) : s) +
           (s.size() > 200 ? cli::strf(" ... (%zu bytes)", s.size()) : "");
  }
  if (e.type == "array")
    return cli::strf("%s[%llu] ", e.element_type.c_str(), static_cast<unsigned long long>(e.length)) + e.value;
  return value_json(e);
}

// "[a, b]"
std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t k = 0; k < shape.size(); k++) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

std::string info_text(const llminfer::ModelFileInfo& m, bool all) {
  std::string s;
  s += cli::strf("file          %s (%s, %s)\n", cli::term_safe(m.path).c_str(), m.format.c_str(),
                 cli::human_bytes(m.file_bytes).c_str());
  s += cli::strf("architecture  %s%s%s\n", cli::term_safe(m.architecture).c_str(),
                 m.name.empty() ? "" : "  name: ", cli::term_safe(m.name).c_str());
  s += cli::strf("parameters    %.2f M in %llu tensors (%s of tensor data)\n", static_cast<double>(m.n_params) / 1e6,
                 static_cast<unsigned long long>(m.n_tensors), cli::human_bytes(m.tensor_bytes).c_str());
  s += "tensor types ";
  for (const auto& [name, n] : m.tensor_types)
    s += cli::strf(" %s:%llu", name.c_str(), static_cast<unsigned long long>(n));
  s += "\n";
  s += cli::strf("layers %lld, embedding %lld, heads %lld (kv %lld, dim %lld), ffn %lld, context %lld, rope base %g\n",
                 static_cast<long long>(m.n_layer), static_cast<long long>(m.n_embd), static_cast<long long>(m.n_head),
                 static_cast<long long>(m.n_head_kv), static_cast<long long>(m.head_dim),
                 static_cast<long long>(m.n_ff), static_cast<long long>(m.n_ctx_train), m.rope_freq_base);
  s += cli::strf("tokenizer     %s%s%s, %lld tokens, bos %d, eos %d\n",
                 m.tokenizer.empty() ? "(none)" : cli::term_safe(m.tokenizer).c_str(),
                 m.tokenizer_pre.empty() ? "" : " / ", cli::term_safe(m.tokenizer_pre).c_str(),
                 static_cast<long long>(m.n_vocab), m.bos, m.eos);
  s += cli::strf("chat template %s\n", m.chat_template ? "yes" : "no");
  if (all) {
    s += "\nmetadata:\n";
    for (const auto& e : m.metadata) {
      // safetensors: config.json's members by their names, the others under their file's
      std::string prefix = e.source == "generation_config.json" ? "generation_config."
                           : e.source == "__metadata__"         ? "__metadata__."
                                                                : "";
      s += "  " + prefix + cli::term_safe(e.key) + " = " + value_text(e) + "\n";
    }
    s += "\ntensors:\n";
    for (const auto& t : m.tensors)
      s += cli::strf("  %-48s %-8s %-24s offset %llu, %s\n", cli::term_safe(t.name).c_str(), t.type.c_str(),
                     shape_text(t.shape).c_str(), static_cast<unsigned long long>(t.offset),
                     cli::human_bytes(t.bytes).c_str());
  }
  return s;
}
}  // namespace

int cmd_info(int argc, char** argv) {
  cli::Args args(kInfoUsage);
  args.option({"--json"}, false).option({"--all"}, false);
  if (!args.parse(argc, argv)) return args.exit_code();
  if (args.positional().size() != 1) {
    args.usage_error("expected one model path");
    return args.exit_code();
  }
  const bool all = args.has("--all");
  llminfer::InspectOptions o;
  o.metadata = o.tensors = all;
  o.max_array_items = kArrayPreview;
  auto info = llminfer::inspect_model_file(args.positional()[0], o);
  if (!info) return cli::fail(info.error());
  cli::out(args.has("--json") ? info_json(*info, all) : info_text(*info, all));
  return cli::kOk;
}
