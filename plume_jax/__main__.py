"""``python -m plume_jax`` is the ``plume-jax`` command (same arguments,
same output, same exit status)."""

import sys

from plume_jax.cli import main

if __name__ == "__main__":
    sys.exit(main())
