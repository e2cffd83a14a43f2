// ==== Platform: errors, checked arithmetic, UTF-8, mmap, files, clocks, CPU check ====
namespace llminfer {
inline namespace v0_1 {

LLMI_API_DEF const char* describe(Errc code) noexcept {
  switch (code) {
#define LLMINFER_X(name, text) \
  case Errc::name: return text;
    LLMINFER_ERRC_LIST(LLMINFER_X)
#undef LLMINFER_X
  }
  return "unknown error";
}

LLMI_API_DEF const char* version() noexcept {
  return LLMINFER_VERSION_STRING;
}

namespace detail {

// printf into a std::string (error messages, JSON output).
#if defined(__MINGW32__)
__attribute__((format(gnu_printf, 1, 2)))  // MinGW's own printf (C99 %zu, %lld), not msvcrt's
#elif defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
inline std::string
strf(const char* fmt, ...) {
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

inline Error make_error(Errc code, std::string message) {
  return Error{code, std::move(message)};
}

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

// Integer overflow checks for any integer type T (int64_t in the template language): true when
// a op b does not fit in T (*out is then unspecified). GCC and clang have builtins for them; the
// portable versions (MSVC, and the tests' reference) only compare before computing.
template <class T>
inline bool portable_add_overflow(T a, T b, T* out) {
  constexpr T hi = std::numeric_limits<T>::max(), lo = std::numeric_limits<T>::min();
  if constexpr (std::is_signed_v<T>) {
    if ((b > 0 && a > hi - b) || (b < 0 && a < lo - b)) return true;
  } else {
    if (a > hi - b) return true;
  }
  *out = static_cast<T>(a + b);
  return false;
}
template <class T>
inline bool portable_sub_overflow(T a, T b, T* out) {
  constexpr T hi = std::numeric_limits<T>::max(), lo = std::numeric_limits<T>::min();
  if constexpr (std::is_signed_v<T>) {
    if ((b < 0 && a > hi + b) || (b > 0 && a < lo + b)) return true;
  } else {
    if (a < b) return true;
  }
  *out = static_cast<T>(a - b);
  return false;
}
template <class T>
inline bool portable_mul_overflow(T a, T b, T* out) {
  constexpr T hi = std::numeric_limits<T>::max(), lo = std::numeric_limits<T>::min();
  if (a == 0 || b == 0) {
    *out = 0;
    return false;
  }
  if constexpr (std::is_signed_v<T>) {
    // (integer division truncates towards zero, which is the rounding each bound needs)
    if (a > 0 ? (b > 0 ? a > hi / b : b < lo / a) : (b > 0 ? a < lo / b : a < hi / b)) return true;
  } else {
    if (b > hi / a) return true;
  }
  *out = static_cast<T>(a * b);
  return false;
}
#if defined(__GNUC__) || defined(__clang__)
template <class T>
inline bool add_overflow(T a, T b, T* out) {
  return __builtin_add_overflow(a, b, out);
}
template <class T>
inline bool sub_overflow(T a, T b, T* out) {
  return __builtin_sub_overflow(a, b, out);
}
template <class T>
inline bool mul_overflow(T a, T b, T* out) {
  return __builtin_mul_overflow(a, b, out);
}
#else
template <class T>
inline bool add_overflow(T a, T b, T* out) {
  return portable_add_overflow(a, b, out);
}
template <class T>
inline bool sub_overflow(T a, T b, T* out) {
  return portable_sub_overflow(a, b, out);
}
template <class T>
inline bool mul_overflow(T a, T b, T* out) {
  return portable_mul_overflow(a, b, out);
}
#endif

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
      c = (uint32_t(p[i] & 0x07) << 18) | (uint32_t(p[i + 1] & 0x3F) << 12) | (uint32_t(p[i + 2] & 0x3F) << 6) |
          (p[i + 3] & 0x3F);
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
  // The whole file read into memory this object owns (no mapping: the file may change afterwards).
  static Result<MappedFile> read(const std::string& path);
  // Memory the caller owns and keeps valid (Model::load_from_memory): used in place, never
  // released or unmapped here. `name` stands for the path in messages.
  static MappedFile borrow(const uint8_t* data, uint64_t size, std::string name) {
    MappedFile m;
    m.data_ = data;
    m.size_ = size;
    m.path_ = std::move(name);
    m.borrowed_ = true;
    return m;
  }
  // A copy of `size` bytes at `data` in memory this object owns (out_of_memory when it fails).
  static Result<MappedFile> copy(const uint8_t* data, uint64_t size, std::string name) {
    MappedFile m;
    m.path_ = std::move(name);
    if (size == 0) return m;
    if (size > static_cast<uint64_t>(SIZE_MAX))
      return make_error(Errc::out_of_memory, m.path_ + ": too large to copy into this process");
    m.owned_ = std::malloc(static_cast<size_t>(size));
    if (!m.owned_)
      return make_error(Errc::out_of_memory,
                        strf("%s: cannot allocate %s to copy it", m.path_.c_str(), human_bytes(size).c_str()));
    std::memcpy(m.owned_, data, static_cast<size_t>(size));
    m.data_ = static_cast<const uint8_t*>(m.owned_);
    m.size_ = size;
    return m;
  }
  bool owned() const { return owned_ != nullptr; }
  bool borrowed() const { return borrowed_; }

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
    std::swap(owned_, o.owned_);
    std::swap(borrowed_, o.borrowed_);
#if defined(_WIN32)
    std::swap(mapping_, o.mapping_);
#endif
  }
  // Frees owned memory (read()); true when there was some (then there is no mapping to close).
  bool free_owned() {
    if (!owned_) return false;
    std::free(owned_);
    owned_ = nullptr;
    data_ = nullptr;
    size_ = 0;
    return true;
  }
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  std::string path_;
  void* owned_ = nullptr;
  bool borrowed_ = false;
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

// "the system cannot find the file specified (error 2)": the system's text for a Win32 error code.
inline std::string win_error_text(DWORD code) {
  wchar_t* buf = nullptr;
  DWORD n = FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
                           nullptr, code, 0, reinterpret_cast<wchar_t*>(&buf), 0, nullptr);
  std::string text;
  if (n > 0 && buf) {
    int len = WideCharToMultiByte(CP_UTF8, 0, buf, static_cast<int>(n), nullptr, 0, nullptr, nullptr);
    if (len > 0) {
      text.resize(static_cast<size_t>(len));
      WideCharToMultiByte(CP_UTF8, 0, buf, static_cast<int>(n), text.data(), len, nullptr, nullptr);
    }
  }
  if (buf) LocalFree(buf);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '.'))
    text.pop_back();
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text.empty() ? strf("error %lu", code) : strf("%s (error %lu)", text.c_str(), code);
}

