use std::time::Duration;
use ttft::{Config, Format, Metric, Registry, Request, Slo, Status};

fn main() -> ttft::Result<()> {
    let reg = Registry::with_config(&Config::new().max_inflight(256).model("qwen2.5-7b"))?;
    let chat = reg.add_class("chat", Slo::new().ttft(Duration::from_millis(300)))?;

    let mut s = reg.begin_with(&Request::new().class(chat).prompt_tokens(812))?;
    s.token(1)?; // the first chunk is on the wire: TTFT
    s.token(3)?; // a 3-token speculative step: one inter-token gap
    s.end(Status::COMPLETED)?; // a Stream dropped unended counts as CANCELLED

    let snap = reg.snapshot()?;
    println!("TTFT p99 {} ns over {} streams", snap.quantile(Metric::TTFT, 0.99), snap.count(Metric::TTFT));
    assert_eq!(snap.class(chat).attainment(), Some(1.0));
    print!("{}", snap.format(Format::PROMETHEUS)?);
    Ok(())
}
