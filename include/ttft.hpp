/*
 * ttft.hpp — header-only C++ RAII over the libttft C API (C++17 or later).
 *
 * Everything here is a thin inline layer over include/ttft.h; link the same
 * library (pkg-config ttft, CMake ttft::ttft). The C header stays the API
 * reference for what each call records; this file documents only what the
 * C++ layer adds: ownership, exceptions and time types.
 *
 * @code{.cpp}
 *   #include <ttft.hpp>
 *
 *   #include <chrono>
 *   #include <cstdint>
 *   #include <cstdio>
 *   #include <string>
 *   #include <vector>
 *
 *   using namespace std::chrono_literals;  // 500ms, 50ms
 *
 *   int main() {
 *     ttft::Registry reg{ttft::Config().max_inflight(1024).model("llama-3-8b")};
 *     const ttft::Class chat = reg.add_class("chat", ttft::Slo().ttft(500ms).tpot(50ms));
 *     {
 *       ttft::Stream s = reg.begin(ttft::Request().cls(chat).prompt_tokens(812));
 *       s.mark_scheduled();
 *       s.annotate(0, true);  // at slot pickup: the prefix cache hit
 *       s.token();            // first visible token: TTFT
 *       s.token(3);           // a 3-token speculative step: one ITL gap
 *       s.end(TTFT_COMPLETED);
 *     }                       // a Stream not ended by then ends as TTFT_CANCELLED
 *     // A continuous-batching engine records a decode step in one call.
 *     std::vector<ttft::Stream> batch;
 *     for (int i = 0; i < 4; i++) batch.push_back(reg.begin());
 *     std::vector<ttft_seq> step;
 *     for (const ttft::Stream &b : batch) step.push_back(b.handle());
 *     reg.step_emitted(step);  // one token each, one clock read
 *     // Callback-style servers copy a SharedStream into their callbacks.
 *     ttft::SharedStream shared = reg.begin_shared();
 *     auto on_chunk = [shared](std::uint32_t n) { shared.token(n); };
 *     on_chunk(1);
 *     shared.end(TTFT_COMPLETED);
 *
 *     ttft::Snapshot snap = reg.snapshot();
 *     std::chrono::nanoseconds p99 = snap.quantile(TTFT_METRIC_TTFT, 0.99);
 *     std::chrono::nanoseconds done_p99 =  // completed streams only
 *         snap.status(TTFT_COMPLETED).quantile(TTFT_METRIC_E2E, 0.99);
 *     std::string prom = snap.format(TTFT_FORMAT_PROMETHEUS);
 *     std::printf("TTFT p99 %lld ns, completed E2E p99 %lld ns, %zu bytes\n",
 *                 static_cast<long long>(p99.count()),
 *                 static_cast<long long>(done_p99.count()), prom.size());
 *     return snap.count(TTFT_METRIC_TTFT) == 6 ? 0 : 1;
 *   }
 * @endcode
 * (tests/cpp/samples.py compiles and runs this example, and every ```cpp
 * block of docs/, with g++ and clang++.)
 *
 * Which calls throw (ttft::Error, carrying the TTFT_E* code):
 *   - set-up and reads that allocate: Registry constructors, add_class,
 *     serve, Snapshot production (Registry::snapshot, merge, delta, decode),
 *     Snapshot::format / encode / encode_base64, and the builders' setters
 *     given out-of-range input (Config::prompt_bands, negative durations);
 *   - std::bad_alloc may escape wherever a std::string/std::vector is built.
 * Which never throw (noexcept, they return the C code or a value):
 *   - every hook: Registry::begin, begin_shared, step_emitted, end, mark,
 *     annotate; Stream and SharedStream mark*, token, annotate, end, the
 *     destructors, SharedStream's copies;
 *   - every query on a Snapshot (and its status views),
 *     Registry::now/inflight/stalled_now/memory.
 * The hooks return int: TTFT_OK (0) or a negative TTFT_E* code, exactly as
 * the C call. ttft::check(code) turns a code into an exception when a caller
 * prefers that.
 *
 * Lifetimes: a Stream or SharedStream points into the Registry that began
 * it (it does not own it): destroy or end every one before its Registry. A
 * Snapshot owns its data and outlives the Registry freely.
 *
 * Threads: the objects themselves are like any C++ value (one thread uses a
 * given Stream object at a time); the library underneath is thread-safe as
 * documented in ttft.h. To end a stream from another thread (client
 * disconnect racing the decode loop), copy its handle() first and call
 * Registry::end(handle, TTFT_CANCELLED) there: exactly one end wins and the
 * owner's later token()/end()/destructor get TTFT_ESTALE, harmlessly. Or
 * use a SharedStream, whose copies each thread or callback keeps.
 *
 * Time: every hook takes an optional ttft::Time, which converts implicitly
 * from std::chrono::steady_clock::time_point or from raw nanoseconds
 * (std::uint64_t) on the library's clock; omitted (or ttft::now_tag) means
 * "read the registry's clock" (TTFT_NOW). On Linux, libstdc++ and libc++
 * implement steady_clock with clock_gettime(CLOCK_MONOTONIC), whose epoch
 * and rate are the library's, so time points from steady_clock::now() and
 * ttft_now_ns() mix within one sequence (tests/cpp/test_hpp.cpp checks
 * this). Elsewhere that is not guaranteed, and the time_point overloads are
 * only available when TTFT_STEADY_IS_MONOTONIC is 1 (define it yourself if
 * you know your platform's steady_clock reads CLOCK_MONOTONIC).
 */
#ifndef TTFT_HPP
#define TTFT_HPP

#include "ttft.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#if !defined(__cplusplus) || __cplusplus < 201703L
#  if !(defined(_MSVC_LANG) && _MSVC_LANG >= 201703L)
#    error "ttft.hpp needs C++17 or later"
#  endif
#endif

#ifndef TTFT_STEADY_IS_MONOTONIC
#  if defined(__linux__)
#    define TTFT_STEADY_IS_MONOTONIC 1
#  else
#    define TTFT_STEADY_IS_MONOTONIC 0
#  endif
#endif

namespace ttft {

static_assert(std::chrono::steady_clock::is_steady, "steady_clock must be monotonic");
static_assert(sizeof(ttft_seq) == 8, "ttft_seq is a 64-bit handle");

// ------------------------------------------------------------------ errors

/* The error category of TTFT_E* codes: message() is ttft_strerror(). */
class ErrorCategory final : public std::error_category {
 public:
  const char *name() const noexcept override { return "ttft"; }
  std::string message(int ev) const override { return ttft_strerror(ev); }
};

inline const std::error_category &error_category() noexcept {
  static const ErrorCategory category;
  return category;
}

/* What the library reported, as an exception. code() is the TTFT_E* value
 * (negative), what() reads "<where>: TTFT_ENAME (message)". */
class Error : public std::runtime_error {
 public:
  explicit Error(int code, const char *where = "ttft")
      : std::runtime_error(describe(code, where)), code_(code) {}

  int code() const noexcept { return code_; }
  const char *name() const noexcept { return ttft_err_name(code_); }
  std::error_code error_code() const noexcept { return std::error_code(code_, error_category()); }

 private:
  static std::string describe(int code, const char *where) {
    std::string s(where != nullptr ? where : "ttft");
    s += ": ";
    s += ttft_err_name(code);
    s += " (";
    s += ttft_strerror(code);
    s += ")";
    return s;
  }
  int code_;
};

/* Throw Error(code) when code is negative; return it otherwise. */
inline int check(int code, const char *where = "ttft") {
  if (code < 0) throw Error(code, where);
  return code;
}

// -------------------------------------------------------------------- time

using time_point = std::chrono::steady_clock::time_point;

/* Tag for "read the registry's clock" (TTFT_NOW). */
struct now_tag_t {
  explicit constexpr now_tag_t(int) noexcept {}
};
inline constexpr now_tag_t now_tag{0};

/* A timestamp for a hook: raw ns on the library clock, a steady_clock time
 * point (where TTFT_STEADY_IS_MONOTONIC), or now_tag. 0 ns means now. A time
 * point at or before the clock's epoch becomes 1 ns (the library clamps and
 * counts it as CLOCK_CLAMPED), never "now". */
class Time {
 public:
  constexpr Time() noexcept : ns_(0) {}
  constexpr Time(now_tag_t) noexcept : ns_(0) {}  // NOLINT: implicit by design
  constexpr Time(std::uint64_t ns) noexcept : ns_(ns) {}  // NOLINT
#if TTFT_STEADY_IS_MONOTONIC
  constexpr Time(time_point tp) noexcept : ns_(from_time_point(tp)) {}  // NOLINT
#endif
  /* A system_clock time point is a wall-clock time, not the library's
   * monotonic clock: refused at compile time (since 1.3). A raw wall-clock
   * ns count is refused at run time: begin returns an empty Stream and
   * try_begin says TTFT_ECLOCK (ttft.h). */
  template <class D>
  Time(std::chrono::time_point<std::chrono::system_clock, D>) {  // NOLINT
    static_assert(sizeof(D) == 0,
                  "ttft::Time: std::chrono::system_clock is a wall clock; the library's clock is "
                  "CLOCK_MONOTONIC: pass std::chrono::steady_clock::now(), ttft::now() or ttft::now_tag");
  }
  constexpr std::uint64_t ns() const noexcept { return ns_; }
  constexpr bool is_now() const noexcept { return ns_ == 0; }

