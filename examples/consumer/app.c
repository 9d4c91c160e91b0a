/* app.c — the program of the consumer project (examples/consumer): three
 * streams through the three hooks, then their TTFT and TPOT medians.
 * Built by the CMakeLists.txt beside it (find_package(ttft), ttft::ttft)
 * or by hand: cc app.c $(pkg-config --cflags --libs ttft) -o app */
#include <stdio.h>
#include <ttft.h>

int main(void) {
  ttft_registry *r = ttft_registry_new(NULL);
  if (!r) return 1;
  const uint64_t ms = 1000000; /* times are nanoseconds */
  uint64_t t0 = ttft_now_ns();
  for (uint64_t k = 0; k < 3; k++) {        /* first tokens after 20, 30, 40 ms */
    uint64_t start = t0 + k * 100 * ms;
    ttft_seq s = ttft_begin(r, start);
    token_emitted(r, s, 1, start + (20 + 10 * k) * ms);
    for (uint64_t j = 1; j <= 4; j++)        /* then one token every 10 ms */
      token_emitted(r, s, 1, start + (20 + 10 * k + 10 * j) * ms);
    stream_end(r, s, TTFT_COMPLETED, TTFT_NOW);
  }
  ttft_snapshot *snap = ttft_snapshot_take(r);
  if (!snap) return 1;
  /* percentiles are within 0.5 % of exact: printed to the millisecond */
  printf("consumer: %llu streams, TTFT p50 = %.0f ms, TPOT p50 = %.0f ms\n",
         (unsigned long long)ttft_snapshot_counter(snap, TTFT_COUNTER_COMPLETED),
         ttft_snapshot_quantile(snap, TTFT_METRIC_TTFT, 0.5) / 1e6,
         ttft_snapshot_quantile(snap, TTFT_METRIC_TPOT, 0.5) / 1e6);
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
  return 0;
}
