"""Print, one per line, the commands CI runs from README.md, so `.ci/run` does exactly what the README says.

    python .ci/readme_commands.py install   # the set-up block's pip commands (CI prepares SmolLM2 instead of
                                            # the quick start's model, index and verify steps)
    python .ci/readme_commands.py test      # every command of the "Run the tests" block, in order

A block is the first ```bash fence after its heading; a command spanning lines with a trailing backslash is
joined, `&&` chains are split, `#` comments are dropped.
"""

from __future__ import annotations

import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
SETUP_HEADING = "## Set up and verify a claim"
TEST_HEADING = "## Run the tests"


def block_after(text: str, heading: str) -> list[str]:
    """The commands of the first ```bash block after the line starting with ``heading``."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is None:
        raise SystemExit(f"README.md has no heading {heading!r}")
    fence = next((i for i in range(start + 1, len(lines)) if lines[i].strip() == "```bash"), None)
    end = (next((i for i in range(fence + 1, len(lines)) if lines[i].strip() == "```"), None) if fence
           else None)
    if fence is None or end is None:
        raise SystemExit(f"README.md has no ```bash block after {heading!r}")
    joined: list[str] = []
    buf = ""
    for line in lines[fence + 1:end]:
        line = line.split(" #", 1)[0].rstrip() if not line.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            joined.append(buf.strip())
        buf = ""
    commands: list[str] = []
    for line in joined:
        commands += [part.strip() for part in line.split("&&") if part.strip()]
    return commands


def install_commands(text: str) -> list[str]:
    return [c for c in block_after(text, SETUP_HEADING) if c.startswith(("pip ", "python -m pip "))]


def test_commands(text: str) -> list[str]:
    return block_after(text, TEST_HEADING)


def main(argv: list[str]) -> int:
    text = README.read_text(encoding="utf-8")
    which = {"install": install_commands, "test": test_commands}
    if len(argv) != 1 or argv[0] not in which:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    print("\n".join(which[argv[0]](text)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
