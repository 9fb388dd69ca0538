"""Per-op formulas for tests/torch_oracle.py: tests/oracle/<op>.py defines
forward(inputs: dict[str, torch.Tensor], params: dict) -> dict[str, torch.Tensor],
written in plain PyTorch from the op's definition (README.md's Design section, the papers), never from our C++."""
