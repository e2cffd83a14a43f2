// ==== Unicode: character classes, White_Space, case mapping and folding, NFC ====
// Decodes the tables of 30_unicode_data.hpp once (thread-safe function-local static) into two-stage
// lookup tables: one byte of flags per code point (major general category, White_Space, cased-letter kind,
// "NFC may change this"), one byte of canonical combining class. Text that is not valid UTF-8 is handled byte by byte:
// an invalid byte is a unit of class C (other) that NFC leaves untouched. The chat-template interpreter
// builds its own properties from the same general categories (src/36_jinja_values.hpp).
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Major general category classes, as the pre-tokenizer regexes use them (\p{L}, \p{N}, ...).
enum class UClass : uint8_t { other = 0, letter = 1, mark = 2, number = 3, punct = 4, symbol = 5, separator = 6 };

// General categories, numbered as the generated tables number them (ucd::kCategoryNames, checked below).
// clang-format off
enum class UGc : uint8_t {
  Cn, Cc, Cf, Co, Cs, Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No,
  Pc, Pd, Ps, Pe, Pi, Pf, Po, Sm, Sc, Sk, So, Zs, Zl, Zp, count
};
// clang-format on
constexpr bool ugc_names_match() {
  std::string_view ours = "CnCcCfCoCsLuLlLtLmLoMnMcMeNdNlNoPcPdPsPePiPfPoSmScSkSoZsZlZp";
  return ours.size() == 2 * size_t(UGc::count) && ours == ucd::kCategoryNames;
}
static_assert(ugc_names_match(), "UGc and tools/gen_unicode number the general categories differently");
constexpr UClass ugc_class(UGc gc) {
  return static_cast<UClass>(std::string_view("CLMNPSZ").find(ucd::kCategoryNames[2 * int(gc)]));
}

constexpr uint8_t kUClassMask = 7;
constexpr uint8_t kUWhiteSpace = 8;  // Unicode White_Space (regex \s)
constexpr uint8_t kUNfcUnsafe = 16;  // non-zero combining class, a decomposition, or a composition's 2nd part
constexpr uint8_t kUUpperOnly = 32;  // general category Lu or Lt (letters in \p{Lu}\p{Lt}, not in \p{Ll}\p{Lm}\p{Lo})
constexpr uint8_t kULowerOnly = 64;  // general category Ll

// A 0x110000-entry byte table stored as 4352 blocks of 256, identical blocks shared.
class UTable {
 public:
  void build(const std::vector<uint8_t>& full) {
    stage1_.assign(kBlocks, 0);
    std::unordered_map<std::string, uint16_t> seen;
    for (uint32_t b = 0; b < kBlocks; b++) {
      std::string key(reinterpret_cast<const char*>(full.data()) + b * 256, 256);
      auto it = seen.find(key);
      if (it == seen.end()) {
        auto idx = static_cast<uint16_t>(stage2_.size() / 256);
        stage2_.insert(stage2_.end(), full.begin() + b * 256, full.begin() + (b + 1) * 256);
        it = seen.emplace(std::move(key), idx).first;
      }
      stage1_[b] = it->second;
    }
  }
  uint8_t operator()(uint32_t cp) const {
    if (cp >= 0x110000) return 0;
    return stage2_[static_cast<size_t>(stage1_[cp >> 8]) * 256 + (cp & 255)];
  }
  size_t bytes() const { return stage1_.size() * 2 + stage2_.size(); }

 private:
  static constexpr uint32_t kBlocks = 0x110000 / 256;
  std::vector<uint16_t> stage1_;
  std::vector<uint8_t> stage2_;
};

// A code point -> code point mapping as runs: start, start + step, ... (count code points) map to cp + delta.
struct UMapRun {
  uint32_t start, count, step;
  int32_t delta;
};
using UMap = std::vector<UMapRun>;

struct UnicodeTables {
  UTable flags, ccc;
  UMap lower, fold_overrides;                                          // see case_fold
  std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> decomp;  // cp -> (first, second or 0)
  std::unordered_map<uint64_t, uint32_t> compose;                      // (first << 21 | second) -> composite
};

// Reads one varint of the generated tables (see tools/gen_unicode).
inline uint32_t ucd_varint(const char*& p) {
  uint32_t v = 0;
  int shift = 0;
  for (;;) {
    char c = *p++;
    uint32_t d = c >= 'A' && c <= 'Z'   ? uint32_t(c - 'A')
                 : c >= 'a' && c <= 'z' ? uint32_t(c - 'a' + 26)
                 : c >= '0' && c <= '9' ? uint32_t(c - '0' + 52)
                 : c == '+'             ? 62u
                                        : 63u;
    v |= (d & 31) << shift;
    shift += 5;
    if (!(d & 32)) return v;
  }
}
inline int32_t ucd_unzigzag(uint32_t z) {
  return (z & 1) ? -static_cast<int32_t>((z + 1) >> 1) : static_cast<int32_t>(z >> 1);
}

