// Inputs for the grammar goldens: random strings of a GBNF grammar's language (complete matches and
// prefixes), made with llminfer's matcher, plus mutations of them (a character inserted, deleted or
// replaced; a cut). Prints one hex-encoded input per line. Whether each input matches is decided by
// llama.cpp (lcpp_verdicts), not by this program: tools/grammar-oracle/grammar-oracle.
//   sample GRAMMAR.gbnf COUNT SEED     (a SCHEMA.json: its grammar; COUNT 0: print the grammar)
#define LLMINFER_IMPLEMENTATION
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <sstream>

#include "../../llminfer.hpp"

using llminfer::detail::GrammarMatcher;

namespace {
uint64_t g_rng = 1;
uint32_t rnd(uint32_t n) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return static_cast<uint32_t>(g_rng % n);
}

std::string hex(const std::string& s) {
  std::string out;
  for (unsigned char c : s) out += llminfer::detail::strf("%02x", c);
  return out;
}

// Character boundaries of valid UTF-8 text.
std::vector<size_t> boundaries(const std::string& s) {
  std::vector<size_t> b{0};
  for (size_t i = 0; i < s.size(); i++)
    if (i + 1 == s.size() || (static_cast<unsigned char>(s[i + 1]) & 0xC0) != 0x80) b.push_back(i + 1);
  return b;
}

// Shortest completion of `state` (breadth-first over bytes), or false.
bool complete(GrammarMatcher& m, int32_t state, std::string& out) {
  std::map<int32_t, std::pair<int32_t, int>> from;  // state -> (previous, byte)
  std::deque<int32_t> q{state};
  from[state] = {-1, -1};
  while (!q.empty() && from.size() < 20000) {
    int32_t s = q.front();
    q.pop_front();
    if (m.accepting(s)) {
      std::string rev;
      for (int32_t c = s; from[c].first >= 0 || from[c].second >= 0; c = from[c].first) rev += static_cast<char>(from[c].second);
      out.append(rev.rbegin(), rev.rend());
      return true;
    }
    for (int b = 0; b < 256; b++) {
      auto n = m.next(s, static_cast<uint8_t>(b));
      if (!n || *n < 0 || from.count(*n)) continue;
      from[*n] = {s, b};
      q.push_back(*n);
    }
  }
  return false;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: sample GRAMMAR.gbnf COUNT SEED\n");
    return 2;
  }
  std::ifstream f(argv[1], std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string text = ss.str();
  const std::string path = argv[1];
  if (path.size() > 5 && path.substr(path.size() - 5) == ".json") {  // a JSON Schema: its grammar
    auto g = llminfer::json_schema_to_grammar(text);
    if (!g) {
      std::fprintf(stderr, "%s\n", g.error().message.c_str());
      return 1;
    }
    text = *g;
  }
  if (std::atoi(argv[2]) == 0) {  // COUNT 0: print the grammar
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  auto core = llminfer::detail::compile_grammar(text);
  if (!core) {
    std::fprintf(stderr, "%s\n", core.error().message.c_str());
    return 1;
  }
  const int count = std::atoi(argv[2]);
  g_rng = static_cast<uint64_t>(std::atoll(argv[3])) * 2654435761u + 1;
  GrammarMatcher m(*core);
  auto start = m.start();
  if (!start) return 1;
  std::vector<std::string> samples;
  for (int k = 0; k < count; k++) {
    std::string s;
    int32_t state = *start;
    const uint32_t limit = 1 + rnd(k % 4 == 0 ? 300 : 60);
    int pending = 0;  // continuation bytes still due
    for (;;) {
      if (pending == 0 && m.accepting(state) && rnd(8) == 0) break;
      if (pending == 0 && s.size() >= limit) {
        if (rnd(4) != 0) complete(m, state, s);  // mostly complete matches, some prefixes
        break;
      }
      std::vector<int> ascii, other;
      for (int b = 0; b < 256; b++) {
        auto n = m.next(state, static_cast<uint8_t>(b));
        if (n && *n >= 0) (b < 0x80 ? ascii : other).push_back(b);
      }
      if (ascii.empty() && other.empty()) break;
      int b = (!ascii.empty() && (other.empty() || rnd(10) < 8)) ? ascii[rnd(static_cast<uint32_t>(ascii.size()))]
                                                                  : other[rnd(static_cast<uint32_t>(other.size()))];
      s += static_cast<char>(b);
      state = *m.next(state, static_cast<uint8_t>(b));
      if (pending > 0) pending--;
      else if (b >= 0xF0) pending = 3;
      else if (b >= 0xE0) pending = 2;
      else if (b >= 0xC0) pending = 1;
    }
    samples.push_back(s);
  }
  const std::string alphabet = "{}[]()\",:;.-+*/=0123456789abcxyz \n\t\\#|<>";
  for (const auto& s : samples) {
    std::printf("%s\n", hex(s).c_str());
    auto b = boundaries(s);
    size_t at = b[rnd(static_cast<uint32_t>(b.size()))];
    switch (rnd(4)) {
      case 0: std::printf("%s\n", hex(s.substr(0, at)).c_str()); break;
      case 1: std::printf("%s\n", hex(s.substr(0, at) + alphabet[rnd(static_cast<uint32_t>(alphabet.size()))] + s.substr(at)).c_str()); break;
      case 2:
        if (b.size() > 2) {
          size_t i = rnd(static_cast<uint32_t>(b.size() - 1));
          std::printf("%s\n", hex(s.substr(0, b[i]) + s.substr(b[i + 1])).c_str());
        }
        break;
      default:
        if (b.size() > 2) {
          size_t i = rnd(static_cast<uint32_t>(b.size() - 1));
          std::printf("%s\n", hex(s.substr(0, b[i]) + alphabet[rnd(static_cast<uint32_t>(alphabet.size()))] + s.substr(b[i + 1])).c_str());
        }
    }
  }
  return 0;
}