// Paths are UTF-8 and opened with the wide-character API (any file name, not the ANSI code page);
// sizes and the view are 64-bit (a whole file of any size on a 64-bit system).
inline Result<MappedFile> MappedFile::open(const std::string& path) {
  std::wstring wpath = utf8_to_wide(path);
  if (wpath.empty()) return make_error(Errc::io, path + ": cannot open: not a valid UTF-8 path");
  DWORD attrs = GetFileAttributesW(wpath.c_str());
  if (attrs != INVALID_FILE_ATTRIBUTES && (attrs & FILE_ATTRIBUTE_DIRECTORY))
    return make_error(Errc::io, path + ": not a regular file");
  HANDLE f = CreateFileW(wpath.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                         FILE_ATTRIBUTE_NORMAL, nullptr);
  if (f == INVALID_HANDLE_VALUE)
    return make_error(Errc::io, strf("%s: cannot open: %s", path.c_str(), win_error_text(GetLastError()).c_str()));
  if (GetFileType(f) != FILE_TYPE_DISK) {  // NUL, CON, pipes
    CloseHandle(f);
    return make_error(Errc::io, path + ": not a regular file");
  }
  LARGE_INTEGER sz;
  if (!GetFileSizeEx(f, &sz)) {
    std::string e = win_error_text(GetLastError());
    CloseHandle(f);
    return make_error(Errc::io, strf("%s: cannot get the file size: %s", path.c_str(), e.c_str()));
  }
  MappedFile m;
  m.path_ = path;
  m.size_ = static_cast<uint64_t>(sz.QuadPart);
  if (m.size_ == 0) {
    CloseHandle(f);
    return m;
  }
  if (m.size_ > static_cast<uint64_t>(SIZE_MAX)) {
    CloseHandle(f);
    return make_error(Errc::io, path + ": the file is larger than this process can map");
  }
  m.mapping_ = CreateFileMappingW(f, nullptr, PAGE_READONLY, 0, 0, nullptr);
  DWORD e = GetLastError();
  CloseHandle(f);  // the mapping keeps the file open
  if (!m.mapping_) return make_error(Errc::io, strf("%s: cannot map: %s", path.c_str(), win_error_text(e).c_str()));
  m.data_ = static_cast<const uint8_t*>(MapViewOfFile(m.mapping_, FILE_MAP_READ, 0, 0, 0));
  if (!m.data_)
    return make_error(Errc::io, strf("%s: cannot map: %s", path.c_str(), win_error_text(GetLastError()).c_str()));
  return m;
}

