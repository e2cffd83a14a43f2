// ==== Sampling: RNG and the sampler chain ====
// The chain, in the conventional order (llama.cpp's default order, without its extras):
//   penalties -> top-k -> top-p -> min-p -> temperature -> draw
// * penalties: every distinct token among the last `repeat_last_n` of the history (prompt and
//   generated tokens; 0 disables, -1 means the whole history) has its logit divided by
//   `repeat_penalty` when positive and multiplied by it otherwise (CTRL / llama.cpp rule); a
//   result beyond the largest float (a penalty below 1) counts as the largest float, as a logit
//   of +inf does.
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

  // The whole state (saved sessions).
  void get_state(uint64_t out[4]) const {
    for (int i = 0; i < 4; i++) out[i] = s_[i];
  }
  void set_state(const uint64_t in[4]) {
    for (int i = 0; i < 4; i++) s_[i] = in[i];
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
    float w;  // exp(logit - max logit) once computed (float exp: 1e-7 relative error, 3x faster)
  };

  // One token from `logits` ([n_vocab]) given the tokens so far (for the penalties), or -1 when
  // no token has a usable logit. Params must have passed validate_sampler_params.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history, const SamplerParams& p, Rng& rng) {
    if (!truncate(logits, history, p)) return -1;
    if (p.temperature <= 0.0f || cand_.size() == 1) return cand_[0].id;
    // draw: probabilities proportional to exp((l - max) / T) over the kept tokens
    const double total = temper(p.temperature);
    double u = rng.uniform() * total;
    double cum = 0;
    for (const auto& c : cand_) {
      cum += c.w;
      if (u < cum) return c.id;
    }
    return cand_.back().id;  // u rounded up to the total
  }

  // The tokens that may be drawn, with their probabilities (the exact distribution sample()
  // draws from). For tests and diagnostics.
  std::vector<std::pair<int32_t, double>> distribution(std::span<const float> logits, std::span<const int32_t> history,
                                                       const SamplerParams& p) {
    std::vector<std::pair<int32_t, double>> out;
    if (!truncate(logits, history, p)) return out;
    if (p.temperature <= 0.0f) {
      out.emplace_back(cand_[0].id, 1.0);
      return out;
    }
    const double total = temper(p.temperature);
    for (const auto& c : cand_) out.emplace_back(c.id, c.w / total);
    return out;
  }

 private:
  static constexpr size_t kSortDirectly = 256;  // above: the histogram cut (faster)
  static constexpr int kBins = 4096;

  // Strict total order: larger logit first, then lower id.
  static bool before(const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
  static float usable(float l) {  // NaN -> -inf (never kept); +inf -> the largest float
    if (std::isnan(l)) return -std::numeric_limits<float>::infinity();
    return std::min(l, std::numeric_limits<float>::max());
  }

  // Sets w = exp((l - max) / T) on the kept tokens; returns their sum.
  double temper(float temperature) {
    float max_l = cand_[0].logit;
    for (const auto& c : cand_) max_l = std::max(max_l, c.logit);
    double total = 0;
    const float inv_t = 1.0f / temperature;
    for (auto& c : cand_) total += c.w = std::exp((c.logit - max_l) * inv_t);
    return total;
  }

  // The largest usable() value of l[0, n) and its first id (ties -> the lowest id): 8 running
  // maxima (a NaN never wins a '>'; +inf counts as the largest float, as usable() makes it), then
  // the first id that holds the maximum. 0 when no value is usable (the caller sees -inf there).
  static size_t argmax_usable(const float* l, size_t n) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    float m[8] = {kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (int j = 0; j < 8; j++) m[j] = l[i + static_cast<size_t>(j)] > m[j] ? l[i + static_cast<size_t>(j)] : m[j];
    for (; i < n; i++) m[0] = l[i] > m[0] ? l[i] : m[0];
    float top = m[0];
    for (int j = 1; j < 8; j++) top = m[j] > top ? m[j] : top;
    top = usable(top);
    if (top == kNegInf) return 0;
    i = 0;
    while (usable(l[i]) != top) i++;
    return i;
  }

  // Penalties and truncations; leaves the surviving tokens in cand_ (for greedy: just the
  // argmax). False when nothing survives. The logits are read through usable() as they are;
  // only penalties need a copy (work_). On every path the candidates, their order and their values
  // are what one pass over all the tokens gives, so the shortcuts do not change the tokens a seed
  // draws: top-k looks at a token only when it beats the heap's worst, min-p alone keeps only the
  // tokens at or above its threshold.
  bool truncate(std::span<const float> logits, std::span<const int32_t> history, const SamplerParams& p) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    const size_t n_vocab = logits.size();
    cand_.clear();
    if (n_vocab == 0) return false;
    const float* l = logits.data();

    // penalties: every distinct token of the window once
    if (p.repeat_penalty != 1.0f && p.repeat_last_n != 0 && !history.empty()) {
      work_.resize(n_vocab);
      for (size_t i = 0; i < n_vocab; i++) work_[i] = usable(logits[i]);
      size_t n = p.repeat_last_n < 0 ? history.size() : std::min(history.size(), static_cast<size_t>(p.repeat_last_n));
      window_.assign(history.end() - static_cast<std::ptrdiff_t>(n), history.end());
      std::sort(window_.begin(), window_.end());
      window_.erase(std::unique(window_.begin(), window_.end()), window_.end());
      for (int32_t id : window_) {
        if (id < 0 || static_cast<size_t>(id) >= n_vocab) continue;
        float& v = work_[static_cast<size_t>(id)];
        v = v > 0 ? v / p.repeat_penalty : v * p.repeat_penalty;  // (+inf: usable() reads the largest float)
      }
      l = work_.data();
    }

    if (p.temperature <= 0.0f) {
      const size_t best = argmax_usable(l, n_vocab);
      const float v = usable(l[best]);
      if (v == kNegInf) return false;
      cand_.push_back({static_cast<int32_t>(best), v, 1.0f});
      return true;
    }

    // top-k: one pass with a k-element min-heap (k is usually small next to the vocabulary)
    if (p.top_k > 0 && static_cast<size_t>(p.top_k) < n_vocab) {
      const size_t k = static_cast<size_t>(p.top_k);
      auto worse_on_top = [](const Candidate& a, const Candidate& b) { return before(a, b); };
      size_t i = 0;
      for (; i < n_vocab && cand_.size() < k; i++) {
        const float v = usable(l[i]);
        if (v == kNegInf) continue;
        cand_.push_back({static_cast<int32_t>(i), v, 0.0f});
        std::push_heap(cand_.begin(), cand_.end(), worse_on_top);
      }
      // The heap is full: a later token (a larger id than any in it) enters only with a larger
      // logit than its worst. A raw value that is not larger is not larger after usable() (NaN
      // compares false; +inf becomes the largest float, which is checked once it is found).
      while (i < n_vocab) {
        const float worst = cand_.front().logit;
        while (i < n_vocab && !(l[i] > worst)) i++;
        if (i == n_vocab) break;
        const float v = usable(l[i]);
        if (v > worst) {
          std::pop_heap(cand_.begin(), cand_.end(), worse_on_top);
          cand_.back() = {static_cast<int32_t>(i), v, 0.0f};
          std::push_heap(cand_.begin(), cand_.end(), worse_on_top);
        }
        i++;
      }
    } else {
      // every usable token in id order; min-p alone cuts as it goes (min_p_filter's rule, from the
      // largest logit, which no other step removes)
      const bool min_p_alone = p.top_p >= 1.0f && p.min_p > 0.0f;
      double threshold = std::numeric_limits<double>::lowest();  // (-inf is not at or above it)
      if (min_p_alone) {
        const float max_l = usable(l[argmax_usable(l, n_vocab)]);
        if (max_l == kNegInf) return false;
        threshold = min_p_threshold(max_l, p.min_p);
      } else {
        cand_.reserve(n_vocab);
      }
      for (size_t i = 0; i < n_vocab; i++) {
        const float v = usable(l[i]);
        if (static_cast<double>(v) >= threshold) cand_.push_back({static_cast<int32_t>(i), v, 0.0f});
      }
      if (min_p_alone) return true;
    }
    if (cand_.empty()) return false;
    float max_l = cand_[0].logit;
    for (const auto& c : cand_) max_l = std::max(max_l, c.logit);

    if (p.top_p >= 1.0f) {
      if (p.min_p > 0.0f) min_p_filter(max_l, p.min_p);
      return true;
    }

    // top-p: probabilities over the whole top-k set, so the normaliser is computed first
    double z = 0;
    for (auto& c : cand_) z += c.w = std::exp(c.logit - max_l);
    // min-p keeps a prefix of the same order: only its survivors need ordering
    if (p.min_p > 0.0f) min_p_filter(max_l, p.min_p);
    const double top_p = static_cast<double>(p.top_p);
    double cum = 0;
    size_t first = 0;  // cand_[first, end) still to be walked in order
    if (cand_.size() > kSortDirectly) {
      // Large sets (a big vocabulary without top-k): a histogram of the logits finds the bin where
      // the cumulative probability crosses p in O(n); only that bin is sorted. Bins are ordered
      // like the logits, so this keeps exactly the prefix a full sort would.
      float lo = max_l;
      for (const auto& c : cand_) lo = std::min(lo, c.logit);
      const double scale = max_l > lo ? (kBins - 1) / (static_cast<double>(max_l) - lo) : 0.0;
      auto bin = [&](float l) {
        return std::min(kBins - 1, static_cast<int>((static_cast<double>(max_l) - l) * scale));
      };
      bin_mass_.assign(kBins, 0.0);
      for (const auto& c : cand_) bin_mass_[static_cast<size_t>(bin(c.logit))] += c.w / z;
      int cross = kBins;
      for (int b = 0; b < kBins; b++) {
        if (cum + bin_mass_[static_cast<size_t>(b)] >= top_p) {
          cross = b;
          break;
        }
        cum += bin_mass_[static_cast<size_t>(b)];
      }
      if (cross == kBins) return true;  // rounding: the whole set is needed
      auto below = std::partition(cand_.begin(), cand_.end(), [&](const Candidate& c) { return bin(c.logit) < cross; });
      auto at = std::partition(below, cand_.end(), [&](const Candidate& c) { return bin(c.logit) == cross; });
      cand_.erase(at, cand_.end());
      first = static_cast<size_t>(below - cand_.begin());
    }
    std::sort(cand_.begin() + static_cast<std::ptrdiff_t>(first), cand_.end(), before);
    for (size_t i = first; i < cand_.size(); i++) {
      cum += cand_[i].w / z;
      if (cum >= top_p) {
        cand_.resize(i + 1);
        break;
      }
    }
    return true;
  }

  // min-p keeps the tokens whose logit is at least this
  static double min_p_threshold(float max_l, float min_p) {
    return static_cast<double>(max_l) + std::log(static_cast<double>(min_p));
  }
  void min_p_filter(float max_l, float min_p) {
    const double threshold = min_p_threshold(max_l, min_p);
    size_t k = 0;
    for (const auto& c : cand_)
      if (static_cast<double>(c.logit) >= threshold) cand_[k++] = c;
    cand_.resize(k);  // the maximum always passes
  }

  std::vector<float> work_;  // [n_vocab] penalised logits
  std::vector<Candidate> cand_;
  std::vector<double> bin_mass_;
  std::vector<int32_t> window_;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
