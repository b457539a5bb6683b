"""vLLM's sparse-indexer Top-K calls, with their signatures and meaning,
served by this package's exact selector (docs/engines.md: the one-line
change at vLLM's call site, and what differs).

    from topk_client.compat import vllm as topk_vllm
    topk_vllm.persistent_topk(logits, lengths, output, workspace, k, max_seq_len)
    topk_vllm.top_k_per_row_decode(logits, next_n, seq_lens, indices, num_rows,
                                   stride0, stride1, top_k)
    topk_vllm.top_k_per_row_prefill(logits, row_starts, row_ends, indices, num_rows,
                                    stride0, stride1, top_k)

or the same arguments to torch.ops.topk.vllm_persistent_topk,
torch.ops.topk.vllm_top_k_per_row_decode and
torch.ops.topk.vllm_top_k_per_row_prefill (registered by importing this
module; eager, CUDA graphs and torch.compile as topk_client.torch_ops).

What each writes, into the int32 output / indices (rows x >= K, contiguous
rows): row i's min(K, L_i) positions of its largest logits (exact; which of
tied positions is unspecified), then -1, positions counted from the row's
start. The logits past a row's end are never read, so they need no -inf
mask. L_i is:
  persistent_topk        lengths[i] (lengths: (rows,), or (B, next_n) laid
                         out row by row); workspace and max_seq_len are
                         accepted and unused (the selector keeps its own);
  top_k_per_row_decode   seq_lens (B,) or (B, 1): seq_lens[b] - next_n + 1 + j
                         for row i = b * next_n + j (speculative rows end
                         one position apart); seq_lens (B, next_n): its
                         entry for the row; clipped to [0, positions];
  top_k_per_row_prefill  row_ends[i] - row_starts[i], the window starting at
                         row_starts[i] of logits row i (read in place, no
                         copy: the C ABI's packed layout), indices counted
                         from row_starts[i].
Any K the selector takes (1 .. 2^20; vLLM's tests use 2048 and 3000).
"""

import torch

from topk_client.compat import _rows
from topk_client.compat._logits import first_rows, logits_rows, per_row_int32
from topk_client.compat._scratch import row_buffers
from topk_client.torch_ops import default_selector, define, is_compiling


# Eager: the implementation itself (the selector's host cost); while
# torch.compile traces: the registered operator, so that the graph holds it.

def persistent_topk(logits, lengths, output, workspace, k, max_seq_len):
    run = torch.ops.topk.vllm_persistent_topk if is_compiling() else _persistent_topk
    run(logits, lengths, output, workspace, k, max_seq_len)


def top_k_per_row_decode(logits, next_n, seq_lens, indices, num_rows, stride0, stride1, top_k):
    run = torch.ops.topk.vllm_top_k_per_row_decode if is_compiling() else _decode
    run(logits, next_n, seq_lens, indices, num_rows, stride0, stride1, top_k)


def top_k_per_row_prefill(logits, row_starts, row_ends, indices, num_rows, stride0, stride1,
                          top_k):
    run = torch.ops.topk.vllm_top_k_per_row_prefill if is_compiling() else _prefill
    run(logits, row_starts, row_ends, indices, num_rows, stride0, stride1, top_k)


def _persistent_topk(logits, lengths, output, workspace, k, max_seq_len):
    if isinstance(lengths, torch.Tensor) and lengths.dim() == 2:
        lengths = lengths.reshape(-1)  # (B, next_n), row by row: a view
    default_selector().select(logits, lengths, k, out=output)


def _decode(logits, next_n, seq_lens, indices, num_rows, stride0, stride1, top_k):
    scores = logits_rows(logits, num_rows, stride0, stride1)
    _rows.check_decode_lengths(seq_lens, next_n, num_rows)
    if seq_lens.dtype != torch.int32 or seq_lens.device != scores.device:
        raise ValueError(f"seq_lens: an int32 tensor on {scores.device}")
    if num_rows == 0:
        return
    buffers = row_buffers(scores, num_rows)
    lengths = _rows.decode_lengths(torch, seq_lens, next_n, scores.shape[1],
                                   buffers.steps(next_n), buffers.lengths[:num_rows])
    default_selector().select(scores, lengths, top_k, out=first_rows(indices, num_rows))


def _prefill(logits, row_starts, row_ends, indices, num_rows, stride0, stride1, top_k):
    scores = logits_rows(logits, num_rows, stride0, stride1)
    starts = per_row_int32(row_starts, "row_starts", num_rows, scores.device)
    ends = per_row_int32(row_ends, "row_ends", num_rows, scores.device)
    if num_rows == 0:
        return
    buffers = row_buffers(scores, num_rows)
    lengths, offsets = buffers.lengths[:num_rows], buffers.offsets[:num_rows]
    _rows.window_rows(torch, starts, ends, scores.stride(0), scores.shape[1],
                      buffers.row_index[:num_rows], lengths, offsets)
    default_selector().select(scores, lengths, top_k, out=first_rows(indices, num_rows),
                              row_offsets=offsets)


def _writes_in_place(*args):
    """The fake of an operator that only writes its output in place."""


define("vllm_persistent_topk(Tensor logits, Tensor lengths, Tensor(a!) output, "
       "Tensor workspace, int k, int max_seq_len) -> ()", _persistent_topk, _writes_in_place)
define("vllm_top_k_per_row_decode(Tensor logits, int next_n, Tensor seq_lens, "
       "Tensor(a!) indices, int num_rows, int stride0, int stride1, int top_k) -> ()",
       _decode, _writes_in_place)
define("vllm_top_k_per_row_prefill(Tensor logits, Tensor row_starts, Tensor row_ends, "
       "Tensor(a!) indices, int num_rows, int stride0, int stride1, int top_k) -> ()",
       _prefill, _writes_in_place)
