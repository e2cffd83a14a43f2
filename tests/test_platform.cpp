// The platform layer: the portable integer-overflow checks (what MSVC gets) against exact 128-bit
// arithmetic and against the GCC/clang builtins, and the file layer where Windows differs from POSIX
// (run under Wine by `make windows-test`): UTF-8 file names (the wide-character APIs), a file larger
// than 4 GiB mapped whole (64-bit sizes: GetFileSizeEx, CreateFileMapping), directory listing.
#define LLMINFER_IMPLEMENTATION
#include <filesystem>
#include <fstream>
#include <limits>

#include "common.hpp"

namespace {

namespace fs = std::filesystem;
namespace d = llminfer::detail;

// a op b computed exactly (128 bits: GCC and clang on 64-bit targets), and whether it fits in T.
__extension__ typedef __int128 i128;
__extension__ typedef unsigned __int128 u128;
template <class T>
bool fits(i128 v) {
  return v >= static_cast<i128>(std::numeric_limits<T>::min()) && v <= static_cast<i128>(std::numeric_limits<T>::max());
}

template <class T>
std::vector<T> edge_values() {
  using L = std::numeric_limits<T>;
  std::vector<T> v = {0,
                      1,
                      2,
                      3,
                      7,
                      L::max(),
                      static_cast<T>(L::max() - 1),
                      static_cast<T>(L::max() / 2),
                      static_cast<T>(L::max() / 2 + 1),
                      static_cast<T>(L::max() / 3)};
  if constexpr (std::is_signed_v<T>) {
    for (T x : std::vector<T>(v)) v.push_back(static_cast<T>(-x));
    v.push_back(L::min());
    v.push_back(static_cast<T>(L::min() + 1));
    v.push_back(static_cast<T>(L::min() / 2));
    v.push_back(static_cast<T>(L::min() / 3));
  }
  // around the square root, where products start to overflow
  T r = static_cast<T>(std::sqrt(static_cast<double>(L::max())));
  for (T dlt = 0; dlt < 3; dlt++) {
    v.push_back(static_cast<T>(r + dlt));
    v.push_back(static_cast<T>(r - dlt));
    if constexpr (std::is_signed_v<T>) v.push_back(static_cast<T>(-(r + dlt)));
  }
  return v;
}

template <class T>
void check_overflow_helpers() {
  int checked = 0;
  for (T a : edge_values<T>()) {
    for (T b : edge_values<T>()) {
      const i128 A = a, B = b;
      // (a product of two 64-bit unsigned values may exceed the signed 128-bit range)
      bool mul_over;
      i128 mul_exact = 0;
      if constexpr (std::is_unsigned_v<T>) {
        const u128 p = static_cast<u128>(a) * static_cast<u128>(b);
        mul_over = p > static_cast<u128>(std::numeric_limits<T>::max());
        if (!mul_over) mul_exact = static_cast<i128>(p);
      } else {
        mul_exact = A * B;
        mul_over = !fits<T>(mul_exact);
      }
      struct Case {
        const char* op;
        bool over;
        i128 exact;
        bool (*portable)(T, T, T*);
        bool (*chosen)(T, T, T*);
      } cases[] = {{"+", !fits<T>(A + B), A + B, d::portable_add_overflow<T>, d::add_overflow<T>},
                   {"-", !fits<T>(A - B), A - B, d::portable_sub_overflow<T>, d::sub_overflow<T>},
                   {"*", mul_over, mul_exact, d::portable_mul_overflow<T>, d::mul_overflow<T>}};
      for (const Case& c : cases) {
        T p = 0, q = 0;
        bool over_p = c.portable(a, b, &p), over_q = c.chosen(a, b, &q);
        const bool over = c.over;
        INFO(static_cast<long long>(a), " ", c.op, " ", static_cast<long long>(b));
        CHECK(over_p == over);
        CHECK(over_q == over);
        if (!over) {
          CHECK(static_cast<i128>(p) == c.exact);
          CHECK(static_cast<i128>(q) == c.exact);
        }
        checked++;
      }
    }
  }
  CHECK(checked > 300);
}

// Writes bytes to a path given in UTF-8 (std::filesystem converts it for the OS: wide on Windows).
fs::path u8(const std::string& s) {
  return fs::path(std::u8string(s.begin(), s.end()));
}

// The toolchain case below: a vector made from a constant list in a loop, passed on by value.
#if defined(__GNUC__)
__attribute__((noinline))
#endif
std::vector<double>
pass_on(std::vector<double> v) {
  return v;
}

}  // namespace

