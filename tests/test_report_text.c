/* test_report_text.c — the text report as a newcomer reads it: the header
 * says what the interval is, classes without traffic are not printed, the
 * stall budget is not in the SLO budget table (stalls are no part of the
 * verdict), every table carries a legend for its rows, and every duration
 * is written one way: a number, a space, a unit ("19.1 ms"). Public API
 * only; registries with known workloads and caller timestamps.
 *
 * Timestamps start at T0: t_ns == 0 means "now". */
#include <stdlib.h>

#include "ttft.h"
#include "task.h"
#include "text_lines.h"

#define T0 UINT64_C(1000000)
#define US UINT64_C(1000)
#define MS UINT64_C(1000000)

/* ------------------------------------------------------------ helpers */

/* the whole text report of s, malloc'd ("" on failure, after a complaint) */
static char *render(const ttft_snapshot *s) {
  long n = ttft_snapshot_format(s, TTFT_FORMAT_TEXT, NULL, 0);
  EXPECT_GT_INT(n, 0);
  char *buf = malloc(n > 0 ? (size_t)n + 1 : 1);
  if (!buf) abort();
  buf[0] = '\0';
  if (n > 0) EXPECT_EQ_INT(n, ttft_snapshot_format(s, TTFT_FORMAT_TEXT, buf, (size_t)n + 1));
  return buf;
}

/* the text report of a fresh snapshot of r */
static char *report_of(ttft_registry *r) {
  ttft_snapshot *s = ttft_snapshot_take(r);
  EXPECT_NOT_NULL(s);
  char *t = render(s);
  ttft_snapshot_free(s);
  return t;
}

/* the block of lines from the one starting with title up to (not
 * including) the next blank line, copied into out; 0 when absent */
static int block(const char *text, const char *title, char *out, size_t cap) {
  size_t tl = strlen(title);
  out[0] = '\0';
  for (const char *p = text; p && *p;) {
    if (!strncmp(p, title, tl)) {
      const char *end = strstr(p, "\n\n");
      size_t len = end ? (size_t)(end - p) + 1 : strlen(p);
      if (len >= cap) len = cap - 1;
      memcpy(out, p, len);
      out[len] = '\0';
      return 1;
    }
    const char *nl = strchr(p, '\n');
    p = nl ? nl + 1 : NULL;
  }
  return 0;
}


static int is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* A duration unit glued to a number ("19.1ms", "2s", "5µs"): the first
 * one found (copied into out, with what precedes it on its line), or 0.
 * A digit directly followed by a unit and then no letter is what the
 * glued style looks like; "p99.9" or "seq_itl_p95" are not followed by
 * a unit. */
static int glued_unit(const char *text, char *out, size_t cap) {
  static const char *const units[] = {"ns", "\xC2\xB5s", "us", "ms", "s", "min", "h"};
  for (const char *p = text; *p; p++) {
    if (!(*p >= '0' && *p <= '9')) continue;
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
      size_t n = strlen(units[u]);
      if (strncmp(p + 1, units[u], n) || is_letter(p[1 + n])) continue;
      const char *ls = p;
      while (ls > text && ls[-1] != '\n') ls--;
      size_t len = (size_t)(p + 1 + n - ls);
      if (len >= cap) len = cap - 1;
      memcpy(out, ls, len);
      out[len] = '\0';
      return 1;
    }
  }
  return 0;
}

/* d in the report's style, as the report documents it: three significant
 * digits, a space, the unit that fits */
static void dur(char *out, size_t cap, double ns) {
  static const struct {
    double below, div;
    const char *unit;
  } u[] = {{999.5e3, 1e3, "\xC2\xB5s"}, {999.5e6, 1e6, "ms"}, {59.95e9, 1e9, "s"}, {1e300, 60e9, "min"}};
  if (ns < 999.5) {
    snprintf(out, cap, "%.0f ns", ns);
    return;
  }
  size_t i = 0;
  while (ns >= u[i].below) i++;
  double v = ns / u[i].div;
  snprintf(out, cap, v < 9.995 ? "%.2f %s" : v < 99.95 ? "%.1f %s" : "%.0f %s", v, u[i].unit);
}

