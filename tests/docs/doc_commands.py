#!/usr/bin/env python3
"""Runs every command and config the user-facing pages show, as written, on this machine.

    doc_commands.py SOURCE BUILD [--builds] [PAGE...]

Each page runs in a sandbox of its own (doc_sandbox.py), its blocks in the page's order, as
their doc-test markers say (doc_blocks.py). A config block is written where its marker says
and checked by the page's own `comfy-supervisor check` line, or by the one the marker adds.
Commands that compile the project (marked `build`) run only with --builds, in a scratch build
folder: scripts/doc-check does that (minutes); CTest runs the rest. Exits 0 when every block
ran as written, 77 (skipped) where bwrap cannot make the sandbox; otherwise 1, printing the
page, line and command that failed, and the last lines of what it printed.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
from pathlib import Path

import doc_blocks
import doc_sandbox

PAGES = ("README.md", "docs/INSTALL.md", "docs/OPERATIONS.md", "docs/PACKS.md", "docs/ADOPTING.md")
SKIPPED = 77  # CTest's SKIP_RETURN_CODE for this test
# The supervisor a `with-supervisor` block talks to: the installed demo's config with the
# HTTP port the pages name.
SERVE = """
examples=/usr/local/share/comfy-supervisor/examples
python3 -c 'import json, sys
config = json.load(open(sys.argv[1]))
config["http"] = {"listen": "127.0.0.1:8189"}
json.dump(config, open(sys.argv[2], "w"))' "$examples/demo.json" "$examples/doc-test-serve.json"
comfy-supervisor run --config "$examples/doc-test-serve.json" --instance doc-test >/srv/doc-test/serve.log 2>&1 &
serving=$!
for _ in $(seq 1 600); do
    curl -fsS 127.0.0.1:8189/readyz >/dev/null 2>&1 && break
    kill -0 "$serving" 2>/dev/null || { cat /srv/doc-test/serve.log; echo "doc-test: the supervisor stopped"; exit 1; }
    sleep 0.1