inline void MappedFile::close() {
  if (free_owned()) return;
  if (borrowed_) {  // the caller's memory
    data_ = nullptr;
    size_ = 0;
    borrowed_ = false;
    return;
  }
  if (data_) UnmapViewOfFile(data_);
  if (mapping_) CloseHandle(mapping_);
  data_ = nullptr;
  mapping_ = nullptr;
  size_ = 0;
}

inline void MappedFile::release(uint64_t, uint64_t) const {}

inline Result<MappedFile> MappedFile::read(const std::string& path) {
  FILE* f = _wfopen(utf8_to_wide(path).c_str(), L"rb");
  if (!f) return make_error(Errc::io, path + ": cannot open");
  MappedFile m;
  m.path_ = path;
  if (_fseeki64(f, 0, SEEK_END) != 0) {
    std::fclose(f);
    return make_error(Errc::io, path + ": cannot get the file size");
  }
  long long size = _ftelli64(f);
  _fseeki64(f, 0, SEEK_SET);
  if (size < 0 || static_cast<unsigned long long>(size) > static_cast<unsigned long long>(SIZE_MAX)) {
    std::fclose(f);
    return make_error(Errc::io, path + ": cannot get the file size");
  }
  m.owned_ = std::malloc(static_cast<size_t>(std::max<long long>(size, 1)));
  if (!m.owned_) {
    std::fclose(f);
    return make_error(Errc::out_of_memory, path + ": cannot allocate " + human_bytes(static_cast<uint64_t>(size)) +
                                               " to read the file into memory");
  }
  m.data_ = static_cast<const uint8_t*>(m.owned_);
  m.size_ = static_cast<uint64_t>(size);
  size_t got = std::fread(m.owned_, 1, static_cast<size_t>(size), f);
  std::fclose(f);
  if (got != static_cast<size_t>(size)) return make_error(Errc::io, path + ": cannot read the whole file");
  return m;
}

inline bool is_directory(const std::string& path) {
  DWORD a = GetFileAttributesW(utf8_to_wide(path).c_str());
  return a != INVALID_FILE_ATTRIBUTES && (a & FILE_ATTRIBUTE_DIRECTORY);
}
inline bool file_exists(const std::string& path) {
  DWORD a = GetFileAttributesW(utf8_to_wide(path).c_str());
  return a != INVALID_FILE_ATTRIBUTES && !(a & FILE_ATTRIBUTE_DIRECTORY);
}
inline std::vector<std::string> list_directory(const std::string& path, bool = true) {
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
inline uint64_t physical_memory_bytes() {
  MEMORYSTATUSEX ms;
  ms.dwLength = sizeof ms;
  return GlobalMemoryStatusEx(&ms) ? static_cast<uint64_t>(ms.ullTotalPhys) : 0;
}
inline double peak_rss_mb() {
  PROCESS_MEMORY_COUNTERS pmc;
  if (GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc))
    return static_cast<double>(pmc.PeakWorkingSetSize) / (1024.0 * 1024.0);
  return 0;
}
#else
// Opens a regular file for reading. O_NONBLOCK: opening a FIFO (or a device) must not wait for a
// writer; such files are refused once open (fstat says what they are).
inline Result<int> open_regular_file(const std::string& path, uint64_t& size) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return make_error(Errc::io, strf("%s: cannot open: %s", path.c_str(), std::strerror(errno)));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return make_error(Errc::io, strf("%s: cannot stat: %s", path.c_str(), std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(Errc::io, path + (S_ISFIFO(st.st_mode)  ? ": is a pipe (FIFO), not a regular file"
                                        : S_ISDIR(st.st_mode) ? ": is a directory, not a regular file"
                                                              : ": not a regular file"));
  }
  size = static_cast<uint64_t>(st.st_size);
  return fd;
}

