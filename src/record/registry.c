/* registry.c — configuration, creation, classes, per-thread shards and the
 * live queries (seq stats, stalled now, in-flight). */
#include <limits.h>
#include <stdalign.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/segment.h"
#include "record/publish.h"
#include "record/registry.h"

#ifdef TTFT_HAVE_PTHREADS
#include <pthread.h>
#include <sched.h>
#endif

static const uint32_t default_band_edges[] = {128, 512, 2048, 8192, 32768, 131072};

void ttft_config_init(ttft_config *cfg) {
  if (!cfg) return;
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->max_inflight = 4096;
  cfg->max_threads = 8;
  cfg->max_classes = 16;
  cfg->stall_threshold_ns = UINT64_C(500000000);
  cfg->clock = TTFT_CLOCK_MONOTONIC;
  cfg->start_point = "server_arrival";
  cfg->token_point = "detokenized_flush";
  cfg->model = "";
  cfg->metric_namespace = "llm_";
  cfg->n_prompt_bands = sizeof default_band_edges / sizeof default_band_edges[0];
  memcpy(cfg->prompt_band_edges, default_band_edges, sizeof default_band_edges);
  cfg->native_histograms = 1;
  cfg->native_schema = 7;
  cfg->export_idle_classes = 0;
  cfg->memory_limit = TTFT_DEFAULT_MEMORY_LIMIT;
  cfg->prefix_hit_min_tokens = 16;
  cfg->slowest_k = 8;
  cfg->publish_interval_ms = 100; /* shared_dir, process_name: NULL */
}

void ttft_slo_init(ttft_slo *slo) {
  if (!slo) return;
  memset(slo, 0, sizeof *slo);
  slo->struct_size = sizeof *slo;
  slo->fluid_min = 0.9;
}

void ttft_request_init(ttft_request *req) {
  if (!req) return;
  memset(req, 0, sizeof *req);
  req->struct_size = sizeof *req;
  req->prefix_hit = -1;
}

/* The _sized forms build the defaults in a full-size local and copy out
 * the prefix the caller's (possibly older, smaller) struct has. */
#define TTFT__INIT_SIZED(type, init, p, size)      \
  do {                                              \
    type full_;                                     \
    if (!(p) || (size) < sizeof(size_t)) return;    \
    init(&full_);                                   \
    full_.struct_size = (size);                     \
    memcpy((p), &full_, (size) < sizeof full_ ? (size) : sizeof full_); \
  } while (0)

void ttft_config_init_sized(ttft_config *cfg, size_t size) {
  TTFT__INIT_SIZED(ttft_config, ttft_config_init, cfg, size);
}
void ttft_slo_init_sized(ttft_slo *slo, size_t size) {
  TTFT__INIT_SIZED(ttft_slo, ttft_slo_init, slo, size);
}
void ttft_request_init_sized(ttft_request *req, size_t size) {
  TTFT__INIT_SIZED(ttft_request, ttft_request_init, req, size);
}

/* ------------------------------------------------------------ validation */
static int valid_label_name(const char *s) {
  if (!s || !*s || strlen(s) >= TTFT__NAME_MAX) return 0;
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '_'))
      return 0;
  return 1;
}

static int valid_class_name(const char *s) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n >= TTFT__NAME_MAX) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
          *s == '_' || *s == '.' || *s == ':' || *s == '-'))
      return 0;
  return 1;
}

static int valid_namespace(const char *s) {
  /* empty, or a metric-name prefix: [a-zA-Z_:][a-zA-Z0-9_:]* */
  if (!s) return 0;
  if (strlen(s) >= TTFT__NAME_MAX) return 0;
  for (const char *p = s; *p; p++) {
    int ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_' || *p == ':' ||
             (p != s && *p >= '0' && *p <= '9');
    if (!ok) return 0;
  }
  return 1;
}

/* A label or namespace as it may appear in a one-line reason: printable
 * ASCII kept, anything else shown as '?', at most 64 bytes. */
static const char *shown(const char *s, char out[72]) {
  size_t k = 0;
  if (!s) return "(null)";
  for (; *s && k < 64; s++) out[k++] = (*s >= 0x20 && *s < 0x7f && *s != '"') ? *s : '?';
  if (*s) out[k++] = '.', out[k++] = '.', out[k++] = '.';
  out[k] = '\0';
  return out;
}

/* The first rule c breaks, as a reason in why (TTFT_EINVAL), or TTFT_OK.
 * The one place that decides: ttft_registry_new and ttft_config_check
 * both call it. c is a full-size config (the caller merged the defaults). */
