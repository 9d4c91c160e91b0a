/* reclaim.c — slot lists, and when an ended slot may serve a new sequence.
 *
 * FAULT MODEL (what a caller may do, and what each case costs; issue 18).
 * The proof below assumes every call that enters also leaves. These are
 * the ways one does not, and how each is handled:
 *
 *  F1. A thread dies inside a call: pthread_exit from a signal handler, an
 *      asynchronous pthread_cancel, or siglongjmp out of a hook followed by
 *      the thread's exit (or ttft_thread_release). Handled by
 *      construction. A private shard's call brackets store e | 1 on entry
 *      and (e | 1) + 1 on exit, so odd always means "inside", whatever the
 *      epoch was before; the thread-exit handler (registry.c,
 *      shard_release) closes a call the thread died inside — its epoch
 *      goes odd -> even with a release store — before the shard is free:
 *      the dead call will never write again, the reclaimer waiting on it
 *      sees the epoch change and finishes its batch, and the next owner
 *      starts outside, so its calls read as inside while they run and its
 *      idle shard as outside. Shared-shard calls are recorded in a
 *      thread-local stack (registry.h, ttft__tl_open) between the SRCU
 *      enter count and the exit count; the exit handler counts the exits
 *      of those still open, so their index drains. The exception: a
 *      thread killed exactly between an SRCU count and the thread-local
 *      record of it (an instruction at each end of a shared-shard call)
 *      leaves that index unbalanced, and reclamation of shared-shard
 *      batches stops (begins at capacity are refused and counted) — not
 *      handled, and not detectable by a library that cannot see the
 *      interrupted instruction. A thread that dies inside the reclaimer
 *      (begin or stream_end) gives the try-lock back at exit
 *      (ttft__reclaim_thread_exit); every reclaimer step leaves the batch
 *      resumable, and limbo_free forgets a chain before it pushes it, so
 *      the worst case is a leaked chain (capacity shrinks), never a slot
 *      on two lists. A slot a dying begin popped but never published, or
 *      a dying stream_end ended but never retired, is leaked the same way.
 *      Test: test_dead_owner (each way, private shards with membarrier,
 *      fence mode, the shared shard; 500 rounds).
 *  F2. A signal handler calls a hook while a hook of the same thread is
 *      inside a call (nested calls). Handled by construction: the nested
 *      call finds its thread's private epoch odd and records through the
 *      shared shard (ttft__shard_for_call), with atomic read-modify-writes
 *      and its own SRCU bracket; the interrupted call's epoch stays odd
 *      until it leaves and its plain counter updates are not raced. begin
 *      and stream_end bracket their private counter updates for the same
 *      reason. Precondition: the thread has already called a hook of that
 *      registry (the first call fills a thread cache and is not
 *      async-signal-safe; a debug assert checks it). A nested begin at
 *      capacity may be refused (the interrupted thread cannot leave until
 *      the handler returns). Test: test_dead_owner nested_* .
 *  F3. siglongjmp out of a hook by a thread that goes on calling hooks.
 *      Safe, but costly until the thread releases its shard: its epoch
 *      stays odd (the abandoned call is indistinguishable from an
 *      interrupted one, F2), so its later calls record through the shared
 *      shard and batches wait for its shard; call ttft_thread_release(r)
 *      after such a jump (it closes the call, as at thread exit).
 *  F4. The heavy barrier fails at run time (membarrier starts returning
 *      EPERM under a seccomp filter installed later with TSYNC): see
 *      heavy_barrier below.
 *
 * THE PROBLEM. ttft_stream_end may race a ttft_token_emitted (or ttft_mark,
 * ttft_annotate, ttft_step_emitted) running on another thread for the same
 * sequence. The writer ("caller") checks the slot's state word against its
 * handle, then writes the slot's fields. If the end wins its CAS between
 * that check and those writes, the writes land after the end. That is
 * harmless while the slot is still ENDING or free — and would corrupt the
 * next sequence if the slot were already serving it. So an ended slot is
 * reused only after every call that could have passed the check against
 * the old generation has left. The per-token path of a thread that owns
 * its shard must pay no lock-prefixed instruction and no fence for this.
 *
 * THE INVARIANT. A slot on a free stack is *quiescent*: no call that
 * loaded its state word and saw the generation that ended is still
 * running. Equivalently: for every batch B of ended slots, and every call
 * C that loads a slot state of B, either (a) C's load returns ENDING or a
 * later generation (so C writes nothing), or (b) C leaves before any slot
 * of B leaves limbo (and C's writes happen-before the slot's reuse).
 *
 * THE PROTOCOL. Ended slots wait on their ending shard's `pending` stack.
 * A reclaimer (the thread that retires the batch-th slot, or a begin that
 * finds no free slot; one at a time, `reclaiming` is a try-lock) takes
 * every pending stack into limbo as one batch B. Every slot of B was ended
 * by a seq_cst CAS (hooks.c) that happens-before the take (release push,
 * acq_rel take). Then, per kind of shard:
 *
 * 1. Private shards (one owner thread, no atomic RMW on the token path).
 *    The owner brackets each call: E := odd (relaxed store), compiler
 *    barrier, load state (acquire), ..., E := even (release store).
 *    The reclaimer issues one *heavy barrier* — membarrier(2)
 *    MEMBARRIER_CMD_PRIVATE_EXPEDITED, which makes every running thread of
 *    the process execute a full memory barrier (and counts a thread that
 *    is not running as having passed one) before it returns — and only
 *    then loads each owned shard's E (acquire). This is the asymmetric
 *    Dekker pattern of userspace-rcu's urcu-memb flavour. Let P be the
 *    point in the owner's program at which it executed the barrier:
 *      - if P precedes the owner's "E := odd", the owner's state load
 *        comes after P, hence after the reclaimer's barrier, and the CAS
 *        that ended the slot happened-before that barrier: the load
 *        returns ENDING (or later): case (a);
 *      - if P follows "E := odd", that store was globally visible when the
 *        membarrier returned, so the reclaimer reads E odd (or a later
 *        value) — it records the value and waits until E changes, i.e.
 *        until that call has left (release store, acquire load): (b).
 *    A later call of the same owner starts after E changed, which is after
 *    P (E's change was not visible at the reclaimer's read, which follows
 *    the membarrier; a store before P would have been): its load returns
 *    ENDING: (a). No timing assumption is involved.
 *    Where membarrier is unavailable (old kernel, seccomp), the library
 *    decides so once, before the first registry exists, and then every
 *    private call puts a seq_cst fence between "E := odd" and the state
 *    load, and the reclaimer a seq_cst fence before its loads: classic
 *    Dekker with fences (C11 [atomics.fences]), the way userspace-rcu
 *    falls back to smp_mb() on both sides.
 *    A shard with no owner (its thread exited or released it) has no call
 *    in progress. It is read *after* the barrier, so a thread that takes
 *    it afterwards does so after its own barrier point: its calls see
 *    ENDING.
 *
 * 2. The shared (overflow) shard, used by any number of threads with
 *    atomic RMWs: SRCU-style counter pairs. A call reads the current index
 *    i (acquire), increments enter[i] (seq_cst RMW), loads the state
 *    (seq_cst), ..., increments exit[i] (release RMW). The reclaimer, with
 *    a = the active index when the batch was taken:
 *      step 1: wait until index 1-a is drained;
 *      step 2: flip the active index to 1-a (seq_cst store);
 *      step 3: wait until index a is drained.
 *    "Drained" = load exit[j] then enter[j] (both seq_cst) and find them
 *    equal. Because each call increments exit[j] only after enter[j], and
 *    exit is read first, equality means no call of index j that
 *    incremented enter[j] before the enter load L is still inside: those
 *    are case (b) (their release increments of exit[j] synchronise with
 *    the acquire in the load). A call whose increment I follows L in the
 *    seq_cst order S: the ending CAS happens-before L, so CAS <S L <S I <S
 *    its state load, which therefore returns ENDING or later: case (a).
 *    Every call increments one of the two indices, and both are drained
 *    (1-a in step 1, a in step 3), so every call is covered. Step 2 makes
 *    step 3 finish: calls that read the index after the flip go to 1-a,
 *    so only calls that read it before the flip can still add to index a.
 *    (A single count compared with a count taken at batch start — what
 *    1.0 did — is wrong: calls that start later and finish quickly make
 *    the exit count catch up while an older call is still inside.)
 *
 * A WORKED INTERLEAVING (the reproduction of issue 9.1, one slot, shared
 * shard). Thread A loops token_emitted(x); main: stream_end(x), then a
 * begin that wants x's slot.
 *   A: idx -> 0; enter[0] 7 -> 8; load state: x LIVE; [A is frozen here]
 *   main: CAS x LIVE -> ENDING; retire x (pending); begin: no free slot,
 *         reclaim: take {x}; a = 0;
 *         step 1: exit[1] = enter[1] = 3: drained;  flip: idx = 1;
 *         step 3: exit[0] = 7, enter[0] = 8: NOT drained -> x stays in
 *         limbo; begin polls (bounded wait) and gives up: returns 0.
 *   B (another thread, shared shard): idx -> 1; enter[1] 3 -> 4; load
 *         state: ENDING -> ESTALE; exit[1] 3 -> 4. It cannot "cover" for
 *         A: it counted on the other index.
 *   A: resumes, writes x's fields (slot still ENDING, in limbo), exit[0]
 *         7 -> 8.
 *   main: next begin polls step 3: exit[0] = enter[0] = 8: drained; x is
 *         freed and reused. A's writes happened-before (release/acquire).
 * Under 1.0's rule ("exited >= entered at batch start" = 8) B's exit made
 * exited 8 while A was inside: x was reused under A.
 *
 * WHY THE RECLAIMER CANNOT MISS A CALL. A call is missed only if it passed
 * the state check against the old generation and is not waited for. Every
 * call of a private shard is seen by its epoch after the heavy barrier or
 * sees ENDING (1); every call of the shared shard increments an index
 * whose drain the batch waits for, or sees ENDING (2); a thread's shard
 * is fixed for the duration of a call. There is no grace period, no clock
 * and no "long enough in practice".
 *
 * Cost: on a private shard, two plain stores per call (no fence, no lock
 * prefix); one membarrier syscall per reclaim batch by the thread that runs
 * the reclaimer, only when another thread owns a private shard, and then
 * at most one per millisecond unless a begin finds no free slot (each one
 * interrupts every running thread of the process: ~3 us here, more in a
 * VM; a batch is tried every nslots/16 ends, at most 64). A thread frozen
 * inside a call holds back every later batch until it leaves: begins that
 * find the registry exhausted meanwhile poll the reclaimer a bounded
 * number of times (TTFT__EXHAUSTED_POLLS, microseconds), then count a drop:
 * no begin waits for time to pass.
 */
