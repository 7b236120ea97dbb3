"""selection="profile" on the GPU: per-site times of both ABFT GEMM schemes next to the
unprotected op, for the intensity-guided ABFT paper's DLRM-style MLP and Llama decode layers,
plus the device probe (device="measure"). Prints explain tables and a total-overhead summary.

    python benchmarks/profile_selection.py
"""
import torch
import torch.nn as nn

import ftcompile
from ftcompile import hardware


def overheads(report):
    base = sum(r.measured["unprotected"] for r in report.records)
    chosen = sum(r.measured[r.scheme] for r in report.records)
    glob = sum(r.measured["global"] for r in report.records)
    return base, chosen, glob


def main() -> None:
    spec = hardware.measure(torch.cuda.current_device())
    print(f"measured: copy {spec.bandwidth / 1e9:.0f} GB/s, bf16 {spec.flops['bf16'] / 1e12:.0f} "
          f"TFLOP/s, CMR bf16 {spec.cmr(torch.bfloat16):.0f}")
    cases = {
        "DLRM MLP 13-512-256-64, batch 1": (nn.Sequential(
            nn.Linear(13, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 64)),
            torch.randn(1, 13)),
        "Llama-7B decode MLP, batch 1": (nn.Sequential(
            nn.Linear(4096, 11008, bias=False), nn.SiLU(), nn.Linear(11008, 4096, bias=False)),
            torch.randn(1, 4096)),
    }
    for batch in (16, 32, 64):  # 32 and 64: the thin kernel's rows (17-128)
        cases[f"Llama-7B decode MLP, batch {batch}"] = (nn.Sequential(
            nn.Linear(4096, 11008, bias=False), nn.SiLU(), nn.Linear(11008, 4096, bias=False)),
            torch.randn(batch, 4096))
    for name, (model, x) in cases.items():
        model, x = model.cuda().to(torch.bfloat16), x.cuda().to(torch.bfloat16)
        report = ftcompile.explain(model, x, selection="profile")
        print(f"\n== {name}\n{report}")
        base, chosen, glob = overheads(report)
        print(f"total: unprotected {base:.4f} ms; profiled choice {chosen:.4f} ms "
              f"(+{100 * (chosen / base - 1):.0f}%); all-global {glob:.4f} ms "
              f"(+{100 * (glob / base - 1):.0f}%)")


if __name__ == "__main__":
    main()
