"""Does the importer follow ONNX Runtime? Every model of a corpus through both, on the same inputs.

    python benchmarks/follows_ort.py node [-k PATTERN] [--json FILE]
    python benchmarks/follows_ort.py dir FOLDER [--json FILE]

`node`: ONNX's backend node tests (onnx.backend.test, kind=node) with their stored inputs; `dir`:
every .onnx file of FOLDER (e.g. MIGraphX's test/onnx, extracted outside the repo) on seeded random
inputs drawn from the declared input types (symbolic dims 1). Each model lands in one class:

- match: ORT runs it, we import it and our outputs equal ORT's (the case's tolerance, or 1e-3);
- mismatch: both run it, the outputs differ;
- we refuse: ORT runs it, the importer or evaluator refuses it (a MigxError, grouped by reason);
- ORT refuses: ORT refuses it (session or run), we run it;
- both refuse.

The figure the issue tracks is match / (models ORT runs)."""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import time
import warnings

import numpy as np
import onnx
from onnx import numpy_helper

from migx_explore.compiler.errors import MigxError
from migx_explore.compiler.onnx.backend import ReferenceBackendRep

_FORK = True  # the node tests' models are ORT's own test cases: run those in this process


def _ort(model: onnx.ModelProto, feed: dict, seconds: int = 60) -> list | str:
    """ORT's outputs, or why it refused; in a forked child, since ORT can hang on a malformed
    model (an Einsum with two ellipses in one term, in MIGraphX's corpus)."""
    import multiprocessing as mp

    if not _FORK:
        return _ort_here(model, feed)
    parent, child = mp.get_context("fork").Pipe(duplex=False)
    proc = mp.get_context("fork").Process(target=lambda: child.send(_ort_here(model, feed)))
    proc.start()
    got = parent.recv() if parent.poll(seconds) else f"timeout: ORT ran past {seconds} s"
    proc.kill()
    proc.join()
    return got


def _ort_here(model: onnx.ModelProto, feed: dict) -> list | str:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        return list(sess.run(None, feed))
    except Exception as e:  # noqa: BLE001 - ORT refusing a model is a result here
        return f"{type(e).__name__}: {' '.join(str(e).split())[:160]}"


def _ours(model: onnx.ModelProto, feed: dict) -> list | str:
    try:
        # the CLI's path: parse_onnx runs its own model checks (ReferenceBackend.prepare adds the
        # onnx backend API's strict checker, which refuses contrib nodes without an opset import)
        return list(ReferenceBackendRep(model).run(feed))
    except MigxError as e:
        return f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
    except Exception as e:  # noqa: BLE001 - a crash is a refusal too, but named as one
        return f"crash {type(e).__name__}: {' '.join(str(e).split())[:200]}"


def _close(a: list, b: list, rtol: float, atol: float) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return False
        if x.dtype.kind in "OSU" or y.dtype.kind in "OSU":
            if not np.array_equal(x, y):
                return False
            continue
        if not np.allclose(x.astype(np.float64), y.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True):
            return False
    return True


def classify(model: onnx.ModelProto, feed: dict, rtol: float = 1e-3, atol: float = 1e-5) -> tuple[str, str]:
    """(class, detail) for one model on one feed."""
    theirs, ours = _ort(model, feed), _ours(model, feed)
    if isinstance(theirs, str):
        return ("both refuse", theirs) if isinstance(ours, str) else ("ORT refuses", theirs)
    if isinstance(ours, str):
        return "we refuse", ours
    return ("match", "") if _close(ours, theirs, rtol, atol) else ("mismatch", "")


