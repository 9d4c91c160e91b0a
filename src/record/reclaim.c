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
 *      A slowest-list entry a dying stream_end held claimed (hooks.c,
 *      slow_offer) is given back empty at its exit: through the thread's
 *      claim record (ttft__tl_claim), or, for a private shard, by
 *      shard_release (its lists have no other writer), so later offers
 *      fill it; only the dying stream's own offer is lost (1.2.0 left the
 *      entry held: the list froze once it was the smallest).
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
 *      after such a jump (it closes the call, as at thread exit, and
 *      gives back a slowest-list entry the abandoned stream end held).
 *  F4. The heavy barrier fails at run time: membarrier was registered
 *      when the registry was made, and starts returning EPERM (a seccomp
 *      filter installed later with TSYNC; a fork child whose registration
 *      failed). Handled by switching the registry to fence mode at run
 *      time, which needs every owner to *see* the switch: the reclaimer
 *      stores fence_mode = 2 (seq_cst), then arms the batch with the
 *      signal barrier ("signal barrier" below): one queued real-time
 *      signal per thread owning a private shard, whose handler is a full
 *      fence and an acknowledgement. The batch completes when every
 *      owner has acknowledged (or released its shard) and its epoch says
 *      outside: that is case 1's proof with the handler in membarrier's
 *      place. Each acknowledged owner's later calls read fence_mode 2
 *      (the store happened before the signal was sent), a thread that
 *      acquires a shard later reads it too (shard_acquire's seq_cst load
 *      follows the reclaimer's seq_cst read of `owned` in S), so from the
 *      next batch on both sides fence: classic Dekker, as for a registry
 *      made without membarrier. Nothing waits in a hook: the batch is
 *      polled by later reclaimer steps; begins at capacity meanwhile are
 *      refused quickly (DROPPED). The failure is remembered process-wide:
 *      membarrier is not called again. Counted: BARRIER_FALLBACKS (each
 *      batch whose barrier was a signal round or a fence because
 *      membarrier failed). Not handled: a thread that blocks the signal
 *      for good while it owns a shard holds the switch, and reclamation
 *      of that registry, back until it releases the shard or exits; no
 *      real-time signal with the default disposition left (the
 *      application handles the top 8) leaves batches unarmed (begins at
 *      capacity refused). Test: test_barrier_fallback (a real seccomp
 *      filter installed mid-run).
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
 * Cost (F4 aside: then a seq_cst fence per private call, as in fence
 * mode): on a private shard, two plain stores per call (no fence, no lock
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
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__linux__) && defined(__NR_membarrier) && defined(SYS_rt_tgsigqueueinfo) &&     \
    defined(SYS_gettid) && defined(SA_SIGINFO) && defined(SIGRTMAX)
#define TTFT__SIGNAL_BARRIER 1
#endif

#define TTFT__BARRIER_INTERVAL_NS UINT64_C(1000000) /* membarriers at most this often, unless a
                                                      begin has no free slot */

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif

/* ------------------------------------------------------- heavy barrier */
/* The process's barrier: 1 once membarrier(PRIVATE_EXPEDITED) is
 * registered; 0 = private calls must fence (decided once, before the first
 * registry exists, by ttft__reclaim_init); 2 = membarrier was registered
 * but has failed since (a seccomp filter installed later, with TSYNC, that
 * returns EPERM; a fork child whose registration failed): registries
 * created before that keep their fence-free calls and their reclaimers
 * use the signal barrier below (F4); registries created after it fence. */
enum { MB_UNDECIDED = -1, MB_NONE = 0, MB_OK = 1, MB_FAILED = 2 };
static _Atomic int g_membarrier = MB_UNDECIDED;

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
  if (v != MB_UNDECIDED) return v == MB_OK;
  /* saved and restored: the library never leaves errno set for its caller */
  int saved = errno;
  int ok = membarrier_register();
  errno = saved;
  int expect = MB_UNDECIDED;
  /* acq_rel: the first decision wins; everyone reads the same value
   * (registries copy it at creation, before any hook can see them) */
  if (!atomic_compare_exchange_strong_explicit(&g_membarrier, &expect, ok ? MB_OK : MB_NONE,
                                               memory_order_acq_rel, memory_order_acquire))
    return expect == MB_OK;
  return ok;
}

void ttft__reclaim_atfork_child(void) {
  /* the registration belongs to the parent's mm; register the child's */
  if (atomic_load_explicit(&g_membarrier, memory_order_relaxed) == MB_OK) {
    int saved = errno;
    /* cannot happen on a kernel that registered the parent; if it did,
     * the child's reclaimers use the signal barrier (F4) */
    if (!membarrier_register())
      atomic_store_explicit(&g_membarrier, MB_FAILED, memory_order_relaxed);
    errno = saved;
  }
}

