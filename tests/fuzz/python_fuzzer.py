"""A seeded, coverage-guided random fuzzer for Python targets, in the standard library only
(Atheris, libFuzzer's Python binding, is not packaged for Debian 12), run by scripts/fuzz
beside the libFuzzer targets and in their manner:

- a target is a function of one input (bytes) that returns when the input was handled as
  promised and raises Finding (or anything else) when it was not;
- it starts from the committed corpus and the working corpus, mutates an input drawn from
  them (JSON-aware when the input is JSON, byte-wise otherwise, with the format's words),
  and keeps every input that reaches a new line pair (an edge) of the modules named as
  covered, as sys.settrace sees them, in the working folder;
- a finding, an input that runs past `timeout_s` (a watchdog thread ends the process, as
  libFuzzer's -timeout does), or one under which the resident set grows past `rss_limit_mb`
  stops the run: the input is kept in the crashes folder and its status is 1;
- at the end it prints libFuzzer's figures (stat::number_of_executed_units, exec/s), which
  scripts/fuzz reads.

`--replay PATH...` runs each input (a file, or every file of a folder) once instead, as
the C++ targets' fuzz-replay-<target> do in CTest.

The seed is printed first; `--seed S` repeats a run's inputs.
"""

import argparse
import hashlib
import json
import os
import random
import sys
import threading
import time
import traceback


class Finding(Exception):
    """The target broke a promise; the message is one line."""


INTERESTING_NUMBERS = (0, 1, -1, 2, 3, 4, 7, 8, 255, 256, 4095, 4096, 4097, 65536, 1 << 20, (1 << 20) + 4096,
                       (1 << 31) - 1, 1 << 31, (1 << 32) - 1, 1 << 32, (1 << 63) - 1, 1 << 63, 1 << 64, -(1 << 63),
                       10 ** 30, 0.5, -0.0, 1e308, float("inf"), float("-inf"), float("nan"))
INTERESTING_BYTES = (0, 1, 0x7F, 0x80, 0xFF, ord('"'), ord("\\"), ord("["), ord("]"), ord("{"), ord("}"), ord(","),
                     ord(":"), ord("-"), ord("0"), ord("9"), ord("e"))


