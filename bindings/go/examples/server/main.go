// Command server instruments a small inference server end to end: classes
// with SLO budgets, request handlers on goroutines (every fifth client goes
// away early and its stream ends as cancelled), a continuous-batching
// engine loop that reports each iteration (EngineStep: stall causes,
// prefill's cost on decode) and records its tokens in one call, the
// /metrics endpoint scraped once, and a report.
//
//	go run ./examples/server
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"ttft"
)

var errGone = errors.New("client went away")

func handle(reg *ttft.Registry, req ttft.Request, fail bool) (err error) {
	s, err := reg.BeginRequest(req) // the clock starts at arrival
	if err != nil {
		return err // errors.Is(err, ttft.ErrFull): no free slot, counted as dropped
	}
	defer func() {
		if err != nil {
			s.End(ttft.Cancelled)
		}
	}()
	s.Mark(ttft.PhaseScheduled)             // admitted: queue time ends
	s.AnnotateCached(req.PromptTokens, 128) // 128 prompt tokens came from the prefix cache
	if err := s.Token(1); err != nil {      // the first chunk is on the wire: TTFT
		return err
	}
	if fail {
		return errGone
	}
	s.Token(3) // a 3-token speculative step
	return s.End(ttft.Completed)
}

func main() {
	reg, err := ttft.New(&ttft.Config{
		MaxInflight:    256,
		MaxThreads:     16, // goroutines run on many OS threads: one shard each
		Model:          "qwen2.5-7b",
		StartPoint:     "accept",
		TokenPoint:     "sse_flush",
		Labels:         []ttft.Label{{Name: "region", Value: "eu-west"}},
		StallThreshold: 250 * time.Millisecond,
		Classes: []ttft.ClassConfig{
			{Name: "chat", SLO: ttft.SLO{TTFT: 300 * time.Millisecond, TPOT: 40 * time.Millisecond}},
			{Name: "batch", SLO: ttft.SLO{E2E: time.Minute}},
		},
	})
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	chat, _ := reg.FindClass("chat")
	batch, _ := reg.FindClass("batch")

	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				req := ttft.Request{Class: chat, PromptTokens: uint32(200 + i*10)}
				_ = handle(reg, req, (w+i)%5 == 0)
			}
		}(w)
	}

	var streams []*ttft.Stream
	var handles []ttft.Handle
	for i := 0; i < 16; i++ {
		s, err := reg.BeginRequest(ttft.Request{Class: batch})
		if err != nil {
			panic(err)
		}
		streams = append(streams, s)
		handles = append(handles, s.Handle())
	}
	// Each iteration reports itself when it ends (EngineStep, BEFORE its
	// tokens are recorded), then one call records the token of every
	// sequence. The first iteration carries the 16 prompts (prefill).
	for step := 0; step < 32; step++ {
		tStart := reg.NowNs()
		// ... the model's forward pass runs here ...
		info := ttft.StepInfo{DecodeSeqs: 16}
		if step == 0 {
			info.PrefillTokens = 16 * 512
		}
		if err := reg.EngineStep(&info, tStart); err != nil {
			panic(err)
		}
		if n, _ := reg.StepEmitted(handles, nil); n != len(handles) {
			panic("step")
		}
	}
	for _, s := range streams {
		s.End(ttft.Completed)
	}
	wg.Wait()

	srv, err := reg.Serve("127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", srv.Port()))
	if err != nil {
		panic(err)
	}
	fmt.Fprint(c, "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
	body, _ := io.ReadAll(c)
	c.Close()
	series := 0
	for _, l := range strings.Split(string(body), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, "HTTP/") && strings.Contains(l, " ") && !strings.Contains(l, ": ") {
			series++
		}
	}
	fmt.Printf("scraped :%d/metrics: %d bytes, %d series\n", srv.Port(), len(body), series)
	srv.Close()

	snap, err := reg.Snapshot()
	if err != nil {
		panic(err)
	}
	defer snap.Close()
	text, _ := snap.Format(ttft.FormatText)
	fmt.Print(string(text))
	cv := snap.Class(chat)
	a, _ := cv.Attainment()
	fmt.Printf("chat: TTFT p99 %d ns over %d streams (%d completed); attainment %.3f\n",
		cv.Quantile(ttft.MetricTTFT, 0.99), cv.Count(ttft.MetricTTFT),
		cv.Status(ttft.Completed).Count(ttft.MetricTTFT), a)
	var causes []string
	for _, c := range snap.StallCauses() {
		causes = append(causes, fmt.Sprintf("%s=%d", c.Cause.Name(), c.Stalls))
	}
	fmt.Printf("engine: %d steps (%d with prefill), p99 %d ns without prefill; stalls by cause: %s; prefill stalled %d ns\n",
		snap.EngineStepCount(false)+snap.EngineStepCount(true), snap.EngineStepCount(true),
		snap.EngineStepQuantile(false, 0.99), strings.Join(causes, " "), snap.StalledNsByCause(ttft.StallPrefill))
}
