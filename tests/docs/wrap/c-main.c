/* c-main — a C fragment as the body of main(). It may use:
 *   reg, r   a registry (defaults) with one finished stream in it
 *   snap     a snapshot of it
 *   f        a scratch file (tmpfile)
 * and the C headers below. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ttft.h>

int main(void) {
  ttft_registry *reg = ttft_registry_new(NULL);
  if (!reg) return 1;
  ttft_registry *r = reg;
  ttft_seq seq0 = ttft_begin(reg, 1000000000u);
  ttft_token_emitted(reg, seq0, 1, 1040000000u);
  ttft_token_emitted(reg, seq0, 1, 1060000000u);
  ttft_stream_end(reg, seq0, TTFT_COMPLETED, 1070000000u);
  ttft_snapshot *snap = ttft_snapshot_take(reg);
  FILE *f = tmpfile();
  if (!snap || !f) return 1;
  {
    @SAMPLE@
  }
  (void)r;
  fclose(f);
  ttft_snapshot_free(snap);
  ttft_registry_free(reg);
  return 0;
}
