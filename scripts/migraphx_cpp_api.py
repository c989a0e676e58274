"""The MIGraphX API the pass tests call, natively: module/program methods, shapes and literals
(ApiMixin, part of migraphx_cpp.Reader), and the test/include helpers (pointwise.hpp, reduce.hpp,
quantize_helpers.hpp, migraphx/common.hpp) and test-file checks (check_resize)."""

from __future__ import annotations

from typing import Any

import numpy as np
from migraphx_cpp_model import (
    _IGNORED,
    CPP_SCALARS,
    PASS_OP,
    Function,
    InstructionCount,
    MakeOp,
    OutputShapes,
    PassSpec,
    PropertyCheck,
    Scalar,
    TypeRef,
    Unsupported,
    _attr_dict,
    _our_op,
    _pass_spec,
)

from migx_explore.compiler import dtypes
from migx_explore.compiler.ir import Program
from migx_explore.compiler.op import Op
from migx_explore.compiler.shape import Shape

PRESENCE_CHECKS = ("any_of", "none_of", "std::any_of", "std::none_of")
QUANTIZE_FLOAT = {"migraphx::quantize_fp16": "float16", "migraphx::quantize_bf16": "bfloat16"}
LIBRARY_CALLS = (
    "std::numeric_limits",
    "migraphx::shape::get_type",
    "migraphx::enabled",
    "std::transform",
    "std::back_inserter",
    "std::distance",
    "std::iota",
    *PRESENCE_CHECKS,
    *QUANTIZE_FLOAT,
)


