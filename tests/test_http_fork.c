/*
 * test_http_fork.c — a server inherited by a forked child (issue 9.5).
 *
 * The child gets a copy of the server's memory and descriptors but not its
 * thread. ttft_http_stop in the child must free that copy only: close the
 * child's descriptors (never shut down the sockets, which the parent
 * shares), never write to the wake pipe (that would stop the parent's
 * server), never join a thread that is not there. The parent's server must
 * go on answering - including on a connection it had open at the fork -
 * and its own stop must still work.
 *
 * Forks happen while a client thread keeps the server busy, so the fork
 * lands at arbitrary points of the server loop (pthread_atfork keeps the
 * child's copy consistent). Children exit with _exit: they never run the
 * parent's atexit handlers or flush its stdio buffers.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ttft.h"
#include "task.h"

#ifndef TTFT_TEST_HTTP_BUILT
#  define TTFT_TEST_HTTP_BUILT 1
#endif

#define FORKS 16
#define LIVENESS_MS 5000
#define BUF (1u << 20)

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int connect_to(int port) {
  struct sockaddr_in a;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* Send req on fd and read the response to EOF: its status, -1 if none. */
static int exchange(int fd, const char *req, char *buf, size_t cap) {
  size_t len = 0, n = strlen(req);
  uint64_t end = now_ms() + LIVENESS_MS;
  const char *p = req;
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  for (;;) {
    struct pollfd pf = {fd, POLLIN, 0};
    uint64_t t = now_ms();
    ssize_t k;
    if (t >= end || len + 1 >= cap) return -1;
    if (poll(&pf, 1, (int)(end - t)) <= 0) continue;
    k = recv(fd, buf + len, cap - 1 - len, 0);
    if (k > 0) len += (size_t)k;
    else if (k == 0) break;
    else if (errno != EINTR) return -1;
  }
  buf[len] = '\0';
  if (len < 12 || strncmp(buf, "HTTP/1.1 ", 9) != 0) return -1;
  if (!strstr(buf, "\r\n\r\n")) return -1;
  return atoi(buf + 9);
}

static int get_metrics(int port, char *buf) {
  int fd = connect_to(port), st;
  if (fd < 0) return -1;
  st = exchange(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", buf, BUF);
  close(fd);
  return st == 200 && strstr(buf, "gen_ai_server_time_to_first_token") ? 200 : st;
}

/* Descriptors open in this process (Linux: /proc/self/fd), -1 elsewhere. */
static int open_fds(void) {
#if defined(__linux__)
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  int n = 0;
  if (!d) return -1;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the directory's own descriptor */
#else
  return -1;
#endif
}

/* ------------------------------------------------- a busy client thread */

typedef struct busy {
  int port;
  atomic_int stop;     /* relaxed: a flag polled in a loop, nothing else rides on it */
  atomic_long ok, bad; /* relaxed: tallies read after the join */
} busy;

static void *busy_client(void *arg) {
  busy *b = arg;
  char *buf = malloc(BUF);
  if (!buf) return NULL;
  while (!atomic_load_explicit(&b->stop, memory_order_relaxed)) {
    if (get_metrics(b->port, buf) == 200) atomic_fetch_add_explicit(&b->ok, 1, memory_order_relaxed);
    else atomic_fetch_add_explicit(&b->bad, 1, memory_order_relaxed);
  }
  free(buf);
  return NULL;
}

/* ------------------------------------------------------------- children */

/* Exit codes of a child: 0 ok, else what went wrong. */
enum { CHILD_OK = 0, CHILD_PORT = 10, CHILD_FDS = 11 };

static void child(ttft_http *srv, int port) {
  int before = open_fds(), after;
  if (ttft_http_port(srv) != port) _exit(CHILD_PORT);
  ttft_http_stop(srv); /* frees the child's copy; must not touch the parent's */
  after = open_fds();
  /* the listener and the wake pipe at least were the server's: closed */
  if (before >= 0 && !(after >= 0 && after <= before - 3)) _exit(CHILD_FDS);
  _exit(CHILD_OK);
}

/* Wait for pid within the liveness deadline: its exit status, or -1 (then
 * it is killed: a child that hangs in stop, joining a thread that is not
 * there, is the bug this test is about). */
static int reap(pid_t pid) {
  uint64_t end = now_ms() + LIVENESS_MS;
  int status;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (w < 0 && errno != EINTR) return -1;
    if (now_ms() >= end) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    usleep(1000);
  }
}

static ttft_registry *make_registry(void) {
  ttft_registry *reg = ttft_registry_new(NULL);
  uint64_t t = 1000000000ull;
  int i;
  if (!reg) return NULL;
  for (i = 0; i < 20; i++) {
    ttft_seq s = ttft_begin(reg, t);
    ttft_token_emitted(reg, s, 1, t + 50000000ull);
    ttft_token_emitted(reg, s, 2, t + 90000000ull);
    ttft_stream_end(reg, s, TTFT_COMPLETED, t + 100000000ull);
    t += 200000000ull;
  }
  return reg;
}

/* ------------------------------------------------------------ the fixture */

