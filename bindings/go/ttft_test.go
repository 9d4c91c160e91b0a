package ttft

// Known streams recorded through the Go API, with exact expected values.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	t0 = uint64(1_000_000_000)
	ms = uint64(1_000_000)
)

type tok struct {
	n uint32
	t uint64
}

func eq[T comparable](t *testing.T, what string, want, got T) {
	t.Helper()
	if want != got {
		t.Errorf("%s: want %v, got %v", what, want, got)
	}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func isErr(t *testing.T, what string, want error, got error) {
	t.Helper()
	if !errors.Is(got, want) {
		t.Errorf("%s: want %v, got %v", what, want, got)
	}
}

func newReg(t *testing.T, cfg *Config) *Registry {
	t.Helper()
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func play(t *testing.T, r *Registry, req Request, toks []tok, end uint64, st Status) {
	t.Helper()
	s := must[*Stream](t)(r.BeginRequestAt(req, t0))
	for _, k := range toks {
		ok(t, s.TokenAt(k.n, t0+k.t))
	}
	ok(t, s.EndAt(st, t0+end))
}

func snap(t *testing.T, r *Registry) *Snapshot {
	t.Helper()
	s := must[*Snapshot](t)(r.Snapshot())
	t.Cleanup(func() { s.Close() })
	return s
}

func TestHooksRecordExactValues(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 16})
	play(t, r, Request{}, []tok{{1, 5 * ms}, {1, 10 * ms}, {1, 15 * ms}}, 20*ms, Completed)
	play(t, r, Request{}, []tok{{1, 8 * ms}, {4, 20 * ms}}, 30*ms, Completed)
	play(t, r, Request{}, nil, 7*ms, Cancelled)
	s := snap(t, r)
	eq(t, "ttft count", 2, s.Count(MetricTTFT))
	eq(t, "ttft sum", 13*ms, s.Sum(MetricTTFT))
	eq(t, "ttft min", 5*ms, s.Quantile(MetricTTFT, 0))
	eq(t, "ttft max", 8*ms, s.Quantile(MetricTTFT, 1))
	eq(t, "ttft mean", 6.5e6, s.Mean(MetricTTFT))
	eq(t, "itl count", 3, s.Count(MetricITL))
	eq(t, "itl sum", 22*ms, s.Sum(MetricITL))
	eq(t, "itl max", 12*ms, s.Quantile(MetricITL, 1))
	eq(t, "tpot min", 3*ms, s.Quantile(MetricTPOT, 0))
	eq(t, "tpot max", 5*ms, s.Quantile(MetricTPOT, 1))
	eq(t, "e2e sum", 57*ms, s.Sum(MetricE2E))
	eq(t, "output tokens", 8, s.Sum(MetricOutputTokens))
	eq(t, "abandoned wait", 7*ms, s.Sum(MetricAbandonedWait))
	eq(t, "itl per token count", 6, s.Count(MetricITLPerToken))
	eq(t, "begun", 3, s.Counter(CounterBegun))
	eq(t, "completed", 2, s.Counter(CounterCompleted))
	eq(t, "cancelled", 1, s.Counter(CounterCancelled))
	eq(t, "abandoned", 1, s.Counter(CounterAbandoned))
	eq(t, "tokens", 8, s.Counter(CounterTokens))
	eq(t, "no tpot", 1, s.Counter(CounterNoTPOT))
	eq(t, "stale", 0, s.Counter(CounterStale))
	eq(t, "inflight", 0, s.Gauge(GaugeInflight))
	eq(t, "completed ttft", 2, s.Status(Completed).Count(MetricTTFT))
	eq(t, "completed e2e max", 30*ms, s.Status(Completed).Quantile(MetricE2E, 1))
	eq(t, "cancelled ttft", 0, s.Status(Cancelled).Count(MetricTTFT))
	eq(t, "cancelled e2e", 7*ms, s.Status(Cancelled).Quantile(MetricE2E, 0))
}

