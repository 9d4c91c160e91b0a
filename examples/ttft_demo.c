/*
 * ttft_demo.c — a continuous-batching server in miniature, instrumented
 * with libttft the way a real one would be.
 *
 *  - a scheduler thread admits requests as they arrive (Poisson arrivals,
 *    long-tailed prompt lengths, some prefix-cache hits, two classes with
 *    different SLOs): ttft_begin_ex at arrival, with a request id, so the
 *    report's slowest tables name the requests;
 *  - a decode worker (the engine loop) runs a batch: newly admitted
 *    sequences are marked SCHEDULED and prefilled inside the next step
 *    (prefill work delays the whole batch, as it does on a GPU), then every
 *    running sequence gets a token per step (sometimes 2-3: speculative
 *    steps); the step time grows with the batch width. Each step is
 *    reported with ttft_engine_step before its tokens, so the library can
 *    say why a stream stalled (docs/integration.md);
 *  - clients cancel: impatient ones before their first token, a few
 *    mid-stream — from the scheduler thread, racing the decode worker;
 *  - a few sequences are preempted (swapped out: PREEMPTED, RESUMED marks)
 *    for longer than the stall budget and come back: stalls, and a long
 *    prompt's prefill makes a step long enough to stall the batch: the
 *    report's "stalls by cause" names both.
 * After the run it prints the report; then a batch-width experiment shows
 * that a wider batch raises tokens/s while TPOT gets worse, and says which
 * widths the offered load overwhelms (there TTFT grows without bound);
 * then an engine model in virtual time (long prompts joining running
 * decodes, preemption under KV pressure, a scheduler that skips, a frozen
 * process) shows the library naming why each stall happened, against the
 * simulator's ground truth (--causes runs only that).
 * Durations print as the report prints them: "19.1 ms", "1.12 s".
 *
 *   ttft-demo [--seconds S] [--batch N] [--workers N] [--rate R]
 *             [--prompts short|mixed|long] [--seed N] [--slowdown X]
 *             [--no-experiment] [--port N | --no-http] [--hold S]
 *             [--snapshot FILE] [--json] [--causes] [--capacity DIR]
 *
 * --capacity DIR: the load sweep instead of the demo run: the engine at
 * batch --batch runs 3 s of arrivals at each of several rates, each run's
 * snapshot is written to DIR/run-RR.ttfs, then `ttft-report --capacity`
 * prints the fluid token generation rate beside the TPOT p90 capacity
 * (docs/ttft-report.md "Capacity").
 *
 * --port N serves /metrics on 127.0.0.1:N (default 9464; 0 = any free
 * port); a port already taken is an error (exit 1), never a silent move to
 * another port, which a Prometheus configured for 9464 would not find.
 * --workers N > 1 runs N engine loops over one registry: engine steps are
 * then not reported (steps are registry-wide, one loop per registry), and
 * stall causes are "unknown".
 *
 * --seed N draws the same workload (arrivals, lengths, cancels, preemptions)
 * every run; --slowdown X makes every engine step X times as long — a
 * deliberately slower deploy to compare against with `ttft-report --diff`.
 *
 * The simulated engine keeps a schedule: arrivals and the ends of engine
 * steps fall at planned instants (the threads sleep until them), and the
 * hooks get those instants as caller timestamps. So a busy machine that
 * wakes a thread late does not make the simulated GPU look slower, and two
 * runs with one seed measure the same engine. Clients cancel on the real
 * clock (TTFT_NOW and ttft_now_ns, which caller timestamps mix with).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ttft.h>

#define MS UINT64_C(1000000)
#define MAX_REQ 65536

/* ------------------------------------------------------------ options */
static struct {
  double seconds, rate, hold, slowdown;
  int batch, workers, experiment, http, json, causes_only, port;
  unsigned long long seed;
  const char *prompts, *snapshot, *capacity;
} opt = {4.0, 8.0, 0.0, 1.0, 32, 1, 1, 1, 0, 0, 9464, 0x5eed, "mixed", NULL, NULL};

/* ------------------------------------------------------------ workload */
typedef struct req {
  ttft_seq seq;
  int cls;
  uint32_t prompt, cached, out_len, emitted;
  uint64_t patience_ns;     /* cancels if no token by then              */
  uint64_t cancel_at_token; /* cancels mid-stream at this token (0: no) */
  uint64_t t_arrival;
  uint64_t resume_at;       /* preempted until then (0: not preempted)  */
  _Atomic int state;        /* 0 queued, 1 running, 2 done              */
} req;

typedef struct engine {
  ttft_registry *reg;
  int chat, batch_cls;
  int batch, workers;
  double seconds, rate, slowdown;
  uint64_t seed;
  const char *prompts;
  req *reqs;
  _Atomic uint32_t nreq;
  pthread_mutex_t mu; /* the admission queue: demo code, not the library */
  uint32_t queue[MAX_REQ];
  uint32_t qhead, qtail;
  _Atomic int stop;
} engine;

static _Thread_local uint64_t rng_state;
static double urand(void) {
  rng_state += UINT64_C(0x9E3779B97F4A7C15);
  uint64_t z = rng_state;
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  z ^= z >> 31;
  return (double)(z >> 11) / 9007199254740992.0;
}
static double expo(double mean) { return -mean * log(1.0 - urand()); }
static double lognormal(double median, double sigma) {
  double u1 = urand(), u2 = urand();
  double z = sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2);
  return median * exp(sigma * z);
}

static void sleep_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

