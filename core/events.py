"""Progress events a run streams to its host (``stream_mode="custom"``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from webgen_agent.core.views import Grade


class ProgressEvent(BaseModel):
    """Custom stream event a host app can show (``stream_mode="custom"``)."""

    node: str
    step: int | None = None
    phase: Literal["start", "end", "wait"] = Field(
        default="end", description="wait: a model call is waiting out its endpoint (message says why and how long)."
    )
    seconds: float | None = None
    screenshot_score: Grade | None = None
    gui_score: Grade | None = None
    errored: bool | None = None
    message: str = Field(default="", description="Short human-readable line.")
    warning: str = Field(default="", description="Something the user must know about the whole run (shown apart).")
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = Field(
        default=None, description="USD the node's model calls cost; None when a price is unknown or no call was made."
    )
    priced: bool = Field(
        default=True, description="False when a call of the node had no known price, or came without token counts."
    )
    uncounted_calls: int = Field(default=0, description="The node's model calls that came without token counts.")
