"""What XLA plans for a step on a GPU or TPU this machine does not have: one compile per target and
policy, read back as a :class:`Plan`.

The contract (the page "Will it fit?" and a reader's own step use it)::

    import jax, jax.numpy as jnp
    from jax.sharding import PartitionSpec as P
    from examples.tools.plans import NO_REMAT, compile_plan, plan, largest_batch

    def make_step(policy):                     # the reader's step, the policy a parameter
        def loss(w, x):
            layer = lambda h, wi: (jnp.tanh(h @ wi), None)
            if policy is not NO_REMAT:
                layer = jax.checkpoint(layer, policy=policy)
            return jax.lax.scan(layer, x, w)[0].sum()
        return jax.grad(loss)

    w = jax.ShapeDtypeStruct((8, 4096, 4096), jnp.bfloat16)
    x = jax.ShapeDtypeStruct((65536, 4096), jnp.bfloat16)
    one = compile_plan(make_step(NO_REMAT), w, x, target="tpu-v5e:2x2", in_specs=(P(), P("fsdp")))
    plans = plan(make_step, w, x, targets=["h100-80gb x8", "tpu-v5e:2x2"],
                 policies={"no remat": NO_REMAT,
                           "nothing_saveable": jax.checkpoint_policies.nothing_saveable},
                 in_specs=(P(), P("fsdp")))
    plans.table()        # a examples.tools.display.Table; plans.plans is the list of Plans
    best = largest_batch(lambda b: (w, jax.ShapeDtypeStruct((b, 4096), jnp.bfloat16)),
                         make_step, NO_REMAT, "tpu-v5e:2x2", lo=8, hi=1 << 20, multiple_of=4,
                         in_specs=(P(), P("fsdp")))
    best.batch, best.fit, best.fail  # the answer, its Plan, and the Plan one step up

``args`` are :class:`jax.ShapeDtypeStruct` or concrete arrays: only their shape and dtype are
used, nothing is copied to a device. ``in_specs`` is a pytree of
:class:`~jax.sharding.PartitionSpec` (``None``: replicated) matched to ``args`` as a prefix;
each becomes a :class:`~jax.sharding.NamedSharding` on a :class:`~jax.sharding.Mesh` of the
target's devices with axes ``mesh_axes`` (one axis by default, ``"fsdp"``, over every device;
pass ``mesh_shape`` for more axes).

What a :class:`Plan` holds (per device; the compiler's plan for the executable it would run,
not a measured peak):

- bytes from ``memory_analysis()``. :attr:`Plan.total_bytes` is arguments + outputs +
  temporaries - aliased (MaxText's "Total memory size"). ``fits`` compares it (on a TPU, the
  compiler's own ``peak_memory_in_bytes``, which that compiler refuses by) with a budget: the
  target's :attr:`~examples.tools.targets.Target.budget_bytes` unless ``budget=`` gives another.
- FLOPs and bytes accessed, the compiler's count (:mod:`examples.tools.plan_flops`: the body
  of a scan over layers counted once; :attr:`Plan.cost_source` says which cost model).
- collectives counted in the compiled HLO text (a ``-start``/``-done`` pair once; one inside a
  loop body once).
- :attr:`Plan.error`: the TPU compiler's refusal (``CompileTimeHbmOom``) as an
  :class:`OutOfMemory`, message verbatim; XLA's GPU compiler returns a plan over memory
  instead. Any other compile error propagates. :attr:`Plan.log`: XLA's warning lines ("Can't
  reduce memory use below ... by rematerialization"); :attr:`Plan.compiler_options`.

Records: :meth:`Plans.as_dict` / :meth:`Plans.from_dict` (schema ``jax-remat-guide/plans/1``,
naming the machine, every version and each GPU spec); :mod:`examples.tools.plan_records`
writes and checks them (``nox -s plans``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from examples.tools import compat
from examples.tools.display import Align, Table, format_bytes
from examples.tools.plan_flops import compiled_costs
from examples.tools.targets import (
    OutOfMemory,
    Target,
    count_collectives,
    devices,
    machine,
    xla_log,
)
from examples.tools.targets import target as find_target

#: The policy value that means "no jax.checkpoint at all" (labelled "no remat").
NO_REMAT: None = None
SCHEMA = "jax-remat-guide/plans/1"
#: The collectives counted in the compiled HLO text.


@dataclasses.dataclass(frozen=True)
class Plan:
    """The target compiler's plan for one step and one policy, per device."""

    target: str
    label: str
    device_kind: str
    device_count: int
    memory_bytes: int  #: one device's memory (the target's)
    temp_bytes: int | None
    argument_bytes: int | None
    output_bytes: int | None
    alias_bytes: int | None
    generated_code_bytes: int | None
    host_temp_bytes: int | None
    peak_bytes: int | None  #: ``peak_memory_in_bytes`` where the jaxlib reports it
    flops: float | None
    bytes_accessed: float | None
    cost_source: str | None  #: ``"compiled"``, ``"compiled HLO, XLA's CPU cost analysis"``
    collectives: dict[str, int]
    compile_seconds: float
    error: OutOfMemory | None = None
    #: the memory the plan is judged against (:attr:`Target.budget_bytes`, or the caller's)
    budget_bytes: int | None = None
    platform: str = ""  #: the target's platform: ``"cpu"``, ``"cuda"`` or ``"tpu"``
    #: XLA options the compile was given (``{"xla_disable_hlo_passes": "rematerialization"}``)
    compiler_options: dict[str, str] = dataclasses.field(default_factory=dict)
    #: what XLA logged while compiling (its warnings and errors, e.g. "Can't reduce memory use
    #: below ... by rematerialization"), where the compile captured it
    log: list[str] = dataclasses.field(default_factory=list)

    @property
    def total_bytes(self) -> int | None:
        """Arguments + outputs + temporaries - aliased (MaxText's "Total memory size")."""
        parts = (self.argument_bytes, self.output_bytes, self.temp_bytes, self.alias_bytes)
        if any(p is None for p in parts):
            return None
        arguments, outputs, temps, aliased = (int(p or 0) for p in parts)
        return arguments + outputs + temps - aliased

    @property
    def judged_bytes(self) -> int | None:
        """What is compared with the budget: on a TPU the compiler's own peak (it refuses by
        that figure), elsewhere :attr:`total_bytes`."""
        if self.platform == "tpu" and self.peak_bytes is not None:
            return self.peak_bytes
        return self.total_bytes

    @property
    def budget(self) -> int:
        return self.memory_bytes if self.budget_bytes is None else self.budget_bytes

    @property
    def fits(self) -> bool:
        """The compiler returned a plan and :attr:`judged_bytes` is within :attr:`budget`."""
        judged = self.judged_bytes
        return self.error is None and judged is not None and judged <= self.budget

    @property
    def xla_remat_off(self) -> bool:
        """Compiled with XLA's own rematerialization pass disabled."""
        return "rematerialization" in self.compiler_options.get("xla_disable_hlo_passes", "")

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["total_bytes"] = self.total_bytes
        data["fits"] = self.fits
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plan:
        names = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in data.items() if k in names}
        if fields.get("error") is not None:
            fields["error"] = OutOfMemory(**fields["error"])
        if "platform" not in fields or "budget_bytes" not in fields:  # a record from before both
            try:
                t = find_target(fields["target"])
            except KeyError:
                t = None
            fields.setdefault("platform", "" if t is None else t.platform)
            if t is not None and fields.get("memory_bytes") == t.memory_bytes:
                fields.setdefault("budget_bytes", t.budget_bytes)
        return cls(**fields)


