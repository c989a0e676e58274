"""Evaluating successive versions of one program on fixed inputs, recomputing only what can differ.

The per-pass numeric check evaluates the program after every pass that changed it, and a pass
changes a few instructions of hundreds. `IncrementalEvaluator` keeps the values of the version it
evaluated last, each under a key made of what determines it: the instruction's op and
submodules, and the *values* of its inputs (each distinct value gets a number, its token). An
instruction whose key was seen takes the stored value; one that was not is computed, and when its
value holds the same numbers its stable id (or an instruction it came from) had before, it keeps
that value's token, so what depends on it is found unchanged too (a fused kernel that computes
what the chain it replaced computed invalidates nothing downstream). The same numbers in another
memory layout (a `contiguous` copy of a transposed view) count as the same value: a product over
them may round differently in its last bits, well inside any check's tolerance, and re-running
everything downstream of each layout change would cost a forward pass per backend pass.

Submodules (a fused pointwise or reduce body, a kernel's epilogue) run through the same memo, each
instruction keyed as in main, so fusing ops into a kernel reuses the values they had; a main
instruction reused whole carries its body's values to the next version, where fuse_ops may turn
that kernel into another's epilogue.

A main instruction whose snapshot record and input tokens are those of the version before takes
its entry without being keyed again; an input left pending (a buffer nothing reads) stands in
that comparison by its key. Outputs come back with names (`named=True`): equal names, equal bits,
so the check keeps the comparison of an output a pass recomputed to the same bits.

Memory is bounded by one version's values: after each evaluation only the values of the version
just evaluated are kept (views share their base's memory; literals are the program's own data),
and the version before is freed then, not at the next garbage collection. While a version is
evaluated the one before is still held, so a pass that recomputes most of the network raises the
peak by that version's values once (fresh pages: on the shared VM, first-touched memory costs
~2 ms/MB, a third of bert's check).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .limits import memory_budget, work_meter
from .ref import SubmoduleRunner, arithmetic, bind_params, one_blas_thread, run_instruction, with_buffer_params
from .ref_tokens import ModuleTokens, fingerprint, identical, make_key
from .snapshot import rebuilt_record
from .snapshot_mirror import ProgramMirror
from .value_keys import shape_key, value_key, value_split

if TYPE_CHECKING:  # pragma: no cover
    from .ir import Instruction, Module, Program
    from .snapshot import ProgramSnapshot


@dataclass
class EvalStats:
    computed: int = 0  # instructions run
    reused: int = 0  # instructions whose value was kept from the version before
    finished: int = 0  # of those computed, how many from a stored part (value_keys.value_split)
    inside: int = 0  # instructions inside submodules (fused bodies, epilogues) whose value was kept
    unread: int = 0  # main instructions not computed because nothing read their values


class IncrementalEvaluator:
    """`evaluate(program)` returns main's outputs on the inputs given here, as compiler.ref.evaluate
    does, reusing what the previously evaluated version already computed. Thread-safe (one
    evaluation at a time)."""

    def __init__(self, inputs: Mapping[str, Any]):
        self.inputs = inputs  # not copied: the NumericConfig that owns this evaluator holds the same
        self.last = EvalStats()
        # (token, value, fingerprint) by key, by stable id and by fingerprint
        self._by_key: dict[tuple, tuple] = {}
        self._by_id: dict[int, tuple] = {}
        self._by_print: dict[tuple, tuple] = {}
        # the (key, entry) pairs computed inside each main instruction's submodules, by its key
        self._inner: dict[tuple, list] = {}
        self._modules: dict[tuple, tuple] = {}  # submodule structures and their numbers (ModuleTokens)
        self._records: dict[int, tuple] = {}
        # main's entries by stable id: (snapshot record, input tokens, submodule records, key, hit,
        # work, not a param or literal)
        self._by_record: dict[int, tuple] = {}
        self._tokens = itertools.count()
        self._lock = threading.Lock()
        self._mirror = ProgramMirror()
        self._serial = next(_SERIALS)  # tokens are this evaluator's numbers: names pair them with it
        self._output_tokens: list[int] = []

    def _key(self, ins: Instruction, tokens: dict[int, int], module_keys: ModuleTokens) -> tuple:
        if ins.is_param():
            return ("@param", ins.param_name, ins.shape)
        if ins.is_literal():
            # By identity: literal data is immutable and shared between versions, and the stored
            # value holds it, so the id cannot be reused while the key exists.
            return ("@literal", id(ins.literal.data), ins.shape)
        # What the compute reads (compiler/value_keys.py): the op as it reads it, the inputs whose
        # values it reads, its submodules and the element type and lens it writes (a lowered
        # GEMM writes its buffer's lens; strides are GPU layout, which the reference ignores).
        return make_key(ins, value_key(ins), shape_key(ins.shape), tokens, module_keys)

    def evaluate(self, program: Program, *, named: bool = False) -> Any:
        """main's outputs; with `named`, (outputs, their names): a name per output, equal to the
        name of an output of an earlier evaluation (by any evaluator) only where the two hold the
        same element type, lens and bits (compiler/pass_infra/numerics.py then keeps its comparison)."""
        with self._lock:
            return self._named(self._evaluate(program), named)

    def evaluate_snapshot(self, snap: ProgramSnapshot, *, named: bool = False) -> Any:
        """`evaluate(snap.to_program())`, on a program patched from the snapshot evaluated before
        instead (compiler/snapshot_mirror.py): a pass that changed a few instructions costs
        building those, not the whole program."""
        with self._lock:
            try:
                return self._named(self._evaluate(self._mirror.update(snap)), named)
            except BaseException:
                self._mirror = ProgramMirror()  # maybe half patched: the next one starts afresh
                raise

    def _named(self, outputs: list[np.ndarray], named: bool) -> Any:
        if not named:
            return outputs
        return outputs, tuple((self._serial, t) for t in self._output_tokens)

    def _evaluate(self, program: Program) -> list[np.ndarray]:
        with np.errstate(all="ignore"), work_meter() as meter, one_blas_thread():
            main = program.main
            params = bind_params(main, with_buffer_params(program, self.inputs), True)
            run = _Run(meter, self._modules, self._tokens, self._records)
            # A value no one reads is not computed: an instruction whose key is new waits until
            # a later key reads its token or a compute its value (a convolution's columns, once
            # its GEMM keys as the convolution; a buffer only written), then runs as it would have.
            pending: dict[int, tuple] = {}
            waiting: dict[tuple, int] = {}  # the first pending instruction of each key
            tokens, values = _OnRead(), _OnRead()

            def force(i: int) -> None:
                entry = pending.pop(i, None)
                if entry is None:
                    raise KeyError(i)
                self._finish(entry, tokens, values, run, pending)

            tokens.force = values.force = force
            try:
                return self._walk(main, params, run, pending, waiting, tokens, values)
            finally:
                # force closes over both maps: without this cycle broken they, and every value
                # of this version, would wait for the garbage collector, and the next version's
                # values would land on fresh pages (page faults: erf ran 2.5x slower)
                tokens.force = values.force = None

    def _walk(
        self, main: Module, params: dict, run: _Run, pending: dict, waiting: dict, tokens: _OnRead, values: _OnRead
    ) -> list[np.ndarray]:
        """The loop over main's instructions (see _evaluate), outputs returned."""
        meter = run.meter
        recs = _records(main)
        where = _Where(main.name)
        # the loop over what a pass left alone, kept lean: it runs over the whole program per pass
        # (run.keep inlined: collect is None out here, only a compute sets it)
        by_record, inner_before, tget = self._by_record, self._inner, tokens.get
        now_record, by_key, by_id, by_print = run.by_record, run.by_key, run.by_id, run.by_print
        spend, reused = meter.spend, 0
        for k, ins in enumerate(main):
            if ins.is_return():
                break
            where.ins = ins
            rec = None if recs is None else recs[k]
            same = None if rec is None else by_record.get(rec.id)
            if same is not None and same[0] is rec:
                toks = tuple(map(tget, rec.inputs))
                if None in toks:
                    toks = _marks(toks, rec.inputs, pending)
                if same[1] != toks or not (same[2] == () or self._same_modules(same[2], ins, run)):
                    same = None
            else:
                same = None
            if same is not None:
                # The very record of the version before, on inputs of the same values
                # (the record's input ids, in order): its key and value are the ones it had.
                key, hit, work = same[3], same[4], same[5]
                spend(where, work)
                if hit is not None:
                    rid = rec.id
                    now_record[rid] = same
                    if same[6]:  # not a param or literal
                        reused += 1
                        inner = inner_before.get(key)
                        if inner:
                            run.carry(key, inner)
                    by_key[key] = by_id[rid] = hit
                    if hit[2] not in by_print:
                        by_print[hit[2]] = hit
                    tokens[rid], values[rid] = hit[0], hit[1]
                    continue
                # pending when the version before ended (nothing read it): its key as it was
            else:
                work = arithmetic(ins)
                spend(where, work)
                key = self._key(ins, tokens, run.module_keys)
            hit = run.by_key.get(key) or self._by_key.get(key)
            if hit is None:
                if ins.is_param():
                    value = params[ins.id]
                elif ins.is_literal():
                    value = ins.literal.data
                else:
                    # the same key as one still pending (a second zero buffer): its value
                    first = waiting.setdefault(key, ins.id)
                    pending[ins.id] = (ins, key, rec, work, None if first == ins.id else first)
                    continue
                hit = self._token(ins, value)
            elif not (ins.is_param() or ins.is_literal()):
                run.stats.reused += 1
                run.carry(key, self._inner.get(key, ()))
            run.keep(key, ins.id, hit)
            if rec is not None:
                _keep_entry(run, rec, ins, tokens, pending, key, hit, work)
            tokens[ins.id], values[ins.id] = hit[0], hit[1]
        run.stats.reused += reused
        outs = main.output_instructions()
        outputs = [values[o.id] for o in outs]
        self._output_tokens = [tokens[o.id] for o in outs]
        run.stats.unread = len(pending)
        for ins, key, rec, work, _ in pending.values():  # never read: unchanged next version, still pending
            if rec is not None:
                _keep_entry(run, rec, ins, tokens, pending, key, None, work)
        # drop what this version lacks
        self._by_key, self._by_id, self._by_print, self.last = run.by_key, run.by_id, run.by_print, run.stats
        self._inner, self._modules, self._records = run.inner, run.module_keys.now, run.module_keys.records
        self._by_record = run.by_record
        return outputs

    def _finish(self, entry: tuple, tokens: _OnRead, values: _OnRead, run: _Run, pending: dict) -> None:
        """Compute a pending main instruction (its inputs first, where they are pending too)."""
        ins, key, rec, work, same = entry
        # forced while another computes (its input): that one's submodule entries are its own
        saved, run.collect = run.collect, None
        if same is not None:  # what the first of its key computes (computed here if still pending)
            hit = (tokens[same], values[same], run.by_id[same][2])
            run.stats.reused += 1
        else:
            run.inner[key] = run.collect = []  # what its submodules compute, for reuse
            value = self._compute(ins, values, tokens, run)
            run.collect = None
            run.stats.computed += 1
            hit = self._token(ins, value)
        run.keep(key, ins.id, hit)
        if rec is not None:
            _keep_entry(run, rec, ins, tokens, pending, key, hit, work)
        tokens[ins.id], values[ins.id] = hit[0], hit[1]
        run.collect = saved

    @staticmethod
    def _same_modules(before: tuple | None, ins: Instruction, run: _Run) -> bool:
        """Whether `ins`'s submodules are the very leaf module records they were in the version
        before (main's entry, kept by stable id: the snapshot record it was rebuilt from, its
        input tokens, these, its key, value and work). None: not leaf modules, never the same."""
        if before is None:
            return False
        srcs = _leaf_sources(ins)
        if srcs is None or len(srcs) != len(before) or any(a is not b for a, b in zip(srcs, before)):
            return False
        for m in ins.module_inputs:  # their structures stay known to the next version
            run.module_keys(m)
        return True

    def _token(self, ins: Instruction, value: Any) -> tuple:
        """(token, value, fingerprint) of a computed value: the old token where the value is the
        one stored before (what depends on it is unchanged), with this version's array."""
        fp = fingerprint(value)
        same = self._as_before(ins, value, fp)
        return (same[0] if same else next(self._tokens), value, fp)

    def _compute(self, ins: Instruction, values: _OnRead, tokens: _OnRead, run: _Run) -> Any:
        """ins's value: finished from a stored value of its first part where there is one (a fused
        GEMM's product: only the epilogue then runs, and inputs only the part read, such as a
        convolution's columns, stay uncomputed), else its compute; either way its submodules run
        through the memo too (_MemoRunner)."""
        split = value_split(ins)
        if split is not None:
            part, part_shape, finish = split
            key = make_key(ins, part, part_shape, tokens, run.module_keys)
            hit = run.by_key.get(key) or self._by_key.get(key)
            if hit is not None:
                run.stats.finished += 1
                known = {id(values[i.id]): tokens[i.id] for i in ins.inputs if i.id in values}
                known[id(hit[1])] = hit[0]
                return finish(hit[1], _Args(ins, values), _MemoRunner(self, run, ins, known))
        inputs = ins.inputs
        args = [values[i.id] for i in inputs]
        if not ins.module_inputs:  # nothing to run through the memo
            return run_instruction(ins, args, True, run.budget)
        known = {id(v): tokens[i.id] for i, v in zip(inputs, args)}
        return run_instruction(ins, args, True, run.budget, _MemoRunner(self, run, ins, known))

    def run_module(self, run: _Run, module: Module, args: list, check_shapes: bool, known: dict[int, int]) -> list:
        """A submodule's outputs, as compiler.ref.evaluate_module computes them, each instruction
        keyed as in main, so a fused body reuses the values the unfused ops computed. `known`: the
        tokens of `args`, by array identity (an arg without one gets a new token)."""
        params = bind_params(module, args, check_shapes)
        tokens: dict[int, int] = {}
        values: dict[int, Any] = {}
        for p, a in zip(module.params(), args):
            v = params[p.id]
            tok = known.get(id(a))
            # a token names a type, lens and numbers: an arg the binding reshaped or converted is another value
            same = (
                tok is not None and np.shape(v) == np.shape(a) and getattr(v, "dtype", None) == getattr(a, "dtype", 0)
            )
            tokens[p.id], values[p.id] = (tok if same else next(self._tokens)), v
        for ins in module:
            if ins.is_return():
                break
            if ins.is_param():
                continue
            if ins.is_literal():
                key = self._key(ins, tokens, run.module_keys)
                hit = run.by_key.get(key) or self._by_key.get(key) or self._token(ins, ins.literal.data)
            else:
                a = [values[i.id] for i in ins.inputs]
                key = self._body_key(ins, a, tokens, run, check_shapes)
                hit = None if key is None else run.by_key.get(key) or self._by_key.get(key)
                if hit is None:
                    run.meter.spend(lambda ins=ins: f"module {module.name}: {ins.name} (#{ins.id})", arithmetic(ins))
                    inner = _MemoRunner(self, run, ins, {id(v): tokens[i.id] for i, v in zip(ins.inputs, a)})
                    hit = self._token(ins, run_instruction(ins, a, check_shapes, run.budget, inner))
                else:
                    run.stats.inside += 1
            if key is not None:
                run.keep(key, ins.id, hit)
            tokens[ins.id], values[ins.id] = hit[0], hit[1]
        return [values[o.id] for o in module.output_instructions()]

    def _body_key(self, ins: Instruction, args: list, tokens: dict[int, int], run: _Run, check: bool) -> tuple | None:
        """A submodule instruction's key, as in main. Where the params are scalar-shaped (a
        pointwise body fed whole tensors, `check` off) only elementwise ops are keyed, on the lens
        they are fed (their compute reads its inputs, never the output's lens); None: computed."""
        if check:
            return self._key(ins, tokens, run.module_keys)
        if not ins.op.spec.has("pointwise") or ins.module_inputs or ins.shape.is_tuple:
            return None
        lens = np.broadcast_shapes(*(np.shape(a) for a in args))
        return make_key(ins, value_key(ins), (ins.shape.type, lens), tokens, run.module_keys)

    def _as_before(self, ins: Instruction, value: Any, fp: tuple) -> tuple | None:
        """A previous value that is the same bit for bit: this instruction's, one it came from, or
        any with the same fingerprint (an output buffer now a parameter, still zeros)."""
        for stable in (ins.id, *ins.origin):
            prev = self._by_id.get(stable)
            if prev is not None and prev[2] == fp and identical(prev[1], value):
                return prev
        prev = self._by_print.get(fp)
        return prev if prev is not None and identical(prev[1], value) else None


