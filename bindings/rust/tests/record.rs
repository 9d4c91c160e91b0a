//! Known streams recorded through the safe API, with exact expected values:
//! counts, sums, exact min/max (quantiles 0 and 1), counters, per-class and
//! per-status views, encodings, formats, the endpoint, errors.
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use ttft::*;

const T0: u64 = 1_000_000_000; // 1 s on the monotonic clock
const MS: u64 = 1_000_000;

fn reg(n: u32) -> Registry {
    Registry::with_config(&Config::new().max_inflight(n)).expect("registry")
}

/// Begin at T0+at, tokens (n, offset) ..., end at T0+end with status.
fn play(r: &Registry, req: &Request, at: u64, tokens: &[(u32, u64)], end: u64, st: Status) {
    let mut s = r.begin_with_at(req, T0 + at).unwrap();
    for &(n, t) in tokens {
        s.token_at(n, T0 + t).unwrap();
    }
    s.end_at(st, T0 + end).unwrap();
}

#[test]
fn hooks_record_exact_values() {
    let r = reg(16);
    let d = Request::new();
    // TTFT 5 ms, gaps 5 and 5 ms (3 tokens: TPOT 5 ms), E2E 20 ms
    play(&r, &d, 0, &[(1, 5 * MS), (1, 10 * MS), (1, 15 * MS)], 20 * MS, Status::COMPLETED);
    // TTFT 8 ms, one 4-token emission later after 12 ms: TPOT 12/4 = 3 ms
    play(&r, &d, 0, &[(1, 8 * MS), (4, 20 * MS)], 30 * MS, Status::COMPLETED);
    // cancelled before its first token after 7 ms: abandoned
    play(&r, &d, 0, &[], 7 * MS, Status::CANCELLED);
    let s = r.snapshot().unwrap();
    assert_eq!(s.count(Metric::TTFT), 2);
    assert_eq!(s.sum(Metric::TTFT), 13 * MS);
    assert_eq!(s.quantile(Metric::TTFT, 0.0), 5 * MS);
    assert_eq!(s.quantile(Metric::TTFT, 1.0), 8 * MS);
    assert_eq!(s.mean(Metric::TTFT), 6.5e6);
    assert_eq!(s.count(Metric::ITL), 3);
    assert_eq!(s.sum(Metric::ITL), 22 * MS);
    assert_eq!(s.quantile(Metric::ITL, 1.0), 12 * MS);
    assert_eq!(s.count(Metric::TPOT), 2);
    assert_eq!(s.quantile(Metric::TPOT, 0.0), 3 * MS);
    assert_eq!(s.quantile(Metric::TPOT, 1.0), 5 * MS);
    assert_eq!(s.count(Metric::E2E), 3);
    assert_eq!(s.sum(Metric::E2E), 57 * MS);
    assert_eq!(s.sum(Metric::OUTPUT_TOKENS), 8);
    assert_eq!(s.count(Metric::ABANDONED_WAIT), 1);
    assert_eq!(s.sum(Metric::ABANDONED_WAIT), 7 * MS);
    // token-weighted ITL: 5, 5, then 4 observations of 12/4 = 3 ms
    assert_eq!(s.count(Metric::ITL_PER_TOKEN), 6);
    assert_eq!(s.sum(Metric::ITL_PER_TOKEN), 22 * MS);
    assert_eq!(s.counter(Counter::BEGUN), 3);
    assert_eq!(s.counter(Counter::COMPLETED), 2);
    assert_eq!(s.counter(Counter::CANCELLED), 1);
    assert_eq!(s.counter(Counter::ABANDONED), 1);
    assert_eq!(s.counter(Counter::TOKENS), 8);
    assert_eq!(s.counter(Counter::NO_TPOT), 1);
    assert_eq!(s.counter(Counter::STALE), 0);
    assert_eq!(s.gauge(Gauge::INFLIGHT), 0);
    // the per-status views: what client benchmarks count
    assert_eq!(s.status(Status::COMPLETED).count(Metric::TTFT), 2);
    assert_eq!(s.status(Status::COMPLETED).quantile(Metric::E2E, 1.0), 30 * MS);
    assert_eq!(s.status(Status::CANCELLED).count(Metric::TTFT), 0);
    assert_eq!(s.status(Status::CANCELLED).count(Metric::E2E), 1);
    assert_eq!(s.status(Status::CANCELLED).quantile(Metric::E2E, 0.0), 7 * MS);
}