#define REFUSE(...) return (why && n ? (void)snprintf(why, n, __VA_ARGS__) : (void)0), TTFT_EINVAL
static int config_problem(const ttft_config *c, char *why, size_t n) {
  char a[72], b[72];
  if (c->max_inflight < 1 || c->max_inflight > TTFT_MAX_INFLIGHT)
    REFUSE("max_inflight %u is outside 1..%u (TTFT_MAX_INFLIGHT)", c->max_inflight,
           (unsigned)TTFT_MAX_INFLIGHT);
  if (c->max_threads > 256) REFUSE("max_threads %u is above 256", c->max_threads);
  if (c->max_classes < 1 || c->max_classes > 1024)
    REFUSE("max_classes %u is outside 1..1024 (class 0, \"default\", counts)", c->max_classes);
  if (c->stall_threshold_ns == 0) REFUSE("stall_threshold_ns is 0; the stall budget must be positive");
  if ((unsigned)c->clock >= TTFT_CLOCK_COUNT_)
    REFUSE("clock %d is not a ttft_clock (TTFT_CLOCK_MONOTONIC, TTFT_CLOCK_TSC or TTFT_CLOCK_FASTEST)", (int)c->clock);
  if (!valid_namespace(c->metric_namespace ? c->metric_namespace : ""))
    REFUSE("metric_namespace \"%s\" is not empty or [a-zA-Z_:][a-zA-Z0-9_:]* of at most 63 bytes",
           shown(c->metric_namespace, a));
  if (c->n_const_labels > TTFT_MAX_CONST_LABELS)
    REFUSE("n_const_labels %u is above TTFT_MAX_CONST_LABELS (%d)", c->n_const_labels,
           TTFT_MAX_CONST_LABELS);
  if (c->n_const_labels && !c->const_labels)
    REFUSE("n_const_labels is %u but const_labels is NULL", c->n_const_labels);
  for (uint32_t i = 0; i < c->n_const_labels; i++) {
    const char *nm = c->const_labels[i].name;
    if (!nm) REFUSE("const_labels[%u].name is NULL", i);
    if (!valid_label_name(nm))
      REFUSE("const_labels[%u].name \"%s\" is not a label name: [a-zA-Z_][a-zA-Z0-9_]*, 1..63 bytes", i,
             shown(nm, a));
    if (nm[0] == '_' && nm[1] == '_')
      REFUSE("const_labels[%u].name \"%s\" starts with \"__\" (reserved by Prometheus)", i, shown(nm, a));
    if (ttft__label_reserved(nm))
      REFUSE("const_labels[%u].name \"%s\" is reserved (the exporters write it; see "
             "TTFT_RESERVED_LABELS)", i, shown(nm, a));
    if (!c->const_labels[i].value) REFUSE("const_labels[%u].value (of \"%s\") is NULL", i, shown(nm, a));
    for (uint32_t j = 0; j < i; j++)
      if (!strcmp(nm, c->const_labels[j].name))
        REFUSE("const_labels[%u].name \"%s\" repeats const_labels[%u].name", i, shown(nm, b), j);
  }
  if (c->native_histograms != 0 && c->native_histograms != 1)
    REFUSE("native_histograms is %d; it must be 0 or 1", c->native_histograms);
  if (c->native_schema < -4 || c->native_schema > 8)
    REFUSE("native_schema %d is outside -4..8", c->native_schema);
  if (c->export_idle_classes != 0 && c->export_idle_classes != 1)
    REFUSE("export_idle_classes is %d; it must be 0 or 1", c->export_idle_classes);
  if (c->memory_limit < TTFT_MIN_MEMORY_LIMIT)
    REFUSE("memory_limit %llu bytes is below TTFT_MIN_MEMORY_LIMIT (%llu)",
           (unsigned long long)c->memory_limit, (unsigned long long)TTFT_MIN_MEMORY_LIMIT);
  if (c->n_prompt_bands > TTFT_MAX_BANDS - 1)
    REFUSE("n_prompt_bands %u is above %d (TTFT_MAX_BANDS - 1)", c->n_prompt_bands, TTFT_MAX_BANDS - 1);
  for (uint32_t i = 0; i < c->n_prompt_bands; i++) {
    if (c->prompt_band_edges[i] == 0) REFUSE("prompt_band_edges[%u] is 0; edges are at least 1 token", i);
    if (i && c->prompt_band_edges[i] <= c->prompt_band_edges[i - 1])
      REFUSE("prompt_band_edges[%u] = %u is not above prompt_band_edges[%u] = %u (edges ascend)", i,
             c->prompt_band_edges[i], i - 1, c->prompt_band_edges[i - 1]);
  }
  if (c->slowest_k > TTFT_MAX_SLOWEST_K)
    REFUSE("slowest_k %u is above TTFT_MAX_SLOWEST_K (%d)", c->slowest_k, TTFT_MAX_SLOWEST_K);
  for (int m = 0; m < TTFT_PROM_CONFIG_METRICS; m++) {
    if (!c->prom_buckets[m]) continue;
    uint32_t k = c->prom_n_buckets[m];
    if (k == 0 || k > TTFT_MAX_PROM_BUCKETS)
      REFUSE("prom_n_buckets[%d] (%s) is %u; with prom_buckets[%d] set it must be 1..%d", m,
             ttft_metric_name((ttft_metric)m), k, m, TTFT_MAX_PROM_BUCKETS);
    for (uint32_t i = 1; i < k; i++)
      if (c->prom_buckets[m][i] <= c->prom_buckets[m][i - 1])
        REFUSE("prom_buckets[%d] (%s): bound %u (%llu) is not above bound %u (%llu); bounds ascend", m,
               ttft_metric_name((ttft_metric)m), i, (unsigned long long)c->prom_buckets[m][i], i - 1,
               (unsigned long long)c->prom_buckets[m][i - 1]);
  }
  if (c->prefix_hit_min_tokens == 0)
    REFUSE("prefix_hit_min_tokens is 0; it must be at least 1 (fewer cached tokens is a miss)");
  if (c->shared_dir) {
    char dwhy[PATH_MAX + 160];
    if (ttft__shared_dir_check(c->shared_dir, dwhy, sizeof dwhy) != 0) REFUSE("%s", dwhy); /* names the field */
  }
  if (c->process_name && !ttft__process_name_ok(c->process_name))
    REFUSE("process_name \"%s\" is not 1..63 bytes of [A-Za-z0-9_.:-]", shown(c->process_name, a));
  if (c->publish_interval_ms != 0 && (c->publish_interval_ms < 10 || c->publish_interval_ms > 3600000))
    REFUSE("publish_interval_ms %u is outside 10..3600000 (0 = no thread: the host calls "
           "ttft_publish)", c->publish_interval_ms);
  if (why && n) why[0] = '\0';
  return TTFT_OK;
}
#undef REFUSE

/* The caller's config over the defaults (a struct from an older, smaller
 * ttft_config keeps the defaults of the fields it lacks), then the rules. */
static int config_resolve(const ttft_config *cfg, ttft_config *c, char *why, size_t n) {
  ttft_config_init(c);
  if (cfg) {
    if (cfg->struct_size < sizeof(size_t) || cfg->struct_size > sizeof *c) {
      if (why && n)
        snprintf(why, n, "struct_size %zu is not a ttft_config's (%zu..%zu bytes); start from "
                 "ttft_config_init", cfg->struct_size, sizeof(size_t), sizeof *c);
      return TTFT_EINVAL;
    }
    memcpy(c, cfg, cfg->struct_size);
    c->struct_size = sizeof *c;
  }
  return config_problem(c, why, n);
}

int ttft_config_check(const ttft_config *cfg, char *why, size_t n) {
  ttft_config c;
  return config_resolve(cfg, &c, why, n);
}

/* --------------------------------------------------------------- memory */

/* every aligned block is preceded by a cache line holding a pointer to
 * its allocation */
typedef struct block_hdr {
  void *base;
} block_hdr;