 private:
#if TTFT_STEADY_IS_MONOTONIC
  static constexpr std::uint64_t from_time_point(time_point tp) noexcept {
    const auto c = std::chrono::duration_cast<std::chrono::nanoseconds>(tp.time_since_epoch()).count();
    return c > 0 ? static_cast<std::uint64_t>(c) : 1u;
  }
#endif
  std::uint64_t ns_;
};

/* ttft_now_ns() (CLOCK_MONOTONIC). */
inline std::uint64_t now_ns() noexcept { return ttft_now_ns(); }

#if TTFT_STEADY_IS_MONOTONIC
/* Raw library ns <-> steady_clock time points. */
inline time_point to_time_point(std::uint64_t ns) noexcept {
  return time_point(std::chrono::duration_cast<time_point::duration>(
      std::chrono::nanoseconds(static_cast<std::chrono::nanoseconds::rep>(ns))));
}
inline std::uint64_t to_ns(time_point tp) noexcept { return Time(tp).ns(); }
/* ttft_now_ns() as a steady_clock time point. */
inline time_point now() noexcept { return to_time_point(ttft_now_ns()); }
#endif

namespace detail {
template <class Rep, class Period>
std::uint64_t duration_ns(std::chrono::duration<Rep, Period> d, const char *where) {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  if (ns < 0) throw Error(TTFT_EINVAL, where);
  return static_cast<std::uint64_t>(ns);
}

/* Calls a ttft_*_init(T*) from the library, which writes sizeof(T) *as the
 * library was built*. A library newer than this header may have a larger T,
 * so it writes into a buffer with slack, and the result is cut to the T this
 * header knows, with struct_size saying so (the library gives the fields
 * past it their defaults). */
template <class T>
T init_struct(void (*init)(T *)) noexcept {
  static_assert(std::is_trivially_copyable<T>::value, "C struct expected");
  union Slack {
    T t;
    unsigned char room[sizeof(T) + 1024];
  } u;
  std::memset(&u, 0, sizeof u);
  init(&u.t);
  T out;
  std::memcpy(&out, &u.t, sizeof(T));
  out.struct_size = sizeof(T);
  return out;
}
}  // namespace detail

// ----------------------------------------------------------------- classes

/* A class id (TTFT_CLASS_DEFAULT = 0, or one from Registry::add_class).
 * Class::all() stands for TTFT_CLASS_ALL in snapshot queries. */
class Class {
 public:
  constexpr Class() noexcept : id_(TTFT_CLASS_DEFAULT) {}
  constexpr explicit Class(int id) noexcept : id_(id) {}
  constexpr int id() const noexcept { return id_; }
  static constexpr Class all() noexcept { return Class(TTFT_CLASS_ALL); }
  static constexpr Class default_class() noexcept { return Class(TTFT_CLASS_DEFAULT); }
  friend constexpr bool operator==(Class a, Class b) noexcept { return a.id_ == b.id_; }
  friend constexpr bool operator!=(Class a, Class b) noexcept { return a.id_ != b.id_; }

 private:
  int id_;
};

/* SLO budgets of a class; an unset budget is 0 (none), fluid_min 0.9 (the
 * ttft_slo_init defaults). */
class Slo {
 public:
  Slo() noexcept : s_(detail::init_struct(ttft_slo_init)) {}
  explicit Slo(const ttft_slo &s) noexcept : s_(s) {}
  template <class R, class P> Slo &ttft(std::chrono::duration<R, P> d) {
    s_.ttft_ns = detail::duration_ns(d, "ttft::Slo::ttft");
    return *this;
  }
  template <class R, class P> Slo &tpot(std::chrono::duration<R, P> d) {
    s_.tpot_ns = detail::duration_ns(d, "ttft::Slo::tpot");
    return *this;
  }
  template <class R, class P> Slo &e2e(std::chrono::duration<R, P> d) {
    s_.e2e_ns = detail::duration_ns(d, "ttft::Slo::e2e");
    return *this;
  }
  template <class R, class P> Slo &stall_threshold(std::chrono::duration<R, P> d) {
    s_.stall_threshold_ns = detail::duration_ns(d, "ttft::Slo::stall_threshold");
    return *this;
  }
  std::chrono::nanoseconds ttft() const noexcept { return ns(s_.ttft_ns); }
  std::chrono::nanoseconds tpot() const noexcept { return ns(s_.tpot_ns); }
  std::chrono::nanoseconds e2e() const noexcept { return ns(s_.e2e_ns); }
  /* Since 1.3 (SPEC 10.2, docs/metrics.md): the length-aware first-token
   * deadline ttft + ttft_per_prompt_token x the prompt tokens known at the
   * first token; the token deadline D of the fluidity rule (0 = the
   * request's TPOT budget); the fluidity a COMPLETED stream needs to be
   * fluid (0 .. 1; add_class throws TTFT_EINVAL outside). */
  template <class R, class P> Slo &ttft_per_prompt_token(std::chrono::duration<R, P> d) {
    s_.ttft_ns_per_prompt_token = detail::duration_ns(d, "ttft::Slo::ttft_per_prompt_token");
    return *this;
  }
  template <class R, class P> Slo &token_deadline(std::chrono::duration<R, P> d) {
    s_.token_deadline_ns = detail::duration_ns(d, "ttft::Slo::token_deadline");
    return *this;
  }
  Slo &fluid_min(double f) noexcept {
    s_.fluid_min = f;
    return *this;
  }
  std::chrono::nanoseconds stall_threshold() const noexcept { return ns(s_.stall_threshold_ns); }
  std::chrono::nanoseconds ttft_per_prompt_token() const noexcept {
    return ns(s_.ttft_ns_per_prompt_token);
  }
  std::chrono::nanoseconds token_deadline() const noexcept { return ns(s_.token_deadline_ns); }
  double fluid_min() const noexcept { return s_.fluid_min; }
  const ttft_slo &c_slo() const noexcept { return s_; }

 private:
  static std::chrono::nanoseconds ns(std::uint64_t v) noexcept {
    return std::chrono::nanoseconds(static_cast<std::chrono::nanoseconds::rep>(v));
  }
  ttft_slo s_;
};

/* What the scheduler knows about a request when it arrives (ttft_request).
 * Built on the stack per request: no allocation, no library call. */
class Request {
 public:
  Request() noexcept {
    std::memset(&r_, 0, sizeof r_);
    r_.struct_size = sizeof r_;
    r_.class_id = TTFT_CLASS_DEFAULT;
    r_.prompt_tokens = 0;
    r_.prefix_hit = -1;
  }
  /* A copy points at its own copies of ids given as std::string_view. */
  Request(const Request &o) noexcept : r_(o.r_) { copy_ids(o); }
  Request &operator=(const Request &o) noexcept {
    if (this != &o) {
      r_ = o.r_;
      copy_ids(o);
    }
    return *this;
  }
  ~Request() = default;
  Request &cls(Class c) noexcept {
    r_.class_id = c.id();
    return *this;
  }
  Request &prompt_tokens(std::uint32_t n) noexcept {
    r_.prompt_tokens = n;
    return *this;
  }
  Request &prefix_hit(bool hit) noexcept {
    r_.prefix_hit = hit ? 1 : 0;
    return *this;
  }
  Request &prefix_unknown() noexcept {
    r_.prefix_hit = -1;
    return *this;
  }
  /* Since 1.3: this request's own first-token deadline and TPOT budget
   * (e.g. from a router's x-llm-d-slo-ttft-ms / x-llm-d-slo-tpot-ms
   * headers); 0 = the class's. The verdict and the slowest lists use them,
   * the class's budget gauges stay the class's. A negative or overflowing
   * duration throws ttft::Error(TTFT_EINVAL), as Slo's setters do. */
  template <class R, class P> Request &ttft_slo(std::chrono::duration<R, P> d) {
    r_.ttft_slo_ns = detail::duration_ns(d, "ttft::Request::ttft_slo");
    return *this;
  }
  template <class R, class P> Request &tpot_slo(std::chrono::duration<R, P> d) {
    r_.tpot_slo_ns = detail::duration_ns(d, "ttft::Request::tpot_slo");
    return *this;
  }
  /* Since 1.2: the server's request id and the W3C trace id (32 lowercase
   * hex digits) shown with the slowest requests and, the trace id, as
   * exemplars. The pointers are kept, not the strings: they must stay valid
   * until begin() returns (the library copies them there; ttft.h says what
   * it keeps and what it ignores). nullptr = none. A C string ends at its
   * first NUL: what follows is not seen. */
  Request &request_id(const char *id) noexcept {
    r_.request_id = id;
    return *this;
  }
  Request &trace_id(const char *id) noexcept {
    r_.trace_id = id;
    return *this;
  }
  /* The same for ids as a client sent them, any bytes (a std::string
   * holding NULs, a header's string_view): copied into the Request (no
   * allocation), each NUL as '?' — shown as '?' in a request id, and a
   * trace id holding one is ignored and counted, not cut to a valid-looking
   * prefix — and only as much as the library reads (4 bytes per kept byte
   * of a request id, 33 of a trace id), so a 1 MB id costs no more than a
   * short one. Malformed UTF-8 and control characters then become '?' and
   * a bad trace id is counted in TTFT_COUNTER_TRACE_ID_INVALID, as in C.
   * Never fails. */
  Request &request_id(std::string_view id) noexcept {
    r_.request_id = copy_id(rid_, sizeof rid_, id);
    return *this;
  }
  Request &trace_id(std::string_view id) noexcept {
    r_.trace_id = copy_id(tid_, sizeof tid_, id);
    return *this;
  }
  /* Since 1.3: a W3C traceparent header value as received ("00-<trace-id>-
   * <parent-id>-<flags>"); its trace-id is taken at begin as
   * ttft_traceparent_parse takes it, when no trace_id is set (trace_id
   * wins). An invalid header is ignored and counted in
   * TTFT_COUNTER_TRACE_ID_INVALID. The const char * form keeps the pointer
   * (valid until begin() returns); the string_view form copies what
   * decides the verdict (no allocation; a NUL becomes '?'). Never fails. */
  Request &traceparent(const char *header) noexcept {
    r_.traceparent = header;
    return *this;
  }
  Request &traceparent(std::string_view header) noexcept {
    r_.traceparent = detail_traceparent_copy(tp_, header);
    return *this;
  }
  const ttft_request &c_request() const noexcept { return r_; }

