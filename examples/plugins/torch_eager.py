"""Routing in PyTorch eager, as a user would write it (sigmoid, add the bias, top 8, gather the scores, sum,
divide), as a plug-in of the harness: it declares nothing, so it writes ids and weights for b = 1..8 on the
tensors it is handed (CUDA where there is a GPU, else the CPU).

    python -m properties.soak --impl torch_eager=examples/plugins/torch_eager.py:route --rows 1e6
"""

import torch

EPS = 1e-15  # vLLM's router_score_division_eps


def route(logits, bias, ids, weights, scale, renormalize=True, metadata=None, local_expert_offset=0,
          num_local_experts=0, tile_n=0):
    scores = torch.sigmoid(logits)
    picked = torch.topk(scores + bias, 8, dim=-1).indices
    chosen = torch.gather(scores, -1, picked)
    if renormalize:
        chosen = chosen / (chosen.sum(dim=-1, keepdim=True) + EPS)
    weights.copy_(chosen * scale)
    ids.copy_(picked)
