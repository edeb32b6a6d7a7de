"""A judge's key is named whenever it is missing: by `vigil config check` before any call (``judge.key``)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from vigil.schemas import JudgeConfig
from vigil.worker.cli import main
from vigil.worker.judge.key import NO_KEY, api_key, key_problem


@pytest.mark.parametrize(("fields", "expected"), [
    ({"api_key_env": "VIGIL_TEST_UNSET_KEY", "base_url": "https://judge.example/v1"},
     ("error", ("judges.0.api_key_env (j): VIGIL_TEST_UNSET_KEY is not set in this environment; judge.example "
                "will refuse the judge's calls without its key"))),
    ({"api_key_env": "VIGIL_TEST_UNSET_KEY", "base_url": "http://127.0.0.1:8080/v1"},
     ("error", ("judges.0.api_key_env (j): VIGIL_TEST_UNSET_KEY is not set in this environment; 127.0.0.1 will "
                "refuse the judge's calls without its key"))),
    ({"base_url": "https://api.openai.com/v1"},
     ("warning", ("judge 'j': OPENAI_API_KEY (the default api_key_env) is not set; api.openai.com will likely "
                  "answer 401 and the judge will be paused (set it, or set api_key_env to the variable that holds "
                  "the key)"))),
    ({"base_url": "http://localhost:8080/v1"}, None),
    ({"base_url": "http://[::1]:8080/v1"}, None),
    ({"kind": "baseline"}, None),
], ids=["named and unset: an error", "named and unset, even locally", "the default unset, remote: a warning",
        "the default unset, on this machine: nothing", "the default unset, IPv6 loopback: nothing",
        "the offline judge needs no key"])
def test_an_unset_key_is_an_error_when_named_and_a_warning_for_the_default_on_a_remote_endpoint(
        fields, expected, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("VIGIL_TEST_UNSET_KEY", raising=False)

    assert key_problem(JudgeConfig(name="j", model="m", **fields), 0) == expected


def test_a_set_key_is_sent_and_an_unset_one_is_sent_as_not_needed(monkeypatch):
    config = JudgeConfig(name="j", base_url="http://127.0.0.1:1/v1", model="m", api_key_env="VIGIL_TEST_KEY")
    monkeypatch.delenv("VIGIL_TEST_KEY", raising=False)
    unset = api_key(config)
    monkeypatch.setenv("VIGIL_TEST_KEY", "sk-1")

    assert (unset, api_key(config)) == (NO_KEY, "sk-1")
    assert key_problem(config, 0) is None


def test_config_check_warns_about_the_default_key_and_still_says_ok(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = tmp_path / "vigil.yaml"
    path.write_text("judges: [{name: gpt, base_url: 'https://api.openai.com/v1', model: gpt-4o-mini}]\n",
                    encoding="utf-8")

    result = CliRunner().invoke(main, ["config", "check", str(path)])

    assert result.exit_code == 0, result.output
    assert "warning: judge 'gpt': OPENAI_API_KEY (the default api_key_env) is not set" in result.output
    assert f"{path}: ok (1 judges" in result.output