func TestCountersComeFromTheLibrary(t *testing.T) {
	all := AllCounters()
	if len(all) < 14 {
		t.Fatalf("%d counters", len(all))
	}
	eq(t, "stale name", "stale", CounterStale.Name())
	eq(t, "unknown name", "", Counter(100000).Name())
	eq(t, "metrics", 12, len(AllMetrics()))
	eq(t, "status name", "error", Failed.Name())
	eq(t, "format name", "prometheus_protobuf", FormatPrometheusProtobuf.Name())
	r := newReg(t, &Config{MaxInflight: 4})
	play(t, r, Request{}, []tok{{2, ms}}, 2*ms, Failed)
	c := snap(t, r).Counters()
	eq(t, "counters", len(all), len(c))
	eq(t, "errors", 1, c[CounterErrors])
	eq(t, "tokens", 2, c[CounterTokens])
}

func TestUnendedStreamIsCancelledByTheFinalizer(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 1})
	func() {
		s := must[*Stream](t)(r.BeginAt(t0))
		ok(t, s.TokenAt(1, t0+ms))
		_, err := r.BeginAt(t0)
		isErr(t, "second begin", ErrFull, err)
	}() // s is unreachable now
	for i := 0; i < 50 && r.Inflight() != 0; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	eq(t, "inflight after GC", 0, r.Inflight())
	s := snap(t, r)
	eq(t, "cancelled", 1, s.Counter(CounterCancelled))
	eq(t, "dropped", 1, s.Counter(CounterDropped))
	eq(t, "stale", 0, s.Counter(CounterStale))
	// an ended stream's finalizer does nothing (no STALE count)
	func() { ok(t, must[*Stream](t)(r.Begin()).End(Completed)) }()
	runtime.GC()
	runtime.GC()
	eq(t, "stale after GC", 0, snap(t, r).Counter(CounterStale))
}

func TestErrorsMirrorTheCCodes(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 4})
	s := must[*Stream](t)(r.Begin())
	isErr(t, "token 0", ErrInvalid, s.Token(0))
	isErr(t, "t 0", ErrInvalid, s.TokenAt(1, 0))
	_, err := r.BeginAt(0)
	isErr(t, "begin at 0", ErrInvalid, err)
	h := s.Handle()
	ok(t, r.End(h, Failed))
	isErr(t, "token after end", ErrStale, s.Token(1))
	isErr(t, "registry token", ErrStale, r.TokenEmitted(h, 1))
	isErr(t, "end twice", ErrStale, r.End(h, Completed))
	isErr(t, "stream end", ErrStale, s.End(Completed))
	eq(t, "ended", true, s.Ended())
	eq(t, "stale", 4, snap(t, r).Counter(CounterStale))
	_, err = r.SeqStats(h)
	isErr(t, "stats", ErrStale, err)

	eq(t, "code", -2, int(ErrStale))
	eq(t, "name", "TTFT_ESTALE", ErrStale.Name())
	eq(t, "text", "stale or unknown sequence handle (stream already ended?)", ErrStale.Error())
	eq(t, "unknown", "unknown error", Errno(-99).Error())
	wrapped := fmt.Errorf("handler: %w", ErrStale)
	eq(t, "errors.Is wrapped", true, errors.Is(wrapped, ErrStale))
	eq(t, "errors.Is other", false, errors.Is(wrapped, ErrFull))
	var en Errno
	eq(t, "errors.As", true, errors.As(wrapped, &en) && en == ErrStale)

	eq(t, "add chat", Class(1), must[Class](t)(r.AddClass("chat", SLO{})))
	_, err = r.AddClass("chat", SLO{})
	isErr(t, "dup", ErrExist, err)
	_, err = r.AddClass("default", SLO{})
	isErr(t, "default", ErrExist, err)
	_, err = r.AddClass("no spaces", SLO{})
	isErr(t, "bad name", ErrInvalid, err)
	eq(t, "find", Class(1), must[Class](t)(r.FindClass("chat")))
	_, err = r.FindClass("nope")
	isErr(t, "find nope", ErrStale, err)
	_, err = r.BeginRequest(Request{Class: 7})
	isErr(t, "unknown class", ErrInvalid, err)
	eq(t, "no drop counted", 0, snap(t, r).Counter(CounterDropped))
	_, err = New(&Config{Labels: []Label{{"bad name", "x"}}})
	isErr(t, "bad label", ErrInvalid, err)
	_, err = New(&Config{PromptBandEdges: []uint32{500, 100}})
	isErr(t, "bands", ErrInvalid, err)
	_, err = Decode([]byte("not a snapshot"))
	isErr(t, "decode", ErrCorrupt, err)
	_, err = Decode(nil)
	isErr(t, "decode empty", ErrCorrupt, err)
	_, err = DecodeBase64("!!!!")
	isErr(t, "decode b64", ErrCorrupt, err)
	full := newReg(t, &Config{MaxClasses: 2})
	must[Class](t)(full.AddClass("a", SLO{}))
	_, err = full.AddClass("b", SLO{})
	isErr(t, "full", ErrFull, err)

	closed := must[*Registry](t)(New(nil))
	cs := must[*Stream](t)(closed.Begin())
	ok(t, closed.Close())
	ok(t, closed.Close())
	isErr(t, "after close", ErrClosed, cs.Token(1))
	_, err = closed.Snapshot()
	isErr(t, "snapshot after close", ErrClosed, err)
}

