/* header_noshort.c — with TTFT_NO_SHORT_NAMES the header leaves the names
 * token_emitted and stream_end to the application. */
#define TTFT_NO_SHORT_NAMES
#include <ttft.h>

#include <stdio.h>

static int token_emitted(int x) { return x + 1; }
static const char *stream_end(void) { return "mine"; }

int main(void) {
  if (token_emitted(1) != 2 || stream_end()[0] != 'm') return 1;
  printf("header_noshort: ok (%s)\n", ttft_strerror(TTFT_OK));
  return 0;
}
