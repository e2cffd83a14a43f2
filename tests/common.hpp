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

namespace test {

// ../shared beside the repository (make test passes LLMINFER_SHARED).
inline std::string shared_dir() {
  const char* s = std::getenv("LLMINFER_SHARED");
  return s && *s ? s : "../shared";
}
inline std::string model_path(const std::string& name) { return shared_dir() + "/models/" + name; }

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

// A temporary directory removed at the end of the test.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/llminfer-test-XXXXXX";
    if (char* p = mkdtemp(tmpl)) path = p;
  }
  ~TempDir() {
    if (!path.empty()) std::system(("rm -rf " + quote(path)).c_str());
  }
  std::string file(const std::string& name) const { return path + "/" + name; }
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
  GgufWriter& kv_u32(const std::string& k, uint32_t v) { key(k, 4); u32(kv_, v); return *this; }
  GgufWriter& kv_i32(const std::string& k, int32_t v) { key(k, 5); u32(kv_, static_cast<uint32_t>(v)); return *this; }
  GgufWriter& kv_f32(const std::string& k, float v) { key(k, 6); f32(kv_, v); return *this; }
  GgufWriter& kv_bool(const std::string& k, bool v) { key(k, 7); u8(kv_, v ? 1 : 0); return *this; }
  GgufWriter& kv_str(const std::string& k, const std::string& v) { key(k, 8); str(kv_, v); return *this; }
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
  // Raw bytes appended to the metadata section, counted as `entries` key/values.
  GgufWriter& kv_raw(const std::vector<uint8_t>& bytes, uint64_t entries = 1) {
    kv_.insert(kv_.end(), bytes.begin(), bytes.end());
    n_kv_ += entries;
    return *this;
  }

  // A tensor: dims in ggml order (ne[0] first), ggml type id, raw data bytes.
  GgufWriter& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type, std::vector<uint8_t> data) {
    tensors_.push_back({name, std::move(dims), type, std::move(data)});
    return *this;
  }
  GgufWriter& tensor_f32(const std::string& name, std::vector<uint64_t> dims, const std::vector<float>& v) {
    std::vector<uint8_t> d(v.size() * 4);
    std::memcpy(d.data(), v.data(), d.size());
    return tensor(name, std::move(dims), 0, std::move(d));
  }

  // The file image. `alignment` also pads the data (general.alignment is written only if set).
  std::vector<uint8_t> build(uint32_t version = 3, uint64_t alignment = 32) const {
    std::vector<uint8_t> b;
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    auto self = const_cast<GgufWriter*>(this);
    self->u32(b, version);
    self->u64(b, tensors_.size());
    self->u64(b, n_kv_);
    b.insert(b.end(), kv_.begin(), kv_.end());
    uint64_t off = 0;
    std::vector<uint64_t> offsets;
    for (const auto& t : tensors_) {
      self->str(b, t.name);
      self->u32(b, static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) self->u64(b, d);
      self->u32(b, t.type);
      self->u64(b, off);
      offsets.push_back(off);
      off += (t.data.size() + alignment - 1) / alignment * alignment;
    }
    while (b.size() % alignment) b.push_back(0);
    for (const auto& t : tensors_) {
      b.insert(b.end(), t.data.begin(), t.data.end());
      while (b.size() % alignment) b.push_back(0);
    }
    return b;
  }

 private:
  struct T {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type;
    std::vector<uint8_t> data;
  };
  void key(const std::string& k, uint32_t type) {
    str(kv_, k);
    u32(kv_, type);
    n_kv_++;
  }
  std::vector<uint8_t> kv_;
  uint64_t n_kv_ = 0;
  std::vector<T> tensors_;
};

}  // namespace test
