/*
 * bindings_cost.c — the C baseline of bench/bindings.sh: the loop that
 * bindings/rust/examples/token_cost.rs, bindings/go/examples/tokencost and
 * the Python snippet in bindings.sh run, written against the C API. 64
 * streams round-robin, one ttft_token_emitted per token with an explicit,
 * increasing timestamp; then one ttft_step_emitted per decode step of the
 * 64 streams; then one ttft_engine_step (1.2) per decode step, with both
 * timestamps. Prints "token NS", "step64 NS" (ns per token) and "engine NS"
 * (ns per engine_step call), medians.
 *
 *   cc -O2 -Iinclude bench/bindings_cost.c -Lbuild -lttft -o bindings_cost
 *   ./bindings_cost [tokens per run] [runs]
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ttft.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  int runs = argc > 2 ? atoi(argv[2]) : 7;
  if (n < 64 || runs < 1 || runs > 99) return 2;
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.max_inflight = 128;
  ttft_registry *r = ttft_registry_new(&cfg);
  if (!r) return 1;
  double token[99], step[99], engine[99];
  ttft_step_info info;
  ttft_step_info_init(&info);
  info.decode_seqs = 64;
  uint64_t t0 = ttft_now_ns();
  int bad = 0;
  for (int k = 0; k < runs; k++) {
    ttft_seq s[64];
    for (int i = 0; i < 64; i++) s[i] = ttft_begin(r, t0);
    uint64_t t = t0;
    double a = now_s();
    for (long i = 0; i < n; i++) {
      if (i % 64 == 0) t += 1000;
      bad |= ttft_token_emitted(r, s[i % 64], 1, t);
    }
    token[k] = (now_s() - a) * 1e9 / (double)n;
    a = now_s();
    long steps = n / 64;
    for (long i = 0; i < steps; i++) {
      t += 1000;
      bad |= ttft_step_emitted(r, s, NULL, 64, t) != 64;
    }
    step[k] = (now_s() - a) * 1e9 / (double)(steps * 64);
    a = now_s();
    for (long i = 0; i < steps; i++) {
      t += 1000;
      bad |= ttft_engine_step(r, &info, t, t + 500);
    }
    engine[k] = (now_s() - a) * 1e9 / (double)steps;
    for (int i = 0; i < 64; i++) bad |= ttft_stream_end(r, s[i], TTFT_COMPLETED, t + 1000);
  }
  ttft_registry_free(r);
  if (bad) {
    fprintf(stderr, "a call failed\n");
    return 1;
  }
  qsort(token, (size_t)runs, sizeof token[0], cmp);
  qsort(step, (size_t)runs, sizeof step[0], cmp);
  qsort(engine, (size_t)runs, sizeof engine[0], cmp);
  printf("token %.2f\nstep64 %.2f\nengine %.2f\n", token[runs / 2], step[runs / 2], engine[runs / 2]);
  return 0;
}