static ttft_registry *reg_new(int export_idle, uint64_t stall_ns) {
  ttft_config c;
  ttft_config_init(&c);
  c.max_threads = 1;
  c.max_classes = 8;
  c.export_idle_classes = export_idle;
  if (stall_ns) c.stall_threshold_ns = stall_ns;
  ttft_registry *r = ttft_registry_new(&c);
  EXPECT_NOT_NULL(r);
  if (!r) {
    fprintf(stderr, "cannot create a registry; giving up\n");
    TU_DONE();
    exit(1);
  }
  return r;
}

/* One stream of class cls: scheduled after queue_ns, first token at
 * ttft_ns, then ntok - 1 more single-token emissions gap_ns apart (one
 * of them stall_ns long when stall_ns), ended with status. */
static void stream(ttft_registry *r, int cls, uint64_t t0, uint64_t queue_ns, uint64_t ttft_ns,
                   int ntok, uint64_t gap_ns, uint64_t stall_ns, ttft_status status) {
  ttft_request q;
  ttft_request_init(&q);
  q.class_id = cls;
  q.prompt_tokens = 300;
  q.prefix_hit = 1;
  ttft_seq s = ttft_begin_ex(r, &q, t0);
  EXPECT_TRUE(s != 0);
  EXPECT_ERR(TTFT_OK, ttft_mark(r, s, TTFT_PHASE_SCHEDULED, t0 + queue_ns));
  uint64_t t = t0 + ttft_ns;
  for (int k = 0; k < ntok; k++) {
    if (k > 0) t += k == 2 && stall_ns ? stall_ns : gap_ns;
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, s, 1, t));
  }
  EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, status, t + (ntok ? 0 : ttft_ns)));
}

/* The workload most tests read: class chat (TTFT <= 200 ms, TPOT <= 50 ms,
 * stall budget 777 ms), class batch (E2E <= 30 s, the registry's stall
 * budget), class idle (never used), and default unused. Every chat stream
 * meets its budgets although one of them stalls; one batch stream is
 * cancelled before its first token, one ends with a single token. */
static ttft_registry *workload(int export_idle, int *chat_out) {
  ttft_registry *r = reg_new(export_idle, 0);
  ttft_slo chat, batch;
  ttft_slo_init(&chat);
  chat.ttft_ns = 200 * MS;
  chat.tpot_ns = 50 * MS;
  chat.stall_threshold_ns = 777 * MS;
  ttft_slo_init(&batch);
  batch.e2e_ns = 30000 * MS;
  int c = ttft_class_add(r, "chat", &chat);
  int b = ttft_class_add(r, "batch", &batch);
  EXPECT_EQ_INT(1, c);
  EXPECT_EQ_INT(2, b);
  EXPECT_EQ_INT(3, ttft_class_add(r, "idle", NULL));
  for (int i = 0; i < 4; i++) /* one of them stalls for 900 ms: still good */
    stream(r, c, T0 + (uint64_t)i * 10 * MS, 1 * MS, 40 * MS, 40, 20 * MS, i == 0 ? 900 * MS : 0,
           TTFT_COMPLETED); /* TPOT of the stalled one: (900 + 38 * 20) / 39 = 42.6 ms */
  stream(r, b, T0, 2 * MS, 60 * MS, 5, 30 * MS, 0, TTFT_COMPLETED);
  stream(r, b, T0, 2 * MS, 60 * MS, 1, 0, 0, TTFT_COMPLETED); /* N = 1: no TPOT */
  {                                                          /* abandoned */
    ttft_request q;
    ttft_request_init(&q);
    q.class_id = b;
    ttft_seq s = ttft_begin_ex(r, &q, T0);
    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, s, TTFT_CANCELLED, T0 + 1500 * MS));
  }
  if (chat_out) *chat_out = c;
  return r;
}

/* ------------------------------------------------------------- tests */

/* The first line says how long the report covers and what that time is:
 * the registry's age for a snapshot of a registry, the window of the
 * snapshots for a delta or a merge. */
