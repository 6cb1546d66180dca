"""Reports of finished sweeps and comparisons: the paper's figures, Markdown tables, and the practice and
small-budget maps."""
