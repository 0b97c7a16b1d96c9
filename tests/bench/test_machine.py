"""`bench.machine`: what a benchmark's result says of the machine it ran on."""

from bench import machine


def test_the_machine_is_described_by_its_cores_load_and_a_timed_loop(monkeypatch):
    monkeypatch.setattr(machine, "LOOP", 10_000)  # the figure's shape, not the machine's speed
    described = machine.describe(runs=3)
    assert described["cores"] >= 1
    assert described["load"] >= 0
    assert described["python_loop_ms"] > 0
