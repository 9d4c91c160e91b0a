/*
 * exemplar_workload.c — a process that records streams with W3C trace ids
 * on the real clock and serves them on /metrics, for exemplar_test.py.
 *
 * 300 streams over the classes default and chat (even i: default, odd:
 * chat). Streams 0..283 have a TTFT of at most 241 ms and gaps below 100 ms;
 * the last 16 (8 a class) are the slowest, each in a bucket of its own:
 * TTFT 0.245, 0.4, 0.6, 0.9, 1.5, 3, 6 and 9 s (one per OTel TTFT bucket)
 * and longest gaps 0.11 .. 14.4 s (doubling).
 * Stream i has trace id "%016x%016x" (0xe8e, i + 1) and request id
 * "req-<i>"; all ended before now, so every exemplar timestamp is recent.
 *
 * stdout: "port <n>", then for each class and ranking
 *   "slowest <class> <ttft|gap> <rank> <trace id> <value ns>" (the
 *   library's own list, ttft_snapshot_slowest), then "ready".
 * stdin: anything or EOF stops it; it also exits after 60 s (SIGALRM).
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ttft.h"

#define MS UINT64_C(1000000)

int main(void) {
  alarm(60);
  ttft_registry *r = ttft_registry_new(NULL);
  int chat = r ? ttft_class_add(r, "chat", NULL) : -1;
  if (chat < 0) return 1;
  uint64_t now = ttft_registry_now_ns(r);
  uint64_t t0 = now - 40000 * MS; /* the last stream ends before now */
  static const uint64_t slow_ttft_ms[8] = {245, 400, 600, 900, 1500, 3000, 6000, 9000};
  static const uint64_t slow_gap_ms[8] = {110, 220, 450, 900, 1800, 3600, 7200, 14400};
  for (unsigned i = 0; i < 300; i++) {
    char tid[33], rid[24];
    snprintf(tid, sizeof tid, "%016x%016x", 0xe8eu, i + 1);
    snprintf(rid, sizeof rid, "req-%u", i);
    ttft_request q;
    ttft_request_init(&q);
    q.class_id = i % 2 ? chat : 0;
    q.request_id = rid;
    q.trace_id = tid;
    uint64_t t = t0 + (uint64_t)i * 20 * MS;
    ttft_seq s = ttft_begin_ex(r, &q, t);
    t += i >= 284 ? slow_ttft_ms[(i - 284) / 2] * MS : MS + (uint64_t)((i * 7919u) % 2400u) * MS / 10;
    ttft_token_emitted(r, s, 1, t);
    t += 2 * MS;
    ttft_token_emitted(r, s, 1, t);
    t += i >= 284 ? slow_gap_ms[(i - 284) / 2] * MS : MS + (uint64_t)((i * 104729u) % 997u) * MS / 10;
    ttft_token_emitted(r, s, 1, t);
    ttft_stream_end(r, s, TTFT_COMPLETED, t);
  }
  ttft_http *srv = NULL;
  if (ttft_http_start(r, "127.0.0.1:0", &srv) != TTFT_OK) return 1;
  printf("port %d\n", ttft_http_port(srv));
  ttft_snapshot *s = ttft_snapshot_take(r);
  for (int c = 0; c < ttft_snapshot_classes(s); c++)
    for (int by = 0; by < TTFT_SLOWEST_COUNT_; by++)
      for (unsigned i = 0; i < ttft_snapshot_slowest_count(s, c, (ttft_slowest_by)by); i++) {
        ttft_slow_request o;
        o.struct_size = sizeof o;
        if (ttft_snapshot_slowest(s, c, (ttft_slowest_by)by, i, &o) != TTFT_OK) return 1;
        printf("slowest %s %s %u %s %llu\n", ttft_snapshot_class_name(s, c), by ? "gap" : "ttft", i,
               o.trace_id, (unsigned long long)o.value_ns);
      }
  ttft_snapshot_free(s);
  printf("ready\n");
  fflush(stdout);
  char buf[64];
  (void)!read(0, buf, sizeof buf);
  ttft_http_stop(srv);
  ttft_registry_free(r);
  return 0;
}
