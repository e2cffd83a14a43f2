// ==== Constrained sampling: grammar masks, logit bias, banned tokens ====
// Before the sampling chain, the logits of every token the constraint forbids become -inf, and the
// logit biases are added; after the draw, the chosen token's bytes advance the grammar. A token is
// allowed when its bytes (as the output text will hold them) keep the text a prefix of some string
// of the grammar; an end-of-generation token only where the text is a complete match. Control
// tokens and tokens without bytes are never allowed under a grammar.
//
// Cost: the allowed set of a grammar state is found by walking a prefix tree of the vocabulary's
// bytes (VocabTrie, built once per model) in step with the matcher, skipping every subtree whose
// first byte the state refuses; the matcher's transitions are cached per state and byte, and each
// state's mask (a bitset over the vocabulary) is cached too, so a state seen before (the inside of
// a string, the same field again) costs a lookup plus one pass over the logits.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// The vocabulary's usable tokens as a prefix tree over their bytes, nodes in depth-first order.
struct VocabTrie {
  std::vector<uint8_t> byte;        // [nodes] the byte leading to the node
  std::vector<uint16_t> depth;      // [nodes] 1 for children of the root
  std::vector<uint32_t> end;        // [nodes] first node after the node's subtree
  std::vector<uint32_t> tok_begin;  // [nodes + 1] the node's tokens: ids[tok_begin[i], tok_begin[i + 1])
  std::vector<int32_t> ids;         // token ids sorted by their bytes
  std::vector<int32_t> eog;         // end-of-generation ids
  size_t max_depth = 0;

  static std::shared_ptr<const VocabTrie> build(const Tokenizer& tok) {
    auto t = std::make_shared<VocabTrie>();
    std::vector<std::pair<std::string_view, int32_t>> order;
    for (int32_t id = 0; id < tok.n_vocab(); id++) {
      if (tok.is_eog(id)) {
        t->eog.push_back(id);
        continue;
      }
      std::string_view b = tok.token_bytes(id);
      if (tok.is_control(id) || b.empty() || b.size() > 0xFFFF) continue;
      order.emplace_back(b, id);
    }
    std::sort(order.begin(), order.end());
    t->byte.reserve(order.size() * 3);
    t->depth.reserve(order.size() * 3);
    t->end.reserve(order.size() * 3);
    t->tok_begin.reserve(order.size() * 3);
    t->ids.reserve(order.size());
    std::vector<uint32_t> path;  // open nodes, one per depth
    std::string_view prev;
    for (const auto& [b, id] : order) {
      size_t l = 0;
      while (l < prev.size() && l < b.size() && prev[l] == b[l]) l++;
      while (path.size() > l) {
        t->end[path.back()] = static_cast<uint32_t>(t->byte.size());
        path.pop_back();
      }
      for (size_t k = l; k < b.size(); k++) {
        path.push_back(static_cast<uint32_t>(t->byte.size()));
        t->byte.push_back(static_cast<uint8_t>(b[k]));
        t->depth.push_back(static_cast<uint16_t>(k + 1));
        t->end.push_back(0);
        t->tok_begin.push_back(static_cast<uint32_t>(t->ids.size()));
      }
      t->ids.push_back(id);
      t->max_depth = std::max(t->max_depth, b.size());
      prev = b;
    }
    while (!path.empty()) {
      t->end[path.back()] = static_cast<uint32_t>(t->byte.size());
      path.pop_back();
    }
    t->tok_begin.push_back(static_cast<uint32_t>(t->ids.size()));
    return t;
  }
};

