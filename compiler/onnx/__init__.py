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
    parse_nn,
    parse_norm,
    parse_quant,
    parse_reduce,
    parse_rnn,
    parse_shape,
)
from .context import ConstantInputRequired, param_name
from .importer import model_opset, parse_onnx
from .registry import HANDLERS


def supported_ops() -> list[str]:
    """ONNX op types (default domain) the importer handles, sorted."""
    return sorted(HANDLERS)


__all__ = ["ConstantInputRequired", "model_opset", "param_name", "parse_onnx", "supported_ops"]
