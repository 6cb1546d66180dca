"""One client of a phased-elimination algorithm: explore, eliminate, exploit until the horizon."""

from __future__ import annotations

import numpy as np

from pfxab_flower.algorithms.bounds import ClientView
from pfxab_flower.algorithms.messages import (
    ActiveSetReport,
    FinishInstruction,
    FinishReport,
    GlobalUpdate,
    LocalReport,
    PhaseInstruction,
)
from pfxab_flower.algorithms.phased.bounded import (
    caught_up_size,
    check_catch_up,
    check_nodes,
    check_phase,
    check_pulls,
    check_sizes,
)
from pfxab_flower.algorithms.phased.observed import Observing, best_of
from pfxab_flower.algorithms.phased.policy import Policy, RoundEstimates
from pfxab_flower.algorithms.phased.settings import Settings
from pfxab_flower.algorithms.phased.state import ROOT, ClientState, ProtocolError
from pfxab_flower.problems.sampling import Environment


def _rng(settings: Settings, client: int, phase: int) -> np.random.Generator:
    """The noise stream of one client in one phase: the same whichever engine runs it."""
    return np.random.default_rng([settings.seed, client, phase])


#: Tells the exploitation streams apart from the exploration's (:func:`_rng`), whose draws they must not change.
EXPLOIT_STREAM = 1


def _exploit_rng(settings: Settings, client: int, phase: int) -> np.random.Generator:
    """The stream of one client's exploitation in one phase (the final exchange's is ``phases + 1``): what a
    stochastic objective that asks for ``rng`` is given while the client exploits."""
    return np.random.default_rng([settings.seed, client, phase, EXPLOIT_STREAM])


def min_pulls(counts: np.ndarray) -> int:
    """The fewest pulls any sampled node of ``A(p)`` had in a phase (every client's global pulls, if any)."""
    sampled = np.asarray(counts)[np.asarray(counts) > 0]
    return int(sampled.min()) if sampled.size else 0


def round_to_round_noise(
    before: np.ndarray, before_means: np.ndarray, before_counts: np.ndarray,
    after: np.ndarray, after_means: np.ndarray, after_counts: np.ndarray,
) -> np.ndarray:
    """``[sum, number]`` of ``(m2 - m1)^2 / (1/n1 + 1/n2)`` over the nodes a client pulled in two consecutive phases.

    Two means of one node from disjoint pulls differ by noise alone, with variance ``s^2 (1/n1 + 1/n2)``; the
    nodes that survived were chosen on a high first mean, so the estimate of ``s^2`` errs high (a wider trim).
    """
    _, first, second = np.intersect1d(before, after, assume_unique=True, return_indices=True)
    n1, n2 = before_counts[first].astype(float), after_counts[second].astype(float)
    both = (n1 > 0) & (n2 > 0)
    if not np.any(both):
        return np.zeros(2)
    difference = after_means[second][both] - before_means[first][both]
    terms = difference**2 / (1.0 / n1[both] + 1.0 / n2[both])
    return np.array([float(terms.sum()), float(terms.size)])