/* ------------------------------------------------------- signal barrier
 * F4's fallback, as userspace RCU's urcu-signal flavour: the reclaimer
 * queues a real-time signal to each thread that owns a private shard;
 * the handler, on that thread, executes a seq_cst fence and acknowledges;
 * the reclaimer reads the owner's epoch once the acknowledgement is
 * visible. The handler runs at a point P of the owner's program, exactly
 * where membarrier's IPI would have made it execute a barrier: the proof
 * of case 1 below holds with "membarrier returned" replaced by "the
 * acknowledgement was acquired" (P after "E := odd": the odd store is
 * sequenced before the handler's release of the acknowledgement, which
 * the reclaimer acquires before it reads E; P before it: the call's state
 * load follows the handler's fence, and the slot's ending CAS happened
 * before the signal was sent, which happened before the handler ran). The
 * owner's call brackets already order their stores and the state load
 * against a handler (atomic_signal_fence), so the hot path is unchanged.
 *
 * Nothing waits: a batch armed with signals completes on a later
 * reclaimer step that finds every acknowledgement (or finds that the
 * shard's owner released it: its calls are over, and a new owner's
 * seq_cst acquisition follows the reclaimer's seq_cst read of `owned`,
 * hence the ending CASes: its calls see ENDING). Until then begins at
 * capacity are refused (DROPPED), never held.
 *
 * The signal: the highest real-time signal whose disposition is still
 * SIG_DFL when the fallback is first needed (never one the application
 * handles), installed then with SA_SIGINFO | SA_RESTART. Requests carry
 * their acknowledgement's address as an index into a static table (a
 * handler that runs late, after the request is answered or its registry
 * freed, writes nowhere it should not): value = seq << 10 | entry. */
#ifdef TTFT__SIGNAL_BARRIER
#define TTFT__ACKS 1024u /* signal requests outstanding at once, process-wide */
typedef struct ack_ent {
  _Atomic uint64_t want; /* the request's seq while in use, 0 when free */
  _Atomic uint64_t ack;  /* the last seq acknowledged here              */
} ack_ent;
static ack_ent g_acks[TTFT__ACKS];
static _Atomic uint64_t g_ack_seq;
static _Atomic uint32_t g_ack_hint;
static _Atomic int g_sig; /* 0: not installed yet, -1: being installed, -2: none free, > 0: it */

static void on_barrier_signal(int sig, siginfo_t *si, void *ctx) {
  (void)sig;
  (void)ctx;
  /* seq_cst: the barrier this signal asks for: this thread's stores
   * before the interrupted instruction are visible before the
   * acknowledgement below, and its loads after the handler returns are
   * ordered after everything the sender did before sending */
  atomic_thread_fence(memory_order_seq_cst);
  if (!si || si->si_code != SI_QUEUE) return; /* not ours (kill(2) of the same number) */
  uint64_t v = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
  uint64_t seq = v >> 10;
  ack_ent *a = &g_acks[v & (TTFT__ACKS - 1)];
  /* relaxed: a stale request finds another seq (or 0) and writes nothing */
  if (seq && atomic_load_explicit(&a->want, memory_order_relaxed) == seq)
    /* release: pairs with the reclaimer's acquire (sig_acked): the fence
     * above, hence this thread's odd epoch if it is inside a call,
     * happens-before the reclaimer's read of the epoch */
    atomic_store_explicit(&a->ack, seq, memory_order_release);
}

/* The barrier signal, installed on first use; 0 when none can be. */
static int sig_installed(void) {
  int s = atomic_load_explicit(&g_sig, memory_order_acquire);
  if (s != 0) return s > 0 ? s : 0;
  int z = 0;
  /* acq_rel: one installer; the others see -1 (not yet: the batch stays
   * unarmed and is armed again by a later reclaimer step) */
  if (!atomic_compare_exchange_strong_explicit(&g_sig, &z, -1, memory_order_acq_rel,
                                               memory_order_acquire))
    return z > 0 ? z : 0;
  int saved = errno, got = -2;
  for (int sig = SIGRTMAX; sig > SIGRTMAX - 8 && sig > SIGRTMIN; sig--) {
    struct sigaction old, sa;
    if (sigaction(sig, NULL, &old) != 0) continue;
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue; /* the application's */
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_barrier_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) == 0) {
      got = sig;
      break;
    }
  }
  errno = saved;
  /* release: the handler is installed before any reclaimer sends it */
  atomic_store_explicit(&g_sig, got, memory_order_release);
  return got > 0 ? got : 0;
}

