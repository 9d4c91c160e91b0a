package ttft

// OpenTelemetry push from Go (1.3): a pusher started on a loopback
// net/http receiver written here sends POST /v1/metrics with Content-Type
// application/x-protobuf; its counts say so; https:// is refused.

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

type otlpReq struct {
	method, path, contentType, tenant string
	body                              []byte
}

func TestOTLPPushesProtobufToV1Metrics(t *testing.T) {
	got := make(chan otlpReq, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		b, _ := io.ReadAll(q.Body)
		got <- otlpReq{q.Method, q.URL.Path, q.Header.Get("Content-Type"), q.Header.Get("X-Tenant"), b}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()

	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := r.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Token(2); err != nil {
		t.Fatal(err)
	}
	if err := s.End(Completed); err != nil {
		t.Fatal(err)
	}
	p, err := r.StartOTLP(OTLPConfig{Endpoint: srv.URL, ServiceName: "go-test", Headers: "x-tenant=t1",
		Interval: time.Hour, Timeout: 10 * time.Second, Temporality: TemporalityDelta})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(); err != nil {
		t.Fatal(err)
	}
	q := <-got
	if q.method != "POST" || q.path != "/v1/metrics" || q.contentType != "application/x-protobuf" || q.tenant != "t1" {
		t.Fatalf("request: %s %s, Content-Type %q, x-tenant %q", q.method, q.path, q.contentType, q.tenant)
	}
	if !bytes.Contains(q.body, []byte("go-test")) || !bytes.Contains(q.body, []byte("gen_ai.server.time_to_first_token")) {
		t.Fatalf("body (%d bytes) lacks the service name or the TTFT histogram", len(q.body))
	}
	st, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	want := OTLPStats{Pushes: 1, Accepted: 1, BytesSent: uint64(len(q.body)), LastStatus: 200}
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	if err := p.Close(); err != nil { // the last push
		t.Fatal(err)
	}
	if q2 := <-got; q2.path != "/v1/metrics" {
		t.Fatalf("last push to %s", q2.path)
	}
	if err := p.Flush(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flush after Close: %v", err)
	}
	if _, err := p.Stats(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Stats after Close: %v", err)
	}
	p.Close() // idempotent
}

func TestOTLPRefusesHTTPS(t *testing.T) {
	r, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.StartOTLP(OTLPConfig{Endpoint: "https://collector.example:4318"})
	var ce *ConfigError
	if !errors.As(err, &ce) || !errors.Is(err, ErrInvalid) || !strings.Contains(ce.Reason, "https is not supported") {
		t.Fatalf("https endpoint: %v", err)
	}
	if _, err := r.StartOTLP(OTLPConfig{Endpoint: "http://127.0.0.1:1", Temporality: "sometimes"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad temporality: %v", err)
	}
}