TEST(header_explains_interval) {
  ttft_registry *r = workload(0, NULL);
  ttft_snapshot *s = ttft_snapshot_take(r);
  char *text = render(s);
  uint64_t t0 = 0, t1 = 0;
  EXPECT_ERR(TTFT_OK, ttft_snapshot_interval(s, &t0, &t1));
  char iv[32], want[160], line[256];
  dur(iv, sizeof iv, (double)(t1 - t0));
  snprintf(want, sizeof want, "libttft %s report over %s, the registry's age: from its creation to this snapshot",
           ttft_version_string(), iv);
  EXPECT_TRUE(line_starting(text, "libttft ", line, sizeof line));
  EXPECT_STREQ(want, line);
  EXPECT_FALSE(strstr(text, "interval")); /* the word that said nothing */

  /* a delta: the time between the two snapshots, not the registry's age */
  stream(r, 1, T0, 1 * MS, 40 * MS, 3, 20 * MS, 0, TTFT_COMPLETED);
  ttft_snapshot *later = ttft_snapshot_take(r);
  int err = TTFT_OK;
  ttft_snapshot *d = ttft_snapshot_delta(later, s, &err);
  EXPECT_NOT_NULL(d);
  if (d) {
    char *dt = render(d);
    EXPECT_ERR(TTFT_OK, ttft_snapshot_interval(d, &t0, &t1));
    dur(iv, sizeof iv, (double)(t1 - t0));
    snprintf(want, sizeof want, "libttft %s report over %s: the time covered by the snapshots of this delta or merge",
             ttft_version_string(), iv);
    EXPECT_TRUE(line_starting(dt, "libttft ", line, sizeof line));
    EXPECT_STREQ(want, line);
    EXPECT_FALSE(strstr(dt, "registry's age"));
    free(dt);
  }
  ttft_snapshot *m = ttft_snapshot_merge(s, later, &err);
  EXPECT_NOT_NULL(m);
  if (m) {
    char *mt = render(m);
    EXPECT_CONTAINS(mt, "covered by the snapshots of this delta or merge\n");
    free(mt);
  }
  /* the header is still three lines and a blank one */
  const char *blank = strstr(text, "\n\n");
  int lines = 0;
  for (const char *p = text; blank && p < blank; p++) lines += *p == '\n';
  EXPECT_EQ_INT(2, lines);
  free(text);
  ttft_snapshot_free(m);
  ttft_snapshot_free(d);
  ttft_snapshot_free(later);
  ttft_snapshot_free(s);
  ttft_registry_free(r);
}

/* The default class, never added and never used, appears nowhere; an
 * added class that saw no begin ("idle" here) is shown at zero; with
 * export_idle_classes the default class is back too, in every class
 * table. */
TEST(idle_classes_absent) {
  char line[256], tbl[4096];
  ttft_registry *r = workload(0, NULL);
  char *text = report_of(r);
  EXPECT_FALSE(line_starting(text, "default", line, sizeof line));
  EXPECT_TRUE(line_starting(text, "idle ", line, sizeof line));
  EXPECT_TRUE(line_starting(text, "chat ", line, sizeof line));
  EXPECT_TRUE(line_starting(text, "batch ", line, sizeof line));
  EXPECT_TRUE(block(text, "SLO attainment", tbl, sizeof tbl));
  EXPECT_CONTAINS(tbl, "\nchat ");
  EXPECT_CONTAINS(tbl, "\nbatch ");
  EXPECT_CONTAINS(tbl, "\nall classes "); /* two classes shown: their sum too */
  EXPECT_FALSE(strstr(tbl, "\ndefault"));
  free(text);
  ttft_registry_free(r);

  /* the same workload, idle classes exported: they are back in the SLO,
   * per class and stall tables */
  r = workload(1, NULL);
  text = report_of(r);
  static const char *const titles[] = {"SLO attainment", "per class", "stalls by class"};
  for (size_t i = 0; i < 3; i++) {
    EXPECT_TRUE(block(text, titles[i], tbl, sizeof tbl));
    EXPECT_CONTAINS(tbl, "\ndefault ");
    EXPECT_CONTAINS(tbl, "\nidle ");
    EXPECT_CONTAINS(tbl, "\nchat ");
  }
  free(text);
  ttft_registry_free(r);

  /* one class in use: no "all classes" row (it would repeat the class), no
   * per-class or stall table (the counts above say it all) */
  r = reg_new(0, 0);
  int solo = ttft_class_add(r, "solo", NULL);
  stream(r, solo, T0, 1 * MS, 40 * MS, 3, 20 * MS, 0, TTFT_COMPLETED);
  text = report_of(r);
  EXPECT_TRUE(line_starting(text, "solo ", line, sizeof line));
  EXPECT_FALSE(line_starting(text, "default", line, sizeof line));
  EXPECT_FALSE(line_starting(text, "all classes", line, sizeof line));
  EXPECT_FALSE(strstr(text, "per class"));
  EXPECT_FALSE(strstr(text, "stalls by class"));
  free(text);
  ttft_registry_free(r);
}