// Calls f(first code point, count, general category) for runs covering U+0000..U+10FFFF, in order, from
// ucd::kCategories.
template <class F>
inline void ucd_each_category(F&& f) {
  const char* p = ucd::kCategories;
  UGc before[2] = {UGc::Cn, UGc::Cn};  // the categories of cp - 2 and cp - 1
  uint32_t cp = 0;
  while (*p && cp < 0x110000) {
    uint32_t v = ucd_varint(p), len = std::min(v >> 5, 0x110000 - cp), id = v & 31;
    if (id != 31) {  // a run of one category
      f(cp, len, static_cast<UGc>(id));
      cp += len;
      before[0] = len > 1 ? static_cast<UGc>(id) : before[1];
      before[1] = static_cast<UGc>(id);
      continue;
    }
    for (uint32_t k = 0; k < len; k++) {  // each code point has the category of the one two before
      UGc gc = before[0];
      f(cp++, 1u, gc);
      before[0] = before[1];
      before[1] = gc;
    }
  }
  LLMI_ASSERT(cp == 0x110000);
}
// Calls f(first, count) for each range of a range table (varint(gap from previous end), varint(length)).
template <class F>
inline void ucd_each_range(const char* p, F&& f) {
  uint32_t cp = 0;
  while (*p) {
    cp += ucd_varint(p);
    uint32_t len = ucd_varint(p);
    f(cp, len);
    cp += len;
  }
}
// Decodes a mapping table (varint(gap from the previous run's last code point), varint(count * 2 +
// (step == 2)), varint(zigzag(delta))).
inline UMap ucd_map(const char* p) {
  UMap runs;
  uint32_t cp = 0;
  while (*p) {
    cp += ucd_varint(p);
    uint32_t cs = ucd_varint(p);
    UMapRun r{cp, cs >> 1, (cs & 1) ? 2u : 1u, ucd_unzigzag(ucd_varint(p))};
    runs.push_back(r);
    cp = r.start + (r.count - 1) * r.step;
  }
  return runs;
}
// The image of cp under a mapping, when it maps cp (possibly to itself).
inline bool umap_find(const UMap& runs, uint32_t cp, uint32_t& out) {
  auto it = std::upper_bound(runs.begin(), runs.end(), cp, [](uint32_t c, const UMapRun& r) { return c < r.start; });
  if (it == runs.begin()) return false;
  --it;
  uint32_t off = cp - it->start;
  if (off % it->step != 0 || off / it->step >= it->count) return false;
  out = static_cast<uint32_t>(static_cast<int64_t>(cp) + it->delta);
  return true;
}

namespace hangul {
constexpr uint32_t SBase = 0xAC00, LBase = 0x1100, VBase = 0x1161, TBase = 0x11A7;
constexpr uint32_t LCount = 19, VCount = 21, TCount = 28, NCount = VCount * TCount, SCount = LCount * NCount;
}  // namespace hangul

inline void ucd_decode_nfc(UnicodeTables& t, std::vector<uint8_t>& full) {
  std::vector<uint8_t> ccc(0x110000, 0);
  {
    const char* p = ucd::kCombiningClass;
    uint32_t cp = 0;
    while (*p) {
      cp += ucd_varint(p);
      uint32_t len = ucd_varint(p), cls = ucd_varint(p);
      for (uint32_t k = 0; k < len; k++) {
        ccc[cp] = static_cast<uint8_t>(cls);
        full[cp++] |= kUNfcUnsafe;
      }
    }
  }
  {
    const char* p = ucd::kDecompositions;
    uint32_t cp = 0;
    while (*p) {
      cp += ucd_varint(p);
      uint32_t first = ucd_varint(p), second = ucd_varint(p);
      bool composes = first & 1;
      first >>= 1;
      t.decomp.emplace(cp, std::make_pair(first, second));
      full[cp] |= kUNfcUnsafe;
      if (composes) {
        t.compose.emplace((uint64_t(first) << 21) | second, cp);
        full[second] |= kUNfcUnsafe;
      }
    }
  }
  // Hangul: precomposed syllables are stable, but jamo vowels and trailing consonants compose
  for (uint32_t c = hangul::VBase; c < hangul::VBase + hangul::VCount; c++) full[c] |= kUNfcUnsafe;
  for (uint32_t c = hangul::TBase + 1; c < hangul::TBase + hangul::TCount; c++) full[c] |= kUNfcUnsafe;
  t.ccc.build(ccc);
}

