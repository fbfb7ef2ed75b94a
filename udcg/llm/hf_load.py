"""Finding and loading a transformers model for ``udcg.llm.hf``: an offline alias, a local folder or
a hub id; the device and dtype; optional int8 quantisation; and what the tokenizer says about the
model's turns (a system role in the chat template, the end-of-turn tokens, the padding token); and
the keyword the model's forward takes its key/value cache by."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from udcg.errors import BackendError, InputError

DTYPES = ("auto", "float32", "bfloat16", "float16")
_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "</s>")
_PROBE = "udcg-system-probe-3f9c"


@dataclass(frozen=True, slots=True)
class LoadedModel:
    tokenizer: Any
    model: Any  # in eval mode, on ``device``
    name: str  # the name to record: the alias, the folder's name or the hub id
    device: str
    dtype: Any  # a torch dtype


def locate(model: str) -> tuple[str, str, bool]:
    """(what to load from, name to record, local files only) for an alias, a folder or a hub id."""
    from udcg.llm import offline

    if model in offline.ALIASES:
        return str(offline.local_dir(model)), model, True
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise InputError(f"{path}: not a transformers model folder (it has no config.json)")
        return str(path), path.name, True
    if path.suffix or model.startswith((".", "/", "~")) or model.count("/") > 1:
        raise InputError(f"model {model!r}: no such folder, and not an offline alias ({', '.join(offline.ALIASES)}) "
                         f"or a hub id like 'org/name'")
    return model, model, False


def _dtype(name: str, device: str) -> Any:
    import torch

    if name not in DTYPES:
        raise InputError(f"dtype {name!r} is not supported (choose one of: {', '.join(DTYPES)})")
    if name == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.float32
    return getattr(torch, name)


def _device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"device {name!r} asked for, but torch sees no CUDA device (use --device cpu)")
    if not (name == "cpu" or name.startswith("cuda")):
        raise InputError(f"device {name!r} is not supported (use auto, cpu, cuda or cuda:N)")
    return name


def load_model(model: str, device: str = "auto", dtype: str = "auto", quantize: str | None = None) -> LoadedModel:
    """The tokenizer and the model of an alias, a folder or a hub id, on ``device`` in ``dtype``;
    ``quantize="int8"``: dynamic int8 linear layers (CPU, float32 only)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if quantize not in (None, "int8"):
        raise InputError(f"quantize={quantize!r} is not supported (use int8 or leave it unset)")
    source, name, local_only = locate(model)
    device = _device(device)
    torch_dtype = _dtype(dtype, device)
    if quantize and (device != "cpu" or torch_dtype != torch.float32):
        raise InputError("int8 quantisation runs on CPU in float32 only (use --device cpu --dtype float32)")
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
        net = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, local_files_only=local_only)
    except OSError as e:
        hint = "" if local_only else (" (a hub id needs a model hub and HF_HUB_OFFLINE=0 in the environment; or use "
                                      "an offline alias or a local model folder)")
        raise BackendError(f"could not load model {model!r}: {str(e).splitlines()[0]}{hint}") from e
    net.to(device).eval()
    if quantize == "int8":
        with warnings.catch_warnings():  # torch.ao's eager quantisation is deprecated, still shipped and working
            warnings.simplefilter("ignore")
            net = torch.ao.quantization.quantize_dynamic(net, {torch.nn.Linear}, dtype=torch.qint8)
    return LoadedModel(tokenizer, net, name, device, torch_dtype)


def has_system_role(tokenizer: Any) -> bool:
    """True when the chat template renders a system turn (the text appears and nothing raises)."""
    if not getattr(tokenizer, "chat_template", None):
        return False
    chat = [{"role": "system", "content": _PROBE}, {"role": "user", "content": "question"}]
    try:
        text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    except Exception:  # templates raise their own exception types ("System role not supported")
        return False
    return _PROBE in text


def end_token_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    """The tokens that end an answer: every end-of-sequence id the model and tokenizer declare, and
    the end-of-turn tokens of the common chat templates that the vocabulary holds."""
    ids: set[int] = set()
    for source in (model.generation_config, model.config, tokenizer):
        eos = getattr(source, "eos_token_id", None)
        ids.update([eos] if isinstance(eos, int) else (eos or []))
    vocab = tokenizer.get_vocab()
    ids.update(vocab[t] for t in _END_OF_TURN if t in vocab)
    return frozenset(ids)


def cache_argument(model: Any) -> str:
    """The keyword the model's forward takes its key/value cache by, and the field its output returns
    it in: ``cache`` where the forward has that parameter (transformers 5.24 renamed it and deprecates
    ``past_key_values``, to be removed in 5.40), else ``past_key_values`` (earlier versions)."""
    import inspect

    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):  # a forward with no readable signature: the long-standing name
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def pad_token_id(tokenizer: Any) -> int:
    """The padding token, else the end-of-sequence token, else 0 (padded positions are masked anyway)."""
    for token_id in (tokenizer.pad_token_id, tokenizer.eos_token_id):
        if token_id is not None:
            return token_id
    return 0
