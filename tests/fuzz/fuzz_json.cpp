// libFuzzer target: the JSON reader. Accepted documents must survive a round trip (serialize with
// json_quote and the kept number literals, parse again, compare); refusals must name the source.
// Parsed documents are also read as tokenizer.json, tokenizer_config.json and config.json.
#define LLMINFER_IMPLEMENTATION
#include "../../llminfer.hpp"

namespace {
using llminfer::detail::Json;

std::string dump(const Json& j) {
  switch (j.type) {
    case Json::Type::null: return "null";
    case Json::Type::boolean: return j.boolean ? "true" : "false";
    case Json::Type::number: return j.str;
    case Json::Type::string: return llminfer::detail::json_quote(j.str);
    case Json::Type::array: {
      std::string s = "[";
      for (size_t k = 0; k < j.items.size(); k++) s += (k ? "," : "") + dump(j.items[k]);
      return s + "]";
    }
    case Json::Type::object: {
      std::string s = "{";
      for (size_t k = 0; k < j.members.size(); k++)
        s += (k ? "," : "") + llminfer::detail::json_quote(j.members[k].first) + ":" + dump(j.members[k].second);
      return s + "}";
    }
  }
  return "";
}

bool same(const Json& a, const Json& b) {
  if (a.type != b.type || a.boolean != b.boolean || a.str != b.str || a.is_int != b.is_int || a.i != b.i) return false;
  if (a.items.size() != b.items.size() || a.members.size() != b.members.size()) return false;
  for (size_t k = 0; k < a.items.size(); k++)
    if (!same(a.items[k], b.items[k])) return false;
  for (size_t k = 0; k < a.members.size(); k++)
    if (a.members[k].first != b.members[k].first || !same(a.members[k].second, b.members[k].second)) return false;
  return true;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace llminfer::detail;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto j = json_parse(text, "fuzz.json");
  if (!j) {
    if (j.error().message.rfind("fuzz.json: invalid JSON at line ", 0) != 0) __builtin_trap();
    return 0;
  }
  std::string again = dump(*j);
  auto k = json_parse(again, "again.json");
  if (!k || !same(*j, *k)) __builtin_trap();
  // The parsed document as each side file of a model directory.
  ModelDesc m;
  m.path = "fuzz";
  m.tokenizer_json = *j;
  m.tokenizer_config = *j;
  if (auto r = vocab_from_tokenizer_json(m, "fuzz/tokenizer.json"); !r && r.error().message.rfind("fuzz/", 0) != 0)
    __builtin_trap();
  m.generation_config = *j;
  m.config = *j;
  special_ids_from_configs(m);
  const HfArchInfo* info = nullptr;
  (void)desc_meta_from_config(m, info);
  (void)mlx_quant_params((*j)["quantization"], "model.layers.0.mlp.up_proj", "fuzz/config.json");
  return 0;
}
