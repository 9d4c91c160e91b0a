package ttft

// Issue 29 in Go (SLOs as users feel them, SPEC 10.2): a request's own
// budgets on begin (Request.TTFTSLO, TPOTSLO), the class's length-aware
// first-token deadline, token deadline and FluidMin, the four fluidity
// counters and SeqInfo's fluidity, with the values tests/test_fluidity.c
// computes by hand.

import (
	"testing"
	"time"
)

// A stream with a 50 ms TPOT budget (D = 50 ms): gaps 40, 40 build 10 then
// 20 ms of slack; a 200 ms gap misses floor((200-20-50)/50)+1 = 3
// deadlines (slack back to 0); 40 meets. 6 deadlines, 3 missed: 0.5.
func TestFluidityLateStallAfterSlack(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 4})
	c := must[Class](t)(r.AddClass("chat", SLO{TPOT: 50 * time.Millisecond}))
	s := must[*Stream](t)(r.BeginRequestAt(Request{Class: c}, t0))
	at := t0 + 100*ms
	ok(t, s.TokenAt(1, at))
	for _, g := range []uint64{40, 40, 200, 40} {
		at += g * ms
		ok(t, s.TokenAt(1, at))
	}
	i := must[SeqInfo](t)(s.Stats())
	eq(t, "deadlines", 6, i.Deadlines)
	eq(t, "missed", 3, i.DeadlinesMissed)
	eq(t, "fluidity", 0.5, i.Fluidity)
	eq(t, "tpot budget", 50*ms, i.TPOTSLONs)
	eq(t, "no ttft budget", 0, i.TTFTSLONs)
	ok(t, s.EndAt(Completed, at))
	v := snap(t, r).Class(c)
	eq(t, "token_deadlines", 6, v.Counter(CounterTokenDeadlines))
	eq(t, "token_deadlines_missed", 3, v.Counter(CounterTokenDeadlinesMissed))
	eq(t, "fluid", 0, v.Counter(CounterFluid))
	eq(t, "fluid_judged", 1, v.Counter(CounterFluidJudged))
	eq(t, "name", "fluid_judged", CounterFluidJudged.Name())
	eq(t, "name", "token_deadlines_missed", CounterTokenDeadlinesMissed.Name())
}

// A class with a length-aware first-token deadline (100 ms + 1 ms per
// prompt token), a 20 ms token deadline and FluidMin 0.8, read back from
// a snapshot; a request's own TTFT target replaces the whole deadline and
// its own TPOT budget is its token deadline in a class that sets none.
func TestOwnBudgetsAndLengthAwareDeadline(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 4})
	want := SLO{TTFT: 100 * time.Millisecond, TTFTPerPromptToken: time.Millisecond,
		TokenDeadline: 20 * time.Millisecond, FluidMin: 0.8}
	c := must[Class](t)(r.AddClass("long", want))
	// 499 prompt tokens: deadline 599 ms, a TTFT of 600 ms misses it; the
	// same request with its own 700 ms target meets it.
	for _, own := range []time.Duration{0, 700 * time.Millisecond} {
		s := must[*Stream](t)(r.BeginRequestAt(Request{Class: c, PromptTokens: 499, TTFTSLO: own}, t0))
		dl := 599 * ms
		if own != 0 {
			dl = uint64(own)
		}
		eq(t, "ttft deadline", dl, must[SeqInfo](t)(s.Stats()).TTFTSLONs)
		ok(t, s.TokenAt(1, t0+600*ms))
		ok(t, s.EndAt(Completed, t0+600*ms))
	}
	// Own TPOT budget 50 ms in the default class (no token deadline of its
	// own): gaps 30, 130 = slack 20, then floor((130-20-50)/50)+1 = 2
	// missed; cancelled after a miss, so judged, not fluid.
	s := must[*Stream](t)(r.BeginRequestAt(Request{TPOTSLO: 50 * time.Millisecond}, t0))
	ok(t, s.TokenAt(1, t0+10*ms))
	ok(t, s.TokenAt(1, t0+40*ms))
	ok(t, s.TokenAt(1, t0+170*ms))
	i := must[SeqInfo](t)(s.Stats())
	eq(t, "own tpot", 50*ms, i.TPOTSLONs)
	eq(t, "deadlines", 3, i.Deadlines)
	eq(t, "missed", 2, i.DeadlinesMissed)
	ok(t, s.EndAt(Cancelled, t0+171*ms))
	sn := snap(t, r)
	v := sn.Class(c)
	eq(t, "slo_met", 1, v.Counter(CounterSLOMet))
	eq(t, "slo_judged", 2, v.Counter(CounterSLOJudged))
	want.StallThreshold = 500 * time.Millisecond // resolved: the registry's default
	eq(t, "class slo", want, must[SLO](t)(v.SLO()))
	d := sn.Class(ClassDefault)
	eq(t, "default fluid_judged", 1, d.Counter(CounterFluidJudged))
	eq(t, "default fluid", 0, d.Counter(CounterFluid))
	eq(t, "default deadlines missed", 2, d.Counter(CounterTokenDeadlinesMissed))
	eq(t, "default class FluidMin", defaultFluidMin, must[SLO](t)(d.SLO()).FluidMin)
	for _, bad := range []float64{1.5, -0.1} {
		_, err := r.AddClass("bad", SLO{FluidMin: bad})
		isErr(t, "fluid_min out of range", ErrInvalid, err)
	}
}

// The slowest lists carry each stream's fluidity and the budgets it was
// judged against (tests/test_fluidity.c slowest_entries_carry_...): an
// early 120 ms stall (D 50 ms), then ten 10 ms gaps: 12 deadlines, 2
// missed; judged against 100 ms + 1 ms x 200 prompt tokens and 50 ms.
func TestSlowestCarriesFluidityAndBudgets(t *testing.T) {
	r := newReg(t, &Config{MaxInflight: 4})
	c := must[Class](t)(r.AddClass("chat", SLO{TTFT: 100 * time.Millisecond, TPOT: 50 * time.Millisecond,
		TTFTPerPromptToken: time.Millisecond}))
	s := must[*Stream](t)(r.BeginRequestAt(Request{Class: c, PromptTokens: 200}, t0))
	at := t0 + 400*ms
	ok(t, s.TokenAt(1, at))
	for _, g := range []uint64{120, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10} {
		at += g * ms
		ok(t, s.TokenAt(1, at))
	}
	ok(t, s.EndAt(Completed, at))
	v := snap(t, r).Class(c).Slowest(SlowestTTFT)
	eq(t, "entries", 1, len(v))
	e := v[0]
	eq(t, "deadlines", 12, e.Deadlines)
	eq(t, "missed", 2, e.DeadlinesMissed)
	eq(t, "fluidity", 1.0-2.0/12.0, e.Fluidity)
	eq(t, "D", 50*ms, e.TokenDeadlineNs)
	eq(t, "ttft budget", 300*ms, e.TTFTSLONs)
	eq(t, "tpot budget", 50*ms, e.TPOTSLONs)
}
