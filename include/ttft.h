/*
 * ttft.h — libttft: what a streaming LLM user feels, as honest percentiles.
 *
 * This header is the API reference. Every function states its parameters,
 * units, return value, thread-safety and what it does with NULL.
 *
 * It reads in three tiers, like zstd.h:
 *   1. The hooks and a first report — everything a first integration needs.
 *   2. Snapshots and queries — per class, per status, splits, live state.
 *   3. Setup — configuration, classes and SLOs, memory, clocks, snapshots
 *      that travel (encode, merge, delta) and the /metrics endpoint.
 * Everything is stable within the major version (struct_size lets the
 * structs grow; enums only gain values, tests/abi checks both).
 *
 * Vocabulary (docs/metrics.md has the full definitions and edge cases):
 *   TTFT   time to first token      = t_first - t_begin
 *   ITL    inter-token latency      = t_k - t_{k-1}, one per emission after the first
 *   TPOT   time per output token    = (t_last - t_first) / (N - 1), at stream end, N >= 2
 *   E2E    end-to-end               = t_end - t_begin
 *   stall  an ITL gap above the stall budget of the sequence's class
 *
 * Units: every time in this API is an unsigned 64-bit count of nanoseconds
 * on one monotonic clock (CLOCK_MONOTONIC's epoch and rate). Seconds appear
 * only in the Prometheus/OpenMetrics output. t_ns == TTFT_NOW (0) means
 * "read the library's clock".
 *
 * Threading, in one paragraph: the hooks (ttft_begin*, ttft_mark,
 * ttft_annotate, ttft_token_emitted, ttft_step_emitted, ttft_stream_end) are
 * thread-safe, lock-free and never allocate; any thread may call them.
 * Hooks for one sequence are expected in order (the caller hands a sequence
 * from thread to thread with the usual synchronisation), except that
 * ttft_stream_end may race the other hooks of that sequence from another
 * thread (a client cancel against the decode loop): exactly one outcome
 * wins and nothing is corrupted or counted twice — a slot is reused only
 * after every call that saw its sequence live has left (docs/design.md).
 * Snapshots and queries run concurrently with the hooks and never stop them.
 * Registry setup (ttft_class_add) may run concurrently with hooks too.
 * ttft_registry_free must not race anything on the same registry.
 *
 * Errors: functions that can fail return a negative TTFT_E* code (or NULL /
 * 0 where documented). The library never prints, aborts, exits, or sets errno.
 */
#ifndef TTFT_H
#define TTFT_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ export */
#if defined(_WIN32) && defined(TTFT_SHARED)
#  if defined(TTFT_BUILDING)
#    define TTFT_API __declspec(dllexport)
#  else
#    define TTFT_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) && __GNUC__ >= 4
#  define TTFT_API __attribute__((visibility("default")))
#else
#  define TTFT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------------------- version */
#define TTFT_VERSION_MAJOR 1
#define TTFT_VERSION_MINOR 3
#define TTFT_VERSION_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH, e.g. 10000 for 1.0.0 */
#define TTFT_VERSION_NUMBER \
  (TTFT_VERSION_MAJOR * 10000 + TTFT_VERSION_MINOR * 100 + TTFT_VERSION_PATCH)
#define TTFT__STR2(x) #x
#define TTFT__STR(x) TTFT__STR2(x)
#define TTFT_VERSION_STRING \
  TTFT__STR(TTFT_VERSION_MAJOR) "." TTFT__STR(TTFT_VERSION_MINOR) "." TTFT__STR(TTFT_VERSION_PATCH)

/* TTFT_VERSION_NUMBER of the library actually linked (may differ from the
 * header's). Thread-safe, never fails. */
TTFT_API unsigned ttft_version_number(void);
/* "MAJOR.MINOR.PATCH" of the linked library; a static string. */
TTFT_API const char *ttft_version_string(void);

/* ------------------------------------------------------------------ errors */
/* One list, X-macro style: XX(NAME, value, message). */
#define TTFT_ERRNO_MAP(XX)                                                     \
  XX(EINVAL,   -1, "invalid argument")                                         \
  XX(ESTALE,   -2, "stale or unknown sequence handle (stream already ended?)") \
  XX(EFULL,    -3, "no free sequence slot or class slot")                      \
  XX(ENOMEM,   -4, "out of memory")                                            \
  XX(ERANGE,   -5, "value out of range or buffer too small")                   \
  XX(ECORRUPT, -6, "malformed, truncated or corrupted encoding")               \
  XX(EEXIST,   -7, "name already exists")                                      \
  XX(EIO,      -8, "socket or I/O error")                                      \
  XX(ENOTSUP,  -9, "not supported by this build")                              \
  XX(ECLOCK,  -10, "wall-clock timestamp (CLOCK_REALTIME: time.time_ns(), "   \
                   "system_clock) where the monotonic clock (CLOCK_MONOTONIC: " \
                   "time.monotonic_ns(), steady_clock, or TTFT_NOW) is expected")

/* TTFT_ECLOCK (since 1.3): a begin whose t_ns is a wall-clock time — more
 * than TTFT_CLOCK_AHEAD_NS ahead of the registry's clock and within
 * TTFT_CLOCK_AHEAD_NS of the wall clock's now (CLOCK_REALTIME). The
 * library's clock is CLOCK_MONOTONIC (time.monotonic_ns(), steady_clock,
 * Instant, ttft_now_ns: ns since boot on Linux); time.time_ns() or
 * system_clock (about 1.7e18 ns since 1970) is decades ahead of it and
 * would record a 56-year TTFT. A synthetic timeline that runs ahead of the
 * clock elsewhere (a simulation, a replay from t = 1) is accepted. */
#define TTFT_CLOCK_AHEAD_NS UINT64_C(86400000000000) /* one day */

typedef enum ttft_errno {
  TTFT_OK = 0,
#define TTFT__ERR_ENUM(name, val, msg) TTFT_##name = (val),
  TTFT_ERRNO_MAP(TTFT__ERR_ENUM)
#undef TTFT__ERR_ENUM
  TTFT_E__LAST = -11
} ttft_errno;

/* A static English message for err (0 or a TTFT_E* code); "unknown error"
 * for anything else. Never NULL. Thread-safe. */
TTFT_API const char *ttft_strerror(int err);
/* The symbolic name, e.g. "TTFT_ESTALE" ("TTFT_OK" for 0, "TTFT_UNKNOWN"
 * otherwise). Never NULL. Thread-safe. */
TTFT_API const char *ttft_err_name(int err);

/* ==========================================================================
 * TIER 1 — THE HOOKS AND A FIRST REPORT
 *
 * Create a registry (NULL config = defaults: 4096 in-flight slots, 500 ms
 * stall budget), call ttft_begin where the clock starts, ttft_token_emitted
 * (or one ttft_step_emitted per decode step) where tokens become visible,
 * ttft_stream_end where the stream closes; take a snapshot and read a
 * quantile or render a report. README.md's example is exactly this.
 * ========================================================================== */

/* ------------------------------------------------------------------- types */
typedef struct ttft_registry ttft_registry; /* opaque; one per process/engine */
typedef struct ttft_snapshot ttft_snapshot; /* opaque; an immutable copy      */
typedef struct ttft_config ttft_config;     /* tier 3; NULL = defaults      */

/* A sequence handle: slot index + 1 in the low 32 bits, the slot's
 * generation in the high 32 bits (a count of the slot's sequences above a
 * tag that differs between live registries). 0 is never a valid handle. A
 * handle whose stream has ended is rejected with TTFT_ESTALE, even after
 * its slot serves a new sequence; so is another registry's handle (for up
 * to 255 live registries always, beyond that with probability 1 - 2^-24). */
typedef uint64_t ttft_seq;

#define TTFT_NOW UINT64_C(0) /* "read the library's clock" */
/* Bindings should not map a caller's literal 0 to TTFT_NOW: a replayed
 * trace that starts at 0 would read the live clock (the Python bindings
 * refuse t_ns=0; None means now). */

typedef enum ttft_metric {
  TTFT_METRIC_TTFT = 0,          /* t_first - t_begin, ns                     */
  TTFT_METRIC_TPOT = 1,          /* (t_last - t_first)/(N-1), ns, N >= 2      */
  TTFT_METRIC_ITL = 2,           /* gap between emissions, ns                 */
  TTFT_METRIC_E2E = 3,           /* t_end - t_begin, ns, every ended stream   */
  TTFT_METRIC_QUEUE = 4,         /* t_sched - t_begin, ns (SCHEDULED mark)    */
  TTFT_METRIC_PREFILL = 5,       /* t_first - t_sched, ns                     */
  TTFT_METRIC_DECODE = 6,        /* t_last - t_first, ns, streams with tokens */
  TTFT_METRIC_OUTPUT_TOKENS = 7, /* N per ended stream, tokens (0 allowed)    */
  TTFT_METRIC_SEQ_ITL_P95 = 8,   /* each sequence's own p95 gap, ns           */
  TTFT_METRIC_SEQ_ITL_MAX = 9,   /* each sequence's worst gap (exact), ns     */
  TTFT_METRIC_ABANDONED_WAIT = 10, /* how long CANCELLED-before-first-token
                                      streams waited (t_end - t_begin), ns   */
  TTFT_METRIC_ITL_PER_TOKEN = 11, /* token-weighted ITL: an emission of n
                                     tokens after a gap d adds n observations
                                     of d/n (emissions after the first), ns  */
  TTFT_METRIC_COUNT_ = 12        /* number of metrics; not a metric          */
} ttft_metric;

typedef enum ttft_status {
  TTFT_COMPLETED = 0, /* the stream finished normally                */
  TTFT_CANCELLED = 1, /* the client went away / aborted              */
  TTFT_ERROR = 2,     /* the server failed the request               */
  TTFT_STATUS_COUNT_ = 3
} ttft_status;

typedef enum ttft_phase {
  TTFT_PHASE_SCHEDULED = 0, /* first admission by the scheduler (prefill starts).
                               Later SCHEDULED marks (re-admission) are ignored. */
  TTFT_PHASE_PREEMPTED = 1, /* evicted from the batch; counted per class       */
  TTFT_PHASE_RESUMED = 2,   /* back in the batch after PREEMPTED (1.2)         */
  TTFT_PHASE_COUNT_ = 3
} ttft_phase;