void *ttft__block_new(ttft_registry *r, size_t n) {
  void *base = ttft__alloc(&r->alloc, n + 2 * TTFT__CACHELINE);
  if (!base) return NULL;
  ttft__memory_add(r, n + 2 * TTFT__CACHELINE);
  char *p = (char *)(((uintptr_t)base + TTFT__CACHELINE - 1) & ~(uintptr_t)(TTFT__CACHELINE - 1));
  ((block_hdr *)p)->base = base;
  /* touch every page now: the registry's memory is resident from the
   * moment it is counted, so no hook takes a page fault and RSS never
   * grows behind ttft_registry_memory's back (calloc would hand out
   * untouched zero pages) */
  memset(p + TTFT__CACHELINE, 0, n);
  return p + TTFT__CACHELINE;
}

void ttft__block_free(ttft_registry *r, void *p, size_t n) {
  if (!p) return;
  ttft__free(&r->alloc, ((block_hdr *)((char *)p - TTFT__CACHELINE))->base);
  /* relaxed: a statistic */
  atomic_fetch_sub_explicit(&r->memory, n + 2 * TTFT__CACHELINE, memory_order_relaxed);
}

/* ------------------------------------------------ the registry list
 * Thread-exit handlers release shards of registries that still exist; they
 * find them here. Only slow paths (create, free, thread exit) lock it. */
static _Atomic uint64_t g_next_id; /* 0 until the first registry seeds it */

/* A process-unique registry id that is also very unlikely to repeat in
 * another process (ttft_snapshot_delta compares the ids of snapshots that
 * may come from files): a hashed seed of time, pid and an address, then +1
 * per registry. Never 0. */
static uint64_t registry_id_next(void) {
  uint64_t id = atomic_load_explicit(&g_next_id, memory_order_relaxed);
  if (!id) {
    uint64_t z = ttft_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)&g_next_id;
    z += UINT64_C(0x9E3779B97F4A7C15);
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    z ^= z >> 31;
    uint64_t zero = 0;
    /* relaxed: only the value matters; a racing creator's seed is as good */
    atomic_compare_exchange_strong_explicit(&g_next_id, &zero, z | 1, memory_order_relaxed,
                                            memory_order_relaxed);
  }
  for (;;) {
    id = atomic_fetch_add_explicit(&g_next_id, 1, memory_order_relaxed);
    if (id) return id; /* skip 0 after a wrap */
  }
}

#ifdef TTFT_HAVE_PTHREADS
/* Every live registry, on an intrusive list (no limit on how many):
 * thread-exit handlers release shards of registries that still exist, the
 * fork handler repairs each one, and generation tags are kept distinct. */
static pthread_mutex_t g_live_mu = PTHREAD_MUTEX_INITIALIZER;
static ttft_registry *g_live;
static pthread_key_t g_tls_key;
static pthread_once_t g_tls_once = PTHREAD_ONCE_INIT;
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
#endif

/* -------------------------------------------------------- thread cache */
#define TLS_WAYS TTFT__TLS_WAYS
typedef ttft__tls_ent tls_ent;
_Thread_local ttft__tls_ent ttft__tl_cache[TTFT__TLS_WAYS];
_Thread_local ttft__open_calls ttft__tl_open;
_Thread_local ttft__slow_claim ttft__tl_claim;
#define tl_cache ttft__tl_cache

/* Give a private shard back. The thread is outside any call on it, or
 * dead (on_thread_exit): a call it left inside (killed by pthread_exit in
 * a signal handler or an asynchronous cancel, or left by siglongjmp) will
 * never write again, so its hazard is withdrawn here — the slot it named
 * may be reused, and the next owner starts outside (reclaim.c, "fault
 * model"). release: this thread's shard and slot writes happen-before the
 * next owner's, and before a round's acquire of the word. */
static void shard_release(ttft_registry *r, ttft__shard *sh) {
  if (sh->shared) return;
  uint64_t h = TTFT__LD(&sh->hz);
  if (h & TTFT__HZ_IN) {
    /* a stream end it died inside may hold a slowest-list entry: only
     * this shard's owner writes its lists, so none can be running */
    if (r) ttft__slow_abandoned(r, sh);
    atomic_store_explicit(&sh->hz, 0, memory_order_release);
  }
  atomic_store_explicit(&sh->owned, 0, memory_order_release);
}

/* Is this thread inside a call on sh (the outer call of a hook nested in
 * a signal handler)? Then its shard must not be released under it. */
static int shard_in_call(const ttft__shard *sh) {
  return !sh->shared && (TTFT__LD(&sh->hz) & TTFT__HZ_IN) != 0;
}

#ifdef TTFT_HAVE_PTHREADS
static int registry_alive_locked(uint64_t id) {
  for (ttft_registry *r = g_live; r; r = r->live_next)
    if (r->id == id) return 1;
  return 0;
}

static ttft_registry *registry_find_locked(uint64_t id) {
  for (ttft_registry *r = g_live; r; r = r->live_next)
    if (r->id == id) return r;
  return NULL;
}

static void on_thread_exit(void *unused) {
  (void)unused;
  pthread_mutex_lock(&g_live_mu);
  /* shared-shard calls this thread died inside: give their slots' counts
   * back, so that those slots can be reused (reclaim.c, "fault model") */
  uint32_t open = ttft__tl_open.n < TTFT__OPEN_MAX ? ttft__tl_open.n : TTFT__OPEN_MAX;
  for (uint32_t k = 0; k < open; k++)
    if (registry_alive_locked(ttft__tl_open.c[k].reg_id))
      /* release: as call_leave's */
      atomic_fetch_sub_explicit(ttft__tl_open.c[k].refs, 1, memory_order_release);
  ttft__tl_open.n = 0;
  /* a slowest-list entry it died holding (a stream end on the shared
   * shard; a private shard's are given back by shard_release too) */
  if (ttft__tl_claim.e && registry_alive_locked(ttft__tl_claim.reg_id)) ttft__slow_claim_drop();
  ttft__tl_claim.e = NULL;
  for (int i = 0; i < TLS_WAYS; i++) {
    if (!tl_cache[i].reg_id) continue;
    /* the registry may have been freed: touch its shard only if not */
    ttft_registry *r = registry_find_locked(tl_cache[i].reg_id);
    if (r) shard_release(r, tl_cache[i].sh);
    tl_cache[i].reg_id = 0;
    tl_cache[i].sh = NULL;
  }
  pthread_mutex_unlock(&g_live_mu);
}
static void tls_key_create(void) { pthread_key_create(&g_tls_key, on_thread_exit); }
#endif

