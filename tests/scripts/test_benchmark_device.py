"""scripts/bench/device.py in a tiny form: its rows, its time boxes, the
row an out-of-memory or failing cell leaves, and the render step (no speed
is asserted anywhere)."""

from __future__ import annotations

import json

import jax
import pytest

from scripts.bench import device as bd

CARTPOLE = bd.reference_name("CartPole-v1")
GAUSSIAN = "PlumeNav-Gaussian-v0"
STAMP = ("device", "platform", "driver", "jax", "jaxlib", "date")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """``(folder, rows)`` of one tiny run: CartPole and the Gaussian preset at
    batches 2, 4, 8 through ``vmap(env.step)``; the Gaussian program at batch
    4 runs out of device memory and CartPole's at batch 8 fails otherwise
    (both raised in place of the program build)."""
    real_build = bd.build

    def build(env, params, num_envs, num_steps, form="step", agents_per_plume=1):
        if num_envs == 4 and type(env).__module__.startswith("plume_jax"):
            raise jax.errors.JaxRuntimeError(
                "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 5.00GiB.")
        if num_envs == 8:
            raise ValueError("a failure that is not about memory")
        return real_build(env, params, num_envs, num_steps, form, agents_per_plume)

    out = tmp_path_factory.mktemp("device") / "cpu"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bd, "build", build)
        assert bd.main(["--out", str(out), "--sections", "reference", "core_step",
                        "--references", "CartPole-v1", "--presets", GAUSSIAN,
                        "--batches", "2", "4", "8", "--target-steps", "8", "--min-steps", "4",
                        "--max-steps", "4", "--repeats", "1", "--box-reference", "900",
                        "--box-core-step", "900", "--budget-s", "1800"]) == 0
    return out, [json.loads(line) for line in (out / bd.ROWS).read_text().splitlines()]


def test_every_measured_row_has_its_figures_and_stamp(tiny_run):
    _, rows = tiny_run
    ok = [r for r in rows if r["status"] == "ok"]
    assert {(r["env"], r["num_envs"]) for r in ok} == {(CARTPOLE, 2), (CARTPOLE, 4),
                                                      (GAUSSIAN, 2)}
    for r in ok:
        assert r["steps_per_second"] > 0 and r["compile_seconds"] > 0
        assert r["num_steps"] == 4 and len(r["run_seconds"]) == 1
        assert "peak_device_bytes" in r  # None on the CPU, whose backend keeps no statistics
        assert all(r[k] is not None for k in STAMP if k != "driver")
        assert r["platform"] == "cpu" and r["driver"] is None
    assert rows[0]["status"] == "machine" and rows[0]["settings"]["batches"] == [2, 4, 8]
    assert rows[-1]["status"] == "end"


def test_an_out_of_memory_batch_is_a_row_and_ends_its_family(tiny_run):
    _, rows = tiny_run
    gaussian = [r for r in rows if r.get("env") == GAUSSIAN]
    assert [(r["num_envs"], r["status"]) for r in gaussian] == [(2, "ok"), (4, "oom")]
    assert "RESOURCE_EXHAUSTED" in gaussian[1]["reason"]
    failed = [r for r in rows if r.get("env") == CARTPOLE and r["num_envs"] == 8]
    assert [r["status"] for r in failed] == ["error"]
    assert failed[0]["reason"] == "ValueError: a failure that is not about memory"


def test_the_render_step_writes_summary_table_and_plot_and_reruns_alone(tiny_run, tmp_path):
    out, _ = tiny_run
    table = (out / bd.TABLE).read_text()
    assert "| PlumeNav-Gaussian-v0 | `step` |" in table and "| oom |" in table
    summary = json.loads((out / bd.SUMMARY).read_text())
    assert summary["best"][CARTPOLE]["step"]["num_envs"] in (2, 4)
    assert summary["best"][GAUSSIAN]["step"]["of_cartpole_best"] > 0
    assert {r["status"] for r in summary["not_ok"]} == {"oom", "error"}
    assert (out / bd.PLOT).stat().st_size > 0
    # --render-only from a copy whose last line a kill cut off
    copy = tmp_path / "gpu"
    copy.mkdir()
    text = (out / bd.ROWS).read_text().splitlines()
    (copy / bd.ROWS).write_text("\n".join(text[:-1]) + "\n" + text[-1][:20])
    assert bd.main(["--render-only", "--out", str(copy), "--compare", str(out)]) == 0
    assert "cut off before its end" in (copy / bd.TABLE).read_text()
    assert (copy / bd.PLOT).exists()


def test_the_table_can_be_spliced_into_a_markdown_file(tiny_run, tmp_path):
    out, _ = tiny_run
    md = tmp_path / "B.md"
    md.write_text("# B\n\nbefore\n\n<!-- device-cpu:begin -->\nold\n<!-- device-cpu:end -->\n"
                  "\nafter\n")
    bd.render(out, compare=[], markdown=str(md))
    text = md.read_text()
    assert "old" not in text and "before" in text and "after" in text
    assert "| PlumeNav-Gaussian-v0 | `step` |" in text


class FakeClock:
    """The time boxes' clock, moved on only by the fake cells."""

    def __init__(self):
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def fake_cells(n, seconds, clock, folder, seen):
    """``n`` cells that each take ``seconds`` of ``clock`` and record how many
    rows ``folder/rows.jsonl`` held on disk when they started."""
    def measure(i):
        def run():
            seen.append(len(bd.read_rows(folder)))
            clock.t += seconds
            return {"steps_per_second": 1.0, "compile_seconds": 0.0}
        return run
    return [({"env": "fake", "form": "step", "num_envs": 2 ** i}, measure(i)) for i in range(n)]


