"""validation/workloads/hf_gpt2.py with use_cache=False on the model call (no generation KV cache), the same
arguments: why no finding advises it, docs/concepts.md. hf_gpt2.py itself stays as it was
recorded (the demo ships it with its recording)."""

from __future__ import annotations

import functools
import os
import runpy

from transformers import GPT2LMHeadModel

GPT2LMHeadModel.forward = functools.partialmethod(GPT2LMHeadModel.forward, use_cache=False)  # type: ignore[method-assign]
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_gpt2.py"), run_name="__main__")
