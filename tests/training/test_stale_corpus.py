"""A corpus edited in place (same size, same modification time) after a finished, checkpointed run: every run on it
(study 01's WikiText section; its MQAR runs read no corpus) trains again and the report's numbers are those of the new
text, end to end through `make run-all` — on the data mirror and on one's own text file (issue 48: all runs were
reused from checkpoints trained on the old text)."""

import codecs
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, SHARED_DATA, lean_01, runs_made

pytestmark = pytest.mark.slow
STUDY = "01_gradient_flow"
TRAIN = "wikitext-2/wiki.train.tokens"


def _rot13_in_place(path: Path) -> None:
    """The same number of bytes and the same modification time, other text."""
    st = path.stat()
    path.write_text(codecs.encode(path.read_text(encoding="utf-8"), "rot13"), encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns


def _book(tmp_path: Path, own_text: bool) -> tuple[Path, Path]:
    """A book folder (the checkout's notebooks, a checkpointing profile of the smoke scale) and the file to edit."""
    book, mirror = tmp_path / "book", tmp_path / "data"
    (book / "params" / "ckpt").mkdir(parents=True)
    (book / "notebooks").symlink_to(ROOT / "notebooks")
    shutil.copytree(SHARED_DATA, mirror, symlinks=False, ignore=shutil.ignore_patterns("tinystories*"))
    smoke = lean_01((ROOT / "params" / "smoke" / f"{STUDY}.yaml").read_text().replace("checkpoint_interval: 0",
                                                                                     "checkpoint_interval: 6"))
    edited = mirror / TRAIN
    if own_text:
        edited = tmp_path / "own.txt"
        edited.write_text((mirror / TRAIN).read_text(encoding="utf-8")[:400_000], encoding="utf-8")
        smoke += f"corpus: files\ntext_file: {edited}\nsplit_fractions: [0.8, 0.1, 0.1]\n"
    assert "checkpoint_interval: 6" in smoke
    (book / "params" / "ckpt" / f"{STUDY}.yaml").write_text(smoke)
    return book, edited


def _run_all(book: Path, *extra: str) -> dict:
    done = subprocess.run(["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), "run-all", "PROFILE=ckpt",
                           f"NOTEBOOKS={STUDY}", f"VENV={ROOT / '.venv'}", f"ODEBOOK_DATA={book.parent / 'data'}",
                           *extra], cwd=book, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((book / "outputs" / "ckpt" / STUDY / "results.json").read_text())
    return {row["model"]: row["test_loss"] for row in results["wikitext"]}  # study 01's runs on the corpus


@pytest.mark.parametrize("own_text", [False, True], ids=["mirror", "own text"])
def test_a_corpus_edited_in_place_retrains_every_run(tmp_path, own_text):
    if not SHARED_DATA.is_dir():
        pytest.skip("no shared data mirror beside the checkout")
    book, edited = _book(tmp_path, own_text)
    before = _run_all(book)
    results = json.loads((book / "outputs" / "ckpt" / STUDY / "results.json").read_text())
    assert len(list((book / "outputs" / "ckpt" / STUDY / "checkpoints").glob("*.done.pt"))) == runs_made(results)
    _rot13_in_place(edited)
    after = _run_all(book)  # the re-run key sees the new content; every run's checkpoint key must too
    fresh = _run_all(book, "FRESH=1")  # the new text, trained from nothing
    assert after == fresh, "a run was reused from a checkpoint trained on the old text"
    assert after != before and len(after) >= 4
