// Command tokencost measures the cost per token recorded from Go, for
// bench/bindings.sh (which runs the same loop in C, Python and Rust): 64
// streams round-robin, one Stream.TokenAt per token with an explicit,
// increasing timestamp; then one Registry.StepEmittedAt per decode step of
// the 64 streams; then one Registry.EngineStepAt (1.2) per decode step.
// Prints "token NS", "step64 NS" (ns per token) and "engine NS" (ns per
// EngineStepAt call), medians.
//
//	go run ./examples/tokencost [tokens per run] [runs]
package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"time"

	"ttft"
)

func median(v []float64) float64 {
	sort.Float64s(v)
	return v[len(v)/2]
}

func main() {
	n, runs := 2000000, 7
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	if len(os.Args) > 2 {
		runs, _ = strconv.Atoi(os.Args[2])
	}
	runtime.LockOSThread() // one OS thread, one shard, as in the other languages
	reg, err := ttft.New(&ttft.Config{MaxInflight: 128})
	if err != nil {
		panic(err)
	}
	defer reg.Close()
	t0 := ttft.NowNs()
	var token, step, engine []float64
	info := ttft.StepInfo{DecodeSeqs: 64}
	for r := 0; r < runs; r++ {
		streams := make([]*ttft.Stream, 64)
		handles := make([]ttft.Handle, 64)
		for i := range streams {
			if streams[i], err = reg.BeginAt(t0); err != nil {
				panic(err)
			}
			handles[i] = streams[i].Handle()
		}
		t := t0
		start := time.Now()
		for i := 0; i < n; i++ {
			if i%64 == 0 {
				t += 1000
			}
			if err := streams[i%64].TokenAt(1, t); err != nil {
				panic(err)
			}
		}
		token = append(token, float64(time.Since(start).Nanoseconds())/float64(n))
		start = time.Now()
		for i := 0; i < n/64; i++ {
			t += 1000
			if _, err := reg.StepEmittedAt(handles, nil, t); err != nil {
				panic(err)
			}
		}
		step = append(step, float64(time.Since(start).Nanoseconds())/float64(n/64*64))
		start = time.Now()
		for i := 0; i < n/64; i++ {
			t += 1000
			if err := reg.EngineStepAt(&info, t, t+500); err != nil {
				panic(err)
			}
		}
		engine = append(engine, float64(time.Since(start).Nanoseconds())/float64(n/64))
		for _, s := range streams {
			s.EndAt(ttft.Completed, t+1000)
		}
	}
	fmt.Printf("token %.2f\nstep64 %.2f\nengine %.2f\n", median(token), median(step), median(engine))
}
