"""README.md and docs/*.md: every Python block runs, every link resolves.

Untagged ```python blocks run here as written (a page's blocks in order, in
one namespace, in a temporary working directory). Blocks tagged
``test=NAME`` are run by the test named in :data:`DEDICATED` (with the
fixture or the smaller sizes they need); this file checks that each tag has
one and that the test really reads its blocks.
"""

from __future__ import annotations

import importlib
import inspect
import re

import pytest

from tests.docs_blocks import PAGES, ROOT, all_blocks, blocks

#: tag -> (test module, test function) that runs the blocks with that tag.
DEDICATED = {
    "quickstart": ("test_readme", "test_quick_start_runs"),
    "gymnasium-examples": ("test_gym_readme", "test_docs_gymnasium_examples_run"),
    "components-example": ("test_config", "test_docs_components_example_runs"),
    "movie-plif": ("test_plumes_movie", "test_docs_loading_example_runs"),
    "capture-pandas": ("test_capture", "test_docs_capture_example_runs"),
    "adding-a-component": ("test_docs_adding_a_component",
                           "test_adding_a_component_page_runs_and_leaves_the_tables_as_they_were"),
    "pettingzoo-trained": ("test_train_multi_agent",
                           "test_trained_agents_act_in_the_pettingzoo_env"),
    "adding-an-algorithm": (
        "tests.train.test_algorithm_interface",
        "test_the_docs_example_trains_resumes_sweeps_exports_and_evaluates_from_the_working_folder"),
}

RUNNABLE = [page for page in PAGES if any(b.tag is None for b in blocks(page))]


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(ROOT)))
def test_untagged_python_blocks_run_as_written(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for block in blocks(page):
        if block.tag is None:
            exec(compile(block.code, block.where, "exec"), namespace)


def test_every_tagged_block_has_a_dedicated_test_that_reads_it():
    tags = {b.tag for b in all_blocks() if b.tag is not None}
    assert tags == set(DEDICATED), f"tags without a test: {tags - set(DEDICATED)}; " \
        f"tests without blocks: {set(DEDICATED) - tags}"
    for tag, (module, function) in DEDICATED.items():
        test = getattr(_test_module(module), function)
        assert f'tagged("{tag}")' in inspect.getsource(test), f"{function} does not read {tag}"


def _test_module(name: str):
    """A test module by its dotted name, or by its file name anywhere under
    tests/ (the test modules live in tests/<area>/ since the layout of issue
    41: a bare ``test_readme`` no longer imports)."""
    if "." not in name:
        found = sorted(ROOT.glob(f"tests/**/{name}.py"))
        if found:
            name = ".".join(found[0].relative_to(ROOT).with_suffix("").parts)
    return importlib.import_module(name)


_LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    for target, _ in _LINK.findall(page.read_text()):
        if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
            continue
        assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


_MARKDOWN_PATH = re.compile(r"`([\w.-]+(?:/[\w.-]+)+\.md)`")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_markdown_files_named_in_code_exist_in_the_repository(page):
    """A page naming ``dir/page.md`` in code points at a file of this repository
    (docs/gymnasium.md once named ``contracts/*.md`` files the repository lacks)."""
    missing = [path for path in _MARKDOWN_PATH.findall(page.read_text())
               if not (ROOT / path).exists()]
    assert not missing, f"{page.name} names files that are not in the repository: {missing}"


def test_architecture_names_every_training_module():
    """docs/architecture.md gives each module of plume_jax/train/ one sentence
    naming the need it serves (issue 56): a module added, removed or renamed
    without that page changes this list."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    section = page.split("## The training package, module by module", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"^\| ((?:`[^`]+`(?:, )?)+) \|", section, flags=re.M))
    listed = {name for cell in named for name in re.findall(r"`([^`]+)`", cell)}
    train = ROOT / "plume_jax" / "train"
    actual = {p.name for p in train.glob("*.py") if p.name != "__init__.py"} | \
        {f"{p.name}/" for p in train.iterdir() if (p / "__init__.py").is_file()}
    assert listed == actual, (sorted(actual - listed), sorted(listed - actual))
