"""The numpy reference evaluator: runs any program, fused submodules included.

Values are plain numpy arrays in logical (row-major) order; strides in the IR describe GPU
memory layouts and do not matter here. Every instruction's result is checked against its IR
shape, so an op spec whose compute disagrees with its shape rule is caught where it happens.

A module's plan (its steps, cached per module version) keeps the value of each instruction that
depends on literals alone after its first evaluation, read-only, when small (_KEEP_BYTES): an
imported model's batch-norm scales and broadcast biases are then computed once, not per forward.
Without a hook, the plan also folds a convolution's per-channel affine chain (an inference batch
norm) into the convolution's weights, once per plan; a recurrent op's constant R is relaid for
its per-step product once per plan (compiler/ref_fold.py).

Evaluation runs BLAS on one thread (through threadpoolctl, where installed). The reference runs
beside the notebook's kernel, in background checks and in one Dask worker per core; a BLAS that
spreads each product over every core there makes each wait on the others' threads (on a busy
2-core machine a 128x128 product took 170 ms instead of 0.2 ms).
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import dtypes
from .errors import EvalError, MigxError
from .limits import WorkBudgetError, check_bytes, memory_budget, work_meter
from .ref_fold import ConvAffine, RelaidR, affine_chains, chain_operands, relaid_recurrence
from .shape import Shape

if TYPE_CHECKING:  # pragma: no cover - the evaluator walks IR objects but never builds them
    from .ir import Instruction, Module, Program

Hook = Callable[["Instruction", np.ndarray], None]


@functools.cache
def _blas_controller() -> Any:
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # an optional speed-up: without it BLAS keeps its own thread count
        return None
    return ThreadpoolController()


class _OneBlasThread:
    """BLAS on one thread while any evaluation runs (in any thread): the first to enter sets
    the limit, the last to leave restores what was there before."""

    _lock = threading.Lock()
    _depth = 0
    _limiter: Any = None

    def __enter__(self) -> None:
        cls = type(self)
        with cls._lock:
            if cls._depth == 0:
                ctl = _blas_controller()
                cls._limiter = None if ctl is None else ctl.limit(limits=1, user_api="blas")
            cls._depth += 1

    def __exit__(self, *exc: object) -> None:
        cls = type(self)
        with cls._lock:
            cls._depth -= 1
            if cls._depth == 0 and cls._limiter is not None:
                cls._limiter.restore_original_limits()
                cls._limiter = None


one_blas_thread = _OneBlasThread


def _check_input(name: str, value: Any, shape: Shape) -> np.ndarray:
    arr = np.asarray(value)
    want = dtypes.np_dtype(shape.type)
    if shape.dyn_dims is not None:
        ok = arr.ndim == len(shape.dyn_dims) and all(d.min <= n <= d.max for n, d in zip(arr.shape, shape.dyn_dims))
    else:
        ok = tuple(arr.shape) == shape.lens or (arr.size == 1 and shape.elements() == 1)
    if not ok:
        raise EvalError(f"input {name!r} has shape {tuple(arr.shape)} but the program expects {shape}")
    if arr.dtype != want:
        same_kind = arr.dtype.kind == want.kind or (want.kind == "f" and arr.dtype.kind in "iuf")
        if same_kind or np.can_cast(arr.dtype, want):
            arr = arr.astype(want)
        else:
            raise EvalError(f"input {name!r} has element type {arr.dtype} but the program expects {shape.type}")
    if shape.dyn_dims is None and arr.shape != shape.lens:
        arr = arr.reshape(shape.lens)
    return arr


def bind_params(module: Module, inputs: Mapping[str, Any] | Sequence[Any], check: bool) -> dict[int, np.ndarray]:
    """Module parameter values by instruction id from named or positional inputs (`check`: shape
    and element type checked and converted, one clear error per problem)."""
    cached = _PLANS.get(module)  # an evaluated module's plan lists them; else walk the module
    plan = next(iter(cached[1].values())) if cached is not None and cached[0] == module.version else None
    params = plan[2] if plan is not None else module.params()
    env: dict[int, np.ndarray] = {}
    if isinstance(inputs, Mapping):
        names = [p.param_name for p in params]
        missing = [n for n in names if n not in inputs]
        if missing:
            want = ", ".join(f"{p.param_name}: {p.shape}" for p in params if p.param_name in missing)
            raise EvalError(f"missing input(s) for module {module.name}: {want}")
        extra = [k for k in inputs if k not in names]
        if extra:
            raise EvalError(
                f"unknown input(s) {', '.join(map(repr, extra))}; the program's inputs are {', '.join(names) or 'none'}"
            )
        for p in params:
            env[p.id] = (
                _check_input(p.param_name, inputs[p.param_name], p.shape) if check else np.asarray(inputs[p.param_name])
            )
    else:
        if len(inputs) != len(params):
            raise EvalError(f"module {module.name} takes {len(params)} inputs, got {len(inputs)}")
        for p, v in zip(params, inputs):
            env[p.id] = _check_input(p.param_name, v, p.shape) if check else np.asarray(v)
    return env


class _Result:
    """What run_instruction checks an instruction's result against, read off its IR shape once
    (a plan keeps one per step: per instruction, the lookups cost as much as a small op)."""

    __slots__ = ("shape", "want", "subtypes", "static", "dynamic", "size", "nbytes")

    def __init__(self, out: Shape):
        self.shape = out
        self.subtypes = tuple(dtypes.np_dtype(s.type) for s in out.sub_shapes) if out.is_tuple else None
        self.want = None if out.is_tuple else dtypes.np_dtype(out.type)
        self.static = self.want is not None and out.dyn_dims is None  # lens known: checked
        self.dynamic = out.dynamic_shape
        self.size = out.elements() if self.static else 0
        self.nbytes = self.size * self.want.itemsize if self.static else 0


class _Step:
    """One instruction of a module's execution plan: its argument and dead-value ids resolved."""

    __slots__ = ("ins", "id", "literal", "args", "free", "work", "result", "constant", "value", "fused")

    def __init__(
        self,
        ins: Instruction,
        args: tuple[int, ...],
        free: tuple[int, ...],
        constant: bool,
        fused: ConvAffine | RelaidR | None,
    ):
        self.ins, self.id, self.args, self.free = ins, ins.id, args, free
        self.literal = ins.literal.data if ins.is_literal() else None
        # the plan's own compute for this step (ref_fold.py): a convolution and its affine chain
        # ending in `ins`, or a recurrent op fed its constant R relaid
        self.fused = fused
        self.work = arithmetic(ins) if fused is None else sum(map(arithmetic, fused.instructions))
        self.result = None if self.literal is not None else _Result(ins.shape)
        self.constant = constant  # a function of literals only: kept after its first evaluation
        self.value: np.ndarray | None = None

    def keep(self, value: Any) -> None:
        """Keep a constant step's value for the next evaluations, read-only, unless it holds more
        than _KEEP_BYTES of memory of its own (a view of a literal holds none)."""
        if not isinstance(value, np.ndarray):
            return
        root = value
        while isinstance(root.base, np.ndarray):
            root = root.base
        if root.flags.writeable and root.nbytes > _KEEP_BYTES:
            return
        value.flags.writeable = False
        self.value = value

    def where(self) -> str:  # formatted only when the work budget runs out
        if self.fused is not None:
            return self.fused.where()
        return f"module {self.ins.module.name}: {self.ins.name} (#{self.id})"