class ApiMixin:
    """Reader methods for the MIGraphX C++ API (mixed into migraphx_cpp.Reader)."""

    # ---- the MIGraphX API ------------------------------------------------------------------------
    def method(self, obj: Any, name: str, args: list) -> Any:
        if obj is _IGNORED or isinstance(obj, OutputShapes):
            return _IGNORED
        if isinstance(obj, PassSpec):
            if name != "apply" or len(args) != 1:
                raise Unsupported(f"pass.{name}")
            self.run_event(args[0], [obj])
            return None
        if isinstance(obj, Program):
            if name == "get_main_module":
                return obj.main
            if name == "create_module":
                return obj.create_module(args[0])
            if name == "sort":
                return obj
            if name == "eval":
                return _IGNORED
            raise Unsupported(f"program.{name}")
        from migx_explore.compiler.ir import Module

        if isinstance(obj, Module):
            if name == "add_parameter":
                return obj.add_parameter(args[0], self.as_shape(args[1]))
            if name == "add_literal":
                if len(args) == 2:
                    args = [("literal", self.as_shape(args[0]), args[1])]
                value, shape = self.literal_value(args[0])
                return obj.add_literal(value, shape)
            if name == "add_instruction":
                op = args[0]
                if not isinstance(op, MakeOp):
                    raise Unsupported("add_instruction without make_op")
                inputs, mods = args[1:], []
                if len(inputs) in (1, 2) and isinstance(inputs[0], list):
                    mods = inputs[1] if len(inputs) == 2 else []
                    inputs = inputs[0]
                    if not isinstance(mods, list):
                        mods = [mods]
                if op.name == PASS_OP and len(inputs) > 1:
                    return obj.add_return(inputs)
                return obj.add_instruction(_our_op(op), inputs, mods)
            if name == "insert_instruction":  # insert_instruction(pos, make_op(...), args...)
                pos, op, inputs = args[0], args[1], args[2:]
                if not isinstance(op, MakeOp):
                    raise Unsupported("insert_instruction without make_op")
                if len(inputs) == 1 and isinstance(inputs[0], list):
                    inputs = inputs[0]
                after = getattr(pos, "ins", None)
                if after is not None:
                    return obj.insert_after(after, _our_op(op), inputs)
                return obj.insert_instruction(pos, _our_op(op), inputs)
            if name == "set_bypass":
                obj.bypass = True if not args else bool(args[0])
                return None
            if name == "add_return":
                return obj.add_return(args[0] if args and isinstance(args[0], list) else args)
            if name == "sort":
                return obj
            if name in ("begin", "end") and not args:
                return (name, obj)
            if name == "get_output_shapes":
                return OutputShapes(obj.program)
            if name in ("add_debug_symbols", "validate"):
                return _IGNORED  # read only by EXPECTs on shapes, which a program comparison covers
            raise Unsupported(f"module.{name}")
        if isinstance(obj, TypeLimits):
            return obj.method(name)
        if name == "visit_type" and isinstance(obj, Shape) and len(args) == 1 and isinstance(args[0], Function):
            self.call(args[0], [TypeLimits(obj.type)])
            return None
        if name == "eval" and hasattr(obj, "shape") and not args:
            return _IGNORED  # ins->eval().visit(...): a check on values, not on the program
        if name == "get_shape" and hasattr(obj, "shape"):
            return obj.shape
        if name in ("lens", "type", "elements", "strides", "ndim") and isinstance(obj, Shape):
            return {
                "lens": lambda: list(obj.lens),
                "type": lambda: TypeRef(obj.type),
                "elements": obj.elements,
                "strides": lambda: list(obj.strides),
                "ndim": lambda: len(obj.lens),
            }[name]()
        if name in ("begin", "end") and isinstance(obj, list) and not args:
            return (name, obj)
        if name in ("size", "back", "front", "at", "push_back") and isinstance(obj, list):
            if name == "push_back":
                obj.append(args[0])
                return None
            return {
                "size": lambda: len(obj),
                "back": lambda: obj[-1],
                "front": lambda: obj[0],
                "at": lambda: obj[args[0]],
            }[name]()
        if name in ("inputs", "outputs") and hasattr(obj, "shape") and not args:
            return list(obj.inputs if name == "inputs" else obj.outputs)
        raise Unsupported(f".{name} on {type(obj).__name__}")

    def library_call(self, tok: str) -> Any:
        """The standard-library and MIGraphX utility calls of LIBRARY_CALLS, at `tok`."""
        self.take()
        if tok in ("std::numeric_limits", "migraphx::shape::get_type"):  # std::numeric_limits<float>::max()
            self.take("<")
            type_tok = self.take()
            self.take(">")
            if type_tok not in CPP_SCALARS:
                raise Unsupported(f"{tok}<{type_tok}>")
            if tok == "migraphx::shape::get_type":  # shape::get_type<migraphx::fp8::fp8e4m3fn>{}
                self.braced()
                return TypeRef(CPP_SCALARS[type_tok])
            self.take("::")
            what = self.take()
            self.call_args()
            return numeric_limit(CPP_SCALARS[type_tok], what)
        if tok == "migraphx::enabled":  # MIGRAPHX_ENABLE_... environment switches: unset, as in CI
            self.take("(")
            depth = 1
            while depth:
                depth += {"(": 1, ")": -1}.get(self.take(), 0)
            return False
        args = self.call_args()
        if tok in QUANTIZE_FLOAT:  # src/quantization.cpp quantize_fp16(prog, ins_names): its pass list
            names = tuple(args[1]) if len(args) > 1 and args[1] else ("all",)
            skip = {"propagate_constant_skip_ops": ("quantizelinear", "dequantizelinear")}
            self.run_event(
                args[0],
                [
                    _pass_spec("normalize_ops", [], {}),
                    _pass_spec("optimize_module", [], skip),
                    _pass_spec("truncate_float", [], {"ins_names": names, "float_type": QUANTIZE_FLOAT[tok]}),
                    _pass_spec("optimize_module", [], skip),
                ],
            )
            return None
        if tok in PRESENCE_CHECKS:
            return self.op_presence(tok.removeprefix("std::"), args)
        if tok == "std::distance":  # std::distance(m.begin(), m.end()): the module's instruction count
            a, b = args
            whole = isinstance(a, tuple) and isinstance(b, tuple) and a[1] is b[1]
            if not whole or (a[0], b[0]) != ("begin", "end"):
                raise Unsupported("std::distance over something other than a whole module")
            return InstructionCount(a[1].program) if self.in_expect else len(list(a[1]))
        if tok == "std::iota":
            a, b, start = args
            if not (isinstance(a, tuple) and isinstance(a[1], list) and a[0] == "begin" and b == ("end", a[1])):
                raise Unsupported("std::iota over something other than a whole vector")
            a[1][:] = [start + k for k in range(len(a[1]))]
            return None
        if tok == "std::back_inserter":
            if len(args) != 1 or not isinstance(args[0], list):
                raise Unsupported("std::back_inserter on a non-vector")
            return ("back_inserter", args[0])
        # std::transform(v.begin(), v.end(), std::back_inserter(w), f)
        a, b, out, f = args if len(args) == 4 else (None,) * 4
        if not (
            isinstance(a, tuple)
            and a[0] == "begin"
            and b == ("end", a[1])
            and isinstance(out, tuple)
            and out[0] == "back_inserter"
            and isinstance(f, Function)
        ):
            raise Unsupported("std::transform other than whole vector into back_inserter")
        out[1].extend(self.call(f, [x]) for x in a[1])
        return None

    def op_presence(self, kind: str, args: list) -> PropertyCheck:
        """any_of(m, &is_x) / none_of(m, &is_x) in an EXPECT, with a predicate that only compares
        the instruction's name: "has:x" / "removes:x" on the module's program."""
        from migx_explore.compiler.ir import Module

        if len(args) == 3 and isinstance(args[0], tuple) and args[0][0] == "begin" and args[1] == ("end", args[0][1]):
            args = [args[0][1], args[2]]  # std::none_of(m.begin(), m.end(), [](auto& ins) { ... })
        if len(args) != 2 or not isinstance(args[0], Module) or not isinstance(args[1], Function):
            raise Unsupported(f"{kind} other than (module, name predicate)")
        body = args[1].body
        if (
            len(body) != 9
            or body[0] != "return"
            or body[2:7] != [".", "name", "(", ")", "=="]
            or not body[7].startswith('"')
        ):
            raise Unsupported(f'{kind} predicate other than ins.name() == "op"')
        op = body[7][1:-1]
        return PropertyCheck(args[0].program, (f"has:{op}",) if kind == "any_of" else (f"removes:{op}",))

    def pointwise_helper(self, name: str, args: list) -> Any:
        """test/include/pointwise.hpp: a bypass submodule with scalar params x0.. and @return."""
        if name == "single_pointwise":
            return ("single", args[0])
        if name == "noop_pointwise":
            return ("noop",)
        from migx_explore.compiler.ir import Module

        prog = args[0] if isinstance(args[0], Program) else None
        if prog is None:
            raise Unsupported(f"{name} without a program")
        rest = args[1:]
        mm = rest.pop(0) if name == "add_pointwise" and isinstance(rest[0], Module) else prog.main
        sub_name, inputs, f = rest[0], rest[1], rest[2]
        pm = prog.create_module(sub_name)
        pm.bypass = True
        params = [pm.add_parameter(f"x{k}", Shape.scalar(x.shape.type)) for k, x in enumerate(inputs)]
        pm.add_return(self.pointwise_body(pm, params, f))
        if name == "create_pointwise_module":
            return pm
        return mm.add_instruction(Op("pointwise"), inputs, [pm])

    def pointwise_body(self, pm, params: list, f: Any) -> list:
        """The outputs a pointwise.hpp body function `f` adds to `pm` over `params`."""
        if isinstance(f, tuple) and f[0] == "single":
            r = pm.add_instruction(_our_op(MakeOp(f[1])), params)
        elif isinstance(f, tuple) and f[0] == "squared":
            r = pm.add_instruction(Op("mul"), [params[0], params[0]])
        elif isinstance(f, tuple) and f[0] == "noop":
            r = list(params)
        elif isinstance(f, Function):
            r = self.call(f, [pm, params])
        else:
            raise Unsupported("pointwise body")
        return r if isinstance(r, list) else [r]

    def as_shape(self, v: Any) -> Shape:
        if isinstance(v, Shape):
            return v
        if isinstance(v, list):
            return self.shape_from(v)
        raise Unsupported(f"not a shape: {v!r}")

    def shape_from(self, items: list) -> Shape:
        if len(items) == 1 and isinstance(items[0], Shape):
            return items[0]
        if len(items) == 1 and isinstance(items[0], list) and items[0] and all(isinstance(x, Shape) for x in items[0]):
            return Shape.tuple_of(items[0])  # migraphx::shape{sub_shapes}
        if not items or not isinstance(items[0], TypeRef):
            raise Unsupported(f"shape without a type: {items!r}")
        t = items[0].name
        if len(items) == 1:
            return Shape.scalar(t)
        lens = items[1]
        if isinstance(lens, list) and lens and all(isinstance(x, list) and len(x) in (2, 3) for x in lens):
            # {type, {{min, max[, {optimals}]}, ...}}: a dynamic shape (optimals are a tuning hint)
            if len(items) > 2 or not all(isinstance(v, int) for x in lens for v in x[:2]):
                raise Unsupported("dynamic shape with strides or symbolic dims")
            return Shape.dynamic(t, [(x[0], x[1]) for x in lens])
        if not isinstance(lens, list) or any(isinstance(x, list) for x in lens):
            raise Unsupported("dynamic shape")
        if len(items) > 2:
            return Shape(t, tuple(lens), tuple(items[2]))
        return Shape.of(t, lens)

    def literal_from(self, items: list) -> Any:
        if len(items) == 1 and isinstance(items[0], (bool, int, float, Scalar)):
            return items[0]  # migraphx::literal(10.0f): a scalar literal
        shape = self.as_shape(items[0])
        values = items[1] if len(items) > 1 else []
        return ("literal", shape, values)

    def literal_value(self, v: Any) -> tuple[Any, Shape | None]:
        if isinstance(v, tuple) and v and v[0] == "literal":
            _, shape, values = v
            values = [x.value if isinstance(x, Scalar) else x for x in values] if isinstance(values, list) else values
            data = np.asarray(values if values else [0], dtype=dtypes.np_dtype(shape.type))
            if data.size == 1 and shape.elements() != 1:
                data = np.full(shape.lens, data.ravel()[0], data.dtype)
            return data.reshape(shape.lens) if data.size == shape.elements() else data, shape
        if isinstance(v, tuple) and v and v[0] == "generated":
            return v[2], v[1]
        if isinstance(v, list) and v and isinstance(v[0], (Shape, list)) and len(v) <= 2:
            return self.literal_value(self.literal_from(v))
        if isinstance(v, Scalar):
            return np.asarray(v.value, dtypes.np_dtype(v.type)), Shape.scalar(v.type)
        if isinstance(v, bool):
            return np.asarray(v), Shape.scalar("bool")
        if isinstance(v, int):
            return np.asarray(v, np.int32), Shape.scalar("int32")
        if isinstance(v, float):
            return np.asarray(v, np.float32), Shape.scalar("float32")
        raise Unsupported(f"literal from {type(v).__name__}")


