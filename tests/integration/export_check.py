"""Loads a `ringpilot export` into the reference implementation and compares outputs.

Usage: export_check.py MODEL WEIGHTS REFERENCE
  MODEL      resnet18-cifar | resnet50 | bert-tiny | bert-base
  WEIGHTS    the exported model.safetensors (BERT: config.json beside it)
  REFERENCE  the --reference file: "input" and ringpilot's "output" for it

ResNets: torchvision.models.resnet18 (with the CIFAR stem: 3x3 stride-1 conv1, no max-pool)
or resnet50, load_state_dict(strict=True), eval mode. BERT: BertForMaskedLM.from_pretrained
(the folder), eval mode, logits at every position. Prints one line; exits 1 on a mismatch.
"""
import os
import sys

import torch
from safetensors.torch import load_file

# float32 on the CPU, same maths in a different order (oneDNN vs ATen kernels): relative
# to the largest output magnitude.
TOLERANCE = 1e-4


def torchvision_model(name, weights):
    import torchvision

    state = load_file(weights)
    classes = state["fc.weight"].shape[0]
    if name == "resnet50":
        model = torchvision.models.resnet50(num_classes=classes)
    else:
        model = torchvision.models.resnet18(num_classes=classes)
        model.conv1 = torch.nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False)
        model.maxpool = torch.nn.Identity()
    model.load_state_dict(state, strict=True)
    return model


def bert_model(weights):
    from transformers import BertForMaskedLM

    model, info = BertForMaskedLM.from_pretrained(
        os.path.dirname(os.path.abspath(weights)), output_loading_info=True)
    # Only the tied decoder weight (the word embeddings) may be absent from the file.
    missing = [k for k in info["missing_keys"] if k != "cls.predictions.decoder.weight"]
    if missing or info["unexpected_keys"] or info["mismatched_keys"]:
        raise SystemExit(f"export_check: BertForMaskedLM loading: {info}")
    if not torch.equal(model.cls.predictions.decoder.weight,
                       model.bert.embeddings.word_embeddings.weight):
        raise SystemExit("export_check: decoder weight not tied to the word embeddings")
    return model


def main():
    name, weights, reference = sys.argv[1:4]
    ref = load_file(reference)
    torch.manual_seed(0)
    if name.startswith("bert"):
        model = bert_model(weights).eval()
        with torch.no_grad():
            out = model(input_ids=ref["input"]).logits
    else:
        model = torchvision_model(name, weights).eval()
        with torch.no_grad():
            out = model(ref["input"])
    expected = ref["output"]
    if out.shape != expected.shape:
        print(f"{name}: output shape {tuple(out.shape)}, ringpilot's {tuple(expected.shape)}")
        return 1
    scale = expected.abs().max().item()
    diff = (out - expected).abs().max().item()
    rel = diff / max(scale, 1e-12)
    verdict = "match" if rel <= TOLERANCE else "MISMATCH"
    print(f"{name}: {verdict}: max abs diff {diff:.3g} over outputs up to {scale:.3g} "
          f"(relative {rel:.3g}, tolerance {TOLERANCE:g}), shape {tuple(out.shape)}")
    return 0 if rel <= TOLERANCE else 1


if __name__ == "__main__":
    sys.exit(main())
