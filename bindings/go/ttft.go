// Package ttft is the Go binding of libttft: what a streaming LLM user
// feels — time to first token (TTFT), time per output token (TPOT),
// inter-token latency, stalls and SLO attainment — as honest percentiles.
//
// It wraps the C ABI of include/ttft.h with cgo; the header is the API
// reference (units, edge cases and thread-safety of every call). The
// library is found where the C compiler and linker look by default plus
// CGO_CFLAGS and CGO_LDFLAGS, or with pkg-config under -tags
// ttft_pkgconfig (README.md).
//
// A Registry records streams. Begin returns a *Stream; call Token as
// tokens reach the client and End once. A Stream that becomes unreachable
// without End is ended as cancelled by a finalizer (a safety net, run at
// the garbage collector's pace: call End). A Snapshot is an immutable copy
// to query, format (text, JSON, Prometheus, OpenMetrics, protobuf) or
// encode. Errors are Errno values comparable with errors.Is against the
// sentinels ErrInvalid, ErrStale, ErrFull, ...
//
// An engine loop (1.2) calls Registry.EngineStep once per iteration when it
// ends, before StepEmitted records the tokens it produced; every stall then
// gets a StallCause (Snapshot.StallCauses), and the engine-step durations
// with and without prefill show what a prompt joining the batch costs the
// decodes. Stream.AnnotateCached records prefix-cache reuse as token
// counts (PrefixBand). A configuration the library refuses is a
// *ConfigError carrying its one-line reason (CheckConfig asks without
// creating a registry).
//
// Times are uint64 nanoseconds on CLOCK_MONOTONIC (NowNs). Methods without
// a timestamp read the library's clock; the ...At variants take one and
// refuse 0 (which means "now" in C) with ErrInvalid.
//
// Goroutines migrate between OS threads and each OS thread that records
// takes one of the registry's private shards (Config.MaxThreads, default
// 8; further threads share one, slower but exact): raise it to about
// GOMAXPROCS plus a few on a busy server.
package ttft