def test_a_section_past_its_box_stops_and_leaves_its_rows(tmp_path, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(bd, "now", clock)
    rows = bd.Rows(tmp_path / bd.ROWS, jax.devices("cpu")[0])
    seen: list[int] = []
    cells = fake_cells(5, 10.0, clock, tmp_path, seen)
    assert bd.run_section(rows, "core_step", bd.Box(25.0, clock() + 600), cells) == [10.0, 10.0]
    rows.close()
    written = bd.read_rows(tmp_path)
    assert [r["status"] for r in written] == ["ok", "ok", "stopped"]
    assert seen == [0, 1]  # each row was on disk before the next cell began
    assert "time box (25 s) left no room after 20.0 s" in written[-1]["reason"]
    assert [c["num_envs"] for c in written[-1]["not_measured"]] == [4, 8, 16]


def test_a_slow_family_does_not_stop_the_cheap_ones_after_it(tmp_path, monkeypatch):
    """A cell is judged by its own family's previous batch: one slow family
    (100 s) does not use up the estimate of the cheap families after it."""
    clock = FakeClock()
    monkeypatch.setattr(bd, "now", clock)
    rows = bd.Rows(tmp_path / bd.ROWS, jax.devices("cpu")[0])

    def cell(env, n, seconds):
        def run():
            clock.t += seconds
            return {"steps_per_second": 1.0, "compile_seconds": 0.0}
        return {"env": env, "form": "step", "num_envs": n}, run

    envs = {"cheap": 5.0, "other": 5.0, "slow": 100.0, "third": 5.0}
    cells = [cell(env, n, seconds) for n in (1, 2) for env, seconds in envs.items()]
    bd.run_section(rows, "core_step", bd.Box(130.0, clock() + 600), cells)
    rows.close()
    written = bd.read_rows(tmp_path)
    assert [(r.get("env"), r.get("num_envs"), r["status"]) for r in written] == [
        ("cheap", 1, "ok"), ("other", 1, "ok"), ("slow", 1, "ok"), ("third", 1, "ok"),
        ("cheap", 2, "ok"), ("other", 2, "ok"), (None, None, "stopped")]
    assert [c["env"] for c in written[-1]["not_measured"]] == ["slow", "third"]


def test_the_runs_budget_stops_a_section_inside_its_box(tmp_path, monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(bd, "now", clock)
    rows = bd.Rows(tmp_path / bd.ROWS, jax.devices("cpu")[0])
    # the previous section's cells took 30 s (median): the first cell needs that much room
    cells = fake_cells(3, 10.0, clock, tmp_path, [])
    assert bd.run_section(rows, "training", bd.Box(100.0, clock() + 25), cells,
                          prior=[5.0, 30.0, 40.0]) == []
    rows.close()
    written = bd.read_rows(tmp_path)
    assert [r["status"] for r in written] == ["stopped"]
    assert "--budget-s" in written[-1]["reason"] and len(written[-1]["not_measured"]) == 3


def test_quick_changes_the_defaults_and_explicit_options_win(tmp_path):
    args = bd.parse(["--quick", "--out", str(tmp_path), "--repeats", "7"])
    assert args.batches == bd.QUICK["batches"] and args.budget_s == bd.QUICK["budget_s"]
    assert args.repeats == 7
    full = bd.parse(["--out", str(tmp_path)])
    assert full.batches == [2 ** 10, 2 ** 14, 2 ** 17, 2 ** 20]
    boxes = sum(getattr(full, f"box_{s}") for s in bd.SECTIONS)
    assert boxes <= full.budget_s < 8 * 60


@pytest.mark.parametrize("argv, says", [
    (["--render-only"], "does not exist (run the benchmark first)"),
    (["--presets", "PlumeNav-Nope-v0"], "'PlumeNav-Nope-v0' is not a preset"),
    (["--batches", "8", "4"], "must be positive and ascending"),
    (["--box-core-step", "0"], "--box-core-step: 0.0 must be positive"),
])
def test_bad_options_are_one_line_errors(tmp_path, capsys, argv, says):
    with pytest.raises(SystemExit) as exit_:
        bd.main(["--out", str(tmp_path / "new"), *argv])
    assert exit_.value.code == 2
    assert says in capsys.readouterr().err


def test_an_existing_run_is_not_overwritten_unless_asked(tiny_run, capsys):
    out, _ = tiny_run
    with pytest.raises(SystemExit):
        bd.parse(["--out", str(out)])
    assert "exists already; give a new folder or --overwrite" in capsys.readouterr().err
    assert bd.parse(["--out", str(out), "--overwrite"]).overwrite


@pytest.mark.slow
def test_the_training_and_sweep_sections_give_the_env_share(tmp_path):
    out = tmp_path / "train"
    assert bd.main(["--out", str(out), "--sections", "training", "sweep", "--train-envs", "4",
                    "--train-steps", "4", "--train-updates", "1", "--train-epochs", "1",
                    "--train-minibatches", "1", "--sweep-envs", "2", "--sweep-steps", "4",
                    "--sweep-updates", "1", "--repeats", "1", "--box-training", "600"]) == 0
    rows = bd.read_rows(out)
    training = [r for r in rows if r["section"] == "training"]
    assert {(r["env"], r["network"]) for r in training} == {
        (p, n) for p in bd.TRAIN_PRESETS for n in bd.NETWORKS}
    for r in training:
        assert r["status"] == "ok" and 0 < r["env_share"] and r["steps_per_second"] > 0
        assert r["env_share"] + r["network_share"] == pytest.approx(1.0)
    sweep = [r for r in rows if r["section"] == "sweep"]
    assert sweep[0]["status"] == "ok" and sweep[0]["members"] == 16
    assert "Sweep of 16 members" in (out / bd.TABLE).read_text()
