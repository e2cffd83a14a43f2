// The thread pool: every task runs exactly once, any thread count, jobs from several threads.
#define LLMINFER_IMPLEMENTATION
#include "common.hpp"

using llminfer::detail::ThreadPool;

TEST_CASE("threadpool: every task runs exactly once") {
  for (int threads : {1, 2, 3, 4, 8}) {
    ThreadPool pool(threads);
    CHECK(pool.size() == threads);
    for (int n : {0, 1, 2, 7, 100, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<int> bad_thread{0};
      pool.parallel_for(n, [&](int task, int thread) {
        hits[static_cast<size_t>(task)].fetch_add(1);
        if (thread < 0 || thread >= threads) bad_thread++;
      });
      int wrong = 0;
      for (auto& h : hits) wrong += h.load() != 1;
      CHECK(wrong == 0);
      CHECK(bad_thread.load() == 0);
    }
  }
}

TEST_CASE("threadpool: jobs submitted from several threads at once are all completed") {
  ThreadPool pool(3);
  std::atomic<long> total{0};
  std::vector<std::thread> users;
  for (int u = 0; u < 4; u++)
    users.emplace_back([&] {
      for (int rep = 0; rep < 200; rep++) pool.parallel_for(10, [&](int task, int) { total += task; });
    });
  for (auto& t : users) t.join();
  CHECK(total.load() == 4L * 200 * 45);
}

// CPU time of the whole process (ms). std::clock() is that on POSIX; on Windows it is wall time.
static double process_cpu_ms() {
#if defined(_WIN32)
  FILETIME created, exited, kernel, user;
  if (!GetProcessTimes(GetCurrentProcess(), &created, &exited, &kernel, &user)) return 0;
  auto ms = [](FILETIME t) { return static_cast<double>((uint64_t(t.dwHighDateTime) << 32) | t.dwLowDateTime) / 1e4; };
  return ms(kernel) + ms(user);
#else
  return 1000.0 * static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
#endif
}

TEST_CASE("threadpool: idle workers sleep instead of spinning") {
  ThreadPool pool(2);
  pool.parallel_for(4, [](int, int) {});
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  double c0 = process_cpu_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  double cpu_ms = process_cpu_ms() - c0;
  CHECK(cpu_ms < 50.0);  // a spinning worker would use ~200 ms of CPU here
}

TEST_CASE("threadpool: many short jobs back to back, each task once, the right job's function") {
  // Workers claim tasks with the job number: a worker waking late must never run a task of an
  // earlier job with a later job's function (or the reverse).
  for (int threads : {2, 3, 4}) {
    ThreadPool pool(threads);
    std::vector<int> hits(64);
    int wrong = 0;
    for (int job = 0; job < 3000; job++) {
      const int n = 1 + job % 37;
      std::fill(hits.begin(), hits.begin() + n, 0);
      pool.parallel_for(n, [&, job](int task, int) { hits[static_cast<size_t>(task)] += 1 + job; });
      for (int i = 0; i < n; i++) wrong += hits[static_cast<size_t>(i)] != 1 + job;
    }
    CHECK(wrong == 0);
  }
}

#if defined(__linux__)
TEST_CASE("threadpool: threads that share one CPU do not take turns spinning") {
  // Another program keeps the other cores busy and the scheduler puts the pool's threads on one CPU,
  // where they can only take turns: a thread spinning there (a worker waiting for the next job, the
  // caller waiting for a task the descheduled worker holds) takes the CPU time the other needs.
  // Pinned to one CPU, the pool's CPU time must be the tasks' own, not twice that.
  cpu_set_t old;
  REQUIRE(sched_getaffinity(0, sizeof old, &old) == 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  {
    ThreadPool pool(2);  // its worker inherits the one CPU
    pool.parallel_for(2, [](int, int) {});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const double cpu0 = process_cpu_ms();
    std::atomic<int64_t> task_ns{0};  // the tasks' own time
    int wrong = 0;
    std::vector<int> hits(8);
    for (int job = 0; job < 2000; job++) {
      std::fill(hits.begin(), hits.end(), 0);
      pool.parallel_for(8, [&](int task, int) {
        const auto t0 = std::chrono::steady_clock::now();  // a task of ~20 us
        auto t = t0;
        while (t - t0 < std::chrono::microseconds(20)) t = std::chrono::steady_clock::now();
        task_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(t - t0).count();
        hits[static_cast<size_t>(task)]++;
      });
      for (int h : hits) wrong += h != 1;
    }
    const double used = process_cpu_ms() - cpu0, tasks = 1e-6 * static_cast<double>(task_ns.load());
    CHECK(wrong == 0);
    CHECK(used < 1.3 * tasks);  // spinning threads took turns with the working one before: ~1.6x
  }
  sched_setaffinity(0, sizeof old, &old);
}
#endif