/* The SLO table lists the budgets of the verdict (TTFT, TPOT, E2E) and
 * nothing else: the stall budget is in its own table, which says stalls
 * are not part of the SLO — and they are not: a stalled stream within
 * its budgets is good. */
TEST(stall_budget_apart_from_slo) {
  char tbl[4096], line[256];
  ttft_registry *r = workload(0, NULL);
  ttft_snapshot *s = ttft_snapshot_take(r);
  char *text = render(s);
  EXPECT_EQ_U64(1, ttft_snapshot_class_counter(s, 1, TTFT_COUNTER_STALLS)); /* the 900 ms gap */
  EXPECT_EQ_U64(4, ttft_snapshot_class_counter(s, 1, TTFT_COUNTER_SLO_MET)); /* all four good */

  EXPECT_TRUE(block(text, "SLO attainment", tbl, sizeof tbl));
  EXPECT_TRUE(line_starting(tbl, "SLO attainment", line, sizeof line));
  EXPECT_CONTAINS(line, "ttft <=");
  EXPECT_CONTAINS(line, "tpot <=");
  EXPECT_CONTAINS(line, "e2e <=");
  EXPECT_FALSE(strstr(line, "stall"));
  EXPECT_TRUE(line_starting(tbl, "chat ", line, sizeof line));
  EXPECT_CONTAINS(line, " 200 ms ");  /* its TTFT budget */
  EXPECT_CONTAINS(line, " 50.0 ms "); /* its TPOT budget */
  EXPECT_CONTAINS(line, " 4/4 ");     /* the stalled stream is good */
  EXPECT_CONTAINS(line, " 100.0%");
  EXPECT_FALSE(strstr(tbl, "777 ms")); /* chat's stall budget is not among them */
  EXPECT_FALSE(strstr(tbl, "500 ms")); /* nor batch's (the registry default) */
  EXPECT_TRUE(line_starting(tbl, "batch ", line, sizeof line));
  EXPECT_CONTAINS(line, " 30.0 s ");
  EXPECT_CONTAINS(line, " 2/2 "); /* the stream abandoned at 1.5 s, within its 30 s
                                    budget, is not judged */
  EXPECT_CONTAINS(tbl, "Stalls play no part in it");

  /* the stall table: each class's budget and counts, said to be apart */
  EXPECT_TRUE(block(text, "stalls by class", tbl, sizeof tbl));
  EXPECT_TRUE(line_starting(tbl, "chat ", line, sizeof line));
  {
    char name[32], budget[16], unit[8];
    unsigned long long gaps = 9, seqs = 9;
    EXPECT_EQ_INT(5, sscanf(line, "%31s %15s %7s %llu %llu", name, budget, unit, &gaps, &seqs));
    EXPECT_STREQ("777", budget);
    EXPECT_STREQ("ms", unit);
    EXPECT_EQ_U64(1, gaps);
    EXPECT_EQ_U64(1, seqs);
  }
  EXPECT_TRUE(line_starting(tbl, "batch ", line, sizeof line));
  EXPECT_CONTAINS(line, " 500 ms ");
  EXPECT_CONTAINS(tbl, "not part");
  EXPECT_CONTAINS(tbl, "SLO verdict");
  /* the registry-wide line: budgets differ, so it points at the table */
  EXPECT_TRUE(line_starting(text, "stalls (", line, sizeof line));
  EXPECT_STREQ("stalls (gap > its class's budget, below): gaps 1, stalled sequences 1, stalled now 0", line);
  free(text);
  ttft_snapshot_free(s);
  ttft_registry_free(r);

  /* one class with its own stall budget: the line gives that budget, not
   * the registry's default */
  r = reg_new(0, 0);
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.stall_threshold_ns = 2000 * MS;
  int solo = ttft_class_add(r, "solo", &slo);
  stream(r, solo, T0, 1 * MS, 40 * MS, 4, 20 * MS, 2500 * MS, TTFT_COMPLETED);
  text = report_of(r);
  EXPECT_TRUE(line_starting(text, "stalls (", line, sizeof line));
  EXPECT_STREQ("stalls (gap > 2.00 s): gaps 1, stalled sequences 1, stalled now 0", line);
  free(text);
  ttft_registry_free(r);
}

