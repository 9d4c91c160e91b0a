/* reclaim.c — when an ended slot may serve a new sequence.
 *
 * THE PROBLEM. ttft_stream_end may race a ttft_token_emitted (or ttft_mark,
 * ttft_annotate, ttft_step_emitted) running on another thread for the same
 * sequence. The writer ("caller") checks the slot's state word against its
 * handle, then writes the slot's fields. If the end wins its CAS between
 * that check and those writes, the writes land after the end. That is
 * harmless while the slot is still ENDING — and would corrupt the next
 * sequence if the slot were already serving it. So an ended slot is
 * reused only when no call that could have passed the check against the
 * old generation is still running. The per-token path of a thread that
 * owns its shard must pay no lock-prefixed instruction and no fence for
 * this.
 *
 * THE PROMISE (issue 27.3). A begin is refused only when every slot is
 * in flight, or is the one slot a running call is inside. A call frozen
 * anywhere (preempted, stopped, stuck in a signal handler) holds back at
 * most the slot it touches: 1.2's registry-wide epochs let one frozen call
 * hold back every ended slot until it left, and 6000 begins of two
 * threads cycling 2 sequences through 64 slots saw 458 refusals (5379 once
 * membarrier failed).
 *
 * THE INVARIANT. A slot on a free stack is *quiescent*: no call that
 * loaded its state word and saw the generation that ended is still
 * running. Equivalently, for every slot x freed by a reclaim round and
 * every call C that loads x's state: either (a) C's load returns ENDING
 * or a later generation (so C writes nothing), or (b) C's writes to x
 * happen-before the round frees x.
 *
 * THE PROTOCOL: asymmetric hazard words, one per thread, and a reference
 * count per slot for the shared shard. Nothing waits; a round frees every
 * ended slot that no call is inside and leaves the others for a later one.
 *
 * Callers. Each first looks at the slot's state (relaxed, the pre-check):
 * a handle whose state has moved on is stale for good and publishes no
 * slot (it writes none), so a thread that calls on with an ended handle
 * holds nothing back. Then:
 *  - A private shard's owner publishes the slot it is about to touch in
 *    its shard's hazard word hz, then loads the slot's state:
 *      hz := HZ_IN | (x + 1)   (release store: a plain store on x86, stlr
 *                               on ARMv8), compiler barrier,
 *      load state (seq_cst), ..., hz := 0 (release store) at exit.
 *    step_emitted moves the word from slot to slot (hz := HZ_IN | (y + 1),
 *    release, after the writes to x). A call that touches no slot of
 *    another sequence (begin, stream_end after its CAS, engine_step) stores
 *    HZ_IN alone, so that a hook nested in a signal handler finds the word
 *    non-zero and records through the shared shard (F2).
 *  - A shared-shard call on slot x increments x.refs (seq_cst RMW) before
 *    it loads the state (seq_cst) and decrements it (release RMW) when it
 *    leaves.
 * Ends. stream_end's CAS LIVE -> ENDING (seq_cst) makes the ender the slot's
 * one owner; when it is done reading the slot it stamps it: rstamp := the
 * value of the registry's reclaim generation rgen that it loads (seq_cst)
 * after the CAS (release store: its reads of the slot come before).
 * Rounds. A begin that finds no free slot runs a round:
 *   1. g := fetch_add(rgen, 1) (seq_cst). A slot stamped s <= g was ended
 *      by a CAS that precedes this RMW in the seq_cst order S: the ender's
 *      load of rgen read g or less, an older value than ours, so it is
 *      coherence-ordered before our RMW, and the CAS is sequenced before
 *      that load (both seq_cst).
 *   2. The heavy barrier (below), only when another thread owns a private
 *      shard: membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), which makes
 *      every running thread of the process execute a full barrier before it
 *      returns (and counts a thread that is not running as having passed
 *      one) — modelled as a seq_cst fence F_o in each owner, placed in S
 *      after our RMW of step 1 and before our reads of step 3 (the kernel
 *      puts smp_mb() on both sides).
 *   3. For every slot x stamped s with 0 < s <= g: if some owned shard's
 *      hz (acquire load) names x, or x.refs (seq_cst load) is not 0, x
 *      stays for a later round; else claim it (CAS rstamp s -> 0, acq_rel:
 *      one round wins) and push it on a free stack (release).
 *
 * Why a freed slot is quiescent (case 1, a private call C on x whose
 * owner's barrier point is P):
 *   - if C's store hz := x is sequenced after P, C's state load follows
 *     F_o, and the ending CAS precedes F_o in S (CAS <S RMW <S F_o): by the
 *     C11 fence rule ([atomics.order]: a load sequenced after a seq_cst
 *     fence reads the last seq_cst store to that object before the fence in
 *     S, or a later one) C reads ENDING or later: (a);
 *   - if it is sequenced before P, the fence-fence rule makes it (or a
 *     later store of the same word) visible to our load after the barrier:
 *     we read x — the slot stays — or a later value, stored with release
 *     after C's writes to x, which our acquire load synchronises with: (b).
 * Case 2, a shared-shard call C on x: C's increment I and our refs load L
 * are seq_cst operations on one object. If L reads a value without I, L
 * is coherence-ordered before I, so CAS <S RMW <S L <S I <S C's state load
 * (I is sequenced before it): C reads ENDING: (a). If L reads 0 after I,
 * it reads C's decrement (a release RMW) or a later RMW of its release
 * sequence: C's writes happen-before: (b). Otherwise the slot stays.
 * Without membarrier (old kernel, seccomp when the registry was made;
 * fence_mode 1) every private call puts a seq_cst fence between its hazard
 * store and its state load and the round puts one before its hazard
 * loads: classic Dekker with fences, as userspace-rcu's smp_mb() flavour.
 * A shard with no owner (read seq_cst after step 1) has no call running,
 * and a thread that acquires it later does so by a seq_cst CAS that
 * follows our read in S, so its calls' seq_cst state loads read ENDING.
 * A slot stamped s > g ended after the round started; the next round
 * covers it (a begin runs up to TTFT__ROUNDS_PER_BEGIN rounds).
 * Why a round cannot miss a call. Every call on a slot either publishes a
 * hazard that the round reads after its barrier, or counts itself in the
 * slot's refs, before it checks the state; a thread's shard is fixed for
 * the duration of a call. There is no grace period, no clock and no "long
 * enough in practice".
 * A slot left because a call was inside it is freed as soon as that call
 * has left: the begin that ran the round polls (bounded) the holder's
 * hazard word — any other value means the call moved on or left, with a
 * release store after its writes; a later call on x published its word
 * after the barrier point, so it reads ENDING — or the slot's count,
 * until it reads 0.
 * What holds what back. A call inside on x holds back x only; a round
 * holds back the one slot it has claimed and not yet pushed; an end holds
 * back its own slot until it stamps it. Rounds take no lock: any number
 * run at once (each claim is a CAS), so a preempted round delays nobody.
 *
 * ON A WEAKLY ORDERED MACHINE (ARMv8; issue 33). The argument above is in
 * the C11 model only; what it assumes of the hardware and the kernel:
 *  A1. membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) returns only after
 *      every CPU running a thread of this process has executed a full
 *      barrier (on arm64 the IPI handler's smp_mb(), dmb ish; the syscall
 *      puts smp_mb() before and after on the caller's side), and a thread
 *      not running passed one at its context switch (the kernel's
 *      documented requirement on switch_mm / rq->curr updates). The
 *      interrupted thread's later loads (its state load) are performed
 *      after the handler: exceptions are precise, a load performed
 *      speculatively before the interrupt is discarded and re-executed.
 *      This is the fence F_o above: it orders the owner's hazard store
 *      (stlr, possibly still in its store buffer) before its state load
 *      (ldar) as seen by every other CPU. Not assumed: that the hazard
 *      store alone, or stlr followed by ldar, is visible to a reader on
 *      another core in time (ARMv8 does order an stlr before a later ldar
 *      of the same thread — RCsc — but the proof does not lean on that).
 *  A2. A seq_cst fence is dmb ish on ARMv8 (GCC and Clang): a full
 *      barrier for loads and stores in the inner shareable domain, which
 *      holds every core that runs this process. The fence mode's Dekker
 *      (hazard store; dmb ish; state load — against — rgen RMW; dmb ish;
 *      hazard loads) needs exactly store->load order on both sides, which
 *      dmb ish gives; ARMv8 is other-multi-copy atomic, so the two sides
 *      cannot see the two stores in opposite orders.
 *  A3. seq_cst RMWs (the ending CAS, the rgen fetch_add, the refs
 *      increment) are ldaxr/stlxr loops or LSE casal/ldaddal: both are in
 *      the single order S with the seq_cst loads (ldar), as the C11 mapping
 *      for AArch64 requires; the release stores (hz := 0, rstamp, the free
 *      stack's push) are stlr, the acquire loads ldar (or ldapr): the
 *      synchronises-with edges of case (b) are those instructions'.
 *  A4. Nothing relies on x86-TSO: no relaxed store is assumed to be seen
 *      in order with another, no relaxed load is assumed not to be
 *      satisfied early. A relaxed pre-check of the state (above) only
 *      lets a caller give up; every write is guarded by the seq_cst load
 *      after its hazard.
 * qemu-user runs the litmus tests (tests/test_litmus.c slot_reuse) with
 * guest threads on host threads; on an x86 host it cannot reorder what
 * A1-A4 forbid, so it tests the atomicity and the protocol, not A1-A4.
 *
 * FAULT MODEL (what a caller may do, and what each case costs).
 *  F1. A thread dies inside a call: pthread_exit from a signal handler, an
 *      asynchronous pthread_cancel, or siglongjmp out of a hook followed by
 *      the thread's exit (or ttft_thread_release). A private shard's hazard
 *      stays published until the exit handler (registry.c, shard_release)
 *      clears it (release store: the dead call will never write again):
 *      until then it holds back the one slot it names. Shared-shard calls
 *      are recorded in a thread-local stack (registry.h, ttft__tl_open)
 *      right after their increment; the exit handler gives back the counts
 *      of those still open. A thread killed exactly between the increment
 *      and that record (one instruction) leaves the slot's count raised:
 *      that one slot is never reused (capacity shrinks by one). A thread
 *      that dies inside a round leaks at most the slot it had claimed and
 *      not pushed; inside stream_end between its CAS and its stamp, the
 *      slot it was ending; inside begin after its pop, the slot it popped.
 *      A slowest-list entry a dying stream_end held claimed (hooks.c,
 *      slow_offer) is given back empty at its exit: through the thread's
 *      claim record (ttft__tl_claim), or, for a private shard, by
 *      shard_release (its lists have no other writer), so later offers
 *      fill it. Test: test_dead_owner (each way, private shards with
 *      membarrier, fence mode, the shared shard; 500 rounds).
 *  F2. A signal handler calls a hook while a hook of the same thread is
 *      inside a call (nested calls). Handled by construction: the nested
 *      call finds its thread's hazard word non-zero and records through the
 *      shared shard (ttft__shard_for_call), with atomic read-modify-writes
 *      and the slot's reference count; the interrupted call's hazard stays
 *      published until it leaves and its plain counter updates are not
 *      raced. Precondition: the thread has already called a hook of that
 *      registry (the first call fills a thread cache and is not
 *      async-signal-safe; a debug assert checks it). Test: test_dead_owner
 *      nested_* .
 *  F3. siglongjmp out of a hook by a thread that goes on calling hooks.
 *      Safe: its hazard word stays non-zero (the abandoned call is
 *      indistinguishable from an interrupted one, F2), so its later calls
 *      record through the shared shard and the one slot the word names is
 *      held back; call ttft_thread_release(r) after such a jump (it closes
 *      the call, as at thread exit, and gives back a slowest-list entry the
 *      abandoned stream end held).
 *  F4. The heavy barrier fails at run time: membarrier was registered when
 *      the registry was made and starts returning EPERM (a seccomp filter
 *      installed later with TSYNC; a fork child whose registration failed).
 *      The round stores fence_mode = 2 (seq_cst): every private call that
 *      reads it fences from then on (Dekker, as fence_mode 1) and says so
 *      once in its shard's `fenced` word (release; hooks.c, call_enter's
 *      cold branch) — a handshake at the owner's next hook call, nothing
 *      sent to it. A round may then read the hazard of an owner that has
 *      acknowledged (the acknowledging call fenced; earlier calls have left,
 *      their exits released before the acknowledgement that our acquire
 *      reads). An owner that has not called since has no barrier point the
 *      round can rely on, except one the kernel gives: /proc says the
 *      thread is asleep or stopped (S, D, T, t). Its last user instruction
 *      came before it entered the kernel and set that state with a full
 *      barrier (set_current_state is smp_store_mb), and its next one comes
 *      after the wake-up and switch-in barriers, which follow our read of
 *      the state; its hazard word, read after, says whether it sleeps
 *      inside a call (a stopped thread may: then that slot stays). An owner
 *      that runs without calling a hook and without sleeping holds the
 *      round back until it calls, sleeps, releases its shard or exits:
 *      such a round frees nothing and a begin at capacity is refused
 *      (DROPPED) — unless the kernel makes a process-wide barrier another
 *      way (tlb_barrier: on x86 without broadcast TLB invalidation, a page
 *      write-protected, whose TLB shootdown interrupts every CPU running a
 *      thread of ours), which serves every owner at once. In CI (x86):
 *      0 refusals in the loaded loop once membarrier failed (1.2: 157 825 of
 *      163 825 begins). The failure is remembered process-wide: membarrier is
 *      not called again. No signal is sent: 1.2 queued a real-time signal
 *      to each owner, which woke threads parked in poll, epoll_wait,
 *      nanosleep, select or sem_timedwait with EINTR, and was held back for
 *      good by a thread that blocked every signal. Counted:
 *      BARRIER_FALLBACKS (each round whose barrier was fences and /proc
 *      because membarrier failed). Assumption: on a weakly ordered machine
 *      the kernel path into a sleep orders the thread's earlier user stores
 *      before the state store (it does through the locks it takes on every
 *      path into schedule()). Tests: test_barrier_fallback (a real seccomp
 *      filter installed mid-run), test_no_eintr (owners parked in each of
 *      those calls, one blocking every signal), test_refusals (loaded).
 *
 * ARMv8 (weak memory). The hazard stores are stlr (release), the state
 * loads ldar (seq_cst), the rgen RMW and the stamp load seq_cst (ldaxr/
 * stlxr; ldar), the refs RMWs ldaxr/stlxr; membarrier issues an IPI whose
 * handler runs smp_mb (dmb ish) on each CPU running a thread of the
 * process, and the syscall puts smp_mb before and after: the proof above
 * uses only C11 orders plus "membarrier = a seq_cst fence in every running
 * thread, between our operations before and after it" (the kernel's own
 * documented guarantee). Nothing relies on x86's store order.
 *
 * Cost (F4 aside: then a seq_cst fence per private call, as in fence
 * mode): on a private shard, two plain stores per call (no fence, no lock
 * prefix) and one per further sequence of a step; one membarrier per round
 * by the begin that runs it, only when another thread owns a private
 * shard; rounds run only when a begin finds no free slot, so a registry of
 * n slots runs about one round per n - in_flight begins. A round reads the
 * stamps of every slot (about 1 ns each).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "record/registry.h"

#if defined(__linux__)
#include <fcntl.h>
#if TTFT_HAVE_LINUX_MEMBARRIER_H
#include <linux/membarrier.h>
#elif TTFT_HAVE_SYS_MEMBARRIER_H
#include <sys/membarrier.h> /* musl: the constants (membarrier() itself is not used) */
#else
/* the kernel's ABI (include/uapi/linux/membarrier.h), for a libc without
 * either header */
