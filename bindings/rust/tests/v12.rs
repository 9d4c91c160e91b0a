//! The 1.2 calls through the safe API, on known streams with explicit
//! timestamps and exact expected values: engine steps and the cause of each
//! stall (docs/metrics.md, "stall causes"), prefix-cache reuse as counts
//! and its bands, status sums and means, configuration errors with the
//! library's reason, the reserved label names.
use std::time::Duration;

use ttft::*;

const T0: u64 = 1_000_000_000; // 1 s on the monotonic clock
const MS: u64 = 1_000_000;

/// Decode-only engine steps of 10 ms from T0+from to T0+to (ms).
fn decode_steps(r: &Registry, from: u64, to: u64) -> u64 {
    let mut n = 0;
    let mut t = from;
    while t < to {
        r.engine_step_at(Some(&StepInfo::decode(3)), T0 + t * MS, T0 + (t + 10) * MS).unwrap();
        t += 10;
        n += 1;
    }
    n
}

/// One stream of class "chat" (stall budget 100 ms) meets one stall of
/// each cause; every count and stalled time is exact.
#[test]
fn engine_steps_give_every_stall_its_cause() {
    let r = Registry::with_config(&Config::new().max_inflight(8)).unwrap();
    let chat = r.add_class("chat", Slo::new().stall_threshold(Duration::from_millis(100))).unwrap();
    let mut s = r.begin_with_at(&Request::new().class(chat), T0).unwrap();
    let mut steps = 0;
    // Five 10 ms decode steps, each followed by the token it produced: the
    // stream's usual step is 10 ms.
    for k in 0..5u64 {
        steps += decode_steps(&r, k * 10, k * 10 + 10);
        s.token_at(1, T0 + (k + 1) * 10 * MS).unwrap();
    }
    assert_eq!(s.stats().unwrap().last_stall_cause, None);
    // PREFILL: a 150 ms step carrying another request's 4096-token prompt
    // fills the gap (50, 200] ms, over the 100 ms budget.
    r.engine_step_at(Some(&StepInfo::decode(3).prefill_tokens(4096).kind(7)), T0 + 50 * MS, T0 + 200 * MS).unwrap();
    s.token_at(1, T0 + 200 * MS).unwrap();
    assert_eq!(s.stats().unwrap().last_stall_cause, Some(StallCause::PREFILL));
    steps += decode_steps(&r, 200, 210);
    s.token_at(1, T0 + 210 * MS).unwrap();
    // ENGINE_IDLE: nothing runs from 210 to 400 ms (a frozen process),
    // then one 10 ms step: steps cover 10 of the 200 ms gap.
    steps += decode_steps(&r, 400, 410);
    s.token_at(1, T0 + 410 * MS).unwrap();
    assert_eq!(s.stats().unwrap().last_stall_cause, Some(StallCause::ENGINE_IDLE));
    // PREEMPTED: marked at 420 ms (first half of the gap), steps run
    // without it, resumed at 550, its token at 560: a 150 ms gap.
    steps += decode_steps(&r, 410, 420);
    s.mark_at(Phase::PREEMPTED, T0 + 420 * MS).unwrap();
    steps += decode_steps(&r, 420, 560);
    s.mark_at(Phase::RESUMED, T0 + 550 * MS).unwrap();
    s.token_at(1, T0 + 560 * MS).unwrap();
    assert_eq!(s.stats().unwrap().last_stall_cause, Some(StallCause::PREEMPTED));
    // NOT_SCHEDULED: decode steps run for 160 ms without this stream.
    steps += decode_steps(&r, 560, 720);
    s.token_at(1, T0 + 720 * MS).unwrap();
    assert_eq!(s.stats().unwrap().last_stall_cause, Some(StallCause::NOT_SCHEDULED));
    // UNKNOWN: no step ends inside (720, 900] ms.
    s.token_at(1, T0 + 900 * MS).unwrap();
    let info = s.stats().unwrap();
    assert_eq!(info.last_stall_cause, Some(StallCause::UNKNOWN));
    assert_eq!(info.stalls, 5);
    assert_eq!(info.preemptions, 1);
    s.end_at(Status::COMPLETED, T0 + 910 * MS).unwrap();
    assert_eq!(steps, 38);

    let snap = r.snapshot().unwrap();
    let want = [
        (StallCause::UNKNOWN, 1, 180 * MS),
        (StallCause::PREFILL, 1, 150 * MS),
        (StallCause::PREEMPTED, 1, 150 * MS),
        (StallCause::NOT_SCHEDULED, 1, 160 * MS),
        (StallCause::ENGINE_IDLE, 1, 200 * MS),
        (StallCause::SLOW_STEP, 0, 0), // its own test below
    ];
    assert_eq!(snap.stall_causes(), want.to_vec());
    assert_eq!(snap.class(chat).stall_causes(), want.to_vec());
    assert_eq!(snap.stalls_by_cause(StallCause::PREFILL), 1);
    assert_eq!(snap.stalled_ns_by_cause(StallCause::PREFILL), 150 * MS);
    assert_eq!(snap.class(chat).stalled_ns_by_cause(StallCause::ENGINE_IDLE), 200 * MS);
    assert_eq!(snap.class(Class::DEFAULT).stalls_by_cause(StallCause::PREFILL), 0);
    assert_eq!(snap.stalls_by_cause(StallCause(99)), 0); // unknown cause
    assert_eq!(snap.counter(Counter::STALLS), 5); // the causes add up to it
    assert_eq!(snap.counter(Counter::PREEMPTIONS), 1);
    // Engine-step durations, registry-wide, by prefill.
    assert_eq!(snap.engine_step_count(true), 1);
    assert_eq!(snap.engine_step_sum(true), 150 * MS);
    assert_eq!(snap.engine_step_quantile(true, 1.0), 150 * MS);
    assert_eq!(snap.engine_step_count(false), 38);
    assert_eq!(snap.engine_step_sum(false), 380 * MS);
    assert_eq!(snap.engine_step_quantile(false, 0.0), 10 * MS);
    assert_eq!(snap.engine_step_quantile(false, 1.0), 10 * MS);
    assert_eq!(snap.engine_step_quantile(false, 1.5), 0);
    // Every format says it.
    let prom = snap.format(Format::PROMETHEUS).unwrap();
    let lines: Vec<&str> = prom.lines().collect();
    for want in [
        "llm_stalls_total{class=\"chat\",cause=\"prefill\"} 1",
        "llm_stalls_total{class=\"chat\",cause=\"engine_idle\"} 1",
        "llm_stall_seconds_total{class=\"chat\",cause=\"unknown\"} 0.18",
        "llm_stall_seconds_total{class=\"chat\",cause=\"prefill\"} 0.15",
        "llm_stall_seconds_total{class=\"chat\",cause=\"engine_idle\"} 0.2",
        "llm_engine_step_seconds_count{prefill=\"false\"} 38",
        "llm_engine_step_seconds_count{prefill=\"true\"} 1",
    ] {
        assert!(lines.contains(&want), "no line {want:?} in the Prometheus exposition");
    }
    // The encoding carries causes and steps.
    let back = Snapshot::decode(&snap.encode().unwrap()).unwrap();
    assert_eq!(back.stall_causes(), want.to_vec());
    assert_eq!(back.engine_step_count(false), 38);
    // Names from the library.
    let names: Vec<_> = StallCause::all().iter().map(|c| c.name().unwrap()).collect();
    assert_eq!(names, ["unknown", "prefill", "preempted", "not_scheduled", "engine_idle", "slow_step"]);
    assert_eq!(StallCause(99).name(), None);
}