typedef enum ttft_counter {
  TTFT_COUNTER_BEGUN = 0,         /* accepted begins                            */
  TTFT_COUNTER_COMPLETED = 1,     /* streams ended COMPLETED                    */
  TTFT_COUNTER_CANCELLED = 2,     /* streams ended CANCELLED                    */
  TTFT_COUNTER_ERRORS = 3,        /* streams ended ERROR                        */
  TTFT_COUNTER_DROPPED = 4,       /* begins refused (no free slot)              */
  TTFT_COUNTER_TOKENS = 5,        /* output tokens accepted (sum of n_tokens)   */
  TTFT_COUNTER_STALLS = 6,        /* ITL gaps above the stall budget            */
  TTFT_COUNTER_STALLED_SEQS = 7,  /* sequences with at least one stall          */
  TTFT_COUNTER_ABANDONED = 8,     /* CANCELLED with zero tokens emitted         */
  TTFT_COUNTER_SLO_MET = 9,       /* ended streams that were "good": COMPLETED
                                     within every budget of their class        */
  TTFT_COUNTER_CLOCK_CLAMPED = 10,/* timestamps earlier than the previous event */
  TTFT_COUNTER_PREEMPTIONS = 11,  /* PREEMPTED marks                            */
  TTFT_COUNTER_NO_TPOT = 12,      /* ended streams with N < 2 (no TPOT exists)  */
  TTFT_COUNTER_STALE = 13,        /* hook calls (token, step, mark, end,
                                     annotate) rejected with TTFT_ESTALE       */
  TTFT_COUNTER_SLO_JUDGED = 14,   /* ended streams the SLO judges: every
                                     COMPLETED and ERROR stream, and a
                                     CANCELLED one only when it had already
                                     missed a budget (a client that leaves
                                     early does not judge the server).
                                     Attainment = SLO_MET / SLO_JUDGED      */
  TTFT_COUNTER_TRACE_ID_INVALID = 15, /* begins whose trace_id was ignored
                                     (not 32 lowercase hex, or all zero)   */
  TTFT_COUNTER_BARRIER_FALLBACKS = 16, /* reclaim rounds whose barrier was
                                     made without membarrier(2) because it
                                     failed at run time (a seccomp filter
                                     installed later): fences, the threads'
                                     acknowledgements, /proc; registry-
                                     wide, class 0. Not 0: see
                                     docs/reliability.md, 1.3 (27.3, 27.4) */
  TTFT_COUNTER_CLOCK_REFUSED = 17, /* (1.3) begins refused with TTFT_ECLOCK:
                                     a wall-clock t_ns (time.time_ns(),
                                     system_clock) passed for a monotonic
                                     one. Should stay 0                    */
  TTFT_COUNTER_PUBLISH_FAILED = 18, /* (1.3) publishes into shared_dir that
                                     failed (disk full, read-only, removed
                                     directory); registry-wide, class 0.
                                     Recording goes on; the first failure
                                     is said once on stderr              */
  TTFT_COUNTER_SEGMENTS_SKIPPED = 19, /* (1.3) in a gathered snapshot: segments
                                     the gatherer skipped (truncated,
                                     corrupt, hostile, future version,
                                     another user's); registry-wide,
                                     class 0; 0 in a registry's own      */
  TTFT_COUNTER_PROCESSES_EXITED = 20, /* (1.3) in a gathered snapshot: processes
                                     whose last published state was folded
                                     into the directory's archive (exits,
                                     kills, crashes); class 0             */
  TTFT_COUNTER_TOKEN_DEADLINES = 21, /* (1.3) token deadlines judged so far
                                     (the fluidity rule, docs/metrics.md
                                     "Fluidity"; streams with a token
                                     deadline only), counted as they
                                     happen: at each emission, and the
                                     ones a cancel finds already passed */
  TTFT_COUNTER_TOKEN_DEADLINES_MISSED = 22, /* (1.3) ... of them missed.
                                     1 - MISSED / DEADLINES = the live
                                     fluidity of the class's tokens      */
  TTFT_COUNTER_FLUID = 23,        /* (1.3) ended streams that were fluid:
                                     COMPLETED with fluidity >= fluid_min */
  TTFT_COUNTER_FLUID_JUDGED = 24, /* (1.3) ended streams judged for
                                     fluidity: those with a token deadline
                                     that ended COMPLETED or ERROR, or
                                     CANCELLED after a missed deadline.
                                     Fluid attainment = FLUID / FLUID_JUDGED */
  TTFT_COUNTER_COUNT_ = 25
} ttft_counter;

typedef enum ttft_format {
  TTFT_FORMAT_TEXT = 0,        /* a table for a terminal                       */
  TTFT_FORMAT_JSON = 1,        /* docs/json.md documents the schema            */
  TTFT_FORMAT_PROMETHEUS = 2,  /* text exposition format 0.0.4                 */
  TTFT_FORMAT_OPENMETRICS = 3, /* OpenMetrics 1.0 text                         */
  TTFT_FORMAT_PROMETHEUS_PROTOBUF = 4, /* length-delimited io.prometheus.client.
                                          MetricFamily messages (binary) with
                                          native histograms, docs/prometheus.md */
  TTFT_FORMAT_OTLP_PROTOBUF = 5, /* (1.3) an OTLP ExportMetricsServiceRequest
                                    (binary protobuf, as POSTed to
                                    /v1/metrics), cumulative temporality,
                                    exponential histograms; the resource from
                                    OTEL_SERVICE_NAME and
                                    OTEL_RESOURCE_ATTRIBUTES;
                                    docs/opentelemetry.md */
  TTFT_FORMAT_COUNT_ = 6
} ttft_format;

/* ---------------------------------------------------------------- registry */

/* Create a registry. cfg NULL = defaults. All memory is allocated here (and
 * in ttft_class_add); hooks never allocate. Returns NULL when cfg is invalid
 * (bad struct_size, out-of-range field, bad or reserved label name, bands
 * not ascending: ttft_config_check says which and why) or memory is short.
 * Thread-safe (independent registries). */
TTFT_API ttft_registry *ttft_registry_new(const ttft_config *cfg);

/* Free a registry and everything it owns. NULL is a no-op. Must not race
 * any other call on r; snapshots taken from r stay valid. */
TTFT_API void ttft_registry_free(ttft_registry *r);

/* ------------------------------------------------------------------- hooks */

/* Start a sequence at t_ns (TTFT_NOW = read r's clock): the clock start of
 * TTFT and E2E (see config start_point). Returns its handle, or 0 when r is
 * NULL, no slot is free (counted as TTFT_COUNTER_DROPPED) or t_ns is a
 * wall-clock time (see TTFT_ECLOCK; counted as TTFT_COUNTER_CLOCK_REFUSED;
 * ttft_begin_checked returns TTFT_ECLOCK for it). An ended stream's slot
 * is reused only once no hook call that saw that stream live is still
 * running (docs/design.md): a call holds back only the slot it is inside,
 * so a begin is refused only when every slot is in flight or is the one
 * slot a running call is inside — a thread stopped inside a hook costs at
 * most one slot. When every slot is taken but some belong to ended
 * streams, the begin reclaims them (one membarrier(2) system call when
 * another thread records on a private shard), and polls a slot that a call
 * is still inside a bounded number of times (microseconds; it never waits
 * for time to pass or yields the CPU) before giving up. Thread-safe,
 * lock-free, no allocation; only a begin that finds no free slot reclaims,
 * so with n slots about one begin in n - in-flight does.
 * If membarrier(2) starts failing after registries exist (a seccomp filter
 * installed later with SECCOMP_FILTER_FLAG_TSYNC), reclamation goes on
 * without it and without signals: each thread that records on a private
 * shard of r acknowledges at its next hook call and fences from then on,
 * like a registry made without membarrier (a seq_cst fence per hook call:
 * +1 to +3 ns measured, ttft-bench --no-membarrier, docs/performance.md);
 * a thread that has not called since is taken as passed when it sleeps or
 * is stopped, and on x86 (without broadcast TLB invalidation) a
 * TLB-shootdown barrier serves every thread at once. Counted in
 * TTFT_COUNTER_BARRIER_FALLBACKS. Where that barrier is missing, a thread
 * that keeps running without calling a hook or sleeping holds those
 * reclaims back until it calls one (begins at capacity are then refused
 * and counted as DROPPED). docs/reliability.md, 1.3 (issue 27.3, 27.4). */
TTFT_API ttft_seq ttft_begin(ttft_registry *r, uint64_t t_ns);

/* The one cheap check a timestamp gets (all hooks): a t_ns more than
 * TTFT_CLOCK_AHEAD_NS (a day) after r's clock now and within a day of the
 * wall clock's now is a wall-clock time (time.time_ns(), system_clock)
 * passed for a monotonic one. ttft_begin refuses it (returns 0;
 * ttft_begin_checked says TTFT_ECLOCK), counted in
 * TTFT_COUNTER_CLOCK_REFUSED, nothing recorded. The other hooks never
 * record such a value either: one more than a day after the sequence's
 * previous event is clamped to that event and counted in
 * TTFT_COUNTER_CLOCK_CLAMPED, as time going backwards is (the hook returns
 * TTFT_OK). Cost: one load and compare per begin with a t_ns; the
 * clocks are read only for a t_ns past a cached bound (r's clock + a day
 * at the last reading). Replays of recorded monotonic timestamps and
 * synthetic timelines are unaffected. */

/* Mark a phase of sequence s at t_ns. SCHEDULED sets t_sched once (queue
 * time is recorded then); later SCHEDULED marks are accepted and ignored.
 * PREEMPTED is counted, and a stall whose gap holds a PREEMPTED mark is
 * attributed to TTFT_STALL_PREEMPTED; RESUMED says the sequence is back
 * in the batch (accepted and time-checked like any mark, never counted:
 * the PREEMPTED mark alone decides a stall's cause). Returns TTFT_OK, TTFT_EINVAL (NULL r, bad phase),
 * TTFT_ESTALE (0, ended or unknown handle). A t_ns earlier than the
 * sequence's previous event is clamped and counted (CLOCK_CLAMPED).
 * Thread-safe, lock-free, no allocation. */
TTFT_API int ttft_mark(ttft_registry *r, ttft_seq s, ttft_phase phase, uint64_t t_ns);

/* n_tokens tokens became visible to the client at t_ns (one emission; n > 1
 * for speculative or multi-token steps). An emission that races a
 * ttft_stream_end from another thread either returns TTFT_ESTALE or is
 * accepted; an accepted one is always in TOKENS and ITL, but when the end
 * won the race first it is not in that stream's OUTPUT_TOKENS/TPOT. The first emission records TTFT
 * (and the prefix/band splits, and PREFILL when SCHEDULED was marked);
 * every later one records one ITL gap, feeds the sequence's own gap
 * histogram and counts a stall when the gap exceeds the class's stall
 * budget. Returns TTFT_OK, TTFT_EINVAL (NULL r, n_tokens == 0),
 * TTFT_ESTALE (0, ended or unknown handle). Time going backwards, or a
 * wall-clock time (see above), is clamped and counted. Thread-safe, lock-free, allocation-free, no syscall other
 * than the clock when t_ns is TTFT_NOW. */
TTFT_API int ttft_token_emitted(ttft_registry *r, ttft_seq s, uint32_t n_tokens, uint64_t t_ns);

/* The stream closed at t_ns with status. Records E2E, OUTPUT_TOKENS and,
 * when they exist, TPOT, DECODE, SEQ_ITL_P95/MAX; counts the status,
 * ABANDONED (CANCELLED with no token, its wait in ABANDONED_WAIT), NO_TPOT,
 * SLO_JUDGED when the SLO judges the stream and SLO_MET when it is good:
 * COMPLETED and ERROR streams are judged (good: COMPLETED within every
 * budget of the class); a CANCELLED stream is judged, and bad, only when it
 * had already missed a budget by t_ns — no first token within the TTFT
 * budget (or a first token later than it), TPOT so far over the TPOT
 * budget, or t_ns past the E2E budget — else it is not judged at all. The
 * handle is dead afterwards.
 * Returns TTFT_OK, TTFT_EINVAL (NULL r, unknown status), TTFT_ESTALE (0,
 * unknown handle, or already ended: of two racing stream_end calls exactly
 * one returns TTFT_OK). Thread-safe, lock-free, no allocation. */
TTFT_API int ttft_stream_end(ttft_registry *r, ttft_seq s, ttft_status status, uint64_t t_ns);