#define MEMBARRIER_CMD_QUERY 0
#define MEMBARRIER_CMD_PRIVATE_EXPEDITED (1 << 3)
#define MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED (1 << 4)
#endif
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield" ::: "memory")
#else
#define cpu_relax() ((void)0)
#endif

/* rounds one begin runs before it polls other threads' rounds: a second
 * one covers slots stamped while the first ran */
#define TTFT__ROUNDS_PER_BEGIN 2
/* hazards a round keeps in a local table; past it, each slot is checked
 * against every shard (any read after the barrier is as good) */
#define TTFT__HAZ_LOCAL 64

/* ------------------------------------------------------- heavy barrier */
/* The process's barrier: 1 once membarrier(PRIVATE_EXPEDITED) is
 * registered; 0 = private calls must fence (decided once, before the first
 * registry exists, by ttft__reclaim_init); 2 = membarrier was registered
 * but has failed since (F4): registries created before that switch to
 * fence mode 2 at their next round; registries created after it fence. */
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
     * the child's rounds take F4's path */
    if (!membarrier_register())
      atomic_store_explicit(&g_membarrier, MB_FAILED, memory_order_relaxed);
    errno = saved;
  }
}

/* -------------------------------------------------------- owners (F4) */
void ttft__reclaim_owner_set(ttft__shard *sh, int fm) {
#if defined(__linux__) && defined(SYS_gettid)
  int saved = errno;
  int32_t tid = (int32_t)syscall(SYS_gettid);
  errno = saved;
#else
  int32_t tid = 0;
#endif
  atomic_store_explicit(&sh->owner_tid, tid, memory_order_relaxed);
  /* relaxed: ordered by the release below */
  atomic_store_explicit(&sh->fenced, fm == 2, memory_order_relaxed);
  /* release: the tid and the fenced word above are visible to a round
   * that acquires the new count */
  atomic_store_explicit(&sh->owner_gen, TTFT__LD(&sh->owner_gen) + 1, memory_order_release);
}