  /* The bytes of header that decide ttft_traceparent_parse's verdict, into
   * buf (57 bytes): optional whitespace trimmed, the first 56 characters
   * (a 56th that is whitespace, which the whole header would refuse,
   * becomes 'x'), NUL as '?'. */
  static const char *detail_traceparent_copy(char *buf, std::string_view h) noexcept {
    while (!h.empty() && (h.front() == ' ' || h.front() == '\t')) h.remove_prefix(1);
    while (!h.empty() && (h.back() == ' ' || h.back() == '\t')) h.remove_suffix(1);
    const std::size_t n = h.size() < 56 ? h.size() : 56;
    for (std::size_t i = 0; i < n; i++) buf[i] = h[i] == '\0' ? '?' : h[i];
    if (n == 56 && (buf[55] == ' ' || buf[55] == '\t')) buf[55] = 'x';
    buf[n] = '\0';
    return buf;
  }

 private:
  static const char *copy_id(char *dst, std::size_t cap, std::string_view id) noexcept {
    const std::size_t n = id.size() < cap - 1 ? id.size() : cap - 1;
    for (std::size_t i = 0; i < n; i++) dst[i] = id[i] == '\0' ? '?' : id[i];
    dst[n] = '\0';
    return dst;
  }
  void copy_ids(const Request &o) noexcept {
    if (o.r_.request_id == o.rid_) {
      std::memcpy(rid_, o.rid_, sizeof rid_);
      r_.request_id = rid_;
    }
    if (o.r_.trace_id == o.tid_) {
      std::memcpy(tid_, o.tid_, sizeof tid_);
      r_.trace_id = tid_;
    }
    if (o.r_.traceparent == o.tp_) {
      std::memcpy(tp_, o.tp_, sizeof tp_);
      r_.traceparent = tp_;
    }
  }
  ttft_request r_;
  char rid_[4 * (TTFT_MAX_REQUEST_ID + 1) + 1]; /* what ttft_begin_ex can read, + NUL */
  char tid_[33 + 1];                            /* 32 digits and one more, + NUL     */
  char tp_[56 + 1];                             /* detail_traceparent_copy's         */
};

/* The trace-id of a W3C traceparent header value (ttft_traceparent_parse:
 * version 00 exactly, higher versions by the W3C rule, whitespace around
 * it skipped), or nullopt when it is invalid. Since 1.3. */
inline std::optional<std::string> traceparent_trace_id(std::string_view header) {
  char buf[56 + 1], out[33];
  if (ttft_traceparent_parse(Request::detail_traceparent_copy(buf, header), out) != TTFT_OK)
    return std::nullopt;
  return std::string(out, 32);
}

// ------------------------------------------------------------------ config

/* Label names a constant label may not use (the exporters write them), as
 * in ttft.h's TTFT_RESERVED_LABELS; so is any name that starts with "__". */
inline constexpr const char *reserved_labels[] = {TTFT_RESERVED_LABELS};
inline bool label_reserved(const char *name) noexcept {
  if (name == nullptr || (name[0] == '_' && name[1] == '_')) return true;
  for (const char *r : reserved_labels)
    if (std::strcmp(r, name) == 0) return true;
  return false;
}

/* Why the library refuses C configuration c (ttft_config_check), or the
 * empty string when it accepts it. */
inline std::string config_problem(const ttft_config &c) {
  char why[256];
  if (ttft_config_check(&c, why, sizeof why) == TTFT_OK) return std::string();
  return std::string(why);
}

/* A ttft_config builder that owns its strings. Starts from the library's
 * defaults (ttft_config_init). */
class Config {
 public:
  Config() noexcept : c_(detail::init_struct<ttft_config>(&ttft_config_init)) {}
  /* Start from a C config; its string and array pointers are used as they
   * are (they must stay valid until the Registry is built) unless a setter
   * below replaces them. */
  explicit Config(const ttft_config &c) noexcept : c_(c) {}

  Config &max_inflight(std::uint32_t n) noexcept { c_.max_inflight = n; return *this; }
  Config &max_threads(std::uint32_t n) noexcept { c_.max_threads = n; return *this; }
  Config &max_classes(std::uint32_t n) noexcept { c_.max_classes = n; return *this; }
  template <class R, class P> Config &stall_threshold(std::chrono::duration<R, P> d) {
    c_.stall_threshold_ns = detail::duration_ns(d, "ttft::Config::stall_threshold");
    return *this;
  }
  Config &clock(ttft_clock k) noexcept { c_.clock = k; return *this; }
  Config &start_point(std::string v) { start_point_ = std::move(v); return *this; }
  Config &token_point(std::string v) { token_point_ = std::move(v); return *this; }
  Config &model(std::string v) { model_ = std::move(v); return *this; }
  Config &metric_namespace(std::string v) { namespace_ = std::move(v); return *this; }
  /* A constant label on every exported series (at most TTFT_MAX_CONST_LABELS;
   * the library validates names). */
  Config &label(std::string name, std::string value) {
    labels_.emplace_back(std::move(name), std::move(value));
    return *this;
  }
  /* Ascending prompt-token band edges, at most TTFT_MAX_BANDS - 1. */
  Config &prompt_bands(const std::vector<std::uint32_t> &edges) {
    if (edges.size() > TTFT_MAX_BANDS - 1) throw Error(TTFT_EINVAL, "ttft::Config::prompt_bands");
    c_.n_prompt_bands = static_cast<std::uint32_t>(edges.size());
    for (std::size_t i = 0; i < edges.size(); i++) c_.prompt_band_edges[i] = edges[i];
    return *this;
  }
  Config &prompt_bands(std::initializer_list<std::uint32_t> edges) {
    return prompt_bands(std::vector<std::uint32_t>(edges));
  }
  /* Prometheus bucket upper bounds of metric m, ascending, ns (tokens for
   * OUTPUT_TOKENS). Only metrics below TTFT_PROM_CONFIG_METRICS have their
   * own (TTFT_METRIC_ITL_PER_TOKEN uses ITL's): others throw TTFT_EINVAL. */
  Config &prom_buckets(ttft_metric m, std::vector<std::uint64_t> bounds) {
    const int i = static_cast<int>(m);
    if (i < 0 || i >= TTFT_PROM_CONFIG_METRICS || bounds.size() > TTFT_MAX_PROM_BUCKETS)
      throw Error(TTFT_EINVAL, "ttft::Config::prom_buckets");
    buckets_[static_cast<std::size_t>(i)] = std::move(bounds);
    has_buckets_[static_cast<std::size_t>(i)] = true;
    return *this;
  }
  Config &prom_summaries(bool on) noexcept { c_.prom_summaries = on ? 1 : 0; return *this; }
  /* Since 1.1 (ttft.h has the defaults and ranges; the library validates). */
  Config &native_histograms(bool on) noexcept { c_.native_histograms = on ? 1 : 0; return *this; }
  Config &native_schema(int schema) noexcept { c_.native_schema = schema; return *this; }
  Config &export_idle_classes(bool on) noexcept { c_.export_idle_classes = on ? 1 : 0; return *this; }
  /* Since 1.2: requests kept per class in each slowest list (0 .. 64). */
  Config &slowest_k(std::uint32_t k) noexcept { c_.slowest_k = k; return *this; }
  /* Bytes of histogram buckets the registry may allocate as values arrive. */
  Config &memory_limit(std::uint64_t bytes) noexcept { c_.memory_limit = bytes; return *this; }
  /* Since 1.2: annotate_cached calls fewer cached tokens a miss (default 16). */
  Config &prefix_hit_min_tokens(std::uint32_t n) noexcept { c_.prefix_hit_min_tokens = n; return *this; }
  /* Since 1.3 (many processes, one truth; docs/multiprocess.md): publish
   * this registry's state into a segment of its own in directory dir
   * (tmpfs: /dev/shm/NAME; it must exist, belong to this user and not be
   * group- or world-writable), read by ttft::Gather; the name of this
   * process in per-process views (1..63 bytes of [A-Za-z0-9_.:-]; default
   * "pid-<pid>"); how often the background thread publishes (default 100
   * ms, 10 .. 3600000; 0 = no thread, call Registry::publish). */
  Config &shared_dir(std::string dir) { shared_dir_ = std::move(dir); return *this; }
  Config &process_name(std::string name) { process_name_ = std::move(name); return *this; }
  Config &publish_interval_ms(std::uint32_t ms) noexcept { c_.publish_interval_ms = ms; return *this; }

