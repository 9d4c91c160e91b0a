//! The C ABI of include/ttft.h, declared by hand (no bindgen: the crate has
//! no dependencies). Every struct mirrors the header field by field; the
//! unit test `abi_layout` compiles tests/abi/layout.c against the real
//! header and compares each size and offset with these declarations, so a
//! header change that would break this mirror fails `cargo test`.
//!
//! Enums cross the ABI as `c_int` (never a Rust `enum`: the library's
//! enums grow within a major version). Every return type is declared: a
//! 64-bit handle through a default `int` would be truncated.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_long, c_uint, c_void};

/// Opaque `ttft_registry`.
#[repr(C)]
pub struct ttft_registry {
    _opaque: [u8; 0],
}
/// Opaque `ttft_snapshot`.
#[repr(C)]
pub struct ttft_snapshot {
    _opaque: [u8; 0],
}
/// Opaque `ttft_gather` (1.3).
#[repr(C)]
pub struct ttft_gather {
    _opaque: [u8; 0],
}
/// Opaque `ttft_http`.
#[repr(C)]
pub struct ttft_http {
    _opaque: [u8; 0],
}
/// Opaque `ttft_otlp` (1.3).
#[repr(C)]
pub struct ttft_otlp {
    _opaque: [u8; 0],
}

/// `ttft_otlp_config` (1.3).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ttft_otlp_config {
    pub struct_size: usize,
    pub endpoint: *const c_char,
    pub metrics_endpoint: *const c_char,
    pub headers: *const c_char,
    pub service_name: *const c_char,
    pub resource_attributes: *const c_char,
    pub interval_ms: u32,
    pub timeout_ms: u32,
    pub temporality: c_int,
}

/// `ttft_otlp_info` (1.3), filled by `ttft_otlp_stats`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ttft_otlp_info {
    pub struct_size: usize,
    pub pushes: u64,
    pub accepted: u64,
    pub failed: u64,
    pub dropped: u64,
    pub retries: u64,
    pub bytes_sent: u64,
    pub last_status: c_int,
    pub last_error: [c_char; 128],
}

