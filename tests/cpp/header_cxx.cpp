// header_cxx.cpp — a C++ translation unit that includes only ttft.h (not
// ttft.hpp): the C API is usable from C++ as it is, with C linkage.
#include <ttft.h>

#include <cstdio>
#include <cstring>
#include <type_traits>

static_assert(std::is_trivially_copyable<ttft_config>::value, "C struct");
static_assert(std::is_standard_layout<ttft_request>::value, "C struct");
static_assert(sizeof(ttft_seq) == 8, "64-bit handle");
static_assert(TTFT_VERSION_NUMBER == TTFT_VERSION_MAJOR * 10000 + TTFT_VERSION_MINOR * 100 + TTFT_VERSION_PATCH, "");

int main() {
  ttft_config cfg;
  ttft_config_init(&cfg);
  cfg.max_inflight = 4;
  ttft_registry *r = ttft_registry_new(&cfg);
  if (r == nullptr) return 1;
  ttft_request req;
  ttft_request_init(&req);
  req.prompt_tokens = 12;
  const ttft_seq s = ttft_begin_ex(r, &req, 1000);
  int rc = ttft_mark(r, s, TTFT_PHASE_SCHEDULED, 1100);
  rc |= token_emitted(r, s, 2, 1300);  // header alias, usable from C++
  rc |= stream_end(r, s, TTFT_CANCELLED, 1400);
  ttft_snapshot *snap = ttft_snapshot_take(r);
  const unsigned long long cancelled = ttft_snapshot_counter(snap, TTFT_COUNTER_CANCELLED);
  const unsigned long long ttft = ttft_snapshot_quantile(snap, TTFT_METRIC_TTFT, 1.0);
  ttft_snapshot_free(snap);
  ttft_registry_free(r);
  std::printf("header_cxx (C++%ld): rc=%d cancelled=%llu ttft=%llu\n",
              static_cast<long>(__cplusplus / 100 % 100), rc, cancelled, ttft);
  if (rc != TTFT_OK || cancelled != 1 || ttft != 300) {
    std::fprintf(stderr, "expected rc=0 cancelled=1 ttft=300\n");
    return 1;
  }
  return std::strcmp(ttft_err_name(TTFT_OK), "TTFT_OK") == 0 ? 0 : 1;
}