/* sleep until t_ns on CLOCK_MONOTONIC (ttft_now_ns's clock) */
static void sleep_until(uint64_t t_ns) {
  struct timespec ts = {(time_t)(t_ns / 1000000000u), (long)(t_ns % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

static uint32_t prompt_len(const char *mix) {
  double p;
  if (!strcmp(mix, "short"))
    p = lognormal(200, 0.6);
  else if (!strcmp(mix, "long"))
    p = lognormal(6000, 0.7);
  else
    p = urand() < 0.8 ? lognormal(300, 0.8) : lognormal(5000, 0.9); /* long tail */
  if (p < 8) p = 8;
  if (p > 120000) p = 120000;
  return (uint32_t)p;
}

/* ------------------------------------------------------------ scheduler */
static void *scheduler(void *arg) {
  engine *e = arg;
  rng_state = e->seed;
  uint64_t t_next = ttft_now_ns(); /* the next arrival, on the schedule */
  uint64_t t_end = t_next + (uint64_t)(e->seconds * 1e9);
  for (;;) {
    t_next += (uint64_t)(expo(1.0 / e->rate) * 1e9);
    if (t_next >= t_end) break;
    sleep_until(t_next);
    uint32_t i = atomic_load_explicit(&e->nreq, memory_order_relaxed);
    if (i >= MAX_REQ) break;
    req *q = &e->reqs[i];
    memset(q, 0, sizeof *q);
    int is_chat = urand() < 0.7;
    q->cls = is_chat ? e->chat : e->batch_cls;
    q->prompt = prompt_len(e->prompts);
    int hit = urand() < 0.35; /* shared system prompt already in the prefix cache */
    q->cached = hit ? (uint32_t)(q->prompt * 0.8) : 0;
    q->out_len = 1 + (uint32_t)(is_chat ? lognormal(60, 0.8) : lognormal(180, 0.5));
    q->patience_ns = is_chat ? (uint64_t)(lognormal(2.5, 0.4) * 1e9) : UINT64_MAX;
    q->cancel_at_token = urand() < 0.05 ? 1 + (uint64_t)(urand() * q->out_len) : 0;

    ttft_request rq;
    ttft_request_init(&rq);
    rq.class_id = q->cls;
    rq.prompt_tokens = q->prompt;
    rq.prefix_hit = hit;
    char id[24];
    snprintf(id, sizeof id, "req-%05u", i); /* copied by begin */
    rq.request_id = id;
    q->t_arrival = t_next;
    q->seq = ttft_begin_ex(e->reg, &rq, q->t_arrival); /* the clock starts at server arrival */
    if (!q->seq) continue;                              /* no slot: counted as dropped */
    atomic_store_explicit(&e->nreq, i + 1, memory_order_release);
    pthread_mutex_lock(&e->mu);
    e->queue[e->qtail++ % MAX_REQ] = i;
    pthread_mutex_unlock(&e->mu);

    /* impatient clients: cancel whoever waited too long for a first token.
     * This races the decode workers on purpose; the library arbitrates. */
    uint32_t n = i + 1;
    uint64_t now = ttft_now_ns();
    for (uint32_t k = 0; k < n; k++) {
      req *w = &e->reqs[k];
      if (atomic_load_explicit(&w->state, memory_order_acquire) == 2) continue;
      ttft_seq_info info = {.struct_size = sizeof info};
      if (ttft_seq_stats(e->reg, w->seq, &info) != TTFT_OK) continue;
      if (info.emissions == 0 && now - w->t_arrival > w->patience_ns &&
          ttft_stream_end(e->reg, w->seq, TTFT_CANCELLED, now) == TTFT_OK)
        atomic_store_explicit(&w->state, 2, memory_order_release);
    }
  }
  atomic_store_explicit(&e->stop, 1, memory_order_release);
  return NULL;
}

/* --------------------------------------------------------------- worker */
typedef struct worker_arg {
  engine *e;
  int index;
} worker_arg;

static void *worker(void *arg) {
  engine *e = ((worker_arg *)arg)->e;
  /* each worker its own stream of draws, the same every run of one seed */
  rng_state = e->seed * UINT64_C(0x2545F4914F6CDD1D) + (uint64_t)((worker_arg *)arg)->index + 1;
  int cap = e->batch / e->workers > 0 ? e->batch / e->workers : 1;
  req **run = calloc((size_t)cap, sizeof *run);
  int nrun = 0;
  uint64_t drain_until = 0;
  uint64_t vt = 0; /* when the engine's previous step ended (its schedule); 0 = idle */
  while (!atomic_load_explicit(&e->stop, memory_order_acquire) || nrun) {
    /* the step starts when the previous one ended; after idling, or when
     * the machine fell far behind the schedule, it starts now */
    uint64_t real = ttft_now_ns();
    if (!vt || real - vt > 50 * MS) vt = real;
    /* admit: first admission is the SCHEDULED mark; prefill joins this step */
    uint64_t prefill_tokens = 0;
    pthread_mutex_lock(&e->mu);
    while (nrun < cap && e->qhead != e->qtail &&
           !atomic_load_explicit(&e->stop, memory_order_relaxed)) {
      req *q = &e->reqs[e->queue[e->qhead++ % MAX_REQ]];
      int expect = 0;
      if (!atomic_compare_exchange_strong(&q->state, &expect, 1)) continue; /* cancelled */
      if (q->t_arrival > vt) vt = q->t_arrival; /* it arrived as the step was due */
      if (ttft_mark(e->reg, q->seq, TTFT_PHASE_SCHEDULED, vt) != TTFT_OK) continue;
      prefill_tokens += q->prompt - q->cached;
      run[nrun++] = q;
    }
    pthread_mutex_unlock(&e->mu);
    if (!nrun) {
      if (atomic_load_explicit(&e->stop, memory_order_acquire)) break;
      vt = 0;
      sleep_ns(2 * MS);
      continue;
    }
    /* swapped-out sequences whose time is up rejoin the batch */
    uint32_t decode_seqs = 0;
    for (int k = 0; k < nrun; k++) {
      req *q = run[k];
      if (q->resume_at && q->resume_at <= vt) {
        ttft_mark(e->reg, q->seq, TTFT_PHASE_RESUMED, q->resume_at);
        q->resume_at = 0;
      }
      decode_seqs += !q->resume_at && q->emitted > 0;
    }
    /* one engine step: decode cost grows with the batch, prefill is
     * chunked into the step at ~40k tokens/s */
    uint64_t t_step = vt; /* the step starts at batch building */
    uint64_t step = 6 * MS + (uint64_t)nrun * 450000u + prefill_tokens * 25000u;
    uint64_t now = vt + (uint64_t)((double)step * e->slowdown); /* the step's planned end */
    sleep_until(now);
    vt = now;
    if (e->workers == 1) {
      /* the step ended: report it before its tokens (ttft_engine_step's
       * contract), so that a stall closed by one of them finds its cause */
      ttft_step_info info;
      ttft_step_info_init(&info);
      info.prefill_tokens = (uint32_t)prefill_tokens;
      info.decode_seqs = decode_seqs;
      ttft_engine_step(e->reg, &info, t_step, now);
    }
    for (int k = 0; k < nrun; k++) {
      req *q = run[k];
      int done = 0, rc = TTFT_OK;
      if (q->resume_at) continue; /* swapped out: no token this step */
      uint32_t n = urand() < 0.1 ? 2 + (urand() < 0.3) : 1; /* speculative steps */
      if (n > q->out_len - q->emitted) n = q->out_len - q->emitted;
      rc = ttft_token_emitted(e->reg, q->seq, n, now); /* after detokenize + flush */
      if (rc == TTFT_ESTALE) {
        done = 1; /* the client cancelled: the library already closed it */
      } else {
        q->emitted += n;
        if (q->emitted >= q->out_len) {
          ttft_stream_end(e->reg, q->seq, TTFT_COMPLETED, now);
          done = 1;
        } else if (q->cancel_at_token && q->emitted >= q->cancel_at_token) {
          ttft_stream_end(e->reg, q->seq, TTFT_CANCELLED, now); /* client went away */
          done = 1;
        } else if (urand() < 0.0015) {
          /* KV pressure: swapped out for longer than the stall budget */
          ttft_mark(e->reg, q->seq, TTFT_PHASE_PREEMPTED, now);
          q->resume_at = now + 550 * MS + (uint64_t)(urand() * 300 * MS);
        }
      }
      if (done) {
        atomic_store_explicit(&q->state, 2, memory_order_release);
        run[k--] = run[--nrun];
      }
    }
    if (atomic_load_explicit(&e->stop, memory_order_acquire) && !drain_until)
      drain_until = ttft_now_ns() + 1500 * MS; /* arrivals stopped: let the batch drain */
    if (drain_until && ttft_now_ns() > drain_until) {
      /* shutting down: whatever is still running is cut off */
      for (int k = 0; k < nrun; k++) {
        ttft_stream_end(e->reg, run[k]->seq, TTFT_CANCELLED, TTFT_NOW);
        atomic_store_explicit(&run[k]->state, 2, memory_order_release);
      }
      nrun = 0;
    }
  }
  free(run);
  return NULL;
}

/* ------------------------------------------------------------------ run */
static ttft_registry *make_registry(int *chat, int *batch_cls) {
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.start_point = "server_arrival";
  cfg.token_point = "detokenized_flush";
  cfg.model = "demo-7b";
  ttft_registry *r = ttft_registry_new(&cfg);
  if (!r) return NULL;
  ttft_slo chat_slo, batch_slo;
  ttft_slo_init(&chat_slo);
  chat_slo.ttft_ns = 1000 * MS; /* chat: started within 1 s, types at >= 20 tok/s */
  chat_slo.tpot_ns = 50 * MS;
  ttft_slo_init(&batch_slo);
  batch_slo.e2e_ns = 30000 * MS; /* batch: whole answer within 30 s */
  batch_slo.stall_threshold_ns = 2000 * MS;
  *chat = ttft_class_add(r, "chat", &chat_slo);
  *batch_cls = ttft_class_add(r, "batch", &batch_slo);
  return r;
}

static void run_engine(engine *e) {
  pthread_t sched, *w = calloc((size_t)e->workers, sizeof *w);
  worker_arg *wa = calloc((size_t)e->workers, sizeof *wa);
  if (!w || !wa) {
    fprintf(stderr, "ttft-demo: out of memory\n");
    exit(1);
  }
  atomic_store(&e->nreq, 0);
  atomic_store(&e->stop, 0);
  e->qhead = e->qtail = 0;
  pthread_mutex_init(&e->mu, NULL);
  pthread_create(&sched, NULL, scheduler, e);
  for (int i = 0; i < e->workers; i++) {
    wa[i].e = e;
    wa[i].index = i;
    pthread_create(&w[i], NULL, worker, &wa[i]);
  }
  pthread_join(sched, NULL);
  for (int i = 0; i < e->workers; i++) pthread_join(w[i], NULL);
  /* queued requests never admitted: the clients give up */
  uint32_t n = atomic_load(&e->nreq);
  for (uint32_t k = 0; k < n; k++)
    if (atomic_load(&e->reqs[k].state) == 0)
      ttft_stream_end(e->reg, e->reqs[k].seq, TTFT_CANCELLED, TTFT_NOW);
  pthread_mutex_destroy(&e->mu);
  free(w);
  free(wa);
}

/* A duration as the text report writes it: three significant digits, a
 * space, the unit that fits ("850 ns", "12.3 µs", "19.1 ms", "1.12 s"). */
static void fmt_dur(char *out, size_t cap, double ns) {
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

/* s right-aligned in w columns (µs is one column in two bytes) */
static void print_right(const char *s, int w) {
  int cols = 0;
  for (const char *c = s; *c; c++) cols += ((unsigned char)*c & 0xC0) != 0x80;
  printf("%*s%s", cols < w ? w - cols : 1, "", s);
}

static void print_snapshot(const ttft_snapshot *s, ttft_format f) {
  long n = ttft_snapshot_format(s, f, NULL, 0);
  if (n < 0) {
    fprintf(stderr, "format: %s\n", ttft_strerror((int)n));
    return;
  }
  char *buf = malloc((size_t)n + 1);
  ttft_snapshot_format(s, f, buf, (size_t)n + 1);
  fputs(buf, stdout);
  free(buf);
}

/* where ttft-report sits in a build tree: <build>/tools/ next to <build>/examples/ */
static char report_tool[4096] = "ttft-report";
static void find_report_tool(const char *argv0) {
  const char *slash = strrchr(argv0, '/');
  if (!slash) return;
  int dir_len = (int)(slash - argv0); /* argv0's directory: "build/examples" */
  const char *up = NULL;              /* its last component: "/examples" */
  for (const char *c = argv0; c < slash; c++)
    if (*c == '/') up = c;
  if (up && strncmp(up + 1, ".", (size_t)(slash - up - 1)) != 0)
    snprintf(report_tool, sizeof report_tool, "%.*s/tools/ttft-report", (int)(up - argv0), argv0);
  else if (!up && strncmp(argv0, ".", (size_t)dir_len) != 0 && strncmp(argv0, "..", (size_t)dir_len) != 0)
    snprintf(report_tool, sizeof report_tool, "tools/ttft-report");
  else
    snprintf(report_tool, sizeof report_tool, "%.*s/../tools/ttft-report", dir_len, argv0);
  FILE *f = fopen(report_tool, "rb");
  if (f) {
    fclose(f);
    return;
  }
  strcpy(report_tool, "ttft-report");
}

static void save_snapshot(const ttft_snapshot *s, const char *path) {
  long n = ttft_snapshot_encode(s, NULL, 0);
  if (n < 0) return;
  unsigned char *buf = malloc((size_t)n);
  ttft_snapshot_encode(s, buf, (size_t)n);
  FILE *f = fopen(path, "wb");
  if (f) {
    fwrite(buf, 1, (size_t)n, f);
    fclose(f);
    printf("snapshot written to %s (%ld bytes)\n", path, n);
  }
  free(buf);
}

/* A wider batch: more tokens per second for the GPU, slower typing for
 * each user. Same arrival process, three batch widths. The load (8 req/s,
 * ~1.2k output tokens/s) overwhelms the narrow widths (a width of 4 serves
 * ~500 tokens/s at most, 8 ~850) and the widest (~1.6k tokens/s at 32)
 * serves it: one width below capacity, to compare with those above.
 * A width is over capacity when it served fewer tokens/s than the
 * requests asked for (their output lengths over the arrival window) and
 * its queue did not drain: more than a tenth of the requests never got a
 * first token (tokens/s alone is not enough: below capacity it still
 * trails the offered load a little, the tokens of the streams cut off at
 * the end or cancelled mid-stream). There requests queue without end and
 * TTFT grows without bound. */
static void batch_experiment(req *reqs) {
  static const int widths[] = {4, 8, 32};
  enum { NW = sizeof widths / sizeof widths[0] };
  const double seconds = 2.0, rate = 8.0; /* above the narrow widths' capacity, below the widest's */
  double offered[NW];
  int over[NW];
  uint64_t asked = 0, begun = 0;
  printf("\nBatch-width experiment: each width gets %.1f s of arrivals at %.0f req/s (short prompts,"
         " 1 worker)\n",
         seconds, rate);
  printf("  %-6s %10s %10s %10s %10s %16s\n", "batch", "tokens/s", "TPOT p50", "TPOT p99", "TTFT p50",
         "no first token");
  printf("  %-6s %10s\n", "", "(capacity)");
  for (size_t i = 0; i < NW; i++) {
    engine e;
    memset(&e, 0, sizeof e);
    e.reg = make_registry(&e.chat, &e.batch_cls);
    e.batch = widths[i];
    e.workers = 1;
    e.seconds = seconds;
    e.rate = rate;
    e.prompts = "short";
    e.seed = opt.seed;
    e.slowdown = opt.slowdown;
    e.reqs = reqs;
    run_engine(&e);
    ttft_snapshot *s = ttft_snapshot_take(e.reg);
    uint64_t a, b;
    ttft_snapshot_interval(s, &a, &b);
    double tps = (double)ttft_snapshot_counter(s, TTFT_COUNTER_TOKENS) / ((double)(b - a) / 1e9);
    /* what the clients asked for: every request's output length */
    uint32_t n = atomic_load(&e.nreq);
    asked = 0;
    for (uint32_t k = 0; k < n; k++) asked += reqs[k].out_len;
    begun = ttft_snapshot_counter(s, TTFT_COUNTER_BEGUN);
    offered[i] = (double)asked / seconds;
    uint64_t tpot = ttft_snapshot_quantile(s, TTFT_METRIC_TPOT, 0.5);
    uint64_t no_token = ttft_snapshot_counter(s, TTFT_COUNTER_ABANDONED);
    over[i] = tps < offered[i] && no_token * 10 > begun;
    char c1[32], c2[32], c3[32], gave_up[48];
    fmt_dur(c1, sizeof c1, (double)tpot);
    fmt_dur(c2, sizeof c2, (double)ttft_snapshot_quantile(s, TTFT_METRIC_TPOT, 0.99));
    fmt_dur(c3, sizeof c3, (double)ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 0.5));
    snprintf(gave_up, sizeof gave_up, "%llu of %llu", (unsigned long long)no_token, (unsigned long long)begun);
    printf("  %-6d %10.0f", widths[i], tps);
    print_right(c1, 11);
    print_right(c2, 11);
    print_right(c3, 11);
    print_right(gave_up, 17);
    printf("\n");
    ttft_snapshot_free(s);
    ttft_registry_free(e.reg);
  }
  printf("  tokens/s is the replica's capacity view; TPOT is what each user feels.\n");
  /* the same seed draws the same requests for every width: one offered load */
  printf("  offered load: %.0f tokens/s (%llu requests asked for %llu output tokens in %.1f s)\n",
         offered[NW - 1], (unsigned long long)begun, (unsigned long long)asked, seconds);
  char list[128] = "", below[128] = "";
  size_t len = 0, blen = 0;
  for (size_t i = 0; i < NW; i++) {
    if (over[i]) len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? ", " : "", widths[i]);
    else blen += (size_t)snprintf(below + blen, sizeof below - blen, "%s%d", blen ? ", " : "", widths[i]);
  }
  if (blen)
    printf("  below capacity: batch %s (the queue drained: nearly every request got a first token,\n"
           "  and TTFT stays near one prefill): tokens/s there is the load served, not the width's limit.\n",
           below);
  if (len)
    printf("  over capacity: batch %s (tokens/s below the offered load, and more than a tenth of\n"
           "  the requests never got a first token). There requests arrive faster than they finish:\n"
           "  they queue, and TTFT grows without bound. The TTFT column counts only the requests that\n"
           "  got a token; those that gave up first are under \"no first token\".\n",
           list);
}

/* The capacity sweep (--capacity DIR): one batch width, rising arrival
 * rates, each run a fresh registry whose snapshot goes to DIR; then
 * ttft-report --capacity reads the runs. Chat's token deadline is its
 * TPOT budget (50 ms): a stream is fluid when it kept >= 90 % of its
 * tokens on time, slack carried forward. As the load rises, more prompts
 * are prefilled inside the decode steps: each long prompt makes one step
 * long for every running stream. A stream deep into its answer has built
 * slack and does not notice; one that just started misses deadlines,
 * while its TPOT (a mean over its whole answer) stays within budget. */
static int capacity_sweep(req *reqs, const char *dir) {
  static const double rates[] = {4, 8, 12, 16, 20, 24};
  enum { NR = sizeof rates / sizeof rates[0] };
  char cmd[8192];
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "ttft-demo: --capacity %s: %s\n", dir, strerror(errno));
    return 1;
  }
  int len = snprintf(cmd, sizeof cmd, "'%s' --capacity --class chat", report_tool);
  printf("capacity sweep: batch %d, %s prompts, 3.0 s of arrivals per rate, seed %llu; runs in %s/\n",
         opt.batch, opt.prompts, opt.seed, dir);
  for (size_t i = 0; i < NR; i++) {
    engine e;
    memset(&e, 0, sizeof e);
    e.reg = make_registry(&e.chat, &e.batch_cls);
    if (!e.reg) return 1;
    e.batch = opt.batch;
    e.workers = 1;
    e.seconds = 3.0;
    e.rate = rates[i];
    e.prompts = opt.prompts;
    e.seed = opt.seed;
    e.slowdown = opt.slowdown;
    e.reqs = reqs;
    printf("  %4.0f req/s ...", rates[i]);
    fflush(stdout);
    run_engine(&e);
    ttft_snapshot *s = ttft_snapshot_take(e.reg);
    char path[4096];
    snprintf(path, sizeof path, "%s/run-%02.0f.ttfs", dir, rates[i]);
    save_snapshot(s, path);
    if (len > 0 && (size_t)len < sizeof cmd)
      len += snprintf(cmd + len, sizeof cmd - (size_t)len, " '%s'", path);
    ttft_snapshot_free(s);
    ttft_registry_free(e.reg);
  }
  printf("\n%s\n", cmd);
  fflush(stdout);
  if (len <= 0 || (size_t)len >= sizeof cmd) return 1;
  int rc = system(cmd);
  return rc == 0 ? 0 : 1;
}

