package ttft

// The 1.2 calls through the Go API, on known streams with explicit
// timestamps and exact expected values: engine steps and the cause of each
// stall (docs/metrics.md, "stall causes"), prefix-cache reuse as counts and
// its bands, status sums and means, configuration errors with the
// library's reason, reserved label names, and cgo's struct layout against
// the C compiler's (tests/abi/layout.c).

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// decodeSteps records 10 ms decode-only engine steps from t0+from to t0+to (ms).
func decodeSteps(t *testing.T, r *Registry, from, to uint64) int {
	t.Helper()
	n := 0
	for x := from; x < to; x += 10 {
		ok(t, r.EngineStepAt(&StepInfo{DecodeSeqs: 3}, t0+x*ms, t0+(x+10)*ms))
		n++
	}
	return n
}

// One stream of class "chat" (stall budget 100 ms) meets one stall of each
// cause; every count and stalled time is exact (the same stream as the Rust
// crate's tests/v12.rs).
func TestEngineStepsGiveEveryStallItsCause(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 8})
	chat := must[Class](t)(r.AddClass("chat", SLO{StallThreshold: 100 * time.Millisecond}))
	s := must[*Stream](t)(r.BeginRequestAt(Request{Class: chat}, t0))
	cause := func() StallCause { return must[SeqInfo](t)(s.Stats()).LastStallCause }
	steps := 0
	// five 10 ms decode steps, each followed by its token: the usual step is 10 ms
	for k := uint64(0); k < 5; k++ {
		steps += decodeSteps(t, r, k*10, k*10+10)
		ok(t, s.TokenAt(1, t0+(k+1)*10*ms))
	}
	eq(t, "no stall yet", NoStallCause, cause())
	// PREFILL: a 150 ms step carrying another request's prompt fills (50, 200] ms
	ok(t, r.EngineStepAt(&StepInfo{PrefillTokens: 4096, DecodeSeqs: 3, Kind: 7}, t0+50*ms, t0+200*ms))
	ok(t, s.TokenAt(1, t0+200*ms))
	eq(t, "prefill", StallPrefill, cause())
	steps += decodeSteps(t, r, 200, 210)
	ok(t, s.TokenAt(1, t0+210*ms))
	// ENGINE_IDLE: nothing runs from 210 to 400 ms, then one 10 ms step
	steps += decodeSteps(t, r, 400, 410)
	ok(t, s.TokenAt(1, t0+410*ms))
	eq(t, "engine idle", StallEngineIdle, cause())
	// PREEMPTED: marked at 420 ms (first half of the gap), resumed at 550
	steps += decodeSteps(t, r, 410, 420)
	ok(t, s.MarkAt(PhasePreempted, t0+420*ms))
	steps += decodeSteps(t, r, 420, 560)
	ok(t, s.MarkAt(PhaseResumed, t0+550*ms))
	ok(t, s.TokenAt(1, t0+560*ms))
	eq(t, "preempted", StallPreempted, cause())
	// NOT_SCHEDULED: decode steps run for 160 ms without this stream
	steps += decodeSteps(t, r, 560, 720)
	ok(t, s.TokenAt(1, t0+720*ms))
	eq(t, "not scheduled", StallNotScheduled, cause())
	// UNKNOWN: no step ends inside (720, 900] ms
	ok(t, s.TokenAt(1, t0+900*ms))
	info := must[SeqInfo](t)(s.Stats())
	eq(t, "unknown", StallUnknown, info.LastStallCause)
	eq(t, "stalls", uint32(5), info.Stalls)
	eq(t, "preemptions", uint32(1), info.Preemptions)
	ok(t, s.EndAt(Completed, t0+910*ms))
	eq(t, "steps", 38, steps)

	sn := snap(t, r)
	want := []CauseStat{
		{StallUnknown, 1, 180 * ms},
		{StallPrefill, 1, 150 * ms},
		{StallPreempted, 1, 150 * ms},
		{StallNotScheduled, 1, 160 * ms},
		{StallEngineIdle, 1, 200 * ms},
		{StallSlowStep, 0, 0}, // its own test below
	}
	if got := sn.StallCauses(); !reflect.DeepEqual(want, got) {
		t.Errorf("causes: want %v, got %v", want, got)
	}
	if got := sn.Class(chat).StallCauses(); !reflect.DeepEqual(want, got) {
		t.Errorf("chat causes: want %v, got %v", want, got)
	}
	eq(t, "prefill stalls", 1, sn.StallsByCause(StallPrefill))
	eq(t, "prefill ns", 150*ms, sn.StalledNsByCause(StallPrefill))
	eq(t, "idle ns in chat", 200*ms, sn.Class(chat).StalledNsByCause(StallEngineIdle))
	eq(t, "default class", 0, sn.Class(ClassDefault).StallsByCause(StallPrefill))
	eq(t, "unknown cause", 0, sn.StallsByCause(StallCause(99)))
	eq(t, "stalls counter", 5, sn.Counter(CounterStalls))
	eq(t, "preemptions counter", 1, sn.Counter(CounterPreemptions))
	eq(t, "prefill steps", 1, sn.EngineStepCount(true))
	eq(t, "prefill step sum", 150*ms, sn.EngineStepSum(true))
	eq(t, "prefill step max", 150*ms, sn.EngineStepQuantile(true, 1))
	eq(t, "decode steps", 38, sn.EngineStepCount(false))
	eq(t, "decode step sum", 380*ms, sn.EngineStepSum(false))
	eq(t, "decode step min", 10*ms, sn.EngineStepQuantile(false, 0))
	eq(t, "decode step max", 10*ms, sn.EngineStepQuantile(false, 1))
	eq(t, "q out of range", 0, sn.EngineStepQuantile(false, 1.5))
	prom := strings.Split(string(must[[]byte](t)(sn.Format(FormatPrometheus))), "\n")
	for _, w := range []string{
		`llm_stalls_total{class="chat",cause="prefill"} 1`,
		`llm_stalls_total{class="chat",cause="engine_idle"} 1`,
		`llm_stall_seconds_total{class="chat",cause="unknown"} 0.18`,
		`llm_stall_seconds_total{class="chat",cause="prefill"} 0.15`,
		`llm_stall_seconds_total{class="chat",cause="engine_idle"} 0.2`,
		`llm_engine_step_seconds_count{prefill="false"} 38`,
		`llm_engine_step_seconds_count{prefill="true"} 1`,
	} {
		found := false
		for _, l := range prom {
			found = found || l == w
		}
		if !found {
			t.Errorf("no line %q in the Prometheus exposition", w)
		}
	}
	back := must[*Snapshot](t)(Decode(must[[]byte](t)(sn.Encode())))
	defer back.Close()
	if got := back.StallCauses(); !reflect.DeepEqual(want, got) {
		t.Errorf("decoded causes: want %v, got %v", want, got)
	}
	var names []string
	for _, c := range AllStallCauses() {
		names = append(names, c.Name())
	}
	eq(t, "names", "unknown prefill preempted not_scheduled engine_idle slow_step", strings.Join(names, " "))
	eq(t, "unknown name", "", StallCause(99).Name())
}

