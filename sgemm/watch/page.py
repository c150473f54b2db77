"""The watch's share of a published site: the regressions page (`regressions/index.html`), the open notices of every
GPU first, newest first, each with a small graph of its cases around the step and its bisect result, then the
closed and dismissed ones; and beside the site, `notices.json`, the same notices for machines (sgemm.watch.notices).
asv's own `regressions.json` is asv's and is left as it is. The site takes them as one of its parts (WatchPages);
it knows nothing of the watch.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path

from ..catalogue import Kernel
from ..style import PAGE_STYLE, html_with_code, palette
from .notices import NOTICES_FILE, OPEN_STATES, Found, Report, notices_document, watch, write_notices

PAGE_DIR = "regressions"
NAV_LABEL = "Regressions"
# asv's own regressions page (its step detection, with no confirmation or bisect) leaves the navbar, so that the
# site has one page of that name; it is still at index.html#/regressions.
ASV_NAV_ITEM = "nav-li-regressions"
GRAPH_COMMITS = 10  # commits shown either side of the step


def step_figure(notice: dict, found: list[Found]):
    """Each case's figure over the commits around the step, relative to its level before it (ImportError without
    matplotlib)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 2.4), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    colours = palette()
    for index, each in enumerate(found[:6]):
        points = each.series.points
        step_at = each.step.after.start
        shown = points[max(0, step_at - GRAPH_COMMITS):step_at + GRAPH_COMMITS]
        base = each.step.before.level
        x = [point.position - points[step_at].position for point in shown]
        m, n, k = each.series.case.shape
        label = each.series.case.kernel + (f" {m}" if m == n == k else f" {m}x{n}x{k}")
        axes.plot(x, [point.value / base for point in shown], marker="o", markersize=3, linewidth=1,
                  color=colours[index % len(colours)], label=label)
    axes.axvline(-0.5, color="#c00", linewidth=0.8, linestyle="--")
    axes.axhline(1.0, color="#888", linewidth=0.5)
    axes.set_xlabel("commits from the first slow one")
    axes.set_ylabel("over the level before")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, loc="upper left")
    axes.set_title(f"{notice['gpu_model']}: {', '.join(notice['kernels'])}", fontsize=8)
    return figure


def _commit(sha: str | None, url: str | None = None) -> str:
    if not sha:
        return "not known (a range)"
    text = f"<code>{html.escape(sha[:12])}</code>"
    return f'<a href="{html.escape(url)}">{text}</a>' if url else text


def _side(side: dict) -> str:
    clock = f"{side['sm_clock_mhz']:.0f} MHz" if side.get("sm_clock_mhz") is not None else "clock not recorded"
    power = f"{side['power_w']:.0f} W" if side.get("power_w") is not None else "power not recorded"
    return f"{clock}, {power}"


def _notice_html(notice: dict, image: str | None) -> list[str]:
    where = (f"first bad {_commit(notice['first_bad'], notice['commit_url'])}" if notice["first_bad"] else
             f"between {_commit(notice['last_good'])} and {_commit(notice['bad'], notice['commit_url'])} "
             f"({notice['commits_between']} commits not measured between)")
    lines = [f"<h3>{html.escape(', '.join(notice['kernels']))} on {html.escape(notice['gpu_model'])}: "
             f"{html.escape(notice['state'])}{'' if notice.get('filed') else ' (not filed yet)'}</h3>",
             f"<p>{where}; last good {_commit(notice['last_good'])}; id <code>{html.escape(notice['id'])}</code>"
             + (f"; environment changed: {html.escape('; '.join(notice['environment']))}"
                if notice["environment"] else "") + "</p>"]
    bisect = notice.get("bisect")
    if bisect:
        lines.append(f"<p>Bisect: {html.escape(bisect['verdict'])}, first bad {_commit(bisect['first_bad'])}"
                     + (f", {bisect['builds']} builds" if bisect["builds"] is not None else "")
                     + (f", {bisect['wall_s']:.0f} s" if bisect["wall_s"] is not None else "") + "</p>")
    else:
        lines.append("<p>Bisect: none yet.</p>")
    rows = []
    for case in notice["cases"]:
        shape = "x".join(map(str, case["shape"]))
        low, high = case["interval"]
        confirmed = case.get("confirmation")
        rows.append(f"<tr><td><a href=\"../{html.escape(case['graph_url'])}\"><code>{html.escape(case['case'])}"
                    f"</code> {html.escape(shape)}</a></td><td>{html.escape(case['track'])}</td>"
                    f"<td>{case['ratio']:.4f} ({low:.4f}-{high:.4f})</td><td>{_side(case['before'])}</td>"
                    f"<td>{_side(case['after'])}</td><td>"
                    + (html.escape(f"{confirmed['verdict']} {confirmed['ratio']:.4f}") if confirmed else "not yet")
                    + "</td></tr>")
    lines.append("<table><thead><tr><th>case</th><th>track</th><th>ratio after/before (95%)</th>"
                 "<th>before: SM clock, power</th><th>after</th><th>paired confirmation</th></tr></thead><tbody>"
                 + "".join(rows) + "</tbody></table>")
    if image:
        lines.append(f'<p><img src="{html.escape(image)}" alt="the cases around the step"></p>')
    return lines


