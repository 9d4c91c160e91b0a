/* test_locale.c — the formats do not change with the host's locale.
 *
 * A server that calls setlocale(LC_ALL, "") under a German, French, ...
 * locale has a decimal comma: "%.17g" then writes 0,5, which made
 * ttft_snapshot_format's JSON invalid ("mean":147956862,5) and its text
 * report read "100,0%". Each test takes one snapshot, formats it in every
 * format under the C locale, switches the process (or one thread) to
 * de_DE.UTF-8 and formats it again: every byte must be the same, and the
 * host's locale must still be in force afterwards.
 *
 * de_DE.UTF-8 comes from the system when it is installed, else it is
 * compiled into a temporary directory with localedef (Debian's `locales`
 * package holds its source; .ci/packages.d/base.txt installs it). Without
 * either the test fails and says so. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, setenv; uselocale comes with POSIX 2008 */
#endif
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
#include "task.h"
#include "render.h"

enum { NFMT = TTFT_FORMAT_COUNT_ };

static ttft_snapshot *g_snap;
static char *g_c[NFMT];  /* each format under the C locale */
static long g_len[NFMT];

/* a snapshot with fractions everywhere: means ending in .5, attainment
 * 2/3, a throughput, stall seconds */
static ttft_snapshot *make_snapshot(void) {
  ttft_config cfg;
  ttft_config_init(&cfg);
  ttft_registry *r = ttft_registry_new(&cfg);
  if (!r) return NULL;
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 150000000u;
  int chat = ttft_class_add(r, "chat", &slo);
  uint64_t t = 1000000000u;
  for (int i = 0; i < 30; i++) {
    ttft_request req;
    ttft_request_init(&req);
    req.class_id = chat;
    ttft_seq s = ttft_begin_ex(r, &req, t);
    ttft_token_emitted(r, s, 1, t + 123456789u + (uint64_t)i * 1000003u);
    ttft_token_emitted(r, s, 2, t + 223456789u + (uint64_t)i * 7000001u);
    ttft_token_emitted(r, s, 1, t + 923456789u + (uint64_t)i * 7000001u); /* a stall */
    ttft_stream_end(r, s, i % 3 ? TTFT_COMPLETED : TTFT_ERROR, t + 993456789u);
    t += 1000000u;
  }
  ttft_snapshot *snap = ttft_snapshot_take(r);
  ttft_registry_free(r);
  return snap;
}

static void setup(void) {
  if (g_snap) return;
  g_snap = make_snapshot();
  for (int f = 0; f < NFMT; f++) g_c[f] = render_len(g_snap, (ttft_format)f, &g_len[f]);
}

/* the process's locale set to de_DE.UTF-8: the system's, or one compiled
 * here (setlocale, not newlocale: glibc's newlocale leaks its copy of
 * LOCPATH, which LeakSanitizer reports). 1 when set. */
static int german(void) {
  if (setlocale(LC_ALL, "de_DE.UTF-8")) return 1;
  static char dir[] = "/tmp/ttft-locale-XXXXXX";
  if (!mkdtemp(dir)) return 0;
  char cmd[256];
  snprintf(cmd, sizeof cmd, "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 2>&1", dir);
  int rc = system(cmd);
  setenv("LOCPATH", dir, 1);
  if (setlocale(LC_ALL, "de_DE.UTF-8")) return 1;
  fprintf(stderr, "no de_DE.UTF-8: not installed, and localedef exited %d (Debian: apt-get "
                  "install locales)\n", rc);
  return 0;
}

/* every format equals its C-locale bytes */
static void expect_same_formats(const char *where) {
  for (int f = 0; f < NFMT; f++) {
    long n = 0;
    char *b = render_len(g_snap, (ttft_format)f, &n);
    EXPECT_NOT_NULL(b);
    EXPECT_EQ_INT(g_len[f], n);
    int same = b && g_c[f] && n == g_len[f] && !memcmp(b, g_c[f], (size_t)n);
    if (!same && b && g_c[f]) {
      long i = 0;
      while (i < n && i < g_len[f] && b[i] == g_c[f][i]) i++;
      long from = i > 30 ? i - 30 : 0;
      fprintf(stderr, "%s: %s differs at byte %ld: C \"%.60s\", here \"%.60s\"\n", where,
              ttft_format_name((ttft_format)f), i, g_c[f] + from, b + from);
    }
    EXPECT_TRUE(same);
    free(b);
  }
}

static int decimal_comma(void) {
  char b[16];
  snprintf(b, sizeof b, "%.1f", 0.5);
  return !strcmp(b, "0,5");
}

/* What de_DE's numbers look like under this C library: glibc writes a
 * decimal comma (the hazard these tests are about); musl's LC_NUMERIC is
 * always the C locale's (it accepts the name de_DE.UTF-8 and keeps '.'),
 * so the formats cannot be bent by it, and each test then checks that the
 * formats are unchanged and that the point stays a point. Read with the
 * German locale in force. */
static int german_comma(void) {
#if defined(__GLIBC__)
  return 1; /* must be: a glibc de_DE without the comma is a broken setup */
#else
  return decimal_comma();
#endif
}

TEST(formats_ignore_the_process_locale) {
  setup();
  EXPECT_NOT_NULL(g_snap);
  EXPECT_CONTAINS(g_c[TTFT_FORMAT_JSON], ".5,"); /* a mean that has a fraction */
  int de = german();
  EXPECT_TRUE(de);
  if (!de) return;
  int comma = german_comma();
  EXPECT_EQ_INT(comma, decimal_comma()); /* the host's locale is in force */
  expect_same_formats("setlocale(LC_ALL, de_DE)");
  EXPECT_EQ_INT(comma, decimal_comma()); /* and still is */
  setlocale(LC_ALL, "C");
}

static void *format_in_thread(void *p) {
  (void)p;
  expect_same_formats("another thread, global de_DE");
  return NULL;
}

/* the HTTP server formats on its own thread, which follows the global
 * locale */
TEST(formats_ignore_the_global_locale_on_another_thread) {
  setup();
  int de = german();
  EXPECT_TRUE(de);
  if (!de) return;
  pthread_t th;
  EXPECT_EQ_INT(0, pthread_create(&th, NULL, format_in_thread, NULL));
  pthread_join(th, NULL);
  setlocale(LC_ALL, "C");
}

/* a thread with its own locale (uselocale) gets it back after the call */
TEST(formats_keep_the_threads_own_locale) {
  setup();
  int ok = german();
  EXPECT_TRUE(ok);
  if (!ok) return;
  int comma = german_comma();
  /* this thread's own de_DE; the process goes back to C */
  locale_t de = duplocale(LC_GLOBAL_LOCALE);
  setlocale(LC_ALL, "C");
  EXPECT_TRUE(de != (locale_t)0);
  if (!de) return;
  EXPECT_FALSE(decimal_comma());
  locale_t prev = uselocale(de);
  EXPECT_EQ_INT(comma, decimal_comma());
  expect_same_formats("uselocale(de_DE)");
  EXPECT_TRUE(uselocale((locale_t)0) == de);
  EXPECT_EQ_INT(comma, decimal_comma());
  uselocale(prev);
  EXPECT_FALSE(decimal_comma());
  freelocale(de);
}

TU_MAIN()