func TestEngineStepArguments(t *testing.T) {
	r := newReg(t, nil)
	now := r.NowNs()
	isErr(t, "start 0", ErrInvalid, r.EngineStepAt(nil, 0, now))
	isErr(t, "end 0", ErrInvalid, r.EngineStepAt(nil, now, 0))
	isErr(t, "now, start 0", ErrInvalid, r.EngineStep(&StepInfo{}, 0))
	ok(t, r.EngineStepAt(nil, t0+5*ms, t0+2*ms)) // end before start: clamped, 0 ns
	ok(t, r.EngineStep(&StepInfo{PrefillTokens: 1}, now))
	sn := snap(t, r)
	eq(t, "decode steps", 1, sn.EngineStepCount(false))
	eq(t, "clamped", 0, sn.EngineStepSum(false))
	eq(t, "prefill steps", 1, sn.EngineStepCount(true))
	// a registry that never saw a step: its stalls are unknown
	r2 := newReg(t, &Config{StallThreshold: 20 * time.Millisecond})
	play(t, r2, Request{}, []tok{{1, ms}, {1, 31 * ms}}, 32*ms, Completed)
	sn2 := snap(t, r2)
	eq(t, "unknown", 1, sn2.StallsByCause(StallUnknown))
	eq(t, "unknown ns", 30*ms, sn2.StalledNsByCause(StallUnknown))
	eq(t, "no steps", 0, sn2.EngineStepCount(false)+sn2.EngineStepCount(true))
	// after Close
	r3 := must[*Registry](t)(New(nil))
	r3.Close()
	isErr(t, "closed", ErrClosed, r3.EngineStep(nil, now))
}

