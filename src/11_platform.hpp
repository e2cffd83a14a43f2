// ==== Platform: errors, checked arithmetic, UTF-8, mmap, files, clocks, CPU check ====
namespace llminfer {
inline namespace v0_1 {

inline const char* describe(Errc code) noexcept {
  switch (code) {
#define LLMINFER_X(name, text) \
  case Errc::name:             \
    return text;
    LLMINFER_ERRC_LIST(LLMINFER_X)
#undef LLMINFER_X
  }
  return "unknown error";
}

inline const char* version() noexcept { return LLMINFER_VERSION_STRING; }

namespace detail {

// printf into a std::string (error messages, JSON output).
#if defined(__MINGW32__)
__attribute__((format(gnu_printf, 1, 2)))  // MinGW's own printf (C99 %zu, %lld), not msvcrt's
#elif defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
inline std::string strf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return std::string();
  if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, static_cast<size_t>(n));
  std::string out(static_cast<size_t>(n), '\0');
  va_start(ap, fmt);
  std::vsnprintf(out.data(), out.size() + 1, fmt, ap);
  va_end(ap);
  return out;
}

inline Error make_error(Errc code, std::string message) { return Error{code, std::move(message)}; }

// Human-readable byte count: "512 B", "1.5 KiB", "2 MiB".
inline std::string human_bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return strf("%llu B", static_cast<unsigned long long>(n));
  if (v == std::floor(v)) return strf("%.0f %s", v, units[u]);
  return strf("%.1f %s", v, units[u]);
}

// ---- checked arithmetic (sizes and offsets from files) ----
inline bool add_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  if (a > UINT64_MAX - b) return true;
  *out = a + b;
  return false;
}
inline bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > UINT64_MAX / a) return true;
  *out = a * b;
  return false;
}

// ---- UTF-8 ----
// Length of the valid UTF-8 sequence starting at s[0] (1..4), or 0 if it is not valid
// (overlong forms, surrogates, code points above U+10FFFF and truncated sequences are invalid).
inline int utf8_valid_len(const unsigned char* s, size_t n) {
  if (n == 0) return 0;
  unsigned char c = s[0];
  if (c < 0x80) return 1;
  if (c < 0xC2) return 0;
  if (c < 0xE0) return (n >= 2 && (s[1] & 0xC0) == 0x80) ? 2 : 0;
  if (c < 0xF0) {
    if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0;   // overlong
    if (c == 0xED && s[1] >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c < 0xF5) {
    if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80) return 0;
    if (c == 0xF0 && s[1] < 0x90) return 0;   // overlong
    if (c == 0xF4 && s[1] >= 0x90) return 0;  // > U+10FFFF
    return 4;
  }
  return 0;
}

inline bool utf8_valid(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0, n = s.size();
  while (i < n) {
    int l = utf8_valid_len(p + i, n - i);
    if (l == 0) return false;
    i += static_cast<size_t>(l);
  }
  return true;
}

// Decodes one code point at s[i] and advances i; invalid bytes decode as U+FFFD (one byte each).
inline uint32_t utf8_next(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  int l = utf8_valid_len(p + i, s.size() - i);
  uint32_t c;
  switch (l) {
    case 1: c = p[i]; break;
    case 2: c = (uint32_t(p[i] & 0x1F) << 6) | (p[i + 1] & 0x3F); break;
    case 3: c = (uint32_t(p[i] & 0x0F) << 12) | (uint32_t(p[i + 1] & 0x3F) << 6) | (p[i + 2] & 0x3F); break;
    case 4:
      c = (uint32_t(p[i] & 0x07) << 18) | (uint32_t(p[i + 1] & 0x3F) << 12) |
          (uint32_t(p[i + 2] & 0x3F) << 6) | (p[i + 3] & 0x3F);
      break;
    default: i += 1; return 0xFFFD;
  }
  i += static_cast<size_t>(l);
  return c;
}

