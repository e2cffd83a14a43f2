// Memory-read bandwidth probe for bench/compare.py --roofline on CPUs where machine-limits' probe
// does not build (it is written with AVX-512 intrinsics): the same measurement (an array of huge
// pages written once, then read by 1..N pinned threads, each its own slice, best and median of the
// repetitions) with 256-bit loads where the compiler has AVX2, else 64-bit ones, and the same line:
//   probe mem_read THP <N>T GB/s best <GB/s> median <GB/s>
// Build: gcc -O2 -march=native -pthread read-bw.c -o read-bw. Run: read-bw [GiB] [repetitions].
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// The sum of the slice's 64-bit words, 8 independent accumulators, so that the loads are never
// waiting for the adds (noipa: the compiler keeps the call and its reads).
static __attribute__((noipa)) uint64_t read_sum(const uint8_t* p, size_t bytes) {
#if defined(__AVX2__)
  __m256i a[8];
  for (int k = 0; k < 8; k++) a[k] = _mm256_setzero_si256();
  for (size_t i = 0; i + 256 <= bytes; i += 256)
    for (int k = 0; k < 8; k++) a[k] = _mm256_add_epi64(a[k], _mm256_load_si256((const __m256i*)(p + i + 32 * k)));
  for (int k = 1; k < 8; k++) a[0] = _mm256_add_epi64(a[0], a[k]);
  uint64_t s[4];
  _mm256_storeu_si256((__m256i*)s, a[0]);
  return s[0] + s[1] + s[2] + s[3];
#else
  uint64_t a[8] = {0};
  const uint64_t* q = (const uint64_t*)p;
  for (size_t i = 0; i + 8 <= bytes / 8; i += 8)
    for (int k = 0; k < 8; k++) a[k] += q[i + k];
  return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
#endif
}

typedef struct {
  const uint8_t* p;
  size_t bytes;
  int cpu;
  pthread_barrier_t* start;
  uint64_t sum;
} Job;

static void* run(void* arg) {
  Job* j = (Job*)arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(j->cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
  pthread_barrier_wait(j->start);
  j->sum = read_sum(j->p, j->bytes);
  return NULL;
}

static int cmpd(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  const size_t gib = argc > 1 ? (size_t)atol(argv[1]) : 2;
  const int reps = argc > 2 ? atoi(argv[2]) : 5;
  int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu > 8) ncpu = 8;
  if (gib < 1 || reps < 1 || reps > 100) {
    fprintf(stderr, "usage: read-bw [GiB >= 1] [repetitions 1..100]\n");
    return 2;
  }
  const size_t total = gib << 30;
  uint8_t* buf = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) {
    perror("read-bw: mmap");
    return 1;
  }
  madvise(buf, total, MADV_HUGEPAGE);
  memset(buf, 0x5a, total);
  uint64_t check = 0;
  for (int nt = 1; nt <= ncpu; nt++) {
    double gbs[100];
    for (int r = 0; r < reps; r++) {
      pthread_barrier_t start;
      pthread_barrier_init(&start, NULL, (unsigned)nt + 1);
      Job jobs[8];
      pthread_t th[8];
      const size_t slice = total / (size_t)nt & ~(size_t)4095;
      for (int t = 0; t < nt; t++) {
        jobs[t] = (Job){buf + (size_t)t * slice, slice, t, &start, 0};
        pthread_create(&th[t], NULL, run, &jobs[t]);
      }
      const double t0 = now();
      pthread_barrier_wait(&start);
      for (int t = 0; t < nt; t++) pthread_join(th[t], NULL), check += jobs[t].sum;
      gbs[r] = (double)(slice * (size_t)nt) / (now() - t0) / 1e9;
      pthread_barrier_destroy(&start);
    }
    qsort(gbs, (size_t)reps, sizeof gbs[0], cmpd);
    const double med = reps % 2 ? gbs[reps / 2] : 0.5 * (gbs[reps / 2 - 1] + gbs[reps / 2]);
    printf("probe mem_read THP %dT GB/s best %6.2f median %6.2f\n", nt, gbs[reps - 1], med);
  }
  fprintf(stderr, "(checksum %llu)\n", (unsigned long long)check);
  return 0;
}
