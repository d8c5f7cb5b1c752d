"""Run settings: the three model roles, limits and modes.

``AgentContext`` is the LangGraph ``context_schema``: plain JSON, shown as an editable form in
LangGraph Studio and passed again on every invoke or resume (LangGraph does not checkpoint it).
``Settings`` reads the environment (pydantic-settings); explicit values (CLI flags, constructor
arguments) beat environment variables.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    AliasChoices,
    BaseModel,
    Field,
    PlainSerializer,
    SecretStr,
    SerializationInfo,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from webgen_agent.core.errors import ConfigError
from webgen_agent.core.loops import LoopName
from webgen_agent.core.names import DEFAULT_DB, DOTENV, ROLES, RUN_DEFAULTS, CriticMode, Role
from webgen_agent.core.price_table import listed_price
from webgen_agent.core.prices import Prices, require_prices
from webgen_agent.core.profiles import EnvironmentName, Profile, profile_rules
from webgen_agent.core.prompt_checkout import read_checkout
from webgen_agent.core.rules import RunRules, run_rules
from webgen_agent.core.views import ReviewPoint

DEFAULT_RUNS_DIR = Path("webgen-runs")


def validation_summary(exc: Exception, limit: int = 3) -> str:
    """A pydantic error as one line naming each bad field (``rules: Input should be a valid list``)."""
    if not isinstance(exc, ValidationError):
        return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    problems = [f"{'.'.join(str(p) for p in error['loc']) or 'value'}: {error['msg']}" for error in exc.errors()]
    more = f" (and {len(problems) - limit} more)" if len(problems) > limit else ""
    return "; ".join(problems[:limit]) + more


_WITH_SECRETS = "webgen_with_secrets"  # the serialization context flag that keeps API keys in a dump


def _api_key_out(value: SecretStr, info: SerializationInfo) -> str:
    """An API key in a dump: empty (read from the environment at call time, as an unset key is),
    so no checkpoint, metadata, run.json, runs table or export ever holds one; ``dump_with_secrets``
    keeps it for handing settings to another process of the same run."""
    context = info.context
    return value.get_secret_value() if isinstance(context, dict) and context.get(_WITH_SECRETS) else ""


# An API key: hidden in repr and logs (SecretStr), left out of every dump; ``.get_secret_value()`` at the call.
ApiKey = Annotated[SecretStr, PlainSerializer(_api_key_out, return_type=str, when_used="always")]


def dump_with_secrets(model: BaseModel) -> str:
    """``model`` as JSON with its API keys: only to hand settings to a worker process of this run (a
    Ray actor), never for anything stored."""
    return model.model_dump_json(context={_WITH_SECRETS: True})


class ModelSettings(BaseModel):
    """One OpenAI-compatible endpoint and how to sample from it."""

    model: str = Field(description="Model name sent to the endpoint.")
    base_url: str = Field(description="OpenAI-compatible base URL, e.g. http://localhost:8000/v1.")
    api_key: ApiKey = Field(
        default=SecretStr(""),
        description="API key; empty means read OPENAI_API_KEY / WEBGEN_<ROLE>_API_KEY at call time. Never stored.",
    )
    temperature: float | None = Field(default=None, description="Sampling temperature.")
    top_p: float | None = Field(default=None, description="Nucleus sampling.")
    max_tokens: int | None = Field(default=None, description="Completion token cap.")
    timeout_s: float = Field(default=600.0, gt=0, description="One call is cut (and retried) after this many seconds.")
    patience_s: float = Field(
        default=180.0, ge=0, description="How long one call waits out 429, 5xx, timeouts and dropped connections."
    )
    retry_initial_s: float = Field(default=1.0, gt=0, description="First backoff wait; doubles on each retry.")
    retry_max_s: float = Field(default=30.0, gt=0, description="Longest backoff wait (a Retry-After may ask more).")
    fallback_model: str = Field(default="", description="Model used once the patience runs out; empty: none.")
    fallback_base_url: str = Field(default="", description="Endpoint of the fallback model; empty: the same endpoint.")
    fallback_api_key: ApiKey = Field(
        default=SecretStr(""), description="API key of the fallback endpoint; empty: the role's key. Never stored."
    )
    logprobs: bool = Field(default=False, description="Ask for token logprobs (kept for training export).")
    token_ids: bool = Field(
        default=False,
        description="Ask for the prompt's and completion's token ids (vLLM's return_token_ids; kept for training export).",
    )


class SandboxSettings(BaseModel):
    """How processes that run generated code are confined (``tools.sandbox``, ``tools.limits``); limits are per command."""

    enabled: bool = Field(
        default=True, description="Run generated code under bubblewrap; False (--no-sandbox) runs it unconfined."
    )
    cpu_s: int = Field(default=900, ge=1, description="CPU seconds per process (RLIMIT_CPU).")
    memory_mb: int = Field(default=4096, ge=64, description="Heap and data per process, MB (RLIMIT_DATA).")
    max_pids: int = Field(default=512, ge=16, description="Processes and threads in one sandbox.")
    file_size_mb: int = Field(default=512, ge=1, description="Largest file a process may write, MB (RLIMIT_FSIZE).")
    workspace_mb: int = Field(default=2048, ge=16, description="Cap on the workspace, node_modules included, MB.")
    sandbox_memory_mb: int = Field(
        default=4096, ge=64, description="Memory of one sandbox, all its processes together, MB (cgroup)."
    )
    cpus: float = Field(default=2.0, gt=0, description="CPUs one sandbox may use, all its processes together (cgroup).")
    tmpfs_mb: int = Field(
        default=512, ge=16, description="Size of each private in-memory folder (/tmp, the home folders), MB."
    )
    own_network: bool = Field(
        default=True,
        description="Generated code gets its own network namespace: it reaches only what the agent relays "
        "(npm's registry and allow_hosts through the agent's proxy); False shares this machine's network.",
    )
    allow_hosts: list[str] = Field(
        default_factory=list,
        description="Hosts installs and shell actions may reach through the agent's proxy besides npm's "
        "registries (--allow-host).",
    )

    @field_validator("allow_hosts")
    @classmethod
    def _plain_hosts(cls, hosts: list[str]) -> list[str]:
        cleaned = [host.strip().strip("[]").rstrip(".").lower() for host in hosts]
        for host in cleaned:
            if not host or any(c in host for c in "/@ \t") or host.count(":") == 1:
                raise ValueError(f"--allow-host takes a host name or address, not {host!r} (no scheme, path or port)")
        return cleaned


class AgentContext(BaseModel):
    """Everything a run needs besides its input; JSON so Studio can edit it."""

    model: str = Field(
        default="",
        description="Model for every role that names none; empty: WEBGEN_<ROLE>_MODEL, else WEBGEN_MODEL "
        "from the server's environment.",
    )
    base_url: str = Field(
        default="",
        description="Endpoint for every role that names none; empty: WEBGEN_<ROLE>_BASE_URL, else "
        "OPENAI_BASE_URL from the server's environment.",
    )
    coder: ModelSettings = Field(description="Writes and repairs the code (Generator, Refiner).")
    vlm: ModelSettings = Field(description="Grades screenshots and drives the GUI agent.")
    feedback: ModelSettings = Field(description="Writes the GUI test, judges its run, critiques.")
    max_steps: int = Field(default=RUN_DEFAULTS.max_steps, ge=1, description="Coder steps before the run stops.")
    error_limit: int = Field(
        default=RUN_DEFAULTS.error_limit, ge=1, description="Consecutive errored steps before backtracking."
    )
    backtrack: bool = Field(default=True, description="Return to the best step after error_limit errors.")
    stall_steps: int = Field(
        default=RUN_DEFAULTS.stall_steps,
        ge=0,
        description="Loop governor (default profile): steps without a better score before the run goes back "
        "to its best step, and after that stops; a step with the files of an earlier one counts at once. "
        "0 turns it off (docs/performance.md says how the default was chosen).",
    )
    select_best: bool = Field(default=True, description="Finish with the best step, not the last one.")
    appearance_threshold: int = Field(
        default=4, ge=1, le=5, description="Screenshot score from which the GUI test runs."
    )
    critic: CriticMode = Field(default=RUN_DEFAULTS.critic, description="template (upstream) or llm (WebLoop).")
    gui_max_actions: int = Field(default=RUN_DEFAULTS.gui_max_actions, ge=1, description="GUI agent action budget.")
    allow_shell: bool = Field(default=False, description="Run shell actions the coder writes.")
    profile: Profile = Field(
        default="default",
        description="upstream: WebGen-Agent's rules, step for step; default: this project's (docs/fidelity.md).",
    )
    prompts_from: str | None = Field(
        default=None,
        description="upstream profile: read WebGen-Agent's own prompts from this checkout of it (parsed as "
        "data, never imported or run); empty: the project's words for them (docs/fidelity.md).",
    )
    environment: EnvironmentName = Field(
        default="inference",
        description="inference: an agent run's observations; rollout: a Step-GRPO rollout's (the "
        "upstream profile's differ, docs/fidelity.md). `rollout` sets it.",
    )
    viewport_width: int = Field(default=1280, ge=320, description="Capture and GUI-agent window (upstream: 1024).")
    viewport_height: int = Field(default=800, ge=240, description="Capture and GUI-agent window (upstream: 768).")
    install_timeout_s: float = Field(default=300.0, description="npm install deadline.")
    start_timeout_s: float = Field(default=60.0, description="Dev server must answer HTTP by then.")
    page_timeout_s: float = Field(default=20.0, description="Page load deadline for screenshots.")
    offline_pages: bool = Field(
        default=False,
        description="Pages reach their own origin only: no public internet subresources (CDN scripts and styles, web fonts, remote images); local and private addresses are refused either way.",
    )
    gui_timeout_s: float = Field(default=300.0, description="Whole GUI-test deadline.")
    chromium: str = Field(default="", description="Chromium executable; empty = WEBGEN_CHROMIUM or PATH.")
    runs_dir: str = Field(default=str(DEFAULT_RUNS_DIR), description="Output folders go under here.")
    sandbox: SandboxSettings = Field(
        default_factory=SandboxSettings, description="The sandbox for generated code and its limits."
    )
    loop: LoopName = Field(default=RUN_DEFAULTS.loop, description="webgen-agent, webloop or single (docs/loops.md).")
    critique_rounds: int = Field(
        default=RUN_DEFAULTS.critique_rounds, ge=1, description="webloop: Critic + Refiner rounds after the Generator."
    )
    shared_policy: bool = Field(
        default=False, description="webloop: the coder model answers as Critic too (one policy in every role)."
    )
    requirement_checks: bool | None = Field(
        default=None,
        description="Check each requirement with the GUI agent after every judged page; None = on "
        "for webloop and single, off for webgen-agent.",
    )
    replay_tests: bool | None = Field(
        default=None,
        description="Record passing GUI tests as Playwright tests and replay them after each later edit; "
        "None = the profile's rule (default: on, upstream: off).",
    )
    scaffold: str = Field(default="", description="Project scaffold the workspace starts from (empty: none).")
    start_from: str = Field(
        default="",
        description="A project folder the run starts from (run --from): step 0 is its files as they are, run and "
        "judged with no coder call, and the loop improves them toward the requirement (empty: the requirement alone).",
    )
    max_pages: int = Field(
        default=RUN_DEFAULTS.max_pages, ge=1, description="Pages captured per step, the landing page included."
    )
    review: list[ReviewPoint] = Field(
        default_factory=list,
        description="Where the run stops for a human (interrupt): plan, critique, shell, finalize (docs/review.md).",
    )
    prices: Prices = Field(default_factory=Prices, description="USD per million tokens, per role (docs/costs.md).")
    budget_usd: float | None = Field(
        default=None, gt=0, description="Stop at the next step boundary once the run cost this much (USD)."
    )
    budget_tokens: int | None = Field(
        default=None, ge=1, description="Stop at the next step boundary once the run used this many tokens."
    )

    @model_validator(mode="before")
    @classmethod
    def _complete_roles(cls, data: object) -> object:
        """A role left out (or without its model / endpoint) takes the context's ``model`` /
        ``base_url``, else the environment's, as the CLI does: a Studio run needs only a requirement."""
        if not isinstance(data, dict) or all(_role_complete(data.get(role)) for role in ROLES):
            return data
        return {**data, **{role: _completed_role(data, role) for role in ROLES if not _role_complete(data.get(role))}}

    @model_validator(mode="before")
    @classmethod
    def _profile_viewport(cls, data: object) -> object:
        return with_profile_viewport(data)

    @property
    def rules(self) -> RunRules:
        """This run's rules, resolved once (core/rules.py): the profile's, the environment's, the
        loop's, and ``replay_tests`` / ``requirement_checks`` decided (the run's own, else the rule's)."""
        return run_rules(self.profile, self.environment, self.loop, self.replay_tests, self.requirement_checks)

    @model_validator(mode="after")
    def _prompts_checkout(self) -> AgentContext:
        """A checkout's prompts replace the upstream profile's words: it must hold every one it needs."""
        if self.prompts_from:
            if not self.rules.profile.checkout_prompts:
                raise ConfigError(
                    "--prompts-from (prompts_from) reads WebGen-Agent's prompts: use it with --profile upstream"
                )
            read_checkout(self.prompts_from)  # a missing prompt: PromptsFromError, one line
        return self

    @model_validator(mode="after")
    def _one_start(self) -> AgentContext:
        if self.scaffold and self.start_from:
            raise ConfigError("--from (start_from) and --scaffold both say where the run starts: give one of them")
        return self

    @model_validator(mode="after")
    def _priced_budget(self) -> AgentContext:
        """A budget in USD with an unknown price could never be kept: refused before the run starts."""
        if self.budget_usd is not None:
            require_prices(self.prices, "--budget-usd")
        return self