// AnnotateCached's bands: miss below PrefixHitMinTokens, partial below half
// the prompt, hit from half on; TTFT and PREFILL split by them.
func TestAnnotateCachedBands(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 16, PromptBandEdges: []uint32{512}})
	for _, c := range []struct {
		prompt, cached uint32
		sched, first   uint64
	}{
		{1000, 0, 1, 10},   // miss
		{1000, 15, 2, 12},  // miss: below the default 16
		{1000, 400, 4, 20}, // partial: 800 < 1000
		{1000, 500, 1, 5},  // hit: exactly half
		{100, 100, 3, 7},   // hit
	} {
		s := must[*Stream](t)(r.BeginAt(t0))
		ok(t, s.MarkAt(PhaseScheduled, t0+c.sched*ms))
		ok(t, s.AnnotateCached(c.prompt, c.cached))
		ok(t, s.TokenAt(1, t0+c.first*ms))
		isErr(t, "after the first token", ErrRange, s.AnnotateCached(c.prompt, c.cached))
		ok(t, s.EndAt(Completed, t0+30*ms))
	}
	sn := snap(t, r)
	q := func(sp Split, b PrefixBand, x float64) uint64 { return sn.SplitQuantile(sp, uint32(b), x) }
	eq(t, "miss", 2, sn.SplitCount(SplitPrefixCache, uint32(PrefixBandMiss)))
	eq(t, "partial", 1, sn.SplitCount(SplitPrefixCache, uint32(PrefixBandPartial)))
	eq(t, "hit", 2, sn.SplitCount(SplitPrefixCache, uint32(PrefixBandHit)))
	eq(t, "miss ttft min", 10*ms, q(SplitPrefixCache, PrefixBandMiss, 0))
	eq(t, "miss ttft max", 12*ms, q(SplitPrefixCache, PrefixBandMiss, 1))
	eq(t, "partial ttft", 20*ms, q(SplitPrefixCache, PrefixBandPartial, 1))
	eq(t, "hit ttft min", 5*ms, q(SplitPrefixCache, PrefixBandHit, 0))
	eq(t, "hit ttft max", 7*ms, q(SplitPrefixCache, PrefixBandHit, 1))
	eq(t, "miss prefills", 2, sn.SplitCount(SplitPrefillByPrefix, uint32(PrefixBandMiss)))
	eq(t, "miss prefill min", 9*ms, q(SplitPrefillByPrefix, PrefixBandMiss, 0))
	eq(t, "miss prefill max", 10*ms, q(SplitPrefillByPrefix, PrefixBandMiss, 1))
	eq(t, "partial prefill", 16*ms, q(SplitPrefillByPrefix, PrefixBandPartial, 1))
	eq(t, "hit prefill min", 4*ms, q(SplitPrefillByPrefix, PrefixBandHit, 0))
	eq(t, "hit prefill max", 4*ms, q(SplitPrefillByPrefix, PrefixBandHit, 1))
	eq(t, "prompt band 0", 1, sn.SplitCount(SplitPromptBand, 0))
	eq(t, "prompt band 1", 4, sn.SplitCount(SplitPromptBand, 1))

	// a higher threshold: 50 of 100 cached is a miss there
	r2 := newReg(t, &Config{PrefixHitMinTokens: 64})
	s := must[*Stream](t)(r2.BeginAt(t0))
	isErr(t, "prompt 0", ErrInvalid, s.AnnotateCached(0, 0))
	isErr(t, "cached > prompt", ErrInvalid, s.AnnotateCached(10, 11))
	ok(t, s.AnnotateCached(100, 50))
	ok(t, s.TokenAt(1, t0+3*ms))
	ok(t, s.EndAt(Completed, t0+4*ms))
	s = must[*Stream](t)(r2.BeginAt(t0))
	ok(t, s.AnnotateCached(100, 64)) // the threshold, and more than half: hit
	ok(t, s.TokenAt(1, t0+2*ms))
	ok(t, s.EndAt(Completed, t0+4*ms))
	isErr(t, "ended", ErrStale, s.AnnotateCached(100, 64))
	sn2 := snap(t, r2)
	eq(t, "miss at 64", 1, sn2.SplitCount(SplitPrefixCache, uint32(PrefixBandMiss)))
	eq(t, "hit at 64", 1, sn2.SplitCount(SplitPrefixCache, uint32(PrefixBandHit)))
	eq(t, "partial at 64", 0, sn2.SplitCount(SplitPrefixCache, uint32(PrefixBandPartial)))
	eq(t, "stale", 1, sn2.Counter(CounterStale))
}

