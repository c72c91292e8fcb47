"""The transformer LM of transformer_lm_gpu.cpp / lm_fabric.cpp in PyTorch,
trained under Lightning Fabric with the same sizes, batch, precision and
steps. Prints one line "RESULT program=lightning ..." for bench/gpu/run.sh.

  python3 lightning_lm.py --precision bf16-mixed [vocab dim heads layers seq batch steps warmup]
  python3 lightning_lm.py --plain ...   # dry run without Lightning: plain PyTorch loop

With one device, Fabric(strategy="auto") runs single-device, as the C++
runtime does with one process (it builds no process group then).
"""
import argparse
import sys
import time

import torch
from torch import nn


class TokenStream(torch.utils.data.Dataset):
    """Next-token prediction over the same deterministic pseudo-text."""

    def __init__(self, vocab, seq_len, samples):
        self.vocab, self.seq_len, self.samples = vocab, seq_len, samples

    def __len__(self):
        return self.samples

    def __getitem__(self, index):
        pos = torch.arange(index, index + self.seq_len + 1)
        tokens = (pos * 7 + torch.div(pos, 3, rounding_mode="floor")) % self.vocab
        return tokens[: self.seq_len], tokens[1 : self.seq_len + 1]


class TransformerLM(nn.Module):
    def __init__(self, vocab, dim, heads, layers):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=4 * dim, dropout=0.0)
        kwargs = {"enable_nested_tensor": False} if torch.__version__ >= "2" else {}
        self.encoder = nn.TransformerEncoder(layer, layers, **kwargs)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):  # [batch, seq] -> [batch * seq, vocab]
        x = self.embed(tokens).transpose(0, 1)
        x = self.encoder(x).transpose(0, 1)
        return torch.log_softmax(self.head(x), -1).flatten(0, 1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--precision", default="32-true")
    parser.add_argument("--plain", action="store_true", help="no Lightning (dry run)")
    parser.add_argument("sizes", nargs="*", type=int)
    args = parser.parse_args()
    sizes = [8192, 1024, 16, 8, 256, 32, 60, 10]
    sizes[: len(args.sizes)] = args.sizes
    vocab, dim, heads, layers, seq, batch, steps, warmup = sizes

    torch.manual_seed(0)
    dataset = TokenStream(vocab, seq, batch * (steps + warmup))
    loader = torch.utils.data.DataLoader(dataset, batch_size=batch, shuffle=False)
    model = TransformerLM(vocab, dim, heads, layers)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    if args.plain:
        if args.precision != "32-true":
            print(f"lightning_lm.py --plain: precision {args.precision} needs Lightning; "
                  "running 32-true", file=sys.stderr)
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model.to(device)
        to_device = lambda t: t.to(device)  # noqa: E731
        backward = lambda loss: loss.backward()  # noqa: E731
        precision = "32-true"
        program = "plain-torch"
    else:
        from lightning.fabric import Fabric

        fabric = Fabric(accelerator="auto", devices=1, strategy="auto", precision=args.precision)
        fabric.launch()
        model, optimizer = fabric.setup(model, optimizer)
        loader = fabric.setup_dataloaders(loader)
        device = fabric.device
        to_device = lambda t: t  # noqa: E731
        backward = fabric.backward
        precision = args.precision
        program = "lightning"

    model.train()
    step, last_loss = 0, 0.0
    start = time.perf_counter()
    while step < steps + warmup:
        for data, target in loader:
            if step == warmup:
                if device.type == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
            data, target = to_device(data), to_device(target)
            optimizer.zero_grad()
            output = model(data)
            loss = nn.functional.nll_loss(output, target.reshape(-1))
            backward(loss)
            optimizer.step()
            step += 1
            if step == steps + warmup:
                last_loss = loss.item()  # waits for the GPU
                break
    seconds = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else 0.0
    print(f"RESULT program={program} precision={precision} device={device} steps={steps} "
          f"seconds={seconds:.4f} steps_per_s={steps / seconds:.4f} peak_mem_mib={peak:.1f} "
          f"final_loss={last_loss:.6f}", flush=True)


if __name__ == "__main__":
    main()
