#!/usr/bin/env python3
"""Load on a rank's metrics exporter, for bench/scrape_load.sh and
tests/integration/exporter_abuse.sh. Standard library only; prints one JSON object.

  scrape_load.py scrape --ports P[,P...] --scrapers N --interval S --duration D
      N scrapers (threads), each doing GET /metrics on every port in turn, one new
      connection per scrape, then sleeping S seconds (0: back to back), for D seconds or
      until the file --stop-when-exists names exists.
      -> {"scrapes", "errors", "latency_p50_ms", "latency_p99_ms", "latency_max_ms",
          "scrapes_per_s", "cpu_percent" (this process, % of one core),
          "last_steps": {port: ringpilot_steps_total}}

  scrape_load.py abuse --port P --idle N --trickle N --duration D [--probe-every S]
      Holds N idle connections (connected, nothing sent) and N trickling ones (a request
      header sent one byte a second, never finished), sends garbage requests and one with a
      1 MB header, and meanwhile scrapes every S seconds (the probe a Prometheus would be).
      -> {"probes", "probe_failures", "probe_max_ms", "steps_first", "steps_last",
          "big_header_status", "garbage_answers": [first line, ...],
          "idle_closed_by_server"}
"""
import argparse
import json
import os
import re
import socket
import sys
import threading
import time

STEPS = re.compile(rb'^ringpilot_steps_total\{[^}]*\} ([0-9.e+]+)$', re.M)
GARBAGE = [
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(256)),
    b"GET\r\n\r\n",
    b"\r\n\r\n\r\n",
    b"GET /metrics HTTP/9.9\r\n\r\n",
    b"GET /%%%%/../../etc/passwd HTTP/1.1\r\nHost: \x00\xff\r\n\r\n",
    b"POST /metrics HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HEAD / HTTP/1.0\r\n" + b"X: y\r\n" * 200 + b"\r\n",
]


def request(port, data, timeout=10.0):
    """Sends `data` on a new connection and returns (first line or error, body, seconds)."""
    start = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            try:
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the server may answer and close before reading everything
            chunks = []
            while True:
                try:
                    chunk = s.recv(65536)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                chunks.append(chunk)
        answer = b"".join(chunks)
        line = answer.split(b"\r\n", 1)[0].decode("latin-1") if answer else "<closed>"
        return line, answer, time.monotonic() - start
    except OSError as e:
        return "<%s>" % e.__class__.__name__, b"", time.monotonic() - start


def scrape(port, timeout=10.0):
    return request(port, b"GET /metrics HTTP/1.1\r\nHost: bench\r\n\r\n", timeout)


def steps_of(body):
    m = STEPS.search(body)
    return float(m.group(1)) if m else None


def percentile(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def cmd_scrape(args):
    ports = [int(p) for p in args.ports.split(",")]
    lock = threading.Lock()
    latencies, errors, last = [], [0], {}
    start = time.monotonic()
    cpu0 = time.process_time()
    stop = start + args.duration

    def done():
        return time.monotonic() >= stop or (args.stop_when_exists and os.path.exists(args.stop_when_exists))

    def worker():
        while not done():
            for port in ports:
                line, body, took = scrape(port)
                with lock:
                    if line.startswith("HTTP/1.1 200"):
                        latencies.append(took)
                        s = steps_of(body)
                        if s is not None:
                            last[port] = max(last.get(port, 0), s)
                    else:
                        errors[0] += 1
            if args.interval > 0:
                time.sleep(args.interval)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(args.scrapers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ms = [x * 1000 for x in latencies]
    wall = time.monotonic() - start
    print(json.dumps({
        "scrapes": len(ms), "errors": errors[0],
        "scrapes_per_s": round(len(ms) / wall, 1),
        "cpu_percent": round(100 * (time.process_time() - cpu0) / wall, 1),
        "latency_p50_ms": percentile(ms, 50), "latency_p99_ms": percentile(ms, 99),
        "latency_max_ms": max(ms) if ms else None,
        "last_steps": {str(k): v for k, v in last.items()}}))


def cmd_abuse(args):
    port = args.port
    held = []
    for _ in range(args.idle):
        held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
    trickling = []
    for _ in range(args.trickle):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: slow\r\nX-Slow: ")
        trickling.append(s)
    stop = threading.Event()

    def trickle():  # one more header byte a second on every trickling connection
        while not stop.wait(1.0):
            for s in list(trickling):
                try:
                    s.sendall(b"a")
                except OSError:
                    trickling.remove(s)

    threading.Thread(target=trickle, daemon=True).start()
    garbage_answers = [request(port, g)[0] for g in GARBAGE]
    big_line = request(port, b"GET /metrics HTTP/1.1\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n")[0]
    probes, failures, worst, steps = 0, 0, 0.0, []
    end = time.monotonic() + args.duration
    while time.monotonic() < end:
        line, body, took = scrape(port, timeout=args.probe_timeout)
        probes += 1
        worst = max(worst, took)
        if line.startswith("HTTP/1.1 200") and steps_of(body) is not None:
            steps.append(steps_of(body))
        else:
            failures += 1
            print("probe %d: %s after %.2f s" % (probes, line, took), file=sys.stderr)
        time.sleep(args.probe_every)
    stop.set()
    closed = 0
    for s in held:
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        s.close()
    for s in trickling:
        s.close()
    print(json.dumps({
        "probes": probes, "probe_failures": failures, "probe_max_ms": round(worst * 1000, 1),
        "steps_first": steps[0] if steps else None, "steps_last": steps[-1] if steps else None,
        "big_header_status": big_line, "garbage_answers": garbage_answers,
        "idle_closed_by_server": closed}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("scrape")
    s.add_argument("--ports", required=True)
    s.add_argument("--scrapers", type=int, default=50)
    s.add_argument("--interval", type=float, default=1.0)
    s.add_argument("--duration", type=float, required=True)
    s.add_argument("--stop-when-exists", default="")
    a = sub.add_parser("abuse")
    a.add_argument("--port", type=int, required=True)
    a.add_argument("--idle", type=int, default=200)
    a.add_argument("--trickle", type=int, default=50)
    a.add_argument("--duration", type=float, required=True)
    a.add_argument("--probe-every", type=float, default=0.5)
    a.add_argument("--probe-timeout", type=float, default=5.0)
    args = p.parse_args()
    if args.cmd == "scrape":
        cmd_scrape(args)
    else:
        cmd_abuse(args)


if __name__ == "__main__":
    main()
