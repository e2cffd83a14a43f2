// ==== Continuous batching: the contexts of one model that evaluate at the same time share steps ====
// Every Context::eval chunk goes through the engine's Batcher (Context::run_chunk_shared). Threads
// that evaluate at the same time (several sessions decoding on one model: a server's slots, a game's
// characters) hand their chunks to one of them, the leader, which runs them as one step: each
// weight matrix is read from memory once for all of them (gemv_each: row outer, tokens inner)
// instead of once per session. Sequences join and leave at any step. Each keeps its own KV cache,
// positions, sampler and stop state (the sampling happens on its own thread, between steps).
//
// Same results as alone: every row of a step is computed with the arithmetic it would get in a step
// of its own. Single tokens (decode) go through matmul_each_group (the products a definition takes
// from one register together, as alone: matmul_group), whose every result has the bits of a
// one-token product; a prompt chunk of several tokens goes through matmul_group on its own rows
// (so it is tiled exactly as alone); norms, activations and the like are per row; rope and
// attention are per sequence, on its own cache (the heads of all the sequences of a step are one
// job for the pool: one join per layer, not one per sequence). So a session gives the same
// logits, bit for bit, and the same tokens for a seed, whether it runs alone or with others
// (tests/test_batch.cpp).
//
// Scheduling. A step is run by whichever waiting thread finds the batch ready: ready when every
// context of the previous step has handed in its next chunk (the usual case: they sample and come
// back within microseconds), or when the oldest waiting chunk has waited half the previous step's
// time (at least 0.5 ms, at most 20 ms: a session busy elsewhere, e.g. its callback, or finished,
// does not hold up the others longer than that). Prompts are evaluated in chunks of at most 256
// tokens, one chunk per step, so a long prompt delays the others' next token by one chunk at most.
// A step takes at most kMaxRows rows and kMaxSeqs sequences (oldest first); a chunk that wants
// every position's logits (all_logits), and any chunk of a definition without `last`, runs in a
// step of its own. LoadOptions::batch = 1 turns batching off (every chunk a step of its own).
//
// Memory. The leader's scratch (registers of kMaxRows rows, logits of max_seqs_ rows, matrix
// products, rope tables) is sized when the engine's second context is created (the first time a
// step can hold two sequences; out_of_memory from that creation), the waiting requests form a
// list through the requests themselves, and the step's lists are reserved: a step allocates nothing.
//
// Cancel: a request's cancel function is polled before each layer as alone; a step stops early
// only when every sequence in it has cancelled (the others' chunks complete; a cancelled sequence
// whose chunk completed reports `cancelled` all the same, its chunk stays in its cache).
namespace llminfer {
inline namespace v0_1 {
namespace detail {

class Batcher {
 public:
  static constexpr int kMaxRows = 256 + 64;  // one prompt chunk and 64 single tokens
  static constexpr int kDefaultMaxSeqs = 32;

  explicit Batcher(const Engine& e) : e_(e) {
    const int b = e.options().batch;
    max_seqs_ = b <= 0 ? kDefaultMaxSeqs : std::min(b, 256);
    // the step's lists, at their most (a step allocates nothing)
    step_.reserve(size_t(max_seqs_));
    multi_.reserve(size_t(max_seqs_));
    members_.reserve(size_t(max_seqs_));
    segs_.reserve(size_t(max_seqs_));
    head0_.reserve(size_t(max_seqs_));
    toks_.reserve(size_t(kMaxRows));
  }

  static Batcher& of(const Engine& e) {
    std::call_once(e.batch_once_, [&] { e.batcher_ = std::make_shared<Batcher>(e); });
    return *e.batcher_;
  }

  struct Request {
    Context* ctx = nullptr;
    const int32_t* toks = nullptr;
    int n = 0;
    float* out = nullptr;  // [n_vocab] logits of the last token; nullptr: not wanted (middle chunk)
    bool all = false;      // out is [n][n_vocab] (runs alone)
    const std::function<bool()>* cancel = nullptr;
    double t_submit = 0;
    bool done = false;
    Request* next = nullptr;  // the next waiting request (pending list)
    std::optional<Result<EvalStatus>> result;
  };

  Result<EvalStatus> submit(Request& req) {
    if (max_seqs_ == 1) return run_alone(req);
    std::unique_lock<std::mutex> lk(mu_);
    req.t_submit = now_ms();
    push_pending(&req);
    cv_.notify_all();
    while (!req.done) {
      if (running_ || !head_) {
        cv_.wait(lk);
        continue;
      }
      const double now = now_ms();
      const double deadline = head_->t_submit + wait_budget_ms();
      if (!ready() && now < deadline) {
        cv_.wait_for(lk, std::chrono::microseconds(static_cast<int64_t>((deadline - now) * 1000.0) + 1));
        continue;
      }
      // this thread leads the step (step_: read by this thread only until running_ is false again)
      std::vector<Request*>& batch = take();
      running_ = true;
      lk.unlock();
      const double t0 = now_ms();
      run(batch);
      const double dt = now_ms() - t0;
      lk.lock();
      running_ = false;
      last_step_ms_ = dt;
      members_.clear();
      for (Request* r : batch) {
        members_.push_back(r->ctx);
        r->done = true;
      }
      steps_++;
      if (batch.size() > 1) shared_steps_++;
      rows_ += batch.size();
      if (on_step_) {
        std::vector<std::pair<const Context*, int>> v;
        for (Request* r : batch) v.emplace_back(r->ctx, r->n);
        on_step_(v);
      }
      cv_.notify_all();
    }
    return std::move(*req.result);
  }

  // A context of the engine was created: the second one (the first time a step can hold two
  // sequences) sizes the step's scratch, so that steps allocate nothing; out_of_memory when that
  // fails (the context is not created).
  Result<void> context_created() {
    std::lock_guard<std::mutex> lk(mu_);
    if (max_seqs_ > 1 && contexts_ >= 1)
      if (auto r = ensure_scratch(e_.program()); !r) return r.error();
    contexts_++;
    return {};
  }

  // For tests and benchmarks: steps run, steps shared by several sequences, sequence-chunks run.
  struct Stats {
    uint64_t steps = 0, shared_steps = 0, chunks = 0;
  };
  Stats stats() {
    std::lock_guard<std::mutex> lk(mu_);
    return Stats{steps_, shared_steps_, rows_};
  }
  // For tests: called after every step (under the batcher's lock) with (context, tokens) of each
  // sequence in it.
  void set_on_step(std::function<void(const std::vector<std::pair<const Context*, int>>&)> fn) {
    std::lock_guard<std::mutex> lk(mu_);
    on_step_ = std::move(fn);
  }

 private:
  double wait_budget_ms() const { return std::clamp(last_step_ms_ * 0.5, 0.5, 20.0); }

  // Every context of the previous step is waiting again (new arrivals do not hold a step back).
  bool ready() const {
    for (const Context* m : members_) {
      bool found = false;
      for (const Request* r = head_; r; r = r->next)
        if (r->ctx == m) found = true;
      if (!found) return false;
    }
    return true;
  }

  // The waiting requests: a list through Request::next (oldest first), so that waiting allocates
  // nothing however many contexts evaluate.
  void push_pending(Request* r) {
    r->next = nullptr;
    if (tail_)
      tail_->next = r;
    else
      head_ = r;
    tail_ = r;
  }
  // Unlinks r (prev: the request before it, null for the first).
  void unlink(Request* prev, Request* r) {
    (prev ? prev->next : head_) = r->next;
    if (tail_ == r) tail_ = prev;
    r->next = nullptr;
  }

  bool alone_only(const Request& r) const { return r.all || !e_.program().has_last; }

  // The oldest requests that fit one step (into step_, reserved for max_seqs_); single tokens
  // first in the result (their rows form one block for matmul_each), then the chunks of several
  // tokens, each group in the order of arrival.
  std::vector<Request*>& take() {
    std::vector<Request*>& sel = step_;
    sel.clear();
    if (alone_only(*head_)) {
      sel.push_back(head_);
      unlink(nullptr, head_);
      return sel;
    }
    multi_.clear();
    int rows = 0, taken = 0;
    for (Request *prev = nullptr, *r = head_; r && taken < max_seqs_;) {
      Request* next = r->next;
      bool dup = false;  // one context cannot be in a step twice (never happens: it waits for its chunk)
      for (Request* q : sel) dup = dup || q->ctx == r->ctx;
      for (Request* q : multi_) dup = dup || q->ctx == r->ctx;
      if (alone_only(*r) || dup || rows + r->n > kMaxRows) {
        prev = r;
        r = next;
        continue;
      }
      rows += r->n;
      taken++;
      (r->n == 1 ? sel : multi_).push_back(r);
      unlink(prev, r);
      r = next;
    }
    sel.insert(sel.end(), multi_.begin(), multi_.end());
    return sel;
  }

  static Result<EvalStatus> run_alone(Request& r) {
    return r.ctx->run_chunk(r.toks, r.n, r.out, r.all, r.cancel ? *r.cancel : std::function<bool()>());
  }

  void run(std::vector<Request*>& batch) {
    if (batch.size() == 1) {
      batch[0]->result.emplace(run_alone(*batch[0]));
      return;
    }
    auto st = run_batch(batch);
    for (Request* r : batch) {
      if (!st) {
        r->result.emplace(st.error());
      } else if (*st == EvalStatus::ok && r->cancel && *r->cancel && (*r->cancel)()) {
        r->result.emplace(EvalStatus::cancelled);
      } else {
        r->result.emplace(*st);
      }
    }
  }

  // ---- one step over the rows of several sequences ----
  struct Seg {
    Request* req;
    int off;  // first row
    int n;    // rows (tokens)
    int pos0;
  };

  // The leader's scratch, sized for a step's most rows (kMaxRows) and sequences (max_seqs_).
  Result<void> ensure_scratch(const Program& p) {
    if (ready_scratch_) return {};
    regs_.resize(p.reg_names.size());
    reg_ptr_.assign(p.reg_names.size(), nullptr);
    for (size_t r = 0; r < p.reg_names.size(); r++) {
      if (static_cast<int>(r) == p.reg_logits) continue;
      auto b = HeapBuf::alloc(uint64_t(kMaxRows) * uint64_t(std::max(1, p.reg_width[r])), 4, "batch activations");
      if (!b) return b.error();
      regs_[r] = std::move(*b);
    }
    // after `last` a step has one row per sequence at most
    auto lb = HeapBuf::alloc(uint64_t(max_seqs_) * uint64_t(p.n_vocab), 4, "batch logits");
    if (!lb) return lb.error();
    logits_ = std::move(*lb);
    auto rb = HeapBuf::alloc(uint64_t(kMaxRows) * uint64_t(std::max(1, p.max_round_width)), 4, "batch activations");
    if (!rb) return rb.error();
    round_ = std::move(*rb);
    mm_ = std::make_unique<MatmulScratch>(e_.pool().size());
    mm_->block_sums = kernels_use_block_sums(e_.kernels());
    for (const Step& s : p.steps)
      if (s.op == OpCode::matmul && !e_.kernels().matmul_reserve(*s.w, kMaxRows, *mm_))
        return make_error(Errc::out_of_memory, strf("out of memory for the scratch of a matrix product (%s, %d tokens)",
                                                    s.w->name.c_str(), kMaxRows));
    rope_cache_.resize(p.ropes.size());
    for (size_t r = 0; r < p.ropes.size(); r++) {
      auto b = HeapBuf::alloc(uint64_t(kMaxRows) * uint64_t(std::max(1, p.ropes[r].n_dims)), 4, "batch rope tables");
      if (!b) return b.error();
      rope_cache_[r] = std::move(*b);
    }
    rope_done_.assign(p.ropes.size(), 0);
    ready_scratch_ = true;
    return {};
  }

  template <class F>
  void for_rows(int rows, int64_t work_per_row, F&& fn) {
    ThreadPool& pool = e_.pool();
    int nt = pool.size();
    if (nt == 1 || rows == 1 || int64_t(rows) * work_per_row < 32768) {
      for (int r = 0; r < rows; r++) fn(r, 0);
      return;
    }
    int tasks = std::min(rows, nt * 4);
    pool.parallel_for(tasks, [&](int task, int thread) {
      int r0 = static_cast<int>(int64_t(rows) * task / tasks),
          r1 = static_cast<int>(int64_t(rows) * (task + 1) / tasks);
      for (int r = r0; r < r1; r++) fn(r, thread);
    });
  }

  // The loop of Context::run_chunk over segments of rows, one per sequence: the row steps are the
  // same function (run_row_step); matmul, rope, attention and last are per segment here.
  Result<EvalStatus> run_batch(std::vector<Request*>& batch) {
    const Program& p = e_.program();
    const KernelTable& kern = e_.kernels();
    if (auto r = ensure_scratch(p); !r) return r.error();
    std::vector<Seg>& segs = segs_;
    segs.clear();
    toks_.clear();
    int rows = 0, singles = 0;
    bool any_out = false;
    for (Request* r : batch) {
      segs.push_back(Seg{r, rows, r->n, r->ctx->n_past_});
      toks_.insert(toks_.end(), r->toks, r->toks + r->n);
      rows += r->n;
      if (r->n == 1) singles++;
      any_out = any_out || r->out != nullptr;
    }
    for (size_t r = 0; r < regs_.size(); r++) reg_ptr_[r] = regs_[r].as<float>();
    reg_ptr_[static_cast<size_t>(p.reg_logits)] = logits_.as<float>();
    auto reg = [&](int r) { return reg_ptr_[static_cast<size_t>(r)]; };
    std::fill(rope_done_.begin(), rope_done_.end(), 0);
    int cur_layer = -2;
    bool after_last = false;
    const auto each_row = [this](int r, int64_t w, auto&& fn) { for_rows(r, w, fn); };  // for_rows as a value
    for (size_t si = 0; si < p.steps.size(); si++) {
      const Step& s = p.steps[si];
      if (s.section == Section::epilogue && !any_out) break;
      if (s.layer != cur_layer) {
        cur_layer = s.layer;
        bool all_cancelled = true;
        for (const Seg& g : segs)
          all_cancelled = all_cancelled && g.req->cancel && *g.req->cancel && (*g.req->cancel)();
        if (all_cancelled) return EvalStatus::cancelled;
      }
      float* a = s.a >= 0 ? reg(s.a) : nullptr;
      float* d = reg(s.dst);
      const int wi = s.w_in;
      const float* b = s.b >= 0 ? reg(s.b) : nullptr;
      const float* c = s.c >= 0 ? reg(s.c) : nullptr;
      if (!run_row_step(s, kern, rows, toks_.data(), a, b, c, d, each_row))
        switch (s.op) {  // the steps run_row_step leaves to the loop
          case OpCode::matmul: {
            // this step and the next that take the same input, as one product (as Context::run_chunk)
            const float* in = matmul_input(s, rows, a, round_.as<float>(), each_row);
            const bool bf = s.round_input == 2;
            const MatmulGroupArgs mg = matmul_group_args(p, si, reg);
            // single tokens (all rows after `last`): each its own product, weights read once
            const int n_each = after_last ? rows : singles;
            bool ok =
                n_each == 0 || kern.matmul_each_group(mg.ws, mg.n, in, n_each, mg.ys, mg.ldys, e_.pool(), bf, *mm_);
            if (!after_last)
              for (const Seg& g : segs)
                if (ok && g.n > 1) {
                  float* yg[kMatmulGroup];
                  for (int j = 0; j < mg.n; j++) yg[j] = mg.ys[j] + size_t(g.off) * size_t(mg.ldys[j]);
                  ok = kern.matmul_group(mg.ws, mg.n, in + size_t(g.off) * wi, g.n, yg, mg.ldys, e_.pool(), bf, *mm_);
                }
            if (!ok)
              return make_error(
                  Errc::out_of_memory,
                  strf("out of memory for the scratch of a matrix product (%s, %d tokens)", s.w->name.c_str(), rows));
            si += size_t(mg.n) - 1;
            break;
          }
          case OpCode::rope: {
            const RopeSpec& rs = p.ropes[static_cast<size_t>(s.idx)];
            float* cache = rope_cache_[static_cast<size_t>(s.idx)].as<float>();  // [kMaxRows][n_dims]
            if (!rope_done_[static_cast<size_t>(s.idx)]) {
              for (const Seg& g : segs)
                for (int t = 0; t < g.n; t++) rope_angles(rs, g.pos0 + t, cache + size_t(g.off + t) * rs.n_dims);
              rope_done_[static_cast<size_t>(s.idx)] = 1;
            }
            for_rows(rows, wi, [&](int t, int) {
              for (int h = 0; h < wi / rs.head_dim; h++) {
                size_t off = size_t(t) * wi + size_t(h) * rs.head_dim;
                rope_head(rs, cache + size_t(t) * rs.n_dims, a + off, d + off);
              }
            });
            break;
          }
          case OpCode::attention: {
            const AttnSpec& at = p.attns[static_cast<size_t>(s.idx)];
            const size_t wq = size_t(at.n_head) * at.hd_k, wk = size_t(at.n_kv) * at.hd_k,
                         wv = size_t(at.n_kv) * at.hd_v, wa = size_t(at.n_head) * at.hd_v;
            // the new keys and values of every sequence into its cache (no b, c: the layer reads an
            // earlier layer's cache), then the heads of all the sequences as one job
            int64_t work = 0;
            int n_all = 0;
            for (const Seg& g : segs) n_all += g.n;
            const Context::AttnCut cut = Context::attention_cut(at, n_all, e_.pool().size());
            head0_.clear();
            for (const Seg& g : segs) {
              g.req->ctx->attention_store(at, g.n, g.pos0, b ? b + g.off * wk : nullptr, c ? c + g.off * wv : nullptr);
              work += Context::attention_work(at, g.n, g.pos0);
              head0_.push_back(
                  head0_.empty() ? 0 : head0_.back() + Context::attention_tasks(at, segs[head0_.size() - 1].n, cut));
            }
            const int tasks = head0_.back() + Context::attention_tasks(at, segs.back().n, cut);
            auto head = [&](int i, int thread) {
              size_t k = 0;  // the segment of task i
              while (k + 1 < head0_.size() && head0_[k + 1] <= i) k++;
              const Seg& g = segs[k];
              g.req->ctx->attention_task(at, g.n, g.pos0, a + g.off * wq, d + g.off * wa, cut, i - head0_[k], thread);
            };
            if (e_.pool().size() == 1 || work < Context::kAttnSerialWork) {
              for (int i = 0; i < tasks; i++) head(i, 0);
            } else {
              e_.pool().parallel_for(tasks, head);
            }
            break;
          }
          case OpCode::last: {
            // each sequence that wants logits keeps its last row, in segment order
            int kept = 0;
            for (Seg& g : segs) {
              if (!g.req->out) {
                g.off = -1;
                continue;
              }
              const int src = g.off + g.n - 1;
              if (src != kept) std::memmove(a + size_t(kept) * wi, a + size_t(src) * wi, size_t(wi) * 4);
              g.off = kept++;
            }
            rows = kept;
            after_last = true;
            break;
          }
          default: break;
        }
    }
    if (any_out) {
      const float* lg = logits_.as<float>();
      for (const Seg& g : segs)
        if (g.req->out) std::memcpy(g.req->out, lg + size_t(g.off) * p.n_vocab, size_t(p.n_vocab) * 4);
    }
    return EvalStatus::ok;
  }

  const Engine& e_;
  int max_seqs_ = kDefaultMaxSeqs;
  std::mutex mu_;
  std::condition_variable cv_;
  Request *head_ = nullptr, *tail_ = nullptr;  // waiting chunks, oldest first (push_pending)
  std::vector<const Context*> members_;        // the contexts of the previous step
  int contexts_ = 0;                           // contexts created (context_created)
  // the leader's lists (reserved in the constructor): the step's requests, its chunks of several
  // tokens (take), its segments and tokens (run_batch)
  bool running_ = false;
  double last_step_ms_ = 0;
  uint64_t steps_ = 0, shared_steps_ = 0, rows_ = 0;
  std::function<void(const std::vector<std::pair<const Context*, int>>&)> on_step_;
  // the leader's scratch (one step at a time): registers [kMaxRows][widest], logits, rounding
  std::vector<Request*> step_, multi_;
  std::vector<Seg> segs_;
  std::vector<int> head0_;  // attention: the first task of each segment's heads
  std::vector<int32_t> toks_;
  bool ready_scratch_ = false;
  std::vector<HeapBuf> regs_;
  std::vector<float*> reg_ptr_;
  HeapBuf logits_, round_;
  std::unique_ptr<MatmulScratch> mm_;
  std::vector<HeapBuf> rope_cache_;  // per rope: [kMaxRows][n_dims]
  std::vector<char> rope_done_;
};

inline Result<void> Context::reserve_shared(const Engine& e) {
  return Batcher::of(e).context_created();
}

inline Result<EvalStatus> Context::run_chunk_shared(const int32_t* toks, int n, float* out_logits, bool all_logits,
                                                    const std::function<bool()>& cancel) {
  Batcher::Request r;
  r.ctx = this;
  r.toks = toks;
  r.n = n;
  r.out = out_logits;
  r.all = all_logits;
  r.cancel = cancel ? &cancel : nullptr;
  return Batcher::of(*e_).submit(r);
}

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
