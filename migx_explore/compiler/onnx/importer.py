"""parse_onnx: ONNX model -> Program (main module: params, literals, decomposed ops, @return).

What the importer records on the Program (plain attributes; they are not part of the IR, so a
`Program.copy()` or a parsed text form does not carry them):
  program.input_names   ONNX names of the graph inputs that became @params, in graph order
                        (the i-th is the param named `param_name(input_names[i])`).
  program.output_names  ONNX names of the graph outputs, in @return order.
"""

from __future__ import annotations

import contextlib
import gc
import math
import warnings
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import onnx

from .. import dtypes
from ..errors import ImportError_, MigxError
from ..ir import Instruction, Module, Program
from ..limits import BudgetError, check_bytes, check_lens, human_bytes, memory_budget
from ..shape import DynDim, Shape
from . import registry
from .arity import check_inputs
from .context import ConstantInputRequired, NodeContext, param_name
from .dims import importer_input_dims
from .loader import ModelSource, check_model, load_external_data, load_model
from .scopes import node_scope
from .tensors import ir_type, to_array
from .validate import overrides_fixed_dims, validate_imported, validate_model

DEFAULT_OPSET = 13  # MIGraphX's default when a model declares none
_DEFAULT_DOMAINS = ("", "ai.onnx")
# ONNX Runtime's contrib domain: optimized transformer exports use its fused ops (parse_msft.py).
MSFT_DOMAIN = "com.microsoft"
_DOMAINS = (*_DEFAULT_DOMAINS, MSFT_DOMAIN)


def parse_onnx(
    source: ModelSource,
    input_dims: Mapping[str, Sequence[int]] | None = None,
    default_dim: int = 1,
    constant_inputs: Mapping[str, np.ndarray] | None = None,
    feed: Mapping[str, np.ndarray] | None = None,
    exact_data_dependent: bool = False,
) -> Program:
    """Import an ONNX model (path, serialized bytes or ModelProto).

    input_dims fixes the dims of named graph inputs (needed for symbolic dims), or of every input
    that uses a named ONNX dim_param (`{"P": (1, 255), "T": 1}`, see onnx/dims.py); a (min, max)
    pair instead of an int makes that dim a dynamic range (dynamic shapes); any other
    non-fixed dim becomes `default_dim`, with a warning naming the input and the dim.
    constant_inputs freezes named graph inputs to values (they become literals, not params): for
    models that feed shape-like operands (axes, pads, target shapes) as inputs, which a static-shape
    compiler must know at compile time (ConstantInputRequired names them). `feed` (arrays keyed by
    input name) fixes every input's dims from the arrays' shapes; input_dims overrides it.
    exact_data_dependent makes an op whose output length depends on values (NonZero,
    NonMaxSuppression) in the main graph need its inputs as constants (ConstantInputRequired)
    instead of taking MIGraphX's padded maximum-size form, so a caller that has the feed can freeze
    them and get ONNX's exact result."""
    model, folder, raw = load_model(source)
    what = f"ONNX model {str(source)!r}" if folder is not None else "ONNX model"
    _check_opset(model, what)
    _check_supported_ops(model)
    if _undeclared_contrib_domain(model):
        # Exporters (and ORT's transformer optimizer) emit com.microsoft ops without declaring the
        # domain; ONNX Runtime and MIGraphX read them anyway, the checker refuses the node. Declare
        # it (version 1, the only one) so the checker checks the rest; a caller's ModelProto is
        # copied, never edited, and the checker reads the declaring copy, not the original bytes.
        if model is source:
            model = onnx.ModelProto.FromString(model.SerializeToString())
        model.opset_import.append(onnx.helper.make_opsetid(MSFT_DOMAIN, 1))
        raw = None
    # The checker reads the original bytes unless external data was inlined (it would look for the
    # data files relative to the working directory).
    inlined = load_external_data(model, folder)
    check_model(raw if raw is not None and not inlined else model, what)
    validate_model(model, what)  # what ONNX Runtime refuses (onnx/validate.py)
    constants = dict(constant_inputs or {})
    dims = importer_input_dims(model, input_dims, feed, skip=list(constants))
    with _no_cyclic_gc():
        importer = _Importer(model, dims, int(default_dim), constants)
        importer.exact_data_dependent = exact_data_dependent
        program = importer.run()
        validate_imported(model, program.main.output_shapes(), check_outputs=not overrides_fixed_dims(model, dims))
    return program


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a program is built.

    Why: importing 100,000 nodes allocates millions of objects that all stay alive, and each
    collection walks the growing heap again: 1.5 of the 5.8 CPU seconds `read` took on a
    100,000-node chain (issue 23). Nothing here makes garbage cycles worth collecting midway;
    reference counting still frees everything else, and collection resumes afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def import_node(node: onnx.NodeProto, inputs: Mapping[str, Shape | np.ndarray], opset: int = DEFAULT_OPSET) -> Program:
    """A program of one node, imported without the ONNX checker (which refuses a malformed node
    before any handler sees it): an input given as a Shape becomes a @param, an array a literal.
    For tests and fuzzers that probe the op handlers directly."""
    from onnx import helper, numpy_helper

    vis, inits = [], []
    for name, v in inputs.items():
        if isinstance(v, Shape):
            elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtypes.np_dtype(v.type)))
            vis.append(helper.make_tensor_value_info(name, elem, list(v.lens)))
        else:
            inits.append(numpy_helper.from_array(np.asarray(v), name))
    outs = [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in node.output if o]
    graph = helper.make_graph([node], "node", vis, outs, inits)
    domains = {node.domain} - set(_DEFAULT_DOMAINS)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    )
    return _Importer(model, {}, 1, {}).run()


