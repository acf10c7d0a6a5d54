"""Leg order within rounds: a seeded, carry-over-balanced order (Williams design) per round."""

from __future__ import annotations

import random


def williams_rows(n: int) -> list[list[int]]:
    """Rows of a Williams Latin square: each ordered pair of neighbours appears equally often.

    For even n, n rows; for odd n, the square and its mirror (2n rows) are needed for balance.
    """
    if n == 1:
        return [[0]]
    first = [0]
    lo, hi = 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(x + r) % n for x in first] for r in range(n)]
    if n % 2:
        rows += [list(reversed(row)) for row in rows]
    return rows


def round_orders(n_legs: int, rounds: int, seed: int) -> list[list[int]]:
    """Leg order for rounds 0 … rounds-1: Williams rows, shuffled and relabelled with ``seed``."""
    rng = random.Random(seed)
    rows = williams_rows(n_legs)
    labels = list(range(n_legs))
    rng.shuffle(labels)
    orders: list[list[int]] = []
    while len(orders) < rounds:
        block = rows[:]
        rng.shuffle(block)
        orders.extend([[labels[x] for x in row] for row in block])
    return orders[:rounds]