void ttft__reclaim_fence_ack(ttft__shard *sh) {
  /* release: this owner's earlier calls (each left by a release store of
   * its hazard word) happen-before a round that acquires the word; this
   * call and every later one fence (hooks.c, call_enter) */
  atomic_store_explicit(&sh->fenced, 1, memory_order_release);
}

/* F4: does /proc say that thread tid of this process is asleep or stopped
 * (it runs no user instruction until a wake-up that follows this read)?
 * Reads /proc/self/task/TID/stat: the state is the first field after the
 * command's closing parenthesis. Cold: rounds after membarrier failed. */
static int owner_parked(int32_t tid) {
#if defined(__linux__)
  if (tid <= 0) return 0;
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  int saved = errno;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  errno = saved;
  if (n <= 0) return 0;
  buf[n] = 0;
  const char *p = strrchr(buf, ')');
  if (!p || p[1] != ' ') return 0;
  char st = p[2];
  return st == 'S' || st == 'D' || st == 'T' || st == 't';
#else
  (void)tid;
  return 0;
#endif
}

/* F4: a process-wide barrier without membarrier, where the kernel makes
 * one: on x86 Linux, write-protecting a page this process has dirtied
 * makes the kernel invalidate its TLB entry on every CPU running a thread
 * of the process, by an inter-processor interrupt (flush_tlb_mm_range);
 * the interrupted CPU leaves user mode and returns with IRET, both full
 * barriers, and a CPU not running one of our threads has switched it out
 * (the scheduler's barrier). That is membarrier's guarantee, the fallback
 * folly's asymmetric fence and the .NET runtime's FlushProcessWriteBuffers
 * use. Not where the CPU can invalidate TLBs by broadcast without an
 * interrupt (AMD's INVLPGB, which kernels from 6.15 use when the CPU has
 * it; ARMv8's TLBI IS): /proc/cpuinfo is read once, and such machines
 * fall back to the handshake and /proc alone. A fresh page each time: no
 * state shared between rounds. 1 when the barrier was made. */