inline UnicodeTables build_unicode_tables() {
  UnicodeTables t;
  std::vector<uint8_t> full(0x110000, 0);
  uint8_t by_gc[32] = {};
  for (int g = 0; g < int(UGc::count); g++) {
    auto gc = static_cast<UGc>(g);
    uint8_t kind = gc == UGc::Lu || gc == UGc::Lt ? kUUpperOnly : gc == UGc::Ll ? kULowerOnly : 0;
    by_gc[g] = static_cast<uint8_t>(static_cast<uint8_t>(ugc_class(gc)) | kind);
  }
  ucd_each_category([&](uint32_t cp, uint32_t len, UGc gc) { std::fill_n(full.begin() + cp, len, by_gc[int(gc)]); });
  ucd_each_range(ucd::kWhiteSpace, [&](uint32_t cp, uint32_t len) {
    for (uint32_t k = 0; k < len; k++) full[cp + k] |= kUWhiteSpace;
  });
  ucd_decode_nfc(t, full);
  t.lower = ucd_map(ucd::kLowercase);
  t.fold_overrides = ucd_map(ucd::kCaseFoldOverrides);
  t.flags.build(full);
  return t;
}

inline const UnicodeTables& unicode_tables() {
  static const UnicodeTables t = build_unicode_tables();
  return t;
}

inline uint8_t uflags(uint32_t cp) {
  return unicode_tables().flags(cp);
}
inline UClass uclass(uint32_t cp) {
  return static_cast<UClass>(uflags(cp) & kUClassMask);
}
inline bool is_uletter(uint32_t cp) {
  return uclass(cp) == UClass::letter;
}
inline bool is_unumber(uint32_t cp) {
  return uclass(cp) == UClass::number;
}
inline bool is_uwhitespace(uint32_t cp) {
  return (uflags(cp) & kUWhiteSpace) != 0;
}
inline uint8_t combining_class(uint32_t cp) {
  return unicode_tables().ccc(cp);
}

// The simple lowercase mapping (UnicodeData.txt); cp itself when it has none.
inline uint32_t simple_lower(uint32_t cp) {
  uint32_t out = cp;
  umap_find(unicode_tables().lower, cp, out);
  return out;
}

// Unicode simple case folding (CaseFolding.txt status C and S): the lowercase mapping, but where the
// generated overrides say otherwise.
inline uint32_t case_fold(uint32_t cp) {
  uint32_t out = cp;
  if (umap_find(unicode_tables().fold_overrides, cp, out)) return out;
  return simple_lower(cp);
}

// ---- NFC ----
// Units above U+10FFFF stand for invalid bytes (0x110000 + byte): combining class 0, never composed.
constexpr uint32_t kInvalidByteUnit = 0x110000;

inline void nfc_decompose_append(uint32_t cp, std::vector<uint32_t>& out) {
  using namespace hangul;
  if (cp >= SBase && cp < SBase + SCount) {
    uint32_t s = cp - SBase;
    out.push_back(LBase + s / NCount);
    out.push_back(VBase + (s % NCount) / TCount);
    if (s % TCount) out.push_back(TBase + s % TCount);
    return;
  }
  const auto& d = unicode_tables().decomp;
  auto it = cp < kInvalidByteUnit ? d.find(cp) : d.end();
  if (it == d.end()) {
    out.push_back(cp);
    return;
  }
  nfc_decompose_append(it->second.first, out);  // depth is bounded by the data (at most 4)
  if (it->second.second) nfc_decompose_append(it->second.second, out);
}

inline uint32_t nfc_compose_pair(uint32_t a, uint32_t b) {
  using namespace hangul;
  if (a >= LBase && a < LBase + LCount && b >= VBase && b < VBase + VCount)
    return SBase + ((a - LBase) * VCount + (b - VBase)) * TCount;
  if (a >= SBase && a < SBase + SCount && (a - SBase) % TCount == 0 && b > TBase && b < TBase + TCount)
    return a + (b - TBase);
  if (a >= kInvalidByteUnit || b >= kInvalidByteUnit) return 0;
  const auto& c = unicode_tables().compose;
  auto it = c.find((uint64_t(a) << 21) | b);
  return it == c.end() ? 0 : it->second;
}