/// A server whose every generating stream is in every step (1.3): a
/// decode step of 300 ms that produced the stream's token was itself slow;
/// nothing was left out, so the stall is SLOW_STEP, not NOT_SCHEDULED.
#[test]
fn slow_step_is_its_own_cause() {
    let r = Registry::with_config(&Config::new().max_inflight(8)).unwrap();
    let chat = r.add_class("chat", Slo::new().stall_threshold(Duration::from_millis(100))).unwrap();
    let mut s = r.begin_with_at(&Request::new().class(chat), T0).unwrap();
    for k in 0..5u64 {
        decode_steps(&r, k * 10, k * 10 + 10);
        s.token_at(1, T0 + (k + 1) * 10 * MS).unwrap();
    }
    r.engine_step_at(Some(&StepInfo::decode(3)), T0 + 50 * MS, T0 + 350 * MS).unwrap();
    s.token_at(1, T0 + 350 * MS).unwrap();
    assert_eq!(s.stats().unwrap().last_stall_cause, Some(StallCause::SLOW_STEP));
    s.end_at(Status::COMPLETED, T0 + 360 * MS).unwrap();
    let snap = r.snapshot().unwrap();
    assert_eq!(snap.stalls_by_cause(StallCause::SLOW_STEP), 1);
    assert_eq!(snap.stalled_ns_by_cause(StallCause::SLOW_STEP), 300 * MS);
    assert_eq!(snap.stalls_by_cause(StallCause::NOT_SCHEDULED), 0);
    let prom = snap.format(Format::PROMETHEUS).unwrap();
    assert!(prom.lines().any(|l| l == "llm_stalls_total{class=\"chat\",cause=\"slow_step\"} 1"));
}

