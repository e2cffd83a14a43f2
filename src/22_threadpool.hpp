// ==== Thread pool ====
// One persistent pool per model: std::thread workers plus the calling thread. parallel_for(n, fn)
// runs fn(task, thread) for every task in [0, n) and returns when all are done. Tasks are handed
// out from an atomic counter; results must not depend on which thread ran a task (each output is
// written by exactly one task), so any thread count gives the same bits.
// Waiting workers spin for a short while (a forward pass issues many small jobs back to back),
// then sleep on a condition variable, so an idle model costs no CPU (a game shares the cores).
// Jobs from different threads (several sessions on one model) are serialised by a mutex.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#if defined(_MSC_VER)
  _mm_pause();
#else
  __builtin_ia32_pause();
#endif
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

class ThreadPool {
 public:
  using TaskFn = void (*)(void* ctx, int task, int thread);

  // n_threads: total threads including the caller (>= 1); 0 picks the hardware thread count.
  explicit ThreadPool(int n_threads = 0) {
    if (n_threads <= 0) n_threads = default_threads();
    n_threads_ = std::max(1, std::min(n_threads, 512));
    for (int t = 1; t < n_threads_; t++) workers_.emplace_back([this, t] { worker(t); });
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lk(sleep_mu_);
      quit_.store(true, std::memory_order_release);
      generation_.fetch_add(1, std::memory_order_acq_rel);
    }
    sleep_cv_.notify_all();
    for (auto& w : workers_) w.join();
  }

  int size() const { return n_threads_; }

  static int default_threads() {
    unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
  }

  // Runs fn(task, thread) for task in [0, n_tasks); `thread` is in [0, size()).
  template <class F>
  void parallel_for(int n_tasks, F&& fn) {
    auto trampoline = [](void* ctx, int task, int thread) { (*static_cast<std::remove_reference_t<F>*>(ctx))(task, thread); };
    run(n_tasks, trampoline, const_cast<void*>(static_cast<const void*>(&fn)));
  }

  void run(int n_tasks, TaskFn fn, void* ctx) {
    if (n_tasks <= 0) return;
    if (n_threads_ == 1 || n_tasks == 1) {
      for (int i = 0; i < n_tasks; i++) fn(ctx, i, 0);
      return;
    }
    std::lock_guard<std::mutex> job_lock(job_mu_);
    fn_ = fn;
    ctx_ = ctx;
    n_tasks_ = n_tasks;
    next_.store(0, std::memory_order_relaxed);
    busy_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lk(sleep_mu_);
      generation_.fetch_add(1, std::memory_order_acq_rel);
    }
    if (sleepers_.load(std::memory_order_acquire) > 0) sleep_cv_.notify_all();
    work(0);
    // wait for the workers to finish their last task
    for (int spins = 0; busy_.load(std::memory_order_acquire) > 0; spins++) {
      if (spins < 1 << 16) cpu_relax();
      else std::this_thread::yield();
    }
  }

 private:
  void work(int thread) {
    for (;;) {
      int i = next_.fetch_add(1, std::memory_order_relaxed);
      if (i >= n_tasks_) break;
      fn_(ctx_, i, thread);
    }
  }

  void worker(int thread) {
    uint64_t seen = 0;
    for (;;) {
      // spin a little, then sleep until the next job
      uint64_t g = generation_.load(std::memory_order_acquire);
      for (int spins = 0; g == seen && spins < kSpin; spins++) {
        cpu_relax();
        g = generation_.load(std::memory_order_acquire);
      }
      if (g == seen) {
        std::unique_lock<std::mutex> lk(sleep_mu_);
        sleepers_.fetch_add(1, std::memory_order_acq_rel);
        sleep_cv_.wait(lk, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        sleepers_.fetch_sub(1, std::memory_order_acq_rel);
        g = generation_.load(std::memory_order_acquire);
      }
      seen = g;
      if (quit_.load(std::memory_order_acquire)) return;
      work(thread);
      busy_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  static constexpr int kSpin = 1 << 14;  // ~ tens of microseconds of pause instructions

  int n_threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex job_mu_;  // one job at a time
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int n_tasks_ = 0;
  std::atomic<int> next_{0};
  std::atomic<int> busy_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> quit_{false};
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