// Status sums and means reproduce "mean TTFT of completed requests".
func TestStatusSumsAndMeans(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 16})
	play(t, r, Request{}, []tok{{1, 5 * ms}, {1, 10 * ms}, {1, 15 * ms}}, 20*ms, Completed)
	play(t, r, Request{}, []tok{{1, 8 * ms}, {4, 20 * ms}}, 30*ms, Completed)
	play(t, r, Request{}, []tok{{1, 40 * ms}}, 50*ms, Cancelled)
	play(t, r, Request{}, nil, 7*ms, Failed)
	sn := snap(t, r)
	done := sn.Status(Completed)
	eq(t, "ttft count", 2, done.Count(MetricTTFT))
	eq(t, "ttft sum", 13*ms, done.Sum(MetricTTFT))
	eq(t, "ttft mean", 6.5e6, done.Mean(MetricTTFT))
	eq(t, "e2e sum", 50*ms, done.Sum(MetricE2E))
	eq(t, "e2e mean", 25e6, done.Mean(MetricE2E))
	eq(t, "tokens", 8, done.Sum(MetricOutputTokens))
	eq(t, "tokens mean", 4.0, done.Mean(MetricOutputTokens))
	eq(t, "tpot sum", 5*ms+3*ms, done.Sum(MetricTPOT)) // (15-5)/2, (20-8)/(5-1)
	eq(t, "itl: not a status metric", 0, done.Sum(MetricITL))
	eq(t, "itl mean", 0.0, done.Mean(MetricITL))
	eq(t, "cancelled ttft", 40*ms, sn.Status(Cancelled).Sum(MetricTTFT))
	eq(t, "cancelled e2e", 50*ms, sn.Status(Cancelled).Sum(MetricE2E))
	eq(t, "error e2e", 7*ms, sn.Status(Failed).Sum(MetricE2E))
	eq(t, "error ttft", 0, sn.Status(Failed).Sum(MetricTTFT))
	eq(t, "error ttft mean", 0.0, sn.Status(Failed).Mean(MetricTTFT))
	eq(t, "every stream's ttft", 53*ms, sn.Sum(MetricTTFT))
	eq(t, "default class", 13*ms, sn.Class(ClassDefault).Status(Completed).Sum(MetricTTFT))
	eq(t, "unknown class", 0, sn.Class(5).Status(Completed).Sum(MetricTTFT))
	// judged: every completed and failed stream (a cancel without a missed budget is not)
	eq(t, "judged", 3, sn.Counter(CounterSLOJudged))
	eq(t, "met", 2, sn.Counter(CounterSLOMet))
}

func reason(t *testing.T, cfg Config) string {
	t.Helper()
	err := CheckConfig(&cfg)
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("CheckConfig: want a *ConfigError, got %v", err)
	}
	isErr(t, "wraps EINVAL", ErrInvalid, err)
	// New refuses it with the same reason
	_, err2 := New(&cfg)
	var ce2 *ConfigError
	if !errors.As(err2, &ce2) || ce2.Reason != ce.Reason {
		t.Errorf("New: want reason %q, got %v", ce.Reason, err2)
	}
	return ce.Reason
}

