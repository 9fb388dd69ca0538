# Linear layer without bias, PyTorch weight convention: y = x W^T (W is [out, in]).
import torch


def forward(x, p):
    return {"y": torch.matmul(x["x"], x["w"].transpose(0, 1))}
