//! Issue 32 items 4 and 7 in Rust: a W3C `traceparent` header accepted as
//! a server receives it ([`Request::traceparent`], [`traceparent_trace_id`]),
//! and a wall-clock timestamp (`SystemTime`, what `time.time_ns()` gives)
//! refused at begin with [`Error::Clock`], counted in CLOCK_REFUSED.
use std::time::{SystemTime, UNIX_EPOCH};
use ttft::*;

const T0: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

fn tp(tail: &str) -> String {
    format!("00-{TRACE}-00f067aa0ba902b7-01{tail}")
}

#[test]
fn traceparent_parse() {
    assert_eq!(traceparent_trace_id(&tp("")).as_deref(), Some(TRACE));
    assert_eq!(traceparent_trace_id(&format!(" \t{}\t ", tp(""))).as_deref(), Some(TRACE));
    let future = format!("cc-{TRACE}-00f067aa0ba902b7-01-what-the-future-will-be-like");
    assert_eq!(traceparent_trace_id(&future).as_deref(), Some(TRACE));
    assert_eq!(traceparent_trace_id(&tp(&" ".repeat(1000))).as_deref(), Some(TRACE));
    for bad in [
        tp("-"),
        tp(" x"),
        tp(&format!("{}x", " ".repeat(1000))),
        tp("\0"),
        format!("ff-{TRACE}-00f067aa0ba902b7-01"),
        format!("00-{}-00f067aa0ba902b7-01", TRACE.to_uppercase()),
        format!("00-{}-00f067aa0ba902b7-01", "0".repeat(32)),
        format!("00-{TRACE}-0000000000000000-01"),
        TRACE.to_string(),
        String::new(),
        "00-\u{e9}".to_string(),
    ] {
        assert_eq!(traceparent_trace_id(&bad), None, "{bad:?}");
    }
}

#[test]
fn request_traceparent() {
    let r = Registry::with_config(&Config::new().slowest_k(8)).unwrap();
    let reqs = [
        Request::new().traceparent(&tp("")),
        Request::new().traceparent_bytes(format!("  {}  ", tp("")).as_bytes()),
        Request::new().traceparent("00-zz"),           // invalid: counted
        Request::new().traceparent_bytes(b"\xff\xfe"), // invalid: counted
        Request::new().trace_id("0af7651916cd43dd8448eb211c80319c").traceparent("junk"), // trace_id wins
    ];
    for (i, q) in reqs.iter().enumerate() {
        let i = i as u64;
        let mut s = r.begin_with_at(q, T0 + i * MS).expect("ids never fail a begin");
        s.token_at(1, T0 + i * MS + (i + 1) * MS).unwrap();
        s.end_at(Status::COMPLETED, T0 + i * MS + (i + 2) * MS).unwrap();
    }
    let snap = r.snapshot().unwrap();
    let got: Vec<String> = snap.slowest(SlowestBy::TTFT).into_iter().rev().map(|x| x.trace_id).collect();
    assert_eq!(got, vec![TRACE, TRACE, "", "", "0af7651916cd43dd8448eb211c80319c"]);
    assert_eq!(snap.counter(Counter::TRACE_ID_INVALID), 2);
}

fn wall_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

#[test]
fn wall_clock_refused() {
    let r = Registry::with_config(&Config::new().max_inflight(2)).unwrap();
    let w = wall_ns();
    let e = r.begin_at(w).err().expect("a wall-clock begin is refused");
    assert_eq!(e, Error::Clock);
    assert_eq!(e.code(), -10);
    assert_eq!(e.name(), "TTFT_ECLOCK");
    let msg = e.to_string();
    assert!(msg.contains("CLOCK_MONOTONIC") && msg.contains("wall-clock"), "{msg}");
    assert_eq!(r.begin_with_at(&Request::new().traceparent(&tp("")), w).err(), Some(Error::Clock));
    // a class of another registry: InvalidArgument, not Full
    assert_eq!(r.begin_with(&Request::new().class(Class(5))).err(), Some(Error::InvalidArgument));
    // a full table is Full; the clock is checked first
    let a = r.begin().unwrap();
    let b = r.begin_at(now_ns()).unwrap();
    assert_eq!(r.begin().err(), Some(Error::Full));
    assert_eq!(r.begin_at(w).err(), Some(Error::Clock));
    drop((a, b));
    let snap = r.snapshot().unwrap();
    assert_eq!(snap.counter(Counter::CLOCK_REFUSED), 3);
    assert_eq!(snap.counter(Counter::DROPPED), 1);
    assert_eq!(snap.counter(Counter::BEGUN), 2);
    assert_eq!(Counter::CLOCK_REFUSED.name(), Some("clock_refused"));
}

#[test]
fn wall_clock_after_a_monotonic_begin_is_clamped() {
    let r = Registry::new().unwrap();
    let t0 = now_ns();
    let mut s = r.begin_at(t0).unwrap();
    s.token_at(1, wall_ns()).unwrap();
    s.end_at(Status::COMPLETED, wall_ns()).unwrap();
    let snap = r.snapshot().unwrap();
    assert_eq!(snap.counter(Counter::CLOCK_CLAMPED), 2);
    assert_eq!(snap.quantile(Metric::TTFT, 1.0), 0); // not 56 years
    assert_eq!(snap.quantile(Metric::E2E, 1.0), 0);
}
