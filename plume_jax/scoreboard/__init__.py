"""The scoreboard: every agent on every preset family, on one protocol.

- :mod:`~plume_jax.scoreboard.families`: the preset families and their presets;
- :mod:`~plume_jax.scoreboard.protocol`: episodes, seeds and robustness levels
  (a quick mode and the full protocol);
- :mod:`~plume_jax.scoreboard.contenders`: the agents on the board (baselines,
  the zoo, a user's own);
- :mod:`~plume_jax.scoreboard.board`: running a family, rows with metrics or
  the reason an agent does not apply;
- :mod:`~plume_jax.scoreboard.robustness`: the same agents on plumes they were
  not trained on, and a per-start-cell success map;
- :mod:`~plume_jax.scoreboard.variants`: a fixed-start family's agents under
  its own protocol and its named variants (Singh et al.'s code, the paper's
  reading), over several evaluation seeds;
- :mod:`~plume_jax.scoreboard.report`: ``docs/scoreboard.md``, its JSON and
  one figure per family;
- :mod:`~plume_jax.scoreboard.rerun`: some agents of a family rerun and merged
  into its recorded rows (``plume-jax bench --agent``);
- :mod:`~plume_jax.scoreboard.runs`: a bench run's own folder, and the
  explicit, checked step that publishes it (``plume-jax bench --publish``);
- :mod:`~plume_jax.scoreboard.zoo_publish`: a finished run (or an exported
  policy with its config and measured facts) into the zoo.

``plume-jax bench`` (:mod:`plume_jax.cli.bench`) drives them.
"""
