"""Train a tiny character model whose attention is an SV memory (exact path), then forget one
record of its context with a certificate per memory, and check the outputs against the model run
on the context without that record (docs/python.md "Certified forgetting")."""
import argparse
import os
import sys

import torch
from torch import nn

import svattn
import svattn.torch as st

SYNTHETIC = ("patient 17 reports chest pain since monday\n" "bp 150/95, ecg normal, troponin pending\n"
             "patient 23 admitted with fever and cough\n" "discharged home, follow up in two weeks\n") * 40


class TinyLM(nn.Module):
    """Bytes -> embedding -> SV attention block(s) -> MLP -> logits; no positional embedding, so the
    SV memory is the only place where the context lives."""

    def __init__(self, hidden_size=32, num_heads=2, num_layers=1):
        super().__init__()
        settings = st.ExactSettings(problem=svattn.ProblemSettings(C=0.3, bandwidth=1.0))
        self.emb = nn.Embedding(256, hidden_size)
        self.norms = nn.ModuleList(nn.LayerNorm(hidden_size) for _ in range(num_layers))
        self.attn = nn.ModuleList(st.SVAttention(hidden_size, num_heads, settings, layer_idx=i)
                                  for i in range(num_layers))
        self.mlp = nn.Sequential(nn.LayerNorm(hidden_size), nn.Linear(hidden_size, 4 * hidden_size),
                                 nn.GELU(), nn.Linear(4 * hidden_size, hidden_size))
        self.head = nn.Linear(hidden_size, 256)

    def forward(self, idx):
        x = self.emb(idx)
        for norm, attn in zip(self.norms, self.attn):
            x = x + attn(norm(x))
        return self.head(x + self.mlp(x))


def load_text(path):
    if path and os.path.exists(path):
        with open(path, "rb") as f:
            return f.read(200_000)
    return SYNTHETIC.encode()


def train(model, data, steps, batch, seq):
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(0)
    for step in range(steps):
        starts = torch.randint(0, len(data) - seq - 1, (batch,), generator=g)
        x = torch.stack([data[s:s + seq] for s in starts])
        y = torch.stack([data[s + 1:s + seq + 1] for s in starts])
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 5 == 0 or step == steps - 1:
            print(f"step {step} loss {loss.item():.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                                   "shared", "data", "tinyshakespeare", "input.txt"))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--forget", type=int, default=1, help="index of the record (line) to forget")
    a = ap.parse_args()
    torch.manual_seed(0)
    text = load_text(a.data)
    data = torch.tensor(list(text), dtype=torch.long)
    model = TinyLM().double()
    train(model, data, a.steps, batch=4, seq=48)
    model.eval()

    lines = [ln + b"\n" for ln in text.split(b"\n") if ln][:6]   # the context's records
    records, probe = lines[:5], lines[5]
    tok = lambda b: torch.tensor([list(b)], dtype=torch.long)  # noqa: E731
    context = tok(b"".join(records))
    start = sum(len(r) for r in records[:a.forget])
    span = (start, start + len(records[a.forget]))
    result = st.certify.forget_span(model, context, span, queries=tok(probe))

    without = tok(b"".join(r for i, r in enumerate(records) if i != a.forget) + probe)
    with torch.no_grad():
        reference = model(without)[:, -len(probe):]
        kept = model(tok(b"".join(records) + probe))[:, -len(probe):]
    diff = (result.outputs - reference).abs().max().item()
    influence = (kept - reference).abs().max().item()
    for c in result.certificates:
        print(f"layer {c.layer} head {c.head}: removed {len(c.removed_ids)} tokens, "
              f"{c.remaining} remain, state {c.state_sha256[:12]} == never-seen "
              f"{c.never_seen_sha256[:12]}: {c.equal}, optimality check ok: {c.removal.verify.ok}")
    print(f"record {a.forget} ({span[1] - span[0]} tokens) forgotten; certificates ok: {result.ok}; "
          f"fully covered: {result.fully_covered}")
    print(f"max |outputs - model(context without record)| = {diff:.2e} "
          f"(the record moved the outputs by {influence:.2e})")
    print("not covered:", *result.not_covered, sep="\n  - ")
    return 0 if result.ok and diff <= 1e-6 and influence > 1e-6 else 1


if __name__ == "__main__":
    sys.exit(main())
