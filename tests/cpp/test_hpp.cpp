// test_hpp.cpp — ttft.hpp: RAII, move semantics, chrono quantiles, errors,
// and the 1.1 additions: SharedStream (copies, last owner cancels, threads),
// step_emitted, annotate, status views, the 1.1 Config fields.
//
// Built by tests/cpp.cmake with g++ and clang++, -std=c++17 and c++20,
// -Wall -Wextra -Werror (and more), linked against libttft.so, and run.
// Every timestamp is explicit, so every expected value is exact.
#include <ttft.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__unix__)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#endif

using namespace std::chrono_literals;

namespace {

int g_failures = 0;
int g_checks = 0;

template <class T>
std::string repr(const T &v) {
  std::ostringstream o;
  o << v;
  return o.str();
}
template <class R, class P>
std::string repr(const std::chrono::duration<R, P> &d) {
  return repr(std::chrono::duration_cast<std::chrono::duration<double, std::nano>>(d).count()) + "ns";
}
std::string repr(const std::string &s) { return "\"" + s + "\""; }

template <class A, class B>
void expect_eq(const A &actual, const B &expected, const char *a_src, const char *b_src,
               const char *file, int line) {
  g_checks++;
  if (!(actual == expected)) {
    g_failures++;
    std::cerr << file << ":" << line << ": FAILED " << a_src << " == " << b_src
              << "\n    expected: " << repr(expected) << "\n    actual:   " << repr(actual) << "\n";
  }
}

void expect_true(bool ok, const char *src, const char *file, int line) {
  g_checks++;
  if (!ok) {
    g_failures++;
    std::cerr << file << ":" << line << ": FAILED " << src << " (was false)\n";
  }
}

#define EXPECT_EQ(a, b) expect_eq((a), (b), #a, #b, __FILE__, __LINE__)
#define EXPECT_TRUE(x) expect_true(static_cast<bool>(x), #x, __FILE__, __LINE__)
#define EXPECT_STREQ(a, b) expect_eq(std::string(a), std::string(b), #a, #b, __FILE__, __LINE__)
/* Expect that stmt throws ttft::Error with code want. */
#define EXPECT_THROWS_CODE(stmt, want)                                                   \
  do {                                                                                   \
    int got_ = 1;                                                                        \
    try {                                                                                \
      stmt;                                                                              \
    } catch (const ttft::Error &e_) {                                                    \
      got_ = e_.code();                                                                  \
    }                                                                                    \
    expect_eq(got_, static_cast<int>(want), "code thrown by " #stmt, #want, __FILE__,    \
              __LINE__);                                                                 \
  } while (0)

constexpr std::uint64_t T0 = 1000000000ull;  // 1 s after the clock's epoch

// ------------------------------------------------------------ type traits
static_assert(!std::is_copy_constructible<ttft::Registry>::value, "Registry is move-only");
static_assert(!std::is_copy_assignable<ttft::Registry>::value, "Registry is move-only");
static_assert(std::is_nothrow_move_constructible<ttft::Registry>::value, "");
static_assert(std::is_nothrow_move_assignable<ttft::Registry>::value, "");
static_assert(!std::is_copy_constructible<ttft::Stream>::value, "Stream is move-only");
static_assert(!std::is_copy_assignable<ttft::Stream>::value, "Stream is move-only");
static_assert(std::is_nothrow_move_constructible<ttft::Stream>::value, "");
static_assert(std::is_nothrow_move_assignable<ttft::Stream>::value, "");
static_assert(std::is_nothrow_destructible<ttft::Stream>::value, "");
static_assert(!std::is_copy_constructible<ttft::Snapshot>::value, "Snapshot is move-only");
static_assert(std::is_nothrow_move_constructible<ttft::Snapshot>::value, "");
static_assert(std::is_nothrow_move_assignable<ttft::Snapshot>::value, "");
static_assert(!std::is_copy_constructible<ttft::HttpServer>::value, "");
static_assert(!std::is_copy_constructible<ttft::OtlpPusher>::value && std::is_nothrow_move_constructible<ttft::OtlpPusher>::value, "");
static_assert(std::is_base_of<std::runtime_error, ttft::Error>::value, "Error is a runtime_error");
static_assert(noexcept(std::declval<ttft::Stream &>().token()), "hooks never throw");
static_assert(noexcept(std::declval<ttft::Stream &>().end(TTFT_COMPLETED)), "hooks never throw");
static_assert(noexcept(std::declval<ttft::Stream &>().mark_scheduled()), "hooks never throw");
static_assert(noexcept(std::declval<ttft::Registry &>().begin()), "hooks never throw");
static_assert(noexcept(std::declval<const ttft::Snapshot &>().quantile(TTFT_METRIC_TTFT, 0.5)), "");
static_assert(std::is_same<decltype(std::declval<const ttft::Snapshot &>().quantile(TTFT_METRIC_TTFT, 0.5)),
                           std::chrono::nanoseconds>::value,
              "quantiles are chrono durations");
static_assert(std::is_convertible<std::chrono::steady_clock::time_point, ttft::Time>::value, "");
static_assert(std::is_copy_constructible<ttft::SharedStream>::value, "SharedStream is copyable");
static_assert(std::is_copy_assignable<ttft::SharedStream>::value, "");
static_assert(std::is_nothrow_copy_constructible<ttft::SharedStream>::value, "");
static_assert(std::is_nothrow_copy_assignable<ttft::SharedStream>::value, "");
static_assert(std::is_nothrow_move_constructible<ttft::SharedStream>::value, "");
static_assert(std::is_nothrow_move_assignable<ttft::SharedStream>::value, "");
static_assert(std::is_nothrow_destructible<ttft::SharedStream>::value, "");
static_assert(!std::is_convertible<ttft::Stream &&, ttft::SharedStream>::value,
              "taking a Stream's ownership is explicit");
static_assert(noexcept(std::declval<ttft::Registry &>().begin_shared()), "hooks never throw");
static_assert(noexcept(std::declval<ttft::Registry &>().step_emitted(std::vector<ttft_seq>())), "");
static_assert(noexcept(std::declval<ttft::Stream &>().annotate(1u)), "");
static_assert(noexcept(std::declval<ttft::SharedStream &>().end(TTFT_COMPLETED)), "");
static_assert(std::is_convertible<std::uint64_t, ttft::Time>::value, "");
static_assert(ttft::Time().is_now() && ttft::Time(ttft::now_tag).is_now(), "");
static_assert(ttft::Class().id() == TTFT_CLASS_DEFAULT && ttft::Class::all().id() == TTFT_CLASS_ALL, "");

ttft::Registry small_registry(std::uint32_t slots = 16) {
  return ttft::Registry(ttft::Config().max_inflight(slots).max_threads(2).stall_threshold(10ms));
}

std::uint64_t counter(const ttft::Registry &r, ttft_counter c) { return r.snapshot().counter(c); }

// ---------------------------------------------------------------- errors
void test_error_mapping() {
#define CHECK_CODE(N, V, M)                                                           \
  {                                                                                   \
    ttft::Error e(TTFT_##N, "where");                                                 \
    EXPECT_EQ(e.code(), (V));                                                         \
    EXPECT_STREQ(e.name(), "TTFT_" #N);                                               \
    EXPECT_STREQ(e.what(), std::string("where: TTFT_" #N " (") + (M) + ")");         \
    EXPECT_EQ(e.error_code().value(), (V));                                           \
    EXPECT_STREQ(e.error_code().category().name(), "ttft");                           \
    EXPECT_STREQ(e.error_code().message(), ttft_strerror(V));                         \
    EXPECT_STREQ(ttft_strerror(V), (M));                                              \
    EXPECT_THROWS_CODE(ttft::check((V), "x"), (V));                                   \
  }
  TTFT_ERRNO_MAP(CHECK_CODE)
#undef CHECK_CODE
  EXPECT_EQ(ttft::check(0), 0);
  EXPECT_EQ(ttft::check(7), 7);
  EXPECT_TRUE(&ttft::error_category() == &ttft::Error(TTFT_EINVAL).error_code().category());
  // An Error is catchable as std::runtime_error with the same text.
  std::string what;
  try {
    throw ttft::Error(TTFT_EFULL, "ttft_class_add");
  } catch (const std::runtime_error &e) {
    what = e.what();
  }
  EXPECT_STREQ(what, std::string("ttft_class_add: TTFT_EFULL (") + ttft_strerror(TTFT_EFULL) + ")");
}

// ------------------------------------------------------------------ RAII
void handler_that_throws(ttft::Registry &reg, bool emit_first) {
  ttft::Stream s = reg.begin(T0);
  if (emit_first) EXPECT_EQ(s.token(1, T0 + 1000), TTFT_OK);
  throw std::runtime_error("client handler failed");
}

bool handler_with_early_return(ttft::Registry &reg, bool bail) {
  ttft::Stream s = reg.begin(ttft::Request().prompt_tokens(10), T0);
  EXPECT_TRUE(s.open());
  if (bail) return false;  // the destructor ends the stream as CANCELLED
  EXPECT_EQ(s.token(1, T0 + 10), TTFT_OK);
  EXPECT_EQ(s.end(TTFT_COMPLETED, T0 + 20), TTFT_OK);
  EXPECT_TRUE(!s.open());
  return true;
}

void test_raii_cancels() {
  ttft::Registry reg = small_registry();
  for (int i = 0; i < 2; i++) {
    bool caught = false;
    try {
      handler_that_throws(reg, i == 1);
    } catch (const std::runtime_error &) {
      caught = true;
    }
    EXPECT_TRUE(caught);
  }
  EXPECT_EQ(reg.inflight(), 0L);
  ttft::Snapshot s = reg.snapshot();
  EXPECT_EQ(s.counter(TTFT_COUNTER_BEGUN), 2u);
  EXPECT_EQ(s.counter(TTFT_COUNTER_CANCELLED), 2u);
  EXPECT_EQ(s.counter(TTFT_COUNTER_COMPLETED), 0u);
  EXPECT_EQ(s.counter(TTFT_COUNTER_ABANDONED), 1u);  // the one without a token
  EXPECT_EQ(s.count(TTFT_METRIC_TTFT), 1u);
  EXPECT_EQ(s.quantile(TTFT_METRIC_TTFT, 0.5), std::chrono::nanoseconds(1000));

  EXPECT_TRUE(!handler_with_early_return(reg, true));
  EXPECT_TRUE(handler_with_early_return(reg, false));
  EXPECT_EQ(reg.inflight(), 0L);
  s = reg.snapshot();
  EXPECT_EQ(s.counter(TTFT_COUNTER_CANCELLED), 3u);
  EXPECT_EQ(s.counter(TTFT_COUNTER_COMPLETED), 1u);
  EXPECT_EQ(s.counter(TTFT_COUNTER_ABANDONED), 2u);

  // A stream that ended normally is not cancelled again by its destructor.
  {
    ttft::Stream t = reg.begin(T0);
    EXPECT_EQ(t.token(2, T0 + 5), TTFT_OK);
    EXPECT_EQ(t.end(TTFT_ERROR, T0 + 6), TTFT_OK);
    EXPECT_EQ(t.end(TTFT_COMPLETED, T0 + 7), TTFT_ESTALE);  // empty now
    EXPECT_EQ(t.token(1, T0 + 8), TTFT_ESTALE);
  }
  s = reg.snapshot();
  EXPECT_EQ(s.counter(TTFT_COUNTER_CANCELLED), 3u);
  EXPECT_EQ(s.counter(TTFT_COUNTER_ERRORS), 1u);

  // A bad status keeps the stream open; the destructor still cancels it.
  {
    ttft::Stream t = reg.begin(T0);
    EXPECT_EQ(t.end(TTFT_STATUS_COUNT_, T0 + 1), TTFT_EINVAL);
    EXPECT_TRUE(t.open());
  }
  EXPECT_EQ(counter(reg, TTFT_COUNTER_CANCELLED), 4u);
  EXPECT_EQ(reg.inflight(), 0L);

  // release() hands the handle to the caller: the destructor leaves it.
  ttft_seq raw = 0;
  {
    ttft::Stream t = reg.begin(T0);
    raw = t.release();
    EXPECT_TRUE(raw != 0);
    EXPECT_TRUE(!t.open());
  }
  EXPECT_EQ(reg.inflight(), 1L);
  EXPECT_EQ(reg.end(raw, TTFT_COMPLETED, T0 + 1), TTFT_OK);
  EXPECT_EQ(reg.inflight(), 0L);
}

// ------------------------------------------------------------------ moves
void test_moves() {
  ttft::Registry reg = small_registry();
  ttft::Stream a = reg.begin(T0);
  const ttft_seq h = a.handle();
  EXPECT_TRUE(h != 0);

  ttft::Stream b(std::move(a));
  EXPECT_EQ(b.handle(), h);
  EXPECT_TRUE(!a.open());            // NOLINT(bugprone-use-after-move): documented state
  EXPECT_EQ(a.token(1, T0 + 1), TTFT_ESTALE);  // NOLINT
  EXPECT_EQ(b.token(1, T0 + 1), TTFT_OK);

  // Move-assigning over an open stream cancels it first.
  ttft::Stream c = reg.begin(T0);
  EXPECT_EQ(reg.inflight(), 2L);
  c = std::move(b);
  EXPECT_EQ(c.handle(), h);
  EXPECT_EQ(reg.inflight(), 1L);
  EXPECT_EQ(counter(reg, TTFT_COUNTER_CANCELLED), 1u);
  EXPECT_EQ(counter(reg, TTFT_COUNTER_ABANDONED), 1u);

  // Self-move-assignment (through a reference, as generic code would) is a no-op.
  ttft::Stream &alias = c;
  c = std::move(alias);
  EXPECT_EQ(c.handle(), h);
  EXPECT_EQ(c.end(TTFT_COMPLETED, T0 + 2), TTFT_OK);
  EXPECT_EQ(reg.inflight(), 0L);

  // Streams live in containers and survive reallocation without ending.
  {
    std::vector<ttft::Stream> v;
    for (int i = 0; i < 10; i++) v.push_back(reg.begin(T0));
    EXPECT_EQ(reg.inflight(), 10L);
    for (auto &s : v) EXPECT_EQ(s.token(1, T0 + 100), TTFT_OK);
    EXPECT_EQ(reg.inflight(), 10L);
  }
  EXPECT_EQ(reg.inflight(), 0L);
  EXPECT_EQ(counter(reg, TTFT_COUNTER_CANCELLED), 11u);

  // Registry moves: the new owner works, the old one is empty.
  ttft::Registry r2(std::move(reg));
  EXPECT_TRUE(static_cast<bool>(r2));
  EXPECT_TRUE(!reg);  // NOLINT
  EXPECT_TRUE(reg.get() == nullptr);  // NOLINT
  EXPECT_THROWS_CODE(reg.snapshot(), TTFT_EINVAL);  // NOLINT
  EXPECT_TRUE(!reg.begin(T0).open());  // NOLINT: NULL registry -> empty stream
  EXPECT_EQ(r2.snapshot().counter(TTFT_COUNTER_BEGUN), 12u);
  ttft::Registry r3 = small_registry();
  r3 = std::move(r2);  // frees r3's registry, adopts r2's
  EXPECT_EQ(r3.snapshot().counter(TTFT_COUNTER_BEGUN), 12u);

  // Snapshot moves.
  ttft::Snapshot s1 = r3.snapshot();
  ttft::Snapshot s2(std::move(s1));
  EXPECT_TRUE(!s1);  // NOLINT
  EXPECT_EQ(s1.counter(TTFT_COUNTER_BEGUN), 0u);  // NOLINT: empty answers 0
  EXPECT_EQ(s2.counter(TTFT_COUNTER_BEGUN), 12u);
  s1 = std::move(s2);
  EXPECT_EQ(s1.counter(TTFT_COUNTER_BEGUN), 12u);

  // Adopting a C registry.
  ttft::Registry r4 = ttft::Registry::adopt(ttft_registry_new(nullptr));
  EXPECT_TRUE(static_cast<bool>(r4));
  EXPECT_THROWS_CODE(ttft::Registry::adopt(nullptr), TTFT_EINVAL);
}

// ------------------------------------------------------------- quantiles
void test_quantiles() {
  ttft::Registry reg = small_registry();
  // Three streams with TTFT 1, 2, 3 ms and one with 4 tokens 500 ns apart
  // after its first, so TPOT = 500 ns exactly.
  for (std::uint64_t k = 1; k <= 3; k++) {
    ttft::Stream s = reg.begin(T0);
    EXPECT_EQ(s.mark_scheduled(T0 + 10), TTFT_OK);
    EXPECT_EQ(s.token(1, T0 + k * 1000000), TTFT_OK);
    if (k == 3) {
      EXPECT_EQ(s.token(1, T0 + k * 1000000 + 500), TTFT_OK);
      EXPECT_EQ(s.token(2, T0 + k * 1000000 + 1000), TTFT_OK);  // multi-token step
      EXPECT_EQ(s.token(1, T0 + k * 1000000 + 1500), TTFT_OK);
    }
    EXPECT_EQ(s.end(TTFT_COMPLETED, T0 + 4000000), TTFT_OK);
  }
  ttft::Snapshot snap = reg.snapshot();
  EXPECT_EQ(snap.count(TTFT_METRIC_TTFT), 3u);
  EXPECT_EQ(snap.quantile(TTFT_METRIC_TTFT, 0.0), std::chrono::nanoseconds(1ms));
  EXPECT_EQ(snap.quantile(TTFT_METRIC_TTFT, 1.0), std::chrono::nanoseconds(3ms));
  const auto p50 = snap.quantile(TTFT_METRIC_TTFT, 0.5);
  EXPECT_TRUE(p50 >= 1990us && p50 <= 2010us);  // within 0.5 % of 2 ms
  EXPECT_EQ(snap.mean(TTFT_METRIC_TTFT), (std::chrono::duration<double, std::nano>(2e6)));
  EXPECT_EQ(snap.sum(TTFT_METRIC_TTFT), 6000000u);
  // ITL: three gaps of exactly 500 ns (the 2-token step is one gap).
  EXPECT_EQ(snap.count(TTFT_METRIC_ITL), 3u);
  EXPECT_EQ(snap.quantile(TTFT_METRIC_ITL, 0.5), std::chrono::nanoseconds(500));
  // TPOT = (t_last - t_first) / (N - 1) = 1500 / 4 = 375 ns; one stream has it.
  EXPECT_EQ(snap.count(TTFT_METRIC_TPOT), 1u);
  EXPECT_EQ(snap.quantile(TTFT_METRIC_TPOT, 0.99), std::chrono::nanoseconds(375));
  EXPECT_EQ(snap.counter(TTFT_COUNTER_NO_TPOT), 2u);
  EXPECT_EQ(snap.counter(TTFT_COUNTER_TOKENS), 7u);
  EXPECT_EQ(snap.quantile_value(TTFT_METRIC_OUTPUT_TOKENS, 1.0), 5u);  // tokens, not ns
  EXPECT_EQ(snap.quantile(TTFT_METRIC_QUEUE, 1.0), std::chrono::nanoseconds(10));
  EXPECT_EQ(snap.quantile(TTFT_METRIC_E2E, 0.5), std::chrono::nanoseconds(4ms));
  // Invalid input answers 0, never throws.
  EXPECT_EQ(snap.quantile(TTFT_METRIC_TTFT, 1.5), std::chrono::nanoseconds(0));
  EXPECT_EQ(snap.quantile(TTFT_METRIC_COUNT_, 0.5), std::chrono::nanoseconds(0));

  // steady_clock time points and library ns are one clock.
  const std::uint64_t a = ttft_now_ns();
  const std::uint64_t b = ttft::to_ns(std::chrono::steady_clock::now());
  const std::uint64_t c = ttft_now_ns();
  EXPECT_TRUE(a <= b);
  EXPECT_TRUE(b <= c);
  EXPECT_EQ(ttft::to_ns(ttft::to_time_point(T0)), T0);

  ttft::Registry r2 = small_registry();
  const auto tp = ttft::to_time_point(T0);
  {
    ttft::Stream s = r2.begin(tp);
    EXPECT_EQ(s.token(1, tp + 250ms), TTFT_OK);
    EXPECT_EQ(s.token(1, T0 + 250000000 + 40000000), TTFT_OK);  // raw ns mixes in
    EXPECT_EQ(s.end(TTFT_COMPLETED, tp + 1s), TTFT_OK);
  }
  ttft::Snapshot s2 = r2.snapshot();
  EXPECT_EQ(s2.quantile(TTFT_METRIC_TTFT, 0.5), std::chrono::nanoseconds(250ms));
  EXPECT_EQ(s2.quantile(TTFT_METRIC_ITL, 0.5), std::chrono::nanoseconds(40ms));
  EXPECT_EQ(s2.quantile(TTFT_METRIC_E2E, 0.5), std::chrono::nanoseconds(1s));
  EXPECT_EQ(s2.counter(TTFT_COUNTER_STALLS), 1u);  // 40 ms > the 10 ms budget
  EXPECT_EQ(s2.counter(TTFT_COUNTER_CLOCK_CLAMPED), 0u);
}

// --------------------------------------------------- classes, config, live
void test_classes_and_config() {
  ttft::Registry reg(ttft::Config()
                         .max_inflight(2)
                         .max_classes(4)
                         .model("m-7b")
                         .start_point("client_send")
                         .label("region", "eu")
                         .prompt_bands({100, 1000}));
  const ttft::Class chat = reg.add_class("chat", ttft::Slo().ttft(1ms).tpot(100us));
  EXPECT_TRUE(chat.id() >= 1);
  EXPECT_THROWS_CODE(reg.add_class("chat"), TTFT_EEXIST);
  EXPECT_THROWS_CODE(reg.add_class("bad name!"), TTFT_EINVAL);
  EXPECT_TRUE(reg.find_class("chat") == std::optional<ttft::Class>(chat));
  EXPECT_TRUE(!reg.find_class("nope").has_value());

  {  // good: TTFT 0.5 ms, completed
    ttft::Stream s = reg.begin(ttft::Request().cls(chat).prompt_tokens(50).prefix_hit(true), T0);
    EXPECT_TRUE(s.open());
    EXPECT_EQ(s.token(1, T0 + 500000), TTFT_OK);
    EXPECT_EQ(s.end(TTFT_COMPLETED, T0 + 600000), TTFT_OK);
  }
  {  // bad: TTFT 2 ms
    ttft::Stream s = reg.begin(ttft::Request().cls(chat).prompt_tokens(500).prefix_hit(false), T0);
    EXPECT_EQ(s.token(1, T0 + 2000000), TTFT_OK);
    // Live state while open.
    const auto info = s.stats();
    EXPECT_TRUE(info.has_value());
    if (info) {
      EXPECT_EQ(info->class_id, chat.id());
      EXPECT_EQ(info->tokens, 1u);
      EXPECT_EQ(info->ttft_ns, 2000000u);
    }
    // Slots: 2 max; one is held here, so one more begin fits and the next is dropped.
    ttft::Stream extra = reg.begin(T0);
    ttft::Stream dropped = reg.begin(T0);
    EXPECT_TRUE(extra.open());
    EXPECT_TRUE(!dropped.open());
    EXPECT_EQ(dropped.token(1, T0 + 1), TTFT_ESTALE);
    EXPECT_EQ(dropped.end(TTFT_COMPLETED, T0 + 1), TTFT_ESTALE);
    EXPECT_EQ(extra.end(TTFT_COMPLETED, T0 + 3), TTFT_OK);
    EXPECT_EQ(s.end(TTFT_COMPLETED, T0 + 3000000), TTFT_OK);
    EXPECT_TRUE(!s.stats().has_value());
  }
  ttft::Snapshot snap = reg.snapshot();
  EXPECT_EQ(snap.counter(TTFT_COUNTER_DROPPED), 1u);
  EXPECT_EQ(snap.counter(TTFT_COUNTER_BEGUN), 3u);
  EXPECT_TRUE(snap.attainment(chat) == std::optional<double>(0.5));
  EXPECT_EQ(snap.counter(TTFT_COUNTER_SLO_MET, chat), 1u);
  EXPECT_EQ(snap.count(TTFT_METRIC_TTFT, chat), 2u);
  EXPECT_EQ(snap.count(TTFT_METRIC_TTFT, ttft::Class::default_class()), 0u);
  EXPECT_EQ(snap.quantile(TTFT_METRIC_TTFT, 1.0, chat), std::chrono::nanoseconds(2ms));
  EXPECT_EQ(snap.classes(), 2);
  EXPECT_STREQ(snap.class_name(chat), "chat");
  EXPECT_TRUE(snap.class_name(ttft::Class(9)) == nullptr);
  EXPECT_TRUE(snap.find_class("chat") == std::optional<ttft::Class>(chat));
  const auto slo = snap.class_slo(chat);
  EXPECT_TRUE(slo.has_value());
  if (slo) {
    EXPECT_EQ(slo->ttft(), std::chrono::nanoseconds(1ms));
    EXPECT_EQ(slo->tpot(), std::chrono::nanoseconds(100us));
    EXPECT_EQ(slo->e2e(), std::chrono::nanoseconds(0));
  }
  EXPECT_STREQ(snap.label("model"), "m-7b");
  EXPECT_STREQ(snap.label("start_point"), "client_send");
  EXPECT_TRUE(snap.label("no-such-key") == nullptr);
  EXPECT_EQ(snap.bands(), 3u);
  const auto band1 = snap.band(1);
  EXPECT_TRUE(band1 == std::make_optional(std::make_pair(std::uint32_t{100}, std::uint32_t{1000})));
  EXPECT_TRUE(!snap.band(3).has_value());
  EXPECT_EQ(snap.split_count(TTFT_SPLIT_PREFIX_CACHE, 1), 1u);
  EXPECT_EQ(snap.split_quantile(TTFT_SPLIT_PREFIX_CACHE, 1, 0.5), std::chrono::nanoseconds(500us));
  EXPECT_EQ(snap.split_quantile(TTFT_SPLIT_PROMPT_BAND, 1, 0.5), std::chrono::nanoseconds(2ms));
  const auto iv = snap.interval();
  EXPECT_TRUE(iv.has_value() && iv->end_ns >= iv->start_ns);

  // Invalid configurations throw at construction.
  EXPECT_THROWS_CODE(ttft::Registry(ttft::Config().max_inflight(0)), TTFT_EINVAL);
  EXPECT_THROWS_CODE(ttft::Registry(ttft::Config().label("0bad", "x")), TTFT_EINVAL);
  EXPECT_THROWS_CODE(ttft::Config().prompt_bands({1, 2, 3, 4, 5, 6, 7, 8}), TTFT_EINVAL);
  EXPECT_THROWS_CODE(ttft::Config().stall_threshold(-1ms), TTFT_EINVAL);
  // ... and say why: the reserved label that killed a server at start
  EXPECT_TRUE(ttft::label_reserved("view") && ttft::label_reserved("__x") && !ttft::label_reserved("zone"));
  EXPECT_TRUE(ttft::Config().label("view", "engine").problem().find("\"view\" is reserved") != std::string::npos);
  EXPECT_TRUE(ttft::Config().problem().empty());
  {
    std::string what;
    try {
      ttft::Registry bad(ttft::Config().label("zone", "a").label("view", "engine"));
    } catch (const ttft::Error &e) {
      what = e.what();
      EXPECT_EQ(e.code(), TTFT_EINVAL);
    }
    EXPECT_TRUE(what.find("const_labels[1].name \"view\" is reserved") != std::string::npos);
  }
  EXPECT_THROWS_CODE(ttft::Slo().ttft(std::chrono::duration<double>(-0.5)), TTFT_EINVAL);
  // A C config works too, and fractional-second durations convert.
  ttft_config c;
  ttft_config_init(&c);
  c.max_inflight = 8;
  ttft::Registry from_c(c);
  const ttft::Class batch =
      from_c.add_class("batch", ttft::Slo().e2e(std::chrono::duration<double>(2.5)));
  EXPECT_EQ(from_c.snapshot().class_slo(batch)->e2e(), std::chrono::nanoseconds(2500ms));
  EXPECT_TRUE(from_c.memory() > 0);
}

// ----------------------------------------------------- output and codecs
void test_snapshot_io() {
  ttft::Registry reg = small_registry();
  for (int i = 1; i <= 5; i++) {
    ttft::Stream s = reg.begin(T0);
    EXPECT_EQ(s.token(1, T0 + static_cast<std::uint64_t>(i) * 1000), TTFT_OK);
    EXPECT_EQ(s.end(TTFT_COMPLETED, T0 + 100000), TTFT_OK);
  }
  ttft::Snapshot snap = reg.snapshot();
  for (ttft_format f : {TTFT_FORMAT_TEXT, TTFT_FORMAT_JSON, TTFT_FORMAT_PROMETHEUS}) {
    const std::string out = snap.format(f);
    // Same bytes as the C call into a buffer of exactly the announced size.
    const long n = ttft_snapshot_format(snap.get(), f, nullptr, 0);
    EXPECT_TRUE(n > 0);
    std::vector<char> buf(static_cast<std::size_t>(n) + 1);
    EXPECT_EQ(ttft_snapshot_format(snap.get(), f, buf.data(), buf.size()), n);
    EXPECT_EQ(out.size(), static_cast<std::size_t>(n));
    EXPECT_TRUE(out == std::string(buf.data()));
  }
  EXPECT_THROWS_CODE(snap.format(TTFT_FORMAT_COUNT_), TTFT_EINVAL);
  EXPECT_THROWS_CODE(ttft::Snapshot().format(TTFT_FORMAT_TEXT), TTFT_EINVAL);

  const std::vector<unsigned char> bytes = snap.encode();
  EXPECT_TRUE(!bytes.empty());
  ttft::Snapshot back = ttft::Snapshot::decode(bytes);
  EXPECT_EQ(back.count(TTFT_METRIC_TTFT), 5u);
  EXPECT_EQ(back.quantile(TTFT_METRIC_TTFT, 1.0), std::chrono::nanoseconds(5000));
  const std::string b64 = snap.encode_base64();
  EXPECT_EQ(ttft::Snapshot::decode_base64(b64).counter(TTFT_COUNTER_COMPLETED), 5u);
  std::vector<unsigned char> junk(bytes.size(), 0x5a);
  EXPECT_THROWS_CODE(ttft::Snapshot::decode(junk), TTFT_ECORRUPT);
  EXPECT_THROWS_CODE(ttft::Snapshot::decode_base64("!!not base64!!"), TTFT_ECORRUPT);

  ttft::Snapshot merged = ttft::Snapshot::merge(snap, back);
  EXPECT_EQ(merged.count(TTFT_METRIC_TTFT), 10u);
  EXPECT_EQ(merged.quantile(TTFT_METRIC_TTFT, 0.0), std::chrono::nanoseconds(1000));
  EXPECT_THROWS_CODE(ttft::Snapshot::merge(snap, ttft::Snapshot()), TTFT_EINVAL);

  {
    ttft::Stream s = reg.begin(T0);
    EXPECT_EQ(s.token(1, T0 + 7000), TTFT_OK);
    EXPECT_EQ(s.end(TTFT_COMPLETED, T0 + 8000), TTFT_OK);
  }
  ttft::Snapshot later = reg.snapshot();
  ttft::Snapshot d = ttft::Snapshot::delta(later, snap);
  EXPECT_EQ(d.count(TTFT_METRIC_TTFT), 1u);
  EXPECT_EQ(d.counter(TTFT_COUNTER_COMPLETED), 1u);
  EXPECT_THROWS_CODE(ttft::Snapshot::delta(snap, later), TTFT_EINVAL);  // wrong order

  EXPECT_STREQ(ttft::name(TTFT_METRIC_TTFT), "ttft");
  EXPECT_STREQ(ttft::name(TTFT_COUNTER_CANCELLED), "cancelled");
  EXPECT_STREQ(ttft::version(), TTFT_VERSION_STRING);
}

// ------------------------------------------------- cancel from another thread
void test_cross_thread_cancel() {
  ttft::Registry reg = small_registry();
  ttft::Stream s = reg.begin(T0);
  EXPECT_EQ(s.token(1, T0 + 100), TTFT_OK);
  const ttft_seq h = s.handle();  // copied before it crosses threads
  std::atomic<int> rc{1};
  std::thread canceller([&] { rc.store(reg.end(h, TTFT_CANCELLED, T0 + 200), std::memory_order_relaxed); });
  canceller.join();
  EXPECT_EQ(rc.load(std::memory_order_relaxed), TTFT_OK);
  EXPECT_EQ(s.token(1, T0 + 300), TTFT_ESTALE);      // the decode loop learns it ended
  EXPECT_EQ(s.end(TTFT_COMPLETED, T0 + 400), TTFT_ESTALE);
  EXPECT_TRUE(!s.open());                             // and lets go of it
  ttft::Snapshot snap = reg.snapshot();
  EXPECT_EQ(snap.counter(TTFT_COUNTER_CANCELLED), 1u);
  EXPECT_EQ(snap.counter(TTFT_COUNTER_COMPLETED), 0u);
  EXPECT_EQ(reg.inflight(), 0L);
}

// ---------------------------------------------------------- SharedStream
void test_shared_stream_copies_and_last_owner() {
  ttft::Registry reg = small_registry();
  {
    ttft::SharedStream a = reg.begin_shared(T0);
    EXPECT_TRUE(a.open());
    EXPECT_EQ(a.use_count(), 1L);
    {
      ttft::SharedStream b = a;
      EXPECT_EQ(a.use_count(), 2L);
      EXPECT_EQ(b.handle(), a.handle());
      EXPECT_EQ(b.token(1, T0 + 100), TTFT_OK);
      // what a callback-style server does: copy it into std::function callbacks
      std::function<int(std::uint32_t)> on_chunk = [b](std::uint32_t n) mutable {
        return b.token(n, T0 + 200);
      };
      std::function<int(std::uint32_t)> copy_of_callback = on_chunk;
      EXPECT_EQ(a.use_count(), 4L);
      EXPECT_EQ(on_chunk(2), TTFT_OK);
      EXPECT_EQ(copy_of_callback(1), TTFT_OK);
    }
    EXPECT_EQ(a.use_count(), 1L);
    EXPECT_EQ(reg.inflight(), 1L);  // copies going away end nothing
    EXPECT_EQ(counter(reg, TTFT_COUNTER_CANCELLED), 0u);
  }  // the last owner: CANCELLED
  ttft::Snapshot snap = reg.snapshot();
  EXPECT_EQ(reg.inflight(), 0L);
  EXPECT_EQ(snap.counter(TTFT_COUNTER_CANCELLED), 1u);
  EXPECT_EQ(snap.counter(TTFT_COUNTER_TOKENS), 4u);
  EXPECT_EQ(snap.counter(TTFT_COUNTER_ABANDONED), 0u);
  EXPECT_EQ(snap.quantile(TTFT_METRIC_TTFT, 1.0), std::chrono::nanoseconds(100));
  EXPECT_EQ(snap.counter(TTFT_COUNTER_STALE), 0u);

  // Ended through one copy: every copy sees it, and the last owner does
  // not end it again (no stale end is recorded).
  {
    ttft::SharedStream a = reg.begin_shared(ttft::Request().prompt_tokens(10), T0);
    ttft::SharedStream b = a;
    EXPECT_EQ(b.token(1, T0 + 5), TTFT_OK);
    EXPECT_EQ(a.end(TTFT_COMPLETED, T0 + 10), TTFT_OK);
    EXPECT_TRUE(!b.open());
    EXPECT_TRUE(!b);
    EXPECT_EQ(b.token(1, T0 + 11), TTFT_ESTALE);
    EXPECT_EQ(b.end(TTFT_ERROR, T0 + 12), TTFT_ESTALE);
    EXPECT_EQ(b.mark_scheduled(T0 + 12), TTFT_ESTALE);
    EXPECT_TRUE(!b.stats().has_value());
  }
  snap = reg.snapshot();
  EXPECT_EQ(snap.counter(TTFT_COUNTER_COMPLETED), 1u);
  EXPECT_EQ(snap.counter(TTFT_COUNTER_ERRORS), 0u);
  EXPECT_EQ(snap.counter(TTFT_COUNTER_CANCELLED), 1u);
  EXPECT_EQ(snap.counter(TTFT_COUNTER_STALE), 0u);

  // A bad status keeps it open; the last owner still cancels it.
  {
    ttft::SharedStream a = reg.begin_shared(T0);
    EXPECT_EQ(a.end(TTFT_STATUS_COUNT_, T0 + 1), TTFT_EINVAL);
    EXPECT_TRUE(a.open());
    const auto info = a.stats();
    EXPECT_TRUE(info.has_value() && info->t_begin_ns == T0);
  }
  EXPECT_EQ(counter(reg, TTFT_COUNTER_CANCELLED), 2u);

  // Assignment: copy-assigning over the last owner of another stream
  // cancels that one; self-assignment and moves change nothing.
  {
    ttft::SharedStream x = reg.begin_shared(T0);
    ttft::SharedStream y = reg.begin_shared(T0);
    EXPECT_EQ(reg.inflight(), 2L);
    y = x;
    EXPECT_EQ(reg.inflight(), 1L);
    EXPECT_EQ(counter(reg, TTFT_COUNTER_CANCELLED), 3u);
    EXPECT_EQ(x.use_count(), 2L);
    ttft::SharedStream &alias = x;
    x = alias;
    EXPECT_EQ(x.use_count(), 2L);
    ttft::SharedStream z(std::move(y));
    EXPECT_TRUE(!y.open());  // NOLINT(bugprone-use-after-move): documented state
    EXPECT_EQ(y.token(1, T0 + 1), TTFT_ESTALE);  // NOLINT
    EXPECT_EQ(y.use_count(), 0L);  // NOLINT
    EXPECT_EQ(z.use_count(), 2L);
    y = std::move(z);
    EXPECT_EQ(y.use_count(), 2L);
    y.reset();
    EXPECT_EQ(x.use_count(), 1L);
    EXPECT_EQ(reg.inflight(), 1L);
  }
  EXPECT_EQ(reg.inflight(), 0L);
  EXPECT_EQ(counter(reg, TTFT_COUNTER_CANCELLED), 4u);

  // From a Stream: ownership moves over (explicitly).
  {
    ttft::Stream s = reg.begin(T0);
    const ttft_seq h = s.handle();
    ttft::SharedStream sh(std::move(s));
    EXPECT_TRUE(!s.open());  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(sh.handle(), h);
    EXPECT_TRUE(sh.registry() == reg.get());
    ttft::SharedStream from_empty{ttft::Stream()};
    EXPECT_TRUE(!from_empty.open());
    EXPECT_EQ(from_empty.handle(), ttft_seq{0});
  }
  EXPECT_EQ(counter(reg, TTFT_COUNTER_CANCELLED), 5u);
  EXPECT_EQ(reg.inflight(), 0L);

  // A full registry gives an empty SharedStream, counted as dropped.
  ttft::Registry one = small_registry(1);
  ttft::SharedStream held = one.begin_shared(T0);
  ttft::SharedStream refused = one.begin_shared(T0);
  EXPECT_TRUE(held.open());
  EXPECT_TRUE(!refused.open());
  EXPECT_EQ(refused.token(1, T0 + 1), TTFT_ESTALE);
  EXPECT_EQ(refused.end(TTFT_COMPLETED, T0 + 1), TTFT_ESTALE);
  EXPECT_EQ(one.snapshot().counter(TTFT_COUNTER_DROPPED), 1u);
  EXPECT_EQ(held.end(TTFT_COMPLETED, T0 + 2), TTFT_OK);
}

/* Copies in several threads: the stream is cancelled exactly once, by
 * whichever copy goes last, and two copies racing end() record one end. */
void test_shared_stream_threads() {
  ttft::Registry reg = small_registry(64);
  constexpr int kRounds = 200;
  constexpr int kThreads = 4;
  std::atomic<int> ok_ends{0}, stale_ends{0}, token_errors{0};
  for (int round = 0; round < kRounds; round++) {
    ttft::SharedStream s = reg.begin_shared(T0);
    std::vector<std::thread> ts;
    std::atomic<bool> go{false};
    for (int k = 0; k < kThreads; k++) {
      ts.emplace_back([copy = s, &go, &ok_ends, &stale_ends, &token_errors, round, k]() mutable {
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        // each thread owns its copy; hooks in order per thread, ends race
        if (k == 0) {
          const int rc = copy.token(1);
          if (rc != TTFT_OK && rc != TTFT_ESTALE) token_errors.fetch_add(1, std::memory_order_relaxed);
        }
        if (round % 2 == 0 && k >= 2) {  // two copies race to end
          const int rc = copy.end(TTFT_COMPLETED);
          if (rc == TTFT_OK) ok_ends.fetch_add(1, std::memory_order_relaxed);
          else if (rc == TTFT_ESTALE) stale_ends.fetch_add(1, std::memory_order_relaxed);
        }
      });  // each thread's copy is destroyed when the thread's lambda is
    }
    s.reset();  // the main thread lets go first (or not: threads may be faster)
    go.store(true, std::memory_order_release);
    for (auto &t : ts) t.join();
  }
  ttft::Snapshot snap = reg.snapshot();
  EXPECT_EQ(reg.inflight(), 0L);
  EXPECT_EQ(token_errors.load(), 0);
  EXPECT_EQ(ok_ends.load(), kRounds / 2);
  EXPECT_EQ(stale_ends.load(), kRounds / 2);
  EXPECT_EQ(snap.counter(TTFT_COUNTER_COMPLETED), static_cast<std::uint64_t>(kRounds / 2));
  EXPECT_EQ(snap.counter(TTFT_COUNTER_CANCELLED), static_cast<std::uint64_t>(kRounds / 2));
  EXPECT_EQ(snap.counter(TTFT_COUNTER_BEGUN), static_cast<std::uint64_t>(kRounds));
}

// ------------------------------------------------- step_emitted, annotate
void test_step_and_annotate() {
  ttft::Registry reg = small_registry();
  ttft::Stream a = reg.begin(T0), b = reg.begin(T0), c = reg.begin(T0);
  const std::vector<ttft_seq> seqs = {a.handle(), b.handle(), c.handle()};
  EXPECT_EQ(reg.step_emitted(seqs, T0 + 1000000), 3L);
  EXPECT_EQ(reg.step_emitted(seqs, {1, 2, 0}, T0 + 2000000), 2L);  // 0: no emission
  EXPECT_EQ(reg.step_emitted(seqs, std::vector<std::uint32_t>{1, 1}, T0 + 3000000), static_cast<long>(TTFT_EINVAL));
  const std::uint32_t n[] = {3, 3, 3};
  EXPECT_EQ(reg.step_emitted(seqs.data(), n, 3, T0 + 4000000), 3L);
  EXPECT_EQ(reg.step_emitted(seqs.data(), nullptr, 2, T0 + 5000000), 2L);  // a and b
  EXPECT_EQ(reg.step_emitted(nullptr, nullptr, 1, T0 + 5000000), static_cast<long>(TTFT_EINVAL));
  EXPECT_EQ(reg.step_emitted(nullptr, nullptr, 0, T0 + 5000000), 0L);
  EXPECT_EQ(b.end(TTFT_CANCELLED, T0 + 5500000), TTFT_OK);
  EXPECT_EQ(reg.step_emitted(seqs, T0 + 6000000), 2L);  // b is stale: skipped, counted
  EXPECT_EQ(a.stats()->tokens, 7u);
  EXPECT_EQ(c.stats()->tokens, 5u);
  ttft::Snapshot snap = reg.snapshot();
  EXPECT_EQ(snap.counter(TTFT_COUNTER_STALE), 1u);
  EXPECT_EQ(snap.counter(TTFT_COUNTER_TOKENS), 7u + 7u + 5u);
  EXPECT_EQ(snap.quantile(TTFT_METRIC_TTFT, 1.0), std::chrono::nanoseconds(1ms));
  // a's 3-token emission after 2 ms adds 3 gaps of 667 us per token
  EXPECT_EQ(snap.count(TTFT_METRIC_ITL), 4u + 2u + 3u);
  EXPECT_TRUE(snap.count(TTFT_METRIC_ITL_PER_TOKEN) > snap.count(TTFT_METRIC_ITL));
  ttft::Registry null_reg = ttft::Registry::adopt(ttft_registry_new(nullptr));
  ttft::Registry moved(std::move(null_reg));
  EXPECT_EQ(null_reg.step_emitted(seqs), static_cast<long>(TTFT_EINVAL));  // NOLINT: NULL registry

  // annotate: at slot pickup, before the first token
  ttft::Registry r2 = small_registry();
  {
    ttft::Stream s = r2.begin(T0);
    EXPECT_EQ(s.annotate(812, true), TTFT_OK);
    EXPECT_EQ(r2.annotate(s.handle(), 0, std::nullopt), TTFT_OK);  // leaves both as they are
    EXPECT_EQ(s.token(1, T0 + 40000000), TTFT_OK);
    EXPECT_EQ(s.annotate(5000, false), TTFT_ERANGE);  // too late: nothing changes
    EXPECT_EQ(r2.annotate(s.handle(), 0, false), TTFT_ERANGE);
    EXPECT_EQ(s.end(TTFT_COMPLETED, T0 + 50000000), TTFT_OK);
    EXPECT_EQ(s.annotate(1, true), TTFT_ESTALE);  // ended (empty Stream)
  }
  ttft::SharedStream sh = r2.begin_shared(T0);
  EXPECT_EQ(sh.annotate(0, false), TTFT_OK);
  EXPECT_EQ(r2.mark(sh.handle(), TTFT_PHASE_SCHEDULED, T0 + 1000), TTFT_OK);
  EXPECT_EQ(sh.token(1, T0 + 2000), TTFT_OK);
  EXPECT_EQ(sh.end(TTFT_COMPLETED, T0 + 3000), TTFT_OK);
  EXPECT_EQ(r2.annotate(sh.handle(), 10), TTFT_ESTALE);  // through the library: counted
  snap = r2.snapshot();
  EXPECT_EQ(snap.split_count(TTFT_SPLIT_PREFIX_CACHE, 1), 1u);
  EXPECT_EQ(snap.split_count(TTFT_SPLIT_PREFIX_CACHE, 0), 1u);
  EXPECT_EQ(snap.split_count(TTFT_SPLIT_PROMPT_BAND, 2), 1u);  // 512 <= 812 < 2048
  EXPECT_EQ(snap.split_quantile(TTFT_SPLIT_PREFIX_CACHE, 1, 1.0), std::chrono::nanoseconds(40ms));
  EXPECT_EQ(snap.quantile(TTFT_METRIC_QUEUE, 1.0), std::chrono::nanoseconds(1000));
  EXPECT_EQ(snap.counter(TTFT_COUNTER_STALE), 1u);
}

// ------------------------------------------- engine steps, stall causes (1.2)
void test_engine_steps() {
  using namespace std::chrono_literals;
  ttft::Registry reg(ttft::Config().max_inflight(16).max_threads(2).stall_threshold(200ms));
  ttft::Stream a = reg.begin(T0);
  std::uint64_t t = T0;
  for (int i = 0; i < 8; i++) {  // 20 ms decode steps
    EXPECT_EQ(reg.engine_step(0, t, t + 20000000), TTFT_OK);
    EXPECT_EQ(a.token(1, t + 20000000), TTFT_OK);
    t += 21000000;
  }
  ttft_step_info info;
  ttft_step_info_init(&info);
  info.prefill_tokens = 8000;  // another request's long prompt joins the batch
  EXPECT_EQ(reg.engine_step(info, t, t + 800000000), TTFT_OK);
  EXPECT_EQ(a.token(1, t + 800000000), TTFT_OK);
  t += 801000000;
  EXPECT_EQ(a.mark_preempted(t), TTFT_OK);
  for (int i = 0; i < 30; i++, t += 21000000) EXPECT_EQ(reg.engine_step(0, t, t + 20000000), TTFT_OK);
  EXPECT_EQ(a.mark_resumed(t), TTFT_OK);
  EXPECT_EQ(a.token(1, t), TTFT_OK);
  EXPECT_EQ(a.end(TTFT_COMPLETED, t + 1), TTFT_OK);
  ttft::Snapshot snap = reg.snapshot();
  EXPECT_EQ(snap.stalls_by_cause(TTFT_STALL_PREFILL), 1u);
  EXPECT_EQ(snap.stalls_by_cause(TTFT_STALL_PREEMPTED), 1u);
  EXPECT_EQ(snap.stalls_by_cause(TTFT_STALL_UNKNOWN), 0u);
  EXPECT_EQ(snap.stall_time_by_cause(TTFT_STALL_PREFILL), std::chrono::nanoseconds(801ms));
  EXPECT_EQ(snap.engine_step_count(true), 1u);
  EXPECT_EQ(snap.engine_step_count(false), 38u);
  EXPECT_EQ(snap.engine_step_quantile(true, 1.0), std::chrono::nanoseconds(800ms));
  EXPECT_EQ(snap.engine_step_sum(false), std::chrono::nanoseconds(38 * 20ms));
}

// ---------------------------------------------------------- status views
void test_status_views() {
  ttft::Registry reg = small_registry();
  const ttft::Class chat = reg.add_class("chat");
  for (std::uint64_t k = 1; k <= 3; k++) {
    ttft::Stream s = reg.begin(ttft::Request().cls(k == 3 ? chat : ttft::Class()), T0);
    EXPECT_EQ(s.token(1, T0 + k * 1000000), TTFT_OK);
    EXPECT_EQ(s.token(2, T0 + k * 1000000 + 500000), TTFT_OK);
    EXPECT_EQ(s.end(TTFT_COMPLETED, T0 + 10000000), TTFT_OK);
  }
  {
    ttft::Stream s = reg.begin(T0);
    EXPECT_EQ(s.token(1, T0 + 100000), TTFT_OK);  // a fast first token, then the client left
  }
  {
    ttft::Stream s = reg.begin(T0);
    EXPECT_EQ(s.end(TTFT_ERROR, T0 + 20000000), TTFT_OK);
  }
  ttft::Snapshot snap = reg.snapshot();
  EXPECT_EQ(snap.count(TTFT_METRIC_TTFT), 4u);
  EXPECT_EQ(snap.quantile(TTFT_METRIC_TTFT, 0.0), std::chrono::nanoseconds(100us));
  const auto done = snap.status(TTFT_COMPLETED);
  EXPECT_EQ(done.status(), TTFT_COMPLETED);
  EXPECT_EQ(done.count(TTFT_METRIC_TTFT), 3u);
  EXPECT_EQ(done.quantile(TTFT_METRIC_TTFT, 0.0), std::chrono::nanoseconds(1ms));
  EXPECT_EQ(done.quantile(TTFT_METRIC_TTFT, 1.0), std::chrono::nanoseconds(3ms));
  EXPECT_EQ(done.quantile(TTFT_METRIC_E2E, 1.0), std::chrono::nanoseconds(10ms));
  EXPECT_EQ(done.quantile_value(TTFT_METRIC_OUTPUT_TOKENS, 1.0), 3u);
  EXPECT_EQ(done.count(TTFT_METRIC_TTFT, chat), 1u);
  EXPECT_EQ(done.quantile(TTFT_METRIC_TTFT, 0.5, chat), std::chrono::nanoseconds(3ms));
  EXPECT_EQ(snap.status(TTFT_CANCELLED).count(TTFT_METRIC_TTFT), 1u);
  EXPECT_EQ(snap.status(TTFT_CANCELLED).count(TTFT_METRIC_TPOT), 0u);
  EXPECT_EQ(snap.status(TTFT_ERROR).count(TTFT_METRIC_E2E), 1u);
  EXPECT_EQ(snap.status(TTFT_ERROR).count(TTFT_METRIC_TTFT), 0u);
  // no view for other metrics or statuses: 0, never a throw
  EXPECT_EQ(done.count(TTFT_METRIC_ITL), 0u);
  EXPECT_EQ(snap.status(TTFT_STATUS_COUNT_).count(TTFT_METRIC_TTFT), 0u);
  EXPECT_EQ(ttft::Snapshot().status(TTFT_COMPLETED).count(TTFT_METRIC_TTFT), 0u);
  // SharedStream records from a lambda that is not mutable (const methods)
  {
    ttft::Registry r2(ttft::Config().max_inflight(4).prefix_hit_min_tokens(4));
    const ttft::SharedStream shared = r2.begin_shared(ttft::Time(T0));
    const auto on_prompt = [shared](std::uint32_t prompt, std::uint32_t cached) {
      return shared.annotate_cached(prompt, cached);
    };
    const auto on_chunk = [shared](std::uint32_t n) { return shared.token(n, ttft::Time(T0 + 2000000)); };
    EXPECT_EQ(shared.mark_scheduled(ttft::Time(T0 + 500000u)), TTFT_OK);
    EXPECT_EQ(on_prompt(100, 3), TTFT_OK);  // below the minimum of 4: a miss
    EXPECT_EQ(on_chunk(1), TTFT_OK);
    EXPECT_EQ(on_prompt(100, 60), TTFT_ERANGE);
    EXPECT_EQ(shared.end(TTFT_COMPLETED, ttft::Time(T0 + 3000000)), TTFT_OK);
    EXPECT_EQ(on_chunk(1), TTFT_ESTALE);
    ttft::Stream s2 = r2.begin(ttft::Time(T0));
    EXPECT_EQ(s2.annotate_cached(100, 40), TTFT_OK);  // partial
    EXPECT_EQ(s2.annotate_cached(0, 0), TTFT_EINVAL);
    EXPECT_EQ(s2.token(1, ttft::Time(T0 + 1000000u)), TTFT_OK);
    const ttft::Snapshot sn = r2.snapshot();
    EXPECT_EQ(sn.split_count(TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_MISS), 1u);
    EXPECT_EQ(sn.split_count(TTFT_SPLIT_PREFIX_CACHE, TTFT_PREFIX_PARTIAL), 1u);
    EXPECT_EQ(sn.split_count(TTFT_SPLIT_PREFILL_BY_PREFIX, TTFT_PREFIX_MISS), 1u);
    EXPECT_EQ(sn.split_quantile(TTFT_SPLIT_PREFILL_BY_PREFIX, TTFT_PREFIX_MISS, 1.0), std::chrono::nanoseconds(1500000));
  }
  // sums and means of a view: TTFT of the completed ones is 1 + 2 + 3 ms
  EXPECT_EQ(done.sum(TTFT_METRIC_TTFT), 6000000u);
  EXPECT_TRUE((done.mean(TTFT_METRIC_TTFT) == std::chrono::duration<double, std::nano>(2000000.0)));
  EXPECT_EQ(done.sum(TTFT_METRIC_OUTPUT_TOKENS), 9u);
  EXPECT_TRUE(done.mean_value(TTFT_METRIC_OUTPUT_TOKENS) == 3.0);
  EXPECT_EQ(done.sum(TTFT_METRIC_E2E, chat), 10000000u);
  EXPECT_EQ(snap.status(TTFT_ERROR).sum(TTFT_METRIC_E2E), 20000000u);
  EXPECT_EQ(done.sum(TTFT_METRIC_ITL), 0u);
  EXPECT_TRUE(ttft::Snapshot().status(TTFT_COMPLETED).mean_value(TTFT_METRIC_TTFT) == 0.0);
}

// ------------------------------------------------------------ 1.1 config
void test_config_11() {
  ttft::Registry reg(ttft::Config()
                         .max_inflight(8)
                         .max_classes(4)
                         .native_histograms(true)
                         .native_schema(3)
                         .export_idle_classes(true)
                         .memory_limit(std::uint64_t{1} << 20));
  (void)reg.add_class("idle");
  {
    ttft::Stream s = reg.begin(T0);
    EXPECT_EQ(s.token(1, T0 + 1000), TTFT_OK);
  }
  ttft::Snapshot snap = reg.snapshot();
  EXPECT_TRUE(snap.format(TTFT_FORMAT_PROMETHEUS).find("class=\"idle\"") != std::string::npos);
  const std::string pb = snap.format(TTFT_FORMAT_PROMETHEUS_PROTOBUF);
  EXPECT_EQ(static_cast<long>(pb.size()), ttft_snapshot_format(snap.get(), TTFT_FORMAT_PROMETHEUS_PROTOBUF, nullptr, 0));
  EXPECT_TRUE(pb.size() > 100);
  EXPECT_TRUE(snap.gauge(TTFT_GAUGE_MEMORY) > 0);
  EXPECT_EQ(snap.gauge(TTFT_GAUGE_COARSE), 0u);
  // an added class is exported at zero from add_class on (1.3); idle = the
  // default class, never added, until a begin uses it
  ttft::Registry quiet(ttft::Config().max_inflight(8).max_classes(4));
  (void)quiet.add_class("chat");
  const std::string q = quiet.snapshot().format(TTFT_FORMAT_PROMETHEUS);
  EXPECT_TRUE(q.find("gen_ai_server_time_to_first_token_seconds_count{class=\"chat\"} 0\n") != std::string::npos);
  EXPECT_TRUE(q.find("class=\"default\"") == std::string::npos);
  EXPECT_THROWS_CODE(ttft::Registry(ttft::Config().native_schema(9)), TTFT_EINVAL);
  EXPECT_THROWS_CODE(ttft::Registry(ttft::Config().memory_limit(1000)), TTFT_EINVAL);
  // metrics past TTFT_PROM_CONFIG_METRICS have no buckets of their own
  // (the builder used to write past ttft_config.prom_buckets[] for them)
  EXPECT_THROWS_CODE(ttft::Config().prom_buckets(TTFT_METRIC_ITL_PER_TOKEN, {1000, 2000}), TTFT_EINVAL);
  ttft::Registry with_buckets(ttft::Config().max_inflight(4).prom_buckets(TTFT_METRIC_ABANDONED_WAIT, {1000000, 2000000}));
  EXPECT_TRUE(static_cast<bool>(with_buckets));
}

// 1.2: a stream its client cancels before it missed a budget is not
// judged; one cancelled after a missed budget is bad; attainment = good /
// judged.
void test_slo_judged() {
  using namespace std::chrono_literals;
  ttft::Registry reg;
  const ttft::Class chat = reg.add_class("chat", ttft::Slo().ttft(1ms));
  {  // good
    ttft::Stream s = reg.begin(ttft::Request().cls(chat), T0);
    EXPECT_EQ(s.token(1, T0 + 500000), TTFT_OK);
    EXPECT_EQ(s.end(TTFT_COMPLETED, T0 + 600000), TTFT_OK);
  }
  {  // cancelled at 0.5 ms, before the 1 ms TTFT budget: not judged
    ttft::Stream s = reg.begin(ttft::Request().cls(chat), T0);
    EXPECT_EQ(s.end(TTFT_CANCELLED, T0 + 500000), TTFT_OK);
  }
  {  // no first token by 1 ms, cancelled at 5 ms: judged, bad
    ttft::Stream s = reg.begin(ttft::Request().cls(chat), T0);
    EXPECT_EQ(s.end(TTFT_CANCELLED, T0 + 5000000), TTFT_OK);
  }
  ttft::Snapshot snap = reg.snapshot();
  EXPECT_EQ(snap.counter(TTFT_COUNTER_SLO_JUDGED, chat), 2u);
  EXPECT_EQ(snap.counter(TTFT_COUNTER_SLO_MET, chat), 1u);
  EXPECT_TRUE(snap.attainment(chat) == std::optional<double>(0.5));
  EXPECT_STREQ(ttft::name(TTFT_COUNTER_SLO_JUDGED), "slo_judged");
}

// ------------------------------------------------- 1.2 slowest requests
void test_slowest() {
  ttft::Registry reg(ttft::Config().max_inflight(8).max_classes(4).slowest_k(2));
  const char *ids[3] = {"a", "b", "c"};
  for (std::uint64_t i = 0; i < 3; i++) {
    std::string tid(32, '0');
    tid[31] = static_cast<char>('1' + i);
    ttft::Stream s = reg.begin(ttft::Request().request_id(ids[i]).trace_id(tid.c_str()), T0);
    EXPECT_EQ(s.token(1, T0 + (i + 1) * 1000000), TTFT_OK);
    EXPECT_EQ(s.token(1, T0 + (i + 1) * 1000000 + (3 - i) * 500000), TTFT_OK);
  }
  ttft::Snapshot snap = reg.snapshot();
  std::vector<ttft_slow_request> v = snap.slowest(TTFT_SLOWEST_TTFT);
  EXPECT_EQ(v.size(), std::size_t{2});
  if (v.size() == 2) {
    EXPECT_STREQ(v[0].request_id, "c");
    EXPECT_STREQ(v[0].trace_id, "00000000000000000000000000000003");
    EXPECT_EQ(v[0].value_ns, std::uint64_t{3000000});
    EXPECT_STREQ(v[1].request_id, "b");
  }
  std::vector<ttft_slow_request> g = snap.slowest(TTFT_SLOWEST_GAP, ttft::Class(0));
  EXPECT_EQ(g.size(), std::size_t{2});
  if (!g.empty()) EXPECT_STREQ(g[0].request_id, "a");
  EXPECT_EQ(ttft::Snapshot().slowest(TTFT_SLOWEST_TTFT).size(), std::size_t{0});
}

// ------------------------------------ issue 27.2: ids as clients send them
// A std::string_view id may hold any bytes: a NUL is '?', malformed UTF-8
// and control characters become '?', a 1 MB id is cut, a bad trace id is
// ignored and counted; nothing fails and every request is measured. A
// const char * id is a C string: it ends at its first NUL.
void test_client_ids() {
  ttft::Registry reg(ttft::Config().max_inflight(64).max_classes(2).slowest_k(64));
  const std::string mb_x(1u << 20, 'x'), mb_nul(1u << 20, '\0'), mb_ff(1u << 20, '\xff');
  std::string mb_emoji;
  for (int i = 0; i < (1 << 18); i++) mb_emoji += "\xf0\x9f\x98\x80";  // 1 MB of U+1F600
  const std::string tid = "4bf92f3577b34da6a3ce929d0e0e4736";
  const std::string tid_nul = tid + std::string(1, '\0');
  std::string tid_mb;
  while (tid_mb.size() < (1u << 20)) tid_mb += tid;
  struct Case {
    ttft::Request req;
    std::string want_rid, want_tid;
  };
  std::vector<Case> cases;
  cases.push_back({ttft::Request().request_id(std::string("a\0b", 3)), "a?b", ""});
  cases.push_back({ttft::Request().request_id(std::string(1, '\0')), "?", ""});
  cases.push_back({ttft::Request().request_id("a\0b"), "a", ""});  // a C string
  cases.push_back({ttft::Request().request_id(std::string_view("caf\xc3\xa9\xf4\x8f\xbf\xbf")),
                   "caf\xc3\xa9\xf4\x8f\xbf\xbf", ""});
  cases.push_back({ttft::Request().request_id(std::string_view("a\xff" "b\xc3(\xed\xa0\x80\x1b\x7f")),
                   "a?b?(?????", ""});
  cases.push_back({ttft::Request().request_id(std::string_view("")), "", ""});
  cases.push_back({ttft::Request().request_id(mb_x), std::string(63, 'x'), ""});
  cases.push_back({ttft::Request().request_id(mb_nul), std::string(63, '?'), ""});
  cases.push_back({ttft::Request().request_id(mb_ff), std::string(63, '?'), ""});
  cases.push_back({ttft::Request().request_id(mb_emoji), mb_emoji.substr(0, 60), ""});
  const std::size_t n_rid = cases.size();
  // trace ids: every one but the last two is ignored and counted
  cases.push_back({ttft::Request().trace_id(tid_nul), "", ""});  // not cut at the NUL
  cases.push_back({ttft::Request().trace_id(tid_nul + "junk"), "", ""});
  cases.push_back({ttft::Request().trace_id(std::string(1, '\0')), "", ""});
  cases.push_back({ttft::Request().trace_id(std::string_view("")), "", ""});
  cases.push_back({ttft::Request().trace_id(std::string(32, '\xff')), "", ""});
  cases.push_back({ttft::Request().trace_id(tid_mb), "", ""});
  cases.push_back({ttft::Request().trace_id(mb_nul), "", ""});
  cases.push_back({ttft::Request().trace_id(std::string_view(tid)), "", tid});
  cases.push_back({ttft::Request().trace_id(tid_nul.c_str()), "", tid});  // a C string ends at NUL
  for (std::size_t i = 0; i < cases.size(); i++) {
    ttft::Request copy;
    copy = cases[i].req;  // a copy holds its own ids
    cases[i].req = ttft::Request();
    ttft::Stream s = reg.begin(copy, T0 + i * 1000000);
    EXPECT_TRUE(static_cast<bool>(s));
    EXPECT_EQ(s.token(1, T0 + i * 1000000 + (i + 1) * 1000000), TTFT_OK);
    EXPECT_EQ(s.end(TTFT_COMPLETED, T0 + i * 1000000 + (i + 2) * 1000000), TTFT_OK);
  }
  ttft::Snapshot snap = reg.snapshot();
  EXPECT_EQ(snap.count(TTFT_METRIC_TTFT), std::uint64_t{cases.size()});
  EXPECT_EQ(snap.counter(TTFT_COUNTER_TRACE_ID_INVALID), std::uint64_t{cases.size() - n_rid - 2});
  std::vector<ttft_slow_request> v = snap.slowest(TTFT_SLOWEST_TTFT);
  EXPECT_EQ(v.size(), cases.size());
  for (std::size_t i = 0; i < v.size() && i < cases.size(); i++) {
    const Case &c = cases[cases.size() - 1 - i];  // slowest first: the last played
    EXPECT_STREQ(v[i].request_id, c.want_rid);
    EXPECT_STREQ(v[i].trace_id, c.want_tid);
  }
}

// 1.3 (issue 32.4, 32.7): a traceparent header as received; a wall-clock
// time refused at begin with TTFT_ECLOCK, counted
void test_traceparent_and_clock() {
  const std::string tid = "4bf92f3577b34da6a3ce929d0e0e4736";
  const std::string tp = "00-" + tid + "-00f067aa0ba902b7-01";
  EXPECT_TRUE(ttft::traceparent_trace_id(tp) == tid);
  EXPECT_TRUE(ttft::traceparent_trace_id(" " + tp + "\t") == tid);
  EXPECT_TRUE(ttft::traceparent_trace_id("cc-" + tid + "-00f067aa0ba902b7-01-future") == tid);
  EXPECT_TRUE(!ttft::traceparent_trace_id(tp + "-extra"));      // version 00: 4 fields
  EXPECT_TRUE(!ttft::traceparent_trace_id(tp + " x"));          // cut at 56 still refused
  EXPECT_TRUE(!ttft::traceparent_trace_id(tp + std::string(300, ' ') + "x"));
  EXPECT_TRUE(ttft::traceparent_trace_id(tp + std::string(300, ' ')) == tid);
  EXPECT_TRUE(!ttft::traceparent_trace_id("ff-" + tid + "-00f067aa0ba902b7-01"));
  EXPECT_TRUE(!ttft::traceparent_trace_id(tid));
  std::string nul = tp;
  nul[54] = '\0';  // a NUL is not the end of a string_view
  EXPECT_TRUE(!ttft::traceparent_trace_id(nul));

  ttft::Registry reg(ttft::Config().max_inflight(4).max_threads(2).slowest_k(4));
  {
    ttft::Request q;
    q.traceparent(std::string_view(tp));
    ttft::Request copy = q;  // holds its own copy
    q = ttft::Request();
    ttft::Stream s = reg.begin(copy, T0);
    EXPECT_EQ(s.token(1, T0 + 2000000), TTFT_OK);
    EXPECT_EQ(s.end(TTFT_COMPLETED, T0 + 3000000), TTFT_OK);
    ttft::Stream b = reg.begin(ttft::Request().traceparent("00-" + tid + "-0000000000000000-01"), T0);
    EXPECT_EQ(b.token(1, T0 + 1000000), TTFT_OK);
    EXPECT_EQ(b.end(TTFT_COMPLETED, T0 + 1000000), TTFT_OK);
  }
  ttft::Snapshot snap = reg.snapshot();
  std::vector<ttft_slow_request> v = snap.slowest(TTFT_SLOWEST_TTFT);
  EXPECT_EQ(v.size(), std::size_t{2});
  if (v.size() == 2) {
    EXPECT_STREQ(v[0].trace_id, tid);
    EXPECT_STREQ(v[1].trace_id, "");
  }
  EXPECT_EQ(snap.counter(TTFT_COUNTER_TRACE_ID_INVALID), std::uint64_t{1});

  // wall clock: what system_clock::now().time_since_epoch() counts
  const auto wall = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch()).count());
  ttft::Stream w = reg.begin(wall);
  EXPECT_TRUE(!w);
  int rc = 1;
  ttft::Stream w2 = reg.try_begin(ttft::Request(), rc, wall);
  EXPECT_TRUE(!w2);
  EXPECT_EQ(rc, int{TTFT_ECLOCK});
  EXPECT_TRUE(std::string(ttft_strerror(rc)).find("CLOCK_MONOTONIC") != std::string::npos);
  ttft::Stream ok = reg.try_begin(rc);
  EXPECT_EQ(rc, int{TTFT_OK});
  EXPECT_TRUE(static_cast<bool>(ok));
  ttft::Stream other = reg.try_begin(ttft::Request().cls(ttft::Class(7)), rc);
  EXPECT_EQ(rc, int{TTFT_EINVAL});  // a class of another registry
  EXPECT_EQ(ok.end(TTFT_COMPLETED), TTFT_OK);
  EXPECT_EQ(counter(reg, TTFT_COUNTER_CLOCK_REFUSED), std::uint64_t{2});
  EXPECT_EQ(counter(reg, TTFT_COUNTER_DROPPED), std::uint64_t{0});
  try {
    ttft::check(rc = TTFT_ECLOCK);
    EXPECT_TRUE(false);
  } catch (const ttft::Error &e) {
    EXPECT_EQ(e.code(), int{TTFT_ECLOCK});
  }
}

// 1.3 (issue 29, SPEC 10.2): a request's own budgets, the class's
// length-aware first-token deadline, token deadline and fluid_min, with
// the values tests/test_fluidity.c computes by hand.
void test_slo_fluidity() {
  EXPECT_TRUE(ttft::Slo().fluid_min() == 0.9);  // ttft_slo_init's default
  ttft::Registry reg(ttft::Config().max_inflight(4));
  const ttft::Class chat = reg.add_class("chat", ttft::Slo().tpot(50ms));
  {  // D = 50 ms: gaps 40, 40 (slack 10, 20), 200 misses 3, 40 meets
    ttft::Stream s = reg.begin(ttft::Request().cls(chat), T0);
    std::uint64_t t = T0 + 100000000;
    EXPECT_EQ(s.token(1, t), TTFT_OK);
    for (std::uint64_t g : {40u, 40u, 200u, 40u}) EXPECT_EQ(s.token(1, t += g * 1000000), TTFT_OK);
    const auto info = s.stats();
    EXPECT_TRUE(info.has_value());
    if (info) {
      EXPECT_EQ(info->deadlines, std::uint64_t{6});
      EXPECT_EQ(info->deadlines_missed, std::uint64_t{3});
      EXPECT_TRUE(info->fluidity == 0.5);
      EXPECT_EQ(info->tpot_slo_ns, std::uint64_t{50000000});
    }
    EXPECT_EQ(s.end(TTFT_COMPLETED, t), TTFT_OK);
    // the slowest lists keep the stream's fluidity and its budgets (1.3)
    const std::vector<ttft_slow_request> v = reg.snapshot().slowest(TTFT_SLOWEST_GAP, chat);
    EXPECT_EQ(v.size(), std::size_t{1});
    if (!v.empty()) {
      EXPECT_EQ(v[0].deadlines, std::uint64_t{6});
      EXPECT_EQ(v[0].deadlines_missed, std::uint64_t{3});
      EXPECT_TRUE(v[0].fluidity == 0.5);
      EXPECT_EQ(v[0].token_deadline_ns, std::uint64_t{50000000});
      EXPECT_EQ(v[0].tpot_slo_ns, std::uint64_t{50000000});
      EXPECT_EQ(v[0].ttft_slo_ns, std::uint64_t{0});
    }
  }
  const ttft::Class lng = reg.add_class(
      "long", ttft::Slo().ttft(100ms).ttft_per_prompt_token(1ms).token_deadline(20ms).fluid_min(0.8));
  // 499 prompt tokens: deadline 599 ms; TTFT 600 ms misses it, the same
  // request with its own 700 ms target meets it.
  for (auto own : {0ms, 700ms}) {
    ttft::Stream s = reg.begin(ttft::Request().cls(lng).prompt_tokens(499).ttft_slo(own), T0);
    const auto info = s.stats();
    EXPECT_EQ(info ? info->ttft_slo_ns : 0, own == 0ms ? std::uint64_t{599000000} : std::uint64_t{700000000});
    EXPECT_EQ(s.token(1, T0 + 600000000), TTFT_OK);
    EXPECT_EQ(s.end(TTFT_COMPLETED, T0 + 600000000), TTFT_OK);
  }
  {  // its own TPOT budget is its token deadline in a class with none
    ttft::Stream s = reg.begin(ttft::Request().tpot_slo(50ms), T0);
    const auto info = s.stats();
    EXPECT_EQ(info ? info->tpot_slo_ns : 0, std::uint64_t{50000000});
    EXPECT_EQ(s.end(TTFT_CANCELLED, T0 + 1), TTFT_OK);
  }
  EXPECT_THROWS_CODE(ttft::Request().ttft_slo(-1ms), TTFT_EINVAL);
  EXPECT_THROWS_CODE(reg.add_class("bad", ttft::Slo().fluid_min(1.5)), TTFT_EINVAL);
  ttft::Snapshot snap = reg.snapshot();
  EXPECT_EQ(snap.counter(TTFT_COUNTER_TOKEN_DEADLINES, chat), std::uint64_t{6});
  EXPECT_EQ(snap.counter(TTFT_COUNTER_TOKEN_DEADLINES_MISSED, chat), std::uint64_t{3});
  EXPECT_EQ(snap.counter(TTFT_COUNTER_FLUID, chat), std::uint64_t{0});
  EXPECT_EQ(snap.counter(TTFT_COUNTER_FLUID_JUDGED, chat), std::uint64_t{1});
  EXPECT_EQ(snap.counter(TTFT_COUNTER_SLO_MET, lng), std::uint64_t{1});
  EXPECT_EQ(snap.counter(TTFT_COUNTER_SLO_JUDGED, lng), std::uint64_t{2});
  const auto slo = snap.class_slo(lng);
  EXPECT_TRUE(slo.has_value());
  if (slo) {
    EXPECT_TRUE(slo->ttft_per_prompt_token() == 1ms);
    EXPECT_TRUE(slo->token_deadline() == 20ms);
    EXPECT_TRUE(slo->fluid_min() == 0.8);
  }
}

#ifdef TTFT_TEST_HTTP
void test_http() {
  ttft::Registry reg = small_registry();
  ttft::HttpServer srv = reg.serve("127.0.0.1:0");
  EXPECT_TRUE(static_cast<bool>(srv));
  EXPECT_TRUE(srv.port() > 0);
  srv.stop();
  EXPECT_TRUE(!srv);
}

/* 1.3: the OTLP pusher's RAII: https:// refused with the reason; a push to
 * a port nobody listens on fails (flush throws TTFT_EIO) and the pusher
 * moves and stops. */
void test_otlp() {
  ttft::Registry reg = small_registry();
  try {
    (void)reg.otlp_start("https://collector.example:4318");
    EXPECT_TRUE(false);
  } catch (const ttft::Error &e) {
    EXPECT_EQ(e.code(), TTFT_EINVAL);
    EXPECT_TRUE(std::string(e.what()).find("https is not supported") != std::string::npos);
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  socklen_t sl = sizeof a;
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr *>(&a), &sl), 0);
  close(fd);  // nobody listens there now: connection refused
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  ttft_otlp_config c;
  ttft_otlp_config_init(&c);
  c.endpoint = url.c_str();
  c.interval_ms = 3600000;
  c.timeout_ms = 300;
  ttft::OtlpPusher p = reg.otlp_start(&c);
  EXPECT_TRUE(static_cast<bool>(p));
  EXPECT_THROWS_CODE(p.flush(), TTFT_EIO);
  const ttft_otlp_info st = p.stats();  // the refused push, counted
  EXPECT_EQ(st.pushes, 1u);
  EXPECT_EQ(st.failed, 1u);
  EXPECT_EQ(st.accepted, 0u);
  EXPECT_EQ(st.bytes_sent, 0u);
  EXPECT_EQ(st.last_status, 0);
  EXPECT_TRUE(std::string(st.last_error).find("connect: ") == 0);
  ttft::OtlpPusher q = std::move(p);
  EXPECT_TRUE(!p && static_cast<bool>(q));
  q.stop();
  EXPECT_TRUE(!q);
  EXPECT_THROWS_CODE(q.flush(), TTFT_EINVAL);
  EXPECT_THROWS_CODE((void)q.stats(), TTFT_EINVAL);
}
#endif

#if defined(__unix__)
/* 1.3: processes that record into one shared_dir, ttft::Gather in the
 * parent: the exact sum. Child i begins 2 + i streams, ends them
 * completed with 3 tokens each (TTFT 5 ms), and exits normally: its
 * Registry's destructor publishes its last state. */
void gather_child(const std::string &dir, int i) {
  ttft::Registry reg{ttft::Config().max_inflight(16).max_classes(2).shared_dir(dir)
                         .process_name("cxx-" + std::to_string(i)).publish_interval_ms(0)};
  std::uint64_t t = 1'000'000'000'000ULL;
  for (int k = 0; k < 2 + i; k++, t += 1'000'000'000ULL) {
    ttft::Stream s = reg.begin(ttft::Time(t));
    s.token(3, ttft::Time(t + 5'000'000));
    s.end(TTFT_COMPLETED, ttft::Time(t + 9'000'000));
  }
}

void test_gather() {
  char tmpl[] = "/tmp/ttft-hpp-XXXXXX";
  const char *d = mkdtemp(tmpl);
  EXPECT_TRUE(d != nullptr);
  if (d == nullptr) return;
  const std::string dir(d);
  std::vector<pid_t> kids;
  for (int i = 0; i < 2; i++) {
    const pid_t pid = fork();
    if (pid == 0) {
      gather_child(dir, i);
      std::exit(0);  // normal exit: the registry already published at free
    }
    EXPECT_TRUE(pid > 0);
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = -1;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  ttft::Gather g{dir};
  EXPECT_TRUE(static_cast<bool>(g));
  {
    const ttft::Snapshot s = g.take();
    EXPECT_EQ(s.counter(TTFT_COUNTER_BEGUN), 5u);            // 2 + 3
    EXPECT_EQ(s.counter(TTFT_COUNTER_COMPLETED), 5u);
    EXPECT_EQ(s.counter(TTFT_COUNTER_TOKENS), 15u);
    EXPECT_EQ(s.counter(TTFT_COUNTER_PROCESSES_EXITED), 2u);
    EXPECT_EQ(s.gauge(TTFT_GAUGE_PROCESSES), 0u);
    EXPECT_EQ(s.count(TTFT_METRIC_TTFT), 5u);
    EXPECT_EQ(s.quantile(TTFT_METRIC_TTFT, 1.0), 5ms);
  }
  // a live process in the same directory, published by hand; by process
  ttft::Registry live{ttft::Config().max_inflight(4).max_classes(2).shared_dir(dir)
                          .process_name("cxx-live").publish_interval_ms(0)};
  live.begin(ttft::Time(2'000'000'000'000ULL)).end(TTFT_CANCELLED, ttft::Time(2'000'001'000'000ULL));
  live.publish();
  ttft::Gather apart{dir, TTFT_GATHER_BY_PROCESS};
  ttft::Gather moved = std::move(apart);                     // move-only RAII
  EXPECT_TRUE(!apart);
  {
    const ttft::Snapshot s = moved.take();
    EXPECT_EQ(s.counter(TTFT_COUNTER_BEGUN), 6u);
    EXPECT_EQ(s.counter(TTFT_COUNTER_CANCELLED), 1u);
    EXPECT_EQ(s.gauge(TTFT_GAUGE_PROCESSES), 1u);
    EXPECT_TRUE(s.format(TTFT_FORMAT_PROMETHEUS).find("process=\"cxx-live\"") != std::string::npos);
  }
  moved.close();
  EXPECT_TRUE(!moved);
  bool threw = false;
  try {
    (void)moved.take();
  } catch (const ttft::Error &e) {
    threw = e.code() == TTFT_EINVAL;
  }
  EXPECT_TRUE(threw);
  static_assert(!std::is_copy_constructible<ttft::Gather>::value, "Gather is move-only");
  static_assert(std::is_nothrow_move_constructible<ttft::Gather>::value, "");

  // a group-writable directory: both sides refuse it and say why
  EXPECT_EQ(chmod(d, 0770), 0);
  std::string why;
  try {
    ttft::Gather bad{dir};
  } catch (const ttft::Gather::GatherError &e) {
    why = e.what();
    EXPECT_EQ(e.errno_value(), EACCES);
  }
  EXPECT_TRUE(why.find("group- or world-writable") != std::string::npos);
  EXPECT_TRUE(ttft::Config().shared_dir(dir).problem().find("group- or world-writable") !=
              std::string::npos);
  why.clear();
  try {
    live.publish();  // still works: the directory was checked at creation
    ttft::Registry refused{ttft::Config().shared_dir(dir)};
  } catch (const ttft::Error &e) {
    why = e.what();
    EXPECT_EQ(e.code(), TTFT_EINVAL);
  }
  EXPECT_TRUE(why.find("group- or world-writable") != std::string::npos);
  EXPECT_EQ(chmod(d, 0700), 0);
  std::string rm = "rm -rf '" + dir + "'";
  EXPECT_EQ(std::system(rm.c_str()), 0);
}
#endif

}  // namespace

int main() {
#if defined(__unix__)
  test_gather();  // first: it forks, before any test starts a thread
#endif
  test_error_mapping();
  test_raii_cancels();
  test_moves();
  test_quantiles();
  test_classes_and_config();
  test_snapshot_io();
  test_cross_thread_cancel();
  test_shared_stream_copies_and_last_owner();
  test_shared_stream_threads();
  test_step_and_annotate();
  test_status_views();
  test_engine_steps();
  test_config_11();
  test_slo_judged();
  test_slowest();
  test_client_ids();
  test_traceparent_and_clock();
  test_slo_fluidity();
#ifdef TTFT_TEST_HTTP
  test_http();
  test_otlp();
#endif
  std::printf("test_hpp (%s, C++%ld): %d checks, %d failures\n",
#if defined(__clang__)
              "clang++",
#else
              "g++",
#endif
              static_cast<long>(__cplusplus / 100 % 100), g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
