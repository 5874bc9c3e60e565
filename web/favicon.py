"""`GET /favicon.ico`: a 16x16 icon made here (a dark square with a light "m"), so browsers asking for it
get one instead of a 404 and the package ships no binary file for it."""

from __future__ import annotations

import struct
from functools import cache

SIZE = 16
BACK = (0x2B, 0x1E, 0x16, 0xFF)  # BGRA: the page's dark blue
INK = (0xF0, 0xE6, 0xDC, 0xFF)
GLYPH = (
    "................",
    "................",
    "................",
    "................",
    "..##.###..###...",
    "..###..###..##..",
    "..##...##...##..",
    "..##...##...##..",
    "..##...##...##..",
    "..##...##...##..",
    "..##...##...##..",
    "..##...##...##..",
    "................",
    "................",
    "................",
    "................",
)


@cache
def favicon() -> bytes:
    """An ICO file holding one 32-bit 16x16 bitmap."""
    pixels = b"".join(bytes(INK if cell == "#" else BACK) for row in reversed(GLYPH) for cell in row)
    mask = b"\x00" * (4 * SIZE)  # 1 bit a pixel, rows padded to 4 bytes: all drawn
    header = struct.pack("<IiiHHIIiiII", 40, SIZE, SIZE * 2, 1, 32, 0, len(pixels) + len(mask), 0, 0, 0, 0)
    image = header + pixels + mask
    directory = struct.pack("<HHH", 0, 1, 1) + struct.pack("<BBBBHHII", SIZE, SIZE, 0, 0, 1, 32, len(image), 22)
    return directory + image


__all__ = ["favicon"]
