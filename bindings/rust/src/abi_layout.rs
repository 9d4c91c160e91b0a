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
            slowest_k,
            shared_dir,
            process_name,
            publish_interval_ms,
        }
    );
    layout!(got, ttft_slo { struct_size, ttft_ns, tpot_ns, e2e_ns, stall_threshold_ns, ttft_ns_per_prompt_token, token_deadline_ns, fluid_min });
    layout!(got, ttft_request { struct_size, class_id, prompt_tokens, prefix_hit, request_id, trace_id, traceparent, ttft_slo_ns, tpot_slo_ns });
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
            fluidity,
            deadlines,
            deadlines_missed,
            ttft_slo_ns,
            tpot_slo_ns,
        }
    );
    layout!(got, ttft_step_info { struct_size, prefill_tokens, decode_seqs, preempted_seqs, kind });
    layout!(
        got,
        ttft_slow_request {
            struct_size,
            value_ns,
            ttft_ns,
            max_gap_ns,
            t_begin_ns,
            t_end_ns,
            t_end_unix_ns,
            tokens,
            class_id,
            status,
            cause,
            request_id,
            trace_id,
            fluidity,
            deadlines,
            deadlines_missed,
            token_deadline_ns,
            ttft_slo_ns,
            tpot_slo_ns,
        }
    );
    layout!(
        got,
        ttft_otlp_config {
            struct_size,
            endpoint,
            metrics_endpoint,
            headers,
            service_name,
            resource_attributes,
            interval_ms,
            timeout_ms,
            temporality,
        }
    );
    layout!(
        got,
        ttft_otlp_info { struct_size, pushes, accepted, failed, dropped, retries, bytes_sent, last_status, last_error }
    );
    got.push(("sizeof ttft_seq".into(), size_of::<Handle>()));
    for e in [
        "metric",
        "status",
        "phase",
        "counter",
        "format",
        "gauge",
        "split",
        "clock",
        "stall_cause",
        "prefix_band",
        "slowest_by",
    ] {
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
    assert!(got.len() >= 67, "{} facts", got.len());
}

#[test]
fn step_info_init_fills_the_mirror() {
    let mut c = ttft_step_info { struct_size: 0, prefill_tokens: 7, decode_seqs: 7, preempted_seqs: 7, kind: 7 };
    // SAFETY: a complete mirror of the header's struct (checked above).
    unsafe { ttft_step_info_init(&mut c) };
    assert_eq!(c.struct_size, size_of::<ttft_step_info>());
    assert_eq!((c.prefill_tokens, c.decode_seqs, c.preempted_seqs, c.kind), (0, 0, 0, 0));
    // What the safe type sends is the same, with the fields set.
    let s = StepInfo::new().prefill_tokens(1).decode_seqs(2).preempted_seqs(3).kind(4).to_c();
    assert_eq!(s.struct_size, size_of::<ttft_step_info>());
    assert_eq!((s.prefill_tokens, s.decode_seqs, s.preempted_seqs, s.kind), (1, 2, 3, 4));
}

/// TTFT_RESERVED_LABELS as written in include/ttft.h (its string literals).
fn header_reserved_labels() -> Vec<String> {
    let h = std::fs::read_to_string(repo().join("include/ttft.h")).expect("include/ttft.h");
    let start = h.find("#define TTFT_RESERVED_LABELS").expect("TTFT_RESERVED_LABELS in ttft.h");
    let mut body = String::new();
    for line in h[start..].lines() {
        let cont = line.trim_end().ends_with('\\');
        body.push_str(line.trim_end().trim_end_matches('\\'));
        if !cont {
            break;
        }
    }
    body.split('"').skip(1).step_by(2).map(str::to_owned).collect()
}

