"""pbdecode.py — an independent reader of the Prometheus protobuf exposition
(length-delimited io.prometheus.client.MetricFamily messages), standard
library only, written from the field numbers of metrics.proto (Prometheus
client_model / prompb), not from the C encoder.

It is strict, because it reads one producer whose output must be exact:
  - every varint at most 10 bytes and minimal (no padding bytes);
  - every tag's field number known for its message and with the wire type
    the .proto gives it; a singular field present at most once;
  - every length within the enclosing message; the stream ends exactly
    after the last message;
  - strings valid UTF-8.
Any violation raises DecodeError with the byte offset.

Also here: a reader of the Prometheus text format 0.0.4 (what format_prom.c
writes), and conversions of both into one comparable form:
  families(...) -> [Family(name, type, help, unit, samples)], where samples
  is a list of (sample name, tuple of sorted (label, value)), value) as the
  text format would show them (histograms as _bucket{le}, _sum, _count with
  le="+Inf" = count; summaries as {quantile}, _sum, _count).
"""
import math
import struct

MT = {0: "counter", 1: "gauge", 2: "summary", 3: "untyped", 4: "histogram", 5: "gaugehistogram"}


class DecodeError(Exception):
    pass


# --------------------------------------------------------------- wire level
def read_varint(buf, pos, end):
    start = pos
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise DecodeError("varint runs past the end at %d" % start)
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift >= 70:
            raise DecodeError("varint longer than 10 bytes at %d" % start)
    if pos - start > 1 and buf[pos - 1] == 0:
        raise DecodeError("non-minimal varint at %d" % start)
    if value >= 1 << 64:
        raise DecodeError("varint above 2^64 at %d" % start)
    return value, pos


def zigzag_decode(u):
    return (u >> 1) ^ -(u & 1)


def as_int64(u):
    return u - (1 << 64) if u >= 1 << 63 else u


# field kinds: (name, kind, repeated). kind: a message name or one of
# uint64 uint32 int64 int32 sint64 sint32 enum double string
SCHEMA = {
    "MetricFamily": {1: ("name", "string", False), 2: ("help", "string", False),
                     3: ("type", "enum", False), 4: ("metric", "Metric", True),
                     5: ("unit", "string", False)},
    "Metric": {1: ("label", "LabelPair", True), 2: ("gauge", "Gauge", False),
               3: ("counter", "Counter", False), 4: ("summary", "Summary", False),
               5: ("untyped", "Untyped", False), 6: ("timestamp_ms", "int64", False),
               7: ("histogram", "Histogram", False)},
    "LabelPair": {1: ("name", "string", False), 2: ("value", "string", False)},
    "Gauge": {1: ("value", "double", False)},
    "Untyped": {1: ("value", "double", False)},
    "Counter": {1: ("value", "double", False), 2: ("exemplar", "Exemplar", False),
                3: ("created_timestamp", "Timestamp", False)},
    "Quantile": {1: ("quantile", "double", False), 2: ("value", "double", False)},
    "Summary": {1: ("sample_count", "uint64", False), 2: ("sample_sum", "double", False),
                3: ("quantile", "Quantile", True), 4: ("created_timestamp", "Timestamp", False)},
    "Histogram": {1: ("sample_count", "uint64", False), 2: ("sample_sum", "double", False),
                  3: ("bucket", "Bucket", True), 4: ("sample_count_float", "double", False),
                  5: ("schema", "sint32", False), 6: ("zero_threshold", "double", False),
                  7: ("zero_count", "uint64", False), 8: ("zero_count_float", "double", False),
                  9: ("negative_span", "BucketSpan", True), 10: ("negative_delta", "sint64", True),
                  11: ("negative_count", "double", True), 12: ("positive_span", "BucketSpan", True),
                  13: ("positive_delta", "sint64", True), 14: ("positive_count", "double", True),
                  15: ("created_timestamp", "Timestamp", False),
                  16: ("exemplars", "Exemplar", True)},
    "Bucket": {1: ("cumulative_count", "uint64", False), 2: ("upper_bound", "double", False),
               3: ("exemplar", "Exemplar", False), 4: ("cumulative_count_float", "double", False)},
    "BucketSpan": {1: ("offset", "sint32", False), 2: ("length", "uint32", False)},
    "Exemplar": {1: ("label", "LabelPair", True), 2: ("value", "double", False),
                 3: ("timestamp", "Timestamp", False)},
    "Timestamp": {1: ("seconds", "int64", False), 2: ("nanos", "int32", False)},
}
VARINT_KINDS = {"uint64", "uint32", "int64", "int32", "sint64", "sint32", "enum"}


