//! A small inference server's instrumentation, end to end: classes with
//! SLO budgets, a request handler that owns its stream (and cancels it on
//! an early return), a continuous-batching engine loop that reports each
//! iteration (engine_step: stall causes, prefill's cost on decode) and
//! records its tokens in one call, a callback-style stream shared by two callbacks, worker
//! threads, the /metrics endpoint scraped once, and a report.
//!
//!   TTFT_LIB_DIR=build cargo run --example server
use std::io::{Read, Write};
use std::time::Duration;

use ttft::{Config, Format, Handle, Metric, Phase, Registry, Request, Slo, StallCause, Status, StepInfo, Stream};

fn handle_request(reg: &Registry, req: &Request, fail: bool) -> ttft::Result<()> {
    let mut s = reg.begin_with(req)?; // the clock starts at arrival
    s.mark(Phase::SCHEDULED)?; // admitted: queue time ends
    s.annotate_cached(req.prompt_tokens.max(1), 128)?; // 128 prompt tokens came from the prefix cache
    s.token(1)?; // the first chunk is on the wire: TTFT
    if fail {
        return Err(ttft::Error::Io); // the client vanished: `s` is dropped, CANCELLED
    }
    s.token(3)?; // a 3-token speculative step
    s.end(Status::COMPLETED)
}

fn main() -> ttft::Result<()> {
    let reg = Registry::with_config(
        &Config::new()
            .max_inflight(256)
            .max_threads(8)
            .model("qwen2.5-7b")
            .start_point("accept")
            .token_point("sse_flush")
            .label("region", "eu-west")
            .stall_threshold(Duration::from_millis(250))
            .class("chat", Slo::new().ttft(Duration::from_millis(300)).tpot(Duration::from_millis(40)))
            .class("batch", Slo::new().e2e(Duration::from_secs(60))),
    )?;
    let chat = reg.find_class("chat")?;
    let batch = reg.find_class("batch")?;

    // Handlers on worker threads; every fifth client goes away early.
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let reg = reg.clone();
            std::thread::spawn(move || {
                for i in 0..50 {
                    let req = Request::new().class(chat).prompt_tokens(200 + i * 10);
                    let _ = handle_request(&reg, &req, (w + i) % 5 == 0);
                }
            })
        })
        .collect();

    // A continuous-batching engine of 16 sequences: each iteration reports
    // itself when it ends (engine_step, BEFORE its tokens are recorded),
    // then one call records the token of every sequence. The first
    // iteration carries the 16 prompts (prefill).
    let streams: Vec<Stream> =
        (0..16).map(|_| reg.begin_with(&Request::new().class(batch))).collect::<ttft::Result<_>>()?;
    let handles: Vec<Handle> = streams.iter().map(|s| s.handle()).collect();
    for i in 0..32 {
        let t_start = reg.now_ns();
        // ... the model's forward pass runs here ...
        let info = StepInfo::decode(16).prefill_tokens(if i == 0 { 16 * 512 } else { 0 });
        reg.engine_step(Some(&info), t_start)?;
        assert_eq!(reg.step_emitted(&handles, None)?, handles.len());
    }
    for s in streams {
        s.end(Status::COMPLETED)?;
    }

    // A callback-style server: both callbacks keep a clone of the stream.
    let s = reg.begin_shared(&Request::new().class(chat))?;
    let on_chunk = {
        let s = s.clone();
        move |n| s.token(n)
    };
    let on_disconnect = {
        let s = s.clone();
        move || s.end(Status::CANCELLED)
    };
    drop(s);
    on_chunk(1)?;
    on_disconnect()?;
    assert_eq!(on_chunk(1), Err(ttft::Error::Stale)); // a late chunk: nothing recorded

    for w in workers {
        w.join().expect("worker");
    }

    // Scrape /metrics once, as Prometheus would.
    let srv = reg.serve("127.0.0.1:0")?;
    let mut c = std::net::TcpStream::connect(("127.0.0.1", srv.port())).map_err(|_| ttft::Error::Io)?;
    write!(c, "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").map_err(|_| ttft::Error::Io)?;
    let mut body = String::new();
    c.read_to_string(&mut body).map_err(|_| ttft::Error::Io)?;
    let series = body.lines().filter(|l| !l.starts_with('#')).count();
    println!("scraped :{}/metrics: {} bytes, {} series", srv.port(), body.len(), series);
    srv.stop();

    let snap = reg.snapshot()?;
    print!("{}", snap.format(Format::TEXT)?);
    let completed = snap.class(chat).status(Status::COMPLETED);
    println!(
        "chat: TTFT p99 {} ns over {} streams ({} completed); attainment {:.3}",
        snap.class(chat).quantile(Metric::TTFT, 0.99),
        snap.class(chat).count(Metric::TTFT),
        completed.count(Metric::TTFT),
        snap.class(chat).attainment().unwrap_or(f64::NAN)
    );
    let causes: Vec<String> =
        snap.stall_causes().iter().map(|(c, n, _)| format!("{}={}", c.name().unwrap_or("?"), n)).collect();
    println!(
        "engine: {} steps ({} with prefill), p99 {} ns without prefill; stalls by cause: {}; prefill stalled {} ns",
        snap.engine_step_count(false) + snap.engine_step_count(true),
        snap.engine_step_count(true),
        snap.engine_step_quantile(false, 0.99),
        causes.join(" "),
        snap.stalled_ns_by_cause(StallCause::PREFILL)
    );
    Ok(())
}
