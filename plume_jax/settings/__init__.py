"""Declarative, validated component settings (layer 0).

Every component declares each of its settings once, as a dataclass field
(:func:`setting`): a field of the frozen component is *static* (fixes a
shape or a code path: hashed into the jit cache), a field of its ``Params``
is *dynamic* (a leaf of the params pytree, sweepable under ``vmap``).
:class:`Configurable` derives the schema, validation, the static/dynamic
split, ``build`` and ``get_metadata`` from those declarations, so bad
configuration fails at construction with a message naming the field, the
value and what is allowed.

- :mod:`.checks`: the checkers (``real``, ``integer``, ``angle``, ...) and
  the physical bounds they enforce;
- :mod:`.schema`: ``setting``, ``Configurable`` and the field roles;
- :mod:`.nested`: component configs inside component configs.
"""

from plume_jax.settings.checks import (
    ANGLE_WRAP,
    MAX_GRID_SIDE,
    MAX_INT32,
    MAX_LENGTH,
    MAX_REWARD,
    MAX_SCALE,
    MIN_LENGTH,
    Angle,
    Checker,
    Integer,
    IntegerList,
    OrNone,
    Real,
    angle,
    as_float32,
    boolean,
    check_order,
    choice,
    count,
    grid_centre,
    grid_position,
    integer,
    integer_list,
    is_pair,
    is_real,
    optional,
    real,
    real_list,
)
from plume_jax.settings.nested import component_config, component_list, nested, resolve_component
from plume_jax.settings.schema import (
    REQUIRED,
    Configurable,
    Setting,
    derived,
    domain_grid,
    dynamic_part,
    grid_domain,
    nested_params,
    parse_overrides,
    plain,
    qualified,
    resolve_keys,
    resolve_settings,
    setting,
    settings_of,
    static_config,
    static_part,
    to_leaf,
    type_table,
    unknown_setting,
)

__all__ = [
    "ANGLE_WRAP",
    "Angle",
    "Checker",
    "Configurable",
    "Integer",
    "IntegerList",
    "MAX_GRID_SIDE",
    "MAX_INT32",
    "MAX_LENGTH",
    "MAX_REWARD",
    "MAX_SCALE",
    "MIN_LENGTH",
    "OrNone",
    "REQUIRED",
    "Real",
    "Setting",
    "angle",
    "as_float32",
    "boolean",
    "check_order",
    "choice",
    "count",
    "component_config",
    "component_list",
    "derived",
    "grid_centre",
    "domain_grid",
    "dynamic_part",
    "grid_domain",
    "grid_position",
    "integer",
    "integer_list",
    "is_pair",
    "is_real",
    "nested",
    "nested_params",
    "optional",
    "parse_overrides",
    "plain",
    "qualified",
    "resolve_keys",
    "real",
    "real_list",
    "resolve_component",
    "resolve_settings",
    "setting",
    "settings_of",
    "static_config",
    "static_part",
    "to_leaf",
    "type_table",
    "unknown_setting",
]
