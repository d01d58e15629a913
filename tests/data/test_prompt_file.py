"""User prompt template files (TOML) and the errors a bad one gets."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from microcoder.data.config import PromptConfig
from microcoder.data.prompting.render import render_messages
from microcoder.data.prompting.template_file import PromptTemplateError, load_template_file
from microcoder.launch.config import ConfigError, load_config

GOOD = '''
[functional]
system = "You write LeetCode solutions."
user = """Task: {statement}
Implement {fn_name} in:
{starter_code}
Braces: {{ok}}"""

[stdin]
system = ""
user = "Q: {statement}"
'''


@pytest.fixture
def template(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(GOOD)
    return PromptConfig(template=str(path))


def test_user_file_fills_statement_starter_code_and_fn_name(template, mixed_problems):
    p = mixed_problems["two-sum"]
    assert render_messages(p, template) == [
        {"role": "system", "content": "You write LeetCode solutions."},
        {
            "role": "user",
            "content": f"Task: {p.prompt}\nImplement twoSum in:\n{p.starter_code}\nBraces: {{ok}}",
        },
    ]


def test_user_file_empty_system_means_no_system_message(template, mixed_problems):
    assert render_messages(mixed_problems["sum"], template) == [
        {"role": "user", "content": "Q: " + mixed_problems["sum"].prompt}
    ]


def test_kind_missing_from_the_file_falls_back_to_default(template, mixed_problems):
    p = mixed_problems["HumanEval/0"]
    assert render_messages(p, template) == render_messages(p, PromptConfig())


def test_file_edits_are_picked_up(template, mixed_problems):
    path = Path(template.template)
    path.write_text(GOOD.replace("Q: ", "Question: "))
    os.utime(path, ns=(1, 10**18))  # a new mtime even on a coarse clock
    assert render_messages(mixed_problems["sum"], template)[0]["content"].startswith("Question: ")


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '[stdn]\nsystem = ""\nuser = "{statement}"',
            r"\[stdn\]: unknown problem kind; the kinds are stdin",
        ),
        (
            '[stdin]\nsystem = ""\nuser = "{problem}"',
            r"unknown placeholder \{problem\}; use \{statement\}",
        ),
        ('[stdin]\nsystem = ""\nuser = "{}"', r"unknown placeholder \{\}"),
        ('[stdin]\nsystem = ""\nuser = "{statement"', "not a valid format string"),
        ('[stdin]\nsystem = ""\nuser = "{statement.x}"', r"unknown placeholder \{statement.x\}"),
        ('[stdin]\nuser = "{statement}"', r"missing `system` \(system = \"\" for no system"),
        ('[stdin]\nsystem = ""', "missing `user`"),
        ('[stdin]\nsystem = ""\nuser = "x"\nsytem = ""', "unknown key 'sytem'; the keys are"),
        ('[stdin]\nsystem = 1\nuser = "x"', "`system` must be a string"),
        ('stdin = "x"', "'stdin' must be a table"),
        ("", "defines no kind"),
        ("[stdin", "not valid TOML"),
    ],
)
def test_bad_file_is_an_error_naming_the_file_and_the_fix(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(PromptTemplateError, match=message) as err:
        load_template_file(path)
    assert str(path) in str(err.value)


def test_unknown_template_name_lists_the_valid_names():
    with pytest.raises(ValueError, match=r"built-in template \(default, lcb\).*did you mean 'lcb'"):
        PromptConfig(template="lcbb")


def test_bad_template_file_is_refused_when_the_config_loads(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[stdin]\nsystem = ""\nuser = "{oops}"')
    with pytest.raises(ConfigError, match=r"prompt.template: .*unknown placeholder \{oops\}"):
        load_config(None, [f'prompt.template="{path}"'])


def test_system_override_of_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="prompt.system.stdn: unknown problem kind"):
        PromptConfig(system={"stdn": "x"})
