/* top_source.c — ttft-top's two sources. The HTTP client is deliberately
 * small: one GET /snapshot per refresh on a fresh connection
 * ("Connection: close"), non-blocking sockets polled against one deadline
 * for the whole exchange, a status line, Content-Length or the end of the
 * stream, a bounded body. The library has no client and needs none. */
#include "top_source.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TOP_MAX_BODY (64u << 20) /* the endpoint's own bound on a response */
#define TOP_MAX_HEAD 16384u

struct top_source {
  char name[512];
  char host[256], port[16];
  int timeout_ms;
  ttft_gather *gather;
};

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int parse_url(top_source *s, const char *url, char *msg, size_t cap) {
  const char *p = url;
  if (strncmp(p, "http://", 7) == 0) p += 7;
  else if (strstr(p, "://")) {
    snprintf(msg, cap, "%s: only http:// URLs are read", url);
    return -1;
  }
  const char *host_end, *rest;
  if (*p == '[') { /* [v6]:port */
    host_end = strchr(p, ']');
    if (!host_end) {
      snprintf(msg, cap, "%s: unterminated [address]", url);
      return -1;
    }
    p++;
    rest = host_end + 1;
  } else {
    host_end = p + strcspn(p, ":/");
    rest = host_end;
  }
  size_t hl = (size_t)(host_end - p);
  if (hl == 0 || hl >= sizeof s->host) {
    snprintf(msg, cap, "%s: no host", url);
    return -1;
  }
  memcpy(s->host, p, hl);
  s->host[hl] = 0;
  snprintf(s->port, sizeof s->port, "80");
  if (*rest == ':') {
    rest++;
    size_t pl = strspn(rest, "0123456789");
    long port = pl && pl < 6 ? strtol(rest, NULL, 10) : -1;
    if (port <= 0 || port > 65535) {
      snprintf(msg, cap, "%s: bad port", url);
      return -1;
    }
    snprintf(s->port, sizeof s->port, "%ld", port);
    rest += pl;
  }
  if (*rest && strcmp(rest, "/") != 0 && strcmp(rest, "/snapshot") != 0) {
    snprintf(msg, cap, "%s: ttft-top reads /snapshot of an endpoint; give its base URL", url);
    return -1;
  }
  return 0;
}

top_source *top_source_open(const char *url, const char *dir, int timeout_ms, char *msg,
                            size_t cap) {
  if (cap) msg[0] = 0;
  top_source *s = calloc(1, sizeof *s);
  if (!s) {
    snprintf(msg, cap, "out of memory");
    return NULL;
  }
  s->timeout_ms = timeout_ms > 0 ? timeout_ms : 2000;
  if (dir) {
    /* by process: the merged view is the same; the parts tell which
     * processes are live (top_model.c, in flight per class) */
    s->gather = ttft_gather_open_msg(dir, TTFT_GATHER_BY_PROCESS, msg, cap);
    if (!s->gather) {
      free(s);
      return NULL;
    }
    snprintf(s->name, sizeof s->name, "dir %s", dir);
    return s;
  }
  if (parse_url(s, url, msg, cap) != 0) {
    free(s);
    return NULL;
  }
  snprintf(s->name, sizeof s->name, "%s", url);
  return s;
}

const char *top_source_name(const top_source *src) { return src->name; }

void top_source_close(top_source *src) {
  if (!src) return;
  ttft_gather_close(src->gather);
  free(src);
}

/* poll fd for ev until the deadline; 1 ready, 0 timed out, -1 error */
static int wait_fd(int fd, short ev, uint64_t deadline) {
  for (;;) {
    uint64_t t = now_ms();
    if (t >= deadline) return 0;
    struct pollfd pf = {fd, ev, 0};
    int rc = poll(&pf, 1, (int)(deadline - t));
    if (rc > 0) return 1;
    if (rc == 0) return 0;
    if (errno != EINTR) return -1;
  }
}

static int connect_by(const top_source *s, uint64_t deadline, char *msg, size_t cap) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int gai = getaddrinfo(s->host, s->port, &hints, &res);
  if (gai != 0) {
    snprintf(msg, cap, "%s: %s", s->host, gai_strerror(gai));
    return -1;
  }
  int fd = -1, last = 0;
  for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last = errno;
      continue;
    }
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    if (errno == EINPROGRESS) {
      int w = wait_fd(fd, POLLOUT, deadline);
      int soerr = 0;
      socklen_t sl = sizeof soerr;
      if (w == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0) break;
      last = w == 0 ? ETIMEDOUT : soerr ? soerr : errno;
    } else {
      last = errno;
    }
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) snprintf(msg, cap, "connect %s:%s: %s", s->host, s->port, strerror(last));
  return fd;
}

static int send_all(int fd, const char *p, size_t n, uint64_t deadline) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
    } else if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (wait_fd(fd, POLLOUT, deadline) != 1) return -1;
    } else {
      return -1;
    }
  }
  return 0;
}

