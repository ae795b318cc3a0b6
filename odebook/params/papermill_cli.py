"""papermill's own parameter options, read again inside the notebook's kernel by the profile files' rules.

papermill parses ``-f FILE``, ``-y TEXT`` and ``-b BASE64`` itself, before the kernel starts, and keeps the last value
of a key written twice, while a profile file with a duplicate key is refused (odebook.params.schema.load_yaml). The
kernel's parent is papermill: its command line (Linux's /proc) names the options, and each is read again here."""

from __future__ import annotations

import base64
import os
from pathlib import Path

from odebook.params.schema import yaml_mapping

__all__ = ["PAPERMILL_FILE_OPTIONS", "file_options", "check_papermill_files"]

PAPERMILL_FILE_OPTIONS = {"-f": "file", "--parameters_file": "file", "-y": "yaml", "--parameters_yaml": "yaml",
                          "-b": "base64", "--parameters_base64": "base64"}


def file_options(argv: list[str]) -> list[tuple[str, str]]:
    """The (option, value) pairs of ``PAPERMILL_FILE_OPTIONS`` in a papermill command line, in every spelling its
    parser (click) accepts: ``-f F``, ``-fF``, ``--parameters_file F`` and ``--parameters_file=F``."""
    found, args = [], iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if eq and name in PAPERMILL_FILE_OPTIONS:
            found.append((name, value))
        elif arg in PAPERMILL_FILE_OPTIONS:
            found.append((arg, next(args, "")))
        elif not arg.startswith("--") and arg[:2] in PAPERMILL_FILE_OPTIONS and len(arg) > 2:
            found.append((arg[:2], arg[2:]))
    return found


def check_papermill_files(pid: int | None = None) -> None:
    """Read the YAML that papermill's command line (``-f FILE``, ``-y TEXT``, ``-b BASE64``) gave this kernel by
    the rules of a profile file, so that a key written twice is refused here too: papermill parses it itself, before
    the kernel starts, and keeps the last value. The command line is that of the kernel's parent, papermill (Linux's
    /proc); where it cannot be read, or papermill ran from Python, there is nothing to check."""
    proc = Path(f"/proc/{pid or os.getppid()}")
    try:
        argv = (proc / "cmdline").read_bytes().decode("utf-8", "replace").split("\0")
        environ = dict(v.split("=", 1) for v in (proc / "environ").read_bytes().decode("utf-8", "replace").split("\0")
                       if "=" in v)
    except OSError:
        return
    # where papermill was typed (the shell's PWD): with --cwd papermill moves itself to the kernel's folder
    folders = [Path(environ.get("PWD", "/")), (proc / "cwd").resolve()]
    if not any("papermill" in arg for arg in argv[:3]):
        return
    for option, value in file_options(argv):
        kind = PAPERMILL_FILE_OPTIONS[option]
        if kind == "file":
            found = [path for path in (folder / Path(value).expanduser() for folder in folders) if path.is_file()]
            text = found[0].read_bytes() if found else None
        else:
            text = value.encode() if kind == "yaml" else base64.b64decode(value) if kind == "base64" else None
        if text is not None:
            yaml_mapping(text, source=f"papermill {option}" + f" {value}" * (kind == "file"))
