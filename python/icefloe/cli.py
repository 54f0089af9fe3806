"""The ``icefloe`` command line."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="icefloe", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the quick-start demo")
    demo.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    if args.command == "demo":
        from . import demo as demo_mod

        return demo_mod.main(["--rows", str(args.rows)])
    return 2


if __name__ == "__main__":
    sys.exit(main())
