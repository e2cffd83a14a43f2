// Unicode tables (generated from Debian's unicode-data by tools/gen_unicode) and NFC.
#define LLMINFER_IMPLEMENTATION
#include <sstream>

#include "common.hpp"

using namespace llminfer::detail;

TEST_CASE("unicode: general category classes") {
  CHECK(uclass('a') == UClass::letter);
  CHECK(uclass('Z') == UClass::letter);
  CHECK(uclass('5') == UClass::number);
  CHECK(uclass(0x00B2) == UClass::number);   // superscript two (No)
  CHECK(uclass(0x00BD) == UClass::number);   // one half (No)
  CHECK(uclass(0x2167) == UClass::number);   // roman numeral eight (Nl)
  CHECK(uclass(0x0661) == UClass::number);   // arabic-indic one (Nd)
  CHECK(uclass(0x0301) == UClass::mark);     // combining acute (Mn): not a letter
  CHECK(uclass(0x093F) == UClass::mark);     // devanagari vowel sign i (Mc)
  CHECK(uclass(0x11F00) == UClass::mark);    // Kawi sign candrabindu (Unicode 15)
  CHECK(uclass(0x11F04) == UClass::letter);  // Kawi letter a (Unicode 15)
  CHECK(uclass(0x31350) == UClass::letter);  // CJK Extension H (Unicode 15)
  CHECK(uclass(0x1E4D0) == UClass::letter);  // Nag Mundari (Unicode 15)
  CHECK(uclass(0x4E00) == UClass::letter);
  CHECK(uclass(0xAC00) == UClass::letter);
  CHECK(uclass('!') == UClass::punct);
  CHECK(uclass('$') == UClass::symbol);
  CHECK(uclass(0x1F600) == UClass::symbol);
  CHECK(uclass(' ') == UClass::separator);
  CHECK(uclass(0x3000) == UClass::separator);
  CHECK(uclass(0x200B) == UClass::other);  // zero width space is Cf
  // cased letter kinds (o200k / tekken classes): Lu and Lt "upper only", Ll "lower only", Lm / Lo neither
  auto kind = [](uint32_t c) { return uflags(c) & (kUUpperOnly | kULowerOnly); };
  CHECK(kind('A') == kUUpperOnly);
  CHECK(kind(0x01C5) == kUUpperOnly);  // Dz with caron (Lt)
  CHECK(kind(0x1F88) == kUUpperOnly);  // Greek alpha with psili and prosgegrammeni (Lt)
  CHECK(kind('a') == kULowerOnly);
  CHECK(kind(0x00DF) == kULowerOnly);  // sharp s (Ll)
  CHECK(kind(0x02B0) == 0);            // modifier letter small h (Lm)
  CHECK(kind(0x4E00) == 0);            // Lo
  CHECK(kind(0x0301) == 0);            // a mark
  CHECK(kind('1') == 0);
  CHECK(uclass(0xFEFF) == UClass::other);
  CHECK(uclass(0x0378) == UClass::other);  // unassigned
  CHECK(uclass(0x10FFFF) == UClass::other);
  CHECK(uclass(0x110000) == UClass::other);  // out of range
}

TEST_CASE("unicode: White_Space is the regex \\s of Oniguruma / Rust") {
  for (uint32_t c : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u,
                     0x2029u, 0x202Fu, 0x205Fu, 0x3000u})
    CHECK_MESSAGE(is_uwhitespace(c), c);
  for (uint32_t c : {0x08u, 0x1Cu, 0x1Fu, 0x200Bu, 0xFEFFu, 0x180Eu, 0x61u, 0x30u})
    CHECK_MESSAGE(!is_uwhitespace(c), c);
}

TEST_CASE("unicode: simple case folding") {
  CHECK(case_fold('A') == 'a');
  CHECK(case_fold('a') == 'a');
  CHECK(case_fold(0x017F) == 's');     // long s
  CHECK(case_fold(0x212A) == 'k');     // Kelvin sign
  CHECK(case_fold(0x0130) == 0x0130);  // capital I with dot: only a full (F/T) folding
  CHECK(case_fold(0x00DF) == 0x00DF);  // sharp s: full folding only
  CHECK(case_fold(0x0100) == 0x0101);  // alternating pairs
  CHECK(case_fold(0x0101) == 0x0101);
  CHECK(case_fold(0x0410) == 0x0430);    // Cyrillic
  CHECK(case_fold(0x10400) == 0x10428);  // Deseret
  CHECK(case_fold(0x1E9E) == 0x00DF);    // capital sharp s (status S)
  // Folding is stored as where it differs from the lowercase mapping (tools/gen_unicode).
  CHECK(simple_lower(0x0130) == 'i');
  CHECK(simple_lower(0x13A0) == 0xAB70);  // Cherokee: lowercase is the newer letters,
  CHECK(case_fold(0x13A0) == 0x13A0);     // but folding keeps the older, uppercase ones
  CHECK(case_fold(0xAB70) == 0x13A0);
  CHECK(simple_lower(0x03C2) == 0x03C2);  // final sigma: no lowercase mapping, folds to sigma
  CHECK(case_fold(0x03C2) == 0x03C3);
}

