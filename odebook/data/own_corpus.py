"""A corpus of one's own text, given by parameters: three files (train / validation / test), or one file cut at
line breaks into three parts by stated fractions. Each file is checked before any compute (present, not empty,
UTF-8 text); the loaded corpus is tokenized like the built-in ones and says in its description where it came from."""

from __future__ import annotations

import math
from pathlib import Path

from odebook.data.core import NOT_REGULAR, Corpus, DataError, is_special

__all__ = ["FILE_KEYS", "file_problems", "split_text", "load_own_corpus"]

FILE_KEYS = ("train_file", "valid_file", "test_file")


def _file_problem(value: str) -> str | None:
    """Why the text file named by a parameter cannot be used, or None."""
    path = Path(value).expanduser()  # absolute: the parameters' rule for paths (odebook.params.schema.spec)
    if is_special(path):
        return f"{path} {NOT_REGULAR}; give a text file"
    if not path.is_file():
        return f"no such file: {path}"
    data = path.read_bytes()
    if not data.strip():
        return f"{path} is empty"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"{path} is not UTF-8 text (byte {err.start})"
    if "\x00" in text:
        return f"{path} holds NUL bytes (not a text file)"
    return None


def split_text(text: str, fractions: list[float]) -> tuple[str, str, str]:
    """Cut ``text`` at line breaks into train / validation / test parts of about ``fractions`` of its characters,
    in order (the first part trains, the last is scored)."""
    lines = text.splitlines(keepends=True)
    ends = [0]
    for f in (fractions[0], fractions[0] + fractions[1]):
        target = f * len(text)
        pos, i = 0, 0
        while i < len(lines) and pos + len(lines[i]) <= target:
            pos += len(lines[i])
            i += 1
        ends.append(max(i, ends[-1]))
    ends.append(len(lines))
    return tuple("".join(lines[a:b]) for a, b in zip(ends, ends[1:]))  # type: ignore[return-value]


def file_problems(*, train_file: str, valid_file: str, test_file: str, text_file: str,
                  split_fractions: list[float]) -> list[str]:
    """One line per problem with the own-text parameters of ``corpus: files`` (key, value, what is allowed)."""
    given = {"train_file": train_file, "valid_file": valid_file, "test_file": test_file}
    if text_file and any(given.values()):
        return ["key 'text_file': give either text_file (split by split_fractions) or train_file, valid_file and "
                "test_file, not both"]
    if not text_file:
        missing = [k for k, v in given.items() if not v]
        if missing:
            return [f"key {k!r}: corpus 'files' needs a path here (or one text_file split by split_fractions)"
                    for k in missing]
        return [f"key {k!r} = {v!r}: {p}" for k, v in given.items() if (p := _file_problem(v))]
    problem = _file_problem(text_file)
    if problem:
        return [f"key 'text_file' = {text_file!r}: {problem}"]
    if len(split_fractions) != 3 or not math.isclose(sum(split_fractions), 1.0, abs_tol=1e-9):
        return [f"key 'split_fractions' = {split_fractions}: three fractions (train, validation, test) summing to 1"]
    parts = split_text(Path(text_file).expanduser().read_text(encoding="utf-8"), split_fractions)
    empty = [name for name, part in zip(("train", "validation", "test"), parts) if not part.strip()]
    if empty:
        return [f"key 'split_fractions' = {split_fractions}: leaves the {' and '.join(empty)} part of {text_file} "
                "empty (the file is cut at line breaks); give larger fractions or a longer file"]
    return []


def load_own_corpus(*, train_file: str = "", valid_file: str = "", test_file: str = "", text_file: str = "",
                    split_fractions: list[float] | tuple[float, ...] = (0.9, 0.05, 0.05)):
    """The ``files`` corpus: checked as the parameters are, then read."""
    fractions = list(split_fractions)
    problems = file_problems(train_file=train_file, valid_file=valid_file, test_file=test_file,
                             text_file=text_file, split_fractions=fractions)
    if problems:
        raise DataError("; ".join(problems))
    if text_file:
        path = Path(text_file).expanduser()
        train, valid, test = split_text(path.read_text(encoding="utf-8"), fractions)
        where = (f"one file {path}, cut at line breaks into its first {fractions[0]:g} (train), next "
                 f"{fractions[1]:g} (validation) and last {fractions[2]:g} (test) of its characters")
    else:
        paths = [Path(p).expanduser() for p in (train_file, valid_file, test_file)]
        train, valid, test = (p.read_text(encoding="utf-8") for p in paths)
        where = f"train {paths[0]}, validation {paths[1]}, test {paths[2]}"
    return Corpus("files", train, valid, test,
                  f"Own text ({where}): trained on train, selected on validation, scored once on test")
