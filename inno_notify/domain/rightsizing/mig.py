"""MIG profiles per GPU model, and the smallest one a job's GPU-memory peak fits in.

The tables list NVIDIA's documented GPU-instance profiles (MIG user guide, "Supported MIG
Profiles") for the models our clusters run. A profile's memory is taken from its name
("3g.40gb" → 40 GB = 40·10⁹ bytes), which is at or below the instance's real size, so a job
that fits the name fits the slice. Compute is the number of GPCs ("3g" → 3 of 7).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PROFILE = re.compile(r"^(\d+)g\.(\d+)gb$")


@dataclass(frozen=True, slots=True, order=True)
class MigProfile:
    """One GPU-instance profile, ordered by compute slices first, then memory."""

    slices: int
    memory_bytes: int
    name: str

    @classmethod
    def parse(cls, name: str) -> MigProfile | None:
        match = _PROFILE.match(name.strip().lower().removeprefix("mig-"))
        if match is None:
            return None
        slices, gigabytes = int(match.group(1)), int(match.group(2))
        return cls(slices=slices, memory_bytes=gigabytes * 10**9, name=f"{slices}g.{gigabytes}gb")


def _profiles(*names: str) -> tuple[MigProfile, ...]:
    parsed = [MigProfile.parse(name) for name in names]
    return tuple(sorted(p for p in parsed if p is not None))


MIG_PROFILES: dict[str, tuple[MigProfile, ...]] = {
    "A100-40GB": _profiles("1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"),
    "A100-80GB": _profiles("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H100-80GB": _profiles("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"),
    "H200-141GB": _profiles("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"),
}
"""Profile tables keyed by our normalized model name (see ``mig_family``)."""

_GIB = 1024**3


def mig_family(model: str | None, fb_total_bytes: int | None = None) -> str | None:
    """Our table key for a DCGM ``modelName`` ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3").

    An A100 whose name gives no size is told apart by its memory when that was measured.
    Models with other MIG layouts (H100 NVL 94 GB, A30, Blackwell) are not in the tables: None.
    """
    if model is None:
        return None
    name = model.upper()
    if "H200" in name:
        return "H200-141GB"
    if "H100" in name:
        if "NVL" in name or "94GB" in name or "96GB" in name or "GH200" in name:
            return None
        return "H100-80GB"
    if "A100" in name:
        if "80GB" in name:
            return "A100-80GB"
        if "40GB" in name:
            return "A100-40GB"
        if fb_total_bytes is not None:
            return "A100-80GB" if fb_total_bytes > 60 * _GIB else "A100-40GB"
    return None


def smallest_fitting(family: str, needed_bytes: int) -> MigProfile | None:
    """The profile with the fewest compute slices (then least memory) holding ``needed_bytes``."""
    for profile in MIG_PROFILES.get(family, ()):
        if profile.memory_bytes >= needed_bytes:
            return profile
    return None
