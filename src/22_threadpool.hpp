// ==== Thread pool ====
// One persistent pool per model: std::thread workers plus the calling thread. parallel_for(n, fn)
// runs fn(task, thread) for every task in [0, n) and returns when all are done. Results must not
// depend on which thread ran a task (each output is written by exactly one task, with the same
// arithmetic), so any thread count gives the same bits.
//
// Scheduling: a job is published as one atomic word (job number, next task); threads claim tasks
// with a compare-and-swap that also checks the job number, and the caller waits for the count of
// *finished tasks*, not for every worker to check in, then closes the job in the same word. So a
// worker that is asleep or descheduled (a game or other programs share the cores) never delays a
// job: the threads that are running do its tasks. Waiting workers spin for a short while (a
// forward pass issues jobs back to back, microseconds apart), then sleep on a condition variable,
// so an idle model costs no CPU.
// Shared cores: when another program keeps a core busy, the scheduler may put a worker on the
// caller's CPU, where the two only take turns and a spinning one takes the other's time. So a thread
// never spins on the CPU of another thread of the pool: a worker there sleeps, the caller waiting for
// it sleeps at once, and while every worker sits on the caller's CPU the caller runs jobs alone,
// offering one to the pool every 0.2 ms all the same (a worker woken onto a free CPU is used again). Where
// the system does not say which CPU a thread is on, the threads spin as above.
// Jobs from different threads (several sessions on one model) are serialised by a mutex.
namespace llminfer {
inline namespace v0_1 {
namespace detail {

// The CPU the calling thread runs on, or -1 where the system does not say.
inline int current_cpu() {
#if defined(__linux__)
  return sched_getcpu();
#elif defined(_WIN32)
  return static_cast<int>(GetCurrentProcessorNumber());
#else
  return -1;
#endif
}

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
    cpu_ = std::make_unique<std::atomic<int>[]>(static_cast<size_t>(n_threads_));
    for (int t = 0; t < n_threads_; t++) cpu_[t].store(-1);
    for (int t = 1; t < n_threads_; t++) workers_.emplace_back([this, t] { worker(t); });
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lk(sleep_mu_);
      quit_.store(true, std::memory_order_release);
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
    auto trampoline = [](void* ctx, int task, int thread) {
      (*static_cast<std::remove_reference_t<F>*>(ctx))(task, thread);
    };
    run(n_tasks, trampoline, const_cast<void*>(static_cast<const void*>(&fn)));
  }

  void run(int n_tasks, TaskFn fn, void* ctx) {
    if (n_tasks <= 0) return;
    const int cpu = n_threads_ > 1 && n_tasks > 1 ? current_cpu() : -1;
    if (n_threads_ == 1 || n_tasks == 1 || (workers_on(cpu) == n_threads_ - 1 && !offer_due())) {
      for (int i = 0; i < n_tasks; i++) fn(ctx, i, 0);
      return;
    }
    std::lock_guard<std::mutex> job_lock(job_mu_);
    cpu_[0].store(cpu, std::memory_order_relaxed);
    const uint32_t job = ++job_number_;  // wraps after 2^32 jobs: only equality matters
    fn_.store(fn, std::memory_order_relaxed);
    ctx_.store(ctx, std::memory_order_relaxed);
    // release: a thread that reads this count also sees the previous job closed (below), so it
    // cannot claim a task of the previous job's ticket with this job's count
    n_tasks_.store(n_tasks, std::memory_order_release);
    done_.store(0, std::memory_order_relaxed);
    // publishes the job (task 0 next); seq_cst with the sleepers count so that either this thread
    // sees a worker going to sleep or the worker sees the job
    ticket_.store(static_cast<uint64_t>(job) << 32);
    if (sleepers_.load() > 0) {
      { std::lock_guard<std::mutex> lk(sleep_mu_); }  // a worker between its check and its wait sees the ticket
      sleep_cv_.notify_all();
    }
    work(job, 0);
    // The other threads finish the tasks they claimed: spin while they are usually microseconds from
    // done (not on a CPU shared with one of them), then sleep until the last one is done. Sleeping,
    // not yielding: a worker descheduled in the middle of a task waits in a busy CPU's queue, and an
    // idle CPU takes it over at once. (A condition variable: std::atomic::wait hung under Wine.)
    const int spin = workers_on(cpu) > 0 ? 0 : kSpin;
    for (int spins = 0; spins < spin && done_.load(std::memory_order_acquire) < n_tasks; spins++) cpu_relax();
    if (done_.load(std::memory_order_acquire) < n_tasks) {
      std::unique_lock<std::mutex> lk(done_mu_);
      caller_waits_.store(true);  // seq_cst with the workers' count: they see this or this sees the count
      done_cv_.wait(lk, [&] { return done_.load() >= n_tasks; });
      caller_waits_.store(false, std::memory_order_relaxed);
    }
    // Close the job: no task index is below the count any more. Without this, a thread that read
    // this job's exhausted ticket and then the next job's (larger) task count could claim a task
    // of the ticket before the next job is published, and run it with the wrong function or count
    // it as done for the next job.
    ticket_.store(static_cast<uint64_t>(job) << 32 | kClosed);
  }

 private:
  // Claims and runs tasks of job `job` until there are none left (or another job started).
  void work(uint32_t job, int thread) {
    for (;;) {
      uint64_t t = ticket_.load(std::memory_order_acquire);
      if ((t >> 32) != job) return;
      const uint32_t n = static_cast<uint32_t>(n_tasks_.load(std::memory_order_acquire));
      const uint32_t i = static_cast<uint32_t>(t & 0xFFFFFFFFu);
      if (i >= n) return;  // all claimed, or the job closed (kClosed)
      if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) continue;
      // the job cannot end while this claimed task is unfinished, so fn_/ctx_ are its own
      fn_.load(std::memory_order_relaxed)(ctx_.load(std::memory_order_relaxed), static_cast<int>(i), thread);
      done_.fetch_add(1);
      if (caller_waits_.load()) {
        std::lock_guard<std::mutex> lk(done_mu_);  // the caller is in its wait, or sees the count before it
        done_cv_.notify_all();
      }
    }
  }