inline Result<MappedFile> MappedFile::read(const std::string& path) {
  uint64_t size = 0;
  auto fd = open_regular_file(path, size);
  if (!fd) return fd.error();
  MappedFile m;
  m.path_ = path;
  if (size > (uint64_t(1) << 46) || size > static_cast<uint64_t>(SIZE_MAX)) {
    ::close(*fd);
    return make_error(Errc::out_of_memory, path + ": the file is too large to read into memory");
  }
  m.owned_ = std::malloc(static_cast<size_t>(std::max<uint64_t>(size, 1)));
  if (!m.owned_) {
    ::close(*fd);
    return make_error(Errc::out_of_memory, strf("%s: cannot allocate %s to read the file into memory", path.c_str(),
                                                human_bytes(size).c_str()));
  }
  m.data_ = static_cast<const uint8_t*>(m.owned_);
  m.size_ = size;
  uint64_t got = 0;
  auto* dst = static_cast<uint8_t*>(m.owned_);
  while (got < size) {
    ssize_t n = ::read(*fd, dst + got, static_cast<size_t>(std::min<uint64_t>(size - got, uint64_t(1) << 30)));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : 0;
      ::close(*fd);
      return make_error(
          Errc::io, e ? strf("%s: cannot read: %s", path.c_str(), std::strerror(e))
                      : strf("%s: the file ended after %llu of %llu bytes (it changed while it was read)", path.c_str(),
                             static_cast<unsigned long long>(got), static_cast<unsigned long long>(size)));
    }
    got += static_cast<uint64_t>(n);
  }
  ::close(*fd);
  return m;
}

inline Result<MappedFile> MappedFile::open(const std::string& path) {
  uint64_t size = 0;
  auto ofd = open_regular_file(path, size);
  if (!ofd) return ofd.error();
  int fd = *ofd;
  MappedFile m;
  m.path_ = path;
  m.size_ = size;
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
  if (free_owned()) return;
  if (borrowed_) {  // the caller's memory
    data_ = nullptr;
    size_ = 0;
    borrowed_ = false;
    return;
  }
  if (data_) munmap(const_cast<uint8_t*>(data_), static_cast<size_t>(size_));
  data_ = nullptr;
  size_ = 0;
}

inline void MappedFile::release(uint64_t offset, uint64_t bytes) const {
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0 || !data_ || owned_ || borrowed_ || offset >= size_) return;  // only our own mapping
  uint64_t p = static_cast<uint64_t>(page);
  uint64_t begin = (offset + p - 1) / p * p;
  uint64_t end = std::min(offset + bytes, size_) / p * p;
  if (end > begin) madvise(const_cast<uint8_t*>(data_) + begin, static_cast<size_t>(end - begin), MADV_DONTNEED);
}

