// ==== safetensors reader ====
// Layout: u64 N (little-endian), N bytes of JSON header, then the data. The header maps each
// tensor name to {"dtype", "shape" (outermost first), "data_offsets": [begin, end)} relative to
// the data; "__metadata__" maps strings to strings. Offsets are checked for bounds, size and overlap.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

struct StTensor {
  std::string name;
  DType type = DType::f32;
  std::vector<int64_t> shape;  // outermost first, as written (row-major)
  const uint8_t* data = nullptr;
  uint64_t nbytes = 0;
  uint64_t file_offset = 0;  // absolute offset in its file
};

struct StFile {
  std::string path;
  std::vector<StTensor> tensors;
  std::vector<std::pair<std::string, std::string>> metadata;
};

inline DType safetensors_dtype(std::string_view s) {
  static const std::pair<const char*, DType> table[] = {
      {"F32", DType::f32},      {"F16", DType::f16},         {"BF16", DType::bf16},       {"F64", DType::f64},
      {"I8", DType::i8},        {"I16", DType::i16},         {"I32", DType::i32},         {"I64", DType::i64},
      {"U8", DType::u8},        {"U16", DType::u16},         {"U32", DType::u32},         {"U64", DType::u64},
      {"BOOL", DType::boolean}, {"F8_E4M3", DType::f8_e4m3}, {"F8_E5M2", DType::f8_e5m2},
  };
  for (const auto& e : table)
    if (s == e.first) return e.second;
  return DType::invalid;
}

// Largest header accepted (the reference implementation's limit).
constexpr uint64_t kSafetensorsMaxHeader = 100ull << 20;

// Parses a safetensors image of `size` bytes at `d`; `name` is used in messages.
inline Result<StFile> safetensors_parse(const uint8_t* d, uint64_t size, const std::string& name) {
  auto bad = [&](const std::string& what) { return make_error(Errc::bad_format, name + ": " + what); };
  if (size < 8)
    return bad(strf("too small to be a safetensors file (%llu bytes)", static_cast<unsigned long long>(size)));
  uint64_t hlen = rd_u64(d);
  if (hlen > kSafetensorsMaxHeader)
    return bad(strf("header length %llu is larger than the 100 MiB limit", static_cast<unsigned long long>(hlen)));
  if (hlen > size - 8)
    return bad(strf("header length %llu runs past the end of the file (%s)", static_cast<unsigned long long>(hlen),
                    human_bytes(size).c_str()));
  if (hlen < 2 || d[8] != '{') return bad("the header is not a JSON object");
  auto header =
      json_parse(std::string_view(reinterpret_cast<const char*>(d + 8), static_cast<size_t>(hlen)), name + " header");
  if (!header) return header.error();
  const Json& h = *header;
  if (!h.is_object()) return bad("the header is not a JSON object");
  const uint64_t data_start = 8 + hlen, avail = size - data_start;
  StFile out;
  out.path = name;
  std::vector<std::string_view> seen;
  for (const auto& [key, v] : h.members) {
    if (key == "__metadata__") {
      if (!v.is_object()) return bad("__metadata__ is not an object");
      for (const auto& [mk, mv] : v.members) {
        if (!mv.is_string()) return bad(strf("__metadata__ value of '%s' is not a string", printable(mk).c_str()));
        out.metadata.emplace_back(mk, mv.str);
      }
      continue;
    }
    std::string tn = printable(key);
    if (!v.is_object()) return bad(strf("tensor '%s': entry is not an object", tn.c_str()));
    const Json& dt = v["dtype"];
    const Json& shape = v["shape"];
    const Json& offs = v["data_offsets"];
    if (!dt.is_string()) return bad(strf("tensor '%s': missing dtype", tn.c_str()));
    StTensor t;
    t.name = key;
    t.type = safetensors_dtype(dt.str);
    if (t.type == DType::invalid)
      return bad(strf("tensor '%s': unknown dtype '%s'", tn.c_str(), printable(dt.str).c_str()));
    if (!shape.is_array()) return bad(strf("tensor '%s': missing shape", tn.c_str()));
    if (shape.items.size() > 8)
      return bad(strf("tensor '%s': %zu dimensions (at most 8)", tn.c_str(), shape.items.size()));
    // The product of the dimensions, zeros counted as 1, must fit in int64 (so that every partial
    // product does, whatever the order and even with a 0 dimension).
    uint64_t nel = 1, bound = 1;
    for (const auto& s : shape.items) {
      if (!s.is_number() || !s.is_int || s.i < 0)
        return bad(strf("tensor '%s': shape holds a non-integer or negative value", tn.c_str()));
      if (mul_overflows(bound, std::max<uint64_t>(static_cast<uint64_t>(s.i), 1), &bound) ||
          bound > static_cast<uint64_t>(INT64_MAX))
        return bad(strf("tensor '%s': shape overflows", tn.c_str()));
      nel *= static_cast<uint64_t>(s.i);
      t.shape.push_back(s.i);
    }
    if (!offs.is_array() || offs.items.size() != 2 || !offs.items[0].is_int || !offs.items[1].is_int ||
        offs.items[0].i < 0 || offs.items[1].i < offs.items[0].i)
      return bad(strf("tensor '%s': data_offsets must be [begin, end] with 0 <= begin <= end", tn.c_str()));
    uint64_t b = static_cast<uint64_t>(offs.items[0].i), e = static_cast<uint64_t>(offs.items[1].i);
    uint64_t want = 0;
    if (mul_overflows(nel, dtype_traits(t.type)->bytes, &want) || want != e - b)
      return bad(strf("tensor '%s': data_offsets span %llu bytes but the shape and dtype need %llu", tn.c_str(),
                      static_cast<unsigned long long>(e - b), static_cast<unsigned long long>(want)));
    if (e > avail)
      return bad(strf("tensor '%s' data [offset %llu, size %s] runs past the end of the file (%s)", tn.c_str(),
                      static_cast<unsigned long long>(data_start + b), human_bytes(e - b).c_str(),
                      human_bytes(size).c_str()));
    t.data = d + data_start + b;
    t.nbytes = e - b;
    t.file_offset = data_start + b;
    out.tensors.push_back(std::move(t));
  }
  // duplicate names (JSON allows repeated keys) and overlapping data
  std::vector<size_t> order(out.tensors.size());
  for (size_t k = 0; k < order.size(); k++) order[k] = k;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return out.tensors[a].name < out.tensors[b].name; });
  for (size_t k = 1; k < order.size(); k++)
    if (out.tensors[order[k]].name == out.tensors[order[k - 1]].name)
      return bad(strf("tensor '%s' is listed twice", printable(out.tensors[order[k]].name).c_str()));
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return out.tensors[a].file_offset < out.tensors[b].file_offset; });
  for (size_t k = 1; k < order.size(); k++) {
    const auto& a = out.tensors[order[k - 1]];
    const auto& b = out.tensors[order[k]];
    if (a.nbytes > 0 && b.nbytes > 0 && a.file_offset + a.nbytes > b.file_offset)
      return bad(strf("tensors '%s' and '%s' overlap", printable(a.name).c_str(), printable(b.name).c_str()));
  }
  return out;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
