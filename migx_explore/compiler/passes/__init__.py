"""The target-independent passes: one module per pass, named after it (a package, with its rewrite
rules beside it, where the pass has rule modules). The machinery that runs them (Pass, PassManager,
pipelines, specs, traces) is migx_explore/compiler/pass_infra/."""

from __future__ import annotations

from migx_explore.compiler.pass_infra.base import Pass
from migx_explore.compiler.pass_infra.registry import register

from .auto_contiguous import AutoContiguous
from .capture_arguments import CaptureArguments
from .dead_code_elimination import DeadCodeElimination
from .eliminate_common_subexpression import EliminateCommonSubexpression
from .eliminate_convert import EliminateConvert
from .eliminate_data_type import EliminateDataType
from .eliminate_data_type_for_gpu import EliminateDataTypeForGpu
from .eliminate_identity import EliminateIdentity
from .eliminate_pad import EliminatePad
from .fp8_ocp_to_fnuz import Fp8OcpToFnuz
from .fuse_attention import FuseAttention
from .fuse_ck import FuseCk
from .fuse_concat import FuseConcat
from .fuse_horizontal import FuseHorizontal
from .fuse_kv_append import FuseKvAppend
from .fuse_mlir import FuseMlir
from .fuse_pointwise import FusePointwise
from .fuse_pointwise_reduce import FusePointwiseReduce
from .fuse_reduce import FuseReduce
from .inline_module import InlineModule
from .insert_pad import InsertPad
from .layout_convolution import LayoutConvolution
from .normalize_ops import NormalizeOps
from .optimize_module import OptimizeModule
from .prefuse_ops import PrefuseOps
from .promote_storage_type import PromoteStorageType
from .propagate_constant import PropagateConstant
from .propagate_precision import PropagatePrecision
from .quantize_8bits import QuantizeEightBits
from .rewrite import RewritePass
from .rewrite_convolution import RewriteConvolution
from .rewrite_dot import RewriteDot
from .rewrite_gelu import RewriteGelu
from .rewrite_low_precision import RewriteLowPrecision
from .rewrite_pooling import RewritePooling
from .rewrite_quantization import RewriteQuantization
from .rewrite_reduce import RewriteReduce
from .rewrite_resize import RewriteResize
from .rewrite_rnn import RewriteRnn
from .rewrite_topk import RewriteTopk
from .simplify_algebra import SimplifyAlgebra
from .simplify_dyn_ops import SimplifyDynOps
from .simplify_qdq import SimplifyQdq
from .simplify_reshapes import SimplifyReshapes
from .split_reduce import SplitReduce
from .split_single_dyn_dim import SplitSingleDynDim
from .truncate_float import TruncateFloat

# Every pass of this package, in module order; the registry reads this table (nothing registers
# by being imported). tests/passes/test_pass_tables.py checks it against the folder.
PASSES: tuple[type[Pass], ...] = (
    AutoContiguous,
    CaptureArguments,
    DeadCodeElimination,
    EliminateCommonSubexpression,
    EliminateConvert,
    EliminateDataType,
    EliminateDataTypeForGpu,
    EliminateIdentity,
    EliminatePad,
    Fp8OcpToFnuz,
    FuseAttention,
    FuseCk,
    FuseConcat,
    FuseHorizontal,
    FuseKvAppend,
    FuseMlir,
    FusePointwise,
    FusePointwiseReduce,
    FuseReduce,
    InlineModule,
    InsertPad,
    LayoutConvolution,
    NormalizeOps,
    OptimizeModule,
    PrefuseOps,
    PromoteStorageType,
    PropagateConstant,
    PropagatePrecision,
    QuantizeEightBits,
    RewritePass,
    RewriteConvolution,
    RewriteDot,
    RewriteGelu,
    RewriteLowPrecision,
    RewritePooling,
    RewriteQuantization,
    RewriteReduce,
    RewriteResize,
    RewriteRnn,
    RewriteTopk,
    SimplifyAlgebra,
    SimplifyDynOps,
    SimplifyQdq,
    SimplifyReshapes,
    SplitReduce,
    SplitSingleDynDim,
    TruncateFloat,
)

# Modules here that hold no pass of their own (shared by several passes).
HELPERS: tuple[str, ...] = (
    "fusion_helpers",
    "rule_helpers",
)

register(PASSES)

__all__ = ["HELPERS", "PASSES"]