def _nodes(graph: onnx.GraphProto):
    """Every node of the graph and of its subgraphs (If/Loop/Scan bodies)."""
    for n in graph.node:
        yield n
        for a in n.attribute:
            for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _nodes(g)


def _undeclared_contrib_domain(model: onnx.ModelProto) -> bool:
    """The model has com.microsoft nodes but no opset_import for that domain."""
    return MSFT_DOMAIN not in {o.domain for o in model.opset_import} and any(
        n.domain == MSFT_DOMAIN for n in _nodes(model.graph)
    )


def _supported(node: onnx.NodeProto) -> bool:
    if node.domain == MSFT_DOMAIN:
        return node.op_type in registry.MSFT_OPS and node.op_type in registry.HANDLERS
    return node.domain in _DEFAULT_DOMAINS and node.op_type in registry.HANDLERS


def _check_supported_ops(model: onnx.ModelProto) -> None:
    """Several unsupported operator types (ai.onnx.ml, com.microsoft, ...) are named in one message
    rather than one import at a time; a single one is reported by its node (see _Importer._node)."""
    missing: dict[str, list[str]] = {}
    for n in _nodes(model.graph):
        if not _supported(n):
            domain = n.domain if n.domain not in _DEFAULT_DOMAINS else "ai.onnx"
            missing.setdefault(f"{domain}.{n.op_type}", []).append(n.name or (n.output[0] if n.output else "?"))
    if len(missing) < 2:
        return
    parts = []
    for op, nodes in missing.items():
        shown = ", ".join(nodes[:3]) + (f", ... ({len(nodes)} nodes)" if len(nodes) > 3 else "")
        parts.append(f"{op} (node{'s' if len(nodes) > 1 else ''} {shown})")
    raise ImportError_(
        f"{len(missing)} operators are not supported: {'; '.join(parts)}; run `migx-explore onnx --list` "
        "for the supported operators"
    )


def _check_opset(model: onnx.ModelProto, what: str) -> None:
    """An opset newer than the installed onnx knows has operator semantics nobody here can check."""
    known = onnx.defs.onnx_opset_version()
    for o in model.opset_import:
        if o.domain in _DEFAULT_DOMAINS and not 1 <= o.version <= known:
            raise ImportError_(
                f"{what} declares opset {o.version}, but the installed onnx {onnx.__version__} "
                f"knows opsets 1 to {known}; upgrade onnx or export with an older opset"
            )


