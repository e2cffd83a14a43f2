// llminfer info FILE_OR_DIR [--json] [--all]
// Architecture, hyperparameters, parameter count, tensor types, file size, tokenizer, chat template;
// --all adds every metadata key (long arrays abbreviated) and every tensor.
#define LLMINFER_IMPLEMENTATION  // uses the file layer directly (all functions are inline)
#include "cli.hpp"

#include <map>

namespace {
using namespace llminfer::detail;

const char* kInfoUsage =
    "usage: llminfer info FILE_OR_DIR [--json] [--all]\n"
    "  FILE_OR_DIR  a .gguf file, a .safetensors file, or a Hugging Face / MLX model directory\n"
    "  --json       machine-readable output (stable keys, see README)\n"
    "  --all        also every metadata key and every tensor\n";

constexpr uint64_t kArrayPreview = 8;  // arrays longer than this are abbreviated by --all

// A GGUF metadata value as JSON. Arrays of more than kArrayPreview elements become
// {"type": element type, "length": N, "first": [the first kArrayPreview elements]}.
std::string gguf_value_json(const GgufValue& v) {
  switch (v.type) {
    case GgufType::string: return json_quote(v.as_string());
    case GgufType::boolean: return v.as_bool() ? "true" : "false";
    case GgufType::f32: case GgufType::f64: return json_number(v.as_number());
    case GgufType::array: {
      uint64_t n = std::min<uint64_t>(v.len, kArrayPreview);
      std::string s = "[";
      for (uint64_t k = 0; k < n; k++) {
        if (k) s += ",";
        if (v.elem == GgufType::string) s += json_quote(v.strings[k]);
        else if (v.elem == GgufType::array) s += gguf_value_json(v.arrays[k]);
        else if (v.elem == GgufType::f32 || v.elem == GgufType::f64) s += json_number(v.number(k));
        else if (v.elem == GgufType::boolean) s += v.integer(k) ? "true" : "false";
        else if (v.elem == GgufType::u64) s += std::to_string(rd_u64(v.p + 8 * k));  // beyond int64 too
        else s += std::to_string(v.integer(k));
      }
      s += "]";
      if (n == v.len) return s;
      return strf("{\"type\":\"%s\",\"length\":%llu,\"first\":", gguf_type_name(v.elem),
                  static_cast<unsigned long long>(v.len)) + s + "}";
    }
    case GgufType::u64: return std::to_string(rd_u64(v.p));
    default: return std::to_string(v.as_int());
  }
}

// A JSON value as compact JSON (numbers keep their literal text); long arrays abbreviated as above
// (without "type").
std::string json_of(const Json& j) {
  switch (j.type) {
    case Json::Type::null: return "null";
    case Json::Type::boolean: return j.boolean ? "true" : "false";
    case Json::Type::number: return j.str;
    case Json::Type::string: return json_quote(j.str);
    case Json::Type::array: {
      size_t n = std::min<size_t>(j.items.size(), kArrayPreview);
      std::string s = "[";
      for (size_t k = 0; k < n; k++) s += (k ? "," : "") + json_of(j.items[k]);
      s += "]";
      if (n == j.items.size()) return s;
      return strf("{\"length\":%zu,\"first\":", j.items.size()) + s + "}";
    }
    case Json::Type::object: {
      std::string s = "{";
      for (size_t k = 0; k < j.members.size(); k++)
        s += (k ? "," : "") + json_quote(j.members[k].first) + ":" + json_of(j.members[k].second);
      return s + "}";
    }
  }
  return "null";
}

uint64_t tensor_bytes(const ModelDesc& m) {
  uint64_t n = 0;
  for (const auto& t : m.tensors) n += t.nbytes + t.aux_bytes();
  return n;
}

std::map<std::string, int64_t> tensor_type_counts(const ModelDesc& m) {
  std::map<std::string, int64_t> counts;
  for (const auto& t : m.tensors) counts[dtype_name(t.type)]++;
  return counts;
}

std::string info_json(const ModelDesc& m, bool all) {
  const HParams& hp = m.hp;
  const VocabData& vd = m.vocab;
  std::string s = "{";
  s += "\"path\":" + json_quote(m.path);
  s += ",\"format\":" + json_quote(m.format);
  s += ",\"architecture\":" + json_quote(m.arch);
  s += ",\"name\":" + json_quote(m.name);
  s += ",\"file_bytes\":" + std::to_string(m.file_bytes);
  s += ",\"n_params\":" + std::to_string(m.n_params());
  s += ",\"n_tensors\":" + std::to_string(m.tensors.size());
  s += ",\"tensor_bytes\":" + std::to_string(tensor_bytes(m));
  s += ",\"tensor_types\":{";
  bool first = true;
  for (const auto& [name, n] : tensor_type_counts(m)) {
    s += (first ? "" : ",") + json_quote(name) + ":" + std::to_string(n);
    first = false;
  }
  s += "}";
  s += strf(",\"hparams\":{\"n_layer\":%lld,\"n_embd\":%lld,\"n_head\":%lld,\"n_head_kv\":%lld,\"n_ff\":%lld,"
            "\"n_ctx_train\":%lld,\"head_dim\":%lld,\"rope_freq_base\":%s}",
            static_cast<long long>(hp.n_layer), static_cast<long long>(hp.n_embd), static_cast<long long>(hp.n_head),
            static_cast<long long>(hp.n_head_kv), static_cast<long long>(hp.n_ff), static_cast<long long>(hp.n_ctx_train),
            static_cast<long long>(hp.head_dim), json_number(hp.rope_freq_base).c_str());
  s += ",\"tokenizer\":{\"model\":" + json_quote(vd.model) + ",\"pre\":" + json_quote(vd.pre) +
       ",\"n_vocab\":" + std::to_string(vd.tokens.size()) + ",\"bos\":" + std::to_string(vd.bos) +
       ",\"eos\":" + std::to_string(vd.eos) + ",\"eos_ids\":[";
  for (size_t k = 0; k < vd.eos_ids.size(); k++) s += (k ? "," : "") + std::to_string(vd.eos_ids[k]);
  s += "]}";
  s += std::string(",\"chat_template\":") + (m.has_chat_template ? "true" : "false");
  if (all) {
    s += ",\"metadata\":{";
    if (m.gguf) {
      for (size_t k = 0; k < m.gguf->kv.size(); k++)
        s += (k ? "," : "") + json_quote(m.gguf->kv[k].key) + ":" + gguf_value_json(m.gguf->kv[k].value);
    } else {
      s += "\"config.json\":" + json_of(m.config);
      if (m.generation_config.is_object()) s += ",\"generation_config.json\":" + json_of(m.generation_config);
      if (!m.st_metadata.empty()) {
        s += ",\"__metadata__\":{";
        for (size_t k = 0; k < m.st_metadata.size(); k++)
          s += (k ? "," : "") + json_quote(m.st_metadata[k].first) + ":" + json_quote(m.st_metadata[k].second);
        s += "}";
      }
    }
    s += "},\"tensors\":[";
    for (size_t k = 0; k < m.tensors.size(); k++) {
      const TensorView& t = m.tensors[k];
      s += (k ? "," : "") + std::string("{\"name\":") + json_quote(t.name) + ",\"type\":" + json_quote(dtype_name(t.type)) +
           ",\"shape\":[";
      for (int d = 0; d < t.n_dims; d++) s += (d ? "," : "") + std::to_string(t.ne[d]);
      s += "],\"offset\":" + std::to_string(t.file_offset) + ",\"bytes\":" + std::to_string(t.nbytes + t.aux_bytes()) + "}";
    }
    s += "]";
  }
  return s + "}\n";
}

std::string gguf_value_text(const GgufValue& v) {
  if (v.type == GgufType::string) {
    std::string_view s = v.as_string();
    return json_quote(s.size() > 200 ? s.substr(0, 200) : s) + (s.size() > 200 ? strf(" ... (%zu bytes)", s.size()) : "");
  }
  if (v.type == GgufType::array)
    return strf("%s[%llu] ", gguf_type_name(v.elem), static_cast<unsigned long long>(v.len)) + gguf_value_json(v);
  return gguf_value_json(v);
}

// Text from the file for a terminal: control characters (C0, DEL and C1 such as ESC and CSI, which
// would drive the terminal) and invalid UTF-8 escaped as \xNN / \u00NN.
std::string term_safe(std::string_view s) {
  std::string p = printable(s, 4096), out;
  for (size_t i = 0; i < p.size(); i++) {
    auto c = static_cast<unsigned char>(p[i]);
    if (c == 0xC2 && i + 1 < p.size() && static_cast<unsigned char>(p[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(p[i + 1]) < 0xA0) {
      out += strf("\\u%04x", static_cast<unsigned char>(p[i + 1]));
      i++;
    } else {
      out += p[i];
    }
  }
  return out;
}

std::string info_text(const ModelDesc& m, bool all) {
  const HParams& hp = m.hp;
  const VocabData& vd = m.vocab;
  std::string s;
  s += strf("file          %s (%s, %s)\n", term_safe(m.path).c_str(), m.format.c_str(), human_bytes(m.file_bytes).c_str());
  s += strf("architecture  %s%s%s\n", term_safe(m.arch).c_str(), m.name.empty() ? "" : "  name: ", term_safe(m.name).c_str());
  s += strf("parameters    %.2f M in %zu tensors (%s of tensor data)\n", static_cast<double>(m.n_params()) / 1e6,
            m.tensors.size(), human_bytes(tensor_bytes(m)).c_str());
  s += "tensor types ";
  for (const auto& [name, n] : tensor_type_counts(m)) s += strf(" %s:%lld", name.c_str(), static_cast<long long>(n));
  s += "\n";
  s += strf("layers %lld, embedding %lld, heads %lld (kv %lld, dim %lld), ffn %lld, context %lld, rope base %g\n",
            static_cast<long long>(hp.n_layer), static_cast<long long>(hp.n_embd), static_cast<long long>(hp.n_head),
            static_cast<long long>(hp.n_head_kv), static_cast<long long>(hp.head_dim), static_cast<long long>(hp.n_ff),
            static_cast<long long>(hp.n_ctx_train), static_cast<double>(hp.rope_freq_base));
  s += strf("tokenizer     %s%s%s, %zu tokens, bos %d, eos %d\n", vd.model.empty() ? "(none)" : term_safe(vd.model).c_str(),
            vd.pre.empty() ? "" : " / ", term_safe(vd.pre).c_str(), vd.tokens.size(), vd.bos, vd.eos);
  s += strf("chat template %s\n", m.has_chat_template ? "yes" : "no");
  if (all) {
    s += "\nmetadata:\n";
    if (m.gguf) {
      for (const auto& e : m.gguf->kv) s += "  " + term_safe(e.key) + " = " + gguf_value_text(e.value) + "\n";
    } else {
      for (const auto& [k, v] : m.config.members) s += "  " + term_safe(k) + " = " + json_of(v) + "\n";
      for (const auto& [k, v] : m.generation_config.members)
        s += "  generation_config." + term_safe(k) + " = " + json_of(v) + "\n";
      for (const auto& [k, v] : m.st_metadata) s += "  __metadata__." + term_safe(k) + " = " + json_quote(v) + "\n";
    }
    s += "\ntensors:\n";
    for (const auto& t : m.tensors)
      s += strf("  %-48s %-8s %-24s offset %llu, %s\n", term_safe(t.name).c_str(), dtype_name(t.type),
                t.shape_string().c_str(), static_cast<unsigned long long>(t.file_offset), human_bytes(t.nbytes + t.aux_bytes()).c_str());
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
  auto desc = load_description(args.positional()[0]);
  if (!desc) return cli::fail(desc.error());
  cli::out(args.has("--json") ? info_json(**desc, args.has("--all")) : info_text(**desc, args.has("--all")));
  return cli::kOk;
}
