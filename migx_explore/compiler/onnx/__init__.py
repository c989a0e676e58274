"""ONNX importer: `parse_onnx(model) -> Program` and `supported_ops()`.

Imports onnx at module import (the compiler package itself never imports this module eagerly).
One parse_*.py module per op family registers its handlers in `registry.HANDLERS`, the way
MIGraphX keeps one op_parser per src/onnx/parse_*.cpp. See importer.py for what the Program
records about the model's input and output names.
"""

from __future__ import annotations

from . import (  # noqa: F401  (registration side effects)
    parse_activation,
    parse_control,
    parse_data,
    parse_detection,
    parse_einsum,
    parse_elementwise,
    parse_function_ops,
    parse_misc,
    parse_msft,
    parse_msft_embed,
    parse_nn,
    parse_norm,
    parse_quant,
    parse_reduce,
    parse_rnn,
    parse_shape,
)
from .context import ConstantInputRequired, param_name
from .importer import import_node, model_opset, parse_onnx
from .registry import HANDLERS, MSFT_OPS


def supported_ops() -> list[str]:
    """ONNX op types the importer handles, sorted (default domain, plus ONNX Runtime's contrib ops)."""
    return sorted(HANDLERS)


def msft_ops() -> list[str]:
    """The op types also accepted from ONNX Runtime's com.microsoft domain, sorted."""
    return sorted(MSFT_OPS)


__all__ = [
    "ConstantInputRequired",
    "import_node",
    "model_opset",
    "msft_ops",
    "param_name",
    "parse_onnx",
    "supported_ops",
]