pub const TTFT_MAX_BANDS: usize = 8;
pub const TTFT_PROM_CONFIG_METRICS: usize = 11;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ttft_label {
    pub name: *const c_char,
    pub value: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ttft_config {
    pub struct_size: usize,
    pub max_inflight: u32,
    pub max_threads: u32,
    pub max_classes: u32,
    pub stall_threshold_ns: u64,
    pub clock: c_int,
    pub start_point: *const c_char,
    pub token_point: *const c_char,
    pub model: *const c_char,
    pub metric_namespace: *const c_char,
    pub const_labels: *const ttft_label,
    pub n_const_labels: u32,
    pub n_prompt_bands: u32,
    pub prompt_band_edges: [u32; TTFT_MAX_BANDS - 1],
    pub prom_buckets: [*const u64; TTFT_PROM_CONFIG_METRICS],
    pub prom_n_buckets: [u32; TTFT_PROM_CONFIG_METRICS],
    pub prom_summaries: c_int,
    // since 1.1
    pub native_histograms: c_int,
    pub native_schema: c_int,
    pub export_idle_classes: c_int,
    pub memory_limit: u64,
    // since 1.2
    pub prefix_hit_min_tokens: u32,
    pub slowest_k: u32,
    // since 1.3: many processes, one truth
    pub shared_dir: *const c_char,
    pub process_name: *const c_char,
    pub publish_interval_ms: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ttft_slo {
    pub struct_size: usize,
    pub ttft_ns: u64,
    pub tpot_ns: u64,
    pub e2e_ns: u64,
    pub stall_threshold_ns: u64,
    // since 1.3
    pub ttft_ns_per_prompt_token: u64,
    pub token_deadline_ns: u64,
    pub fluid_min: f64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ttft_request {
    pub struct_size: usize,
    pub class_id: c_int,
    pub prompt_tokens: u32,
    pub prefix_hit: c_int,
    // since 1.2 (NULL: none)
    pub request_id: *const c_char,
    pub trace_id: *const c_char,
    // since 1.3 (NULL: none)
    pub traceparent: *const c_char,
    pub ttft_slo_ns: u64,
    pub tpot_slo_ns: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ttft_seq_info {
    pub struct_size: usize,
    pub class_id: c_int,
    pub emissions: u32,
    pub tokens: u64,
    pub t_begin_ns: u64,
    pub t_last_ns: u64,
    pub ttft_ns: u64,
    pub itl_p50_ns: u64,
    pub itl_p95_ns: u64,
    pub itl_max_ns: u64,
    pub stalls: u32,
    pub preemptions: u32,
    /// 1.2: the `ttft_stall_cause` of the latest stall, -1 while `stalls` is 0
    pub last_stall_cause: c_int,
    /// 1.3: fluidity so far, token deadlines judged and missed, and the
    /// request's budgets
    pub fluidity: f64,
    pub deadlines: u64,
    pub deadlines_missed: u64,
    pub ttft_slo_ns: u64,
    pub tpot_slo_ns: u64,
}

/// `ttft_step_info` (1.2): one engine iteration, for stall causes and the
/// engine-step histograms. `struct_size` first, like every sized struct.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ttft_step_info {
    pub struct_size: usize,
    pub prefill_tokens: u32,
    pub decode_seqs: u32,
    pub preempted_seqs: u32,
    pub kind: u32,
}

pub const TTFT_MAX_REQUEST_ID: usize = 63;

/// `ttft_slow_request` (1.2): one of the slowest requests of a snapshot.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ttft_slow_request {
    pub struct_size: usize,
    pub value_ns: u64,
    pub ttft_ns: u64,
    pub max_gap_ns: u64,
    pub t_begin_ns: u64,
    pub t_end_ns: u64,
    pub t_end_unix_ns: u64,
    pub tokens: u64,
    pub class_id: c_int,
    pub status: c_int,
    pub cause: c_int,
    pub request_id: [c_char; TTFT_MAX_REQUEST_ID + 1],
    pub trace_id: [c_char; 33],
    // since 1.3
    pub fluidity: f64,
    pub deadlines: u64,
    pub deadlines_missed: u64,
    pub token_deadline_ns: u64,
    pub ttft_slo_ns: u64,
    pub tpot_slo_ns: u64,
}

extern "C" {
    pub fn ttft_version_number() -> c_uint;
    pub fn ttft_version_string() -> *const c_char;
    pub fn ttft_strerror(err: c_int) -> *const c_char;
    pub fn ttft_err_name(err: c_int) -> *const c_char;

    pub fn ttft_config_init_sized(cfg: *mut ttft_config, size: usize);
    pub fn ttft_config_check(c: *const ttft_config, why: *mut c_char, n: usize) -> c_int;
    pub fn ttft_registry_new(cfg: *const ttft_config) -> *mut ttft_registry;
    pub fn ttft_registry_free(r: *mut ttft_registry);
    pub fn ttft_registry_memory(r: *const ttft_registry) -> usize;
    pub fn ttft_registry_now_ns(r: *const ttft_registry) -> u64;
    pub fn ttft_thread_release(r: *mut ttft_registry) -> c_int;
    pub fn ttft_now_ns() -> u64;

    pub fn ttft_class_add(r: *mut ttft_registry, name: *const c_char, slo: *const ttft_slo) -> c_int;
    pub fn ttft_class_find(r: *const ttft_registry, name: *const c_char) -> c_int;

    #[allow(dead_code)]
    pub fn ttft_begin(r: *mut ttft_registry, t_ns: u64) -> u64;
    // the bindings begin with ttft_begin_checked (1.3), which says why a
    // begin was refused; these two stay mirrored
    #[allow(dead_code)]
    pub fn ttft_begin_ex(r: *mut ttft_registry, req: *const ttft_request, t_ns: u64) -> u64;
    pub fn ttft_begin_checked(r: *mut ttft_registry, req: *const ttft_request, t_ns: u64, out: *mut u64) -> c_int;
    pub fn ttft_traceparent_parse(header: *const c_char, trace_id_out: *mut c_char) -> c_int;
    pub fn ttft_mark(r: *mut ttft_registry, s: u64, phase: c_int, t_ns: u64) -> c_int;
    pub fn ttft_token_emitted(r: *mut ttft_registry, s: u64, n_tokens: u32, t_ns: u64) -> c_int;
    pub fn ttft_stream_end(r: *mut ttft_registry, s: u64, status: c_int, t_ns: u64) -> c_int;
    pub fn ttft_annotate(r: *mut ttft_registry, s: u64, prompt_tokens: u32, prefix_hit: c_int) -> c_int;
    pub fn ttft_annotate_cached(r: *mut ttft_registry, s: u64, prompt_tokens: u32, cached_tokens: u32) -> c_int;
    // Used by the ABI test only: it writes the library's sizeof, which a
    // newer library may grow past this mirror, so the bindings fill
    // struct_size themselves (the library reads up to struct_size).
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn ttft_step_info_init(info: *mut ttft_step_info);
    pub fn ttft_engine_step(
        r: *mut ttft_registry,
        info: *const ttft_step_info,
        t_start_ns: u64,
        t_end_ns: u64,
    ) -> c_int;
    pub fn ttft_step_emitted(
        r: *mut ttft_registry,
        seqs: *const u64,
        n_tokens: *const u32,
        count: usize,
        t_ns: u64,
    ) -> c_long;

    pub fn ttft_seq_stats(r: *const ttft_registry, s: u64, out: *mut ttft_seq_info) -> c_int;
    pub fn ttft_stalled_now(r: *const ttft_registry, now_ns: u64) -> c_long;
    pub fn ttft_inflight(r: *const ttft_registry) -> c_long;

    pub fn ttft_snapshot_take(r: *mut ttft_registry) -> *mut ttft_snapshot;
    pub fn ttft_snapshot_free(s: *mut ttft_snapshot);
    pub fn ttft_snapshot_count(s: *const ttft_snapshot, m: c_int) -> u64;
    pub fn ttft_snapshot_quantile(s: *const ttft_snapshot, m: c_int, q: f64) -> u64;
    pub fn ttft_snapshot_counter(s: *const ttft_snapshot, c: c_int) -> u64;
    pub fn ttft_snapshot_mean(s: *const ttft_snapshot, m: c_int) -> f64;
    pub fn ttft_snapshot_sum(s: *const ttft_snapshot, m: c_int) -> u64;
    pub fn ttft_snapshot_gauge(s: *const ttft_snapshot, g: c_int) -> u64;
    pub fn ttft_snapshot_format(s: *const ttft_snapshot, f: c_int, buf: *mut c_char, cap: usize) -> c_long;
    pub fn ttft_snapshot_classes(s: *const ttft_snapshot) -> c_int;
    pub fn ttft_snapshot_class_name(s: *const ttft_snapshot, class_id: c_int) -> *const c_char;
    pub fn ttft_snapshot_class_slo(s: *const ttft_snapshot, class_id: c_int, out: *mut ttft_slo) -> c_int;
    pub fn ttft_snapshot_class_count(s: *const ttft_snapshot, class_id: c_int, m: c_int) -> u64;
    pub fn ttft_snapshot_class_quantile(s: *const ttft_snapshot, class_id: c_int, m: c_int, q: f64) -> u64;
    pub fn ttft_snapshot_class_mean(s: *const ttft_snapshot, class_id: c_int, m: c_int) -> f64;
    pub fn ttft_snapshot_class_sum(s: *const ttft_snapshot, class_id: c_int, m: c_int) -> u64;
    pub fn ttft_snapshot_class_sum_wide(
        s: *const ttft_snapshot,
        class_id: c_int,
        m: c_int,
        hi: *mut u64,
        lo: *mut u64,
    ) -> c_int;
    pub fn ttft_snapshot_class_counter(s: *const ttft_snapshot, class_id: c_int, c: c_int) -> u64;
    pub fn ttft_snapshot_status_count(s: *const ttft_snapshot, class_id: c_int, st: c_int, m: c_int) -> u64;
    pub fn ttft_snapshot_status_quantile(s: *const ttft_snapshot, class_id: c_int, st: c_int, m: c_int, q: f64) -> u64;
    pub fn ttft_snapshot_status_sum(s: *const ttft_snapshot, class_id: c_int, st: c_int, m: c_int) -> u64;
    pub fn ttft_snapshot_status_mean(s: *const ttft_snapshot, class_id: c_int, st: c_int, m: c_int) -> f64;
    pub fn ttft_snapshot_stalls_by_cause(s: *const ttft_snapshot, class_id: c_int, c: c_int) -> u64;
    pub fn ttft_snapshot_stall_seconds_by_cause(s: *const ttft_snapshot, class_id: c_int, c: c_int) -> u64;
    pub fn ttft_snapshot_engine_step_count(s: *const ttft_snapshot, prefill: c_int) -> u64;
    pub fn ttft_snapshot_engine_step_quantile(s: *const ttft_snapshot, prefill: c_int, q: f64) -> u64;
    pub fn ttft_snapshot_engine_step_sum(s: *const ttft_snapshot, prefill: c_int) -> u64;
    pub fn ttft_snapshot_slowest_count(s: *const ttft_snapshot, class_id: c_int, by: c_int) -> c_uint;
    pub fn ttft_snapshot_slowest(
        s: *const ttft_snapshot,
        class_id: c_int,
        by: c_int,
        index: c_uint,
        out: *mut ttft_slow_request,
    ) -> c_int;
    pub fn ttft_snapshot_attainment(s: *const ttft_snapshot, class_id: c_int) -> f64;
    pub fn ttft_snapshot_split_count(s: *const ttft_snapshot, split: c_int, index: c_uint) -> u64;
    pub fn ttft_snapshot_split_quantile(s: *const ttft_snapshot, split: c_int, index: c_uint, q: f64) -> u64;
    pub fn ttft_snapshot_band(s: *const ttft_snapshot, index: c_uint, lo: *mut u32, hi: *mut u32) -> c_int;
    pub fn ttft_snapshot_bands(s: *const ttft_snapshot) -> c_uint;
    pub fn ttft_snapshot_interval(s: *const ttft_snapshot, start_ns: *mut u64, end_ns: *mut u64) -> c_int;
    pub fn ttft_snapshot_label(s: *const ttft_snapshot, key: *const c_char) -> *const c_char;

    pub fn ttft_snapshot_merge(a: *const ttft_snapshot, b: *const ttft_snapshot, err: *mut c_int)
        -> *mut ttft_snapshot;
    pub fn ttft_snapshot_delta(
        newer: *const ttft_snapshot,
        older: *const ttft_snapshot,
        err: *mut c_int,
    ) -> *mut ttft_snapshot;
    pub fn ttft_snapshot_encode(s: *const ttft_snapshot, buf: *mut c_void, cap: usize) -> c_long;
    pub fn ttft_snapshot_decode(buf: *const c_void, len: usize, err: *mut c_int) -> *mut ttft_snapshot;
    pub fn ttft_snapshot_encode_base64(s: *const ttft_snapshot, buf: *mut c_char, cap: usize) -> c_long;
    pub fn ttft_snapshot_decode_base64(text: *const c_char, len: usize, err: *mut c_int) -> *mut ttft_snapshot;

    pub fn ttft_metric_name(m: c_int) -> *const c_char;
    pub fn ttft_counter_name(c: c_int) -> *const c_char;
    pub fn ttft_status_name(st: c_int) -> *const c_char;
    pub fn ttft_format_name(f: c_int) -> *const c_char;
    pub fn ttft_stall_cause_name(c: c_int) -> *const c_char;

    pub fn ttft_http_start(r: *mut ttft_registry, addr: *const c_char, out: *mut *mut ttft_http) -> c_int;
    pub fn ttft_http_port(srv: *const ttft_http) -> c_int;
    pub fn ttft_http_stop(srv: *mut ttft_http);

    // 1.3: many processes, one truth
    pub fn ttft_publish(r: *mut ttft_registry) -> c_int;
    pub fn ttft_gather_open_msg(dir: *const c_char, flags: c_uint, msg: *mut c_char, cap: usize) -> *mut ttft_gather;
    pub fn ttft_gather_take(g: *mut ttft_gather) -> *mut ttft_snapshot;
    pub fn ttft_gather_close(g: *mut ttft_gather);

    // 1.3: OpenTelemetry push
    pub fn ttft_otlp_config_init(c: *mut ttft_otlp_config);
    pub fn ttft_otlp_start_msg(
        r: *mut ttft_registry,
        c: *const ttft_otlp_config,
        out: *mut *mut ttft_otlp,
        msg: *mut c_char,
        cap: usize,
    ) -> c_int;
    pub fn ttft_otlp_flush(o: *mut ttft_otlp) -> c_int;
    pub fn ttft_otlp_stop(o: *mut ttft_otlp);
    pub fn ttft_otlp_stats(o: *const ttft_otlp, out: *mut ttft_otlp_info) -> c_int;
}

/// `TTFT_GATHER_BY_PROCESS`: a process label on every exposed series.
pub const TTFT_GATHER_BY_PROCESS: c_uint = 1;
