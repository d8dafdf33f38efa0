"""examples.howto.collectives: the collectives of a compiled program, counted from its HLO text."""

from __future__ import annotations

from examples.howto import collectives as c

# --- reading compiled HLO ----------------------------------------------------------------------

_BWD = 'metadata={op_name="jit(f)/transpose(jvp())/while/body/dot"}'
_FWD = 'metadata={op_name="jit(f)/jvp()/while/body/dot"}'
_TRIPS = 'backend_config={"known_trip_count":{"n":"6"}}'
HLO = f"""\
%body.1 (p: (s32[], f32[4,8])) -> (s32[], f32[4,8]) {{
  %ag = f32[16,8]{{1,0}} all-gather(%x), dimensions={{0}}, {_BWD}
  %ag2 = ((f32[4,8]{{1,0}}), f32[16,8]{{1,0}}) all-gather-start(%x), dimensions={{0}}, {_FWD}
}}
%cond.1 (p: (s32[], f32[4,8])) -> pred[] {{
}}
ENTRY %main (a: f32[4,8]) -> f32[4,8] {{
  %w = (s32[], f32[4,8]) while(%t), condition=%cond.1, body=%body.1, {_TRIPS}
  %ar = (f32[2,2]{{1,0}}, bf16[4]{{0}}) all-reduce(%a, %b), to_apply=%add
}}
"""


def test_collectives_are_counted_per_step_and_split_by_pass():
    found = c.collectives(HLO)
    assert [(x.op, x.backward, x.nbytes, x.runs) for x in found] == [
        ("all-gather", True, 16 * 8 * 4, 6),  # inside a loop of six trips, named transpose(...)
        ("all-gather", False, 16 * 8 * 4, 6),  # async: the gathered result, not the operand
        ("all-reduce", False, 2 * 2 * 4 + 4 * 2, 1),  # a tuple: both results
    ]
    assert found[0].bytes_per_step == 16 * 8 * 4 * 6
    assert c.counts(found) == {"all-gather": 2, "all-reduce": 1}
    assert c.table(found).column("result per device")[2] == "`(f32[2,2], bf16[4])`"
