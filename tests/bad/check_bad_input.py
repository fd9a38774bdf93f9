#!/usr/bin/python3
"""Runs one bad-input case: the command must exit with the expected code and print a message matching the regex
on stderr (the located message), and must not crash (no 'internal error', no signal)."""
import re
import subprocess
import sys


def main() -> int:
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        print("usage: check_bad_input.py EXIT_CODE REGEX -- COMMAND...", file=sys.stderr)
        return 2
    expected_code = int(sys.argv[1])
    pattern = sys.argv[2]
    command = sys.argv[4:]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    output = done.stderr + done.stdout
    failures = []
    if done.returncode != expected_code:
        failures.append(f"exit code {done.returncode}, expected {expected_code}")
    if not re.search(pattern, output):
        failures.append(f"output does not match /{pattern}/")
    if "internal error" in output:
        failures.append("internal error instead of a located message")
    if failures:
        print("command:", " ".join(command))
        print("output:", output)
        print("FAILED:", "; ".join(failures))
        return 1
    print("ok:", output.strip().splitlines()[0] if output.strip() else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
