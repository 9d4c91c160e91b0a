//! Safe Rust bindings of libttft: what a streaming LLM user feels — time to
//! first token (TTFT), time per output token (TPOT), inter-token latency,
//! stalls and SLO attainment — as honest percentiles.
//!
//! The crate wraps the C ABI of `include/ttft.h` (the API reference: units,
//! edge cases and thread-safety of every call are documented there) and has
//! no dependencies. `build.rs` finds the library through `TTFT_LIB_DIR` or
//! the `pkg-config` command and links `libttft.a` by default
//! (`TTFT_STATIC=0`: `libttft.so`; README.md).
//!
//! ```no_run
//! use std::time::Duration;
//! use ttft::{Config, Format, Metric, Registry, Request, Slo, Status};
//!
//! # fn main() -> ttft::Result<()> {
//! let reg = Registry::with_config(&Config::new().max_inflight(256).model("qwen2.5-7b"))?;
//! let chat = reg.add_class("chat", Slo::new().ttft(Duration::from_millis(300)))?;
//! let mut s = reg.begin_with(&Request::new().class(chat).prompt_tokens(812))?;
//! s.token(1)?;                     // the first chunk is on the wire: TTFT
//! s.token(3)?;                     // a 3-token speculative step: one gap
//! s.end(Status::COMPLETED)?;       // dropping `s` unended records CANCELLED
//! let snap = reg.snapshot()?;
//! println!("TTFT p99 {} ns", snap.quantile(Metric::TTFT, 0.99));
//! print!("{}", snap.format(Format::PROMETHEUS)?);
//! # Ok(()) }
//! ```
//!
//! An engine loop (1.2) reports each iteration when it ends, before the
//! tokens it produced, so that every stall gets a [`StallCause`]:
//!
//! ```no_run
//! use ttft::{Handle, Registry, StallCause, StepInfo};
//!
//! # fn main() -> ttft::Result<()> {
//! # let reg = Registry::new()?;
//! # let batch: Vec<Handle> = Vec::new();
//! # let prompt_tokens_this_step = 0;
//! loop {
//!     let t_start = reg.now_ns();
//!     // ... one forward pass of the batch (and any prompts joining it) ...
//!     let info = StepInfo::decode(batch.len() as u32).prefill_tokens(prompt_tokens_this_step);
//!     reg.engine_step(Some(&info), t_start)?; // first the step ...
//!     reg.step_emitted(&batch, None)?; // ... then the tokens it produced
//! #   break;
//! }
//! let snap = reg.snapshot()?;
//! println!("stalls caused by prefill: {}", snap.stalls_by_cause(StallCause::PREFILL));
//! # Ok(()) }
//! ```
//!
//! A configuration the library refuses says why ([`Error::InvalidConfig`]):
//!
//! ```
//! let err = ttft::Config::new().label("view", "user").check().unwrap_err();
//! assert!(err.to_string().contains("\"view\" is reserved"));
//! ```
//!
//! Times are nanoseconds on CLOCK_MONOTONIC ([`now_ns`]); the methods
//! without a timestamp read the library's clock. A timestamp of 0 is
//! refused with [`Error::InvalidArgument`]: in C, 0 means "now", and a
//! replayed trace that starts at 0 must not silently read the live clock.
//!
//! Ownership: a [`Registry`] is a cheap, clonable, `Send + Sync` handle;
//! streams, shared streams and HTTP servers each keep it alive, so the C
//! registry is freed only after the last of them is gone. Snapshots are
//! independent of their registry.
#![deny(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

mod ffi;

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_int};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The `TTFT_VERSION_MAJOR` these bindings were written for; [`Registry`]
/// constructors refuse a library of another major version.
pub const ABI_MAJOR: u32 = 1;

// ------------------------------------------------------------------ errors

/// A libttft error: one variant per negative `TTFT_E*` code of the C API,
/// plus [`Error::InvalidConfig`], a refused configuration with the
/// library's one-line reason. `Display` prints the library's own
/// `ttft_strerror` text (or the reason).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// `TTFT_EINVAL` (-1): invalid argument.
    InvalidArgument,
    /// `TTFT_ESTALE` (-2): stale or unknown sequence handle (the stream
    /// already ended), or no such class.
    Stale,
    /// `TTFT_EFULL` (-3): no free sequence slot (a refused begin) or class slot.
    Full,
    /// `TTFT_ENOMEM` (-4): out of memory.
    NoMemory,
    /// `TTFT_ERANGE` (-5): value out of range (e.g. annotate after the first token).
    Range,
    /// `TTFT_ECORRUPT` (-6): malformed, truncated or corrupted encoding.
    Corrupt,
    /// `TTFT_EEXIST` (-7): the class name already exists.
    Exists,
    /// `TTFT_EIO` (-8): socket or I/O error (the HTTP endpoint).
    Io,
    /// `TTFT_ENOTSUP` (-9): not supported by this build, or a library of
    /// another major version.
    NotSupported,
    /// `TTFT_ECLOCK` (-10, 1.3): a begin given a wall-clock timestamp
    /// (`SystemTime`, `time.time_ns()`, CLOCK_REALTIME) where the library's
    /// monotonic clock is expected (CLOCK_MONOTONIC: [`now_ns`], 0 = now);
    /// counted in [`Counter::CLOCK_REFUSED`].
    Clock,
    /// A negative code these bindings do not know (a newer library).
    Other(i32),
    /// `TTFT_EINVAL` (-1) for a configuration the library refuses, with the
    /// one-line reason `ttft_config_check` gives (naming the field, its
    /// value and the rule), e.g. `const_labels[0].name "view" is reserved
    /// (the exporters write it; see TTFT_RESERVED_LABELS)`. Returned by
    /// [`Config::check`], [`Registry::with_config`] and [`Registry::new`].
    InvalidConfig(String),
    /// [`Gather::open`] failed (1.3): the library's reason (naming the
    /// directory and the rule) and the errno it set (ENOENT, EACCES for a
    /// directory open to others or of another user, EREMOTE for a network
    /// file system). Its code is `TTFT_EIO`.
    Gather {
        /// The errno `ttft_gather_open` set.
        errno: i32,
        /// The library's one-line reason.
        reason: String,
    },
}

impl Error {
    /// The error for a C return code; `None` for 0 and positive values.
    pub fn from_code(code: i32) -> Option<Error> {
        Some(match code {
            c if c >= 0 => return None,
            -1 => Error::InvalidArgument,
            -2 => Error::Stale,
            -3 => Error::Full,
            -4 => Error::NoMemory,
            -5 => Error::Range,
            -6 => Error::Corrupt,
            -7 => Error::Exists,
            -8 => Error::Io,
            -9 => Error::NotSupported,
            -10 => Error::Clock,
            c => Error::Other(c),
        })
    }

    /// The C code (`TTFT_EINVAL` = -1, ...).
    pub fn code(&self) -> i32 {
        match self {
            Error::InvalidArgument | Error::InvalidConfig(_) => -1,
            Error::Stale => -2,
            Error::Full => -3,
            Error::NoMemory => -4,
            Error::Range => -5,
            Error::Corrupt => -6,
            Error::Exists => -7,
            Error::Io | Error::Gather { .. } => -8,
            Error::NotSupported => -9,
            Error::Clock => -10,
            Error::Other(c) => *c,
        }
    }

    /// The symbolic C name, e.g. `"TTFT_ESTALE"` (`ttft_err_name`).
    pub fn name(&self) -> &'static str {
        // SAFETY: ttft_err_name never returns NULL; the string is static.
        unsafe { static_str(ffi::ttft_err_name(self.code())).unwrap_or("TTFT_UNKNOWN") }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Error::InvalidConfig(why) = self {
            return write!(f, "invalid configuration: {} ({})", why, self.name());
        }
        if let Error::Gather { reason, .. } = self {
            return write!(f, "ttft_gather_open: {} ({})", reason, self.name());
        }
        // SAFETY: ttft_strerror never returns NULL; the string is static.
        let msg = unsafe { static_str(ffi::ttft_strerror(self.code())) }.unwrap_or("unknown error");
        write!(f, "{} ({})", msg, self.name())
    }
}

impl std::error::Error for Error {}

/// `std::result::Result` with [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

fn check(rc: c_int) -> Result<()> {
    match Error::from_code(rc) {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

fn check_long(rc: std::os::raw::c_long) -> Result<usize> {
    if rc < 0 {
        Err(Error::from_code(rc as i32).unwrap_or(Error::Other(rc as i32)))
    } else {
        Ok(rc as usize)
    }
}

/// A caller's timestamp: 0 is "now" in C, never a time here.
fn t_arg(t_ns: u64) -> Result<u64> {
    if t_ns == 0 {
        Err(Error::InvalidArgument)
    } else {
        Ok(t_ns)
    }
}

/// SAFETY: p is NULL or a NUL-terminated string that lives for 'static.
unsafe fn static_str(p: *const c_char) -> Option<&'static str> {
    if p.is_null() {
        None
    } else {
        // SAFETY: per the function's contract.
        unsafe { CStr::from_ptr(p) }.to_str().ok()
    }
}

fn cstring(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::InvalidArgument)
}

// ------------------------------------------------------------- enums