#if defined(__linux__) && (defined(__x86_64__) || defined(__i386__))
#include <sys/mman.h>
static _Atomic int g_tlb_ipi = -1; /* -1 undecided, 0 no, 1 yes */
static int tlb_ipi(void) {
  int v = atomic_load_explicit(&g_tlb_ipi, memory_order_relaxed);
  if (v >= 0) return v;
  int saved = errno;
  v = 0;
  FILE *f = fopen("/proc/cpuinfo", "re");
  if (f) {
    char line[4096];
    while (fgets(line, sizeof line, f))
      if (!strncmp(line, "flags", 5)) {
        v = !strstr(line, " invlpgb");
        break;
      }
    fclose(f);
  }
  errno = saved;
  /* relaxed: every reader computes the same value */
  atomic_store_explicit(&g_tlb_ipi, v, memory_order_relaxed);
  return v;
}
static int tlb_barrier(void) {
  if (!tlb_ipi()) return 0;
  int saved = errno;
  long pg = sysconf(_SC_PAGESIZE);
  void *p = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  int ok = 0;
  if (p != MAP_FAILED) {
    *(volatile char *)p = 1; /* present and dirty: the change needs a flush */
    ok = mprotect(p, (size_t)pg, PROT_READ) == 0;
    munmap(p, (size_t)pg);
  }
  errno = saved;
  return ok;
}
#else
static int tlb_barrier(void) { return 0; }
#endif