static ttft__shard *shard_acquire(ttft_registry *r) {
  uint32_t nex = r->nshards - 1;
  for (uint32_t i = 0; i < nex; i++) {
    ttft__shard *sh = &r->shards[i];
    int z = 0;
    if (TTFT__LD(&sh->owned)) continue;
    /* seq_cst: the previous owner's writes (released at its exit) are
     * visible before this thread adds to the same counters (acquire), and
     * a reclaimer that reads the shard unowned after its barrier orders
     * this thread's later calls after that barrier (reclaim.c, case 1) */
    if (atomic_compare_exchange_strong_explicit(&sh->owned, &z, 1, memory_order_seq_cst,
                                                memory_order_relaxed)) {
      /* every release withdrew its owner's hazard (shard_release) */
      TTFT_ASSERT(!(TTFT__LD(&sh->hz) & TTFT__HZ_IN));
      /* seq_cst: a round that switched r to fence mode (F4) and then found
       * this shard unowned precedes our CAS in S, hence this load: it
       * returns 2, and every later call of ours fences */
      int fm = atomic_load_explicit(&r->fence_mode, memory_order_seq_cst);
      ttft__reclaim_owner_set(sh, fm); /* our tid and fence state (F4) */
      TTFT__ST(&sh->used, 1);
      return sh;
    }
  }
  ttft__shard *sh = &r->shards[nex];
  TTFT__ST(&sh->used, 1);
  return sh;
}

/* With the registry list locked (pthreads): does entry v's registry
 * still exist, and is this thread inside a call on its shard? */
static int victim_alive(uint64_t id) {
#ifdef TTFT_HAVE_PTHREADS
  return registry_alive_locked(id);
#else
  (void)id;
  return 1;
#endif
}
static int victim_busy(const tls_ent *v) {
  return v->reg_id && victim_alive(v->reg_id) && shard_in_call(v->sh);
}

/* Set while this thread is in ttft__shard_get_slow: a hook called from a
 * signal handler that interrupted it would see the cache half moved
 * (reclaim.c, fault model F2: not supported, checked in debug builds). */
static _Thread_local int tl_in_slow;

static ttft__shard *shard_get_slow_body(ttft_registry *r);
ttft__shard *ttft__shard_get_slow(ttft_registry *r) {
  TTFT_ASSERT(!tl_in_slow); /* a signal handler's hook on a thread's first call */
  tl_in_slow = 1;
  atomic_signal_fence(memory_order_seq_cst); /* compiler only: a handler sees the flag */
  ttft__shard *sh = shard_get_slow_body(r);
  atomic_signal_fence(memory_order_seq_cst);
  tl_in_slow = 0;
  return sh;
}

static ttft__shard *shard_get_slow_body(ttft_registry *r) {
  tls_ent e = {0, NULL};
  int at = TLS_WAYS - 1;
  for (int i = 1; i < TLS_WAYS; i++) {
    if (tl_cache[i].reg_id == r->id) {
      e = tl_cache[i];
      at = i;
      break;
    }
  }
  if (!e.sh) {
    /* A full cache evicts its least recently used entry. Its shard goes
     * back to that registry's pool (we are not inside a call on it: a
     * thread runs one hook at a time), so a thread cycling through more
     * than TTFT__TLS_WAYS registries never strands shards; it takes one
     * again when it comes back. Recorded data stays in the shard. The
     * evicted registry may have been freed: check it under the list lock. */
    tls_ent *victim = &tl_cache[TLS_WAYS - 1];
#ifdef TTFT_HAVE_PTHREADS
    pthread_mutex_lock(&g_live_mu);
#endif
    /* never the shard of a call this thread is inside (a hook nested in
     * a signal handler, on a ninth registry): the least recent other one */
    while (victim > &tl_cache[0] && victim_busy(victim)) victim--;
    if (victim_busy(victim)) {
#ifdef TTFT_HAVE_PTHREADS
      pthread_mutex_unlock(&g_live_mu);
#endif
      /* every cached shard is in a call: record on the shared shard,
       * uncached (the cold path again next time) */
      TTFT__ST(&r->shards[r->nshards - 1].used, 1);
      return &r->shards[r->nshards - 1];
    }
    at = (int)(victim - tl_cache);
    /* not inside a call on it (victim_busy): its hazard word is 0, so its
     * registry is not needed */
    if (victim->reg_id && victim_alive(victim->reg_id)) shard_release(NULL, victim->sh);
#ifdef TTFT_HAVE_PTHREADS
    pthread_mutex_unlock(&g_live_mu);
#endif
    victim->reg_id = 0;
    victim->sh = NULL;
    e.reg_id = r->id;
    e.sh = shard_acquire(r);
#ifdef TTFT_HAVE_PTHREADS
    pthread_once(&g_tls_once, tls_key_create);
    pthread_setspecific(g_tls_key, (void *)1);
#endif
  }
  memmove(&tl_cache[1], &tl_cache[0], (size_t)at * sizeof tl_cache[0]);
  tl_cache[0] = e;
  return e.sh;
}

int ttft_thread_release(ttft_registry *r) {
  if (!r) return TTFT_EINVAL;
  /* a slowest-list entry held by a stream end this thread left by
   * siglongjmp (its exit would give it back; a private shard's also goes
   * back with shard_release below). Not from a signal handler (ttft.h),
   * so no offer of this thread is running */
  if (ttft__tl_claim.e && ttft__tl_claim.reg_id == r->id) {
    ttft__slow_claim_drop();
    ttft__tl_claim.e = NULL;
  }
  /* shared-shard calls of r this thread left by siglongjmp: give their
   * slots' counts back (reclaim.c, F3); calls of other registries stay */
  uint32_t open = ttft__tl_open.n < TTFT__OPEN_MAX ? ttft__tl_open.n : TTFT__OPEN_MAX, kept = 0;
  for (uint32_t k = 0; k < open; k++) {
    if (ttft__tl_open.c[k].reg_id == r->id)
      /* release: as call_leave's */
      atomic_fetch_sub_explicit(ttft__tl_open.c[k].refs, 1, memory_order_release);
    else
      ttft__tl_open.c[kept++] = ttft__tl_open.c[k];
  }
  ttft__tl_open.n -= open - kept;
  for (int i = 0; i < TLS_WAYS; i++) {
    if (tl_cache[i].reg_id != r->id) continue;
    shard_release(r, tl_cache[i].sh);
    memmove(&tl_cache[i], &tl_cache[i + 1], (size_t)(TLS_WAYS - 1 - i) * sizeof tl_cache[0]);
    tl_cache[TLS_WAYS - 1].reg_id = 0;
    tl_cache[TLS_WAYS - 1].sh = NULL;
    break;
  }
  return TTFT_OK;
}