inline bool is_directory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
inline bool file_exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
// Names of the regular files in a directory (every entry but . and .. when !regular_only), sorted.
inline std::vector<std::string> list_directory(const std::string& path, bool regular_only = true) {
  std::vector<std::string> out;
  DIR* d = opendir(path.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (!regular_only || file_exists(path_join(path, name))) out.push_back(name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}
// Peak resident memory of this process (MiB).
// Installed memory (0 when unknown).
inline uint64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}
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
// "dispatch": the kernels of several levels, chosen at load (select_kernels, 26_kernels_end).
constexpr const char* simd_compiled() {
#if defined(LLMI_DISPATCH)
  return "dispatch";
#elif defined(LLMI_SIMD_AMX)
  return "avx512+amx";  // the avx512 kernels, with the AMX tiles for matrix products where the OS permits
#elif defined(LLMI_SIMD_AVX512)
  return "avx512";
#elif defined(LLMI_SIMD_AVX2)
  return "avx2";
#elif defined(LLMI_SIMD_NEON)
  return "neon";
#else
  return "scalar";
#endif
}

// What the CPU (and OS) offers, as raw cpuid words. Tests replace cpu_query to fake a CPU.
struct CpuInfo {
  uint32_t l1_ecx = 0, l1_edx = 0;              // leaf 1
  uint32_t l7_ebx = 0, l7_ecx = 0, l7_edx = 0;  // leaf 7, sub-leaf 0
  uint32_t l7s1_eax = 0;                        // leaf 7, sub-leaf 1
  uint32_t e1_ecx = 0;                          // leaf 0x80000001
  uint64_t xcr0 = 0;                            // OS-enabled register state (xgetbv)
};

// Replaceable for tests: 0 or 1 makes cpu_streams_ahead() answer so on any CPU, so that both of
// gemv's paths run where the kernels have them; -1 = ask the CPU.
inline int cpu_streams_ahead_forced = -1;
// The same for cpu_splits_zmm() (the shape of micro_q32's tiles).
inline int cpu_splits_zmm_forced = -1;
// The same for cpu_pairs_rows() (gemv's Q8_0 rows two at a time).
inline int cpu_pairs_rows_forced = -1;

// Whether this process may use the AMX tile registers: Linux hands them out on request
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)), which fails where the CPU or the kernel
// lacks them. Elsewhere: no (the VNNI path runs). Asked once.
inline bool os_grants_amx() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  static const bool ok = [] {
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return ok;
#else
  return false;
#endif
}

// (A dispatch build asks the CPU which kernel level it runs even with LLMINFER_NO_CPU_CHECK.)
#if (defined(__x86_64__) || defined(_M_X64) || defined(__i386__)) && \
    (!defined(LLMINFER_NO_CPU_CHECK) || defined(LLMINFER_DISPATCH))
#if defined(_MSC_VER)
inline void llmi_cpuid(int leaf, int sub, unsigned r[4]) {
  int regs[4];
  __cpuidex(regs, leaf, sub);
  for (int i = 0; i < 4; i++) r[i] = static_cast<unsigned>(regs[i]);
}
inline uint64_t llmi_xgetbv() {
  return _xgetbv(0);
}
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
inline CpuInfo cpu_query_hw() {
  CpuInfo c;
  unsigned r[4];
  llmi_cpuid(0, 0, r);
  unsigned max_leaf = r[0];
  llmi_cpuid(1, 0, r);
  c.l1_ecx = r[2];
  c.l1_edx = r[3];
  if (max_leaf >= 7) {
    llmi_cpuid(7, 0, r);
    c.l7_ebx = r[1];
    c.l7_ecx = r[2];
    c.l7_edx = r[3];
    if (r[0] >= 1) {
      llmi_cpuid(7, 1, r);
      c.l7s1_eax = r[0];
    }
  }
  llmi_cpuid(static_cast<int>(0x80000000u), 0, r);
  if (r[0] >= 0x80000001u) {
    llmi_cpuid(static_cast<int>(0x80000001u), 0, r);
    c.e1_ecx = r[2];
  }
  if ((c.l1_ecx >> 27) & 1) c.xcr0 = llmi_xgetbv();  // OSXSAVE
  return c;
}
// Replaceable for tests (fake a CPU that lacks something); nullptr = ask the hardware.
inline CpuInfo (*cpu_query)() = nullptr;

// Whether cpuid leaf 0 names this vendor (12 characters: "GenuineIntel", "AuthenticAMD").
inline bool cpu_vendor_is(const char* vendor) {
  unsigned r[4];
  llmi_cpuid(0, 0, r);
  char id[12];
  std::memcpy(id, &r[1], 4);  // ebx, edx, ecx
  std::memcpy(id + 4, &r[3], 4);
  std::memcpy(id + 8, &r[2], 4);
  return std::memcmp(id, vendor, 12) == 0;
}

