#!/usr/bin/env python3
"""fabricize's HTML reports rendered by a real browser (issue 41 point 2).

  report_in_browser.py --chromium BIN --work DIR PAGE[:pictures] ...

Each PAGE (an HTML file a test left: verify's report, the migration
report) is opened by headless Chromium, which takes a screenshot and prints
the page's console. A page fails when the console says anything (a page
without script has nothing to say: an SVG the browser cannot read is a
console error), when its screenshot is blank, or, for a page marked
`:pictures`, when its drawing holds fewer than two series lines or the
screenshot lacks the 1-process run's blue and the 2-process run's orange.
"""
import argparse
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib

BLUE = (0x1F, 0x77, 0xB4)
ORANGE = (0xFF, 0x7F, 0x0E)


def fail(message):
    print(f"BROWSER FAILED: {message}", flush=True)
    sys.exit(1)


def png_pixels(path):
    """(width, height, rows of RGB tuples' bytes) of an 8-bit RGB/RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG")
    at, idat, width = 8, b"", 0
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace:
                fail(f"{path}: PNG depth {depth} colour {color} interlace {interlace} not read here")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if kind == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif kind == 2:
            for i in range(stride):
                line[i] = (line[i] + previous[i]) & 0xFF
        elif kind == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b = previous[i]
                c = previous[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line) if channels == 3 else bytes(v for k, v in enumerate(line) if k % 4 != 3))
        previous = line
    return width, height, rows


def count_colour(rows, colour):
    needle = bytes(colour)
    return sum(sum(1 for x in range(0, len(row), 3) if row[x:x + 3] == needle) for row in rows)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--chromium", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("pages", nargs="+")
    args = parser.parse_args()
    if not shutil.which(args.chromium):
        fail(f"{args.chromium} is missing (scripts/setup.sh installs Debian's chromium): the reports are untested")
    os.makedirs(args.work, exist_ok=True)
    for spec in args.pages:
        page, _, kind = spec.partition(":")
        if not os.path.isfile(page):
            fail(f"{page} was not written (the test that makes it ran first?)")
        name = os.path.basename(page)
        shot = os.path.join(args.work, name + ".png")
        if os.path.exists(shot):
            os.remove(shot)
        common = [args.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  f"--user-data-dir={os.path.join(args.work, 'profile')}", "--enable-logging=stderr", "--v=0"]
        url = "file://" + os.path.abspath(page)
        shown = subprocess.run(common + ["--window-size=1000,1500", f"--screenshot={shot}", url],
                               capture_output=True, text=True, timeout=180)
        console = [line for line in shown.stderr.splitlines() if ":CONSOLE" in line]
        if console:
            fail(f"{name}: the browser's console says:\n" + "\n".join(console))
        if not os.path.exists(shot):
            fail(f"{name}: no screenshot (exit {shown.returncode}):\n{shown.stderr[-3000:]}")
        width, height, rows = png_pixels(shot)
        drawn = sum(sum(1 for v in row if v < 200) for row in rows)
        if drawn < 2000:
            fail(f"{name}: the rendered page is blank ({drawn} dark values in {width}x{height})")
        summary = f"{name}: rendered {width}x{height}, no console message"
        if kind == "pictures":
            dom = subprocess.run(common + ["--dump-dom", url], capture_output=True, text=True, timeout=180).stdout
            lines = [m for m in re.findall(r'<polyline class="series"[^>]*points="([^"]*)"', dom)
                     if len(m.split()) >= 2]
            if len(lines) < 2:
                fail(f"{name}: the drawing holds {len(lines)} series lines of two or more points")
            blue, orange = count_colour(rows, BLUE), count_colour(rows, ORANGE)
            if blue < 100 or orange < 100:
                fail(f"{name}: the picture is empty: {blue} pixels of the 1-process run's blue, "
                     f"{orange} of the 2-process run's orange")
            summary += f", {len(lines)} series lines drawn ({blue} blue, {orange} orange pixels)"
        print(summary, flush=True)
    print("BROWSER OK")


if __name__ == "__main__":
    main()