def model_opset(model: onnx.ModelProto) -> int:
    for o in model.opset_import:
        if o.domain in _DEFAULT_DOMAINS:
            return int(o.version)
    return DEFAULT_OPSET


def _user_shape(name: str, t: str, dims: Sequence, rank: int | None) -> Shape:
    """Shape from input_dims: ints, or (min, max) pairs / DynDims for a dynamic dim (a range)."""
    if rank is not None and len(dims) != rank:
        raise ImportError_(f"input_dims for {name!r} has {len(dims)} dims but the input has rank {rank}")
    out: list[DynDim] = []
    for d in dims:
        try:
            dd = d if isinstance(d, DynDim) else DynDim(int(d), int(d)) if np.ndim(d) == 0 else DynDim(*map(int, d))
        except (TypeError, ValueError) as e:
            raise ImportError_(f"input_dims for {name!r}: bad dimension {d!r} ({e})") from None
        out.append(dd)
    if all(d.is_fixed for d in out):
        return Shape.of(t, [d.min for d in out])
    return Shape.dynamic(t, out)


def _check_budget(ctx: NodeContext, ins: Instruction | None) -> None:
    """Refuse a value over the memory budget up front (evaluating it would need that much)."""
    if ins is None or ins.shape.is_tuple or ins.shape.dyn_dims is not None:
        return
    try:
        itemsize = dtypes.np_dtype(ins.shape.type).itemsize
        if 0 in ins.shape.lens and math.prod(d for d in ins.shape.lens if d) * itemsize >= 2**63:
            # empty, yet no array has such dims (numpy: "array is too big"; ORT refuses them too)
            raise BudgetError(f"its output {list(ins.shape.lens)} is empty but its other dims overflow 64 bits")
        check_bytes(ins.shape.elements() * dtypes.np_dtype(ins.shape.type).itemsize, "its output")
    except BudgetError as e:
        raise ctx.error(f"{e} ({ins.shape})") from None


