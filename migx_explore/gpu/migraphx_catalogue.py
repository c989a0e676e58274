"""MIGraphX's own GPU pass lists, as data: `target::get_passes` of develop in May 2026 (PR #4904,
90 entries) and in August 2026 (96 entries), and the compile modes of PR #4770.

Each entry is MIGraphX's `pass.name()` string (what MIGRAPHX_TRACE_PASSES and MIGRAPHX_TIME_PASSES
print: `gpu::lowering`, `dead_code_elimination`), the pipeline it sits in, the registered pass of
ours that stands for it, and its `enable_pass` condition. gpu/pipelines.py builds our pipelines in
this order; the MIGraphX trace reader groups a real compile's passes into pipelines with it.
Sources: MIGraphX's src/targets/gpu/target.cpp at develop f729a52 (May, PR #4904) and a copy with
PRs #4770, #4831, #4928, #5030, #5105, #5131 and #5138 merged (August).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

VERSIONS = ("2026-05", "2026-08")
LATEST = "2026-08"
DCE = "dead_code_elimination"


@dataclass(frozen=True)
class CatalogueEntry:
    pipeline: str
    name: str  # MIGraphX's pass.name()
    ours: str  # the registered pass of ours at this position
    condition: str = ""  # enable_pass condition / parameters, as target.cpp states them


def _e(pipeline: str, name: str, condition: str = "", ours: str | None = None) -> CatalogueEntry:
    return CatalogueEntry(pipeline, name, ours if ours is not None else name.removeprefix("gpu::"), condition)


def _dce(pipeline: str, condition: str = "") -> CatalogueEntry:
    return _e(pipeline, DCE, condition)


_DYNAMIC = [
    _e("dynamic_shapes", "split_single_dyn_dim", "MIGRAPHX_ENABLE_FULL_DYNAMIC not set"),
    _dce("dynamic_shapes"),
    _e("dynamic_shapes", "simplify_dyn_ops"),
    _dce("dynamic_shapes"),
]


def _required(with_rnn: bool) -> list[CatalogueEntry]:
    r = "required"
    out = [
        _e(r, "normalize_ops"),
        _dce(r),
        _e(r, "eliminate_identity"),
        _dce(r),
        _e(r, "fp8_ocp_to_fnuz", "GPU lacks OCP fp8 and has FNUZ fp8 (gfx94x)"),
        _dce(r, "as fp8_ocp_to_fnuz"),
        _e(r, "simplify_qdq", "use_mx_quant = GPU has MX intrinsics"),
        _e(r, "rewrite_quantization", "MLIR disabled"),
        _dce(r),
    ]
    if with_rnn:
        out += [_e(r, "rewrite_rnn"), _dce(r)]
    out += [
        _e(r, "gpu::eliminate_data_type_for_gpu", "disable_64bit = fast_math"),
        _e(r, "rewrite_resize", "affine_only"),
        _dce(r),
        _e(r, "simplify_reshapes", "enable_gather_rewrite"),
        _e(r, "eliminate_identity"),
        _e(r, "eliminate_pad"),
        _dce(r),
        _e(r, "insert_pad", "ops = {convolution}"),
        _dce(r),
        _e(r, "inline_module"),
        _e(r, "rewrite_pooling", "not FULL_DYNAMIC; rewrite_lrn without MIOpen"),
        _dce(r),
    ]
    return out


def _optimize_rewrite(aug: bool) -> list[CatalogueEntry]:
    o = "optimize_rewrite"
    head = [_e(o, "rewrite_convolution"), _dce(o)] if aug else []
    layout = "order = backend option convolution_layout" if aug else "channels_last = MIGRAPHX_ENABLE_NHWC"
    mid = [_e(o, "promote_storage_type", "{bf16}; gfx name not gfx125*"), _dce(o)] if aug else []
    return [
        *head,
        _e(o, "rewrite_gelu", "fast_math"),
        _e(o, "optimize_module"),
        _e(o, "layout_convolution", layout),
        _dce(o),
        _e(o, "fuse_horizontal", "not FULL_DYNAMIC"),
        _dce(o),
        _e(o, "gpu::prefuse_ops"),
        _dce(o),
        _dce(o),
        _e(o, "rewrite_reduce"),
        _e(o, "rewrite_topk"),
        _e(o, "rewrite_low_precision"),
        _e(o, "rewrite_dot", "MIGRAPHX_ENABLE_REWRITE_DOT"),
        _dce(o),
        *mid,
        _e(o, "propagate_precision"),
        _dce(o),
        _e(o, "simplify_reshapes", "enable_op_shape_transform_op"),
        _dce(o),
    ]


def _fusion(aug: bool) -> list[CatalogueEntry]:
    f = "fusion"
    attn = "MLIR enabled; gfx94*/gfx95* or MIGRAPHX_MLIR_USE_SPECIFIC_OPS" + ("; compile_mode != eager" if aug else "")
    return [
        _e(f, "fuse_attention", attn),
        _dce(f),
        _e(f, "optimize_module"),
        *([_e(f, "gpu::fuse_mlss", "backend option mlss_use_specific_ops")] if aug else []),
        _e(f, "fuse_pointwise_reduce"),
        _dce(f),
        _e(f, "gpu::fuse_ck", "MIGRAPHX_ENABLE_CK; not Windows"),
        _dce(f),
        _e(f, "gpu::fuse_mlir", "MLIR enabled"),
        _dce(f),
        _e(f, "fuse_concat"),
        _dce(f),
    ]


def _backend(aug: bool) -> list[CatalogueEntry]:
    b = "backend"
    reshape = [_e(b, "gpu::lower_reshape"), _dce(b)] if aug else []
    device_ops = [_e(b, "gpu::lower_device_ops")] if aug else []
    bench = "skip_benchmark = compile_mode == eager" if aug else "exhaustive_tune"
    return [
        _e(b, "auto_contiguous"),
        _dce(b),
        _e(b, "gpu::lowering", "offload_copy"),
        _e(b, "eliminate_contiguous", "gpu::contiguous"),
        _dce(b),
        *reshape,
        _e(b, "adjust_allocation", "gpu model"),
        _dce(b),
        _e(b, "eliminate_concat"),
        _dce(b),
        _e(b, "gpu::compile_miopen", "MIGRAPHX_USE_MIOPEN"),
        _dce(b, "MIGRAPHX_USE_MIOPEN"),
        _e(b, "gpu::fuse_ops", "fast_math"),
        _dce(b),
        _e(b, "gpu::compile_hipblaslt", "MIGRAPHX_USE_HIPBLASLT", ours="compile_blas"),
        _dce(b, "MIGRAPHX_USE_HIPBLASLT"),
        _e(b, "replace_allocate", "offload_copy"),
        _dce(b),
        _e(b, "adjust_allocation", "gpu model"),
        _dce(b),
        *device_ops,
        _e(b, "gpu::compile_ops", bench),
        _dce(b),
        _e(b, "promote_literals"),
        _dce(b),
        _e(b, "gpu::write_literals"),
        _e(b, "schedule", "unless MIGRAPHX_DISABLE_SCHEDULE_PASS"),
        _e(b, "memory_coloring", "hip::allocate"),
        _e(b, "sync_device"),
        _e(b, "preallocate_param", "scratch"),
        _dce(b),
        _e(b, "eliminate_allocation", "hip::allocate"),
        _e(b, "check_context"),
        _e(b, "normalize_ops"),
        _dce(b),
        _e(b, "eliminate_identity"),
    ]


def catalogue(version: str = LATEST) -> tuple[CatalogueEntry, ...]:
    """Every entry of `target::get_passes` (balanced mode) of that MIGraphX develop snapshot."""
    check_version(version)
    aug = version == "2026-08"
    return tuple(_DYNAMIC + _required(not aug) + _optimize_rewrite(aug) + _fusion(aug) + _backend(aug))


# PR #4770's eager mode: this short list stands in for optimize_rewrite.
EAGER_OPTIMIZE = ("optimize_module", DCE, "rewrite_reduce", "rewrite_topk", DCE)


def mode_catalogue(version: str = LATEST, mode: str = "balanced") -> tuple[CatalogueEntry, ...]:
    """The entries a compile mode runs. August 2026 (PR #4770 as merged): eager = dynamic_shapes +
    required + {optimize_module, DCE, rewrite_reduce, rewrite_topk, DCE} + fusion (fuse_attention
    an `id`) + backend (no benchmarking), 79 entries; max = balanced with exhaustive tuning. May
    2026 (the PR's head of then): eager drops optimize_rewrite whole, 72 entries."""
    entries = catalogue(version)
    if mode != "eager":
        return entries
    keep = [e for e in entries if e.pipeline != "optimize_rewrite"]
    if version == "2026-05":
        return tuple(keep)
    at = next(k for k, e in enumerate(keep) if e.pipeline == "fusion")
    short = [_e("optimize_rewrite", n) for n in EAGER_OPTIMIZE]
    return tuple(keep[:at] + short + keep[at:])


def check_version(version: str) -> None:
    if version not in VERSIONS:
        from migx_explore.compiler.errors import MigxError

        raise MigxError(f"unknown MIGraphX catalogue {version!r}; valid: {', '.join(VERSIONS)}")


# Passes that run others through `mpm.run_pass` (their nested passes print before them in a trace).
COMPOSITES: dict[str, frozenset[str]] = {
    "optimize_module": frozenset(
        {
            "simplify_reshapes",
            "eliminate_convert",
            DCE,
            "simplify_algebra",
            "eliminate_common_subexpression",
            "propagate_constant",
        }
    ),
    "fuse_pointwise_reduce": frozenset({"fuse_pointwise", "optimize_module", "fuse_reduce", "split_reduce", DCE}),
    "gpu::eliminate_data_type_for_gpu": frozenset({"eliminate_data_type"}),
    "eliminate_data_type_for_gpu": frozenset({"eliminate_data_type"}),
}


def catalogue_diff(old: str, new: str) -> list[str]:
    """What changed between two catalogues, one line per change: `+ pipeline.name (condition)`,
    `- pipeline.name`, `~ pipeline.name: old condition -> new condition`."""
    import difflib

    a, b = catalogue(old), catalogue(new)
    key = [(e.pipeline, e.name) for e in a], [(e.pipeline, e.name) for e in b]
    out = []
    sm = difflib.SequenceMatcher(a=key[0], b=key[1], autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            for x, y in zip(a[i1:i2], b[j1:j2]):
                if x.condition != y.condition:
                    out.append(f"~ {x.pipeline}.{x.name}: {x.condition or '-'} -> {y.condition or '-'}")
            continue
        out += [f"- {e.pipeline}.{e.name}" for e in a[i1:i2]]
        out += [f"+ {e.pipeline}.{e.name}" + (f" ({e.condition})" if e.condition else "") for e in b[j1:j2]]
    return out


def pipeline_counts(entries: Sequence[CatalogueEntry]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.pipeline] = counts.get(e.pipeline, 0) + 1
    return counts


__all__ = [
    "COMPOSITES",
    "CatalogueEntry",
    "EAGER_OPTIMIZE",
    "LATEST",
    "VERSIONS",
    "catalogue",
    "catalogue_diff",
    "check_version",
    "mode_catalogue",
    "pipeline_counts",
]