#[test]
fn engine_step_arguments() {
    let r = Registry::new().unwrap();
    let t = r.now_ns();
    assert_eq!(r.engine_step_at(None, 0, t), Err(Error::InvalidArgument)); // 0 is not a time
    assert_eq!(r.engine_step_at(None, t, 0), Err(Error::InvalidArgument));
    assert_eq!(r.engine_step(Some(&StepInfo::new()), 0), Err(Error::InvalidArgument));
    r.engine_step_at(None, T0 + 5 * MS, T0 + 2 * MS).unwrap(); // end before start: clamped, 0 ns
    r.engine_step(Some(&StepInfo::new().prefill_tokens(1)), t).unwrap(); // ends now
    let snap = r.snapshot().unwrap();
    assert_eq!(snap.engine_step_count(false), 1);
    assert_eq!(snap.engine_step_sum(false), 0);
    assert_eq!(snap.engine_step_count(true), 1);
    assert_eq!(snap.counter(Counter::STALLS), 0);
    // A registry that never saw a step: stalls are UNKNOWN.
    let r = Registry::with_config(&Config::new().stall_threshold(Duration::from_millis(20))).unwrap();
    let mut s = r.begin_at(T0).unwrap();
    s.token_at(1, T0 + MS).unwrap();
    s.token_at(1, T0 + 31 * MS).unwrap();
    s.end_at(Status::COMPLETED, T0 + 32 * MS).unwrap();
    let snap = r.snapshot().unwrap();
    assert_eq!(snap.stalls_by_cause(StallCause::UNKNOWN), 1);
    assert_eq!(snap.stalled_ns_by_cause(StallCause::UNKNOWN), 30 * MS);
    assert_eq!(snap.engine_step_count(false) + snap.engine_step_count(true), 0);
}

