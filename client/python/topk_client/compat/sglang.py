"""SGLang's indexer Top-K call (its sgl_kernel fast_topk_v2), with its
signature and meaning, served by this package's exact selector
(docs/engines.md: the change at SGLang's call site, and what differs).

    from topk_client.compat.sglang import fast_topk_v2
    indices = fast_topk_v2(score, lengths, topk, row_starts=None)   # (B, topk) int32

or torch.ops.topk.sglang_fast_topk_v2(score, lengths, topk, row_starts)
(registered by importing this module; eager, CUDA graphs, torch.compile).

score: (B, L) float32 / bfloat16 / float16 CUDA logits, contiguous along a
row; lengths: (B,) int32; row_starts: None (paged: row i's window is
[0, lengths[i])) or (B,) int32 (ragged: [row_starts[i], row_starts[i] +
lengths[i]) of row i, read in place through the C ABI's packed layout).
Row i of the result: its window's min(topk, lengths[i]) largest positions
(exact; which of tied positions is unspecified), counted from the window's
start, then -1. Any topk the selector takes (SGLang's own kernel: 2048 only).
"""

import torch

from topk_client.compat import _rows
from topk_client.compat._logits import per_row_int32
from topk_client.compat._scratch import row_buffers
from topk_client.torch_ops import default_selector, define, is_compiling


def fast_topk_v2(score, lengths, topk, row_starts=None):
    # Eager: the implementation itself; while torch.compile traces: the operator.
    run = torch.ops.topk.sglang_fast_topk_v2 if is_compiling() else _fast_topk_v2
    return run(score, lengths, topk, row_starts)


def _fast_topk_v2(score, lengths, topk, row_starts=None):
    selector = default_selector()
    if row_starts is None:
        return selector.select(score, lengths, topk)
    rows = score.shape[0] if score.dim() == 2 else 0
    starts = per_row_int32(row_starts, "row_starts", rows, score.device)
    if rows == 0:
        return selector.select(score, lengths, topk)
    buffers = row_buffers(score, rows)
    offsets = _rows.window_offsets(torch, starts, score.stride(0), buffers.row_index[:rows],
                                   buffers.offsets[:rows])
    return selector.select(score, lengths, topk, row_offsets=offsets)


def _fast_topk_v2_fake(score, lengths, topk, row_starts=None):
    return score.new_empty((score.shape[0], topk), dtype=torch.int32)


define("sglang_fast_topk_v2(Tensor score, Tensor lengths, int topk, Tensor? row_starts=None) "
       "-> Tensor", _fast_topk_v2, _fast_topk_v2_fake)
