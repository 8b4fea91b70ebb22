"""driver.loaded: is there a working NVIDIA driver for the GPUs this machine has?"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from envkit.checks._common import join_lines
from envkit.report import CheckResult, Status

if TYPE_CHECKING:
    from envkit.facts import Facts

__all__ = ["check_driver_loaded"]

ID: Final = "driver.loaded"
DRIVER_INSTALL_DOCS: Final = "docs.nvidia.com/datacenter/tesla/driver-installation-guide"

# What each NVML initialisation error means and how to repair it (NVML API reference,
# nvmlReturn_t; nvidia-smi return codes 9, 12 and 18).
NVML_ERROR_FIXES: Final = {
    "LibRmVersionMismatch": (
        (
            "the driver was upgraded without a reboot: the loaded kernel module and the "
            "user-space library (libnvidia-ml) are different versions"
        ),
        (
            "reboot, or reload the module: sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset "
            "nvidia && sudo modprobe nvidia"
        ),
    ),
    "NoPermission": (
        "this user may not open the GPU device files",
        "check `ls -l /dev/nvidia*` (and, in a container, its device cgroup / --gpus flag)",
    ),
    "DriverNotLoaded": (
        "the nvidia kernel module is not loaded",
        "sudo modprobe nvidia  (if that fails: `dmesg | grep -i nvrm` says why, e.g. Secure Boot)",
    ),
    # Set by envkit.detect when neither NVML nor nvidia-smi answered before the time limit (the
    # NVML child may say "Timeout"): the driver is loaded, a GPU or the driver is stuck.
    "NoAnswer": (
        (
            "NVML and nvidia-smi did not answer in time: a GPU is probably wedged (the kernel log "
            "names it with an Xid error)"
        ),
        (
            "sudo dmesg | grep -i xid  (which GPU, which error); then reset that GPU "
            "(sudo nvidia-smi -r -i <index>, with no process on it) or reboot the node"
        ),
    ),
    "LibraryNotFound": (
        "libnvidia-ml.so.1, the driver's user-space library, is not on the loader path",
        (
            "in a container, run it with the NVIDIA Container Toolkit (`docker run --gpus all "
            "…`); on a host, reinstall the driver's user-space libraries for the loaded driver"
        ),
    ),
}


NVML_ERROR_FIXES["Timeout"] = NVML_ERROR_FIXES["NoAnswer"]
# "Failed to initialize NVML: Unknown Error" inside a container that worked before: the runtime's
# device cgroup rules were lost (a `systemctl daemon-reload` on the host; NVIDIA/nvidia-container-
# toolkit#48), and the container no longer may open /dev/nvidia*.
NVML_ERROR_FIXES["Unknown"] = (
    (
        "NVML cannot talk to the driver; in a container that worked before, its access to /dev/nvidia* was "
        "lost (a systemctl daemon-reload on the host)"
    ),
    (
        "restart the container (docker restart …); for good: run it with --device /dev/nvidia* or the CDI "
        "spec (nvidia-ctk cdi generate), and on the host reboot if nvidia-smi fails there too"
    ),
)
# NVML errors an error text may quote (envkit.detect.errtext): judged without a detected driver.
_SAID: Final = ("LibRmVersionMismatch", "DriverNotLoaded", "NoPermission", "Unknown")


def check_driver_loaded(facts: Facts) -> CheckResult:
    driver = facts.driver
    pci = facts.host.nvidia_pci_devices
    error_name = (driver.nvml_error or "").split(":", 1)[0] or None
    if driver.version is None and error_name in _SAID and not facts.reported("driver.version"):
        # An error text quotes nvidia-smi or the kernel log: the driver is there and broken.
        reason, fix = NVML_ERROR_FIXES[error_name]
        return CheckResult(
            ID,
            Status.FAIL,
            f"NVML fails: {error_name}",
            detail=join_lines(reason, driver.nvml_error),
            fix=fix,
        )
    if driver.version is None:
        if pci or facts.host.nvidia_module_loaded:
            where = f"{len(pci)} NVIDIA GPU(s) on the PCI bus" if pci else "the nvidia module"
            install = f"install the NVIDIA driver (ubuntu-drivers install; {DRIVER_INSTALL_DOCS})"
            if facts.host.nvidia_module_loaded is False:
                # Without the kernel module nothing else can work; NVML's error is a consequence.
                reason = "the nvidia kernel module is not loaded"
                fix = f"sudo modprobe nvidia; if the module is missing, {install}"
            else:
                reason, fix = NVML_ERROR_FIXES.get(
                    error_name or "",
                    ("no driver answered (NVML, /proc/driver/nvidia/version, nvidia-smi)", install),
                )
            return CheckResult(
                ID,
                Status.FAIL,
                f"{where} but no working NVIDIA driver",
                detail=join_lines(reason, driver.nvml_error, *driver.notes),
                fix=fix,
            )
        detail = join_lines(driver.nvml_error, *driver.notes)
        if facts.host.wsl:
            detail = join_lines(
                "WSL2: the GPU driver is the Windows one; do not install a Linux driver inside WSL",
                detail,
            )
        return CheckResult(ID, Status.SKIP, "no NVIDIA GPU or driver on the machine", detail=detail)

    cuda = f" (CUDA {driver.cuda_version})" if driver.cuda_version else ""
    summary = f"driver {driver.version}{cuda} via {driver.source}"
    if error_name is not None and not facts.gpus:
        reason, fix = NVML_ERROR_FIXES.get(
            error_name,
            (
                f"NVML fails: {driver.nvml_error}",
                "reboot the node; if it persists, reinstall the driver",
            ),
        )
        return CheckResult(
            ID,
            Status.FAIL,
            f"driver {driver.version} is loaded but NVML does not work: {error_name}",
            detail=join_lines(reason, driver.nvml_error, *driver.notes),
            fix=fix,
        )
    if not facts.gpus and pci:
        return CheckResult(
            ID,
            Status.FAIL,
            f"driver {driver.version} is loaded but sees none of the {len(pci)} NVIDIA GPU(s)",
            detail=join_lines(
                "the GPUs are on the PCI bus but NVML lists none: the device files (/dev/nvidia*) "
                "may be missing or the GPUs fell off the bus (`dmesg | grep -i xid`)",
                *driver.notes,
            ),
            fix="sudo nvidia-smi -pm 1; if NVML still lists no GPU, reboot the node",
        )
    count = len(facts.gpus)
    return CheckResult(
        ID,
        Status.PASS,
        f"{summary}, {count} GPU{'s' if count != 1 else ''}",
        detail=join_lines(driver.kernel_module, *driver.notes),
    )