/* The calling thread's shard of r, if its cache holds one (no acquire). */
static ttft__shard *shard_cached(const ttft_registry *r) {
  for (int i = 0; i < TLS_WAYS; i++)
    if (tl_cache[i].reg_id == r->id) return tl_cache[i].sh;
  return NULL;
}

/* ------------------------------------------------------------------ fork */
#ifdef TTFT_HAVE_PTHREADS
/* fork() copies the memory of a running process: another thread may be
 * half way through an update, and the child's copy need not even show
 * that thread's stores in program order (pages are copied one by one
 * while it runs). So the state the child must find whole is locked
 * across fork() instead of repaired: the list lock, and per registry the
 * class-table lock and the chunk pool's top-up lock, in the order
 * ttft_class_add takes them (class, then pool; a snapshot takes only the
 * pool's). None of them is taken by a hook: fork() waits at most for a
 * class_add or a pool top-up in progress, never for a token. The child's
 * forking thread is the holder, so it just clears them; what hooks leave
 * (hazard words, slot reference counts, half-pushed slots, the TSC seqlock) is lock-free
 * and is repaired instead (reclaim.c, clock.c). */
static void spin_lock(_Atomic int *l) {
  int z = 0;
  /* acquire: pairs with the release that ends class_add / a top-up */
  while (!atomic_compare_exchange_weak_explicit(l, &z, 1, memory_order_acquire, memory_order_relaxed)) {
    z = 0;
    sched_yield();
  }
}
static void atfork_prepare(void) {
  /* publishers first: a publish in progress takes the pool lock below */
  ttft__pub_atfork_prepare();
  pthread_mutex_lock(&g_live_mu);
  for (ttft_registry *r = g_live; r; r = r->live_next) {
    spin_lock(&r->class_lock);
    spin_lock(&r->pool.lock);
  }
}
static void atfork_parent(void) {
  for (ttft_registry *r = g_live; r; r = r->live_next) {
    /* release: hands the class table and the pool back as they were */
    atomic_store_explicit(&r->pool.lock, 0, memory_order_release);
    atomic_store_explicit(&r->class_lock, 0, memory_order_release);
  }
  pthread_mutex_unlock(&g_live_mu);
  ttft__pub_atfork_parent();
}
static void atfork_child(void) {
  ttft__reclaim_atfork_child();
  ttft__clock_fork_child();
  for (ttft_registry *r = g_live; r; r = r->live_next) {
    TTFT__ST(&r->pool.lock, 0); /* held by this thread (prepare) */
    TTFT__ST(&r->class_lock, 0);
    ttft__reclaim_fork_child(r, shard_cached(r));
  }
  pthread_mutex_unlock(&g_live_mu);
  /* the registries are whole again: their publishers become the child's */
  ttft__pub_atfork_child();
}
static void fork_handlers_install(void) {
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}
#endif

/* ------------------------------------------------------- generations
 * A handle's high 32 bits are its slot's generation: a 24-bit count of
 * the slot's sequences above an 8-bit registry tag. Live registries get
 * distinct tags (1..255) while there are at most 255 of them, so a handle
 * of one registry never matches a slot of another (TTFT_ESTALE); beyond
 * that, and for handles of registries already freed, each slot's count
 * starts at a random value, so a foreign handle matches with probability
 * about 2^-24 per call. A stale handle of the registry itself matches
 * only after exactly 2^24 further sequences in its slot. */