func TestClassesSLOsAndAttainment(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 8, Classes: []ClassConfig{
		{"chat", SLO{TTFT: 10 * time.Millisecond, TPOT: 4 * time.Millisecond}}}})
	chat := must[Class](t)(r.FindClass("chat"))
	eq(t, "chat id", Class(1), chat)
	batch := must[Class](t)(r.AddClass("batch", SLO{E2E: time.Second}))
	c := Request{Class: chat}
	play(t, r, c, []tok{{1, 5 * ms}, {1, 8 * ms}}, 9*ms, Completed)
	play(t, r, c, []tok{{1, 15 * ms}, {1, 16 * ms}}, 17*ms, Completed)
	play(t, r, c, []tok{{1, 5 * ms}, {1, 15 * ms}}, 16*ms, Completed)
	play(t, r, Request{Class: batch}, []tok{{1, 500 * ms}}, 900*ms, Completed)
	s := snap(t, r)
	eq(t, "classes", 3, s.NumClasses())
	eq(t, "names", "default chat batch",
		s.Class(0).Name()+" "+s.Class(1).Name()+" "+s.Class(2).Name())
	v := s.Class(chat)
	eq(t, "chat ttft", 3, v.Count(MetricTTFT))
	eq(t, "slo met", 1, v.Counter(CounterSLOMet))
	a, has := v.Attainment()
	eq(t, "attainment", 1.0/3.0, a)
	eq(t, "has", true, has)
	eq(t, "chat max", 15*ms, v.Quantile(MetricTTFT, 1))
	eq(t, "chat sum", 25*ms, v.Sum(MetricTTFT))
	hi, lo, err := s.Class(ClassAll).SumWide(MetricE2E)
	ok(t, err)
	eq(t, "wide e2e", [2]uint64{0, (9 + 17 + 16 + 900) * ms}, [2]uint64{hi, lo})
	_, _, err = s.Class(9).SumWide(MetricTTFT)
	isErr(t, "wide unknown", ErrInvalid, err)
	eq(t, "chat completed tpot", 3, v.Status(Completed).Count(MetricTPOT))
	eq(t, "slo", SLO{TTFT: 10 * time.Millisecond, TPOT: 4 * time.Millisecond,
		StallThreshold: 500 * time.Millisecond, FluidMin: defaultFluidMin}, must[SLO](t)(v.SLO()))
	eq(t, "batch mean", 9e8, s.Class(batch).Mean(MetricE2E))
	_, has = s.Class(ClassDefault).Attainment()
	eq(t, "default has none", false, has)
	a, _ = s.Attainment()
	eq(t, "all", 0.5, a)
	eq(t, "unknown name", "", s.Class(9).Name())
	_, err = s.Class(9).SLO()
	isErr(t, "unknown slo", ErrInvalid, err)
}

