"""A tiny CPU training loop whose lines the tests find by their `# L:` markers."""

import sys

import torch
from sibling import double  # noqa: E402  (a sibling import: the script's folder is on sys.path)

torch.manual_seed(0)
lin = torch.nn.Linear(16, 16)
w = torch.randn(16, 16)
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 8
for step in range(steps):
    x = torch.randn(8, 16)
    y = x @ w  # L:matmul (an operator)
    z = 0.5 * y  # L:scale (an operator with a Python scalar)
    h = lin(z)  # L:module (a module call)
    loss = double(h).relu().sum()  # L:sibling_call
    loss.backward()  # L:backward
    opt.step()  # L:step
    opt.zero_grad()
print("argv", sys.argv, __name__, sys.path[0] == __file__.rsplit("/", 1)[0])
