"""Passes and pipelines as small data.

A pass is a frozen dataclass: its class attribute `name` is the pass name, its fields are its
options, and it implements one of
    apply_module(self, module, ctx)   called for every non-bypass module, submodules first
    apply_program(self, program, ctx) called once, after the per-module walk
where `ctx` (a `PassContext`) lets a pass run nested passes (recorded as children in the trace),
create modules, and reach the program. Passes never print or time themselves: the PassManager
owns instrumentation, validation and toggles.

Ordering constraints (pass_infra/ordering.py) are declared on the pass class:
    must_follow  = ("split_single_dyn_dim",)  run after these when they are in the pipeline
    requires     = ("auto_contiguous",)       these must have run (enabled) earlier
and, for one position in a pipeline, on the entry: `PassEntry(final=True)` means nothing may run
after it (MIGraphX's last eliminate_identity, after which not even DCE may run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..pattern_rewriter import PatternRewriter
from .provenance import Provenance, provenance

if TYPE_CHECKING:  # pragma: no cover
    from ..ir import Module, Program


class PassContext:
    """What a running pass may use besides its module: nested passes, module creation, the program,
    and the rewriter to apply rules with (it records each application into the pass's trace
    record). The pass manager makes one per run; `run_nested` runs a pass as a child of this one."""

    def __init__(
        self, program: Program, module: Module | None, run_nested: Callable[[Pass], bool], rewriter: PatternRewriter
    ):
        self.program = program
        self.module = module
        self.rewriter = rewriter
        self._run_nested = run_nested

    def run_pass(self, p: Pass) -> bool:
        """Run a nested pass (recorded as a child). Inside apply_module it runs on this module only."""
        return self._run_nested(p)

    def run_passes(self, passes: Iterable[Pass]) -> bool:
        """Run nested passes in order (each recorded as a child); True if any changed the IR.
        Composite passes (optimize_module, fuse_pointwise_reduce, ...) are built from this."""
        changed = False
        for p in passes:
            changed = self.run_pass(p) or changed
        return changed

    def create_module(self, name: str) -> Module:
        return self.program.create_module(name)

    def unique_module_name(self, prefix: str) -> str:
        return self.program.unique_module_name(prefix)


def rewriter_of(ctx: PassContext | None) -> PatternRewriter:
    """The rewriter a pass applies its rules with: the manager's (recording) one, or, for a pass
    applied by hand with no context, one that records nothing."""
    return ctx.rewriter if ctx is not None else PatternRewriter()


@dataclass(frozen=True)
class Pass:
    name: ClassVar[str] = "pass"
    must_follow: ClassVar[tuple[str, ...]] = ()
    requires: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def registry_name(cls) -> str | None:
        """The name `make_pass` finds this class by: its `name`, or `registered_as` for a pass
        whose name is per instance (a property); None for a base that names no pass."""
        key = cls.__dict__.get("registered_as", cls.__dict__.get("name"))
        return key if isinstance(key, str) else None

    def apply_module(self, module: Module, ctx: PassContext) -> bool | None:  # pragma: no cover
        raise NotImplementedError

    def apply_program(self, program: Program, ctx: PassContext) -> bool | None:  # pragma: no cover
        raise NotImplementedError

    @classmethod
    def walks_modules(cls) -> bool:
        return cls.apply_module is not Pass.apply_module

    @classmethod
    def has_program_step(cls) -> bool:
        return cls.apply_program is not Pass.apply_program

    def options(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def non_default_options(self) -> dict[str, Any]:
        out = {}
        for f in dataclasses.fields(self):
            default = (
                f.default
                if f.default is not dataclasses.MISSING
                else (f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING)
            )
            v = getattr(self, f.name)
            if v != default:
                out[f.name] = v
        return out

    def with_options(self, **kw: Any) -> Pass:
        known = {f.name for f in dataclasses.fields(self)}
        bad = [k for k in kw if k not in known]
        if bad:
            from ..errors import MigxError

            raise MigxError(
                f"pass {self.name}: unknown option(s) {', '.join(bad)}; valid: {', '.join(sorted(known)) or 'none'}"
            )
        return dataclasses.replace(self, **kw)

    def describe(self) -> str:
        opts = self.non_default_options()
        return self.name + ("{" + ",".join(f"{k}={v}" for k, v in opts.items()) + "}" if opts else "")

    @classmethod
    def provenance(cls) -> Provenance:
        """How the pass relates to MIGraphX's pass of the same name (pass_infra/provenance.py)."""
        return provenance(cls.registry_name() or "")

    @classmethod
    def info(cls) -> dict[str, Any]:
        """What the explorer and `migx-explore passes` show about the pass: its status and note,
        MIGraphX's source file, and how it fares on MIGraphX's own unit tests (None where the
        conformance suite has no case for it; docs/migraphx_conformance.md has the details)."""
        from .conformance import pass_conformance

        name = cls.registry_name() or ""
        row = cls.provenance()
        return {
            "name": name,
            "status": row.status,
            "note": row.note,
            "migraphx_source": row.source,
            "conformance": pass_conformance(name) if name else None,
        }


@dataclass(frozen=True)
class FunctionPass(Pass):
    """Wrap a plain function `f(module)` (or `f(module, ctx)`) as a pass, for notebook prototyping."""

    fn: Any = None
    label: str = "user_pass"

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.label

    def apply_module(self, module, ctx):
        import inspect

        n = len(inspect.signature(self.fn).parameters)
        return self.fn(module, ctx) if n >= 2 else self.fn(module)

    def describe(self) -> str:
        return self.label

    def non_default_options(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class NotApplicable(Pass):
    """Base of a pass that stands for a MIGraphX pass with no counterpart here (an AMD library or
    rocMLIR step). It is registered so the pipeline shows it by name with its provenance note as
    the reason (status "disabled" in pass_infra/provenance.py);
    pipelines keep it switched off, and force-enabling it fails with that reason rather than
    silently doing nothing."""

    def apply_program(self, program: Program, ctx: PassContext) -> bool:
        from ..errors import MigxError

        raise MigxError(f"{self.name} does not apply to migx-explore: {self.provenance().note}")


@dataclass
class PassEntry:
    """One position in a pipeline. Disabled entries stay in the pipeline (and in traces)."""

    pass_: Pass
    enabled: bool = True
    reason: str = ""  # why disabled (shown by the explorer and `migx-explore passes`)
    user: bool = False  # inserted by the user (not part of the target's pipeline)
    final: bool = False  # nothing may run after this entry (ordering constraint)

    @property
    def name(self) -> str:
        return self.pass_.name


@dataclass
class Pipeline:
    name: str
    entries: list[PassEntry] = field(default_factory=list)
    enabled: bool = True
    doc: str = ""

    def names(self) -> list[str]:
        return [e.name for e in self.entries]

    def copy(self) -> Pipeline:
        return Pipeline(self.name, [dataclasses.replace(e) for e in self.entries], self.enabled, self.doc)


def pipeline(name: str, items: Iterable[Pass | PassEntry], doc: str = "") -> Pipeline:
    return Pipeline(name, [i if isinstance(i, PassEntry) else PassEntry(i) for i in items], True, doc)


def disabled(p: Pass, reason: str) -> PassEntry:
    return PassEntry(p, enabled=False, reason=reason)