inline void utf8_append(std::string& out, uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// A printable rendering of untrusted bytes for error messages: at most `max` bytes, invalid UTF-8
// and control characters escaped as \xNN.
inline std::string printable(std::string_view s, size_t max = 80) {
  std::string out;
  size_t i = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size() && out.size() < max) {
    int l = utf8_valid_len(p + i, s.size() - i);
    if (l == 1 && p[i] >= 0x20 && p[i] != 0x7F) {
      out += static_cast<char>(p[i]);
    } else if (l > 1) {
      out.append(s.data() + i, static_cast<size_t>(l));
    } else {
      out += strf("\\x%02X", p[i]);
      l = 1;
    }
    i += static_cast<size_t>(l);
  }
  if (i < s.size()) out += "...";
  return out;
}

// Last path component, for messages ("model.gguf: ...").
inline std::string base_name(std::string_view path) {
  size_t p = path.find_last_of("/\\");
  return std::string(p == std::string_view::npos ? path : path.substr(p + 1));
}

inline std::string path_join(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (!out.empty() && out.back() != '/' && out.back() != '\\') out += '/';
  out += name;
  return out;
}

// ---- a read-only memory map of a whole file ----
class MappedFile {
 public:
  MappedFile() = default;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& o) noexcept { swap(o); }
  MappedFile& operator=(MappedFile&& o) noexcept {
    if (this != &o) {
      close();
      swap(o);
    }
    return *this;
  }
  ~MappedFile() { close(); }

  static Result<MappedFile> open(const std::string& path);

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }
  // Tells the OS the byte range is no longer needed (after a tensor was repacked elsewhere).
  void release(uint64_t offset, uint64_t bytes) const;

 private:
  void close();
  void swap(MappedFile& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(path_, o.path_);
#if defined(_WIN32)
    std::swap(mapping_, o.mapping_);
#endif
  }
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
#if defined(_WIN32)
  HANDLE mapping_ = nullptr;
#endif
};

#if defined(_WIN32)
inline std::wstring utf8_to_wide(const std::string& s) {
  if (s.empty()) return std::wstring();
  int n = MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), nullptr, 0);
  if (n <= 0) return std::wstring();
  std::wstring w(static_cast<size_t>(n), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, s.data(), static_cast<int>(s.size()), w.data(), n);
  return w;
}

inline Result<MappedFile> MappedFile::open(const std::string& path) {
  std::wstring wpath = utf8_to_wide(path);
  HANDLE f = CreateFileW(wpath.c_str(), GENERIC_READ, FILE_SHARE_READ, nullptr, OPEN_EXISTING,
                         FILE_ATTRIBUTE_NORMAL, nullptr);
  if (f == INVALID_HANDLE_VALUE)
    return make_error(Errc::io, strf("%s: cannot open (error %lu)", path.c_str(), GetLastError()));
  LARGE_INTEGER sz;
  if (!GetFileSizeEx(f, &sz)) {
    CloseHandle(f);
    return make_error(Errc::io, path + ": cannot get the file size");
  }
  MappedFile m;
  m.path_ = path;
  m.size_ = static_cast<uint64_t>(sz.QuadPart);
  if (m.size_ == 0) {
    CloseHandle(f);
    return m;
  }
  m.mapping_ = CreateFileMappingW(f, nullptr, PAGE_READONLY, 0, 0, nullptr);
  CloseHandle(f);
  if (!m.mapping_) return make_error(Errc::io, path + ": cannot map the file");
  m.data_ = static_cast<const uint8_t*>(MapViewOfFile(m.mapping_, FILE_MAP_READ, 0, 0, 0));
  if (!m.data_) return make_error(Errc::io, path + ": cannot map the file");
  return m;
}

inline void MappedFile::close() {
  if (data_) UnmapViewOfFile(data_);
  if (mapping_) CloseHandle(mapping_);
  data_ = nullptr;
  mapping_ = nullptr;
  size_ = 0;
}

