"""Credit of the WebLoop roles and the cascaded reward (pure functions; docs/rewards.md defines each number).

A requirement check gives YES, PARTIAL or NO (credit 1, 0.5, 0: WebGen-Bench's credit); a page's
check score S is the mean credit over the instruction's requirements. The Critic's verdicts
(met / partly / unmet) are compared with the checks of the page it criticised (discriminability D)
and credited with the change its refinement made (helpfulness H).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # the command line reads the names below at start-up, without the state's imports
    from webgen_agent.core.state import Step

CriticReward = Literal["d", "h", "dh"]
# step / cascaded, and the same with the function term grounded in the recorded GUI tests' replays
# ("-replay": docs/rewards.md).
RewardKind = Literal["step", "cascaded", "step-replay", "cascaded-replay"]

CREDIT: Mapping[str, float] = {"YES": 1.0, "PARTIAL": 0.5, "NO": 0.0}
# The Critic's words for the check verdicts they claim.
VERDICT_OF_STATUS: Mapping[str, str] = {"met": "YES", "partly": "PARTIAL", "unmet": "NO"}

# WebGen-R1's released weights: code-format (structure) 0.1, appearance 1.0 (VLM grade 0-5).
STRUCTURE_CREDIT = 0.1
APPEARANCE_WEIGHT = 1.0
FUNCTION_SCALE = 5.0  # a check score (0-1) is put on the grade's 0-5 scale


def check_score(verdicts: Sequence[str]) -> float:
    """Mean credit of a page's check verdicts; 0 when there are none."""
    return sum(CREDIT.get(v, 0.0) for v in verdicts) / len(verdicts) if verdicts else 0.0


def discriminability(critic_statuses: Mapping[int, str], check_verdicts: Sequence[str]) -> float:
    """Share of requirements whose critic verdict equals the check's; a skipped requirement disagrees.

    ``critic_statuses`` maps requirement id (position in the requirement list) to met/partly/unmet.
    """
    if not check_verdicts:
        return 0.0
    agree = sum(
        1
        for index, verdict in enumerate(check_verdicts)
        if VERDICT_OF_STATUS.get(critic_statuses.get(index, "")) == verdict
    )
    return agree / len(check_verdicts)


def helpfulness(score_before: float, score_after: float) -> float:
    """Check score of the refined page minus that of the criticised page (-1 .. 1)."""
    return score_after - score_before


def critic_reward(d: float, h: float, kind: CriticReward) -> float:
    if kind == "d":
        return d
    if kind == "h":
        return h
    return d + h


def replay_score(step: Step) -> float | None:
    """Share of the recorded GUI tests that passed when replayed on the step's site; None when none ran.

    A flaky replay counts as not passed; an unmatched one (a locator that found nothing: a
    redesign) is left out, as it says nothing about the function.
    """
    replay = step.get("replay")
    if not replay:
        return None
    judged = replay["passed"] + replay["failed"] + replay["flaky"]
    return replay["passed"] / judged if judged else None


def replay_function(step: Step, gui_score: float) -> float:
    """The function term (0-5) grounded in execution: 5 x the replay score, capped by the GUI grade
    when a GUI test ran; ``gui_score`` when no recorded test was replayed."""
    score = replay_score(step)
    if score is None:
        return gui_score
    grounded = FUNCTION_SCALE * score
    return grounded if step.get("gui_passed") is None else min(gui_score, grounded)


def cascaded_reward(format_ok: bool, scored: Step, *, replay: bool = False) -> float:
    """WebGen-R1-style gated reward of a reply (``scored``: the step whose page it is credited with).

    structure failed (badly formatted reply, scaffold check) -> 0; execution failed ->
    STRUCTURE_CREDIT; else STRUCTURE_CREDIT + appearance (0-5) + function (0-5: 5 x check score when
    checks ran, else the GUI grade).
    """
    if not format_ok or scored["action"] == "malformed":
        return 0.0
    execution: Mapping[str, Any] = scored.get("execution") or {}
    if not execution or execution.get("stage") == "structure" or scored.get("structure_ok") is False:
        return 0.0
    if not execution.get("ok"):
        return STRUCTURE_CREDIT
    appearance = APPEARANCE_WEIGHT * float(scored.get("screenshot_score", 0))
    if scored.get("checks"):
        function = FUNCTION_SCALE * float(scored.get("check_score", 0.0))
    elif replay:
        function = replay_function(scored, float(scored.get("gui_score", 0)))
    else:
        function = float(scored.get("gui_score", 0))
    return STRUCTURE_CREDIT + appearance + function
