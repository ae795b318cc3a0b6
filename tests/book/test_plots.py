"""Figures colour each model alike in every panel."""

from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

from odebook.study import plots  # noqa: E402


def test_a_panel_showing_a_subset_keeps_each_models_colour():
    runs = [SimpleNamespace(model=m, steps=[1, 2], values=[1.0, 2.0]) for m in ("baseline", "hybrid", "null", "shared")]
    metric = lambda r: (r.steps, r.values)  # noqa: E731
    fig, (all_, subset) = plots.figure(2)
    plots.plot_over_steps(all_, runs, metric)
    plots.plot_over_steps(subset, [r for r in runs if r.model != "null"], metric, models=[r.model for r in runs])
    colours = lambda ax: {line.get_label(): line.get_color() for line in ax.get_lines()}  # noqa: E731
    assert colours(subset) == {k: v for k, v in colours(all_).items() if k != "null"}
    assert len(set(colours(all_).values())) == 4


def test_the_front_pages_thumbnail_is_the_first_figure_the_study_saved_whatever_the_file_times(tmp_path):
    """In a fresh clone every file time is equal, and the thumbnail chosen by time became the alphabetically first
    figure: save_figure now notes the order, and the front page takes the first saved (else the first by name)."""
    import os

    import matplotlib.pyplot as plt

    from odebook.book import index, notebook

    out = tmp_path / "03_x"
    (out / "figures").mkdir(parents=True)
    for name in ("zeta_key", "alpha_detail", "zeta_key"):
        fig, _ = plt.subplots()
        notebook.save_figure(fig, out, name)
        plt.close(fig)
    assert (out / "figures" / index.FIGURE_ORDER).read_text() == "zeta_key\nalpha_detail\n"
    for png in (out / "figures").glob("*.png"):
        os.utime(png, ns=(0, 0))  # as a fresh clone leaves them
    assert "figures/zeta_key.png" in index._thumbnail(out, "03_x/03_x.html")
    (out / "figures" / index.FIGURE_ORDER).unlink()  # a report made before the order was noted
    assert "figures/alpha_detail.png" in index._thumbnail(out, "03_x/03_x.html")


def test_the_front_page_renders_a_questions_inline_markdown_and_escapes_the_rest():
    from odebook.book.index import inline_markdown

    assert inline_markdown("Does the *final* `loss` drop, **really**, for a*b and 2 * 3 < 4?") == (
        "Does the <em>final</em> <code>loss</code> drop, <strong>really</strong>, for a*b and 2 * 3 &lt; 4?")
    assert inline_markdown("<script>*x*</script>") == "&lt;script&gt;<em>x</em>&lt;/script&gt;"
