/*
 * snapshot.h — struct ttft_snapshot: the one type that crosses from the
 * recording side to the reporting side. ttft_snapshot_take (record/)
 * fills it from a live registry; the codec, merge and delta (report/)
 * build it from other snapshots; formatters only read it.
 * Layer: common (src/README.md).
 */
#ifndef TTFT_SNAPSHOT_H
#define TTFT_SNAPSHOT_H

#include "common/hist.h"

/* ------------------------------------------------------------- snapshot */
/* Per-status views (ttft_snapshot_status_*): these metrics, per terminal
 * status, recorded at stream end. */
#define TTFT__STATUS_VIEWS 4
static inline int ttft__status_view(ttft_metric m) { /* view index, or -1 */
  switch (m) {
  case TTFT_METRIC_TTFT: return 0;
  case TTFT_METRIC_TPOT: return 1;
  case TTFT_METRIC_E2E: return 2;
  case TTFT_METRIC_OUTPUT_TOKENS: return 3;
  default: return -1;
  }
}
/* one histogram per metric, plus the status views */
#define TTFT__HISTS_PER_CLASS (TTFT_METRIC_COUNT_ + TTFT_STATUS_COUNT_ * TTFT__STATUS_VIEWS)
#define TTFT__NAME_MAX 64 /* class and label names, including the NUL */
/* Most classes one snapshot holds: what the encoding carries (a registry
 * has at most 1024; merge refuses a union above this with TTFT_ERANGE). */
#define TTFT__MAX_CLASSES 4096u

/* One of the slowest requests (ttft_snapshot_slowest), as a snapshot
 * holds it. trace[] holds the 16 bytes of the trace id when has_trace. */
typedef struct ttft__slow {
  uint64_t value, ttft, max_gap, t_begin, t_end, tokens;
  uint64_t unix_end;                 /* t_end on the wall clock, 0 unknown  */
  /* (1.3) token deadlines judged / missed over the stream, its D, and the
   * TTFT / TPOT budgets it was judged against (0 = none or unknown) */
  uint64_t dl, dl_missed, dl_ns, ttft_slo, tpot_slo;
  uint32_t cls;                      /* class id in the snapshot            */
  uint8_t status, cause, has_trace, id_len;
  uint8_t trace[16];
  char id[TTFT_MAX_REQUEST_ID + 1];  /* NUL-terminated, id_len bytes        */
} ttft__slow;

/* Every histogram pointer of a snapshot points at its own histogram in
 * the snapshot's storage, or at the snapshot's one empty histogram
 * (s->empty): never NULL. Histograms are built with ttft__snapshot_hist. */
typedef struct ttft__sclass {
  char name[TTFT__NAME_MAX];
  ttft_slo slo;                               /* stall_threshold_ns resolved  */
  uint64_t ctr[TTFT_COUNTER_COUNT_];
  /* stalls by cause (1.2): counts (they add up to ctr[STALLS]) and the
   * sums of their gaps, ns (modulo 2^64, like histogram sums) */
  uint64_t stall_n[TTFT_STALL_CAUSE_COUNT], stall_ns[TTFT_STALL_CAUSE_COUNT];
  ttft__shist *h[TTFT_METRIC_COUNT_];
  ttft__shist *sv[TTFT_STATUS_COUNT_][TTFT__STATUS_VIEWS]; /* status views     */
  /* the slowest requests by ranking, value descending (ttft__slow_sort);
   * NULL when nslow is 0; storage from the snapshot */
  ttft__slow *slow[TTFT_SLOWEST_COUNT_];
  uint32_t nslow[TTFT_SLOWEST_COUNT_];
} ttft__sclass;

typedef struct ttft__sblock ttft__sblock; /* a block of snapshot storage (snapshot.c) */

