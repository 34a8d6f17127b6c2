"""``sft``: TRL supervised fine-tuning on per-step (closed-loop) and/or plan examples.

Writes ``loss_history.csv`` (step, loss, learning rate) and, every ``eval_every`` steps, plays
the held-out cases with the model being trained (the ``llm`` agent's protocol, through
:mod:`.evaluate`) into ``reward_eval_history.csv`` (step, mean score, parse success).
"""

from __future__ import annotations


import csv
import json
import math
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional
from .progress import enabled as progress_enabled


def load_rows(paths: List[Path], kinds: List[str]) -> List[Dict[str, Any]]:
    """Chat prompt/completion rows from ``steps_*.jsonl`` and/or ``sft_*.jsonl`` (plans)."""
    rows: List[Dict[str, Any]] = []
    for p in paths:
        is_plan = Path(p).name.startswith("sft_")
        if ("plan" if is_plan else "steps") not in kinds:
            continue
        for line in Path(p).read_text().splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            if is_plan:
                rows.append({"prompt": [{"role": "user", "content": r["prompt"]}], "completion": [{"role": "assistant", "content": r["completion"]}]})
            else:
                rows.append({"prompt": r["prompt"], "completion": r["completion"]})
    return rows


class History:
    """Loss and reward-checkpoint CSVs, appended as training goes."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.loss: List[Dict[str, float]] = []
        self.reward: List[Dict[str, float]] = []

    def add_loss(self, step: int, loss: float, lr: float) -> None:
        self.loss.append({"step": step, "loss": loss, "learning_rate": lr})
        self._write("loss_history.csv", self.loss)

    def add_reward(self, step: int, row: Dict[str, Any]) -> None:
        self.reward.append({"step": step, "mean_score": row["mean_score"], "parse_success": row["parse_success"],
                            "unsafe_release_rate": row["unsafe_release_rate"], "episodes": row["episodes"]})
        self._write("reward_eval_history.csv", self.reward)

    def _write(self, name: str, rows: List[Dict[str, float]]) -> None:
        with open(self.out / name, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


def sft(model: str, data: List[Path], out: Path, kinds: List[str], max_steps: int = 100, epochs: float = 1.0,
        lr: float = 1e-3, batch_size: int = 4, grad_accum: int = 1, max_length: int = 2048, lora: bool = False,
        eval_every: int = 0, eval_fn: Optional[Callable[[Any, Any], Dict[str, Any]]] = None, seed: int = 0,
        threads: int = 2, max_minutes: float = 0.0, max_rows: int = 0) -> Dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    torch.set_num_threads(threads)
    out.mkdir(parents=True, exist_ok=True)
    rows = load_rows(data, kinds)
    if max_rows and len(rows) > max_rows:
        import random

        rows = random.Random(seed).sample(rows, max_rows)
    if not rows:
        raise ValueError(f"no {kinds} rows in {[str(p) for p in data]}")
    tok = AutoTokenizer.from_pretrained(model)
    lm = AutoModelForCausalLM.from_pretrained(model)
    peft_config = None
    if lora:
        from peft import LoraConfig

        peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")
    hist = History(out)
    import time

    started = [time.monotonic()]  # reset when training begins (after tokenisation)

    class Record(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            started[0] = time.monotonic()

        def on_log(self, args: Any, state: Any, control: Any, logs: Optional[Dict[str, float]] = None, **kw: Any) -> None:
            if logs and "loss" in logs:
                hist.add_loss(state.global_step, float(logs["loss"]), float(logs.get("learning_rate", 0.0)))

        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
            if eval_fn and eval_every and state.global_step % eval_every == 0:
                hist.add_reward(state.global_step, eval_fn(model, tok))
            if max_minutes and time.monotonic() - started[0] > max_minutes * 60:
                control.should_training_stop = True

    cfg = SFTConfig(
        output_dir=str(out / "trainer"), max_steps=max_steps, num_train_epochs=epochs, learning_rate=lr,
        per_device_train_batch_size=batch_size, gradient_accumulation_steps=grad_accum, max_length=max_length,
        logging_steps=1, save_strategy="no", report_to=[], seed=seed, use_cpu=not torch.cuda.is_available(),
        bf16=torch.cuda.is_available(), lr_scheduler_type="constant_with_warmup" if max_minutes else "cosine", warmup_steps=min(20, max(1, max_steps // 10)),
        dataloader_num_workers=0, disable_tqdm=not progress_enabled(),
    )
    trainer = SFTTrainer(model=lm, args=cfg, train_dataset=Dataset.from_list(rows), processing_class=tok,
                         peft_config=peft_config, callbacks=[Record()])
    result = trainer.train()
    final = trainer.model
    if lora:
        final = final.merge_and_unload()
    if eval_fn and (not eval_every or trainer.state.global_step % eval_every != 0):
        hist.add_reward(trainer.state.global_step, eval_fn(final, tok))
    final.save_pretrained(out / "model")
    tok.save_pretrained(out / "model")
    losses = [r["loss"] for r in hist.loss]
    summary = {"rows": len(rows), "steps": trainer.state.global_step, "train_runtime_s": round(result.metrics.get("train_runtime", 0.0), 1),
               "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
               "all_finite": all(math.isfinite(x) for x in losses), "lora": lora, "max_minutes": max_minutes, "model_dir": str(out / "model"),
               "reward_checkpoints": hist.reward}
    (out / "sft_summary.json").write_text(json.dumps(summary, indent=1))
    return summary
