"""torch.compile called after a 1.5 s set-up, so while brrrtui's first (time) window is open; prints Dynamo's counters."""
import json, time, torch
class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.fc1 = torch.nn.Linear(64, 256); self.fc2 = torch.nn.Linear(256, 64)
    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))
model = MLP(); opt = torch.optim.SGD(model.parameters(), lr=0.01); x = torch.randn(32, 64)
t0 = time.time()
while time.time() - t0 < 1.5:   # set-up long enough for brrrtui's first time window to open
    torch.randn(64, 64) @ torch.randn(64, 64)
step_fn = torch.compile(model, backend="aot_eager")
for step in range(200):  # long enough for windows after the compile, even on a loaded machine
    loss = step_fn(x).pow(2).mean(); loss.backward(); opt.step(); opt.zero_grad()
from torch._dynamo.utils import counters
print("COUNTERS " + json.dumps({k: dict(v) for k, v in counters.items() if k in ("graph_break", "stats", "recompiles")}))