#include <errno.h>
#include <string.h>

#include "record/registry.h"

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define TTFT__EXHAUSTED_POLLS 64u /* a begin at capacity polls the reclaimer this often */
#define TTFT__BARRIER_INTERVAL_NS UINT64_C(1000000) /* membarriers at most this often, unless a
                                                      begin has no free slot */

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* ------------------------------------------------------- heavy barrier */
/* 1 once membarrier(PRIVATE_EXPEDITED) is registered for this process;
 * 0 = private calls must fence. Decided once, before the first registry
 * exists (ttft__reclaim_init), never changed afterwards except in a fork
 * child that re-registers (ttft__reclaim_atfork_child). */
static _Atomic int g_membarrier = -1; /* -1 = not decided yet */

#if defined(__linux__) && defined(__NR_membarrier)
static long membarrier_call(int cmd) { return syscall(__NR_membarrier, cmd, 0, 0); }
static int membarrier_register(void) {
  long cmds = membarrier_call(MEMBARRIER_CMD_QUERY);
  if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return 0;
  return membarrier_call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}
#else
static int membarrier_register(void) { return 0; }
#endif

int ttft__reclaim_init(void) {
  int v = atomic_load_explicit(&g_membarrier, memory_order_acquire);
  if (v >= 0) return v;
  /* saved and restored: the library never leaves errno set for its caller */
  int saved = errno;
  int ok = membarrier_register();
  errno = saved;
  int expect = -1;
  /* acq_rel: the first decision wins; everyone reads the same value
   * (registries copy it at creation, before any hook can see them) */
  if (!atomic_compare_exchange_strong_explicit(&g_membarrier, &expect, ok, memory_order_acq_rel,
                                               memory_order_acquire))
    return expect;
  return ok;
}

