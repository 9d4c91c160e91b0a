/* step_ring.c — the engine-step ring's reader: what the steps around a
 * stall's gap (a, b] say, for its cause (registry.h, ttft__gap_steps;
 * the rule is hooks.c's stall_cause and docs/metrics.md).
 *
 * The ring is ordered by step number; one engine loop (the rule's
 * premise) starts and ends its steps in that order. Read newest first,
 * the ring is then three runs: steps that began at or after b (recorded
 * after the token that closed the gap: another thread, a late report),
 * steps that overlap (a, b], steps that ended by a. The reader visits the
 * first run one by one for a few entries and then bisects over start
 * times past the rest, reads every step of the second (what the rule
 * weighs), stops at the first entry of the third, and from there follows
 * the entries' links to the steps without prefill (the fallback u wants
 * the latest 16), so it reads
 *   O(log TTFT_STEP_RING + steps overlapping the gap + TTFT__GAP_BEFORE)
 * entries, plus any it finds torn or overwritten (each is passed by
 * reading the one below it, as a full scan would skip it; at most
 * TORN_MAX of them). On such a ring
 * its figures are those of reading every entry newest first (the 1.2
 * reader, which read all 1024 when no step before the gap lacked prefill):
 * tests/test_step_ring.c compares the two over random timelines with torn
 * and overwritten entries. A ring written by several engine loops at once
 * is not ordered; its figures are then what the runs above find (one
 * stall's cause may differ, nothing else: docs/metrics.md "Limits").
 *
 * Layer: record (src/README.md). */
#include "record/registry.h"

typedef struct step {
  uint64_t t_start, t_end;
  uint32_t prefill; /* prompt tokens; 0 none                          */
  uint32_t np_back; /* the latest step without prefill is this many
                       steps back; 0 none                              */
} step;

/* One ring entry, if it still holds step k: 1 and *out, else 0. */
static int step_read(const ttft_registry *r, uint64_t k, step *out, ttft__gap_steps *g) {
  const ttft__step_ent *e = &r->steps[k & TTFT__STEP_MASK];
  g->reads++;
  g->torn++; /* until it reads whole */
  /* acquire: pairs with the writer's release of 2k + 2, so the fields
   * read below are the ones written before it */
  uint64_t s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
  if (s1 != 2 * k + 2) return 0;
  uint64_t t0 = TTFT__LD(&e->t_start), t1 = TTFT__LD(&e->t_end), m = TTFT__LD(&e->meta);
  /* acquire fence: the field loads above complete before the re-check
   * below, so a writer that started over them changed seq first */
  atomic_thread_fence(memory_order_acquire);
  if (TTFT__LD(&e->seq) != s1) return 0;
  g->torn--;
  out->t_start = t0, out->t_end = t1;
  out->prefill = TTFT__STEP_PREFILL(m), out->np_back = TTFT__STEP_NP_BACK(m);
  return 1;
}

/* Steps begun at or after b read one by one before bisecting: the usual
 * number is 0 or 1 (a step recorded by another thread meanwhile). */
#define AFTER_WALK 4
/* Entries found torn or overwritten that one reading passes: beyond, it
 * stops where it is (a writer lapping the ring as fast as it is read,
 * e.g. while the reader was descheduled; the figures are then of the
 * steps read so far, never counting the rest of the gap as covered). */
#define TORN_MAX 64

/* The newest readable step in [lo, hi) that started before b, + 1; lo
 * when none. Bisection over start times (in order): a probe that is torn
 * or overwritten is replaced by the nearest readable entry below it. */
static uint64_t started_before(const ttft_registry *r, uint64_t lo, uint64_t hi, uint64_t b,
                               ttft__gap_steps *g) {
  uint64_t found = lo;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2, m = mid + 1;
    step e;
    int ok = 0;
    while (m > lo && !(ok = step_read(r, m - 1, &e, g)) && g->torn <= TORN_MAX) m--;
    if (g->torn > TORN_MAX) return found;
    if (!ok) { /* [lo, mid] unreadable: skipped either way */
      lo = mid + 1;
      continue;
    }
    m--;
    if (e.t_start < b) { /* the answer is m or above mid ((m, mid] unreadable) */
      found = m + 1;
      lo = mid + 1;
    } else {
      hi = m;
    }
  }
  return found;
}

