"""validation/workloads/hf_gpt2.py with the model compiled whole (nn.Module.compile on the GPT2LMHeadModel it
builds), the same arguments: `python -m validation.run compile-models`. hf_gpt2.py itself stays as it was
recorded (the demo ships it with its recording)."""

from __future__ import annotations

import os
import runpy
from typing import Any

from transformers import GPT2LMHeadModel

_build = GPT2LMHeadModel.__init__


def _built_and_compiled(self: GPT2LMHeadModel, *args: Any, **kwargs: Any) -> None:
    _build(self, *args, **kwargs)
    self.compile()


GPT2LMHeadModel.__init__ = _built_and_compiled  # type: ignore[method-assign]
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_gpt2.py"), run_name="__main__")
