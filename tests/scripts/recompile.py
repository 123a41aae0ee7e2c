"""A compiled function called with a Python int that changes every call: Dynamo guards on it and compiles the
function again (until it marks it dynamic), which brrrtui must report on the function's line."""

import torch

model = torch.nn.Linear(16, 16)
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def step(x, scale):
    return (model(x) * scale).sum()


compiled = torch.compile(step, backend="eager", dynamic=False)
for i in range(12):
    loss = compiled(torch.randn(4, 16), i % 3 + 1)
    loss.backward()
    opt.step()
    opt.zero_grad()