static uint64_t mix64(uint64_t z) {
  z += UINT64_C(0x9E3779B97F4A7C15);
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

static uint32_t tag_pick_locked(uint64_t id) {
#ifdef TTFT_HAVE_PTHREADS
  unsigned char used[256] = {0};
  for (ttft_registry *r = g_live; r; r = r->live_next) used[r->gen_tag] = 1;
  for (uint32_t t = 1; t < 256; t++)
    if (!used[t]) return t;
#endif
  return (uint32_t)(mix64(id) % 255) + 1;
}

static void slots_seed(ttft_registry *r) {
  uint64_t seed = mix64(r->id ^ ttft_now_ns());
  for (uint32_t i = 0; i < r->nslots; i++) {
    uint32_t count = (uint32_t)(mix64(seed + i) >> 40); /* 24 bits */
    TTFT__ST(&r->slots[i].state,
             TTFT__SLOT_STATE((count << 8) | r->gen_tag, TTFT__SLOT_FREE));
  }
}

/* -------------------------------------------------------------- classes */
/* chunks (1 KiB) made available for each class: its first (thread,
 * class) pairs' octaves in use; one slab, so that a class_add adds at most
 * one slab and a failed one adds none */
#define CLASS_RESERVE_CHUNKS TTFT__SLAB_CHUNKS

/* a class record and, behind it, its slowest lists and their values */
static size_t crec_bytes(const ttft_registry *r) {
  return sizeof(ttft__crec) +
         (size_t)TTFT_SLOWEST_COUNT_ * r->slowest_k * (sizeof(ttft__slow_live) + sizeof(uint64_t));
}

static int class_records_new(ttft_registry *r, uint32_t c) {
  for (uint32_t i = 0; i < r->nshards; i++) {
    ttft__crec *cr = ttft__block_new(r, crec_bytes(r));
    if (!cr) return TTFT_ENOMEM;
    cr->slow = r->slowest_k ? (ttft__slow_live *)(cr + 1) : NULL;
    cr->slow_val = r->slowest_k ? (_Atomic uint64_t *)(cr->slow + TTFT_SLOWEST_COUNT_ * r->slowest_k) : NULL;
    /* release: the zeroed record is visible before its pointer */
    atomic_store_explicit(&r->shards[i].cls[c], cr, memory_order_release);
  }
  return TTFT_OK;
}

static void class_records_free(ttft_registry *r, uint32_t c) {
  for (uint32_t i = 0; i < r->nshards; i++) {
    if (!r->shards[i].cls) continue; /* a registry_new that failed part-way */
    ttft__crec *cr = TTFT__LD(&r->shards[i].cls[c]);
    if (cr) {
      ttft__block_free(r, cr, crec_bytes(r));
      TTFT__ST(&r->shards[i].cls[c], NULL);
    }
  }
}

int ttft_class_add(ttft_registry *r, const char *name, const ttft_slo *slo) {
  if (!r || !valid_class_name(name)) return TTFT_EINVAL;
  ttft_slo s;
  ttft_slo_init(&s);
  if (slo) {
    if (slo->struct_size < sizeof(size_t) || slo->struct_size > sizeof s) return TTFT_EINVAL;
    memcpy(&s, slo, slo->struct_size);
    s.struct_size = sizeof s;
  }
  if (!(s.fluid_min >= 0.0 && s.fluid_min <= 1.0)) return TTFT_EINVAL; /* NaN too */
  if (!s.stall_threshold_ns) s.stall_threshold_ns = r->stall_ns;
  int z = 0;
  /* acquire/release pair around the class table: class_add is a setup path,
   * a spin here is acceptable and never seen by the hooks */
  while (!atomic_compare_exchange_weak_explicit(&r->class_lock, &z, 1, memory_order_acquire,
                                                memory_order_relaxed))
    z = 0;
  int rc;
  uint32_t n = TTFT__LD(&r->nclasses);
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(r->classes[i].name, name)) {
      rc = TTFT_EEXIST;
      goto out;
    }
  if (n >= r->max_classes) {
    rc = TTFT_EFULL;
    goto out;
  }
  ttft__strlcpy(r->classes[n].name, name, TTFT__NAME_MAX);
  r->classes[n].slo = s;
  rc = class_records_new(r, n);
  /* and one slab of room for the new class's first chunks (pool.c), and
   * what the class will attach on every shard that may record it before
   * the next snapshot (pool.c, "sizing"); on a failure nothing of the
   * class stays */
  if (rc == TTFT_OK)
    rc = ttft__pool_promise(r, (uint64_t)r->nshards * TTFT__POOL_RECORD_CHUNKS, CLASS_RESERVE_CHUNKS);
  if (rc != TTFT_OK) {
    class_records_free(r, n);
    goto out;
  }
  /* snapshots keep more free; relaxed: class_add runs under the class
   * lock, snapshots only read the size */
  TTFT__ST(&r->pool.reserve, TTFT__LD(&r->pool.reserve) + CLASS_RESERVE_CHUNKS / 4);
  /* release: the class entry and its per-shard records are visible to any
   * thread that sees the new count (begin_ex acquires it) */
  atomic_store_explicit(&r->nclasses, n + 1, memory_order_release);
  rc = (int)n;
out:
  atomic_store_explicit(&r->class_lock, 0, memory_order_release); /* pairs with the acquire above */
  return rc;
}

int ttft_class_find(const ttft_registry *r, const char *name) {
  if (!r || !name) return TTFT_EINVAL;
  uint32_t n = atomic_load_explicit(&r->nclasses, memory_order_acquire); /* see class_add */
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(r->classes[i].name, name)) return (int)i;
  return TTFT_ESTALE;
}

/* ------------------------------------------------------- create / free */
static void registry_release(ttft_registry *r) {
  if (r->shards) {
    for (uint32_t c = 0; c < r->max_classes; c++) class_records_free(r, c);
    for (uint32_t i = 0; i < r->nshards; i++) ttft__free(&r->alloc, (void *)r->shards[i].cls);
  }
  ttft__pool_free(r);
  ttft__block_free(r, r->shards, (size_t)r->nshards * sizeof(ttft__shard));
  ttft__block_free(r, r->slots, (size_t)r->nslots * sizeof(ttft__slot));
  ttft__block_free(r, r->steps, TTFT_STEP_RING * sizeof(ttft__step_ent));
  ttft__block_free(r, r->reqid, (size_t)r->nslots * sizeof(ttft__reqid));
  ttft__free(&r->alloc, r->classes);
  ttft_allocator a = r->alloc;
  ttft__free(&a, r->base);
}

static void registry_meta(ttft_registry *r, const ttft_config *c) {
  ttft_snapshot *m = &r->meta;
  ttft__strlcpy(m->start_point, c->start_point ? c->start_point : "", TTFT_MAX_LABEL);
  ttft__strlcpy(m->token_point, c->token_point ? c->token_point : "", TTFT_MAX_LABEL);
  ttft__strlcpy(m->model, c->model ? c->model : "", TTFT_MAX_LABEL);
  ttft__strlcpy(m->ns, c->metric_namespace ? c->metric_namespace : "", TTFT__NAME_MAX);
  m->n_const_labels = c->n_const_labels;
  for (uint32_t i = 0; i < c->n_const_labels; i++) {
    ttft__strlcpy(m->const_name[i], c->const_labels[i].name, TTFT__NAME_MAX);
    ttft__strlcpy(m->const_value[i], c->const_labels[i].value, TTFT_MAX_LABEL);
  }
  m->n_band_edges = c->n_prompt_bands;
  memcpy(m->band_edges, c->prompt_band_edges, sizeof m->band_edges);
  for (int k = 0; k < TTFT_METRIC_COUNT_; k++) {
    /* metrics past the configurable ones use a sibling's bounds */
    int src = k < TTFT_PROM_CONFIG_METRICS ? k : TTFT_METRIC_ITL;
    const uint64_t *b = c->prom_buckets[src];
    uint32_t n = c->prom_n_buckets[src];
    if (!b) b = ttft__default_prom_buckets((ttft_metric)k, &n);
    if (n > TTFT_MAX_PROM_BUCKETS) n = TTFT_MAX_PROM_BUCKETS;
    m->prom_n_buckets[k] = n;
    if (n) memcpy(m->prom_buckets[k], b, n * sizeof *b);
  }
  m->prom_summaries = c->prom_summaries;
  m->native_histograms = c->native_histograms;
  m->native_schema = c->native_schema;
  m->export_idle_classes = c->export_idle_classes;
  m->slowest_k = c->slowest_k;
  m->stall_threshold_ns = c->stall_threshold_ns;
  m->registry_id = r->id;
}

