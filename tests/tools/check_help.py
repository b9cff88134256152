#!/usr/bin/python3
"""Every tool's --help (and -h): exit 0, the usage on stdout ("usage: TOOL ..."), nothing on
stderr, and the same long options as the README's bullets for that tool (section "Tools").
For a tool with subcommands (npu-bench, npu-smi) the help of each subcommand counts too.
Prints what differs; exit 1 when anything does.

usage: check_help.py README.md TOOL_PATH
"""
import os
import re
import subprocess
import sys

OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def run_help(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def readme_bullets(readme, tool):
    """The text of the README's Tools-section bullets that start with `TOOL ..."""
    text = open(readme, encoding="utf-8").read()
    start = text.index("\n## Tools")
    end = text.index("\n## ", start + 1)
    bullets, current = [], None
    for line in text[start:end].splitlines():
        if line.startswith("- "):
            current = [] if re.match(r"- `" + re.escape(tool) + r"[ `]", line) else None
            if current is not None:
                bullets.append(current)
        elif line and not line.startswith(" "):
            current = None
        if current is not None:
            current.append(line)
    return "\n".join("\n".join(b) for b in bullets)


def main():
    readme, exe = sys.argv[1:3]
    tool = os.path.basename(exe)
    problems = []
    rc, out, err = run_help([exe, "--help"])
    if rc != 0 or not out.startswith(f"usage: {tool}") or err:
        problems.append(f"{tool} --help: exit {rc}, stdout starts {out[:40]!r}, stderr {err[:200]!r}")
    rc_h, out_h, _ = run_help([exe, "-h"])
    if rc_h != 0 or out_h != out:
        problems.append(f"{tool} -h: exit {rc_h}, differs from --help")
    helps = [out]
    subs = []
    if "\nSubcommands:\n" in out:
        for line in out.split("\nSubcommands:\n", 1)[1].splitlines():
            m = re.match(r"  ([a-z][a-z-]*) ", line)
            if m:
                subs.append(m.group(1))
    for sub in subs:
        rc, sub_out, err = run_help([exe, sub, "--help"])
        if rc != 0 or not sub_out.startswith("usage: ") or err:
            problems.append(f"{tool} {sub} --help: exit {rc}, stderr {err[:200]!r}")
        helps.append(sub_out)
    in_help = set(OPTION.findall("\n".join(helps))) - {"--help"}
    bullets = readme_bullets(readme, tool)
    if not bullets:
        problems.append(f"README.md: no bullet for {tool} in the Tools section")
    in_readme = set(OPTION.findall(bullets)) - {"--help"}
    for o in sorted(in_help - in_readme):
        problems.append(f"{tool}: {o} is in --help but not in the README's {tool} bullet")
    for o in sorted(in_readme - in_help):
        problems.append(f"{tool}: {o} is in the README's {tool} bullet but not in --help")
    print(f"{tool}: --help lists {len(in_help)} options" + (f" (subcommands: {', '.join(subs)})" if subs else "")
          + f", the README {len(in_readme)}")
    for p in problems:
        print("  BAD " + p)
    print("PASS" if not problems else f"FAIL: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