macro_rules! c_enum {
    ($(#[$doc:meta])* $name:ident, $namefn:ident, { $($(#[$cdoc:meta])* $c:ident = $v:expr,)* }) => {
        $(#[$doc])*
        ///
        /// A newtype over the C enum value rather than a Rust `enum`: the
        /// library's enums gain values within a major version, and a newer
        /// library's value must stay representable.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub i32);
        impl $name {
            $($(#[$cdoc])* pub const $c: $name = $name($v);)*
        }
        c_enum!(@name $name, $namefn);
    };
    (@name $name:ident, none) => {};
    (@name $name:ident, $namefn:ident) => {
        impl $name {
            /// The library's stable lower-case name (as in JSON and the
            /// tools), or `None` for a value the loaded library does not know.
            pub fn name(self) -> Option<&'static str> {
                // SAFETY: the C function returns NULL or a static string.
                unsafe { static_str(ffi::$namefn(self.0)) }
            }
            /// Every value the loaded library knows, asked from the library
            /// itself (names up to the first unknown value), so values that
            /// a newer library appends are included.
            pub fn all() -> Vec<$name> {
                (0..).map($name).take_while(|v| v.name().is_some()).collect()
            }
        }
    };
}

c_enum!(
    /// A latency or size distribution (`ttft_metric`).
    Metric, ttft_metric_name, {
    /// Time to first token: t_first - t_begin, ns.
    TTFT = 0,
    /// Time per output token: (t_last - t_first) / (N - 1), ns, N >= 2.
    TPOT = 1,
    /// Inter-token latency: the gap between emissions, ns.
    ITL = 2,
    /// End to end: t_end - t_begin, ns, every ended stream.
    E2E = 3,
    /// Queue time: t_sched - t_begin, ns (SCHEDULED mark).
    QUEUE = 4,
    /// Prefill: t_first - t_sched, ns.
    PREFILL = 5,
    /// Decode: t_last - t_first, ns.
    DECODE = 6,
    /// Output tokens per ended stream.
    OUTPUT_TOKENS = 7,
    /// Each sequence's own p95 gap, ns.
    SEQ_ITL_P95 = 8,
    /// Each sequence's worst gap (exact), ns.
    SEQ_ITL_MAX = 9,
    /// How long streams cancelled before their first token waited, ns.
    ABANDONED_WAIT = 10,
    /// Token-weighted ITL: n observations of gap/n per n-token emission, ns.
    ITL_PER_TOKEN = 11,
});

c_enum!(
    /// An event counter (`ttft_counter`). [`Counter::all`] asks the library
    /// how many there are, so counters appended by a newer library appear.
    Counter, ttft_counter_name, {
    /// Accepted begins.
    BEGUN = 0,
    /// Streams ended COMPLETED.
    COMPLETED = 1,
    /// Streams ended CANCELLED.
    CANCELLED = 2,
    /// Streams ended ERROR.
    ERRORS = 3,
    /// Begins refused (no free slot).
    DROPPED = 4,
    /// Output tokens accepted.
    TOKENS = 5,
    /// ITL gaps above the stall budget.
    STALLS = 6,
    /// Sequences with at least one stall.
    STALLED_SEQS = 7,
    /// CANCELLED with zero tokens emitted.
    ABANDONED = 8,
    /// Ended streams that met their class's SLO.
    SLO_MET = 9,
    /// Timestamps earlier than the sequence's previous event, or wall-clock
    /// times after a monotonic begin (clamped).
    CLOCK_CLAMPED = 10,
    /// PREEMPTED marks.
    PREEMPTIONS = 11,
    /// Ended streams with fewer than two tokens (no TPOT).
    NO_TPOT = 12,
    /// Hook calls rejected with TTFT_ESTALE.
    STALE = 13,
    /// Ended streams the SLO judges: every COMPLETED and ERROR stream, and
    /// a CANCELLED one only when it had already missed a budget (a client
    /// that leaves early does not judge the server). Attainment is
    /// [`Counter::SLO_MET`] / SLO_JUDGED.
    SLO_JUDGED = 14,
    /// Begins whose trace id was ignored (not 32 lowercase hex, or all zero).
    TRACE_ID_INVALID = 15,
    /// Slot-reclaim rounds whose barrier was made without membarrier(2)
    /// because it failed at run time (1.2; registry-wide). Since 1.3:
    /// fences, the recording threads' acknowledgements, /proc; no signal.
    BARRIER_FALLBACKS = 16,
    /// Begins refused with [`Error::Clock`]: a wall-clock timestamp passed
    /// for a monotonic one (1.3). Should stay 0.
    CLOCK_REFUSED = 17,
    /// Publishes into the shared directory that failed (disk full,
    /// read-only, removed directory); recording goes on (1.3).
    PUBLISH_FAILED = 18,
    /// In a gathered snapshot: segments the gatherer skipped (truncated,
    /// corrupt, hostile, future version, another user's) (1.3).
    SEGMENTS_SKIPPED = 19,
    /// In a gathered snapshot: processes whose last published state was
    /// folded into the directory's archive (exits, kills, crashes) (1.3).
    PROCESSES_EXITED = 20,
    /// Token deadlines judged by the fluidity rule, as they happen (1.3).
    TOKEN_DEADLINES = 21,
    /// ... of them missed (1.3).
    TOKEN_DEADLINES_MISSED = 22,
    /// Ended streams that completed with fluidity >= fluid_min (1.3).
    FLUID = 23,
    /// Ended streams judged for fluidity (1.3).
    FLUID_JUDGED = 24,
});

c_enum!(
    /// What an OTLP push carries (`ttft_otlp_temporality`, 1.3;
    /// [`OtlpConfig::temporality`]).
    Temporality, none, {
    /// The totals since the registry was created (the default).
    CUMULATIVE = 0,
    /// What changed since the last push the collector accepted.
    DELTA = 1,
    /// The OpenTelemetry SDK's "lowmemory": delta for every libttft
    /// counter and histogram.
    LOWMEMORY = 2,
});

c_enum!(
    /// How a stream ended (`ttft_status`).
    Status, ttft_status_name, {
    /// The stream finished normally.
    COMPLETED = 0,
    /// The client went away / aborted.
    CANCELLED = 1,
    /// The server failed the request.
    ERROR = 2,
});

c_enum!(
    /// An output format of [`Snapshot::format`] (`ttft_format`).
    Format, ttft_format_name, {
    /// A table for a terminal.
    TEXT = 0,
    /// JSON (docs/json.md).
    JSON = 1,
    /// Prometheus text exposition 0.0.4.
    PROMETHEUS = 2,
    /// OpenMetrics 1.0 text.
    OPENMETRICS = 3,
    /// Length-delimited Prometheus protobuf (binary; use [`Snapshot::format_bytes`]).
    PROMETHEUS_PROTOBUF = 4,
    /// An OTLP `ExportMetricsServiceRequest` (binary; use [`Snapshot::format_bytes`]).
    OTLP_PROTOBUF = 5,
});

c_enum!(
    /// A phase mark (`ttft_phase`).
    Phase, none, {
    /// First admission by the scheduler (prefill starts).
    SCHEDULED = 0,
    /// Evicted from the batch (counted in [`Counter::PREEMPTIONS`]); a
    /// stall whose gap it opens is attributed to [`StallCause::PREEMPTED`].
    PREEMPTED = 1,
    /// Back in the batch after PREEMPTED (1.2). Marks the end of the
    /// preemption; not counted.
    RESUMED = 2,
});

c_enum!(
    /// A gauge read at snapshot time (`ttft_gauge`).
    Gauge, none, {
    /// Sequences begun and not yet ended.
    INFLIGHT = 0,
    /// In-flight sequences stalled right now.
    LIVE_STALLS = 1,
    /// Bytes the registry holds.
    MEMORY = 2,
    /// Observations binned by power of two only (memory limit reached).
    COARSE = 3,
    /// In a gathered snapshot: live processes whose segments it merged (1.3).
    PROCESSES = 4,
});

c_enum!(
    /// A split of TTFT (or PREFILL) by a key known at the request
    /// (`ttft_split`).
    Split, none, {
    /// TTFT by prefix-cache band: index = [`PrefixBand`] value.
    PREFIX_CACHE = 0,
    /// TTFT by prompt-length band: index = band (see [`Snapshot::bands`]).
    PROMPT_BAND = 1,
    /// PREFILL (t_first - t_sched, streams with a SCHEDULED mark) by
    /// prefix-cache band (1.2): index = [`PrefixBand`] value, so "a hit
    /// prefills faster but queues longer" is visible.
    PREFILL_BY_PREFIX = 2,
});

c_enum!(
    /// How much of a prompt the prefix cache served (`ttft_prefix_band`,
    /// 1.2), the index of [`Split::PREFIX_CACHE`] and
    /// [`Split::PREFILL_BY_PREFIX`]. From [`Stream::annotate_cached`]:
    /// MISS when fewer than [`Config::prefix_hit_min_tokens`] tokens were
    /// cached, PARTIAL when fewer than half the prompt, HIT otherwise;
    /// [`Stream::annotate`]'s `Some(true)` / `Some(false)` are HIT / MISS.
    PrefixBand, none, {
    /// Fewer cached tokens than `prefix_hit_min_tokens` (default 16).
    MISS = 0,
    /// At least half the prompt was cached.
    HIT = 1,
    /// Cached, but less than half the prompt.
    PARTIAL = 2,
});

impl PrefixBand {
    /// The split index of this band.
    pub fn index(self) -> u32 {
        self.0 as u32
    }
}

c_enum!(
    /// Why a stall (an ITL gap above the class's stall budget) happened
    /// (`ttft_stall_cause`, 1.2). Every stall gets exactly one;
    /// docs/metrics.md has the rule and its precedence. [`StallCause::all`]
    /// asks the library, so causes a newer library appends are included.
    StallCause, ttft_stall_cause_name, {
    /// No engine step ended inside the gap (the server does not call
    /// [`Registry::engine_step`]).
    UNKNOWN = 0,
    /// A step in the gap carried prefill (another request's prompt) and
    /// was longer than the stream's usual step.
    PREFILL = 1,
    /// The stream was marked [`Phase::PREEMPTED`] in the first half of the gap.
    PREEMPTED = 2,
    /// Steps ran without this stream (batch width, priorities): the steps
    /// that ended inside the gap before the one that produced its token
    /// cover most of it.
    NOT_SCHEDULED = 3,
    /// No step ran during most of the gap: a host stall, GC, a frozen process.
    ENGINE_IDLE = 4,
    /// (1.3) The step that produced the stream's token was itself far
    /// longer than usual (host contention, GPU throttling, a huge batch).
    SLOW_STEP = 5,
});

c_enum!(
    /// The clock behind "now" (`ttft_clock`).
    Clock, none, {
    /// clock_gettime(CLOCK_MONOTONIC).
    MONOTONIC = 0,
    /// Calibrated invariant TSC on CLOCK_MONOTONIC's epoch and rate.
    TSC = 1,
    /// Whichever of the two reads faster here, measured once per process
    /// (1.3; `ttft_registry_clock` says which).
    FASTEST = 2,
});

c_enum!(
    /// Which slowest list (`ttft_slowest_by`, 1.2).
    SlowestBy, none, {
    /// Requests ranked by their TTFT (streams that got a token).
    TTFT = 0,
    /// Requests ranked by their longest inter-token gap.
    GAP = 1,
});

/// One of the slowest requests of a snapshot (`ttft_slow_request`, 1.2),
/// recorded when the stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlowRequest {
    /// What it is ranked by: `ttft_ns` or `max_gap_ns`.
    pub value_ns: u64,
    /// Its TTFT, ns (0 when no token came).
    pub ttft_ns: u64,
    /// Its longest inter-token gap, ns (0 with fewer than two emissions).
    pub max_gap_ns: u64,
    /// When it began, ns (monotonic).
    pub t_begin_ns: u64,
    /// When it ended, ns (monotonic).
    pub t_end_ns: u64,
    /// Its end on the wall clock (ns since 1970), 0 when unknown.
    pub t_end_unix_ns: u64,
    /// Output tokens.
    pub tokens: u64,
    /// Its class in the snapshot.
    pub class: Class,
    /// How it ended.
    pub status: Status,
    /// The cause of its longest gap when that gap was a stall
    /// ([`StallCause::UNKNOWN`] otherwise or when no cause was recorded).
    pub cause: StallCause,
    /// The request id it began with ("" when none).
    pub request_id: String,
    /// Its trace id, 32 lowercase hex digits ("" when none).
    pub trace_id: String,
    /// (1.3) Token deadlines judged over the stream (0 from a snapshot
    /// written before 1.3, or without token deadlines).
    pub deadlines: u64,
    /// (1.3) ... of them missed.
    pub deadlines_missed: u64,
    /// (1.3) Its token deadline D, ns; 0: no token deadlines.
    pub token_deadline_ns: u64,
    /// (1.3) The first-token deadline it was judged against (its own, else
    /// its class's with the per-prompt-token term), ns; 0 = none.
    pub ttft_slo_ns: u64,
    /// (1.3) The TPOT budget it was judged against, ns; 0 = none.
    pub tpot_slo_ns: u64,
}

impl SlowRequest {
    /// (1.3) Its fluidity: 1 - deadlines_missed / deadlines (1 with none).
    pub fn fluidity(&self) -> f64 {
        if self.deadlines == 0 {
            1.0
        } else {
            1.0 - self.deadlines_missed as f64 / self.deadlines as f64
        }
    }
}

fn c_chars(a: &[c_char]) -> String {
    let bytes: Vec<u8> = a.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Label names the exporters write themselves (`TTFT_RESERVED_LABELS`): a
/// constant label ([`Config::label`]) may not use them, nor any name that
/// starts with `__` (Prometheus reserves those). [`Config::check`] names
/// the offending label.
pub const RESERVED_LABELS: &[&str] = &[
    "class",
    "model",
    "status",
    "le",
    "quantile",
    "start_point",
    "token_point",
    "version",
    "slo",
    "prefix_cache",
    "prompt_tokens",
    "view",
    "kind",
    "window",
    "cause",
    "prefill",
    "process",
];

/// Whether `name` may not be a constant label's name: one of
/// [`RESERVED_LABELS`] or a name starting with `__`.
pub fn is_reserved_label(name: &str) -> bool {
    name.starts_with("__") || RESERVED_LABELS.contains(&name)
}

/// A class of requests (from [`Registry::add_class`]); its id in the C API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Class(pub i32);

impl Class {
    /// The class every registry has ("default", id 0).
    pub const DEFAULT: Class = Class(0);
    /// Every class, in per-class queries (`TTFT_CLASS_ALL`).
    pub const ALL: Class = Class(-1);
}

// ------------------------------------------------------------- top level

/// Nanoseconds on CLOCK_MONOTONIC: the clock the hooks read.
pub fn now_ns() -> u64 {
    // SAFETY: no arguments; never fails.
    unsafe { ffi::ttft_now_ns() }
}

/// `TTFT_VERSION_NUMBER` of the loaded library (MAJOR*10000 + MINOR*100 + PATCH).
pub fn version_number() -> u32 {
    // SAFETY: no arguments; never fails.
    unsafe { ffi::ttft_version_number() }
}

/// "MAJOR.MINOR.PATCH" of the loaded library.
pub fn version_string() -> &'static str {
    // SAFETY: a static string.
    unsafe { static_str(ffi::ttft_version_string()) }.unwrap_or("")
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

// ------------------------------------------------------------- SLO, request

/// SLO budgets of a class, in nanoseconds; 0 = no budget for that dimension.
/// `Slo::new()` / `Slo::default()` are `ttft_slo_init`'s defaults: no
/// budgets, `fluid_min` 0.9. (`PartialEq`, not `Eq`, since 1.3: `fluid_min`
/// is a float.)
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slo {
    /// TTFT budget.
    pub ttft_ns: u64,
    /// TPOT budget (met when a stream has no TPOT).
    pub tpot_ns: u64,
    /// End-to-end budget.
    pub e2e_ns: u64,
    /// Stall budget of the class's gaps; 0 = the registry's stall threshold.
    pub stall_threshold_ns: u64,
    /// Length-aware first-token deadline (1.3): `ttft_ns +
    /// ttft_ns_per_prompt_token` x the prompt tokens known at the first
    /// token (the request's or `annotate`'s; unknown = `ttft_ns` alone). A
    /// request's own TTFT target replaces the whole deadline. 0 = a fixed
    /// budget.
    pub ttft_ns_per_prompt_token: u64,
    /// D of the fluidity rule (1.3; docs/metrics.md "Fluidity"): each token
    /// after the first is due D after the one before it, slack carried
    /// forward. 0 = the request's TPOT budget (its own, else `tpot_ns`); a
    /// stream whose D is 0 is not judged for fluidity.
    pub token_deadline_ns: u64,
    /// The fluidity a stream that ended COMPLETED needs to be fluid (1.3),
    /// 0 ..= 1 (`add_class` refuses anything else); default 0.9.
    pub fluid_min: f64,
}

impl Default for Slo {
    fn default() -> Slo {
        Slo {
            ttft_ns: 0,
            tpot_ns: 0,
            e2e_ns: 0,
            stall_threshold_ns: 0,
            ttft_ns_per_prompt_token: 0,
            token_deadline_ns: 0,
            fluid_min: 0.9,
        }
    }
}

impl Slo {
    /// No budgets, `fluid_min` 0.9.
    pub fn new() -> Slo {
        Slo::default()
    }
    /// Sets the per-prompt-token term of the first-token deadline (1.3).
    pub fn ttft_per_prompt_token(mut self, d: Duration) -> Slo {
        self.ttft_ns_per_prompt_token = ns(d);
        self
    }
    /// Sets the token deadline D of the fluidity rule (1.3).
    pub fn token_deadline(mut self, d: Duration) -> Slo {
        self.token_deadline_ns = ns(d);
        self
    }
    /// Sets the fluidity a completed stream needs to be fluid (1.3).
    pub fn fluid_min(mut self, f: f64) -> Slo {
        self.fluid_min = f;
        self
    }
    /// Sets the TTFT budget.
    pub fn ttft(mut self, d: Duration) -> Slo {
        self.ttft_ns = ns(d);
        self
    }
    /// Sets the TPOT budget.
    pub fn tpot(mut self, d: Duration) -> Slo {
        self.tpot_ns = ns(d);
        self
    }
    /// Sets the end-to-end budget.
    pub fn e2e(mut self, d: Duration) -> Slo {
        self.e2e_ns = ns(d);
        self
    }
    /// Sets the class's stall budget.
    pub fn stall_threshold(mut self, d: Duration) -> Slo {
        self.stall_threshold_ns = ns(d);
        self
    }
    fn to_c(self) -> ffi::ttft_slo {
        ffi::ttft_slo {
            struct_size: std::mem::size_of::<ffi::ttft_slo>(),
            ttft_ns: self.ttft_ns,
            tpot_ns: self.tpot_ns,
            e2e_ns: self.e2e_ns,
            stall_threshold_ns: self.stall_threshold_ns,
            ttft_ns_per_prompt_token: self.ttft_ns_per_prompt_token,
            token_deadline_ns: self.token_deadline_ns,
            fluid_min: self.fluid_min,
        }
    }
}

/// What the scheduler knows about a request when it arrives. `Clone`, not
/// `Copy`: it may carry the request's ids (1.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Its class ([`Class::DEFAULT`] unless set).
    pub class: Class,
    /// Prompt length in tokens; 0 = unknown (no prompt-band split).
    pub prompt_tokens: u32,
    /// This request's own TTFT budget in ns (1.3; a router's
    /// `x-llm-d-slo-ttft-ms` x 1e6); 0 = its class's.
    pub ttft_slo_ns: u64,
    /// This request's own TPOT budget in ns (1.3); 0 = its class's.
    pub tpot_slo_ns: u64,
    /// Prefix-cache hit (`Some(true)`), miss, or unknown (`None`).
    pub prefix_hit: Option<bool>,
    /// The server's id of the request (1.2), shown with the slowest
    /// requests ([`Snapshot::slowest`]); the library keeps at most 63 bytes
    /// (cut at a whole UTF-8 character; control characters, NUL included,
    /// become `?`). Any value is accepted: it is what a client sent.
    pub request_id: Option<String>,
    /// The W3C trace-context trace-id (1.2): exactly 32 lowercase hex
    /// digits, not all zero. Anything else (a NUL included: it is passed
    /// as `?`, not as the end of the id) is ignored (the request is still
    /// measured) and counted in [`Counter::TRACE_ID_INVALID`]. Attached as
    /// the exemplar of the slowest requests' buckets.
    pub trace_id: Option<String>,
    /// A W3C `traceparent` header value as received (1.3): its trace-id is
    /// taken at begin as [`traceparent_trace_id`] takes it, when
    /// `trace_id` is `None` (`trace_id` wins). An invalid header is
    /// ignored (the request is still measured) and counted in
    /// [`Counter::TRACE_ID_INVALID`].
    pub traceparent: Option<String>,
}

impl Default for Request {
    fn default() -> Request {
        Request {
            class: Class::DEFAULT,
            prompt_tokens: 0,
            ttft_slo_ns: 0,
            tpot_slo_ns: 0,
            prefix_hit: None,
            request_id: None,
            trace_id: None,
            traceparent: None,
        }
    }
}

impl Request {
    /// Class default, prompt and prefix unknown.
    pub fn new() -> Request {
        Request::default()
    }
    /// Sets the class.
    pub fn class(mut self, c: Class) -> Request {
        self.class = c;
        self
    }
    /// Sets this request's own TTFT and TPOT budgets in ns (1.3; 0 = the
    /// class's): its SLO verdict and token deadlines use them.
    pub fn slo_ns(mut self, ttft_ns: u64, tpot_ns: u64) -> Request {
        self.ttft_slo_ns = ttft_ns;
        self.tpot_slo_ns = tpot_ns;
        self
    }
    /// Sets the prompt length.
    pub fn prompt_tokens(mut self, n: u32) -> Request {
        self.prompt_tokens = n;
        self
    }
    /// Sets whether the prompt prefix was cached.
    pub fn prefix_hit(mut self, hit: bool) -> Request {
        self.prefix_hit = Some(hit);
        self
    }
    /// Sets the server's id of the request (1.2).
    pub fn request_id(mut self, id: &str) -> Request {
        self.request_id = Some(id.to_owned());
        self
    }
    /// Sets the server's id of the request from bytes as a client sent
    /// them (a header value): each malformed UTF-8 sequence becomes one
    /// `?`, as the library stores it; only what the library can keep is
    /// copied, so a 1 MB id costs no more than a short one.
    pub fn request_id_bytes(mut self, id: &[u8]) -> Request {
        self.request_id = Some(lossy_id(id));
        self
    }
    /// Sets the W3C trace id (1.2; 32 lowercase hex digits).
    pub fn trace_id(mut self, id: &str) -> Request {
        self.trace_id = Some(id.to_owned());
        self
    }
    /// Sets the W3C trace id from bytes as a client sent them: anything
    /// but 32 lowercase hex digits is ignored and counted at begin, as for
    /// [`Request::trace_id`].
    pub fn trace_id_bytes(mut self, id: &[u8]) -> Request {
        self.trace_id = Some(lossy_id(id));
        self
    }
    /// Sets the W3C `traceparent` header value as received (1.3), e.g.
    /// `"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"`.
    pub fn traceparent(mut self, header: &str) -> Request {
        self.traceparent = Some(traceparent_copy(header.as_bytes()));
        self
    }
    /// Sets the `traceparent` header from bytes as a client sent them
    /// (any bytes: an invalid header is counted at begin, never an error).
    pub fn traceparent_bytes(mut self, header: &[u8]) -> Request {
        self.traceparent = Some(traceparent_copy(header));
        self
    }
    fn to_c(&self) -> ffi::ttft_request {
        ffi::ttft_request {
            struct_size: std::mem::size_of::<ffi::ttft_request>(),
            class_id: self.class.0,
            prompt_tokens: self.prompt_tokens,
            prefix_hit: prefix_arg(self.prefix_hit),
            request_id: std::ptr::null(),
            trace_id: std::ptr::null(),
            traceparent: std::ptr::null(),
            ttft_slo_ns: self.ttft_slo_ns,
            tpot_slo_ns: self.tpot_slo_ns,
        }
    }
}

/// The bytes of a traceparent header that decide ttft_traceparent_parse's
/// verdict: optional whitespace (space, tab) trimmed, the first 56
/// characters (a 56th that is whitespace, which the whole header would
/// refuse, becomes `x`), each NUL and non-ASCII byte as `?` (neither is
/// valid there). So a 1 MB header costs no more than a short one.
fn traceparent_copy(h: &[u8]) -> String {
    let ows = |c: &u8| *c == b' ' || *c == b'\t';
    let start = h.iter().position(|c| !ows(c)).unwrap_or(h.len());
    let end = h.iter().rposition(|c| !ows(c)).map_or(start, |i| i + 1);
    let t = &h[start..end.max(start)];
    let mut v: Vec<u8> = t[..t.len().min(56)].iter().map(|&c| if c == 0 || c >= 0x80 { b'?' } else { c }).collect();
    if v.len() == 56 && ows(&v[55]) {
        v[55] = b'x';
    }
    String::from_utf8(v).unwrap_or_default() // ASCII only: never the default
}

/// The trace-id of a W3C `traceparent` header value (1.3;
/// `ttft_traceparent_parse`): version `00` exactly
/// (`00-<32 hex>-<16 hex>-<2 hex>`, lowercase, ids not all zero), a higher
/// version (not `ff`) by the W3C rule (its first four fields, then the end
/// or `-`), whitespace around the value skipped. `None` when invalid.
pub fn traceparent_trace_id(header: &str) -> Option<String> {
    let c = CString::new(traceparent_copy(header.as_bytes())).ok()?;
    let mut out = [0 as c_char; 33];
    // SAFETY: c is NUL-terminated; out has the 33 bytes the call writes.
    let rc = unsafe { ffi::ttft_traceparent_parse(c.as_ptr(), out.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    let bytes: Vec<u8> = out[..32].iter().map(|&b| b as u8).collect();
    String::from_utf8(bytes).ok()
}

/// How much of an id ttft_begin_ex can read (TTFT_ID_READ): it keeps at most
/// TTFT_MAX_REQUEST_ID bytes of a request id and each kept byte consumes at
/// most 4 of the caller's (a character is copied whole, a malformed
/// sequence of at most 3 bytes becomes one `?`); it reads at most 33 bytes
/// of a trace id. A longer id is cut here with no change to what is kept
/// or counted.
const ID_READ: usize = 4 * (ffi::TTFT_MAX_REQUEST_ID + 1);

/// `id` (its first ID_READ bytes) as a string, each malformed UTF-8
/// sequence (a maximal invalid part, as the library counts them) as `?`.
fn lossy_id(id: &[u8]) -> String {
    let mut rest = &id[..id.len().min(ID_READ)];
    let mut out = String::with_capacity(rest.len());
    loop {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                // SAFETY: from_utf8 checked these bytes.
                out.push_str(unsafe { std::str::from_utf8_unchecked(good) });
                out.push('?');
                rest = &bad[e.error_len().unwrap_or(bad.len())..];
            }
        }
    }
}

/// An id for ttft_begin_ex: its first ID_READ bytes (at a character
/// boundary or not: the library reads no further), each NUL as `?` — a C
/// string would end there, and a trace id cut at a NUL may look valid.
fn id_cstring(id: &str) -> CString {
    let b = &id.as_bytes()[..id.len().min(ID_READ)];
    let v: Vec<u8> = b.iter().map(|&c| if c == 0 { b'?' } else { c }).collect();
    CString::new(v).unwrap_or_default() // no NUL is left: never the default
}

fn prefix_arg(p: Option<bool>) -> c_int {
    match p {
        None => -1,
        Some(false) => 0,
        Some(true) => 1,
    }
}

// ------------------------------------------------------------- engine steps

/// One engine iteration of a continuous-batching server (`ttft_step_info`,
/// 1.2), recorded with [`Registry::engine_step`] so that stalls get a cause
/// ([`StallCause`]) and the cost of prefill on decode is visible
/// ([`Snapshot::engine_step_quantile`]). All fields default to 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct StepInfo {
    /// Prompt tokens processed in this step, of any request (> 0: the step
    /// carried prefill).
    pub prefill_tokens: u32,
    /// Sequences that decoded a token in this step.
    pub decode_seqs: u32,
    /// Sequences preempted in this step.
    pub preempted_seqs: u32,
    /// Free for the server (0 = unspecified).
    pub kind: u32,
}

impl StepInfo {
    /// A step with no prefill, nothing decoded or preempted, kind 0.
    pub fn new() -> StepInfo {
        StepInfo::default()
    }
    /// A decode-only step of `seqs` sequences.
    pub fn decode(seqs: u32) -> StepInfo {
        StepInfo { decode_seqs: seqs, ..StepInfo::default() }
    }
    /// Sets the prompt tokens processed in the step.
    pub fn prefill_tokens(mut self, n: u32) -> StepInfo {
        self.prefill_tokens = n;
        self
    }
    /// Sets the sequences that decoded a token.
    pub fn decode_seqs(mut self, n: u32) -> StepInfo {
        self.decode_seqs = n;
        self
    }
    /// Sets the sequences preempted in the step.
    pub fn preempted_seqs(mut self, n: u32) -> StepInfo {
        self.preempted_seqs = n;
        self
    }
    /// Sets the server's own kind of step.
    pub fn kind(mut self, k: u32) -> StepInfo {
        self.kind = k;
        self
    }
    fn to_c(self) -> ffi::ttft_step_info {
        ffi::ttft_step_info {
            struct_size: std::mem::size_of::<ffi::ttft_step_info>(),
            prefill_tokens: self.prefill_tokens,
            decode_seqs: self.decode_seqs,
            preempted_seqs: self.preempted_seqs,
            kind: self.kind,
        }
    }
}

// ------------------------------------------------------------- config

/// Registry configuration; every field left unset takes the library's
/// default (`ttft_config_init`). Classes listed here are added right after
/// the registry is created, in order (the first gets id 1).
#[derive(Debug, Clone, Default)]
pub struct Config {
    max_inflight: Option<u32>,
    max_threads: Option<u32>,
    max_classes: Option<u32>,
    stall_threshold_ns: Option<u64>,
    clock: Option<Clock>,
    start_point: Option<String>,
    token_point: Option<String>,
    model: Option<String>,
    metric_namespace: Option<String>,
    labels: Vec<(String, String)>,
    prompt_band_edges: Option<Vec<u32>>,
    prom_buckets: Vec<(Metric, Vec<u64>)>,
    prom_summaries: Option<bool>,
    native_histograms: Option<bool>,
    native_schema: Option<i32>,
    export_idle_classes: Option<bool>,
    memory_limit: Option<u64>,
    slowest_k: Option<u32>,
    prefix_hit_min_tokens: Option<u32>,
    shared_dir: Option<String>,
    process_name: Option<String>,
    publish_interval_ms: Option<u32>,
    classes: Vec<(String, Slo)>,
}

impl Config {
    /// The library's defaults.
    pub fn new() -> Config {
        Config::default()
    }
    /// Sequence slots (default 4096; 1 ..= 2^20): the most streams in flight.
    pub fn max_inflight(mut self, n: u32) -> Config {
        self.max_inflight = Some(n);
        self
    }
    /// Threads with a private recording shard (default 8; 0 ..= 256).
    pub fn max_threads(mut self, n: u32) -> Config {
        self.max_threads = Some(n);
        self
    }
    /// Classes including "default" (default 16).
    pub fn max_classes(mut self, n: u32) -> Config {
        self.max_classes = Some(n);
        self
    }
    /// The default stall budget (default 500 ms).
    pub fn stall_threshold(mut self, d: Duration) -> Config {
        self.stall_threshold_ns = Some(ns(d));
        self
    }
    /// The clock of "now" (default [`Clock::MONOTONIC`]).
    pub fn clock(mut self, c: Clock) -> Config {
        self.clock = Some(c);
        self
    }
    /// Where t_begin is taken (label; default "server_arrival").
    pub fn start_point(mut self, s: &str) -> Config {
        self.start_point = Some(s.to_owned());
        self
    }
    /// What counts as an emitted token (label; default "detokenized_flush").
    pub fn token_point(mut self, s: &str) -> Config {
        self.token_point = Some(s.to_owned());
        self
    }
    /// The model label (default "").
    pub fn model(mut self, s: &str) -> Config {
        self.model = Some(s.to_owned());
        self
    }
    /// Prefix of the exported metric names (default "llm_").
    pub fn metric_namespace(mut self, s: &str) -> Config {
        self.metric_namespace = Some(s.to_owned());
        self
    }
    /// Adds a constant label to every exported series (at most 8; not one
    /// of [`RESERVED_LABELS`], not starting with `__`).
    pub fn label(mut self, name: &str, value: &str) -> Config {
        self.labels.push((name.to_owned(), value.to_owned()));
        self
    }
    /// Ascending prompt-token band edges (at most 7; empty = no bands).
    pub fn prompt_band_edges(mut self, edges: &[u32]) -> Config {
        self.prompt_band_edges = Some(edges.to_vec());
        self
    }
    /// Classic Prometheus bucket bounds of metric `m` (ns; tokens for
    /// OUTPUT_TOKENS), ascending; metrics 0..=10 are configurable.
    pub fn prom_buckets(mut self, m: Metric, bounds: &[u64]) -> Config {
        self.prom_buckets.push((m, bounds.to_vec()));
        self
    }
    /// Also export p50..p99.9 summary series.
    pub fn prom_summaries(mut self, on: bool) -> Config {
        self.prom_summaries = Some(on);
        self
    }
    /// Native (exponential) buckets in the protobuf exposition (default on).
    pub fn native_histograms(mut self, on: bool) -> Config {
        self.native_histograms = Some(on);
        self
    }
    /// Native bucket schema, -4 ..= 8 (default 7).
    pub fn native_schema(mut self, schema: i32) -> Config {
        self.native_schema = Some(schema);
        self
    }
    /// Export the default class before a begin uses it (default off;
    /// classes added with `add_class` are exported at zero from then on, 1.3).
    pub fn export_idle_classes(mut self, on: bool) -> Config {
        self.export_idle_classes = Some(on);
        self
    }
    /// Requests kept per class in each slowest list ([`Snapshot::slowest`]):
    /// default 8, 0 ..= 64; 0 = no lists, no ids kept, no exemplars (1.2).
    pub fn slowest_k(mut self, k: u32) -> Config {
        self.slowest_k = Some(k);
        self
    }
    /// Bytes of histogram buckets the registry may allocate (default 256 MiB).
    pub fn memory_limit(mut self, bytes: u64) -> Config {
        self.memory_limit = Some(bytes);
        self
    }
    /// Fewer cached tokens than this is a prefix-cache MISS in
    /// [`Stream::annotate_cached`] (default 16: every server reuses at
    /// least a BOS token; at least 1).
    pub fn prefix_hit_min_tokens(mut self, n: u32) -> Config {
        self.prefix_hit_min_tokens = Some(n);
        self
    }
    /// Publish the registry's whole state into a segment of its own in
    /// directory `dir`, read by [`Gather`] (1.3; docs/multiprocess.md). A
    /// tmpfs such as `/dev/shm/NAME`; it must exist, belong to this user
    /// and not be group- or world-writable, else [`Error::InvalidConfig`]
    /// says why.
    pub fn shared_dir(mut self, dir: &str) -> Config {
        self.shared_dir = Some(dir.to_owned());
        self
    }
    /// This process in per-process views (1..63 bytes of `[A-Za-z0-9_.:-]`;
    /// default `pid-<pid>`): a stable name keeps a series across restarts.
    pub fn process_name(mut self, name: &str) -> Config {
        self.process_name = Some(name.to_owned());
        self
    }
    /// A background thread publishes at least this often (default 100,
    /// 10 ..= 3600000); 0 = no thread, call [`Registry::publish`].
    pub fn publish_interval_ms(mut self, ms: u32) -> Config {
        self.publish_interval_ms = Some(ms);
        self
    }
    /// Adds a class with its SLO budgets once the registry exists.
    pub fn class(mut self, name: &str, slo: Slo) -> Config {
        self.classes.push((name.to_owned(), slo));
        self
    }
}

fn invalid_config(why: String) -> Error {
    Error::InvalidConfig(why)
}

/// `ttft_config_check` on a complete C configuration.
fn config_check(c: &ffi::ttft_config) -> Result<()> {
    let mut why = [0 as c_char; 512];
    // SAFETY: c is complete; why holds why.len() bytes and C writes at most
    // that many, NUL-terminated.
    let rc = unsafe { ffi::ttft_config_check(c, why.as_mut_ptr(), why.len()) };
    if rc == 0 {
        return Ok(());
    }
    // SAFETY: NUL-terminated by ttft_config_check (n > 0).
    let reason = unsafe { CStr::from_ptr(why.as_ptr()) }.to_string_lossy().into_owned();
    if reason.is_empty() {
        return Err(Error::from_code(rc).unwrap_or(Error::InvalidArgument));
    }
    Err(invalid_config(reason))
}

fn nul_free(field: &str, s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| invalid_config(format!("{field} {s:?} contains a NUL byte")))
}

