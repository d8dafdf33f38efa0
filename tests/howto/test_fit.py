"""examples.howto.fit: the recorder of "Will it fit?" and the committed plans it wrote.

The records are checked for what a plan implies (the largest batch found fits and the batch above
it does not; keeping more never plans less memory), for naming the machine and every version,
and for covering what the page promises (a GPU target and two TPU targets at >= 1B parameters).
The recorder's own behaviour is tested on the CPU target, whose compiler is always installed.
"""

from __future__ import annotations

import json

import jax
import pytest

from examples.howto import fit
from examples.howto import fit_model as fm

#: The tests that compile the decoder's step (jax.set_mesh constrains its activations).
needs_set_mesh = pytest.mark.skipif(
    not hasattr(jax, "set_mesh"), reason=f"jax {jax.__version__} has no jax.set_mesh"
)

RECORDS = fit.load_all()
BY_KEY = {(r.target["name"], r.model["name"]): r for r in RECORDS}


def test_the_records_cover_a_gpu_and_two_tpu_targets_at_a_billion_parameters():
    platforms = [r.target["platform"] for r in RECORDS if r.model["params"] >= 1e9]
    assert platforms.count("cuda") >= 1
    assert len({r.target["name"] for r in RECORDS if r.target["platform"] == "tpu"}) >= 2
    for r in RECORDS:
        assert r.model["params"] == fm.param_count(r.config)


def test_each_record_names_the_machine_and_every_version():
    for r in RECORDS:
        info = r.runinfo
        assert info["jax"]
        assert info["jaxlib"]
        assert info["date"]
        assert "compile-only" in info["device"]
        wanted = "libtpu" if r.target["platform"] == "tpu" else "jax-cuda13-plugin"
        assert any(wanted in name for name in info["compilers"]), info["compilers"]


@pytest.mark.parametrize("rec", RECORDS, ids=[f"{t}-{m}" for t, m in BY_KEY])
def test_the_largest_batch_within_the_budget_fits_and_no_tried_batch_above_it_does(rec):
    for s, best, above in fit.largest_rows(rec):
        for b, p in s.tried.items():  # every compile is kept, and none contradicts the answer
            assert p.fits == (best is not None and b <= best), (s.label, b)
        if best is not None:
            assert s.tried[best].judged_bytes <= s.tried[best].budget
        if above is not None:
            assert not s.tried[above].fits


def test_the_searches_against_the_budget_end_one_batch_apart():
    """The records searched against the budget (those with XLA-off compiles) are exact."""
    searched = [(r, s, b, a) for r in RECORDS for s, b, a in fit.largest_rows(r)
                if s.label in r.xla_remat_off]  # fmt: skip
    for _rec, s, best, above in searched:
        if best is not None and above is not None:
            assert above == best + 1, (s.label, best, above)


def test_a_plan_marked_as_fitting_only_through_xla_does_not_fit_with_its_pass_off():
    for r in RECORDS:
        for label, by_batch in r.xla_remat_off.items():
            for b, off in by_batch.items():
                assert off.xla_remat_off
                with_pass = next((s.tried[b] for s in r.largest if s.label == label
                                  and b in s.tried), None)  # fmt: skip
                if with_pass is None and r.batch == b:
                    with_pass = next((p for p in r.plans if p.label == label), None)
                if with_pass is None:
                    continue
                marked = fit.fits_only_through_xla(r, with_pass, b)
                assert marked == (with_pass.fits and not off.fits), (label, b)
                if marked:
                    assert fit.verdict(with_pass, r, b) == "fits only through XLA's own remat"


def test_each_table_ends_with_a_verdict_naming_the_least_recomputation_that_fits():
    for r in RECORDS:
        line = fit.verdict_line(r)
        fitting = [p for p in r.plans if p.fits and not fit.fits_only_through_xla(r, p, r.batch)]
        if not fitting:
            assert "no policy" in line
            continue
        best = min(fitting, key=lambda p: (fit.recompute_ratio(r.config, p.label), p.label))
        assert f"is `{best.label}`" in line


