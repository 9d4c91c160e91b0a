/*
 * mksnap — write an encoded snapshot of a deterministic workload, for the
 * ttft-report tests (tests/tools/test_report.sh).
 *
 *   mksnap [--seed N] [--requests N] [--scale X] [--classes a,b,..] [--base64]
 *          OUT [OUT2]
 *
 * OUT2 (optional): record a second workload (seed + 1) into the same
 * registry afterwards and write that later snapshot too (for --delta).
 * Prints the TTFT count and p99 (ns) of each written snapshot on stdout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttft.h"
#include "workload.h"

static int write_snap(const ttft_snapshot *s, const char *path, int b64) {
  long n = b64 ? ttft_snapshot_encode_base64(s, NULL, 0) : ttft_snapshot_encode(s, NULL, 0);
  if (n < 0) return 1;
  char *buf = malloc((size_t)n + 1);
  if (!buf) return 1;
  if (b64) ttft_snapshot_encode_base64(s, buf, (size_t)n + 1);
  else ttft_snapshot_encode(s, buf, (size_t)n);
  FILE *f = fopen(path, "wb");
  int rc = !f;
  if (f) {
    if (b64) fprintf(f, "2024-01-01T00:00:00Z replica-0 ttft-snapshot=");
    rc |= fwrite(buf, 1, (size_t)n, f) != (size_t)n;
    if (b64) fputc('\n', f);
    rc |= fclose(f) != 0;
  }
  free(buf);
  printf("%s ttft_count=%llu ttft_p99=%llu\n", path,
         (unsigned long long)ttft_snapshot_count(s, TTFT_METRIC_TTFT),
         (unsigned long long)ttft_snapshot_quantile(s, TTFT_METRIC_TTFT, 0.99));
  return rc;
}

int main(int argc, char **argv) {
  wl_params p;
  wl_params_init(&p, 1, 500);
  static char classes[256] = "default";
  int b64 = 0, i = 1;
  for (; i < argc && argv[i][0] == '-' && argv[i][1] == '-'; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--base64")) {
      b64 = 1;
      continue;
    }
    if (i + 1 >= argc) return 1;
    const char *v = argv[++i];
    if (!strcmp(a, "--seed")) p.seed = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--requests")) p.requests = (unsigned)strtoul(v, NULL, 10);
    else if (!strcmp(a, "--scale")) p.scale = strtod(v, NULL);
    else if (!strcmp(a, "--classes")) snprintf(classes, sizeof classes, "%s", v);
    else return 1;
  }
  if (i >= argc) {
    fprintf(stderr, "usage: mksnap [--seed N] [--requests N] [--scale X] [--classes a,b] [--base64] OUT [OUT2]\n");
    return 1;
  }
  int nc = 0;
  for (char *tok = strtok(classes, ","); tok && nc < 4; tok = strtok(NULL, ",")) p.classes[nc++] = tok;
  for (int k = nc; k < 4; k++) p.classes[k] = NULL;

  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.model = "demo-7b";
  ttft_registry *r = ttft_registry_new(&cfg);
  if (!r) return 1;
  wl_add_classes(r, &p);
  uint64_t t = wl_play(r, &p);
  ttft_snapshot *s = ttft_snapshot_take(r);
  int rc = !s || write_snap(s, argv[i], b64);
  ttft_snapshot_free(s);
  if (!rc && i + 1 < argc) {
    p.seed++;
    p.t0 = t + 1000;
    wl_play(r, &p);
    s = ttft_snapshot_take(r);
    rc = !s || write_snap(s, argv[i + 1], b64);
    ttft_snapshot_free(s);
  }
  ttft_registry_free(r);
  return rc;
}
