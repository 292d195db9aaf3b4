"""Evaluation scenarios: YAML files that fix an env, an agent, seeds and an
expectation, and a runner that reports comparable metrics. The pieces, one
job each, all reachable from here:

- :mod:`plume_jax.evaluate.scenario_file`: the scenario file's schema
  (:func:`load_scenario`, :func:`validate_scenario`, :data:`SCENARIO_SETTINGS`);
- :mod:`plume_jax.evaluate.scenario_run`: planning and running
  (:func:`plan_run`, :func:`execute_run`, :func:`run_scenario`);
- :mod:`plume_jax.evaluate.scenario_stats`: the metrics, expectations and
  baselines (:func:`summarise`, :func:`wilson_interval`, :func:`attach_baseline`);
- :mod:`plume_jax.evaluate.scenario_report`: the table, JSON reports and
  figures (:func:`markdown_table`, :func:`write_outputs`).
"""

from plume_jax.evaluate.scenario_file import (  # noqa: F401
    EXPECT_KEYS,
    MAX_EPISODES,
    NORMALISATIONS,
    PROTOCOLS,
    SCENARIO_AGENT_SETTINGS,
    SCENARIO_ENV_SETTINGS,
    SCENARIO_EXPECT_SETTINGS,
    SCENARIO_KEYS,
    SCENARIO_SCHEMA,
    SCENARIO_SETTINGS,
    check_episodes,
    load_scenario,
    safe_name,
    validate_scenario,
    validate_seed,
)
from plume_jax.evaluate.scenario_report import (  # noqa: F401
    markdown_table,
    output_stems,
    protocol_line,
    public,
    write_figures,
    write_outputs,
    write_results,
)
from plume_jax.evaluate.scenario_run import (  # noqa: F401
    UNCOMPARED_SETTINGS,
    AgentChoice,
    PlannedRun,
    check_policy_traces,
    env_differences,
    env_note,
    execute_run,
    plan_run,
    run_scenario,
    scenario_env,
    training_env,
)
from plume_jax.evaluate.scenario_stats import (  # noqa: F401
    MAX_BASELINE_BYTES,
    attach_baseline,
    baseline_key,
    check_expectations,
    compare_to_baseline,
    failed,
    load_baseline,
    status,
    summarise,
    wilson_interval,
)

__all__ = [
    "AgentChoice",
    "EXPECT_KEYS",
    "MAX_BASELINE_BYTES",
    "MAX_EPISODES",
    "NORMALISATIONS",
    "PROTOCOLS",
    "PlannedRun",
    "SCENARIO_AGENT_SETTINGS",
    "SCENARIO_ENV_SETTINGS",
    "SCENARIO_EXPECT_SETTINGS",
    "SCENARIO_KEYS",
    "SCENARIO_SCHEMA",
    "SCENARIO_SETTINGS",
    "UNCOMPARED_SETTINGS",
    "attach_baseline",
    "baseline_key",
    "check_episodes",
    "check_expectations",
    "check_policy_traces",
    "compare_to_baseline",
    "env_differences",
    "env_note",
    "execute_run",
    "failed",
    "load_baseline",
    "load_scenario",
    "markdown_table",
    "output_stems",
    "plan_run",
    "protocol_line",
    "public",
    "run_scenario",
    "safe_name",
    "scenario_env",
    "status",
    "summarise",
    "training_env",
    "validate_scenario",
    "validate_seed",
    "wilson_interval",
    "write_figures",
    "write_outputs",
    "write_results",
]