#[test]
fn counters_come_from_the_library() {
    let all = Counter::all();
    assert!(all.len() >= 14, "{} counters", all.len());
    assert_eq!(all[0], Counter::BEGUN);
    assert_eq!(Counter::STALE.name(), Some("stale"));
    assert_eq!(Counter(100_000).name(), None);
    assert_eq!(Metric::all().len(), 12);
    assert_eq!(Metric::ITL_PER_TOKEN.name(), Some("itl_per_token"));
    assert_eq!(Status::all(), vec![Status::COMPLETED, Status::CANCELLED, Status::ERROR]);
    assert_eq!(Format::PROMETHEUS_PROTOBUF.name(), Some("prometheus_protobuf"));
    let r = reg(4);
    play(&r, &Request::new(), 0, &[(2, MS)], 2 * MS, Status::ERROR);
    let c = r.snapshot().unwrap().counters();
    assert_eq!(c.len(), all.len());
    assert!(c.contains(&(Counter::ERRORS, 1)));
    assert!(c.contains(&(Counter::TOKENS, 2)));
    assert!(c.contains(&(Counter::BEGUN, 1)));
    assert_eq!(Counter(100_000).name(), None);
    assert_eq!(r.snapshot().unwrap().counter(Counter(100_000)), 0);
}

#[test]
fn dropping_an_unended_stream_cancels_it() {
    let r = reg(1);
    {
        let mut s = r.begin_at(T0).unwrap();
        s.token_at(1, T0 + MS).unwrap();
        assert_eq!(r.inflight(), 1);
        // the one slot is taken: a second begin is refused and counted
        assert_eq!(r.begin_at(T0).unwrap_err(), Error::Full);
    } // dropped here: CANCELLED, slot freed
    assert_eq!(r.inflight(), 0);
    let s = r.snapshot().unwrap();
    assert_eq!(s.counter(Counter::CANCELLED), 1);
    assert_eq!(s.counter(Counter::ABANDONED), 0); // it had a token
    assert_eq!(s.counter(Counter::DROPPED), 1);
    assert_eq!(s.counter(Counter::STALE), 0);
    // an early return through `?` cancels too
    fn handler(r: &Registry) -> Result<()> {
        let _s = r.begin()?;
        Err(Error::Io)
    }
    assert_eq!(handler(&r), Err(Error::Io));
    let s = r.snapshot().unwrap();
    assert_eq!(s.counter(Counter::CANCELLED), 2);
    assert_eq!(s.counter(Counter::ABANDONED), 1);
    // an ended stream's drop does not end it twice (no STALE count)
    r.begin().unwrap().end(Status::COMPLETED).unwrap();
    assert_eq!(r.snapshot().unwrap().counter(Counter::STALE), 0);
}

