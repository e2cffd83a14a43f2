// Helpers shared by the tests: where the shared models are, running the CLI, and a GGUF writer
// for synthetic files. Every test file defines LLMINFER_IMPLEMENTATION (all functions are inline).
#pragma once
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../llminfer.hpp"

#if defined(_WIN32)
// The Windows build of the tests (MinGW-w64; `make windows-test` runs it under Wine): the few
// POSIX names the tests use. popen runs cmd.exe there and pclose returns the exit status itself.
#include <direct.h>

#include <filesystem>
#ifndef WIFEXITED
#define WIFEXITED(status) ((status) != -1)
#define WEXITSTATUS(status) (status)
#endif
inline int mkdir(const char* path, int /*mode*/) {
  return _mkdir(path);
}
#else
#include <sys/wait.h>  // waitpid, WIFEXITED
#endif

namespace test {

// The suite checks llama.cpp's float order (the goldens, and results that must not depend on how
// tokens are batched): where the best kernels take the block-sum order for prompts, it runs with
// the same kernels in llama.cpp's order ("avx512" for "avx512+amx", "avx2" for "avx2+sums"; a
// dispatch build: the best level without it), unless LLMINFER_KERNELS says otherwise. The tests of
// that order ask for it (LoadOptions::kernels, select_kernels; the matmuls of tests and tools with
// scratch of their own take it whenever the process's default kernels do).
inline const bool suite_kernels = [] {
  namespace li = llminfer::detail;
  if (std::getenv("LLMINFER_KERNELS")) return true;
  const std::string s = li::simd_compiled();
  const char* level = s == "avx512+amx" ? "avx512" : s == "avx2" ? "avx2" : nullptr;
#if defined(LLMINFER_DISPATCH)
  if (li::cpu_has_kernel_level(5))
    level = "avx512bf16";
  else if (li::cpu_has_kernel_level(2) && !li::cpu_has_kernel_level(3))
    level = "avx2";
#endif
  if (!level) return true;
#if defined(_WIN32)
  _putenv((std::string("LLMINFER_KERNELS=") + level).c_str());  // (copied)
#else
  setenv("LLMINFER_KERNELS", level, 0);
#endif
  return true;
}();

// The repository's root (tests run from it; make test also passes LLMINFER_SOURCE_DIR).
inline std::string source_dir() {
  const char* s = std::getenv("LLMINFER_SOURCE_DIR");
  return s && *s ? s : ".";
}

// ../shared beside the repository (make test passes LLMINFER_SHARED), when it is there: only for
// extra checks, never required.
inline std::string shared_dir() {
  const char* s = std::getenv("LLMINFER_SHARED");
  return s && *s ? s : "../shared";
}

// The synthetic models `make fixtures` writes (tools/fixtures/gen.py; make test passes LLMINFER_FIXTURES).
inline std::string fixtures_dir() {
  const char* s = std::getenv("LLMINFER_FIXTURES");
  return s && *s ? s : "build/fixtures";
}

// n token ids below vocab, a fixed function of seed (a linear congruential sequence).
inline std::vector<int32_t> some_ids(int n, int vocab, uint32_t seed) {
  std::vector<int32_t> t;
  uint32_t s = seed;
  for (int k = 0; k < n; k++) {
    s = s * 1664525u + 1013904223u;
    t.push_back(static_cast<int32_t>((s >> 8) % uint32_t(vocab)));
  }
  return t;
}

// Every model file a test reads: stories260K* from third_party/stories260K (committed), the rest
// (synth-*.gguf, hf/...) from the fixtures.
inline std::string model_path(const std::string& name) {
  if (name.rfind("stories260K", 0) == 0) return source_dir() + "/third_party/stories260K/" + name;
  return fixtures_dir() + "/" + name;
}

// The tokenizer oracle's public samples (its output, committed: tests/tokenizer/oracle-samples/README.md).
inline std::string oracle_samples_dir() {
  return source_dir() + "/tests/tokenizer/oracle-samples";
}

// The CLI binary built beside the tests (make test passes LLMINFER_CLI).
inline std::string cli_path() {
  const char* s = std::getenv("LLMINFER_CLI");
  return s && *s ? s : "build/llminfer";
}

struct CliResult {
  int status = -1;
  std::string out;
};

// Runs `llminfer ARGS` through the shell; stdout captured, stderr to /dev/null unless asked.
inline CliResult run_cli(const std::string& args, bool keep_stderr = false) {
  CliResult r;
  std::string cmd = cli_path() + " " + args + (keep_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

inline std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline bool write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return false;
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}
inline bool write_file(const std::string& path, const std::string& text) {
  return write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
}

inline bool read_file(const std::string& path, std::vector<uint8_t>& out) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  out.clear();
  uint8_t buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
  std::fclose(f);
  return true;
}

// A temporary directory removed at the end of the test.
struct TempDir {
  std::string path;
#if defined(_WIN32)
  TempDir() {
    std::error_code ec;
    std::string base = std::filesystem::temp_directory_path(ec).string();
    static int counter = 0;
    for (int i = 0; i < 100 && path.empty(); i++) {
      std::string p = base + "llminfer-test-" + std::to_string(GetCurrentProcessId()) + "-" + std::to_string(counter++);
      if (std::filesystem::create_directory(p, ec)) path = p;
    }
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
#else
  TempDir() {
    char tmpl[] = "/tmp/llminfer-test-XXXXXX";
    if (char* p = mkdtemp(tmpl)) path = p;
  }
  ~TempDir() {
    if (!path.empty()) std::system(("rm -rf " + quote(path)).c_str());
  }
#endif
  std::string file(const std::string& name) const {
    return path + "/" + name;
  }
};

// ---- GGUF writer (for synthetic and malformed files) ----
class GgufWriter {
 public:
  void u8(std::vector<uint8_t>& b, uint8_t v) { b.push_back(v); }
  void u32(std::vector<uint8_t>& b, uint32_t v) { put(b, &v, 4); }
  void u64(std::vector<uint8_t>& b, uint64_t v) { put(b, &v, 8); }
  void f32(std::vector<uint8_t>& b, float v) { put(b, &v, 4); }
  void str(std::vector<uint8_t>& b, const std::string& s) {
    u64(b, s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
  static void put(std::vector<uint8_t>& b, const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  }

  // metadata (GGUF value type ids: u32 4, i32 5, f32 6, bool 7, string 8, array 9)
  GgufWriter& kv_u32(const std::string& k, uint32_t v) {
    key(k, 4);
    u32(kv_, v);
    return *this;
  }
  GgufWriter& kv_i32(const std::string& k, int32_t v) {
    key(k, 5);
    u32(kv_, static_cast<uint32_t>(v));
    return *this;
  }
  GgufWriter& kv_f32(const std::string& k, float v) {
    key(k, 6);
    f32(kv_, v);
    return *this;
  }
  GgufWriter& kv_bool(const std::string& k, bool v) {
    key(k, 7);
    u8(kv_, v ? 1 : 0);
    return *this;
  }
  GgufWriter& kv_str(const std::string& k, const std::string& v) {
    key(k, 8);
    str(kv_, v);
    return *this;
  }
  GgufWriter& kv_strs(const std::string& k, const std::vector<std::string>& v) {
    key(k, 9);
    u32(kv_, 8);
    u64(kv_, v.size());
    for (const auto& s : v) str(kv_, s);
    return *this;
  }
  GgufWriter& kv_f32s(const std::string& k, const std::vector<float>& v) {
    key(k, 9);
    u32(kv_, 6);
    u64(kv_, v.size());
    for (float x : v) f32(kv_, x);
    return *this;
  }
  GgufWriter& kv_i32s(const std::string& k, const std::vector<int32_t>& v) {
    key(k, 9);
    u32(kv_, 5);
    u64(kv_, v.size());
    for (int32_t x : v) u32(kv_, static_cast<uint32_t>(x));
    return *this;
  }
  // Any scalar type: GGUF value type id (0 u8, 1 i8, 2 u16, 3 i16, 4 u32, 5 i32, 6 f32, 7 bool,
  // 10 u64, 11 i64, 12 f64) and its little-endian bytes.
  GgufWriter& kv_scalar(const std::string& k, uint32_t type, const void* bytes, size_t n) {
    key(k, type);
    put(kv_, bytes, n);
    return *this;
  }
  GgufWriter& kv_u64(const std::string& k, uint64_t v) { return kv_scalar(k, 10, &v, 8); }
  GgufWriter& kv_i64(const std::string& k, int64_t v) { return kv_scalar(k, 11, &v, 8); }
  GgufWriter& kv_f64(const std::string& k, double v) { return kv_scalar(k, 12, &v, 8); }
  // An array given as its encoded body: element type, count, then the encoded elements (for
  // nested arrays each element is again "u32 type, u64 count, elements", see array_body()).
  GgufWriter& kv_array(const std::string& k, const std::vector<uint8_t>& body) {
    key(k, 9);
    kv_.insert(kv_.end(), body.begin(), body.end());
    return *this;
  }
  static std::vector<uint8_t> array_body(uint32_t elem_type, uint64_t count, const std::vector<uint8_t>& elems) {
    std::vector<uint8_t> b;
    put(b, &elem_type, 4);
    put(b, &count, 8);
    b.insert(b.end(), elems.begin(), elems.end());
    return b;
  }
  // Raw bytes appended to the metadata section, counted as `entries` key/values.
  GgufWriter& kv_raw(const std::vector<uint8_t>& bytes, uint64_t entries = 1) {
    if (n_kv_ > 0 && entries > 0) kv_ends_.push_back(kv_.size());
    kv_.insert(kv_.end(), bytes.begin(), bytes.end());
    n_kv_ += entries;
    return *this;
  }

  // A tensor: dims in ggml order (ne[0] first), ggml type id, raw data bytes.
  GgufWriter& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, std::vector<uint8_t> data) {
    tensors_.push_back({name, std::move(dims), type, std::move(data)});
    return *this;
  }
  // A tensor info with an explicit data offset (relative to the data section) and no data written:
  // for files whose table lies.
  GgufWriter& tensor_info(const std::string& name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    tensors_.push_back({name, std::move(dims), type, {}, true, offset});
    return *this;
  }
  GgufWriter& tensor_f32(const std::string& name, std::vector<uint64_t> dims, const std::vector<float>& v) {
    std::vector<uint8_t> d(v.size() * 4);
    std::memcpy(d.data(), v.data(), d.size());
    return tensor(name, std::move(dims), 0, std::move(d));
  }

  // Where the sections of a built image start (for truncating files at each boundary).
  struct Layout {
    size_t metadata = 0;            // first key/value (the header is 24 bytes)
    std::vector<size_t> kv_ends;    // end of each key/value
    size_t tensor_infos = 0;        // first tensor info
    std::vector<size_t> info_ends;  // end of each tensor info
    size_t data = 0;                // data section (after padding)
  };

  // The file image. `alignment` also pads the data (general.alignment is written only if set).
  std::vector<uint8_t> build(uint32_t version = 3, uint64_t alignment = 32, Layout* layout = nullptr) const {
    std::vector<uint8_t> b;
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    auto self = const_cast<GgufWriter*>(this);
    self->u32(b, version);
    self->u64(b, tensors_.size());
    self->u64(b, n_kv_);
    Layout lay;
    lay.metadata = b.size();
    for (size_t e : kv_ends_) lay.kv_ends.push_back(b.size() + e);
    b.insert(b.end(), kv_.begin(), kv_.end());
    if (!kv_.empty()) lay.kv_ends.push_back(b.size());
    lay.tensor_infos = b.size();
    uint64_t off = 0;
    for (const auto& t : tensors_) {
      self->str(b, t.name);
      self->u32(b, static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) self->u64(b, d);
      self->u32(b, t.type);
      self->u64(b, t.explicit_offset ? t.offset : off);
      lay.info_ends.push_back(b.size());
      if (!t.explicit_offset) off += (t.data.size() + alignment - 1) / alignment * alignment;
    }
    while (b.size() % alignment) b.push_back(0);
    lay.data = b.size();
    for (const auto& t : tensors_) {
      if (t.explicit_offset) continue;
      b.insert(b.end(), t.data.begin(), t.data.end());
      while (b.size() % alignment) b.push_back(0);
    }
    if (layout) *layout = lay;
    return b;
  }

 private:
  struct T {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::vector<uint8_t> data;
    bool explicit_offset = false;
    uint64_t offset = 0;
  };
  void key(const std::string& k, uint32_t type) {
    if (n_kv_ > 0) kv_ends_.push_back(kv_.size());
    str(kv_, k);
    u32(kv_, type);
    n_kv_++;
  }
  std::vector<uint8_t> kv_;
  std::vector<size_t> kv_ends_;  // end of every key/value but the last (known at build time)
  uint64_t n_kv_ = 0;
  std::vector<T> tensors_;
};

// ---- safetensors writer (for synthetic and malformed files) ----
class SafetensorsWriter {
 public:
  // A tensor: safetensors dtype ("F32", "BF16", "U32", ...), shape outermost first, raw bytes.
  SafetensorsWriter& tensor(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> data) {
    tensors_.push_back({name, dtype, std::move(shape), std::move(data)});
    return *this;
  }
  SafetensorsWriter& tensor_f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& v) {
    std::vector<uint8_t> d(v.size() * 4);
    std::memcpy(d.data(), v.data(), d.size());
    return tensor(name, "F32", std::move(shape), std::move(d));
  }
  SafetensorsWriter& metadata(const std::string& key, const std::string& value) {
    meta_.emplace_back(key, value);
    return *this;
  }
  // The header JSON (keys in insertion order, data back to back).
  std::string header() const {
    std::string h = "{";
    bool first = true;
    if (!meta_.empty()) {
      h += "\"__metadata__\":{";
      for (size_t k = 0; k < meta_.size(); k++)
        h += (k ? "," : "") + llminfer::detail::json_quote(meta_[k].first) + ":" +
             llminfer::detail::json_quote(meta_[k].second);
      h += "}";
      first = false;
    }
    uint64_t off = 0;
    for (const auto& t : tensors_) {
      h += (first ? "" : ",") + llminfer::detail::json_quote(t.name) + ":{\"dtype\":\"" + t.dtype + "\",\"shape\":[";
      for (size_t k = 0; k < t.shape.size(); k++) h += (k ? "," : "") + std::to_string(t.shape[k]);
      h += "],\"data_offsets\":[" + std::to_string(off) + "," + std::to_string(off + t.data.size()) + "]}";
      off += t.data.size();
      first = false;
    }
    return h + "}";
  }
  std::vector<uint8_t> build() const { return image(header(), data()); }
  std::vector<uint8_t> data() const {
    std::vector<uint8_t> d;
    for (const auto& t : tensors_) d.insert(d.end(), t.data.begin(), t.data.end());
    return d;
  }
  // A file from any header text (padded with spaces to 8 bytes, as the format recommends) and data.
  static std::vector<uint8_t> image(std::string header, const std::vector<uint8_t>& data, bool pad = true) {
    while (pad && header.size() % 8) header += ' ';
    std::vector<uint8_t> b(8 + header.size() + data.size());
    uint64_t n = header.size();
    std::memcpy(b.data(), &n, 8);
    std::copy(header.begin(), header.end(), b.begin() + 8);
    std::copy(data.begin(), data.end(), b.begin() + 8 + static_cast<std::ptrdiff_t>(header.size()));
    return b;
  }

 private:
  struct T {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  std::vector<T> tensors_;
  std::vector<std::pair<std::string, std::string>> meta_;
};

}  // namespace test