/// annotate_cached's bands: MISS below prefix_hit_min_tokens, PARTIAL
/// below half the prompt, HIT from half on; TTFT and PREFILL split by them.
#[test]
fn annotate_cached_bands() {
    let r = Registry::with_config(&Config::new().max_inflight(16).prompt_band_edges(&[512])).unwrap();
    // (prompt, cached, SCHEDULED at ms, first token at ms)
    let cases = [
        (1000, 0, 1, 10),   // MISS
        (1000, 15, 2, 12),  // MISS: below the default 16
        (1000, 400, 4, 20), // PARTIAL: 800 < 1000
        (1000, 500, 1, 5),  // HIT: exactly half
        (100, 100, 3, 7),   // HIT
    ];
    for (p, c, sched, first) in cases {
        let mut s = r.begin_at(T0).unwrap();
        s.mark_at(Phase::SCHEDULED, T0 + sched * MS).unwrap();
        s.annotate_cached(p, c).unwrap();
        s.token_at(1, T0 + first * MS).unwrap();
        assert_eq!(s.annotate_cached(p, c), Err(Error::Range)); // after the first token
        s.end_at(Status::COMPLETED, T0 + 30 * MS).unwrap();
    }
    let snap = r.snapshot().unwrap();
    let ttft = |b: PrefixBand, q| snap.split_quantile(Split::PREFIX_CACHE, b.index(), q);
    let prefill = |b: PrefixBand, q| snap.split_quantile(Split::PREFILL_BY_PREFIX, b.index(), q);
    assert_eq!(snap.split_count(Split::PREFIX_CACHE, PrefixBand::MISS.index()), 2);
    assert_eq!(snap.split_count(Split::PREFIX_CACHE, PrefixBand::PARTIAL.index()), 1);
    assert_eq!(snap.split_count(Split::PREFIX_CACHE, PrefixBand::HIT.index()), 2);
    assert_eq!((ttft(PrefixBand::MISS, 0.0), ttft(PrefixBand::MISS, 1.0)), (10 * MS, 12 * MS));
    assert_eq!(ttft(PrefixBand::PARTIAL, 1.0), 20 * MS);
    assert_eq!((ttft(PrefixBand::HIT, 0.0), ttft(PrefixBand::HIT, 1.0)), (5 * MS, 7 * MS));
    // PREFILL (first token - SCHEDULED) by band
    assert_eq!(snap.split_count(Split::PREFILL_BY_PREFIX, PrefixBand::MISS.index()), 2);
    assert_eq!((prefill(PrefixBand::MISS, 0.0), prefill(PrefixBand::MISS, 1.0)), (9 * MS, 10 * MS));
    assert_eq!(prefill(PrefixBand::PARTIAL, 1.0), 16 * MS);
    assert_eq!((prefill(PrefixBand::HIT, 0.0), prefill(PrefixBand::HIT, 1.0)), (4 * MS, 4 * MS));
    // the prompt bands were set too: 4 prompts of 1000, one of 100
    assert_eq!(snap.split_count(Split::PROMPT_BAND, 0), 1);
    assert_eq!(snap.split_count(Split::PROMPT_BAND, 1), 4);

    // A higher threshold: 50 of 100 cached is a MISS there.
    let r = Registry::with_config(&Config::new().prefix_hit_min_tokens(64)).unwrap();
    let mut s = r.begin_at(T0).unwrap();
    assert_eq!(s.annotate_cached(0, 0), Err(Error::InvalidArgument)); // prompt 0
    assert_eq!(s.annotate_cached(10, 11), Err(Error::InvalidArgument)); // cached > prompt
    s.annotate_cached(100, 50).unwrap();
    s.token_at(1, T0 + 3 * MS).unwrap();
    s.end_at(Status::COMPLETED, T0 + 4 * MS).unwrap();
    let shared = r.begin_shared(&Request::new()).unwrap();
    let t = r.now_ns(); // a shared stream begins now
    shared.mark_at(Phase::SCHEDULED, t + MS).unwrap();
    shared.annotate_cached(100, 64).unwrap(); // exactly the threshold and more than half: HIT
    shared.token_at(1, t + 2 * MS).unwrap();
    assert_eq!(shared.stats().unwrap().tokens, 1);
    shared.end_at(Status::COMPLETED, t + 3 * MS).unwrap();
    assert_eq!(shared.annotate_cached(100, 64), Err(Error::Stale));
    let snap = r.snapshot().unwrap();
    assert_eq!(snap.split_count(Split::PREFIX_CACHE, PrefixBand::MISS.index()), 1);
    assert_eq!(snap.split_count(Split::PREFIX_CACHE, PrefixBand::HIT.index()), 1);
    assert_eq!(snap.split_count(Split::PREFIX_CACHE, PrefixBand::PARTIAL.index()), 0);
    assert_eq!(snap.counter(Counter::STALE), 1);
    assert_eq!(snap.counter(Counter::CLOCK_CLAMPED), 0);
    assert_eq!(snap.split_count(Split::PREFILL_BY_PREFIX, PrefixBand::HIT.index()), 1);
}