/* Each table is followed by a legend for its rows that need one. */
TEST(legends_for_rows) {
  ttft_registry *r = workload(0, NULL);
  char *text = report_of(r);
  char tbl[8192];
  /* metrics: every row whose name is not self-explanatory, defined */
  EXPECT_TRUE(block(text, "metric ", tbl, sizeof tbl));
  static const char *const defined[] = {
      "  ttft = start -> first token",
      "; e2e = start -> stream end",
      "; itl = gap between two emissions",
      "  tpot = (last token - first token) / (N - 1)",
      "  queue = start -> scheduled",
      "; prefill = scheduled -> first token",
      "; decode = first -> last token",
      "  seq_itl_p95, seq_itl_max = each stream's own p95 gap, its worst gap",
      "percentiles across streams",
      "  abandoned_wait = how long streams cancelled before their first token waited",
      "  itl_per_token = itl by token: an emission of n tokens after a gap d counts n times, as d/n",
  };
  for (size_t i = 0; i < sizeof defined / sizeof defined[0]; i++) EXPECT_CONTAINS(tbl, defined[i]);
  /* ... and each defined name is a row of that table */
  static const char *const rows[] = {"\nttft ",  "\ntpot ",        "\nitl ",         "\ne2e ",
                                     "\nqueue ", "\nprefill ",     "\ndecode ",      "\nseq_itl_p95 ",
                                     "\nseq_itl_max ", "\nabandoned_wait ", "\nitl_per_token "};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) EXPECT_CONTAINS(tbl, rows[i]);

  /* counts: the derived counters */
  EXPECT_TRUE(block(text, "requests: ", tbl, sizeof tbl));
  EXPECT_CONTAINS(tbl, "\nclock clamps: 0, ");
  EXPECT_CONTAINS(tbl, "ended without TPOT (N < 2): 2\n"); /* N = 1 and the abandoned one */
  EXPECT_CONTAINS(tbl, "\n  clock clamps = timestamps earlier than the stream's previous event");
  EXPECT_CONTAINS(tbl, "\n  ended without TPOT = streams of fewer than 2 output tokens");
  EXPECT_CONTAINS(tbl, "\n  dropped = begins refused for want of a slot");
  EXPECT_CONTAINS(tbl, "stalled now = in flight, silent for");
  EXPECT_CONTAINS(tbl, "stalls are counted and reported, not part of the SLO");

  /* by terminal status: present with its legend when streams ended */
  EXPECT_TRUE(block(text, "by terminal status", tbl, sizeof tbl));
  EXPECT_CONTAINS(tbl, "\ncancelled e2e ");
  EXPECT_CONTAINS(tbl, "\n  the same metrics again, by how each stream ended");
  /* SLO: what "good" means */
  EXPECT_TRUE(block(text, "SLO attainment", tbl, sizeof tbl));
  EXPECT_CONTAINS(tbl, "\n  good = ended completed and within every budget its class sets");
  /* splits */
  EXPECT_TRUE(block(text, "ttft split by", tbl, sizeof tbl));
  EXPECT_CONTAINS(tbl, "\nprefix hit ");
  EXPECT_CONTAINS(tbl, "\n  ttft again, by prefix-cache hit or miss and by prompt length");
  free(text);
  ttft_registry_free(r);

  /* nothing ended: no status table, and no legend for it either */
  r = reg_new(0, 0);
  (void)ttft_begin(r, T0);
  text = report_of(r);
  EXPECT_FALSE(strstr(text, "by terminal status"));
  EXPECT_FALSE(strstr(text, "by how each stream ended"));
  EXPECT_CONTAINS(text, "  seq_itl_p95, seq_itl_max = "); /* the metric rows are always there */
  free(text);
  ttft_registry_free(r);
}