ttft_registry *ttft_registry_new(const ttft_config *cfg) {
  ttft_config c;
  if (config_resolve(cfg, &c, NULL, 0) != TTFT_OK) return NULL;

  ttft_allocator a;
  ttft__allocator_current(&a);
  /* the struct has cache-line aligned members: align it, keep the base */
  void *base = ttft__alloc(&a, sizeof(ttft_registry) + TTFT__CACHELINE);
  if (!base) return NULL;
  ttft_registry *r = (ttft_registry *)(((uintptr_t)base + TTFT__CACHELINE - 1) &
                                       ~(uintptr_t)(TTFT__CACHELINE - 1));
  r->base = base;
  r->alloc = a;
  TTFT__ST(&r->memory, sizeof *r + TTFT__CACHELINE);
  r->id = registry_id_next();
  r->fence_mode = !ttft__reclaim_init();
  r->nslots = c.max_inflight;
  r->nshards = c.max_threads + 1;
  r->max_classes = c.max_classes;
  r->stall_ns = c.stall_threshold_ns;
  r->clock = c.clock;
  /* the source the hooks read: FASTEST is resolved here, once */
  if (r->clock == TTFT_CLOCK_FASTEST) r->clock = ttft__clock_fastest();
  if (r->clock == TTFT_CLOCK_TSC && !ttft__counter_usable()) r->clock = TTFT_CLOCK_MONOTONIC;
  r->prefix_min = c.prefix_hit_min_tokens;
  r->n_band_edges = c.n_prompt_bands;
  memcpy(r->band_edges, c.prompt_band_edges, sizeof r->band_edges);
  r->slowest_k = c.slowest_k;

  r->slots = ttft__block_new(r, (size_t)r->nslots * sizeof(ttft__slot));
  r->shards = ttft__block_new(r, (size_t)r->nshards * sizeof(ttft__shard));
  r->steps = ttft__block_new(r, TTFT_STEP_RING * sizeof(ttft__step_ent));
  r->classes = ttft__alloc(&a, (size_t)r->max_classes * sizeof(ttft__class));
  if (r->slowest_k) r->reqid = ttft__block_new(r, (size_t)r->nslots * sizeof(ttft__reqid));
  if (!r->slots || !r->shards || !r->steps || !r->classes || (r->slowest_k && !r->reqid))
    goto fail;
  ttft__memory_add(r, (size_t)r->max_classes * sizeof(ttft__class));
  TTFT__ST(&r->rgen, 1); /* stamps are never 0 (reclaim.c) */
  for (uint32_t i = 0; i < r->nshards; i++) {
    ttft__shard *sh = &r->shards[i];
    sh->id = i;
    sh->shared = (i == r->nshards - 1);
    /* the shared shard's word always says "inside": a private call's one
     * test of its word (hooks.c) also sends the shared shard's threads to
     * the general path; no round reads it */
    if (sh->shared) TTFT__ST(&sh->hz, TTFT__HZ_IN);
    sh->cls = ttft__alloc(&a, (size_t)r->max_classes * sizeof(*sh->cls));
    if (!sh->cls) goto fail;
    ttft__memory_add(r, (size_t)r->max_classes * sizeof(*sh->cls));
  }
  if (ttft__pool_init(r, c.memory_limit) != TTFT_OK) goto fail;
  ttft__strlcpy(r->classes[0].name, "default", TTFT__NAME_MAX);
  ttft_slo_init(&r->classes[0].slo);
  r->classes[0].slo.stall_threshold_ns = r->stall_ns;
  if (class_records_new(r, 0) != TTFT_OK) goto fail;
  TTFT__ST(&r->nclasses, 1);
  /* the first chunks, so that the first streams record at full
   * resolution before any snapshot tops the pool up */
  if (ttft__pool_reserve(r, TTFT__LD(&r->pool.reserve) + CLASS_RESERVE_CHUNKS) != TTFT_OK) goto fail;
  /* and what every shard's splits and class 0 will attach before the
   * first snapshot tops the pool up (pool.c, "sizing") */
  if (ttft__pool_promise(r, (uint64_t)r->nshards * (TTFT__POOL_SPLIT_CHUNKS + TTFT__POOL_RECORD_CHUNKS), 0) !=
      TTFT_OK)
    goto fail;
  registry_meta(r, &c);
  r->t_created = ttft_now_ns();
  /* relaxed: nothing else is published by it; r is not shared yet */
  atomic_store_explicit(&r->horizon, ttft__now(r) + TTFT_CLOCK_AHEAD_NS, memory_order_relaxed);
  atomic_store_explicit(&r->wall_floor, 0, memory_order_relaxed);

#ifdef TTFT_HAVE_PTHREADS
  pthread_once(&g_fork_once, fork_handlers_install);
  pthread_mutex_lock(&g_live_mu);
  r->gen_tag = tag_pick_locked(r->id);
  r->live_next = g_live;
  if (g_live) g_live->live_prev = r;
  g_live = r;
  pthread_mutex_unlock(&g_live_mu);
#else
  r->gen_tag = tag_pick_locked(r->id);
#endif
  slots_seed(r);
  /* every slot starts free; index 0 ends on top */
  for (uint32_t i = r->nslots; i-- > 0;) ttft__stack_push(r, &r->free_list, i);
  /* last: the publisher's thread takes snapshots of r from now on */
  if (c.shared_dir && ttft__pub_start(r, &c) != TTFT_OK) {
    ttft_registry_free(r);
    return NULL;
  }
  return r;
fail:
  registry_release(r);
  return NULL;
}

void ttft_registry_free(ttft_registry *r) {
  if (!r) return;
  ttft__pub_stop(r); /* a last publish (FINAL) while r is whole, then the lock */
#ifdef TTFT_HAVE_PTHREADS
  pthread_mutex_lock(&g_live_mu);
  if (r->live_prev) r->live_prev->live_next = r->live_next;
  else g_live = r->live_next;
  if (r->live_next) r->live_next->live_prev = r->live_prev;
  pthread_mutex_unlock(&g_live_mu);
#endif
  ttft_thread_release(r);
  registry_release(r);
}

