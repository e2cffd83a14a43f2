// ==== KV cache: per-session, per-layer ring buffers of keys and values (f16 or f32) ====
// A cell is addressed by the token's absolute position: slot = pos % slots. A layer that attends
// to the whole context has slots = n_ctx (it never wraps); a sliding-window layer keeps only
// window + ubatch - 1 slots (the window of the oldest query of a batch plus the batch itself), so
// a 512-token window costs 512 + ubatch cells whatever the context length. The cache shifts
// itself (slide, erase, shift: cells move down, their keys re-rotated by the rope that rotated
// them), so the context that owns it only keeps its tokens in step.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// ---- RoPE: the forward pass's rope steps, and the re-rotation of cached keys that move ----
// RoPE of one (layer, register): rotates pairs (2i, 2i+1) ("pairs", GGUF llama) or (i, i+n/2)
// ("neox") of the first n_dims elements of every head, angle pos * base^(-2i/n_dims) / factor_i
// * freq_scale, computed as llama.cpp does (theta multiplied by theta_scale per pair, in float).
struct RopeSpec {
  bool neox = false;
  int n_dims = 0;
  int head_dim = 0;
  float base = 10000.0f;
  float theta_scale = 1.0f;
  float freq_scale = 1.0f;
  std::vector<float> factors;  // [n_dims/2] divisors of the angle (llama-3 scaling); empty: none
  bool same(const RopeSpec& o) const {
    return neox == o.neox && n_dims == o.n_dims && head_dim == o.head_dim && base == o.base &&
           freq_scale == o.freq_scale && factors == o.factors;
  }
};

// cos/sin of one position for a rope spec: cache[2i] = cos, cache[2i+1] = sin.
inline void rope_angles(const RopeSpec& r, int64_t pos, float* cache) {
  float theta = static_cast<float>(pos);
  for (int i0 = 0; i0 < r.n_dims; i0 += 2) {
    float ff = r.factors.empty() ? 1.0f : r.factors[static_cast<size_t>(i0 / 2)];
    float th = r.freq_scale * (theta / ff);
    cache[i0] = std::cos(th);
    cache[i0 + 1] = std::sin(th);
    theta *= r.theta_scale;
  }
}

// Rotates one head (head_dim elements, first n_dims rotated) in place or into `out`.
inline void rope_head(const RopeSpec& r, const float* cache, const float* in, float* out) {
  const int n = r.n_dims;
  // x0 c - x1 s and x0 s + x1 c with the first product fused, as llama.cpp's CPU build computes
  // them (the compiler contracts its expressions): its bits, not one rounding better or worse.
  if (r.neox) {
    const int h = n / 2;
    for (int i = 0; i < h; i++) {
      float c = cache[2 * i], s = cache[2 * i + 1];
      float x0 = in[i], x1 = in[i + h];
      out[i] = std::fma(x0, c, -(x1 * s));
      out[i + h] = std::fma(x0, s, x1 * c);
    }
  } else {
    for (int i = 0; i < n; i += 2) {
      float c = cache[i], s = cache[i + 1];
      float x0 = in[i], x1 = in[i + 1];
      out[i] = std::fma(x0, c, -(x1 * s));
      out[i + 1] = std::fma(x0, s, x1 * c);
    }
  }
  if (out != in)
    for (int i = n; i < r.head_dim; i++) out[i] = in[i];
}

