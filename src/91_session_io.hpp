// ==== Saved sessions: Session::save / load ====
// A session as bytes: the conversation, the cached tokens and their KV cells, the last logits and
// the RNG, so that a restored session continues exactly as the saved one would have. Like every
// file the library reads, a saved session is untrusted: every size is checked against what
// remains, and the whole is covered by a sha256 so that a truncated or altered file is refused
// before anything is believed. Little-endian throughout:
//
//   "LLMISESS"            magic (8 bytes)
//   u32 version           1
//   u32 flags             0
//   u64 body_bytes        the bytes between this header and the checksum
//   body:
//     str identity        Model::info().identity of the model that made it (u32 length + bytes)
//     str library         the library version that wrote it (information only)
//     u32 kv_type         0 f16, 1 f32
//     u32 n_ctx           the saving session's context (information only)
//     i32 keep            the tokens a slide keeps
//     u64 rng[4]          the RNG state
//     u32 edited          1 when the conversation was edited since the last reply
//     u32 n_messages, then per message: str role, u64 length + content
//     u32 n_tokens, then i32 ids                      the cached tokens (positions 0..n_tokens-1)
//     u64 n_logits, then f32 values                   Session::logits()
//     u32 n_layers, then per KV layer: u32 n_kv, hd_k, hd_v, window; u32 first; u32 count;
//         count cells of positions first..first+count-1, each the keys of every head then their
//         values, in the cache's element type (a sliding-window layer holds only its last cells)
//   u8[32] sha256         of everything before it
namespace llminfer {
inline namespace v0_1 {
namespace detail {

inline constexpr char kSessionMagic[8] = {'L', 'L', 'M', 'I', 'S', 'E', 'S', 'S'};
inline constexpr uint32_t kSessionVersion = 1;
inline constexpr size_t kSessionHeader = 8 + 4 + 4 + 8;

// The 32 bytes of a sha256 given as 64 hex digits (Sha256::hex).
inline std::array<uint8_t, 32> sha256_bytes(const std::string& hex) {
  auto nib = [](char c) { return static_cast<uint8_t>(c <= '9' ? c - '0' : c - 'a' + 10); };
  std::array<uint8_t, 32> b{};
  for (size_t i = 0; i < 32 && 2 * i + 1 < hex.size(); i++)
    b[i] = static_cast<uint8_t>(nib(hex[2 * i]) << 4 | nib(hex[2 * i + 1]));
  return b;
}

class ByteWriter {
 public:
  void bytes(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }
  void str64(std::string_view s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  std::string out;

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; i++) out += static_cast<char>((v >> (8 * i)) & 0xff);
  }
};

// Reads with every length checked against what remains; the first failure sticks.
class ByteReader {
 public:
  ByteReader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool ok() const { return ok_; }
  size_t left() const { return n_ - at_; }
  const uint8_t* take(uint64_t n) {
    if (!ok_ || n > left()) {
      ok_ = false;
      return nullptr;
    }
    const uint8_t* r = p_ + at_;
    at_ += static_cast<size_t>(n);
    return r;
  }
  uint64_t le(int n) {
    const uint8_t* b = take(static_cast<uint64_t>(n));
    uint64_t v = 0;
    if (b)
      for (int i = 0; i < n; i++) v |= uint64_t(b[i]) << (8 * i);
    return v;
  }
  uint32_t u32() { return static_cast<uint32_t>(le(4)); }
  uint64_t u64() { return le(8); }
  std::string str(uint64_t len) {
    const uint8_t* b = take(len);
    return b ? std::string(reinterpret_cast<const char*>(b), static_cast<size_t>(len)) : std::string();
  }

 private:
  const uint8_t* p_;
  size_t n_, at_ = 0;
  bool ok_ = true;
};

inline Result<std::string> save_session_bytes(const SessionImpl& s) {
  if (!s.model) return make_error(Errc::invalid_argument, "save: the model is not loaded");
  if (s.active) return make_error(Errc::invalid_argument, "save: a reply is in progress (step it to the end first)");
  const ModelImpl& m = *s.model;
  const Program& prog = m.engine->program();
  ByteWriter w;
  w.str(model_identity(m));
  w.str(LLMINFER_VERSION_STRING);
  w.u32(m.options.kv_type == KvType::f32 ? 1 : 0);
  w.u32(static_cast<uint32_t>(s.ctx ? s.ctx->n_ctx() : m.engine->n_ctx_default()));
  w.u32(static_cast<uint32_t>(s.ctx ? s.ctx->keep() : std::max(0, m.options.keep)));
  uint64_t rng[4];
  s.rng.get_state(rng);
  for (uint64_t v : rng) w.u64(v);
  w.u32(s.edited ? 1 : 0);
  w.u32(static_cast<uint32_t>(s.messages.size()));
  for (const auto& msg : s.messages) {
    w.str(msg.role);
    w.str64(msg.content);
  }
  static const std::vector<int32_t> none;
  const std::vector<int32_t>& toks = s.ctx ? s.ctx->tokens() : none;
  w.u32(static_cast<uint32_t>(toks.size()));
  for (int32_t t : toks) w.u32(static_cast<uint32_t>(t));
  w.u64(s.logits.size());
  for (float f : s.logits) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    w.u32(b);
  }
  const int n_past = static_cast<int>(toks.size());
  w.u32(static_cast<uint32_t>(prog.kv.size()));
  for (size_t li = 0; li < prog.kv.size(); li++) {
    const KvLayerSpec& sp = prog.kv[li];
    w.u32(static_cast<uint32_t>(sp.n_kv));
    w.u32(static_cast<uint32_t>(sp.hd_k));
    w.u32(static_cast<uint32_t>(sp.hd_v));
    w.u32(static_cast<uint32_t>(sp.window));
    int first = s.ctx ? s.ctx->kv().held_from(static_cast<int>(li), n_past) : 0;
    w.u32(static_cast<uint32_t>(first));
    w.u32(static_cast<uint32_t>(n_past - first));
    for (int pos = first; pos < n_past; pos++) s.ctx->kv().read_cell(static_cast<int>(li), pos, w.out);
  }
  std::string body = std::move(w.out);
  ByteWriter h;
  h.bytes(kSessionMagic, 8);
  h.u32(kSessionVersion);
  h.u32(0);
  h.u64(body.size());
  std::string out = std::move(h.out);
  out += body;
  Sha256 sha;
  sha.update(out.data(), out.size());
  auto sum = sha256_bytes(sha.hex());
  out.append(reinterpret_cast<const char*>(sum.data()), sum.size());
  return out;
}

// `verify_checksum` false only for the fuzz target (to reach the checks behind the checksum).
inline Result<void> load_session_bytes(SessionImpl& s, std::span<const uint8_t> data, const std::string& name,
                                       bool verify_checksum = true) {
  auto bad = [&](const std::string& what) { return make_error(Errc::bad_format, name + ": " + what); };
  if (!s.model) return make_error(Errc::invalid_argument, "load: the model is not loaded");
  const ModelImpl& m = *s.model;
  if (data.size() < 8 || std::memcmp(data.data(), kSessionMagic, 8) != 0)
    return bad("not a saved llminfer session (no LLMISESS header)");
  if (data.size() < kSessionHeader + 32)
    return bad(strf("truncated: %zu bytes, a saved session has at least %zu", data.size(), kSessionHeader + 32));
  ByteReader hr(data.data() + 8, kSessionHeader - 8);
  uint32_t version = hr.u32();
  uint32_t flags = hr.u32();
  uint64_t body_bytes = hr.u64();
  if (version != kSessionVersion)
    return bad(strf("saved session format version %u; this library (%s) reads version %u", version,
                    LLMINFER_VERSION_STRING, kSessionVersion));
  if (flags != 0) return bad(strf("unknown flags 0x%x", flags));
  const uint64_t have = data.size() - kSessionHeader - 32;
  if (body_bytes > have)
    return bad(strf("truncated: the header announces %llu bytes of content, %llu are there",
                    static_cast<unsigned long long>(body_bytes), static_cast<unsigned long long>(have)));
  if (body_bytes < have)
    return bad(
        strf("%llu bytes follow the end of the saved session", static_cast<unsigned long long>(have - body_bytes)));
  if (verify_checksum) {
    Sha256 sha;
    sha.update(data.data(), data.size() - 32);
    auto sum = sha256_bytes(sha.hex());
    if (std::memcmp(sum.data(), data.data() + data.size() - 32, 32) != 0)
      return bad("the checksum does not match: the file was altered or damaged");
  }
  // The checksum says the bytes are as written; they are still checked as untrusted input below.
  ByteReader r(data.data() + kSessionHeader, static_cast<size_t>(body_bytes));
  auto cut = [&] { return bad("malformed content (a length runs past the end)"); };
  uint32_t id_len = r.u32();
  std::string identity = r.str(id_len);
  uint32_t lib_len = r.u32();
  std::string library = r.str(lib_len);
  if (!r.ok()) return cut();
  if (identity != model_identity(m))
    return bad(strf("saved with another model (identity %s, this model's is %s; library %s)",
                    printable(identity.substr(0, 16)).c_str(), model_identity(m).substr(0, 16).c_str(),
                    printable(library).c_str()));
  uint32_t kv_type = r.u32();
  (void)r.u32();  // n_ctx of the saving session
  uint32_t keep = r.u32();
  uint64_t rng[4];
  for (auto& v : rng) v = r.u64();
  uint32_t edited = r.u32();
  if (!r.ok()) return cut();
  const uint32_t want_type = m.options.kv_type == KvType::f32 ? 1 : 0;
  if (kv_type > 1) return bad(strf("unknown KV cache type %u", kv_type));
  if (kv_type != want_type)
    return bad(strf("its KV cache is %s, this session's is %s (LoadOptions::kv_type must match)",
                    kv_type ? "f32" : "f16", want_type ? "f32" : "f16"));
  uint32_t n_msg = r.u32();
  if (!r.ok() || n_msg > r.left() / 12) return cut();
  std::vector<Message> messages;
  messages.reserve(n_msg);
  for (uint32_t i = 0; i < n_msg; i++) {
    Message msg;
    uint32_t rl = r.u32();
    msg.role = r.str(rl);
    uint64_t cl = r.u64();
    msg.content = r.str(cl);
    if (!r.ok()) return cut();
    messages.push_back(std::move(msg));
  }
  uint32_t n_tok = r.u32();
  if (!r.ok() || n_tok > r.left() / 4) return cut();
  const int n_ctx = s.ctx ? s.ctx->n_ctx() : m.engine->n_ctx_default();
  if (n_tok > static_cast<uint32_t>(n_ctx))
    return bad(strf("it holds %u tokens, this session's context holds %d (LoadOptions::context)", n_tok, n_ctx));
  std::vector<int32_t> tokens(n_tok);
  const int64_t n_rows = m.engine->program().embed_rows;
  for (auto& t : tokens) {
    t = static_cast<int32_t>(r.u32());
    if (t < 0 || t >= n_rows) return bad(strf("token id %d is outside the vocabulary", t));
  }
  uint64_t n_logits = r.u64();
  if (!r.ok() || n_logits > r.left() / 4) return cut();
  const uint64_t nv = static_cast<uint64_t>(m.engine->n_vocab());
  if (n_logits % (nv ? nv : 1) != 0 || (n_logits > 0 && n_tok == 0))
    return bad(strf("%llu logits, not a multiple of the vocabulary (%llu)", static_cast<unsigned long long>(n_logits),
                    static_cast<unsigned long long>(nv)));
  std::vector<float> logits(static_cast<size_t>(n_logits));
  for (auto& f : logits) {
    uint32_t b = r.u32();
    std::memcpy(&f, &b, 4);
  }
  const Program& prog = m.engine->program();
  uint32_t n_layers = r.u32();
  if (!r.ok()) return cut();
  if (n_layers != prog.kv.size()) return bad(strf("%u KV layers, this model has %zu", n_layers, prog.kv.size()));
  // Check every layer before anything changes; then create the cache and write the cells.
  struct LayerCells {
    int first = 0, count = 0;
    const uint8_t* cells = nullptr;
  };
  std::vector<LayerCells> cells(n_layers);
  const uint64_t elem = kv_type ? 4 : 2;
  for (uint32_t li = 0; li < n_layers; li++) {
    const KvLayerSpec& sp = prog.kv[li];
    uint32_t nk = r.u32(), hk = r.u32(), hv = r.u32(), win = r.u32(), first = r.u32(), count = r.u32();
    if (!r.ok()) return cut();
    if (nk != uint32_t(sp.n_kv) || hk != uint32_t(sp.hd_k) || hv != uint32_t(sp.hd_v) || win != uint32_t(sp.window))
      return bad(strf("KV layer %u has another shape than this model's", li));
    if (first > n_tok || count != n_tok - first) return bad(strf("KV layer %u: cells do not match the tokens", li));
    // what a continuation needs: every position, or on a sliding-window layer its window
    uint32_t need = sp.window > 0 ? static_cast<uint32_t>(std::max<int64_t>(0, int64_t(n_tok) - sp.window + 1)) : 0;
    if (first > need) return bad(strf("KV layer %u lacks cells a continuation needs", li));
    const uint64_t cb = (uint64_t(nk) * hk + uint64_t(nk) * hv) * elem;
    if (count > 0 && cb > r.left() / count) return cut();
    cells[li] = LayerCells{static_cast<int>(first), static_cast<int>(count), r.take(cb * count)};
  }
  if (!r.ok()) return cut();
  if (r.left() != 0) return bad(strf("%zu unexpected bytes after the KV cache", r.left()));
  // Everything checks: the session takes it.
  cancel_generation(s);
  if (auto c = ensure_context(s); !c) return c.error();
  if (!s.logits.reserve(logits.size()))
    return make_error(Errc::out_of_memory, strf("cannot allocate %s for the saved logits",
                                                human_bytes(uint64_t(logits.size()) * 4).c_str()));
  Context& ctx = *s.ctx;
  ctx.clear();
  KvCache& kv = ctx.kv();
  for (uint32_t li = 0; li < n_layers; li++) {
    const LayerCells& lc = cells[li];
    const int li_ = static_cast<int>(li);
    const uint64_t cb = kv.cell_bytes(li_);
    const int slots = kv.layer(li_).slots;
    const int from = std::max(lc.first, static_cast<int>(n_tok) - slots);  // a smaller ring keeps the last ones
    for (int pos = from; pos < static_cast<int>(n_tok); pos++)
      kv.write_cell(li_, pos, lc.cells + uint64_t(pos - lc.first) * cb);
    kv.set_oldest(li_, from);
  }
  ctx.set_tokens(tokens);
  ctx.set_keep(static_cast<int>(std::min<uint32_t>(keep, 1u << 24)));
  (void)s.logits.resize(logits.size());  // reserved above
  if (!logits.empty()) std::memcpy(s.logits.data(), logits.data(), logits.size() * 4);
  s.rng.set_state(rng);
  s.messages = std::move(messages);
  s.edited = edited != 0;
  s.last = GenerateResult();
  return {};
}

// Writes `bytes` to `path` through a temporary file renamed over it, so that a failure (a full
// disk) leaves the previous file as it was.
inline Result<void> write_file_replacing(const std::string& path, std::string_view bytes) {
  std::string tmp = path + ".tmp";
#if defined(_WIN32)
  FILE* f = _wfopen(utf8_to_wide(tmp).c_str(), L"wb");
#else
  FILE* f = std::fopen(tmp.c_str(), "wb");
#endif
  if (!f) return make_error(Errc::io, strf("%s: cannot create: %s", tmp.c_str(), std::strerror(errno)));
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  ok = std::fflush(f) == 0 && ok;
  int err = errno;
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    std::remove(tmp.c_str());
    return make_error(Errc::io, strf("%s: cannot write: %s", tmp.c_str(), std::strerror(err ? err : EIO)));
  }
#if defined(_WIN32)
  bool moved = MoveFileExW(utf8_to_wide(tmp).c_str(), utf8_to_wide(path).c_str(), MOVEFILE_REPLACE_EXISTING) != 0;
#else
  bool moved = std::rename(tmp.c_str(), path.c_str()) == 0;
#endif
  if (!moved) {
    std::remove(tmp.c_str());
    return make_error(Errc::io, strf("%s: cannot replace it with the new file", path.c_str()));
  }
  return {};
}

}  // namespace detail

LLMI_API_DEF Result<std::vector<uint8_t>> Session::save() const {
  if (!impl_) return detail::moved_from("save");
  auto b = detail::save_session_bytes(*impl_);
  if (!b) return b.error();
  return std::vector<uint8_t>(b->begin(), b->end());
}

LLMI_API_DEF Result<void> Session::save(std::string_view path) const {
  if (!impl_) return detail::moved_from("save");
  auto b = detail::save_session_bytes(*impl_);
  if (!b) return b.error();
  return detail::write_file_replacing(std::string(path), *b);
}

LLMI_API_DEF Result<void> Session::load(std::span<const uint8_t> bytes) {
  if (!impl_) return detail::moved_from("load");
  return detail::load_session_bytes(*impl_, bytes, "saved session");
}

LLMI_API_DEF Result<void> Session::load(std::string_view path) {
  if (!impl_) return detail::moved_from("load");
  auto f = detail::MappedFile::read(std::string(path));
  if (!f) return f.error();
  return detail::load_session_bytes(*impl_, std::span<const uint8_t>(f->data(), static_cast<size_t>(f->size())),
                                    std::string(path));
}

}  // namespace v0_1
}  // namespace llminfer
