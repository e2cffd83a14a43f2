// The sampler: greedy rules, the RNG stream, and the distribution it draws from, checked by a
// chi-square goodness-of-fit test of 100,000 draws against a distribution computed here, from
// the definitions, independently of the sampler's code.
#define LLMINFER_IMPLEMENTATION
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "common.hpp"

using llminfer::detail::Rng;
using llminfer::detail::Sampler;
using llminfer::detail::SamplerParams;

namespace {

// ---- chi-square upper tail: Q(k/2, x/2), the regularized upper incomplete gamma function ----
double gamma_q(double a, double x) {
  if (x <= 0) return 1.0;
  const double lg = std::lgamma(a);
  if (x < a + 1) {  // series for P(a, x)
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 100000; n++) {
      term *= x / (a + n);
      sum += term;
      if (std::fabs(term) < std::fabs(sum) * 1e-15) break;
    }
    return 1.0 - sum * std::exp(-x + a * std::log(x) - lg);
  }
  // continued fraction for Q(a, x) (modified Lentz)
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 100000; i++) {
    double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-15) break;
  }
  return std::exp(-x + a * std::log(x) - lg) * h;
}
double chi2_pvalue(double stat, int dof) {
  return gamma_q(dof / 2.0, stat / 2.0);
}

// ---- the expected distribution, written from the definitions (slow and plain on purpose) ----
// The penalties on each distinct token of the window (a result beyond the largest float is the
// largest float).
void apply_penalties(std::vector<float>& l, const std::vector<int32_t>& history, const SamplerParams& p) {
  if (p.repeat_penalty == 1.0f || p.repeat_last_n == 0) return;
  size_t n = p.repeat_last_n < 0 ? history.size() : std::min(history.size(), size_t(p.repeat_last_n));
  std::vector<bool> seen(l.size(), false);
  for (size_t i = history.size() - n; i < history.size(); i++) seen[size_t(history[i])] = true;
  for (size_t id = 0; id < l.size(); id++)
    if (seen[id])
      l[id] =
          std::min(l[id] > 0 ? l[id] / p.repeat_penalty : l[id] * p.repeat_penalty, std::numeric_limits<float>::max());
}