done
"""
STOP_SERVING = 'kill -TERM "$serving"; wait "$serving" || { cat /srv/doc-test/serve.log; exit 1; }\n'
# `until`: the command in a process group of its own, stopped as Ctrl-C stops it once its
# output shows the text.
UNTIL = r"""
doc_until() {
    local text=$1 command=$2 log=/srv/doc-test/until.log
    setsid bash -c "$command" >"$log" 2>&1 &
    local group=$!
    for _ in $(seq 1 1200); do
        grep -qF -- "$text" "$log" && break
        kill -0 "$group" 2>/dev/null || break
        sleep 0.1
    done
    cat "$log"
    grep -qF -- "$text" "$log" || { echo "doc-test: '$text' never shown"; return 1; }
    kill -INT -- "-$group"
    local status=0
    wait "$group" || status=$?
    [ "$status" = 0 ] || [ "$status" = 130 ] || { echo "doc-test: status $status after Ctrl-C"; return 1; }
}
"""


def quoted_heredoc(text: str) -> str:
    tag = "DOC_TEST_END"
    assert tag not in text
    return f"<<'{tag}'\n{text}{'' if text.endswith(chr(10)) else chr(10)}{tag}\n"


def command_lines(block: doc_blocks.Block, command: doc_blocks.Command, builds: bool) -> str:
    where = f"{block.page.name}:{command.line}"
    first = command.text.splitlines()[0].split("  #", 1)[0].rstrip()
    shown = first + (" ..." if "\n" in command.text else "")
    if command.action == "skip" or (command.action == "build" and not builds):
        why = command.detail if command.action == "skip" else "compiles the project: scripts/doc-check runs it"
        return f"echo {shlex.quote(f'- {where} not run: {shown} ({why})')}\n"
    lines = f"doc_at={shlex.quote(where + ': ' + shown)}\necho {shlex.quote(f'$ {shown}')}\n"
    if command.action == "until":
        return lines + f"doc_until {shlex.quote(command.detail)} {shlex.quote(command.text)}\n"
    return lines + command.text + "\n"


def block_lines(block: doc_blocks.Block, builds: bool, source: Path) -> str:
    header = f"\necho {shlex.quote(f'## {block.where()} ({block.mode})')}\n"
    if block.mode == "output":
        return ""
    if block.mode == "skip":
        return f"echo {shlex.quote(f'- {block.where()} not run: {block.argument}')}\n"
    if block.mode == "file":
        path = shlex.quote(block.argument)
        lines = header + f"mkdir -p \"$(dirname {path})\"\ncat > {path} " + quoted_heredoc(block.text)
        return lines + "".join(command_lines(block, command, builds) for command in block.commands)
    lines = header + f"cd {shlex.quote(block.argument or str(source))}\n"
    if block.with_supervisor:
        lines += SERVE
    lines += "".join(command_lines(block, command, builds) for command in block.commands)
    if block.with_supervisor:
        lines += STOP_SERVING
    return lines


def page_script(page: str, blocks: list[doc_blocks.Block], builds: bool, source: Path) -> str:
    script = "set -eo pipefail\ndoc_at='the fixture'\n"
    script += "trap 'status=$?; [ $status = 0 ] || echo \"doc-test: FAILED at $doc_at (status $status)\"' EXIT\n"
    script += doc_sandbox.fixture_script(source, page) + UNTIL
    return script + "".join(block_lines(block, builds, source) for block in blocks)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("build", type=Path)
    parser.add_argument("--builds", action="store_true", help="also run the commands that compile the project")
    parser.add_argument("--show", action="store_true", help="print everything the pages' commands printed")
    parser.add_argument("pages", nargs="*", default=PAGES)
    options = parser.parse_args()
    source, build = options.source.resolve(), options.build.resolve()
    with tempfile.TemporaryDirectory(prefix="comfy-doc-probe-") as probe:
        reason = doc_sandbox.unavailable(source, build, Path(probe))
    if reason:
        # As the sandboxed pack's tests do: a machine that cannot make the sandbox skips.
        print(f"doc-test: SKIP: the pages' commands need a sandbox this machine cannot make ({reason})")
        return SKIPPED
    failed = []
    # One scratch build for every page, as a reader's one checkout has one build folder.
    scratch_builds = tempfile.TemporaryDirectory(prefix="comfy-doc-build-") if options.builds else None
    scratch_build = Path(scratch_builds.name) if scratch_builds else None
    for page in options.pages:
        try:
            blocks = doc_blocks.read_page(source / page)
        except doc_blocks.MarkerError as error:
            print(f"doc-test: {page}: {error}")
            failed.append(page)
            continue
        with tempfile.TemporaryDirectory(prefix="comfy-doc-test-") as scratch_name:
            scratch = Path(scratch_name)
            (scratch / "srv/doc-test/bin").mkdir(parents=True)
            sudo = scratch / "srv/doc-test/bin/sudo"
            sudo.write_text("#!/bin/sh\n" + doc_sandbox.sudo_shim())
            sudo.chmod(0o755)
            script = scratch / "page.sh"
            script.write_text(page_script(page, blocks, options.builds, source))
            log = scratch / "page.log"
            doc_sandbox.copy_checkout(source, scratch / "checkout")
            command = doc_sandbox.bwrap_command(source, scratch / "checkout", build, scratch / "srv", script,
                                                scratch_build)
            status = doc_sandbox.run(command, log, timeout_s=3600 if options.builds else 600)
            output = log.read_text(errors="replace")
            ran = output.count("\n$ ")
            skipped = [line for line in output.splitlines() if line.startswith("- ")]
            print(f"doc-test: {page}: {len(blocks)} blocks, {ran} commands run, {len(skipped)} not run"
                  f"{'' if status == 0 else f', FAILED (status {status})'}")
            for line in skipped:
                print(f"    {line[2:]}")
            if options.show:
                print(output)
            if status != 0:
                failed.append(page)
                print("    " + "\n    ".join(output.splitlines()[-40:]))
    if scratch_builds:
        scratch_builds.cleanup()
    if failed:
        print(f"doc-test: {len(failed)} page(s) whose commands do not run as written: {', '.join(failed)}; "
              f"fix the page or the program, then run this again")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