class _Importer:
    def __init__(self, model: onnx.ModelProto, input_dims: dict, default_dim: int, constants: dict):
        self.model = model
        self.graph = model.graph
        self.opset = model_opset(model)
        self.input_dims = input_dims
        self.default_dim = default_dim
        self.constants = constants
        self.program = Program()
        self.scopes: dict[int, str] = {}
        self.program.scopes = self.scopes
        self.main = self.program.main
        self.env: dict[str, Instruction] = {}
        self.exact_data_dependent = False

    def run(self) -> Program:
        names = [o.name for o in self.graph.output]
        if not names:
            raise ImportError_("the graph has no outputs (an empty graph computes nothing)")
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise ImportError_(
                f"graph output name(s) {', '.join(map(repr, dups))} appear more than once; output names must be unique"
            )
        self._initializers()
        self._inputs()
        self.import_nodes(self.main, self.sorted_nodes(self.graph.node, set(self.env)), self.env, self.opset)
        outs = []
        for o in self.graph.output:
            if o.name not in self.env:
                raise ImportError_(f"graph output {o.name!r} is not produced by any node")
            outs.append(self.env[o.name])
        self.main.add_return(outs)
        self.program.output_names = [o.name for o in self.graph.output]
        return self.program

    # ---- graph inputs and initializers -----------------------------------------------------------
    def _initializers(self) -> None:
        if len(self.graph.sparse_initializer):
            raise ImportError_("sparse initializers are not supported")
        for t in self.graph.initializer:
            self.env[t.name] = self.main.add_literal(to_array(t, f"initializer {t.name!r}"))
        inputs = {vi.name: vi for vi in self.graph.input}
        for name, value in self.constants.items():
            if name not in inputs or name in self.env:
                raise ImportError_(f"constant_inputs names {name!r}, which is not a graph input")
            vi = inputs[name]
            t = ir_type(vi.type.tensor_type.elem_type, f"input {name!r}")
            self.env[name] = self.main.add_literal(np.asarray(value, dtype=dtypes.np_dtype(t)))

    def _inputs(self) -> None:
        names = [i.name for i in self.graph.input if i.name not in self.env]
        unknown = [n for n in self.input_dims if n not in names]
        if unknown:
            raise ImportError_(
                f"input_dims (--input-dim) names unknown input(s) {', '.join(map(repr, unknown))}; the model's "
                f"inputs are {', '.join(map(repr, names)) or 'none'}"
            )
        seen: dict[str, str] = {}
        for vi in self.graph.input:
            if vi.name in self.env:
                continue  # an initializer listed as an input (IR < 4): it stays a literal, as in MIGraphX
            pname = param_name(vi.name)
            if pname in seen:
                raise ImportError_(f"inputs {seen[pname]!r} and {vi.name!r} map to the same parameter name {pname!r}")
            seen[pname] = vi.name
            self.env[vi.name] = self.main.add_parameter(pname, self._input_shape(vi))
        self.program.input_names = names

    def _input_shape(self, vi: onnx.ValueInfoProto) -> Shape:
        if not vi.type.HasField("tensor_type"):
            kind = vi.type.WhichOneof("value") or "unknown"
            raise ImportError_(f"input {vi.name!r}: only tensor inputs are supported (got {kind.replace('_type', '')})")
        tt = vi.type.tensor_type
        t = ir_type(tt.elem_type, f"input {vi.name!r}")
        user = self.input_dims.get(vi.name)
        if user is not None:
            user = [self._default(vi, i) if d is None else d for i, d in enumerate(user)]
            return _user_shape(vi.name, t, user, len(tt.shape.dim) if tt.HasField("shape") else None)
        if not tt.HasField("shape"):
            raise ImportError_(f"input {vi.name!r} has no shape (unknown rank); give input_dims={{{vi.name!r}: [...]}}")
        lens = []
        for i, d in enumerate(tt.shape.dim):
            if d.HasField("dim_value") and d.dim_value >= 0:
                lens.append(int(d.dim_value))
                continue
            if d.HasField("dim_value"):
                raise ImportError_(
                    f"input {vi.name!r}: dimension {i} is {d.dim_value}; dimensions must not be negative"
                )
            lens.append(self._default(vi, i))
        check_lens(lens, dtypes.np_dtype(t).itemsize, f"input {vi.name!r}")
        return Shape.of(t, lens)

    def _default(self, vi: onnx.ValueInfoProto, axis: int) -> int:
        """default_dim for a dim nothing fixed, with a warning saying how to set it (by its name)."""
        d = vi.type.tensor_type.shape.dim[axis]
        if d.dim_param:
            warnings.warn(
                f"input {vi.name!r}: dimension {axis} ({d.dim_param!r}) is not fixed; using "
                f"{self.default_dim} (set it with input_dims={{{d.dim_param!r}: ...}} or "
                f"--input-dim {d.dim_param}=..., or give a feed)",
                stacklevel=5,
            )
        else:
            warnings.warn(
                f"input {vi.name!r}: dimension {axis} is not fixed; using {self.default_dim} "
                f"(set it with input_dims={{{vi.name!r}: [...]}} or --input-dim {vi.name}=...)",
                stacklevel=5,
            )
        return self.default_dim

    # ---- nodes ---------------------------------------------------------------------------------------
    @staticmethod
    def sorted_nodes(nodes: Sequence[onnx.NodeProto], known: set[str]) -> list[onnx.NodeProto]:
        """Nodes in topological order (ONNX requires it; some exporters get it wrong)."""
        nodes = list(nodes)
        known = set(known)
        order, pending = [], nodes
        while pending:
            rest = []
            for n in pending:
                if all(not i or i in known for i in n.input):
                    order.append(n)
                    known.update(o for o in n.output if o)
                else:
                    rest.append(n)
            if len(rest) == len(pending):
                n = rest[0]
                missing = [i for i in n.input if i and i not in known]
                raise ImportError_(
                    f"node {n.name or n.op_type} ({n.op_type}) uses undefined value(s) "
                    f"{', '.join(map(repr, missing))} (graph is not a DAG or an input is missing)"
                )
            pending = rest
        return order

    def import_nodes(
        self, module: Module, nodes: Sequence[onnx.NodeProto], env: dict[str, Instruction], opset: int
    ) -> None:
        """Import `nodes` (in order) into `module`, reading and writing ONNX names in `env`. Used for
        the main graph, subgraphs (If/Loop bodies, unrolled Scan bodies) and expanded function bodies."""
        for k, node in enumerate(nodes):
            self._node(module, env, opset, node, k)

    def subgraph_order(self, graph: onnx.GraphProto, known: set[str]) -> list[onnx.NodeProto]:
        return self.sorted_nodes(
            graph.node, known | {i.name for i in graph.input} | {t.name for t in graph.initializer}
        )

    def _node(self, module: Module, env: dict[str, Instruction], opset: int, node: onnx.NodeProto, index: int) -> None:
        ctx = NodeContext(module, node, opset, index, importer=self, env=env)
        if node.domain == MSFT_DOMAIN and node.op_type not in registry.MSFT_OPS:
            raise ctx.error(
                f"operator {node.domain}.{node.op_type} is not supported; run `migx-explore onnx "
                "--list` for the supported operators"
            )
        if node.domain not in _DOMAINS:
            raise ctx.error(
                f"operator {node.domain}.{node.op_type} from domain {node.domain!r} is not supported; "
                "run `migx-explore onnx --list` for the supported operators"
            )
        handler = registry.HANDLERS.get(node.op_type)
        if handler is None:
            raise ctx.error(
                f"unsupported ONNX operator {node.op_type}; run `migx-explore onnx --list` for the supported operators"
            )
        args = [env[n] if n else None for n in node.input]
        check_inputs(ctx, args)
        if node.domain == MSFT_DOMAIN:
            _check_contrib_dynamic(ctx, node.op_type, args)
        first_id = self.program._next_id
        try:
            result = handler(ctx, args)
        except ConstantInputRequired:
            raise
        except ImportError_ as e:
            if f"node {ctx.name} (" in str(e):
                raise
            # From a node of this one's expansion (function body, contrib-op decomposition, If/Loop
            # body): name the node of the user's model too.
            raise ctx.error(f"inside it: {e}") from None
        except MigxError as e:
            raise ctx.error(str(e)) from None
        except MemoryError:
            raise ctx.error(f"out of memory while importing (over {human_bytes(memory_budget())}?)") from None
        except (IndexError, KeyError, ValueError, TypeError, AttributeError, ZeroDivisionError, OverflowError) as e:
            # What a handler's own checks missed: attribute values or constant inputs of the right
            # type but an impossible value (a perm too short, an axis past the rank, pads of the
            # wrong length). The node is malformed for this importer; say which one.
            raise ctx.error(
                f"cannot import this node ({type(e).__name__}: {e}); check its attributes and "
                "constant inputs against the operator's specification"
            ) from None
        outs = [result] if isinstance(result, Instruction) else list(result)
        for out in outs:
            _check_budget(ctx, out)
        scope = node_scope(node)
        if scope:  # every instruction this node made (a subgraph's nodes have named theirs already)
            for i in range(first_id, self.program._next_id):
                self.scopes.setdefault(i, scope)
        for i, name in enumerate(node.output):
            if not name:
                continue
            if i >= len(outs) or outs[i] is None:
                raise ctx.error(f"output {i} ({name!r}) is not supported")
            env[name] = outs[i]


def _check_contrib_dynamic(ctx: NodeContext, op_type: str, args: list) -> None:
    """A contrib op whose parser takes fixed dims, fed a dynamic range: one named refusal."""
    allowed = registry.MSFT_DYNAMIC.get(op_type, "")
    if allowed == "any":
        return
    for a in args:
        dd = a.shape.dyn_dims if a is not None else None
        loose = [k for k, d in enumerate(dd or ()) if not d.is_fixed and not (allowed == "batch" and k == 0)]
        if loose:
            which = "dims other than the batch" if allowed == "batch" else "dims"
            raise ctx.error(
                f"com.microsoft.{op_type} takes fixed {which}, but an input has the dynamic shape {a.shape} "
                "(rule contrib-ops-fixed-dims, docs/dynamic_shapes.md): fix the size with --input-dim NAME=N, "
                "or run with --inputs (the feed fixes every dim)"
            )