# Plans by module, for the module's version (every edit of a module moves its version).
_PLANS: weakref.WeakKeyDictionary[Module, tuple] = weakref.WeakKeyDictionary()
# Constant values a plan keeps at most this large each: an imported model recomputes its
# batch-norm scales, broadcast biases and reshaped constants on every forward otherwise (200+
# small instructions in GPT-2 or ResNet-18, 7-15% of their forward); large ones (converted
# weights) would double the model's memory.
_KEEP_BYTES = 256 << 10


def _foldable(ins: Instruction) -> bool:
    """Whether the value of `ins` depends on nothing but its inputs (then, on literals alone, it
    is the same on every evaluation)."""
    op = ins.op
    return not (
        op.has("builtin")
        or op.has("not_context_free")
        or op.has("side_effect")
        or ins.module_inputs
        or ins.shape.dynamic_shape
    )


def _plan(module: Module, fold: bool = True) -> tuple[list[_Step], list[int], list[Instruction]]:
    """The steps of `module` (params and the return left out), its output ids and its params.
    Each value is dropped after its last use unless it is an output. `fold`: a convolution and
    the per-channel affine chain after it (a batch norm) run as one step (compiler/ref_fold.py);
    evaluations that report every value (a hook) take the plan without."""
    cached = _PLANS.get(module)
    if cached is not None and cached[0] == module.version and fold in cached[1]:
        return cached[1][fold]
    version = module.version
    params = module.params()
    instrs: list[Instruction] = []
    for ins in module:
        if ins.is_return():
            break
        if not ins.is_param():
            instrs.append(ins)
    outputs = [o.id for o in module.output_instructions()]
    keep = set(outputs)
    constant: set[int] = set()
    for ins in instrs:
        if ins.is_literal() or (all(i.id in constant for i in ins.inputs) and _foldable(ins)):
            constant.add(ins.id)
    chains = affine_chains(instrs, constant, keep) if fold else []
    # the fused step takes the place of its chain's last operation, where its constants exist
    fused_at = {chain[-1].id: (conv, chain) for conv, chain in chains}
    folded_away = {i.id for conv, chain in chains for i in [conv, *chain[:-1]]}
    entries: list[tuple[Instruction, tuple[int, ...], ConvAffine | RelaidR | None]] = []
    for ins in instrs:
        if ins.id in fused_at:
            conv, chain = fused_at[ins.id]
            entries.append((ins, chain_operands(conv, chain), ConvAffine(conv, chain)))
        elif ins.id not in folded_away:
            entries.append((ins, tuple(i.id for i in ins.inputs), relaid_recurrence(ins, constant)))
    last_use: dict[int, int] = {}
    for k, (_, ids, _) in enumerate(entries):
        for i in ids:
            last_use[i] = k
    steps = []
    for k, (ins, ids, fused) in enumerate(entries):
        const = ins.id in constant and not ins.is_literal() and ins.id not in keep  # outputs stay fresh arrays
        free = tuple(dict.fromkeys(i for i in ids if last_use[i] == k and i not in keep))
        steps.append(_Step(ins, ids, free, const, fused))
    plans = cached[1] if cached is not None and cached[0] == version else {}
    plans[fold] = (steps, outputs, params)
    _PLANS[module] = (version, plans)
    return plans[fold]


