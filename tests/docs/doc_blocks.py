"""The fenced blocks of a Markdown page, each with what its `doc-test` marker says to do.

Every fenced block of a checked page carries a marker, an HTML comment on the lines right
above its fence (invisible where the page is rendered):

    <!-- doc-test: run -->                  the commands run as written, in order
    <!-- doc-test: run in /srv/work -->     ... from that folder (the page's own is the checkout)
    <!-- doc-test: run with-supervisor -->  ... while a supervisor answers on 127.0.0.1:8189
    <!-- doc-test: file /etc/x.json -->     the text is that file, which later commands use
    <!-- doc-test: file /srv/x.json then comfy-supervisor check /srv/x.json -->
                                            ... and that command checks it at once
    <!-- doc-test: output -->               what a command prints: shown, not run
    <!-- doc-test: skip: REASON -->         not run here, and why (printed in the summary)

A `run` marker may go on over more lines, one per command it treats otherwise, named by
the start of the command:

    <!-- doc-test: run
         scripts/test: skip: this check is one of its tests
         scripts/demo --serve: until "dashboard"     run it, wait for the text, then Ctrl-C
         cmake --build: build                        compiles the project: scripts/doc-check
    -->

A block without a marker, or a marker this reader does not know, is an error: a page's new
command is either run or says why not.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

MARKER_START = "<!-- doc-test:"
MODES = ("run", "file", "output", "skip")
ACTIONS = ("run", "skip", "until", "build")


class MarkerError(Exception):
    """A page's block whose marker is missing or unreadable; the message names page and line."""


@dataclasses.dataclass
class Command:
    text: str
    line: int
    action: str = "run"  # one of ACTIONS
    detail: str = ""     # skip's reason, until's text


@dataclasses.dataclass
class Block:
    page: Path
    line: int            # the fence's line, 1-based
    language: str
    text: str
    mode: str            # one of MODES
    argument: str = ""   # run's folder, file's path, skip's reason
    with_supervisor: bool = False
    commands: list[Command] = dataclasses.field(default_factory=list)

    def where(self) -> str:
        return f"{self.page.name}:{self.line}"


def _fences(lines: list[str]):
    """(fence line index, language, body lines) for each fenced block."""
    index = 0
    while index < len(lines):
        opening = re.match(r"^(\s*)```(\S*)\s*$", lines[index])
        if not opening:
            index += 1
            continue
        indent = len(opening.group(1))
        body = []
        end = index + 1
        while end < len(lines) and not re.match(r"^\s*```\s*$", lines[end]):
            body.append(lines[end][indent:] if lines[end][:indent].strip() == "" else lines[end])
            end += 1
        if end == len(lines):
            raise MarkerError(f"line {index + 1}: a fence that is never closed")
        yield index, opening.group(2), body
        index = end + 1


def _marker_above(lines: list[str], fence: int) -> list[str] | None:
    """The marker's lines (without the comment's delimiters) ending right above `fence`."""
    end = fence - 1
    while end >= 0 and lines[end].strip() == "":
        end -= 1
    if end < 0 or not lines[end].rstrip().endswith("-->"):
        return None
    start = end
    while start >= 0 and MARKER_START not in lines[start]:
        if start < end and "-->" in lines[start]:
            return None  # another comment's end: the one above is not a doc-test marker
        start -= 1
    if start < 0:
        return None
    text = [line.strip() for line in lines[start:end + 1]]
    text[0] = text[0].split(MARKER_START, 1)[1]
    text[-1] = text[-1].rsplit("-->", 1)[0]
    return [line.strip() for line in text]