func TestConfigCheckSaysWhatIsWrong(t *testing.T) {
	ok(t, CheckConfig(nil))
	ok(t, CheckConfig(&Config{Labels: []Label{{"region", "eu"}}, PrefixHitMinTokens: 1}))
	eq(t, "reserved", `const_labels[1].name "view" is reserved (the exporters write it; see TTFT_RESERVED_LABELS)`,
		reason(t, Config{Labels: []Label{{"region", "eu"}, {"view", "x"}}}))
	eq(t, "__", `const_labels[0].name "__x" starts with "__" (reserved by Prometheus)`,
		reason(t, Config{Labels: []Label{{"__x", "eu"}}}))
	eq(t, "schema", "native_schema 9 is outside -4..8", reason(t, Config{NativeSchema: func() *int { v := 9; return &v }()}))
	eq(t, "edges", "prompt_band_edges[1] = 50 is not above prompt_band_edges[0] = 100 (edges ascend)",
		reason(t, Config{PromptBandEdges: []uint32{100, 50}}))
	eq(t, "threads", "max_threads 300 is above 256", reason(t, Config{MaxThreads: 300}))
	eq(t, "memory", "memory_limit 1000 bytes is below TTFT_MIN_MEMORY_LIMIT (1048576)",
		reason(t, Config{MemoryLimit: 1000}))
	eq(t, "inflight", "max_inflight 2000000 is outside 1..1048576 (TTFT_MAX_INFLIGHT)",
		reason(t, Config{MaxInflight: 2000000}))
	// what the package refuses before C sees it has a reason too
	eq(t, "nul", `model "a\x00b" contains a NUL byte`, reason(t, Config{Model: "a\x00b"}))
	eq(t, "nul label", `const_labels[0].value "x\x00" contains a NUL byte`,
		reason(t, Config{Labels: []Label{{"region", "x\x00"}}}))
	eq(t, "edges count", "prompt_band_edges: 8 edges, at most 7 (TTFT_MAX_BANDS - 1)",
		reason(t, Config{PromptBandEdges: []uint32{1, 2, 3, 4, 5, 6, 7, 8}}))
	eq(t, "buckets", "prom_buckets: metric 11 has no configurable buckets (metrics 0..10)",
		reason(t, Config{PromBuckets: map[Metric][]uint64{MetricITLPerToken: {1, 2}}}))
	err := CheckConfig(&Config{Labels: []Label{{"le", "x"}}})
	eq(t, "text", `ttft: invalid configuration: const_labels[0].name "le" is reserved (the exporters write it; see TTFT_RESERVED_LABELS)`,
		err.Error())
	eq(t, "reserved", true, IsReservedLabel("view") && IsReservedLabel("__name__") && !IsReservedLabel("region"))
}

// ReservedLabels equals the header's TTFT_RESERVED_LABELS, and the library
// refuses each of them, naming it.
func TestReservedLabelsMatchTheHeader(t *testing.T) {
	h, err := os.ReadFile("../../include/ttft.h")
	if err != nil {
		t.Fatal(err)
	}
	text := string(h)
	i := strings.Index(text, "#define TTFT_RESERVED_LABELS")
	if i < 0 {
		t.Fatal("no TTFT_RESERVED_LABELS in ttft.h")
	}
	var body strings.Builder
	for _, l := range strings.Split(text[i:], "\n") {
		l = strings.TrimRight(l, " \t")
		body.WriteString(strings.TrimSuffix(l, "\\"))
		if !strings.HasSuffix(l, "\\") {
			break
		}
	}
	parts := strings.Split(body.String(), `"`)
	var header []string
	for j := 1; j < len(parts); j += 2 {
		header = append(header, parts[j])
	}
	if len(header) < 14 || !reflect.DeepEqual(header, ReservedLabels) {
		t.Fatalf("header %v, package %v", header, ReservedLabels)
	}
	for _, name := range header {
		err := CheckConfig(&Config{Labels: []Label{{name, "x"}}})
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(ce.Reason, `"`+name+`" is reserved`) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// cgo's view of every struct and scalar against the C compiler's
// (tests/abi/layout.c, compiled with $CC or cc against include/ttft.h): a
// missing compiler fails the test, it does not skip.
func TestStructLayoutMatchesTheHeader(t *testing.T) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	bin := filepath.Join(t.TempDir(), "layout")
	out, err := exec.Command(cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", "../../include",
		"../../tests/abi/layout.c", "-o", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("%s failed to compile tests/abi/layout.c: %v\n%s", cc, err, out)
	}
	out, err = exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	c := map[string]uintptr{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		w := strings.Fields(l)
		v, err := strconv.ParseUint(w[len(w)-1], 10, 64)
		if err != nil {
			t.Fatal(l)
		}
		c[strings.Join(w[:len(w)-1], " ")] = uintptr(v)
	}
	g := cgoLayout()
	for k, v := range c {
		if gv, has := g[k]; !has {
			t.Errorf("%s: printed by layout.c, not in cgoLayout (abi_layout.go)", k)
		} else if gv != v {
			t.Errorf("%s: C %d, cgo %d", k, v, gv)
		}
	}
	for k := range g {
		if _, has := c[k]; !has {
			t.Errorf("%s: in cgoLayout, not printed by layout.c", k)
		}
	}
	if len(c) < 67 {
		t.Errorf("%d facts", len(c))
	}
	size, fields := stepInfoInit()
	eq(t, "step_info_init size", c["size ttft_step_info"], size)
	eq(t, "step_info_init fields", [4]uint32{}, fields)
}

// Engine steps reported from several goroutines while others record tokens
// and a third takes snapshots (go test -race runs this): every step is
// counted exactly once, with its exact duration.
func TestConcurrentEngineSteps(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 64, MaxThreads: 16})
	const G, N = 4, 500
	var wg sync.WaitGroup
	for g := 0; g < G; g++ {
		wg.Add(2)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < N; i++ {
				info := StepInfo{DecodeSeqs: 8, PrefillTokens: uint32(i % 2)}
				start := t0 + uint64(i)*ms
				if err := r.EngineStepAt(&info, start, start+uint64(g+1)*ms); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
		go func() {
			defer wg.Done()
			s, err := r.Begin()
			if err != nil {
				t.Error(err)
				return
			}
			for i := 0; i < N; i++ {
				s.Token(1)
			}
			s.End(Completed)
		}()
	}
	// The snapshot goroutine is joined before the test returns: Close (the
	// test's cleanup) must not race a call on the registry. Not joining it
	// let a Snapshot run on the freed registry (a SIGSEGV in CI).
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-done:
				return
			default:
				if sn, err := r.Snapshot(); err == nil {
					sn.StallCauses()
					sn.Close()
				}
			}
		}
	}()
	wg.Wait()
	close(done)
	<-stopped
	sn := snap(t, r)
	eq(t, "prefill steps", uint64(G*N/2), sn.EngineStepCount(true))
	eq(t, "decode steps", uint64(G*N/2), sn.EngineStepCount(false))
	// goroutine g's steps last g+1 ms: (1+2+3+4) ms * N
	eq(t, "step time", uint64(10*N)*ms, sn.EngineStepSum(true)+sn.EngineStepSum(false))
	eq(t, "tokens", uint64(G*N), sn.Counter(CounterTokens))
}