/* ------------------------------------------------ why streams stall
 * An engine model in virtual time (no sleeping: a few hundred ms of CPU
 * for minutes of serving), one continuous-batching loop, instrumented as
 * docs/integration.md says: ttft_engine_step per iteration before its
 * tokens, PREEMPTED / RESUMED marks, ttft_step_emitted. It injects four
 * kinds of trouble and knows, for every stall, which one caused it:
 *  - long prompts (3 % of requests, ~20k tokens) join the running decodes:
 *    their prefill makes one step ~0.8 s long;
 *  - KV pressure: the KV cache's free room shrinks for 0.7-1.5 s (another
 *    tenant, an adapter load) and the scheduler preempts the youngest
 *    running sequences until what is left fits; they come back when it
 *    fits again and recompute their context (their own prefill);
 *  - the scheduler skips low-priority sequences for 0.7-1.3 s (a priority
 *    burst): steps run without them;
 *  - the whole process freezes for 1-2.5 s between two steps (GC, a host
 *    stall, SIGSTOP).
 * Ground truth: every instant of a sequence's gap is charged to what held
 * it: frozen (all), preempted (the sequence's whole steps while evicted),
 * the prefill part of a step carrying other requests' prompts (it delays
 * every decode, in the batch or skipped), skipped by the scheduler (the
 * rest of a step it sat out); the ordinary step is charged to nothing. A
 * stall's injected cause is the one charged most. Step costs jitter by
 * ~10 % and the host work between steps by ~1.5 ms, as on a real server. The library's cause is
 * read back with ttft_seq_stats (last_stall_cause) right after the token
 * that closed the gap. Returns 1 when every cause was recognised for at
 * least 95 % of its stalls. */