// Whether the matrix-vector products help the CPU stream the weights (gemv, 25_matmul: rows asked
// into L2 ahead of use, Q8_0 rows in groups). Measured faster on Intel Xeon (Sapphire Rapids),
// where one thread's plain sweep reached half the memory bandwidth; other CPUs keep the path that
// was measured on them (bench/RESULTS.md) until measured with this one.
inline bool cpu_streams_ahead() {
  if (cpu_streams_ahead_forced >= 0) return cpu_streams_ahead_forced != 0;
  static const bool intel = cpu_vendor_is("GenuineIntel");
  return intel;
}

// AMD family 0x19 (Zen 3 and Zen 4; its AVX-512 CPUs are Zen 4). Asked once; the answer is a
// plain load after that (the one-token dots ask for every row).
inline std::atomic<signed char> cpu_amd_family_19_known{-1};
inline bool cpu_amd_family_19_ask() {
  unsigned r[4];
  llmi_cpuid(1, 0, r);
  const unsigned base = (r[0] >> 8) & 0xF, family = base + (base == 0xF ? (r[0] >> 20) & 0xFF : 0);
  const bool yes = cpu_vendor_is("AuthenticAMD") && family == 0x19;
  cpu_amd_family_19_known.store(yes ? 1 : 0, std::memory_order_relaxed);
  return yes;
}
LLMI_FORCE_INLINE bool cpu_is_amd_family_19() {
  const signed char known = cpu_amd_family_19_known.load(std::memory_order_relaxed);
  return known >= 0 ? known != 0 : cpu_amd_family_19_ask();
}
// Whether this CPU runs 512-bit operations as two 256-bit halves and loads at most 64 bytes a
// cycle (AMD Zen 4, family 0x19: the only AVX-512 CPUs of that family), where the kernels that
// tile for it (micro_q32) take a shape of their own.
inline bool cpu_splits_zmm() {
  if (cpu_splits_zmm_forced >= 0) return cpu_splits_zmm_forced != 0;
  return cpu_is_amd_family_19();
}

// Whether the AVX-512 one-token dot products ask for the bytes ahead of them (dot_prefetch,
// 21_simd). Measured faster on AMD Zen 4 (the AVX-512 CPUs of family 0x19); other CPUs keep the
// path measured on them (bench/RESULTS.md) until measured with this one.
inline bool cpu_prefetches_dots() {
  return cpu_is_amd_family_19();
}

// Whether gemv takes Q8_0 rows two at a time, one from each half of a task's rows (dotr_q8_0<2>,
// 25_matmul): each row's FMAs are one chain (llama.cpp's order), 4 cycles a block, so two rows
// keep two chains going. Measured faster on AMD Zen 4 (the AVX-512 CPUs of family 0x19), decode
// at 1 thread: qwen3-0.6b Q8_0 32.1 -> 36.8 tokens/s, llama3.2-1b Q8_0 17.4 -> 20.5, smollm2-135m
// Q8_0 142.6 -> 162.3, gemma3-1b Q8_0 22.0 -> 25.8; at 2 threads level to 6% faster. There the
// Intel path of 8 rows at a time (cpu_streams_ahead) is slower on the large files, and
// neighbouring rows read together halve the speed (bench/RESULTS.md). Other CPUs keep the path
// measured on them until measured with this one.
inline bool cpu_pairs_rows() {
  if (cpu_pairs_rows_forced >= 0) return cpu_pairs_rows_forced != 0;
  return cpu_is_amd_family_19();
}

