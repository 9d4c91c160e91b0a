package ttft

// Issue 27 item 2 in Go: ids as clients send them. No RequestID or TraceID
// — any code point, a NUL, malformed UTF-8 (a Go string holds any bytes),
// a 1 MB id — makes a begin fail; the request is measured, a request id's
// bad bytes are shown as '?', a bad trace id is ignored and counted in
// CounterTraceIDInvalid. "" is no id in Go (the zero value), not a bad one.

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

const (
	maxSlowestK = 64 // TTFT_MAX_SLOWEST_K
	mb          = 1 << 20
	goodTrace   = "4bf92f3577b34da6a3ce929d0e0e4736"
)

// playNth begins a stream with req, its TTFT (i + 1) ms, and ends it.
func playNth(t *testing.T, r *Registry, i uint64, req Request) {
	t.Helper()
	s, err := r.BeginRequestAt(req, t0+i*ms)
	if err != nil {
		t.Fatalf("begin %d (%q...): %v", i, trunc(req.RequestID), err)
	}
	ok(t, s.TokenAt(1, t0+i*ms+(i+1)*ms))
	ok(t, s.EndAt(Completed, t0+i*ms+(i+2)*ms))
}

func trunc(s string) string {
	if len(s) > 20 {
		return s[:20]
	}
	return s
}

// listed is the request ids of the TTFT list, in the order they were played.
func listed(s *Snapshot) []string {
	l := s.Slowest(SlowestTTFT)
	out := make([]string, len(l))
	for i, x := range l {
		out[len(l)-1-i] = x.RequestID
	}
	return out
}

func TestRequestIDsAsClientsSendThem(t *testing.T) {
	k := uint32(maxSlowestK)
	r := newReg(t, &Config{SlowestK: &k})
	ids := []struct{ in, want string }{
		{"a\x00b", "a?b"},
		{"\x00", "?"},
		{"caf\u00e9\U0001F600\uFFFF\U0010FFFF", "caf\u00e9\U0001F600\uFFFF\U0010FFFF"},
		{"\x1b[31m\x7f\u0085", "?[31m?\u0085"},
		{"a\xffb\xc3(\xed\xa0\x80", "a?b?(???"}, // malformed UTF-8, a CESU-8 surrogate
		{"\xf0\x9f\x98", "?"},                   // a cut character
		{"", ""},
		{strings.Repeat("x", mb), strings.Repeat("x", 63)},
		{strings.Repeat("\x00", mb), strings.Repeat("?", 63)},
		{strings.Repeat("\xff", mb), strings.Repeat("?", 63)},
		{strings.Repeat("\U0001F600", mb), strings.Repeat("\U0001F600", 15)},
	}
	want := make([]string, len(ids))
	for i, id := range ids {
		playNth(t, r, uint64(i), Request{RequestID: id.in})
		want[i] = id.want
	}
	s := snap(t, r)
	eq(t, "measured", uint64(len(ids)), s.Count(MetricTTFT))
	eq(t, "trace_id_invalid", 0, s.Counter(CounterTraceIDInvalid))
	if got := listed(s); !reflect.DeepEqual(got, want) {
		t.Errorf("request ids:\nwant %q\ngot  %q", want, got)
	}
}

func TestBadTraceIDsAreIgnoredAndCounted(t *testing.T) {
	k := uint32(maxSlowestK)
	r := newReg(t, &Config{SlowestK: &k})
	bad := []string{
		goodTrace + "\x00", // C would end it at the NUL: valid
		goodTrace + "\x00junk",
		goodTrace[:16] + "\x00" + goodTrace[17:],
		"\x00",
		strings.ToUpper(goodTrace),
		"\uff14" + goodTrace[1:], // a fullwidth digit
		strings.Repeat("\xff", 32),
		goodTrace[:31] + "\xed", // a cut, malformed last byte
		strings.Repeat(goodTrace, mb/32),
		strings.Repeat("0", mb),
	}
	var want [][2]string
	for i, tid := range bad {
		rid := fmt.Sprintf("t%d", i)
		playNth(t, r, uint64(i), Request{RequestID: rid, TraceID: tid})
		want = append(want, [2]string{rid, ""})
	}
	playNth(t, r, 100, Request{RequestID: "good", TraceID: goodTrace})
	playNth(t, r, 101, Request{RequestID: "none", TraceID: ""}) // "" is no trace id
	want = append(want, [2]string{"good", goodTrace}, [2]string{"none", ""})
	s := snap(t, r)
	eq(t, "measured", uint64(len(bad)+2), s.Count(MetricTTFT))
	eq(t, "trace_id_invalid", uint64(len(bad)), s.Counter(CounterTraceIDInvalid))
	l := s.Slowest(SlowestTTFT)
	got := make([][2]string, len(l))
	for i, x := range l {
		got[len(l)-1-i] = [2]string{x.RequestID, x.TraceID}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ids:\nwant %q\ngot  %q", want, got)
	}
}

// Every code point (a Go string holds no surrogates as UTF-8: those are
// TestRequestIDsAsClientsSendThem's malformed bytes), 15 to an id (at most
// 60 bytes: nothing is cut), maxSlowestK ids per snapshot, each batch
// slower than the ones before it.
func TestEveryCodePoint(t *testing.T) {
	k := uint32(maxSlowestK)
	r := newReg(t, &Config{SlowestK: &k, MaxInflight: 256})
	var wants []string
	var id, want strings.Builder
	n := uint64(0)
	flush := func(s *Snapshot) {
		got := listed(s)
		if len(got) > len(wants) {
			got = got[len(got)-len(wants):]
		}
		if !reflect.DeepEqual(got, wants) {
			t.Fatalf("after %d ids:\nwant %q\ngot  %q", n, wants, got)
		}
		wants = wants[:0]
	}
	emit := func() {
		s := must[*Stream](t)(r.BeginRequestAt(Request{RequestID: id.String()}, t0))
		ok(t, s.TokenAt(1, t0+(n+1)*1000))
		ok(t, s.EndAt(Completed, t0+(n+1)*1000))
		n++
		wants = append(wants, want.String())
		id.Reset()
		want.Reset()
		if len(wants) == maxSlowestK {
			s := must[*Snapshot](t)(r.Snapshot())
			flush(s)
			s.Close()
		}
	}
	chars := 0
	for c := rune(0); c <= utf8.MaxRune; c++ {
		if !utf8.ValidRune(c) { // the surrogates
			continue
		}
		id.WriteRune(c)
		if c < 0x20 || c == 0x7f {
			want.WriteByte('?')
		} else {
			want.WriteRune(c)
		}
		if chars++; chars%15 == 0 {
			emit()
		}
	}
	if id.Len() > 0 {
		emit()
	}
	s := snap(t, r)
	if len(wants) > 0 {
		flush(s)
	}
	eq(t, "measured", n, s.Count(MetricTTFT))
	eq(t, "dropped", 0, s.Counter(CounterDropped))
}