  /* Why ttft::Registry(*this) would throw TTFT_EINVAL (the library's one-line
   * reason, ttft_config_check), or "" when the configuration is valid. */
  std::string problem() const {
    std::vector<ttft_label> labels;
    return config_problem(c_config(labels));
  }

  /* The C struct with pointers into this Config (and labels into *storage):
   * valid while both live unchanged. */
  ttft_config c_config(std::vector<ttft_label> &storage) const {
    ttft_config c = c_;
    if (start_point_) c.start_point = start_point_->c_str();
    if (token_point_) c.token_point = token_point_->c_str();
    if (model_) c.model = model_->c_str();
    if (namespace_) c.metric_namespace = namespace_->c_str();
    if (shared_dir_) c.shared_dir = shared_dir_->c_str();
    if (process_name_) c.process_name = process_name_->c_str();
    if (!labels_.empty()) {
      storage.clear();
      for (const auto &l : labels_) storage.push_back(ttft_label{l.first.c_str(), l.second.c_str()});
      c.const_labels = storage.data();
      c.n_const_labels = static_cast<std::uint32_t>(storage.size());
    }
    for (std::size_t i = 0; i < static_cast<std::size_t>(TTFT_PROM_CONFIG_METRICS); i++) {
      if (!has_buckets_[i]) continue;
      c.prom_buckets[i] = buckets_[i].empty() ? nullptr : buckets_[i].data();
      c.prom_n_buckets[i] = static_cast<std::uint32_t>(buckets_[i].size());
    }
    return c;
  }

