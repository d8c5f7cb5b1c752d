"""A chat model that keeps the token ids vLLM returns (``ModelSettings.token_ids``). Its own module:
it subclasses langchain-openai's ChatOpenAI, which tools/models.py imports only when a model is called."""

from __future__ import annotations

from typing import Any

import openai
from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI


class TokenIdsChatOpenAI(ChatOpenAI):
    """ChatOpenAI that keeps the token ids vLLM returns for ``return_token_ids`` (``prompt_token_ids``
    and each choice's ``token_ids``) in the message's response_metadata; langchain-openai drops
    response fields it does not know."""

    def _create_chat_result(
        self, response: dict[str, Any] | openai.BaseModel, generation_info: dict[str, Any] | None = None
    ) -> ChatResult:
        result = super()._create_chat_result(response, generation_info)
        data = response if isinstance(response, dict) else response.model_dump()
        for generation, choice in zip(result.generations, data.get("choices") or []):
            generation.message.response_metadata["prompt_token_ids"] = data.get("prompt_token_ids")
            generation.message.response_metadata["token_ids"] = choice.get("token_ids")
        return result