impl Config {
    /// Whether the library would accept this configuration, without
    /// creating a registry (`ttft_config_check`): `Ok(())`, or
    /// [`Error::InvalidConfig`] with a one-line reason naming the field,
    /// its value and the rule, e.g. `const_labels[0].name "view" is
    /// reserved (the exporters write it; see TTFT_RESERVED_LABELS)`. Classes
    /// added by [`Config::class`] are checked when the registry adds them.
    pub fn check(&self) -> Result<()> {
        self.with_c(config_check)
    }

    /// Builds the C configuration (strings and arrays owned here, alive
    /// while `f` runs) and calls `f` with it.
    fn with_c<R>(&self, f: impl FnOnce(&ffi::ttft_config) -> Result<R>) -> Result<R> {
        let cfg = self;
        // ttft_config_init_sized writes only our mirror's size, whatever
        // the loaded library's ttft_config is (docs/ffi.md).
        let mut c = std::mem::MaybeUninit::<ffi::ttft_config>::zeroed();
        // SAFETY: a valid pointer to size_of::<ttft_config>() bytes.
        unsafe { ffi::ttft_config_init_sized(c.as_mut_ptr(), std::mem::size_of::<ffi::ttft_config>()) };
        // SAFETY: zeroed then initialised; every field is plain data or a pointer.
        let mut c = unsafe { c.assume_init() };
        if let Some(v) = cfg.max_inflight {
            c.max_inflight = v;
        }
        if let Some(v) = cfg.max_threads {
            c.max_threads = v;
        }
        if let Some(v) = cfg.max_classes {
            c.max_classes = v;
        }
        if let Some(v) = cfg.stall_threshold_ns {
            c.stall_threshold_ns = v;
        }
        if let Some(v) = cfg.clock {
            c.clock = v.0;
        }
        // Strings and arrays stay alive until f has returned.
        let start = cfg.start_point.as_deref().map(|s| nul_free("start_point", s)).transpose()?;
        let token = cfg.token_point.as_deref().map(|s| nul_free("token_point", s)).transpose()?;
        let model = cfg.model.as_deref().map(|s| nul_free("model", s)).transpose()?;
        let ns_ = cfg.metric_namespace.as_deref().map(|s| nul_free("metric_namespace", s)).transpose()?;
        if let Some(s) = &start {
            c.start_point = s.as_ptr();
        }
        if let Some(s) = &token {
            c.token_point = s.as_ptr();
        }
        if let Some(s) = &model {
            c.model = s.as_ptr();
        }
        if let Some(s) = &ns_ {
            c.metric_namespace = s.as_ptr();
        }
        let shared = cfg.shared_dir.as_deref().map(|s| nul_free("shared_dir", s)).transpose()?;
        let pname = cfg.process_name.as_deref().map(|s| nul_free("process_name", s)).transpose()?;
        if let Some(s) = &shared {
            c.shared_dir = s.as_ptr();
        }
        if let Some(s) = &pname {
            c.process_name = s.as_ptr();
        }
        if let Some(v) = cfg.publish_interval_ms {
            c.publish_interval_ms = v;
        }
        let mut label_strings = Vec::with_capacity(cfg.labels.len());
        for (i, (k, v)) in cfg.labels.iter().enumerate() {
            label_strings.push((
                nul_free(&format!("const_labels[{i}].name"), k)?,
                nul_free(&format!("const_labels[{i}].value"), v)?,
            ));
        }
        let labels: Vec<ffi::ttft_label> =
            label_strings.iter().map(|(k, v)| ffi::ttft_label { name: k.as_ptr(), value: v.as_ptr() }).collect();
        if !labels.is_empty() {
            c.const_labels = labels.as_ptr();
            // Saturating: a count past u32 is refused by the check with its reason.
            c.n_const_labels = u32::try_from(labels.len()).unwrap_or(u32::MAX);
        }
        if let Some(edges) = &cfg.prompt_band_edges {
            if edges.len() > c.prompt_band_edges.len() {
                return Err(invalid_config(format!(
                    "prompt_band_edges: {} edges, at most {} (TTFT_MAX_BANDS - 1)",
                    edges.len(),
                    c.prompt_band_edges.len()
                )));
            }
            c.prompt_band_edges[..edges.len()].copy_from_slice(edges);
            c.n_prompt_bands = edges.len() as u32;
        }
        for (m, bounds) in &cfg.prom_buckets {
            let i = usize::try_from(m.0).ok().filter(|&i| i < ffi::TTFT_PROM_CONFIG_METRICS).ok_or_else(|| {
                invalid_config(format!(
                    "prom_buckets: metric {} has no configurable buckets (metrics 0..{})",
                    m.0,
                    ffi::TTFT_PROM_CONFIG_METRICS - 1
                ))
            })?;
            c.prom_buckets[i] = bounds.as_ptr();
            c.prom_n_buckets[i] = u32::try_from(bounds.len()).unwrap_or(u32::MAX);
        }
        if let Some(v) = cfg.prom_summaries {
            c.prom_summaries = v as c_int;
        }
        if let Some(v) = cfg.native_histograms {
            c.native_histograms = v as c_int;
        }
        if let Some(v) = cfg.native_schema {
            c.native_schema = v;
        }
        if let Some(v) = cfg.export_idle_classes {
            c.export_idle_classes = v as c_int;
        }
        if let Some(v) = cfg.memory_limit {
            c.memory_limit = v;
        }
        if let Some(v) = cfg.prefix_hit_min_tokens {
            c.prefix_hit_min_tokens = v;
        }
        if let Some(v) = cfg.slowest_k {
            c.slowest_k = v;
        }
        f(&c)
    }
}

