"""Policies over a finite set of candidate points every client shares, kept as they are when they survive.

A candidate is the centre of one cell at ``POINT_DEPTH`` (random search's resolution), drawn from the run's
seed alone; :class:`CandidatePolicy` is the narrow base such a policy extends (successive halving's rounds:
:mod:`.successive_halving`; a family whose clients propose new points every round can extend it too).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pfxab_flower.algorithms.phased import Policy, Settings
from pfxab_flower.algorithms.phased.state import ROOT
from pfxab_flower.arms.partition import point_depth

#: Keeps the candidates' stream apart from every other stream drawn from the run's seed.
CANDIDATE_STREAM = 0x5F5E


def candidate_depth(settings: Settings) -> int:
    """The depth of the candidates' cells: :data:`POINT_DEPTH`, or ``max_depth`` if shallower."""
    return point_depth(settings.spec.max_depth)


def candidate_nodes(seed: int, count: int, depth: int) -> np.ndarray:
    """``count`` distinct uniformly random cells of ``depth`` (sorted node ids), drawn from ``seed`` alone."""
    count = min(count, 1 << depth)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(CANDIDATE_STREAM,)))
    return np.sort((1 << depth) + rng.choice(1 << depth, size=count, replace=False)).astype(np.int64)


class CandidatePolicy(Policy):
    """A policy over :meth:`count` shared candidate points. What it fixes:

    - **The sets.** Every client starts with the same :meth:`count` candidates (:func:`candidate_nodes`);
      survivors stay as they are (:meth:`successors` is the identity); a client exploits one of those it holds.
    - **Failures.** A client that did not complete a round (its local means or its next set did not arrive)
      is not counted when the server forms the next union (``counts_only_completed_rounds``): its survivors
      cannot hold the union open. A client that comes back works on what it holds that is still in play,
      the broadcast union's share of its set (:meth:`in_play`); if none is, it pulls the union for the
      others and keeps its set.
    - **Trust.** A client that explored a round keeps at most :meth:`most_kept` of the candidates it had in
      play (the server rejects and counts a reply that keeps more, as any bad reply: :meth:`kept_problem`).

    What a subclass gives: :meth:`count` (it may resolve it in ``resolve``), :meth:`most_kept`, the pulls and
    the decision (``pulls``, ``phase_pulls`` or ``round_pulls``, ``score``, ``keep``) and, if it has one, its
    own count of rounds (``max_phases``): :class:`~.successive_halving.SuccessiveHalving` gives them all.
    """

    refines_partition = False
    successor_kind = "survivors"
    counts_only_completed_rounds: ClassVar[bool] = True

    def count(self, settings: Settings) -> int:
        """How many candidates the run has (at most ``2**depth``: :func:`candidate_depth`)."""
        raise NotImplementedError

    def most_kept(self, in_play: int) -> int:
        """The most candidates a client that explored a round may keep of the ``in_play`` it had."""
        raise NotImplementedError

    # -- the sets ---------------------------------------------------------------------------------
    def depth(self, settings: Settings, phase: int) -> int:
        """Every round's candidates lie at :func:`candidate_depth`."""
        return candidate_depth(settings)

    def most_nodes(self, settings: Settings, phase: int) -> int:
        """Every round's union is a subset of the candidates."""
        return min(self.count(settings), 1 << candidate_depth(settings))

    def first_active_set(self, settings: Settings) -> np.ndarray:
        return candidate_nodes(settings.seed, self.count(settings), candidate_depth(settings))

    def successors(self, kept: np.ndarray) -> np.ndarray:
        """Survivors stay as they are: the candidates are points, not cells to split."""
        return np.sort(np.asarray(kept, dtype=np.int64))

    def predecessors(self, nodes: np.ndarray) -> np.ndarray:
        return np.asarray(nodes, dtype=np.int64)

    def can_finish_on(self, own: np.ndarray, node: int, reported_phase: int) -> bool:
        """A client exploits one of the candidates it holds (the centre of the domain if no round ran)."""
        return bool(np.isin(node, own)) or (node == ROOT and reported_phase == 0)

    # -- failures and trust ---------------------------------------------------------------------
    def in_play(self, held: np.ndarray, union: np.ndarray) -> np.ndarray:
        """What a client holding ``held`` works on in a round whose union is ``union``: their intersection."""
        return np.intersect1d(held, union, assume_unique=True)

    def kept_problem(self, held: np.ndarray, union: np.ndarray, kept: np.ndarray, explored: bool) -> str | None:
        """Why ``kept`` breaks the rule of a round (``None`` if it does not), for a client that held ``held``.

        A client that explored keeps a subset of what it had in play, at most :meth:`most_kept` of it (all it
        holds if none was in play); one that did not explore (it missed the round) may keep all it holds.
        """
        in_play = self.in_play(held, union)
        if not explored or in_play.size == 0:
            return None if np.all(np.isin(kept, held)) else "active set holds ids the client never held"
        if not np.all(np.isin(kept, in_play)):
            return "active set holds ids the client did not have in play this round"
        most = self.most_kept(in_play.size)
        if kept.size > most:
            return f"active set keeps {kept.size} of the {in_play.size} candidates in play, more than {most}"
        return None