size_t ttft_registry_memory(const ttft_registry *r) {
  /* relaxed: a statistic; exact once concurrent class_add/snapshots end */
  return r ? atomic_load_explicit(&r->memory, memory_order_relaxed) : 0;
}

/* ---------------------------------------------------------- live queries */
/* q-quantile (nearest rank) of a slot's gap histogram, ns; 0 when it holds
 * nothing. gaps: the number of gaps recorded when the caller knows it
 * (no halving happened yet), else 0 and the counters are summed. The walk
 * goes down from the worst gap's bucket: high quantiles touch few words. */
uint64_t ttft__seq_gap_quantile(const ttft__slot *sl, double q, uint64_t gaps) {
  TTFT_ASSERT(q >= 0.0 && q <= 1.0);
  uint64_t mx = TTFT__LD(&sl->max_gap);
  uint32_t top = ttft__sg_index(ttft__hist_index(mx));
  uint64_t total = gaps;
  if (!total)
    for (uint32_t j = 0; j <= top; j++) total += ttft__sg_count(sl->gh, j);
  if (!total) return 0;
  uint64_t rank = ttft__nearest_rank(q, total); /* exact: common/hist.c */
  if (!rank) rank = 1;
  /* smallest j with cum(j) >= rank, where cum(j) = total - (count above j) */
  uint64_t above = 0;
  uint32_t j = top;
  while (j > 0 && total - (above + ttft__sg_count(sl->gh, j)) >= rank)
    above += ttft__sg_count(sl->gh, j--);
  /* value range of j: aggregate buckets (j + 64) * 8 .. (j + 64) * 8 + 7 */
  uint64_t lo = j ? ttft__bucket_lo((j + TTFT__SG_OFFSET) * 8) : 0;
  uint64_t hi = j < TTFT__SG_BUCKETS - 1 ? ttft__bucket_lo((j + TTFT__SG_OFFSET + 1) * 8) - 1 : mx;
  uint64_t v = lo + (hi > lo ? (hi - lo) / 2 : 0);
  return v > mx ? mx : v;
}

int ttft_seq_stats(const ttft_registry *r, ttft_seq s, ttft_seq_info *out) {
  if (!r || !out) return TTFT_EINVAL;
  if (out->struct_size < sizeof(size_t) || out->struct_size > sizeof(ttft_seq_info))
    return TTFT_EINVAL;
  uint32_t idx = (uint32_t)s - 1;
  if (idx >= r->nslots) return TTFT_ESTALE;
  const ttft__slot *sl = &r->slots[idx];
  uint64_t live = TTFT__SLOT_STATE(s >> 32, TTFT__SLOT_LIVE);
  /* acquire: the fields read below are at least as new as the begin */
  if (atomic_load_explicit(&sl->state, memory_order_acquire) != live) return TTFT_ESTALE;
  ttft_seq_info v;
  memset(&v, 0, sizeof v);
  v.struct_size = out->struct_size;
  v.class_id = (int)TTFT__LD(&sl->cls);
  v.emissions = TTFT__LD(&sl->emissions);
  v.tokens = TTFT__LD(&sl->tokens);
  v.t_begin_ns = TTFT__LD(&sl->t_begin);
  v.t_last_ns = TTFT__LD(&sl->t_last);
  uint64_t tf = TTFT__LD(&sl->t_first);
  v.ttft_ns = (v.emissions && tf >= v.t_begin_ns) ? tf - v.t_begin_ns : 0;
  if (v.emissions >= 2) {
    v.itl_p50_ns = ttft__seq_gap_quantile(sl, 0.5, 0);
    v.itl_p95_ns = ttft__seq_gap_quantile(sl, 0.95, 0);
    v.itl_max_ns = TTFT__LD(&sl->max_gap);
  }
  v.stalls = TTFT__LD(&sl->stalls);
  v.preemptions = TTFT__LD(&sl->preemptions);
  v.last_stall_cause = v.stalls ? (int)((TTFT__LD(&sl->flags) & SF_CAUSE_MASK) >> SF_CAUSE_SHIFT) : -1;
  if (TTFT__LD(&sl->dl) && v.emissions >= 2) {
    v.deadlines = (uint64_t)(v.emissions - 1) + TTFT__LD(&sl->dl_extra);
    v.deadlines_missed = TTFT__LD(&sl->dl_missed);
  }
  v.fluidity = ttft__fluidity(v.deadlines, v.deadlines_missed);
  v.ttft_slo_ns = ttft__slot_ttft_slo(r, sl);
  v.tpot_slo_ns = TTFT__LD(&sl->tpot_slo);
  /* acquire fence: the field loads above complete before the re-check
   * below, and one that read a field of the slot's next sequence pairs
   * with begin's release fence (begin_common), so the re-check sees that
   * this sequence ended: it is reported stale, not half-read. (1.2.0
   * made the load of `stalls` an acquire: that keeps later loads after
   * it, not earlier ones, which could still be satisfied after the
   * re-check.) */
  atomic_thread_fence(memory_order_acquire);
  if (TTFT__LD(&sl->state) != live) return TTFT_ESTALE;
  memcpy(out, &v, out->struct_size);
  return TTFT_OK;
}

void ttft__scan_slots(const ttft_registry *r, uint64_t now, uint64_t *inflight,
                      uint64_t *stalled) {
  uint64_t live = 0, stuck = 0;
  for (uint32_t i = 0; i < r->nslots; i++) {
    const ttft__slot *sl = &r->slots[i];
    if (TTFT__SLOT_PHASE(TTFT__LD(&sl->state)) != TTFT__SLOT_LIVE) continue;
    live++;
    if (!TTFT__LD(&sl->emissions)) continue;
    uint64_t last = TTFT__LD(&sl->t_last);
    if (now > last && now - last > ttft__slot_stall_ns(r, sl)) stuck++;
  }
  *inflight = live;
  *stalled = stuck;
}

long ttft_stalled_now(const ttft_registry *r, uint64_t now_ns) {
  if (!r) return TTFT_EINVAL;
  uint64_t live, stuck;
  ttft__scan_slots(r, now_ns ? now_ns : ttft__now(r), &live, &stuck);
  return (long)stuck;
}

long ttft_inflight(const ttft_registry *r) {
  if (!r) return TTFT_EINVAL;
  uint64_t live, stuck;
  ttft__scan_slots(r, ttft__now(r), &live, &stuck);
  return (long)live;
}