std::map<int32_t, double> expected_distribution(std::vector<float> l, const std::vector<int32_t>& history,
                                                const SamplerParams& p) {
  apply_penalties(l, history, p);
  std::vector<int32_t> order(l.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[size_t(a)] > l[size_t(b)]; });
  if (p.top_k > 0 && size_t(p.top_k) < order.size()) order.resize(size_t(p.top_k));
  // probabilities at temperature 1 over the top-k set
  std::vector<double> prob(order.size());
  double z = 0;
  for (size_t i = 0; i < order.size(); i++) z += prob[i] = std::exp(double(l[size_t(order[i])]));
  for (auto& q : prob) q /= z;
  size_t keep = order.size();
  if (p.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < order.size(); i++) {
      cum += prob[i];
      if (cum >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (p.min_p > 0.0f) {
    size_t k = 0;
    while (k < keep && prob[k] >= p.min_p * prob[0]) k++;
    keep = std::max<size_t>(k, 1);
  }
  std::map<int32_t, double> out;
  double total = 0;
  for (size_t i = 0; i < keep; i++) total += out[order[i]] = std::exp(double(l[size_t(order[i])]) / p.temperature);
  for (auto& [id, q] : out) q /= total;
  return out;
}

struct Fit {
  double p_value = 0;
  long outside = 0;  // draws of tokens the expected distribution gives probability 0
  int dof = 0;
};

// Chi-square of observed counts against `expected`; bins with an expected count below 5 are
// merged into one bin.
Fit fit(const std::map<int32_t, long>& counts, const std::map<int32_t, double>& expected, long n) {
  Fit f;
  for (const auto& [id, c] : counts)
    if (!expected.count(id)) f.outside += c;
  double stat = 0, small_e = 0, small_o = 0;
  int bins = 0;
  for (const auto& [id, q] : expected) {
    double e = q * double(n);
    auto it = counts.find(id);
    double o = it == counts.end() ? 0 : double(it->second);
    if (e < 5) {
      small_e += e;
      small_o += o;
      continue;
    }
    stat += (o - e) * (o - e) / e;
    bins++;
  }
  if (small_e > 0) {
    stat += (small_o - small_e) * (small_o - small_e) / std::max(small_e, 1e-9);
    bins++;
  }
  f.dof = std::max(1, bins - 1);
  f.p_value = chi2_pvalue(stat, f.dof);
  return f;
}

std::vector<float> random_logits(size_t n, double sigma, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> l(n);
  for (auto& x : l) {  // Box-Muller
    double u1 = std::max(rng.uniform(), 1e-300), u2 = rng.uniform();
    x = float(sigma * std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  return l;
}

std::map<int32_t, long> draw(const std::vector<float>& logits, const std::vector<int32_t>& history,
                             const SamplerParams& p, long n, uint64_t seed) {
  Sampler s;
  Rng rng(seed);
  std::map<int32_t, long> counts;
  for (long i = 0; i < n; i++) counts[s.sample(logits, history, p, rng)]++;
  return counts;
}

// Significance of the goodness-of-fit tests: a correct sampler fails with probability 0.1% per
// setting (and since the seeds are fixed, a passing run passes every time).
constexpr double kAlpha = 0.001;
constexpr long kDraws = 100000;

}  // namespace

TEST_CASE("sampler: the chi-square p-value matches tabulated quantiles") {
  // 95% quantiles: chi2(1) 3.841, chi2(10) 18.307, chi2(100) 124.342; 99.9%: chi2(5) 20.515
  CHECK(std::fabs(chi2_pvalue(3.841, 1) - 0.05) < 2e-4);
  CHECK(std::fabs(chi2_pvalue(18.307, 10) - 0.05) < 2e-4);
  CHECK(std::fabs(chi2_pvalue(124.342, 100) - 0.05) < 2e-4);
  CHECK(std::fabs(chi2_pvalue(20.515, 5) - 0.001) < 2e-5);
  CHECK(std::fabs(chi2_pvalue(0.5, 3) - 0.918891) < 1e-5);
}

TEST_CASE("sampler: 100,000 draws follow the exactly computed truncated distribution") {
  struct Setting {
    const char* name;
    size_t vocab;
    double sigma;
    SamplerParams p;
    std::vector<int32_t> history;
  };
  std::vector<Setting> settings = {
      {"temperature 1, nothing truncated", 40, 1.5, {.temperature = 1.0f}, {}},
      {"temperature 0.7, top-k 10", 60, 2.0, {.temperature = 0.7f, .top_k = 10}, {}},
      {"temperature 1.3, top-p 0.8", 60, 1.5, {.temperature = 1.3f, .top_p = 0.8f}, {}},
      {"temperature 1, min-p 0.05", 60, 1.5, {.temperature = 1.0f, .min_p = 0.05f}, {}},
      {"top-k 25 + top-p 0.9 + min-p 0.02 + repeat penalty 1.5, T 0.9",
       80,
       2.0,
       {.temperature = 0.9f, .top_k = 25, .top_p = 0.9f, .min_p = 0.02f, .repeat_penalty = 1.5f, .repeat_last_n = 6},
       {}},
      // more than 256 candidates: the sampler finds the top-p cut with a histogram
      {"600 flat logits, top-p 0.95 keeps most of them", 600, 0.3, {.temperature = 1.0f, .top_p = 0.95f}, {}},
      {"900 peaked logits, top-p 0.6, T 0.8", 900, 3.0, {.temperature = 0.8f, .top_p = 0.6f}, {}},
      {"700 logits, top-p 0.9 + min-p 0.002", 700, 2.5, {.temperature = 1.1f, .top_p = 0.9f, .min_p = 0.002f}, {}},
  };
  uint64_t seed = 1;
  for (auto& s : settings) {
    CAPTURE(s.name);
    auto logits = random_logits(s.vocab, s.sigma, 1000 + seed);
    if (s.p.repeat_penalty != 1.0f) {
      // penalise the two largest logits and a negative one; older tokens are out of the window
      std::vector<int32_t> order(logits.size());
      std::iota(order.begin(), order.end(), 0);
      std::sort(order.begin(), order.end(),
                [&](int32_t a, int32_t b) { return logits[size_t(a)] > logits[size_t(b)]; });
      s.history = {order[2], order[0], order[0], order.back(), order[1], order[40], order[3]};
      s.history.insert(s.history.begin(), order[5]);  // outside the last-6 window: not penalised
    }
    auto expected = expected_distribution(logits, s.history, s.p);
    auto counts = draw(logits, s.history, s.p, kDraws, seed++);
    Fit f = fit(counts, expected, kDraws);
    CAPTURE(f.dof);
    if (std::getenv("LLMINFER_VERBOSE")) std::printf("%s: dof %d p %.4f\n", s.name, f.dof, f.p_value);
    CHECK(f.outside == 0);
    CHECK(f.p_value > kAlpha);
    // the sampler's own description of its distribution agrees with the definition
    Sampler sm;
    auto own = sm.distribution(logits, s.history, s.p);
    CHECK(own.size() == expected.size());
    double max_rel = 0;  // float exp inside the sampler: relative error ~1e-7
    for (auto& [id, q] : own)
      max_rel = std::max(max_rel, std::fabs(q / (expected.count(id) ? expected[id] : 1e-300) - 1));
    CHECK(max_rel < 1e-5);
  }
}

TEST_CASE("sampler: the goodness-of-fit test rejects a wrong distribution") {
  // The same draws as above, compared with distributions that are slightly wrong: each must be
  // rejected far beyond the significance level, or the test above proves nothing.
  auto logits = random_logits(60, 1.5, 1003);
  SamplerParams p{.temperature = 1.3f, .top_p = 0.8f};
  auto counts = draw(logits, {}, p, kDraws, 3);
  auto right = fit(counts, expected_distribution(logits, {}, p), kDraws);
  CHECK(right.p_value > kAlpha);

  SamplerParams wrong_t = p;
  wrong_t.temperature = 1.2f;  // temperature off by 8%
  CHECK(fit(counts, expected_distribution(logits, {}, wrong_t), kDraws).p_value < 1e-6);

  SamplerParams wrong_p = p;
  wrong_p.top_p = 0.85f;  // a nucleus a little larger
  auto f = fit(counts, expected_distribution(logits, {}, wrong_p), kDraws);
  CHECK(f.p_value < 1e-6);
  if (std::getenv("LLMINFER_VERBOSE"))
    std::printf("right p %.4f; wrong T p %.3g; wrong top-p p %.3g outside %ld\n", right.p_value,
                fit(counts, expected_distribution(logits, {}, wrong_t), kDraws).p_value, f.p_value, f.outside);

  // temperature applied before top-p instead of after: another nucleus
  SamplerParams t1 = p;
  t1.temperature = 1.0f;
  auto scaled = logits;
  for (auto& x : scaled) x /= 1.3f;
  auto before = expected_distribution(scaled, {}, t1);
  auto fb = fit(counts, before, kDraws);
  CHECK((fb.outside > 0 || fb.p_value < 1e-6));

  // penalty applied by division to negative logits (the naive rule) is rejected
  SamplerParams pen{.temperature = 1.0f, .repeat_penalty = 2.0f, .repeat_last_n = 64};
  std::vector<int32_t> hist;
  for (int32_t id = 0; id < 60; id++)
    if (logits[size_t(id)] < 0 && logits[size_t(id)] > -1.5f) hist.push_back(id);
  auto c2 = draw(logits, hist, pen, kDraws, 4);
  CHECK(fit(c2, expected_distribution(logits, hist, pen), kDraws).p_value > kAlpha);
  auto naive = logits;
  for (int32_t id : hist) naive[size_t(id)] /= 2.0f;
  SamplerParams nopen{.temperature = 1.0f};
  CHECK(fit(c2, expected_distribution(naive, {}, nopen), kDraws).p_value < 1e-6);
}

TEST_CASE("sampler: greedy is the argmax of the penalised logits, ties to the lowest id") {
  Sampler s;
  Rng rng(0);
  SamplerParams greedy;
  std::vector<float> l = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
  CHECK(s.sample(l, {}, greedy, rng) == 1);
  // top-k / top-p / min-p never change the greedy choice
  SamplerParams g2{.temperature = 0.0f, .top_k = 1, .top_p = 0.1f, .min_p = 0.9f};
  CHECK(s.sample(l, {}, g2, rng) == 1);
  // penalties do: 2.0 / 1.1 < 1.9
  SamplerParams pen{.temperature = 0.0f, .repeat_penalty = 1.1f};
  std::vector<int32_t> hist = {3, 1};
  CHECK(s.sample(l, hist, pen, rng) == 4);
  // only the window counts
  SamplerParams pen1{.temperature = 0.0f, .repeat_penalty = 1.1f, .repeat_last_n = 1};
  CHECK(s.sample(l, hist, pen1, rng) == 3);
  // NaN and -inf are never chosen; nothing usable -> -1
  std::vector<float> bad = {std::nanf(""), -INFINITY, -3.0f, std::nanf("")};
  CHECK(s.sample(bad, {}, greedy, rng) == 2);
  SamplerParams warm{.temperature = 0.8f, .top_k = 3, .top_p = 0.5f};
  CHECK(s.sample(bad, {}, warm, rng) == 2);
  std::vector<float> none = {std::nanf(""), -INFINITY};
  CHECK(s.sample(none, {}, greedy, rng) == -1);
  CHECK(s.sample(none, {}, warm, rng) == -1);
  CHECK(s.sample(std::vector<float>{}, {}, warm, rng) == -1);
}

// The candidates sample() draws from, in their order, from one plain pass over every token (as
// the sampler computed them before it skipped work): the argmax for greedy; top-k's heap fed
// every usable token in id order; min-p alone, the tokens at or above its threshold in id order;
// otherwise every usable token in id order. With the probabilities temper() gives them, so the
// same seed draws the same tokens. (top-p's cut on a set is the same code either way.)
std::vector<std::pair<int32_t, double>> plain_candidates(std::vector<float> l, const std::vector<int32_t>& history,
                                                         const SamplerParams& p) {
  using C = Sampler::Candidate;
  const float neg_inf = -INFINITY, big = std::numeric_limits<float>::max();
  for (auto& v : l) v = std::isnan(v) ? neg_inf : std::min(v, big);
  apply_penalties(l, history, p);
  std::vector<C> c;
  if (p.temperature <= 0.0f) {
    size_t best = 0;
    for (size_t i = 1; i < l.size(); i++)
      if (l[i] > l[best]) best = i;
    if (l[best] == neg_inf) return {};
    return {{int32_t(best), 1.0}};
  }
  auto before = [](const C& a, const C& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };
  for (size_t i = 0; i < l.size(); i++) {
    if (l[i] == neg_inf) continue;
    C x{int32_t(i), l[i], 0.0f};
    if (p.top_k > 0 && size_t(p.top_k) < l.size()) {
      if (c.size() < size_t(p.top_k)) {
        c.push_back(x);
        std::push_heap(c.begin(), c.end(), before);
      } else if (before(x, c.front())) {
        std::pop_heap(c.begin(), c.end(), before);
        c.back() = x;
        std::push_heap(c.begin(), c.end(), before);
      }
    } else {
      c.push_back(x);
    }
  }
  if (c.empty()) return {};
  float max_l = c[0].logit;
  for (const auto& x : c) max_l = std::max(max_l, x.logit);
  if (p.min_p > 0.0f) {
    const double threshold = double(max_l) + std::log(double(p.min_p));
    std::erase_if(c, [&](const C& x) { return !(double(x.logit) >= threshold); });
  }
  std::vector<std::pair<int32_t, double>> out;
  double total = 0;
  for (auto& x : c) total += x.w = std::exp((x.logit - max_l) * (1.0f / p.temperature));
  for (const auto& x : c) out.emplace_back(x.id, x.w / total);
  return out;
}

TEST_CASE("sampler: the candidates and their order are those of one plain pass over the vocabulary") {
  const float big = std::numeric_limits<float>::max();
  Sampler s;
  int cases = 0;
  for (size_t n : {size_t(1), size_t(7), size_t(8), size_t(9), size_t(61), size_t(1000), size_t(151936)}) {
    for (int variant = 0; variant < 6; variant++) {
      auto l = random_logits(n, 2.5, 77 + n + size_t(variant));
      Rng r(n * 10 + size_t(variant));
      auto at = [&] { return size_t(r.next() % n); };
      // ties (copies of the largest values), NaN, -inf, +inf, the largest float, all at random ids
      if (variant >= 1) {
        const float top = *std::max_element(l.begin(), l.end());
        for (int i = 0; i < 5; i++) l[at()] = top;
        l[at()] = std::nanf("");
        l[at()] = -INFINITY;
      }
      if (variant == 2 || variant == 3) l[at()] = big;
      if (variant == 3) l[at()] = INFINITY;
      if (variant == 4) l.back() = 100.0f;  // the maximum in the last, partial group of 8
      if (variant == 5)                     // hardly anything usable
        for (size_t i = 0; i < n; i++) l[i] = i % 97 == 3 ? l[i] : (i % 2 ? -INFINITY : std::nanf(""));
      std::vector<int32_t> history;
      for (int i = 0; i < 20; i++) history.push_back(int32_t(at()));
      const SamplerParams settings[] = {
          {.temperature = 0.0f},
          {.temperature = 0.0f, .repeat_penalty = 1.3f, .repeat_last_n = 8},
          {.temperature = 0.7f},
          {.temperature = 0.8f, .top_k = 1},
          {.temperature = 0.8f, .top_k = 40},
          {.temperature = 1.2f, .top_k = int(std::max<size_t>(1, n - 1))},
          {.temperature = 0.8f, .top_k = 40, .repeat_penalty = 1.5f, .repeat_last_n = -1},
          {.temperature = 0.9f, .min_p = 0.05f},
          {.temperature = 1.0f, .min_p = 1.0f},
          {.temperature = 0.6f, .min_p = 0.2f, .repeat_penalty = 0.8f, .repeat_last_n = 16},
          {.temperature = 0.8f, .top_k = 40, .min_p = 0.1f},
      };
      for (const SamplerParams& p : settings) {
        CAPTURE(n);
        CAPTURE(variant);
        CAPTURE(p.temperature);
        CAPTURE(p.top_k);
        CAPTURE(p.min_p);
        CAPTURE(p.repeat_penalty);
        auto want = plain_candidates(l, history, p);
        auto got = s.distribution(l, history, p);
        REQUIRE(got.size() == want.size());
        int diffs = 0;
        for (size_t i = 0; i < got.size(); i++)
          diffs += got[i].first != want[i].first || !(got[i].second == want[i].second);
        CHECK(diffs == 0);
        // and sample() draws from that list: -1 exactly when it is empty
        Rng rng(5);
        const int32_t id = s.sample(l, history, p, rng);
        CHECK(
            (want.empty() ? id == -1 : std::any_of(want.begin(), want.end(), [&](auto& w) { return w.first == id; })));
        cases++;
      }
    }
  }
  CHECK(cases == 7 * 6 * 11);
}

TEST_CASE("sampler: the RNG stream is fixed by the seed") {
  // First outputs of xoshiro256** seeded by splitmix64(42), from an independent Python version:
  //   python3 -c 'M=(1<<64)-1
  //   def sm(x):
  //     x=(x+0x9e3779b97f4a7c15)&M; z=x; z=((z^(z>>30))*0xbf58476d1ce4e5b9)&M
  //     z=((z^(z>>27))*0x94d049bb133111eb)&M; return x, z^(z>>31)
  //   x=42; s=[]
  //   for _ in range(4): x,v=sm(x); s.append(v)
  //   rl=lambda v,k:((v<<k)|(v>>(64-k)))&M
  //   for _ in range(3):
  //     r=(rl((s[1]*5)&M,7)*9)&M; t=(s[1]<<17)&M; s[2]^=s[0]; s[3]^=s[1]; s[1]^=s[2]; s[0]^=s[3]
  //     s[2]^=t; s[3]=rl(s[3],45); print(hex(r))'
  Rng r(42);
  CHECK(r.next() == 0x15780b2e0c2ec716ull);
  CHECK(r.next() == 0x6104d9866d113a7eull);
  CHECK(r.next() == 0xae17533239e499a1ull);
  Rng a(7), b(7), c(8);
  int same = 0, diff = 0;
  for (int i = 0; i < 100; i++) {
    uint64_t x = a.next();
    same += x == b.next();
    diff += x != c.next();
  }
  CHECK(same == 100);
  CHECK(diff == 100);
  Rng u(1);
  double lo = 1, hi = 0;
  for (int i = 0; i < 10000; i++) {
    double v = u.uniform();
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  CHECK(lo >= 0.0);
  CHECK(hi < 1.0);
  CHECK(lo < 0.001);
  CHECK(hi > 0.999);
}

TEST_CASE("sampler: options are validated") {
  using llminfer::detail::validate_sampler_params;
  CHECK(validate_sampler_params({}).ok());
  CHECK(!validate_sampler_params({.temperature = -1.0f}).ok());
  CHECK(!validate_sampler_params({.temperature = NAN}).ok());
  CHECK(!validate_sampler_params({.top_k = -2}).ok());
  CHECK(!validate_sampler_params({.top_p = 0.0f}).ok());
  CHECK(!validate_sampler_params({.top_p = 1.5f}).ok());
  CHECK(!validate_sampler_params({.min_p = -0.1f}).ok());
  CHECK(!validate_sampler_params({.repeat_penalty = 0.0f}).ok());
  CHECK(!validate_sampler_params({.repeat_last_n = -2}).ok());
  CHECK(validate_sampler_params({.repeat_last_n = -1}).ok());
}
