// Renders chat templates with llminfer's interpreter, in the batch format of render_fixed.py:
//   stdin  JSON list of {"template": str, "context": {...}}   (strftime_now fixed at 2024-07-26 14:05:09)
//   stdout JSON list of {"text": str} or {"error": str}
// Built and run by tools/chat-goldens/crosscheck.
#define LLMINFER_IMPLEMENTATION
#include "../../llminfer.hpp"

#include <iostream>
#include <sstream>

using namespace llminfer::detail;

static std::tm fixed_clock() {
  std::tm t{};
  t.tm_year = 124;
  t.tm_mon = 6;
  t.tm_mday = 26;
  t.tm_hour = 14;
  t.tm_min = 5;
  t.tm_sec = 9;
  t.tm_wday = 5;
  t.tm_yday = 207;
  return t;
}

int main() {
  std::stringstream ss;
  ss << std::cin.rdbuf();
  auto jobs = json_parse(ss.str(), "stdin");
  if (!jobs) {
    std::cerr << jobs.error().message << "\n";
    return 2;
  }
  std::string out = "[";
  for (size_t k = 0; k < jobs->items.size(); k++) {
    const Json& job = jobs->items[k];
    auto t = ChatTemplate::parse(job["template"].str);
    llminfer::Result<RenderedPrompt> r = t ? t->render_vars(job["context"], fixed_clock)
                                           : llminfer::Result<RenderedPrompt>(t.error());
    if (k) out += ",";
    out += r ? "{\"text\":" + json_quote(r->text) + "}" : "{\"error\":" + json_quote(r.error().message) + "}";
  }
  out += "]";
  std::cout << out;
  return 0;
}
