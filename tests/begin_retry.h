/* begin_retry.h — a begin that is retried when refused at capacity.
 *
 * By design a begin never waits inside a hook: when every slot is taken it
 * polls the reclaimer a bounded number of times, then refuses (0) and the
 * refusal is counted in TTFT_COUNTER_DROPPED. An ended slot serves again
 * only after every shard was seen outside a call, so on a loaded machine,
 * or under a sanitizer, a thread preempted inside a hook holds the slots
 * back for a while. Tests that are about something else than capacity
 * retry, boundedly, and count their refusals so that they can still
 * assert DROPPED exactly. */
#ifndef TTFT_TEST_BEGIN_RETRY_H
#define TTFT_TEST_BEGIN_RETRY_H

#include <sched.h>

#include "ttft.h"

/* ttft_begin_ex(r, q, t_ns) (q NULL: ttft_begin(r, t_ns)) tried up to
 * max_tries times, yielding the CPU between tries. The handle, or 0 when
 * every try was refused. *refusals (when not NULL) receives the number of
 * refused tries of this call. Thread-safe as ttft_begin is. */
static inline ttft_seq begin_retry(ttft_registry *r, const ttft_request *q, uint64_t t_ns,
                                   unsigned long max_tries, unsigned long *refusals) {
  ttft_seq s = 0;
  unsigned long refused = 0;
  while (refused < max_tries) {
    s = q ? ttft_begin_ex(r, q, t_ns) : ttft_begin(r, t_ns);
    if (s) break;
    refused++;
    sched_yield();
  }
  if (refusals) *refusals = refused;
  return s;
}

#endif
