"""Checkpoints that prove what they hold, and a run fingerprint that covers the data's content (issue 32)."""

import os
import subprocess
import sys

import pytest
import torch

from odebook.data import mirror
from odebook.models import lm as models
from odebook import studies
from odebook.studies import validate_file
from odebook.study.experiment import train_once
from odebook.training import checkpoint as ckpt
from odebook.training.fingerprint import run_key
from odebook.training.runtime import precision_for
from odebook.training.train import TrainConfig

CPU = precision_for(torch.device("cpu"))
TOKENS = torch.randint(0, 20, (2000,), generator=torch.Generator().manual_seed(0))


def _flip_one_bit_in_the_weights(path):
    """One bit of a float in the middle of the largest stored tensor (a run of zero bytes: the weights below)."""
    data = bytearray(path.read_bytes())
    middle = data.find(bytes(4096)) + 2048
    data[middle] ^= 0x40
    path.write_bytes(bytes(data))


def _once(tmp_path, key, fresh=False):
    torch.manual_seed(0)
    model = models.gpt(vocab_size=20, d_model=16, n_layer=1, n_head=2, max_seq_len=8)
    stream = lambda: iter([(TOKENS[i:i + 32].view(4, 8), TOKENS[i + 1:i + 33].view(4, 8)) for i in range(0, 96, 32)])  # noqa: E731
    valid = [(TOKENS[:32].view(4, 8), TOKENS[1:33].view(4, 8))]
    return train_once("run_seed0", model, stream, valid, TrainConfig(steps=3, lr=1e-3, eval_interval=3), CPU,
                      checkpoints=tmp_path, fresh=fresh, key=key, progress=False,
                      finish=lambda m, h: {"test_loss": h.loss[-1]})


def test_a_flipped_bit_in_a_finished_run_is_refused_never_reused(tmp_path):
    state = {"fingerprint": "f", "weights": torch.zeros(100_000)}
    ckpt.save(tmp_path / "a.pt", state)
    _flip_one_bit_in_the_weights(tmp_path / "a.pt")
    with pytest.raises(ckpt.CheckpointError, match=r"a\.pt does not hold what was written"):
        ckpt.load(tmp_path / "a.pt")

    _, origin, _ = _once(tmp_path, {"k": 1})
    assert origin == "trained" and _once(tmp_path, {"k": 1})[1] == "reused"
    done = tmp_path / "run_seed0.done.pt"
    data = bytearray(done.read_bytes())
    data[len(data) // 2] ^= 0x01  # one bit anywhere in the stored run
    done.write_bytes(bytes(data))
    with pytest.raises(ckpt.CheckpointError, match="run_seed0.done.pt does not hold what was written"):
        _once(tmp_path, {"k": 1})
    assert _once(tmp_path, {"k": 1}, fresh=True)[1] == "trained"  # where the user allows it: trained afresh


def test_a_corpus_changed_in_place_is_another_run(tmp_path, monkeypatch, root):
    """Same file, same size, other text: the run key (and so every fingerprint) changes; a different mirror with
    files of the same size too; the same content in another folder is the same data."""
    for folder in ("m1", "m2", "m3"):
        for name in mirror.MIRROR_FILES["wikitext2"]:
            (tmp_path / folder / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / folder / name).write_text("the cat sat on the mat\n" if folder != "m2" else
                                                  "the dog sat on the rug\n")
    p = validate_file("01_gradient_flow", root / "params" / "smoke" / "01_gradient_flow.yaml")
    monkeypatch.setenv("ODEBOOK_DATA", str(tmp_path / "m1"))
    before = run_key(p)
    monkeypatch.setenv("ODEBOOK_DATA", str(tmp_path / "m3"))
    assert run_key(p) == before  # the same bytes elsewhere
    monkeypatch.setenv("ODEBOOK_DATA", str(tmp_path / "m2"))
    assert run_key(p) != before  # another mirror, same sizes
    monkeypatch.setenv("ODEBOOK_DATA", str(tmp_path / "m1"))
    train = tmp_path / "m1" / mirror.MIRROR_FILES["wikitext2"][0]
    train.write_text("the cat sat on the hat\n")  # in place, same size
    assert run_key(p) != before

    assert _once(tmp_path / "ck", before)[1] == "trained"
    assert _once(tmp_path / "ck", run_key(p))[1] == "trained"  # not reused with the old losses


def test_a_file_odebook_did_not_write_is_neither_replaced_nor_deleted(tmp_path):
    mine = tmp_path / "run_seed0.pt"
    mine.write_text("the user's own file")
    with pytest.raises(ckpt.CheckpointError, match="not written by odebook"):
        _once(tmp_path, {"k": 1}, fresh=True)
    with pytest.raises(ckpt.CheckpointError, match="not written by odebook"):
        ckpt.save(mine, {"fingerprint": "x"})
    assert mine.read_text() == "the user's own file"


@pytest.mark.slow
def test_the_ddp_script_refuses_a_checkpoint_of_another_batch_size(tmp_path, root):
    """A checkpoint made with another batch_size (or ode_steps, data, process count) is not resumed."""
    base = (root / "params" / "smoke" / "01_gradient_flow.yaml").read_text().replace("checkpoint_interval: 0",
                                                                                    "checkpoint_interval: 2")
    (tmp_path / "a.yaml").write_text(base)
    (tmp_path / "b.yaml").write_text(base.replace("batch_size: 4", "batch_size: 8"))

    def launch(params, *extra):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
               str(root / "scripts" / "train_ddp.py"), "--study", "01_gradient_flow", "--params", str(params),
               "--model", "hybrid", "--steps", "4", "--out", str(tmp_path / "out"), *extra]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=root,
                              env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(root)})

    first = launch(tmp_path / "a.yaml")
    assert first.returncode == 0, first.stderr[-3000:]
    assert ckpt.load(tmp_path / "out" / "checkpoint.pt")["step"] == 2
    other = launch(tmp_path / "b.yaml")
    assert other.returncode != 0 and "was made by another configuration" in other.stderr
    assert "checkpoint.pt" in other.stderr
    assert launch(tmp_path / "b.yaml", "--fresh").returncode == 0


