// ==== Streaming detokenization: only complete, valid UTF-8 leaves ====
// A token may end inside a UTF-8 sequence (byte tokens, byte-level BPE pieces of emoji and CJK): those
// bytes are held until the sequence completes. Bytes that can never become valid are replaced by U+FFFD,
// one per maximal invalid subpart (as Rust's String::from_utf8_lossy, which Hugging Face's byte-level
// decoder uses), so the output is always valid UTF-8.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Appends the valid UTF-8 of `in` to `out`, invalid subparts as U+FFFD. When `final` is false a sequence
// cut off by the end of `in` is not consumed. Returns the number of bytes consumed.
inline size_t utf8_lossy_append(std::string_view in, std::string& out, bool final) {
  const auto* s = reinterpret_cast<const unsigned char*>(in.data());
  size_t n = in.size(), i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      out += static_cast<char>(c);
      i++;
      continue;
    }
    size_t need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (need == 0) {
      out += "\xEF\xBF\xBD";
      i++;
      continue;
    }
    // length of the valid prefix of this sequence
    size_t k = 1;
    while (k < need && i + k < n) {
      unsigned char d = s[i + k];
      unsigned char lo = 0x80, hi = 0xBF;
      if (k == 1) {
        if (c == 0xE0)
          lo = 0xA0;
        else if (c == 0xED)
          hi = 0x9F;
        else if (c == 0xF0)
          lo = 0x90;
        else if (c == 0xF4)
          hi = 0x8F;
      }
      if (d < lo || d > hi) break;
      k++;
    }
    if (k == need) {
      out.append(in.data() + i, need);
      i += need;
    } else if (i + k == n && !final) {
      break;  // may still complete
    } else {
      out += "\xEF\xBF\xBD";  // the maximal subpart
      i += k;
    }
  }
  return i;
}

inline std::string utf8_lossy(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  utf8_lossy_append(in, out, true);
  return out;
}

class StreamDecoder {
 public:
  // skip_special: control tokens (Hugging Face "special") produce nothing, as decode(ids, true).
  // strip_leading: strip the leading space(s) decode() strips (a whole text or a chat reply);
  // false for a continuation of a prompt, whose first piece keeps its space.
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false, bool strip_leading = true)
      : tok_(&tok), skip_special_(skip_special), strip_(strip_leading ? tok.strip_leading_spaces() : 0) {}

  // The text that `id` completes (possibly empty while a UTF-8 sequence is incomplete).
  std::string push(int32_t id) {
    if (skip_special_ && tok_->is_control(id)) return std::string();
    std::string_view b = tok_->token_bytes(id);
    while (strip_ > 0 && !b.empty()) {  // decode()'s leading-space strip, before anything was written
      if (b.front() != ' ') {
        strip_ = 0;
        break;
      }
      b.remove_prefix(1);
      strip_--;
    }
    pending_.append(b);
    std::string out;
    size_t used = utf8_lossy_append(pending_, out, false);
    pending_.erase(0, used);
    return out;
  }
  // Whatever is still held (an incomplete sequence becomes U+FFFD).
  std::string flush() {
    std::string out = utf8_lossy(pending_);
    pending_.clear();
    return out;
  }
  // Bytes held back waiting for the rest of a UTF-8 sequence.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  int strip_;
  std::string pending_;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