# ---- test/include helpers (pointwise.hpp, reduce.hpp, quantize_helpers.hpp), natively -----------------
def _broadcast_scale(m, scale, out_lens, axis):
    lens = list(scale.shape.lens)
    if lens == list(out_lens):
        return scale
    if len(lens) == 1 and lens[0] == 1:
        return m.add_instruction(Op("multibroadcast", out_lens=list(out_lens)), [scale])
    return m.add_instruction(Op("broadcast", axis=axis, out_lens=list(out_lens)), [scale])


def _add_quantize_op(reader, m, name, x, scale, *rest):
    shift = rest[0] if rest and not isinstance(rest[0], int) else None
    axis = rest[-1] if rest and isinstance(rest[-1], int) else 1
    lens = list(x.shape.lens)
    inputs = [x, _broadcast_scale(m, scale, lens, axis)]
    if shift is not None:
        inputs.append(
            shift if list(shift.shape.lens) == lens else m.add_instruction(Op("multibroadcast", out_lens=lens), [shift])
        )
    return m.add_instruction(_our_op(MakeOp(name)), inputs)


def _add_reduce(reader, prog, name, inputs, axes, *rest):
    f = rest[-1]
    assign = rest[0] if len(rest) == 2 else None
    rm = prog.create_module(name)
    rm.bypass = True
    params = [rm.add_parameter(f"x{k}", Shape.of(x.shape.type, x.shape.lens)) for k, x in enumerate(inputs)]
    if isinstance(f, tuple) and f[0] == "single_reduce":
        r = rm.add_instruction(_our_op(MakeOp(f[1], {"axes": list(axes)})), params)
    elif isinstance(f, Function):
        r = reader.call(f, [rm, params, list(axes)])
    else:
        raise Unsupported("reduce body")
    rm.add_return(r if isinstance(r, list) else [r])
    attrs = {"axes": list(axes)}
    op_name = "fused_reduce"
    if assign is not None:
        op_name, attrs["assign"] = "split_fused_reduce", assign
    return prog.main.add_instruction(_our_op(MakeOp(op_name, attrs)), inputs, [rm])


