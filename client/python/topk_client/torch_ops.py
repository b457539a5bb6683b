"""Exact Top-K as torch operators, over the in-process selector
(topk_client.inprocess: libtopk_c.so on torch's current CUDA stream):

    import topk_client.torch_ops                       # registers torch.ops.topk.*
    indices = torch.ops.topk.select(scores, lengths, 2048)             # (M, K) int32
    torch.ops.topk.select_out(scores, lengths, 2048, out=indices)      # in place

    from topk_client.torch_ops import select        # the same, at the selector's cost
    indices = select(scores, lengths, 2048)                            # eager: no dispatcher
    select(scores, lengths, 2048, out=indices)                         # under compile: the ops

scores: (M, N) float32 / bfloat16 / float16 CUDA tensor with contiguous rows
(any row stride); lengths: (M,) int32 on its GPU, row r's valid prefix (the
rest is never read); out: (M, >= K) int32 with contiguous rows. Every row
gets min(K, lengths[r]) distinct indices of its largest scores (exact; ties
to any of the tied indices unless deterministic=True), then -1. Options:
sorted (value descending), deterministic (ties to the smallest indices).

The same three ways an engine runs a step work: eager; inside a captured
CUDA graph (call once with the same shapes before capturing, so that the
plan and its buffers exist before the capture); and under torch.compile,
fullgraph=True included (each op has a fake implementation, so the graph
does not break at it). Argument errors are InProcessSelector.select's
(RegionError / ValueError, naming the argument).

A call through torch's dispatcher (torch.ops.topk.*) costs the host tens of
microseconds more than the selector itself (boxing, the dispatch keys, the
call back into Python: bench/frontend/op_overhead_bench.py). select() here
calls the selector directly in eager mode and the operators while
torch.compile traces, so the graph holds the operator and an eager step
pays the selector's own cost; the engine drop-ins (topk_client.compat) do
the same.

The operators share one InProcessSelector per process (made on first use),
whose buffers serve one stream at a time: selecting concurrently on several
streams needs an InProcessSelector per stream instead.

Importing this module needs torch (>= 2.4: torch.library.register_fake), not
a GPU; the first call needs the GPU and libtopk_c.so (see inprocess.py for
where it is looked for).
"""

import threading

import torch

from topk_client.inprocess import InProcessSelector

NAMESPACE = "topk"
_library = torch.library.Library(NAMESPACE, "FRAGMENT")
_default = None
_default_lock = threading.Lock()


def default_selector() -> InProcessSelector:
    """The process's selector behind every operator of this package (made
    on first use; it finds libtopk_c.so as InProcessSelector() does)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = InProcessSelector()
    return _default


is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or \
    torch._dynamo.is_compiling


def select(scores, lengths, k, *, out=None, sorted=False, deterministic=False):
    """torch.ops.topk.select (out None) or select_out, without the dispatcher
    in eager mode (module docstring). Returns out, or the new indices."""
    if not is_compiling():
        return default_selector().select(scores, lengths, k, out=out, sorted=sorted,
                                          deterministic=deterministic)
    if out is None:
        return torch.ops.topk.select(scores, lengths, k, sorted, deterministic)
    torch.ops.topk.select_out(scores, lengths, k, out=out, sorted=sorted,
                              deterministic=deterministic)
    return out


def define(schema: str, implementation, fake) -> None:
    """Registers topk::<schema>: `implementation` for CUDA tensors and for
    host tensors (where it raises the selector's own argument error rather
    than the dispatcher's 'no kernel for CPU'), `fake` for meta and fake
    tensors (torch.compile's tracing)."""
    name = schema.split("(", 1)[0]
    _library.define(schema)
    for key in ("CUDA", "CPU"):
        _library.impl(name, implementation, key)
    torch.library.register_fake(f"{NAMESPACE}::{name}", fake, lib=_library)


def _select(scores, lengths, k, sorted=False, deterministic=False):
    return default_selector().select(scores, lengths, k, sorted=sorted,
                                      deterministic=deterministic)


def _select_fake(scores, lengths, k, sorted=False, deterministic=False):
    if k < 1:
        raise ValueError(f"k = {k}: must be a positive int")
    return scores.new_empty((scores.shape[0], k), dtype=torch.int32)


def _select_out(scores, lengths, k, out, sorted=False, deterministic=False):
    default_selector().select(scores, lengths, k, out=out, sorted=sorted,
                              deterministic=deterministic)


def _select_out_fake(scores, lengths, k, out, sorted=False, deterministic=False):
    if k < 1:
        raise ValueError(f"k = {k}: must be a positive int")


define("select(Tensor scores, Tensor lengths, int k, bool sorted=False, "
       "bool deterministic=False) -> Tensor", _select, _select_fake)
# The in-place variant returns nothing: an operator that returned its
# mutated argument could not be functionalised by torch.compile.
define("select_out(Tensor scores, Tensor lengths, int k, *, Tensor(a!) out, "
       "bool sorted=False, bool deterministic=False) -> ()", _select_out, _select_out_fake)