// What GenerateOptions asks of the sampler beyond the chain: bias, bans, a grammar.
class TokenConstraint {
 public:
  // nullptr when the options ask for nothing. `trie` is called only when there is a grammar.
  // strip_spaces: leading spaces the streamed text drops (a SentencePiece reply), so that the grammar
  // sees exactly the text the caller gets.
  static Result<std::unique_ptr<TokenConstraint>> create(const Tokenizer* tok,
                                                         const std::function<std::shared_ptr<const VocabTrie>()>& trie,
                                                         const GenerateOptions& o, int strip_spaces, size_t n_logits) {
    if (o.grammar.empty() && o.json_schema.empty() && o.logit_bias.empty() && o.banned_tokens.empty())
      return std::unique_ptr<TokenConstraint>();
    auto c = std::unique_ptr<TokenConstraint>(new TokenConstraint());
    c->n_ = n_logits;
    // bias and bans, merged per id (biases of one id add up; -inf bans)
    std::unordered_map<int32_t, float> bias;
    for (const auto& [id, b] : o.logit_bias) {
      if (id < 0 || static_cast<size_t>(id) >= n_logits)
        return make_error(Errc::invalid_argument,
                          strf("logit_bias: token id %d is outside the vocabulary (0..%zu)", id, n_logits - 1));
      if (std::isnan(b) || b == std::numeric_limits<float>::infinity())
        return make_error(Errc::invalid_argument,
                          strf("logit_bias: the bias of token %d must be a number or -infinity (a ban)", id));
      bias[id] += b;
    }
    for (int32_t id : o.banned_tokens) {
      if (id < 0 || static_cast<size_t>(id) >= n_logits)
        return make_error(Errc::invalid_argument,
                          strf("banned_tokens: token id %d is outside the vocabulary (0..%zu)", id, n_logits - 1));
      bias[id] = -std::numeric_limits<float>::infinity();
    }
    c->bias_.assign(bias.begin(), bias.end());
    std::sort(c->bias_.begin(), c->bias_.end());
    size_t banned = 0;
    for (const auto& [id, b] : c->bias_) banned += std::isinf(b) ? 1 : 0;
    if (banned == n_logits) return make_error(Errc::invalid_argument, "banned_tokens / logit_bias ban every token");

    if (!o.grammar.empty() || !o.json_schema.empty()) {
      if (!o.grammar.empty() && !o.json_schema.empty())
        return make_error(Errc::invalid_argument, "give a grammar or a json_schema, not both");
      if (!tok)
        return make_error(Errc::invalid_argument, "a grammar needs the model's vocabulary, and this model has none");
      std::string gbnf;
      if (!o.json_schema.empty()) {
        auto g = json_schema_to_gbnf(o.json_schema);
        if (!g) return g.error();
        gbnf = std::move(*g);
      }
      auto core = compile_grammar(o.grammar.empty() ? std::string_view(gbnf) : std::string_view(o.grammar));
      if (!core) {
        if (!o.json_schema.empty())  // a converter bug, or a limit: say which grammar it was
          return make_error(Errc::invalid_argument,
                            "json_schema: the grammar made from it was refused: " + core.error().message);
        return core.error();
      }
      c->tok_ = tok;
      c->trie_ = trie();
      c->matcher_.emplace(std::move(*core));
      c->strip_ = strip_spaces;
      auto s = c->matcher_->start();
      if (!s) return s.error();
      c->state_ = *s;
      c->words_ = (n_logits + 63) / 64;
      if (c->trie_->eog.empty())
        return make_error(Errc::invalid_argument,
                          "a grammar needs an end-of-generation token to end on, and this model's vocabulary has none");
    }
    // An impossible constraint is an error now, not a hang or a surprise after the prompt.
    std::vector<float> zeros(n_logits, 0.0f);
    auto first = c->apply(zeros);
    if (!first) return first.error();
    return c;
  }

