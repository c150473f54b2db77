"""A stand-in GitHub for the history workflow's issue job across publishes: `.github/notices/issues.js` run by Node
against a repository of issues kept in a JSON file (tests/ci/github_notices_harness.js with KEEP_STATE=1), then
checked: exactly one open issue of the bot for each filed open notice, and no open issue whose notice is not one.

    python -m tools.acceptance.github_standin --notices html/notices.json --issues standin-issues.json

Run it after every publish of a history (the issues file starts empty and is kept); exit 0 when the check holds,
1 when it does not (each problem said), 2 on bad input.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tools.parser import ToolParser

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".github" / "notices" / "issues.js"
SCHEMA = ROOT / ".github" / "notices" / "notices.schema.json"
HARNESS = ROOT / "tests" / "ci" / "github_notices_harness.js"
MARKER = re.compile(r"^<!-- sgemm-notice: ([A-Za-z0-9._-]+) -->$")
OPEN_STATES = ("candidate", "regression", "environment")


def problems(notices: list[dict], issues: list[dict]) -> list[str]:
    """What breaks 'one open issue per filed open notice, none orphaned'."""
    wanted = {n["id"] for n in notices if n.get("filed") and n["state"] in OPEN_STATES}
    open_ids = [MARKER.match(issue["body"].split("\n", 1)[0]).group(1) for issue in issues
                if issue["state"] == "open" and MARKER.match(issue["body"].split("\n", 1)[0])]
    found = [f"notice {i}: {open_ids.count(i)} open issues, expected 1" for i in sorted(wanted)
             if open_ids.count(i) != 1]
    found += [f"issue of notice {i} open but the notice is not a filed open one (orphaned)"
              for i in sorted(set(open_ids) - wanted)]
    all_ids = [MARKER.match(issue["body"].split("\n", 1)[0]).group(1) for issue in issues]
    found += [f"notice {i}: {all_ids.count(i)} issues ever opened" for i in sorted(set(all_ids))
              if all_ids.count(i) > 1]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = ToolParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notices", type=Path, required=True, help="the notices file a publish wrote")
    parser.add_argument("--issues", type=Path, required=True, help="the stand-in repository's issues (kept)")
    args = parser.parse_args(argv)
    node = shutil.which("node")
    if node is None:
        print("github_standin: node is not installed (the issue job runs in github-script)", file=sys.stderr)
        return 2
    if not args.notices.is_file():
        print(f"github_standin: --notices {args.notices}: no such file", file=sys.stderr)
        return 2
    if not args.issues.exists():
        args.issues.write_text("[]")
    env = dict(os.environ, SCRIPT=str(SCRIPT), STATE_FILE=str(args.issues), NOTICES_FILE=str(args.notices),
               SCHEMA_FILE=str(SCHEMA), KEEP_STATE="1", GITHUB_SERVER_URL="https://github.com")
    done = subprocess.run([node, str(HARNESS)], env=env, check=False, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        print(f"github_standin: the issue job failed: {done.stderr.strip()[-500:]}", file=sys.stderr)
        return 1
    outcome = json.loads(done.stdout)
    if outcome["failed"]:
        print(f"github_standin: the issue job refused the file: {outcome['failed']}", file=sys.stderr)
        return 1
    notices = json.loads(args.notices.read_text())["notices"]
    found = problems(notices, outcome["issues"])
    opened = sum(1 for issue in outcome["issues"] if issue["state"] == "open")
    print(f"{len(notices)} notices, {len(outcome['issues'])} issues ({opened} open); "
          + ("one open issue per filed open notice, none orphaned" if not found else "; ".join(found)))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
