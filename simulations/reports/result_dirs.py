"""Which kind of result a directory holds, for ``pfxab plot`` and ``pfxab report``.

A sweep directory has ``config.toml``, a comparison directory ``comparison.json``; anything else is
one line naming what it lacks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pfxab_flower.errors import ConfigError
from pfxab_flower.studies.comparison import MANIFEST

#: The file that describes a sweep directory (a copy of the experiment's configuration).
SWEEP_CONFIG = "config.toml"
_ALLOWED = ("a finished sweep directory (`pfxab sweep --out`, with config.toml) or a comparison directory "
            f"(`pfxab compare --out`, with {MANIFEST})")


def result_kind(directory: str | os.PathLike[str]) -> Literal["sweep", "comparison"]:
    """``"comparison"`` or ``"sweep"``; a :class:`ConfigError` line for anything else."""
    path = Path(directory)
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:  # a name no table or terminal can take: never one pfxab wrote
        raise ConfigError(f"dir={str(directory)!r} is invalid (its name is not UTF-8 text); "
                          f"allowed: {_ALLOWED}") from None
    if (path / MANIFEST).is_file():
        return "comparison"
    if (path / SWEEP_CONFIG).is_file():
        return "sweep"
    if not path.exists():
        why = "no such directory"
    elif not path.is_dir():
        why = "not a directory"
    elif (path / "runs.parquet").is_file() and (path / "summary.parquet").is_file():
        why = f"a comparison written before {MANIFEST} existed; run `pfxab compare --out` again"
    else:
        why = f"neither {SWEEP_CONFIG} nor {MANIFEST} in it"
    raise ConfigError(f"dir={str(directory)!r} is invalid ({why}); allowed: {_ALLOWED}")
