"""Checks of the report page as a browser renders it (boxes from ``browser.MEASURE``) and of
its markup, shared by the page tests."""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path
from xml.etree import ElementTree

from spark.page.html_report import PRINT_MARGIN_MM

from .browser import Chromium

SCREEN_WIDTH = 1280
# Within a box edge, half a pixel is rounding, not overlap.
TOLERANCE = 0.5


def inline_svgs(page: str) -> list[ElementTree.Element]:
    """Each inline SVG of the page, parsed as XML (it fails on markup that is not well formed,
    such as an attribute given twice)."""
    return [ElementTree.fromstring(svg) for svg in re.findall(r"<svg\b.*?</svg>", page, flags=re.DOTALL)]


def _overlap(a: dict, b: dict) -> bool:
    return min(a["right"], b["right"]) - max(a["left"], b["left"]) > TOLERANCE and min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > TOLERANCE


def _segment_crosses_box(p: list[float], q: list[float], box: dict) -> bool:
    """Whether the segment p-q passes through the box (Liang-Barsky clipping)."""
    (x0, y0), (x1, y1) = p, q
    dx, dy = x1 - x0, y1 - y0
    low, high = 0.0, 1.0
    edges = (
        (-dx, x0 - box["left"] - TOLERANCE),
        (dx, box["right"] - TOLERANCE - x0),
        (-dy, y0 - box["top"] - TOLERANCE),
        (dy, box["bottom"] - TOLERANCE - y0),
    )
    for direction, distance in edges:
        if direction == 0:
            if distance < 0:
                return False
            continue
        ratio = distance / direction
        if direction < 0:
            low = max(low, ratio)
        else:
            high = min(high, ratio)
        if low > high:
            return False
    return True


def overlapping_texts(measured: dict) -> list[tuple[str, str, str]]:
    """(chart, text, text) for every two texts of a chart whose boxes overlap."""
    found = []
    for chart in measured["charts"]:
        texts = [t for t in chart["texts"] if t["text"].strip()]
        for i, a in enumerate(texts):
            found += [(chart["kind"], a["text"], b["text"]) for b in texts[i + 1 :] if _overlap(a, b)]
    return found


def texts_on_data_lines(measured: dict) -> list[tuple[str, str]]:
    """(chart, text) for every text that a data line runs through."""
    found = []
    for chart in measured["charts"]:
        for text in chart["texts"]:
            if any(_segment_crosses_box(p, q, text) for line in chart["lines"] for p, q in pairwise(line)):
                found.append((chart["kind"], text["text"]))
    return found


def texts_outside_their_chart(measured: dict) -> list[tuple[str, str]]:
    found = []
    for chart in measured["charts"]:
        box = chart["box"]
        for text in chart["texts"]:
            inside = text["left"] >= box["left"] - TOLERANCE and text["right"] <= box["right"] + TOLERANCE
            inside &= text["top"] >= box["top"] - TOLERANCE and text["bottom"] <= box["bottom"] + TOLERANCE
            if not inside:
                found.append((chart["kind"], text["text"]))
    return found


def tables_wider_than_the_page(measured: dict) -> list[str]:
    """Tables (by name) that scroll, or reach past the page, or whose header cells do."""
    width = measured["width"]
    found = []
    for table in measured["tables"]:
        reaches = [table["box"]] + table["headers"]
        if table["scrollWidth"] > table["clientWidth"] + TOLERANCE or any(box["right"] > width + TOLERANCE for box in reaches):
            found.append(table["name"])
    return found


def print_width(pdf: bytes) -> int:
    """Width in CSS pixels of the printable area of the PDF's first page (its MediaBox less the
    page's margins)."""
    media = re.search(rb"/MediaBox\s*\[\s*0\s+0\s+([\d.]+)\s+([\d.]+)\s*\]", pdf)
    assert media, "a PDF with a MediaBox"
    width_pt, height_pt = float(media.group(1)), float(media.group(2))
    assert width_pt > height_pt, "printed landscape"
    return int((width_pt / 72 - 2 * PRINT_MARGIN_MM / 25.4) * 96)


def check_layout(page: Path, browser: Chromium, shots: Path | None = None) -> dict[str, dict]:
    """Render ``page`` at SCREEN_WIDTH and as printed; assert no text of a chart overlaps
    another or a data line or leaves its chart, and that every table fits the width. Returns
    what was measured per medium (and the PDF under "pdf")."""
    results: dict[str, dict] = {}
    browser.load(page.as_uri(), SCREEN_WIDTH)
    results["screen"] = browser.measure()
    if shots:
        shots.joinpath("screen.png").write_bytes(browser.screenshot(SCREEN_WIDTH))
    browser.load(page.as_uri(), SCREEN_WIDTH, media="print")
    pdf = browser.print_to_pdf()
    if shots:
        shots.joinpath("page.pdf").write_bytes(pdf)
    width = print_width(pdf)
    browser.load(page.as_uri(), width, media="print")
    results["print"] = browser.measure()
    results["print"]["pdf"] = pdf
    for medium, measured in results.items():
        assert measured["charts"], medium
        assert measured["scrollWidth"] <= measured["width"], f"{medium}: the page scrolls sideways"
        assert overlapping_texts(measured) == [], medium
        assert texts_on_data_lines(measured) == [], medium
        assert texts_outside_their_chart(measured) == [], medium
        assert tables_wider_than_the_page(measured) == [], medium
    assert browser.errors() == []
    return results