void ttft__reclaim_atfork_child(void) {
  /* the registration belongs to the parent's mm; register the child's */
  if (atomic_load_explicit(&g_membarrier, memory_order_relaxed) == 1) {
    int saved = errno;
    if (!membarrier_register()) {
      /* cannot happen on a kernel that registered the parent; if it did,
       * the reclaimer below falls back to a fence it cannot pair with the
       * callers' compiler barriers. Keep it correct instead: no slot is
       * ever recycled in this child (begins drop once the pool is used). */
      atomic_store_explicit(&g_membarrier, 2, memory_order_relaxed);
    }
    errno = saved;
  }
}

/* The reclaimer's side of the Dekker pair. Returns 0 when no barrier can
 * be made (see ttft__reclaim_atfork_child): then nothing may be freed. */
static int heavy_barrier(ttft_registry *r) {
  if (r->fence_mode) {
    /* seq_cst: pairs with the seq_cst fence of every private call */
    atomic_thread_fence(memory_order_seq_cst);
    return 1;
  }
#if defined(__linux__) && defined(__NR_membarrier)
  if (atomic_load_explicit(&g_membarrier, memory_order_relaxed) != 1) return 0;
  int saved = errno;
  long rc;
  do {
    rc = membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
  } while (rc != 0 && errno == EINTR);
  errno = saved;
  r->barrier_ns = ttft_now_ns(); /* the reclaim try-lock is held */
  return rc == 0;
#else
  return 0;
#endif
}

