"""Engine drop-ins: the call signatures of the engines' own sparse-indexer
Top-K kernels, served by this package's exact selector in this process.

    topk_client.compat.vllm     persistent_topk, top_k_per_row_decode, top_k_per_row_prefill
    topk_client.compat.sglang   fast_topk_v2

Each is also a torch operator (torch.ops.topk.vllm_*, torch.ops.topk.sglang_*)
once its module is imported, so that an engine changes one line at the call
site (docs/engines.md). They sit over topk_client.torch_ops and
topk_client.inprocess and import nothing from the RPC side of the package.
"""
