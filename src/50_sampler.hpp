// ==== Sampling: RNG and the sampler chain ====
// The chain, in the conventional order (llama.cpp's default order, without its extras):
//   penalties -> top-k -> top-p -> min-p -> temperature -> draw
// * penalties: every distinct token among the last `repeat_last_n` of the history (prompt and
//   generated tokens; 0 disables, -1 means the whole history) has its logit divided by
//   `repeat_penalty` when positive and multiplied by it otherwise (CTRL / llama.cpp rule).
// * temperature 0: greedy. The argmax of the penalised logits (ties -> the lowest id); the
//   truncations cannot remove the argmax, so they are skipped. The RNG is not used.
// * top-k (k > 0): the k largest logits (ties -> lower id first).
// * top-p (p < 1): softmax over the top-k set (temperature 1), tokens in decreasing order; keep the
//   shortest prefix whose probability sum reaches p (the token that crosses p is kept).
// * min-p (m > 0): keep tokens whose probability is at least m times the largest one, i.e.
//   logit >= max_logit + ln(m). It is relative to the maximum, which no truncation removes, so
//   applying it after top-p is the same as intersecting the two prefixes.
// * temperature T > 0: the kept tokens are drawn with probability proportional to exp(logit / T).
// At least one token always survives. NaN and -inf logits never do; when no token is left the
// sampler returns -1 and the caller reports an error.
//
// The RNG is xoshiro256** (Blackman & Vigna) seeded through splitmix64, 53-bit doubles in [0, 1):
// a few lines, identical on every platform and compiler, so a seed means the same tokens
// everywhere. One draw per sampled token. Each Session owns one; it is reseeded from
// GenerateOptions::seed at the start of every generate()/reply() call.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }

  void reseed(uint64_t seed) {
    uint64_t x = seed;
    for (auto& s : s_) s = splitmix64(x);
  }

  uint64_t next() {
    uint64_t result = rotl(s_[1] * 5, 7) * 9;
    uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1), 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  static uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

struct SamplerParams {
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
};

// Checks the sampling options; the message names the offending option.
inline Result<void> validate_sampler_params(const SamplerParams& p) {
  auto bad = [](const char* what) { return make_error(Errc::invalid_argument, what); };
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    return bad("temperature must be a finite number >= 0 (0 = greedy)");
  if (p.top_k < 0) return bad("top_k must be >= 0 (0 = off)");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return bad("top_p must be in (0, 1] (1 = off)");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return bad("min_p must be in [0, 1] (0 = off)");
  if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty))
    return bad("repeat_penalty must be a finite number > 0 (1 = off)");
  if (p.repeat_last_n < -1) return bad("repeat_last_n must be >= -1 (-1 = whole history, 0 = off)");
  return {};
}

class Sampler {
 public:
  struct Candidate {
    int32_t id;
    float logit;
  };