/* Details of sequence s learned after ttft_begin, typically when a slot
 * picks the request up and finds its prefix-cache reuse (the clock keeps
 * its start at arrival). prompt_tokens 0 and prefix_hit -1 leave that
 * field as it is; prefix_hit 1 = hit, 0 = miss (other values: TTFT_EINVAL);
 * ttft_annotate_cached takes the cached token count instead.
 * Allowed until the first emission, because TTFT's prefix and prompt-band
 * splits are recorded then. Returns TTFT_OK; TTFT_ERANGE after the first
 * emission (nothing changes); TTFT_ESTALE for 0, an ended, unknown or
 * other registry's handle (counted in TTFT_COUNTER_STALE); TTFT_EINVAL for
 * NULL r or a bad prefix_hit. Thread-safe, lock-free, no allocation; safe
 * against a concurrent ttft_stream_end (like ttft_mark). */
TTFT_API int ttft_annotate(ttft_registry *r, ttft_seq s, uint32_t prompt_tokens, int prefix_hit);

/* Like ttft_annotate, with the prefix-cache reuse as counts: prompt_tokens
 * of the prompt of s, cached_tokens of them served from the prefix cache.
 * Sets the prompt band and the prefix band (ttft_prefix_band): MISS when
 * cached_tokens < ttft_config.prefix_hit_min_tokens, PARTIAL when
 * 2 * cached_tokens < prompt_tokens, HIT otherwise. Call it where the
 * server computes the reuse (when the prompt starts), not at slot launch.
 * The same rules as ttft_annotate: TTFT_OK until the first emission (a
 * later call overrides an earlier one), TTFT_ERANGE after it (nothing
 * changes); TTFT_ESTALE for 0, an ended, unknown or other registry's handle
 * (counted in TTFT_COUNTER_STALE); TTFT_EINVAL for NULL r, prompt_tokens 0
 * or cached_tokens > prompt_tokens (nothing changes). Thread-safe,
 * lock-free, no allocation; safe against a concurrent ttft_stream_end. */
TTFT_API int ttft_annotate_cached(ttft_registry *r, ttft_seq s, uint32_t prompt_tokens,
                                  uint32_t cached_tokens);

/* One decode step of a continuous-batching engine: sequence seqs[i]
 * emitted n_tokens[i] tokens (n_tokens NULL = 1 each) at t_ns (TTFT_NOW =
 * one clock read for the whole step). Records exactly what count calls of
 * ttft_token_emitted(r, seqs[i], n_tokens[i], t_ns) would, in order.
 * Handles that are 0, ended or unknown are skipped and counted in
 * TTFT_COUNTER_STALE; an n_tokens[i] of 0 is skipped too (not an emission).
 * Returns the number of emissions accepted (0 .. count), or TTFT_EINVAL
 * for NULL r, or NULL seqs with count > 0. Thread-safe, lock-free,
 * allocation-free; the hooks' ordering rules hold per sequence. */
TTFT_API long ttft_step_emitted(ttft_registry *r, const ttft_seq *seqs, const uint32_t *n_tokens,
                                size_t count, uint64_t t_ns);

/* ------------------------------------------------ engine steps (1.2)
 * One engine iteration of a continuous-batching server, so that the
 * library can say why a stall happened (ttft_stall_cause) and what
 * prefill costs decode (the engine-step histograms). A server that never
 * calls ttft_engine_step loses nothing: its stalls are TTFT_STALL_UNKNOWN. */
typedef struct ttft_step_info {
  size_t struct_size;      /* set by ttft_step_info_init: sizeof(ttft_step_info) */
  uint32_t prefill_tokens; /* prompt tokens processed in this step (any request) */
  uint32_t decode_seqs;    /* sequences that decoded a token in this step       */
  uint32_t preempted_seqs; /* sequences preempted in this step                  */
  uint32_t kind;           /* free for the server (0 = unspecified)             */
} ttft_step_info;

/* Zero *info and set its struct_size. NULL is a no-op. */
TTFT_API void ttft_step_info_init(ttft_step_info *info);

/* One engine iteration ran from t_start_ns to t_end_ns (TTFT_NOW for
 * either = the registry's clock now; a t_end_ns before t_start_ns is
 * clamped to t_start_ns). Call it once per iteration when it ends, BEFORE
 * the tokens it produced are recorded (ttft_step_emitted / token_emitted),
 * with the same clock as the token hooks. info NULL = an iteration with
 * no prefill. Records the step's duration in the registry-wide engine-step
 * histogram (prefill when info->prefill_tokens > 0) and keeps the step in
 * a ring of the last TTFT_STEP_RING steps, which a stall reads to find its
 * cause (docs/metrics.md, "stall causes"). Steps are registry-wide: one
 * registry per engine loop is the model (data-parallel engines in one
 * process: one registry each). Returns TTFT_OK, TTFT_EINVAL (NULL r, bad
 * info->struct_size). Thread-safe, lock-free, allocation-free, no syscall
 * but the clock; about 20 ns (docs/performance.md). */
TTFT_API int ttft_engine_step(ttft_registry *r, const ttft_step_info *info, uint64_t t_start_ns,
                              uint64_t t_end_ns);
#define TTFT_STEP_RING 1024 /* engine steps a registry remembers for stall causes */

/* Why a stall (an ITL gap above the class's stall budget) happened. Each
 * stall gets exactly one; docs/metrics.md has the rule and its precedence. */
typedef enum ttft_stall_cause {
  TTFT_STALL_UNKNOWN = 0,       /* no engine step ended inside the gap (no step info) */
  TTFT_STALL_PREFILL = 1,       /* a step in the gap carried prefill and was longer
                                   than the sequence's usual step                  */
  TTFT_STALL_PREEMPTED = 2,     /* the sequence was marked PREEMPTED in the gap     */
  TTFT_STALL_NOT_SCHEDULED = 3, /* steps ran without this sequence: the steps that
                                   ended inside the gap before the one that produced
                                   its token cover at least half of the gap       */
  TTFT_STALL_ENGINE_IDLE = 4,   /* no step ran during most of the gap: a host stall,
                                   GC, a frozen process                            */
  TTFT_STALL_SLOW_STEP = 5,     /* (1.3) the step that produced the sequence's token
                                   was itself far longer than its usual step (host
                                   contention, GPU throttling, a huge batch)       */
  TTFT_STALL_CAUSE_COUNT = 6
} ttft_stall_cause;

#ifndef TTFT_NO_SHORT_NAMES
/* The hook names the product promises, as header-level aliases: the ABI
 * only exports the ttft_-prefixed symbols. Define TTFT_NO_SHORT_NAMES
 * before including this header if the names collide with yours. */
static inline int token_emitted(ttft_registry *r, ttft_seq s, uint32_t n_tokens, uint64_t t_ns) {
  return ttft_token_emitted(r, s, n_tokens, t_ns);
}
static inline int stream_end(ttft_registry *r, ttft_seq s, ttft_status status, uint64_t t_ns) {
  return ttft_stream_end(r, s, status, t_ns);
}
#endif

/* --------------------------------------------------------- a first report */

/* Copy everything r has recorded since creation, plus the gauges, into a
 * new immutable snapshot. Runs concurrently with hooks without stopping
 * them; a concurrent event is either wholly in or (for a few fields)
 * partly in, never a count that goes down. Returns NULL for NULL r or when
 * memory is short. Free with ttft_snapshot_free. Thread-safe. */
TTFT_API ttft_snapshot *ttft_snapshot_take(ttft_registry *r);

/* NULL is a no-op. */
TTFT_API void ttft_snapshot_free(ttft_snapshot *s);

/* Observations of metric m over every class. 0 for NULL s, unknown m or
 * an empty metric. Thread-safe (snapshots are immutable). */
TTFT_API uint64_t ttft_snapshot_count(const ttft_snapshot *s, ttft_metric m);

/* Quantile q in [0,1] of metric m over every class, nearest rank: the
 * rank is exact — ceil(q*N) with q read as the shortest decimal that
 * prints it (0.99 is 99/100, not the binary double just below), so
 * q = 0.99 of N = 100 is the 99th observation — and the value returned is
 * that observation's bucket, within 0.5 % of it for values 1 us .. 1 h.
 * q = 0 is the exact min, q = 1 the exact max; never decreasing in q and
 * always within [min, max]. ns (tokens for OUTPUT_TOKENS). 0 for NULL s,
 * unknown m, q outside [0,1] or NaN, or an empty metric. */
TTFT_API uint64_t ttft_snapshot_quantile(const ttft_snapshot *s, ttft_metric m, double q);

/* Counter c over every class; 0 for NULL s or unknown c. */
TTFT_API uint64_t ttft_snapshot_counter(const ttft_snapshot *s, ttft_counter c);

/* Render s in format f into buf (capacity cap, NUL-terminated when cap > 0),
 * with snprintf's rules: returns the full length the output needs (not
 * counting the NUL), so a return >= cap means it was truncated and a buffer
 * of return+1 bytes is enough. buf may be NULL when cap is 0. Returns
 * TTFT_EINVAL for NULL s, unknown f, or buf NULL with cap > 0; TTFT_ENOMEM
 * when scratch memory is short. The output is the same whatever locale the
 * process or the calling thread has set (setlocale, uselocale): numbers
 * are written as in the C locale ("0.5", never "0,5"); the call runs with
 * the C locale on the calling thread and gives the thread's own back
 * before it returns. Thread-safe. */
TTFT_API long ttft_snapshot_format(const ttft_snapshot *s, ttft_format f, char *buf, size_t cap);

/* ------------------------------------------------------------------- clock */

/* Nanoseconds on CLOCK_MONOTONIC. Thread-safe; never fails. */
TTFT_API uint64_t ttft_now_ns(void);

/* ==========================================================================
 * TIER 2 — SNAPSHOTS AND QUERIES
 *
 * Everything a snapshot holds, per class (TTFT_CLASS_ALL = every class),
 * per terminal status (what client benchmarks count), per TTFT split;
 * gauges, attainment, the interval, the labels; and the live state of
 * sequences still in flight. Snapshots are immutable: every query here is
 * thread-safe and returns 0 (or NULL, -1.0 where said) for invalid input.
 * ========================================================================== */

typedef struct ttft_slo ttft_slo; /* tier 3 (classes) */

/* Gauges are read at snapshot time. */
typedef enum ttft_gauge {
  TTFT_GAUGE_INFLIGHT = 0,    /* sequences begun and not yet ended              */
  TTFT_GAUGE_LIVE_STALLS = 1, /* in-flight sequences stalled right now          */
  TTFT_GAUGE_MEMORY = 2,      /* bytes the registry holds (ttft_registry_memory) */
  TTFT_GAUGE_COARSE = 3,      /* observations so far binned by power of two only,
                                 because the chunk pool was empty: memory_limit
                                 reached, or a burst beyond the pool's reserve
                                 (0 normally; docs/design.md "Memory")        */
  TTFT_GAUGE_PROCESSES = 4,   /* (1.3) in a gathered snapshot: live processes
                                 whose segments it merged; 0 in a registry's
                                 own snapshot                                  */
  TTFT_GAUGE_COUNT_ = 5
} ttft_gauge;

/* TTFT splits: TTFT recorded a second time under a split key. */
typedef enum ttft_split {
  TTFT_SPLIT_PREFIX_CACHE = 0, /* index = ttft_prefix_band (unknown: not recorded) */
  TTFT_SPLIT_PROMPT_BAND = 1,  /* index = prompt-length band, see ttft_config     */
  TTFT_SPLIT_PREFILL_BY_PREFIX = 2, /* PREFILL (t_first - t_sched, streams with a
                                       SCHEDULED mark) by ttft_prefix_band, so
                                       "a hit prefills faster but queues
                                       longer" is visible (TTFT - PREFILL)   */
  TTFT_SPLIT_COUNT_ = 3
} ttft_split;