#[test]
fn reserved_labels_match_the_header() {
    let h = header_reserved_labels();
    assert!(h.len() >= 14, "{h:?}");
    assert_eq!(RESERVED_LABELS.iter().map(|s| s.to_string()).collect::<Vec<_>>(), h);
    // and the library refuses each of them, naming it
    for name in &h {
        match Config::new().label(name, "x").check() {
            Err(Error::InvalidConfig(why)) => assert!(why.contains(&format!("\"{name}\" is reserved")), "{why}"),
            other => panic!("{name}: {other:?}"),
        }
    }
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
        ("TTFT_COUNTER_SLO_JUDGED", Counter::SLO_JUDGED.0.into()),
        ("TTFT_COUNTER_TRACE_ID_INVALID", Counter::TRACE_ID_INVALID.0.into()),
        ("TTFT_COUNTER_BARRIER_FALLBACKS", Counter::BARRIER_FALLBACKS.0.into()),
        ("TTFT_COUNTER_CLOCK_REFUSED", Counter::CLOCK_REFUSED.0.into()),
        ("TTFT_COUNTER_PUBLISH_FAILED", Counter::PUBLISH_FAILED.0.into()),
        ("TTFT_COUNTER_SEGMENTS_SKIPPED", Counter::SEGMENTS_SKIPPED.0.into()),
        ("TTFT_COUNTER_PROCESSES_EXITED", Counter::PROCESSES_EXITED.0.into()),
        ("TTFT_COUNTER_TOKEN_DEADLINES", Counter::TOKEN_DEADLINES.0.into()),
        ("TTFT_COUNTER_TOKEN_DEADLINES_MISSED", Counter::TOKEN_DEADLINES_MISSED.0.into()),
        ("TTFT_COUNTER_FLUID", Counter::FLUID.0.into()),
        ("TTFT_COUNTER_FLUID_JUDGED", Counter::FLUID_JUDGED.0.into()),
        ("TTFT_COMPLETED", Status::COMPLETED.0.into()),
        ("TTFT_CANCELLED", Status::CANCELLED.0.into()),
        ("TTFT_ERROR", Status::ERROR.0.into()),
        ("TTFT_FORMAT_TEXT", Format::TEXT.0.into()),
        ("TTFT_FORMAT_JSON", Format::JSON.0.into()),
        ("TTFT_FORMAT_PROMETHEUS", Format::PROMETHEUS.0.into()),
        ("TTFT_FORMAT_OPENMETRICS", Format::OPENMETRICS.0.into()),
        ("TTFT_FORMAT_PROMETHEUS_PROTOBUF", Format::PROMETHEUS_PROTOBUF.0.into()),
        ("TTFT_FORMAT_OTLP_PROTOBUF", Format::OTLP_PROTOBUF.0.into()),
        ("TTFT_PHASE_SCHEDULED", Phase::SCHEDULED.0.into()),
        ("TTFT_PHASE_PREEMPTED", Phase::PREEMPTED.0.into()),
        ("TTFT_PHASE_RESUMED", Phase::RESUMED.0.into()),
        ("TTFT_SPLIT_PREFILL_BY_PREFIX", Split::PREFILL_BY_PREFIX.0.into()),
        ("TTFT_PREFIX_MISS", PrefixBand::MISS.0.into()),
        ("TTFT_PREFIX_HIT", PrefixBand::HIT.0.into()),
        ("TTFT_PREFIX_PARTIAL", PrefixBand::PARTIAL.0.into()),
        ("TTFT_STALL_UNKNOWN", StallCause::UNKNOWN.0.into()),
        ("TTFT_STALL_PREFILL", StallCause::PREFILL.0.into()),
        ("TTFT_STALL_PREEMPTED", StallCause::PREEMPTED.0.into()),
        ("TTFT_STALL_NOT_SCHEDULED", StallCause::NOT_SCHEDULED.0.into()),
        ("TTFT_STALL_ENGINE_IDLE", StallCause::ENGINE_IDLE.0.into()),
        ("TTFT_STALL_SLOW_STEP", StallCause::SLOW_STEP.0.into()),
        ("TTFT_SLOWEST_TTFT", SlowestBy::TTFT.0.into()),
        ("TTFT_SLOWEST_GAP", SlowestBy::GAP.0.into()),
        ("TTFT_GAUGE_INFLIGHT", Gauge::INFLIGHT.0.into()),
        ("TTFT_GAUGE_LIVE_STALLS", Gauge::LIVE_STALLS.0.into()),
        ("TTFT_GAUGE_MEMORY", Gauge::MEMORY.0.into()),
        ("TTFT_GAUGE_COARSE", Gauge::COARSE.0.into()),
        ("TTFT_GAUGE_PROCESSES", Gauge::PROCESSES.0.into()),
        ("TTFT_SPLIT_PREFIX_CACHE", Split::PREFIX_CACHE.0.into()),
        ("TTFT_SPLIT_PROMPT_BAND", Split::PROMPT_BAND.0.into()),
        ("TTFT_CLOCK_MONOTONIC", Clock::MONOTONIC.0.into()),
        ("TTFT_CLOCK_TSC", Clock::TSC.0.into()),
        ("TTFT_CLOCK_FASTEST", Clock::FASTEST.0.into()),
        ("TTFT_OTLP_CUMULATIVE", Temporality::CUMULATIVE.0.into()),
        ("TTFT_OTLP_DELTA", Temporality::DELTA.0.into()),
        ("TTFT_OTLP_LOWMEMORY", Temporality::LOWMEMORY.0.into()),
        ("TTFT_EINVAL", Error::InvalidArgument.code().into()),
        ("TTFT_ESTALE", Error::Stale.code().into()),
        ("TTFT_EFULL", Error::Full.code().into()),
        ("TTFT_ENOMEM", Error::NoMemory.code().into()),
        ("TTFT_ERANGE", Error::Range.code().into()),
        ("TTFT_ECORRUPT", Error::Corrupt.code().into()),
        ("TTFT_EEXIST", Error::Exists.code().into()),
        ("TTFT_EIO", Error::Io.code().into()),
        ("TTFT_ENOTSUP", Error::NotSupported.code().into()),
        ("TTFT_ECLOCK", Error::Clock.code().into()),
    ];
    let bad: Vec<String> = ours
        .iter()
        .filter(|(k, v)| header.get(k) != Some(v))
        .map(|(k, v)| format!("{k}: header {:?}, Rust {v}", header.get(k)))
        .collect();
    assert!(bad.is_empty(), "constants differ from include/ttft.h:\n{}", bad.join("\n"));
    // Every value of the enums the crate mirrors is named here: a constant
    // the header appends (a counter, a phase, a cause, ...) must be added
    // to the crate, which this test then names.
    let mirrored = [
        "TTFT_METRIC_",
        "TTFT_COUNTER_",
        "TTFT_PHASE_",
        "TTFT_FORMAT_",
        "TTFT_GAUGE_",
        "TTFT_SPLIT_",
        "TTFT_CLOCK_",
        "TTFT_PREFIX_",
        "TTFT_STALL_",
        "TTFT_SLOWEST_",
        "TTFT_OTLP_",
    ];
    for k in header.keys() {
        if mirrored.iter().any(|p| k.starts_with(p)) && !k.ends_with("COUNT_") && !k.ends_with("_COUNT") {
            assert!(ours.iter().any(|(o, _)| o == k), "{k} is in include/ttft.h but not mirrored in the crate");
        }
    }
    for (k, n) in [
        ("TTFT_METRIC_COUNT_", Metric::all().len()),
        ("TTFT_COUNTER_COUNT_", Counter::all().len()),
        ("TTFT_STALL_CAUSE_COUNT", StallCause::all().len()),
    ] {
        assert_eq!(header.get(k).copied(), Some(n as i64), "{k} vs the loaded library's names");
    }
    // Every error code the header lists is a named variant here.
    for (k, v) in &header {
        if k.starts_with("TTFT_E") && *k != "TTFT_E__LAST" && *v < 0 {
            assert!(!matches!(Error::from_code(*v as i32), Some(Error::Other(_))), "{k} ({v}) has no Error variant");
        }
    }
}
