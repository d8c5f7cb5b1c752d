"""browser-use's side of a scripted agent step: a page listing and state message shaped like
browser-use 0.13's, and the action model a real browser-use agent validates replies with."""

from __future__ import annotations

from pydantic import BaseModel

LISTING = """<page_stats>0 links, 3 interactive</page_stats>
Interactive elements:
[Start of page]
My todos
|SHADOW(open)|[4]<input id=new-item placeholder=What needs doing? />
[6]<button id=add />
\tAdd item
*[7]<button aria-label=Remove Buy milk />
\tx
[9]<input type=checkbox name=done-all />
Todo: Buy milk
[End of page]"""


def agent_state_message(step: int, listing: str = LISTING) -> str:
    """A user message shaped like browser-use 0.13's per-step state message."""
    return (
        "<user_request>\nAdd an item\n</user_request>\n\n<agent_history>\n</agent_history>\n\n"
        f"<browser_state>\n{listing}\n</browser_state>\n"
        f"<step_info>Step{step + 1} maximum:15\nToday:2026-01-01</step_info>\n"
    )


def browser_use_output_model(done_only: bool = False) -> type[BaseModel]:
    from webgen_agent.tools.gui_agent import configure_browser_use_env

    configure_browser_use_env()
    from browser_use.agent.views import AgentOutput
    from browser_use.tools.service import Tools

    tools = Tools()
    actions = tools.registry.create_action_model(include_actions=["done"] if done_only else None, page_url="http://x/")
    return AgentOutput.type_with_custom_actions(actions)
