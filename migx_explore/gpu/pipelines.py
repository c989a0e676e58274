"""The GPU target's five named sub-pipelines, in MIGraphX's order (target.cpp after PR #4904).

`CompileOptions.migraphx` picks which MIGraphX develop snapshot the entries follow: "2026-08"
(96 entries, the default) or "2026-05" (90); gpu/migraphx_catalogue.py lists both, and compile
modes follow PR #4770 as merged (eager 79 entries, max = balanced with exhaustive tuning). Every
MIGraphX entry is present. An entry is our implementation of the MIGraphX pass of the same name,
our equivalent of an AMD-library pass (the pass's docstring says which), or disabled with a
one-line reason the explorer shows, the way `enable_pass(cond, p)` leaves an `id` entry in
MIGraphX traces. Pure data: importing this needs no GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from migx_explore.compiler.pass_infra import Pass, PassEntry, Pipeline, make_pass
from migx_explore.compiler.quantize import check_precision, quantize_pipeline
from migx_explore.gpu.codegen import topk as topk_codegen
from migx_explore.gpu.migraphx_catalogue import LATEST, VERSIONS, check_version

PIPELINE_NAMES = ("dynamic_shapes", "required", "optimize_rewrite", "fusion", "backend")
COMPILE_MODES = ("eager", "balanced", "max")
CONVOLUTION_LAYOUTS = ("auto", "channels_first", "channels_last")
# Entries of ours that MIGraphX does not have (pipeline, pass name), by catalogue; each is followed
# by its DCE.
OUR_ENTRIES = {
    "2026-05": (("fusion", "fuse_kv_append"),),
    "2026-08": (("fusion", "fuse_kv_append"), ("required", "rewrite_rnn")),
}


@dataclass(frozen=True)
class CompileOptions:
    """compile_options plus the env switches and backend options target.cpp reads."""

    mode: str = "balanced"  # PR #4770: eager (79 entries), balanced, max (exhaustive tuning)
    fast_math: bool = True
    offload_copy: bool = False
    exhaustive_tune: bool = False
    enable_nhwc: bool = False  # MIGRAPHX_ENABLE_NHWC
    enable_rewrite_dot: bool = False  # MIGRAPHX_ENABLE_REWRITE_DOT
    full_dynamic: bool = False  # MIGRAPHX_ENABLE_FULL_DYNAMIC
    disable_schedule: bool = False  # MIGRAPHX_DISABLE_SCHEDULE_PASS
    nstreams: int = 1
    migraphx: str = LATEST  # which MIGraphX develop catalogue the pipelines follow (2026-05 / 2026-08)
    # backend option (MIGRAPHX_GPU_OPTIONS='{convolution_layout:channels_last}'), 2026-08; 2026-05
    # reads MIGRAPHX_ENABLE_NHWC (enable_nhwc) instead
    convolution_layout: str = "auto"
    precision: str = "fp32"  # fp16 / bf16 / int8 / fp8 add the quantize stage (migraphx-driver --fp16 ...)
    # Feeds ({input: array}) int8 / fp8 scales are calibrated on. Data, not an option: it takes no
    # part in equality or hashing (two compiles differing only here share a configuration label).
    calibration: tuple = field(default=(), compare=False, hash=False, repr=False)

    def __post_init__(self):
        if self.mode not in COMPILE_MODES:
            from migx_explore.compiler.errors import MigxError

            raise MigxError(f"unknown compile mode {self.mode!r}; valid: {', '.join(COMPILE_MODES)}")
        check_precision(self.precision)
        check_version(self.migraphx)
        if self.convolution_layout not in CONVOLUTION_LAYOUTS:
            from migx_explore.compiler.errors import MigxError

            raise MigxError(
                f"unknown convolution_layout {self.convolution_layout!r}; valid: {', '.join(CONVOLUTION_LAYOUTS)}"
            )

    @property
    def channels_last(self) -> bool:
        if self.migraphx == "2026-05":
            return self.enable_nhwc
        return self.convolution_layout == "channels_last" or self.enable_nhwc

    def with_gpu_options(self, text: str) -> CompileOptions:
        """These options with MIGRAPHX_GPU_OPTIONS' backend options applied, e.g.
        '{convolution_layout:channels_last}' (json-like: keys and values may be unquoted)."""
        import dataclasses

        known = {"convolution_layout": "convolution_layout", "exhaustive_tune": "exhaustive_tune"}
        values = parse_gpu_options(text)
        unknown = sorted(set(values) - set(known))
        if unknown:
            from migx_explore.compiler.errors import MigxError

            raise MigxError(f"MIGRAPHX_GPU_OPTIONS: unknown option(s) {', '.join(unknown)}; known: {', '.join(known)}")
        kw = {known[k]: (v in ("1", "true") if k == "exhaustive_tune" else v) for k, v in values.items()}
        return dataclasses.replace(self, **kw)


def parse_gpu_options(text: str) -> dict[str, str]:
    """`{convolution_layout:channels_last, x:"y"}` -> {'convolution_layout': 'channels_last', 'x': 'y'}."""
    from migx_explore.compiler.errors import MigxError

    body = text.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    out = {}
    for part in filter(None, (p.strip() for p in body.split(","))):
        key, colon, value = part.partition(":")
        if not colon:
            raise MigxError(f"MIGRAPHX_GPU_OPTIONS: {part!r} is not key:value")
        out[key.strip().strip('"')] = value.strip().strip('"')
    return out


@dataclass(frozen=True)
class PendingPass(Pass):
    """Stands in for a pass whose implementation is not registered (shown disabled)."""

    label: str = "pending"
    pending: ClassVar[bool] = True  # what the explorer's tree reads (widgets/queries.is_pending)

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.label

    def apply_module(self, module, ctx):  # pragma: no cover - never enabled
        raise RuntimeError(f"{self.label} is not implemented")

    def non_default_options(self) -> dict[str, Any]:
        return {}


def _p(name: str, **opts: Any) -> PassEntry:
    """The registered pass `name` with these options. A name or option that does not exist is a
    bug in this file, so make_pass fails (here, and at import below) listing what does exist,
    rather than the entry turning into a silently disabled one."""
    return PassEntry(make_pass(name, **opts))


def _off(entry: PassEntry, reason: str) -> PassEntry:
    entry.enabled = False
    entry.reason = reason
    return entry


def _when(cond: bool, entry: PassEntry, reason: str) -> PassEntry:
    return entry if cond else _off(entry, reason)


DCE = "dead_code_elimination"
NO_MLIR = "no rocMLIR backend in migx-explore (mlir_enabled() is false)"
# the widest head our flash-attention kernel (gpu/codegen/attention.py) keeps a row's accumulator
# for in registers and a K/V tile for in shared memory; wider heads stay dot + softmax + dot
ATTENTION_MAX_HEAD_DIM = 128


def _dynamic_shapes(o: CompileOptions) -> list[PassEntry]:
    return [
        _when(not o.full_dynamic, _p("split_single_dyn_dim"), "MIGRAPHX_ENABLE_FULL_DYNAMIC is set"),
        _p(DCE),
        _p("simplify_dyn_ops"),
        _p(DCE),
    ]


def _required(o: CompileOptions) -> list[PassEntry]:
    fp8_reason = "target has OCP fp8 (or no fp8) intrinsics; the fnuz conversion applies only to gfx94x-class AMD GPUs"
    return [
        _p("normalize_ops"),
        _p(DCE),
        _p("eliminate_identity"),
        _p(DCE),
        _off(_p("fp8_ocp_to_fnuz"), fp8_reason),
        _off(_p(DCE), fp8_reason),
        # a model's q -> dq pair is a clamp and a rounding (ONNX Runtime's quantizer folds ReLUs into
        # it); the --int8 / --fp8 stage's own calibration pairs are fake quantization, whose leftovers
        # (around ops that do not become quant ops) MIGraphX drops
        _p("simplify_qdq", keep_qdq_pairs=o.precision not in ("int8", "fp8")),
        _p("rewrite_quantization"),  # enabled: `not mlir_enabled()` holds for us
        _p(DCE),
        # August 2026 dropped rewrite_rnn from target.cpp; ours stays (an entry of ours there: our
        # GPU target has no recurrent kernels, so RNN/GRU/LSTM must still be unrolled here)
        _p("rewrite_rnn"),
        _p(DCE),
        _p("eliminate_data_type_for_gpu", disable_64bit=o.fast_math),
        _p("rewrite_resize", affine_only=True),
        _p(DCE),
        _p("simplify_reshapes", enable_gather_rewrite=True),
        _p("eliminate_identity"),
        _p("eliminate_pad"),
        _p(DCE),
        _p("insert_pad", ops=("convolution",)),
        _p(DCE),
        _p("inline_module"),
        _when(not o.full_dynamic, _p("rewrite_pooling", rewrite_lrn=True), "MIGRAPHX_ENABLE_FULL_DYNAMIC is set"),
        _p(DCE),
    ]


def _topk() -> PassEntry:
    # split only slices that one radix launch (one block, or several and a merge) cannot hold
    return _p("rewrite_topk", split_threshold=topk_codegen.SPLIT_THRESHOLD, keep_whole=topk_codegen.one_launch)


def _not_here(name: str) -> PassEntry:
    """A MIGraphX pass with no counterpart here, off with its note as the reason."""
    e = _p(name)
    return _off(e, e.pass_.provenance().note)


def _optimize_rewrite(o: CompileOptions) -> list[PassEntry]:
    aug = o.migraphx != "2026-05"
    if aug and o.mode == "eager":  # PR #4770: this short list stands in for optimize_rewrite
        return [_p("optimize_module"), _p(DCE), _p("rewrite_reduce"), _topk(), _p(DCE)]
    return [
        *([_p("rewrite_convolution"), _p(DCE)] if aug else []),
        _p("rewrite_gelu", fast_math=o.fast_math),
        _p("optimize_module"),
        _p("layout_convolution", channels_last=o.channels_last),
        _p(DCE),
        _when(not o.full_dynamic, _p("fuse_horizontal"), "MIGRAPHX_ENABLE_FULL_DYNAMIC is set"),
        _p(DCE),
        _p("prefuse_ops"),
        _p(DCE),
        _p(DCE),
        _p("rewrite_reduce"),
        _topk(),
        _p("rewrite_low_precision"),
        _when(o.enable_rewrite_dot, _p("rewrite_dot"), "opt-in (MIGRAPHX_ENABLE_REWRITE_DOT / enable_rewrite_dot)"),
        _p(DCE),
        *([_not_here("promote_storage_type"), _p(DCE)] if aug else []),
        _p("propagate_precision"),
        _p(DCE),
        _p("simplify_reshapes", enable_op_shape_transform_op=True),
        _p(DCE),
    ]


def _fusion(o: CompileOptions) -> list[PassEntry]:
    aug = o.migraphx != "2026-05"
    # attn_enabled: our flash-attention kernel stands in for rocMLIR's, up to its head size
    attention = _p("fuse_attention", max_head_dim=ATTENTION_MAX_HEAD_DIM)
    if aug and o.mode == "eager":
        _off(attention, "compile mode eager: fuse_attention is an `id` entry (PR #4770)")
    return [
        attention,
        _p(DCE),
        _p("fuse_kv_append"),  # a decode step's KV-cache appends join its single-query attention
        _p(DCE),
        _p("optimize_module"),
        *([_not_here("fuse_mlss")] if aug else []),
        _p("fuse_pointwise_reduce"),
        _p(DCE),
        _off(_p("fuse_ck"), "Composable Kernel is an AMD-only library (MIGRAPHX_ENABLE_CK)"),
        _p(DCE),
        _off(_p("fuse_mlir"), NO_MLIR + "; gemm/conv epilogues are fused by backend.fuse_ops instead"),
        _p(DCE),
        _p("fuse_concat"),
        _p(DCE),
    ]


def _backend(o: CompileOptions) -> list[PassEntry]:
    aug = o.migraphx != "2026-05"
    tune = o.exhaustive_tune or o.mode == "max"  # PR #4770: max forces exhaustive tuning
    compile_ops = _p("compile_ops", exhaustive_tune=tune, skip_benchmark=aug and o.mode == "eager")
    return [
        _p("auto_contiguous"),
        _p(DCE),
        _p("lowering", offload_copy=o.offload_copy, implicit_gemm=o.mode != "eager"),
        _p("eliminate_contiguous"),
        _p(DCE),
        *([_not_here("lower_reshape"), _p(DCE)] if aug else []),
        _p("adjust_allocation"),
        _p(DCE),
        _p("eliminate_concat"),
        _p(DCE),
        _off(_p("compile_miopen"), "no MIOpen: convolutions become generated kernels or im2col + BLAS in compile_ops"),
        _p(DCE),
        _p("fuse_ops", fast_math=o.fast_math),
        _p(DCE),
        _p("compile_blas", skip_benchmark=o.mode == "eager"),  # our equivalent of compile_hipblaslt
        _p(DCE),
        _p("replace_allocate", offload_copy=o.offload_copy),
        _p(DCE),
        _p("adjust_allocation", use_hip_allocate=True),
        _p(DCE),
        *([_not_here("lower_device_ops")] if aug else []),
        compile_ops,
        _p(DCE),
        _p("promote_literals"),
        _p(DCE),
        _p("write_literals"),
        _when(not o.disable_schedule, _p("schedule", nstreams=o.nstreams), "MIGRAPHX_DISABLE_SCHEDULE_PASS is set"),
        _p("memory_coloring"),
        _p("sync_device"),
        _p("preallocate_param"),
        _p(DCE),
        _p("eliminate_allocation"),
        _p("check_context"),
        _p("normalize_ops"),
        _p(DCE),
        _final(_p("eliminate_identity")),
    ]


def _final(entry: PassEntry) -> PassEntry:
    entry.final = True  # eliminate_identity.hpp: DCE must not run after it when it is the last pass
    return entry


_BUILDERS = {
    "dynamic_shapes": (_dynamic_shapes, "Split or simplify dynamic dimensions into static modules."),
    "required": (_required, "Passes every compile needs: canonical ops, type/quantization lowering, padding."),
    "optimize_rewrite": (_optimize_rewrite, "Algebraic and layout optimizations (a short list in eager mode)."),
    "fusion": (_fusion, "Fuse pointwise and reduce chains into kernels."),
    "backend": (_backend, "Lower to GPU kernels, plan memory, compile."),
}


def gpu_pipelines(
    options: CompileOptions | None = None,
    *,
    include_backend: bool = True,
    calibration: Sequence[Mapping[str, Any]] = (),
) -> list[Pipeline]:
    """The five pipelines for these options (eager mode of the 2026-05 catalogue keeps optimize_rewrite
    visible, disabled; the 2026-08 one runs PR #4770's short list in its place),
    preceded by the `quantize` stage when options.precision is not fp32; `calibration` holds the
    feeds int8 / fp8 scales are measured on."""
    o = options or CompileOptions()
    out = []
    stage = quantize_pipeline(o.precision, calibration or o.calibration)
    if stage is not None:
        out.append(stage)
    for name in PIPELINE_NAMES:
        if name == "backend" and not include_backend:
            continue
        build, doc = _BUILDERS[name]
        pl = Pipeline(name, build(o), True, doc)
        if name == "optimize_rewrite" and o.mode == "eager" and o.migraphx == "2026-05":
            pl.enabled = False
            for e in pl.entries:
                if e.enabled:
                    e.enabled, e.reason = False, "compile mode eager skips optimize_rewrite"
        out.append(pl)
    return out


TARGET_INDEPENDENT = PIPELINE_NAMES[:4]


def migraphx_entries(pipelines: Sequence[Pipeline], version: str = LATEST) -> list[tuple[str, str]]:
    """(pipeline, pass name) of the entries that stand for MIGraphX's, in order: our own entries
    (OUR_ENTRIES, each with the DCE after it) and the quantize stage left out. The catalogue test
    compares this with gpu/migraphx_catalogue.py."""
    out = []
    for pl in pipelines:
        if pl.name not in PIPELINE_NAMES or not pl.enabled:
            continue
        skip = False
        for e in pl.entries:
            if (pl.name, e.name) in OUR_ENTRIES[version]:
                skip = True
                continue
            if skip and e.name == DCE:
                skip = False
                continue
            skip = False
            out.append((pl.name, e.name))
    return out


def pending_entries(pipelines: list[Pipeline] | None = None) -> list[str]:
    """Entries whose pass is not implemented (should be empty once the target is complete)."""
    pls = pipelines or gpu_pipelines()
    return [f"{pl.name}.{e.name}" for pl in pls for e in pl.entries if isinstance(e.pass_, PendingPass)]


def _check_every_configuration() -> None:
    """Build the pipelines for every switch that changes which entries exist, so a mistyped pass
    name or option fails when this module is imported, not when some configuration is first used."""
    for mode, version in ((m, v) for m in COMPILE_MODES for v in VERSIONS):
        for flag in (False, True):
            gpu_pipelines(
                CompileOptions(
                    migraphx=version,
                    mode=mode,
                    enable_nhwc=flag,
                    enable_rewrite_dot=flag,
                    full_dynamic=flag,
                    disable_schedule=flag,
                    fast_math=flag,
                )
            )


_check_every_configuration()
