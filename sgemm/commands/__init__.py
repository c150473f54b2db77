"""The `sgemm` commands, one module a group: each adds its commands' arguments to the parser (sgemm.cli) and has their
handlers, which call the stage that owns the work, print what it did and return the exit status."""

from __future__ import annotations

from pathlib import Path

# Exit statuses of every command but the gate (which has its own, in sgemm.gate.run).
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
# Every command's, the gate's too, when Ctrl-C stops it: 128 + SIGINT, as a shell reports a process SIGINT ended.
EXIT_INTERRUPTED = 130


def print_table(header: list[str], rows: list[list[str]], width: int | None = None) -> None:
    """Columns padded to their widest cell; with `width`, the last column, its heading too, is cut (with '…') so that
    every line fits that many characters, down to one character of it."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    if width is not None:
        room = width - sum(widths[:-1]) - 2 * (len(widths) - 1)
        widths[-1] = max(min(widths[-1], room), 1)
    for line in [header, ["-" * w for w in widths], *rows]:
        cells = [str(cell) for cell in line]
        if len(cells[-1]) > widths[-1]:
            cells[-1] = cells[-1][:widths[-1] - 1] + "…" if widths[-1] > 1 else "…"
        print("  ".join(cell.ljust(w) for cell, w in zip(cells, widths)).rstrip())


def writable_file_problem(option: str, text: str) -> str | None:
    """Why a file asked for with `option` cannot be written, found before the work that would fill it: by trying
    (sgemm.writable), since a read-only mount or /proc passes every look at the folder."""
    from ..writable import file_problem, not_a_folder

    path = Path(text).expanduser()
    if path.is_dir():
        return f"{option} {text} is a directory: name a file"
    if not path.resolve().parent.is_dir():
        return f"{option} {text}: the folder {path.resolve().parent} {not_a_folder(path.resolve().parent)}"
    if problem := file_problem(path.resolve()):
        return f"{option} {text}: {problem}"
    return None


def shown_path(text: str) -> str:
    """A path as a page made here may show it: relative to the current directory when inside it, else its last
    part alone (a scratch directory of the box that made the page says nothing to a reader elsewhere)."""
    path = Path(text).expanduser()
    if not path.is_absolute():
        return text
    try:
        return str(path.relative_to(Path.cwd())) or "."
    except ValueError:
        return path.name


def command_line(args) -> str:
    """`sgemm ...` as run, each path in it as shown_path shows it."""
    return "sgemm " + " ".join(shown_path(word) if word.startswith(("/", "~")) else word for word in args.argv)


def made_from_results(args) -> list[str]:
    """When and how a page made from asv results (or, with --points, from an earlier page's points.json) was made:
    the first lines of its header."""
    import datetime

    source = (f"the points of an earlier page, `{shown_path(args.points)}`" if getattr(args, "points", None)
              else f"the asv results in `{shown_path(args.results)}`")
    return [f"Made: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC from {source}",
            f"Command: `{command_line(args)}`"]
