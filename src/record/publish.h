/*
 * publish.h — a registry's publisher (record/publish.c): what
 * ttft_registry_new, ttft_registry_free and the fork handlers of
 * registry.c call. The hooks never see any of it.
 * Layer: record (src/README.md).
 */
#ifndef TTFT_PUBLISH_H
#define TTFT_PUBLISH_H

#include "record/registry.h"

/* Start publishing r into c->shared_dir (c checked by config_problem):
 * identity, lock file and its lock, a first publish, the background
 * thread. A failed first publish or lock is counted, not fatal (the next
 * publish tries again). Sets r->pub. TTFT_OK or TTFT_ENOMEM. */
TTFT_HIDDEN int ttft__pub_start(ttft_registry *r, const ttft_config *c);

/* Stop r's publisher: the thread, a last publish flagged FINAL, then the
 * lock (the process is dead to gatherers from here on). No-op when r does
 * not publish. */
TTFT_HIDDEN void ttft__pub_stop(ttft_registry *r);

/* registry.c's pthread_atfork handlers call these: prepare first (before
 * its own locks), parent and child last. */
TTFT_HIDDEN void ttft__pub_atfork_prepare(void);
TTFT_HIDDEN void ttft__pub_atfork_parent(void);
TTFT_HIDDEN void ttft__pub_atfork_child(void);

#endif /* TTFT_PUBLISH_H */