inline void MappedFile::release(uint64_t, uint64_t) const {}

inline bool is_directory(const std::string& path) {
  DWORD a = GetFileAttributesW(utf8_to_wide(path).c_str());
  return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY);
}
inline bool file_exists(const std::string& path) {
  DWORD a = GetFileAttributesW(utf8_to_wide(path).c_str());
  return a != INVALID_FILE_ATTRIBUTES && !(a & FILE_ATTRIBUTE_DIRECTORY);
}
inline std::vector<std::string> list_directory(const std::string& path) {
  std::vector<std::string> out;
  WIN32_FIND_DATAW fd;
  HANDLE h = FindFirstFileW(utf8_to_wide(path_join(path, "*")).c_str(), &fd);
  if (h == INVALID_HANDLE_VALUE) return out;
  do {
    if (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) continue;
    int n = WideCharToMultiByte(CP_UTF8, 0, fd.cFileName, -1, nullptr, 0, nullptr, nullptr);
    if (n <= 1) continue;
    std::string name(static_cast<size_t>(n - 1), '\0');
    WideCharToMultiByte(CP_UTF8, 0, fd.cFileName, -1, name.data(), n, nullptr, nullptr);
    out.push_back(name);
  } while (FindNextFileW(h, &fd));
  FindClose(h);
  std::sort(out.begin(), out.end());
  return out;
}
inline double peak_rss_mb() {
  PROCESS_MEMORY_COUNTERS pmc;
  if (GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc))
    return static_cast<double>(pmc.PeakWorkingSetSize) / (1024.0 * 1024.0);
  return 0;
}
#else
inline Result<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(Errc::io, strf("%s: cannot open: %s", path.c_str(), std::strerror(errno)));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return make_error(Errc::io, strf("%s: cannot stat: %s", path.c_str(), std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(Errc::io, path + ": not a regular file");
  }
  MappedFile m;
  m.path_ = path;
  m.size_ = static_cast<uint64_t>(st.st_size);
  if (m.size_ == 0) {
    ::close(fd);
    return m;
  }
  void* p = mmap(nullptr, static_cast<size_t>(m.size_), PROT_READ, MAP_PRIVATE, fd, 0);
  int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) return make_error(Errc::io, strf("%s: cannot map: %s", path.c_str(), std::strerror(e)));
  m.data_ = static_cast<const uint8_t*>(p);
  return m;
}

inline void MappedFile::close() {
  if (data_) munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  data_ = nullptr;
  size_ = 0;
}

inline void MappedFile::release(uint64_t offset, uint64_t bytes) const {
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0 || !data_ || offset >= size_) return;
  uint64_t p = static_cast<uint64_t>(page);
  uint64_t begin = (offset + p - 1) / p * p;
  uint64_t end = std::min(offset + bytes, size_) / p * p;
  if (end > begin)
    madvise(const_cast<uint8_t*>(data_) + begin, static_cast<size_t>(end - begin), MADV_DONTNEED);
}

inline bool is_directory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
inline bool file_exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
// Names of the regular files in a directory, sorted.
inline std::vector<std::string> list_directory(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = opendir(path.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (file_exists(path_join(path, name))) out.push_back(name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}
// Peak resident memory of this process (MiB).
inline double peak_rss_mb() {
#if defined(__linux__)
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    double kib = 0;
    while (std::fgets(line, sizeof line, f)) {
      if (std::strncmp(line, "VmHWM:", 6) == 0) {
        kib = std::strtod(line + 6, nullptr);
        break;
      }
    }
    std::fclose(f);
    if (kib > 0) return kib / 1024.0;
  }
#endif
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0) {
#if defined(__APPLE__)
    return static_cast<double>(ru.ru_maxrss) / (1024.0 * 1024.0);
#else
    return static_cast<double>(ru.ru_maxrss) / 1024.0;
#endif
  }
  return 0;
}
#endif

