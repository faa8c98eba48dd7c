"""A broken rule (`RuleBroken`) reads right after the setting's name, anything else after a
colon: the settings' errors follow the exception's type and `SettingProblem.rule`, never the
words of the message."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError, field_validator

from pulsar_lens.core import configfile
from pulsar_lens.core.errors import RuleBroken, SettingProblem, SettingsError
from pulsar_lens.core.values import retention_problem


class _Checked(BaseModel):
    rule: str = ""
    sentence: str = ""
    number: int = 0

    @field_validator("rule")
    @classmethod
    def _rule(cls, value: str) -> str:
        raise RuleBroken(f"needs a vowel, got {value!r}")

    @field_validator("sentence")
    @classmethod
    def _sentence(cls, value: str) -> str:
        raise ValueError(f"must-have words are missing from {value!r}")


def _errors(**values: Any) -> list[Any]:
    with pytest.raises(ValidationError) as caught:
        _Checked(**values)
    return list(caught.value.errors(include_input=False, include_url=False))


def test_line_of_a_rule_follows_the_name() -> None:
    problem = SettingProblem("must be at least 1m, got 30s", setting="X", rule=True)
    assert configfile._lines([problem]) == "X must be at least 1m, got 30s"


def test_line_of_a_rule_not_worded_must_follows_the_name() -> None:
    problem = SettingProblem("needs a vowel", file="lens.toml", line=3, key="name", rule=True)
    assert configfile._lines([problem]) == "lens.toml line 3, name needs a vowel"


def test_line_of_a_problem_worded_must_but_no_rule_follows_a_colon() -> None:
    problem = SettingProblem("must be quoted, says the parser", setting="X")
    assert configfile._lines([problem]) == "X: must be quoted, says the parser"


def test_said_takes_a_validators_own_exception_not_pydantics_message() -> None:
    rule, sentence = _errors(rule="xyz", sentence="ab")
    assert configfile._said(rule) == ("needs a vowel, got 'xyz'", True)
    assert configfile._said(sentence) == ("must-have words are missing from 'ab'", False)


def test_said_of_pydantics_own_error_is_its_message() -> None:
    (error,) = _errors(number="many")
    assert configfile._said(error) == (str(error["msg"]), False)


def test_retention_problem_is_a_broken_rule() -> None:
    broken = retention_problem(dt.timedelta(seconds=30), dt.timedelta(seconds=10))
    assert isinstance(broken, RuleBroken)
    assert str(broken).startswith("must be at least 1m, got 30s: ")
    assert retention_problem(dt.timedelta(minutes=5), dt.timedelta(seconds=10)) is None


def test_a_setting_that_breaks_a_rule_is_marked_so() -> None:
    with pytest.raises(SettingsError) as caught:
        configfile.load({"PULSAR_LENS_RETENTION": "30s", "PULSAR_LENS_POLL_INTERVAL": "soon"})
    by_setting = {p.setting: p.rule for p in caught.value.problems}
    assert by_setting == {"PULSAR_LENS_RETENTION": True, "PULSAR_LENS_POLL_INTERVAL": False}


def test_settings_error_passes_rule_to_its_problem() -> None:
    error = SettingsError("X must be 1", setting="X", problem="must be 1", rule=True)
    assert error.problems == (SettingProblem("must be 1", setting="X", rule=True),)