def _mesh(t: Target, mesh_axes: Sequence[str], mesh_shape: Sequence[int] | None) -> Mesh:
    devs = devices(t)
    shape = tuple(mesh_shape) if mesh_shape is not None else (len(devs),)
    if len(shape) != len(mesh_axes):
        raise ValueError(
            f"mesh_axes {tuple(mesh_axes)} need a mesh_shape of {len(mesh_axes)} sizes "
            f"(the product {len(devs)}, the devices of {t.name!r}); got {shape}"
        )
    if int(np.prod(shape)) != len(devs):
        raise ValueError(
            f"mesh_shape {shape} holds {np.prod(shape)} devices; {t.name!r} has {len(devs)}"
        )
    return Mesh(np.array(devs, dtype=object).reshape(shape), tuple(mesh_axes))


def _is_spec(x: Any) -> bool:
    return x is None or isinstance(x, PartitionSpec)


def _abstract(args: Any, in_specs: Any, mesh: Mesh) -> Any:
    """``args`` as ShapeDtypeStructs sharded by ``in_specs`` on ``mesh``; nothing is copied."""

    def leaf(x: Any, spec: PartitionSpec | None) -> jax.ShapeDtypeStruct:
        if not (hasattr(x, "shape") and hasattr(x, "dtype")):
            x = np.asarray(x)  # a Python scalar: its shape and dtype only
        dtype = x.dtype
        if isinstance(dtype, np.dtype):  # float64 -> float32 unless x64 is on, as jax.jit does
            dtype = jax.dtypes.canonicalize_dtype(dtype)
        return jax.ShapeDtypeStruct(
            x.shape, dtype, sharding=NamedSharding(mesh, spec or PartitionSpec())
        )

    if in_specs is None:
        return jax.tree.map(lambda x: leaf(x, None), args)
    try:
        return jax.tree.map(
            lambda spec, sub: jax.tree.map(lambda x: leaf(x, spec), sub),
            in_specs,
            args,
            is_leaf=_is_spec,
        )
    except ValueError as error:
        raise ValueError(
            f"in_specs must match the arguments' structure (a PartitionSpec or None for each "
            f"argument, or for a whole subtree): {error}"
        ) from error