/* The calling shard's registry-wide counter c (class 0) += 1: the round
 * runs on the thread that owns self (inside its begin), so a private
 * shard takes a plain update, as ctr_add. */
static void count_registry(const ttft__shard *self, ttft_counter c) {
  /* acquire: class 0's record was published at creation */
  ttft__crec *cr = atomic_load_explicit(&self->cls[0], memory_order_acquire);
  if (self->shared) atomic_fetch_add_explicit(&cr->ctr[c], 1, memory_order_relaxed);
  else TTFT__ST(&cr->ctr[c], TTFT__LD(&cr->ctr[c]) + 1);
}

/* Does a thread other than the caller own a private shard? seq_cst: read
 * after the round's rgen RMW in S; a thread whose seq_cst acquisition this
 * load misses orders its acquisition, hence its calls' seq_cst state
 * loads, after the ends the round covers (it sees ENDING). */
static int other_owners(const ttft_registry *r, const ttft__shard *self) {
  for (uint32_t i = 0; i + 1 < r->nshards; i++)
    if (&r->shards[i] != self && atomic_load_explicit(&r->shards[i].owned, memory_order_seq_cst))
      return 1;
  return 0;
}

/* F4, fence_mode 2: may the round read every owner's hazard word? An owner
 * that acknowledged fences; one that has not must be parked (owner_parked)
 * on the thread /proc names, and must still be the same owner after. */
