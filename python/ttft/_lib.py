"""Finding libttft and declaring its C ABI for ctypes.

include/ttft.h is the source of truth: every structure below mirrors the
header field by field, and every function the bindings call gets its
argtypes and restype here, so no argument is ever passed with ctypes'
default int conversion (which would truncate a 64-bit handle).
"""

import ctypes
import ctypes.util
import glob
import os
import threading

from . import _errors

# ------------------------------------------------------------ C constants
# Values from include/ttft.h. Names are the lower-case enum suffixes, the
# same strings the C library returns from ttft_metric_name() and friends
# (tests/test_abi.py checks them against the loaded library).
METRICS = ("ttft", "tpot", "itl", "e2e", "queue", "prefill", "decode",
           "output_tokens", "seq_itl_p95", "seq_itl_max", "abandoned_wait",
           "itl_per_token")
COUNTERS = ("begun", "completed", "cancelled", "errors", "dropped", "tokens",
            "stalls", "stalled_seqs", "abandoned", "slo_met", "clock_clamped",
            "preemptions", "no_tpot", "stale", "slo_judged", "trace_id_invalid",
            "barrier_fallbacks", "clock_refused",
            # 1.3: many processes (the last two are a gathered snapshot's)
            "publish_failed", "segments_skipped", "processes_exited",
            # 1.3 (issue 29): token deadlines and fluid streams
            "token_deadlines", "token_deadlines_missed", "fluid", "fluid_judged")
STATUSES = ("completed", "cancelled", "error")
FORMATS = ("text", "json", "prometheus", "openmetrics", "prometheus_protobuf", "otlp_protobuf")
GAUGES = ("inflight", "live_stalls", "memory", "coarse",
          "processes")  # 1.3: live processes in a gathered snapshot
SPLITS = ("prefix_cache", "prompt_band", "prefill_by_prefix")
PREFIX_BANDS = ("miss", "hit", "partial")  # ttft_prefix_band: the prefix splits' index
# ttft_stall_cause order (1.2): why a stall happened
STALL_CAUSES = ("unknown", "prefill", "preempted", "not_scheduled", "engine_idle", "slow_step")
CLOCKS = ("monotonic", "tsc")
SLOWEST = ("ttft", "gap")  # ttft_slowest_by
TTFT_MAX_REQUEST_ID = 63
TTFT_MAX_SLOWEST_K = 64
TTFT_GATHER_BY_PROCESS = 1  # ttft_gather_open flag: a process label on every series
PUBLISH_INTERVAL_MIN_MS, PUBLISH_INTERVAL_MAX_MS = 10, 3_600_000  # 0 = no thread

ABI_MAJOR = 1  # TTFT_VERSION_MAJOR these declarations mirror
TTFT_OK = 0
ERRORS = {  # code: (name, ttft_strerror text as in the header's X-macro)
    -1: ("TTFT_EINVAL", "invalid argument"),
    -2: ("TTFT_ESTALE", "stale or unknown sequence handle (stream already ended?)"),
    -3: ("TTFT_EFULL", "no free sequence slot or class slot"),
    -4: ("TTFT_ENOMEM", "out of memory"),
    -5: ("TTFT_ERANGE", "value out of range or buffer too small"),
    -6: ("TTFT_ECORRUPT", "malformed, truncated or corrupted encoding"),
    -7: ("TTFT_EEXIST", "name already exists"),
    -8: ("TTFT_EIO", "socket or I/O error"),
    -9: ("TTFT_ENOTSUP", "not supported by this build"),
    -10: ("TTFT_ECLOCK", "wall-clock timestamp (CLOCK_REALTIME: time.time_ns(), "
          "system_clock) where the monotonic clock (CLOCK_MONOTONIC: "
          "time.monotonic_ns(), steady_clock, or TTFT_NOW) is expected"),
}
TTFT_EINVAL, TTFT_ESTALE, TTFT_EFULL, TTFT_ENOMEM, TTFT_ERANGE = -1, -2, -3, -4, -5
TTFT_ECORRUPT, TTFT_EEXIST, TTFT_EIO, TTFT_ENOTSUP, TTFT_ECLOCK = -6, -7, -8, -9, -10
ECLOCK = TTFT_ECLOCK

# Label names a constant label may not use (TTFT_RESERVED_LABELS in
# include/ttft.h; any name starting with "__" is refused too).
RESERVED_LABELS = ("class", "model", "status", "le", "quantile", "start_point",
                   "token_point", "version", "slo", "prefix_cache", "prompt_tokens",
                   "view", "kind", "window", "cause", "prefill", "process")