def compile_plan(
    fn: Callable[..., Any],
    *args: Any,
    target: str | Target,
    label: str = "",
    in_specs: Any = None,
    out_specs: Any = None,
    mesh_axes: Sequence[str] = ("fsdp",),
    mesh_shape: Sequence[int] | None = None,
    donate_argnums: int | Sequence[int] = (),
    memory_bytes: int | None = None,
    budget: float | int | None = None,
    compiler_options: Mapping[str, str] | None = None,
) -> Plan:
    """Compile ``jax.jit(fn)`` for ``target`` on abstract ``args`` and read the compiler's plan.

    ``budget`` is what ``fits`` compares the plan with: a float is a share of the device's
    memory (``0.7`` leaves 30% free), an int a number of bytes; by default the target's
    :attr:`~examples.tools.targets.Target.budget_bytes` (the compiler's own limit: 80% of a
    GPU's memory, the TPU compiler's available HBM). ``memory_bytes`` replaces the target's
    device memory (a test's small limit, or a device with less free memory); given alone, it is
    the budget too. ``compiler_options`` go to ``Lowered.compile`` (XLA's debug options, e.g.
    ``{"xla_disable_hlo_passes": "rematerialization"}``). A compiler out-of-memory error becomes
    a Plan whose ``error`` holds it; any other error propagates.
    """
    t = find_target(target)
    mesh = _mesh(t, mesh_axes, mesh_shape)
    abstract = _abstract(args, in_specs, mesh)
    jit_kwargs: dict[str, Any] = {"donate_argnums": donate_argnums}
    if out_specs is not None:
        jit_kwargs["out_shardings"] = jax.tree.map(
            lambda s: NamedSharding(mesh, s or PartitionSpec()), out_specs, is_leaf=_is_spec
        )
    start = time.perf_counter()
    lowered = jax.jit(fn, **jit_kwargs).lower(*abstract)
    memory: Any = None
    error: OutOfMemory | None = None
    costs: tuple[float | None, float | None, str | None] = (None, None, None)
    collectives: dict[str, int] = {}
    options = dict(compiler_options or {})
    log: list[str] = []
    try:
        with xla_log(log):
            compiled = lowered.compile(options) if options else lowered.compile()
    except Exception as raised:
        error = OutOfMemory.parse(str(raised))
        if error is None:
            raise
    else:
        memory = compiled.memory_analysis()
        if memory is None:
            raise RuntimeError(f"the {t.platform} compiler reports no memory analysis")
        costs = compiled_costs(compiled)
        collectives = count_collectives(compiled.as_text() or "")
    seconds = time.perf_counter() - start

    def field(name: str) -> int | None:
        return None if memory is None else compat.memory_field(memory, name)

    memory_total = t.memory_bytes if memory_bytes is None else memory_bytes
    if isinstance(budget, float):
        budget_bytes = int(memory_total * budget)
    elif budget is not None:
        budget_bytes = int(budget)
    else:
        budget_bytes = memory_total if memory_bytes is not None else t.budget_bytes

    return Plan(
        target=t.name,
        label=label,
        device_kind=mesh.devices.flat[0].device_kind,
        device_count=t.device_count,
        memory_bytes=memory_total,
        temp_bytes=field("temp_size_in_bytes"),
        argument_bytes=field("argument_size_in_bytes"),
        output_bytes=field("output_size_in_bytes"),
        alias_bytes=field("alias_size_in_bytes"),
        generated_code_bytes=field("generated_code_size_in_bytes"),
        host_temp_bytes=field("host_temp_size_in_bytes"),
        peak_bytes=field("peak_memory_in_bytes"),
        flops=costs[0],
        bytes_accessed=costs[1],
        cost_source=costs[2],
        collectives=collectives,
        compile_seconds=seconds,
        error=error,
        budget_bytes=budget_bytes,
        platform=t.platform,
        compiler_options=options,
        log=log,
    )


def policy_label(label: str, policy: Any) -> str:
    return label or ("no remat" if policy is NO_REMAT else getattr(policy, "__name__", str(policy)))