/* Prefix-cache bands of a sequence, by how much of its prompt was served
 * from the cache (ttft_annotate_cached): MISS when fewer than
 * ttft_config.prefix_hit_min_tokens tokens were (every server reuses at
 * least a BOS token), PARTIAL when fewer than half the prompt was, HIT
 * otherwise. ttft_annotate's prefix_hit 1 / 0 mean HIT / MISS. The index
 * of TTFT_SPLIT_PREFIX_CACHE and TTFT_SPLIT_PREFILL_BY_PREFIX. */
typedef enum ttft_prefix_band {
  TTFT_PREFIX_MISS = 0,
  TTFT_PREFIX_HIT = 1,
  TTFT_PREFIX_PARTIAL = 2,
  TTFT_PREFIX_BAND_COUNT_ = 3
} ttft_prefix_band;

/* --------------------------------------------------------------- snapshots */

/* Mean of m over every class: the exact sum (128 bits, see below) over
 * ttft_snapshot_count as a double, so exact to double rounding; 0.0 when
 * empty or invalid. */
TTFT_API double ttft_snapshot_mean(const ttft_snapshot *s, ttft_metric m);

/* Sum of the observations of m (ns; tokens for OUTPUT_TOKENS). Sums are
 * kept 128 bits wide everywhere (live, snapshots, merge, delta, the
 * encoding, every exposition) and never wrap; this returns the sum when
 * it is below 2^64 (584 years of nanoseconds) and saturates at UINT64_MAX
 * above. ttft_snapshot_class_sum_wide gives the whole number. 0 when
 * empty or invalid. Thread-safe. */
TTFT_API uint64_t ttft_snapshot_sum(const ttft_snapshot *s, ttft_metric m);

/* Gauge g at the time the snapshot was taken; 0 for NULL/unknown. */
TTFT_API uint64_t ttft_snapshot_gauge(const ttft_snapshot *s, ttft_gauge g);

/* Number of classes in s (>= 1 for a valid snapshot, 0 for NULL). */
TTFT_API int ttft_snapshot_classes(const ttft_snapshot *s);

/* Name of class id in s, or NULL when out of range / NULL s. The string
 * lives as long as s. */
TTFT_API const char *ttft_snapshot_class_name(const ttft_snapshot *s, int class_id);

/* Copy the SLO of class id into *out (out->struct_size must be set).
 * TTFT_OK, TTFT_EINVAL. */
TTFT_API int ttft_snapshot_class_slo(const ttft_snapshot *s, int class_id, ttft_slo *out);

/* Per-class variants; class_id TTFT_CLASS_ALL means every class. 0 (or
 * 0.0) for NULL s, unknown class, metric or counter, q outside [0,1]. */
TTFT_API uint64_t ttft_snapshot_class_count(const ttft_snapshot *s, int class_id, ttft_metric m);
TTFT_API uint64_t ttft_snapshot_class_quantile(const ttft_snapshot *s, int class_id,
                                               ttft_metric m, double q);
TTFT_API double ttft_snapshot_class_mean(const ttft_snapshot *s, int class_id, ttft_metric m);
TTFT_API uint64_t ttft_snapshot_class_sum(const ttft_snapshot *s, int class_id, ttft_metric m);
/* The whole sum of m in class class_id (or TTFT_CLASS_ALL): the 128-bit
 * number *hi * 2^64 + *lo, in ns (tokens for OUTPUT_TOKENS); exact, never
 * wrapped (a registry would need 2^128 ns). hi or lo may be NULL (not
 * written). TTFT_OK, or TTFT_EINVAL for NULL s, an unknown class or
 * metric (nothing written). Thread-safe. */
TTFT_API int ttft_snapshot_class_sum_wide(const ttft_snapshot *s, int class_id, ttft_metric m,
                                          uint64_t *hi, uint64_t *lo);
TTFT_API uint64_t ttft_snapshot_class_counter(const ttft_snapshot *s, int class_id,
                                              ttft_counter c);

/* Views by terminal status: TTFT, TPOT, E2E and OUTPUT_TOKENS of the
 * streams that ended with status st (recorded at stream end), in class
 * class_id or TTFT_CLASS_ALL. What client benchmarks report counts
 * completed requests only: st = TTFT_COMPLETED reproduces it. The plain
 * metrics above keep counting every stream (TTFT at the first token, even
 * of a stream cancelled later). Quantiles have the same 0.5 % bound.
 * 0 for NULL s, unknown class, status or q, a metric other than those four,
 * or an empty view. Thread-safe. */
TTFT_API uint64_t ttft_snapshot_status_count(const ttft_snapshot *s, int class_id, ttft_status st,
                                             ttft_metric m);
TTFT_API uint64_t ttft_snapshot_status_quantile(const ttft_snapshot *s, int class_id,
                                                ttft_status st, ttft_metric m, double q);

/* Sum and mean of a status view (ns; tokens for OUTPUT_TOKENS): with
 * st = TTFT_COMPLETED and m = TTFT_METRIC_TTFT, the "mean TTFT" of the
 * completed requests that client benchmarks print is
 * ttft_snapshot_status_mean(s, TTFT_CLASS_ALL, TTFT_COMPLETED,
 * TTFT_METRIC_TTFT), and status_sum / status_count is it exactly.
 * The sum never wraps: the library keeps it 128 bits wide; this returns
 * it exactly below 2^64 (584 years of nanoseconds) and UINT64_MAX above.
 * The mean divides the whole 128-bit sum (exact to double rounding).
 * 0 / 0.0 for NULL s, unknown class, status or metric, a metric other
 * than the four above, or an empty view. Thread-safe. */
TTFT_API uint64_t ttft_snapshot_status_sum(const ttft_snapshot *s, int class_id, ttft_status st,
                                           ttft_metric m);
TTFT_API double ttft_snapshot_status_mean(const ttft_snapshot *s, int class_id, ttft_status st,
                                          ttft_metric m);

/* SLO attainment of a class (or TTFT_CLASS_ALL): good / judged, in [0,1]
 * (TTFT_COUNTER_SLO_MET / TTFT_COUNTER_SLO_JUDGED; streams cancelled
 * before they missed a budget are not judged); -1.0 when nothing was
 * judged or the arguments are invalid. Thread-safe (reads s only). */
TTFT_API double ttft_snapshot_attainment(const ttft_snapshot *s, int class_id);

/* TTFT under a split (all classes): count and quantile of TTFT_SPLIT_PREFIX_CACHE
 * index TTFT_PREFIX_MISS / _HIT / _PARTIAL, or TTFT_SPLIT_PROMPT_BAND index
 * 0 .. bands-1; PREFILL under TTFT_SPLIT_PREFILL_BY_PREFIX, same indices.
 * 0 for anything invalid or empty. A snapshot decoded from a 1.0 or 1.1
 * encoding has its hit and miss, no partial and no prefill split. */
TTFT_API uint64_t ttft_snapshot_split_count(const ttft_snapshot *s, ttft_split split, unsigned index);
TTFT_API uint64_t ttft_snapshot_split_quantile(const ttft_snapshot *s, ttft_split split,
                                               unsigned index, double q);

/* Stalls by cause (1.2): the number of stalls of class class_id (or
 * TTFT_CLASS_ALL) attributed to cause c. Over the causes they add up to
 * TTFT_COUNTER_STALLS. Snapshots decoded from a 1.0/1.1 encoding have every
 * stall under TTFT_STALL_UNKNOWN. 0 for NULL s, unknown class or cause. */
TTFT_API uint64_t ttft_snapshot_stalls_by_cause(const ttft_snapshot *s, int class_id,
                                                ttft_stall_cause c);
/* The stalled time of those stalls: the sum of their whole gaps, in
 * NANOSECONDS (the name matches the exported llm_stall_seconds_total, which
 * is this value / 1e9). Exact modulo 2^64. 1.0/1.1 encodings carry no
 * stalled time: 0 there. 0 for NULL s, unknown class or cause. */
TTFT_API uint64_t ttft_snapshot_stall_seconds_by_cause(const ttft_snapshot *s, int class_id,
                                                       ttft_stall_cause c);

/* Engine-step durations (1.2), registry-wide (steps serve every class at
 * once; docs/metrics.md): count, quantile (nearest rank, same 0.5 % bound
 * as the metrics) and sum (ns) of the steps that carried prefill
 * (prefill != 0) or did not (prefill == 0). 0 for NULL s, q outside
 * [0,1], or no such step. */
TTFT_API uint64_t ttft_snapshot_engine_step_count(const ttft_snapshot *s, int prefill);
TTFT_API uint64_t ttft_snapshot_engine_step_quantile(const ttft_snapshot *s, int prefill, double q);
TTFT_API uint64_t ttft_snapshot_engine_step_sum(const ttft_snapshot *s, int prefill);

/* Number of prompt-length bands in s (edges + 1), and the lower edge of
 * band i (0 for band 0) in *lo and the upper (exclusive; UINT32_MAX for the
 * last) in *hi. TTFT_OK or TTFT_EINVAL. */
TTFT_API int ttft_snapshot_band(const ttft_snapshot *s, unsigned index, uint32_t *lo, uint32_t *hi);
TTFT_API unsigned ttft_snapshot_bands(const ttft_snapshot *s);

/* The interval a snapshot covers, ns on the monotonic clock: from registry
 * creation (or the older snapshot, for a delta) to the moment it was taken.
 * Tokens and goodput per second are computed over it. TTFT_OK / TTFT_EINVAL. */
TTFT_API int ttft_snapshot_interval(const ttft_snapshot *s, uint64_t *start_ns, uint64_t *end_ns);

/* The labels of the registry the snapshot came from: "start_point",
 * "token_point", "model" or "namespace"; NULL for anything else or NULL s. */
TTFT_API const char *ttft_snapshot_label(const ttft_snapshot *s, const char *key);

/* ------------------------------------------------------- slowest requests */

/* Which slowest list: requests ranked by their TTFT (streams that got a
 * first token) or by their longest inter-token gap (streams with at least
 * two emissions). */
typedef enum ttft_slowest_by {
  TTFT_SLOWEST_TTFT = 0,
  TTFT_SLOWEST_GAP = 1,
  TTFT_SLOWEST_COUNT_ = 2
} ttft_slowest_by;

#define TTFT_MAX_REQUEST_ID 63 /* longest ttft_request.request_id kept, bytes */
/* Most bytes of ttft_request.request_id that ttft_begin_ex reads (each byte
 * kept consumes at most 4: a whole character, or one '?' for an ill-formed
 * part of at most 3 bytes). Since 1.3. */
#define TTFT_ID_READ (4 * (TTFT_MAX_REQUEST_ID + 1))

/* One of the slowest requests, as ttft_snapshot_slowest fills it. Every
 * time is ns on the monotonic clock of the registry that measured it. */