// ------------------------------------------------------------- registry

struct Inner {
    raw: NonNull<ffi::ttft_registry>,
    classes: AtomicI32, // ids 0 .. classes-1 exist
}

// SAFETY: every libttft call on a registry is thread-safe except
// ttft_registry_free, which runs only in Drop, when no other reference
// (and so no other call) exists.
unsafe impl Send for Inner {}
// SAFETY: as above.
unsafe impl Sync for Inner {}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: the last reference: nothing races the free.
        unsafe { ffi::ttft_registry_free(self.raw.as_ptr()) }
    }
}

/// A registry: the slots, histograms and counters that the hooks record
/// into. Clone it freely (an atomic reference count); the C registry is
/// freed when the last clone, [`Stream`], [`SharedStream`] and
/// [`HttpServer`] referring to it is dropped. `Send + Sync`: every hook may
/// be called from any thread.
#[derive(Clone)]
pub struct Registry {
    inner: Arc<Inner>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry").field("raw", &self.inner.raw).finish()
    }
}

/// A sequence handle of the C API (`ttft_seq`): opaque, 0 = no stream.
/// `repr(transparent)` over `u64`, so a slice of handles is passed to
/// [`Registry::step_emitted`] without copying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Handle(pub u64);

fn check_major() -> Result<()> {
    if version_number() / 10000 != ABI_MAJOR {
        Err(Error::NotSupported)
    } else {
        Ok(())
    }
}

impl Registry {
    /// A registry with the default configuration (4096 slots, 500 ms stall budget).
    pub fn new() -> Result<Registry> {
        Registry::with_config(&Config::new())
    }

    /// A registry configured by `cfg` (then its classes added). Errors:
    /// [`Error::InvalidConfig`] with the library's one-line reason for a
    /// configuration it refuses (out-of-range value, reserved or bad label
    /// name, bands not ascending, a string with a NUL; see
    /// [`Config::check`]); [`Error::NoMemory`] when the configuration is
    /// valid and memory is short; [`Error::NotSupported`] for a library of
    /// another major version; class errors as [`Registry::add_class`].
    pub fn with_config(cfg: &Config) -> Result<Registry> {
        check_major()?;
        let raw = cfg.with_c(|c| {
            config_check(c)?;
            // SAFETY: c is a complete ttft_config whose pointers are valid now.
            let raw = unsafe { ffi::ttft_registry_new(c) };
            // ttft_registry_new refuses exactly what ttft_config_check
            // refuses; past it only memory can be short.
            NonNull::new(raw).ok_or(Error::NoMemory)
        })?;
        let reg = Registry { inner: Arc::new(Inner { raw, classes: AtomicI32::new(1) }) };
        for (name, slo) in &cfg.classes {
            reg.add_class(name, *slo)?;
        }
        Ok(reg)
    }

    fn raw(&self) -> *mut ffi::ttft_registry {
        self.inner.raw.as_ptr()
    }

    /// Adds a class (`name`: 1..63 bytes of `[A-Za-z0-9_.:-]`) with its SLO
    /// budgets. Errors: [`Error::InvalidArgument`] (bad name),
    /// [`Error::Exists`], [`Error::Full`] (max_classes reached),
    /// [`Error::NoMemory`]. Thread-safe, also against running hooks.
    pub fn add_class(&self, name: &str, slo: Slo) -> Result<Class> {
        let n = cstring(name)?;
        let s = slo.to_c();
        // SAFETY: valid registry, NUL-terminated name, complete slo.
        let rc = unsafe { ffi::ttft_class_add(self.raw(), n.as_ptr(), &s) };
        check(rc)?;
        // Relaxed: see class_known.
        self.inner.classes.fetch_max(rc + 1, Ordering::Relaxed);
        Ok(Class(rc))
    }

