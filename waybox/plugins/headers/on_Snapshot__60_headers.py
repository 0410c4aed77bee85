"""The page's HTTP response headers, fetched without the browser.

Only when the browser is off (CHROME_ENABLED False or unset): with it on, the chrome plugin's
listeners record the headers of the real page load, and this hook is skipped.
Output: `headers.json` with the status, the final URL, the redirects and the headers.
"""

from __future__ import annotations

import json
import os

from waybox import hookkit

TRUE_WORDS = {"1", "true", "yes", "on", "y"}


def main(hook: hookkit.Hook) -> int:
    if os.environ.get("CHROME_ENABLED", "").strip().lower() in TRUE_WORDS:
        hook.skip("the browser records the headers (CHROME_ENABLED is True)")
    try:
        response = hook.fetch(hook.url, max_bytes=0)
    except hookkit.FetchError as err:
        hook.log(f"no response: {err}")
        return 1
    headers: dict[str, str | list[str]] = {}
    for name, value in response.headers:
        if name in headers:
            previous = headers[name]
            headers[name] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            headers[name] = value
    data = {
        "url": hook.url,
        "final_url": response.url,
        "status": response.status,
        "reason": response.reason,
        "http_version": response.http_version,
        "redirects": response.redirects,
        "headers": headers,
        "fetched_at": hookkit.now_iso(),
    }
    (hook.cwd / "headers.json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    summary = {"status": response.status, "content_type": response.header("Content-Type"),
               "server": response.header("Server"), "redirects": len(response.redirects)}
    hook.result("succeeded", "headers.json", ["headers.json"], summary)
    return 0


if __name__ == "__main__":
    hookkit.run(__file__, main)