/*
#include <stdlib.h>
#include <string.h>
#include "ttft_cgo.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// ABIMajor is the TTFT_VERSION_MAJOR these bindings were written for; New
// refuses a library of another major version with ErrNotSupported.
const ABIMajor = 1

// Handle slices are passed to ttft_step_emitted as ttft_seq arrays: both
// must be 8 bytes (a compile error otherwise).
var _ [8 - unsafe.Sizeof(C.ttft_seq(0))]byte
var _ [unsafe.Sizeof(C.ttft_seq(0)) - 8]byte

// ---------------------------------------------------------------- errors

// Errno is a libttft error code (a negative TTFT_E* value). Its Error text
// is the library's ttft_strerror; compare with errors.Is(err, ErrStale).
type Errno int32

// The C error codes, as errors.Is-able sentinels.
const (
	ErrInvalid      Errno = -1 // TTFT_EINVAL: invalid argument
	ErrStale        Errno = -2 // TTFT_ESTALE: stale or unknown handle (the stream already ended), or no such class
	ErrFull         Errno = -3 // TTFT_EFULL: no free sequence slot (a refused begin) or class slot
	ErrNoMem        Errno = -4 // TTFT_ENOMEM: out of memory
	ErrRange        Errno = -5 // TTFT_ERANGE: value out of range (e.g. annotate after the first token)
	ErrCorrupt      Errno = -6 // TTFT_ECORRUPT: malformed, truncated or corrupted encoding
	ErrExist        Errno = -7 // TTFT_EEXIST: the class name already exists
	ErrIO           Errno = -8 // TTFT_EIO: socket or I/O error (the HTTP endpoint)
	ErrNotSupported Errno = -9 // TTFT_ENOTSUP: not supported by this build or library
	// ErrClock (TTFT_ECLOCK, 1.3): a begin given a wall-clock timestamp
	// (time.Now().UnixNano(), CLOCK_REALTIME) where the library's monotonic
	// clock is expected (CLOCK_MONOTONIC: NowNs, or the untimed calls);
	// counted in CounterClockRefused.
	ErrClock Errno = -10
)

// ErrClosed is returned by calls on a Registry after Close.
var ErrClosed = errors.New("ttft: registry closed")

// Error is ttft_strerror's text.
func (e Errno) Error() string { return C.GoString(C.ttft_strerror(C.int(e))) }

// Name is the symbolic C name, e.g. "TTFT_ESTALE".
func (e Errno) Name() string { return C.GoString(C.ttft_err_name(C.int(e))) }

func check(rc C.int) error {
	if rc >= 0 {
		return nil
	}
	return Errno(rc)
}

func checkLong(rc C.long) (int, error) {
	if rc < 0 {
		return 0, Errno(rc)
	}
	return int(rc), nil
}

func tArg(t uint64) (C.uint64_t, error) {
	if t == 0 {
		return 0, ErrInvalid // 0 is TTFT_NOW in C, never a time here
	}
	return C.uint64_t(t), nil
}

// ---------------------------------------------------------------- enums

// Metric is a latency or size distribution (ttft_metric). Like every enum
// here it is an integer type, not a closed set: newer libraries add values.
type Metric int32

// Metrics.
const (
	MetricTTFT          Metric = 0  // time to first token, ns
	MetricTPOT          Metric = 1  // time per output token, ns (streams with N >= 2)
	MetricITL           Metric = 2  // gap between emissions, ns
	MetricE2E           Metric = 3  // end to end, ns
	MetricQueue         Metric = 4  // begin to SCHEDULED, ns
	MetricPrefill       Metric = 5  // SCHEDULED to first token, ns
	MetricDecode        Metric = 6  // first to last token, ns
	MetricOutputTokens  Metric = 7  // tokens per ended stream
	MetricSeqITLP95     Metric = 8  // each sequence's own p95 gap, ns
	MetricSeqITLMax     Metric = 9  // each sequence's worst gap, ns
	MetricAbandonedWait Metric = 10 // wait of streams cancelled before their first token, ns
	MetricITLPerToken   Metric = 11 // token-weighted ITL, ns
)

// Name is the library's lower-case name ("ttft", ...), "" if unknown to it.
func (m Metric) Name() string { return goString(C.ttft_metric_name(C.ttft_metric(m))) }

// Counter is an event counter (ttft_counter).
type Counter int32

// Counters. Counters() reads how many the loaded library has from the
// library itself, so counters a newer library appends are included.
const (
	CounterBegun        Counter = 0  // accepted begins
	CounterCompleted    Counter = 1  // streams ended completed
	CounterCancelled    Counter = 2  // streams ended cancelled
	CounterErrors       Counter = 3  // streams ended with an error
	CounterDropped      Counter = 4  // begins refused (no free slot)
	CounterTokens       Counter = 5  // output tokens accepted
	CounterStalls       Counter = 6  // ITL gaps above the stall budget
	CounterStalledSeqs  Counter = 7  // sequences with at least one stall
	CounterAbandoned    Counter = 8  // cancelled with no token
	CounterSLOMet       Counter = 9  // ended streams that met their SLO
	CounterClockClamped Counter = 10 // timestamps earlier than the previous event
	CounterPreemptions  Counter = 11 // PREEMPTED marks
	CounterNoTPOT       Counter = 12 // ended streams with fewer than two tokens
	CounterStale        Counter = 13 // hook calls rejected with ErrStale
	// CounterSLOJudged counts the ended streams the SLO judges: every
	// completed and failed stream, and a cancelled one only when it had
	// already missed a budget. Attainment = CounterSLOMet / CounterSLOJudged.
	CounterSLOJudged Counter = 14
	// CounterTraceIDInvalid counts the begins whose trace id was ignored (not
	// 32 lowercase hex digits, or all zero); the request is measured as usual.
	CounterTraceIDInvalid Counter = 15
	// CounterBarrierFallbacks counts slot-reclaim rounds whose barrier was
	// made without membarrier(2) because it failed at run time (fences,
	// the recording threads' acknowledgements, /proc; no signal since 1.3).
	CounterBarrierFallbacks Counter = 16
	// CounterClockRefused counts begins refused with ErrClock: a wall-clock
	// timestamp passed for a monotonic one (1.3). Should stay 0.
	CounterClockRefused Counter = 17
	// CounterPublishFailed counts publishes into the shared directory that
	// failed (disk full, read-only, removed directory); recording goes on (1.3).
	CounterPublishFailed Counter = 18
	// CounterSegmentsSkipped: in a gathered snapshot, segments the gatherer
	// skipped (truncated, corrupt, hostile, future version, another user's) (1.3).
	CounterSegmentsSkipped Counter = 19
	// CounterProcessesExited: in a gathered snapshot, processes whose last
	// published state was folded into the directory's archive (1.3).
	CounterProcessesExited Counter = 20
	// CounterTokenDeadlines counts the token deadlines judged so far by the
	// fluidity rule (1.3, SPEC 10.2; docs/metrics.md "Fluidity"), as they
	// happen: 1 - CounterTokenDeadlinesMissed/CounterTokenDeadlines is the
	// live fluidity of the class's tokens.
	CounterTokenDeadlines Counter = 21
	// CounterTokenDeadlinesMissed counts those of them missed (1.3).
	CounterTokenDeadlinesMissed Counter = 22
	// CounterFluid counts the ended streams that were fluid: COMPLETED with
	// fluidity >= the class's FluidMin (1.3).
	CounterFluid Counter = 23
	// CounterFluidJudged counts the ended streams judged for fluidity: those
	// with a token deadline that ended COMPLETED or with an error, or were
	// cancelled or abandoned after missing a deadline (1.3). Fluid
	// attainment = CounterFluid / CounterFluidJudged.
	CounterFluidJudged Counter = 24
)

// Name is the library's lower-case name ("begun", ...), "" if unknown to it.
func (c Counter) Name() string { return goString(C.ttft_counter_name(C.ttft_counter(c))) }

// AllCounters lists every counter the loaded library has (asked from it).
func AllCounters() []Counter {
	var out []Counter
	for c := Counter(0); c.Name() != ""; c++ {
		out = append(out, c)
	}
	return out
}

// AllMetrics lists every metric the loaded library has (asked from it).
func AllMetrics() []Metric {
	var out []Metric
	for m := Metric(0); m.Name() != ""; m++ {
		out = append(out, m)
	}
	return out
}

// Status is how a stream ended (ttft_status).
type Status int32

// Statuses.
const (
	Completed Status = 0 // finished normally
	Cancelled Status = 1 // the client went away
	Failed    Status = 2 // the server failed the request (TTFT_ERROR)
)

// Name is the library's name ("completed", "cancelled", "error").
func (s Status) Name() string { return goString(C.ttft_status_name(C.ttft_status(s))) }

// Format is an output format of Snapshot.Format (ttft_format).
type Format int32

// Formats.
const (
	FormatText               Format = 0 // a table for a terminal
	FormatJSON               Format = 1 // docs/json.md
	FormatPrometheus         Format = 2 // text exposition 0.0.4
	FormatOpenMetrics        Format = 3 // OpenMetrics 1.0 text
	FormatPrometheusProtobuf Format = 4 // length-delimited protobuf (binary)
	FormatOTLPProtobuf       Format = 5 // OTLP ExportMetricsServiceRequest (binary)
)

// Name is the library's name ("text", "json", ...).
func (f Format) Name() string { return goString(C.ttft_format_name(C.ttft_format(f))) }

// Phase is a phase mark (ttft_phase).
type Phase int32

// Phases.
const (
	PhaseScheduled Phase = 0 // first admission by the scheduler: prefill starts
	PhasePreempted Phase = 1 // evicted from the batch (counted); a stall it opens is StallPreempted
	PhaseResumed   Phase = 2 // back in the batch after PhasePreempted (1.2; not counted)
)

// Gauge is a value read at snapshot time (ttft_gauge).
type Gauge int32

// Gauges.
const (
	GaugeInflight   Gauge = 0 // streams begun and not ended
	GaugeLiveStalls Gauge = 1 // in-flight streams stalled right now
	GaugeMemory     Gauge = 2 // bytes the registry holds
	GaugeCoarse     Gauge = 3 // observations binned by power of two only (memory limit)
	GaugeProcesses  Gauge = 4 // in a gathered snapshot: live processes merged (1.3)
)

// Split is a split of TTFT (or PREFILL) by a key known at the request
// (ttft_split).
type Split int32

// Splits.
const (
	SplitPrefixCache Split = 0 // TTFT by prefix-cache band: index = PrefixBand
	SplitPromptBand  Split = 1 // TTFT by prompt-length band: index = band
	// SplitPrefillByPrefix is PREFILL (first token - SCHEDULED mark) by
	// prefix-cache band (1.2), index = PrefixBand: "a hit prefills faster
	// but queues longer" is visible.
	SplitPrefillByPrefix Split = 2
)

// PrefixBand is how much of a prompt the prefix cache served
// (ttft_prefix_band, 1.2), the index of SplitPrefixCache and
// SplitPrefillByPrefix. Stream.AnnotateCached sets it: PrefixBandMiss when
// fewer than Config.PrefixHitMinTokens (default 16) tokens were cached,
// PrefixBandPartial when fewer than half the prompt, PrefixBandHit
// otherwise; Annotate's PrefixHit / PrefixMiss are PrefixBandHit / Miss.
type PrefixBand uint32

// Prefix-cache bands.
const (
	PrefixBandMiss    PrefixBand = 0 // fewer cached tokens than PrefixHitMinTokens
	PrefixBandHit     PrefixBand = 1 // at least half the prompt cached
	PrefixBandPartial PrefixBand = 2 // cached, but less than half the prompt
)

// StallCause is why a stall (an ITL gap above the class's stall budget)
// happened (ttft_stall_cause, 1.2). Every stall gets exactly one;
// docs/metrics.md has the rule and its precedence.
type StallCause int32

// Stall causes.
const (
	// NoStallCause is SeqInfo.LastStallCause of a stream without a stall.
	NoStallCause StallCause = -1
	// StallUnknown: no engine step ended inside the gap (the server does
	// not call Registry.EngineStep).
	StallUnknown StallCause = 0
	// StallPrefill: a step in the gap carried prefill (another request's
	// prompt) and was longer than the stream's usual step.
	StallPrefill StallCause = 1
	// StallPreempted: the stream was marked PhasePreempted in the first
	// half of the gap.
	StallPreempted StallCause = 2
	// StallNotScheduled: steps ran without this stream (the steps that
	// ended inside the gap before the one that produced its token cover
	// most of it).
	StallNotScheduled StallCause = 3
	// StallEngineIdle: no step ran during most of the gap (a host stall,
	// GC, a frozen process).
	StallEngineIdle StallCause = 4
	// StallSlowStep (1.3): the step that produced the stream's token was
	// itself far longer than usual (host contention, GPU throttling, a
	// huge batch); nothing was left out.
	StallSlowStep StallCause = 5
)

// Name is the library's name ("unknown", "prefill", "preempted",
// "not_scheduled", "engine_idle", "slow_step": the cause label of llm_stalls_total),
// "" for a value the loaded library does not know.
func (c StallCause) Name() string { return goString(C.ttft_stall_cause_name(C.ttft_stall_cause(c))) }

// AllStallCauses lists every cause the loaded library has (asked from it).
func AllStallCauses() []StallCause {
	var out []StallCause
	for c := StallCause(0); c.Name() != ""; c++ {
		out = append(out, c)
	}
	return out
}

// SlowestBy says which slowest list (ttft_slowest_by, 1.2).
type SlowestBy int32

// Slowest lists.
const (
	SlowestTTFT SlowestBy = 0 // requests ranked by their TTFT (streams that got a token)
	SlowestGap  SlowestBy = 1 // requests ranked by their longest inter-token gap
)

// SlowRequest is one of the slowest requests of a snapshot
// (ttft_slow_request, 1.2), recorded when its stream ended.
type SlowRequest struct {
	ValueNs    uint64     // what it is ranked by: TTFTNs or MaxGapNs
	TTFTNs     uint64     // its TTFT (0 when no token came)
	MaxGapNs   uint64     // its longest inter-token gap (0 with < 2 emissions)
	TBeginNs   uint64     // when it began (monotonic)
	TEndNs     uint64     // when it ended (monotonic)
	TEndUnixNs uint64     // its end on the wall clock, ns since 1970; 0 when unknown
	Tokens     uint64     // output tokens
	Class      Class      // its class in the snapshot
	Status     Status     // how it ended
	Cause      StallCause // the cause of its longest gap when that gap was a stall (StallUnknown otherwise)
	RequestID  string     // "" when none was given
	TraceID    string     // 32 lowercase hex digits, "" when none
	// Since 1.3: how it flowed and what it was judged against (0 from a
	// snapshot written before 1.3).
	Fluidity        float64 // 1 - DeadlinesMissed/Deadlines (1 with none)
	Deadlines       uint64  // token deadlines judged over the stream
	DeadlinesMissed uint64  // ... of them missed
	TokenDeadlineNs uint64  // its D; 0: no token deadlines
	TTFTSLONs       uint64  // the first-token deadline it was judged against; 0 = none
	TPOTSLONs       uint64  // the TPOT budget it was judged against; 0 = none
}

// ReservedLabels are the label names the exporters write themselves
// (TTFT_RESERVED_LABELS): a constant label (Config.Labels) may not use
// them, nor any name starting with "__" (Prometheus reserves those).
// CheckConfig names the offending label.
var ReservedLabels = []string{"class", "model", "status", "le", "quantile", "start_point", "token_point",
	"version", "slo", "prefix_cache", "prompt_tokens", "view", "kind", "window", "cause", "prefill",
	"process"}

// IsReservedLabel reports whether name may not be a constant label's name.
func IsReservedLabel(name string) bool {
	if strings.HasPrefix(name, "__") {
		return true
	}
	for _, r := range ReservedLabels {
		if r == name {
			return true
		}
	}
	return false
}

// Clock is the clock behind "now" (ttft_clock).
type Clock int32

// Clocks.
const (
	ClockMonotonic Clock = 0 // clock_gettime(CLOCK_MONOTONIC)
	ClockTSC       Clock = 1 // calibrated invariant TSC, same epoch and rate
	ClockFastest   Clock = 2 // 1.3: whichever of the two reads faster here (measured once per process)
)

// Class is a class id from AddClass (0 = "default").
type Class int32

// Class constants.
const (
	ClassDefault Class = 0  // the class every registry has
	ClassAll     Class = -1 // every class, in per-class queries
)

// Handle is a C sequence handle (ttft_seq): opaque, 0 = no stream.
type Handle uint64

// Prefix says whether a request's prompt prefix was in the cache.
type Prefix int8

// Prefix values; the zero value is unknown.
const (
	PrefixUnknown Prefix = 0
	PrefixMiss    Prefix = 1
	PrefixHit     Prefix = 2
)

func (p Prefix) c() C.int {
	switch p {
	case PrefixMiss:
		return 0
	case PrefixHit:
		return 1
	}
	return -1
}

func goString(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// NowNs is CLOCK_MONOTONIC in nanoseconds: the clock the hooks read.
func NowNs() uint64 { return uint64(C.ttft_now_ns()) }

// VersionNumber is the loaded library's MAJOR*10000 + MINOR*100 + PATCH.
func VersionNumber() int { return int(C.ttft_version_number()) }

// VersionString is the loaded library's "MAJOR.MINOR.PATCH".
func VersionString() string { return C.GoString(C.ttft_version_string()) }

// ---------------------------------------------------------------- config

// SLO holds the budgets of a class; 0 = no budget for that dimension.
type SLO struct {
	TTFT           time.Duration // time to first token
	TPOT           time.Duration // time per output token (met when there is none)
	E2E            time.Duration // end to end
	StallThreshold time.Duration // stall budget; 0 = the registry's
	// TTFTPerPromptToken makes the first-token deadline length-aware (1.3):
	// TTFT + TTFTPerPromptToken x the prompt tokens known at the first
	// token (Request.PromptTokens or Stream.Annotate; unknown = TTFT
	// alone). A request's own Request.TTFTSLO replaces the whole deadline.
	// 0 = a fixed budget.
	TTFTPerPromptToken time.Duration
	// TokenDeadline is D of the fluidity rule (1.3; docs/metrics.md
	// "Fluidity"): each token after the first is due D after the one
	// before it, slack carried forward. 0 = the request's TPOT budget
	// (Request.TPOTSLO, else TPOT); a stream whose D is 0 has no token
	// deadlines and is not judged for fluidity.
	TokenDeadline time.Duration
	// FluidMin is the fluidity a stream that ended Completed needs to be
	// fluid (1.3), in (0, 1]; 0 = the library's default, 0.9 (Etalon's).
	// AddClass refuses a value outside 0..1 (ErrInvalid).
	FluidMin float64
}

// defaultFluidMin is ttft_slo_init's fluid_min, what SLO.FluidMin 0 means.
const defaultFluidMin = 0.9

func (s SLO) c() C.ttft_slo {
	var o C.ttft_slo
	C.ttft_slo_init(&o) // struct_size and the library's defaults (fluid_min)
	o.ttft_ns = C.uint64_t(s.TTFT)
	o.tpot_ns = C.uint64_t(s.TPOT)
	o.e2e_ns = C.uint64_t(s.E2E)
	o.stall_threshold_ns = C.uint64_t(s.StallThreshold)
	o.ttft_ns_per_prompt_token = C.uint64_t(s.TTFTPerPromptToken)
	o.token_deadline_ns = C.uint64_t(s.TokenDeadline)
	if s.FluidMin != 0 {
		o.fluid_min = C.double(s.FluidMin)
	}
	return o
}

// Label is a constant label added to every exported series.
type Label struct{ Name, Value string }

// ClassConfig is a class that New adds right after creating the registry.
type ClassConfig struct {
	Name string
	SLO  SLO
}

// Config configures a registry. The zero value of every field means the
// library's default (ttft_config_init), so Config{} is the default setup.
type Config struct {
	MaxInflight       uint32              // sequence slots (default 4096)
	MaxThreads        uint32              // threads with a private shard (default 8)
	MaxClasses        uint32              // classes including "default" (default 16)
	StallThreshold    time.Duration       // default stall budget (default 500 ms)
	Clock             Clock               // ClockMonotonic (default) or ClockTSC
	StartPoint        string              // where t_begin is taken (default "server_arrival")
	TokenPoint        string              // what counts as a token (default "detokenized_flush")
	Model             string              // model label
	Namespace         string              // metric name prefix (default "llm_")
	Labels            []Label             // constant labels (at most 8)
	PromptBandEdges   []uint32            // ascending band edges; nil = default, empty = no bands
	PromBuckets       map[Metric][]uint64 // classic bucket bounds of metrics 0..10 (ns; tokens)
	PromSummaries     bool                // also export p50..p99.9 summaries
	ClassicOnly       bool                // no native histograms in the protobuf exposition
	NativeSchema      *int                // native bucket schema -4..8 (nil = 7)
	ExportIdleClasses bool                // export the default class before a begin uses it (added classes: always, 1.3)
	MemoryLimit       uint64              // bytes of histogram buckets (default 256 MiB)
	// PrefixHitMinTokens: fewer cached tokens than this is a prefix-cache
	// miss in Stream.AnnotateCached (1.2; 0 = the default, 16).
	PrefixHitMinTokens uint32
	// SlowestK: requests kept per class in each slowest list
	// (Snapshot.Slowest), 0..64; nil = the default, 8; 0 = no lists, no
	// ids kept, no exemplars (1.2).
	SlowestK *uint32
	// SharedDir: publish the registry's whole state into a segment of its
	// own in this directory, read by OpenGather (1.3; docs/multiprocess.md).
	// A tmpfs such as /dev/shm/NAME; it must exist, belong to this user and
	// not be group- or world-writable ("" = off).
	SharedDir string
	// ProcessName: this process in per-process views, 1..63 bytes of
	// [A-Za-z0-9_.:-] ("" = "pid-<pid>"); a stable name keeps a series
	// across restarts (1.3).
	ProcessName string
	// PublishIntervalMs: a background thread publishes at least this often
	// (nil = 100; 10..3600000; 0 = no thread, call Registry.Publish) (1.3).
	PublishIntervalMs *uint32
	Classes           []ClassConfig // added in order: the first gets id 1
}

// ---------------------------------------------------------------- registry

// Registry records streams (ttft_registry). Every method is safe for
// concurrent use, except Close, which must not race any other call.
type Registry struct {
	r       *C.ttft_registry
	closed  atomic.Bool
	mu      sync.RWMutex // Close (write) against finalizers (read)
	classes atomic.Int32 // ids 0 .. classes-1 exist
}

// ConfigError is a configuration the library refuses, with the one-line
// reason ttft_config_check gives (naming the field, its value and the
// rule), e.g. `const_labels[0].name "view" is reserved (the exporters write
// it; see TTFT_RESERVED_LABELS)`. It wraps ErrInvalid, so
// errors.Is(err, ErrInvalid) holds; errors.As gives the reason.
type ConfigError struct {
	Reason string // the library's one-line reason
}

// Error is "ttft: invalid configuration: " and the reason.
func (e *ConfigError) Error() string { return "ttft: invalid configuration: " + e.Reason }

// Unwrap is ErrInvalid (TTFT_EINVAL), the code the library returns.
func (e *ConfigError) Unwrap() error { return ErrInvalid }

// CheckConfig reports whether the library would accept cfg (nil = the
// defaults), without creating a registry (ttft_config_check): nil, or a
// *ConfigError with the reason. cfg.Classes are checked when New adds them.
func CheckConfig(cfg *Config) error {
	if cfg == nil {
		cfg = &Config{}
	}
	return withCConfig(cfg, checkC)
}

func checkC(c *C.ttft_config) error {
	var why [512]C.char
	// Go memory without Go pointers, written during the call only: allowed.
	rc := C.ttft_config_check(c, &why[0], C.size_t(len(why)))
	if rc == 0 {
		return nil
	}
	if reason := C.GoString(&why[0]); reason != "" {
		return &ConfigError{reason}
	}
	return Errno(rc)
}

// withCConfig builds the C configuration of cfg (its strings and arrays in
// C memory, freed when f returns) and calls f with it.
func withCConfig(cfg *Config, f func(c *C.ttft_config) error) error {
	var c C.ttft_config
	// cgo compiles against the real header: init fills exactly this struct.
	C.ttft_config_init(&c)
	var frees []unsafe.Pointer
	defer func() {
		for _, p := range frees {
			C.free(p)
		}
	}()
	var nul error
	cstr := func(field, s string) *C.char {
		if strings.IndexByte(s, 0) >= 0 && nul == nil {
			nul = &ConfigError{fmt.Sprintf("%s %q contains a NUL byte", field, s)}
		}
		p := C.CString(s)
		frees = append(frees, unsafe.Pointer(p))
		return p
	}
	if cfg.MaxInflight != 0 {
		c.max_inflight = C.uint32_t(cfg.MaxInflight)
	}
	if cfg.MaxThreads != 0 {
		c.max_threads = C.uint32_t(cfg.MaxThreads)
	}
	if cfg.MaxClasses != 0 {
		c.max_classes = C.uint32_t(cfg.MaxClasses)
	}
	if cfg.StallThreshold != 0 {
		c.stall_threshold_ns = C.uint64_t(cfg.StallThreshold)
	}
	c.clock = C.ttft_clock(cfg.Clock)
	if cfg.StartPoint != "" {
		c.start_point = cstr("start_point", cfg.StartPoint)
	}
	if cfg.TokenPoint != "" {
		c.token_point = cstr("token_point", cfg.TokenPoint)
	}
	if cfg.Model != "" {
		c.model = cstr("model", cfg.Model)
	}
	if cfg.Namespace != "" {
		c.metric_namespace = cstr("metric_namespace", cfg.Namespace)
	}
	if n := len(cfg.Labels); n > 0 {
		// C memory: a struct handed to C must not hold Go pointers.
		p := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.ttft_label{})))
		frees = append(frees, p)
		labels := unsafe.Slice((*C.ttft_label)(p), n)
		for i, l := range cfg.Labels {
			labels[i].name = cstr(fmt.Sprintf("const_labels[%d].name", i), l.Name)
			labels[i].value = cstr(fmt.Sprintf("const_labels[%d].value", i), l.Value)
		}
		c.const_labels = (*C.ttft_label)(p)
		c.n_const_labels = C.uint32_t(n)
	}
	if cfg.PromptBandEdges != nil {
		if len(cfg.PromptBandEdges) > len(c.prompt_band_edges) {
			return &ConfigError{fmt.Sprintf("prompt_band_edges: %d edges, at most %d (TTFT_MAX_BANDS - 1)",
				len(cfg.PromptBandEdges), len(c.prompt_band_edges))}
		}
		for i, e := range cfg.PromptBandEdges {
			c.prompt_band_edges[i] = C.uint32_t(e)
		}
		c.n_prompt_bands = C.uint32_t(len(cfg.PromptBandEdges))
	}
	for m, bounds := range cfg.PromBuckets {
		if m < 0 || int(m) >= len(c.prom_buckets) {
			return &ConfigError{fmt.Sprintf("prom_buckets: metric %d has no configurable buckets (metrics 0..%d)",
				m, len(c.prom_buckets)-1)}
		}
		if len(bounds) == 0 {
			continue
		}
		p := C.calloc(C.size_t(len(bounds)), 8)
		frees = append(frees, p)
		dst := unsafe.Slice((*C.uint64_t)(p), len(bounds))
		for i, b := range bounds {
			dst[i] = C.uint64_t(b)
		}
		c.prom_buckets[m] = (*C.uint64_t)(p)
		c.prom_n_buckets[m] = C.uint32_t(len(bounds))
	}
	if cfg.PromSummaries {
		c.prom_summaries = 1
	}
	if cfg.ClassicOnly {
		c.native_histograms = 0
	}
	if cfg.NativeSchema != nil {
		c.native_schema = C.int(*cfg.NativeSchema)
	}
	if cfg.ExportIdleClasses {
		c.export_idle_classes = 1
	}
	if cfg.MemoryLimit != 0 {
		c.memory_limit = C.uint64_t(cfg.MemoryLimit)
	}
	if cfg.PrefixHitMinTokens != 0 {
		c.prefix_hit_min_tokens = C.uint32_t(cfg.PrefixHitMinTokens)
	}
	if cfg.SlowestK != nil {
		c.slowest_k = C.uint32_t(*cfg.SlowestK)
	}
	if cfg.SharedDir != "" {
		c.shared_dir = cstr("shared_dir", cfg.SharedDir)
	}
	if cfg.ProcessName != "" {
		c.process_name = cstr("process_name", cfg.ProcessName)
	}
	if cfg.PublishIntervalMs != nil {
		c.publish_interval_ms = C.uint32_t(*cfg.PublishIntervalMs)
	}
	if nul != nil {
		return nul
	}
	return f(&c)
}

// New creates a registry (nil cfg = defaults) and adds cfg.Classes. A
// configuration the library refuses is a *ConfigError with the library's
// reason (errors.Is(err, ErrInvalid) holds); ErrNoMem when it is valid and
// memory is short; class errors as AddClass.
func New(cfg *Config) (*Registry, error) {
	if VersionNumber()/10000 != ABIMajor {
		return nil, ErrNotSupported
	}
	if cfg == nil {
		cfg = &Config{}
	}
	var r *C.ttft_registry
	err := withCConfig(cfg, func(c *C.ttft_config) error {
		if err := checkC(c); err != nil {
			return err
		}
		// ttft_registry_new refuses exactly what ttft_config_check refuses;
		// past it only memory can be short.
		if r = C.ttft_registry_new(c); r == nil {
			return ErrNoMem
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	reg := &Registry{r: r}
	reg.classes.Store(1)
	runtime.SetFinalizer(reg, (*Registry).Close)
	for _, cl := range cfg.Classes {
		if _, err := reg.AddClass(cl.Name, cl.SLO); err != nil {
			reg.Close()
			return nil, err
		}
	}
	return reg, nil
}

// Close frees the registry. It must not race any other call on r: end the
// streams and close the HTTP server first. Calls after Close return
// ErrClosed. A registry that becomes unreachable is closed by a finalizer,
// after the finalizers of its streams (they refer to it). Closing twice
// is a no-op.
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return nil
	}
	r.closed.Store(true)
	runtime.SetFinalizer(r, nil)
	C.ttft_registry_free(r.r)
	return nil
}

func (r *Registry) live() error {
	if r.closed.Load() {
		return ErrClosed
	}
	return nil
}

// AddClass adds a class (name: 1..63 bytes of [A-Za-z0-9_.:-]) with its
// SLO budgets. ErrInvalid (bad name), ErrExist, ErrFull, ErrNoMem.
func (r *Registry) AddClass(name string, slo SLO) (Class, error) {
	if err := r.live(); err != nil {
		return 0, err
	}
	n := C.CString(name)
	defer C.free(unsafe.Pointer(n))
	s := slo.c()
	rc := C.ttft_class_add(r.r, n, &s)
	runtime.KeepAlive(r)
	if err := check(rc); err != nil {
		return 0, err
	}
	for {
		old := r.classes.Load()
		if int32(rc)+1 <= old || r.classes.CompareAndSwap(old, int32(rc)+1) {
			break
		}
	}
	return Class(rc), nil
}

// FindClass returns the class called name; ErrStale when there is none.
func (r *Registry) FindClass(name string) (Class, error) {
	if err := r.live(); err != nil {
		return 0, err
	}
	n := C.CString(name)
	defer C.free(unsafe.Pointer(n))
	rc := C.ttft_class_find(r.r, n)
	runtime.KeepAlive(r)
	if err := check(rc); err != nil {
		return 0, err
	}
	return Class(rc), nil
}

// Request is what the scheduler knows about a request when it arrives.
type Request struct {
	Class        Class  // ClassDefault unless set
	PromptTokens uint32 // prompt length; 0 = unknown
	PrefixHit    Prefix // PrefixUnknown unless set
	// RequestID is the server's id of the request (1.2; "" = none), shown
	// with the slowest requests (Snapshot.Slowest); the library keeps at
	// most 63 bytes (cut at a whole UTF-8 character; malformed UTF-8 and
	// control characters, NUL included, become '?'). Any value is
	// accepted: it is what a client sent.
	RequestID string
	// TraceID is the W3C trace-context trace-id (1.2; "" = none): exactly
	// 32 lowercase hex digits, not all zero. Anything else (a NUL included:
	// it is passed as '?', not as the end of the id) is ignored (the
	// request is still measured) and counted in CounterTraceIDInvalid. It
	// is the exemplar of the slowest requests' buckets.
	TraceID string
	// Traceparent is a W3C traceparent header value as received (1.3; "" =
	// none), e.g. "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":
	// its trace-id is taken at begin as TraceparentTraceID takes it, when
	// TraceID is "" (TraceID wins). An invalid header is ignored (the
	// request is still measured) and counted in CounterTraceIDInvalid.
	Traceparent string
	// TTFTSLO is this request's own first-token deadline (1.3; 0 = the
	// class's, with its per-prompt-token term), e.g. from a router's
	// x-llm-d-slo-ttft-ms header. Its verdict (CounterSLOMet,
	// CounterSLOJudged) and the slowest lists use it; the class's budget
	// gauges stay the class's.
	TTFTSLO time.Duration
	// TPOTSLO is this request's own TPOT budget (1.3; 0 = the class's), e.g.
	// from x-llm-d-slo-tpot-ms; also its token deadline when the class
	// sets no SLO.TokenDeadline.
	TPOTSLO time.Duration
}

// begin runs ttft_begin_checked: the stream, or why the begin was refused
// (ErrFull, ErrClock, ErrInvalid for a class of another registry).
func (r *Registry) begin(req *C.ttft_request, t C.uint64_t) (*Stream, error) {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	var seq C.ttft_seq
	if rc := C.ttft_begin_checked(r.r, req, t, &seq); rc != 0 {
		return nil, Errno(rc)
	}
	s := &Stream{reg: r, seq: seq}
	runtime.SetFinalizer(s, (*Stream).finalize)
	return s, nil
}

// traceparentCopy is the part of a traceparent header that decides
// ttft_traceparent_parse's verdict: optional whitespace (space, tab)
// trimmed, the first 56 bytes (a 56th that is whitespace, which the whole
// header would refuse, becomes 'x'), each NUL as '?'. So a 1 MB header
// costs no more than a short one.
func traceparentCopy(h string) string {
	h = strings.Trim(h, " \t")
	if len(h) > 56 {
		h = h[:56]
		if h[55] == ' ' || h[55] == '\t' {
			h = h[:55] + "x"
		}
	}
	return strings.ReplaceAll(h, "\x00", "?")
}

// TraceparentTraceID is the trace-id of a W3C traceparent header value
// (1.3, ttft_traceparent_parse): version "00" exactly (00-<32 hex>-<16
// hex>-<2 hex>, lowercase, ids not all zero), a higher version (not "ff")
// by the W3C rule (its first four fields, then the end or '-'), whitespace
// around the value skipped. ok is false when the header is invalid.
func TraceparentTraceID(header string) (traceID string, ok bool) {
	p := C.CString(traceparentCopy(header))
	defer C.free(unsafe.Pointer(p))
	var out [33]C.char
	if C.ttft_traceparent_parse(p, &out[0]) != 0 {
		return "", false
	}
	return C.GoStringN(&out[0], 32), true
}

// Begin starts a stream now (class default). ErrFull when no slot is free
// (the library counts it as dropped).
func (r *Registry) Begin() (*Stream, error) {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	if err := r.live(); err != nil {
		return nil, err
	}
	return r.begin(nil, 0)
}

// BeginAt starts a stream at tNs (not 0; CLOCK_MONOTONIC ns, as NowNs).
// ErrClock for a wall-clock time (time.Now().UnixNano()), counted in
// CounterClockRefused; ErrFull when no slot is free.
func (r *Registry) BeginAt(tNs uint64) (*Stream, error) {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	t, err := tArg(tNs)
	if err != nil {
		return nil, err
	}
	if err := r.live(); err != nil {
		return nil, err
	}
	return r.begin(nil, t)
}

// BeginRequest starts a stream now with request details; ErrInvalid for
// an unknown class (a Class of another registry: set it per registry),
// ErrFull when no slot is free.
func (r *Registry) BeginRequest(req Request) (*Stream, error) {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	return r.beginReq(req, 0)
}

// BeginRequestAt starts a stream at tNs (not 0) with request details.
func (r *Registry) BeginRequestAt(req Request, tNs uint64) (*Stream, error) {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	t, err := tArg(tNs)
	if err != nil {
		return nil, err
	}
	return r.beginReq(req, t)
}

func (r *Registry) beginReq(req Request, t C.uint64_t) (*Stream, error) {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	if err := r.live(); err != nil {
		return nil, err
	}
	var c C.ttft_request
	c.struct_size = C.size_t(unsafe.Sizeof(c))
	c.class_id = C.int(req.Class)
	c.prompt_tokens = C.uint32_t(req.PromptTokens)
	c.prefix_hit = req.PrefixHit.c()
	c.ttft_slo_ns = C.uint64_t(req.TTFTSLO)
	c.tpot_slo_ns = C.uint64_t(req.TPOTSLO)
	// The ids are copied by ttft_begin_ex: C strings freed when it returns
	// (C memory: a struct handed to C must not hold Go pointers). No value
	// of an id fails a begin: it is what a client sent.
	for _, id := range []struct {
		s   string
		dst **C.char
	}{{req.RequestID, &c.request_id}, {req.TraceID, &c.trace_id}} {
		if id.s == "" {
			continue
		}
		p := idCString(id.s)
		defer C.free(unsafe.Pointer(p))
		*id.dst = p
	}
	if req.Traceparent != "" {
		p := C.CString(traceparentCopy(req.Traceparent))
		defer C.free(unsafe.Pointer(p))
		c.traceparent = p
	}
	return r.begin(&c, t)
}

// idRead is how much of an id ttft_begin_ex can read (TTFT_ID_READ: it
// keeps at most TTFT_MAX_REQUEST_ID bytes of a request id and each kept
// byte consumes at most 4 of the caller's); it reads at most 33 bytes of a
// trace id. A longer id is cut here with no change to what is kept or
// counted, so a 1 MB id costs no more than a short one.
const idRead = C.TTFT_ID_READ

// idCString is id for ttft_begin_ex, in C memory: its first idRead bytes,
// each NUL as '?' (a C string would end there, and a trace id cut at a NUL
// may look valid).
func idCString(id string) *C.char {
	if len(id) > idRead {
		id = id[:idRead]
	}
	if strings.IndexByte(id, 0) >= 0 {
		id = strings.ReplaceAll(id, "\x00", "?")
	}
	return C.CString(id)
}

// StepEmitted records one decode step of a continuous-batching engine:
// every handle emitted one token (or nTokens[i], which must then have the
// same length) now, with one clock read. Ended or unknown handles are
// skipped and counted as stale. Returns the emissions accepted.
func (r *Registry) StepEmitted(handles []Handle, nTokens []uint32) (int, error) {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	return r.step(handles, nTokens, 0)
}

// StepEmittedAt is StepEmitted at tNs (not 0).
func (r *Registry) StepEmittedAt(handles []Handle, nTokens []uint32, tNs uint64) (int, error) {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	t, err := tArg(tNs)
	if err != nil {
		return 0, err
	}
	return r.step(handles, nTokens, t)
}

func (r *Registry) step(handles []Handle, nTokens []uint32, t C.uint64_t) (int, error) {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	if nTokens != nil && len(nTokens) != len(handles) {
		return 0, ErrInvalid
	}
	if err := r.live(); err != nil {
		return 0, err
	}
	if len(handles) == 0 {
		return 0, nil
	}
	var n *C.uint32_t
	if nTokens != nil {
		n = (*C.uint32_t)(unsafe.Pointer(&nTokens[0]))
	}
	// Go memory without Go pointers, read during the call only: allowed.
	rc := C.ttft_step_emitted(r.r, (*C.ttft_seq)(unsafe.Pointer(&handles[0])), n, C.size_t(len(handles)), t)
	runtime.KeepAlive(handles)
	runtime.KeepAlive(nTokens)
	return checkLong(rc)
}

// StepInfo describes one engine iteration of a continuous-batching server
// (ttft_step_info, 1.2) for Registry.EngineStep. The zero value is a step
// with no prefill.
type StepInfo struct {
	PrefillTokens uint32 // prompt tokens processed in the step, any request (> 0: it carried prefill)
	DecodeSeqs    uint32 // sequences that decoded a token in the step
	PreemptedSeqs uint32 // sequences preempted in the step
	Kind          uint32 // free for the server (0 = unspecified)
}

// EngineStep records one engine iteration that ran from tStartNs until now
// (1.2). Call it once per iteration when it ends, BEFORE the tokens it
// produced are recorded (StepEmitted, Token), with the same clock as the
// token hooks; info nil = an iteration with no prefill. It records the
// step's duration in the registry-wide engine-step histogram and keeps the
// step so that stalls get a cause (StallCause); a server that never calls
// it loses nothing (its stalls are StallUnknown). Steps are registry-wide:
// one registry per engine loop. ErrInvalid for tStartNs 0.
func (r *Registry) EngineStep(info *StepInfo, tStartNs uint64) error {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	t0, err := tArg(tStartNs)
	if err != nil {
		return err
	}
	return r.engineStep(info, t0, 0)
}

// EngineStepAt is EngineStep with both ends given (not 0; an end before the
// start is clamped to it), e.g. from CUDA events or a replayed trace.
func (r *Registry) EngineStepAt(info *StepInfo, tStartNs, tEndNs uint64) error {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	t0, err := tArg(tStartNs)
	if err != nil {
		return err
	}
	t1, err := tArg(tEndNs)
	if err != nil {
		return err
	}
	return r.engineStep(info, t0, t1)
}

func (r *Registry) engineStep(info *StepInfo, t0, t1 C.uint64_t) error {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	if err := r.live(); err != nil {
		return err
	}
	if info == nil {
		return check(C.ttft_engine_step(r.r, nil, t0, t1))
	}
	// Filled here, not by ttft_step_info_init: struct_size is the size
	// this package was compiled with, which the library accepts.
	var c C.ttft_step_info
	c.struct_size = C.size_t(unsafe.Sizeof(c))
	c.prefill_tokens = C.uint32_t(info.PrefillTokens)
	c.decode_seqs = C.uint32_t(info.DecodeSeqs)
	c.preempted_seqs = C.uint32_t(info.PreemptedSeqs)
	c.kind = C.uint32_t(info.Kind)
	return check(C.ttft_engine_step(r.r, &c, t0, t1))
}

// TokenEmitted records n tokens of the stream with handle h now (for
// engines that keep handles rather than *Stream values).
func (r *Registry) TokenEmitted(h Handle, n uint32) error {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	if err := r.live(); err != nil {
		return err
	}
	return check(C.ttft_token_emitted(r.r, C.ttft_seq(h), C.uint32_t(n), 0))
}

// End ends the stream with handle h now; of two racing ends exactly one
// succeeds, the other gets ErrStale. (The *Stream then knows it ended.)
func (r *Registry) End(h Handle, st Status) error {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	if err := r.live(); err != nil {
		return err
	}
	return check(C.ttft_stream_end(r.r, C.ttft_seq(h), C.ttft_status(st), 0))
}

// SeqInfo is what a live stream looks like right now.
type SeqInfo struct {
	Class       Class
	Emissions   uint32 // emission events so far
	Tokens      uint64 // tokens so far
	TBeginNs    uint64 // when it began
	TLastNs     uint64 // its last emission (TBeginNs before the first)
	TTFTNs      uint64 // its TTFT (0 before the first emission)
	ITLP50Ns    uint64 // median of its own gaps (~3 %)
	ITLP95Ns    uint64 // p95 of its own gaps
	ITLMaxNs    uint64 // its worst gap (exact)
	Stalls      uint32 // stall gaps so far
	Preemptions uint32 // PREEMPTED marks so far
	// LastStallCause is the cause of its latest stall (1.2), NoStallCause
	// while it has none: e.g. to log it with the request.
	LastStallCause StallCause
	// Fluidity is 1 - DeadlinesMissed/Deadlines so far, 1 with none (1.3;
	// docs/metrics.md "Fluidity").
	Fluidity        float64
	Deadlines       uint64 // token deadlines judged so far (1.3)
	DeadlinesMissed uint64 // ... of them missed (1.3)
	// TTFTSLONs is its first-token deadline as known now (1.3): its own
	// Request.TTFTSLO, else the class's with the per-token term for the
	// prompt known so far; 0 = none.
	TTFTSLONs uint64
	TPOTSLONs uint64 // its TPOT budget, own else the class's; 0 = none (1.3)
}

// SeqStats describes the live stream h; ErrStale once it ended.
func (r *Registry) SeqStats(h Handle) (SeqInfo, error) {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	if err := r.live(); err != nil {
		return SeqInfo{}, err
	}
	var i C.ttft_seq_info
	i.struct_size = C.size_t(unsafe.Sizeof(i))
	if err := check(C.ttft_seq_stats(r.r, C.ttft_seq(h), &i)); err != nil {
		return SeqInfo{}, err
	}
	return SeqInfo{Class(i.class_id), uint32(i.emissions), uint64(i.tokens), uint64(i.t_begin_ns),
		uint64(i.t_last_ns), uint64(i.ttft_ns), uint64(i.itl_p50_ns), uint64(i.itl_p95_ns),
		uint64(i.itl_max_ns), uint32(i.stalls), uint32(i.preemptions), lastCause(i),
		float64(i.fluidity), uint64(i.deadlines), uint64(i.deadlines_missed),
		uint64(i.ttft_slo_ns), uint64(i.tpot_slo_ns)}, nil
}

func lastCause(i C.ttft_seq_info) StallCause {
	if i.stalls == 0 || i.last_stall_cause < 0 {
		return NoStallCause
	}
	return StallCause(i.last_stall_cause)
}

// Snapshot copies everything recorded so far (never stops the hooks).
func (r *Registry) Snapshot() (*Snapshot, error) {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	if err := r.live(); err != nil {
		return nil, err
	}
	return ownSnapshot(C.ttft_snapshot_take(r.r), ErrNoMem)
}

// Publish writes the registry's state into its segment of the shared
// directory now (ttft_publish; 1.3): ErrInvalid without Config.SharedDir,
// ErrIO when writing failed (counted in CounterPublishFailed; recording
// goes on).
func (r *Registry) Publish() error {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	if err := r.live(); err != nil {
		return err
	}
	return check(C.ttft_publish(r.r))
}

// Inflight is the number of streams begun and not ended.
func (r *Registry) Inflight() int {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	if r.live() != nil {
		return 0
	}
	return int(C.ttft_inflight(r.r))
}

// StalledNow counts in-flight streams whose last token is older than their
// class's stall budget now (stalls that have not closed yet).
func (r *Registry) StalledNow() int {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	if r.live() != nil {
		return 0
	}
	return int(C.ttft_stalled_now(r.r, 0))
}

// StalledAt is StalledNow as of tNs (not 0).
func (r *Registry) StalledAt(tNs uint64) (int, error) {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	t, err := tArg(tNs)
	if err != nil {
		return 0, err
	}
	if err := r.live(); err != nil {
		return 0, err
	}
	return checkLong(C.ttft_stalled_now(r.r, t))
}

// Memory is the bytes the registry holds.
func (r *Registry) Memory() uint64 {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	if r.live() != nil {
		return 0
	}
	return uint64(C.ttft_registry_memory(r.r))
}

// NowNs is the registry's clock (what "now" means in its hooks).
func (r *Registry) NowNs() uint64 {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	if r.live() != nil {
		return NowNs()
	}
	return uint64(C.ttft_registry_now_ns(r.r))
}

// ThreadRelease hands the calling OS thread's private shard back (call it
// with runtime.LockOSThread held on a thread that stops recording).
func (r *Registry) ThreadRelease() error {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	if err := r.live(); err != nil {
		return err
	}
	return check(C.ttft_thread_release(r.r))
}

// ---------------------------------------------------------------- stream

// Stream is one request from begin to end. Its methods may be called from
// any goroutine (hooks of one stream should come in order; End may race
// the others). End it exactly once: a Stream that becomes unreachable
// unended is ended as cancelled by a finalizer, a safety net that runs
// only when the garbage collector gets to it.
type Stream struct {
	reg   *Registry
	seq   C.ttft_seq
	ended atomic.Bool
}

// Handle is the C handle, for Registry.StepEmitted.
func (s *Stream) Handle() Handle { return Handle(s.seq) }

// Ended reports whether End ran (successfully, or on an ended stream).
func (s *Stream) Ended() bool { return s.ended.Load() }

func (s *Stream) rc(rc C.int) error {
	runtime.KeepAlive(s) // no finalizer while the call runs
	return check(rc)
}

// Token records n tokens that became visible to the client now (one
// emission). The first records TTFT, later ones one ITL gap each.
// ErrInvalid for n == 0, ErrStale after End.
func (s *Stream) Token(n uint32) error {
	if err := s.reg.live(); err != nil {
		return err
	}
	return s.rc(C.ttft_token_emitted(s.reg.r, s.seq, C.uint32_t(n), 0))
}

// TokenAt is Token at tNs (not 0).
func (s *Stream) TokenAt(n uint32, tNs uint64) error {
	t, err := tArg(tNs)
	if err != nil {
		return err
	}
	if err := s.reg.live(); err != nil {
		return err
	}
	return s.rc(C.ttft_token_emitted(s.reg.r, s.seq, C.uint32_t(n), t))
}

// Mark marks a phase now (PhaseScheduled: queue time ends).
func (s *Stream) Mark(p Phase) error {
	if err := s.reg.live(); err != nil {
		return err
	}
	return s.rc(C.ttft_mark(s.reg.r, s.seq, C.ttft_phase(p), 0))
}

// MarkAt is Mark at tNs (not 0).
func (s *Stream) MarkAt(p Phase, tNs uint64) error {
	t, err := tArg(tNs)
	if err != nil {
		return err
	}
	if err := s.reg.live(); err != nil {
		return err
	}
	return s.rc(C.ttft_mark(s.reg.r, s.seq, C.ttft_phase(p), t))
}

// Annotate records details learned after begin: the prompt length (0 =
// leave) and whether its prefix was cached (PrefixUnknown = leave).
// Allowed until the first token (ErrRange after it).
func (s *Stream) Annotate(promptTokens uint32, prefix Prefix) error {
	if err := s.reg.live(); err != nil {
		return err
	}
	return s.rc(C.ttft_annotate(s.reg.r, s.seq, C.uint32_t(promptTokens), prefix.c()))
}

// AnnotateCached records the prefix-cache reuse as counts (1.2):
// cachedTokens of the promptTokens of the prompt were served from the
// prefix cache. It sets the prompt band and the PrefixBand (miss below
// Config.PrefixHitMinTokens, partial below half the prompt, hit
// otherwise). Call it where the server computes the reuse (when the prompt
// starts). Allowed until the first token (a later call overrides an
// earlier one; ErrRange after the first token); ErrInvalid for promptTokens
// 0 or cachedTokens > promptTokens; ErrStale once ended.
func (s *Stream) AnnotateCached(promptTokens, cachedTokens uint32) error {
	if err := s.reg.live(); err != nil {
		return err
	}
	return s.rc(C.ttft_annotate_cached(s.reg.r, s.seq, C.uint32_t(promptTokens), C.uint32_t(cachedTokens)))
}

// Stats describes the stream right now.
func (s *Stream) Stats() (SeqInfo, error) {
	i, err := s.reg.SeqStats(s.Handle())
	runtime.KeepAlive(s)
	return i, err
}

// End ends the stream now with status st. ErrStale when it had already
// ended (another goroutine's End or Registry.End won).
func (s *Stream) End(st Status) error { return s.end(st, 0) }

// EndAt is End at tNs (not 0).
func (s *Stream) EndAt(st Status, tNs uint64) error {
	t, err := tArg(tNs)
	if err != nil {
		return err
	}
	return s.end(st, t)
}

func (s *Stream) end(st Status, t C.uint64_t) error {
	if err := s.reg.live(); err != nil {
		return err
	}
	rc := C.ttft_stream_end(s.reg.r, s.seq, C.ttft_status(st), t)
	if rc == 0 || Errno(rc) == ErrStale {
		s.ended.Store(true)
		runtime.SetFinalizer(s, nil)
	}
	return s.rc(rc)
}

// finalize is the safety net: an unreachable, unended stream is cancelled.
func (s *Stream) finalize() {
	if s.ended.Load() {
		return
	}
	s.reg.mu.RLock() // Close (write lock) cannot free the registry meanwhile
	defer s.reg.mu.RUnlock()
	if !s.reg.closed.Load() {
		C.ttft_stream_end(s.reg.r, s.seq, C.ttft_status(Cancelled), 0)
	}
}

// ---------------------------------------------------------------- snapshot

// Snapshot is an immutable copy of a registry's data; every query is safe
// for concurrent use. Close frees it (a finalizer does so otherwise).
type Snapshot struct {
	p    *C.ttft_snapshot
	once sync.Once
}

func ownSnapshot(p *C.ttft_snapshot, e error) (*Snapshot, error) {
	if p == nil {
		return nil, e
	}
	s := &Snapshot{p: p}
	runtime.SetFinalizer(s, (*Snapshot).Close)
	return s, nil
}

// Close frees the snapshot; later queries must not be made. Idempotent.
func (s *Snapshot) Close() error {
	s.once.Do(func() {
		runtime.SetFinalizer(s, nil)
		C.ttft_snapshot_free(s.p)
	})
	return nil
}

// Count is the number of observations of m over every class.
func (s *Snapshot) Count(m Metric) uint64 {
	defer runtime.KeepAlive(s)
	return uint64(C.ttft_snapshot_count(s.p, C.ttft_metric(m)))
}

// Quantile is quantile q in [0, 1] of m (nearest rank, within 0.5 %; q = 0
// and 1 are the exact min and max), ns (tokens for OutputTokens); 0 when
// empty or q is out of range.
func (s *Snapshot) Quantile(m Metric, q float64) uint64 {
	defer runtime.KeepAlive(s)
	return uint64(C.ttft_snapshot_quantile(s.p, C.ttft_metric(m), C.double(q)))
}

// Mean of m (0 when empty).
func (s *Snapshot) Mean(m Metric) float64 {
	defer runtime.KeepAlive(s)
	return float64(C.ttft_snapshot_mean(s.p, C.ttft_metric(m)))
}

// Sum of the observations of m, saturating at 2^64-1 (the library keeps
// sums 128 bits wide: ClassView.SumWide).
func (s *Snapshot) Sum(m Metric) uint64 {
	defer runtime.KeepAlive(s)
	return uint64(C.ttft_snapshot_sum(s.p, C.ttft_metric(m)))
}

// Counter c over every class (0 for a counter the library lacks).
func (s *Snapshot) Counter(c Counter) uint64 {
	defer runtime.KeepAlive(s)
	return uint64(C.ttft_snapshot_counter(s.p, C.ttft_counter(c)))
}

// Counters maps every counter the loaded library has to its value.
func (s *Snapshot) Counters() map[Counter]uint64 {
	out := make(map[Counter]uint64)
	for _, c := range AllCounters() {
		out[c] = s.Counter(c)
	}
	return out
}

// Gauge g as of the snapshot.
func (s *Snapshot) Gauge(g Gauge) uint64 {
	defer runtime.KeepAlive(s)
	return uint64(C.ttft_snapshot_gauge(s.p, C.ttft_gauge(g)))
}

// NumClasses is the number of classes, including "default".
func (s *Snapshot) NumClasses() int {
	defer runtime.KeepAlive(s)
	return int(C.ttft_snapshot_classes(s.p))
}

// Class is the per-class view of c (ClassAll = every class).
func (s *Snapshot) Class(c Class) ClassView { return ClassView{s, c} }

// Status is the view of the streams that ended with st, over every class
// (what client benchmarks report is Status(Completed)).
func (s *Snapshot) Status(st Status) StatusView { return StatusView{s, ClassAll, st} }

// Attainment is the SLO attainment over every class; ok is false when
// nothing ended.
func (s *Snapshot) Attainment() (a float64, ok bool) { return s.Class(ClassAll).Attainment() }

// StallsByCause is the number of stalls of every class attributed to
// cause (1.2); over the causes they add up to CounterStalls. Snapshots
// decoded from a 1.0/1.1 encoding have every stall under StallUnknown.
func (s *Snapshot) StallsByCause(cause StallCause) uint64 {
	return s.Class(ClassAll).StallsByCause(cause)
}

// StalledNsByCause is the stalled time of those stalls in ns, the sum of
// their whole gaps (ttft_snapshot_stall_seconds_by_cause, which despite
// its name returns ns; llm_stall_seconds_total is this / 1e9).
func (s *Snapshot) StalledNsByCause(cause StallCause) uint64 {
	return s.Class(ClassAll).StalledNsByCause(cause)
}

// StallCauses lists every cause the loaded library has with its stall
// count and stalled ns, over every class.
func (s *Snapshot) StallCauses() []CauseStat { return s.Class(ClassAll).StallCauses() }

// CauseStat is the stalls of one cause and their stalled time.
type CauseStat struct {
	Cause     StallCause
	Stalls    uint64 // stalls attributed to Cause
	StalledNs uint64 // the sum of their gaps, ns
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Slowest lists the k slowest requests of every class by `by` (1.2), the
// slowest first; see ClassView.Slowest.
func (s *Snapshot) Slowest(by SlowestBy) []SlowRequest { return s.Class(ClassAll).Slowest(by) }

// EngineStepCount is the number of engine steps recorded (Registry.EngineStep)
// that carried prefill (prefill true) or did not; registry-wide (1.2).
func (s *Snapshot) EngineStepCount(prefill bool) uint64 {
	defer runtime.KeepAlive(s)
	return uint64(C.ttft_snapshot_engine_step_count(s.p, cbool(prefill)))
}

// EngineStepQuantile is quantile q in [0, 1] of those steps' durations, ns
// (nearest rank, within 0.5 %); 0 when there are none or q is out of range.
// With prefill against without, it is what a prompt joining the batch
// costs the decodes.
func (s *Snapshot) EngineStepQuantile(prefill bool, q float64) uint64 {
	defer runtime.KeepAlive(s)
	return uint64(C.ttft_snapshot_engine_step_quantile(s.p, cbool(prefill), C.double(q)))
}

// EngineStepSum is the sum of those steps' durations, ns.
func (s *Snapshot) EngineStepSum(prefill bool) uint64 {
	defer runtime.KeepAlive(s)
	return uint64(C.ttft_snapshot_engine_step_sum(s.p, cbool(prefill)))
}

// SplitCount is the number of observations under a split index: TTFT by
// PrefixBand or prompt band, PREFILL by PrefixBand (SplitPrefillByPrefix).
func (s *Snapshot) SplitCount(sp Split, index uint32) uint64 {
	defer runtime.KeepAlive(s)
	return uint64(C.ttft_snapshot_split_count(s.p, C.ttft_split(sp), C.uint(index)))
}

// SplitQuantile is quantile q under a split index (see SplitCount).
func (s *Snapshot) SplitQuantile(sp Split, index uint32, q float64) uint64 {
	defer runtime.KeepAlive(s)
	return uint64(C.ttft_snapshot_split_quantile(s.p, C.ttft_split(sp), C.uint(index), C.double(q)))
}

// Bands lists the prompt-length bands as [lo, hi) in tokens.
func (s *Snapshot) Bands() [][2]uint32 {
	defer runtime.KeepAlive(s)
	n := uint32(C.ttft_snapshot_bands(s.p))
	out := make([][2]uint32, 0, n)
	for i := uint32(0); i < n; i++ {
		var lo, hi C.uint32_t
		if C.ttft_snapshot_band(s.p, C.uint(i), &lo, &hi) == 0 {
			out = append(out, [2]uint32{uint32(lo), uint32(hi)})
		}
	}
	return out
}

// Interval is the span the snapshot covers, ns on the monotonic clock.
func (s *Snapshot) Interval() (startNs, endNs uint64) {
	defer runtime.KeepAlive(s)
	var a, b C.uint64_t
	C.ttft_snapshot_interval(s.p, &a, &b)
	return uint64(a), uint64(b)
}

// Label is a registry label: "start_point", "token_point", "model" or
// "namespace"; ok is false for anything else.
func (s *Snapshot) Label(key string) (v string, ok bool) {
	defer runtime.KeepAlive(s)
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	p := C.ttft_snapshot_label(s.p, k)
	if p == nil {
		return "", false
	}
	return C.GoString(p), true
}

// Format renders the snapshot in f (FormatPrometheusProtobuf is binary).
func (s *Snapshot) Format(f Format) ([]byte, error) {
	defer runtime.KeepAlive(s)
	need, err := checkLong(C.ttft_snapshot_format(s.p, C.ttft_format(f), nil, 0))
	if err != nil {
		return nil, err
	}
	buf := C.malloc(C.size_t(need) + 1)
	if buf == nil {
		return nil, ErrNoMem
	}
	defer C.free(buf)
	got, err := checkLong(C.ttft_snapshot_format(s.p, C.ttft_format(f), (*C.char)(buf), C.size_t(need)+1))
	if err != nil {
		return nil, err
	}
	if got > need {
		return nil, ErrRange // an immutable snapshot renders the same twice
	}
	return C.GoBytes(buf, C.int(got)), nil
}

// Encode is the compact, versioned, checksummed binary encoding.
func (s *Snapshot) Encode() ([]byte, error) {
	defer runtime.KeepAlive(s)
	need, err := checkLong(C.ttft_snapshot_encode(s.p, nil, 0))
	if err != nil {
		return nil, err
	}
	buf := make([]byte, need)
	if need == 0 {
		return buf, nil
	}
	got, err := checkLong(C.ttft_snapshot_encode(s.p, unsafe.Pointer(&buf[0]), C.size_t(need)))
	if err != nil {
		return nil, err
	}
	if got != need {
		return nil, ErrRange
	}
	return buf, nil
}

// EncodeBase64 is the encoding as one line of base64.
func (s *Snapshot) EncodeBase64() (string, error) {
	defer runtime.KeepAlive(s)
	need, err := checkLong(C.ttft_snapshot_encode_base64(s.p, nil, 0))
	if err != nil {
		return "", err
	}
	buf := make([]byte, need+1)
	got, err := checkLong(C.ttft_snapshot_encode_base64(s.p, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(need+1)))
	if err != nil {
		return "", err
	}
	if got != need {
		return "", ErrRange
	}
	return string(buf[:need]), nil
}

// Decode decodes untrusted bytes from Encode; ErrCorrupt when malformed.
func Decode(b []byte) (*Snapshot, error) {
	var e C.int
	var p unsafe.Pointer
	if len(b) > 0 {
		p = unsafe.Pointer(&b[0])
	} else {
		p = unsafe.Pointer(&e) // a valid address for a zero-length read
	}
	s := C.ttft_snapshot_decode(p, C.size_t(len(b)), &e)
	runtime.KeepAlive(b)
	return ownSnapshot(s, errOr(e, ErrCorrupt))
}

// DecodeBase64 decodes the base64 form.
func DecodeBase64(text string) (*Snapshot, error) {
	t := C.CString(text)
	defer C.free(unsafe.Pointer(t))
	var e C.int
	return ownSnapshot(C.ttft_snapshot_decode_base64(t, C.size_t(len(text)), &e), errOr(e, ErrCorrupt))
}

func errOr(e C.int, fallback error) error {
	if e < 0 {
		return Errno(e)
	}
	return fallback
}

// Merge returns a snapshot with the observations of a and b (classes
// matched by name): fleet percentiles from merged counts.
func Merge(a, b *Snapshot) (*Snapshot, error) {
	var e C.int
	p := C.ttft_snapshot_merge(a.p, b.p, &e)
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	return ownSnapshot(p, errOr(e, ErrNoMem))
}

// Delta returns what happened between older and newer, two snapshots of
// one registry (newer taken later); ErrInvalid otherwise.
func Delta(newer, older *Snapshot) (*Snapshot, error) {
	var e C.int
	p := C.ttft_snapshot_delta(newer.p, older.p, &e)
	runtime.KeepAlive(newer)
	runtime.KeepAlive(older)
	return ownSnapshot(p, errOr(e, ErrNoMem))
}

// ClassView holds the queries of one class of a snapshot (or ClassAll).
type ClassView struct {
	s *Snapshot
	c Class
}

// Name is the class's name ("" for ClassAll or an unknown id).
func (v ClassView) Name() string {
	defer runtime.KeepAlive(v.s)
	return goString(C.ttft_snapshot_class_name(v.s.p, C.int(v.c)))
}

// SLO is the class's budgets (the stall budget resolved); ErrInvalid for
// an unknown class.
func (v ClassView) SLO() (SLO, error) {
	defer runtime.KeepAlive(v.s)
	var o C.ttft_slo
	o.struct_size = C.size_t(unsafe.Sizeof(o))
	if err := check(C.ttft_snapshot_class_slo(v.s.p, C.int(v.c), &o)); err != nil {
		return SLO{}, err
	}
	return SLO{time.Duration(o.ttft_ns), time.Duration(o.tpot_ns), time.Duration(o.e2e_ns),
		time.Duration(o.stall_threshold_ns), time.Duration(o.ttft_ns_per_prompt_token),
		time.Duration(o.token_deadline_ns), float64(o.fluid_min)}, nil
}

// Count of m in the class.
func (v ClassView) Count(m Metric) uint64 {
	defer runtime.KeepAlive(v.s)
	return uint64(C.ttft_snapshot_class_count(v.s.p, C.int(v.c), C.ttft_metric(m)))
}

// Quantile q of m in the class.
func (v ClassView) Quantile(m Metric, q float64) uint64 {
	defer runtime.KeepAlive(v.s)
	return uint64(C.ttft_snapshot_class_quantile(v.s.p, C.int(v.c), C.ttft_metric(m), C.double(q)))
}

// Mean of m in the class.
func (v ClassView) Mean(m Metric) float64 {
	defer runtime.KeepAlive(v.s)
	return float64(C.ttft_snapshot_class_mean(v.s.p, C.int(v.c), C.ttft_metric(m)))
}

// Sum of m in the class.
func (v ClassView) Sum(m Metric) uint64 {
	defer runtime.KeepAlive(v.s)
	return uint64(C.ttft_snapshot_class_sum(v.s.p, C.int(v.c), C.ttft_metric(m)))
}

// SumWide is the whole sum of m in the class, 128 bits wide (never wraps;
// Sum saturates at 2^64-1): hi*2^64 + lo. ErrInvalid for an unknown class
// or metric.
func (v ClassView) SumWide(m Metric) (hi, lo uint64, err error) {
	defer runtime.KeepAlive(v.s)
	var h, l C.uint64_t
	if err := check(C.ttft_snapshot_class_sum_wide(v.s.p, C.int(v.c), C.ttft_metric(m), &h, &l)); err != nil {
		return 0, 0, err
	}
	return uint64(h), uint64(l), nil
}

// Counter c of the class.
func (v ClassView) Counter(c Counter) uint64 {
	defer runtime.KeepAlive(v.s)
	return uint64(C.ttft_snapshot_class_counter(v.s.p, C.int(v.c), C.ttft_counter(c)))
}

// Attainment is good / ended in the class; ok is false when nothing ended.
func (v ClassView) Attainment() (a float64, ok bool) {
	defer runtime.KeepAlive(v.s)
	x := float64(C.ttft_snapshot_attainment(v.s.p, C.int(v.c)))
	return x, x >= 0
}

// Slowest lists the class's k slowest requests by `by` (1.2), recorded when
// each stream ended, the slowest first (of equal values the earlier end
// first): at most Config.SlowestK. A snapshot's lists cover its interval;
// Merge keeps the k slowest of the union, Delta the requests of the newer
// lists that ended in the window. Streams in flight are not listed.
func (v ClassView) Slowest(by SlowestBy) []SlowRequest {
	defer runtime.KeepAlive(v.s)
	n := uint32(C.ttft_snapshot_slowest_count(v.s.p, C.int(v.c), C.ttft_slowest_by(by)))
	out := make([]SlowRequest, 0, n)
	for i := uint32(0); i < n; i++ {
		var c C.ttft_slow_request
		c.struct_size = C.size_t(unsafe.Sizeof(c))
		if C.ttft_snapshot_slowest(v.s.p, C.int(v.c), C.ttft_slowest_by(by), C.uint(i), &c) != 0 {
			break
		}
		out = append(out, SlowRequest{uint64(c.value_ns), uint64(c.ttft_ns), uint64(c.max_gap_ns),
			uint64(c.t_begin_ns), uint64(c.t_end_ns), uint64(c.t_end_unix_ns), uint64(c.tokens),
			Class(c.class_id), Status(c.status), StallCause(c.cause),
			C.GoString(&c.request_id[0]), C.GoString(&c.trace_id[0]),
			float64(c.fluidity), uint64(c.deadlines), uint64(c.deadlines_missed),
			uint64(c.token_deadline_ns), uint64(c.ttft_slo_ns), uint64(c.tpot_slo_ns)})
	}
	return out
}

// StallsByCause is the number of the class's stalls attributed to cause (1.2).
func (v ClassView) StallsByCause(cause StallCause) uint64 {
	defer runtime.KeepAlive(v.s)
	return uint64(C.ttft_snapshot_stalls_by_cause(v.s.p, C.int(v.c), C.ttft_stall_cause(cause)))
}

// StalledNsByCause is the stalled time of those stalls, ns (the whole gap
// of each; ttft_snapshot_stall_seconds_by_cause).
func (v ClassView) StalledNsByCause(cause StallCause) uint64 {
	defer runtime.KeepAlive(v.s)
	return uint64(C.ttft_snapshot_stall_seconds_by_cause(v.s.p, C.int(v.c), C.ttft_stall_cause(cause)))
}

// StallCauses lists every cause the loaded library has with the class's
// stall count and stalled ns.
func (v ClassView) StallCauses() []CauseStat {
	var out []CauseStat
	for _, c := range AllStallCauses() {
		out = append(out, CauseStat{c, v.StallsByCause(c), v.StalledNsByCause(c)})
	}
	return out
}

// Status is the view of the class's streams that ended with st.
func (v ClassView) Status(st Status) StatusView { return StatusView{v.s, v.c, st} }

// StatusView holds TTFT, TPOT, E2E and OutputTokens of the streams that
// ended with one status (recorded at stream end), in one class or all.
type StatusView struct {
	s  *Snapshot
	c  Class
	st Status
}

// Count of m (TTFT, TPOT, E2E or OutputTokens; 0 for others).
func (v StatusView) Count(m Metric) uint64 {
	defer runtime.KeepAlive(v.s)
	return uint64(C.ttft_snapshot_status_count(v.s.p, C.int(v.c), C.ttft_status(v.st), C.ttft_metric(m)))
}

// Quantile q of m.
func (v StatusView) Quantile(m Metric, q float64) uint64 {
	defer runtime.KeepAlive(v.s)
	return uint64(C.ttft_snapshot_status_quantile(v.s.p, C.int(v.c), C.ttft_status(v.st), C.ttft_metric(m), C.double(q)))
}

// Sum of m (ns; tokens for OutputTokens), exact below 2^64 and 2^64-1
// above (the library keeps it 128 bits wide); 0 for other metrics or an
// empty view (1.2).
func (v StatusView) Sum(m Metric) uint64 {
	defer runtime.KeepAlive(v.s)
	return uint64(C.ttft_snapshot_status_sum(v.s.p, C.int(v.c), C.ttft_status(v.st), C.ttft_metric(m)))
}

// Mean of m: the whole sum over the count (exact to double rounding); with
// Completed and MetricTTFT it is the "mean TTFT" of completed requests that
// client benchmarks print. 0 for other metrics or an empty view (1.2).
func (v StatusView) Mean(m Metric) float64 {
	defer runtime.KeepAlive(v.s)
	return float64(C.ttft_snapshot_status_mean(v.s.p, C.int(v.c), C.ttft_status(v.st), C.ttft_metric(m)))
}

// ---------------------------------------------------------------- http

// HTTPServer is the /metrics endpoint of a registry (Registry.Serve).
type HTTPServer struct {
	srv  *C.ttft_http
	reg  *Registry
	once sync.Once
}

// Serve serves r over HTTP on addr ("127.0.0.1:9464"; port 0 picks a free
// one): /metrics (Prometheus text, OpenMetrics or protobuf by Accept),
// /report, /report.json, from one background thread. Close the server
// before the registry. ErrInvalid (bad address), ErrIO (bind failed),
// ErrNotSupported (built without HTTP).
func (r *Registry) Serve(addr string) (*HTTPServer, error) {
	defer runtime.KeepAlive(r) // no finalizer may close r during the call
	if err := r.live(); err != nil {
		return nil, err
	}
	a := C.CString(addr)
	defer C.free(unsafe.Pointer(a))
	var srv *C.ttft_http
	if err := check(C.ttft_http_start(r.r, a, &srv)); err != nil {
		return nil, err
	}
	h := &HTTPServer{srv: srv, reg: r}
	// a server dropped without Close is stopped before its registry can be
	// finalized (it refers to the registry, so its finalizer runs first)
	runtime.SetFinalizer(h, (*HTTPServer).Close)
	return h, nil
}

// Port is the TCP port the server listens on.
func (h *HTTPServer) Port() int {
	defer runtime.KeepAlive(h)
	return int(C.ttft_http_port(h.srv))
}

// Close stops the server and joins its thread. Idempotent.
func (h *HTTPServer) Close() error {
	h.once.Do(func() {
		runtime.SetFinalizer(h, nil)
		C.ttft_http_stop(h.srv)
	})
	return nil
}

// ---------------------------------------------------------------- otlp

// Temporality is what an OTLP push carries
// (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE's words).
type Temporality string

// The temporalities; "" takes the environment's (else cumulative).
const (
	TemporalityCumulative Temporality = "cumulative" // the totals since the registry was created
	TemporalityDelta      Temporality = "delta"      // what changed since the last accepted push
	TemporalityLowMemory  Temporality = "lowmemory"  // delta for every libttft counter and histogram
)

// OTLPConfig is where and how Registry.StartOTLP pushes (ttft_otlp_config,
// 1.3). Every zero field takes the OTEL_* environment's value, else the
// library's default (docs/opentelemetry.md).
type OTLPConfig struct {
	Endpoint           string        // "http://host:port"; /v1/metrics is appended (OTEL_EXPORTER_OTLP_ENDPOINT)
	MetricsEndpoint    string        // the whole URL, used as is (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT)
	Headers            string        // "k1=v1,k2=v2", values percent-decoded (OTEL_EXPORTER_OTLP_HEADERS)
	ServiceName        string        // service.name (OTEL_SERVICE_NAME)
	ResourceAttributes string        // "k1=v1,k2=v2" (OTEL_RESOURCE_ATTRIBUTES)
	Interval           time.Duration // between pushes, whole ms (OTEL_METRIC_EXPORT_INTERVAL)
	Timeout            time.Duration // one push, retries included (OTEL_EXPORTER_OTLP_TIMEOUT)
	Temporality        Temporality   // "" (environment), cumulative, delta or lowmemory
}

// OTLPStats is what a pusher has done so far (ttft_otlp_stats).
type OTLPStats struct {
	Pushes     uint64 // pushes finished: Accepted + Failed + Dropped
	Accepted   uint64 // answered 2xx
	Failed     uint64 // retries ran out: the next push carries their data
	Dropped    uint64 // refused for good (a non-retryable status)
	Retries    uint64 // POSTs repeated after 429/502/503/504 or a connection failure
	BytesSent  uint64 // request bodies sent, retries included
	LastStatus int    // the last POST's HTTP status (0: none yet, or no answer)
	LastError  string // the last failed POST in one line ("HTTP 503", "connect: ..."), or ""
}

// OTLPPusher is a running OTLP pusher (Registry.StartOTLP): one background
// thread. Flush and Stats are safe for concurrent use; Close waits for them.
type OTLPPusher struct {
	mu  sync.RWMutex // Close (write) never races Flush or Stats (read)
	o   *C.ttft_otlp
	reg *Registry
}

func durMs(d time.Duration) C.uint32_t {
	if d <= 0 {
		return 0 // the environment's
	}
	ms := d.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	if ms > 1<<32-1 {
		ms = 1<<32 - 1
	}
	return C.uint32_t(ms)
}

// StartOTLP pushes r to an OpenTelemetry collector over OTLP/HTTP protobuf
// every interval (ttft_otlp_start). Plain HTTP only: an https:// endpoint
// is refused (push to a local collector). Close the pusher (a last push)
// before the registry. A *ConfigError with the library's reason (a bad or
// https URL, bad headers, an unknown temporality, a NUL byte),
// ErrNotSupported (built without HTTP), ErrNoMem.
func (r *Registry) StartOTLP(c OTLPConfig) (*OTLPPusher, error) {
	defer runtime.KeepAlive(r)
	if err := r.live(); err != nil {
		return nil, err
	}
	var cfg C.ttft_otlp_config
	C.ttft_otlp_config_init(&cfg)
	for _, f := range []struct {
		name string
		v    string
		dst  **C.char
	}{{"Endpoint", c.Endpoint, &cfg.endpoint}, {"MetricsEndpoint", c.MetricsEndpoint, &cfg.metrics_endpoint},
		{"Headers", c.Headers, &cfg.headers}, {"ServiceName", c.ServiceName, &cfg.service_name},
		{"ResourceAttributes", c.ResourceAttributes, &cfg.resource_attributes}} {
		if f.v == "" {
			continue
		}
		if strings.IndexByte(f.v, 0) >= 0 {
			return nil, &ConfigError{Reason: fmt.Sprintf("otlp: %s %q contains a NUL byte", f.name, f.v)}
		}
		p := C.CString(f.v)
		defer C.free(unsafe.Pointer(p))
		*f.dst = p
	}
	if ms := durMs(c.Interval); ms != 0 {
		cfg.interval_ms = ms
	}
	if ms := durMs(c.Timeout); ms != 0 {
		cfg.timeout_ms = ms
	}
	switch c.Temporality {
	case "":
	case TemporalityCumulative:
		cfg.temporality = C.TTFT_OTLP_CUMULATIVE
	case TemporalityDelta:
		cfg.temporality = C.TTFT_OTLP_DELTA
	case TemporalityLowMemory:
		cfg.temporality = C.TTFT_OTLP_LOWMEMORY
	default:
		return nil, &ConfigError{Reason: fmt.Sprintf("otlp: temporality %q is not cumulative, delta or lowmemory", string(c.Temporality))}
	}
	var o *C.ttft_otlp
	var msg [512]C.char
	rc := C.ttft_otlp_start_msg(r.r, &cfg, &o, &msg[0], C.size_t(len(msg)))
	if rc == C.TTFT_EINVAL {
		return nil, &ConfigError{Reason: C.GoString(&msg[0])}
	}
	if err := check(rc); err != nil {
		return nil, err
	}
	p := &OTLPPusher{o: o, reg: r}
	// dropped without Close: stopped before its registry can be finalized
	runtime.SetFinalizer(p, (*OTLPPusher).Close)
	return p, nil
}

// Flush pushes now and waits for the outcome: ErrIO when the retries ran
// out or the collector refused the batch, ErrClosed after Close.
func (p *OTLPPusher) Flush() error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.o == nil {
		return ErrClosed
	}
	return check(C.ttft_otlp_flush(p.o))
}

// Stats is the pusher's counts; ErrClosed after Close.
func (p *OTLPPusher) Stats() (OTLPStats, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.o == nil {
		return OTLPStats{}, ErrClosed
	}
	var i C.ttft_otlp_info
	i.struct_size = C.size_t(unsafe.Sizeof(i))
	if err := check(C.ttft_otlp_stats(p.o, &i)); err != nil {
		return OTLPStats{}, err
	}
	return OTLPStats{Pushes: uint64(i.pushes), Accepted: uint64(i.accepted), Failed: uint64(i.failed),
		Dropped: uint64(i.dropped), Retries: uint64(i.retries), BytesSent: uint64(i.bytes_sent),
		LastStatus: int(i.last_status), LastError: C.GoString(&i.last_error[0])}, nil
}

// Close makes a last push (bounded by the timeout), stops the thread and
// frees the pusher. Idempotent.
func (p *OTLPPusher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.o != nil {
		runtime.SetFinalizer(p, nil)
		C.ttft_otlp_stop(p.o)
		p.o = nil
		p.reg = nil
	}
	return nil
}

// ---------------------------------------------------------------- gather

// Gather is every process that published into a directory
// (Config.SharedDir), merged (ttft_gather_*; 1.3, docs/multiprocess.md).
// Take is safe for concurrent use; Close must not race it.
type Gather struct {
	g *C.ttft_gather
}

// GatherError is why OpenGather failed: the library's one-line reason and
// the errno it set (ENOENT, EACCES for a directory open to others or of
// another user, EREMOTE for a network file system).
type GatherError struct {
	Reason string
	Errno  syscall.Errno
}

func (e *GatherError) Error() string { return "ttft_gather_open: " + e.Reason }

// Unwrap is the errno, so errors.Is(err, fs.ErrPermission) works.
func (e *GatherError) Unwrap() error { return e.Errno }

// OpenGather opens directory dir; byProcess keeps processes apart in the
// expositions (a process label on every series; the snapshot's own
// accessors read the merged view).
func OpenGather(dir string, byProcess bool) (*Gather, error) {
	if strings.IndexByte(dir, 0) >= 0 {
		return nil, &GatherError{Reason: fmt.Sprintf("dir %q contains a NUL byte", dir), Errno: syscall.EINVAL}
	}
	d := C.CString(dir)
	defer C.free(unsafe.Pointer(d))
	var flags C.uint
	if byProcess {
		flags = C.TTFT_GATHER_BY_PROCESS
	}
	var msg [512]C.char
	p, err := C.ttft_gather_open_msg(d, flags, &msg[0], C.size_t(len(msg)))
	if p == nil {
		e := &GatherError{Reason: C.GoString(&msg[0])}
		if en, ok := err.(syscall.Errno); ok {
			e.Errno = en
		}
		if e.Reason == "" {
			e.Reason = dir
		}
		return nil, e
	}
	g := &Gather{g: p}
	runtime.SetFinalizer(g, (*Gather).Close)
	return g, nil
}

// Take is one merged snapshot of every process of the directory: live
// ones' latest segments and the archive of those that exited.
func (g *Gather) Take() (*Snapshot, error) {
	defer runtime.KeepAlive(g) // no finalizer may close g during the call
	if g == nil || g.g == nil {
		return nil, ErrInvalid
	}
	p, err := C.ttft_gather_take(g.g)
	if p == nil && err == syscall.ENOMEM {
		return nil, ErrNoMem
	}
	return ownSnapshot(p, ErrIO)
}

// Close closes the gather; idempotent. Snapshots taken stay valid.
func (g *Gather) Close() {
	if g == nil || g.g == nil {
		return
	}
	C.ttft_gather_close(g.g)
	g.g = nil
	runtime.SetFinalizer(g, nil)
}