    /// The class called `name`, or [`Error::Stale`] when there is none.
    pub fn find_class(&self, name: &str) -> Result<Class> {
        let n = cstring(name)?;
        // SAFETY: valid registry and name.
        let rc = unsafe { ffi::ttft_class_find(self.raw(), n.as_ptr()) };
        check(rc).map(|()| Class(rc))
    }

    /// ttft_begin_checked: the handle, or why the begin was refused.
    fn begin_c(&self, req: Option<&ffi::ttft_request>, t: u64) -> Result<Stream> {
        let mut seq = 0u64;
        let p = req.map_or(std::ptr::null(), |r| r as *const ffi::ttft_request);
        // SAFETY: valid registry; req NULL or a valid request; seq writable.
        check(unsafe { ffi::ttft_begin_checked(self.raw(), p, t, &mut seq) })?;
        Ok(Stream { reg: self.clone(), seq, done: false })
    }

    /// Starts a stream now (class default). [`Error::Full`] when no slot
    /// is free (counted as DROPPED). Lock-free, no allocation in C.
    pub fn begin(&self) -> Result<Stream> {
        self.begin_c(None, 0)
    }

    /// Starts a stream at `t_ns` (CLOCK_MONOTONIC ns, not 0).
    /// [`Error::Clock`] for a wall-clock time (`SystemTime::now()` since
    /// the epoch), counted as CLOCK_REFUSED; [`Error::Full`] when no slot
    /// is free.
    pub fn begin_at(&self, t_ns: u64) -> Result<Stream> {
        let t = t_arg(t_ns)?;
        self.begin_c(None, t)
    }

    /// Starts a stream now with request details. [`Error::Full`] when no
    /// slot is free; [`Error::InvalidArgument`] for an unknown class (a
    /// [`Request::class`] of another registry: set it per registry).
    pub fn begin_with(&self, req: &Request) -> Result<Stream> {
        self.begin_req(req, 0)
    }

    /// Starts a stream at `t_ns` (not 0) with request details.
    pub fn begin_with_at(&self, req: &Request, t_ns: u64) -> Result<Stream> {
        self.begin_req(req, t_arg(t_ns)?)
    }

    fn begin_req(&self, req: &Request, t: u64) -> Result<Stream> {
        let mut r = req.to_c();
        // The ids are copied by ttft_begin_ex; they live until it returns.
        // No value of an id fails a begin (it is what a client sent).
        let rid = req.request_id.as_deref().map(id_cstring);
        let tid = req.trace_id.as_deref().map(id_cstring);
        // a header set through the builders is short already; a field set
        // by hand is cut the same way (the verdict does not change)
        let tp = req.traceparent.as_deref().map(|h| id_cstring(&traceparent_copy(h.as_bytes())));
        if let Some(c) = &rid {
            r.request_id = c.as_ptr();
        }
        if let Some(c) = &tid {
            r.trace_id = c.as_ptr();
        }
        if let Some(c) = &tp {
            r.traceparent = c.as_ptr();
        }
        // Errors: InvalidArgument (a class of another registry), Full,
        // Clock (a wall-clock t).
        self.begin_c(Some(&r), t)
    }

    /// Starts a stream now whose handle may be cloned into several owners
    /// (callbacks); the last clone dropped ends it as CANCELLED unless one
    /// of them ended it.
    pub fn begin_shared(&self, req: &Request) -> Result<SharedStream> {
        let s = self.begin_with(req)?;
        Ok(SharedStream::from_stream(s))
    }

    /// One decode step of a continuous-batching engine: every handle in
    /// `seqs` emitted one token (or `n_tokens[i]`, which must then have the
    /// same length) now, with one clock read. Ended or unknown handles are
    /// skipped and counted as STALE. Returns the number of emissions accepted.
    pub fn step_emitted(&self, seqs: &[Handle], n_tokens: Option<&[u32]>) -> Result<usize> {
        self.step(seqs, n_tokens, 0)
    }

    /// [`Registry::step_emitted`] at `t_ns` (not 0).
    pub fn step_emitted_at(&self, seqs: &[Handle], n_tokens: Option<&[u32]>, t_ns: u64) -> Result<usize> {
        self.step(seqs, n_tokens, t_arg(t_ns)?)
    }

    fn step(&self, seqs: &[Handle], n_tokens: Option<&[u32]>, t: u64) -> Result<usize> {
        let n = match n_tokens {
            None => ptr::null(),
            Some(n) if n.len() == seqs.len() => n.as_ptr(),
            Some(_) => return Err(Error::InvalidArgument),
        };
        // SAFETY: Handle is repr(transparent) over u64 (ttft_seq); both
        // arrays hold seqs.len() elements and outlive the call.
        check_long(unsafe { ffi::ttft_step_emitted(self.raw(), seqs.as_ptr().cast(), n, seqs.len(), t) })
    }

    /// One engine iteration ran from `t_start_ns` until now (1.2). Call it
    /// once per iteration when it ends, BEFORE the tokens it produced are
    /// recorded ([`Registry::step_emitted`], [`Stream::token`]), with the
    /// same clock as the token hooks. `info` `None` = an iteration with no
    /// prefill. Records the step's duration in the registry-wide
    /// engine-step histogram (prefill when `info.prefill_tokens > 0`) and
    /// keeps the step for stall causes ([`StallCause`]). A server that
    /// never calls it loses nothing: its stalls are [`StallCause::UNKNOWN`].
    /// Steps are registry-wide: one registry per engine loop. Lock-free,
    /// no allocation in C. [`Error::InvalidArgument`] for `t_start_ns` 0.
    pub fn engine_step(&self, info: Option<&StepInfo>, t_start_ns: u64) -> Result<()> {
        self.engine_step_t(info, t_arg(t_start_ns)?, 0)
    }

    /// [`Registry::engine_step`] with both ends given (not 0; an end before
    /// the start is clamped to the start), e.g. from CUDA events or a
    /// replayed trace.
    pub fn engine_step_at(&self, info: Option<&StepInfo>, t_start_ns: u64, t_end_ns: u64) -> Result<()> {
        self.engine_step_t(info, t_arg(t_start_ns)?, t_arg(t_end_ns)?)
    }

    fn engine_step_t(&self, info: Option<&StepInfo>, t0: u64, t1: u64) -> Result<()> {
        let c = info.map(|i| i.to_c());
        let p = c.as_ref().map_or(ptr::null(), |c| c as *const ffi::ttft_step_info);
        // SAFETY: valid registry; p is NULL or a complete, sized ttft_step_info.
        check(unsafe { ffi::ttft_engine_step(self.raw(), p, t0, t1) })
    }

    /// Records `n` tokens of the stream `h` now, for engines that keep raw
    /// handles ([`Stream::handle`]) instead of [`Stream`]s.
    pub fn token_emitted(&self, h: Handle, n: u32) -> Result<()> {
        // SAFETY: valid registry; any handle value is accepted by C.
        check(unsafe { ffi::ttft_token_emitted(self.raw(), h.0, n, 0) })
    }

    /// Ends the stream `h` now (e.g. a client cancel from another thread,
    /// racing the decode loop: exactly one end wins, the other gets
    /// [`Error::Stale`]). A [`Stream`] ended this way still ends itself
    /// when dropped, which is then counted as STALE: prefer
    /// [`SharedStream`] when two parties may end a stream.
    pub fn end(&self, h: Handle, status: Status) -> Result<()> {
        // SAFETY: valid registry.
        check(unsafe { ffi::ttft_stream_end(self.raw(), h.0, status.0, 0) })
    }

    /// What the live stream `h` looks like now; [`Error::Stale`] once it ended.
    pub fn seq_stats(&self, h: Handle) -> Result<SeqInfo> {
        let mut info =
            ffi::ttft_seq_info { struct_size: std::mem::size_of::<ffi::ttft_seq_info>(), ..Default::default() };
        // SAFETY: valid registry; info is a complete, sized ttft_seq_info.
        check(unsafe { ffi::ttft_seq_stats(self.raw(), h.0, &mut info) })?;
        Ok(SeqInfo {
            class: Class(info.class_id),
            emissions: info.emissions,
            tokens: info.tokens,
            t_begin_ns: info.t_begin_ns,
            t_last_ns: info.t_last_ns,
            ttft_ns: info.ttft_ns,
            itl_p50_ns: info.itl_p50_ns,
            itl_p95_ns: info.itl_p95_ns,
            itl_max_ns: info.itl_max_ns,
            stalls: info.stalls,
            preemptions: info.preemptions,
            last_stall_cause: (info.stalls > 0 && info.last_stall_cause >= 0)
                .then_some(StallCause(info.last_stall_cause)),
            deadlines: info.deadlines,
            deadlines_missed: info.deadlines_missed,
            ttft_slo_ns: info.ttft_slo_ns,
            tpot_slo_ns: info.tpot_slo_ns,
        })
    }

    /// Copies everything recorded so far into an immutable [`Snapshot`]
    /// (never stops the hooks). [`Error::NoMemory`] when memory is short.
    pub fn snapshot(&self) -> Result<Snapshot> {
        // SAFETY: valid registry.
        Snapshot::own(unsafe { ffi::ttft_snapshot_take(self.raw()) }, Error::NoMemory)
    }

    /// Publishes the registry's state into its segment of the shared
    /// directory now (`ttft_publish`; 1.3). [`Error::InvalidArgument`]
    /// without [`Config::shared_dir`], [`Error::Io`] when writing failed
    /// (counted in [`Counter::PUBLISH_FAILED`]; recording goes on).
    pub fn publish(&self) -> Result<()> {
        // SAFETY: valid registry.
        check(unsafe { ffi::ttft_publish(self.raw()) })
    }

    /// Streams begun and not yet ended.
    pub fn inflight(&self) -> usize {
        // SAFETY: valid registry.
        unsafe { ffi::ttft_inflight(self.raw()) }.max(0) as usize
    }

    /// In-flight streams whose last token is older than their class's stall
    /// budget now: stalls that have not closed yet.
    pub fn stalled_now(&self) -> usize {
        // SAFETY: valid registry.
        unsafe { ffi::ttft_stalled_now(self.raw(), 0) }.max(0) as usize
    }

    /// [`Registry::stalled_now`] as of `t_ns` (not 0).
    pub fn stalled_at(&self, t_ns: u64) -> Result<usize> {
        // SAFETY: valid registry.
        check_long(unsafe { ffi::ttft_stalled_now(self.raw(), t_arg(t_ns)?) })
    }

    /// Bytes of memory the registry holds.
    pub fn memory(&self) -> usize {
        // SAFETY: valid registry.
        unsafe { ffi::ttft_registry_memory(self.raw()) }
    }

    /// Nanoseconds on the registry's configured clock ("now" of its hooks).
    pub fn now_ns(&self) -> u64 {
        // SAFETY: valid registry.
        unsafe { ffi::ttft_registry_now_ns(self.raw()) }
    }

    /// Hands the calling thread's private recording shard back, so a
    /// thread that stops recording frees it for another (recorded data stays).
    pub fn thread_release(&self) -> Result<()> {
        // SAFETY: valid registry.
        check(unsafe { ffi::ttft_thread_release(self.raw()) })
    }

    /// Serves this registry over HTTP on `addr` ("127.0.0.1:9464", ":0"
    /// picks a free port): `/metrics` (Prometheus text, OpenMetrics or
    /// protobuf by Accept), `/report`, `/report.json`. The server keeps the
    /// registry alive; dropping it stops the server. Errors:
    /// [`Error::InvalidArgument`] (bad address), [`Error::Io`] (bind
    /// failed), [`Error::NotSupported`] (built without HTTP).
    pub fn serve(&self, addr: &str) -> Result<HttpServer> {
        let a = cstring(addr)?;
        let mut srv: *mut ffi::ttft_http = ptr::null_mut();
        // SAFETY: valid registry, address and out pointer.
        check(unsafe { ffi::ttft_http_start(self.raw(), a.as_ptr(), &mut srv) })?;
        let raw = NonNull::new(srv).ok_or(Error::NoMemory)?;
        Ok(HttpServer { raw, _reg: self.clone() })
    }

    /// Pushes this registry to an OpenTelemetry collector over OTLP/HTTP
    /// protobuf every interval (`ttft_otlp_start`, 1.3;
    /// docs/opentelemetry.md): what `c` leaves unset comes from the
    /// `OTEL_*` environment, as `ttft_otlp_config_init` reads it. Plain
    /// HTTP only: an `https://` endpoint is refused (push to a local
    /// collector). The pusher keeps the registry alive; dropping it makes a
    /// last push and stops it. Errors: [`Error::InvalidConfig`] with the
    /// library's reason (a bad or https URL, bad headers, a string with a
    /// NUL byte), [`Error::NotSupported`] (built without HTTP),
    /// [`Error::NoMemory`].
    pub fn otlp_start(&self, c: &OtlpConfig) -> Result<OtlpPusher> {
        let s = |field: &str, v: &Option<String>| v.as_deref().map(|v| nul_free(field, v)).transpose();
        let endpoint = s("endpoint", &c.endpoint)?;
        let metrics_endpoint = s("metrics_endpoint", &c.metrics_endpoint)?;
        let headers = s("headers", &c.headers)?;
        let service_name = s("service_name", &c.service_name)?;
        let resource_attributes = s("resource_attributes", &c.resource_attributes)?;
        let p = |v: &Option<CString>| v.as_ref().map_or(ptr::null(), |v| v.as_ptr());
        let ms = |d: Duration| u32::try_from(d.as_millis()).unwrap_or(u32::MAX).max(1);
        // SAFETY: ttft_otlp_config is plain data; _init fills every field.
        let mut cfg: ffi::ttft_otlp_config = unsafe { std::mem::zeroed() };
        // SAFETY: valid out pointer.
        unsafe { ffi::ttft_otlp_config_init(&mut cfg) };
        cfg.endpoint = p(&endpoint);
        cfg.metrics_endpoint = p(&metrics_endpoint);
        cfg.headers = p(&headers);
        cfg.service_name = p(&service_name);
        cfg.resource_attributes = p(&resource_attributes);
        if let Some(d) = c.interval {
            cfg.interval_ms = ms(d);
        }
        if let Some(d) = c.timeout {
            cfg.timeout_ms = ms(d);
        }
        if let Some(t) = c.temporality {
            cfg.temporality = t.0;
        }
        let mut o: *mut ffi::ttft_otlp = ptr::null_mut();
        let mut msg = [0 as c_char; 512];
        // SAFETY: valid registry, config (its strings outlive the call: the
        // library copies them), out pointer and message buffer.
        let rc = unsafe { ffi::ttft_otlp_start_msg(self.raw(), &cfg, &mut o, msg.as_mut_ptr(), msg.len()) };
        if rc == -1 {
            // SAFETY: the library NUL-terminates msg (snprintf rules).
            let why = unsafe { CStr::from_ptr(msg.as_ptr()) }.to_string_lossy().into_owned();
            return Err(invalid_config(why));
        }
        check(rc)?;
        let raw = NonNull::new(o).ok_or(Error::NoMemory)?;
        Ok(OtlpPusher { raw, _reg: self.clone() })
    }
}