  // The logits with the constraint applied (a view of an internal buffer, valid until the next call),
  // or an error when no token is allowed.
  Result<std::span<const float>> apply(std::span<const float> logits) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    const size_t n = std::min(n_, logits.size());
    out_.resize(logits.size());
    if (!matcher_) {
      std::copy(logits.begin(), logits.end(), out_.begin());
    } else {
      auto m = mask();
      if (!m) return m.error();
      const uint64_t* bits = *m;
      std::fill(out_.begin(), out_.end(), kNegInf);
      for (size_t w = 0; w < words_; w++) {
        const uint64_t x0 = bits[w];
        if (x0 == ~uint64_t{0} && w * 64 + 64 <= n) {  // dense words (inside a string): one copy
          std::copy(logits.begin() + static_cast<std::ptrdiff_t>(w * 64),
                    logits.begin() + static_cast<std::ptrdiff_t>(w * 64 + 64),
                    out_.begin() + static_cast<std::ptrdiff_t>(w * 64));
          continue;
        }
        for (uint64_t x = x0; x != 0; x &= x - 1) {
          size_t i = w * 64 + static_cast<size_t>(std::countr_zero(x));
          if (i < n) out_[i] = logits[i];
        }
      }
    }
    for (const auto& [id, b] : bias_)
      if (static_cast<size_t>(id) < n) out_[static_cast<size_t>(id)] += b;
    if (matcher_) {  // something must remain (the unconstrained case was checked at creation)
      if (last_mask_count_ == 0)
        return make_error(Errc::invalid_argument,
                          "no token of the vocabulary can continue the text under the grammar (it needs characters "
                          "that no token spells)");
      size_t banned = 0;
      for (const auto& [id, b] : bias_)
        if (b == kNegInf && (last_mask_[static_cast<size_t>(id) >> 6] >> (static_cast<size_t>(id) & 63) & 1)) banned++;
      if (banned == last_mask_count_)
        return make_error(Errc::invalid_argument,
                          matcher_->can_continue(state_)
                              ? "every token the grammar allows here is banned (banned_tokens / logit_bias)"
                              : "the grammar is complete here but every end-of-generation token is banned");
    }
    return std::span<const float>(out_);
  }

  // Advances the grammar by the chosen token (end-of-generation tokens end the text: not fed).
  Result<void> accept(int32_t id) {
    if (!matcher_ || tok_->is_eog(id)) return {};
    std::string_view b = strip(tok_->token_bytes(id), true);
    auto s = matcher_->feed(state_, b);
    if (!s) return s.error();
    if (*s == GrammarMatcher::kDead)
      return make_error(Errc::internal, strf("token %d was chosen but the grammar does not allow it", id));
    state_ = *s;
    return {};
  }

  bool complete() const { return matcher_ && matcher_->accepting(state_); }
  // For benchmarks: masks computed by walking the vocabulary (not found in the cache), and the time.
  size_t masks_computed() const { return masks_computed_; }
  double mask_ms() const { return mask_ms_; }

 private:
  TokenConstraint() = default;

  // SentencePiece replies: leading spaces of the first pieces are dropped from the text (as the
  // stream decoder does), up to strip_ of them; `consume` updates the count.
  std::string_view strip(std::string_view b, bool consume) {
    int s = strip_;
    while (s > 0 && !b.empty()) {
      if (b.front() != ' ') {
        s = 0;
        break;
      }
      b.remove_prefix(1);
      s--;
    }
    if (consume) strip_ = s;
    return b;
  }

  // The allowed tokens of the current state as a bitset ([words_]), cached per state.
  Result<const uint64_t*> mask() {
    if (strip_ > 0) return mask_stripping();
    if (matcher_->generation() != mask_generation_) {
      mask_slot_.clear();
      mask_pool_.clear();
      mask_generation_ = matcher_->generation();
    }
    auto it = mask_slot_.find(state_);
    if (it != mask_slot_.end()) {
      last_mask_ = mask_pool_.data() + it->second * words_;
      last_mask_count_ = mask_count_[it->second];
      return last_mask_;
    }
    // keep the caches bounded: drop them all (they rebuild from the current state)
    if (matcher_->cache_bytes() + mask_pool_.size() * 8 > LLMINFER_GRAMMAR_MAX_CACHE) {
      auto s = matcher_->compact(state_);
      if (!s) return s.error();
      state_ = *s;
      mask_slot_.clear();
      mask_pool_.clear();
      mask_count_.clear();
      mask_generation_ = matcher_->generation();
    }
    size_t slot = mask_count_.size();
    mask_pool_.resize((slot + 1) * words_, 0);
    mask_count_.push_back(0);
    uint64_t* bits = mask_pool_.data() + slot * words_;
    size_t count = 0;
    const double t0 = now_ms();
    auto walk = walk_trie(state_, bits, count);
    if (!walk) return walk.error();
    mask_ms_ += now_ms() - t0;
    masks_computed_++;
    if (matcher_->cache_bytes() + mask_pool_.size() * 8 > 2 * static_cast<uint64_t>(LLMINFER_GRAMMAR_MAX_CACHE))
      return make_error(
          Errc::out_of_memory,
          strf("grammar: one state needs more than %llu MiB of matcher cache (LLMINFER_GRAMMAR_MAX_CACHE)",
               static_cast<unsigned long long>(LLMINFER_GRAMMAR_MAX_CACHE >> 20)));
    if (matcher_->generation() != mask_generation_) {  // (cannot happen: the walk does not compact)
      return make_error(Errc::internal, "grammar: the matcher was reset during a mask computation");
    }
    mask_count_[slot] = count;
    mask_slot_.emplace(state_, slot);
    last_mask_ = mask_pool_.data() + slot * words_;
    last_mask_count_ = count;
    return last_mask_;
  }

  void allow(uint64_t* bits, int32_t id, size_t& count) {
    if (static_cast<size_t>(id) >= n_) return;
    uint64_t& w = bits[static_cast<size_t>(id) >> 6];
    uint64_t bit = uint64_t{1} << (static_cast<size_t>(id) & 63);
    count += (w & bit) ? 0 : 1;
    w |= bit;
  }

  Result<void> walk_trie(int32_t state, uint64_t* bits, size_t& count) {
    const VocabTrie& t = *trie_;
    GrammarMatcher& m = *matcher_;
    st_.assign(t.max_depth + 1, GrammarMatcher::kDead);
    tr_.assign(t.max_depth + 1, nullptr);
    st_[0] = state;
    tr_[0] = m.transitions(state);
    const int32_t* pool = m.pool();
    auto refresh = [&](size_t upto) {  // the pool moved: the rows of the open depths again
      for (size_t d = 0; d <= upto; d++) tr_[d] = m.transitions(st_[d]);
      pool = m.pool();
    };
    const size_t nodes = t.byte.size();
    const uint8_t* byte = t.byte.data();
    const uint16_t* depth = t.depth.data();
    const uint32_t* end = t.end.data();
    const uint32_t* tb = t.tok_begin.data();
    const int32_t* ids = t.ids.data();
    for (size_t i = 0; i < nodes;) {
      const size_t d = depth[i];
      int32_t to = tr_[d - 1][byte[i]];
      if (to == GrammarMatcher::kUnknown) {
        auto r = m.next(st_[d - 1], byte[i]);
        if (!r) return r.error();
        to = *r;
        if (m.pool() != pool) refresh(d - 1);
      }
      if (to == GrammarMatcher::kDead) {
        i = end[i];
        continue;
      }
      st_[d] = to;
      for (uint32_t k = tb[i]; k < tb[i + 1]; k++) {
        const auto id = static_cast<size_t>(ids[k]);
        if (id < n_) bits[id >> 6] |= uint64_t{1} << (id & 63);
      }
      if (end[i] > i + 1) {  // children follow: this state's row
        tr_[d] = m.transitions(to);
        if (m.pool() != pool) refresh(d);
      }
      i++;
    }
    if (m.accepting(state))
      for (int32_t id : t.eog) allow(bits, id, count);
    count = 0;
    for (size_t w = 0; w < words_; w++) count += static_cast<size_t>(std::popcount(bits[w]));
    return {};
  }

  // While leading spaces are still dropped: token by token (only the first step or two of a reply).
  Result<const uint64_t*> mask_stripping() {
    strip_pool_.assign(words_, 0);
    size_t count = 0;
    for (int32_t id : trie_->ids) {
      std::string_view b = strip(tok_->token_bytes(id), false);
      auto s = matcher_->feed(state_, b);
      if (!s) return s.error();
      if (*s != GrammarMatcher::kDead) allow(strip_pool_.data(), id, count);
    }
    if (matcher_->accepting(state_))
      for (int32_t id : trie_->eog) allow(strip_pool_.data(), id, count);
    last_mask_ = strip_pool_.data();
    last_mask_count_ = count;
    return last_mask_;
  }

  size_t n_ = 0;      // logits width
  size_t words_ = 0;  // mask words
  std::vector<std::pair<int32_t, float>> bias_;
  const Tokenizer* tok_ = nullptr;
  std::shared_ptr<const VocabTrie> trie_;
  std::optional<GrammarMatcher> matcher_;
  int32_t state_ = GrammarMatcher::kDead;
  int strip_ = 0;
  std::vector<float> out_;
  std::unordered_map<int32_t, size_t> mask_slot_;  // state -> slot in mask_pool_
  std::vector<uint64_t> mask_pool_;
  std::vector<size_t> mask_count_;
  uint32_t mask_generation_ = 0;
  std::vector<uint64_t> strip_pool_;
  const uint64_t* last_mask_ = nullptr;
  size_t last_mask_count_ = 0;
  std::vector<int32_t> st_;
  std::vector<const int32_t*> tr_;  // per depth: the transitions of st_[depth]
  size_t masks_computed_ = 0;
  double mask_ms_ = 0;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
