"""What the conformance fixtures send: media content and a schema.

Data and small helpers only (the fixtures themselves are in ``conformance_app.py`` and
``conformance_2025.py`` beside this file):
a 1x1 red PNG and 10 ms of silence as base64, content-block builders, and the
JSON Schema 2020-12 input schema the suite's ``json-schema-2020-12`` scenario
expects to see unchanged in ``tools/list``.
"""

from __future__ import annotations

import base64
import io
import struct
import wave
import zlib
from typing import Any

import mrtr_core as m

__all__ = [
    "DEPRECATED",
    "JSON_SCHEMA_2020_12",
    "RED_PIXEL",
    "SILENCE",
    "embedded_text",
    "image",
    "sampled_text",
    "text",
]

DEPRECATED = "Deprecated in 2026-07-28 (SEP-2577), still served"


def sampled_text(answer: m.wire.InputResponse | None) -> str:
    """The text the client's LLM sent, or ``(no text)``."""
    if isinstance(answer, m.wire.CreateMessageResult):
        content = answer.content
        if isinstance(content, dict) and isinstance(content.get("text"), str):
            return str(content["text"])
    return "(no text)"


# --- media for the content fixtures -------------------------------------------------------


def _png_pixel(red: int, green: int, blue: int) -> bytes:
    """A 1x1 RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(bytes([0, red, green, blue]))
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def _wav_silence(frames: int = 80) -> bytes:
    """10 ms of 8 kHz mono silence."""
    out = io.BytesIO()
    with wave.open(out, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(1)
        wav.setframerate(8000)
        wav.writeframes(b"\x80" * frames)
    return out.getvalue()


RED_PIXEL = base64.b64encode(_png_pixel(255, 0, 0)).decode("ascii")
SILENCE = base64.b64encode(_wav_silence()).decode("ascii")


def image() -> dict[str, Any]:
    return {"type": "image", "data": RED_PIXEL, "mimeType": "image/png"}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def embedded_text(uri: str, mime_type: str, value: str) -> dict[str, Any]:
    """An embedded text resource content block."""
    return {"type": "resource", "resource": {"uri": uri, "mimeType": mime_type, "text": value}}


JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