#[test]
fn errors_mirror_the_c_codes() {
    let r = reg(4);
    let mut s = r.begin().unwrap();
    assert_eq!(s.token(0), Err(Error::InvalidArgument));
    assert_eq!(s.token_at(1, 0), Err(Error::InvalidArgument)); // 0 is never a time
    assert_eq!(r.begin_at(0).unwrap_err(), Error::InvalidArgument);
    let h = s.handle();
    r.end(h, Status::ERROR).unwrap();
    assert_eq!(s.token(1), Err(Error::Stale));
    assert_eq!(r.token_emitted(h, 1), Err(Error::Stale));
    assert_eq!(r.end(h, Status::COMPLETED), Err(Error::Stale));
    assert_eq!(s.end(Status::COMPLETED), Err(Error::Stale));
    assert_eq!(r.snapshot().unwrap().counter(Counter::STALE), 4);
    assert_eq!(r.seq_stats(h), Err(Error::Stale));

    assert_eq!(Error::Stale.code(), -2);
    assert_eq!(Error::Stale.name(), "TTFT_ESTALE");
    assert_eq!(Error::Stale.to_string(), "stale or unknown sequence handle (stream already ended?) (TTFT_ESTALE)");
    assert_eq!(Error::from_code(-7), Some(Error::Exists));
    assert_eq!(Error::from_code(0), None);
    assert_eq!(Error::from_code(-99), Some(Error::Other(-99)));
    assert_eq!(Error::Other(-99).to_string(), "unknown error (TTFT_UNKNOWN)");
    let e: Box<dyn std::error::Error> = Box::new(Error::Corrupt);
    assert!(e.to_string().starts_with("malformed"));

    assert_eq!(r.add_class("chat", Slo::new()), Ok(Class(1)));
    assert_eq!(r.add_class("chat", Slo::new()), Err(Error::Exists));
    assert_eq!(r.add_class("default", Slo::new()), Err(Error::Exists));
    assert_eq!(r.add_class("no spaces", Slo::new()), Err(Error::InvalidArgument));
    assert_eq!(r.add_class("nul\0", Slo::new()), Err(Error::InvalidArgument));
    assert_eq!(r.find_class("chat"), Ok(Class(1)));
    assert_eq!(r.find_class("nope"), Err(Error::Stale));
    // an unknown class is an invalid request, not a full table (no drop counted)
    assert_eq!(r.begin_with(&Request::new().class(Class(7))).unwrap_err(), Error::InvalidArgument);
    assert_eq!(r.snapshot().unwrap().counter(Counter::DROPPED), 0);
    // a refused configuration is EINVAL with the library's reason (tests/v12.rs has the reasons)
    for bad in [
        Config::new().max_inflight(0),
        Config::new().label("bad name", "x"),
        Config::new().prompt_band_edges(&[500, 100]),
    ] {
        let e = Registry::with_config(&bad).unwrap_err();
        assert!(matches!(e, Error::InvalidConfig(ref why) if !why.is_empty()), "{e:?}");
        assert_eq!(e.code(), Error::InvalidArgument.code());
    }
    assert_eq!(Snapshot::decode(b"not a snapshot").unwrap_err(), Error::Corrupt);
    assert_eq!(Snapshot::decode_base64("!!!!").unwrap_err(), Error::Corrupt);
    let full = Registry::with_config(&Config::new().max_classes(2)).unwrap();
    full.add_class("a", Slo::new()).unwrap();
    assert_eq!(full.add_class("b", Slo::new()), Err(Error::Full));
}

#[test]
fn classes_slos_and_attainment() {
    let r = Registry::with_config(
        &Config::new()
            .max_inflight(8)
            .class("chat", Slo::new().ttft(Duration::from_millis(10)).tpot(Duration::from_millis(4))),
    )
    .unwrap();
    let chat = r.find_class("chat").unwrap();
    assert_eq!(chat, Class(1));
    let batch = r.add_class("batch", Slo::new().e2e(Duration::from_secs(1))).unwrap();
    let c = Request::new().class(chat);
    play(&r, &c, 0, &[(1, 5 * MS), (1, 8 * MS)], 9 * MS, Status::COMPLETED); // good
    play(&r, &c, 0, &[(1, 15 * MS), (1, 16 * MS)], 17 * MS, Status::COMPLETED); // TTFT over
    play(&r, &c, 0, &[(1, 5 * MS), (1, 15 * MS)], 16 * MS, Status::COMPLETED); // TPOT over
    play(&r, &Request::new().class(batch), 0, &[(1, 500 * MS)], 900 * MS, Status::COMPLETED);
    let s = r.snapshot().unwrap();
    let names: Vec<&str> = s.classes().iter().map(|c| c.name().unwrap()).collect();
    assert_eq!(names, ["default", "chat", "batch"]);
    let v = s.class(chat);
    assert_eq!(v.count(Metric::TTFT), 3);
    assert_eq!(v.counter(Counter::SLO_MET), 1);
    assert_eq!(v.attainment(), Some(1.0 / 3.0));
    assert_eq!(v.quantile(Metric::TTFT, 1.0), 15 * MS);
    assert_eq!(v.sum(Metric::TTFT), 25 * MS);
    assert_eq!(v.sum_wide(Metric::TTFT), Ok(u128::from(25 * MS)));
    assert_eq!(s.class(Class::ALL).sum_wide(Metric::E2E), Ok(u128::from((9 + 17 + 16 + 900) * MS)));
    assert_eq!(s.class(Class(9)).sum_wide(Metric::TTFT), Err(Error::InvalidArgument));
    assert_eq!(v.status(Status::COMPLETED).count(Metric::TPOT), 3);
    assert_eq!(
        v.slo().unwrap(),
        Slo { ttft_ns: 10 * MS, tpot_ns: 4 * MS, e2e_ns: 0, stall_threshold_ns: 500 * MS, ..Slo::default() } // the registry default, resolved
    );
    assert_eq!(s.class(batch).attainment(), Some(1.0));
    assert_eq!(s.class(batch).mean(Metric::E2E), 9e8);
    assert_eq!(s.class(Class::DEFAULT).attainment(), None); // nothing ended there
    assert_eq!(s.attainment(), Some(0.5));
    assert_eq!(s.class(Class::ALL).counter(Counter::COMPLETED), 4);
    assert_eq!(s.class(Class(9)).name(), None);
    assert_eq!(s.class(Class(9)).slo(), Err(Error::InvalidArgument));
}

