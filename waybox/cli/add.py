"""`waybox add`: queue URLs as one Crawl, then (unless --bg) archive them in the foreground."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape

from waybox.cli import App, err_console, pass_app
from waybox.config import check_overrides
from waybox.parsers import FORMATS, Link, ParseError, ParseResult, parse
from waybox.urlinput import Rejected, parse_url_lines


def read_input(urls: tuple[str, ...], file: str | None, fmt: str | None) -> tuple[list[Link], list[Rejected], str]:
    """Links from arguments (one URL each), a file, or stdin (`-`), with every rejected line.

    Files and stdin go through `waybox.parsers`, which detects the format (plain URLs, HTML,
    RSS/Atom, browser bookmarks, JSONL, Pinboard JSON, Pocket CSV) unless --format says it.
    """
    links: list[Link] = []
    rejected: list[Rejected] = []
    sources: list[str] = []
    args = [u for u in urls if u != "-"]
    for item in parse_url_lines(args, "argument"):
        if isinstance(item, Rejected):
            rejected.append(item)
        else:
            links.append(Link(url=item))
    if args:
        sources.append("arguments")
    if "-" in urls or file == "-":
        parsed = parse_import(sys.stdin.buffer.read(), "stdin", fmt)
        links += parsed.links
        rejected += [Rejected(f"stdin:{s.line}", s.text, s.reason) for s in parsed.skipped]
        sources.append(f"stdin ({parsed.format})")
    if file and file != "-":
        parsed = parse_import(read_import_file(file), file, fmt)
        links += parsed.links
        rejected += [Rejected(f"{file}:{s.line}", s.text, s.reason) for s in parsed.skipped]
        sources.append(f"{Path(file).resolve()} ({parsed.format})")
    return unique_links(links), rejected, ", ".join(sources)


def unique_links(links: list[Link]) -> list[Link]:
    seen: dict[str, Link] = {}
    for link in links:
        seen.setdefault(link.url, link)
    return list(seen.values())


def parse_import(data: bytes, where: str, fmt: str | None) -> ParseResult:
    try:
        return parse(data, format=fmt)
    except ParseError as err:
        for skipped in err.skipped:
            err_console.print(f"[yellow]skipped[/] {escape(where)}:{skipped.line}: {escape(skipped.reason)}")
        raise click.ClickException(f"{where}: {err}") from None


def read_import_file(file: str) -> bytes:
    try:
        return Path(file).read_bytes()
    except IsADirectoryError:
        raise click.ClickException(f"cannot read {file}: it is a folder, not a file") from None
    except OSError as err:
        raise click.ClickException(f"cannot read {file}: {err.strerror or err}") from None


def check_plugins(app: App, plugins: str) -> dict[str, str]:
    """`--plugins a,b` as this Crawl's PLUGINS override, refusing names no plugin has."""
    if not plugins:
        return {}
    names = [p.strip().lower() for p in plugins.split(",") if p.strip()]
    unknown = set(names) - set(app.config.registry.plugins if app.config.registry else ())
    if unknown:
        raise click.ClickException(f"--plugins: unknown plugin(s) {', '.join(sorted(unknown))}")
    overrides = {"PLUGINS": ",".join(names)}
    check_overrides(app.config, overrides, "--plugins")
    return overrides


@click.command()
@click.argument("urls", nargs=-1)
@click.option("--file", "-f", "file", type=str, default=None, help="Read URLs from a file (- for stdin).")
@click.option("--depth", "-d", type=click.IntRange(0, 10), default=0, show_default=True,
              help="Follow discovered links this many levels deep.")
@click.option("--tag", "-t", "tags", multiple=True, help="Tag every Snapshot (repeat or comma-separate).")
@click.option("--plugins", default="", help="Comma-separated plugins to run for this Crawl only.")
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default=None,
              help="Format of --file/stdin (default: detected).")
@click.option("--bg", is_flag=True, help="Only queue the Crawl; a running `waybox run` archives it.")
@pass_app
def add(app: App, urls: tuple[str, ...], file: str | None, depth: int, tags: tuple[str, ...],
        plugins: str, fmt: str | None, bg: bool) -> None:
    """Archive URLs given as arguments, in --file, or on stdin (-)."""
    if not urls and not file:
        raise click.UsageError("give URLs, --file PATH, or - to read stdin")
    app.boot()
    valid, rejected, source = read_input(urls, file, fmt)
    for r in rejected:
        err_console.print(f"[yellow]skipped[/] {escape(r.where)}: {escape(repr(r.text))}: {escape(r.reason)}")
    if not valid:
        raise click.ClickException("no valid URLs to add")
    overrides = check_plugins(app, plugins)

    from waybox.enqueue import ArchiveWriteError, create_crawl

    try:
        crawl = create_crawl(app.datadir, valid, depth=depth, tags=tags, config=overrides, source=source)
    except ArchiveWriteError as err:
        raise click.ClickException(f"{err.strerror}; the URLs are queued and will be archived once "
                                   "the folder accepts files again (`waybox run`)") from None
    err_console.print(
        f"queued crawl [bold]{crawl.id}[/] with {len(valid)} URL(s)"
        + (f", {len(rejected)} skipped" if rejected else "")
    )
    click.echo(str(crawl.id))
    if not bg:
        from waybox.engine.foreground import archive_in_foreground

        sys.exit(archive_in_foreground(app, crawl))


COMMANDS = [add]
