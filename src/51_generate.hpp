// ==== Generation: stop strings, streaming text, the decode loop ====
// The loop is written against GenerationIO (evaluate tokens, logits, end-of-generation test,
// streaming detokenizer), so that it runs the same on a real model and on the scripted fakes of
// the tests.
//
// Decisions (also in the manual):
// * Text reaches on_token only as complete UTF-8. Bytes that can never become valid UTF-8 are
//   replaced by U+FFFD (one per maximal invalid subpart, as the Unicode standard recommends).
// * Stop strings are matched on text, across token boundaries. The stop string and everything
//   after it are not emitted; text that could still be the beginning of a stop string is held
//   back until it is not (then emitted, nothing is lost) or the generation ends (then flushed).
// * GenerateResult::text is everything emitted. It equals the concatenation of the pieces the
//   callback received, unless the callback cancelled: then it also holds the text that was still
//   held back (the callback is not called again after it returned false).
// * GenerateResult::tokens are the sampled tokens, including those that carried a stop string,
//   but not the end-of-generation token.
// * The last sampled token is not evaluated (its logits are not needed); a session evaluates it
//   with the next turn.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// Length (1..3) of the incomplete but so far valid UTF-8 sequence at s[0..n) that needs more
// bytes than n, or 0 when s[0..n) does not start such a sequence.
inline int utf8_incomplete_len(const unsigned char* s, size_t n) {
  if (n == 0) return 0;
  unsigned char c = s[0];
  int need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
  if (need == 0) return 0;
  int have = 1;
  for (size_t i = 1; i < n && have < need; i++, have++) {
    unsigned char lo = 0x80, hi = 0xBF;
    if (i == 1) {
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    }
    if (s[i] < lo || s[i] > hi) return have < need ? -have : 0;  // broken: caller replaces `have` bytes
  }
  return have < need ? have : 0;
}

// Appends the valid UTF-8 of `in` to `out`, replacing invalid bytes with U+FFFD; an incomplete
// sequence at the very end is left in `rest` (to be completed by the next bytes) unless `final`.
inline void utf8_sanitize(std::string_view in, bool final, std::string& out, std::string& rest) {
  static const char kReplacement[] = "\xEF\xBF\xBD";
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  size_t i = 0, n = in.size();
  rest.clear();
  while (i < n) {
    int l = utf8_valid_len(p + i, n - i);
    if (l > 0) {
      out.append(in.data() + i, static_cast<size_t>(l));
      i += static_cast<size_t>(l);
      continue;
    }
    int partial = utf8_incomplete_len(p + i, n - i);
    if (partial > 0 && !final) {  // runs to the end of the input: may still be completed
      rest.assign(in.data() + i, n - i);
      return;
    }
    out += kReplacement;
    i += partial > 0 ? static_cast<size_t>(partial) : partial < 0 ? static_cast<size_t>(-partial) : 1;
  }
}

// Turns the decoded pieces of generated tokens into the text that may be shown: complete UTF-8,
// stop strings cut, possible stop-string beginnings held back.
class TextStream {
 public:
  TextStream() = default;
  explicit TextStream(std::vector<std::string> stops) : stops_(std::move(stops)) {
    for (const auto& s : stops_) max_stop_ = std::max(max_stop_, s.size());
  }

  // Adds decoded bytes; returns the text that became safe to emit (possibly empty).
  std::string push(std::string_view bytes) {
    if (stopped_) return std::string();
    pending_ += bytes;
    std::string rest;
    utf8_sanitize(pending_, false, text_, rest);
    pending_ = std::move(rest);
    return advance(false);
  }

  // The generation ended: completes what is pending and returns everything still held back
  // (unless a stop string completes in it, which is then cut as usual).
  std::string finish() {
    if (stopped_) return std::string();
    std::string rest;
    utf8_sanitize(pending_, true, text_, rest);
    pending_.clear();
    return advance(true);
  }

  bool stopped() const { return stopped_; }
  // Everything emitted so far (the text of the result).
  std::string_view emitted() const { return std::string_view(text_).substr(0, emitted_); }
  // Text received but not emitted yet (held back as a possible stop-string beginning).
  std::string_view held() const { return std::string_view(text_).substr(emitted_); }

