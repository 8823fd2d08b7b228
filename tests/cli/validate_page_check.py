#!/usr/bin/env python3
"""Checks for validate_page_test.sh on a `shardsim validate --report` page.

  validate_page_check.py html PAGE_HTML                        the file as written fetches nothing
  validate_page_check.py dom DUMPED_DOM VALIDATE_JSON TRACE    what Chromium made of it, against
                                                               the same run's --json and trace

Prints one line per mode saying what was checked; exits 1 with one line saying what is wrong."""

import html.parser
import json
import re
import sys

SECTIONS = ["summary", "categories", "measured-timeline", "simulated-timeline", "ops", "memory"]
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
FETCHING = {"script", "link", "img", "iframe", "object", "embed", "audio", "video", "source", "image", "use", "frame"}
# A duration as core/units.h writes it: "1.5 us", "2.3 ms", "4 s".
DURATION = re.compile(r"-?[0-9][0-9.]*(e[-+]?[0-9]+)? (ns|us|ms|s)\b")


def fail(message):
    print("validate_page_check: " + message, file=sys.stderr)
    sys.exit(1)


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent = tag, dict(attrs), parent
        self.children, self.text = [], ""

    def classes(self):
        return set((self.attrs.get("class") or "").split())

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()

    def find_all(self, tag):
        return [n for n in self.walk() if n.tag == tag]

    def all_text(self):
        return self.text + "".join(c.all_text() for c in self.children)


