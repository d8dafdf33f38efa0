"""Where JAX releases differ, in one place: the package's only release-dependent code.

The package supports every JAX from its lower bound in ``pyproject.toml`` to the newest (the
release matrix, ``nox -s tests-jax``, runs its tests on each). What differs between those
releases, and is handled here:

- **Residual descriptions.** ``jax.ad_checkpoint.print_saved_residuals`` words the same saved
  value differently across releases. Before JAX looked through the ``reduce_precision`` that a
  checkpoint inserts after each value it keeps (JAX PR 22244), a kept matrix product was listed
  as ``output of reduce_precision``; and older releases also called the *input* of a
  ``checkpoint_name`` "named". :func:`saved_residuals` traces exactly as the installed JAX does
  and describes the result the way the newest releases do, so the package's structured
  listings (:mod:`examples.tools.residuals`) mean the same on every release;
  :func:`jax_saved_residuals` is JAX's own wording, untouched.
- **Memory spaces.** Newer releases put the memory space in the abstract value
  (``f32<host>[2,4,8]``, ``aval.memory_space``); older ones only in the ``device_put`` that
  moves a value (``TransferToMemoryKind('pinned_host')``). :func:`device_put_to_host` and the
  ``on_host`` flag of :func:`saved_residuals` read either.
- **The jitted-call primitive** is ``pjit`` on older releases and ``jit`` on newer ones.
- **XLA's analyses**: ``cost_analysis()`` returned a list with one dict per device on some
  jaxlibs and a dict on others; ``memory_analysis()`` gained ``peak_memory_in_bytes`` on newer
  jaxlibs.
- **Compiler options** that are repeated fields of XLA's ``DebugOptions``
  (``xla_disable_hlo_passes``) are refused by ``compile(options)`` on jax 0.5;
  :func:`compile_with_options` sets them there another way.
- **Policies**: the names in ``jax.checkpoint_policies`` grow with the release;
  :func:`checkpoint_policy` says clearly when the installed JAX lacks one.
- **Jaxpr internals**: :func:`bind_equation` evaluates an equation whatever
  ``get_bind_params`` returns; ``jax.extend.core.DropVar`` (an output nobody reads) is public on
  newer releases only (:data:`DropVar`); a ``pallas_call`` equation names its kernel in ``name`` on
  newer releases, in ``name_and_src_info`` or the kernel's debug info on older ones
  (:func:`pallas_kernel_name`).
- **Flax NNX state**: a leaf is read with ``[...]`` on newer Flax and ``.value`` on Flax 0.10
  (:func:`variable_value`).
- **64-bit mode for a block**: ``jax.enable_x64`` on newer releases,
  ``jax.experimental.enable_x64`` on older ones (:func:`enable_x64`).

What changed where, measured release by release, is on the page "Across JAX releases"
(``examples.reference.releases`` collects it).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import jax
from jax.extend import core as jex_core

#: The class of a jaxpr's dropped outputs (printed ``_``), on every release.
DropVar: Any = (
    getattr(jex_core, "DropVar", None) or importlib.import_module("jax._src.core").DropVar
)

#: The primitive a call of a ``jax.jit``-ed function traces to: ``pjit`` before it was
#: renamed, ``jit`` after.
JIT_PRIMITIVE_NAMES = frozenset({"pjit", "jit"})


def jax_version() -> tuple[int, ...]:
    """The installed JAX release as numbers: ``(0, 12, 0, 1)`` for ``0.12.0.1``."""
    return tuple(int(part) for part in jax.__version__.split(".") if part.isdigit())


# --- residuals -----------------------------------------------------------------------------------


def _ad_checkpoint_impl() -> Any:
    try:
        from jax._src import ad_checkpoint
    except ImportError as err:  # pragma: no cover - depends on the installed JAX
        raise ImportError(
            "examples needs jax._src.ad_checkpoint, the module behind "
            f"jax.ad_checkpoint.print_saved_residuals; jax {jax.__version__} does not have it"
        ) from err
    for name in ("saved_residuals", "_saved_residuals"):
        if not hasattr(ad_checkpoint, name):  # pragma: no cover - depends on the installed JAX
            raise ImportError(
                f"jax {jax.__version__} has no jax._src.ad_checkpoint.{name}, which "
                "examples.tools.compat reads residual listings from"
            )
    return ad_checkpoint


def jax_saved_residuals(f: Callable[..., Any], *args: Any, **kwargs: Any) -> list[tuple[Any, str]]:
    """``(aval, description)`` pairs, worded as the installed JAX's ``print_saved_residuals``."""
    listing: list[tuple[Any, str]] = _ad_checkpoint_impl().saved_residuals(f, *args, **kwargs)
    return listing


