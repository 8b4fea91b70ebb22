"""envkit fleet at scale: reports are streamed and only what the views show is kept of each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envkit.fleet.aggregate import build_fleet, load_fleet, read_report
from envkit.render.jsonout import dumps, print_json

REPORT = Path(__file__).parent.parent.parent / "data" / "reports" / "h200-580-torch2.11-cu130.json"


def write_nodes(folder: Path, count: int) -> list[Path]:
    base = json.loads(REPORT.read_text(encoding="utf-8"))
    paths = []
    for n in range(1, count + 1):
        base["host"] = base["facts"]["host"]["hostname"] = f"gpu-node-{n:03d}"
        if n == 7:
            base["facts"]["driver"]["version"] = "580.126.09"
        elif n == 8:
            base["facts"]["driver"]["version"] = "580.159.04"
            base["checks"][2].update(status="fail", summary="GPU 0: 3 uncorrected ECC errors", fix="drain it")
        else:
            base["checks"][2].update(status="pass", summary="1 GPU healthy", fix="")
        path = folder / f"gpu-node-{n:03d}.json"
        path.write_text(json.dumps(base, indent=2), encoding="utf-8")
        paths.append(path)
    return paths


def test_nodes_keep_only_what_the_views_show(tmp_path: Path) -> None:
    write_nodes(tmp_path, 40)
    fleet = load_fleet([str(tmp_path)])
    assert len(fleet.nodes) == 40
    assert [(d.node, d.key) for d in fleet.deviations] == [("gpu-node-007", "driver.version")]
    assert [(f.node, f.check.id, f.check.fix) for f in fleet.failures] == [
        ("gpu-node-008", "gpu.health", "drain it")
    ]
    first, second = fleet.nodes[0], fleet.nodes[1]
    assert not hasattr(first, "report")
    for a, b in zip(first.checks, second.checks):
        assert a is b  # one copy of each equal result for the whole fleet
        assert a.detail == "" and a.metrics == {}  # not shown by any fleet view: not kept
    # Nodes alike share one facts dict (a 10,000-node fleet holds a handful), a deviating one has its own.
    assert first.facts is second.facts
    odd = next(n for n in fleet.nodes if n.name == "gpu-node-007")
    assert odd.facts is not first.facts and odd.facts["driver.version"] == "580.126.09"


def test_streamed_and_in_memory_fleets_agree(tmp_path: Path) -> None:
    paths = write_nodes(tmp_path, 12)
    streamed = load_fleet([str(tmp_path)])
    in_memory = build_fleet([(str(p), read_report(str(p))) for p in paths])
    assert streamed.to_json() == in_memory.to_json()
    assert streamed.to_json(strict=True) == in_memory.to_json(strict=True)
    assert streamed.exit_code() == in_memory.exit_code() == 1


def test_the_streamed_json_is_the_documents_text(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    write_nodes(tmp_path, 9)
    fleet = load_fleet([str(tmp_path)])
    print_json(fleet.to_json(lazy=True))
    assert capsysbinary.readouterr().out.decode() == dumps(fleet.to_json()) + "\n"


def test_the_keys_worked_out_per_section_read_only_that_section() -> None:
    # fleet_fingerprint works a key out once per distinct section object (fingerprint._READS): a
    # key that read anything else would be wrong on the nodes that share the section. Each is
    # checked on the real report against a Facts that has only its section.
    import dataclasses

    from envkit.facts import Facts
    from envkit.fleet.fingerprint import _FLEET, _READS, fingerprint, fleet_fingerprint

    facts = read_report(str(REPORT)).facts
    extract = dict(_FLEET)
    for key, section in _READS.items():
        alone = Facts(**{section: getattr(facts, section)})
        assert extract[key](alone) == extract[key](facts), key
        assert extract[key](dataclasses.replace(facts, host=Facts().host, gpus=())) == extract[key](facts)
    # And the memo gives what a fresh computation gives, node after node.
    full = fingerprint(facts)
    for _ in range(3):
        assert fleet_fingerprint(facts) == {k: full[k] for k in fleet_fingerprint(facts)}


def test_nodes_with_equal_verdicts_share_them_and_count_right(tmp_path: Path) -> None:
    write_nodes(tmp_path, 30)
    fleet = load_fleet([str(tmp_path)])
    healthy = [n for n in fleet.nodes if n.name not in ("gpu-node-008",)]
    assert len({id(n.checks) for n in healthy}) == 1  # one tuple for 29 nodes
    counts = fleet.check_counts("gpu.health")
    assert counts["pass"] == 29 and counts["fail"] == 1 and counts["missing"] == 0
    in_memory = build_fleet([(str(p), read_report(str(p))) for p in sorted(tmp_path.glob("*.json"))])
    assert in_memory.to_json() == fleet.to_json()


def test_the_per_section_memo_keeps_no_node_alive() -> None:
    # fingerprint's memo is keyed by a section's identity: it must not be what keeps the sections
    # of reports already done alive (a fleet whose torch differs per node, a 34 KB venv, held
    # 470 MiB after 3,000 nodes), nor keep them once the fleet is done (it is module-wide).
    import gc
    import weakref

    from envkit.facts import DriverFacts, Facts, PythonFacts, TorchFacts
    from envkit.fleet.fingerprint import fleet_fingerprint
    from envkit.versions import NvVersion, Version

    refs = []
    for n in range(50):
        facts = Facts(
            torch=TorchFacts(version=Version("2.11.0"), location=f"/home/u{n}/torch"),
            driver=DriverFacts(version=NvVersion("580.95.05"), kernel_module=f"m{n}"),
            python=PythonFacts(f"/home/u{n}/python", "PATH", version=Version("3.12.3")),
        )
        prints = fleet_fingerprint(facts)
        assert prints["torch.version"] == "2.11.0" and prints["python.version"] == "3.12.3"
        refs += [weakref.ref(facts.torch), weakref.ref(facts.driver), weakref.ref(facts.python)]
        del facts
    gc.collect()
    assert [r for r in refs if r() is not None] == []