/* ------------------------------------------------------------- stacks */
void ttft__stack_push(ttft_registry *r, ttft__stack *st, uint32_t idx) {
  TTFT_ASSERT(idx < r->nslots);
  uint64_t h = TTFT__LD(&st->head);
  uint64_t nh;
  do {
    TTFT__ST(&r->slots[idx].next, (uint32_t)h);
    nh = (((h >> 32) + 1) << 32) | (uint64_t)(idx + 1);
    /* release: the link and the slot's reset state are visible to the popper */
  } while (!atomic_compare_exchange_weak_explicit(&st->head, &h, nh, memory_order_release,
                                                  memory_order_relaxed));
}

/* Push onto a shard's pending stack, keeping in each element the tail of
 * the chain below it, so the reclaimer splices whole chains without
 * walking them. */
static void pending_push(ttft_registry *r, ttft__stack *st, uint32_t idx) {
  TTFT_ASSERT(idx < r->nslots);
  ttft__slot *sl = &r->slots[idx];
  uint64_t h = TTFT__LD(&st->head);
  uint64_t nh;
  do {
    uint32_t top = (uint32_t)h;
    TTFT__ST(&sl->next, top);
    /* stale if the reclaimer took the stack meanwhile: then the CAS fails */
    TTFT__ST(&sl->tail, top ? TTFT__LD(&r->slots[top - 1].tail) : idx + 1);
    nh = (((h >> 32) + 1) << 32) | (uint64_t)(idx + 1);
    /* release: the links, and the end's CAS on the slot state before them,
     * happen-before the reclaimer that takes the stack (acq_rel below) */
  } while (!atomic_compare_exchange_weak_explicit(&st->head, &h, nh, memory_order_release,
                                                  memory_order_relaxed));
}

