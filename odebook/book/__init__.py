"""The book's machinery: the runner, notebook start-up, plots, reports, the front page, the Colab cell."""