func TestStallsPhasesAnnotateBands(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 8, StallThreshold: 20 * time.Millisecond,
		PromptBandEdges: []uint32{100, 1000}})
	s := must[*Stream](t)(r.BeginAt(t0))
	ok(t, s.MarkAt(PhaseScheduled, t0+3*ms))
	ok(t, s.Annotate(812, PrefixHit))
	ok(t, s.TokenAt(1, t0+10*ms))
	isErr(t, "annotate late", ErrRange, s.Annotate(5, PrefixUnknown))
	ok(t, s.TokenAt(1, t0+40*ms))
	ok(t, s.TokenAt(1, t0+45*ms))
	ok(t, s.MarkAt(PhasePreempted, t0+46*ms))
	i := must[SeqInfo](t)(s.Stats())
	eq(t, "info", SeqInfo{Class: 0, Emissions: 3, Tokens: 3, TBeginNs: t0, TLastNs: t0 + 45*ms,
		TTFTNs: 10 * ms, ITLP50Ns: i.ITLP50Ns, ITLP95Ns: i.ITLP95Ns, ITLMaxNs: 30 * ms, Stalls: 1, Preemptions: 1,
		LastStallCause: StallUnknown, Fluidity: 1}, i) // no engine steps: the cause is unknown; no deadlines
	eq(t, "stalled at +50", 0, must[int](t)(r.StalledAt(t0+50*ms)))
	eq(t, "stalled at +70", 1, must[int](t)(r.StalledAt(t0+70*ms)))
	ok(t, s.EndAt(Completed, t0+50*ms))
	s2 := must[*Stream](t)(r.BeginRequestAt(Request{PromptTokens: 50, PrefixHit: PrefixMiss}, t0))
	ok(t, s2.TokenAt(1, t0+20*ms))
	ok(t, s2.EndAt(Completed, t0+21*ms))
	sn := snap(t, r)
	eq(t, "stalls", 1, sn.Counter(CounterStalls))
	eq(t, "preemptions", 1, sn.Counter(CounterPreemptions))
	eq(t, "queue", 3*ms, sn.Quantile(MetricQueue, 1))
	eq(t, "prefill", 7*ms, sn.Quantile(MetricPrefill, 1))
	eq(t, "bands", "[[0 100] [100 1000] [1000 4294967295]]", fmt.Sprint(sn.Bands()))
	eq(t, "band 0", 1, sn.SplitCount(SplitPromptBand, 0))
	eq(t, "band 1", 1, sn.SplitCount(SplitPromptBand, 1))
	eq(t, "hit", 10*ms, sn.SplitQuantile(SplitPrefixCache, 1, 1))
	eq(t, "miss", 20*ms, sn.SplitQuantile(SplitPrefixCache, 0, 1))
}

func TestStepEmitted(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 8})
	var ss []*Stream
	var hs []Handle
	for i := 0; i < 3; i++ {
		s := must[*Stream](t)(r.BeginAt(t0))
		ss = append(ss, s)
		hs = append(hs, s.Handle())
	}
	eq(t, "step 1", 3, must[int](t)(r.StepEmittedAt(hs, nil, t0+4*ms)))
	eq(t, "step 2", 2, must[int](t)(r.StepEmittedAt(hs, []uint32{1, 2, 0}, t0+6*ms)))
	_, err := r.StepEmittedAt(hs, []uint32{1, 2}, t0+6*ms)
	isErr(t, "length", ErrInvalid, err)
	_, err = r.StepEmittedAt(hs, nil, 0)
	isErr(t, "t 0", ErrInvalid, err)
	eq(t, "empty", 0, must[int](t)(r.StepEmitted(nil, nil)))
	ok(t, ss[2].EndAt(Completed, t0+7*ms))
	eq(t, "step 3", 2, must[int](t)(r.StepEmittedAt(hs, nil, t0+9*ms)))
	ok(t, ss[0].EndAt(Completed, t0+10*ms))
	ok(t, ss[1].EndAt(Completed, t0+10*ms))
	s := snap(t, r)
	eq(t, "ttft", 3, s.Count(MetricTTFT))
	eq(t, "ttft max", 4*ms, s.Quantile(MetricTTFT, 1))
	eq(t, "itl", 4, s.Count(MetricITL))
	eq(t, "itl sum", 10*ms, s.Sum(MetricITL))
	eq(t, "tokens", 8, s.Counter(CounterTokens))
	eq(t, "stale", 1, s.Counter(CounterStale))
}