/* An acknowledgement entry for request seq: its index + 1, 0 if all are
 * in use (bounded scan; then the batch is armed again later). */
static uint32_t ack_get(uint64_t seq) {
  uint32_t h = atomic_load_explicit(&g_ack_hint, memory_order_relaxed);
  for (uint32_t n = 0; n < TTFT__ACKS; n++) {
    uint32_t k = (h + n) & (TTFT__ACKS - 1);
    uint64_t z = 0;
    /* relaxed: the entry carries no data; the seq names the request */
    if (atomic_load_explicit(&g_acks[k].want, memory_order_relaxed) == 0 &&
        atomic_compare_exchange_strong_explicit(&g_acks[k].want, &z, seq, memory_order_relaxed,
                                                memory_order_relaxed)) {
      atomic_store_explicit(&g_ack_hint, k + 1, memory_order_relaxed);
      return k + 1;
    }
  }
  return 0;
}

static void ack_put(uint32_t k1) {
  /* relaxed: a late handler then finds no match and writes nothing */
  atomic_store_explicit(&g_acks[k1 - 1].want, 0, memory_order_relaxed);
}

/* Queue the barrier signal to thread tid for request seq at entry k1;
 * 1 when queued. */
static int sig_send(int sig, int32_t tid, uint64_t seq, uint32_t k1) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = sig;
  si.si_code = SI_QUEUE;
  si.si_pid = getpid();
  si.si_uid = getuid();
  si.si_value.sival_ptr = (void *)(uintptr_t)((seq << 10) | (k1 - 1));
  int saved = errno;
  long rc = syscall(SYS_rt_tgsigqueueinfo, (long)getpid(), (long)tid, (long)sig, &si);
  errno = saved;
  return rc == 0;
}

void ttft__reclaim_owner_set(ttft__shard *sh) {
  int saved = errno;
  int32_t tid = (int32_t)syscall(SYS_gettid);
  errno = saved;
  atomic_store_explicit(&sh->owner_tid, tid, memory_order_relaxed);
  /* release: the tid above is visible to a reclaimer that acquires the
   * new count (and so sees the previous owner's release of the shard) */
  atomic_store_explicit(&sh->owner_gen, TTFT__LD(&sh->owner_gen) + 1, memory_order_release);
}
#else
void ttft__reclaim_owner_set(ttft__shard *sh) {
  atomic_store_explicit(&sh->owner_gen, TTFT__LD(&sh->owner_gen) + 1, memory_order_release);
}
#endif

/* Forget every signal request of the batch (answered or not). */
static void sig_requests_drop(ttft_registry *r) {
  for (uint32_t i = 0; i < r->nshards; i++) {
    ttft__shard *sh = &r->shards[i];
#ifdef TTFT__SIGNAL_BARRIER
    if (sh->limbo_ack) ack_put(sh->limbo_ack);
#endif
    sh->limbo_ack = 0;
  }
}

/* The calling shard's registry-wide counter c (class 0) += 1: the
 * reclaimer runs on the thread that owns self (inside its begin or
 * stream_end), so a private shard takes a plain update, as ctr_add. */
static void count_registry(const ttft__shard *self, ttft_counter c) {
  /* acquire: class 0's record was published at creation */
  ttft__crec *cr = atomic_load_explicit(&self->cls[0], memory_order_acquire);
  if (self->shared) atomic_fetch_add_explicit(&cr->ctr[c], 1, memory_order_relaxed);
  else TTFT__ST(&cr->ctr[c], TTFT__LD(&cr->ctr[c]) + 1);
}

/* The reclaimer's side of the Dekker pair: 1 = made (fence or
 * membarrier), 2 = make it with signals (F4: membarrier has failed and
 * this registry's switch to fence mode is not complete yet), 0 = no
 * barrier can be made (nothing may be freed). */
