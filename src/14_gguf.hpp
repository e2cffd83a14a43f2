// ==== GGUF v2/v3 reader ====
// Layout (little-endian): "GGUF" u32 version, u64 n_tensors, u64 n_kv, then n_kv key/values
// (string key, u32 type, value), then n_tensors infos (string name, u32 n_dims, u64 ne[n_dims],
// u32 ggml type, u64 offset), padding to `general.alignment` (default 32), then the data section.
// Strings are u64 length + bytes (no NUL). Arrays are u32 element type + u64 count + elements;
// an element of an array of arrays is again "element type, count, elements". Versions 2 and 3 share
// this layout (version 1 had 32-bit counts and is refused, as llama.cpp does).
// Everything is a view into the mapping; every read is bounds-checked against the file size, and
// nothing is allocated from a count before the file is known to hold that many entries.
// Where we differ from llama.cpp's gguf.cpp, on purpose: nested arrays are accepted (gguf-py writes
// them); tensors may sit anywhere in the data section as long as they are aligned and do not overlap
// (llama.cpp wants them back to back in table order); keys and tensor names must be valid UTF-8.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

enum class GgufType : uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

inline const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                "bool", "string", "array", "u64", "i64", "f64"};
  auto v = static_cast<uint32_t>(t);
  return v < 13 ? names[v] : "invalid";
}

// Size of a fixed-size scalar type, 0 for string/array/invalid.
inline uint32_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::boolean: return 1;
    case GgufType::u16:
    case GgufType::i16: return 2;
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::f32: return 4;
    case GgufType::u64:
    case GgufType::i64:
    case GgufType::f64: return 8;
    default: return 0;
  }
}

struct GgufValue {
  GgufType type = GgufType::u8;
  const uint8_t* p = nullptr;  // scalar bytes; string bytes; first array element
  uint64_t len = 0;            // string: bytes; array: element count
  GgufType elem = GgufType::u8;
  std::vector<std::string_view> strings;  // array of strings
  std::vector<GgufValue> arrays;          // array of arrays

  bool is_number() const { return gguf_scalar_size(type) != 0 && type != GgufType::boolean; }
  bool is_integer() const { return is_number() && type != GgufType::f32 && type != GgufType::f64; }
  std::string_view as_string() const {
    return type == GgufType::string ? std::string_view(reinterpret_cast<const char*>(p), len) : std::string_view();
  }
  // Scalar at `q` of type `t` as double / int64 (booleans as 0/1).
  static double number_at(GgufType t, const uint8_t* q) {
    switch (t) {
      case GgufType::u8: return q[0];
      case GgufType::i8: return static_cast<int8_t>(q[0]);
      case GgufType::boolean: return q[0] != 0;
      case GgufType::u16: return rd_u16(q);
      case GgufType::i16: return static_cast<int16_t>(rd_u16(q));
      case GgufType::u32: return rd_u32(q);
      case GgufType::i32: return static_cast<int32_t>(rd_u32(q));
      case GgufType::u64: return static_cast<double>(rd_u64(q));
      case GgufType::i64: return static_cast<double>(static_cast<int64_t>(rd_u64(q)));
      case GgufType::f32: {
        float f;
        std::memcpy(&f, q, 4);
        return f;
      }
      case GgufType::f64: {
        double d;
        std::memcpy(&d, q, 8);
        return d;
      }
      default: return 0;
    }
  }
  static int64_t int_at(GgufType t, const uint8_t* q) {
    switch (t) {
      case GgufType::u64: return static_cast<int64_t>(std::min<uint64_t>(rd_u64(q), INT64_MAX));
      case GgufType::i64: return static_cast<int64_t>(rd_u64(q));
      case GgufType::f32:
      case GgufType::f64: {
        double d = number_at(t, q);
        return std::isfinite(d) && std::fabs(d) < 9.2e18 ? static_cast<int64_t>(d) : 0;
      }
      default: return static_cast<int64_t>(number_at(t, q));
    }
  }
  double as_number() const { return gguf_scalar_size(type) ? number_at(type, p) : 0; }
  int64_t as_int() const { return gguf_scalar_size(type) ? int_at(type, p) : 0; }
  bool as_bool() const { return gguf_scalar_size(type) ? number_at(type, p) != 0 : false; }
  // Numeric array element k (k < len).
  double number(uint64_t k) const { return number_at(elem, p + k * gguf_scalar_size(elem)); }
  int64_t integer(uint64_t k) const { return int_at(elem, p + k * gguf_scalar_size(elem)); }
};

struct GgufKV {
  std::string_view key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string_view name;
  uint32_t n_dims = 0;           // 0..4 (0: a scalar, as ggml allows)
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] is the innermost (row) dimension
  DType type = DType::f32;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t nbytes = 0;
};