enum { CE_IDLE, CE_PREEMPTED, CE_SKIPPED, CE_PREFILL, CE_N, CE_NONE = CE_N };
typedef struct cseq {
  ttft_seq h;
  int state; /* 0 waiting, 1 running, 2 preempted, 3 done */
  int low;   /* low priority: skipped during a priority burst */
  uint32_t prompt, out_len, emitted, prefill_left;
  uint64_t t_last;     /* its last token (0: none yet) */
  uint64_t charge[CE_N];
} cseq;

#define CE_SEQS 4096
#define CE_STEP_BASE (12 * MS)
#define CE_STEP_PER_SEQ 250000u /* ns per running sequence */
#define CE_PREFILL_NS 40000u    /* ns per prompt token (25k tokens/s) */
#define CE_KV 48000u            /* KV cache, tokens */

static int cause_experiment(double seconds, uint64_t seed, int verbose) {
  static cseq q[CE_SEQS];
  memset(q, 0, sizeof q);
  uint64_t saved = rng_state;
  rng_state = seed * UINT64_C(0x9E3779B97F4A7C15) + 77;
  ttft_registry *r = ttft_registry_new(NULL); /* one class, 500 ms stall budget */
  if (!r) return 0;
  const uint64_t budget = 500 * MS, T0 = ttft_now_ns(), T1 = T0 + (uint64_t)(seconds * 1e9);
  uint64_t vt = T0, next_arrival = T0, next_freeze = T0 + (uint64_t)(expo(20) * 1e9);
  uint64_t next_spike = T0 + (uint64_t)(expo(8) * 1e9), spike_end = 0, spike_kv = 0;
  uint64_t next_burst = T0 + (uint64_t)(expo(15) * 1e9), burst_end = 0;
  uint32_t nseq = 0;
  uint64_t stalls[CE_N + 1] = {0}, agree[CE_N + 1] = {0}, said[CE_N + 1][TTFT_STALL_CAUSE_COUNT];
  memset(said, 0, sizeof said);
  ttft_seq out[CE_SEQS];
  uint32_t outi[CE_SEQS];
  while (vt < T1 || nseq == 0) {
    /* arrivals up to now */
    while (next_arrival <= vt && nseq < CE_SEQS) {
      cseq *s = &q[nseq++];
      int lng = urand() < 0.03;
      double p = lng ? lognormal(20000, 0.15) : lognormal(400, 0.7);
      s->prompt = (uint32_t)(p < 16 ? 16 : p > 30000 ? 30000 : p);
      double o = lognormal(120, 0.6);
      s->out_len = (uint32_t)(o < 8 ? 8 : o > 1000 ? 1000 : o);
      s->low = urand() < 0.4;
      ttft_request rq;
      ttft_request_init(&rq);
      rq.prompt_tokens = s->prompt;
      s->h = ttft_begin_ex(r, &rq, next_arrival);
      next_arrival += (uint64_t)(expo(1.0 / 4.0) * 1e9);
    }
    /* a whole-process freeze between two steps */
    if (vt >= next_freeze) {
      uint64_t d = (uint64_t)((1.0 + 1.5 * urand()) * 1e9);
      for (uint32_t i = 0; i < nseq; i++)
        if (q[i].state == 1 || q[i].state == 2) q[i].charge[CE_IDLE] += d;
      vt += d;
      next_freeze = vt + (uint64_t)(expo(20) * 1e9);
      continue;
    }
    if (vt >= next_spike && !spike_end) { /* KV pressure */
      spike_kv = 40000 + (uint64_t)(urand() * 6000);
      spike_end = vt + (uint64_t)((0.7 + 0.8 * urand()) * 1e9);
      next_spike = spike_end + (uint64_t)(expo(8) * 1e9);
    }
    if (spike_end && vt >= spike_end) spike_end = 0, spike_kv = 0;
    if (vt >= next_burst && !burst_end) {
      burst_end = vt + (uint64_t)((0.7 + 0.6 * urand()) * 1e9);
      next_burst = burst_end + (uint64_t)(expo(15) * 1e9);
    }
    if (burst_end && vt >= burst_end) burst_end = 0;
    /* KV accounting: preempt the youngest running sequences until it fits */
    uint64_t used = spike_kv;
    for (uint32_t i = 0; i < nseq; i++)
      if (q[i].state == 1) used += q[i].prompt + q[i].emitted;
    for (uint32_t i = nseq; i-- > 0 && used > CE_KV;) {
      if (q[i].state != 1) continue;
      q[i].state = 2;
      used -= q[i].prompt + q[i].emitted;
      ttft_mark(r, q[i].h, TTFT_PHASE_PREEMPTED, vt);
    }
    /* resume the preempted (oldest first), then admit, while it fits */
    for (uint32_t i = 0; i < nseq; i++) {
      if (q[i].state == 2 && used + q[i].prompt + q[i].emitted <= CE_KV) {
        q[i].state = 1;
        used += q[i].prompt + q[i].emitted;
        q[i].prefill_left = q[i].prompt + q[i].emitted; /* recompute */
        ttft_mark(r, q[i].h, TTFT_PHASE_RESUMED, vt);
      }
    }
    for (uint32_t i = 0; i < nseq; i++) {
      if (q[i].state == 0 && q[i].h && used + q[i].prompt <= CE_KV) {
        q[i].state = 1;
        used += q[i].prompt;
        q[i].prefill_left = q[i].prompt;
        ttft_mark(r, q[i].h, TTFT_PHASE_SCHEDULED, vt);
      }
    }
    /* the batch: everything running, but low priority sits out a burst
     * (unless nothing else would run) */
    int any_high = 0;
    for (uint32_t i = 0; i < nseq; i++) any_high |= q[i].state == 1 && !q[i].low;
    if (burst_end && !any_high) burst_end = 0;
    ttft_step_info info;
    ttft_step_info_init(&info);
    uint32_t nrun = 0, n = 0;
    for (uint32_t i = 0; i < nseq; i++) {
      cseq *s = &q[i];
      if (s->state != 1) continue;
      nrun++;
      if (burst_end && s->low && !s->prefill_left) continue; /* skipped */
      if (s->prefill_left) {
        info.prefill_tokens += s->prefill_left;
      } else {
        info.decode_seqs++;
      }
      outi[n] = i;
      out[n++] = s->h;
    }
    if (!nrun) { /* nothing to do: the engine waits for the next arrival */
      vt = next_arrival > vt ? next_arrival : vt + MS;
      continue;
    }
    /* step cost, with 10 % jitter (kernels, sampling, clocks) */
    double jit = lognormal(1.0, 0.1);
    uint64_t base = (uint64_t)((double)(CE_STEP_BASE + (uint64_t)nrun * CE_STEP_PER_SEQ) * jit);
    uint64_t dur = base + (uint64_t)((double)info.prefill_tokens * CE_PREFILL_NS * jit);
    uint64_t host = (uint64_t)(expo(1.5) * MS); /* host work after the step: detokenize, schedule */
    ttft_engine_step(r, &info, vt, vt + dur);
    /* the ground truth of this step, per sequence that waits in it */
    for (uint32_t i = 0; i < nseq; i++) {
      cseq *s = &q[i];
      if (s->state == 2) {
        s->charge[CE_PREEMPTED] += dur + host;
      } else if (s->state == 1) {
        uint64_t own = s->prefill_left;
        uint64_t others = info.prefill_tokens - own;
        if (own && s->t_last) s->charge[CE_PREEMPTED] += dur; /* its recompute */
        else s->charge[CE_PREFILL] += (uint64_t)((double)others * CE_PREFILL_NS * jit);
        if (burst_end && s->low && !own) s->charge[CE_SKIPPED] += base + host;
      }
    }
    vt += dur;
    ttft_step_emitted(r, out, NULL, n, vt);
    for (uint32_t k = 0; k < n; k++) {
      cseq *s = &q[outi[k]];
      s->prefill_left = 0;
      if (s->t_last && vt - s->t_last > budget) { /* a stall: compare */
        int truth = CE_NONE;
        uint64_t most = 0;
        for (int c = 0; c < CE_N; c++)
          if (s->charge[c] > most) most = s->charge[c], truth = c;
        ttft_seq_info si = {.struct_size = sizeof si};
        int lib = ttft_seq_stats(r, s->h, &si) == TTFT_OK ? si.last_stall_cause : -1;
        static const int expect[CE_N + 1] = {TTFT_STALL_ENGINE_IDLE, TTFT_STALL_PREEMPTED,
                                             TTFT_STALL_NOT_SCHEDULED, TTFT_STALL_PREFILL, -2};
        stalls[truth]++;
        agree[truth] += lib == expect[truth];
        if (lib >= 0 && lib < TTFT_STALL_CAUSE_COUNT) said[truth][lib]++;
      }
      memset(s->charge, 0, sizeof s->charge);
      s->t_last = vt;
      if (++s->emitted >= s->out_len) {
        ttft_stream_end(r, s->h, TTFT_COMPLETED, vt);
        s->state = 3;
      }
    }
    vt += host;
    if (vt >= T1 && nseq < CE_SEQS) next_arrival = UINT64_MAX; /* drain */
    int live = 0;
    for (uint32_t i = 0; i < nseq && !live; i++) live = q[i].state != 3;
    if (vt >= T1 && !live) break;
  }
  static const char *const names[CE_N + 1] = {"engine freeze", "KV preemption", "not scheduled",
                                              "long prefill", "(nothing)"};
  static const char *const lib_names[CE_N] = {"engine_idle", "preempted", "not_scheduled", "prefill"};
  int ok = 1;
  if (verbose) {
    printf("\nWhy streams stall: an engine model (continuous batching, %.0f s of virtual time, %u\n"
           "requests, seed %llu) injects trouble; the library names each stall's cause\n",
           seconds, nseq, (unsigned long long)seed);
    printf("  %-15s %7s  %-15s %7s %8s   %s\n", "injected", "stalls", "library says", "agrees", "share",
           "otherwise");
  }
  for (int c = 0; c <= CE_N; c++) {
    if (c == CE_N && !stalls[c]) continue;
    double share = stalls[c] ? 100.0 * (double)agree[c] / (double)stalls[c] : 0.0;
    if (c < CE_N && (stalls[c] == 0 || share < 95.0)) ok = 0;
    if (c == CE_N) ok = 0; /* a stall nothing injected: the model is wrong */
    if (!verbose) continue;
    char other[160] = "";
    size_t len = 0;
    for (int k = 0; k < TTFT_STALL_CAUSE_COUNT; k++) {
      if (c < CE_N && !strcmp(ttft_stall_cause_name((ttft_stall_cause)k), lib_names[c])) continue;
      if (said[c][k])
        len += (size_t)snprintf(other + len, sizeof other - len, "%s%s %llu", len ? ", " : "",
                                ttft_stall_cause_name((ttft_stall_cause)k), (unsigned long long)said[c][k]);
    }
    printf("  %-15s %7llu  %-15s %7llu %7.1f %%   %s\n", names[c], (unsigned long long)stalls[c],
           c < CE_N ? lib_names[c] : "-", (unsigned long long)agree[c], share, len ? other : "-");
  }
  if (verbose) {
    ttft_snapshot *s = ttft_snapshot_take(r);
    char a[32], b[32];
    fmt_dur(a, sizeof a, (double)ttft_snapshot_engine_step_quantile(s, 0, 0.99));
    fmt_dur(b, sizeof b, (double)ttft_snapshot_engine_step_quantile(s, 1, 0.99));
    printf("  engine steps: p99 %s without prefill, %s with (llm_engine_step_seconds)\n", a, b);
    printf("  %s: every injected cause is named for >= 95 %% of its stalls\n", ok ? "PASS" : "FAIL");
    ttft_snapshot_free(s);
  }
  ttft_registry_free(r);
  rng_state = saved;
  return ok;
}