#[test]
fn stalls_phases_annotate_and_bands() {
    let r = Registry::with_config(
        &Config::new().max_inflight(8).stall_threshold(Duration::from_millis(20)).prompt_band_edges(&[100, 1000]),
    )
    .unwrap();
    let mut s = r.begin_at(T0).unwrap();
    s.mark_at(Phase::SCHEDULED, T0 + 3 * MS).unwrap();
    s.annotate(812, Some(true)).unwrap();
    s.token_at(1, T0 + 10 * MS).unwrap();
    assert_eq!(s.annotate(5, None), Err(Error::Range)); // after the first token
    s.token_at(1, T0 + 40 * MS).unwrap(); // a 30 ms gap: a stall
    s.token_at(1, T0 + 45 * MS).unwrap();
    s.mark_at(Phase::PREEMPTED, T0 + 46 * MS).unwrap();
    let info = s.stats().unwrap();
    assert_eq!(info.tokens, 3);
    assert_eq!(info.emissions, 3);
    assert_eq!(info.ttft_ns, 10 * MS);
    assert_eq!(info.t_begin_ns, T0);
    assert_eq!(info.t_last_ns, T0 + 45 * MS);
    assert_eq!(info.itl_max_ns, 30 * MS);
    assert_eq!(info.stalls, 1);
    assert_eq!(info.preemptions, 1);
    assert_eq!(info.class, Class::DEFAULT);
    assert_eq!(r.stalled_at(T0 + 50 * MS), Ok(0));
    assert_eq!(r.stalled_at(T0 + 70 * MS), Ok(1)); // 25 ms since the last token
    s.end_at(Status::COMPLETED, T0 + 50 * MS).unwrap();
    let mut s2 = r.begin_with_at(&Request::new().prompt_tokens(50).prefix_hit(false), T0).unwrap();
    s2.token_at(1, T0 + 20 * MS).unwrap();
    s2.end_at(Status::COMPLETED, T0 + 21 * MS).unwrap();
    let snap = r.snapshot().unwrap();
    assert_eq!(snap.counter(Counter::STALLS), 1);
    assert_eq!(snap.counter(Counter::STALLED_SEQS), 1);
    assert_eq!(snap.counter(Counter::PREEMPTIONS), 1);
    assert_eq!(snap.quantile(Metric::QUEUE, 1.0), 3 * MS);
    assert_eq!(snap.quantile(Metric::PREFILL, 1.0), 7 * MS);
    assert_eq!(snap.quantile(Metric::SEQ_ITL_MAX, 1.0), 30 * MS);
    assert_eq!(snap.bands(), vec![(0, 100), (100, 1000), (1000, u32::MAX)]);
    assert_eq!(snap.split_count(Split::PROMPT_BAND, 0), 1);
    assert_eq!(snap.split_count(Split::PROMPT_BAND, 1), 1);
    assert_eq!(snap.split_count(Split::PROMPT_BAND, 2), 0);
    assert_eq!(snap.split_count(Split::PREFIX_CACHE, 1), 1);
    assert_eq!(snap.split_quantile(Split::PREFIX_CACHE, 1, 1.0), 10 * MS);
    assert_eq!(snap.split_quantile(Split::PREFIX_CACHE, 0, 1.0), 20 * MS);
}

