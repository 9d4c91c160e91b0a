//! Many processes, one truth (1.3): two child processes (this test binary
//! run again, one test selected by an environment variable) record into
//! one shared directory and exit; the parent's Gather is their exact sum.
use std::process::Command;

use ttft::*;

const T0: u64 = 1_000_000_000; // 1 s on the monotonic clock
const MS: u64 = 1_000_000;
const CHILD_ENV: &str = "TTFT_RUST_GATHER_CHILD"; // "<dir>\t<i>"

/// Child i: 2 + i completed streams of 3 tokens (TTFT 5 ms) and one
/// cancelled stream, published when the registry is dropped.
fn record(dir: &str, i: u64) {
    let r = Registry::with_config(
        &Config::new().max_inflight(16).max_classes(2).shared_dir(dir).process_name(&format!("rs-{i}")),
    )
    .unwrap();
    let mut t = T0;
    for _ in 0..2 + i {
        let mut s = r.begin_at(t).unwrap();
        s.token_at(3, t + 5 * MS).unwrap();
        s.end_at(Status::COMPLETED, t + 9 * MS).unwrap();
        t += 1000 * MS;
    }
    r.begin_at(t).unwrap().end_at(Status::CANCELLED, t + MS).unwrap();
}

/// Not a test of its own: the body of a child process (does nothing
/// unless the parent set CHILD_ENV).
#[test]
fn child_process_body() {
    if let Ok(v) = std::env::var(CHILD_ENV) {
        let (dir, i) = v.split_once('\t').unwrap();
        record(dir, i.parse().unwrap());
    }
}

fn private_dir(tag: &str) -> String {
    let d = std::env::temp_dir().join(format!("ttft-rs-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir(&d).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    d.to_str().unwrap().to_owned()
}

#[test]
fn two_child_processes_gather_to_their_exact_sum() {
    let dir = private_dir("sum");
    let exe = std::env::current_exe().unwrap();
    let kids: Vec<_> = (0..2u64)
        .map(|i| {
            Command::new(&exe)
                .args(["child_process_body", "--exact", "--test-threads=1", "--quiet"])
                .env(CHILD_ENV, format!("{dir}\t{i}"))
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut k in kids {
        assert!(k.wait().unwrap().success());
    }
    let g = Gather::open(&dir, false).unwrap();
    let s = g.take().unwrap();
    // child 0: 2 + 1 begun, child 1: 3 + 1 begun
    assert_eq!(s.counter(Counter::BEGUN), 7);
    assert_eq!(s.counter(Counter::COMPLETED), 5);
    assert_eq!(s.counter(Counter::CANCELLED), 2);
    assert_eq!(s.counter(Counter::TOKENS), 15);
    assert_eq!(s.counter(Counter::PROCESSES_EXITED), 2);
    assert_eq!(s.gauge(Gauge::PROCESSES), 0);
    assert_eq!(s.count(Metric::TTFT), 5);
    assert_eq!(s.quantile(Metric::TTFT, 1.0), 5 * MS);

    // a live process (this one), published by hand, kept apart by process
    let live = Registry::with_config(
        &Config::new().max_inflight(4).max_classes(2).shared_dir(&dir).process_name("rs-live").publish_interval_ms(0),
    )
    .unwrap();
    live.begin_at(T0).unwrap().end_at(Status::CANCELLED, T0 + MS).unwrap();
    live.publish().unwrap();
    let apart = Gather::open(&dir, true).unwrap();
    let s = apart.take().unwrap();
    assert_eq!(s.counter(Counter::BEGUN), 8);
    assert_eq!(s.gauge(Gauge::PROCESSES), 1);
    assert!(s.format(Format::PROMETHEUS).unwrap().contains("process=\"rs-live\""));
    apart.close();
    drop(live);
    assert_eq!(g.take().unwrap().counter(Counter::BEGUN), 8); // the archive keeps it
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn refusals_say_why() {
    let dir = private_dir("refuse");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o770)).unwrap();
    match Gather::open(&dir, false) {
        Err(Error::Gather { errno, reason }) => {
            assert_eq!(errno, 13); // EACCES
            assert!(reason.contains("group- or world-writable"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    match Config::new().shared_dir(&dir).check() {
        Err(Error::InvalidConfig(why)) => assert!(why.contains("group- or world-writable"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(Registry::new().unwrap().publish(), Err(Error::InvalidArgument));
    std::fs::remove_dir_all(&dir).unwrap();
    match Gather::open(&dir, false) {
        Err(Error::Gather { errno, .. }) => assert_eq!(errno, 2), // ENOENT
        other => panic!("{other:?}"),
    }
}