TEST_CASE("unicode: general categories shared with the template interpreter") {
  int n[int(UGc::count)] = {};
  uint32_t next = 0;
  ucd_each_category([&](uint32_t cp, uint32_t len, UGc gc) {
    CHECK(cp == next);
    next = cp + len;
    n[int(gc)] += static_cast<int>(len);
  });
  CHECK(next == 0x110000u);
  CHECK(n[int(UGc::Lt)] == 31);  // Unicode 15.0
  CHECK(n[int(UGc::Zs)] == 17);
  CHECK(n[int(UGc::Nd)] == 680);
  CHECK(n[int(UGc::Co)] == 137468);
  CHECK(jcase_is_title(0x01C5));
  CHECK(jcase_is_upper(0x2160));   // roman numeral one: Other_Uppercase (Nl)
  CHECK(jcase_is_lower(0x02B0));   // modifier letter small h: Other_Lowercase (Lm)
  CHECK(jcase_ignorable(0x0027));  // apostrophe: Case_Ignorable beyond the categories
  CHECK(jis_digit(0x00B2));        // superscript two: a digit, not a decimal
  CHECK(!jis_decimal(0x00B2));
  CHECK(jis_numeric(0x4E00));  // Unihan's numeric value of 一
  CHECK(jis_space(0x1C));
  CHECK(jis_space(0x3000));
  CHECK(!jis_space(0x200B));
}

TEST_CASE("unicode: NFC examples") {
  CHECK(nfc("Jose\xCC\x81") == "Jos\xC3\xA9");                           // e + acute -> é
  CHECK(nfc("\xEF\xA4\x80") == "\xE8\xB1\x88");                          // U+F900 -> U+8C48 (singleton)
  CHECK(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8") == "\xEA\xB0\x81");  // jamo L V T -> 각
  CHECK(nfc("a\xCC\xA3\xCC\x87") == "\xE1\xBA\xA1\xCC\x87");             // reordering + composition
  CHECK(nfc("a\xCC\x87\xCC\xA3") == "\xE1\xBA\xA1\xCC\x87");
  CHECK(nfc("plain ascii") == "plain ascii");
  CHECK(nfc("\xFF"
            "e\xCC\x81\x80") == "\xFF\xC3\xA9\x80");  // invalid bytes pass through
  CHECK(nfc_quick_stable("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xEA\xB0\x81"));
  CHECK(!nfc_quick_stable("e\xCC\x81"));
}

// Unicode's own conformance file (Debian unicode-data): every NFC column must match. Needs bzcat.
TEST_CASE("unicode: NormalizationTest.txt (NFC columns)") {
  const char* path = "/usr/share/unicode/NormalizationTest.txt.bz2";
  FILE* probe = std::fopen(path, "rb");
  if (!probe) {
    MESSAGE("skipped: " << path << " not found (apt-get install unicode-data)");
    return;
  }
  std::fclose(probe);
  FILE* p = popen((std::string("bzcat ") + path).c_str(), "r");
  REQUIRE(p);
  std::string all;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) all.append(buf, n);
  pclose(p);
  REQUIRE(all.size() > 1000000);
  auto field = [](const std::string& f) {
    std::string s;
    std::istringstream is(f);
    std::string hex;
    while (is >> hex) {
      uint32_t cp = 0;
      std::from_chars(hex.data(), hex.data() + hex.size(), cp, 16);
      utf8_append(s, cp);
    }
    return s;
  };
  size_t lines = 0, failures = 0;
  std::istringstream in(all);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == '@') continue;
    std::vector<std::string> c;
    size_t start = 0;
    for (int k = 0; k < 5; k++) {
      size_t semi = line.find(';', start);
      if (semi == std::string::npos) break;
      c.push_back(field(line.substr(start, semi - start)));
      start = semi + 1;
    }
    if (c.size() != 5) continue;
    lines++;
    bool ok = nfc(c[0]) == c[1] && nfc(c[1]) == c[1] && nfc(c[2]) == c[1] && nfc(c[3]) == c[3] && nfc(c[4]) == c[3];
    if (!ok && failures++ < 5) FAIL_CHECK("NFC mismatch: " << line);
  }
  CHECK(lines > 18000);
  CHECK(failures == 0);
}

TEST_CASE("unicode: canonical ordering of a long run of combining marks is O(n log n)") {
  // a + (U+0316 ccc 220, U+0301 ccc 230) x 80,000: the insertion sort moved each U+0316 past all
  // the U+0301 before it (6.4e9 moves: about 14 s at -O2). Sorted stably, then a + U+0301 composes
  // to U+00E1 and the other U+0301 are blocked by nothing but stay (no composition with U+00E1).
  const int n = 80000;
  std::string in = "a", want = "\xC3\xA1";
  for (int k = 0; k < n; k++) in += "\xCC\x96\xCC\x81";
  for (int k = 0; k < n; k++) want += "\xCC\x96";
  for (int k = 1; k < n; k++) want += "\xCC\x81";
  double t0 = now_ms();
  std::string out = nfc(in);
  double ms = now_ms() - t0;
  CHECK(out == want);
  CHECK(ms < 3000);
  MESSAGE("NFC of 160,000 alternating combining marks: " << ms << " ms");
  // equal classes keep their order (stable): U+0301 and U+0300 are both 230
  CHECK(nfc("e\xCC\x96\xCC\x81\xCC\x80\xCC\x96") == "\xC3\xA9\xCC\x96\xCC\x96\xCC\x80");
}
