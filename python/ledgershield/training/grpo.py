"""``grpo``: TRL GRPO against a live server, in both shapes.

* ``plan``: the model answers a case's first observation with a plan ``{"actions": [...]}``; the
  reward function plays it on a new session (:func:`.rollout.play_plan`) and returns the terminal
  grade (the safe ``NEEDS_REVIEW`` fallback is submitted, and graded, when a plan never decides).
* ``tools``: ``environment_factory`` with :class:`ledgershield.trl_env.LedgerShieldToolEnv`; each
  action is a tool and the environment's ``get_reward()`` (the terminal grade, the fallback
  submission graded when the model never submits) is the reward.

Both train on cases the server can reset by id (the curated cases of the training split) and
write ``grpo_history.csv`` (step, mean reward, reward std) and ``grpo_summary.json``.
"""

from __future__ import annotations


import csv
import json
import math
from pathlib import Path
from typing import Any, Dict, List, Optional
from .progress import enabled as progress_enabled

TOOLS_PROMPT = ("You are an accounts-payable controller. Investigate the case with the tools, take the "
                "interventions the evidence calls for, then call submit_decision exactly once.")


def plan_rows(sft_train: Path, public_cases: Optional[set] = None) -> List[Dict[str, Any]]:
    rows = []
    for line in Path(sft_train).read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        cid = r["metadata"]["case_id"]
        if public_cases is not None and cid not in public_cases:
            continue
        rows.append({"prompt": [{"role": "user", "content": r["prompt"]}], "case_id": cid, "teacher_completion": r["completion"]})
    return rows


class _Log:
    def __init__(self, out: Path) -> None:
        self.out, self.rows = out, []  # type: ignore[var-annotated]

    def callback(self) -> Any:
        from transformers import TrainerCallback

        log = self

        class CB(TrainerCallback):
            def on_log(self, args: Any, state: Any, control: Any, logs: Optional[Dict[str, float]] = None, **kw: Any) -> None:
                if logs and "reward" in logs:
                    log.rows.append({"step": state.global_step, "reward": float(logs["reward"]), "reward_std": float(logs.get("reward_std", 0.0)),
                                     "loss": float(logs.get("loss", 0.0))})
                    with open(log.out / "grpo_history.csv", "w", newline="") as f:
                        w = csv.DictWriter(f, fieldnames=list(log.rows[0]))
                        w.writeheader()
                        w.writerows(log.rows)

        return CB()


def grpo(model: str, url: Optional[str], out: Path, shape: str, rows: List[Dict[str, Any]], max_steps: int = 4,
         num_generations: int = 2, batch_size: int = 2, max_completion_length: int = 256, lr: float = 1e-5,
         max_tool_calling_iterations: int = 8, temperature: float = 1.0, threads: int = 2, seed: int = 0) -> Dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from ..trl_env import environment_factory
    from .rollout import play_plan

    torch.set_num_threads(threads)
    out.mkdir(parents=True, exist_ok=True)
    graded: List[Dict[str, Any]] = []

    def plan_reward(prompts: List[Any], completions: List[Any], case_id: List[str], **kw: Any) -> List[float]:
        scores = []
        for c, cid in zip(completions, case_id):
            text = c[-1]["content"] if isinstance(c, list) else str(c)
            r = play_plan(url, cid, text)
            graded.append({"case_id": cid, **r})
            scores.append(r["score"])
        return scores

    envs: List[Any] = []
    Base = environment_factory(url)

    class Env(Base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            envs.append(self)

        def get_reward(self) -> float:
            r = super().get_reward()
            graded.append({"case_id": self.case_id, "score": r, "submitted_by_model": self.submitted_by_model, "result_class": self.result_class})
            return r

    cfg = GRPOConfig(
        output_dir=str(out / "trainer"), max_steps=max_steps, learning_rate=lr, per_device_train_batch_size=batch_size,
        num_generations=num_generations, max_completion_length=max_completion_length, temperature=temperature,
        logging_steps=1, save_strategy="no", report_to=[], seed=seed, use_cpu=not torch.cuda.is_available(),
        bf16=torch.cuda.is_available(), disable_tqdm=not progress_enabled(), beta=0.0,
        **({"max_tool_calling_iterations": max_tool_calling_iterations} if shape == "tools" else {}),
    )
    tok = AutoTokenizer.from_pretrained(model)
    lm = AutoModelForCausalLM.from_pretrained(model)
    log = _Log(out)
    if shape == "plan":
        data = Dataset.from_list([{"prompt": r["prompt"], "case_id": r["case_id"]} for r in rows])
        trainer = GRPOTrainer(model=lm, reward_funcs=plan_reward, args=cfg, train_dataset=data, processing_class=tok, callbacks=[log.callback()])
    elif shape == "tools":
        data = Dataset.from_list([{"prompt": [{"role": "user", "content": TOOLS_PROMPT}], "case_id": r["case_id"]} for r in rows])
        trainer = GRPOTrainer(model=lm, args=cfg, train_dataset=data, processing_class=tok, environment_factory=Env, callbacks=[log.callback()])
    else:
        raise ValueError(f"unknown GRPO shape {shape!r}; use plan or tools")
    trainer.train()
    for e in envs:
        e._close()
    trainer.model.save_pretrained(out / "model")
    tok.save_pretrained(out / "model")
    rewards = [r["reward"] for r in log.rows]
    summary = {"shape": shape, "steps": trainer.state.global_step, "rollouts_graded": len(graded),
               "rollouts_expected": max_steps * batch_size, "mean_reward": (sum(g["score"] for g in graded) / len(graded)) if graded else None,
               "all_finite": all(math.isfinite(x) for x in rewards), "history": log.rows, "model_dir": str(out / "model"),
               "graded_sample": graded[:8]}
    (out / "grpo_summary.json").write_text(json.dumps(summary, indent=1))
    return summary