/* The latest TTFT__GAP_BEFORE steps without prefill in [last, k], step k
 * (read as e) being the newest that ended by a: along the links, one read
 * each; an entry a link names that is torn or overwritten is passed by
 * reading the ones below it until one is readable, whose own link goes on. */
static void before_gap(const ttft_registry *r, uint64_t last, uint64_t k, step e, ttft__gap_steps *g) {
  for (;;) {
    if (!e.prefill) {
      g->before[g->nbefore++] = e.t_end - e.t_start;
      if (g->nbefore == TTFT__GAP_BEFORE) return;
    }
    if (!e.np_back || e.np_back > k - last) return; /* none, or none still in the ring */
    k -= e.np_back;
    while (!step_read(r, k, &e, g))
      if (k-- == last || g->torn > TORN_MAX) return;
  }
}

void ttft__gap_steps_read(const ttft_registry *r, uint64_t a, uint64_t b, int want_before,
                          ttft__gap_steps *g) {
  g->ended_inside = 0;
  g->npre = g->nbefore = 0;
  g->covered = g->prod = g->earlier = 0;
  g->reads = g->torn = 0;
  /* relaxed: a ticket only names an entry; each entry's seq is checked
   * with acquire (step_read), and one not complete yet is skipped */
  uint64_t head = TTFT__LD(&r->step_head);
  if (!head) return;
  /* newest first: one engine loop records its steps in time order, so
   * everything below `frontier` not yet seen is uncovered so far */
  uint64_t frontier = b, k = head, last = head > TTFT_STEP_RING ? head - TTFT_STEP_RING : 0;
  unsigned after = 0;
  int reached_start = 0, whole = 1; /* whole: no entry left unread */
  step e;
  while (k > last) {
    k--;
    if (!step_read(r, k, &e, g)) {
      if (g->torn > TORN_MAX) {
        whole = 0;
        break;
      }
      continue;
    }
    const uint64_t s0 = e.t_start, s1 = e.t_end;
    if (s1 <= a) { /* ended before the gap, and so did every older step */
      reached_start = 1;
      break;
    }
    if (s0 >= b) { /* recorded after this token: skip the run of them */
      if (++after == AFTER_WALK) k = started_before(r, last, k, b, g);
      if (g->torn > TORN_MAX) {
        whole = 0;
        break;
      }
      continue;
    }
    /* the first step read that ended inside the gap produced the token
     * at b; the ones read after it ran before it, without the sequence */
    const int producer = s1 <= b && !g->ended_inside, before_producer = s1 <= b && !producer;
    if (s1 <= b) g->ended_inside = 1;
    uint64_t lo = s0 > a ? s0 : a, hi = s1 < b ? s1 : b;
    if (producer) g->prod = hi - lo;
    /* a prefill step's part inside the gap (beyond TTFT__GAP_PREFILL of
     * them in one gap, the rest are not weighed: the gap is then mostly
     * busy with prefill anyway) */
    if (e.prefill && g->npre < TTFT__GAP_PREFILL) g->pre_len[g->npre++] = hi - lo;
    if (hi > frontier) hi = frontier;
    if (hi > lo) {
      g->covered += hi - lo;
      if (before_producer) g->earlier += hi - lo;
    }
    if (lo < frontier) frontier = lo;
  }
  /* more steps in the gap than the ring holds: its start was busy too */
  if (!reached_start && whole && last > 0 && frontier > a) {
    g->covered += frontier - a;
    if (g->ended_inside) g->earlier += frontier - a;
  }
  if (reached_start && want_before) before_gap(r, last, k, e, g);
}