# Metrics that have per-status views (ttft_snapshot_status_*).
STATUS_VIEW_METRICS = ("ttft", "tpot", "e2e", "output_tokens")
TTFT_MIN_MEMORY_LIMIT = 1 << 20
TTFT_DEFAULT_MEMORY_LIMIT = 256 << 20
NATIVE_SCHEMA_MIN, NATIVE_SCHEMA_MAX = -4, 8

TTFT_PHASE_SCHEDULED = 0
TTFT_PHASE_PREEMPTED = 1
TTFT_PHASE_RESUMED = 2
TTFT_STEP_RING = 1024
TTFT_CLASS_ALL = -1
TTFT_MAX_BANDS = 8
TTFT_MAX_LABEL = 128
TTFT_MAX_INFLIGHT = 1 << 20
TTFT_MAX_CONST_LABELS = 8
TTFT_MAX_PROM_BUCKETS = 64
TTFT_METRIC_COUNT = len(METRICS)
TTFT_PROM_CONFIG_METRICS = 11  # metrics with configurable classic buckets (frozen)

U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1

# --------------------------------------------------------------- structs
_c_enum = ctypes.c_int  # C enums are int-sized on every ABI we build for


class Label(ctypes.Structure):
    """struct ttft_label"""
    _fields_ = [("name", ctypes.c_char_p),
                ("value", ctypes.c_char_p)]


class OtlpConfig(ctypes.Structure):
    """struct ttft_otlp_config (1.3)"""
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("endpoint", ctypes.c_char_p),
                ("metrics_endpoint", ctypes.c_char_p),
                ("headers", ctypes.c_char_p),
                ("service_name", ctypes.c_char_p),
                ("resource_attributes", ctypes.c_char_p),
                ("interval_ms", ctypes.c_uint32),
                ("timeout_ms", ctypes.c_uint32),
                ("temporality", ctypes.c_int)]


class OtlpInfo(ctypes.Structure):
    """struct ttft_otlp_info (1.3): ttft_otlp_stats fills it"""
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("pushes", ctypes.c_uint64),
                ("accepted", ctypes.c_uint64),
                ("failed", ctypes.c_uint64),
                ("dropped", ctypes.c_uint64),
                ("retries", ctypes.c_uint64),
                ("bytes_sent", ctypes.c_uint64),
                ("last_status", ctypes.c_int),
                ("last_error", ctypes.c_char * 128)]


class Config(ctypes.Structure):
    """struct ttft_config"""
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("max_inflight", ctypes.c_uint32),
                ("max_threads", ctypes.c_uint32),
                ("max_classes", ctypes.c_uint32),
                ("stall_threshold_ns", ctypes.c_uint64),
                ("clock", _c_enum),
                ("start_point", ctypes.c_char_p),
                ("token_point", ctypes.c_char_p),
                ("model", ctypes.c_char_p),
                ("metric_namespace", ctypes.c_char_p),
                ("const_labels", ctypes.POINTER(Label)),
                ("n_const_labels", ctypes.c_uint32),
                ("n_prompt_bands", ctypes.c_uint32),
                ("prompt_band_edges", ctypes.c_uint32 * (TTFT_MAX_BANDS - 1)),
                ("prom_buckets", ctypes.POINTER(ctypes.c_uint64) * TTFT_PROM_CONFIG_METRICS),
                ("prom_n_buckets", ctypes.c_uint32 * TTFT_PROM_CONFIG_METRICS),
                ("prom_summaries", ctypes.c_int),
                # since 1.1
                ("native_histograms", ctypes.c_int),
                ("native_schema", ctypes.c_int),
                ("export_idle_classes", ctypes.c_int),
                ("memory_limit", ctypes.c_uint64),
                # since 1.2
                ("prefix_hit_min_tokens", ctypes.c_uint32),
                ("slowest_k", ctypes.c_uint32),
                # since 1.3: many processes, one truth
                ("shared_dir", ctypes.c_char_p),
                ("process_name", ctypes.c_char_p),
                ("publish_interval_ms", ctypes.c_uint32)]


class Slo(ctypes.Structure):
    """struct ttft_slo"""
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("ttft_ns", ctypes.c_uint64),
                ("tpot_ns", ctypes.c_uint64),
                ("e2e_ns", ctypes.c_uint64),
                ("stall_threshold_ns", ctypes.c_uint64),
                # since 1.3
                ("ttft_ns_per_prompt_token", ctypes.c_uint64),
                ("token_deadline_ns", ctypes.c_uint64),
                ("fluid_min", ctypes.c_double)]