def write_page(out_dir: Path, reports: dict[str, Report], header: list[str]) -> list[Path]:
    """regressions/index.html and a PNG a notice; returns what was written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    notices = [notice for machine in sorted(reports) for notice in reports[machine].notices]
    # Newest first across GPUs: a notice's commit's place on the branch is what every machine shares.
    open_notices = [n for n in notices if n["state"] in OPEN_STATES]
    closed = [n for n in notices if n["state"] not in OPEN_STATES]
    page = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>Regressions</title>"
            f"<style>{PAGE_STYLE}</style></head><body>", '<p><a href="../index.html">&larr; benchmark history</a> '
            '&middot; <a href="../notices.json">notices.json</a></p>', "<h1>Regressions</h1><ul>",
            *(f"<li>{html_with_code(line)}</li>" for line in header),
            *(f"<li>{html.escape(note)}</li>" for report in reports.values() for note in report.notes),
            "</ul><p>A step in a machine's history (change points of each case's time over its reference build, or "
            "its round medians), grouped by kernel and commit. <b>candidate</b>: found, not confirmed; "
            "<b>regression</b>: a paired measurement of the two commits said DIFFERENT; <b>environment</b>: the "
            "driver, CUDA, cuBLAS or card changed across the step; <b>closed</b>: a later step undid it; "
            "<b>dismissed</b>: the paired measurement said SAME; <b>gone</b>: no longer seen. A candidate "
            "becomes an issue once it is <b>filed</b>: seen at two publishes in a row with enough commits after "
            "it, or confirmed DIFFERENT.</p>"]
    written: list[Path] = []
    for title, chosen in ((f"Open ({len(open_notices)})", open_notices), (f"Closed ({len(closed)})", closed)):
        page.append(f"<h2>{html.escape(title)}</h2>")
        if not chosen:
            page.append("<p>None.</p>")
        for notice in chosen:
            image = None
            found = reports[notice["machine"]].steps.get(notice["id"], [])
            if found:
                try:
                    figure = step_figure(notice, found)
                except ImportError:
                    figure = None
                if figure is not None:
                    image = f"{notice['id']}.png"
                    figure.savefig(out_dir / image, dpi=90)
                    written.append(out_dir / image)
            page += _notice_html(notice, image)
    page.append("</body></html>")
    index = out_dir / "index.html"
    index.write_text("\n".join(page) + "\n")
    return [index, *written]


@dataclass
class WatchPages:
    """Every machine's history of a results tree watched for steps, as a part of its site: read under the publish's
    locks before anything is built (WatchError or ConfirmationsError, naming the file, stops the publish), then
    written as notices.json and the regressions page, linked from the navbar. `commit_url` (a prefix to which a
    commit's hash is added) links each notice to its commit."""

    results_dir: Path
    repo: Path
    kernels: dict[str, Kernel]
    header: list[str]
    commit_url: str | None = None
    reports: dict[str, Report] = field(default_factory=dict)  # each machine's, by machine, once prepared

    def prepare(self) -> None:
        self.reports = watch(self.results_dir, self.repo, self.kernels, self.commit_url)

    def write(self, built: Path) -> list[tuple[str, str, str | None]]:
        document = notices_document(self.reports)
        write_notices(built / NOTICES_FILE, document)
        # The watch's memory for the next publish: where a notice's step has left the window, and how many publishes
        # in a row saw it (the history workflow puts the site's copy in the same place).
        write_notices(self.results_dir / NOTICES_FILE, document)
        write_page(built / PAGE_DIR, self.reports, self.header)
        return [(f"{PAGE_DIR}/index.html", NAV_LABEL, ASV_NAV_ITEM)]