static uint32_t stack_pop(ttft_registry *r, ttft__stack *st) {
  /* acquire: pairs with the pusher's release (slot link and state) */
  uint64_t h = atomic_load_explicit(&st->head, memory_order_acquire);
  for (;;) {
    uint32_t top = (uint32_t)h;
    if (!top) return 0;
    /* may be stale if another thread popped it meanwhile; the tag in the
     * head makes that CAS fail */
    uint32_t next = TTFT__LD(&r->slots[top - 1].next);
    uint64_t nh = (((h >> 32) + 1) << 32) | next;
    /* acquire: as above, for the head we finally take */
    if (atomic_compare_exchange_weak_explicit(&st->head, &h, nh, memory_order_acquire,
                                              memory_order_acquire))
      return top;
  }
}

/* Splice the chain first..last onto a free stack with one CAS. */
static void stack_push_chain(ttft_registry *r, ttft__stack *st, uint32_t first, uint32_t last) {
  TTFT_ASSERT(first >= 1 && first <= r->nslots && last >= 1 && last <= r->nslots);
  uint64_t h = TTFT__LD(&st->head);
  uint64_t nh;
  do {
    TTFT__ST(&r->slots[last - 1].next, (uint32_t)h);
    nh = (((h >> 32) + 1) << 32) | first;
    /* release: the links (and every write the quiescent callers made,
     * acquired by the reclaimer) are visible to whoever pops */
  } while (!atomic_compare_exchange_weak_explicit(&st->head, &h, nh, memory_order_release,
                                                  memory_order_relaxed));
}

/* -------------------------------------------------------- quiescence */
enum { LIMBO_EMPTY = 0, LIMBO_PRIVATE = 1, LIMBO_SRCU_INACTIVE = 1, LIMBO_SRCU_ACTIVE = 2 };

/* Index j of the shared shard drained: no call that counted on j before
 * this check is still inside. Order matters: exit first, then enter. */
static int srcu_drained(const ttft__shard *sh, uint32_t j) {
  /* seq_cst: exit before enter in S (see the top of this file); it is
   * also an acquire of the exited calls' slot writes */
  uint64_t x = atomic_load_explicit(&sh->srcu_exit[j], memory_order_seq_cst);
  /* seq_cst: the load L of the proof: calls that increment enter[j]
   * after it see the batch's ENDING states */
  uint64_t n = atomic_load_explicit(&sh->srcu_enter[j], memory_order_seq_cst);
  return x == n;
}

/* Has every call the batch in limbo must wait for left? Advances the
 * per-shard state machines; called with the reclaim try-lock held. */
static int quiescent(ttft_registry *r, const ttft__shard *self) {
  int done = 1;
  for (uint32_t i = 0; i < r->nshards; i++) {
    unsigned char w = r->limbo_wait[i];
    if (!w) continue;
    ttft__shard *sh = &r->shards[i];
    if (sh == self && !sh->shared) {
      /* our own shard: we are here, in begin or stream_end (whose bracket
       * guards only counters, no slot of a batch), not inside the call
       * another reclaimer saw; a hook nested in a signal handler runs
       * on the shared shard, so it never gets here with self its owner's */
      r->limbo_wait[i] = 0;
      continue;
    }
    if (!sh->shared) {
      /* acquire: pairs with the owner's release at call exit, so its slot
       * writes happen-before the slot's reuse */
      uint64_t e = atomic_load_explicit(&sh->epoch, memory_order_acquire);
      if (e != r->limbo_epoch[i]) r->limbo_wait[i] = 0;
      else done = 0;
      continue;
    }
    uint32_t a = (uint32_t)r->limbo_epoch[i]; /* the active index at the take */
    if (w == LIMBO_SRCU_INACTIVE) {
      if (!srcu_drained(sh, 1 - a)) {
        done = 0;
        continue;
      }
      /* seq_cst: calls that read the new index count where step 3 does
       * not look; their acquire of it orders their enter after this */
      atomic_store_explicit(&sh->srcu_idx, 1 - a, memory_order_seq_cst);
      r->limbo_wait[i] = w = LIMBO_SRCU_ACTIVE;
    }
    if (w == LIMBO_SRCU_ACTIVE) {
      if (srcu_drained(sh, a)) r->limbo_wait[i] = 0;
      else done = 0;
    }
  }
  return done;
}