typedef struct ttft_slow_request {
  size_t struct_size;      /* set by the caller: sizeof(ttft_slow_request)  */
  uint64_t value_ns;       /* what it is ranked by: ttft_ns or max_gap_ns   */
  uint64_t ttft_ns;        /* its TTFT; 0 when no token came                */
  uint64_t max_gap_ns;     /* its longest inter-token gap; 0 with < 2
                              emissions                                     */
  uint64_t t_begin_ns;     /* ttft_begin's time                             */
  uint64_t t_end_ns;       /* ttft_stream_end's time (it was recorded then) */
  uint64_t t_end_unix_ns;  /* t_end on the wall clock (ns since 1970), from
                              the snapshot's clock pair; 0 when unknown     */
  uint64_t tokens;         /* output tokens                                 */
  int class_id;            /* its class in this snapshot                    */
  ttft_status status;      /* how the stream ended                          */
  ttft_stall_cause cause;  /* the cause of its longest gap when that gap was
                              a stall; TTFT_STALL_UNKNOWN otherwise or when
                              no cause was recorded                         */
  char request_id[TTFT_MAX_REQUEST_ID + 1]; /* "" when none was given       */
  char trace_id[33];       /* 32 lowercase hex digits, "" when none        */
  /* ---- since 1.3: what it was judged against, and how it flowed
   * (docs/metrics.md "Fluidity"); 0 throughout from a snapshot written
   * before 1.3 (codec versions 1-4) */
  double fluidity;         /* 1 - deadlines_missed / deadlines (1 with none) */
  uint64_t deadlines;      /* token deadlines judged over the stream (a
                              cancel counts those that passed before it)   */
  uint64_t deadlines_missed; /* ... of them missed                          */
  uint64_t token_deadline_ns; /* its D (the class's token_deadline_ns, else
                              its TPOT budget); 0: no token deadlines, not
                              judged for fluidity                          */
  uint64_t ttft_slo_ns;    /* the first-token deadline it was judged
                              against: its own ttft_slo_ns, else the
                              class's ttft_ns + ttft_ns_per_prompt_token x
                              its prompt tokens; 0 = none                  */
  uint64_t tpot_slo_ns;    /* the TPOT budget it was judged against (its
                              own, else the class's); 0 = none            */
} ttft_slow_request;

/* The k slowest requests of class class_id (TTFT_CLASS_ALL: over every
 * class) by ranking `by`, recorded when each stream ended: how many the
 * snapshot holds (0 .. ttft_config.slowest_k), and the one at rank `index`
 * (0 = the slowest; of equal values the earlier end ranks first). A
 * snapshot's lists cover its interval (ttft_snapshot_interval): since
 * registry creation for ttft_snapshot_take; a merge keeps the k slowest of
 * the union; a delta keeps the requests of newer's lists that ended after
 * older was taken (the window's slowest among the registry's k slowest so
 * far: every one listed ended in the window, but the list can hold fewer
 * than k — see docs/metrics.md "Which requests"). Streams still in flight
 * are not listed, nor is a stream whose value is 0 (a TTFT of 0 ns: a
 * first token at, or clamped to, its begin; a longest gap of 0 ns). The
 * lists are exact for streams ended on threads with a private shard. On
 * the shared shard (threads past max_threads, and hooks called from a
 * signal handler that interrupted a hook) two ends may offer to the same
 * list at once: the later one scans again while the other writes, but
 * after ~4096 polls (the writer preempted, or interrupted by the handler)
 * it takes the smallest entry no one is writing rather than wait in the
 * hook: the other writer's value may then stand in place of a larger one
 * (rarely, it is left out). ttft_snapshot_slowest fills *out up to
 * out->struct_size (an older, smaller struct is filled up to its size) and
 * returns TTFT_OK, TTFT_ERANGE (index past the count) or TTFT_EINVAL (NULL
 * s/out, bad struct_size, unknown class or ranking). Thread-safe
 * (snapshots are immutable). */
TTFT_API unsigned ttft_snapshot_slowest_count(const ttft_snapshot *s, int class_id,
                                              ttft_slowest_by by);
TTFT_API int ttft_snapshot_slowest(const ttft_snapshot *s, int class_id, ttft_slowest_by by,
                                   unsigned index, ttft_slow_request *out);

/* ------------------------------------------------------------- live state */

/* What a live sequence looks like right now. */
typedef struct ttft_seq_info {
  size_t struct_size;     /* set by the caller: sizeof(ttft_seq_info)      */
  int class_id;
  uint32_t emissions;     /* emission events so far                        */
  uint64_t tokens;        /* tokens so far                                 */
  uint64_t t_begin_ns;
  uint64_t t_last_ns;     /* last emission (t_begin before the first one)  */
  uint64_t ttft_ns;       /* 0 until the first emission                    */
  uint64_t itl_p50_ns;    /* from the sequence's own gap histogram (~3 %)  */
  uint64_t itl_p95_ns;    /*   0 until there are two emissions             */
  uint64_t itl_max_ns;    /* exact worst gap so far                        */
  uint32_t stalls;        /* stall gaps so far                             */
  uint32_t preemptions;
  int last_stall_cause;   /* (1.2) ttft_stall_cause of the latest stall;
                             -1 while stalls == 0                          */
  /* ---- since 1.3 */
  double fluidity;        /* 1 - missed / deadlines so far (1 with none);
                             docs/metrics.md "Fluidity"                    */
  uint64_t deadlines;     /* token deadlines judged so far                 */
  uint64_t deadlines_missed; /* ... of them missed                          */
  uint64_t ttft_slo_ns;   /* its first-token deadline as known now (its own
                             target, else the class's with the per-token
                             term for the prompt known so far); 0 none    */
  uint64_t tpot_slo_ns;   /* its TPOT budget (own, else the class's)       */
} ttft_seq_info;

/* Fill *out with live sequence s. out->struct_size must be set (a smaller
 * older struct is filled up to its size). Returns TTFT_OK, TTFT_EINVAL
 * (NULL r/out, bad struct_size), TTFT_ESTALE (ended or unknown handle).
 * Thread-safe against the hooks; a value may be one event behind. */
TTFT_API int ttft_seq_stats(const ttft_registry *r, ttft_seq s, ttft_seq_info *out);

/* In-flight sequences whose last emission is older than their class's
 * stall budget at now_ns (TTFT_NOW = r's clock) — stalls that have not
 * closed yet, which no ITL observation can show. Only sequences that have
 * emitted at least one token count (before that the wait is TTFT).
 * Returns the count, or TTFT_EINVAL for NULL. Thread-safe; O(max_inflight). */
TTFT_API long ttft_stalled_now(const ttft_registry *r, uint64_t now_ns);

/* Sequences begun and not yet ended, or TTFT_EINVAL for NULL. Thread-safe. */
TTFT_API long ttft_inflight(const ttft_registry *r);

/* ---------------------------------------------------------------- names */

/* Stable lower-case names used by JSON, Python and the tools: "ttft",
 * "tpot", ..., "completed", "stalls", ... NULL for out-of-range values. */
TTFT_API const char *ttft_metric_name(ttft_metric m);
TTFT_API const char *ttft_counter_name(ttft_counter c);
TTFT_API const char *ttft_status_name(ttft_status st);
TTFT_API const char *ttft_format_name(ttft_format f);
/* "unknown", "prefill", "preempted", "not_scheduled", "engine_idle" (the
 * cause label of llm_stalls_total); NULL for out-of-range values. */
TTFT_API const char *ttft_stall_cause_name(ttft_stall_cause c);

/* ---------------------------------------------------------------- memory */

/* Bytes of memory r holds: exactly what it allocated — the fixed part
 * (slots, shards, class headers) plus histogram buckets (at most
 * config.memory_limit). Grows only in ttft_class_add and
 * ttft_snapshot_take, never in a hook. 0 for NULL. Thread-safe. */
TTFT_API size_t ttft_registry_memory(const ttft_registry *r);

/* ==========================================================================
 * TIER 3 — SETUP: CONFIGURATION, CLASSES, MEMORY, CLOCKS, TRAVEL, HTTP
 *
 * A registry's configuration (labels that say where the clock starts,
 * prompt bands, classic bucket bounds, native histogram schema, memory
 * limit), classes with SLO budgets and the requests that name them, the
 * allocator hook, threads and clocks, snapshots that travel between
 * processes (encode/decode, merge for fleets, delta for intervals), and
 * the optional /metrics endpoint. Structs start with struct_size: always
 * initialise them with their _init function.
 * ========================================================================== */

/* ------------------------------------------------------------- configuration */

#define TTFT_MAX_BANDS 8          /* prompt-length bands (edges + 1)           */
#define TTFT_MAX_LABEL 128        /* longest label value kept, bytes           */
#define TTFT_MAX_INFLIGHT (1u << 20) /* largest max_inflight (about 1 GiB of slots) */
#define TTFT_DEFAULT_MEMORY_LIMIT (UINT64_C(256) << 20) /* ttft_config.memory_limit */
#define TTFT_MIN_MEMORY_LIMIT (UINT64_C(1) << 20)
#define TTFT_MAX_CONST_LABELS 8   /* constant labels on every exported series  */
#define TTFT_MAX_PROM_BUCKETS 64  /* Prometheus buckets per metric             */
#define TTFT_PROM_CONFIG_METRICS 11 /* metrics 0..10 have configurable classic
                                     buckets (ttft_config.prom_buckets); later
                                     metrics use a sibling's (ITL_PER_TOKEN:
                                     ITL's). Frozen: it sizes ttft_config.     */
#define TTFT_CLASS_ALL (-1)       /* "every class" in per-class queries        */
#define TTFT_CLASS_DEFAULT 0      /* the class every registry has              */

typedef struct ttft_label {
  const char *name;  /* [a-zA-Z_][a-zA-Z0-9_]*, 1..63 bytes, not reserved */
  const char *value; /* any UTF-8; escaped on output */
} ttft_label;

/* Label names the exporters write themselves, so a constant label may not
 * use them (ttft_registry_new refuses the configuration and
 * ttft_config_check says which one), nor any name that starts with "__"
 * (Prometheus reserves those). "process" (1.3) is the label of a gathered
 * per-process view (TTFT_GATHER_BY_PROCESS). A comma-separated list of string literals,
 * e.g. `static const char *const reserved[] = {TTFT_RESERVED_LABELS};`. */
#define TTFT_RESERVED_LABELS                                                      \
  "class", "model", "status", "le", "quantile", "start_point", "token_point",     \
      "version", "slo", "prefix_cache", "prompt_tokens", "view", "kind", "window",  \
      "cause", "prefill", "process"

/* Memory hooks. alloc(ctx, size) returns NULL on failure; free(ctx, p)
 * accepts NULL. */
typedef struct ttft_allocator {
  void *(*alloc)(void *ctx, size_t size);
  void (*free)(void *ctx, void *p);
  void *ctx;
} ttft_allocator;

typedef enum ttft_clock {
  TTFT_CLOCK_MONOTONIC = 0, /* clock_gettime(CLOCK_MONOTONIC)                      */
  TTFT_CLOCK_TSC = 1,       /* the CPU's counter calibrated onto CLOCK_MONOTONIC's
                               epoch and rate: an invariant TSC on x86, (1.3) the
                               generic timer CNTVCT_EL0 on aarch64 Linux; falls
                               back to MONOTONIC when there is none, or it does
                               not agree with CLOCK_MONOTONIC at start-up. Never
                               goes back, per thread and across threads; stays
                               within microseconds of CLOCK_MONOTONIC          */
  TTFT_CLOCK_FASTEST = 2,   /* (1.3) whichever of the two reads faster here,
                               measured once per process (about 2 us, at the
                               first registry that asks); ttft_registry_clock
                               says which                                       */
  TTFT_CLOCK_COUNT_ = 3
} ttft_clock;

/* Registry configuration. Always start from ttft_config_init(): it sets
 * struct_size, which lets the struct grow in later minor versions. Strings
 * are copied at ttft_registry_new; they may be freed afterwards. */