def split_commands(body: list[str], first_line: int) -> list[Command]:
    """The shell commands of a block: a line ending in a backslash or a pipe goes on, and a
    `for`/`while`/`if` goes on to its `done`/`fi`, a here-document to its end word; blank
    lines and comment lines are dropped."""
    commands: list[Command] = []
    pending: list[str] = []
    start = 0
    depth = 0
    heredoc_end = None  # the word that ends a here-document the command opened
    for offset, line in enumerate(body):
        stripped = line.strip()
        if heredoc_end is not None:
            pending.append(line)
            if stripped == heredoc_end:
                heredoc_end = None
                commands.append(Command("\n".join(pending), start))
                pending = []
            continue
        if not pending and (stripped == "" or stripped.startswith("#")):
            continue
        if not pending:
            start = first_line + offset
        pending.append(line)
        opened = re.search(r"<<-?\s*['\"]?([A-Za-z_]\w*)['\"]?", stripped)
        if opened:
            heredoc_end = opened.group(1)
            continue
        first_word = stripped.split(" ", 1)[0]
        depth += first_word in ("for", "while", "if", "until")
        depth -= first_word in ("done", "fi")
        code = stripped.split(" #", 1)[0].rstrip()
        if depth > 0 or code.endswith("\\") or code.endswith("|") or code.endswith("&&"):
            continue
        commands.append(Command("\n".join(pending), start))
        pending = []
    if heredoc_end is not None:
        raise MarkerError(f"line {start}: a here-document that never ends: {pending[0].strip()}")
    if pending:
        raise MarkerError(f"line {start}: a command that never ends: {pending[0].strip()}")
    return commands


def _apply_directives(block: Block, directives: list[str]) -> None:
    for directive in directives:
        prefix, separator, action = directive.partition(":")
        prefix, action = prefix.strip(), action.strip()
        name, _, detail = action.partition(" ")
        if action.startswith("skip"):
            name, detail = "skip", action[len("skip"):].lstrip(": ").strip()
        if not separator or name not in ACTIONS or not prefix:
            raise MarkerError(f"{block.where()}: cannot read '{directive}': give 'COMMAND START: "
                              f"{'|'.join(ACTIONS)} ...'")
        if name == "until":
            detail = detail.strip().strip('"')
        if name in ("skip", "until") and not detail:
            raise MarkerError(f"{block.where()}: '{directive}' needs {'a reason' if name == 'skip' else 'a text'}")
        matched = [command for command in block.commands if command.text.startswith(prefix)]
        if not matched:
            raise MarkerError(f"{block.where()}: '{prefix}' starts none of the block's commands")
        for command in matched:
            command.action, command.detail = name, detail


def _read_marker(block: Block, marker: list[str]) -> None:
    head, directives = marker[0].split(), [line for line in marker[1:] if line]
    if not head or head[0].rstrip(":") not in MODES:
        raise MarkerError(f"{block.where()}: a doc-test marker's first word is one of {', '.join(MODES)}")
    block.mode = head[0].rstrip(":")
    rest = marker[0].strip()[len(head[0]):].strip()
    if block.mode == "skip":
        block.argument = rest.lstrip(":").strip()
        if not block.argument:
            raise MarkerError(f"{block.where()}: 'skip' needs a reason")
    elif block.mode == "file":
        if not rest.startswith("/"):
            raise MarkerError(f"{block.where()}: 'file' needs the absolute path the text is written to")
        block.argument, _, then = rest.partition(" then ")
        if then:
            block.commands = [Command(then.strip(), block.line)]
    elif block.mode == "run":
        words = rest.split()
        block.with_supervisor = "with-supervisor" in words
        words = [word for word in words if word != "with-supervisor"]
        if words[:1] == ["in"] and len(words) == 2:
            block.argument = words[1]
        elif words:
            raise MarkerError(f"{block.where()}: 'run' takes only 'in FOLDER' and 'with-supervisor', not '{rest}'")
        block.commands = split_commands(block.text.splitlines(), block.line + 1)
        _apply_directives(block, directives)
        return
    if directives:
        raise MarkerError(f"{block.where()}: only a 'run' marker names commands")


def read_page(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    blocks = []
    try:
        fences = list(_fences(lines))
    except MarkerError as error:
        raise MarkerError(f"{page.name}: {error}") from None
    for fence, language, body in fences:
        block = Block(page, fence + 1, language, "\n".join(body) + "\n", mode="")
        marker = _marker_above(lines, fence)
        if marker is None:
            raise MarkerError(f"{block.where()}: a {language or 'plain'} block without a doc-test marker: "
                              f"say above it how it is checked (tests/docs/doc_blocks.py lists the markers)")
        _read_marker(block, marker)
        blocks.append(block)
    return blocks