static int heavy_barrier(ttft_registry *r, const ttft__shard *self) {
  int fm = TTFT__LD(&r->fence_mode);
  if (fm == 1 || (fm == 2 && r->switch_done)) {
    /* seq_cst: pairs with the seq_cst fence of every private call */
    atomic_thread_fence(memory_order_seq_cst);
    if (fm == 2) count_registry(self, TTFT_COUNTER_BARRIER_FALLBACKS);
    return 1;
  }
  if (fm == 2) return 2; /* switching: the owners have not all seen it */
  r->barrier_ns = ttft_now_ns(); /* the reclaim try-lock is held */
#if defined(__linux__) && defined(__NR_membarrier)
  int mb = atomic_load_explicit(&g_membarrier, memory_order_relaxed);
  if (mb == MB_OK) {
    int saved = errno;
    long rc;
    do {
      atomic_fetch_add_explicit(&r->dbg_membarriers, 1, memory_order_relaxed);
      rc = membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
    } while (rc != 0 && errno == EINTR);
    errno = saved;
    if (rc == 0) return 1;
    /* failing now (EPERM from a seccomp filter installed after the
     * registration, ...): it will go on failing. Every registry of the
     * process switches (relaxed: a reclaimer that misses this tries
     * membarrier once more and gets here too) */
    atomic_store_explicit(&g_membarrier, MB_FAILED, memory_order_relaxed);
    mb = MB_FAILED;
  }
  if (mb != MB_FAILED) return 0;
  /* F4: from now on every private call of r fences. seq_cst: before the
   * reads of `owned` in limbo_start (S), so that a thread that acquires a
   * shard later reads 2 (shard_acquire); the owners found there are
   * signalled, and each one's calls after its handler read 2 */
  atomic_store_explicit(&r->fence_mode, 2, memory_order_seq_cst);
  return 2;
#else
  (void)self;
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
  /* acquire (here and on CAS failure): top's tail below is read through
   * this head, and was stored by top's pusher before its release CAS —
   * several threads of the shared shard push here. A relaxed head, as in
   * 1.2.0, may pair a head with an older tail of the same slot (its last
   * time on a stack): a wrong chain end for the reclaimer */
  uint64_t h = atomic_load_explicit(&st->head, memory_order_acquire);
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
                                                  memory_order_acquire));
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
enum {
  LIMBO_EMPTY = 0,
  LIMBO_PRIVATE = 1,
  LIMBO_SRCU_INACTIVE = 1,
  LIMBO_SRCU_ACTIVE = 2,
  LIMBO_SIGNAL = 3 /* private: waits for the owner's signal acknowledgement (F4) */
};

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

/* Shard i waits for its owner's signal acknowledgement (F4). 1 when the
 * wait is over: then limbo_wait[i] is LIMBO_PRIVATE (the owner was inside
 * a call: wait until its epoch changes) or 0. */
