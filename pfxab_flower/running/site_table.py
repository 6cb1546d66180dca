"""Each site's outcome in one table: what the end of ``pfxab run``, ``pfxab simulate`` and a user's ServerApp shows.

The table is cut from a run's per-client columns (``RunResult.client_columns``, ``clients.csv``, or what the
server holds without a result): whichever of :data:`SITE_COLUMNS` the run has, in that order, so a column a result
gains (a best observed point, its simple regret) is shown where it exists and nothing needs to know it in advance.
Plain text, without pandas (``pfxab run`` does not import it to print a run).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping, Sequence
from typing import Any

#: The columns of a site's row, in order, as patterns of the clients table's column names (``*``: any suffix, e.g.
#: ``final_*`` is the final point's coordinates, one column each).
SITE_COLUMNS = ("client", "site", "flower_node", "final_*", "regret", "simple_regret*", "best_*",
                "mean_observed*", "mean_reward_personalised", "evaluations")


def site_columns(names: Sequence[str]) -> list[str]:
    """The column names of a site table, from the clients table's ``names``: :data:`SITE_COLUMNS`' matches, in order.

    ``final_node`` (a cell's heap id) is no place a reader can use: the final point's coordinates are."""
    chosen: list[str] = []
    for pattern in SITE_COLUMNS:
        chosen += [name for name in names if fnmatch.fnmatchcase(name, pattern) and name not in chosen
                   and name != "final_node"]
    return chosen


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or str(value) in ("<NA>", "nan")


def _cell(value: Any) -> str:
    """One value as the table shows it: ``-`` if missing, a float to 6 significant digits (its exact value is in
    the result's files), anything else as it prints."""
    if _missing(value):
        return "-"
    if isinstance(value, float) or type(value).__name__.startswith("float"):
        return f"{float(value):.6g}"
    return str(value)


#: The most sites a table shows (a log of 1000 sites' rows would bury the run's own lines; the files have them all).
MAX_ROWS = 50


def site_table(columns: Mapping[str, Any], max_rows: int = MAX_ROWS) -> str:
    """The per-site table of a run's per-client ``columns`` (name -> one value per client; a pandas DataFrame
    works too): :func:`site_columns`' columns, less those nobody has a value in (no site labels, no Flower
    nodes in process); a lost client's final point shows ``-``. Beyond ``max_rows`` sites, a last line says
    how many more there are."""
    chosen = site_columns(list(columns))  # a DataFrame iterates its column names, as a mapping does
    total = len(columns[chosen[0]]) if chosen else 0
    data = {name: list(columns[name])[:max_rows + 1] for name in chosen}
    data = {name: values for name, values in data.items()
            if name.startswith("final_") or not all(_missing(v) for v in values)}
    cells = {name: [_cell(v) for v in values] for name, values in data.items()}
    widths = {name: max([len(name), *map(len, values)]) for name, values in cells.items()}
    rows = zip(*cells.values(), strict=True) if cells else iter(())
    lines = [" ".join(name.rjust(widths[name]) for name in cells)]
    lines += [" ".join(value.rjust(widths[name]) for name, value in zip(cells, row, strict=True)) for row in rows]
    if total > max_rows:
        lines = [*lines[:max_rows + 1], f"... and {total - max_rows} more sites (all of them: clients.csv)"]
    return "\n".join(lines)