class Tree(html.parser.HTMLParser):
    """The document as a tree of Nodes (enough of HTML for these pages)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.at = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.at)
        self.at.children.append(node)
        if tag not in VOID:
            self.at = node

    def handle_startendtag(self, tag, attrs):
        self.at.children.append(Node(tag, attrs, self.at))

    def handle_endtag(self, tag):
        node = self.at
        while node is not self.root and node.tag != tag:
            node = node.parent
        if node is not self.root:
            self.at = node.parent

    def handle_data(self, data):
        self.at.text += data


def parse(path):
    with open(path, encoding="utf-8") as f:
        tree = Tree()
        tree.feed(f.read())
    return tree.root


def check_self_contained(root, what):
    """No element that loads anything, no attribute or style naming a URL."""
    for node in root.walk():
        if node.tag in FETCHING:
            fail("%s has a <%s> element" % (what, node.tag))
        for name, value in node.attrs.items():
            value = (value or "").strip().lower()
            if name in ("src", "href", "xlink:href", "srcset", "action", "poster", "data") or re.match(r"(https?:)?//", value):
                fail("%s: <%s %s=%r> refers to a resource" % (what, node.tag, name, value))
            if "url(" in value:
                fail("%s: <%s %s=%r> refers to a resource" % (what, node.tag, name, value))
        if node.tag == "style" and re.search(r"url\(|@import", node.text):
            fail("%s: its <style> refers to a resource" % what)


def check_html(path):
    root = parse(path)
    check_self_contained(root, path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for url in re.findall(r"""["'(]\s*(https?://[^"')\s]*)""", text):
        fail("%s refers to %s" % (path, url))
    print("html: no script, link, image or URL in %s" % path)


def sections(root):
    found = {}
    for node in root.walk():
        if node.attrs.get("id") in SECTIONS:
            found[node.attrs["id"]] = node
    missing = [s for s in SECTIONS if s not in found]
    if missing:
        fail("the page has no element with id %s" % ", ".join(missing))
    return found


def check_categories(section, categories):
    rects = [r for r in section.find_all("rect")]
    for row in categories:
        if max(row.get(k, 0) for k in ("measured_s", "estimated_s", "simulated_s")) < 1e-9:
            continue  # no time anywhere: in the table only
        wanted = ["me"] + (["es", "si"] if "estimated_s" in row else [])
        for source in wanted:
            tags = {source, "c-" + row["category"]}
            if not any(tags <= r.classes() for r in rects):
                fail("#categories has no bar of class '%s' for category %s" % (" ".join(sorted(tags)), row["category"]))
    for r in rects:
        title = "".join(t.all_text() for t in r.children if t.tag == "title")
        if not DURATION.search(title):
            fail("#categories: bar %r has no duration with its unit" % title)
        if ({"es", "si"} & r.classes()) and not re.search(r"\(([+-][0-9.]+%|-)\)", title):
            fail("#categories: prediction bar %r has no error %%" % title)
    return len(rects)


def timeline_svg(section, name):
    svgs = [s for s in section.find_all("svg") if "timeline" in s.classes()]
    if len(svgs) != 1:
        fail("#%s has %d svg.timeline, not 1" % (name, len(svgs)))
    return svgs[0]


def lanes(svg):
    return {g.attrs["data-lane"]: [r for r in g.find_all("rect") if "op" in r.classes()] for g in svg.find_all("g") if "data-lane" in g.attrs}


def check_measured(section, report, trace):
    step = int(section.attrs.get("data-step", "-1"))
    if step < 1:
        fail("#measured-timeline draws step %d, not one after the first" % step)
    svg = timeline_svg(section, "measured-timeline")
    drawn = lanes(svg)
    expected = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and "key" in e.get("args", {}) and e["args"].get("step") == step:
            expected[e["tid"]] = expected.get(e["tid"], 0) + 1
    for rank in range(report["ranks"]):
        rects = drawn.get("rank %d" % rank)
        if rects is None:
            fail("#measured-timeline has no row for rank %d (rows: %s)" % (rank, sorted(drawn)))
        if len(rects) == 0 or len(rects) != expected.get(rank, 0):
            fail("#measured-timeline row of rank %d draws %d spans; the trace has %d in step %d" % (rank, len(rects), expected.get(rank, 0), step))
        classes = set().union(*(r.classes() for r in rects)) - {"op"}
        if not classes:
            fail("#measured-timeline: rank %d's spans have no category class" % rank)
    return svg, step, sum(len(r) for r in drawn.values())


def check_simulated(section):
    svg = timeline_svg(section, "simulated-timeline")
    drawn = lanes(svg)
    if not drawn or not any(drawn.values()):
        fail("#simulated-timeline draws no simulated op")
    compute = [name for name in drawn if name.endswith(" compute")]
    if not compute or not all(drawn[name] for name in compute):
        fail("#simulated-timeline has a device without compute ops (lanes: %s)" % sorted(drawn))
    return svg, len(drawn), sum(len(r) for r in drawn.values())


def table_rows(section, name):
    tables = section.find_all("table")
    if len(tables) != 1:
        fail("#%s has %d tables, not 1" % (name, len(tables)))
    return [tr for tr in tables[0].find_all("tr") if not tr.find_all("th")]


def check_dom(dom_path, report_path, trace_path):
    root = parse(dom_path)
    with open(report_path, encoding="utf-8") as f:
        report = json.load(f)
    with open(trace_path, encoding="utf-8") as f:
        trace = json.load(f)
    check_self_contained(root, dom_path)
    found = sections(root)
    header = found["summary"].all_text()
    for words in (report["model"], "%d ranks" % report["ranks"], "time-faithful", report["cluster_file"]):
        if words not in header:
            fail("the header does not say %r" % words)
    bars = check_categories(found["categories"], report["categories"])
    measured, step, spans = check_measured(found["measured-timeline"], report, trace)
    simulated, sim_lanes, ops = check_simulated(found["simulated-timeline"])
    for attr in ("data-axis-end-s", "width"):
        if measured.attrs.get(attr) != simulated.attrs.get(attr):
            fail("the timelines differ in %s (%s, %s): not one time axis" % (attr, measured.attrs.get(attr), simulated.attrs.get(attr)))
    rows = table_rows(found["ops"], "ops")
    if len(rows) != min(15, len(report["ops"])) or not rows:
        fail("#ops has %d rows for %d ops (the first 15 expected)" % (len(rows), len(report["ops"])))
    if report["memory"]:
        memory = table_rows(found["memory"], "memory")
        if len(memory) != len(report["memory"]):
            fail("#memory has %d rows for %d memory rows" % (len(memory), len(report["memory"])))
        for tr, row in zip(memory, report["memory"]):
            note = tr.find_all("td")[-1].all_text().strip()
            if row["comparable"] == bool(note):
                fail("#memory: rank %d %s has note %r but comparable is %s" % (row["rank"], row["category"], note, row["comparable"]))
    print("dom: %d sections, %d category bars, step %d with %d measured spans on %d ranks, %d simulated ops on %d lanes, "
          "axis to %s s, %d ops rows, %d memory rows" % (len(found), bars, step, spans, report["ranks"], ops, sim_lanes,
                                                        measured.attrs["data-axis-end-s"], len(rows), len(report["memory"])))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "html":
        check_html(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "dom":
        check_dom(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        fail("usage: validate_page_check.py html PAGE_HTML | dom DUMPED_DOM VALIDATE_JSON TRACE_JSON")
