"""domain.addresses: the verdicts are the parser's, asked again or remembered alike, and what is
remembered is bounded (a stream of distinct hostile values cannot grow it)."""

from __future__ import annotations

import pytest

from inno_notify.domain import addresses
from inno_notify.domain.addresses import AddressRefused, email_refusal, is_single_address, single_address

CASES = [
    ("alice@example.com", True),
    ("Alice.B-C+tag@sub.example.org", True),
    ("attacker@evil.example,victim@corp.example", False),
    ("Bob <b@example.com>", False),
    ("a%b@relay.example.com", False),
    ("a@[10.0.0.1]", False),
    ("a@localhost", False),
    ("alice@example.com\r\nBcc: x@y.z", False),
    ("x" * 65 + "@example.com", False),
    ("", False),
]


@pytest.mark.parametrize(("value", "plain"), CASES)
def test_a_verdict_is_the_same_the_second_time(value: str, plain: bool) -> None:
    first = [is_single_address(value), email_refusal(value)]
    assert first == [is_single_address(value), email_refusal(value)]
    assert first[0] is plain and (first[1] is None) is plain
    if not plain:
        with pytest.raises(AddressRefused):
            single_address(value)


def test_a_str_subclass_is_judged_by_its_text() -> None:
    class Odd(str):
        __slots__ = ()

    assert single_address(Odd("alice@example.com")) == "alice@example.com"
    assert not is_single_address(Odd("a@b.example, c@d.example"))


def test_what_is_remembered_is_bounded() -> None:
    for i in range(addresses.VERDICTS_REMEMBERED + 100):
        is_single_address(f"p{i}@example.org")
    info = addresses._refusal.cache_info()
    assert info.maxsize == addresses.VERDICTS_REMEMBERED
    assert info.currsize <= addresses.VERDICTS_REMEMBERED
