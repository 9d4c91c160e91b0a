/*
 * replay_main.c — runs fuzz inputs through a fuzz target without libFuzzer:
 * every file named on the command line, and every file in every directory
 * named (sorted, so runs are reproducible). This is how the committed
 * corpora run as regression tests in plain `make test` builds, with any
 * compiler. Exit status: 0 when every input passed, 1 when an invariant
 * failed (the target exits), 2 when an input could not be read or a
 * directory was empty.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

const char *ttft_fuzz_current_input;

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "cannot open %s\n", path);
    return -1;
  }
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  for (;;) {
    if (!buf) {
      fclose(f);
      return -1;
    }
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    cap *= 2;
    buf = realloc(buf, cap);
  }
  fclose(f);
  /* an exact-size copy, so a read past the end is caught by ASan/valgrind */
  uint8_t *exact = malloc(n ? n : 1);
  if (!exact) {
    free(buf);
    return -1;
  }
  memcpy(exact, buf, n);
  free(buf);
  ttft_fuzz_current_input = path;
  LLVMFuzzerTestOneInput(exact, n);
  ttft_fuzz_current_input = NULL;
  free(exact);
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, long *count) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      char **nn = realloc(names, cap * sizeof *names);
      if (!nn) break;
      names = nn;
    }
    size_t len = strlen(dir) + strlen(e->d_name) + 2;
    names[n] = malloc(len);
    if (!names[n]) break;
    snprintf(names[n], len, "%s/%s", dir, e->d_name);
    n++;
  }
  closedir(d);
  qsort(names, n, sizeof *names, cmp_str);
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    struct stat st;
    if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
      if (run_file(names[i]) != 0) rc = -1;
      (*count)++;
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

int main(int argc, char **argv) {
  long count = 0;
  int rc = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      rc = 2;
      continue;
    }
    long before = count;
    if (S_ISDIR(st.st_mode)) {
      if (run_dir(argv[i], &count) != 0) rc = 2;
      if (count == before) {
        fprintf(stderr, "%s: empty corpus\n", argv[i]);
        rc = 2;
      }
    } else {
      if (run_file(argv[i]) != 0) rc = 2;
      count++;
    }
  }
  printf("%s: %ld input(s) replayed%s\n", argv[0], count, rc ? " (with errors)" : ", all invariants held");
  return rc;
}
