/* test_no_eintr.c — the membarrier fallback must not disturb the host's
 * threads (issue 27.4; reclaim.c, F4).
 *
 * 1.2's fallback queued a real-time signal to every thread that owned a
 * recording shard once membarrier failed at run time: threads parked in
 * poll, epoll_wait, nanosleep, select or sem_timedwait woke with EINTR
 * (none of those is restarted, SA_RESTART or not), and a thread that
 * blocked every signal — the usual "workers block signals, one thread
 * sigwaits" pattern — held reclamation back for good.
 *
 * Here six threads each make one hook call (so each owns a shard) and
 * then park for about 1.5 s: in poll, epoll_wait, nanosleep, select,
 * sem_timedwait, and (with every signal blocked) sigtimedwait. Main
 * installs a seccomp filter that makes membarrier(2) fail, then cycles
 * begin / token / end through a 4-slot registry, which runs a reclaim round
 * every few begins, until the parked threads are back. Checked: every park
 * ended by its timeout (never EINTR, never early), every begin was
 * accepted while slots were free (0 refused: the thread that blocks every
 * signal holds nothing back), BARRIER_FALLBACKS > 0 (the fallback ran).
 * Public API only; fails loudly where the filter cannot be installed. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "ttft.h"
#include "task.h"
#include "deny_membarrier.h"

enum { P_POLL, P_EPOLL, P_NANOSLEEP, P_SELECT, P_SEM, P_SIGWAIT, P_COUNT };
static const char *const park_name[P_COUNT] = {"poll", "epoll_wait", "nanosleep",
                                               "select", "sem_timedwait", "sigtimedwait (all blocked)"};
#define PARK_MS 1500

static ttft_registry *g_r;
static _Atomic int g_ready;
static int g_pipe[2];
static sem_t g_sem;

typedef struct park {
  int kind;
  int rc, err;      /* the parking call's result and errno */
  uint64_t slept_ns;
} park;

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *parker(void *p) {
  park *k = p;
  /* own a private shard: one hook call */
  ttft_seq s = ttft_begin(g_r, TTFT_NOW);
  if (s) ttft_stream_end(g_r, s, TTFT_COMPLETED, TTFT_NOW);
  if (k->kind == P_SIGWAIT) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
  }
  atomic_fetch_add(&g_ready, 1);
  uint64_t t0 = mono_ns();
  errno = 0;
  switch (k->kind) {
  case P_POLL: {
    struct pollfd pf = {g_pipe[0], POLLIN, 0};
    k->rc = poll(&pf, 1, PARK_MS);
    break;
  }
  case P_EPOLL: {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, g_pipe[0], &ev);
    struct epoll_event out;
    k->rc = epoll_wait(ep, &out, 1, PARK_MS);
    k->err = errno;
    close(ep);
    errno = k->err;
    break;
  }
  case P_NANOSLEEP: {
    struct timespec ts = {PARK_MS / 1000, (PARK_MS % 1000) * 1000000L};
    k->rc = nanosleep(&ts, NULL);
    break;
  }
  case P_SELECT: {
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(g_pipe[0], &rd);
    struct timeval tv = {PARK_MS / 1000, (PARK_MS % 1000) * 1000};
    k->rc = select(g_pipe[0] + 1, &rd, NULL, NULL, &tv);
    break;
  }
  case P_SEM: {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += PARK_MS / 1000;
    ts.tv_nsec += (PARK_MS % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    k->rc = sem_timedwait(&g_sem, &ts);
    break;
  }
  case P_SIGWAIT: {
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, SIGUSR2);
    struct timespec ts = {PARK_MS / 1000, (PARK_MS % 1000) * 1000000L};
    k->rc = sigtimedwait(&one, NULL, &ts);
    break;
  }
  }
  if (k->kind != P_EPOLL) k->err = errno;
  k->slept_ns = mono_ns() - t0;
  return NULL;
}

TEST(parked_threads_never_see_eintr) {
#ifndef TTFT_HAVE_DENY_MEMBARRIER
  EXPECT_TRUE(!"no seccomp filter for membarrier on this platform");
  return;
#else
  EXPECT_TRUE(membarrier_works());
  EXPECT_EQ_INT(0, pipe(g_pipe));
  EXPECT_EQ_INT(0, sem_init(&g_sem, 0, 0));
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 4;
  g_r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(g_r);
  if (!g_r) return;
  pthread_t th[P_COUNT];
  park pk[P_COUNT];
  for (int i = 0; i < P_COUNT; i++) {
    memset(&pk[i], 0, sizeof pk[i]);
    pk[i].kind = i;
    EXPECT_EQ_INT(0, pthread_create(&th[i], NULL, parker, &pk[i]));
  }
  while (atomic_load(&g_ready) < P_COUNT) {
  }
  usleep(50000); /* every parker inside its call */
  EXPECT_EQ_INT(0, deny_membarrier());
  /* cycle until the parkers are back (their timeouts), at most 4 s */
  unsigned long begun = 0, refused = 0;
  uint64_t t0 = mono_ns();
  while (mono_ns() - t0 < (uint64_t)(PARK_MS + 200) * 1000000u) {
    ttft_seq s = ttft_begin(g_r, TTFT_NOW);
    if (!s) {
      refused++;
      continue;
    }
    begun++;
    ttft_token_emitted(g_r, s, 1, TTFT_NOW);
    ttft_stream_end(g_r, s, TTFT_COMPLETED, TTFT_NOW);
  }
  for (int i = 0; i < P_COUNT; i++) pthread_join(th[i], NULL);
  ttft_snapshot *snap = ttft_snapshot_take(g_r);
  uint64_t fb = snap ? ttft_snapshot_counter(snap, TTFT_COUNTER_BARRIER_FALLBACKS) : 0;
  uint64_t dropped = snap ? ttft_snapshot_counter(snap, TTFT_COUNTER_DROPPED) : 0;
  ttft_snapshot_free(snap);
  unsigned eintr = 0;
  for (int i = 0; i < P_COUNT; i++) {
    fprintf(stderr, "%-28s rc %d errno %s, parked %.0f ms\n", park_name[i], pk[i].rc,
            pk[i].err ? strerror(pk[i].err) : "0", (double)pk[i].slept_ns / 1e6);
    eintr += pk[i].err == EINTR;
    /* every park ended by its timeout: 0 ready (poll, epoll_wait, select),
     * 0 (nanosleep), -1 ETIMEDOUT (sem_timedwait) or -1 EAGAIN
     * (sigtimedwait) */
    int want_rc = (i == P_SEM || i == P_SIGWAIT) ? -1 : 0;
    EXPECT_EQ_INT(want_rc, pk[i].rc);
    if (i == P_SEM) EXPECT_EQ_INT(ETIMEDOUT, pk[i].err);
    if (i == P_SIGWAIT) EXPECT_EQ_INT(EAGAIN, pk[i].err);
    EXPECT_GE_U64(pk[i].slept_ns, (uint64_t)(PARK_MS - 20) * 1000000u);
  }
  fprintf(stderr, "%lu begins accepted, %lu refused; BARRIER_FALLBACKS %llu; %u EINTR\n", begun,
          refused, (unsigned long long)fb, eintr);
  EXPECT_EQ_U64(0, eintr);
  EXPECT_EQ_U64(0, refused);
  EXPECT_EQ_U64(0, dropped);
  EXPECT_GT_INT((long long)begun, 1000);
  EXPECT_GT_INT((long long)fb, 0);
  ttft_registry_free(g_r);
  sem_destroy(&g_sem);
  close(g_pipe[0]);
  close(g_pipe[1]);
#endif
}

TU_MAIN()