@dataclasses.dataclass
class Plans:
    """Plans of one step over targets and policies; a cell that returns it shows its table."""

    plans: list[Plan]

    def table(self, caption: str | None = None) -> Table:
        rows = []
        for p in self.plans:
            verdict = "fits" if p.fits else "over budget"
            if p.error is not None:
                verdict = "compiler: out of memory" + (
                    f" ({format_bytes(p.error.required_bytes)} needed)"
                    if p.error.required_bytes
                    else ""
                )
            rows.append([
                p.target, p.label, _bytes(p.temp_bytes), _bytes(p.argument_bytes),
                _bytes(p.total_bytes), _bytes(p.peak_bytes), format_bytes(p.budget), verdict,
                "" if p.flops is None else f"{p.flops / 1e9:,.1f}",
            ])  # fmt: skip
        header = ["target", "policy", "temporaries", "arguments", "total", "compiler's peak",
                  "budget", "fits?", "compiler's GFLOPs"]  # fmt: skip
        align: list[Align] = ["left", "left", "right", "right", "right", "right", "right",
                              "left", "right"]  # fmt: skip
        if caption is None:
            caption = (
                "Plans, per device: each compiler's memory_analysis(); fits? judges the total "
                "(on a TPU, the compiler's peak) against the target's budget; GFLOPs: the "
                "compiler's count, a scanned loop's body once"
            )
        return Table(header, rows, align=align,
                     caption=caption)  # fmt: skip

    def get(self, target_name: str, label: str) -> Plan:
        for p in self.plans:
            if p.target == find_target(target_name).name and p.label == label:
                return p
        raise KeyError(f"no plan for {target_name!r} with {label!r}")

    def _repr_markdown_(self) -> str:
        return self.table().to_markdown()

    def __repr__(self) -> str:
        return self.table().to_text()

    def as_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "runinfo": machine(), "plans": [p.as_dict() for p in self.plans]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Plans:
        return cls([Plan.from_dict(p) for p in data["plans"]])


def _bytes(n: int | None) -> str:
    return "n/a" if n is None else format_bytes(n)


def plan(
    make_step: Callable[[Any], Callable[..., Any]],
    *args: Any,
    targets: Sequence[str | Target],
    policies: Mapping[str, Any],
    **kwargs: Any,
) -> Plans:
    """:func:`compile_plan` of ``make_step(policy)`` for every target and policy (``kwargs`` go
    to it): one row per target and policy, in that order."""
    return Plans(
        [
            compile_plan(make_step(policy), *args, target=t, label=label, **kwargs)
            for t in targets
            for label, policy in policies.items()
        ]
    )


@dataclasses.dataclass
class BatchSearch:
    """The largest batch that fits, found by compiling: every compile is kept as evidence."""

    target: str
    label: str
    batch: int | None  #: the largest batch that fits; None if even ``lo`` does not
    fit: Plan | None  #: the plan at ``batch``
    fail: Plan | None  #: the plan at the next batch up (None if ``hi`` fits)
    fail_batch: int | None
    tried: dict[int, Plan]


def largest_batch(
    make_args: Callable[[int], Sequence[Any]],
    make_step: Callable[[Any], Callable[..., Any]],
    policy: Any,
    target: str | Target,
    lo: int,
    hi: int,
    *,
    multiple_of: int = 1,
    label: str = "",
    **kwargs: Any,
) -> BatchSearch:
    """Bisect over batches ``lo..hi`` (multiples of ``multiple_of``) for the largest whose plan
    fits, assuming a larger batch never needs less memory. ``make_args(batch)`` gives the step's
    arguments; ``kwargs`` go to :func:`compile_plan` (``in_specs``, ``memory_bytes``, ...)."""
    if lo < multiple_of or lo % multiple_of or hi % multiple_of or hi < lo:
        raise ValueError(
            f"need multiple_of <= lo <= hi, both multiples of {multiple_of}; got lo={lo}, hi={hi}"
        )
    step = make_step(policy)
    name = policy_label(label, policy)
    tried: dict[int, Plan] = {}

    def fits(batch: int) -> bool:
        if batch not in tried:
            tried[batch] = compile_plan(
                step, *make_args(batch), target=target, label=name, **kwargs
            )
        return tried[batch].fits

    t = find_target(target).name
    if not fits(lo):
        return BatchSearch(t, name, None, None, tried[lo], lo, tried)
    if fits(hi):
        return BatchSearch(t, name, hi, tried[hi], None, None, tried)
    good, bad = lo // multiple_of, hi // multiple_of  # good fits, bad does not
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fits(mid * multiple_of) else (good, mid)
    best, above = good * multiple_of, bad * multiple_of
    return BatchSearch(t, name, best, tried[best], tried[above], above, tried)
