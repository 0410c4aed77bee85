"""Clone URLs that are git repositories (skipped, cheaply, for every other URL).

A URL is tried when its path ends in `.git`, when it is `/<owner>/<repo>` on a host in
GIT_DOMAINS, or (GIT_PROBE) when `git ls-remote` answers for it; only URLs without a file
extension or query are probed. The clone goes to `<repo name>/` in this hook's folder.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from waybox import hookkit

DOCUMENT_EXT_RE = re.compile(r"\.(?!git$)[A-Za-z0-9]{1,5}$")
NOT_FOUND_RE = re.compile(r"(?i)(not found|does not exist|not valid|not a git repository|repository .* not found|"
                          r"HTTP 40[134]|returned error: 40[134]|Authentication failed|could not read Username)")


def repo_name(url: str) -> str:
    path = PurePosixPath(urlsplit(url).path.rstrip("/"))
    name = path.name[:-4] if path.name.endswith(".git") else path.name
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return name or "repo"


def kind_of(url: str, domains: set[str]) -> str:
    """'git' (looks like a repository), 'probe' (ask ls-remote) or 'no'."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https", "ftp"):
        return "no"
    path = parts.path.rstrip("/")
    if path.endswith(".git"):
        return "git"
    host = (parts.hostname or "").removeprefix("www.")
    segments = [s for s in path.split("/") if s]
    if host in domains:
        return "git" if len(segments) == 2 and not parts.query else "no"
    if parts.query or DOCUMENT_EXT_RE.search(path):
        return "no"
    return "probe"


def git_env(hook: hookkit.Hook) -> dict[str, str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "SSH_ASKPASS": "true",
           "GCM_INTERACTIVE": "never"}
    if not hook.check_ssl:
        env["GIT_SSL_NO_VERIFY"] = "true"
    return env


def git_config_args(hook: hookkit.Hook) -> list[str]:
    args = []
    if hook.user_agent:
        args += ["-c", f"http.userAgent={hook.user_agent}"]
    if hook.cookies_file and Path(hook.cookies_file).is_file():
        args += ["-c", f"http.cookieFile={hook.cookies_file}"]
    return args


def main(hook: hookkit.Hook) -> int:
    domains = {d.strip().lower().removeprefix("www.") for d in hook.get("GIT_DOMAINS", "").split(",") if d.strip()}
    kind = kind_of(hook.url, domains)
    if kind == "no" or (kind == "probe" and not hook.get("GIT_PROBE", True)):
        hook.skip("not a git repository URL")
    binary = hook.require(hook.get("GIT_BINARY", "git"), "apt install git")
    env = git_env(hook)
    if kind == "probe":
        probe = hook.run_binary([binary, *git_config_args(hook), "ls-remote", "--quiet", "--", hook.url, "HEAD"],
                                timeout=hook.get("GIT_PROBE_TIMEOUT", 15), env=env, echo_stderr=False)
        if probe.exit_code != 0:
            hook.skip("not a git repository (git ls-remote does not answer for it)")

    name = repo_name(hook.url)
    dest = hook.cwd / name
    partial = hook.cwd / f".{name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    cmd = [binary, *git_config_args(hook), "clone", *hook.get("GIT_ARGS", []), "--", hook.url, str(partial)]
    try:
        ran = hook.run_binary(cmd, env=env)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if ran.exit_code != 0 or ran.timed_out:
        shutil.rmtree(partial, ignore_errors=True)
        if not ran.timed_out and kind == "git" and NOT_FOUND_RE.search(ran.stderr):
            hook.result("failed", f"not a reachable git repository: {last_line(ran.stderr)}")
            return 0
        hook.log(f"git clone failed (exit {ran.exit_code}{', timed out' if ran.timed_out else ''})")
        return 1
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)

    info = {"repo": name}
    head = hook.run_binary([binary, "-C", str(dest), "log", "-1", "--format=%H%n%s", "HEAD"], timeout=30, env=env)
    if head.exit_code == 0 and head.stdout.strip():
        sha, _, subject = head.stdout.strip().partition("\n")
        info.update(head=sha, subject=subject)
    else:
        info["head"] = None  # an empty repository
    branch = hook.run_binary([binary, "-C", str(dest), "rev-parse", "--abbrev-ref", "HEAD"], timeout=30, env=env)
    if branch.exit_code == 0:
        info["branch"] = branch.stdout.strip()
    hook.result("succeeded", name, [name], info)
    return 0


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no message"


if __name__ == "__main__":
    hookkit.run(__file__, main)
