/*
 * replica.c — one replica of the fleet test (fleet_test.py): an "inference
 * server" that records a synthetic workload through the public hooks with
 * caller timestamps, serves it on /metrics (ttft_http_start, port 0), and
 * keeps every TTFT, TPOT, ITL and E2E value it recorded (with its class)
 * so the test can compute the exact quantiles of the union of all
 * replicas, over the whole run and over windows of it.
 *
 * Each replica id has its own shape of traffic, so the union is not three
 * copies of one distribution:
 *   0  "steady chat":    TTFT lognormal (median 250 ms, sigma 0.5), gaps
 *                        lognormal (30 ms, 0.3) with 1 % stalls of 0.6-2 s,
 *                        20..300 tokens; two streams left stalled in flight
 *   1  "prefix cache":   TTFT bimodal (60 % hits ~60 ms, 40 % misses
 *                        ~1.2 s), gaps lognormal (45 ms, 0.5), speculative
 *                        emissions of 1-4 tokens, 50..800 tokens
 *   2  "overloaded":     TTFT = Pareto queue (alpha 1.5 from 100 ms, capped at
 *                        60 s) + prefill lognormal (400 ms); gaps 90 %
 *                        ~25 ms, 10 % ~120 ms (batch interference); 10..2000
 *                        tokens; cancellations, abandonment before the first
 *                        token, and one begin refused per round (a full
 *                        registry)
 * Classes "chat" (SLO TTFT 500 ms, TPOT 60 ms, stall 400 ms) and "batch"
 * (TTFT 5 s, the registry's default stall budget 500 ms), model
 * "fleet-test-8b", start_point "server_arrival", token_point "sse_flush",
 * constant label viewpoint="engine". The attainment objectives are the
 * rules' (deploy/prometheus/ttft.rules.yml): batch 95 %, every other
 * class ("chat", "default") 99 %.
 * Engine steps and stall causes: the replica drives engine steps
 * (ttft_engine_step) and preemption marks interleaved with its streams,
 * around each stall (a gap above the class's stall budget): before the
 * token that closes the gap (a, b] it reports the engine's 16 decode steps
 * that ended just before a (the ones that produced the stream's recent
 * tokens, which the rule reads for the stream's usual step), then what
 * happened inside the gap, with a cause drawn from a random stream of its
 * own (so the recorded values are those of a replica without steps):
 *   prefill        25 %  another request's prefill in one long step (or two
 *                        chunks), maybe after one decode step without the
 *                        stream
 *   preempted      15 %  PREEMPTED at 2-40 % of the gap; decode steps of
 *                        the others; RESUMED and the stream's own recompute
 *                        (a prefill step of 5-25 % of the gap) at the end
 *   not_scheduled  20 %  decode steps without the stream all through the
 *                        gap (30 %: one short prefill chunk among them, at
 *                        most 25 % of the gap)
 *   slow_step      15 %  one decode step with the stream (every generating
 *                        stream is in every step) that lasts the gap, many
 *                        times the usual step (30 %: after 5-25 % of the
 *                        gap with no step, host contention first)
 *   engine_idle    15 %  a freeze of 55-90 % of the gap with decode steps
 *                        around it (25 %: also PREEMPTED in its first half,
 *                        a freeze during a preemption)
 *   unknown        10 %  no step reported inside the gap
 * (docs/metrics.md's meaning of each cause), then reads the cause the
 * library gave the stall (ttft_seq_stats, last_stall_cause): the CAUS
 * section counts each stall by (injected, attributed) cause. Every round
 * also records 600 steps outside any stall (30 % carry prefill) on a
 * stretch of the caller clock of their own, before any stream's (they end
 * before 1000 s, streams begin at 1000 s); a stall's cause never reads
 * them (its 16 steps before the gap come first).
 *
 * protocol (stdin, one command a line; answers on stdout):
 *   at start   prints "port <n>" once /metrics is served
 *   round [S]  records one more round, every duration scaled by S (default
 *              1: S < 1 and S > 1 give new minima and maxima), prints
 *              "ok <rounds>"
 *   dump PATH  writes the exact values: "TTFV", then for TTFT, TPOT, ITL,
 *              E2E a little-endian uint64 count and that many uint64 ns
 *              values in the order recorded, bit 63 set for class batch;
 *              then "SLOC" and per class (chat, batch) three uint64: the
 *              ended streams, those the SLO judges, the good ones;
 *              then "CNTS": the registry's counters, totals ("*") then
 *              per class (a uint64 entry count; per entry its name as a uint64 length and
 *              bytes, a uint64 K and K uint64 counters by ttft_counter);
 *              then tagged sections, each a 4-byte tag and its body (a
 *              reader that stops after CNTS still reads the above):
 *                "P95G" a value list (uint64 count, values as TTFV's, bit
 *                       63 = batch): each ended stream's own p95 gap, the
 *                       nearest rank ceil(0.95 g) of its g >= 1 gaps (SPEC
 *                       §1, docs/metrics.md SEQ_ITL_P95), in end order
 *                "ABWT" a value list: the waits of the streams cancelled
 *                       before their first token (ABANDONED_WAIT)
 *                "STLL" per class (chat, batch) two uint64: the gaps above
 *                       the class's stall budget (chat 400 ms, batch the
 *                       registry's default 500 ms) and their summed length
 *                       in ns (llm_stall_seconds_total: the whole gap)
 *                "PFXC" a value list: the TTFT of each stream that
 *                       reported its prefix cache (replica 1), bit 62 set
 *                       for a hit (the others are misses)
 *                "STEP" a value list: the engine steps' durations (bit 62
 *                       set: the step carried prefill)
 *                "CAUS" per class (chat, batch), per injected cause, per
 *                       attributed cause (ttft_stall_cause order each):
 *                       two uint64, the stalls and their summed gaps (ns)
 *                "STCA" per class (chat, batch), per cause: the library's
 *                       ttft_snapshot_stalls_by_cause and
 *                       ttft_snapshot_stall_seconds_by_cause (ns)
 *                "MEMB" one uint64: ttft_registry_memory() now
 *                "INFO" three strings (uint64 length, bytes): the
 *                       configured start_point, token_point, and
 *                       ttft_version_string()
 *              prints "dumped <n_ttft> <n_tpot> <n_itl> <n_e2e>"
 *   quit, EOF  stops and exits 0
 * Exits by itself after 240 s (SIGALRM) so a killed driver leaves nothing.
 *
 * First scrapes (issue 32.2): `first MODE PORT` is a replica whose first
 * requests end right after its start, model "first-MODE", one class
 * "chat" (stall budget 500 ms), /metrics on 127.0.0.1:PORT:
 *   eager  the registry, its class and the endpoint at start-up (what
 *          docs/integration.md recommends): the class is exported at zero
 *          before the first request, so its first sample holds none;
 *   lazy   the registry and the endpoint made on the first request (the
 *          1.2 docs' Shutdown recipe): the first sample Prometheus takes
 *          already holds the first requests, which rate() never counts.
 * protocol: at start "port <n>"; `burst N MEDIAN_MS` records N completed
 * streams of class chat (TTFT lognormal around MEDIAN_MS, sigma 0.3; the
 * lazy replica makes its registry and endpoint at its first burst) and
 * prints "ok <streams so far>"; `dump PATH` writes every TTFT recorded,
 * in ns, one a line, and prints "dumped <n>"; quit/EOF stops.
 *
 * usage: ttft-prom-replica ID [SCHEMA]     (SCHEMA: native_schema, default 7)
 *        ttft-prom-replica first eager|lazy PORT
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ttft.h"

/* --------------------------------------------------------- randomness */
static uint64_t g_rng;
static uint64_t rnd(void) { /* splitmix64 */
  uint64_t z = (g_rng += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}
static double unit(void) { return ((double)(rnd() >> 11) + 0.5) * 0x1.0p-53; } /* (0,1) */
static double normal(void) { return sqrt(-2.0 * log(unit())) * cos(6.283185307179586 * unit()); }
static uint64_t lognormal_ns(double median_s, double sigma) {
  return (uint64_t)(median_s * exp(sigma * normal()) * 1e9) + 1;
}
static uint64_t uniform(uint64_t lo, uint64_t hi) { return lo + rnd() % (hi - lo + 1); }

/* ------------------------------------------------------- exact values */
typedef struct vec {
  uint64_t *v;
  size_t n, cap;
} vec;
static vec g_ttft, g_tpot, g_itl, g_e2e;
static vec g_p95, g_abwait, g_pfx, g_steps; /* P95G, ABWT, PFXC, STEP of the dump */
#define BATCH_BIT (UINT64_C(1) << 63) /* the value's class is batch */
#define FLAG_BIT (UINT64_C(1) << 62)  /* PFXC: a prefix-cache hit; STEP: prefill */
/* per class (0 chat, 1 batch): the gaps above its stall budget, their ns */
static uint64_t g_stalls[2], g_stalled_ns[2];
static const uint64_t g_stall_budget[2] = {400000000, 500000000};
/* per class (0 chat, 1 batch): ended streams, those the SLO judges, the
 * good ones — the verdict of docs/metrics.md, worked out here from the
 * stream's own numbers */
static uint64_t g_ended[2], g_judged[2], g_good[2];
static uint64_t g_budget_ttft[2] = {500000000, 5000000000u}, g_budget_tpot[2] = {60000000, 0};

static void verdict(int batch, ttft_status st, uint64_t ttft, int has_tpot, uint64_t tpot) {
  int within = ttft <= g_budget_ttft[batch] &&
               (!g_budget_tpot[batch] || !has_tpot || tpot <= g_budget_tpot[batch]);
  g_ended[batch]++;
  if (st != TTFT_CANCELLED || !within) g_judged[batch]++;
  if (st == TTFT_COMPLETED && within) g_good[batch]++;
}

static void push(vec *a, uint64_t x) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? 2 * a->cap : 4096;
    uint64_t *p = realloc(a->v, cap * sizeof *p);
    if (!p) {
      fprintf(stderr, "replica: out of memory\n");
      exit(1);
    }
    a->v = p, a->cap = cap;
  }
  a->v[a->n++] = x;
}