// Run with -race: streams recorded from many goroutines, one stream whose
// tokens race its End from another goroutine, snapshots taken meanwhile.
func TestConcurrentStreams(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 64, MaxThreads: 16})
	race := must[Class](t)(r.AddClass("race", SLO{}))
	shared := must[*Stream](t)(r.BeginRequest(Request{Class: race}))
	const G, N = 8, 250
	var wg sync.WaitGroup
	var refusedMu sync.Mutex
	refused := uint64(0)
	for g := 0; g < G; g++ {
		wg.Add(1)
		go func(g uint64) {
			defer wg.Done()
			for i := uint64(0); i < N; i++ {
				at := t0 + i*ms
				s, err := r.BeginAt(at)
				// A begin at capacity is refused (counted in DROPPED) when
				// the ended streams' slots are not reclaimable yet: a
				// goroutine preempted inside a hook holds reclamation back,
				// and the library never waits inside a hook. Retry, bounded.
				for tries := 0; errors.Is(err, ErrFull) && tries < 1000000; tries++ {
					refusedMu.Lock()
					refused++
					refusedMu.Unlock()
					runtime.Gosched()
					s, err = r.BeginAt(at)
				}
				if err != nil {
					t.Error(err)
					return
				}
				_ = s.TokenAt(1, at+(g%4+1)*ms)
				_ = s.TokenAt(2, at+(g%4+2)*ms)
				if err := s.EndAt(Completed, at+(g%4+3)*ms); err != nil {
					t.Error(err)
				}
				_ = shared.Token(1)
			}
		}(uint64(g))
	}
	wg.Add(2)
	go func() { defer wg.Done(); _ = shared.End(Cancelled) }()
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			s, err := r.Snapshot()
			if err != nil {
				t.Error(err)
				return
			}
			_ = s.Count(MetricTTFT)
			s.Close()
		}
	}()
	wg.Wait()
	s := snap(t, r)
	d := s.Class(ClassDefault)
	eq(t, "completed", G*N, d.Counter(CounterCompleted))
	eq(t, "ttft count", G*N, d.Count(MetricTTFT))
	eq(t, "ttft min", ms, d.Quantile(MetricTTFT, 0))
	eq(t, "ttft max", 4*ms, d.Quantile(MetricTTFT, 1))
	eq(t, "ttft sum", uint64(G/4*N*(1+2+3+4))*ms, d.Sum(MetricTTFT))
	eq(t, "e2e sum", uint64(G/4*N*(3+4+5+6))*ms, d.Sum(MetricE2E))
	eq(t, "tokens", 3*G*N, d.Counter(CounterTokens))
	x := s.Class(race)
	eq(t, "race cancelled", 1, x.Counter(CounterCancelled))
	eq(t, "racing tokens", G*N, x.Counter(CounterTokens)+s.Counter(CounterStale))
	eq(t, "inflight", 0, s.Gauge(GaugeInflight))
	eq(t, "dropped", refused, s.Counter(CounterDropped))
}

