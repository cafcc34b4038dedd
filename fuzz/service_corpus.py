#!/usr/bin/env python3
"""Writes the seed corpus of service_fuzz (fuzz/corpus/service/): one file per TraceService call,
the method's byte then its request message, hand-encoded protobuf (no generated Python code).

    fuzz/service_corpus.py build/fuzz/service_fuzz_replay

The session ids the seeds name are the fuzz target's own (a fixed clock and session key make them
the same in every run); they are read from the binary (SERVICE_FUZZ_IDS=1), so rerun this when the
id format changes. SERVICE_FUZZ_VERBOSE=1 service_fuzz_replay FILE prints what a seed reaches.
"""

import os
import struct
import subprocess
import sys


def varint(n):
    out = b""
    while True:
        low, n = n & 0x7F, n >> 7
        if not n:
            return out + bytes([low])
        out += bytes([low | 0x80])


def key(field, wire_type):
    return varint((field << 3) | wire_type)


def s(field, value):  # Length-delimited: a string, bytes or a message.
    value = value.encode() if isinstance(value, str) else value
    return key(field, 2) + varint(len(value)) + value


def i(field, value):
    return key(field, 0) + varint(value & ((1 << 64) - 1))


def d(field, value):
    return key(field, 1) + struct.pack("<d", value)


def session(sid):  # DiffOperand.session / WatchRequest.session / GetSnapshotRequest.session
    return s(1, s(1, sid))


def tensor(shape, std):
    return (b"".join(i(1, x) for x in shape) + s(2, "torch.float32") + s(3, "cpu") +
            s(4, d(2, std)))


def layer(name, latency, calls, std, grad):
    return (s(1, name.split(".")[-1]) + s(2, "Linear") + s(3, name) + i(4, 2) + i(5, 100) +
            s(7, tensor([4, 8], std)) + d(8, latency) + d(11, latency) + i(12, calls) +
            d(15, grad) + i(26, calls))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    ids = subprocess.run([sys.argv[1], os.devnull], env={**os.environ, "SERVICE_FUZZ_IDS": "1"},
                         capture_output=True, text=True, check=True).stderr.split("\n")
    ended, live, rank0, rank1 = [line.split()[0] for line in ids if line.startswith("20")][:4]
    record = s(1, s(1, "Net")) + b"".join(s(2, layer(f"net.l{k}", 0.1 * (k + 1), 8, 1.0 + k, 2.0))
                                          for k in range(3))
    history = (s(1, "net.l0") + b"".join(i(2, k) for k in range(4)) +
               b"".join(d(3, 0.1 * k) for k in range(4)))
    snapshot = s(2, record) + s(3, history)
    seeds = {
        "list_all": (0, b""),
        "list_job": (0, s(1, "job")),
        "snapshot_latest": (1, session("latest")),
        "snapshot_live": (1, session(live)),
        "snapshot_evicted": (1, session(ended)),
        "snapshot_unknown": (1, session("../../etc/passwd")),
        "watch_live": (2, session(live) + d(3, 0.05)),
        "watch_evicted": (2, session(ended)),
        "watch_latest": (2, session("latest") + d(3, 3600.0)),
        "watch_job": (2, s(2, "job") + d(3, 0.5)),
        "watch_bad_interval": (2, session(live) + d(3, float("nan"))),
        "diff_sessions": (3, s(1, session(ended)) + s(2, session(live))),
        "diff_ranks": (3, s(1, session(rank0)) + s(2, session(rank1)) + d(3, 0.1)),
        "diff_baseline_upload": (3, s(1, s(2, "base")) + s(2, s(3, record))),
        "diff_snapshot": (3, s(1, s(4, snapshot)) + s(2, session("latest")) + d(4, 0.5)),
        "diff_bad_threshold": (3, s(1, session(ended)) + s(2, session(live)) + d(4, -1.0)),
        "diff_empty": (3, b""),
        "set_from_session": (4, s(1, "ci-main") + s(2, session(live))),
        "set_base_again": (4, s(1, "base") + s(2, s(3, record))),
        "set_from_baseline": (4, s(1, "copy.of-base_1") + s(2, s(2, "base"))),
        "set_bad_name": (4, s(1, "../x") + s(2, session(live))),
        "list_baselines": (5, b""),
        "remove_base": (6, s(1, "base")),
        "remove_missing": (6, s(1, "nothing-here")),
        "remove_hidden": (6, s(1, ".hidden")),
    }
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "service")
    os.makedirs(out, exist_ok=True)
    for name, (method, body) in seeds.items():
        with open(os.path.join(out, name + ".bin"), "wb") as f:
            f.write(bytes([method]) + body)
    print(f"{len(seeds)} seeds in {out}")


if __name__ == "__main__":
    main()