def test_program_flops_without_remat_are_six_per_parameter_per_token_plus_attention():
    """The 8B step without remat: 2 FLOPs per weight per token forward, 4 backward (the
    embedding lookup is no product), plus attention's two products per layer, three times."""
    cfg = fm.CONFIGS["8b"]
    weights = fm.param_count(cfg) - cfg.vocab * cfg.width - cfg.width * (2 * cfg.layers + 1)
    attention = 2 * 2 * cfg.seq * cfg.seq * cfg.heads * cfg.head_dim * cfg.layers
    assert fit.program_flops(cfg, "no remat") == 3 * (2 * cfg.seq * weights + attention)
    nothing = fit.recompute_ratio(cfg, "nothing_saveable")
    assert nothing > fit.recompute_ratio(cfg, "minimal (MaxText)") > 1


@pytest.mark.parametrize("rec", RECORDS, ids=[f"{t}-{m}" for t, m in BY_KEY])
def test_keeping_more_never_plans_less_memory(rec):
    labels = {p.label for p in rec.plans}
    for more, less in fm.NESTED:
        if more not in labels or less not in labels:
            continue
        kept, dropped = rec.plan(more), rec.plan(less)
        assert not (dropped.error is not None and kept.error is None), (more, less)
        if kept.temp_bytes is not None and dropped.temp_bytes is not None:
            assert kept.temp_bytes >= dropped.temp_bytes, (more, less)
        if kept.error is not None and dropped.error is not None:
            assert kept.error.required_bytes >= dropped.error.required_bytes, (more, less)


def test_a_compiler_out_of_memory_error_is_kept_verbatim():
    errors = [p.error for r in RECORDS for p in r.plans if p.error is not None]
    assert errors, "the page shows at least one compiler out-of-memory error"
    for e in errors:
        assert "RESOURCE_EXHAUSTED" in e.message
        assert "CompileTimeHbmOom" in e.message
        assert e.required_bytes > e.available_bytes


def test_the_tables_have_a_row_per_policy_and_say_where_the_plans_came_from():
    for r in RECORDS:
        table = fit.plans_table(r)
        assert [row[0] for row in table.rows] == [f"`{p.label}`" for p in r.plans]
        for row, p in zip(table.rows, r.plans, strict=True):
            assert row[4] == fit.verdict(p, r, r.batch)
        assert table.caption.startswith("Plan")
        assert "budget" in table.caption
        assert "counts the scanned layer once" in table.caption
        assert r.runinfo["jax"] in fit.source(r)
        assert r.target["device_kind"] in fit.source(r)
        if r.largest:
            assert len(fit.largest_table(r).rows) == len(r.largest)


def test_a_record_of_another_kind_is_refused(tmp_path):
    path = tmp_path / "fit-bad.json"
    path.write_text(json.dumps({"schema": "something/else", "runinfo": {}}))
    with pytest.raises(fit.FitRecordError, match=r"fit-bad\.json: schema is 'something/else'"):
        fit.load(path)


# --- the page's claims ----------------------------------------------------------------------------


def test_the_gpu_compiler_returns_a_plan_over_memory():
    gpu = next(r for r in RECORDS if r.target["platform"] == "cuda")
    none = gpu.plan("no remat")
    assert none.error is None
    assert not none.fits
    assert none.total_bytes > none.memory_bytes


def test_no_policy_changes_the_arguments_of_the_step():
    for r in RECORDS:
        sizes = {p.argument_bytes for p in r.plans if p.argument_bytes is not None}
        assert len(sizes) <= 1, (r.target["name"], sizes)


def test_the_tpu_refusal_names_less_memory_than_the_chip_has():
    _, oom = fit.first_error(RECORDS)
    assert oom.error.available_bytes < oom.memory_bytes


def test_over_its_limit_the_gpu_plan_without_remat_counts_more_flops_per_sequence():
    """1B on eight H100s: at 2 and 3 sequences per device the compiler counts the same FLOPs
    per sequence; at 4, far over its limit, XLA's own rematerialization adds work."""
    gpu = BY_KEY[("h100-80gb x8", "1b")]
    near = next(s for s in gpu.largest if s.label == "no remat")
    per_seq = {b: p.flops / b for b, p in near.tried.items()}
    assert per_seq[3] / per_seq[2] == pytest.approx(1, abs=0.01)
    assert per_seq[4] > 1.2 * per_seq[3]
    assert near.tried[4].error is None
    assert not near.tried[4].fits


