//! Issue 29 from Rust (SPEC 10.2): a request's own budgets on begin, the
//! class's length-aware first-token deadline, token deadline and
//! fluid_min, the four fluidity counters and a stream's fluidity, with the
//! values tests/test_fluidity.c computes by hand.
use std::time::Duration;
use ttft::*;

const T0: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

#[test]
fn late_stall_after_slack() {
    let r = Registry::with_config(&Config::new().max_inflight(4)).unwrap();
    let c = r.add_class("chat", Slo::new().tpot(Duration::from_millis(50))).unwrap();
    let mut s = r.begin_with_at(&Request::new().class(c), T0).unwrap();
    let mut t = T0 + 100 * MS;
    s.token_at(1, t).unwrap();
    // D = 50 ms: gaps 40, 40 build slack 10, 20; 200 misses
    // floor((200 - 20 - 50) / 50) + 1 = 3; 40 meets. 6 deadlines, 3 missed.
    for g in [40, 40, 200, 40] {
        t += g * MS;
        s.token_at(1, t).unwrap();
    }
    let i = s.stats().unwrap();
    assert_eq!((i.deadlines, i.deadlines_missed, i.fluidity()), (6, 3, 0.5));
    assert_eq!((i.tpot_slo_ns, i.ttft_slo_ns), (50 * MS, 0));
    s.end_at(Status::COMPLETED, t).unwrap();
    let snap = r.snapshot().unwrap();
    let v = snap.class(c);
    assert_eq!(v.counter(Counter::TOKEN_DEADLINES), 6);
    assert_eq!(v.counter(Counter::TOKEN_DEADLINES_MISSED), 3);
    assert_eq!(v.counter(Counter::FLUID), 0);
    assert_eq!(v.counter(Counter::FLUID_JUDGED), 1);
}

#[test]
fn own_budgets_and_length_aware_deadline() {
    assert_eq!(Slo::new().fluid_min, 0.9); // ttft_slo_init's default
    let r = Registry::with_config(&Config::new().max_inflight(4)).unwrap();
    let want = Slo::new()
        .ttft(Duration::from_millis(100))
        .ttft_per_prompt_token(Duration::from_millis(1))
        .token_deadline(Duration::from_millis(20))
        .fluid_min(0.8);
    let c = r.add_class("long", want).unwrap();
    // 499 prompt tokens: deadline 599 ms; a TTFT of 600 ms misses it, the
    // same request with its own 700 ms target meets it.
    for own in [0, 700 * MS] {
        let q = Request::new().class(c).prompt_tokens(499).slo_ns(own, 0);
        let mut s = r.begin_with_at(&q, T0).unwrap();
        assert_eq!(s.stats().unwrap().ttft_slo_ns, if own == 0 { 599 * MS } else { own });
        s.token_at(1, T0 + 600 * MS).unwrap();
        s.end_at(Status::COMPLETED, T0 + 600 * MS).unwrap();
    }
    let snap = r.snapshot().unwrap();
    let v = snap.class(c);
    assert_eq!((v.counter(Counter::SLO_MET), v.counter(Counter::SLO_JUDGED)), (1, 2));
    assert_eq!(v.slo().unwrap(), Slo { stall_threshold_ns: 500 * MS, ..want }); // stall budget resolved
    assert_eq!(r.add_class("bad", Slo::new().fluid_min(1.5)).unwrap_err(), Error::InvalidArgument);
}

#[test]
fn slowest_entries_carry_fluidity_and_budgets() {
    // tests/test_fluidity.c slowest_entries_carry_fluidity_and_budgets: an
    // early 120 ms stall (D 50 ms) then ten 10 ms gaps: 12 deadlines, 2
    // missed; judged against 100 ms + 1 ms x 200 prompt tokens and 50 ms
    let r = Registry::with_config(&Config::new().max_inflight(4)).unwrap();
    let slo = Slo::new()
        .ttft(Duration::from_millis(100))
        .tpot(Duration::from_millis(50))
        .ttft_per_prompt_token(Duration::from_millis(1));
    let c = r.add_class("chat", slo).unwrap();
    let mut s = r.begin_with_at(&Request::new().class(c).prompt_tokens(200), T0).unwrap();
    let mut t = T0 + 400 * MS;
    s.token_at(1, t).unwrap();
    for g in [120, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10] {
        t += g * MS;
        s.token_at(1, t).unwrap();
    }
    s.end_at(Status::COMPLETED, t).unwrap();
    let snap = r.snapshot().unwrap();
    let v = snap.class(c).slowest(SlowestBy::TTFT);
    assert_eq!(v.len(), 1);
    let e = &v[0];
    assert_eq!((e.deadlines, e.deadlines_missed), (12, 2));
    assert_eq!(e.fluidity(), 1.0 - 2.0 / 12.0);
    assert_eq!((e.token_deadline_ns, e.ttft_slo_ns, e.tpot_slo_ns), (50 * MS, 300 * MS, 50 * MS));
}
