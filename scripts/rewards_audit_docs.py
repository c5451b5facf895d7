"""Write the three audits shown in docs/rewards.md ("Three audits"): run each command, put its output
between the page's ``<!-- audit-outputs -->`` markers, with the commit it ran on.

    python scripts/rewards_audit_docs.py            # rewrites the block in docs/rewards.md
    python scripts/rewards_audit_docs.py --check    # exit 1 when the page's commands differ from these

The outputs change whenever a scorer does; rerun this after changing one. Timings in the first line
of each output are this machine's.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "rewards.md"
COMMANDS = (
    ("a shipped text task", "vpo rewards audit shop --no-progress"),
    ("a shipped sandboxed task", "vpo rewards audit humaneval --no-progress"),
    (
        "a deliberately hackable user task (credit when any number in the answer equals the reference)",
        "vpo rewards audit tests/fixtures/audit/quiz_tasks.py:hackable --no-progress",
    ),
)
BEGIN, END = "<!-- audit-outputs -->", "<!-- /audit-outputs -->"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()


def run(command: str) -> tuple[int, str]:
    argv = [sys.executable, "-m", "vpo.cli", *command.split()[1:]]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout.rstrip()


def block() -> str:
    commit = _git("rev-parse", "--short", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no"))
    where = f"commit {commit}" + (" with uncommitted changes in the working tree" if dirty else "")
    parts = [BEGIN, "", f"Run on {where} by `python scripts/rewards_audit_docs.py`.", ""]
    for what, command in COMMANDS:
        code, out = run(command)
        parts += [f"**{what}** (exit code {code}):", "", "```text", f"$ {command}", out, "```", ""]
    parts.append(END)
    return "\n".join(parts)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="only check that the page shows these commands")
    args = p.parse_args()
    text = PAGE.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        print(f"{PAGE}: no {BEGIN} ... {END} block", file=sys.stderr)
        return 2
    if args.check:
        missing = [c for _, c in COMMANDS if f"$ {c}" not in text]
        for c in missing:
            print(f"{PAGE}: does not show `{c}`", file=sys.stderr)
        return 1 if missing else 0
    new = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _: block(), text, flags=re.DOTALL)
    PAGE.write_text(new, encoding="utf-8")
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
