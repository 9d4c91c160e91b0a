//! The cost per token recorded from Rust, for bench/bindings.sh (which runs
//! the same loop in C, Python and Go): 64 streams round-robin, one
//! `Stream::token_at` per token with an explicit, increasing timestamp;
//! then one `Registry::step_emitted_at` per decode step of the 64 streams;
//! then one `Registry::engine_step_at` (1.2) per decode step. Prints
//! `token NS`, `step64 NS` (ns per token) and `engine NS` (ns per
//! engine_step call), medians of the runs.
//!
//!   cargo run --release --example token_cost -- [tokens per run] [runs]
use std::time::Instant;
use ttft::{Config, Handle, Registry, Status, StepInfo, Stream};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() -> ttft::Result<()> {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse().expect("a number")).collect();
    let n = args.first().copied().unwrap_or(2_000_000);
    let runs = args.get(1).copied().unwrap_or(7);
    let reg = Registry::with_config(&Config::new().max_inflight(128))?;
    let t0 = ttft::now_ns();
    let mut token = Vec::new();
    let mut step = Vec::new();
    let mut engine = Vec::new();
    let info = StepInfo::decode(64);
    for _ in 0..runs {
        let mut streams: Vec<Stream> = (0..64).map(|_| reg.begin_at(t0)).collect::<ttft::Result<_>>()?;
        let mut t = t0;
        let start = Instant::now();
        for i in 0..n {
            if i % 64 == 0 {
                t += 1000;
            }
            streams[(i % 64) as usize].token_at(1, t)?;
        }
        token.push(start.elapsed().as_nanos() as f64 / n as f64);
        let handles: Vec<Handle> = streams.iter().map(|s| s.handle()).collect();
        let start = Instant::now();
        for _ in 0..n / 64 {
            t += 1000;
            reg.step_emitted_at(&handles, None, t)?;
        }
        step.push(start.elapsed().as_nanos() as f64 / (n / 64 * 64) as f64);
        let start = Instant::now();
        for _ in 0..n / 64 {
            t += 1000;
            reg.engine_step_at(Some(&info), t, t + 500)?;
        }
        engine.push(start.elapsed().as_nanos() as f64 / (n / 64) as f64);
        for s in streams {
            s.end_at(Status::COMPLETED, t + 1000)?;
        }
    }
    println!("token {:.2}", median(token));
    println!("step64 {:.2}", median(step));
    println!("engine {:.2}", median(engine));
    Ok(())
}
