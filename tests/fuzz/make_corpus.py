#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz targets into tests/fuzz/corpus/<target>/, and their
dictionaries (tokens libFuzzer splices into inputs: key names, magic bytes) into
tests/fuzz/<target>.dict.

The seeds and dictionaries are checked in; this script says how they were made and remakes
them (`python3 tests/fuzz/make_corpus.py`, then commit; the job file's keys come from
docs/config.md, so rerun it when keys change). Each seed is a small valid input of its
target (plus a few near misses), so that libFuzzer starts from the formats' happy paths
rather than from nothing. Standard library only, except the two image seeds of
image_decode (PIL, from the venv of scripts/setup.sh; skipped with a note without it).
Regression inputs (reproducers of fixed findings) are added by hand as
corpus/<target>/regression-<what>; this script never removes files.
"""
import hashlib
import io
import json
import pathlib
import re
import struct
import sys
import tarfile
import zlib

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = HERE / "corpus"


def put(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (d / name).write_bytes(data)


def dictionary(target, tokens):
    """tests/fuzz/<target>.dict in libFuzzer's (AFL's) format: one quoted token a line."""
    def quote(t):
        if isinstance(t, str):
            t = t.encode()
        return '"' + "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else "\\x%02x" % b
                             for b in t) + '"'
    lines = ["# Tokens of %s inputs (tests/fuzz/make_corpus.py writes this file)." % target]
    lines += [quote(t) for t in dict.fromkeys(tokens)]
    (HERE / (target + ".dict")).write_text("\n".join(lines) + "\n")


def job_config_dict():
    keys = re.findall(r"^\| `([a-z_.]+)` \|", (ROOT / "docs" / "config.md").read_text(), re.M)
    tokens = []
    for k in keys:
        section, _, leaf = k.rpartition(".")
        tokens += [leaf + ": ", k + "="]
        if section:
            tokens.append(section + ":\n  ")
    tokens += ["{", "}", "[", "]", ", ", "\n", "\0", ": ", "- ", "&a ", "*a", "!!str ", "null",
               "true", "false", "0x10", "1e400", "-1", "2147483648", "9223372036854775808",
               '"', "'", "#", "---\n", "...\n", "<<: ", "~"]
    dictionary("job_config", tokens)


def job_config():
    for f in sorted((ROOT / "examples").glob("*.yaml")):
        put("job_config", "example-" + f.stem, f.read_bytes())
    small = ("name: fuzz\nworld: {nodes: 2, procs_per_node: 2, device: cpu}\n"
             "launch: {backend: mpi, hosts: [\"n1:2\", \"n2:2\"], mpirun_args: [--mca, btl, tcp]}\n"
             "model: {name: bert-tiny, seq_len: 64}\ndata: {kind: synthetic, batch_per_rank: 2}\n"
             "train: {steps: 10, lr: 0.01}\n")
    put("job_config", "mpi-hosts", small)
    put("job_config", "with-overrides", small + "\0train.steps=20\0comm.timeout_s=8\0metrics.enabled=false")
    put("job_config", "bad-key", "model: {name: resnet50}\ntrain: {stepz: 3}\n")
    put("job_config", "anchors", "model: &m {name: resnet18-cifar}\ndata: {kind: cifar, train: /x}\nx: *m\n")
    # The --set parser: one complete YAML value per override (text after it is an error),
    # a section given whole, and a nesting deeper than yaml-cpp follows.
    put("job_config", "set-trailing-text",
        small + "\0train={steps: 5} junk\0name=a b\0model={name: bert-tiny}\0train.lr=[0.1")
    put("job_config", "set-deep", small + "\0train.steps=" + "[" * 3000)
    # Many problems: the first 20 are listed, then "... and N more".
    put("job_config", "many-unknown-keys",
        "name: x\nmodel: {name: bert-tiny}\ntrain:\n" +
        "".join("  k%d: 1\n" % i for i in range(40)))


def checkpoint_manifest_dict():
    dictionary("checkpoint_manifest", [
        '"format"', '"ringpilot-checkpoint-v1"', '"step"', '"world_size"', '"job"',
        '"created_unix"', '"files"', '"state.pt"', '"manifest.json"', '"bytes"',
        '"sha256_chunk_bytes"', '"sha256_chunks"', '"sha256"', ": ", ", ", "{", "}", "[", "]",
        "null", "true", "false", "-1", "0", "21", "1e400", "18446744073709551615",
        "9223372036854775807", "-9223372036854775808", '""', '"../"', '"\\u0000"',
        '"' + hashlib.sha256(STATE).hexdigest() + '"'])


def http_request_dict():
    dictionary("http_request", [
        "GET ", "HEAD ", "POST ", "PUT ", "OPTIONS ", "CONNECT ", " HTTP/1.1\r\n", " HTTP/1.0\r\n",
        "/metrics", "/", "?", "#", "%00", "%2e%2e/", "\r\n", "\r\n\r\n", "\n", "Host: ",
        "Authorization: Basic ", "Authorization: Bearer ", "cHJvbTpzM2NyZXQ=", "=", "Accept-Encoding: gzip\r\n",
        "Content-Length: ", "Transfer-Encoding: chunked\r\n", "Expect: 100-continue\r\n",
        "Connection: keep-alive\r\n", "Connection: close\r\n", "Range: bytes=0-1\r\n", ": ",
        "\x00", "\x01", "\xff"])


def data_dicts():
    dictionary("tar_shards", [
        "ustar\x00", "ustar  \x00", "00", "0000644\x00", "00000000000\x00", "\x80", "\xff",
        "0", "5", "7", "L", "x", "g", "././@LongLink", " path=", " size=", "\n", ".jpg", ".JPEG",
        ".png", ".cls", "/", ".", "        "])
    dictionary("token_shard", [
        "RPTOKENS", "RPTOKIDX", "\x01\x00\x00\x00", "\x02\x00\x00\x00", "\x04\x00\x00\x00",
        "\x00\x00\x01\x00", "\x00\x00\x00\x00", "\xff\xff\xff\xff",
        "\xff\xff\xff\xff\xff\xff\xff\xff", "\x00\x00\x00\x00\x00\x00\x00\x80"])
    dictionary("image_decode", [
        "\xff\xd8\xff", "\xff\xd9", "\xff\xc0", "\xff\xc2", "\xff\xc4", "\xff\xda", "\xff\xdb",
        "\xff\xdd", "\xff\xe0", "\xff\xee", "Adobe", "\x89PNG\r\n\x1a\n", "IHDR", "IDAT", "IEND",
        "PLTE", "tRNS", "iCCP", "acTL", "\x00\x00\x00\x0d"])


def nodelist():
    for i, s in enumerate(["n1", "gpu[08-10]", "a[1-2]-ib[3-4],login", "node[001-003,7,9-10]",
                           "n[3-1]", "x[1-2", "host]", "rack[1-2]-n[01-16]", "2(x3),1", "4,4,2(x2)"]):
        put("nodelist", "seed-%02d" % i, s)


STATE = b"ringpilot fuzz state\n"  # the state.pt the manifest fuzzer writes beside each input


def checkpoint_manifest():
    # First byte even: the manifest text follows; odd: bytes for the fuzzer's generator.
    def put(target, name, data):
        globals()["put"](target, name, b"\0" + (data.encode() if isinstance(data, str) else data))
    globals()["put"]("checkpoint_manifest", "generated-1", b"\1" + bytes(range(64)))
    globals()["put"]("checkpoint_manifest", "generated-2", b"\1" + bytes(range(255, 0, -3)))
    chunked = {
        "format": "ringpilot-checkpoint-v1", "step": 10, "world_size": 2, "job": "name: fuzz\n",
        "created_unix": 1764000000.5,
        "files": {"state.pt": {"bytes": len(STATE), "sha256_chunk_bytes": 67108864,
                               "sha256_chunks": [hashlib.sha256(STATE).hexdigest()]}}}
    put("checkpoint_manifest", "chunked", json.dumps(chunked, indent=2))
    small_chunks = json.loads(json.dumps(chunked))
    small_chunks["files"]["state.pt"]["sha256_chunk_bytes"] = 8
    small_chunks["files"]["state.pt"]["sha256_chunks"] = [
        hashlib.sha256(STATE[i:i + 8]).hexdigest() for i in range(0, len(STATE), 8)]
    put("checkpoint_manifest", "chunks-of-8", json.dumps(small_chunks))
    legacy = json.loads(json.dumps(chunked))
    legacy["files"]["state.pt"] = {"bytes": len(STATE), "sha256": hashlib.sha256(STATE).hexdigest()}
    put("checkpoint_manifest", "whole-file-sha256", json.dumps(legacy))
    corrupt = json.loads(json.dumps(chunked))
    corrupt["files"]["state.pt"]["sha256_chunks"] = ["0" * 64]
    put("checkpoint_manifest", "corrupt", json.dumps(corrupt))
    put("checkpoint_manifest", "not-json", '{"format": "ringpilot-checkpoint-v1", "step": ')


def http_request():
    auth = "Authorization: Basic cHJvbTpzM2NyZXQ=\r\n"
    reqs = {
        "get-metrics": "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
        "get-gzip": "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n",
        "head": "HEAD /metrics HTTP/1.0\r\n\r\n",
        "index": "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        "other-path": "GET /metrics/../etc/passwd?x=1 HTTP/1.1\r\n\r\n",
        "post": "POST /metrics HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd",
        "chunked": "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n",
        "garbage": "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        "http09": "GET /metrics\r\n\r\n",
    }
    for name, r in reqs.items():
        put("http_request", "open-" + name, "\0" + r)
    put("http_request", "auth-ok", "\1GET /metrics HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n")
    put("http_request", "auth-wrong", "\1GET /metrics HTTP/1.1\r\nAuthorization: Basic cHJvbTp3cm9uZw==\r\n\r\n")
    put("http_request", "auth-bad-base64", "\1GET / HTTP/1.1\r\nAuthorization:   basic  !!==\r\n\r\n")
    put("http_request", "auth-missing", "\1HEAD /metrics HTTP/1.1\r\n\r\n")


def cifar():
    rec10 = bytes([7]) + bytes(range(256)) * 12
    put("cifar", "cifar10-one-record", b"\0" + rec10)
    rec100 = bytes([3, 42]) + bytes(3072)
    put("cifar", "cifar100-two-records", b"\1" + rec100 + bytes([1, 99]) + bytes(3072))
    put("cifar", "cifar10-truncated", b"\0" + rec10[:1000])
    put("cifar", "cifar10-bad-label", b"\0" + bytes([200]) + bytes(3072))


def token_shard():
    def shard(docs, vocab, width=None):
        width = width or (2 if vocab <= 65536 else 4)
        fmt = "<H" if width == 2 else "<I"
        ids = [t for d in docs for t in d]
        th = bytearray(64)
        th[0:8] = b"RPTOKENS"
        struct.pack_into("<IIIIIII", th, 8, 1, width, vocab % (1 << 32), 1, 2, 3, 0)
        struct.pack_into("<QQ", th, 40, len(ids), len(docs))
        tokens = bytes(th) + b"".join(struct.pack(fmt, t) for t in ids)
        ih = bytearray(32)
        ih[0:8] = b"RPTOKIDX"
        struct.pack_into("<I", ih, 8, 1)
        struct.pack_into("<QQ", ih, 16, len(docs), len(ids))
        offsets = [0]
        for d in docs:
            offsets.append(offsets[-1] + len(d))
        index = bytes(ih) + b"".join(struct.pack("<Q", o) for o in offsets)
        return struct.pack("<I", len(tokens)) + tokens + index
    put("token_shard", "three-docs", shard([[10, 11, 12, 13], [20, 21], [30, 31, 32, 33, 34, 35, 36]], 100))
    put("token_shard", "wide-ids", shard([[70000, 70001, 5], [99999]], 100000))
    put("token_shard", "bad-id", shard([[10, 11], [500]], 100))
    put("token_shard", "empty", shard([], 100))


def tar_shards():
    def tar(members, fmt):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = 1764000000
                t.addfile(info, io.BytesIO(data))
        return buf.getvalue()
    jpeg = b"\xff\xd8\xff\xe0" + bytes(60) + b"\xff\xd9"
    members = [("000001.jpg", jpeg), ("000001.cls", b"3\n"), ("000002.png", b"\x89PNG\r\n\x1a\n" + bytes(40)),
               ("000002.cls", b" 0 "), ("000003.cls", b"1"), ("dir/000004.JPEG", jpeg)]
    put("tar_shards", "ustar", tar(members, tarfile.USTAR_FORMAT))
    long_name = "a" * 120 + "/" + "b" * 60 + ".jpg"
    put("tar_shards", "gnu-long-name", tar([(long_name, jpeg), (long_name[:-4] + ".cls", b"2")], tarfile.GNU_FORMAT))
    put("tar_shards", "pax", tar([("p" * 150 + "/x.jpg", jpeg), ("p" * 150 + "/x.cls", b"5")], tarfile.PAX_FORMAT))
    put("tar_shards", "no-label", tar([("k.jpg", jpeg)], tarfile.USTAR_FORMAT))


def image_decode():
    def png(w, h, color_type, rows):
        def chunk(kind, data):
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        ihdr = struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0)
        raw = b"".join(b"\0" + r for r in rows)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    put("image_decode", "png-rgb-4x3", png(4, 3, 2, [bytes(range(i, i + 12)) for i in range(3)]))
    put("image_decode", "png-grey-2x2", png(2, 2, 0, [b"\x00\xff", b"\x80\x40"]))
    put("image_decode", "png-rgba-1x1", png(1, 1, 6, [b"\x10\x20\x30\x40"]))
    try:
        from PIL import Image
    except ImportError:
        print("make_corpus: no PIL here; JPEG seeds of image_decode left as they are", file=sys.stderr)
        return
    for name, mode, size, kw in [("jpeg-rgb-24x16", "RGB", (24, 16), {"quality": 80}),
                                 ("jpeg-grey-8x8", "L", (8, 8), {}),
                                 ("jpeg-progressive-40x40", "RGB", (40, 40), {"progressive": True}),
                                 ("jpeg-cmyk-8x8", "CMYK", (8, 8), {})]:
        img = Image.new(mode, size)
        img.putdata([tuple((x * 37 + y * 11 + c * 50) % 256 for c in range(len(mode)))
                     if len(mode) > 1 else (x * 37 + y * 11) % 256
                     for y in range(size[1]) for x in range(size[0])])
        out = io.BytesIO()
        img.save(out, "JPEG", **kw)
        put("image_decode", name, out.getvalue())


if __name__ == "__main__":
    for make in (job_config, nodelist, checkpoint_manifest, http_request, cifar, token_shard,
                 tar_shards, image_decode, job_config_dict, checkpoint_manifest_dict,
                 http_request_dict, data_dicts):
        make()
    print("make_corpus: seeds in", CORPUS)