def evaluate_module(
    module: Module, inputs: Mapping[str, Any] | Sequence[Any], *, check_shapes: bool = True, hook: Hook | None = None
) -> list[np.ndarray]:
    """Run one module. `check_shapes=False` is used for pointwise submodules, whose scalar params
    are fed whole tensors. Values are dropped after their last use (a `hook` sees each one)."""
    env = bind_params(module, inputs, check_shapes)
    steps, outputs, _ = _plan(module, fold=hook is None)
    budget = memory_budget()
    with np.errstate(all="ignore"), work_meter() as meter, one_blas_thread():
        for st in steps:
            meter.spend(st.where, st.work)
            if st.literal is not None:
                env[st.id] = st.literal
            elif st.value is not None:
                env[st.id] = st.value
            elif st.fused is not None:
                env[st.id] = st.fused(
                    [env[i] for i in st.args], lambda ins, a: run_instruction(ins, a, check_shapes, budget)
                )
            else:
                env[st.id] = run_instruction(st.ins, [env[i] for i in st.args], check_shapes, budget, result=st.result)
                if st.constant and check_shapes:  # (unchecked shapes could differ: not kept)
                    st.keep(env[st.id])
            if hook is not None:
                hook(st.ins, env[st.id])
            for i in st.free:
                del env[i]
    return [env[o] for o in outputs]


def arithmetic(ins: Instruction) -> int:
    """An estimate of the operations an instruction's compute does, for the work budget: its output
    elements, times the reduction length for a product (dot, convolution). 0 for dynamic shapes."""
    out = ins.shape
    if out.is_tuple or out.dyn_dims is not None:
        return 0
    n = out.elements()
    name = ins.op.name
    if name in ("dot", "quant_dot") and ins.inputs and ins.inputs[0].shape.lens:
        return n * max(1, ins.inputs[0].shape.lens[-1])
    if name in ("convolution", "quant_convolution") and len(ins.inputs) > 1 and ins.inputs[1].shape.lens:
        w = ins.inputs[1].shape
        return n * max(1, w.elements() // max(1, w.lens[0]))
    return n


def _concrete_shape(ins: Instruction, args: list[np.ndarray]) -> Shape:
    """A dynamic instruction's shape for these arguments: its static shape rule on their actual
    shapes (computes that read `out.lens` then see the runtime dims, not the range's maxima)."""
    from .op import NATIVE_DYNAMIC_OPS, compute_shape

    if ins.name in NATIVE_DYNAMIC_OPS:
        return ins.shape
    shapes = [Shape.of(i.shape.type, np.shape(a)) for i, a in zip(ins.inputs, args) if not i.shape.is_tuple]
    if len(shapes) != len(args):
        return ins.shape
    try:
        return compute_shape(ins.op, shapes, ins.module_inputs)
    except MigxError:
        return ins.shape


def run_instruction(
    ins: Instruction,
    args: list[np.ndarray],
    check_shapes: bool,
    budget: int | None = None,
    run: SubmoduleRunner | None = None,
    *,
    result: _Result | None = None,
) -> np.ndarray:
    """Run one instruction's reference compute on `args` (its submodules through `run`, by default
    a SubmoduleRunner); `budget`: the memory budget, when the caller read it already; `result`:
    the instruction's _Result, when a plan holds it."""
    spec = ins.op.spec
    if spec.compute is None:
        raise EvalError(f"module {ins.module.name}: {ins.name} (#{ins.id}) has no reference implementation")
    r = _Result(ins.shape) if result is None else result
    if check_shapes and r.static and r.nbytes > (memory_budget() if budget is None else budget):
        check_bytes(r.nbytes, f"module {ins.module.name}: {ins.name} (#{ins.id}) output")  # formatted only here
    if r.dynamic:
        r = _Result(_concrete_shape(ins, args))
    try:
        res = spec.compute(ins.op, args, r.shape, SubmoduleRunner(ins) if run is None else run)
    except WorkBudgetError:
        raise  # said where it stopped already; wrapping it per enclosing loop would only repeat that
    except MigxError as e:
        raise EvalError(f"module {ins.module.name}: {ins.name} (#{ins.id}): {e}") from None
    except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError, OverflowError) as e:
        raise EvalError(f"module {ins.module.name}: {ins.name} (#{ins.id}) failed: {e}") from None
    except MemoryError:
        raise EvalError(f"module {ins.module.name}: {ins.name} (#{ins.id}) ran out of memory") from None
    if r.subtypes is not None:
        return tuple(np.asarray(v, dtype=t) for v, t in zip(res, r.subtypes))
    arr = np.asarray(res)
    if arr.dtype != r.want:
        arr = arr.astype(r.want)
    if check_shapes and r.static and arr.shape != r.shape.lens:
        if arr.size == r.size:
            arr = arr.reshape(r.shape.lens)
        else:
            raise EvalError(
                f"module {ins.module.name}: {ins.name} (#{ins.id}) computed shape {arr.shape}, "
                f"but its IR shape is {r.shape}"
            )
    return arr


