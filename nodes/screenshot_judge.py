"""Screenshot-Judge: one VLM call grades the landing page (description, score 1-5, suggestions)."""

from __future__ import annotations

import base64

from langgraph.runtime import Runtime

from webgen_agent.graph.context import AgentContext
from webgen_agent.graph.resources import get_resources
from webgen_agent.graph.state import AgentState
from webgen_agent.nodes import prompts
from webgen_agent.nodes.common import Update, current_step, node, store, usage_record
from webgen_agent.nodes.views import ScreenshotJudgement
from webgen_agent.tools.models import ask_structured

# A step whose screenshot is graded at or below this counts as errored (upstream rule).
ERRORED_SCORE = 2


def judge_messages(requirement: str, png: bytes, visible_text: str) -> list[dict]:
    image = base64.b64encode(png).decode("ascii")
    return [
        {"role": "system", "content": prompts.JUDGE_SYSTEM},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": prompts.judge_user(requirement, visible_text[:3000])},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}},
            ],
        },
    ]


@node("screenshot_judge")
async def screenshot_judge(state: AgentState, runtime: Runtime[AgentContext]) -> Update:
    step = current_step(state)
    blobs = store()
    page = blobs.get_json(step["page"]) if step.get("page") else {}
    messages = judge_messages(state["requirement"], blobs.get(step["screenshot"]), page.get("visible_text", ""))
    url = (step.get("execution") or {}).get("url")
    if url and state.get("run_id"):
        # A good grade leads to the GUI test of this page: its browser session opens meanwhile.
        await get_resources().prepare_gui_session(state["run_id"], step["index"], url, runtime.context)
    answer = await ask_structured(runtime.context.vlm, "vlm", messages, ScreenshotJudgement)
    if answer.value is not None:
        score, description, suggestions = answer.value.score, answer.value.description, answer.value.suggestions
    else:
        score, description, suggestions = 0, f"The screenshot could not be graded: {answer.error}", []
    errored = score <= ERRORED_SCORE
    return {
        "steps": [
            {
                "index": step["index"],
                "screenshot_score": score,
                "description": description,
                "suggestions": suggestions,
                "errored": errored,
                "tokens": {"screenshot_judge": usage_record(answer.usage)},
            }
        ],
        "consecutive_errors": state.get("consecutive_errors", 0) + 1 if errored else 0,
        "_message": f"screenshot {score}/5",
    }