/// What a live stream looks like right now ([`Registry::seq_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqInfo {
    /// Its class.
    pub class: Class,
    /// Emission events so far.
    pub emissions: u32,
    /// Tokens so far.
    pub tokens: u64,
    /// When it began, ns.
    pub t_begin_ns: u64,
    /// Its last emission, ns (t_begin before the first).
    pub t_last_ns: u64,
    /// Its TTFT, ns (0 before the first emission).
    pub ttft_ns: u64,
    /// Median of its own gaps, ns (~3 %; 0 before two emissions).
    pub itl_p50_ns: u64,
    /// p95 of its own gaps, ns.
    pub itl_p95_ns: u64,
    /// Its worst gap so far (exact), ns.
    pub itl_max_ns: u64,
    /// Stall gaps so far.
    pub stalls: u32,
    /// PREEMPTED marks so far.
    pub preemptions: u32,
    /// The cause of its latest stall (1.2), `None` while it has none: e.g.
    /// to log it with the request.
    pub last_stall_cause: Option<StallCause>,
    /// Token deadlines judged so far by the fluidity rule (1.3).
    pub deadlines: u64,
    /// ... of them missed (1.3).
    pub deadlines_missed: u64,
    /// Its first-token deadline as known now, ns (1.3): its own target, else
    /// the class's with the per-token term for the prompt known so far; 0 =
    /// none.
    pub ttft_slo_ns: u64,
    /// Its TPOT budget, ns (1.3): its own, else the class's; 0 = none.
    pub tpot_slo_ns: u64,
}

impl SeqInfo {
    /// Its fluidity so far (1.3; docs/metrics.md "Fluidity"): 1 -
    /// `deadlines_missed / deadlines`, 1 with no deadline (what
    /// `ttft_seq_info.fluidity` says, computed from the two counts).
    pub fn fluidity(&self) -> f64 {
        if self.deadlines == 0 {
            1.0
        } else {
            1.0 - self.deadlines_missed as f64 / self.deadlines as f64
        }
    }
}

// ------------------------------------------------------------- streams

/// One stream (request) from begin to end, owned by one party. Dropping a
/// stream that was not ended records it as CANCELLED: an early return, a
/// `?` or a panic in a handler still closes the stream (and frees its slot).
#[derive(Debug)]
pub struct Stream {
    reg: Registry,
    seq: u64,
    done: bool,
}

impl Stream {
    /// The C handle, for [`Registry::step_emitted`] and [`Registry::seq_stats`].
    pub fn handle(&self) -> Handle {
        Handle(self.seq)
    }

    /// Whether [`Stream::end`] has run (successfully or on an already-ended stream).
    pub fn is_ended(&self) -> bool {
        self.done
    }

    /// `n` tokens became visible to the client now (one emission; n > 1
    /// for a multi-token step). The first emission records TTFT, later ones
    /// one ITL gap each. [`Error::InvalidArgument`] for n = 0,
    /// [`Error::Stale`] once the stream ended.
    pub fn token(&mut self, n: u32) -> Result<()> {
        // SAFETY: valid registry (held by self.reg).
        check(unsafe { ffi::ttft_token_emitted(self.reg.raw(), self.seq, n, 0) })
    }

    /// [`Stream::token`] at `t_ns` (not 0).
    pub fn token_at(&mut self, n: u32, t_ns: u64) -> Result<()> {
        let t = t_arg(t_ns)?;
        // SAFETY: valid registry.
        check(unsafe { ffi::ttft_token_emitted(self.reg.raw(), self.seq, n, t) })
    }

    /// Marks a phase now ([`Phase::SCHEDULED`]: queue time ends, prefill starts).
    pub fn mark(&mut self, phase: Phase) -> Result<()> {
        // SAFETY: valid registry.
        check(unsafe { ffi::ttft_mark(self.reg.raw(), self.seq, phase.0, 0) })
    }

    /// [`Stream::mark`] at `t_ns` (not 0).
    pub fn mark_at(&mut self, phase: Phase, t_ns: u64) -> Result<()> {
        let t = t_arg(t_ns)?;
        // SAFETY: valid registry.
        check(unsafe { ffi::ttft_mark(self.reg.raw(), self.seq, phase.0, t) })
    }

    /// Details learned after begin: the prompt length (0 = leave as is)
    /// and whether its prefix was cached (`None` = leave). Allowed until
    /// the first token ([`Error::Range`] after it).
    pub fn annotate(&mut self, prompt_tokens: u32, prefix_hit: Option<bool>) -> Result<()> {
        // SAFETY: valid registry.
        check(unsafe { ffi::ttft_annotate(self.reg.raw(), self.seq, prompt_tokens, prefix_arg(prefix_hit)) })
    }

    /// Details learned after begin, with the prefix-cache reuse as counts
    /// (1.2): `cached_tokens` of the `prompt_tokens` of the prompt were
    /// served from the prefix cache. Sets the prompt band and the
    /// [`PrefixBand`]: MISS below [`Config::prefix_hit_min_tokens`], PARTIAL
    /// below half the prompt, HIT otherwise. Call it where the server
    /// computes the reuse (when the prompt starts). Allowed until the first
    /// token (a later call overrides an earlier one; [`Error::Range`] after
    /// the first token); [`Error::InvalidArgument`] for `prompt_tokens` 0 or
    /// `cached_tokens > prompt_tokens`; [`Error::Stale`] once ended.
    pub fn annotate_cached(&mut self, prompt_tokens: u32, cached_tokens: u32) -> Result<()> {
        // SAFETY: valid registry.
        check(unsafe { ffi::ttft_annotate_cached(self.reg.raw(), self.seq, prompt_tokens, cached_tokens) })
    }

    /// What the stream looks like right now.
    pub fn stats(&self) -> Result<SeqInfo> {
        self.reg.seq_stats(self.handle())
    }

    /// Ends the stream now with `status`; E2E, TPOT and the rest are
    /// recorded. [`Error::Stale`] when it had already ended elsewhere.
    pub fn end(mut self, status: Status) -> Result<()> {
        self.finish(status, 0)
    }

    /// [`Stream::end`] at `t_ns` (not 0). On a 0 timestamp the stream is
    /// not ended and the error is returned; dropping it then cancels it.
    pub fn end_at(mut self, status: Status, t_ns: u64) -> Result<()> {
        let t = t_arg(t_ns)?;
        self.finish(status, t)
    }

    fn finish(&mut self, status: Status, t: u64) -> Result<()> {
        // SAFETY: valid registry.
        let rc = unsafe { ffi::ttft_stream_end(self.reg.raw(), self.seq, status.0, t) };
        if rc == 0 || Error::from_code(rc) == Some(Error::Stale) {
            self.done = true;
        }
        check(rc)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if !self.done {
            let _ = self.finish(Status::CANCELLED, 0);
        }
    }
}

struct SharedInner {
    reg: Registry,
    seq: u64,
    done: AtomicBool,
}

impl Drop for SharedInner {
    fn drop(&mut self) {
        // Acquire: see an end that another clone made before it was dropped.
        if !self.done.load(Ordering::Acquire) {
            // SAFETY: valid registry.
            unsafe { ffi::ttft_stream_end(self.reg.raw(), self.seq, Status::CANCELLED.0, 0) };
        }
    }
}

/// A stream shared by its clones (e.g. copied into several callbacks): any
/// clone may record or end it, from any thread; when the last clone is
/// dropped an unended stream is recorded as CANCELLED. Cloning costs one
/// atomic increment. Of two racing ends exactly one succeeds.
#[derive(Clone)]
pub struct SharedStream {
    inner: Arc<SharedInner>,
}

impl fmt::Debug for SharedStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedStream").field("seq", &self.inner.seq).finish()
    }
}

impl SharedStream {
    fn from_stream(mut s: Stream) -> SharedStream {
        s.done = true; // ownership moves to the shared block
        SharedStream { inner: Arc::new(SharedInner { reg: s.reg.clone(), seq: s.seq, done: AtomicBool::new(false) }) }
    }

    /// The C handle.
    pub fn handle(&self) -> Handle {
        Handle(self.inner.seq)
    }

    /// `n` tokens now (see [`Stream::token`]).
    pub fn token(&self, n: u32) -> Result<()> {
        // SAFETY: valid registry.
        check(unsafe { ffi::ttft_token_emitted(self.inner.reg.raw(), self.inner.seq, n, 0) })
    }

    /// `n` tokens at `t_ns` (not 0).
    pub fn token_at(&self, n: u32, t_ns: u64) -> Result<()> {
        let t = t_arg(t_ns)?;
        // SAFETY: valid registry.
        check(unsafe { ffi::ttft_token_emitted(self.inner.reg.raw(), self.inner.seq, n, t) })
    }

    /// Marks a phase now.
    pub fn mark(&self, phase: Phase) -> Result<()> {
        // SAFETY: valid registry.
        check(unsafe { ffi::ttft_mark(self.inner.reg.raw(), self.inner.seq, phase.0, 0) })
    }

    /// Details learned after begin (see [`Stream::annotate`]).
    pub fn annotate(&self, prompt_tokens: u32, prefix_hit: Option<bool>) -> Result<()> {
        // SAFETY: valid registry.
        check(unsafe {
            ffi::ttft_annotate(self.inner.reg.raw(), self.inner.seq, prompt_tokens, prefix_arg(prefix_hit))
        })
    }

    /// Prefix-cache reuse as counts (see [`Stream::annotate_cached`]).
    pub fn annotate_cached(&self, prompt_tokens: u32, cached_tokens: u32) -> Result<()> {
        // SAFETY: valid registry.
        check(unsafe { ffi::ttft_annotate_cached(self.inner.reg.raw(), self.inner.seq, prompt_tokens, cached_tokens) })
    }

    /// Marks a phase at `t_ns` (not 0).
    pub fn mark_at(&self, phase: Phase, t_ns: u64) -> Result<()> {
        let t = t_arg(t_ns)?;
        // SAFETY: valid registry.
        check(unsafe { ffi::ttft_mark(self.inner.reg.raw(), self.inner.seq, phase.0, t) })
    }

    /// What the stream looks like right now.
    pub fn stats(&self) -> Result<SeqInfo> {
        self.inner.reg.seq_stats(self.handle())
    }

    /// Ends the stream now. [`Error::Stale`] when a clone ended it first.
    pub fn end(&self, status: Status) -> Result<()> {
        self.end_t(status, 0)
    }

    /// Ends the stream at `t_ns` (not 0).
    pub fn end_at(&self, status: Status, t_ns: u64) -> Result<()> {
        self.end_t(status, t_arg(t_ns)?)
    }

    fn end_t(&self, status: Status, t: u64) -> Result<()> {
        // SAFETY: valid registry.
        let rc = unsafe { ffi::ttft_stream_end(self.inner.reg.raw(), self.inner.seq, status.0, t) };
        if rc == 0 || Error::from_code(rc) == Some(Error::Stale) {
            // Release: the last clone's Drop (acquire) skips its cancel.
            self.inner.done.store(true, Ordering::Release);
        }
        check(rc)
    }

    /// Whether some clone ended the stream.
    pub fn is_ended(&self) -> bool {
        // Acquire: pairs with the release store in end.
        self.inner.done.load(Ordering::Acquire)
    }
}

// ------------------------------------------------------------- snapshot

/// An immutable copy of what a registry recorded: every query is
/// thread-safe (`Send + Sync`) and independent of the registry.
pub struct Snapshot {
    raw: NonNull<ffi::ttft_snapshot>,
}

// SAFETY: a snapshot is immutable; queries from many threads are allowed,
// and the free runs only in Drop (no other reference exists then).
unsafe impl Send for Snapshot {}
// SAFETY: as above.
unsafe impl Sync for Snapshot {}

impl Drop for Snapshot {
    fn drop(&mut self) {
        // SAFETY: owned pointer, freed once.
        unsafe { ffi::ttft_snapshot_free(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot").field("classes", &self.class_count()).finish()
    }
}

fn err_of(err: c_int, fallback: Error) -> Error {
    Error::from_code(err).unwrap_or(fallback)
}

impl Snapshot {
    fn own(p: *mut ffi::ttft_snapshot, e: Error) -> Result<Snapshot> {
        NonNull::new(p).map(|raw| Snapshot { raw }).ok_or(e)
    }

    fn p(&self) -> *const ffi::ttft_snapshot {
        self.raw.as_ptr()
    }

    /// Observations of metric `m` over every class.
    pub fn count(&self, m: Metric) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_count(self.p(), m.0) }
    }

