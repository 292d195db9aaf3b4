"""Layer 2, rendering: RGB frames of an env state (:mod:`~plume_jax.render.frames`)
and the PNG and video writers that save them."""
