// ==== Tokenizer: byte-level BPE and SentencePiece-style BPE, as Hugging Face `tokenizers` runs them ====
// encode: added/special tokens are split out of the raw text first (leftmost, longest; a trie), then each
// remaining segment is normalized (NFC, space -> U+2581, prefix), pre-tokenized by hand-written scanners
// that implement the split regexes of real models exactly (Oniguruma semantics: \s = White_Space,
// \p{L}/\p{N} from the Unicode tables, (?i) by simple case folding), and each piece is merged by BPE
// (O(n log n): a heap of candidate pairs over a linked list of symbols).
// Two kinds of merge priority: the rank of the pair in the merges list (GPT-2 style files and every
// tokenizer.json), or the score of the merged token (SentencePiece vocabularies in GGUF, which carry
// scores and no merges; this is how SentencePiece and llama.cpp merge).
// Bytes that are not valid UTF-8 are handled one by one as characters of class "other": byte-level BPE
// encodes them as their byte tokens and SentencePiece vocabularies with byte fallback as <0xXX>, so any
// input round-trips through encode/decode.
#ifndef LLMINFER_MAX_PROMPT_BYTES
// Bytes of text one encode call accepts (a prompt, a rendered conversation); more is refused with
// a clear error before any work. Tokenizing takes up to about 50 bytes of memory per input byte,
// so the default bounds that below 1 GB; the environment variable of the same name
// overrides it at run time (a number of bytes, read once).
#define LLMINFER_MAX_PROMPT_BYTES (16ull << 20)
#endif

namespace llminfer {
inline namespace v0_1 {
namespace detail {

inline uint64_t max_prompt_bytes_default() {
  static const uint64_t v = [] {
    uint64_t d = LLMINFER_MAX_PROMPT_BYTES;
    if (const char* e = std::getenv("LLMINFER_MAX_PROMPT_BYTES")) {
      char* end = nullptr;
      unsigned long long x = std::strtoull(e, &end, 10);
      if (end && end != e && *end == 0 && x > 0) d = x;
    }
    return d;
  }();
  return v;
}

// GGUF token types (tokenizer.ggml.token_type).
enum TokenType : uint8_t {
  tok_undefined = 0,
  tok_normal = 1,
  tok_unknown = 2,
  tok_control = 3,
  tok_user_defined = 4,
  tok_unused = 5,
  tok_byte = 6
};

// ---- GPT-2 byte <-> unicode mapping (byte-level BPE vocabularies spell byte b as this code point) ----
inline const std::array<uint16_t, 256>& gpt2_byte_to_cp() {
  static const std::array<uint16_t, 256> table = [] {
    std::array<uint16_t, 256> t{};
    uint16_t next = 256;
    for (int b = 0; b < 256; b++) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[static_cast<size_t>(b)] = printable ? static_cast<uint16_t>(b) : next++;
    }
    return t;
  }();
  return table;
}

// Code point -> byte (-1 if the code point is not part of the mapping).
inline int gpt2_cp_to_byte(uint32_t cp) {
  static const std::array<int16_t, 324> table = [] {
    std::array<int16_t, 324> t{};
    t.fill(-1);
    const auto& fwd = gpt2_byte_to_cp();
    for (int b = 0; b < 256; b++) t[fwd[static_cast<size_t>(b)]] = static_cast<int16_t>(b);
    return t;
  }();
  return cp < table.size() ? table[cp] : -1;
}

// Raw bytes of a byte-level vocabulary string; false if it uses a code point outside the mapping.
inline bool gpt2_unmap(std::string_view s, std::string& out) {
  out.clear();
  size_t i = 0;
  while (i < s.size()) {
    if (utf8_valid_len(reinterpret_cast<const unsigned char*>(s.data()) + i, s.size() - i) == 0) return false;
    int b = gpt2_cp_to_byte(utf8_next(s, i));
    if (b < 0) return false;
    out += static_cast<char>(b);
  }
  return true;
}

inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a, then a final mix
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 32);
}

inline size_t table_size_for(size_t n) {
  size_t cap = 16;
  while (cap < n * 2 + 16) cap <<= 1;
  return cap;
}

// ---- string -> id, open addressing; the strings live in one arena ----
// A slot holds (32-bit hash fingerprint << 32 | entry + 1), so a probe touches the arena only on a likely hit.
class StringIndex {
 public:
  void reserve(size_t n, size_t bytes) {
    slots_.assign(table_size_for(n), 0);
    arena_.reserve(bytes);
    off_.reserve(n + 1);
    ids_.reserve(n);
  }
  // Adds (or replaces: the last id given for a string wins) a key.
  void add(std::string_view key, int32_t id) {
    if (slots_.empty() || (ids_.size() + 1) * 2 > slots_.size()) grow();
    uint64_t h = hash_bytes(key);
    uint64_t fp = h >> 32;
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      uint64_t e = slots_[i];
      if (e == 0) {
        slots_[i] = (fp << 32) | (ids_.size() + 1);
        if (off_.empty()) off_.push_back(0);
        arena_.append(key);
        off_.push_back(static_cast<uint32_t>(arena_.size()));
        ids_.push_back(id);
        return;
      }
      if ((e >> 32) == fp && key_of((e & 0xffffffffu) - 1) == key) {
        ids_[(e & 0xffffffffu) - 1] = id;
        return;
      }
    }
  }
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    uint64_t h = hash_bytes(key);
    uint64_t fp = h >> 32;
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      uint64_t e = slots_[i];
      if (e == 0) return -1;
      if ((e >> 32) == fp && key_of((e & 0xffffffffu) - 1) == key) return ids_[(e & 0xffffffffu) - 1];
    }
  }
  size_t size() const { return ids_.size(); }

 private:
  std::string_view key_of(uint64_t k) const { return std::string_view(arena_).substr(off_[k], off_[k + 1] - off_[k]); }
  void grow() {
    std::vector<int32_t> old_ids = std::move(ids_);
    std::vector<uint32_t> old_off = std::move(off_);
    std::string old_arena = std::move(arena_);
    slots_.assign(table_size_for(std::max<size_t>(old_ids.size() * 2, 64)), 0);
    ids_.clear();
    off_.clear();
    arena_.clear();
    for (size_t k = 0; k < old_ids.size(); k++)
      add(std::string_view(old_arena).substr(old_off[k], old_off[k + 1] - old_off[k]), old_ids[k]);
  }
  std::vector<uint64_t> slots_;  // 0 = empty
  std::string arena_;
  std::vector<uint32_t> off_;
  std::vector<int32_t> ids_;
};