  // One token from `logits` ([n_vocab]) given the tokens so far (for the penalties), or -1 when
  // no token has a usable logit. Params must have passed validate_sampler_params.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history, const SamplerParams& p,
                 Rng& rng) {
    if (!truncate(logits, history, p)) return -1;
    if (p.temperature <= 0.0f) return cand_[0].id;
    // draw: probabilities proportional to exp((l - max) / T) over the kept tokens
    double max_l = -std::numeric_limits<double>::infinity();
    for (const auto& c : cand_) max_l = std::max(max_l, static_cast<double>(c.logit));
    weight_.resize(cand_.size());
    double total = 0;
    for (size_t i = 0; i < cand_.size(); i++) {
      weight_[i] = std::exp((static_cast<double>(cand_[i].logit) - max_l) / p.temperature);
      total += weight_[i];
    }
    double u = rng.uniform() * total;
    double cum = 0;
    for (size_t i = 0; i < cand_.size(); i++) {
      cum += weight_[i];
      if (u < cum) return cand_[i].id;
    }
    return cand_.back().id;  // u rounded up to the total
  }

  // The tokens that may be drawn, with their probabilities (the exact distribution sample()
  // draws from). For tests and diagnostics.
  std::vector<std::pair<int32_t, double>> distribution(std::span<const float> logits,
                                                       std::span<const int32_t> history,
                                                       const SamplerParams& p) {
    std::vector<std::pair<int32_t, double>> out;
    if (!truncate(logits, history, p)) return out;
    if (p.temperature <= 0.0f) {
      out.emplace_back(cand_[0].id, 1.0);
      return out;
    }
    double max_l = -std::numeric_limits<double>::infinity();
    for (const auto& c : cand_) max_l = std::max(max_l, static_cast<double>(c.logit));
    double total = 0;
    for (const auto& c : cand_) {
      out.emplace_back(c.id, std::exp((static_cast<double>(c.logit) - max_l) / p.temperature));
      total += out.back().second;
    }
    for (auto& o : out) o.second /= total;
    return out;
  }

 private:
  // Strict total order: larger logit first, then lower id.
  static bool before(const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }

  // Penalties and truncations; leaves the surviving tokens in cand_ (for greedy: just the
  // argmax). False when nothing survives.
  bool truncate(std::span<const float> logits, std::span<const int32_t> history, const SamplerParams& p) {
    const size_t n_vocab = logits.size();
    cand_.clear();
    cand_.reserve(n_vocab);
    for (size_t i = 0; i < n_vocab; i++) {
      float l = logits[i];
      if (std::isnan(l) || l == -std::numeric_limits<float>::infinity()) continue;
      if (l == std::numeric_limits<float>::infinity()) l = std::numeric_limits<float>::max();
      cand_.push_back({static_cast<int32_t>(i), l});
    }
    if (cand_.empty()) return false;

    // penalties: every distinct token of the window once
    if (p.repeat_penalty != 1.0f && p.repeat_last_n != 0 && !history.empty()) {
      size_t n = p.repeat_last_n < 0 ? history.size() : std::min(history.size(), static_cast<size_t>(p.repeat_last_n));
      window_.assign(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
      std::sort(window_.begin(), window_.end());
      window_.erase(std::unique(window_.begin(), window_.end()), window_.end());
      // cand_ is in id order here (ids skipped only for unusable logits): binary search
      for (int32_t id : window_) {
        auto it = std::lower_bound(cand_.begin(), cand_.end(), id,
                                   [](const Candidate& c, int32_t v) { return c.id < v; });
        if (it == cand_.end() || it->id != id) continue;
        it->logit = it->logit > 0 ? it->logit / p.repeat_penalty : it->logit * p.repeat_penalty;
      }
    }

    if (p.temperature <= 0.0f) {
      size_t best = 0;  // strict '>' over ascending ids: ties go to the lowest id
      for (size_t i = 1; i < cand_.size(); i++)
        if (cand_[i].logit > cand_[best].logit) best = i;
      cand_[0] = cand_[best];
      cand_.resize(1);
      return true;
    }

    // top-k
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < cand_.size()) {
      std::nth_element(cand_.begin(), cand_.begin() + (p.top_k - 1), cand_.end(), before);
      cand_.resize(static_cast<size_t>(p.top_k));
    }
    float max_l = cand_[0].logit;
    for (const auto& c : cand_) max_l = std::max(max_l, c.logit);

    if (p.top_p >= 1.0f) {
      if (p.min_p > 0.0f) min_p_filter(max_l, p.min_p);
      return true;
    }

    // top-p: probabilities over the whole top-k set, so the normaliser is computed first
    double z = 0;
    for (const auto& c : cand_) z += std::exp(static_cast<double>(c.logit) - max_l);
    // min-p keeps a prefix of the same order: sorting only its survivors is enough
    if (p.min_p > 0.0f) min_p_filter(max_l, p.min_p);
    // sort progressively: the top-p prefix is usually short
    size_t sorted = std::min<size_t>(cand_.size(), 256);
    std::partial_sort(cand_.begin(), cand_.begin() + static_cast<std::ptrdiff_t>(sorted), cand_.end(), before);
    double cum = 0;
    for (size_t i = 0; i < cand_.size(); i++) {
      if (i == sorted) {
        std::sort(cand_.begin(), cand_.end(), before);  // same total order: the first `sorted` stay
        sorted = cand_.size();
      }
      cum += std::exp(static_cast<double>(cand_[i].logit) - max_l) / z;
      if (cum >= static_cast<double>(p.top_p)) {
        cand_.resize(i + 1);
        break;
      }
    }
    return true;
  }

  void min_p_filter(float max_l, float min_p) {
    const double threshold = static_cast<double>(max_l) + std::log(static_cast<double>(min_p));
    size_t k = 0;
    for (const auto& c : cand_)
      if (static_cast<double>(c.logit) >= threshold) cand_[k++] = c;
    cand_.resize(k);  // the maximum always passes
  }

  std::vector<Candidate> cand_;
  std::vector<double> weight_;
  std::vector<int32_t> window_;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
