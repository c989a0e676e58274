"""Programs and direct generator calls that cover every kernel template in gpu/kernels/, and the
sha256 of each kernel source they give. tests/data/kernels/golden.json holds those hashes as
main's f-string generators wrote them before the kernel bodies moved into .hpp templates, so a
template that renders one byte differently fails test_kernel_templates.

Regenerate only when a kernel is changed on purpose: `python -m tests.gpu.kernel_golden --write`
(then say in the commit why the source changed)."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "kernels" / "golden.json"
MASKS = ("none", "padding", "causal", "where")


@contextmanager
def _settings(env: dict[str, str], attrs: dict[str, object]) -> Iterator[None]:
    """Environment knobs and module constants (`module:NAME`) set for one case, then restored."""
    import importlib

    saved_env = {k: os.environ.get(k) for k in env}
    saved_attrs = {}
    try:
        os.environ.update(env)
        for spec, value in attrs.items():
            mod, name = spec.split(":")
            module = importlib.import_module(mod)
            saved_attrs[spec] = (module, name, getattr(module, name))
            setattr(module, name, value)
        yield
    finally:
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for module, name, value in saved_attrs.values():
            setattr(module, name, value)


def _compiled_sources(program, precision: str = "fp32") -> dict[str, list[str]]:
    """Every kernel source the fake backend is asked to compile for `program`, by kernel name
    (one name may stand for several sources; they are compiled in parallel, so in any order)."""
    import migx_explore.gpu as gpu
    from migx_explore.gpu.pipelines import CompileOptions
    from migx_explore.gpu.runtime.fake import FakeBackend, FakeKernels

    seen: dict[str, list[str]] = {}

    class Recording(FakeKernels):
        def compiler_id(self) -> str:  # its own cache keys: every kernel is compiled, so recorded
            return f"fakecc-golden-{id(self)}"

        def compile_source(self, name, source, headers, flags):
            seen.setdefault(name, []).append(source)
            return super().compile_source(name, source, headers, flags)

    gpu.compile(program, CompileOptions(precision=precision), backend=FakeBackend(kernels=Recording))
    return seen


def _attention_cases() -> dict[str, Callable[[], dict[str, list[str]]]]:
    from tests.gpu.test_attention import attention_program

    cases: dict[str, Callable[[], dict[str, list[str]]]] = {}
    mma = {"migx_explore.gpu.codegen.attention_mma:MIN_WORK": 0}
    for mask in MASKS:
        for seq, kv in ((17, 17), (130, 130), (9, 40)):
            cases[f"attention_{mask}_{seq}x{kv}"] = lambda s=seq, k=kv, mk=mask: _compiled_sources(
                attention_program(s, mk, kv=k)
            )
        for kv in (9, 128, 300):
            cases[f"decode_{mask}_{kv}"] = lambda k=kv, mk=mask: _compiled_sources(
                attention_program(1, mk, kv=k, heads=4, d=32)
            )
        for dtype in ("float16", "bfloat16"):
            for seq, kv, d, dv in ((9, 9, 16, 16), (130, 130, 64, 64), (17, 70, 128, 32), (64, 200, 32, 64)):
                cases[f"mma_attention_{mask}_{dtype}_{seq}x{kv}x{d}x{dv}"] = _with(
                    {},
                    mma,
                    lambda s=seq, k=kv, a=d, b=dv, mk=mask, t=dtype: _compiled_sources(
                        attention_program(s, mk, kv=k, d=a, dv=b, dtype=t)
                    ),
                )
    cases["attention_odd_dims"] = lambda: _compiled_sources(attention_program(20, "causal", d=24, dv=40, kv=33))
    cases["attention_no_head_axis"] = lambda: _compiled_sources(attention_program(30, "padding", heads=0, d=32))
    cases["attention_guarded"] = lambda: _compiled_sources(attention_program(20, "where", d=32, guard=True))
    cases["attention_half_scalar"] = lambda: _compiled_sources(attention_program(20, "causal", d=24, dtype="float16"))
    cases["decode_odd_dims"] = lambda: _compiled_sources(attention_program(1, "causal", d=80, dv=48, kv=70))
    cases["decode_no_head_axis"] = lambda: _compiled_sources(attention_program(1, "padding", heads=0, d=32, kv=33))
    cases["decode_half"] = lambda: _compiled_sources(attention_program(1, "where", d=40, kv=200, dtype="float16"))
    cases["decode_guarded"] = lambda: _compiled_sources(attention_program(1, "where", d=32, kv=150, guard=True))
    for dtype in ("float16", "bfloat16"):
        cases[f"mma_attention_guarded_{dtype}"] = _with(
            {}, mma, lambda t=dtype: _compiled_sources(attention_program(40, "where", d=32, dtype=t, guard=True))
        )
        cases[f"mma_attention_no_head_axis_{dtype}"] = _with(
            {}, mma, lambda t=dtype: _compiled_sources(attention_program(48, "causal", heads=0, d=32, dtype=t))
        )
    for splits in (1, 2, 4):
        for seq, kv, d in ((40, 40, 32), (33, 200, 64), (20, 17, 128), (130, 130, 64)):
            cases[f"mma_attention_splits{splits}_{seq}x{kv}x{d}"] = _with(
                {},
                {**mma, "migx_explore.gpu.codegen.attention_mma:KEY_SPLITS": splits},
                lambda s=seq, k=kv, a=d: _compiled_sources(attention_program(s, "causal", kv=k, d=a, dtype="float16")),
            )
    return cases


def _with(env: dict[str, str], attrs: dict[str, object], fn: Callable[[], dict[str, list[str]]]):
    def run() -> dict[str, list[str]]:
        with _settings(env, attrs):
            return fn()

    return run


def _gemm_cases() -> dict[str, Callable[[], dict[str, list[str]]]]:
    from migx_explore.compiler.shape import Shape
    from migx_explore.gpu.codegen.gemm import gemm_kernel
    from tests.gpu.test_gemm_mma import CASES, linear

    cases: dict[str, Callable[[], dict[str, list[str]]]] = {}
    for case, (seq, d, n, dtype, opts) in CASES.items():
        for prefetch in ("0", "1"):
            cases[f"gemm_mma_{case}_prefetch{prefetch}"] = _with(
                {"MIGX_GEMM_GEN": "all", "MIGX_GEMM_PREFETCH": prefetch},
                {},
                lambda a=seq, b=d, c=n, t=dtype, o=opts: _compiled_sources(linear(a, b, c, t, **o), "fp16"),
            )

    def direct(shapes, alpha=1.0) -> dict[str, list[str]]:
        ks = gemm_kernel(shapes, alpha)
        return {ks.name: [ks.source]}

    cases["gemm_int8"] = lambda: direct([Shape("int8", [33, 70]), Shape("int8", [70, 20]), Shape("int32", [33, 20])])
    cases["gemm_fp8_batched"] = lambda: direct(
        [Shape("float8e4m3fn", [2, 16, 40]), Shape("float8e4m3fn", [2, 40, 17]), Shape("float32", [2, 16, 17])], 0.5
    )
    cases["gemm_transposed_b"] = lambda: direct(
        [Shape("float32", [5, 9]), Shape("float32", [9, 7], [1, 9]), Shape("float32", [5, 7])]
    )
    cases["gemm_broadcast_a"] = lambda: direct(
        [Shape("float16", [3, 18, 12], [0, 12, 1]), Shape("float16", [3, 12, 30]), Shape("float16", [3, 18, 30])]
    )
    cases["gemm_conv_view"] = lambda: direct(
        [Shape("int8", [1, 8, 27]), Shape("int8", [1, 27, 36]), Shape("int32", [1, 8, 6, 6])]
    )
    return cases


def _other_cases() -> dict[str, Callable[[], dict[str, list[str]]]]:
    from migx_explore import models
    from migx_explore.compiler import parse
    from migx_explore.compiler.op import Op
    from migx_explore.compiler.shape import Shape
    from migx_explore.gpu.codegen.indexing import topk_kernel
    from migx_explore.gpu.codegen.topk import topk_workspace
    from tests.gpu.test_lstm_recurrence import _lstm_program
    from tests.gpu.test_paired_pointwise import PROGRAMS
    from tests.gpu.test_topk_radix import CASES as TOPK
    from tests.passes.test_fuse_kv_append import bucket_program

    cases: dict[str, Callable[[], dict[str, list[str]]]] = {}
    for name, (text, _) in PROGRAMS.items():
        cases[f"paired_{name}"] = lambda t=text: _compiled_sources(parse(t), "fp16")
    for direction, batch, hidden, precision in (
        ("reverse", 3, 40, "fp32"),
        ("bidirectional", 2, 200, "fp32"),
        ("forward", 1, 96, "fp16"),
    ):
        cases[f"lstm_{direction}_{batch}x{hidden}_{precision}"] = lambda d=direction, b=batch, h=hidden, p=precision: (
            _compiled_sources(_lstm_program(d, b, h), p)
        )

    def topk(t: str, lens: list[int], k: int, axis: int, largest: bool) -> dict[str, list[str]]:
        op = Op("topk", k=k, axis=axis, largest=largest)
        out = list(lens)
        out[axis] = k
        extra = list(topk_workspace(op, Shape(t, lens)) or ())
        ks = topk_kernel(op, [Shape(t, lens), *extra, Shape(t, out), Shape("int64", out)])
        return {ks.name: [ks.source]}

    for case, (t, lens, k, axis, largest, special, _) in TOPK.items():
        if special is None:
            cases[f"topk_{case}"] = lambda a=(t, lens, k, axis, largest): topk(*a)
    # the measuring knob's timestamps (one block a slice, keys in shared memory and not)
    for lens, k, axis in (([1, 8400], 300, 1), ([10000], 1500, 0)):
        cases[f"topk_clocks_{lens[-1]}_k{k}"] = _with(
            {"MIGX_TOPK_CLOCKS": "1"}, {}, lambda a=("float32", lens, k, axis, True): topk(*a)
        )
    for t in (1, 4):  # gpt2_decode's bucket program: the KV-cache append inside the attention kernel
        for precision in ("fp32", "fp16"):
            cases[f"kv_append_T{t}_{precision}"] = lambda n=t, p=precision: _compiled_sources(bucket_program(n), p)
    for model in ("transformer", "llama_decoder", "bert_encoder", "gpt2_decode", "bilstm", "mlp", "yolov10n"):
        for precision in ("fp32", "fp16"):
            cases[f"model_{model}_{precision}"] = lambda m=model, p=precision: _compiled_sources(models.load(m), p)
    return cases


def cases() -> dict[str, Callable[[], dict[str, list[str]]]]:
    """Case name -> a function giving {kernel name: source} for it."""
    return {**_attention_cases(), **_gemm_cases(), **_other_cases()}


def digest(sources: dict[str, list[str]]) -> dict[str, list[str]]:
    """Kernel name -> the sorted sha256 of its sources."""
    return {
        name: sorted(hashlib.sha256(t.encode()).hexdigest() for t in texts) for name, texts in sorted(sources.items())
    }


def render_all() -> dict[str, dict[str, list[str]]]:
    return {name: digest(fn()) for name, fn in cases().items()}


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.gpu.kernel_golden --write  (rewrites tests/data/kernels/golden.json)")
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps(render_all(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