struct ttft_config {
  size_t struct_size;          /* sizeof(ttft_config), set by ttft_config_init */
  uint32_t max_inflight;       /* sequence slots; default 4096; 1 ..
                                  TTFT_MAX_INFLIGHT. ~960 bytes each, all
                                  allocated and touched at creation. An ended
                                  stream's slot is reused once no hook call
                                  that saw it live is still running (no timer;
                                  docs/design.md): size it for the peak in
                                  flight plus a small margin.                 */
  uint32_t max_threads;        /* threads that get a private recording shard;
                                  default 8; 0 .. 256. Further threads record
                                  through one shared shard with atomic adds.   */
  uint32_t max_classes;        /* classes including "default"; default 16      */
  uint64_t stall_threshold_ns; /* default stall budget; default 500 ms         */
  ttft_clock clock;            /* TTFT_NOW's clock; default MONOTONIC          */
  const char *start_point;     /* where t_begin is taken; default "server_arrival" */
  const char *token_point;     /* what counts as an emitted token;
                                  default "detokenized_flush"                   */
  const char *model;           /* model label; default ""                       */
  const char *metric_namespace;/* prefix for non-OTel metric names; default "llm_" */
  const ttft_label *const_labels; /* constant labels added to every series     */
  uint32_t n_const_labels;     /* 0 .. TTFT_MAX_CONST_LABELS                   */
  uint32_t n_prompt_bands;     /* number of band edges used, 0 .. TTFT_MAX_BANDS-1 */
  uint32_t prompt_band_edges[TTFT_MAX_BANDS - 1];
                               /* ascending prompt-token edges; band i holds
                                  edges[i-1] <= prompt_tokens < edges[i].
                                  default 6 edges: 128 512 2048 8192 32768 131072 */
  /* Prometheus/OpenMetrics bucket upper bounds per metric, ascending, in ns
   * (tokens for OUTPUT_TOKENS). NULL = the default for that metric. */
  const uint64_t *prom_buckets[TTFT_PROM_CONFIG_METRICS];
  uint32_t prom_n_buckets[TTFT_PROM_CONFIG_METRICS];
  int prom_summaries;          /* also export p50..p99.9 summary series; default 0 */
  /* ---- since 1.1 (struct_size tells the library whether they are there) */
  int native_histograms;       /* 1 (default): the protobuf exposition carries
                                  Prometheus native (exponential) buckets
                                  beside the classic ones; 0: classic only   */
  int native_schema;           /* native bucket schema, -4 .. 8: bucket
                                  boundaries grow by 2^(2^-schema); default 7
                                  (0.54 % wide buckets; PromQL quantiles
                                  within 0.94 % of exact), docs/prometheus.md */
  int export_idle_classes;     /* which classes every exposition and report
                                  shows. A class added with ttft_class_add is
                                  always shown, at zero from the call on (a
                                  series' first sample then holds no
                                  observation: rate() and increase() count
                                  the first requests; docs/prometheus.md).
                                  Idle = never added: the default class
                                  (class 0) until a begin uses it. 0
                                  (default): leave it out while idle; 1:
                                  show it at zero from creation on — set 1
                                  when the server records into the default
                                  class only, so that its first requests
                                  reach rate() too. (1.2 and before: 0 also
                                  left out added classes until their first
                                  begin.)                                    */
  uint64_t memory_limit;       /* bytes of histogram buckets the registry may
                                  allocate as values arrive; default
                                  TTFT_DEFAULT_MEMORY_LIMIT (256 MiB), at least
                                  TTFT_MIN_MEMORY_LIMIT. Buckets cost 1 KiB per
                                  power of two of the value range a (thread,
                                  class, metric) records, allocated outside the
                                  hooks (creation, class_add, snapshots);
                                  creation and each class_add set aside 160 KiB
                                  per shard and class (at most an eighth of the
                                  limit), what realistic values attach before
                                  a first snapshot. Slots, shards and class
                                  headers are the fixed part, allocated at
                                  creation and ttft_class_add. At the limit
                                  values are still counted exactly but binned
                                  by power of two only (TTFT_GAUGE_COARSE).
                                  docs/design.md "Memory"                     */
  /* ---- since 1.2 */
  uint32_t prefix_hit_min_tokens; /* ttft_annotate_cached: fewer cached
                                  tokens than this is a prefix-cache MISS
                                  (every server reuses at least a BOS
                                  token); default 16, at least 1          */
  uint32_t slowest_k;          /* requests kept per class in each slowest
                                  list (ttft_snapshot_slowest); default 8,
                                  0 .. TTFT_MAX_SLOWEST_K; 0 = no lists, no
                                  ids kept, no exemplars. Costs 2 x k x 144
                                  bytes per (thread shard, class) plus 88
                                  bytes per slot (docs/performance.md)      */
  /* ---- since 1.3: many processes, one truth (docs/multiprocess.md) */
  const char *shared_dir;      /* publish this registry's whole state into a
                                  segment of its own in this directory
                                  (tmpfs: /dev/shm/NAME), read by
                                  ttft_gather_*; NULL (default) = off. The
                                  directory must exist, belong to this
                                  process's user and not be group- or
                                  world-writable; a network file system is
                                  refused (ttft_config_check says why)      */
  const char *process_name;    /* this process in per-process views (label
                                  process); 1..63 bytes of [A-Za-z0-9_.:-];
                                  NULL (default) = "pid-<pid>". Give a stable
                                  name (api-0, dp-3) to keep a series across
                                  restarts                                  */
  uint32_t publish_interval_ms;/* what a gatherer sees is at most this old:
                                  a background thread publishes at least
                                  this often; default 100, 10 .. 3600000; 0
                                  = no thread, the host calls ttft_publish */
};

#define TTFT_MAX_SLOWEST_K 64     /* largest ttft_config.slowest_k            */

/* Fill cfg with the defaults documented above and set struct_size to the
 * library's sizeof(ttft_config). NULL is a no-op. A program compiled
 * against an older, smaller ttft_config than the library it runs with must
 * use ttft_config_init_sized (bindings should always use it). */
TTFT_API void ttft_config_init(ttft_config *cfg);

/* Fill the first size bytes of *cfg with the defaults and set
 * cfg->struct_size = size; writes nothing past size. size must be at least
 * sizeof(size_t) (else nothing is written). NULL is a no-op. */
TTFT_API void ttft_config_init_sized(ttft_config *cfg, size_t size);

/* Why ttft_registry_new would refuse configuration c: returns TTFT_OK when
 * it is accepted (c NULL = the defaults, accepted), else TTFT_EINVAL and a
 * one-line English reason naming the field, its value and the rule, e.g.
 * `const_labels[1].name "view" is reserved (the exporters write it; see
 * TTFT_RESERVED_LABELS)`. The reason is written into why (capacity n,
 * always NUL-terminated when n > 0, truncated to fit, never a newline);
 * why may be NULL when n is 0. ttft_registry_new refuses exactly the
 * configurations this refuses, and otherwise fails only when memory is
 * short. Reads c only; thread-safe. */
TTFT_API int ttft_config_check(const ttft_config *c, char *why, size_t n);

/* Replace the allocator used for every later allocation of the library
 * (registries, snapshots, formatting scratch, HTTP). NULL restores malloc.
 * Objects remember the allocator that made them and free with it. Not
 * thread-safe against concurrent library calls that allocate: set it at
 * start-up. Returns TTFT_OK, or TTFT_EINVAL when a != NULL lacks alloc/free. */
TTFT_API int ttft_set_allocator(const ttft_allocator *a);

/* ----------------------------------------------------------------- classes */

/* SLO budgets of a class. 0 = no budget for that dimension. */
struct ttft_slo {
  size_t struct_size;          /* sizeof(ttft_slo), set by ttft_slo_init */
  uint64_t ttft_ns;            /* TTFT budget                              */
  uint64_t tpot_ns;            /* TPOT budget (met when no TPOT exists)    */
  uint64_t e2e_ns;             /* end-to-end budget                        */
  uint64_t stall_threshold_ns; /* stall budget; 0 = the registry default   */
  /* ---- since 1.3 (an older caller's smaller struct leaves them at the
   * ttft_slo_init defaults) */
  uint64_t ttft_ns_per_prompt_token; /* length-aware first-token deadline:
                                  ttft_ns + ttft_ns_per_prompt_token *
                                  prompt_tokens (the prompt length known at
                                  the first token: ttft_request or
                                  ttft_annotate; unknown = ttft_ns alone).
                                  The TTFT dimension is budgeted when that
                                  deadline is not 0. A request's own
                                  ttft_slo_ns replaces the whole deadline
                                  (the per-token term does not apply).
                                  0 = a fixed budget                      */
  uint64_t token_deadline_ns;  /* D of the fluidity rule (docs/metrics.md
                                  "Fluidity"): every token after the first
                                  is due D after the one before it, slack
                                  carried forward. 0 = the request's TPOT
                                  budget (its ttft_request.tpot_slo_ns,
                                  else tpot_ns); a stream whose D is 0 has
                                  no token deadlines and is not judged for
                                  fluidity. A D above 2^62 ns (146 years)
                                  is taken as 2^62, as is the slack. The
                                  deadline counters are 64-bit: a D of a
                                  few ns against gaps of centuries could
                                  pass 2^64 (no real stream can)         */
  double fluid_min;            /* a stream is fluid when it ends COMPLETED
                                  with fluidity >= fluid_min; 0 .. 1,
                                  default 0.9 (Etalon's)                   */
};

/* Zero budgets, fluid_min 0.9, struct_size = the library's sizeof(ttft_slo). NULL is a
 * no-op. ttft_slo_init_sized writes only the first size bytes (see
 * ttft_config_init_sized). */
TTFT_API void ttft_slo_init(ttft_slo *slo);
TTFT_API void ttft_slo_init_sized(ttft_slo *slo, size_t size);

/* Add a class (e.g. "chat", "batch") with its SLO budgets (slo NULL = no
 * budgets). name: 1..63 bytes of [A-Za-z0-9_.:-]. Returns the class id
 * (>= 1) on success, TTFT_EINVAL (NULL r/name, bad name, bad struct_size,
 * fluid_min outside 0 .. 1),
 * TTFT_EEXIST (name taken; "default" is class 0), TTFT_EFULL (max_classes
 * reached) or TTFT_ENOMEM. Thread-safe, also against hooks; allocates.
 * Since 1.3 the class is exported at zero from this call on (every
 * histogram, counter and ratio series it has), before its first request:
 * add the classes, and start the endpoint, at start-up (docs/integration.md). */
TTFT_API int ttft_class_add(ttft_registry *r, const char *name, const ttft_slo *slo);

/* The id of class name, or TTFT_EINVAL (NULL) / TTFT_ESTALE (no such class).
 * Thread-safe. */
TTFT_API int ttft_class_find(const ttft_registry *r, const char *name);

/* ---------------------------------------------------------------- requests */