// Request ids, trace ids and the k slowest requests (SlowestK 2): the lists
// rank by TTFT and by longest gap, with ids, values, status and the stall
// cause of the longest gap (the same streams as the Rust crate's test).
func TestSlowestRequestsWithIDs(t *testing.T) {
	k := uint32(2)
	r := newReg(t, &Config{MaxInflight: 8, SlowestK: &k, StallThreshold: 100 * time.Millisecond})
	const trace = "0af7651916cd43dd8448eb211c80319c"
	play(t, r, Request{RequestID: "req-1", TraceID: trace}, []tok{{1, 10 * ms}, {1, 20 * ms}}, 30*ms, Completed)
	// a 200 ms gap filled by a step that carried prefill: a prefill stall
	s2 := must[*Stream](t)(r.BeginRequestAt(Request{RequestID: "req-2", TraceID: "XYZ"}, t0))
	ok(t, s2.TokenAt(1, t0+30*ms))
	ok(t, r.EngineStepAt(&StepInfo{DecodeSeqs: 2, PrefillTokens: 2048}, t0+30*ms, t0+230*ms))
	ok(t, s2.TokenAt(1, t0+230*ms))
	ok(t, s2.EndAt(Completed, t0+240*ms))
	play(t, r, Request{RequestID: "req-3"}, []tok{{1, 20 * ms}, {1, 70 * ms}}, 80*ms, Cancelled)
	play(t, r, Request{RequestID: "req-4"}, nil, 5*ms, Cancelled)
	sn := snap(t, r)
	eq(t, "trace id invalid", 1, sn.Counter(CounterTraceIDInvalid))
	ttft := sn.Slowest(SlowestTTFT)
	if len(ttft) != 2 {
		t.Fatalf("slowest by TTFT: %+v", ttft)
	}
	eq(t, "ttft[0]", "req-2 30000000", fmt.Sprint(ttft[0].RequestID, " ", ttft[0].ValueNs))
	eq(t, "ttft[1]", "req-3 20000000", fmt.Sprint(ttft[1].RequestID, " ", ttft[1].ValueNs))
	top := ttft[0]
	eq(t, "top", SlowRequest{ValueNs: 30 * ms, TTFTNs: 30 * ms, MaxGapNs: 200 * ms, TBeginNs: t0, TEndNs: t0 + 240*ms,
		TEndUnixNs: top.TEndUnixNs, Tokens: 2, Class: ClassDefault, Status: Completed, Cause: StallPrefill,
		RequestID: "req-2", TraceID: "", Fluidity: 1}, top) // no token deadline: fluidity 1
	eq(t, "second status", Cancelled, ttft[1].Status)
	eq(t, "second cause", StallUnknown, ttft[1].Cause) // its longest gap was no stall
	gap := sn.Class(ClassDefault).Slowest(SlowestGap)
	if len(gap) != 2 {
		t.Fatalf("slowest by gap: %+v", gap)
	}
	eq(t, "gap[0]", "req-2 200000000", fmt.Sprint(gap[0].RequestID, " ", gap[0].ValueNs))
	eq(t, "gap[1]", "req-3 50000000", fmt.Sprint(gap[1].RequestID, " ", gap[1].ValueNs))
	eq(t, "unknown class", 0, len(sn.Class(7).Slowest(SlowestTTFT)))
	eq(t, "unknown ranking", 0, len(sn.Slowest(SlowestBy(9))))

	// the trace id of a listed request, and how ids are kept
	one := uint32(1)
	r2 := newReg(t, &Config{SlowestK: &one})
	play(t, r2, Request{RequestID: strings.Repeat("x", 100), TraceID: trace}, []tok{{1, 7 * ms}}, 8*ms, Completed)
	play(t, r2, Request{RequestID: "a\tb"}, []tok{{1, 3 * ms}, {1, 9 * ms}}, 10*ms, Failed)
	sn2 := snap(t, r2)
	top2 := sn2.Slowest(SlowestTTFT)[0]
	eq(t, "id cut at 63 bytes", strings.Repeat("x", 63), top2.RequestID)
	eq(t, "trace id", trace, top2.TraceID)
	g := sn2.Slowest(SlowestGap)[0]
	eq(t, "control character", "a?b 6000000 error", fmt.Sprint(g.RequestID, " ", g.ValueNs, " ", g.Status.Name()))

	// no lists with SlowestK 0; a NUL in an id is '?' (client_ids_test.go)
	zero := uint32(0)
	r3 := newReg(t, &Config{SlowestK: &zero})
	ok(t, must[*Stream](t)(r3.BeginRequest(Request{RequestID: "a\x00b"})).End(Completed))
	play(t, r3, Request{RequestID: "q"}, []tok{{1, ms}}, 2*ms, Completed)
	eq(t, "no lists", 0, len(snap(t, r3).Slowest(SlowestTTFT)))
	k65 := uint32(65)
	eq(t, "k past 64", "slowest_k 65 is above TTFT_MAX_SLOWEST_K (64)", reason(t, Config{SlowestK: &k65}))
}

