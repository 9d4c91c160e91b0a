/*
 * layout.c — the layout of every struct in include/ttft.h that a binding
 * mirrors, as the C compiler sees it, one fact per line:
 *
 *   size   STRUCT BYTES
 *   align  STRUCT BYTES
 *   offset STRUCT FIELD BYTES     (one line per field, in declaration order)
 *   sizeof TYPE BYTES             (scalar types the bindings assume: ttft_seq,
 *                                  the enums)
 *
 * The Rust binding's `cargo test` (bindings/rust/src/abi_layout.rs) compiles
 * and runs this program and compares every line with its #[repr(C)] mirrors
 * (std::mem::size_of / align_of / offset_of!); the Go binding's test runs it
 * too and compares with unsafe.Sizeof/Offsetof of what cgo sees. A field
 * added, moved or retyped in the header without the bindings following
 * fails those tests. Keep this list in the header's field order.
 */
#include <stddef.h>
#include <stdio.h>

#include "ttft.h"

#define SIZE(T) printf("size %s %zu\nalign %s %zu\n", #T, sizeof(T), #T, _Alignof(T))
#define OFF(T, F) printf("offset %s %s %zu\n", #T, #F, offsetof(T, F))
#define SCALAR(T) printf("sizeof %s %zu\n", #T, sizeof(T))

int main(void) {
  SIZE(ttft_label);
  OFF(ttft_label, name);
  OFF(ttft_label, value);

  SIZE(ttft_config);
  OFF(ttft_config, struct_size);
  OFF(ttft_config, max_inflight);
  OFF(ttft_config, max_threads);
  OFF(ttft_config, max_classes);
  OFF(ttft_config, stall_threshold_ns);
  OFF(ttft_config, clock);
  OFF(ttft_config, start_point);
  OFF(ttft_config, token_point);
  OFF(ttft_config, model);
  OFF(ttft_config, metric_namespace);
  OFF(ttft_config, const_labels);
  OFF(ttft_config, n_const_labels);
  OFF(ttft_config, n_prompt_bands);
  OFF(ttft_config, prompt_band_edges);
  OFF(ttft_config, prom_buckets);
  OFF(ttft_config, prom_n_buckets);
  OFF(ttft_config, prom_summaries);
  OFF(ttft_config, native_histograms);
  OFF(ttft_config, native_schema);
  OFF(ttft_config, export_idle_classes);
  OFF(ttft_config, memory_limit);
  OFF(ttft_config, prefix_hit_min_tokens);
  OFF(ttft_config, slowest_k);
  OFF(ttft_config, shared_dir);
  OFF(ttft_config, process_name);
  OFF(ttft_config, publish_interval_ms);

  SIZE(ttft_slo);
  OFF(ttft_slo, struct_size);
  OFF(ttft_slo, ttft_ns);
  OFF(ttft_slo, tpot_ns);
  OFF(ttft_slo, e2e_ns);
  OFF(ttft_slo, stall_threshold_ns);
  OFF(ttft_slo, ttft_ns_per_prompt_token);
  OFF(ttft_slo, token_deadline_ns);
  OFF(ttft_slo, fluid_min);

  SIZE(ttft_request);
  OFF(ttft_request, struct_size);
  OFF(ttft_request, class_id);
  OFF(ttft_request, prompt_tokens);
  OFF(ttft_request, prefix_hit);
  OFF(ttft_request, request_id);
  OFF(ttft_request, trace_id);
  OFF(ttft_request, traceparent);
  OFF(ttft_request, ttft_slo_ns);
  OFF(ttft_request, tpot_slo_ns);

  SIZE(ttft_seq_info);
  OFF(ttft_seq_info, struct_size);
  OFF(ttft_seq_info, class_id);
  OFF(ttft_seq_info, emissions);
  OFF(ttft_seq_info, tokens);
  OFF(ttft_seq_info, t_begin_ns);
  OFF(ttft_seq_info, t_last_ns);
  OFF(ttft_seq_info, ttft_ns);
  OFF(ttft_seq_info, itl_p50_ns);
  OFF(ttft_seq_info, itl_p95_ns);
  OFF(ttft_seq_info, itl_max_ns);
  OFF(ttft_seq_info, stalls);
  OFF(ttft_seq_info, preemptions);
  OFF(ttft_seq_info, last_stall_cause);
  OFF(ttft_seq_info, fluidity);
  OFF(ttft_seq_info, deadlines);
  OFF(ttft_seq_info, deadlines_missed);
  OFF(ttft_seq_info, ttft_slo_ns);
  OFF(ttft_seq_info, tpot_slo_ns);

  SIZE(ttft_step_info);
  OFF(ttft_step_info, struct_size);
  OFF(ttft_step_info, prefill_tokens);
  OFF(ttft_step_info, decode_seqs);
  OFF(ttft_step_info, preempted_seqs);
  OFF(ttft_step_info, kind);

  SIZE(ttft_slow_request);
  OFF(ttft_slow_request, struct_size);
  OFF(ttft_slow_request, value_ns);
  OFF(ttft_slow_request, ttft_ns);
  OFF(ttft_slow_request, max_gap_ns);
  OFF(ttft_slow_request, t_begin_ns);
  OFF(ttft_slow_request, t_end_ns);
  OFF(ttft_slow_request, t_end_unix_ns);
  OFF(ttft_slow_request, tokens);
  OFF(ttft_slow_request, class_id);
  OFF(ttft_slow_request, status);
  OFF(ttft_slow_request, cause);
  OFF(ttft_slow_request, request_id);
  OFF(ttft_slow_request, trace_id);
  OFF(ttft_slow_request, fluidity);
  OFF(ttft_slow_request, deadlines);
  OFF(ttft_slow_request, deadlines_missed);
  OFF(ttft_slow_request, token_deadline_ns);
  OFF(ttft_slow_request, ttft_slo_ns);
  OFF(ttft_slow_request, tpot_slo_ns);

  SIZE(ttft_otlp_config);
  OFF(ttft_otlp_config, struct_size);
  OFF(ttft_otlp_config, endpoint);
  OFF(ttft_otlp_config, metrics_endpoint);
  OFF(ttft_otlp_config, headers);
  OFF(ttft_otlp_config, service_name);
  OFF(ttft_otlp_config, resource_attributes);
  OFF(ttft_otlp_config, interval_ms);
  OFF(ttft_otlp_config, timeout_ms);
  OFF(ttft_otlp_config, temporality);

  SIZE(ttft_otlp_info);
  OFF(ttft_otlp_info, struct_size);
  OFF(ttft_otlp_info, pushes);
  OFF(ttft_otlp_info, accepted);
  OFF(ttft_otlp_info, failed);
  OFF(ttft_otlp_info, dropped);
  OFF(ttft_otlp_info, retries);
  OFF(ttft_otlp_info, bytes_sent);
  OFF(ttft_otlp_info, last_status);
  OFF(ttft_otlp_info, last_error);

  SCALAR(ttft_seq);
  SCALAR(ttft_metric);
  SCALAR(ttft_status);
  SCALAR(ttft_phase);
  SCALAR(ttft_counter);
  SCALAR(ttft_format);
  SCALAR(ttft_gauge);
  SCALAR(ttft_split);
  SCALAR(ttft_clock);
  SCALAR(ttft_stall_cause);
  SCALAR(ttft_prefix_band);
  SCALAR(ttft_slowest_by);
  return 0;
}
