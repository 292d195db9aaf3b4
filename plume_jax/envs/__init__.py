"""Layer 2, the functional envs: the single-agent :class:`~plume_jax.envs.plume_env.PlumeEnv`,
the multi-agent env, several episodes per shared plume, the preset table
(:mod:`plume_jax.envs.presets`), config files and the legacy step form.
Built from the component families of layer 1; imports jax, chex, numpy, gymnax."""