class Mutator:
    """Mutations of one input, drawn from `rng`; `words` are the format's tokens."""

    def __init__(self, rng, words, max_len):
        self.rng, self.words, self.max_len = rng, words, max_len

    def mutate(self, data, corpus):
        rng = self.rng
        for _ in range(rng.randint(1, 4)):
            if rng.random() < 0.6:
                data = self.json_mutation(data, corpus) or self.byte_mutation(data, corpus)
            else:
                data = self.byte_mutation(data, corpus)
        return data[:self.max_len]

    # ---- JSON-aware ----

    def json_mutation(self, data, corpus):
        try:
            document = json.loads(data)
        except (ValueError, RecursionError):
            return None
        nodes = []
        self.collect(document, None, None, nodes, 0)
        parent, key, node = self.rng.choice(nodes)
        replacement = self.new_node(node, corpus)
        if parent is None:
            if replacement is _DELETE:
                return None
            document = replacement
        elif replacement is _DELETE:
            del parent[key]
        else:
            parent[key] = replacement
        try:
            return json.dumps(document, separators=(",", ":")).encode()
        except (ValueError, RecursionError):
            return None

    def collect(self, node, parent, key, nodes, depth):
        nodes.append((parent, key, node))
        if depth > 80:
            return
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for child_key, child in list(items):
            self.collect(child, node, child_key, nodes, depth + 1)

    def new_node(self, node, corpus):
        rng = self.rng
        choice = rng.randrange(11)
        if choice == 0:
            return rng.choice(INTERESTING_NUMBERS)
        if choice == 1 and isinstance(node, (int, float)) and not isinstance(node, bool):
            return type(node)(node + rng.choice((-4097, -4096, -8, -4, -1, 1, 4, 8, 4096, 4097)))
        if choice == 2:
            return rng.choice(self.words)
        if choice == 3:
            return rng.choice((None, True, False, "", [], {}, [[]], {"$": None}))
        if choice == 4 and isinstance(node, list) and node:
            return node + [rng.choice(node)] * rng.randint(1, 64)
        if choice == 5 and isinstance(node, dict):
            copy = dict(node)
            if copy and rng.random() < 0.5:
                del copy[rng.choice(list(copy))]
            else:
                copy[rng.choice(self.words)] = rng.choice(INTERESTING_NUMBERS + tuple(self.words))
            return copy
        if choice == 6:
            return [node] * rng.randint(1, 3) if rng.random() < 0.5 else {rng.choice(self.words): node}
        if choice == 7:
            return _DELETE
        if choice == 8 and corpus:
            try:
                other = json.loads(rng.choice(corpus))
            except (ValueError, RecursionError):
                return node
            nodes = []
            self.collect(other, None, None, nodes, 0)
            return rng.choice(nodes)[2]
        if choice == 9 and isinstance(node, str):
            return node + rng.choice(("\x00", "\u2028", "\udcff", "é", node))
        return rng.choice(INTERESTING_NUMBERS) if isinstance(node, (int, float)) else node

    # ---- byte-wise ----

    def byte_mutation(self, data, corpus):
        rng, data = self.rng, bytearray(data)
        choice = rng.randrange(7)
        at = rng.randrange(len(data) + 1)
        if choice == 0 and data:
            data[min(at, len(data) - 1)] ^= 1 << rng.randrange(8)
        elif choice == 1 and data:
            data[min(at, len(data) - 1)] = rng.choice(INTERESTING_BYTES)
        elif choice == 2:
            data[at:at] = json.dumps(rng.choice(self.words)).encode()
        elif choice == 3 and data:
            end = min(len(data), at + rng.randint(1, 16))
            del data[at:end]
        elif choice == 4 and data:
            start = rng.randrange(len(data))
            chunk = data[start:start + rng.randint(1, 64)]
            data[at:at] = chunk * rng.randint(1, 8)
        elif choice == 5 and corpus:
            other = rng.choice(corpus)
            cut = rng.randrange(len(other) + 1)
            data = data[:at] + bytearray(other[cut:])
        else:
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        return bytes(data)


_DELETE = object()  # a JSON node's replacement that removes it from its parent


class Coverage:
    """Line pairs (edges) run in the files under `roots`, as sys.settrace reports them."""

    def __init__(self, roots):
        self.roots = tuple(os.path.realpath(root) + os.sep for root in roots)
        self.traced = {}  # code object -> whether its file is covered
        self.seen = set()
        self.run = set()

    def tracer(self, frame, event, arg):
        code = frame.f_code
        covered = self.traced.get(code)
        if covered is None:
            covered = self.traced[code] = os.path.realpath(code.co_filename).startswith(self.roots)
        if not covered:
            return None
        previous = [-1]

        def lines(frame, event, arg):
            if event == "line":
                self.run.add((code, previous[0], frame.f_lineno))
                previous[0] = frame.f_lineno
            return lines
        return lines

    def measure(self, target, data):
        """Runs `target(data)`; the number of edges it reached that no input reached before."""
        self.run = set()
        sys.settrace(self.tracer)
        try:
            target(data)
        finally:
            sys.settrace(None)
        new = self.run - self.seen
        self.seen |= new
        return len(new)


class Watchdog:
    """Ends the process when one input runs past `timeout_s` or the resident set grows past
    `rss_limit_mb`, keeping the input: a hang or runaway memory is a finding too."""

    def __init__(self, timeout_s, rss_limit_mb, keep):
        self.timeout_s, self.rss_limit = timeout_s, rss_limit_mb << 20
        self.keep = keep
        self.current, self.started = None, None
        threading.Thread(target=self.watch, name="fuzz watchdog", daemon=True).start()

    def begin(self, data):
        self.current, self.started = data, time.monotonic()

    def end(self):
        self.current = None

    def watch(self):
        page = os.sysconf("SC_PAGE_SIZE")
        while True:
            time.sleep(0.01)
            data, started = self.current, self.started
            if data is None:
                continue
            with open("/proc/self/statm") as statm:
                resident = int(statm.read().split()[1]) * page
            if resident > self.rss_limit:
                self.keep(data, f"the resident set grew to {resident >> 20} MiB (limit {self.rss_limit >> 20} MiB)")
            elif time.monotonic() - started > self.timeout_s:
                self.keep(data, f"an input ran past {self.timeout_s} s")
            else:
                continue
            os._exit(1)


