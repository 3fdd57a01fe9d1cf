"""What a load test counts, the sentences its sessions type, and its report."""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field

NAMES = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Karl Long", "Marie Curie", "Emmy Noether",
         "Katherine Johnson", "John Nash", "Rosalind Franklin", "Niels Bohr"]
PLACES = ["London", "Paris", "Leeds", "Berlin", "Vienna", "Madrid", "Rome", "Dublin", "Oslo", "Lisbon"]
VERBS = ["was born in", "worked in", "studied in", "lived in", "died in"]
INSTRUCTOR_EVERY_S = 15.0  # --sentences shared: the instructor puts up a new sentence this often


@dataclass
class Stats:
    times: dict[str, list[float]] = field(default_factory=lambda: {"type": [], "switch": [], "open": []})
    by_page: dict[str, list[float]] = field(default_factory=dict)  # every interaction, by the page it drew
    errors: list[str] = field(default_factory=list)
    # The replica-kill run: what the sessions on the killed replica saw.
    interrupted: list[str] = field(default_factory=list)  # interactions cut off by the kill
    recoveries: list[float] = field(default_factory=list)  # seconds from the kill to the session's view drawn
    replica_of: dict[int, str | None] = field(default_factory=dict)  # session number -> replica now

    def all_interactions(self) -> list[float]:
        return self.times["type"] + self.times["switch"]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(NAMES)} {rng.choice(VERBS)} {rng.choice(PLACES)} ."


def typed_sentence(mode: str, session: int, count: int, rng: random.Random, elapsed_s: float) -> str:
    """`new`: a sentence no other session (and no earlier interaction) typed, so no cache can answer it.
    `shared`: the whole class types the instructor's sentence, which changes every INSTRUCTOR_EVERY_S."""
    if mode == "shared":
        return sentence(random.Random(int(elapsed_s // INSTRUCTOR_EVERY_S)))
    return f"{sentence(rng)} {session} {count}"


def summary(label: str, values: list[float]) -> str:
    return (f"  {label:<22} median {statistics.median(values):6.2f} s   p95 {percentile(values, 0.95):6.2f} s"
            f"   max {max(values):6.2f} s   (n={len(values)})")


def report(args, stats: Stats, memory: dict[str, dict[str, int]], elapsed: float, cpu_s: float,
           killed: dict | None, client_cpu_s: float = 0.0) -> None:
    done = stats.all_interactions()
    print(f"{len(done)} interactions in {elapsed:.0f} s ({len(stats.times['type'])} typed sentences, "
          f"{len(stats.times['switch'])} page switches), {len(stats.errors)} errors")
    for label, values in (("all interactions", done), ("typing a sentence", stats.times["type"]),
                          ("switching pages", stats.times["switch"]), ("opening the app", stats.times["open"])):
        if values:
            print(summary(label, values))
    for page, values in sorted(stats.by_page.items()):
        print(summary(f"page {page}", values))
    for error in stats.errors[:20]:
        print(f"  error: {error}")
    if done:
        print(f"server CPU: {cpu_s:.1f} s over the run, {1000 * cpu_s / len(done):.0f} ms per interaction "
              f"({cpu_s / max(elapsed, 1e-9):.2f} cores busy on average); the load client itself, on the same "
              f"machine: {client_cpu_s:.1f} s")
    one, peak, after = (memory.get(k, {}) for k in ("one session", "peak under load", "after"))
    replicas = [name for name in peak if name != "haproxy"]
    for name in replicas:
        print(f"server RSS {name}: warm after one session {one.get(name, 0) / 1024:.0f} MB, peak under load "
              f"{peak[name] / 1024:.0f} MB, after {after.get(name, 0) / 1024:.0f} MB")
    if "haproxy" in peak:
        print(f"server RSS haproxy: peak {peak['haproxy'] / 1024:.0f} MB")
    extra = (sum(peak[n] for n in replicas) - sum(one.get(n, 0) for n in replicas)) / max(args.sessions, 1)
    print(f"memory per extra session: {extra / 1024:.1f} MB (all replicas' peak minus their warm size, "
          f"over {args.sessions} sessions)")
    if killed:
        back = stats.recoveries
        print(f"replica {killed['name']} killed {killed['after_s']:.0f} s into the load: {killed['sessions']} "
              f"sessions were on it; {len(stats.interrupted)} of their interactions were cut off; "
              + (f"{len(back)} views drawn again after median {statistics.median(back):.1f} s, max {max(back):.1f} s"
                 if back else "no view was drawn again")
              + f"; sessions on the other replicas: {len(stats.errors)} errors")
        for line in stats.interrupted[:10]:
            print(f"  cut off: {line}")
