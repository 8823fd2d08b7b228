#!/usr/bin/env python3
"""Checks for report_page_test.sh on what headless Chromium made of a `shardsim simulate --report`
page: the DOM it dumped against the trace of the same run, and its screenshot.

  report_page_check.py dom DUMPED_DOM TRACE_JSON   the timeline draws every op of the drawn devices
  report_page_check.py png SCREENSHOT              the screenshot is not blank

Prints one line saying what was checked; exits 1 with one line saying what is wrong."""

import html.parser
import json
import re
import struct
import sys
import zlib


def fail(message):
    print("report_page_check: " + message, file=sys.stderr)
    sys.exit(1)


class OpRects(html.parser.HTMLParser):
    """Counts <rect> elements of class "op" inside an <svg>, and the <svg> elements."""

    def __init__(self):
        super().__init__()
        self.svg_depth = 0
        self.svgs = 0
        self.op_rects = 0

    def handle_starttag(self, tag, attrs):
        if tag == "svg":
            self.svg_depth += 1
            self.svgs += 1
        elif tag == "rect" and self.svg_depth > 0 and "op" in (dict(attrs).get("class") or "").split():
            self.op_rects += 1

    def handle_endtag(self, tag):
        if tag == "svg":
            self.svg_depth -= 1


def drawn_devices(trace):
    """The lowest rank of each stage among the processes with complete events, as the page picks them."""
    stage_of = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            match = re.match(r"rank (\d+) \(stage (\d+)\)", e["args"]["name"])
            if not match:
                fail("process_name %r does not read 'rank R (stage S)'" % e["args"]["name"])
            stage_of[e["pid"]] = int(match.group(2))
    lowest = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X":
            stage = stage_of.get(e["pid"])
            if stage is None:
                fail("complete event on pid %s without a process_name" % e["pid"])
            lowest[stage] = min(lowest.get(stage, e["pid"]), e["pid"])
    return sorted(lowest.values())


def check_dom(dom_path, trace_path):
    with open(dom_path, encoding="utf-8") as f:
        dom = f.read()
    with open(trace_path, encoding="utf-8") as f:
        trace = json.load(f)
    parser = OpRects()
    parser.feed(dom)
    if parser.svgs == 0:
        fail("the dumped DOM has no <svg>")
    devices = drawn_devices(trace)
    if trace.get("shardsim", {}).get("drawn_devices", devices) != devices:
        fail("the trace's drawn_devices %s differ from the lowest rank per stage %s" % (trace["shardsim"]["drawn_devices"], devices))
    events = sum(1 for e in trace["traceEvents"] if e.get("ph") == "X" and e["pid"] in devices)
    if events == 0:
        fail("the trace has no complete events for the drawn devices %s" % devices)
    if parser.op_rects < events:
        fail("the DOM has %d rect.op in its SVGs, fewer than the trace's %d X events of devices %s" % (parser.op_rects, events, devices))
    print("dom: %d svg, %d rect.op for %d X events of devices %s" % (parser.svgs, parser.op_rects, events, devices))


def png_rows(path):
    """Width, height, bytes per pixel and the unfiltered rows of an 8-bit RGB or RGBA PNG."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("%s is not a PNG" % path)
    at, idat, header = 8, [], None
    while at < len(data):
        (length,) = struct.unpack(">I", data[at:at + 4])
        kind = data[at + 4:at + 8]
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        at += 12 + length
    if header is None:
        fail("%s has no IHDR" % path)
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or colour not in (2, 6) or interlace != 0:
        fail("%s: expected 8-bit RGB(A) without interlacing, got depth %d colour type %d" % (path, depth, colour))
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        elif kind != 0:
            fail("%s: unknown PNG filter %d" % (path, kind))
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def check_png(path):
    width, height, bpp, rows = png_rows(path)
    background = rows[0][:3]
    differ, colours = 0, set()
    for row in rows:
        for x in range(0, width * bpp, bpp):
            pixel = row[x:x + 3]
            if pixel != background:
                differ += 1
                if len(colours) < 1000:
                    colours.add(pixel)
    share = differ / float(width * height)
    if share < 0.01 or len(colours) < 8:
        fail("%s looks blank: %.2f%% of pixels differ from the background, %d colours" % (path, 100 * share, len(colours)))
    print("png: %dx%d, %.1f%% of pixels differ from the background, %d colours" % (width, height, 100 * share, len(colours)))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "dom":
        check_dom(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "png":
        check_png(sys.argv[2])
    else:
        fail("usage: report_page_check.py dom DUMPED_DOM TRACE_JSON | png SCREENSHOT")