// ---- (left id, right id) -> (rank, merged id), open addressing ----
class MergeTable {
 public:
  void reserve(size_t n) { slots_.assign(table_size_for(n), Slot{}); }
  // The first occurrence of a pair keeps its rank (Hugging Face builds the map the same way... and a
  // repeated pair never changes the result of a well-formed file).
  void add(int32_t left, int32_t right, int32_t rank, int32_t merged) {
    if (slots_.empty() || (n_ + 1) * 2 > slots_.size()) rehash(std::max<size_t>(n_ * 2, 64));
    uint64_t key = pack(left, right);
    size_t mask = slots_.size() - 1;
    for (size_t h = mix(key) & mask;; h = (h + 1) & mask) {
      if (slots_[h].key == kEmpty) {
        slots_[h] = Slot{key, rank, merged};
        n_++;
        return;
      }
      if (slots_[h].key == key) return;
    }
  }
  // Rank and merged id, or false.
  bool find(int32_t left, int32_t right, int32_t& rank, int32_t& merged) const {
    if (slots_.empty() || left < 0 || right < 0) return false;
    uint64_t key = pack(left, right);
    size_t mask = slots_.size() - 1;
    for (size_t h = mix(key) & mask;; h = (h + 1) & mask) {
      const Slot& s = slots_[h];
      if (s.key == kEmpty) return false;
      if (s.key == key) {
        rank = s.rank;
        merged = s.merged;
        return true;
      }
    }
  }
  size_t size() const { return n_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0, merged = 0;
  };
  static uint64_t pack(int32_t l, int32_t r) { return (uint64_t(uint32_t(l)) << 32) | uint32_t(r); }
  static uint64_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
  }
  void rehash(size_t n) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(table_size_for(n), Slot{});
    n_ = 0;
    for (const Slot& s : old)
      if (s.key != kEmpty) add(int32_t(s.key >> 32), int32_t(s.key & 0xffffffffu), s.rank, s.merged);
  }
  std::vector<Slot> slots_;
  size_t n_ = 0;
};

// ---- added / special tokens: a byte trie, matched leftmost-longest on the raw text ----
class TokenTrie {
 public:
  TokenTrie() { nodes_.push_back(Node{}); }
  void add(std::string_view text, int32_t id) {
    if (text.empty()) return;
    uint32_t n = 0;
    for (unsigned char c : text) {
      int32_t child = next(n, c);
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_.push_back(Node{});
        if (n == 0)
          root_[c] = child;
        else
          edges_.emplace((uint64_t(n) << 8) | c, child);
      }
      n = static_cast<uint32_t>(child);
    }
    if (nodes_[n].token < 0) nodes_[n].token = id;  // the first token given for a text wins
    max_len_ = std::max(max_len_, text.size());
    n_tokens_++;
  }
  int32_t next(uint32_t node, unsigned char c) const {
    if (node == 0) return root_[c];
    auto it = edges_.find((uint64_t(node) << 8) | c);
    return it == edges_.end() ? -1 : it->second;
  }
  int32_t token_at(uint32_t node) const { return nodes_[node].token; }
  bool can_start(unsigned char c) const { return root_[c] >= 0; }
  size_t n_tokens() const { return n_tokens_; }

 private:
  struct Node {
    int32_t token = -1;
  };
  std::vector<Node> nodes_;
  std::array<int32_t, 256> root_ = [] {
    std::array<int32_t, 256> a{};
    a.fill(-1);
    return a;
  }();
  std::unordered_map<uint64_t, int32_t> edges_;
  size_t max_len_ = 0, n_tokens_ = 0;
};

// ---- normalizers and pre-tokenizers (what a tokenizer.json or a GGUF `pre` name describes) ----
struct NormOp {
  enum class Kind : uint8_t {
    nfc,             // Unicode NFC
    replace,         // every `from` -> `to` (literal)
    prepend,         // `to` in front of a non-empty segment (Hugging Face Prepend)
    prepend_if_not,  // `to` in front unless the segment already starts with it (ByteLevel / Metaspace prefix)
  } kind;
  std::string from, to;
  bool first_segment_only = false;  // Metaspace prepend_scheme "first"
};

struct PreStage {
  enum class Kind : uint8_t {
    gpt2,         // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    llama3,       // (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,k}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    o200k,        // [^\r\n\p{L}\p{N}]?U*L+C?|[^\r\n\p{L}\p{N}]?U+L*C?|\p{N}{1,k}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|
                  // \s+(?!\S)|\s+  with U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], L = [\p{Ll}\p{Lm}\p{Lo}\p{M}], C = the
                  // (?i) contractions (gpt-4o / llama-4; tekken: \p{N} single and no contractions)
    digits,       // Hugging Face Digits: numeric characters isolated (one by one, or in runs)
    punct_runs,   // [\p{P}$+<=>^~|]+ isolated (llama.cpp's default BPE pre-tokenizer)
    number_runs,  // \p{N}+ isolated
    ascii_digit3,  // [0-9][0-9][0-9] isolated
    literal,       // split on a literal string with a Hugging Face SplitDelimiterBehavior
  } kind;
  int digit_max = 3;            // llama3: \p{N}{1,digit_max}
  bool marks_in_words = false;  // qwen3.5: [\p{L}\p{M}]+ words, punctuation excludes \p{M}
  bool contractions = true;     // o200k: the optional (?i:'s|'t|'re|'ve|'m|'ll|'d) after a word
  bool individual = true;       // digits
  enum class Behavior : uint8_t { removed, isolated, merged_with_previous, merged_with_next, contiguous };
  Behavior behavior = Behavior::isolated;
  std::string literal_text;
};