// A server whose every generating stream is in every step (1.3): a 300 ms
// decode step that produced the stream's token was itself slow; nothing
// was left out, so the stall is StallSlowStep, not StallNotScheduled.
func TestSlowStepIsItsOwnCause(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 8})
	chat := must[Class](t)(r.AddClass("chat", SLO{StallThreshold: 100 * time.Millisecond}))
	s := must[*Stream](t)(r.BeginRequestAt(Request{Class: chat}, t0))
	for k := uint64(0); k < 5; k++ {
		decodeSteps(t, r, k*10, k*10+10)
		ok(t, s.TokenAt(1, t0+(k+1)*10*ms))
	}
	ok(t, r.EngineStepAt(&StepInfo{DecodeSeqs: 3}, t0+50*ms, t0+350*ms))
	ok(t, s.TokenAt(1, t0+350*ms))
	eq(t, "slow step", StallSlowStep, must[SeqInfo](t)(s.Stats()).LastStallCause)
	ok(t, s.EndAt(Completed, t0+360*ms))
	sn := snap(t, r)
	eq(t, "slow steps", 1, sn.StallsByCause(StallSlowStep))
	eq(t, "slow ns", 300*ms, sn.StalledNsByCause(StallSlowStep))
	eq(t, "not scheduled", 0, sn.StallsByCause(StallNotScheduled))
	eq(t, "name", "slow_step", StallSlowStep.Name())
}