static int sig_quiescent(ttft_registry *r, uint32_t i) {
  ttft__shard *sh = &r->shards[i];
#ifdef TTFT__SIGNAL_BARRIER
  uint64_t seq = r->limbo_epoch[i];
  /* acquire: pairs with the handler's release: the owner's barrier point
   * (and an odd epoch stored before it) happen-before the reads below */
  if (atomic_load_explicit(&g_acks[sh->limbo_ack - 1].ack, memory_order_acquire) == seq) {
    ack_put(sh->limbo_ack);
    sh->limbo_ack = 0;
    /* acquire: pairs with the owner's release at call exit */
    uint64_t e = atomic_load_explicit(&sh->epoch, memory_order_acquire);
    if (e & 1) {
      r->limbo_epoch[i] = e; /* inside a call: wait until it leaves */
      r->limbo_wait[i] = LIMBO_PRIVATE;
    } else {
      r->limbo_wait[i] = 0;
    }
    return 1;
  }
  /* acquire (both): the owner released the shard since the request (its
   * release, or the next owner's acquisition count, carries its calls'
   * writes): those calls are over, and a later owner's seq_cst
   * acquisition follows our seq_cst read of `owned`, hence the batch's
   * ends — its calls see ENDING */
  if (!atomic_load_explicit(&sh->owned, memory_order_acquire) ||
      atomic_load_explicit(&sh->owner_gen, memory_order_acquire) != sh->limbo_gen) {
    ack_put(sh->limbo_ack);
    sh->limbo_ack = 0;
    r->limbo_wait[i] = 0;
    return 1;
  }
  if (!sh->limbo_sent) {
    /* the queue was full: ask again */
    int sig = sig_installed();
    if (sig)
      sh->limbo_sent = sig_send(sig, atomic_load_explicit(&sh->owner_tid, memory_order_relaxed),
                                seq, sh->limbo_ack);
  }
  return 0;
#else
  (void)sh;
  return 0;
#endif
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
    if (w == LIMBO_SIGNAL) {
      if (!sig_quiescent(r, i)) {
        done = 0;
        continue;
      }
      if (!r->limbo_wait[i]) continue; /* answered, outside any call */
      /* answered inside a call: LIMBO_PRIVATE, checked below */
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

/* Arm the signal barrier for private shard sh (index i), owned by
 * another thread: 1 when a request is out (or none is needed). */
static int sig_arm(ttft_registry *r, uint32_t i, int sig) {
  ttft__shard *sh = &r->shards[i];
#ifdef TTFT__SIGNAL_BARRIER
  /* acquire: the owner's count and tid (ttft__reclaim_owner_set) */
  sh->limbo_gen = atomic_load_explicit(&sh->owner_gen, memory_order_acquire);
  int32_t tid = atomic_load_explicit(&sh->owner_tid, memory_order_relaxed);
  /* relaxed: a unique number; the entry's CAS publishes it */
  uint64_t seq = atomic_fetch_add_explicit(&g_ack_seq, 1, memory_order_relaxed) + 1;
  uint32_t k1 = ack_get(seq);
  if (!k1) return 0;
  sh->limbo_ack = k1;
  r->limbo_epoch[i] = seq;
  r->limbo_wait[i] = LIMBO_SIGNAL;
  /* a thread that has exited (ESRCH) released the shard (sig_quiescent
   * sees it); a full queue is asked again by sig_quiescent */
  sh->limbo_sent = sig_send(sig, tid, seq, k1);
  return 1;
#else
  (void)r, (void)i, (void)sig, (void)sh;
  return 0;
#endif
}

/* Start waiting for the batch just taken into limbo. 0 when no barrier
 * could be made (the batch then stays in limbo, unarmed: a later step
 * arms it again). The barrier is skipped when no other thread owns a
 * private shard (a single recording thread, or threads on the shared
 * shard only): there is no epoch to read. */
static int limbo_start(ttft_registry *r, const ttft__shard *self) {
  sig_requests_drop(r);
  r->limbo_sig = 0;
  int b = other_owners(r, self) ? heavy_barrier(r, self) : 1;
  int sig = 0;
  if (b == 2) {
#ifdef TTFT__SIGNAL_BARRIER
    sig = sig_installed();
#endif
    if (!sig) b = 0; /* no signal to use: nothing can be freed */
  }
  if (!b) {
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
    if (sig) {
      /* seq_cst: after the batch's ending CASes in S: an owner that
       * acquires the shard later sees ENDING (sig_quiescent) */
      if (!atomic_load_explicit(&sh->owned, memory_order_seq_cst)) continue;
      if (!sig_arm(r, i, sig)) {
        sig_requests_drop(r);
        for (uint32_t j = 0; j < r->nshards; j++) r->limbo_wait[j] = 0;
        return 0;
      }
      continue;
    }
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
  /* a batch armed with signals instead of membarrier (F4) */
  if (sig) {
    r->limbo_sig = 1;
    count_registry(self, TTFT_COUNTER_BARRIER_FALLBACKS);
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
  sig_requests_drop(r);
  /* a batch armed by signals is over: every owner of a shard then owned
   * has run its handler or released the shard, and so reads fence_mode 2
   * from now on; later batches fence (F4) */
  if (r->limbo_sig) r->switch_done = 1;
  r->limbo_sig = 0;
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
  if (!urgent && !TTFT__LD(&r->limbo_head) && !TTFT__LD(&r->fence_mode) && other_owners(r, self)) {
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
  unsigned k = 0;
  while (k < TTFT__EXHAUSTED_POLLS) {
    int busy = any_pending(r) || TTFT__LD(&r->limbo_head) != 0 || TTFT__LD(&r->reclaiming) != 0;
    cpu_relax();
    k++;
    try_reclaim(r, self, 1);
    s = pop_any(r, self);
    if (s || !busy) break;
  }
  /* relaxed: a white-box figure (tests check that no begin polls more) */
  if (k > atomic_load_explicit(&r->dbg_polls_max, memory_order_relaxed))
    atomic_store_explicit(&r->dbg_polls_max, k, memory_order_relaxed);
  return s;
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
void ttft__reclaim_fork_child(ttft_registry *r, ttft__shard *mine) {
  sig_requests_drop(r); /* the parent's requests (the table is the child's copy) */
  if (mine && !mine->shared) ttft__reclaim_owner_set(mine); /* the child's thread id */
  for (uint32_t k = 0; k < r->nshards; k++) {
    ttft__shard *sh = &r->shards[k];
    /* a stream end the parent's threads were inside may hold a slowest-list
     * entry: no writer survives to release it */
    ttft__slow_abandoned(r, sh);
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
  r->limbo_sig = 0;
  TTFT__ST(&r->limbo_head, 0);
  TTFT__ST(&r->reclaiming, 0);
  for (uint32_t i = r->nslots; i-- > 0;)
    if (TTFT__SLOT_PHASE(TTFT__LD(&r->slots[i].state)) != TTFT__SLOT_LIVE)
      ttft__stack_push(r, &r->free_list, i);
}