// A segment decoded into code points, with class flags and byte offsets (invalid bytes: class other).
struct Units {
  std::vector<uint32_t> cp;
  std::vector<uint8_t> fl;
  std::vector<uint32_t> off;  // size n + 1
  void decode(std::string_view s) {
    cp.clear();
    fl.clear();
    off.clear();
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    cp.reserve(s.size());  // exact upper bounds: growing by doubling would use up to twice that
    fl.reserve(s.size());
    off.reserve(s.size() + 1);
    size_t i = 0;
    while (i < s.size()) {
      off.push_back(static_cast<uint32_t>(i));
      if (p[i] < 0x80) {
        cp.push_back(p[i]);
        fl.push_back(uflags(p[i]));
        i++;
        continue;
      }
      int len = utf8_valid_len(p + i, s.size() - i);
      if (len == 0) {
        cp.push_back(kInvalidByteUnit + p[i]);
        fl.push_back(0);
        i++;
        continue;
      }
      uint32_t c = utf8_next(s, i);
      cp.push_back(c);
      fl.push_back(uflags(c));
    }
    off.push_back(static_cast<uint32_t>(s.size()));
  }
  size_t size() const { return cp.size(); }
};

struct URange {
  uint32_t b, e;  // unit indexes [b, e)
};

namespace pretok {

inline UClass cls(const Units& u, size_t i) {
  return static_cast<UClass>(u.fl[i] & kUClassMask);
}
inline bool ws(const Units& u, size_t i) {
  return (u.fl[i] & kUWhiteSpace) != 0;
}
inline bool is_l(const Units& u, size_t i) {
  return cls(u, i) == UClass::letter;
}
inline bool is_n(const Units& u, size_t i) {
  return cls(u, i) == UClass::number;
}
inline bool is_crlf(const Units& u, size_t i) {
  return u.cp[i] == '\r' || u.cp[i] == '\n';
}

inline void emit(std::vector<URange>& out, size_t b, size_t e) {
  if (e > b) out.push_back(URange{static_cast<uint32_t>(b), static_cast<uint32_t>(e)});
}

// Contractions: 's 't 'm 'd (length 2) or 're 've 'll (length 3) at i; 0 if none. `fold`: (?i) matching.
inline size_t contraction(const Units& u, size_t i, size_t e, bool fold) {
  if (u.cp[i] != '\'' || i + 1 >= e) return 0;
  auto f = [&](size_t k) { return fold ? case_fold(u.cp[k]) : u.cp[k]; };
  uint32_t a = f(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= e) return 0;
  uint32_t b = f(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// A run of White_Space starting at i (i is whitespace): the end of the \s+(?!\S) | \s+ match.
inline size_t whitespace_tail(const Units& u, size_t i, size_t e) {
  size_t j = i;
  while (j < e && ws(u, j)) j++;
  if (j < e && j - i > 1) return j - 1;  // \s+(?!\S): leave the last one to the next word
  return j;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
inline void gpt2(const Units& u, size_t b, size_t e, std::vector<URange>& out) {
  size_t i = b;
  while (i < e) {
    if (size_t c = contraction(u, i, e, false)) {
      emit(out, i, i + c);
      i += c;
      continue;
    }
    size_t k = (u.cp[i] == ' ' && i + 1 < e) ? i + 1 : i;  // the optional leading space
    size_t j = k;
    if (is_l(u, k)) {
      while (j < e && is_l(u, j)) j++;
    } else if (is_n(u, k)) {
      while (j < e && is_n(u, j)) j++;
    } else if (!ws(u, k)) {
      while (j < e && !ws(u, j) && !is_l(u, j) && !is_n(u, j)) j++;
    } else {
      j = whitespace_tail(u, i, e);
    }
    emit(out, i, j);
    i = j;
  }
}

// Llama 3 / Qwen 2 family (digit_max 3 / 1; qwen3.5 puts marks into words):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,k}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
inline void llama3(const Units& u, size_t b, size_t e, int digit_max, bool marks, std::vector<URange>& out) {
  auto word = [&](size_t i) { return is_l(u, i) || (marks && cls(u, i) == UClass::mark); };
  auto punct = [&](size_t i) {
    return !ws(u, i) && !is_l(u, i) && !is_n(u, i) && !(marks && cls(u, i) == UClass::mark);
  };
  size_t i = b;
  while (i < e) {
    if (size_t c = contraction(u, i, e, true)) {
      emit(out, i, i + c);
      i += c;
      continue;
    }
    size_t j = i;
    if (word(i) || (i + 1 < e && !is_crlf(u, i) && !is_l(u, i) && !is_n(u, i) && word(i + 1))) {
      j = word(i) ? i + 1 : i + 2;
      while (j < e && word(j)) j++;
    } else if (is_n(u, i)) {
      j = i + 1;
      while (j < e && is_n(u, j) && j - i < static_cast<size_t>(digit_max)) j++;
    } else if (punct(i) || (u.cp[i] == ' ' && i + 1 < e && punct(i + 1))) {
      j = punct(i) ? i + 1 : i + 2;
      while (j < e && punct(j)) j++;
      while (j < e && is_crlf(u, j)) j++;
    } else if (ws(u, i)) {
      size_t run = i;
      while (run < e && ws(u, run)) run++;
      size_t last_nl = e;
      for (size_t k = i; k < run; k++)
        if (is_crlf(u, k)) last_nl = k;
      j = last_nl != e ? last_nl + 1 : whitespace_tail(u, i, e);  // \s*[\r\n]+ first
    } else {
      j = i + 1;  // not reachable: every unit is a letter, a number, whitespace or "other"
    }
    emit(out, i, j);
    i = j;
  }
}

// o200k (gpt-4o, llama-4) and tekken (digit_max 1, no contractions), with the regex engine's leftmost-first
// backtracking made explicit:
//   [^\r\n\p{L}\p{N}]?U*L+C? | [^\r\n\p{L}\p{N}]?U+L*C? | \p{N}{1,k} | ?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ |
//   \s+(?!\S) | \s+
// U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], L = [\p{Ll}\p{Lm}\p{Lo}\p{M}] (they share Lm, Lo and marks), C = contractions.
inline void o200k(const Units& u, size_t b, size_t e, int digit_max, bool contractions, std::vector<URange>& out) {
  auto mark = [&](size_t i) { return cls(u, i) == UClass::mark; };
  auto up = [&](size_t i) { return mark(i) || (is_l(u, i) && !(u.fl[i] & kULowerOnly)); };
  auto low = [&](size_t i) { return mark(i) || (is_l(u, i) && !(u.fl[i] & kUUpperOnly)); };
  auto prefix = [&](size_t i) { return !is_crlf(u, i) && !is_l(u, i) && !is_n(u, i); };
  auto punct = [&](size_t i) { return !ws(u, i) && !is_l(u, i) && !is_n(u, i); };
  // the end of U*L+ from p, or 0 when it does not match: U* takes the longest run, then gives back until
  // L+ can start (a shared Lm/Lo/mark inside the run, or an Ll right after it)
  auto upper_lower = [&](size_t p) -> size_t {
    size_t k = p;
    while (k < e && up(k)) k++;
    for (size_t s = k + 1; s-- > p;) {
      if (s < e && low(s)) {
        size_t j = s + 1;
        while (j < e && low(j)) j++;
        return j;
      }
    }
    return 0;
  };
  auto upper_then_lower = [&](size_t p) -> size_t {  // U+L*
    if (p >= e || !up(p)) return 0;
    size_t j = p;
    while (j < e && up(j)) j++;
    while (j < e && low(j)) j++;
    return j;
  };
  auto with_contraction = [&](size_t j) {
    if (contractions && j < e)
      if (size_t c = contraction(u, j, e, true)) return j + c;
    return j;
  };
  size_t i = b;
  while (i < e) {
    size_t j = 0;
    bool pre = prefix(i) && i + 1 < e;
    if (pre) j = upper_lower(i + 1);
    if (!j) j = upper_lower(i);
    if (!j && pre) j = upper_then_lower(i + 1);
    if (!j) j = upper_then_lower(i);
    if (j) {
      j = with_contraction(j);
    } else if (is_n(u, i)) {
      j = i + 1;
      while (j < e && is_n(u, j) && j - i < static_cast<size_t>(digit_max)) j++;
    } else if (punct(i) || (u.cp[i] == ' ' && i + 1 < e && punct(i + 1))) {
      j = punct(i) ? i + 1 : i + 2;
      while (j < e && punct(j)) j++;
      while (j < e && (is_crlf(u, j) || u.cp[j] == '/')) j++;
    } else if (ws(u, i)) {
      size_t run = i;
      while (run < e && ws(u, run)) run++;
      size_t last_nl = e;
      for (size_t k = i; k < run; k++)
        if (is_crlf(u, k)) last_nl = k;
      j = last_nl != e ? last_nl + 1 : whitespace_tail(u, i, e);
    } else {
      j = i + 1;  // not reachable: every unit is a letter, a number, whitespace or "other"
    }
    emit(out, i, j);
    i = j;
  }
}

// Isolate the units for which `in` holds: one by one, or as runs.
template <class Pred>
inline void isolate(size_t b, size_t e, bool one_by_one, Pred in, std::vector<URange>& out) {
  size_t i = b;
  while (i < e) {
    size_t j = i + 1;
    if (in(i)) {
      if (!one_by_one)
        while (j < e && in(j)) j++;
    } else {
      while (j < e && !in(j)) j++;
    }
    emit(out, i, j);
    i = j;
  }
}

inline void ascii_digit3(const Units& u, size_t b, size_t e, std::vector<URange>& out) {
  auto d = [&](size_t k) { return u.cp[k] >= '0' && u.cp[k] <= '9'; };
  size_t i = b, start = b;
  while (i + 3 <= e) {
    if (d(i) && d(i + 1) && d(i + 2)) {
      emit(out, start, i);
      emit(out, i, i + 3);
      i += 3;
      start = i;
    } else {
      i++;
    }
  }
  emit(out, start, e);
}

inline void literal(const Units& u, size_t b, size_t e, const std::vector<uint32_t>& lit, PreStage::Behavior beh,
                    std::vector<URange>& out) {
  using B = PreStage::Behavior;
  if (lit.empty()) {
    emit(out, b, e);
    return;
  }
  std::vector<URange> parts;  // alternating text / match, match marked by a flag vector
  std::vector<bool> is_match;
  size_t i = b, start = b;
  while (i + lit.size() <= e) {
    bool m = true;
    for (size_t k = 0; k < lit.size() && m; k++) m = u.cp[i + k] == lit[k];
    if (m) {
      if (i > start) {
        parts.push_back(URange{uint32_t(start), uint32_t(i)});
        is_match.push_back(false);
      }
      parts.push_back(URange{uint32_t(i), uint32_t(i + lit.size())});
      is_match.push_back(true);
      i += lit.size();
      start = i;
    } else {
      i++;
    }
  }
  if (e > start) {
    parts.push_back(URange{uint32_t(start), uint32_t(e)});
    is_match.push_back(false);
  }
  size_t k = 0;
  while (k < parts.size()) {
    URange r = parts[k];
    switch (beh) {
      case B::removed:
        if (!is_match[k]) emit(out, r.b, r.e);
        k++;
        break;
      case B::isolated:
        emit(out, r.b, r.e);
        k++;
        break;
      case B::contiguous: {
        size_t j = k + 1;
        if (is_match[k])
          while (j < parts.size() && is_match[j]) r.e = parts[j++].e;
        emit(out, r.b, r.e);
        k = j;
        break;
      }
      case B::merged_with_previous:
        if (!is_match[k] && k + 1 < parts.size() && is_match[k + 1]) {
          r.e = parts[k + 1].e;
          k += 2;
        } else {
          k++;
        }
        emit(out, r.b, r.e);
        break;
      case B::merged_with_next:
        if (is_match[k] && k + 1 < parts.size() && !is_match[k + 1]) {
          r.e = parts[k + 1].e;
          k += 2;
        } else {
          k++;
        }
        emit(out, r.b, r.e);
        break;
    }
  }
}

}  // namespace pretok

class StreamDecoder;

class Tokenizer {
 public:
  // Builds from the model description: a GGUF vocabulary (tokenizer.ggml.*) or a Hugging Face
  // tokenizer.json (+ tokenizer_config.json, generation_config.json) of a model directory.
  static Result<std::shared_ptr<const Tokenizer>> build(const ModelDesc& desc);

  // add_special: BOS/EOS as the model asks; parse_special: special-token text in `text` becomes control tokens.
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special, bool parse_special) const;
  // Like encode(text, add_special, /*parse_special=*/true) but special tokens are NOT recognised inside the
  // byte ranges `no_special` (half-open [begin,end) offsets into `text`; they hold message content rendered by
  // a chat template). Pre-tokenization and merges still run over the whole text exactly as encode() would.
  Result<std::vector<int32_t>> encode_prompt(std::string_view text,
                                             std::span<const std::pair<size_t, size_t>> no_special,
                                             bool add_special) const;
  // The most bytes encode() and encode_prompt() accept (0: LLMINFER_MAX_PROMPT_BYTES or its
  // environment variable).
  void set_max_bytes(uint64_t n) { max_bytes_ = n; }
  uint64_t max_bytes() const { return max_bytes_ ? max_bytes_ : max_prompt_bytes_default(); }
  // Raw bytes (invalid UTF-8 only if the tokens are). Ids out of range contribute nothing.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  std::string_view token_bytes(int32_t id) const;   // the bytes this token contributes when decoded
  const std::string& token_text(int32_t id) const;  // the vocabulary string ("" when out of range)
  int32_t n_vocab() const { return static_cast<int32_t>(text_.size()); }
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  bool is_eog(int32_t id) const { return in_range(id) && (flags_[size_t(id)] & kEog); }
  // A special token in the Hugging Face sense (control or unknown): parsed only when asked, skipped by
  // decode(skip_special).
  bool is_control(int32_t id) const { return in_range(id) && (flags_[size_t(id)] & kSpecial); }
  const std::vector<int32_t>& eog_ids() const { return eog_; }
  // The ids that add_special puts before / after the text.
  const std::vector<int32_t>& prefix_ids() const { return prefix_; }
  const std::vector<int32_t>& suffix_ids() const { return suffix_; }
  // How many leading spaces decode() strips from its output (SentencePiece dummy prefix).
  int strip_leading_spaces() const { return strip_spaces_; }
  // One line: model kind, pre-tokenizer, vocabulary size (for status output and messages).
  const std::string& summary() const { return summary_; }

 private:
  friend class StreamDecoder;
  friend struct TokenizerBuilder;
  static constexpr uint8_t kSpecial = 1, kEog = 2, kMatchable = 4, kLstrip = 8, kRstrip = 16;

  bool in_range(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < text_.size(); }

  struct Scratch {
    std::string norm;
    Units units;
    std::vector<URange> a, b;
    struct Sym {
      uint32_t start, len;  // bytes in the piece
      int32_t id;           // token id (-1: not in the vocabulary, score mode only)
      int32_t prev, next;
    };
    std::vector<Sym> syms;
    struct Cand {
      int32_t prio;  // lower merges first
      int32_t left;  // symbol index (ties: leftmost first)
      int32_t right;
      uint32_t len;  // bytes of left + right when queued (stale check)
      int32_t merged;
    };
    std::vector<Cand> heap;
    // pieces already merged in this call (words repeat): piece -> [offset, count) in cache_ids
    std::unordered_map<std::string, std::pair<uint32_t, uint32_t>> cache;
    std::vector<int32_t> cache_ids;
  };
  static constexpr size_t kCacheMaxPiece = 64, kCacheMaxEntries = 1 << 16;

  void encode_text(std::string_view text, bool parse_special, std::span<const std::pair<size_t, size_t>> no_special,
                   bool prompt_mode, std::vector<int32_t>& out) const;
  void encode_segment(std::string_view seg, bool first_segment, Scratch& s, std::vector<int32_t>& out) const;
  void encode_normalized(std::string_view text, Scratch& s, std::vector<int32_t>& out) const;
  void bpe_piece(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const;
  void bpe_merge(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const;
  void push_unknown_bytes(std::string_view bytes, std::vector<int32_t>& out) const;

  enum class Merge : uint8_t { by_rank, by_score };
  bool byte_level_ = true;  // the vocabulary spells bytes with the GPT-2 mapping (tokens stored as raw bytes)
  Merge merge_mode_ = Merge::by_rank;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  int32_t unk_ = -1, bos_ = -1, eos_ = -1;
  int strip_spaces_ = 0;

  std::vector<std::string> text_;
  std::vector<uint8_t> type_;
  std::vector<uint8_t> flags_;
  std::string bytes_arena_;
  std::vector<uint32_t> bytes_off_;  // n + 1
  StringIndex index_;                // merge-space string (byte-level: raw bytes) -> id
  MergeTable merges_;
  std::vector<int32_t> score_prio_;      // by_score: merge priority of each token (lower first)
  std::array<int32_t, 256> byte_tok_{};  // byte-level: the token of each byte; otherwise <0xXX>
  TokenTrie trie_;                       // added tokens, matched on the raw text
  TokenTrie norm_trie_;                  // user-defined pieces matched on the normalized text (SentencePiece semantics)
  std::vector<NormOp> norm_;
  std::vector<PreStage> pre_;
  std::vector<std::vector<uint32_t>> pre_literals_;  // literal stages as code points
  std::vector<int32_t> prefix_, suffix_;
  std::vector<int32_t> eog_;
  std::string summary_;
  uint64_t max_bytes_ = 0;

  // The size limit, and a probe that the working memory of a long input can be had (so that an
  // allocation failure is an error, not an abort, even without exceptions).
  std::optional<Error> check_input(size_t n) const {
    if (n > max_bytes())
      return make_error(Errc::invalid_argument,
                        strf("cannot tokenize %zu bytes: the limit is %llu (LLMINFER_MAX_PROMPT_BYTES)", n,
                             static_cast<unsigned long long>(max_bytes())));
    if (n >= (1u << 20)) {
      size_t need = n * 56 + (1u << 20);  // measured: up to ~50 bytes per byte (one long word)
      void* p = std::malloc(need);
      if (!p)
        return make_error(Errc::out_of_memory, strf("cannot tokenize %zu bytes: %s of working memory is not available",
                                                    n, human_bytes(need).c_str()));
      std::free(p);
    }
    return std::nullopt;
  }
};

// ---- encode ----

inline Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special,
                                                      bool parse_special) const {
  if (text.size() >= 0xFFFFFFF0u)
    return make_error(Errc::invalid_argument, strf("cannot tokenize %zu bytes at once (4 GiB at most)", text.size()));
  if (auto e = check_input(text.size())) return *e;
  std::vector<int32_t> out;
#if defined(__cpp_exceptions)
  try {
#endif
    out.reserve(text.size() / 3 + 4);
    if (add_special) out.insert(out.end(), prefix_.begin(), prefix_.end());
    encode_text(text, parse_special, {}, false, out);
    if (add_special) out.insert(out.end(), suffix_.begin(), suffix_.end());
#if defined(__cpp_exceptions)
  } catch (const std::bad_alloc&) {
    return make_error(Errc::out_of_memory, strf("out of memory tokenizing %zu bytes", text.size()));
  }
#endif
  return out;
}

inline Result<std::vector<int32_t>> Tokenizer::encode_prompt(std::string_view text,
                                                             std::span<const std::pair<size_t, size_t>> no_special,
                                                             bool add_special) const {
  if (text.size() >= 0xFFFFFFF0u)
    return make_error(Errc::invalid_argument, strf("cannot tokenize %zu bytes at once (4 GiB at most)", text.size()));
  for (const auto& [b, e] : no_special)
    if (b > e || e > text.size())
      return make_error(Errc::invalid_argument,
                        strf("encode_prompt: range [%zu, %zu) is not inside the %zu-byte text", b, e, text.size()));
  if (auto e = check_input(text.size())) return *e;
  std::vector<std::pair<size_t, size_t>> ranges(no_special.begin(), no_special.end());
  std::sort(ranges.begin(), ranges.end());
  std::vector<int32_t> out;
#if defined(__cpp_exceptions)
  try {
#endif
    out.reserve(text.size() / 3 + 4);
    if (add_special) out.insert(out.end(), prefix_.begin(), prefix_.end());
    encode_text(text, true, ranges, true, out);
#if defined(__cpp_exceptions)
  } catch (const std::bad_alloc&) {
    return make_error(Errc::out_of_memory, strf("out of memory tokenizing %zu bytes", text.size()));
  }
#endif
  if (add_special) out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

// Whitespace (White_Space) ending at `end` (> begin): moves `end` before it and returns true.
inline bool is_ascii_or_uspace_before(std::string_view text, size_t begin, size_t& end) {
  size_t k = end - 1;
  while (k > begin && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) k--;
  size_t j = k;
  uint32_t cp = utf8_next(text, j);
  if (j != end || !is_uwhitespace(cp)) return false;
  end = k;
  return true;
}
// Whitespace starting at `pos`: moves `pos` after it and returns true.
inline bool is_uspace_at(std::string_view text, size_t& pos) {
  size_t j = pos;
  if (utf8_valid_len(reinterpret_cast<const unsigned char*>(text.data()) + pos, text.size() - pos) == 0) return false;
  if (!is_uwhitespace(utf8_next(text, j))) return false;
  pos = j;
  return true;
}

// Splits out added tokens (leftmost-longest), encodes the text between them.
inline void Tokenizer::encode_text(std::string_view text, bool parse_special,
                                   std::span<const std::pair<size_t, size_t>> no_special, bool prompt_mode,
                                   std::vector<int32_t>& out) const {
  Scratch s;
  // true when [b, e) overlaps one of the sorted no_special ranges
  auto in_content = [&](size_t b, size_t e) {
    auto it = std::upper_bound(no_special.begin(), no_special.end(), std::make_pair(b, SIZE_MAX));
    if (it != no_special.begin()) {
      auto p = std::prev(it);
      if (p->second > b) return true;
    }
    for (; it != no_special.end() && it->first < e; ++it)
      if (it->second > it->first) return true;
    return false;
  };
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  size_t seg_start = 0, i = 0;
  bool first = true;
  while (i < text.size()) {
    if (!trie_.can_start(p[i])) {
      i++;
      continue;
    }
    int32_t best = -1;
    size_t best_end = 0;
    uint32_t node = 0;
    for (size_t k = i; k < text.size(); k++) {
      int32_t nx = trie_.next(node, p[k]);
      if (nx < 0) break;
      node = static_cast<uint32_t>(nx);
      int32_t tok = trie_.token_at(node);
      if (tok < 0) continue;
      bool special = flags_[size_t(tok)] & kSpecial;
      if (special && !parse_special) continue;
      if (special && prompt_mode && in_content(i, k + 1)) continue;
      best = tok;
      best_end = k + 1;
    }
    if (best < 0) {
      i++;
      continue;
    }
    // lstrip / rstrip added tokens (tokenizer.json) swallow the whitespace next to them
    size_t seg_end = i;
    if (flags_[size_t(best)] & kLstrip)
      while (seg_end > seg_start && is_ascii_or_uspace_before(text, seg_start, seg_end)) {
      }
    if (flags_[size_t(best)] & kRstrip)
      while (best_end < text.size() && is_uspace_at(text, best_end)) {
      }
    if (seg_end > seg_start) encode_segment(text.substr(seg_start, seg_end - seg_start), first, s, out);
    first = false;
    out.push_back(best);
    i = seg_start = best_end;
  }
  if (seg_start < text.size()) encode_segment(text.substr(seg_start), first, s, out);
}

inline void Tokenizer::encode_segment(std::string_view seg, bool first_segment, Scratch& s,
                                      std::vector<int32_t>& out) const {
  // normalize
  std::string_view text = seg;
  if (!norm_.empty()) {
    std::string cur(seg), next;
    for (const NormOp& op : norm_) {
      switch (op.kind) {
        case NormOp::Kind::nfc:
          next.clear();
          nfc_append(cur, next);
          cur.swap(next);
          break;
        case NormOp::Kind::replace: {
          if (op.from.empty() || cur.find(op.from) == std::string::npos) break;
          next.clear();
          size_t pos = 0;
          for (size_t f; (f = cur.find(op.from, pos)) != std::string::npos; pos = f + op.from.size()) {
            next.append(cur, pos, f - pos);
            next += op.to;
          }
          next.append(cur, pos, std::string::npos);
          cur.swap(next);
          break;
        }
        case NormOp::Kind::prepend:
          if (!cur.empty() && (!op.first_segment_only || first_segment)) cur.insert(0, op.to);
          break;
        case NormOp::Kind::prepend_if_not:
          if (!cur.empty() && (!op.first_segment_only || first_segment) && cur.compare(0, op.to.size(), op.to) != 0)
            cur.insert(0, op.to);
          break;
      }
    }
    s.norm.swap(cur);
    text = s.norm;
  }
  if (text.empty()) return;
  if (norm_trie_.n_tokens() == 0) {
    encode_normalized(text, s, out);
    return;
  }
  // user-defined pieces on the normalized text, leftmost-longest; the rest goes on as usual
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  size_t start = 0, i = 0;
  while (i < text.size()) {
    int32_t best = -1;
    size_t best_end = 0;
    uint32_t node = 0;
    for (size_t k = i; k < text.size() && norm_trie_.can_start(p[i]); k++) {
      int32_t nx = norm_trie_.next(node, p[k]);
      if (nx < 0) break;
      node = static_cast<uint32_t>(nx);
      if (norm_trie_.token_at(node) >= 0) {
        best = norm_trie_.token_at(node);
        best_end = k + 1;
      }
    }
    if (best < 0) {
      i++;
      continue;
    }
    if (i > start) encode_normalized(text.substr(start, i - start), s, out);
    out.push_back(best);
    i = start = best_end;
  }
  if (start < text.size()) encode_normalized(text.substr(start), s, out);
}

// Pre-tokenization and BPE of normalized text.
inline void Tokenizer::encode_normalized(std::string_view text, Scratch& s, std::vector<int32_t>& out) const {
  if (pre_.empty()) {
    bpe_piece(text, s, out);
    return;
  }
  // pre-tokenize: each stage refines the pieces of the previous one
  s.units.decode(text);
  const Units& u = s.units;
  s.a.clear();
  s.a.push_back(URange{0, static_cast<uint32_t>(u.size())});
  for (size_t k = 0; k < pre_.size(); k++) {
    const PreStage& st = pre_[k];
    s.b.clear();
    for (const URange& r : s.a) {
      switch (st.kind) {
        case PreStage::Kind::gpt2: pretok::gpt2(u, r.b, r.e, s.b); break;
        case PreStage::Kind::llama3: pretok::llama3(u, r.b, r.e, st.digit_max, st.marks_in_words, s.b); break;
        case PreStage::Kind::o200k: pretok::o200k(u, r.b, r.e, st.digit_max, st.contractions, s.b); break;
        case PreStage::Kind::digits:
          pretok::isolate(
              r.b, r.e, st.individual, [&](size_t q) { return pretok::is_n(u, q); }, s.b);
          break;
        case PreStage::Kind::number_runs:
          pretok::isolate(
              r.b, r.e, false, [&](size_t q) { return pretok::is_n(u, q); }, s.b);
          break;
        case PreStage::Kind::punct_runs:
          pretok::isolate(
              r.b, r.e, false,
              [&](size_t q) {
                uint32_t c = u.cp[q];
                return pretok::cls(u, q) == UClass::punct || c == '$' || c == '+' || c == '<' || c == '=' || c == '>' ||
                       c == '^' || c == '~' || c == '|';
              },
              s.b);
          break;
        case PreStage::Kind::ascii_digit3: pretok::ascii_digit3(u, r.b, r.e, s.b); break;
        case PreStage::Kind::literal: pretok::literal(u, r.b, r.e, pre_literals_[k], st.behavior, s.b); break;
      }
    }
    s.a.swap(s.b);
  }
  for (const URange& r : s.a) {  // bpe_piece uses other scratch buffers
    uint32_t b = u.off[r.b], e = u.off[r.e];
    bpe_piece(text.substr(b, e - b), s, out);
  }
}

// Bytes of a character that has no token: <0xXX> tokens (byte fallback), else the unknown token.
inline void Tokenizer::push_unknown_bytes(std::string_view bytes, std::vector<int32_t>& out) const {
  if (byte_fallback_) {
    bool all = true;
    for (unsigned char c : bytes) all = all && byte_tok_[c] >= 0;
    if (all) {
      for (unsigned char c : bytes) out.push_back(byte_tok_[c]);
      return;
    }
  }
  if (unk_ >= 0) {
    if (fuse_unk_ && !out.empty() && out.back() == unk_) return;
    out.push_back(unk_);
  }
  // no byte token and no unknown token: the character is dropped (as Hugging Face does)
}

inline void Tokenizer::bpe_piece(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    int32_t whole = index_.find(piece);
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  bool cacheable = piece.size() <= kCacheMaxPiece;
  if (cacheable) {
    auto it = s.cache.find(std::string(piece));
    if (it != s.cache.end()) {
      out.insert(out.end(), s.cache_ids.begin() + it->second.first,
                 s.cache_ids.begin() + it->second.first + it->second.second);
      return;
    }
  }
  size_t out_start = out.size();
  bpe_merge(piece, s, out);
  if (cacheable && s.cache.size() < kCacheMaxEntries) {
    auto off = static_cast<uint32_t>(s.cache_ids.size());
    s.cache_ids.insert(s.cache_ids.end(), out.begin() + static_cast<ptrdiff_t>(out_start), out.end());
    s.cache.emplace(std::string(piece), std::make_pair(off, static_cast<uint32_t>(out.size() - out_start)));
  }
}

// The merge loop proper: symbols in a linked list, candidate pairs in a heap (lowest priority value first,
// then leftmost), stale candidates skipped when popped.
inline void Tokenizer::bpe_merge(std::string_view piece, Scratch& s, std::vector<int32_t>& out) const {
  using Sym = Scratch::Sym;
  auto& syms = s.syms;
  syms.clear();
  // at most one symbol per byte and about as many candidates: reserved exactly, since growing a
  // long piece's vectors by doubling would hold the old and the new arrays at once (1.5-2x peak)
  syms.reserve(piece.size());
  s.heap.reserve(piece.size() + 16);
  const auto* p = reinterpret_cast<const unsigned char*>(piece.data());
  if (byte_level_) {
    for (size_t i = 0; i < piece.size(); i++)
      syms.push_back(Sym{uint32_t(i), 1, byte_tok_[p[i]], int32_t(syms.size()) - 1, int32_t(syms.size()) + 1});
  } else {
    for (size_t i = 0; i < piece.size();) {
      int len = utf8_valid_len(p + i, piece.size() - i);
      if (len == 0) len = 1;
      int32_t id = index_.find(piece.substr(i, size_t(len)));
      if (id < 0 && merge_mode_ == Merge::by_rank && byte_fallback_) {
        // Hugging Face: a character outside the vocabulary becomes its byte tokens before merging
        bool all = true;
        for (int k = 0; k < len; k++) all = all && byte_tok_[p[i + size_t(k)]] >= 0;
        if (all) {
          for (int k = 0; k < len; k++)
            syms.push_back(Sym{uint32_t(i + size_t(k)), 1, byte_tok_[p[i + size_t(k)]], int32_t(syms.size()) - 1,
                               int32_t(syms.size()) + 1});
          i += size_t(len);
          continue;
        }
      }
      syms.push_back(Sym{uint32_t(i), uint32_t(len), id, int32_t(syms.size()) - 1, int32_t(syms.size()) + 1});
      i += size_t(len);
    }
  }
  if (syms.empty()) return;
  syms.back().next = -1;
  // candidate pairs, lowest priority value first, then leftmost
  auto& heap = s.heap;
  heap.clear();
  auto cmp = [](const Scratch::Cand& a, const Scratch::Cand& b) {
    return a.prio != b.prio ? a.prio > b.prio : a.left > b.left;
  };
  auto consider = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const Sym& L = syms[size_t(l)];
    const Sym& R = syms[size_t(r)];
    int32_t prio = 0, merged = -1;
    if (merge_mode_ == Merge::by_rank) {
      if (!merges_.find(L.id, R.id, prio, merged)) return;
    } else {
      merged = index_.find(piece.substr(L.start, L.len + R.len));
      if (merged < 0) return;
      prio = score_prio_[size_t(merged)];
    }
    heap.push_back(Scratch::Cand{prio, l, r, L.len + R.len, merged});
    std::push_heap(heap.begin(), heap.end(), cmp);
  };
  for (size_t i = 0; i + 1 < syms.size(); i++) consider(int32_t(i), int32_t(i + 1));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    Scratch::Cand c = heap.back();
    heap.pop_back();
    Sym& L = syms[size_t(c.left)];
    if (L.len == 0 || L.next != c.right) continue;
    Sym& R = syms[size_t(c.right)];
    if (R.len == 0 || L.len + R.len != c.len) continue;
    L.len += R.len;
    L.id = c.merged;
    R.len = 0;
    L.next = R.next;
    if (R.next >= 0) syms[size_t(R.next)].prev = c.left;
    consider(L.prev, c.left);
    consider(c.left, L.next);
  }
  for (int32_t i = 0; i >= 0; i = syms[size_t(i)].next) {
    const Sym& sy = syms[size_t(i)];
    if (sy.id >= 0)
      out.push_back(sy.id);
    else
      push_unknown_bytes(piece.substr(sy.start, sy.len), out);
  }
}

// ---- decode ----

inline std::string_view Tokenizer::token_bytes(int32_t id) const {
  if (!in_range(id)) return {};
  auto k = static_cast<size_t>(id);
  return std::string_view(bytes_arena_).substr(bytes_off_[k], bytes_off_[k + 1] - bytes_off_[k]);
}

inline const std::string& Tokenizer::token_text(int32_t id) const {
  static const std::string empty;
  return in_range(id) ? text_[size_t(id)] : empty;
}

inline std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (skip_special && is_control(id)) continue;
    out.append(token_bytes(id));
  }
  size_t strip = 0;
  while (strip < out.size() && strip < static_cast<size_t>(strip_spaces_) && out[strip] == ' ') strip++;
  out.erase(0, strip);
  return out;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
