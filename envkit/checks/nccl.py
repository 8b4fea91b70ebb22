"""nccl.env: NCCL / gloo settings that break or slow distributed runs.

- torch 2.2 renamed its own NCCL_* variables to TORCH_NCCL_* (pytorch PR #114077); the old names
  still work but warn, and NCCL itself ignores them.
- NCCL_SOCKET_IFNAME is a list of interface-name prefixes ("^" excludes, "=" means an exact name);
  GLOO_SOCKET_IFNAME / TP_SOCKET_IFNAME name interfaces exactly. Naming an interface that does not
  exist or is down is a classic cause of hangs at init (NCCL user guide, env.html).
- The NCCL guide says its debugging variables "should not be used in production nor retained in
  scripts … Keeping them set may result in sub-optimal behavior, crashes, or hangs".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from envkit.checks._common import and_list, fix_lines, headline, join_lines
from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envkit.facts import Facts, NetInterface

__all__ = ["RENAMED", "check_nccl_env", "nccl_ifname_matches"]

ID: Final = "nccl.env"

# Source: https://github.com/pytorch/pytorch/pull/114077 ("[nccl-pg] Avoid using NCCL_ prefix for
# non-NCCL env variables"), in torch 2.2.0 (https://github.com/ray-project/ray/issues/47292); the
# old names still work with a deprecation warning.
RENAMED: Final = {
    "NCCL_BLOCKING_WAIT": "TORCH_NCCL_BLOCKING_WAIT",
    "NCCL_ASYNC_ERROR_HANDLING": "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "NCCL_DESYNC_DEBUG": "TORCH_NCCL_DESYNC_DEBUG",
    "NCCL_ENABLE_TIMING": "TORCH_NCCL_ENABLE_TIMING",
    "ENABLE_NCCL_HEALTH_CHECK": "TORCH_ENABLE_NCCL_HEALTH_CHECK",
    "NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK": "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK",
}
# Debugging switches the NCCL guide says not to keep in production.
DEBUG_ONLY: Final = ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_ALGO", "NCCL_PROTO")


def nccl_ifname_matches(value: str, interfaces: Sequence[NetInterface]) -> tuple[list[str], list[str]]:
    """Apply NCCL_SOCKET_IFNAME's rules: (interfaces NCCL may use, entries that match nothing up).

    >>> from envkit.facts import NetInterface
    >>> nccl_ifname_matches("eth", [NetInterface("eth0", True), NetInterface("lo", True)])
    (['eth0'], [])
    """
    spec = value.strip()
    exclude = spec.startswith("^")
    if exclude:
        spec = spec[1:]
    exact = spec.startswith("=")
    if exact:
        spec = spec[1:]
    entries = [e.strip() for e in spec.split(",") if e.strip()]
    up = [i.name for i in interfaces if i.up]

    def hit(name: str, entry: str) -> bool:
        return name == entry if exact else name.startswith(entry)

    if exclude:
        return [n for n in up if not any(hit(n, e) for e in entries) and n != "lo"], []
    usable = [n for n in up if any(hit(n, e) for e in entries)]
    unmatched = [e for e in entries if not any(hit(n, e) for n in up)]
    return usable, unmatched


def check_nccl_env(facts: Facts) -> CheckResult:
    env = facts.host.env
    fails: list[str] = []
    warns: list[str] = []
    fixes: list[str] = []
    notes: list[str] = []
    for old, new in RENAMED.items():
        if old in env:
            warns.append(f"{old} is deprecated since torch 2.2 and ignored by NCCL")
            fixes.append(f"export {new}={env[old]}; unset {old}")
    interfaces = facts.host.interfaces
    known = {i.name: i for i in interfaces}
    state = ", ".join(f"{i.name} ({'up' if i.up else 'down'})" for i in interfaces)
    nccl_if = env.get("NCCL_SOCKET_IFNAME")
    if nccl_if and interfaces:
        usable, unmatched = nccl_ifname_matches(nccl_if, interfaces)
        if not usable:
            fails.append(f"NCCL_SOCKET_IFNAME={nccl_if} matches no interface that is up")
            fixes.append(f"set NCCL_SOCKET_IFNAME to an interface that is up: {state}")
        elif unmatched:
            warns.append(f"NCCL_SOCKET_IFNAME={nccl_if}: {and_list(unmatched)} match no interface that is up")
        else:
            notes.append(f"NCCL_SOCKET_IFNAME={nccl_if} selects {and_list(usable)}")
    for var in ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME"):
        value = env.get(var)
        if not value or not interfaces:
            continue
        for name in (n.strip() for n in value.split(",") if n.strip()):
            iface = known.get(name)
            if iface is None or not iface.up:
                fails.append(f"{var}={value}: {name} {'is down' if iface else 'does not exist'}")
                fixes.append(f"set {var} to an interface that is up: {state}")
    for var in DEBUG_ONLY:
        if var in env:
            warns.append(f"{var}={env[var]} is a debugging switch; NCCL's guide says not to keep it set")
            fixes.append(f"unset {var}  (unless you are debugging)")
    if (nccl_if or env.get("GLOO_SOCKET_IFNAME")) and not interfaces:
        notes.append("network interfaces unknown: the *_SOCKET_IFNAME settings were not verified")
    if fails or warns:
        return CheckResult(
            ID,
            Status.FAIL if fails else Status.WARN,
            headline(fails + warns),
            detail=join_lines(*fails, *warns, *notes, f"interfaces: {state}" if state else ""),
            fix=fix_lines(fixes),
        )
    nccl_vars = sorted(k for k in env if k.startswith(("NCCL_", "TORCH_NCCL_", "GLOO_")))
    summary = f"{len(nccl_vars)} NCCL/gloo settings, none harmful" if nccl_vars else "no NCCL/gloo settings"
    return CheckResult(
        ID,
        Status.PASS,
        summary,
        detail=join_lines(*notes, *(f"{k}={env[k]}" for k in nccl_vars)),
    )
