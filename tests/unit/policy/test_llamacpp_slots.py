"""The llama.cpp batch scheduler's bookkeeping: admission by free cells and sequence ids,
prefix lookup over held prompts, retention and eviction."""

from __future__ import annotations

from services.policy.engines.llamacpp.slots import Slots, common_prefix, wave_cap


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix([1, 2], [1, 2, 3]) == 2


def test_wave_cap_fits_candidates_next_to_the_prompt() -> None:
    assert wave_cap(kv_cells=1000, n_prompt=100, max_tokens=200, n=8, seqs=64) == 4
    assert wave_cap(kv_cells=1000, n_prompt=100, max_tokens=10, n=8, seqs=64) == 8
    assert wave_cap(kv_cells=1000, n_prompt=100, max_tokens=10, n=8, seqs=3) == 3
    assert wave_cap(kv_cells=100, n_prompt=90, max_tokens=50, n=4, seqs=64) == 1  # always at least one


def test_admission_waits_for_free_cells_and_ids() -> None:
    slots = Slots(kv_cells=100, n_seqs=3, max_retained=4)
    got = slots.reserve(60, 2)
    assert got is not None
    ids, evicted = got
    assert ids == [0, 1] and evicted == []
    assert slots.free_cells == 40
    assert slots.reserve(50, 1) is None  # not enough cells: wait
    assert slots.reserve(10, 2) is None  # not enough ids: wait
    forced = slots.reserve(50, 1, force=True)  # a request alone never waits forever
    assert forced is not None and slots.free_cells == -10
    slots.release(50, forced[0][0])
    slots.release(60, 0)
    slots.release(0, 1)
    assert slots.free_cells == 100 and len(slots.free_seqs) == 3


def test_best_prefix_counts_only_decoded_tokens_and_never_the_last() -> None:
    slots = Slots(kv_cells=1000, n_seqs=8, max_retained=4)
    slots.reserve(5, 1)
    slots.hold(0, [1, 2, 3, 4, 5], ready=2)
    assert slots.best_prefix([1, 2, 3, 9]) == (0, 2)  # only the decoded part is shared
    slots.filled(0, 5)
    assert slots.best_prefix([1, 2, 3, 9]) == (0, 3)
    assert slots.best_prefix([1, 2, 3, 4, 5]) == (0, 4)  # the last token's logits are computed again
    assert slots.best_prefix([7, 8]) == (-1, 0)


def test_finished_prompts_are_retained_then_evicted_lru_when_space_is_needed() -> None:
    slots = Slots(kv_cells=100, n_seqs=4, max_retained=2)
    for seq, first in ((0, 10), (1, 20)):
        got = slots.reserve(30, 1)
        assert got is not None and got[0] == [seq]
        slots.hold(seq, [first] * 30, ready=30)
        assert slots.retire(seq, keep=30) == []  # kept, cells still counted
    assert slots.free_cells == 40 and {h.seq for h in slots.retained()} == {0, 1}
    slots.touch(0)  # 1 is now the least recently used
    got = slots.reserve(50, 1)
    assert got is not None
    _, evicted = got
    assert evicted == [1] and 0 in slots.prompts and 1 not in slots.prompts
    # the prompt a new request copies from is never evicted to make room for it
    assert slots.reserve(60, 1, protect=0) is None


def test_retention_is_bounded_and_a_cancelled_prompt_keeps_its_decoded_part() -> None:
    slots = Slots(kv_cells=1000, n_seqs=8, max_retained=1)
    for seq in (0, 1):
        slots.reserve(10, 1)
        slots.hold(seq, list(range(seq, seq + 10)), ready=10)
    assert slots.retire(0, keep=10) == []
    assert slots.retire(1, keep=10) == [0]  # over max_retained: the older one goes
    slots.reserve(10, 1)
    slots.hold(2, [5] * 10, ready=4)
    assert slots.retire(2, keep=10) == [1]  # the one retained before goes
    assert slots.prompts[2].tokens == [5] * 4 and slots.reserved == 4


def test_a_prompt_with_nothing_decoded_is_freed() -> None:
    slots = Slots(kv_cells=1000, n_seqs=4, max_retained=4)
    slots.reserve(10, 1)
    slots.hold(0, [1] * 10, ready=0)
    assert slots.retire(0, keep=10) == [0]
    assert slots.reserved == 0 and 0 in slots.free_seqs


def test_drop_retained() -> None:
    slots = Slots(kv_cells=1000, n_seqs=4, max_retained=4)
    for seq in (0, 1):
        slots.reserve(10, 1)
        slots.hold(seq, [seq] * 10, ready=10)
    slots.retire(0, keep=10)
    assert slots.drop_retained() == [0]
    assert list(slots.prompts) == [1] and slots.reserved == 10


def test_coming_prefix_sees_what_a_prefilling_prompt_will_hold() -> None:
    slots = Slots(kv_cells=1000, n_seqs=8, max_retained=4)
    slots.reserve(6, 1)
    slots.hold(0, [1, 2, 3, 4, 5, 6], ready=1)
    assert slots.best_prefix([1, 2, 3, 4, 9]) == (0, 1)
    assert slots.coming_prefix([1, 2, 3, 4, 9]) == 4
    slots.filled(0, 6)
    assert slots.coming_prefix([1, 2, 3, 4, 9]) == 0  # decoded already: best_prefix covers it
