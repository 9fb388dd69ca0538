"""Global gradient norm and clipping: torch.nn.utils.clip_grad_norm_ itself."""
import torch


def forward(x, p):
    params = []
    for k in range(p["count"]):
        param = torch.nn.Parameter(torch.zeros_like(x[f"g{k}"]))
        param.grad = x[f"g{k}"].clone()
        params.append(param)
    total = torch.nn.utils.clip_grad_norm_(params, max_norm=p["max_norm"], norm_type=2.0)
    out = {f"clipped_g{k}": params[k].grad for k in range(p["count"])}
    out["total_norm"] = total.reshape(1)
    return out
