//! The #[repr(C)] mirrors of src/ffi.rs against the C header, and the
//! constants of src/lib.rs against tests/abi/enums.txt.
//!
//! `c_layout` compiles tests/abi/layout.c with the C compiler ($CC, else
//! `cc`) against include/ttft.h and runs it; every size, alignment and
//! field offset it prints must equal Rust's view of the mirror. A missing
//! compiler fails the test (it does not skip). tests/abi/enums.txt is kept
//! equal to the header by ctest `abi_symbols`, so comparing the crate's
//! constants with it compares them with the header.
use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;

use crate::ffi::*;
use crate::*;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn c_layout() -> BTreeMap<String, usize> {
    let root = repo();
    let out = std::env::temp_dir().join(format!("ttft-abi-layout-{}", std::process::id()));
    let _ = std::fs::create_dir_all(out.parent().unwrap());
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let st = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(root.join("include"))
        .arg(root.join("tests/abi/layout.c"))
        .arg("-o")
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}` (set CC): {e}"));
    assert!(st.success(), "{cc} failed to compile tests/abi/layout.c");
    let o = Command::new(&out).output().expect("run layout");
    assert!(o.status.success());
    let mut m = BTreeMap::new();
    for line in String::from_utf8(o.stdout).unwrap().lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (key, v) = w.split_at(w.len() - 1);
        m.insert(key.join(" "), v[0].parse().unwrap());
    }
    m
}

macro_rules! layout {
    ($got:ident, $t:ident { $($f:ident),* $(,)? }) => {{
        $got.push((format!("size {}", stringify!($t)), size_of::<$t>()));
        $got.push((format!("align {}", stringify!($t)), align_of::<$t>()));
        $(
            $got.push((format!("offset {} {}", stringify!($t), stringify!($f)), offset_of!($t, $f)));
        )*
    }};
}

#[test]
fn struct_layout_matches_the_header() {
    let c = c_layout();
    let mut got: Vec<(String, usize)> = Vec::new();
    layout!(got, ttft_label { name, value });
    layout!(
        got,
        ttft_config {
            struct_size,
            max_inflight,
            max_threads,
            max_classes,
            stall_threshold_ns,
            clock,
            start_point,
            token_point,
            model,
            metric_namespace,
            const_labels,
            n_const_labels,
            n_prompt_bands,
            prompt_band_edges,
            prom_buckets,
            prom_n_buckets,
            prom_summaries,
            native_histograms,
            native_schema,
            export_idle_classes,
            memory_limit,
            prefix_hit_min_tokens,
        }
    );
    layout!(got, ttft_slo { struct_size, ttft_ns, tpot_ns, e2e_ns, stall_threshold_ns });
    layout!(got, ttft_request { struct_size, class_id, prompt_tokens, prefix_hit });
    layout!(
        got,
        ttft_seq_info {
            struct_size,
            class_id,
            emissions,
            tokens,
            t_begin_ns,
            t_last_ns,
            ttft_ns,
            itl_p50_ns,
            itl_p95_ns,
            itl_max_ns,
            stalls,
            preemptions,
            last_stall_cause,
        }
    );
    got.push(("sizeof ttft_seq".into(), size_of::<Handle>()));
    for e in ["metric", "status", "phase", "counter", "format", "gauge", "split", "clock"] {
        got.push((format!("sizeof ttft_{e}"), size_of::<std::os::raw::c_int>()));
    }
    let mut bad = Vec::new();
    for (k, v) in &got {
        match c.get(k) {
            Some(cv) if cv == v => {}
            other => bad.push(format!("{k}: C {other:?}, Rust {v}")),
        }
    }
    // Every fact the C side prints is checked here (nothing left unmirrored).
    for k in c.keys() {
        if !got.iter().any(|(g, _)| g == k) {
            bad.push(format!("{k}: printed by layout.c, not mirrored in src/ffi.rs"));
        }
    }
    assert!(bad.is_empty(), "ABI layout differs from include/ttft.h:\n{}", bad.join("\n"));
    assert!(got.len() >= 58, "{} facts", got.len());
}

#[test]
fn constants_match_the_header() {
    let text = std::fs::read_to_string(repo().join("tests/abi/enums.txt")).expect("tests/abi/enums.txt");
    let header: BTreeMap<&str, i64> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let mut w = l.split_whitespace();
            (w.next().unwrap(), w.next().unwrap().parse().unwrap())
        })
        .collect();
    let ours: Vec<(&str, i64)> = vec![
        ("TTFT_METRIC_TTFT", Metric::TTFT.0.into()),
        ("TTFT_METRIC_TPOT", Metric::TPOT.0.into()),
        ("TTFT_METRIC_ITL", Metric::ITL.0.into()),
        ("TTFT_METRIC_E2E", Metric::E2E.0.into()),
        ("TTFT_METRIC_QUEUE", Metric::QUEUE.0.into()),
        ("TTFT_METRIC_PREFILL", Metric::PREFILL.0.into()),
        ("TTFT_METRIC_DECODE", Metric::DECODE.0.into()),
        ("TTFT_METRIC_OUTPUT_TOKENS", Metric::OUTPUT_TOKENS.0.into()),
        ("TTFT_METRIC_SEQ_ITL_P95", Metric::SEQ_ITL_P95.0.into()),
        ("TTFT_METRIC_SEQ_ITL_MAX", Metric::SEQ_ITL_MAX.0.into()),
        ("TTFT_METRIC_ABANDONED_WAIT", Metric::ABANDONED_WAIT.0.into()),
        ("TTFT_METRIC_ITL_PER_TOKEN", Metric::ITL_PER_TOKEN.0.into()),
        ("TTFT_COUNTER_BEGUN", Counter::BEGUN.0.into()),
        ("TTFT_COUNTER_COMPLETED", Counter::COMPLETED.0.into()),
        ("TTFT_COUNTER_CANCELLED", Counter::CANCELLED.0.into()),
        ("TTFT_COUNTER_ERRORS", Counter::ERRORS.0.into()),
        ("TTFT_COUNTER_DROPPED", Counter::DROPPED.0.into()),
        ("TTFT_COUNTER_TOKENS", Counter::TOKENS.0.into()),
        ("TTFT_COUNTER_STALLS", Counter::STALLS.0.into()),
        ("TTFT_COUNTER_STALLED_SEQS", Counter::STALLED_SEQS.0.into()),
        ("TTFT_COUNTER_ABANDONED", Counter::ABANDONED.0.into()),
        ("TTFT_COUNTER_SLO_MET", Counter::SLO_MET.0.into()),
        ("TTFT_COUNTER_CLOCK_CLAMPED", Counter::CLOCK_CLAMPED.0.into()),
        ("TTFT_COUNTER_PREEMPTIONS", Counter::PREEMPTIONS.0.into()),
        ("TTFT_COUNTER_NO_TPOT", Counter::NO_TPOT.0.into()),
        ("TTFT_COUNTER_STALE", Counter::STALE.0.into()),
        ("TTFT_COMPLETED", Status::COMPLETED.0.into()),
        ("TTFT_CANCELLED", Status::CANCELLED.0.into()),
        ("TTFT_ERROR", Status::ERROR.0.into()),
        ("TTFT_FORMAT_TEXT", Format::TEXT.0.into()),
        ("TTFT_FORMAT_JSON", Format::JSON.0.into()),
        ("TTFT_FORMAT_PROMETHEUS", Format::PROMETHEUS.0.into()),
        ("TTFT_FORMAT_OPENMETRICS", Format::OPENMETRICS.0.into()),
        ("TTFT_FORMAT_PROMETHEUS_PROTOBUF", Format::PROMETHEUS_PROTOBUF.0.into()),
        ("TTFT_PHASE_SCHEDULED", Phase::SCHEDULED.0.into()),
        ("TTFT_PHASE_PREEMPTED", Phase::PREEMPTED.0.into()),
        ("TTFT_GAUGE_INFLIGHT", Gauge::INFLIGHT.0.into()),
        ("TTFT_GAUGE_LIVE_STALLS", Gauge::LIVE_STALLS.0.into()),
        ("TTFT_GAUGE_MEMORY", Gauge::MEMORY.0.into()),
        ("TTFT_GAUGE_COARSE", Gauge::COARSE.0.into()),
        ("TTFT_SPLIT_PREFIX_CACHE", Split::PREFIX_CACHE.0.into()),
        ("TTFT_SPLIT_PROMPT_BAND", Split::PROMPT_BAND.0.into()),
        ("TTFT_CLOCK_MONOTONIC", Clock::MONOTONIC.0.into()),
        ("TTFT_CLOCK_TSC", Clock::TSC.0.into()),
        ("TTFT_EINVAL", Error::InvalidArgument.code().into()),
        ("TTFT_ESTALE", Error::Stale.code().into()),
        ("TTFT_EFULL", Error::Full.code().into()),
        ("TTFT_ENOMEM", Error::NoMemory.code().into()),
        ("TTFT_ERANGE", Error::Range.code().into()),
        ("TTFT_ECORRUPT", Error::Corrupt.code().into()),
        ("TTFT_EEXIST", Error::Exists.code().into()),
        ("TTFT_EIO", Error::Io.code().into()),
        ("TTFT_ENOTSUP", Error::NotSupported.code().into()),
    ];
    let bad: Vec<String> = ours
        .iter()
        .filter(|(k, v)| header.get(k) != Some(v))
        .map(|(k, v)| format!("{k}: header {:?}, Rust {v}", header.get(k)))
        .collect();
    assert!(bad.is_empty(), "constants differ from include/ttft.h:\n{}", bad.join("\n"));
    // Every error code the header lists is a named variant here.
    for (k, v) in &header {
        if k.starts_with("TTFT_E") && *k != "TTFT_E__LAST" && *v < 0 {
            assert!(!matches!(Error::from_code(*v as i32), Some(Error::Other(_))), "{k} ({v}) has no Error variant");
        }
    }
}
