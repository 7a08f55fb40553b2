"""The event-id window a run carries across continue-as-new."""

from __future__ import annotations

from dsmo.workflows.events.seen_ids import FINGERPRINT_CHARS, SEEN_IDS_WINDOW, SeenIds, fingerprint


def test_ids_are_recognised_until_the_window_passes_them() -> None:
    seen = SeenIds(window=3)
    for event_id in ("a", "b", "c"):
        seen.add(event_id)
    assert "a" in seen and "d" not in seen
    seen.add("d")  # the oldest, "a", leaves the window
    assert "a" not in seen and all(event_id in seen for event_id in ("b", "c", "d"))
    seen.add("b")  # seen again: the newest now, so "c" is the oldest
    seen.add("e")
    assert "c" not in seen and "b" in seen


def test_the_window_survives_packing_and_old_checkpoints_restore_into_it() -> None:
    seen = SeenIds()
    ids = [f"evt-{n}" for n in range(SEEN_IDS_WINDOW + 5)]
    for event_id in ids:
        seen.add(event_id)
    packed = seen.packed()
    assert len(packed) == SEEN_IDS_WINDOW * FINGERPRINT_CHARS  # bounded whatever the run's age
    again = SeenIds.restored(packed, legacy_ids=["from-an-old-checkpoint"])
    # The old checkpoint's id is the newest: the window's oldest, ids[5], makes room for it.
    assert ids[6] in again and ids[-1] in again and ids[5] not in again
    assert "from-an-old-checkpoint" in again and len(again) == SEEN_IDS_WINDOW


def test_fingerprints_are_fixed_size_whatever_the_id() -> None:
    assert {len(fingerprint(event_id)) for event_id in ("x", "y" * 200, "ü\u2028\n")} == {FINGERPRINT_CHARS}
    assert 5 not in SeenIds()  # not an id at all
