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
from pfxab_flower.algorithms.phased.policy import Policy, RoundEstimates
from pfxab_flower.algorithms.phased.settings import Settings
from pfxab_flower.algorithms.phased.state import ROOT, ClientState, ProtocolError
from pfxab_flower.problems.sampling import Environment


def _rng(settings: Settings, client: int, phase: int) -> np.random.Generator:
    """The noise stream of one client in one phase: the same whichever engine runs it."""
    return np.random.default_rng([settings.seed, client, phase])


def min_pulls(counts: np.ndarray) -> int:
    """The fewest pulls any sampled node of ``A(p)`` had in a phase (every client's global pulls, if any)."""
    sampled = np.asarray(counts)[np.asarray(counts) > 0]
    return int(sampled.min()) if sampled.size else 0


class ClientMachine:
    """One client of a phased-elimination algorithm."""

    def __init__(self, policy: Policy, settings: Settings, client: int, state: ClientState | None = None):
        self.policy = policy
        self.settings = settings
        self.client = client
        self.state = state if state is not None else ClientState()
        if self.state.completed == 0 and self.state.explored_phase == 0:  # no phase yet: the policy's first set
            self.state.active = policy.first_active_set(settings)

    def _own_index(self, union: np.ndarray) -> np.ndarray:
        index = np.searchsorted(union, self.state.active)
        if np.any(index >= len(union)) or np.any(union[np.minimum(index, len(union) - 1)] != self.state.active):
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
            held = len(self.policy.own_nodes(s.active, union))  # a proposal policy's lost proposals are not held
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
        if instruction.global_pulls > 0:
            samples = bound.draw(env, union, np.full(len(union), instruction.global_pulls, dtype=np.int64), rng)
        if instruction.local_pulls > 0:
            local = bound.draw(env, s.active, np.full(len(own), instruction.local_pulls, dtype=np.int64), rng)
            samples = samples.put(own, bound.merge(samples.take(own), local))
        counts = samples.counts
        means = np.divide(samples.sums, counts, out=np.zeros(len(union)), where=counts > 0)
        statistics = bound.client_statistics(self.settings, samples)
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
                env.play(s.choice, update.phase_length)
            s.active = self.policy.lost(s.active)
            s.pulls += update.phase_length
            s.completed = update.phase
            return ActiveSetReport(self.client, s.active)
        if not np.array_equal(update.node_ids, s.union):
            raise ProtocolError(f"client {self.client}: global update does not match phase {s.completed + 1}")
        if self.policy.proposes:
            return self._propose(update, env)
        view = self._view(update, self._own_index(s.union))
        waiting = update.phase_length - s.explored
        if waiting > 0:
            env.play(int(s.active[np.argmax(view.local_means)]), waiting)
        keep = self.policy.keep(self.settings, view)
        survivors = s.active[keep]
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
            env.play(step.choice, waiting)
        s.choice, s.active, s.memory = int(step.choice), np.asarray(step.nodes, dtype=np.int64), step.memory
        s.pulls += update.phase_length
        s.completed = update.phase
        return ActiveSetReport(self.client, s.active)

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
            node_ids=s.active,
            local_means=local,
            local_counts=s.counts[own],
            global_means=global_means,
            server_eliminated=np.asarray(update.eliminated, dtype=bool)[own],
            own_statistics={name: s.statistics[name][own] for name in names},
            pooled_statistics={name: np.asarray(update.statistics[name], dtype=float)[own] for name in names},
            holders=node_holders,
            min_count=min_pulls(s.counts),
        )

    def finish(self, instruction: FinishInstruction, env: Environment) -> FinishReport:
        """Exploit the chosen node until the horizon (making up any pulls missed while away)."""
        s = self.state
        check_phase(self.settings, self.policy, instruction.phases, final=True)
        self.catch_up(instruction.phases + 1, sets=False)  # the sets are not used after it
        if self.policy.solo and not s.finished:  # a baseline's client searches alone, now (no phase was run)
            s.choice, pulls = self.policy.alone(self.settings, self.client, env)
            s.pulls += pulls
        remaining = self.settings.horizon - s.pulls
        if remaining > 0:
            env.play(s.choice, remaining)
        s.pulls = self.settings.horizon
        s.finished = True
        return FinishReport(self.client, s.choice, np.asarray(env.point(s.choice), dtype=float))
