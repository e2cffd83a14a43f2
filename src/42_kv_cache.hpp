// ==== KV cache: per-session, per-layer ring buffers of keys and values (f16 or f32) ====
// A cell is addressed by the token's absolute position: slot = pos % slots. A layer that attends
// to the whole context has slots = n_ctx (it never wraps); a sliding-window layer keeps only
// window + ubatch - 1 slots (the window of the oldest query of a batch plus the batch itself), so
// a 512-token window costs 512 + ubatch cells whatever the context length.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

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
      return make_error(Errc::out_of_memory, strf("%s: %llu x %llu bytes is too large", what,
                                                  static_cast<unsigned long long>(count),
                                                  static_cast<unsigned long long>(elem)));
    HeapBuf b;
    if (bytes == 0) return b;
    b.p_ = std::calloc(1, static_cast<size_t>(bytes));
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

// What one layer's cache holds.
struct KvLayerSpec {
  int n_kv = 0;      // key/value heads
  int hd_k = 0;      // key length per head
  int hd_v = 0;      // value length per head
  int window = 0;    // sliding window (keys p-window+1..p); 0: the whole context
  int k_rope = -1;   // rope applied to the keys (to re-rotate them when the context slides); -1: none
};

struct KvLayer {
  KvLayerSpec spec;
  int slots = 0;        // cells; slot of position p = p % slots
  uint8_t* k = nullptr;  // [n_kv][slots][hd_k] elements
  uint8_t* v = nullptr;  // [n_kv][slots][hd_v] elements
  int oldest = 0;       // smallest position still guaranteed to be held (ring layers lose older ones)
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

  // kern: the kernels that convert rows to and from f16 (the evaluation context's).
  Result<void> init(const std::vector<KvLayerSpec>& specs, int n_ctx, int ubatch, KvType type, const KernelTable* kern) {
    kern_ = kern;
    type_ = type;
    elem_ = type == KvType::f16 ? 2 : 4;
    n_ctx_ = n_ctx;
    layers_.clear();
    bufs_.clear();
    bytes_ = 0;
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
      layers_.push_back(l);
    }
    return {};
  }

  KvType type() const { return type_; }
  size_t elem() const { return elem_; }
  uint64_t bytes() const { return bytes_; }
  int n_layers() const { return static_cast<int>(layers_.size()); }
  KvLayer& layer(int l) { return layers_[static_cast<size_t>(l)]; }
  const KvLayer& layer(int l) const { return layers_[static_cast<size_t>(l)]; }

  // Address of head g's key / value at a slot.
  uint8_t* k_at(const KvLayer& l, int g, int slot) const {
    return l.k + (uint64_t(g) * l.slots + uint64_t(slot)) * l.spec.hd_k * elem_;
  }
  uint8_t* v_at(const KvLayer& l, int g, int slot) const {
    return l.v + (uint64_t(g) * l.slots + uint64_t(slot)) * l.spec.hd_v * elem_;
  }

  void store(uint8_t* dst, const float* src, int n) const {
    if (type_ == KvType::f16) kern_->f32_row_to_f16(src, reinterpret_cast<uint16_t*>(dst), n);
    else std::memcpy(dst, src, size_t(n) * 4);
  }
  void load(const uint8_t* src, float* dst, int n) const {
    if (type_ == KvType::f16) kern_->f16_row_to_f32(reinterpret_cast<const uint16_t*>(src), dst, n);
    else std::memcpy(dst, src, size_t(n) * 4);
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

 private:
  KvType type_ = KvType::f16;
  const KernelTable* kern_ = nullptr;
  size_t elem_ = 2;
  int n_ctx_ = 0;
  std::vector<KvLayer> layers_;
  std::vector<HeapBuf> bufs_;
  uint64_t bytes_ = 0;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