INCLUDE_HELPERS = {
    "add_quantize_op": _add_quantize_op,
    "broadcast_scale": lambda r, m, scale, lens, axis: _broadcast_scale(m, scale, lens, axis),
    "add_reduce": _add_reduce,
    "single_reduce": lambda r, name: ("single_reduce", name),
    "squared": lambda r: ("squared",),
    # test/include/basic_ops.hpp literals
    "get_2x2": lambda r, base=0: ("literal", Shape.of("float32", [2, 2]), [base + k for k in (1, 2, 3, 4)]),
    "get_2x2_transposed": lambda r: ("literal", Shape("float32", (2, 2), (1, 2)), [1, 2, 3, 4]),
    "get_2": lambda r: ("literal", Shape.of("float32", [2]), [1, 2]),
    "get_2_broadcasted": lambda r: ("literal", Shape("float32", (2, 1), (1, 0)), [1, 2]),
}


def _from_permutation(t: str, lens: list[int], perm: list[int]) -> Shape:
    """shape::from_permutation: lens stored so that memory runs in the order `perm` gives."""
    order = list(perm)
    strides = [0] * len(lens)
    stride = 1
    for axis in reversed(order):
        strides[axis] = stride
        stride *= lens[axis]
    return Shape(t, tuple(lens), tuple(strides))