/* Every duration: a number, a space, a unit — never "19.1ms". */
TEST(one_unit_style) {
  char bad[256], line[256];
  /* the checker finds the glued style (so that it can fail) */
  EXPECT_TRUE(glued_unit("ttft 19.1ms", bad, sizeof bad));
  EXPECT_STREQ("ttft 19.1ms", bad);
  EXPECT_TRUE(glued_unit("x\nover 2s.", bad, sizeof bad));
  EXPECT_TRUE(glued_unit("5\xC2\xB5s", bad, sizeof bad));
  EXPECT_FALSE(glued_unit("p99.9 seq_itl_p95 19.1 ms 2 s 4/4 100.0% 1.1.0 N >= 2", bad, sizeof bad));

  ttft_registry *r = workload(0, NULL);
  char *text = report_of(r);
  if (glued_unit(text, bad, sizeof bad)) fprintf(stderr, "glued unit in: %s\n", bad);
  EXPECT_FALSE(glued_unit(text, bad, sizeof bad));
  free(text);
  ttft_registry_free(r);

  /* one value per unit, each as a single TTFT observation */
  static const struct {
    uint64_t ns;
    const char *shown;
  } units[] = {{999, "999 ns"},           {1000, "1.00 \xC2\xB5s"},  {12345, "12.3 \xC2\xB5s"},
               {999499, "999 \xC2\xB5s"}, {999600, "1.00 ms"},       {250 * MS, "250 ms"},
               {1500 * MS, "1.50 s"},     {59000 * MS, "59.0 s"},    {90000 * MS, "1.50 min"},
               {3600000 * MS, "60.0 min"}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    r = reg_new(0, 0);
    ttft_seq q = ttft_begin(r, T0);
    EXPECT_ERR(TTFT_OK, ttft_token_emitted(r, q, 1, T0 + units[i].ns));
    EXPECT_ERR(TTFT_OK, ttft_stream_end(r, q, TTFT_COMPLETED, T0 + units[i].ns));
    text = report_of(r);
    char want[64];
    snprintf(want, sizeof want, " %s ", units[i].shown); /* p50 ... max: the value alone */
    EXPECT_TRUE(line_starting(text, "ttft ", line, sizeof line));
    EXPECT_CONTAINS(line, want);
    char d[32];
    dur(d, sizeof d, (double)units[i].ns);
    EXPECT_STREQ(units[i].shown, d); /* the helper agrees with the table above */
    EXPECT_FALSE(glued_unit(text, bad, sizeof bad));
    free(text);
    ttft_registry_free(r);
  }
}

/* An empty registry: the tables stand, with "-" and no class rows. */
TEST(empty_registry) {
  ttft_registry *r = reg_new(0, 0);
  char *text = report_of(r);
  char line[256];
  EXPECT_TRUE(line_starting(text, "ttft ", line, sizeof line));
  {
    char name[32], c1[16], c2[16];
    EXPECT_EQ_INT(3, sscanf(line, "%31s %15s %15s", name, c1, c2));
    EXPECT_STREQ("0", c1);
    EXPECT_STREQ("-", c2);
  }
  EXPECT_TRUE(line_starting(text, "all classes", line, sizeof line));
  EXPECT_CONTAINS(line, " 0/0 ");
  EXPECT_FALSE(line_starting(text, "default", line, sizeof line));
  EXPECT_FALSE(strstr(text, "per class"));
  EXPECT_FALSE(strstr(text, "prompt <"));
  EXPECT_CONTAINS(text, "waited p50 -, p99 -");
  EXPECT_CONTAINS(text, "stalls (gap > 500 ms): gaps 0,"); /* the registry's default budget */
  EXPECT_CONTAINS(text, "registry's age");
  free(text);
  ttft_registry_free(r);
}

/* A terminal's width: no line wider than 100 columns, whatever the
 * workload (many classes, long class names, every table and legend). */
TEST(fits_100_columns) {
  ttft_registry *r = workload(0, NULL);
  ttft_slo slo;
  ttft_slo_init(&slo);
  slo.ttft_ns = 59000 * MS;
  slo.tpot_ns = 999 * US;
  slo.e2e_ns = 3600000 * MS;
  slo.stall_threshold_ns = 90000 * MS;
  int wide = ttft_class_add(r, "a-class-name-that-is-longer-than-its-column", &slo);
  EXPECT_GT_INT(wide, 0);
  stream(r, wide, T0, 1 * MS, 59000 * MS, 4, 90000 * MS, 0, TTFT_ERROR);
  char *text = report_of(r);
  EXPECT_LE_U64(max_line_columns(text), 100);
  EXPECT_GT_U64(max_line_columns(text), 80); /* the tables are there */
  EXPECT_CONTAINS(text, "\na-class-name-that-i~");
  char bad[256];
  EXPECT_FALSE(glued_unit(text, bad, sizeof bad));
  fputs(text, stderr); /* for the log: what a newcomer sees */
  free(text);
  ttft_registry_free(r);
}

TU_MAIN()
