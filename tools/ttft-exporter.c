/*
 * ttft-exporter — serve a shared directory's gather over HTTP, for stacks
 * where no server process should (docs/multiprocess.md, docs/http.md).
 *
 *   ttft-exporter --dir D [--listen ADDR] [--by-process]
 *
 * Opens a gather of D (ttft_gather_open_msg), serves it with
 * ttft_http_start_gather (/metrics, /report, /report.json, /snapshot) and
 * waits for SIGINT or SIGTERM, then stops the server, closes the gather
 * and exits 0. Every other signal keeps its default action. Public API
 * only. Exit: 0 stopped by a signal (or --help/--version), 1 usage,
 * 2 the directory cannot be gathered or the address cannot be served,
 * each with one line on stderr saying why.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "ttft.h"

#define DEFAULT_LISTEN "127.0.0.1:9464"

static const char *g_prog = "ttft-exporter";

static void usage(FILE *f) {
  fprintf(f,
          "usage: %s --dir DIR [--listen ADDR] [--by-process]\n"
          "Serve every process that publishes into DIR (ttft_config.shared_dir) as one\n"
          "endpoint: /metrics (Prometheus text, OpenMetrics or protobuf by Accept),\n"
          "/report, /report.json and /snapshot, until SIGINT or SIGTERM.\n"
          "\n"
          "  --dir DIR        the shared directory (yours, not group- or world-writable)\n"
          "  --listen ADDR    host:port, [v6]:port or :port (127.0.0.1); port 0 picks a\n"
          "                   free one; default " DEFAULT_LISTEN "\n"
          "  --by-process     a process label on every series (per-rank dashboards);\n"
          "                   default: one merged view\n"
          "  -h, --help       this text\n"
          "  --version        the version of ttft-exporter (and of the libttft it uses)\n"
          "\n"
          "exit status: 0 stopped by SIGINT/SIGTERM, 1 usage, 2 DIR cannot be gathered\n"
          "or ADDR cannot be served (the reason on stderr).\n",
          g_prog);
}

static int usage_error(const char *what, const char *arg) {
  fprintf(stderr, "%s: %s%s%s\nTry '%s --help'.\n", g_prog, what, arg ? " " : "", arg ? arg : "",
          g_prog);
  return 1;
}

/* "http://HOST:PORT" of addr as served on port: the host part as given
 * (":9464" is 127.0.0.1, as ttft_http_start reads it). */
static void url_of(const char *addr, int port, char *out, size_t cap) {
  const char *colon = addr[0] == '[' ? strstr(addr, "]:") : strrchr(addr, ':');
  size_t hlen = colon ? (size_t)(colon - addr) + (addr[0] == '[') : 0;
  if (hlen == 0) snprintf(out, cap, "http://127.0.0.1:%d", port);
  else snprintf(out, cap, "http://%.*s:%d", (int)hlen, addr, port);
}

int main(int argc, char **argv) {
  const char *dir = NULL, *listen_addr = DEFAULT_LISTEN;
  unsigned flags = 0;
  char msg[512], url[128];
  ttft_gather *g;
  ttft_http *srv = NULL;
  sigset_t stop;
  int i, sig = 0, rc;

  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--version")) {
      printf("ttft-exporter (libttft) %s\n", ttft_version_string());
      return 0;
    } else if (!strcmp(a, "--dir") || !strcmp(a, "--listen")) {
      if (++i >= argc) return usage_error(!strcmp(a, "--dir") ? "--dir needs a directory"
                                                               : "--listen needs an address", NULL);
      if (!strcmp(a, "--dir")) dir = argv[i];
      else listen_addr = argv[i];
    } else if (!strcmp(a, "--by-process")) {
      flags |= TTFT_GATHER_BY_PROCESS;
    } else {
      return usage_error("unknown argument", a);
    }
  }
  if (!dir) return usage_error("--dir is required", NULL);

  /* Blocked before any thread starts (the server's thread blocks every
   * signal anyway): SIGINT and SIGTERM are only ever taken by sigwait.
   * Their disposition is reset too: one inherited as ignored (a shell
   * starts background jobs with SIGINT ignored) would be discarded, never
   * pending, and the exporter could not be stopped with it. */
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  if (sigprocmask(SIG_BLOCK, &stop, NULL) != 0) {
    perror(g_prog);
    return 2;
  }
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);

  g = ttft_gather_open_msg(dir, flags, msg, sizeof msg);
  if (!g) {
    fprintf(stderr, "%s: %s\n", g_prog, msg[0] ? msg : dir);
    return 2;
  }
  rc = ttft_http_start_gather(g, listen_addr, &srv, msg, sizeof msg);
  if (rc != TTFT_OK) {
    fprintf(stderr, "%s: %s\n", g_prog, msg[0] ? msg : ttft_strerror(rc));
    ttft_gather_close(g);
    return 2;
  }
  url_of(listen_addr, ttft_http_port(srv), url, sizeof url);
  printf("%s: serving %s on %s/metrics\n", g_prog, dir, url);
  fflush(stdout);

  while (sigwait(&stop, &sig) != 0) {}
  ttft_http_stop(srv); /* joins the thread: no take runs after it */
  ttft_gather_close(g);
  fprintf(stderr, "%s: stopped (%s)\n", g_prog, sig == SIGINT ? "SIGINT" : "SIGTERM");
  return 0;
}
