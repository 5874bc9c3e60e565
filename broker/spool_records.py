"""The record format of the spool's files: (seq, topic, payload), each with a CRC."""

from __future__ import annotations

import struct
import zlib

_HEAD = struct.Struct("<IQII")  # crc32 of the rest, seq, topic length, payload length
RECORD_OVERHEAD = _HEAD.size
"""Bytes a record takes beyond its topic and payload."""


def encode_record(seq: int, topic: str, payload: bytes) -> bytes:
    name = topic.encode()
    body = _HEAD.pack(0, seq, len(name), len(payload))[4:] + name + payload
    return struct.pack("<I", zlib.crc32(body)) + body


def decode_records(data: bytes) -> tuple[list[tuple[int, str, bytes]], int]:
    """The intact records of a spool file, and the length they span (a torn tail is ignored)."""
    records, at = [], 0
    while at + _HEAD.size <= len(data):
        crc, seq, tlen, plen = _HEAD.unpack_from(data, at)
        end = at + _HEAD.size + tlen + plen
        if end > len(data) or zlib.crc32(data[at + 4 : end]) != crc:
            break
        start = at + _HEAD.size
        records.append((seq, data[start : start + tlen].decode(), data[start + tlen : end]))
        at = end
    return records, at