 private:
  ttft_config c_;
  std::optional<std::string> start_point_, token_point_, model_, namespace_;
  std::optional<std::string> shared_dir_, process_name_;
  std::vector<std::pair<std::string, std::string>> labels_;
  std::vector<std::uint64_t> buckets_[TTFT_PROM_CONFIG_METRICS];
  bool has_buckets_[TTFT_PROM_CONFIG_METRICS] = {};
};

// ---------------------------------------------------------------- snapshot

/* The interval a snapshot covers, ns on the monotonic clock. */
struct Interval {
  std::uint64_t start_ns = 0, end_ns = 0;
  std::chrono::nanoseconds length() const noexcept {
    return std::chrono::nanoseconds(static_cast<std::chrono::nanoseconds::rep>(end_ns - start_ns));
  }
};

/* An immutable copy of what a registry recorded. Move-only; owns its
 * ttft_snapshot. Queries are noexcept and return 0 (or nullopt) where the C
 * call returns 0 / -1 for "nothing". A moved-from Snapshot answers like an
 * empty one. */
class Snapshot {
 public:
  Snapshot() noexcept = default;
  /* Adopt a snapshot from the C API (may be NULL). */
  explicit Snapshot(ttft_snapshot *adopt) noexcept : s_(adopt) {}
  ~Snapshot() { ttft_snapshot_free(s_); }
  Snapshot(Snapshot &&o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Snapshot &operator=(Snapshot &&o) noexcept {
    if (this != &o) {
      ttft_snapshot_free(s_);
      s_ = std::exchange(o.s_, nullptr);
    }
    return *this;
  }
  Snapshot(const Snapshot &) = delete;
  Snapshot &operator=(const Snapshot &) = delete;

  const ttft_snapshot *get() const noexcept { return s_; }
  ttft_snapshot *release() noexcept { return std::exchange(s_, nullptr); }
  explicit operator bool() const noexcept { return s_ != nullptr; }

  // --- metrics (every class unless a Class is given)
  std::uint64_t count(ttft_metric m, Class c = Class::all()) const noexcept {
    return ttft_snapshot_class_count(s_, c.id(), m);
  }
  /* Quantile as a duration; for TTFT_METRIC_OUTPUT_TOKENS use quantile_value. */
  std::chrono::nanoseconds quantile(ttft_metric m, double q, Class c = Class::all()) const noexcept {
    return as_ns(quantile_value(m, q, c));
  }
  /* The raw quantile: ns, or tokens for TTFT_METRIC_OUTPUT_TOKENS. */
  std::uint64_t quantile_value(ttft_metric m, double q, Class c = Class::all()) const noexcept {
    return ttft_snapshot_class_quantile(s_, c.id(), m, q);
  }
  std::chrono::duration<double, std::nano> mean(ttft_metric m, Class c = Class::all()) const noexcept {
    return std::chrono::duration<double, std::nano>(mean_value(m, c));
  }
  double mean_value(ttft_metric m, Class c = Class::all()) const noexcept {
    return ttft_snapshot_class_mean(s_, c.id(), m);
  }
  /* ns (tokens for OUTPUT_TOKENS); saturates at UINT64_MAX past 2^64 */
  std::uint64_t sum(ttft_metric m, Class c = Class::all()) const noexcept {
    return ttft_snapshot_class_sum(s_, c.id(), m);
  }
  /* the whole 128-bit sum as a double (ns; tokens for OUTPUT_TOKENS) */
  double sum_value(ttft_metric m, Class c = Class::all()) const noexcept {
    std::uint64_t hi = 0, lo = 0;
    if (ttft_snapshot_class_sum_wide(s_, c.id(), m, &hi, &lo) != TTFT_OK) return 0.0;
    return static_cast<double>(hi) * 18446744073709551616.0 + static_cast<double>(lo);
  }
  std::uint64_t counter(ttft_counter k, Class c = Class::all()) const noexcept {
    return ttft_snapshot_class_counter(s_, c.id(), k);
  }
  std::uint64_t gauge(ttft_gauge g) const noexcept { return ttft_snapshot_gauge(s_, g); }

  /* The slowest requests by TTFT or by longest gap (ttft_snapshot_slowest),
   * slowest first, copied out (request_id and trace_id are "" when none). */
  std::vector<ttft_slow_request> slowest(ttft_slowest_by by, Class c = Class::all()) const {
    std::vector<ttft_slow_request> v(ttft_snapshot_slowest_count(s_, c.id(), by));
    for (unsigned i = 0; i < v.size(); i++) {
      v[i].struct_size = sizeof v[i];
      int rc = ttft_snapshot_slowest(s_, c.id(), by, i, &v[i]);
      if (rc != TTFT_OK) throw Error(rc, "ttft::Snapshot::slowest");
    }
    return v;
  }

  /* The streams that ended with one status: TTFT, TPOT, E2E and
   * OUTPUT_TOKENS recorded at stream end (ttft_snapshot_status_*). A view
   * of this snapshot: it must not outlive it. status(TTFT_COMPLETED) is
   * what client benchmarks report (completed requests only); the plain
   * queries above count every stream. Other metrics, unknown statuses and
   * empty views answer 0. */
  class StatusView {
   public:
    ttft_status status() const noexcept { return st_; }
    std::uint64_t count(ttft_metric m, Class c = Class::all()) const noexcept {
      return ttft_snapshot_status_count(s_, c.id(), st_, m);
    }
    /* Quantile as a duration; for TTFT_METRIC_OUTPUT_TOKENS use quantile_value. */
    std::chrono::nanoseconds quantile(ttft_metric m, double q, Class c = Class::all()) const noexcept {
      return std::chrono::nanoseconds(static_cast<std::chrono::nanoseconds::rep>(quantile_value(m, q, c)));
    }
    std::uint64_t quantile_value(ttft_metric m, double q, Class c = Class::all()) const noexcept {
      return ttft_snapshot_status_quantile(s_, c.id(), st_, m, q);
    }
    /* Sum of the view (ns; tokens for OUTPUT_TOKENS); never wraps:
     * UINT64_MAX when it cannot be told from a sum past 2^64 - 1
     * (ttft_snapshot_status_sum). */
    std::uint64_t sum(ttft_metric m, Class c = Class::all()) const noexcept {
      return ttft_snapshot_status_sum(s_, c.id(), st_, m);
    }
    /* sum / count: status(TTFT_COMPLETED).mean(TTFT_METRIC_TTFT) is the
     * benchmarks' "mean TTFT"; 0 when empty. */
    std::chrono::duration<double, std::nano> mean(ttft_metric m, Class c = Class::all()) const noexcept {
      return std::chrono::duration<double, std::nano>(mean_value(m, c));
    }
    double mean_value(ttft_metric m, Class c = Class::all()) const noexcept {
      return ttft_snapshot_status_mean(s_, c.id(), st_, m);
    }

   private:
    friend class Snapshot;
    StatusView(const ttft_snapshot *s, ttft_status st) noexcept : s_(s), st_(st) {}
    const ttft_snapshot *s_;
    ttft_status st_;
  };
  StatusView status(ttft_status st) const noexcept { return StatusView(s_, st); }
  /* good / judged in [0,1] (TTFT_COUNTER_SLO_MET / TTFT_COUNTER_SLO_JUDGED:
   * streams cancelled before they missed a budget are not judged);
   * nullopt when nothing was judged. */
  std::optional<double> attainment(Class c = Class::all()) const noexcept {
    const double a = ttft_snapshot_attainment(s_, c.id());
    if (a < 0.0) return std::nullopt;
    return a;
  }

  // --- classes
  int classes() const noexcept { return ttft_snapshot_classes(s_); }
  /* The class's name, owned by this snapshot; nullptr when out of range. */
  const char *class_name(Class c) const noexcept { return ttft_snapshot_class_name(s_, c.id()); }
  std::optional<Class> find_class(const char *name) const noexcept {
    if (name == nullptr) return std::nullopt;
    const int n = classes();
    for (int i = 0; i < n; i++) {
      const char *cn = ttft_snapshot_class_name(s_, i);
      if (cn != nullptr && std::strcmp(cn, name) == 0) return Class(i);
    }
    return std::nullopt;
  }
  std::optional<Slo> class_slo(Class c) const noexcept {
    ttft_slo out;
    std::memset(&out, 0, sizeof out);
    out.struct_size = sizeof out;
    if (ttft_snapshot_class_slo(s_, c.id(), &out) != TTFT_OK) return std::nullopt;
    return Slo(out);
  }

  // --- stall causes and engine steps (1.2)
  std::uint64_t stalls_by_cause(ttft_stall_cause cause, Class c = Class::all()) const noexcept {
    return ttft_snapshot_stalls_by_cause(s_, c.id(), cause);
  }
  /* the stalls' summed gaps (the C call returns ns despite its name) */
  std::chrono::nanoseconds stall_time_by_cause(ttft_stall_cause cause,
                                               Class c = Class::all()) const noexcept {
    return as_ns(ttft_snapshot_stall_seconds_by_cause(s_, c.id(), cause));
  }
  std::uint64_t engine_step_count(bool prefill) const noexcept {
    return ttft_snapshot_engine_step_count(s_, prefill ? 1 : 0);
  }
  std::chrono::nanoseconds engine_step_quantile(bool prefill, double q) const noexcept {
    return as_ns(ttft_snapshot_engine_step_quantile(s_, prefill ? 1 : 0, q));
  }
  std::chrono::nanoseconds engine_step_sum(bool prefill) const noexcept {
    return as_ns(ttft_snapshot_engine_step_sum(s_, prefill ? 1 : 0));
  }

  // --- TTFT splits and bands
  std::uint64_t split_count(ttft_split sp, unsigned index) const noexcept {
    return ttft_snapshot_split_count(s_, sp, index);
  }
  std::chrono::nanoseconds split_quantile(ttft_split sp, unsigned index, double q) const noexcept {
    return as_ns(ttft_snapshot_split_quantile(s_, sp, index, q));
  }
  unsigned bands() const noexcept { return ttft_snapshot_bands(s_); }
  /* [lo, hi) prompt tokens of band i; nullopt when out of range. */
  std::optional<std::pair<std::uint32_t, std::uint32_t>> band(unsigned index) const noexcept {
    std::uint32_t lo = 0, hi = 0;
    if (ttft_snapshot_band(s_, index, &lo, &hi) != TTFT_OK) return std::nullopt;
    return std::make_pair(lo, hi);
  }
  std::optional<Interval> interval() const noexcept {
    Interval iv;
    if (ttft_snapshot_interval(s_, &iv.start_ns, &iv.end_ns) != TTFT_OK) return std::nullopt;
    return iv;
  }
  /* "start_point", "token_point", "model" or "namespace"; nullptr otherwise.
   * Owned by this snapshot. */
  const char *label(const char *key) const noexcept { return ttft_snapshot_label(s_, key); }

  // --- output (throw Error on failure)
  /* The rendering in format f. TTFT_FORMAT_PROMETHEUS_PROTOBUF is binary
   * (length-delimited MetricFamily messages): the string holds its bytes,
   * NULs included; use size(), not c_str(). */
  std::string format(ttft_format f) const {
    std::string out;
    long need = ttft_snapshot_format(s_, f, nullptr, 0);
    for (;;) {
      if (need < 0) throw Error(static_cast<int>(need), "ttft_snapshot_format");
      out.resize(static_cast<std::size_t>(need));
      /* std::string keeps room for its terminator at out[size()]: the C
       * call writes the NUL there. */
      const long got = ttft_snapshot_format(s_, f, &out[0], out.size() + 1);
      if (got < 0) throw Error(static_cast<int>(got), "ttft_snapshot_format");
      if (got <= need) {
        out.resize(static_cast<std::size_t>(got));
        return out;
      }
      need = got;
    }
  }
  std::vector<unsigned char> encode() const {
    const long need = ttft_snapshot_encode(s_, nullptr, 0);
    if (need < 0) throw Error(static_cast<int>(need), "ttft_snapshot_encode");
    std::vector<unsigned char> out(static_cast<std::size_t>(need));
    const long got = ttft_snapshot_encode(s_, out.data(), out.size());
    if (got < 0) throw Error(static_cast<int>(got), "ttft_snapshot_encode");
    if (got != need) throw Error(TTFT_ERANGE, "ttft_snapshot_encode");
    return out;
  }
  std::string encode_base64() const {
    const long need = ttft_snapshot_encode_base64(s_, nullptr, 0);
    if (need < 0) throw Error(static_cast<int>(need), "ttft_snapshot_encode_base64");
    std::string out(static_cast<std::size_t>(need), '\0');
    const long got = ttft_snapshot_encode_base64(s_, &out[0], out.size() + 1);
    if (got < 0) throw Error(static_cast<int>(got), "ttft_snapshot_encode_base64");
    if (got != need) throw Error(TTFT_ERANGE, "ttft_snapshot_encode_base64");
    return out;
  }

  // --- producing snapshots (throw Error on failure)
  static Snapshot decode(const void *buf, std::size_t len) {
    int err = TTFT_OK;
    ttft_snapshot *s = ttft_snapshot_decode(buf, len, &err);
    if (s == nullptr) throw Error(err != TTFT_OK ? err : TTFT_ECORRUPT, "ttft_snapshot_decode");
    return Snapshot(s);
  }
  static Snapshot decode(const std::vector<unsigned char> &bytes) {
    return decode(bytes.data(), bytes.size());
  }
  static Snapshot decode_base64(const std::string &text) {
    int err = TTFT_OK;
    ttft_snapshot *s = ttft_snapshot_decode_base64(text.c_str(), text.size(), &err);
    if (s == nullptr) throw Error(err != TTFT_OK ? err : TTFT_ECORRUPT, "ttft_snapshot_decode_base64");
    return Snapshot(s);
  }
  static Snapshot merge(const Snapshot &a, const Snapshot &b) {
    int err = TTFT_OK;
    ttft_snapshot *s = ttft_snapshot_merge(a.s_, b.s_, &err);
    if (s == nullptr) throw Error(err != TTFT_OK ? err : TTFT_EINVAL, "ttft_snapshot_merge");
    return Snapshot(s);
  }
  /* What happened between older and newer (two snapshots of one registry). */
  static Snapshot delta(const Snapshot &newer, const Snapshot &older) {
    int err = TTFT_OK;
    ttft_snapshot *s = ttft_snapshot_delta(newer.s_, older.s_, &err);
    if (s == nullptr) throw Error(err != TTFT_OK ? err : TTFT_EINVAL, "ttft_snapshot_delta");
    return Snapshot(s);
  }

 private:
  static std::chrono::nanoseconds as_ns(std::uint64_t v) noexcept {
    return std::chrono::nanoseconds(static_cast<std::chrono::nanoseconds::rep>(v));
  }
  ttft_snapshot *s_ = nullptr;
};

// ------------------------------------------------------------------ stream

/* One sequence. Move-only; owns the handle until end() succeeds. Its
 * destructor (and move-assignment over it) ends a stream that is still open
 * as TTFT_CANCELLED at the registry's now, so an exception or an early
 * return in a handler never leaks a slot and is counted as a cancel. An
 * empty Stream (begin refused for want of a slot, default-constructed or
 * moved-from) returns TTFT_ESTALE from every hook. */
class Stream {
 public:
  Stream() noexcept = default;
  /* Adopt handle s of registry r (s may be 0). */
  Stream(ttft_registry *r, ttft_seq s) noexcept : r_(r), s_(s) {}
  ~Stream() { cancel_if_open(); }
  Stream(Stream &&o) noexcept : r_(o.r_), s_(std::exchange(o.s_, 0)) {}
  Stream &operator=(Stream &&o) noexcept {
    if (this != &o) {
      cancel_if_open();
      r_ = o.r_;
      s_ = std::exchange(o.s_, 0);
    }
    return *this;
  }
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;

