#!/usr/bin/env python3
"""Hugging Face tokenizers for `ringpilot data tokenize` (installed as
bin/ringpilot-hf-tokenizer.py; the `ringpilot` binary runs it, users need not).

Everything that tokenises goes through Hugging Face's `tokenizers` library (and, for a
SentencePiece model, transformers' own SentencePiece converter): nothing here splits text.

  spm MODEL OUT_JSON CLS SEP MASK PAD
      Converts SentencePiece model MODEL (spm_train's .model) into OUT_JSON, a tokenizer.json
      that encodes as SentencePiece does, with [CLS] [SEP] [MASK] [PAD] (ids CLS.. PAD in
      MODEL) as special tokens and BERT's template ([CLS] A [SEP], [CLS] A [SEP] B [SEP]).
  encode VOCAB OUT_JSON OUT_IDS TEXT...
      VOCAB is a WordPiece vocab.txt (one token per line) or a tokenizer.json. Writes the
      tokenizer to OUT_JSON and the documents of the TEXT files (separated by blank lines;
      each line encoded without special tokens, the lines of a document concatenated) to
      OUT_IDS: one JSON line {"vocab_size", "cls", "sep", "mask", "pad"}, then per document
      a little-endian uint32 count and that many uint32 ids.

Problems are one line on stderr and exit status 1 (2: `tokenizers` or `transformers` is
missing).
"""
import json
import os
import struct
import sys
import types

# BERT's names first, then RoBERTa's.
SPECIAL_NAMES = {
    "cls": ("[CLS]", "<s>"),
    "sep": ("[SEP]", "</s>"),
    "mask": ("[MASK]", "<mask>"),
    "pad": ("[PAD]", "<pad>"),
}


class Problem(Exception):
    pass


def need(module):
    try:
        return __import__(module)
    except ImportError:
        print(f"ringpilot-hf-tokenizer: {sys.executable} has no `{module}` (pip install {module}; "
              "or set RINGPILOT_PYTHON to a Python that has it)", file=sys.stderr)
        sys.exit(2)


def bert_template(tokenizer, cls_token, cls_id, sep_token, sep_id):
    from tokenizers import processors
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{cls_token} $A {sep_token}",
        pair=f"{cls_token} $A {sep_token} $B:1 {sep_token}:1",
        special_tokens=[(cls_token, cls_id), (sep_token, sep_id)])


# ---- SentencePiece's model file: protobuf wire format (sentencepiece_model.proto) ---------

def _varint(buf, i):
    value = shift = 0
    while True:
        if i >= len(buf):
            raise Problem("truncated")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def _fields(buf):
    """(field number, value) of one message: ints for varints, bytes otherwise."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        else:
            raise Problem(f"unsupported protobuf wire type {wire}")
        yield number, value


def read_spm_proto(path):
    """The parts of a ModelProto that transformers' converter reads, as attributes."""
    data = open(path, "rb").read()
    pieces = []
    trainer = types.SimpleNamespace(model_type=1, byte_fallback=False, unk_id=0,
                                    unk_piece="<unk>")
    normalizer = types.SimpleNamespace(name="", precompiled_charsmap=b"", add_dummy_prefix=True,
                                       remove_extra_whitespaces=True, escape_whitespaces=True)
    for number, value in _fields(data):
        if number == 1:  # SentencePiece {piece = 1, score = 2, type = 3}
            piece = types.SimpleNamespace(piece="", score=0.0, type=1)
            for n, v in _fields(value):
                if n == 1:
                    piece.piece = v.decode("utf-8")
                elif n == 2:
                    piece.score = struct.unpack("<f", v)[0]
                elif n == 3:
                    piece.type = v
            pieces.append(piece)
        elif number == 2:  # TrainerSpec
            for n, v in _fields(value):
                if n == 3:
                    trainer.model_type = v
                elif n == 35:
                    trainer.byte_fallback = bool(v)
                elif n == 40:
                    trainer.unk_id = v
                elif n == 45:
                    trainer.unk_piece = v.decode("utf-8")
        elif number == 3:  # NormalizerSpec
            for n, v in _fields(value):
                if n == 1:
                    normalizer.name = v.decode("utf-8")
                elif n == 2:
                    normalizer.precompiled_charsmap = bytes(v)
                elif n == 3:
                    normalizer.add_dummy_prefix = bool(v)
                elif n == 4:
                    normalizer.remove_extra_whitespaces = bool(v)
                elif n == 5:
                    normalizer.escape_whitespaces = bool(v)
    if not pieces:
        raise Problem("no pieces: not a SentencePiece model")
    return types.SimpleNamespace(pieces=pieces, trainer_spec=trainer, normalizer_spec=normalizer)


