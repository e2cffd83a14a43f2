// ==== Validation report: how close two sets of logits are (compare CLI, conformance tests) ====
// Per position: top-1 equal, Pearson correlation over the whole vocabulary, overlap of the two
// top-10 sets. The same measures a user runs with `llminfer compare` against a reference file.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// The report is the public LogitsComparison (compare_logits below; llminfer::compare_logits).
using LogitsReport = LogitsComparison;

// Pearson correlation in double (1 when both are constant and equal, 0 when only one is).
inline double pearson(const float* a, const float* b, size_t n) {
  if (n == 0) return 1;
  double ma = 0, mb = 0;
  for (size_t k = 0; k < n; k++) {
    ma += a[k];
    mb += b[k];
  }
  ma /= double(n);
  mb /= double(n);
  double sab = 0, saa = 0, sbb = 0;
  for (size_t k = 0; k < n; k++) {
    double da = a[k] - ma, db = b[k] - mb;
    sab += da * db;
    saa += da * da;
    sbb += db * db;
  }
  if (saa == 0 || sbb == 0) return saa == sbb ? 1.0 : 0.0;
  return sab / std::sqrt(saa * sbb);
}

// Ids of the k largest values, largest first (ties: lower id first, as llama.cpp's sampler).
inline std::vector<int> top_k_ids(const float* x, int n, int k) {
  k = std::max(0, std::min(k, n));
  std::vector<int> ids;
  ids.reserve(static_cast<size_t>(k) + 1);
  auto better = [&](int i, int j) { return x[i] > x[j] || (x[i] == x[j] && i < j); };
  for (int i = 0; i < n; i++) {
    if (static_cast<int>(ids.size()) == k && (k == 0 || !better(i, ids.back()))) continue;
    auto it = std::upper_bound(ids.begin(), ids.end(), i, [&](int a, int b) { return better(a, b); });
    ids.insert(it, i);
    if (static_cast<int>(ids.size()) > k) ids.pop_back();
  }
  return ids;
}

inline double logsumexp(const float* x, int n) {
  float mx = -INFINITY;
  for (int i = 0; i < n; i++) mx = std::max(mx, x[i]);
  if (!std::isfinite(mx)) return mx;
  double s = 0;
  for (int i = 0; i < n; i++) s += std::exp(double(x[i]) - mx);
  return mx + std::log(s);
}

// Compares `rows` positions of [rows][n_vocab] logits.
inline LogitsReport compare_logits(const float* ours, const float* ref, int rows, int n_vocab) {
  LogitsReport r;
  r.positions = rows;
  double psum = 0, osum = 0;
  for (int p = 0; p < rows; p++) {
    const float* a = ours + size_t(p) * n_vocab;
    const float* b = ref + size_t(p) * n_vocab;
    bool finite = true;
    for (int i = 0; i < n_vocab; i++) {
      bool fa = std::isfinite(a[i]), fb = std::isfinite(b[i]);
      if (fa && fb) {
        r.max_abs_diff = std::max(r.max_abs_diff, std::fabs(double(a[i]) - double(b[i])));
        r.ref_max_abs = std::max(r.ref_max_abs, std::fabs(double(b[i])));
      }
      r.nonfinite_ours += !fa;
      r.nonfinite_ref += !fb;
      if ((!fa || !fb) && finite) {
        finite = false;
        if (r.first_nonfinite_pos < 0) {
          r.first_nonfinite_pos = p;
          r.first_nonfinite_id = i;
        }
      }
    }
    std::vector<int> ta = top_k_ids(a, n_vocab, 10), tb = top_k_ids(b, n_vocab, 10);
    bool same = finite && !ta.empty() && !tb.empty() && ta[0] == tb[0];
    r.top1_matches += same;
    if (!same && r.first_divergence < 0) r.first_divergence = p;
    double pc = finite ? pearson(a, b, static_cast<size_t>(n_vocab)) : 0.0;
    psum += pc;
    r.pearson_min = std::min(r.pearson_min, pc);
    int overlap = 0;
    for (int x : ta) overlap += std::find(tb.begin(), tb.end(), x) != tb.end();
    osum += overlap;
  }
  r.top1_match_all = r.top1_matches == rows;
  r.max_rel_diff = r.ref_max_abs > 0 ? r.max_abs_diff / r.ref_max_abs : (r.max_abs_diff > 0 ? INFINITY : 0);
  r.pearson_mean = rows ? psum / rows : 1;
  r.top10_overlap_mean = rows ? osum / rows : 10;
  if (rows == 0) r.pearson_min = 1;
  return r;
}

// Token ids separated by commas and/or white space: "1,2,3", "1 2 3", or a JSON array "[1, 2]".
// At least one id unless allow_empty; an item that is not a non-negative 32-bit integer is an error
// naming it.
inline Result<std::vector<int32_t>> parse_id_list(std::string_view s, bool allow_empty = false) {
  auto is_sep = [](char c) {
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '[' || c == ']';
  };
  std::vector<int32_t> ids;
  size_t k = 0;
  while (k < s.size()) {
    if (is_sep(s[k])) {
      k++;
      continue;
    }
    size_t e = k;
    while (e < s.size() && !is_sep(s[e])) e++;
    std::string_view tok = s.substr(k, e - k);
    int32_t v = 0;
    auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), v);
    if (ec != std::errc() || p != tok.data() + tok.size() || v < 0)
      return make_error(Errc::invalid_argument, "'" + printable(tok) + "' is not a token id (expected ids like 1,2,3)");
    ids.push_back(v);
    k = e;
  }
  if (ids.empty() && !allow_empty) return make_error(Errc::invalid_argument, "no token ids given");
  return ids;
}

// Logits of `ids` evaluated as one sequence from position 0 in a fresh context (big enough for
// them): the last position's [n_vocab], or every position's [n][n_vocab] with `all`.
inline Result<std::vector<float>> logits_of_ids(const std::shared_ptr<const Engine>& engine,
                                                std::span<const int32_t> ids, bool all) {
  int n_ctx = std::max<int>(engine->n_ctx_default(), static_cast<int>(std::min<size_t>(ids.size(), 1u << 24)));
  auto ctx = Context::create(engine, n_ctx);
  if (!ctx) return ctx.error();
  std::vector<float> logits;
  auto st = ctx->eval(ids, logits, all);
  if (!st) return st.error();
  if (*st != EvalStatus::ok) return make_error(Errc::internal, "evaluation did not complete");
  return logits;
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