_SERIALS = itertools.count()


class _Run:
    """One evaluation's state: the values it keeps for the next (by key, by stable id and by
    fingerprint), its submodules' keys, its counts and its work meter."""

    def __init__(self, meter: Any, modules_before: dict, counter: Iterator[int], records_before: dict):
        self.meter = meter
        self.budget = memory_budget()  # read once: from the environment, per instruction it showed
        self.stats = EvalStats()
        self.by_key: dict[tuple, tuple] = {}
        self.by_id: dict[int, tuple] = {}
        self.by_print: dict[tuple, tuple] = {}
        self.module_keys = ModuleTokens(modules_before, counter, records_before)
        self.inner: dict[tuple, list] = {}
        self.collect: list | None = None  # where the submodule entries of the instruction computing go
        self.by_record: dict[int, tuple] = {}

    def keep(self, key: tuple, stable: int, hit: tuple) -> None:
        self.by_key[key] = self.by_id[stable] = hit
        self.by_print.setdefault(hit[2], hit)
        if self.collect is not None:
            self.collect.append((key, hit))

    def carry(self, key: tuple, inner: list) -> None:
        """Keep the submodule values of a main instruction reused whole: a later version that
        splits or refuses the kernel finds them (a fused GEMM's epilogue, the body once fused)."""
        if inner:
            self.inner[key] = inner
            for k, hit in inner:
                self.by_key.setdefault(k, hit)


