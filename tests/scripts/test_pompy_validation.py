"""scripts/validation/pompy_validation.py: the pieces that do not need pompy (the noise
gain it gives pompy, the per-run statistics, the match rule, the error when
pompy is missing), and with pompy installed a tiny end-to-end run (slow)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from scripts.validation import pompy_validation as pv


def test_noise_gain_gives_pompys_update_the_stationary_std():
    """The gain from the discrete Lyapunov equation makes a long simulation
    of pompy's Euler-Maruyama update (written out here) have the std asked
    for; at small steps it tends to the continuous filter's ``2σ√(ζ/ω)``; at
    one step per time unit (Farrell's ζ, ω) the update diverges: refused."""
    std, zeta, omega, dt = 1.6, 0.1, 0.2, 0.1
    gain = pv.euler_maruyama_gain(std, zeta, omega, dt)
    rng = np.random.default_rng(0)
    chains, steps = 256, 4000
    x = np.zeros((2, chains))
    a = np.array([[0.0, 1.0], [-omega**2, -2 * zeta * omega]])
    b = np.array([[0.0], [gain * omega**2]])
    samples = []
    for t in range(steps):
        x = x + dt * a @ x + b * math.sqrt(dt) * rng.normal(size=(1, chains))
        if t >= steps // 2 and t % 50 == 0:
            samples.append(x[0].copy())
    measured = np.concatenate(samples).std()
    assert measured == pytest.approx(std, rel=0.08)
    assert pv.euler_maruyama_gain(std, zeta, omega, 1e-4) == pytest.approx(
        2 * std * math.sqrt(zeta / omega), rel=1e-3)
    with pytest.raises(ValueError, match="--pompy-substeps"):
        pv.euler_maruyama_gain(std, zeta, omega, 1.0)


def test_per_run_statistics_of_known_samples():
    """A Gaussian time-mean profile of std 7 gives width 7; thresholds count
    samples; the gust std is the cross-wind component's std over time."""
    n_line = pv.DISTANCES.size
    profile = np.exp(-0.5 * (pv.OFFSETS / 7.0) ** 2)
    samples = 4
    conc_sum = np.concatenate([np.full(n_line, 0.1), np.tile(profile, pv.TRANSECTS.size)])
    above = np.zeros((len(pv.THRESHOLDS), n_line))
    above[0, :3] = 2.0
    wind = np.array([[1.0, 0.5], [1.2, -0.5], [1.0, 0.5], [1.2, -0.5]])  # per sample, at a probe
    wind_sum = np.broadcast_to(wind.sum(0), (pv.PROBES.size, 2))
    wind_sq = np.broadcast_to((wind**2).sum(0), (pv.PROBES.size, 2))
    out = pv.per_run_statistics(conc_sum * samples, above, wind_sum, wind_sq, samples)
    np.testing.assert_allclose(out["width"], 7.0, rtol=1e-3)
    np.testing.assert_allclose(out["centreline_mean"], 0.1)
    assert out["above_0.05"][:3].tolist() == [0.5] * 3 and out["above_0.02"].max() == 0.0
    np.testing.assert_allclose(out["wind_mean"], 1.1)
    np.testing.assert_allclose(out["gust_std"], 0.5)


def test_match_rule_is_ten_percent_or_two_standard_errors():
    assert pv.verdict((1.0, 0.01), (1.09, 0.01))[2]            # +9 %
    assert not pv.verdict((1.0, 0.01), (1.12, 0.01))[2]        # +12 %, 8.5 SE
    assert pv.verdict((1.0, 0.1), (1.25, 0.1))[2]              # +25 % but 1.8 SE
    assert pv.verdict((0.0, 0.0), (0.0, 0.0))[2]               # both never above a threshold


def test_missing_pompy_is_a_clear_error(tmp_path):
    with pytest.raises(pv.PompyMissing, match="no folder 'pompy'"):
        pv.import_pompy(str(tmp_path))


@pytest.mark.slow
def test_tiny_side_by_side_run_writes_the_table(tmp_path):
    pytest.importorskip("pompy")
    out, table = tmp_path / "v.json", tmp_path / "v.md"
    assert pv.main(["--runs", "2", "--steps", "20", "--warmup", "10", "--every", "2",
                    "--models", "field", "--out", str(out), "--table", str(table)]) == 0
    payload = json.loads(out.read_text())
    assert set(payload["pompy"]) == {"z_disp=False", "z_disp=True"}
    assert set(payload["plume_jax"]["field"]) == {"z_disp=False", "z_disp=True"}
    assert "| width σ_y at 50 cells |" in table.read_text()


@pytest.mark.parametrize("z_disp", [False, True])
def test_vectorised_puff_update_is_pompys_update_bit_for_bit(z_disp):
    """The script's vectorised PlumeModel (all puffs at once) moves the same
    puffs to the same places as pompy's own per-puff loop, with the same
    random stream, over 120 steps of a gusty wind (puffs released, moved,
    grown and removed at the region's edge)."""
    pytest.importorskip("pompy")
    pompy = pv.import_pompy(None)
    models = pompy.models
    region = models.Rectangle(0.0, 63.0, 0.0, 47.0)
    gain = pv.euler_maruyama_gain(1.6, 0.1, 0.2, 0.25)
    arrays = []
    for plume_model in (models.PlumeModel, pompy.VectorisedPlume):
        wind = models.WindModel(region, n_x=9, n_y=7, u_av=1.0, v_av=0.0, k_x=10.0, k_y=10.0,
                                noise_gain=gain, rng=np.random.RandomState(3))
        plume = plume_model(region, (8.0, 24.0, 0.0), wind, model_z_disp=z_disp,
                            centre_rel_diff_scale=math.sqrt(0.6), puff_init_rad=1.0,
                            puff_spread_rate=0.06, puff_release_rate=2.0, init_num_puffs=3,
                            max_num_puffs=64, rng=np.random.RandomState(4))
        for _ in range(120):
            for _ in range(4):
                wind.update(0.25)
            plume.update(1.0)
        arrays.append(np.asarray(plume.puff_array, float))
    ours, theirs = arrays[1], arrays[0]
    assert theirs.shape[0] > 20  # puffs in flight, some already removed at the edge
    np.testing.assert_array_equal(ours, theirs)