/* Does a thread other than the caller own a private shard? seq_cst: read
 * after the batch's ending CASes in S; a thread whose seq_cst acquisition
 * this load misses orders its acquisition, hence its calls' seq_cst state
 * loads, after the ends (it sees ENDING): no barrier is needed for it. */
static int other_owners(const ttft_registry *r, const ttft__shard *self) {
  for (uint32_t i = 0; i + 1 < r->nshards; i++)
    if (&r->shards[i] != self && atomic_load_explicit(&r->shards[i].owned, memory_order_seq_cst))
      return 1;
  return 0;
}

/* Start waiting for the batch just taken into limbo. 0 when no barrier
 * could be made (the batch then stays in limbo). The barrier is skipped
 * when no other thread owns a private shard (a single recording thread, or
 * threads on the shared shard only): there is no epoch to read. */
static int limbo_start(ttft_registry *r, const ttft__shard *self) {
  if (other_owners(r, self) && !heavy_barrier(r)) {
    for (uint32_t i = 0; i < r->nshards; i++) r->limbo_wait[i] = 0;
    return 0;
  }
  for (uint32_t i = 0; i < r->nshards; i++) {
    ttft__shard *sh = &r->shards[i];
    r->limbo_wait[i] = 0;
    if (sh->shared) {
      /* relaxed: only the reclaimer (holding the try-lock) stores it */
      r->limbo_epoch[i] = TTFT__LD(&sh->srcu_idx);
      r->limbo_wait[i] = LIMBO_SRCU_INACTIVE;
      continue;
    }
    /* our own calls are not running: we are here, outside any call */
    if (sh == self) continue;
    /* acquire: a shard released by an exiting thread carries that thread's
     * last call exit with it. Read after the barrier: see case 1 above. */
    if (!atomic_load_explicit(&sh->owned, memory_order_acquire)) continue;
    /* acquire: pairs with the owner's release at call exit */
    uint64_t e = atomic_load_explicit(&sh->epoch, memory_order_acquire);
    if (e & 1) {
      r->limbo_epoch[i] = e; /* inside a call: wait until it leaves */
      r->limbo_wait[i] = LIMBO_PRIVATE;
    }
  }
  return 1;
}

/* Give the batch in limbo back: each shard's part to that shard's free
 * stack, where the thread that ended those streams finds them. The slots
 * keep their ENDING state: ttft_begin moves them to a new generation. */
static void limbo_free(ttft_registry *r) {
  TTFT_ASSERT(TTFT__LD(&r->reclaiming) == ttft__thread_token()); /* we hold the try-lock */
  for (uint32_t k = 0; k < r->nshards; k++) {
    uint32_t first = r->limbo_first[k], last = r->limbo_last[k];
    if (!first) continue;
    /* forgotten before it is pushed: a reclaimer that dies here (a thread
     * killed inside a hook) leaks the chain, never pushes it twice */
    r->limbo_first[k] = r->limbo_last[k] = 0;
    atomic_signal_fence(memory_order_seq_cst); /* compiler only: in this order */
    stack_push_chain(r, &r->shards[k].free_list, first, last);
  }
  r->limbo_armed = 0;
  TTFT__ST(&r->limbo_head, 0);
}

/* Take every shard's pending stack into limbo; 1 when there was any. */
static int take_pending(ttft_registry *r) {
  int any = 0;
  for (uint32_t k = 0; k < r->nshards; k++) {
    ttft__stack *st = &r->shards[k].pending;
    uint64_t h = TTFT__LD(&st->head);
    if (!(uint32_t)h) continue;
    /* acq_rel: acquire the pushed slots' links (and the ending CASes
     * before them); pushers racing us retry */
    while (!atomic_compare_exchange_weak_explicit(&st->head, &h, ((h >> 32) + 1) << 32,
                                                  memory_order_acq_rel, memory_order_relaxed)) {
    }
    uint32_t top = (uint32_t)h;
    if (!top) continue;
    r->limbo_first[k] = top;
    r->limbo_last[k] = TTFT__LD(&r->slots[top - 1].tail);
    any = 1;
  }
  return any;
}