/* ----------------------------------------------------------- workload */
#define START_POINT "server_arrival"
#define TOKEN_POINT "sse_flush"

static ttft_registry *g_r;
static int g_id, g_chat, g_batch;
static uint64_t g_t = UINT64_C(1000000000000); /* caller clock, ns */
static unsigned g_rounds;
static double g_scale = 1.0; /* every duration of this round, scaled */
static uint64_t scaled(uint64_t ns) { return (uint64_t)((double)ns * g_scale) + 1; }

typedef struct plan {
  uint64_t ttft;    /* 0: abandoned before the first token */
  unsigned tokens;  /* total tokens when it completes      */
  ttft_status end;  /* how it ends                         */
  unsigned stop_at; /* CANCELLED after this many tokens    */
  int class_id;
} plan;

static uint64_t gap(void) {
  switch (g_id) {
  case 0: return scaled(unit() < 0.01 ? uniform(600000000, 2000000000) : lognormal_ns(0.030, 0.3));
  case 1: return scaled(lognormal_ns(0.045, 0.5));
  default: return scaled(unit() < 0.9 ? lognormal_ns(0.025, 0.2) : lognormal_ns(0.120, 0.6));
  }
}

static plan make_plan(void) {
  plan p;
  memset(&p, 0, sizeof p);
  p.end = TTFT_COMPLETED;
  p.class_id = unit() < 0.7 ? g_chat : g_batch;
  switch (g_id) {
  case 0:
    p.ttft = lognormal_ns(0.250, 0.5);
    p.tokens = (unsigned)uniform(20, 300);
    break;
  case 1:
    p.ttft = unit() < 0.6 ? lognormal_ns(0.060, 0.3) : lognormal_ns(1.2, 0.4);
    p.tokens = (unsigned)uniform(50, 800);
    break;
  default: {
    double q = 0.1 / pow(unit(), 1.0 / 1.5); /* Pareto, seconds */
    if (q > 60.0) q = 60.0;
    p.ttft = (uint64_t)(q * 1e9) + lognormal_ns(0.400, 0.5);
    p.tokens = (unsigned)exp(log(10.0) + unit() * (log(2000.0) - log(10.0)));
    double u = unit();
    if (u < 0.03) p.ttft = 0, p.end = TTFT_CANCELLED;           /* abandoned */
    else if (u < 0.08) p.end = TTFT_CANCELLED, p.stop_at = 1 + (unsigned)(unit() * p.tokens);
    else if (u < 0.09) p.end = TTFT_ERROR, p.stop_at = 1 + (unsigned)(unit() * p.tokens);
    break;
  }
  }
  if (p.stop_at > p.tokens) p.stop_at = p.tokens;
  if (p.ttft) p.ttft = scaled(p.ttft);
  return p;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* ------------------------------------------------ engine steps, causes
 * The header comment: the steps around each stall, from a random stream
 * of their own (g_erng), so that the workload's values do not move. */
static uint64_t g_erng = UINT64_C(0xE61E0000);
static uint64_t ernd(void) { /* splitmix64 */
  uint64_t z = (g_erng += UINT64_C(0x9E3779B97F4A7C15));
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}
static double eunit(void) { return ((double)(ernd() >> 11) + 0.5) * 0x1.0p-53; }
static double ebetween(double lo, double hi) { return lo + (hi - lo) * eunit(); }
static uint64_t elognormal_ns(uint64_t median_ns, double sigma) {
  double z = sqrt(-2.0 * log(eunit())) * cos(6.283185307179586 * eunit());
  return (uint64_t)((double)median_ns * exp(sigma * z)) + 1;
}

#define HOST_NS UINT64_C(100000) /* the host's time between two steps */
/* per class, injected cause, attributed cause: stalls and their gaps (ns) */
static uint64_t g_cause_n[2][TTFT_STALL_CAUSE_COUNT][TTFT_STALL_CAUSE_COUNT];
static uint64_t g_cause_ns[2][TTFT_STALL_CAUSE_COUNT][TTFT_STALL_CAUSE_COUNT];

static void mark(ttft_seq s, ttft_phase phase, uint64_t t) {
  if (ttft_mark(g_r, s, phase, t) != TTFT_OK) {
    fprintf(stderr, "replica %d: ttft_mark failed\n", g_id);
    exit(1);
  }
}

static void step(uint64_t t0, uint64_t t1, uint32_t prefill_tokens) {
  ttft_step_info info;
  ttft_step_info_init(&info);
  info.prefill_tokens = prefill_tokens;
  info.decode_seqs = (uint32_t)(1 + ernd() % 64);
  if (t1 <= t0) t1 = t0 + 1;
  if (ttft_engine_step(g_r, &info, t0, t1) != TTFT_OK) {
    fprintf(stderr, "replica %d: ttft_engine_step failed\n", g_id);
    exit(1);
  }
  push(&g_steps, (t1 - t0) | (prefill_tokens ? FLAG_BIT : 0));
}

/* decode steps (no prefill) of about u each, back to back from t0, the
 * last one cut to end at t1; nothing when t1 <= t0 */
static void decode_steps(uint64_t t0, uint64_t t1, uint64_t u) {
  uint64_t t = t0;
  while (t < t1) {
    uint64_t d = elognormal_ns(u, 0.2);
    if (t + d + HOST_NS >= t1) d = t1 - t;
    step(t, t + d, 0);
    t += d + HOST_NS;
  }
}

/* the replica's usual decode step (its gaps' median), this round */
static uint64_t usual_step(void) {
  return scaled(g_id == 0 ? 30000000 : g_id == 1 ? 45000000 : 25000000);
}

/* What the engine did before and during the stall (a, b] of s: steps and
 * marks for a cause drawn here (the header comment). Returns the cause. */
static ttft_stall_cause stall_engine(ttft_seq s, uint64_t a, uint64_t b) {
  const uint64_t D = b - a, u = usual_step();
  uint64_t ctx[16], total = 0;
  for (int i = 0; i < 16; i++) total += (ctx[i] = elognormal_ns(u, 0.2)) + HOST_NS;
  uint64_t t = a - HOST_NS / 2 - total; /* the last one ends just before a */
  for (int i = 0; i < 16; i++) step(t, t + ctx[i], 0), t += ctx[i] + HOST_NS;
  const double x = eunit();
  const uint64_t t_in = a + HOST_NS, t_out = b - HOST_NS; /* the gap's busy span */
  if (x < 0.25) { /* prefill: another request's prompt in one long step or two chunks */
    t = t_in;
    if (eunit() < 0.5) { /* one decode step without the stream first */
      uint64_t d = elognormal_ns(u, 0.2);
      if (d > D / 4) d = D / 4;
      step(t, t + d, 0);
      t += d + HOST_NS;
    }
    uint32_t tokens = (uint32_t)(2048 + ernd() % 14336);
    if (eunit() < 0.3) {
      uint64_t mid = t + (uint64_t)((double)(t_out - t) * ebetween(0.4, 0.6));
      step(t, mid, tokens / 2);
      step(mid + HOST_NS, t_out, tokens - tokens / 2);
    } else {
      step(t, t_out, tokens);
    }
    return TTFT_STALL_PREFILL;
  }
  if (x < 0.40) { /* preempted under KV pressure, resumed with a recompute */
    uint64_t tp = a + (uint64_t)((double)D * ebetween(0.02, 0.40));
    uint64_t rc = (uint64_t)((double)D * ebetween(0.05, 0.25));
    uint64_t t_res = t_out - rc;
    mark(s, TTFT_PHASE_PREEMPTED, tp);
    decode_steps(t_in, t_res - HOST_NS, u);
    mark(s, TTFT_PHASE_RESUMED, t_res);
    step(t_res, t_out, (uint32_t)(256 + ernd() % 8192)); /* its own context again */
    return TTFT_STALL_PREEMPTED;
  }
  if (x < 0.60) { /* not scheduled: the others' decodes, maybe one short chunk */
    if (eunit() < 0.3) {
      uint64_t len = (uint64_t)((double)D * ebetween(0.05, 0.25));
      uint64_t at = t_in + (uint64_t)((double)(D - len - 4 * HOST_NS) * eunit());
      decode_steps(t_in, at - HOST_NS, u);
      step(at, at + len, (uint32_t)(256 + ernd() % 2048));
      decode_steps(at + len + HOST_NS, t_out, u);
    } else {
      decode_steps(t_in, t_out, u);
    }
    return TTFT_STALL_NOT_SCHEDULED;
  }
  if (x < 0.75) { /* slow step: the stream was in it, the step itself was slow */
    uint64_t t0 = t_in;
    if (eunit() < 0.3) t0 += (uint64_t)((double)D * ebetween(0.05, 0.25));
    step(t0, t_out, 0);
    return TTFT_STALL_SLOW_STEP;
  }
  if (x < 0.90) { /* engine idle: the process froze for most of the gap */
    double f = ebetween(0.55, 0.90), h = ebetween(0.0, 0.95 - f);
    uint64_t fs = a + (uint64_t)((double)D * h), fe = fs + (uint64_t)((double)D * f);
    if (eunit() < 0.25) /* frozen during a preemption */
      mark(s, TTFT_PHASE_PREEMPTED, a + (uint64_t)((double)D * ebetween(0.02, 0.45)));
    decode_steps(t_in, fs, u);
    decode_steps(fe, t_out, u);
    return TTFT_STALL_ENGINE_IDLE;
  }
  return TTFT_STALL_UNKNOWN; /* no step reported inside the gap */
}

/* Play one begun sequence to its end; record the exact values as the
 * library defines them (docs/metrics.md). */
static void play(ttft_seq s, uint64_t t_begin, const plan *p, int prefix_hit) {
  static uint64_t gaps[4096]; /* this stream's gaps (at most 1999) */
  size_t ng = 0;
  uint64_t t = t_begin, cls = p->class_id == g_batch ? BATCH_BIT : 0;
  if (!p->ttft) { /* abandoned: waited, then the client went away */
    uint64_t wait = scaled(lognormal_ns(3.0, 0.5));
    ttft_stream_end(g_r, s, TTFT_CANCELLED, t + wait);
    push(&g_e2e, wait | cls);
    push(&g_abwait, wait | cls);
    verdict(cls != 0, TTFT_CANCELLED, wait, 0, 0); /* no token: TTFT budget vs the wait */
    return;
  }
  unsigned limit = p->stop_at ? p->stop_at : p->tokens;
  t += p->ttft;
  ttft_token_emitted(g_r, s, 1, t);
  push(&g_ttft, p->ttft | cls);
  if (prefix_hit >= 0) push(&g_pfx, p->ttft | cls | (prefix_hit ? FLAG_BIT : 0));
  uint64_t t_first = t;
  unsigned n = 1;
  while (n < limit) {
    unsigned k = g_id == 1 ? (unsigned)uniform(1, 4) : 1; /* speculative steps */
    if (k > limit - n) k = limit - n;
    uint64_t d = gap();
    const int stall = d > g_stall_budget[cls != 0];
    ttft_stall_cause injected = stall ? stall_engine(s, t, t + d) : TTFT_STALL_UNKNOWN;
    t += d;
    ttft_token_emitted(g_r, s, k, t);
    push(&g_itl, d | cls);
    if (ng < sizeof gaps / sizeof gaps[0]) gaps[ng++] = d;
    if (stall) {
      g_stalls[cls != 0]++, g_stalled_ns[cls != 0] += d;
      ttft_seq_info info;
      memset(&info, 0, sizeof info);
      info.struct_size = sizeof info;
      if (ttft_seq_stats(g_r, s, &info) != TTFT_OK || info.last_stall_cause < 0 ||
          info.last_stall_cause >= TTFT_STALL_CAUSE_COUNT) {
        fprintf(stderr, "replica %d: no stall cause after a stall\n", g_id);
        exit(1);
      }
      g_cause_n[cls != 0][injected][info.last_stall_cause]++;
      g_cause_ns[cls != 0][injected][info.last_stall_cause] += d;
    }
    n += k;
  }
  if (ng) { /* the stream's own p95 gap: nearest rank ceil(0.95 g) */
    qsort(gaps, ng, sizeof gaps[0], cmp_u64);
    push(&g_p95, gaps[(95 * ng + 99) / 100 - 1] | cls);
  }
  if (n >= 2) push(&g_tpot, ((t - t_first) / (n - 1)) | cls);
  ttft_stream_end(g_r, s, p->end, t + 1000);
  push(&g_e2e, (t + 1000 - t_begin) | cls);
  verdict(cls != 0, p->end, p->ttft, n >= 2, n >= 2 ? (t - t_first) / (n - 1) : 0);
}

/* A round's steps outside any stall, on their own stretch of the caller
 * clock (the header comment): they end before 1000 s, where the streams
 * begin. From the workload's random stream, as before the stall steps. */
static uint64_t g_ts = UINT64_C(1000000000);
static void engine_steps(void) {
  for (int i = 0; i < 600; i++) {
    ttft_step_info info;
    ttft_step_info_init(&info);
    int prefill = unit() < 0.3;
    info.prefill_tokens = prefill ? (uint32_t)uniform(256, 8192) : 0;
    info.decode_seqs = (uint32_t)uniform(1, 64);
    uint64_t d = prefill ? scaled(lognormal_ns(0.150, 0.5)) : scaled(lognormal_ns(0.020, 0.3));
    if (g_ts + d + 1000 >= UINT64_C(1000000000000)) {
      fprintf(stderr, "replica %d: engine steps reached the streams' clock\n", g_id);
      exit(1);
    }
    if (ttft_engine_step(g_r, &info, g_ts, g_ts + d) != TTFT_OK) {
      fprintf(stderr, "replica %d: ttft_engine_step failed\n", g_id);
      exit(1);
    }
    push(&g_steps, d | (prefill ? FLAG_BIT : 0));
    g_ts += d + 1000;
  }
}

static unsigned round_size(void) { return g_id == 0 ? 700 : g_id == 1 ? 450 : 500; }

static void one_round(void) {
  enum { BLOCK = 250 };
  unsigned total = round_size(), done = 0;
  while (done < total) {
    unsigned k = total - done < BLOCK ? total - done : BLOCK;
    ttft_seq seqs[BLOCK];
    uint64_t t0[BLOCK];
    plan plans[BLOCK];
    int hit[BLOCK];
    for (unsigned i = 0; i < k; i++) { /* begin a block, as a busy server would */
      ttft_request req;
      ttft_request_init(&req);
      plans[i] = make_plan();
      req.class_id = plans[i].class_id;
      req.prefix_hit = g_id == 1 ? (plans[i].ttft < 300000000) : -1;
      hit[i] = req.prefix_hit;
      req.prompt_tokens = (uint32_t)uniform(64, 20000);
      t0[i] = g_t;
      g_t += 1000;
      seqs[i] = ttft_begin_ex(g_r, &req, t0[i]);
    }
    if (g_id == 2 && done == 0) (void)ttft_begin(g_r, g_t); /* refused: registry full */
    for (unsigned i = 0; i < k; i++) {
      if (!seqs[i]) {
        fprintf(stderr, "replica %d: begin refused unexpectedly\n", g_id);
        exit(1);
      }
      play(seqs[i], t0[i], &plans[i], hit[i]);
    }
    done += k;
  }
  g_t += UINT64_C(1000000000);
  g_rounds++;
  engine_steps();
}

static int put_u64(FILE *f, uint64_t v) { /* little-endian; 1 on error */
  unsigned char b[8];
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
  return fwrite(b, 1, 8, f) != 8;
}

static int put_list(FILE *f, const char *tag, const vec *a) { /* 1 on error */
  int bad = fwrite(tag, 1, 4, f) != 4;
  bad |= put_u64(f, a->n);
  for (size_t j = 0; j < a->n; j++) bad |= put_u64(f, a->v[j]);
  return bad;
}

static int put_str(FILE *f, const char *str) { /* 1 on error */
  size_t len = strlen(str);
  return put_u64(f, len) | (len && fwrite(str, 1, len, f) != len);
}

static int dump(const char *path) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int bad = fwrite("TTFV", 1, 4, f) != 4;
  const vec *vs[4] = {&g_ttft, &g_tpot, &g_itl, &g_e2e};
  for (int m = 0; m < 4; m++) {
    unsigned char b[8];
    uint64_t n = vs[m]->n;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(n >> (8 * i));
    bad |= fwrite(b, 1, 8, f) != 8;
    for (size_t j = 0; j < vs[m]->n; j++) {
      for (int i = 0; i < 8; i++) b[i] = (unsigned char)(vs[m]->v[j] >> (8 * i));
      bad |= fwrite(b, 1, 8, f) != 8;
    }
  }
  /* then "SLOC" and per class (chat, batch): ended, judged, good */
  bad |= fwrite("SLOC", 1, 4, f) != 4;
  for (int c = 0; c < 2; c++) {
    const uint64_t v3[3] = {g_ended[c], g_judged[c], g_good[c]};
    for (int k = 0; k < 3; k++) {
      unsigned char b[8];
      for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v3[k] >> (8 * i));
      bad |= fwrite(b, 1, 8, f) != 8;
    }
  }
  /* then "CNTS": the registry's own counters per class, for the
   * dashboard's counter panels: a uint64 class count, then per class its
   * name (uint64 length, bytes), a uint64 K and K counters by ttft_counter */
  ttft_snapshot *s = ttft_snapshot_take(g_r);
  if (!s) {
    fclose(f);
    return -1;
  }
  int nc = ttft_snapshot_classes(s);
  bad |= fwrite("CNTS", 1, 4, f) != 4;
  bad |= put_u64(f, (uint64_t)nc + 1);
  for (int c = -1; c < nc; c++) { /* first "*": the registry's totals */
    const char *name = c < 0 ? "*" : ttft_snapshot_class_name(s, c);
    size_t len = name ? strlen(name) : 0;
    bad |= put_u64(f, len);
    if (len) bad |= fwrite(name, 1, len, f) != len;
    bad |= put_u64(f, TTFT_COUNTER_COUNT_);
    for (int k = 0; k < TTFT_COUNTER_COUNT_; k++)
      bad |= put_u64(f, c < 0 ? ttft_snapshot_counter(s, (ttft_counter)k)
                              : ttft_snapshot_class_counter(s, c, (ttft_counter)k));
  }
  /* then the tagged sections of the header comment */
  bad |= put_list(f, "P95G", &g_p95);
  bad |= put_list(f, "ABWT", &g_abwait);
  bad |= fwrite("STLL", 1, 4, f) != 4;
  for (int c = 0; c < 2; c++) bad |= put_u64(f, g_stalls[c]) | put_u64(f, g_stalled_ns[c]);
  bad |= put_list(f, "PFXC", &g_pfx);
  bad |= put_list(f, "STEP", &g_steps);
  bad |= fwrite("CAUS", 1, 4, f) != 4;
  for (int c = 0; c < 2; c++)
    for (int i = 0; i < TTFT_STALL_CAUSE_COUNT; i++)
      for (int j = 0; j < TTFT_STALL_CAUSE_COUNT; j++)
        bad |= put_u64(f, g_cause_n[c][i][j]) | put_u64(f, g_cause_ns[c][i][j]);
  bad |= fwrite("STCA", 1, 4, f) != 4;
  for (int c = 0; c < 2; c++)
    for (int k = 0; k < TTFT_STALL_CAUSE_COUNT; k++)
      bad |= put_u64(f, ttft_snapshot_stalls_by_cause(s, c == 0 ? g_chat : g_batch, (ttft_stall_cause)k)) |
             put_u64(f, ttft_snapshot_stall_seconds_by_cause(s, c == 0 ? g_chat : g_batch,
                                                            (ttft_stall_cause)k));
  ttft_snapshot_free(s);
  bad |= fwrite("MEMB", 1, 4, f) != 4;
  bad |= put_u64(f, ttft_registry_memory(g_r));
  bad |= fwrite("INFO", 1, 4, f) != 4;
  bad |= put_str(f, START_POINT) | put_str(f, TOKEN_POINT) | put_str(f, ttft_version_string());
  bad |= fclose(f) != 0;
  return bad ? -1 : 0;
}