def _add_scale_mul(reader, m, s1, s2, axis1, axis2, out_lens):
    return m.add_instruction(
        Op("mul"), [_broadcast_scale(m, s1, out_lens, axis1), _broadcast_scale(m, s2, out_lens, axis2)]
    )


INCLUDE_HELPERS["add_scale_mul"] = _add_scale_mul
INCLUDE_HELPERS["broadcast_shift"] = lambda r, m, shift, lens: (
    shift
    if list(shift.shape.lens) == list(lens)
    else m.add_instruction(Op("multibroadcast", out_lens=list(lens)), [shift])
)


def _add_common_op(reader, m, op, inputs):
    """migraphx/common.hpp add_common_op: multibroadcast the inputs to their common lens."""
    types = {x.shape.type for x in inputs}
    if len(types) != 1 and not all(dtypes.dtype(t).is_float for t in types):
        raise Unsupported("add_common_op over mixed integer / float types")
    common = dtypes.common_type(*types)  # the wider float, as MIGraphX's common type
    lens = list(np.broadcast_shapes(*[tuple(x.shape.lens) for x in inputs]))
    args = [
        x if list(x.shape.lens) == lens else m.add_instruction(Op("multibroadcast", out_lens=lens), [x]) for x in inputs
    ]
    args = [x if x.shape.type == common else m.add_instruction(Op("convert", target_type=common), [x]) for x in args]
    return m.add_instruction(_our_op(op), args)


INCLUDE_HELPERS["add_common_op"] = _add_common_op


