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
#include "task.h"

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

/* The run: what the caller fed in, and what it measured along the way. */
typedef struct soak {
  ttft_registry *r;
  int chat;
  char *buf; /* 1 MiB for the formats */
  live w[WINDOW];
  uint64_t rs, t;
  uint64_t n_events, begun, completed, cancelled, errors, tokens;
  uint64_t firsts, gaps, stalls, abandoned, stale_ok, snapshots;
  ttft_seq stale;      /* the handle of the stream that ended last */
  long rss_warm;       /* KiB after the warm-up (-1: not yet) */
  size_t mem0, mem_warm;
} soak;

static uint64_t soak_events(void) {
  uint64_t events = 10000000ull;
  const char *env = getenv("TTFT_SOAK_EVENTS");
  if (env && *env) events = strtoull(env, NULL, 10);
  return events < 100000 ? 100000 : events;
}

/* The hooks' results are checked on every call, but counted only when
 * they fail (a pass per event would be 10^8 counts in CI's soak); a
 * failure ends the run (0 returned). */

/* a sequence begins in an empty window slot */
static int soak_begin(soak *k, live *l) {
  ttft_request req;
  ttft_request_init(&req);
  req.class_id = (rnd(&k->rs) & 1) ? k->chat : 0;
  req.prompt_tokens = (uint32_t)(rnd(&k->rs) % 200000);
  req.prefix_hit = (int)(rnd(&k->rs) % 3) - 1;
  l->h = ttft_begin_ex(k->r, &req, k->t);
  k->n_events++;
  if (!l->h) {
    fprintf(stderr, "begin refused after %llu events\n", (unsigned long long)k->n_events);
    EXPECT_TRUE(l->h != 0);
    return 0;
  }
  k->begun++;
  l->t = k->t;
  l->left = (uint32_t)(rnd(&k->rs) % 300);
  l->emitted = 0;
  return 1;
}

static int soak_emit(soak *k, live *l) {
  uint64_t jump = (rnd(&k->rs) % 1024 == 0) ? STALL_NS + 1 : 0;
  k->t += jump;
  uint32_t n = 1 + (uint32_t)(rnd(&k->rs) % 3);
  int rc = ttft_token_emitted(k->r, l->h, n, k->t);
  k->n_events++;
  if (rc != TTFT_OK) {
    EXPECT_ERR(TTFT_OK, rc);
    return 0;
  }
  if (l->emitted) {
    k->gaps++;
    if (k->t - l->t > STALL_NS) k->stalls++;
  } else {
    k->firsts++;
  }
  l->emitted++;
  l->left--;
  l->t = k->t;
  k->tokens += n;
  return 1;
}

static int soak_end(soak *k, live *l) {
  uint64_t x = rnd(&k->rs) % 16;
  ttft_status st = x == 0 ? TTFT_CANCELLED : x == 1 ? TTFT_ERROR : TTFT_COMPLETED;
  int rc = ttft_stream_end(k->r, l->h, st, k->t);
  k->n_events++;
  if (rc != TTFT_OK) {
    EXPECT_ERR(TTFT_OK, rc);
    return 0;
  }
  if (st == TTFT_CANCELLED) {
    k->cancelled++;
    if (!l->emitted) k->abandoned++;
  } else if (st == TTFT_ERROR) {
    k->errors++;
  } else {
    k->completed++;
  }
  /* every so often, check that an old handle is still refused */
  if (k->stale && ttft_token_emitted(k->r, k->stale, 1, k->t) != TTFT_ESTALE) k->stale_ok++;
  k->stale = l->h;
  l->h = 0;
  return 1;
}

/* a snapshot, one format, a delta against the previous one; the warm-up
 * RSS and registry memory once 1/20 of the events are done */
static int soak_snapshot(soak *k, ttft_snapshot **prev, uint64_t events) {
  ttft_snapshot *s = ttft_snapshot_take(k->r);
  EXPECT_NOT_NULL(s);
  if (!s) return 0;
  k->snapshots++;
  EXPECT_GT_INT(ttft_snapshot_format(s, (ttft_format)(k->snapshots % TTFT_FORMAT_COUNT_), k->buf, 1 << 20), 0);
  if (*prev) {
    int err = 1;
    ttft_snapshot *d = ttft_snapshot_delta(s, *prev, &err);
    EXPECT_ERR(TTFT_OK, err);
    EXPECT_NOT_NULL(d);
    ttft_snapshot_free(d);
    ttft_snapshot_free(*prev);
  }
  *prev = s;
  if (k->rss_warm < 0 && k->n_events >= events / 20) {
    k->rss_warm = rss_kib();
    k->mem_warm = ttft_registry_memory(k->r);
  }
  return 1;
}

/* events hook calls over the window, snapshots every SNAPSHOT_EVERY; then
 * every live stream ends, so that the final counts close */
static void soak_run(soak *k, uint64_t events) {
  ttft_snapshot *prev = NULL;
  uint64_t next_snap = SNAPSHOT_EVERY / 4;
  while (k->n_events < events) {
    live *l = &k->w[rnd(&k->rs) % WINDOW];
    k->t += 1 + rnd(&k->rs) % 4096;
    if (!l->h) {
      if (!soak_begin(k, l)) break;
      continue;
    }
    if (l->left) {
      if (!soak_emit(k, l)) break;
      continue;
    }
    if (!soak_end(k, l)) break;
    if (k->n_events >= next_snap) {
      next_snap += SNAPSHOT_EVERY;
      if (!soak_snapshot(k, &prev, events)) break;
    }
  }
  ttft_snapshot_free(prev);
  for (size_t i = 0; i < WINDOW; i++) {
    if (!k->w[i].h) continue;
    k->t += 1;
    EXPECT_ERR(TTFT_OK, ttft_stream_end(k->r, k->w[i].h, TTFT_COMPLETED, k->t));
    k->completed++;
  }
}

