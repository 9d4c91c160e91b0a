"""The ctypes mirror of include/ttft.h: struct sizes and layouts, names,
error texts, the clock, and how the library is found."""

import ctypes
import os
import subprocess
import sys
import time
import unittest

from support import PYDIR, ttft
from ttft import _lib


def c_size_of(init, pad=4096):
    """Ask the C library for sizeof(struct): its *_init writes struct_size
    (a size_t at offset 0) into a buffer far larger than any version."""
    buf = ctypes.create_string_buffer(pad)
    init(ctypes.cast(buf, init.argtypes[0]))
    return ctypes.c_size_t.from_buffer(buf).value


class StructLayout(unittest.TestCase):
    def setUp(self):
        self.lib = _lib.load()

    def test_config_size_matches_c(self):
        self.assertEqual(ctypes.sizeof(_lib.Config), c_size_of(self.lib.ttft_config_init))

    def test_slo_size_matches_c(self):
        self.assertEqual(ctypes.sizeof(_lib.Slo), c_size_of(self.lib.ttft_slo_init))

    def test_request_size_matches_c(self):
        self.assertEqual(ctypes.sizeof(_lib.Request), c_size_of(self.lib.ttft_request_init))

    def test_step_info_size_matches_c(self):
        self.assertEqual(ctypes.sizeof(_lib.StepInfo), c_size_of(self.lib.ttft_step_info_init))

    def test_config_defaults_read_through_every_field(self):
        # The documented defaults land in the right fields only if every
        # offset before them matches the C layout.
        cfg = _lib.Config()
        self.lib.ttft_config_init(ctypes.byref(cfg))
        self.assertEqual(cfg.max_inflight, 4096)
        self.assertEqual(cfg.max_threads, 8)
        self.assertEqual(cfg.max_classes, 16)
        self.assertEqual(cfg.stall_threshold_ns, 500_000_000)
        self.assertEqual(cfg.clock, 0)
        self.assertEqual(cfg.start_point, b"server_arrival")
        self.assertEqual(cfg.token_point, b"detokenized_flush")
        self.assertEqual(cfg.model, b"")
        self.assertEqual(cfg.metric_namespace, b"llm_")
        self.assertEqual(cfg.n_const_labels, 0)
        self.assertEqual(cfg.n_prompt_bands, 6)
        self.assertEqual(list(cfg.prompt_band_edges)[:6], [128, 512, 2048, 8192, 32768, 131072])
        self.assertEqual(list(cfg.prom_n_buckets), [0] * _lib.TTFT_PROM_CONFIG_METRICS)
        self.assertEqual(cfg.prom_summaries, 0)
        # 1.1 fields: read through the struct, so a layout mistake shows here
        self.assertEqual(cfg.native_histograms, 1)
        self.assertEqual(cfg.native_schema, 7)
        self.assertEqual(cfg.export_idle_classes, 0)
        self.assertEqual(cfg.memory_limit, 256 << 20)
        self.assertEqual(cfg.struct_size, ctypes.sizeof(_lib.Config))

    def test_request_defaults(self):
        req = _lib.Request()
        self.lib.ttft_request_init(ctypes.byref(req))
        self.assertEqual((req.class_id, req.prompt_tokens, req.prefix_hit), (0, 0, -1))

    def test_seq_info_tail_fields(self):
        # ttft_seq_stats fills up to struct_size: the last fields (stalls,
        # preemptions) come back right only if the whole layout matches.
        reg = ttft.Registry(max_inflight=4, stall_threshold=0.010)
        s = reg.begin(t_ns=10**9)
        s.mark_preempted(t_ns=10**9 + 1)
        s.mark_preempted(t_ns=10**9 + 2)
        s.token(3, t_ns=10**9 + 5_000_000)
        s.token(2, t_ns=10**9 + 25_000_000)  # 20 ms gap > 10 ms budget
        st = s.stats()
        self.assertEqual(st.class_id, 0)
        self.assertEqual(st.emissions, 2)
        self.assertEqual(st.tokens, 5)
        self.assertEqual(st.t_begin_ns, 10**9)
        self.assertEqual(st.t_last_ns, 10**9 + 25_000_000)
        self.assertEqual(st.ttft_ns, 5_000_000)
        self.assertEqual(st.itl_max_ns, 20_000_000)
        self.assertEqual(st.stalls, 1)
        self.assertEqual(st.preemptions, 2)
        self.assertEqual(st.ttft, 0.005)

    def test_every_prototype_is_declared(self):
        for name, (restype, argtypes) in _lib.PROTOTYPES.items():
            fn = getattr(self.lib, name)
            self.assertEqual(fn.argtypes, argtypes, name)


