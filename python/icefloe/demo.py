"""``python -m icefloe.demo``: the quick-start demo's former name, kept for
those who type it. The demo lives outside the library, in the
``icefloe_demo`` package (``python -m icefloe_demo``)."""

import sys

from icefloe_demo.run import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
