"""The Flower-aware layer both Flower adapters share: ``strategies/`` and ``client_apps/`` import it, not each other.

:mod:`.records` is the Message API's wire (a payload as a ``RecordDict``: a strategy writes it, a ClientApp reads
it, and back); :mod:`.flower_internals` holds the Flower internals the adapters use. It imports the core and
Flower only; the core never imports Flower, so it cannot live there.
"""
