package main

import (
	"fmt"
	"os"
	"time"

	"ttft"
)

func main() {
	reg, err := ttft.New(&ttft.Config{MaxInflight: 256, Model: "qwen2.5-7b"})
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	chat, err := reg.AddClass("chat", ttft.SLO{TTFT: 300 * time.Millisecond})
	if err != nil {
		panic(err)
	}

	s, err := reg.BeginRequest(ttft.Request{Class: chat, PromptTokens: 812})
	if err != nil {
		panic(err) // errors.Is(err, ttft.ErrFull): no free slot
	}
	s.Token(1)            // the first chunk is on the wire: TTFT
	s.Token(3)            // a 3-token speculative step: one inter-token gap
	s.End(ttft.Completed) // a Stream dropped unended is cancelled by its finalizer

	snap, err := reg.Snapshot()
	if err != nil {
		panic(err)
	}
	defer snap.Close()
	fmt.Printf("TTFT p99 %d ns over %d streams\n", snap.Quantile(ttft.MetricTTFT, 0.99), snap.Count(ttft.MetricTTFT))
	if a, ok := snap.Class(chat).Attainment(); !ok || a != 1 {
		panic("attainment")
	}
	prom, _ := snap.Format(ttft.FormatPrometheus)
	os.Stdout.Write(prom)
}
