"""Where each pass comes from, as data: how it relates to MIGraphX's pass of the same name and
where MIGraphX keeps that pass. One table for every registered pass (target-independent and GPU
backend alike), so a catalogue update is an edit here, not a walk over pass classes; a row for a
pass nobody registers fails tests/passes/test_pass_tables.py.

A pass with no row is "implemented" (same semantics as MIGraphX's) with its source at
src/<name>.cpp; `Pass.info()` and `migx-explore passes` read the table.
"""

from __future__ import annotations

from dataclasses import dataclass

STATUSES = ("implemented", "mapped", "disabled")


@dataclass(frozen=True)
class Provenance:
    # "implemented" (same semantics), "mapped" (our equivalent; `note` says what it does instead),
    # or "disabled" (no counterpart here: `note` is the reason the explorer shows)
    status: str = "implemented"
    note: str = ""
    # MIGraphX's source of the pass in ROCm/AMDMIGraphX; None: src/<name>.cpp; "": a pass of ours only
    source: str | None = None


PROVENANCE: dict[str, Provenance] = {
    "capture_arguments": Provenance(source="src/quantize_8bits.cpp"),
    "check_context": Provenance(
        status="mapped",
        source="src/targets/gpu/include/migraphx/gpu/context.hpp",
        note="records backend:arch in gpu::check_context; the executor checks it at finalize",
    ),
    "compile_blas": Provenance(
        status="mapped",
        source="src/targets/gpu/compile_hipblaslt.cpp",
        note=(
            "equivalent of compile_hipblaslt: records each GEMM's strided-batched BLAS call; the "
            "algorithm is the library's default heuristic (no per-problem tuning)"
        ),
    ),
    "compile_miopen": Provenance(
        status="disabled",
        source="src/targets/gpu/compile_miopen.cpp",
        note="no MIOpen: convolutions become generated kernels or im2col + BLAS in compile_ops",
    ),
    "compile_ops": Provenance(source="src/targets/gpu/compile_ops.cpp"),
    "eliminate_common_subexpression": Provenance(
        note=(
            "also merges a commutative op with its inputs swapped (add(a, b) = add(b, a)), which "
            "MIGraphX keeps apart (its test cse_test2); the values are the same"
        ),
    ),
    "eliminate_convert": Provenance(
        note="a convert chain through an integral or narrower-integer type is kept (MIGraphX drops the truncation)",
    ),
    "eliminate_data_type_for_gpu": Provenance(
        status="mapped",
        source="src/targets/gpu/eliminate_data_type_for_gpu.cpp",
        note=(
            "double -> float everywhere but int64 -> int32 only for index inputs; bf16 is kept and "
            "there are no fp8 steps"
        ),
    ),
    "eliminate_pad": Provenance(
        note=(
            "folds into max pooling only the lowest-value pad insert_pad writes (MIGraphX folds a zero "
            "pad, which changes all-negative windows)"
        ),
    ),
    "fp8_ocp_to_fnuz": Provenance(
        status="disabled",
        note=(
            "the fp8 types exist (float8e4m3fn and its fnuz form), but rewriting OCP fp8 into fnuz only"
            " matters on gfx94x-class AMD GPUs, which lack OCP fp8 instructions"
        ),
    ),
    "fuse_attention": Provenance(
        note=(
            "our attention kernel replaces rocMLIR's; kv-cache attention and flash-decoding splits are not implemented"
        ),
    ),
    "fuse_ck": Provenance(
        status="disabled",
        source="src/targets/gpu/fuse_ck.cpp",
        note="Composable Kernel is an AMD-only kernel library",
    ),
    "fuse_horizontal": Provenance(
        note=(
            "a signed non-constant index is wrapped with mod(i, rows) before its table offset is added "
            "(MIGraphX adds the offset as is, so a negative index reads the previous table)"
        ),
    ),
    "fuse_kv_append": Provenance(
        note="MIGraphX's GroupQueryAttention does the append in its own kernel; here it joins the decode attention",
    ),
    "fuse_mlir": Provenance(
        status="disabled",
        source="src/targets/gpu/fuse_mlir.cpp",
        note=(
            "it builds rocMLIR kernels (gpu::mlir_op); gemm/conv epilogues are fused by the backend's fuse_ops instead"
        ),
    ),
    "fuse_ops": Provenance(source="src/targets/gpu/fuse_ops.cpp"),
    "fuse_reduce": Provenance(
        note="reshape rewrites around reductions (enable_rewrite_reshapes) are not implemented",
    ),
    "lowering": Provenance(source="src/targets/gpu/lowering.cpp"),
    "prefuse_ops": Provenance(
        status="mapped",
        source="src/targets/gpu/prefuse_ops.cpp",
        note=(
            "layernorm and add_layernorm only, on by default (MIGraphX gates them behind "
            "MIGRAPHX_ENABLE_LAYERNORM_FUSION); its CK attention and gfx11/12 channelwise-conv finders "
            "do not apply"
        ),
    ),
    "promote_literals": Provenance(
        status="mapped",
        note="merges identical literals in main (fused-body literals are kernel constants)",
    ),
    "propagate_precision": Provenance(
        note=(
            "a chain through a convert to or from bool is not upgraded: MIGraphX's int64(x) in place of"
            " bool(x) changes the values (0.5 is true but truncates to 0); a dot of a narrowed float32 "
            "program input by constants runs in float32 (no convert kernel before the first GEMM)"
        ),
    ),
    "rewrite": Provenance(source=""),
    "rewrite_reduce": Provenance(
        note="fp32 softmax is built upcast directly (the same program MIGraphX reaches op by op)",
    ),
    "rewrite_resize": Provenance(
        note="per-axis gathers and lerps instead of one gather of all 2^axes neighbours (same values)",
    ),
    "rewrite_rnn": Provenance(
        note=(
            "sequence lengths must be compile-time constants; uneven lengths are masked with `where` "
            "(forward directions only); unlike MIGraphX, a plain LSTM direction becomes one "
            "lstm_recurrence op (all steps in one kernel) after one input-projection GEMM "
            "(fuse_lstm=False unrolls it step by step)"
        ),
    ),
    "rewrite_topk": Provenance(
        note="our topk has no indices input, so the final indices come from a gathernd of the stage-1 winners",
    ),
    "simplify_algebra": Provenance(
        note=(
            "MIGraphX's 32 finders, in its order, plus find_conv_conv_1x1 (unmerged upstream) after "
            "find_conv_add; find_split_reshape refuses a reorder MIGraphX gets wrong (len-1 slices)"
        ),
    ),
    "simplify_qdq": Provenance(
        note=(
            "MIGraphX's steps: zero scales, quant dot/convolution (per-tensor / per-axis scales, "
            "asymmetric zero points), same-parameter q -> dq pair removal, reused and concat "
            "quantizelinear, zero-point removal; no MX (fp4) or int4 pack/unpack"
        ),
    ),
    "simplify_reshapes": Provenance(
        note=(
            "all 17 of MIGraphX's finders in its order, plus find_gather(_scalar) with MIGraphX's "
            "strided-view decision; view chains are simplified through an exact digit (atom) model "
            "instead of MIGraphX's shape_transform_descriptor, so some come out as different but equal "
            "views; a gather on a {1},{0} index keeps the axis (our gather op's semantics); "
            "deliberately, a 2-D GEMM on a plain weight and a GEMM's pointwise epilogue are not moved "
            "(our BLAS bias epilogue)"
        ),
    ),
    "sync_device": Provenance(source="src/targets/gpu/sync_device.cpp"),
    "truncate_float": Provenance(note="instructions with submodules keep their precision"),
    "write_literals": Provenance(source="src/targets/gpu/write_literals.cpp"),
    "fuse_mlss": Provenance(
        status="disabled",
        source="src/targets/gpu/fuse_mlss.cpp",
        note="AMDMLSS (AMD's ML kernel library) is AMD-only; its ops stay on our generated kernels",
    ),
    "lower_reshape": Provenance(
        status="disabled",
        source="src/targets/gpu/lower_reshape.cpp",
        note=(
            "our lowering keeps reshapes of standard buffers as views and compile_ops copies the rest; "
            "there is no gpu reshape op to lower"
        ),
    ),
    "lower_device_ops": Provenance(
        status="disabled",
        source="src/targets/gpu/lower_device_ops.cpp",
        note=(
            "we have no hip::fill / hip::copy device ops: lowering already emits generated kernels "
            "(precompile_op) for copies and contiguous"
        ),
    ),
    "promote_storage_type": Provenance(
        status="disabled",
        note=(
            "our generated kernels already load bf16 as storage and compute in float registers, which "
            "is the rewrite this pass makes for gfx targets without bf16 arithmetic"
        ),
    ),
    "rewrite_convolution": Provenance(
        note="stride-1 convolution_backwards only; MIGraphX also splits strided ones by phase",
    ),
}


def provenance(name: str) -> Provenance:
    """The row for pass `name`, with its source filled in ("" for a pass without a name)."""
    if not name:
        return Provenance(source="")
    row = PROVENANCE.get(name, Provenance())
    return row if row.source is not None else Provenance(row.status, row.note, f"src/{name}.cpp")
