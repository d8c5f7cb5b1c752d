"""WebGen-RL's observation cut, as a rollout of the upstream profile makes it.

Upstream (RL ``generation.py``): each observation is the turn ``\\n<|im_start|>user\\n{feedback}<|im_end|>``
(l.428), tokenized by the policy's tokenizer with no special tokens added, and cut to its first
``max_obs_length`` = 5,000 tokens (``_process_next_obs`` l.93-106; the run script's l.53). Here the
coder endpoint's own tokenizer counts them (vLLM's /tokenize and /detokenize; in these tests the
scripted server's stand-in tokenizer, a token per whitespace-led word); an endpoint without one falls
back to 4 characters a token, and the run says so as it starts.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.fake_endpoints import fake_endpoint
from webgen_agent.apps.demo import scripted_context
from webgen_agent.apps.scripted.engine import whitespace_tokens
from webgen_agent.apps.scripted.server import ScriptedServer
from webgen_agent.apps.scripted.views import Scenario
from webgen_agent.core.profiles import environment_rules
from webgen_agent.nodes.critic import critic
from webgen_agent.nodes.feedback import (
    CHARS_PER_TOKEN,
    UPSTREAM_OBSERVATION,
    cut_observation,
    observation_cut_warning,
    upstream_feedback,
)
from webgen_agent.tools.endpoints import EndpointEvent, listen

ROLLOUT = environment_rules("upstream", "rollout")
INFERENCE = environment_rules("upstream", "inference")
OPENING = "\n<|im_start|>user\n"
LOG = "\n".join(f"error line {n}: " + "y" * 90 for n in range(400))  # ~40,000 characters, under 500 lines
REQUIREMENT = "Build a page with a long list of sections. " * 700  # 6,300 tokens, ~30,000 characters


def reference_observation_ids(tokenize: Callable[[str], list], feedback: str, max_obs_length: int) -> list:
    """RL ``_process_next_obs`` for one row: the turn's tokens, its first ``max_obs_length`` kept."""
    ids = tokenize(f"\n<|im_start|>user\n{feedback}<|im_end|>")
    return ids[:max_obs_length] if len(ids) > max_obs_length else ids


def failed_start_feedback() -> str:
    step = {
        "index": 3,
        "action": "edit",
        "tests_step": None,
        "screenshot": "png-hash",
        "screenshot_score": 3,
        "gui_score": 0,
        "gui_passed": None,
        "execution": {"install_error": False, "start_error": True},
        "description": "",
        "suggestions": [],
        "visible_error": "",
    }
    return upstream_feedback(REQUIREMENT, step, None, {"server": LOG}, ROLLOUT)  # type: ignore[arg-type]


async def test_rollout_observations_are_cut_at_the_run_scripts_token_budget():
    assert ROLLOUT.observation_tokens == 5000 and INFERENCE.observation_tokens is None
    feedback = failed_start_feedback()
    assert len(feedback) > 5000 * CHARS_PER_TOKEN and UPSTREAM_OBSERVATION.format(feedback).startswith(OPENING)
    with ScriptedServer(Scenario(name="tokenizer")) as server:
        kept = await cut_observation(feedback, 5000, scripted_context(server.base_url).coder)
    # The turn upstream keeps, token for token (its opening counted; its <|im_end|> cut off).
    assert whitespace_tokens(OPENING + kept) == reference_observation_ids(whitespace_tokens, feedback, 5000)
    assert feedback.startswith(kept) and len(kept) < len(feedback)
    assert len(kept) != 5000 * CHARS_PER_TOKEN  # not the characters' estimate
    assert await cut_observation(feedback, None, None) == feedback  # the agent loop cuts nothing