// Whether this CPU (and OS) can run kernel level `level` of a dispatch build: 0 scalar, 1 avx2
// (AVX2, FMA, F16C and the rest of x86-64-v3), 2 avx2+sums (1: the same kernels, prompts in the
// block-sum order), 3 avx512 (x86-64-v4: AVX512F/BW/CD/DQ/VL, with AVX512VNNI), 4 avx512bf16 (3 and
// AVX512_BF16), 5 avx512+amx (4 and AMX-TILE, AMX-INT8, the tile state in XCR0 and the process's
// permission, os_grants_amx). AVX and AVX-512 need the OS to save
// their registers (XCR0).
inline bool cpu_has_kernel_level(int level) {
  const CpuInfo c = cpu_query ? cpu_query() : cpu_query_hw();
  auto bit = [](uint32_t w, int b) { return ((w >> b) & 1) != 0; };
  const bool ymm = (c.xcr0 & 0x6) == 0x6, zmm = (c.xcr0 & 0xE6) == 0xE6;
  const bool v3 = ymm && bit(c.l1_ecx, 0) && bit(c.l1_ecx, 9) && bit(c.l1_ecx, 19) && bit(c.l1_ecx, 20) &&
                  bit(c.l1_ecx, 23) && bit(c.l1_ecx, 22) && bit(c.l1_ecx, 28) && bit(c.l1_ecx, 12) &&
                  bit(c.l1_ecx, 29) && bit(c.l7_ebx, 5) && bit(c.l7_ebx, 3) && bit(c.l7_ebx, 8) && bit(c.e1_ecx, 5);
  const bool v4 = v3 && zmm && bit(c.l7_ebx, 16) && bit(c.l7_ebx, 17) && bit(c.l7_ebx, 28) && bit(c.l7_ebx, 30) &&
                  bit(c.l7_ebx, 31) && bit(c.l7_ecx, 11);
  const bool bf16 = v4 && bit(c.l7s1_eax, 5);
  switch (level) {
    case 0: return true;
    case 1:
    case 2: return v3;
    case 3: return v4;
    case 4: return bf16;
    case 5: return bf16 && bit(c.l7_edx, 24) && bit(c.l7_edx, 25) && (c.xcr0 & 0x60000) == 0x60000 && os_grants_amx();
    default: return false;
  }
}