/* What the scheduler knows about a request when it arrives. */
typedef struct ttft_request {
  size_t struct_size;     /* sizeof(ttft_request), set by ttft_request_init */
  int class_id;           /* from ttft_class_add; 0 = default               */
  uint32_t prompt_tokens; /* prompt length; 0 = unknown (no band split)     */
  int prefix_hit;         /* 1 prefix-cache hit, 0 miss, -1 unknown (the
                             counts, with a PARTIAL band: ttft_annotate_cached) */
  /* ---- since 1.2 (an older caller's smaller struct leaves them NULL) */
  const char *request_id; /* the server's id of the request, NULL = none.
                             Copied at begin (the caller may free it right
                             after): at most TTFT_MAX_REQUEST_ID bytes are
                             kept, a longer id is cut at the last whole
                             UTF-8 character that fits; bytes that are not
                             well-formed UTF-8 (one '?' per maximal
                             ill-formed part) and control characters
                             (< 0x20, 0x7F) are stored as '?'. No value
                             fails the begin. It ends at its first NUL; at
                             most TTFT_ID_READ bytes are read, so a caller
                             may cut a longer id there (a NUL-terminated
                             copy) without changing what is kept: the
                             bindings do, and pass a NUL inside an id as
                             '?'. Shown with the slowest requests
                             (ttft_snapshot_slowest).                      */
  const char *trace_id;   /* W3C trace-context trace-id, NULL = none:
                             exactly 32 lowercase hex digits, not all zero
                             (the second field of a traceparent header).
                             Anything else ("" included) is ignored — the
                             request is still measured — and counted in
                             TTFT_COUNTER_TRACE_ID_INVALID. At most 33
                             bytes are read. Exported as the exemplar
                             label trace_id (OpenMetrics, protobuf).       */
  /* ---- since 1.3 */
  const char *traceparent; /* a W3C traceparent header value as received,
                             NULL = none: its trace-id is taken as
                             ttft_traceparent_parse takes it, when
                             trace_id is NULL (trace_id wins when both
                             are set; traceparent is then not read). An
                             invalid header is ignored — the request is
                             still measured — and counted in
                             TTFT_COUNTER_TRACE_ID_INVALID, as an
                             invalid trace_id is.                         */
  uint64_t ttft_slo_ns;   /* this request's own first-token deadline, ns
                             after begin (a router's x-llm-d-slo-ttft-ms
                             header); 0 = the class's (ttft_slo.ttft_ns
                             and its per-token term). Judges this request
                             only: SLO_MET / SLO_JUDGED; the class's
                             budget gauges stay the class's             */
  uint64_t tpot_slo_ns;   /* this request's own TPOT budget, ns
                             (x-llm-d-slo-tpot-ms); 0 = the class's. Also
                             its token deadline D when the class sets no
                             token_deadline_ns                           */
} ttft_request;

/* The trace-id of a W3C trace-context traceparent header value as a server
 * receives it, e.g. "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":
 * version "00" is exactly version-traceid-parentid-flags, 2-32-16-2
 * lowercase hex digits joined by '-'; a higher version (not "ff") is read
 * as the W3C rule says: at least 55 characters, its first four fields as
 * version 00's, then the end or a '-' (what follows is not read). The
 * trace-id and parent-id must not be all zero. Spaces and tabs around the
 * value (HTTP optional whitespace) are skipped. On success writes the 32
 * hex digits and a NUL to trace_id_out (NULL: only checks) and returns
 * TTFT_OK; else TTFT_EINVAL (NULL header, anything else) and writes ""
 * when trace_id_out is not NULL. Reads at most up to the value's NUL.
 * Thread-safe, no allocation. Since 1.3. */
TTFT_API int ttft_traceparent_parse(const char *header, char trace_id_out[33]);

/* class 0, prompt unknown, prefix unknown, no ids; struct_size = the
 * library's sizeof(ttft_request). NULL is a no-op. ttft_request_init_sized
 * writes only the first size bytes (see ttft_config_init_sized). */
TTFT_API void ttft_request_init(ttft_request *req);
TTFT_API void ttft_request_init_sized(ttft_request *req, size_t size);

/* ttft_begin with request details. req NULL = ttft_request_init defaults.
 * Returns 0 (and counts DROPPED) when no slot is free, 0 (counted
 * CLOCK_REFUSED) for a wall-clock t_ns (see TTFT_ECLOCK), 0 without
 * counting for NULL r or an invalid req (bad struct_size, unknown
 * class_id). */
TTFT_API ttft_seq ttft_begin_ex(ttft_registry *r, const ttft_request *req, uint64_t t_ns);

/* ttft_begin_ex that says why a begin was refused: *out = the handle and
 * TTFT_OK, or *out = 0 and TTFT_EINVAL (NULL r or out, invalid req; not
 * counted), TTFT_EFULL (no free slot; counted DROPPED) or TTFT_ECLOCK
 * (t_ns is a wall-clock time: more than TTFT_CLOCK_AHEAD_NS ahead of r's
 * clock and within it of CLOCK_REALTIME's now; counted CLOCK_REFUSED). Same cost and guarantees as ttft_begin_ex;
 * ttft_begin and ttft_begin_ex refuse the same begins, returning 0. The
 * bindings use this one to raise the right error. Since 1.3. */
TTFT_API int ttft_begin_checked(ttft_registry *r, const ttft_request *req, uint64_t t_ns,
                                ttft_seq *out);

/* ----------------------------------------------------------- threads, clock */

/* Release the calling thread's private recording shard of r, so that a
 * thread about to exit hands it to a new thread (threads that simply exit
 * release it automatically when pthreads are available). Recorded data stays.
 * A thread that left a hook of r by siglongjmp calls this afterwards: the
 * abandoned call is closed (until then the thread's later calls record
 * through the shared shard and the one slot the abandoned call was inside
 * is not reused). A thread that
 * dies inside a hook (pthread_exit in a signal handler, an asynchronous
 * cancel) needs nothing: its exit closes the call. Hooks may be called
 * from a signal handler that interrupted a hook of the same thread (the
 * nested call is recorded through the shared shard, both are counted),
 * provided the thread has called a hook of that registry before; this
 * function may not. docs/reliability.md, issue 18.
 * Returns TTFT_OK, or TTFT_EINVAL for NULL. */
TTFT_API int ttft_thread_release(ttft_registry *r);

/* Nanoseconds on r's configured clock (MONOTONIC or calibrated TSC, same
 * epoch and rate as ttft_now_ns). This is what TTFT_NOW means in r's hooks.
 * NULL: same as ttft_now_ns(). Thread-safe. */
TTFT_API uint64_t ttft_registry_now_ns(const ttft_registry *r);

/* (1.3) The clock r's TTFT_NOW reads: TTFT_CLOCK_MONOTONIC or
 * TTFT_CLOCK_TSC, never FASTEST (resolved at ttft_registry_new), MONOTONIC
 * for a TSC registry on a machine without a usable counter, and for NULL.
 * Thread-safe; fixed for r's lifetime. */
TTFT_API ttft_clock ttft_registry_clock(const ttft_registry *r);

/* ------------------------------------------------------ snapshots that travel */

/* Merge: a new snapshot holding the observations of a and b (classes matched
 * by name, counters and histogram counts added, intervals joined). Fleet
 * percentiles come from merged counts, never from averaged percentiles.
 * Labels are taken from a. NULL on error, with *err set when err is
 * non-NULL: TTFT_EINVAL for NULL a or b; TTFT_ERANGE when the union has
 * more than 4096 classes (no encoding could carry it) or a counter or
 * histogram count would pass 2^64 - 1 (nothing is silently wrapped);
 * TTFT_ENOMEM. Thread-safe. */
TTFT_API ttft_snapshot *ttft_snapshot_merge(const ttft_snapshot *a, const ttft_snapshot *b, int *err);

/* Delta: what happened between older and newer, two snapshots of one
 * registry (newer taken later). Counters and histograms subtract; min and
 * max are recomputed from the bucket of the interval (within bucket
 * resolution), gauges are newer's. NULL with *err = TTFT_EINVAL when the
 * snapshots are not of one registry in that order, TTFT_ENOMEM. */
TTFT_API ttft_snapshot *ttft_snapshot_delta(const ttft_snapshot *newer, const ttft_snapshot *older, int *err);

/* Encode s into a compact, versioned, checksummed binary form. snprintf
 * rules: returns the full size needed; writes nothing past cap. TTFT_EINVAL
 * for NULL s or buf NULL with cap > 0. */
TTFT_API long ttft_snapshot_encode(const ttft_snapshot *s, void *buf, size_t cap);

/* Decode untrusted bytes. Every length and count is checked before
 * anything is allocated; NULL with *err = TTFT_ECORRUPT for anything
 * malformed, TTFT_EINVAL for NULL buf, TTFT_ENOMEM. Never reads past len;
 * never allocates more than 64 bytes per input byte plus 256 KiB, whatever
 * the input claims. Thread-safe. */
TTFT_API ttft_snapshot *ttft_snapshot_decode(const void *buf, size_t len, int *err);

/* The same encoding as one line of base64 text (RFC 4648, no newlines),
 * NUL-terminated, snprintf rules. */
TTFT_API long ttft_snapshot_encode_base64(const ttft_snapshot *s, char *buf, size_t cap);
TTFT_API ttft_snapshot *ttft_snapshot_decode_base64(const char *text, size_t len, int *err);

/* ------------------------------------------- many processes, one truth */
/* docs/multiprocess.md. A registry created with ttft_config.shared_dir
 * publishes its whole state (every class, histogram, counter, gauge,
 * slowest list, exemplar, engine-step and stall-cause figure) into its own
 * segment file in that directory: from a background thread every
 * publish_interval_ms, at ttft_publish, at ttft_registry_free and at normal
 * process exit. A segment is replaced whole (written aside, then renamed):
 * a writer never waits for a reader, a reader never sees a torn segment.
 * A process is identified by pid, start time and a random nonce, and holds
 * a lock on its own lock file while it lives; a child forked from it that
 * keeps recording publishes as a new process (from zero: what the parent
 * recorded before the fork stays the parent's; its slowest lists start
 * empty; its in-flight gauge still counts the sequences it inherited live
 * until it ends them). The background thread blocks every signal (a
 * file-size limit fails a publish with EFBIG instead of killing the
 * process); a failed publish is counted in TTFT_COUNTER_PUBLISH_FAILED and
 * said once per registry on stderr, the only output of the library. */

/* Publish r's state into its segment now (the background thread does this
 * every publish_interval_ms). Returns TTFT_OK; TTFT_EINVAL for NULL or a
 * registry without shared_dir; TTFT_EIO when writing the segment failed
 * (counted in TTFT_COUNTER_PUBLISH_FAILED; recording goes on); TTFT_ENOMEM.
 * Thread-safe; never called from the hooks; takes a snapshot (cost as
 * ttft_snapshot_take) and writes one file. */
TTFT_API int ttft_publish(ttft_registry *r);

typedef struct ttft_gather ttft_gather; /* opaque */

#define TTFT_GATHER_BY_PROCESS 1u /* keep processes apart: every series of the
                                     expositions carries a process label
                                     (right after class; but the gatherer's
                                     own segments_skipped, processes_exited
                                     and processes keep one unlabelled one)
                                     (the process_name; processes that
                                     exited without a stable name fold into
                                     process="exited"); the snapshot's own
                                     accessors still read the merged view */

/* Open directory dir for gathering: what every process that published
 * there recorded, merged. flags: 0 or TTFT_GATHER_BY_PROCESS. Checks dir
 * as the publishers do (exists, belongs to this user, not group- or
 * world-writable, no network file system). Returns NULL on failure, with
 * errno set (ENOENT, EACCES for a directory open to others or of another
 * user, EREMOTE for a network file system, EINVAL for NULL or unknown
 * flags, ENOMEM). Thread-safe. */
TTFT_API ttft_gather *ttft_gather_open(const char *dir, unsigned flags);

/* ttft_gather_open, and why it failed as one line of text in msg
 * (snprintf rules; "" on success). msg may be NULL when cap is 0. */
TTFT_API ttft_gather *ttft_gather_open_msg(const char *dir, unsigned flags, char *msg, size_t cap);

/* One merged snapshot of every live process's latest segment and of the
 * directory's archive (the last published state of every process that
 * exited, was killed or crashed). Usable with every snapshot function and
 * format; free with ttft_snapshot_free. A process found dead is folded
 * into the archive here, under a lock shared by every gatherer of the
 * directory (two gatherers never count a process twice or lose one); its
 * gauges leave the view, its counters, buckets, counts and sums stay.
 * Bad segments (truncated, corrupt, hostile, future version, another
 * user's) are skipped and counted (TTFT_COUNTER_SEGMENTS_SKIPPED). NULL on
 * ENOMEM or when dir is gone, with errno set. Thread-safe: concurrent
 * calls on one gather share one merge. */