def inputs_in(paths):
    for path in paths:
        if os.path.isdir(path):
            for name in sorted(os.listdir(path)):
                if os.path.isfile(os.path.join(path, name)):
                    yield os.path.join(path, name)
        elif os.path.exists(path):
            yield path


def replay(target, paths):
    """Runs every input once; the number that broke a promise."""
    failed = 0
    for path in inputs_in(paths):
        with open(path, "rb") as file:
            data = file.read()
        try:
            target(data)
        except Exception as error:  # noqa: BLE001 (anything a target raises is a finding)
            failed += 1
            print(f"fuzz check failed: {path}: {type(error).__name__}: {one_line(error)}", file=sys.stderr)
            traceback.print_exc()
    return failed


def one_line(error):
    text = str(error)
    return text.splitlines()[0] if text else ""


def fuzz(target, options, words, covered):
    """The fuzzing loop; the process's exit status."""
    seed = options.seed if options.seed is not None else random.SystemRandom().randrange(1 << 63)
    print(f"INFO: seed: {seed}", flush=True)
    rng = random.Random(seed)
    os.makedirs(options.work, exist_ok=True)
    os.makedirs(options.crashes, exist_ok=True)

    def keep(data, why):
        name = os.path.join(options.crashes, "crash-" + hashlib.sha1(data).hexdigest())
        with open(name, "wb") as file:
            file.write(data)
        print(f"fuzz check failed: {why}\nTest unit written to {name}", file=sys.stderr, flush=True)

    watchdog = Watchdog(options.timeout, options.rss_limit_mb, keep)
    coverage = Coverage(covered)
    corpus = []
    executed = 0

    def run(data):
        nonlocal executed
        watchdog.begin(data)
        try:
            return coverage.measure(target, data)
        except Exception as error:  # noqa: BLE001 (anything a target raises is a finding)
            traceback.print_exc()
            keep(data, f"{type(error).__name__}: {one_line(error)}")
            sys.exit(1)
        finally:
            watchdog.end()
            executed += 1

    for path in inputs_in(options.corpus + [options.work]):
        with open(path, "rb") as file:
            data = file.read()[:options.max_len]
        run(data)
        corpus.append(data)
    if not corpus:
        corpus.append(b"{}")
    mutator = Mutator(rng, words, options.max_len)
    started = time.monotonic()
    deadline = started + options.seconds
    while time.monotonic() < deadline:
        data = mutator.mutate(rng.choice(corpus), corpus)
        if run(data):
            corpus.append(data)
            with open(os.path.join(options.work, hashlib.sha1(data).hexdigest()), "wb") as file:
                file.write(data)
    elapsed = max(time.monotonic() - started, 1e-9)
    print(f"#{executed} DONE cov: {len(coverage.seen)} corp: {len(corpus)} exec/s: {int(executed / elapsed)}")
    print(f"stat::number_of_executed_units: {executed}")
    return 0


def main(target, words, covered):
    """Runs `target` as the command line asks: fuzzing, or replaying inputs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replay", nargs="+", metavar="PATH")
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--work", default="fuzz-work")
    parser.add_argument("--crashes", default="fuzz-crashes")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--rss-limit-mb", type=int, default=2048)
    parser.add_argument("--max-len", type=int, default=64 << 10)
    parser.add_argument("corpus", nargs="*")
    options = parser.parse_args()
    if options.replay:
        failed = replay(target, options.replay)
        print(f"replayed: {failed} input(s) broke a promise" if failed else "replayed: every input kept its promises")
        return 1 if failed else 0
    return fuzz(target, options, words, covered)
