//! Issue 27 item 2 in Rust: ids as clients send them. No request id or
//! trace id — any code point, a NUL, malformed UTF-8 bytes (through
//! `request_id_bytes` / `trace_id_bytes`), an empty or a 1 MB id — makes a
//! begin fail; the request is measured, a request id's bad bytes are shown
//! as `?`, a bad trace id is ignored and counted in TRACE_ID_INVALID.
use ttft::*;

const T0: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
const MB: usize = 1 << 20;
const K: u32 = 64; // TTFT_MAX_SLOWEST_K
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// One stream with a TTFT of (i + 1) ms, ended.
fn play(r: &Registry, i: u64, req: &Request) {
    let mut s = r.begin_with_at(req, T0 + i * MS).expect("a begin never fails for its ids");
    s.token_at(1, T0 + i * MS + (i + 1) * MS).unwrap();
    s.end_at(Status::COMPLETED, T0 + i * MS + (i + 2) * MS).unwrap();
}

/// The request ids of the TTFT list, in the order they were played.
fn listed(snap: &Snapshot) -> Vec<String> {
    snap.slowest(SlowestBy::TTFT).into_iter().rev().map(|x| x.request_id).collect()
}

#[test]
fn request_ids_as_clients_send_them() {
    let r = Registry::with_config(&Config::new().slowest_k(K)).unwrap();
    let ids: Vec<(Request, String)> = vec![
        (Request::new().request_id("a\0b"), "a?b".into()),
        (Request::new().request_id("\0"), "?".into()),
        (
            Request::new().request_id("caf\u{e9}\u{1F600}\u{FFFF}\u{10FFFF}"),
            "caf\u{e9}\u{1F600}\u{FFFF}\u{10FFFF}".into(),
        ),
        (Request::new().request_id("\x1b[31m\x7f\u{85}"), "?[31m?\u{85}".into()),
        (Request::new().request_id_bytes(b"a\xffb\xc3(\xed\xa0\x80"), "a?b?(???".into()),
        (Request::new().request_id_bytes(b"r\xc3\xa9\0"), "r\u{e9}?".into()),
        (Request::new().request_id_bytes(b"\xf0\x9f\x98"), "?".into()), // a cut character
        (Request::new().request_id(""), "".into()),
        (Request::new().request_id_bytes(b""), "".into()),
        (Request::new().request_id(&"x".repeat(MB)), "x".repeat(63)),
        (Request::new().request_id(&"\0".repeat(MB)), "?".repeat(63)),
        (Request::new().request_id(&"\u{1F600}".repeat(MB)), "\u{1F600}".repeat(15)),
        (Request::new().request_id_bytes(&vec![0xff; MB]), "?".repeat(63)),
    ];
    for (i, (req, _)) in ids.iter().enumerate() {
        play(&r, i as u64, req);
    }
    let snap = r.snapshot().unwrap();
    assert_eq!(snap.count(Metric::TTFT), ids.len() as u64); // every one measured
    assert_eq!(snap.counter(Counter::TRACE_ID_INVALID), 0);
    let want: Vec<String> = ids.into_iter().map(|(_, w)| w).collect();
    assert_eq!(listed(&snap), want);
}

#[test]
fn bad_trace_ids_are_ignored_and_counted() {
    let r = Registry::with_config(&Config::new().slowest_k(K)).unwrap();
    let nul_end = format!("{TRACE}\0");
    let nul_mid = format!("{}\0{}", &TRACE[..16], &TRACE[17..]);
    let bad: Vec<Request> = vec![
        Request::new().trace_id(&nul_end), // C would end it at the NUL: valid
        Request::new().trace_id(&format!("{TRACE}\0junk")),
        Request::new().trace_id(&nul_mid),
        Request::new().trace_id("\0"),
        Request::new().trace_id(""),
        Request::new().trace_id(&TRACE.to_uppercase()),
        Request::new().trace_id(&format!("\u{ff14}{}", &TRACE[1..])),
        Request::new().trace_id(&TRACE.repeat(MB / 32)),
        Request::new().trace_id_bytes(&[0xff; 32]),
        Request::new().trace_id_bytes(b""),
        Request::new().trace_id_bytes(&vec![b'0'; MB]),
    ];
    for (i, req) in bad.iter().enumerate() {
        play(&r, i as u64, &req.clone().request_id(&format!("t{i}")));
    }
    play(&r, 100, &Request::new().request_id("good").trace_id(TRACE));
    play(&r, 101, &Request::new().request_id("good-bytes").trace_id_bytes(TRACE.as_bytes()));
    let snap = r.snapshot().unwrap();
    assert_eq!(snap.count(Metric::TTFT), bad.len() as u64 + 2);
    assert_eq!(snap.counter(Counter::TRACE_ID_INVALID), bad.len() as u64);
    let got: Vec<(String, String)> =
        snap.slowest(SlowestBy::TTFT).into_iter().rev().map(|x| (x.request_id, x.trace_id)).collect();
    let mut want: Vec<(String, String)> = (0..bad.len()).map(|i| (format!("t{i}"), String::new())).collect();
    want.push(("good".into(), TRACE.into()));
    want.push(("good-bytes".into(), TRACE.into()));
    assert_eq!(got, want);
}

/// Every code point (Rust strings hold no surrogates), 15 to an id (at most
/// 60 bytes: nothing is cut), K ids per snapshot, each batch slower than
/// the ones before it.
#[test]
fn every_code_point() {
    let r = Registry::with_config(&Config::new().slowest_k(K).max_inflight(256)).unwrap();
    let cps: Vec<char> = (0..=0x10FFFFu32).filter_map(char::from_u32).collect();
    let mut wants: Vec<String> = Vec::new();
    let mut n = 0u64;
    for chunk in cps.chunks(15) {
        let id: String = chunk.iter().collect();
        let want: String = chunk.iter().map(|&c| if (c as u32) < 0x20 || c as u32 == 0x7f { '?' } else { c }).collect();
        let mut s = r.begin_with_at(&Request::new().request_id(&id), T0).unwrap();
        s.token_at(1, T0 + (n + 1) * 1000).unwrap();
        s.end_at(Status::COMPLETED, T0 + (n + 1) * 1000).unwrap();
        n += 1;
        wants.push(want);
        if wants.len() == K as usize {
            assert_eq!(listed(&r.snapshot().unwrap()), wants);
            wants.clear();
        }
    }
    let snap = r.snapshot().unwrap();
    let got = listed(&snap);
    assert_eq!(got[got.len() - wants.len()..], wants[..]);
    assert_eq!(snap.count(Metric::TTFT), n);
    assert_eq!(snap.counter(Counter::DROPPED), 0);
}