func TestFormatsEncodingsMergeDelta(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 8, Model: "m-7b", Labels: []Label{{"region", "eu"}}})
	play(t, r, Request{}, []tok{{1, 5 * ms}, {1, 9 * ms}}, 9*ms, Completed)
	older := snap(t, r)
	play(t, r, Request{}, []tok{{1, 7 * ms}}, 8*ms, Completed)
	s := snap(t, r)
	m, has := s.Label("model")
	eq(t, "model", "m-7b", m)
	eq(t, "has model", true, has)
	_, has = s.Label("nope")
	eq(t, "no label", false, has)
	a, b := s.Interval()
	eq(t, "interval", true, a > 0 && b >= a)

	text := string(must[[]byte](t)(s.Format(FormatText)))
	eq(t, "text", true, strings.HasPrefix(text, "libttft "))
	js := string(must[[]byte](t)(s.Format(FormatJSON)))
	eq(t, "json", true, strings.HasPrefix(js, "{"))
	prom := string(must[[]byte](t)(s.Format(FormatPrometheus)))
	found := false
	for _, l := range strings.Split(prom, "\n") {
		if strings.HasPrefix(l, "gen_ai_server_time_to_first_token_seconds_count{") &&
			strings.Contains(l, `region="eu"`) && strings.HasSuffix(l, " 2") {
			found = true
		}
	}
	eq(t, "prometheus ttft count line", true, found)
	om := string(must[[]byte](t)(s.Format(FormatOpenMetrics)))
	eq(t, "openmetrics", true, strings.HasSuffix(om, "# EOF\n"))
	pb := must[[]byte](t)(s.Format(FormatPrometheusProtobuf))
	eq(t, "protobuf", true, len(pb) > 100)
	_, err := s.Format(Format(99))
	isErr(t, "bad format", ErrInvalid, err)

	enc := must[[]byte](t)(s.Encode())
	back := must[*Snapshot](t)(Decode(enc))
	defer back.Close()
	eq(t, "decoded count", 2, back.Count(MetricTTFT))
	eq(t, "decoded max", 7*ms, back.Quantile(MetricTTFT, 1))
	eq(t, "re-encoded", string(enc), string(must[[]byte](t)(back.Encode())))
	b64 := must[string](t)(s.EncodeBase64())
	eq(t, "one line", false, strings.ContainsAny(b64, "\n\x00"))
	eq(t, "b64 sum", 12*ms, must[*Snapshot](t)(DecodeBase64(b64)).Sum(MetricTTFT))
	_, err = Decode(enc[:len(enc)-1])
	isErr(t, "truncated", ErrCorrupt, err)
	mg := must[*Snapshot](t)(Merge(s, back))
	eq(t, "merged", 4, mg.Count(MetricTTFT))
	d := must[*Snapshot](t)(Delta(s, older))
	eq(t, "delta count", 1, d.Count(MetricTTFT))
	eq(t, "delta sum", 7*ms, d.Sum(MetricTTFT))
	_, err = Delta(older, s)
	isErr(t, "delta order", ErrInvalid, err)
}

func get(t *testing.T, port int, path string) string {
	t.Helper()
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path)
	b, err := io.ReadAll(bufio.NewReader(c))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestHTTPEndpoint(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 4})
	play(t, r, Request{}, []tok{{1, 5 * ms}}, 6*ms, Completed)
	srv := must[*HTTPServer](t)(r.Serve("127.0.0.1:0"))
	port := srv.Port()
	eq(t, "port", true, port > 0)
	m := get(t, port, "/metrics")
	eq(t, "200", true, strings.HasPrefix(m, "HTTP/1.1 200"))
	eq(t, "series", true, strings.Contains(m, `gen_ai_server_time_to_first_token_seconds_count{class="default"} 1`))
	j := get(t, port, "/report.json")
	eq(t, "json", true, strings.HasPrefix(j, "HTTP/1.1 200") && strings.Contains(j, `"ttft"`))
	eq(t, "404", true, strings.HasPrefix(get(t, port, "/nope"), "HTTP/1.1 404"))
	_, err := r.Serve("not an address")
	isErr(t, "bad address", ErrInvalid, err)
	_, err = r.Serve("127.0.0.1:" + strconv.Itoa(port))
	isErr(t, "port taken", ErrIO, err)
	ok(t, srv.Close())
	ok(t, srv.Close())
	if _, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
		t.Error("the server still accepts after Close")
	}
}

func TestVersionAndClock(t *testing.T) {
	eq(t, "major", ABIMajor, VersionNumber()/10000)
	eq(t, "string", true, strings.HasPrefix(VersionString(), "1."))
	r := newReg(t, nil)
	a := NowNs()
	b := r.NowNs()
	eq(t, "clock", true, a > 0 && b >= a)
	eq(t, "memory", true, r.Memory() > 0)
	runtime.LockOSThread()
	ok(t, r.ThreadRelease())
	runtime.UnlockOSThread()
}