  /* True while the stream is open (begun, not yet ended through this object). */
  explicit operator bool() const noexcept { return s_ != 0; }
  bool open() const noexcept { return s_ != 0; }
  ttft_seq handle() const noexcept { return s_; }
  ttft_registry *registry() const noexcept { return r_; }
  /* Give up ownership: the caller ends the handle itself. */
  ttft_seq release() noexcept { return std::exchange(s_, 0); }

  int mark(ttft_phase p, Time t = now_tag) noexcept {
    if (s_ == 0) return TTFT_ESTALE;
    return ttft_mark(r_, s_, p, t.ns());
  }
  int mark_scheduled(Time t = now_tag) noexcept { return mark(TTFT_PHASE_SCHEDULED, t); }
  int mark_preempted(Time t = now_tag) noexcept { return mark(TTFT_PHASE_PREEMPTED, t); }
  int mark_resumed(Time t = now_tag) noexcept { return mark(TTFT_PHASE_RESUMED, t); }
  /* n tokens became visible to the client (one emission). */
  int token(std::uint32_t n = 1, Time t = now_tag) noexcept {
    if (s_ == 0) return TTFT_ESTALE;
    return ttft_token_emitted(r_, s_, n, t.ns());
  }
  /* Details learned after begin, e.g. at slot pickup (ttft_annotate):
   * prompt_tokens 0 and prefix_hit nullopt leave a field as it is.
   * TTFT_OK; TTFT_ERANGE after the first token (nothing changes);
   * TTFT_ESTALE once ended. */
  int annotate(std::uint32_t prompt_tokens, std::optional<bool> prefix_hit = std::nullopt) noexcept {
    if (s_ == 0) return TTFT_ESTALE;
    return ttft_annotate(r_, s_, prompt_tokens, prefix_hit ? (*prefix_hit ? 1 : 0) : -1);
  }
  /* The prefix-cache reuse as counts, where the server computes it
   * (ttft_annotate_cached): miss / partial / hit bands of TTFT and PREFILL.
   * TTFT_EINVAL for prompt_tokens 0 or cached_tokens > prompt_tokens. */
  int annotate_cached(std::uint32_t prompt_tokens, std::uint32_t cached_tokens) noexcept {
    if (s_ == 0) return TTFT_ESTALE;
    return ttft_annotate_cached(r_, s_, prompt_tokens, cached_tokens);
  }
  /* Close the stream. On TTFT_OK, or TTFT_ESTALE (another thread ended it
   * first), the Stream becomes empty; on TTFT_EINVAL (bad status) it stays
   * open and the destructor still cancels it. */
  int end(ttft_status st, Time t = now_tag) noexcept {
    if (s_ == 0) return TTFT_ESTALE;
    const int rc = ttft_stream_end(r_, s_, st, t.ns());
    if (rc == TTFT_OK || rc == TTFT_ESTALE) s_ = 0;
    return rc;
  }
  /* Live state of the sequence; nullopt once it ended. */
  std::optional<ttft_seq_info> stats() const noexcept {
    if (s_ == 0) return std::nullopt;
    ttft_seq_info info;
    std::memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (ttft_seq_stats(r_, s_, &info) != TTFT_OK) return std::nullopt;
    return info;
  }