static int owners_ready(const ttft_registry *r, const ttft__shard *self) {
  for (uint32_t i = 0; i + 1 < r->nshards; i++) {
    const ttft__shard *sh = &r->shards[i];
    if (sh == self) continue;
    /* acquire: the owner's tid and fenced word (ttft__reclaim_owner_set) */
    uint32_t gen = atomic_load_explicit(&sh->owner_gen, memory_order_acquire);
    /* seq_cst: as other_owners */
    if (!atomic_load_explicit(&sh->owned, memory_order_seq_cst)) continue;
    /* acquire: pairs with ttft__reclaim_fence_ack */
    if (atomic_load_explicit(&sh->fenced, memory_order_acquire)) continue;
    if (!owner_parked(atomic_load_explicit(&sh->owner_tid, memory_order_relaxed))) return 0;
    /* acquire: the shard did not change hands while /proc was read (a new
     * owner's acquisition follows the fence_mode store and fences) */
    if (atomic_load_explicit(&sh->owner_gen, memory_order_acquire) != gen) return 0;
  }
  return 1;
}

/* The round's barrier (step 2): 1 when every owner's hazard word may be
 * read, 0 when not (F4: an owner neither acknowledged nor parked). */
static int round_barrier(ttft_registry *r, const ttft__shard *self) {
  int fm = atomic_load_explicit(&r->fence_mode, memory_order_relaxed);
  if (fm == 0) {
    if (!other_owners(r, self)) return 1;
#if defined(__linux__) && defined(__NR_membarrier)
    if (atomic_load_explicit(&g_membarrier, memory_order_relaxed) == MB_OK) {
      int saved = errno;
      long rc;
      do {
        atomic_fetch_add_explicit(&r->dbg_membarriers, 1, memory_order_relaxed);
        rc = membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
      } while (rc != 0 && errno == EINTR);
      errno = saved;
      if (rc == 0) return 1;
      /* failing now (EPERM from a seccomp filter installed after the
       * registration, ...): it will go on failing. relaxed: a round that
       * misses this tries membarrier once more and gets here too */
      atomic_store_explicit(&g_membarrier, MB_FAILED, memory_order_relaxed);
    }
#endif
    /* F4: from now on every private call of r fences. seq_cst: before the
     * reads of `owned` below in S, so that a thread that acquires a shard
     * later reads 2 (shard_acquire) */
    atomic_store_explicit(&r->fence_mode, 2, memory_order_seq_cst);
    fm = 2;
  }
  /* seq_cst: pairs with the seq_cst fence of every private call in fence
   * mode (Dekker: its hazard or the ending CAS is seen) */
  atomic_thread_fence(memory_order_seq_cst);
  if (fm == 1) return 1;
  count_registry(self, TTFT_COUNTER_BARRIER_FALLBACKS);
  atomic_fetch_add_explicit(&r->dbg_fallback_barriers, 1, memory_order_relaxed);
  if (!owners_ready(r, self) && !tlb_barrier()) return 0;
  /* seq_cst: our hazard loads follow the /proc reads (or the barrier) */
  atomic_thread_fence(memory_order_seq_cst);
  return 1;
}

