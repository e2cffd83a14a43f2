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

// What the decode loop needs from a model and the session's context.
class GenerationIO {
 public:
  virtual ~GenerationIO() = default;
  // Evaluates `tokens` after those already in the context; on `ok` logits() holds the logits of
  // the last one. `context_full`: nothing was evaluated. `cancelled`: the cancel function said
  // so (polled during the evaluation). The context policy is the io's own: with `slide` it makes
  // room itself, so `context_full` ends the generation.
  virtual Result<EvalStatus> eval(std::span<const int32_t> tokens, const std::function<bool()>& cancel) = 0;
  virtual std::span<const float> logits() const = 0;
  virtual bool is_eog(int32_t id) const = 0;
  // Streaming detokenization of the generated tokens (bytes; the TextStream completes UTF-8).
  virtual std::string piece(int32_t id) = 0;
  virtual std::string flush() = 0;
};

// One generation as a sequence of bounded steps (Session::step; run_generation() runs it to the
// end): first the prompt tokens not in the context yet (`prefill`, not empty; in batches of
// `prefill_batch` tokens per step, 0: all in one step), then one sampled token per step until a
// stop condition. `history`: the prompt (for the repetition penalty). Fills text, tokens, stop,
// the timings and prompt_tokens_evaluated of result().
// `constraint` (may be null): structured output (grammar / bias / bans), applied to the logits
// before the chain and advanced by each sampled token; its time is Timings::constraint_ms.
class Generation {
 public:
  Generation(GenerationIO& io, std::vector<int32_t> prefill, std::vector<int32_t> history, GenerateOptions o,
             Sampler& sampler, Rng& rng, double t_start, int prefill_batch = 0,
             std::unique_ptr<TokenConstraint> constraint = nullptr)
      : io_(io),
        prefill_(std::move(prefill)),
        history_(std::move(history)),
        o_(std::move(o)),
        sampler_(sampler),
        rng_(rng),
        t_start_(t_start),
        prefill_batch_(prefill_batch),
        ts_(o_.stop),
        constraint_(std::move(constraint)) {
    const std::atomic<bool>* flag = o_.cancel;
    cancel_ = [flag] { return flag != nullptr && flag->load(std::memory_order_relaxed); };
    sp_ = SamplerParams{o_.temperature, o_.top_k, o_.top_p, o_.min_p, o_.repeat_penalty, o_.repeat_last_n};
    callback_open_ = static_cast<bool>(o_.on_token);
  }
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  bool done() const { return phase_ == Phase::done; }
  GenerateResult& result() { return r_; }
  const GenerateOptions& options() const { return o_; }

  // One step: a batch of the prompt, or one token (and, when the generation ends, what the
  // detokenizer and the stop matcher still held). Returns the text that became final in it
  // (complete UTF-8, often empty; on_token has received it). An error means that nothing was
  // generated (afterwards an error ends the result with StopReason::error and r.error).
  Result<std::string> step() {
    if (phase_ == Phase::prefill) return step_prefill();
    if (phase_ == Phase::decode) return step_decode();
    return std::string();
  }

 private:
  enum class Phase : uint8_t { prefill, decode, done };

  Result<std::string> step_prefill() {
    GenerateResult& r = r_;
    if (prefill_done_ == 0 && cancel_()) {
      r.stop = StopReason::cancelled;
      phase_ = Phase::done;
      return std::string();
    }
    size_t n = prefill_.size() - prefill_done_;
    if (prefill_batch_ > 0) n = std::min(n, static_cast<size_t>(prefill_batch_));
    double t0 = now_ms();
    auto pre = io_.eval(std::span<const int32_t>(prefill_).subspan(prefill_done_, n), cancel_);
    r.timings.prefill_ms += now_ms() - t0;
    if (!pre) {
      phase_ = Phase::done;
      return pre.error();
    }
    if (*pre != EvalStatus::ok) {
      r.stop = *pre == EvalStatus::cancelled ? StopReason::cancelled : StopReason::context_full;
      phase_ = Phase::done;
      return std::string();
    }
    prefill_done_ += n;
    if (prefill_done_ < prefill_.size()) return std::string();
    r.prompt_tokens_evaluated = static_cast<int>(prefill_.size());
    if (r.timings.prefill_ms > 0)
      r.timings.prefill_tps = static_cast<double>(prefill_.size()) * 1000.0 / r.timings.prefill_ms;
    r.stop = StopReason::max_tokens;
    phase_ = Phase::decode;
    return std::string();
  }

  void emit(std::string& out, const std::string& text) {
    if (text.empty()) return;
    r_.text += text;
    out += text;
    if (callback_open_ && !o_.on_token(text)) {
      callback_open_ = false;
      r_.stop = StopReason::cancelled;
    }
  }