// A checked heap allocation (KV caches and scratch can be large: no std::vector, whose failure
// would abort under -fno-exceptions).
class HeapBuf {
 public:
  HeapBuf() = default;
  HeapBuf(const HeapBuf&) = delete;
  HeapBuf& operator=(const HeapBuf&) = delete;
  HeapBuf(HeapBuf&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  HeapBuf& operator=(HeapBuf&& o) noexcept {
    if (this != &o) {
      std::free(p_);
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  ~HeapBuf() { std::free(p_); }

  // `count` elements of `elem` bytes, zeroed.
  static Result<HeapBuf> alloc(uint64_t count, uint64_t elem, const char* what) {
    uint64_t bytes = 0;
    if (mul_overflows(count, elem, &bytes) || bytes > (uint64_t(1) << 46))
      return make_error(Errc::out_of_memory,
                        strf("%s: %llu x %llu bytes is too large", what, static_cast<unsigned long long>(count),
                             static_cast<unsigned long long>(elem)));
    HeapBuf b;
    if (bytes == 0) return b;
    b.p_ = scratch_alloc(static_cast<size_t>(bytes), true);
    if (!b.p_) return make_error(Errc::out_of_memory, strf("%s: cannot allocate %s", what, human_bytes(bytes).c_str()));
    b.n_ = bytes;
    return b;
  }
  template <class T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  uint64_t bytes() const { return n_; }

 private:
  void* p_ = nullptr;
  uint64_t n_ = 0;
};

// A float array that grows only through a checked allocation (resize: false when out of memory,
// and nothing changed): logits a caller keeps across evaluations (a session's).
class FloatBuf {
 public:
  [[nodiscard]] bool resize(size_t n) {
    if (n > cap_) {
      auto b = HeapBuf::alloc(n, 4, "logits");
      if (!b) return false;
      if (size_) std::memcpy(b->as<float>(), buf_.as<float>(), size_ * 4);
      buf_ = std::move(*b);
      cap_ = n;
    }
    size_ = n;
    return true;
  }
  [[nodiscard]] bool reserve(size_t n) {
    const size_t keep = size_;
    if (!resize(std::max(n, size_))) return false;
    size_ = keep;
    return true;
  }
  void clear() { size_ = 0; }
  float* data() const { return buf_.as<float>(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::span<const float> span() const { return {data(), size_}; }
  const float* begin() const { return data(); }
  const float* end() const { return data() + size_; }

 private:
  HeapBuf buf_;
  size_t size_ = 0, cap_ = 0;
};

// What one layer's cache holds.
struct KvLayerSpec {
  int n_kv = 0;     // key/value heads
  int hd_k = 0;     // key length per head
  int hd_v = 0;     // value length per head
  int window = 0;   // sliding window (keys p-window+1..p); 0: the whole context
  int k_rope = -1;  // rope applied to the keys (to re-rotate them when the context slides); -1: none
};

// One range of cached positions that moves down: [src, src + len) -> [dst, dst + len).
struct KvMove {
  int src = 0, dst = 0, len = 0;
};

struct KvLayer {
  KvLayerSpec spec;
  int slots = 0;         // cells; slot of position p = p % slots
  uint8_t* k = nullptr;  // [n_kv][slots][hd_k] elements
  uint8_t* v = nullptr;  // [n_kv][slots][hd_v] elements
  int oldest = 0;        // smallest position still guaranteed to be held (ring layers lose older ones)
  bool wraps(int n_ctx) const { return slots < n_ctx; }
};

class KvCache {
 public:
  // Bytes init() would allocate (UINT64_MAX when that does not fit 64 bits), computed first so that
  // a cache the machine cannot hold is refused before any of it is allocated.
  static uint64_t planned_bytes(const std::vector<KvLayerSpec>& specs, int n_ctx, int ubatch, KvType type) {
    const uint64_t elem = type == KvType::f16 ? 2 : 4;
    uint64_t total = 0;
    for (const auto& s : specs) {
      uint64_t slots = uint64_t(n_ctx);
      if (s.window > 0) slots = std::min<uint64_t>(slots, uint64_t(s.window) + uint64_t(ubatch) - 1);
      uint64_t per = 0, b = 0;
      if (add_overflows(uint64_t(s.hd_k), uint64_t(s.hd_v), &per) || mul_overflows(per, uint64_t(s.n_kv), &b) ||
          mul_overflows(b, slots, &b) || mul_overflows(b, elem, &b) || add_overflows(total, b, &total))
        return UINT64_MAX;
    }
    return total;
  }

  // kern: the kernels that convert rows to and from f16 (the evaluation context's); ropes: the
  // program's rope specs (KvLayerSpec::k_rope indexes them), to re-rotate keys that move.
  Result<void> init(const std::vector<KvLayerSpec>& specs, const std::vector<RopeSpec>& ropes, int n_ctx, int ubatch,
                    KvType type, const KernelTable* kern) {
    kern_ = kern;
    type_ = type;
    elem_ = type == KvType::f16 ? 2 : 4;
    n_ctx_ = n_ctx;
    ropes_ = ropes;
    layers_.clear();
    bufs_.clear();
    layers_.reserve(specs.size());
    bufs_.reserve(2 * specs.size());
    bytes_ = 0;
    ring_window_ = 1;
    for (const auto& s : specs) {
      KvLayer l;
      l.spec = s;
      l.slots = n_ctx;
      if (s.window > 0) l.slots = static_cast<int>(std::min<int64_t>(n_ctx, int64_t(s.window) + ubatch - 1));
      auto kb = HeapBuf::alloc(uint64_t(s.n_kv) * uint64_t(l.slots) * uint64_t(s.hd_k), elem_, "KV cache (keys)");
      if (!kb) return kb.error();
      auto vb = HeapBuf::alloc(uint64_t(s.n_kv) * uint64_t(l.slots) * uint64_t(s.hd_v), elem_, "KV cache (values)");
      if (!vb) return vb.error();
      l.k = kb->as<uint8_t>();
      l.v = vb->as<uint8_t>();
      bytes_ += kb->bytes() + vb->bytes();
      bufs_.push_back(std::move(*kb));
      bufs_.push_back(std::move(*vb));
      if (l.wraps(n_ctx)) ring_window_ = std::max(ring_window_, s.window);
      layers_.push_back(l);
    }
    return init_shift_scratch();
  }

  KvType type() const { return type_; }
  size_t elem() const { return elem_; }
  uint64_t bytes() const { return bytes_; }
  int n_layers() const { return static_cast<int>(layers_.size()); }
  KvLayer& layer(int l) { return layers_[static_cast<size_t>(l)]; }
  const KvLayer& layer(int l) const { return layers_[static_cast<size_t>(l)]; }
  // The widest window of the layers that wrap (1 when none wraps): a slide leaves that many
  // positions after the kept ones, so that every ring still holds its window.
  int ring_window() const { return ring_window_; }

  // Address of head g's key / value at a slot.
  uint8_t* k_at(const KvLayer& l, int g, int slot) const {
    return l.k + (uint64_t(g) * l.slots + uint64_t(slot)) * l.spec.hd_k * elem_;
  }
  uint8_t* v_at(const KvLayer& l, int g, int slot) const {
    return l.v + (uint64_t(g) * l.slots + uint64_t(slot)) * l.spec.hd_v * elem_;
  }

  void store(uint8_t* dst, const float* src, int n) const {
    if (type_ == KvType::f16)
      kern_->f32_row_to_f16(src, reinterpret_cast<uint16_t*>(dst), n);
    else
      std::memcpy(dst, src, size_t(n) * 4);
  }
  void load(const uint8_t* src, float* dst, int n) const {
    if (type_ == KvType::f16)
      kern_->f16_row_to_f32(reinterpret_cast<const uint16_t*>(src), dst, n);
    else
      std::memcpy(dst, src, size_t(n) * 4);
  }

  // Stores the keys [n][n_kv*hd_k] and values [n][n_kv*hd_v] of positions pos0 .. pos0+n-1.
  void write(int li, int pos0, int n, const float* k, const float* v) {
    KvLayer& l = layer(li);
    const int nk = l.spec.n_kv, hk = l.spec.hd_k, hv = l.spec.hd_v;
    for (int t = 0; t < n; t++) {
      int slot = (pos0 + t) % l.slots;
      for (int g = 0; g < nk; g++) {
        store(k_at(l, g, slot), k + size_t(t) * nk * hk + size_t(g) * hk, hk);
        store(v_at(l, g, slot), v + size_t(t) * nk * hv + size_t(g) * hv, hv);
      }
    }
    int last = pos0 + n - 1;
    l.oldest = std::max(l.oldest, last - l.slots + 1);
  }

  // Whether every layer still holds what a continuation after `n_keep` tokens needs.
  bool can_truncate(int n_keep) const {
    for (const auto& l : layers_) {
      int need = l.spec.window > 0 ? std::max(0, n_keep - l.spec.window + 1) : 0;
      if (need < l.oldest) return false;
    }
    return true;
  }

  void clear() {
    for (auto& l : layers_) l.oldest = 0;
  }

  // ---- shifting: positions move down, keys re-rotated (a context shift, or cache reuse) ----
  // The new layout of `n_new` positions: positions below moves[0].dst stay where they are; each
  // move takes [src, src + len) to [dst, dst + len) (dst < src), the moves in order and contiguous
  // (moves[i + 1].dst == moves[i].dst + moves[i].len), the last ending at n_new. What the cache
  // held past the sources is dropped. A key is rotated by its move's delta (dst - src) with the
  // rope its layer applied (KvLayerSpec::k_rope; rope is linear in the position, so this equals
  // rotating the unrotated key to its new position, up to rounding); values are copied.

  // New position q's source position (q itself below the first move).
  static int shift_source(std::span<const KvMove> moves, int q) {
    for (const auto& m : moves)
      if (q >= m.dst && q < m.dst + m.len) return m.src + (q - m.dst);
    return q;
  }

  // Whether every layer still holds the sources of what it must keep: all of [0, n_new) on a
  // full layer; on a sliding-window ring only the window before n_new (older cells are gone).
  bool can_shift(std::span<const KvMove> moves, int n_past, int n_new) const {
    if (!valid_moves(moves, n_past, n_new)) return false;
    for (const auto& l : layers_) {
      for (int q = keep_from(l, n_new); q < n_new; q++) {
        int src = shift_source(moves, q);
        if (src < l.oldest || src >= n_past || src < n_past - l.slots) return false;
      }
    }
    return true;
  }

  // Carries out a shift that can_shift() accepted (false, and nothing changed, otherwise).
  // rerotate = false moves the keys as they are (the tests measure what the rotation does).
  bool shift(std::span<const KvMove> moves, int n_past, int n_new, bool rerotate = true) {
    if (!can_shift(moves, n_past, n_new)) return false;
    Rerotation rot{ropes_, rot_cs_.as<float>()};
    float* tmp = shift_tmp_.as<float>();
    Todo* todo = shift_todo_.as<Todo>();
    for (auto& l : layers_) {
      const KvLayerSpec& sp = l.spec;
      const int lo = keep_from(l, n_new);
      const size_t row_k = size_t(sp.n_kv) * sp.hd_k, row_v = size_t(sp.n_kv) * sp.hd_v;
      // Gather every moved position's key and value (f32), then scatter: on a ring a destination
      // slot may be the source slot of another position. Full layers (slot = position, moves
      // downwards) go one move at a time to bound the scratch.
      auto run = [&](int q0, int q1) {
        // positions [q0, q1) of the new layout that move (at most shift_positions(l) of them:
        // the scratch init_shift_scratch sized)
        size_t n_todo = 0;
        for (int q = q0; q < q1; q++) {
          int src = shift_source(moves, q);
          if (src != q) todo[n_todo++] = Todo{q, src};
        }
        LLMI_ASSERT(n_todo <= size_t(shift_positions(l)));
        for (size_t i = 0; i < n_todo; i++) {
          float* tk = tmp + i * (row_k + row_v);
          int slot = todo[i].src % l.slots;
          for (int g = 0; g < sp.n_kv; g++) {
            load(k_at(l, g, slot), tk + size_t(g) * sp.hd_k, sp.hd_k);
            load(v_at(l, g, slot), tk + row_k + size_t(g) * sp.hd_v, sp.hd_v);
          }
          if (sp.k_rope >= 0 && rerotate) rot.apply(sp.k_rope, todo[i].dst - todo[i].src, tk, sp.n_kv, sp.hd_k);
        }
        for (size_t i = 0; i < n_todo; i++) {
          const float* tk = tmp + i * (row_k + row_v);
          int slot = todo[i].dst % l.slots;
          for (int g = 0; g < sp.n_kv; g++) {
            store(k_at(l, g, slot), tk + size_t(g) * sp.hd_k, sp.hd_k);
            store(v_at(l, g, slot), tk + row_k + size_t(g) * sp.hd_v, sp.hd_v);
          }
        }
      };
      if (l.slots >= n_ctx_) {
        for (const auto& m : moves) {
          for (int q = std::max(lo, m.dst); q < m.dst + m.len; q += kShiftRun)
            run(q, std::min(q + kShiftRun, m.dst + m.len));
        }
      } else {
        run(lo, n_new);
      }
      l.oldest = l.slots >= n_ctx_ ? 0 : std::max(0, n_new - l.slots);
      l.oldest = std::max(l.oldest, lo);
    }
    return true;
  }

  // Drops the positions [from, from + count) of the n_past held and shifts the later ones down
  // (keys re-rotated). False (nothing changed) when that is not a range of them or a sliding-window
  // ring no longer holds what it must keep.
  bool erase(int n_past, int from, int count) {
    if (from < 0 || count < 0 || from > n_past || count > n_past - from) return false;
    if (count == 0) return true;
    if (from + count == n_past) return can_truncate(from);
    KvMove m{from + count, from, n_past - from - count};
    return shift(std::span<const KvMove>(&m, 1), n_past, n_past - count);
  }

  // ContextPolicy::slide: makes room for `need` more positions after the n_past held by dropping
  // `need` or more after the first `keep` and shifting the rest down (erase), so positions stay
  // 0..n_past-1 (as llama.cpp's context shift). Half of what follows the kept positions goes, so
  // that sliding is rare, but never so much that a ring would lose its window of what stays.
  // Returns how many positions went, or -1 (nothing changed) when a ring cannot shift.
  int slide(int n_past, int keep, int need) {
    keep = std::min(keep, n_past);
    int d = std::max(need, (n_past - keep) / 2);
    d = std::min(d, n_past - keep - ring_window_ + 1);  // ring layers keep their window of the kept part
    d = std::max(d, need);
    d = std::min(d, n_past - keep);
    if (d <= 0) return 0;
    return erase(n_past, keep, d) ? d : -1;
  }

  // ---- saving and restoring the cells of positions (Session::save / load) ----
  // The positions of [0, n_past) layer `li` still holds (a ring holds only its last slots).
  int held_from(int li, int n_past) const {
    const KvLayer& l = layer(li);
    return std::max({0, l.oldest, n_past - l.slots});
  }
  // Bytes of one position's keys and values in layer li.
  uint64_t cell_bytes(int li) const {
    const KvLayerSpec& sp = layer(li).spec;
    return (uint64_t(sp.n_kv) * sp.hd_k + uint64_t(sp.n_kv) * sp.hd_v) * elem_;
  }
  // Appends position pos's keys then values (raw elements) to out.
  void read_cell(int li, int pos, std::string& out) const {
    const KvLayer& l = layer(li);
    const int slot = pos % l.slots;
    for (int g = 0; g < l.spec.n_kv; g++)
      out.append(reinterpret_cast<const char*>(k_at(l, g, slot)), size_t(l.spec.hd_k) * elem_);
    for (int g = 0; g < l.spec.n_kv; g++)
      out.append(reinterpret_cast<const char*>(v_at(l, g, slot)), size_t(l.spec.hd_v) * elem_);
  }
  // The inverse of read_cell (src holds cell_bytes(li) bytes).
  void write_cell(int li, int pos, const uint8_t* src) {
    KvLayer& l = layer(li);
    const int slot = pos % l.slots;
    for (int g = 0; g < l.spec.n_kv; g++) {
      std::memcpy(k_at(l, g, slot), src, size_t(l.spec.hd_k) * elem_);
      src += size_t(l.spec.hd_k) * elem_;
    }
    for (int g = 0; g < l.spec.n_kv; g++) {
      std::memcpy(v_at(l, g, slot), src, size_t(l.spec.hd_v) * elem_);
      src += size_t(l.spec.hd_v) * elem_;
    }
  }
  void set_oldest(int li, int oldest) { layer(li).oldest = oldest; }
  int n_ctx() const { return n_ctx_; }

 private:
  // Rotates moved keys by their delta, the cos/sin of the last (rope, delta) kept (a shift
  // rotates many keys by the same delta).
  // cs: [the widest rope's n_dims] (rot_cs_).
  struct Rerotation {
    const std::vector<RopeSpec>& ropes;
    float* cs;
    int rope = -1, delta = 0;
    void apply(int k_rope, int d, float* heads, int n_heads, int hd) {
      const RopeSpec& rs = ropes[static_cast<size_t>(k_rope)];
      if (k_rope != rope || d != delta) {
        rope_angles(rs, int64_t(d), cs);
        rope = k_rope;
        delta = d;
      }
      for (int h = 0; h < n_heads; h++) rope_head(rs, cs, heads + size_t(h) * hd, heads + size_t(h) * hd);
    }
  };
  struct Todo {
    int dst, src;  // a position of the new layout that moves, and where it comes from
  };
  static constexpr int kShiftRun = 64;  // positions a full layer moves at a time

  // Positions one layer's shift gathers at once: a full layer goes kShiftRun at a time, a ring
  // all it keeps at once (its window before the new end, at most window - 1 positions move).
  int shift_positions(const KvLayer& l) const {
    return l.slots >= n_ctx_ ? kShiftRun : std::max(1, std::min(l.spec.window - 1, l.slots));
  }
  // The scratch of shift(), sized once (a shift allocates nothing): the gathered rows of the
  // layer that needs most, its todo list, one rope's cos/sin.
  Result<void> init_shift_scratch() {
    uint64_t floats = 1, todo = 1, dims = 1;
    for (const auto& l : layers_) {
      const uint64_t pos = uint64_t(shift_positions(l));
      const uint64_t row = uint64_t(l.spec.n_kv) * (uint64_t(l.spec.hd_k) + uint64_t(l.spec.hd_v));
      floats = std::max(floats, pos * row);
      todo = std::max(todo, pos);
    }
    for (const auto& r : ropes_) dims = std::max(dims, uint64_t(std::max(1, r.n_dims)));
    auto t = HeapBuf::alloc(floats, 4, "KV cache shift scratch");
    if (!t) return t.error();
    auto d = HeapBuf::alloc(todo, sizeof(Todo), "KV cache shift scratch");
    if (!d) return d.error();
    auto c = HeapBuf::alloc(dims, 4, "KV cache shift scratch");
    if (!c) return c.error();
    shift_tmp_ = std::move(*t);
    shift_todo_ = std::move(*d);
    rot_cs_ = std::move(*c);
    return {};
  }

  // First new position a layer must keep after a shift to n_new positions.
  int keep_from(const KvLayer& l, int n_new) const {
    if (l.slots >= n_ctx_) return 0;
    return std::max(0, n_new - l.spec.window + 1);
  }
  static bool valid_moves(std::span<const KvMove> moves, int n_past, int n_new) {
    if (n_new < 0 || n_new > n_past) return false;
    if (moves.empty()) return true;
    int next = moves[0].dst;
    if (next < 0) return false;
    for (const auto& m : moves) {
      if (m.dst != next || m.len <= 0 || m.src <= m.dst || m.src > n_past - m.len) return false;
      next = m.dst + m.len;
    }
    return next == n_new;
  }

  KvType type_ = KvType::f16;
  const KernelTable* kern_ = nullptr;
  size_t elem_ = 2;
  int n_ctx_ = 0;
  int ring_window_ = 1;
  std::vector<RopeSpec> ropes_;
  std::vector<KvLayer> layers_;
  std::vector<HeapBuf> bufs_;
  HeapBuf shift_tmp_, shift_todo_, rot_cs_;  // shift(): init_shift_scratch
  uint64_t bytes_ = 0;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