class SubmoduleRunner:
    """Passed to op computes: call it with (module, args) to evaluate a submodule (the incremental
    evaluator passes one that reuses the values it has, compiler/ref_incremental.py)."""

    __slots__ = ("ins",)

    def __init__(self, ins: Instruction):
        self.ins = ins

    def __call__(self, module: Module, args: Sequence[np.ndarray], check_shapes: bool | None = None):
        return evaluate_module(module, args, check_shapes=(not module.bypass) if check_shapes is None else check_shapes)


def evaluate(program: Program, inputs: Mapping[str, Any], *, hook: Hook | None = None) -> list[np.ndarray]:
    """Run `main` with named inputs; returns the outputs of @return (or the last instruction)."""
    return evaluate_module(program.main, inputs, hook=hook)


def evaluate_all(program: Program, inputs: Mapping[str, Any]) -> dict[int, np.ndarray]:
    """Every value of main, keyed by stable instruction id (used to find where numerics diverge)."""
    values: dict[int, np.ndarray] = {}

    def hook(ins: Instruction, v: np.ndarray) -> None:
        values[ins.id] = v

    values.update(bind_params(program.main, inputs, True))
    evaluate_module(program.main, inputs, hook=hook)
    return values


def evaluate_instruction(ins: Instruction, args: Sequence[np.ndarray]) -> np.ndarray:
    """One instruction on given argument values (numeric bisect re-runs a suspect on reference inputs)."""
    with np.errstate(all="ignore"), one_blas_thread():
        return run_instruction(ins, list(args), True)


def eval_instruction(ins: Instruction) -> np.ndarray:
    """Evaluate a constant subtree (literals and context-free ops) on the host."""
    if not ins.can_eval():
        raise EvalError(f"{ins.name} (#{ins.id}) depends on a parameter or a non-constant op")
    memo: dict[int, np.ndarray] = {}
    stack = [ins]
    with np.errstate(all="ignore"), one_blas_thread():
        while stack:
            cur = stack[-1]
            if cur.id in memo:
                stack.pop()
                continue
            if cur.is_literal():
                memo[cur.id] = cur.literal.data
                stack.pop()
                continue
            pending = [i for i in cur.inputs if i.id not in memo]
            if pending:
                stack.extend(pending)
                continue
            memo[cur.id] = run_instruction(cur, [memo[i.id] for i in cur.inputs], True)
            stack.pop()
    return memo[ins.id]


def with_buffer_params(program: Program, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """`inputs` plus zeros for parameters a backend pass introduced (output buffers, the scratch
    arena), so a lowered program evaluates with the model's own inputs. A dynamic output buffer
    (replace_allocate on a dynamic program) gets its smallest shape: kernels compute their values
    functionally and never read it, and a missing dynamic *model* input stays an error."""
    feeds = dict(inputs)
    for p in program.main.params():
        if p.param_name not in feeds and (p.shape.dyn_dims is None or p.param_name.startswith("main:#output_")):
            lens = p.shape.lens if p.shape.dyn_dims is None else tuple(d.min for d in p.shape.dyn_dims)
            feeds[p.param_name] = np.zeros(lens, dtype=dtypes.np_dtype(p.shape.type))
    return feeds
