"""The demos' entry (``python -m icefloe_demo``, ``icefloe demo``): the review
demo (icefloe_demo.text), or with ``--numeric`` the earlier numeric one
(icefloe_demo.numeric)."""

from __future__ import annotations

import argparse
import sys

from . import text
from .numeric import main_numeric, resolve_device


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--numeric" in argv:
        return main_numeric([a for a in argv if a != "--numeric"])
    parser = argparse.ArgumentParser(
        description=text.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="--numeric: the earlier demo over a numeric table (--numeric --help for its "
               "options)")
    parser.add_argument("--numeric", action="store_true",
                        help="run the numeric demo (MLP over 16 float columns) instead")
    text.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.ranks < 1 or args.rows < args.files:
        parser.error("--epochs and --ranks must be at least 1, --rows at least --files")
    if args.max_tokens < 3:
        parser.error("--max-tokens must leave room for BOS, EOS and a token")
    if not 2 <= args.seq_len <= 1_048_576 or args.lm_batch_size < 1 or args.lm_steps < 0:
        parser.error("--seq-len must be 2..1048576 (pack's bounds; a row predicts its "
                     "next tokens), --lm-batch-size at least 1, --lm-steps at least 0")
    args.device = resolve_device(parser, args.device)
    try:
        return text.main(args)
    except KeyboardInterrupt:
        print("\ninterrupted: shutting down", file=sys.stderr)
        return 130

