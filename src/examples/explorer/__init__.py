"""What each checkpoint policy costs on a stack of transformer blocks, measured.

For every policy: bytes of residuals one block keeps, XLA's compiled memory and FLOPs for one
gradient of the whole stack, and the step time of ``jax.jit(jax.grad(loss))`` (median and spread).
``python -m examples.explorer --size medium --out FILE.json`` writes the results with the device,
backend and versions, so that runs on other machines can be committed under
``src/examples/data/explorer/`` and shown beside the page's own run.

The modules, in the order of the page (``docs/explorer/index.md``):

- :mod:`~examples.explorer.model`: the model of :mod:`examples.tools.models`, checkpointed under
  each policy of :data:`POLICIES`;
- :mod:`~examples.explorer.run`: the measurements;
- :mod:`~examples.explorer.data`: results as data (schema, save, load);
- :mod:`~examples.explorer.render`: tables, verdicts on step times, plots;
- :mod:`~examples.explorer.theory`: what the FLOPs should be, and recursive checkpointing's cost;
- :mod:`~examples.explorer.compare`: the same measurements on the reader's own function;
- ``__main__``: the command line;
- :mod:`~examples.explorer.pitfalls`: remat mistakes seen in real projects, measured
  (``docs/explorer/pitfalls.md``).
"""

from examples.explorer.compare import Comparison, compare_policies
from examples.explorer.data import (
    RUNS,
    SCHEMA,
    DepthPoint,
    ExplorerDataError,
    Result,
    Run,
    load,
    load_all,
    save,
)
from examples.explorer.model import (
    ALIASES,
    NO_REMAT,
    OFFLOAD_POLICIES,
    POLICIES,
    layer_fn,
    layer_residuals,
    loss_float64,
    make_loss,
    name_exclusion,
)
from examples.explorer.render import (
    barrier_table,
    budget_sentence,
    everything_saveable_on,
    exclusion_table,
    growth_per_layer,
    growth_table,
    offload_report,
    ordering_sentence,
    plot_depth,
    plot_tradeoff,
    results_table,
    timing_verdicts,
)
from examples.explorer.run import (
    BARRIER_POLICIES,
    DEPTH_POLICIES,
    BarrierCost,
    barrier_costs,
    depth_sweep,
    measure,
    run,
)
from examples.explorer.theory import (
    counted_share,
    flop_ratio,
    full_remat_flop_ratio,
    layer_flops,
    recursive_levels,
)

__all__ = [
    "ALIASES",
    "BARRIER_POLICIES",
    "DEPTH_POLICIES",
    "NO_REMAT",
    "OFFLOAD_POLICIES",
    "POLICIES",
    "RUNS",
    "SCHEMA",
    "BarrierCost",
    "Comparison",
    "DepthPoint",
    "ExplorerDataError",
    "Result",
    "Run",
    "barrier_costs",
    "barrier_table",
    "budget_sentence",
    "compare_policies",
    "counted_share",
    "depth_sweep",
    "everything_saveable_on",
    "exclusion_table",
    "flop_ratio",
    "full_remat_flop_ratio",
    "growth_per_layer",
    "growth_table",
    "layer_flops",
    "layer_fn",
    "layer_residuals",
    "load",
    "load_all",
    "loss_float64",
    "make_loss",
    "measure",
    "name_exclusion",
    "offload_report",
    "ordering_sentence",
    "plot_depth",
    "plot_tradeoff",
    "recursive_levels",
    "results_table",
    "run",
    "save",
    "timing_verdicts",
]
