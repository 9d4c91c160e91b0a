package ttft

// Issue 32 items 4 and 7 in Go: a W3C traceparent header accepted as a
// server receives it (Request.Traceparent, TraceparentTraceID), and a
// wall-clock timestamp (time.Now().UnixNano()) refused at begin with
// ErrClock, counted in CounterClockRefused.

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func goodTP(tail string) string { return "00-" + goodTrace + "-00f067aa0ba902b7-01" + tail }

func TestTraceparentParse(t *testing.T) {
	for _, h := range []string{
		goodTP(""), " \t" + goodTP("") + "\t ", goodTP(strings.Repeat(" ", 1000)),
		"cc-" + goodTrace + "-00f067aa0ba902b7-01-what-the-future-will-be-like",
	} {
		id, good := TraceparentTraceID(h)
		if !good || id != goodTrace {
			t.Errorf("%q: got %q, %v", h, id, good)
		}
	}
	for _, h := range []string{
		goodTP("-"), goodTP(" x"), goodTP(strings.Repeat(" ", 1000) + "x"), goodTP("\x00"),
		"ff-" + goodTrace + "-00f067aa0ba902b7-01",
		"00-" + strings.ToUpper(goodTrace) + "-00f067aa0ba902b7-01",
		"00-" + strings.Repeat("0", 32) + "-00f067aa0ba902b7-01",
		"00-" + goodTrace + "-0000000000000000-01",
		goodTrace, "", "00-\xff",
	} {
		if id, good := TraceparentTraceID(h); good || id != "" {
			t.Errorf("%q accepted: %q", h, id)
		}
	}
}

func TestRequestTraceparent(t *testing.T) {
	k := uint32(8)
	r, err := New(&Config{SlowestK: &k})
	ok(t, err)
	defer r.Close()
	reqs := []Request{
		{Traceparent: goodTP("")},
		{Traceparent: "  " + goodTP("") + "  "},
		{Traceparent: "00-zz"},                                             // invalid: counted
		{Traceparent: "\xff\xfe"},                                          // invalid: counted
		{TraceID: "0af7651916cd43dd8448eb211c80319c", Traceparent: "junk"}, // TraceID wins
	}
	for i, q := range reqs {
		playNth(t, r, uint64(i), q)
	}
	s, err := r.Snapshot()
	ok(t, err)
	got := []string{}
	for _, x := range s.Slowest(SlowestTTFT) {
		got = append([]string{x.TraceID}, got...)
	}
	eq(t, "trace ids", strings.Join([]string{goodTrace, goodTrace, "", "", "0af7651916cd43dd8448eb211c80319c"}, ","),
		strings.Join(got, ","))
	eq(t, "trace_id_invalid", 2, s.Counter(CounterTraceIDInvalid))
}

func TestWallClockRefused(t *testing.T) {
	r, err := New(&Config{MaxInflight: 2})
	ok(t, err)
	defer r.Close()
	w := uint64(time.Now().UnixNano())
	_, err = r.BeginAt(w)
	if !errors.Is(err, ErrClock) {
		t.Fatalf("BeginAt(wall clock): %v, want ErrClock", err)
	}
	eq(t, "name", "TTFT_ECLOCK", ErrClock.Name())
	if msg := err.Error(); !strings.Contains(msg, "CLOCK_MONOTONIC") || !strings.Contains(msg, "wall-clock") {
		t.Errorf("message %q does not name the clocks", msg)
	}
	_, err = r.BeginRequestAt(Request{Traceparent: goodTP("")}, w)
	isErr(t, "request", ErrClock, err)
	_, err = r.BeginRequest(Request{Class: 5})
	isErr(t, "other registry's class", ErrInvalid, err)
	a, err := r.Begin()
	ok(t, err)
	b, err := r.BeginAt(NowNs())
	ok(t, err)
	_, err = r.Begin()
	isErr(t, "full", ErrFull, err)
	_, err = r.BeginAt(w)
	isErr(t, "full, wall clock", ErrClock, err)
	ok(t, a.End(Completed))
	ok(t, b.End(Completed))
	s, err := r.Snapshot()
	ok(t, err)
	eq(t, "clock_refused", 3, s.Counter(CounterClockRefused))
	eq(t, "dropped", 1, s.Counter(CounterDropped))
	eq(t, "begun", 2, s.Counter(CounterBegun))
	eq(t, "counter name", "clock_refused", CounterClockRefused.Name())
}

func TestWallClockAfterMonotonicBeginClamped(t *testing.T) {
	r, err := New(nil)
	ok(t, err)
	defer r.Close()
	s, err := r.BeginAt(NowNs())
	ok(t, err)
	ok(t, s.TokenAt(1, uint64(time.Now().UnixNano())))
	ok(t, s.EndAt(Completed, uint64(time.Now().UnixNano())))
	snap, err := r.Snapshot()
	ok(t, err)
	eq(t, "clock_clamped", 2, snap.Counter(CounterClockClamped))
	eq(t, "ttft max", 0, snap.Quantile(MetricTTFT, 1.0)) // not 56 years
	eq(t, "e2e max", 0, snap.Quantile(MetricE2E, 1.0))
}
