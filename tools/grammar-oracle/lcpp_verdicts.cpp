// llama.cpp's own grammar matcher as an oracle: reads a GBNF file, then one input per line on stdin
// (hex-encoded bytes) and prints one verdict per line: "complete", "prefix" or "reject" (or
// "error: ..." for the grammar). Linked against the prebuilt libllama of the llamacpp-oracle
// (tools/grammar-oracle/grammar-oracle builds it). The declarations below are those of llama.cpp's
// internal src/llama-grammar.h (exported from libllama.so, C++ linkage), written out here so that
// the tool needs only the library: llama_grammar_init_impl parses (nullptr vocab: no token
// references), llama_grammar_accept advances every stack by one code point, and the stacks tell the
// verdict (none: reject; an empty one: complete; else prefix), as llama.cpp's test-gbnf-validator.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

struct llama_vocab;
struct llama_grammar;
typedef int32_t llama_token;
struct llama_grammar_element {
  int type;
  uint32_t value;
};
using llama_grammar_stack = std::vector<const llama_grammar_element*>;
using llama_grammar_stacks = std::vector<llama_grammar_stack>;
llama_grammar* llama_grammar_init_impl(const llama_vocab* vocab, const char* grammar_str, const char* grammar_root,
                                       bool lazy, const char** trigger_patterns, size_t num_trigger_patterns,
                                       const llama_token* trigger_tokens, size_t num_trigger_tokens);
void llama_grammar_free_impl(llama_grammar* grammar);
llama_grammar_stacks& llama_grammar_get_stacks(llama_grammar* grammar);
void llama_grammar_accept(llama_grammar* grammar, uint32_t chr);

static std::vector<uint32_t> code_points(const std::string& s, bool& ok) {
  std::vector<uint32_t> out;
  ok = true;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) {
      ok = false;
      return out;
    }
    uint32_t v = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; k++) v = (v << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(v);
    i += n;
  }
  return out;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: lcpp_verdicts GRAMMAR.gbnf < hex-lines\n");
    return 2;
  }
  std::ifstream f(argv[1], std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  std::string line;
  while (std::getline(std::cin, line)) {
    std::string bytes;
    for (size_t i = 0; i + 1 < line.size(); i += 2) bytes += static_cast<char>(std::stoi(line.substr(i, 2), nullptr, 16));
    llama_grammar* g = llama_grammar_init_impl(nullptr, text.c_str(), "root", false, nullptr, 0, nullptr, 0);
    if (!g) {
      std::printf("error: llama.cpp refuses the grammar\n");
      continue;
    }
    bool ok;
    std::vector<uint32_t> cps = code_points(bytes, ok);
    llama_grammar_stacks& stacks = llama_grammar_get_stacks(g);
    const char* verdict = ok ? nullptr : "reject";
    for (size_t i = 0; !verdict && i < cps.size(); i++) {
      llama_grammar_accept(g, cps[i]);
      if (stacks.empty()) verdict = "reject";
    }
    if (!verdict) {
      verdict = "prefix";
      for (const auto& s : stacks)
        if (s.empty()) verdict = "complete";
    }
    std::printf("%s\n", verdict);
    llama_grammar_free_impl(g);
  }
  return 0;
}
