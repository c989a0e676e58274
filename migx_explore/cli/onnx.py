"""`migx-explore onnx --list`: the ONNX operators the importer supports (migraphx-driver onnx
--list); `--models` lists the built-in example models."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    if args.models:
        from .. import models

        for name in models.list_models():
            print(f"{name:<14} {models.describe(name)}")
        return 0
    from migx_explore.compiler.onnx import msft_ops, supported_ops

    ops = supported_ops()
    if args.list:
        print("\n".join(ops))
        return 0
    print(
        f"{len(ops)} ONNX operators supported (opset 11 to the newest onnx knows; {len(msft_ops())} of them also "
        "from ONNX Runtime's com.microsoft domain); `--list` names them, `--models` lists the built-in models"
    )
    return 0


def register(sub) -> None:
    p = sub.add_parser("onnx", help="list the supported ONNX operators (--list) or built-in models (--models)")
    p.add_argument("--list", action="store_true", help="print every supported ONNX op type, one per line")
    p.add_argument("--models", action="store_true", help="print the built-in example models")
    p.set_defaults(func=run)