class Request(ctypes.Structure):
    """struct ttft_request"""
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("class_id", ctypes.c_int),
                ("prompt_tokens", ctypes.c_uint32),
                ("prefix_hit", ctypes.c_int),
                # since 1.2
                ("request_id", ctypes.c_char_p),
                ("trace_id", ctypes.c_char_p),
                # since 1.3 (NULL: none)
                ("traceparent", ctypes.c_char_p),
                ("ttft_slo_ns", ctypes.c_uint64),
                ("tpot_slo_ns", ctypes.c_uint64)]


class SlowRequest(ctypes.Structure):
    """struct ttft_slow_request"""
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("value_ns", ctypes.c_uint64),
                ("ttft_ns", ctypes.c_uint64),
                ("max_gap_ns", ctypes.c_uint64),
                ("t_begin_ns", ctypes.c_uint64),
                ("t_end_ns", ctypes.c_uint64),
                ("t_end_unix_ns", ctypes.c_uint64),
                ("tokens", ctypes.c_uint64),
                ("class_id", ctypes.c_int),
                ("status", _c_enum),
                ("cause", _c_enum),
                ("request_id", ctypes.c_char * (TTFT_MAX_REQUEST_ID + 1)),
                ("trace_id", ctypes.c_char * 33),
                # since 1.3
                ("fluidity", ctypes.c_double),
                ("deadlines", ctypes.c_uint64),
                ("deadlines_missed", ctypes.c_uint64),
                ("token_deadline_ns", ctypes.c_uint64),
                ("ttft_slo_ns", ctypes.c_uint64),
                ("tpot_slo_ns", ctypes.c_uint64)]


class StepInfo(ctypes.Structure):
    """struct ttft_step_info (1.2)"""
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("prefill_tokens", ctypes.c_uint32),
                ("decode_seqs", ctypes.c_uint32),
                ("preempted_seqs", ctypes.c_uint32),
                ("kind", ctypes.c_uint32)]


class SeqInfo(ctypes.Structure):
    """struct ttft_seq_info"""
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("class_id", ctypes.c_int),
                ("emissions", ctypes.c_uint32),
                ("tokens", ctypes.c_uint64),
                ("t_begin_ns", ctypes.c_uint64),
                ("t_last_ns", ctypes.c_uint64),
                ("ttft_ns", ctypes.c_uint64),
                ("itl_p50_ns", ctypes.c_uint64),
                ("itl_p95_ns", ctypes.c_uint64),
                ("itl_max_ns", ctypes.c_uint64),
                ("stalls", ctypes.c_uint32),
                ("preemptions", ctypes.c_uint32),
                ("last_stall_cause", ctypes.c_int),  # 1.2
                ("fluidity", ctypes.c_double),  # 1.3
                ("deadlines", ctypes.c_uint64),
                ("deadlines_missed", ctypes.c_uint64),
                ("ttft_slo_ns", ctypes.c_uint64),
                ("tpot_slo_ns", ctypes.c_uint64)]


# ------------------------------------------------------------ prototypes
_vp = ctypes.c_void_p      # ttft_registry *, ttft_snapshot *, ttft_http *
_u64 = ctypes.c_uint64
_u32 = ctypes.c_uint32
_int = ctypes.c_int
_long = ctypes.c_long
_dbl = ctypes.c_double
_str = ctypes.c_char_p
_size = ctypes.c_size_t
_P = ctypes.POINTER

