"""Will an operator's tensors fit? Checked before anything is allocated.

An allocation far too large fails inside torch with a multi-line C++ error (or, past int64,
an overflow); one that barely fits may push the host into swap. The bench refuses both
up front, from the ledger's tensor sizes against the memory the device has.
"""

from __future__ import annotations

import os

from roofwise.base.errors import InputError
from roofwise.ledgers.ledger import Ledger

GiB = 1 << 30


def storage_bytes(ledger: Ledger) -> int:
    """Bytes of the distinct storages one call holds: every tensor of the ledger once (an
    in-place tensor is one storage, though it is both read and written)."""
    return sum(t.nbytes for t in ledger.tensors)


def available_bytes(device: str) -> tuple[int, str] | None:
    """(bytes, what they are) the device can hold, or None when the host does not say.

    CUDA: the free memory the driver reports (torch.cuda.mem_get_info). Host: the physical
    memory (SC_PHYS_PAGES * SC_PAGE_SIZE): an upper bound, so the check refuses only what
    cannot fit at all.
    """
    if device.startswith("cuda"):
        import torch

        free_bytes, _total = torch.cuda.mem_get_info(torch.device(device))
        return int(free_bytes), "free on the device"
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        page_bytes = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None
    if pages <= 0 or page_bytes <= 0:
        return None
    return pages * page_bytes, "of host memory"


def require_fits(ledger: Ledger, where: str, device: str,
                 available: tuple[int, str] | None) -> None:
    """InputError at `where` (the operator and its parameters) when the call's tensors
    exceed `available`; nothing when the host does not say how much memory it has."""
    if available is None:
        return
    need = storage_bytes(ledger)
    limit, what = available
    if need > limit:
        raise InputError(where, f"the inputs and outputs need {gib(need)} GiB, more than the "
                                f"{gib(limit)} GiB {what} ({device})")


def gib(nbytes: int) -> str:
    """GiB for people: 0.5, 7.45, 7,451; past a trillion GiB in scientific notation."""
    value = nbytes / GiB
    if value < 100:
        return f"{value:.3g}"
    return f"{value:,.0f}" if value < 1e12 else f"{value:.3g}"