inline double now_ms() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double, std::milli>(clock::now().time_since_epoch()).count();
}

// ---- CPU check: refuse, with a message, a CPU that lacks what was compiled in ----
// The name of the SIMD path compiled into this translation unit.
inline const char* simd_compiled() {
#if defined(LLMI_SIMD_AVX512)
  return "avx512";
#elif defined(LLMI_SIMD_AVX2)
  return "avx2";
#elif defined(LLMI_SIMD_NEON)
  return "neon";
#else
  return "scalar";
#endif
}

#if (defined(__x86_64__) || defined(_M_X64) || defined(__i386__)) && !defined(LLMINFER_NO_CPU_CHECK)
#if defined(_MSC_VER)
inline void llmi_cpuid(int leaf, int sub, unsigned r[4]) {
  int regs[4];
  __cpuidex(regs, leaf, sub);
  for (int i = 0; i < 4; i++) r[i] = static_cast<unsigned>(regs[i]);
}
inline uint64_t llmi_xgetbv() { return _xgetbv(0); }
#else
inline void llmi_cpuid(int leaf, int sub, unsigned r[4]) {
  __asm__ __volatile__("cpuid" : "=a"(r[0]), "=b"(r[1]), "=c"(r[2]), "=d"(r[3]) : "a"(leaf), "c"(sub));
}
inline uint64_t llmi_xgetbv() {
  unsigned lo, hi;
  __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}
#endif
// Empty when this CPU (and OS) can run what was compiled in; otherwise what is missing.
inline std::string cpu_missing_features() {
  unsigned r1[4], r7[4], r0[4];
  llmi_cpuid(0, 0, r0);
  llmi_cpuid(1, 0, r1);
  bool has7 = r0[0] >= 7;
  if (has7) llmi_cpuid(7, 0, r7);
  else r7[0] = r7[1] = r7[2] = r7[3] = 0;
  bool osxsave = (r1[2] >> 27) & 1;
  uint64_t xcr0 = osxsave ? llmi_xgetbv() : 0;
  bool ymm_os = (xcr0 & 0x6) == 0x6, zmm_os = (xcr0 & 0xE6) == 0xE6;
  std::string missing;
  auto need = [&](bool ok, const char* name) {
    if (!ok) missing += missing.empty() ? name : std::string(", ") + name;
  };
#if defined(__FMA__)
  need(((r1[2] >> 12) & 1) && ymm_os, "FMA");
#endif
#if defined(__F16C__)
  need(((r1[2] >> 29) & 1) && ymm_os, "F16C");
#endif
#if defined(__AVX2__)
  need(((r7[1] >> 5) & 1) && ymm_os, "AVX2");
#endif
#if defined(__AVX512F__)
  need(((r7[1] >> 16) & 1) && zmm_os, "AVX512F");
#endif
#if defined(__AVX512BW__)
  need(((r7[1] >> 30) & 1) && zmm_os, "AVX512BW");
#endif
#if defined(__AVX512VL__)
  need(((r7[1] >> 31) & 1) && zmm_os, "AVX512VL");
#endif
#if defined(__AVX512VNNI__)
  need(((r7[2] >> 11) & 1) && zmm_os, "AVX512VNNI");
#endif
  (void)need;  // unused when the build targets baseline x86-64
  (void)ymm_os;
  (void)zmm_os;
  return missing;
}
#else
inline std::string cpu_missing_features() { return std::string(); }
#endif

inline Result<void> check_cpu() {
  std::string missing = cpu_missing_features();
  if (missing.empty()) return {};
  return make_error(Errc::cpu_unsupported,
                    strf("this program was built for %s, but this CPU (or OS) lacks %s; rebuild "
                         "with a lower target, e.g. `make LLMINFER_SIMD=avx2` or `LLMINFER_SIMD=scalar`",
                         simd_compiled(), missing.c_str()));
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
