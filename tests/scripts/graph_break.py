"""A compiled function that breaks its graph on one line (a print, which Dynamo cannot trace), trained for a
few steps: brrrtui must report the break on that line without printing Dynamo's log into the script's stderr."""

import torch

model = torch.nn.Linear(32, 32)
opt = torch.optim.SGD(model.parameters(), lr=0.01)


def step(x):
    h = model(x).relu()
    print("inside the compiled function")  # the graph break
    return (h * 2).sum()


compiled = torch.compile(step, backend="eager")
for _ in range(20):
    loss = compiled(torch.randn(8, 32))
    loss.backward()
    opt.step()
    opt.zero_grad()
