"""Evaluation settings: the evaluation's own model roles and limits, separate from the agent's.

Three roles, because the published protocol uses two different models (a Qwen2.5-VL GUI agent and
a GPT-4o appearance grader) and this project adds a third for verdicts the agent did not give:

- ``agent``: drives the GUI agent through each test case;
- ``appearance``: grades the landing page 1-5 (defaults to the ``agent`` model);
- ``feedback``: turns a GUI run into a verdict when the agent's own answer is missing or unclear.

Each defaults to the agent's settings for the matching role (vlm, vlm, feedback), so a run with no
``--eval-*`` flag evaluates with the models it generated with.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from webgen_agent.apps.bench.modes import VerdictMode
from webgen_agent.core.context import (
    AgentContext,
    ModelSettings,
    Role,
    SandboxSettings,
    Settings,
    with_profile_viewport,
)
from webgen_agent.core.errors import ConfigError


class EvalSettings(BaseModel):
    """Everything the evaluation needs besides the records and the sites."""

    agent: ModelSettings = Field(description="Drives the GUI agent through each test case.")
    appearance: ModelSettings = Field(description="Grades the landing page's appearance 1-5.")
    feedback: ModelSettings = Field(description="Judges a GUI run when the agent's answer is not usable.")
    verdict: VerdictMode = Field(
        default="webgen-bench",
        description="webgen-bench: WebGen-Bench's rule, YES anywhere in the agent's final answer, else "
        "PARTIAL anywhere, else NO; strict: the answer must start with YES, PARTIAL or NO, the feedback "
        "model judges otherwise; feedback: the feedback model always decides.",
    )
    max_actions: int = Field(default=15, ge=1, description="GUI agent action budget per test case.")
    # WebVoyager's waits alone come to 187 s in a case that types 14 times; 600 s leaves its 15 model
    # calls about 27 s each before the deadline cuts a run that upstream's agent would finish.
    case_timeout_s: float = Field(default=600.0, gt=0, description="Whole GUI run deadline per test case.")
    install_timeout_s: float = Field(default=300.0, gt=0, description="npm install deadline per attempt.")
    start_timeout_s: float = Field(default=60.0, gt=0, description="The site must answer HTTP by then.")
    page_timeout_s: float = Field(default=30.0, gt=0, description="Landing-page load deadline for the screenshot.")
    offline_pages: bool = Field(
        default=False,
        description="Pages reach their own origin only: no public internet subresources (CDN scripts and styles, web fonts, remote images); local and private addresses are refused either way.",
    )
    viewport_width: int = Field(default=1280, ge=320)
    viewport_height: int = Field(default=800, ge=240)
    chromium: str = Field(default="", description="Chromium executable; empty = WEBGEN_CHROMIUM or PATH.")
    workers: int = Field(default=2, ge=1, description="Sites evaluated at once, and GUI sessions at once.")
    sandbox: SandboxSettings = Field(
        default_factory=SandboxSettings, description="The sandbox each site is installed and started in."
    )

    def model_names(self) -> dict[str, str]:
        return {"agent": self.agent.model, "appearance": self.appearance.model, "feedback": self.feedback.model}


class EvalModelFlags(BaseModel):
    """The ``--eval-*`` model flags; None = take the agent's setting."""

    vlm_model: str | None = None
    appearance_model: str | None = None
    feedback_model: str | None = None
    base_url: str | None = None
    appearance_base_url: str | None = None
    api_key: str | None = None


def _role(
    settings: Settings, role: Role, *, model: str | None, base_url: str | None, api_key: str | None
) -> ModelSettings:
    update = {
        f"{role}_{name}": value
        for name, value in (("model", model), ("base_url", base_url), ("api_key", api_key))
        if value
    }
    try:
        return settings.model_copy(update=update).role(role)
    except ConfigError as exc:
        raise ConfigError(f"evaluation: {exc} (or the --eval-* flags)") from None


def eval_settings(
    settings: Settings, flags: EvalModelFlags, *, profile: str | None = None, **limits: object
) -> EvalSettings:
    """Evaluation roles from the ``--eval-*`` flags, falling back to the agent's settings; at the
    viewport of ``profile`` when it has one of its own (the run context's rule)."""
    agent = _role(settings, "vlm", model=flags.vlm_model, base_url=flags.base_url, api_key=flags.api_key)
    appearance = _role(
        settings,
        "vlm",
        model=flags.appearance_model or flags.vlm_model,
        base_url=flags.appearance_base_url or flags.base_url,
        api_key=flags.api_key,
    )
    feedback = _role(settings, "feedback", model=flags.feedback_model, base_url=flags.base_url, api_key=flags.api_key)
    return EvalSettings.model_validate(
        {
            "agent": agent,
            "appearance": appearance,
            "feedback": feedback,
            "chromium": settings.chromium,
            **_viewport(profile, {k: v for k, v in limits.items() if v is not None}),
        }
    )


def _viewport(profile: str | None, limits: dict[str, object]) -> dict[str, object]:
    given = with_profile_viewport({"profile": profile, **limits})
    assert isinstance(given, dict)
    return {k: v for k, v in given.items() if k != "profile"}


class BenchSetup(BaseModel):
    """What every actor of one benchmark invocation needs (sent once, when it starts)."""

    out_dir: str
    name: str
    eval_settings: EvalSettings
    context: AgentContext | None = Field(default=None, description="None: evaluate sites made elsewhere.")
    retry_errors: bool = False