/// Status sums and means reproduce "mean TTFT of completed requests".
#[test]
fn status_sums_and_means() {
    let r = Registry::with_config(&Config::new().max_inflight(16)).unwrap();
    let play = |toks: &[(u32, u64)], end: u64, st: Status| {
        let mut s = r.begin_at(T0).unwrap();
        for &(n, t) in toks {
            s.token_at(n, T0 + t * MS).unwrap();
        }
        s.end_at(st, T0 + end * MS).unwrap();
    };
    play(&[(1, 5), (1, 10), (1, 15)], 20, Status::COMPLETED);
    play(&[(1, 8), (4, 20)], 30, Status::COMPLETED);
    play(&[(1, 40)], 50, Status::CANCELLED);
    play(&[], 7, Status::ERROR);
    let snap = r.snapshot().unwrap();
    let done = snap.status(Status::COMPLETED);
    assert_eq!(done.count(Metric::TTFT), 2);
    assert_eq!(done.sum(Metric::TTFT), 13 * MS);
    assert_eq!(done.mean(Metric::TTFT), 6.5e6);
    assert_eq!(done.sum(Metric::E2E), 50 * MS);
    assert_eq!(done.mean(Metric::E2E), 25e6);
    assert_eq!(done.sum(Metric::OUTPUT_TOKENS), 8);
    assert_eq!(done.mean(Metric::OUTPUT_TOKENS), 4.0);
    assert_eq!(done.sum(Metric::TPOT), 5 * MS + 3 * MS); // (15-5)/2, (20-8)/(5-1): 5 tokens
    assert_eq!(done.sum(Metric::ITL), 0); // not a status metric
    assert_eq!(done.mean(Metric::ITL), 0.0);
    let cancelled = snap.status(Status::CANCELLED);
    assert_eq!(cancelled.sum(Metric::TTFT), 40 * MS);
    assert_eq!(cancelled.sum(Metric::E2E), 50 * MS);
    assert_eq!(snap.status(Status::ERROR).sum(Metric::E2E), 7 * MS);
    assert_eq!(snap.status(Status::ERROR).sum(Metric::TTFT), 0);
    assert_eq!(snap.status(Status::ERROR).mean(Metric::TTFT), 0.0);
    // the plain metric counts every stream's TTFT: 5 + 8 + 40
    assert_eq!(snap.sum(Metric::TTFT), 53 * MS);
    assert_eq!(snap.class(Class::DEFAULT).status(Status::COMPLETED).sum(Metric::TTFT), 13 * MS);
    assert_eq!(snap.class(Class(5)).status(Status::COMPLETED).sum(Metric::TTFT), 0);
    // judged: every COMPLETED and ERROR stream (a cancel without a missed budget is not)
    assert_eq!(snap.counter(Counter::SLO_JUDGED), 3);
    assert_eq!(snap.counter(Counter::SLO_MET), 2);
}

fn reason(c: Config) -> String {
    match c.check() {
        Err(Error::InvalidConfig(why)) => {
            // Registry::with_config refuses it with the same reason.
            assert_eq!(Registry::with_config(&c).unwrap_err(), Error::InvalidConfig(why.clone()));
            why
        }
        other => panic!("accepted or another error: {other:?}"),
    }
}

#[test]
fn config_check_says_what_is_wrong() {
    assert_eq!(Config::new().check(), Ok(()));
    assert_eq!(Config::new().label("region", "eu").prefix_hit_min_tokens(1).check(), Ok(()));
    assert_eq!(
        reason(Config::new().label("region", "eu").label("view", "x")),
        "const_labels[1].name \"view\" is reserved (the exporters write it; see TTFT_RESERVED_LABELS)"
    );
    assert_eq!(
        reason(Config::new().label("__x", "eu")),
        "const_labels[0].name \"__x\" starts with \"__\" (reserved by Prometheus)"
    );
    assert_eq!(reason(Config::new().max_inflight(0)), "max_inflight 0 is outside 1..1048576 (TTFT_MAX_INFLIGHT)");
    assert_eq!(
        reason(Config::new().prefix_hit_min_tokens(0)),
        "prefix_hit_min_tokens is 0; it must be at least 1 (fewer cached tokens is a miss)"
    );
    assert_eq!(reason(Config::new().native_schema(9)), "native_schema 9 is outside -4..8");
    assert_eq!(
        reason(Config::new().prompt_band_edges(&[100, 50])),
        "prompt_band_edges[1] = 50 is not above prompt_band_edges[0] = 100 (edges ascend)"
    );
    assert_eq!(reason(Config::new().max_threads(300)), "max_threads 300 is above 256");
    assert_eq!(
        reason(Config::new().memory_limit(1000)),
        "memory_limit 1000 bytes is below TTFT_MIN_MEMORY_LIMIT (1048576)"
    );
    // What the bindings refuse before C sees it has a reason too.
    assert_eq!(reason(Config::new().model("a\0b")), "model \"a\\0b\" contains a NUL byte");
    assert_eq!(
        reason(Config::new().prompt_band_edges(&[1, 2, 3, 4, 5, 6, 7, 8])),
        "prompt_band_edges: 8 edges, at most 7 (TTFT_MAX_BANDS - 1)"
    );
    assert_eq!(
        reason(Config::new().prom_buckets(Metric::ITL_PER_TOKEN, &[1, 2])),
        "prom_buckets: metric 11 has no configurable buckets (metrics 0..10)"
    );
    // The error: EINVAL's code, the reason in its text.
    let e = Config::new().label("le", "x").check().unwrap_err();
    assert_eq!(e.code(), -1);
    assert_eq!(e.name(), "TTFT_EINVAL");
    assert_eq!(
        e.to_string(),
        "invalid configuration: const_labels[0].name \"le\" is reserved (the exporters write it; see TTFT_RESERVED_LABELS) (TTFT_EINVAL)"
    );
    // Reserved names, as the bindings list them.
    assert!(is_reserved_label("view") && is_reserved_label("__name__") && !is_reserved_label("region"));
    assert_eq!(RESERVED_LABELS.len(), 17); // abi_layout.rs compares the list with the header
}

