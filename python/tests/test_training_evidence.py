"""The training evidence pack: progress bars, TensorBoard event files of every stage, and the
notebook over the committed results. The TensorBoard and notebook tests need the training
extras (tensorboardX, tensorboard, nbclient, ipykernel, matplotlib); the main suite's venv has
none and skips them, scripts/ci-training-smoke.sh runs them in the training venv."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from ledgershield.training import progress

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "training"


def test_progress_bars_follow_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEDGERSHIELD_PROGRESS", "0")
    assert not progress.enabled()
    b = progress.bar(range(3), total=3, desc="x")
    assert list(b) == [0, 1, 2]
    b.update(1)
    b.close()
    monkeypatch.setenv("LEDGERSHIELD_PROGRESS", "1")
    assert progress.enabled()
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return
    b = progress.bar(total=5, desc="steps")
    b.update(2)
    assert b.n == 2
    b.close()


def _run_copy(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copytree(RESULTS / name, dst, ignore=shutil.ignore_patterns("tensorboard", "*.png"))
    return dst


@pytest.mark.parametrize("name", ["ci", "scratch"])
def test_every_training_stage_has_tensorboard_events(tmp_path: Path, name: str) -> None:
    pytest.importorskip("tensorboardX")
    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    from ledgershield.training.pipeline import tb_stages
    from ledgershield.training.tb_events import write_events

    run = _run_copy(tmp_path, name)
    cfg = json.loads((run / "training_metrics.json").read_text())["config"]
    written = write_events(run)
    for stage in tb_stages(cfg):
        assert written.get(stage, 0) > 0, (stage, written)
        files = list((run / "tensorboard" / stage).glob("events.out.tfevents.*"))
        assert files, stage
    # Read back: the SFT loss curve in the event file is the CSV's, step for step.
    loss_stage = "compact_lm" if cfg.get("compact_lm") else "sft"
    acc = ea.EventAccumulator(str(run / "tensorboard" / loss_stage))
    acc.Reload()
    events = acc.Scalars("sft/loss")
    with (run / "loss_history.csv").open() as f:
        want = [(int(float(r["step"])), float(r["loss"])) for r in csv.DictReader(f)]
    assert [e.step for e in events] == [s for s, _ in want]
    # TensorBoard stores 32-bit floats.
    assert all(abs(e.value - v) <= 1e-5 * max(1.0, abs(v)) for e, (_, v) in zip(events, want))


def test_notebook_draws_the_committed_results(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("matplotlib")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(str(RESULTS / "evidence.ipynb"), as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(RESULTS)}})
    client.execute()
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= 5, f"{len(images)} plots drawn"
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
