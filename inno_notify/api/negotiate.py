"""Picks the response format from the Accept header (JSON unless the client prefers another)."""

from __future__ import annotations

from collections.abc import Sequence


def preferred(accept: str | None, offered: Sequence[str]) -> str | None:
    """The offered media type the client ranks highest; the first offered on a tie or no header.

    None when the client accepts none of them (the caller answers 406).
    """
    if not accept:
        return offered[0]
    best: tuple[float, int] | None = None
    choice: str | None = None
    for order, offer in enumerate(offered):
        quality = _quality(accept, offer)
        if quality <= 0:
            continue
        rank = (quality, -order)
        if best is None or rank > best:
            best, choice = rank, offer
    return choice


def _quality(accept: str, offer: str) -> float:
    main = offer.split("/", 1)[0]
    found: tuple[int, float] | None = None  # (specificity, q)
    for part in accept.split(","):
        media, *options = (p.strip() for p in part.split(";"))
        media = media.lower()
        if media == offer:
            specificity = 2
        elif media == f"{main}/*":
            specificity = 1
        elif media == "*/*":
            specificity = 0
        else:
            continue
        q = 1.0
        for option in options:
            key, _, value = option.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if found is None or specificity > found[0]:
            found = (specificity, q)
    return 0.0 if found is None else found[1]