struct GgufFile {
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  // absolute offset of the data section
  std::vector<GgufKV> kv;
  std::vector<GgufTensorInfo> tensors;

  const GgufValue* find(std::string_view key) const {
    for (const auto& e : kv)
      if (e.key == key) return &e.value;
    return nullptr;
  }
};

class GgufReader {
 public:
  GgufReader(const uint8_t* data, uint64_t size, const std::string& name) : d_(data), n_(size), name_(name) {}

  Result<GgufFile> parse() {
    GgufFile f;
    if (n_ < 4 || std::memcmp(d_, "GGUF", 4) != 0) {
      if (n_ < 4) return err(strf("too small to be a GGUF file (%llu bytes)", ull(n_)));
      return err(strf("not a GGUF file (magic '%s', expected 'GGUF')",
                      printable(std::string_view(reinterpret_cast<const char*>(d_), 4)).c_str()));
    }
    pos_ = 4;
    if (!u32(f.version, "version")) return error_;
    // A file written on a big-endian machine reads as 0x03000000 here (llama.cpp's test too).
    if (f.version != 0 && (f.version & 0xFFFF) == 0)
      return err(strf("GGUF version 0x%08X: a big-endian file? Only little-endian GGUF is supported", f.version));
    if (f.version == 1) return err("GGUF version 1 is not supported (only versions 2 and 3)");
    if (f.version != 2 && f.version != 3) return err(strf("unsupported GGUF version %u (only 2 and 3)", f.version));
    uint64_t n_tensors = 0, n_kv = 0;
    if (!u64(n_tensors, "tensor count") || !u64(n_kv, "metadata count")) return error_;
    // Smallest possible entries: a tensor info is >= 25 bytes, a key/value >= 14 bytes.
    if (n_tensors > LLMINFER_MAX_TENSORS)
      return err(strf("the header declares %llu tensors, more than LLMINFER_MAX_TENSORS (%llu)", ull(n_tensors),
                      ull(LLMINFER_MAX_TENSORS)));
    if (n_kv > LLMINFER_MAX_METADATA)
      return err(strf("the header declares %llu metadata entries, more than LLMINFER_MAX_METADATA (%llu)", ull(n_kv),
                      ull(LLMINFER_MAX_METADATA)));
    if (n_tensors * 25 + n_kv * 14 > remaining())
      return err(
          strf("the header declares %llu tensors and %llu metadata entries, but only %llu bytes follow "
               "(a truncated file or a corrupt count)",
               ull(n_tensors), ull(n_kv), ull(remaining())));

    // ---- metadata ----
    // Containers grow with what was actually read, never with a count the file merely claims.
    f.kv.reserve(static_cast<size_t>(std::min<uint64_t>(n_kv, 256)));
    std::unordered_map<std::string_view, size_t> seen;
    for (uint64_t k = 0; k < n_kv; k++) {
      where_ = strf("metadata entry %llu of %llu", ull(k + 1), ull(n_kv));
      GgufKV e;
      if (!string(e.key, "key")) return error_;
      if (e.key.empty()) return err(strf("%s has an empty key", where_.c_str()));
      if (!utf8_valid(e.key))
        return err(strf("%s: key is not valid UTF-8 ('%s')", where_.c_str(), printable(e.key).c_str()));
      if (!seen.emplace(e.key, k).second) return err(strf("duplicate metadata key '%s'", printable(e.key).c_str()));
      where_ = strf("metadata key '%s'", printable(e.key).c_str());
      uint32_t t = 0;
      if (!u32(t, "value type")) return error_;
      if (!value(e.value, t, 0)) return error_;
      f.kv.push_back(std::move(e));
    }
    if (const GgufValue* a = f.find("general.alignment")) {
      if (a->type != GgufType::u32)
        return err(strf("general.alignment has type %s, expected u32", gguf_type_name(a->type)));
      uint64_t v = static_cast<uint64_t>(a->as_int());
      if (v == 0 || (v & (v - 1)) != 0) return err(strf("general.alignment %llu is not a power of two", ull(v)));
      f.alignment = v;
    }

    // ---- tensor infos ----
    f.tensors.reserve(static_cast<size_t>(std::min<uint64_t>(n_tensors, 1024)));
    std::unordered_map<std::string_view, size_t> names;
    for (uint64_t k = 0; k < n_tensors; k++) {
      where_ = strf("tensor info %llu of %llu", ull(k + 1), ull(n_tensors));
      GgufTensorInfo ti;
      if (!string(ti.name, "name")) return error_;
      if (ti.name.empty()) return err(strf("%s has an empty name", where_.c_str()));
      if (!utf8_valid(ti.name))
        return err(strf("%s: name is not valid UTF-8 ('%s')", where_.c_str(), printable(ti.name).c_str()));
      if (!names.emplace(ti.name, k).second) return err(strf("duplicate tensor name '%s'", printable(ti.name).c_str()));
      where_ = strf("tensor '%s'", printable(ti.name).c_str());
      if (!u32(ti.n_dims, "n_dims")) return error_;
      if (ti.n_dims > 4) return err(strf("%s has %u dimensions (at most 4)", where_.c_str(), ti.n_dims));
      for (uint32_t dmn = 0; dmn < ti.n_dims; dmn++) {
        uint64_t ne = 0;
        if (!u64(ne, "dimensions")) return error_;
        if (ne > static_cast<uint64_t>(INT64_MAX))
          return err(strf("%s: dimension %u is negative (%lld)", where_.c_str(), dmn, static_cast<long long>(ne)));
        ti.ne[dmn] = static_cast<int64_t>(ne);
      }
      // The product of the dimensions, zeros counted as 1, must fit in int64: then every partial
      // product (element count, row count, in any order) does, even for a tensor with a 0 dimension.
      uint64_t nel = 1, bound = 1;
      bool over = false;
      for (int dmn = 0; dmn < 4 && !over; dmn++) {
        uint64_t e = static_cast<uint64_t>(ti.ne[dmn]);
        over = mul_overflows(bound, std::max<uint64_t>(e, 1), &bound) || bound > static_cast<uint64_t>(INT64_MAX);
        nel *= e;
      }
      if (over)
        return err(strf("%s: dimensions [%lld, %lld, %lld, %lld] overflow", where_.c_str(),
                        static_cast<long long>(ti.ne[0]), static_cast<long long>(ti.ne[1]),
                        static_cast<long long>(ti.ne[2]), static_cast<long long>(ti.ne[3])));
      uint32_t type = 0;
      if (!u32(type, "type")) return error_;
      ti.type = static_cast<DType>(type);
      const DTypeTraits* tr = type < 200 ? dtype_traits(ti.type) : nullptr;
      if (!tr)
        return err(
            strf("%s has ggml type id %u, which is not a tensor type (unknown or removed)", where_.c_str(), type));
      if (static_cast<uint64_t>(ti.ne[0]) % tr->block != 0)
        return err(strf("%s: row length %lld is not a multiple of the %s block size %u", where_.c_str(),
                        static_cast<long long>(ti.ne[0]), tr->name, tr->block));
      if (mul_overflows(nel / tr->block, tr->bytes, &ti.nbytes)) return err(strf("%s: size overflows", where_.c_str()));
      if (!u64(ti.offset, "offset")) return error_;
      f.tensors.push_back(ti);
    }
    where_.clear();

    // ---- data section ----
    uint64_t data = 0;
    if (add_overflows(pos_, f.alignment - 1, &data)) return err("data section offset overflows");
    data = data / f.alignment * f.alignment;
    if (data > n_ && !f.tensors.empty())
      return err(strf("the data section (offset %llu, alignment %llu) starts past the end of the file (%s)", ull(data),
                      ull(f.alignment), human_bytes(n_).c_str()));
    f.data_offset = std::min(data, n_);
    uint64_t avail = n_ - f.data_offset;
    for (const auto& t : f.tensors) {
      if (t.offset % f.alignment != 0)
        return err(strf("tensor '%s' data offset %llu is not aligned to %llu bytes", printable(t.name).c_str(),
                        ull(t.offset), ull(f.alignment)));
      uint64_t end = 0, abs = 0;
      if (add_overflows(t.offset, t.nbytes, &end) || end > avail) {
        std::string at = add_overflows(f.data_offset, t.offset, &abs) ? strf("data section + %llu", ull(t.offset))
                                                                      : strf("%llu", ull(abs));
        return err(strf("tensor '%s' data [offset %s, size %s] runs past the end of the file (%s)",
                        printable(t.name).c_str(), at.c_str(), human_bytes(t.nbytes).c_str(), human_bytes(n_).c_str()));
      }
    }
    std::vector<size_t> order(f.tensors.size());
    for (size_t k = 0; k < order.size(); k++) order[k] = k;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return f.tensors[a].offset < f.tensors[b].offset; });
    for (size_t k = 1; k < order.size(); k++) {
      const auto& a = f.tensors[order[k - 1]];
      const auto& b = f.tensors[order[k]];
      if (a.nbytes > 0 && b.nbytes > 0 && a.offset + a.nbytes > b.offset)
        return err(strf("tensors '%s' and '%s' overlap in the data section", printable(a.name).c_str(),
                        printable(b.name).c_str()));
    }
    return f;
  }

 private:
  static unsigned long long ull(uint64_t v) { return static_cast<unsigned long long>(v); }
  uint64_t remaining() const { return n_ - pos_; }
  Error err(const std::string& what) {
    error_ = make_error(Errc::bad_format, name_ + ": " + what);
    return error_;
  }
  bool truncated(const char* field) {
    err(strf("truncated in %s (%s) at offset %llu: the file ends at %llu bytes",
             where_.empty() ? "the header" : where_.c_str(), field, ull(pos_), ull(n_)));
    return false;
  }
  bool take(uint64_t bytes, const char* field) {
    if (bytes > remaining()) return truncated(field);
    pos_ += bytes;
    return true;
  }
  bool u32(uint32_t& v, const char* field) {
    if (remaining() < 4) return truncated(field);
    v = rd_u32(d_ + pos_);
    pos_ += 4;
    return true;
  }
  bool u64(uint64_t& v, const char* field) {
    if (remaining() < 8) return truncated(field);
    v = rd_u64(d_ + pos_);
    pos_ += 8;
    return true;
  }
  bool string(std::string_view& s, const char* field) {
    uint64_t len = 0;
    if (!u64(len, field)) return false;
    if (len > remaining()) {
      err(strf("%s: %s length %llu runs past the end of the file (%llu bytes left)", where_.c_str(), field, ull(len),
               ull(remaining())));
      return false;
    }
    s = std::string_view(reinterpret_cast<const char*>(d_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return true;
  }
  bool value(GgufValue& v, uint32_t type, int depth) {
    if (type > 12) {
      err(strf("%s has unknown value type %u", where_.c_str(), type));
      return false;
    }
    v.type = static_cast<GgufType>(type);
    if (uint32_t sz = gguf_scalar_size(v.type)) {
      v.p = d_ + pos_;
      return take(sz, "value");
    }
    if (v.type == GgufType::string) {
      std::string_view s;
      if (!string(s, "string value")) return false;
      v.p = reinterpret_cast<const uint8_t*>(s.data());
      v.len = s.size();
      return true;
    }
    // array: element type, count, elements (arrays may hold arrays, up to a small depth)
    if (depth >= 8) {
      err(strf("%s: arrays nested more than 8 deep", where_.c_str()));
      return false;
    }
    uint32_t et = 0;
    if (!u32(et, "array element type") || !u64(v.len, "array length")) return false;
    if (et > 12) {
      err(strf("%s: array has unknown element type %u", where_.c_str(), et));
      return false;
    }
    v.elem = static_cast<GgufType>(et);
    v.p = d_ + pos_;
    if (uint32_t sz = gguf_scalar_size(v.elem)) {
      uint64_t bytes = 0;
      if (mul_overflows(v.len, sz, &bytes) || bytes > remaining()) {
        err(strf("%s: array of %llu %s runs past the end of the file (%llu bytes left)", where_.c_str(), ull(v.len),
                 gguf_type_name(v.elem), ull(remaining())));
        return false;
      }
      pos_ += bytes;
      return true;
    }
    // Every string takes >= 8 bytes and every array >= 12, so a count the file cannot hold is refused
    // before anything is allocated; storage then grows with what was read.
    uint64_t min_size = v.elem == GgufType::string ? 8 : 12;
    if (v.len > remaining() / min_size) {
      err(strf("%s: array of %llu %ss runs past the end of the file (%llu bytes left)", where_.c_str(), ull(v.len),
               gguf_type_name(v.elem), ull(remaining())));
      return false;
    }
    if (v.elem == GgufType::string) {
      v.strings.reserve(static_cast<size_t>(std::min<uint64_t>(v.len, 1u << 16)));
      for (uint64_t k = 0; k < v.len; k++) {
        std::string_view s;
        if (!string(s, "array string")) return false;
        v.strings.push_back(s);
      }
      return true;
    }
    // Each element of an array of arrays is itself "u32 element type, u64 count, elements" (gguf-py).
    v.arrays.reserve(static_cast<size_t>(std::min<uint64_t>(v.len, 64)));
    for (uint64_t k = 0; k < v.len; k++) {
      GgufValue a;
      if (!value(a, static_cast<uint32_t>(GgufType::array), depth + 1)) return false;
      v.arrays.push_back(std::move(a));
    }
    return true;
  }

  const uint8_t* d_;
  uint64_t n_;
  uint64_t pos_ = 0;
  std::string name_;
  std::string where_;
  Error error_;
};

inline Result<GgufFile> gguf_parse(const uint8_t* data, uint64_t size, const std::string& name) {
  return GgufReader(data, size, name).parse();
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