struct ttft_snapshot {
  ttft_allocator alloc;       /* what allocated it, frees it                */
  uint64_t registry_id;       /* process-unique id of the source registry;
                                 0 for merged snapshots (no delta)          */
  uint64_t t_start_ns, t_end_ns;
  uint64_t gauge[TTFT_GAUGE_COUNT_];
  uint64_t stall_threshold_ns;/* registry default                          */
  char start_point[TTFT_MAX_LABEL], token_point[TTFT_MAX_LABEL];
  char model[TTFT_MAX_LABEL], ns[TTFT__NAME_MAX];
  uint32_t n_const_labels;
  char const_name[TTFT_MAX_CONST_LABELS][TTFT__NAME_MAX];
  char const_value[TTFT_MAX_CONST_LABELS][TTFT_MAX_LABEL];
  uint32_t n_band_edges;      /* bands = n_band_edges + 1                   */
  uint32_t band_edges[TTFT_MAX_BANDS - 1];
  uint32_t prom_n_buckets[TTFT_METRIC_COUNT_];
  uint64_t prom_buckets[TTFT_METRIC_COUNT_][TTFT_MAX_PROM_BUCKETS];
  int prom_summaries;
  int native_histograms;      /* protobuf exposition: native buckets on/off  */
  int native_schema;          /* -4 .. 8                                    */
  int export_idle_classes;    /* 0: the default class, unused beside added
                                 classes, is left out of the expositions and
                                 reports (ttft__class_exported)             */
  uint32_t slowest_k;         /* the lists' length bound (config slowest_k)  */
  uint32_t nclasses;          /* >= 1; class 0 is "default"                 */
  ttft__sclass *cls;          /* nclasses entries                           */
  ttft__sclass all;           /* sum over classes (ttft__snapshot_finish)   */
  ttft__shist *split_cache[TTFT_PREFIX_BAND_COUNT_];   /* TTFT by prefix band */
  ttft__shist *split_band[TTFT_MAX_BANDS];            /* TTFT by prompt band */
  ttft__shist *split_prefill[TTFT_PREFIX_BAND_COUNT_]; /* PREFILL by prefix
                                                         band (1.2)         */
  ttft__shist *step[2];       /* engine-step durations, registry-wide:
                                 [0] without prefill, [1] with (1.2)         */
  ttft__shist empty;          /* what every histogram pointer starts at     */
  /* A gathered snapshot with TTFT_GATHER_BY_PROCESS (1.3): this snapshot
   * holds the merged view (every accessor reads it); the expositions
   * (Prometheus text, OpenMetrics, protobuf, JSON, text) instead write
   * each family once with one set of samples per part, labelled
   * process="part_name[i]". Parts are owned by this snapshot (freed with
   * it) and have nparts == 0 themselves. nparts == 0 everywhere else; the
   * codec, merge and delta read the merged view only. */
  uint32_t nparts;
  ttft_snapshot **part;       /* nparts snapshots                            */
  char (*part_name)[TTFT__NAME_MAX]; /* nparts names, NUL-terminated         */
  ttft__sblock *store;         /* the histograms' storage, freed with s      */
  size_t store_bytes;         /* bytes of it allocated                      */
};

/* Whether class c of s appears in expositions and reports. Every class
 * added with ttft_class_add (c >= 1) does, at zero until it records: a
 * series' first sample must hold no observation, or Prometheus' rate()
 * and increase() never count what it holds (issue 32). The default class
 * (0, never added) does once a begin was tried on it (accepted, dropped,
 * or refused for a wall-clock time), or from the start with
 * s->export_idle_classes set; else it is idle and left out. The class
 * index stays the class id either way. */
static inline int ttft__class_exported(const ttft_snapshot *s, uint32_t c) {
  if (c >= s->nclasses) return 0;
  if (s->export_idle_classes || c > 0) return 1;
  return s->cls[c].ctr[TTFT_COUNTER_BEGUN] != 0 || s->cls[c].ctr[TTFT_COUNTER_DROPPED] != 0 ||
         s->cls[c].ctr[TTFT_COUNTER_CLOCK_REFUSED] != 0;
}