@contextlib.contextmanager
def _capture_residual_jaxpr(impl: Any) -> Iterator[list[tuple[Any, Sequence[str]]]]:
    """Record the jaxpr and argument names the installed JAX describes residuals from."""
    captured: list[tuple[Any, Sequence[str]]] = []
    original = impl._saved_residuals

    def capture(jaxpr: Any, arg_names: Sequence[str]) -> Any:
        captured.append((jaxpr, arg_names))
        return original(jaxpr, arg_names)

    impl._saved_residuals = capture
    try:
        yield captured
    finally:
        impl._saved_residuals = original


class SavedValue(NamedTuple):
    """One residual: its abstract value, JAX's description, and whether it lives in host memory."""

    aval: Any
    description: str
    on_host: bool


def saved_residuals(f: Callable[..., Any], *args: Any, **kwargs: Any) -> list[SavedValue]:
    """What ``jax.vjp(f, *args, **kwargs)`` keeps, described as the newest JAX releases do.

    The program is traced by the installed JAX's own ``saved_residuals``; only the words
    differ on older releases (see the module's docstring).
    """
    impl = _ad_checkpoint_impl()
    with _capture_residual_jaxpr(impl) as captured:
        listing = impl.saved_residuals(f, *args, **kwargs)
    if len(captured) != 1:  # pragma: no cover - depends on the installed JAX
        raise RuntimeError(
            f"jax {jax.__version__}'s saved_residuals described {len(captured)} programs, not "
            "one; examples.tools.compat does not know this release's residual code"
        )
    described = _describe(*captured[0])
    if len(described) != len(listing):  # pragma: no cover - depends on the installed JAX
        raise RuntimeError(
            f"jax {jax.__version__} lists {len(listing)} residuals where examples.tools.compat "
            f"finds {len(described)}; this release's residual code differs from what it knows"
        )
    return described


def _describe(jaxpr: Any, arg_names: Sequence[str]) -> list[SavedValue]:
    """The residuals (output variables) of ``jaxpr``, in JAX's order and newest wording.

    A ``reduce_precision`` that only re-rounds a value to its own precision is looked through:
    the value it keeps is its operand's.
    """
    from jax._src import source_info_util

    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)  # newer releases hand over a ClosedJaxpr
    literal = jex_core.Literal
    through = {
        eqn.outvars[0]: eqn.invars[0]
        for eqn in jaxpr.eqns
        if eqn.primitive.name == "reduce_precision" and not isinstance(eqn.invars[0], literal)
    }

    def look_through(v: Any) -> Any:
        while v in through:
            v = through[v]
        return v

    kept = {look_through(v) for v in jaxpr.outvars if not isinstance(v, literal)}
    found = [
        SavedValue(v.aval, "from a literal", aval_on_host(v.aval))
        for v in jaxpr.outvars
        if isinstance(v, literal)
    ]
    found += [
        SavedValue(v.aval, "from a constant", aval_on_host(v.aval))
        for v in jaxpr.constvars
        if v in kept
    ]
    for i, v in enumerate(jaxpr.invars):
        if v in kept:
            name = arg_names[i] if i < len(arg_names) else None
            what = f"from the argument {name}" if name else f"from the argument at {i}"
            found.append(SavedValue(v.aval, what, aval_on_host(v.aval)))
    for eqn in jaxpr.eqns:
        for v in eqn.outvars:
            if v not in kept:
                continue
            source = source_info_util.summarize(eqn.source_info)
            name = _checkpoint_name_of(eqn)
            if name is not None:
                what = f"named '{name}' from {source}"
            elif eqn.primitive.name in JIT_PRIMITIVE_NAMES:
                what = f"output of jitted function '{eqn.params['name']}' from {source}"
            else:
                what = f"output of {eqn.primitive.name} from {source}"
            on_host = aval_on_host(v.aval) or device_put_to_host(eqn)
            found.append(SavedValue(v.aval, what, on_host))
    return found