/* Every test: a registry with 20 streams, its server on an ephemeral
 * loopback port (answering GET /metrics), a response buffer. A build
 * without the endpoint checks TTFT_ENOTSUP instead (every test, then
 * nothing else): 0. */
static struct {
  ttft_registry *reg;
  ttft_http *srv;
  int port;
  char *buf;
} F;

static int fixture(void) {
  signal(SIGPIPE, SIG_IGN);
  F.reg = make_registry();
  F.buf = malloc(BUF);
  EXPECT_NOT_NULL(F.reg);
  EXPECT_NOT_NULL(F.buf);
  if (!F.reg || !F.buf) return 0;
#if !TTFT_TEST_HTTP_BUILT
  fprintf(stderr, "   built without the endpoint: TTFT_ENOTSUP\n");
  EXPECT_ERR(TTFT_ENOTSUP, ttft_http_start(F.reg, "127.0.0.1:0", &F.srv));
  return 0;
#endif
  EXPECT_ERR(TTFT_OK, ttft_http_start(F.reg, "127.0.0.1:0", &F.srv));
  if (!F.srv) return 0;
  F.port = ttft_http_port(F.srv);
  EXPECT_EQ_INT(200, get_metrics(F.port, F.buf));
  return 1;
}

static void fixture_free(void) {
  ttft_http_stop(F.srv);
  ttft_registry_free(F.reg);
  free(F.buf);
  memset(&F, 0, sizeof F);
}
TU_TEARDOWN(fixture_free)

/* ---------------------------------------------------------------- tests */

/* fork, stop the inherited server in the child: the parent's still serves,
 * a connection it held at the fork included */
TEST(child_stop_keeps_parent_serving) {
  int held, i;
  if (!fixture()) return;
  /* a connection the parent's server holds at the fork, idle */
  held = connect_to(F.port);
  EXPECT_TRUE(held >= 0);
  usleep(50 * 1000); /* accepted */
  {
    pid_t pid = fork();
    if (pid == 0) child(F.srv, F.port);
    EXPECT_TRUE(pid > 0);
    if (pid > 0) EXPECT_EQ_INT(CHILD_OK, reap(pid));
  }
  for (i = 0; i < 5; i++) EXPECT_EQ_INT(200, get_metrics(F.port, F.buf));
  /* the child closed its copy of the held connection; the parent's is
   * still open and served (a shutdown in the child would have ended it) */
  if (held >= 0) {
    EXPECT_EQ_INT(200, exchange(held, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", F.buf, BUF));
    close(held);
  }
}

/* forks while a client keeps the server busy: every child stops its copy,
 * the client never misses an answer */
TEST(forks_while_busy) {
  int i, children_ok = 0;
  pthread_t th;
  busy b;
  if (!fixture()) return;
  b.port = F.port;
  atomic_init(&b.stop, 0);
  atomic_init(&b.ok, 0);
  atomic_init(&b.bad, 0);
  EXPECT_EQ_INT(0, pthread_create(&th, NULL, busy_client, &b));
  for (i = 0; i < FORKS; i++) {
    pid_t pid;
    usleep((useconds_t)(1000 + (i * 7919) % 5000)); /* land anywhere in the loop */
    pid = fork();
    if (pid == 0) child(F.srv, F.port);
    if (pid > 0 && reap(pid) == CHILD_OK) children_ok++;
  }
  EXPECT_EQ_INT(FORKS, children_ok);
  atomic_store_explicit(&b.stop, 1, memory_order_relaxed);
  pthread_join(th, NULL);
  fprintf(stderr, "   %d forks; the busy client got %ld answers, %ld failures\n", FORKS,
          atomic_load_explicit(&b.ok, memory_order_relaxed), atomic_load_explicit(&b.bad, memory_order_relaxed));
  EXPECT_EQ_INT(0, atomic_load_explicit(&b.bad, memory_order_relaxed));
  EXPECT_TRUE(atomic_load_explicit(&b.ok, memory_order_relaxed) > 0);
  for (i = 0; i < 5; i++) EXPECT_EQ_INT(200, get_metrics(F.port, F.buf));
}

/* a child that does not stop it; then the parent's stop works, and a new
 * server in the parent serves */
TEST(parent_stop_after_fork) {
  uint64_t t0;
  int fd;
  if (!fixture()) return;
  {
    pid_t pid = fork();
    if (pid == 0) _exit(CHILD_OK);
    EXPECT_TRUE(pid > 0);
    if (pid > 0) EXPECT_EQ_INT(CHILD_OK, reap(pid));
  }
  EXPECT_EQ_INT(200, get_metrics(F.port, F.buf));
  t0 = now_ms();
  ttft_http_stop(F.srv);
  F.srv = NULL;
  EXPECT_LE_U64(now_ms() - t0, LIVENESS_MS);
  fd = connect_to(F.port);
  EXPECT_TRUE(fd < 0); /* nobody listens any more */
  if (fd >= 0) close(fd);
  EXPECT_ERR(TTFT_OK, ttft_http_start(F.reg, "127.0.0.1:0", &F.srv));
  if (F.srv) EXPECT_EQ_INT(200, get_metrics(ttft_http_port(F.srv), F.buf));
}

TU_MAIN()