 private:
  std::string advance(bool final) {
    // earliest complete stop string at or after the emitted point (none can start before it)
    size_t stop_at = std::string::npos;
    for (const auto& s : stops_) stop_at = std::min(stop_at, text_.find(s, emitted_));
    size_t end = text_.size();
    if (stop_at != std::string::npos) {
      end = stop_at;
      stopped_ = true;
      text_.resize(stop_at);
    } else if (!final && max_stop_ > 0) {
      // hold back the earliest suffix that is a proper beginning of a stop string
      size_t from = std::max(emitted_, text_.size() > max_stop_ ? text_.size() - max_stop_ + 1 : 0);
      for (size_t p = from; p < text_.size(); p++) {
        std::string_view tail = std::string_view(text_).substr(p);
        bool prefix = false;
        for (const auto& s : stops_)
          if (s.size() > tail.size() && s.compare(0, tail.size(), tail) == 0) prefix = true;
        if (prefix) {
          end = p;  // stop strings are valid UTF-8, so p is a character boundary
          break;
        }
      }
    }
    std::string out = text_.substr(emitted_, end - emitted_);
    emitted_ = end;
    return out;
  }

  std::vector<std::string> stops_;
  size_t max_stop_ = 0;
  std::string text_;     // sanitized text received so far
  size_t emitted_ = 0;   // text_[0, emitted_) has been returned
  std::string pending_;  // incomplete UTF-8 at the end of the received bytes
  bool stopped_ = false;
};

// Checks what generate()/reply() accept; the message names the option.
inline Result<void> validate_generate_options(const GenerateOptions& o) {
  SamplerParams sp{o.temperature, o.top_k, o.top_p, o.min_p, o.repeat_penalty, o.repeat_last_n};
  if (auto v = validate_sampler_params(sp); !v) return v.error();
  for (size_t i = 0; i < o.stop.size(); i++) {
    if (o.stop[i].empty()) return make_error(Errc::invalid_argument, strf("stop string %zu is empty", i + 1));
    if (!utf8_valid(o.stop[i]))
      return make_error(Errc::invalid_argument, strf("stop string %zu is not valid UTF-8", i + 1));
  }
  return {};
}

enum class EvalOutcome : uint8_t { ok, cancelled, context_full };

// What the decode loop needs from a model and the session's context.
class GenerationIO {
 public:
  virtual ~GenerationIO() = default;
  // Evaluates `tokens` after those already in the context; on `ok` logits() holds the logits of
  // the last one. `context_full`: nothing was evaluated. `cancelled`: the cancel function said
  // so (polled during the evaluation).
  virtual Result<EvalOutcome> eval(std::span<const int32_t> tokens, const std::function<bool()>& cancel) = 0;
  virtual std::span<const float> logits() const = 0;
  // Called when eval() reported a full context: `ok` when room was made (context policy
  // `slide`), so the same eval may be retried; `context_full` to stop.
  virtual Result<EvalOutcome> on_context_full(const std::function<bool()>& cancel) = 0;
  virtual bool is_eog(int32_t id) const = 0;
  // Streaming detokenization of the generated tokens (bytes; the TextStream completes UTF-8).
  virtual std::string piece(int32_t id) = 0;
  virtual std::string flush() = 0;
};