def _checkpoint_name_of(eqn: Any) -> str | None:
    """The name a ``checkpoint_name`` equation gives its value (either remat), else ``None``."""
    if eqn.primitive.name == "name":
        return str(eqn.params["name"])
    # Under jax_remat3, checkpoint_name stages a generic primitive carrying a CheckpointName.
    prim = eqn.params.get("_prim")
    if type(prim).__name__.startswith("CheckpointName"):
        return getattr(prim, "name", None)
    return None


# --- memory spaces -------------------------------------------------------------------------------


def _names_host(space: Any) -> bool:
    """Whether a memory space or kind (``MemorySpace.Host``, ``'pinned_host'``) is the host's."""
    kind = getattr(space, "memory_kind", space)  # TransferToMemoryKind(memory_kind=...)
    return kind is not None and "host" in str(kind).lower()


def aval_on_host(aval: Any) -> bool:
    """Whether an abstract value says it lives in host memory (newer releases only say so)."""
    return _names_host(getattr(aval, "memory_space", None))


def device_put_to_host(eqn: Any) -> bool:
    """Whether ``eqn`` is a ``device_put`` that moves its value to host memory, on any release."""
    if eqn.primitive.name != "device_put":
        return False
    if any(aval_on_host(v.aval) for v in eqn.outvars):
        return True
    return any(_names_host(d) for d in eqn.params.get("devices", ()) if d is not None)


# --- XLA's analyses ------------------------------------------------------------------------------


def cost_analysis(compiled: Any) -> dict[str, Any] | None:
    """XLA's cost analysis of a compiled function as one dict (``None`` where not reported)."""
    cost = compiled.cost_analysis()
    if isinstance(cost, list | tuple):  # one dict per device on some jaxlibs
        cost = cost[0] if cost else None
    return dict(cost) if cost else None


def memory_field(memory: Any, name: str) -> int | None:
    """One field of ``memory_analysis()``, or ``None`` where this jaxlib does not report it."""
    value = getattr(memory, name, None)
    return None if value is None else int(value)


# --- policies ------------------------------------------------------------------------------------


def policy_names() -> list[str]:
    """The public names in ``jax.checkpoint_policies`` of the installed JAX, sorted."""
    policies = jax.checkpoint_policies
    return sorted(
        name
        for name in dir(policies)
        if not name.startswith("_") and not isinstance(getattr(policies, name), type(jax))
    )


def checkpoint_policy(name: str) -> Any:
    """``jax.checkpoint_policies.<name>``, or a clear error where this release lacks it."""
    try:
        return getattr(jax.checkpoint_policies, name)
    except AttributeError:
        raise AttributeError(
            f"jax {jax.__version__} has no jax.checkpoint_policies.{name}; its policies are "
            + ", ".join(policy_names())
            + " (the page 'Across JAX releases' says which release added which)"
        ) from None


# --- jaxpr internals and configuration -------------------------------------------------------