  void worker(int thread) {
    uint32_t seen = 0;
    for (;;) {
      // spin a little, then sleep until a new job is published
      uint32_t job = static_cast<uint32_t>(ticket_.load(std::memory_order_acquire) >> 32);
      int cpu = current_cpu();
      cpu_[thread].store(cpu, std::memory_order_relaxed);
      for (int spins = 0; job == seen && spins < kSpin; spins++) {
        // on the caller's CPU spinning would only take its time: sleep
        if (cpu >= 0 && cpu == cpu_[0].load(std::memory_order_relaxed)) break;
        cpu_relax();
        job = static_cast<uint32_t>(ticket_.load(std::memory_order_acquire) >> 32);
        if ((spins & 255) == 255) cpu_[thread].store(cpu = current_cpu(), std::memory_order_relaxed);
      }
      if (job == seen) {
        std::unique_lock<std::mutex> lk(sleep_mu_);
        sleepers_.fetch_add(1);
        sleep_cv_.wait(lk, [&] {
          return quit_.load(std::memory_order_acquire) || static_cast<uint32_t>(ticket_.load() >> 32) != seen;
        });
        sleepers_.fetch_sub(1);
        job = static_cast<uint32_t>(ticket_.load(std::memory_order_acquire) >> 32);
      }
      if (quit_.load(std::memory_order_acquire)) return;
      cpu_[thread].store(current_cpu(), std::memory_order_relaxed);
      seen = job;
      work(job, thread);
    }
  }

  // While every worker sits on the caller's CPU: true when a job is to be offered to the pool all
  // the same (every 0.2 ms), so that a worker woken onto a free CPU is used again.
  bool offer_due() {
    const int64_t now =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count();
    int64_t last = offered_us_.load(std::memory_order_relaxed);
    return now - last >= kOfferUs && offered_us_.compare_exchange_strong(last, now, std::memory_order_relaxed);
  }

  // How many workers were last seen on CPU `cpu` (none when it is unknown).
  int workers_on(int cpu) const {
    int n = 0;
    for (int t = 1; cpu >= 0 && t < n_threads_; t++) n += cpu_[t].load(std::memory_order_relaxed) == cpu;
    return n;
  }

  // ~10^4 pause instructions: tens to a few hundred microseconds depending on the CPU.
  static constexpr int kSpin = 1 << 14;
  static constexpr int64_t kOfferUs = 200;
  static constexpr uint64_t kClosed = 0xFFFFFFFFu;  // the task index of a finished job

  int n_threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex job_mu_;  // one job at a time
  uint32_t job_number_ = 0;
  std::atomic<uint64_t> ticket_{0};  // job number << 32 | next task
  std::atomic<TaskFn> fn_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  std::atomic<int> n_tasks_{0};
  std::atomic<int> done_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> caller_waits_{false};  // the job's caller sleeps on done_cv_
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  std::unique_ptr<std::atomic<int>[]> cpu_;  // the CPU each thread was last seen on (0: the caller)
  std::atomic<int64_t> offered_us_{0};       // when a job was last offered to workers on the caller's CPU
  std::atomic<bool> quit_{false};
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;
};

}  // namespace detail
}  // namespace v0_1
}  // namespace llminfer