/* The head's Content-Length, or -1 when there is none. */
static long long content_length(const char *head) {
  for (const char *l = strstr(head, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
    if (strncasecmp(l + 2, "Content-Length:", 15) == 0) {
      char *end;
      long long v = strtoll(l + 17, &end, 10);
      return v >= 0 ? v : -1;
    }
    if (l[2] == '\r') break;
  }
  return -1;
}

/* GET /snapshot; the body in *body (malloc'd), its length in *n. */
static int http_get(const top_source *s, unsigned char **body, size_t *n, char *msg, size_t cap) {
  uint64_t start = now_ms(), deadline = start + (uint64_t)s->timeout_ms;
  int fd = connect_by(s, deadline, msg, cap);
  if (fd < 0) return -1;
  char req[512];
  int rl = snprintf(req, sizeof req,
                    "GET /snapshot HTTP/1.1\r\nHost: %s%s%s:%s\r\nUser-Agent: ttft-top/%s\r\n"
                    "Accept: application/octet-stream\r\nConnection: close\r\n\r\n",
                    strchr(s->host, ':') ? "[" : "", s->host, strchr(s->host, ':') ? "]" : "",
                    s->port, ttft_version_string());
  if (send_all(fd, req, (size_t)rl, deadline) != 0) {
    snprintf(msg, cap, "send to %s:%s: %s", s->host, s->port,
             now_ms() >= deadline ? "timed out" : strerror(errno));
    close(fd);
    return -1;
  }
  size_t capb = 65536, len = 0;
  unsigned char *buf = malloc(capb + 1);
  long long want = -1; /* head + body, once the head is in */
  size_t head_len = 0;
  int rc = -1;
  if (!buf) {
    snprintf(msg, cap, "out of memory");
    close(fd);
    return -1;
  }
  for (;;) {
    if (want >= 0 && len >= (size_t)want) break;
    if (len == capb) {
      if (capb >= TOP_MAX_BODY + TOP_MAX_HEAD) {
        snprintf(msg, cap, "answer larger than %u MiB", TOP_MAX_BODY >> 20);
        goto out;
      }
      unsigned char *nb = realloc(buf, capb * 2 + 1);
      if (!nb) {
        snprintf(msg, cap, "out of memory");
        goto out;
      }
      buf = nb;
      capb *= 2;
    }
    ssize_t r = recv(fd, buf + len, capb - len, 0);
    if (r > 0) {
      len += (size_t)r;
      if (!head_len) {
        buf[len] = 0;
        char *e = strstr((char *)buf, "\r\n\r\n");
        if (e) {
          head_len = (size_t)(e - (char *)buf) + 4;
          long long cl = content_length((char *)buf);
          if (cl > (long long)TOP_MAX_BODY) {
            snprintf(msg, cap, "answer larger than %u MiB", TOP_MAX_BODY >> 20);
            goto out;
          }
          if (cl >= 0) want = (long long)head_len + cl;
        } else if (len > TOP_MAX_HEAD || memchr(buf, 0, len)) {
          snprintf(msg, cap, "not an HTTP answer (garbage)");
          goto out;
        }
      }
      continue;
    }
    if (r == 0) break; /* the end of the stream */
    if (errno == EAGAIN || errno == EINTR) {
      int w = wait_fd(fd, POLLIN, deadline);
      if (w == 1) continue;
      if (w == 0)
        snprintf(msg, cap, "no answer within %.1f s (slow or stuck endpoint)", s->timeout_ms / 1e3);
      else
        snprintf(msg, cap, "poll: %s", strerror(errno));
      goto out;
    }
    snprintf(msg, cap, "receive: %s", strerror(errno));
    goto out;
  }
  if (!head_len) {
    snprintf(msg, cap, len ? "not an HTTP answer (garbage)" : "connection closed without an answer");
    goto out;
  }
  if (want >= 0 && len < (size_t)want) {
    snprintf(msg, cap, "answer cut short (%zu of %lld bytes)", len - head_len, want - (long long)head_len);
    goto out;
  }
  int status = 0;
  if (sscanf((char *)buf, "HTTP/1.%*1[01] %3d", &status) != 1 || status < 100) {
    snprintf(msg, cap, "not an HTTP answer (garbage)");
    goto out;
  }
  if (status != 200) {
    const char *eol = strstr((char *)buf, "\r\n");
    int sl = eol ? (int)(eol - (char *)buf) : 40;
    snprintf(msg, cap, "%.*s%s", sl > 80 ? 80 : sl, (char *)buf,
             status == 404 ? " (an endpoint older than libttft 1.3 has no /snapshot)" : "");
    goto out;
  }
  if (want >= 0) len = (size_t)want;
  *n = len - head_len;
  memmove(buf, buf + head_len, *n);
  *body = buf;
  buf = NULL;
  rc = 0;
out:
  free(buf);
  close(fd);
  return rc;
}

void top_source_explain(const unsigned char *p, size_t n, int err, char *msg, size_t cap) {
  if (err == TTFT_ENOMEM) {
    snprintf(msg, cap, "out of memory decoding the snapshot");
  } else if (n >= 5 && memcmp(p, "TTFS", 4) == 0 && p[4] > 5) {
    snprintf(msg, cap, "snapshot version %u is newer than this ttft-top reads (1..5): update it",
             (unsigned)p[4]);
  } else if (n >= 5 && memcmp(p, "TTFS", 4) == 0 && p[4] == 0) {
    snprintf(msg, cap, "snapshot version 0 is unknown (this ttft-top reads 1..5)");
  } else if (n >= 4 && memcmp(p, "TTFS", 4) == 0) {
    snprintf(msg, cap, "snapshot of %zu bytes is damaged (%s)", n, ttft_strerror(err));
  } else {
    snprintf(msg, cap, "not a snapshot (garbage, %zu bytes)", n);
  }
}

ttft_snapshot *top_source_take(top_source *src, char *msg, size_t cap) {
  if (cap) msg[0] = 0;
  if (src->gather) {
    ttft_snapshot *s = ttft_gather_take(src->gather);
    if (!s) snprintf(msg, cap, "gather: %s", strerror(errno));
    return s;
  }
  unsigned char *body = NULL;
  size_t n = 0;
  if (http_get(src, &body, &n, msg, cap) != 0) return NULL;
  int err = 0;
  ttft_snapshot *s = ttft_snapshot_decode(body, n, &err);
  if (!s) top_source_explain(body, n, err, msg, cap);
  free(body);
  return s;
}