PROTOTYPES = {
    # name: (restype, argtypes)
    "ttft_version_number": (ctypes.c_uint, []),
    "ttft_version_string": (_str, []),
    "ttft_strerror": (_str, [_int]),
    "ttft_err_name": (_str, [_int]),
    "ttft_config_init": (None, [_P(Config)]),
    "ttft_config_init_sized": (None, [_P(Config), ctypes.c_size_t]),
    "ttft_registry_new": (_vp, [_P(Config)]),
    "ttft_registry_free": (None, [_vp]),
    "ttft_registry_memory": (_size, [_vp]),
    "ttft_thread_release": (_int, [_vp]),
    "ttft_now_ns": (_u64, []),
    "ttft_registry_now_ns": (_u64, [_vp]),
    "ttft_registry_clock": (_int, [_vp]),
    "ttft_slo_init": (None, [_P(Slo)]),
    "ttft_slo_init_sized": (None, [_P(Slo), ctypes.c_size_t]),
    "ttft_class_add": (_int, [_vp, _str, _P(Slo)]),
    "ttft_class_find": (_int, [_vp, _str]),
    "ttft_request_init": (None, [_P(Request)]),
    "ttft_request_init_sized": (None, [_P(Request), ctypes.c_size_t]),
    "ttft_begin": (_u64, [_vp, _u64]),
    "ttft_begin_ex": (_u64, [_vp, _P(Request), _u64]),
    "ttft_mark": (_int, [_vp, _u64, _c_enum, _u64]),
    "ttft_token_emitted": (_int, [_vp, _u64, _u32, _u64]),
    "ttft_stream_end": (_int, [_vp, _u64, _c_enum, _u64]),
    # 1.1: details after begin, one call per decode step. step_emitted takes
    # its arrays as raw addresses (c_void_p): the bindings pass the address
    # of an array.array they keep alive across the call.
    "ttft_annotate": (_int, [_vp, _u64, _u32, _int]),
    "ttft_step_emitted": (_long, [_vp, _vp, _vp, _size, _u64]),
    "ttft_seq_stats": (_int, [_vp, _u64, _P(SeqInfo)]),
    "ttft_stalled_now": (_long, [_vp, _u64]),
    "ttft_inflight": (_long, [_vp]),
    "ttft_snapshot_take": (_vp, [_vp]),
    "ttft_snapshot_free": (None, [_vp]),
    "ttft_snapshot_classes": (_int, [_vp]),
    "ttft_snapshot_class_name": (_str, [_vp, _int]),
    "ttft_snapshot_class_slo": (_int, [_vp, _int, _P(Slo)]),
    "ttft_snapshot_class_count": (_u64, [_vp, _int, _c_enum]),
    "ttft_snapshot_class_quantile": (_u64, [_vp, _int, _c_enum, _dbl]),
    "ttft_snapshot_class_mean": (_dbl, [_vp, _int, _c_enum]),
    "ttft_snapshot_class_sum": (_u64, [_vp, _int, _c_enum]),
    "ttft_snapshot_class_sum_wide": (_int, [_vp, _int, _c_enum, _P(_u64), _P(_u64)]),
    "ttft_snapshot_class_counter": (_u64, [_vp, _int, _c_enum]),
    "ttft_snapshot_slowest_count": (_u32, [_vp, _int, _c_enum]),
    "ttft_snapshot_slowest": (_int, [_vp, _int, _c_enum, _u32, _P(SlowRequest)]),
    "ttft_snapshot_status_count": (_u64, [_vp, _int, _c_enum, _c_enum]),
    "ttft_snapshot_status_quantile": (_u64, [_vp, _int, _c_enum, _c_enum, _dbl]),
    # 1.2
    "ttft_snapshot_status_sum": (_u64, [_vp, _int, _c_enum, _c_enum]),
    "ttft_snapshot_status_mean": (_dbl, [_vp, _int, _c_enum, _c_enum]),
    "ttft_config_check": (_int, [_P(Config), ctypes.c_char_p, _size]),
    "ttft_annotate_cached": (_int, [_vp, _u64, _u32, _u32]),
    "ttft_snapshot_gauge": (_u64, [_vp, _c_enum]),
    "ttft_snapshot_attainment": (_dbl, [_vp, _int]),
    "ttft_snapshot_split_count": (_u64, [_vp, _c_enum, ctypes.c_uint]),
    "ttft_snapshot_split_quantile": (_u64, [_vp, _c_enum, ctypes.c_uint, _dbl]),
    "ttft_snapshot_bands": (ctypes.c_uint, [_vp]),
    "ttft_snapshot_band": (_int, [_vp, ctypes.c_uint, _P(_u32), _P(_u32)]),
    "ttft_snapshot_interval": (_int, [_vp, _P(_u64), _P(_u64)]),
    "ttft_snapshot_label": (_str, [_vp, _str]),
    "ttft_snapshot_format": (_long, [_vp, _c_enum, ctypes.c_char_p, _size]),
    "ttft_snapshot_merge": (_vp, [_vp, _vp, _P(_int)]),
    "ttft_snapshot_delta": (_vp, [_vp, _vp, _P(_int)]),
    "ttft_snapshot_encode": (_long, [_vp, ctypes.c_void_p, _size]),
    "ttft_snapshot_decode": (_vp, [ctypes.c_void_p, _size, _P(_int)]),
    "ttft_snapshot_encode_base64": (_long, [_vp, ctypes.c_char_p, _size]),
    "ttft_snapshot_decode_base64": (_vp, [ctypes.c_char_p, _size, _P(_int)]),
    "ttft_http_start": (_int, [_vp, _str, _P(_vp)]),
    "ttft_http_port": (_int, [_vp]),
    "ttft_http_stop": (None, [_vp]),
    "ttft_metric_name": (_str, [_c_enum]),
    "ttft_counter_name": (_str, [_c_enum]),
    "ttft_status_name": (_str, [_c_enum]),
    "ttft_format_name": (_str, [_c_enum]),
    # 1.2: engine steps and stall causes
    "ttft_step_info_init": (None, [_P(StepInfo)]),
    "ttft_engine_step": (_int, [_vp, _P(StepInfo), _u64, _u64]),
    "ttft_snapshot_stalls_by_cause": (_u64, [_vp, _int, _c_enum]),
    "ttft_snapshot_stall_seconds_by_cause": (_u64, [_vp, _int, _c_enum]),
    "ttft_snapshot_engine_step_count": (_u64, [_vp, _int]),
    "ttft_snapshot_engine_step_quantile": (_u64, [_vp, _int, _dbl]),
    "ttft_snapshot_engine_step_sum": (_u64, [_vp, _int]),
    "ttft_stall_cause_name": (_str, [_c_enum]),
}