 private:
  void cancel_if_open() noexcept {
    if (s_ != 0) (void)ttft_stream_end(r_, std::exchange(s_, 0), TTFT_CANCELLED, std::uint64_t{0});
  }
  ttft_registry *r_ = nullptr;
  ttft_seq s_ = 0;
};

// ------------------------------------------------------------ shared stream

/* A copyable handle on one sequence, for servers that stream from copyable
 * callbacks (std::function, an event loop's completion handlers): every
 * copy may record, and when the last copy goes, a stream nobody ended is
 * ended as TTFT_CANCELLED at the registry's now (like ~Stream). Made by
 * Registry::begin_shared or from a Stream; an empty SharedStream (no free
 * slot, out of memory, default-constructed, moved-from) returns TTFT_ESTALE
 * from every hook.
 *
 * Threads: copies may live in different threads, and copying, assigning
 * and destroying copies concurrently is safe (the count of owners is
 * atomic); one SharedStream object is used by one thread at a time, like
 * any value. Hooks through the copies follow the library's rule for one
 * sequence: in order, except that end() may race token()/mark() from
 * another thread (a disconnect callback against the write path): exactly
 * one end is recorded, the others return TTFT_ESTALE.
 *
 * Cost: one allocation of a small block per stream (begin_shared), and an
 * atomic increment per copy. Copy it into the callbacks that need it, not
 * per token. */
class SharedStream {
 public:
  SharedStream() noexcept = default;
  /* Take the stream of s. When the small block cannot be allocated, the
   * SharedStream is empty and s keeps the stream (and still cancels it on
   * destruction). An empty s gives an empty SharedStream. */
  explicit SharedStream(Stream &&s) noexcept {
    if (!s.open()) return;
    State *st = new (std::nothrow) State(s.registry(), 0);
    if (st == nullptr) return;
    st->seq = s.release();
    st_ = st;
  }
  SharedStream(const SharedStream &o) noexcept : st_(o.st_) {
    /* relaxed: a new owner needs no ordering; it got the pointer from o,
     * which already keeps the block alive */
    if (st_ != nullptr) st_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  SharedStream(SharedStream &&o) noexcept : st_(std::exchange(o.st_, nullptr)) {}
  SharedStream &operator=(const SharedStream &o) noexcept {
    SharedStream copy(o);
    std::swap(st_, copy.st_);
    return *this;
  }
  SharedStream &operator=(SharedStream &&o) noexcept {
    SharedStream taken(std::move(o));
    std::swap(st_, taken.st_);
    return *this;
  }
  ~SharedStream() { reset(); }

  /* Drop this owner now (the last one cancels a stream still open). */
  void reset() noexcept {
    State *st = std::exchange(st_, nullptr);
    if (st == nullptr) return;
    /* acq_rel: release orders this owner's hook calls before the drop; the
     * last owner acquires every other owner's, so it sees whether one of
     * them ended the stream before it decides to cancel and frees the block */
    if (st->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (st->open.load(std::memory_order_relaxed))  // ordered by the acquire above
      (void)ttft_stream_end(st->r, st->seq, TTFT_CANCELLED, std::uint64_t{0});
    delete st;
  }

  /* True while no copy has ended the stream (through this class). */
  explicit operator bool() const noexcept { return open(); }
  bool open() const noexcept {
    /* relaxed: a hint; the library decides for every hook */
    return st_ != nullptr && st_->open.load(std::memory_order_relaxed);
  }
  /* The sequence handle (0 when empty): for Registry::step_emitted. */
  ttft_seq handle() const noexcept { return st_ != nullptr ? st_->seq : 0; }
  ttft_registry *registry() const noexcept { return st_ != nullptr ? st_->r : nullptr; }
  /* Owners sharing this stream (0 when empty); a snapshot of a count other
   * threads may be changing. */
  long use_count() const noexcept {
    return st_ != nullptr ? st_->refs.load(std::memory_order_relaxed) : 0;
  }

  /* The recording methods are const: a SharedStream is a handle, and
   * recording changes the stream it names (the library's sequence and the
   * shared block's open flag), never the handle itself, as
   * std::shared_ptr's operator* is const. So a copy captured by value in a
   * lambda that is not mutable records: [shared](auto n) { shared.token(n); }.
   * Only assignment, reset() and destruction change the handle. */
  int mark(ttft_phase p, Time t = now_tag) const noexcept {
    if (!open()) return TTFT_ESTALE;
    return ttft_mark(st_->r, st_->seq, p, t.ns());
  }
  int mark_scheduled(Time t = now_tag) const noexcept { return mark(TTFT_PHASE_SCHEDULED, t); }
  int mark_preempted(Time t = now_tag) const noexcept { return mark(TTFT_PHASE_PREEMPTED, t); }
  int mark_resumed(Time t = now_tag) const noexcept { return mark(TTFT_PHASE_RESUMED, t); }
  int token(std::uint32_t n = 1, Time t = now_tag) const noexcept {
    if (!open()) return TTFT_ESTALE;
    return ttft_token_emitted(st_->r, st_->seq, n, t.ns());
  }
  int annotate(std::uint32_t prompt_tokens, std::optional<bool> prefix_hit = std::nullopt) const noexcept {
    if (!open()) return TTFT_ESTALE;
    return ttft_annotate(st_->r, st_->seq, prompt_tokens, prefix_hit ? (*prefix_hit ? 1 : 0) : -1);
  }
  int annotate_cached(std::uint32_t prompt_tokens, std::uint32_t cached_tokens) const noexcept {
    if (!open()) return TTFT_ESTALE;
    return ttft_annotate_cached(st_->r, st_->seq, prompt_tokens, cached_tokens);
  }
  /* Close the stream for every copy. Exactly one of several copies racing
   * here calls the library; the others return TTFT_ESTALE. TTFT_EINVAL for
   * an unknown status (the stream stays open). */
  int end(ttft_status st, Time t = now_tag) const noexcept {
    if (st_ == nullptr) return TTFT_ESTALE;
    if (static_cast<unsigned>(st) >= static_cast<unsigned>(TTFT_STATUS_COUNT_)) return TTFT_EINVAL;
    /* relaxed: the exchange alone picks one ender; the library orders the
     * end against hooks of other threads */
    if (!st_->open.exchange(false, std::memory_order_relaxed)) return TTFT_ESTALE;
    return ttft_stream_end(st_->r, st_->seq, st, t.ns());
  }
  std::optional<ttft_seq_info> stats() const noexcept {
    if (!open()) return std::nullopt;
    ttft_seq_info info;
    std::memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (ttft_seq_stats(st_->r, st_->seq, &info) != TTFT_OK) return std::nullopt;
    return info;
  }

 private:
  friend class Registry;
  struct State {
    State(ttft_registry *reg, ttft_seq s) noexcept : r(reg), seq(s) {}
    ttft_registry *r;
    ttft_seq seq;
    std::atomic<long> refs{1};
    std::atomic<bool> open{true};
  };
  State *st_ = nullptr;
};

// ------------------------------------------------------------- http server

/* The optional /metrics endpoint; stops and joins its thread on destruction. */
class HttpServer {
 public:
  HttpServer() noexcept = default;
  explicit HttpServer(ttft_http *adopt) noexcept : h_(adopt) {}
  ~HttpServer() { ttft_http_stop(h_); }
  HttpServer(HttpServer &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  HttpServer &operator=(HttpServer &&o) noexcept {
    if (this != &o) {
      ttft_http_stop(h_);
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  HttpServer(const HttpServer &) = delete;
  HttpServer &operator=(const HttpServer &) = delete;
  int port() const noexcept { return ttft_http_port(h_); }
  void stop() noexcept { ttft_http_stop(std::exchange(h_, nullptr)); }
  explicit operator bool() const noexcept { return h_ != nullptr; }

 private:
  ttft_http *h_ = nullptr;
};

// ------------------------------------------------------------ OTLP pusher

/* An OpenTelemetry pusher (ttft_otlp_start, since 1.3). Move-only; the
 * destructor (or stop()) makes a last push, joins the thread and frees it
 * (in a forked child: frees the copy only). */
class OtlpPusher {
 public:
  OtlpPusher() noexcept = default;
  explicit OtlpPusher(ttft_otlp *adopt) noexcept : o_(adopt) {}
  ~OtlpPusher() { ttft_otlp_stop(o_); }
  OtlpPusher(OtlpPusher &&o) noexcept : o_(std::exchange(o.o_, nullptr)) {}
  OtlpPusher &operator=(OtlpPusher &&o) noexcept {
    if (this != &o) {
      ttft_otlp_stop(o_);
      o_ = std::exchange(o.o_, nullptr);
    }
    return *this;
  }
  OtlpPusher(const OtlpPusher &) = delete;
  OtlpPusher &operator=(const OtlpPusher &) = delete;
  /* Push now and wait for the answer; throws Error(TTFT_EIO) when retries
   * ran out or the collector refused the batch, Error(TTFT_EINVAL) when
   * stopped. */
  void flush() {
    const int rc = ttft_otlp_flush(o_);
    if (rc != TTFT_OK) throw Error(rc, "ttft_otlp_flush");
  }
  /* What the pusher has done so far (ttft_otlp_stats: pushes, accepted,
   * failed, dropped, retries, bytes_sent, last_status, last_error); throws
   * Error(TTFT_EINVAL) when stopped. Not beside stop(). */
  ttft_otlp_info stats() const {
    ttft_otlp_info info{};
    info.struct_size = sizeof info;
    const int rc = ttft_otlp_stats(o_, &info);
    if (rc != TTFT_OK) throw Error(rc, "ttft_otlp_stats");
    return info;
  }
  void stop() noexcept { ttft_otlp_stop(std::exchange(o_, nullptr)); }
  explicit operator bool() const noexcept { return o_ != nullptr; }

 private:
  ttft_otlp *o_ = nullptr;
};

// ---------------------------------------------------------------- registry

/* Owns a ttft_registry. Move-only. Must outlive its Streams and HttpServer. */
class Registry {
 public:
  /* Throws Error(TTFT_EINVAL) when the library refuses the configuration,
   * its what() carrying the reason (ttft_config_check: which field, which
   * value, which rule), and Error(TTFT_ENOMEM) when memory is short. */
  explicit Registry(const Config &cfg = Config()) {
    std::vector<ttft_label> labels;
    const ttft_config c = cfg.c_config(labels);
    r_ = create(&c);
  }
  explicit Registry(const ttft_config &cfg) : r_(create(&cfg)) {}
  /* Adopt a registry from the C API (not NULL). */
  static Registry adopt(ttft_registry *r) {
    if (r == nullptr) throw Error(TTFT_EINVAL, "ttft::Registry::adopt");
    return Registry(r, adopt_tag{});
  }
  ~Registry() { ttft_registry_free(r_); }
  Registry(Registry &&o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
  Registry &operator=(Registry &&o) noexcept {
    if (this != &o) {
      ttft_registry_free(r_);
      r_ = std::exchange(o.r_, nullptr);
    }
    return *this;
  }
  Registry(const Registry &) = delete;
  Registry &operator=(const Registry &) = delete;

  ttft_registry *get() const noexcept { return r_; }
  ttft_registry *release() noexcept { return std::exchange(r_, nullptr); }
  explicit operator bool() const noexcept { return r_ != nullptr; }

  // --- classes (set-up; throw)
  Class add_class(const std::string &name, const Slo &slo = Slo()) {
    const int id = ttft_class_add(r_, name.c_str(), &slo.c_slo());
    if (id < 0) throw Error(id, "ttft_class_add");
    return Class(id);
  }
  std::optional<Class> find_class(const std::string &name) const noexcept {
    const int id = ttft_class_find(r_, name.c_str());
    if (id < 0) return std::nullopt;
    return Class(id);
  }

  // --- hooks (noexcept; an empty Stream when no slot is free or t is a
  // wall-clock time: try_begin says which)
  Stream begin(Time t = now_tag) noexcept { return Stream(r_, ttft_begin(r_, t.ns())); }
  Stream begin(const Request &req, Time t = now_tag) noexcept {
    return Stream(r_, ttft_begin_ex(r_, &req.c_request(), t.ns()));
  }
  /* begin that says why a begin was refused (ttft_begin_checked, since
   * 1.3): rc = TTFT_OK, TTFT_EFULL (no free slot), TTFT_ECLOCK (t is a
   * wall-clock time — system_clock or time(2) ns — not the monotonic
   * clock; counted CLOCK_REFUSED) or TTFT_EINVAL (unknown class: the
   * Request's cls() names a class of another registry?); the Stream is
   * empty unless rc is TTFT_OK. ttft_strerror(rc) says it in words. */
  Stream try_begin(int &rc, Time t = now_tag) noexcept {
    ttft_seq s = 0;
    rc = ttft_begin_checked(r_, nullptr, t.ns(), &s);
    return Stream(r_, s);
  }
  Stream try_begin(const Request &req, int &rc, Time t = now_tag) noexcept {
    ttft_seq s = 0;
    rc = ttft_begin_checked(r_, &req.c_request(), t.ns(), &s);
    return Stream(r_, s);
  }
  /* A stream whose copies share it (SharedStream), for callback-style
   * servers. Empty (nothing begun) when no slot is free (counted as
   * DROPPED) or when its small block cannot be allocated (not counted). */
  SharedStream begin_shared(Time t = now_tag) noexcept { return begin_shared_(nullptr, t); }
  SharedStream begin_shared(const Request &req, Time t = now_tag) noexcept {
    return begin_shared_(&req.c_request(), t);
  }

  /* Hooks by handle: for a thread that does not own the Stream (the
   * engine loop of a server whose HTTP handler owns it). */
  int end(ttft_seq s, ttft_status st, Time t = now_tag) noexcept {
    return ttft_stream_end(r_, s, st, t.ns());
  }
  int mark(ttft_seq s, ttft_phase p, Time t = now_tag) noexcept { return ttft_mark(r_, s, p, t.ns()); }
  int annotate(ttft_seq s, std::uint32_t prompt_tokens,
               std::optional<bool> prefix_hit = std::nullopt) noexcept {
    return ttft_annotate(r_, s, prompt_tokens, prefix_hit ? (*prefix_hit ? 1 : 0) : -1);
  }
  int annotate_cached(ttft_seq s, std::uint32_t prompt_tokens, std::uint32_t cached_tokens) noexcept {
    return ttft_annotate_cached(r_, s, prompt_tokens, cached_tokens);
  }

  /* One decode step (ttft_step_emitted): seqs[i] emitted n_tokens[i]
   * tokens (n_tokens nullptr or omitted: 1 each; 0 = no emission), all at
   * t (now: one clock read for the step). Returns the emissions accepted;
   * ended handles are skipped and counted as TTFT_COUNTER_STALE.
   * TTFT_EINVAL for a NULL registry, NULL seqs with count > 0, or vectors
   * of different sizes. The pointer form has the C call's argument order. */
  long step_emitted(const ttft_seq *seqs, const std::uint32_t *n_tokens, std::size_t count,
                    Time t = now_tag) noexcept {
    return ttft_step_emitted(r_, seqs, n_tokens, count, t.ns());
  }
  long step_emitted(const std::vector<ttft_seq> &seqs, Time t = now_tag) noexcept {
    return ttft_step_emitted(r_, seqs.data(), nullptr, seqs.size(), t.ns());
  }
  long step_emitted(const std::vector<ttft_seq> &seqs, const std::vector<std::uint32_t> &n_tokens,
                    Time t = now_tag) noexcept {
    if (seqs.size() != n_tokens.size()) return TTFT_EINVAL;
    return ttft_step_emitted(r_, seqs.data(), n_tokens.data(), seqs.size(), t.ns());
  }

  /* One engine iteration (ttft_engine_step), recorded when it ends and
   * before the tokens it produced: what gives every stall its cause and
   * fills the engine-step histograms. TTFT_OK or TTFT_EINVAL. */
  int engine_step(const ttft_step_info &info, Time start, Time end = now_tag) noexcept {
    return ttft_engine_step(r_, &info, start.ns(), end.ns());
  }
  int engine_step(std::uint32_t prefill_tokens, Time start, Time end = now_tag) noexcept {
    ttft_step_info info;
    ttft_step_info_init(&info);
    info.prefill_tokens = prefill_tokens;
    return ttft_engine_step(r_, &info, start.ns(), end.ns());
  }

  // --- state (noexcept)
  std::uint64_t now_ns() const noexcept { return ttft_registry_now_ns(r_); }
  long inflight() const noexcept { return ttft_inflight(r_); }
  long stalled_now(Time t = now_tag) const noexcept { return ttft_stalled_now(r_, t.ns()); }
  std::size_t memory() const noexcept { return ttft_registry_memory(r_); }
  int thread_release() noexcept { return ttft_thread_release(r_); }

  // --- reads (throw)
  Snapshot snapshot() const {
    ttft_snapshot *s = ttft_snapshot_take(r_);
    if (s == nullptr) throw Error(r_ == nullptr ? TTFT_EINVAL : TTFT_ENOMEM, "ttft_snapshot_take");
    return Snapshot(s);
  }
  /* Publish this registry's state into its segment of shared_dir now
   * (ttft_publish; the background thread does it every
   * publish_interval_ms). Throws Error: TTFT_EINVAL without shared_dir,
   * TTFT_EIO when writing failed (counted in PUBLISH_FAILED; recording
   * goes on), TTFT_ENOMEM. Since 1.3. */
  void publish() {
    const int rc = ttft_publish(r_);
    if (rc != TTFT_OK) throw Error(rc, "ttft_publish");
  }
  /* Start the HTTP endpoint (see ttft_http_start); the Registry must
   * outlive the returned server. */
  HttpServer serve(const char *addr) {
    ttft_http *h = nullptr;
    const int rc = ttft_http_start(r_, addr, &h);
    if (rc != TTFT_OK) throw Error(rc, "ttft_http_start");
    return HttpServer(h);
  }
  /* Push to an OpenTelemetry Collector (see ttft_otlp_start): c nullptr
   * means ttft_otlp_config_init's (the OTEL_* environment). Throws Error
   * with the library's reason in what() (an https:// or bad URL, bad
   * headers: TTFT_EINVAL). The Registry must outlive the pusher. Since 1.3. */
  OtlpPusher otlp_start(const ttft_otlp_config *c = nullptr) {
    ttft_otlp *o = nullptr;
    char msg[512];
    const int rc = ttft_otlp_start_msg(r_, c, &o, msg, sizeof msg);
    if (rc != TTFT_OK) throw Error(rc, ("ttft_otlp_start: " + std::string(msg)).c_str());
    return OtlpPusher(o);
  }
  /* The same with endpoint (a base URL: /v1/metrics is appended) over the
   * environment's configuration. */
  OtlpPusher otlp_start(const char *endpoint) {
    ttft_otlp_config c;
    ttft_otlp_config_init(&c);
    c.endpoint = endpoint;
    return otlp_start(&c);
  }

 private:
  struct adopt_tag {};
  Registry(ttft_registry *r, adopt_tag) noexcept : r_(r) {}
  SharedStream begin_shared_(const ttft_request *req, Time t) noexcept {
    SharedStream out;
    SharedStream::State *st = new (std::nothrow) SharedStream::State(r_, 0);
    if (st == nullptr) return out;
    st->seq = req != nullptr ? ttft_begin_ex(r_, req, t.ns()) : ttft_begin(r_, t.ns());
    if (st->seq == 0) {
      delete st;
      return out;
    }
    out.st_ = st;
    return out;
  }
  static ttft_registry *create(const ttft_config *c) {
    const std::string why = config_problem(*c);
    if (!why.empty()) throw Error(TTFT_EINVAL, ("ttft_registry_new: invalid configuration: " + why).c_str());
    ttft_registry *r = ttft_registry_new(c);
    if (r == nullptr) throw Error(TTFT_ENOMEM, "ttft_registry_new");
    return r;
  }
  ttft_registry *r_ = nullptr;
};

// ------------------------------------------------------------------ gather

/* Owns a ttft_gather: every process that published into a directory
 * (Config::shared_dir), merged. Move-only. Since 1.3.
 *
 *     ttft::Gather g{"/dev/shm/myserver"};
 *     ttft::Snapshot all = g.take();      // every process, one snapshot
 */
class Gather {
 public:
  Gather() noexcept = default;
  /* ttft_gather_open_msg(dir, flags): flags 0 or TTFT_GATHER_BY_PROCESS.
   * Throws Error whose what() carries the library's reason: TTFT_EIO for a
   * missing directory, one open to others or of another user, or a network
   * file system (errno_value() says which: ENOENT, EACCES, EREMOTE),
   * TTFT_EINVAL for unknown flags, TTFT_ENOMEM. */
  explicit Gather(const std::string &dir, unsigned flags = 0) {
    char msg[512] = "";
    errno = 0;
    g_ = ttft_gather_open_msg(dir.c_str(), flags, msg, sizeof msg);
    if (g_ == nullptr) {
      const int e = errno;
      const int code = e == ENOMEM ? TTFT_ENOMEM : e == EINVAL ? TTFT_EINVAL : TTFT_EIO;
      throw GatherError(code, e, "ttft_gather_open: " + std::string(msg[0] != 0 ? msg : dir.c_str()));
    }
  }
  ~Gather() { ttft_gather_close(g_); }
  Gather(Gather &&o) noexcept : g_(std::exchange(o.g_, nullptr)) {}
  Gather &operator=(Gather &&o) noexcept {
    if (this != &o) {
      ttft_gather_close(g_);
      g_ = std::exchange(o.g_, nullptr);
    }
    return *this;
  }
  Gather(const Gather &) = delete;
  Gather &operator=(const Gather &) = delete;

  /* Why opening failed: Error plus the errno the library set. */
  class GatherError : public Error {
   public:
    GatherError(int code, int err, const std::string &where) : Error(code, where.c_str()), errno_(err) {}
    int errno_value() const noexcept { return errno_; }

   private:
    int errno_;
  };

  /* One merged snapshot of every process of the directory (live ones'
   * latest segments and the archive of those that exited). Thread-safe:
   * concurrent takes share one merge. Throws Error (TTFT_EINVAL on an
   * empty Gather, TTFT_ENOMEM, TTFT_EIO when the directory is gone). */
  Snapshot take() const {
    if (g_ == nullptr) throw Error(TTFT_EINVAL, "ttft_gather_take");
    errno = 0;
    ttft_snapshot *s = ttft_gather_take(g_);
    if (s == nullptr) throw Error(errno == ENOMEM ? TTFT_ENOMEM : TTFT_EIO, "ttft_gather_take");
    return Snapshot(s);
  }
  /* Serve this gather over HTTP (ttft_http_start_gather); the Gather must
   * outlive the returned server. Throws Error with the library's reason. */
  HttpServer serve(const char *addr) {
    ttft_http *h = nullptr;
    char msg[256] = "";
    const int rc = ttft_http_start_gather(g_, addr, &h, msg, sizeof msg);
    if (rc != TTFT_OK) throw Error(rc, ("ttft_http_start_gather: " + std::string(msg)).c_str());
    return HttpServer(h);
  }
  /* Close now (the destructor does it otherwise). Must not race take(). */
  void close() noexcept { ttft_gather_close(std::exchange(g_, nullptr)); }
  ttft_gather *get() const noexcept { return g_; }
  ttft_gather *release() noexcept { return std::exchange(g_, nullptr); }
  explicit operator bool() const noexcept { return g_ != nullptr; }

 private:
  ttft_gather *g_ = nullptr;
};

// ------------------------------------------------------------------- names

inline const char *version() noexcept { return ttft_version_string(); }
inline const char *name(ttft_metric m) noexcept { return ttft_metric_name(m); }
inline const char *name(ttft_counter c) noexcept { return ttft_counter_name(c); }
inline const char *name(ttft_status s) noexcept { return ttft_status_name(s); }
inline const char *name(ttft_format f) noexcept { return ttft_format_name(f); }

}  // namespace ttft

#endif /* TTFT_HPP */
