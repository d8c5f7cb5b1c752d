"""Settings: environment defaults, per-role overrides, explicit values win, clear errors."""

import pytest

from webgen_agent.core.context import Settings
from webgen_agent.core.errors import ConfigError


def test_roles_default_to_openai_env_and_override_per_role(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://shared:8000/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-shared")
    monkeypatch.setenv("WEBGEN_MODEL", "big")
    monkeypatch.setenv("WEBGEN_VLM_MODEL", "vision")
    monkeypatch.setenv("WEBGEN_VLM_BASE_URL", "http://vlm:9000/v1")
    monkeypatch.setenv("WEBGEN_FEEDBACK_API_KEY", "sk-feedback")
    context = Settings().to_context()
    assert (context.coder.model, context.coder.base_url, context.coder.api_key.get_secret_value()) == (
        "big",
        "http://shared:8000/v1",
        "sk-shared",
    )
    assert (context.vlm.model, context.vlm.base_url) == ("vision", "http://vlm:9000/v1")
    assert context.feedback.api_key.get_secret_value() == "sk-feedback"
    assert context.coder.temperature == 0.5


def test_explicit_values_beat_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://env:1/v1")
    monkeypatch.setenv("WEBGEN_CODER_MODEL", "env-coder")
    monkeypatch.setenv("WEBGEN_MODEL", "env-all")
    settings = Settings(base_url="http://flag:2/v1", coder_model="flag-coder")
    context = settings.to_context(max_steps=3)
    assert context.coder.model == "flag-coder"
    assert context.vlm.base_url == "http://flag:2/v1"
    assert context.max_steps == 3


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OPENAI_BASE_URL": "http://x/v1"}, "No coder model"),
        ({"WEBGEN_MODEL": "m"}, "No endpoint for the coder model"),
        ({"WEBGEN_MODEL": "m", "OPENAI_BASE_URL": "ftp://x"}, "not an http(s) URL"),
    ],
)
def test_missing_or_bad_settings_are_one_line_errors(monkeypatch, env, message):
    for key in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "WEBGEN_MODEL", "OPENAI_MODEL"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError) as info:
        Settings().to_context()
    assert message in str(info.value) and "\n" not in str(info.value)


def test_invalid_limit_is_a_config_error(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://x/v1")
    monkeypatch.setenv("WEBGEN_MODEL", "m")
    with pytest.raises(ConfigError, match="max_steps"):
        Settings().to_context(max_steps=0)