static int any_pending(const ttft_registry *r) {
  for (uint32_t k = 0; k < r->nshards; k++)
    if ((uint32_t)TTFT__LD(&r->shards[k].pending.head)) return 1;
  return 0;
}

/* One step of reclamation, never blocking: returns 1 when it freed slots.
 * urgent: a begin found no free slot. Otherwise, when a new batch would
 * need a membarrier (other threads own private shards), at most one is
 * issued per TTFT__BARRIER_INTERVAL_NS: each one interrupts every running
 * thread of the process, and ended slots can wait in their pending stacks
 * (a begin that runs out of free slots reclaims at once). This only
 * schedules the work; correctness never depends on time. */
static int try_reclaim(ttft_registry *r, const ttft__shard *self, int urgent) {
  uintptr_t z = 0;
  /* acquire: the previous reclaimer's limbo bookkeeping is visible; the
   * holder's token lets its exit handler give the lock back if it dies
   * (ttft__reclaim_thread_exit) */
  if (!atomic_compare_exchange_strong_explicit(&r->reclaiming, &z, ttft__thread_token(),
                                               memory_order_acquire, memory_order_relaxed))
    return 0;
  int freed = 0;
  if (TTFT__LD(&r->limbo_head)) {
    /* a batch whose barrier failed is armed again (first, or after a fork) */
    if (!r->limbo_armed) r->limbo_armed = limbo_start(r, self);
    if (r->limbo_armed && quiescent(r, self)) {
      limbo_free(r);
      freed = 1;
    }
  }
  int defer = 0;
  if (!urgent && !TTFT__LD(&r->limbo_head) && !r->fence_mode && other_owners(r, self)) {
    uint64_t now = ttft_now_ns();
    if (now - r->barrier_ns < TTFT__BARRIER_INTERVAL_NS) defer = 1;
  }
  if (!defer && !TTFT__LD(&r->limbo_head) && take_pending(r)) {
    TTFT__ST(&r->limbo_head, 1);
    r->limbo_armed = limbo_start(r, self);
    if (r->limbo_armed && quiescent(r, self)) {
      limbo_free(r);
      freed = 1;
    }
  }
  /* release: hands the limbo bookkeeping to the next reclaimer */
  atomic_store_explicit(&r->reclaiming, 0, memory_order_release);
  return freed;
}

/* The calling thread is exiting (registry.c, on_thread_exit, with the
 * registry list locked): if it died holding the reclaimer's try-lock — a
 * thread killed inside begin or stream_end while it reclaimed — give the
 * lock back. Every step of the reclaimer leaves the limbo resumable: a
 * batch half armed is armed again (a new barrier), the SRCU state
 * machine advances one store at a time, limbo_free forgets a chain before
 * it pushes it (a leak at worst, never a double push). */
void ttft__reclaim_thread_exit(ttft_registry *r) {
  if (TTFT__LD(&r->reclaiming) != ttft__thread_token()) return;
  r->limbo_armed = 0; /* re-arm: make a new barrier for the batch */
  /* release: hands the limbo bookkeeping to the next reclaimer */
  atomic_store_explicit(&r->reclaiming, 0, memory_order_release);
}

void ttft__slot_retire(ttft_registry *r, ttft__shard *sh, uint32_t idx) {
  TTFT_ASSERT(idx < r->nslots && sh >= r->shards && sh < r->shards + r->nshards);
  /* an ended slot: the CAS to ENDING came first */
  TTFT_ASSERT(TTFT__SLOT_PHASE(TTFT__LD(&r->slots[idx].state)) == TTFT__SLOT_ENDING);
  pending_push(r, &sh->pending, idx);
  /* a plain count on a private shard; racy (but harmless) on the shared one */
  uint32_t n = TTFT__LD(&sh->retired) + 1;
  TTFT__ST(&sh->retired, n);
  uint32_t batch = r->nslots / 16;
  if (batch < 1) batch = 1;
  if (batch > 64) batch = 64;
  if (n % batch == 0) try_reclaim(r, sh, 0);
}