TTFT_API ttft_snapshot *ttft_gather_take(ttft_gather *g);

/* Close g. NULL is a no-op. Must not race ttft_gather_take on g. */
TTFT_API void ttft_gather_close(ttft_gather *g);

/* ------------------------------------------------------------- endpoint */

typedef struct ttft_http ttft_http; /* opaque */

/* Serve r over HTTP on addr ("127.0.0.1:9464", "[::1]:9464", ":9464" means
 * 127.0.0.1; port 0 picks a free port): GET /metrics (Prometheus text;
 * OpenMetrics or the protobuf exposition when Accept asks for them, text
 * when the protobuf format fails; docs/http.md), /report (text),
 * /report.json. One background thread; at most 64 connections (a full
 * table drops its oldest idle or stuck one for a newcomer), bounded request
 * size, deadlines, and at most 64 MiB of rendered responses, shared between
 * clients and reused for at least 250 ms. *out receives the server. Returns
 * TTFT_OK, TTFT_EINVAL (NULL, bad address), TTFT_EIO (bind/listen failed),
 * TTFT_ENOMEM, TTFT_ENOTSUP (built without HTTP). r must outlive the
 * server. Thread-safe. */
TTFT_API int ttft_http_start(ttft_registry *r, const char *addr, ttft_http **out);

/* ttft_http_start, and why it failed as one line of text in msg (snprintf
 * rules: at most cap bytes, NUL-terminated; "" on success), naming the
 * address and the reason, e.g. "127.0.0.1:9464: bind: Address already in
 * use" for a busy port (the return value is still TTFT_EIO), or
 * ":99999: not an address (...)". msg may be NULL when cap is 0. Since 1.3. */
TTFT_API int ttft_http_start_msg(ttft_registry *r, const char *addr, ttft_http **out, char *msg,
                                 size_t cap);

/* Serve gather g (every process of its directory, one endpoint) as
 * ttft_http_start serves a registry: the same paths, formats and limits;
 * concurrent scrapes share one merge. g must outlive the server. Returns
 * as ttft_http_start_msg. Since 1.3. Every server, registry or gather,
 * also answers GET /snapshot with the ttft_snapshot_encode bytes
 * (application/octet-stream). */
TTFT_API int ttft_http_start_gather(ttft_gather *g, const char *addr, ttft_http **out, char *msg,
                                    size_t cap);

/* The TCP port the server listens on, or TTFT_EINVAL for NULL. */
TTFT_API int ttft_http_port(const ttft_http *srv);

/* Stop the server, join its thread and free it; does not wait for clients.
 * In a child forked while the server ran (where it does not serve) it only
 * frees the child's copy: closes the child's descriptors, never touches the
 * parent's server, never joins. NULL is a no-op. Once per server. */
TTFT_API void ttft_http_stop(ttft_http *srv);

/* ------------------------------------------------ OpenTelemetry push (1.3)
 * A background pusher that POSTs the registry as OTLP/HTTP protobuf
 * (TTFT_FORMAT_OTLP_PROTOBUF) to a collector every interval. Plain HTTP only
 * (a libc-only library has no TLS: send to a local collector, agent or
 * sidecar; https:// is refused). docs/opentelemetry.md. */

typedef enum ttft_otlp_temporality {
  TTFT_OTLP_CUMULATIVE = 0, /* every push carries the totals since the
                               registry was created (the default)         */
  TTFT_OTLP_DELTA = 1,      /* every push carries what changed since the
                               last push the collector accepted           */
  TTFT_OTLP_LOWMEMORY = 2   /* the OTel SDK's "lowmemory": delta for
                               synchronous counters and histograms, which
                               every libttft counter and histogram is      */
} ttft_otlp_temporality;

typedef struct ttft_otlp ttft_otlp; /* opaque */

typedef struct ttft_otlp_config {
  size_t struct_size;       /* sizeof(ttft_otlp_config): set by _init     */
  const char *endpoint;     /* "http://host:port" (the path /v1/metrics is
                               appended) or, when metrics_endpoint is set,
                               ignored; NULL: OTEL_EXPORTER_OTLP_ENDPOINT,
                               else "http://localhost:4318"                */
  const char *metrics_endpoint; /* the whole URL, used as is (NULL:
                               OTEL_EXPORTER_OTLP_METRICS_ENDPOINT)        */
  const char *headers;      /* "k1=v1,k2=v2", values percent-decoded (NULL:
                               OTEL_EXPORTER_OTLP_METRICS_HEADERS, else
                               OTEL_EXPORTER_OTLP_HEADERS)                 */
  const char *service_name; /* NULL: OTEL_SERVICE_NAME, else
                               "unknown_service"                           */
  const char *resource_attributes; /* "k1=v1,k2=v2" (NULL:
                               OTEL_RESOURCE_ATTRIBUTES)                   */
  uint32_t interval_ms;     /* between pushes; 0: OTEL_METRIC_EXPORT_INTERVAL,
                               else 60000                                  */
  uint32_t timeout_ms;      /* one push, connect to answer, retries
                               included; 0: OTEL_EXPORTER_OTLP_METRICS_TIMEOUT,
                               else OTEL_EXPORTER_OTLP_TIMEOUT, else 10000  */
  int temporality;          /* a ttft_otlp_temporality; set by _init from
                               OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE
                               (default cumulative)                        */
} ttft_otlp_config;

/* Fill c with the defaults and the OTEL_* environment (the OpenTelemetry
 * SDK's variables; docs/opentelemetry.md): every string NULL (resolved by
 * ttft_otlp_start from the environment, see the fields), interval_ms from
 * OTEL_METRIC_EXPORT_INTERVAL (else 60000), timeout_ms from
 * OTEL_EXPORTER_OTLP_METRICS_TIMEOUT, else OTEL_EXPORTER_OTLP_TIMEOUT
 * (else 10000), temporality from
 * OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE ("cumulative", "delta"
 * or "lowmemory", case-insensitive). A value that is not a positive
 * integer of milliseconds below 2^32, or not one of the three words, is
 * ignored (the default stands), as the spec asks. NULL is a no-op. Reads
 * the environment: not to be called while another thread calls setenv. */
TTFT_API void ttft_otlp_config_init(ttft_otlp_config *c);

/* Start pushing r to an OTLP/HTTP collector with configuration c (NULL:
 * ttft_otlp_config_init's). The URL is metrics_endpoint as is, else
 * endpoint with "v1/metrics" appended to its path (one '/' between), else
 * OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT +
 * v1/metrics, else http://localhost:4318/v1/metrics; the host is a name
 * (getaddrinfo, at every push), an IPv4 literal or an [IPv6] literal. The
 * strings of c are copied; c may be freed after the call. One background
 * thread (every signal blocked) pushes every interval_ms: a snapshot
 * (ttft_snapshot_take, the pusher's only contact with the registry: a hook
 * never waits for it), encoded as TTFT_FORMAT_OTLP_PROTOBUF, POSTed with
 * Content-Type application/x-protobuf and the configured headers. A push
 * is retried on 429, 502, 503, 504 and connection failures (exponential
 * backoff from 250 ms to 5 s with jitter, or Retry-After in seconds or as
 * an HTTP-date), never past timeout_ms from its start; any other status
 * drops that batch. Failed pushes lose nothing (cumulative: the next push
 * carries the totals; delta: the next push's delta starts where the last
 * accepted one ended), memory stays two snapshots and the encoded body;
 * the first failure and the first drop are each said once on stderr, and
 * every outcome is counted (ttft_otlp_stats).
 * Returns the pusher, or NULL: r NULL, a bad or https:// URL (refused: no
 * TLS in libttft; push to a local collector), bad headers, a bad
 * struct_size or temporality, out of memory. r must outlive the pusher.
 * Thread-safe. */
TTFT_API ttft_otlp *ttft_otlp_start(ttft_registry *r, const ttft_otlp_config *c);

/* ttft_otlp_start, with a code and the reason as one line in msg (snprintf
 * rules: at most cap bytes, NUL-terminated; "" on success), e.g.
 * "otlp: endpoint https://c:4318: https is not supported: ...". *out
 * receives the pusher (NULL on failure). Returns TTFT_OK, TTFT_EINVAL (r
 * or out NULL, URL, headers, struct_size, temporality), TTFT_ENOMEM,
 * TTFT_ENOTSUP (a build without HTTP). msg may be NULL when cap is 0. */
TTFT_API int ttft_otlp_start_msg(ttft_registry *r, const ttft_otlp_config *c, ttft_otlp **out,
                                 char *msg, size_t cap);

/* Push now, on the pusher's thread, and wait for the outcome (at most
 * about timeout_ms, retries included, plus a push already under way).
 * Returns TTFT_OK (the collector answered 2xx), TTFT_EIO (retries ran out,
 * or the collector refused the batch for good: it is dropped), TTFT_ENOMEM,
 * TTFT_EINVAL (NULL, or a pusher copied into a forked child). Thread-safe;
 * must not race ttft_otlp_stop on o. */
TTFT_API int ttft_otlp_flush(ttft_otlp *o);

/* What a pusher has done so far (ttft_otlp_stats fills it; named as
 * ttft_seq_stats fills ttft_seq_info). Counts only grow. */
typedef struct ttft_otlp_info {
  size_t struct_size;   /* set by the caller: sizeof(ttft_otlp_info)      */
  uint64_t pushes;      /* pushes finished: accepted + failed + dropped    */
  uint64_t accepted;    /* pushes the collector answered 2xx               */
  uint64_t failed;      /* pushes whose retries ran out (or a stop ended
                           them): nothing lost, the next push carries
                           their data (cumulative totals; delta from the
                           last accepted push)                             */
  uint64_t dropped;     /* batches refused for good (a status other than
                           2xx, 429, 502, 503, 504): in delta mode their
                           observations are lost for the collector          */
  uint64_t retries;     /* POSTs repeated after 429/502/503/504 or a
                           connection failure (not counted in pushes)      */
  uint64_t bytes_sent;  /* request bodies sent, retries included (a POST
                           whose connection never came up sends nothing)   */
  int last_status;      /* the last POST's HTTP status; 0 before the first
                           or when it got no answer                        */
  char last_error[128]; /* the last failed POST, one line ("HTTP 503",
                           "connect: Connection refused"); "" when none
                           has failed; kept after later successes          */
} ttft_otlp_info;

/* Copy o's counts into *out, filled up to out->struct_size (an older,
 * smaller struct gets its fields; last_error is cut and NUL-terminated).
 * The pusher's failures are counted here, not only said once on stderr.
 * Returns TTFT_OK, or TTFT_EINVAL (o or out NULL, struct_size below the
 * 1.3 fields up to last_status, a pusher copied into a forked child).
 * Thread-safe (a short lock the pusher's thread takes once per POST; never
 * a lock a hook takes); may run beside flush, not beside ttft_otlp_stop. */
TTFT_API int ttft_otlp_stats(const ttft_otlp *o, ttft_otlp_info *out);

/* Stop: a last push (bounded by timeout_ms; a retry wait in progress ends
 * at once and the last push begins), join the thread, free. In a child
 * forked while the pusher ran (where its thread does not exist) it only
 * frees the child's copy: no push, no join. NULL is a no-op. Once per
 * pusher. */
TTFT_API void ttft_otlp_stop(ttft_otlp *o);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TTFT_H */