def _add_pointwise_concat(reader, prog, axis, post, *pieces):
    """test/fuse_concat.cpp add_pointwise_concat: a fused_concat of one pointwise module per piece
    (arg(name, inputs, f)) and a post module whose first param `!x0` is the concat result."""
    modules, inputs = [], []
    for _, name, ins, f in pieces:
        modules.append(reader.pointwise_helper("create_pointwise_module", [prog, name, ins, f]))
        inputs += ins
    if not inputs:
        raise Unsupported("add_pointwise_concat without inputs")
    _, name, extra, f = post
    pm = prog.create_module(name)
    pm.bypass = True
    params = [pm.add_parameter("!x0", Shape.scalar(inputs[-1].shape.type))]
    params += [pm.add_parameter(f"x{k + 1}", Shape.scalar(x.shape.type)) for k, x in enumerate(extra)]
    pm.add_return(reader.pointwise_body(pm, params, f))
    return prog.main.add_instruction(Op("fused_concat", axis=axis), inputs + list(extra), modules + [pm])


INCLUDE_HELPERS["add_pointwise_concat"] = _add_pointwise_concat
INCLUDE_HELPERS["arg"] = lambda r, name, inputs, f: ("concat_arg", name, list(inputs), f)  # fuse_concat.cpp
# test/include/basic_ops.hpp literals
INCLUDE_HELPERS["get_2x2"] = lambda r, base=0: (
    "literal",
    Shape.of("float32", [2, 2]),
    [base + k for k in (1, 2, 3, 4)],
)
INCLUDE_HELPERS["get_2"] = lambda r: ("literal", Shape.of("float32", [2]), [1, 2])


def _add_group(reader, prog, name, tag, inputs, *rest):
    """test/include/group.hpp add_group: a bypass submodule with params x0.. (or the given names)
    the lambda fills, returned from a `group[tag=...]` in main."""
    f = rest[-1]
    names = rest[0] if len(rest) == 2 else [f"x{k}" for k in range(len(inputs))]
    if not isinstance(f, Function) or len(names) != len(inputs):
        raise Unsupported("add_group body")
    gm = prog.create_module(name)
    gm.bypass = True
    params = [gm.add_parameter(n, Shape.of(x.shape.type, x.shape.lens)) for n, x in zip(names, inputs)]
    r = reader.call(f, [gm, params])
    gm.add_return(r if isinstance(r, list) else [r])
    return prog.main.add_instruction(Op("group", tag=tag), inputs, [gm])


INCLUDE_HELPERS["add_group"] = _add_group


def numeric_limit(type_name: str, what: str) -> float | int:
    """std::numeric_limits<T>::what() for the C++ scalar types the tests name."""
    floating = dtypes.dtype(type_name).is_float
    if not floating:
        low, high = dtypes.int_limits(type_name)
        if what in ("max", "lowest", "min"):
            return high if what == "max" else low
        raise Unsupported(f"std::numeric_limits<{type_name}>::{what}")
    info = dtypes.finfo(type_name)
    values = {
        "infinity": float("inf"),
        "quiet_NaN": float("nan"),
        "max": float(info.max),
        "lowest": float(info.min),
        "min": float(info.tiny),
        "epsilon": float(info.eps),
    }
    if what not in values:
        raise Unsupported(f"std::numeric_limits<{type_name}>::{what}")
    return values[what]


class TypeLimits:
    """What shape::visit_type hands its lambda: the element type's max() / min() (lowest)."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def method(self, name: str) -> Any:
        if name in ("max", "min", "lowest"):
            return numeric_limit(self.type_name, "max" if name == "max" else "lowest")
        raise Unsupported(f"visit_type value .{name}")


def _check_resize(reader, v, input_shape, check_gather=True):
    """test/rewrite_resize_test.cpp check_resize: after rewrite_resize + DCE no resize is left, a
    gather is (when check_gather), and the values equal the resize's."""
    prog = Program()
    x = prog.main.add_parameter("x", reader.as_shape(input_shape))
    prog.main.add_instruction(_our_op(MakeOp("resize", _attr_dict(v))), [x])
    reader.run_event(prog, [_pass_spec("rewrite_resize", [], {}), _pass_spec("dead_code_elimination", [], {})])
    checks = ("removes:resize",) + (("has:gather",) if check_gather else ()) + ("same_values",)
    return PropertyCheck(prog, checks)


NATIVE_CHECKS = {"check_resize": _check_resize}