# Declared when the library has them (a newer libttft than the oldest these
# bindings accept); the bindings fall back when it does not.
OPTIONAL_PROTOTYPES = {
    # 1.3: why a begin was refused (TTFT_ECLOCK: a wall-clock t_ns)
    "ttft_begin_checked": (_int, [_vp, _P(Request), _u64, _P(_u64)]),
    # 1.3: why an endpoint did not start ("127.0.0.1:9464: bind: Address already in use")
    "ttft_http_start_msg": (_int, [_vp, _str, _P(_vp), ctypes.c_char_p, _size]),
    # 1.3: many processes, one truth (publish into shared_dir, gather it)
    "ttft_publish": (_int, [_vp]),
    "ttft_gather_open": (_vp, [_str, ctypes.c_uint]),
    "ttft_gather_open_msg": (_vp, [_str, ctypes.c_uint, ctypes.c_char_p, _size]),
    "ttft_gather_take": (_vp, [_vp]),
    "ttft_gather_close": (None, [_vp]),
    "ttft_http_start_gather": (_int, [_vp, _str, _P(_vp), ctypes.c_char_p, _size]),
    # 1.3: OpenTelemetry push (OTLP/HTTP protobuf to a collector)
    "ttft_otlp_config_init": (None, [_P(OtlpConfig)]),
    "ttft_otlp_start": (_vp, [_vp, _P(OtlpConfig)]),
    "ttft_otlp_start_msg": (_int, [_vp, _P(OtlpConfig), _P(_vp), ctypes.c_char_p, _size]),
    "ttft_otlp_flush": (_int, [_vp]),
    "ttft_otlp_stop": (None, [_vp]),
    "ttft_otlp_stats": (_int, [_vp, _P(OtlpInfo)]),
}

# ---------------------------------------------------------------- lookup
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_SONAME = "libttft.so.1"
BUNDLED_NAME = "_libttft.so"  # what the build backend (python/_backend) builds into the package


def _checkout_root():
    """The repository root when the package runs from a source checkout."""
    root = os.path.dirname(os.path.dirname(_PKG_DIR))
    if (os.path.isfile(os.path.join(root, "include", "ttft.h"))
            and os.path.isfile(os.path.join(root, "CMakeLists.txt"))):
        return root
    return None


