//! OpenTelemetry push from Rust (1.3): a pusher started on a loopback
//! receiver written here (std::net::TcpListener, one answer per
//! connection: the pusher closes each one) sends POST /v1/metrics with
//! Content-Type application/x-protobuf; its counts say so; https:// is
//! refused with the library's reason.
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use ttft::*;

/// Accepts `n` connections; sends (request head, body) of each, answers 200.
fn receiver(n: usize) -> (u16, mpsc::Receiver<(String, Vec<u8>)>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for _ in 0..n {
            let (mut c, _) = l.accept().unwrap();
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let head_end = loop {
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
                let k = c.read(&mut chunk).unwrap();
                assert!(k > 0, "connection closed before the head");
                buf.extend_from_slice(&chunk[..k]);
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length").then(|| v.trim().parse().unwrap())
                })
                .expect("Content-Length");
            while buf.len() < head_end + len {
                let k = c.read(&mut chunk).unwrap();
                assert!(k > 0, "connection closed before the body");
                buf.extend_from_slice(&chunk[..k]);
            }
            c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").unwrap();
            tx.send((head, buf[head_end..head_end + len].to_vec())).unwrap();
        }
    });
    (port, rx)
}

#[test]
fn pushes_protobuf_to_v1_metrics() {
    let (port, rx) = receiver(2);
    let reg = Registry::new().unwrap();
    let mut s = reg.begin().unwrap();
    s.token(2).unwrap();
    s.end(Status::COMPLETED).unwrap();
    let cfg = OtlpConfig::new()
        .endpoint(&format!("http://127.0.0.1:{port}"))
        .service_name("rust-test")
        .headers("x-tenant=t1")
        .interval(Duration::from_secs(3600))
        .timeout(Duration::from_secs(10))
        .temporality(Temporality::DELTA);
    let p = reg.otlp_start(&cfg).unwrap();
    p.flush().unwrap();
    let (head, body) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(head.starts_with("POST /v1/metrics HTTP/1.1\r\n"), "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(lower.contains("\r\ncontent-type: application/x-protobuf\r\n"), "{head}");
    assert!(lower.contains("\r\nx-tenant: t1\r\n"), "{head}");
    assert!(!body.is_empty());
    // the body names the service and the GenAI TTFT histogram
    let has = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
    assert!(has(b"rust-test") && has(b"gen_ai.server.time_to_first_token"));
    let st = p.stats().unwrap();
    assert_eq!((st.pushes, st.accepted, st.failed, st.dropped, st.retries), (1, 1, 0, 0, 0));
    assert_eq!(st.bytes_sent, body.len() as u64);
    assert_eq!(st.last_status, 200);
    assert_eq!(st.last_error, "");
    p.stop(); // the last push
    let (head2, _) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(head2.starts_with("POST /v1/metrics "));
}

#[test]
fn https_is_refused() {
    let reg = Registry::new().unwrap();
    let err = reg.otlp_start(&OtlpConfig::new().endpoint("https://collector.example:4318")).unwrap_err();
    assert_eq!(err.code(), -1);
    assert!(err.to_string().contains("https is not supported"), "{err}");
    let err = reg.otlp_start(&OtlpConfig::new().endpoint("http://a\0b")).unwrap_err();
    assert_eq!(err.code(), -1);
}