def spm(model, out_json, ids):
    need("tokenizers")
    need("transformers")
    from transformers.convert_slow_tokenizer import SpmConverter
    try:
        proto = read_spm_proto(model)
    except (Problem, UnicodeDecodeError, struct.error) as e:
        raise Problem(f"{model}: cannot read the SentencePiece model ({e})")
    if proto.trainer_spec.model_type == 1:  # UNIGRAM
        vocab = [(p.piece, p.score) for p in proto.pieces]
    elif proto.trainer_spec.model_type == 2:  # BPE
        vocab = {p.piece: i for i, p in enumerate(proto.pieces)}
    else:
        raise Problem(f"{model}: model type {proto.trainer_spec.model_type} (word or char) has "
                      "no Hugging Face tokenizer; train it with --model_type=unigram or bpe")
    tokenizer = SpmConverter.build_tokenizer_from_spm_proto(proto, vocab)
    if tokenizer is None:
        raise Problem(f"{model}: transformers could not convert it")
    names = {}
    for key, token_id in zip(("cls", "sep", "mask", "pad"), ids):
        names[key] = proto.pieces[token_id].piece
    # Special tokens match whole in text ("the [MASK] of"), as in BERT's tokenizers.
    tokenizer.add_special_tokens([names[k] for k in ("cls", "sep", "mask", "pad")])
    bert_template(tokenizer, names["cls"], ids[0], names["sep"], ids[1])
    save(tokenizer, out_json)


def save(tokenizer, out_json):
    tmp = "%s.tmp-%d" % (out_json, os.getpid())
    tokenizer.save(tmp)
    os.replace(tmp, out_json)


def load_vocab(vocab):
    """A tokenizers.Tokenizer from a WordPiece vocab.txt or a tokenizer.json."""
    from tokenizers import Tokenizer
    if vocab.endswith(".json"):
        try:
            return Tokenizer.from_file(vocab)
        except Exception as e:  # the library's own exception type varies
            raise Problem(f"{vocab}: not a Hugging Face tokenizer.json ({str(e).splitlines()[0]})")
    from tokenizers import BertWordPieceTokenizer
    try:
        lines = open(vocab, encoding="utf-8").read().splitlines()
    except UnicodeDecodeError:
        raise Problem(f"{vocab}: not UTF-8 text (a WordPiece vocab.txt has one token per line)")
    words = [w for w in lines if w and not (w.startswith("[") and w.endswith("]"))
             and not w.startswith("##")]
    if not words:
        raise Problem(f"{vocab}: no tokens (a WordPiece vocab.txt has one token per line)")
    # An uncased vocabulary (bert-base-uncased) has no capital letters: lowercase the text
    # as its tokenizer does; a cased one keeps case.
    lowercase = not any(c.isupper() for w in words for c in w)
    try:
        return BertWordPieceTokenizer(vocab, lowercase=lowercase)._tokenizer
    except Exception as e:  # TypeError for a missing special token, among others
        raise Problem(f"{vocab}: not a WordPiece vocabulary for BERT ({e})")


def special_ids(tokenizer, vocab):
    ids, names = {}, {}
    for key, candidates in SPECIAL_NAMES.items():
        for name in candidates:
            token_id = tokenizer.token_to_id(name)
            if token_id is not None:
                ids[key], names[key] = token_id, name
                break
        else:
            raise Problem(f"{vocab}: no {candidates[0]} (or {candidates[1]}) token; masked-LM "
                          "training needs [CLS], [SEP], [MASK] and [PAD]")
    return ids, names


def encode(vocab, out_json, out_ids, texts):
    need("tokenizers")
    tokenizer = load_vocab(vocab)
    ids, names = special_ids(tokenizer, vocab)
    tokenizer.add_special_tokens([names[k] for k in ("cls", "sep", "mask", "pad")])
    bert_template(tokenizer, names["cls"], ids["cls"], names["sep"], ids["sep"])
    header = dict(vocab_size=tokenizer.get_vocab_size(with_added_tokens=True), **ids)
    with open(out_ids, "wb") as out:
        out.write((json.dumps(header) + "\n").encode())
        for text in texts:
            try:
                lines = open(text, encoding="utf-8", newline="\n").read().split("\n")
            except UnicodeDecodeError as e:
                raise Problem(f"{text}: not UTF-8 text ({e.reason} at byte {e.start})")
            document, batch = [], []

            def flush_batch():
                for encoding in tokenizer.encode_batch(batch, add_special_tokens=False):
                    document.extend(encoding.ids)
                batch.clear()

            for line in lines + [""]:  # the end of a file ends its last document
                if line.strip(" \t\r\n\f\v"):
                    batch.append(line)
                    continue
                flush_batch()
                if document:
                    out.write(struct.pack("<I%dI" % len(document), len(document), *document))
                    document.clear()
    save(tokenizer, out_json)


def main(argv):
    try:
        if len(argv) == 7 and argv[0] == "spm":
            spm(argv[1], argv[2], [int(x) for x in argv[3:7]])
        elif len(argv) >= 5 and argv[0] == "encode":
            encode(argv[1], argv[2], argv[3], argv[4:])
        else:
            print(__doc__, file=sys.stderr)
            return 1
    except Problem as e:
        print(f"ringpilot-hf-tokenizer: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"ringpilot-hf-tokenizer: {e.filename}: {e.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