async def test_the_cut_keeps_upstreams_tokens_with_a_byte_level_bpe_tokenizer(tmp_path):
    """The same through a real tokenizer of Qwen's kind (byte-level BPE, ChatML specials), served as
    vLLM serves its model's: the kept feedback re-tokenizes, after the turn's opening, to the very ids
    upstream keeps, although the cut falls inside a word that BPE merges across."""
    pytest.importorskip("transformers")
    from tests.tiny_lm import train_tokenizer

    feedback = failed_start_feedback()
    tokenizer = train_tokenizer([feedback[:3000], "Build a page with a long list of sections."], vocab_size=300)
    tokenizer.save_pretrained(tmp_path / "tokenizer")

    def ids(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    upstream = reference_observation_ids(ids, feedback, 5000)
    assert (
        len(ids(UPSTREAM_OBSERVATION.format(feedback))) > 5000 and ids(OPENING)[-1] == upstream[len(ids(OPENING)) - 1]
    )
    with ScriptedServer(Scenario(name="bpe", tokenizer=str(tmp_path / "tokenizer"))) as server:
        kept = await cut_observation(feedback, 5000, scripted_context(server.base_url).coder)
    assert ids(OPENING + kept) == upstream
    assert feedback.startswith(kept) and kept[-1].isalpha() and feedback[len(kept)].isalpha()  # inside a word


async def test_an_observation_within_the_token_budget_is_not_cut_however_many_characters_it_has():
    feedback = " ".join(f"section-{n:05d}-heading" for n in range(4_000))  # 4,000 tokens, 96,000 characters
    assert len(reference_observation_ids(whitespace_tokens, feedback, 5000)) < 5000
    with ScriptedServer(Scenario(name="tokenizer")) as server:
        assert await cut_observation(feedback, 5000, scripted_context(server.base_url).coder) == feedback
    # Counting characters would have cut it at 20,000.
    assert await cut_observation(feedback, 5000, None) == feedback[: 5000 * CHARS_PER_TOKEN]


async def test_an_endpoint_without_a_tokenizer_cuts_by_characters_and_the_run_says_so():
    feedback = failed_start_feedback()
    with ScriptedServer(Scenario(name="no-tokenizer", tokenizer=False)) as server:
        base_url = server.base_url
        coder = scripted_context(base_url).coder
        assert await cut_observation(feedback, 5000, coder) == feedback[: 5000 * CHARS_PER_TOKEN]
        warning = await observation_cut_warning(coder, ROLLOUT)
        assert await observation_cut_warning(coder, INFERENCE) is None  # nothing is cut there
    assert warning is not None and "offers no tokenizer" in warning and "5,000 tokens" in warning
    assert base_url in warning
    with ScriptedServer(Scenario(name="tokenizer")) as server:
        assert await observation_cut_warning(scripted_context(server.base_url).coder, ROLLOUT) is None
    # An endpoint that cannot be reached now: its first model call says so, not this.
    assert await observation_cut_warning(scripted_context("http://127.0.0.1:9/v1").coder, ROLLOUT) is None


async def test_a_tokenizer_that_refuses_the_text_cuts_it_by_characters_and_says_so():
    """A vLLM server refuses to tokenize a text past its max_model_len (HTTP 400): the run goes on with
    the characters' cut, and the node's progress shows why (kept in the step's endpoint record)."""
    feedback = failed_start_feedback()
    events: list[EndpointEvent] = []
    with ScriptedServer(Scenario(name="short-model", tokenizer_limit=1000)) as server, listen(events.append):
        kept = await cut_observation(feedback, 5000, scripted_context(server.base_url).coder)
    assert kept == feedback[: 5000 * CHARS_PER_TOKEN]
    (event,) = events
    assert event.kind == "tokenizer_unusable" and "HTTP 400" in event.line() and "max_model_len 1000" in event.line()


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("llama-cpp", "answered no tokens"),
        ("no-specials", "did not give back the turn's opening"),
        ("unavailable", "503"),
    ],
)
async def test_a_tokenizer_that_does_not_answer_as_vllms_cuts_by_characters_and_says_so(kind, why):
    """llama.cpp's /tokenize reads `content`, not vLLM's `prompt`, and answers no tokens at all: taken
    at its word, no observation would ever be cut. A tokenizer that decodes without the special tokens
    it counted: the turn's opening would stay in the feedback. Tokenizer routes down for the whole
    patience: the run goes on. Each cuts by characters and says why; the run's start warns of the
    first (the last could not be asked then, and its first model call will say so)."""
    feedback = failed_start_feedback()
    events: list[EndpointEvent] = []
    with fake_endpoint(kind) as base_url, listen(events.append):
        coder = scripted_context(base_url).coder.model_copy(update={"patience_s": 0.5})
        kept = await cut_observation(feedback, 5000, coder)
        warning = await observation_cut_warning(coder, ROLLOUT)
    assert kept == feedback[: 5000 * CHARS_PER_TOKEN]
    (event,) = [e for e in events if e.kind == "tokenizer_unusable"]
    assert why in event.line() and "4 characters a token" in event.line()
    if kind == "llama-cpp":
        assert warning is not None and "cannot be used" in warning and "5,000 tokens" in warning
    else:  # no-specials counts as vLLM's does, so the start has nothing to say
        assert warning is None


async def test_the_rollout_critic_cuts_the_coders_feedback_with_the_coders_tokenizer(node_harness):
    logs = node_harness.store.put_json({"server": LOG})
    execution = {"install_error": False, "start_error": True, "logs": logs, "url": None}
    step = node_harness.step(0, execution=execution, screenshot=node_harness.store.put(b"a PNG"), screenshot_score=3)
    state = node_harness.state(requirement=REQUIREMENT, steps=[step], current=0, edit_step=0)
    run = await node_harness.run(critic, state, profile="upstream", environment="rollout")
    text = node_harness.store.get_text(run.update["feedback"])
    whole = upstream_feedback(REQUIREMENT, step, None, {"server": LOG}, ROLLOUT)
    assert whitespace_tokens(OPENING + text) == reference_observation_ids(whitespace_tokens, whole, 5000)
    loop = await node_harness.run(critic, state, profile="upstream", environment="inference")
    assert len(whitespace_tokens(OPENING + node_harness.store.get_text(loop.update["feedback"]))) > 5000