/* Why 127.0.0.1:port cannot be served, as the system says it ("Address
 * already in use"), found by binding a socket of our own the way a server
 * does; NULL when the bind works (then the endpoint failed for another
 * reason, which ttft_strerror names). */
static const char *bind_problem(int port) {
  static char why[128];
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return strerror(errno);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const char *res = NULL;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    snprintf(why, sizeof why, "%s", strerror(errno));
    res = why;
  }
  close(fd);
  return res;
}

/* What to run next, printed last so that it is what the screen ends on. */
static void print_next(const ttft_http *srv) {
  printf("\nNext:\n");
  if (opt.snapshot) {
    printf("  %s %s                 # this report again, from the snapshot\n", report_tool, opt.snapshot);
    printf("  %s --svg cdf.svg %s   # CDF plots of TTFT, TPOT, ITL\n", report_tool, opt.snapshot);
  } else {
    printf("  ttft-demo --snapshot demo.ttfs    # save the run for %s (docs/ttft-report.md)\n", report_tool);
  }
  if (srv && opt.hold > 0) {
    printf("  curl http://127.0.0.1:%d/metrics   # while the endpoint is held open\n", ttft_http_port(srv));
    printf("  ttft-top http://127.0.0.1:%d       # its latency live, in a terminal (docs/ttft-top.md)\n",
           ttft_http_port(srv));
  } else if (srv) {
    int port = opt.port ? opt.port : 9464;
    printf("  ttft-demo --port %d --seconds 600 --hold 60 &   # a server that keeps running, then:\n"
           "  ttft-top http://127.0.0.1:%d   # its latency live, in a terminal (tools/ttft-top,\n"
           "    docs/ttft-top.md); or curl http://127.0.0.1:%d/metrics\n",
           port, port, port);
  }
  fflush(stdout);
}