def test_every_plan_the_tpu_compiler_returned_has_its_peak_within_the_budget():
    """The TPU compiler judges by its own peak: each plan it returned has a peak within the HBM
    it can use, and its total (which counts reused buffers twice) is above the peak."""
    tpu = [p for r in RECORDS if r.target["platform"] == "tpu" for p in r.plans if p.error is None]
    assert tpu
    for p in tpu:
        assert p.peak_bytes <= p.budget == fit.find_target(p.target).budget_bytes
        assert p.fits
    assert any(p.total_bytes > p.peak_bytes for p in tpu)


def test_a_plan_that_fits_only_with_xlas_pass_is_marked_and_left_out_of_the_verdict():
    import dataclasses

    rec = BY_KEY[("h100-80gb x8", "8b")]
    fitting = next(p for p in rec.plans if p.fits)
    over = dataclasses.replace(fitting, temp_bytes=fitting.budget,
                               compiler_options=fit.XLA_REMAT_OFF)  # fmt: skip
    only = dataclasses.replace(rec, plans=[fitting], largest=[],
                               xla_remat_off={fitting.label: {rec.batch: over}})  # fmt: skip
    assert fit.fits_only_through_xla(only, fitting, rec.batch)
    assert fit.verdict(fitting, only, rec.batch) == "fits only through XLA's own remat"
    assert "no policy here fits" in fit.verdict_line(only)


def test_the_8b_step_without_remat_at_one_sequence_is_over_the_budget_as_xla_logs():
    """Under the H100's memory but over the compiler's own limit: XLA's pass says it could not
    reach that limit, and the page's budget calls the plan over."""
    rec = BY_KEY[("h100-80gb x8", "8b")]
    one = next(s for s in rec.largest if s.label == "no remat").tried[1]
    assert one.budget < one.total_bytes < one.memory_bytes
    assert not one.fits
    assert any("Can't reduce memory use below" in line for line in one.log)


def test_a_recorded_8b_plan_fits_only_through_xlas_pass():
    """save_qkv_proj at 16 sequences per device: under the budget with XLA's pass, over without."""
    rec = BY_KEY[("h100-80gb x8", "8b")]
    marked = [(s.label, s.batch) for s in rec.largest if s.batch is not None
              and fit.fits_only_through_xla(rec, s.tried[s.batch], s.batch)]  # fmt: skip
    assert marked
    for label, b in marked:
        off = fit.xla_remat_off(rec, label, b)
        assert (
            off.total_bytes
            > off.budget
            >= next(s for s in rec.largest if s.label == label).tried[b].total_bytes
        )
        assert f"`{label}` {b} (only through XLA's own remat)" in fit.largest_verdict_line(rec)


def test_the_warning_the_page_prints_is_the_8b_step_without_remat_at_one_sequence():
    rec, p, line = fit.xla_warning(RECORDS, "no remat")
    one = next(s for s in rec.largest if s.label == "no remat").tried[1]
    assert (rec.model["name"], p) == ("8b", one)
    assert "Can't reduce memory use below" in line


def test_the_tpu_compiler_adds_work_to_the_largest_plan_that_fits():
    """1B, nothing_saveable, v5e 2x2: the same FLOPs per sequence up to 9, more at 10 (which
    fits), and 11 refused: the TPU compiler's own recomputation near its limit."""
    rec = BY_KEY[("tpu-v5e:2x2", "1b")]
    s = next(s for s in rec.largest if s.label == "nothing_saveable")
    per_seq = {b: p.flops / b for b, p in s.tried.items() if p.flops}
    assert (s.batch, s.fail_batch) == (10, 11)
    assert per_seq[9] / per_seq[2] == pytest.approx(1, abs=0.01)
    assert per_seq[10] > 1.2 * per_seq[9]
    assert s.tried[10].fits
    assert s.tried[11].error is not None