def with_profile_viewport(data: object) -> object:
    """Settings (a dict with ``profile``) with the profile's viewport when it has one of its own
    (upstream: WebGen-Agent's 1024x768) and the settings give none: the rule of the run context
    and of the benchmark's evaluation (apps/bench/config.py)."""
    if not isinstance(data, dict) or data.get("profile") is None:
        return data
    try:
        viewport = profile_rules(str(data["profile"])).viewport
    except ValueError:  # an unknown profile: the field's own validation says so
        return data
    if viewport is not None:
        data = {"viewport_width": viewport[0], "viewport_height": viewport[1], **data}
    return data


def _role_complete(given: object) -> bool:
    if isinstance(given, ModelSettings):
        return True
    return isinstance(given, dict) and bool(given.get("model")) and bool(given.get("base_url"))


def _completed_role(data: dict[str, Any], role: Role) -> dict[str, Any]:
    """``role``'s settings: what the context gives, the rest from the context's ``model`` /
    ``base_url``, then the environment (``Settings``, the CLI's variables and precedence)."""
    given = data.get(role)
    own: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
    endpoint = {key: value for key in ("model", "base_url") if (value := own.pop(key, "") or data.get(key) or "")}
    try:
        from_env = Settings().model_copy(update={f"{role}_{key}": value for key, value in endpoint.items()})
        filled = from_env.role(role)
    except ConfigError as exc:
        env = role.upper()
        raise ValueError(
            f"{exc} In a server run (Studio): fill model / base_url (or {role}.model / {role}.base_url) in "
            f"the run's context, or set WEBGEN_MODEL / WEBGEN_{env}_MODEL and OPENAI_BASE_URL / "
            f"WEBGEN_{env}_BASE_URL in the server's environment."
        ) from None
    # The key stays out (read from the environment at call time, see ``api_key_for``).
    return {**filled.model_dump(exclude={"api_key", "fallback_api_key"}), **own}