class Names(unittest.TestCase):
    def setUp(self):
        self.lib = _lib.load()

    def test_metric_names_match_c(self):
        self.assertEqual(tuple(self.lib.ttft_metric_name(i).decode() for i in range(len(_lib.METRICS))),
                         ttft.METRICS)
        self.assertIsNone(self.lib.ttft_metric_name(len(_lib.METRICS)))

    def test_counter_names_match_c(self):
        self.assertEqual(tuple(self.lib.ttft_counter_name(i).decode() for i in range(len(_lib.COUNTERS))),
                         ttft.COUNTERS)
        self.assertIsNone(self.lib.ttft_counter_name(len(_lib.COUNTERS)))

    def test_status_and_format_names_match_c(self):
        self.assertEqual(tuple(self.lib.ttft_status_name(i).decode() for i in range(3)), ttft.STATUSES)
        self.assertEqual(tuple(self.lib.ttft_format_name(i).decode() for i in range(len(ttft.FORMATS))), ttft.FORMATS)

    def test_error_texts_match_c(self):
        for code, (name, text) in _lib.ERRORS.items():
            self.assertEqual(self.lib.ttft_strerror(code).decode(), text)
            self.assertEqual(self.lib.ttft_err_name(code).decode(), name)

    def test_reserved_labels_match_the_header(self):
        import re
        with open(os.path.join(os.path.dirname(PYDIR), "include", "ttft.h")) as f:
            text = f.read()
        m = re.search(r"#define TTFT_RESERVED_LABELS((?:[^\n]*\\\n)*[^\n]*)", text)
        self.assertIsNotNone(m)
        self.assertEqual(tuple(re.findall(r'"([^"]*)"', m.group(1))), _lib.RESERVED_LABELS)

    def test_version(self):
        self.assertEqual(self.lib.ttft_version_number() // 10000, _lib.ABI_MAJOR)
        self.assertEqual(ttft.library_version().split(".")[0], str(_lib.ABI_MAJOR))


class Clock(unittest.TestCase):
    def test_now_ns_is_time_monotonic_ns_clock(self):
        reg = ttft.Registry(max_inflight=1)
        for _ in range(100):
            a = time.monotonic_ns()
            b = ttft.now_ns()
            c = reg.now_ns()
            d = time.monotonic_ns()
            self.assertLessEqual(a, b)
            self.assertLessEqual(b, c)
            self.assertLessEqual(c, d)


class LibraryLookup(unittest.TestCase):
    def test_load_from_lists_every_place(self):
        cands = [("first", "/nonexistent/one/libttft.so.1"),
                 ("second", "/nonexistent/two/libttft.so.1"),
                 ("third", "/x (none found)")]
        with self.assertRaises(ttft.LibraryNotFoundError) as cm:
            _lib.load_from(cands)
        msg = str(cm.exception)
        for where, path in cands:
            self.assertIn(where, msg)
            self.assertIn(path, msg)
        self.assertIn("TTFT_LIBRARY", msg)
        self.assertIsInstance(cm.exception, OSError)

    def test_a_library_that_is_not_libttft_is_rejected(self):
        libc = "libc.so.6"
        with self.assertRaises(ttft.LibraryNotFoundError) as cm:
            _lib.load_from([("libc", libc)])
        self.assertIn("not a compatible libttft", str(cm.exception))

    def test_default_candidates_order(self):
        env = {}
        cands = _lib.candidates(env)
        wheres = [w for w, _ in cands]
        self.assertEqual(wheres[0], "next to the package")
        self.assertEqual(wheres[-1], "system loader")
        self.assertEqual(cands[-1][1], "libttft.so.1")
        self.assertIn("source checkout build tree", wheres)  # tests run from the checkout
        self.assertLess(wheres.index("next to the package"),
                        wheres.index("source checkout build tree"))

    def test_explicit_env_is_the_only_place(self):
        self.assertEqual(_lib.candidates({"TTFT_LIBRARY": "/a/b.so"}),
                         [("$TTFT_LIBRARY", "/a/b.so")])

    def test_missing_library_message_from_a_fresh_interpreter(self):
        env = dict(os.environ, TTFT_LIBRARY="/nonexistent/dir/libttft.so.1", PYTHONPATH=PYDIR)
        code = ("import ttft\n"
                "try:\n"
                "    ttft.Registry()\n"
                "except ttft.LibraryNotFoundError as e:\n"
                "    print('MSG', e)\n")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("MSG libttft shared library not found", out.stdout)
        self.assertIn("$TTFT_LIBRARY: /nonexistent/dir/libttft.so.1", out.stdout)


if __name__ == "__main__":
    unittest.main()