#[test]
fn step_emitted_records_a_batch() {
    let r = reg(8);
    let mut streams: Vec<Stream> = (0..3).map(|_| r.begin_at(T0).unwrap()).collect();
    let hs: Vec<Handle> = streams.iter().map(|s| s.handle()).collect();
    assert_eq!(r.step_emitted_at(&hs, None, T0 + 4 * MS), Ok(3));
    assert_eq!(r.step_emitted_at(&hs, Some(&[1, 2, 0]), T0 + 6 * MS), Ok(2)); // 0: not an emission
    assert_eq!(r.step_emitted_at(&hs, Some(&[1, 2]), T0 + 6 * MS), Err(Error::InvalidArgument));
    assert_eq!(r.step_emitted_at(&hs, None, 0), Err(Error::InvalidArgument));
    assert_eq!(r.step_emitted(&[], None), Ok(0));
    streams.pop().unwrap().end_at(Status::COMPLETED, T0 + 7 * MS).unwrap();
    assert_eq!(r.step_emitted_at(&hs, None, T0 + 9 * MS), Ok(2)); // the ended one is skipped
    for s in streams {
        s.end_at(Status::COMPLETED, T0 + 10 * MS).unwrap();
    }
    let snap = r.snapshot().unwrap();
    assert_eq!(snap.count(Metric::TTFT), 3);
    assert_eq!(snap.quantile(Metric::TTFT, 0.0), 4 * MS);
    assert_eq!(snap.quantile(Metric::TTFT, 1.0), 4 * MS);
    assert_eq!(snap.count(Metric::ITL), 4); // 2 at +6 ms, 2 at +9 ms
    assert_eq!(snap.sum(Metric::ITL), 2 * 2 * MS + 2 * 3 * MS);
    assert_eq!(snap.counter(Counter::TOKENS), 3 + 3 + 2);
    assert_eq!(snap.counter(Counter::STALE), 1);
}

#[test]
fn shared_stream_last_clone_cancels() {
    let r = reg(4);
    let s = r.begin_shared(&Request::new()).unwrap();
    let on_chunk = {
        let s = s.clone();
        move |n| s.token(n)
    };
    let on_disconnect = {
        let s = s.clone();
        move || s.end(Status::CANCELLED)
    };
    drop(s);
    assert_eq!(r.inflight(), 1);
    on_chunk(2).unwrap();
    on_disconnect().unwrap();
    assert_eq!(on_chunk(1), Err(Error::Stale)); // a late chunk
    drop(on_chunk);
    drop(on_disconnect);
    let snap = r.snapshot().unwrap();
    assert_eq!(snap.counter(Counter::CANCELLED), 1);
    assert_eq!(snap.counter(Counter::TOKENS), 2);
    assert_eq!(snap.counter(Counter::STALE), 1); // the late chunk only, no second end

    let a = r.begin_shared(&Request::new()).unwrap();
    let b = a.clone();
    a.token(1).unwrap();
    drop(a);
    assert!(!b.is_ended());
    assert_eq!(r.inflight(), 1);
    drop(b); // the last clone: cancelled
    assert_eq!(r.inflight(), 0);
    let snap = r.snapshot().unwrap();
    assert_eq!(snap.counter(Counter::CANCELLED), 2);
    assert_eq!(snap.counter(Counter::STALE), 1);
}