# Chromium's headless shell first: the same Blink, without the full browser's UI layer, crash reporter
# and storage service, so a demo run's Chromium spends about a fifth less CPU (docs/performance.md,
# "a ninth look"). Debian's binary is named by path: its /usr/bin entry is a shell script that would
# stay behind as the browser's parent.
HEADLESS_SHELLS = ("/usr/lib/chromium/chromium-headless-shell",)
CHROMIUM_NAMES = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium(explicit: str = "") -> str:
    """The Chromium to launch: explicit value, then WEBGEN_CHROMIUM, then a headless shell, then PATH."""
    for candidate in (explicit, os.environ.get("WEBGEN_CHROMIUM", "")):
        if candidate:
            if not Path(candidate).exists():
                raise ConfigError(f"Chromium not found at {candidate!r} (set WEBGEN_CHROMIUM).")
            return candidate
    for path in HEADLESS_SHELLS:
        if os.access(path, os.X_OK):
            return path
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise ConfigError(
        "No Chromium found on PATH; install it (apt install chromium-headless-shell) or set WEBGEN_CHROMIUM."
    )


class Settings(BaseSettings):
    """Environment + explicit overrides; ``to_context()`` checks completeness."""

    # The variables may also stand in a .env file in the working folder (the environment beats it;
    # langgraph.json points Studio at the same file).
    model_config = SettingsConfigDict(
        env_prefix="WEBGEN_", extra="ignore", populate_by_name=True, env_file=DOTENV, env_file_encoding="utf-8"
    )

    base_url: str = Field(default="", validation_alias=AliasChoices("base_url", "OPENAI_BASE_URL"))
    api_key: ApiKey = Field(default=SecretStr(""), validation_alias=AliasChoices("api_key", "OPENAI_API_KEY"))
    model: str = Field(default="", validation_alias=AliasChoices("model", "WEBGEN_MODEL", "OPENAI_MODEL"))
    coder_model: str = ""
    coder_base_url: str = ""
    coder_api_key: ApiKey = SecretStr("")
    vlm_model: str = ""
    vlm_base_url: str = ""
    vlm_api_key: ApiKey = SecretStr("")
    feedback_model: str = ""
    feedback_base_url: str = ""
    feedback_api_key: ApiKey = SecretStr("")
    fallback_model: str = ""
    fallback_base_url: str = ""
    coder_fallback_model: str = ""
    coder_fallback_base_url: str = ""
    vlm_fallback_model: str = ""
    vlm_fallback_base_url: str = ""
    feedback_fallback_model: str = ""
    feedback_fallback_base_url: str = ""
    patience: float | None = Field(default=None, ge=0, description="Seconds one model call waits out endpoint trouble.")
    model_timeout: float | None = Field(default=None, gt=0, description="Seconds before one model call is cut.")
    coder_temperature: float = RUN_DEFAULTS.coder_temperature
    coder_top_p: float | None = None
    db: str = str(DEFAULT_DB)
    chromium: str = ""
    deps_cache: str = Field(default="", description="Shared node_modules cache (default: beside the database).")
    # USD per million tokens: for every role, then per role (docs/costs.md); None: unknown.
    price_in: float | None = Field(default=None, ge=0)
    price_out: float | None = Field(default=None, ge=0)
    coder_price_in: float | None = Field(default=None, ge=0)
    coder_price_out: float | None = Field(default=None, ge=0)
    vlm_price_in: float | None = Field(default=None, ge=0)
    vlm_price_out: float | None = Field(default=None, ge=0)
    feedback_price_in: float | None = Field(default=None, ge=0)
    feedback_price_out: float | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _strip(self) -> Settings:
        for name, value in list(self.__dict__.items()):
            if isinstance(value, str):
                object.__setattr__(self, name, value.strip())
        return self

    def role(self, role: Role) -> ModelSettings:
        model = getattr(self, f"{role}_model") or self.model
        base_url = getattr(self, f"{role}_base_url") or self.base_url
        env = role.upper()
        if not model:
            raise ConfigError(
                f"No {role} model: pass --model (every role) or --{role}-model, or set WEBGEN_MODEL or "
                f"WEBGEN_{env}_MODEL."
            )
        if not base_url:
            raise ConfigError(
                f"No endpoint for the {role} model: pass --base-url / --{role}-base-url "
                f"or set OPENAI_BASE_URL / WEBGEN_{env}_BASE_URL."
            )
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"The {role} endpoint {base_url!r} is not an http(s) URL.")
        fallback_base_url = getattr(self, f"{role}_fallback_base_url") or self.fallback_base_url
        if fallback_base_url and not fallback_base_url.startswith(("http://", "https://")):
            raise ConfigError(f"The {role} fallback endpoint {fallback_base_url!r} is not an http(s) URL.")
        limits: dict[str, float] = {}
        if self.patience is not None:
            limits["patience_s"] = self.patience
        if self.model_timeout is not None:
            limits["timeout_s"] = self.model_timeout
        return ModelSettings.model_validate(
            {
                "model": model,
                "base_url": base_url,
                "api_key": _given(getattr(self, f"{role}_api_key")) or self.api_key,
                "temperature": self.coder_temperature if role == "coder" else None,
                "top_p": self.coder_top_p if role == "coder" else None,
                "fallback_model": getattr(self, f"{role}_fallback_model") or self.fallback_model,
                "fallback_base_url": fallback_base_url,
                **limits,
            }
        )

    def prices(self) -> Prices:
        """The prices given (role's own, else the one for every role), else the model's published price
        (``core/price_table.py``); the rest stay unknown."""

        def pick(role: Role, side: str) -> float | None:
            own = getattr(self, f"{role}_price_{side}")
            given = own if own is not None else getattr(self, f"price_{side}")
            if given is not None:
                return float(given)
            listed = listed_price(getattr(self, f"{role}_model") or self.model)
            return None if listed is None else listed[0 if side == "in" else 1]

        return Prices.model_validate(
            {role: {"input_usd_per_mtok": pick(role, "in"), "output_usd_per_mtok": pick(role, "out")} for role in ROLES}
        )

    def to_context(self, **overrides: Any) -> AgentContext:
        """Build the run context; raises ConfigError (one line) when a role is incomplete."""
        roles = {role: self.role(role) for role in ROLES}
        try:
            return AgentContext.model_validate(
                {**roles, "chromium": self.chromium, "prices": self.prices(), **overrides}
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            if first["type"] == "value_error" and isinstance(first.get("ctx", {}).get("error"), ConfigError):
                raise ConfigError(str(first["ctx"]["error"])) from None
            raise ConfigError(f"Invalid setting {where}: {first['msg']}") from None


def _given(key: SecretStr | str) -> SecretStr | str:
    """The key when one is set, else "" (a SecretStr of "" is an unset key)."""
    return key if (key.get_secret_value() if isinstance(key, SecretStr) else key) else ""


def api_key_for(settings: ModelSettings, role: Role) -> str:
    """The key to send, in plain text for the client: the context's, else the role's env var, else OPENAI_API_KEY.

    Local endpoints (vLLM, llama.cpp) accept any key, so a placeholder is used when none is set.
    """
    return (
        settings.api_key.get_secret_value()
        or os.environ.get(f"WEBGEN_{role.upper()}_API_KEY", "")
        or os.environ.get("OPENAI_API_KEY", "")
        or "not-needed"
    )