def test_a_notebooks_run_key_holds_its_arithmetic_and_its_data_files_content(root, tmp_path):
    import yaml

    from odebook.book import notebook
    STUDIES = {name: studies.schema(name) for name in studies.names()}

    values = yaml.safe_load((root / "params" / "smoke" / "01_gradient_flow.yaml").read_text())
    p = STUDIES["01_gradient_flow"].from_mapping({**values, "checkpoint_interval": 2}, source="x.yaml")
    key = notebook.checkpointing(p, tmp_path)["key"]
    assert key == {**run_key(p), "threads": notebook.layout(p)} and key["batch_size"] == 4
    assert key["study"] == "01_gradient_flow"
    assert not {"output_dir", "checkpoint_dir", "fresh", "seed"} & set(key)
    assert set(key["data"]) == {"wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"}  # bytes: no tiktoken
    assert all(len(h) == 64 for h in key["data"].values())


def test_a_file_edited_in_place_with_its_modification_time_set_back_hashes_anew_in_the_same_process(tmp_path):
    """A kernel that stays open across an edit: the hash cache is keyed on the status-change time, not the mtime."""
    import os

    from odebook.training.fingerprint import content_hashes

    f = tmp_path / "corpus.txt"
    f.write_text("the cat sat\n")
    first = content_hashes([f])
    st = f.stat()
    f.write_text("gur png fng\n")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_mtime_ns == st.st_mtime_ns and content_hashes([f]) != first


def test_operational_fields_are_marked_where_they_are_declared_and_leave_the_arithmetic():
    """No hand list: a field is operational by its declaration (spec(operational=True)). The set is the one the
    hand list held, so every stored run keeps its key."""
    STUDIES = {name: studies.schema(name) for name in studies.names()}
    from odebook.training.fingerprint import arithmetic, not_arithmetic

    before = {"output_dir", "checkpoint_dir", "fresh", "tensorboard", "seed", "n_seeds", "looks",
              "tuning_seeds",  # which seeds tune (added later: as an operational field it leaves every key as it was)
              "checkpoint_interval", "executor", "executor_folder", "slurm_partition", "slurm_time_min",
              "slurm_gpus_per_job", "slurm_array_parallelism"}
    for study, cls in STUDIES.items():
        params = cls()
        assert set(not_arithmetic(params)) == before, study
        assert not set(arithmetic(params)) & before and "lr" in arithmetic(params), study