#[test]
fn concurrent_streams_from_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Registry>();
    assert_send_sync::<Snapshot>();
    assert_send_sync::<SharedStream>();
    assert_send_sync::<HttpServer>();
    fn assert_send<T: Send>() {}
    assert_send::<Stream>();
    let r = Registry::with_config(&Config::new().max_inflight(64).max_threads(8)).unwrap();
    let race = r.add_class("race", Slo::new()).unwrap();
    let shared = Arc::new(r.begin_shared(&Request::new().class(race)).unwrap());
    let refused = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let r = r.clone();
            let shared = shared.clone();
            let refused = refused.clone();
            std::thread::spawn(move || {
                for i in 0..250u64 {
                    let t0 = T0 + i * MS;
                    // A begin at capacity is refused (counted in DROPPED)
                    // while ended slots wait for reclamation: a thread
                    // preempted inside a hook holds it back, and the
                    // library never waits inside a hook. Retry, bounded.
                    let mut got = r.begin_at(t0);
                    for _ in 0..1_000_000 {
                        if !matches!(got, Err(Error::Full)) {
                            break;
                        }
                        // Relaxed: a count read after join().
                        refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        std::thread::yield_now();
                        got = r.begin_at(t0);
                    }
                    let mut s = got.unwrap();
                    s.token_at(1, t0 + (t + 1) * MS).unwrap();
                    s.token_at(2, t0 + (t + 2) * MS).unwrap();
                    s.end_at(Status::COMPLETED, t0 + (t + 3) * MS).unwrap();
                    // the shared stream races its end against these tokens
                    let _ = shared.token(1);
                }
            })
        })
        .collect();
    let ender = {
        let shared = shared.clone();
        std::thread::spawn(move || shared.end(Status::CANCELLED))
    };
    for t in threads {
        t.join().unwrap();
    }
    ender.join().unwrap().unwrap();
    let snap = r.snapshot().unwrap();
    let d = snap.class(Class::DEFAULT);
    assert_eq!(d.counter(Counter::BEGUN), 1000);
    assert_eq!(d.counter(Counter::COMPLETED), 1000);
    assert_eq!(d.count(Metric::TTFT), 1000);
    assert_eq!(d.quantile(Metric::TTFT, 0.0), MS);
    assert_eq!(d.quantile(Metric::TTFT, 1.0), 4 * MS);
    assert_eq!(d.sum(Metric::TTFT), 250 * (1 + 2 + 3 + 4) * MS);
    assert_eq!(d.sum(Metric::E2E), 250 * (3 + 4 + 5 + 6) * MS);
    assert_eq!(d.count(Metric::ITL), 1000);
    assert_eq!(d.counter(Counter::TOKENS), 3000);
    let x = snap.class(race);
    assert_eq!(x.counter(Counter::BEGUN), 1);
    assert_eq!(x.counter(Counter::CANCELLED), 1);
    // every racing token was either accepted or refused as stale
    assert_eq!(x.counter(Counter::TOKENS) + snap.counter(Counter::STALE), 1000);
    assert_eq!(snap.gauge(Gauge::INFLIGHT), 0);
    // Relaxed: every writer was joined above.
    assert_eq!(snap.counter(Counter::DROPPED), refused.load(std::sync::atomic::Ordering::Relaxed));
    drop(shared);
    assert_eq!(r.snapshot().unwrap().counter(Counter::STALE), snap.counter(Counter::STALE));
}

