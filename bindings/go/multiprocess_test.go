package ttft

// Many processes, one truth (1.3): two child processes (this test binary
// run again with -test.run and an environment variable) record into one
// shared directory and exit; the parent's Gather is their exact sum.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

const gatherChildEnv = "TTFT_GO_GATHER_CHILD" // "<dir>\t<i>"

// Child i: 2 + i completed streams of 3 tokens (TTFT 5 ms) and one
// cancelled stream; Close publishes the registry's last state.
func recordGatherChild(t *testing.T, dir string, i int) {
	r, err := New(&Config{MaxInflight: 16, MaxClasses: 2, SharedDir: dir,
		ProcessName: fmt.Sprintf("go-%d", i)})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const ms = uint64(1_000_000)
	tt := uint64(1_000_000_000)
	for k := 0; k < 2+i; k++ {
		s, err := r.BeginAt(tt)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.TokenAt(3, tt+5*ms); err != nil {
			t.Fatal(err)
		}
		if err := s.EndAt(Completed, tt+9*ms); err != nil {
			t.Fatal(err)
		}
		tt += 1000 * ms
	}
	s, err := r.BeginAt(tt)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EndAt(Cancelled, tt+ms); err != nil {
		t.Fatal(err)
	}
}

// TestGatherChild is the body of a child process: nothing unless the
// parent set gatherChildEnv.
func TestGatherChild(t *testing.T) {
	v := os.Getenv(gatherChildEnv)
	if v == "" {
		return
	}
	dir, is, _ := strings.Cut(v, "\t")
	i, err := strconv.Atoi(is)
	if err != nil {
		t.Fatal(err)
	}
	recordGatherChild(t, dir, i)
}

func privateDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "ttft-go-") // mode 0700
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestGatherTwoChildProcessesExactSum(t *testing.T) {
	dir := privateDir(t)
	var kids []*exec.Cmd
	for i := 0; i < 2; i++ {
		c := exec.Command(os.Args[0], "-test.run=^TestGatherChild$", "-test.count=1")
		c.Env = append(os.Environ(), fmt.Sprintf("%s=%s\t%d", gatherChildEnv, dir, i))
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		kids = append(kids, c)
	}
	for _, c := range kids {
		if err := c.Wait(); err != nil {
			t.Fatalf("child: %v", err)
		}
	}
	g, err := OpenGather(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	s, err := g.Take()
	if err != nil {
		t.Fatal(err)
	}
	want := map[Counter]uint64{CounterBegun: 7, CounterCompleted: 5, CounterCancelled: 2,
		CounterTokens: 15, CounterProcessesExited: 2}
	for c, v := range want {
		if got := s.Counter(c); got != v {
			t.Errorf("%s = %d, want %d", c.Name(), got, v)
		}
	}
	if got := s.Gauge(GaugeProcesses); got != 0 {
		t.Errorf("processes = %d, want 0", got)
	}
	if got := s.Count(MetricTTFT); got != 5 {
		t.Errorf("TTFT count = %d, want 5", got)
	}
	if got := s.Quantile(MetricTTFT, 1.0); got != 5_000_000 {
		t.Errorf("TTFT max = %d, want 5 ms", got)
	}

	// a live process (this one), published by hand, kept apart by process
	zero := uint32(0)
	live, err := New(&Config{MaxInflight: 4, MaxClasses: 2, SharedDir: dir,
		ProcessName: "go-live", PublishIntervalMs: &zero})
	if err != nil {
		t.Fatal(err)
	}
	st, err := live.BeginAt(1_000_000_000)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.EndAt(Cancelled, 1_001_000_000); err != nil {
		t.Fatal(err)
	}
	if err := live.Publish(); err != nil {
		t.Fatal(err)
	}
	apart, err := OpenGather(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := apart.Take()
	if err != nil {
		t.Fatal(err)
	}
	if s2.Counter(CounterBegun) != 8 || s2.Gauge(GaugeProcesses) != 1 {
		t.Errorf("by process: begun %d processes %d, want 8 1", s2.Counter(CounterBegun), s2.Gauge(GaugeProcesses))
	}
	text, err := s2.Format(FormatPrometheus)
	if err != nil || !strings.Contains(string(text), `process="go-live"`) {
		t.Errorf("no process label in the per-process view (%v)", err)
	}
	apart.Close()
	apart.Close() // idempotent
	if _, err := apart.Take(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Take after Close: %v", err)
	}
	live.Close()
	s3, err := g.Take()
	if err != nil {
		t.Fatal(err)
	}
	if got := s3.Counter(CounterBegun); got != 8 { // the archive keeps it
		t.Errorf("after the live process closed: begun %d, want 8", got)
	}
}

func TestGatherRefusalsSayWhy(t *testing.T) {
	dir := privateDir(t)
	if err := os.Chmod(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	_, err := OpenGather(dir, false)
	var ge *GatherError
	if !errors.As(err, &ge) || ge.Errno != syscall.EACCES || !strings.Contains(ge.Reason, "group- or world-writable") {
		t.Errorf("group-writable dir: %v", err)
	}
	if _, err := New(&Config{SharedDir: dir}); err == nil ||
		!strings.Contains(err.Error(), "group- or world-writable") || !errors.Is(err, ErrInvalid) {
		t.Errorf("registry on a group-writable dir: %v", err)
	}
	_, err = OpenGather(dir+"/nope", false)
	if !errors.As(err, &ge) || ge.Errno != syscall.ENOENT {
		t.Errorf("missing dir: %v", err)
	}
	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Publish(); !errors.Is(err, ErrInvalid) {
		t.Errorf("Publish without SharedDir: %v", err)
	}
}
