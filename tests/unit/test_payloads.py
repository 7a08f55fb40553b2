"""DSMO's payload converter: the bytes of Temporal's pydantic converter, one adapter cache per process."""

from __future__ import annotations

import dataclasses

from temporalio.contrib.pydantic import pydantic_data_converter

from dsmo.client.payloads import _SHARED_JSON, PYDANTIC_DATA_CONVERTER
from dsmo.workflows.contracts.trail_io import TrailHead


def _head() -> TrailHead:
    return TrailHead(seq=3, hash="ab" * 32, segments=1)


def test_payloads_are_the_bytes_temporals_pydantic_converter_writes_and_reads() -> None:
    ours = PYDANTIC_DATA_CONVERTER.payload_converter.to_payloads([_head(), {"x": 1}, None, b"raw"])
    theirs = pydantic_data_converter.payload_converter.to_payloads([_head(), {"x": 1}, None, b"raw"])
    assert ours == theirs
    decoded = pydantic_data_converter.payload_converter.from_payloads(ours, [TrailHead, dict, type(None), bytes])
    assert decoded == [_head(), {"x": 1}, None, b"raw"]


def test_converters_built_per_activation_share_one_type_adapter_per_type() -> None:
    payload = PYDANTIC_DATA_CONVERTER.payload_converter.to_payloads([_head()])
    before = _SHARED_JSON._type_adapter.cache_info()
    for _ in range(5):  # the SDK builds a data converter, with a new payload converter, per activation
        converter = dataclasses.replace(PYDANTIC_DATA_CONVERTER).payload_converter
        assert converter is not PYDANTIC_DATA_CONVERTER.payload_converter
        assert converter.from_payloads(payload, [TrailHead]) == [_head()]
    after = _SHARED_JSON._type_adapter.cache_info()
    assert after.misses - before.misses <= 1 and after.hits - before.hits >= 4