def scalar_from_varint(kind, u, at):
    if kind == "uint64":
        return u
    if kind == "uint32":
        if u >= 1 << 32:
            raise DecodeError("uint32 out of range at %d" % at)
        return u
    if kind in ("int64", "enum"):
        return as_int64(u)
    if kind == "int32":
        v = as_int64(u)
        if not -(1 << 31) <= v < 1 << 31:
            raise DecodeError("int32 out of range at %d" % at)
        return v
    if kind == "sint64":
        return zigzag_decode(u)
    if kind == "sint32":
        v = zigzag_decode(u)
        if not -(1 << 31) <= v < 1 << 31:
            raise DecodeError("sint32 out of range at %d" % at)
        return v
    raise DecodeError("not a varint kind: %s" % kind)


def decode_message(buf, pos, end, mtype):
    """Decode buf[pos:end] as message type mtype into a dict."""
    schema = SCHEMA[mtype]
    out = {}
    while pos < end:
        at = pos
        tag, pos = read_varint(buf, pos, end)
        field, wt = tag >> 3, tag & 7
        if field == 0 or field not in schema:
            raise DecodeError("%s: unknown field %d (wire type %d) at %d" % (mtype, field, wt, at))
        name, kind, repeated = schema[field]
        if not repeated and name in out:
            raise DecodeError("%s.%s given twice at %d" % (mtype, name, at))
        values = []
        if wt == 0:
            if kind not in VARINT_KINDS:
                raise DecodeError("%s.%s: wire type 0 for %s at %d" % (mtype, name, kind, at))
            u, pos = read_varint(buf, pos, end)
            values.append(scalar_from_varint(kind, u, at))
        elif wt == 1:
            if kind != "double":
                raise DecodeError("%s.%s: wire type 1 for %s at %d" % (mtype, name, kind, at))
            if pos + 8 > end:
                raise DecodeError("%s.%s: double runs past the end at %d" % (mtype, name, at))
            values.append(struct.unpack_from("<d", buf, pos)[0])
            pos += 8
        elif wt == 2:
            n, pos = read_varint(buf, pos, end)
            if pos + n > end:
                raise DecodeError("%s.%s: length %d runs past the end at %d" % (mtype, name, n, at))
            sub_end = pos + n
            if kind == "string":
                try:
                    values.append(bytes(buf[pos:sub_end]).decode("utf-8", errors="strict"))
                except UnicodeDecodeError as e:
                    raise DecodeError("%s.%s: invalid UTF-8 at %d: %s" % (mtype, name, at, e))
            elif kind in SCHEMA:
                values.append(decode_message(buf, pos, sub_end, kind))
            elif repeated and kind in VARINT_KINDS:  # packed
                p = pos
                while p < sub_end:
                    u, p = read_varint(buf, p, sub_end)
                    values.append(scalar_from_varint(kind, u, at))
            elif repeated and kind == "double":  # packed
                if n % 8:
                    raise DecodeError("%s.%s: packed doubles of %d bytes at %d" % (mtype, name, n, at))
                values.extend(struct.unpack_from("<%dd" % (n // 8), buf, pos))
            else:
                raise DecodeError("%s.%s: wire type 2 for %s at %d" % (mtype, name, kind, at))
            pos = sub_end
        else:
            raise DecodeError("%s: wire type %d at %d" % (mtype, wt, at))
        if repeated:
            out.setdefault(name, []).extend(values)
        else:
            out[name] = values[0]
    if pos != end:
        raise DecodeError("%s overruns its length" % mtype)
    return out


def decode_stream(buf):
    """The MetricFamily messages of a length-delimited stream."""
    buf = memoryview(bytes(buf))
    pos, end, fams = 0, len(buf), []
    while pos < end:
        n, pos = read_varint(buf, pos, end)
        if pos + n > end:
            raise DecodeError("MetricFamily of %d bytes at %d runs past the end (%d)" % (n, pos, end))
        fams.append(decode_message(buf, pos, pos + n, "MetricFamily"))
        pos += n
    return fams


# ---------------------------------------------------------- native buckets
def native_buckets(h):
    """[(index, count)] of the positive native buckets, every index covered
    by a span (zeros included), from spans and deltas."""
    spans = h.get("positive_span", [])
    deltas = h.get("positive_delta", [])
    if h.get("positive_count"):
        raise DecodeError("float buckets (positive_count) in an integer histogram")
    if sum(s.get("length", 0) for s in spans) != len(deltas):
        raise DecodeError("span lengths %d != %d deltas"
                          % (sum(s.get("length", 0) for s in spans), len(deltas)))
    out, idx, k, count = [], None, 0, 0
    for n, s in enumerate(spans):
        off = s.get("offset", 0)
        if n > 0 and off < 0:
            raise DecodeError("negative offset in span %d" % n)
        idx = off if n == 0 else idx + off
        for _ in range(s.get("length", 0)):
            count += deltas[k]
            if count < 0:
                raise DecodeError("negative bucket count at index %d" % idx)
            out.append((idx, count))
            k += 1
            idx += 1
    return out


def native_bounds(schema, index):
    """(lower exclusive, upper inclusive) of positive bucket index."""
    base = 2.0 ** (2.0 ** -schema)
    return base ** (index - 1), base ** index


def native_bucket_of(schema, rank, h):
    """PromQL's choice: the first bucket (zero bucket first) whose
    cumulative count reaches rank. (lower, upper, index or None)."""
    cum = h.get("zero_count", 0)
    if rank <= cum and cum > 0:
        return 0.0, h.get("zero_threshold", 0.0), None
    for idx, c in native_buckets(h):
        cum += c
        if c and cum >= rank:
            lo, hi = native_bounds(schema, idx)
            return lo, hi, idx
    return None


# ------------------------------------------------------ the common picture
class Family:
    def __init__(self, name, typ, help_, unit=None):
        self.name, self.type, self.help, self.unit = name, typ, help_, unit
        self.samples = []  # (name, labels tuple, value)
        self.raw = []      # protobuf: (labels dict, metric dict)

    def __repr__(self):
        return "Family(%s %s, %d samples)" % (self.name, self.type, len(self.samples))


def fmt_le(x):
    return math.inf if x == math.inf else float(x)


def pb_families(fams):
    """Protobuf MetricFamily dicts -> [Family] in the text format's terms."""
    out = []
    for mf in fams:
        if "name" not in mf or "type" not in mf:
            raise DecodeError("MetricFamily without name or type")
        typ = MT.get(mf["type"])
        if typ is None:
            raise DecodeError("%s: unknown type %d" % (mf["name"], mf["type"]))
        f = Family(mf["name"], typ, mf.get("help", ""), mf.get("unit"))
        name = mf["name"]
        for m in mf.get("metric", []):
            labels = {}
            for lp in m.get("label", []):
                if lp.get("name", "") in labels:
                    raise DecodeError("%s: label %s twice" % (name, lp.get("name")))
                labels[lp.get("name", "")] = lp.get("value", "")
            f.raw.append((labels, m))
            base = tuple(sorted(labels.items()))
            present = [k for k in ("gauge", "counter", "summary", "untyped", "histogram") if k in m]
            want = {"counter": "counter", "gauge": "gauge", "summary": "summary",
                    "untyped": "untyped", "histogram": "histogram", "gaugehistogram": "histogram"}[typ]
            if present != [want]:
                raise DecodeError("%s (%s): metric carries %s" % (name, typ, present))
            if typ in ("counter", "gauge", "untyped"):
                f.samples.append((name, base, m[want].get("value", 0.0)))
            elif typ == "summary":
                s = m["summary"]
                for q in s.get("quantile", []):
                    lab = tuple(sorted(list(labels.items()) + [("quantile", float(q.get("quantile", 0.0)))]))
                    f.samples.append((name, lab, q.get("value", 0.0)))
                f.samples.append((name + "_sum", base, s.get("sample_sum", 0.0)))
                f.samples.append((name + "_count", base, float(s.get("sample_count", 0))))
            else:
                h = m["histogram"]
                count = h.get("sample_count", 0)
                last = -math.inf
                for b in h.get("bucket", []):
                    le = b.get("upper_bound", 0.0)
                    if le <= last:
                        raise DecodeError("%s: bucket bounds not ascending" % name)
                    last = le
                    lab = tuple(sorted(list(labels.items()) + [("le", fmt_le(le))]))
                    f.samples.append((name + "_bucket", lab, float(b.get("cumulative_count", 0))))
                if last != math.inf:
                    lab = tuple(sorted(list(labels.items()) + [("le", math.inf)]))
                    f.samples.append((name + "_bucket", lab, float(count)))
                f.samples.append((name + "_sum", base, h.get("sample_sum", 0.0)))
                f.samples.append((name + "_count", base, float(count)))
        out.append(f)
    return out


# -------------------------------------------------------- text 0.0.4 reader
def _unescape(s, quote):
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "n":
                out.append("\n")
            elif n == "\\":
                out.append("\\")
            elif n == '"' and quote:
                out.append('"')
            else:
                out.append("\\" + n)
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _parse_sample(line):
    i = 0
    while i < len(line) and line[i] not in "{ ":
        i += 1
    name = line[:i]
    labels = []
    if i < len(line) and line[i] == "{":
        i += 1
        while True:
            if line[i] == "}":
                i += 1
                break
            j = line.index("=", i)
            lname = line[i:j].strip()
            if line[j + 1] != '"':
                raise ValueError("label value not quoted: %r" % line)
            k = j + 2
            buf = []
            while line[k] != '"':
                if line[k] == "\\":
                    buf.append(line[k:k + 2])
                    k += 2
                else:
                    buf.append(line[k])
                    k += 1
            labels.append((lname, _unescape("".join(buf), True)))
            k += 1
            if line[k] == ",":
                k += 1
            i = k
    rest = line[i:].split()
    if len(rest) < 1:
        raise ValueError("sample without value: %r" % line)
    v = rest[0]
    value = {"+Inf": math.inf, "-Inf": -math.inf, "NaN": math.nan}.get(v)
    if value is None:
        value = float(v)
    return name, labels, value


def text_families(text):
    """The text format 0.0.4 -> [Family] (families in order of # TYPE)."""
    fams, by_name, helps = [], {}, {}
    cur = None
    for line in text.split("\n"):
        if not line:
            continue
        if line.startswith("# HELP "):
            _, _, name, *rest = line.split(" ", 3)
            helps[name] = _unescape(rest[0] if rest else "", False)
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            cur = Family(name, typ, helps.get(name, ""))
            if name in by_name:
                raise ValueError("family %s twice" % name)
            by_name[name] = cur
            fams.append(cur)
            continue
        if line.startswith("#"):
            continue
        name, labels, value = _parse_sample(line)
        if cur is None:
            raise ValueError("sample before any TYPE: %r" % line)
        ok = name == cur.name or (cur.type in ("histogram", "summary") and
                                   name in (cur.name + "_bucket", cur.name + "_sum", cur.name + "_count"))
        if not ok:
            raise ValueError("sample %s outside its family %s" % (name, cur.name))
        lab = tuple(sorted((k, float(v) if k in ("le", "quantile") else v) for k, v in labels))
        cur.samples.append((name, lab, value))
    return fams


# ----------------------------------------------------------------- CLI
def _fmt_labels(labels):
    return "{%s}" % ",".join('%s="%s"' % (k, v) for k, v in labels) if labels else ""


def main(argv):
    """python3 pbdecode.py [FILE]: decode a protobuf exposition (stdin by
    default) and print it in the text format's terms, each histogram
    followed by a comment with its native buckets."""
    import sys
    data = open(argv[1], "rb").read() if len(argv) > 1 else sys.stdin.buffer.read()
    try:
        fams = decode_stream(data)
    except DecodeError as e:
        print("decode error: %s" % e, file=sys.stderr)
        return 1
    for f in pb_families(fams):
        print("# HELP %s %s" % (f.name, f.help))
        print("# TYPE %s %s" % (f.name, f.type))
        for name, labels, value in f.samples:
            labels = tuple((k, ("+Inf" if v == math.inf else repr(v)) if k in ("le", "quantile") else v)
                           for k, v in labels)
            print("%s%s %r" % (name, _fmt_labels(labels), value))
        for labels, m in f.raw:
            h = m.get("histogram")
            if h and "schema" in h:
                nb = [(i, c) for i, c in native_buckets(h) if c]
                span = ""
                if nb:
                    span = ", populated (%.6g, %.6g]" % (native_bounds(h["schema"], nb[0][0])[0],
                                                         native_bounds(h["schema"], nb[-1][0])[1])
                print("#   native %s: schema %d, zero_count %d, %d buckets%s"
                      % (_fmt_labels(tuple(sorted(labels.items()))), h["schema"],
                         h.get("zero_count", 0), len(nb), span))
    return 0


if __name__ == "__main__":
    import sys
    sys.exit(main(sys.argv))
