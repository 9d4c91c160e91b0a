/*
 * deny_membarrier.h — a raw-BPF seccomp filter that makes membarrier(2)
 * return EPERM in every thread of the process from the moment it is
 * installed (SECCOMP_FILTER_FLAG_TSYNC), as a sandbox applied after
 * start-up does. Used by tests/test_barrier_fallback.c (the filter
 * installed mid-run: issue 18's fallback) and bench/ttft_bench.c
 * (--no-membarrier: the hooks' cost in fence mode). No libseccomp.
 * TTFT_HAVE_DENY_MEMBARRIER is defined where the filter exists (x86_64 and
 * aarch64 Linux). The filter cannot be removed: use it in a process of
 * its own.
 */
#ifndef TTFT_TESTS_DENY_MEMBARRIER_H
#define TTFT_TESTS_DENY_MEMBARRIER_H

#include <errno.h>
#include <stddef.h>

#if defined(__linux__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__x86_64__)
#define AUDIT_ARCH_THIS AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AUDIT_ARCH_THIS AUDIT_ARCH_AARCH64
#endif
#endif

#if defined(AUDIT_ARCH_THIS) && defined(__NR_membarrier) && defined(SECCOMP_FILTER_FLAG_TSYNC)
#define TTFT_HAVE_DENY_MEMBARRIER 1

/* membarrier(2) -> EPERM, in every thread of the process, from now on */
static int deny_membarrier(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_THIS, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_membarrier, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -errno;
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
    return -errno;
  return 0;
}

static int membarrier_works(void) { return syscall(__NR_membarrier, 0 /* QUERY */, 0, 0) > 0; }
#endif

#endif /* TTFT_TESTS_DENY_MEMBARRIER_H */
