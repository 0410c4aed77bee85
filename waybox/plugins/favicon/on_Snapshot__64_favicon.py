"""Save the site's favicon: the page's <link rel="icon"> (or apple-touch-icon), else /favicon.ico.

Output: `favicon.<ext>` (ico, png, gif, jpg, svg or webp, from the bytes themselves).
"""

from __future__ import annotations

import contextlib
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit, urlunsplit

from waybox import hookkit

MAX_ICON_BYTES = 5_000_000
MAGIC = [
    (b"\x00\x00\x01\x00", "ico"), (b"\x89PNG\r\n\x1a\n", "png"), (b"GIF87a", "gif"), (b"GIF89a", "gif"),
    (b"\xff\xd8\xff", "jpg"), (b"BM", "bmp"),
]
TYPE_EXT = {"image/x-icon": "ico", "image/vnd.microsoft.icon": "ico", "image/png": "png", "image/gif": "gif",
            "image/jpeg": "jpg", "image/svg+xml": "svg", "image/webp": "webp", "image/bmp": "bmp"}


class IconLinks(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.icons: list[tuple[int, str]] = []
        self.base: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k.lower(): (v or "") for k, v in attrs}
        if tag == "base" and self.base is None and values.get("href"):
            self.base = values["href"]
        if tag != "link" or not values.get("href"):
            return
        rel = values.get("rel", "").lower().split()
        if "icon" in rel:
            self.icons.append((0 if "shortcut" in rel or len(rel) == 1 else 1, values["href"]))
        elif "apple-touch-icon" in rel or "apple-touch-icon-precomposed" in rel:
            self.icons.append((2, values["href"]))


def declared_icons(html: bytes, page_url: str) -> list[str]:
    parser = IconLinks()
    try:
        parser.feed(html.decode("utf-8", "replace"))
        parser.close()
    except Exception:  # noqa: BLE001 - html.parser asserts on some garbage; use what it found
        pass
    base = page_url
    if parser.base:
        with contextlib.suppress(ValueError):
            base = urljoin(page_url, parser.base)
    urls = []
    for _rank, href in sorted(parser.icons, key=lambda icon: icon[0]):
        try:
            urls.append(urljoin(base, href.strip()))
        except ValueError:
            continue
    return urls


def icon_ext(body: bytes, content_type: str) -> str | None:
    for magic, ext in MAGIC:
        if body.startswith(magic):
            return ext
    if body[:12].startswith(b"RIFF") and body[8:12] == b"WEBP":
        return "webp"
    head = body[:1000].lstrip().lower()
    if head.startswith((b"<svg", b"<?xml")) and b"<svg" in head:
        return "svg"
    if content_type in TYPE_EXT and not head.startswith((b"<!doctype", b"<html")):
        return TYPE_EXT[content_type]
    return None


def page_html(hook: hookkit.Hook) -> bytes:
    if hook.snap_dir is not None:
        main = hookkit.wget_main_file(hook.snap_dir / "wget", hook.url)
        if main is not None:
            with hookkit.original_of(main).open("rb") as f:
                return f.read(2_000_000)
    try:
        response = hook.fetch(hook.url, max_bytes=2_000_000)
    except hookkit.FetchError as err:
        hook.log(f"cannot fetch the page: {err}")
        raise SystemExit(1) from None
    return response.body if response.ok and "html" in response.content_type else b""


def main(hook: hookkit.Hook) -> int:
    parts = urlsplit(hook.url)
    origin = urlunsplit((parts.scheme, parts.netloc, "/", "", ""))
    candidates = declared_icons(page_html(hook), hook.url) if parts.scheme in ("http", "https") else []
    candidates.append(urljoin(origin, "/favicon.ico"))
    provider = hook.get("FAVICON_PROVIDER", "")
    if provider and parts.hostname:
        candidates.append(provider.replace("{}", parts.hostname))
    tried = []
    for url in dict.fromkeys(candidates):
        if not url.startswith(("http://", "https://")):
            continue
        tried.append(url)
        try:
            response = hook.fetch(url, max_bytes=MAX_ICON_BYTES, timeout=min(20, hook.remaining()))
        except hookkit.FetchError as err:
            hook.log(f"{url}: {err}")
            continue
        if not response.ok or not response.body or response.truncated:
            hook.log(f"{url}: {response.status} {response.reason}")
            continue
        ext = icon_ext(response.body, response.content_type)
        if ext is None:
            hook.log(f"{url}: not an image ({response.content_type or 'no content type'})")
            continue
        name = f"favicon.{ext}"
        (hook.cwd / name).write_bytes(response.body)
        hook.result("succeeded", name, [name], {"url": url, "content_type": response.content_type,
                                               "size": len(response.body)})
        return 0
    hook.result("failed", f"no favicon found (tried {len(tried)} URL(s))", output_json={"tried": tried})
    return 0


if __name__ == "__main__":
    hookkit.run(__file__, main)