// Empty when this CPU (and OS) can run what was compiled in; otherwise the missing features.
// Every instruction-set macro the compiler defines is checked, since -march lets it use them
// anywhere (not only in our kernels).
inline std::string cpu_missing_features() {
#if defined(LLMINFER_NO_CPU_CHECK)
  return std::string();
#endif
  const CpuInfo c = cpu_query ? cpu_query() : cpu_query_hw();
  const bool ymm = (c.xcr0 & 0x6) == 0x6, zmm = (c.xcr0 & 0xE6) == 0xE6;
  std::string missing;
  auto need = [&](bool ok, const char* name) {
    if (!ok) missing += missing.empty() ? name : std::string(", ") + name;
  };
  auto bit = [](uint32_t w, int b) { return ((w >> b) & 1) != 0; };
  (void)need;
  (void)bit;
  (void)ymm;
  (void)zmm;
#if defined(__SSE3__)
  need(bit(c.l1_ecx, 0), "SSE3");
#endif
#if defined(__SSSE3__)
  need(bit(c.l1_ecx, 9), "SSSE3");
#endif
#if defined(__SSE4_1__)
  need(bit(c.l1_ecx, 19), "SSE4.1");
#endif
#if defined(__SSE4_2__)
  need(bit(c.l1_ecx, 20), "SSE4.2");
#endif
#if defined(__POPCNT__)
  need(bit(c.l1_ecx, 23), "POPCNT");
#endif
#if defined(__MOVBE__)
  need(bit(c.l1_ecx, 22), "MOVBE");
#endif
#if defined(__AVX__)
  need(bit(c.l1_ecx, 28) && ymm, "AVX");
#endif
#if defined(__FMA__)
  need(bit(c.l1_ecx, 12) && ymm, "FMA");
#endif
#if defined(__F16C__)
  need(bit(c.l1_ecx, 29) && ymm, "F16C");
#endif
#if defined(__AVX2__)
  need(bit(c.l7_ebx, 5) && ymm, "AVX2");
#endif
#if defined(__BMI__)
  need(bit(c.l7_ebx, 3), "BMI1");
#endif
#if defined(__BMI2__)
  need(bit(c.l7_ebx, 8), "BMI2");
#endif
#if defined(__LZCNT__)
  need(bit(c.e1_ecx, 5), "LZCNT");
#endif
#if defined(__AVXVNNI__)
  need(bit(c.l7s1_eax, 4) && ymm, "AVX-VNNI");
#endif
#if defined(__AVX512F__)
  need(bit(c.l7_ebx, 16) && zmm, "AVX512F");
#endif
#if defined(__AVX512DQ__)
  need(bit(c.l7_ebx, 17) && zmm, "AVX512DQ");
#endif
#if defined(__AVX512IFMA__)
  need(bit(c.l7_ebx, 21) && zmm, "AVX512IFMA");
#endif
#if defined(__AVX512CD__)
  need(bit(c.l7_ebx, 28) && zmm, "AVX512CD");
#endif
#if defined(__AVX512BW__)
  need(bit(c.l7_ebx, 30) && zmm, "AVX512BW");
#endif
#if defined(__AVX512VL__)
  need(bit(c.l7_ebx, 31) && zmm, "AVX512VL");
#endif
#if defined(__AVX512VBMI__)
  need(bit(c.l7_ecx, 1) && zmm, "AVX512VBMI");
#endif
#if defined(__AVX512VBMI2__)
  need(bit(c.l7_ecx, 6) && zmm, "AVX512VBMI2");
#endif
#if defined(__GFNI__)
  need(bit(c.l7_ecx, 8), "GFNI");
#endif
#if defined(__VAES__)
  need(bit(c.l7_ecx, 9), "VAES");
#endif
#if defined(__VPCLMULQDQ__)
  need(bit(c.l7_ecx, 10), "VPCLMULQDQ");
#endif
#if defined(__AVX512VNNI__)
  need(bit(c.l7_ecx, 11) && zmm, "AVX512VNNI");
#endif
#if defined(__AVX512BITALG__)
  need(bit(c.l7_ecx, 12) && zmm, "AVX512BITALG");
#endif
#if defined(__AVX512VPOPCNTDQ__)
  need(bit(c.l7_ecx, 14) && zmm, "AVX512VPOPCNTDQ");
#endif
#if defined(__AVX512VP2INTERSECT__)
  need(bit(c.l7_edx, 8) && zmm, "AVX512VP2INTERSECT");
#endif
#if defined(__AVX512FP16__)
  need(bit(c.l7_edx, 23) && zmm, "AVX512FP16");
#endif
#if defined(__AVX512BF16__)
  need(bit(c.l7s1_eax, 5) && zmm, "AVX512BF16");
#endif
  return missing;
}
#elif defined(__aarch64__) && defined(__linux__) && !defined(LLMINFER_NO_CPU_CHECK)
inline CpuInfo (*cpu_query)() = nullptr;
inline bool cpu_has_kernel_level(int level) {
  return level == 0;
}
inline std::string cpu_missing_features() {
  std::string missing;
#if defined(__ARM_FEATURE_DOTPROD)
  if (!(getauxval(AT_HWCAP) & (1ul << 20))) missing = "ASIMDDP (the dot product instructions)";  // HWCAP_ASIMDDP
#endif
  return missing;
}
inline bool cpu_streams_ahead() {
  return cpu_streams_ahead_forced > 0;
}
inline bool cpu_splits_zmm() {
  return cpu_splits_zmm_forced > 0;
}
inline bool cpu_prefetches_dots() {
  return false;
}
inline bool cpu_pairs_rows() {
  return cpu_pairs_rows_forced > 0;
}
#else
inline CpuInfo (*cpu_query)() = nullptr;
inline bool cpu_has_kernel_level(int level) {
  return level == 0;
}
inline std::string cpu_missing_features() {
  return std::string();
}
inline bool cpu_streams_ahead() {
  return cpu_streams_ahead_forced > 0;  // (x86 with LLMINFER_NO_CPU_CHECK: not asked)
}
inline bool cpu_splits_zmm() {
  return cpu_splits_zmm_forced > 0;
}
inline bool cpu_prefetches_dots() {
  return false;
}
inline bool cpu_pairs_rows() {
  return cpu_pairs_rows_forced > 0;
}
#endif

inline Result<void> check_cpu() {
  std::string missing = cpu_missing_features();
  if (missing.empty()) return {};
#if defined(__aarch64__)
  const char* hint = "`make LLMINFER_SIMD=neon` without extra -march flags, or `LLMINFER_SIMD=scalar`";
#else
  const char* hint = "`make LLMINFER_SIMD=avx2` or `LLMINFER_SIMD=scalar`";
#endif
  return make_error(Errc::cpu_unsupported, strf("this program was built for %s, but this CPU (or OS) lacks %s; rebuild "
                                                "with a lower target, e.g. %s",
                                                simd_compiled(), missing.c_str(), hint));
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