/* A free slot: the caller's own shard's first (slots it ended, cache-hot),
 * then the initial pool, then any other shard's. */
static uint32_t pop_any(ttft_registry *r, ttft__shard *self) {
  uint32_t s = stack_pop(r, &self->free_list);
  if (TTFT_LIKELY(s)) return s;
  s = stack_pop(r, &r->free_list);
  if (s) return s;
  for (uint32_t k = 0; k < r->nshards; k++) {
    if (&r->shards[k] == self) continue;
    if ((uint32_t)TTFT__LD(&r->shards[k].free_list.head) && (s = stack_pop(r, &r->shards[k].free_list)))
      return s;
  }
  return 0;
}

uint32_t ttft__slot_acquire(ttft_registry *r, ttft__shard *self) {
  uint32_t s = pop_any(r, self);
  if (TTFT_LIKELY(s)) return s;
  try_reclaim(r, self, 1);
  s = pop_any(r, self);
  if (s) return s;
  /* Full, but ended slots may be waiting for calls still inside. Poll the
   * reclaimer a bounded number of times (a call that is about to leave
   * frees its batch within a few polls), then refuse: a begin never waits
   * for time to pass, never yields the CPU and makes no system call but
   * the reclaimer's one barrier per batch. Give up at once when nothing is
   * pending, in limbo or being moved. */
  for (unsigned k = 0; k < TTFT__EXHAUSTED_POLLS; k++) {
    int busy = any_pending(r) || TTFT__LD(&r->limbo_head) != 0 || TTFT__LD(&r->reclaiming) != 0;
    cpu_relax();
    try_reclaim(r, self, 1);
    s = pop_any(r, self);
    if (s || !busy) return s;
  }
  return 0;
}

/* ------------------------------------------------------------ fork */
/* In a fork child only the forking thread exists. Whatever other threads
 * were doing inside this registry stopped at an arbitrary instruction:
 * a call may have left a shard's epoch odd or an SRCU count unbalanced, a
 * reclaimer may have held the try-lock with a batch half taken, a begin
 * may have popped a slot it never published, an end may have won its CAS
 * and never retired the slot. Rebuild every list from the slot states,
 * which are always consistent: LIVE slots stay live (the child may go on
 * with, or end, the sequences it holds handles for); every other slot is
 * free. Shards not owned by the forking thread lose their owner. Called
 * by registry.c's atfork child handler; no allocation, no lock. */
void ttft__reclaim_fork_child(ttft_registry *r, const ttft__shard *mine) {
  for (uint32_t k = 0; k < r->nshards; k++) {
    ttft__shard *sh = &r->shards[k];
    TTFT__ST(&sh->pending.head, 0);
    TTFT__ST(&sh->free_list.head, 0);
    if (sh->shared) {
      for (int j = 0; j < 2; j++) TTFT__ST(&sh->srcu_exit[j], TTFT__LD(&sh->srcu_enter[j]));
    } else if (sh != mine) {
      uint64_t e = TTFT__LD(&sh->epoch);
      TTFT__ST(&sh->epoch, (e + 1) & ~UINT64_C(1)); /* no call is inside */
      TTFT__ST(&sh->owned, 0);
    }
    r->limbo_first[k] = r->limbo_last[k] = 0;
    r->limbo_wait[k] = 0;
  }
  TTFT__ST(&r->free_list.head, 0);
  r->limbo_armed = 0;
  TTFT__ST(&r->limbo_head, 0);
  TTFT__ST(&r->reclaiming, 0);
  for (uint32_t i = r->nslots; i-- > 0;)
    if (TTFT__SLOT_PHASE(TTFT__LD(&r->slots[i].state)) != TTFT__SLOT_LIVE)
      ttft__stack_push(r, &r->free_list, i);
}