static int parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--seconds") && v) opt.seconds = atof(argv[++i]);
    else if (!strcmp(a, "--batch") && v) opt.batch = atoi(argv[++i]);
    else if (!strcmp(a, "--workers") && v) opt.workers = atoi(argv[++i]);
    else if (!strcmp(a, "--rate") && v) opt.rate = atof(argv[++i]);
    else if (!strcmp(a, "--prompts") && v) opt.prompts = argv[++i];
    else if (!strcmp(a, "--hold") && v) opt.hold = atof(argv[++i]);
    else if (!strcmp(a, "--seed") && v) opt.seed = strtoull(argv[++i], NULL, 0);
    else if (!strcmp(a, "--slowdown") && v) opt.slowdown = atof(argv[++i]);
    else if (!strcmp(a, "--snapshot") && v) opt.snapshot = argv[++i];
    else if (!strcmp(a, "--capacity") && v) opt.capacity = argv[++i];
    else if (!strcmp(a, "--port") && v) {
      char *end;
      long p = strtol(argv[++i], &end, 10);
      if (*end || end == argv[i] || p < 0 || p > 65535) {
        fprintf(stderr, "ttft-demo: bad --port '%s' (0 to 65535; 0 = any free port)\n", argv[i]);
        return -1;
      }
      opt.port = (int)p;
    }
    else if (!strcmp(a, "--no-experiment")) opt.experiment = 0;
    else if (!strcmp(a, "--causes")) opt.causes_only = 1;
    else if (!strcmp(a, "--no-http")) opt.http = 0;
    else if (!strcmp(a, "--json")) opt.json = 1;
    else {
      fprintf(stderr,
              "usage: ttft-demo [--seconds S] [--batch N] [--workers N] [--rate R]\n"
              "                 [--prompts short|mixed|long] [--seed N] [--slowdown X]\n"
              "                 [--no-experiment] [--port N | --no-http] [--hold S]\n"
              "                 [--snapshot FILE] [--json] [--causes] [--capacity DIR]\n");
      return -1;
    }
  }
  if (opt.seconds <= 0 || opt.batch < 1 || opt.workers < 1 || opt.rate <= 0 ||
      !(opt.slowdown > 0 && opt.slowdown <= 100) ||
      (strcmp(opt.prompts, "short") && strcmp(opt.prompts, "mixed") && strcmp(opt.prompts, "long"))) {
    fprintf(stderr, "ttft-demo: bad option value\n");
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (parse_args(argc, argv)) return 2;
  /* --causes: only the stall-cause engine model; exit 0 when every cause
   * was recognised for >= 95 % of its stalls (ctest example_demo_causes) */
  if (opt.causes_only) return cause_experiment(300.0, opt.seed, 1) ? 0 : 1;
  find_report_tool(argv[0]);
  req *reqs = calloc(MAX_REQ, sizeof *reqs);
  if (opt.capacity) {
    int rc = reqs ? capacity_sweep(reqs, opt.capacity) : 1;
    free(reqs);
    return rc;
  }
  engine e;
  memset(&e, 0, sizeof e);
  e.reg = make_registry(&e.chat, &e.batch_cls);
  if (!reqs || !e.reg) return 1;
  e.batch = opt.batch;
  e.workers = opt.workers;
  e.seconds = opt.seconds;
  e.rate = opt.rate;
  e.prompts = opt.prompts;
  e.seed = opt.seed;
  e.slowdown = opt.slowdown;
  e.reqs = reqs;

  ttft_http *srv = NULL;
  if (opt.http) {
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", opt.port);
    int rc = ttft_http_start(e.reg, addr, &srv);
    if (rc != TTFT_OK) {
      /* never move to another port silently: a scraper configured for
       * this one would read nothing, or another process's metrics */
      const char *why = bind_problem(opt.port);
      fprintf(stderr,
              "ttft-demo: ERROR: cannot serve http://%s/metrics: %s\n"
              "  another process may hold port %d (a ttft-demo still running with --hold?).\n"
              "  Choose a port with --port N (--port 0: any free one), or run without the\n"
              "  endpoint: --no-http\n",
              addr, why ? why : ttft_strerror(rc), opt.port);
      ttft_registry_free(e.reg);
      free(reqs);
      return 1;
    }
    printf("serving http://127.0.0.1:%d/metrics  /report  /report.json  /snapshot"
           "   (watch it live: ttft-top http://127.0.0.1:%d)\n",
           ttft_http_port(srv), ttft_http_port(srv));
  }
  if (opt.workers > 1)
    printf("%d engine loops share one registry: engine steps are not reported, stall causes are"
           " \"unknown\"\n",
           opt.workers);
  char slow[48] = "";
  if (opt.slowdown != 1.0) snprintf(slow, sizeof slow, ", engine steps %.2fx as long", opt.slowdown);
  printf("simulating %.1f s: %d worker%s, batch %d, %.0f req/s, %s prompts, classes chat+batch, seed %llu%s\n\n",
         opt.seconds, opt.workers, opt.workers == 1 ? "" : "s", opt.batch, opt.rate, opt.prompts, opt.seed,
         slow);
  fflush(stdout);
  uint64_t t_run = ttft_now_ns();
  run_engine(&e);
  /* the report's window is the registry's age: the arrivals, then the
   * drain (up to 1.5 s, after which running streams are cut off as
   * cancelled); said on screen, or "report over 5.38 s" after
   * "simulating 4.0 s" reads like a bug */
  double ran = (double)(ttft_now_ns() - t_run) / 1e9;
  printf("arrivals stopped after %.1f s; the streams still running then drained for %.2f s more\n"
         "(cut off as cancelled after 1.5 s): the report covers both, the registry's whole age\n\n",
         opt.seconds, ran > opt.seconds ? ran - opt.seconds : 0.0);
  fflush(stdout);

  ttft_snapshot *s = ttft_snapshot_take(e.reg);
  print_snapshot(s, opt.json ? TTFT_FORMAT_JSON : TTFT_FORMAT_TEXT);
  if (opt.snapshot) save_snapshot(s, opt.snapshot);
  ttft_snapshot_free(s);

  if (opt.experiment) {
    batch_experiment(reqs);
    (void)cause_experiment(300.0, opt.seed, 1);
  }
  print_next(srv);
  if (srv && opt.hold > 0) {
    printf("\nholding the endpoint open for %.0f s: curl http://127.0.0.1:%d/metrics\n", opt.hold,
           ttft_http_port(srv));
    fflush(stdout);
    sleep_ns((uint64_t)(opt.hold * 1e9));
  }
  ttft_http_stop(srv);
  ttft_registry_free(e.reg);
  free(reqs);
  return 0;
}
