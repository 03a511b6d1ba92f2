"""(b) A small character LM in plain PyTorch whose attention is svattn.torch.HybridAttention,
trained on tiny-shakespeare with its loss printed.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/char_lm.py --steps 300
Data: --data PATH, else $SVATTN_DATA/tinyshakespeare/input.txt, else ../shared/data/... .
"""
import argparse
import contextlib
import math
import os
import time

import torch
from torch import nn

import svattn
import svattn.torch as st


class Block(nn.Module):
    def __init__(self, d, heads, chunk, C):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = st.HybridAttention(d, heads, chunk=chunk, problem=svattn.ProblemSettings(C=C))
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class CharLM(nn.Module):
    def __init__(self, vocab=256, d=64, heads=4, layers=2, chunk=32, C=1 / 16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads, chunk, C) for _ in range(layers))
        self.ln = nn.LayerNorm(d)

    def forward(self, tokens):
        x = self.embed(tokens)
        for b in self.blocks:
            x = b(x)
        return self.ln(x) @ self.embed.weight.t()  # tied head


def find_data(path):
    if path:
        return path
    roots = [os.environ.get("SVATTN_DATA", ""),
             os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data")]
    for r in roots:
        p = os.path.join(r, "tinyshakespeare", "input.txt")
        if r and os.path.exists(p):
            return p
    raise SystemExit("char_lm: tiny-shakespeare not found (pass --data PATH or set SVATTN_DATA)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data"), ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=8), ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3), ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=20)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    data = torch.frombuffer(bytearray(open(find_data(a.data), "rb").read()), dtype=torch.uint8).long()
    model = CharLM()
    # AdamW's default decay on the weights, none on the gates (svattn.torch.param_groups)
    opt = torch.optim.AdamW(st.param_groups(model, weight_decay=0.01), lr=a.lr)
    t0 = time.time()
    for step in range(1, a.steps + 1):
        starts = torch.randint(0, len(data) - a.seq - 1, (a.batch,))
        batch = torch.stack([data[s:s + a.seq + 1] for s in starts])
        log = step == 1 or step % a.log_every == 0 or step == a.steps
        # diagnostics copy a few numbers to the host: ask for them on logged steps only
        with st.record_diagnostics() if log else contextlib.nullcontext():
            logits = model(batch[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, 256), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if log:
            d = model.blocks[0].attn.diagnostics
            print(f"step {step:4d}  loss {loss.item():.4f}  bpc {loss.item() / math.log(2):.3f}  "
                  f"support {d['support_mean']:.1f}  gate {d['gate_mean']:.3f}  "
                  f"{time.time() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    main()
