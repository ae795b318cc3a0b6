"""Figures colour each model alike in every panel."""

from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

from odebook.book import plots  # noqa: E402


def test_a_panel_showing_a_subset_keeps_each_models_colour():
    runs = [SimpleNamespace(model=m, steps=[1, 2], values=[1.0, 2.0]) for m in ("baseline", "hybrid", "null", "shared")]
    metric = lambda r: (r.steps, r.values)  # noqa: E731
    fig, (all_, subset) = plots.figure(2)
    plots.plot_over_steps(all_, runs, metric)
    plots.plot_over_steps(subset, [r for r in runs if r.model != "null"], metric, models=[r.model for r in runs])
    colours = lambda ax: {line.get_label(): line.get_color() for line in ax.get_lines()}  # noqa: E731
    assert colours(subset) == {k: v for k, v in colours(all_).items() if k != "null"}
    assert len(set(colours(all_).values())) == 4
