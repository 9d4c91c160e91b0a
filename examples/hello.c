/* hello.c — the three hooks, nothing else (the README's example). */
#include <stdio.h>
#include <ttft.h>

int main(void) {
  ttft_registry *r = ttft_registry_new(NULL); /* defaults: 4096 slots, 500 ms stall budget */
  if (!r) return 1;
  const uint64_t ms = 1000000;                /* every time is in nanoseconds */
  uint64_t t0 = ttft_now_ns();

  ttft_seq s = ttft_begin(r, t0);             /* scheduler: request arrived */
  token_emitted(r, s, 1, t0 + 42 * ms);       /* decode loop: first visible token */
  for (int k = 1; k <= 9; k++)                /* nine more, 20 ms apart */
    token_emitted(r, s, 1, t0 + (42 + 20 * (uint64_t)k) * ms);
  stream_end(r, s, TTFT_COMPLETED, t0 + 250 * ms);

  ttft_snapshot *snap = ttft_snapshot_take(r);
  printf("TTFT p50 = %.3f ms, TPOT p50 = %.3f ms, tokens = %llu\n",
         ttft_snapshot_quantile(snap, TTFT_METRIC_TTFT, 0.5) / 1e6,
         ttft_snapshot_quantile(snap, TTFT_METRIC_TPOT, 0.5) / 1e6,
         (unsigned long long)ttft_snapshot_counter(snap, TTFT_COUNTER_TOKENS));
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
  return 0;
}