// The constants of this package against tests/abi/enums.txt, which ctest
// abi_symbols keeps equal to include/ttft.h.
func TestConstantsMatchTheHeader(t *testing.T) {
	f, err := os.ReadFile("../../tests/abi/enums.txt")
	if err != nil {
		t.Fatal(err)
	}
	header := map[string]int64{}
	for _, l := range strings.Split(string(f), "\n") {
		w := strings.Fields(l)
		if len(w) == 2 && !strings.HasPrefix(l, "#") {
			v, err := strconv.ParseInt(w[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			header[w[0]] = v
		}
	}
	ours := map[string]int64{
		"TTFT_METRIC_TTFT": int64(MetricTTFT), "TTFT_METRIC_TPOT": int64(MetricTPOT),
		"TTFT_METRIC_ITL": int64(MetricITL), "TTFT_METRIC_E2E": int64(MetricE2E),
		"TTFT_METRIC_QUEUE": int64(MetricQueue), "TTFT_METRIC_PREFILL": int64(MetricPrefill),
		"TTFT_METRIC_DECODE": int64(MetricDecode), "TTFT_METRIC_OUTPUT_TOKENS": int64(MetricOutputTokens),
		"TTFT_METRIC_SEQ_ITL_P95": int64(MetricSeqITLP95), "TTFT_METRIC_SEQ_ITL_MAX": int64(MetricSeqITLMax),
		"TTFT_METRIC_ABANDONED_WAIT": int64(MetricAbandonedWait), "TTFT_METRIC_ITL_PER_TOKEN": int64(MetricITLPerToken),
		"TTFT_COUNTER_BEGUN": int64(CounterBegun), "TTFT_COUNTER_COMPLETED": int64(CounterCompleted),
		"TTFT_COUNTER_CANCELLED": int64(CounterCancelled), "TTFT_COUNTER_ERRORS": int64(CounterErrors),
		"TTFT_COUNTER_DROPPED": int64(CounterDropped), "TTFT_COUNTER_TOKENS": int64(CounterTokens),
		"TTFT_COUNTER_STALLS": int64(CounterStalls), "TTFT_COUNTER_STALLED_SEQS": int64(CounterStalledSeqs),
		"TTFT_COUNTER_ABANDONED": int64(CounterAbandoned), "TTFT_COUNTER_SLO_MET": int64(CounterSLOMet),
		"TTFT_COUNTER_CLOCK_CLAMPED": int64(CounterClockClamped), "TTFT_COUNTER_PREEMPTIONS": int64(CounterPreemptions),
		"TTFT_COUNTER_NO_TPOT": int64(CounterNoTPOT), "TTFT_COUNTER_STALE": int64(CounterStale),
		"TTFT_COUNTER_SLO_JUDGED": int64(CounterSLOJudged), "TTFT_COUNTER_TRACE_ID_INVALID": int64(CounterTraceIDInvalid),
		"TTFT_COUNTER_BARRIER_FALLBACKS": int64(CounterBarrierFallbacks), "TTFT_PHASE_RESUMED": int64(PhaseResumed),
		"TTFT_COUNTER_TOKEN_DEADLINES":        int64(CounterTokenDeadlines),
		"TTFT_COUNTER_TOKEN_DEADLINES_MISSED": int64(CounterTokenDeadlinesMissed),
		"TTFT_COUNTER_FLUID":                  int64(CounterFluid), "TTFT_COUNTER_FLUID_JUDGED": int64(CounterFluidJudged),
		"TTFT_SPLIT_PREFILL_BY_PREFIX": int64(SplitPrefillByPrefix),
		"TTFT_PREFIX_MISS":             int64(PrefixBandMiss), "TTFT_PREFIX_HIT": int64(PrefixBandHit),
		"TTFT_PREFIX_PARTIAL": int64(PrefixBandPartial),
		"TTFT_STALL_UNKNOWN":  int64(StallUnknown), "TTFT_STALL_PREFILL": int64(StallPrefill),
		"TTFT_STALL_PREEMPTED": int64(StallPreempted), "TTFT_STALL_NOT_SCHEDULED": int64(StallNotScheduled),
		"TTFT_STALL_ENGINE_IDLE": int64(StallEngineIdle),
		"TTFT_STALL_SLOW_STEP":   int64(StallSlowStep),
		"TTFT_SLOWEST_TTFT":      int64(SlowestTTFT), "TTFT_SLOWEST_GAP": int64(SlowestGap),
		"TTFT_COMPLETED": int64(Completed), "TTFT_CANCELLED": int64(Cancelled), "TTFT_ERROR": int64(Failed),
		"TTFT_FORMAT_TEXT": int64(FormatText), "TTFT_FORMAT_JSON": int64(FormatJSON),
		"TTFT_FORMAT_PROMETHEUS": int64(FormatPrometheus), "TTFT_FORMAT_OPENMETRICS": int64(FormatOpenMetrics),
		"TTFT_FORMAT_PROMETHEUS_PROTOBUF": int64(FormatPrometheusProtobuf),
		"TTFT_FORMAT_OTLP_PROTOBUF":       int64(FormatOTLPProtobuf),
		"TTFT_PHASE_SCHEDULED":            int64(PhaseScheduled), "TTFT_PHASE_PREEMPTED": int64(PhasePreempted),
		"TTFT_GAUGE_INFLIGHT": int64(GaugeInflight), "TTFT_GAUGE_LIVE_STALLS": int64(GaugeLiveStalls),
		"TTFT_GAUGE_MEMORY": int64(GaugeMemory), "TTFT_GAUGE_COARSE": int64(GaugeCoarse),
		"TTFT_SPLIT_PREFIX_CACHE": int64(SplitPrefixCache), "TTFT_SPLIT_PROMPT_BAND": int64(SplitPromptBand),
		"TTFT_CLOCK_MONOTONIC": int64(ClockMonotonic), "TTFT_CLOCK_TSC": int64(ClockTSC),
		"TTFT_CLOCK_FASTEST": int64(ClockFastest),
		"TTFT_EINVAL":        int64(ErrInvalid), "TTFT_ESTALE": int64(ErrStale), "TTFT_EFULL": int64(ErrFull),
		"TTFT_ENOMEM": int64(ErrNoMem), "TTFT_ERANGE": int64(ErrRange), "TTFT_ECORRUPT": int64(ErrCorrupt),
		"TTFT_EEXIST": int64(ErrExist), "TTFT_EIO": int64(ErrIO), "TTFT_ENOTSUP": int64(ErrNotSupported),
		"TTFT_ECLOCK": int64(ErrClock), "TTFT_COUNTER_CLOCK_REFUSED": int64(CounterClockRefused),
		"TTFT_COUNTER_PUBLISH_FAILED": int64(CounterPublishFailed), "TTFT_COUNTER_SEGMENTS_SKIPPED": int64(CounterSegmentsSkipped),
		"TTFT_COUNTER_PROCESSES_EXITED": int64(CounterProcessesExited), "TTFT_GAUGE_PROCESSES": int64(GaugeProcesses),
	}
	for k, v := range ours {
		if hv, has := header[k]; !has || hv != v {
			t.Errorf("%s: header %v (present %v), Go %d", k, hv, has, v)
		}
	}
	// every value of the enums this package mirrors has a constant here: a
	// value the header appends (a counter, a phase, a cause...) must be added
	for k := range header {
		for _, p := range []string{"TTFT_METRIC_", "TTFT_COUNTER_", "TTFT_PHASE_", "TTFT_FORMAT_", "TTFT_GAUGE_",
			"TTFT_SPLIT_", "TTFT_CLOCK_", "TTFT_PREFIX_", "TTFT_STALL_", "TTFT_SLOWEST_"} {
			if strings.HasPrefix(k, p) && !strings.HasSuffix(k, "COUNT_") && !strings.HasSuffix(k, "_COUNT") {
				if _, has := ours[k]; !has {
					t.Errorf("%s is in include/ttft.h but has no constant in package ttft", k)
				}
			}
		}
	}
	eq(t, "metrics", header["TTFT_METRIC_COUNT_"], int64(len(AllMetrics())))
	eq(t, "counters", header["TTFT_COUNTER_COUNT_"], int64(len(AllCounters())))
	eq(t, "causes", header["TTFT_STALL_CAUSE_COUNT"], int64(len(AllStallCauses())))
	// every error code in the header has a sentinel here
	for k, v := range header {
		if strings.HasPrefix(k, "TTFT_E") && k != "TTFT_E__LAST" && v < 0 {
			if _, has := ours[k]; !has {
				t.Errorf("%s (%d) has no Err sentinel", k, v)
			}
		}
	}
	if len(ours) < 50 {
		t.Errorf("%d constants compared", len(ours))
	}
}
