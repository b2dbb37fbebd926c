"""What trainer/step/optimizer.h and the accumulation graphs rely on, in PyTorch terms, on a GPU:
the fused SGD/AdamW kernels read a float32 learning-rate tensor on the device when they run
(a fill between CUDA graph replays changes the rate, no re-capture), and gradients add up
across two graphs (a micro-batch graph replayed, then the last micro-batch with the update).
Six steps with changing rates and 2 micro-batches, eager vs graphs from step 3: the weights
must be bit-identical. Run: python3 tests/gpu/lr_tensor_graphs.py (exit 1 on a difference).
Seen on an H100, torch 2.11.0+cu130, 2026-11-25: equal for both optimizers.
"""
import sys

import torch

DEVICE = "cuda"
RATES = [0.0, 0.05, 0.1, 0.08, 0.02, 0.01]  # one per step, as a schedule would set them
MICRO = 2


def model():
    torch.manual_seed(1)
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 8))
    m = m.to(DEVICE)
    for p in m.parameters():
        p.grad = torch.zeros_like(p)  # static gradients, as the reducer's bucket views
    return m


def train(optimizer, graphed, batches):
    m = model()
    params = list(m.parameters())
    grads = [p.grad for p in params]
    steps = [torch.zeros((), device=DEVICE) for _ in params]
    state1 = [torch.zeros_like(p) for p in params]
    state2 = [torch.zeros_like(p) for p in params]
    lr = torch.full((), 0.1, device=DEVICE)  # float32, as trainer/step/optimizer.cpp
    x = torch.zeros(16, 64, device=DEVICE)  # the static input buffer

    def micro():
        (m(x).square().mean() / MICRO).backward()

    def last():
        micro()
        if optimizer == "sgd":
            torch._fused_sgd_(params, grads, state1, weight_decay=0.01, momentum=0.9, lr=lr,
                              dampening=0.0, nesterov=False, maximize=False, is_first_step=False)
        else:
            torch._foreach_add_(steps, 1.0)
            torch._fused_adamw_(params, grads, state1, state2, [], steps, lr=lr, beta1=0.9,
                                beta2=0.999, weight_decay=0.01, eps=1e-8, amsgrad=False,
                                maximize=False)

    graphs = {}
    for step, rate in enumerate(RATES):
        lr.fill_(rate)
        for g in grads:
            g.zero_()
        for k in range(MICRO):
            x.copy_(batches[step * MICRO + k])
            body = last if k + 1 == MICRO else micro
            if not graphed or step < 2:
                body()
                continue
            if body not in graphs:
                torch.cuda.synchronize()
                graphs[body] = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graphs[body]):
                    body()
            graphs[body].replay()
    torch.cuda.synchronize()
    return torch.cat([p.detach().flatten() for p in params])


def main():
    torch.manual_seed(0)
    batches = [torch.randn(16, 64, device=DEVICE) for _ in range(len(RATES) * MICRO)]
    ok = True
    for optimizer in ("sgd", "adamw"):
        eager = train(optimizer, False, batches)
        graphed = train(optimizer, True, batches)
        same = torch.equal(eager, graphed)
        print(f"{optimizer}: eager vs 2 graphs: max diff {(eager - graphed).abs().max().item()}, "
              f"equal {same}")
        ok = ok and same
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
