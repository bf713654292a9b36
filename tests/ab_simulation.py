"""A synthetic machine for 08's procedure (no processes): core slots that differ in speed, a worker process per
arm on each slot with an offset of its own for its whole life, a host that flips between a fast and a slow
state (a flip inside a slot's group of blocks makes its references disagree), and noise per block. Each arm's
blocks come back as ``paired.Series`` per slot with the groups' ``steady`` flags, as ``tables`` reads a run."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from latency_lab.core import host_state, paired


@dataclass
class Machine:
    slots: int = 4
    slot_sd: float = 0.08  # the cores' speeds (log SD): the same for every arm on a slot
    process_sd: float = 0.012  # each process's offset for its life (log SD)
    noise: float = 0.02  # each block's own noise (log SD)
    flip: float = 0.15  # the chance that the host's state flips inside a slot's group of blocks
    slow: float = 1.5  # the slow state's factor
    seed: int = 0
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.core = [self.rng.gauss(0, self.slot_sd) for _ in range(self.slots)]

    def processes(self, arms: dict[str, float]) -> dict[str, list[float]]:
        """Per arm (its true ratio against A), the log level of its process on each slot."""
        return {
            arm: [self.core[s] + math.log(ratio) + self.rng.gauss(0, self.process_sd) for s in range(self.slots)]
            for arm, ratio in arms.items()
        }

    def rounds(self, levels: dict[str, list[float]], n: int) -> tuple[dict[str, list[list[float]]], list[list[bool]]]:
        """``n`` rounds: per arm and slot the block times (ms), and per slot and round whether its group kept one
        state (the references of a group that flipped read one state before the flip and the other after)."""
        blocks = {arm: [[] for _ in range(self.slots)] for arm in levels}
        steady = [[] for _ in range(self.slots)]
        for _ in range(n):
            for s in range(self.slots):
                slow = self.rng.random() < 0.6
                flips = self.rng.random() < self.flip
                at = self.rng.randrange(len(levels)) if flips else None
                refs = []
                for i, arm in enumerate(self.rng.sample(list(levels), len(levels))):
                    state = slow != (at is not None and i >= at)
                    factor = self.slow if state else 1.0
                    refs.append(factor)
                    blocks[arm][s].append(math.exp(levels[arm][s] + self.rng.gauss(0, self.noise)) * factor)
                steady[s].append(host_state.steady(min(refs), max(refs)))
        return blocks, steady


def series(blocks: dict[str, list[list[float]]]) -> dict[str, list[paired.Series]]:
    """Per arm, its workers' series, one per slot."""
    return {arm: [paired.Series(str(s), values) for s, values in enumerate(per)] for arm, per in blocks.items()}


def steady_of(flags: list[list[bool]]) -> dict[str, list[bool]]:
    return {str(s): f for s, f in enumerate(flags)}


def merged(a: tuple, b: tuple) -> tuple:
    """Two sets of rounds (``Machine.rounds``) of the same processes, one after the other."""
    blocks = {arm: [x + y for x, y in zip(a[0][arm], b[0][arm])] for arm in a[0]}
    return blocks, [x + y for x, y in zip(a[1], b[1])]


def one_change(m: Machine, ratio: float = 1.0, n: int = 40) -> paired.Change:
    """X against A over ``n`` rounds on machine ``m``."""
    blocks, steady = m.rounds(m.processes({"A": 1.0, "X": ratio}), n)
    arms = series(blocks)
    return paired.change("host_ms", arms["A"], arms["X"], steady_of(steady))
