"""``python -m icefloe_demo``: runs the demo (icefloe_demo.run)."""

import sys

from icefloe_demo.run import main

if __name__ == "__main__":
    sys.exit(main())
