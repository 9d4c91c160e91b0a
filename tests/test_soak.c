/*
 * test_soak.c — a long run through one registry: TTFT_SOAK_EVENTS hook
 * calls (default 10^7; CI's soak step runs 10^8) of begin / mark /
 * token_emitted / stream_end over a window of concurrently live sequences,
 * with snapshots, formatting and deltas taken and freed along the way.
 *
 * Checks: resident memory (from /proc/self/statm) after the run is within
 * noise of what it was after a warm-up; ttft_registry_memory() — which
 * grows only as histograms first reach a power of two of their value range
 * (src/record/pool.c) — grows by at most one 256 KiB slab after the
 * warm-up; and every counter and histogram count is exactly what the caller
 * fed in (correctness does not decay after 10^8 events: no counter wraps,
 * no slot leaks, generations keep rejecting stale handles).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ttft.h"

static int g_failures;
#define CHECK_EQ_U(what, actual, expected)                                                    \
  do {                                                                                        \
    unsigned long long a_ = (unsigned long long)(actual), e_ = (unsigned long long)(expected); \
    if (a_ != e_) {                                                                           \
      fprintf(stderr, "%s:%d %s: expected %llu, got %llu\n", __FILE__, __LINE__, what, e_, a_); \
      g_failures++;                                                                           \
    }                                                                                         \
  } while (0)

#define CHECK_TRUE(what, cond)                                                    \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "%s:%d %s: expected true\n", __FILE__, __LINE__, what);     \
      g_failures++;                                                               \
    }                                                                             \
  } while (0)

#define WINDOW 512            /* sequences live at once                 */
#define STALL_NS 2000000ull   /* 2 ms                                   */
#define RSS_NOISE_KIB 2048    /* allowed growth: allocator noise        */
#define SNAPSHOT_EVERY 2000000ull

/* AddressSanitizer keeps freed blocks in a quarantine (256 MiB by default)
 * instead of reusing them, so RSS grows with every snapshot freed: the RSS
 * bound is meaningful only without it. The counts are checked either way. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return -1;
  long size = 0, resident = 0;
  int n = fscanf(f, "%ld %ld", &size, &resident);
  fclose(f);
  if (n != 2) return -1;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static uint64_t rnd(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

typedef struct live {
  ttft_seq h;
  uint64_t t;       /* last event time */
  uint32_t left;    /* emissions still to make */
  uint32_t emitted; /* emissions made */
} live;

