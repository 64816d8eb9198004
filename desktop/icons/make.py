#!/usr/bin/env python3
"""Draws the app and tray icons (RGBA PNGs) with the standard library only:
a rounded "D" badge for the app, and a dot per tray state. Run it from this
directory to regenerate them."""
import math
import struct
import zlib


def png(path, size, pixel):
    rows = b"".join(
        b"\x00" + b"".join(bytes(pixel(x + 0.5, y + 0.5, size)) for x in range(size))
        for y in range(size)
    )

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(rows, 9)))
        f.write(chunk(b"IEND", b""))


def coverage(d):
    """Anti-aliasing: how much of a pixel at signed distance d is inside."""
    return max(0.0, min(1.0, 0.5 - d))


def dot(rgb, ring=None, hollow=False):
    def pixel(x, y, size):
        c = size / 2
        r = size * 0.42
        d = math.hypot(x - c, y - c) - r
        a = coverage(d)
        if hollow:
            a = min(a, coverage(-(d + size * 0.14)))
        if ring and math.hypot(x - c, y - c) < r * 0.45:
            return (*ring, int(255 * a))
        return (*rgb, int(255 * a))

    return pixel


def app_icon(x, y, size):
    s = size
    # A rounded square in Drover blue with a white "D".
    m, rad = s * 0.06, s * 0.22
    qx, qy = max(m + rad - x, 0, x - (s - m - rad)), max(m + rad - y, 0, y - (s - m - rad))
    d = math.hypot(qx, qy) - rad
    a = coverage(d * 1.0)
    cx, cy = s * 0.42, s * 0.5
    outer = s * 0.26
    stem_l, top, bottom = s * 0.30, s * 0.24, s * 0.76
    in_d = (
        (stem_l <= x <= cx and top <= y <= bottom)
        or (x >= cx and math.hypot(x - cx, y - cy) <= outer)
    )
    hole = (stem_l + s * 0.1 <= x <= cx and top + s * 0.1 <= y <= bottom - s * 0.1) or (
        x >= cx and math.hypot(x - cx, y - cy) <= outer - s * 0.1
    )
    if in_d and not hole:
        return (255, 255, 255, int(255 * a))
    return (37, 99, 235, int(255 * a))


for size, name in [(32, "32x32.png"), (128, "128x128.png"), (256, "128x128@2x.png"), (512, "icon.png")]:
    png(name, size, app_icon)
states = {
    "tray-idle.png": dot((22, 163, 74)),
    "tray-busy.png": dot((37, 99, 235), ring=(255, 255, 255)),
    "tray-offline.png": dot((120, 120, 120), hollow=True),
    "tray-paused.png": dot((217, 119, 6), hollow=True),
}
for name, pixel in states.items():
    png(name, 32, pixel)


def packed(path):
    with open(path, "rb") as f:
        return f.read()


# Windows: an .ico of PNG entries (32, 128, 256 pixels; 0 stands for 256).
entries = [(32, packed("32x32.png")), (128, packed("128x128.png")), (256, packed("128x128@2x.png"))]
with open("icon.ico", "wb") as f:
    f.write(struct.pack("<HHH", 0, 1, len(entries)))
    offset = 6 + 16 * len(entries)
    for size, data in entries:
        f.write(struct.pack("<BBBBHHII", size % 256, size % 256, 0, 0, 1, 32, len(data), offset))
        offset += len(data)
    for _, data in entries:
        f.write(data)

# macOS: an .icns of PNG elements (icp5 32, ic07 128, ic08 256, ic09 512).
elements = [(b"icp5", "32x32.png"), (b"ic07", "128x128.png"), (b"ic08", "128x128@2x.png"), (b"ic09", "icon.png")]
body = b"".join(kind + struct.pack(">I", 8 + len(packed(p))) + packed(p) for kind, p in elements)
with open("icon.icns", "wb") as f:
    f.write(b"icns" + struct.pack(">I", 8 + len(body)) + body)
