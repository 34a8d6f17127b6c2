"""A minimal OpenAI-compatible ``/v1/chat/completions`` endpoint around a policy, so that
``ledgershield run --agent llm`` plays a local checkpoint with the protocol its data taught.

Policies: :class:`HFPolicy` (a transformers causal LM, greedy or sampled, CPU or GPU) and
:class:`ReplayPolicy` (a perfect-imitation mock: answers each recorded prompt with the recorded
target, for checking that the protocol round-trips).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

Messages = List[Dict[str, str]]


class ReplayPolicy:
    """Replays the assistant target recorded for each exact user prompt (``steps_*.jsonl``)."""

    def __init__(self, paths: Iterable[Path]) -> None:
        self.table: Dict[str, str] = {}
        for p in paths:
            for line in Path(p).read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    user = [m["content"] for m in row["prompt"] if m["role"] == "user"][-1]
                    self.table.setdefault(user, row["completion"][-1]["content"])
        self.misses = 0

    def reply(self, messages: Messages, max_tokens: int, temperature: float) -> str:
        user = [m["content"] for m in messages if m.get("role") == "user"][-1]
        out = self.table.get(user)
        if out is None:
            self.misses += 1
            return "no recorded target for this prompt"
        return out


def json_complete(text: str) -> bool:
    """Whether ``text`` holds a complete top-level JSON object (braces balanced outside strings)."""
    depth, in_str, esc, seen = 0, False, False, False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
            seen = True
        elif ch == "}":
            depth -= 1
            if seen and depth == 0:
                return True
    return False


class _StopAtJson:
    """Generation stops once the reply is one complete JSON object (checked every few tokens)."""

    def __init__(self, tok: Any, prompt_len: int, every: int = 8) -> None:
        self.tok, self.prompt_len, self.every = tok, prompt_len, every

    def __call__(self, input_ids: Any, scores: Any, **kw: Any) -> Any:
        import torch

        n = input_ids.shape[1] - self.prompt_len
        done = n > 0 and n % self.every == 0 and json_complete(self.tok.decode(input_ids[0, self.prompt_len:], skip_special_tokens=True))
        return torch.full((input_ids.shape[0],), bool(done), dtype=torch.bool, device=input_ids.device)


class HFPolicy:
    """A causal LM with a chat template: the prompt is ``apply_chat_template(messages)``."""

    def __init__(self, model: Any, tokenizer: Any, max_new_tokens: int = 1024, max_prompt_tokens: Optional[int] = None) -> None:
        self.model = model
        self.tok = tokenizer
        self.max_new_tokens = max_new_tokens
        limit = getattr(model.config, "max_position_embeddings", 8192)
        self.max_prompt_tokens = max_prompt_tokens or max(limit - max_new_tokens, 256)
        self.lock = threading.Lock()

    @classmethod
    def load(cls, name: str, **kw: Any) -> "HFPolicy":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(name)
        model = AutoModelForCausalLM.from_pretrained(name)
        return cls(model, tok, **kw)

    def reply(self, messages: Messages, max_tokens: int, temperature: float) -> str:
        import torch

        ids = self.tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)["input_ids"]
        ids = ids[:, -self.max_prompt_tokens:]
        ids = ids.to(self.model.device)
        new = min(max_tokens or self.max_new_tokens, self.max_new_tokens)
        with self.lock, torch.no_grad():
            was_training = self.model.training
            self.model.eval()
            kw: Dict[str, Any] = {"do_sample": temperature > 0}
            if temperature > 0:
                kw["temperature"] = temperature
            from transformers import StoppingCriteriaList

            out = self.model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                pad_token_id=self.tok.pad_token_id, eos_token_id=self.tok.eos_token_id,
                stopping_criteria=StoppingCriteriaList([_StopAtJson(self.tok, ids.shape[1])]), **kw,
            )
            if was_training:
                self.model.train()
        return self.tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True).strip()


def load_policy(model: str, **kw: Any) -> Any:
    """``replay:a.jsonl,b.jsonl`` for the imitation mock, else a hub name or local path."""
    if model.startswith("replay:"):
        return ReplayPolicy(Path(p) for p in model[len("replay:"):].split(","))
    return HFPolicy.load(model, **kw)


def serve(policy: Any) -> Tuple[str, ThreadingHTTPServer]:
    """Serve ``policy`` on 127.0.0.1 (free port); returns ``(api_base, server)``. Call
    ``server.shutdown()`` to stop."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def _send(self, code: int, body: Dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"unknown path {self.path[:80]}"}})
                return
            try:
                n = int(self.headers.get("Content-Length", "0"))
                req = json.loads(self.rfile.read(min(n, 16 << 20)))
                messages = req["messages"]
            except (ValueError, KeyError, TypeError) as e:
                self._send(400, {"error": {"message": f"bad request: {e}"}})
                return
            text = policy.reply(messages, int(req.get("max_tokens") or 0), float(req.get("temperature") or 0.0))
            self._send(200, {"id": "local", "object": "chat.completion", "model": req.get("model", "local"),
                             "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1", server