int main(void) {
  uint64_t events = 10000000ull;
  const char *env = getenv("TTFT_SOAK_EVENTS");
  if (env && *env) events = strtoull(env, NULL, 10);
  if (events < 100000) events = 100000;

  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.max_inflight = WINDOW * 2;
  cfg.stall_threshold_ns = STALL_NS;
  ttft_registry *r = ttft_registry_new(&cfg);
  if (!r) {
    fprintf(stderr, "registry_new failed\n");
    return 1;
  }
  int chat;
  {
    ttft_slo slo;
    ttft_slo_init(&slo);
    slo.ttft_ns = 100000000;
    slo.tpot_ns = 1000000;
    chat = ttft_class_add(r, "chat", &slo);
    if (chat < 1) {
      fprintf(stderr, "class_add failed: %d\n", chat);
      return 1;
    }
  }
  size_t mem0 = ttft_registry_memory(r);
  char *buf = malloc(1 << 20);
  if (!buf) return 1;

  static live w[WINDOW];
  uint64_t rs = 0xC0FFEEull, t = 1000000000ull;
  uint64_t n_events = 0, begun = 0, completed = 0, cancelled = 0, errors = 0, tokens = 0;
  uint64_t firsts = 0, gaps = 0, stalls = 0, abandoned = 0, stale_ok = 0, snapshots = 0;
  ttft_seq stale = 0;
  long rss_warm = -1;
  size_t mem_warm = 0;
  ttft_snapshot *prev = NULL;
  uint64_t next_snap = SNAPSHOT_EVERY / 4;

  for (size_t i = 0; i < WINDOW; i++) w[i].h = 0;
  while (n_events < events) {
    live *l = &w[rnd(&rs) % WINDOW];
    t += 1 + rnd(&rs) % 4096;
    if (!l->h) {
      ttft_request req;
      ttft_request_init(&req);
      req.class_id = (rnd(&rs) & 1) ? chat : 0;
      req.prompt_tokens = (uint32_t)(rnd(&rs) % 200000);
      req.prefix_hit = (int)(rnd(&rs) % 3) - 1;
      l->h = ttft_begin_ex(r, &req, t);
      n_events++;
      if (!l->h) {
        fprintf(stderr, "begin refused after %llu events\n", (unsigned long long)n_events);
        g_failures++;
        break;
      }
      begun++;
      l->t = t;
      l->left = (uint32_t)(rnd(&rs) % 300);
      l->emitted = 0;
      continue;
    }
    if (l->left) {
      uint64_t jump = (rnd(&rs) % 1024 == 0) ? STALL_NS + 1 : 0;
      t += jump;
      uint32_t n = 1 + (uint32_t)(rnd(&rs) % 3);
      int rc = ttft_token_emitted(r, l->h, n, t);
      n_events++;
      if (rc != TTFT_OK) {
        fprintf(stderr, "token_emitted: %d\n", rc);
        g_failures++;
        break;
      }
      if (l->emitted) {
        gaps++;
        if (t - l->t > STALL_NS) stalls++;
      } else {
        firsts++;
      }
      l->emitted++;
      l->left--;
      l->t = t;
      tokens += n;
      continue;
    }
    uint64_t k = rnd(&rs) % 16;
    ttft_status st = k == 0 ? TTFT_CANCELLED : k == 1 ? TTFT_ERROR : TTFT_COMPLETED;
    int rc = ttft_stream_end(r, l->h, st, t);
    n_events++;
    if (rc != TTFT_OK) {
      fprintf(stderr, "stream_end: %d\n", rc);
      g_failures++;
      break;
    }
    if (st == TTFT_CANCELLED) {
      cancelled++;
      if (!l->emitted) abandoned++;
    } else if (st == TTFT_ERROR) {
      errors++;
    } else {
      completed++;
    }
    /* every so often, check that an old handle is still refused */
    if (stale && ttft_token_emitted(r, stale, 1, t) != TTFT_ESTALE) stale_ok++;
    stale = l->h;
    l->h = 0;

    if (n_events >= next_snap) {
      next_snap += SNAPSHOT_EVERY;
      ttft_snapshot *s = ttft_snapshot_take(r);
      if (!s) {
        fprintf(stderr, "snapshot failed\n");
        g_failures++;
        break;
      }
      snapshots++;
      long len = ttft_snapshot_format(s, (ttft_format)(snapshots % TTFT_FORMAT_COUNT_), buf, 1 << 20);
      if (len <= 0) {
        fprintf(stderr, "format failed: %ld\n", len);
        g_failures++;
      }
      if (prev) {
        int err = 0;
        ttft_snapshot *d = ttft_snapshot_delta(s, prev, &err);
        if (!d) {
          fprintf(stderr, "delta failed: %d\n", err);
          g_failures++;
        }
        ttft_snapshot_free(d);
        ttft_snapshot_free(prev);
      }
      prev = s;
      if (rss_warm < 0 && n_events >= events / 20) {
        rss_warm = rss_kib();
        mem_warm = ttft_registry_memory(r);
      }
    }
  }
  ttft_snapshot_free(prev);
  /* end what is still live so the final counts close */
  for (size_t i = 0; i < WINDOW; i++) {
    if (!w[i].h) continue;
    t += 1;
    if (ttft_stream_end(r, w[i].h, TTFT_COMPLETED, t) != TTFT_OK) g_failures++;
    completed++;
  }
  /* one more snapshot cycle at the end, so the "after" RSS includes one */
  ttft_snapshot *s = ttft_snapshot_take(r);
  if (!s) {
    fprintf(stderr, "final snapshot failed\n");
    return 1;
  }
  long rss_end = rss_kib();
  if (rss_warm < 0) rss_warm = rss_end;
  if (!mem_warm) mem_warm = ttft_registry_memory(r);

  CHECK_EQ_U("BEGUN", ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN), begun);
  CHECK_EQ_U("COMPLETED", ttft_snapshot_counter(s, TTFT_COUNTER_COMPLETED), completed);
  CHECK_EQ_U("CANCELLED", ttft_snapshot_counter(s, TTFT_COUNTER_CANCELLED), cancelled);
  CHECK_EQ_U("ERRORS", ttft_snapshot_counter(s, TTFT_COUNTER_ERRORS), errors);
  CHECK_EQ_U("ABANDONED", ttft_snapshot_counter(s, TTFT_COUNTER_ABANDONED), abandoned);
  CHECK_EQ_U("DROPPED", ttft_snapshot_counter(s, TTFT_COUNTER_DROPPED), 0);
  CHECK_EQ_U("TOKENS", ttft_snapshot_counter(s, TTFT_COUNTER_TOKENS), tokens);
  CHECK_EQ_U("STALLS", ttft_snapshot_counter(s, TTFT_COUNTER_STALLS), stalls);
  CHECK_EQ_U("CLOCK_CLAMPED", ttft_snapshot_counter(s, TTFT_COUNTER_CLOCK_CLAMPED), 0);
  CHECK_EQ_U("TTFT count", ttft_snapshot_count(s, TTFT_METRIC_TTFT), firsts);
  CHECK_EQ_U("ITL count", ttft_snapshot_count(s, TTFT_METRIC_ITL), gaps);
  CHECK_EQ_U("E2E count", ttft_snapshot_count(s, TTFT_METRIC_E2E), begun);
  CHECK_EQ_U("OUTPUT_TOKENS sum", ttft_snapshot_sum(s, TTFT_METRIC_OUTPUT_TOKENS), tokens);
  CHECK_EQ_U("inflight", ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT), 0);
  CHECK_EQ_U("stale handles accepted", stale_ok, 0);
  size_t mem_end = ttft_registry_memory(r);
  CHECK_TRUE("registry memory after warm-up grows by at most one slab",
             mem_end >= mem_warm && mem_end - mem_warm <= 256 * 1024 + 128);
  CHECK_TRUE("registry memory never below its creation size", mem_warm >= mem0);
  ttft_snapshot_free(s);

  long growth = rss_end - rss_warm;
  printf("test_soak: %llu events (%llu sequences, %llu tokens, %llu snapshots), RSS %ld KiB after "
         "warm-up, %ld KiB at the end (%+ld KiB), registry %zu bytes at creation, %zu after warm-up, %zu at the end\n",
         (unsigned long long)n_events, (unsigned long long)begun, (unsigned long long)tokens,
         (unsigned long long)snapshots, rss_warm, rss_end, growth, mem0, mem_warm, mem_end);
  if (rss_warm < 0 || rss_end < 0) {
    fprintf(stderr, "cannot read /proc/self/statm\n");
    g_failures++;
  } else if (UNDER_ASAN) {
    printf("test_soak: built with AddressSanitizer: RSS bound not checked (quarantine)\n");
  } else if (growth > RSS_NOISE_KIB) {
    fprintf(stderr, "RSS grew by %ld KiB (allowed %d)\n", growth, RSS_NOISE_KIB);
    g_failures++;
  }
  ttft_registry_free(r);
  free(buf);
  if (g_failures) {
    fprintf(stderr, "test_soak: %d failure(s)\n", g_failures);
    return 1;
  }
  printf("test_soak: ok\n");
  return 0;
}
