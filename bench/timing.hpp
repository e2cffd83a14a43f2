// Timing for the micro-benchmarks: thread CPU time, and the fastest of a kind's runs.
#pragma once
#include <algorithm>
#include <ctime>

inline double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// The fastest of runs of `run` over 150 ms after a warm-up: a neighbour on the host (a busy sibling
// thread, a stolen time slice) only ever slows a run down; a run the clock did not see is not counted.
template <class F>
inline double fastest_ms(F run) {
  run();
  double t0 = cpu_ms(), t1 = t0, best = 1e30;
  while (t1 - t0 < 150) {
    const double ta = cpu_ms();
    run();
    t1 = cpu_ms();
    if (t1 > ta) best = std::min(best, t1 - ta);
  }
  return best;
}