/* ------------------------------------------------- first scrapes (32.2) */
static ttft_http *g_first_srv;

static int first_registry(const char *mode, const char *addr) {
  char model[32];
  snprintf(model, sizeof model, "first-%s", mode);
  ttft_config c;
  ttft_config_init(&c);
  c.model = model;
  g_r = ttft_registry_new(&c);
  if (!g_r) return -1;
  g_chat = ttft_class_add(g_r, "chat", NULL);
  if (g_chat < 0) return -1;
  int rc = ttft_http_start(g_r, addr, &g_first_srv);
  if (rc != TTFT_OK) fprintf(stderr, "replica first %s: ttft_http_start %s: %s\n", mode, addr, ttft_strerror(rc));
  return rc == TTFT_OK ? 0 : -1;
}

static int first_main(const char *mode, const char *port) {
  const int lazy = strcmp(mode, "lazy") == 0;
  if (!lazy && strcmp(mode, "eager") != 0) return 2;
  char addr[64];
  snprintf(addr, sizeof addr, "127.0.0.1:%s", port);
  g_rng = UINT64_C(0xF1257000) + (uint64_t)lazy;
  if (!lazy && first_registry(mode, addr) != 0) return 1;
  printf("port %s\n", port);
  fflush(stdout);
  char line[4096];
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\r\n")] = '\0';
    unsigned n = 0, med = 0;
    if (sscanf(line, "burst %u %u", &n, &med) == 2 && n > 0 && n <= 100000 && med > 0) {
      if (!g_r && first_registry(mode, addr) != 0) return 1;
      for (unsigned i = 0; i < n; i++) {
        ttft_request q;
        ttft_request_init(&q);
        q.class_id = g_chat;
        uint64_t ttft = lognormal_ns(med / 1000.0, 0.3);
        ttft_seq sq = ttft_begin_ex(g_r, &q, g_t);
        if (!sq || ttft_token_emitted(g_r, sq, 1, g_t + ttft) != TTFT_OK ||
            ttft_stream_end(g_r, sq, TTFT_COMPLETED, g_t + ttft + 1000) != TTFT_OK)
          return 1;
        push(&g_ttft, ttft);
        g_t += ttft + 2000;
      }
      printf("ok %zu\n", g_ttft.n);
    } else if (strncmp(line, "dump ", 5) == 0) {
      FILE *f = fopen(line + 5, "w");
      int bad = !f;
      for (size_t j = 0; f && j < g_ttft.n; j++) bad |= fprintf(f, "%llu\n", (unsigned long long)g_ttft.v[j]) < 0;
      if (f) bad |= fclose(f) != 0;
      if (bad) printf("error dump %s\n", line + 5);
      else printf("dumped %zu\n", g_ttft.n);
    } else if (strcmp(line, "quit") == 0) {
      break;
    } else {
      printf("error unknown command\n");
    }
    fflush(stdout);
  }
  ttft_http_stop(g_first_srv);
  ttft_registry_free(g_r);
  free(g_ttft.v);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "first") == 0) {
    alarm(240);
    return first_main(argv[2], argv[3]);
  }
  if (argc < 2) {
    fprintf(stderr, "usage: %s ID [SCHEMA]\n", argv[0]);
    return 2;
  }
  g_id = atoi(argv[1]) % 3;
  g_rng = UINT64_C(0x5EED0000) + (uint64_t)g_id;
  alarm(240);

  /* the same on every replica: a registry-level label (the engine view of
   * docs/prometheus.md's two-view pattern) that the rules keep while they
   * sum over instances */
  ttft_label lbl = {"viewpoint", "engine"};
  ttft_config c;
  ttft_config_init(&c);
  c.model = "fleet-test-8b";
  c.start_point = START_POINT;
  c.token_point = TOKEN_POINT;
  c.const_labels = &lbl;
  c.n_const_labels = 1;
  if (argc > 2) c.native_schema = atoi(argv[2]);
  if (g_id == 2) c.max_inflight = 250; /* the first block fills it: one refusal a round */
  g_r = ttft_registry_new(&c);
  if (!g_r) {
    fprintf(stderr, "replica: registry_new failed\n");
    return 1;
  }
  ttft_slo chat, batch;
  ttft_slo_init(&chat);
  chat.ttft_ns = 500000000;
  chat.tpot_ns = 60000000;
  chat.stall_threshold_ns = 400000000;
  ttft_slo_init(&batch);
  batch.ttft_ns = 5000000000u;
  g_chat = ttft_class_add(g_r, "chat", &chat);
  g_batch = ttft_class_add(g_r, "batch", &batch);
  if (g_chat < 0 || g_batch < 0) {
    fprintf(stderr, "replica: class_add failed\n");
    return 1;
  }
  one_round();

  if (g_id == 0) { /* stuck right now: a live stall the dashboard must show */
    /* the stream began 20 s ago: on a machine up for less than that the
     * monotonic clock has no such past (the subtraction would wrap), so
     * wait until it has */
    while (ttft_now_ns() < UINT64_C(21000000000)) {
      struct timespec tenth = {0, 100000000};
      nanosleep(&tenth, NULL);
    }
    uint64_t now = ttft_now_ns();
    for (int i = 0; i < 2; i++) {
      ttft_request req;
      ttft_request_init(&req);
      req.class_id = g_chat;
      ttft_seq q = ttft_begin_ex(g_r, &req, now - UINT64_C(20000000000));
      ttft_token_emitted(g_r, q, 1, now - UINT64_C(10000000000));
      push(&g_ttft, UINT64_C(10000000000)); /* its first token is a TTFT */
    }
  }

  ttft_http *srv = NULL;
  int rc = ttft_http_start(g_r, "127.0.0.1:0", &srv);
  if (rc != TTFT_OK) {
    fprintf(stderr, "ttft_http_start: %s\n", ttft_strerror(rc));
    return 1;
  }
  printf("port %d\n", ttft_http_port(srv));
  fflush(stdout);

  char line[4096];
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (strcmp(line, "round") == 0 || strncmp(line, "round ", 6) == 0) {
      g_scale = line[5] ? atof(line + 6) : 1.0;
      if (!(g_scale > 0.0 && g_scale < 100.0)) g_scale = 1.0;
      one_round();
      printf("ok %u\n", g_rounds);
    } else if (strncmp(line, "dump ", 5) == 0) {
      if (dump(line + 5) == 0)
        printf("dumped %zu %zu %zu %zu\n", g_ttft.n, g_tpot.n, g_itl.n, g_e2e.n);
      else
        printf("error dump %s\n", line + 5);
    } else if (strcmp(line, "quit") == 0) {
      break;
    } else {
      printf("error unknown command\n");
    }
    fflush(stdout);
  }
  ttft_http_stop(srv);
  ttft_registry_free(g_r);
  free(g_ttft.v);
  free(g_tpot.v);
  free(g_itl.v);
  free(g_e2e.v);
  free(g_p95.v);
  free(g_abwait.v);
  free(g_pfx.v);
  free(g_steps.v);
  return 0;
}