/* every counter and count is exactly what was fed in */
static void soak_check_counts(const soak *k, const ttft_snapshot *s) {
  EXPECT_EQ_U64(k->begun, ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN));
  EXPECT_EQ_U64(k->completed, ttft_snapshot_counter(s, TTFT_COUNTER_COMPLETED));
  EXPECT_EQ_U64(k->cancelled, ttft_snapshot_counter(s, TTFT_COUNTER_CANCELLED));
  EXPECT_EQ_U64(k->errors, ttft_snapshot_counter(s, TTFT_COUNTER_ERRORS));
  EXPECT_EQ_U64(k->abandoned, ttft_snapshot_counter(s, TTFT_COUNTER_ABANDONED));
  EXPECT_EQ_U64(0, ttft_snapshot_counter(s, TTFT_COUNTER_DROPPED));
  EXPECT_EQ_U64(k->tokens, ttft_snapshot_counter(s, TTFT_COUNTER_TOKENS));
  EXPECT_EQ_U64(k->stalls, ttft_snapshot_counter(s, TTFT_COUNTER_STALLS));
  EXPECT_EQ_U64(0, ttft_snapshot_counter(s, TTFT_COUNTER_CLOCK_CLAMPED));
  EXPECT_EQ_U64(k->firsts, ttft_snapshot_count(s, TTFT_METRIC_TTFT));
  EXPECT_EQ_U64(k->gaps, ttft_snapshot_count(s, TTFT_METRIC_ITL));
  EXPECT_EQ_U64(k->begun, ttft_snapshot_count(s, TTFT_METRIC_E2E));
  EXPECT_EQ_U64(k->tokens, ttft_snapshot_sum(s, TTFT_METRIC_OUTPUT_TOKENS));
  EXPECT_EQ_U64(0, ttft_snapshot_gauge(s, TTFT_GAUGE_INFLIGHT));
  EXPECT_EQ_U64(0, k->stale_ok); /* stale handles accepted */
}

/* One test: every check is about the same long run (10^7 events by
 * default, 10^8 in CI's soak step), and the memory checks compare its end
 * with its own warm-up; a run per check would multiply the soak's cost. */
TEST(long_run) {
  uint64_t events = soak_events();
  static soak k; /* the window is 12 KiB: off the stack */
  memset(&k, 0, sizeof k);
  k.rs = 0xC0FFEEull;
  k.t = 1000000000ull;
  k.rss_warm = -1;
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.max_inflight = WINDOW * 2;
  cfg.stall_threshold_ns = STALL_NS;
  k.r = ttft_registry_new(&cfg);
  EXPECT_NOT_NULL(k.r);
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 100000000;
  slo.tpot_ns = 1000000;
  k.chat = k.r ? ttft_class_add(k.r, "chat", &slo) : -1;
  EXPECT_EQ_INT(1, k.chat);
  k.buf = malloc(1 << 20);
  EXPECT_NOT_NULL(k.buf);
  if (!k.r || k.chat < 1 || !k.buf) {
    ttft_registry_free(k.r);
    free(k.buf);
    return;
  }
  k.mem0 = ttft_registry_memory(k.r);

  soak_run(&k, events);
  /* one more snapshot cycle at the end, so the "after" RSS includes one */
  ttft_snapshot *s = ttft_snapshot_take(k.r);
  EXPECT_NOT_NULL(s);
  long rss_end = rss_kib();
  if (k.rss_warm < 0) k.rss_warm = rss_end;
  if (!k.mem_warm) k.mem_warm = ttft_registry_memory(k.r);
  if (s) soak_check_counts(&k, s);
  ttft_snapshot_free(s);

  /* registry memory: never below its creation size; after the warm-up it
   * grows by at most one slab */
  size_t mem_end = ttft_registry_memory(k.r);
  EXPECT_GE_U64(k.mem_warm, k.mem0);
  EXPECT_GE_U64(mem_end, k.mem_warm);
  EXPECT_LE_U64(mem_end - k.mem_warm, 256 * 1024 + 128);

  long growth = rss_end - k.rss_warm;
  printf("test_soak: %llu events (%llu sequences, %llu tokens, %llu snapshots), RSS %ld KiB after "
         "warm-up, %ld KiB at the end (%+ld KiB), registry %zu bytes at creation, %zu after warm-up, %zu at the end\n",
         (unsigned long long)k.n_events, (unsigned long long)k.begun, (unsigned long long)k.tokens,
         (unsigned long long)k.snapshots, k.rss_warm, rss_end, growth, k.mem0, k.mem_warm, mem_end);
  EXPECT_GE_INT(k.rss_warm, 0); /* /proc/self/statm is readable */
  EXPECT_GE_INT(rss_end, 0);
  if (UNDER_ASAN)
    printf("test_soak: built with AddressSanitizer: RSS bound not checked (quarantine)\n");
  else if (k.rss_warm >= 0 && rss_end >= 0)
    EXPECT_LE_INT(growth, RSS_NOISE_KIB); /* KiB */
  ttft_registry_free(k.r);
  free(k.buf);
}

TU_MAIN()