class ClientMachine:
    """One client of a phased-elimination algorithm."""

    def __init__(self, policy: Policy, settings: Settings, client: int, state: ClientState | None = None):
        self.policy = policy
        self.settings = settings
        self.client = client
        self.state = state if state is not None else ClientState()
        if self.state.completed == 0 and self.state.explored_phase == 0:  # no phase yet: the policy's first set
            self.state.active = policy.first_active_set(settings)

    def _in_play(self, union: np.ndarray) -> np.ndarray:
        """What the client works on in a phase over ``union``: of its own nodes (:meth:`Policy.own_nodes`: a
        proposal policy's lost proposals are not), those in play (:meth:`Policy.in_play`: all, by default)."""
        return self.policy.in_play(self.policy.own_nodes(self.state.active, union), union)

    def _own_index(self, union: np.ndarray) -> np.ndarray:
        own = self._in_play(union)
        index = np.searchsorted(union, own)
        if np.any(index >= len(union)) or np.any(union[np.minimum(index, len(union) - 1)] != own):
            raise ProtocolError(f"client {self.client}: its active set is not inside the broadcast union")
        return index

    def catch_up(self, phase: int, sets: bool = True) -> None:
        """Close the phases before ``phase`` that this client missed (it was down or too late).

        For each missed phase its next active set is every child of its current
        one, exactly the superset the server assumes for a client whose active
        set did not arrive, so both sides keep the same sets. Its choice is kept.
        Pulls it made before dropping out count toward its ``T``; the pulls of the
        time it was away are made up at the end (``finish`` plays until ``T``).
        Without ``sets`` (the final message: no set is used after it) the sets are not grown.
        """
        s = self.state
        if phase <= s.completed:
            raise ProtocolError(f"client {self.client}: got phase {phase}, but it completed phase {s.completed}")
        while s.completed + 1 < phase:
            missed = s.completed + 1
            if s.explored_phase == missed:
                s.pulls += s.explored
            if sets:
                s.active = self.policy.lost(s.active)
            s.completed = missed

    def explore(self, instruction: PhaseInstruction, env: Environment) -> LocalReport:
        """Global then local exploration; report local means over ``A(p)`` and the bound's statistics.

        The instruction is first bounded by the run (:mod:`.bounded`): nothing is pulled for one that is not.
        """
        s = self.state
        phase, union = instruction.phase, np.asarray(instruction.node_ids)
        check_phase(self.settings, self.policy, phase)
        check_nodes(self.settings, self.policy, union, phase)
        if phase > s.completed:
            held = len(self._in_play(union.astype(np.int64)))  # lost proposals and candidates not in play: not held
            check_catch_up(self.policy, held, s.completed, phase, len(union))
            own_size = caught_up_size(self.policy, held, phase - 1 - s.completed)
            check_pulls(self.settings, s.pulls, f"phase {phase}",
                        int(instruction.global_pulls) * len(union) + int(instruction.local_pulls) * own_size)
            if min(instruction.global_pulls, instruction.local_pulls) < 0:
                raise ProtocolError(f"phase {phase} asks a negative number of pulls")
        self.catch_up(phase)
        union = union.astype(np.int64)
        s.active = self.policy.own_nodes(s.active, union)
        own = self._own_index(union)
        rng = _rng(self.settings, self.client, instruction.phase)
        bound = self.settings.bound
        samples = bound.empty(len(union))
        observing = Observing(env)
        if instruction.global_pulls > 0:
            samples = bound.draw(observing, union, np.full(len(union), instruction.global_pulls, dtype=np.int64), rng)
        if instruction.local_pulls > 0 and own.size:
            local = bound.draw(observing, union[own], np.full(len(own), instruction.local_pulls, dtype=np.int64), rng)
            samples = samples.put(own, bound.merge(samples.take(own), local))
        observing.record(s)
        counts = samples.counts
        means = np.divide(samples.sums, counts, out=np.zeros(len(union)), where=counts > 0)
        statistics = bound.client_statistics(self.settings, samples)
        if self.policy.estimates_noise:
            s.noise = s.noise + round_to_round_noise(s.union, s.means, s.counts, union, means, counts)
        s.union, s.means, s.counts, s.statistics, s.explored = union, means, counts, statistics, int(counts.sum())
        s.explored_phase = instruction.phase
        return LocalReport(self.client, union, means, counts, statistics)

    def eliminate(self, update: GlobalUpdate, env: Environment) -> ActiveSetReport:
        """Exploit while waiting, eliminate with the global means, split the survivors.

        A client that missed this phase's exploration has no local means: it
        exploits its chosen node for the whole phase and keeps every child (the
        server's superset rule), so it rejoins in step.
        """
        s = self.state
        phase, union = update.phase, np.asarray(update.node_ids)
        check_phase(self.settings, self.policy, phase)
        check_nodes(self.settings, self.policy, union, phase)
        check_sizes({"means": update.global_means, "eliminated": update.eliminated, "holders": update.holders,
                     **{f"statistic {name}": values for name, values in update.statistics.items()}},
                    len(union), phase)
        check_pulls(self.settings, s.pulls, f"the global update of phase {phase}", int(update.phase_length))
        if phase > s.completed:
            check_catch_up(self.policy, len(self.policy.own_nodes(s.active, union)), s.completed, phase, len(union))
        self.catch_up(update.phase)
        if s.explored_phase != update.phase:
            if update.phase_length > 0:
                env.play(s.choice, update.phase_length, _exploit_rng(self.settings, self.client, update.phase))
            s.active = self.policy.lost(s.active)
            s.pulls += update.phase_length
            s.completed = update.phase
            return ActiveSetReport(self.client, s.active)
        if not np.array_equal(update.node_ids, s.union):
            raise ProtocolError(f"client {self.client}: global update does not match phase {s.completed + 1}")
        if self.policy.proposes:
            return self._propose(update, env)
        own = self._own_index(s.union)
        waiting = update.phase_length - s.explored
        if own.size == 0:  # nothing it holds is in play (it missed rounds): it exploits its choice, keeps its set
            if waiting > 0:
                env.play(s.choice, waiting, _exploit_rng(self.settings, self.client, update.phase))
            s.pulls += update.phase_length
            s.completed = update.phase
            return ActiveSetReport(self.client, s.active)
        view = self._view(update, own)
        if waiting > 0:
            env.play(int(view.node_ids[np.argmax(view.local_means)]), waiting,
                     _exploit_rng(self.settings, self.client, update.phase))
        keep = self.policy.keep(self.settings, view)
        survivors = view.node_ids[keep]
        s.choice = int(survivors[np.argmax(self.policy.score(self.settings, view)[keep])])
        s.active = self.policy.successors(survivors)
        s.pulls += update.phase_length
        s.completed = update.phase
        return ActiveSetReport(self.client, s.active)

    def _propose(self, update: GlobalUpdate, env: Environment) -> ActiveSetReport:
        """A proposal policy's step: its new choice and next own nodes from the phase's means over the whole union;
        it exploits the new choice while the others explore."""
        s = self.state
        union = np.asarray(s.union, dtype=np.int64)
        estimates = RoundEstimates(
            phase=update.phase, node_ids=union, local_means=s.means, local_counts=s.counts,
            global_means=np.asarray(update.global_means, dtype=float), own=np.isin(union, s.active),
            holders=None if update.holders is None else np.asarray(update.holders, dtype=float),
            dimensions=int(np.asarray(env.point(ROOT)).size))
        step = self.policy.propose(self.settings, self.client, s.memory, estimates)
        waiting = update.phase_length - s.explored
        if waiting > 0:
            env.play(step.choice, waiting, _exploit_rng(self.settings, self.client, update.phase))
        s.choice, s.active, s.memory = int(step.choice), np.asarray(step.nodes, dtype=np.int64), step.memory
        s.pulls += update.phase_length
        s.completed = update.phase
        return ActiveSetReport(self.client, np.concatenate([s.active, np.asarray(step.spares, dtype=np.int64)]))

    def _view(self, update: GlobalUpdate, own: np.ndarray) -> ClientView:
        """What the client decides on: its own means and statistics, and the server's, over its own nodes."""
        s = self.state
        local = s.means[own]
        global_means = np.asarray(update.global_means, dtype=float)[own]
        # a node nobody could report on has no global estimate: fall back on the local one
        reported = np.isfinite(global_means)
        global_means = np.where(reported, global_means, local)
        names = self.settings.bound.statistics
        node_holders = None
        if names:  # pooled statistics come with the holder counts the widths of their global means need
            shape = np.shape(update.node_ids)
            if any(name not in update.statistics or np.shape(update.statistics[name]) != shape for name in names) \
                    or update.holders is None or np.shape(update.holders) != shape:
                raise ProtocolError(f"client {self.client}: a global update without the pooled {', '.join(names)} "
                                    f"and holders that confidence={self.settings.confidence} needs")
            node_holders = np.where(reported, np.asarray(update.holders, dtype=float)[own], 0.0)
        return ClientView(
            phase=update.phase,
            node_ids=s.union[own],
            local_means=local,
            local_counts=s.counts[own],
            global_means=global_means,
            server_eliminated=np.asarray(update.eliminated, dtype=bool)[own],
            own_statistics={name: s.statistics[name][own] for name in names},
            pooled_statistics={name: np.asarray(update.statistics[name], dtype=float)[own] for name in names},
            holders=node_holders,
            min_count=min_pulls(s.counts),
            noise_variance=float(s.noise[0] / s.noise[1]) if s.noise[1] > 0 else float("nan"),
        )

    def finish(self, instruction: FinishInstruction, env: Environment) -> FinishReport:
        """Exploit the chosen node until the horizon (making up any pulls missed while away); report it and the
        best observed point (of which alone the state keeps its observations from now on)."""
        s = self.state
        check_phase(self.settings, self.policy, instruction.phases, final=True)
        self.catch_up(instruction.phases + 1, sets=False)  # the sets are not used after it
        if self.policy.solo and not s.finished:  # a baseline's client searches alone, now (no phase was run)
            observing = Observing(env)
            s.choice, pulls, s.solo_phases = self.policy.alone(self.settings, self.client, observing)
            observing.record(s)
            s.pulls += pulls
        remaining = self.settings.horizon - s.pulls
        if remaining > 0:
            env.play(s.choice, remaining, _exploit_rng(self.settings, self.client, instruction.phases + 1))
        s.pulls = self.settings.horizon
        s.finished = True
        best = best_of(s.observed_nodes, s.observed_sums, s.observed_counts)
        point = np.asarray(env.point(s.choice), dtype=float)
        if best is None:
            return FinishReport(self.client, s.choice, point)
        keep = np.searchsorted(s.observed_nodes, best.node_id)
        s.observed_nodes, s.observed_sums, s.observed_counts = (
            part[keep : keep + 1] for part in (s.observed_nodes, s.observed_sums, s.observed_counts))
        return FinishReport(self.client, s.choice, point, best.node_id,
                            np.asarray(env.point(best.node_id), dtype=float), best.mean, best.pulls)