// g++ 12.2 (Debian 12) at -O2 with AVX-512 enabled (-march=native on an AVX-512 CPU) built the
// second list here as {1, 1, 1, 1}, a broadcast of its first value: a wrong-code bug of its SLP
// vectorizer for constant vectors of 64-bit values that end in zeros (found when a per-layer array
// {1, 1, 1, 0} of an archdef test arrived as all ones). The Makefile and CMakeLists.txt build with
// -fno-tree-slp-vectorize under g++ 12; this fails in a build that lacks it.
TEST_CASE("toolchain: constant lists of 64-bit values that end in zeros are built as written") {
  for (int round = 0; round < 2; round++) {
    CHECK(pass_on({0, 0, 0, 0}) == std::vector<double>{0, 0, 0, 0});
    std::vector<double> v = pass_on({1, 1, 1, 0});
    REQUIRE(v.size() == 4);
    CHECK(v[3] == 0);
    CHECK(pass_on({2, 2, 0, 0})[2] == 0);
  }
}

TEST_CASE("platform: the portable overflow checks agree with exact arithmetic and the builtins") {
  check_overflow_helpers<int64_t>();
  check_overflow_helpers<uint64_t>();
  check_overflow_helpers<int32_t>();
  check_overflow_helpers<uint32_t>();
}

TEST_CASE("platform: files with UTF-8 names are mapped, found and listed") {
  test::TempDir dir;
  REQUIRE(!dir.path.empty());
  const std::string name =
      "\xD0\xBC\xD0\xBE\xD0\xB4\xD0\xB5\xD0\xBB\xD1\x8C-\xE2\x82\xAC-\xF0\x9F\xA6\x99.bin";  // модель-€-🦙
  const std::string path = dir.file(name);
  {
    std::ofstream f(u8(path), std::ios::binary);
    f << "llminfer \xE2\x82\xAC";
  }
  REQUIRE(fs::exists(u8(path)));
  auto m = d::MappedFile::open(path);
  REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
  CHECK(m->view() == "llminfer \xE2\x82\xAC");
  CHECK(d::file_exists(path));
  CHECK(!d::is_directory(path));
  CHECK(d::is_directory(dir.path));
  CHECK(d::list_directory(dir.path) == std::vector<std::string>{name});
  // a missing file is an error that names it
  auto missing = d::MappedFile::open(dir.file("\xE2\x82\xAC-missing.gguf"));
  REQUIRE(!missing);
  CHECK(missing.error().code == llminfer::Errc::io);
  CHECK(missing.error().message.find("\xE2\x82\xAC-missing.gguf") != std::string::npos);
  CHECK(missing.error().message.find("cannot open") != std::string::npos);
  // a directory is not mapped
  auto directory = d::MappedFile::open(dir.path);
  REQUIRE(!directory);
  CHECK(directory.error().code == llminfer::Errc::io);
  // (POSIX names the kind, e.g. "is a directory, not a regular file"; Windows says "not a regular file")
  CHECK(directory.error().message.rfind(dir.path + ": ", 0) == 0);
  CHECK(directory.error().message.find("not a regular file") != std::string::npos);
}

TEST_CASE("platform: a file over 4 GiB is mapped whole (64-bit sizes and offsets)") {
  test::TempDir dir;
  REQUIRE(!dir.path.empty());
  const std::string path = dir.file("big.bin");
  const uint64_t size = (uint64_t(5) << 30) + 7;  // sparse: the middle is never written
  {
    std::fstream f(u8(path), std::ios::binary | std::ios::out | std::ios::trunc);
    f << "HEAD";
    f.seekp(static_cast<std::streamoff>(size - 3));
    f << "END";
    REQUIRE(f.good());
  }
  std::error_code ec;
  REQUIRE(fs::file_size(u8(path), ec) == size);
  auto m = d::MappedFile::open(path);
  REQUIRE_MESSAGE(m, (m ? "" : m.error().message));
  CHECK(m->size() == size);
  CHECK(std::string_view(reinterpret_cast<const char*>(m->data()), 4) == "HEAD");
  CHECK(std::string_view(reinterpret_cast<const char*>(m->data() + size - 3), 3) == "END");
  CHECK(m->data()[uint64_t(1) << 32] == 0);  // past 4 GiB, inside the hole
}
