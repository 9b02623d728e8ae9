"""The one rule of the names a user gives (``pipelines.rules.names``): a slug that can
never reach another directory nor be blank."""

from __future__ import annotations

import pytest

from pipelines.rules.names import MAX_NAME, check_name, name_problem


@pytest.mark.parametrize("name", ["nightly", "spring-2026", "a", "Job_1.v2", "x" * MAX_NAME])
def test_slugs_pass(name: str) -> None:
    assert name_problem(name) is None and check_name(name, "--job") == name


@pytest.mark.parametrize(("name", "said"), [
    ("", "a blank name"), ("   ", "a blank name"), ("my job/../x", "'my job/../x' holds ' '"),
    ("../x", "'../x' holds '/'"), ("..", "'..' starts with '.'"), ("-n", "'-n' starts with '-'"),
    ("load:duckdb/x", "holds ':'"), ("café", "holds 'é'"), ("x" * (MAX_NAME + 1), f"a name of {MAX_NAME + 1}"),
    ("a\nb", "holds '\\n'")])
def test_other_names_are_refused_in_one_line(name: str, said: str) -> None:
    assert said in (name_problem(name) or "")
    with pytest.raises(ValueError, match="^--since-last: .*; a name is letters, digits") as e:
        check_name(name, "--since-last")
    assert "\n" not in str(e.value).replace(repr(name), "")
