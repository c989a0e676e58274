"""`migx-explore onnx --list` covers every op name MIGraphX's ONNX parser registers (the
`operators()` lists of its src/onnx/parse_*.cpp, read at ROCm/AMDMIGraphX develop), and more."""

from __future__ import annotations

import subprocess
import sys

from migx_explore.compiler.onnx import msft_ops, supported_ops

MIGRAPHX_OPS = """
    ATen Abs Acos Acosh Add And ArgMax ArgMin Asin Asinh Atan Atanh Attention AveragePool BatchNormalization
    BiasAdd BiasGelu BiasSplitGelu BitwiseAnd Cast CastLike Ceil Celu Clip Concat Constant ConstantFill
    ConstantOfShape Conv ConvInteger ConvTranspose Cos Cosh CumSum DepthToSpace DequantizeLinear Div Dropout
    DynamicQuantizeLinear DynamicScale Einsum Elu Equal Erf Exp Expand EyeLike FastGelu Flatten Floor GRU
    Gather GatherElements GatherND Gelu Gemm GlobalAveragePool GlobalLpPool GlobalMaxPool Greater
    GreaterOrEqual GridSample GroupNorm GroupNormalization GroupQueryAttention HardSigmoid HardSwish Hardmax
    Identity If ImageScaler InstanceNormalization IsInf IsNaN LRN LSTM LayerNormalization LeakyRelu Less
    LessOrEqual Log LogSoftmax Loop LpNormalization LpPool MXFixNeuron MXQuantizeDequantize MatMul MatMulBnb4
    MatMulInteger MatMulIntegerToFloat MatMulNBits Max MaxPool Mean MeanVarianceNormalization Min Mod Mul
    MultiHeadAttention Multinomial Neg NegativeLogLikelihoodLoss NhwcConv NonMaxSuppression NonZero Not OneHot
    Or PRelu Pad Pow QLinearAdd QLinearAveragePool QLinearConcat QLinearConv QLinearGlobalAveragePool
    QLinearLeakyRelu QLinearMatMul QLinearMul QLinearSigmoid QuantizeLinear QuickGelu RNN RandomNormal
    RandomNormalLike RandomUniform RandomUniformLike Range Reciprocal ReduceL1 ReduceL2 ReduceLogSum
    ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare Relu Reshape Resize
    ReverseSequence RoiAlign RotaryEmbedding Round Scan Scatter ScatterElements ScatterND Selu Shape Shrink
    Sigmoid Sign SimplifiedLayerNormalization Sin Sinh Size SkipLayerNormalization
    SkipSimplifiedLayerNormalization Slice Softmax SoftmaxCrossEntropyLoss Softplus Softsign SpaceToDepth
    Split Sqrt Squeeze Sub Sum Tan Tanh ThresholdedRelu Tile TopK Transpose Trilu Unique Unsqueeze Upsample
    Where Xor
""".split()


def test_the_list_is_a_superset_of_migraphx_parsers():
    assert len(MIGRAPHX_OPS) == 185
    missing = sorted(set(MIGRAPHX_OPS) - set(supported_ops()))
    assert not missing, missing
    assert len(supported_ops()) >= 185


def test_ort_fused_ops_are_accepted_from_com_microsoft():
    for name in (
        "MultiHeadAttention",
        "GroupQueryAttention",
        "SkipLayerNormalization",
        "BiasGelu",
        "FastGelu",
        "MatMulNBits",
        "RotaryEmbedding",
        "QLinearAdd",
    ):
        assert name in msft_ops()


def test_cli_lists_them():
    out = subprocess.run(
        [sys.executable, "-m", "migx_explore", "onnx", "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == supported_ops() and len(out) >= 185
