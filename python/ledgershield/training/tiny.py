"""``build-model``: a tiny Qwen2-shaped causal LM with a byte-level BPE tokenizer trained on
environment text, built locally so every command runs with no download.

The tokenizer carries TRL's Qwen2.5 chat template (so TRL recognises it and can parse tool
calls for ``environment_factory``), ``<|im_end|>`` as end of turn and ``<|endoftext|>`` as pad.
The weights are random (seeded): a from-scratch model learns everything from the teacher data.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterable, Iterator, List

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]

SIZES: Dict[str, Dict[str, int]] = {
    # CI smoke: seconds per step on one core.
    "tiny": {"hidden_size": 64, "intermediate_size": 192, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2},
    # The from-scratch CPU run.
    "small": {"hidden_size": 192, "intermediate_size": 576, "num_hidden_layers": 4, "num_attention_heads": 6, "num_key_value_heads": 2},
    # A GPU recipe's size (about 60M parameters with an 8k vocabulary).
    "base": {"hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 4},
}


def corpus(paths: Iterable[Path], max_rows: int = 4000) -> Iterator[str]:
    """Prompt and completion texts of exported rows (the first ``max_rows`` of each file), plus
    the tools' JSON schemas."""
    for p in paths:
        for i, line in enumerate(Path(p).read_text().splitlines()):
            if i >= max_rows:
                break
            if not line.strip():
                continue
            row = json.loads(line)
            for key in ("prompt", "completion"):
                v = row.get(key)
                if isinstance(v, str):
                    yield v
                elif isinstance(v, list):
                    for m in v:
                        yield m.get("content", "")
    try:
        from transformers.utils import get_json_schema

        from ..trl_env import LedgerShieldToolEnv
        from ..models import ACTION_TYPES

        for name in ACTION_TYPES:
            yield json.dumps(get_json_schema(getattr(LedgerShieldToolEnv, name)))
    except Exception:  # schemas only enrich the vocabulary
        pass


def chat_template() -> str:
    import trl

    return (Path(trl.__file__).parent / "chat_templates" / "qwen2_5.jinja").read_text()


def build_tokenizer(texts: Iterable[str], vocab_size: int = 4096) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(texts, trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  additional_special_tokens=SPECIAL[1:])
    tok.chat_template = chat_template()
    return tok


def build_model(out: Path, data: List[Path], size: str = "tiny", vocab_size: int = 4096, max_positions: int = 8192, seed: int = 0) -> Dict[str, Any]:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = build_tokenizer(corpus(data), vocab_size)
    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=len(tok), max_position_embeddings=max_positions, tie_word_embeddings=True,
                      bos_token_id=None, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, **SIZES[size])
    model = Qwen2ForCausalLM(cfg)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    info = {"size": size, "parameters": sum(p.numel() for p in model.parameters()), "vocab_size": len(tok), "max_positions": max_positions, "data": [str(p) for p in data]}
    (out / "build_info.json").write_text(json.dumps(info, indent=1))
    return info