/// Engine steps reported from several threads while others record tokens
/// and one takes snapshots: every step is counted once, with its duration.
#[test]
fn concurrent_engine_steps() {
    let r = Registry::with_config(&Config::new().max_inflight(64).max_threads(16)).unwrap();
    const G: u64 = 4;
    const N: u64 = 500;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (r, stop) = (r.clone(), stop.clone());
        std::thread::spawn(move || {
            // Relaxed: a stop flag, no data published through it.
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = r.snapshot().unwrap().stall_causes();
            }
        })
    };
    let mut threads = Vec::new();
    for g in 0..G {
        let r2 = r.clone();
        threads.push(std::thread::spawn(move || {
            for i in 0..N {
                let info = StepInfo::decode(8).prefill_tokens((i % 2) as u32);
                let start = T0 + i * MS;
                r2.engine_step_at(Some(&info), start, start + (g + 1) * MS).unwrap();
            }
        }));
        let r3 = r.clone();
        threads.push(std::thread::spawn(move || {
            let mut s = r3.begin().unwrap();
            for _ in 0..N {
                s.token(1).unwrap();
            }
            s.end(Status::COMPLETED).unwrap();
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().unwrap();
    let snap = r.snapshot().unwrap();
    assert_eq!(snap.engine_step_count(true), G * N / 2);
    assert_eq!(snap.engine_step_count(false), G * N / 2);
    // thread g's steps last g + 1 ms: (1 + 2 + 3 + 4) ms * N
    assert_eq!(snap.engine_step_sum(true) + snap.engine_step_sum(false), 10 * N * MS);
    assert_eq!(snap.counter(Counter::TOKENS), G * N);
}

/// Request ids, trace ids and the k slowest requests (slowest_k 2): the
/// lists rank by TTFT and by longest gap, with ids, values, status and the
/// stall cause of the longest gap.
#[test]
fn slowest_requests_with_ids() {
    let r =
        Registry::with_config(&Config::new().max_inflight(8).slowest_k(2).stall_threshold(Duration::from_millis(100)))
            .unwrap();
    const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
    let play = |req: Request, toks: &[u64], end: u64, st: Status| {
        let mut s = r.begin_with_at(&req, T0).unwrap();
        for &t in toks {
            s.token_at(1, T0 + t * MS).unwrap();
        }
        s.end_at(st, T0 + end * MS).unwrap();
    };
    play(Request::new().request_id("req-1").trace_id(TRACE), &[10, 20], 30, Status::COMPLETED);
    // a 200 ms gap filled by a step that carried prefill: a PREFILL stall
    let mut s2 = r.begin_with_at(&Request::new().request_id("req-2").trace_id("XYZ"), T0).unwrap();
    s2.token_at(1, T0 + 30 * MS).unwrap();
    r.engine_step_at(Some(&StepInfo::decode(2).prefill_tokens(2048)), T0 + 30 * MS, T0 + 230 * MS).unwrap();
    s2.token_at(1, T0 + 230 * MS).unwrap();
    s2.end_at(Status::COMPLETED, T0 + 240 * MS).unwrap();
    play(Request::new().request_id("req-3"), &[20, 70], 80, Status::CANCELLED);
    play(Request::new().request_id("req-4"), &[], 5, Status::CANCELLED);
    let snap = r.snapshot().unwrap();
    assert_eq!(snap.counter(Counter::TRACE_ID_INVALID), 1); // "XYZ" is ignored, the request measured
    let ttft = snap.slowest(SlowestBy::TTFT);
    let ids: Vec<_> = ttft.iter().map(|x| (x.request_id.as_str(), x.value_ns)).collect();
    assert_eq!(ids, [("req-2", 30 * MS), ("req-3", 20 * MS)]);
    let top = &ttft[0];
    assert_eq!((top.ttft_ns, top.max_gap_ns, top.tokens), (30 * MS, 200 * MS, 2));
    assert_eq!((top.t_begin_ns, top.t_end_ns), (T0, T0 + 240 * MS));
    assert_eq!((top.status, top.class, top.trace_id.as_str()), (Status::COMPLETED, Class::DEFAULT, ""));
    assert_eq!(top.cause, StallCause::PREFILL);
    assert_eq!(ttft[1].status, Status::CANCELLED);
    assert_eq!(ttft[1].cause, StallCause::UNKNOWN); // its longest gap was no stall
    let gap = snap.class(Class::DEFAULT).slowest(SlowestBy::GAP);
    let ids: Vec<_> = gap.iter().map(|x| (x.request_id.as_str(), x.value_ns)).collect();
    assert_eq!(ids, [("req-2", 200 * MS), ("req-3", 50 * MS)]);
    assert_eq!(snap.class(Class(7)).slowest(SlowestBy::TTFT), vec![]);
    assert_eq!(snap.slowest(SlowestBy(9)), vec![]);
    // The trace id of a request in the lists, and how ids are kept.
    let r = Registry::with_config(&Config::new().slowest_k(1)).unwrap();
    let long = "x".repeat(100);
    let mut s = r.begin_with_at(&Request::new().request_id(&long).trace_id(TRACE), T0).unwrap();
    s.token_at(1, T0 + 7 * MS).unwrap();
    s.end_at(Status::COMPLETED, T0 + 8 * MS).unwrap();
    let mut s = r.begin_with_at(&Request::new().request_id("a\tb"), T0).unwrap();
    s.token_at(1, T0 + 3 * MS).unwrap();
    s.token_at(1, T0 + 9 * MS).unwrap();
    s.end_at(Status::ERROR, T0 + 10 * MS).unwrap();
    let snap = r.snapshot().unwrap();
    let t = &snap.slowest(SlowestBy::TTFT)[0];
    assert_eq!((t.request_id.as_str(), t.trace_id.as_str()), ("x".repeat(63).as_str(), TRACE));
    let g = &snap.slowest(SlowestBy::GAP)[0];
    assert_eq!((g.request_id.as_str(), g.value_ns, g.status), ("a?b", 6 * MS, Status::ERROR));
    // No lists with slowest_k 0; a NUL in an id is '?' (tests/client_ids.rs).
    let r = Registry::with_config(&Config::new().slowest_k(0)).unwrap();
    assert!(r.begin_with(&Request::new().request_id("a\0b")).is_ok());
    let mut s = r.begin_with_at(&Request::new().request_id("q"), T0).unwrap();
    s.token_at(1, T0 + MS).unwrap();
    s.end_at(Status::COMPLETED, T0 + 2 * MS).unwrap();
    assert_eq!(r.snapshot().unwrap().slowest(SlowestBy::TTFT), vec![]);
    assert_eq!(reason_of(Config::new().slowest_k(65)), "slowest_k 65 is above TTFT_MAX_SLOWEST_K (64)");
}

fn reason_of(c: Config) -> String {
    match c.check() {
        Err(Error::InvalidConfig(why)) => why,
        other => panic!("{other:?}"),
    }
}