def bind_equation(eqn: Any, invals: Sequence[Any]) -> Any:
    """Apply an equation's primitive to ``invals``, as ``jax.core.eval_jaxpr`` does.

    ``Primitive.get_bind_params`` returns the parameters on newer releases and a pair
    ``(subfuns, params)`` up to jax 0.8 (a custom_jvp call's functions come first in its bind).
    """
    got = eqn.primitive.get_bind_params(eqn.params)
    subfuns, params = got if isinstance(got, tuple) else ((), got)
    return eqn.primitive.bind(*subfuns, *invals, **params)


def pallas_kernel_name(eqn: Any) -> str:
    """The kernel a ``pallas_call`` equation runs: ``"mha_forward"``, on any release."""
    if "name" in eqn.params:
        return str(eqn.params["name"])
    if "name_and_src_info" in eqn.params:  # 0.5.0: "mha_forward for kernel function ... at ..."
        info = eqn.params["name_and_src_info"]
        return str(getattr(info, "name", str(info).split(" ", 1)[0]))
    # 0.5.1 to 0.7: only the kernel's debug info names it, "mha_forward at FILE:LINE".
    debug = getattr(eqn.params.get("jaxpr"), "debug_info", None)
    source = getattr(debug, "func_src_info", None)
    if not source:
        raise LookupError(f"this pallas_call names no kernel; its parameters: {sorted(eqn.params)}")
    return str(source).split(" ", 1)[0]


def variable_value(leaf: Any) -> Any:
    """The array an NNX state leaf holds: ``leaf[...]`` on newer Flax; on Flax 0.10 a state's
    leaves are ``VariableState`` objects, which only ``.value`` reads."""
    return leaf[...] if hasattr(type(leaf), "__getitem__") else leaf.value


def enable_x64(enabled: bool = True) -> contextlib.AbstractContextManager[None]:
    """A context manager in which JAX computes in 64 bits (``jax.enable_x64`` where it exists)."""
    if hasattr(jax, "enable_x64"):
        manager: contextlib.AbstractContextManager[None] = jax.enable_x64(enabled)
        return manager
    older: contextlib.AbstractContextManager[None] = importlib.import_module(
        "jax.experimental"
    ).enable_x64(enabled)
    return older


# --- compiler options --------------------------------------------------------------------------


def compile_with_options(lowered: Any, options: dict[str, str]) -> Any:
    """``lowered.compile(options)``, including options that are repeated fields of XLA's
    ``DebugOptions`` (``{"xla_disable_hlo_passes": "cse_barrier_expander"}``).

    From jax 0.6 (0.6.2 measured) the jaxlib splits such a value on commas. jax 0.5.x (0.5.0 and
    0.5.3 measured) sets every compiler option as one protobuf string and refuses a repeated
    field ("Field is repeated"); there the options are set on the compile options'
    ``debug_options`` (whose setters take the comma-separated string), for this one compilation.
    """
    try:
        return lowered.compile(options)
    except RuntimeError as err:
        if "repeated" not in str(err):
            raise
    from jax._src import compiler

    original: Any = compiler.get_compile_options

    def with_options(*args: Any, env_options_overrides: Any = None, **kwargs: Any) -> Any:
        rest = {k: v for k, v in dict(env_options_overrides or {}).items() if k not in options}
        compile_options = original(*args, env_options_overrides=rest or None, **kwargs)
        debug = compile_options.executable_build_options.debug_options
        for name, value in options.items():
            setattr(debug, name, value)
        return compile_options

    compiler.get_compile_options = with_options
    try:  # the options still go to compile(), so JAX compiles afresh rather than reusing
        return lowered.compile(options)
    finally:
        compiler.get_compile_options = original


def set_variable_value(variable: Any, value: Any) -> None:
    """Replace the array an NNX ``Variable`` holds: ``variable.set_value`` on Flax 0.12.8 and
    later (where the ``.value`` setter warns that it is deprecated); ``.value =`` on Flax 0.10.3
    to 0.12.6 (jax 0.5.0 to 0.9.2), where ``variable[...] =`` writes into the immutable array."""
    if hasattr(variable, "set_value"):
        variable.set_value(value)
    else:
        variable.value = value
