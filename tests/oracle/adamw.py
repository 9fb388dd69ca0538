"""AdamW: torch.optim.AdamW itself, run for p["steps"] steps on the case's parameter and grads."""
import torch


def forward(x, p):
    param = torch.nn.Parameter(x["param"].clone())
    opt = torch.optim.AdamW([param], lr=p["lr"], betas=(p["beta1"], p["beta2"]), eps=p["eps"],
                            weight_decay=p["weight_decay"])
    for step in range(1, p["steps"] + 1):
        param.grad = x[f"grad{step}"].clone()
        opt.step()
    state = opt.state[param]
    return {"param": param.detach(), "m": state["exp_avg"], "v": state["exp_avg_sq"]}
