// A program in a module of its own that requires bindings/go through a
// replace directive, as a user's server does (tests/bindings/consumers.sh
// writes its go.mod, builds it and runs it).
package main

import (
	"fmt"
	"os"

	"ttft"
)

func main() {
	reg, err := ttft.New(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer reg.Close()
	t0 := ttft.NowNs() - 1_000_000_000 // a second ago
	s, err := reg.BeginAt(t0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, e := range []error{
		s.TokenAt(1, t0+250_000_000), // TTFT 250 ms
		s.TokenAt(3, t0+300_000_000),
		s.EndAt(ttft.Completed, t0+310_000_000),
	} {
		if e != nil {
			fmt.Fprintln(os.Stderr, e)
			os.Exit(1)
		}
	}
	snap, err := reg.Snapshot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer snap.Close()
	p50 := snap.Quantile(ttft.MetricTTFT, 0.5)
	d := int64(p50) - 250_000_000
	if d < 0 {
		d = -d
	}
	close := "no"
	if d*200 <= 250_000_000 { // within 0.5 %
		close = "yes"
	}
	fmt.Printf("go consumer: libttft %s, %d stream, TTFT p50 within 0.5%% of 250 ms: %s\n",
		ttft.VersionString(), snap.Count(ttft.MetricTTFT), close)
}
