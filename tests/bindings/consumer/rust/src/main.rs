// A program in a crate of its own that depends on bindings/rust by path,
// as a user's server does (tests/bindings/consumers.sh builds and runs it).
use ttft::{Metric, Registry, Status};

fn main() -> ttft::Result<()> {
    let reg = Registry::new()?;
    let t0 = ttft::now_ns() - 1_000_000_000; // a second ago
    let mut s = reg.begin_at(t0)?;
    s.token_at(1, t0 + 250_000_000)?; // TTFT 250 ms
    s.token_at(3, t0 + 300_000_000)?;
    s.end_at(Status::COMPLETED, t0 + 310_000_000)?;
    let snap = reg.snapshot()?;
    let p50 = snap.quantile(Metric::TTFT, 0.5);
    let close = p50.abs_diff(250_000_000) * 200 <= 250_000_000; // within 0.5 %
    println!(
        "rust consumer: libttft {}, {} stream, TTFT p50 within 0.5% of 250 ms: {}",
        ttft::version_string(),
        snap.count(Metric::TTFT),
        if close { "yes" } else { "no" }
    );
    Ok(())
}
