"""The exactness check the GPU client tests share: set-valued (ties allowed),
sentinels, distinct in-range indices, and the values at the indices."""
import torch


def check(scores, lengths, k, indices, values=None):
    """Set-valued exactness with ties, every row at once on the scores' device:
    row r holds min(k, L_r) distinct indices in [0, L_r), then -1; the
    multiset of their scores is the row's min(k, L_r) largest; values (when
    given) are the scores at the indices, NaN after them. Raises
    AssertionError naming the first bad row and what is wrong with it."""
    m, n = scores.shape
    dev = scores.device
    length = lengths[:m].to(device=dev, dtype=torch.int64)
    want = length.clamp(max=k)
    cols = torch.arange(k, device=dev)
    live = cols[None, :] < want[:, None]
    got = indices[:, :k].to(torch.int64)
    problems = {
        "sentinels": ((~live) & (got != -1)).any(1),
        "range": (live & ((got < 0) | (got >= length[:, None]))).any(1),
    }
    # Distinct: sorted, with the dead cells replaced by values above any index.
    ordered = torch.where(live, got, n + cols[None, :]).sort(dim=1).values
    problems["duplicates"] = (ordered[:, 1:] == ordered[:, :-1]).any(1)
    kk = min(k, n)  # columns past n are never live (want <= L <= n)
    if kk > 0:
        pos = torch.arange(n, device=dev)
        masked = scores.masked_fill(pos[None, :] >= length[:, None], float("-inf"))
        neg = torch.full((), float("-inf"), dtype=scores.dtype, device=dev)
        best = torch.where(live[:, :kk], torch.topk(masked, kk, dim=1).values, neg)
        picked = torch.gather(scores, 1, got[:, :kk].clamp(0, max(n - 1, 0)))
        picked = torch.where(live[:, :kk], picked, neg).sort(dim=1, descending=True).values
        problems["not the k largest"] = (picked != best).any(1)
    if values is not None:
        vals = values[:, :k]
        at = torch.gather(scores, 1, got.clamp(0, max(n - 1, 0)))
        problems["values"] = (live & (vals != at)).any(1) | ((~live) & ~torch.isnan(vals)).any(1)
    bad = torch.stack(list(problems.values()), dim=1)
    if bool(bad.any()):
        row, which = (int(v) for v in bad.nonzero()[0])
        raise AssertionError(f"row {row}: {list(problems)[which]} (length {int(length[row])}, "
                             f"k {k}, n {n})")