    /// Quantile `q` in [0, 1] of metric `m`, nearest rank, within 0.5 % of
    /// the observation (q = 0 and 1 are the exact min and max); ns (tokens
    /// for OUTPUT_TOKENS); 0 when empty or q is outside [0, 1].
    pub fn quantile(&self, m: Metric, q: f64) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_quantile(self.p(), m.0, q) }
    }

    /// Mean of `m` (0.0 when empty).
    pub fn mean(&self, m: Metric) -> f64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_mean(self.p(), m.0) }
    }

    /// Sum of the observations of `m`, saturating at `u64::MAX` (the library
    /// keeps sums 128 bits wide: [`ClassView::sum_wide`]).
    pub fn sum(&self, m: Metric) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_sum(self.p(), m.0) }
    }

    /// Counter `c` over every class (0 for a counter the library lacks).
    pub fn counter(&self, c: Counter) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_counter(self.p(), c.0) }
    }

    /// Every counter the loaded library has, with its value.
    pub fn counters(&self) -> Vec<(Counter, u64)> {
        Counter::all().into_iter().map(|c| (c, self.counter(c))).collect()
    }

    /// Gauge `g` as of the snapshot.
    pub fn gauge(&self, g: Gauge) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_gauge(self.p(), g.0) }
    }

    /// Number of classes (including "default").
    pub fn class_count(&self) -> usize {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_classes(self.p()) }.max(0) as usize
    }

    /// Every class of the snapshot, "default" (id 0) first.
    pub fn classes(&self) -> Vec<ClassView<'_>> {
        (0..self.class_count() as i32).map(|i| self.class(Class(i))).collect()
    }

    /// The per-class view of class `c` ([`Class::ALL`] = every class).
    pub fn class(&self, c: Class) -> ClassView<'_> {
        ClassView { snap: self, class: c }
    }

    /// The view of the streams that ended with `st`, over every class (what
    /// client benchmarks report is `status(Status::COMPLETED)`).
    pub fn status(&self, st: Status) -> StatusView<'_> {
        StatusView { snap: self, class: Class::ALL, status: st }
    }

    /// SLO attainment over every class (good / ended), `None` when nothing ended.
    pub fn attainment(&self) -> Option<f64> {
        self.class(Class::ALL).attainment()
    }

    /// Observations under a split: TTFT by [`PrefixBand`] or prompt band,
    /// PREFILL by [`PrefixBand`] ([`Split::PREFILL_BY_PREFIX`]).
    pub fn split_count(&self, split: Split, index: u32) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_split_count(self.p(), split.0, index) }
    }

    /// Quantile `q` under a split (see [`Snapshot::split_count`]).
    pub fn split_quantile(&self, split: Split, index: u32, q: f64) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_split_quantile(self.p(), split.0, index, q) }
    }

    /// Stalls of every class attributed to `cause` (1.2); over the causes
    /// they add up to [`Counter::STALLS`]. Snapshots decoded from a 1.0/1.1
    /// encoding have every stall under [`StallCause::UNKNOWN`].
    pub fn stalls_by_cause(&self, cause: StallCause) -> u64 {
        self.class(Class::ALL).stalls_by_cause(cause)
    }

    /// The stalled time of those stalls, ns: the sum of their whole gaps
    /// (`ttft_snapshot_stall_seconds_by_cause`, which despite its name
    /// returns ns; the exported `llm_stall_seconds_total` is this / 1e9).
    pub fn stalled_ns_by_cause(&self, cause: StallCause) -> u64 {
        self.class(Class::ALL).stalled_ns_by_cause(cause)
    }

    /// Every cause the loaded library has, with its stall count and
    /// stalled ns, over every class.
    pub fn stall_causes(&self) -> Vec<(StallCause, u64, u64)> {
        self.class(Class::ALL).stall_causes()
    }

    /// The k slowest requests of every class by `by` (1.2), the slowest
    /// first (of equal values the earlier end first); see
    /// [`ClassView::slowest`].
    pub fn slowest(&self, by: SlowestBy) -> Vec<SlowRequest> {
        self.class(Class::ALL).slowest(by)
    }

    /// Engine steps recorded ([`Registry::engine_step`]) that carried
    /// prefill (`prefill` true) or did not; registry-wide (1.2).
    pub fn engine_step_count(&self, prefill: bool) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_engine_step_count(self.p(), prefill as c_int) }
    }

    /// Quantile `q` in [0, 1] of those steps' durations, ns (nearest rank,
    /// within 0.5 %); 0 when there are none or q is outside [0, 1]. The p99
    /// with prefill against without is what a prompt joining the batch
    /// costs the decodes.
    pub fn engine_step_quantile(&self, prefill: bool, q: f64) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_engine_step_quantile(self.p(), prefill as c_int, q) }
    }

    /// The sum of those steps' durations, ns.
    pub fn engine_step_sum(&self, prefill: bool) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_engine_step_sum(self.p(), prefill as c_int) }
    }

    /// The prompt-length bands as `[lo, hi)` in tokens (the last `hi` is `u32::MAX`).
    pub fn bands(&self) -> Vec<(u32, u32)> {
        // SAFETY: valid snapshot.
        let n = unsafe { ffi::ttft_snapshot_bands(self.p()) };
        (0..n)
            .filter_map(|i| {
                let (mut lo, mut hi) = (0u32, 0u32);
                // SAFETY: valid snapshot and out pointers.
                let rc = unsafe { ffi::ttft_snapshot_band(self.p(), i, &mut lo, &mut hi) };
                (rc == 0).then_some((lo, hi))
            })
            .collect()
    }

    /// The interval the snapshot covers, `(start_ns, end_ns)` on the monotonic clock.
    pub fn interval(&self) -> (u64, u64) {
        let (mut a, mut b) = (0u64, 0u64);
        // SAFETY: valid snapshot and out pointers.
        unsafe { ffi::ttft_snapshot_interval(self.p(), &mut a, &mut b) };
        (a, b)
    }

    /// A registry label: "start_point", "token_point", "model" or "namespace".
    pub fn label(&self, key: &str) -> Option<String> {
        let k = cstring(key).ok()?;
        // SAFETY: valid snapshot and key; the string lives as long as self.
        let p = unsafe { ffi::ttft_snapshot_label(self.p(), k.as_ptr()) };
        if p.is_null() {
            None
        } else {
            // SAFETY: non-NULL, NUL-terminated, alive while self is.
            Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        }
    }

    /// The snapshot rendered in `f`, as bytes (any format, including the
    /// binary [`Format::PROMETHEUS_PROTOBUF`]).
    pub fn format_bytes(&self, f: Format) -> Result<Vec<u8>> {
        // SAFETY: valid snapshot; cap 0 with a NULL buffer sizes the output.
        let need = check_long(unsafe { ffi::ttft_snapshot_format(self.p(), f.0, ptr::null_mut(), 0) })?;
        let mut buf = vec![0u8; need + 1];
        // SAFETY: buf holds need + 1 bytes.
        let got = check_long(unsafe { ffi::ttft_snapshot_format(self.p(), f.0, buf.as_mut_ptr().cast(), buf.len()) })?;
        if got > need {
            return Err(Error::Range); // an immutable snapshot renders the same twice
        }
        buf.truncate(got);
        Ok(buf)
    }

    /// The snapshot rendered in a text format (text, JSON, Prometheus,
    /// OpenMetrics); [`Error::InvalidArgument`] for the binary protobuf format.
    pub fn format(&self, f: Format) -> Result<String> {
        let b = self.format_bytes(f)?;
        String::from_utf8(b).map_err(|_| Error::InvalidArgument)
    }

    /// The compact, versioned, checksummed binary encoding (docs/encoding.md).
    pub fn encode(&self) -> Result<Vec<u8>> {
        // SAFETY: valid snapshot; sizing call.
        let need = check_long(unsafe { ffi::ttft_snapshot_encode(self.p(), ptr::null_mut(), 0) })?;
        let mut buf = vec![0u8; need];
        // SAFETY: buf holds need bytes.
        let got = check_long(unsafe { ffi::ttft_snapshot_encode(self.p(), buf.as_mut_ptr().cast(), need) })?;
        if got != need {
            return Err(Error::Range);
        }
        Ok(buf)
    }

    /// The encoding as one line of base64.
    pub fn encode_base64(&self) -> Result<String> {
        // SAFETY: valid snapshot; sizing call.
        let need = check_long(unsafe { ffi::ttft_snapshot_encode_base64(self.p(), ptr::null_mut(), 0) })?;
        let mut buf = vec![0u8; need + 1];
        // SAFETY: buf holds need + 1 bytes.
        let got =
            check_long(unsafe { ffi::ttft_snapshot_encode_base64(self.p(), buf.as_mut_ptr().cast(), buf.len()) })?;
        if got != need {
            return Err(Error::Range);
        }
        buf.truncate(need);
        String::from_utf8(buf).map_err(|_| Error::Corrupt)
    }

    /// Decodes untrusted bytes from [`Snapshot::encode`]; [`Error::Corrupt`]
    /// for anything malformed.
    pub fn decode(bytes: &[u8]) -> Result<Snapshot> {
        let mut err: c_int = 0;
        // SAFETY: bytes is valid for its length; err is an out pointer.
        let p = unsafe { ffi::ttft_snapshot_decode(bytes.as_ptr().cast(), bytes.len(), &mut err) };
        Snapshot::own(p, err_of(err, Error::Corrupt))
    }

    /// Decodes the base64 form.
    pub fn decode_base64(text: &str) -> Result<Snapshot> {
        let mut err: c_int = 0;
        // SAFETY: text is valid for its length (no NUL needed: len is given).
        let p = unsafe { ffi::ttft_snapshot_decode_base64(text.as_ptr().cast(), text.len(), &mut err) };
        Snapshot::own(p, err_of(err, Error::Corrupt))
    }

    /// A snapshot holding the observations of `self` and `other` (classes
    /// matched by name): fleet percentiles from merged counts.
    pub fn merge(&self, other: &Snapshot) -> Result<Snapshot> {
        let mut err: c_int = 0;
        // SAFETY: two valid snapshots.
        let p = unsafe { ffi::ttft_snapshot_merge(self.p(), other.p(), &mut err) };
        Snapshot::own(p, err_of(err, Error::NoMemory))
    }

    /// What happened between `older` and `self` (two snapshots of one
    /// registry, `self` taken later); [`Error::InvalidArgument`] otherwise.
    pub fn delta(&self, older: &Snapshot) -> Result<Snapshot> {
        let mut err: c_int = 0;
        // SAFETY: two valid snapshots.
        let p = unsafe { ffi::ttft_snapshot_delta(self.p(), older.p(), &mut err) };
        Snapshot::own(p, err_of(err, Error::NoMemory))
    }
}

/// Queries of one class of a [`Snapshot`] (or [`Class::ALL`]).
#[derive(Debug, Clone, Copy)]
pub struct ClassView<'s> {
    snap: &'s Snapshot,
    class: Class,
}

impl<'s> ClassView<'s> {
    /// The class.
    pub fn id(&self) -> Class {
        self.class
    }
    /// The class's name (`None` for [`Class::ALL`] or an unknown id).
    pub fn name(&self) -> Option<&'s str> {
        // SAFETY: valid snapshot; the string lives as long as it.
        let p = unsafe { ffi::ttft_snapshot_class_name(self.snap.p(), self.class.0) };
        if p.is_null() {
            None
        } else {
            // SAFETY: non-NULL, NUL-terminated, alive for 's.
            unsafe { CStr::from_ptr(p) }.to_str().ok()
        }
    }
    /// The class's SLO budgets; [`Error::InvalidArgument`] for an unknown class.
    pub fn slo(&self) -> Result<Slo> {
        let mut s = ffi::ttft_slo { struct_size: std::mem::size_of::<ffi::ttft_slo>(), ..Default::default() };
        // SAFETY: valid snapshot; s is complete and sized.
        check(unsafe { ffi::ttft_snapshot_class_slo(self.snap.p(), self.class.0, &mut s) })?;
        Ok(Slo {
            ttft_ns: s.ttft_ns,
            tpot_ns: s.tpot_ns,
            e2e_ns: s.e2e_ns,
            stall_threshold_ns: s.stall_threshold_ns,
            ttft_ns_per_prompt_token: s.ttft_ns_per_prompt_token,
            token_deadline_ns: s.token_deadline_ns,
            fluid_min: s.fluid_min,
        })
    }
    /// Observations of `m` in the class.
    pub fn count(&self, m: Metric) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_class_count(self.snap.p(), self.class.0, m.0) }
    }
    /// Quantile `q` of `m` in the class.
    pub fn quantile(&self, m: Metric, q: f64) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_class_quantile(self.snap.p(), self.class.0, m.0, q) }
    }
    /// Mean of `m` in the class.
    pub fn mean(&self, m: Metric) -> f64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_class_mean(self.snap.p(), self.class.0, m.0) }
    }
    /// Sum of `m` in the class.
    pub fn sum(&self, m: Metric) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_class_sum(self.snap.p(), self.class.0, m.0) }
    }
    /// The whole sum of `m` in the class, 128 bits wide (never wraps;
    /// [`ClassView::sum`] saturates at `u64::MAX`). [`Error::InvalidArgument`]
    /// for an unknown class or metric.
    pub fn sum_wide(&self, m: Metric) -> Result<u128> {
        let (mut hi, mut lo) = (0u64, 0u64);
        // SAFETY: valid snapshot and out pointers.
        check(unsafe { ffi::ttft_snapshot_class_sum_wide(self.snap.p(), self.class.0, m.0, &mut hi, &mut lo) })?;
        Ok((u128::from(hi) << 64) | u128::from(lo))
    }
    /// Counter `c` of the class.
    pub fn counter(&self, c: Counter) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_class_counter(self.snap.p(), self.class.0, c.0) }
    }
    /// SLO attainment (good / ended), `None` when nothing ended.
    pub fn attainment(&self) -> Option<f64> {
        // SAFETY: valid snapshot.
        let a = unsafe { ffi::ttft_snapshot_attainment(self.snap.p(), self.class.0) };
        (a >= 0.0).then_some(a)
    }
    /// The k slowest requests of the class by `by` (1.2), recorded when
    /// each stream ended, the slowest first: at most
    /// [`Config::slowest_k`]. A snapshot's lists cover its interval; a
    /// merge keeps the k slowest of the union, a delta the requests of the
    /// newer lists that ended in the window. Streams in flight are not listed.
    pub fn slowest(&self, by: SlowestBy) -> Vec<SlowRequest> {
        // SAFETY: valid snapshot.
        let n = unsafe { ffi::ttft_snapshot_slowest_count(self.snap.p(), self.class.0, by.0) };
        let mut out = Vec::with_capacity(n as usize);
        for i in 0..n {
            // SAFETY: plain data; zero is a valid value of every field.
            let mut c: ffi::ttft_slow_request = unsafe { std::mem::zeroed() };
            c.struct_size = std::mem::size_of::<ffi::ttft_slow_request>();
            // SAFETY: valid snapshot; c is a complete, sized mirror.
            if unsafe { ffi::ttft_snapshot_slowest(self.snap.p(), self.class.0, by.0, i, &mut c) } != 0 {
                break;
            }
            out.push(SlowRequest {
                value_ns: c.value_ns,
                ttft_ns: c.ttft_ns,
                max_gap_ns: c.max_gap_ns,
                t_begin_ns: c.t_begin_ns,
                t_end_ns: c.t_end_ns,
                t_end_unix_ns: c.t_end_unix_ns,
                tokens: c.tokens,
                class: Class(c.class_id),
                status: Status(c.status),
                cause: StallCause(c.cause),
                request_id: c_chars(&c.request_id),
                trace_id: c_chars(&c.trace_id),
                deadlines: c.deadlines,
                deadlines_missed: c.deadlines_missed,
                token_deadline_ns: c.token_deadline_ns,
                ttft_slo_ns: c.ttft_slo_ns,
                tpot_slo_ns: c.tpot_slo_ns,
            });
        }
        out
    }
    /// Stalls of the class attributed to `cause` (1.2).
    pub fn stalls_by_cause(&self, cause: StallCause) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_stalls_by_cause(self.snap.p(), self.class.0, cause.0) }
    }
    /// The stalled time of those stalls, ns (the whole gap of each).
    #[doc(alias = "ttft_snapshot_stall_seconds_by_cause")]
    pub fn stalled_ns_by_cause(&self, cause: StallCause) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_stall_seconds_by_cause(self.snap.p(), self.class.0, cause.0) }
    }
    /// Every cause the loaded library has, with its stall count and stalled ns.
    pub fn stall_causes(&self) -> Vec<(StallCause, u64, u64)> {
        StallCause::all().into_iter().map(|c| (c, self.stalls_by_cause(c), self.stalled_ns_by_cause(c))).collect()
    }
    /// The streams of this class that ended with `st`.
    pub fn status(&self, st: Status) -> StatusView<'s> {
        StatusView { snap: self.snap, class: self.class, status: st }
    }
}