  // One turn of the decode loop; `break` in the loop this was is finish().
  Result<std::string> step_decode() {
    GenerateResult& r = r_;
    const GenerateOptions& o = o_;
    std::string out;
    if (o.max_tokens >= 0 && n_ >= o.max_tokens) {
      r.stop = StopReason::max_tokens;
      return finish(out);
    }
    if (cancel_()) {
      r.stop = StopReason::cancelled;
      return finish(out);
    }
    std::span<const float> logits = io_.logits();
    if (constraint_) {  // structured output: mask, bias and bans before the chain
      const double tc = now_ms();
      auto masked = constraint_->apply(logits);
      r.timings.constraint_ms += now_ms() - tc;
      if (!masked) {
        r.stop = StopReason::error;
        r.error = masked.error();
        return finish(out);
      }
      logits = *masked;
    }
    int32_t id = sampler_.sample(logits, history_, sp_, rng_);
    if (id < 0) {
      r.stop = StopReason::error;
      r.error = make_error(Errc::internal, "the model produced no usable logits (NaN or -inf everywhere)");
      return finish(out);
    }
    t_last_ = now_ms();
    if (n_ == 0) {
      t_first_ = t_last_;
      r.timings.ttft_ms = t_first_ - t_start_;
    }
    if (io_.is_eog(id)) {
      r.stop = StopReason::eos;
      return finish(out);
    }
    if (constraint_) {  // structured output: the chosen token advances the grammar
      const double tc = now_ms();
      auto acc = constraint_->accept(id);
      r.timings.constraint_ms += now_ms() - tc;
      if (!acc) {
        r.stop = StopReason::error;
        r.error = acc.error();
        return finish(out);
      }
    }
    n_++;
    r.tokens.push_back(id);
    history_.push_back(id);
    emit(out, ts_.push(io_.piece(id)));
    if (ts_.stopped()) {
      r.stop = StopReason::stop;
      return finish(out);
    }
    if (!callback_open_ && o.on_token) return finish(out);  // the callback cancelled (stop already set)
    if (o.max_tokens >= 0 && n_ >= o.max_tokens) {
      r.stop = StopReason::max_tokens;
      return finish(out);
    }
    auto e = io_.eval(std::span<const int32_t>(&r.tokens.back(), 1), cancel_);
    if (!e) {
      r.stop = StopReason::error;
      r.error = e.error();
      return finish(out);
    }
    if (*e == EvalStatus::cancelled) {
      r.stop = StopReason::cancelled;
      return finish(out);
    } else if (*e == EvalStatus::context_full) {
      r.stop = StopReason::context_full;
      return finish(out);
    }
    return out;
  }

  // The end: what the detokenizer and the stop matcher still hold (a stop string may complete).
  // After the callback cancelled, the tail still goes to r.text (emit() no longer calls it).
  std::string finish(std::string& out) {
    GenerateResult& r = r_;
    if (!ts_.stopped()) {
      std::string tail = ts_.push(io_.flush());
      tail += ts_.finish();
      if (ts_.stopped() && r.stop != StopReason::cancelled) r.stop = StopReason::stop;
      emit(out, tail);
    }
    if (r.tokens.size() > 1 && t_last_ > t_first_) {
      r.timings.decode_ms = t_last_ - t_first_;
      r.timings.decode_tps = static_cast<double>(r.tokens.size() - 1) * 1000.0 / r.timings.decode_ms;
    }
    phase_ = Phase::done;
    return std::move(out);
  }

  GenerationIO& io_;
  std::vector<int32_t> prefill_;
  std::vector<int32_t> history_;
  GenerateOptions o_;
  Sampler& sampler_;
  Rng& rng_;
  double t_start_ = 0;
  int prefill_batch_ = 0;
  TextStream ts_;
  std::unique_ptr<TokenConstraint> constraint_;
  std::function<bool()> cancel_;
  SamplerParams sp_;
  bool callback_open_ = false;
  Phase phase_ = Phase::prefill;
  size_t prefill_done_ = 0;
  int n_ = 0;  // tokens generated
  double t_first_ = 0, t_last_ = 0;
  GenerateResult r_;
};

// Runs a Generation to its end and moves its result into `r` (text, tokens, stop, timings,
// prompt_tokens_evaluated); returns an error only when nothing was generated.
inline Result<void> run_generation(GenerationIO& io, std::span<const int32_t> prefill, std::vector<int32_t> history,
                                   const GenerateOptions& o, Sampler& sampler, Rng& rng, double t_start,
                                   GenerateResult& r, std::unique_ptr<TokenConstraint> constraint = nullptr) {
  Generation g(io, std::vector<int32_t>(prefill.begin(), prefill.end()), std::move(history), o, sampler, rng, t_start,
               0, std::move(constraint));
  while (!g.done()) {
    auto st = g.step();
    if (!st) return st.error();
  }
  GenerateResult& gr = g.result();
  r.text = std::move(gr.text);
  r.tokens = std::move(gr.tokens);
  r.stop = gr.stop;
  r.error = std::move(gr.error);
  r.prompt_tokens_evaluated = gr.prompt_tokens_evaluated;
  r.timings.prefill_ms = gr.timings.prefill_ms;
  r.timings.prefill_tps = gr.timings.prefill_tps;
  r.timings.ttft_ms = gr.timings.ttft_ms;
  r.timings.decode_ms = gr.timings.decode_ms;
  r.timings.decode_tps = gr.timings.decode_tps;
  r.timings.constraint_ms = gr.timings.constraint_ms;
  return {};
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
