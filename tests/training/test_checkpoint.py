import pytest
import torch

import ddp_worker
from odebook.training import distributed
from odebook.training.checkpoint import CheckpointError, load, save
from odebook.nn import gemm


def _same(a, b):
    """Bit-identical losses, gradient norms, evaluations and final weights."""
    assert a[0] == b[0] and a[1] == b[1] and a[2] == b[2]
    assert all(torch.equal(a[3][k], b[3][k]) for k in a[3])


@pytest.mark.parametrize("min_macs", [gemm.MIN_MACS, 0], ids=["gemm size rule", "every product through oneDNN"])
def test_an_interrupted_run_resumes_bit_for_bit(tmp_path, monkeypatch, min_macs):
    """Killed after step 7 of 10 (checkpoints every 3 steps: the last one at step 6), then run again with the same
    checkpoint: every loss, gradient norm, evaluation and final weight equals the uninterrupted run's. Dropout is on,
    so the RNG state must be restored too. The test model's products are small, so the second case sends them through
    oneDNN too, as a real model's are."""
    monkeypatch.setattr(gemm, "MIN_MACS", min_macs)
    path = tmp_path / "run.pt"
    whole = ddp_worker.run(10, dropout=0.1)
    with pytest.raises(ddp_worker.Interrupted):
        ddp_worker.run(10, str(path), interval=3, stop_after=7, dropout=0.1)
    assert load(path)["step"] == 6
    _same(ddp_worker.run(10, str(path), interval=3, dropout=0.1), whole)


def test_a_checkpoint_of_another_configuration_is_ignored(tmp_path):
    path = tmp_path / "run.pt"
    save(path, {"fingerprint": "another", "step": 3})
    _same(ddp_worker.run(4, str(path), interval=2), ddp_worker.run(4))


@pytest.mark.parametrize("content", [b"", b"garbage, not a checkpoint", None])
def test_an_unreadable_checkpoint_names_the_file(tmp_path, content):
    path = tmp_path / "run.pt"
    if content is None:  # cut in half: a write that was killed midway (save itself never leaves one)
        save(path, {"fingerprint": "test", "step": 2, "model": torch.zeros(10_000)})
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        path.write_bytes(content)
    with pytest.raises(CheckpointError, match=str(path)):
        ddp_worker.run(4, str(path), interval=2)


def test_save_is_atomic(tmp_path, monkeypatch):
    """A save that fails midway leaves the previous checkpoint intact and no temporary file behind."""
    path = tmp_path / "run.pt"
    save(path, {"fingerprint": "x", "step": 1})

    def broken(obj, f):
        f.write(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", broken)
    with pytest.raises(KeyboardInterrupt):
        save(path, {"fingerprint": "x", "step": 2})
    monkeypatch.undo()
    assert load(path)["step"] == 1 and [p.name for p in tmp_path.iterdir()] == ["run.pt"]


@pytest.mark.slow
def test_data_parallel_equals_one_process_and_resumes(tmp_path):
    """Two gloo processes, each on 2 of the 4 rows of every global batch: losses and gradient norms equal a single
    process's on the whole batch within 1e-5, weights within 1e-4 absolute (only the order of the sums differs, and
    AdamW's m / √v magnifies that on coordinates whose gradient is near zero; weights are ~0.02). A data-parallel run
    interrupted after step 3 resumes from rank 0's checkpoint and ends where the single process does."""
    single = ddp_worker.run(6)
    ranks = distributed.launch(ddp_worker.run, 6, nprocs=2)
    path = str(tmp_path / "ddp.pt")
    with pytest.raises(Exception):
        distributed.launch(ddp_worker.run, 6, path, 2, 3, nprocs=2)
    resumed = distributed.launch(ddp_worker.run, 6, path, 2, nprocs=2)
    for out in (*ranks.values(), *resumed.values()):
        torch.testing.assert_close(torch.tensor(out[0]), torch.tensor(single[0]), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(torch.tensor(out[1]), torch.tensor(single[1]), rtol=1e-5, atol=1e-5)
        for k in single[3]:
            torch.testing.assert_close(out[3][k], single[3][k], rtol=1e-4, atol=1e-4)


def test_run_seeds_reuses_finished_runs_and_retrains_changed_ones(tmp_path):
    """A re-run reuses every finished (model, seed) run whose configuration is unchanged; a changed learning rate
    trains afresh, and so does fresh=True."""
    from odebook.models import lm as models
    from odebook.data.corpus import TokenSplits
    from odebook.study.experiment import run_seeds
    from odebook.study.task import lm_task
    from odebook.training.runtime import precision_for
    from odebook.training.train import TrainConfig

    tokens = ddp_worker.TOKENS
    splits = TokenSplits(tokens[:3000], tokens[3000:4000], tokens[4000:], 50, "test tokens")
    builders = {"tiny": lambda: models.gpt(**ddp_worker.SHAPE)}

    def go(lr=1e-2, fresh=False):
        return run_seeds(builders, lm_task(splits, batch_size=4, seq_len=16, eval_batches=2),
                         TrainConfig(steps=4, lr=lr, eval_interval=2, checkpoint_interval=2),
                         precision_for(torch.device("cpu")), seeds=[0, 1], progress=False, checkpoints=tmp_path,
                         key={"study": "test"}, fresh=fresh)

    first = go()
    again = go()
    assert [r.origin for r in first] == ["trained", "trained"] and [r.origin for r in again] == ["reused", "reused"]
    assert [r.history.loss for r in again] == [r.history.loss for r in first]
    assert [r.test_loss for r in again] == [r.test_loss for r in first]
    assert all(torch.equal(a.module.head.weight, b.module.head.weight) for a, b in zip(first, again))
    assert [r.origin for r in go(lr=2e-2)] == ["trained", "trained"]
    assert [r.origin for r in go(lr=2e-2, fresh=True)] == ["trained", "trained"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [  # finished runs only: no partial checkpoint is left
        f"tiny_seed{s}_lr{lr}.done.pt" for s in (0, 1) for lr in ("0.01", "0.02")]