class _MemoRunner(SubmoduleRunner):
    """The SubmoduleRunner of one instruction's compute: its submodules (a fused body, an
    epilogue) run through the evaluator's memo; `known`: the tokens of the values it was given,
    by array identity."""

    __slots__ = ("evaluator", "run", "known")

    def __init__(self, evaluator: IncrementalEvaluator, run: _Run, ins: Instruction, known: dict[int, int]):
        super().__init__(ins)
        self.evaluator, self.run, self.known = evaluator, run, known

    def __call__(self, module: Module, args: Sequence[np.ndarray], check_shapes: bool | None = None) -> list:
        check = (not module.bypass) if check_shapes is None else check_shapes
        if isinstance(args, Mapping):  # named feeds (select_module): in the module's param order
            args = [args[p.param_name] for p in module.params()]
        return self.evaluator.run_module(self.run, module, list(args), check, self.known)


def _records(main: Module) -> tuple | None:
    """The snapshot records main was rebuilt from, one per instruction in order, while it is
    unedited since (compiler/snapshot.py's to_program); None otherwise."""
    src = rebuilt_record(main)
    if src is None or len(src.instrs) != len(main):
        return None
    return src.instrs


class _Args(Sequence):
    """An instruction's argument values, each computed when first read (a finish that reads only
    some of them leaves the others pending)."""

    def __init__(self, ins: Instruction, values: _OnRead):
        self._ids, self._values = [i.id for i in ins.inputs], values

    def __len__(self) -> int:
        return len(self._ids)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return [self._values[i] for i in self._ids[k]]
        return self._values[self._ids[k]]