def candidates(environ=None):
    """Every place the loader tries, in order, as (description, path).

    1. $TTFT_LIBRARY (when set, it is the only place tried: an explicit
       choice must not silently fall back to another library);
    2. _libttft.so inside the package: the library `pip install ./python`
       compiled from the C sources (python/_backend/ttft_build.py), so a pip-installed package
       always uses the library it was built with;
    3. libttft.so* next to the package (a copied or vendored library);
    4. the path `make install` recorded when it installed the package;
    5. ../build*/libttft.so* of a source checkout, newest first;
    6. the system loader: ctypes.util.find_library("ttft"), then the
       soname libttft.so.1 (LD_LIBRARY_PATH, ld.so.cache, default dirs).
    """
    env = os.environ if environ is None else environ
    explicit = env.get("TTFT_LIBRARY")
    if explicit:
        return [("$TTFT_LIBRARY", explicit)]
    out = []
    bundled = os.path.join(_PKG_DIR, BUNDLED_NAME)
    if os.path.isfile(bundled):
        out.append(("built into the package", bundled))
    beside = sorted(glob.glob(os.path.join(_PKG_DIR, "libttft.so*")))
    if beside:
        out += [("next to the package", p) for p in beside]
    else:
        out.append(("next to the package",
                    os.path.join(_PKG_DIR, "libttft.so*") + " (none found)"))
    try:
        from . import _install_paths  # written by `make install`
        out.append(("recorded by make install", _install_paths.LIBRARY))
    except ImportError:
        pass
    root = _checkout_root()
    if root is not None:
        built = glob.glob(os.path.join(root, "build*", "libttft.so*"))
        built.sort(key=lambda p: (-os.path.getmtime(p), p))
        if built:
            out += [("source checkout build tree", p) for p in built]
        else:
            out.append(("source checkout build tree",
                        os.path.join(root, "build*", "libttft.so*") + " (none found)"))
    found = ctypes.util.find_library("ttft")
    if found:
        out.append(("ctypes.util.find_library('ttft')", found))
    else:
        out.append(("ctypes.util.find_library('ttft')", "(not found)"))
    out.append(("system loader", _SONAME))
    return out


def _declare(lib):
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name)  # AttributeError: not libttft / too old
        fn.restype = restype
        fn.argtypes = argtypes
    for name, (restype, argtypes) in OPTIONAL_PROTOTYPES.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = restype
            fn.argtypes = argtypes
    return lib


def load_from(cands):
    """Load the first candidate that opens and exports the ABI; raise
    LibraryNotFoundError listing every attempt otherwise."""
    tried = []
    for where, path in cands:
        if path.endswith("(none found)") or path == "(not found)":
            tried.append("%s: %s" % (where, path))
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s: %s (%s)" % (where, path, e))
            continue
        try:
            _declare(lib)
        except AttributeError as e:
            tried.append("%s: %s (not a compatible libttft: %s)" % (where, path, e))
            continue
        major = lib.ttft_version_number() // 10000
        if major != ABI_MAJOR:
            tried.append("%s: %s (libttft %s; these bindings need major version %d)"
                         % (where, path, lib.ttft_version_string().decode(), ABI_MAJOR))
            continue
        return lib, path
    raise _errors.LibraryNotFoundError(
        "libttft shared library not found. Looked in:\n  " + "\n  ".join(tried) +
        "\nInstall the package with `pip install ./python` (it compiles the "
        "library into the package), build it (make), install it (make install), "
        "or set TTFT_LIBRARY to the path of libttft.so.1.")


_lock = threading.Lock()
_loaded = None  # (CDLL, path)


def load():
    """The loaded library (cached; thread-safe)."""
    global _loaded
    if _loaded is None:
        with _lock:
            if _loaded is None:
                _loaded = load_from(candidates())
    return _loaded[0]


_errno_lib = None  # the same library, opened again with use_errno=True


# The functions that say why they failed through errno (ttft_gather_*).
# ctypes hands errno over only for a CDLL opened with use_errno=True, which
# saves and restores errno around every call: the hooks do not pay for that.
ERRNO_FUNCTIONS = ("ttft_gather_open_msg", "ttft_gather_take")


def load_errno():
    """The loaded library through a use_errno=True handle (ctypes.get_errno
    after a call reads the C errno), declaring ERRNO_FUNCTIONS it has."""
    global _errno_lib
    if _errno_lib is None:
        path = loaded_path()
        with _lock:
            if _errno_lib is None:
                lib = ctypes.CDLL(path, use_errno=True)
                for name in ERRNO_FUNCTIONS:
                    fn = getattr(lib, name, None)
                    if fn is not None:
                        fn.restype, fn.argtypes = OPTIONAL_PROTOTYPES[name]
                _errno_lib = lib
    return _errno_lib


def loaded_path():
    """Path of the loaded library (loads it if needed)."""
    load()
    return _loaded[1]


def from_code(code, what, detail=None):
    """The exception for C return code `code` (negative) raised by `what`
    (a ttft.Error subclass by code). The text comes from the loaded
    library's ttft_strerror/ttft_err_name; the class from the code's name
    in ERRORS (the header's table), as the library may be older."""
    lib = load()
    text = lib.ttft_strerror(code).decode("utf-8", "replace")
    name = lib.ttft_err_name(code).decode("ascii", "replace")
    kind = ERRORS.get(code, (name,))[0]
    return _errors.for_code(code, what, name, text, detail, kind=kind)