/* A zeroed snapshot with nclasses classes (names empty, every histogram
 * empty), allocated with the current allocator. NULL on ENOMEM, nclasses
 * == 0 or nclasses > TTFT__MAX_CLASSES. */
TTFT_HIDDEN ttft_snapshot *ttft__snapshot_new(uint32_t nclasses);
/* Copy the label/config part (not the data, not the classes) of src. */
TTFT_HIDDEN void ttft__snapshot_copy_meta(ttft_snapshot *dst, const ttft_snapshot *src);
/* bytes from s's storage, 16-aligned, zeroed, freed with s; NULL on ENOMEM */
TTFT_HIDDEN void *ttft__snapshot_alloc(ttft_snapshot *s, size_t bytes);
/* Pack what acc holds into a histogram of s and point *slot at it (at
 * s->empty when acc is empty); acc is cleared. TTFT_OK, TTFT_ENOMEM,
 * TTFT_ERANGE (a count overflowed). */
TTFT_HIDDEN int ttft__snapshot_hist(ttft_snapshot *s, ttft__hacc *acc, ttft__shist **slot);
/* Compute s->all from the classes (acc is scratch). TTFT_OK, TTFT_ENOMEM,
 * TTFT_ERANGE (a sum over classes overflows). */
TTFT_HIDDEN int ttft__snapshot_finish(ttft_snapshot *s, ttft__hacc *acc);
/* SLO attainment of class c, met / judged in [0, 1] with judged =
 * min(slo_judged, ended) and met = min(slo_met, judged), or -1.0 when
 * nothing was judged: the one rule every reader uses (the counters of a
 * decoded or racily copied snapshot may have slo_met > slo_judged or
 * slo_judged > ended). ended saturates instead of wrapping. *met_out /
 * *judged_out (when not NULL) receive the clamped numbers. */
TTFT_HIDDEN double ttft__attainment(const ttft__sclass *c, uint64_t *met_out, uint64_t *judged_out);
/* Class by id, TTFT_CLASS_ALL -> &s->all, NULL when out of range. */
TTFT_HIDDEN const ttft__sclass *ttft__snapshot_class(const ttft_snapshot *s, int class_id);

/* slowest.c: sort n entries by value descending (ties: earlier t_end
 * first, then request id, then trace id) and keep at most k; returns how
 * many are kept. */
TTFT_HIDDEN uint32_t ttft__slow_sort(ttft__slow *v, uint32_t n, uint32_t k);
/* Set class c's list `by` of s to the first n of v (copied into s's
 * storage; cls of each entry set to c). TTFT_OK or TTFT_ENOMEM. */
TTFT_HIDDEN int ttft__slow_set(ttft_snapshot *s, uint32_t c, int by, const ttft__slow *v,
                               uint32_t n);
/* s->all's lists: the k slowest over every class. TTFT_OK, TTFT_ENOMEM. */
TTFT_HIDDEN int ttft__slow_finish(ttft_snapshot *s);
/* The trace id of e as 32 lowercase hex digits and a NUL (dst[33]);
 * "" when it has none. */
TTFT_HIDDEN void ttft__slow_trace_hex(const ttft__slow *e, char *dst);

/* The fluidity of slowest entry e: 1 - dl_missed / dl, 1 with no deadline
 * (a decoded entry has dl_missed <= dl). */
static inline double ttft__slow_fluidity(const ttft__slow *e) {
  return e->dl ? 1.0 - (double)e->dl_missed / (double)e->dl : 1.0;
}

/* The default Prometheus bucket bounds for metric m (ns; tokens for
 * OUTPUT_TOKENS); *n receives their number. */
TTFT_HIDDEN const uint64_t *ttft__default_prom_buckets(ttft_metric m, uint32_t *n);

#endif /* TTFT_SNAPSHOT_H */
