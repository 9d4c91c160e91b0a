package ttft_test

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"ttft"
)

// A request handler: begin where the clock starts, Token as chunks reach
// the client, End once. Timestamps are explicit here so that the output is
// exact; a server calls Token() and End() without them (now).
func Example() {
	reg, err := ttft.New(&ttft.Config{
		MaxInflight: 256,
		Model:       "qwen2.5-7b",
		Classes:     []ttft.ClassConfig{{Name: "chat", SLO: ttft.SLO{TTFT: 300 * time.Millisecond}}},
	})
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	chat, _ := reg.FindClass("chat")

	const ms = uint64(time.Millisecond)
	t0 := ttft.NowNs()
	s, err := reg.BeginRequestAt(ttft.Request{Class: chat, PromptTokens: 812}, t0)
	if err != nil {
		panic(err) // errors.Is(err, ttft.ErrFull): no free slot
	}
	s.TokenAt(1, t0+120*ms) // the first chunk is on the wire: TTFT
	s.TokenAt(3, t0+160*ms) // a 3-token speculative step: one gap
	s.EndAt(ttft.Completed, t0+170*ms)

	snap, _ := reg.Snapshot()
	defer snap.Close()
	fmt.Println("TTFT max:", time.Duration(snap.Quantile(ttft.MetricTTFT, 1)))
	fmt.Println("ITL max:", time.Duration(snap.Quantile(ttft.MetricITL, 1)))
	fmt.Println("tokens:", snap.Counter(ttft.CounterTokens))
	a, _ := snap.Class(chat).Attainment()
	fmt.Println("chat attainment:", a)
	prom, _ := snap.Format(ttft.FormatPrometheus)
	fmt.Println(strings.Contains(string(prom), `gen_ai_server_time_to_first_token_seconds_count{class="chat",model="qwen2.5-7b"} 1`))
	// Output:
	// TTFT max: 120ms
	// ITL max: 40ms
	// tokens: 4
	// chat attainment: 1
	// true
}

// A continuous-batching engine records one call per decode step.
func ExampleRegistry_StepEmitted() {
	reg, _ := ttft.New(&ttft.Config{MaxInflight: 64})
	defer reg.Close()
	var batch []*ttft.Stream
	var handles []ttft.Handle
	for i := 0; i < 8; i++ {
		s, _ := reg.Begin()
		batch = append(batch, s)
		handles = append(handles, s.Handle())
	}
	var accepted []int
	for step := 0; step < 4; step++ {
		n, _ := reg.StepEmitted(handles, nil) // one token each, one clock read
		accepted = append(accepted, n)
	}
	fmt.Println("accepted per step:", accepted)
	for _, s := range batch {
		s.End(ttft.Completed)
	}
	snap, _ := reg.Snapshot()
	defer snap.Close()
	fmt.Println("tokens:", snap.Counter(ttft.CounterTokens), "ITL gaps:", snap.Count(ttft.MetricITL))
	// Output:
	// accepted per step: [8 8 8 8]
	// tokens: 32 ITL gaps: 24
}

// Errors are Errno values: compare them with errors.Is.
func ExampleErrno() {
	reg, _ := ttft.New(nil)
	defer reg.Close()
	s, _ := reg.Begin()
	s.End(ttft.Cancelled)
	err := s.Token(1)
	fmt.Println(err == ttft.ErrStale, ttft.ErrStale.Name())
	fmt.Println(err)
	// Output:
	// true TTFT_ESTALE
	// stale or unknown sequence handle (stream already ended?)
}

// An engine loop reports each iteration when it ends, before the tokens it
// produced: a stall then says why it happened. Here a 300 ms step that
// carried another request's prompt delays a decoding stream.
func ExampleRegistry_EngineStep() {
	reg, _ := ttft.New(&ttft.Config{StallThreshold: 100 * time.Millisecond})
	defer reg.Close()
	const ms = uint64(time.Millisecond)
	t := uint64(1_000_000_000)
	s, _ := reg.BeginAt(t)
	for i := 0; i < 5; i++ { // 20 ms decode steps, a token after each
		reg.EngineStepAt(&ttft.StepInfo{DecodeSeqs: 1}, t, t+20*ms)
		t += 20 * ms
		s.TokenAt(1, t)
	}
	reg.EngineStepAt(&ttft.StepInfo{DecodeSeqs: 1, PrefillTokens: 8192}, t, t+300*ms)
	t += 300 * ms
	s.TokenAt(1, t)
	info, _ := s.Stats()
	fmt.Println("latest stall:", info.LastStallCause.Name())
	s.EndAt(ttft.Completed, t)
	snap, _ := reg.Snapshot()
	defer snap.Close()
	for _, c := range snap.StallCauses() {
		if c.Stalls > 0 {
			fmt.Printf("%s: %d stall, %d ms stalled\n", c.Cause.Name(), c.Stalls, c.StalledNs/ms)
		}
	}
	fmt.Println("steps with prefill:", snap.EngineStepCount(true), "without:", snap.EngineStepCount(false))
	// Output:
	// latest stall: prefill
	// prefill: 1 stall, 300 ms stalled
	// steps with prefill: 1 without: 5
}

// A configuration the library refuses says why.
func ExampleCheckConfig() {
	err := ttft.CheckConfig(&ttft.Config{Labels: []ttft.Label{{Name: "view", Value: "user"}}})
	fmt.Println(errors.Is(err, ttft.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// ttft: invalid configuration: const_labels[0].name "view" is reserved (the exporters write it; see TTFT_RESERVED_LABELS)
}