def _random_feed(model: onnx.ModelProto, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feed = {}
    for vi in model.graph.input:
        if vi.name in inits or not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        dt = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        lens = [max(d.dim_value, 1) if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        if dt.kind == "f":
            feed[vi.name] = rng.uniform(-1, 1, lens).astype(dt)
        elif dt == np.bool_:
            feed[vi.name] = rng.integers(0, 2, lens).astype(np.bool_)
        else:
            feed[vi.name] = rng.integers(0, 3, lens).astype(dt)
    return feed


def node_corpus(pattern: str | None):
    from migx_explore.compiler.onnx.conformance import load_cases

    for c in load_cases(pattern):
        inits = {t.name for t in c.model.graph.initializer}
        names = [i.name for i in c.model.graph.input if i.name not in inits]
        if not c.data_sets:
            continue
        inputs = c.data_sets[0][0]
        feed = dict(zip(names, (numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v for v in inputs)))
        yield c.name, c.model, feed, c.rtol, max(c.atol, 1e-7)


def dir_corpus(folder: str):
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".onnx"):
            continue
        try:
            model = onnx.load(os.path.join(folder, f))
        except Exception:  # noqa: BLE001 - an unreadable file is skipped by both
            continue
        yield f, model, _random_feed(model), 1e-3, 1e-4


def _timed(seconds: int, fn, *args) -> tuple[str, str]:
    """fn(*args), or ("timeout", ...) when it runs past `seconds` (a SIGALRM, main thread only)."""
    import signal

    def stop(signum, frame):
        raise TimeoutError

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        return fn(*args)
    except TimeoutError:
        return "timeout", f"over {seconds} s"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _reason(detail: str) -> str:
    """A refusal's message without names and numbers, to group them."""
    text = re.sub(r"'[^']*'", "'.'", detail)
    text = re.sub(r"node [^ (]+ \(", "node (", text)
    text = re.sub(r"\[[^\]]*\]|\{[^}]*\}|\d+", "#", text)
    return text[:140]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", choices=("node", "dir"))
    ap.add_argument("folder", nargs="?")
    ap.add_argument("-k", dest="pattern", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--progress", default=None, help="append one line per model to this file as it goes")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per model before it counts as 'timeout'")
    args = ap.parse_args(argv)
    if args.corpus == "dir" and not args.folder:
        ap.error("dir needs a FOLDER")
    global _FORK
    _FORK = args.corpus == "dir"
    items = node_corpus(args.pattern) if args.corpus == "node" else dir_corpus(args.folder)
    t0 = time.perf_counter()
    rows = {}
    if args.progress and os.path.exists(args.progress):  # resume: the models already classified
        with open(args.progress) as f:
            rows = {n: (k, d) for n, k, d in (line.rstrip("\n").split("\t", 2) for line in f if line.count("\t") >= 2)}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for name, model, feed, rtol, atol in items:
            if name in rows:
                continue
            rows[name] = _timed(args.timeout, classify, model, feed, rtol, atol)
            if args.progress:
                with open(args.progress, "a") as f:
                    f.write(f"{name}\t{rows[name][0]}\t{rows[name][1]}\n")
    counts = collections.Counter(k for k, _ in rows.values())
    ort_runs = counts["match"] + counts["mismatch"] + counts["we refuse"]
    print(
        f"{len(rows)} models, {time.perf_counter() - t0:.0f} s: ORT runs {ort_runs}; of these we match "
        f"{counts['match']} ({100 * counts['match'] / max(ort_runs, 1):.1f}%), mismatch {counts['mismatch']}, "
        f"refuse {counts['we refuse']}; ORT refuses {counts['ORT refuses'] + counts['both refuse']}, of which we "
        f"run {counts['ORT refuses']}"
    )
    for cls in ("we refuse", "ORT refuses", "mismatch"):
        groups = collections.Counter(_reason(d) for k, d in rows.values() if k == cls)
        if groups:
            print(f"\n{cls}:")
            for r, n in groups.most_common(40):
                print(f"  {n:4d}  {r}")
            print("  e.g. " + ", ".join(n for n, (k, _) in rows.items() if k == cls)[:600])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({n: list(v) for n, v in rows.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
