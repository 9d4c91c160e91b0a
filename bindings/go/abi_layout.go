package ttft

// #include "ttft_cgo.h"
import "C"

import "unsafe"

// cgoLayout is cgo's view of the structs and scalar types this package
// hands to C, in the words of tests/abi/layout.c ("size T", "align T",
// "offset T F", "sizeof T"). TestStructLayoutMatchesTheHeader compiles and
// runs layout.c with the C compiler and compares every line with this: cgo
// and the C compiler must see one header (the -I this package was built
// with is the library's), and a struct layout.c prints that is not listed
// here fails the test. (cgo cannot be used in _test.go files, hence here.)
func cgoLayout() map[string]uintptr {
	m := map[string]uintptr{}
	sz := func(t string, size, align uintptr) {
		m["size "+t] = size
		m["align "+t] = align
	}
	off := func(t, f string, o uintptr) { m["offset "+t+" "+f] = o }

	var l C.ttft_label
	sz("ttft_label", unsafe.Sizeof(l), unsafe.Alignof(l))
	off("ttft_label", "name", unsafe.Offsetof(l.name))
	off("ttft_label", "value", unsafe.Offsetof(l.value))

	var c C.ttft_config
	sz("ttft_config", unsafe.Sizeof(c), unsafe.Alignof(c))
	off("ttft_config", "struct_size", unsafe.Offsetof(c.struct_size))
	off("ttft_config", "max_inflight", unsafe.Offsetof(c.max_inflight))
	off("ttft_config", "max_threads", unsafe.Offsetof(c.max_threads))
	off("ttft_config", "max_classes", unsafe.Offsetof(c.max_classes))
	off("ttft_config", "stall_threshold_ns", unsafe.Offsetof(c.stall_threshold_ns))
	off("ttft_config", "clock", unsafe.Offsetof(c.clock))
	off("ttft_config", "start_point", unsafe.Offsetof(c.start_point))
	off("ttft_config", "token_point", unsafe.Offsetof(c.token_point))
	off("ttft_config", "model", unsafe.Offsetof(c.model))
	off("ttft_config", "metric_namespace", unsafe.Offsetof(c.metric_namespace))
	off("ttft_config", "const_labels", unsafe.Offsetof(c.const_labels))
	off("ttft_config", "n_const_labels", unsafe.Offsetof(c.n_const_labels))
	off("ttft_config", "n_prompt_bands", unsafe.Offsetof(c.n_prompt_bands))
	off("ttft_config", "prompt_band_edges", unsafe.Offsetof(c.prompt_band_edges))
	off("ttft_config", "prom_buckets", unsafe.Offsetof(c.prom_buckets))
	off("ttft_config", "prom_n_buckets", unsafe.Offsetof(c.prom_n_buckets))
	off("ttft_config", "prom_summaries", unsafe.Offsetof(c.prom_summaries))
	off("ttft_config", "native_histograms", unsafe.Offsetof(c.native_histograms))
	off("ttft_config", "native_schema", unsafe.Offsetof(c.native_schema))
	off("ttft_config", "export_idle_classes", unsafe.Offsetof(c.export_idle_classes))
	off("ttft_config", "memory_limit", unsafe.Offsetof(c.memory_limit))
	off("ttft_config", "prefix_hit_min_tokens", unsafe.Offsetof(c.prefix_hit_min_tokens))
	off("ttft_config", "slowest_k", unsafe.Offsetof(c.slowest_k))
	off("ttft_config", "shared_dir", unsafe.Offsetof(c.shared_dir))
	off("ttft_config", "process_name", unsafe.Offsetof(c.process_name))
	off("ttft_config", "publish_interval_ms", unsafe.Offsetof(c.publish_interval_ms))

	var s C.ttft_slo
	sz("ttft_slo", unsafe.Sizeof(s), unsafe.Alignof(s))
	off("ttft_slo", "struct_size", unsafe.Offsetof(s.struct_size))
	off("ttft_slo", "ttft_ns", unsafe.Offsetof(s.ttft_ns))
	off("ttft_slo", "tpot_ns", unsafe.Offsetof(s.tpot_ns))
	off("ttft_slo", "e2e_ns", unsafe.Offsetof(s.e2e_ns))
	off("ttft_slo", "stall_threshold_ns", unsafe.Offsetof(s.stall_threshold_ns))
	off("ttft_slo", "ttft_ns_per_prompt_token", unsafe.Offsetof(s.ttft_ns_per_prompt_token))
	off("ttft_slo", "token_deadline_ns", unsafe.Offsetof(s.token_deadline_ns))
	off("ttft_slo", "fluid_min", unsafe.Offsetof(s.fluid_min))

	var q C.ttft_request
	sz("ttft_request", unsafe.Sizeof(q), unsafe.Alignof(q))
	off("ttft_request", "struct_size", unsafe.Offsetof(q.struct_size))
	off("ttft_request", "class_id", unsafe.Offsetof(q.class_id))
	off("ttft_request", "prompt_tokens", unsafe.Offsetof(q.prompt_tokens))
	off("ttft_request", "prefix_hit", unsafe.Offsetof(q.prefix_hit))
	off("ttft_request", "request_id", unsafe.Offsetof(q.request_id))
	off("ttft_request", "trace_id", unsafe.Offsetof(q.trace_id))
	off("ttft_request", "traceparent", unsafe.Offsetof(q.traceparent))
	off("ttft_request", "ttft_slo_ns", unsafe.Offsetof(q.ttft_slo_ns))
	off("ttft_request", "tpot_slo_ns", unsafe.Offsetof(q.tpot_slo_ns))

	var i C.ttft_seq_info
	sz("ttft_seq_info", unsafe.Sizeof(i), unsafe.Alignof(i))
	off("ttft_seq_info", "struct_size", unsafe.Offsetof(i.struct_size))
	off("ttft_seq_info", "class_id", unsafe.Offsetof(i.class_id))
	off("ttft_seq_info", "emissions", unsafe.Offsetof(i.emissions))
	off("ttft_seq_info", "tokens", unsafe.Offsetof(i.tokens))
	off("ttft_seq_info", "t_begin_ns", unsafe.Offsetof(i.t_begin_ns))
	off("ttft_seq_info", "t_last_ns", unsafe.Offsetof(i.t_last_ns))
	off("ttft_seq_info", "ttft_ns", unsafe.Offsetof(i.ttft_ns))
	off("ttft_seq_info", "itl_p50_ns", unsafe.Offsetof(i.itl_p50_ns))
	off("ttft_seq_info", "itl_p95_ns", unsafe.Offsetof(i.itl_p95_ns))
	off("ttft_seq_info", "itl_max_ns", unsafe.Offsetof(i.itl_max_ns))
	off("ttft_seq_info", "stalls", unsafe.Offsetof(i.stalls))
	off("ttft_seq_info", "preemptions", unsafe.Offsetof(i.preemptions))
	off("ttft_seq_info", "last_stall_cause", unsafe.Offsetof(i.last_stall_cause))
	off("ttft_seq_info", "fluidity", unsafe.Offsetof(i.fluidity))
	off("ttft_seq_info", "deadlines", unsafe.Offsetof(i.deadlines))
	off("ttft_seq_info", "deadlines_missed", unsafe.Offsetof(i.deadlines_missed))
	off("ttft_seq_info", "ttft_slo_ns", unsafe.Offsetof(i.ttft_slo_ns))
	off("ttft_seq_info", "tpot_slo_ns", unsafe.Offsetof(i.tpot_slo_ns))

	var st C.ttft_step_info
	sz("ttft_step_info", unsafe.Sizeof(st), unsafe.Alignof(st))
	off("ttft_step_info", "struct_size", unsafe.Offsetof(st.struct_size))
	off("ttft_step_info", "prefill_tokens", unsafe.Offsetof(st.prefill_tokens))
	off("ttft_step_info", "decode_seqs", unsafe.Offsetof(st.decode_seqs))
	off("ttft_step_info", "preempted_seqs", unsafe.Offsetof(st.preempted_seqs))
	off("ttft_step_info", "kind", unsafe.Offsetof(st.kind))

	var w C.ttft_slow_request
	sz("ttft_slow_request", unsafe.Sizeof(w), unsafe.Alignof(w))
	off("ttft_slow_request", "struct_size", unsafe.Offsetof(w.struct_size))
	off("ttft_slow_request", "value_ns", unsafe.Offsetof(w.value_ns))
	off("ttft_slow_request", "ttft_ns", unsafe.Offsetof(w.ttft_ns))
	off("ttft_slow_request", "max_gap_ns", unsafe.Offsetof(w.max_gap_ns))
	off("ttft_slow_request", "t_begin_ns", unsafe.Offsetof(w.t_begin_ns))
	off("ttft_slow_request", "t_end_ns", unsafe.Offsetof(w.t_end_ns))
	off("ttft_slow_request", "t_end_unix_ns", unsafe.Offsetof(w.t_end_unix_ns))
	off("ttft_slow_request", "tokens", unsafe.Offsetof(w.tokens))
	off("ttft_slow_request", "class_id", unsafe.Offsetof(w.class_id))
	off("ttft_slow_request", "status", unsafe.Offsetof(w.status))
	off("ttft_slow_request", "cause", unsafe.Offsetof(w.cause))
	off("ttft_slow_request", "request_id", unsafe.Offsetof(w.request_id))
	off("ttft_slow_request", "trace_id", unsafe.Offsetof(w.trace_id))
	off("ttft_slow_request", "fluidity", unsafe.Offsetof(w.fluidity))
	off("ttft_slow_request", "deadlines", unsafe.Offsetof(w.deadlines))
	off("ttft_slow_request", "deadlines_missed", unsafe.Offsetof(w.deadlines_missed))
	off("ttft_slow_request", "token_deadline_ns", unsafe.Offsetof(w.token_deadline_ns))
	off("ttft_slow_request", "ttft_slo_ns", unsafe.Offsetof(w.ttft_slo_ns))
	off("ttft_slow_request", "tpot_slo_ns", unsafe.Offsetof(w.tpot_slo_ns))

	var oc C.ttft_otlp_config
	sz("ttft_otlp_config", unsafe.Sizeof(oc), unsafe.Alignof(oc))
	off("ttft_otlp_config", "struct_size", unsafe.Offsetof(oc.struct_size))
	off("ttft_otlp_config", "endpoint", unsafe.Offsetof(oc.endpoint))
	off("ttft_otlp_config", "metrics_endpoint", unsafe.Offsetof(oc.metrics_endpoint))
	off("ttft_otlp_config", "headers", unsafe.Offsetof(oc.headers))
	off("ttft_otlp_config", "service_name", unsafe.Offsetof(oc.service_name))
	off("ttft_otlp_config", "resource_attributes", unsafe.Offsetof(oc.resource_attributes))
	off("ttft_otlp_config", "interval_ms", unsafe.Offsetof(oc.interval_ms))
	off("ttft_otlp_config", "timeout_ms", unsafe.Offsetof(oc.timeout_ms))
	off("ttft_otlp_config", "temporality", unsafe.Offsetof(oc.temporality))

	var oi C.ttft_otlp_info
	sz("ttft_otlp_info", unsafe.Sizeof(oi), unsafe.Alignof(oi))
	off("ttft_otlp_info", "struct_size", unsafe.Offsetof(oi.struct_size))
	off("ttft_otlp_info", "pushes", unsafe.Offsetof(oi.pushes))
	off("ttft_otlp_info", "accepted", unsafe.Offsetof(oi.accepted))
	off("ttft_otlp_info", "failed", unsafe.Offsetof(oi.failed))
	off("ttft_otlp_info", "dropped", unsafe.Offsetof(oi.dropped))
	off("ttft_otlp_info", "retries", unsafe.Offsetof(oi.retries))
	off("ttft_otlp_info", "bytes_sent", unsafe.Offsetof(oi.bytes_sent))
	off("ttft_otlp_info", "last_status", unsafe.Offsetof(oi.last_status))
	off("ttft_otlp_info", "last_error", unsafe.Offsetof(oi.last_error))

	m["sizeof ttft_seq"] = unsafe.Sizeof(C.ttft_seq(0))
	m["sizeof ttft_metric"] = unsafe.Sizeof(C.ttft_metric(0))
	m["sizeof ttft_status"] = unsafe.Sizeof(C.ttft_status(0))
	m["sizeof ttft_phase"] = unsafe.Sizeof(C.ttft_phase(0))
	m["sizeof ttft_counter"] = unsafe.Sizeof(C.ttft_counter(0))
	m["sizeof ttft_format"] = unsafe.Sizeof(C.ttft_format(0))
	m["sizeof ttft_gauge"] = unsafe.Sizeof(C.ttft_gauge(0))
	m["sizeof ttft_split"] = unsafe.Sizeof(C.ttft_split(0))
	m["sizeof ttft_clock"] = unsafe.Sizeof(C.ttft_clock(0))
	m["sizeof ttft_stall_cause"] = unsafe.Sizeof(C.ttft_stall_cause(0))
	m["sizeof ttft_prefix_band"] = unsafe.Sizeof(C.ttft_prefix_band(0))
	m["sizeof ttft_slowest_by"] = unsafe.Sizeof(C.ttft_slowest_by(0))
	return m
}

// stepInfoInit is ttft_step_info_init on cgo's struct, for the ABI test:
// struct_size and the zeroed fields as the library writes them.
func stepInfoInit() (size uintptr, fields [4]uint32) {
	var st C.ttft_step_info
	st.prefill_tokens, st.decode_seqs, st.preempted_seqs, st.kind = 7, 7, 7, 7
	C.ttft_step_info_init(&st)
	return uintptr(st.struct_size), [4]uint32{uint32(st.prefill_tokens), uint32(st.decode_seqs),
		uint32(st.preempted_seqs), uint32(st.kind)}
}
