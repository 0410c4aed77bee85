"""Save the page and its requisites with wget, plus a WARC and its CDX index.

Output (in this hook's folder): `<host>/<path>` as wget mirrors it (links converted for offline
viewing, the page as served kept beside it as `*.orig`), `warc/<timestamp>.warc.gz` and
`warc/<timestamp>.cdx`. output_str is the page's file.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from waybox import hookkit

SAVED_RE = re.compile(r'^\S+ \S+ URL:\s*(?P<url>\S+) \[[^\]]*\] -> "(?P<path>[^"]+)"')
HTTP_ERROR_RE = re.compile(r"ERROR (\d{3}): ?(.*?)\.?\s*$", re.M)
# wget exit codes: https://www.gnu.org/software/wget/manual/html_node/Exit-Status.html
SOFT_EXITS = {5: "TLS certificate verification failed (set CHECK_SSL_VALIDITY=False to accept it)",
              6: "the server asked for credentials", 8: "the server answered with an error"}


def main(hook: hookkit.Hook) -> int:
    binary = hook.require(hook.get("WGET_BINARY", "wget"), "apt install wget")
    warc_base = None
    cmd = [binary, *hook.get("WGET_ARGS", []), f"--timeout={max(1, int(min(hook.remaining(), 60)))}"]
    if hook.user_agent:
        cmd.append(f"--user-agent={hook.user_agent}")
    if not hook.check_ssl:
        cmd.append("--no-check-certificate")
    if hook.cookies_file:
        if Path(hook.cookies_file).is_file():
            cmd.append(f"--load-cookies={hook.cookies_file}")
        else:
            hook.log(f"cookies file {hook.cookies_file} does not exist: fetching without cookies")
    if hook.get("WGET_WARC", True):
        (hook.cwd / "warc").mkdir(exist_ok=True)
        warc_base = f"warc/{int(time.time())}"
        cmd += [f"--warc-file={warc_base}", "--warc-cdx"]
    cmd += [*hook.get("WGET_EXTRA_ARGS", []), "--", hook.url]

    ran = hook.run_binary(cmd)
    files = [f for f in hook.files() if not f.endswith(".tmp")]
    main_file = find_main_file(hook, ran.stderr)
    warc_files = [f for f in files if f.startswith("warc/")]
    summary = {"exit_code": ran.exit_code, "files": len(files), "main": main_file,
               "warc": next((f for f in warc_files if f.endswith((".warc.gz", ".warc"))), None),
               "cdx": next((f for f in warc_files if f.endswith(".cdx")), None)}

    if ran.timed_out:
        hook.log(f"wget did not finish within {hook.timeout:.0f}s")
        if main_file:
            hook.result("succeeded", main_file, files, {**summary, "partial": True})
            return 0
        return 1
    if main_file:
        if ran.exit_code:
            hook.log(f"wget exited {ran.exit_code} (some requisites may be missing)")
        hook.result("succeeded", main_file, files, summary)
        return 0
    http_error = HTTP_ERROR_RE.findall(ran.stderr)
    if ran.exit_code == 8 and http_error:
        code, text = http_error[0]
        status = "failed"
        reason = f"{code} {text}".strip()
        if code.startswith("5"):  # a server error may be temporary: retry later
            hook.log(f"server error {reason}")
            return 1
        hook.result(status, reason, files, summary)
        return 0
    if ran.exit_code in SOFT_EXITS:
        hook.result("failed", SOFT_EXITS[ran.exit_code], files, summary)
        return 0
    hook.log(f"wget exited {ran.exit_code} without saving the page")
    return 1


def find_main_file(hook: hookkit.Hook, log: str) -> str | None:
    """The page's file: the first file wget's log says it saved, else where its layout puts the URL."""
    for line in log.splitlines():
        match = SAVED_RE.match(line.strip())
        if match:
            path = (hook.cwd / match["path"]).resolve()
            if path.is_file() and path.is_relative_to(hook.cwd.resolve()):
                return str(path.relative_to(hook.cwd.resolve()))
    found = hookkit.wget_main_file(hook.cwd, hook.url)
    return str(found.relative_to(hook.cwd)) if found else None


if __name__ == "__main__":
    hookkit.run(__file__, main)