// True when NFC leaves `s` unchanged for sure (no code point that NFC could touch).
inline bool nfc_quick_stable(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0, n = s.size();
  while (i < n) {
    if (p[i] < 0x80) {
      i++;
      continue;
    }
    int len = utf8_valid_len(p + i, n - i);
    if (len == 0) {  // an invalid byte: NFC leaves it alone
      i++;
      continue;
    }
    if (p[i] >= 0xCC) {  // everything below U+0300 is stable
      size_t j = i;
      if (uflags(utf8_next(s, j)) & kUNfcUnsafe) return false;
    }
    i += static_cast<size_t>(len);
  }
  return true;
}

// NFC of a span by the full algorithm (decompose, reorder, compose).
inline void nfc_full_append(std::string_view s, std::string& out) {
  std::vector<uint32_t> buf;
  buf.reserve(s.size() + 8);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    if (utf8_valid_len(p + i, s.size() - i) == 0) {
      buf.push_back(kInvalidByteUnit + p[i]);
      i++;
      continue;
    }
    nfc_decompose_append(utf8_next(s, i), buf);
  }
  auto ccc = [](uint32_t c) -> uint8_t { return c >= kInvalidByteUnit ? 0 : combining_class(c); };
  // canonical ordering: stable sort of each run of non-starters by combining class (a merge sort:
  // O(n log n) on a run of 80,000 combining marks, where an insertion sort took seconds)
  std::vector<std::pair<uint8_t, uint32_t>> run;
  for (size_t i = 0; i < buf.size();) {
    if (ccc(buf[i]) == 0) {
      i++;
      continue;
    }
    size_t j = i;
    while (j < buf.size() && ccc(buf[j]) != 0) j++;
    if (j - i > 1) {
      run.clear();
      for (size_t k = i; k < j; k++) run.emplace_back(ccc(buf[k]), buf[k]);
      std::stable_sort(run.begin(), run.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (size_t k = i; k < j; k++) buf[k] = run[k - i].second;
    }
    i = j;
  }
  // canonical composition
  if (!buf.empty()) {
    size_t starter = 0, w = 1;
    uint32_t starter_cp = buf[0];
    int last_class = ccc(starter_cp) ? 256 : 0;
    for (size_t r = 1; r < buf.size(); r++) {
      uint32_t ch = buf[r];
      int cls = ccc(ch);
      uint32_t comp = nfc_compose_pair(starter_cp, ch);
      if (comp && (last_class < cls || last_class == 0)) {
        buf[starter] = comp;
        starter_cp = comp;
        continue;
      }
      if (cls == 0) {
        starter = w;
        starter_cp = ch;
      }
      last_class = cls;
      buf[w++] = ch;
    }
    buf.resize(w);
  }
  for (uint32_t c : buf) {
    if (c >= kInvalidByteUnit)
      out += static_cast<char>(c - kInvalidByteUnit);
    else
      utf8_append(out, c);
  }
}

// Canonical composition of the canonical decomposition (Unicode NFC). Invalid bytes pass through.
// A character that NFC cannot touch (kUNfcUnsafe clear: combining class 0, no decomposition, never the
// second part of a composition) is a safe cut: nothing before it interacts with it or with what follows.
// So only the runs of "unsafe" characters, with the character just before each run, go through the full
// algorithm; everything else is copied.
inline void nfc_append(std::string_view s, std::string& out) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0, emitted = 0, prev = 0;  // prev: start of the last safe character
  while (i < n) {
    int len = p[i] < 0x80 ? 1 : utf8_valid_len(p + i, n - i);
    if (len == 0 || p[i] < 0xCC) {  // ASCII, invalid bytes and everything below U+0300 are safe
      prev = i;
      i += len ? size_t(len) : 1;
      continue;
    }
    size_t j = i;
    if (!(uflags(utf8_next(s, j)) & kUNfcUnsafe)) {
      prev = i;
      i = j;
      continue;
    }
    size_t begin = std::max(prev, emitted), end = j;  // the run of unsafe characters from i
    while (end < n) {
      int l2 = p[end] < 0x80 ? 1 : utf8_valid_len(p + end, n - end);
      if (l2 == 0 || p[end] < 0xCC) break;
      size_t k = end;
      if (!(uflags(utf8_next(s, k)) & kUNfcUnsafe)) break;
      end = k;
    }
    out.append(s.data() + emitted, begin - emitted);
    nfc_full_append(s.substr(begin, end - begin), out);
    emitted = end;
    i = prev = end;
  }
  out.append(s.data() + emitted, n - emitted);
}

inline std::string nfc(std::string_view s) {
  std::string out;
  nfc_append(s, out);
  return out;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