/* ------------------------------------------------------------- stacks */
void ttft__stack_push(ttft_registry *r, ttft__stack *st, uint32_t idx) {
  TTFT_ASSERT(idx < r->nslots);
  uint64_t h = TTFT__LD(&st->head);
  uint64_t nh;
  do {
    TTFT__ST(&r->slots[idx].next, (uint32_t)h);
    nh = (((h >> 32) + 1) << 32) | (uint64_t)(idx + 1);
    /* release: the link and the slot's reset state (and every write the
     * quiescent callers made, acquired by the round) are visible to the
     * popper */
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

/* ------------------------------------------------------------- rounds */
typedef struct hazards {
  uint32_t n, all;              /* entries; all: a shard's word did not fit */
  struct {
    uint32_t shard;             /* whose word                               */
    uint64_t v;                 /* the word read after the barrier          */
  } x[TTFT__HAZ_LOCAL];
} hazards;

/* Step 3's hazard reads, once per round (any read after the barrier is as
 * good as another, so a table that overflows is read again per slot). */
static void hazards_read(const ttft_registry *r, hazards *hz) {
  hz->n = hz->all = 0;
  for (uint32_t i = 0; i + 1 < r->nshards; i++) {
    /* acquire: pairs with the owner's release stores of its hazard word:
     * a call that has moved on or left has its slot writes visible */
    uint64_t v = atomic_load_explicit(&r->shards[i].hz, memory_order_acquire);
    if (!(v & TTFT__HZ_IN) || !(uint32_t)v) continue;
    if (hz->n < TTFT__HAZ_LOCAL) {
      hz->x[hz->n].shard = i;
      hz->x[hz->n++].v = v;
    } else {
      hz->all = 1;
    }
  }
}

/* A slot a round left because a call was inside it, to look at again: the
 * hazard (shard, word) that named it, or shard = HELD_REFS for a
 * shared-shard call counted in its refs. */
#define HELD_REFS UINT32_MAX
#define TTFT__HELD_MAX 64
typedef struct held {
  uint32_t idx, shard;
  uint64_t v, stamp;
} held;

/* Who is inside slot idx: the shard whose word names it (*v its word),
 * HELD_REFS for a shared-shard call, or UINT32_MAX - 1 for nobody. */
#define HELD_NONE (UINT32_MAX - 1)
static uint32_t slot_holder(const ttft_registry *r, const hazards *hz, uint32_t idx, uint64_t *v) {
  for (uint32_t k = 0; k < hz->n; k++)
    if ((uint32_t)hz->x[k].v == idx + 1) {
      *v = hz->x[k].v;
      return hz->x[k].shard;
    }
  if (hz->all)
    for (uint32_t i = 0; i + 1 < r->nshards; i++) {
      /* acquire: as hazards_read */
      uint64_t w = atomic_load_explicit(&r->shards[i].hz, memory_order_acquire);
      if ((w & TTFT__HZ_IN) && (uint32_t)w == idx + 1) {
        *v = w;
        return i;
      }
    }
  /* seq_cst: the load L of case 2 (after the rgen RMW in S); acquire of
   * the calls' release decrements */
  if (atomic_load_explicit(&r->slots[idx].refs, memory_order_seq_cst) != 0) return HELD_REFS;
  return HELD_NONE;
}

/* Has the call that held h left? A hazard word that changed since the
 * round read it (a new tag or another slot: the call moved on or left,
 * with a release store after its writes to the slot, which this acquire
 * synchronises with; any later call on the slot published its word after
 * the barrier point, so it reads ENDING), or a count back at 0. */
static int held_left(const ttft_registry *r, const held *h) {
  if (h->shard == HELD_REFS)
    /* seq_cst: as slot_holder's */
    return atomic_load_explicit(&r->slots[h->idx].refs, memory_order_seq_cst) == 0;
  /* acquire: as hazards_read */
  return atomic_load_explicit(&r->shards[h->shard].hz, memory_order_acquire) != h->v;
}

/* Claim slot idx, stamped s, and free it onto self's stack: 1 when this
 * round won it. */
static int slot_free(ttft_registry *r, ttft__shard *self, uint32_t idx, uint64_t s) {
  /* acq_rel: one round claims it; the claim orders our push after the
   * checks that preceded it */
  if (!atomic_compare_exchange_strong_explicit(&r->slots[idx].rstamp, &s, 0, memory_order_acq_rel,
                                               memory_order_relaxed))
    return 0; /* another round took it */
  ttft__stack_push(r, &self->free_list, idx);
  return 1;
}

/* One round (the protocol's steps 1-3); frees onto self's free stack.
 * Returns the slots freed; *later = ended slots it had to leave (a call
 * inside, or stamped after it began); the first TTFT__HELD_MAX of those a
 * call was inside go to hold[*nhold] for the caller to look at again.
 * Never blocks. */
static uint32_t reclaim_round(ttft_registry *r, ttft__shard *self, uint32_t *later, held *hold,
                              uint32_t *nhold) {
  *later = 0;
  *nhold = 0;
  /* relaxed: a count that lets begins at capacity poll (never a lock) */
  atomic_fetch_add_explicit(&r->rounds, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&r->dbg_rounds, 1, memory_order_relaxed);
  /* seq_cst: step 1 — slots stamped at most g ended before this in S */
  uint64_t g = atomic_fetch_add_explicit(&r->rgen, 1, memory_order_seq_cst);
  uint32_t freed = 0;
  if (round_barrier(r, self)) {
    hazards hz;
    hazards_read(r, &hz);
    for (uint32_t i = 0; i < r->nslots; i++) {
      /* acquire: pairs with the ender's release stamp (its reads of the
       * slot come before) */
      uint64_t s = atomic_load_explicit(&r->slots[i].rstamp, memory_order_acquire);
      if (!s) continue;
      if (s > g) {
        (*later)++;
        continue;
      }
      uint64_t v = 0;
      uint32_t who = slot_holder(r, &hz, i, &v);
      if (who != HELD_NONE) {
        (*later)++;
        if (*nhold < TTFT__HELD_MAX) hold[(*nhold)++] = (held){i, who, v, s};
        continue;
      }
      freed += (uint32_t)slot_free(r, self, i, s);
    }
  } else {
    *later = 1; /* F4: nothing may be freed now */
  }
  /* release: a poller that sees fewer rounds sees their pushes */
  atomic_fetch_sub_explicit(&r->rounds, 1, memory_order_release);
  return freed;
}

void ttft__slot_retire(ttft_registry *r, ttft__shard *sh, uint32_t idx) {
  TTFT_ASSERT(idx < r->nslots && sh >= r->shards && sh < r->shards + r->nshards);
  (void)sh;
  /* an ended slot: the CAS to ENDING came first */
  TTFT_ASSERT(TTFT__SLOT_PHASE(TTFT__LD(&r->slots[idx].state)) == TTFT__SLOT_ENDING);
  /* seq_cst: sequenced after the ending CAS; a round whose RMW reads a
   * later value covers this slot (the protocol's step 1) */
  uint64_t g = atomic_load_explicit(&r->rgen, memory_order_seq_cst);
  /* release: our reads of the slot (stream_end's) happen-before the round
   * that acquires the stamp and frees the slot */
  atomic_store_explicit(&r->slots[idx].rstamp, g, memory_order_release);
}

/* A free slot: the caller's own shard's first (slots it freed, cache-hot),
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
  /* No free slot: reclaim. A second round covers slots stamped while the
   * first ran (ended meanwhile by other threads). */
  held hold[TTFT__HELD_MAX];
  uint32_t nhold = 0;
  for (int k = 0; k < TTFT__ROUNDS_PER_BEGIN; k++) {
    uint32_t later;
    reclaim_round(r, self, &later, hold, &nhold);
    s = pop_any(r, self);
    if (s || !later) break;
  }
  /* Still none. The slots the last round left because a call was inside
   * are free as soon as that call has left (held_left: a later call on
   * the same slot reads ENDING), and other threads' rounds may hold slots
   * between their claim and their push (a few instructions). Poll both a
   * bounded number of times, then refuse: a begin never waits for time to
   * pass and never yields the CPU. */
  unsigned k = 0;
  while (!s && k < TTFT__EXHAUSTED_POLLS &&
         /* acquire: pairs with a round's release of its count (its pushes) */
         (nhold || atomic_load_explicit(&r->rounds, memory_order_acquire))) {
    cpu_relax();
    k++;
    for (uint32_t j = 0; j < nhold; j++) {
      if (!held_left(r, &hold[j])) continue;
      slot_free(r, self, hold[j].idx, hold[j].stamp);
      hold[j--] = hold[--nhold];
    }
    s = pop_any(r, self);
  }
  /* relaxed: a white-box figure (tests check that no begin polls more) */
  if (k > atomic_load_explicit(&r->dbg_polls_max, memory_order_relaxed))
    atomic_store_explicit(&r->dbg_polls_max, k, memory_order_relaxed);
  return s;
}

/* ------------------------------------------------------------ fork */
/* In a fork child only the forking thread exists. Whatever other threads
 * were doing inside this registry stopped at an arbitrary instruction: a
 * call may have left a hazard published or a slot's count raised, a round
 * may have claimed a slot it never pushed, a begin may have popped a slot
 * it never published, an end may have won its CAS and never stamped the
 * slot. Rebuild every list from the slot states, which are always
 * consistent: LIVE slots stay live (the child may go on with, or end, the
 * sequences it holds handles for); every other slot is free. Shards not
 * owned by the forking thread lose their owner. Called by registry.c's
 * atfork child handler; no allocation, no lock. */
void ttft__reclaim_fork_child(ttft_registry *r, ttft__shard *mine) {
  if (mine && !mine->shared)
    ttft__reclaim_owner_set(mine, TTFT__LD(&r->fence_mode)); /* the child's thread id */
  for (uint32_t k = 0; k < r->nshards; k++) {
    ttft__shard *sh = &r->shards[k];
    /* a stream end the parent's threads were inside may hold a slowest-list
     * entry: no writer survives to release it */
    ttft__slow_abandoned(r, sh);
    TTFT__ST(&sh->free_list.head, 0);
    if (!sh->shared && sh != mine) {
      TTFT__ST(&sh->hz, 0); /* no call is inside */
      TTFT__ST(&sh->owned, 0);
      TTFT__ST(&sh->fenced, 0);
    }
  }
  TTFT__ST(&r->free_list.head, 0);
  TTFT__ST(&r->rounds, 0);
  for (uint32_t i = r->nslots; i-- > 0;) {
    ttft__slot *sl = &r->slots[i];
    TTFT__ST(&sl->refs, 0); /* the parent's shared-shard calls are gone */
    if (TTFT__SLOT_PHASE(TTFT__LD(&sl->state)) != TTFT__SLOT_LIVE) {
      TTFT__ST(&sl->rstamp, 0);
      ttft__stack_push(r, &r->free_list, i);
    }
  }
}
