// The test runner: every tests/test_*.cpp is linked into one doctest binary (build/tests).
//
// Parallel runs (`make test` starts TEST_JOBS copies through tools/run-tests): each copy gets
// --claim-dir=DIR, walks the same test cases in the same order, and runs a test case only if it is
// the first to claim it (it creates DIR/<index> with O_EXCL); in the other copies that case is an
// empty pass. The slow cases then spread over the copies by themselves, whatever their order.
// Without --claim-dir the binary is an ordinary doctest runner.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__)
// g++ sees this file's own new and delete inlined into each other: malloc and free, as they are
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
// Every operator new of the process, counted (tests/test_scratch.cpp: evaluating tokens allocates
// nothing once the context exists). All the unaligned forms are replaced, so that new and delete
// always pair as malloc and free: a sanitizer's own nothrow new (std::stable_sort's buffer) with
// this delete would be a mismatch.
static std::atomic<unsigned long long> g_news{0};
extern "C" unsigned long long llminfer_test_new_count() {
  return g_news.load(std::memory_order_relaxed);
}
void* operator new(std::size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
#if defined(__cpp_exceptions)
  throw std::bad_alloc();
#else
  std::abort();
#endif
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n) {
  return operator new(n);
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept {
  return operator new(n, t);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace {

struct Claim {
  doctest::detail::funcType body;
  size_t index;
  int state;  // -1 not yet claimed, 0 another copy runs it, 1 this copy runs it
};
std::map<const doctest::detail::TestCase*, Claim> g_claims;
std::string g_claim_dir;
size_t g_ran = 0, g_seen = 0;

// Stands in for every test case's body. A case with subcases enters several times: the claim is
// made on the first entry and kept.
void claimed_body() {
  Claim& c = g_claims.at(doctest::getContextOptions()->currentTest);
  if (c.state < 0) {
    std::string path = g_claim_dir + "/" + std::to_string(c.index);
    int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    if (fd >= 0) {
      close(fd);
      c.state = 1;
    } else if (errno == EEXIST) {
      c.state = 0;
    } else {  // the claim cannot be made: run it here rather than lose it
      std::fprintf(stderr, "tests: cannot create %s (%s); running the case here\n", path.c_str(), std::strerror(errno));
      c.state = 1;
    }
    ++g_seen;
    if (c.state == 1) ++g_ran;
  }
  if (c.state == 1) c.body();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::strncmp(argv[i], "--claim-dir=", 12) == 0)
      g_claim_dir = argv[i] + 12;
    else
      args.push_back(argv[i]);
  }
  if (!g_claim_dir.empty()) {
    size_t index = 0;
    for (const doctest::detail::TestCase& tc : doctest::detail::getRegisteredTests()) {
      // m_test takes no part in the set's ordering, so replacing it in place is safe.
      auto& mutable_tc = const_cast<doctest::detail::TestCase&>(tc);
      g_claims[&tc] = Claim{mutable_tc.m_test, index++, -1};
      mutable_tc.m_test = claimed_body;
    }
  }
  doctest::Context context(int(args.size()), args.data());
  int rc = context.run();
  if (!g_claim_dir.empty() && !context.shouldExit())
    std::printf("[tests] this process ran %zu of the %zu test cases it reached; the other processes ran the rest\n",
                g_ran, g_seen);
  return rc;
}
