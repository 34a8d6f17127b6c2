"""``selfplay`` + ``dpo``: N sampled plan candidates per case (plus the teacher's plan), each
scored by the environment (its grade, which already applies the decision falsifier's caps; the
falsifier's verdict is kept beside the score), best-vs-worst preference pairs, TRL DPO."""

from __future__ import annotations


import json
import math
from pathlib import Path
from typing import Any, Dict, List, Optional
from .progress import enabled as progress_enabled


def selfplay(model: str, url: Optional[str], rows: List[Dict[str, Any]], out: Path, candidates: int = 4, temperature: float = 1.0,
             max_new_tokens: int = 256, include_teacher: bool = True, threads: int = 2) -> Dict[str, Any]:
    import torch

    from .modelserver import HFPolicy
    from .rollout import play_plan

    torch.set_num_threads(threads)
    out.mkdir(parents=True, exist_ok=True)
    policy = HFPolicy.load(model, max_new_tokens=max_new_tokens)
    pairs, scored = [], []
    for r in rows:
        cands = [policy.reply(r["prompt"], max_new_tokens, temperature) for _ in range(candidates)]
        if include_teacher and r.get("teacher_completion"):
            cands.append(r["teacher_completion"])
        results = [(c, play_plan(url, r["case_id"], c)) for c in cands]
        scored.extend({"case_id": r["case_id"], "score": res["score"], "parsed": res["parsed"], "result_class": res["result_class"]} for _, res in results)
        best = max(results, key=lambda x: x[1]["score"])
        worst = min(results, key=lambda x: x[1]["score"])
        if best[1]["score"] > worst[1]["score"]:
            pairs.append({"prompt": r["prompt"], "chosen": [{"role": "assistant", "content": best[0]}],
                          "rejected": [{"role": "assistant", "content": worst[0]}], "case_id": r["case_id"],
                          "chosen_score": best[1]["score"], "rejected_score": worst[1]["score"]})
    with open(out / "pairs.jsonl", "w") as f:
        for p in pairs:
            f.write(json.dumps(p) + "\n")
    summary = {"cases": len(rows), "candidates_scored": len(scored), "pairs": len(pairs),
               "mean_candidate_score": (sum(s["score"] for s in scored) / len(scored)) if scored else None}
    (out / "selfplay_summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def dpo(model: str, pairs_path: Path, out: Path, max_steps: int = 4, lr: float = 1e-5, batch_size: int = 2, beta: float = 0.1,
        max_length: int = 2048, threads: int = 2, seed: int = 0) -> Dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer

    torch.set_num_threads(threads)
    out.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(l) for l in Path(pairs_path).read_text().splitlines() if l.strip()]
    if not rows:
        raise ValueError(f"no preference pairs in {pairs_path}")
    data = Dataset.from_list([{"prompt": r["prompt"], "chosen": r["chosen"], "rejected": r["rejected"]} for r in rows])
    tok = AutoTokenizer.from_pretrained(model)
    lm = AutoModelForCausalLM.from_pretrained(model)
    losses: List[float] = []
    from transformers import TrainerCallback

    class CB(TrainerCallback):
        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and "loss" in logs:
                losses.append(float(logs["loss"]))

    cfg = DPOConfig(output_dir=str(out / "trainer"), max_steps=max_steps, learning_rate=lr, per_device_train_batch_size=batch_size,
                    beta=beta, max_length=max_length, logging_steps=1, save_strategy="no", report_to=[], seed=seed,
                    use_cpu=not torch.cuda.is_available(), bf16=torch.cuda.is_available(), disable_tqdm=not progress_enabled())
    trainer = DPOTrainer(model=lm, args=cfg, train_dataset=data, processing_class=tok, callbacks=[CB()])
    trainer.train()
    trainer.model.save_pretrained(out / "model")
    tok.save_pretrained(out / "model")
    summary = {"pairs": len(rows), "steps": trainer.state.global_step, "losses": losses,
               "all_finite": all(math.isfinite(x) for x in losses), "model_dir": str(out / "model")}
    (out / "dpo_summary.json").write_text(json.dumps(summary, indent=1))
    return summary