// Evaluates `prefill` (the prompt tokens not in the context yet; must not be empty), then samples
// until a stop condition. `history`: the prompt (for the repetition penalty). Fills text, tokens,
// stop, the timings and prompt_tokens_evaluated of `r`; returns an error only when nothing was
// generated (afterwards an error ends the result with StopReason::error and r.error).
// `constraint` (may be null): grammar / bias / bans, applied to the logits before the chain.
inline Result<void> run_generation(GenerationIO& io, std::span<const int32_t> prefill, std::vector<int32_t> history,
                                   const GenerateOptions& o, Sampler& sampler, Rng& rng, double t_start,
                                   GenerateResult& r, TokenConstraint* constraint = nullptr) {
  const std::atomic<bool>* flag = o.cancel;
  const std::function<bool()> cancel = [flag] { return flag != nullptr && flag->load(std::memory_order_relaxed); };
  const SamplerParams sp{o.temperature, o.top_k, o.top_p, o.min_p, o.repeat_penalty, o.repeat_last_n};
  r.text.clear();
  r.tokens.clear();

  // eval with the context policy applied
  auto eval = [&](std::span<const int32_t> toks) -> Result<EvalOutcome> {
    for (int attempt = 0;; attempt++) {
      auto e = io.eval(toks, cancel);
      if (!e || *e != EvalOutcome::context_full || attempt > 0) return e;
      auto room = io.on_context_full(cancel);
      if (!room || *room != EvalOutcome::ok) return room;
    }
  };

  if (cancel()) {
    r.stop = StopReason::cancelled;
    return {};
  }
  double t0 = now_ms();
  auto pre = eval(prefill);
  if (!pre) return pre.error();
  r.timings.prefill_ms = now_ms() - t0;
  if (*pre != EvalOutcome::ok) {
    r.stop = *pre == EvalOutcome::cancelled ? StopReason::cancelled : StopReason::context_full;
    return {};
  }
  r.prompt_tokens_evaluated = static_cast<int>(prefill.size());
  if (r.timings.prefill_ms > 0)
    r.timings.prefill_tps = static_cast<double>(prefill.size()) * 1000.0 / r.timings.prefill_ms;

  TextStream ts(o.stop);
  bool callback_open = static_cast<bool>(o.on_token);
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    r.text += text;
    if (callback_open && !o.on_token(text)) {
      callback_open = false;
      r.stop = StopReason::cancelled;
    }
  };

  double t_first = 0, t_last = 0;
  r.stop = StopReason::max_tokens;
  bool done = false;
  for (int n = 0; !done;) {
    if (o.max_tokens >= 0 && n >= o.max_tokens) {
      r.stop = StopReason::max_tokens;
      break;
    }
    if (cancel()) {
      r.stop = StopReason::cancelled;
      break;
    }
    std::span<const float> logits = io.logits();
    if (constraint) {  // structured output: mask, bias and bans before the chain
      const double tc = now_ms();
      auto masked = constraint->apply(logits);
      r.timings.constraint_ms += now_ms() - tc;
      if (!masked) {
        r.stop = StopReason::error;
        r.error = masked.error();
        break;
      }
      logits = *masked;
    }
    int32_t id = sampler.sample(logits, history, sp, rng);
    if (id < 0) {
      r.stop = StopReason::error;
      r.error = make_error(Errc::internal, "the model produced no usable logits (NaN or -inf everywhere)");
      break;
    }
    t_last = now_ms();
    if (n == 0) {
      t_first = t_last;
      r.timings.ttft_ms = t_first - t_start;
    }
    if (io.is_eog(id)) {
      r.stop = StopReason::eos;
      break;
    }
    if (constraint) {  // structured output: the chosen token advances the grammar
      const double tc = now_ms();
      auto acc = constraint->accept(id);
      r.timings.constraint_ms += now_ms() - tc;
      if (!acc) {
        r.stop = StopReason::error;
        r.error = acc.error();
        break;
      }
    }
    n++;
    r.tokens.push_back(id);
    history.push_back(id);
    emit(ts.push(io.piece(id)));
    if (ts.stopped()) {
      r.stop = StopReason::stop;
      break;
    }
    if (!callback_open && o.on_token) break;  // the callback cancelled (stop already set)
    if (o.max_tokens >= 0 && n >= o.max_tokens) {
      r.stop = StopReason::max_tokens;
      break;
    }
    auto e = eval(std::span<const int32_t>(&r.tokens.back(), 1));
    if (!e) {
      r.stop = StopReason::error;
      r.error = e.error();
      break;
    }
    if (*e == EvalOutcome::cancelled) {
      r.stop = StopReason::cancelled;
      done = true;
    } else if (*e == EvalOutcome::context_full) {
      r.stop = StopReason::context_full;
      done = true;
    }
  }
  // The end: what the detokenizer and the stop matcher still hold (a stop string may complete).
  // After the callback cancelled, the tail still goes to r.text (emit() no longer calls it).
  if (!ts.stopped()) {
    std::string tail = ts.push(io.flush());
    tail += ts.finish();
    if (ts.stopped() && r.stop != StopReason::cancelled) r.stop = StopReason::stop;
    emit(tail);
  }
  if (r.tokens.size() > 1 && t_last > t_first) {
    r.timings.decode_ms = t_last - t_first;
    r.timings.decode_tps = static_cast<double>(r.tokens.size() - 1) * 1000.0 / r.timings.decode_ms;
  }
  return {};
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
