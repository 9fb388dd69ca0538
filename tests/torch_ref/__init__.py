"""Reference implementations of amor-run's models in plain PyTorch, written from design §3
and the papers, loading the same safetensors weights as the C++ models (names as in models/)."""
