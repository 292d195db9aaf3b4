"""Settings declared once, as dataclass field metadata (layer 0).

A component is a frozen dataclass; its params a ``chex.dataclass``. Each
setting is declared exactly once, as a field made by :func:`setting`:

- on the component: a *static* setting (fixes a shape or a code path; part
  of the component's hash, so of the jit cache);
- on its ``Params``: a *dynamic* setting (a params leaf, sweepable under
  ``vmap``).

The field's default is the setting's default; its metadata carries the
checker and the one-line doc. :class:`Configurable` derives everything else
from these declarations: the schema (``SETTINGS``), validation
(``resolve``), the one static/dynamic split (``build``), the JSON metadata
(``get_metadata``) and the static config (:func:`static_config`).

Three other kinds of field have a role but are not settings:

- :func:`nested_params` on ``Params``: the params of the nested
  component(s) of the static setting of the same name (made by
  :func:`plume_jax.settings.nested`);
- :func:`derived` on either class: a value a component computes while it is
  built (a movie's frames);
- :func:`grid_domain` on the component: the grid's ``(width, height)``,
  filled by ``build``.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from plume_jax.core.errors import ValidationError
from plume_jax.settings.checks import Checker, check_order
from plume_jax.core.types import Grid, NoParams

#: A component class of one family (``type_table``'s entries).
ConfigurableT = TypeVar("ConfigurableT", bound="Configurable")

#: Field-metadata key of a setting declaration.
SETTING = "plume_jax.setting"
#: Field-metadata key of a field's role when it is not a setting.
ROLE = "plume_jax.role"
NESTED_PARAMS, DERIVED, GRID_DOMAIN = "nested_params", "derived", "grid_domain"

#: ``build(qualified_name, resolved value, grid) -> (field value, params)`` of
#: a nested setting.
Builder = Callable[[str, Any, Grid], tuple[Any, Any]]


@dataclasses.dataclass(frozen=True)
class Setting:
    """One configurable value of a component (read from its field's metadata).

    Attributes:
        default: value used when the user gives none (passed through ``check``).
        check: ``check(qualified_name, value, grid) -> normalised value``;
            raises ``ValidationError`` for a bad value.
        static: True for a field of the component, False for a params leaf
            (set by where the setting is declared).
        doc: one line: meaning, units and bounds.
        build: for a nested setting (component configs), builds the field's
            components and their params from the resolved configs.
        leaf: ``leaf(resolved value, grid) -> params leaf``; default
            :func:`to_leaf`.
        at_most: the name of a setting of the same component this one may
            not exceed (``r_min`` is at most ``r_max``).
        below: the name of a setting this one must stay strictly below.
    """

    default: Any
    check: Checker
    static: bool = False
    doc: str = ""
    build: Builder | None = None
    leaf: Callable[[Any, Grid], Any] | None = None
    at_most: str | None = None
    below: str | None = None

    @property
    def nested(self) -> bool:
        """Whether the setting holds component configs (built into components)."""
        return self.build is not None


def setting(default: Any, check: Checker, *, doc: str,
            leaf: Callable[[Any, Grid], Any] | None = None, at_most: str | None = None,
            below: str | None = None) -> Any:
    """A dataclass field that declares one setting: static on a component,
    dynamic on its ``Params``. Its default is ``default`` (a deep copy for
    lists and dicts); ``at_most`` / ``below`` name another setting that
    bounds it (see :class:`Setting`)."""
    metadata = {SETTING: Setting(default, check, doc=doc, leaf=leaf, at_most=at_most,
                                 below=below)}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=functools.partial(copy.deepcopy, default),
                                 metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def nested_setting(default: Any, check: Checker, *, build: Builder, doc: str,
                   unbuilt: Any = None) -> Any:
    """A static setting whose resolved value is one or more component configs;
    the component's field holds the built components (``unbuilt`` until
    built) and the ``Params`` field of the same name (a
    :func:`nested_params`) their params."""
    return dataclasses.field(
        default=unbuilt, metadata={SETTING: Setting(default, check, doc=doc, build=build)})


def nested_params(empty: Any = None) -> Any:
    """A ``Params`` field holding the params of the nested setting of the same name."""
    return dataclasses.field(default=empty, metadata={ROLE: NESTED_PARAMS})


def derived(default: Any = None) -> Any:
    """A field computed while the component is built (not a setting)."""
    return dataclasses.field(default=default, metadata={ROLE: DERIVED})


def grid_domain() -> Any:
    """A component field that ``build`` sets to the grid's ``(width, height)``
    (``()`` for a component made by hand)."""
    return dataclasses.field(default=(), metadata={ROLE: GRID_DOMAIN})


def domain_grid(component: Any, family: str) -> Grid:
    """The :class:`~plume_jax.core.types.Grid` of ``component.domain`` (its
    :func:`grid_domain` field). A component made by hand has no domain:
    that raises ValidationError naming ``<family>.domain`` and how to build
    the component so it knows its grid."""
    domain = component.domain
    if not domain:
        raise ValidationError.for_parameter(
            f"{family}.domain", domain,
            f"a (width, height) pair: build the {family} with "
            f"{type(component).__name__}.build(values, grid, prefix) so it knows its grid")
    return Grid(width=domain[0], height=domain[1])


def declared_fields(cls: object) -> tuple[dataclasses.Field, ...]:
    """The dataclass fields of ``cls`` (none when it is not a dataclass)."""
    return dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()


def settings_of(cls: type[Configurable]) -> dict[str, Setting]:
    """``name -> Setting`` of a component class: its static settings (fields
    of the class, in order) then its dynamic ones (fields of ``cls.Params``)."""
    return declared_settings(cls, cls.Params)


def declared_settings(static_fields: object, dynamic_fields: object) -> dict[str, Setting]:
    """``name -> Setting`` of the settings declared (with :func:`setting`) as
    fields of the dataclass ``static_fields`` (static settings, in order), then
    of ``dynamic_fields`` (dynamic ones: leaves of a pytree). A component's are its own
    class and its ``Params`` (:func:`settings_of`); a training algorithm's, its
    compiled-in settings and its hyperparameters
    (:func:`plume_jax.train.algorithms.base.declared`)."""
    out: dict[str, Setting] = {}
    for owner, static in ((static_fields, True), (dynamic_fields, False)):
        for f in declared_fields(owner):
            declared = f.metadata.get(SETTING)
            if declared is not None and f.name not in out:
                out[f.name] = dataclasses.replace(declared, static=static)
    return out


T = TypeVar("T")


def static_part(cls: type[T], values: Mapping[str, Any], **given: Any) -> T:
    """An instance of ``cls``, a frozen dataclass declaring static settings
    (:func:`declared_settings`): each declared setting read from ``values``
    (already checked and defaulted, e.g. a training config's ``algo``
    section), its other fields from ``given``."""
    return cls(**{name: values[name] for name in declared_settings(cls, None)}, **given)


def dynamic_part(cls: type[T], values: Mapping[str, Any], **given: Any) -> T:
    """An instance of ``cls``, a pytree dataclass declaring dynamic settings:
    each field an f32[] leaf of its value in ``given``, else in ``values``,
    else its declared default (which must not be None), so that ``jax.vmap``
    can sweep them."""
    values = {**values, **given}
    leaves = {}
    for name, s in declared_settings(None, cls).items():
        value = values.get(name, s.default)
        if value is None:
            raise ValidationError.for_parameter(f"algo.{name}", None, f"a number ({s.doc})")
        leaves[name] = jnp.asarray(value, jnp.float32)
    return cls(**leaves)


class _Schema:
    """Class attribute descriptor: ``cls.SETTINGS`` is :func:`settings_of`."""

    def __get__(self, instance: Any, owner: type[Configurable]) -> dict[str, Setting]:
        return settings_of(owner)


class _Required:
    """The default of a setting that has none: the user must give it."""

    def __repr__(self) -> str:
        return "REQUIRED"

    def __deepcopy__(self, memo: dict) -> "_Required":
        return self


#: Default of a setting the user must give (``algo.total_steps``, a
#: scenario's ``env.preset``).
REQUIRED: Any = _Required()


def parse_overrides(items: list[str], option: str = "--set") -> dict[str, Any]:
    """Settings given as text, as ``--set`` gives them: ``["sigma=10",
    "grid_size=[64, 64]"]`` -> dict, values parsed as YAML
    with the bounds of :func:`plume_jax.files.safe_io.load_yaml_bounded` (a
    malformed value, a ``!!python/...`` tag, an alias bomb or nesting deeper
    than 64 levels is a ``ValidationError`` naming ``option``, quoting a
    bounded excerpt). A name given twice keeps the last value."""
    from plume_jax.files.safe_io import load_yaml_bounded

    out = {}
    for item in items:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise ValidationError.for_parameter(option, item, "NAME=VALUE (VALUE in YAML syntax)")
        out[name.strip()] = load_yaml_bounded(
            raw, option, value=item, what="NAME=VALUE with VALUE in plain YAML syntax")
    return out


def qualified(prefix: str, key: str) -> str:
    """``prefix.key`` (``key`` alone at the top level, ``prefix == ""``)."""
    return f"{prefix}.{key}" if prefix else key


def did_you_mean(text: Any, known: Any) -> str:
    """`` (did you mean 'a' or 'b'?)`` naming the entries of ``known`` closest
    to ``text`` (difflib, at most three), or ``""`` when none is close."""
    close = difflib.get_close_matches(str(text), [str(k) for k in known], n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""


def unknown_setting(name: str, value: Any, known: Any, what: str) -> ValidationError:
    """The error for an unknown key ``name`` (qualified: ``algo.learning_rat``):
    ``expected <what> (did you mean 'learning_rate'?): one of [...]``, the
    suggestions being the known keys closest to the last part of ``name``
    (none when nothing is close). One message for component settings,
    training-config keys and scenario keys."""
    known = sorted(map(str, known))
    key = str(name).rpartition(".")[2]
    return ValidationError.for_parameter(name, value,
                                         f"{what}{did_you_mean(key, known)}: one of {known}")


def resolve_keys(prefix: str, schema: Mapping[str, Setting], values: Any, grid: Any = None, *,
                 what: str | None = None, check_defaults: bool = True,
                 given_only: bool = False) -> dict[str, Any]:
    """Validate a mapping of settings against ``schema``: the one resolver of
    component settings (:func:`resolve_settings`), training-config sections
    (:mod:`plume_jax.train.config`) and scenario files
    (:mod:`plume_jax.evaluate.scenario`).

    Args:
        prefix: qualifies names in errors (``"algo"`` gives ``algo.gamma``;
            ``""``: top-level keys, named bare).
        schema: ``key -> Setting``; a :data:`REQUIRED` default must be given.
        values: the user's mapping (``None``: empty).
        grid: passed to the checkers (``None`` outside an env).
        what: what a known key is, in errors (default ``a known <prefix>
            setting``).
        check_defaults: pass defaults through the checker (normalising
            them); else use a deep copy of each default as declared.
        given_only: resolve only the keys given (no defaults filled).

    Raises:
        ValidationError: ``values`` is not a mapping (naming ``prefix``), an
            unknown key (:func:`unknown_setting`), a required key left out,
            or a bad value.
    """
    what = what or f"a known {prefix or 'top-level'} setting"
    if values is None:
        values = {}
    if not isinstance(values, Mapping):
        raise ValidationError.for_parameter(prefix or "settings", values,
                                            f"a mapping with keys among {list(schema)}")
    unknown = sorted((k for k in values if k not in schema), key=str)
    if unknown:
        raise unknown_setting(qualified(prefix, str(unknown[0])), values[unknown[0]], schema, what)
    out = {}
    for key, s in schema.items():
        name = qualified(prefix, key)
        if key in values:
            out[key] = s.check(name, values[key], grid)
        elif given_only:
            continue
        elif s.default is REQUIRED:
            raise ValidationError.for_parameter(name, None, "a value (this setting is required)")
        elif check_defaults:
            out[key] = s.check(name, s.default, grid)
        else:
            out[key] = copy.deepcopy(s.default)
    return out


def resolve_settings(component: str, schema: Mapping[str, Setting], values: Mapping[str, Any],
                     grid: Grid) -> dict[str, Any]:
    """Validate a component's ``values`` against ``schema``, filling defaults
    (:func:`resolve_keys`).

    Args:
        component: name used to qualify parameter names in errors
            (``"plume"``, giving ``plume.sigma``).
        schema: the component's settings.
        values: user-supplied values; every key must be in ``schema``.
        grid: the static grid (for position checks).

    Returns:
        A new dict with every setting of ``schema``, validated and normalised
        to plain Python values (JSON-serialisable).

    Raises:
        ValidationError: for an unknown name (with the closest known names)
            or a bad value.
    """
    return resolve_keys(component, schema, values, grid)


def to_leaf(value: Any) -> jax.Array:
    """A params leaf for a resolved dynamic value: bool -> bool, int -> i32,
    float or sequence of numbers -> f32."""
    if isinstance(value, bool):
        return jnp.asarray(value, jnp.bool_)
    if isinstance(value, int):
        return jnp.asarray(value, jnp.int32)
    return jnp.asarray(value, jnp.float32)


def _frozen(value: Any) -> Any:
    """Lists as tuples, recursively: a hashable static field value."""
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    return value


def plain(value: Any) -> Any:
    """``value`` as the plain Python that JSON and YAML write and read back,
    recursively: components as their static configs, mappings as dicts with
    ``str`` keys, tuples as lists, numpy arrays as nested lists, numpy
    scalars as Python numbers, bytes (HDF5 attributes) decoded as UTF-8.
    Anything else is returned as it is."""
    if isinstance(value, Configurable):
        return static_config(value)
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return plain(value.tolist())  # an array of HDF5 strings is a list of bytes
    if isinstance(value, np.generic):
        return plain(value.item())  # numpy.bytes_ too
    if isinstance(value, bytes):
        return value.decode()
    return value


def static_config(component: Configurable) -> dict[str, Any]:
    """``{"type": ..., **static settings}`` of a component, nested components
    as their own static configs: a config ``build`` accepts and that
    rebuilds an equal component (dynamic settings take their defaults)."""
    return {"type": component.type_name, **component.static_settings()}


def type_table(*classes: type[ConfigurableT]) -> dict[str, type[ConfigurableT]]:
    """``type_name -> class`` of component classes, in order (a registry
    table such as ``PLUMES``); two classes may not share a type name."""
    table: dict[str, type[ConfigurableT]] = {}
    for cls in classes:
        if cls.type_name in table:
            raise ValueError(f"type_name {cls.type_name!r} is used by both "
                             f"{table[cls.type_name].__name__} and {cls.__name__}")
        table[cls.type_name] = cls
    return table


class Configurable:
    """Base of every component built from validated settings.

    A subclass is a frozen dataclass that sets ``type_name`` (the name used
    in configs) and ``Params`` (a ``chex.dataclass``; default
    :class:`~plume_jax.core.types.NoParams`) and declares each setting once with
    :func:`setting` (see the module docstring). Everything else is derived:

    - ``SETTINGS``: ``name -> Setting``, static then dynamic;
    - ``build(values, grid, prefix) -> (component, params, resolved)``;
    - ``get_metadata()``, ``static_settings()``, ``dynamic_setting_names()``.

    Hooks: ``validate`` (checks across settings), ``derive`` (fields that
    are not settings), ``metadata_extras`` (extra JSON keys).
    """

    type_name: ClassVar[str] = ""
    Params: ClassVar[type] = NoParams
    SETTINGS = _Schema()  # a dict[str, Setting] read from the class (settings_of)

    # -- building ------------------------------------------------------------
    @classmethod
    def build(cls, values: Mapping[str, Any], grid: Grid, prefix: str
              ) -> tuple[Any, Any, dict[str, Any]]:
        """Validate ``values`` and return ``(component, params, resolved)``.

        ``resolved`` holds every setting (static and dynamic) as plain Python
        values, enough to rebuild the component. ``prefix`` qualifies names
        in errors (``"plume"`` gives ``plume.sigma``).

        Raises:
            ValidationError: an unknown name, a bad value, or settings that
                contradict each other.
        """
        resolved = cls.resolve(values, grid, prefix)
        component, params = cls.assemble(resolved, grid, prefix)
        return component, params, resolved

    @classmethod
    def resolve(cls, values: Mapping[str, Any], grid: Grid, prefix: str) -> dict[str, Any]:
        """Every setting checked (defaults filled), then the declared orders
        (``at_most``, ``below``), then :meth:`validate`."""
        schema = cls.SETTINGS
        resolved = resolve_settings(prefix, schema, values, grid)
        for name, s in schema.items():
            for other, strict in ((s.at_most, False), (s.below, True)):
                if other is not None:
                    check_order(resolved, prefix, name, other, strict=strict)
        return cls.validate(resolved, grid, prefix)

    @classmethod
    def validate(cls, resolved: dict[str, Any], grid: Grid, prefix: str) -> dict[str, Any]:
        """Checks across settings, after each setting passed its own check.

        Returns the resolved settings (a subclass may fill values that depend
        on others); raises ``ValidationError`` naming ``prefix.<setting>``.
        The default accepts everything.
        """
        return resolved

    @classmethod
    def assemble(cls, resolved: Mapping[str, Any], grid: Grid, prefix: str,
                 **derived_params: Any) -> tuple[Any, Any]:
        """``(component, params)`` from resolved settings: static settings as
        fields (lists as tuples, nested configs built), dynamic ones as params
        leaves, plus :meth:`derive`'s fields and ``derived_params``."""
        fields, params = {}, dict(derived_params)
        for name, s in cls.SETTINGS.items():
            value = resolved[name]
            if s.nested:
                assert s.build is not None  # nested_setting() always gives one
                fields[name], params[name] = s.build(f"{prefix}.{name}", value, grid)
            elif s.static:
                fields[name] = _frozen(value)
            else:
                params[name] = to_leaf(value) if s.leaf is None else s.leaf(value, grid)
        fields.update(cls.derive(resolved, grid))
        return cls(**fields), cls.Params(**params)

    @classmethod
    def derive(cls, resolved: Mapping[str, Any], grid: Grid) -> dict[str, Any]:
        """Values of the component's fields that are not settings; by default
        every :func:`grid_domain` field gets ``(grid.width, grid.height)``."""
        return {f.name: (grid.width, grid.height) for f in declared_fields(cls)
                if f.metadata.get(ROLE) == GRID_DOMAIN}

    # -- description ---------------------------------------------------------
    def static_settings(self) -> dict[str, Any]:
        """``name -> value`` of the static settings, as plain JSON-able Python
        (nested components as static configs)."""
        return {name: plain(getattr(self, name))
                for name, s in self.SETTINGS.items() if s.static}

    @classmethod
    def dynamic_setting_names(cls) -> list[str]:
        """Names of the dynamic settings (leaves of the params)."""
        return [name for name, s in cls.SETTINGS.items() if not s.static]

    def metadata_extras(self) -> dict[str, Any]:
        """Extra keys of :meth:`get_metadata` (JSON); none by default."""
        return {}

    def get_metadata(self) -> dict[str, Any]:
        """JSON-serialisable description: type, static settings, and the
        component's extras. Dynamic values live in the params pytree;
        ``PlumeEnv.settings`` holds both."""
        return {"type": self.type_name, "parameters": self.static_settings(),
                **self.metadata_extras()}