/// TTFT, TPOT, E2E and OUTPUT_TOKENS of the streams that ended with one
/// status (recorded at stream end), in one class or all.
#[derive(Debug, Clone, Copy)]
pub struct StatusView<'s> {
    snap: &'s Snapshot,
    class: Class,
    status: Status,
}

impl StatusView<'_> {
    /// Observations of `m` (TTFT, TPOT, E2E or OUTPUT_TOKENS; 0 for others).
    pub fn count(&self, m: Metric) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_status_count(self.snap.p(), self.class.0, self.status.0, m.0) }
    }
    /// Quantile `q` of `m`.
    pub fn quantile(&self, m: Metric, q: f64) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_status_quantile(self.snap.p(), self.class.0, self.status.0, m.0, q) }
    }
    /// Sum of `m` (ns; tokens for OUTPUT_TOKENS), exact below 2^64 and
    /// `u64::MAX` above (the library keeps it 128 bits wide); 0 for other
    /// metrics or an empty view (1.2).
    pub fn sum(&self, m: Metric) -> u64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_status_sum(self.snap.p(), self.class.0, self.status.0, m.0) }
    }
    /// Mean of `m`: the whole sum over the count (exact to double
    /// rounding); with [`Status::COMPLETED`] and [`Metric::TTFT`] the
    /// "mean TTFT" of completed requests that client benchmarks print.
    /// 0.0 for other metrics or an empty view (1.2).
    pub fn mean(&self, m: Metric) -> f64 {
        // SAFETY: valid snapshot.
        unsafe { ffi::ttft_snapshot_status_mean(self.snap.p(), self.class.0, self.status.0, m.0) }
    }
}

// ------------------------------------------------------------- http

/// The `/metrics` endpoint of a registry ([`Registry::serve`]): one
/// background thread; dropping the server stops it and joins the thread.
pub struct HttpServer {
    raw: NonNull<ffi::ttft_http>,
    _reg: Registry,
}

// SAFETY: ttft_http_port is thread-safe; ttft_http_stop runs once, in Drop.
unsafe impl Send for HttpServer {}
// SAFETY: as above.
unsafe impl Sync for HttpServer {}

impl fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpServer").field("port", &self.port()).finish()
    }
}

impl HttpServer {
    /// The TCP port the server listens on.
    pub fn port(&self) -> u16 {
        // SAFETY: valid server.
        let p = unsafe { ffi::ttft_http_port(self.raw.as_ptr()) };
        u16::try_from(p).unwrap_or(0)
    }
    /// Stops the server (the same as dropping it).
    pub fn stop(self) {}
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        // SAFETY: once per server; the registry (held in _reg) outlives it.
        unsafe { ffi::ttft_http_stop(self.raw.as_ptr()) }
    }
}

// ------------------------------------------------------------- otlp

/// What [`Registry::otlp_start`] pushes where (`ttft_otlp_config`, 1.3).
/// Every field left unset takes the `OTEL_*` environment's value, else the
/// library's default (docs/opentelemetry.md).
#[derive(Debug, Clone, Default)]
pub struct OtlpConfig {
    endpoint: Option<String>,
    metrics_endpoint: Option<String>,
    headers: Option<String>,
    service_name: Option<String>,
    resource_attributes: Option<String>,
    interval: Option<Duration>,
    timeout: Option<Duration>,
    temporality: Option<Temporality>,
}

impl OtlpConfig {
    /// Everything from the environment.
    pub fn new() -> OtlpConfig {
        OtlpConfig::default()
    }
    /// `"http://host:port"`; `/v1/metrics` is appended
    /// (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fn endpoint(mut self, url: &str) -> Self {
        self.endpoint = Some(url.to_owned());
        self
    }
    /// The whole URL, used as is (`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`).
    pub fn metrics_endpoint(mut self, url: &str) -> Self {
        self.metrics_endpoint = Some(url.to_owned());
        self
    }
    /// Extra request headers, `"k1=v1,k2=v2"`, values percent-decoded
    /// (`OTEL_EXPORTER_OTLP_HEADERS`).
    pub fn headers(mut self, h: &str) -> Self {
        self.headers = Some(h.to_owned());
        self
    }
    /// The resource's `service.name` (`OTEL_SERVICE_NAME`).
    pub fn service_name(mut self, n: &str) -> Self {
        self.service_name = Some(n.to_owned());
        self
    }
    /// More resource attributes, `"k1=v1,k2=v2"` (`OTEL_RESOURCE_ATTRIBUTES`).
    pub fn resource_attributes(mut self, a: &str) -> Self {
        self.resource_attributes = Some(a.to_owned());
        self
    }
    /// Between pushes, in whole milliseconds (`OTEL_METRIC_EXPORT_INTERVAL`).
    pub fn interval(mut self, d: Duration) -> Self {
        self.interval = Some(d);
        self
    }
    /// One push, retries included (`OTEL_EXPORTER_OTLP_TIMEOUT`).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }
    /// Cumulative (the default), delta or lowmemory
    /// (`OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`).
    pub fn temporality(mut self, t: Temporality) -> Self {
        self.temporality = Some(t);
        self
    }
}

/// What a pusher has done so far ([`OtlpPusher::stats`], `ttft_otlp_info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpStats {
    /// Pushes finished: accepted + failed + dropped.
    pub pushes: u64,
    /// Pushes the collector answered 2xx.
    pub accepted: u64,
    /// Pushes whose retries ran out (the next push carries their data).
    pub failed: u64,
    /// Batches the collector refused for good (a non-retryable status).
    pub dropped: u64,
    /// POSTs repeated after 429/502/503/504 or a connection failure.
    pub retries: u64,
    /// Request bodies sent, retries included.
    pub bytes_sent: u64,
    /// The last POST's HTTP status (0: none yet, or no answer).
    pub last_status: i32,
    /// The last failed POST in one line ("HTTP 503", "connect: ..."), or "".
    pub last_error: String,
}

/// A running OTLP pusher ([`Registry::otlp_start`]): one background thread.
/// Dropping it makes a last push (bounded by the timeout), joins the
/// thread and frees it.
pub struct OtlpPusher {
    raw: NonNull<ffi::ttft_otlp>,
    _reg: Registry,
}

// SAFETY: ttft_otlp_flush and ttft_otlp_stats are thread-safe;
// ttft_otlp_stop runs once, in Drop, when no other call can race it.
unsafe impl Send for OtlpPusher {}
// SAFETY: as above.
unsafe impl Sync for OtlpPusher {}

impl fmt::Debug for OtlpPusher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtlpPusher").field("raw", &self.raw).finish()
    }
}

impl OtlpPusher {
    /// Pushes now and waits for the outcome (`ttft_otlp_flush`):
    /// [`Error::Io`] when the retries ran out or the collector refused the
    /// batch.
    pub fn flush(&self) -> Result<()> {
        // SAFETY: valid pusher; flush is thread-safe.
        check(unsafe { ffi::ttft_otlp_flush(self.raw.as_ptr()) })
    }

    /// The pusher's counts (`ttft_otlp_stats`).
    pub fn stats(&self) -> Result<OtlpStats> {
        // SAFETY: plain data.
        let mut i: ffi::ttft_otlp_info = unsafe { std::mem::zeroed() };
        i.struct_size = std::mem::size_of::<ffi::ttft_otlp_info>();
        // SAFETY: valid pusher and out pointer.
        check(unsafe { ffi::ttft_otlp_stats(self.raw.as_ptr(), &mut i) })?;
        // SAFETY: the library NUL-terminates last_error.
        let last_error = unsafe { CStr::from_ptr(i.last_error.as_ptr()) }.to_string_lossy().into_owned();
        Ok(OtlpStats {
            pushes: i.pushes,
            accepted: i.accepted,
            failed: i.failed,
            dropped: i.dropped,
            retries: i.retries,
            bytes_sent: i.bytes_sent,
            last_status: i.last_status,
            last_error,
        })
    }

    /// Makes a last push and stops (the same as dropping it).
    pub fn stop(self) {}
}

impl Drop for OtlpPusher {
    fn drop(&mut self) {
        // SAFETY: once per pusher; the registry (held in _reg) outlives it.
        unsafe { ffi::ttft_otlp_stop(self.raw.as_ptr()) }
    }
}

// ------------------------------------------------------------- gather

/// Every process that published into a directory ([`Config::shared_dir`]),
/// merged (`ttft_gather_open` / `ttft_gather_take` / `ttft_gather_close`;
/// 1.3, docs/multiprocess.md). Dropping it closes it.
pub struct Gather {
    raw: NonNull<ffi::ttft_gather>,
}

// SAFETY: ttft_gather_take is thread-safe (concurrent takes share one
// merge); ttft_gather_close runs once, in Drop, when no take can race it.
unsafe impl Send for Gather {}
// SAFETY: as above.
unsafe impl Sync for Gather {}

impl fmt::Debug for Gather {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gather").field("raw", &self.raw).finish()
    }
}

impl Gather {
    /// Opens directory `dir`; `by_process` keeps processes apart in the
    /// expositions (a `process` label on every series; the snapshot's own
    /// accessors read the merged view). [`Error::Gather`] with the
    /// library's reason and errno for a missing directory, one open to
    /// others or of another user, or a network file system.
    pub fn open(dir: &str, by_process: bool) -> Result<Gather> {
        let d = nul_free("dir", dir)?;
        let flags = if by_process { ffi::TTFT_GATHER_BY_PROCESS } else { 0 };
        let mut msg = [0 as c_char; 512];
        // SAFETY: valid NUL-terminated dir; msg has msg.len() bytes.
        let p = unsafe { ffi::ttft_gather_open_msg(d.as_ptr(), flags, msg.as_mut_ptr(), msg.len()) };
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        match NonNull::new(p) {
            Some(raw) => Ok(Gather { raw }),
            None => {
                // SAFETY: the library NUL-terminates msg (snprintf rules).
                let why = unsafe { std::ffi::CStr::from_ptr(msg.as_ptr()) }.to_string_lossy().into_owned();
                Err(Error::Gather { errno, reason: if why.is_empty() { dir.to_owned() } else { why } })
            }
        }
    }

    /// One merged snapshot of every process of the directory: live ones'
    /// latest segments and the archive of those that exited.
    pub fn take(&self) -> Result<Snapshot> {
        // SAFETY: valid gather; takes are thread-safe.
        let p = unsafe { ffi::ttft_gather_take(self.raw.as_ptr()) };
        let nomem = std::io::Error::last_os_error().raw_os_error() == Some(12);
        Snapshot::own(p, if nomem { Error::NoMemory } else { Error::Io })
    }

    /// Closes the gather (the same as dropping it).
    pub fn close(self) {}
}

impl Drop for Gather {
    fn drop(&mut self) {
        // SAFETY: once per gather; &mut self: no take is running.
        unsafe { ffi::ttft_gather_close(self.raw.as_ptr()) }
    }
}

#[cfg(test)]
mod abi_layout;