class _Where:
    """Names the instruction the work meter charges, formatted only when the budget runs out."""

    __slots__ = ("module", "ins")

    def __init__(self, module: str):
        self.module, self.ins = module, None

    def __call__(self) -> str:
        return f"module {self.module}: {self.ins.name} (#{self.ins.id})"


class _OnRead(dict):
    """main's tokens or values by id: reading one of a pending instruction computes it first."""

    force: Any = None

    def __missing__(self, i: int) -> Any:
        self.force(i)
        return self[i]


def _keep_entry(
    run: _Run, rec: Any, ins: Instruction, tokens: dict, pending: dict, key: tuple, hit: tuple, work: int
) -> None:
    """main's entry for the next version's unchanged records: the tokens of its inputs as they
    stand (tokens.get: nothing forced), a pending input's key in place of its token (_marks)."""
    toks = _marks(tuple(map(tokens.get, rec.inputs)), rec.inputs, pending)
    if toks is not None:
        plain = not (ins.is_param() or ins.is_literal())
        run.by_record[rec.id] = (rec, toks, _leaf_sources(ins), key, hit, work, plain)


def _marks(toks: tuple, ids: tuple, pending: dict) -> tuple | None:
    """Input tokens, where one is missing (None) the input's key while it is pending: the key
    fixes the value it would compute, so an instruction whose compute never read it (a kernel's
    output buffer) is found unchanged next version, where the buffer is pending on the same key
    again. None where an input has neither."""
    if None not in toks:
        return toks
    out = []
    for t, i in zip(toks, ids):
        if t is None:
            entry = pending.get(i)
            if entry is None:
                return None
            t = ("@pending", entry[1])
        out.append(t)
    return tuple(out)


def _leaf_sources(ins: Instruction) -> tuple | None:
    """The snapshot records of `ins`'s submodules where each is a leaf module unedited since its
    rebuild (its record then fixes what it computes); None where one is not."""
    if not ins.module_inputs:
        return ()
    out = []
    for m in ins.module_inputs:
        src = rebuilt_record(m)
        if src is None or src.sub_refs:
            return None
        out.append(src)
    return tuple(out)


__all__ = ["EvalStats", "IncrementalEvaluator"]
