"""``python -m plume_jax.cli`` is the ``plume-jax`` command."""

import sys

from plume_jax.cli import main

sys.exit(main())