#[test]
fn formats_encodings_merge_delta() {
    let r = Registry::with_config(&Config::new().max_inflight(8).model("m-7b").label("region", "eu")).unwrap();
    play(&r, &Request::new(), 0, &[(1, 5 * MS), (1, 9 * MS)], 9 * MS, Status::COMPLETED);
    let older = r.snapshot().unwrap();
    play(&r, &Request::new(), 0, &[(1, 7 * MS)], 8 * MS, Status::COMPLETED);
    let s = r.snapshot().unwrap();
    assert_eq!(s.label("model").as_deref(), Some("m-7b"));
    assert_eq!(s.label("start_point").as_deref(), Some("server_arrival"));
    assert_eq!(s.label("nope"), None);
    let (a, b) = s.interval();
    assert!(a > 0 && b >= a);

    let text = s.format(Format::TEXT).unwrap();
    assert!(text.starts_with("libttft "), "{text}");
    let json = s.format(Format::JSON).unwrap();
    assert!(json.starts_with('{') && json.trim_end().ends_with('}'));
    let prom = s.format(Format::PROMETHEUS).unwrap();
    assert!(
        prom.contains("gen_ai_server_time_to_first_token_seconds_count{class=\"default\",region=\"eu\"} 2")
            || prom.contains("gen_ai_server_time_to_first_token_seconds_count{region=\"eu\",class=\"default\"} 2")
            || prom.lines().any(|l| l.starts_with("gen_ai_server_time_to_first_token_seconds_count")
                && l.contains("region=\"eu\"")
                && l.ends_with(" 2")),
        "{prom}"
    );
    let om = s.format(Format::OPENMETRICS).unwrap();
    assert!(om.ends_with("# EOF\n"));
    let pb = s.format_bytes(Format::PROMETHEUS_PROTOBUF).unwrap();
    assert!(pb.len() > 100);
    assert_eq!(s.format(Format::PROMETHEUS_PROTOBUF), Err(Error::InvalidArgument));
    assert_eq!(s.format(Format(99)), Err(Error::InvalidArgument));
    assert_eq!(s.format_bytes(Format::TEXT).unwrap(), text.as_bytes());

    let bytes = s.encode().unwrap();
    let back = Snapshot::decode(&bytes).unwrap();
    assert_eq!(back.count(Metric::TTFT), 2);
    assert_eq!(back.quantile(Metric::TTFT, 1.0), 7 * MS);
    assert_eq!(back.encode().unwrap(), bytes);
    let b64 = s.encode_base64().unwrap();
    assert!(!b64.contains('\n') && !b64.contains('\0'));
    assert_eq!(Snapshot::decode_base64(&b64).unwrap().sum(Metric::TTFT), 12 * MS);
    let mut cut = bytes.clone();
    cut.truncate(bytes.len() - 1);
    assert_eq!(Snapshot::decode(&cut).unwrap_err(), Error::Corrupt);

    let m = s.merge(&back).unwrap();
    assert_eq!(m.count(Metric::TTFT), 4);
    assert_eq!(m.counter(Counter::COMPLETED), 4);
    let d = s.delta(&older).unwrap();
    assert_eq!(d.count(Metric::TTFT), 1);
    assert_eq!(d.sum(Metric::TTFT), 7 * MS);
    assert_eq!(older.delta(&s).unwrap_err(), Error::InvalidArgument); // wrong order
}

#[test]
fn http_endpoint_serves_metrics() {
    let r = reg(4);
    play(&r, &Request::new(), 0, &[(1, 5 * MS)], 6 * MS, Status::COMPLETED);
    let srv = r.serve("127.0.0.1:0").unwrap();
    let port = srv.port();
    assert!(port > 0);
    let get = |path: &str| {
        let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        out
    };
    let m = get("/metrics");
    assert!(m.starts_with("HTTP/1.1 200"), "{m}");
    assert!(m.contains("gen_ai_server_time_to_first_token_seconds_count{class=\"default\"} 1"), "{m}");
    let j = get("/report.json");
    assert!(j.starts_with("HTTP/1.1 200") && j.contains("\"ttft\""));
    assert!(get("/nope").starts_with("HTTP/1.1 404"));
    assert_eq!(r.serve("not an address").unwrap_err(), Error::InvalidArgument);
    assert_eq!(r.serve(&format!("127.0.0.1:{port}")).unwrap_err(), Error::Io); // taken
    drop(r); // the server keeps the registry alive
    assert!(get("/metrics").contains(" 1\n"));
    srv.stop();
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn version_and_clock() {
    assert_eq!(version_number() / 10000, ABI_MAJOR);
    assert!(version_string().starts_with("1."));
    let r = reg(2);
    let a = now_ns();
    let b = r.now_ns();
    assert!(a > 0 && b >= a);
    assert!(r.memory() > 0);
    assert_eq!(r.thread_release(), Ok(()));
}
