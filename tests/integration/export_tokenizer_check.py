#!/usr/bin/env python3
"""Checks a BERT export and its tokenizer with Hugging Face's libraries (examples.sh).

  export_tokenizer_check.py EXPORT_DIR SHARD_PREFIX TEXT
      EXPORT_DIR (`ringpilot export` of a BERT trained on token shards) loads with
      AutoTokenizer and BertForMaskedLM: the tokenizer encodes TEXT (the shard's source:
      documents separated by blank lines, each line without special tokens) to exactly the
      ids of SHARD_PREFIX.tokens; [CLS] [SEP] [MASK] [PAD] have the shard header's ids and
      config.json's pad_token_id is [PAD]'s; the model fills a [MASK].
  export_tokenizer_check.py --shard-only VOCAB SHARD_PREFIX TEXT
      The shard `ringpilot data tokenize --model VOCAB` wrote holds the `tokenizers`
      library's ids for TEXT (VOCAB: a WordPiece vocab.txt or a tokenizer.json), and
      SHARD_PREFIX.tokenizer.json encodes the same.

Prints one summary line; exits 1 with the problem otherwise.
"""
import json
import os
import struct
import sys


def read_shard(prefix):
    data = open(prefix + ".tokens", "rb").read()
    width, vocab, cls, sep, mask, pad = struct.unpack_from("<6I", data, 12)
    n, = struct.unpack_from("<Q", data, 40)
    ids = list(struct.unpack_from("<%d%s" % (n, "H" if width == 2 else "I"), data, 64))
    return dict(vocab=vocab, cls=cls, sep=sep, mask=mask, pad=pad), ids


def documents(path):
    docs, doc = [], []
    for line in open(path, encoding="utf-8").read().split("\n") + [""]:
        if line.strip(" \t\r\n\f\v"):
            doc.append(line)
        elif doc:
            docs.append(doc)
            doc = []
    return docs


def encode_all(encode, text):
    ids = []
    for doc in documents(text):
        for line in doc:
            ids.extend(encode(line))
    return ids


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def compare(name, got, want):
    if got != want:
        first = next(i for i, (a, b) in enumerate(zip(got + [None], want + [None])) if a != b)
        fail(f"{name}: {len(got)} ids, the shard {len(want)}; first difference at {first}: "
             f"{got[first:first + 5]} vs {want[first:first + 5]}")


def shard_only(vocab, prefix, text):
    from tokenizers import BertWordPieceTokenizer, Tokenizer
    if vocab.endswith(".json"):
        reference = Tokenizer.from_file(vocab)
    else:
        reference = BertWordPieceTokenizer(vocab, lowercase=True)
    header, ids = read_shard(prefix)
    compare("tokenizers' ids", encode_all(
        lambda line: reference.encode(line, add_special_tokens=False).ids, text), ids)
    written = Tokenizer.from_file(prefix + ".tokenizer.json")
    compare(prefix + ".tokenizer.json", encode_all(
        lambda line: written.encode(line, add_special_tokens=False).ids, text), ids)
    for key, name in (("cls", "[CLS]"), ("sep", "[SEP]"), ("mask", "[MASK]"), ("pad", "[PAD]")):
        if reference.token_to_id(name) != header[key]:
            fail(f"header {key} {header[key]}, the vocabulary's {name} is "
                 f"{reference.token_to_id(name)}")
    print(f"{len(ids)} ids, the same as the tokenizers library's; special ids "
          f"{[header[k] for k in ('cls', 'sep', 'mask', 'pad')]}")


def full(folder, prefix, text):
    import torch
    from transformers import AutoTokenizer, BertForMaskedLM
    header, ids = read_shard(prefix)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    config = json.load(open(os.path.join(folder, "config.json")))
    compare("AutoTokenizer", encode_all(
        lambda line: tokenizer(line, add_special_tokens=False)["input_ids"], text), ids)
    for key in ("cls", "sep", "mask", "pad"):
        got = getattr(tokenizer, key + "_token_id")
        if got != header[key]:
            fail(f"tokenizer.{key}_token_id {got}, the shard's {header[key]}")
    if config["pad_token_id"] != header["pad"]:
        fail(f"config.json pad_token_id {config['pad_token_id']}, the shard's [PAD] {header['pad']}")
    model = BertForMaskedLM.from_pretrained(folder).eval()
    sentence = f"This License applies to any {tokenizer.mask_token} which contains a notice."
    batch = tokenizer(sentence, return_tensors="pt")
    input_ids = batch["input_ids"][0].tolist()
    if input_ids[0] != header["cls"] or input_ids[-1] != header["sep"]:
        fail(f"{sentence!r} -> {input_ids}: not [CLS] ... [SEP]")
    where = (batch["input_ids"][0] == tokenizer.mask_token_id).nonzero()
    if len(where) != 1:
        fail(f"{sentence!r} -> {input_ids}: {len(where)} [MASK] ids")
    with torch.no_grad():
        logits = model(**batch).logits[0, where[0, 0]]
    top = logits.topk(5).indices.tolist()
    words = [tokenizer.decode([i]) for i in top]
    specials = {header[k] for k in ("cls", "sep", "mask", "pad")}
    if top[0] in specials or not torch.isfinite(logits).all():
        fail(f"[MASK] filled with {words} ({top})")
    print(f"AutoTokenizer ({type(tokenizer).__name__}) encodes the held-out text to the shard's "
          f"{len(ids)} ids; special ids and pad_token_id {header['pad']} match; "
          f"BertForMaskedLM fills the [MASK] with {words[0]!r} (top 5 {words})")


def main(argv):
    if argv and argv[0] == "--shard-only" and len(argv) == 4:
        shard_only(*argv[1:])
    elif len(argv) == 3:
        full(*argv)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
